/* Fast integer kernels (lower.h), for CPU targets: mc_kern_qconv_pointwise
 * for a QiConv with a 1x1 window (pointwise convolutions, most of a
 * MobileNet's or a DS-CNN's multiply-accumulates), mc_kern_qmatmul for a
 * QiMatMul by a constant (the same tiles), and mc_kern_qconv_window for
 * any other window of a dense (group 1) QiConv.
 *
 * The pointwise kernel: Channels-first x [N, C, P] times w [M, C]:
 *
 * - the weight is packed at generation time as [M/TM][C][TM], so that one
 *   step of the reduction reads TM consecutive bytes;
 * - x's zero point is folded into the bias (bias - x_zp * sum_c w[m][c]):
 *   a 1x1 window has no padding, so every tap reads x and the product
 *   sum (x - x_zp) w equals sum x w - x_zp sum w exactly;
 * - TM output channels x TP pixels are summed in registers: each loaded x
 *   serves TM products and each loaded w TP products;
 * - the requantisation (mc_rq_emit) follows the tile's sums.
 *
 * Bit-identical to the plain lowering: the same int32 sums in another
 * order (the pass checked they cannot overflow). */
#include "lower.h"
#include "lower_window.h"
#include "../libcore/ops/qint.h"
#include "../libcore/ops/quant.h"

#define TM 4
#define TP 2

/* Whether the pointwise tiles fit: a 1x1 window at stride 1 without
 * padding, channels the tile divides, constant weights without a zero
 * point. */
/* What both convolution kernels need: a dense convolution, output
 * channels the tile divides, constant weights without a zero point and a
 * constant bias or none. */
static bool tiles_fit(const mc_lower_ctx *c, const conv_geom *g)
{
	return g->group == 1 && g->out_ch % TM == 0 && !(c->n_in > QI_W_ZP && c->in[QI_W_ZP]) &&
	       mc_lower_const(c, QI_W) && (!c->in[QI_B] || mc_lower_const(c, QI_B));
}

static bool pointwise_fits(const mc_lower_ctx *c, const conv_geom *g)
{
	for (int d = 0; d < g->nsp; d++)
		if (g->kern[d] != 1 || g->stride[d] != 1 || g->pad[d] != 0 || g->out[d] != g->in[d])
			return false;
	return tiles_fit(c, g);
}

/* The bias (0 without one) as int32 less x_zp times each output channel's
 * weight sum, the weight [M, K] or, transposed, [K, M]: for kernels that
 * multiply x itself (and read x_zp in any padding). Inside int32: the
 * quantize pass kept K * 255 * 255 + |bias| below 2^31. */
mc_tensor *mc_kq_folded_bias(const mc_lower_ctx *c, int64_t m, bool transposed, int64_t x_zp)
{
	const mc_tensor *w = mc_lower_const(c, QI_W), *b = c->in[QI_B] ? mc_lower_const(c, QI_B) : NULL;
	int64_t k = (int64_t)w->numel / m;
	mc_shape bs = {1, {m}};
	mc_tensor *t = mc_tensor_new(MC_INT32, &bs);
	MC_ASSERT(t);
	for (int64_t o = 0; o < m; o++) {
		int64_t sum = 0;
		for (int64_t i = 0; i < k; i++)
			sum += mc_get_i(w, (size_t)(transposed ? i * m + o : o * k + i));
		mc_set_i(t, (size_t)o, (b ? mc_get_i(b, (size_t)o) : 0) - x_zp * sum);
	}
	return t;
}

/* w [M, C] (or, transposed, [C, M]) as [M/TM][C][TM], and the bias with
 * x's zero point folded in. */
static void pack(const mc_lower_ctx *c, int64_t m, int64_t ch, bool transposed, int64_t x_zp,
                 mc_tensor **wp, mc_tensor **bp)
{
	const mc_tensor *w = mc_lower_const(c, QI_W);
	mc_shape ws = {1, {m * ch}};
	*wp = mc_tensor_new(w->dtype, &ws);
	MC_ASSERT(*wp);
	for (int64_t o = 0; o < m; o++)
		for (int64_t k = 0; k < ch; k++)
			mc_set_i(*wp, (size_t)(((o / TM) * ch + k) * TM + o % TM),
			         mc_get_i(w, (size_t)(transposed ? k * m + o : o * ch + k)));
	*bp = mc_kq_folded_bias(c, m, transposed, x_zp);
}

/* A bound on |acc|: the quantize pass's, K * 255 * 255 + max |bias| (K the
 * reduction length of QiConv or QiMatMul); -1 where it is not known. */
static int64_t acc_bound(const mc_lower_ctx *c)
{
	const mc_shape *ws = &c->in[QI_W]->shape;
	int64_t k = 0;
	if (c->node->id == MC_OP_QiConv && ws->rank >= 2) {
		k = 1;
		for (int d = 1; d < ws->rank; d++)
			k *= ws->dims[d];
	} else if (c->node->id == MC_OP_QiMatMul && ws->rank >= 2) {
		k = ws->dims[ws->rank - 2];
	}
	const mc_tensor *b = c->in[QI_B] ? mc_lower_const(c, QI_B) : NULL;
	if (k <= 0 || (c->in[QI_B] && !b))
		return -1;
	return mc_qi_sum_bound(k, mc_qi_abs_max(b));
}

/* The requantisation of the tiles' sums. Where every channel's shift is 31
 * or more (factors below 1: the usual case), mc_qi_rshift's 64-bit shifts
 * split into the product's high word and a 32-bit shift by s - 32 packed
 * per channel (the kernel IR's RQ32): the same result (arithmetic shifts
 * compose) in a third of the instructions on a 32-bit core. A shift of 31 (a factor in [1/2, 1)) doubles every product first
 * and shifts one more (rounding 2v at s + 1 is rounding v at s), where
 * |acc|'s bound keeps 2v + 2^s inside int64. Where some shift is below 31
 * (factors near or above 1) but |acc|'s bound leaves room, each sum is
 * first multiplied by 2^(32 - s) (1 where s is 32 or more: `scaled`), so
 * that every shift becomes 32 or more: the same value rounded at the same
 * place. Elsewhere mc_lower_requant. */
/* One int32 table of the split requantisation, per channel for `count`
 * channels (those past the tensors' padded: multiplier 0, shift 0,
 * factor 1): what 0 the multiplier, 1 the shift s' - 32 (0 where below),
 * 2 the sums' factor 2^(32 - s') (1 where s' is 32 or more). A per-tensor
 * multiplier or shift serves every channel. */
static mc_tensor *rq_table(const mc_lower_ctx *c, const mc_rq_pack *r, int64_t count, int what)
{
	const mc_tensor *sh = mc_lower_const(c, QI_SHIFT), *mu = mc_lower_const(c, QI_MULT);
	mc_shape s1 = {1, {count}};
	mc_tensor *t = mc_tensor_new(MC_INT32, &s1);
	MC_ASSERT(t);
	for (int64_t i = 0; i < count; i++) {
		bool pad = i >= (int64_t)sh->numel && sh->numel != 1;
		int64_t si = mc_get_i(sh, sh->numel == 1 ? 0 : (size_t)(pad ? 0 : i)) + r->pre;
		int64_t v = what == 0 ? mc_get_i(mu, mu->numel == 1 ? 0 : (size_t)(i < (int64_t)mu->numel ? i : 0))
		          : what == 1 ? (si >= 32 ? si - 32 : 0)
		                      : (si >= 32 ? 1 : (int64_t)1 << (32 - si));
		if (pad || (what == 0 && mu->numel != 1 && i >= (int64_t)mu->numel))
			v = what == 2 || (what == 1 && r->half_up) ? 1 : 0; /* the half-up form needs a shift */
		mc_set_i(t, (size_t)i, v);
	}
	return t;
}

/* Whether every channel's v = acc * mult (split, not doubled or scaled)
 * misses the ties of rounding at its shift s, with s 33 or more. A tie is
 * v = 2^(s-1) modulo 2^s: v's lowest set bit at s - 1, which takes acc's
 * at s - 1 - tz(mult), so |acc| >= 2^(s - 1 - tz(mult)): |acc|'s bound
 * below that rules ties out (v = 0 is no tie). Then RQ32 may round half
 * up (MC_RQ32_HALF_UP: three instructions instead of about eight on a
 * Cortex-M). */
static bool ties_impossible(const mc_lower_ctx *c)
{
	const mc_tensor *sh = mc_lower_const(c, QI_SHIFT), *mu = mc_lower_const(c, QI_MULT);
	int64_t ab = acc_bound(c);
	if (!sh || !mu || ab < 0 || (sh->numel > 1 && mu->numel > 1 && sh->numel != mu->numel))
		return false;
	for (size_t i = 0; i < sh->numel || i < mu->numel; i++) {
		int64_t s = mc_get_i(sh, sh->numel == 1 ? 0 : i), m = mc_get_i(mu, mu->numel == 1 ? 0 : i);
		if (s < 33 || s > 62)
			return false;
		if (m == 0)
			continue;
		int tz = 0;
		while (!(m & ((int64_t)1 << tz)))
			tz++;
		if (s - 1 - tz < 0 || ab >= ((int64_t)1 << (s - 1 - tz)))
			return false;
	}
	return true;
}

void mc_rq_prepare(mc_lower_ctx *c, mc_rq_pack *r)
{
	const mc_tensor *sh = mc_lower_const(c, QI_SHIFT), *mu = mc_lower_const(c, QI_MULT);
	r->split = sh != NULL;
	r->pre = 0;
	r->half_up = false;
	int64_t smax = 0, mmax = 0;
	for (size_t i = 0; sh && i < sh->numel; i++) {
		r->split = r->split && mc_get_i(sh, i) >= 31;
		if (mc_get_i(sh, i) == 31)
			r->pre = 1;
		smax = mc_get_i(sh, i) > smax ? mc_get_i(sh, i) : smax;
	}
	for (size_t i = 0; mu && i < mu->numel; i++)
		mmax = mc_get_i(mu, i) > mmax ? mc_get_i(mu, i) : mmax;
	if (r->split && r->pre) {
		/* 2v + 2^(s'-1) must stay below 2^63 (no wrap in the 64-bit sum) */
		int64_t ab = acc_bound(c);
		r->split = ab >= 0 && mu && ab < ((int64_t)1 << 31) && smax <= 62 &&
		           (uint64_t)ab * (uint64_t)mmax * 2u + ((uint64_t)1 << smax) < ((uint64_t)1 << 63);
	}
	r->scaled = false;
	if (!r->split && sh && mu) {
		int64_t smin = 63;
		for (size_t i = 0; i < sh->numel; i++)
			smin = mc_get_i(sh, i) < smin ? mc_get_i(sh, i) : smin;
		/* |acc| 2^(32 - smin) below 2^31: then |acc * mult| stays below
		 * 2^62 and the rounding constant below 2^62 */
		int64_t ab = acc_bound(c);
		r->scaled = r->split = smin >= 1 && smax <= 63 && 32 - smin <= 30 && ab >= 0 &&
		                       ab < ((int64_t)1 << (31 - (32 - smin)));
		r->pre = 0;
	}
	if (!r->split)
		return;
	r->half_up = !r->pre && !r->scaled && ties_impossible(c);
	/* one shift for every channel (a per-tensor scale, fully connected
	 * layers mostly): a constant, no table */
	mc_tensor *low = rq_table(c, r, (int64_t)sh->numel, 1);
	r->low_all = mc_get_i(low, 0);
	for (size_t i = 1; i < low->numel && r->low_all >= 0; i++)
		if (mc_get_i(low, i) != r->low_all)
			r->low_all = -1;
	if (r->low_all >= 0) {
		mc_tensor_free(low);
		r->low = -1;
	} else {
		r->low = mc_kb_packed(c->kb, low);
	}
	r->lmul = r->scaled ? mc_kb_packed(c->kb, rq_table(c, r, (int64_t)sh->numel, 2)) : -1;
	r->multv = r->lowv = r->lmulv = -1;
}

void mc_rq_pad(mc_lower_ctx *c, mc_rq_pack *r, int64_t count)
{
	r->multv = mc_kb_packed(c->kb, rq_table(c, r, count, 0));
	r->lowv = mc_kb_packed(c->kb, rq_table(c, r, count, 1));
	r->lmulv = r->scaled ? mc_kb_packed(c->kb, rq_table(c, r, count, 2)) : -1;
}

mc_rq_chan mc_rq_channel_vec(mc_lower_ctx *c, const mc_rq_pack *r, mc_kexpr *oc0, int lanes)
{
	mc_kb *kb = c->kb;
	mc_rq_chan ch = { .mult = mc_kb_let(kb, mc_k_vload(kb, r->multv, oc0, lanes)),
	                  .shift = mc_kb_let(kb, mc_k_vload(kb, r->lowv, oc0, lanes)) };
	if (r->scaled)
		ch.scale = mc_kb_let(kb, mc_k_vload(kb, r->lmulv, oc0, lanes));
	return ch;
}

/* Channel oc's requantisation constants, loaded once (bound to locals) so
 * that a kernel may apply them to many sums. */
mc_rq_chan mc_rq_channel(mc_lower_ctx *c, const mc_rq_pack *r, mc_kexpr *oc)
{
	mc_kb *kb = c->kb;
	mc_rq_chan ch = { .mult = mc_kb_let(kb, mc_k_cast(kb, MC_KT_I32, mc_lower_load(c, QI_MULT, oc))) };
	if (!r->split) {
		ch.shift = mc_kb_let(kb, mc_k_cast(kb, MC_KT_I32, mc_lower_load(c, QI_SHIFT, oc)));
		return ch;
	}
	ch.shift = r->low < 0 ? mc_k_int(kb, MC_KT_I32, r->low_all) /* s' - 32, in [0, 31] */
	                      : mc_kb_let(kb, mc_k_load(kb, r->low, oc));
	if (r->scaled)
		ch.scale = mc_kb_let(kb, mc_k_load(kb, r->lmul, oc));
	return ch;
}

/* clamp(y_zp + rshift(acc * mult, shift)) as i32, with one channel's
 * constants; acc may be an i32 vector where r->split (the channel's
 * constants shared by its lanes). */
mc_kexpr *mc_rq_apply(mc_lower_ctx *c, const mc_rq_pack *r, const mc_rq_chan *ch, mc_kexpr *acc)
{
	mc_kb *kb = c->kb;
	const qi_params *qp = c->node->params;
	if (!r->split)
		return mc_lower_requant(kb, acc, ch->mult, ch->shift, qp->y_zp, qp->lo, qp->hi);
	if (r->scaled)
		acc = mc_k_mul(kb, acc, ch->scale);
	int form = r->half_up ? MC_RQ32_HALF_UP : r->pre ? MC_RQ32_TWICE : 0;
	mc_kexpr *q = mc_k_rq32(kb, acc, ch->mult, ch->shift, form);
	q = mc_k_add(kb, q, mc_k_int(kb, MC_KT_I32, qp->y_zp));
	q = mc_k_bin(kb, MC_KB_MAX, q, mc_k_int(kb, MC_KT_I32, qp->lo));
	return mc_k_bin(kb, MC_KB_MIN, q, mc_k_int(kb, MC_KT_I32, qp->hi));
}

mc_kexpr *mc_rq_emit(mc_lower_ctx *c, const mc_rq_pack *r, mc_kexpr *acc, mc_kexpr *oc)
{
	mc_rq_chan ch = mc_rq_channel(c, r, oc);
	return mc_rq_apply(c, r, &ch, acc);
}

/* Output coords of channel oc and pixel p (a linear index over the
 * spatial dims) for the store's epilogue. */
static void out_coords(mc_kb *kb, const mc_shape *os, mc_kexpr *n, mc_kexpr *oc, mc_kexpr *p,
                       mc_kexpr **co)
{
	co[0] = n;
	co[1] = oc;
	mc_shape spatial = {os->rank - 2, {0}};
	for (int d = 2; d < os->rank; d++)
		spatial.dims[d - 2] = os->dims[d];
	mc_lower_coords(kb, &spatial, p, co + 2);
}

/* The packed kernel's buffers and shape: out[oc][p] = sum over k of
 * w[oc][k] x[k][p], at strides (a pointwise convolution: x [C, P], out
 * [M, P]; a matrix product: x is A [R, K] and out [R, N]). */
typedef struct {
	mc_lower_ctx *c;
	int x_in;                 /* the input x is */
	int wb, bb;               /* packed weight and bias */
	int64_t ch, m, pix;       /* K, output channels (columns), pixels (rows) */
	int64_t xk, xp, oc_st, op_st; /* strides of x's k and p, out's oc and p */
	bool rows;                /* out is [p][oc] (matrix product) */
	mc_rq_pack rq;
	mc_kexpr *n, *mt;         /* batch, channel tile */
} qtile;

/* One tile: TM channels from mt * TM, tp pixels from p0: sums over the
 * channels in registers, then each requantised and stored. */
static void emit_tile(const qtile *t, mc_kexpr *p0, int tp)
{
	mc_lower_ctx *c = t->c;
	mc_kb *kb = c->kb;
	mc_kexpr *acc[TM][TP];
	for (int i = 0; i < TM; i++) {
		mc_kexpr *oc = mc_k_addi(kb, mc_k_muli(kb, t->mt, TM), i);
		mc_kexpr *bias = mc_kb_let(kb, mc_k_load(kb, t->bb, oc));
		for (int j = 0; j < tp; j++)
			acc[i][j] = mc_kb_local(kb, bias);
	}
	mc_kexpr *k = mc_kb_fori(kb, t->ch, MC_KF_REDUCE);
	mc_kexpr *xrow = mc_kb_let(kb, mc_k_add(kb, mc_k_muli(kb, t->n, t->ch * t->pix),
	                                        mc_k_add(kb, mc_k_muli(kb, k, t->xk),
	                                                 mc_k_muli(kb, p0, t->xp))));
	mc_kexpr *wrow = mc_kb_let(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, t->mt, t->ch), k), TM));
	mc_kexpr *xv[TP];
	for (int j = 0; j < tp; j++)
		xv[j] = mc_kb_let(kb, mc_k_cast(kb, MC_KT_I32, mc_lower_load(c, t->x_in,
		                                                           mc_k_addi(kb, xrow, j * t->xp))));
	for (int i = 0; i < TM; i++) {
		mc_kexpr *wv = mc_kb_let(kb, mc_k_cast(kb, MC_KT_I32, mc_k_load(kb, t->wb,
		                                                                  mc_k_addi(kb, wrow, i))));
		for (int j = 0; j < tp; j++)
			mc_kb_assign(kb, acc[i][j], mc_k_add(kb, acc[i][j], mc_k_mul(kb, wv, xv[j])));
	}
	mc_kb_end(kb);
	for (int i = 0; i < TM; i++) {
		mc_kexpr *oc = mc_kb_let(kb, mc_k_addi(kb, mc_k_muli(kb, t->mt, TM), i));
		for (int j = 0; j < tp; j++) {
			mc_kexpr *p = mc_kb_let(kb, mc_k_addi(kb, p0, j));
			mc_kexpr *co[MC_MAX_RANK];
			if (t->rows) {
				co[0] = p;
				co[1] = oc;
			} else {
				out_coords(kb, &c->out[0]->shape, t->n, oc, p, co);
			}
			mc_kexpr *lin = mc_k_add(kb, mc_k_muli(kb, t->n, t->m * t->pix),
			                         mc_k_add(kb, mc_k_muli(kb, oc, t->oc_st),
			                                  mc_k_muli(kb, p, t->op_st)));
			mc_lower_store(c, 0, co, lin, mc_rq_emit(c, &t->rq, acc[i][j], oc));
		}
	}
}

/* Full tiles of TP pixels, then the rest one tile narrower, inside the
 * channel-tile loop the caller opened. */
static void emit_tiles(const qtile *t)
{
	mc_kb *kb = t->c->kb;
	if (t->pix / TP) {
		mc_kexpr *pt = mc_kb_fori(kb, t->pix / TP, MC_KF_PARALLEL);
		emit_tile(t, mc_kb_let(kb, mc_k_muli(kb, pt, TP)), TP);
		mc_kb_end(kb);
	}
	if (t->pix % TP)
		emit_tile(t, mc_k_index(kb, t->pix / TP * TP), (int)(t->pix % TP));
}

/* A QiConv these tiles take: 0 with its geometry in g, 1 to leave it to
 * the plain lowering, -1 after reporting. */
static int conv_entry(mc_lower_ctx *c, conv_geom *g,
                      bool (*fits)(const mc_lower_ctx *c, const conv_geom *g))
{
	/* a grid target runs a thread per output: CPU tiles would serialise it */
	if (c->node->id != MC_OP_QiConv || !c->out[0] || c->kb->target->grid)
		return 1;
	if (mc_conv_geom_get(c->node, &c->in[QI_X]->shape, &c->in[QI_W]->shape, g))
		return -1;
	return fits(c, g) ? 0 : 1;
}

int mc_kern_qconv_pointwise(mc_lower_ctx *c)
{
	conv_geom g;
	int rc = conv_entry(c, &g, pointwise_fits);
	if (rc)
		return rc;
	const qi_params *qp = c->node->params;
	mc_kb *kb = c->kb;
	qtile t = { .c = c, .x_in = QI_X, .ch = g.in_ch, .m = g.out_ch, .pix = 1 };
	for (int d = 0; d < g.nsp; d++)
		t.pix *= g.in[d];
	t.xk = t.pix;
	t.xp = 1;
	t.oc_st = t.pix;
	t.op_st = 1;
	mc_tensor *wt, *bt;
	pack(c, g.out_ch, g.in_ch, false, qp->x_zp, &wt, &bt);
	t.wb = mc_kb_packed(kb, wt);
	t.bb = mc_kb_packed(kb, bt);
	mc_rq_prepare(c, &t.rq);
	int depth = 0;
	t.n = mc_k_index(kb, 0);
	if (g.batch > 1) {
		t.n = mc_kb_fori(kb, g.batch, MC_KF_PARALLEL);
		depth++;
	}
	t.mt = mc_kb_fori(kb, t.m / TM, MC_KF_PARALLEL);
	depth++;
	emit_tiles(&t);
	mc_kb_end_n(kb, depth);
	return 0;
}

/* QiMatMul of A [R, K] (R rows, a 2-D output) by a constant B [K, N]
 * (2-D, N a multiple of TM): the pointwise kernel's tiles with A's zero
 * point folded into the bias (no padding in a product). */
int mc_kern_qmatmul(mc_lower_ctx *c)
{
	if (c->node->id != MC_OP_QiMatMul || !c->out[0] || c->kb->target->grid)
		return 1;
	const qi_params *qp = c->node->params;
	const mc_shape *as = &c->in[QI_X]->shape, *bs = &c->in[QI_W]->shape;
	if (as->rank != 2 || bs->rank != 2 || bs->dims[1] % TM || !mc_lower_const(c, QI_W) ||
	    (c->in[QI_B] && !mc_lower_const(c, QI_B)) || (c->n_in > QI_W_ZP && c->in[QI_W_ZP]))
		return 1;
	mc_kb *kb = c->kb;
	qtile t = { .c = c, .x_in = QI_X, .ch = as->dims[1], .m = bs->dims[1], .pix = as->dims[0],
	            .xk = 1, .xp = as->dims[1], .oc_st = 1, .op_st = bs->dims[1], .rows = true };
	mc_tensor *wt, *bt;
	pack(c, t.m, t.ch, true, qp->x_zp, &wt, &bt);
	t.wb = mc_kb_packed(kb, wt);
	t.bb = mc_kb_packed(kb, bt);
	mc_rq_prepare(c, &t.rq);
	t.n = mc_k_index(kb, 0);
	t.mt = mc_kb_fori(kb, t.m / TM, MC_KF_PARALLEL);
	emit_tiles(&t);
	mc_kb_end(kb);
	return 0;
}

/* ---- any window, group 1 (mc_kern_qconv_window) ----
 * TM output channels of one output pixel summed in registers: each loaded
 * x serves TM products. The weight is packed as [M/TM][C][taps][TM]; the
 * window's taps outside the input are skipped as in the plain lowering
 * (so x's zero point stays in the loop: folding it would count them). */

static bool window_fits(const mc_lower_ctx *c, const conv_geom *g)
{
	return g->nsp <= 3 && tiles_fit(c, g);
}

int mc_kern_qconv_window(mc_lower_ctx *c)
{
	conv_geom g;
	int rc = conv_entry(c, &g, window_fits);
	if (rc)
		return rc;
	const qi_params *qp = c->node->params;
	mc_kb *kb = c->kb;
	int64_t ch = g.in_ch, m = g.out_ch, ksize = 1, in_plane = 1;
	for (int d = 0; d < g.nsp; d++) {
		ksize *= g.kern[d];
		in_plane *= g.in[d];
	}
	/* [M/TM][C * taps][TM]; the bias as it is (x's zero point stays) */
	mc_tensor *wt, *bt;
	pack(c, m, ch * ksize, false, 0, &wt, &bt);
	int wb = mc_kb_packed(kb, wt), bb = mc_kb_packed(kb, bt);
	mc_rq_pack rq;
	mc_rq_prepare(c, &rq);
	int depth = 0;
	mc_kexpr *n = g.batch > 1 ? range(kb, idx(kb, 0), idx(kb, g.batch), MC_KF_PARALLEL, &depth)
	                          : idx(kb, 0);
	mc_kexpr *mt = range(kb, idx(kb, 0), idx(kb, m / TM), MC_KF_PARALLEL, &depth);
	mc_kexpr *co[MC_MAX_RANK];
	taps t[3];
	dim_geom dg[3];
	for (int d = 0; d < g.nsp; d++) {
		dg[d] = (dim_geom){ g.in[d], g.out[d], g.kern[d], g.stride[d], g.dil[d], g.pad[d] };
		co[2 + d] = range(kb, idx(kb, 0), idx(kb, g.out[d]), MC_KF_PARALLEL, &depth);
		fwd_taps(kb, &dg[d], co[2 + d], &t[d]);
	}
	mc_kexpr *acc[TM];
	for (int i = 0; i < TM; i++)
		acc[i] = mc_kb_local(kb, mc_k_load(kb, bb, mc_k_addi(kb, mc_k_muli(kb, mt, TM), i)));
	int inner = 0;
	mc_kexpr *ic = range(kb, idx(kb, 0), idx(kb, ch), MC_KF_REDUCE, &inner);
	mc_kexpr *xbase = mc_kb_let(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, n, ch), ic), in_plane));
	mc_kexpr *wbase = mc_kb_let(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, mt, ch), ic), ksize));
	mc_kexpr *xi = idx(kb, 0), *ki = idx(kb, 0);
	for (int d = 0; d < g.nsp; d++) {
		mc_kexpr *tap = range(kb, t[d].lo, t[d].hi, MC_KF_REDUCE, &inner);
		mc_kexpr *pos = mc_k_add(kb, t[d].start, mc_k_muli(kb, tap, dg[d].d));
		xi = mc_k_add(kb, mc_k_muli(kb, xi, g.in[d]), pos);
		ki = mc_k_add(kb, mc_k_muli(kb, ki, g.kern[d]), tap);
	}
	mc_kexpr *xv = mc_kb_let(kb, mc_k_sub(kb, mc_k_cast(kb, MC_KT_I32, mc_lower_load(c, QI_X,
	                                                       mc_k_add(kb, xbase, xi))),
	                                      mc_k_int(kb, MC_KT_I32, qp->x_zp)));
	mc_kexpr *wrow = mc_kb_let(kb, mc_k_muli(kb, mc_k_add(kb, wbase, ki), TM));
	for (int i = 0; i < TM; i++) {
		mc_kexpr *wv = mc_k_cast(kb, MC_KT_I32, mc_k_load(kb, wb, mc_k_addi(kb, wrow, i)));
		mc_kb_assign(kb, acc[i], mc_k_add(kb, acc[i], mc_k_mul(kb, wv, xv)));
	}
	mc_kb_end_n(kb, inner);
	co[0] = n;
	for (int i = 0; i < TM; i++) {
		co[1] = mc_kb_let(kb, mc_k_addi(kb, mc_k_muli(kb, mt, TM), i));
		mc_lower_store(c, 0, co, NULL, mc_rq_emit(c, &rq, acc[i], co[1]));
	}
	mc_kb_end_n(kb, depth);
	return 0;
}
