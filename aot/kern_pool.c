/* Fast kernel: MaxPool and AveragePool in channels-last layout
 * (NhwcMaxPool, NhwcAveragePool; float32, rank 3 or 4).
 *
 * Channels are the vector dim (kern_nhwc.h's chunks): each output pixel
 * keeps a running maximum or sum per chunk in a vector local over its taps,
 * whose ranges (rows per output row, columns per output pixel) leave the
 * padding out without a branch. The semantics are lower_nn.c's pools:
 * the maximum starts at -inf and takes a value only where it is greater
 * (a NaN never wins); the average divides by the taps inside the image, or
 * inside the explicitly padded image with count_include_pad. */
#include <math.h>
#include <string.h>

#include "lower.h"
#include "kern_nhwc.h"
#include "../libcore/ops/nn.h"

typedef struct {
	mc_lower_ctx *c;
	mc_nhwc_geom g;
	bool max, count_pad;
	mc_kexpr *n, *oh, *ow;
	mc_nhwc_taps th, tw;
	mc_kexpr *count; /* AveragePool: the divisor of the pixel (f32) */
} pool_gen;

static mc_kexpr *idx(mc_kb *kb, int64_t v)
{
	return mc_k_index(kb, v);
}

/* The divisor of the pixel: the taps counted by the average. */
static mc_kexpr *tap_count(pool_gen *p)
{
	mc_kb *kb = p->c->kb;
	if (p->count_pad)
		return mc_k_mul(kb, mc_nhwc_padded_taps(kb, &p->g.h, p->oh),
		                mc_nhwc_padded_taps(kb, &p->g.w, p->ow));
	mc_kexpr *rows = mc_k_bin(kb, MC_KB_MAX, idx(kb, 0), mc_k_sub(kb, p->th.hi, p->th.lo));
	mc_kexpr *cols = mc_k_bin(kb, MC_KB_MAX, idx(kb, 0), mc_k_sub(kb, p->tw.hi, p->tw.lo));
	return mc_k_mul(kb, rows, cols);
}

static void pixel_chunk(void *ctx, mc_kexpr *c0, int lanes)
{
	pool_gen *p = ctx;
	mc_kb *kb = p->c->kb;
	const mc_nhwc_geom *g = &p->g;
	mc_kexpr *init = mc_k_float(kb, MC_KT_F32, p->max ? -INFINITY : 0);
	mc_kexpr *acc = mc_kb_local(kb, mc_k_splat(kb, init, lanes));
	int depth = 0;
	mc_kexpr *kh = mc_nhwc_range(kb, p->th.lo, p->th.hi, MC_KF_REDUCE, &depth);
	mc_kexpr *ih = mc_k_add(kb, p->th.start, mc_k_muli(kb, kh, g->h.d));
	mc_kexpr *row = mc_kb_let(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, p->n, g->h.in), ih),
	                                        g->w.in * g->c));
	mc_kexpr *kw = mc_nhwc_range(kb, p->tw.lo, p->tw.hi, MC_KF_REDUCE, &depth);
	mc_kexpr *iw = mc_k_add(kb, p->tw.start, mc_k_muli(kb, kw, g->w.d));
	mc_kexpr *i = mc_k_add(kb, mc_k_add(kb, row, mc_k_muli(kb, iw, g->c)), c0);
	mc_kexpr *v = mc_kb_let(kb, mc_nhwc_vload(kb, p->c->in_buf[0], i, lanes));
	if (p->max)
		mc_kb_assign(kb, acc, mc_k_bin(kb, MC_KB_MAX, v, acc)); /* v > acc ? v : acc */
	else
		mc_kb_assign(kb, acc, mc_k_add(kb, acc, v));
	mc_kb_end_n(kb, depth);
	mc_kexpr *result = p->max ? acc : mc_k_div(kb, acc, p->count);
	mc_kexpr *coords[4];
	int r = 0;
	coords[r++] = p->n;
	if (g->rank == 4)
		coords[r++] = p->oh;
	coords[r++] = p->ow;
	coords[r] = c0;
	mc_nhwc_store(p->c, coords, result);
}

int mc_kern_pool_nhwc(mc_lower_ctx *c)
{
	bool max = c->node->id == MC_OP_NhwcMaxPool;
	if (!max && c->node->id != MC_OP_NhwcAveragePool)
		return 1;
	/* MaxPool's Indices output stays with the plain lowering */
	if (c->n_out > 1 && c->out[1])
		return 1;
	mc_nhwc_geom g;
	int rc = mc_nhwc_geom_of(c, NULL, &g);
	if (rc)
		return rc;
	if (g.c == 0 || g.n == 0)
		return 1;
	mc_kb *kb = c->kb;
	const nn_params *np = c->node->params;
	pool_gen p = { .c = c, .g = g, .max = max, .count_pad = np->count_include_pad };
	int depth = 0;
	p.n = mc_nhwc_range(kb, idx(kb, 0), idx(kb, g.n), MC_KF_PARALLEL, &depth);
	p.oh = mc_nhwc_range(kb, idx(kb, 0), idx(kb, g.h.out), MC_KF_PARALLEL, &depth);
	mc_nhwc_taps_at(kb, &g.h, p.oh, &p.th);
	p.ow = mc_nhwc_range(kb, idx(kb, 0), idx(kb, g.w.out), MC_KF_PARALLEL, &depth);
	mc_nhwc_taps_at(kb, &g.w, p.ow, &p.tw);
	if (!max)
		p.count = mc_kb_let(kb, mc_k_cast(kb, MC_KT_F32, tap_count(&p)));
	mc_nhwc_chunks(kb, g.c, pixel_chunk, &p);
	mc_kb_end_n(kb, depth);
	return 0;
}
