/* Fast kernel: depthwise convolution in channels-last layout (NhwcConv
 * with group == C == M, float32, constant weight).
 *
 * out[n,oh,ow,ch] = bias[ch] + sum_{kh,kw} in[n, oh*s-pb+kh*d, ow*s-pb+kw*d, ch]
 *                                          * w[ch,0,kh,kw]
 *
 * Channels are the vector dim (kern_nhwc.h's chunks: the widest vectors,
 * narrower tails, then scalars). The weight is packed at generation time
 * as [kH][kW][Cpad], so each tap of a channel chunk is one vector load.
 * Rows: border rows compute their range of kernel rows inside the input
 * once per row; interior rows read all of them (with 32 registers, blocks
 * unroll them too). Columns: the interior ones (whole window inside the input)
 * go in blocks of MR output pixels, unrolled over the pixels and the kernel
 * columns: each weight vector feeds MR FMAs and each input vector is loaded
 * once for every tap that reads it; the border columns are done one by one
 * with their own tap ranges. Stores go through mc_lower_store_vec, so
 * fused epilogues (Relu, Clip, residual Add...) apply lane-wise. */
#include "lower.h"
#include "kern_nhwc.h"
#include "../libcore/ops/nn.h"

/* Kernel columns unrolled in a block; wider windows loop over them. */
#define DW_UNROLL_KW 8
/* Taps of a block unrolled whole (kernel rows too) in interior rows, with
 * 32 registers (measured on Zen 4: 10% faster with AVX-512, 15% slower
 * with AVX2's 16). */
#define DW_UNROLL_TAPS 25
/* Most pixels of a block (measured on Zen 4, 3x3 on 64x64x24 and
 * 16x16x96: 8 beats 4, 6 and 12 with AVX-512; AVX2's 16 registers allow 6
 * at stride 1, and 6 beats 4 there). */
#define DW_MAX_PIXELS 8
/* Most input vectors one block row may load (unrolled blocks). */
#define DW_MAX_SPAN 64

typedef struct {
	mc_lower_ctx *c;
	mc_nhwc_geom g;
	int wbuf;          /* packed weights [kH][kW][cp] */
	int64_t cp;
	bool bias;
	mc_kexpr *n, *oh;  /* the output row */
	mc_nhwc_taps th;   /* its kernel rows */
	mc_kexpr *ow;      /* the first output column of the block or pixel */
	int mr;            /* pixels of the block; 0: one border pixel */
	mc_nhwc_taps tw;   /* the border pixel's kernel columns */
} dw_gen;

static mc_kexpr *idx(mc_kb *kb, int64_t v)
{
	return mc_k_index(kb, v);
}

mc_tensor *mc_dw_taps_first(const mc_tensor *w, int64_t c, const int64_t *k, int nk, int64_t cp)
{
	mc_shape s = { .rank = nk + 1 };
	int64_t taps = 1;
	for (int i = 0; i < nk; i++)
		taps *= s.dims[i] = k[i];
	s.dims[nk] = cp;
	mc_tensor *t = mc_tensor_new(MC_FLOAT, &s);
	if (!t)
		return NULL;
	float *dst = t->data;
	for (int64_t ch = 0; ch < c; ch++)
		for (int64_t tap = 0; tap < taps; tap++)
			dst[tap * cp + ch] = (float)mc_get_f(w, (size_t)(ch * taps + tap));
	return t;
}

/* Linear index of input element (n, ih, iw, ch). */
static mc_kexpr *x_row(dw_gen *d, mc_kexpr *ih)
{
	mc_kb *kb = d->c->kb;
	mc_kexpr *row = mc_k_add(kb, mc_k_muli(kb, d->n, d->g.h.in), ih);
	return mc_kb_let(kb, mc_k_muli(kb, row, d->g.w.in * d->g.c));
}

static mc_kexpr *x_at(dw_gen *d, mc_kexpr *row, mc_kexpr *iw, mc_kexpr *c0, int lanes)
{
	mc_kb *kb = d->c->kb;
	mc_kexpr *i = mc_k_add(kb, mc_k_add(kb, row, mc_k_muli(kb, iw, d->g.c)), c0);
	return mc_nhwc_vload(kb, d->c->in_buf[0], i, lanes);
}

static mc_kexpr *w_at(dw_gen *d, mc_kexpr *kh, mc_kexpr *kw, mc_kexpr *c0, int lanes)
{
	mc_kb *kb = d->c->kb;
	mc_kexpr *tap = mc_k_add(kb, mc_k_muli(kb, kh, d->g.w.k), kw);
	return mc_nhwc_vload(kb, d->wbuf, mc_k_add(kb, mc_k_muli(kb, tap, d->cp), c0), lanes);
}

static mc_kexpr *acc_init(dw_gen *d, mc_kexpr *c0, int lanes)
{
	mc_kb *kb = d->c->kb;
	if (d->bias)
		return mc_kb_local(kb, mc_nhwc_vload(kb, d->c->in_buf[2], c0, lanes));
	return mc_kb_local(kb, mc_k_splat(kb, mc_k_float(kb, MC_KT_F32, 0), lanes));
}

static void store_pixel(dw_gen *d, mc_kexpr *ow, mc_kexpr *c0, mc_kexpr *acc)
{
	mc_kexpr *coords[4];
	int r = 0;
	coords[r++] = d->n;
	if (d->g.rank == 4)
		coords[r++] = d->oh;
	coords[r++] = ow;
	coords[r] = c0;
	mc_nhwc_store(d->c, coords, acc);
}

/* One kernel row of a block: the kernel columns unrolled, each input
 * vector bound once (stride 1 windows of neighbouring pixels overlap). */
static void block_row_unrolled(dw_gen *d, mc_kexpr *row, mc_kexpr *kh, mc_kexpr *iw0,
                               mc_kexpr *c0, int lanes, mc_kexpr **acc)
{
	mc_kb *kb = d->c->kb;
	mc_kexpr *xv[DW_MAX_SPAN] = { NULL };
	for (int64_t kw = 0; kw < d->g.w.k; kw++) {
		mc_kexpr *w = mc_kb_let(kb, w_at(d, kh, idx(kb, kw), c0, lanes));
		for (int r = 0; r < d->mr; r++) {
			int64_t j = r * d->g.w.s + kw * d->g.w.d;
			if (!xv[j])
				xv[j] = mc_kb_let(kb, x_at(d, row, mc_k_addi(kb, iw0, j), c0, lanes));
			mc_kb_assign(kb, acc[r], mc_k_fma(kb, xv[j], w, acc[r]));
		}
	}
}

/* One kernel row of a block whose window is too wide to unroll. */
static void block_row_loop(dw_gen *d, mc_kexpr *row, mc_kexpr *kh, mc_kexpr *iw0,
                           mc_kexpr *c0, int lanes, mc_kexpr **acc)
{
	mc_kb *kb = d->c->kb;
	mc_kexpr *kw = mc_kb_fori(kb, d->g.w.k, MC_KF_REDUCE);
	mc_kexpr *w = mc_kb_let(kb, w_at(d, kh, kw, c0, lanes));
	mc_kexpr *iw = mc_kb_let(kb, mc_k_add(kb, iw0, mc_k_muli(kb, kw, d->g.w.d)));
	for (int r = 0; r < d->mr; r++)
		mc_kb_assign(kb, acc[r], mc_k_fma(kb, x_at(d, row, mc_k_addi(kb, iw, r * d->g.w.s),
		                                          c0, lanes), w, acc[r]));
	mc_kb_end(kb);
}

static bool unrolled(const dw_gen *d)
{
	return d->g.w.k <= DW_UNROLL_KW &&
	       (d->mr - 1) * d->g.w.s + (d->g.w.k - 1) * d->g.w.d < DW_MAX_SPAN;
}

/* A block of mr interior pixels from d->ow, for one channel chunk. */
static void block_chunk(void *ctx, mc_kexpr *c0, int lanes)
{
	dw_gen *d = ctx;
	mc_kb *kb = d->c->kb;
	mc_kexpr *acc[DW_MAX_SPAN];
	for (int r = 0; r < d->mr; r++)
		acc[r] = acc_init(d, c0, lanes);
	mc_kexpr *iw0 = mc_kb_let(kb, mc_k_addi(kb, mc_k_muli(kb, d->ow, d->g.w.s), -d->g.w.pb));
	int64_t kh_lo, kh_hi;
	if (unrolled(d) && d->c->kb->isa->vregs >= 32 && mc_k_is_const(d->th.lo, &kh_lo) &&
	    mc_k_is_const(d->th.hi, &kh_hi) && (kh_hi - kh_lo) * d->g.w.k <= DW_UNROLL_TAPS) {
		/* every kernel row in straight-line code: the weights of the
		 * chunk are the same for every block, loads the compiler may keep */
		for (int64_t kh = kh_lo; kh < kh_hi; kh++) {
			mc_kexpr *ih = mc_k_add(kb, d->th.start, idx(kb, kh * d->g.h.d));
			block_row_unrolled(d, x_row(d, ih), idx(kb, kh), iw0, c0, lanes, acc);
		}
	} else {
		int depth = 0;
		mc_kexpr *kh = mc_nhwc_range(kb, d->th.lo, d->th.hi, MC_KF_REDUCE, &depth);
		mc_kexpr *row = x_row(d, mc_k_add(kb, d->th.start, mc_k_muli(kb, kh, d->g.h.d)));
		if (unrolled(d))
			block_row_unrolled(d, row, kh, iw0, c0, lanes, acc);
		else
			block_row_loop(d, row, kh, iw0, c0, lanes, acc);
		mc_kb_end_n(kb, depth);
	}
	for (int r = 0; r < d->mr; r++)
		store_pixel(d, mc_k_addi(kb, d->ow, r), c0, acc[r]);
}

/* One border pixel d->ow (its taps d->tw), for one channel chunk. */
static void pixel_chunk(void *ctx, mc_kexpr *c0, int lanes)
{
	dw_gen *d = ctx;
	mc_kb *kb = d->c->kb;
	mc_kexpr *acc = acc_init(d, c0, lanes);
	int depth = 0;
	mc_kexpr *kh = mc_nhwc_range(kb, d->th.lo, d->th.hi, MC_KF_REDUCE, &depth);
	mc_kexpr *row = x_row(d, mc_k_add(kb, d->th.start, mc_k_muli(kb, kh, d->g.h.d)));
	mc_kexpr *kw = mc_nhwc_range(kb, d->tw.lo, d->tw.hi, MC_KF_REDUCE, &depth);
	mc_kexpr *iw = mc_k_add(kb, d->tw.start, mc_k_muli(kb, kw, d->g.w.d));
	mc_kb_assign(kb, acc, mc_k_fma(kb, x_at(d, row, iw, c0, lanes), w_at(d, kh, kw, c0, lanes),
	                               acc));
	mc_kb_end_n(kb, depth);
	store_pixel(d, d->ow, c0, acc);
}

/* Border pixels [lo, hi) of the row, one at a time. */
static void border_pixels(dw_gen *d, int64_t lo, int64_t hi)
{
	if (lo >= hi)
		return;
	mc_kb *kb = d->c->kb;
	int depth = 0;
	d->ow = mc_nhwc_range(kb, idx(kb, lo), idx(kb, hi), MC_KF_PARALLEL, &depth);
	d->mr = 0;
	mc_nhwc_taps_at(kb, &d->g.w, d->ow, &d->tw);
	mc_nhwc_chunks(kb, d->g.c, pixel_chunk, d);
	mc_kb_end_n(kb, depth);
}

/* n blocks of mr pixels from column first. */
static void blocks(dw_gen *d, int64_t first, int64_t n, int mr)
{
	if (n <= 0 || mr <= 0)
		return;
	mc_kb *kb = d->c->kb;
	int depth = 0;
	mc_kexpr *b = mc_nhwc_range(kb, idx(kb, 0), idx(kb, n), MC_KF_PARALLEL, &depth);
	d->ow = mc_kb_let(kb, mc_k_addi(kb, mc_k_muli(kb, b, mr), first));
	d->mr = mr;
	mc_nhwc_chunks(kb, d->g.c, block_chunk, d);
	mc_kb_end_n(kb, depth);
}

/* Pixels per block: the accumulators, one weight and the input vectors of
 * one kernel row fill at most the ISA's registers. */
static int block_pixels(const mc_isa *isa, const mc_nhwc_dim *w)
{
	int mr = DW_MAX_PIXELS;
	while (mr > 1 && mr + 1 + (mr - 1) * w->s + (w->k - 1) * w->d + 1 > isa->vregs)
		mr--;
	return mr;
}

static void gen_row(dw_gen *d)
{
	int64_t lo, hi;
	mc_nhwc_interior(&d->g.w, &lo, &hi);
	int mr = block_pixels(d->c->kb->isa, &d->g.w);
	int64_t nb = (hi - lo) / mr, rest = (hi - lo) % mr;
	border_pixels(d, 0, lo);
	blocks(d, lo, nb, mr);
	blocks(d, lo + nb * mr, 1, (int)rest);
	border_pixels(d, hi, d->g.w.out);
}

/* Output row d->oh: an interior one reads every kernel row (a range known
 * now, which blocks unroll), the others their own range of kernel rows. */
static void row(dw_gen *d, bool interior)
{
	mc_kb *kb = d->c->kb;
	if (interior)
		d->th = (mc_nhwc_taps){ mc_kb_let(kb, mc_k_addi(kb, mc_k_muli(kb, d->oh, d->g.h.s),
		                                                -d->g.h.pb)),
		                        idx(kb, 0), idx(kb, d->g.h.k) };
	else
		mc_nhwc_taps_at(kb, &d->g.h, d->oh, &d->th);
	gen_row(d);
}

/* Output rows [lo, hi), all interior or all not. */
static void rows(dw_gen *d, int64_t lo, int64_t hi, bool interior)
{
	if (lo >= hi)
		return;
	mc_kb *kb = d->c->kb;
	int depth = 0;
	d->oh = mc_nhwc_range(kb, idx(kb, lo), idx(kb, hi), MC_KF_PARALLEL, &depth);
	row(d, interior);
	mc_kb_end_n(kb, depth);
}

/* --threads: every output row in one loop, each an interior row [lo, hi)
 * or a border one: one hand-over to the workers, not three, and their
 * shares of rows those of the kernels around (the same sums as rows()'s). */
static void all_rows(dw_gen *d, int64_t lo, int64_t hi)
{
	mc_kb *kb = d->c->kb;
	int depth = 0;
	d->oh = mc_nhwc_range(kb, idx(kb, 0), idx(kb, d->g.h.out), MC_KF_PARALLEL, &depth);
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_AND, mc_k_bin(kb, MC_KB_GE, d->oh, idx(kb, lo)),
	                      mc_k_bin(kb, MC_KB_LT, d->oh, idx(kb, hi))));
	row(d, true);
	mc_kb_else(kb);
	row(d, false);
	mc_kb_end(kb);
	mc_kb_end_n(kb, depth);
}

/* Whether the node is a float32 depthwise convolution this kernel does:
 * group == C == M, one input channel per group, constant weight. */
static bool is_depthwise(const mc_lower_ctx *c, const mc_nhwc_geom *g)
{
	const nn_params *p = c->node->params;
	const mc_tensor *w = mc_lower_const(c, 1);
	if (!w || w->dtype != MC_FLOAT || c->in[1]->shape.rank != g->rank)
		return false;
	if (p->group != g->c || c->in[1]->shape.dims[0] != g->c || c->in[1]->shape.dims[1] != 1)
		return false;
	bool bias = c->n_in > 2 && c->in[2];
	return !bias || (c->in[2]->dtype == MC_FLOAT && mc_numel(&c->in[2]->shape) == (size_t)g->c);
}

int mc_kern_dwconv_nhwc(mc_lower_ctx *c)
{
	if (!c->out[0] || c->n_in < 2 || !c->in[1] || c->in[1]->shape.rank < 3)
		return 1;
	mc_nhwc_geom g;
	int rc = mc_nhwc_geom_of(c, c->in[1]->shape.dims + 2, &g);
	if (rc)
		return rc;
	if (!is_depthwise(c, &g) || g.c == 0 || g.n == 0)
		return 1;
	mc_kb *kb = c->kb;
	int64_t wide = kb->isa->max_lanes;
	dw_gen d = { .c = c, .g = g, .cp = (g.c + wide - 1) / wide * wide,
	             .bias = c->n_in > 2 && c->in[2] };
	mc_tensor *packed = mc_dw_taps_first(mc_lower_const(c, 1), g.c, (int64_t[]){ g.h.k, g.w.k }, 2, d.cp);
	if (!packed)
		return mc_lower_error(c, "out of memory packing the depthwise weight");
	d.wbuf = mc_kb_packed(kb, packed);
	int depth = 0;
	d.n = mc_nhwc_range(kb, idx(kb, 0), idx(kb, g.n), MC_KF_PARALLEL, &depth);
	int64_t lo, hi;
	mc_nhwc_interior(&g.h, &lo, &hi);
	if (kb->threads > 1 && lo < hi && (lo > 0 || hi < g.h.out)) {
		all_rows(&d, lo, hi);
	} else {
		rows(&d, 0, lo, false);
		rows(&d, lo, hi, true);
		rows(&d, hi, g.h.out, false);
	}
	mc_kb_end_n(kb, depth);
	return 0;
}
