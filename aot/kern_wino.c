/* Winograd F(2x2, 3x3) for dense channels-last 3x3 convolutions with
 * stride 1 and any dilation (see aot/aot.h: mc_kern_wino_nhwc): each 2x2
 * output tile takes 16 multiplies per (input, output) channel pair instead
 * of 36. The weight is transformed at generation time (U = G g G^T, in
 * double) and packed like a GEMM operand (kern.h) whose reduction index is
 * (position xi of the 4x4 tile, input channel); the run time goes in blocks
 * of tiles that stay in cache:
 * With dilation d a tile's outputs are d apart (and its 4x4 inputs too).
 *   1. input transform: V[xi][tile][c] = (B^T d B) of the tile's 4x4 input
 *      patch (zero outside the input), vectors over channels;
 *   2. 16 GEMMs: X[xi][tile][m] = sum_c V[xi][tile][c] U[xi][c][m], the
 *      register-tiled micro-kernel of kern.h;
 *   3. output transform: y = A^T X A + bias, stored through the fused
 *      epilogue, vectors over output channels.
 * Only vector ISAs use it (it needs two block-sized scratch areas, which a
 * microcontroller's RAM would rather not give), and only where the layer is
 * large enough for the transforms to pay. */
#include <string.h>

#include "kern.h"
#include "lower_window.h"

/* tiles per block: about this many, a multiple of the micro-kernel's rows */
#define BLOCK_TILES 40
/* the most scratch (V and X) one block of a whole image's tiles takes:
 * a core's L2 */
#define WHOLE_IMAGE_BYTES (2 * 1024 * 1024)

typedef struct {
	int64_t batch, ih, iw, oh, ow, cin, cout, pt, pl;
	int64_t dh, dw;              /* dilations: a tile's outputs are d apart */
	int64_t th, tw;              /* tiles along H and W */
	int64_t mpad;                /* row length of X: the packed panels' width */
	int64_t tb;                  /* tiles per block */
	const kt_cols *cols;
	int u_buf, v_buf, x_buf, bias_buf;
} wino;

/* ---- weight transform ---- */

typedef struct {
	const mc_tensor *w;
	int64_t cin;
} u_source;

/* U[xi][c][m] with xi = 4 * i + j: row i, column j of G g G^T, where
 * G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1] and g the 3x3 kernel (m, c). */
static double u_at(const void *ctx, int64_t kk, int64_t m)
{
	static const double G[4][3] = { { 1, 0, 0 }, { .5, .5, .5 }, { .5, -.5, .5 }, { 0, 0, 1 } };
	const u_source *s = ctx;
	int64_t xi = kk / s->cin, c = kk % s->cin;
	int i = (int)(xi / 4), j = (int)(xi % 4);
	double sum = 0;
	for (int a = 0; a < 3; a++)
		for (int b = 0; b < 3; b++)
			sum += G[i][a] * mc_get_f(s->w, (size_t)(((m * s->cin + c) * 3 + a) * 3 + b)) * G[j][b];
	return sum;
}

/* ---- 1. input transform ---- */

/* rows = B^T d for one column (d0..d3 top to bottom); B^T = [1 0 -1 0;
 * 0 1 1 0; 0 -1 1 0; 0 1 0 -1]. */
static void bt_apply(mc_kb *kb, mc_kexpr *const d[4], mc_kexpr *out[4])
{
	out[0] = mc_kb_let(kb, mc_k_sub(kb, d[0], d[2]));
	out[1] = mc_kb_let(kb, mc_k_add(kb, d[1], d[2]));
	out[2] = mc_kb_let(kb, mc_k_sub(kb, d[2], d[1]));
	out[3] = mc_kb_let(kb, mc_k_sub(kb, d[1], d[3]));
}

/* One channel chunk [c0, c0 + lanes) of tile `tile` (row j of the block). */
static void input_chunk(mc_lower_ctx *c, const wino *w, mc_kexpr *nb, mc_kexpr *ih0,
                        mc_kexpr *iw0, mc_kexpr *const rok[4], mc_kexpr *const cok[4],
                        mc_kexpr *j, mc_kexpr *c0, int lanes)
{
	mc_kb *kb = c->kb;
	mc_kexpr *d[4][4], *u[4][4], *v[4][4];
	mc_kexpr *zero = lanes > 1 ? mc_k_splat(kb, mc_k_float(kb, MC_KT_F32, 0), lanes)
	                           : mc_k_float(kb, MC_KT_F32, 0);
	for (int r = 0; r < 4; r++)
		for (int q = 0; q < 4; q++) {
			mc_kexpr *pix = mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, nb, w->ih),
			                                                    mc_k_addi(kb, ih0, r * w->dh)), w->iw),
			                         mc_k_addi(kb, iw0, q * w->dw));
			mc_kexpr *at = mc_k_add(kb, mc_k_muli(kb, pix, w->cin), c0);
			mc_kexpr *x = lanes > 1 ? mc_k_vload(kb, c->in_buf[0], at, lanes)
			                        : mc_k_load(kb, c->in_buf[0], at);
			/* the select evaluates only the side it takes: no load outside */
			d[r][q] = mc_kb_let(kb, mc_k_select(kb, mc_k_bin(kb, MC_KB_AND, rok[r], cok[q]), x,
			                                    zero));
		}
	for (int q = 0; q < 4; q++) {
		mc_kexpr *col[4] = { d[0][q], d[1][q], d[2][q], d[3][q] }, *o[4];
		bt_apply(kb, col, o);
		for (int r = 0; r < 4; r++)
			u[r][q] = o[r];
	}
	for (int r = 0; r < 4; r++)
		bt_apply(kb, u[r], v[r]);
	for (int r = 0; r < 4; r++)
		for (int q = 0; q < 4; q++) {
			mc_kexpr *at = mc_k_add(kb, mc_k_muli(kb, mc_k_addi(kb, j, (4 * r + q) * w->tb),
			                                      w->cin), c0);
			mc_kb_store(kb, w->v_buf, at, v[r][q]);
		}
}

/* Vector chunks over [0, n): the widest lanes in a loop, the rest scalar. */
typedef void (*chunk_fn)(mc_lower_ctx *c, const wino *w, void *ctx, mc_kexpr *c0, int lanes);

static void chunks(mc_lower_ctx *c, const wino *w, int64_t n, chunk_fn fn, void *ctx)
{
	mc_kb *kb = c->kb;
	int lanes = mc_isa_lanes_upto(kb->isa, n);
	int64_t full = lanes > 1 ? n / lanes : 0;
	if (full > 0) {
		mc_kexpr *k = mc_kb_fori(kb, full, 0);
		fn(c, w, ctx, mc_kb_let(kb, mc_k_muli(kb, k, lanes)), lanes);
		mc_kb_end(kb);
	}
	if (full * lanes < n) {
		mc_kexpr *ch = mc_kb_for(kb, idx(kb, full * lanes), idx(kb, n), 0);
		fn(c, w, ctx, ch, 1);
		mc_kb_end(kb);
	}
}

typedef struct {
	mc_kexpr *nb, *ih0, *iw0, *j, *oh0, *ow0;
	mc_kexpr *rok[4], *cok[4];
} tile_ctx;

static void input_fn(mc_lower_ctx *c, const wino *w, void *ctx, mc_kexpr *c0, int lanes)
{
	tile_ctx *t = ctx;
	input_chunk(c, w, t->nb, t->ih0, t->iw0, t->rok, t->cok, t->j, c0, lanes);
}

/* The first output of tile number t along a dim with dilation d: tiles
 * pair outputs d apart, (t / d) * 2d + t % d and d further. */
static mc_kexpr *tile_first(mc_kb *kb, mc_kexpr *t, int64_t d)
{
	mc_kexpr *pair = mc_k_muli(kb, mc_k_div(kb, t, idx(kb, d)), 2 * d);
	return mc_kb_let(kb, mc_k_add(kb, pair, mc_k_bin(kb, MC_KB_REM, t, idx(kb, d))));
}

/* Tile number `tile` of image nb: its output and input corners. */
static void tile_at(mc_kb *kb, const wino *w, mc_kexpr *tile, tile_ctx *t)
{
	mc_kexpr *ty = mc_kb_let(kb, mc_k_div(kb, tile, idx(kb, w->tw)));
	mc_kexpr *tx = mc_kb_let(kb, mc_k_bin(kb, MC_KB_REM, tile, idx(kb, w->tw)));
	t->oh0 = tile_first(kb, ty, w->dh);
	t->ow0 = tile_first(kb, tx, w->dw);
	t->ih0 = mc_kb_let(kb, mc_k_addi(kb, t->oh0, -w->pt));
	t->iw0 = mc_kb_let(kb, mc_k_addi(kb, t->ow0, -w->pl));
}

/* ---- 2. the 16 GEMMs of a block of nt tiles ---- */

static void gemm_rows(mc_kb *kb, const wino *w, kt_panel panel, mc_kexpr *xi, mc_kexpr *row0, int mr)
{
	const kt_shape *s = panel.shape;
	kt_tile t = { .panel = panel, .mr = mr, .sets = 1, .a_buf = w->v_buf, .b_buf = w->u_buf };
	mc_kexpr *xrow = mc_kb_let(kb, mc_k_muli(kb, xi, w->tb));
	for (int r = 0; r < mr; r++)
		t.a_row[r] = mc_k_muli(kb, mc_k_add(kb, xrow, mc_k_addi(kb, row0, r)), w->cin);
	kt_tile_init(kb, &t, -1);
	mc_kexpr *ch = mc_kb_fori(kb, w->cin, MC_KF_REDUCE);
	kt_tile_step(kb, &t, 0, ch, mc_k_add(kb, mc_k_muli(kb, xi, w->cin), ch));
	mc_kb_end(kb);
	for (int r = 0; r < mr; r++) {
		mc_kexpr *at = mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb, xrow, mc_k_addi(kb, row0, r)), w->mpad),
		                        panel.col0);
		int64_t off = 0;
		for (int v = 0; v < s->nvec; v++) {
			mc_kb_store(kb, w->x_buf, mc_k_addi(kb, at, off), t.acc[0][r][v]);
			off += s->lanes[v];
		}
	}
}

static void gemm_panel(mc_kb *kb, const wino *w, kt_panel panel, mc_kexpr *xi, int64_t nt)
{
	int mr = panel.shape->mr;
	int64_t full = nt / mr, rest = nt % mr;
	if (full > 0) {
		mc_kexpr *b = mc_kb_fori(kb, full, MC_KF_PARALLEL);
		gemm_rows(kb, w, panel, xi, mc_kb_let(kb, mc_k_muli(kb, b, mr)), mr);
		mc_kb_end(kb);
	}
	if (rest > 0)
		gemm_rows(kb, w, panel, xi, idx(kb, full * mr), (int)rest);
}

static void gemms(mc_kb *kb, const wino *w, int64_t nt)
{
	const kt_cols *cols = w->cols;
	mc_kexpr *xi = mc_kb_fori(kb, 16, MC_KF_PARALLEL); /* each its own slots of x_buf */
	if (cols->n_main > 0) {
		mc_kexpr *p = mc_kb_fori(kb, cols->n_main, MC_KF_PARALLEL);
		gemm_panel(kb, w, kt_main_panel(kb, cols, p), xi, nt);
		mc_kb_end(kb);
	}
	if (cols->tail.nvec > 0)
		gemm_panel(kb, w, kt_tail_panel(kb, cols), xi, nt);
	mc_kb_end(kb);
}

/* ---- 3. output transform ---- */

/* A^T x for one column (x0..x3): A^T = [1 1 1 0; 0 1 -1 -1]. */
static void at_apply(mc_kb *kb, mc_kexpr *const x[4], mc_kexpr *out[2])
{
	out[0] = mc_kb_let(kb, mc_k_add(kb, mc_k_add(kb, x[0], x[1]), x[2]));
	out[1] = mc_kb_let(kb, mc_k_sub(kb, mc_k_sub(kb, x[1], x[2]), x[3]));
}

static void output_fn(mc_lower_ctx *c, const wino *w, void *ctx, mc_kexpr *m0, int lanes)
{
	tile_ctx *t = ctx;
	mc_kb *kb = c->kb;
	mc_kexpr *x[4][4], *u[2][4], *y[2][2];
	for (int r = 0; r < 4; r++)
		for (int q = 0; q < 4; q++) {
			mc_kexpr *at = mc_k_add(kb, mc_k_muli(kb, mc_k_addi(kb, t->j, (4 * r + q) * w->tb),
			                                      w->mpad), m0);
			x[r][q] = mc_kb_let(kb, lanes > 1 ? mc_k_vload(kb, w->x_buf, at, lanes)
			                                  : mc_k_load(kb, w->x_buf, at));
		}
	for (int q = 0; q < 4; q++) {
		mc_kexpr *col[4] = { x[0][q], x[1][q], x[2][q], x[3][q] }, *o[2];
		at_apply(kb, col, o);
		u[0][q] = o[0];
		u[1][q] = o[1];
	}
	for (int r = 0; r < 2; r++)
		at_apply(kb, u[r], y[r]);
	mc_kexpr *bias = NULL;
	if (w->bias_buf >= 0)
		bias = mc_kb_let(kb, lanes > 1 ? mc_k_vload(kb, w->bias_buf, m0, lanes)
		                               : mc_k_load(kb, w->bias_buf, m0));
	for (int r = 0; r < 2; r++)
		for (int q = 0; q < 2; q++) {
			mc_kexpr *oh = mc_kb_let(kb, mc_k_addi(kb, t->oh0, r * w->dh));
			mc_kexpr *ow = mc_kb_let(kb, mc_k_addi(kb, t->ow0, q * w->dw));
			/* where the pairs do not cover the output exactly, a tile's
			 * outputs may lie past its end (the second one only, at d 1) */
			bool edge_h = w->oh % (2 * w->dh) && (r == 1 || w->dh > 1);
			bool edge_w = w->ow % (2 * w->dw) && (q == 1 || w->dw > 1);
			if (edge_h || edge_w) {
				mc_kexpr *in = mc_k_bin(kb, MC_KB_AND,
				                        mc_k_bin(kb, MC_KB_LT, oh, idx(kb, w->oh)),
				                        mc_k_bin(kb, MC_KB_LT, ow, idx(kb, w->ow)));
				mc_kb_if(kb, in);
			}
			mc_kexpr *val = bias ? mc_k_add(kb, y[r][q], bias) : y[r][q];
			mc_kexpr *coords[4] = { t->nb, oh, ow, m0 };
			mc_kexpr *lin = mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb,
			                         mc_k_muli(kb, t->nb, w->oh), oh), w->ow), ow), w->cout), m0);
			if (lanes > 1)
				mc_lower_store_vec(c, 0, coords, lin, val);
			else
				mc_lower_store(c, 0, coords, lin, val);
			if (edge_h || edge_w)
				mc_kb_end(kb);
		}
}

/* ---- a block of nt tiles starting at tile number t0 of image nb ---- */

static void block(mc_lower_ctx *c, const wino *w, mc_kexpr *nb, mc_kexpr *t0, int64_t nt)
{
	mc_kb *kb = c->kb;
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1)
			gemms(kb, w, nt);
		tile_ctx t = { .nb = nb };
		t.j = mc_kb_fori(kb, nt, MC_KF_PARALLEL);
		tile_at(kb, w, mc_k_add(kb, t0, t.j), &t);
		if (pass == 0) {
			for (int r = 0; r < 4; r++) {
				mc_kexpr *ih = mc_k_addi(kb, t.ih0, r * w->dh), *iw = mc_k_addi(kb, t.iw0, r * w->dw);
				t.rok[r] = mc_kb_let(kb, mc_k_bin(kb, MC_KB_AND, mc_k_bin(kb, MC_KB_GE, ih, idx(kb, 0)),
				                                  mc_k_bin(kb, MC_KB_LT, ih, idx(kb, w->ih))));
				t.cok[r] = mc_kb_let(kb, mc_k_bin(kb, MC_KB_AND, mc_k_bin(kb, MC_KB_GE, iw, idx(kb, 0)),
				                                  mc_k_bin(kb, MC_KB_LT, iw, idx(kb, w->iw))));
			}
			chunks(c, w, w->cin, input_fn, &t);
		} else {
			chunks(c, w, w->cout, output_fn, &t);
		}
		mc_kb_end(kb);
	}
}

/* ---- entry ---- */

int mc_kern_wino_nhwc(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const nn_params *p = c->node->params;
	if (kb->isa->max_lanes <= 1 || !c->out[0] || p->group != 1 || c->in[0]->shape.rank != 4 ||
	    c->in[0]->dtype != MC_FLOAT || c->out[0]->dtype != MC_FLOAT || c->in[1]->dtype != MC_FLOAT)
		return 1;
	const mc_tensor *wt = mc_lower_const(c, 1);
	const mc_value *bv = c->n_in > 2 ? c->in[2] : NULL;
	const mc_tensor *bias = bv ? mc_lower_const(c, 2) : NULL;
	if (!wt || (bv && (!bias || bv->dtype != MC_FLOAT)))
		return 1;
	const mc_shape *xs = &c->in[0]->shape, *os = &c->out[0]->shape;
	mc_shape view = { .rank = 4, .dims = { xs->dims[0], xs->dims[3], xs->dims[1], xs->dims[2] } };
	win_geom g;
	if (mc_win_setup(c->node, p, &view, c->in[1]->shape.dims + 2, &g) ||
	    mc_win_forward(c->node, p, &g))
		return -1;
	for (int i = 0; i < 2; i++)
		if (g.k[i] != 3 || g.s[i] != 1 || g.d[i] < 1 || g.pb[i] < 0 || g.pe[i] < 0)
			return 1;
	wino w = { .batch = xs->dims[0], .ih = xs->dims[1], .iw = xs->dims[2], .cin = xs->dims[3],
	           .oh = os->dims[1], .ow = os->dims[2], .cout = os->dims[3],
	           .pt = g.pb[0], .pl = g.pb[1], .dh = g.d[0], .dw = g.d[1] };
	/* the transforms cost about 40 operations per tile and channel: worth
	 * it against 20 saved multiply-adds per channel pair when both channel
	 * counts are large enough */
	if (w.cin < 16 || w.cout < 16 || w.oh < 4 || w.ow < 4 || mc_numel(os) == 0)
		return 1;
	w.th = (w.oh + 2 * w.dh - 1) / (2 * w.dh) * w.dh;
	w.tw = (w.ow + 2 * w.dw - 1) / (2 * w.dw) * w.dw;
	kt_cols cols;
	kt_plan(kb->isa, w.cout, 16 * w.cin, BLOCK_TILES, &cols);
	/* U is 16/9 of the weight, read from memory once a block: where it is
	 * big (kern.h) and an image has less than a block of tiles, that read
	 * costs more than the saved multiply-adds (resnet18's 7x7 layers of
	 * 512 channels: 16 tiles, 16 MB of U; 2.4 ms, the direct kernel 2.1) */
	int64_t tiles = w.th * w.tw;
	if (kt_b_is_big(&cols) && tiles < BLOCK_TILES)
		return 1;
	int mr = kt_tile_rows(&cols);
	w.mpad = kt_packed_cols(&cols);
	w.tb = (BLOCK_TILES + mr - 1) / mr * mr;
	/* a big U is read from memory once a block: where an image's tiles
	 * fit, one block takes them all (resnet50's 14x14 layers of 256
	 * channels, 49 tiles and 4 MB of U: 1.2 ms in blocks of 40, 1.0 ms) */
	int64_t all = (tiles + mr - 1) / mr * mr;
	if (kt_b_is_big(&cols) && 4 * 16 * all * (w.cin + w.mpad) <= WHOLE_IMAGE_BYTES)
		w.tb = all;
	u_source us = { wt, w.cin };
	w.cols = &cols;
	w.u_buf = kt_pack(kb, &cols, u_at, &us);
	if (w.u_buf < 0)
		return 1;
	w.bias_buf = bias ? c->in_buf[2] : -1;
	w.v_buf = mc_kb_scratch(kb, MC_FLOAT, (size_t)(16 * w.tb * w.cin));
	w.x_buf = mc_kb_scratch(kb, MC_FLOAT, (size_t)(16 * w.tb * w.mpad));
	int64_t full = tiles / w.tb, rest = tiles % w.tb;
	mc_kexpr *nb = mc_kb_fori(kb, w.batch, MC_KF_PARALLEL);
	if (full > 0) {
		mc_kexpr *b = mc_kb_fori(kb, full, MC_KF_PARALLEL);
		block(c, &w, nb, mc_kb_let(kb, mc_k_muli(kb, b, w.tb)), w.tb);
		mc_kb_end(kb);
	}
	if (rest > 0) {
		/* --threads: the last block on scratch of its own, so that the
		 * full blocks' loop alone touches theirs and splits over the
		 * workers, each on a copy (aot/ksplit.c) */
		if (full > 0 && kb->threads > 1) {
			w.v_buf = mc_kb_scratch(kb, MC_FLOAT, (size_t)(16 * w.tb * w.cin));
			w.x_buf = mc_kb_scratch(kb, MC_FLOAT, (size_t)(16 * w.tb * w.mpad));
		}
		block(c, &w, nb, idx(kb, full * w.tb), rest);
	}
	mc_kb_end(kb);
	return 0;
}
