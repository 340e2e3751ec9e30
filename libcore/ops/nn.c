/* Neural-network ops: Conv, ConvTranspose, pooling, Gemm, MatMul.
 *
 * Conv, ConvTranspose and the pools share one description of a sliding
 * window (kernel, strides, dilations, pads, auto_pad, ceil_mode); its output
 * size and padding are computed in one place (win_forward, win_transposed).
 * The reference loops convert whole tensors to double once and keep index
 * arithmetic out of the innermost loop, so that real models run in seconds:
 * the innermost loop of a convolution walks one output row. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "nn.h"

/* Window attributes and spatial sizes stay below this, so that every
 * product of two of them fits in int64 without checks. */
#define WIN_LIMIT ((int64_t)1 << 31)

/* ---- attributes ---- */

static int read_list(const mc_node *n, const char *name, int_list *l)
{
	const int64_t *v;
	size_t count;
	if (mc_attr_ints(n, name, &v, &count))
		return -1;
	if (count > sizeof l->v / sizeof *l->v)
		return mc_node_error(n, "attribute '%s' has %zu values, at most %zu allowed", name,
		                     count, sizeof l->v / sizeof *l->v);
	l->given = v != NULL;
	l->n = count;
	if (count)
		memcpy(l->v, v, count * sizeof *v);
	return 0;
}

/* Attributes that an opset does not define yet are refused rather than
 * silently given a newer meaning; opset 0: the op never defines it. */
static int attr_since(const mc_node *n, const char *name, int opset)
{
	if (!mc_attr_find(n, name))
		return 0;
	if (!opset)
		return mc_node_error(n, "attribute '%s' is not defined for %s", name, n->op_type);
	if (n->opset < opset)
		return mc_node_error(n, "attribute '%s' needs opset %d or newer", name, opset);
	return 0;
}

static int read_bool(const mc_node *n, const char *name, bool *out)
{
	int64_t v;
	if (mc_attr_int(n, name, 0, &v))
		return -1;
	if (v != 0 && v != 1)
		return mc_node_error(n, "attribute '%s' must be 0 or 1, got %lld", name, (long long)v);
	*out = v != 0;
	return 0;
}

static int read_auto_pad(const mc_node *n, int *out)
{
	const char *s;
	if (mc_attr_string(n, "auto_pad", "NOTSET", &s))
		return -1;
	/* some exporters write an empty string for the default */
	if (!strcmp(s, "NOTSET") || !s[0])
		*out = PAD_NOTSET;
	else if (!strcmp(s, "SAME_UPPER"))
		*out = PAD_SAME_UPPER;
	else if (!strcmp(s, "SAME_LOWER"))
		*out = PAD_SAME_LOWER;
	else if (!strcmp(s, "VALID"))
		*out = PAD_VALID;
	else
		return mc_node_error(n, "attribute 'auto_pad' is '%s'; expected NOTSET, SAME_UPPER, "
		                     "SAME_LOWER or VALID", s);
	return 0;
}

static nn_params *new_params(mc_node *n)
{
	nn_params *p = mc_params_new(n, sizeof *p);
	p->group = 1;
	p->p = 2;
	p->alpha = p->beta = 1;
	return p;
}

/* The window attributes: kernel_shape, strides, pads and auto_pad always;
 * dilations and ceil_mode from the opsets given (0: never). */
static int parse_window(mc_node *n, nn_params *p, bool kernel_required, int dilations_since,
                        int ceil_mode_since)
{
	if (attr_since(n, "dilations", dilations_since) ||
	    attr_since(n, "ceil_mode", ceil_mode_since) || read_auto_pad(n, &p->auto_pad) ||
	    read_list(n, "kernel_shape", &p->kernel) || read_list(n, "strides", &p->strides) ||
	    read_list(n, "pads", &p->pads) || read_list(n, "dilations", &p->dilations) ||
	    read_bool(n, "ceil_mode", &p->ceil_mode))
		return -1;
	if (kernel_required && !p->kernel.given)
		return mc_node_error(n, "attribute 'kernel_shape' is required");
	return 0;
}

/* ---- window geometry, shared by Conv, ConvTranspose and the pools ---- */

/* A list attribute holds per_dim values per spatial dim, each in
 * [min, WIN_LIMIT). */
static int check_list(const mc_node *n, const char *name, const int_list *l, int nsp,
                      int per_dim, int64_t min)
{
	if (!l->given)
		return 0;
	if (l->n != (size_t)(nsp * per_dim))
		return mc_node_error(n, "attribute '%s' has %zu values; the input has %d spatial "
		                     "dims, so %d are needed", name, l->n, nsp, nsp * per_dim);
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i] < min || l->v[i] >= WIN_LIMIT)
			return mc_node_error(n, "attribute '%s' value %lld is out of range [%lld, %lld)",
			                     name, (long long)l->v[i], (long long)min,
			                     (long long)WIN_LIMIT);
	return 0;
}

/* Fills kernel, strides, dilations, explicit pads and input sizes from the
 * attributes; `kernel` gives the kernel from W (NULL for the pools). */
int mc_win_setup(const mc_node *n, const nn_params *p, const mc_shape *x,
                 const int64_t *kernel, win_geom *g)
{
	char buf[256];
	if (x->rank < 3)
		return mc_node_error(n, "input has shape %s; expected N x C x spatial dims (rank 3 "
		                     "or more)", mc_shape_str(x, buf, sizeof buf));
	int nsp = g->nsp = x->rank - 2;
	if (check_list(n, "kernel_shape", &p->kernel, nsp, 1, 1) ||
	    check_list(n, "strides", &p->strides, nsp, 1, 1) ||
	    check_list(n, "dilations", &p->dilations, nsp, 1, 1) ||
	    check_list(n, "pads", &p->pads, nsp, 2, 0))
		return -1;
	for (int i = 0; i < nsp; i++) {
		g->in[i] = x->dims[2 + i];
		if (g->in[i] < 1 || g->in[i] >= WIN_LIMIT)
			return mc_node_error(n, "spatial dim %d of the input is %lld; expected 1 to %lld",
			                     i, (long long)g->in[i], (long long)WIN_LIMIT - 1);
		if (kernel && p->kernel.given && kernel[i] != p->kernel.v[i])
			return mc_node_error(n, "kernel_shape[%d] = %lld does not match the weights' %lld",
			                     i, (long long)p->kernel.v[i], (long long)kernel[i]);
		g->k[i] = kernel ? kernel[i] : p->kernel.v[i];
		if (g->k[i] < 1 || g->k[i] >= WIN_LIMIT)
			return mc_node_error(n, "kernel dim %d is %lld; expected 1 to %lld", i,
			                     (long long)g->k[i], (long long)WIN_LIMIT - 1);
		g->s[i] = p->strides.given ? p->strides.v[i] : 1;
		g->d[i] = p->dilations.given ? p->dilations.v[i] : 1;
		g->pb[i] = p->pads.given ? p->pads.v[i] : 0;
		g->pe[i] = p->pads.given ? p->pads.v[nsp + i] : 0;
	}
	return 0;
}

static int64_t eff_kernel(const win_geom *g, int i)
{
	return (g->k[i] - 1) * g->d[i] + 1;
}

static int64_t floor_div(int64_t a, int64_t b)
{
	return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

/* Splits a total padding between the two ends: the odd one goes to the
 * end for SAME_UPPER, to the beginning otherwise. */
static void split_pad(int64_t total, bool upper, int64_t *begin, int64_t *end)
{
	int64_t half = floor_div(total, 2);
	*begin = upper ? half : total - half;
	*end = total - *begin;
}

/* Output size and pads of Conv and the pools. In ceil mode a last window
 * that would start in the end padding is dropped (ONNX, PyTorch). */
int mc_win_forward(const mc_node *n, const nn_params *p, win_geom *g)
{
	for (int i = 0; i < g->nsp; i++) {
		int64_t ek = eff_kernel(g, i);
		if (p->auto_pad == PAD_SAME_UPPER || p->auto_pad == PAD_SAME_LOWER) {
			g->out[i] = (g->in[i] + g->s[i] - 1) / g->s[i];
			int64_t total = (g->out[i] - 1) * g->s[i] + ek - g->in[i];
			split_pad(total > 0 ? total : 0, p->auto_pad == PAD_SAME_UPPER, &g->pb[i],
			          &g->pe[i]);
			continue;
		}
		if (p->auto_pad == PAD_VALID)
			g->pb[i] = g->pe[i] = 0;
		int64_t span = g->in[i] + g->pb[i] + g->pe[i] - ek;
		if (span < 0)
			return mc_node_error(n, "spatial dim %d: the window (%lld with dilation) is larger "
			                     "than the padded input (%lld)", i, (long long)ek,
			                     (long long)(g->in[i] + g->pb[i] + g->pe[i]));
		g->out[i] = span / g->s[i] + 1;
		if (p->ceil_mode && span % g->s[i]) {
			g->out[i]++;
			if ((g->out[i] - 1) * g->s[i] >= g->in[i] + g->pb[i])
				g->out[i]--;
		}
		if (g->out[i] >= WIN_LIMIT)
			return mc_node_error(n, "output spatial dim %d would be %lld", i,
			                     (long long)g->out[i]);
	}
	return 0;
}

/* Output size and pads of ConvTranspose: from output_shape, auto_pad, or
 * the explicit pads. With output_shape or SAME, the pads follow from the
 * total padding; they may be negative when the output is larger than the
 * full transposed convolution (extra zeros). */
int mc_win_transposed(const mc_node *n, const nn_params *p, win_geom *g)
{
	int nsp = g->nsp;
	const int_list *os = &p->output_shape;
	if (check_list(n, "output_padding", &p->output_padding, nsp, 1, 0))
		return -1;
	/* output_shape may list the spatial dims only or the whole shape */
	if (os->given && os->n != (size_t)nsp && os->n != (size_t)nsp + 2)
		return mc_node_error(n, "attribute 'output_shape' has %zu values; expected %d "
		                     "(spatial dims) or %d", os->n, nsp, nsp + 2);
	for (int i = 0; i < nsp; i++) {
		int64_t op = p->output_padding.given ? p->output_padding.v[i] : 0;
		int64_t full = g->s[i] * (g->in[i] - 1) + op + eff_kernel(g, i);
		bool same = p->auto_pad == PAD_SAME_UPPER || p->auto_pad == PAD_SAME_LOWER;
		if (os->given || same) {
			int64_t want = os->given ? os->v[os->n - (size_t)nsp + (size_t)i]
			                         : g->in[i] * g->s[i];
			if (want < 1 || want >= WIN_LIMIT)
				return mc_node_error(n, "output spatial dim %d would be %lld", i,
				                     (long long)want);
			g->out[i] = want;
			split_pad(full - want, p->auto_pad == PAD_SAME_UPPER, &g->pb[i], &g->pe[i]);
			continue;
		}
		if (p->auto_pad == PAD_VALID)
			g->pb[i] = g->pe[i] = 0;
		g->out[i] = full - g->pb[i] - g->pe[i];
		if (g->out[i] < 1 || g->out[i] >= WIN_LIMIT)
			return mc_node_error(n, "output spatial dim %d would be %lld", i,
			                     (long long)g->out[i]);
	}
	return 0;
}

static size_t prod(const int64_t *dims, int n)
{
	size_t r = 1;
	for (int i = 0; i < n; i++)
		r *= (size_t)dims[i];
	return r;
}

/* Advances a row-major multi-index over dims[0..n); false after the last. */
static bool next_index(int64_t *idx, const int64_t *dims, int n)
{
	for (int i = n - 1; i >= 0; i--) {
		if (++idx[i] < dims[i])
			return true;
		idx[i] = 0;
	}
	return false;
}

/* The range [lo, hi) of positions j in [0, count) for which j*s + off lies
 * in [0, lim): the positions of the innermost loop that stay in the image. */
static void inner_range(int64_t off, int64_t s, int64_t lim, int64_t count, int64_t *lo,
                        int64_t *hi)
{
	int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
	int64_t b = lim - off <= 0 ? 0 : (lim - off + s - 1) / s;
	if (b > count)
		b = count;
	*lo = a < b ? a : b;
	*hi = b;
}

/* The row (flat index over all spatial dims but the last, in `lim`'s
 * extents) that kernel tap `kpos` links to row `pos`:
 * pos*s + kpos*d - pb per dim; -1 when it falls outside. */
static int64_t linked_row(const win_geom *g, const int64_t *pos, const int64_t *kpos,
                          const int64_t *lim)
{
	int64_t row = 0;
	for (int i = 0; i < g->nsp - 1; i++) {
		int64_t j = pos[i] * g->s[i] + kpos[i] * g->d[i] - g->pb[i];
		if (j < 0 || j >= lim[i])
			return -1;
		row = row * lim[i] + j;
	}
	return row;
}

static int check_float_input(const mc_node *n, const mc_value *v, const char *what)
{
	if (!mc_dtype_is_float(v->dtype))
		return mc_node_error(n, "%s has dtype %s; expected float16, bfloat16, float32 or "
		                     "float64", what, mc_dtype_name(v->dtype));
	return 0;
}

static void *alloc_or_null(size_t count, size_t size)
{
	return calloc(count ? count : 1, size);
}

/* The valid range of the innermost loop for each tap of the kernel's last
 * dim, computed once per call: [lo[t], hi[t]). */
typedef struct {
	int64_t *lo, *hi;
} tap_ranges;

static int tap_ranges_new(const mc_node *n, const win_geom *g, int64_t lim, int64_t count,
                          tap_ranges *r)
{
	int last = g->nsp - 1;
	r->lo = alloc_or_null((size_t)g->k[last], sizeof *r->lo);
	r->hi = alloc_or_null((size_t)g->k[last], sizeof *r->hi);
	if (!r->lo || !r->hi) {
		free(r->lo);
		free(r->hi);
		return mc_node_error(n, "out of memory");
	}
	for (int64_t t = 0; t < g->k[last]; t++)
		inner_range(t * g->d[last] - g->pb[last], g->s[last], lim, count, &r->lo[t], &r->hi[t]);
	return 0;
}

static void tap_ranges_free(tap_ranges *r)
{
	free(r->lo);
	free(r->hi);
}

/* ---- Conv ---- */

static int conv_parse(mc_node *n)
{
	nn_params *p = new_params(n);
	if (parse_window(n, p, false, 1, 0) || mc_attr_int(n, "group", 1, &p->group))
		return -1;
	if (p->group < 1 || p->group >= WIN_LIMIT)
		return mc_node_error(n, "attribute 'group' is %lld; expected a positive count",
		                     (long long)p->group);
	return 0;
}

/* Checks the shapes of X, W and B (if has_bias) shared by Conv,
 * ConvTranspose and ConvInteger; `w_in` is the weight dim that counts the
 * input channels of a group (1 for Conv, 0 for ConvTranspose); *cout gets
 * the output channels. */
static int check_conv_inputs(mc_infer_ctx *c, int w_in, bool has_bias, int64_t *cout)
{
	const mc_node *n = c->node;
	const nn_params *p = n->params;
	const mc_value *x = c->in[0], *w = c->in[1];
	const mc_value *b = has_bias && c->n_in > 2 ? c->in[2] : NULL;
	char xs[256], ws[256];
	if (x->shape.rank < 3 || w->shape.rank != x->shape.rank)
		return mc_node_error(n, "X has shape %s and W %s; expected N x C x spatial dims and "
		                     "weights of the same rank", mc_shape_str(&x->shape, xs, sizeof xs),
		                     mc_shape_str(&w->shape, ws, sizeof ws));
	int64_t cin = x->shape.dims[1], groups = p->group;
	if (cin % groups)
		return mc_node_error(n, "%lld input channels cannot be split in %lld groups",
		                     (long long)cin, (long long)groups);
	if (w_in == 1) {
		*cout = w->shape.dims[0];
		if (w->shape.dims[1] != cin / groups || *cout % groups)
			return mc_node_error(n, "W has shape %s; with %lld input channels and %lld groups "
			                     "expected M x %lld x kernel with M divisible by %lld",
			                     mc_shape_str(&w->shape, ws, sizeof ws), (long long)cin,
			                     (long long)groups, (long long)(cin / groups),
			                     (long long)groups);
	} else {
		if (w->shape.dims[0] != cin || w->shape.dims[1] >= WIN_LIMIT)
			return mc_node_error(n, "W has shape %s; expected %lld (input channels) x M/group "
			                     "x kernel", mc_shape_str(&w->shape, ws, sizeof ws),
			                     (long long)cin);
		*cout = w->shape.dims[1] * groups;
	}
	if (b && (b->shape.rank != 1 || b->shape.dims[0] != *cout))
		return mc_node_error(n, "B has shape %s; expected %lld (output channels)",
		                     mc_shape_str(&b->shape, ws, sizeof ws), (long long)*cout);
	return 0;
}

/* Conv and ConvTranspose: X, W, B of one float dtype. */
static int check_float_conv(mc_infer_ctx *c)
{
	const mc_value *x = c->in[0], *w = c->in[1], *b = c->n_in > 2 ? c->in[2] : NULL;
	if (check_float_input(c->node, x, "input X"))
		return -1;
	if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
		return mc_node_error(c->node, "X, W and B must have the same dtype; got %s, %s and %s",
		                     mc_dtype_name(x->dtype), mc_dtype_name(w->dtype),
		                     b ? mc_dtype_name(b->dtype) : "none");
	return 0;
}

static void set_window_output(mc_infer_ctx *c, int i, mc_dtype t, int64_t batch,
                              int64_t channels, const win_geom *g)
{
	mc_shape s = {.rank = g->nsp + 2};
	s.dims[0] = batch;
	s.dims[1] = channels;
	for (int k = 0; k < g->nsp; k++)
		s.dims[2 + k] = g->out[k];
	mc_set_out(c, i, t, &s);
}

static int conv_infer(mc_infer_ctx *c)
{
	const mc_value *x = c->in[0];
	int64_t cout;
	win_geom g;
	if (check_float_conv(c) || check_conv_inputs(c, 1, true, &cout) ||
	    mc_win_setup(c->node, c->node->params, &x->shape, c->in[1]->shape.dims + 2, &g) ||
	    mc_win_forward(c->node, c->node->params, &g))
		return -1;
	set_window_output(c, 0, x->dtype, x->shape.dims[0], cout, &g);
	return 0;
}

/* Adds one input channel through one kernel into one output channel, row
 * by row along the last spatial dim. Conv gathers: output position o and
 * tap t read input o*s + t*d - pb. ConvTranspose scatters: input position i
 * and tap t reach output i*s + t*d - pb. Either way the rows of one side
 * (output for Conv, input for ConvTranspose) are walked in order, each
 * linked per kernel row to a row of the other side. */
static void conv_plane(const win_geom *g, const tap_ranges *r, const double *x,
                       const double *w, double *y, bool transposed)
{
	int last = g->nsp - 1;
	int64_t s = g->s[last], d = g->d[last], pb = g->pb[last];
	int64_t in_w = g->in[last], out_w = g->out[last], k_w = g->k[last];
	const int64_t *walked = transposed ? g->in : g->out;
	const int64_t *linked = transposed ? g->out : g->in;
	int64_t pos[MAX_SP] = {0};
	int64_t row = 0; /* the walked row */
	do {
		int64_t kpos[MAX_SP] = {0};
		const double *wrow = w;
		do {
			int64_t lr = linked_row(g, pos, kpos, linked);
			if (lr >= 0) {
				double *yrow = y + (transposed ? lr : row) * out_w;
				const double *xrow = x + (transposed ? row : lr) * in_w;
				for (int64_t t = 0; t < k_w; t++) {
					double wv = wrow[t];
					int64_t off = t * d - pb;
					if (transposed)
						for (int64_t j = r->lo[t]; j < r->hi[t]; j++)
							yrow[j * s + off] += wv * xrow[j];
					else
						for (int64_t j = r->lo[t]; j < r->hi[t]; j++)
							yrow[j] += wv * xrow[j * s + off];
				}
			}
			wrow += k_w;
		} while (next_index(kpos, g->k, last));
		row++;
	} while (next_index(pos, walked, last));
}

/* Output tensor from a double buffer, freeing the buffer. */
static void store(mc_tensor *t, double *buf)
{
	mc_tensor_from_double(t, buf);
	free(buf);
}

/* Y = conv(X, W) + B, or ConvTranspose's when `transposed`, on whole
 * tensors already converted to double. */
static int conv_run(const mc_node *n, const mc_shape *xs, const mc_shape *ws, const double *xd,
                    const double *wd, const double *bd, mc_tensor *y, bool transposed)
{
	const nn_params *p = n->params;
	win_geom g;
	tap_ranges r;
	if (mc_win_setup(n, p, xs, ws->dims + 2, &g) ||
	    (transposed ? mc_win_transposed(n, p, &g) : mc_win_forward(n, p, &g)))
		return -1;
	/* the taps' ranges run over the walked side (see conv_plane) */
	int last = g.nsp - 1;
	int64_t lim = transposed ? g.out[last] : g.in[last];
	int64_t count = transposed ? g.in[last] : g.out[last];
	if (tap_ranges_new(n, &g, lim, count, &r))
		return -1;
	double *yd = alloc_or_null(y->numel, sizeof *yd);
	if (!yd) {
		tap_ranges_free(&r);
		return mc_node_error(n, "out of memory");
	}
	/* W is M x C/group x kernel for Conv, C x M/group x kernel transposed */
	int64_t batch = xs->dims[0], cin = xs->dims[1];
	int64_t cg = cin / p->group, mg = transposed ? ws->dims[1] : ws->dims[0] / p->group;
	int64_t cout = mg * p->group;
	size_t in_plane = prod(g.in, g.nsp), out_plane = prod(g.out, g.nsp);
	size_t ksize = prod(g.k, g.nsp);
	for (int64_t nb = 0; nb < batch; nb++)
		for (int64_t oc = 0; oc < cout; oc++) {
			double *yp = yd + (size_t)(nb * cout + oc) * out_plane;
			for (size_t i = 0; i < out_plane; i++)
				yp[i] = bd ? bd[oc] : 0;
			int64_t first = oc / mg * cg; /* first input channel of the group */
			for (int64_t ic = first; ic < first + cg; ic++) {
				int64_t k = transposed ? ic * mg + oc % mg : oc * cg + (ic - first);
				conv_plane(&g, &r, xd + (size_t)(nb * cin + ic) * in_plane,
				           wd + (size_t)k * ksize, yp, transposed);
			}
		}
	store(y, yd);
	tap_ranges_free(&r);
	return 0;
}

/* Conv, or ConvTranspose when `transposed`. */
static int conv_eval_any(mc_eval_ctx *c, bool transposed)
{
	if (!c->out[0])
		return 0; /* output omitted: nothing to compute */
	const mc_tensor *x = c->in[0], *w = c->in[1], *b = c->n_in > 2 ? c->in[2] : NULL;
	double *xd = mc_tensor_to_double(x), *wd = mc_tensor_to_double(w);
	double *bd = b ? mc_tensor_to_double(b) : NULL;
	int rc = conv_run(c->node, &x->shape, &w->shape, xd, wd, bd, c->out[0], transposed);
	free(xd);
	free(wd);
	free(bd);
	return rc;
}

static int conv_eval(mc_eval_ctx *c)
{
	return conv_eval_any(c, false);
}

/* ---- ConvInteger: Conv of (X - x_zero_point) and (W - w_zero_point) ---- */

static bool int8_dtype(mc_dtype t)
{
	return t == MC_INT8 || t == MC_UINT8;
}

static int conv_integer_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const mc_value *x = c->in[0], *w = c->in[1];
	const mc_value *zx = c->n_in > 2 ? c->in[2] : NULL, *zw = c->n_in > 3 ? c->in[3] : NULL;
	int64_t cout;
	win_geom g;
	if (!int8_dtype(x->dtype) || !int8_dtype(w->dtype))
		return mc_node_error(n, "X and W have dtypes %s and %s; expected int8 or uint8",
		                     mc_dtype_name(x->dtype), mc_dtype_name(w->dtype));
	if (check_conv_inputs(c, 1, false, &cout) ||
	    mc_win_setup(n, n->params, &x->shape, w->shape.dims + 2, &g) ||
	    mc_win_forward(n, n->params, &g))
		return -1;
	if (zx && (zx->dtype != x->dtype || mc_numel(&zx->shape) != 1))
		return mc_node_error(n, "x_zero_point must be one %s value", mc_dtype_name(x->dtype));
	if (zw && (zw->dtype != w->dtype || zw->shape.rank > 1 ||
	           (mc_numel(&zw->shape) != 1 && (int64_t)mc_numel(&zw->shape) != cout)))
		return mc_node_error(n, "w_zero_point must be one %s value or one per output "
		                     "channel (%lld)", mc_dtype_name(w->dtype), (long long)cout);
	set_window_output(c, 0, MC_INT32, x->shape.dims[0], cout, &g);
	return 0;
}

static int conv_integer_eval(mc_eval_ctx *c)
{
	if (!c->out[0])
		return 0;
	const mc_tensor *x = c->in[0], *w = c->in[1];
	const mc_tensor *zx = c->n_in > 2 ? c->in[2] : NULL, *zw = c->n_in > 3 ? c->in[3] : NULL;
	double *xd = mc_tensor_to_double(x), *wd = mc_tensor_to_double(w);
	/* 8-bit products summed in double stay exact far beyond real sizes */
	if (zx)
		for (size_t i = 0; i < x->numel; i++)
			xd[i] -= mc_get_f(zx, 0);
	size_t per_oc = w->shape.dims[0] ? w->numel / (size_t)w->shape.dims[0] : 0;
	if (zw)
		for (size_t i = 0; i < w->numel; i++)
			wd[i] -= mc_get_f(zw, zw->numel == 1 ? 0 : i / per_oc);
	int rc = conv_run(c->node, &x->shape, &w->shape, xd, wd, NULL, c->out[0], false);
	free(xd);
	free(wd);
	return rc;
}

/* ---- ConvTranspose ---- */

static int convt_parse(mc_node *n)
{
	if (conv_parse(n))
		return -1;
	nn_params *p = n->params;
	return read_list(n, "output_padding", &p->output_padding) ||
	       read_list(n, "output_shape", &p->output_shape);
}

static int convt_infer(mc_infer_ctx *c)
{
	const mc_value *x = c->in[0];
	int64_t cout;
	win_geom g;
	if (check_float_conv(c) || check_conv_inputs(c, 0, true, &cout) ||
	    mc_win_setup(c->node, c->node->params, &x->shape, c->in[1]->shape.dims + 2, &g) ||
	    mc_win_transposed(c->node, c->node->params, &g))
		return -1;
	set_window_output(c, 0, x->dtype, x->shape.dims[0], cout, &g);
	return 0;
}

static int convt_eval(mc_eval_ctx *c)
{
	return conv_eval_any(c, true);
}

/* ---- MaxPool, AveragePool, LpPool ---- */

typedef enum { POOL_MAX, POOL_AVG, POOL_LP } pool_kind;

static int maxpool_parse(mc_node *n)
{
	nn_params *p = new_params(n);
	if (attr_since(n, "storage_order", 8) || parse_window(n, p, true, 10, 10) ||
	    mc_attr_int(n, "storage_order", 0, &p->storage_order))
		return -1;
	if (p->storage_order != 0 && p->storage_order != 1)
		return mc_node_error(n, "attribute 'storage_order' must be 0 (row major) or 1 "
		                     "(column major), got %lld", (long long)p->storage_order);
	if (n->opset < 8 && n->n_outputs > 1)
		return mc_node_error(n, "the Indices output needs opset 8 or newer");
	return 0;
}

static int avgpool_parse(mc_node *n)
{
	nn_params *p = new_params(n);
	if (attr_since(n, "count_include_pad", 7) || parse_window(n, p, true, 19, 10) ||
	    read_bool(n, "count_include_pad", &p->count_include_pad))
		return -1;
	return 0;
}

/* LpPool's and GlobalLpPool's p: a float attribute at opset 1, an int
 * from opset 2. */
static int read_p(mc_node *n, nn_params *p)
{
	if (n->opset < 2) {
		if (mc_attr_float(n, "p", 2.0, &p->p))
			return -1;
	} else {
		int64_t v;
		if (mc_attr_int(n, "p", 2, &v))
			return -1;
		p->p = (double)v;
	}
	if (!(p->p > 0) || p->p > 1e6)
		return mc_node_error(n, "attribute 'p' is %g; expected a positive order", p->p);
	return 0;
}

static int lppool_parse(mc_node *n)
{
	nn_params *p = new_params(n);
	return parse_window(n, p, true, 18, 18) || read_p(n, p);
}

static bool maxpool_dtype(mc_dtype t)
{
	return mc_dtype_is_float(t) || t == MC_INT8 || t == MC_UINT8;
}

static int pool_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const mc_value *x = c->in[0];
	win_geom g;
	if (!strcmp(n->op_type, "MaxPool") ? !maxpool_dtype(x->dtype) : !mc_dtype_is_float(x->dtype))
		return mc_node_error(n, "input X has unsupported dtype %s", mc_dtype_name(x->dtype));
	if (mc_win_setup(n, n->params, &x->shape, NULL, &g) || mc_win_forward(n, n->params, &g))
		return -1;
	set_window_output(c, 0, x->dtype, x->shape.dims[0], x->shape.dims[1], &g);
	if (c->n_out > 1)
		set_window_output(c, 1, MC_INT64, x->shape.dims[0], x->shape.dims[1], &g);
	return 0;
}

/* One window of a pool: where it starts in the input, and the taps (per
 * dim, in kernel units) that fall inside the image. */
typedef struct {
	int64_t start[MAX_SP], lo[MAX_SP], hi[MAX_SP];
	size_t taps;        /* taps inside the image */
	size_t padded_taps; /* taps inside the explicitly padded image */
} pool_window;

static void pool_window_at(const win_geom *g, const int64_t *opos, pool_window *w)
{
	w->taps = w->padded_taps = 1;
	for (int i = 0; i < g->nsp; i++) {
		int64_t lo, hi;
		w->start[i] = opos[i] * g->s[i] - g->pb[i];
		inner_range(w->start[i], g->d[i], g->in[i], g->k[i], &w->lo[i], &w->hi[i]);
		w->taps *= (size_t)(w->hi[i] - w->lo[i]);
		/* ceil mode may reach past the end padding: those taps never count */
		inner_range(w->start[i] + g->pb[i], g->d[i], g->in[i] + g->pb[i] + g->pe[i], g->k[i],
		            &lo, &hi);
		w->padded_taps *= (size_t)(hi - lo);
	}
}

/* The result of one window; *arg gets the input offset (within the
 * channel, row-major) of the maximum for MaxPool. */
static double pool_window_value(const win_geom *g, const pool_window *w, pool_kind kind,
                                double p, bool include_pad, const double *x, int64_t *arg)
{
	double acc = kind == POOL_MAX ? -INFINITY : 0;
	*arg = -1;
	if (w->taps) {
		int64_t t[MAX_SP];
		memcpy(t, w->lo, sizeof t);
		for (;;) {
			int64_t off = 0;
			for (int i = 0; i < g->nsp; i++)
				off = off * g->in[i] + w->start[i] + t[i] * g->d[i];
			double v = x[off];
			if (kind == POOL_MAX) {
				if (v > acc || *arg < 0) {
					acc = v;
					*arg = off;
				}
			} else if (kind == POOL_AVG) {
				acc += v;
			} else {
				acc += p == 2 ? v * v : p == 1 ? fabs(v) : pow(fabs(v), p);
			}
			int i = g->nsp - 1;
			while (i >= 0 && ++t[i] == w->hi[i]) {
				t[i] = w->lo[i];
				i--;
			}
			if (i < 0)
				break;
		}
	}
	if (kind == POOL_AVG)
		return acc / (double)(include_pad ? w->padded_taps : w->taps);
	if (kind == POOL_LP)
		return p == 2 ? sqrt(acc) : p == 1 ? acc : pow(acc, 1 / p);
	return acc;
}

/* MaxPool's Indices: the flat offset in the whole input; in column-major
 * storage order the spatial dims count first-dim-fastest. */
static int64_t pool_index(const win_geom *g, int64_t plane, int64_t off, bool column_major)
{
	int64_t in_plane = (int64_t)prod(g->in, g->nsp);
	if (column_major) {
		int64_t pos[MAX_SP], rest = off, col = 0, stride = 1;
		for (int i = g->nsp - 1; i >= 0; i--) {
			pos[i] = rest % g->in[i];
			rest /= g->in[i];
		}
		for (int i = 0; i < g->nsp; i++) {
			col += pos[i] * stride;
			stride *= g->in[i];
		}
		off = col;
	}
	return plane * in_plane + off;
}

static int pool_eval(mc_eval_ctx *c, pool_kind kind)
{
	const mc_node *n = c->node;
	const nn_params *p = n->params;
	const mc_tensor *x = c->in[0];
	mc_tensor *y = c->out[0], *indices = c->n_out > 1 ? c->out[1] : NULL;
	win_geom g;
	if (mc_win_setup(n, p, &x->shape, NULL, &g) || mc_win_forward(n, p, &g))
		return -1;
	int64_t planes = x->shape.dims[0] * x->shape.dims[1];
	/* Y may be omitted while Indices is wanted */
	double *yd = alloc_or_null((size_t)planes * prod(g.out, g.nsp), sizeof *yd);
	if (!yd)
		return mc_node_error(n, "out of memory");
	double *xd = mc_tensor_to_double(x);
	size_t in_plane = prod(g.in, g.nsp), k = 0;
	for (int64_t pl = 0; pl < planes; pl++) {
		int64_t opos[MAX_SP] = {0};
		do {
			pool_window w;
			int64_t arg;
			pool_window_at(&g, opos, &w);
			yd[k] = pool_window_value(&g, &w, kind, p->p, p->count_include_pad,
			                          xd + (size_t)pl * in_plane, &arg);
			if (indices)
				mc_set_i(indices, k, arg < 0 ? -1 : pool_index(&g, pl, arg,
				                                               p->storage_order == 1));
			k++;
		} while (next_index(opos, g.out, g.nsp));
	}
	if (y)
		mc_tensor_from_double(y, yd);
	free(yd);
	free(xd);
	return 0;
}

static int maxpool_eval(mc_eval_ctx *c)
{
	return pool_eval(c, POOL_MAX);
}

static int avgpool_eval(mc_eval_ctx *c)
{
	return pool_eval(c, POOL_AVG);
}

static int lppool_eval(mc_eval_ctx *c)
{
	return pool_eval(c, POOL_LP);
}

/* ---- GlobalAveragePool, GlobalMaxPool, GlobalLpPool ---- */

static int global_lppool_parse(mc_node *n)
{
	return read_p(n, new_params(n));
}

static int global_pool_infer(mc_infer_ctx *c)
{
	const mc_value *x = c->in[0];
	char buf[256];
	if (check_float_input(c->node, x, "input X"))
		return -1;
	if (x->shape.rank < 2)
		return mc_node_error(c->node, "input has shape %s; expected N x C x spatial dims",
		                     mc_shape_str(&x->shape, buf, sizeof buf));
	mc_shape s = x->shape;
	for (int i = 2; i < s.rank; i++)
		s.dims[i] = 1;
	mc_set_out(c, 0, x->dtype, &s);
	return 0;
}

static int global_pool_eval(mc_eval_ctx *c, pool_kind kind)
{
	const mc_tensor *x = c->in[0];
	mc_tensor *y = c->out[0];
	if (!y)
		return 0;
	double p = kind == POOL_LP ? ((const nn_params *)c->node->params)->p : 0;
	size_t planes = y->numel, plane = planes ? x->numel / planes : 0;
	double *xd = mc_tensor_to_double(x);
	for (size_t pl = 0; pl < planes; pl++) {
		const double *v = xd + pl * plane;
		double acc = kind == POOL_MAX ? -INFINITY : 0;
		for (size_t i = 0; i < plane; i++) {
			if (kind == POOL_MAX)
				acc = v[i] > acc || i == 0 ? v[i] : acc;
			else if (kind == POOL_AVG)
				acc += v[i];
			else
				acc += pow(fabs(v[i]), p);
		}
		if (kind == POOL_AVG)
			acc /= (double)plane;
		else if (kind == POOL_LP)
			acc = pow(acc, 1 / p);
		mc_set_f(y, pl, acc);
	}
	free(xd);
	return 0;
}

static int global_avgpool_eval(mc_eval_ctx *c)
{
	return global_pool_eval(c, POOL_AVG);
}

static int global_maxpool_eval(mc_eval_ctx *c)
{
	return global_pool_eval(c, POOL_MAX);
}

static int global_lppool_eval(mc_eval_ctx *c)
{
	return global_pool_eval(c, POOL_LP);
}

/* ---- matrix products: Gemm, MatMul, MatMulInteger ---- */

/* Integer products wrap like the int64 arithmetic of other runtimes
 * instead of overflowing (UB) in C. */
static int64_t wrap_madd(int64_t acc, int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)acc + (uint64_t)a * (uint64_t)b);
}

/* y (m x n) = a (m x k) times b (k x n), all row-major. */
static void mm_f64(const double *a, const double *b, double *y, int64_t m, int64_t k,
                   int64_t n)
{
	for (int64_t i = 0; i < m; i++) {
		double *yr = y + i * n;
		for (int64_t j = 0; j < n; j++)
			yr[j] = 0;
		for (int64_t t = 0; t < k; t++) {
			double av = a[i * k + t];
			const double *br = b + t * n;
			for (int64_t j = 0; j < n; j++)
				yr[j] += av * br[j];
		}
	}
}

static void mm_i64(const int64_t *a, const int64_t *b, int64_t *y, int64_t m, int64_t k,
                   int64_t n)
{
	for (int64_t i = 0; i < m; i++) {
		int64_t *yr = y + i * n;
		for (int64_t j = 0; j < n; j++)
			yr[j] = 0;
		for (int64_t t = 0; t < k; t++) {
			int64_t av = a[i * k + t];
			const int64_t *br = b + t * n;
			for (int64_t j = 0; j < n; j++)
				yr[j] = wrap_madd(yr[j], av, br[j]);
		}
	}
}

/* Whole tensors as int64 (exact for every integer dtype); NULL on OOM. */
static int64_t *to_int64(const mc_tensor *t)
{
	int64_t *v = alloc_or_null(t->numel, sizeof *v);
	if (v)
		for (size_t i = 0; i < t->numel; i++)
			v[i] = mc_get_i(t, i);
	return v;
}

/* A row-major rows x cols matrix of 8-byte elements (double or int64),
 * transposed into a new buffer; NULL on OOM. */
static void *transposed8(const void *src, int64_t rows, int64_t cols)
{
	const char *s = src;
	char *d = alloc_or_null((size_t)(rows * cols), 8);
	if (d)
		for (int64_t r = 0; r < rows; r++)
			for (int64_t c = 0; c < cols; c++)
				memcpy(d + (c * rows + r) * 8, s + (r * cols + c) * 8, 8);
	return d;
}

int mc_matmul_dims(const mc_node *nd, const mc_shape *a, const mc_shape *b, mm_dims *d,
                   mc_shape *out)
{
	char as[256], bs[256];
	if (a->rank < 1 || b->rank < 1)
		return mc_node_error(nd, "operands have shapes %s and %s; matrix products need rank "
		                     "1 or more", mc_shape_str(a, as, sizeof as),
		                     mc_shape_str(b, bs, sizeof bs));
	d->m = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
	d->k = a->dims[a->rank - 1];
	d->n = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
	int64_t kb = b->rank >= 2 ? b->dims[b->rank - 2] : b->dims[0];
	d->a_batch = (mc_shape){.rank = a->rank >= 2 ? a->rank - 2 : 0};
	d->b_batch = (mc_shape){.rank = b->rank >= 2 ? b->rank - 2 : 0};
	memcpy(d->a_batch.dims, a->dims, (size_t)d->a_batch.rank * sizeof *a->dims);
	memcpy(d->b_batch.dims, b->dims, (size_t)d->b_batch.rank * sizeof *b->dims);
	if (d->k != kb || !mc_broadcast(&d->a_batch, &d->b_batch, &d->batch))
		return mc_node_error(nd, "cannot multiply shapes %s and %s",
		                     mc_shape_str(a, as, sizeof as), mc_shape_str(b, bs, sizeof bs));
	*out = d->batch;
	if (a->rank >= 2)
		out->dims[out->rank++] = d->m;
	if (b->rank >= 2)
		out->dims[out->rank++] = d->n;
	return 0;
}

/* One matrix product per batch index, operands picked through their
 * broadcast strides; a, b, y are double or int64 arrays. */
static void matmul_batched(const mm_dims *d, bool ints, const void *a, const void *b, void *y)
{
	int64_t sa[MC_MAX_RANK], sb[MC_MAX_RANK];
	mc_broadcast_strides(&d->a_batch, &d->batch, sa);
	mc_broadcast_strides(&d->b_batch, &d->batch, sb);
	size_t count = mc_numel(&d->batch);
	size_t a_mat = (size_t)(d->m * d->k), b_mat = (size_t)(d->k * d->n);
	size_t y_mat = (size_t)(d->m * d->n);
	for (size_t i = 0; i < count; i++) {
		size_t rest = i, oa = 0, ob = 0;
		for (int r = d->batch.rank - 1; r >= 0; r--) {
			size_t idx = rest % (size_t)d->batch.dims[r];
			rest /= (size_t)d->batch.dims[r];
			oa += idx * (size_t)sa[r];
			ob += idx * (size_t)sb[r];
		}
		if (ints)
			mm_i64((const int64_t *)a + oa * a_mat, (const int64_t *)b + ob * b_mat,
			       (int64_t *)y + i * y_mat, d->m, d->k, d->n);
		else
			mm_f64((const double *)a + oa * a_mat, (const double *)b + ob * b_mat,
			       (double *)y + i * y_mat, d->m, d->k, d->n);
	}
}

static bool matmul_dtype(mc_dtype t)
{
	return mc_dtype_is_float(t) || t == MC_INT32 || t == MC_INT64 || t == MC_UINT32 || t == MC_UINT64;
}

static int matmul_infer(mc_infer_ctx *c)
{
	const mc_value *a = c->in[0], *b = c->in[1];
	mm_dims d;
	mc_shape out;
	if (!matmul_dtype(a->dtype) || b->dtype != a->dtype)
		return mc_node_error(c->node, "operands have dtypes %s and %s; expected the same "
		                     "float or 32/64-bit integer dtype", mc_dtype_name(a->dtype),
		                     mc_dtype_name(b->dtype));
	if (mc_matmul_dims(c->node, &a->shape, &b->shape, &d, &out))
		return -1;
	mc_set_out(c, 0, a->dtype, &out);
	return 0;
}

/* Converts both operands (to int64 or double), multiplies and stores. */
static int matmul_eval(mc_eval_ctx *c)
{
	if (!c->out[0])
		return 0; /* output omitted: nothing to compute */
	const mc_tensor *a = c->in[0], *b = c->in[1];
	mc_tensor *y = c->out[0];
	bool ints = !mc_dtype_is_float(a->dtype);
	mm_dims d;
	mc_shape out;
	if (mc_matmul_dims(c->node, &a->shape, &b->shape, &d, &out))
		return -1;
	void *av = ints ? (void *)to_int64(a) : (void *)mc_tensor_to_double(a);
	void *bv = ints ? (void *)to_int64(b) : (void *)mc_tensor_to_double(b);
	void *yv = alloc_or_null(y->numel, 8);
	int rc = 0;
	if (!av || !bv || !yv) {
		rc = mc_node_error(c->node, "out of memory");
	} else {
		matmul_batched(&d, ints, av, bv, yv);
		for (size_t i = 0; i < y->numel; i++)
			if (ints)
				mc_set_i(y, i, ((int64_t *)yv)[i]);
			else
				mc_set_f(y, i, ((double *)yv)[i]);
	}
	free(av);
	free(bv);
	free(yv);
	return rc;
}

/* A zero point of MatMulInteger: a scalar, or one value per row of A
 * (per column of B), of the operand's dtype. */
static int check_zero_point(const mc_node *n, const mc_value *zp, const mc_value *x,
                            int64_t per, const char *what)
{
	char buf[256];
	if (!zp)
		return 0;
	if (zp->dtype != x->dtype)
		return mc_node_error(n, "%s has dtype %s; expected %s like its operand", what,
		                     mc_dtype_name(zp->dtype), mc_dtype_name(x->dtype));
	size_t numel = mc_numel(&zp->shape);
	if (zp->shape.rank > 1 || (numel != 1 && (int64_t)numel != per))
		return mc_node_error(n, "%s has shape %s; only a scalar or a 1-D tensor of %lld "
		                     "values is supported", what,
		                     mc_shape_str(&zp->shape, buf, sizeof buf), (long long)per);
	return 0;
}

static int matmul_integer_infer(mc_infer_ctx *c)
{
	const mc_value *a = c->in[0], *b = c->in[1];
	const mc_value *za = c->n_in > 2 ? c->in[2] : NULL, *zb = c->n_in > 3 ? c->in[3] : NULL;
	mm_dims d;
	mc_shape out;
	if (!int8_dtype(a->dtype) || !int8_dtype(b->dtype))
		return mc_node_error(c->node, "operands have dtypes %s and %s; expected int8 or uint8",
		                     mc_dtype_name(a->dtype), mc_dtype_name(b->dtype));
	if (mc_matmul_dims(c->node, &a->shape, &b->shape, &d, &out) ||
	    check_zero_point(c->node, za, a, d.m, "a_zero_point") ||
	    check_zero_point(c->node, zb, b, d.n, "b_zero_point"))
		return -1;
	mc_set_out(c, 0, MC_INT32, &out);
	return 0;
}

/* Subtracts a zero point from a row-major tensor whose last dim has `cols`
 * entries: per tensor, per row (index m of each matrix) or per column. */
static void sub_zero_point(int64_t *v, size_t numel, const mc_tensor *zp, int64_t rows,
                           int64_t cols, bool per_row)
{
	if (!zp)
		return;
	for (size_t i = 0; i < numel; i++) {
		size_t which = zp->numel == 1 ? 0
		               : per_row      ? i / (size_t)cols % (size_t)rows
		                              : i % (size_t)cols;
		v[i] -= mc_get_i(zp, which);
	}
}

static int matmul_integer_eval(mc_eval_ctx *c)
{
	if (!c->out[0])
		return 0; /* output omitted: nothing to compute */
	const mc_tensor *a = c->in[0], *b = c->in[1];
	const mc_tensor *za = c->n_in > 2 ? c->in[2] : NULL, *zb = c->n_in > 3 ? c->in[3] : NULL;
	mc_tensor *y = c->out[0];
	mm_dims d;
	mc_shape out;
	if (mc_matmul_dims(c->node, &a->shape, &b->shape, &d, &out))
		return -1;
	int64_t *av = to_int64(a), *bv = to_int64(b), *yv = alloc_or_null(y->numel, 8);
	int rc = 0;
	if (!av || !bv || !yv) {
		rc = mc_node_error(c->node, "out of memory");
	} else {
		sub_zero_point(av, a->numel, za, d.m, d.k, true);
		sub_zero_point(bv, b->numel, zb, d.k, d.n, false);
		matmul_batched(&d, true, av, bv, yv);
		for (size_t i = 0; i < y->numel; i++)
			mc_set_i(y, i, yv[i]);
	}
	free(av);
	free(bv);
	free(yv);
	return rc;
}

static int gemm_parse(mc_node *n)
{
	nn_params *p = new_params(n);
	if (mc_attr_float(n, "alpha", 1.0, &p->alpha) || mc_attr_float(n, "beta", 1.0, &p->beta) ||
	    read_bool(n, "transA", &p->trans_a) || read_bool(n, "transB", &p->trans_b) ||
	    read_bool(n, "broadcast", &p->broadcast))
		return -1;
	if (n->opset >= 7 && mc_attr_find(n, "broadcast"))
		return mc_node_error(n, "attribute 'broadcast' was removed in opset 7");
	if (n->opset < 11 && (n->n_inputs < 3 || n->inputs[2] < 0))
		return mc_node_error(n, "input C is required before opset 11");
	return 0;
}

/* M, K, N of A' * B' and the checks of Gemm's shapes: A and B are
 * matrices, C broadcasts to M x N in one direction. */
int mc_gemm_dims(const mc_node *n, const nn_params *p, const mc_shape *a, const mc_shape *b,
                 const mc_shape *cs, int64_t mkn[3])
{
	char as[256], bs[256];
	if (a->rank != 2 || b->rank != 2)
		return mc_node_error(n, "A has shape %s and B %s; expected matrices",
		                     mc_shape_str(a, as, sizeof as), mc_shape_str(b, bs, sizeof bs));
	int64_t k_b = b->dims[p->trans_b ? 1 : 0];
	mkn[0] = a->dims[p->trans_a ? 1 : 0];
	mkn[1] = a->dims[p->trans_a ? 0 : 1];
	mkn[2] = b->dims[p->trans_b ? 0 : 1];
	if (mkn[1] != k_b)
		return mc_node_error(n, "cannot multiply A %s (transA=%d) by B %s (transB=%d)",
		                     mc_shape_str(a, as, sizeof as), p->trans_a,
		                     mc_shape_str(b, bs, sizeof bs), p->trans_b);
	if (!cs)
		return 0;
	bool ok = cs->rank <= 2;
	int64_t target[2] = {mkn[0], mkn[2]}; /* C's dims align to the right */
	for (int i = 0; ok && i < cs->rank; i++) {
		int64_t want = target[i + 2 - cs->rank];
		ok = cs->dims[i] == want || cs->dims[i] == 1;
	}
	/* before opset 7, C broadcasts only when the broadcast attribute says so */
	if (ok && n->opset < 7 && !p->broadcast)
		ok = cs->rank == 2 && cs->dims[0] == mkn[0] && cs->dims[1] == mkn[2];
	if (!ok)
		return mc_node_error(n, "C has shape %s; it must broadcast to %lld x %lld%s",
		                     mc_shape_str(cs, as, sizeof as), (long long)mkn[0],
		                     (long long)mkn[2],
		                     n->opset < 7 && !p->broadcast ? " without broadcasting "
		                                                    "(broadcast=0)" : "");
	return 0;
}

static int gemm_infer(mc_infer_ctx *c)
{
	const mc_value *a = c->in[0], *b = c->in[1], *cv = c->n_in > 2 ? c->in[2] : NULL;
	int64_t mkn[3];
	if (!matmul_dtype(a->dtype) || b->dtype != a->dtype || (cv && cv->dtype != a->dtype))
		return mc_node_error(c->node, "A, B, C have dtypes %s, %s, %s; expected the same float "
		                     "or 32/64-bit integer dtype", mc_dtype_name(a->dtype),
		                     mc_dtype_name(b->dtype), cv ? mc_dtype_name(cv->dtype) : "none");
	if (mc_gemm_dims(c->node, c->node->params, &a->shape, &b->shape, cv ? &cv->shape : NULL, mkn))
		return -1;
	mc_shape out = {.rank = 2, .dims = {mkn[0], mkn[2]}};
	mc_set_out(c, 0, a->dtype, &out);
	return 0;
}

/* Loads a Gemm operand as a row-major matrix (transposing if asked) of
 * doubles or int64. */
static void *gemm_operand(const mc_tensor *t, bool ints, bool trans)
{
	void *v = ints ? (void *)to_int64(t) : (void *)mc_tensor_to_double(t);
	if (v && trans) {
		void *tv = transposed8(v, t->shape.dims[0], t->shape.dims[1]);
		free(v);
		v = tv;
	}
	return v;
}

/* y = alpha * A'B' + beta * C, C read through its broadcast strides.
 * Integers stay exact in int64 while alpha and beta are 1. */
static void gemm_epilogue(const nn_params *p, const mc_tensor *ct, bool ints, const void *prod,
                          mc_tensor *y)
{
	int64_t cs[MC_MAX_RANK] = {0, 0};
	int64_t cols = y->shape.dims[1];
	if (ct)
		mc_broadcast_strides(&ct->shape, &y->shape, cs);
	bool exact = ints && p->alpha == 1 && p->beta == 1;
	for (size_t i = 0; i < y->numel; i++) {
		size_t ci = (size_t)((int64_t)i / cols * cs[0] + (int64_t)i % cols * cs[1]);
		if (exact) {
			int64_t v = ((const int64_t *)prod)[i];
			mc_set_i(y, i, ct ? wrap_madd(v, mc_get_i(ct, ci), 1) : v);
			continue;
		}
		double v = ints ? (double)((const int64_t *)prod)[i] : ((const double *)prod)[i];
		v *= p->alpha;
		if (ct && p->beta != 0)
			v += p->beta * mc_get_f(ct, ci);
		mc_set_f(y, i, v);
	}
}

static int gemm_eval(mc_eval_ctx *c)
{
	if (!c->out[0])
		return 0; /* output omitted: nothing to compute */
	const nn_params *p = c->node->params;
	const mc_tensor *a = c->in[0], *b = c->in[1], *ct = c->n_in > 2 ? c->in[2] : NULL;
	mc_tensor *y = c->out[0];
	bool ints = !mc_dtype_is_float(a->dtype);
	int64_t mkn[3];
	if (mc_gemm_dims(c->node, p, &a->shape, &b->shape, ct ? &ct->shape : NULL, mkn))
		return -1;
	void *av = gemm_operand(a, ints, p->trans_a), *bv = gemm_operand(b, ints, p->trans_b);
	void *prod = alloc_or_null(y->numel, 8);
	int rc = 0;
	if (!av || !bv || !prod) {
		rc = mc_node_error(c->node, "out of memory");
	} else {
		if (ints)
			mm_i64(av, bv, prod, mkn[0], mkn[1], mkn[2]);
		else
			mm_f64(av, bv, prod, mkn[0], mkn[1], mkn[2]);
		gemm_epilogue(p, ct, ints, prod, y);
	}
	free(av);
	free(bv);
	free(prod);
	return rc;
}

/* ---- registry ---- */

#define WINDOW_OP(var, opname, nin, nout, parse_fn, infer_fn, eval_fn)                       \
	static const mc_op var = {                                                         \
		.name = opname, .min_opset = 1, .max_opset = MC_MAX_OPSET,                 \
		.min_inputs = 1, .max_inputs = nin, .min_outputs = 1, .max_outputs = nout, \
		.parse = parse_fn, .infer = infer_fn, .eval = eval_fn,                     \
	}

static const mc_op op_conv = {
	.name = "Conv", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
	.parse = conv_parse, .infer = conv_infer, .eval = conv_eval,
};
static const mc_op op_conv_integer = {
	.name = "ConvInteger", .min_opset = 10, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
	.parse = conv_parse, .infer = conv_integer_infer, .eval = conv_integer_eval,
};
static const mc_op op_conv_transpose = {
	.name = "ConvTranspose", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
	.parse = convt_parse, .infer = convt_infer, .eval = convt_eval,
};
WINDOW_OP(op_maxpool, "MaxPool", 1, 2, maxpool_parse, pool_infer, maxpool_eval);
WINDOW_OP(op_avgpool, "AveragePool", 1, 1, avgpool_parse, pool_infer, avgpool_eval);
WINDOW_OP(op_lppool, "LpPool", 1, 1, lppool_parse, pool_infer, lppool_eval);
WINDOW_OP(op_global_avgpool, "GlobalAveragePool", 1, 1, NULL, global_pool_infer,
          global_avgpool_eval);
WINDOW_OP(op_global_maxpool, "GlobalMaxPool", 1, 1, NULL, global_pool_infer,
          global_maxpool_eval);
WINDOW_OP(op_global_lppool, "GlobalLpPool", 1, 1, global_lppool_parse, global_pool_infer,
          global_lppool_eval);
static const mc_op op_gemm = {
	.name = "Gemm", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
	.parse = gemm_parse, .infer = gemm_infer, .eval = gemm_eval,
};
static const mc_op op_matmul = {
	.name = "MatMul", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
	.infer = matmul_infer, .eval = matmul_eval,
};
static const mc_op op_matmul_integer = {
	.name = "MatMulInteger", .min_opset = 10, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
	.infer = matmul_integer_infer, .eval = matmul_integer_eval,
};

const mc_op *const mc_ops_nn[] = {
	&op_conv, &op_conv_integer, &op_conv_transpose, &op_maxpool, &op_avgpool, &op_lppool,
	&op_global_avgpool, &op_global_maxpool, &op_global_lppool,
	&op_gemm, &op_matmul, &op_matmul_integer,
	NULL,
};
