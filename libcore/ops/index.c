/* Index and data-movement ops: Slice, Gather, GatherElements, GatherND,
 * Scatter, ScatterElements, ScatterND, Pad, Resize, Upsample, DepthToSpace,
 * SpaceToDepth, OneHot, Trilu, Compress.
 *
 * Shapes are static, so every input that sets an output shape (Slice's
 * starts, Pad's pads, Resize's scales or sizes, OneHot's depth, Compress's
 * condition) must be known at compile time. Indices that only pick data
 * (Gather, Scatter*) may come at run time: they are checked in eval and a
 * bad one is reported with the node's name and the index.
 *
 * Pure data movement copies whole elements byte for byte, so every dtype
 * is exact; arithmetic (Resize's interpolation, Scatter's reductions) goes
 * through double or int64. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "index.h"

/* ---- shared helpers ---- */

/* Size in bytes of an element the op can move; 0 after reporting. */
static size_t elem_size(const mc_node *n, mc_dtype t, const char *what)
{
	size_t s = mc_dtype_supported(t) ? mc_dtype_size(t) : 0;
	if (!s)
		mc_node_error(n, "%s has unsupported dtype %s", what, mc_dtype_name(t));
	return s;
}

static int need_index_dtype(const mc_node *n, mc_dtype t, const char *what)
{
	if (t == MC_INT32 || t == MC_INT64)
		return 0;
	return mc_node_error(n, "%s must be int32 or int64, got %s", what, mc_dtype_name(t));
}

/* Steps a row-major multi-index through shape s; false after the last. */
static bool next_index(int64_t *idx, const mc_shape *s)
{
	for (int d = s->rank - 1; d >= 0; d--) {
		if (++idx[d] < s->dims[d])
			return true;
		idx[d] = 0;
	}
	return false;
}

/* Product of dims [from, to) of s (valid shapes never overflow). */
static size_t dims_prod(const mc_shape *s, int from, int to)
{
	size_t p = 1;
	for (int d = from; d < to; d++)
		p *= (size_t)s->dims[d];
	return p;
}

/* The compile-time data of input i, or NULL after reporting: `what` says
 * which input, so the message names it. */
static const mc_tensor *need_const(mc_infer_ctx *c, int i, const char *what)
{
	const mc_value *v = c->in[i];
	if (v->konst)
		return v->konst;
	mc_node_error(c->node, "input %d (%s, '%s') must be known at compile time because it "
	              "sets the output shape; make it an initializer or pin the graph inputs "
	              "it depends on", i, what, v->name);
	return NULL;
}

/* t is a scalar or 1-D tensor of floats (else integers) holding at most cap
 * values; -1 after reporting. */
static int check_list_tensor(const mc_node *n, const mc_tensor *t, const char *what,
                             bool floats, size_t cap)
{
	bool kind_ok = floats ? mc_dtype_is_float(t->dtype) : mc_dtype_is_int(t->dtype);
	if (t->shape.rank > 1 || !kind_ok)
		return mc_node_error(n, "%s must be a 1-D %s tensor, got %s of rank %d", what,
		                     floats ? "float" : "integer", mc_dtype_name(t->dtype),
		                     t->shape.rank);
	if (t->numel > cap)
		return mc_node_error(n, "%s has %zu elements, at most %zu allowed", what, t->numel,
		                     cap);
	return 0;
}

/* Reads a scalar or 1-D integer tensor into out[cap]; -1 after reporting. */
static int tensor_ints(const mc_node *n, const mc_tensor *t, const char *what, int64_t *out,
                       size_t cap, size_t *count)
{
	if (check_list_tensor(n, t, what, false, cap))
		return -1;
	for (size_t k = 0; k < t->numel; k++)
		out[k] = mc_get_i(t, k);
	*count = t->numel;
	return 0;
}

/* Reads a scalar or 1-D float tensor into out[cap]; -1 after reporting. */
static int tensor_floats(const mc_node *n, const mc_tensor *t, const char *what, double *out,
                         size_t cap, size_t *count)
{
	if (check_list_tensor(n, t, what, true, cap))
		return -1;
	for (size_t k = 0; k < t->numel; k++)
		out[k] = mc_get_f(t, k);
	*count = t->numel;
	return 0;
}

/* Normalises a list of axes against rank; rejects repeats. */
static int norm_axes(const mc_node *n, const int64_t *axes, size_t count, int rank, int *out)
{
	bool seen[MC_MAX_RANK] = {false};
	for (size_t i = 0; i < count; i++) {
		if (mc_norm_axis(n, axes[i], rank, &out[i]))
			return -1;
		if (seen[out[i]])
			return mc_node_error(n, "axis %lld is given twice", (long long)axes[i]);
		seen[out[i]] = true;
	}
	return 0;
}

static int out_rank_ok(const mc_node *n, long rank)
{
	if (rank > MC_MAX_RANK)
		return mc_node_error(n, "output rank %ld exceeds the supported maximum %d", rank,
		                     MC_MAX_RANK);
	return 0;
}

/* An index into an axis of size dim, negative counting from the end. */
static int fix_index(const mc_node *n, int64_t idx, int64_t dim, size_t pos, int axis,
                     int64_t *out)
{
	*out = 0;
	if (idx < -dim || idx >= dim)
		return mc_node_error(n, "index %lld (at position %zu of the indices) is out of "
		                     "range [%lld, %lld) for axis %d of size %lld", (long long)idx,
		                     pos, (long long)-dim, (long long)dim, axis, (long long)dim);
	*out = idx < 0 ? idx + dim : idx;
	return 0;
}

/* ---- Slice ---- */

/* ceil(a / b) for a >= 0, b > 0, without overflow. */
static int64_t ceil_div_u(uint64_t a, uint64_t b)
{
	return a ? (int64_t)((a - 1) / b + 1) : 0;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* One axis of a slice, with the ONNX clamping rules: negative starts and
 * ends count from the end; then starts clamp to [0, dim] for positive
 * steps and [0, dim-1] for negative ones, ends to [0, dim] and [-1, dim-1]. */
static void slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first,
                       int64_t *len)
{
	if (start < 0)
		start += dim;
	if (end < 0)
		end += dim;
	if (step > 0) {
		start = clamp64(start, 0, dim);
		end = clamp64(end, 0, dim);
		*first = start;
		*len = end > start ? ceil_div_u((uint64_t)(end - start), (uint64_t)step) : 0;
		return;
	}
	if (dim == 0) {
		*first = 0;
		*len = 0;
		return;
	}
	start = clamp64(start, 0, dim - 1);
	end = clamp64(end, -1, dim - 1);
	*first = start;
	/* -step as unsigned, also for INT64_MIN */
	uint64_t mag = (uint64_t)(-(step + 1)) + 1;
	*len = start > end ? ceil_div_u((uint64_t)(start - end), mag) : 0;
}

/* Builds the plan from starts/ends/axes/steps: from attributes before
 * opset 10, else from the tensors t[0..3] (axes and steps may be NULL). */
int mc_slice_make_plan(const mc_node *n, const mc_shape *data, const mc_tensor *const *t,
                       slice_plan *p)
{
	int64_t starts[MC_MAX_RANK], ends[MC_MAX_RANK], axes[MC_MAX_RANK], steps[MC_MAX_RANK];
	size_t ns = 0, ne = 0, na = 0, nst = 0;
	bool has_axes = false, has_steps = false;
	if (n->opset < 10) {
		const int64_t *a;
		size_t cnt;
		if (mc_attr_ints(n, "starts", &a, &cnt))
			return -1;
		if (!a)
			return mc_node_error(n, "needs attribute 'starts'");
		if (cnt > MC_MAX_RANK)
			return mc_node_error(n, "'starts' has %zu entries, more than the rank", cnt);
		memcpy(starts, a, cnt * sizeof *a);
		ns = cnt;
		if (mc_attr_ints(n, "ends", &a, &cnt))
			return -1;
		if (!a)
			return mc_node_error(n, "needs attribute 'ends'");
		if (cnt > MC_MAX_RANK)
			return mc_node_error(n, "'ends' has %zu entries, more than the rank", cnt);
		memcpy(ends, a, cnt * sizeof *a);
		ne = cnt;
		if (mc_attr_ints(n, "axes", &a, &cnt))
			return -1;
		if (a) {
			if (cnt > MC_MAX_RANK)
				return mc_node_error(n, "'axes' has %zu entries, more than the rank",
				                     cnt);
			memcpy(axes, a, cnt * sizeof *a);
			na = cnt;
			has_axes = true;
		}
	} else {
		if (tensor_ints(n, t[0], "starts", starts, MC_MAX_RANK, &ns) ||
		    tensor_ints(n, t[1], "ends", ends, MC_MAX_RANK, &ne))
			return -1;
		if (t[2]) {
			if (tensor_ints(n, t[2], "axes", axes, MC_MAX_RANK, &na))
				return -1;
			has_axes = true;
		}
		if (t[3]) {
			if (tensor_ints(n, t[3], "steps", steps, MC_MAX_RANK, &nst))
				return -1;
			has_steps = true;
		}
	}
	if (ne != ns)
		return mc_node_error(n, "starts has %zu entries but ends has %zu", ns, ne);
	if (has_axes && na != ns)
		return mc_node_error(n, "starts has %zu entries but axes has %zu", ns, na);
	if (has_steps && nst != ns)
		return mc_node_error(n, "starts has %zu entries but steps has %zu", ns, nst);
	if (ns > (size_t)data->rank)
		return mc_node_error(n, "slices %zu axes of a rank-%d input", ns, data->rank);
	int ax[MC_MAX_RANK];
	if (!has_axes)
		for (size_t i = 0; i < ns; i++)
			axes[i] = (int64_t)i;
	if (norm_axes(n, axes, ns, data->rank, ax))
		return -1;
	p->out = *data;
	for (int d = 0; d < data->rank; d++) {
		p->start[d] = 0;
		p->step[d] = 1;
	}
	for (size_t i = 0; i < ns; i++) {
		int64_t step = has_steps ? steps[i] : 1;
		if (step == 0)
			return mc_node_error(n, "steps[%zu] is 0; steps must be nonzero", i);
		p->step[ax[i]] = step;
		slice_axis(data->dims[ax[i]], starts[i], ends[i], step, &p->start[ax[i]],
		           &p->out.dims[ax[i]]);
	}
	return 0;
}

static int slice_parse(mc_node *n)
{
	if (n->opset >= 10 && (mc_attr_find(n, "starts") || mc_attr_find(n, "ends")))
		return mc_node_error(n, "starts/ends are inputs from opset 10, not attributes");
	return 0;
}

static int slice_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const mc_tensor *t[4] = {NULL, NULL, NULL, NULL};
	static const char *names[4] = {"starts", "ends", "axes", "steps"};
	if (!elem_size(n, c->in[0]->dtype, "data"))
		return -1;
	if (n->opset >= 10) {
		if (c->n_in < 3 || !c->in[1] || !c->in[2])
			return mc_node_error(n, "needs inputs starts and ends");
		for (int i = 1; i < c->n_in && i <= 4; i++) {
			if (!c->in[i])
				continue;
			if (need_index_dtype(n, c->in[i]->dtype, names[i - 1]))
				return -1;
			if (!(t[i - 1] = need_const(c, i, names[i - 1])))
				return -1;
		}
	}
	slice_plan p;
	if (mc_slice_make_plan(n, &c->in[0]->shape, t, &p))
		return -1;
	mc_set_out(c, 0, c->in[0]->dtype, &p.out);
	return 0;
}

static int slice_eval(mc_eval_ctx *c)
{
	const mc_tensor *x = c->in[0];
	const mc_tensor *t[4] = {NULL, NULL, NULL, NULL};
	for (int i = 1; i < c->n_in && i <= 4; i++)
		t[i - 1] = c->in[i];
	slice_plan p;
	if (mc_slice_make_plan(c->node, &x->shape, t, &p))
		return -1;
	mc_tensor *y = c->out[0];
	if (!y->numel)
		return 0;
	size_t es = mc_dtype_size(x->dtype);
	int64_t stride[MC_MAX_RANK], idx[MC_MAX_RANK] = {0};
	mc_strides(&x->shape, stride);
	char *dst = y->data;
	const char *src = x->data;
	do {
		int64_t off = 0;
		for (int d = 0; d < x->shape.rank; d++)
			off += (p.start[d] + idx[d] * p.step[d]) * stride[d];
		memcpy(dst, src + (size_t)off * es, es);
		dst += es;
	} while (next_index(idx, &p.out));
	return 0;
}

/* ---- Gather ---- */

int mc_gather_axis(const mc_node *n, int rank, int *axis)
{
	int64_t a;
	if (mc_attr_int(n, "axis", 0, &a))
		return -1;
	return mc_norm_axis(n, a, rank, axis);
}

static int gather_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const mc_shape *ds = &c->in[0]->shape, *is = &c->in[1]->shape;
	int axis;
	if (!elem_size(n, c->in[0]->dtype, "data") ||
	    need_index_dtype(n, c->in[1]->dtype, "indices"))
		return -1;
	if (ds->rank < 1)
		return mc_node_error(n, "data must have rank >= 1");
	if (mc_gather_axis(n, ds->rank, &axis) || out_rank_ok(n, (long)ds->rank - 1 + is->rank))
		return -1;
	mc_shape out = {.rank = ds->rank - 1 + is->rank};
	int r = 0;
	for (int d = 0; d < axis; d++)
		out.dims[r++] = ds->dims[d];
	for (int d = 0; d < is->rank; d++)
		out.dims[r++] = is->dims[d];
	for (int d = axis + 1; d < ds->rank; d++)
		out.dims[r++] = ds->dims[d];
	mc_set_out(c, 0, c->in[0]->dtype, &out);
	return 0;
}

static int gather_eval(mc_eval_ctx *c)
{
	const mc_tensor *x = c->in[0], *ind = c->in[1];
	int axis;
	if (mc_gather_axis(c->node, x->shape.rank, &axis))
		return -1;
	size_t es = mc_dtype_size(x->dtype);
	size_t outer = dims_prod(&x->shape, 0, axis);
	size_t block = dims_prod(&x->shape, axis + 1, x->shape.rank) * es;
	int64_t dim = x->shape.dims[axis];
	char *dst = c->out[0]->data;
	const char *src = x->data;
	for (size_t j = 0; j < ind->numel; j++) { /* check every index once */
		int64_t k;
		if (fix_index(c->node, mc_get_i(ind, j), dim, j, axis, &k))
			return -1;
	}
	for (size_t o = 0; o < outer; o++)
		for (size_t j = 0; j < ind->numel; j++) {
			int64_t k = mc_get_i(ind, j);
			if (k < 0)
				k += dim;
			memcpy(dst, src + (o * (size_t)dim + (size_t)k) * block, block);
			dst += block;
		}
	return 0;
}

/* ---- GatherElements ---- */

/* Indices shaped like data (same rank); off the axis no larger than data,
 * so every picked element exists. Shared with ScatterElements. */
static int elements_check(const mc_node *n, const mc_shape *ds, const mc_shape *is, int axis,
                          const char *what)
{
	char a[256], b[256];
	if (is->rank != ds->rank)
		return mc_node_error(n, "%s (%s) must have the rank of data (%s)", what,
		                     mc_shape_str(is, a, sizeof a), mc_shape_str(ds, b, sizeof b));
	for (int d = 0; d < ds->rank; d++)
		if (d != axis && is->dims[d] > ds->dims[d])
			return mc_node_error(n, "%s (%s) is larger than data (%s) on axis %d", what,
			                     mc_shape_str(is, a, sizeof a),
			                     mc_shape_str(ds, b, sizeof b), d);
	return 0;
}

static int gather_elements_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	int axis;
	if (!elem_size(n, c->in[0]->dtype, "data") ||
	    need_index_dtype(n, c->in[1]->dtype, "indices"))
		return -1;
	if (c->in[0]->shape.rank < 1)
		return mc_node_error(n, "data must have rank >= 1");
	if (mc_gather_axis(n, c->in[0]->shape.rank, &axis) ||
	    elements_check(n, &c->in[0]->shape, &c->in[1]->shape, axis, "indices"))
		return -1;
	mc_set_out(c, 0, c->in[0]->dtype, &c->in[1]->shape);
	return 0;
}

/* Offset in x of the element that entry j of the indices (at multi-index
 * idx of the indices) picks: idx with the axis coordinate replaced by the
 * entry's value. Shared with ScatterElements. -1 after reporting. */
static int element_offset(const mc_node *n, const mc_tensor *x, const mc_tensor *ind,
                          const int64_t *stride, const int64_t *idx, size_t j, int axis,
                          size_t *off)
{
	int64_t k, o = 0;
	if (fix_index(n, mc_get_i(ind, j), x->shape.dims[axis], j, axis, &k))
		return -1;
	for (int d = 0; d < x->shape.rank; d++)
		o += (d == axis ? k : idx[d]) * stride[d];
	*off = (size_t)o;
	return 0;
}

static int gather_elements_eval(mc_eval_ctx *c)
{
	const mc_tensor *x = c->in[0], *ind = c->in[1];
	int axis;
	if (mc_gather_axis(c->node, x->shape.rank, &axis))
		return -1;
	if (!ind->numel)
		return 0;
	size_t es = mc_dtype_size(x->dtype);
	int64_t stride[MC_MAX_RANK], idx[MC_MAX_RANK] = {0};
	mc_strides(&x->shape, stride);
	char *dst = c->out[0]->data;
	const char *src = x->data;
	size_t j = 0;
	do {
		size_t off;
		if (element_offset(c->node, x, ind, stride, idx, j, axis, &off))
			return -1;
		memcpy(dst + j * es, src + off * es, es);
		j++;
	} while (next_index(idx, &ind->shape));
	return 0;
}

/* ---- GatherND / ScatterND ---- */

static int gathernd_parse(mc_node *n)
{
	int64_t b;
	if (mc_attr_int(n, "batch_dims", 0, &b))
		return -1;
	if (b < 0 || b >= MC_MAX_RANK)
		return mc_node_error(n, "batch_dims %lld is out of range", (long long)b);
	if (b && n->opset < 12)
		return mc_node_error(n, "batch_dims needs opset 12");
	return 0;
}

int mc_gathernd_batch(const mc_node *n)
{
	int64_t b = 0;
	mc_attr_int(n, "batch_dims", 0, &b);
	return (int)b;
}

static int gathernd_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const mc_shape *ds = &c->in[0]->shape, *is = &c->in[1]->shape;
	int b = mc_gathernd_batch(n);
	if (!elem_size(n, c->in[0]->dtype, "data") ||
	    need_index_dtype(n, c->in[1]->dtype, "indices"))
		return -1;
	if (ds->rank < 1 || is->rank < 1)
		return mc_node_error(n, "data and indices must have rank >= 1");
	if (b >= ds->rank || b >= is->rank)
		return mc_node_error(n, "batch_dims %d must be less than both ranks (%d, %d)", b,
		                     ds->rank, is->rank);
	for (int d = 0; d < b; d++)
		if (ds->dims[d] != is->dims[d])
			return mc_node_error(n, "batch dimension %d differs: data %lld, indices %lld",
			                     d, (long long)ds->dims[d], (long long)is->dims[d]);
	int64_t k = is->dims[is->rank - 1];
	if (k < 1 || k > ds->rank - b)
		return mc_node_error(n, "the last indices dimension (%lld) must be in [1, %d]",
		                     (long long)k, ds->rank - b);
	long rank = (long)is->rank - 1 + ds->rank - b - (long)k;
	if (out_rank_ok(n, rank))
		return -1;
	mc_shape out = {.rank = (int)rank};
	int r = 0;
	for (int d = 0; d < is->rank - 1; d++)
		out.dims[r++] = is->dims[d];
	for (int d = b + (int)k; d < ds->rank; d++)
		out.dims[r++] = ds->dims[d];
	mc_set_out(c, 0, c->in[0]->dtype, &out);
	return 0;
}

/* Element offset in data of index tuple number t (k entries, starting
 * after `first_axis` batch axes); -1 after reporting a bad index. */
static int nd_offset(const mc_node *n, const mc_tensor *x, const mc_tensor *ind, size_t t,
                     int first_axis, int k, const int64_t *stride, int64_t *off)
{
	*off = 0;
	for (int j = 0; j < k; j++) {
		size_t pos = t * (size_t)k + (size_t)j;
		int64_t v;
		if (fix_index(n, mc_get_i(ind, pos), x->shape.dims[first_axis + j], pos,
		              first_axis + j, &v))
			return -1;
		*off += v * stride[first_axis + j];
	}
	return 0;
}

static int gathernd_eval(mc_eval_ctx *c)
{
	const mc_tensor *x = c->in[0], *ind = c->in[1];
	int b = mc_gathernd_batch(c->node);
	int k = (int)ind->shape.dims[ind->shape.rank - 1];
	size_t es = mc_dtype_size(x->dtype);
	size_t batches = dims_prod(&x->shape, 0, b);
	size_t per_batch = dims_prod(&ind->shape, b, ind->shape.rank - 1);
	size_t slice = dims_prod(&x->shape, b + k, x->shape.rank) * es;
	size_t batch_elems = dims_prod(&x->shape, b, x->shape.rank);
	int64_t stride[MC_MAX_RANK];
	mc_strides(&x->shape, stride);
	char *dst = c->out[0]->data;
	const char *src = x->data;
	for (size_t bi = 0; bi < batches; bi++)
		for (size_t j = 0; j < per_batch; j++) {
			int64_t off;
			if (nd_offset(c->node, x, ind, bi * per_batch + j, b, k, stride, &off))
				return -1;
			memcpy(dst, src + (bi * batch_elems + (size_t)off) * es, slice);
			dst += slice;
		}
	return 0;
}

int mc_parse_reduction(const mc_node *n, int *red)
{
	const char *s;
	if (mc_attr_string(n, "reduction", "none", &s))
		return -1;
	if (mc_attr_find(n, "reduction") && n->opset < 16)
		return mc_node_error(n, "attribute 'reduction' needs opset 16");
	if (strcmp(s, "none") == 0)
		*red = RED_NONE;
	else if (strcmp(s, "add") == 0)
		*red = RED_ADD;
	else if (strcmp(s, "mul") == 0)
		*red = RED_MUL;
	else if (strcmp(s, "max") == 0 && n->opset >= 18)
		*red = RED_MAX;
	else if (strcmp(s, "min") == 0 && n->opset >= 18)
		*red = RED_MIN;
	else
		return mc_node_error(n, "reduction '%s' is not supported at opset %d", s, n->opset);
	return 0;
}

static int scatter_parse(mc_node *n)
{
	int red;
	return mc_parse_reduction(n, &red);
}

/* out[oi] = reduce(out[oi], upd[ui]). Integers wrap like the hardware
 * (unsigned arithmetic, no UB); floats go through double, which rounds
 * each step like the dtype's own arithmetic. */
static void reduce_into(mc_tensor *out, size_t oi, const mc_tensor *upd, size_t ui, int red,
                        size_t es)
{
	if (red == RED_NONE) {
		memcpy((char *)out->data + oi * es, (const char *)upd->data + ui * es, es);
		return;
	}
	if (mc_dtype_is_float(out->dtype)) {
		double a = mc_get_f(out, oi), b = mc_get_f(upd, ui), v = a;
		switch (red) {
		case RED_ADD: v = a + b; break;
		case RED_MUL: v = a * b; break;
		case RED_MAX: v = (b > a || b != b) ? b : a; break;
		case RED_MIN: v = (b < a || b != b) ? b : a; break;
		}
		mc_set_f(out, oi, v);
		return;
	}
	if (out->dtype == MC_UINT64) {
		uint64_t a = ((const uint64_t *)out->data)[oi], b = ((const uint64_t *)upd->data)[ui];
		uint64_t v = red == RED_ADD ? a + b : red == RED_MUL ? a * b :
		             red == RED_MAX ? (a > b ? a : b) : (a < b ? a : b);
		((uint64_t *)out->data)[oi] = v;
		return;
	}
	int64_t a = mc_get_i(out, oi), b = mc_get_i(upd, ui), v = a;
	switch (red) {
	case RED_ADD: v = (int64_t)((uint64_t)a + (uint64_t)b); break;
	case RED_MUL: v = (int64_t)((uint64_t)a * (uint64_t)b); break;
	case RED_MAX: v = a > b ? a : b; break;
	case RED_MIN: v = a < b ? a : b; break;
	}
	mc_set_i(out, oi, v);
}

/* The dtypes of data, indices and updates: shared with ScatterElements. */
static int scatter_dtypes(const mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	if (!elem_size(n, c->in[0]->dtype, "data") ||
	    need_index_dtype(n, c->in[1]->dtype, "indices"))
		return -1;
	if (c->in[2]->dtype != c->in[0]->dtype)
		return mc_node_error(n, "updates are %s but data is %s",
		                     mc_dtype_name(c->in[2]->dtype), mc_dtype_name(c->in[0]->dtype));
	return 0;
}

static int scatternd_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const mc_shape *ds = &c->in[0]->shape, *is = &c->in[1]->shape, *us = &c->in[2]->shape;
	char a[256], b[256], e[256];
	if (scatter_dtypes(c))
		return -1;
	if (ds->rank < 1 || is->rank < 1)
		return mc_node_error(n, "data and indices must have rank >= 1");
	int64_t k = is->dims[is->rank - 1];
	if (k < 0 || k > ds->rank)
		return mc_node_error(n, "the last indices dimension (%lld) must be in [0, %d]",
		                     (long long)k, ds->rank);
	mc_shape want = {.rank = is->rank - 1 + ds->rank - (int)k};
	bool ok = want.rank <= MC_MAX_RANK && us->rank == want.rank;
	for (int d = 0; ok && d < is->rank - 1; d++)
		ok = us->dims[d] == is->dims[d];
	for (int d = (int)k; ok && d < ds->rank; d++)
		ok = us->dims[is->rank - 1 + d - (int)k] == ds->dims[d];
	if (!ok)
		return mc_node_error(n, "updates have shape %s; indices %s and data %s need "
		                     "indices.shape[:-1] + data.shape[%lld:]",
		                     mc_shape_str(us, a, sizeof a), mc_shape_str(is, b, sizeof b),
		                     mc_shape_str(ds, e, sizeof e), (long long)k);
	mc_set_out(c, 0, c->in[0]->dtype, ds);
	return 0;
}

static int scatternd_eval(mc_eval_ctx *c)
{
	const mc_tensor *x = c->in[0], *ind = c->in[1], *upd = c->in[2];
	mc_tensor *y = c->out[0];
	int red;
	if (mc_parse_reduction(c->node, &red))
		return -1;
	int k = (int)ind->shape.dims[ind->shape.rank - 1];
	size_t es = mc_dtype_size(x->dtype);
	size_t tuples = dims_prod(&ind->shape, 0, ind->shape.rank - 1);
	size_t slice = dims_prod(&x->shape, k, x->shape.rank);
	int64_t stride[MC_MAX_RANK];
	mc_strides(&x->shape, stride);
	memcpy(y->data, x->data, x->nbytes);
	for (size_t t = 0; t < tuples; t++) {
		int64_t off;
		if (nd_offset(c->node, x, ind, t, 0, k, stride, &off))
			return -1;
		for (size_t e = 0; e < slice; e++)
			reduce_into(y, (size_t)off + e, upd, t * slice + e, red, es);
	}
	return 0;
}

/* ---- Scatter / ScatterElements ---- */

static int scatter_elements_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	int axis;
	char a[256], b[256];
	if (scatter_dtypes(c))
		return -1;
	if (c->in[0]->shape.rank < 1)
		return mc_node_error(n, "data must have rank >= 1");
	if (!mc_shape_eq(&c->in[1]->shape, &c->in[2]->shape))
		return mc_node_error(n, "indices (%s) and updates (%s) must have the same shape",
		                     mc_shape_str(&c->in[1]->shape, a, sizeof a),
		                     mc_shape_str(&c->in[2]->shape, b, sizeof b));
	if (mc_gather_axis(n, c->in[0]->shape.rank, &axis) ||
	    elements_check(n, &c->in[0]->shape, &c->in[1]->shape, axis, "indices"))
		return -1;
	mc_set_out(c, 0, c->in[0]->dtype, &c->in[0]->shape);
	return 0;
}

static int scatter_elements_eval(mc_eval_ctx *c)
{
	const mc_tensor *x = c->in[0], *ind = c->in[1], *upd = c->in[2];
	mc_tensor *y = c->out[0];
	int axis, red;
	if (mc_gather_axis(c->node, x->shape.rank, &axis) || mc_parse_reduction(c->node, &red))
		return -1;
	memcpy(y->data, x->data, x->nbytes);
	if (!ind->numel)
		return 0;
	size_t es = mc_dtype_size(x->dtype);
	int64_t stride[MC_MAX_RANK], idx[MC_MAX_RANK] = {0};
	mc_strides(&x->shape, stride);
	size_t j = 0;
	do {
		size_t off;
		if (element_offset(c->node, x, ind, stride, idx, j, axis, &off))
			return -1;
		reduce_into(y, off, upd, j, red, es);
		j++;
	} while (next_index(idx, &ind->shape));
	return 0;
}

/* ---- Pad ---- */

static int pad_mode(const mc_node *n, int *mode)
{
	const char *s;
	if (mc_attr_string(n, "mode", "constant", &s))
		return -1;
	if (strcmp(s, "constant") == 0)
		*mode = PAD_CONSTANT;
	else if (strcmp(s, "reflect") == 0)
		*mode = PAD_REFLECT;
	else if (strcmp(s, "edge") == 0)
		*mode = PAD_EDGE;
	else if (strcmp(s, "wrap") == 0 && n->opset >= 19)
		*mode = PAD_WRAP;
	else
		return mc_node_error(n, "mode '%s' is not supported at opset %d", s, n->opset);
	return 0;
}

/* Pads come from the attribute 'paddings' (opset 1) or 'pads' (2-10), or
 * from input tensors (pads, optional axes) from opset 11. Negative pads
 * crop; cropping happens first, then the cropped axis is padded (so
 * reflect, edge and wrap see the cropped data, as in ONNX Runtime). */
int mc_pad_make_plan(const mc_node *n, const mc_shape *data, const mc_tensor *pads_t,
                     const mc_tensor *axes_t, pad_plan *p)
{
	int64_t pads[2 * MC_MAX_RANK], axes[MC_MAX_RANK];
	size_t np = 0, na;
	if (pad_mode(n, &p->mode))
		return -1;
	if (n->opset < 11) {
		const char *name = n->opset < 2 ? "paddings" : "pads";
		const int64_t *a;
		if (mc_attr_ints(n, name, &a, &np))
			return -1;
		if (!a)
			return mc_node_error(n, "needs attribute '%s'", name);
		if (np > 2 * MC_MAX_RANK)
			return mc_node_error(n, "'%s' has %zu entries, too many", name, np);
		memcpy(pads, a, np * sizeof *a);
	} else if (tensor_ints(n, pads_t, "pads", pads, 2 * MC_MAX_RANK, &np)) {
		return -1;
	}
	if (axes_t) {
		if (tensor_ints(n, axes_t, "axes", axes, MC_MAX_RANK, &na))
			return -1;
	} else {
		na = (size_t)data->rank;
		for (size_t i = 0; i < na; i++)
			axes[i] = (int64_t)i;
	}
	if (np != 2 * na)
		return mc_node_error(n, "pads has %zu entries; %zu axes need %zu", np, na, 2 * na);
	int ax[MC_MAX_RANK];
	if (norm_axes(n, axes, na, data->rank, ax))
		return -1;
	p->out = *data;
	memset(p->begin, 0, sizeof p->begin);
	memset(p->end, 0, sizeof p->end);
	for (size_t i = 0; i < na; i++) {
		int d = ax[i];
		int64_t dim = data->dims[d], b = pads[i], e = pads[na + i];
		if (b < -dim || e < -dim || (b < 0 ? -b : 0) + (e < 0 ? -e : 0) > dim)
			return mc_node_error(n, "pads %lld, %lld remove more than axis %d has (%lld)",
			                     (long long)b, (long long)e, d, (long long)dim);
		int64_t kept = dim - (b < 0 ? -b : 0) - (e < 0 ? -e : 0);
		int64_t grow_b = b > 0 ? b : 0, grow_e = e > 0 ? e : 0;
		if (grow_b > INT64_MAX / 4 || grow_e > INT64_MAX / 4)
			return mc_node_error(n, "pads %lld, %lld are too large", (long long)b,
			                     (long long)e);
		if (kept == 0 && grow_b + grow_e > 0 && p->mode != PAD_CONSTANT)
			return mc_node_error(n, "cannot pad axis %d in this mode: nothing is left of "
			                     "it to repeat", d);
		p->begin[d] = b;
		p->end[d] = e;
		p->out.dims[d] = kept + grow_b + grow_e;
	}
	size_t numel;
	if (!mc_shape_numel(&p->out, &numel))
		return mc_node_error(n, "padded output is too large");
	return 0;
}

static int pad_parse(mc_node *n)
{
	int mode;
	if (pad_mode(n, &mode))
		return -1;
	if (n->opset >= 11 && mc_attr_find(n, "pads"))
		return mc_node_error(n, "pads is an input from opset 11, not an attribute");
	return 0;
}

static int pad_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const mc_tensor *pads = NULL, *axes = NULL;
	if (!elem_size(n, c->in[0]->dtype, "data"))
		return -1;
	if (n->opset >= 11) {
		if (c->n_in < 2 || !c->in[1])
			return mc_node_error(n, "needs input pads");
		if (need_index_dtype(n, c->in[1]->dtype, "pads") || !(pads = need_const(c, 1, "pads")))
			return -1;
		if (c->n_in > 2 && c->in[2]) {
			const mc_value *v = c->in[2];
			if (v->dtype != c->in[0]->dtype)
				return mc_node_error(n, "constant_value is %s but data is %s",
				                     mc_dtype_name(v->dtype), mc_dtype_name(c->in[0]->dtype));
			if (mc_numel(&v->shape) > 1)
				return mc_node_error(n, "constant_value must be a single value");
		}
		if (c->n_in > 3 && c->in[3]) {
			if (n->opset < 18)
				return mc_node_error(n, "input axes needs opset 18");
			if (need_index_dtype(n, c->in[3]->dtype, "axes") ||
			    !(axes = need_const(c, 3, "axes")))
				return -1;
		}
	}
	pad_plan p;
	if (mc_pad_make_plan(n, &c->in[0]->shape, pads, axes, &p))
		return -1;
	mc_set_out(c, 0, c->in[0]->dtype, &p.out);
	return 0;
}

/* Source index along one axis of the input for output position o, or -1
 * where the constant goes. */
static int64_t pad_source(const pad_plan *p, int d, int64_t dim, int64_t o)
{
	int64_t b = p->begin[d], e = p->end[d];
	int64_t crop = b < 0 ? -b : 0;
	int64_t kept = dim - crop - (e < 0 ? -e : 0);
	int64_t i = o - (b > 0 ? b : 0); /* position in the cropped axis */
	if (i >= 0 && i < kept)
		return crop + i;
	switch (p->mode) {
	case PAD_EDGE:
		return crop + (i < 0 ? 0 : kept - 1);
	case PAD_WRAP:
		return crop + ((i % kept) + kept) % kept;
	case PAD_REFLECT: {
		if (kept == 1)
			return crop;
		int64_t period = 2 * (kept - 1), j = ((i % period) + period) % period;
		return crop + (j < kept ? j : period - j);
	}
	default:
		return -1;
	}
}

static int pad_eval(mc_eval_ctx *c)
{
	const mc_node *n = c->node;
	const mc_tensor *x = c->in[0];
	mc_tensor *y = c->out[0];
	const mc_tensor *pads = c->n_in > 1 ? c->in[1] : NULL;
	const mc_tensor *axes = c->n_in > 3 ? c->in[3] : NULL;
	pad_plan p;
	if (mc_pad_make_plan(n, &x->shape, n->opset >= 11 ? pads : NULL, axes, &p))
		return -1;
	if (!y->numel)
		return 0;
	size_t es = mc_dtype_size(x->dtype);
	/* the fill element, in the data's own dtype */
	mc_shape one = {.rank = 0};
	mc_tensor *fill = mc_tensor_new(x->dtype, &one);
	if (!fill)
		return mc_node_error(n, "out of memory");
	if (n->opset >= 11) {
		const mc_tensor *cv = c->n_in > 2 ? c->in[2] : NULL;
		if (cv && cv->numel == 1)
			memcpy(fill->data, cv->data, es);
	} else {
		double v;
		if (mc_attr_float(n, "value", 0, &v)) {
			mc_tensor_free(fill);
			return -1;
		}
		mc_set_f(fill, 0, v);
	}
	int rank = x->shape.rank;
	int64_t *map[MC_MAX_RANK];
	for (int d = 0; d < rank; d++) {
		map[d] = mc_xmalloc((size_t)p.out.dims[d] * sizeof(int64_t));
		for (int64_t o = 0; o < p.out.dims[d]; o++)
			map[d][o] = pad_source(&p, d, x->shape.dims[d], o);
	}
	int64_t stride[MC_MAX_RANK], idx[MC_MAX_RANK] = {0};
	mc_strides(&x->shape, stride);
	char *dst = y->data;
	do {
		int64_t off = 0;
		for (int d = 0; d < rank && off >= 0; d++)
			off = map[d][idx[d]] < 0 ? -1 : off + map[d][idx[d]] * stride[d];
		memcpy(dst, off < 0 ? fill->data : (const char *)x->data + (size_t)off * es, es);
		dst += es;
	} while (next_index(idx, &p.out));
	for (int d = 0; d < rank; d++)
		free(map[d]);
	mc_tensor_free(fill);
	return 0;
}

/* ---- Resize / Upsample ----
 * Follows the ONNX reference implementation (which made the conformance
 * data) point for point: each output coordinate maps to a real input
 * coordinate x; the n taps nearest to x (ties to the lower) are weighted by
 * the mode's coefficients for the fraction of x, with edge values beyond
 * the axis; axes combine separably. */

/* More taps than this per output position (antialiasing with a tiny
 * scale) is refused rather than allocated. */
#define RESIZE_MAX_TAPS 4096

typedef struct {
	const char *name;
	int value, min_opset, max_opset;
} name_value;

/* Looks attribute `attr` up in table; -1 after reporting. */
static int pick_name(const mc_node *n, const char *attr, const char *dflt,
                     const name_value *table, int *out)
{
	const char *s;
	if (mc_attr_string(n, attr, dflt, &s))
		return -1;
	for (const name_value *t = table; t->name; t++)
		if (strcmp(t->name, s) == 0 && n->opset >= t->min_opset && n->opset <= t->max_opset) {
			*out = t->value;
			return 0;
		}
	return mc_node_error(n, "%s '%s' is not supported at opset %d", attr, s, n->opset);
}

static const name_value resize_modes[] = {
	{"nearest", RS_NEAREST, 1, MC_MAX_OPSET},
	{"linear", RS_LINEAR, 1, MC_MAX_OPSET},
	{"cubic", RS_CUBIC, 11, MC_MAX_OPSET},
	{NULL, 0, 0, 0},
};

static const name_value coord_modes[] = {
	{"half_pixel", CT_HALF_PIXEL, 11, MC_MAX_OPSET},
	{"half_pixel_symmetric", CT_HALF_PIXEL_SYMMETRIC, 19, MC_MAX_OPSET},
	{"pytorch_half_pixel", CT_PYTORCH_HALF_PIXEL, 11, MC_MAX_OPSET},
	{"align_corners", CT_ALIGN_CORNERS, 11, MC_MAX_OPSET},
	{"asymmetric", CT_ASYMMETRIC, 11, MC_MAX_OPSET},
	{"tf_half_pixel_for_nn", CT_TF_HALF_PIXEL_FOR_NN, 11, 12},
	{"tf_crop_and_resize", CT_TF_CROP_AND_RESIZE, 11, MC_MAX_OPSET},
	{NULL, 0, 0, 0},
};

static const name_value nearest_modes[] = {
	{"round_prefer_floor", NR_ROUND_PREFER_FLOOR, 11, MC_MAX_OPSET},
	{"round_prefer_ceil", NR_ROUND_PREFER_CEIL, 11, MC_MAX_OPSET},
	{"floor", NR_FLOOR, 11, MC_MAX_OPSET},
	{"ceil", NR_CEIL, 11, MC_MAX_OPSET},
	{NULL, 0, 0, 0},
};

static const name_value aspect_policies[] = {
	{"stretch", KA_STRETCH, 18, MC_MAX_OPSET},
	{"not_larger", KA_NOT_LARGER, 18, MC_MAX_OPSET},
	{"not_smaller", KA_NOT_SMALLER, 18, MC_MAX_OPSET},
	{NULL, 0, 0, 0},
};

static bool is_upsample(const mc_node *n)
{
	return strcmp(n->op_type, "Upsample") == 0;
}

int mc_resize_read_attrs(const mc_node *n, resize_attrs *a)
{
	memset(a, 0, sizeof *a);
	a->upsample = is_upsample(n) || n->opset < 11;
	if (pick_name(n, "mode", "nearest", resize_modes, &a->mode))
		return -1;
	if (a->upsample) {
		a->coord = CT_ASYMMETRIC;
		a->nearest = NR_SIMPLE;
		if (a->mode == RS_CUBIC)
			return mc_node_error(n, "mode 'cubic' needs Resize from opset 11");
		return 0;
	}
	int64_t excl = 0, aa = 0;
	if (pick_name(n, "coordinate_transformation_mode", "half_pixel", coord_modes, &a->coord) ||
	    pick_name(n, "nearest_mode", "round_prefer_floor", nearest_modes, &a->nearest) ||
	    mc_attr_float(n, "cubic_coeff_a", -0.75, &a->cubic_a) ||
	    mc_attr_int(n, "exclude_outside", 0, &excl) ||
	    mc_attr_float(n, "extrapolation_value", 0, &a->extrapolation))
		return -1;
	a->exclude_outside = excl != 0;
	a->keep_aspect = KA_STRETCH;
	if (n->opset >= 18) {
		const int64_t *axes;
		if (mc_attr_int(n, "antialias", 0, &aa) ||
		    pick_name(n, "keep_aspect_ratio_policy", "stretch", aspect_policies,
		              &a->keep_aspect) ||
		    mc_attr_ints(n, "axes", &axes, &a->n_axes))
			return -1;
		if (a->n_axes > MC_MAX_RANK)
			return mc_node_error(n, "'axes' has %zu entries, too many", a->n_axes);
		if (axes)
			memcpy(a->axes, axes, a->n_axes * sizeof *axes);
	}
	/* antialiasing only changes linear and cubic filters */
	a->antialias = aa != 0 && a->mode != RS_NEAREST;
	return 0;
}

/* The tensors that set the output shape: Upsample-7/8 take the attribute
 * 'scales' (scales_t and sizes_t NULL); an empty tensor counts as absent. */
int mc_resize_make_plan(const mc_node *n, const resize_attrs *a, const mc_shape *in,
                        const mc_tensor *scales_t, const mc_tensor *sizes_t,
                        resize_plan *p)
{
	int rank = in->rank;
	if (rank < 1)
		return mc_node_error(n, "input must have rank >= 1");
	p->out = *in;
	for (int d = 0; d < rank; d++) {
		p->scale[d] = 1;
		p->width[d] = (double)in->dims[d];
	}
	if (a->n_axes) {
		p->n_axes = (int)a->n_axes;
		if (norm_axes(n, a->axes, a->n_axes, rank, p->axes))
			return -1;
	} else {
		p->n_axes = rank;
		for (int d = 0; d < rank; d++)
			p->axes[d] = d;
	}
	double scales[MC_MAX_RANK];
	int64_t sizes[MC_MAX_RANK];
	size_t ns = 0, nz = 0;
	if (!scales_t && !sizes_t && is_upsample(n) && n->opset < 9) {
		const float *f;
		if (mc_attr_floats(n, "scales", &f, &ns))
			return -1;
		if (!f)
			return mc_node_error(n, "needs attribute 'scales'");
		if (ns > MC_MAX_RANK)
			return mc_node_error(n, "'scales' has %zu entries, too many", ns);
		for (size_t i = 0; i < ns; i++)
			scales[i] = f[i];
	} else if (scales_t && scales_t->numel &&
	           tensor_floats(n, scales_t, "scales", scales, MC_MAX_RANK, &ns)) {
		return -1;
	}
	if (sizes_t && sizes_t->numel && tensor_ints(n, sizes_t, "sizes", sizes, MC_MAX_RANK, &nz))
		return -1;
	if (ns && nz)
		return mc_node_error(n, "give either scales or sizes, not both");
	if (!ns && !nz)
		return mc_node_error(n, "needs scales or sizes");
	size_t want = (size_t)p->n_axes;
	if ((ns ? ns : nz) != want)
		return mc_node_error(n, "%s has %zu entries, expected %zu", ns ? "scales" : "sizes",
		                     ns ? ns : nz, want);
	if (ns) {
		for (int i = 0; i < p->n_axes; i++) {
			int d = p->axes[i];
			double s = scales[i], w = s * (double)in->dims[d];
			if (!(s > 0) || !(w < 9.0e15))
				return mc_node_error(n, "scale %g for axis %d is not usable", s, d);
			p->scale[d] = s;
			p->width[d] = w;
			p->out.dims[d] = (int64_t)floor(w);
		}
	} else {
		double pick = 0;
		for (int i = 0; i < p->n_axes; i++) {
			int d = p->axes[i];
			if (sizes[i] < 0)
				return mc_node_error(n, "size %lld for axis %d is negative",
				                     (long long)sizes[i], d);
			if (in->dims[d] == 0)
				return mc_node_error(n, "cannot resize axis %d: it is empty", d);
			double s = (double)sizes[i] / (double)in->dims[d];
			if (i == 0 || (a->keep_aspect == KA_NOT_LARGER && s < pick) ||
			    (a->keep_aspect == KA_NOT_SMALLER && s > pick))
				pick = s;
			p->scale[d] = s;
			p->width[d] = (double)sizes[i];
			p->out.dims[d] = sizes[i];
		}
		if (a->keep_aspect != KA_STRETCH)
			for (int i = 0; i < p->n_axes; i++) {
				int d = p->axes[i];
				double w = pick * (double)in->dims[d];
				if (!(pick > 0) || !(w < 9.0e15))
					return mc_node_error(n, "sizes give an unusable scale %g", pick);
				p->scale[d] = pick;
				p->width[d] = w;
				p->out.dims[d] = (int64_t)(w + 0.5); /* round half up */
			}
	}
	size_t numel;
	if (!mc_shape_numel(&p->out, &numel))
		return mc_node_error(n, "resized output is too large");
	return 0;
}

/* Which inputs hold scales and sizes, by op and opset. */
void mc_resize_inputs(const mc_node *n, int n_in, int *scales_i, int *sizes_i)
{
	*scales_i = *sizes_i = -1;
	if (is_upsample(n)) {
		if (n->opset >= 9)
			*scales_i = 1;
	} else if (n->opset < 11) {
		*scales_i = 1;
	} else {
		*scales_i = 2;
		*sizes_i = 3;
	}
	if (*scales_i >= n_in)
		*scales_i = -1;
	if (*sizes_i >= n_in)
		*sizes_i = -1;
}

static int resize_parse(mc_node *n)
{
	resize_attrs a;
	return mc_resize_read_attrs(n, &a);
}

static int resize_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const mc_value *x = c->in[0];
	resize_attrs a;
	if (mc_resize_read_attrs(n, &a) || !elem_size(n, x->dtype, "X"))
		return -1;
	if (a.mode != RS_NEAREST && !mc_dtype_is_float(x->dtype) && !mc_dtype_is_int(x->dtype))
		return mc_node_error(n, "interpolating needs numbers, X is %s",
		                     mc_dtype_name(x->dtype));
	int si, zi;
	mc_resize_inputs(n, c->n_in, &si, &zi);
	const mc_tensor *scales = NULL, *sizes = NULL;
	if (si >= 0 && c->in[si] && mc_numel(&c->in[si]->shape) &&
	    !(scales = need_const(c, si, "scales")))
		return -1;
	if (zi >= 0 && c->in[zi] && mc_numel(&c->in[zi]->shape)) {
		if (need_index_dtype(n, c->in[zi]->dtype, "sizes") ||
		    !(sizes = need_const(c, zi, "sizes")))
			return -1;
	}
	resize_plan p;
	if (mc_resize_make_plan(n, &a, &x->shape, scales, sizes, &p))
		return -1;
	if (a.coord == CT_TF_CROP_AND_RESIZE) {
		const mc_value *roi = c->n_in > 1 ? c->in[1] : NULL;
		size_t want = 2 * (size_t)p.n_axes;
		if (!roi || roi->shape.rank != 1 || (size_t)roi->shape.dims[0] != want ||
		    !mc_dtype_is_float(roi->dtype))
			return mc_node_error(n, "tf_crop_and_resize needs a float roi of %zu values",
			                     want);
	}
	mc_set_out(c, 0, x->dtype, &p.out);
	return 0;
}

/* Input coordinate for output coordinate x along one axis. */
static double resize_coord(const resize_attrs *a, int64_t x, double scale, int64_t in,
                           int64_t out, double width, double r0, double r1, bool *outside)
{
	double xf = (double)x, len = (double)(in - 1), xo;
	*outside = false;
	switch (a->coord) {
	case CT_HALF_PIXEL_SYMMETRIC: {
		double adjust = (double)out / width, center = (double)in / 2;
		return center * (1 - adjust) + (xf + 0.5) / scale - 0.5;
	}
	case CT_PYTORCH_HALF_PIXEL:
		return width == 1 ? -0.5 : (xf + 0.5) / scale - 0.5;
	case CT_ALIGN_CORNERS:
		return width == 1 ? 0 : xf * len / (width - 1);
	case CT_ASYMMETRIC:
		return xf / scale;
	case CT_TF_HALF_PIXEL_FOR_NN:
		return (xf + 0.5) / scale;
	case CT_TF_CROP_AND_RESIZE:
		xo = width == 1 ? (r1 - r0) * len / 2 : xf * (r1 - r0) * len / (width - 1);
		xo += r0 * len;
		*outside = xo < 0 || xo > len;
		return xo;
	default: /* half_pixel */
		return (xf + 0.5) / scale - 0.5;
	}
}

/* Taps per output position: depends on the mode and, when antialiasing,
 * on how much the axis shrinks (the filter widens by 1/scale). Computed
 * in double; the caller refuses more than RESIZE_MAX_TAPS. */
double mc_resize_taps(const resize_attrs *a, double scale)
{
	double s = scale < 1 ? scale : 1;
	switch (a->mode) {
	case RS_LINEAR:
		return a->antialias ? 2 - 2 * (floor(-1 / s) + 1) : 2;
	case RS_CUBIC:
		return a->antialias ? 2 - 2 * (floor(-2 / s) + 1) : 4;
	default:
		return 2;
	}
}

static double cubic_kernel(double x, double A)
{
	x = fabs(x);
	if (x <= 1)
		return ((A + 2) * x - (A + 3)) * x * x + 1;
	if (x < 2)
		return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
	return 0;
}

/* Weights of the taps for position fraction ratio in (0, 1]: tap k sits
 * at offset first + k from floor(x) (x - 1 when x is whole). */
static void resize_coeffs(const resize_attrs *a, double ratio, double scale, int64_t taps,
                          double *c)
{
	double s = scale < 1 ? scale : 1, sum = 0;
	int64_t first = 1 - taps / 2;
	switch (a->mode) {
	case RS_NEAREST: {
		bool up; /* take the upper of the two */
		if (ratio == 1)
			up = true;
		else if (a->nearest == NR_ROUND_PREFER_FLOOR)
			up = ratio > 0.5;
		else if (a->nearest == NR_ROUND_PREFER_CEIL)
			up = ratio >= 0.5;
		else if (a->nearest == NR_FLOOR)
			up = false;
		else if (a->nearest == NR_CEIL)
			up = true;
		else
			up = scale < 1;
		c[0] = up ? 0 : 1;
		c[1] = up ? 1 : 0;
		return;
	}
	case RS_LINEAR:
		if (!a->antialias) {
			c[0] = 1 - ratio;
			c[1] = ratio;
			return;
		}
		for (int64_t k = 0; k < taps; k++) {
			double v = 1 - fabs(((double)(first + k) - ratio) * s);
			c[k] = v < 0 ? 0 : v;
			sum += c[k];
		}
		break;
	default: { /* cubic */
		double A = a->cubic_a;
		if (!a->antialias) {
			double r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;
			c[0] = ((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A;
			c[1] = ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1;
			c[2] = ((A + 2) * q - (A + 3)) * q * q + 1;
			c[3] = ((A * q1 - 5 * A) * q1 + 8 * A) * q1 - 4 * A;
			return;
		}
		for (int64_t k = 0; k < taps; k++) {
			c[k] = cubic_kernel(s * ((double)(first + k) - ratio), A);
			sum += c[k];
		}
	}
	}
	for (int64_t k = 0; k < taps; k++)
		c[k] /= sum;
}

/* First of the n positions nearest to x (ties to the lower one), found
 * as the reference does: in the axis padded with ceil(n/2) positions on
 * each side, so near (or past) the ends the window stays inside that. */
static int64_t resize_window(double x, int64_t n, int64_t in)
{
	int64_t pad = (n + 1) / 2, len = in + 2 * pad, lo, hi;
	double xp = x + (double)pad;
	if (!(xp >= 0)) {
		lo = -1;
		hi = 0;
	} else if (xp >= (double)len) {
		lo = len - 1;
		hi = len;
	} else {
		lo = (int64_t)floor(xp);
		hi = lo + 1;
	}
	for (int64_t k = 0; k < n; k++) {
		if (lo >= 0 && (hi >= len || xp - (double)lo <= (double)hi - xp))
			lo--;
		else
			hi++;
	}
	return lo + 1 - pad;
}

/* Per-axis tables: for each output position its taps (source index
 * clamped into the axis, weight), nonzero weights first. */
typedef struct {
	int64_t taps;
	int64_t *src;
	double *w;
	int64_t *count;
	bool *outside;
} resize_axis;

static void resize_axis_free(resize_axis *t)
{
	free(t->src);
	free(t->w);
	free(t->count);
	free(t->outside);
}

static int resize_axis_build(const mc_node *n, const resize_attrs *a, const resize_plan *p,
                             int d, int64_t in, double r0, double r1, resize_axis *t)
{
	int64_t out = p->out.dims[d];
	double scale = p->scale[d];
	double taps = mc_resize_taps(a, scale);
	size_t cells, bytes;
	t->taps = taps >= 1 && taps <= RESIZE_MAX_TAPS ? (int64_t)taps : 0;
	if (!t->taps ||
	    !mc_mul_size((size_t)out, (size_t)t->taps, &cells) ||
	    !mc_mul_size(cells, sizeof(double), &bytes))
		return mc_node_error(n, "axis %d: %g filter taps per output value is too many "
		                     "(scale %g)", d, taps, scale);
	t->src = mc_xmalloc((cells ? cells : 1) * sizeof *t->src);
	t->w = mc_xmalloc((cells ? cells : 1) * sizeof *t->w);
	t->count = mc_xmalloc((size_t)(out ? out : 1) * sizeof *t->count);
	t->outside = mc_xmalloc((size_t)(out ? out : 1) * sizeof *t->outside);
	double c[RESIZE_MAX_TAPS];
	for (int64_t o = 0; o < out; o++) {
		double x = resize_coord(a, o, scale, in, out, p->width[d], r0, r1, &t->outside[o]);
		int64_t *src = t->src + o * t->taps, k = 0;
		double *w = t->w + o * t->taps;
		t->count[o] = 0;
		if (t->outside[o])
			continue;
		double ratio = x == floor(x) ? 1 : x - floor(x);
		resize_coeffs(a, ratio, scale, t->taps, c);
		int64_t first = resize_window(x, t->taps, in);
		/* (nearest keeps its one tap: excluding it would leave none) */
		if (a->exclude_outside && a->mode != RS_NEAREST) {
			double sum = 0;
			for (k = 0; k < t->taps; k++) {
				if (first + k < 0 || first + k >= in)
					c[k] = 0;
				sum += c[k];
			}
			for (k = 0; k < t->taps && sum != 0; k++)
				c[k] /= sum;
		}
		for (k = 0; k < t->taps; k++) {
			if (c[k] == 0)
				continue;
			int64_t i = first + k;
			src[t->count[o]] = i < 0 ? 0 : i >= in ? in - 1 : i;
			w[t->count[o]++] = c[k];
		}
	}
	return 0;
}

/* Weighted sum over the taps of every axis for output position o. */
static double resize_sum(const resize_axis *ax, int rank, const int64_t *o, const double *src,
                         const int64_t *stride)
{
	int64_t t[MC_MAX_RANK] = {0}, cnt[MC_MAX_RANK];
	const int64_t *si[MC_MAX_RANK];
	const double *wi[MC_MAX_RANK];
	for (int d = 0; d < rank; d++) {
		cnt[d] = ax[d].count[o[d]];
		si[d] = ax[d].src + o[d] * ax[d].taps;
		wi[d] = ax[d].w + o[d] * ax[d].taps;
		if (!cnt[d])
			return 0;
	}
	double sum = 0;
	for (;;) {
		double w = 1;
		int64_t off = 0;
		for (int d = 0; d < rank; d++) {
			w *= wi[d][t[d]];
			off += si[d][t[d]] * stride[d];
		}
		sum += w * src[off];
		int d = rank - 1;
		while (d >= 0 && ++t[d] == cnt[d])
			t[d--] = 0;
		if (d < 0)
			return sum;
	}
}

static int resize_eval(mc_eval_ctx *c)
{
	const mc_node *n = c->node;
	const mc_tensor *x = c->in[0];
	mc_tensor *y = c->out[0];
	resize_attrs a;
	if (mc_resize_read_attrs(n, &a))
		return -1;
	int si, zi;
	mc_resize_inputs(n, c->n_in, &si, &zi);
	resize_plan p;
	if (mc_resize_make_plan(n, &a, &x->shape, si >= 0 ? c->in[si] : NULL,
	                     zi >= 0 ? c->in[zi] : NULL, &p))
		return -1;
	int rank = x->shape.rank;
	double r0[MC_MAX_RANK], r1[MC_MAX_RANK];
	for (int d = 0; d < rank; d++) {
		r0[d] = 0;
		r1[d] = 1;
	}
	if (a.coord == CT_TF_CROP_AND_RESIZE) {
		double roi[2 * MC_MAX_RANK];
		size_t nr;
		if (c->n_in < 2 || !c->in[1] ||
		    tensor_floats(n, c->in[1], "roi", roi, 2 * MC_MAX_RANK, &nr))
			return mc_node_error(n, "tf_crop_and_resize needs roi");
		if (nr != 2 * (size_t)p.n_axes)
			return mc_node_error(n, "roi has %zu values, expected %d", nr, 2 * p.n_axes);
		for (int i = 0; i < p.n_axes; i++) {
			r0[p.axes[i]] = roi[i];
			r1[p.axes[i]] = roi[p.n_axes + i];
		}
	}
	if (!y->numel)
		return 0;
	resize_axis ax[MC_MAX_RANK];
	memset(ax, 0, sizeof ax);
	int rc = 0;
	for (int d = 0; d < rank && !rc; d++)
		rc = resize_axis_build(n, &a, &p, d, x->shape.dims[d], r0[d], r1[d], &ax[d]);
	if (!rc) {
		size_t es = mc_dtype_size(x->dtype);
		int64_t stride[MC_MAX_RANK], idx[MC_MAX_RANK] = {0};
		mc_strides(&x->shape, stride);
		double *src = a.mode == RS_NEAREST ? NULL : mc_tensor_to_double(x);
		size_t j = 0;
		do {
			bool outside = false;
			for (int d = 0; d < rank; d++)
				outside |= ax[d].outside[idx[d]];
			if (outside) {
				mc_set_f(y, j, a.extrapolation);
			} else if (src) {
				mc_set_f(y, j, resize_sum(ax, rank, idx, src, stride));
			} else { /* nearest: one tap of weight 1 per axis, copied exactly */
				int64_t off = 0;
				for (int d = 0; d < rank; d++)
					off += ax[d].src[idx[d] * ax[d].taps] * stride[d];
				memcpy((char *)y->data + j * es, (const char *)x->data + (size_t)off * es,
				       es);
			}
			j++;
		} while (next_index(idx, &p.out));
		free(src);
	}
	for (int d = 0; d < rank; d++)
		resize_axis_free(&ax[d]);
	return rc;
}

int mc_resize_nearest_map(const mc_node *n, const mc_shape *in, const mc_tensor *scales,
                          const mc_tensor *sizes, int64_t **map, mc_shape *out)
{
	resize_attrs a;
	resize_plan p;
	if (mc_resize_read_attrs(n, &a) || mc_resize_make_plan(n, &a, in, scales, sizes, &p))
		return -1;
	if (a.mode != RS_NEAREST || a.coord == CT_TF_CROP_AND_RESIZE)
		return 1;
	*out = p.out;
	int rank = in->rank, rc = 0;
	for (int d = 0; d < rank; d++)
		map[d] = NULL;
	for (int d = 0; d < rank && !rc; d++) {
		resize_axis ax = { 0 };
		rc = resize_axis_build(n, &a, &p, d, in->dims[d], 0, 1, &ax);
		int64_t len = p.out.dims[d];
		map[d] = mc_xmalloc((size_t)(len ? len : 1) * sizeof **map);
		for (int64_t o = 0; o < len && !rc; o++) {
			if (ax.outside[o] || ax.count[o] != 1)
				rc = 1;
			map[d][o] = ax.src[o * ax.taps];
		}
		resize_axis_free(&ax);
	}
	if (rc)
		for (int d = 0; d < rank; d++) {
			free(map[d]);
			map[d] = NULL;
		}
	return rc;
}

/* ---- DepthToSpace / SpaceToDepth ---- */

static int blocksize(const mc_node *n, int64_t *b)
{
	if (mc_attr_int(n, "blocksize", 0, b))
		return -1;
	if (!mc_attr_find(n, "blocksize"))
		return mc_node_error(n, "needs attribute 'blocksize'");
	if (*b < 1 || *b > (1 << 20))
		return mc_node_error(n, "blocksize %lld is out of range [1, %d]", (long long)*b,
		                     1 << 20);
	return 0;
}

/* DCR: depth is (block row, block column, channel); CRD: (channel, block
 * row, block column). */
int mc_d2s_crd(const mc_node *n, bool *crd)
{
	const char *m;
	if (mc_attr_string(n, "mode", "DCR", &m))
		return -1;
	if (strcmp(m, "DCR") != 0 && (strcmp(m, "CRD") != 0 || n->opset < 11))
		return mc_node_error(n, "mode '%s' is not supported at opset %d", m, n->opset);
	*crd = strcmp(m, "CRD") == 0;
	return 0;
}

static int d2s_parse(mc_node *n)
{
	int64_t b;
	bool crd;
	return blocksize(n, &b) || mc_d2s_crd(n, &crd) ? -1 : 0;
}

static int s2d_parse(mc_node *n)
{
	int64_t b;
	return blocksize(n, &b);
}

/* blocksize, and an input of a movable dtype that is 4-D: shared by
 * DepthToSpace and SpaceToDepth. */
static int block_input(const mc_node *n, const mc_value *x, int64_t *b)
{
	if (blocksize(n, b) || !elem_size(n, x->dtype, "input"))
		return -1;
	if (x->shape.rank != 4)
		return mc_node_error(n, "input must be 4-D (N, C, H, W), got rank %d", x->shape.rank);
	return 0;
}

static int d2s_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const mc_shape *s = &c->in[0]->shape;
	int64_t b;
	if (block_input(n, c->in[0], &b))
		return -1;
	if (s->dims[1] % (b * b))
		return mc_node_error(n, "channels (%lld) must be a multiple of blocksize^2 (%lld)",
		                     (long long)s->dims[1], (long long)(b * b));
	if (s->dims[2] > INT64_MAX / b || s->dims[3] > INT64_MAX / b)
		return mc_node_error(n, "output is too large");
	mc_shape out = {.rank = 4, .dims = {s->dims[0], s->dims[1] / (b * b), s->dims[2] * b,
	                                     s->dims[3] * b}};
	mc_set_out(c, 0, c->in[0]->dtype, &out);
	return 0;
}

static int s2d_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const mc_shape *s = &c->in[0]->shape;
	int64_t b;
	if (block_input(n, c->in[0], &b))
		return -1;
	if (s->dims[2] % b || s->dims[3] % b)
		return mc_node_error(n, "height %lld and width %lld must be multiples of blocksize "
		                     "%lld", (long long)s->dims[2], (long long)s->dims[3],
		                     (long long)b);
	if (s->dims[1] > INT64_MAX / (b * b))
		return mc_node_error(n, "output is too large");
	mc_shape out = {.rank = 4, .dims = {s->dims[0], s->dims[1] * b * b, s->dims[2] / b,
	                                     s->dims[3] / b}};
	mc_set_out(c, 0, c->in[0]->dtype, &out);
	return 0;
}

/* Moves elements between the depth of `deep` and the space of `wide`:
 * wide[n, c, h*b+i, w*b+j] <-> deep[n, depth(c, i, j), h, w]. */
static void depth_space(const mc_tensor *deep_t, const mc_tensor *wide_t, int64_t b, bool crd,
                        bool to_space, const mc_tensor *src_t, mc_tensor *dst_t)
{
	const mc_shape *ds = &deep_t->shape, *ws = &wide_t->shape;
	size_t es = mc_dtype_size(src_t->dtype);
	int64_t C = ws->dims[1], H = ds->dims[2], W = ds->dims[3];
	const char *src = src_t->data;
	char *dst = dst_t->data;
	for (int64_t nb = 0; nb < ws->dims[0]; nb++)
		for (int64_t c = 0; c < C; c++)
			for (int64_t i = 0; i < b; i++)
				for (int64_t j = 0; j < b; j++) {
					int64_t depth = crd ? (c * b + i) * b + j : (i * b + j) * C + c;
					for (int64_t h = 0; h < H; h++)
						for (int64_t w = 0; w < W; w++) {
							size_t deep = (size_t)(((nb * ds->dims[1] + depth) * H + h) * W + w);
							size_t wide = (size_t)(((nb * C + c) * ws->dims[2] + h * b + i) *
							                       ws->dims[3] + w * b + j);
							if (to_space)
								memcpy(dst + wide * es, src + deep * es, es);
							else
								memcpy(dst + deep * es, src + wide * es, es);
						}
				}
}

static int d2s_eval(mc_eval_ctx *c)
{
	int64_t b;
	bool crd;
	if (blocksize(c->node, &b) || mc_d2s_crd(c->node, &crd))
		return -1;
	depth_space(c->in[0], c->out[0], b, crd, true, c->in[0], c->out[0]);
	return 0;
}

static int s2d_eval(mc_eval_ctx *c)
{
	int64_t b;
	if (blocksize(c->node, &b))
		return -1;
	depth_space(c->out[0], c->in[0], b, false, false, c->in[0], c->out[0]);
	return 0;
}

/* ---- OneHot ---- */

static int onehot_depth(const mc_node *n, const mc_tensor *t, int64_t *depth)
{
	if (t->numel != 1 || t->shape.rank > 1 ||
	    (!mc_dtype_is_int(t->dtype) && !mc_dtype_is_float(t->dtype)))
		return mc_node_error(n, "depth must be a single number");
	*depth = mc_get_i(t, 0);
	if (*depth < 1)
		return mc_node_error(n, "depth %lld must be positive", (long long)*depth);
	return 0;
}

int mc_onehot_axis(const mc_node *n, int out_rank, int *axis)
{
	int64_t a;
	if (mc_attr_int(n, "axis", -1, &a))
		return -1;
	return mc_norm_axis(n, a, out_rank, axis);
}

static int onehot_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const mc_value *ind = c->in[0], *vals = c->in[2];
	const mc_tensor *dt;
	int64_t depth;
	int axis;
	if (!mc_dtype_is_int(ind->dtype) && !mc_dtype_is_float(ind->dtype))
		return mc_node_error(n, "indices must be numbers, got %s", mc_dtype_name(ind->dtype));
	if (!elem_size(n, vals->dtype, "values"))
		return -1;
	if (vals->shape.rank != 1 || vals->shape.dims[0] != 2)
		return mc_node_error(n, "values must hold two elements [off_value, on_value]");
	if (!(dt = need_const(c, 1, "depth")) || onehot_depth(n, dt, &depth) ||
	    out_rank_ok(n, ind->shape.rank + 1L) || mc_onehot_axis(n, ind->shape.rank + 1, &axis))
		return -1;
	mc_shape out = {.rank = ind->shape.rank + 1};
	for (int d = 0, r = 0; d < out.rank; d++)
		out.dims[d] = d == axis ? depth : ind->shape.dims[r++];
	size_t numel;
	if (!mc_shape_numel(&out, &numel))
		return mc_node_error(n, "output is too large");
	mc_set_out(c, 0, vals->dtype, &out);
	return 0;
}

static int onehot_eval(mc_eval_ctx *c)
{
	const mc_tensor *ind = c->in[0], *vals = c->in[2];
	mc_tensor *y = c->out[0];
	int64_t depth;
	int axis;
	if (onehot_depth(c->node, c->in[1], &depth) ||
	    mc_onehot_axis(c->node, ind->shape.rank + 1, &axis))
		return -1;
	size_t es = mc_dtype_size(vals->dtype);
	const char *off = vals->data, *on = off + es;
	for (size_t i = 0; i < y->numel; i++)
		memcpy((char *)y->data + i * es, off, es);
	size_t inner = dims_prod(&ind->shape, axis, ind->shape.rank);
	for (size_t j = 0; j < ind->numel; j++) {
		int64_t v = mc_get_i(ind, j); /* float indices truncate, like a Cast */
		if (v < 0 && v >= -depth)
			v += depth;
		if (v < 0 || v >= depth)
			continue; /* out of range: all off_value, as the spec says */
		size_t o = j / inner, i = j % inner;
		memcpy((char *)y->data + ((o * (size_t)depth + (size_t)v) * inner + i) * es, on, es);
	}
	return 0;
}

/* ---- Trilu ---- */

static int trilu_k(const mc_node *n, const mc_tensor *k, int64_t *out)
{
	*out = 0;
	if (!k)
		return 0;
	if (k->numel != 1 || !mc_dtype_is_int(k->dtype))
		return mc_node_error(n, "k must be a single integer");
	*out = mc_get_i(k, 0);
	return 0;
}

static int trilu_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	if (!elem_size(n, c->in[0]->dtype, "input"))
		return -1;
	if (c->in[0]->shape.rank < 2)
		return mc_node_error(n, "input must have rank >= 2");
	if (c->n_in > 1 && c->in[1] &&
	    (mc_numel(&c->in[1]->shape) != 1 || !mc_dtype_is_int(c->in[1]->dtype)))
		return mc_node_error(n, "k must be a single integer");
	return mc_infer_same_as_input0(c);
}

static int trilu_eval(mc_eval_ctx *c)
{
	const mc_tensor *x = c->in[0];
	int64_t k, upper;
	if (trilu_k(c->node, c->n_in > 1 ? c->in[1] : NULL, &k) ||
	    mc_attr_int(c->node, "upper", 1, &upper))
		return -1;
	int r = x->shape.rank;
	int64_t rows = x->shape.dims[r - 2], cols = x->shape.dims[r - 1];
	size_t es = mc_dtype_size(x->dtype);
	/* output starts zeroed: copy only the kept triangle */
	for (size_t e = 0; e < x->numel; e++) {
		int64_t j = (int64_t)(e % (size_t)cols), i = (int64_t)(e / (size_t)cols % (size_t)rows);
		bool keep = upper ? j - i >= k : j - i <= k;
		if (keep)
			memcpy((char *)c->out[0]->data + e * es, (const char *)x->data + e * es, es);
	}
	return 0;
}

/* ---- Compress ---- */

/* Condition entries past the axis must be false (numpy's rule). */
static int compress_count(const mc_node *n, const mc_tensor *cond, int64_t dim, int64_t *kept)
{
	if (cond->shape.rank != 1)
		return mc_node_error(n, "condition must be 1-D");
	*kept = 0;
	for (size_t i = 0; i < cond->numel; i++) {
		if (!mc_get_i(cond, i))
			continue;
		if ((int64_t)i >= dim)
			return mc_node_error(n, "condition is true at %zu, past the end of the "
			                     "compressed axis (size %lld)", i, (long long)dim);
		(*kept)++;
	}
	return 0;
}

/* axis -1 here means "flattened". */
int mc_compress_axis(const mc_node *n, int rank, int *axis)
{
	const mc_attr *a = mc_attr_find(n, "axis");
	int64_t v;
	*axis = -1;
	if (!a)
		return 0;
	if (mc_attr_int(n, "axis", 0, &v))
		return -1;
	return mc_norm_axis(n, v, rank, axis);
}

static int compress_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const mc_value *x = c->in[0];
	const mc_tensor *cond;
	int axis;
	if (!elem_size(n, x->dtype, "input") || mc_compress_axis(n, x->shape.rank, &axis))
		return -1;
	if (c->in[1]->dtype != MC_BOOL)
		return mc_node_error(n, "condition must be bool, got %s",
		                     mc_dtype_name(c->in[1]->dtype));
	int64_t dim = axis < 0 ? (int64_t)mc_numel(&x->shape) : x->shape.dims[axis], kept;
	int count = mc_count_out(c);
	if (!c->in[1]->konst && count >= 0) {
		/* a condition known at run time: up to the whole axis, counted
		 * (libcore/counted.c) by the entries kept */
		mc_shape out = x->shape;
		if (axis < 0)
			out.rank = 1, out.dims[0] = dim;
		mc_set_counted_out(c, 0, x->dtype, &out, axis < 0 ? 0 : axis, count);
		return 0;
	}
	if (!(cond = need_const(c, 1, "condition")))
		return -1;
	if (compress_count(n, cond, dim, &kept))
		return -1;
	mc_shape out = x->shape;
	if (axis < 0)
		out.rank = 1, out.dims[0] = kept;
	else
		out.dims[axis] = kept;
	mc_set_out(c, 0, x->dtype, &out);
	return 0;
}

static int compress_eval(mc_eval_ctx *c)
{
	const mc_tensor *x = c->in[0], *cond = c->in[1];
	int axis;
	if (mc_compress_axis(c->node, x->shape.rank, &axis))
		return -1;
	size_t es = mc_dtype_size(x->dtype);
	size_t outer = axis < 0 ? 1 : dims_prod(&x->shape, 0, axis);
	size_t dim = axis < 0 ? x->numel : (size_t)x->shape.dims[axis];
	size_t block = (axis < 0 ? 1 : dims_prod(&x->shape, axis + 1, x->shape.rank)) * es;
	int64_t kept;
	if (compress_count(c->node, cond, (int64_t)dim, &kept))
		return -1;
	/* the output's extent on the axis: kept, or the bound where the
	 * condition was known at run time only (the rest zero) */
	const mc_shape *os = &c->out[0]->shape;
	size_t room = (size_t)os->dims[axis < 0 ? 0 : axis];
	memset(c->out[0]->data, 0, c->out[0]->nbytes);
	char *dst = c->out[0]->data;
	const char *src = x->data;
	for (size_t o = 0; o < outer; o++) {
		size_t at = 0;
		for (size_t i = 0; i < cond->numel && i < dim; i++)
			if (mc_get_i(cond, i))
				memcpy(dst + (o * room + at++) * block, src + (o * dim + i) * block, block);
	}
	mc_deliver_count(c, kept);
	return 0;
}

/* ---- registry entries ---- */

static const mc_op op_slice = {
	.name = "Slice", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
	.parse = slice_parse, .infer = slice_infer, .eval = slice_eval,
};
static const mc_op op_gather = {
	.name = "Gather", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
	.infer = gather_infer, .eval = gather_eval,
};
static const mc_op op_gather_elements = {
	.name = "GatherElements", .min_opset = 11, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
	.infer = gather_elements_infer, .eval = gather_elements_eval,
};
static const mc_op op_gathernd = {
	.name = "GatherND", .min_opset = 11, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
	.parse = gathernd_parse, .infer = gathernd_infer, .eval = gathernd_eval,
};
static const mc_op op_scatter = { /* deprecated: ScatterElements without reduction */
	.name = "Scatter", .min_opset = 9, .max_opset = 10,
	.min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
	.parse = scatter_parse, .infer = scatter_elements_infer, .eval = scatter_elements_eval,
};
static const mc_op op_scatter_elements = {
	.name = "ScatterElements", .min_opset = 11, .max_opset = MC_MAX_OPSET,
	.min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
	.parse = scatter_parse, .infer = scatter_elements_infer, .eval = scatter_elements_eval,
};
static const mc_op op_scatternd = {
	.name = "ScatterND", .min_opset = 11, .max_opset = MC_MAX_OPSET,
	.min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
	.parse = scatter_parse, .infer = scatternd_infer, .eval = scatternd_eval,
};
static const mc_op op_pad = {
	.name = "Pad", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
	.parse = pad_parse, .infer = pad_infer, .eval = pad_eval,
};
static const mc_op op_resize = {
	.name = "Resize", .min_opset = 10, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
	.parse = resize_parse, .infer = resize_infer, .eval = resize_eval,
};
static const mc_op op_upsample = { /* deprecated from opset 10 */
	.name = "Upsample", .min_opset = 7, .max_opset = 9,
	.min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
	.parse = resize_parse, .infer = resize_infer, .eval = resize_eval,
};
static const mc_op op_depth_to_space = {
	.name = "DepthToSpace", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
	.parse = d2s_parse, .infer = d2s_infer, .eval = d2s_eval,
};
static const mc_op op_space_to_depth = {
	.name = "SpaceToDepth", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
	.parse = s2d_parse, .infer = s2d_infer, .eval = s2d_eval,
};
static const mc_op op_onehot = {
	.name = "OneHot", .min_opset = 9, .max_opset = MC_MAX_OPSET,
	.min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
	.infer = onehot_infer, .eval = onehot_eval,
};
static const mc_op op_trilu = {
	.name = "Trilu", .min_opset = 14, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
	.infer = trilu_infer, .eval = trilu_eval,
};
static const mc_op op_compress = {
	.name = "Compress", .min_opset = 9, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
	.infer = compress_infer, .eval = compress_eval, .flags = MC_OP_COUNTED,
};

const mc_op *const mc_ops_index[] = {
	&op_slice, &op_gather, &op_gather_elements, &op_gathernd, &op_scatter,
	&op_scatter_elements, &op_scatternd, &op_pad, &op_resize, &op_upsample,
	&op_depth_to_space, &op_space_to_depth, &op_onehot, &op_trilu, &op_compress,
	NULL,
};
