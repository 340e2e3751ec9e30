/* Lowerings of the index family (see aot/aot.h: mc_lowering). The
 * geometry (Slice's starts, Pad's pads, Resize's scales) comes from the
 * registry's own plan builders (libcore/ops/index.h) over the compile-time
 * inputs. Indices read at run time (Gather, Scatter, ...) are checked in
 * the kernel: negative ones count from the end, and one out of range makes
 * the kernel return MC_STATUS_BAD_INDEX before anything reads through it.
 *
 * Ops computing each output element from its coordinates store it once
 * through mc_lower_store (fusable epilogue). The scatters copy the data,
 * then update it in a second pass: plain stores, no epilogue. */
#include <math.h>
#include <string.h>

#include "lower.h"
#include "../libcore/ops/index.h"

/* ---- shared helpers ---- */

/* Nothing to store: the output is omitted or has no elements (loops over
 * an empty dim would still print index arithmetic such as x % 0). */
static bool nothing_to_store(const mc_lower_ctx *c)
{
	return !c->out[0] || c->out_buf[0] < 0 || mc_numel(&c->out[0]->shape) == 0;
}

static mc_kexpr *i64(mc_kb *kb, int64_t v)
{
	return mc_k_int(kb, MC_KT_I64, v);
}

static mc_kexpr *f64(mc_kb *kb, double v)
{
	return mc_k_float(kb, MC_KT_F64, v);
}

static mc_kexpr *bin(mc_kb *kb, mc_kbinop op, mc_kexpr *a, mc_kexpr *b)
{
	return mc_k_bin(kb, op, a, b);
}

/* a && b where either may be NULL (true). */
static mc_kexpr *and_cond(mc_kb *kb, mc_kexpr *a, mc_kexpr *b)
{
	return !a ? b : !b ? a : bin(kb, MC_KB_AND, a, b);
}

/* x clamped into [lo, hi] on indices (min and max print their operands
 * twice: they are bound first). */
static mc_kexpr *clamp_index(mc_kb *kb, mc_kexpr *x, int64_t lo, int64_t hi)
{
	mc_kexpr *above = mc_kb_let(kb, bin(kb, MC_KB_MAX, mc_kb_let(kb, x), mc_k_index(kb, lo)));
	return bin(kb, MC_KB_MIN, above, mc_k_index(kb, hi));
}

/* An index read at run time (any integer compute type) into an axis of
 * size dim: negative counts from the end, out of range fails the kernel.
 * Compared in int64 before it becomes an index, so that no value wraps. */
static mc_kexpr *checked_index(mc_kb *kb, mc_kexpr *raw, int64_t dim)
{
	mc_kexpr *v = mc_kb_let(kb, mc_k_cast(kb, MC_KT_I64, raw));
	mc_kb_if(kb, bin(kb, MC_KB_OR, bin(kb, MC_KB_LT, v, i64(kb, -dim)),
	                 bin(kb, MC_KB_GE, v, i64(kb, dim))));
	mc_kb_fail(kb, MC_STATUS_BAD_INDEX);
	mc_kb_end(kb);
	mc_kexpr *fixed = mc_k_select(kb, bin(kb, MC_KB_LT, v, i64(kb, 0)),
	                              mc_k_add(kb, v, i64(kb, dim)), v);
	return mc_kb_let(kb, mc_k_cast(kb, MC_KT_INDEX, fixed));
}

/* Dims [lo, hi) of s as a shape of their own. */
static mc_shape sub_shape(const mc_shape *s, int lo, int hi)
{
	mc_shape r = {.rank = hi - lo};
	for (int d = lo; d < hi; d++)
		r.dims[d - lo] = s->dims[d];
	return r;
}

/* Opens loops over dims [lo, hi) of s into coords[at...]. */
static void open_loops(mc_kb *kb, const mc_shape *s, int lo, int hi, mc_kexpr **coords,
                       unsigned flags)
{
	for (int d = lo; d < hi; d++)
		coords[d - lo] = mc_kb_fori(kb, s->dims[d], flags);
}

/* ---- Slice ---- */
static int lower_slice(mc_lower_ctx *c)
{
	static const char *const names[4] = {"starts", "ends", "axes", "steps"};
	mc_kb *kb = c->kb;
	const mc_tensor *t[4] = {NULL, NULL, NULL, NULL};
	for (int i = 1; c->node->opset >= 10 && i < c->n_in && i <= 4; i++)
		if (c->in[i] && !(t[i - 1] = mc_lower_const(c, i)))
			return mc_lower_error(c, "Slice with %s known only at run time has no C lowering",
			                      names[i - 1]);
	slice_plan p;
	const mc_shape *is = &c->in[0]->shape;
	if (mc_slice_make_plan(c->node, is, t, &p))
		return -1;
	if (nothing_to_store(c))
		return 0;
	mc_kexpr *oc[MC_MAX_RANK], *ic[MC_MAX_RANK];
	mc_lower_loops(kb, &p.out, oc, MC_KF_PARALLEL);
	for (int d = 0; d < is->rank; d++)
		ic[d] = mc_k_addi(kb, mc_k_muli(kb, oc[d], p.step[d]), p.start[d]);
	mc_lower_store(c, 0, oc, NULL, mc_lower_load(c, 0, mc_lower_linear(kb, is, ic)));
	mc_kb_end_n(kb, p.out.rank);
	return 0;
}

/* ---- Gather: out[outer, j..., inner] = data[outer, indices[j...], inner] ---- */
static int lower_gather(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *ds = &c->in[0]->shape, *is = &c->in[1]->shape, *os = &c->out[0]->shape;
	int axis, ir = is->rank;
	if (mc_gather_axis(c->node, ds->rank, &axis))
		return -1;
	if (nothing_to_store(c))
		return 0;
	mc_kexpr *oc[MC_MAX_RANK], *ic[MC_MAX_RANK];
	open_loops(kb, ds, 0, axis, oc, MC_KF_PARALLEL);
	open_loops(kb, is, 0, ir, oc + axis, MC_KF_PARALLEL);
	/* on a grid, the index is read for every element: the loops then nest
	 * with nothing between them, one thread each (else a thread per index
	 * copies its whole row: bert4's [CLS] row, 256 copies in one thread) */
	bool grid = kb->target && kb->target->grid;
	if (grid)
		open_loops(kb, ds, axis + 1, ds->rank, oc + axis + ir, MC_KF_PARALLEL);
	mc_kexpr *k = checked_index(kb, mc_lower_load(c, 1, mc_lower_linear(kb, is, oc + axis)),
	                            ds->dims[axis]);
	if (!grid)
		open_loops(kb, ds, axis + 1, ds->rank, oc + axis + ir, MC_KF_PARALLEL);
	for (int d = 0; d < ds->rank; d++)
		ic[d] = d < axis ? oc[d] : d == axis ? k : oc[ir + d - 1];
	mc_lower_store(c, 0, oc, NULL, mc_lower_load(c, 0, mc_lower_linear(kb, ds, ic)));
	mc_kb_end_n(kb, os->rank);
	return 0;
}

/* ---- GatherElements: the indices replace the axis coordinate ---- */
static int lower_gather_elements(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *ds = &c->in[0]->shape, *is = &c->in[1]->shape;
	int axis;
	if (mc_gather_axis(c->node, ds->rank, &axis))
		return -1;
	if (nothing_to_store(c))
		return 0;
	mc_kexpr *oc[MC_MAX_RANK], *ic[MC_MAX_RANK];
	mc_lower_loops(kb, is, oc, MC_KF_PARALLEL);
	mc_kexpr *lin = mc_kb_let(kb, mc_lower_linear(kb, is, oc));
	memcpy(ic, oc, sizeof oc);
	ic[axis] = checked_index(kb, mc_lower_load(c, 1, lin), ds->dims[axis]);
	mc_lower_store(c, 0, oc, lin, mc_lower_load(c, 0, mc_lower_linear(kb, ds, ic)));
	mc_kb_end_n(kb, is->rank);
	return 0;
}

/* Offset in data (shape ds) of index tuple number t: k entries, checked,
 * for axes first..first+k-1; strides of ds. Shared with ScatterND. */
static mc_kexpr *nd_offset(mc_lower_ctx *c, mc_kexpr *t, int k, int first, const mc_shape *ds)
{
	mc_kb *kb = c->kb;
	int64_t stride[MC_MAX_RANK];
	mc_strides(ds, stride);
	mc_kexpr *off = mc_k_index(kb, 0);
	for (int j = 0; j < k; j++) {
		mc_kexpr *raw = mc_lower_load(c, 1, mc_k_addi(kb, mc_k_muli(kb, t, k), j));
		mc_kexpr *v = checked_index(kb, raw, ds->dims[first + j]);
		off = mc_k_add(kb, off, mc_k_muli(kb, v, stride[first + j]));
	}
	return off;
}

/* ---- GatherND ---- */
static int lower_gathernd(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *ds = &c->in[0]->shape, *is = &c->in[1]->shape, *os = &c->out[0]->shape;
	int b = mc_gathernd_batch(c->node), ir = is->rank;
	int k = (int)is->dims[ir - 1];
	if (nothing_to_store(c))
		return 0;
	mc_kexpr *oc[MC_MAX_RANK], *inner[MC_MAX_RANK];
	mc_shape tuples = sub_shape(is, 0, ir - 1), batch = sub_shape(ds, 0, b);
	mc_shape slice = sub_shape(ds, b + k, ds->rank);
	mc_shape per_batch = sub_shape(ds, b, ds->rank);
	open_loops(kb, is, 0, ir - 1, oc, MC_KF_PARALLEL);
	mc_kexpr *t = mc_kb_let(kb, mc_lower_linear(kb, &tuples, oc));
	/* the batch coordinates are the first b of the tuple's */
	mc_kexpr *base = mc_k_muli(kb, mc_lower_linear(kb, &batch, oc), (int64_t)mc_numel(&per_batch));
	mc_kexpr *off = mc_kb_let(kb, mc_k_add(kb, base, nd_offset(c, t, k, b, ds)));
	open_loops(kb, ds, b + k, ds->rank, inner, MC_KF_PARALLEL);
	memcpy(oc + ir - 1, inner, sizeof *inner * (size_t)slice.rank);
	mc_kexpr *src = mc_k_add(kb, off, mc_lower_linear(kb, &slice, inner));
	mc_lower_store(c, 0, oc, NULL, mc_lower_load(c, 0, src));
	mc_kb_end_n(kb, os->rank);
	return 0;
}

/* ---- Scatter, ScatterElements, ScatterND: copy, then update ---- */

/* reduce(a, b) in the data's compute type, as the reference: floats let a
 * NaN update win max/min; integers wrap; bools are 0/1 (add = or). */
static mc_kexpr *scatter_combine(mc_kb *kb, int red, mc_kexpr *a, mc_kexpr *b)
{
	if (red == RED_NONE)
		return b;
	mc_ktype t = a->type;
	if (t == MC_KT_BOOL)
		return bin(kb, red == RED_ADD || red == RED_MAX ? MC_KB_MAX : MC_KB_MIN, a, b);
	if (mc_ktype_is_float(t) && (red == RED_MAX || red == RED_MIN)) {
		mc_kexpr *better = bin(kb, red == RED_MAX ? MC_KB_GT : MC_KB_LT, b, a);
		return mc_k_select(kb, bin(kb, MC_KB_OR, better, mc_k_un(kb, MC_KU_ISNAN, b)), b, a);
	}
	switch (red) {
	case RED_ADD: return mc_k_add(kb, a, b);
	case RED_MUL: return mc_k_mul(kb, a, b);
	case RED_MAX: return bin(kb, MC_KB_MAX, a, b);
	default: return bin(kb, MC_KB_MIN, a, b);
	}
}

/* out = data, element by element (the first pass). */
static void scatter_copy(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	mc_kexpr *i = mc_kb_fori(kb, (int64_t)mc_numel(&c->out[0]->shape),
	                         MC_KF_PARALLEL | MC_KF_VECTOR);
	mc_kb_store(kb, c->out_buf[0], i, mc_lower_load(c, 0, i));
	mc_kb_end(kb);
}

/* out[at] = reduce(out[at], update). */
static void scatter_update(mc_lower_ctx *c, int red, mc_kexpr *at, mc_kexpr *update)
{
	mc_kb *kb = c->kb;
	at = mc_kb_let(kb, at);
	mc_kexpr *old = red == RED_NONE ? NULL : mc_k_load(kb, c->out_buf[0], at);
	mc_kb_store(kb, c->out_buf[0], at, scatter_combine(kb, red, old, update));
}

/* The updates loops run in order: with repeated indices the last update
 * (or the reduction over them in index order) must win. */
static int lower_scatter_elements(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *ds = &c->in[0]->shape, *is = &c->in[1]->shape;
	int axis, red;
	if (mc_gather_axis(c->node, ds->rank, &axis) || mc_parse_reduction(c->node, &red))
		return -1;
	if (nothing_to_store(c))
		return 0;
	scatter_copy(c);
	if (mc_numel(is) == 0)
		return 0;
	mc_kexpr *oc[MC_MAX_RANK], *tc[MC_MAX_RANK];
	mc_lower_loops(kb, is, oc, 0);
	mc_kexpr *lin = mc_kb_let(kb, mc_lower_linear(kb, is, oc));
	memcpy(tc, oc, sizeof oc);
	tc[axis] = checked_index(kb, mc_lower_load(c, 1, lin), ds->dims[axis]);
	scatter_update(c, red, mc_lower_linear(kb, ds, tc), mc_lower_load(c, 2, lin));
	mc_kb_end_n(kb, is->rank);
	return 0;
}

static int lower_scatternd(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *ds = &c->in[0]->shape, *is = &c->in[1]->shape;
	int red, ir = is->rank;
	int k = (int)is->dims[ir - 1];
	if (mc_parse_reduction(c->node, &red))
		return -1;
	if (nothing_to_store(c))
		return 0;
	scatter_copy(c);
	mc_shape tuples = sub_shape(is, 0, ir - 1), slice = sub_shape(ds, k, ds->rank);
	int64_t n_slice = (int64_t)mc_numel(&slice);
	if (mc_numel(&tuples) == 0 || n_slice == 0)
		return 0;
	mc_kexpr *oc[MC_MAX_RANK];
	mc_lower_loops(kb, &tuples, oc, 0);
	mc_kexpr *t = mc_kb_let(kb, mc_lower_linear(kb, &tuples, oc));
	mc_kexpr *off = mc_kb_let(kb, nd_offset(c, t, k, 0, ds));
	mc_kexpr *e = mc_kb_fori(kb, n_slice, 0);
	mc_kexpr *update = mc_lower_load(c, 2, mc_k_add(kb, mc_k_muli(kb, t, n_slice), e));
	scatter_update(c, red, mc_k_add(kb, off, e), update);
	mc_kb_end_n(kb, tuples.rank + 1);
	return 0;
}

/* ---- Pad ---- */

/* Source position along one axis for output position o (an index), and
 * *inside, the condition for reading it (NULL: always); constant mode
 * reads a clamped position where it stores the fill value. */
static mc_kexpr *pad_axis(mc_kb *kb, const pad_plan *p, int d, int64_t dim, mc_kexpr *o,
                          mc_kexpr **inside)
{
	int64_t b = p->begin[d], e = p->end[d];
	int64_t crop = b < 0 ? -b : 0, kept = dim - crop - (e < 0 ? -e : 0);
	int64_t lead = b > 0 ? b : 0, trail = e > 0 ? e : 0;
	*inside = NULL;
	if (lead == 0 && trail == 0)
		return mc_k_addi(kb, o, crop);
	mc_kexpr *i = lead ? mc_kb_let(kb, mc_k_addi(kb, o, -lead)) : o; /* in the cropped axis */
	switch (p->mode) {
	case PAD_CONSTANT:
		if (kept == 0) {
			*inside = mc_k_int(kb, MC_KT_BOOL, 0);
			return mc_k_index(kb, 0);
		}
		if (lead)
			*inside = bin(kb, MC_KB_GE, i, mc_k_index(kb, 0));
		if (trail)
			*inside = and_cond(kb, *inside, bin(kb, MC_KB_LT, i, mc_k_index(kb, kept)));
		*inside = mc_kb_let(kb, *inside);
		return mc_k_addi(kb, clamp_index(kb, i, 0, kept - 1), crop);
	case PAD_EDGE:
		return mc_k_addi(kb, clamp_index(kb, i, 0, kept - 1), crop);
	case PAD_WRAP: {
		mc_kexpr *k = mc_k_index(kb, kept);
		mc_kexpr *r = bin(kb, MC_KB_REM, mc_k_add(kb, bin(kb, MC_KB_REM, i, k), k), k);
		return mc_k_addi(kb, r, crop);
	}
	default: { /* reflect */
		if (kept == 1)
			return mc_k_index(kb, crop);
		int64_t period = 2 * (kept - 1);
		mc_kexpr *pe = mc_k_index(kb, period);
		mc_kexpr *j = mc_kb_let(kb, bin(kb, MC_KB_REM, mc_k_add(kb, bin(kb, MC_KB_REM, i, pe), pe),
		                                pe));
		mc_kexpr *r = mc_k_select(kb, bin(kb, MC_KB_LT, j, mc_k_index(kb, kept)), j,
		                          mc_k_sub(kb, pe, j));
		return mc_k_addi(kb, r, crop);
	}
	}
}

/* The value of padded positions, in the data's compute type. */
static int pad_fill(mc_lower_ctx *c, mc_kexpr **fill)
{
	mc_kb *kb = c->kb;
	mc_ktype t = mc_ktype_of(c->in[0]->dtype);
	if (c->node->opset >= 11) {
		bool given = c->n_in > 2 && c->in[2] && mc_numel(&c->in[2]->shape) == 1;
		*fill = given ? mc_kb_let(kb, mc_lower_load(c, 2, mc_k_index(kb, 0)))
		              : mc_k_const_as(kb, t, 0);
		return 0;
	}
	double v;
	if (mc_attr_float(c->node, "value", 0, &v))
		return -1;
	*fill = mc_k_const_as(kb, t, v);
	return 0;
}

static int lower_pad(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *is = &c->in[0]->shape;
	const mc_tensor *pads = NULL, *axes = NULL;
	if (c->node->opset >= 11) {
		pads = mc_lower_const(c, 1);
		axes = c->n_in > 3 && c->in[3] ? mc_lower_const(c, 3) : NULL;
		if (!pads || (c->n_in > 3 && c->in[3] && !axes))
			return mc_lower_error(c, "Pad with pads or axes known only at run time has no C "
			                      "lowering");
	}
	pad_plan p;
	mc_kexpr *fill = NULL; /* constant mode only: other modes read inside */
	if (mc_pad_make_plan(c->node, is, pads, axes, &p))
		return -1;
	if (nothing_to_store(c))
		return 0;
	if (p.mode == PAD_CONSTANT && pad_fill(c, &fill))
		return -1;
	mc_kexpr *oc[MC_MAX_RANK], *ic[MC_MAX_RANK], *inside = NULL;
	for (int d = 0; d < is->rank; d++) {
		mc_kexpr *in_d;
		oc[d] = mc_kb_fori(kb, p.out.dims[d], MC_KF_PARALLEL);
		ic[d] = pad_axis(kb, &p, d, is->dims[d], oc[d], &in_d);
		inside = and_cond(kb, inside, in_d);
	}
	mc_kexpr *v = mc_numel(is) ? mc_lower_load(c, 0, mc_lower_linear(kb, is, ic)) : fill;
	if (inside)
		v = mc_k_select(kb, inside, v, fill);
	mc_lower_store(c, 0, oc, NULL, v);
	mc_kb_end_n(kb, is->rank);
	return 0;
}

/* ---- Resize / Upsample ----
 * Each output coordinate maps to a real input coordinate x along each
 * axis, computed in f64 with the reference's operations in the
 * reference's order (libcore/ops/index.c: resize_coord, resize_coeffs,
 * resize_window), so that the kernel picks the same taps and weights;
 * the weighted sum accumulates in the data's compute type (f64 for
 * integers, which truncate on store like the reference). Axes the resize
 * leaves alone read their own coordinate. */

#define RESIZE_MAX_TAPS 4096 /* as the reference: more is refused */

typedef struct {
	bool identity;      /* reads its own coordinate */
	int64_t taps;
	bool loop;          /* antialias: taps in a loop, weights from coef() */
	mc_kexpr *src[4];   /* fixed taps: clamped source positions */
	mc_kexpr *w[4];     /* fixed taps: f64 weights */
	mc_kexpr *first;    /* position of tap 0 before clamping (index) */
	mc_kexpr *ratio;    /* fraction of x in (0, 1] (f64) */
	mc_kexpr *norm, *renorm; /* loop form: sum of coefs, exclude_outside's sum */
	mc_kexpr *outside;  /* tf_crop_and_resize: x off the axis (bool), or NULL */
	double shrink;      /* min(scale, 1): the antialias filter's stretch */
	int64_t in;
} rs_axis;

typedef struct {
	mc_lower_ctx *c;
	resize_attrs a;
	resize_plan p;
	bool roi_const;
	double r0[MC_MAX_RANK], r1[MC_MAX_RANK];
	int roi_at[MC_MAX_RANK];  /* position of the axis in roi, -1: none */
} rs_ctx;

/* The reference leaves an axis alone (weight 1 at its own position) when
 * its scale is 1 and the coordinate mapping is the identity. */
static bool resize_identity(const rs_ctx *r, int d, int64_t in)
{
	const resize_attrs *a = &r->a;
	if (r->p.scale[d] != 1 || r->p.width[d] != (double)in)
		return false;
	switch (a->coord) {
	case CT_TF_HALF_PIXEL_FOR_NN:
		return false;
	case CT_TF_CROP_AND_RESIZE:
		return r->roi_const && r->r0[d] == 0 && r->r1[d] == 1;
	case CT_PYTORCH_HALF_PIXEL: /* one element at x = -0.5: weights sum to 1 */
		return in > 1 || a->mode != RS_CUBIC;
	default:
		return true;
	}
}

/* roi bound (0: start, 1: end) of axis d as f64. */
static mc_kexpr *roi_value(rs_ctx *r, int d, int end)
{
	mc_kb *kb = r->c->kb;
	if (r->roi_const || r->roi_at[d] < 0)
		return f64(kb, end ? r->r1[d] : r->r0[d]);
	int at = r->roi_at[d] + (end ? r->p.n_axes : 0);
	return mc_k_cast(kb, MC_KT_F64, mc_lower_load(r->c, 1, mc_k_index(kb, at)));
}

/* resize_coord: the input coordinate of output position o along axis d. */
static mc_kexpr *resize_x(rs_ctx *r, int d, mc_kexpr *o, int64_t in, rs_axis *ax)
{
	mc_kb *kb = r->c->kb;
	double scale = r->p.scale[d], width = r->p.width[d], len = (double)(in - 1);
	mc_kexpr *xf = mc_k_cast(kb, MC_KT_F64, o);
	mc_kexpr *half = mc_k_div(kb, mc_k_add(kb, xf, f64(kb, 0.5)), f64(kb, scale));
	switch (r->a.coord) {
	case CT_HALF_PIXEL_SYMMETRIC: {
		double adjust = (double)r->p.out.dims[d] / width, center = (double)in / 2;
		mc_kexpr *x = mc_k_add(kb, f64(kb, center * (1 - adjust)), half);
		return mc_k_sub(kb, x, f64(kb, 0.5));
	}
	case CT_PYTORCH_HALF_PIXEL:
		return width == 1 ? f64(kb, -0.5) : mc_k_sub(kb, half, f64(kb, 0.5));
	case CT_ALIGN_CORNERS:
		return width == 1 ? f64(kb, 0)
		                  : mc_k_div(kb, mc_k_mul(kb, xf, f64(kb, len)), f64(kb, width - 1));
	case CT_ASYMMETRIC:
		return mc_k_div(kb, xf, f64(kb, scale));
	case CT_TF_HALF_PIXEL_FOR_NN:
		return half;
	case CT_TF_CROP_AND_RESIZE: {
		mc_kexpr *r0 = mc_kb_let(kb, roi_value(r, d, 0)), *r1 = roi_value(r, d, 1);
		mc_kexpr *span = mc_k_sub(kb, r1, r0), *x;
		if (width == 1)
			x = mc_k_div(kb, mc_k_mul(kb, span, f64(kb, len)), f64(kb, 2));
		else
			x = mc_k_div(kb, mc_k_mul(kb, mc_k_mul(kb, xf, span), f64(kb, len)),
			             f64(kb, width - 1));
		x = mc_kb_let(kb, mc_k_add(kb, x, mc_k_mul(kb, r0, f64(kb, len))));
		ax->outside = mc_kb_let(kb, bin(kb, MC_KB_OR, bin(kb, MC_KB_LT, x, f64(kb, 0)),
		                                bin(kb, MC_KB_GT, x, f64(kb, len))));
		return x;
	}
	default: /* half_pixel */
		return mc_k_sub(kb, half, f64(kb, 0.5));
	}
}

/* resize_window: the first of the n positions nearest to x (ties to the
 * lower), in the axis padded by ceil(n/2) on each side. It is
 * clamp(ceil(x + pad) - n/2, 0, in + 2 pad - n) - pad, NaN and values
 * beyond the padded axis included. */
static mc_kexpr *resize_first(mc_kb *kb, mc_kexpr *x, int64_t n, int64_t in)
{
	int64_t pad = (n + 1) / 2, len = in + 2 * pad;
	mc_kexpr *xp = mc_kb_let(kb, mc_k_add(kb, x, f64(kb, (double)pad)));
	mc_kexpr *xs = mc_kb_let(kb, mc_k_select(kb, bin(kb, MC_KB_GE, xp, f64(kb, 0)), xp, f64(kb, 0)));
	xs = mc_k_select(kb, bin(kb, MC_KB_LT, xs, f64(kb, (double)len)), xs, f64(kb, (double)len));
	mc_kexpr *f = mc_k_addi(kb, mc_k_cast(kb, MC_KT_INDEX, mc_k_un(kb, MC_KU_CEIL, xs)), -(n / 2));
	return mc_kb_let(kb, mc_k_addi(kb, clamp_index(kb, f, 0, len - n), -pad));
}

/* The cubic weight at distance r + 1 (far taps) or r (near taps), written
 * as resize_coeffs and cubic_kernel write it. */
static mc_kexpr *cubic_far(mc_kb *kb, mc_kexpr *r, double A)
{
	mc_kexpr *t = mc_k_sub(kb, mc_k_mul(kb, f64(kb, A), r), f64(kb, 5 * A));
	t = mc_k_add(kb, mc_k_mul(kb, t, r), f64(kb, 8 * A));
	return mc_k_sub(kb, mc_k_mul(kb, t, r), f64(kb, 4 * A));
}

static mc_kexpr *cubic_near(mc_kb *kb, mc_kexpr *r, double A)
{
	mc_kexpr *t = mc_k_sub(kb, mc_k_mul(kb, f64(kb, A + 2), r), f64(kb, A + 3));
	return mc_k_add(kb, mc_k_mul(kb, mc_k_mul(kb, t, r), r), f64(kb, 1));
}

/* cubic_kernel: the weight at distance |x|. */
static mc_kexpr *cubic_weight(mc_kb *kb, mc_kexpr *x, double A)
{
	x = mc_kb_let(kb, mc_k_un(kb, MC_KU_ABS, x));
	return mc_k_select(kb, bin(kb, MC_KB_LE, x, f64(kb, 1)), cubic_near(kb, x, A),
	                   mc_k_select(kb, bin(kb, MC_KB_LT, x, f64(kb, 2)), cubic_far(kb, x, A),
	                               f64(kb, 0)));
}

/* Loop form (antialias): the filter's coefficient of tap t (an index). */
static mc_kexpr *resize_coef(const rs_ctx *r, const rs_axis *ax, mc_kexpr *t)
{
	mc_kb *kb = r->c->kb;
	int64_t first = 1 - ax->taps / 2;
	mc_kexpr *dist = mc_k_sub(kb, mc_k_cast(kb, MC_KT_F64, mc_k_addi(kb, t, first)), ax->ratio);
	if (r->a.mode == RS_LINEAR) {
		mc_kexpr *v = mc_kb_let(kb, mc_k_sub(kb, f64(kb, 1), mc_k_un(kb, MC_KU_ABS,
		                        mc_k_mul(kb, dist, f64(kb, ax->shrink)))));
		return mc_k_select(kb, bin(kb, MC_KB_LT, v, f64(kb, 0)), f64(kb, 0), v);
	}
	return cubic_weight(kb, mc_k_mul(kb, f64(kb, ax->shrink), dist), r->a.cubic_a);
}

/* Tap t's position lies inside the axis (exclude_outside). */
static mc_kexpr *tap_inside(mc_kb *kb, const rs_axis *ax, mc_kexpr *pos)
{
	return bin(kb, MC_KB_AND, bin(kb, MC_KB_GE, pos, mc_k_index(kb, 0)),
	           bin(kb, MC_KB_LT, pos, mc_k_index(kb, ax->in)));
}

/* Loop form: the weight of tap t normalised by ax->norm, zero outside the
 * axis with exclude_outside. */
static mc_kexpr *resize_loop_kept(const rs_ctx *r, const rs_axis *ax, mc_kexpr *t)
{
	mc_kb *kb = r->c->kb;
	mc_kexpr *w = mc_k_div(kb, resize_coef(r, ax, t), ax->norm);
	if (!r->a.exclude_outside)
		return w;
	return mc_k_select(kb, tap_inside(kb, ax, mc_k_add(kb, ax->first, t)), w, f64(kb, 0));
}

/* ... and renormalised by ax->renorm, the sum of the kept weights. */
static mc_kexpr *resize_loop_weight(const rs_ctx *r, const rs_axis *ax, mc_kexpr *t)
{
	mc_kb *kb = r->c->kb;
	mc_kexpr *w = resize_loop_kept(r, ax, t);
	if (!ax->renorm)
		return w;
	w = mc_kb_let(kb, w);
	return mc_k_select(kb, bin(kb, MC_KB_NE, ax->renorm, f64(kb, 0)), mc_k_div(kb, w, ax->renorm), w);
}

/* Sums, in tap order, of the coefficients (and of the weights that stay
 * with exclude_outside), as resize_coeffs and resize_axis_build do. */
static void resize_loop_norms(const rs_ctx *r, rs_axis *ax)
{
	mc_kb *kb = r->c->kb;
	mc_kexpr *sum = mc_kb_local(kb, f64(kb, 0));
	mc_kexpr *t = mc_kb_fori(kb, ax->taps, MC_KF_REDUCE);
	mc_kb_assign(kb, sum, mc_k_add(kb, sum, resize_coef(r, ax, t)));
	mc_kb_end(kb);
	ax->norm = sum;
	ax->renorm = NULL;
	if (!r->a.exclude_outside)
		return;
	mc_kexpr *kept = mc_kb_local(kb, f64(kb, 0));
	t = mc_kb_fori(kb, ax->taps, MC_KF_REDUCE);
	mc_kb_assign(kb, kept, mc_k_add(kb, kept, resize_loop_kept(r, ax, t)));
	mc_kb_end(kb);
	ax->renorm = kept;
}

/* Fixed taps (no antialias): the weights of resize_coeffs, zeroed outside
 * the axis and renormalised with exclude_outside. */
static void resize_fixed_weights(const rs_ctx *r, rs_axis *ax)
{
	mc_kb *kb = r->c->kb;
	mc_kexpr *ratio = ax->ratio;
	double A = r->a.cubic_a;
	if (r->a.mode == RS_LINEAR) {
		ax->w[0] = mc_k_sub(kb, f64(kb, 1), ratio);
		ax->w[1] = ratio;
	} else {
		mc_kexpr *q = mc_kb_let(kb, mc_k_sub(kb, f64(kb, 1), ratio));
		ax->w[0] = cubic_far(kb, mc_k_add(kb, ratio, f64(kb, 1)), A);
		ax->w[1] = cubic_near(kb, ratio, A);
		ax->w[2] = cubic_near(kb, q, A);
		ax->w[3] = cubic_far(kb, mc_k_add(kb, q, f64(kb, 1)), A);
	}
	for (int k = 0; k < ax->taps; k++)
		ax->w[k] = mc_kb_let(kb, ax->w[k]);
	if (!r->a.exclude_outside)
		return;
	mc_kexpr *sum = NULL;
	for (int k = 0; k < ax->taps; k++) {
		mc_kexpr *in = tap_inside(kb, ax, mc_k_addi(kb, ax->first, k));
		ax->w[k] = mc_kb_let(kb, mc_k_select(kb, in, ax->w[k], f64(kb, 0)));
		sum = sum ? mc_k_add(kb, sum, ax->w[k]) : ax->w[k];
	}
	sum = mc_kb_let(kb, sum);
	mc_kexpr *nonzero = mc_kb_let(kb, bin(kb, MC_KB_NE, sum, f64(kb, 0)));
	for (int k = 0; k < ax->taps; k++)
		ax->w[k] = mc_kb_let(kb, mc_k_select(kb, nonzero, mc_k_div(kb, ax->w[k], sum), ax->w[k]));
}

/* Nearest: which of the two taps (resize_coeffs' `up`). */
static mc_kexpr *nearest_up(const rs_ctx *r, int d, mc_kexpr *ratio)
{
	mc_kb *kb = r->c->kb;
	mc_kexpr *whole = bin(kb, MC_KB_EQ, ratio, f64(kb, 1));
	switch (r->a.nearest) {
	case NR_ROUND_PREFER_FLOOR: return bin(kb, MC_KB_GT, ratio, f64(kb, 0.5));
	case NR_ROUND_PREFER_CEIL: return bin(kb, MC_KB_GE, ratio, f64(kb, 0.5));
	case NR_FLOOR: return whole;
	case NR_CEIL: return mc_k_int(kb, MC_KT_BOOL, 1);
	default: return r->p.scale[d] < 1 ? mc_k_int(kb, MC_KT_BOOL, 1) : whole;
	}
}

/* Everything about axis d that depends only on its output position o,
 * emitted inside o's loop. */
static int resize_axis_setup(rs_ctx *r, int d, mc_kexpr *o, rs_axis *ax)
{
	mc_kb *kb = r->c->kb;
	int64_t in = r->c->in[0]->shape.dims[d];
	memset(ax, 0, sizeof *ax);
	ax->in = in;
	if (resize_identity(r, d, in)) {
		ax->identity = true;
		ax->src[0] = o;
		return 0;
	}
	double taps = mc_resize_taps(&r->a, r->p.scale[d]);
	if (!(taps >= 1 && taps <= RESIZE_MAX_TAPS))
		return mc_lower_error(r->c, "axis %d: %g filter taps per output value is too many "
		                      "(scale %g)", d, taps, r->p.scale[d]);
	ax->taps = (int64_t)taps;
	ax->shrink = r->p.scale[d] < 1 ? r->p.scale[d] : 1;
	mc_kexpr *x = mc_kb_let(kb, resize_x(r, d, o, in, ax));
	mc_kexpr *fl = mc_kb_let(kb, mc_k_un(kb, MC_KU_FLOOR, x));
	ax->ratio = mc_kb_let(kb, mc_k_select(kb, bin(kb, MC_KB_EQ, x, fl), f64(kb, 1),
	                                      mc_k_sub(kb, x, fl)));
	ax->first = resize_first(kb, x, ax->taps, in);
	if (r->a.mode == RS_NEAREST) {
		mc_kexpr *up = nearest_up(r, d, ax->ratio);
		mc_kexpr *pos = mc_k_add(kb, ax->first, mc_k_select(kb, up, mc_k_index(kb, 1),
		                                                     mc_k_index(kb, 0)));
		ax->src[0] = mc_kb_let(kb, clamp_index(kb, pos, 0, in - 1));
		return 0;
	}
	if (r->a.antialias) {
		ax->loop = true;
		resize_loop_norms(r, ax);
		return 0;
	}
	for (int k = 0; k < ax->taps; k++)
		ax->src[k] = mc_kb_let(kb, clamp_index(kb, mc_k_addi(kb, ax->first, k), 0, in - 1));
	resize_fixed_weights(r, ax);
	return 0;
}

/* acc += (product of the weights of every resized axis at taps t[]) *
 * x[sources], over every combination of taps, the last axis fastest (the
 * reference's order). Fixed taps unroll; antialias taps loop. */
static void resize_accumulate(rs_ctx *r, const rs_axis *ax, int d, mc_kexpr *w,
                              mc_kexpr **src, mc_kexpr *acc)
{
	mc_kb *kb = r->c->kb;
	const mc_shape *is = &r->c->in[0]->shape;
	if (d == is->rank) {
		mc_kexpr *x = mc_k_cast(kb, acc->type, mc_lower_load(r->c, 0, mc_lower_linear(kb, is, src)));
		mc_kexpr *term = w ? mc_k_mul(kb, mc_k_cast(kb, acc->type, w), x) : x;
		mc_kb_assign(kb, acc, mc_k_add(kb, acc, term));
		return;
	}
	const rs_axis *a = &ax[d];
	if (a->identity) {
		src[d] = a->src[0];
		resize_accumulate(r, ax, d + 1, w, src, acc);
		return;
	}
	if (a->loop) {
		mc_kexpr *t = mc_kb_fori(kb, a->taps, MC_KF_REDUCE);
		mc_kexpr *wt = mc_kb_let(kb, resize_loop_weight(r, a, t));
		src[d] = clamp_index(kb, mc_k_add(kb, a->first, t), 0, a->in - 1);
		resize_accumulate(r, ax, d + 1, w ? mc_kb_let(kb, mc_k_mul(kb, w, wt)) : wt, src, acc);
		mc_kb_end(kb);
		return;
	}
	for (int k = 0; k < a->taps; k++) {
		src[d] = a->src[k];
		resize_accumulate(r, ax, d + 1, w ? mc_k_mul(kb, w, a->w[k]) : a->w[k], src, acc);
	}
}

/* The compile-time inputs of the plan (scales, sizes) and the roi. */
static int resize_prepare(rs_ctx *r)
{
	mc_lower_ctx *c = r->c;
	const mc_node *n = c->node;
	int si, zi;
	if (mc_resize_read_attrs(n, &r->a))
		return -1;
	mc_resize_inputs(n, c->n_in, &si, &zi);
	const mc_tensor *scales = si >= 0 ? mc_lower_const(c, si) : NULL;
	const mc_tensor *sizes = zi >= 0 ? mc_lower_const(c, zi) : NULL;
	if ((si >= 0 && c->in[si] && mc_numel(&c->in[si]->shape) && !scales) ||
	    (zi >= 0 && c->in[zi] && mc_numel(&c->in[zi]->shape) && !sizes))
		return mc_lower_error(c, "Resize with scales or sizes known only at run time has no C "
		                      "lowering");
	if (mc_resize_make_plan(n, &r->a, &c->in[0]->shape, scales, sizes, &r->p))
		return -1;
	int rank = c->in[0]->shape.rank;
	for (int d = 0; d < rank; d++) {
		r->r0[d] = 0;
		r->r1[d] = 1;
		r->roi_at[d] = -1;
	}
	r->roi_const = true;
	if (r->a.coord != CT_TF_CROP_AND_RESIZE)
		return 0;
	const mc_tensor *roi = mc_lower_const(c, 1);
	if (c->n_in < 2 || !c->in[1] || mc_numel(&c->in[1]->shape) != 2 * (size_t)r->p.n_axes)
		return mc_lower_error(c, "tf_crop_and_resize needs roi with %d values",
		                      2 * r->p.n_axes);
	r->roi_const = roi != NULL;
	for (int i = 0; i < r->p.n_axes; i++) {
		int d = r->p.axes[i];
		r->roi_at[d] = i;
		if (roi) {
			r->r0[d] = mc_get_f(roi, (size_t)i);
			r->r1[d] = mc_get_f(roi, (size_t)(r->p.n_axes + i));
		}
	}
	return 0;
}

static int lower_resize(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	rs_ctx r = {.c = c};
	if (resize_prepare(&r))
		return -1;
	if (nothing_to_store(c))
		return 0;
	const mc_shape *is = &c->in[0]->shape, *os = &c->out[0]->shape;
	rs_axis ax[MC_MAX_RANK];
	mc_kexpr *oc[MC_MAX_RANK], *src[MC_MAX_RANK], *outside = NULL;
	for (int d = 0; d < os->rank; d++) {
		oc[d] = mc_kb_fori(kb, os->dims[d], MC_KF_PARALLEL);
		if (resize_axis_setup(&r, d, oc[d], &ax[d]))
			return -1;
		if (ax[d].outside)
			outside = outside ? bin(kb, MC_KB_OR, outside, ax[d].outside) : ax[d].outside;
	}
	mc_ktype dt = mc_ktype_of(c->in[0]->dtype);
	mc_kexpr *v;
	if (r.a.mode == RS_NEAREST) {
		for (int d = 0; d < is->rank; d++)
			src[d] = ax[d].src[0];
		v = mc_lower_load(c, 0, mc_lower_linear(kb, is, src));
	} else {
		mc_ktype at = mc_ktype_is_float(dt) ? dt : MC_KT_F64;
		v = mc_kb_local(kb, mc_k_float(kb, at, 0));
		resize_accumulate(&r, ax, 0, NULL, src, v);
	}
	if (outside)
		v = mc_k_select(kb, outside, mc_k_const_as(kb, v->type, r.a.extrapolation), v);
	mc_lower_store(c, 0, oc, NULL, v);
	mc_kb_end_n(kb, os->rank);
	return 0;
}

/* ---- DepthToSpace / SpaceToDepth ----
 * wide[n, c, h*b+i, w*b+j] <-> deep[n, depth(c, i, j), h, w]; the loops run
 * over the output in its own order, so no division is needed. */
static int lower_depth_to_space(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *is = &c->in[0]->shape, *os = &c->out[0]->shape;
	int64_t b;
	bool crd;
	if (mc_attr_int(c->node, "blocksize", 0, &b) || mc_d2s_crd(c->node, &crd))
		return -1;
	if (nothing_to_store(c))
		return 0;
	int64_t C = os->dims[1], H = is->dims[2], W = is->dims[3];
	mc_kexpr *n = mc_kb_fori(kb, os->dims[0], MC_KF_PARALLEL);
	mc_kexpr *ch = mc_kb_fori(kb, C, MC_KF_PARALLEL);
	mc_kexpr *h = mc_kb_fori(kb, H, MC_KF_PARALLEL);
	mc_kexpr *i = mc_kb_fori(kb, b, MC_KF_PARALLEL);
	mc_kexpr *w = mc_kb_fori(kb, W, MC_KF_PARALLEL);
	mc_kexpr *j = mc_kb_fori(kb, b, MC_KF_PARALLEL);
	mc_kexpr *depth = crd ? mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, ch, b), i), b), j)
	                      : mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, i, b), j), C), ch);
	mc_kexpr *ic[4] = {n, depth, h, w};
	mc_kexpr *oc[4] = {n, ch, mc_k_add(kb, mc_k_muli(kb, h, b), i),
	                   mc_k_add(kb, mc_k_muli(kb, w, b), j)};
	mc_lower_store(c, 0, oc, NULL, mc_lower_load(c, 0, mc_lower_linear(kb, is, ic)));
	mc_kb_end_n(kb, 6);
	return 0;
}

static int lower_space_to_depth(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *is = &c->in[0]->shape, *os = &c->out[0]->shape;
	int64_t b;
	if (mc_attr_int(c->node, "blocksize", 0, &b))
		return -1;
	if (nothing_to_store(c))
		return 0;
	int64_t C = is->dims[1];
	mc_kexpr *n = mc_kb_fori(kb, os->dims[0], MC_KF_PARALLEL);
	mc_kexpr *i = mc_kb_fori(kb, b, MC_KF_PARALLEL);
	mc_kexpr *j = mc_kb_fori(kb, b, MC_KF_PARALLEL);
	mc_kexpr *ch = mc_kb_fori(kb, C, MC_KF_PARALLEL);
	mc_kexpr *h = mc_kb_fori(kb, os->dims[2], MC_KF_PARALLEL);
	mc_kexpr *w = mc_kb_fori(kb, os->dims[3], MC_KF_PARALLEL);
	mc_kexpr *depth = mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, i, b), j), C), ch);
	mc_kexpr *oc[4] = {n, depth, h, w};
	mc_kexpr *ic[4] = {n, ch, mc_k_add(kb, mc_k_muli(kb, h, b), i),
	                   mc_k_add(kb, mc_k_muli(kb, w, b), j)};
	mc_lower_store(c, 0, oc, NULL, mc_lower_load(c, 0, mc_lower_linear(kb, is, ic)));
	mc_kb_end_n(kb, 6);
	return 0;
}

/* ---- OneHot: on_value where the index (wrapped once) hits the coordinate ---- */
static int lower_onehot(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *is = &c->in[0]->shape, *os = &c->out[0]->shape;
	int axis;
	if (mc_onehot_axis(c->node, os->rank, &axis))
		return -1;
	if (nothing_to_store(c))
		return 0;
	int64_t depth = os->dims[axis];
	mc_kexpr *off = mc_kb_let(kb, mc_lower_load(c, 2, mc_k_index(kb, 0)));
	mc_kexpr *on = mc_kb_let(kb, mc_lower_load(c, 2, mc_k_index(kb, 1)));
	mc_kexpr *oc[MC_MAX_RANK], *ic[MC_MAX_RANK];
	mc_lower_loops(kb, os, oc, MC_KF_PARALLEL);
	for (int d = 0, r = 0; d < os->rank; d++)
		if (d != axis)
			ic[r++] = oc[d];
	/* float indices truncate (saturating), like the reference's mc_get_i */
	mc_kexpr *v = mc_kb_let(kb, mc_k_cast(kb, MC_KT_I64,
	                                     mc_lower_load(c, 0, mc_lower_linear(kb, is, ic))));
	mc_kexpr *wrap = and_cond(kb, bin(kb, MC_KB_LT, v, i64(kb, 0)),
	                          bin(kb, MC_KB_GE, v, i64(kb, -depth)));
	v = mc_k_select(kb, wrap, mc_k_add(kb, v, i64(kb, depth)), v);
	mc_kexpr *hit = bin(kb, MC_KB_EQ, v, mc_k_cast(kb, MC_KT_I64, oc[axis]));
	mc_lower_store(c, 0, oc, NULL, mc_k_select(kb, hit, on, off));
	mc_kb_end_n(kb, os->rank);
	return 0;
}

/* ---- Trilu: keeps the triangle j - i >= k (upper) or <= k (lower) ---- */
static int lower_trilu(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *os = &c->out[0]->shape;
	int64_t upper;
	if (mc_attr_int(c->node, "upper", 1, &upper))
		return -1;
	if (nothing_to_store(c))
		return 0;
	mc_kexpr *k = c->n_in > 1 && c->in[1]
	              ? mc_kb_let(kb, mc_k_cast(kb, MC_KT_I64, mc_lower_load(c, 1, mc_k_index(kb, 0))))
	              : i64(kb, 0);
	mc_kexpr *oc[MC_MAX_RANK];
	int r = os->rank;
	mc_lower_loops(kb, os, oc, MC_KF_PARALLEL);
	mc_kexpr *lin = mc_kb_let(kb, mc_lower_linear(kb, os, oc));
	mc_kexpr *diff = mc_k_cast(kb, MC_KT_I64, mc_k_sub(kb, oc[r - 1], oc[r - 2]));
	mc_kexpr *keep = bin(kb, upper ? MC_KB_GE : MC_KB_LE, diff, k);
	mc_kexpr *zero = mc_k_const_as(kb, mc_ktype_of(c->in[0]->dtype), 0);
	mc_lower_store(c, 0, oc, lin, mc_k_select(kb, keep, mc_lower_load(c, 0, lin), zero));
	mc_kb_end_n(kb, r);
	return 0;
}

/* ---- Compress: one loop nest per run of kept positions ---- */

/* A condition known at run time: output 0 is counted (libcore/counted.c)
 * on the axis, the kept slices from position 0 on, zeros to the bound,
 * their count in output 1; a true entry past the axis is invalid input,
 * as ONNX Runtime says. */
static int lower_compress_counted(mc_lower_ctx *c, int axis)
{
	mc_kb *kb = c->kb;
	const mc_shape *is = &c->in[0]->shape, *os = &c->out[0]->shape;
	int ax = axis < 0 ? 0 : axis;
	size_t outer = 1, inner = 1;
	for (int d = 0; axis >= 0 && d < axis; d++)
		outer *= (size_t)is->dims[d];
	for (int d = axis + 1; axis >= 0 && d < is->rank; d++)
		inner *= (size_t)is->dims[d];
	int64_t dim = axis < 0 ? (int64_t)mc_numel(is) : is->dims[axis], bound = os->dims[ax];
	int64_t n_cond = (int64_t)mc_numel(&c->in[1]->shape);
	mc_kexpr *count = mc_kb_local(kb, mc_k_index(kb, 0));
	mc_kexpr *oc[MC_MAX_RANK];
	mc_kexpr *i = mc_kb_fori(kb, n_cond < dim ? n_cond : dim, 0);
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_NE, mc_lower_load(c, 1, i), mc_k_int(kb, MC_KT_BOOL, 0)));
	mc_kexpr *o = mc_kb_fori(kb, (int64_t)outer, 0);
	mc_kexpr *b = mc_kb_fori(kb, (int64_t)inner, MC_KF_VECTOR);
	mc_kexpr *to = mc_kb_let(kb, mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, o, bound), count),
	                                                    (int64_t)inner), b));
	mc_kexpr *from = mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, o, dim), i), (int64_t)inner), b);
	mc_lower_coords(kb, os, to, oc);
	mc_lower_store(c, 0, oc, to, mc_lower_load(c, 0, from));
	mc_kb_end_n(kb, 2);
	mc_kb_assign(kb, count, mc_k_addi(kb, count, 1));
	mc_kb_end_n(kb, 2);
	if (n_cond > dim) {
		i = mc_kb_for(kb, mc_k_index(kb, dim), mc_k_index(kb, n_cond), 0);
		mc_kb_if(kb, mc_k_bin(kb, MC_KB_NE, mc_lower_load(c, 1, i), mc_k_int(kb, MC_KT_BOOL, 0)));
		mc_kb_fail(kb, MC_STATUS_BAD_INPUT);
		mc_kb_end_n(kb, 2);
	}
	/* zeros past the count: the padding every later op computes over */
	o = mc_kb_fori(kb, (int64_t)outer, 0);
	mc_kexpr *j = mc_kb_for(kb, count, mc_k_index(kb, bound), 0);
	b = mc_kb_fori(kb, (int64_t)inner, MC_KF_VECTOR);
	to = mc_kb_let(kb, mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, o, bound), j), (int64_t)inner), b));
	mc_lower_coords(kb, os, to, oc);
	mc_lower_store(c, 0, oc, to, mc_k_const_as(kb, mc_ktype_of(c->out[0]->dtype), 0));
	mc_kb_end_n(kb, 3);
	if (c->n_out > 1 && c->out[1])
		mc_lower_store(c, 1, NULL, mc_k_index(kb, 0), mc_k_cast(kb, MC_KT_I64, count));
	return 0;
}

static int lower_compress(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *is = &c->in[0]->shape;
	const mc_tensor *cond = mc_lower_const(c, 1);
	int axis;
	if (mc_compress_axis(c->node, is->rank, &axis))
		return -1;
	if (!cond && c->out[0]->counted)
		return lower_compress_counted(c, axis);
	if (!cond)
		return mc_lower_error(c, "Compress with a condition known only at run time has no C "
		                      "lowering");
	if (c->n_out > 1 && c->out[1]) /* the importer's count: what the condition keeps */
		mc_lower_store(c, 1, NULL, mc_k_index(kb, 0), mc_k_int(kb, MC_KT_I64, c->out[0]->shape.dims[axis < 0 ? 0 : axis]));
	if (nothing_to_store(c))
		return 0;
	/* flattened (axis -1): a 1-D view of the input */
	mc_shape view = axis < 0 ? (mc_shape){.rank = 1, .dims = {(int64_t)mc_numel(is)}} : *is;
	int ax = axis < 0 ? 0 : axis;
	int64_t dim = view.dims[ax], at = 0;
	size_t n = cond->numel < (size_t)dim ? cond->numel : (size_t)dim;
	for (size_t i = 0; i < n;) {
		if (!mc_get_i(cond, i)) {
			i++;
			continue;
		}
		size_t end = i;
		while (end < n && mc_get_i(cond, end))
			end++;
		mc_kexpr *oc[MC_MAX_RANK], *ic[MC_MAX_RANK];
		mc_shape run = view;
		run.dims[ax] = (int64_t)(end - i);
		mc_lower_loops(kb, &run, ic, MC_KF_PARALLEL);
		memcpy(oc, ic, sizeof ic);
		oc[ax] = mc_k_addi(kb, ic[ax], at);
		ic[ax] = mc_k_addi(kb, ic[ax], (int64_t)i);
		mc_lower_store(c, 0, oc, NULL, mc_lower_load(c, 0, mc_lower_linear(kb, &view, ic)));
		mc_kb_end_n(kb, run.rank);
		at += (int64_t)(end - i);
		i = end;
	}
	return 0;
}

static const mc_lowering l_slice = { MC_OP_Slice, lower_slice, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_gather = { MC_OP_Gather, lower_gather, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_gather_elements = { MC_OP_GatherElements, lower_gather_elements, NULL,
                                               MC_LOWER_EPILOGUE };
static const mc_lowering l_gathernd = { MC_OP_GatherND, lower_gathernd, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_scatter = { MC_OP_Scatter, lower_scatter_elements, NULL, 0 };
static const mc_lowering l_scatter_elements = { MC_OP_ScatterElements, lower_scatter_elements, NULL,
                                                0 };
static const mc_lowering l_scatternd = { MC_OP_ScatterND, lower_scatternd, NULL, 0 };
static const mc_lowering l_pad = { MC_OP_Pad, lower_pad, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_resize = { MC_OP_Resize, lower_resize, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_upsample = { MC_OP_Upsample, lower_resize, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_depth_to_space = { MC_OP_DepthToSpace, lower_depth_to_space, NULL,
                                              MC_LOWER_EPILOGUE };
static const mc_lowering l_space_to_depth = { MC_OP_SpaceToDepth, lower_space_to_depth, NULL,
                                              MC_LOWER_EPILOGUE };
static const mc_lowering l_onehot = { MC_OP_OneHot, lower_onehot, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_trilu = { MC_OP_Trilu, lower_trilu, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_compress = { MC_OP_Compress, lower_compress, NULL, MC_LOWER_EPILOGUE };

const mc_lowering *const mc_lower_index[] = {
	&l_slice, &l_gather, &l_gather_elements, &l_gathernd, &l_scatter, &l_scatter_elements,
	&l_scatternd, &l_pad, &l_resize, &l_upsample, &l_depth_to_space, &l_space_to_depth,
	&l_onehot, &l_trilu, &l_compress,
	NULL,
};
