/* Fast kernel for dense channels-last convolutions (NhwcConv, group 1,
 * float32, 1-D or 2-D; see aot/aot.h: mc_kern_conv_nhwc).
 *
 * The weight [M, C, kH, kW] is packed at generation time into column
 * panels of output channels, [panel][kH][kW][C][width] (kern.h), the bias
 * into the accumulators' initial values. A 1x1 convolution with stride 1
 * and no padding is one flat GEMM over the pixels. Any other is an
 * implicit GEMM without an im2col buffer, one output row at a time: the
 * pixels of the row whose taps along W all lie inside the input go in
 * register tiles of mr pixels; the border pixels go one by one with their
 * own tap ranges (computed per pixel: the reduction loops never branch).
 * Along H the tap range is computed once per row and serves every tile.
 * Where the rows are short and the input small, every output pixel goes
 * in flat tiles instead, as a GEMM over an implicit A (flat_pixels). */
#include <string.h>

#include "kern.h"
#include "lower_window.h"

/* The geometry as 2-D: a 1-D convolution has H = kH = 1. */
typedef struct {
	int nsp;
	int64_t batch, cin, cout;
	dim_geom h, w;
	const kt_cols *cols;
	int w_buf, bias_buf;
} conv_geom;

/* ---- packing ---- */

typedef struct {
	const mc_tensor *w;
	int64_t cin, kh, kw;
} w_source;

/* Reduction index kk = (tap_h * kW + tap_w) * C + c; column m. */
static double w_at(const void *ctx, int64_t kk, int64_t m)
{
	const w_source *s = ctx;
	int64_t c = kk % s->cin, tap = kk / s->cin;
	int64_t th = tap / s->kw, tw = tap % s->kw;
	return mc_get_f(s->w, (size_t)(((m * s->cin + c) * s->kh + th) * s->kw + tw));
}

static double bias_at(const void *ctx, int64_t kk, int64_t m)
{
	(void)kk;
	return mc_get_f(ctx, (size_t)m);
}

/* ---- the implicit GEMM ---- */

/* The reduction of one tile over taps [hlo, hhi) x [wlo, whi) and every
 * channel: with dilation 1 along W the taps of one kernel row and their
 * channels are one contiguous run of the input and of the packed weight. */
static void conv_reduce(mc_kb *kb, const conv_geom *cg, kt_tile *t, const taps *th,
                        mc_kexpr *wlo, mc_kexpr *whi)
{
	int64_t C = cg->cin, row = cg->w.in * C;
	int depth = 0;
	mc_kexpr *kh = range(kb, th->lo, th->hi, MC_KF_REDUCE, &depth);
	mc_kexpr *a_h = mc_k_muli(kb, kh, cg->h.d * row), *b_h = mc_k_muli(kb, kh, cg->w.k * C);
	if (cg->w.d == 1) {
		mc_kexpr *j = range(kb, mc_k_muli(kb, wlo, C), mc_k_muli(kb, whi, C), MC_KF_REDUCE,
		                    &depth);
		kt_tile_step(kb, t, 0, mc_k_add(kb, a_h, j), mc_k_add(kb, b_h, j));
	} else {
		mc_kexpr *kw = range(kb, wlo, whi, MC_KF_REDUCE, &depth);
		mc_kexpr *ch = range(kb, idx(kb, 0), idx(kb, C), MC_KF_REDUCE, &depth);
		mc_kexpr *a = mc_k_add(kb, a_h, mc_k_add(kb, mc_k_muli(kb, kw, cg->w.d * C), ch));
		mc_kexpr *b = mc_k_add(kb, b_h, mc_k_add(kb, mc_k_muli(kb, kw, C), ch));
		kt_tile_step(kb, t, 0, a, b);
	}
	mc_kb_end_n(kb, depth);
}

/* A tile of mr pixels ow0.. of output row (nb, oh) on one panel; wt gives
 * the W taps of pixel ow0 (all pixels of a tile share their tap range). */
static void conv_tile(mc_lower_ctx *c, const conv_geom *cg, kt_panel panel, mc_kexpr *nb,
                      mc_kexpr *oh, const taps *th, mc_kexpr *ow0, const taps *wt, int mr)
{
	mc_kb *kb = c->kb;
	kt_tile t = { .panel = panel, .mr = mr, .sets = 1, .a_buf = c->in_buf[0], .b_buf = cg->w_buf };
	/* input pixel of tap (0, 0) of ow0; later pixels are s_w pixels apart */
	mc_kexpr *in_row = mc_k_add(kb, mc_k_muli(kb, nb, cg->h.in), th->start);
	mc_kexpr *pix0 = mc_kb_let(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, in_row, cg->w.in),
	                                                      wt->start), cg->cin));
	mc_kexpr *out_row = mc_kb_let(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, nb, cg->h.out), oh),
	                                             cg->w.out));
	mc_kexpr *lin[KT_MAX_MR], **coords[KT_MAX_MR];
	for (int r = 0; r < mr; r++) {
		t.a_row[r] = mc_k_addi(kb, pix0, r * cg->w.s * cg->cin);
		mc_kexpr *ow = mc_kb_let(kb, mc_k_addi(kb, ow0, r));
		lin[r] = mc_k_muli(kb, mc_k_add(kb, out_row, ow), cg->cout);
		coords[r] = mc_kpool_alloc(kb->pool, sizeof *coords[r] * MC_MAX_RANK);
		coords[r][0] = nb;
		if (cg->nsp == 2)
			coords[r][1] = oh;
		coords[r][cg->nsp] = ow;
		coords[r][cg->nsp + 1] = idx(kb, 0);
	}
	kt_tile_init(kb, &t, cg->bias_buf);
	conv_reduce(kb, cg, &t, th, wt->lo, wt->hi);
	kt_tile_store(c, &t, lin, coords);
}

/* Output pixels [lo, hi) of a row one at a time, each with its W taps. */
static void border_pixels(mc_lower_ctx *c, const conv_geom *cg, kt_panel panel, mc_kexpr *nb,
                          mc_kexpr *oh, const taps *th, int64_t lo, int64_t hi)
{
	mc_kb *kb = c->kb;
	if (lo >= hi)
		return;
	int depth = 0;
	mc_kexpr *ow = range(kb, idx(kb, lo), idx(kb, hi), MC_KF_PARALLEL, &depth);
	taps wt;
	fwd_taps(kb, &cg->w, ow, &wt);
	conv_tile(c, cg, panel, nb, oh, th, ow, &wt, 1);
	mc_kb_end_n(kb, depth);
}

/* Pixels [lo, hi) whose W taps are all inside: tiles of mr, then the rest. */
static void inner_pixels(mc_lower_ctx *c, const conv_geom *cg, kt_panel panel, mc_kexpr *nb,
                         mc_kexpr *oh, const taps *th, int64_t lo, int64_t hi)
{
	mc_kb *kb = c->kb;
	int mr = panel.shape->mr;
	int64_t blocks = (hi - lo) / mr, rest = (hi - lo) % mr;
	for (int part = 0; part < 2; part++) {
		int64_t n = part == 0 ? blocks : (rest > 0);
		if (n == 0)
			continue;
		int depth = 0;
		mc_kexpr *b = range(kb, idx(kb, 0), idx(kb, n), MC_KF_PARALLEL, &depth);
		mc_kexpr *ow0 = part == 0 ? mc_kb_let(kb, mc_k_addi(kb, mc_k_muli(kb, b, mr), lo))
		                          : idx(kb, lo + blocks * mr);
		taps wt = { mc_kb_let(kb, mc_k_addi(kb, mc_k_muli(kb, ow0, cg->w.s), -cg->w.pb)),
		            idx(kb, 0), idx(kb, cg->w.k) };
		conv_tile(c, cg, panel, nb, oh, th, ow0, &wt, part == 0 ? mr : (int)rest);
		mc_kb_end_n(kb, depth);
	}
}

/* The output positions along W whose taps all lie inside the input:
 * [*lo, *hi) (empty when none). */
static void inner_range(const dim_geom *w, int64_t *lo, int64_t *hi)
{
	*lo = (w->pb + w->s - 1) / w->s;
	int64_t room = w->in - 1 - (w->k - 1) * w->d + w->pb; /* last start + pb */
	*hi = room < 0 ? 0 : room / w->s + 1;
	if (*hi > w->out)
		*hi = w->out;
	if (*lo > *hi)
		*lo = *hi;
}

/* One output row of one panel: border, inner tiles, border. */
static void row_panel(mc_lower_ctx *c, const conv_geom *cg, kt_panel panel, mc_kexpr *nb,
                      mc_kexpr *oh, const taps *th)
{
	int64_t lo, hi;
	inner_range(&cg->w, &lo, &hi);
	border_pixels(c, cg, panel, nb, oh, th, 0, lo);
	inner_pixels(c, cg, panel, nb, oh, th, lo, hi);
	border_pixels(c, cg, panel, nb, oh, th, hi, cg->w.out);
}

/* ---- short rows: tiles over the flat index of output pixels ----
 * Where output rows are short (resnet50's 7x7 and 14x14 stages), tiles of
 * one row leave a rest tile in every row and take the border pixels one at
 * a time: each such tile reads its whole panel for the work of a few rows.
 * Over an input that stays in L2 the tiles instead run over the flat index
 * (n, oh, ow) of every output pixel, each row of a tile with its own input
 * corner; the padding comes from a copy of the input with zeros around it,
 * so every pixel takes every tap (the zero taps add nothing: the sums are
 * those of the row tiles). */
typedef struct {
	int buf;          /* the input, or its padded copy */
	conv_geom g;      /* the geometry over it: no padding */
} flat_input;

/* The extent of input positions that the windows along one dim read,
 * counted from the first padded position. */
static int64_t read_extent(const dim_geom *d)
{
	return (d->out - 1) * d->s + (d->k - 1) * d->d + 1;
}

static bool needs_padding(const dim_geom *d)
{
	return d->pb > 0 || read_extent(d) - d->pb > d->in;
}

static int64_t flat_input_bytes(const conv_geom *cg)
{
	if (needs_padding(&cg->h) || needs_padding(&cg->w))
		return 4 * cg->batch * read_extent(&cg->h) * read_extent(&cg->w) * cg->cin;
	/* windows that skip pixels (a strided 1x1) read fewer than all */
	int64_t all = 4 * cg->batch * cg->h.in * cg->w.in * cg->cin;
	int64_t windows = 4 * cg->batch * cg->h.out * cg->w.out * cg->h.k * cg->w.k * cg->cin;
	return windows < all ? windows : all;
}

/* Tiles a row of `width` output pixels takes, tiled row by row (the inner
 * pixels in tiles of mr and one rest tile, each border pixel one tile). */
static int64_t row_tiles(const dim_geom *w, int mr)
{
	int64_t lo, hi;
	inner_range(w, &lo, &hi);
	int64_t inner = hi - lo;
	return inner / mr + (inner % mr > 0) + (w->out - inner);
}

/* Flat tiles where row tiles would take a quarter more tiles, over an
 * input (padded) that stays in L2. */
#define FLAT_TILE_GAIN 1.25
static bool flat_pays(const mc_kb *kb, const conv_geom *cg, const kt_cols *row_cols,
                      const kt_cols *flat_cols)
{
	if (kb->isa->max_lanes <= 1 || kb->for_memory)
		return false;
	/* sizes_vary (--dim LO..HI): one image's, so that a dynamic batch
	 * takes the same tiles at every size */
	int64_t bytes = flat_input_bytes(cg) / (kb->sizes_vary && cg->batch > 0 ? cg->batch : 1);
	if (bytes > KT_BIG_B_A_BYTES)
		return false;
	double by_rows = (double)row_tiles(&cg->w, kt_tile_rows(row_cols));
	double flat = (double)cg->w.out / kt_tile_rows(flat_cols);
	return by_rows > FLAT_TILE_GAIN * flat;
}

/* The padded copy (where padding is needed) and the geometry over it. */
static void flat_input_of(mc_lower_ctx *c, const conv_geom *cg, flat_input *fi)
{
	mc_kb *kb = c->kb;
	fi->g = *cg;
	fi->buf = c->in_buf[0];
	if (!needs_padding(&cg->h) && !needs_padding(&cg->w))
		return;
	int64_t hp = read_extent(&cg->h), wp = read_extent(&cg->w), C = cg->cin;
	fi->buf = mc_kb_scratch(kb, MC_FLOAT, (size_t)(cg->batch * hp * wp * C));
	int depth = 0;
	mc_kexpr *nb = range(kb, idx(kb, 0), idx(kb, cg->batch), MC_KF_PARALLEL, &depth);
	mc_kexpr *y = range(kb, idx(kb, 0), idx(kb, hp), MC_KF_PARALLEL, &depth);
	mc_kexpr *x = range(kb, idx(kb, 0), idx(kb, wp), MC_KF_PARALLEL, &depth);
	mc_kexpr *iy = mc_kb_let(kb, mc_k_addi(kb, y, -cg->h.pb));
	mc_kexpr *ix = mc_kb_let(kb, mc_k_addi(kb, x, -cg->w.pb));
	mc_kexpr *inside = mc_kb_let(kb,
		mc_k_bin(kb, MC_KB_AND,
		         mc_k_bin(kb, MC_KB_AND, mc_k_bin(kb, MC_KB_GE, iy, idx(kb, 0)),
		                  mc_k_bin(kb, MC_KB_LT, iy, idx(kb, cg->h.in))),
		         mc_k_bin(kb, MC_KB_AND, mc_k_bin(kb, MC_KB_GE, ix, idx(kb, 0)),
		                  mc_k_bin(kb, MC_KB_LT, ix, idx(kb, cg->w.in)))));
	mc_kexpr *from = mc_kb_let(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb,
	                           mc_k_muli(kb, nb, cg->h.in), iy), cg->w.in), ix), C));
	mc_kexpr *to = mc_kb_let(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb,
	                         mc_k_muli(kb, nb, hp), y), wp), x), C));
	int lanes = mc_isa_lanes_upto(kb->isa, C);
	for (int part = 0; part < mc_lower_vec_parts(C, lanes); part++) {
		mc_kexpr *i = mc_lower_vec_part_open(kb, part, C, lanes, 0);
		bool vec = part == 0 && lanes > 1;
		mc_kexpr *zero = mc_k_float(kb, MC_KT_F32, 0);
		mc_kexpr *v = vec ? mc_k_vload(kb, c->in_buf[0], mc_k_add(kb, from, i), lanes)
		                  : mc_k_load(kb, c->in_buf[0], mc_k_add(kb, from, i));
		/* the select evaluates only the side it takes: no load outside */
		mc_kexpr *val = mc_k_select(kb, inside, v, vec ? mc_k_splat(kb, zero, lanes) : zero);
		mc_kb_store(kb, fi->buf, mc_k_add(kb, to, i), val);
		mc_kb_end(kb);
	}
	mc_kb_end_n(kb, depth);
	fi->g.h.in = hp;
	fi->g.w.in = wp;
	fi->g.h.pb = 0;
	fi->g.w.pb = 0;
}

/* The implicit A of the flat tiles (kt_implicit_a): output pixel `row`
 * (over the batch) reads from its window's corner, step kk (tap row,
 * then tap column and channel) from there. */
static mc_kexpr *flat_row_at(mc_kb *kb, const void *ctx, mc_kexpr *row)
{
	const conv_geom *g = &((const flat_input *)ctx)->g;
	mc_kexpr *ow = mc_kb_let(kb, mc_k_bin(kb, MC_KB_REM, row, idx(kb, g->w.out)));
	mc_kexpr *q = mc_kb_let(kb, mc_k_div(kb, row, idx(kb, g->w.out)));
	mc_kexpr *oh = mc_kb_let(kb, mc_k_bin(kb, MC_KB_REM, q, idx(kb, g->h.out)));
	mc_kexpr *nb = mc_kb_let(kb, mc_k_div(kb, q, idx(kb, g->h.out)));
	mc_kexpr *in_row = mc_k_add(kb, mc_k_muli(kb, nb, g->h.in), mc_k_muli(kb, oh, g->h.s));
	return mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, in_row, g->w.in), mc_k_muli(kb, ow, g->w.s)),
	                 g->cin);
}

/* kk = (tap_h * kW + tap_w) * C + c as packed (w_at); with dilation 1
 * along W a tap row's taps and channels are one run of the input. */
static mc_kexpr *flat_k_at(mc_kb *kb, const void *ctx, mc_kexpr *kk)
{
	const conv_geom *g = &((const flat_input *)ctx)->g;
	int64_t C = g->cin, row = g->w.k * C;
	mc_kexpr *th = mc_k_div(kb, kk, idx(kb, row));
	mc_kexpr *at_h = mc_k_muli(kb, th, g->h.d * g->w.in * C);
	mc_kexpr *in_row = mc_k_bin(kb, MC_KB_REM, kk, idx(kb, row));
	if (g->w.d == 1)
		return mc_k_add(kb, at_h, in_row);
	mc_kexpr *tw = mc_k_div(kb, in_row, idx(kb, C));
	return mc_k_add(kb, at_h, mc_k_add(kb, mc_k_muli(kb, tw, g->w.d * C),
	                                   mc_k_bin(kb, MC_KB_REM, kk, idx(kb, C))));
}

/* Every output pixel as one GEMM over the implicit A. */
static void flat_pixels(mc_lower_ctx *c, const conv_geom *cg)
{
	flat_input fi;
	flat_input_of(c, cg, &fi);
	kt_implicit_a ia = { flat_row_at, flat_k_at, cg->w.d == 1 ? cg->w.k * cg->cin : cg->cin,
	                     flat_input_bytes(cg), &fi };
	kt_gemm gm = { .rows = cg->batch * cg->h.out * cg->w.out, .k = cg->h.k * cg->w.k * cg->cin,
	               .a_buf = fi.buf, .b_buf = cg->w_buf, .bias_buf = cg->bias_buf, .cols = cg->cols,
	               .implicit = &ia };
	kt_gemm_emit(c, &gm);
}

/* ---- writing the output over the input: a ring of rows ----
 * With --optimize memory, where the input dies at this kernel, output rows
 * go into a ring of scratch rows and are copied out once no later row reads
 * the input rows their bytes cover, so the plan may give the output the
 * input's storage (TinyEngine's in-place depthwise, for any convolution
 * with stride 1 along H). Rows no longer than the input's run upward and
 * leave `delay` rows in the ring (pad top: input row r is last read by
 * output row r + delay); longer rows (a 1x1 convolution widening the
 * channels) run downward, each copied out at once: output row o covers
 * input rows o and up, all read by then. */
typedef struct {
	int buf;
	int64_t rows, delay, row_elems;
	bool down;
} row_ring;

static bool ring_of(mc_lower_ctx *c, const conv_geom *cg, row_ring *r)
{
	mc_kb *kb = c->kb;
	if (!kb->for_memory || !kb->input0_dies || cg->nsp != 2 || cg->h.s != 1 || cg->h.pb < 0 ||
	    cg->h.out != cg->h.in)
		return false;
	int64_t out_row = cg->w.out * cg->cout, in_row = cg->w.in * cg->cin;
	r->down = out_row > in_row;
	if (r->down && (cg->h.k != 1 || cg->h.pb != 0))
		return false;
	r->delay = cg->h.pb;
	r->rows = r->delay + 1;
	r->row_elems = out_row;
	r->buf = mc_kb_scratch(kb, MC_FLOAT, (size_t)(r->rows * out_row));
	c->ring_buf = r->buf;
	c->ring_elems = r->rows * out_row;
	kb->k->inplace_input0 = true;
	kb->k->inplace_grows = r->down;
	return true;
}

/* Output row g (over the batch: n * H + oh) from its ring slot. */
static void ring_copy_out(mc_lower_ctx *c, const row_ring *r, mc_kexpr *g)
{
	mc_kb *kb = c->kb;
	mc_kexpr *to = mc_kb_let(kb, mc_k_muli(kb, g, r->row_elems));
	mc_kexpr *from = mc_kb_let(kb, mc_k_muli(kb, mc_k_bin(kb, MC_KB_REM, g, idx(kb, r->rows)),
	                                         r->row_elems));
	int lanes = mc_isa_lanes_upto(kb->isa, r->row_elems);
	for (int part = 0; part < mc_lower_vec_parts(r->row_elems, lanes); part++) {
		mc_kexpr *i = mc_lower_vec_part_open(kb, part, r->row_elems, lanes, 0);
		mc_kexpr *from_i = mc_k_add(kb, from, i);
		mc_kexpr *v = part == 0 && lanes > 1 ? mc_k_vload(kb, r->buf, from_i, lanes)
		                                     : mc_k_load(kb, r->buf, from_i);
		mc_kb_store(kb, c->out_buf[0], mc_k_add(kb, to, i), v);
		mc_kb_end(kb);
	}
}

/* Every output row of one panel. */
static void panel_of_every_row(mc_lower_ctx *c, const conv_geom *cg, kt_panel panel)
{
	mc_kb *kb = c->kb;
	int nb_depth = 0, oh_depth = 0;
	mc_kexpr *nb = range(kb, idx(kb, 0), idx(kb, cg->batch), MC_KF_PARALLEL, &nb_depth);
	mc_kexpr *oh = range(kb, idx(kb, 0), idx(kb, cg->h.out), MC_KF_PARALLEL, &oh_depth);
	taps th;
	fwd_taps(kb, &cg->h, oh, &th);
	row_panel(c, cg, panel, nb, oh, &th);
	mc_kb_end_n(kb, oh_depth + nb_depth);
}

/* A big weight (kern.h: kt_b_is_big) over an input that stays in L2:
 * panel by panel, each over every output row, so that each panel is read
 * from memory once, not once an output row. */
static bool panels_outside(const conv_geom *cg)
{
	int64_t in_bytes = 4 * cg->batch * cg->h.in * cg->w.in * cg->cin;
	return kt_b_is_big(cg->cols) && in_bytes <= KT_BIG_B_A_BYTES;
}

static void implicit_gemm(mc_lower_ctx *c, const conv_geom *cg)
{
	mc_kb *kb = c->kb;
	const kt_cols *cols = cg->cols;
	row_ring ring;
	bool ringed = ring_of(c, cg, &ring);
	if (!ringed && panels_outside(cg)) {
		if (cols->n_main > 0) {
			int pd = 0;
			mc_kexpr *p = range(kb, idx(kb, 0), idx(kb, cols->n_main), MC_KF_PARALLEL, &pd);
			panel_of_every_row(c, cg, kt_main_panel(kb, cols, p));
			mc_kb_end_n(kb, pd);
		}
		if (cols->tail.nvec > 0)
			panel_of_every_row(c, cg, kt_tail_panel(kb, cols));
		return;
	}
	/* the ring's rows go in order */
	unsigned rows = ringed ? 0 : MC_KF_PARALLEL;
	int nb_depth = 0, oh_depth = 0;
	mc_kexpr *nb = range(kb, idx(kb, 0), idx(kb, cg->batch), rows, &nb_depth);
	if (ringed && ring.down) /* every row of the batch downward, the images too */
		nb = mc_kb_let(kb, mc_k_sub(kb, idx(kb, cg->batch - 1), nb));
	mc_kexpr *oh = range(kb, idx(kb, 0), idx(kb, cg->h.out), rows, &oh_depth);
	if (ringed && ring.down)
		oh = mc_kb_let(kb, mc_k_sub(kb, idx(kb, cg->h.out - 1), oh));
	taps th;
	fwd_taps(kb, &cg->h, oh, &th);
	if (cols->n_main > 0) {
		int pd = 0;
		mc_kexpr *p = range(kb, idx(kb, 0), idx(kb, cols->n_main), MC_KF_PARALLEL, &pd);
		row_panel(c, cg, kt_main_panel(kb, cols, p), nb, oh, &th);
		mc_kb_end_n(kb, pd);
	}
	if (cols->tail.nvec > 0)
		row_panel(c, cg, kt_tail_panel(kb, cols), nb, oh, &th);
	if (ringed) {
		mc_kexpr *g = mc_kb_let(kb, mc_k_add(kb, mc_k_muli(kb, nb, cg->h.out), oh));
		if (ring.delay > 0) {
			mc_kb_if(kb, mc_k_bin(kb, MC_KB_GE, oh, idx(kb, ring.delay)));
			ring_copy_out(c, &ring, mc_k_addi(kb, g, -ring.delay));
			mc_kb_end(kb);
		} else {
			ring_copy_out(c, &ring, g);
		}
	}
	mc_kb_end_n(kb, oh_depth);
	if (ringed && ring.delay > 0) {
		/* the batch's last rows */
		int64_t from = cg->h.out > ring.delay ? cg->h.out - ring.delay : 0;
		mc_kexpr *last = mc_kb_for(kb, idx(kb, from), idx(kb, cg->h.out), 0);
		ring_copy_out(c, &ring, mc_k_add(kb, mc_k_muli(kb, nb, cg->h.out), last));
		mc_kb_end(kb);
	}
	mc_kb_end_n(kb, nb_depth);
}

/* ---- entry ---- */

/* The channels-first view [N, C, D1..] of a channels-last shape. */
static mc_shape nchw_view(const mc_shape *s)
{
	mc_shape r = { .rank = s->rank };
	r.dims[0] = s->dims[0];
	r.dims[1] = s->dims[s->rank - 1];
	for (int i = 2; i < s->rank; i++)
		r.dims[i] = s->dims[i - 1];
	return r;
}

/* 1x1, stride 1, no padding: the output pixels are the input pixels. */
static bool is_pointwise(const win_geom *g)
{
	for (int i = 0; i < g->nsp; i++)
		if (g->k[i] != 1 || g->s[i] != 1 || g->pb[i] != 0 || g->in[i] != g->out[i])
			return false;
	return true;
}

static int conv_geom_of(mc_lower_ctx *c, win_geom *g, conv_geom *cg)
{
	const mc_shape *xs = &c->in[0]->shape, *os = &c->out[0]->shape;
	mc_shape view = nchw_view(xs);
	if (mc_win_setup(c->node, c->node->params, &view, c->in[1]->shape.dims + 2, g) ||
	    mc_win_forward(c->node, c->node->params, g))
		return -1;
	memset(cg, 0, sizeof *cg);
	cg->nsp = g->nsp;
	cg->batch = xs->dims[0];
	cg->cin = xs->dims[xs->rank - 1];
	cg->cout = os->dims[os->rank - 1];
	cg->h = (dim_geom){ 1, 1, 1, 1, 1, 0 };
	if (g->nsp == 2)
		cg->h = dim_of_win(g, 0);
	cg->w = dim_of_win(g, g->nsp - 1);
	return 0;
}

int mc_kern_conv_nhwc(mc_lower_ctx *c)
{
	const nn_params *p = c->node->params;
	if (!c->out[0] || p->group != 1 || !mc_is_f32(c->out[0]) || !mc_is_f32(c->in[0]) ||
	    !mc_is_f32(c->in[1]))
		return 1;
	int rank = c->in[0]->shape.rank;
	const mc_tensor *w = mc_lower_const(c, 1);
	const mc_value *bv = c->n_in > 2 ? c->in[2] : NULL;
	const mc_tensor *bias = bv ? mc_lower_const(c, 2) : NULL;
	if ((rank != 3 && rank != 4) || !w || (bv && (!bias || !mc_is_f32(bv))) ||
	    mc_numel(&c->out[0]->shape) == 0 || mc_numel(&c->in[0]->shape) == 0)
		return 1;
	win_geom g;
	conv_geom cg;
	if (conv_geom_of(c, &g, &cg))
		return -1;
	mc_kb *kb = c->kb;
	int64_t k = cg.h.k * cg.w.k * cg.cin;
	bool flat = is_pointwise(&g);
	int64_t rows = flat ? cg.batch * cg.h.out * cg.w.out : cg.w.out;
	/* a flat GEMM unless the output is to take the input's place as it
	 * goes (--optimize memory) */
	bool flat_gemm = flat && !(kb->for_memory && kb->input0_dies);
	if (flat_gemm && c->in_buf[1] >= 0 && (!bias || c->in_buf[2] >= 0) && kt_blas_operands_plain(c) &&
	    kt_blas_takes(kb, 1, rows, cg.cout, k)) {
		/* --blas openblas: the pixels [rows][C] times the weight [M][C]
		 * read transposed */
		mc_ktemplate t = { .kind = MC_TMPL_SGEMM, .wt = c->in_buf[0], .x = c->in_buf[1], .scale = 1.0,
		                   .n = 1, .a_st = { 0, k, 1 }, .b_st = { 0, 1, k }, .cout = rows, .ow = cg.cout,
		                   .cin = k };
		kt_blas_bias b = { .buf = bias ? c->in_buf[2] : -1, .beta = 1 };
		kt_blas_emit(c, &t, &b);
		return 0;
	}
	kt_cols cols;
	kt_plan(kb->isa, cg.cout, k, kt_plan_rows(kb, rows), &cols);
	bool flat_tiles = false;
	if (!flat_gemm) {
		kt_cols flat_cols;
		kt_plan(kb->isa, cg.cout, k, kt_plan_rows(kb, cg.batch * cg.h.out * cg.w.out), &flat_cols);
		flat_tiles = flat_pays(kb, &cg, &cols, &flat_cols);
		if (flat_tiles)
			cols = flat_cols;
	}
	w_source ws = { w, cg.cin, cg.h.k, cg.w.k };
	cg.cols = &cols;
	cg.w_buf = kt_pack(kb, &cols, w_at, &ws);
	cg.bias_buf = bias ? kt_pack_bias(kb, &cols, bias_at, bias) : -1;
	if (cg.w_buf < 0 || (bias && cg.bias_buf < 0))
		return 1;
	if (flat_gemm) {
		kt_gemm gm = { .rows = rows, .k = k, .a_buf = c->in_buf[0], .b_buf = cg.w_buf,
		               .bias_buf = cg.bias_buf, .cols = &cols };
		kt_gemm_emit(c, &gm);
		return 0;
	}
	if (flat_tiles)
		flat_pixels(c, &cg);
	else
		implicit_gemm(c, &cg);
	return 0;
}
