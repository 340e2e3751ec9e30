/* Dual 16-bit multiply-accumulate kernels (mc_kern_qdual) for QiConv of
 * group 1 (any window) and QiMatMul by a constant, on the cores of
 * --isa cortex-m (the Arm DSP extension of the Cortex-M4, M7, M33, M55:
 * SMLAD adds two 16x16-bit products to a sum in one instruction).
 *
 * The reduction index k runs tap-major, k = t * cp + c (cp: the channels,
 * rounded up to even where pairs of channels are taken), and is taken two
 * at a time:
 *
 * - for each block of TP output pixels the kernel first writes the
 *   block's columns of the im2col matrix into scratch, one i32 word per
 *   pair of k and pixel: (x[k] - x_zp) in the low half, (x[k+1] - x_zp) in
 *   the high half, 0 outside the input and for padded k (so x's zero
 *   point and the padding cost nothing in the sums);
 * - the weight is packed at generation time four int8 to a word, so that
 *   SXTB16 of a word gives (w[m][k], w[m][k+1]) of one channel and SXTB16
 *   of its rotation by 8 the same pair of the next channel: [M/TM][KP]
 *   [TM/2] words, the int8 weights' own size;
 * - TM channels x TP pixels accumulate in registers with DOT2 (SMLAD),
 *   then each sum is requantised (mc_rq_emit) and stored.
 *
 * Channels are paired where their count is even (one bounds check a
 * pair); an odd count pairs along k itself when the reduction is short
 * (first layers: one, three channels) and is padded by one otherwise.
 *
 * Bit-identical to the plain lowering: the same int32 sums in another order
 * (the quantize pass bounded them), each product exact (|x - x_zp| <= 255,
 * w int8). Without the DSP extension the runtime's portable modelc_smlad
 * computes the same. */
#include "lower.h"
#include "lower_window.h"
#include "../libcore/ops/qint.h"
#include "../libcore/ops/quant.h"

#define TP 2          /* pixels a tile */
#define LINEAR_MAX 64 /* odd channel counts pair along k up to this K */

typedef struct {
	mc_lower_ctx *c;
	bool conv;                /* QiConv (else QiMatMul: x is A [R, K]) */
	conv_geom g;              /* conv */
	int64_t ch, cp, taps;     /* channels, paired channel stride, window taps */
	bool linear;              /* pairs along k = t * ch + c (cp == ch) */
	int64_t kp;               /* k pairs */
	int64_t m, tm, pix;       /* output channels, channels a tile, pixels (rows) */
	int64_t x_zp;
	int wb, bb, sb;           /* packed weight, bias; scratch */
	mc_rq_pack rq;
} qdual;

/* w[m][k] in the kernel's k order; 0 for padded k. */
static int64_t weight_at(const qdual *d, const mc_tensor *w, int64_t m, int64_t k)
{
	if (!d->conv)
		return k < d->ch ? mc_get_i(w, (size_t)(k * d->m + m)) : 0; /* B [K, N] */
	int64_t t = k / d->cp, c = k % d->cp;
	if (t >= d->taps || c >= d->ch)
		return 0;
	return mc_get_i(w, (size_t)((m * d->ch + c) * d->taps + t));
}

/* The weight as [M/TM][KP][TM/2] words: bytes w[m][k], w[m+1][k],
 * w[m][k+1], w[m+1][k+1] from the lowest. */
static mc_tensor *pack_weight(const qdual *d)
{
	const mc_tensor *w = mc_lower_const(d->c, QI_W);
	mc_shape s = {1, {d->m / 2 * d->kp}};
	mc_tensor *p = mc_tensor_new(MC_INT32, &s);
	MC_ASSERT(p);
	for (int64_t mt = 0; mt < d->m / d->tm; mt++)
		for (int64_t kp = 0; kp < d->kp; kp++)
			for (int64_t h = 0; h < d->tm / 2; h++) {
				int64_t m = mt * d->tm + 2 * h, k = 2 * kp;
				int64_t b[4] = { weight_at(d, w, m, k), weight_at(d, w, m + 1, k),
				                 weight_at(d, w, m, k + 1), weight_at(d, w, m + 1, k + 1) };
				uint32_t word = 0;
				for (int i = 0; i < 4; i++)
					word |= (uint32_t)(b[i] & 0xff) << (8 * i);
				mc_set_i(p, (size_t)((mt * d->kp + kp) * (d->tm / 2) + h), (int32_t)word);
			}
	return p;
}

static mc_kexpr *i32c(mc_kb *kb, int64_t v)
{
	return mc_k_int(kb, MC_KT_I32, v);
}

/* lo in the low half-word, hi in the high one */
static mc_kexpr *pair(mc_kb *kb, mc_kexpr *lo, mc_kexpr *hi)
{
	return mc_k_bin(kb, MC_KB_OR, mc_k_bin(kb, MC_KB_AND, lo, i32c(kb, 0xffff)),
	                mc_k_bin(kb, MC_KB_SHL, hi, i32c(kb, 16)));
}

/* x - x_zp at a linear index of x */
static mc_kexpr *x_at(const qdual *d, mc_kexpr *lin)
{
	mc_kb *kb = d->c->kb;
	return mc_k_sub(kb, mc_k_cast(kb, MC_KT_I32, mc_lower_load(d->c, QI_X, lin)), i32c(kb, d->x_zp));
}

/* The input position of tap t (per spatial dim) at output position o, and
 * whether it can fall outside the input for some output position. */
static mc_kexpr *tap_pos(const qdual *d, int dim, mc_kexpr *o, int64_t t, bool *may_leave)
{
	const conv_geom *g = &d->g;
	int64_t off = t * g->dil[dim] - g->pad[dim];
	*may_leave = off < 0 || (g->out[dim] - 1) * g->stride[dim] + off >= g->in[dim];
	return mc_k_addi(d->c->kb, mc_k_muli(d->c->kb, o, g->stride[dim]), off);
}

/* inside: pos in [0, in) for every dim that may leave (NULL: always). */
static mc_kexpr *inside_of(const qdual *d, mc_kexpr *const *pos, const bool *may_leave)
{
	mc_kb *kb = d->c->kb;
	mc_kexpr *in = NULL;
	for (int i = 0; i < d->g.nsp; i++) {
		if (!may_leave[i])
			continue;
		mc_kexpr *ok = mc_k_bin(kb, MC_KB_AND, mc_k_bin(kb, MC_KB_GE, pos[i], idx(kb, 0)),
		                        mc_k_bin(kb, MC_KB_LT, pos[i], idx(kb, d->g.in[i])));
		in = in ? mc_k_bin(kb, MC_KB_AND, in, ok) : ok;
	}
	return in;
}

/* Linear index into x of channel c at input position pos (batch n). */
static mc_kexpr *x_index(const qdual *d, mc_kexpr *n, mc_kexpr *c, mc_kexpr *const *pos)
{
	mc_kb *kb = d->c->kb;
	mc_kexpr *lin = mc_k_add(kb, mc_k_muli(kb, n, d->ch), c);
	for (int i = 0; i < d->g.nsp; i++)
		lin = mc_k_add(kb, mc_k_muli(kb, lin, d->g.in[i]), pos[i]);
	return lin;
}

/* Output position (per spatial dim) of pixel p. */
static void out_pos(const qdual *d, mc_kexpr *p, mc_kexpr **o)
{
	mc_kb *kb = d->c->kb;
	mc_kexpr *rest = p;
	for (int i = d->g.nsp - 1; i > 0; i--) {
		o[i] = mc_kb_let(kb, mc_k_bin(kb, MC_KB_REM, rest, idx(kb, d->g.out[i])));
		rest = mc_kb_let(kb, mc_k_div(kb, rest, idx(kb, d->g.out[i])));
	}
	o[0] = rest;
}

/* The scratch words of pixel p (column j of the block): channel pairs. */
static void build_channel_pairs(const qdual *d, mc_kexpr *n, mc_kexpr *p, int j)
{
	mc_kb *kb = d->c->kb;
	mc_kexpr *o[MC_MAX_RANK], *pos[MC_MAX_RANK];
	out_pos(d, p, o);
	int64_t tap[MC_MAX_RANK] = {0};
	for (int64_t t = 0; t < d->taps; t++) {
		bool leave[MC_MAX_RANK];
		for (int i = 0; i < d->g.nsp; i++)
			pos[i] = mc_kb_let(kb, tap_pos(d, i, o[i], tap[i], &leave[i]));
		mc_kexpr *in = inside_of(d, pos, leave);
		mc_kexpr *base = idx(kb, t * (d->cp / 2) * TP + j);
		if (in)
			mc_kb_if(kb, in);
		mc_kexpr *cpair = mc_kb_fori(kb, d->ch / 2, 0);
		mc_kexpr *c0 = mc_kb_let(kb, mc_k_muli(kb, cpair, 2));
		mc_kexpr *x0 = x_at(d, x_index(d, n, c0, pos));
		mc_kexpr *x1 = x_at(d, x_index(d, n, mc_k_addi(kb, c0, 1), pos));
		mc_kb_store(kb, d->sb, mc_k_add(kb, base, mc_k_muli(kb, cpair, TP)), pair(kb, x0, x1));
		mc_kb_end(kb);
		if (d->ch % 2) /* the channel padded to even: its partner is 0 */
			mc_kb_store(kb, d->sb, mc_k_addi(kb, base, d->ch / 2 * TP),
			            pair(kb, x_at(d, x_index(d, n, idx(kb, d->ch - 1), pos)), i32c(kb, 0)));
		if (in) {
			mc_kb_else(kb);
			mc_kexpr *z = mc_kb_fori(kb, d->cp / 2, 0);
			mc_kb_store(kb, d->sb, mc_k_add(kb, base, mc_k_muli(kb, z, TP)), i32c(kb, 0));
			mc_kb_end_n(kb, 2);
		}
		for (int i = d->g.nsp - 1; i >= 0; i--) { /* next tap, last dim fastest */
			if (++tap[i] < d->g.kern[i])
				break;
			tap[i] = 0;
		}
	}
}

/* The same along k itself (cp == ch), each value checked on its own:
 * unrolled, for short reductions. */
static void build_linear_pairs(const qdual *d, mc_kexpr *n, mc_kexpr *p, int j)
{
	mc_kb *kb = d->c->kb;
	mc_kexpr *o[MC_MAX_RANK];
	out_pos(d, p, o);
	for (int64_t kp = 0; kp < d->kp; kp++) {
		mc_kexpr *half[2];
		for (int h = 0; h < 2; h++) {
			int64_t k = 2 * kp + h, t = k / d->ch, ch = k % d->ch;
			if (t >= d->taps) {
				half[h] = i32c(kb, 0);
				continue;
			}
			mc_kexpr *pos[MC_MAX_RANK];
			bool leave[MC_MAX_RANK];
			int64_t rest = t;
			for (int i = d->g.nsp - 1; i >= 0; i--) {
				pos[i] = mc_kb_let(kb, tap_pos(d, i, o[i], rest % d->g.kern[i], &leave[i]));
				rest /= d->g.kern[i];
			}
			mc_kexpr *in = inside_of(d, pos, leave);
			half[h] = mc_kb_local(kb, i32c(kb, 0));
			if (in)
				mc_kb_if(kb, in);
			mc_kb_assign(kb, half[h], x_at(d, x_index(d, n, idx(kb, ch), pos)));
			if (in)
				mc_kb_end(kb);
		}
		mc_kb_store(kb, d->sb, idx(kb, kp * TP + j), pair(kb, half[0], half[1]));
	}
}

/* A matrix product's row p: pairs along k. */
static void build_row_pairs(const qdual *d, mc_kexpr *p, int j)
{
	mc_kb *kb = d->c->kb;
	mc_kexpr *row = mc_kb_let(kb, mc_k_muli(kb, p, d->ch));
	mc_kexpr *kp = mc_kb_fori(kb, d->ch / 2, 0);
	mc_kexpr *k0 = mc_kb_let(kb, mc_k_add(kb, row, mc_k_muli(kb, kp, 2)));
	mc_kb_store(kb, d->sb, mc_k_addi(kb, mc_k_muli(kb, kp, TP), j),
	            pair(kb, x_at(d, k0), x_at(d, mc_k_addi(kb, k0, 1))));
	mc_kb_end(kb);
	if (d->ch % 2)
		mc_kb_store(kb, d->sb, idx(kb, d->ch / 2 * TP + j),
		            pair(kb, x_at(d, mc_k_addi(kb, row, d->ch - 1)), i32c(kb, 0)));
}

static void build(const qdual *d, mc_kexpr *n, mc_kexpr *p, int j)
{
	if (!d->conv)
		build_row_pairs(d, p, j);
	else if (d->linear)
		build_linear_pairs(d, n, p, j);
	else
		build_channel_pairs(d, n, p, j);
}

/* Stores the requantised sum of channel oc at pixel p. */
static void store(const qdual *d, mc_kexpr *n, mc_kexpr *oc, mc_kexpr *p, mc_kexpr *acc)
{
	mc_lower_ctx *c = d->c;
	mc_kb *kb = c->kb;
	mc_kexpr *co[MC_MAX_RANK], *lin;
	if (d->conv) {
		co[0] = n;
		co[1] = oc;
		out_pos(d, p, co + 2);
		lin = NULL;
	} else {
		co[0] = p;
		co[1] = oc;
		lin = mc_k_add(kb, mc_k_muli(kb, p, d->m), oc);
	}
	mc_lower_store(c, 0, co, lin, mc_rq_emit(c, &d->rq, acc, oc));
}

/* The block of tp pixels from p0: scratch columns, then every channel tile. */
static void block(const qdual *d, mc_kexpr *n, mc_kexpr *p0, int tp)
{
	mc_kb *kb = d->c->kb;
	for (int j = 0; j < tp; j++)
		build(d, n, mc_kb_let(kb, mc_k_addi(kb, p0, j)), j);
	mc_kexpr *mt = mc_kb_fori(kb, d->m / d->tm, 0);
	mc_kexpr *acc[4][TP];
	for (int i = 0; i < d->tm; i++) {
		mc_kexpr *bias = mc_kb_let(kb, mc_k_load(kb, d->bb, mc_k_addi(kb, mc_k_muli(kb, mt, d->tm), i)));
		for (int j = 0; j < tp; j++)
			acc[i][j] = mc_kb_local(kb, bias);
	}
	mc_kexpr *kp = mc_kb_fori(kb, d->kp, MC_KF_REDUCE);
	mc_kexpr *xv[TP];
	for (int j = 0; j < tp; j++)
		xv[j] = mc_kb_let(kb, mc_k_load(kb, d->sb, mc_k_addi(kb, mc_k_muli(kb, kp, TP), j)));
	mc_kexpr *wrow = mc_kb_let(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, mt, d->kp), kp), d->tm / 2));
	for (int h = 0; h < d->tm / 2; h++) {
		mc_kexpr *w = mc_kb_let(kb, mc_k_load(kb, d->wb, mc_k_addi(kb, wrow, h)));
		mc_kexpr *wl = mc_kb_let(kb, mc_k_un(kb, MC_KU_SXTB16, w));
		mc_kexpr *wh = mc_kb_let(kb, mc_k_un(kb, MC_KU_SXTB16_HI, w));
		for (int j = 0; j < tp; j++) {
			mc_kb_assign(kb, acc[2 * h][j], mc_k_dot2(kb, wl, xv[j], acc[2 * h][j]));
			mc_kb_assign(kb, acc[2 * h + 1][j], mc_k_dot2(kb, wh, xv[j], acc[2 * h + 1][j]));
		}
	}
	mc_kb_end(kb);
	for (int i = 0; i < d->tm; i++) {
		mc_kexpr *oc = mc_kb_let(kb, mc_k_addi(kb, mc_k_muli(kb, mt, d->tm), i));
		for (int j = 0; j < tp; j++)
			store(d, n, oc, mc_kb_let(kb, mc_k_addi(kb, p0, j)), acc[i][j]);
	}
	mc_kb_end(kb);
}

/* What both forms need: int8 constant weights without a zero point, a
 * constant bias or none, an even channel count. */
static bool fits(const mc_lower_ctx *c, int64_t m)
{
	const mc_tensor *w = mc_lower_const(c, QI_W);
	return w && w->dtype == MC_INT8 && !(c->n_in > QI_W_ZP && c->in[QI_W_ZP]) &&
	       (!c->in[QI_B] || mc_lower_const(c, QI_B)) && m % 2 == 0;
}

/* The bias as int32 (0 without one). */
static mc_tensor *bias_of(const qdual *d)
{
	const mc_tensor *b = d->c->in[QI_B] ? mc_lower_const(d->c, QI_B) : NULL;
	mc_shape s = {1, {d->m}};
	mc_tensor *t = mc_tensor_new(MC_INT32, &s);
	MC_ASSERT(t);
	for (int64_t i = 0; i < d->m; i++)
		mc_set_i(t, (size_t)i, b ? mc_get_i(b, (size_t)i) : 0);
	return t;
}

int mc_kern_qdual(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	if (kb->isa->kind != MC_ISA_CORTEX_M || !c->out[0] || kb->target->grid)
		return 1;
	const qi_params *qp = c->node->params;
	qdual d = { .c = c, .x_zp = qp->x_zp };
	int64_t batch = 1;
	if (c->node->id == MC_OP_QiConv) {
		if (mc_conv_geom_get(c->node, &c->in[QI_X]->shape, &c->in[QI_W]->shape, &d.g))
			return -1;
		if (d.g.group != 1 || d.g.nsp > 3 || !fits(c, d.g.out_ch))
			return 1;
		d.conv = true;
		d.ch = d.g.in_ch;
		d.m = d.g.out_ch;
		d.taps = d.pix = 1;
		for (int i = 0; i < d.g.nsp; i++) {
			d.taps *= d.g.kern[i];
			d.pix *= d.g.out[i];
		}
		batch = d.g.batch;
		d.linear = d.ch % 2 && d.ch * d.taps <= LINEAR_MAX;
		d.cp = d.ch % 2 && !d.linear ? d.ch + 1 : d.ch;
		d.kp = (d.cp * d.taps + 1) / 2;
	} else if (c->node->id == MC_OP_QiMatMul) {
		const mc_shape *as = &c->in[QI_X]->shape, *bs = &c->in[QI_W]->shape;
		if (as->rank != 2 || bs->rank != 2 || !fits(c, bs->dims[1]))
			return 1;
		d.ch = d.cp = as->dims[1];
		d.m = bs->dims[1];
		d.pix = as->dims[0];
		d.taps = 1;
		d.kp = (d.ch + 1) / 2;
	} else {
		return 1;
	}
	d.tm = d.m % 4 == 0 ? 4 : 2;
	d.wb = mc_kb_packed(kb, pack_weight(&d));
	d.bb = mc_kb_packed(kb, bias_of(&d));
	d.sb = mc_kb_scratch(kb, MC_INT32, (size_t)(d.kp * TP));
	mc_rq_prepare(c, &d.rq);
	mc_kexpr *n = idx(kb, 0);
	if (batch > 1)
		n = mc_kb_fori(kb, batch, 0);
	if (d.pix / TP) {
		mc_kexpr *pb = mc_kb_fori(kb, d.pix / TP, 0);
		block(&d, n, mc_kb_let(kb, mc_k_muli(kb, pb, TP)), TP);
		mc_kb_end(kb);
	}
	if (d.pix % TP)
		block(&d, n, idx(kb, d.pix / TP * TP), (int)(d.pix % TP));
	if (batch > 1)
		mc_kb_end(kb);
	return 0;
}
