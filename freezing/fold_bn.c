/* Folding per-channel affine transforms into the Conv, ConvTranspose or
 * Gemm that feeds them: BatchNormalization in inference form, and Mul, Add,
 * Sub or Div by a per-output-channel constant. Each is y' = y * s[c] + t[c]
 * on output channel c, which scales the weights of channel c by s[c] and
 * maps the bias b[c] to b[c] * s[c] + t[c]. Computed in double, stored in
 * the weights' dtype. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_edit.h"

static bool float_weights(mc_dtype t)
{
	return t == MC_FLOAT || t == MC_DOUBLE || t == MC_FLOAT16;
}

static const mc_tensor *const_input(const mc_graph *g, const mc_node *n, int k)
{
	if (k >= n->n_inputs || n->inputs[k] < 0)
		return NULL;
	return g->values[n->inputs[k]].konst;
}

/* A per-channel transform: channels entries of scale and shift. */
typedef struct {
	int x;           /* the value transformed (the producer's output) */
	size_t channels;
	double *s, *t;
} affine;

static void affine_free(affine *a)
{
	free(a->s);
	free(a->t);
}

static void affine_init(affine *a, int x, size_t channels)
{
	a->x = x;
	a->channels = channels;
	a->s = mc_xmalloc((channels + 1) * sizeof *a->s);
	a->t = mc_xmalloc((channels + 1) * sizeof *a->t);
	for (size_t c = 0; c < channels; c++) {
		a->s[c] = 1;
		a->t[c] = 0;
	}
}

/* BatchNormalization in inference form: one output, running statistics. */
static bool bn_affine(const mc_graph *g, const mc_node *n, affine *a)
{
	int64_t flag;
	double eps;
	for (int k = 1; k < n->n_outputs; k++)
		if (n->outputs[k] >= 0)
			return false;
	if (n->opset >= 14 && (mc_attr_int(n, "training_mode", 0, &flag) || flag))
		return false;
	if (n->opset < 7 && (mc_attr_int(n, "is_test", 0, &flag) || !flag))
		return false;
	if (n->opset < 9 && (mc_attr_int(n, "spatial", 1, &flag) || !flag))
		return false;
	if (mc_attr_float(n, "epsilon", 1e-5, &eps))
		return false;
	const mc_value *x = &g->values[n->inputs[0]];
	const mc_tensor *scale = const_input(g, n, 1), *bias = const_input(g, n, 2);
	const mc_tensor *mean = const_input(g, n, 3), *var = const_input(g, n, 4);
	if (x->shape.rank < 2 || !scale || !bias || !mean || !var)
		return false;
	size_t ch = (size_t)x->shape.dims[1];
	if (scale->numel != ch || bias->numel != ch || mean->numel != ch || var->numel != ch)
		return false;
	affine_init(a, n->inputs[0], ch);
	for (size_t c = 0; c < ch; c++) {
		a->s[c] = mc_get_f(scale, c) / sqrt(mc_get_f(var, c) + eps);
		a->t[c] = mc_get_f(bias, c) - mc_get_f(mean, c) * a->s[c];
	}
	return true;
}

/* k broadcasts against x as a per-channel (axis 1) or scalar constant and
 * leaves x's shape as it is. Returns k's stride along the channel axis
 * (0: one value for every channel), or -1 if it does not fit. */
static int64_t channel_stride(const mc_tensor *k, const mc_value *x)
{
	if (k->shape.rank > x->shape.rank || x->shape.rank < 2)
		return -1;
	int64_t stride = 0, step = 1;
	for (int i = k->shape.rank - 1; i >= 0; i--) {
		int xd = i + x->shape.rank - k->shape.rank;
		int64_t d = k->shape.dims[i];
		if (d != 1 && (xd != 1 || d != x->shape.dims[1]))
			return -1;
		if (xd == 1 && d != 1)
			stride = step;
		step *= d;
	}
	return stride;
}

/* Mul, Add, Sub or Div of the producer's output by a constant. */
static bool binary_affine(const mc_graph *g, const mc_node *n, affine *a)
{
	bool mul = n->id == MC_OP_Mul, add = n->id == MC_OP_Add, sub = n->id == MC_OP_Sub;
	bool div = n->id == MC_OP_Div;
	if ((!mul && !add && !sub && !div) || n->n_inputs != 2 || n->inputs[0] < 0 ||
	    n->inputs[1] < 0)
		return false;
	/* the constant on either side, except for Div (1 / x is no affine map) */
	int xi = g->values[n->inputs[1]].konst ? 0 : 1;
	if (div && xi != 0)
		return false;
	const mc_value *x = &g->values[n->inputs[xi]], *y = &g->values[n->outputs[0]];
	const mc_tensor *k = g->values[n->inputs[1 - xi]].konst;
	if (!k || x->konst || x->dtype != k->dtype || !mc_shape_eq(&x->shape, &y->shape) ||
	    !mc_dtype_is_float(k->dtype))
		return false;
	int64_t stride = channel_stride(k, x);
	if (stride < 0)
		return false;
	size_t ch = (size_t)x->shape.dims[1];
	for (size_t c = 0; c < ch; c++)
		if (div && mc_get_f(k, (size_t)stride * c) == 0)
			return false;
	affine_init(a, n->inputs[xi], ch);
	for (size_t c = 0; c < ch; c++) {
		double v = mc_get_f(k, (size_t)stride * c);
		if (mul)
			a->s[c] = v;
		else if (div)
			a->s[c] = 1 / v;
		else if (add)
			a->t[c] = v;
		else if (xi == 0) /* x - k */
			a->t[c] = -v;
		else {            /* k - x */
			a->s[c] = -1;
			a->t[c] = v;
		}
	}
	return true;
}

/* ---- applying the transform to the producer ---- */

/* Input k of node p now reads value v; the input list grows if needed. */
static void set_input(mc_node *p, int k, int v)
{
	if (k >= p->n_inputs) {
		p->inputs = realloc(p->inputs, (size_t)(k + 1) * sizeof *p->inputs);
		if (!p->inputs) {
			mc_error("out of memory");
			exit(3);
		}
		for (int i = p->n_inputs; i <= k; i++)
			p->inputs[i] = -1;
		p->n_inputs = k + 1;
	}
	p->inputs[k] = v;
}

static bool any_shift(const affine *a)
{
	for (size_t c = 0; c < a->channels; c++)
		if (a->t[c] != 0)
			return true;
	return false;
}

/* Output channel of each weight element, for Conv, ConvTranspose, Gemm. */
typedef struct {
	enum { W_CONV, W_CONV_T, W_GEMM } kind;
	size_t inner;    /* elements per (row, column) step below */
	size_t cols;     /* ConvTranspose: M / group; Gemm: N or K */
	size_t in_per_group;
	bool trans_b;
} weight_layout;

static size_t channel_of(const weight_layout *l, size_t i)
{
	switch (l->kind) {
	case W_CONV: /* [M, C/group, k...] */
		return i / l->inner;
	case W_CONV_T: { /* [C, M/group, k...] */
		size_t j = (i / l->inner) % l->cols, c = i / (l->inner * l->cols);
		return (c / l->in_per_group) * l->cols + j;
	}
	case W_GEMM: /* B is [K, N], or [N, K] with transB */
		return l->trans_b ? i / l->cols : i % l->cols;
	}
	return 0;
}

static int new_weights(mc_graph *g, int w, const weight_layout *l, const affine *a)
{
	const mc_tensor *src = g->values[w].konst;
	mc_tensor *t = mc_tensor_clone(src);
	for (size_t i = 0; i < t->numel; i++)
		mc_set_f(t, i, mc_get_f(src, i) * a->s[channel_of(l, i)]);
	char base[1024];
	snprintf(base, sizeof base, "%s_folded", g->values[w].name);
	return ge_add_const(g, base, t);
}

/* New bias of shape [channels]: b * s + t (b = 0 when absent). */
static int new_bias(mc_graph *g, const mc_node *p, int k, mc_dtype dtype, const affine *a)
{
	const mc_tensor *b = const_input(g, p, k);
	mc_shape s = {.rank = 1, .dims = {(int64_t)a->channels}};
	mc_tensor *t = mc_tensor_new(dtype, &s);
	if (!t)
		return -1;
	for (size_t c = 0; c < a->channels; c++)
		mc_set_f(t, c, (b ? mc_get_f(b, c) : 0) * a->s[c] + a->t[c]);
	char base[1024];
	snprintf(base, sizeof base, "%s_bias_folded", p->name[0] ? p->name : "conv");
	return ge_add_const(g, base, t);
}

/* Conv or ConvTranspose with constant float weights (and bias). */
static bool fold_conv(mc_graph *g, mc_node *p, const affine *a)
{
	bool transposed = p->id == MC_OP_ConvTranspose;
	const mc_tensor *w = const_input(g, p, 1);
	bool has_bias = p->n_inputs > 2 && p->inputs[2] >= 0;
	if (!w || !float_weights(w->dtype) || w->shape.rank < 2 || (has_bias && !const_input(g, p, 2)))
		return false;
	weight_layout l = {.kind = transposed ? W_CONV_T : W_CONV, .inner = 1};
	for (int d = 2; d < w->shape.rank; d++)
		l.inner *= (size_t)w->shape.dims[d];
	if (transposed) {
		int64_t group;
		if (mc_attr_int(p, "group", 1, &group) || group < 1 || w->shape.dims[0] % group)
			return false;
		l.cols = (size_t)w->shape.dims[1];
		l.in_per_group = (size_t)(w->shape.dims[0] / group);
		if (l.cols * (size_t)group != a->channels)
			return false;
	} else {
		l.inner *= (size_t)w->shape.dims[1];
		if ((size_t)w->shape.dims[0] != a->channels)
			return false;
	}
	if (has_bias && const_input(g, p, 2)->numel != a->channels)
		return false;
	int nw = new_weights(g, p->inputs[1], &l, a);
	p->inputs[1] = nw;
	if (has_bias || any_shift(a)) {
		int nb = new_bias(g, p, 2, w->dtype, a);
		if (nb < 0)
			return false;
		set_input(p, 2, nb);
	}
	return true;
}

/* Gemm: Y = alpha A B + beta C. Scaling column n of B scales Y's column n;
 * C becomes C * s + t / beta. */
static bool fold_gemm(mc_graph *g, mc_node *p, const affine *a)
{
	const mc_tensor *b = const_input(g, p, 1);
	const mc_value *y = &g->values[p->outputs[0]];
	bool has_c = p->n_inputs > 2 && p->inputs[2] >= 0;
	const mc_tensor *c = has_c ? const_input(g, p, 2) : NULL;
	int64_t trans_b, broadcast;
	double beta;
	if (!b || !float_weights(b->dtype) || b->shape.rank != 2 || (has_c && !c) ||
	    y->shape.rank != 2 || (size_t)y->shape.dims[1] != a->channels ||
	    mc_attr_int(p, "transB", 0, &trans_b) || mc_attr_float(p, "beta", 1.0, &beta) ||
	    mc_attr_int(p, "broadcast", 0, &broadcast))
		return false;
	bool shift = any_shift(a);
	if (beta == 0 && shift)
		return false; /* beta = 0 ignores C: no place for the shift */
	if (!has_c && !shift) {
		weight_layout l = {.kind = W_GEMM, .trans_b = trans_b != 0,
		                   .cols = (size_t)b->shape.dims[1]};
		p->inputs[1] = new_weights(g, p->inputs[1], &l, a);
		return true;
	}
	if (!has_c && p->opset < 11)
		return false; /* C was required before opset 11: cannot be absent here */
	/* C' is [N], unless C varies along rows (or must be full before opset 7) */
	int64_t rows = y->shape.dims[0], cols = y->shape.dims[1];
	bool full = (c && c->shape.rank == 2 && c->shape.dims[0] != 1) || (p->opset < 7 && !broadcast);
	mc_shape cs = full ? (mc_shape){.rank = 2, .dims = {rows, cols}}
	                   : (mc_shape){.rank = 1, .dims = {cols}};
	mc_tensor *nc = mc_tensor_new(b->dtype, &cs);
	if (!nc)
		return false;
	int64_t cst[MC_MAX_RANK] = {0};
	if (c)
		mc_broadcast_strides(&c->shape, &(mc_shape){.rank = 2, .dims = {rows, cols}}, cst);
	for (size_t i = 0; i < nc->numel; i++) {
		size_t m = full ? i / (size_t)cols : 0, n = i % (size_t)cols;
		double cv = c ? mc_get_f(c, m * (size_t)cst[0] + n * (size_t)cst[1]) : 0;
		double v = beta == 0 ? 0 : cv * a->s[n] + a->t[n] / beta;
		mc_set_f(nc, i, v);
	}
	weight_layout l = {.kind = W_GEMM, .trans_b = trans_b != 0, .cols = (size_t)b->shape.dims[1]};
	p->inputs[1] = new_weights(g, p->inputs[1], &l, a);
	char base[1024];
	snprintf(base, sizeof base, "%s_bias_folded", p->name[0] ? p->name : "gemm");
	set_input(p, 2, ge_add_const(g, base, nc));
	return true;
}

/* The node producing a.x, if a's transform can move into it: a Conv,
 * ConvTranspose or Gemm whose output only n reads. */
static int foldable_producer(const mc_graph *g, const affine *a, const int *uses)
{
	const mc_value *x = &g->values[a->x];
	if (x->kind != MC_VAL_NODE || x->producer < 0 || uses[a->x] != 1)
		return -1;
	const mc_node *p = &g->nodes[x->producer];
	if (!(p->id == MC_OP_Conv || p->id == MC_OP_ConvTranspose || p->id == MC_OP_Gemm) ||
	    p->n_outputs != 1 || p->outputs[0] != a->x || !float_weights(x->dtype))
		return -1;
	return x->producer;
}

/* Tries to fold node i into its producer. True if it did. */
static bool fold_one(mc_graph *g, int i, const int *uses)
{
	mc_node *n = &g->nodes[i];
	affine a = {0};
	if (n->n_inputs < 1 || n->n_outputs < 1 || n->outputs[0] < 0)
		return false;
	bool bn = n->id == MC_OP_BatchNormalization && n->n_inputs == 5 && n->inputs[0] >= 0;
	/* The producer first: the per-channel tables are sized by x's channel
	 * dimension, which only a producer's constant weights vouch for. */
	int var = 0;
	if (!bn && n->n_inputs == 2 && n->inputs[0] >= 0 && g->values[n->inputs[0]].konst)
		var = 1;
	affine probe = {.x = n->inputs[var]};
	if (probe.x < 0 || foldable_producer(g, &probe, uses) < 0)
		return false;
	if (!(bn ? bn_affine(g, n, &a) : binary_affine(g, n, &a)))
		return false;
	int pi = foldable_producer(g, &a, uses);
	bool done = false;
	if (pi >= 0) {
		mc_node *p = &g->nodes[pi];
		done = p->id == MC_OP_Gemm ? fold_gemm(g, p, &a) : fold_conv(g, p, &a);
	}
	if (done) {
		/* the producer writes n's output; its old output is left unused */
		int y = n->outputs[0];
		g->nodes[pi].outputs[0] = y;
		g->values[y].producer = pi;
		g->values[a.x].producer = -1;
	}
	affine_free(&a);
	return done;
}

int mc_pass_fold_bn(mc_graph *g, const mc_freeze_opts *o)
{
	int folded = ge_run_on_branches(g, o, mc_pass_fold_bn);
	if (folded < 0)
		return -1;
	int *uses = ge_use_counts(g);
	bool *dead = mc_xcalloc((size_t)g->n_nodes + 1, sizeof *dead);
	for (int i = 0; i < g->n_nodes; i++) {
		if (!fold_one(g, i, uses))
			continue;
		dead[i] = true;
		folded++;
		/* weights and biases changed: use counts of the new values */
		free(uses);
		uses = ge_use_counts(g);
	}
	/* the folded nodes still read their inputs until removed: drop them from
	 * the counts above by removing them now */
	ge_remove_nodes(g, dead);
	free(dead);
	free(uses);
	return folded;
}
