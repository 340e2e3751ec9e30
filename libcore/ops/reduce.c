/* Reductions and normalisations: the Reduce* family (one shared driver),
 * ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax, CumSum, TopK, and
 * BatchNormalization, InstanceNormalization, LayerNormalization,
 * GroupNormalization, LpNormalization, MeanVarianceNormalization, LRN.
 *
 * Reference implementations: floats are read through double and every sum
 * is accumulated in double; integer sums and products wrap in uint64 (no
 * signed overflow), as numpy's do. Clarity over speed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "reduce.h"

/* ==== shared helpers ==== */

static bool output_present(const mc_node *n, int k)
{
	return k < n->n_outputs && n->outputs[k] >= 0;
}

static bool input_present(const mc_node *n, int k)
{
	return k < n->n_inputs && n->inputs[k] >= 0;
}

static int need_float(const mc_node *n, const mc_value *v, const char *what)
{
	if (mc_dtype_is_float(v->dtype))
		return 0;
	return mc_node_error(n, "%s '%s' has dtype %s; a floating-point tensor is expected", what,
	                     v->name, mc_dtype_name(v->dtype));
}

static int need_numeric(const mc_node *n, const mc_value *v, const char *what)
{
	if (mc_dtype_is_float(v->dtype) || mc_dtype_is_int(v->dtype))
		return 0;
	return mc_node_error(n, "%s '%s' has dtype %s; a numeric tensor is expected", what,
	                     v->name, mc_dtype_name(v->dtype));
}

/* Reads a 0-D or 1-D integer tensor (axes, k, axis inputs). */
static int read_int_list(const mc_node *n, const mc_tensor *t, const char *what, int64_t *out,
                         size_t cap, size_t *count)
{
	if (!mc_dtype_is_int(t->dtype) || t->shape.rank > 1)
		return mc_node_error(n, "%s must be a 0-D or 1-D integer tensor, got %s of rank %d",
		                     what, mc_dtype_name(t->dtype), t->shape.rank);
	if (t->numel > cap)
		return mc_node_error(n, "%s has %zu elements, at most %zu allowed", what, t->numel, cap);
	for (size_t k = 0; k < t->numel; k++)
		out[k] = mc_get_i(t, k);
	*count = t->numel;
	return 0;
}

/* A tensor seen around one axis as outer x n x inner (row-major). The old
 * softmax family (opset < 13) coerces to 2-D instead: n spans axis..end. */
typedef struct {
	size_t outer, n, inner;
} axis_view;

static axis_view view_around(const mc_shape *s, int axis, bool coerce_2d)
{
	axis_view v = {1, 1, 1};
	for (int d = 0; d < s->rank; d++) {
		size_t dim = (size_t)s->dims[d];
		if (d < axis)
			v.outer *= dim;
		else if (d == axis || coerce_2d)
			v.n *= dim;
		else
			v.inner *= dim;
	}
	return v;
}

static size_t view_at(const axis_view *v, size_t o, size_t k, size_t i)
{
	return (o * v->n + k) * v->inner + i;
}

/* Walks a shape in row-major order while tracking the offset of the same
 * position in a second tensor with the given strides (0 on dims it reduces
 * or broadcasts). */
typedef struct {
	int rank;
	int64_t dims[MC_MAX_RANK], idx[MC_MAX_RANK], strides[MC_MAX_RANK];
	size_t off;
} walker;

static void walker_init(walker *w, const mc_shape *s, const int64_t strides[MC_MAX_RANK])
{
	memset(w, 0, sizeof *w);
	w->rank = s->rank;
	for (int d = 0; d < s->rank; d++) {
		w->dims[d] = s->dims[d];
		w->strides[d] = strides[d];
	}
}

static void walker_next(walker *w)
{
	for (int d = w->rank - 1; d >= 0; d--) {
		w->off += (size_t)w->strides[d];
		if (++w->idx[d] < w->dims[d])
			return;
		w->off -= (size_t)w->strides[d] * (size_t)w->dims[d];
		w->idx[d] = 0;
	}
}

/* Orders elements a and b of t (<0, 0, >0). NaN ranks above every number
 * when nan_high, below otherwise: max and min both pick it, as numpy does. */
static int cmp_elems(const mc_tensor *t, size_t a, size_t b, bool nan_high)
{
	if (mc_dtype_is_float(t->dtype)) {
		double x = mc_get_f(t, a), y = mc_get_f(t, b);
		bool xn = x != x, yn = y != y;
		if (xn || yn)
			return xn == yn ? 0 : (xn == nan_high ? 1 : -1);
		return (x > y) - (x < y);
	}
	if (t->dtype == MC_UINT64) {
		uint64_t x = (uint64_t)mc_get_i(t, a), y = (uint64_t)mc_get_i(t, b);
		return (x > y) - (x < y);
	}
	int64_t x = mc_get_i(t, a), y = mc_get_i(t, b);
	return (x > y) - (x < y);
}

/* Position along the axis of the largest (or smallest) element of one row
 * of the view; ties go to the first occurrence, or the last with last. */
static size_t arg_best(const mc_tensor *t, const axis_view *v, size_t o, size_t i, bool want_max,
                       bool last)
{
	size_t best = 0;
	for (size_t k = 1; k < v->n; k++) {
		int c = cmp_elems(t, view_at(v, o, k, i), view_at(v, o, best, i), want_max);
		if (!want_max)
			c = -c;
		if (c > 0 || (last && c == 0))
			best = k;
	}
	return best;
}

/* Bounds of an integer dtype, stored through mc_set_i (UINT64 max as -1). */
static int64_t int_limit(mc_dtype t, bool high)
{
	switch (t) {
	case MC_UINT8: return high ? UINT8_MAX : 0;
	case MC_INT8: return high ? INT8_MAX : INT8_MIN;
	case MC_UINT16: return high ? UINT16_MAX : 0;
	case MC_INT16: return high ? INT16_MAX : INT16_MIN;
	case MC_UINT32: return high ? (int64_t)UINT32_MAX : 0;
	case MC_INT32: return high ? INT32_MAX : INT32_MIN;
	case MC_UINT64: return high ? -1 : 0;
	case MC_BOOL: return high ? 1 : 0;
	default: return high ? INT64_MAX : INT64_MIN;
	}
}

/* Which dims a reduction removes, and where each input element lands. */
typedef struct {
	bool reduced[MC_MAX_RANK];
	mc_shape out;                     /* output shape (keepdims applied) */
	int64_t out_strides[MC_MAX_RANK]; /* keepdims layout, 0 on reduced dims */
} reduce_plan;

/* No axes listed: every axis, or none when noop_empty (an identity-shaped
 * reduction over one element each). */
static int plan_reduction(const mc_node *n, const mc_shape *in, const int64_t *axes,
                          size_t count, bool noop_empty, bool keepdims, reduce_plan *p)
{
	memset(p, 0, sizeof *p);
	for (int d = 0; d < in->rank; d++)
		p->reduced[d] = count == 0 && !noop_empty;
	for (size_t k = 0; k < count; k++) {
		int a;
		if (mc_norm_axis(n, axes[k], in->rank, &a))
			return -1;
		if (p->reduced[a])
			return mc_node_error(n, "axis %lld is listed twice", (long long)axes[k]);
		p->reduced[a] = true;
	}
	mc_shape kept = *in;
	for (int d = 0; d < in->rank; d++) {
		if (p->reduced[d])
			kept.dims[d] = 1;
		if (!p->reduced[d] || keepdims)
			p->out.dims[p->out.rank++] = kept.dims[d];
	}
	mc_strides(&kept, p->out_strides);
	for (int d = 0; d < in->rank; d++)
		if (p->reduced[d])
			p->out_strides[d] = 0;
	return 0;
}

/* ==== Reduce* ==== */

static const struct {
	const char *name;
	reduce_kind kind;
	int axes_input_since; /* opset where the axes attribute became input 2 */
} reduce_table[] = {
	{"ReduceSum", R_SUM, 13},      {"ReduceMean", R_MEAN, 18},
	{"ReduceProd", R_PROD, 18},    {"ReduceMax", R_MAX, 18},
	{"ReduceMin", R_MIN, 18},      {"ReduceL1", R_L1, 18},
	{"ReduceL2", R_L2, 18},        {"ReduceLogSum", R_LOGSUM, 18},
	{"ReduceLogSumExp", R_LOGSUMEXP, 18}, {"ReduceSumSquare", R_SUMSQ, 18},
};

static int reduce_parse(mc_node *n)
{
	size_t t = 0;
	while (t < sizeof reduce_table / sizeof *reduce_table &&
	       strcmp(reduce_table[t].name, n->op_type) != 0)
		t++;
	if (t == sizeof reduce_table / sizeof *reduce_table)
		return mc_node_error(n, "internal error: not a reduction");
	int since = reduce_table[t].axes_input_since;
	int64_t keepdims, noop = 0;
	if (mc_attr_int(n, "keepdims", 1, &keepdims))
		return -1;
	bool axes_input = n->opset >= since;
	if (axes_input) {
		if (mc_attr_find(n, "axes"))
			return mc_node_error(n, "attribute 'axes' is input 2 from opset %d on", since);
		if (mc_attr_int(n, "noop_with_empty_axes", 0, &noop))
			return -1;
	} else {
		const int64_t *axes;
		size_t count;
		if (input_present(n, 1))
			return mc_node_error(n, "takes axes as an attribute before opset %d, not as an "
			                     "input", since);
		if (mc_attr_ints(n, "axes", &axes, &count))
			return -1;
	}
	reduce_params *p = mc_params_new(n, sizeof *p);
	p->kind = reduce_table[t].kind;
	p->axes_input = axes_input;
	p->keepdims = keepdims != 0;
	p->noop_empty = noop != 0;
	return 0;
}

/* axes_t: the axes input (opset 13/18 on), NULL when absent. */
static int reduce_make_plan(const mc_node *n, const mc_shape *in, const mc_tensor *axes_t,
                            reduce_plan *plan)
{
	const reduce_params *p = n->params;
	int64_t axes[MC_MAX_RANK];
	size_t count = 0;
	if (p->axes_input) {
		if (axes_t && read_int_list(n, axes_t, "axes (input 2)", axes, MC_MAX_RANK, &count))
			return -1;
	} else {
		const int64_t *attr;
		if (mc_attr_ints(n, "axes", &attr, &count))
			return -1;
		if (count > MC_MAX_RANK)
			return mc_node_error(n, "lists %zu axes, more than any rank", count);
		if (count)
			memcpy(axes, attr, count * sizeof *axes);
	}
	return plan_reduction(n, in, axes, count, p->noop_empty, p->keepdims, plan);
}

int mc_reduce_axes(const mc_node *n, const mc_shape *in, const mc_tensor *axes_t, bool reduced[MC_MAX_RANK],
                   bool *keepdims)
{
	reduce_plan plan;
	if (reduce_make_plan(n, in, axes_t, &plan))
		return -1;
	memcpy(reduced, plan.reduced, sizeof plan.reduced);
	*keepdims = ((const reduce_params *)n->params)->keepdims;
	return 0;
}

static int reduce_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const reduce_params *p = n->params;
	const mc_value *x = c->in[0];
	if (x->dtype == MC_BOOL) {
		if ((p->kind != R_MAX && p->kind != R_MIN) || n->opset < 20)
			return mc_node_error(n, "bool input is only defined for ReduceMax/ReduceMin "
			                     "from opset 20");
	} else if (need_numeric(n, x, "input")) {
		return -1;
	}
	const mc_tensor *axes_t = NULL;
	if (p->axes_input && c->n_in > 1 && c->in[1]) {
		if (!c->in[1]->konst)
			return mc_node_error(n, "axes (input 2, '%s') must be known at compile time: "
			                     "it sets the output shape", c->in[1]->name);
		axes_t = c->in[1]->konst;
	}
	reduce_plan plan;
	if (reduce_make_plan(n, &x->shape, axes_t, &plan))
		return -1;
	mc_set_out(c, 0, x->dtype, &plan.out);
	return 0;
}

/* ReduceMax / ReduceMin copy the winning element, exact for every dtype. */
static int reduce_extreme(const mc_node *n, const mc_tensor *x, mc_tensor *y,
                          const reduce_plan *plan, bool want_max)
{
	size_t *best = mc_alloc_array(n, y->numel, sizeof *best);
	if (!best)
		return -1;
	for (size_t o = 0; o < y->numel; o++)
		best[o] = SIZE_MAX;
	walker w;
	walker_init(&w, &x->shape, plan->out_strides);
	for (size_t i = 0; i < x->numel; i++, walker_next(&w)) {
		size_t o = w.off;
		if (best[o] == SIZE_MAX) {
			best[o] = i;
			continue;
		}
		int c = cmp_elems(x, i, best[o], want_max);
		if (want_max ? c > 0 : c < 0)
			best[o] = i;
	}
	size_t es = mc_dtype_size(x->dtype);
	for (size_t o = 0; o < y->numel; o++) {
		if (best[o] != SIZE_MAX)
			memcpy((char *)y->data + o * es, (const char *)x->data + best[o] * es, es);
		else if (mc_dtype_is_float(y->dtype)) /* the empty set */
			mc_set_f(y, o, want_max ? -INFINITY : INFINITY);
		else
			mc_set_i(y, o, int_limit(y->dtype, !want_max));
	}
	free(best);
	return 0;
}

/* Sums and products of integers, wrapping like numpy's int64 arithmetic. */
static int reduce_ints(const mc_node *n, reduce_kind kind, const mc_tensor *x, mc_tensor *y,
                       const reduce_plan *plan)
{
	uint64_t *acc = mc_alloc_array(n, y->numel, sizeof *acc);
	if (!acc)
		return -1;
	bool is_u64 = x->dtype == MC_UINT64;
	for (size_t o = 0; o < y->numel; o++)
		acc[o] = kind == R_PROD ? 1 : 0;
	walker w;
	walker_init(&w, &x->shape, plan->out_strides);
	for (size_t i = 0; i < x->numel; i++, walker_next(&w)) {
		int64_t v = mc_get_i(x, i);
		uint64_t u = (uint64_t)v;
		switch (kind) {
		case R_PROD: acc[w.off] *= u; break;
		case R_L1: acc[w.off] += (v < 0 && !is_u64) ? 0 - u : u; break;
		case R_SUMSQ: acc[w.off] += u * u; break;
		default: acc[w.off] += u; break;
		}
	}
	uint64_t count = y->numel ? x->numel / y->numel : 0;
	for (size_t o = 0; o < y->numel; o++) {
		uint64_t r = acc[o];
		if (kind == R_MEAN && count == 0)
			r = 0;
		else if (kind == R_MEAN && is_u64)
			r /= count;
		else if (kind == R_MEAN) /* truncates toward zero, like numpy's astype */
			r = (uint64_t)((int64_t)r / (int64_t)count);
		mc_set_i(y, o, (int64_t)r);
	}
	free(acc);
	return 0;
}

/* Per-output maximum for a stable log-sum-exp; NaN sticks. */
static void reduce_max_doubles(const mc_tensor *x, const reduce_plan *plan, double *mx, size_t nout)
{
	for (size_t o = 0; o < nout; o++)
		mx[o] = -INFINITY;
	walker w;
	walker_init(&w, &x->shape, plan->out_strides);
	for (size_t i = 0; i < x->numel; i++, walker_next(&w)) {
		double v = mc_get_f(x, i), *m = &mx[w.off];
		if (*m == *m && (v != v || v > *m))
			*m = v;
	}
	/* shift by finite maxima only: inf - inf would make a NaN */
	for (size_t o = 0; o < nout; o++)
		if (isinf(mx[o]))
			mx[o] = 0;
}

static int reduce_doubles(const mc_node *n, reduce_kind kind, const mc_tensor *x, mc_tensor *y,
                          const reduce_plan *plan)
{
	double *acc = mc_alloc_array(n, y->numel, sizeof *acc);
	double *shift = kind == R_LOGSUMEXP ? mc_alloc_array(n, y->numel, sizeof *shift) : NULL;
	if (!acc || (kind == R_LOGSUMEXP && !shift)) {
		free(acc);
		free(shift);
		return -1;
	}
	for (size_t o = 0; o < y->numel; o++)
		acc[o] = kind == R_PROD ? 1 : 0;
	if (shift)
		reduce_max_doubles(x, plan, shift, y->numel);
	walker w;
	walker_init(&w, &x->shape, plan->out_strides);
	for (size_t i = 0; i < x->numel; i++, walker_next(&w)) {
		double v = mc_get_f(x, i);
		switch (kind) {
		case R_PROD: acc[w.off] *= v; break;
		case R_L1: acc[w.off] += fabs(v); break;
		case R_L2: case R_SUMSQ: acc[w.off] += v * v; break;
		case R_LOGSUMEXP: acc[w.off] += exp(v - shift[w.off]); break;
		default: acc[w.off] += v; break;
		}
	}
	size_t count = y->numel ? x->numel / y->numel : 0;
	for (size_t o = 0; o < y->numel; o++) {
		double r = acc[o];
		switch (kind) {
		case R_MEAN: r = count ? r / (double)count : NAN; break;
		case R_L2: r = sqrt(r); break;
		case R_LOGSUM: r = log(r); break;               /* empty set: -inf */
		case R_LOGSUMEXP: r = log(r) + shift[o]; break; /* empty set: -inf */
		default: break;
		}
		mc_set_f(y, o, r);
	}
	free(acc);
	free(shift);
	return 0;
}

static int reduce_eval(mc_eval_ctx *c)
{
	const mc_node *n = c->node;
	const reduce_params *p = n->params;
	const mc_tensor *x = c->in[0];
	mc_tensor *y = c->out[0];
	reduce_plan plan;
	if (reduce_make_plan(n, &x->shape, c->n_in > 1 ? c->in[1] : NULL, &plan))
		return -1;
	if (y->numel == 0)
		return 0;
	switch (p->kind) {
	case R_MAX: return reduce_extreme(n, x, y, &plan, true);
	case R_MIN: return reduce_extreme(n, x, y, &plan, false);
	case R_SUM: case R_MEAN: case R_PROD: case R_L1: case R_SUMSQ:
		if (mc_dtype_is_int(x->dtype))
			return reduce_ints(n, p->kind, x, y, &plan);
		return reduce_doubles(n, p->kind, x, y, &plan);
	default:
		return reduce_doubles(n, p->kind, x, y, &plan);
	}
}

#define REDUCE_OP(var, op_name)                                                             \
	static const mc_op var = {                                                          \
		.name = op_name, .min_opset = 1, .max_opset = MC_MAX_OPSET,                 \
		.min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,       \
		.parse = reduce_parse, .infer = reduce_infer, .eval = reduce_eval,          \
	}

REDUCE_OP(op_reduce_sum, "ReduceSum");
REDUCE_OP(op_reduce_mean, "ReduceMean");
REDUCE_OP(op_reduce_prod, "ReduceProd");
REDUCE_OP(op_reduce_max, "ReduceMax");
REDUCE_OP(op_reduce_min, "ReduceMin");
REDUCE_OP(op_reduce_l1, "ReduceL1");
REDUCE_OP(op_reduce_l2, "ReduceL2");
REDUCE_OP(op_reduce_log_sum, "ReduceLogSum");
REDUCE_OP(op_reduce_log_sum_exp, "ReduceLogSumExp");
REDUCE_OP(op_reduce_sum_square, "ReduceSumSquare");

/* ==== ArgMax, ArgMin ==== */

static int arg_parse(mc_node *n)
{
	int64_t axis, keepdims, last = 0;
	if (mc_attr_int(n, "axis", 0, &axis) || mc_attr_int(n, "keepdims", 1, &keepdims))
		return -1;
	if (n->opset >= 12 && mc_attr_int(n, "select_last_index", 0, &last))
		return -1;
	arg_params *p = mc_params_new(n, sizeof *p);
	p->axis = axis;
	p->keepdims = keepdims != 0;
	p->last = last != 0;
	p->want_max = strcmp(n->op_type, "ArgMax") == 0;
	return 0;
}

static int arg_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const arg_params *p = n->params;
	const mc_value *x = c->in[0];
	int axis;
	if (need_numeric(n, x, "input") || mc_norm_axis(n, p->axis, x->shape.rank, &axis))
		return -1;
	axis_view v = view_around(&x->shape, axis, false);
	if (v.n == 0 && v.outer * v.inner > 0)
		return mc_node_error(n, "axis %d has no elements to choose from", axis);
	mc_shape out = x->shape;
	if (p->keepdims) {
		out.dims[axis] = 1;
	} else {
		for (int d = axis; d + 1 < out.rank; d++)
			out.dims[d] = out.dims[d + 1];
		out.rank--;
	}
	mc_set_out(c, 0, MC_INT64, &out);
	return 0;
}

static int arg_eval(mc_eval_ctx *c)
{
	const arg_params *p = c->node->params;
	const mc_tensor *x = c->in[0];
	int axis;
	if (mc_norm_axis(c->node, p->axis, x->shape.rank, &axis))
		return -1;
	axis_view v = view_around(&x->shape, axis, false);
	if (v.n == 0)
		return 0;
	for (size_t o = 0; o < v.outer; o++)
		for (size_t i = 0; i < v.inner; i++)
			mc_set_i(c->out[0], o * v.inner + i,
			         (int64_t)arg_best(x, &v, o, i, p->want_max, p->last));
	return 0;
}

static const mc_op op_argmax = {
	.name = "ArgMax", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
	.parse = arg_parse, .infer = arg_infer, .eval = arg_eval,
};
static const mc_op op_argmin = {
	.name = "ArgMin", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
	.parse = arg_parse, .infer = arg_infer, .eval = arg_eval,
};

/* ==== Softmax, LogSoftmax, Hardmax ==== */

static int softmax_parse(mc_node *n)
{
	bool coerce = n->opset < 13;
	int64_t axis;
	if (mc_attr_int(n, "axis", coerce ? 1 : -1, &axis))
		return -1;
	softmax_params *p = mc_params_new(n, sizeof *p);
	p->kind = strcmp(n->op_type, "Softmax") == 0      ? SM_SOFTMAX
	          : strcmp(n->op_type, "LogSoftmax") == 0 ? SM_LOGSOFTMAX
	                                                  : SM_HARDMAX;
	p->axis = axis;
	p->coerce_2d = coerce;
	return 0;
}

static int softmax_infer(mc_infer_ctx *c)
{
	const softmax_params *p = c->node->params;
	int axis;
	if (need_float(c->node, c->in[0], "input") ||
	    mc_norm_axis(c->node, p->axis, c->in[0]->shape.rank, &axis))
		return -1;
	return mc_infer_same_as_input0(c);
}

static void softmax_row(const softmax_params *p, const mc_tensor *x, mc_tensor *y,
                        const axis_view *v, size_t o, size_t i)
{
	if (p->kind == SM_HARDMAX) {
		size_t best = arg_best(x, v, o, i, true, false);
		for (size_t k = 0; k < v->n; k++)
			mc_set_f(y, view_at(v, o, k, i), k == best);
		return;
	}
	double mx = -INFINITY, sum = 0;
	for (size_t k = 0; k < v->n; k++) {
		double e = mc_get_f(x, view_at(v, o, k, i));
		if (mx == mx && (e != e || e > mx))
			mx = e; /* NaN sticks */
	}
	for (size_t k = 0; k < v->n; k++)
		sum += exp(mc_get_f(x, view_at(v, o, k, i)) - mx);
	for (size_t k = 0; k < v->n; k++) {
		size_t at = view_at(v, o, k, i);
		double d = mc_get_f(x, at) - mx;
		mc_set_f(y, at, p->kind == SM_SOFTMAX ? exp(d) / sum : d - log(sum));
	}
}

static int softmax_eval(mc_eval_ctx *c)
{
	const softmax_params *p = c->node->params;
	const mc_tensor *x = c->in[0];
	int axis;
	if (mc_norm_axis(c->node, p->axis, x->shape.rank, &axis))
		return -1;
	axis_view v = view_around(&x->shape, axis, p->coerce_2d);
	if (v.n == 0)
		return 0;
	for (size_t o = 0; o < v.outer; o++)
		for (size_t i = 0; i < v.inner; i++)
			softmax_row(p, x, c->out[0], &v, o, i);
	return 0;
}

#define SOFTMAX_OP(var, op_name)                                                            \
	static const mc_op var = {                                                          \
		.name = op_name, .min_opset = 1, .max_opset = MC_MAX_OPSET,                 \
		.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,       \
		.parse = softmax_parse, .infer = softmax_infer, .eval = softmax_eval,       \
	}

SOFTMAX_OP(op_softmax, "Softmax");
SOFTMAX_OP(op_log_softmax, "LogSoftmax");
SOFTMAX_OP(op_hardmax, "Hardmax");

/* ==== CumSum ==== */

static int cumsum_parse(mc_node *n)
{
	int64_t exclusive, reverse;
	if (mc_attr_int(n, "exclusive", 0, &exclusive) || mc_attr_int(n, "reverse", 0, &reverse))
		return -1;
	cumsum_params *p = mc_params_new(n, sizeof *p);
	p->exclusive = exclusive != 0;
	p->reverse = reverse != 0;
	return 0;
}

/* The axis only picks the direction of the scan, so it may come at run
 * time; a constant one is checked here already. */
static int cumsum_axis(const mc_node *n, const mc_tensor *axis_t, int rank, int *axis)
{
	int64_t a[1];
	size_t count;
	if (read_int_list(n, axis_t, "axis (input 2)", a, 1, &count))
		return -1;
	if (count != 1)
		return mc_node_error(n, "axis (input 2) must hold one value, got %zu", count);
	return mc_norm_axis(n, a[0], rank, axis);
}

static int cumsum_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const mc_value *x = c->in[0], *axis_v = c->in[1];
	int axis;
	if (need_numeric(n, x, "input"))
		return -1;
	if (!mc_dtype_is_int(axis_v->dtype) || axis_v->shape.rank > 1)
		return mc_node_error(n, "axis (input 2) must be an integer scalar, got %s of rank %d",
		                     mc_dtype_name(axis_v->dtype), axis_v->shape.rank);
	if (axis_v->konst && cumsum_axis(n, axis_v->konst, x->shape.rank, &axis))
		return -1;
	return mc_infer_same_as_input0(c);
}

static void cumsum_store(mc_tensor *y, size_t at, bool ints, uint64_t isum, double sum)
{
	if (ints)
		mc_set_i(y, at, (int64_t)isum);
	else
		mc_set_f(y, at, sum);
}

static int cumsum_eval(mc_eval_ctx *c)
{
	const cumsum_params *p = c->node->params;
	const mc_tensor *x = c->in[0];
	mc_tensor *y = c->out[0];
	int axis;
	if (cumsum_axis(c->node, c->in[1], x->shape.rank, &axis))
		return -1;
	axis_view v = view_around(&x->shape, axis, false);
	bool ints = mc_dtype_is_int(x->dtype);
	for (size_t o = 0; o < v.outer; o++)
		for (size_t i = 0; i < v.inner; i++) {
			double sum = 0;
			uint64_t isum = 0; /* integers wrap instead of overflowing */
			for (size_t step = 0; step < v.n; step++) {
				size_t at = view_at(&v, o, p->reverse ? v.n - 1 - step : step, i);
				if (p->exclusive)
					cumsum_store(y, at, ints, isum, sum);
				if (ints)
					isum += (uint64_t)mc_get_i(x, at);
				else
					sum += mc_get_f(x, at);
				if (!p->exclusive)
					cumsum_store(y, at, ints, isum, sum);
			}
		}
	return 0;
}

static const mc_op op_cumsum = {
	.name = "CumSum", .min_opset = 11, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
	.parse = cumsum_parse, .infer = cumsum_infer, .eval = cumsum_eval,
};

/* ==== TopK ==== */

static int topk_parse(mc_node *n)
{
	int64_t axis, largest = 1, sorted = 1, k = -1;
	if (mc_attr_int(n, "axis", -1, &axis))
		return -1;
	if (n->opset < 10) {
		if (!mc_attr_find(n, "k"))
			return mc_node_error(n, "needs attribute 'k' before opset 10");
		if (mc_attr_int(n, "k", 0, &k))
			return -1;
		if (input_present(n, 1))
			return mc_node_error(n, "takes k as an attribute before opset 10, not as an input");
	} else if (!input_present(n, 1)) {
		return mc_node_error(n, "needs input 2 (k) from opset 10 on");
	}
	/* sorted=0 leaves the order unspecified: sorted output is one valid answer */
	if (n->opset >= 11 && (mc_attr_int(n, "largest", 1, &largest) ||
	                       mc_attr_int(n, "sorted", 1, &sorted)))
		return -1;
	topk_params *p = mc_params_new(n, sizeof *p);
	p->axis = axis;
	p->k_attr = k;
	p->largest = largest != 0;
	return 0;
}

static int topk_k(const mc_node *n, const mc_tensor *k_t, int64_t dim, int64_t *k)
{
	const topk_params *p = n->params;
	if (n->opset < 10) {
		*k = p->k_attr;
	} else {
		size_t count;
		if (read_int_list(n, k_t, "k (input 2)", k, 1, &count))
			return -1;
		if (count != 1)
			return mc_node_error(n, "k (input 2) must hold one value, got %zu", count);
	}
	if (*k < 0 || *k > dim)
		return mc_node_error(n, "k = %lld is outside [0, %lld], the size of the axis",
		                     (long long)*k, (long long)dim);
	return 0;
}

static int topk_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const topk_params *p = n->params;
	const mc_value *x = c->in[0];
	int axis;
	int64_t k;
	if (need_numeric(n, x, "input") || mc_norm_axis(n, p->axis, x->shape.rank, &axis))
		return -1;
	const mc_tensor *k_t = NULL;
	int count = mc_count_out(c);
	if (n->opset >= 10 && !c->in[1]->konst) {
		/* k known at run time: the outputs padded to the axis' extent
		 * on that axis, counted (libcore/counted.c) by k */
		if (count < 0)
			return mc_node_error(n, "k (input 2, '%s') must be known at compile time: it "
			                     "sets the output shape", c->in[1]->name);
		for (int o = 0; o < 2 && o < c->n_out; o++)
			if (c->out[o])
				mc_set_counted_out(c, o, o ? MC_INT64 : x->dtype, &x->shape, axis, count);
		return 0;
	}
	if (n->opset >= 10)
		k_t = c->in[1]->konst;
	if (topk_k(n, k_t, x->shape.dims[axis], &k))
		return -1;
	mc_shape out = x->shape;
	out.dims[axis] = k;
	mc_set_out(c, 0, x->dtype, &out);
	if (c->n_out > 1 && c->out[1])
		mc_set_out(c, 1, MC_INT64, &out);
	return 0;
}

typedef struct {
	const mc_tensor *t;
	const axis_view *v;
	size_t o, i;
	bool largest;
} topk_row;

/* Whether position a goes before b: larger (smaller) first, NaN largest. */
static bool topk_before(const topk_row *r, size_t a, size_t b)
{
	int c = cmp_elems(r->t, view_at(r->v, r->o, a, r->i), view_at(r->v, r->o, b, r->i), true);
	return r->largest ? c > 0 : c < 0;
}

/* Stable merge sort: equal values keep the lower index first, as TopK's
 * tie rule asks. */
static void topk_sort(const topk_row *r, size_t *pos, size_t *tmp, size_t len)
{
	if (len < 2)
		return;
	size_t half = len / 2, a = 0, b = half, k = 0;
	topk_sort(r, pos, tmp, half);
	topk_sort(r, pos + half, tmp, len - half);
	while (a < half && b < len)
		tmp[k++] = topk_before(r, pos[b], pos[a]) ? pos[b++] : pos[a++];
	while (a < half)
		tmp[k++] = pos[a++];
	while (b < len)
		tmp[k++] = pos[b++];
	memcpy(pos, tmp, len * sizeof *pos);
}

static int topk_eval(mc_eval_ctx *c)
{
	const mc_node *n = c->node;
	const topk_params *p = n->params;
	const mc_tensor *x = c->in[0];
	int axis;
	int64_t k;
	if (mc_norm_axis(n, p->axis, x->shape.rank, &axis) ||
	    topk_k(n, c->n_in > 1 ? c->in[1] : NULL, x->shape.dims[axis], &k))
		return -1;
	axis_view v = view_around(&x->shape, axis, false);
	axis_view out_v = v;
	/* the outputs' extent: k, or the bound where k was known at run time
	 * only (the places past k then zero) */
	const mc_tensor *shaped = c->out[0] ? c->out[0] : c->n_out > 1 ? c->out[1] : NULL;
	out_v.n = shaped ? (size_t)shaped->shape.dims[axis] : (size_t)k;
	for (int o = 0; o < 2 && o < c->n_out; o++)
		if (c->out[o])
			memset(c->out[o]->data, 0, c->out[o]->nbytes);
	mc_deliver_count(c, k);
	size_t *pos = mc_alloc_array(n, v.n, sizeof *pos);
	size_t *tmp = mc_alloc_array(n, v.n, sizeof *tmp);
	if (!pos || !tmp) {
		free(pos);
		free(tmp);
		return -1;
	}
	size_t es = mc_dtype_size(x->dtype);
	for (size_t o = 0; o < v.outer; o++)
		for (size_t i = 0; i < v.inner; i++) {
			topk_row r = {x, &v, o, i, p->largest};
			for (size_t j = 0; j < v.n; j++)
				pos[j] = j;
			topk_sort(&r, pos, tmp, v.n);
			for (size_t j = 0; j < (size_t)k; j++) {
				size_t to = view_at(&out_v, o, j, i);
				if (c->out[0])
					memcpy((char *)c->out[0]->data + to * es,
					       (const char *)x->data + view_at(&v, o, pos[j], i) * es, es);
				if (c->n_out > 1 && c->out[1])
					mc_set_i(c->out[1], to, (int64_t)pos[j]);
			}
		}
	free(pos);
	free(tmp);
	return 0;
}

static const mc_op op_topk = {
	.name = "TopK", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 2,
	.parse = topk_parse, .infer = topk_infer, .eval = topk_eval, .flags = MC_OP_COUNTED,
};

/* ==== normalisation helpers ==== */

/* Mean and (population) variance of a strided run, two passes. */
static void mean_var(const mc_tensor *x, size_t start, size_t count, size_t stride, double *mean,
                     double *var)
{
	double sum = 0, sq = 0;
	for (size_t j = 0; j < count; j++)
		sum += mc_get_f(x, start + j * stride);
	double m = sum / (double)count;
	for (size_t j = 0; j < count; j++) {
		double d = mc_get_f(x, start + j * stride) - m;
		sq += d * d;
	}
	*mean = m;
	*var = sq / (double)count;
}

/* A per-channel parameter input: numel must be `want`. */
static int check_param(const mc_node *n, const mc_value *v, const char *what, size_t want)
{
	if (need_float(n, v, what))
		return -1;
	if (mc_numel(&v->shape) != want) {
		char b[256];
		return mc_node_error(n, "%s '%s' has shape %s; expected %zu element%s", what, v->name,
		                     mc_shape_str(&v->shape, b, sizeof b), want, want == 1 ? "" : "s");
	}
	return 0;
}

static int need_rank(const mc_node *n, const mc_value *x, int min_rank)
{
	if (x->shape.rank >= min_rank)
		return 0;
	return mc_node_error(n, "input '%s' has rank %d; at least %d (N x C x ...) expected",
	                     x->name, x->shape.rank, min_rank);
}

/* ==== BatchNormalization ==== */

static int bn_parse(mc_node *n)
{
	double epsilon, momentum;
	int64_t spatial = 1, is_test = 0, training_mode = 0;
	if (mc_attr_float(n, "epsilon", 1e-5, &epsilon) ||
	    mc_attr_float(n, "momentum", 0.9, &momentum))
		return -1;
	if (n->opset < 9 && mc_attr_int(n, "spatial", 1, &spatial))
		return -1;
	if (n->opset < 7 && mc_attr_int(n, "is_test", 0, &is_test))
		return -1;
	if (n->opset < 6) { /* consumed_inputs: a legacy in-place hint, ignored */
		const int64_t *consumed;
		size_t count;
		if (mc_attr_ints(n, "consumed_inputs", &consumed, &count))
			return -1;
	}
	if (n->opset >= 14 && mc_attr_int(n, "training_mode", 0, &training_mode))
		return -1;
	bool stats_out = false;
	for (int k = 1; k < n->n_outputs; k++)
		stats_out |= output_present(n, k);
	bool training;
	if (n->opset >= 14) {
		training = training_mode != 0;
		if (!training && stats_out)
			return mc_node_error(n, "outputs running_mean and running_var exist only with "
			                     "training_mode=1");
		if (n->n_outputs > 3)
			return mc_node_error(n, "has %d outputs; at most 3 from opset 14 on",
			                     n->n_outputs);
	} else if (n->opset >= 7) {
		training = stats_out; /* the statistics outputs mean training mode */
	} else {
		training = is_test == 0;
	}
	bn_params *p = mc_params_new(n, sizeof *p);
	p->epsilon = epsilon;
	p->momentum = momentum;
	p->spatial = spatial != 0;
	p->training = training;
	return 0;
}

/* Statistics groups: channels, or every (C, D...) position with spatial=0. */
static size_t bn_groups(const bn_params *p, const mc_shape *s)
{
	if (p->spatial)
		return (size_t)s->dims[1];
	size_t g = 1;
	for (int d = 1; d < s->rank; d++)
		g *= (size_t)s->dims[d];
	return g;
}

static int bn_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const bn_params *p = n->params;
	const mc_value *x = c->in[0];
	static const char *names[] = {"X", "scale", "B", "input_mean", "input_var"};
	if (need_rank(n, x, 2) || need_float(n, x, "X"))
		return -1;
	size_t groups = bn_groups(p, &x->shape);
	for (int k = 1; k < 5; k++)
		if (check_param(n, c->in[k], names[k], groups))
			return -1;
	mc_set_out(c, 0, x->dtype, &x->shape);
	/* running mean / var (type of the inputs they update), then the batch's */
	if (c->n_out > 1)
		mc_set_out(c, 1, c->in[3]->dtype, &c->in[3]->shape);
	if (c->n_out > 2)
		mc_set_out(c, 2, c->in[4]->dtype, &c->in[4]->shape);
	for (int k = 3; k < c->n_out; k++)
		mc_set_out(c, k, x->dtype, &c->in[3]->shape);
	return 0;
}

/* Batch mean and variance per group (over N and, when spatial, D...). */
static void bn_batch_stats(const mc_tensor *x, size_t groups, size_t inner, bool spatial,
                           double *mean, double *var)
{
	size_t per_sample = groups * (spatial ? inner : 1);
	double count = groups ? (double)x->numel / (double)groups : 0;
	for (size_t i = 0; i < x->numel; i++)
		mean[spatial ? (i % per_sample) / inner : i % per_sample] += mc_get_f(x, i);
	for (size_t g = 0; g < groups; g++)
		mean[g] /= count;
	for (size_t i = 0; i < x->numel; i++) {
		size_t g = spatial ? (i % per_sample) / inner : i % per_sample;
		double d = mc_get_f(x, i) - mean[g];
		var[g] += d * d;
	}
	for (size_t g = 0; g < groups; g++)
		var[g] /= count;
}

static int bn_eval(mc_eval_ctx *c)
{
	const mc_node *n = c->node;
	const bn_params *p = n->params;
	const mc_tensor *x = c->in[0], *scale = c->in[1], *bias = c->in[2];
	const mc_tensor *run_mean = c->in[3], *run_var = c->in[4];
	size_t groups = bn_groups(p, &x->shape);
	size_t inner = 1;
	for (int d = 2; d < x->shape.rank; d++)
		inner *= (size_t)x->shape.dims[d];
	double *mean = mc_alloc_array(n, groups, sizeof *mean);
	double *var = mc_alloc_array(n, groups, sizeof *var);
	int rc = mean && var ? 0 : -1;
	if (!rc && p->training)
		bn_batch_stats(x, groups, inner, p->spatial, mean, var);
	else if (!rc)
		for (size_t g = 0; g < groups; g++) {
			mean[g] = mc_get_f(run_mean, g);
			var[g] = mc_get_f(run_var, g);
		}
	size_t per_sample = groups * (p->spatial ? inner : 1);
	for (size_t i = 0; !rc && i < x->numel; i++) {
		size_t g = p->spatial ? (i % per_sample) / inner : i % per_sample;
		double norm = (mc_get_f(x, i) - mean[g]) / sqrt(var[g] + p->epsilon);
		mc_set_f(c->out[0], i, norm * mc_get_f(scale, g) + mc_get_f(bias, g));
	}
	/* training outputs: running statistics updated by momentum, then the
	 * batch's own (saved_mean, saved_var before opset 14) */
	for (size_t g = 0; !rc && g < groups; g++) {
		double m = p->momentum;
		if (c->n_out > 1 && c->out[1])
			mc_set_f(c->out[1], g, mc_get_f(run_mean, g) * m + mean[g] * (1 - m));
		if (c->n_out > 2 && c->out[2])
			mc_set_f(c->out[2], g, mc_get_f(run_var, g) * m + var[g] * (1 - m));
		if (c->n_out > 3 && c->out[3])
			mc_set_f(c->out[3], g, mean[g]);
		if (c->n_out > 4 && c->out[4])
			mc_set_f(c->out[4], g, var[g]);
	}
	free(mean);
	free(var);
	return rc;
}

static const mc_op op_batch_norm = {
	.name = "BatchNormalization", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 5, .max_inputs = 5, .min_outputs = 1, .max_outputs = 5,
	.parse = bn_parse, .infer = bn_infer, .eval = bn_eval,
};

/* ==== InstanceNormalization ==== */

static int eps_parse(mc_node *n)
{
	double epsilon;
	if (mc_attr_float(n, "epsilon", 1e-5, &epsilon))
		return -1;
	if (n->opset < 6) { /* consumed_inputs: legacy in-place hint, ignored */
		const int64_t *consumed;
		size_t count;
		if (mc_attr_ints(n, "consumed_inputs", &consumed, &count))
			return -1;
	}
	eps_params *p = mc_params_new(n, sizeof *p);
	p->epsilon = epsilon;
	return 0;
}

static int instnorm_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const mc_value *x = c->in[0];
	if (need_rank(n, x, 2) || need_float(n, x, "input"))
		return -1;
	size_t channels = (size_t)x->shape.dims[1];
	if (check_param(n, c->in[1], "scale", channels) || check_param(n, c->in[2], "B", channels))
		return -1;
	return mc_infer_same_as_input0(c);
}

static int instnorm_eval(mc_eval_ctx *c)
{
	const eps_params *p = c->node->params;
	const mc_tensor *x = c->in[0];
	axis_view v = view_around(&x->shape, 1, false); /* N x C x (D...) */
	for (size_t o = 0; o < v.outer; o++)
		for (size_t ch = 0; ch < v.n; ch++) {
			size_t start = view_at(&v, o, ch, 0);
			double mean, var;
			mean_var(x, start, v.inner, 1, &mean, &var);
			double inv = 1 / sqrt(var + p->epsilon);
			double s = mc_get_f(c->in[1], ch), b = mc_get_f(c->in[2], ch);
			for (size_t j = 0; j < v.inner; j++)
				mc_set_f(c->out[0], start + j, (mc_get_f(x, start + j) - mean) * inv * s + b);
		}
	return 0;
}

static const mc_op op_instance_norm = {
	.name = "InstanceNormalization", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
	.parse = eps_parse, .infer = instnorm_infer, .eval = instnorm_eval,
};

/* ==== LayerNormalization ==== */

static int layernorm_parse(mc_node *n)
{
	int64_t axis, stash;
	double epsilon;
	if (mc_attr_int(n, "axis", -1, &axis) || mc_attr_float(n, "epsilon", 1e-5, &epsilon) ||
	    mc_attr_int(n, "stash_type", MC_FLOAT, &stash))
		return -1;
	if (stash != MC_FLOAT && stash != MC_DOUBLE && stash != MC_FLOAT16 && stash != MC_BFLOAT16)
		return mc_node_error(n, "stash_type %lld is not a floating-point dtype",
		                     (long long)stash);
	layernorm_params *p = mc_params_new(n, sizeof *p);
	p->axis = axis;
	p->epsilon = epsilon;
	p->stash = (mc_dtype)stash;
	return 0;
}

/* Scale and B broadcast (numpy rules, one way) to the normalised dims. */
static int check_broadcast_to_tail(const mc_node *n, const mc_value *v, const char *what,
                                   const mc_shape *x, int axis)
{
	if (need_float(n, v, what))
		return -1;
	bool ok = v->shape.rank <= x->rank - axis;
	for (int d = 0; ok && d < v->shape.rank; d++) {
		int64_t dim = v->shape.dims[v->shape.rank - 1 - d];
		ok = dim == 1 || dim == x->dims[x->rank - 1 - d];
	}
	if (ok)
		return 0;
	char a[256], b[256];
	mc_shape tail = {.rank = x->rank - axis};
	for (int d = axis; d < x->rank; d++)
		tail.dims[d - axis] = x->dims[d];
	return mc_node_error(n, "%s '%s' of shape %s does not broadcast to the normalised shape %s",
	                     what, v->name, mc_shape_str(&v->shape, a, sizeof a),
	                     mc_shape_str(&tail, b, sizeof b));
}

static int layernorm_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const layernorm_params *p = n->params;
	const mc_value *x = c->in[0];
	int axis;
	if (need_float(n, x, "X") || mc_norm_axis(n, p->axis, x->shape.rank, &axis))
		return -1;
	if (check_broadcast_to_tail(n, c->in[1], "Scale", &x->shape, axis))
		return -1;
	if (c->n_in > 2 && c->in[2] && check_broadcast_to_tail(n, c->in[2], "B", &x->shape, axis))
		return -1;
	mc_shape stat = x->shape;
	for (int d = axis; d < stat.rank; d++)
		stat.dims[d] = 1;
	mc_set_out(c, 0, x->dtype, &x->shape);
	for (int k = 1; k < c->n_out; k++)
		mc_set_out(c, k, p->stash, &stat);
	return 0;
}

/* Index into a parameter broadcast over the normalised dims, per column. */
static size_t *tail_index(const mc_node *n, const mc_tensor *t, const mc_shape *x, int axis,
                          size_t cols)
{
	mc_shape tail = {.rank = x->rank - axis};
	for (int d = axis; d < x->rank; d++)
		tail.dims[d - axis] = x->dims[d];
	int64_t strides[MC_MAX_RANK];
	mc_broadcast_strides(&t->shape, &tail, strides);
	size_t *idx = mc_alloc_array(n, cols, sizeof *idx);
	if (!idx)
		return NULL;
	walker w;
	walker_init(&w, &tail, strides);
	for (size_t j = 0; j < cols; j++, walker_next(&w))
		idx[j] = w.off;
	return idx;
}

static int layernorm_eval(mc_eval_ctx *c)
{
	const mc_node *n = c->node;
	const layernorm_params *p = n->params;
	const mc_tensor *x = c->in[0], *scale = c->in[1];
	const mc_tensor *bias = c->n_in > 2 ? c->in[2] : NULL;
	int axis;
	if (mc_norm_axis(n, p->axis, x->shape.rank, &axis))
		return -1;
	axis_view v = view_around(&x->shape, axis, true); /* rows x cols */
	size_t *s_idx = tail_index(n, scale, &x->shape, axis, v.n);
	size_t *b_idx = bias ? tail_index(n, bias, &x->shape, axis, v.n) : NULL;
	int rc = s_idx && (!bias || b_idx) ? 0 : -1;
	for (size_t r = 0; !rc && r < v.outer; r++) {
		double mean, var;
		mean_var(x, r * v.n, v.n, 1, &mean, &var);
		double inv = 1 / sqrt(var + p->epsilon);
		for (size_t j = 0; j < v.n; j++) {
			size_t at = r * v.n + j;
			double y = (mc_get_f(x, at) - mean) * inv * mc_get_f(scale, s_idx[j]);
			if (bias)
				y += mc_get_f(bias, b_idx[j]);
			mc_set_f(c->out[0], at, y);
		}
		if (c->n_out > 1 && c->out[1])
			mc_set_f(c->out[1], r, mean);
		if (c->n_out > 2 && c->out[2])
			mc_set_f(c->out[2], r, inv);
	}
	free(s_idx);
	free(b_idx);
	return rc;
}

static const mc_op op_layer_norm = {
	.name = "LayerNormalization", .min_opset = 17, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 3,
	.parse = layernorm_parse, .infer = layernorm_infer, .eval = layernorm_eval,
};

/* ==== GroupNormalization ==== */

static int groupnorm_parse(mc_node *n)
{
	double epsilon;
	int64_t groups, stash;
	if (mc_attr_float(n, "epsilon", 1e-5, &epsilon))
		return -1;
	if (!mc_attr_find(n, "num_groups"))
		return mc_node_error(n, "needs attribute 'num_groups'");
	if (mc_attr_int(n, "num_groups", 1, &groups))
		return -1;
	if (groups < 1)
		return mc_node_error(n, "num_groups must be positive, got %lld", (long long)groups);
	if (n->opset >= 21 && mc_attr_int(n, "stash_type", MC_FLOAT, &stash))
		return -1;
	groupnorm_params *p = mc_params_new(n, sizeof *p);
	p->epsilon = epsilon;
	p->groups = groups;
	p->per_channel = n->opset >= 21;
	return 0;
}

static int groupnorm_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const groupnorm_params *p = n->params;
	const mc_value *x = c->in[0];
	if (need_rank(n, x, 2) || need_float(n, x, "X"))
		return -1;
	int64_t channels = x->shape.dims[1];
	if (channels % p->groups)
		return mc_node_error(n, "%lld channels do not split into %lld groups",
		                     (long long)channels, (long long)p->groups);
	size_t want = (size_t)(p->per_channel ? channels : p->groups);
	if (check_param(n, c->in[1], "scale", want) || check_param(n, c->in[2], "bias", want))
		return -1;
	return mc_infer_same_as_input0(c);
}

static int groupnorm_eval(mc_eval_ctx *c)
{
	const groupnorm_params *p = c->node->params;
	const mc_tensor *x = c->in[0];
	axis_view v = view_around(&x->shape, 1, false); /* N x C x (D...) */
	size_t groups = (size_t)p->groups, per_group = v.n / groups;
	size_t block = per_group * v.inner; /* a group's elements are contiguous */
	for (size_t o = 0; o < v.outer; o++)
		for (size_t g = 0; g < groups; g++) {
			size_t start = view_at(&v, o, g * per_group, 0);
			double mean, var;
			mean_var(x, start, block, 1, &mean, &var);
			double inv = 1 / sqrt(var + p->epsilon);
			for (size_t j = 0; j < block; j++) {
				size_t k = p->per_channel ? g * per_group + j / v.inner : g;
				double y = (mc_get_f(x, start + j) - mean) * inv;
				mc_set_f(c->out[0], start + j,
				         y * mc_get_f(c->in[1], k) + mc_get_f(c->in[2], k));
			}
		}
	return 0;
}

static const mc_op op_group_norm = {
	.name = "GroupNormalization", .min_opset = 18, .max_opset = MC_MAX_OPSET,
	.min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
	.parse = groupnorm_parse, .infer = groupnorm_infer, .eval = groupnorm_eval,
};

/* ==== LpNormalization ==== */

static int lpnorm_parse(mc_node *n)
{
	int64_t axis, p;
	if (mc_attr_int(n, "axis", -1, &axis) || mc_attr_int(n, "p", 2, &p))
		return -1;
	if (p != 1 && p != 2)
		return mc_node_error(n, "p must be 1 or 2, got %lld", (long long)p);
	lpnorm_params *lp = mc_params_new(n, sizeof *lp);
	lp->axis = axis;
	lp->p = p;
	return 0;
}

static int lpnorm_infer(mc_infer_ctx *c)
{
	const lpnorm_params *p = c->node->params;
	int axis;
	if (need_float(c->node, c->in[0], "input") ||
	    mc_norm_axis(c->node, p->axis, c->in[0]->shape.rank, &axis))
		return -1;
	return mc_infer_same_as_input0(c);
}

static int lpnorm_eval(mc_eval_ctx *c)
{
	const lpnorm_params *p = c->node->params;
	const mc_tensor *x = c->in[0];
	int axis;
	if (mc_norm_axis(c->node, p->axis, x->shape.rank, &axis))
		return -1;
	axis_view v = view_around(&x->shape, axis, false);
	for (size_t o = 0; o < v.outer; o++)
		for (size_t i = 0; i < v.inner; i++) {
			double norm = 0;
			for (size_t k = 0; k < v.n; k++) {
				double e = mc_get_f(x, view_at(&v, o, k, i));
				norm += p->p == 1 ? fabs(e) : e * e;
			}
			if (p->p == 2)
				norm = sqrt(norm);
			/* an all-zero row stays zero (as ONNX Runtime does), not 0/0 */
			for (size_t k = 0; k < v.n; k++) {
				size_t at = view_at(&v, o, k, i);
				mc_set_f(c->out[0], at, norm == 0 ? 0 : mc_get_f(x, at) / norm);
			}
		}
	return 0;
}

static const mc_op op_lp_norm = {
	.name = "LpNormalization", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
	.parse = lpnorm_parse, .infer = lpnorm_infer, .eval = lpnorm_eval,
};

/* ==== MeanVarianceNormalization ==== */

static int mvn_plan(const mc_node *n, const mc_shape *s, reduce_plan *plan)
{
	static const int64_t default_axes[] = {0, 2, 3};
	const int64_t *axes;
	size_t count;
	if (mc_attr_ints(n, "axes", &axes, &count))
		return -1;
	if (!mc_attr_find(n, "axes")) {
		axes = default_axes;
		count = 3;
	}
	if (count > MC_MAX_RANK)
		return mc_node_error(n, "lists %zu axes, more than any rank", count);
	return plan_reduction(n, s, axes, count, true, true, plan);
}

static int mvn_infer(mc_infer_ctx *c)
{
	reduce_plan plan;
	if (need_float(c->node, c->in[0], "input") || mvn_plan(c->node, &c->in[0]->shape, &plan))
		return -1;
	return mc_infer_same_as_input0(c);
}

static int mvn_eval(mc_eval_ctx *c)
{
	const mc_node *n = c->node;
	const mc_tensor *x = c->in[0];
	reduce_plan plan;
	if (mvn_plan(n, &x->shape, &plan))
		return -1;
	size_t groups = mc_numel(&plan.out);
	double *mean = mc_alloc_array(n, groups, sizeof *mean);
	double *sq = mc_alloc_array(n, groups, sizeof *sq);
	if (!mean || !sq) {
		free(mean);
		free(sq);
		return -1;
	}
	double count = groups ? (double)x->numel / (double)groups : 0;
	walker w;
	for (int pass = 0; pass < 3; pass++) {
		walker_init(&w, &x->shape, plan.out_strides);
		for (size_t i = 0; i < x->numel; i++, walker_next(&w)) {
			double d = mc_get_f(x, i) - (pass ? mean[w.off] : 0);
			if (pass == 0)
				mean[w.off] += d;
			else if (pass == 1)
				sq[w.off] += d * d;
			else /* the op's function body adds 1e-9 to the deviation */
				mc_set_f(c->out[0], i, d / (sqrt(sq[w.off] / count) + 1e-9));
		}
		for (size_t g = 0; pass == 0 && g < groups; g++)
			mean[g] /= count;
	}
	free(mean);
	free(sq);
	return 0;
}

static const mc_op op_mvn = {
	.name = "MeanVarianceNormalization", .min_opset = 9, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
	.infer = mvn_infer, .eval = mvn_eval,
};

/* ==== LRN ==== */

static int lrn_parse(mc_node *n)
{
	double alpha, beta, bias;
	int64_t size;
	if (!mc_attr_find(n, "size"))
		return mc_node_error(n, "needs attribute 'size'");
	if (mc_attr_int(n, "size", 1, &size) || mc_attr_float(n, "alpha", 1e-4, &alpha) ||
	    mc_attr_float(n, "beta", 0.75, &beta) || mc_attr_float(n, "bias", 1.0, &bias))
		return -1;
	if (size < 1)
		return mc_node_error(n, "size must be positive, got %lld", (long long)size);
	lrn_params *p = mc_params_new(n, sizeof *p);
	p->alpha = alpha;
	p->beta = beta;
	p->bias = bias;
	p->size = size;
	return 0;
}

static int lrn_infer(mc_infer_ctx *c)
{
	if (need_rank(c->node, c->in[0], 2) || need_float(c->node, c->in[0], "input"))
		return -1;
	return mc_infer_same_as_input0(c);
}

static int lrn_eval(mc_eval_ctx *c)
{
	const lrn_params *p = c->node->params;
	const mc_tensor *x = c->in[0];
	axis_view v = view_around(&x->shape, 1, false); /* N x C x (D...) */
	/* the window covers channels [ch - before, ch + after] */
	int64_t before = (p->size - 1) / 2, after = p->size - 1 - before;
	int64_t channels = (int64_t)v.n;
	for (size_t o = 0; o < v.outer; o++)
		for (int64_t ch = 0; ch < channels; ch++)
			for (size_t i = 0; i < v.inner; i++) {
				int64_t lo = ch - before < 0 ? 0 : ch - before;
				int64_t hi = ch > channels - 1 - after ? channels - 1 : ch + after;
				double sq = 0;
				for (int64_t k = lo; k <= hi; k++) {
					double e = mc_get_f(x, view_at(&v, o, (size_t)k, i));
					sq += e * e;
				}
				size_t at = view_at(&v, o, (size_t)ch, i);
				double den = pow(p->bias + p->alpha / (double)p->size * sq, p->beta);
				mc_set_f(c->out[0], at, mc_get_f(x, at) / den);
			}
	return 0;
}

static const mc_op op_lrn = {
	.name = "LRN", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
	.parse = lrn_parse, .infer = lrn_infer, .eval = lrn_eval,
};

const mc_op *const mc_ops_reduce[] = {
	&op_reduce_sum, &op_reduce_mean, &op_reduce_prod, &op_reduce_max, &op_reduce_min,
	&op_reduce_l1, &op_reduce_l2, &op_reduce_log_sum, &op_reduce_log_sum_exp,
	&op_reduce_sum_square,
	&op_argmax, &op_argmin,
	&op_softmax, &op_log_softmax, &op_hardmax,
	&op_cumsum, &op_topk,
	&op_batch_norm, &op_instance_norm, &op_layer_norm, &op_group_norm, &op_lp_norm,
	&op_mvn, &op_lrn,
	NULL,
};
