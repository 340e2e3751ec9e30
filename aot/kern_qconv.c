/* Fast kernel for QiConv with a 1x1 window (pointwise convolutions, most
 * of a MobileNet's or a DS-CNN's multiply-accumulates; see lower.h:
 * mc_kern_qconv_pointwise). Channels-first x [N, C, P] times w [M, C]:
 *
 * - the weight is packed at generation time as [M/TM][C][TM], so that one
 *   step of the reduction reads TM consecutive bytes;
 * - x's zero point is folded into the bias (bias - x_zp * sum_c w[m][c]):
 *   a 1x1 window has no padding, so every tap reads x and the product
 *   sum (x - x_zp) w equals sum x w - x_zp sum w exactly;
 * - TM output channels x TP pixels are summed in registers: each loaded x
 *   serves TM products and each loaded w TP products;
 * - the requantisation (mc_lower_requant) follows the tile's sums.
 *
 * Bit-identical to the plain lowering: the same int32 sums in another
 * order (the pass checked they cannot overflow). */
#include "lower.h"
#include "../libcore/ops/qint.h"
#include "../libcore/ops/quant.h"

#define TM 4
#define TP 2

/* Whether the plain lowering must do it: no 1x1 window at stride 1, no
 * padding, or a shape the tiles do not divide. */
static bool pointwise_fits(const mc_lower_ctx *c, const conv_geom *g)
{
	if (g->group != 1 || g->out_ch % TM || (c->n_in > QI_W_ZP && c->in[QI_W_ZP]))
		return false;
	for (int d = 0; d < g->nsp; d++)
		if (g->kern[d] != 1 || g->stride[d] != 1 || g->pad[d] != 0 || g->out[d] != g->in[d])
			return false;
	return mc_lower_const(c, QI_W) && (!c->in[QI_B] || mc_lower_const(c, QI_B));
}

/* w [M, C] as [M/TM][C][TM], and the bias with x's zero point folded in. */
static void pack(const mc_lower_ctx *c, const conv_geom *g, int64_t x_zp, mc_tensor **wp,
                 mc_tensor **bp)
{
	const mc_tensor *w = mc_lower_const(c, QI_W), *b = c->in[QI_B] ? mc_lower_const(c, QI_B) : NULL;
	int64_t m = g->out_ch, ch = g->in_ch;
	mc_shape ws = {1, {m * ch}}, bs = {1, {m}};
	*wp = mc_tensor_new(w->dtype, &ws);
	*bp = mc_tensor_new(MC_INT32, &bs);
	MC_ASSERT(*wp && *bp);
	for (int64_t o = 0; o < m; o++) {
		int64_t sum = 0;
		for (int64_t k = 0; k < ch; k++) {
			int64_t v = mc_get_i(w, (size_t)(o * ch + k));
			sum += v;
			mc_set_i(*wp, (size_t)(((o / TM) * ch + k) * TM + o % TM), v);
		}
		/* inside int32: the pass kept K * 255 * 255 + |bias| below 2^31 */
		mc_set_i(*bp, (size_t)o, (b ? mc_get_i(b, (size_t)o) : 0) - x_zp * sum);
	}
}

/* Output coords of channel oc and pixel p (a linear index over the
 * spatial dims) for the store's epilogue. */
static void out_coords(mc_kb *kb, const mc_shape *os, mc_kexpr *n, mc_kexpr *oc, mc_kexpr *p,
                       mc_kexpr **co)
{
	co[0] = n;
	co[1] = oc;
	mc_kexpr *rest = p;
	for (int d = os->rank - 1; d >= 2; d--) {
		if (d == 2) {
			co[d] = rest;
			break;
		}
		co[d] = mc_kb_let(kb, mc_k_bin(kb, MC_KB_REM, rest, mc_k_index(kb, os->dims[d])));
		rest = mc_kb_let(kb, mc_k_div(kb, rest, mc_k_index(kb, os->dims[d])));
	}
}

/* The packed kernel's buffers and shape. */
typedef struct {
	mc_lower_ctx *c;
	int wb, bb;               /* packed weight and bias */
	int64_t ch, m, pix;
	mc_kexpr *n, *mt;         /* batch, channel tile */
} qtile;

/* One tile: TM channels from mt * TM, tp pixels from p0: sums over the
 * channels in registers, then each requantised and stored. */
static void emit_tile(const qtile *t, mc_kexpr *p0, int tp)
{
	mc_lower_ctx *c = t->c;
	mc_kb *kb = c->kb;
	const qi_params *qp = c->node->params;
	mc_kexpr *acc[TM][TP];
	for (int i = 0; i < TM; i++) {
		mc_kexpr *oc = mc_k_addi(kb, mc_k_muli(kb, t->mt, TM), i);
		mc_kexpr *bias = mc_kb_let(kb, mc_k_load(kb, t->bb, oc));
		for (int j = 0; j < tp; j++)
			acc[i][j] = mc_kb_local(kb, bias);
	}
	mc_kexpr *k = mc_kb_fori(kb, t->ch, MC_KF_REDUCE);
	mc_kexpr *xrow = mc_kb_let(kb, mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, t->n, t->ch),
	                                                                  k), t->pix), p0));
	mc_kexpr *wrow = mc_kb_let(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, t->mt, t->ch), k), TM));
	mc_kexpr *xv[TP];
	for (int j = 0; j < tp; j++)
		xv[j] = mc_kb_let(kb, mc_k_cast(kb, MC_KT_I32, mc_lower_load(c, QI_X, mc_k_addi(kb, xrow, j))));
	for (int i = 0; i < TM; i++) {
		mc_kexpr *wv = mc_kb_let(kb, mc_k_cast(kb, MC_KT_I32, mc_k_load(kb, t->wb,
		                                                                  mc_k_addi(kb, wrow, i))));
		for (int j = 0; j < tp; j++)
			mc_kb_assign(kb, acc[i][j], mc_k_add(kb, acc[i][j], mc_k_mul(kb, wv, xv[j])));
	}
	mc_kb_end(kb);
	for (int i = 0; i < TM; i++) {
		mc_kexpr *oc = mc_kb_let(kb, mc_k_addi(kb, mc_k_muli(kb, t->mt, TM), i));
		mc_kexpr *mult = mc_kb_let(kb, mc_k_cast(kb, MC_KT_I32, mc_lower_load(c, QI_MULT, oc)));
		mc_kexpr *shift = mc_kb_let(kb, mc_k_cast(kb, MC_KT_I32, mc_lower_load(c, QI_SHIFT, oc)));
		for (int j = 0; j < tp; j++) {
			mc_kexpr *p = mc_kb_let(kb, mc_k_addi(kb, p0, j));
			mc_kexpr *co[MC_MAX_RANK];
			out_coords(kb, &c->out[0]->shape, t->n, oc, p, co);
			mc_kexpr *lin = mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, t->n, t->m), oc),
			                                       t->pix), p);
			mc_lower_store(c, 0, co, lin, mc_lower_requant(kb, acc[i][j], mult, shift, qp->y_zp,
			                                               qp->lo, qp->hi));
		}
	}
}

int mc_kern_qconv_pointwise(mc_lower_ctx *c)
{
	if (c->node->id != MC_OP_QiConv || !c->out[0])
		return 1;
	const qi_params *qp = c->node->params;
	conv_geom g;
	if (mc_conv_geom_get(c->node, &c->in[QI_X]->shape, &c->in[QI_W]->shape, &g))
		return -1;
	if (!pointwise_fits(c, &g))
		return 1;
	mc_kb *kb = c->kb;
	qtile t = { .c = c, .ch = g.in_ch, .m = g.out_ch, .pix = 1 };
	for (int d = 0; d < g.nsp; d++)
		t.pix *= g.in[d];
	mc_tensor *wt, *bt;
	pack(c, &g, qp->x_zp, &wt, &bt);
	t.wb = mc_kb_packed(kb, wt);
	t.bb = mc_kb_packed(kb, bt);
	int depth = 0;
	t.n = mc_k_index(kb, 0);
	if (g.batch > 1) {
		t.n = mc_kb_fori(kb, g.batch, MC_KF_PARALLEL);
		depth++;
	}
	t.mt = mc_kb_fori(kb, t.m / TM, MC_KF_PARALLEL);
	depth++;
	/* full tiles of TP pixels, then the rest one tile narrower */
	if (t.pix / TP) {
		mc_kexpr *pt = mc_kb_fori(kb, t.pix / TP, MC_KF_PARALLEL);
		emit_tile(&t, mc_kb_let(kb, mc_k_muli(kb, pt, TP)), TP);
		mc_kb_end(kb);
	}
	if (t.pix % TP)
		emit_tile(&t, mc_k_index(kb, t.pix / TP * TP), (int)(t.pix % TP));
	mc_kb_end_n(kb, depth);
	return 0;
}
