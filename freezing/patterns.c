/* Ops that exporters write out in basic ops, recognised and replaced by
 * the one op they spell (mc_pass_patterns), so that a fused kernel runs
 * them:
 *
 * - Swish (SiLU): Mul(x, Sigmoid(x)), as PyTorch exports SiLU before
 *   opset 24; then it fuses into the convolution before it as an epilogue
 *   (a chain of one input), where Sigmoid and Mul each read x.
 * - Gelu (exact, with erf), as PyTorch exports GELU before opset 20:
 *   Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5) (or x times 1/sqrt 2,
 *   either order of each Mul and Add), whose x is read twice, so that no
 *   chain fuses it: one Gelu node fuses into the product before it.
 * - LayerNormalization, as exporters write it before opset 17 (PyTorch's
 *   layer_norm at opset 13, many TensorFlow converters):
 *
 *   m = ReduceMean(x, last axis, keepdims)   d = Sub(x, m)
 *   v = ReduceMean(Pow(d, 2), last axis)     s = Sqrt(Add(v, eps))
 *   y = Div(d, s)   [y = Mul(y, gamma)]   [y = Add(y, beta)]
 *
 * becomes one LayerNormalization node (axis -1, epsilon eps; scale gamma
 * or ones, bias beta), so that one fused kernel reads each row twice
 * instead of seven kernels passing it between them. Only where every
 * intermediate value has no other reader, eps is a constant scalar and
 * gamma and beta are constants of one value per element of a row. The
 * result differs from the written-out form by rounding only: (x - m) *
 * (1 / s) against (x - m) / s.
 * - Attention, where the target asks (mc_freeze_opts.fuse_attention): see
 *   "attention" below.
 * - Sibling convolutions concatenated, where the target asks
 *   (mc_freeze_opts.merge_sibling_convs): see "sibling convolutions". */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../libcore/ops/nn.h"
#include "../libcore/ops/tensor.h"
#include "graph_edit.h"

/* The node reading value v, where exactly one node reads it (and no graph
 * output is v); else -1. */
static int sole_reader(const mc_graph *g, const int *uses, int v)
{
	if (v < 0 || uses[v] != 1 || ge_is_graph_output(g, v))
		return -1;
	for (int i = 0; i < g->n_nodes; i++)
		for (int k = 0; k < g->nodes[i].n_inputs; k++)
			if (g->nodes[i].inputs[k] == v)
				return i;
	return -1;
}

static const mc_tensor *konst(const mc_graph *g, int v)
{
	return v >= 0 ? g->values[v].konst : NULL;
}

/* A constant scalar's value in *out. */
static bool scalar(const mc_graph *g, int v, double *out)
{
	const mc_tensor *t = konst(g, v);
	if (!t || t->numel != 1)
		return false;
	*out = mc_get_f(t, 0);
	return true;
}

/* A ReduceMean of x over its last axis alone, keeping it. */
static bool mean_over_last(const mc_graph *g, const mc_node *n, int x)
{
	if (n->id != MC_OP_ReduceMean || n->n_inputs < 1 || n->inputs[0] != x || n->n_outputs != 1)
		return false;
	int rank = g->values[x].shape.rank;
	int64_t keep, axis;
	if (rank < 1 || mc_attr_int(n, "keepdims", 1, &keep) || !keep)
		return false;
	if (n->n_inputs >= 2 && n->inputs[1] >= 0) { /* opset 18: axes as an input */
		const mc_tensor *t = konst(g, n->inputs[1]);
		if (!t || t->numel != 1)
			return false;
		axis = mc_get_i(t, 0);
	} else {
		const int64_t *axes;
		size_t count;
		if (!mc_attr_find(n, "axes") || mc_attr_ints(n, "axes", &axes, &count) || count != 1)
			return false;
		axis = axes[0];
	}
	return axis == -1 || axis == rank - 1;
}

/* Node n is op with inputs a and b (in either order where commutative);
 * the other input in *other. */
static bool binary(const mc_node *n, mc_opid op, int a, int *other)
{
	if (n->id != op || n->n_inputs != 2 || n->n_outputs != 1)
		return false;
	bool comm = op == MC_OP_Add || op == MC_OP_Mul;
	if (n->inputs[0] == a) {
		*other = n->inputs[1];
		return true;
	}
	if (comm && n->inputs[1] == a) {
		*other = n->inputs[0];
		return true;
	}
	return false;
}

/* A constant of `cols` floats that broadcasts along the last axis only. */
static bool per_column(const mc_graph *g, int v, int64_t cols)
{
	const mc_tensor *t = konst(g, v);
	if (!t || (t->dtype != MC_FLOAT && t->dtype != MC_DOUBLE && t->dtype != MC_FLOAT16) ||
	    (int64_t)t->numel != cols || cols < 1)
		return false;
	return t->shape.rank >= 1 && t->shape.dims[t->shape.rank - 1] == cols;
}

/* A float attribute or int attribute, owned by the node. */
static mc_attr float_attr(const char *name, double v)
{
	return (mc_attr){ .name = mc_xstrdup(name), .type = MC_ATTR_FLOAT, .f = v };
}

static mc_attr int_attr(const char *name, int64_t v)
{
	return (mc_attr){ .name = mc_xstrdup(name), .type = MC_ATTR_INT, .i = v };
}

/* A [cols] tensor of ones shaped as the scale input wants. */
static int ones(mc_graph *g, const char *base, mc_dtype dt, int64_t cols)
{
	mc_shape s = { .rank = 1, .dims = { cols } };
	mc_tensor *t = mc_tensor_new(dt, &s);
	if (!t)
		return -1;
	for (int64_t i = 0; i < cols; i++)
		mc_set_f(t, (size_t)i, 1.0);
	return ge_add_const(g, base, t);
}

/* A new node of op id (at opset) named `name` (taken), reading in[] and
 * writing out[], with attrs (taken); parsed. False if it cannot be made. */
static bool new_node_outs(mc_node *n, char *name, mc_opid id, int opset, const int *in, int n_in,
                          const int *out, int n_out, mc_attr *attrs, int n_attrs)
{
	*n = (mc_node){ 0 };
	n->name = name;
	n->domain = mc_xstrdup("");
	n->n_inputs = n_in;
	n->inputs = mc_xmalloc(((size_t)n_in + 1) * sizeof(int));
	memcpy(n->inputs, in, (size_t)n_in * sizeof(int));
	n->n_outputs = n_out;
	n->outputs = mc_xmalloc(((size_t)n_out + 1) * sizeof(int));
	memcpy(n->outputs, out, (size_t)n_out * sizeof(int));
	n->n_attrs = n_attrs;
	n->attrs = mc_xcalloc((size_t)n_attrs + 1, sizeof *n->attrs);
	if (n_attrs > 0)
		memcpy(n->attrs, attrs, (size_t)n_attrs * sizeof *attrs);
	if (!mc_node_set_op(n, id, opset) || (n->op->parse && n->op->parse(n))) {
		mc_node_free(n);
		return false;
	}
	return true;
}

/* The same, of one output, named after `name`. */
static bool new_node(mc_node *n, const char *name, mc_opid id, int opset, const int *in, int n_in,
                     int out, mc_attr *attrs, int n_attrs)
{
	return new_node_outs(n, mc_xstrdup(name), id, opset, in, n_in, &out, 1, attrs, n_attrs);
}

/* A new value of dtype and shape, named after base. */
static int new_value(mc_graph *g, const char *base, mc_dtype dtype, const mc_shape *shape)
{
	char *name = ge_unique_name(g, base);
	int v = mc_graph_add_value(g, name, MC_VAL_NODE);
	free(name);
	g->values[v].dtype = dtype;
	g->values[v].shape = *shape;
	g->values[v].typed = true;
	return v;
}

/* Swish at Sigmoid node i: its output read only by Mul(x, s). */
static int match_swish(mc_graph *g, int i, const int *uses, bool *dead, mc_node *out)
{
	const mc_node *n = &g->nodes[i];
	if (n->id != MC_OP_Sigmoid || n->n_inputs != 1 || n->n_outputs != 1 || n->inputs[0] < 0)
		return -1;
	int x = n->inputs[0], other;
	int mul = sole_reader(g, uses, n->outputs[0]);
	if (mul < 0 || !binary(&g->nodes[mul], MC_OP_Mul, n->outputs[0], &other) || other != x ||
	    g->values[x].dtype != MC_FLOAT)
		return -1;
	mc_attr alpha = float_attr("alpha", 1.0);
	if (!new_node(out, g->nodes[mul].name, MC_OP_Swish, 24, &x, 1, g->nodes[mul].outputs[0], &alpha, 1))
		return -1;
	dead[i] = true;
	return mul;
}

/* v within a millionth of want. */
static bool near(double v, double want)
{
	return v > want - 1e-6 * want && v < want + 1e-6 * want;
}

/* Gelu at Erf node i: marks the Div, Erf, Add and first Mul dead and
 * returns the second Mul's index, or -1. */
static int match_gelu(mc_graph *g, int i, const int *uses, bool *dead, mc_node *out)
{
	const mc_node *n = &g->nodes[i];
	if (n->id != MC_OP_Erf || n->n_inputs != 1 || n->n_outputs != 1 || n->inputs[0] < 0 || n->outputs[0] < 0)
		return -1;
	int d = n->inputs[0], dv = g->values[d].producer, x, other;
	double c, one, half;
	if (dv < 0 || uses[d] != 1 || ge_is_graph_output(g, d) || g->nodes[dv].n_inputs != 2)
		return -1;
	const mc_node *scale = &g->nodes[dv];
	if (scale->id == MC_OP_Div && scalar(g, scale->inputs[1], &c) && near(c, 1.4142135623730951))
		x = scale->inputs[0];
	else if (scale->id == MC_OP_Mul && scalar(g, scale->inputs[1], &c) && near(c, 0.7071067811865476))
		x = scale->inputs[0];
	else if (scale->id == MC_OP_Mul && scalar(g, scale->inputs[0], &c) && near(c, 0.7071067811865476))
		x = scale->inputs[1];
	else
		return -1;
	if (x < 0 || g->values[x].dtype != MC_FLOAT)
		return -1;
	int add = sole_reader(g, uses, n->outputs[0]);
	if (add < 0 || !binary(&g->nodes[add], MC_OP_Add, n->outputs[0], &other) || !scalar(g, other, &one) ||
	    one != 1.0)
		return -1;
	int mul = sole_reader(g, uses, g->nodes[add].outputs[0]);
	if (mul < 0 || !binary(&g->nodes[mul], MC_OP_Mul, g->nodes[add].outputs[0], &other) || other != x)
		return -1;
	int mul2 = sole_reader(g, uses, g->nodes[mul].outputs[0]);
	if (mul2 < 0 || !binary(&g->nodes[mul2], MC_OP_Mul, g->nodes[mul].outputs[0], &other) ||
	    !scalar(g, other, &half) || half != 0.5)
		return -1;
	int y = g->nodes[mul2].outputs[0];
	if (y < 0 || g->values[y].dtype != MC_FLOAT ||
	    !mc_shape_eq(&g->values[y].shape, &g->values[x].shape))
		return -1;
	/* approximate "none" (the default): erf */
	if (!new_node(out, g->nodes[mul2].name, MC_OP_Gelu, 20, &x, 1, y, NULL, 0))
		return -1;
	dead[dv] = dead[i] = dead[add] = dead[mul] = true;
	return mul2;
}

/* LayerNormalization at ReduceMean node r1; marks the nodes it replaces
 * in dead and returns the index of the new node's place (the last of
 * them), or -1. */
static int match_layernorm(mc_graph *g, int r1, const int *uses, bool *dead, mc_node *out)
{
	const mc_node *n = &g->nodes[r1];
	if (n->id != MC_OP_ReduceMean || n->n_inputs < 1)
		return -1;
	int x = n->inputs[0];
	const mc_value *xv = &g->values[x];
	if (x < 0 || !mean_over_last(g, n, x) || (xv->dtype != MC_FLOAT && xv->dtype != MC_FLOAT16))
		return -1;
	int64_t cols = xv->shape.dims[xv->shape.rank - 1];
	int sub = sole_reader(g, uses, n->outputs[0]), other;
	if (sub < 0 || g->nodes[sub].id != MC_OP_Sub || g->nodes[sub].n_inputs != 2 ||
	    g->nodes[sub].inputs[0] != x || g->nodes[sub].inputs[1] != n->outputs[0])
		return -1;
	int d = g->nodes[sub].outputs[0];
	if (d < 0 || uses[d] != 2 || ge_is_graph_output(g, d))
		return -1;
	int pw = -1, div = -1;
	for (int i = 0; i < g->n_nodes; i++)
		for (int k = 0; k < g->nodes[i].n_inputs; k++)
			if (g->nodes[i].inputs[k] == d) {
				if (g->nodes[i].id == MC_OP_Pow && k == 0)
					pw = i;
				else if (g->nodes[i].id == MC_OP_Div && k == 0)
					div = i;
			}
	double two, eps;
	if (pw < 0 || div < 0 || g->nodes[pw].n_inputs != 2 || !scalar(g, g->nodes[pw].inputs[1], &two) ||
	    two != 2.0)
		return -1;
	int r2 = sole_reader(g, uses, g->nodes[pw].outputs[0]);
	if (r2 < 0 || !mean_over_last(g, &g->nodes[r2], g->nodes[pw].outputs[0]))
		return -1;
	int add = sole_reader(g, uses, g->nodes[r2].outputs[0]);
	if (add < 0 || !binary(&g->nodes[add], MC_OP_Add, g->nodes[r2].outputs[0], &other) ||
	    !scalar(g, other, &eps) || !(eps >= 0))
		return -1;
	int sq = sole_reader(g, uses, g->nodes[add].outputs[0]);
	if (sq < 0 || g->nodes[sq].id != MC_OP_Sqrt || g->nodes[sq].n_outputs != 1 ||
	    sole_reader(g, uses, g->nodes[sq].outputs[0]) != div || g->nodes[div].n_inputs != 2 ||
	    g->nodes[div].inputs[1] != g->nodes[sq].outputs[0])
		return -1;
	int chain[9] = { r1, sub, pw, r2, add, sq, div }, n_chain = 7;
	int y = g->nodes[div].outputs[0], scale = -1, bias = -1;
	int mul = sole_reader(g, uses, y);
	if (mul >= 0 && binary(&g->nodes[mul], MC_OP_Mul, y, &other) && per_column(g, other, cols)) {
		scale = other;
		y = g->nodes[mul].outputs[0];
		chain[n_chain++] = mul;
		int badd = sole_reader(g, uses, y);
		if (badd >= 0 && binary(&g->nodes[badd], MC_OP_Add, y, &other) && per_column(g, other, cols)) {
			bias = other;
			y = g->nodes[badd].outputs[0];
			chain[n_chain++] = badd;
		}
	}
	int last = chain[n_chain - 1];
	if (g->values[y].dtype != xv->dtype)
		return -1;
	const char *name = g->nodes[div].name;
	if (scale < 0 && (scale = ones(g, "layernorm_scale", xv->dtype, cols)) < 0)
		return -1;
	/* the new node takes the last one's place: every reader of y follows it */
	int in[3] = { x, scale, bias };
	mc_attr attrs[2] = { int_attr("axis", -1), float_attr("epsilon", eps) };
	if (!new_node(out, name, MC_OP_LayerNormalization, 17, in, bias >= 0 ? 3 : 2, y, attrs, 2))
		return -1;
	for (int i = 0; i < n_chain - 1; i++)
		dead[chain[i]] = true;
	return last;
}

/* ---- attention ----
 * Softmax(Q K^T [* c or / c] [+ mask]) V, over [B, H, S, D] heads that
 * exporters carve out of [B, S, H * D] projections, and the result put
 * back as [B, S, H * Dv]:
 *
 *   Q4 = Transpose(Reshape(Q3, [B, S, H, D]), [0, 2, 1, 3])
 *   K^T = Transpose(Reshape(K3, [B, T, H, D]), [0, 2, 3, 1])  (or K4^T)
 *   Y = Reshape(Transpose(MatMul(Softmax(..), V4), [0, 2, 1, 3]), [B, S, H * Dv])
 *
 * or heads from one packed projection (torch's MultiheadAttention, ViT):
 * Squeeze(Split(Transpose(Reshape(X, [B, S, 3, H, D]), [2, 0, 3, 1, 4])))
 * becomes Split(X, axis 2) into Q3, K3, V3. It becomes one ONNX Attention
 * (opset 23, 3-D: q_num_heads = kv_num_heads = H, scale c), which the
 * cuda target runs as one kernel (aot/kern_cuda.c). Only where every value
 * of the chain but the heads' sources has one reader. */

/* The node producing v if it is op `id`, else -1. */
static int made_by(const mc_graph *g, int v, mc_opid id)
{
	int p = v >= 0 ? g->values[v].producer : -1;
	return p >= 0 && g->nodes[p].id == id ? p : -1;
}

static bool perm_is(const mc_node *n, const int64_t *want, size_t count)
{
	const int64_t *perm;
	size_t got;
	if (n->id != MC_OP_Transpose || !mc_attr_find(n, "perm") || mc_attr_ints(n, "perm", &perm, &got) ||
	    got != count)
		return false;
	for (size_t i = 0; i < count; i++)
		if (perm[i] != want[i])
			return false;
	return true;
}

static const mc_shape *shape_of(const mc_graph *g, int v)
{
	return &g->values[v].shape;
}

/* Where heads h (rank-4 value v, [B, H, S, D]; with k_t, [B, H, D, S])
 * come from: part *part of *parts equal parts of the last axis of *base,
 * [B, S, parts * H * D]. */
static bool head_source(const mc_graph *g, int v, bool k_t, int *base, int *part, int *parts)
{
	static const int64_t bhsd[4] = { 0, 2, 1, 3 }, bhds[4] = { 0, 2, 3, 1 }, swap[4] = { 0, 1, 3, 2 };
	static const int64_t packed[5] = { 2, 0, 3, 1, 4 };
	const mc_shape *vs = shape_of(g, v);
	int t = made_by(g, v, MC_OP_Transpose);
	if (vs->rank != 4)
		return false;
	if (k_t && t >= 0 && perm_is(&g->nodes[t], swap, 4)) /* K4^T */
		return head_source(g, g->nodes[t].inputs[0], false, base, part, parts);
	if (t >= 0 && perm_is(&g->nodes[t], k_t ? bhds : bhsd, 4)) {
		int r = made_by(g, g->nodes[t].inputs[0], MC_OP_Reshape);
		if (r < 0)
			return false;
		int x = g->nodes[r].inputs[0];
		const mc_shape *rs = shape_of(g, g->nodes[r].outputs[0]), *xs = shape_of(g, x);
		if (rs->rank != 4 || xs->rank != 3 || xs->dims[0] != rs->dims[0] || xs->dims[1] != rs->dims[1] ||
		    xs->dims[2] != rs->dims[2] * rs->dims[3])
			return false;
		*base = x;
		*part = 0;
		*parts = 1;
		return true;
	}
	/* Squeeze(Split(Transpose(Reshape(X, [B, S, P, H, D]), [2, 0, 3, 1, 4]))[i], 0) */
	int sq = made_by(g, v, MC_OP_Squeeze);
	if (k_t || sq < 0)
		return false;
	int sv = g->nodes[sq].inputs[0], sp = made_by(g, sv, MC_OP_Split);
	const mc_shape *ss = shape_of(g, sv);
	if (sp < 0 || ss->rank != 5 || ss->dims[0] != 1)
		return false;
	const mc_node *split = &g->nodes[sp];
	int64_t axis;
	if (mc_attr_int(split, "axis", 0, &axis) || axis != 0)
		return false;
	int i = -1;
	for (int o = 0; o < split->n_outputs; o++) {
		if (split->outputs[o] < 0 || shape_of(g, split->outputs[o])->dims[0] != 1)
			return false;
		if (split->outputs[o] == sv)
			i = o;
	}
	int tp = made_by(g, split->inputs[0], MC_OP_Transpose);
	if (i < 0 || tp < 0 || !perm_is(&g->nodes[tp], packed, 5))
		return false;
	int r = made_by(g, g->nodes[tp].inputs[0], MC_OP_Reshape);
	if (r < 0)
		return false;
	int x = g->nodes[r].inputs[0];
	const mc_shape *rs = shape_of(g, g->nodes[r].outputs[0]), *xs = shape_of(g, x);
	if (rs->rank != 5 || xs->rank != 3 || rs->dims[2] != split->n_outputs || xs->dims[0] != rs->dims[0] ||
	    xs->dims[1] != rs->dims[1] || xs->dims[2] != rs->dims[2] * rs->dims[3] * rs->dims[4])
		return false;
	*base = x;
	*part = i;
	*parts = split->n_outputs;
	return true;
}

typedef struct {
	int at;              /* the final Reshape's node: the new nodes take its place */
	int chain[8], n_chain;
	int q, k, v, mask;   /* sources (mask -1: none) */
	int qp, kp, vp, parts; /* parts > 1: q, k, v are parts qp, kp, vp of one source */
	int64_t heads;
	double scale;
} attn_match;

/* v is Q K^T, or it scaled: a MatMul's output, or a Mul's or Div's of one. */
static bool scores_path(const mc_graph *g, int v)
{
	int p = v >= 0 ? g->values[v].producer : -1;
	if (p < 0)
		return false;
	const mc_node *n = &g->nodes[p];
	if (n->id == MC_OP_MatMul)
		return true;
	return (n->id == MC_OP_Mul || n->id == MC_OP_Div) && n->n_inputs == 2 &&
	       (made_by(g, n->inputs[0], MC_OP_MatMul) >= 0 || made_by(g, n->inputs[1], MC_OP_MatMul) >= 0);
}

/* v, or what v scales where it is x * c or x / c (c a positive scalar
 * constant, v read once): the factor goes into m's scale, the node into
 * its chain. -1: a scaling that cannot fold. */
static int scaled_by(const mc_graph *g, const int *uses, int v, attn_match *m)
{
	int mul = made_by(g, v, MC_OP_Mul), div = made_by(g, v, MC_OP_Div), sc = mul >= 0 ? mul : div;
	if (sc < 0)
		return v;
	const mc_node *n = &g->nodes[sc];
	double c;
	int x = n->inputs[0], other = n->inputs[1];
	if (mul >= 0 && scalar(g, x, &c)) { /* c * x */
		x = n->inputs[1];
		other = n->inputs[0];
	}
	if (!scalar(g, other, &c))
		return v; /* not a scaling: head_source judges v */
	if (uses[v] != 1 || ge_is_graph_output(g, v) || !(c > 0) || !isfinite(c) || m->n_chain >= 8)
		return -1;
	m->scale *= div >= 0 ? 1 / c : c;
	m->chain[m->n_chain++] = sc;
	return x;
}

static bool match_attention(const mc_graph *g, int i, const int *uses, attn_match *m)
{
	const mc_node *sm = &g->nodes[i];
	int64_t axis;
	if (sm->id != MC_OP_Softmax || sm->n_inputs != 1 || sm->n_outputs != 1 || sm->inputs[0] < 0 ||
	    mc_attr_int(sm, "axis", sm->opset < 13 ? 1 : -1, &axis) || (axis != -1 && axis != 3) ||
	    shape_of(g, sm->inputs[0])->rank != 4)
		return false;
	*m = (attn_match){ .mask = -1, .scale = 1 };
	int x = sm->inputs[0], other;
	double c;
	/* [+ mask]: a float of the scores' type broadcast to them */
	int add = made_by(g, x, MC_OP_Add);
	if (add >= 0 && uses[x] == 1 && !ge_is_graph_output(g, x)) {
		const mc_node *a = &g->nodes[add];
		int mm = scores_path(g, a->inputs[0]) ? 0 : 1;
		if (!scores_path(g, a->inputs[mm]))
			return false;
		m->mask = a->inputs[1 - mm];
		if (g->values[m->mask].dtype != g->values[x].dtype)
			return false;
		m->chain[m->n_chain++] = add;
		x = a->inputs[mm];
	}
	/* [* c or / c] */
	int mul = made_by(g, x, MC_OP_Mul), div = made_by(g, x, MC_OP_Div), sc = mul >= 0 ? mul : div;
	if (sc >= 0 && uses[x] == 1 && !ge_is_graph_output(g, x)) {
		const mc_node *n = &g->nodes[sc];
		int mmv = made_by(g, n->inputs[0], MC_OP_MatMul) >= 0 ? n->inputs[0] : n->inputs[1];
		if (!binary(n, n->id, mmv, &other) || !scalar(g, other, &c) || !(c > 0) || !isfinite(c))
			return false;
		m->scale = div >= 0 ? 1 / c : c;
		m->chain[m->n_chain++] = sc;
		x = mmv;
	}
	int mm1 = made_by(g, x, MC_OP_MatMul);
	if (mm1 < 0 || uses[x] != 1 || ge_is_graph_output(g, x))
		return false;
	m->chain[m->n_chain++] = mm1;
	m->chain[m->n_chain++] = i;
	int mm2 = sole_reader(g, uses, sm->outputs[0]);
	if (mm2 < 0 || g->nodes[mm2].id != MC_OP_MatMul || g->nodes[mm2].inputs[0] != sm->outputs[0])
		return false;
	int o4 = g->nodes[mm2].outputs[0];
	int to = sole_reader(g, uses, o4);
	static const int64_t bshd[4] = { 0, 2, 1, 3 };
	if (to < 0 || !perm_is(&g->nodes[to], bshd, 4))
		return false;
	int ro = sole_reader(g, uses, g->nodes[to].outputs[0]);
	if (ro < 0 || g->nodes[ro].id != MC_OP_Reshape)
		return false;
	m->chain[m->n_chain++] = mm2;
	m->chain[m->n_chain++] = to;
	m->at = ro;
	const mc_shape *os = shape_of(g, o4), *ys = shape_of(g, g->nodes[ro].outputs[0]);
	const mc_shape *qs = shape_of(g, g->nodes[mm1].inputs[0]);
	if (os->rank != 4 || ys->rank != 3 || ys->dims[0] != os->dims[0] || ys->dims[1] != os->dims[2] ||
	    ys->dims[2] != os->dims[1] * os->dims[3] || qs->rank != 4)
		return false;
	m->heads = qs->dims[1];
	/* Q and K^T each scaled before the product (torch's
	 * scaled_dot_product_attention: both by the square root of the scale) */
	int qa = scaled_by(g, uses, g->nodes[mm1].inputs[0], m), ka = scaled_by(g, uses, g->nodes[mm1].inputs[1], m);
	if (qa < 0 || ka < 0)
		return false;
	int qb, kb, vb, qparts, kparts, vparts;
	if (!head_source(g, qa, false, &qb, &m->qp, &qparts) || !head_source(g, ka, true, &kb, &m->kp, &kparts) ||
	    !head_source(g, g->nodes[mm2].inputs[1], false, &vb, &m->vp, &vparts))
		return false;
	m->q = qb;
	m->k = kb;
	m->v = vb;
	m->parts = 1;
	if (qparts > 1 || kparts > 1 || vparts > 1) { /* one packed source, three of its parts */
		if (qb != kb || kb != vb || qparts != 3 || kparts != 3 || vparts != 3 || m->qp == m->kp ||
		    m->kp == m->vp || m->qp == m->vp)
			return false;
		m->parts = 3;
	}
	mc_dtype dt = g->values[m->q].dtype;
	if ((dt != MC_FLOAT && dt != MC_FLOAT16) || g->values[m->k].dtype != dt || g->values[m->v].dtype != dt)
		return false;
	/* the mask broadcasts to the scores [B, H, S, T] */
	if (m->mask >= 0) {
		const mc_shape *ms = shape_of(g, m->mask), *ss = shape_of(g, sm->inputs[0]);
		if (ms->rank > 4)
			return false;
		for (int d = 0; d < ms->rank; d++) {
			int64_t want = ss->dims[4 - ms->rank + d];
			if (ms->dims[d] != 1 && ms->dims[d] != want)
				return false;
		}
	}
	return true;
}

/* The nodes for match m: [Split of the packed source] and the Attention
 * writing the final Reshape's output; 0 where the ops refuse them. */
static int build_attention(mc_graph *g, const attn_match *m, mc_node *nodes)
{
	int y = g->nodes[m->at].outputs[0], n = 0;
	const char *name = g->nodes[m->at].name;
	int in[4] = { m->q, m->k, m->v, m->mask };
	if (m->parts > 1) {
		mc_shape ps = g->values[m->q].shape;
		ps.dims[2] /= 3;
		int parts[3];
		for (int o = 0; o < 3; o++)
			parts[o] = new_value(g, "attention_part", g->values[m->q].dtype, &ps);
		mc_attr attrs[2] = { int_attr("axis", 2), int_attr("num_outputs", 3) };
		if (!new_node_outs(&nodes[n++], ge_unique_name(g, "attention_split"), MC_OP_Split, 18, &m->q, 1, parts, 3,
		                   attrs, 2))
			return 0;
		in[0] = parts[m->qp];
		in[1] = parts[m->kp];
		in[2] = parts[m->vp];
	}
	mc_attr attrs[3] = { int_attr("q_num_heads", m->heads), int_attr("kv_num_heads", m->heads),
	                     float_attr("scale", m->scale) };
	if (!new_node(&nodes[n], name, MC_OP_Attention, 23, in, m->mask >= 0 ? 4 : 3, y, attrs, 3)) {
		if (n)
			mc_node_free(&nodes[0]);
		return 0;
	}
	return n + 1;
}

static int fuse_attention(mc_graph *g)
{
	int changed = 0;
	for (bool found = true; found;) {
		found = false;
		int *uses = ge_use_counts(g);
		for (int i = 0; i < g->n_nodes && !found; i++) {
			attn_match m;
			mc_node made[2];
			int n_made;
			if (!match_attention(g, i, uses, &m) || !(n_made = build_attention(g, &m, made)))
				continue;
			/* the chain's nodes all come before the final Reshape */
			bool *dead = calloc((size_t)g->n_nodes + 2, sizeof *dead);
			if (!dead) {
				for (int k = 0; k < n_made; k++)
					mc_node_free(&made[k]);
				free(uses);
				return -1;
			}
			for (int k = 0; k < m.n_chain; k++)
				dead[m.chain[k]] = true;
			ge_splice_nodes(g, m.at, made, n_made);
			ge_remove_nodes(g, dead);
			free(dead);
			found = true;
			changed++;
		}
		free(uses);
	}
	return changed;
}

/* ---- sibling projections ----
 * MatMuls of one input by constant [K, N_i] matrices, each plus a
 * constant [N_i] bias (an attention block's q, k and v), become one
 * product by the matrices side by side, one Add of the biases side by
 * side and a Split back into the parts, where the target asks
 * (fuse_attention): one product's launches instead of one per sibling. */

/* Node i as x W + b (W constant [K, N], b constant [N], the product read
 * by the Add alone): the Add's index, N and b, or -1. */
static int projection(const mc_graph *g, const int *uses, int i, int x, int64_t k, int64_t *n_out,
                      const mc_tensor **bias)
{
	const mc_node *mm = &g->nodes[i];
	if (mm->id != MC_OP_MatMul || mm->n_inputs != 2 || mm->n_outputs != 1 || mm->inputs[0] != x)
		return -1;
	const mc_tensor *w = konst(g, mm->inputs[1]);
	if (!w || w->dtype != MC_FLOAT || w->shape.rank != 2 || w->shape.dims[0] != k)
		return -1;
	int add = sole_reader(g, uses, mm->outputs[0]), other;
	if (add < 0 || !binary(&g->nodes[add], MC_OP_Add, mm->outputs[0], &other))
		return -1;
	const mc_tensor *b = konst(g, other);
	if (!b || b->dtype != MC_FLOAT || b->shape.rank != 1 || b->shape.dims[0] != w->shape.dims[1] ||
	    g->values[g->nodes[add].outputs[0]].dtype != MC_FLOAT)
		return -1;
	*n_out = w->shape.dims[1];
	*bias = b;
	return add;
}

#define MAX_SIBLINGS 8

static int fuse_siblings_once(mc_graph *g, const int *uses)
{
	for (int i = 0; i < g->n_nodes; i++) {
		const mc_node *first = &g->nodes[i];
		if (first->id != MC_OP_MatMul || first->n_inputs != 2 || first->inputs[0] < 0)
			continue;
		int x = first->inputs[0];
		const mc_shape *xs = &g->values[x].shape;
		if (xs->rank < 2 || g->values[x].dtype != MC_FLOAT)
			continue;
		int64_t k = xs->dims[xs->rank - 1], n[MAX_SIBLINGS], total = 0;
		int mm[MAX_SIBLINGS], add[MAX_SIBLINGS], count = 0;
		const mc_tensor *bias[MAX_SIBLINGS];
		for (int j = i; j < g->n_nodes && count < MAX_SIBLINGS; j++) {
			int a = projection(g, uses, j, x, k, &n[count], &bias[count]);
			if (a < 0)
				continue;
			mm[count] = j;
			add[count] = a;
			total += n[count++];
		}
		if (count < 2 || mm[0] != i)
			continue;
		/* the matrices and biases side by side */
		mc_tensor *w = mc_tensor_new(MC_FLOAT, &(mc_shape){ .rank = 2, .dims = { k, total } });
		mc_tensor *b = mc_tensor_new(MC_FLOAT, &(mc_shape){ .rank = 1, .dims = { total } });
		mc_tensor *sizes = mc_tensor_new(MC_INT64, &(mc_shape){ .rank = 1, .dims = { count } });
		if (!w || !b || !sizes) {
			mc_tensor_free(w);
			mc_tensor_free(b);
			mc_tensor_free(sizes);
			return -1;
		}
		float *wd = w->data, *bd = b->data;
		int64_t at = 0;
		for (int s = 0; s < count; s++) {
			const float *ws = konst(g, g->nodes[mm[s]].inputs[1])->data, *bs = bias[s]->data;
			for (int64_t r = 0; r < k; r++)
				memcpy(wd + r * total + at, ws + r * n[s], (size_t)n[s] * sizeof(float));
			memcpy(bd + at, bs, (size_t)n[s] * sizeof(float));
			((int64_t *)sizes->data)[s] = n[s];
			at += n[s];
		}
		int wv = ge_add_const(g, "packed_projection", w), bv = ge_add_const(g, "packed_projection_bias", b);
		int sv = ge_add_const(g, "packed_projection_split", sizes);
		mc_shape ps = *xs;
		ps.dims[ps.rank - 1] = total;
		int prod = new_value(g, "packed_projection_product", MC_FLOAT, &ps);
		int sum = new_value(g, "packed_projection_sum", MC_FLOAT, &ps);
		mc_node made[3];
		int outs[MAX_SIBLINGS];
		for (int s = 0; s < count; s++)
			outs[s] = g->nodes[add[s]].outputs[0];
		int mm_in[2] = { x, wv }, add_in[2] = { prod, bv }, split_in[2] = { sum, sv };
		mc_attr axis = int_attr("axis", -1);
		if (!new_node(&made[0], first->name, MC_OP_MatMul, 13, mm_in, 2, prod, NULL, 0))
			return -1;
		if (!new_node(&made[1], g->nodes[add[0]].name, MC_OP_Add, 14, add_in, 2, sum, NULL, 0)) {
			mc_node_free(&made[0]);
			return -1;
		}
		if (!new_node_outs(&made[2], ge_unique_name(g, "packed_projection_split"), MC_OP_Split, 13, split_in, 2,
		                   outs, count, &axis, 1)) {
			mc_node_free(&made[0]);
			mc_node_free(&made[1]);
			return -1;
		}
		/* the new nodes take the first product's place (x is made before
		 * it, the parts are read after the Adds); the old ones go */
		bool *dead = calloc((size_t)g->n_nodes + 4, sizeof *dead);
		if (!dead) {
			for (int m = 0; m < 3; m++)
				mc_node_free(&made[m]);
			return -1;
		}
		for (int s = 0; s < count; s++) {
			if (mm[s] != i)
				dead[mm[s] + 2] = true;
			dead[add[s] + 2] = true;
		}
		ge_splice_nodes(g, i, made, 3);
		ge_remove_nodes(g, dead);
		free(dead);
		return 1;
	}
	return 0;
}

static int fuse_siblings(mc_graph *g)
{
	int changed = 0;
	for (;;) {
		int *uses = ge_use_counts(g);
		int r = fuse_siblings_once(g, uses);
		free(uses);
		if (r < 0)
			return -1;
		if (r == 0)
			return changed;
		changed++;
	}
}

/* ---- sibling convolutions ----
 * A Concat along channels of 2-D convolutions of one input x (group 1,
 * the same strides, no dilation, explicit pads, constant float weights
 * and biases), each read by the Concat alone, or each through a Relu read
 * by it alone, becomes one convolution by the siblings' weights stacked,
 * each placed in one window that holds all of theirs ([.., Relu] after
 * it): squeezenet's fire modules, a 1x1 and a 3x3 of one input, become one
 * 3x3 with zeros around the 1x1's taps. Where the target asks
 * (merge_sibling_convs: a GPU, where two launches and the Concat's copies
 * cost more than the zero taps' multiplies). The sums differ from the
 * siblings' by the zero terms only: exact. */

typedef struct {
	int conv, relu;             /* nodes; relu -1 where the Concat reads the conv */
	const mc_tensor *w, *b;     /* [m, c, kh, kw]; b NULL: none */
	const nn_params *p;
} conv_sibling;

/* Concat input v as a sibling of x's convolutions (relu: through a Relu). */
static bool sibling_of(const mc_graph *g, const int *uses, int v, bool relu, conv_sibling *s)
{
	if (v < 0 || uses[v] != 1 || ge_is_graph_output(g, v) || g->values[v].producer < 0)
		return false;
	s->relu = relu ? g->values[v].producer : -1;
	if (relu) {
		const mc_node *r = &g->nodes[s->relu];
		if (r->id != MC_OP_Relu || r->n_inputs != 1 || r->inputs[0] < 0)
			return false;
		v = r->inputs[0];
		if (uses[v] != 1 || ge_is_graph_output(g, v) || g->values[v].producer < 0)
			return false;
	}
	s->conv = g->values[v].producer;
	const mc_node *c = &g->nodes[s->conv];
	if (c->id != MC_OP_Conv || c->n_inputs < 2 || c->n_outputs != 1 || !c->params)
		return false;
	s->p = c->params;
	s->w = konst(g, c->inputs[1]);
	s->b = c->n_inputs > 2 && c->inputs[2] >= 0 ? konst(g, c->inputs[2]) : NULL;
	if (c->n_inputs > 2 && c->inputs[2] >= 0 && !s->b)
		return false;
	if (!s->w || s->w->dtype != MC_FLOAT || s->w->shape.rank != 4 || s->p->group != 1 ||
	    s->p->auto_pad != PAD_NOTSET)
		return false;
	if (s->b && (s->b->dtype != MC_FLOAT || s->b->numel != (size_t)s->w->shape.dims[0]))
		return false;
	for (int d = 0; d < 2; d++)
		if (s->p->dilations.given && s->p->dilations.v[d] != 1)
			return false;
	return true;
}

static int64_t pad_of(const nn_params *p, int i)
{
	return p->pads.given ? p->pads.v[i] : 0;
}

static int64_t stride_of(const nn_params *p, int d)
{
	return p->strides.given ? p->strides.v[d] : 1;
}

#define MAX_CONV_SIBLINGS 8

/* Concat node ci of siblings: the merged Conv (and Relu) in its place. 1
 * done, 0 not of the form, -1 out of memory. */
static int merge_convs_at(mc_graph *g, const int *uses, int ci)
{
	const mc_node *cat = &g->nodes[ci];
	int axis, y = cat->n_outputs == 1 ? cat->outputs[0] : -1;
	if (cat->id != MC_OP_Concat || y < 0 || cat->n_inputs < 2 || cat->n_inputs > MAX_CONV_SIBLINGS ||
	    g->values[y].shape.rank != 4 || g->values[y].dtype != MC_FLOAT || mc_concat_axis(cat, 4, &axis) ||
	    axis != 1)
		return 0;
	conv_sibling s[MAX_CONV_SIBLINGS];
	int v0 = cat->inputs[0];
	bool relu = v0 >= 0 && g->values[v0].producer >= 0 && g->nodes[g->values[v0].producer].id == MC_OP_Relu;
	int x = -1, n = cat->n_inputs;
	int64_t m = 0, c = 0, begin[2] = { 0, 0 }, out[2], in[2], k[2] = { 0, 0 };
	for (int i = 0; i < n; i++) {
		if (!sibling_of(g, uses, cat->inputs[i], relu, &s[i]))
			return 0;
		const mc_node *cv = &g->nodes[s[i].conv];
		if (i == 0) {
			x = cv->inputs[0];
			c = s[i].w->shape.dims[1];
		}
		if (cv->inputs[0] != x || x < 0 || s[i].w->shape.dims[1] != c || cv->guard != cat->guard ||
		    cv->guard_else != cat->guard_else || (relu && (g->nodes[s[i].relu].guard != cat->guard ||
		                                                   g->nodes[s[i].relu].guard_else != cat->guard_else)))
			return 0;
		for (int j = 0; j < i; j++)
			if (s[j].conv == s[i].conv)
				return 0;
		for (int d = 0; d < 2; d++) {
			if (stride_of(s[i].p, d) != stride_of(s[0].p, d))
				return 0;
			if (pad_of(s[i].p, d) > begin[d])
				begin[d] = pad_of(s[i].p, d);
		}
		m += s[i].w->shape.dims[0];
	}
	const mc_shape *xs = &g->values[x].shape;
	if (xs->rank != 4 || xs->dims[1] != c)
		return 0;
	/* the merged window: sibling i's taps start begin - its pad into it */
	for (int d = 0; d < 2; d++) {
		in[d] = xs->dims[2 + d];
		out[d] = g->values[y].shape.dims[2 + d];
		for (int i = 0; i < n; i++) {
			int64_t end = begin[d] - pad_of(s[i].p, d) + s[i].w->shape.dims[2 + d];
			if (end > k[d])
				k[d] = end;
		}
	}
	/* its end pads: the siblings' output size (none negative) */
	int64_t pads[4];
	for (int d = 0; d < 2; d++) {
		int64_t st = stride_of(s[0].p, d), end = (out[d] - 1) * st + k[d] - in[d] - begin[d];
		if (end < 0 || (in[d] + begin[d] + end - k[d]) / st + 1 != out[d])
			return 0;
		pads[d] = begin[d];
		pads[2 + d] = end;
	}
	mc_tensor *w = mc_tensor_new(MC_FLOAT, &(mc_shape){ .rank = 4, .dims = { m, c, k[0], k[1] } });
	mc_tensor *b = mc_tensor_new(MC_FLOAT, &(mc_shape){ .rank = 1, .dims = { m } });
	if (!w || !b) {
		mc_tensor_free(w);
		mc_tensor_free(b);
		return -1;
	}
	float *wd = w->data, *bd = b->data; /* zeroed */
	int64_t o = 0;
	for (int i = 0; i < n; i++) {
		const float *ws = s[i].w->data;
		int64_t mi = s[i].w->shape.dims[0], kh = s[i].w->shape.dims[2], kw = s[i].w->shape.dims[3];
		int64_t dy = begin[0] - pad_of(s[i].p, 0), dx = begin[1] - pad_of(s[i].p, 1);
		for (int64_t r = 0; r < mi; r++) {
			for (int64_t ch = 0; ch < c; ch++)
				for (int64_t ty = 0; ty < kh; ty++)
					for (int64_t tx = 0; tx < kw; tx++)
						wd[(((o + r) * c + ch) * k[0] + dy + ty) * k[1] + dx + tx] =
							ws[((r * c + ch) * kh + ty) * kw + tx];
			bd[o + r] = s[i].b ? ((const float *)s[i].b->data)[r] : 0.0f;
		}
		o += mi;
	}
	int wv = ge_add_const(g, "merged_conv_weight", w), bv = ge_add_const(g, "merged_conv_bias", b);
	mc_shape ys = g->values[y].shape; /* new_value may move g->values */
	int conv_out = relu ? new_value(g, "merged_conv", MC_FLOAT, &ys) : y;
	mc_attr attrs[2] = { { .name = mc_xstrdup("pads"), .type = MC_ATTR_INTS, .n = 4 },
	                     { .name = mc_xstrdup("strides"), .type = MC_ATTR_INTS, .n = 2 } };
	attrs[0].ints = mc_xcalloc(4, sizeof(int64_t));
	attrs[1].ints = mc_xcalloc(2, sizeof(int64_t));
	memcpy(attrs[0].ints, pads, sizeof pads);
	for (int d = 0; d < 2; d++)
		attrs[1].ints[d] = stride_of(s[0].p, d);
	mc_node made[2];
	int conv_in[3] = { x, wv, bv };
	if (!new_node(&made[0], g->nodes[s[0].conv].name, MC_OP_Conv, 11, conv_in, 3, conv_out, attrs, 2))
		return -1;
	if (relu && !new_node(&made[1], g->nodes[s[0].relu].name, MC_OP_Relu, 14, &conv_out, 1, y, NULL, 0)) {
		mc_node_free(&made[0]);
		return -1;
	}
	/* in the Concat's place (x and every sibling come before it) */
	bool *dead = calloc((size_t)g->n_nodes + 2, sizeof *dead);
	if (!dead) {
		for (int i = 0; i < 1 + relu; i++)
			mc_node_free(&made[i]);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		dead[s[i].conv] = true;
		if (relu)
			dead[s[i].relu] = true;
	}
	ge_splice_nodes(g, ci, made, 1 + relu);
	ge_remove_nodes(g, dead);
	free(dead);
	return 1;
}

static int merge_sibling_convs(mc_graph *g)
{
	int changed = 0;
	int *uses = ge_use_counts(g);
	for (int i = 0; i < g->n_nodes; i++) {
		int r = merge_convs_at(g, uses, i);
		if (r < 0) {
			free(uses);
			return -1;
		}
		if (r) {
			changed++;
			free(uses);
			uses = ge_use_counts(g);
			i = -1; /* indices moved */
		}
	}
	free(uses);
	return changed;
}

int mc_pass_patterns(mc_graph *g, const mc_freeze_opts *o)
{
	int *uses = ge_use_counts(g);
	bool *dead = calloc((size_t)g->n_nodes + 1, sizeof *dead);
	if (!dead) {
		free(uses);
		return -1;
	}
	int changed = 0;
	for (int i = 0; i < g->n_nodes; i++) {
		if (dead[i])
			continue;
		mc_node made;
		int at = match_layernorm(g, i, uses, dead, &made);
		if (at < 0)
			at = match_swish(g, i, uses, dead, &made);
		if (at < 0)
			at = match_gelu(g, i, uses, dead, &made);
		if (at < 0)
			continue;
		mc_node_free(&g->nodes[at]);
		g->nodes[at] = made;
		g->values[made.outputs[0]].producer = at;
		changed++;
		free(uses);
		uses = ge_use_counts(g); /* a new node may read new constants */
	}
	if (changed)
		ge_remove_nodes(g, dead);
	free(uses);
	free(dead);
	if (o && o->merge_sibling_convs) {
		int merged = merge_sibling_convs(g);
		if (merged < 0)
			return -1;
		changed += merged;
	}
	if (o && o->fuse_attention) {
		int packed = fuse_siblings(g);
		if (packed < 0)
			return -1;
		changed += packed;
		int fused = fuse_attention(g);
		if (fused < 0)
			return -1;
		changed += fused;
	}
	return changed;
}
