/* Window geometry of the lowerings of Conv and the pools (aot/lower_nn.c)
 * and of their channels-last forms (aot/lower_nhwc.c): index helpers, the
 * valid taps of a forward window at one output position (no branch on
 * padding in the reduction loops), AveragePool's padded tap count, and
 * MaxPool's starting value. Moved here from lower_nn.c so that both
 * families build the same index arithmetic. */
#ifndef MODELC_LOWER_WINDOW_H
#define MODELC_LOWER_WINDOW_H

#include <math.h>

#include "lower.h"
#include "../libcore/ops/nn.h"

static inline mc_kexpr *idx(mc_kb *kb, int64_t v)
{
	return mc_k_index(kb, v);
}

static inline mc_kexpr *imax(mc_kb *kb, mc_kexpr *a, mc_kexpr *b)
{
	return mc_k_bin(kb, MC_KB_MAX, a, b);
}

static inline mc_kexpr *imin(mc_kb *kb, mc_kexpr *a, mc_kexpr *b)
{
	return mc_k_bin(kb, MC_KB_MIN, a, b);
}

static inline int64_t floor_div_c(int64_t a, int64_t b)
{
	return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

/* floor(a / b) for b > 0, where min_a bounds a from below at compile
 * time: the division runs on a non-negative number, where C's truncation
 * is the floor. */
static inline mc_kexpr *floor_div(mc_kb *kb, mc_kexpr *a, int64_t b, int64_t min_a)
{
	if (b == 1)
		return a;
	int64_t bias = min_a < 0 ? (-min_a + b - 1) / b : 0;
	mc_kexpr *q = mc_k_div(kb, mc_k_addi(kb, a, bias * b), idx(kb, b));
	return mc_k_addi(kb, q, -bias);
}

/* A loop over [lo, hi), or lo itself where the range is one value known at
 * compile time; *depth counts the blocks opened. */
static inline mc_kexpr *range(mc_kb *kb, mc_kexpr *lo, mc_kexpr *hi, unsigned flags, int *depth)
{
	int64_t a, b;
	if (mc_k_is_const(lo, &a) && mc_k_is_const(hi, &b) && b - a == 1)
		return lo;
	(*depth)++;
	return mc_kb_for(kb, lo, hi, flags);
}

/* NhwcConv of window g on the cuda target's tensor cores
 * (aot/kern_cuda.c: MC_TMPL_CONV2D_SPLITK, nhwc); 1: not handled. */
int mc_kern_conv_nhwc_cuda(mc_lower_ctx *c, const win_geom *g);

/* One spatial dim of a window: input and output extents, taps, stride,
 * dilation and the padding at its beginning. */
typedef struct {
	int64_t in, out, k, s, d, pb;
} dim_geom;

static inline dim_geom dim_of_win(const win_geom *g, int i)
{
	return (dim_geom){ g->in[i], g->out[i], g->k[i], g->s[i], g->d[i], g->pb[i] };
}

/* Forward window (Conv, pools) at output position o: tap t reads input
 * position start + t*d, inside the input for t in [lo, hi). Bounds that
 * no output position needs stay constants. */
typedef struct {
	mc_kexpr *start, *lo, *hi;
} taps;

static inline void fwd_taps(mc_kb *kb, const dim_geom *g, mc_kexpr *o, taps *t)
{
	int64_t last = (g->out - 1) * g->s - g->pb; /* start of the last window */
	t->start = mc_kb_let(kb, mc_k_addi(kb, mc_k_muli(kb, o, g->s), -g->pb));
	t->lo = idx(kb, 0);
	t->hi = idx(kb, g->k);
	if (g->pb > 0) /* lo = ceil(-start / d) where positive */
		t->lo = mc_kb_let(kb, imax(kb, idx(kb, 0),
		                           floor_div(kb, mc_k_sub(kb, idx(kb, g->d - 1), t->start), g->d,
		                                     g->d - 1 - last)));
	if (last + (g->k - 1) * g->d >= g->in) /* hi = ceil((in - start) / d) where below k */
		t->hi = mc_kb_let(kb, imin(kb, idx(kb, g->k),
		                           floor_div(kb, mc_k_sub(kb, idx(kb, g->in + g->d - 1), t->start),
		                                     g->d, g->in + g->d - 1 - last)));
}

/* Taps inside the explicitly padded input (AveragePool counting pads):
 * start + pb = o*s >= 0, so only the end can cut (ceil mode). */
static inline mc_kexpr *padded_taps(mc_kb *kb, const dim_geom *g, int64_t pe, mc_kexpr *o)
{
	int64_t lim = g->in + g->pb + pe, last = (g->out - 1) * g->s;
	if (last + (g->k - 1) * g->d < lim)
		return idx(kb, g->k);
	mc_kexpr *room = mc_k_sub(kb, idx(kb, lim + g->d - 1), mc_k_muli(kb, o, g->s));
	return imin(kb, idx(kb, g->k), floor_div(kb, room, g->d, lim + g->d - 1 - last));
}

/* The lowest value of type t: MaxPool's starting point. */
static inline mc_kexpr *lowest(mc_kb *kb, mc_ktype t)
{
	switch (t) {
	case MC_KT_I8: return mc_k_int(kb, t, -128);
	case MC_KT_U8: return mc_k_int(kb, t, 0);
	default: return mc_k_float(kb, t, -INFINITY);
	}
}

#endif
