/* Lowerings of the reduce family (see aot/aot.h: mc_lowering): Reduce*,
 * ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax, CumSum, TopK, the
 * normalisations (Batch, Instance, Group, Layer, Lp, MeanVariance, LRN,
 * RMS) and the losses NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss.
 *
 * Every kernel walks the elements that do not reduce in parallel loops and
 * keeps each reduction in a local accumulator, then stores every output
 * element once with its final value (so fused epilogues apply). Floats
 * accumulate in their compute type (f32 for f32/f16/bf16, like ONNX
 * Runtime; f64 for f64); integer sums and products in 64 bits, wrapping
 * like the reference's. */
#include <math.h>
#include <string.h>

#include "lower.h"
#include "../libcore/ops/extra_norm.h"
#include "../libcore/ops/loss.h"
#include "../libcore/ops/reduce.h"

/* ==== helpers ==== */

/* A loop over [0, n), or the constant 0 where n is 1 (no loop opened:
 * close loops with close_to, which counts what was really opened). */
static mc_kexpr *loop(mc_kb *kb, int64_t n, unsigned flags)
{
	return n == 1 ? mc_k_index(kb, 0) : mc_kb_fori(kb, n, flags);
}

static void close_to(mc_kb *kb, int depth)
{
	while (kb->depth > depth)
		mc_kb_end(kb);
}

/* The compute type of floats of storage dtype t. */
static mc_ktype float_type(mc_dtype t)
{
	return t == MC_DOUBLE ? MC_KT_F64 : MC_KT_F32;
}

/* Sums and products: floats in their compute type, integers in 64 bits. */
static mc_ktype sum_type(mc_dtype t)
{
	mc_ktype k = mc_ktype_of(t);
	if (mc_ktype_is_float(k) || k == MC_KT_BOOL)
		return k;
	return mc_ktype_is_signed(k) ? MC_KT_I64 : MC_KT_U64;
}

static mc_kexpr *fconst(mc_kb *kb, mc_ktype t, double v)
{
	return mc_k_const_as(kb, t, v);
}

static bool present_out(const mc_lower_ctx *c, int k)
{
	return k < c->n_out && c->out[k] && c->out_buf[k] >= 0;
}

static bool present_in(const mc_lower_ctx *c, int i)
{
	return i < c->n_in && c->in[i] && c->in_buf[i] >= 0;
}

/* Whether x (let-bound) ranks strictly above (below) best; a NaN ranks
 * above every number for both, so max and min pick it as numpy's do. */
static mc_kexpr *beats(mc_kb *kb, mc_kexpr *x, mc_kexpr *best, bool want_max)
{
	mc_kexpr *b = mc_k_bin(kb, want_max ? MC_KB_GT : MC_KB_LT, x, best);
	if (!mc_ktype_is_float(x->type))
		return b;
	mc_kexpr *nan_x = mc_k_bin(kb, MC_KB_AND, mc_k_un(kb, MC_KU_ISNAN, x),
	                           mc_k_un(kb, MC_KU_NOT, mc_k_un(kb, MC_KU_ISNAN, best)));
	return mc_k_bin(kb, MC_KB_OR, b, nan_x);
}

/* acc = the larger (smaller) of acc and x (let-bound); a NaN sticks. */
static void assign_extreme(mc_kb *kb, mc_kexpr *acc, mc_kexpr *x, bool want_max)
{
	if (x->type == MC_KT_BOOL) {
		mc_kb_assign(kb, acc, mc_k_bin(kb, want_max ? MC_KB_OR : MC_KB_AND, acc, x));
		return;
	}
	mc_kexpr *b = mc_k_bin(kb, want_max ? MC_KB_GT : MC_KB_LT, x, acc);
	if (mc_ktype_is_float(x->type))
		b = mc_k_bin(kb, MC_KB_OR, b, mc_k_un(kb, MC_KU_ISNAN, x));
	mc_kb_assign(kb, acc, mc_k_select(kb, b, x, acc));
}

/* The largest (smallest) value of integer or bool type t. */
static mc_kexpr *int_extreme(mc_kb *kb, mc_ktype t, bool high)
{
	int64_t v;
	switch (t) {
	case MC_KT_BOOL: v = high; break;
	case MC_KT_I8: v = high ? INT8_MAX : INT8_MIN; break;
	case MC_KT_U8: v = high ? UINT8_MAX : 0; break;
	case MC_KT_I16: v = high ? INT16_MAX : INT16_MIN; break;
	case MC_KT_U16: v = high ? UINT16_MAX : 0; break;
	case MC_KT_I32: v = high ? INT32_MAX : INT32_MIN; break;
	case MC_KT_U32: v = high ? (int64_t)UINT32_MAX : 0; break;
	case MC_KT_U64: v = high ? -1 : 0; break; /* all ones */
	default: v = high ? INT64_MAX : INT64_MIN; break;
	}
	return mc_k_int(kb, t, v);
}

/* A tensor seen around one axis as outer x n x inner (row-major); the old
 * softmax family (opset < 13) coerces to 2-D: n spans axis..end. */
typedef struct {
	int64_t outer, n, inner;
} view;

static view view_around(const mc_shape *s, int axis, bool coerce_2d)
{
	view v = {1, 1, 1};
	for (int d = 0; d < s->rank; d++) {
		if (d < axis)
			v.outer *= s->dims[d];
		else if (d == axis || coerce_2d)
			v.n *= s->dims[d];
		else
			v.inner *= s->dims[d];
	}
	return v;
}

/* Linear index of (o, k, i) in a view. */
static mc_kexpr *view_at(mc_kb *kb, const view *v, mc_kexpr *o, mc_kexpr *k, mc_kexpr *i)
{
	return mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, o, v->n), k), v->inner), i);
}

/* An axis attribute normalised against rank (infer has checked it). */
static int norm_axis(const mc_lower_ctx *c, int64_t axis, int rank)
{
	int a;
	if (mc_norm_axis(c->node, axis, rank, &a))
		return -1;
	return a;
}

/* ==== Reduce* ==== */

/* Which input dims a reduction removes: axes from the attribute (before
 * the op's input opset) or the constant input 2; none listed means all, or
 * none with noop_with_empty_axes. Infer has validated them already. */
static int reduced_dims(const mc_lower_ctx *c, const int64_t *axes, size_t count, bool noop_empty,
                        bool reduced[MC_MAX_RANK])
{
	int rank = c->in[0]->shape.rank;
	for (int d = 0; d < rank; d++)
		reduced[d] = count == 0 && !noop_empty;
	for (size_t k = 0; k < count; k++) {
		int a = norm_axis(c, axes[k], rank);
		if (a < 0)
			return -1;
		reduced[a] = true;
	}
	return 0;
}

static int reduce_axes(const mc_lower_ctx *c, bool reduced[MC_MAX_RANK])
{
	const reduce_params *p = c->node->params;
	int64_t axes[MC_MAX_RANK];
	size_t count = 0;
	if (p->axes_input) {
		if (present_in(c, 1)) {
			const mc_tensor *t = mc_lower_const(c, 1);
			if (!t)
				return mc_lower_error(c, "axes (input 2) must be a constant");
			if (t->numel > MC_MAX_RANK)
				return mc_lower_error(c, "lists %zu axes, more than any rank", t->numel);
			for (size_t k = 0; k < t->numel; k++)
				axes[k] = mc_get_i(t, k);
			count = t->numel;
		}
	} else {
		const int64_t *attr;
		if (mc_attr_ints(c->node, "axes", &attr, &count))
			return -1;
		if (count > MC_MAX_RANK)
			return mc_lower_error(c, "lists %zu axes, more than any rank", count);
		if (count)
			memcpy(axes, attr, count * sizeof *axes);
	}
	return reduced_dims(c, axes, count, p->noop_empty, reduced);
}

/* The reduction loops (the kept dims already in coords); returns x at
 * those coords, let-bound. A run of adjacent reduced dims is one loop over
 * its elements, which lie its last dim's stride apart: the same order, and
 * one long loop where several short ones were (a GPU's lanes split long
 * ones: the spatial mean of a channels-last image). */
static mc_kexpr *reduce_loops(mc_lower_ctx *c, const bool *reduced, mc_kexpr **coords)
{
	mc_kb *kb = c->kb;
	const mc_shape *s = &c->in[0]->shape;
	for (int d = 0; d < s->rank; d++) {
		if (!reduced[d])
			continue;
		int last = d;
		int64_t n = s->dims[d];
		while (last + 1 < s->rank && reduced[last + 1])
			n *= s->dims[++last];
		for (int i = d; i < last; i++)
			coords[i] = mc_k_index(kb, 0);
		coords[last] = loop(kb, n, MC_KF_REDUCE);
		d = last;
	}
	return mc_kb_let(kb, mc_lower_load(c, 0, mc_lower_linear(kb, s, coords)));
}

/* Adds one element's term to a running sum / product. */
static void reduce_step(mc_kb *kb, reduce_kind kind, mc_kexpr *acc, mc_kexpr *x, mc_kexpr *shift)
{
	mc_ktype t = acc->type;
	mc_kexpr *v = mc_k_cast(kb, t, x);
	switch (kind) {
	case R_PROD:
		mc_kb_assign(kb, acc, mc_k_mul(kb, acc, v));
		return;
	case R_L1:
		if (mc_ktype_is_float(t))
			v = mc_k_un(kb, MC_KU_ABS, v);
		else if (mc_ktype_is_signed(t)) /* wraps for the most negative value, like numpy */
			v = mc_k_select(kb, mc_k_bin(kb, MC_KB_LT, v, mc_k_int(kb, t, 0)),
			                mc_k_sub(kb, mc_k_int(kb, t, 0), v), v);
		break;
	case R_L2: case R_SUMSQ:
		v = mc_k_mul(kb, v, v);
		break;
	case R_LOGSUMEXP:
		v = mc_k_un(kb, MC_KU_EXP, mc_k_sub(kb, v, shift));
		break;
	default:
		break;
	}
	mc_kb_assign(kb, acc, mc_k_add(kb, acc, v));
}

/* The final value of a sum-like reduction over `count` elements. */
static mc_kexpr *reduce_finish(mc_kb *kb, reduce_kind kind, mc_kexpr *acc, int64_t count,
                               mc_kexpr *shift)
{
	mc_ktype t = acc->type;
	switch (kind) {
	case R_MEAN:
		if (!mc_ktype_is_float(t) && count == 0)
			return mc_k_int(kb, t, 0);
		return mc_k_div(kb, acc, mc_k_const_as(kb, t, (double)count));
	case R_L2: return mc_k_un(kb, MC_KU_SQRT, acc);
	case R_LOGSUM: return mc_k_un(kb, MC_KU_LOG, acc); /* empty set: -inf */
	case R_LOGSUMEXP: return mc_k_add(kb, mc_k_un(kb, MC_KU_LOG, acc), shift);
	default: return acc;
	}
}

/* The reduced dims as one run [a, b): the elements before it make
 * `outer`, the run `run`, those after it `inner` contiguous ones. False
 * where the reduced dims are none or more than one run. */
static bool one_reduced_run(const mc_shape *s, const bool *reduced, int64_t *outer, int64_t *run,
                            int64_t *inner)
{
	int a = -1, b = -1;
	for (int d = 0; d < s->rank; d++)
		if (reduced[d]) {
			if (b >= 0 && b != d)
				return false; /* two runs */
			if (a < 0)
				a = d;
			b = d + 1;
		}
	if (a < 0)
		return false;
	*outer = *run = *inner = 1;
	for (int d = 0; d < s->rank; d++)
		*(d < a ? outer : d < b ? run : inner) *= s->dims[d];
	return true;
}

/* A long run (a global pool of a large image) is summed in SLICES
 * contiguous slices of rows, each into scratch, then the slices' sums in
 * order and the rows left over: the workers (--threads) split the slices,
 * each reading only rows it holds (the convolution before split the image
 * by rows too), where a split along the few channel vectors would have
 * each read every row. Every build sums this way: the same bits on any
 * number of workers. */
#define SLICES 16
#define SLICE_MIN_RUN 128

/* Vector i of [outer][rows][inner] floats x, summed over rows [r0, r0 +
 * n) into acc. */
static void sum_rows(mc_kb *kb, int buf, mc_kexpr *acc, mc_kexpr *at, int64_t inner, int64_t n, int l)
{
	mc_kexpr *r = mc_kb_fori(kb, n, MC_KF_REDUCE);
	mc_kexpr *x = mc_k_vload(kb, buf, mc_k_add(kb, at, mc_k_muli(kb, r, inner)), l);
	mc_kb_assign(kb, acc, mc_k_add(kb, acc, x));
	mc_kb_end(kb);
}

static void reduce_inner_slices(mc_lower_ctx *c, int64_t outer, int64_t run, int64_t inner, int lanes,
                                reduce_kind kind)
{
	mc_kb *kb = c->kb;
	int64_t rows = run / SLICES, rest = run % SLICES;
	int part = mc_kb_scratch(kb, MC_FLOAT, (size_t)(outer * SLICES * inner));
	int depth0 = kb->depth;
	/* part[o][s][i]: slice s's sums */
	/* split even where small: a worker's slices are the rows it holds */
	mc_kexpr *o = loop(kb, outer, MC_KF_PARALLEL | MC_KF_SPLIT_ANY);
	mc_kexpr *sl = loop(kb, SLICES, MC_KF_PARALLEL | MC_KF_SPLIT_ANY);
	mc_kexpr *first = mc_k_add(kb, mc_k_muli(kb, o, run), mc_k_muli(kb, sl, rows)); /* the slice's first row */
	mc_kexpr *in_at = mc_kb_let(kb, mc_k_muli(kb, first, inner));
	mc_kexpr *part_at = mc_kb_let(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, o, SLICES), sl), inner));
	for (int p = 0; p < mc_lower_vec_parts(inner, lanes); p++) {
		int l = p ? 1 : lanes;
		mc_kexpr *i = mc_lower_vec_part_open(kb, p, inner, lanes, MC_KF_PARALLEL);
		mc_kexpr *acc = mc_kb_local(kb, mc_k_splat(kb, fconst(kb, MC_KT_F32, 0), l));
		sum_rows(kb, c->in_buf[0], acc, mc_k_add(kb, in_at, i), inner, rows, l);
		mc_kb_store(kb, part, mc_k_add(kb, part_at, i), acc);
		mc_kb_end(kb);
	}
	close_to(kb, depth0);
	/* each output: the slices' sums in order, then the rows left over */
	o = loop(kb, outer, MC_KF_PARALLEL);
	part_at = mc_kb_let(kb, mc_k_muli(kb, o, SLICES * inner));
	in_at = mc_kb_let(kb, mc_k_muli(kb, mc_k_addi(kb, mc_k_muli(kb, o, run), SLICES * rows), inner));
	mc_kexpr *out_at = mc_kb_let(kb, mc_k_muli(kb, o, inner));
	for (int p = 0; p < mc_lower_vec_parts(inner, lanes); p++) {
		int l = p ? 1 : lanes;
		mc_kexpr *i = mc_lower_vec_part_open(kb, p, inner, lanes, MC_KF_PARALLEL);
		mc_kexpr *acc = mc_kb_local(kb, mc_k_splat(kb, fconst(kb, MC_KT_F32, 0), l));
		sum_rows(kb, part, acc, mc_k_add(kb, part_at, i), inner, SLICES, l);
		if (rest > 0)
			sum_rows(kb, c->in_buf[0], acc, mc_k_add(kb, in_at, i), inner, rest, l);
		mc_kexpr *v = kind == R_MEAN ? mc_k_div(kb, acc, fconst(kb, MC_KT_F32, (double)run)) : acc;
		mc_lower_store_vec(c, 0, NULL, mc_kb_let(kb, mc_k_add(kb, out_at, i)), v);
		mc_kb_end(kb);
	}
	close_to(kb, depth0);
}

/* A float32 ReduceSum or ReduceMean whose reduced dims are one run
 * [a, b) followed by kept dims making `inner` contiguous elements (a
 * channels-last global pool: [N, H, W, C] over H and W): vectors along
 * inner summed over the run (in slices where it is long). 1 where the
 * shape is not of that form. */
static int reduce_inner_vec(mc_lower_ctx *c, const bool *reduced, reduce_kind kind)
{
	mc_kb *kb = c->kb;
	int64_t outer, run, inner;
	if (!one_reduced_run(&c->in[0]->shape, reduced, &outer, &run, &inner) || (kind != R_SUM && kind != R_MEAN) ||
	    c->in[0]->dtype != MC_FLOAT || c->out[0]->dtype != MC_FLOAT)
		return 1;
	int lanes = mc_isa_lanes_upto(kb->isa, inner);
	if (lanes == 1 || run == 0)
		return 1;
	if (run >= SLICE_MIN_RUN) {
		reduce_inner_slices(c, outer, run, inner, lanes, kind);
		return 0;
	}
	int depth0 = kb->depth;
	mc_kexpr *o = loop(kb, outer, MC_KF_PARALLEL);
	mc_kexpr *in_at = mc_kb_let(kb, mc_k_muli(kb, o, run * inner));
	mc_kexpr *out_at = mc_kb_let(kb, mc_k_muli(kb, o, inner));
	for (int part = 0; part < mc_lower_vec_parts(inner, lanes); part++) {
		int l = part ? 1 : lanes;
		mc_kexpr *i = mc_lower_vec_part_open(kb, part, inner, lanes, MC_KF_PARALLEL);
		mc_kexpr *acc = mc_kb_local(kb, mc_k_splat(kb, fconst(kb, MC_KT_F32, 0), l));
		mc_kexpr *r = mc_kb_fori(kb, run, MC_KF_REDUCE);
		mc_kexpr *at = mc_k_add(kb, mc_k_add(kb, in_at, mc_k_muli(kb, r, inner)), i);
		mc_kb_assign(kb, acc, mc_k_add(kb, acc, mc_k_vload(kb, c->in_buf[0], at, l)));
		mc_kb_end(kb);
		mc_kexpr *v = kind == R_MEAN ? mc_k_div(kb, acc, fconst(kb, MC_KT_F32, (double)run)) : acc;
		mc_lower_store_vec(c, 0, NULL, mc_kb_let(kb, mc_k_add(kb, out_at, i)), v);
		mc_kb_end(kb);
	}
	close_to(kb, depth0);
	return 0;
}

/* A float ReduceSum or ReduceMean on a grid over one long run of dims
 * with few outputs (a global pool of a large image: [N, H, W, C] over H
 * and W, C small): a thread per output, or a warp's, would leave most of
 * a GPU idle and, channels-last, read the run C elements apart. So two
 * nests: a thread per output and slice s of the run sums the run's rows
 * s, s + S, ... (SPLIT_ROWS of them; neighbouring threads read
 * neighbouring elements) into float32 scratch, then a thread (or warp)
 * per output sums its S partial sums in order. Deterministic; the order
 * of the additions is not the CPU's. 1 where not of that form. */
/* Element (o, r, i) of an [outer][rows][inner] array. */
static mc_kexpr *at3(mc_kb *kb, mc_kexpr *o, int64_t rows, mc_kexpr *r, int64_t inner, mc_kexpr *i)
{
	return mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, o, rows), r), inner), i);
}

#define SPLIT_ROWS 16          /* rows a slice: under a warp's split (32) */
#define SPLIT_MIN_RUN 512
#define SPLIT_MAX_OUTPUTS 4096
static int reduce_split_grid(mc_lower_ctx *c, const bool *reduced, reduce_kind kind)
{
	mc_kb *kb = c->kb;
	mc_dtype xt = c->in[0]->dtype;
	int64_t outer, run, inner;
	if (!kb->target || !kb->target->grid || !one_reduced_run(&c->in[0]->shape, reduced, &outer, &run, &inner) ||
	    (kind != R_SUM && kind != R_MEAN) || (xt != MC_FLOAT && xt != MC_FLOAT16))
		return 1;
	if (run < SPLIT_MIN_RUN || outer * inner > SPLIT_MAX_OUTPUTS)
		return 1;
	int64_t slices = (run + SPLIT_ROWS - 1) / SPLIT_ROWS;
	int part = mc_kb_scratch(kb, MC_FLOAT, (size_t)(outer * slices * inner));
	int depth0 = kb->depth;
	/* the slices' sums: part[o][s][i] */
	mc_kexpr *o = loop(kb, outer, MC_KF_PARALLEL);
	mc_kexpr *sl = loop(kb, slices, MC_KF_PARALLEL);
	mc_kexpr *i = loop(kb, inner, MC_KF_PARALLEL);
	int depth_par = kb->depth;
	mc_kexpr *acc = mc_kb_local(kb, fconst(kb, MC_KT_F32, 0));
	mc_kexpr *j = mc_kb_fori(kb, SPLIT_ROWS, MC_KF_REDUCE);
	mc_kexpr *row = mc_kb_let(kb, mc_k_add(kb, mc_k_muli(kb, j, slices), sl));
	bool ragged = slices * SPLIT_ROWS != run;
	if (ragged)
		mc_kb_if(kb, mc_k_bin(kb, MC_KB_LT, row, mc_k_index(kb, run)));
	mc_kexpr *x = mc_lower_load(c, 0, at3(kb, o, run, row, inner, i));
	mc_kb_assign(kb, acc, mc_k_add(kb, acc, mc_k_cast(kb, MC_KT_F32, x)));
	close_to(kb, depth_par);
	mc_kb_store(kb, part, at3(kb, o, slices, sl, inner, i), acc);
	close_to(kb, depth0);
	/* each output: its slices' sums in order */
	o = loop(kb, outer, MC_KF_PARALLEL);
	i = loop(kb, inner, MC_KF_PARALLEL);
	acc = mc_kb_local(kb, fconst(kb, MC_KT_F32, 0));
	sl = mc_kb_fori(kb, slices, MC_KF_REDUCE);
	mc_kb_assign(kb, acc, mc_k_add(kb, acc, mc_k_load(kb, part, at3(kb, o, slices, sl, inner, i))));
	mc_kb_end(kb);
	mc_kexpr *v = kind == R_MEAN ? mc_k_div(kb, acc, fconst(kb, MC_KT_F32, (double)run)) : acc;
	mc_lower_store(c, 0, NULL, mc_kb_let(kb, mc_k_add(kb, mc_k_muli(kb, o, inner), i)), v);
	close_to(kb, depth0);
	return 0;
}

static int lower_reduce_op(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const reduce_params *p = c->node->params;
	const mc_value *xv = c->in[0];
	const mc_shape *s = &xv->shape;
	bool reduced[MC_MAX_RANK];
	if (reduce_axes(c, reduced))
		return -1;
	if (mc_numel(&c->out[0]->shape) == 0)
		return 0;
	int fast = reduce_split_grid(c, reduced, p->kind);
	if (fast == 1)
		fast = reduce_inner_vec(c, reduced, p->kind);
	if (fast != 1)
		return fast;
	int64_t count = 1;
	for (int d = 0; d < s->rank; d++)
		if (reduced[d])
			count *= s->dims[d];
	int depth0 = kb->depth;
	mc_kexpr *coords[MC_MAX_RANK], *ocoords[MC_MAX_RANK];
	int orank = 0;
	for (int d = 0; d < s->rank; d++) {
		if (!reduced[d])
			coords[d] = ocoords[orank++] = loop(kb, s->dims[d], MC_KF_PARALLEL);
		else if (p->keepdims)
			ocoords[orank++] = mc_k_index(kb, 0);
	}
	int depth_out = kb->depth;
	mc_ktype xt = mc_ktype_of(xv->dtype);
	mc_kexpr *result;
	if (p->kind == R_MAX || p->kind == R_MIN) {
		bool want_max = p->kind == R_MAX;
		if (count == 0) {
			/* the empty set: the identity of max / min */
			if (mc_ktype_is_float(xt))
				result = fconst(kb, xt, want_max ? -INFINITY : INFINITY);
			else
				result = int_extreme(kb, xt, !want_max);
		} else {
			for (int d = 0; d < s->rank; d++)
				if (reduced[d])
					coords[d] = mc_k_index(kb, 0);
			mc_kexpr *acc = mc_kb_local(kb, mc_lower_load(c, 0, mc_lower_linear(kb, s, coords)));
			assign_extreme(kb, acc, reduce_loops(c, reduced, coords), want_max);
			close_to(kb, depth_out);
			result = acc;
		}
	} else {
		reduce_kind kind = p->kind;
		bool ints = !mc_ktype_is_float(xt);
		mc_ktype at = ints && kind != R_L2 && kind != R_LOGSUM && kind != R_LOGSUMEXP
		                  ? sum_type(xv->dtype) : mc_ktype_is_float(xt) ? xt : MC_KT_F64;
		mc_kexpr *shift = NULL;
		if (kind == R_LOGSUMEXP) {
			/* log(sum(exp(x - m))) + m with m the finite maximum, for stability */
			mc_kexpr *mx = mc_kb_local(kb, fconst(kb, at, -INFINITY));
			assign_extreme(kb, mx, mc_kb_let(kb, mc_k_cast(kb, at, reduce_loops(c, reduced, coords))),
			               true);
			close_to(kb, depth_out);
			shift = mc_kb_let(kb, mc_k_select(kb, mc_k_un(kb, MC_KU_ISINF, mx), fconst(kb, at, 0), mx));
		}
		mc_kexpr *acc = mc_kb_local(kb, mc_k_const_as(kb, at, kind == R_PROD ? 1 : 0));
		reduce_step(kb, kind, acc, reduce_loops(c, reduced, coords), shift);
		close_to(kb, depth_out);
		result = reduce_finish(kb, kind, acc, count, shift);
	}
	mc_lower_store(c, 0, ocoords, NULL, result);
	close_to(kb, depth0);
	return 0;
}

/* ==== ArgMax, ArgMin ==== */

/* Position along the view's axis of the largest (smallest) element of row
 * (o, i), NaN ranking highest; ties go to the first, or with `last` the
 * last, occurrence. n > 0. */
static mc_kexpr *arg_best(mc_lower_ctx *c, const view *v, mc_kexpr *o, mc_kexpr *i, bool want_max,
                          bool last)
{
	mc_kb *kb = c->kb;
	mc_kexpr *best = mc_kb_local(kb, mc_lower_load(c, 0, view_at(kb, v, o, mc_k_index(kb, 0), i)));
	mc_kexpr *pos = mc_kb_local(kb, mc_k_index(kb, 0));
	mc_kexpr *k = mc_kb_for(kb, mc_k_index(kb, 1), mc_k_index(kb, v->n), MC_KF_REDUCE);
	mc_kexpr *x = mc_kb_let(kb, mc_lower_load(c, 0, view_at(kb, v, o, k, i)));
	mc_kexpr *take = beats(kb, x, best, want_max);
	if (last) {
		mc_kexpr *same = mc_k_bin(kb, MC_KB_EQ, x, best);
		if (mc_ktype_is_float(x->type))
			same = mc_k_bin(kb, MC_KB_OR, same,
			                mc_k_bin(kb, MC_KB_AND, mc_k_un(kb, MC_KU_ISNAN, x),
			                         mc_k_un(kb, MC_KU_ISNAN, best)));
		take = mc_k_bin(kb, MC_KB_OR, take, same);
	}
	mc_kb_if(kb, take);
	mc_kb_assign(kb, best, x);
	mc_kb_assign(kb, pos, k);
	mc_kb_end(kb);
	mc_kb_end(kb);
	return pos;
}

static int lower_arg(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const arg_params *p = c->node->params;
	const mc_shape *s = &c->in[0]->shape;
	int axis = norm_axis(c, p->axis, s->rank);
	if (axis < 0)
		return -1;
	if (mc_numel(&c->out[0]->shape) == 0)
		return 0;
	view v = view_around(s, axis, false);
	int depth0 = kb->depth;
	mc_kexpr *o = loop(kb, v.outer, MC_KF_PARALLEL);
	mc_kexpr *i = loop(kb, v.inner, MC_KF_PARALLEL);
	mc_kexpr *pos = arg_best(c, &v, o, i, p->want_max, p->last);
	/* the output is outer x inner whether the axis is kept (as 1) or not */
	mc_lower_store(c, 0, NULL, mc_k_add(kb, mc_k_muli(kb, o, v.inner), i),
	               mc_k_cast(kb, MC_KT_I64, pos));
	close_to(kb, depth0);
	return 0;
}

/* ==== Softmax, LogSoftmax, Hardmax ==== */

#define SOFTMAX_VECTOR_MIN 64

/* The lanes of v combined into one scalar with MAX or ADD. */
static mc_kexpr *lanes_combined(mc_kb *kb, mc_kbinop op, mc_kexpr *v, int lanes)
{
	v = mc_kb_let(kb, v);
	mc_kexpr *acc = mc_k_lane(kb, v, 0);
	for (int l = 1; l < lanes; l++)
		acc = mc_kb_let(kb, mc_k_bin(kb, op, acc, mc_k_lane(kb, v, l)));
	return acc;
}

/* A row's length in vectors: n and its full vectors, held in variables
 * where sizes vary (--dim LO..HI: n may be the dynamic size), so that
 * the statements do not change with n; the elements past the full
 * vectors then go in a loop rather than one by one. */
typedef struct {
	int64_t n, full;
	int lanes;
	mc_kexpr *n_e, *full_e; /* NULL: n and full as constants */
} row_len;

static row_len row_len_of(mc_kb *kb, int64_t n, int lanes)
{
	row_len r = { n, n / lanes, lanes, NULL, NULL };
	if (kb->sizes_vary) {
		r.n_e = mc_kb_local(kb, mc_k_index(kb, n));
		r.full_e = mc_kb_let(kb, mc_k_div(kb, r.n_e, mc_k_index(kb, lanes)));
	}
	return r;
}

/* The loop over full vectors [from, full). */
static mc_kexpr *row_vectors(mc_kb *kb, const row_len *r, int64_t from, unsigned flags)
{
	mc_kexpr *end = r->full_e ? r->full_e : mc_k_index(kb, r->full);
	return mc_kb_for(kb, mc_k_index(kb, from), end, flags);
}

/* The elements past the full vectors: tail_steps(r) steps, step s at
 * tail_at(r, s), closed by tail_close (a run-time loop where n varies). */
static int64_t tail_steps(const row_len *r)
{
	return r->n_e ? 1 : r->n - r->full * r->lanes;
}

static mc_kexpr *tail_at(mc_kb *kb, const row_len *r, int64_t s, unsigned flags)
{
	if (!r->n_e)
		return mc_k_index(kb, r->full * r->lanes + s);
	return mc_kb_for(kb, mc_kb_let(kb, mc_k_muli(kb, r->full_e, r->lanes)), r->n_e, flags);
}

static void tail_close(mc_kb *kb, const row_len *r)
{
	if (r->n_e)
		mc_kb_end(kb);
}

/* Softmax or LogSoftmax of the contiguous f32 row [base, base + n) in
 * vectors of `lanes` (n >= lanes), the rest one element at a time. A NaN
 * the vector max passes over still makes every output NaN, through the
 * sum, as the scalar form's sticky max does. */
static void softmax_row_vec(mc_lower_ctx *c, bool log_softmax, mc_kexpr *base, int64_t n, int lanes)
{
	mc_kb *kb = c->kb;
	int in = c->in_buf[0];
	row_len r = row_len_of(kb, n, lanes);
	mc_kexpr *vm = mc_kb_local(kb, mc_k_vload(kb, in, base, lanes));
	if (r.full > 1 || r.full_e) {
		mc_kexpr *k = row_vectors(kb, &r, 1, MC_KF_REDUCE);
		mc_kexpr *x = mc_k_vload(kb, in, mc_k_add(kb, base, mc_k_muli(kb, k, lanes)), lanes);
		mc_kb_assign(kb, vm, mc_k_bin(kb, MC_KB_MAX, vm, x));
		mc_kb_end(kb);
	}
	mc_kexpr *mx = mc_kb_local(kb, lanes_combined(kb, MC_KB_MAX, vm, lanes));
	for (int64_t s = 0; s < tail_steps(&r); s++) {
		mc_kexpr *t = tail_at(kb, &r, s, MC_KF_REDUCE);
		assign_extreme(kb, mx, mc_kb_let(kb, mc_k_load(kb, in, mc_k_add(kb, base, t))), true);
		tail_close(kb, &r);
	}
	mx = mc_kb_let(kb, mx);
	mc_kexpr *vs = mc_kb_local(kb, mc_k_splat(kb, fconst(kb, MC_KT_F32, 0), lanes));
	mc_kexpr *k = r.full_e ? row_vectors(kb, &r, 0, MC_KF_REDUCE) : mc_kb_fori(kb, r.full, MC_KF_REDUCE);
	mc_kexpr *x = mc_k_vload(kb, in, mc_k_add(kb, base, mc_k_muli(kb, k, lanes)), lanes);
	mc_kb_assign(kb, vs, mc_k_add(kb, vs, mc_k_un(kb, MC_KU_EXP, mc_k_sub(kb, x, mx))));
	mc_kb_end(kb);
	mc_kexpr *sum = mc_kb_local(kb, lanes_combined(kb, MC_KB_ADD, vs, lanes));
	for (int64_t s = 0; s < tail_steps(&r); s++) {
		mc_kexpr *t = tail_at(kb, &r, s, MC_KF_REDUCE);
		mc_kexpr *d = mc_k_sub(kb, mc_k_load(kb, in, mc_k_add(kb, base, t)), mx);
		mc_kb_assign(kb, sum, mc_k_add(kb, sum, mc_k_un(kb, MC_KU_EXP, d)));
		tail_close(kb, &r);
	}
	mc_kexpr *scale = log_softmax ? mc_kb_let(kb, mc_k_un(kb, MC_KU_LOG, sum))
	                              : mc_kb_let(kb, mc_k_div(kb, fconst(kb, MC_KT_F32, 1), sum));
	k = r.full_e ? row_vectors(kb, &r, 0, MC_KF_PARALLEL) : mc_kb_fori(kb, r.full, MC_KF_PARALLEL);
	mc_kexpr *at = mc_kb_let(kb, mc_k_add(kb, base, mc_k_muli(kb, k, lanes)));
	mc_kexpr *d = mc_k_sub(kb, mc_k_vload(kb, in, at, lanes), mx);
	mc_lower_store_vec(c, 0, NULL, at,
	                   log_softmax ? mc_k_sub(kb, d, scale) : mc_k_mul(kb, mc_k_un(kb, MC_KU_EXP, d), scale));
	mc_kb_end(kb);
	for (int64_t s = 0; s < tail_steps(&r); s++) {
		mc_kexpr *tat = mc_kb_let(kb, mc_k_add(kb, base, tail_at(kb, &r, s, MC_KF_PARALLEL)));
		mc_kexpr *td = mc_k_sub(kb, mc_k_load(kb, in, tat), mx);
		mc_lower_store(c, 0, NULL, tat,
		               log_softmax ? mc_k_sub(kb, td, scale) : mc_k_mul(kb, mc_k_un(kb, MC_KU_EXP, td), scale));
		tail_close(kb, &r);
	}
}

static int lower_softmax(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const softmax_params *p = c->node->params;
	const mc_shape *s = &c->in[0]->shape;
	int axis = norm_axis(c, p->axis, s->rank);
	if (axis < 0)
		return -1;
	view v = view_around(s, axis, p->coerce_2d);
	if (mc_numel(s) == 0)
		return 0;
	mc_ktype t = float_type(c->in[0]->dtype);
	int depth0 = kb->depth;
	mc_kexpr *o = loop(kb, v.outer, MC_KF_PARALLEL);
	mc_kexpr *i = loop(kb, v.inner, MC_KF_PARALLEL);
	if (p->kind == SM_HARDMAX) {
		mc_kexpr *best = arg_best(c, &v, o, i, true, false);
		mc_kexpr *k = mc_kb_fori(kb, v.n, 0);
		mc_lower_store(c, 0, NULL, view_at(kb, &v, o, k, i),
		               mc_k_select(kb, mc_k_bin(kb, MC_KB_EQ, k, best), fconst(kb, t, 1),
		                           fconst(kb, t, 0)));
		close_to(kb, depth0);
		return 0;
	}
	/* rows in vectors where they are long (attention's): a short row (a
	 * classifier's head) keeps the scalar form, whose sum runs in one
	 * order on every ISA, so its result is the same bits everywhere */
	int lanes = v.n >= SOFTMAX_VECTOR_MIN ? mc_isa_lanes_upto(kb->isa, v.n) : 1;
	if (kb->sizes_vary) {
		/* n may be the dynamic size: the widest vectors wherever one
		 * fits, so that the statements change at one size at most */
		lanes = mc_isa_lanes_upto(kb->isa, INT64_MAX);
		if (v.n < lanes)
			lanes = 1;
	}
	if (v.inner == 1 && lanes > 1 && c->in[0]->dtype == MC_FLOAT && c->out[0]->dtype == MC_FLOAT) {
		softmax_row_vec(c, p->kind == SM_LOGSOFTMAX, mc_kb_let(kb, mc_k_muli(kb, o, v.n)), v.n, lanes);
		close_to(kb, depth0);
		return 0;
	}
	/* max pass (a NaN sticks), sum of exp(x - max), then one store each */
	mc_kexpr *mx = mc_kb_local(kb, mc_lower_load(c, 0, view_at(kb, &v, o, mc_k_index(kb, 0), i)));
	mc_kexpr *k = mc_kb_fori(kb, v.n, MC_KF_REDUCE);
	assign_extreme(kb, mx, mc_kb_let(kb, mc_lower_load(c, 0, view_at(kb, &v, o, k, i))), true);
	mc_kb_end(kb);
	mc_kexpr *sum = mc_kb_local(kb, fconst(kb, t, 0));
	k = mc_kb_fori(kb, v.n, MC_KF_REDUCE);
	mc_kb_assign(kb, sum, mc_k_add(kb, sum, mc_k_un(kb, MC_KU_EXP,
	                                                mc_k_sub(kb, mc_lower_load(c, 0, view_at(kb, &v, o, k, i)), mx))));
	mc_kb_end(kb);
	mc_kexpr *scale = p->kind == SM_SOFTMAX ? mc_kb_let(kb, mc_k_div(kb, fconst(kb, t, 1), sum))
	                                        : mc_kb_let(kb, mc_k_un(kb, MC_KU_LOG, sum));
	k = mc_kb_fori(kb, v.n, MC_KF_PARALLEL);
	mc_kexpr *at = mc_kb_let(kb, view_at(kb, &v, o, k, i));
	mc_kexpr *d = mc_k_sub(kb, mc_lower_load(c, 0, at), mx);
	mc_lower_store(c, 0, NULL, at,
	               p->kind == SM_SOFTMAX ? mc_k_mul(kb, mc_k_un(kb, MC_KU_EXP, d), scale)
	                                     : mc_k_sub(kb, d, scale));
	close_to(kb, depth0);
	return 0;
}

/* ==== CumSum ==== */

/* The scan along one axis. */
static void cumsum_along(mc_lower_ctx *c, int axis)
{
	mc_kb *kb = c->kb;
	const cumsum_params *p = c->node->params;
	view v = view_around(&c->in[0]->shape, axis, false);
	mc_ktype at = sum_type(c->in[0]->dtype);
	int depth0 = kb->depth;
	mc_kexpr *o = loop(kb, v.outer, MC_KF_PARALLEL);
	mc_kexpr *i = loop(kb, v.inner, MC_KF_PARALLEL);
	mc_kexpr *acc = mc_kb_local(kb, mc_k_const_as(kb, at, 0));
	mc_kexpr *step = mc_kb_fori(kb, v.n, 0);
	mc_kexpr *k = p->reverse ? mc_k_sub(kb, mc_k_index(kb, v.n - 1), step) : step;
	mc_kexpr *idx = mc_kb_let(kb, view_at(kb, &v, o, k, i));
	mc_kexpr *x = mc_k_cast(kb, at, mc_lower_load(c, 0, idx));
	if (p->exclusive) {
		mc_lower_store(c, 0, NULL, idx, acc);
		mc_kb_assign(kb, acc, mc_k_add(kb, acc, x));
	} else {
		mc_kb_assign(kb, acc, mc_k_add(kb, acc, x));
		mc_lower_store(c, 0, NULL, idx, acc);
	}
	close_to(kb, depth0);
}

/* A constant axis gives one scan; an axis known only at run time is
 * checked (negative wraps, out of range fails with MC_STATUS_BAD_INDEX)
 * and picks one of the scans for every possible axis. */
static int lower_cumsum(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *s = &c->in[0]->shape;
	const mc_tensor *axis_t = mc_lower_const(c, 1);
	if (mc_numel(s) == 0)
		return 0;
	if (axis_t) {
		int axis = axis_t->numel == 1 ? norm_axis(c, mc_get_i(axis_t, 0), s->rank) : -1;
		if (axis < 0)
			return axis_t->numel == 1 ? -1 : mc_lower_error(c, "axis (input 2) must hold one value");
		cumsum_along(c, axis);
		return 0;
	}
	if (mc_numel(&c->in[1]->shape) != 1)
		return mc_lower_error(c, "axis (input 2) must hold one value");
	mc_kexpr *a = mc_kb_let(kb, mc_k_cast(kb, MC_KT_I64, mc_lower_load(c, 1, mc_k_index(kb, 0))));
	mc_kexpr *rank = mc_k_int(kb, MC_KT_I64, s->rank);
	a = mc_kb_let(kb, mc_k_select(kb, mc_k_bin(kb, MC_KB_LT, a, mc_k_int(kb, MC_KT_I64, 0)),
	                              mc_k_add(kb, a, rank), a));
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_OR, mc_k_bin(kb, MC_KB_LT, a, mc_k_int(kb, MC_KT_I64, 0)),
	                      mc_k_bin(kb, MC_KB_GE, a, rank)));
	mc_kb_fail(kb, MC_STATUS_BAD_INDEX);
	mc_kb_end(kb);
	for (int d = 0; d < s->rank; d++) {
		mc_kb_if(kb, mc_k_bin(kb, MC_KB_EQ, a, mc_k_int(kb, MC_KT_I64, d)));
		cumsum_along(c, d);
		mc_kb_end(kb);
	}
	return 0;
}

/* ==== TopK ==== */

/* Whether x goes before y (both let-bound) in TopK's order: larger
 * (smaller) first, a NaN counting as larger than every number. */
static mc_kexpr *topk_before(mc_kb *kb, mc_kexpr *x, mc_kexpr *y, bool largest)
{
	mc_kexpr *b = mc_k_bin(kb, largest ? MC_KB_GT : MC_KB_LT, x, y);
	if (!mc_ktype_is_float(x->type))
		return b;
	mc_kexpr *nan_x = mc_k_un(kb, MC_KU_ISNAN, x), *nan_y = mc_k_un(kb, MC_KU_ISNAN, y);
	mc_kexpr *by_nan = largest ? mc_k_bin(kb, MC_KB_AND, nan_x, mc_k_un(kb, MC_KU_NOT, nan_y))
	                           : mc_k_bin(kb, MC_KB_AND, mc_k_un(kb, MC_KU_NOT, nan_x), nan_y);
	return mc_k_bin(kb, MC_KB_OR, b, by_nan);
}

/* Row (o, i) keeps a sorted list of the positions of its k best elements
 * so far in a scratch buffer; each new element is inserted behind the
 * ones it does not beat, so equal values keep the lower index first, as
 * the reference's stable sort does. O(n k) per row. */
static int lower_topk(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const topk_params *p = c->node->params;
	const mc_shape *s = &c->in[0]->shape;
	int axis = norm_axis(c, p->axis, s->rank);
	if (axis < 0)
		return -1;
	int k_out = present_out(c, 0) ? 0 : 1;
	if (!present_out(c, k_out))
		return 0;
	/* k where it was known at compile time; else the outputs are counted,
	 * shaped to the axis' extent, k read at run time (its count) */
	bool counted = c->out[k_out]->counted;
	int64_t k = c->out[k_out]->shape.dims[axis];
	view v = view_around(s, axis, false), ov = v;
	ov.n = k;
	mc_kexpr *kx = mc_k_index(kb, k);
	if (counted) {
		kx = mc_kb_let(kb, mc_k_cast(kb, MC_KT_INDEX, mc_lower_load(c, 1, mc_k_index(kb, 0))));
		/* ONNX Runtime refuses a k outside [0, extent] */
		mc_kb_if(kb, mc_k_bin(kb, MC_KB_OR, mc_k_bin(kb, MC_KB_LT, kx, mc_k_index(kb, 0)),
		                      mc_k_bin(kb, MC_KB_GT, kx, mc_k_index(kb, k))));
		mc_kb_fail(kb, MC_STATUS_BAD_INPUT);
		mc_kb_end(kb);
		if (c->n_out > 2 && c->out[2])
			mc_lower_store(c, 2, NULL, mc_k_index(kb, 0), mc_k_cast(kb, MC_KT_I64, kx));
	} else if (c->n_out > 2 && c->out[2]) {
		mc_lower_store(c, 2, NULL, mc_k_index(kb, 0), mc_k_int(kb, MC_KT_I64, k));
	}
	if (mc_numel(&c->out[k_out]->shape) == 0)
		return 0;
	int list = mc_kb_scratch(kb, MC_INT64, (size_t)k);
	int depth0 = kb->depth;
	/* rows share the scratch list: their loops are not parallel */
	mc_kexpr *o = loop(kb, v.outer, 0);
	mc_kexpr *i = loop(kb, v.inner, 0);
	mc_kexpr *count = mc_kb_local(kb, mc_k_index(kb, 0));
	mc_kexpr *e = mc_kb_fori(kb, v.n, 0);
	mc_kexpr *x = mc_kb_let(kb, mc_lower_load(c, 0, view_at(kb, &v, o, e, i)));
	mc_kexpr *pos = mc_kb_local(kb, count);
	/* walk the list from its end: m = k-1 .. 0, skipping unfilled places */
	mc_kexpr *last = counted ? mc_kb_let(kb, mc_k_addi(kb, kx, -1)) : mc_k_index(kb, k - 1);
	mc_kexpr *step = counted ? mc_kb_for(kb, mc_k_index(kb, 0), kx, 0) : mc_kb_fori(kb, k, 0);
	mc_kexpr *m = mc_kb_let(kb, mc_k_sub(kb, last, step));
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_LT, m, count));
	mc_kexpr *other = mc_kb_let(kb, mc_k_load(kb, list, m));
	mc_kexpr *y = mc_kb_let(kb, mc_lower_load(c, 0, view_at(kb, &v, o, mc_k_cast(kb, MC_KT_INDEX, other), i)));
	mc_kb_if(kb, topk_before(kb, x, y, p->largest));
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_LT, m, last));
	mc_kb_store(kb, list, mc_k_addi(kb, m, 1), other);
	mc_kb_end(kb);
	mc_kb_assign(kb, pos, m);
	mc_kb_else(kb);
	mc_kb_break(kb);
	mc_kb_end(kb); /* if beats */
	mc_kb_end(kb); /* if m < count */
	mc_kb_end(kb); /* for step */
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_LT, pos, kx));
	mc_kb_store(kb, list, pos, mc_k_cast(kb, MC_KT_I64, e));
	mc_kb_end(kb);
	mc_kb_assign(kb, count, mc_k_bin(kb, MC_KB_MIN, mc_k_addi(kb, count, 1), kx));
	mc_kb_end(kb); /* for e */
	mc_kexpr *j = counted ? mc_kb_for(kb, mc_k_index(kb, 0), kx, 0) : mc_kb_fori(kb, k, 0);
	mc_kexpr *src = mc_kb_let(kb, mc_k_load(kb, list, j));
	mc_kexpr *to = mc_kb_let(kb, view_at(kb, &ov, o, j, i));
	if (present_out(c, 0))
		mc_lower_store(c, 0, NULL, to,
		               mc_lower_load(c, 0, view_at(kb, &v, o, mc_k_cast(kb, MC_KT_INDEX, src), i)));
	if (present_out(c, 1))
		mc_lower_store(c, 1, NULL, to, src);
	mc_kb_end(kb);
	if (counted) { /* zeros past k: the padding every later op computes over */
		j = mc_kb_for(kb, kx, mc_k_index(kb, k), 0);
		to = mc_kb_let(kb, view_at(kb, &ov, o, j, i));
		for (int out = 0; out < 2; out++)
			if (present_out(c, out))
				mc_lower_store(c, out, NULL, to, mc_k_const_as(kb, mc_ktype_of(c->out[out]->dtype), 0));
		mc_kb_end(kb);
	}
	close_to(kb, depth0);
	return 0;
}

/* ==== normalisations ==== */

/* Mean and population variance (two passes) of the `count` elements of
 * input 0 at start + j, in type t; both let-bound. */
static void block_mean_var(mc_lower_ctx *c, mc_ktype t, mc_kexpr *start, int64_t count,
                           mc_kexpr **mean, mc_kexpr **var)
{
	mc_kb *kb = c->kb;
	mc_kexpr *n = fconst(kb, t, (double)count);
	mc_kexpr *sum = mc_kb_local(kb, fconst(kb, t, 0));
	mc_kexpr *j = mc_kb_fori(kb, count, MC_KF_REDUCE);
	mc_kb_assign(kb, sum, mc_k_add(kb, sum, mc_k_cast(kb, t, mc_lower_load(c, 0, mc_k_add(kb, start, j)))));
	mc_kb_end(kb);
	*mean = mc_kb_let(kb, mc_k_div(kb, sum, n));
	mc_kexpr *sq = mc_kb_local(kb, fconst(kb, t, 0));
	j = mc_kb_fori(kb, count, MC_KF_REDUCE);
	mc_kexpr *d = mc_kb_let(kb, mc_k_sub(kb, mc_k_cast(kb, t, mc_lower_load(c, 0, mc_k_add(kb, start, j))),
	                                     *mean));
	mc_kb_assign(kb, sq, mc_k_fma(kb, d, d, sq));
	mc_kb_end(kb);
	*var = mc_kb_let(kb, mc_k_div(kb, sq, n));
}

/* 1 / sqrt(var + epsilon), let-bound. */
static mc_kexpr *inv_std(mc_kb *kb, mc_kexpr *var, double epsilon)
{
	mc_ktype t = var->type;
	return mc_kb_let(kb, mc_k_div(kb, fconst(kb, t, 1),
	                              mc_k_un(kb, MC_KU_SQRT, mc_k_add(kb, var, fconst(kb, t, epsilon)))));
}

/* Input i (a per-channel parameter) at index idx, in type t. */
static mc_kexpr *param(mc_lower_ctx *c, int i, mc_kexpr *idx, mc_ktype t)
{
	return mc_kb_let(c->kb, mc_k_cast(c->kb, t, mc_lower_load(c, i, idx)));
}

/* (x - mean) * inv * scale + bias */
static mc_kexpr *normalise(mc_kb *kb, mc_kexpr *x, mc_kexpr *mean, mc_kexpr *inv, mc_kexpr *scale,
                           mc_kexpr *bias)
{
	mc_kexpr *y = mc_k_mul(kb, mc_k_mul(kb, mc_k_sub(kb, x, mean), inv), scale);
	return bias ? mc_k_add(kb, y, bias) : y;
}

/* BatchNormalization: x seen as N x G x inner, G the statistics groups
 * (channels; every (C, D...) position with spatial=0 before opset 9). */
static int lower_batchnorm(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const bn_params *p = c->node->params;
	const mc_shape *s = &c->in[0]->shape;
	view v = {s->dims[0], s->dims[1], 1};
	for (int d = 2; d < s->rank; d++)
		v.inner *= s->dims[d];
	if (!p->spatial) {
		v.n *= v.inner;
		v.inner = 1;
	}
	mc_ktype t = float_type(c->in[0]->dtype);
	int depth0 = kb->depth;
	if (!p->training) {
		mc_kexpr *b = loop(kb, v.outer, MC_KF_PARALLEL);
		mc_kexpr *g = loop(kb, v.n, MC_KF_PARALLEL);
		mc_kexpr *inv = inv_std(kb, param(c, 4, g, t), p->epsilon);
		mc_kexpr *mean = param(c, 3, g, t), *scale = param(c, 1, g, t), *bias = param(c, 2, g, t);
		mc_kexpr *i = loop(kb, v.inner, MC_KF_PARALLEL | MC_KF_VECTOR);
		mc_kexpr *at = mc_kb_let(kb, view_at(kb, &v, b, g, i));
		mc_lower_store(c, 0, NULL, at, normalise(kb, mc_k_cast(kb, t, mc_lower_load(c, 0, at)), mean,
		                                         inv, scale, bias));
		close_to(kb, depth0);
		return 0;
	}
	/* training: the batch's statistics per group over N and inner */
	mc_kexpr *n = fconst(kb, t, (double)(v.outer * v.inner));
	mc_kexpr *g = loop(kb, v.n, MC_KF_PARALLEL);
	int depth_g = kb->depth;
	mc_kexpr *sum = mc_kb_local(kb, fconst(kb, t, 0));
	mc_kexpr *b = loop(kb, v.outer, MC_KF_REDUCE);
	mc_kexpr *i = loop(kb, v.inner, MC_KF_REDUCE);
	mc_kb_assign(kb, sum, mc_k_add(kb, sum, mc_k_cast(kb, t, mc_lower_load(c, 0, view_at(kb, &v, b, g, i)))));
	close_to(kb, depth_g);
	mc_kexpr *mean = mc_kb_let(kb, mc_k_div(kb, sum, n));
	mc_kexpr *sq = mc_kb_local(kb, fconst(kb, t, 0));
	b = loop(kb, v.outer, MC_KF_REDUCE);
	i = loop(kb, v.inner, MC_KF_REDUCE);
	mc_kexpr *d = mc_kb_let(kb, mc_k_sub(kb, mc_k_cast(kb, t, mc_lower_load(c, 0, view_at(kb, &v, b, g, i))),
	                                     mean));
	mc_kb_assign(kb, sq, mc_k_fma(kb, d, d, sq));
	close_to(kb, depth_g);
	mc_kexpr *var = mc_kb_let(kb, mc_k_div(kb, sq, n));
	mc_kexpr *inv = inv_std(kb, var, p->epsilon);
	mc_kexpr *scale = param(c, 1, g, t), *bias = param(c, 2, g, t);
	b = loop(kb, v.outer, 0);
	i = loop(kb, v.inner, MC_KF_VECTOR);
	mc_kexpr *at = mc_kb_let(kb, view_at(kb, &v, b, g, i));
	mc_lower_store(c, 0, NULL, at, normalise(kb, mc_k_cast(kb, t, mc_lower_load(c, 0, at)), mean, inv,
	                                         scale, bias));
	close_to(kb, depth_g);
	/* running statistics by momentum, then the batch's own */
	mc_kexpr *mom = fconst(kb, t, p->momentum), *rest = fconst(kb, t, 1 - p->momentum);
	mc_kexpr *stats[5] = {NULL, NULL, NULL, mean, var};
	if (present_out(c, 1))
		stats[1] = mc_k_add(kb, mc_k_mul(kb, param(c, 3, g, t), mom), mc_k_mul(kb, mean, rest));
	if (present_out(c, 2))
		stats[2] = mc_k_add(kb, mc_k_mul(kb, param(c, 4, g, t), mom), mc_k_mul(kb, var, rest));
	for (int k = 1; k < 5; k++)
		if (present_out(c, k))
			mc_lower_store(c, k, NULL, g, stats[k]);
	close_to(kb, depth0);
	return 0;
}

static int lower_instancenorm(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const eps_params *p = c->node->params;
	const mc_shape *s = &c->in[0]->shape;
	view v = view_around(s, 1, false); /* N x C x (D...) */
	if (mc_numel(s) == 0)
		return 0;
	mc_ktype t = float_type(c->in[0]->dtype);
	int depth0 = kb->depth;
	mc_kexpr *b = loop(kb, v.outer, MC_KF_PARALLEL);
	mc_kexpr *ch = loop(kb, v.n, MC_KF_PARALLEL);
	mc_kexpr *start = mc_kb_let(kb, view_at(kb, &v, b, ch, mc_k_index(kb, 0)));
	mc_kexpr *mean, *var;
	block_mean_var(c, t, start, v.inner, &mean, &var);
	mc_kexpr *inv = inv_std(kb, var, p->epsilon);
	mc_kexpr *scale = param(c, 1, ch, t), *bias = param(c, 2, ch, t);
	mc_kexpr *j = mc_kb_fori(kb, v.inner, MC_KF_VECTOR);
	mc_kexpr *at = mc_kb_let(kb, mc_k_add(kb, start, j));
	mc_lower_store(c, 0, NULL, at, normalise(kb, mc_k_cast(kb, t, mc_lower_load(c, 0, at)), mean, inv,
	                                         scale, bias));
	close_to(kb, depth0);
	return 0;
}

/* GroupNormalization: each group's channels are contiguous. */
static int lower_groupnorm(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const groupnorm_params *p = c->node->params;
	const mc_shape *s = &c->in[0]->shape;
	view v = view_around(s, 1, false); /* N x C x (D...) */
	if (mc_numel(s) == 0)
		return 0;
	int64_t per_group = v.n / p->groups;
	mc_ktype t = float_type(c->in[0]->dtype);
	int depth0 = kb->depth;
	mc_kexpr *b = loop(kb, v.outer, MC_KF_PARALLEL);
	mc_kexpr *g = loop(kb, p->groups, MC_KF_PARALLEL);
	mc_kexpr *first = mc_kb_let(kb, mc_k_muli(kb, g, per_group));
	mc_kexpr *start = mc_kb_let(kb, view_at(kb, &v, b, first, mc_k_index(kb, 0)));
	mc_kexpr *mean, *var;
	block_mean_var(c, t, start, per_group * v.inner, &mean, &var);
	mc_kexpr *inv = inv_std(kb, var, p->epsilon);
	mc_kexpr *ch = loop(kb, per_group, 0);
	mc_kexpr *k = p->per_channel ? mc_k_add(kb, first, ch) : g;
	mc_kexpr *scale = param(c, 1, k, t), *bias = param(c, 2, k, t);
	mc_kexpr *i = mc_kb_fori(kb, v.inner, MC_KF_VECTOR);
	mc_kexpr *at = mc_kb_let(kb, view_at(kb, &v, b, mc_k_add(kb, first, ch), i));
	mc_lower_store(c, 0, NULL, at, normalise(kb, mc_k_cast(kb, t, mc_lower_load(c, 0, at)), mean, inv,
	                                         scale, bias));
	close_to(kb, depth0);
	return 0;
}

/* LayerNormalization and RMSNormalization: rows are the dims before axis,
 * each normalised over the dims from axis on. Opens one loop per leading
 * dim (coords in lead) and returns the row's index. */
static mc_kexpr *open_rows(mc_kb *kb, const mc_shape *s, int axis, mc_kexpr **lead, int64_t *cols)
{
	mc_shape rows = {.rank = axis};
	*cols = 1;
	for (int d = 0; d < s->rank; d++) {
		if (d < axis)
			rows.dims[d] = s->dims[d];
		else
			*cols *= s->dims[d];
	}
	for (int d = 0; d < axis; d++)
		lead[d] = loop(kb, s->dims[d], MC_KF_PARALLEL);
	return mc_kb_let(kb, mc_lower_linear(kb, &rows, lead));
}

/* Loops over the dims from axis on; coords of the whole element in full
 * (lead given), its linear index returned. */
static mc_kexpr *open_tail(mc_kb *kb, const mc_shape *s, int axis, mc_kexpr *const *lead,
                           mc_kexpr **full, unsigned flags)
{
	for (int d = 0; d < s->rank; d++)
		full[d] = d < axis ? lead[d] : loop(kb, s->dims[d], d + 1 == s->rank ? flags : 0);
	return mc_kb_let(kb, mc_lower_linear(kb, s, full));
}

/* Sum of f32 x[start + j] (or of (x - mean)^2 where mean) over j < count:
 * vectors of `lanes`, their lanes, then the rest one by one. */
static mc_kexpr *row_sum_vec(mc_lower_ctx *c, mc_kexpr *start, int64_t count, int lanes,
                             mc_kexpr *mean)
{
	mc_kb *kb = c->kb;
	int64_t full = count / lanes;
	mc_kexpr *vs = mc_kb_local(kb, mc_k_splat(kb, fconst(kb, MC_KT_F32, 0), lanes));
	mc_kexpr *j = mc_kb_fori(kb, full, MC_KF_REDUCE);
	mc_kexpr *x = mc_k_vload(kb, c->in_buf[0], mc_k_add(kb, start, mc_k_muli(kb, j, lanes)), lanes);
	if (mean) {
		x = mc_kb_let(kb, mc_k_sub(kb, x, mean));
		mc_kb_assign(kb, vs, mc_k_fma(kb, x, x, vs));
	} else {
		mc_kb_assign(kb, vs, mc_k_add(kb, vs, x));
	}
	mc_kb_end(kb);
	mc_kexpr *sum = mc_kb_local(kb, lanes_combined(kb, MC_KB_ADD, vs, lanes));
	for (int64_t t = full * lanes; t < count; t++) {
		mc_kexpr *v = mc_k_load(kb, c->in_buf[0], mc_k_addi(kb, start, t));
		if (mean) {
			v = mc_kb_let(kb, mc_k_sub(kb, v, mean));
			mc_kb_assign(kb, sum, mc_k_fma(kb, v, v, sum));
		} else {
			mc_kb_assign(kb, sum, mc_k_add(kb, sum, v));
		}
	}
	return mc_kb_let(kb, sum);
}

/* Whether input i (LayerNormalization's scale or bias) is f32 with one
 * value per element of a row of `cols`. */
static bool per_column(const mc_lower_ctx *c, int i, int64_t cols)
{
	return !present_in(c, i) || (c->in[i]->dtype == MC_FLOAT && (int64_t)mc_numel(&c->in[i]->shape) == cols);
}

static int lower_layernorm(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const layernorm_params *p = c->node->params;
	const mc_shape *s = &c->in[0]->shape;
	int axis = norm_axis(c, p->axis, s->rank);
	if (axis < 0)
		return -1;
	if (mc_numel(s) == 0)
		return 0;
	/* statistics in the stash type (float unless double is asked or given) */
	mc_ktype t = c->in[0]->dtype == MC_DOUBLE || p->stash == MC_DOUBLE ? MC_KT_F64 : MC_KT_F32;
	mc_shape tail = {.rank = s->rank - axis};
	for (int d = axis; d < s->rank; d++)
		tail.dims[d - axis] = s->dims[d];
	int depth0 = kb->depth;
	mc_kexpr *lead[MC_MAX_RANK], *full[MC_MAX_RANK];
	int64_t cols;
	mc_kexpr *row = open_rows(kb, s, axis, lead, &cols);
	mc_kexpr *start = mc_kb_let(kb, mc_k_muli(kb, row, cols));
	int lanes = mc_isa_lanes_upto(kb->isa, cols);
	if (lanes > 1 && t == MC_KT_F32 && c->in[0]->dtype == MC_FLOAT && c->out[0]->dtype == MC_FLOAT &&
	    per_column(c, 1, cols) && per_column(c, 2, cols)) {
		/* one row in vectors: the sum, the squares about the mean, the
		 * normalised row */
		mc_kexpr *n = fconst(kb, t, (double)cols);
		mc_kexpr *mean = mc_kb_let(kb, mc_k_div(kb, row_sum_vec(c, start, cols, lanes, NULL), n));
		mc_kexpr *var = mc_k_div(kb, row_sum_vec(c, start, cols, lanes, mean), n);
		mc_kexpr *inv = inv_std(kb, var, p->epsilon);
		for (int part = 0; part < mc_lower_vec_parts(cols, lanes); part++) {
			int l = part ? 1 : lanes;
			mc_kexpr *j = mc_lower_vec_part_open(kb, part, cols, lanes, MC_KF_PARALLEL);
			mc_kexpr *at = mc_kb_let(kb, mc_k_add(kb, start, j));
			mc_kexpr *bias = present_in(c, 2) ? mc_k_vload(kb, c->in_buf[2], j, l) : NULL;
			mc_kexpr *y = normalise(kb, mc_k_vload(kb, c->in_buf[0], at, l), mean, inv,
			                        mc_k_vload(kb, c->in_buf[1], j, l), bias);
			mc_lower_store_vec(c, 0, NULL, at, y);
			mc_kb_end(kb);
		}
		if (present_out(c, 1))
			mc_lower_store(c, 1, NULL, row, mean);
		if (present_out(c, 2))
			mc_lower_store(c, 2, NULL, row, inv);
		close_to(kb, depth0);
		return 0;
	}
	mc_kexpr *mean, *var;
	block_mean_var(c, t, start, cols, &mean, &var);
	mc_kexpr *inv = inv_std(kb, var, p->epsilon);
	int depth_row = kb->depth;
	mc_kexpr *at = open_tail(kb, s, axis, lead, full, MC_KF_VECTOR);
	mc_kexpr *scale = mc_k_cast(kb, t, mc_lower_load(c, 1, mc_lower_bcast(kb, &c->in[1]->shape, &tail,
	                                                                     full + axis)));
	mc_kexpr *bias = present_in(c, 2)
	                         ? mc_k_cast(kb, t, mc_lower_load(c, 2, mc_lower_bcast(kb, &c->in[2]->shape,
	                                                                               &tail, full + axis)))
	                         : NULL;
	mc_lower_store(c, 0, NULL, at, normalise(kb, mc_k_cast(kb, t, mc_lower_load(c, 0, at)), mean, inv,
	                                         scale, bias));
	close_to(kb, depth_row);
	if (present_out(c, 1))
		mc_lower_store(c, 1, NULL, row, mean);
	if (present_out(c, 2))
		mc_lower_store(c, 2, NULL, row, inv);
	close_to(kb, depth0);
	return 0;
}

static int lower_rmsnorm(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const rms_params *p = c->node->params;
	const mc_shape *s = &c->in[0]->shape;
	int axis = norm_axis(c, p->axis, s->rank);
	if (axis < 0)
		return -1;
	if (mc_numel(s) == 0)
		return 0;
	mc_ktype t = float_type(c->in[0]->dtype);
	int depth0 = kb->depth;
	mc_kexpr *lead[MC_MAX_RANK], *full[MC_MAX_RANK];
	int64_t cols;
	mc_kexpr *row = open_rows(kb, s, axis, lead, &cols);
	mc_kexpr *start = mc_kb_let(kb, mc_k_muli(kb, row, cols));
	mc_kexpr *ss = mc_kb_local(kb, fconst(kb, t, 0));
	mc_kexpr *j = mc_kb_fori(kb, cols, MC_KF_REDUCE);
	mc_kexpr *x = mc_kb_let(kb, mc_k_cast(kb, t, mc_lower_load(c, 0, mc_k_add(kb, start, j))));
	mc_kb_assign(kb, ss, mc_k_fma(kb, x, x, ss));
	mc_kb_end(kb);
	mc_kexpr *inv = inv_std(kb, mc_k_div(kb, ss, fconst(kb, t, (double)cols)), p->epsilon);
	mc_kexpr *at = open_tail(kb, s, axis, lead, full, MC_KF_VECTOR);
	/* the scale broadcasts to the whole of X */
	mc_kexpr *scale = mc_k_cast(kb, t, mc_lower_load(c, 1, mc_lower_bcast(kb, &c->in[1]->shape, s, full)));
	mc_lower_store(c, 0, NULL, at,
	               mc_k_mul(kb, mc_k_mul(kb, mc_k_cast(kb, t, mc_lower_load(c, 0, at)), inv), scale));
	close_to(kb, depth0);
	return 0;
}

static int lower_lpnorm(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const lpnorm_params *p = c->node->params;
	const mc_shape *s = &c->in[0]->shape;
	int axis = norm_axis(c, p->axis, s->rank);
	if (axis < 0)
		return -1;
	if (mc_numel(s) == 0)
		return 0;
	view v = view_around(s, axis, false);
	mc_ktype t = float_type(c->in[0]->dtype);
	int depth0 = kb->depth;
	mc_kexpr *o = loop(kb, v.outer, MC_KF_PARALLEL);
	mc_kexpr *i = loop(kb, v.inner, MC_KF_PARALLEL);
	mc_kexpr *acc = mc_kb_local(kb, fconst(kb, t, 0));
	mc_kexpr *k = mc_kb_fori(kb, v.n, MC_KF_REDUCE);
	mc_kexpr *x = mc_kb_let(kb, mc_k_cast(kb, t, mc_lower_load(c, 0, view_at(kb, &v, o, k, i))));
	if (p->p == 1)
		mc_kb_assign(kb, acc, mc_k_add(kb, acc, mc_k_un(kb, MC_KU_ABS, x)));
	else
		mc_kb_assign(kb, acc, mc_k_fma(kb, x, x, acc));
	mc_kb_end(kb);
	mc_kexpr *norm = p->p == 2 ? mc_kb_let(kb, mc_k_un(kb, MC_KU_SQRT, acc)) : acc;
	/* an all-zero row stays zero (as ONNX Runtime does), not 0/0 */
	mc_kexpr *zero = mc_kb_let(kb, mc_k_bin(kb, MC_KB_EQ, norm, fconst(kb, t, 0)));
	k = mc_kb_fori(kb, v.n, 0);
	mc_kexpr *at = mc_kb_let(kb, view_at(kb, &v, o, k, i));
	mc_lower_store(c, 0, NULL, at,
	               mc_k_select(kb, zero, fconst(kb, t, 0),
	                           mc_k_div(kb, mc_k_cast(kb, t, mc_lower_load(c, 0, at)), norm)));
	close_to(kb, depth0);
	return 0;
}

/* MeanVarianceNormalization over the `axes` attribute (default 0, 2, 3):
 * (x - mean) / (sqrt(var) + 1e-9), as the op's function body. */
static int lower_mvn(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	static const int64_t default_axes[] = {0, 2, 3};
	const mc_shape *s = &c->in[0]->shape;
	const int64_t *axes = default_axes;
	size_t count = 3;
	bool reduced[MC_MAX_RANK];
	if (mc_attr_find(c->node, "axes") && mc_attr_ints(c->node, "axes", &axes, &count))
		return -1;
	if (count > MC_MAX_RANK)
		return mc_lower_error(c, "lists %zu axes, more than any rank", count);
	if (reduced_dims(c, axes, count, true, reduced))
		return -1;
	if (mc_numel(s) == 0)
		return 0;
	int64_t n = 1;
	for (int d = 0; d < s->rank; d++)
		if (reduced[d])
			n *= s->dims[d];
	mc_ktype t = float_type(c->in[0]->dtype);
	int depth0 = kb->depth;
	mc_kexpr *coords[MC_MAX_RANK];
	for (int d = 0; d < s->rank; d++)
		if (!reduced[d])
			coords[d] = loop(kb, s->dims[d], MC_KF_PARALLEL);
	int depth_out = kb->depth;
	mc_kexpr *sum = mc_kb_local(kb, fconst(kb, t, 0));
	mc_kexpr *x = mc_k_cast(kb, t, reduce_loops(c, reduced, coords));
	mc_kb_assign(kb, sum, mc_k_add(kb, sum, x));
	close_to(kb, depth_out);
	mc_kexpr *mean = mc_kb_let(kb, mc_k_div(kb, sum, fconst(kb, t, (double)n)));
	mc_kexpr *sq = mc_kb_local(kb, fconst(kb, t, 0));
	mc_kexpr *d = mc_kb_let(kb, mc_k_sub(kb, mc_k_cast(kb, t, reduce_loops(c, reduced, coords)), mean));
	mc_kb_assign(kb, sq, mc_k_fma(kb, d, d, sq));
	close_to(kb, depth_out);
	mc_kexpr *den = mc_kb_let(kb, mc_k_add(kb, mc_k_un(kb, MC_KU_SQRT, mc_k_div(kb, sq, fconst(kb, t, (double)n))),
	                                       fconst(kb, t, 1e-9)));
	for (int k = 0; k < s->rank; k++)
		if (reduced[k])
			coords[k] = loop(kb, s->dims[k], 0);
	mc_kexpr *at = mc_kb_let(kb, mc_lower_linear(kb, s, coords));
	mc_lower_store(c, 0, coords, at,
	               mc_k_div(kb, mc_k_sub(kb, mc_k_cast(kb, t, mc_lower_load(c, 0, at)), mean), den));
	close_to(kb, depth0);
	return 0;
}

/* LRN: x / (bias + alpha / size * sum of squares over the channel window)^beta */
static int lower_lrn(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const lrn_params *p = c->node->params;
	const mc_shape *s = &c->in[0]->shape;
	view v = view_around(s, 1, false); /* N x C x (D...) */
	if (mc_numel(s) == 0)
		return 0;
	/* the window covers channels [ch - before, ch + after] */
	int64_t before = (p->size - 1) / 2, after = p->size - 1 - before;
	mc_ktype t = float_type(c->in[0]->dtype);
	int depth0 = kb->depth;
	mc_kexpr *b = loop(kb, v.outer, MC_KF_PARALLEL);
	mc_kexpr *ch = loop(kb, v.n, MC_KF_PARALLEL);
	mc_kexpr *i = loop(kb, v.inner, MC_KF_PARALLEL);
	mc_kexpr *lo = mc_k_sub(kb, mc_k_bin(kb, MC_KB_MAX, ch, mc_k_index(kb, before)), mc_k_index(kb, before));
	mc_kexpr *hi = mc_k_bin(kb, MC_KB_MIN, mc_k_addi(kb, ch, after + 1), mc_k_index(kb, v.n));
	mc_kexpr *sq = mc_kb_local(kb, fconst(kb, t, 0));
	mc_kexpr *k = mc_kb_for(kb, lo, hi, MC_KF_REDUCE);
	mc_kexpr *x = mc_kb_let(kb, mc_k_cast(kb, t, mc_lower_load(c, 0, view_at(kb, &v, b, k, i))));
	mc_kb_assign(kb, sq, mc_k_fma(kb, x, x, sq));
	mc_kb_end(kb);
	mc_kexpr *den = mc_k_bin(kb, MC_KB_POW,
	                         mc_k_fma(kb, fconst(kb, t, p->alpha / (double)p->size), sq,
	                                  fconst(kb, t, p->bias)),
	                         fconst(kb, t, p->beta));
	mc_kexpr *at = mc_kb_let(kb, view_at(kb, &v, b, ch, i));
	mc_lower_store(c, 0, NULL, at, mc_k_div(kb, mc_k_cast(kb, t, mc_lower_load(c, 0, at)), den));
	close_to(kb, depth0);
	return 0;
}

/* ==== NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss ==== */

/* Scores x are N x C x D, labels N x D. Per element the loss is
 * -weight[label] * x[n][label][d] (of log_softmax(x) for the cross
 * entropy), 0 where the label is ignore_index; a label outside [0, C)
 * otherwise stops the run with MC_STATUS_BAD_INDEX. The mean divides by
 * the total weight of the elements not ignored. */
static int lower_loss(mc_lower_ctx *c, bool softmax)
{
	mc_kb *kb = c->kb;
	const loss_params *p = c->node->params;
	const mc_shape *s = &c->in[0]->shape;
	view v = view_around(s, 1, false); /* N x C x D */
	mc_ktype t = float_type(c->in[0]->dtype);
	bool each = p->reduction == REDUCE_NONE, weighted = present_in(c, 2);
	int depth0 = kb->depth;
	mc_kexpr *sum = NULL, *wsum = NULL;
	if (!each) {
		sum = mc_kb_local(kb, fconst(kb, t, 0));
		wsum = mc_kb_local(kb, fconst(kb, t, 0));
	}
	unsigned flags = each ? MC_KF_PARALLEL : 0;
	mc_kexpr *b = loop(kb, v.outer, flags);
	mc_kexpr *i = loop(kb, v.inner, flags);
	mc_kexpr *lse = NULL;
	if (softmax && v.n > 0) {
		/* log(sum(exp(x))) over the classes, shifted by their maximum */
		mc_kexpr *mx = mc_kb_local(kb, mc_k_cast(kb, t, mc_lower_load(c, 0, view_at(kb, &v, b, mc_k_index(kb, 0), i))));
		mc_kexpr *k = mc_kb_fori(kb, v.n, MC_KF_REDUCE);
		assign_extreme(kb, mx, mc_kb_let(kb, mc_k_cast(kb, t, mc_lower_load(c, 0, view_at(kb, &v, b, k, i)))), true);
		mc_kb_end(kb);
		mc_kexpr *se = mc_kb_local(kb, fconst(kb, t, 0));
		k = mc_kb_fori(kb, v.n, MC_KF_REDUCE);
		mc_kb_assign(kb, se, mc_k_add(kb, se, mc_k_un(kb, MC_KU_EXP, mc_k_sub(kb, mc_k_cast(kb, t, mc_lower_load(c, 0, view_at(kb, &v, b, k, i))), mx))));
		mc_kb_end(kb);
		lse = mc_kb_let(kb, mc_k_add(kb, mx, mc_k_un(kb, MC_KU_LOG, se)));
		if (present_out(c, 1)) {
			k = mc_kb_fori(kb, v.n, 0);
			mc_kexpr *at = mc_kb_let(kb, view_at(kb, &v, b, k, i));
			mc_lower_store(c, 1, NULL, at, mc_k_sub(kb, mc_k_cast(kb, t, mc_lower_load(c, 0, at)), lse));
			mc_kb_end(kb);
		}
	}
	mc_kexpr *li = mc_kb_let(kb, mc_k_add(kb, mc_k_muli(kb, b, v.inner), i));
	mc_kexpr *label = mc_kb_let(kb, mc_k_cast(kb, MC_KT_I64, mc_lower_load(c, 1, li)));
	mc_kexpr *ignored = p->has_ignore ? mc_kb_let(kb, mc_k_bin(kb, MC_KB_EQ, label, mc_k_int(kb, MC_KT_I64, p->ignore_index)))
	                                  : NULL;
	mc_kexpr *bad = mc_k_bin(kb, MC_KB_OR, mc_k_bin(kb, MC_KB_LT, label, mc_k_int(kb, MC_KT_I64, 0)),
	                         mc_k_bin(kb, MC_KB_GE, label, mc_k_int(kb, MC_KT_I64, v.n)));
	if (ignored)
		bad = mc_k_bin(kb, MC_KB_AND, bad, mc_k_un(kb, MC_KU_NOT, ignored));
	mc_kb_if(kb, bad);
	mc_kb_fail(kb, MC_STATUS_BAD_INDEX);
	mc_kb_end(kb);
	mc_kexpr *cls = label;
	if (ignored)
		cls = mc_k_select(kb, ignored, mc_k_int(kb, MC_KT_I64, 0), label);
	cls = mc_kb_let(kb, mc_k_cast(kb, MC_KT_INDEX, cls));
	mc_kexpr *w = weighted ? mc_k_cast(kb, t, mc_lower_load(c, 2, cls)) : fconst(kb, t, 1);
	if (ignored)
		w = mc_k_select(kb, ignored, fconst(kb, t, 0), w);
	w = mc_kb_let(kb, w);
	mc_kexpr *x = mc_k_cast(kb, t, mc_lower_load(c, 0, view_at(kb, &v, b, cls, i)));
	if (lse)
		x = mc_k_sub(kb, x, lse);
	mc_kexpr *loss = mc_k_un(kb, MC_KU_NEG, mc_k_mul(kb, w, x));
	if (ignored)
		loss = mc_k_select(kb, ignored, fconst(kb, t, 0), loss);
	if (each) {
		mc_lower_store(c, 0, NULL, li, loss);
		close_to(kb, depth0);
		return 0;
	}
	mc_kb_assign(kb, sum, mc_k_add(kb, sum, loss));
	mc_kb_assign(kb, wsum, mc_k_add(kb, wsum, w));
	close_to(kb, depth0);
	mc_lower_store(c, 0, NULL, mc_k_index(kb, 0),
	               p->reduction == REDUCE_SUM ? sum : mc_k_div(kb, sum, wsum));
	return 0;
}

static int lower_nll(mc_lower_ctx *c)
{
	return lower_loss(c, false);
}

static int lower_sce(mc_lower_ctx *c)
{
	return lower_loss(c, true);
}

/* ==== the table ==== */

#define ENTRY(var, name, fn) static const mc_lowering var = { name, fn, NULL, MC_LOWER_EPILOGUE }
ENTRY(l_reduce_sum, MC_OP_ReduceSum, lower_reduce_op);
ENTRY(l_reduce_mean, MC_OP_ReduceMean, lower_reduce_op);
ENTRY(l_reduce_prod, MC_OP_ReduceProd, lower_reduce_op);
ENTRY(l_reduce_max, MC_OP_ReduceMax, lower_reduce_op);
ENTRY(l_reduce_min, MC_OP_ReduceMin, lower_reduce_op);
ENTRY(l_reduce_l1, MC_OP_ReduceL1, lower_reduce_op);
ENTRY(l_reduce_l2, MC_OP_ReduceL2, lower_reduce_op);
ENTRY(l_reduce_log_sum, MC_OP_ReduceLogSum, lower_reduce_op);
ENTRY(l_reduce_log_sum_exp, MC_OP_ReduceLogSumExp, lower_reduce_op);
ENTRY(l_reduce_sum_square, MC_OP_ReduceSumSquare, lower_reduce_op);
ENTRY(l_argmax, MC_OP_ArgMax, lower_arg);
ENTRY(l_argmin, MC_OP_ArgMin, lower_arg);
ENTRY(l_softmax, MC_OP_Softmax, lower_softmax);
ENTRY(l_log_softmax, MC_OP_LogSoftmax, lower_softmax);
ENTRY(l_hardmax, MC_OP_Hardmax, lower_softmax);
ENTRY(l_cumsum, MC_OP_CumSum, lower_cumsum);
ENTRY(l_topk, MC_OP_TopK, lower_topk);
ENTRY(l_batch_norm, MC_OP_BatchNormalization, lower_batchnorm);
ENTRY(l_instance_norm, MC_OP_InstanceNormalization, lower_instancenorm);
ENTRY(l_group_norm, MC_OP_GroupNormalization, lower_groupnorm);
ENTRY(l_layer_norm, MC_OP_LayerNormalization, lower_layernorm);
ENTRY(l_rms_norm, MC_OP_RMSNormalization, lower_rmsnorm);
ENTRY(l_lp_norm, MC_OP_LpNormalization, lower_lpnorm);
ENTRY(l_mvn, MC_OP_MeanVarianceNormalization, lower_mvn);
ENTRY(l_lrn, MC_OP_LRN, lower_lrn);
ENTRY(l_nll, MC_OP_NegativeLogLikelihoodLoss, lower_nll);
ENTRY(l_sce, MC_OP_SoftmaxCrossEntropyLoss, lower_sce);

const mc_lowering *const mc_lower_reduce[] = {
	&l_reduce_sum, &l_reduce_mean, &l_reduce_prod, &l_reduce_max, &l_reduce_min,
	&l_reduce_l1, &l_reduce_l2, &l_reduce_log_sum, &l_reduce_log_sum_exp,
	&l_reduce_sum_square,
	&l_argmax, &l_argmin,
	&l_softmax, &l_log_softmax, &l_hardmax,
	&l_cumsum, &l_topk,
	&l_batch_norm, &l_instance_norm, &l_group_norm, &l_layer_norm, &l_rms_norm,
	&l_lp_norm, &l_mvn, &l_lrn,
	&l_nll, &l_sce,
	NULL,
};
