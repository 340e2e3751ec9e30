/* The quantize pass: quantized regions to integer ops (libcore/ops/qint.h).
 *
 * A QDQ model computes in float between DequantizeLinear (DQ) and
 * QuantizeLinear (Q) nodes. Where an op's inputs all come from DQ nodes and
 * its result goes only to a Q (through a Relu or Clip at most), the three
 * collapse into one integer op whose requantisation has a multiplier and
 * shift fixed here:
 *
 *   Conv, Gemm, MatMul          -> QiConv, QiMatMul (weights stay int8)
 *   Add, Mul                    -> QiAdd, QiMul
 *   AveragePool, GlobalAveragePool (no padding), spatial ReduceMean -> QiAvgPool
 *   a chain of pointwise ops with scalar constants -> QiLut (a table)
 *   Softmax (rows up to 256)    -> QiSoftmax (a table of exponentials)
 *   layout ops, MaxPool, Concat of one scale -> the same op on the integers,
 *                                  the DQ moved after it
 *   QLinearConv, QLinearMatMul with constant scales -> QiConv, QiMatMul
 *   Q(DQ(q))                    -> q, or QiRequant where the scales differ
 *   the Q of a float (graph inputs) -> QiQuantize (a multiplication)
 *
 * What does not match stays float: a float island between its DQ and Q
 * nodes (mc_quant_islands lists them). It runs first in each round of the
 * freezing passes, before fold would turn the weights' DQ into float
 * constants. Scales must be finite and positive: the model is refused
 * otherwise, naming the node. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_edit.h"
#include "../libcore/ops/ops.h"
#include "../libcore/ops/qint.h"
#include "../libcore/ops/quant.h"

/* A DQ or Q node's parameters, when they are constants. */
typedef struct {
	int node;        /* the DQ or Q node */
	int q;           /* the integer value (DQ's input, Q's output) */
	mc_dtype type;   /* int8 or uint8 */
	int axis;        /* -1: per tensor */
	size_t count;    /* scales */
	const mc_tensor *scale, *zp;
} qparam;

static double scale_at(const qparam *p, size_t i)
{
	return mc_get_f(p->scale, p->count == 1 ? 0 : i);
}

static int64_t zp_at(const qparam *p, size_t i)
{
	return p->zp ? mc_get_i(p->zp, p->zp->numel == 1 ? 0 : i) : 0;
}

/* Scales must be finite and positive; 0 on success. */
static int check_scales(const mc_graph *g, const mc_node *n)
{
	if (n->n_inputs < 2 || n->inputs[1] < 0)
		return 0;
	const mc_tensor *s = g->values[n->inputs[1]].konst;
	for (size_t i = 0; s && i < s->numel; i++) {
		double v = mc_get_f(s, i);
		if (!(v > 0) || !isfinite(v))
			return mc_node_error(n, "scale %g at index %zu is not a finite positive number", v, i);
	}
	return 0;
}

/* The parameters of DQ/Q node i if they are constants, 8-bit, per tensor
 * or per axis, with no blocks. */
static bool qparam_of(const mc_graph *g, int i, qparam *p)
{
	const mc_node *n = &g->nodes[i];
	if (n->id != MC_OP_DequantizeLinear && n->id != MC_OP_QuantizeLinear)
		return false;
	const qdq_params *qp = n->params;
	bool dq = n->id == MC_OP_DequantizeLinear;
	int iv = n->inputs[0], ov = n->outputs[0];
	if (!qp || qp->block_size || iv < 0 || ov < 0 || n->inputs[1] < 0)
		return false;
	const mc_value *x = &g->values[iv], *y = &g->values[ov];
	memset(p, 0, sizeof *p);
	p->node = i;
	p->q = dq ? iv : ov;
	p->type = dq ? x->dtype : y->dtype;
	p->scale = g->values[n->inputs[1]].konst;
	p->zp = n->n_inputs > 2 && n->inputs[2] >= 0 ? g->values[n->inputs[2]].konst : NULL;
	if ((p->type != MC_INT8 && p->type != MC_UINT8) || !p->scale ||
	    (n->n_inputs > 2 && n->inputs[2] >= 0 && !p->zp) || (dq ? y : x)->dtype != MC_FLOAT)
		return false;
	p->count = p->scale->numel;
	p->axis = -1;
	if (p->zp && p->zp->numel != 1 && p->zp->numel != p->count)
		return false;
	if (p->count != 1 || p->scale->shape.rank == 1) {
		int rank = x->shape.rank;
		int64_t axis = qp->axis < 0 ? qp->axis + rank : qp->axis;
		if (p->count != 1 && (axis < 0 || axis >= rank || x->shape.dims[axis] != (int64_t)p->count))
			return false;
		if (p->count != 1)
			p->axis = (int)axis;
	}
	return true;
}

/* ---- pass state ---- */

typedef struct {
	mc_graph *g;
	int *uses;        /* per value */
	bool *dead;       /* per node */
	int changes;
	bool failed;      /* an error was reported: the pass fails */
} qpass;

/* k new nodes at index `at` (ge_splice_nodes): the marks from `at` on move
 * up by k. */
static void insert_marks(qpass *s, int at, int k)
{
	int n = s->g->n_nodes; /* already counts the new nodes */
	s->dead = realloc(s->dead, (size_t)n + 1);
	MC_ASSERT(s->dead);
	memmove(s->dead + at + k, s->dead + at, (size_t)(n - at - k));
	memset(s->dead + at, 0, (size_t)k);
}

/* The DQ producing value v, if any. */
static bool dq_of(const qpass *s, int v, qparam *p)
{
	if (v < 0 || s->g->values[v].producer < 0)
		return false;
	int i = s->g->values[v].producer;
	return !s->dead[i] && s->g->nodes[i].id == MC_OP_DequantizeLinear && qparam_of(s->g, i, p);
}

static bool per_tensor_dq(const qpass *s, int v, qparam *p)
{
	return dq_of(s, v, p) && p->axis < 0;
}

/* The node reading value v, if it is its only use. */
static int only_reader(const qpass *s, int v)
{
	if (v < 0 || s->uses[v] != 1 || ge_is_graph_output(s->g, v))
		return -1;
	for (int i = 0; i < s->g->n_nodes; i++) {
		const mc_node *n = &s->g->nodes[i];
		for (int k = 0; !s->dead[i] && k < n->n_inputs; k++)
			if (n->inputs[k] == v)
				return i;
	}
	return -1;
}

/* The per-tensor Q that is value v's only reader. */
static bool q_after(const qpass *s, int v, qparam *p)
{
	int r = only_reader(s, v);
	return r >= 0 && s->g->nodes[r].inputs[0] == v && qparam_of(s->g, r, p) && p->axis < 0;
}

/* ---- making nodes ---- */

static mc_attr int_attr(const char *name, int64_t v)
{
	return (mc_attr){.name = mc_xstrdup(name), .type = MC_ATTR_INT, .i = v};
}

static mc_attr copy_attr(const mc_attr *a)
{
	mc_attr c = *a;
	c.name = mc_xstrdup(a->name);
	c.s = a->s ? mc_xstrdup(a->s) : NULL;
	c.t = NULL;
	c.g = NULL;
	c.floats = NULL;
	c.strings = NULL;
	c.ints = a->n && a->ints ? mc_xmalloc(a->n * sizeof *c.ints) : NULL;
	for (size_t i = 0; c.ints && i < a->n; i++)
		c.ints[i] = a->ints[i];
	return c;
}

#define MAX_ATTRS 24

typedef struct {
	mc_node n;
	mc_attr attrs[MAX_ATTRS];
	int n_attrs;
} nodebuf;

static void nb_init(nodebuf *b, const mc_graph *g, mc_opid id, const char *name, const int *in,
                    int n_in, int out)
{
	memset(b, 0, sizeof *b);
	b->n.name = mc_xstrdup(name);
	b->n.domain = mc_xstrdup("");
	mc_node_set_op(&b->n, id, g->opset);
	b->n.n_inputs = n_in;
	b->n.inputs = mc_xmalloc(((size_t)n_in + 1) * sizeof *b->n.inputs);
	memcpy(b->n.inputs, in, (size_t)n_in * sizeof *in);
	b->n.n_outputs = 1;
	b->n.outputs = mc_xmalloc(sizeof *b->n.outputs);
	b->n.outputs[0] = out;
}

static void nb_attr(nodebuf *b, mc_attr a)
{
	MC_ASSERT(b->n_attrs < MAX_ATTRS);
	b->attrs[b->n_attrs++] = a;
}

/* The clamp and output type of a requantising op writing q's value. */
static void nb_output(nodebuf *b, const qparam *q, int64_t lo, int64_t hi)
{
	nb_attr(b, int_attr("y_zero_point", zp_at(q, 0)));
	nb_attr(b, int_attr("lo", lo));
	nb_attr(b, int_attr("hi", hi));
	nb_attr(b, int_attr("to", q->type));
}

/* Parses and types the node; false (node freed, nothing reported) if the
 * registry refuses it, which the caller treats as no match. */
static bool nb_finish(nodebuf *b, mc_graph *g)
{
	mc_node *n = &b->n;
	n->n_attrs = b->n_attrs;
	n->attrs = mc_xcalloc((size_t)b->n_attrs + 1, sizeof *n->attrs);
	memcpy(n->attrs, b->attrs, (size_t)b->n_attrs * sizeof *b->attrs);
	const mc_value *in[16] = {0};
	mc_value *out[1] = {&g->values[n->outputs[0]]};
	MC_ASSERT(n->n_inputs <= 16);
	for (int k = 0; k < n->n_inputs; k++)
		in[k] = n->inputs[k] >= 0 ? &g->values[n->inputs[k]] : NULL;
	mc_infer_ctx c = {.node = n, .graph = g, .n_in = n->n_inputs, .n_out = 1, .in = in, .out = out};
	if (!n->op || (n->op->parse && n->op->parse(n)) || n->op->infer(&c)) {
		mc_node_free(n);
		return false;
	}
	return true;
}

/* Node `pos` becomes b's node (the old one freed); its output's producer. */
static void replace_node(qpass *s, int pos, nodebuf *b)
{
	mc_node_free(&s->g->nodes[pos]);
	s->g->nodes[pos] = b->n;
	s->g->values[b->n.outputs[0]].producer = pos;
	s->changes++;
}

/* Types node `at` again (its inputs changed to integers) and makes it its
 * outputs' producer; false, the pass failing, if its op refuses them. */
static bool retype(qpass *s, int at)
{
	mc_graph *g = s->g;
	if (mc_infer_node(g, at)) {
		mc_error("quantize: %s cannot run on the integers of its quantized input",
		         g->nodes[at].name);
		s->failed = true;
		return false;
	}
	for (int k = 0; k < g->nodes[at].n_outputs; k++)
		if (g->nodes[at].outputs[k] >= 0)
			g->values[g->nodes[at].outputs[k]].producer = at;
	return true;
}

static int add_const(mc_graph *g, const char *base, mc_tensor *t)
{
	return ge_add_const(g, base, t);
}

static mc_tensor *vec_new(mc_dtype t, int64_t count)
{
	mc_shape s = {1, {count}};
	mc_tensor *r = mc_tensor_new(t, &s);
	if (!r) {
		mc_error("out of memory");
		exit(3);
	}
	return r;
}

/* ---- requantising ops ---- */

/* The clamp of a Relu or Clip between an op and its Q (in Q's integers),
 * narrowing [lo, hi]; false if node i is neither (or Clip's bounds are not
 * constants). */
static bool fold_activation(const qpass *s, int i, const qparam *q, int64_t *lo, int64_t *hi)
{
	const mc_node *n = &s->g->nodes[i];
	double mn = -INFINITY, mx = INFINITY;
	if (n->id == MC_OP_Relu) {
		mn = 0;
	} else if (n->id == MC_OP_Clip) {
		if (n->opset < 11) {
			if (mc_attr_float(n, "min", -INFINITY, &mn) || mc_attr_float(n, "max", INFINITY, &mx))
				return false;
		}
		for (int k = 1; k < 3 && n->opset >= 11; k++) {
			if (k >= n->n_inputs || n->inputs[k] < 0)
				continue;
			const mc_tensor *t = s->g->values[n->inputs[k]].konst;
			if (!t || t->numel != 1)
				return false;
			*(k == 1 ? &mn : &mx) = mc_get_f(t, 0);
		}
	} else {
		return false;
	}
	double sc = scale_at(q, 0), z = (double)zp_at(q, 0);
	if (mn > -INFINITY) {
		double v = nearbyint((double)((float)mn / (float)sc)) + z;
		*lo = v > (double)*lo ? (int64_t)fmin(v, (double)*hi) : *lo;
	}
	if (mx < INFINITY) {
		double v = nearbyint((double)((float)mx / (float)sc)) + z;
		*hi = v < (double)*hi ? (int64_t)fmax(v, (double)*lo) : *hi;
	}
	return true;
}

/* The Q an op's output reaches, through one Relu or Clip at most: its
 * params and clamp. Sets *tail to the last float node (the Relu/Clip or
 * the op itself). */
static bool requant_tail(const qpass *s, int op, qparam *q, int64_t *lo, int64_t *hi, int *tail)
{
	int v = s->g->nodes[op].outputs[0];
	*tail = op;
	int r = only_reader(s, v);
	if (r < 0)
		return false;
	if (s->g->nodes[r].id == MC_OP_Relu || s->g->nodes[r].id == MC_OP_Clip) {
		if (s->g->nodes[r].inputs[0] != v || !q_after(s, s->g->nodes[r].outputs[0], q))
			return false;
		mc_quant_range(q->type, lo, hi);
		*tail = r;
		return fold_activation(s, r, q, lo, hi);
	}
	if (!q_after(s, v, q))
		return false;
	mc_quant_range(q->type, lo, hi);
	return true;
}

/* Marks the tail (activation) and the Q as replaced by the integer op. */
static void drop_tail(qpass *s, int op, int tail, const qparam *q)
{
	if (tail != op)
		s->dead[tail] = true;
	s->dead[q->node] = true;
}

/* Node i becomes b's requantising op writing q's value with clamp [lo, hi];
 * the activation tail and the Q go. False (nothing changed) if the
 * registry refuses b. */
static bool commit_requant(qpass *s, int i, int tail, const qparam *q, nodebuf *b, int64_t lo,
                           int64_t hi)
{
	nb_output(b, q, lo, hi);
	if (!nb_finish(b, s->g))
		return false;
	drop_tail(s, i, tail, q);
	replace_node(s, i, b);
	return true;
}

/* Per-channel multipliers and shifts of factors real[0..count). */
static bool channel_multipliers(const double *real, int64_t count, mc_tensor **mult,
                                mc_tensor **shift)
{
	*mult = vec_new(MC_INT32, count);
	*shift = vec_new(MC_INT32, count);
	for (int64_t c = 0; c < count; c++) {
		int32_t m, sh;
		if (!mc_qi_multiplier(real[c], &m, &sh)) {
			mc_tensor_free(*mult);
			mc_tensor_free(*shift);
			return false;
		}
		mc_set_i(*mult, (size_t)c, m);
		mc_set_i(*shift, (size_t)c, sh);
	}
	return true;
}

/* A weight operand: DQ of a constant, per tensor or along `axis`. */
static bool const_weight(const qpass *s, int v, int axis, int64_t channels, qparam *w)
{
	if (!dq_of(s, v, w) || !s->g->values[w->q].konst)
		return false;
	return w->axis < 0 || (w->axis == axis && (int64_t)w->count == channels);
}

/* The bias as int32 at scale sx * sw[c]: absent, a DQ of a constant, or a
 * float constant (times beta). NULL in *out when absent; false if it does
 * not fit. */
static bool int_bias(const qpass *s, int v, double sx, const qparam *w, int64_t channels,
                     double beta, mc_tensor **out)
{
	*out = NULL;
	if (v < 0)
		return true;
	qparam b;
	const mc_tensor *t = s->g->values[v].konst;
	bool dq = !t && dq_of(s, v, &b) && s->g->values[b.q].konst;
	if (!t && !dq)
		return false;
	const mc_tensor *src = dq ? s->g->values[b.q].konst : t;
	if (src->numel != (size_t)channels && src->numel != 1)
		return false;
	*out = vec_new(MC_INT32, channels);
	for (int64_t c = 0; c < channels; c++) {
		size_t k = src->numel == 1 ? 0 : (size_t)c;
		double f = dq ? (double)(mc_get_i(src, k) - zp_at(&b, k)) * scale_at(&b, k)
		              : mc_get_f(src, k);
		double r = nearbyint(beta * f / (sx * scale_at(w, (size_t)c)));
		if (!(fabs(r) < (double)(1 << 30))) {
			mc_tensor_free(*out);
			*out = NULL;
			return false;
		}
		mc_set_i(*out, (size_t)c, (int64_t)r);
	}
	return true;
}

/* Sums of k products of centred 8-bit values, plus the bias, stay in int32. */
static bool sums_fit(int64_t k, const mc_tensor *bias)
{
	return k <= 33000 && mc_qi_sum_bound(k, mc_qi_abs_max(bias)) < ((int64_t)1 << 31);
}

/* Conv, Gemm or MatMul node i into QiConv or QiMatMul. */
static bool match_product(qpass *s, int i)
{
	mc_graph *g = s->g;
	mc_node *n = &g->nodes[i];
	bool conv = n->id == MC_OP_Conv, gemm = n->id == MC_OP_Gemm;
	qparam x, w, q;
	int64_t lo, hi;
	int tail;
	if (n->n_inputs < 2 || !per_tensor_dq(s, n->inputs[0], &x) ||
	    !requant_tail(s, i, &q, &lo, &hi, &tail))
		return false;
	const mc_value *wv = &g->values[n->inputs[1]];
	int64_t alpha_ok = 1, trans_a = 0, trans_b = 0;
	double alpha = 1, beta = 1;
	if (gemm && (mc_attr_int(n, "transA", 0, &trans_a) || mc_attr_int(n, "transB", 0, &trans_b) ||
	             mc_attr_float(n, "alpha", 1, &alpha) || mc_attr_float(n, "beta", 1, &beta)))
		return false;
	if (trans_a || !(alpha > 0))
		alpha_ok = 0;
	int rank = wv->shape.rank;
	int64_t channels = conv ? wv->shape.dims[0] : wv->shape.dims[trans_b ? 0 : rank - 1];
	int axis = conv || trans_b ? 0 : rank - 1;
	bool wconst = const_weight(s, n->inputs[1], axis, channels, &w);
	/* MatMul's b may be computed: then per tensor */
	if (!alpha_ok || (!wconst && (conv || gemm || !per_tensor_dq(s, n->inputs[1], &w))) ||
	    rank < 1)
		return false;
	int64_t k = conv ? (int64_t)mc_numel(&wv->shape) / (channels ? channels : 1)
	                 : wv->shape.dims[rank >= 2 ? (trans_b ? rank - 1 : rank - 2) : 0];
	double *real = mc_xmalloc((size_t)(channels + 1) * sizeof *real);
	for (int64_t c = 0; c < channels; c++)
		real[c] = alpha * scale_at(&x, 0) * scale_at(&w, (size_t)c) / scale_at(&q, 0);
	mc_tensor *mult, *shift, *bias = NULL;
	int bias_v = n->n_inputs > 2 && (conv || gemm) ? n->inputs[2] : -1;
	bool ok = channel_multipliers(real, channels, &mult, &shift);
	free(real);
	if (!ok)
		return false;
	if (!int_bias(s, bias_v, alpha * scale_at(&x, 0), &w, channels, beta, &bias) ||
	    !sums_fit(k, bias)) {
		mc_tensor_free(mult);
		mc_tensor_free(shift);
		mc_tensor_free(bias);
		return false;
	}
	/* Gemm's B as [K, N] */
	int wq = w.q;
	if (gemm && trans_b) {
		const mc_tensor *src = g->values[w.q].konst;
		mc_shape ts = {2, {src->shape.dims[1], src->shape.dims[0]}};
		mc_tensor *t = mc_tensor_new(src->dtype, &ts);
		MC_ASSERT(t); /* the size of a weight the model holds */
		for (int64_t r = 0; r < ts.dims[0]; r++)
			for (int64_t c = 0; c < ts.dims[1]; c++)
				mc_set_i(t, (size_t)(r * ts.dims[1] + c), mc_get_i(src, (size_t)(c * ts.dims[0] + r)));
		wq = add_const(g, g->values[w.q].name, t);
	}
	bool wzp = false;
	for (size_t c = 0; c < (size_t)channels && w.zp; c++)
		wzp = wzp || zp_at(&w, w.count == 1 ? 0 : c) != 0;
	int in[6] = {x.q, wq, bias ? add_const(g, "bias", bias) : -1, add_const(g, "multiplier", mult),
	             add_const(g, "shift", shift), -1};
	if (wzp) {
		mc_tensor *z = vec_new(w.type, channels);
		for (int64_t c = 0; c < channels; c++)
			mc_set_i(z, (size_t)c, zp_at(&w, w.count == 1 ? 0 : (size_t)c));
		in[5] = add_const(g, "w_zero_point", z);
	}
	nodebuf b;
	nb_init(&b, g, conv ? MC_OP_QiConv : MC_OP_QiMatMul, n->name, in, wzp ? 6 : 5,
	        g->nodes[q.node].outputs[0]);
	for (int a = 0; conv && a < n->n_attrs; a++)
		nb_attr(&b, copy_attr(&n->attrs[a]));
	nb_attr(&b, int_attr("x_zero_point", zp_at(&x, 0)));
	return commit_requant(s, i, tail, &q, &b, lo, hi);
}

/* Add, Sub or Mul of two per-tensor DQs into QiAdd or QiMul. */
static bool match_binary(qpass *s, int i)
{
	mc_graph *g = s->g;
	mc_node *n = &g->nodes[i];
	qparam a, b, q;
	int64_t lo, hi;
	int tail;
	if (n->n_inputs != 2 || !per_tensor_dq(s, n->inputs[0], &a) ||
	    !per_tensor_dq(s, n->inputs[1], &b) || !requant_tail(s, i, &q, &lo, &hi, &tail))
		return false;
	double sy = scale_at(&q, 0), sa = scale_at(&a, 0), sb = scale_at(&b, 0);
	int32_t ma, mb, sh;
	bool mul = n->id == MC_OP_Mul;
	if (mul ? !mc_qi_multiplier(sa * sb / sy, &ma, &sh)
	        : !mc_qi_multiplier2(sa / sy, sb / sy, &ma, &mb, &sh))
		return false;
	if (n->id == MC_OP_Sub) /* a - b: b's multiplier negated */
		mb = -mb;
	int in[2] = {a.q, b.q};
	nodebuf nb;
	nb_init(&nb, g, mul ? MC_OP_QiMul : MC_OP_QiAdd, n->name, in, 2, g->nodes[q.node].outputs[0]);
	nb_attr(&nb, int_attr("x_zero_point", zp_at(&a, 0)));
	nb_attr(&nb, int_attr("b_zero_point", zp_at(&b, 0)));
	nb_attr(&nb, int_attr("multiplier", ma));
	if (!mul)
		nb_attr(&nb, int_attr("b_multiplier", mb));
	nb_attr(&nb, int_attr("shift", sh));
	return commit_requant(s, i, tail, &q, &nb, lo, hi);
}

/* ReduceMean over exactly the spatial dims [2, rank) of a rank-`rank` x. */
static bool spatial_mean(const mc_graph *g, const mc_node *n, int rank)
{
	int64_t axes[MC_MAX_RANK];
	size_t count = 0;
	const int64_t *av = NULL;
	if (n->opset < 18) {
		if (mc_attr_ints(n, "axes", &av, &count) || !av)
			return false;
		memcpy(axes, av, (count < MC_MAX_RANK ? count : MC_MAX_RANK) * sizeof *axes);
	} else {
		const mc_tensor *t = n->n_inputs > 1 && n->inputs[1] >= 0 ? g->values[n->inputs[1]].konst : NULL;
		if (!t)
			return false;
		count = t->numel;
		for (size_t k = 0; k < count && k < MC_MAX_RANK; k++)
			axes[k] = mc_get_i(t, k);
	}
	if (count != (size_t)(rank - 2) || rank < 3)
		return false;
	bool seen[MC_MAX_RANK] = {0};
	for (size_t k = 0; k < count; k++) {
		int64_t a = axes[k] < 0 ? axes[k] + rank : axes[k];
		if (a < 2 || a >= rank || seen[a])
			return false;
		seen[a] = true;
	}
	return true;
}

/* AveragePool without padding, GlobalAveragePool or a ReduceMean over the
 * spatial dims into QiAvgPool. */
static bool match_avgpool(qpass *s, int i)
{
	mc_graph *g = s->g;
	mc_node *n = &g->nodes[i];
	qparam x, q;
	int64_t lo, hi;
	int tail;
	if (!per_tensor_dq(s, n->inputs[0], &x) || !requant_tail(s, i, &q, &lo, &hi, &tail))
		return false;
	const mc_shape *xs = &g->values[x.q].shape;
	int nsp = xs->rank - 2;
	if (nsp < 1)
		return false;
	int64_t kern[MC_MAX_RANK], stride[MC_MAX_RANK], pads[2 * MC_MAX_RANK], dil[MC_MAX_RANK];
	int64_t ceil_mode = 0;
	const char *auto_pad = "NOTSET";
	int64_t keepdims = 1;
	if (n->id == MC_OP_ReduceMean && (!spatial_mean(g, n, xs->rank) ||
	                                  mc_attr_int(n, "keepdims", 1, &keepdims)))
		return false;
	if (n->id == MC_OP_GlobalAveragePool || n->id == MC_OP_ReduceMean) {
		for (int d = 0; d < nsp; d++)
			kern[d] = xs->dims[d + 2], stride[d] = 1;
	} else if (mc_attr_ints_fixed(n, "kernel_shape", nsp, 1, 1, kern) ||
	           mc_attr_ints_fixed(n, "strides", nsp, 1, 1, stride) ||
	           mc_attr_ints_fixed(n, "pads", 2 * nsp, 0, 0, pads) ||
	           mc_attr_ints_fixed(n, "dilations", nsp, 1, 1, dil) ||
	           mc_attr_int(n, "ceil_mode", 0, &ceil_mode) ||
	           mc_attr_string(n, "auto_pad", "NOTSET", &auto_pad)) {
		return false;
	} else {
		for (int d = 0; d < 2 * nsp; d++)
			if (pads[d])
				return false;
		for (int d = 0; d < nsp; d++)
			if (dil[d] != 1 || (ceil_mode && (xs->dims[d + 2] - kern[d]) % stride[d]))
				return false;
		if (strcmp(auto_pad, "NOTSET") && strcmp(auto_pad, "VALID"))
			return false;
	}
	int64_t count = 1;
	for (int d = 0; d < nsp; d++)
		count *= kern[d];
	int32_t m, sh;
	double real = scale_at(&x, 0) / (scale_at(&q, 0) * (double)count);
	if (count > (1 << 22) || !mc_qi_multiplier(real, &m, &sh))
		return false;
	int in[1] = {x.q};
	nodebuf b;
	nb_init(&b, g, MC_OP_QiAvgPool, n->name, in, 1, g->nodes[q.node].outputs[0]);
	mc_attr ka = {.name = mc_xstrdup("kernel_shape"), .type = MC_ATTR_INTS, .n = (size_t)nsp};
	mc_attr sa = {.name = mc_xstrdup("strides"), .type = MC_ATTR_INTS, .n = (size_t)nsp};
	ka.ints = mc_xmalloc((size_t)nsp * sizeof *ka.ints);
	sa.ints = mc_xmalloc((size_t)nsp * sizeof *sa.ints);
	memcpy(ka.ints, kern, (size_t)nsp * sizeof *kern);
	memcpy(sa.ints, stride, (size_t)nsp * sizeof *stride);
	nb_attr(&b, ka);
	nb_attr(&b, sa);
	nb_attr(&b, int_attr("x_zero_point", zp_at(&x, 0)));
	nb_attr(&b, int_attr("multiplier", m));
	nb_attr(&b, int_attr("shift", sh));
	if (!keepdims)
		nb_attr(&b, int_attr("keepdims", 0));
	return commit_requant(s, i, tail, &q, &b, lo, hi);
}

/* Which input of node n is its one float value input, the others being
 * scalar constants, for a float pointwise op (a table can hold it); -1 if
 * none. */
static int table_input(const mc_graph *g, const mc_node *n)
{
	if (!mc_op_has(n->id, MC_OF_PW) || mc_op_has(n->id, MC_OF_INTERNAL) || n->n_outputs != 1 ||
	    !n->op || n->n_inputs > 8 || n->outputs[0] < 0 || g->values[n->outputs[0]].dtype != MC_FLOAT)
		return -1;
	int value = -1;
	for (int k = 0; k < n->n_inputs; k++) {
		const mc_value *v = n->inputs[k] >= 0 ? &g->values[n->inputs[k]] : NULL;
		if (!v || (v->konst && v->konst->numel == 1))
			continue;
		if (value >= 0 || v->konst || v->dtype != MC_FLOAT)
			return -1;
		value = k;
	}
	return value;
}

/* Node n's reference evaluation with its value input (k) replaced by the
 * 256 floats of *t, which become its result; false if it fails. */
static bool eval_on_table(const mc_graph *g, const mc_node *n, int k, mc_tensor **t)
{
	mc_tensor *y = mc_tensor_new(MC_FLOAT, &(*t)->shape);
	MC_ASSERT(y);
	const mc_tensor *in[8] = {0};
	for (int j = 0; j < n->n_inputs; j++)
		in[j] = j == k ? *t : n->inputs[j] >= 0 ? g->values[n->inputs[j]].konst : NULL;
	mc_tensor *out[1] = {y};
	mc_eval_ctx c = {.node = n, .graph = g, .n_in = n->n_inputs, .n_out = 1, .in = in, .out = out};
	bool ok = !n->op->eval(&c);
	mc_tensor_free(ok ? *t : y);
	if (ok)
		*t = y;
	return ok;
}

#define MAX_CHAIN 8

/* A chain of float pointwise ops from a DQ to a Q (GELU's Div, Erf, Add;
 * a Sigmoid; a HardSwish), each with scalar constants besides the value it
 * passes on, into one QiLut: the table is the ops' own reference
 * evaluation on the 256 dequantized values, quantized as QuantizeLinear
 * does (x / scale, ties to even). */
static bool match_lut(qpass *s, int i)
{
	mc_graph *g = s->g;
	int chain[MAX_CHAIN], slot[MAX_CHAIN], len = 0, cur = i;
	qparam x, q;
	slot[0] = table_input(g, &g->nodes[i]);
	if (slot[0] < 0 || !per_tensor_dq(s, g->nodes[i].inputs[slot[0]], &x))
		return false;
	for (;;) {
		chain[len++] = cur;
		int out = g->nodes[cur].outputs[0];
		if (q_after(s, out, &q))
			break;
		int r = only_reader(s, out);
		if (r < 0 || len == MAX_CHAIN || (slot[len] = table_input(g, &g->nodes[r])) < 0 ||
		    g->nodes[r].inputs[slot[len]] != out)
			return false;
		cur = r;
	}
	mc_shape ts = {1, {256}};
	mc_tensor *f = mc_tensor_new(MC_FLOAT, &ts);
	MC_ASSERT(f);
	int64_t base = x.type == MC_INT8 ? -128 : 0, lo, hi;
	mc_quant_range(q.type, &lo, &hi);
	for (int64_t v = 0; v < 256; v++)
		((float *)f->data)[v] = (float)((double)(v + base - zp_at(&x, 0)) * scale_at(&x, 0));
	bool ok = true;
	for (int k = 0; k < len && ok; k++)
		ok = eval_on_table(g, &g->nodes[chain[k]], slot[k], &f);
	mc_tensor *table = vec_new(q.type, 256);
	for (int64_t v = 0; ok && v < 256; v++) {
		float y = ((float *)f->data)[v] / (float)scale_at(&q, 0);
		double r = isnan(y) ? 0 : nearbyint((double)y) + (double)zp_at(&q, 0);
		mc_set_i(table, (size_t)v, r < (double)lo ? lo : r > (double)hi ? hi : (int64_t)r);
	}
	mc_tensor_free(f);
	if (!ok) {
		mc_tensor_free(table);
		return false;
	}
	int tin[2] = {x.q, add_const(g, "table", table)};
	nodebuf b;
	nb_init(&b, g, MC_OP_QiLut, g->nodes[i].name, tin, 2, g->nodes[q.node].outputs[0]);
	if (!nb_finish(&b, g))
		return false;
	for (int k = 1; k < len; k++)
		s->dead[chain[k]] = true;
	s->dead[q.node] = true;
	replace_node(s, i, &b);
	return true;
}

/* A constant input of node n with one value (or count values); NULL if not. */
static const mc_tensor *const_in(const mc_graph *g, const mc_node *n, int k, int64_t count)
{
	if (k >= n->n_inputs || n->inputs[k] < 0)
		return NULL;
	const mc_tensor *t = g->values[n->inputs[k]].konst;
	return t && (t->numel == 1 || (int64_t)t->numel == count) ? t : NULL;
}

/* QLinearConv and QLinearMatMul with constant scales and zero points:
 * QiConv and QiMatMul (the requantisation in fixed point, not in float). */
static bool match_qlinear(qpass *s, int i)
{
	mc_graph *g = s->g;
	mc_node *n = &g->nodes[i];
	bool conv = n->id == MC_OP_QLinearConv;
	/* inputs: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp[, bias] */
	if (n->n_inputs < 8 || n->inputs[0] < 0 || n->inputs[3] < 0 || n->outputs[0] < 0)
		return false;
	const mc_value *wv = &g->values[n->inputs[3]];
	int rank = wv->shape.rank;
	if (rank < 1 || (!conv && rank != 2 && rank != 1))
		return false;
	int64_t channels = conv ? wv->shape.dims[0] : wv->shape.dims[rank - 1];
	const mc_tensor *xs = const_in(g, n, 1, 1), *ws = const_in(g, n, 4, channels);
	const mc_tensor *ys = const_in(g, n, 6, 1), *xz = const_in(g, n, 2, 1);
	const mc_tensor *wz = const_in(g, n, 5, channels), *yz = const_in(g, n, 7, 1);
	const mc_tensor *bias = conv && n->n_inputs > 8 && n->inputs[8] >= 0
	                        ? g->values[n->inputs[8]].konst : NULL;
	bool absent_zp[3] = {n->inputs[2] < 0, n->inputs[5] < 0, n->inputs[7] < 0};
	if (!xs || !ws || !ys || (!xz && !absent_zp[0]) || (!wz && !absent_zp[1]) ||
	    (!yz && !absent_zp[2]) || (conv && n->n_inputs > 8 && n->inputs[8] >= 0 && !bias))
		return false;
	int64_t k = conv ? (int64_t)mc_numel(&wv->shape) / (channels ? channels : 1)
	                 : wv->shape.dims[0];
	if (!sums_fit(k, bias))
		return false;
	double *real = mc_xmalloc((size_t)(channels + 1) * sizeof *real);
	for (int64_t c = 0; c < channels; c++)
		real[c] = mc_get_f(xs, 0) * mc_get_f(ws, ws->numel == 1 ? 0 : (size_t)c) / mc_get_f(ys, 0);
	mc_tensor *mult, *shift;
	bool ok = channel_multipliers(real, channels, &mult, &shift);
	free(real);
	if (!ok)
		return false;
	bool wzp = false;
	for (size_t c = 0; wz && c < wz->numel; c++)
		wzp = wzp || mc_get_i(wz, c) != 0;
	int in[6] = {n->inputs[0], n->inputs[3], bias ? n->inputs[8] : -1,
	             add_const(g, "multiplier", mult), add_const(g, "shift", shift), -1};
	if (wzp) {
		mc_tensor *z = vec_new(wv->dtype, channels);
		for (int64_t c = 0; c < channels; c++)
			mc_set_i(z, (size_t)c, mc_get_i(wz, wz->numel == 1 ? 0 : (size_t)c));
		in[5] = add_const(g, "w_zero_point", z);
	}
	mc_dtype out = g->values[n->outputs[0]].dtype;
	int64_t lo, hi;
	mc_quant_range(out, &lo, &hi);
	nodebuf b;
	n = &g->nodes[i];
	nb_init(&b, g, conv ? MC_OP_QiConv : MC_OP_QiMatMul, n->name, in, wzp ? 6 : 5, n->outputs[0]);
	for (int a = 0; conv && a < n->n_attrs; a++)
		nb_attr(&b, copy_attr(&n->attrs[a]));
	nb_attr(&b, int_attr("x_zero_point", xz ? mc_get_i(xz, 0) : 0));
	nb_attr(&b, int_attr("y_zero_point", yz ? mc_get_i(yz, 0) : 0));
	nb_attr(&b, int_attr("lo", lo));
	nb_attr(&b, int_attr("hi", hi));
	nb_attr(&b, int_attr("to", out));
	if (!nb_finish(&b, g))
		return false;
	replace_node(s, i, &b);
	return true;
}

/* Softmax between a per-tensor DQ and Q, along one axis of at most
 * MC_QI_SOFTMAX_MAX values: QiSoftmax with its table of exponentials. */
static bool match_softmax(qpass *s, int i)
{
	mc_graph *g = s->g;
	mc_node *n = &g->nodes[i];
	qparam x, q;
	if (!per_tensor_dq(s, n->inputs[0], &x) || !q_after(s, n->outputs[0], &q))
		return false;
	const mc_shape *xs = &g->values[x.q].shape;
	int64_t axis;
	if (mc_attr_int(n, "axis", n->opset >= 13 ? -1 : 1, &axis))
		return false;
	axis = axis < 0 ? axis + xs->rank : axis;
	/* before opset 13 the rows are the flattened dims from axis on */
	if (axis < 0 || axis >= xs->rank || (n->opset < 13 && axis != xs->rank - 1) ||
	    xs->dims[axis] > MC_QI_SOFTMAX_MAX)
		return false;
	int32_t m, sh;
	if (!mc_qi_multiplier(ldexp(1, -31) / scale_at(&q, 0), &m, &sh))
		return false;
	mc_tensor *t = vec_new(MC_INT32, 256);
	for (int d = 0; d < 256; d++)
		mc_set_i(t, (size_t)d, (int64_t)llround(16384.0 * exp(-(double)d * scale_at(&x, 0))));
	int in[2] = {x.q, add_const(g, "exp_table", t)};
	int64_t lo, hi;
	mc_quant_range(q.type, &lo, &hi);
	nodebuf b;
	n = &g->nodes[i];
	nb_init(&b, g, MC_OP_QiSoftmax, n->name, in, 2, q.q);
	nb_attr(&b, int_attr("axis", axis));
	nb_attr(&b, int_attr("multiplier", m));
	nb_attr(&b, int_attr("shift", sh));
	nb_output(&b, &q, lo, hi);
	if (!nb_finish(&b, g))
		return false;
	s->dead[q.node] = true;
	replace_node(s, i, &b);
	return true;
}

/* ---- moving DQ past ops that only move data ---- */

/* Ops whose output elements are input 0's elements (or those of every
 * input, Concat), so that op(DQ(q)) = DQ(op(q)) for one scale. MaxPool
 * too: a positive scale keeps the order. */
static bool moves_data(const mc_graph *g, const mc_node *n)
{
	const char *mode = "nearest";
	switch (n->id) {
	case MC_OP_Reshape: case MC_OP_Flatten: case MC_OP_Squeeze: case MC_OP_Unsqueeze:
	case MC_OP_Transpose: case MC_OP_Identity: case MC_OP_DepthToSpace:
	case MC_OP_SpaceToDepth: case MC_OP_Slice: case MC_OP_Gather: case MC_OP_Concat:
		return true;
	case MC_OP_MaxPool:
		return n->n_outputs == 1 || n->outputs[1] < 0;
	case MC_OP_Resize:
		return !mc_attr_string(n, "mode", "nearest", &mode) && !strcmp(mode, "nearest");
	case MC_OP_Pad: /* constant mode: its value becomes an integer (pad_value) */
		return n->opset >= 11 && !mc_attr_string(n, "mode", "constant", &mode) &&
		       !strcmp(mode, "constant");
	default:
		(void)g;
		return false;
	}
}

/* Pad's constant value as a constant of x's integers (made here); -1 if it
 * is not exactly one of them. */
static int pad_value_of(qpass *s, const mc_node *n, const qparam *x)
{
	double v = 0;
	if (n->n_inputs > 2 && n->inputs[2] >= 0) {
		const mc_tensor *t = s->g->values[n->inputs[2]].konst;
		if (!t || t->numel != 1)
			return -1;
		v = mc_get_f(t, 0);
	}
	int64_t lo, hi;
	mc_quant_range(x->type, &lo, &hi);
	double q = nearbyint(v / scale_at(x, 0)) + (double)zp_at(x, 0);
	if (q < (double)lo || q > (double)hi || (q - (double)zp_at(x, 0)) * scale_at(x, 0) != v)
		return -1;
	mc_shape sc = {0};
	mc_tensor *t = mc_tensor_new(x->type, &sc);
	MC_ASSERT(t);
	mc_set_i(t, 0, (int64_t)q);
	return add_const(s->g, "pad_value", t);
}

static bool same_params(const qparam *a, const qparam *b)
{
	return a->type == b->type && a->axis < 0 && b->axis < 0 && scale_at(a, 0) == scale_at(b, 0) &&
	       zp_at(a, 0) == zp_at(b, 0);
}

/* op(DQ(q), ...) -> DQ(op(q, ...)): node i reads the integers, a new DQ
 * after it gives the float value its readers had. */
static bool sink_dq(qpass *s, int i)
{
	mc_graph *g = s->g;
	mc_node *n = &g->nodes[i];
	qparam x, other;
	if (!moves_data(g, n) || n->n_outputs < 1 || n->outputs[0] < 0 ||
	    !per_tensor_dq(s, n->inputs[0], &x))
		return false;
	int data_inputs = n->id == MC_OP_Concat ? n->n_inputs : 1;
	for (int k = 1; k < data_inputs; k++)
		if (!per_tensor_dq(s, n->inputs[k], &other) || !same_params(&x, &other))
			return false;
	for (int k = 1; k < n->n_outputs; k++)
		if (n->outputs[k] >= 0)
			return false;
	int pad_value = -1;
	if (n->id == MC_OP_Pad && (pad_value = pad_value_of(s, n, &x)) < 0)
		return false;
	int fv = n->outputs[0];
	char *name = ge_unique_name(g, g->values[fv].name);
	int qv = mc_graph_add_value(g, name, MC_VAL_NODE);
	free(name);
	n = &g->nodes[i];
	for (int k = 0; k < data_inputs; k++) {
		qparam d;
		dq_of(s, n->inputs[k], &d);
		n->inputs[k] = d.q;
	}
	n->outputs[0] = qv;
	if (pad_value >= 0 && n->n_inputs < 3) {
		n->inputs = realloc(n->inputs, 3 * sizeof *n->inputs);
		MC_ASSERT(n->inputs);
		n->inputs[2] = -1;
		n->n_inputs = 3;
	}
	if (pad_value >= 0)
		n->inputs[2] = pad_value;
	if (!retype(s, i))
		return false;
	/* the DQ, reading the same scale and zero point constants */
	const mc_node *dq = &g->nodes[x.node];
	int din[3] = {qv, dq->inputs[1], dq->n_inputs > 2 ? dq->inputs[2] : -1};
	nodebuf b;
	nb_init(&b, g, MC_OP_DequantizeLinear, dq->name, din, dq->n_inputs > 2 ? 3 : 2, fv);
	for (int a = 0; a < dq->n_attrs; a++)
		nb_attr(&b, copy_attr(&dq->attrs[a]));
	b.n.opset = dq->opset;
	b.n.op = dq->op;
	if (!nb_finish(&b, g)) {
		mc_error("quantize: cannot make the DequantizeLinear after %s", n->name);
		s->failed = true;
		return false;
	}
	mc_node moved = g->nodes[i];
	mc_node pair[2] = {moved, b.n};
	g->nodes[i] = (mc_node){0};
	g->nodes[i].name = mc_xstrdup("");
	ge_splice_nodes(g, i, pair, 2);
	insert_marks(s, i + 1, 1);
	s->changes++;
	return true;
}

/* Concat of per-tensor DQs with different scales, whose result one Q
 * reads: each input requantised to the Q's scale (QiRequant where it
 * differs), the Concat on the integers writing the Q's output. */
static bool match_concat(qpass *s, int i)
{
	mc_graph *g = s->g;
	mc_node *n = &g->nodes[i];
	qparam q, x;
	if (n->id != MC_OP_Concat || n->n_inputs < 1 || n->n_inputs > 64 ||
	    !q_after(s, n->outputs[0], &q))
		return false;
	int64_t lo, hi;
	mc_quant_range(q.type, &lo, &hi);
	int32_t mult[64], shift[64];
	for (int k = 0; k < n->n_inputs; k++)
		if (!per_tensor_dq(s, n->inputs[k], &x) || x.type != q.type ||
		    !mc_qi_multiplier(scale_at(&x, 0) / scale_at(&q, 0), &mult[k], &shift[k]))
			return false;
	mc_node nodes[65];
	int count = 0;
	for (int k = 0; k < n->n_inputs; k++) {
		dq_of(s, n->inputs[k], &x);
		if (same_params(&x, &q)) {
			n->inputs[k] = x.q;
			continue;
		}
		char *name = ge_unique_name(g, g->values[x.q].name);
		int rv = mc_graph_add_value(g, name, MC_VAL_NODE);
		free(name);
		int in[1] = {x.q};
		nodebuf b;
		nb_init(&b, g, MC_OP_QiRequant, n->name, in, 1, rv);
		nb_attr(&b, int_attr("x_zero_point", zp_at(&x, 0)));
		nb_attr(&b, int_attr("multiplier", mult[k]));
		nb_attr(&b, int_attr("shift", shift[k]));
		nb_output(&b, &q, lo, hi);
		MC_ASSERT(nb_finish(&b, g)); /* int8 in, int8 out: always types */
		nodes[count++] = b.n;
		n = &g->nodes[i];
		n->inputs[k] = rv;
	}
	s->dead[q.node] = true;
	n->outputs[0] = q.q;
	if (!retype(s, i))
		return false;
	if (count) {
		nodes[count++] = *n;
		g->nodes[i] = (mc_node){0};
		g->nodes[i].name = mc_xstrdup("");
		ge_splice_nodes(g, i, nodes, count);
		insert_marks(s, i, count - 1);
	}
	s->changes++;
	return true;
}

/* ---- Q nodes ---- */

/* Q(op(x)) -> op(Q(x)) for a one-input data mover op whose result only the
 * Q reads (a Reshape of the graph's float input, say): the op then moves
 * int8, and --quantized-io finds the Q at the input. The Q node moves up to
 * op's place, op to the Q's. */
static bool hoist_q(qpass *s, int i)
{
	mc_graph *g = s->g;
	mc_node *qn = &g->nodes[i];
	int y = qn->inputs[0], p = g->values[y].producer;
	if (p < 0 || s->dead[p] || only_reader(s, y) != i || !moves_data(g, &g->nodes[p]) ||
	    g->nodes[p].id == MC_OP_Concat || g->nodes[p].id == MC_OP_MaxPool ||
	    g->nodes[p].id == MC_OP_Pad)
		return false;
	mc_node *op = &g->nodes[p];
	for (int k = 1; k < op->n_outputs; k++)
		if (op->outputs[k] >= 0)
			return false;
	int x = op->inputs[0], qout = qn->outputs[0];
	if (g->values[x].dtype != MC_FLOAT)
		return false;
	/* y becomes the quantized x; the op writes Q's output from it */
	qn->inputs[0] = x;
	qn->outputs[0] = y;
	op->inputs[0] = y;
	op->outputs[0] = qout;
	mc_node tmp = g->nodes[p];
	g->nodes[p] = g->nodes[i];
	g->nodes[i] = tmp;
	if (!retype(s, p) || !retype(s, i))
		return false;
	s->changes++;
	return true;
}

/* Q(DQ(q)): q itself (same params) or QiRequant; Q of another float value
 * with a per-tensor constant scale: QiQuantize. */
static bool match_q(qpass *s, int i)
{
	mc_graph *g = s->g;
	qparam q, x;
	if (!qparam_of(g, i, &q) || q.axis >= 0)
		return false;
	mc_node *n = &g->nodes[i];
	int64_t lo, hi;
	mc_quant_range(q.type, &lo, &hi);
	nodebuf b;
	if (per_tensor_dq(s, n->inputs[0], &x)) {
		int in[1] = {x.q};
		int32_t m, sh;
		if (same_params(&x, &q)) {
			nb_init(&b, g, MC_OP_Identity, n->name, in, 1, q.q);
		} else if (mc_qi_multiplier(scale_at(&x, 0) / scale_at(&q, 0), &m, &sh)) {
			nb_init(&b, g, MC_OP_QiRequant, n->name, in, 1, q.q);
			nb_attr(&b, int_attr("x_zero_point", zp_at(&x, 0)));
			nb_attr(&b, int_attr("multiplier", m));
			nb_attr(&b, int_attr("shift", sh));
			nb_output(&b, &q, lo, hi);
		} else {
			return false;
		}
	} else if (hoist_q(s, i)) {
		return true;
	} else {
		int in[1] = {n->inputs[0]};
		if (g->values[in[0]].dtype != MC_FLOAT)
			return false;
		nb_init(&b, g, MC_OP_QiQuantize, n->name, in, 1, q.q);
		mc_attr inv = {.name = mc_xstrdup("inv_scale"), .type = MC_ATTR_FLOAT,
		               .f = (double)(1.0f / (float)scale_at(&q, 0))};
		nb_attr(&b, inv);
		mc_attr sc = {.name = mc_xstrdup("scale"), .type = MC_ATTR_FLOAT, .f = scale_at(&q, 0)};
		nb_attr(&b, sc);
		nb_output(&b, &q, lo, hi);
	}
	if (!nb_finish(&b, g))
		return false;
	replace_node(s, i, &b);
	return true;
}

/* ---- quantized inputs and outputs (--quantized-io) ---- */

/* The clamp is the whole of the output type (no activation folded in). */
static bool full_range(const qi_params *p)
{
	int64_t lo, hi;
	return mc_quant_range(p->to, &lo, &hi) && p->lo == lo && p->hi == hi;
}

int mc_quantized_io(mc_graph *g)
{
	int *uses = ge_use_counts(g);
	bool *dead = mc_xcalloc((size_t)g->n_nodes + 1, sizeof *dead);
	int changes = 0;
	for (int i = 0; i < g->n_nodes; i++) {
		mc_node *n = &g->nodes[i];
		int x = n->inputs[0], y = n->n_outputs ? n->outputs[0] : -1;
		const qi_params *p = n->params;
		double scale;
		bool is_input = false;
		for (int k = 0; k < g->n_inputs; k++)
			is_input |= g->inputs[k] == x;
		if (n->id == MC_OP_QiQuantize && is_input && uses[x] == 1 && !ge_is_graph_output(g, x) &&
		    !ge_is_graph_output(g, y) && !mc_attr_float(n, "scale", 0, &scale) && scale > 0 &&
		    full_range(p)) {
			/* the input is the integers: Q's readers read it */
			g->values[x].dtype = p->to;
			g->values[x].io_scale = scale;
			g->values[x].io_zero_point = p->y_zp;
			ge_replace_uses(g, y, x);
			dead[i] = true;
			changes++;
			continue;
		}
		qparam q;
		if (n->id == MC_OP_DequantizeLinear && ge_is_graph_output(g, y) && qparam_of(g, i, &q) &&
		    q.axis < 0 && !ge_is_graph_output(g, x)) {
			int in[1] = {x};
			nodebuf b;
			nb_init(&b, g, MC_OP_Identity, n->name, in, 1, y);
			if (!nb_finish(&b, g))
				continue;
			g->values[y].io_scale = scale_at(&q, 0);
			g->values[y].io_zero_point = zp_at(&q, 0);
			mc_node_free(n);
			g->nodes[i] = b.n;
			changes++;
		}
	}
	ge_remove_nodes(g, dead);
	free(uses);
	free(dead);
	return changes;
}

int mc_quantize_reference(mc_graph *g, bool quantized_io)
{
	if (mc_pass_quantize(g, NULL) < 0)
		return -1;
	if (quantized_io)
		mc_quantized_io(g);
	return 0;
}

/* ---- float islands ---- */

/* The non-8-bit quantized type a DequantizeLinear feeding node n reads
 * (int16, int4, float8...), or MC_UNDEFINED. */
static mc_dtype wide_quant_input(const mc_graph *g, const mc_node *n)
{
	for (int k = 0; k < n->n_inputs; k++) {
		int v = n->inputs[k], p = v >= 0 ? g->values[v].producer : -1;
		if (p < 0 || g->nodes[p].id != MC_OP_DequantizeLinear || g->nodes[p].inputs[0] < 0 ||
		    g->values[g->nodes[p].inputs[0]].konst)
			continue;
		mc_dtype t = g->values[g->nodes[p].inputs[0]].dtype;
		if (t != MC_INT8 && t != MC_UINT8)
			return t;
	}
	return MC_UNDEFINED;
}

/* Why float node n, next to quantized values, did not become an integer op. */
static const char *island_reason(const qpass *s, int i, char *buf, size_t len)
{
	const mc_node *n = &s->g->nodes[i];
	qparam q;
	int64_t lo, hi;
	int tail;
	mc_dtype wide = wide_quant_input(s->g, n);
	if (wide != MC_UNDEFINED) {
		snprintf(buf, len, "an operand is quantized as %s: integer kernels exist for int8 and "
		         "uint8 only", mc_dtype_name(wide));
		return buf;
	}
	/* a computed float operand that no DequantizeLinear gives */
	for (int k = 0; k < n->n_inputs; k++) {
		int v = n->inputs[k], p = v >= 0 ? s->g->values[v].producer : -1;
		if (p >= 0 && s->g->values[v].dtype == MC_FLOAT && !s->g->values[v].konst &&
		    s->g->nodes[p].id != MC_OP_DequantizeLinear) {
			snprintf(buf, len, "operand %d is a float value computed by %s '%s', not a "
			         "dequantized integer", k, mc_op_name(s->g->nodes[p].id),
			         s->g->nodes[p].name);
			return buf;
		}
	}
	switch (n->id) {
	case MC_OP_Conv: case MC_OP_Gemm: case MC_OP_MatMul: case MC_OP_Add: case MC_OP_Sub:
	case MC_OP_Mul: case MC_OP_AveragePool: case MC_OP_GlobalAveragePool: case MC_OP_Softmax:
	case MC_OP_Concat: case MC_OP_ReduceMean:
		if (!requant_tail(s, i, &q, &lo, &hi, &tail))
			return "its result is not requantized (no single per-tensor QuantizeLinear after it)";
		return "operands not all per-tensor int8/uint8 dequantized values (weights: constant, "
		       "per output channel), or a padding, axis, scale or sum outside the integer "
		       "kernels' range";
	default:
		if (mc_op_has(n->id, MC_OF_PW) && n->n_inputs >= 1)
			return "no QuantizeLinear after it, or a non-scalar second operand (no table)";
		return "no integer form";
	}
}

int mc_quant_islands(const mc_graph *g, FILE *f, const char *prefix)
{
	qpass s = {.g = (mc_graph *)g};
	s.uses = ge_use_counts(g);
	s.dead = mc_xcalloc((size_t)g->n_nodes + 1, sizeof *s.dead);
	int count = 0;
	for (int i = 0; i < g->n_nodes; i++) {
		const mc_node *n = &g->nodes[i];
		if (n->id == MC_OP_DequantizeLinear || n->id == MC_OP_QuantizeLinear ||
		    mc_op_has(n->id, MC_OF_INTERNAL) || n->id == MC_OP_Identity)
			continue;
		bool near = false;
		for (int k = 0; k < n->n_inputs && !near; k++) {
			int v = n->inputs[k], p = v >= 0 ? g->values[v].producer : -1;
			near = p >= 0 && g->nodes[p].id == MC_OP_DequantizeLinear &&
			       g->nodes[p].inputs[0] >= 0 && !g->values[g->nodes[p].inputs[0]].konst;
		}
		for (int k = 0; k < n->n_outputs && !near; k++) {
			int r = n->outputs[k] >= 0 ? only_reader(&s, n->outputs[k]) : -1;
			near = r >= 0 && (g->nodes[r].id == MC_OP_QuantizeLinear ||
			                  g->nodes[r].id == MC_OP_QiQuantize);
		}
		if (!near)
			continue;
		char why[320];
		if (f)
			fprintf(f, "%sfloat island: %s '%s': %s\n", prefix, mc_op_name(n->id), n->name,
			        island_reason(&s, i, why, sizeof why));
		count++;
	}
	free(s.uses);
	free(s.dead);
	return count;
}

/* ---- the pass ---- */

/* Whether node i was rewritten (nodes may have been inserted). */
static bool match_node(qpass *s, int i)
{
	switch (s->g->nodes[i].id) {
	case MC_OP_Conv: case MC_OP_Gemm: case MC_OP_MatMul:
		return match_product(s, i);
	case MC_OP_Add: case MC_OP_Sub: case MC_OP_Mul:
		return match_binary(s, i);
	case MC_OP_AveragePool: case MC_OP_GlobalAveragePool: case MC_OP_ReduceMean:
		return match_avgpool(s, i);
	case MC_OP_QuantizeLinear:
		return match_q(s, i);
	case MC_OP_QLinearConv: case MC_OP_QLinearMatMul:
		return match_qlinear(s, i);
	case MC_OP_Softmax:
		return match_softmax(s, i);
	default:
		return sink_dq(s, i) || match_concat(s, i) || match_lut(s, i);
	}
}

/* DQ and Q nodes nothing reads any more. */
static void drop_unused(qpass *s)
{
	mc_graph *g = s->g;
	free(s->uses);
	s->uses = ge_use_counts(g);
	for (int i = g->n_nodes - 1; i >= 0; i--) {
		mc_node *n = &g->nodes[i];
		if (s->dead[i] || (n->id != MC_OP_DequantizeLinear && n->id != MC_OP_QuantizeLinear) ||
		    n->outputs[0] < 0 || s->uses[n->outputs[0]] || ge_is_graph_output(g, n->outputs[0]))
			continue;
		s->dead[i] = true;
		for (int k = 0; k < n->n_inputs; k++)
			if (n->inputs[k] >= 0)
				s->uses[n->inputs[k]]--;
	}
}

int mc_pass_quantize(mc_graph *g, const mc_freeze_opts *o)
{
	(void)o;
	for (int i = 0; i < g->n_nodes; i++)
		if ((g->nodes[i].id == MC_OP_DequantizeLinear || g->nodes[i].id == MC_OP_QuantizeLinear) &&
		    check_scales(g, &g->nodes[i]))
			return -1;
	qpass s = {.g = g};
	int total = 0;
	for (int round = 0; round < 64; round++) {
		s.changes = 0;
		s.uses = ge_use_counts(g);
		s.dead = mc_xcalloc((size_t)g->n_nodes + 1, sizeof *s.dead);
		for (int i = 0; i < g->n_nodes; i++) {
			bool m = !s.dead[i] && match_node(&s, i);
			if (s.failed) {
				free(s.uses);
				free(s.dead);
				return -1;
			}
			if (!m)
				continue;
			free(s.uses);
			s.uses = ge_use_counts(g);
		}
		drop_unused(&s);
		ge_remove_nodes(g, s.dead);
		free(s.uses);
		free(s.dead);
		total += s.changes;
		if (!s.changes)
			break;
	}
	return total;
}
