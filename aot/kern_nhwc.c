/* Window geometry and channel chunking of the channels-last kernels (see
 * aot/kern_nhwc.h). The tap ranges are the plain lowerings' own
 * (lower_window.h): computed once per output position, so reduction loops
 * never branch on padding. */
#include "kern_nhwc.h"
#include "lower_window.h"

int mc_nhwc_geom_of(const mc_lower_ctx *c, const int64_t *kernel, mc_nhwc_geom *g)
{
	const mc_shape *xs = &c->in[0]->shape;
	if ((xs->rank != 3 && xs->rank != 4) || c->in[0]->dtype != MC_FLOAT ||
	    !c->out[0] || c->out[0]->dtype != MC_FLOAT)
		return 1;
	/* the same shape channels-first, for the registry's window helpers */
	mc_shape nchw = { .rank = xs->rank };
	nchw.dims[0] = xs->dims[0];
	nchw.dims[1] = xs->dims[xs->rank - 1];
	for (int i = 1; i < xs->rank - 1; i++)
		nchw.dims[i + 1] = xs->dims[i];
	win_geom wg;
	if (mc_win_setup(c->node, c->node->params, &nchw, kernel, &wg) ||
	    mc_win_forward(c->node, c->node->params, &wg))
		return -1;
	g->rank = xs->rank;
	g->n = nchw.dims[0];
	g->c = nchw.dims[1];
	mc_nhwc_dim unit = { 1, 1, 1, 1, 1, 0, 0 };
	mc_nhwc_dim dims[2];
	for (int i = 0; i < wg.nsp; i++)
		dims[i] = (mc_nhwc_dim){ wg.in[i], wg.out[i], wg.k[i], wg.s[i], wg.d[i], wg.pb[i],
		                         wg.pe[i] };
	g->h = wg.nsp == 2 ? dims[0] : unit;
	g->w = dims[wg.nsp - 1];
	return 0;
}

void mc_nhwc_interior(const mc_nhwc_dim *d, int64_t *lo, int64_t *hi)
{
	/* o*s - pb >= 0 and o*s - pb + (k-1)*d <= in - 1 */
	int64_t a = (d->pb + d->s - 1) / d->s;
	int64_t room = d->in - 1 + d->pb - (d->k - 1) * d->d;
	int64_t b = room < 0 ? 0 : room / d->s + 1;
	if (a > d->out)
		a = d->out;
	if (b > d->out)
		b = d->out;
	*lo = a;
	*hi = b > a ? b : a;
}

static dim_geom dim_of(const mc_nhwc_dim *d)
{
	return (dim_geom){ d->in, d->out, d->k, d->s, d->d, d->pb };
}

void mc_nhwc_taps_at(mc_kb *kb, const mc_nhwc_dim *d, mc_kexpr *o, mc_nhwc_taps *t)
{
	dim_geom g = dim_of(d);
	taps tp;
	fwd_taps(kb, &g, o, &tp);
	*t = (mc_nhwc_taps){ tp.start, tp.lo, tp.hi };
}

mc_kexpr *mc_nhwc_padded_taps(mc_kb *kb, const mc_nhwc_dim *d, mc_kexpr *o)
{
	dim_geom g = dim_of(d);
	return padded_taps(kb, &g, d->pe, o);
}

mc_kexpr *mc_nhwc_range(mc_kb *kb, mc_kexpr *lo, mc_kexpr *hi, unsigned flags, int *depth)
{
	return range(kb, lo, hi, flags, depth);
}

void mc_nhwc_chunks(mc_kb *kb, int64_t c, mc_nhwc_chunk_fn fn, void *ctx)
{
	int wide = mc_isa_lanes_upto(kb->isa, c);
	int64_t done = 0;
	if (wide > 1) {
		int depth = 0;
		mc_kexpr *chunk = mc_nhwc_range(kb, idx(kb, 0), idx(kb, c / wide), 0, &depth);
		fn(ctx, mc_kb_let(kb, mc_k_muli(kb, chunk, wide)), wide);
		mc_kb_end_n(kb, depth);
		done = c / wide * wide;
		for (int l = wide / 2; l > 1; l /= 2)
			if (c - done >= l && mc_isa_has_lanes(kb->isa, l)) {
				fn(ctx, idx(kb, done), l);
				done += l;
			}
	}
	if (done < c) {
		int depth = 0;
		mc_kexpr *ch = mc_nhwc_range(kb, idx(kb, done), idx(kb, c), 0, &depth);
		fn(ctx, ch, 1);
		mc_kb_end_n(kb, depth);
	}
}

mc_kexpr *mc_nhwc_vload(mc_kb *kb, int buf, mc_kexpr *index, int lanes)
{
	return lanes > 1 ? mc_k_vload(kb, buf, index, lanes) : mc_k_load(kb, buf, index);
}

void mc_nhwc_store(mc_lower_ctx *c, mc_kexpr *const *coords, mc_kexpr *value)
{
	if (mc_k_lanes(value) > 1)
		mc_lower_store_vec(c, 0, coords, NULL, value);
	else
		mc_lower_store(c, 0, coords, NULL, value);
}
