/* LayerNormalization written out in basic ops, as exporters write it
 * before opset 17 (PyTorch's layer_norm at opset 13, many TensorFlow
 * converters):
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

/* Tries the pattern at ReduceMean node r1; marks the nodes it replaces in
 * dead and returns the index of the new node's place (the Div), or -1. */
static int match(mc_graph *g, int r1, const int *uses, bool *dead, mc_node *out)
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
	mc_node ln = { 0 };
	ln.name = mc_xstrdup(name);
	ln.domain = mc_xstrdup("");
	if (!mc_node_set_op(&ln, MC_OP_LayerNormalization, 17)) {
		mc_node_free(&ln);
		return -1;
	}
	ln.n_inputs = bias >= 0 ? 3 : 2;
	ln.inputs = mc_xmalloc(3 * sizeof(int));
	ln.inputs[0] = x;
	ln.inputs[1] = scale;
	ln.inputs[2] = bias;
	ln.n_outputs = 1;
	ln.outputs = mc_xmalloc(sizeof(int));
	ln.outputs[0] = y;
	ln.n_attrs = 2;
	ln.attrs = mc_xmalloc(2 * sizeof *ln.attrs);
	ln.attrs[0] = int_attr("axis", -1);
	ln.attrs[1] = float_attr("epsilon", eps);
	if (ln.op->parse && ln.op->parse(&ln)) {
		mc_node_free(&ln);
		return -1;
	}
	for (int i = 0; i < n_chain - 1; i++)
		dead[chain[i]] = true;
	*out = ln;
	return last;
}

int mc_pass_fuse_layernorm(mc_graph *g, const mc_freeze_opts *o)
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
		mc_node ln;
		int at = match(g, i, uses, dead, &ln);
		if (at < 0)
			continue;
		mc_node_free(&g->nodes[at]);
		g->nodes[at] = ln;
		g->values[ln.outputs[0]].producer = at;
		changed++;
		free(uses);
		uses = ge_use_counts(g); /* the new node reads scale and bias */
	}
	if (changed)
		ge_remove_nodes(g, dead);
	free(uses);
	free(dead);
	return changed;
}
