/* Tensor manipulation: ops that move or generate elements without
 * arithmetic on them (Reshape, Transpose, Concat, Split, Expand, Tile, ...)
 * and the shape ops (Shape, Size) that constant folding uses to resolve
 * shape subgraphs at compile time.
 *
 * Element moves copy raw bytes, so every dtype of known size is exact.
 * Inputs that decide an output shape (Reshape's shape, Expand's shape,
 * Tile's repeats, ...) must be constants; infer reads them, eval only
 * moves data into the already-shaped outputs. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "tensor.h"

/* ---- shared helpers ---- */

/* True when the product of the non-zero dims fits: a shape built from model
 * numbers must not overflow even where a zero dim makes it empty, so that
 * stride arithmetic on it stays defined everywhere. */
static bool dims_fit(const mc_shape *s)
{
	size_t n = 1;
	if (s->rank < 0 || s->rank > MC_MAX_RANK)
		return false;
	for (int d = 0; d < s->rank; d++) {
		if (s->dims[d] < 0)
			return false;
		if (s->dims[d] && !mc_mul_size(n, (size_t)s->dims[d], &n))
			return false;
	}
	return n <= (size_t)INT64_MAX / 8;
}

static int check_out_shape(const mc_node *n, const mc_shape *s)
{
	char buf[256];
	if (!dims_fit(s))
		return mc_node_error(n, "output shape %s is too large or invalid",
		                     mc_shape_str(s, buf, sizeof buf));
	return 0;
}

static int check_data_dtype(mc_infer_ctx *c, int i)
{
	if (!mc_dtype_supported(c->in[i]->dtype))
		return mc_node_error(c->node, "input %d has unsupported dtype %s", i,
		                     mc_dtype_name(c->in[i]->dtype));
	return 0;
}

/* Product of dims [lo, hi) of a valid shape. */
static size_t dims_prod(const mc_shape *s, int lo, int hi)
{
	size_t p = 1;
	for (int d = lo; d < hi; d++)
		p *= (size_t)s->dims[d];
	return p;
}

/* Output elements in row-major order, each copied from the input element
 * at sum over d of (idx[d] % wrap[d]) * stride[d]. Transpose and Expand
 * pass wrap = output dims (a no-op); Tile wraps at the input dims. */
static void gather_elements(mc_tensor *out, const mc_tensor *in,
                            const int64_t stride[MC_MAX_RANK], const int64_t wrap[MC_MAX_RANK])
{
	size_t es = mc_dtype_size(out->dtype);
	unsigned char *dst = out->data;
	const unsigned char *src = in->data;
	for (size_t i = 0; i < out->numel; i++) {
		size_t rest = i, from = 0;
		for (int d = out->shape.rank - 1; d >= 0; d--) {
			size_t dim = (size_t)out->shape.dims[d];
			size_t idx = rest % dim;
			rest /= dim;
			from += idx % (size_t)wrap[d] * (size_t)stride[d];
		}
		memcpy(dst + i * es, src + from * es, es);
	}
}

/* Omitted required inputs (an empty name in the model) are errors here,
 * before anything reads them. */
static int need_inputs(mc_infer_ctx *c, int count)
{
	for (int k = 0; k < count; k++)
		if (k >= c->n_in || !c->in[k])
			return mc_node_error(c->node, "input %d is missing", k);
	return 0;
}

/* Reshape, Flatten, Squeeze, Unsqueeze: same bytes, new shape. */
static int copy_eval(mc_eval_ctx *c)
{
	if (!c->out[0])
		return 0; /* output omitted */
	if (c->in[0]->nbytes != c->out[0]->nbytes)
		return mc_node_error(c->node, "input and output sizes differ");
	memcpy(c->out[0]->data, c->in[0]->data, c->in[0]->nbytes);
	return 0;
}

/* Reads an int list attribute into out (at most cap entries). */
static int attr_list(const mc_node *n, const char *name, int64_t *out, size_t cap,
                     size_t *count, bool *present)
{
	const int64_t *v;
	if (mc_attr_ints(n, name, &v, count))
		return -1;
	*present = mc_attr_find(n, name) != NULL;
	if (*count > cap)
		return mc_node_error(n, "attribute '%s' has %zu entries, at most %zu allowed", name,
		                     *count, cap);
	if (*count)
		memcpy(out, v, *count * sizeof *v);
	return 0;
}

/* ---- Reshape ---- */

static int reshape_parse(mc_node *n)
{
	int64_t allowzero;
	if (n->opset < 5 && n->n_inputs != 1)
		return mc_node_error(n, "takes 1 input before opset 5 (the shape is an attribute)");
	if (n->opset >= 5 && n->n_inputs != 2)
		return mc_node_error(n, "takes 2 inputs (data, shape)");
	if (mc_attr_int(n, "allowzero", 0, &allowzero))
		return -1;
	if (allowzero != 0 && allowzero != 1)
		return mc_node_error(n, "allowzero must be 0 or 1, got %lld", (long long)allowzero);
	return 0;
}

static int reshape_infer(mc_infer_ctx *c)
{
	if (need_inputs(c, 1))
		return -1;
	const mc_node *n = c->node;
	const mc_shape *ins = &c->in[0]->shape;
	int64_t want[MC_MAX_RANK], allowzero = 0;
	size_t count;
	bool present;
	if (check_data_dtype(c, 0))
		return -1;
	if (n->opset < 5) {
		if (attr_list(n, "shape", want, MC_MAX_RANK, &count, &present))
			return -1;
		if (!present)
			return mc_node_error(n, "needs the 'shape' attribute");
	} else if (mc_const_ints(c, 1, want, MC_MAX_RANK, &count)) {
		return -1;
	}
	if (n->opset >= 14 && mc_attr_int(n, "allowzero", 0, &allowzero))
		return -1;

	mc_shape out = {.rank = (int)count};
	int infer_dim = -1;
	bool has_zero = false;
	size_t known = 1; /* product of the non-zero given dims */
	for (int d = 0; d < out.rank; d++) {
		int64_t v = want[d];
		if (v == -1) {
			if (infer_dim >= 0)
				return mc_node_error(n, "shape has more than one -1");
			infer_dim = d;
			continue;
		}
		if (v < -1)
			return mc_node_error(n, "shape entry %d is %lld; dims must be >= -1", d,
			                     (long long)v);
		if (v == 0 && !allowzero) {
			if (d >= ins->rank)
				return mc_node_error(n, "shape entry %d is 0 (copy the input dim) but the "
				                     "input has rank %d", d, ins->rank);
			v = ins->dims[d];
		}
		out.dims[d] = v;
		if (v == 0)
			has_zero = true;
		else if (!mc_mul_size(known, (size_t)v, &known))
			return mc_node_error(n, "shape is too large");
	}
	size_t numel = mc_numel(ins);
	char a[256], b[256];
	if (infer_dim >= 0) {
		if (has_zero)
			return mc_node_error(n, "cannot infer the -1 dim next to a zero-size dim");
		if (numel % known)
			return mc_node_error(n, "cannot reshape %s (%zu elements) with -1 and the "
			                     "other dims multiplying to %zu",
			                     mc_shape_str(ins, a, sizeof a), numel, known);
		out.dims[infer_dim] = (int64_t)(numel / known);
	} else if ((has_zero ? 0 : known) != numel) {
		return mc_node_error(n, "cannot reshape %s (%zu elements) to %s",
		                     mc_shape_str(ins, a, sizeof a), numel,
		                     mc_shape_str(&out, b, sizeof b));
	}
	if (check_out_shape(n, &out))
		return -1;
	mc_set_out(c, 0, c->in[0]->dtype, &out);
	return 0;
}

/* ---- Flatten ---- */

static int flatten_infer(mc_infer_ctx *c)
{
	if (need_inputs(c, 1))
		return -1;
	const mc_node *n = c->node;
	const mc_shape *ins = &c->in[0]->shape;
	int64_t axis;
	if (check_data_dtype(c, 0) || mc_attr_int(n, "axis", 1, &axis))
		return -1;
	/* axis lies in [-r, r] (negative from opset 11); axis == r is allowed */
	if (axis < 0 && n->opset >= 11)
		axis += ins->rank;
	if (axis < 0 || axis > ins->rank)
		return mc_node_error(n, "axis %lld is out of range for rank %d", (long long)axis,
		                     ins->rank);
	mc_shape out = {.rank = 2};
	out.dims[0] = (int64_t)dims_prod(ins, 0, (int)axis);
	out.dims[1] = (int64_t)dims_prod(ins, (int)axis, ins->rank);
	mc_set_out(c, 0, c->in[0]->dtype, &out);
	return 0;
}

/* ---- Squeeze / Unsqueeze ---- */

/* Squeeze and Unsqueeze: the data input (0) must be there with a movable
 * dtype; the axes list is an attribute before opset 13, input 1 from 13 on. */
static int get_axes(mc_infer_ctx *c, int64_t *axes, size_t *count, bool *present)
{
	if (need_inputs(c, 1) || check_data_dtype(c, 0))
		return -1;
	if (c->node->opset < 13)
		return attr_list(c->node, "axes", axes, MC_MAX_RANK, count, present);
	*count = 0;
	*present = c->n_in > 1 && c->in[1];
	if (!*present)
		return 0;
	return mc_const_ints(c, 1, axes, MC_MAX_RANK, count);
}

/* Normalises axes against rank into a mask; duplicates are errors. */
static int axes_mask(const mc_node *n, const int64_t *axes, size_t count, int rank,
                     bool mask[MC_MAX_RANK])
{
	memset(mask, 0, MC_MAX_RANK * sizeof *mask);
	for (size_t k = 0; k < count; k++) {
		int a;
		if (mc_norm_axis(n, axes[k], rank, &a))
			return -1;
		if (mask[a])
			return mc_node_error(n, "axis %lld is given twice", (long long)axes[k]);
		mask[a] = true;
	}
	return 0;
}

static int squeeze_parse(mc_node *n)
{
	if (n->opset < 13 && n->n_inputs != 1)
		return mc_node_error(n, "takes 1 input before opset 13 (axes is an attribute)");
	return 0;
}

static int squeeze_infer(mc_infer_ctx *c)
{
	int64_t axes[MC_MAX_RANK];
	size_t count;
	bool present, mask[MC_MAX_RANK];
	if (get_axes(c, axes, &count, &present))
		return -1;
	const mc_node *n = c->node;
	const mc_shape *ins = &c->in[0]->shape;
	if (axes_mask(n, axes, count, ins->rank, mask))
		return -1;
	mc_shape out = {.rank = 0};
	for (int d = 0; d < ins->rank; d++) {
		/* without axes (or with an empty list) every dim of size 1 goes */
		bool drop = count ? mask[d] : ins->dims[d] == 1;
		if (drop && ins->dims[d] != 1)
			return mc_node_error(n, "cannot squeeze axis %d of size %lld", d,
			                     (long long)ins->dims[d]);
		if (!drop)
			out.dims[out.rank++] = ins->dims[d];
	}
	mc_set_out(c, 0, c->in[0]->dtype, &out);
	return 0;
}

static int unsqueeze_parse(mc_node *n)
{
	if (squeeze_parse(n))
		return -1;
	if (n->opset >= 13 && n->n_inputs != 2)
		return mc_node_error(n, "takes 2 inputs (data, axes) from opset 13");
	return 0;
}

static int unsqueeze_infer(mc_infer_ctx *c)
{
	int64_t axes[MC_MAX_RANK];
	size_t count;
	bool present, mask[MC_MAX_RANK];
	if (get_axes(c, axes, &count, &present))
		return -1;
	const mc_node *n = c->node;
	const mc_shape *ins = &c->in[0]->shape;
	if (!present)
		return mc_node_error(n, "needs axes");
	if ((size_t)ins->rank + count > MC_MAX_RANK)
		return mc_node_error(n, "output rank %zu exceeds the maximum rank %d",
		                     (size_t)ins->rank + count, MC_MAX_RANK);
	/* axes index the output, whose rank counts the new dims */
	int rank = ins->rank + (int)count;
	if (axes_mask(n, axes, count, rank, mask))
		return -1;
	mc_shape out = {.rank = rank};
	for (int d = 0, from = 0; d < rank; d++)
		out.dims[d] = mask[d] ? 1 : ins->dims[from++];
	mc_set_out(c, 0, c->in[0]->dtype, &out);
	return 0;
}

/* ---- Transpose ---- */

/* perm as given (a permutation of 0..rank-1) or reversed dims by default. */
int mc_transpose_perm(const mc_node *n, int rank, int64_t perm[MC_MAX_RANK])
{
	size_t count;
	bool present, seen[MC_MAX_RANK] = {false};
	if (attr_list(n, "perm", perm, MC_MAX_RANK, &count, &present))
		return -1;
	if (!present) {
		for (int d = 0; d < rank; d++)
			perm[d] = rank - 1 - d;
		return 0;
	}
	if (count != (size_t)rank)
		return mc_node_error(n, "perm has %zu entries for an input of rank %d", count, rank);
	for (int d = 0; d < rank; d++) {
		if (perm[d] < 0 || perm[d] >= rank || seen[perm[d]])
			return mc_node_error(n, "perm is not a permutation of 0..%d", rank - 1);
		seen[perm[d]] = true;
	}
	return 0;
}

static int transpose_infer(mc_infer_ctx *c)
{
	if (need_inputs(c, 1))
		return -1;
	const mc_shape *ins = &c->in[0]->shape;
	int64_t perm[MC_MAX_RANK];
	if (check_data_dtype(c, 0) || mc_transpose_perm(c->node, ins->rank, perm))
		return -1;
	mc_shape out = {.rank = ins->rank};
	for (int d = 0; d < ins->rank; d++)
		out.dims[d] = ins->dims[perm[d]];
	mc_set_out(c, 0, c->in[0]->dtype, &out);
	return 0;
}

static int transpose_eval(mc_eval_ctx *c)
{
	if (!c->out[0])
		return 0; /* output omitted */
	const mc_tensor *in = c->in[0];
	mc_tensor *out = c->out[0];
	int64_t perm[MC_MAX_RANK], own[MC_MAX_RANK], stride[MC_MAX_RANK];
	if (!out->numel)
		return 0;
	if (mc_transpose_perm(c->node, in->shape.rank, perm))
		return -1;
	mc_strides(&in->shape, own);
	for (int d = 0; d < out->shape.rank; d++)
		stride[d] = own[perm[d]];
	gather_elements(out, in, stride, out->shape.dims);
	return 0;
}

/* ---- Concat ---- */

int mc_concat_axis(const mc_node *n, int rank, int *axis)
{
	int64_t a;
	if (n->opset >= 4 && !mc_attr_find(n, "axis"))
		return mc_node_error(n, "needs the 'axis' attribute");
	if (mc_attr_int(n, "axis", 1, &a))
		return -1;
	return mc_norm_axis(n, a, rank, axis);
}

static int concat_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	int axis;
	for (int k = 0; k < c->n_in; k++)
		if (!c->in[k])
			return mc_node_error(n, "input %d is missing", k);
	const mc_value *first = c->in[0];
	if (check_data_dtype(c, 0) || mc_concat_axis(n, first->shape.rank, &axis))
		return -1;
	mc_shape out = first->shape;
	for (int k = 1; k < c->n_in; k++) {
		const mc_value *v = c->in[k];
		char a[256], b[256];
		if (v->dtype != first->dtype)
			return mc_node_error(n, "input %d is %s but input 0 is %s", k,
			                     mc_dtype_name(v->dtype), mc_dtype_name(first->dtype));
		bool same = v->shape.rank == first->shape.rank;
		for (int d = 0; same && d < out.rank; d++)
			same = d == axis || v->shape.dims[d] == first->shape.dims[d];
		if (!same)
			return mc_node_error(n, "input %d has shape %s, which does not match input 0's "
			                     "%s outside axis %d", k,
			                     mc_shape_str(&v->shape, a, sizeof a),
			                     mc_shape_str(&first->shape, b, sizeof b), axis);
		if (__builtin_add_overflow(out.dims[axis], v->shape.dims[axis], &out.dims[axis]))
			return mc_node_error(n, "the concatenated axis is too long");
	}
	if (check_out_shape(n, &out))
		return -1;
	mc_set_out(c, 0, first->dtype, &out);
	return 0;
}

static int concat_eval(mc_eval_ctx *c)
{
	if (!c->out[0])
		return 0; /* output omitted */
	int axis;
	mc_tensor *out = c->out[0];
	if (mc_concat_axis(c->node, out->shape.rank, &axis))
		return -1;
	size_t es = mc_dtype_size(out->dtype), outer = dims_prod(&out->shape, 0, axis);
	unsigned char *dst = out->data;
	for (size_t o = 0; o < outer; o++)
		for (int k = 0; k < c->n_in; k++) {
			const mc_tensor *in = c->in[k];
			size_t chunk = dims_prod(&in->shape, axis, in->shape.rank) * es;
			memcpy(dst, (const unsigned char *)in->data + o * chunk, chunk);
			dst += chunk;
		}
	return 0;
}

/* ---- Split ---- */

static int split_parse(mc_node *n)
{
	if (n->opset >= 2 && n->opset < 13 && n->n_inputs != 1)
		return mc_node_error(n, "takes 1 input at opsets 2 to 12 (split is an attribute)");
	if (n->opset >= 18) {
		int64_t num;
		if (mc_attr_int(n, "num_outputs", n->n_outputs, &num))
			return -1;
		if (num != n->n_outputs)
			return mc_node_error(n, "num_outputs is %lld but the node has %d outputs",
			                     (long long)num, n->n_outputs);
	}
	return 0;
}

/* Chunk sizes along the axis of length dim. given/n_given: the explicit
 * split list (attribute or input), if any. Without it the parts are equal;
 * from opset 18 the last one may be smaller. */
static int split_sizes(const mc_node *n, const int64_t *given, size_t n_given, bool have_given,
                       int64_t dim, int n_out, int64_t *sizes)
{
	if (have_given) {
		int64_t sum = 0;
		if (n_given != (size_t)n_out)
			return mc_node_error(n, "split has %zu entries for %d outputs", n_given, n_out);
		for (int k = 0; k < n_out; k++) {
			if (given[k] < 0 || given[k] > dim - sum)
				return mc_node_error(n, "split sizes are negative or exceed the axis "
				                     "length %lld", (long long)dim);
			sizes[k] = given[k];
			sum += given[k];
		}
		if (sum != dim)
			return mc_node_error(n, "split sizes add up to %lld, not the axis length %lld",
			                     (long long)sum, (long long)dim);
		return 0;
	}
	int64_t chunk = dim / n_out;
	if (dim % n_out) {
		if (n->opset < 18)
			return mc_node_error(n, "axis length %lld does not split evenly into %d parts",
			                     (long long)dim, n_out);
		chunk++;
		/* the first n_out - 1 parts must fit: chunk * (n_out - 1) <= dim */
		if (n_out > 1 && chunk > dim / (n_out - 1))
			return mc_node_error(n, "axis length %lld cannot split into %d parts of %lld",
			                     (long long)dim, n_out, (long long)chunk);
	}
	for (int k = 0; k < n_out; k++)
		sizes[k] = k < n_out - 1 ? chunk : dim - chunk * (n_out - 1);
	return 0;
}

int mc_split_axis(const mc_node *n, int rank, int *axis)
{
	int64_t a;
	if (mc_attr_int(n, "axis", 0, &a))
		return -1;
	return mc_norm_axis(n, a, rank, axis);
}


static int split_infer(mc_infer_ctx *c)
{
	if (need_inputs(c, 1))
		return -1;
	const mc_node *n = c->node;
	const mc_shape *ins = &c->in[0]->shape;
	int axis;
	if (check_data_dtype(c, 0) || mc_split_axis(n, ins->rank, &axis))
		return -1;
	size_t cap = (size_t)c->n_out, n_given = 0;
	int64_t *given = mc_xmalloc(cap * sizeof *given), *sizes = mc_xmalloc(cap * sizeof *sizes);
	bool have = false;
	int rc = 0;
	/* the list is input 1 at opset 1 and from 13, else an attribute */
	if (c->n_in > 1 && c->in[1]) {
		have = true;
		rc = mc_const_ints(c, 1, given, cap, &n_given);
	} else if (n->opset < 13) {
		rc = attr_list(n, "split", given, cap, &n_given, &have);
	}
	if (!rc)
		rc = split_sizes(n, given, n_given, have, ins->dims[axis], c->n_out, sizes);
	for (int k = 0; !rc && k < c->n_out; k++) {
		mc_shape out = *ins;
		out.dims[axis] = sizes[k];
		mc_set_out(c, k, c->in[0]->dtype, &out);
	}
	free(given);
	free(sizes);
	return rc;
}

static int split_eval(mc_eval_ctx *c)
{
	const mc_node *n = c->node;
	const mc_tensor *in = c->in[0];
	int axis;
	if (mc_split_axis(n, in->shape.rank, &axis))
		return -1;
	size_t cap = (size_t)c->n_out, n_given = 0;
	int64_t *given = mc_xmalloc(cap * sizeof *given), *sizes = mc_xmalloc(cap * sizeof *sizes);
	bool have = false;
	int rc = 0;
	if (c->n_in > 1 && c->in[1]) {
		const mc_tensor *s = c->in[1];
		have = true;
		n_given = s->numel;
		if (n_given > cap)
			rc = mc_node_error(n, "split has %zu entries for %d outputs", n_given, c->n_out);
		for (size_t k = 0; !rc && k < n_given; k++)
			given[k] = mc_get_i(s, k);
	} else if (n->opset < 13) {
		rc = attr_list(n, "split", given, cap, &n_given, &have);
	}
	if (!rc)
		rc = split_sizes(n, given, n_given, have, in->shape.dims[axis], c->n_out, sizes);
	if (!rc) {
		size_t es = mc_dtype_size(in->dtype), outer = dims_prod(&in->shape, 0, axis);
		size_t inner = dims_prod(&in->shape, axis + 1, in->shape.rank) * es;
		const unsigned char *src = in->data;
		for (size_t o = 0; o < outer; o++)
			for (int k = 0; k < c->n_out; k++) {
				size_t chunk = (size_t)sizes[k] * inner;
				if (c->out[k])
					memcpy((unsigned char *)c->out[k]->data + o * chunk, src, chunk);
				src += chunk;
			}
	}
	free(given);
	free(sizes);
	return rc;
}

/* ---- Shape / Size: read input shapes only, never data ---- */

/* The [start, end) range of dims Shape reports (attributes from opset 15),
 * clamped to [0, rank] like the spec says. */
int mc_shape_range(const mc_node *n, int rank, int64_t *start, int64_t *end)
{
	*start = 0;
	*end = rank;
	if (n->opset < 15)
		return 0;
	if (mc_attr_int(n, "start", 0, start) || mc_attr_int(n, "end", rank, end))
		return -1;
	int64_t *ends[2] = {start, end};
	for (int k = 0; k < 2; k++) {
		int64_t v = *ends[k];
		if (v < 0)
			v = v < -(int64_t)rank ? 0 : v + rank;
		*ends[k] = v > rank ? rank : v;
	}
	if (*end < *start)
		*end = *start;
	return 0;
}

static int shape_infer(mc_infer_ctx *c)
{
	if (need_inputs(c, 1))
		return -1;
	int64_t start, end;
	if (mc_shape_range(c->node, c->in[0]->shape.rank, &start, &end))
		return -1;
	mc_shape out = {.rank = 1, .dims = {end - start}};
	mc_set_out(c, 0, MC_INT64, &out);
	return 0;
}

static int shape_eval(mc_eval_ctx *c)
{
	if (!c->out[0])
		return 0; /* output omitted */
	const mc_shape *s = &c->in[0]->shape;
	int64_t start, end;
	if (mc_shape_range(c->node, s->rank, &start, &end))
		return -1;
	for (int64_t d = start; d < end; d++)
		mc_set_i(c->out[0], (size_t)(d - start), s->dims[d]);
	return 0;
}

static int size_infer(mc_infer_ctx *c)
{
	if (need_inputs(c, 1))
		return -1;
	mc_shape scalar = {.rank = 0};
	mc_set_out(c, 0, MC_INT64, &scalar);
	return 0;
}

static int size_eval(mc_eval_ctx *c)
{
	if (!c->out[0])
		return 0; /* output omitted */
	mc_set_i(c->out[0], 0, (int64_t)mc_numel(&c->in[0]->shape));
	return 0;
}

/* ---- ConstantOfShape ---- */

static int constantofshape_parse(mc_node *n)
{
	const mc_attr *v = mc_attr_find(n, "value");
	if (!v)
		return 0;
	if (v->type != MC_ATTR_TENSOR || !v->t)
		return mc_node_error(n, "attribute 'value' must be a tensor");
	if (v->t->numel != 1)
		return mc_node_error(n, "attribute 'value' must hold one element, not %zu",
		                     v->t->numel);
	if (!mc_dtype_supported(v->t->dtype))
		return mc_node_error(n, "attribute 'value' has unsupported dtype %s",
		                     mc_dtype_name(v->t->dtype));
	return 0;
}

static int constantofshape_infer(mc_infer_ctx *c)
{
	if (need_inputs(c, 1))
		return -1;
	const mc_node *n = c->node;
	const mc_attr *v = mc_attr_find(n, "value");
	int64_t dims[MC_MAX_RANK];
	size_t count;
	if (c->in[0]->shape.rank != 1)
		return mc_node_error(n, "the shape input must be 1-D");
	if (mc_const_ints(c, 0, dims, MC_MAX_RANK, &count))
		return -1;
	mc_shape out = {.rank = (int)count};
	for (size_t d = 0; d < count; d++) {
		if (dims[d] < 0)
			return mc_node_error(n, "shape entry %zu is negative (%lld)", d,
			                     (long long)dims[d]);
		out.dims[d] = dims[d];
	}
	if (check_out_shape(n, &out))
		return -1;
	mc_set_out(c, 0, v ? v->t->dtype : MC_FLOAT, &out);
	return 0;
}

static int constantofshape_eval(mc_eval_ctx *c)
{
	if (!c->out[0])
		return 0; /* output omitted */
	const mc_attr *v = mc_attr_find(c->node, "value");
	mc_tensor *out = c->out[0];
	if (!v)
		return 0; /* outputs come zeroed: float 0 */
	size_t es = mc_dtype_size(out->dtype);
	for (size_t i = 0; i < out->numel; i++)
		memcpy((unsigned char *)out->data + i * es, v->t->data, es);
	return 0;
}

/* ---- Range ---- */

/* Element count of Range(start, limit, delta): max(ceil((limit - start) /
 * delta), 0), exact in int64 for integers, in double for floats. */
static int range_count(const mc_node *n, const mc_tensor *start, const mc_tensor *limit,
                       const mc_tensor *delta, int64_t *count)
{
	if (mc_dtype_is_int(start->dtype)) {
		int64_t s = mc_get_i(start, 0), l = mc_get_i(limit, 0), d = mc_get_i(delta, 0), diff;
		if (d == 0)
			return mc_node_error(n, "delta is 0");
		if (__builtin_sub_overflow(l, s, &diff) || (diff == INT64_MIN && d == -1))
			return mc_node_error(n, "the range is too large");
		int64_t q = diff / d, r = diff % d;
		if (r != 0 && (r > 0) == (d > 0))
			q++;
		*count = q > 0 ? q : 0;
		return 0;
	}
	double s = mc_get_f(start, 0), l = mc_get_f(limit, 0), d = mc_get_f(delta, 0);
	if (d == 0)
		return mc_node_error(n, "delta is 0");
	double q = ceil((l - s) / d);
	if (!(q < 9.0e18)) /* also catches NaN and infinities */
		return mc_node_error(n, "the range is too large or not finite");
	*count = q > 0 ? (int64_t)q : 0;
	return 0;
}

static int range_infer(mc_infer_ctx *c)
{
	if (need_inputs(c, 3))
		return -1;
	const mc_node *n = c->node;
	static const char *names[3] = {"start", "limit", "delta"};
	mc_dtype t = c->in[0]->dtype;
	if (!mc_dtype_is_int(t) && !mc_dtype_is_float(t))
		return mc_node_error(n, "unsupported dtype %s", mc_dtype_name(t));
	for (int k = 0; k < 3; k++) {
		const mc_value *v = c->in[k];
		if (v->dtype != t)
			return mc_node_error(n, "%s is %s but start is %s", names[k],
			                     mc_dtype_name(v->dtype), mc_dtype_name(t));
		if (mc_numel(&v->shape) != 1)
			return mc_node_error(n, "%s must be a scalar", names[k]);
		if (!v->konst)
			return mc_node_error(n, "%s ('%s') must be known at compile time (it sets the "
			                     "output length); pin the graph inputs it depends on",
			                     names[k], v->name);
	}
	int64_t count = 0;
	if (range_count(n, c->in[0]->konst, c->in[1]->konst, c->in[2]->konst, &count))
		return -1;
	mc_shape out = {.rank = 1, .dims = {count}};
	if (check_out_shape(n, &out))
		return -1;
	mc_set_out(c, 0, t, &out);
	return 0;
}

static int range_eval(mc_eval_ctx *c)
{
	if (!c->out[0])
		return 0; /* output omitted */
	mc_tensor *out = c->out[0];
	if (mc_dtype_is_int(out->dtype)) {
		/* start + i * delta stays between start and limit: no overflow */
		int64_t s = mc_get_i(c->in[0], 0), d = mc_get_i(c->in[2], 0);
		for (size_t i = 0; i < out->numel; i++)
			mc_set_i(out, i, s + (int64_t)i * d);
	} else {
		double s = mc_get_f(c->in[0], 0), d = mc_get_f(c->in[2], 0);
		for (size_t i = 0; i < out->numel; i++)
			mc_set_f(out, i, s + (double)i * d);
	}
	return 0;
}

/* ---- Expand ---- */

static int expand_infer(mc_infer_ctx *c)
{
	if (need_inputs(c, 1))
		return -1;
	const mc_node *n = c->node;
	int64_t dims[MC_MAX_RANK];
	size_t count;
	char a[256], b[256];
	if (check_data_dtype(c, 0) || mc_const_ints(c, 1, dims, MC_MAX_RANK, &count))
		return -1;
	mc_shape want = {.rank = (int)count}, out;
	for (size_t d = 0; d < count; d++) {
		if (dims[d] < 0)
			return mc_node_error(n, "shape entry %zu is negative (%lld)", d,
			                     (long long)dims[d]);
		want.dims[d] = dims[d];
	}
	if (!mc_broadcast(&c->in[0]->shape, &want, &out))
		return mc_node_error(n, "cannot broadcast %s to %s",
		                     mc_shape_str(&c->in[0]->shape, a, sizeof a),
		                     mc_shape_str(&want, b, sizeof b));
	if (check_out_shape(n, &out))
		return -1;
	mc_set_out(c, 0, c->in[0]->dtype, &out);
	return 0;
}

static int expand_eval(mc_eval_ctx *c)
{
	if (!c->out[0])
		return 0; /* output omitted */
	mc_tensor *out = c->out[0];
	int64_t stride[MC_MAX_RANK];
	if (!out->numel)
		return 0;
	mc_broadcast_strides(&c->in[0]->shape, &out->shape, stride);
	gather_elements(out, c->in[0], stride, out->shape.dims);
	return 0;
}

/* ---- Tile ---- */

static int tile_parse(mc_node *n)
{
	if (n->opset < 6 && n->n_inputs != 3)
		return mc_node_error(n, "takes 3 inputs (input, tiles, axis) before opset 6");
	if (n->opset >= 6 && n->n_inputs != 2)
		return mc_node_error(n, "takes 2 inputs (input, repeats)");
	return 0;
}

/* Repeats per dim: input 1 from opset 6; before, `tiles` copies along
 * the single `axis` (both scalar inputs). */
static int tile_repeats(mc_infer_ctx *c, int64_t rep[MC_MAX_RANK])
{
	const mc_node *n = c->node;
	int rank = c->in[0]->shape.rank;
	size_t count;
	if (n->opset < 6) {
		int64_t tiles, axis;
		int a;
		if (mc_const_ints(c, 1, &tiles, 1, &count) || mc_const_ints(c, 2, &axis, 1, &count))
			return -1;
		if (count != 1)
			return mc_node_error(n, "axis must be a scalar");
		if (mc_norm_axis(n, axis, rank, &a))
			return -1;
		for (int d = 0; d < rank; d++)
			rep[d] = d == a ? tiles : 1;
		return 0;
	}
	if (mc_const_ints(c, 1, rep, MC_MAX_RANK, &count))
		return -1;
	if (count != (size_t)rank)
		return mc_node_error(n, "repeats has %zu entries for an input of rank %d", count,
		                     rank);
	return 0;
}

static int tile_infer(mc_infer_ctx *c)
{
	if (need_inputs(c, 1))
		return -1;
	const mc_node *n = c->node;
	const mc_shape *ins = &c->in[0]->shape;
	int64_t rep[MC_MAX_RANK];
	if (check_data_dtype(c, 0) || tile_repeats(c, rep))
		return -1;
	mc_shape out = {.rank = ins->rank};
	for (int d = 0; d < ins->rank; d++) {
		size_t dim;
		if (rep[d] < 0)
			return mc_node_error(n, "repeat %d is negative (%lld)", d, (long long)rep[d]);
		if (!mc_mul_size((size_t)ins->dims[d], (size_t)rep[d], &dim) ||
		    dim > (size_t)INT64_MAX)
			return mc_node_error(n, "output dim %d is too large", d);
		out.dims[d] = (int64_t)dim;
	}
	if (check_out_shape(n, &out))
		return -1;
	mc_set_out(c, 0, c->in[0]->dtype, &out);
	return 0;
}

static int tile_eval(mc_eval_ctx *c)
{
	if (!c->out[0])
		return 0; /* output omitted */
	const mc_tensor *in = c->in[0];
	mc_tensor *out = c->out[0];
	int64_t stride[MC_MAX_RANK];
	if (!out->numel)
		return 0; /* also: no input dim is 0 below */
	mc_strides(&in->shape, stride);
	gather_elements(out, in, stride, in->shape.dims);
	return 0;
}

/* ---- EyeLike: depends only on the input's shape ---- */

static int eyelike_dtype(const mc_node *n, mc_dtype input, mc_dtype *out)
{
	int64_t t;
	if (mc_attr_int(n, "dtype", input, &t))
		return -1;
	if (t < 0 || t > INT_MAX || !mc_dtype_supported((mc_dtype)t))
		return mc_node_error(n, "dtype %lld is not supported", (long long)t);
	*out = (mc_dtype)t;
	return 0;
}

static int eyelike_infer(mc_infer_ctx *c)
{
	if (need_inputs(c, 1))
		return -1;
	const mc_node *n = c->node;
	int64_t k;
	mc_dtype t = c->in[0]->dtype;
	if (c->in[0]->shape.rank != 2)
		return mc_node_error(n, "input must be 2-D, got rank %d", c->in[0]->shape.rank);
	if (eyelike_dtype(n, c->in[0]->dtype, &t) || mc_attr_int(n, "k", 0, &k))
		return -1;
	mc_set_out(c, 0, t, &c->in[0]->shape);
	return 0;
}

static int eyelike_eval(mc_eval_ctx *c)
{
	if (!c->out[0])
		return 0; /* output omitted */
	mc_tensor *out = c->out[0];
	int64_t k, rows = out->shape.dims[0], cols = out->shape.dims[1];
	if (mc_attr_int(c->node, "k", 0, &k))
		return -1;
	/* ones where col = row + k; k beyond either side leaves all zeros */
	for (int64_t r = 0; r < rows; r++) {
		if (k < -r || k >= cols - r)
			continue;
		mc_set_i(out, (size_t)(r * cols + r + k), 1);
	}
	return 0;
}

/* ---- the table ---- */

static const mc_op op_reshape = {
	.name = "Reshape", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
	.parse = reshape_parse, .infer = reshape_infer, .eval = copy_eval,
};
static const mc_op op_flatten = {
	.name = "Flatten", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
	.infer = flatten_infer, .eval = copy_eval,
};
static const mc_op op_squeeze = {
	.name = "Squeeze", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
	.parse = squeeze_parse, .infer = squeeze_infer, .eval = copy_eval,
};
static const mc_op op_unsqueeze = {
	.name = "Unsqueeze", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
	.parse = unsqueeze_parse, .infer = unsqueeze_infer, .eval = copy_eval,
};
static const mc_op op_transpose = {
	.name = "Transpose", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
	.infer = transpose_infer, .eval = transpose_eval,
};
static const mc_op op_concat = {
	.name = "Concat", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = INT_MAX, .min_outputs = 1, .max_outputs = 1,
	.infer = concat_infer, .eval = concat_eval, .flags = MC_OP_VARIADIC,
};
static const mc_op op_split = {
	.name = "Split", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = INT_MAX,
	.parse = split_parse, .infer = split_infer, .eval = split_eval,
};
static const mc_op op_shape = {
	.name = "Shape", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
	.infer = shape_infer, .eval = shape_eval, .flags = MC_OP_SHAPE_ONLY,
};
static const mc_op op_size = {
	.name = "Size", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
	.infer = size_infer, .eval = size_eval, .flags = MC_OP_SHAPE_ONLY,
};
static const mc_op op_constantofshape = {
	.name = "ConstantOfShape", .min_opset = 9, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
	.parse = constantofshape_parse, .infer = constantofshape_infer,
	.eval = constantofshape_eval,
};
static const mc_op op_range = {
	.name = "Range", .min_opset = 11, .max_opset = MC_MAX_OPSET,
	.min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
	.infer = range_infer, .eval = range_eval,
};
static const mc_op op_expand = {
	.name = "Expand", .min_opset = 8, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
	.infer = expand_infer, .eval = expand_eval,
};
static const mc_op op_tile = {
	.name = "Tile", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
	.parse = tile_parse, .infer = tile_infer, .eval = tile_eval,
};
static const mc_op op_eyelike = {
	.name = "EyeLike", .min_opset = 9, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
	.infer = eyelike_infer, .eval = eyelike_eval, .flags = MC_OP_SHAPE_ONLY,
};

const mc_op *const mc_ops_tensor[] = {
	&op_reshape, &op_flatten, &op_squeeze, &op_unsqueeze, &op_transpose,
	&op_concat, &op_split, &op_shape, &op_size, &op_constantofshape,
	&op_range, &op_expand, &op_tile, &op_eyelike,
	NULL,
};
