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
 * (1 / s) against (x - m) / s. */
#include <stdlib.h>
#include <string.h>

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

/* A new node of op id (at opset) named after `name`, reading in[] and
 * writing out, with attrs (taken); parsed. False if it cannot be made. */
static bool new_node(mc_node *n, const char *name, mc_opid id, int opset, const int *in, int n_in,
                     int out, mc_attr *attrs, int n_attrs)
{
	*n = (mc_node){ 0 };
	n->name = mc_xstrdup(name);
	n->domain = mc_xstrdup("");
	n->n_inputs = n_in;
	n->inputs = mc_xmalloc(((size_t)n_in + 1) * sizeof(int));
	memcpy(n->inputs, in, (size_t)n_in * sizeof(int));
	n->n_outputs = 1;
	n->outputs = mc_xmalloc(sizeof(int));
	n->outputs[0] = out;
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

int mc_pass_patterns(mc_graph *g, const mc_freeze_opts *o)
{
	(void)o;
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
	return changed;
}
