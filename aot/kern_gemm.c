/* Fast kernel for Gemm and MatMul with a constant B (see aot/aot.h:
 * mc_kern_gemm): B packed into column panels at generation time, alpha
 * folded into it and beta * C into a packed bias, and the register-tiled
 * micro-kernel of kern.h over the rows of A. */
#include <string.h>

#include "kern.h"
#include "../libcore/ops/nn.h"

/* Rows of A a chunk takes: about 32 KB of A, so that a chunk read by the
 * first panel is still in L1/L2 for the next ones. */
#define CHUNK_BYTES 32768

/* The output coords of row `row` (its dims but the last; extent-1 dims
 * at 0), the last left for the store to fill. */
static mc_kexpr **row_coords(mc_kb *kb, const mc_shape *os, mc_kexpr *row)
{
	mc_kexpr **co = mc_kpool_alloc(kb->pool, sizeof *co * MC_MAX_RANK);
	mc_kexpr *rest = row;
	for (int d = os->rank - 2; d >= 0; d--) {
		int64_t e = os->dims[d];
		if (e == 1) {
			co[d] = mc_k_index(kb, 0);
			continue;
		}
		bool outer = true;
		for (int o = 0; o < d; o++)
			outer = outer && os->dims[o] == 1;
		if (outer) { /* the outermost dim that is not 1: the rest */
			co[d] = rest;
			continue;
		}
		co[d] = mc_kb_let(kb, mc_k_bin(kb, MC_KB_REM, rest, mc_k_index(kb, e)));
		rest = mc_kb_let(kb, mc_k_div(kb, rest, mc_k_index(kb, e)));
	}
	co[os->rank - 1] = mc_k_index(kb, 0);
	return co;
}

/* One product of a batch: where its A, B and output rows start; and how
 * its main panels' reductions go (k_block_of). */
typedef struct {
	const kt_gemm *g;
	mc_kexpr *a0, *b0;       /* element offsets into A and B */
	mc_kexpr *row0;          /* the output row of its row 0 */
	int64_t kc;              /* > 0: main panels in blocks of kc steps */
	int part_buf;            /* then: a chunk's partial sums, [row][main width] */
} gemm_at;

/* A block of a tile's reduction (K-blocking): steps [k0, k0 + len), the
 * sums carried from block to block in at->part_buf, whose row 0 is the
 * chunk's row chunk_r0; the last block stores through the output. */
typedef struct {
	mc_kexpr *k0;
	int64_t len;
	mc_kexpr *chunk_r0;
	bool last;
} k_part;

/* Where row `row`'s vector at column offset `off` of the panel lies in
 * part_buf. */
static mc_kexpr *part_at(mc_kb *kb, const gemm_at *at, const k_part *kp, mc_kexpr *row, int64_t off)
{
	int64_t w = at->g->cols->main.width;
	return mc_k_addi(kb, mc_k_muli(kb, mc_k_sub(kb, row, kp->chunk_r0), w), off);
}

/* One tile: rows [r0, r0 + mr) of a panel, its whole reduction (kp NULL)
 * or one block of it. */
static void gemm_tile(mc_lower_ctx *c, const gemm_at *at, kt_panel panel, mc_kexpr *r0, int mr,
                      const k_part *kp)
{
	mc_kb *kb = c->kb;
	const kt_gemm *g = at->g;
	const kt_shape *s = panel.shape;
	const mc_shape *os = &c->out[0]->shape;
	int64_t n = g->cols->n;
	mc_kexpr *k0 = kp ? kp->k0 : mc_k_index(kb, 0);
	panel.b0 = mc_kb_let(kb, mc_k_add(kb, mc_k_add(kb, at->b0, panel.b0),
	                                  mc_k_muli(kb, k0, panel.b_stride)));
	kt_tile t = { .panel = panel, .mr = mr, .a_buf = g->a_buf, .b_buf = g->b_buf };
	/* the panel's sets, not the tile's: a row's sums do not depend on
	 * whether it falls in a full tile or the last rows of a chunk (the
	 * chunks differ with --threads) */
	t.sets = s->sets;
	const kt_implicit_a *ia = g->implicit;
	mc_kexpr *rows[KT_MAX_MR], *lin[KT_MAX_MR], **coords[KT_MAX_MR];
	mc_kexpr *k0_at = ia ? mc_kb_let(kb, ia->k_at(kb, ia->ctx, k0)) : k0;
	for (int r = 0; r < mr; r++) {
		rows[r] = mc_kb_let(kb, mc_k_addi(kb, r0, r));
		mc_kexpr *orow = mc_kb_let(kb, mc_k_add(kb, at->row0, rows[r]));
		mc_kexpr *base = ia ? ia->row_at(kb, ia->ctx, orow)
		                    : mc_k_add(kb, at->a0, mc_k_muli(kb, rows[r], g->k));
		t.a_row[r] = mc_kb_let(kb, mc_k_add(kb, base, k0_at));
		lin[r] = mc_k_muli(kb, orow, n);
		coords[r] = row_coords(kb, os, orow);
	}
	if (!kp) {
		kt_tile_init(kb, &t, g->bias_buf);
		if (ia && ia->run < g->k) {
			/* run by run, each from where k_at puts it */
			mc_kexpr *base[KT_MAX_MR], *b0 = panel.b0;
			memcpy(base, t.a_row, sizeof base);
			mc_kexpr *k = mc_kb_let(kb, mc_k_muli(kb, mc_kb_fori(kb, g->k / ia->run, MC_KF_REDUCE),
			                                      ia->run));
			mc_kexpr *k_at = mc_kb_let(kb, ia->k_at(kb, ia->ctx, k));
			for (int r = 0; r < mr; r++)
				t.a_row[r] = mc_kb_let(kb, mc_k_add(kb, base[r], k_at));
			t.panel.b0 = mc_kb_let(kb, mc_k_add(kb, b0, mc_k_muli(kb, k, panel.b_stride)));
			kt_tile_reduce(kb, &t, ia->run, 1);
			mc_kb_end(kb);
		} else {
			kt_tile_reduce(kb, &t, g->k, 1);
		}
		kt_tile_store(c, &t, lin, coords);
		return;
	}
	/* one set (k_block_of): the sums so far are its accumulators */
	for (int r = 0; r < mr; r++)
		for (int v = 0, off = 0; v < s->nvec; off += s->lanes[v++])
			t.acc[0][r][v] = mc_kb_local(kb, mc_k_vload(kb, at->part_buf,
			                                            part_at(kb, at, kp, rows[r], off),
			                                            s->lanes[v]));
	kt_tile_reduce(kb, &t, kp->len, 1);
	if (kp->last) {
		kt_tile_store(c, &t, lin, coords);
		return;
	}
	for (int r = 0; r < mr; r++)
		for (int v = 0, off = 0; v < s->nvec; off += s->lanes[v++])
			mc_kb_store(kb, at->part_buf, part_at(kb, at, kp, rows[r], off), t.acc[0][r][v]);
}

/* Rows [r0, r0 + nrows) of one panel: full tiles in a loop, then the
 * rest; their whole reductions (kp NULL) or one block. Where nrows_e is
 * not NULL it holds nrows at run time (fewer than nrows + 1): the full
 * tiles' count is computed and each possible rest has its own tile behind
 * a test, so that the statements are the same at every size (--dim
 * LO..HI, mc_kb.sizes_vary). */
static void panel_rows(mc_lower_ctx *c, const gemm_at *at, kt_panel panel, mc_kexpr *r0,
                       int64_t nrows, mc_kexpr *nrows_e, const k_part *kp)
{
	mc_kb *kb = c->kb;
	int mr = panel.shape->mr;
	/* inside a block loop the tiles share part_buf's rows: one worker's */
	unsigned flags = kp ? 0 : MC_KF_PARALLEL;
	if (nrows_e) {
		mc_kexpr *blocks = mc_kb_let(kb, mc_k_div(kb, nrows_e, mc_k_index(kb, mr)));
		mc_kexpr *b = mc_kb_for(kb, mc_k_index(kb, 0), blocks, flags);
		gemm_tile(c, at, panel, mc_kb_let(kb, mc_k_add(kb, r0, mc_k_muli(kb, b, mr))), mr, kp);
		mc_kb_end(kb);
		mc_kexpr *done = mc_kb_let(kb, mc_k_muli(kb, blocks, mr));
		mc_kexpr *rest = mc_kb_let(kb, mc_k_sub(kb, nrows_e, done));
		for (int r = 1; r < mr && r <= nrows; r++) {
			mc_kb_if(kb, mc_k_bin(kb, MC_KB_EQ, rest, mc_k_index(kb, r)));
			gemm_tile(c, at, panel, mc_kb_let(kb, mc_k_add(kb, r0, done)), r, kp);
			mc_kb_end(kb);
		}
		return;
	}
	int64_t blocks = nrows / mr, rest = nrows % mr;
	if (blocks > 0) {
		mc_kexpr *b = blocks == 1 ? mc_k_index(kb, 0) : mc_kb_fori(kb, blocks, flags);
		gemm_tile(c, at, panel, mc_kb_let(kb, mc_k_add(kb, r0, mc_k_muli(kb, b, mr))), mr, kp);
		if (blocks > 1)
			mc_kb_end(kb);
	}
	if (rest > 0)
		gemm_tile(c, at, panel, mc_kb_let(kb, mc_k_addi(kb, r0, blocks * mr)), (int)rest, kp);
}

/* Rows [r0, r0 + nrows) of one main panel, K-blocked: part_buf's rows
 * start as the bias (or zero), then every tile takes the panel's first kc
 * rows of B, every tile the next kc, ...: a block of B (KBLOCK_BYTES)
 * stays in L1 while all the chunk's rows use it. Each sum still adds its
 * products in k order from the bias: the same bits as one pass. nrows_e:
 * as panel_rows'. */
static void panel_rows_blocked(mc_lower_ctx *c, const gemm_at *at, kt_panel panel, mc_kexpr *r0,
                               int64_t nrows, mc_kexpr *nrows_e)
{
	mc_kb *kb = c->kb;
	const kt_shape *s = panel.shape;
	const kt_gemm *g = at->g;
	k_part kp = { .chunk_r0 = r0, .len = at->kc };
	mc_kexpr *row = nrows_e ? mc_kb_for(kb, mc_k_index(kb, 0), nrows_e, 0) : mc_kb_fori(kb, nrows, 0);
	mc_kexpr *r = mc_kb_let(kb, mc_k_add(kb, r0, row));
	for (int v = 0, off = 0; v < s->nvec; off += s->lanes[v++]) {
		mc_kexpr *init = g->bias_buf >= 0
		                         ? mc_k_vload(kb, g->bias_buf, mc_k_addi(kb, panel.col0, off), s->lanes[v])
		                         : mc_k_splat(kb, mc_k_float(kb, MC_KT_F32, 0), s->lanes[v]);
		mc_kb_store(kb, at->part_buf, part_at(kb, at, &kp, r, off), init);
	}
	mc_kb_end(kb);
	int64_t nblocks = g->k / at->kc;
	kp.k0 = mc_kb_let(kb, mc_k_muli(kb, mc_kb_fori(kb, nblocks - 1, 0), at->kc));
	panel_rows(c, at, panel, r0, nrows, nrows_e, &kp);
	mc_kb_end(kb);
	kp.k0 = mc_k_index(kb, (nblocks - 1) * at->kc);
	kp.last = true;
	panel_rows(c, at, panel, r0, nrows, nrows_e, &kp);
}

/* Rows [r0, r0 + nrows) of every panel of a direct B whose column count
 * may be the dynamic size (kt_cols.n_vary): the main panels counted at
 * run time, then each part of the rest behind a test of its bit, then the
 * rest's single columns in a loop. */
static void chunk_rows_vary(mc_lower_ctx *c, const gemm_at *at, mc_kexpr *r0, int64_t nrows,
                            mc_kexpr *nrows_e)
{
	mc_kb *kb = c->kb;
	const kt_cols *cols = at->g->cols;
	int64_t w = cols->main.width;
	mc_kexpr *n = mc_kb_local(kb, mc_k_index(kb, cols->n));
	mc_kexpr *n_main = mc_kb_let(kb, mc_k_div(kb, n, mc_k_index(kb, w)));
	mc_kexpr *p = mc_kb_for(kb, mc_k_index(kb, 0), n_main, MC_KF_PARALLEL);
	kt_panel main = kt_direct_panel(cols, &cols->main, mc_kb_let(kb, mc_k_muli(kb, p, w)));
	panel_rows(c, at, main, r0, nrows, nrows_e, NULL);
	mc_kb_end(kb);
	mc_kexpr *col = mc_kb_let(kb, mc_k_muli(kb, n_main, w));
	mc_kexpr *rest = mc_kb_let(kb, mc_k_sub(kb, n, col));
	for (int i = 0; i < cols->n_parts; i++) {
		const kt_shape *s = &cols->parts[i];
		mc_kexpr *bit = mc_kb_let(kb, mc_k_bin(kb, MC_KB_AND, rest, mc_k_index(kb, s->width)));
		mc_kb_if(kb, mc_k_bin(kb, MC_KB_NE, bit, mc_k_index(kb, 0)));
		panel_rows(c, at, kt_direct_panel(cols, s, col), r0, nrows, nrows_e, NULL);
		mc_kb_end(kb);
		col = mc_kb_let(kb, mc_k_add(kb, col, bit));
	}
	if (cols->single.nvec > 0) {
		mc_kexpr *left = mc_kb_let(kb, mc_k_bin(kb, MC_KB_AND, rest, mc_k_index(kb, cols->single_mask)));
		mc_kexpr *j = mc_kb_for(kb, mc_k_index(kb, 0), left, MC_KF_PARALLEL);
		panel_rows(c, at, kt_direct_panel(cols, &cols->single, mc_kb_let(kb, mc_k_add(kb, col, j))), r0,
		           nrows, nrows_e, NULL);
		mc_kb_end(kb);
	}
}

/* Rows [r0, r0 + nrows) of every panel (nrows_e: as panel_rows'). */
static void chunk_rows(mc_lower_ctx *c, const gemm_at *at, mc_kexpr *r0, int64_t nrows, mc_kexpr *nrows_e)
{
	mc_kb *kb = c->kb;
	const kt_cols *cols = at->g->cols;
	if (cols->n_vary) {
		chunk_rows_vary(c, at, r0, nrows, nrows_e);
		return;
	}
	if (cols->n_main > 0) {
		mc_kexpr *p = cols->n_main == 1 ? mc_k_index(kb, 0)
		                                : mc_kb_fori(kb, cols->n_main, MC_KF_PARALLEL);
		kt_panel panel = kt_main_panel(kb, cols, p);
		if (at->kc > 0)
			panel_rows_blocked(c, at, panel, r0, nrows, nrows_e);
		else
			panel_rows(c, at, panel, r0, nrows, nrows_e, NULL);
		if (cols->n_main > 1)
			mc_kb_end(kb);
	}
	if (cols->tail.nvec > 0)
		panel_rows(c, at, kt_tail_panel(kb, cols), r0, nrows, nrows_e, NULL);
}

/* The rows of A a chunk takes: CHUNK_BYTES of it (KT_BIG_B_A_BYTES where
 * B is big, kern.h), whole tiles. */
static int64_t chunk_of(const mc_kb *kb, const kt_gemm *g)
{
	int64_t bytes = kt_b_is_big(g->cols) ? KT_BIG_B_A_BYTES : CHUNK_BYTES;
	/* an implicit A's rows share what they read (overlapping windows) */
	int64_t row_bytes = g->implicit ? g->implicit->bytes / g->rows : 4 * g->k;
	/* sizes_vary: a row's bytes rounded up to a power of two, so that a
	 * depth that is the dynamic size changes the chunk at a few sizes
	 * only (each change is a version of the kernel, aot/dynamic.c) */
	if (kb->sizes_vary)
		for (int64_t p = 1; p < INT64_MAX / 2; p *= 2)
			if (p >= row_bytes) {
				row_bytes = p;
				break;
			}
	int64_t mr = kt_tile_rows(g->cols), chunk = bytes / (row_bytes > 0 ? row_bytes : 1);
	return chunk < mr ? mr : chunk / mr * mr;
}

/* chunk_of's rows for a direct B where sizes vary, computed at run time
 * from the depth held in a variable (it may be the dynamic size), so that
 * the statements do not change with it; whole tiles of every panel. */
static mc_kexpr *run_time_chunk(mc_kb *kb, const kt_gemm *g)
{
	int64_t bytes = kt_b_is_big(g->cols) ? KT_BIG_B_A_BYTES : CHUNK_BYTES;
	int64_t mr = kt_tile_rows(g->cols);
	mc_kexpr *row_bytes = mc_kb_local(kb, mc_k_index(kb, 4 * (g->k > 0 ? g->k : 1)));
	mc_kexpr *tiles = mc_kb_let(kb, mc_k_div(kb, mc_k_div(kb, mc_k_index(kb, bytes), row_bytes),
	                                         mc_k_index(kb, mr)));
	tiles = mc_kb_let(kb, mc_k_bin(kb, MC_KB_MAX, tiles, mc_k_index(kb, 1)));
	return mc_kb_let(kb, mc_k_muli(kb, tiles, mr));
}

/* --threads: the largest B whose rows the workers split (chunk_for). */
#define SPLIT_ROWS_B_BYTES (2 * 1024 * 1024)

/* Pieces of work a product's rows give each worker (--threads): as the
 * splits' own descent (aot/ksplit.c), enough that an uneven last share
 * costs little. */
#define PIECES_A_WORKER 8

/* The rows a chunk of one of `products` products takes: chunk_of's, or
 * with --threads fewer, so that the chunks are PIECES_A_WORKER a worker.
 * The workers then split the products' rows into contiguous shares, as
 * the kernels before and after split an image's rows (a core keeps the
 * rows in its cache), not the few chunks and the columns of the rows left
 * over. */
static int64_t chunk_for(const mc_kb *kb, const kt_gemm *g, int64_t products)
{
	int64_t mr = kt_tile_rows(g->cols), chunk = chunk_of(kb, g);
	/* a B over a core's L2 (SPLIT_ROWS_B_BYTES): the workers split the
	 * panels (each reads its own share of B from memory), not the rows
	 * (each would read all of it). Under that, rows: each core keeps its
	 * rows of A and of the output in its cache, for the kernels before
	 * and after (vit6's MLPs, 1 MB of B: 1.9x on 2 workers by rows, 1.4x
	 * by panels). */
	if (kb->threads > 1 && kt_packed_bytes(g->cols) <= SPLIT_ROWS_B_BYTES) {
		int64_t per = (PIECES_A_WORKER * kb->threads + products - 1) / products;
		if (per > 1 && g->rows / chunk < per)
			chunk = g->rows / per / mr * mr;
		if (chunk < mr)
			chunk = mr;
	}
	return chunk;
}

/* --threads: the rows left after the full chunks on partial sums of their
 * own (K-blocking), so that the chunks' loop alone touches its scratch and
 * splits over the workers, each on a copy (aot/ksplit.c); scratch touched
 * by two loops keeps both serial. */
static gemm_at rest_at(mc_kb *kb, const gemm_at *at, int64_t rows)
{
	gemm_at r = *at;
	if (kb->threads > 1 && at->kc > 0)
		r.part_buf = mc_kb_scratch(kb, MC_FLOAT, (size_t)(rows * at->g->cols->main.width));
	return r;
}

/* One product of the batch, its rows in chunks. */
static void product(mc_lower_ctx *c, const gemm_at *at)
{
	mc_kb *kb = c->kb;
	const kt_gemm *g = at->g;
	int64_t chunk = chunk_for(kb, g, g->batch > 1 ? g->batch : 1);
	if (kb->sizes_vary) {
		/* the rows in a variable, the chunks' count and each chunk's rows
		 * computed: one statement list for every size (--dim LO..HI), and
		 * one copy of the chunk's code (a second one for the last chunk
		 * made gcc's code for the first 20% slower in bert4's MLP). A
		 * direct B's depth may be the dynamic size: its chunk is
		 * computed too */
		mc_kexpr *rows = mc_kb_local(kb, mc_k_index(kb, g->rows));
		mc_kexpr *ch_rows = g->cols->direct ? run_time_chunk(kb, g) : mc_k_index(kb, chunk);
		mc_kexpr *n_ch = mc_kb_let(kb, mc_k_div(kb, mc_k_add(kb, rows, mc_k_addi(kb, ch_rows, -1)), ch_rows));
		mc_kexpr *ch = mc_kb_for(kb, mc_k_index(kb, 0), n_ch, MC_KF_PARALLEL);
		mc_kexpr *r0 = mc_kb_let(kb, mc_k_mul(kb, ch, ch_rows));
		mc_kexpr *nr = mc_kb_let(kb, mc_k_bin(kb, MC_KB_MIN, ch_rows, mc_k_sub(kb, rows, r0)));
		chunk_rows(c, at, r0, g->cols->direct ? INT64_MAX / 4 : chunk, nr);
		mc_kb_end(kb);
		return;
	}
	if (chunk >= g->rows) {
		chunk_rows(c, at, mc_k_index(kb, 0), g->rows, NULL);
		return;
	}
	int64_t full = g->rows / chunk, rest = g->rows % chunk;
	mc_kexpr *ch = mc_kb_fori(kb, full, MC_KF_PARALLEL);
	chunk_rows(c, at, mc_kb_let(kb, mc_k_muli(kb, ch, chunk)), chunk, NULL);
	mc_kb_end(kb);
	if (rest > 0) {
		gemm_at r = rest_at(kb, at, rest);
		chunk_rows(c, &r, mc_k_index(kb, full * chunk), rest, NULL);
	}
}

/* Product bi of the batch: where it starts (how it goes: from `how`). */
static gemm_at batch_at(mc_kb *kb, const gemm_at *how, mc_kexpr *bi)
{
	const kt_gemm *g = how->g;
	gemm_at at = *how;
	at.a0 = mc_kb_let(kb, mc_k_muli(kb, bi, g->a_batch));
	at.b0 = mc_kb_let(kb, mc_k_muli(kb, bi, g->b_batch));
	at.row0 = mc_kb_let(kb, mc_k_muli(kb, bi, g->rows));
	return at;
}

/* --threads: a batch as one loop over every product's row chunks
 * (chunk_for), then one over the rows each has left. A loop over the
 * products alone holds the chunks and the rest of each (two statements:
 * the workers cannot split below it), and 3 attention heads split 2:1
 * over 2 workers. Each row's sums are the same as product()'s: the same
 * bits. */
static void batch_in_chunks(mc_lower_ctx *c, const gemm_at *how)
{
	mc_kb *kb = c->kb;
	const kt_gemm *g = how->g;
	int64_t chunk = chunk_for(kb, g, g->batch);
	int64_t full = g->rows / chunk, rest = g->rows % chunk;
	if (full > 0) {
		mc_kexpr *bc = mc_kb_fori(kb, g->batch * full, MC_KF_PARALLEL);
		mc_kexpr *bi = mc_kb_let(kb, mc_k_div(kb, bc, mc_k_index(kb, full)));
		mc_kexpr *ch = mc_kb_let(kb, mc_k_bin(kb, MC_KB_REM, bc, mc_k_index(kb, full)));
		gemm_at at = batch_at(kb, how, bi);
		chunk_rows(c, &at, mc_kb_let(kb, mc_k_muli(kb, ch, chunk)), chunk, NULL);
		mc_kb_end(kb);
	}
	if (rest > 0) {
		gemm_at r = full > 0 ? rest_at(kb, how, rest) : *how;
		mc_kexpr *bi = mc_kb_fori(kb, g->batch, MC_KF_PARALLEL);
		gemm_at at = batch_at(kb, &r, bi);
		chunk_rows(c, &at, mc_k_index(kb, full * chunk), rest, NULL);
		mc_kb_end(kb);
	}
}

/* K-blocking (panel_rows_blocked) for a big B (kern.h), whose panels
 * would otherwise stream from L2 for every tile: blocks of kc rows of a
 * panel, at most KBLOCK_BYTES (L1 holds one with room for A's rows), kc a
 * divisor of k, for chunks of KBLOCK_MIN_TILES tiles or more (fewer reuse
 * a block too little to pay for storing the sums). Panels of one
 * accumulator set only; none on scalar ISAs or where memory counts (the
 * partial sums take scratch). 0: none. */
#define KBLOCK_BYTES (32 * 1024)
#define KBLOCK_MIN_TILES 4
static int64_t k_block_of(const mc_kb *kb, const kt_gemm *g, int64_t chunk)
{
	const kt_shape *s = &g->cols->main;
	if (!kt_b_is_big(g->cols) || kb->for_memory || kb->for_size || kb->isa->max_lanes == 1 ||
	    g->cols->direct || s->nvec == 0 || s->sets != 1 || chunk < KBLOCK_MIN_TILES * s->mr)
		return 0;
	int64_t most = KBLOCK_BYTES / 4 / s->width;
	/* an implicit A's runs: a block inside one */
	int64_t run = g->implicit ? g->implicit->run : g->k;
	for (int64_t kc = most; kc >= most / 2 && kc > 0; kc--)
		if (run % kc == 0 && g->k / kc >= 2)
			return kc;
	return 0;
}

void kt_gemm_emit(mc_lower_ctx *c, const kt_gemm *g)
{
	mc_kb *kb = c->kb;
	gemm_at at = { g, mc_k_index(kb, 0), mc_k_index(kb, 0), mc_k_index(kb, 0), 0, -1 };
	/* the rows a chunk takes (product(), batch_in_chunks()) */
	int64_t chunk = chunk_for(kb, g, g->batch > 1 ? g->batch : 1);
	if (chunk > g->rows && !kb->sizes_vary) /* sizes_vary: the same at every size */
		chunk = g->rows;
	at.kc = k_block_of(kb, g, chunk);
	if (at.kc > 0)
		at.part_buf = mc_kb_scratch(kb, MC_FLOAT, (size_t)(chunk * g->cols->main.width));
	if (g->batch <= 1) {
		product(c, &at);
		return;
	}
	if (kb->threads > 1 && g->batch < PIECES_A_WORKER * kb->threads) {
		batch_in_chunks(c, &at);
		return;
	}
	mc_kexpr *bi = mc_kb_fori(kb, g->batch, MC_KF_PARALLEL);
	at = batch_at(kb, &at, bi);
	product(c, &at);
	mc_kb_end(kb);
}

/* ---- Gemm and MatMul ---- */

/* B (k x n, or n x k transposed) times alpha, for kt_pack. */
typedef struct {
	const mc_tensor *b;
	bool trans;
	int64_t k, n;
	double alpha;
} b_source;

static double b_at(const void *ctx, int64_t kk, int64_t j)
{
	const b_source *s = ctx;
	size_t i = (size_t)(s->trans ? j * s->k + kk : kk * s->n + j);
	return s->alpha * mc_get_f(s->b, i);
}

/* beta * C along the columns (C one value or one per column). */
typedef struct {
	const mc_tensor *c;
	double beta;
} bias_source;

static double bias_at(const void *ctx, int64_t kk, int64_t j)
{
	(void)kk;
	const bias_source *s = ctx;
	return s->beta * mc_get_f(s->c, s->c->numel == 1 ? 0 : (size_t)j);
}

/* C constant along the rows: a scalar, [n] or [1, n]. */
static bool bias_by_column(const mc_shape *s, int64_t n)
{
	int64_t numel = (int64_t)mc_numel(s);
	if (numel == 1)
		return true;
	if (numel != n)
		return false;
	return s->rank == 1 || (s->rank == 2 && s->dims[0] == 1);
}

/* Packs B (and the bias) and emits the product; 1 where a packed constant
 * could not be made (the plain lowering then runs). */
static int emit_product(mc_lower_ctx *c, int64_t rows, int64_t k, int64_t n, const b_source *bs,
                        const bias_source *cs)
{
	mc_kb *kb = c->kb;
	kt_cols cols;
	kt_plan(kb->isa, n, k, kt_plan_rows(kb, rows), &cols);
	kt_gemm g = { .rows = rows, .k = k, .a_buf = c->in_buf[0], .bias_buf = -1, .cols = &cols };
	g.b_buf = kt_pack(kb, &cols, b_at, bs);
	if (g.b_buf < 0)
		return 1;
	if (cs) {
		g.bias_buf = kt_pack_bias(kb, &cols, bias_at, cs);
		if (g.bias_buf < 0)
			return 1;
	}
	kt_gemm_emit(c, &g);
	return 0;
}

static int kern_gemm(mc_lower_ctx *c)
{
	const nn_params *p = c->node->params;
	const mc_tensor *b = mc_lower_const(c, 1);
	const mc_value *cv = c->n_in > 2 ? c->in[2] : NULL;
	if (p->trans_a || !b || c->in[0]->shape.rank != 2 || c->in[1]->shape.rank != 2)
		return 1;
	int64_t m = c->in[0]->shape.dims[0], k = c->in[0]->shape.dims[1];
	int64_t n = c->out[0]->shape.dims[1];
	b_source bs = { b, p->trans_b, k, n, p->alpha };
	bias_source cs = { NULL, p->beta };
	if (cv && p->beta != 0) {
		cs.c = mc_lower_const(c, 2);
		if (!mc_is_f32(cv) || !cs.c || !bias_by_column(&cs.c->shape, n))
			return 1;
	}
	return emit_product(c, m, k, n, &bs, cs.c ? &cs : NULL);
}

/* Elements one product of the batch moves an operand shaped s on (the
 * matrix's size), 0 where every product reads the same matrix; -1 where
 * its batch dims are neither the output's nor all 1 (a partial broadcast:
 * the plain lowering takes it). */
int64_t mc_matmul_batch_step(const mc_shape *s, const mc_shape *os)
{
	int nb = s->rank - 2, onb = os->rank - 2;
	int64_t mine = 1;
	for (int i = 0; i < nb; i++)
		mine *= s->dims[i];
	if (mine == 1)
		return 0;
	if (nb != onb)
		return -1;
	for (int i = 0; i < nb; i++)
		if (s->dims[i] != os->dims[i])
			return -1;
	return s->dims[nb] * s->dims[nb + 1];
}

/* MatMul by a constant 2-D B: packed, every row of A (any rank) a row of
 * the product. Otherwise (B computed at run time, or batched) the batch's
 * products one by one, B read where it is. */
static int kern_matmul(mc_lower_ctx *c)
{
	const mc_tensor *b = mc_lower_const(c, 1);
	const mc_shape *as = &c->in[0]->shape, *bs = &c->in[1]->shape, *os = &c->out[0]->shape;
	if (bs->rank < 2 || as->rank < 1)
		return 1;
	int64_t k = bs->dims[bs->rank - 2], n = bs->dims[bs->rank - 1];
	if (as->dims[as->rank - 1] != k)
		return 1;
	if (b && bs->rank == 2) {
		int64_t rows = k > 0 ? (int64_t)mc_numel(as) / k : 0;
		b_source src = { b, false, k, n, 1.0 };
		return emit_product(c, rows, k, n, &src, NULL);
	}
	if (as->rank < 2 || os->rank != (as->rank > bs->rank ? as->rank : bs->rank))
		return 1;
	int64_t m = as->dims[as->rank - 2];
	int64_t a_step = mc_matmul_batch_step(as, os), b_step = mc_matmul_batch_step(bs, os);
	if (a_step < 0 || b_step < 0)
		return 1;
	int64_t batch = m > 0 ? (int64_t)mc_numel(os) / (m * n) : 0;
	kt_cols cols;
	kt_gemm g = { .rows = m, .k = k, .a_buf = c->in_buf[0], .b_buf = c->in_buf[1],
	              .bias_buf = -1, .cols = &cols, .batch = batch, .a_batch = a_step,
	              .b_batch = b_step };
	if (b_step == 0 && a_step != 0) { /* one B for all: the batch's rows are one product's */
		g.rows = m * batch;
		g.batch = 1;
	}
	kt_plan_direct(c->kb, n, k, kt_plan_rows(c->kb, g.rows), &cols);
	kt_gemm_emit(c, &g);
	return 0;
}

bool kt_blas_takes(const mc_kb *kb, int64_t batch, int64_t m, int64_t n, int64_t k)
{
	if (!kb->blas)
		return false;
	if (kb->blas_min_macs > 0)
		return batch * m * n * k >= kb->blas_min_macs;
	return kb->isa->max_lanes <= MC_BLAS_MAX_LANES && m >= MC_BLAS_MIN_ROWS && n >= MC_BLAS_MIN_COLS &&
	       k >= MC_BLAS_MIN_DEPTH;
}

bool kt_blas_operands_plain(const mc_lower_ctx *c)
{
	return !(c->gather && (c->gather[0] >= 0 || c->gather[1] >= 0)) && c->ring_elems == 0;
}

void kt_blas_emit(mc_lower_ctx *c, mc_ktemplate *t, const kt_blas_bias *bias)
{
	mc_kb *kb = c->kb;
	const mc_shape *os = &c->out[0]->shape;
	int64_t n = t->ow;
	bool nest = bias->buf >= 0 || (c->group && c->group->n_epi > 0);
	t->out = nest ? mc_kb_scratch(kb, MC_FLOAT, (size_t)(t->n * t->cout * n)) : c->out_buf[0];
	mc_kb_template(kb, t);
	if (!nest)
		return;
	mc_kexpr *row = mc_kb_fori(kb, t->n * t->cout, MC_KF_PARALLEL);
	mc_kexpr **coords = row_coords(kb, os, row);
	mc_kexpr *col = mc_kb_fori(kb, n, MC_KF_PARALLEL);
	coords[os->rank - 1] = col;
	mc_kexpr *lin = mc_kb_let(kb, mc_k_add(kb, mc_k_muli(kb, row, n), col));
	mc_kexpr *v = mc_k_load(kb, t->out, lin);
	if (bias->buf >= 0) {
		mc_kexpr *at = bias->full ? lin : bias->one ? mc_k_index(kb, 0) : col;
		mc_kexpr *cval = mc_k_load(kb, bias->buf, at);
		if (bias->beta != 1)
			cval = mc_k_mul(kb, mc_k_float(kb, MC_KT_F32, bias->beta), cval);
		v = mc_k_add(kb, v, cval);
	}
	mc_lower_store(c, 0, coords, lin, v);
	mc_kb_end(kb);
	mc_kb_end(kb);
}

/* --blas openblas: a large float MatMul or Gemm (mc_kb.blas) by cblas_sgemm (kt_blas_emit). 1: not this
 * way (the tiles then run). */
static int kern_blas(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *as = &c->in[0]->shape, *bs = &c->in[1]->shape, *os = &c->out[0]->shape;
	if (!kb->blas || !kt_blas_operands_plain(c) || as->rank < 2 || bs->rank < 2)
		return 1;
	mc_ktemplate t = { .kind = MC_TMPL_SGEMM, .wt = c->in_buf[0], .x = c->in_buf[1], .scale = 1.0, .n = 1 };
	int64_t m, k, n;
	kt_blas_bias bias = { .buf = -1, .beta = 1 };
	if (c->node->id == MC_OP_Gemm) {
		const nn_params *p = c->node->params;
		if (as->rank != 2 || bs->rank != 2)
			return 1;
		m = p->trans_a ? as->dims[1] : as->dims[0];
		k = p->trans_a ? as->dims[0] : as->dims[1];
		n = os->dims[1];
		int64_t a_st[3] = { 0, p->trans_a ? 1 : k, p->trans_a ? m : 1 };
		int64_t b_st[3] = { 0, p->trans_b ? 1 : n, p->trans_b ? k : 1 };
		memcpy(t.a_st, a_st, sizeof a_st);
		memcpy(t.b_st, b_st, sizeof b_st);
		t.scale = p->alpha;
		const mc_value *cv = c->n_in > 2 ? c->in[2] : NULL;
		if (cv && p->beta != 0) {
			const mc_shape *cs = &cv->shape;
			int64_t cn = (int64_t)mc_numel(cs);
			bias.full = cn == m * n && cs->rank == 2 && cs->dims[0] == m;
			bias.one = cn == 1;
			if (!mc_is_f32(cv) || c->in_buf[2] < 0 || (c->gather && c->gather[2] >= 0) ||
			    !(bias.full || bias_by_column(cs, n)))
				return 1;
			bias.buf = c->in_buf[2];
			bias.beta = p->beta;
		}
	} else {
		k = bs->dims[bs->rank - 2];
		n = bs->dims[bs->rank - 1];
		m = as->dims[as->rank - 2];
		int64_t a_step = mc_matmul_batch_step(as, os), b_step = mc_matmul_batch_step(bs, os);
		if (as->dims[as->rank - 1] != k || a_step < 0 || b_step < 0 ||
		    os->rank != (as->rank > bs->rank ? as->rank : bs->rank))
			return 1;
		t.n = m > 0 ? (int64_t)mc_numel(os) / (m * n) : 0;
		if (b_step == 0 && a_step != 0) { /* one B for all: the batch's rows are one product's */
			m *= t.n;
			t.n = 1;
			a_step = 0;
		}
		int64_t a_st[3] = { a_step, k, 1 }, b_st[3] = { b_step, n, 1 };
		memcpy(t.a_st, a_st, sizeof a_st);
		memcpy(t.b_st, b_st, sizeof b_st);
	}
	/* m, n, k >= 1: mc_kern_gemm leaves empty operands to the tiles */
	if (!kt_blas_takes(kb, t.n, m, n, k))
		return 1;
	t.cout = m;
	t.ow = n;
	t.cin = k;
	kt_blas_emit(c, &t, &bias);
	return 0;
}

int mc_kern_gemm(mc_lower_ctx *c)
{
	/* register tiles serve CPUs; on a GPU, tensor cores' tiles
	 * (kern_cuda.c), else the plain kernel's thread per output element
	 * parallelises better */
	if (c->kb->target->grid)
		return c->kb->target->conv_template ? mc_kern_gemm_cuda(c) : 1;
	if (!c->out[0] || !mc_is_f32(c->out[0]) || !mc_is_f32(c->in[0]) || !mc_is_f32(c->in[1]))
		return 1;
	if (mc_numel(&c->out[0]->shape) == 0 || mc_numel(&c->in[0]->shape) == 0 ||
	    mc_numel(&c->in[1]->shape) == 0)
		return 1;
	int rc = kern_blas(c);
	if (rc != 1)
		return rc;
	bool gemm = c->node->id == MC_OP_Gemm;
	return gemm ? kern_gemm(c) : kern_matmul(c);
}
