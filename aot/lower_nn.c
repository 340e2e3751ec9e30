/* Lowerings of the nn family (see aot/aot.h: mc_lowering): convolutions,
 * pools, matrix products and their quantized forms, Einsum and Col2Im.
 *
 * Every op computes one output element at a time in a local accumulator
 * and stores it once through mc_lower_store, so fused epilogues (bias,
 * Relu, Clip, residual Add...) apply there. The geometry comes from the
 * registry's own helpers (libcore/ops/nn.h, quant.h, extra.h). Windows
 * never branch on padding in their reduction loops: the range of valid
 * taps of each dim is computed once per output position. */
#include <math.h>
#include <string.h>

#include "lower.h"
#include "../libcore/ops/extra.h"
#include "../libcore/ops/nn.h"
#include "../libcore/ops/qint.h"
#include "../libcore/ops/quant.h"
#include "lower_window.h"

/* ---- index helpers ---- */

/* The loops over every element of s (extent-1 dims get no loop). */
static int out_loops(mc_kb *kb, const mc_shape *s, mc_kexpr **coords)
{
	int depth = 0;
	for (int d = 0; d < s->rank; d++)
		coords[d] = range(kb, idx(kb, 0), idx(kb, s->dims[d]), MC_KF_PARALLEL, &depth);
	return depth;
}

/* Row-major linear index of coords[0..n) in dims[0..n). */
static mc_kexpr *linear(mc_kb *kb, const int64_t *dims, int n, mc_kexpr *const *coords)
{
	mc_kexpr *lin = idx(kb, 0);
	for (int d = 0; d < n; d++)
		lin = mc_k_add(kb, mc_k_muli(kb, lin, dims[d]), coords[d]);
	return lin;
}

/* sum of st[d] * coords[d] (broadcast strides: zeros vanish). */
static mc_kexpr *strided(mc_kb *kb, const int64_t *st, int n, mc_kexpr *const *coords)
{
	mc_kexpr *lin = idx(kb, 0);
	for (int d = 0; d < n; d++)
		lin = mc_k_add(kb, lin, mc_k_muli(kb, coords[d], st[d]));
	return lin;
}

static bool present(const mc_lower_ctx *c, int i)
{
	return i >= 0 && i < c->n_in && c->in[i] != NULL;
}

/* Input i at index ix, converted to type t. */
static mc_kexpr *load_as(mc_lower_ctx *c, int i, mc_kexpr *ix, mc_ktype t)
{
	return mc_k_cast(c->kb, t, mc_lower_load(c, i, ix));
}

static mc_kexpr *zero(mc_kb *kb, mc_ktype t)
{
	return mc_k_const_as(kb, t, 0);
}

/* ---- windows ---- */

/* Transposed window (ConvTranspose, Col2Im) at output position o: input
 * position i and tap k contribute where i*s + k*d = o + pb = q. With
 * dilation 1 and a stride the loop runs over i (k = q - i*s); otherwise
 * over k (i = (q - k*d) / s, skipping taps where that is not whole). */
typedef struct {
	mc_kexpr *q, *lo, *hi;
	bool over_inputs;
} ttaps;

static void transposed_taps(mc_kb *kb, const dim_geom *g, mc_kexpr *o, ttaps *t)
{
	int64_t qmin = g->pb, qmax = g->out - 1 + g->pb;
	t->q = mc_kb_let(kb, mc_k_addi(kb, o, g->pb));
	t->over_inputs = g->d == 1 && g->s > 1;
	/* loop variable v in [lo, hi): k = q - v*s (over inputs) or i*s = q - v*d */
	int64_t step = t->over_inputs ? g->s : g->d;
	int64_t vmax = t->over_inputs ? g->in : g->k;     /* v's own range */
	int64_t lim = t->over_inputs ? g->k : (g->in - 1) * g->s + 1; /* q - v*step < lim */
	t->lo = idx(kb, 0);
	t->hi = idx(kb, vmax);
	if (qmax - lim >= 0) /* v > (q - lim) / step */
		t->lo = mc_kb_let(kb, imax(kb, idx(kb, 0),
		                           mc_k_addi(kb, floor_div(kb, mc_k_addi(kb, t->q, -lim), step,
		                                                   qmin - lim), 1)));
	if (floor_div_c(qmin, step) + 1 < vmax) /* q - v*step >= 0 */
		t->hi = mc_kb_let(kb, imin(kb, idx(kb, vmax),
		                           mc_k_addi(kb, floor_div(kb, t->q, step, qmin), 1)));
}

/* Opens the loop (and, for a stride not reached by whole taps, the test)
 * of one transposed dim; gives the input position and the tap. */
static void transposed_open(mc_kb *kb, const dim_geom *g, const ttaps *t, mc_kexpr **i,
                            mc_kexpr **k, int *depth)
{
	mc_kexpr *v = range(kb, t->lo, t->hi, MC_KF_REDUCE, depth);
	if (t->over_inputs) {
		*i = v;
		*k = mc_kb_let(kb, mc_k_sub(kb, t->q, mc_k_muli(kb, v, g->s)));
		return;
	}
	*k = v;
	mc_kexpr *r = mc_kb_let(kb, mc_k_sub(kb, t->q, mc_k_muli(kb, v, g->d)));
	if (g->s == 1) {
		*i = r;
		return;
	}
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_EQ, mc_k_bin(kb, MC_KB_REM, r, idx(kb, g->s)), idx(kb, 0)));
	(*depth)++;
	*i = mc_kb_let(kb, mc_k_div(kb, r, idx(kb, g->s)));
}

/* ---- convolutions: Conv, ConvTranspose, ConvInteger, QLinearConv ---- */

typedef struct {
	int nsp;
	int64_t cin, cout, group;
	int64_t kernel[MAX_SP], in[MAX_SP];
	dim_geom dim[MAX_SP];
	bool transposed;
} conv_desc;

/* Which inputs play which part, and the accumulator's type. */
typedef struct {
	int x, w, bias, x_zp, w_zp; /* input indices; -1 when absent */
	mc_ktype acc;
	int64_t x_off;              /* without x_zp: a constant zero point of x */
} conv_io;

static void conv_desc_win(const win_geom *g, const mc_shape *x, int64_t cout, int64_t group,
                          bool transposed, conv_desc *cd)
{
	memset(cd, 0, sizeof *cd);
	cd->nsp = g->nsp;
	cd->cin = x->dims[1];
	cd->cout = cout;
	cd->group = group;
	cd->transposed = transposed;
	for (int i = 0; i < g->nsp; i++) {
		cd->dim[i] = dim_of_win(g, i);
		cd->kernel[i] = g->k[i];
		cd->in[i] = g->in[i];
	}
}

/* A per-channel parameter (zero point, scale) loaded as t: one value for
 * the tensor, or one per output channel oc. */
static mc_kexpr *channel_param(mc_lower_ctx *c, int i, mc_kexpr *oc, mc_ktype t)
{
	bool single = mc_numel(&c->in[i]->shape) == 1;
	return mc_kb_let(c->kb, load_as(c, i, single ? idx(c->kb, 0) : oc, t));
}

/* Opens the output loops of a convolution and accumulates one output
 * element over its group's input channels and its kernel window; returns
 * the accumulator with *depth blocks left open and the output coords. */
static mc_kexpr *conv_accumulate(mc_lower_ctx *c, const conv_desc *cd, const conv_io *io,
                                 mc_kexpr **coords, int *depth)
{
	mc_kb *kb = c->kb;
	int nsp = cd->nsp;
	int64_t cg = cd->cin / cd->group, mg = cd->cout / cd->group;
	int64_t in_plane = 1, ksize = 1;
	for (int i = 0; i < nsp; i++) {
		in_plane *= cd->in[i];
		ksize *= cd->kernel[i];
	}
	mc_kexpr *zx = present(c, io->x_zp) ? mc_kb_let(kb, load_as(c, io->x_zp, idx(kb, 0), io->acc))
	             : io->x_off ? mc_k_int(kb, io->acc, io->x_off) : NULL;
	*depth = out_loops(kb, &c->out[0]->shape, coords);
	mc_kexpr *nb = coords[0], *oc = coords[1];
	mc_kexpr *zw = present(c, io->w_zp) ? channel_param(c, io->w_zp, oc, io->acc) : NULL;
	taps ft[MAX_SP];
	ttaps tt[MAX_SP];
	for (int i = 0; i < nsp; i++) {
		if (cd->transposed)
			transposed_taps(kb, &cd->dim[i], coords[2 + i], &tt[i]);
		else
			fwd_taps(kb, &cd->dim[i], coords[2 + i], &ft[i]);
	}
	mc_kexpr *acc = mc_kb_local(kb, present(c, io->bias) ? load_as(c, io->bias, oc, io->acc)
	                                                     : zero(kb, io->acc));
	/* the group's input channels, and oc's place within its group */
	mc_kexpr *first = idx(kb, 0), *ocl = oc;
	if (cd->group > 1) {
		mc_kexpr *grp = mc_kb_let(kb, mc_k_div(kb, oc, idx(kb, mg)));
		first = mc_kb_let(kb, mc_k_muli(kb, grp, cg));
		if (cd->transposed)
			ocl = mc_kb_let(kb, mc_k_bin(kb, MC_KB_REM, oc, idx(kb, mg)));
	}
	int inner = 0;
	mc_kexpr *icl = range(kb, idx(kb, 0), idx(kb, cg), MC_KF_REDUCE, &inner);
	mc_kexpr *ic = mc_kb_let(kb, mc_k_add(kb, first, icl));
	mc_kexpr *x_base = mc_kb_let(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, nb, cd->cin), ic),
	                                           in_plane));
	/* W is M x C/group x kernel, or C x M/group x kernel transposed */
	mc_kexpr *w_row = cd->transposed ? mc_k_add(kb, mc_k_muli(kb, ic, mg), ocl)
	                                 : mc_k_add(kb, mc_k_muli(kb, oc, cg), icl);
	mc_kexpr *w_base = mc_kb_let(kb, mc_k_muli(kb, w_row, ksize));
	int inner_ic = inner;
	mc_kexpr *part = mc_kb_local(kb, zero(kb, io->acc));
	mc_kexpr *pos[MAX_SP], *tap[MAX_SP];
	for (int i = 0; i < nsp; i++) {
		if (cd->transposed) {
			transposed_open(kb, &cd->dim[i], &tt[i], &pos[i], &tap[i], &inner);
			continue;
		}
		tap[i] = range(kb, ft[i].lo, ft[i].hi, MC_KF_REDUCE, &inner);
		pos[i] = mc_k_add(kb, ft[i].start, mc_k_muli(kb, tap[i], cd->dim[i].d));
	}
	mc_kexpr *xv = load_as(c, io->x, mc_k_add(kb, x_base, linear(kb, cd->in, nsp, pos)), io->acc);
	mc_kexpr *wv = load_as(c, io->w, mc_k_add(kb, w_base, linear(kb, cd->kernel, nsp, tap)),
	                       io->acc);
	if (zx)
		xv = mc_k_sub(kb, xv, zx);
	if (zw)
		wv = mc_k_sub(kb, wv, zw);
	mc_kb_assign(kb, part, mc_k_add(kb, part, mc_k_mul(kb, xv, wv)));
	mc_kb_end_n(kb, inner - inner_ic);
	mc_kb_assign(kb, acc, mc_k_add(kb, acc, part));
	mc_kb_end_n(kb, inner_ic);
	return acc;
}

/* Conv and ConvTranspose: float X, W and an optional bias B. */
static int lower_conv_any(mc_lower_ctx *c, bool transposed)
{
	if (!c->out[0])
		return 0;
	const nn_params *p = c->node->params;
	const mc_shape *xs = &c->in[0]->shape, *ws = &c->in[1]->shape;
	win_geom g;
	if (mc_win_setup(c->node, p, xs, ws->dims + 2, &g) ||
	    (transposed ? mc_win_transposed(c->node, p, &g) : mc_win_forward(c->node, p, &g)))
		return -1;
	conv_desc cd;
	conv_desc_win(&g, xs, c->out[0]->shape.dims[1], p->group, transposed, &cd);
	conv_io io = { 0, 1, present(c, 2) ? 2 : -1, -1, -1, mc_ktype_of(c->out[0]->dtype), 0 };
	mc_kexpr *coords[MC_MAX_RANK];
	int depth;
	mc_kexpr *acc = conv_accumulate(c, &cd, &io, coords, &depth);
	mc_lower_store(c, 0, coords, NULL, acc);
	mc_kb_end_n(c->kb, depth);
	return 0;
}

static int lower_conv(mc_lower_ctx *c)
{
	if (c->kb->target->conv_template) {
		int rc = mc_kern_conv_cuda(c);
		if (rc != 1)
			return rc;
	}
	return lower_conv_any(c, false);
}

static int lower_conv_transpose(mc_lower_ctx *c)
{
	return lower_conv_any(c, true);
}

/* ConvInteger: (X - x_zero_point) conv (W - w_zero_point), in int32 (the
 * output's type: wrapping like it). */
static int lower_conv_integer(mc_lower_ctx *c)
{
	if (!c->out[0])
		return 0;
	const nn_params *p = c->node->params;
	const mc_shape *xs = &c->in[0]->shape, *ws = &c->in[1]->shape;
	win_geom g;
	if (mc_win_setup(c->node, p, xs, ws->dims + 2, &g) || mc_win_forward(c->node, p, &g))
		return -1;
	conv_desc cd;
	conv_desc_win(&g, xs, c->out[0]->shape.dims[1], p->group, false, &cd);
	conv_io io = { 0, 1, -1, 2, 3, MC_KT_I32, 0 };
	mc_kexpr *coords[MC_MAX_RANK];
	int depth;
	mc_kexpr *acc = conv_accumulate(c, &cd, &io, coords, &depth);
	mc_lower_store(c, 0, coords, NULL, acc);
	mc_kb_end_n(c->kb, depth);
	return 0;
}

/* ---- requantisation (QLinearConv, QLinearMatMul) ---- */

/* v rounded to dtype t's precision (float16, bfloat16) by a trip through
 * a one-element scratch buffer of that dtype: the store narrows with
 * round-to-nearest-even, exactly like the reference's round_to. */
static mc_kexpr *round_through(mc_lower_ctx *c, mc_dtype t, mc_kexpr *v, int *scratch)
{
	mc_kb *kb = c->kb;
	if (*scratch < 0)
		*scratch = mc_kb_scratch(kb, t, 1);
	mc_kb_store(kb, *scratch, idx(kb, 0), v);
	return mc_kb_let(kb, mc_k_load(kb, *scratch, idx(kb, 0)));
}

/* The reference's requantisation: factor = (sa * sb) / sy at precision
 * prec (the scales' promoted type), y = saturate(rint(acc * factor + z))
 * in double, NaN giving z. */
typedef struct {
	mc_dtype prec, out;
	int scratch;
} requant;

static mc_kexpr *requantize(mc_lower_ctx *c, requant *rq, mc_kexpr *acc, mc_kexpr *sa,
                            mc_kexpr *sb, mc_kexpr *sy, mc_kexpr *z)
{
	mc_kb *kb = c->kb;
	mc_ktype ft = rq->prec == MC_DOUBLE ? MC_KT_F64 : MC_KT_F32;
	bool narrow = rq->prec == MC_FLOAT16 || rq->prec == MC_BFLOAT16;
	mc_kexpr *prod = mc_kb_let(kb, mc_k_mul(kb, mc_k_cast(kb, ft, sa), mc_k_cast(kb, ft, sb)));
	if (narrow)
		prod = round_through(c, rq->prec, prod, &rq->scratch);
	mc_kexpr *factor = mc_kb_let(kb, mc_k_div(kb, prod, mc_k_cast(kb, ft, sy)));
	if (narrow)
		factor = round_through(c, rq->prec, factor, &rq->scratch);
	mc_kexpr *zf = mc_kb_let(kb, mc_k_cast(kb, MC_KT_F64, z));
	mc_kexpr *v = mc_kb_let(kb, mc_k_add(kb, mc_k_mul(kb, mc_k_cast(kb, MC_KT_F64, acc),
	                                                  mc_k_cast(kb, MC_KT_F64, factor)), zf));
	int64_t lo, hi;
	mc_quant_range(rq->out, &lo, &hi);
	mc_kexpr *r = mc_k_un(kb, MC_KU_RINT, v);
	r = mc_k_bin(kb, MC_KB_MAX, r, mc_k_float(kb, MC_KT_F64, (double)lo));
	r = mc_k_bin(kb, MC_KB_MIN, r, mc_k_float(kb, MC_KT_F64, (double)hi));
	r = mc_k_select(kb, mc_k_un(kb, MC_KU_ISNAN, v), zf, r);
	return mc_k_cast(kb, mc_ktype_of(rq->out), r);
}

/* The precision of the factor: the three scales' types promoted. */
static mc_dtype scale_precision(const mc_lower_ctx *c, int a, int b, int y)
{
	return mc_quant_promote(mc_quant_promote(c->in[a]->dtype, c->in[b]->dtype), c->in[y]->dtype);
}

/* Whether sums of k products of two centred 8-bit values (each within
 * +-255) plus a bias within +-bias_max stay inside int32. */
static bool fits_i32(int64_t k, int64_t bias_max)
{
	return k <= ((int64_t)1 << 31) / (255 * 255) && mc_qi_sum_bound(k, bias_max) <= ((int64_t)1 << 31) - 1;
}

static mc_kexpr *first_value(mc_lower_ctx *c, int i, mc_ktype t)
{
	return present(c, i) ? mc_kb_let(c->kb, load_as(c, i, idx(c->kb, 0), t)) : zero(c->kb, t);
}

static int lower_qlinear_conv(mc_lower_ctx *c)
{
	if (!c->out[0])
		return 0;
	mc_kb *kb = c->kb;
	conv_geom g;
	if (mc_conv_geom_get(c->node, &c->in[QC_X]->shape, &c->in[QC_W]->shape, &g))
		return -1;
	conv_desc cd = { .nsp = g.nsp, .cin = g.in_ch, .cout = g.out_ch, .group = g.group };
	int64_t ksize = g.in_ch / g.group;
	for (int i = 0; i < g.nsp; i++) {
		cd.dim[i] = (dim_geom){ g.in[i], g.out[i], g.kern[i], g.stride[i], g.dil[i], g.pad[i] };
		cd.kernel[i] = g.kern[i];
		cd.in[i] = g.in[i];
		ksize *= g.kern[i];
	}
	/* int32 accumulation where no sum can leave it (a constant bias known) */
	const mc_tensor *bias = present(c, QC_B) ? mc_lower_const(c, QC_B) : NULL;
	int64_t bias_max = present(c, QC_B) && !bias ? (int64_t)1 << 31 : mc_qi_abs_max(bias);
	mc_ktype acc_t = fits_i32(ksize, bias_max) ? MC_KT_I32 : MC_KT_I64;
	conv_io io = { QC_X, QC_W, present(c, QC_B) ? QC_B : -1, QC_X_ZP, QC_W_ZP, acc_t, 0 };
	requant rq = { scale_precision(c, QC_X_SCALE, QC_W_SCALE, QC_Y_SCALE), c->out[0]->dtype, -1 };
	mc_ktype st = mc_ktype_of(c->in[QC_X_SCALE]->dtype);
	mc_kexpr *xs = first_value(c, QC_X_SCALE, st);
	mc_kexpr *ys = first_value(c, QC_Y_SCALE, mc_ktype_of(c->in[QC_Y_SCALE]->dtype));
	mc_kexpr *z = first_value(c, QC_Y_ZP, MC_KT_I32);
	mc_kexpr *coords[MC_MAX_RANK];
	int depth;
	mc_kexpr *acc = conv_accumulate(c, &cd, &io, coords, &depth);
	mc_kexpr *ws = channel_param(c, QC_W_SCALE, coords[1], mc_ktype_of(c->in[QC_W_SCALE]->dtype));
	mc_lower_store(c, 0, coords, NULL, requantize(c, &rq, acc, xs, ws, ys, z));
	mc_kb_end_n(kb, depth);
	return 0;
}

/* QiSoftmax (libcore/ops/qint.c, qisoftmax_eval): per row the max, the
 * sum of the table's exponentials, one 32-bit reciprocal, then each
 * probability (e * r) >> 1 requantised. */
static int lower_qisoftmax(mc_lower_ctx *c)
{
	if (!c->out[0])
		return 0;
	mc_kb *kb = c->kb;
	const qi_params *p = c->node->params;
	const mc_shape *xs = &c->in[0]->shape;
	int64_t axis = mc_qi_softmax_axis(c->node, xs);
	if (axis < 0)
		return -1;
	int64_t n = xs->dims[axis], inner = 1, outer = 1;
	for (int d = (int)axis + 1; d < xs->rank; d++)
		inner *= xs->dims[d];
	for (int d = 0; d < axis; d++)
		outer *= xs->dims[d];
	int depth = 0;
	mc_kexpr *o = range(kb, idx(kb, 0), idx(kb, outer), MC_KF_PARALLEL, &depth);
	mc_kexpr *in = range(kb, idx(kb, 0), idx(kb, inner), MC_KF_PARALLEL, &depth);
	mc_kexpr *base = mc_kb_let(kb, mc_k_add(kb, mc_k_muli(kb, o, n * inner), in));
	mc_kexpr *mx = mc_kb_local(kb, load_as(c, 0, base, MC_KT_I32));
	mc_kexpr *k = mc_kb_fori(kb, n, MC_KF_REDUCE);
	mc_kexpr *xk = load_as(c, 0, mc_k_add(kb, base, mc_k_muli(kb, k, inner)), MC_KT_I32);
	mc_kb_assign(kb, mx, mc_k_bin(kb, MC_KB_MAX, mx, xk));
	mc_kb_end(kb);
	mc_kexpr *sum = mc_kb_local(kb, zero(kb, MC_KT_U32));
	for (int pass = 0; pass < 2; pass++) {
		k = mc_kb_fori(kb, n, pass ? MC_KF_PARALLEL : MC_KF_REDUCE);
		mc_kexpr *at = mc_kb_let(kb, mc_k_add(kb, base, mc_k_muli(kb, k, inner)));
		mc_kexpr *d = mc_k_sub(kb, mx, load_as(c, 0, at, MC_KT_I32));
		mc_kexpr *e = mc_kb_let(kb, load_as(c, 1, mc_k_cast(kb, MC_KT_INDEX, d), MC_KT_U32));
		if (!pass) {
			mc_kb_assign(kb, sum, mc_k_add(kb, sum, e));
			mc_kb_end(kb);
			/* sum >= table[0] > 0; the 32-bit reciprocal, once per row */
			sum = mc_kb_let(kb, mc_k_div(kb, mc_k_int(kb, MC_KT_U32, 0xffffffffu), sum));
			continue;
		}
		mc_kexpr *prob = mc_k_bin(kb, MC_KB_SHR, mc_k_mul(kb, e, sum), mc_k_int(kb, MC_KT_U32, 1));
		mc_lower_store(c, 0, NULL, at,
		               mc_lower_requant(kb, prob, mc_k_int(kb, MC_KT_I32, p->mult),
		                                mc_k_int(kb, MC_KT_I32, p->shift), p->y_zp, p->lo, p->hi));
		mc_kb_end(kb);
	}
	mc_kb_end_n(kb, depth);
	return 0;
}

/* ---- pools ---- */

typedef enum { POOL_MAX, POOL_AVG, POOL_LP } pool_kind;

/* |v|^p summed by LpPool and GlobalLpPool. */
static mc_kexpr *lp_term(mc_kb *kb, mc_kexpr *v, double p)
{
	if (p == 2)
		return mc_k_mul(kb, v, v);
	mc_kexpr *a = mc_k_un(kb, MC_KU_ABS, v);
	return p == 1 ? a : mc_k_bin(kb, MC_KB_POW, a, mc_k_float(kb, v->type, p));
}

static mc_kexpr *lp_root(mc_kb *kb, mc_kexpr *acc, double p)
{
	if (p == 2)
		return mc_k_un(kb, MC_KU_SQRT, acc);
	return p == 1 ? acc : mc_k_bin(kb, MC_KB_POW, acc, mc_k_float(kb, acc->type, 1 / p));
}

/* MaxPool's Indices: the flat offset of pos in the whole input, with the
 * spatial dims counted first-dim-fastest in column-major storage order. */
static mc_kexpr *pool_index(mc_kb *kb, const win_geom *g, mc_kexpr *plane, mc_kexpr *const *pos,
                            bool column_major)
{
	int64_t in_plane = 1, st[MAX_SP];
	for (int i = 0; i < g->nsp; i++) {
		int j = column_major ? i : g->nsp - 1 - i;
		st[j] = in_plane;
		in_plane *= g->in[j];
	}
	mc_kexpr *off = strided(kb, st, g->nsp, pos);
	return mc_k_cast(kb, MC_KT_I64, mc_k_add(kb, mc_k_muli(kb, plane, in_plane), off));
}

static int lower_pool(mc_lower_ctx *c, pool_kind kind)
{
	mc_kb *kb = c->kb;
	const nn_params *p = c->node->params;
	const mc_shape *xs = &c->in[0]->shape;
	bool want_idx = c->n_out > 1 && c->out[1];
	if (!c->out[0] && !want_idx)
		return 0;
	const mc_shape *os = c->out[0] ? &c->out[0]->shape : &c->out[1]->shape;
	win_geom g;
	if (mc_win_setup(c->node, p, xs, NULL, &g) || mc_win_forward(c->node, p, &g))
		return -1;
	int nsp = g.nsp;
	int64_t in_plane = 1;
	for (int i = 0; i < nsp; i++)
		in_plane *= g.in[i];
	mc_ktype t = mc_ktype_of(c->in[0]->dtype);
	mc_kexpr *coords[MC_MAX_RANK];
	int depth = out_loops(kb, os, coords);
	mc_kexpr *plane = mc_kb_let(kb, mc_k_add(kb, mc_k_muli(kb, coords[0], xs->dims[1]), coords[1]));
	mc_kexpr *x_base = mc_kb_let(kb, mc_k_muli(kb, plane, in_plane));
	taps tp[MAX_SP];
	dim_geom dims[MAX_SP];
	for (int i = 0; i < nsp; i++) {
		dims[i] = dim_of_win(&g, i);
		fwd_taps(kb, &dims[i], coords[2 + i], &tp[i]);
	}
	mc_kexpr *acc = mc_kb_local(kb, kind == POOL_MAX ? lowest(kb, t) : zero(kb, t));
	mc_kexpr *arg = want_idx ? mc_kb_local(kb, mc_k_int(kb, MC_KT_I64, -1)) : NULL;
	int inner = 0;
	mc_kexpr *pos[MAX_SP];
	for (int i = 0; i < nsp; i++) {
		mc_kexpr *k = range(kb, tp[i].lo, tp[i].hi, MC_KF_REDUCE, &inner);
		pos[i] = mc_kb_let(kb, mc_k_add(kb, tp[i].start, mc_k_muli(kb, k, g.d[i])));
	}
	mc_kexpr *v = mc_kb_let(kb, mc_lower_load(c, 0, mc_k_add(kb, x_base,
	                                                         linear(kb, g.in, nsp, pos))));
	if (kind == POOL_MAX && arg) {
		/* the first maximum wins, as in the reference */
		mc_kb_if(kb, mc_k_bin(kb, MC_KB_OR, mc_k_bin(kb, MC_KB_GT, v, acc),
		                      mc_k_bin(kb, MC_KB_LT, arg, mc_k_int(kb, MC_KT_I64, 0))));
		mc_kb_assign(kb, acc, v);
		mc_kb_assign(kb, arg, pool_index(kb, &g, plane, pos, p->storage_order == 1));
		mc_kb_end(kb);
	} else if (kind == POOL_MAX) {
		mc_kb_assign(kb, acc, mc_k_select(kb, mc_k_bin(kb, MC_KB_GT, v, acc), v, acc));
	} else {
		mc_kb_assign(kb, acc, mc_k_add(kb, acc, kind == POOL_LP ? lp_term(kb, v, p->p) : v));
	}
	mc_kb_end_n(kb, inner);
	mc_kexpr *result = acc;
	if (kind == POOL_AVG) {
		/* taps in the image (none for a window wholly in the end padding),
		 * or in the explicitly padded image */
		mc_kexpr *count = idx(kb, 1);
		for (int i = 0; i < nsp; i++) {
			mc_kexpr *n = p->count_include_pad
			                      ? padded_taps(kb, &dims[i], g.pe[i], coords[2 + i])
			                      : imax(kb, idx(kb, 0), mc_k_sub(kb, tp[i].hi, tp[i].lo));
			count = mc_k_mul(kb, count, n);
		}
		result = mc_k_div(kb, acc, mc_k_cast(kb, t, count));
	} else if (kind == POOL_LP) {
		result = lp_root(kb, acc, p->p);
	}
	if (c->out[0])
		mc_lower_store(c, 0, coords, NULL, result);
	if (want_idx)
		mc_kb_store(kb, c->out_buf[1], linear(kb, os->dims, os->rank, coords), arg);
	mc_kb_end_n(kb, depth);
	return 0;
}

static int lower_maxpool(mc_lower_ctx *c)
{
	return lower_pool(c, POOL_MAX);
}

static int lower_avgpool(mc_lower_ctx *c)
{
	return lower_pool(c, POOL_AVG);
}

static int lower_lppool(mc_lower_ctx *c)
{
	return lower_pool(c, POOL_LP);
}

/* GlobalAveragePool, GlobalMaxPool, GlobalLpPool: one reduction per
 * (batch, channel) plane. */
static int lower_global_pool(mc_lower_ctx *c, pool_kind kind)
{
	if (!c->out[0])
		return 0;
	mc_kb *kb = c->kb;
	int64_t planes = (int64_t)mc_numel(&c->out[0]->shape);
	int64_t plane = planes ? (int64_t)mc_numel(&c->in[0]->shape) / planes : 0;
	if (plane == 0 && planes > 0)
		return mc_lower_error(c, "%s over empty planes has no C lowering", c->node->op_type);
	mc_ktype t = mc_ktype_of(c->in[0]->dtype);
	double p = kind == POOL_LP ? ((const nn_params *)c->node->params)->p : 0;
	int depth = 0;
	mc_kexpr *pl = range(kb, idx(kb, 0), idx(kb, planes), MC_KF_PARALLEL, &depth);
	mc_kexpr *base = mc_kb_let(kb, mc_k_muli(kb, pl, plane));
	/* the maximum starts at the first element, as in the reference */
	mc_kexpr *acc = mc_kb_local(kb, kind == POOL_MAX ? mc_lower_load(c, 0, base) : zero(kb, t));
	mc_kexpr *i = mc_kb_for(kb, idx(kb, kind == POOL_MAX ? 1 : 0), idx(kb, plane), MC_KF_REDUCE);
	mc_kexpr *v = mc_kb_let(kb, mc_lower_load(c, 0, mc_k_add(kb, base, i)));
	if (kind == POOL_MAX)
		mc_kb_assign(kb, acc, mc_k_select(kb, mc_k_bin(kb, MC_KB_GT, v, acc), v, acc));
	else
		mc_kb_assign(kb, acc, mc_k_add(kb, acc, kind == POOL_LP ? lp_term(kb, v, p) : v));
	mc_kb_end(kb);
	mc_kexpr *result = acc;
	if (kind == POOL_AVG)
		result = mc_k_div(kb, acc, mc_k_float(kb, t, (double)plane));
	else if (kind == POOL_LP)
		result = lp_root(kb, acc, p);
	mc_lower_store(c, 0, NULL, pl, result);
	mc_kb_end_n(kb, depth);
	return 0;
}

static int lower_global_avgpool(mc_lower_ctx *c)
{
	return lower_global_pool(c, POOL_AVG);
}

static int lower_global_maxpool(mc_lower_ctx *c)
{
	return lower_global_pool(c, POOL_MAX);
}

static int lower_global_lppool(mc_lower_ctx *c)
{
	return lower_global_pool(c, POOL_LP);
}

/* ---- matrix products: MatMul, MatMulInteger, QLinearMatMul, Gemm ---- */

/* A numpy matrix product: operand shapes (as given: 1-D stays 1-D), the
 * broadcast batch and M, K, N. */
typedef struct {
	mc_shape a, b, batch;
	int64_t m, k, n;
} mm_desc;

static void mm_desc_of(const mc_shape *a, const mc_shape *b, const mc_shape *batch, int64_t m,
                       int64_t k, int64_t n, mm_desc *d)
{
	*d = (mm_desc){ *a, *b, *batch, m, k, n };
}

/* Where one output element of a matrix product reads its operands. */
typedef struct {
	mc_kexpr *row, *col;                  /* m and n (0 for a 1-D operand) */
	mc_kexpr *a[MC_MAX_RANK], *b[MC_MAX_RANK]; /* operand coords, K's as 0 */
	int ka, kb;                          /* the K dim of each operand */
} mm_point;

/* Coords of an operand shaped s at matrix position (r, cc) (K's coord
 * given as 0): batch dims right-aligned to the output's batch, broadcast
 * ones at 0; a 1-D operand has only its K dim. */
static void operand_coords(mc_kb *kb, const mc_shape *s, const mm_desc *d, mc_kexpr *const *bc,
                           mc_kexpr *r, mc_kexpr *cc, mc_kexpr **out)
{
	if (s->rank == 1) {
		out[0] = idx(kb, 0);
		return;
	}
	int nb = s->rank - 2;
	for (int i = 0; i < nb; i++)
		out[i] = s->dims[i] == 1 ? idx(kb, 0) : bc[i + d->batch.rank - nb];
	out[nb] = r;
	out[nb + 1] = cc;
}

static void mm_point_at(mc_kb *kb, const mm_desc *d, mc_kexpr *const *coords, mm_point *pt)
{
	int nb = d->batch.rank;
	pt->row = d->a.rank >= 2 ? coords[nb] : idx(kb, 0);
	pt->col = d->b.rank >= 2 ? coords[nb + (d->a.rank >= 2)] : idx(kb, 0);
	operand_coords(kb, &d->a, d, coords, pt->row, idx(kb, 0), pt->a);
	operand_coords(kb, &d->b, d, coords, idx(kb, 0), pt->col, pt->b);
	pt->ka = d->a.rank - 1;
	pt->kb = d->b.rank >= 2 ? d->b.rank - 2 : 0;
}

/* Inputs and zero points of a product; zero-point strides over the
 * operand's own coords. */
typedef struct {
	int a, b, a_zp, b_zp;
	int64_t a_zp_st[MC_MAX_RANK], b_zp_st[MC_MAX_RANK];
	mc_ktype acc;
	int64_t a_off;              /* without a_zp: a constant zero point of a */
} mm_io;

/* An operand element at point coords with K = kk, minus its zero point. */
static mc_kexpr *mm_operand(mc_lower_ctx *c, int in, int zp, const int64_t *zp_st,
                            const mc_shape *s, int kdim, mc_kexpr *base, mc_kexpr *zp_base,
                            mc_kexpr *kk, mc_ktype t, int64_t off)
{
	mc_kb *kb = c->kb;
	int64_t kstride = 1;
	for (int i = kdim + 1; i < s->rank; i++)
		kstride *= s->dims[i];
	mc_kexpr *v = load_as(c, in, mc_k_add(kb, base, mc_k_muli(kb, kk, kstride)), t);
	if (!present(c, zp))
		return off ? mc_k_sub(kb, v, mc_k_int(kb, t, off)) : v;
	mc_kexpr *zi = mc_k_add(kb, zp_base, mc_k_muli(kb, kk, zp_st[kdim]));
	return mc_k_sub(kb, v, load_as(c, zp, zi, t));
}

/* Opens the output loops of a matrix product and accumulates one
 * element; returns the accumulator with *depth blocks open. */
static mc_kexpr *mm_accumulate(mc_lower_ctx *c, const mm_desc *d, const mm_io *io,
                               mc_kexpr **coords, mm_point *pt, int *depth)
{
	mc_kb *kb = c->kb;
	*depth = out_loops(kb, &c->out[0]->shape, coords);
	mm_point_at(kb, d, coords, pt);
	mc_kexpr *a_base = mc_kb_let(kb, linear(kb, d->a.dims, d->a.rank, pt->a));
	mc_kexpr *b_base = mc_kb_let(kb, linear(kb, d->b.dims, d->b.rank, pt->b));
	mc_kexpr *za = present(c, io->a_zp) ? mc_kb_let(kb, strided(kb, io->a_zp_st, d->a.rank, pt->a))
	                                    : NULL;
	mc_kexpr *zb = present(c, io->b_zp) ? mc_kb_let(kb, strided(kb, io->b_zp_st, d->b.rank, pt->b))
	                                    : NULL;
	mc_kexpr *acc = mc_kb_local(kb, zero(kb, io->acc));
	int inner = 0;
	mc_kexpr *kk = range(kb, idx(kb, 0), idx(kb, d->k), MC_KF_REDUCE, &inner);
	mc_kexpr *av = mm_operand(c, io->a, io->a_zp, io->a_zp_st, &d->a, pt->ka, a_base, za, kk,
	                          io->acc, io->a_off);
	mc_kexpr *bv = mm_operand(c, io->b, io->b_zp, io->b_zp_st, &d->b, pt->kb, b_base, zb, kk,
	                          io->acc, 0);
	mc_kb_assign(kb, acc, mc_k_add(kb, acc, mc_k_mul(kb, av, bv)));
	mc_kb_end_n(kb, inner);
	return acc;
}

static int lower_matmul(mc_lower_ctx *c)
{
	if (!c->out[0])
		return 0;
	int fast = mc_kern_gemm(c);
	if (fast != 1)
		return fast;
	const mc_shape *as = &c->in[0]->shape, *bs = &c->in[1]->shape;
	mm_dims md;
	mc_shape out;
	if (mc_matmul_dims(c->node, as, bs, &md, &out))
		return -1;
	mm_desc d;
	mm_desc_of(as, bs, &md.batch, md.m, md.k, md.n, &d);
	mm_io io = { .a = 0, .b = 1, .a_zp = -1, .b_zp = -1, .acc = mc_ktype_of(c->out[0]->dtype) };
	mc_kexpr *coords[MC_MAX_RANK];
	mm_point pt;
	int depth;
	mc_kexpr *acc = mm_accumulate(c, &d, &io, coords, &pt, &depth);
	mc_lower_store(c, 0, coords, NULL, acc);
	mc_kb_end_n(c->kb, depth);
	return 0;
}

/* A MatMulInteger zero point (scalar, or one value per row of A / per
 * column of B) as strides over the operand's coords. */
static void row_col_strides(const mc_lower_ctx *c, int zp, const mc_shape *s, int dim,
                            int64_t *st)
{
	memset(st, 0, sizeof(int64_t) * MC_MAX_RANK);
	if (present(c, zp) && mc_numel(&c->in[zp]->shape) > 1 && dim >= 0 && dim < s->rank)
		st[dim] = 1;
}

static int lower_matmul_integer(mc_lower_ctx *c)
{
	if (!c->out[0])
		return 0;
	const mc_shape *as = &c->in[0]->shape, *bs = &c->in[1]->shape;
	mm_dims md;
	mc_shape out;
	if (mc_matmul_dims(c->node, as, bs, &md, &out))
		return -1;
	mm_desc d;
	mm_desc_of(as, bs, &md.batch, md.m, md.k, md.n, &d);
	mm_io io = { .a = 0, .b = 1, .a_zp = 2, .b_zp = 3, .acc = MC_KT_I32 };
	row_col_strides(c, 2, as, as->rank >= 2 ? as->rank - 2 : -1, io.a_zp_st);
	row_col_strides(c, 3, bs, bs->rank >= 2 ? bs->rank - 1 : -1, io.b_zp_st);
	mc_kexpr *coords[MC_MAX_RANK];
	mm_point pt;
	int depth;
	mc_kexpr *acc = mm_accumulate(c, &d, &io, coords, &pt, &depth);
	mc_lower_store(c, 0, coords, NULL, acc);
	mc_kb_end_n(c->kb, depth);
	return 0;
}

/* A quantization parameter of QLinearMatMul at coords of `target`. */
static mc_kexpr *qparam(mc_lower_ctx *c, int i, const mc_shape *target, bool per_row,
                        mc_kexpr *const *coords, mc_ktype t)
{
	int64_t st[MC_MAX_RANK];
	mc_qparam_strides(&c->in[i]->shape, target, per_row, st);
	return mc_kb_let(c->kb, load_as(c, i, strided(c->kb, st, target->rank, coords), t));
}

/* Coords of the promoted (at least 2-D) operand p whose batch dims align
 * with the output's, at matrix position (r, cc). */
static void promoted_coords(mc_kb *kb, const mc_shape *p, const mc_shape *batch,
                            mc_kexpr *const *bc, mc_kexpr *r, mc_kexpr *cc, mc_kexpr **out)
{
	int nb = p->rank - 2;
	for (int i = 0; i < nb; i++)
		out[i] = p->dims[i] == 1 ? idx(kb, 0) : bc[i + batch->rank - nb];
	out[nb] = r;
	out[nb + 1] = cc;
}

static int lower_qlinear_matmul(mc_lower_ctx *c)
{
	if (!c->out[0])
		return 0;
	mc_kb *kb = c->kb;
	const mc_shape *as = &c->in[QM_A]->shape, *bs = &c->in[QM_B]->shape;
	mm_geom g;
	if (mc_mm_geom_get(c->node, as, bs, &g))
		return -1;
	mm_desc d;
	mm_desc_of(as, bs, &g.batch, g.m, g.k, g.n, &d);
	mm_io io = { .a = QM_A, .b = QM_B, .a_zp = QM_A_ZP, .b_zp = QM_B_ZP,
	             .acc = fits_i32(g.k, 0) ? MC_KT_I32 : MC_KT_I64 };
	if (present(c, QM_A_ZP))
		mc_qparam_strides(&c->in[QM_A_ZP]->shape, as, true, io.a_zp_st);
	if (present(c, QM_B_ZP))
		mc_qparam_strides(&c->in[QM_B_ZP]->shape, bs, false, io.b_zp_st);
	requant rq = { scale_precision(c, QM_A_SCALE, QM_B_SCALE, QM_Y_SCALE), c->out[0]->dtype, -1 };
	mc_kexpr *coords[MC_MAX_RANK];
	mm_point pt;
	int depth;
	mc_kexpr *acc = mm_accumulate(c, &d, &io, coords, &pt, &depth);
	/* the scales are read where the reference reads them: A's at K = 0 of
	 * the row, B's at K = 0 of the column, Y's at the element */
	mc_kexpr *pa[MC_MAX_RANK], *pb[MC_MAX_RANK];
	promoted_coords(kb, &g.a, &g.batch, coords, pt.row, idx(kb, 0), pa);
	promoted_coords(kb, &g.b, &g.batch, coords, idx(kb, 0), pt.col, pb);
	mc_kexpr *sa = qparam(c, QM_A_SCALE, &g.a, true, pa, mc_ktype_of(c->in[QM_A_SCALE]->dtype));
	mc_kexpr *sb = qparam(c, QM_B_SCALE, &g.b, false, pb, mc_ktype_of(c->in[QM_B_SCALE]->dtype));
	mc_kexpr *sy = qparam(c, QM_Y_SCALE, &g.out, false, coords,
	                      mc_ktype_of(c->in[QM_Y_SCALE]->dtype));
	mc_kexpr *z = present(c, QM_Y_ZP) ? qparam(c, QM_Y_ZP, &g.out, false, coords, MC_KT_I32)
	                                  : zero(kb, MC_KT_I32);
	mc_lower_store(c, 0, coords, NULL, requantize(c, &rq, acc, sa, sb, sy, z));
	mc_kb_end_n(kb, depth);
	return 0;
}

/* Gemm: alpha * A' B' + beta * C, C broadcast to M x N. Integers stay
 * exact (wrapping) while alpha and beta are 1; otherwise they go through
 * double like the reference. */
static int lower_gemm(mc_lower_ctx *c)
{
	if (!c->out[0])
		return 0;
	int fast = mc_kern_gemm(c);
	if (fast != 1)
		return fast;
	mc_kb *kb = c->kb;
	const nn_params *p = c->node->params;
	const mc_value *cv = present(c, 2) ? c->in[2] : NULL;
	int64_t mkn[3];
	if (mc_gemm_dims(c->node, p, &c->in[0]->shape, &c->in[1]->shape, cv ? &cv->shape : NULL, mkn))
		return -1;
	int64_t m = mkn[0], k = mkn[1], n = mkn[2];
	const mc_shape *os = &c->out[0]->shape;
	mc_ktype t = mc_ktype_of(c->out[0]->dtype);
	mc_kexpr *coords[MC_MAX_RANK];
	int depth = out_loops(kb, os, coords);
	mc_kexpr *row = coords[0], *col = coords[1];
	mc_kexpr *acc = mc_kb_local(kb, zero(kb, t));
	int inner = 0;
	mc_kexpr *kk = range(kb, idx(kb, 0), idx(kb, k), MC_KF_REDUCE, &inner);
	mc_kexpr *ai = p->trans_a ? mc_k_add(kb, mc_k_muli(kb, kk, m), row)
	                          : mc_k_add(kb, mc_k_muli(kb, row, k), kk);
	mc_kexpr *bi = p->trans_b ? mc_k_add(kb, mc_k_muli(kb, col, k), kk)
	                          : mc_k_add(kb, mc_k_muli(kb, kk, n), col);
	mc_kb_assign(kb, acc, mc_k_add(kb, acc, mc_k_mul(kb, mc_lower_load(c, 0, ai),
	                                                 mc_lower_load(c, 1, bi))));
	mc_kb_end_n(kb, inner);
	mc_kexpr *cval = cv ? mc_lower_load(c, 2, mc_lower_bcast(kb, &cv->shape, os, coords)) : NULL;
	mc_kexpr *v = acc;
	if (!mc_ktype_is_float(t) && p->alpha == 1 && p->beta == 1) {
		if (cval)
			v = mc_k_add(kb, acc, cval);
	} else {
		mc_ktype ft = mc_ktype_is_float(t) ? t : MC_KT_F64;
		v = mc_k_cast(kb, ft, acc);
		if (p->alpha != 1)
			v = mc_k_mul(kb, mc_k_float(kb, ft, p->alpha), v);
		if (cval && p->beta != 0) {
			mc_kexpr *cf = mc_k_cast(kb, ft, cval);
			v = mc_k_add(kb, v, p->beta == 1 ? cf : mc_k_mul(kb, mc_k_float(kb, ft, p->beta), cf));
		}
	}
	mc_lower_store(c, 0, coords, NULL, v);
	mc_kb_end_n(kb, depth);
	return 0;
}

/* ---- Einsum: one loop per label, output labels outside, the summed ones
 * inside around one accumulator ---- */
static int lower_einsum(mc_lower_ctx *c)
{
	if (!c->out[0])
		return 0;
	mc_kb *kb = c->kb;
	const mc_shape *shapes[EINSUM_MAX_INPUTS];
	for (int k = 0; k < c->n_in; k++)
		shapes[k] = &c->in[k]->shape;
	einsum_plan pl;
	if (mc_einsum_plan_make(c->node, shapes, &pl))
		return -1;
	mc_ktype t = mc_ktype_of(c->out[0]->dtype);
	mc_kexpr *var[EINSUM_LABELS] = { NULL }, *coords[MC_MAX_RANK];
	int depth = out_loops(kb, &c->out[0]->shape, coords);
	for (int d = 0; d < pl.out_rank; d++)
		var[pl.out_label[d]] = coords[d];
	mc_kexpr *acc = mc_kb_local(kb, zero(kb, t));
	int inner = 0;
	for (int l = 0; l < EINSUM_LABELS; l++)
		if (pl.size[l] >= 0 && !var[l])
			var[l] = range(kb, idx(kb, 0), idx(kb, pl.size[l]), MC_KF_REDUCE, &inner);
	mc_kexpr *prod = NULL;
	for (int k = 0; k < c->n_in; k++) {
		const mc_shape *s = shapes[k];
		mc_kexpr *lin = idx(kb, 0);
		for (int d = 0; d < s->rank; d++) {
			int l = pl.in_label[k][d];
			/* a size-1 ellipsis dim broadcasts; a repeated label walks the diagonal */
			mc_kexpr *x = s->dims[d] == pl.size[l] ? var[l] : idx(kb, 0);
			lin = mc_k_add(kb, mc_k_muli(kb, lin, s->dims[d]), x);
		}
		mc_kexpr *v = load_as(c, k, lin, t);
		prod = prod ? mc_k_mul(kb, prod, v) : v;
	}
	mc_kb_assign(kb, acc, mc_k_add(kb, acc, prod ? prod : mc_k_const_as(kb, t, 1)));
	mc_kb_end_n(kb, inner);
	mc_lower_store(c, 0, coords, NULL, acc);
	mc_kb_end_n(kb, depth);
	return 0;
}

/* ---- Col2Im: each image pixel gathers the column entries that cover it
 * (a transposed window per image dim) ---- */
static int lower_col2im(mc_lower_ctx *c)
{
	if (!c->out[0])
		return 0;
	mc_kb *kb = c->kb;
	const mc_shape *os = &c->out[0]->shape, *xs = &c->in[0]->shape;
	const mc_tensor *bt = mc_lower_const(c, 2);
	int r = os->rank - 2;
	if (!bt || (int)bt->numel != r)
		return mc_lower_error(c, "Col2Im needs a constant block_shape of %d values", r);
	int64_t image[MC_MAX_RANK] = { 0 }, block[MC_MAX_RANK] = { 0 };
	for (int d = 0; d < r; d++) {
		image[d] = os->dims[d + 2];
		block[d] = mc_get_i(bt, (size_t)d);
	}
	col2im_geom g;
	if (mc_col2im_plan(c->node, xs, image, block, r, &g))
		return -1;
	mc_ktype t = mc_ktype_of(c->out[0]->dtype);
	mc_kexpr *coords[MC_MAX_RANK];
	int depth = out_loops(kb, os, coords);
	dim_geom dims[MC_MAX_RANK];
	ttaps tt[MC_MAX_RANK];
	for (int d = 0; d < r; d++) {
		dims[d] = (dim_geom){ g.cols[d], g.image[d], g.block[d], g.stride[d], g.dil[d], g.pad[d] };
		transposed_taps(kb, &dims[d], coords[2 + d], &tt[d]);
	}
	mc_kexpr *acc = mc_kb_local(kb, zero(kb, t));
	mc_kexpr *row0 = mc_kb_let(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, coords[0], g.ch),
	                                                      coords[1]), g.blocks));
	int inner = 0;
	mc_kexpr *col[MC_MAX_RANK], *tap[MC_MAX_RANK];
	for (int d = 0; d < r; d++)
		transposed_open(kb, &dims[d], &tt[d], &col[d], &tap[d], &inner);
	mc_kexpr *row = mc_k_add(kb, row0, linear(kb, g.block, r, tap));
	mc_kexpr *xi = mc_k_add(kb, mc_k_muli(kb, row, xs->dims[2]), linear(kb, g.cols, r, col));
	mc_kb_assign(kb, acc, mc_k_add(kb, acc, load_as(c, 0, xi, t)));
	mc_kb_end_n(kb, inner);
	mc_lower_store(c, 0, coords, NULL, acc);
	mc_kb_end_n(kb, depth);
	return 0;
}

/* ---- table ---- */

/* ---- the integer ops of quantized regions (libcore/ops/qint.h) ---- */


/* QiConv: int32 sums (the quantize pass checked they fit), requantised
 * per output channel. */
static int lower_qiconv(mc_lower_ctx *c)
{
	if (!c->out[0])
		return 0;
	int fast = mc_kern_qdual(c);
	if (fast == 1)
		fast = mc_kern_qvec(c);
	if (fast == 1)
		fast = mc_kern_qdwvec(c);
	if (fast == 1)
		fast = mc_kern_qdw(c);
	if (fast == 1)
		fast = mc_kern_qconv_pointwise(c);
	if (fast == 1)
		fast = mc_kern_qconv_window(c);
	if (fast != 1)
		return fast;
	const qi_params *p = c->node->params;
	conv_geom g;
	if (mc_conv_geom_get(c->node, &c->in[QI_X]->shape, &c->in[QI_W]->shape, &g))
		return -1;
	conv_desc cd = { .nsp = g.nsp, .cin = g.in_ch, .cout = g.out_ch, .group = g.group };
	for (int i = 0; i < g.nsp; i++) {
		cd.dim[i] = (dim_geom){ g.in[i], g.out[i], g.kern[i], g.stride[i], g.dil[i], g.pad[i] };
		cd.kernel[i] = g.kern[i];
		cd.in[i] = g.in[i];
	}
	conv_io io = { QI_X, QI_W, present(c, QI_B) ? QI_B : -1, -1,
	               present(c, QI_W_ZP) ? QI_W_ZP : -1, MC_KT_I32, p->x_zp };
	mc_rq_pack rq;
	mc_rq_prepare(c, &rq);
	mc_kexpr *coords[MC_MAX_RANK];
	int depth;
	mc_kexpr *acc = conv_accumulate(c, &cd, &io, coords, &depth);
	mc_lower_store(c, 0, coords, NULL, mc_rq_emit(c, &rq, acc, coords[1]));
	mc_kb_end_n(c->kb, depth);
	return 0;
}

/* QiMatMul: numpy matmul in int32, bias and requantisation per column. */
static int lower_qimatmul(mc_lower_ctx *c)
{
	if (!c->out[0])
		return 0;
	int fast = mc_kern_qdual(c);
	if (fast == 1)
		fast = mc_kern_qmatvec(c);
	if (fast == 1)
		fast = mc_kern_qmatmul(c);
	if (fast != 1)
		return fast;
	const qi_params *p = c->node->params;
	const mc_shape *as = &c->in[QI_X]->shape, *bs = &c->in[QI_W]->shape;
	mm_geom g;
	if (mc_mm_geom_get(c->node, as, bs, &g))
		return -1;
	mm_desc d;
	mm_desc_of(as, bs, &g.batch, g.m, g.k, g.n, &d);
	mm_io io = { .a = QI_X, .b = QI_W, .a_zp = -1, .b_zp = present(c, QI_W_ZP) ? QI_W_ZP : -1,
	             .acc = MC_KT_I32, .a_off = p->x_zp };
	if (present(c, QI_W_ZP))
		row_col_strides(c, QI_W_ZP, bs, bs->rank >= 2 ? bs->rank - 1 : -1, io.b_zp_st);
	mc_rq_pack rq;
	mc_rq_prepare(c, &rq);
	mc_kexpr *coords[MC_MAX_RANK];
	mm_point pt;
	int depth;
	mc_kexpr *acc = mm_accumulate(c, &d, &io, coords, &pt, &depth);
	if (present(c, QI_B))
		acc = mc_k_add(c->kb, acc, load_as(c, QI_B, pt.col, MC_KT_I32));
	mc_lower_store(c, 0, coords, NULL, mc_rq_emit(c, &rq, mc_kb_let(c->kb, acc), pt.col));
	mc_kb_end_n(c->kb, depth);
	return 0;
}

/* QiAvgPool: the window's sum of x - x_zp, requantised (no padding). */
static int lower_qiavgpool(mc_lower_ctx *c)
{
	if (!c->out[0])
		return 0;
	mc_kb *kb = c->kb;
	const qi_params *p = c->node->params;
	const mc_shape *xs = &c->in[0]->shape;
	int64_t kern[MC_MAX_RANK], stride[MC_MAX_RANK];
	mc_shape os;
	if (mc_qi_pool_geom(c->node, xs, kern, stride, &os))
		return -1;
	int nsp = xs->rank - 2;
	mc_kexpr *coords[MC_MAX_RANK], *pos[MC_MAX_RANK];
	int depth = out_loops(kb, &c->out[0]->shape, coords);
	for (int d = c->out[0]->shape.rank; d < xs->rank; d++) /* keepdims 0: one window */
		coords[d] = idx(kb, 0);
	mc_kexpr *acc = mc_kb_local(kb, zero(kb, MC_KT_I32));
	int inner = 0;
	pos[0] = coords[0];
	pos[1] = coords[1];
	for (int d = 0; d < nsp; d++) {
		mc_kexpr *t = range(kb, idx(kb, 0), idx(kb, kern[d]), MC_KF_REDUCE, &inner);
		pos[d + 2] = mc_k_add(kb, mc_k_muli(kb, coords[d + 2], stride[d]), t);
	}
	mc_kexpr *x = load_as(c, 0, linear(kb, xs->dims, xs->rank, pos), MC_KT_I32);
	mc_kb_assign(kb, acc, mc_k_add(kb, acc, mc_k_sub(kb, x, mc_k_int(kb, MC_KT_I32, p->x_zp))));
	mc_kb_end_n(kb, inner);
	mc_lower_store(c, 0, coords, NULL,
	               mc_lower_requant(kb, acc, mc_k_int(kb, MC_KT_I32, p->mult),
	                                mc_k_int(kb, MC_KT_I32, p->shift), p->y_zp, p->lo, p->hi));
	mc_kb_end_n(kb, depth);
	return 0;
}

#define LOWERING(var, name, fn) static const mc_lowering var = { name, fn, NULL, MC_LOWER_EPILOGUE }

LOWERING(l_conv, MC_OP_Conv, lower_conv);
LOWERING(l_conv_transpose, MC_OP_ConvTranspose, lower_conv_transpose);
LOWERING(l_conv_integer, MC_OP_ConvInteger, lower_conv_integer);
LOWERING(l_qlinear_conv, MC_OP_QLinearConv, lower_qlinear_conv);
LOWERING(l_maxpool, MC_OP_MaxPool, lower_maxpool);
LOWERING(l_avgpool, MC_OP_AveragePool, lower_avgpool);
LOWERING(l_lppool, MC_OP_LpPool, lower_lppool);
LOWERING(l_global_avgpool, MC_OP_GlobalAveragePool, lower_global_avgpool);
LOWERING(l_global_maxpool, MC_OP_GlobalMaxPool, lower_global_maxpool);
LOWERING(l_global_lppool, MC_OP_GlobalLpPool, lower_global_lppool);
LOWERING(l_gemm, MC_OP_Gemm, lower_gemm);
LOWERING(l_matmul, MC_OP_MatMul, lower_matmul);
LOWERING(l_matmul_integer, MC_OP_MatMulInteger, lower_matmul_integer);
LOWERING(l_qlinear_matmul, MC_OP_QLinearMatMul, lower_qlinear_matmul);
LOWERING(l_einsum, MC_OP_Einsum, lower_einsum);
LOWERING(l_col2im, MC_OP_Col2Im, lower_col2im);
LOWERING(l_qiconv, MC_OP_QiConv, lower_qiconv);
LOWERING(l_qimatmul, MC_OP_QiMatMul, lower_qimatmul);
LOWERING(l_qiavgpool, MC_OP_QiAvgPool, lower_qiavgpool);
static const mc_lowering l_qisoftmax = { MC_OP_QiSoftmax, lower_qisoftmax, NULL, 0 };

const mc_lowering *const mc_lower_nn[] = {
	&l_conv, &l_conv_transpose, &l_conv_integer, &l_qlinear_conv,
	&l_maxpool, &l_avgpool, &l_lppool,
	&l_global_avgpool, &l_global_maxpool, &l_global_lppool,
	&l_gemm, &l_matmul, &l_matmul_integer, &l_qlinear_matmul,
	&l_einsum, &l_col2im,
	&l_qiconv, &l_qimatmul, &l_qiavgpool, &l_qisoftmax,
	NULL,
};
