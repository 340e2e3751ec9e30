/* Lowerings of the internal channels-last ops (libcore/ops/nhwc.c):
 * NhwcConv, NhwcMaxPool, NhwcAveragePool. Data is [N, D1.., C]; the Conv
 * weight stays [M, C/group, k...] and the bias [M].
 *
 * Each tries its fast kernel first (aot/kern_*.c: 0 done, 1 not handled)
 * and otherwise builds a plain, correct kernel in the style of lower_nn.c:
 * one output element at a time in a local accumulator, stored once through
 * mc_lower_store so that fused epilogues apply; the valid taps of each
 * spatial dim come from the shared window helpers (lower_window.h), so the
 * reduction loops never test padding. The geometry is the registry's
 * (mc_win_setup / mc_win_forward on the channels-first view of the input). */
#include <string.h>

#include "lower.h"
#include "lower_window.h"

/* The channels-first view [N, C, D1..] of a channels-last shape. */
static mc_shape nchw_view(const mc_shape *s)
{
	mc_shape r = {.rank = s->rank};
	r.dims[0] = s->dims[0];
	r.dims[1] = s->dims[s->rank - 1];
	for (int i = 2; i < s->rank; i++)
		r.dims[i] = s->dims[i - 1];
	return r;
}

/* The window of the node on input 0; kernel from the weight (NULL: pools). */
static int nhwc_geom(mc_lower_ctx *c, const int64_t *kernel, win_geom *g)
{
	const nn_params *p = c->node->params;
	mc_shape xs = nchw_view(&c->in[0]->shape);
	if (c->in[0]->shape.rank < 3)
		return mc_lower_error(c, "input must have rank 3 or more");
	return mc_win_setup(c->node, p, &xs, kernel, g) || mc_win_forward(c->node, p, g) ? -1 : 0;
}

/* The loops over every element of s (extent-1 dims get no loop). */
static int out_loops(mc_kb *kb, const mc_shape *s, mc_kexpr **coords)
{
	int depth = 0;
	for (int d = 0; d < s->rank; d++)
		coords[d] = range(kb, idx(kb, 0), idx(kb, s->dims[d]), MC_KF_PARALLEL, &depth);
	return depth;
}

/* Linear index of pixel pos[0..nsp) of batch nb in a channels-last input
 * of spatial extents in[] and `ch` channels: its first channel. */
static mc_kexpr *pixel_base(mc_kb *kb, mc_kexpr *nb, mc_kexpr *const *pos, const int64_t *in,
                            int nsp, int64_t ch)
{
	mc_kexpr *lin = nb;
	for (int i = 0; i < nsp; i++)
		lin = mc_k_add(kb, mc_k_muli(kb, lin, in[i]), pos[i]);
	return mc_k_muli(kb, lin, ch);
}

/* The taps of every spatial dim at the output position coords[1..nsp]. */
static void window_taps(mc_kb *kb, const win_geom *g, mc_kexpr *const *coords, dim_geom *dims,
                        taps *tp)
{
	for (int i = 0; i < g->nsp; i++) {
		dims[i] = dim_of_win(g, i);
		fwd_taps(kb, &dims[i], coords[1 + i], &tp[i]);
	}
}

/* Opens the tap loops; pos[i] gets the input position of each dim and
 * tap[i] the tap. Returns the blocks opened. */
static int open_taps(mc_kb *kb, const win_geom *g, const taps *tp, mc_kexpr **pos,
                     mc_kexpr **tap)
{
	int depth = 0;
	for (int i = 0; i < g->nsp; i++) {
		tap[i] = range(kb, tp[i].lo, tp[i].hi, MC_KF_REDUCE, &depth);
		pos[i] = mc_kb_let(kb, mc_k_add(kb, tp[i].start, mc_k_muli(kb, tap[i], g->d[i])));
	}
	return depth;
}

/* ---- NhwcConv ---- */

static bool is_depthwise(const mc_lower_ctx *c, int64_t group)
{
	const mc_shape *xs = &c->in[0]->shape, *ws = &c->in[1]->shape;
	return group > 1 && xs->dims[xs->rank - 1] == group && ws->dims[0] == group;
}

/* A constant float depthwise weight [m][1][taps] packed taps first, its
 * buffer: the output's channel loop is innermost (a grid's threads, a
 * CPU's lanes), so its weights are then contiguous too. -1: not constant
 * float; -2 after reporting. */
static int taps_first_weight(mc_lower_ctx *c, int64_t cout, const win_geom *g)
{
	const mc_tensor *w = mc_lower_const(c, 1);
	int64_t ksize = 1;
	for (int i = 0; i < g->nsp; i++)
		ksize *= g->k[i];
	if (!w || w->dtype != MC_FLOAT || (int64_t)mc_numel(&w->shape) != cout * ksize)
		return -1;
	mc_tensor *packed = mc_dw_taps_first(w, cout, g->k, g->nsp, cout);
	if (!packed) {
		mc_lower_error(c, "out of memory packing the depthwise weight");
		return -2;
	}
	return mc_kb_packed(c->kb, packed);
}

/* y[n, o.., m] = b[m] + sum over the group's channels and the window of
 * x[n, o*s + t*d - pb, first + ic] * w[m, ic, t]. The channel loop is
 * innermost: it reads x contiguously. */
static int plain_conv(mc_lower_ctx *c, const win_geom *g, int64_t group)
{
	mc_kb *kb = c->kb;
	const mc_shape *os = &c->out[0]->shape, *xs = &c->in[0]->shape;
	int nsp = g->nsp;
	int64_t cin = xs->dims[xs->rank - 1], cout = os->dims[os->rank - 1];
	int64_t cg = cin / group, mg = cout / group, ksize = 1;
	for (int i = 0; i < nsp; i++)
		ksize *= g->k[i];
	mc_ktype t = mc_ktype_of(c->out[0]->dtype);
	int taps_first = cg == 1 && mg == 1 ? taps_first_weight(c, cout, g) : -1;
	if (taps_first == -2)
		return -1;
	mc_kexpr *coords[MC_MAX_RANK];
	int depth = out_loops(kb, os, coords);
	mc_kexpr *m = coords[os->rank - 1];
	dim_geom dims[MAX_SP];
	taps tp[MAX_SP];
	window_taps(kb, g, coords, dims, tp);
	bool has_bias = c->n_in > 2 && c->in[2];
	mc_kexpr *acc = mc_kb_local(kb, has_bias ? mc_k_cast(kb, t, mc_lower_load(c, 2, m))
	                                         : mc_k_const_as(kb, t, 0));
	mc_kexpr *first = group > 1 ? mc_kb_let(kb, mc_k_muli(kb, mc_k_div(kb, m, idx(kb, mg)), cg))
	                            : idx(kb, 0);
	mc_kexpr *pos[MAX_SP], *tap[MAX_SP];
	int inner = open_taps(kb, g, tp, pos, tap);
	mc_kexpr *x_base = mc_kb_let(kb, mc_k_add(kb, pixel_base(kb, coords[0], pos, g->in, nsp, cin),
	                                          first));
	mc_kexpr *tap_lin = idx(kb, 0);
	for (int i = 0; i < nsp; i++)
		tap_lin = mc_k_add(kb, mc_k_muli(kb, tap_lin, g->k[i]), tap[i]);
	mc_kexpr *ic = range(kb, idx(kb, 0), idx(kb, cg), MC_KF_REDUCE, &inner);
	mc_kexpr *xv = mc_k_cast(kb, t, mc_lower_load(c, 0, mc_k_add(kb, x_base, ic)));
	mc_kexpr *wv;
	if (taps_first >= 0) /* [tap][m]: neighbouring outputs read neighbouring weights */
		wv = mc_k_cast(kb, t, mc_k_load(kb, taps_first, mc_k_add(kb, mc_k_muli(kb, tap_lin, cout), m)));
	else
		wv = mc_k_cast(kb, t, mc_lower_load(c, 1, mc_k_add(kb, mc_k_add(kb, mc_k_muli(kb, m, cg * ksize), tap_lin),
		                                                   mc_k_muli(kb, ic, ksize))));
	mc_kb_assign(kb, acc, mc_k_add(kb, acc, mc_k_mul(kb, xv, wv)));
	mc_kb_end_n(kb, inner);
	mc_lower_store(c, 0, coords, NULL, acc);
	mc_kb_end_n(kb, depth);
	return 0;
}

/* A 2-D depthwise convolution on a grid: a thread per channel and run of
 * up to DW_RUN outputs along a row. Each input of the run's window row
 * loads once and feeds every output whose taps cover it, where a thread
 * per output loaded it once a tap; the row's weights load once. Each
 * output adds its taps in the plain lowering's order (the bias, then the
 * rows, each left to right), an input outside the image as zero. Runs
 * shorten where they would leave fewer than DW_MIN_THREADS threads (a
 * small image's: latency, not loads, limits those). 1: not one (a weight
 * not constant, or runs of one). fp16 on an H200: convnext_tiny 533 ->
 * 508 us, efficientnet_b0 330 -> 317, mobilenet_v2 165 -> 155. */
#define DW_RUN 4
#define DW_MIN_THREADS 32768
#define DW_MAX_KW 64 /* the row's weights, each a let */
static int grid_dwconv(mc_lower_ctx *c, const win_geom *g)
{
	mc_kb *kb = c->kb;
	const mc_shape *os = &c->out[0]->shape;
	int64_t ch = os->dims[3], h = g->in[0], w = g->in[1], ow = g->out[1];
	int64_t kw = g->k[1], sw = g->s[1], dw = g->d[1];
	int64_t outs = (int64_t)mc_numel(os);
	int len = DW_RUN;
	while (len > 1 && outs / len < DW_MIN_THREADS)
		len /= 2;
	if (len == 1)
		return 1;
	int64_t runs = (ow + len - 1) / len;
	int wt = taps_first_weight(c, ch, g);
	if (wt < 0)
		return wt == -2 ? -1 : 1;
	mc_ktype t = mc_ktype_of(c->out[0]->dtype);
	int depth = 0;
	mc_kexpr *n = range(kb, idx(kb, 0), idx(kb, os->dims[0]), MC_KF_PARALLEL, &depth);
	mc_kexpr *oh = range(kb, idx(kb, 0), idx(kb, os->dims[1]), MC_KF_PARALLEL, &depth);
	mc_kexpr *run = range(kb, idx(kb, 0), idx(kb, runs), MC_KF_PARALLEL, &depth);
	mc_kexpr *m = range(kb, idx(kb, 0), idx(kb, ch), MC_KF_PARALLEL, &depth);
	dim_geom rows = dim_of_win(g, 0);
	taps th;
	fwd_taps(kb, &rows, oh, &th);
	bool has_bias = c->n_in > 2 && c->in[2];
	mc_kexpr *start = has_bias ? mc_kb_let(kb, mc_k_cast(kb, t, mc_lower_load(c, 2, m))) : mc_k_const_as(kb, t, 0);
	mc_kexpr *acc[DW_RUN];
	for (int j = 0; j < len; j++)
		acc[j] = mc_kb_local(kb, start);
	/* the run's first input column */
	mc_kexpr *col0 = mc_kb_let(kb, mc_k_addi(kb, mc_k_muli(kb, run, len * sw), -g->pb[1]));
	int inner = 0;
	mc_kexpr *kh = range(kb, th.lo, th.hi, MC_KF_REDUCE, &inner);
	mc_kexpr *ih = mc_k_add(kb, th.start, mc_k_muli(kb, kh, g->d[0]));
	mc_kexpr *row = mc_kb_let(kb, mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, n, h), ih), w * ch), m));
	mc_kexpr *wv[DW_MAX_KW];
	for (int64_t k = 0; k < kw; k++)
		wv[k] = mc_kb_let(kb, mc_k_cast(kb, t, mc_k_load(kb, wt, mc_k_add(kb, mc_k_muli(kb, mc_k_addi(kb,
		                                          mc_k_muli(kb, kh, kw), k), ch), m))));
	/* column col0 + i feeds output j through tap k where i = j sw + k dw */
	for (int64_t i = 0; i < (len - 1) * sw + (kw - 1) * dw + 1; i++) {
		mc_kexpr *x = NULL;
		for (int j = 0; j < len; j++) {
			int64_t off = i - j * sw;
			if (off < 0 || off % dw || off / dw >= kw)
				continue;
			if (!x) {
				mc_kexpr *iw = mc_kb_let(kb, mc_k_addi(kb, col0, i));
				mc_kexpr *in = mc_k_bin(kb, MC_KB_AND, mc_k_bin(kb, MC_KB_GE, iw, idx(kb, 0)),
				                        mc_k_bin(kb, MC_KB_LT, iw, idx(kb, w)));
				mc_kexpr *at = imin(kb, imax(kb, iw, idx(kb, 0)), idx(kb, w - 1));
				mc_kexpr *v = mc_k_cast(kb, t, mc_lower_load(c, 0, mc_k_add(kb, row, mc_k_muli(kb, at, ch))));
				x = mc_kb_let(kb, mc_k_select(kb, in, v, mc_k_const_as(kb, t, 0)));
			}
			mc_kb_assign(kb, acc[j], mc_k_add(kb, acc[j], mc_k_mul(kb, x, wv[off / dw])));
		}
	}
	mc_kb_end_n(kb, inner);
	for (int j = 0; j < len; j++) {
		mc_kexpr *o = mc_kb_let(kb, mc_k_addi(kb, mc_k_muli(kb, run, len), j));
		bool tail = runs * len - ow > len - 1 - j; /* the last run's output j lies past the row */
		if (tail)
			mc_kb_if(kb, mc_k_bin(kb, MC_KB_LT, o, idx(kb, ow)));
		mc_kexpr *coords[4] = { n, oh, o, m };
		mc_lower_store(c, 0, coords, NULL, acc[j]);
		if (tail)
			mc_kb_end(kb);
	}
	mc_kb_end_n(kb, depth);
	return 0;
}

static int lower_nhwc_conv(mc_lower_ctx *c)
{
	if (!c->out[0])
		return 0;
	const nn_params *p = c->node->params;
	win_geom g;
	if (nhwc_geom(c, c->in[1]->shape.dims + 2, &g))
		return -1;
	int rc = 1;
	bool grid = c->kb->target && c->kb->target->grid;
	if (grid && p->group == 1) /* not the CPU kernels' tiles: a template, or a thread per output */
		rc = mc_kern_conv_nhwc_cuda(c, &g);
	else if (grid && is_depthwise(c, p->group) && g.nsp == 2 && g.k[1] <= DW_MAX_KW)
		rc = grid_dwconv(c, &g);
	else if (grid)
		rc = 1;
	else if (is_depthwise(c, p->group))
		rc = mc_kern_dwconv_nhwc(c);
	else if (p->group == 1 && (c->kb->for_memory || c->kb->for_size || (rc = mc_kern_wino_nhwc(c)) == 1))
		rc = mc_kern_conv_nhwc(c);
	return rc == 1 ? plain_conv(c, &g, p->group) : rc;
}

/* ---- NhwcMaxPool, NhwcAveragePool ---- */

/* y[n, o.., ch] = max or mean over the window of x[n, o*s + t*d - pb, ch];
 * the mean counts the taps in the image, or in the explicitly padded
 * image with count_include_pad (as lower_nn.c's pools). */
static int plain_pool(mc_lower_ctx *c, const win_geom *g, bool is_max)
{
	mc_kb *kb = c->kb;
	const nn_params *p = c->node->params;
	const mc_shape *os = &c->out[0]->shape;
	int nsp = g->nsp;
	int64_t ch = os->dims[os->rank - 1];
	mc_ktype t = mc_ktype_of(c->in[0]->dtype);
	mc_kexpr *coords[MC_MAX_RANK];
	int depth = out_loops(kb, os, coords);
	dim_geom dims[MAX_SP];
	taps tp[MAX_SP];
	window_taps(kb, g, coords, dims, tp);
	mc_kexpr *acc = mc_kb_local(kb, is_max ? lowest(kb, t) : mc_k_const_as(kb, t, 0));
	mc_kexpr *pos[MAX_SP], *tap[MAX_SP];
	int inner = open_taps(kb, g, tp, pos, tap);
	mc_kexpr *xi = mc_k_add(kb, pixel_base(kb, coords[0], pos, g->in, nsp, ch),
	                        coords[os->rank - 1]);
	mc_kexpr *v = mc_kb_let(kb, mc_lower_load(c, 0, xi));
	if (is_max)
		mc_kb_assign(kb, acc, mc_k_select(kb, mc_k_bin(kb, MC_KB_GT, v, acc), v, acc));
	else
		mc_kb_assign(kb, acc, mc_k_add(kb, acc, v));
	mc_kb_end_n(kb, inner);
	mc_kexpr *result = acc;
	if (!is_max) {
		mc_kexpr *count = idx(kb, 1);
		for (int i = 0; i < nsp; i++) {
			mc_kexpr *n = p->count_include_pad
			                      ? padded_taps(kb, &dims[i], g->pe[i], coords[1 + i])
			                      : imax(kb, idx(kb, 0), mc_k_sub(kb, tp[i].hi, tp[i].lo));
			count = mc_k_mul(kb, count, n);
		}
		result = mc_k_div(kb, acc, mc_k_cast(kb, t, count));
	}
	mc_lower_store(c, 0, coords, NULL, result);
	mc_kb_end_n(kb, depth);
	return 0;
}

static int lower_nhwc_pool(mc_lower_ctx *c, bool is_max)
{
	if (!c->out[0])
		return 0;
	win_geom g;
	if (nhwc_geom(c, NULL, &g))
		return -1;
	/* a grid: a thread per output element (the CPU kernel's channel
	 * loop, its vectors, would be one thread's) */
	int rc = c->kb->target && c->kb->target->grid ? 1 : mc_kern_pool_nhwc(c);
	return rc == 1 ? plain_pool(c, &g, is_max) : rc;
}

static int lower_nhwc_maxpool(mc_lower_ctx *c)
{
	return lower_nhwc_pool(c, true);
}

static int lower_nhwc_avgpool(mc_lower_ctx *c)
{
	return lower_nhwc_pool(c, false);
}

#define LOWERING(var, name, fn) static const mc_lowering var = { name, fn, NULL, MC_LOWER_EPILOGUE }

LOWERING(l_nhwc_conv, MC_OP_NhwcConv, lower_nhwc_conv);
LOWERING(l_nhwc_maxpool, MC_OP_NhwcMaxPool, lower_nhwc_maxpool);
LOWERING(l_nhwc_avgpool, MC_OP_NhwcAveragePool, lower_nhwc_avgpool);

const mc_lowering *const mc_lower_nhwc[] = {
	&l_nhwc_conv, &l_nhwc_maxpool, &l_nhwc_avgpool,
	NULL,
};
