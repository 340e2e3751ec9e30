/* Data-dependent extents (mc_value.counted): which values carry the count
 * of an op like NonMaxSuppression, op by op. A counted value holds its
 * bound on one axis; only the first `count` entries of that axis mean
 * anything, the rest is padding. Every op computes over the whole bound
 * (the padding is made deterministic by the op that counts), so nothing
 * at run time needs the count but the graph's outputs; what this file
 * decides is whether an op keeps the counted entries on an axis of its
 * output (the output is then counted too, by the same count) or would
 * read the padding as data (a reduction over the axis, a Shape of it, a
 * negative index along it...), which is refused, naming the node. */
#include <stdio.h>
#include <string.h>

#include "modelc.h"
#include "ops/ops.h"

/* The node that made count value cv, for messages. */
static const mc_node *counter_of(const mc_graph *g, int cv)
{
	int p = cv >= 0 && cv < g->n_values ? g->values[cv].producer : -1;
	return p >= 0 && p < g->n_nodes ? &g->nodes[p] : NULL;
}

static int refuse(const mc_graph *g, const mc_node *n, const mc_value *v, const char *why)
{
	const mc_node *o = counter_of(g, v->count_value);
	return mc_node_error(n, "input '%s' has a data-dependent extent on axis %d (the count of %s '%s'), "
	                     "and %s: not supported", v->name, v->count_axis, o ? o->op_type : "an op",
	                     o ? o->name : "", why);
}

void mc_count_mark(mc_value *v, int axis, int count_value)
{
	v->counted = true;
	v->count_axis = axis;
	v->count_value = count_value;
}

static void set_counted(mc_graph *g, int out, int axis, int count_value)
{
	if (out >= 0)
		mc_count_mark(&g->values[out], axis, count_value);
}

static int norm_axis(int64_t axis, int rank)
{
	return (int)(axis < 0 ? axis + rank : axis);
}

static const mc_value *input(const mc_graph *g, const mc_node *n, int k)
{
	return k < n->n_inputs && n->inputs[k] >= 0 ? &g->values[n->inputs[k]] : NULL;
}

/* Pointwise with broadcasting: each counted input's axis, aligned from
 * the right, must land on one output axis of the same extent. */
static int pointwise(mc_graph *g, const mc_node *n, const mc_value *cv)
{
	const mc_shape *os = &g->values[n->outputs[0]].shape;
	int at = -1;
	for (int k = 0; k < n->n_inputs; k++) {
		const mc_value *v = input(g, n, k);
		if (!v || !v->counted)
			continue;
		int b = v->count_axis + os->rank - v->shape.rank;
		if (b < 0 || os->dims[b] != v->shape.dims[v->count_axis] || (at >= 0 && b != at))
			return refuse(g, n, v, "it is broadcast along that axis");
		at = b;
	}
	set_counted(g, n->outputs[0], at, cv->count_value);
	return 0;
}

/* Reshape-like ops (Reshape, Flatten, Squeeze, Unsqueeze): the output
 * axis whose dims before it hold as many elements as the input's before
 * the counted axis, and of the same extent; the last such where several
 * are (an Unsqueeze puts its 1 before). */
static int reshaped(mc_graph *g, const mc_node *n, const mc_value *v)
{
	const mc_shape *is = &v->shape, *os = &g->values[n->outputs[0]].shape;
	int64_t before = 1;
	for (int d = 0; d < v->count_axis; d++)
		before *= is->dims[d];
	int at = -1;
	int64_t p = 1;
	for (int b = 0; b < os->rank; b++) {
		if (p == before && os->dims[b] == is->dims[v->count_axis])
			at = b;
		p *= os->dims[b];
	}
	if (at < 0)
		return refuse(g, n, v, "the reshape splits or merges that axis");
	set_counted(g, n->outputs[0], at, v->count_value);
	return 0;
}

/* Reductions and ArgMax/ArgMin over other axes. */
static int reduced(mc_graph *g, const mc_node *n, const mc_value *v)
{
	int rank = v->shape.rank;
	bool red[MC_MAX_RANK] = { false }, keep = true;
	if (n->id == MC_OP_ArgMax || n->id == MC_OP_ArgMin) {
		int64_t axis = 0, keepdims = 1;
		if (mc_attr_int(n, "axis", 0, &axis) || mc_attr_int(n, "keepdims", 1, &keepdims))
			return -1;
		red[norm_axis(axis, rank)] = true;
		keep = keepdims != 0;
	} else {
		/* the reduction's own plan (its inference made it already) */
		const mc_value *axes = input(g, n, 1);
		if (mc_reduce_axes(n, &v->shape, axes ? axes->konst : NULL, red, &keep))
			return -1;
	}
	if (red[v->count_axis])
		return refuse(g, n, v, "it reduces that axis");
	int at = v->count_axis;
	for (int d = 0; d < v->count_axis && !keep; d++)
		at -= red[d];
	set_counted(g, n->outputs[0], at, v->count_value);
	return 0;
}

/* Slice: the counted axis must be taken whole, from 0 in steps of 1. */
static int sliced(mc_graph *g, const mc_node *n, const mc_value *v)
{
	int rank = v->shape.rank, a = v->count_axis;
	const mc_shape *os = &g->values[n->outputs[0]].shape;
	if (n->opset < 10) {
		const int64_t *axes = NULL, *starts = NULL;
		size_t na = 0, ns = 0;
		if (mc_attr_ints(n, "starts", &starts, &ns))
			return -1;
		if (mc_attr_find(n, "axes") && mc_attr_ints(n, "axes", &axes, &na))
			return -1;
		for (size_t i = 0; i < ns; i++)
			if (norm_axis(axes ? axes[i] : (int64_t)i, rank) == a && starts[i] != 0)
				return refuse(g, n, v, "it slices that axis");
	} else {
		const mc_value *st = input(g, n, 1), *ax = input(g, n, 3), *sp = input(g, n, 4);
		if (!st || !st->konst || (ax && !ax->konst) || (sp && !sp->konst))
			return refuse(g, n, v, "its starts, axes or steps are not known at compile time");
		for (size_t i = 0; i < st->konst->numel; i++) {
			int d = norm_axis(ax ? mc_get_i(ax->konst, i) : (int64_t)i, rank);
			if (d == a && (mc_get_i(st->konst, i) != 0 || (sp && mc_get_i(sp->konst, i) != 1)))
				return refuse(g, n, v, "it slices that axis");
		}
	}
	if (os->dims[a] != v->shape.dims[a])
		return refuse(g, n, v, "it slices that axis");
	set_counted(g, n->outputs[0], a, v->count_value);
	return 0;
}

/* Gather: along another axis of a counted data, or by counted indices. */
static int gathered(mc_graph *g, const mc_node *n, const mc_value *cv)
{
	const mc_value *data = input(g, n, 0), *idx = input(g, n, 1);
	int64_t axis = 0;
	if (mc_attr_int(n, "axis", 0, &axis))
		return -1;
	int ax = norm_axis(axis, data->shape.rank), q = idx->shape.rank;
	if (data->counted && idx->counted)
		return refuse(g, n, data, "its indices have a data-dependent extent too");
	if (idx->counted) {
		set_counted(g, n->outputs[0], ax + idx->count_axis, cv->count_value);
		return 0;
	}
	if (data->count_axis != ax) {
		int a = data->count_axis;
		set_counted(g, n->outputs[0], a < ax ? a : a + q - 1, cv->count_value);
		return 0;
	}
	/* indices into the counted axis: where they are known and not
	 * negative they read what a run-time tensor of that extent would (a
	 * negative one would count from the bound, not the count) */
	if (!idx->konst)
		return refuse(g, n, data, "it gathers along that axis by indices known only at run time");
	for (size_t i = 0; i < idx->konst->numel; i++)
		if (mc_get_i(idx->konst, i) < 0)
			return refuse(g, n, data, "it gathers along that axis by a negative index");
	return 0;
}

/* Ops whose own axis attribute must not be the counted one, the counted
 * axis kept on every output (Concat, Split, TopK, the softmax family). */
static int along_other_axis(mc_graph *g, const mc_node *n, const mc_value *cv, int64_t dflt,
                            bool to_the_end)
{
	int rank = cv->shape.rank;
	int64_t axis = dflt;
	if (mc_attr_int(n, "axis", dflt, &axis))
		return -1;
	int ax = norm_axis(axis, rank);
	if (ax == cv->count_axis || (to_the_end && cv->count_axis > ax))
		return refuse(g, n, cv, "it works along that axis");
	for (int k = 0; k < n->n_inputs; k++) {
		const mc_value *v = input(g, n, k);
		if (v && v->counted && v->count_axis != cv->count_axis)
			return refuse(g, n, v, "its inputs have it on different axes");
	}
	/* not the count an op like TopK keeps in its last output */
	int outs = n->op->flags & MC_OP_COUNTED ? n->op->max_outputs : n->n_outputs;
	for (int k = 0; k < outs && k < n->n_outputs; k++)
		set_counted(g, n->outputs[k], cv->count_axis, cv->count_value);
	return 0;
}

int mc_count_propagate(mc_graph *g, mc_node *n)
{
	const mc_value *cv = NULL;
	for (int k = 0; k < n->n_inputs; k++) {
		const mc_value *v = input(g, n, k);
		if (!v || !v->counted)
			continue;
		if (cv && v->count_value != cv->count_value)
			return refuse(g, n, v, "another input has another count");
		if (!cv)
			cv = v;
	}
	for (int k = 0; k < n->n_implicit; k++)
		if (g->values[n->implicit[k]].counted)
			return refuse(g, n, &g->values[n->implicit[k]], "a subgraph reads it");
	if (!cv)
		return 0;
	/* an op counting on its own (its output 0 counted by its inference)
	 * over counted data would take the padding for data */
	if ((n->op->flags & MC_OP_COUNTED) && g->values[n->outputs[0]].counted)
		return refuse(g, n, cv, "this op counts its own output from it");
	if ((n->op->flags & MC_OP_COUNTED) && n->id != MC_OP_TopK)
		return refuse(g, n, cv, "this op would take its padding for data");
	if (n->id == MC_OP_Cast || n->id == MC_OP_CastLike || n->id == MC_OP_Identity ||
	    mc_op_has(n->id, MC_OF_PW))
		return pointwise(g, n, cv);
	switch (n->id) {
	case MC_OP_Reshape: case MC_OP_Flatten: case MC_OP_Squeeze: case MC_OP_Unsqueeze:
		return reshaped(g, n, cv);
	case MC_OP_Transpose: {
		const int64_t *perm = NULL;
		size_t np = 0;
		int rank = cv->shape.rank;
		if (mc_attr_find(n, "perm") && mc_attr_ints(n, "perm", &perm, &np))
			return -1;
		for (int b = 0; b < rank; b++)
			if ((perm && (size_t)b < np ? perm[b] : rank - 1 - b) == cv->count_axis)
				set_counted(g, n->outputs[0], b, cv->count_value);
		return 0;
	}
	case MC_OP_Slice:
		return sliced(g, n, cv);
	case MC_OP_Gather:
		return gathered(g, n, cv);
	case MC_OP_GatherND: {
		const mc_value *idx = input(g, n, 1);
		int64_t batch = 0;
		if (mc_attr_int(n, "batch_dims", 0, &batch))
			return -1;
		if (!idx->counted || batch != 0 || idx->count_axis >= idx->shape.rank - 1)
			return refuse(g, n, cv, "it indexes along that axis");
		set_counted(g, n->outputs[0], idx->count_axis, cv->count_value);
		return 0;
	}
	case MC_OP_Concat:
		return along_other_axis(g, n, cv, 0, false);
	case MC_OP_Split:
		return along_other_axis(g, n, cv, 0, false);
	case MC_OP_TopK:
		return along_other_axis(g, n, cv, -1, false);
	case MC_OP_Softmax: case MC_OP_LogSoftmax: case MC_OP_Hardmax:
		/* before opset 13, every axis from `axis` on is one row */
		return along_other_axis(g, n, cv, n->opset < 13 ? 1 : -1, n->opset < 13);
	case MC_OP_ReduceSum: case MC_OP_ReduceMean: case MC_OP_ReduceProd: case MC_OP_ReduceMax:
	case MC_OP_ReduceMin: case MC_OP_ReduceL1: case MC_OP_ReduceL2: case MC_OP_ReduceLogSum:
	case MC_OP_ReduceLogSumExp: case MC_OP_ReduceSumSquare: case MC_OP_ArgMax: case MC_OP_ArgMin:
		return reduced(g, n, cv);
	case MC_OP_MatMul: {
		const mc_value *a = input(g, n, 0);
		int ro = g->values[n->outputs[0]].shape.rank;
		if (!a->counted || a->count_axis >= a->shape.rank - 1)
			return refuse(g, n, cv, "it sums along that axis");
		set_counted(g, n->outputs[0], a->count_axis + ro - a->shape.rank, cv->count_value);
		return 0;
	}
	case MC_OP_Gemm: {
		int64_t ta = 0;
		if (mc_attr_int(n, "transA", 0, &ta))
			return -1;
		if (!input(g, n, 0)->counted || ta || cv->count_axis != 0)
			return refuse(g, n, cv, "it sums along that axis");
		set_counted(g, n->outputs[0], 0, cv->count_value);
		return 0;
	}
	case MC_OP_Shape: case MC_OP_Size:
		return refuse(g, n, cv, "this op would give the bound, not the count");
	default:
		return refuse(g, n, cv, "this op does not keep that axis yet");
	}
}

mc_tensor *mc_count_trim(const mc_tensor *t, int axis, int64_t count)
{
	mc_shape s = t->shape;
	if (count < 0 || count > s.dims[axis])
		count = s.dims[axis];
	s.dims[axis] = count;
	mc_tensor *r = mc_tensor_new(t->dtype, &s);
	if (!r)
		return NULL;
	size_t outer = 1, inner = mc_dtype_size(t->dtype);
	for (int d = 0; d < axis; d++)
		outer *= (size_t)t->shape.dims[d];
	for (int d = axis + 1; d < s.rank; d++)
		inner *= (size_t)t->shape.dims[d];
	for (size_t o = 0; o < outer; o++)
		memcpy((char *)r->data + o * (size_t)count * inner,
		       (const char *)t->data + o * (size_t)t->shape.dims[axis] * inner, (size_t)count * inner);
	return r;
}
