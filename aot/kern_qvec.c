/* Integer convolution on i32 vectors (mc_kern_qvec): QiConv of group 1,
 * 2-D (any window, stride, dilation, padding) or pointwise of any rank,
 * on the ISAs with vectors (--isa avx2, avx512, avx512-vnni, neon). The
 * lanes run along output pixels, so that a vector of sums is a run of one
 * output channel's plane (NCHW) and leaves with one vector store.
 *
 * The reduction index k runs tap-major, k = t * cp + c (cp: the channels,
 * rounded up to a whole group), or along k itself (cp == ch) where the
 * channel count is not whole groups and the reduction short (first
 * layers), as mc_kern_qdual's, and is taken in groups: pairs for DOT2
 * (16-bit halves: vpmaddwd, vpdpwssd with VNNI), or quads for DOT4 where
 * the ISA has VNNI (bytes: vpdpbusd, unsigned x by signed w, so int8 x
 * goes as x + 128 with its zero point moved alike) or aarch64's sdot
 * (signed by signed: uint8 x goes as x - 128):
 *
 * - a block of whole output rows (all pixels of a pointwise convolution)
 *   is first written into scratch as im2col groups, one i32 word per group
 *   of k and pixel, x[k] in the lowest half (byte), x_zp outside the input
 *   (x_zp times each channel's weight sum is off its bias at generation
 *   time); where a row of the block reads a run of the input at stride 1
 *   or 2 the words are built a vector at a time;
 * - the weight is packed at generation time one group to a word, [M][KP];
 * - tm channels x tv vectors of pixels accumulate in registers, each step
 *   one weight word splat against tv vectors of x words; the split
 *   requantisation (RQ32) then runs on whole vectors, and so do the zero
 *   point, the clamp, a fused epilogue with an integer vector form
 *   (QiAdd) and the narrowing store.
 *
 * Bit-identical to the plain lowering: the same int32 sums modulo 2^32,
 * each product exact (x int8 or uint8, w int8), the same rounding. */
#include <string.h>

#include "lower.h"
#include "lower_window.h"
#include "../libcore/ops/qint.h"
#include "../libcore/ops/quant.h"

#define LINEAR_MAX 64   /* odd channel counts pair along k up to this K */
#define BLOCK_PIX 256   /* pixels a block of rows, at most (unless one row is more) */
#define TM_MAX 6
#define TV_MAX 4
#define DW_PAIRS_MAX 32 /* depthwise weight pairs a window, at most (a 7x7 is 28) */
#define DW_TV 2         /* depthwise vectors a step */

typedef struct {
	mc_lower_ctx *c;
	conv_geom g;
	bool pointwise;           /* 1x1, stride 1, no padding: one row of all pixels */
	int64_t ch, cp, taps, kp; /* channels, grouped channel stride, window taps, k groups */
	int gk;                   /* k a group: 2 (DOT2 pairs) or 4 (DOT4 quads: VNNI) */
	bool flip;                /* DOT4 of x of the other signedness: sign bits flipped (x + 128 or x - 128) */
	bool linear;              /* pairs along k = t * ch + c */
	int64_t m, oh, ow, pix;   /* output channels; rows, row length, pixels (per image) */
	int64_t rb, bpix, bpad;   /* rows a block, its pixels, its scratch row (a multiple of lanes) */
	int64_t x_zp;
	int lanes, tm, tv;
	int wb, bb, sb;
	mc_rq_pack rq;
} qvec;

static mc_kexpr *i32c(mc_kb *kb, int64_t v)
{
	return mc_k_int(kb, MC_KT_I32, v);
}

/* lo in the low half-word, hi in the high one (scalars or vectors) */
static mc_kexpr *pair(mc_kb *kb, mc_kexpr *lo, mc_kexpr *hi)
{
	return mc_k_bin(kb, MC_KB_OR, mc_k_bin(kb, MC_KB_AND, lo, i32c(kb, 0xffff)),
	                mc_k_bin(kb, MC_KB_SHL, hi, i32c(kb, 16)));
}

/* One part of a group (a pair's half, a quad's byte): channel c (an
 * expression) at tap (ti, tj); absent: padded k, whose weight is 0. */
typedef struct {
	bool absent;
	mc_kexpr *c;
	int64_t ti, tj;
} half;

/* w[m][k] in the kernel's k order; 0 for padded k. */
static int64_t weight_at(const qvec *d, const mc_tensor *w, int64_t m, int64_t k)
{
	int64_t t = k / d->cp, c = k % d->cp;
	if (t >= d->taps || c >= d->ch)
		return 0;
	return mc_get_i(w, (size_t)((m * d->ch + c) * d->taps + t));
}

static mc_tensor *pack_weight(const qvec *d)
{
	const mc_tensor *w = mc_lower_const(d->c, QI_W);
	mc_shape s = {1, {d->m * d->kp}};
	mc_tensor *p = mc_tensor_new(MC_INT32, &s);
	MC_ASSERT(p);
	/* a group's weights as the halves (pairs) or bytes (quads) of a word */
	int bits = 32 / d->gk;
	uint32_t mask = bits == 16 ? 0xffffu : 0xffu;
	for (int64_t m = 0; m < d->m; m++)
		for (int64_t kp = 0; kp < d->kp; kp++) {
			uint32_t word = 0;
			for (int i = 0; i < d->gk; i++)
				word |= ((uint32_t)weight_at(d, w, m, d->gk * kp + i) & mask) << (bits * i);
			mc_set_i(p, (size_t)(m * d->kp + kp), (int32_t)word);
		}
	return p;
}

/* The columns [lo, hi) of a row whose tap tj reads inside the input. */
static void col_range(const qvec *d, int64_t tj, int64_t *lo, int64_t *hi)
{
	const conv_geom *g = &d->g;
	if (d->pointwise) {
		*lo = 0;
		*hi = d->ow;
		return;
	}
	int64_t off = tj * g->dil[1] - g->pad[1], s = g->stride[1];
	*lo = 0;
	while (*lo < d->ow && *lo * s + off < 0)
		(*lo)++;
	*hi = *lo;
	while (*hi < d->ow && *hi * s + off < g->in[1])
		(*hi)++;
}

/* Columns [lo, hi) that a vector reads: stride-2 loads also read the byte
 * after each element, which must be inside the row too. */
static void vec_col_range(const qvec *d, int64_t tj, int64_t *lo, int64_t *hi)
{
	col_range(d, tj, lo, hi);
	if (d->pointwise || d->g.stride[1] != 2)
		return;
	int64_t off = tj * d->g.dil[1] - d->g.pad[1];
	while (*hi > *lo && (*hi - 1) * 2 + off + 1 >= d->g.in[1])
		(*hi)--;
}

/* x of half h at row oh and column ow (scalar, i32), where it is inside
 * the input (the caller checks); the linear index when vec. */
static mc_kexpr *x_index(const qvec *d, mc_kexpr *n, const half *h, mc_kexpr *oh, mc_kexpr *ow)
{
	mc_kb *kb = d->c->kb;
	const conv_geom *g = &d->g;
	mc_kexpr *plane = mc_k_add(kb, mc_k_muli(kb, n, d->ch), h->c);
	if (d->pointwise)
		return mc_k_add(kb, mc_k_muli(kb, plane, d->pix), ow);
	mc_kexpr *ih = mc_k_addi(kb, mc_k_muli(kb, oh, g->stride[0]), h->ti * g->dil[0] - g->pad[0]);
	mc_kexpr *iw = mc_k_addi(kb, mc_k_muli(kb, ow, g->stride[1]), h->tj * g->dil[1] - g->pad[1]);
	return mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, plane, g->in[0]), ih), g->in[1]), iw);
}

/* Whether half h's row is inside the input at output row oh (NULL: always). */
static mc_kexpr *row_inside(const qvec *d, const half *h, mc_kexpr *oh)
{
	mc_kb *kb = d->c->kb;
	const conv_geom *g = &d->g;
	if (d->pointwise || h->absent)
		return NULL;
	int64_t off = h->ti * g->dil[0] - g->pad[0];
	if (off >= 0 && (d->oh - 1) * g->stride[0] + off < g->in[0])
		return NULL;
	mc_kexpr *ih = mc_kb_let(kb, mc_k_addi(kb, mc_k_muli(kb, oh, g->stride[0]), off));
	return mc_k_bin(kb, MC_KB_AND, mc_k_bin(kb, MC_KB_GE, ih, idx(kb, 0)),
	                mc_k_bin(kb, MC_KB_LT, ih, idx(kb, g->in[0])));
}

/* The lanes of q (consecutive along output 0's last dim from coordinates
 * co, `rank` of them, at linear index lin) that lie below `bound` in that
 * dim, one at a time: a vector running past the end of its row. */
static void store_lanes(mc_lower_ctx *c, mc_kexpr *const *co, int rank, mc_kexpr *lin, mc_kexpr *q,
                        int lanes, int64_t bound)
{
	mc_kb *kb = c->kb;
	mc_kexpr *cl[MC_MAX_RANK];
	memcpy(cl, co, sizeof *cl * (size_t)rank);
	for (int l = 0; l < lanes; l++) {
		cl[rank - 1] = mc_kb_let(kb, mc_k_addi(kb, co[rank - 1], l));
		mc_kb_if(kb, mc_k_bin(kb, MC_KB_LT, cl[rank - 1], idx(kb, bound)));
		mc_lower_store(c, 0, cl, mc_k_addi(kb, lin, l), mc_k_lane(kb, q, l));
		mc_kb_end(kb);
	}
}

static mc_kexpr *and_of(mc_kb *kb, mc_kexpr *a, mc_kexpr *b)
{
	return !a ? b : !b ? a : mc_k_bin(kb, MC_KB_AND, a, b);
}

/* Half h's value at (oh, ow) as i32: x inside the input, x_zp outside
 * (rin: its row is inside; NULL: known inside). */
static mc_kexpr *half_value(const qvec *d, mc_kexpr *n, const half *h, mc_kexpr *rin, mc_kexpr *oh,
                            mc_kexpr *ow)
{
	mc_kb *kb = d->c->kb;
	mc_kexpr *zp = i32c(kb, d->x_zp);
	if (h->absent)
		return zp;
	mc_kexpr *in = rin;
	int64_t lo, hi;
	col_range(d, h->tj, &lo, &hi);
	if (lo > 0)
		in = and_of(kb, in, mc_k_bin(kb, MC_KB_GE, ow, idx(kb, lo)));
	if (hi < d->ow)
		in = and_of(kb, in, mc_k_bin(kb, MC_KB_LT, ow, idx(kb, hi)));
	mc_kexpr *x = mc_k_cast(kb, MC_KT_I32, mc_lower_load(d->c, QI_X, x_index(d, n, h, oh, ow)));
	return in ? mc_k_select(kb, in, x, zp) : x;
}

/* The word of a group of values (scalars or vectors, i32): a pair's
 * 16-bit halves, or a quad's bytes (sign bits flipped where DOT4 takes
 * x's bytes of the other signedness). */
static mc_kexpr *group_word(const qvec *d, mc_kexpr *const *v)
{
	mc_kb *kb = d->c->kb;
	if (d->gk == 2)
		return pair(kb, v[0], v[1]);
	mc_kexpr *w = mc_k_bin(kb, MC_KB_AND, v[0], i32c(kb, 0xff));
	for (int i = 1; i < 4; i++) {
		mc_kexpr *b = i < 3 ? mc_k_bin(kb, MC_KB_AND, v[i], i32c(kb, 0xff)) : v[i];
		w = mc_k_bin(kb, MC_KB_OR, w, mc_k_bin(kb, MC_KB_SHL, b, i32c(kb, 8 * i)));
	}
	return d->flip ? mc_k_bin(kb, MC_KB_XOR, w, i32c(kb, (int32_t)0x80808080u)) : w;
}

/* Scratch columns [from, to) of the block's row r (output row oh) for the
 * group of parts h at scratch row base `row`: one word at a time. */
static void scalar_cols(const qvec *d, mc_kexpr *n, const half *h, mc_kexpr *const *rin, mc_kexpr *oh,
                        mc_kexpr *dst, int64_t from, int64_t to)
{
	mc_kb *kb = d->c->kb;
	if (from >= to)
		return;
	mc_kexpr *ow = mc_kb_for(kb, idx(kb, from), idx(kb, to), 0);
	mc_kexpr *v[4];
	for (int i = 0; i < d->gk; i++)
		v[i] = half_value(d, n, &h[i], rin[i], oh, ow);
	mc_kb_store(kb, d->sb, mc_k_add(kb, dst, ow), group_word(d, v));
	mc_kb_end(kb);
}

/* One group of k (its parts h) for the block's rows: scratch row `row`. */
static void pack_pair(const qvec *d, mc_kexpr *n, mc_kexpr *oh0, const half *h, mc_kexpr *row)
{
	mc_kb *kb = d->c->kb;
	mc_kexpr *r = d->rb > 1 ? mc_kb_fori(kb, d->rb, 0) : idx(kb, 0);
	mc_kexpr *oh = mc_kb_let(kb, mc_k_add(kb, oh0, r));
	mc_kexpr *dst = mc_kb_let(kb, mc_k_add(kb, row, mc_k_muli(kb, r, d->ow)));
	mc_kexpr *rin[4] = { NULL, NULL, NULL, NULL }, *both = NULL;
	for (int i = 0; i < d->gk; i++) {
		rin[i] = row_inside(d, &h[i], oh);
		both = and_of(kb, both, rin[i]);
	}
	/* the columns every part reads inside the input, a vector at a time
	 * where the row reads contiguous input */
	int64_t vlo = 0, vhi = d->ow;
	for (int i = 0; i < d->gk; i++) {
		int64_t lo = 0, hi = d->ow;
		if (!h[i].absent)
			vec_col_range(d, h[i].tj, &lo, &hi);
		vlo = lo > vlo ? lo : vlo;
		vhi = hi < vhi ? hi : vhi;
	}
	/* stride 1: contiguous runs; stride 2: every other element */
	bool s2 = !d->pointwise && d->g.stride[1] == 2;
	bool vectors = d->pointwise || d->g.stride[1] == 1 || s2;
	int64_t nv = vectors && vhi > vlo ? (vhi - vlo) / d->lanes : 0;
	if (nv > 0) {
		if (both)
			mc_kb_if(kb, both);
		/* whole vectors from vlo, and one more ending at vhi where they
		 * fall short (it rewrites some words with the same values) */
		bool extra = vlo + nv * d->lanes < vhi;
		mc_kexpr *q = mc_kb_fori(kb, nv + extra, 0);
		mc_kexpr *ow = mc_k_addi(kb, mc_k_muli(kb, q, d->lanes), vlo);
		if (extra)
			ow = mc_k_bin(kb, MC_KB_MIN, ow, idx(kb, vhi - d->lanes));
		ow = mc_kb_let(kb, ow);
		mc_kexpr *v[4];
		for (int i = 0; i < d->gk; i++)
			v[i] = h[i].absent ? i32c(kb, d->x_zp)
			     : s2 ? mc_k_vload2(kb, d->c->in_buf[QI_X], x_index(d, n, &h[i], oh, ow), d->lanes)
			          : mc_k_vload(kb, d->c->in_buf[QI_X], x_index(d, n, &h[i], oh, ow), d->lanes);
		mc_kb_store(kb, d->sb, mc_k_add(kb, dst, ow), group_word(d, v));
		mc_kb_end(kb);
		mc_kexpr *known[4] = { NULL, NULL, NULL, NULL };
		scalar_cols(d, n, h, known, oh, dst, 0, vlo);
		scalar_cols(d, n, h, known, oh, dst, vhi, d->ow);
		if (both) {
			mc_kb_else(kb);
			scalar_cols(d, n, h, rin, oh, dst, 0, d->ow);
			mc_kb_end(kb);
		}
	} else {
		scalar_cols(d, n, h, rin, oh, dst, 0, d->ow);
	}
	if (d->rb > 1)
		mc_kb_end(kb);
}

/* The block's im2col words, scratch [KP][bpad]; its pad columns (past the
 * block's pixels, read by the last vectors, never stored) hold x_zp. */
static void pack_block(const qvec *d, mc_kexpr *n, mc_kexpr *oh0)
{
	mc_kb *kb = d->c->kb;
	if (d->linear) {
		for (int64_t kp = 0; kp < d->kp; kp++) {
			half h[4];
			for (int i = 0; i < d->gk; i++) {
				int64_t k = d->gk * kp + i, t = k / d->ch;
				h[i] = (half){ .absent = t >= d->taps, .c = idx(kb, k % d->ch),
				               .ti = d->pointwise ? 0 : t / d->g.kern[1],
				               .tj = d->pointwise ? 0 : t % d->g.kern[1] };
			}
			pack_pair(d, n, oh0, h, idx(kb, kp * d->bpad));
		}
	} else {
		int g = d->gk;
		for (int64_t t = 0; t < d->taps; t++) {
			int64_t ti = d->pointwise ? 0 : t / d->g.kern[1], tj = d->pointwise ? 0 : t % d->g.kern[1];
			int64_t full = d->ch / g;
			if (full > 0) {
				mc_kexpr *cg = mc_kb_fori(kb, full, 0);
				mc_kexpr *c0 = mc_kb_let(kb, mc_k_muli(kb, cg, g));
				half h[4];
				for (int i = 0; i < g; i++)
					h[i] = (half){ false, mc_k_addi(kb, c0, i), ti, tj };
				pack_pair(d, n, oh0, h,
				          mc_kb_let(kb, mc_k_muli(kb, mc_k_addi(kb, cg, t * (d->cp / g)), d->bpad)));
				mc_kb_end(kb);
			}
			if (d->ch % g) { /* the channels padded to the group: their weights are 0 */
				half h[4];
				for (int i = 0; i < g; i++)
					h[i] = full * g + i < d->ch ? (half){ false, idx(kb, full * g + i), ti, tj }
					                            : (half){ true, NULL, 0, 0 };
				pack_pair(d, n, oh0, h, idx(kb, (t * (d->cp / g) + full) * d->bpad));
			}
		}
	}
	if (d->bpad > d->bpix) {
		mc_kexpr *kp = mc_kb_fori(kb, d->kp, 0);
		mc_kexpr *j = mc_kb_for(kb, idx(kb, d->bpix), idx(kb, d->bpad), 0);
		mc_kb_store(kb, d->sb, mc_k_add(kb, mc_k_muli(kb, kp, d->bpad), j), i32c(kb, 0));
		mc_kb_end_n(kb, 2);
	}
}

/* Requantises and stores channel tile mt's sums for vectors v0.. of the
 * block at pixel p0 (the last vector may run past the block's pixels:
 * those lanes are not stored). */
static void store_tile(const qvec *d, mc_kexpr *n, mc_kexpr *mt, mc_kexpr *p0, mc_kexpr *j0, int tv,
                       bool ragged, mc_kexpr *acc[][TV_MAX])
{
	mc_lower_ctx *c = d->c;
	mc_kb *kb = c->kb;
	for (int i = 0; i < d->tm; i++) {
		mc_kexpr *oc = mc_kb_let(kb, mc_k_addi(kb, mc_k_muli(kb, mt, d->tm), i));
		mc_rq_chan rq = mc_rq_channel(c, &d->rq, oc);
		for (int v = 0; v < tv; v++) {
			mc_kexpr *q = mc_kb_let(kb, mc_rq_apply(c, &d->rq, &rq, acc[i][v]));
			mc_kexpr *j = mc_kb_let(kb, mc_k_addi(kb, j0, v * d->lanes));
			mc_kexpr *p = mc_k_add(kb, p0, j);
			mc_kexpr *lin = mc_kb_let(kb, mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, n, d->m), oc),
			                                                      d->pix), p));
			mc_kexpr *co[MC_MAX_RANK];
			co[0] = n;
			co[1] = oc;
			mc_shape spatial = {d->g.nsp, {0}};
			for (int s = 0; s < d->g.nsp; s++)
				spatial.dims[s] = d->g.out[s];
			/* lane by lane where the vector runs past the block (its
			 * last); else whole, a fused epilogue too where its operands
			 * are whole tensors (a vector can span rows, so without
			 * coordinates: mc_lower_store_vec goes lane by lane for the
			 * rest) */
			if (ragged && v == tv - 1) {
				for (int l = 0; l < d->lanes; l++) {
					mc_kexpr *jl = mc_kb_let(kb, mc_k_addi(kb, j, l));
					mc_kb_if(kb, mc_k_bin(kb, MC_KB_LT, jl, idx(kb, d->bpix)));
					mc_lower_coords(kb, &spatial, mc_kb_let(kb, mc_k_add(kb, p0, jl)), co + 2);
					mc_lower_store(c, 0, co, mc_k_addi(kb, lin, l), mc_k_lane(kb, q, l));
					mc_kb_end(kb);
				}
				continue;
			}
			mc_lower_store_vec(c, 0, NULL, lin, q);
		}
	}
}

/* tm channels x tv vectors from scratch column j0 */
static void tile(const qvec *d, mc_kexpr *n, mc_kexpr *mt, mc_kexpr *p0, mc_kexpr *j0, int tv, bool ragged)
{
	mc_kb *kb = d->c->kb;
	mc_kexpr *acc[TM_MAX][TV_MAX];
	mc_kexpr *wrow[TM_MAX];
	for (int i = 0; i < d->tm; i++) {
		mc_kexpr *oc = mc_k_addi(kb, mc_k_muli(kb, mt, d->tm), i);
		mc_kexpr *bias = mc_kb_let(kb, mc_k_load(kb, d->bb, oc));
		for (int v = 0; v < tv; v++)
			acc[i][v] = mc_kb_local(kb, mc_k_splat(kb, bias, d->lanes));
	}
	mc_kexpr *kp = mc_kb_fori(kb, d->kp, MC_KF_REDUCE);
	mc_kexpr *xv[TV_MAX];
	mc_kexpr *xrow = mc_kb_let(kb, mc_k_add(kb, mc_k_muli(kb, kp, d->bpad), j0));
	for (int v = 0; v < tv; v++)
		xv[v] = mc_kb_let(kb, mc_k_vload(kb, d->sb, mc_k_addi(kb, xrow, v * d->lanes), d->lanes));
	for (int i = 0; i < d->tm; i++) {
		wrow[i] = mc_k_add(kb, mc_k_muli(kb, mc_k_addi(kb, mc_k_muli(kb, mt, d->tm), i), d->kp), kp);
		mc_kexpr *w = mc_kb_let(kb, mc_k_splat(kb, mc_k_load(kb, d->wb, wrow[i]), d->lanes));
		for (int v = 0; v < tv; v++) /* DOT4: x's bytes (unsigned; sdot: signed) by w's signed ones */
			mc_kb_assign(kb, acc[i][v], d->gk == 4 ? mc_k_dot4(kb, xv[v], w, acc[i][v], kb->isa->dot4_signed)
			                                       : mc_k_dot2(kb, w, xv[v], acc[i][v]));
	}
	mc_kb_end(kb);
	store_tile(d, n, mt, p0, j0, tv, ragged, acc);
}

/* The block of rows from oh0: pack, then every channel tile over its
 * vectors of pixels. */
static void block(const qvec *d, mc_kexpr *n, mc_kexpr *oh0)
{
	mc_kb *kb = d->c->kb;
	pack_block(d, n, oh0);
	mc_kexpr *p0 = mc_kb_let(kb, mc_k_muli(kb, oh0, d->ow));
	int64_t nvec = d->bpad / d->lanes, full = nvec / d->tv, rest = nvec % d->tv;
	bool ragged = d->bpad > d->bpix;
	mc_kexpr *mt = mc_kb_fori(kb, d->m / d->tm, 0);
	if (full > 0) {
		bool last_ragged = ragged && rest == 0;
		int64_t loop = last_ragged ? full - 1 : full;
		if (loop > 0) {
			mc_kexpr *vt = mc_kb_fori(kb, loop, 0);
			tile(d, n, mt, p0, mc_kb_let(kb, mc_k_muli(kb, vt, d->tv * d->lanes)), d->tv, false);
			mc_kb_end(kb);
		}
		if (last_ragged)
			tile(d, n, mt, p0, idx(kb, (full - 1) * d->tv * d->lanes), d->tv, true);
	}
	if (rest > 0)
		tile(d, n, mt, p0, idx(kb, full * d->tv * d->lanes), (int)rest, ragged);
	mc_kb_end(kb);
}

/* The ISA's widest i32 vectors, if it has vectors the C target prints
 * (the llvm target expands them alike). */
static int vector_lanes(const mc_lower_ctx *c)
{
	const mc_isa *isa = c->kb->isa;
	if (c->kb->target->grid || (isa->kind != MC_ISA_AVX2 && isa->kind != MC_ISA_AVX512 &&
	                            isa->kind != MC_ISA_NEON))
		return 1;
	return isa->max_lanes;
}

/* What every kernel here needs: an op `op` on an ISA with vectors, an
 * output, int8 constant weights without a zero point, a constant bias or
 * none, and QiConv's or QiMatMul's constant requantisation. */
static bool vec_fits(const mc_lower_ctx *c, mc_opid op)
{
	const mc_tensor *w = mc_lower_const(c, QI_W);
	return c->node->id == op && c->out[0] && vector_lanes(c) >= 4 && w && w->dtype == MC_INT8 &&
	       !(c->n_in > QI_W_ZP && c->in[QI_W_ZP]) && (!c->in[QI_B] || mc_lower_const(c, QI_B)) &&
	       mc_lower_const(c, QI_MULT) && mc_lower_const(c, QI_SHIFT);
}

int mc_kern_qvec(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	if (!vec_fits(c, MC_OP_QiConv))
		return 1;
	const qi_params *qp = c->node->params;
	qvec d = { .c = c, .x_zp = qp->x_zp, .lanes = vector_lanes(c) };
	if (mc_conv_geom_get(c->node, &c->in[QI_X]->shape, &c->in[QI_W]->shape, &d.g))
		return -1;
	const conv_geom *g = &d.g;
	if (g->group != 1)
		return 1;
	d.pointwise = true;
	d.taps = d.pix = 1;
	for (int i = 0; i < g->nsp; i++) {
		d.pointwise = d.pointwise && g->kern[i] == 1 && g->stride[i] == 1 && g->pad[i] == 0;
		d.taps *= g->kern[i];
		d.pix *= g->out[i];
	}
	if (!d.pointwise && g->nsp != 2)
		return 1;
	mc_rq_prepare(c, &d.rq);
	if (!d.rq.split) /* requantisation on 64-bit lanes: the scalar kernels */
		return 1;
	d.ch = g->in_ch;
	d.m = g->out_ch;
	d.gk = kb->isa->dot4 ? 4 : 2;
	bool x_signed = c->in[QI_X]->dtype == MC_INT8;
	d.flip = d.gk == 4 && x_signed != kb->isa->dot4_signed;
	d.linear = d.ch % d.gk && d.ch * d.taps <= LINEAR_MAX;
	d.cp = d.ch % d.gk && !d.linear ? (d.ch + d.gk - 1) / d.gk * d.gk : d.ch;
	d.kp = (d.cp * d.taps + d.gk - 1) / d.gk;
	d.oh = d.pointwise ? 1 : g->out[0];
	d.ow = d.pointwise ? d.pix : g->out[1];
	/* rows a block: a divisor of the rows, up to BLOCK_PIX pixels */
	d.rb = 1;
	for (int64_t r = 1; r <= d.oh; r++)
		if (d.oh % r == 0 && r * d.ow <= BLOCK_PIX)
			d.rb = r;
	d.bpix = d.rb * d.ow;
	d.bpad = (d.bpix + d.lanes - 1) / d.lanes * d.lanes;
	/* registers: tm x tv sums, tv x vectors, the weight splat */
	int vregs = kb->isa->vregs;
	d.tv = vregs >= 32 ? 4 : 2;
	int64_t nvec = d.bpad / d.lanes;
	if (d.tv > nvec)
		d.tv = (int)nvec;
	d.tm = 1;
	for (int tm = TM_MAX; tm >= 1; tm--)
		if (d.m % tm == 0 && tm * d.tv + d.tv + 1 <= vregs - 2) {
			d.tm = tm;
			break;
		}
	d.wb = mc_kb_packed(kb, pack_weight(&d));
	/* the zero point of what the sums multiply: x + 128 (int8 x) or x - 128
	 * (uint8 x) where flipped */
	d.bb = mc_kb_packed(kb, mc_kq_folded_bias(c, d.m, false, d.x_zp + (d.flip ? (x_signed ? 128 : -128) : 0)));
	d.sb = mc_kb_scratch(kb, MC_INT32, (size_t)(d.kp * d.bpad));
	mc_kexpr *n = idx(kb, 0);
	if (g->batch > 1)
		n = mc_kb_fori(kb, g->batch, 0);
	mc_kexpr *b = mc_kb_fori(kb, d.oh / d.rb, 0);
	block(&d, n, mc_kb_let(kb, mc_k_muli(kb, b, d.rb)));
	mc_kb_end(kb);
	if (g->batch > 1)
		mc_kb_end(kb);
	return 0;
}

/* ---- depthwise (mc_kern_qdwvec) ----
 * A QiConv with one output channel per input channel (2-D, no dilation,
 * column stride 1 or 2), lanes along output pixels. For each channel the
 * kernel writes the padded input plane into scratch as pairs,
 * Q[r][q] = (X(r, s q), X(r, s q + 1)) with s the column stride and X = x
 * inside the input, x_zp in the padding (x_zp times the weight sum is off
 * the bias); taps j and j + 1 of a window row at output column o are then
 * the word Q[r][o + j / s] (j even), so one window row takes ceil(kw / 2)
 * DOT2s of vectors of consecutive Q words by splat weight pairs.
 *
 * With stride 1 both ways the lanes run along the flattened plane instead
 * of along each row: output (oh, o) is the sum at flat index oh * QS + o,
 * and the columns past the row's end are computed and dropped, so that
 * short rows (kws's 5 columns) still fill whole vectors. Those sums go to
 * an 8-bit scratch plane, whose valid columns are then copied out. The
 * pairs are built along the flattened plane as well, from a padded copy
 * of the channel's input (QS = the padded row, so the last word of a row
 * pairs with the next row's first byte: its weight is 0). */

typedef struct {
	mc_lower_ctx *c;
	conv_geom g;
	int lanes;
	bool flat;                /* stride 1: lanes along the flattened plane */
	int64_t s;                /* column stride */
	int64_t rows, qs, words;  /* plane rows, row stride (words), words in all */
	int64_t jp, pairs;        /* pairs a window row, a window */
	int64_t nvec;             /* flat: vectors covering the output rows */
	int64_t x_zp;
	int wb, bb, pb, ob, xb;   /* weight pairs, bias, plane; flat: output plane, padded input */
	int64_t xbytes;           /* flat: the padded input's bytes */
	mc_rq_pack rq;
} qdwv;

static mc_tensor *dwv_pack_weight(const qdwv *d)
{
	const mc_tensor *w = mc_lower_const(d->c, QI_W);
	int64_t ch = d->g.out_ch, kh = d->g.kern[0], kw = d->g.kern[1];
	mc_shape s = {1, {ch * d->pairs}};
	mc_tensor *p = mc_tensor_new(MC_INT32, &s);
	MC_ASSERT(p);
	for (int64_t c = 0; c < ch; c++)
		for (int64_t i = 0; i < kh; i++)
			for (int64_t jp = 0; jp < d->jp; jp++) {
				int64_t j = 2 * jp;
				uint32_t lo = (uint32_t)mc_get_i(w, (size_t)((c * kh + i) * kw + j)) & 0xffffu;
				uint32_t hi = j + 1 < kw ? (uint32_t)mc_get_i(w, (size_t)((c * kh + i) * kw + j + 1)) & 0xffffu : 0;
				mc_set_i(p, (size_t)(c * d->pairs + i * d->jp + jp), (int32_t)(lo | hi << 16));
			}
	return p;
}

/* x at input column col of the row starting at xrow, x_zp outside the row
 * (col an index expression; lo/hi: whether it may leave at either end). */
static mc_kexpr *dwv_x(const qdwv *d, mc_kexpr *xrow, mc_kexpr *col)
{
	mc_kb *kb = d->c->kb;
	mc_kexpr *in = mc_k_bin(kb, MC_KB_AND, mc_k_bin(kb, MC_KB_GE, col, idx(kb, 0)),
	                        mc_k_bin(kb, MC_KB_LT, col, idx(kb, d->g.in[1])));
	mc_kexpr *x = mc_k_cast(kb, MC_KT_I32, mc_lower_load(d->c, QI_X, mc_k_add(kb, xrow, col)));
	return mc_k_select(kb, in, x, i32c(kb, d->x_zp));
}

/* Plane words [from, to) of the row at `row`, one at a time. */
static void dwv_scalar_words(const qdwv *d, mc_kexpr *xrow, mc_kexpr *row, int64_t from, int64_t to)
{
	mc_kb *kb = d->c->kb;
	if (from >= to)
		return;
	mc_kexpr *q = mc_kb_for(kb, idx(kb, from), idx(kb, to), 0);
	mc_kexpr *col = mc_kb_let(kb, mc_k_addi(kb, mc_k_muli(kb, q, d->s), -d->g.pad[1]));
	mc_kb_store(kb, d->pb, mc_k_add(kb, row, q),
	            pair(kb, dwv_x(d, xrow, col), dwv_x(d, xrow, mc_k_addi(kb, col, 1))));
	mc_kb_end(kb);
}

/* words [from, to) of the plane set to the zero point's pair */
static void dwv_fill(const qdwv *d, mc_kexpr *at, int64_t count)
{
	mc_kb *kb = d->c->kb;
	mc_kexpr *zp = i32c(kb, (int32_t)(((uint32_t)d->x_zp & 0xffffu) | (uint32_t)d->x_zp << 16));
	int64_t nv = count / d->lanes;
	if (nv > 0) {
		mc_kexpr *v = mc_kb_fori(kb, nv, 0);
		mc_kb_store(kb, d->pb, mc_k_add(kb, at, mc_k_muli(kb, v, d->lanes)), mc_k_splat(kb, zp, d->lanes));
		mc_kb_end(kb);
	}
	if (nv * d->lanes < count) {
		mc_kexpr *q = mc_kb_for(kb, idx(kb, nv * d->lanes), idx(kb, count), 0);
		mc_kb_store(kb, d->pb, mc_k_add(kb, at, q), zp);
		mc_kb_end(kb);
	}
}

/* Plane row r of channel ch (batch n). */
static void dwv_build_row(const qdwv *d, mc_kexpr *n, mc_kexpr *ch, mc_kexpr *r)
{
	mc_kb *kb = d->c->kb;
	const conv_geom *g = &d->g;
	int64_t h = g->in[0], w = g->in[1], pl = g->pad[1];
	mc_kexpr *ir = mc_kb_let(kb, mc_k_addi(kb, r, -g->pad[0]));
	mc_kexpr *row = mc_kb_let(kb, mc_k_muli(kb, r, d->qs));
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_AND, mc_k_bin(kb, MC_KB_GE, ir, idx(kb, 0)),
	                      mc_k_bin(kb, MC_KB_LT, ir, idx(kb, h))));
	mc_kexpr *plane = mc_k_add(kb, mc_k_muli(kb, n, g->in_ch), ch);
	mc_kexpr *xrow = mc_kb_let(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, plane, h), ir), w));
	/* the words whose pair lies inside, a vector at a time: stride 1,
	 * pl <= q < pl + w - 1; stride 2 (every other byte, each load reading
	 * one byte more), pl <= 2q and 2q - pl + 2 < w */
	int64_t qa = d->s == 1 ? pl : (pl + 1) / 2;
	int64_t qb = d->s == 1 ? pl + w - 1 : (w - 3 + pl >= 0 ? (w - 3 + pl) / 2 + 1 : 0);
	qa = qa < d->qs ? qa : d->qs;
	qb = qb < d->qs ? qb : d->qs;
	int64_t nv = qb > qa ? (qb - qa) / d->lanes : 0;
	if (nv > 0) {
		dwv_scalar_words(d, xrow, row, 0, qa);
		if (nv > 0) {
			/* whole vectors, and one more ending at qb where they fall short */
			bool extra = qa + nv * d->lanes < qb;
			mc_kexpr *v = mc_kb_fori(kb, nv + extra, 0);
			mc_kexpr *q = mc_k_addi(kb, mc_k_muli(kb, v, d->lanes), qa);
			if (extra)
				q = mc_k_bin(kb, MC_KB_MIN, q, idx(kb, qb - d->lanes));
			q = mc_kb_let(kb, q);
			mc_kexpr *col = mc_kb_let(kb, mc_k_add(kb, xrow, mc_k_addi(kb, mc_k_muli(kb, q, d->s), -pl)));
			int xb = d->c->in_buf[QI_X];
			mc_kexpr *(*ld)(mc_kb *, int, mc_kexpr *, int) = d->s == 2 ? mc_k_vload2 : mc_k_vload;
			mc_kb_store(kb, d->pb, mc_k_add(kb, row, q),
			            pair(kb, ld(kb, xb, col, d->lanes), ld(kb, xb, mc_k_addi(kb, col, 1), d->lanes)));
			mc_kb_end(kb);
		}
		dwv_scalar_words(d, xrow, row, qb, d->qs);
	} else {
		dwv_scalar_words(d, xrow, row, 0, d->qs);
	}
	mc_kb_else(kb);
	dwv_fill(d, row, d->qs);
	mc_kb_end(kb);
}

/* Flat: x_zp everywhere in the padded input, once for all channels
 * (each channel's rows then land on the same bytes, the padding stays). */
static void dwv_fill_flat(const qdwv *d)
{
	mc_kb *kb = d->c->kb;
	int64_t l = d->lanes;
	mc_kexpr *v = mc_kb_fori(kb, d->xbytes / l, 0);
	mc_kb_store(kb, d->xb, mc_k_muli(kb, v, l), mc_k_splat(kb, i32c(kb, d->x_zp), l));
	mc_kb_end(kb);
}

/* Flat: the channel's rows into the padded input, then its pairs. */
static void dwv_build_flat(const qdwv *d, mc_kexpr *n, mc_kexpr *ch)
{
	mc_kb *kb = d->c->kb;
	const conv_geom *g = &d->g;
	int64_t h = g->in[0], w = g->in[1], l = d->lanes;
	mc_kexpr *plane = mc_k_add(kb, mc_k_muli(kb, n, g->in_ch), ch);
	mc_kexpr *ir = mc_kb_fori(kb, h, 0);
	mc_kexpr *src = mc_kb_let(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, plane, h), ir), w));
	mc_kexpr *dst = mc_kb_let(kb, mc_k_addi(kb, mc_k_muli(kb, ir, d->qs), g->pad[0] * d->qs + g->pad[1]));
	int xin = d->c->in_buf[QI_X];
	l = mc_isa_lanes_upto(kb->isa, w); /* rows narrower than the vectors: narrower ones */
	if (l >= 4) { /* the last vector ends at the row's end */
		mc_kexpr *q = mc_kb_fori(kb, (w + l - 1) / l, 0);
		mc_kexpr *o = mc_k_muli(kb, q, l);
		if (w % l)
			o = mc_k_bin(kb, MC_KB_MIN, o, idx(kb, w - l));
		o = mc_kb_let(kb, o);
		mc_kb_store(kb, d->xb, mc_k_add(kb, dst, o), mc_k_vload(kb, xin, mc_k_add(kb, src, o), l));
		mc_kb_end(kb);
	} else {
		mc_kexpr *q = mc_kb_fori(kb, w, 0);
		mc_kb_store(kb, d->xb, mc_k_add(kb, dst, q), mc_k_load(kb, xin, mc_k_add(kb, src, q)));
		mc_kb_end(kb);
	}
	mc_kb_end(kb);
	/* the pairs, a vector at a time along the whole plane */
	l = d->lanes;
	mc_kexpr *f = mc_kb_fori(kb, d->words / l, 0);
	mc_kexpr *at = mc_kb_let(kb, mc_k_muli(kb, f, l));
	mc_kb_store(kb, d->pb, at, pair(kb, mc_k_vload(kb, d->xb, at, l), mc_k_vload(kb, d->xb, mc_k_addi(kb, at, 1), l)));
	mc_kb_end(kb);
}

/* acc[u] over vectors at plane offsets base + u * lanes (times the
 * stride's step between output rows where not flat). */
static void dwv_sums(const qdwv *d, mc_kexpr *const *wpair, mc_kexpr *base, int tv, mc_kexpr **acc,
                     mc_kexpr *bias)
{
	mc_kb *kb = d->c->kb;
	for (int u = 0; u < tv; u++)
		acc[u] = mc_kb_local(kb, mc_k_splat(kb, bias, d->lanes));
	for (int64_t i = 0; i < d->g.kern[0]; i++)
		for (int64_t jp = 0; jp < d->jp; jp++)
			for (int u = 0; u < tv; u++) {
				mc_kexpr *x = mc_k_vload(kb, d->pb, mc_k_addi(kb, base, i * d->qs + 2 * jp / d->s + u * d->lanes),
				                         d->lanes);
				mc_kb_assign(kb, acc[u], mc_k_dot2(kb, wpair[i * d->jp + jp], x, acc[u]));
			}
}

static mc_kexpr *dwv_requant(const qdwv *d, const mc_rq_chan *rq, mc_kexpr *acc)
{
	return mc_kb_let(d->c->kb, mc_rq_apply(d->c, &d->rq, rq, acc));
}

/* Stores row oy's requantised vectors (not flat): whole vectors, the
 * row's last lane by lane (or every lane where an epilogue is fused). */
static void dwv_store_row(const qdwv *d, mc_kexpr *n, mc_kexpr *ch, mc_kexpr *oy, mc_kexpr *ox0, mc_kexpr *q,
                          bool last)
{
	mc_lower_ctx *c = d->c;
	mc_kexpr *co[4] = { n, ch, oy, ox0 };
	mc_kexpr *lin = mc_kb_let(c->kb, mc_lower_linear(c->kb, &c->out[0]->shape, co));
	if (last)
		store_lanes(c, co, 4, lin, q, d->lanes, d->g.out[1]);
	else /* the vector lies in one row: coordinates for an epilogue too */
		mc_lower_store_vec(c, 0, co, lin, q);
}

int mc_kern_qdwvec(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	if (!vec_fits(c, MC_OP_QiConv))
		return 1;
	const qi_params *qp = c->node->params;
	qdwv d = { .c = c, .x_zp = qp->x_zp, .lanes = vector_lanes(c) };
	conv_geom *g = &d.g;
	if (mc_conv_geom_get(c->node, &c->in[QI_X]->shape, &c->in[QI_W]->shape, g))
		return -1;
	if (g->nsp != 2 || g->group == 1 || g->group != g->in_ch || g->out_ch != g->in_ch || g->dil[0] != 1 ||
	    g->dil[1] != 1 || g->stride[1] > 2)
		return 1;
	int64_t kh = g->kern[0], kw = g->kern[1], oh = g->out[0], ow = g->out[1];
	d.s = g->stride[1];
	d.jp = (kw + 1) / 2;
	d.pairs = kh * d.jp;
	if (d.pairs > DW_PAIRS_MAX)
		return 1;
	/* last of the checks: it packs its tables into the kernel when split */
	mc_rq_prepare(c, &d.rq);
	if (!d.rq.split)
		return 1;
	d.flat = g->stride[0] == 1 && d.s == 1;
	d.rows = (oh - 1) * g->stride[0] + kh;
	int64_t reach = 2 * (d.jp - 1) / d.s; /* words right of an output's column */
	if (d.flat) {
		d.qs = ow + kw - 1;
		d.nvec = (oh * d.qs + d.lanes - 1) / d.lanes;
		d.words = d.nvec * d.lanes + (kh - 1) * d.qs + reach;
		d.words = (d.words + d.lanes - 1) / d.lanes * d.lanes;
		/* every byte a pair reads, in whole vectors */
		d.xbytes = (d.words + 1 + d.lanes - 1) / d.lanes * d.lanes;
		if (d.xbytes < d.rows * d.qs)
			d.xbytes = (d.rows * d.qs + d.lanes - 1) / d.lanes * d.lanes;
	} else {
		d.qs = (ow + d.lanes - 1) / d.lanes * d.lanes + reach;
		d.words = d.rows * d.qs;
	}
	d.wb = mc_kb_packed(kb, dwv_pack_weight(&d));
	d.bb = mc_kb_packed(kb, mc_kq_folded_bias(c, g->out_ch, false, d.x_zp));
	d.pb = mc_kb_scratch(kb, MC_INT32, (size_t)d.words);
	if (d.flat) {
		d.ob = mc_kb_scratch(kb, c->out[0]->dtype, (size_t)(d.nvec * d.lanes));
		d.xb = mc_kb_scratch(kb, c->in[QI_X]->dtype, (size_t)d.xbytes);
	}
	if (d.flat)
		dwv_fill_flat(&d);
	int depth = 0;
	mc_kexpr *n = idx(kb, 0);
	if (g->batch > 1) {
		n = mc_kb_fori(kb, g->batch, 0);
		depth++;
	}
	mc_kexpr *ch = mc_kb_fori(kb, g->out_ch, 0);
	depth++;
	if (d.flat) {
		dwv_build_flat(&d, n, ch);
	} else {
		mc_kexpr *r = mc_kb_fori(kb, d.rows, 0);
		dwv_build_row(&d, n, ch, r);
		mc_kb_end(kb);
	}
	mc_kexpr *wpair[DW_PAIRS_MAX];
	for (int64_t i = 0; i < d.pairs; i++)
		wpair[i] = mc_kb_let(kb, mc_k_splat(kb, mc_k_load(kb, d.wb, mc_k_addi(kb, mc_k_muli(kb, ch, d.pairs), i)),
		                                   d.lanes));
	mc_kexpr *bias = mc_kb_let(kb, mc_k_load(kb, d.bb, ch));
	mc_rq_chan rq = mc_rq_channel(c, &d.rq, ch);
	mc_kexpr *acc[DW_TV];
	if (d.flat) {
		for (int part = 0; part < 2; part++) {
			int64_t tv = part == 0 ? DW_TV : 1, from = part == 0 ? 0 : d.nvec / DW_TV * DW_TV;
			int64_t count = part == 0 ? d.nvec / DW_TV : d.nvec - from;
			if (count <= 0)
				continue;
			mc_kexpr *vs = mc_kb_fori(kb, count, 0);
			mc_kexpr *f0 = mc_kb_let(kb, mc_k_muli(kb, mc_k_addi(kb, mc_k_muli(kb, vs, tv), from), d.lanes));
			dwv_sums(&d, wpair, f0, (int)tv, acc, bias);
			for (int u = 0; u < tv; u++)
				mc_kb_store(kb, d.ob, mc_k_addi(kb, f0, u * d.lanes), dwv_requant(&d, &rq, acc[u]));
			mc_kb_end(kb);
		}
		/* the valid columns of each row out: vectors (the last ending at
		 * the row's end, its first lanes stored twice alike; so no fused
		 * epilogue, which may read the output) where rows are long
		 * enough, else one at a time */
		mc_kexpr *oy = mc_kb_fori(kb, oh, 0);
		bool epilogue = c->group && c->group->n_epi > 0;
		int lo = mc_isa_lanes_upto(kb->isa, ow); /* narrower vectors for narrow rows */
		if (lo >= 4 && (!epilogue || ow % lo == 0)) {
			mc_kexpr *q = mc_kb_fori(kb, (ow + lo - 1) / lo, 0);
			mc_kexpr *ox = mc_k_muli(kb, q, lo);
			if (ow % lo)
				ox = mc_k_bin(kb, MC_KB_MIN, ox, idx(kb, ow - lo));
			ox = mc_kb_let(kb, ox);
			mc_kexpr *co[4] = { n, ch, oy, ox };
			mc_lower_store_vec(c, 0, co, NULL, mc_k_vload(kb, d.ob, mc_k_add(kb, mc_k_muli(kb, oy, d.qs), ox), lo));
		} else {
			mc_kexpr *ox = mc_kb_fori(kb, ow, 0);
			mc_kexpr *co[4] = { n, ch, oy, ox };
			mc_kexpr *v = mc_k_cast(kb, MC_KT_I32, mc_k_load(kb, d.ob, mc_k_add(kb, mc_k_muli(kb, oy, d.qs), ox)));
			mc_lower_store(c, 0, co, NULL, v);
		}
		mc_kb_end_n(kb, 2);
	} else {
		mc_kexpr *oy = mc_kb_fori(kb, oh, 0);
		mc_kexpr *rowb = mc_kb_let(kb, mc_k_muli(kb, mc_k_muli(kb, oy, g->stride[0]), d.qs));
		int64_t nv = (ow + d.lanes - 1) / d.lanes;
		for (int part = 0; part < 2; part++) {
			int64_t tv = part == 0 ? DW_TV : 1, from = part == 0 ? 0 : nv / DW_TV * DW_TV;
			int64_t count = part == 0 ? nv / DW_TV : nv - from;
			if (count <= 0)
				continue;
			bool ragged = ow % d.lanes != 0; /* the row's last vector runs past it */
			mc_kexpr *vs = mc_kb_fori(kb, count, 0);
			mc_kexpr *ox0 = mc_kb_let(kb, mc_k_muli(kb, mc_k_addi(kb, mc_k_muli(kb, vs, tv), from), d.lanes));
			dwv_sums(&d, wpair, mc_kb_let(kb, mc_k_add(kb, rowb, ox0)), (int)tv, acc, bias);
			for (int u = 0; u < tv; u++) {
				mc_kexpr *q = dwv_requant(&d, &rq, acc[u]);
				mc_kexpr *oxu = mc_kb_let(kb, mc_k_addi(kb, ox0, u * d.lanes));
				if (ragged) {
					mc_kb_if(kb, mc_k_bin(kb, MC_KB_LE, mc_k_addi(kb, oxu, d.lanes), idx(kb, ow)));
					dwv_store_row(&d, n, ch, oy, oxu, q, false);
					mc_kb_else(kb);
					dwv_store_row(&d, n, ch, oy, oxu, q, true);
					mc_kb_end(kb);
				} else {
					dwv_store_row(&d, n, ch, oy, oxu, q, false);
				}
			}
			mc_kb_end(kb);
		}
		mc_kb_end(kb);
	}
	mc_kb_end_n(kb, depth);
	return 0;
}

/* ---- matrix products (mc_kern_qmatvec) ----
 * QiMatMul of A [R, K] by a constant B [K, N] with the lanes along N (the
 * output's rows are contiguous): each row of A is first paired into
 * scratch, (a[2k], a[2k+1]) a word; B is packed at generation time one
 * pair of rows to a word, [KP][N'] (N' the columns rounded up to whole
 * vectors, zeros past N), and so are the folded bias and the per-column
 * requantisation constants (mc_rq_pad); tn vectors of columns accumulate
 * DOT2s of the row's splat pairs. */

#define MV_TN_MAX 8

typedef struct {
	mc_lower_ctx *c;
	int64_t r, k, n, kp, np;  /* rows, reduction, columns, k pairs, padded columns */
	int lanes, tn;
	int wb, bb, sb;
	mc_rq_pack rq;
} qmv;

static mc_tensor *mv_pack_weight(const qmv *d)
{
	const mc_tensor *w = mc_lower_const(d->c, QI_W);
	mc_shape s = {1, {d->kp * d->np}};
	mc_tensor *p = mc_tensor_new(MC_INT32, &s);
	MC_ASSERT(p);
	for (int64_t kp = 0; kp < d->kp; kp++)
		for (int64_t n = 0; n < d->np; n++) {
			int64_t k = 2 * kp;
			uint32_t lo = n < d->n ? (uint32_t)mc_get_i(w, (size_t)(k * d->n + n)) & 0xffffu : 0;
			uint32_t hi = n < d->n && k + 1 < d->k ? (uint32_t)mc_get_i(w, (size_t)((k + 1) * d->n + n)) & 0xffffu : 0;
			mc_set_i(p, (size_t)(kp * d->np + n), (int32_t)(lo | hi << 16));
		}
	return p;
}

static mc_tensor *mv_pack_bias(const qmv *d, int64_t x_zp)
{
	mc_tensor *b = mc_kq_folded_bias(d->c, d->n, true, x_zp);
	mc_shape s = {1, {d->np}};
	mc_tensor *p = mc_tensor_new(MC_INT32, &s);
	MC_ASSERT(b && p);
	for (int64_t n = 0; n < d->n; n++)
		mc_set_i(p, (size_t)n, mc_get_i(b, (size_t)n));
	mc_tensor_free(b);
	return p;
}

/* tn vectors of columns from n0 for row r */
static void mv_tile(const qmv *d, mc_kexpr *r, mc_kexpr *n0, int tn)
{
	mc_lower_ctx *c = d->c;
	mc_kb *kb = c->kb;
	int l = d->lanes;
	mc_kexpr *acc[MV_TN_MAX];
	for (int v = 0; v < tn; v++)
		acc[v] = mc_kb_local(kb, mc_k_vload(kb, d->bb, mc_k_addi(kb, n0, v * l), l));
	mc_kexpr *kp = mc_kb_fori(kb, d->kp, MC_KF_REDUCE);
	mc_kexpr *x = mc_kb_let(kb, mc_k_splat(kb, mc_k_load(kb, d->sb, kp), l));
	mc_kexpr *wrow = mc_kb_let(kb, mc_k_add(kb, mc_k_muli(kb, kp, d->np), n0));
	for (int v = 0; v < tn; v++)
		mc_kb_assign(kb, acc[v], mc_k_dot2(kb, x, mc_k_vload(kb, d->wb, mc_k_addi(kb, wrow, v * l), l), acc[v]));
	mc_kb_end(kb);
	for (int v = 0; v < tn; v++) {
		mc_kexpr *nv = mc_kb_let(kb, mc_k_addi(kb, n0, v * l));
		mc_rq_chan rq = mc_rq_channel_vec(c, &d->rq, nv, l);
		mc_kexpr *q = mc_kb_let(kb, mc_rq_apply(c, &d->rq, &rq, acc[v]));
		mc_kexpr *lin = mc_kb_let(kb, mc_k_add(kb, mc_k_muli(kb, r, d->n), nv));
		mc_kexpr *co[2] = { r, nv };
		/* whole where the vector lies inside the row, else lane by lane */
		mc_kb_if(kb, mc_k_bin(kb, MC_KB_LE, mc_k_addi(kb, nv, l), idx(kb, d->n)));
		mc_lower_store_vec(c, 0, co, lin, q);
		mc_kb_else(kb);
		store_lanes(c, co, 2, lin, q, l, d->n);
		mc_kb_end(kb);
	}
}

int mc_kern_qmatvec(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	if (!vec_fits(c, MC_OP_QiMatMul))
		return 1;
	const mc_shape *as = &c->in[QI_X]->shape, *bs = &c->in[QI_W]->shape;
	if (as->rank != 2 || bs->rank != 2)
		return 1;
	const qi_params *qp = c->node->params;
	qmv d = { .c = c, .r = as->dims[0], .k = as->dims[1], .n = bs->dims[1] };
	d.lanes = mc_isa_lanes_upto(kb->isa, d.n);
	if (d.lanes < 4)
		return 1;
	mc_rq_prepare(c, &d.rq);
	if (!d.rq.split)
		return 1;
	d.kp = (d.k + 1) / 2;
	d.np = (d.n + d.lanes - 1) / d.lanes * d.lanes;
	int64_t nvec = d.np / d.lanes;
	d.tn = kb->isa->vregs >= 32 ? MV_TN_MAX : 4;
	if (d.tn > nvec)
		d.tn = (int)nvec;
	mc_rq_pad(c, &d.rq, d.np);
	d.wb = mc_kb_packed(kb, mv_pack_weight(&d));
	d.bb = mc_kb_packed(kb, mv_pack_bias(&d, qp->x_zp));
	d.sb = mc_kb_scratch(kb, MC_INT32, (size_t)d.kp);
	mc_kexpr *r = mc_kb_fori(kb, d.r, 0);
	/* the row's pairs (its zero point is in the bias) */
	mc_kexpr *row = mc_kb_let(kb, mc_k_muli(kb, r, d.k));
	mc_kexpr *kp = mc_kb_fori(kb, d.k / 2, 0);
	mc_kexpr *k0 = mc_kb_let(kb, mc_k_add(kb, row, mc_k_muli(kb, kp, 2)));
	mc_kb_store(kb, d.sb, kp, pair(kb, mc_k_cast(kb, MC_KT_I32, mc_lower_load(c, QI_X, k0)),
	                               mc_k_cast(kb, MC_KT_I32, mc_lower_load(c, QI_X, mc_k_addi(kb, k0, 1)))));
	mc_kb_end(kb);
	if (d.k % 2)
		mc_kb_store(kb, d.sb, idx(kb, d.kp - 1),
		            pair(kb, mc_k_cast(kb, MC_KT_I32, mc_lower_load(c, QI_X, mc_k_addi(kb, row, d.k - 1))),
		                 i32c(kb, 0)));
	int64_t full = nvec / d.tn, rest = nvec % d.tn;
	if (full > 0) {
		mc_kexpr *nb = mc_kb_fori(kb, full, 0);
		mv_tile(&d, r, mc_kb_let(kb, mc_k_muli(kb, nb, d.tn * d.lanes)), d.tn);
		mc_kb_end(kb);
	}
	if (rest > 0)
		mv_tile(&d, r, idx(kb, full * d.tn * d.lanes), (int)rest);
	mc_kb_end(kb);
	return 0;
}
