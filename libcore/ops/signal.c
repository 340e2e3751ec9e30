/* Signal processing for audio front ends: DFT, STFT, the Hann / Hamming /
 * Blackman windows, MelWeightMatrix, and CumProd.
 *
 * Reference implementations favour clarity: the DFT is the plain O(N^2) sum
 * in double, with twiddle factors from a table indexed by (k*n) mod N so
 * that every angle is reduced exactly. Complex tensors are real tensors
 * whose last dimension is 2 (real, imaginary); a last dimension of 1 holds
 * a real signal. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "signal.h"

/* ==== shared helpers ==== */

/* A scalar (or one-element 1-D) integer tensor. */
static int tensor_int_scalar(const mc_node *n, const mc_tensor *t, const char *what,
                             int64_t *out)
{
	if (!mc_dtype_is_int(t->dtype) || t->shape.rank > 1 || t->numel != 1)
		return mc_node_error(n, "%s must be an integer scalar, got %s with %zu elements", what,
		                     mc_dtype_name(t->dtype), t->numel);
	*out = mc_get_i(t, 0);
	return 0;
}

/* The same for a float scalar. */
static int tensor_float_scalar(const mc_node *n, const mc_tensor *t, const char *what,
                               double *out)
{
	if (!mc_dtype_is_float(t->dtype) || t->shape.rank > 1 || t->numel != 1)
		return mc_node_error(n, "%s must be a floating-point scalar, got %s with %zu elements",
		                     what, mc_dtype_name(t->dtype), t->numel);
	*out = mc_get_f(t, 0);
	return 0;
}

/* Checks an integer-scalar input's type; when *known is set on return the
 * value was known at compile time and is in *out. */
static int peek_int_scalar(mc_infer_ctx *c, int k, const char *what, int64_t *out, bool *known)
{
	const mc_value *v = mc_opt_in(c, k);
	*known = false;
	if (!mc_dtype_is_int(v->dtype) || v->shape.rank > 1 ||
	    (v->shape.rank == 1 && v->shape.dims[0] != 1))
		return mc_node_error(c->node, "%s ('%s') must be an integer scalar, got %s of rank %d",
		                     what, v->name, mc_dtype_name(v->dtype), v->shape.rank);
	if (!v->konst)
		return 0;
	*known = true;
	return tensor_int_scalar(c->node, v->konst, what, out);
}

/* An integer-scalar input that sets an output shape: it must be constant. */
static int const_int_scalar(mc_infer_ctx *c, int k, const char *what, int64_t *out)
{
	bool known;
	if (peek_int_scalar(c, k, what, out, &known))
		return -1;
	if (!known)
		return mc_node_error(c->node, "%s ('%s') must be known at compile time (it sets the "
		                     "output shape); pin the graph inputs it depends on (--bind)",
		                     what, mc_opt_in(c, k)->name);
	return 0;
}

/* output_datatype of the window ops and MelWeightMatrix: a numeric dtype. */
static int parse_output_datatype(mc_node *n, mc_dtype *out)
{
	int64_t t;
	if (mc_attr_int(n, "output_datatype", MC_FLOAT, &t))
		return -1;
	if (t < 0 || t > 255 || !mc_dtype_supported((mc_dtype)t) ||
	    !(mc_dtype_is_float((mc_dtype)t) || mc_dtype_is_int((mc_dtype)t)))
		return mc_node_error(n, "output_datatype %lld is not a supported numeric dtype",
		                     (long long)t);
	*out = (mc_dtype)t;
	return 0;
}

/* ==== the discrete Fourier transform ==== */

/* cos and sin of 2*pi*m/len for m in [0, len). */
typedef struct {
	size_t len;
	double *cosv, *sinv;
} twiddles;

static int twiddles_init(const mc_node *n, twiddles *tw, size_t len)
{
	tw->len = len;
	tw->cosv = mc_alloc_array(n, len, sizeof *tw->cosv);
	tw->sinv = tw->cosv ? mc_alloc_array(n, len, sizeof *tw->sinv) : NULL;
	if (!tw->sinv)
		return -1;
	for (size_t m = 0; m < len; m++) {
		double angle = 2.0 * M_PI * (double)m / (double)len;
		tw->cosv[m] = cos(angle);
		tw->sinv[m] = sin(angle);
	}
	return 0;
}

static void twiddles_free(twiddles *tw)
{
	free(tw->cosv);
	free(tw->sinv);
}

/* out[k] = sum over n < min(avail, len) of in[n] * exp(sign * 2*pi*i*k*n/len)
 * for k < n_out: `avail` samples are zero-padded or cut to the transform
 * length len = tw->len. */
static void dft_line(const twiddles *tw, int sign, const double *re, const double *im,
                     size_t avail, size_t n_out, double *out_re, double *out_im)
{
	size_t len = tw->len, used = avail < len ? avail : len;
	for (size_t k = 0; k < n_out; k++) {
		double sum_re = 0, sum_im = 0;
		size_t step = k % len, m = 0; /* m = k*n mod len */
		for (size_t t = 0; t < used; t++) {
			double c = tw->cosv[m], s = sign * tw->sinv[m];
			sum_re += re[t] * c - im[t] * s;
			sum_im += re[t] * s + im[t] * c;
			m += step;
			if (m >= len)
				m -= len;
		}
		out_re[k] = sum_re;
		out_im[k] = sum_im;
	}
}

/* ==== DFT ==== */

static int dft_parse(mc_node *n)
{
	int64_t inverse, onesided, axis = 1;
	if (mc_attr_int(n, "inverse", 0, &inverse) || mc_attr_int(n, "onesided", 0, &onesided))
		return -1;
	if (n->opset < 20 && mc_attr_int(n, "axis", 1, &axis))
		return -1;
	if ((inverse != 0 && inverse != 1) || (onesided != 0 && onesided != 1))
		return mc_node_error(n, "inverse and onesided must be 0 or 1, got %lld and %lld",
		                     (long long)inverse, (long long)onesided);
	dft_params *p = mc_params_new(n, sizeof *p);
	p->inverse = inverse;
	p->onesided = onesided;
	p->axis_attr = axis;
	return 0;
}

/* Everything the transform needs, worked out from shapes and constants. */
typedef struct {
	int axis;
	size_t outer, n_in, inner, comp_in; /* input as outer x n_in x inner x comp_in */
	size_t len;                         /* transform length (dft_length) */
	size_t n_out, comp_out;             /* output's axis length and last dim */
	bool irfft;                         /* onesided inverse: half spectrum in, real out */
} dft_plan;

/* The axis may be negative (counted from the back) but never names the
 * last dimension, which holds the real/imaginary pair. */
static int dft_axis(const mc_node *n, int64_t axis, int rank, int *out)
{
	if (axis < -(int64_t)rank || axis > (int64_t)rank - 2 || axis == -1)
		return mc_node_error(n, "axis %lld is out of range for an input of rank %d: it must "
		                     "be in [%d, -2] or [0, %d] (the last dimension holds the "
		                     "real/imaginary pair)",
		                     (long long)axis, rank, -rank, rank - 2);
	*out = (int)(axis < 0 ? axis + rank : axis);
	return 0;
}

static int dft_make_plan(const mc_node *n, const mc_shape *s, int64_t axis, bool has_length,
                         int64_t length, dft_plan *plan)
{
	const dft_params *p = n->params;
	char buf[256];
	if (s->rank < 2 || (s->dims[s->rank - 1] != 1 && s->dims[s->rank - 1] != 2))
		return mc_node_error(n, "input has shape %s; expected [..., 1] (real) or [..., 2] "
		                     "(complex)", mc_shape_str(s, buf, sizeof buf));
	memset(plan, 0, sizeof *plan);
	if (dft_axis(n, axis, s->rank, &plan->axis))
		return -1;
	plan->outer = plan->inner = 1;
	for (int d = 0; d < s->rank - 1; d++) {
		if (d < plan->axis)
			plan->outer *= (size_t)s->dims[d];
		else if (d > plan->axis)
			plan->inner *= (size_t)s->dims[d];
	}
	plan->n_in = (size_t)s->dims[plan->axis];
	plan->comp_in = (size_t)s->dims[s->rank - 1];
	plan->irfft = p->inverse && p->onesided;
	bool complex_in = plan->comp_in == 2;
	if (plan->irfft && !complex_in)
		return mc_node_error(n, "onesided inverse DFT (IRFFT) needs a complex input "
		                     "(last dimension 2)");
	if (p->onesided && !p->inverse && complex_in)
		return mc_node_error(n, "onesided forward DFT (RFFT) needs a real input "
		                     "(last dimension 1)");
	if (!has_length)
		length = plan->irfft ? 2 * ((int64_t)plan->n_in - 1) : (int64_t)plan->n_in;
	if (length < 1 && has_length)
		return mc_node_error(n, "dft_length must be positive, got %lld", (long long)length);
	if (length < 1)
		return mc_node_error(n, "the axis holds %zu values, which leaves a transform of "
		                     "length %lld; give a positive dft_length", plan->n_in,
		                     (long long)length);
	plan->len = (size_t)length;
	plan->n_out = p->onesided && !p->inverse ? plan->len / 2 + 1 : plan->len;
	plan->comp_out = plan->irfft ? 1 : 2;
	return 0;
}

static int dft_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const dft_params *p = n->params;
	const mc_value *x = c->in[0];
	int64_t axis = p->axis_attr, length = 0;
	bool has_length = mc_opt_in(c, 1) != NULL;
	if (!mc_dtype_is_float(x->dtype))
		return mc_node_error(n, "input has dtype %s; a floating-point tensor is expected",
		                     mc_dtype_name(x->dtype));
	if (has_length && const_int_scalar(c, 1, "dft_length (input 1)", &length))
		return -1;
	if (n->opset >= 20)
		axis = -2;
	if (n->opset >= 20 && mc_opt_in(c, 2) && const_int_scalar(c, 2, "axis (input 2)", &axis))
		return -1;
	dft_plan plan;
	if (dft_make_plan(n, &x->shape, axis, has_length, length, &plan))
		return -1;
	mc_shape s = x->shape;
	s.dims[plan.axis] = (int64_t)plan.n_out;
	s.dims[s.rank - 1] = (int64_t)plan.comp_out;
	mc_set_out(c, 0, x->dtype, &s);
	return 0;
}

/* Rebuilds the full spectrum of a real signal from its first half:
 * X[k] = conj(X[len-k]); bins the input lacks are zero. */
static void hermitian_extend(size_t len, size_t n_half, const double *half_re,
                             const double *half_im, double *re, double *im)
{
	for (size_t k = 0; k < len; k++) {
		bool mirrored = k > len / 2;
		size_t src = mirrored ? len - k : k;
		re[k] = src < n_half ? half_re[src] : 0;
		im[k] = src < n_half ? (mirrored ? -half_im[src] : half_im[src]) : 0;
	}
}

static void dft_run(const dft_plan *plan, bool inverse, const twiddles *tw, const mc_tensor *x,
                    mc_tensor *y, double *line_re, double *line_im, double *res_re,
                    double *res_im, double *full_re, double *full_im)
{
	double scale = inverse ? 1.0 / (double)plan->len : 1.0;
	int sign = inverse ? 1 : -1;
	for (size_t o = 0; o < plan->outer; o++)
		for (size_t i = 0; i < plan->inner; i++) {
			for (size_t t = 0; t < plan->n_in; t++) {
				size_t at = ((o * plan->n_in + t) * plan->inner + i) * plan->comp_in;
				line_re[t] = mc_get_f(x, at);
				line_im[t] = plan->comp_in == 2 ? mc_get_f(x, at + 1) : 0;
			}
			if (plan->irfft) {
				hermitian_extend(plan->len, plan->n_in, line_re, line_im, full_re, full_im);
				dft_line(tw, sign, full_re, full_im, plan->len, plan->n_out, res_re, res_im);
			} else {
				dft_line(tw, sign, line_re, line_im, plan->n_in, plan->n_out, res_re, res_im);
			}
			for (size_t k = 0; k < plan->n_out; k++) {
				size_t at = ((o * plan->n_out + k) * plan->inner + i) * plan->comp_out;
				mc_set_f(y, at, res_re[k] * scale);
				if (plan->comp_out == 2)
					mc_set_f(y, at + 1, res_im[k] * scale);
			}
		}
}

static int dft_eval(mc_eval_ctx *c)
{
	const mc_node *n = c->node;
	const dft_params *p = n->params;
	int64_t axis = n->opset >= 20 ? -2 : p->axis_attr, length = 0;
	const mc_tensor *len_t = mc_opt_tensor(c, 1);
	const mc_tensor *axis_t = n->opset >= 20 ? mc_opt_tensor(c, 2) : NULL;
	if (len_t && tensor_int_scalar(n, len_t, "dft_length (input 1)", &length))
		return -1;
	if (axis_t && tensor_int_scalar(n, axis_t, "axis (input 2)", &axis))
		return -1;
	dft_plan plan;
	if (dft_make_plan(n, &c->in[0]->shape, axis, len_t != NULL, length, &plan))
		return -1;
	if ((size_t)c->out[0]->shape.dims[plan.axis] != plan.n_out)
		return mc_node_error(n, "dft_length or axis differs from the one seen at compile time");
	twiddles tw;
	size_t line = plan.n_in > plan.len ? plan.n_in : plan.len;
	double *buf = NULL;
	int rc = -1;
	if (twiddles_init(n, &tw, plan.len))
		goto done;
	buf = mc_alloc_array(n, line, 6 * sizeof *buf);
	if (!buf)
		goto done;
	dft_run(&plan, p->inverse, &tw, c->in[0], c->out[0], buf, buf + line, buf + 2 * line,
	        buf + 3 * line, buf + 4 * line, buf + 5 * line);
	rc = 0;
done:
	free(buf);
	twiddles_free(&tw);
	return rc;
}

static const mc_op op_dft17 = {
	.name = "DFT", .min_opset = 17, .max_opset = 19,
	.min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
	.parse = dft_parse, .infer = dft_infer, .eval = dft_eval,
};

static const mc_op op_dft20 = {
	.name = "DFT", .min_opset = 20, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
	.parse = dft_parse, .infer = dft_infer, .eval = dft_eval,
};

/* ==== STFT ==== */

static int stft_parse(mc_node *n)
{
	int64_t onesided;
	if (mc_attr_int(n, "onesided", 1, &onesided))
		return -1;
	if (onesided != 0 && onesided != 1)
		return mc_node_error(n, "onesided must be 0 or 1, got %lld", (long long)onesided);
	stft_params *p = mc_params_new(n, sizeof *p);
	p->onesided = onesided;
	return 0;
}

typedef struct {
	size_t batch, signal_len, comp; /* signal: batch x signal_len x comp */
	size_t step, frame_len, frames, bins;
} stft_plan;

/* frame_step and frame_length are already read; window_len is 0 when the
 * window is omitted, frame_len 0 when frame_length is. */
static int stft_make_plan(const mc_node *n, const mc_shape *s, int64_t step, int64_t window_len,
                          int64_t frame_len, stft_plan *plan)
{
	const stft_params *p = n->params;
	char buf[256];
	if (s->rank != 3 || (s->dims[2] != 1 && s->dims[2] != 2))
		return mc_node_error(n, "signal has shape %s; expected [batch, length, 1] (real) or "
		                     "[batch, length, 2] (complex)", mc_shape_str(s, buf, sizeof buf));
	memset(plan, 0, sizeof *plan);
	plan->batch = (size_t)s->dims[0];
	plan->signal_len = (size_t)s->dims[1];
	plan->comp = (size_t)s->dims[2];
	if (plan->comp == 2 && p->onesided)
		return mc_node_error(n, "a onesided STFT needs a real signal (last dimension 1); set "
		                     "onesided=0 for a complex one");
	if (step < 1)
		return mc_node_error(n, "frame_step must be positive, got %lld", (long long)step);
	if (!frame_len)
		frame_len = window_len ? window_len : s->dims[1];
	else if (window_len && window_len != frame_len)
		return mc_node_error(n, "window has %lld samples but frame_length is %lld",
		                     (long long)window_len, (long long)frame_len);
	if (frame_len < 1 || frame_len > s->dims[1])
		return mc_node_error(n, "frame length %lld must be in [1, %lld] (the signal length)",
		                     (long long)frame_len, (long long)s->dims[1]);
	plan->step = (size_t)step;
	plan->frame_len = (size_t)frame_len;
	plan->frames = 1 + (plan->signal_len - plan->frame_len) / plan->step;
	plan->bins = p->onesided ? plan->frame_len / 2 + 1 : plan->frame_len;
	return 0;
}

static int stft_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const mc_value *x = c->in[0], *window = mc_opt_in(c, 2);
	int64_t step, frame_len = 0, window_len = 0;
	if (!mc_dtype_is_float(x->dtype))
		return mc_node_error(n, "signal has dtype %s; a floating-point tensor is expected",
		                     mc_dtype_name(x->dtype));
	if (const_int_scalar(c, 1, "frame_step (input 1)", &step))
		return -1;
	if (mc_opt_in(c, 3) && const_int_scalar(c, 3, "frame_length (input 3)", &frame_len))
		return -1;
	if (mc_opt_in(c, 3) && frame_len < 1)
		return mc_node_error(n, "frame_length must be positive, got %lld", (long long)frame_len);
	if (window) {
		if (window->dtype != x->dtype || window->shape.rank != 1)
			return mc_node_error(n, "window must be a 1-D %s tensor, got %s of rank %d",
			                     mc_dtype_name(x->dtype), mc_dtype_name(window->dtype),
			                     window->shape.rank);
		window_len = window->shape.dims[0];
		if (window_len < 1)
			return mc_node_error(n, "window must not be empty");
	}
	stft_plan plan;
	if (stft_make_plan(n, &x->shape, step, window_len, frame_len, &plan))
		return -1;
	mc_shape s = {.rank = 4, .dims = {(int64_t)plan.batch, (int64_t)plan.frames,
	                                  (int64_t)plan.bins, 2}};
	mc_set_out(c, 0, x->dtype, &s);
	return 0;
}

static void stft_run(const stft_plan *plan, const twiddles *tw, const mc_tensor *x,
                     const mc_tensor *window, mc_tensor *y, double *re, double *im,
                     double *res_re, double *res_im)
{
	for (size_t b = 0; b < plan->batch; b++)
		for (size_t f = 0; f < plan->frames; f++) {
			for (size_t t = 0; t < plan->frame_len; t++) {
				size_t at = (b * plan->signal_len + f * plan->step + t) * plan->comp;
				double w = window ? mc_get_f(window, t) : 1.0;
				re[t] = w * mc_get_f(x, at);
				im[t] = plan->comp == 2 ? w * mc_get_f(x, at + 1) : 0;
			}
			dft_line(tw, -1, re, im, plan->frame_len, plan->bins, res_re, res_im);
			for (size_t k = 0; k < plan->bins; k++) {
				size_t at = ((b * plan->frames + f) * plan->bins + k) * 2;
				mc_set_f(y, at, res_re[k]);
				mc_set_f(y, at + 1, res_im[k]);
			}
		}
}

static int stft_eval(mc_eval_ctx *c)
{
	const mc_node *n = c->node;
	const mc_tensor *window = mc_opt_tensor(c, 2), *frame_t = mc_opt_tensor(c, 3);
	int64_t step, frame_len = 0;
	if (tensor_int_scalar(n, c->in[1], "frame_step (input 1)", &step))
		return -1;
	if (frame_t && tensor_int_scalar(n, frame_t, "frame_length (input 3)", &frame_len))
		return -1;
	if (frame_t && frame_len < 1)
		return mc_node_error(n, "frame_length must be positive, got %lld", (long long)frame_len);
	stft_plan plan;
	if (stft_make_plan(n, &c->in[0]->shape, step, window ? (int64_t)window->numel : 0,
	                   frame_len, &plan))
		return -1;
	if ((size_t)c->out[0]->shape.dims[1] != plan.frames ||
	    (size_t)c->out[0]->shape.dims[2] != plan.bins)
		return mc_node_error(n, "frame_step or frame_length differs from the one seen at "
		                     "compile time");
	twiddles tw;
	double *buf = NULL;
	int rc = -1;
	size_t len = plan.frame_len;
	if (twiddles_init(n, &tw, len))
		goto done;
	buf = mc_alloc_array(n, len, 4 * sizeof *buf);
	if (!buf)
		goto done;
	stft_run(&plan, &tw, c->in[0], window, c->out[0], buf, buf + len, buf + 2 * len,
	         buf + 3 * len);
	rc = 0;
done:
	free(buf);
	twiddles_free(&tw);
	return rc;
}

static const mc_op op_stft = {
	.name = "STFT", .min_opset = 17, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
	.parse = stft_parse, .infer = stft_infer, .eval = stft_eval,
};

/* ==== HannWindow, HammingWindow, BlackmanWindow ==== */

/* Generalised cosine windows:
 * w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N),
 * with N = size when periodic, size - 1 when symmetric. */
static int window_parse(mc_node *n, double a0, double a1, double a2)
{
	int64_t periodic;
	mc_dtype out_dtype;
	if (mc_attr_int(n, "periodic", 1, &periodic) || parse_output_datatype(n, &out_dtype))
		return -1;
	if (periodic != 0 && periodic != 1)
		return mc_node_error(n, "periodic must be 0 or 1, got %lld", (long long)periodic);
	window_params *p = mc_params_new(n, sizeof *p);
	p->periodic = periodic;
	p->out_dtype = out_dtype;
	p->a0 = a0;
	p->a1 = a1;
	p->a2 = a2;
	return 0;
}

static int hann_parse(mc_node *n)
{
	return window_parse(n, 0.5, 0.5, 0);
}

static int hamming_parse(mc_node *n)
{
	return window_parse(n, 25.0 / 46.0, 21.0 / 46.0, 0);
}

static int blackman_parse(mc_node *n)
{
	return window_parse(n, 0.42, 0.5, 0.08);
}

static int window_infer(mc_infer_ctx *c)
{
	const window_params *p = c->node->params;
	int64_t size;
	if (const_int_scalar(c, 0, "size (input 0)", &size))
		return -1;
	if (size < 0)
		return mc_node_error(c->node, "size must not be negative, got %lld", (long long)size);
	mc_shape s = {.rank = 1, .dims = {size}};
	mc_set_out(c, 0, p->out_dtype, &s);
	return 0;
}

static int window_eval(mc_eval_ctx *c)
{
	const window_params *p = c->node->params;
	mc_tensor *y = c->out[0];
	size_t size = y->numel;
	double period = p->periodic ? (double)size : (double)size - 1;
	for (size_t i = 0; i < size; i++) {
		/* A one-sample symmetric window has period 0: its single sample is
		 * the window's peak, 1, as numpy and PyTorch define it. */
		double x = period > 0 ? 2.0 * M_PI * (double)i / period : 0;
		double w = period > 0 ? p->a0 - p->a1 * cos(x) + p->a2 * cos(2 * x) : 1.0;
		mc_set_f(y, i, w);
	}
	return 0;
}

#define WINDOW_OP(var, op_name, parse_fn)                                                  \
	static const mc_op var = {                                                          \
		.name = op_name, .min_opset = 17, .max_opset = MC_MAX_OPSET,                \
		.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,       \
		.parse = parse_fn, .infer = window_infer, .eval = window_eval,              \
	}

WINDOW_OP(op_hann, "HannWindow", hann_parse);
WINDOW_OP(op_hamming, "HammingWindow", hamming_parse);
WINDOW_OP(op_blackman, "BlackmanWindow", blackman_parse);

/* ==== MelWeightMatrix ==== */

/* Follows the ONNX reference step by step: num_mel_bins + 2 points evenly
 * spaced on the mel scale (mel = 2595 log10(1 + hz/700)) between the two
 * edges, mapped back to hertz and to DFT bins with floor((dft_length + 1) *
 * hz / sample_rate); each mel bin is a triangle over three consecutive
 * points. */

typedef struct {
	mc_dtype out_dtype;
} mel_params;

static int mel_parse(mc_node *n)
{
	mel_params *p;
	mc_dtype out_dtype;
	if (parse_output_datatype(n, &out_dtype))
		return -1;
	p = mc_params_new(n, sizeof *p);
	p->out_dtype = out_dtype;
	return 0;
}

static int mel_check_edge(const mc_node *n, const mc_value *v, const char *what)
{
	if (!mc_dtype_is_float(v->dtype) || v->shape.rank > 1 ||
	    (v->shape.rank == 1 && v->shape.dims[0] != 1))
		return mc_node_error(n, "%s ('%s') must be a floating-point scalar, got %s of rank %d",
		                     what, v->name, mc_dtype_name(v->dtype), v->shape.rank);
	return 0;
}

static int mel_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const mel_params *p = n->params;
	int64_t mel_bins, dft_length, sample_rate;
	bool known;
	if (const_int_scalar(c, 0, "num_mel_bins (input 0)", &mel_bins) ||
	    const_int_scalar(c, 1, "dft_length (input 1)", &dft_length) ||
	    peek_int_scalar(c, 2, "sample_rate (input 2)", &sample_rate, &known) ||
	    mel_check_edge(n, c->in[3], "lower_edge_hertz (input 3)") ||
	    mel_check_edge(n, c->in[4], "upper_edge_hertz (input 4)"))
		return -1;
	if (mel_bins < 0)
		return mc_node_error(n, "num_mel_bins must not be negative, got %lld",
		                     (long long)mel_bins);
	if (dft_length < 1)
		return mc_node_error(n, "dft_length must be positive, got %lld", (long long)dft_length);
	if (known && sample_rate < 1)
		return mc_node_error(n, "sample_rate must be positive, got %lld",
		                     (long long)sample_rate);
	mc_shape s = {.rank = 2, .dims = {dft_length / 2 + 1, mel_bins}};
	mc_set_out(c, 0, p->out_dtype, &s);
	return 0;
}

/* numpy's float floor division a // b (as CPython computes it). */
static double floor_div(double a, double b)
{
	double mod = fmod(a, b), div = (a - mod) / b;
	if (mod != 0 && ((b < 0) != (mod < 0)))
		div -= 1.0;
	if (div == 0)
		return copysign(0.0, a / b);
	double floordiv = floor(div);
	if (div - floordiv > 0.5)
		floordiv += 1.0;
	return floordiv;
}

/* The DFT bin of each of the num_mel_bins + 2 triangle corners. */
static int mel_corner_bins(const mc_node *n, int64_t mel_bins, int64_t dft_length,
                           int64_t sample_rate, double lower_hz, double upper_hz,
                           int64_t *bins)
{
	double low_mel = 2595.0 * log10(1.0 + lower_hz / 700.0);
	double high_mel = 2595.0 * log10(1.0 + upper_hz / 700.0);
	double mel_step = (high_mel - low_mel) / (double)(mel_bins + 2);
	for (int64_t i = 0; i < mel_bins + 2; i++) {
		double mel = (double)i * mel_step + low_mel;
		double hz = 700.0 * (pow(10.0, mel / 2595.0) - 1.0);
		double bin = floor_div(((double)dft_length + 1.0) * hz, (double)sample_rate);
		if (!isfinite(bin) || fabs(bin) > 4e18)
			return mc_node_error(n, "mel edge %lld maps to no DFT bin (edges %g and %g Hz)",
			                     (long long)i, lower_hz, upper_hz);
		bins[i] = (int64_t)bin;
	}
	return 0;
}

/* Writes weight w at [spectrogram bin j, mel bin i]; j is data-dependent. */
static int mel_store(const mc_node *n, mc_tensor *y, int64_t j, int64_t i, int64_t mel_bins,
                     double w)
{
	int64_t spec_bins = y->shape.dims[0];
	if (j < 0 || j >= spec_bins)
		return mc_node_error(n, "mel bin %lld reaches DFT bin %lld, outside [0, %lld): the "
		                     "edges must lie within [0, sample_rate / 2]",
		                     (long long)i, (long long)j, (long long)spec_bins);
	mc_set_f(y, (size_t)(j * mel_bins + i), w);
	return 0;
}

static int mel_triangles(const mc_node *n, const int64_t *bins, int64_t mel_bins, mc_tensor *y)
{
	for (int64_t i = 0; i < mel_bins; i++) {
		int64_t left = bins[i], center = bins[i + 1], right = bins[i + 2];
		int64_t rise = center - left, fall = right - center;
		if (rise == 0 && mel_store(n, y, center, i, mel_bins, 1.0))
			return -1;
		for (int64_t j = left; rise != 0 && j <= center; j++)
			if (mel_store(n, y, j, i, mel_bins, (double)(j - left) / (double)rise))
				return -1;
		for (int64_t j = center; fall > 0 && j < right; j++)
			if (mel_store(n, y, j, i, mel_bins, (double)(right - j) / (double)fall))
				return -1;
	}
	return 0;
}

static int mel_eval(mc_eval_ctx *c)
{
	const mc_node *n = c->node;
	mc_tensor *y = c->out[0];
	int64_t mel_bins, dft_length, sample_rate;
	double lower_hz, upper_hz;
	if (tensor_int_scalar(n, c->in[0], "num_mel_bins (input 0)", &mel_bins) ||
	    tensor_int_scalar(n, c->in[1], "dft_length (input 1)", &dft_length) ||
	    tensor_int_scalar(n, c->in[2], "sample_rate (input 2)", &sample_rate) ||
	    tensor_float_scalar(n, c->in[3], "lower_edge_hertz (input 3)", &lower_hz) ||
	    tensor_float_scalar(n, c->in[4], "upper_edge_hertz (input 4)", &upper_hz))
		return -1;
	if (mel_bins != y->shape.dims[1] || dft_length / 2 + 1 != y->shape.dims[0])
		return mc_node_error(n, "num_mel_bins or dft_length differs from the one seen at "
		                     "compile time");
	if (sample_rate < 1)
		return mc_node_error(n, "sample_rate must be positive, got %lld",
		                     (long long)sample_rate);
	int64_t *bins = mc_alloc_array(n, (size_t)mel_bins + 2, sizeof *bins);
	if (!bins)
		return -1;
	int rc = mel_corner_bins(n, mel_bins, dft_length, sample_rate, lower_hz, upper_hz, bins);
	if (!rc)
		rc = mel_triangles(n, bins, mel_bins, y);
	free(bins);
	return rc;
}

static const mc_op op_mel = {
	.name = "MelWeightMatrix", .min_opset = 17, .max_opset = MC_MAX_OPSET,
	.min_inputs = 5, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
	.parse = mel_parse, .infer = mel_infer, .eval = mel_eval,
};

/* ==== CumProd ==== */

static int cumprod_parse(mc_node *n)
{
	int64_t exclusive, reverse;
	if (mc_attr_int(n, "exclusive", 0, &exclusive) || mc_attr_int(n, "reverse", 0, &reverse))
		return -1;
	cumprod_params *p = mc_params_new(n, sizeof *p);
	p->exclusive = exclusive != 0;
	p->reverse = reverse != 0;
	return 0;
}

static int cumprod_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const mc_value *x = c->in[0];
	int64_t axis;
	bool known;
	int norm;
	if (!mc_dtype_is_float(x->dtype) && !mc_dtype_is_int(x->dtype))
		return mc_node_error(n, "input has dtype %s; a numeric tensor is expected",
		                     mc_dtype_name(x->dtype));
	/* The axis only picks the direction of the scan, so it may come at run
	 * time; a constant one is checked here already. */
	if (peek_int_scalar(c, 1, "axis (input 1)", &axis, &known))
		return -1;
	if (known && mc_norm_axis(n, axis, x->shape.rank, &norm))
		return -1;
	mc_set_out(c, 0, x->dtype, &x->shape);
	return 0;
}

static void cumprod_store(mc_tensor *y, size_t at, bool ints, uint64_t iprod, double prod)
{
	if (ints)
		mc_set_i(y, at, (int64_t)iprod);
	else
		mc_set_f(y, at, prod);
}

static int cumprod_eval(mc_eval_ctx *c)
{
	const mc_node *n = c->node;
	const cumprod_params *p = n->params;
	const mc_tensor *x = c->in[0];
	mc_tensor *y = c->out[0];
	int64_t axis_value;
	int axis;
	if (tensor_int_scalar(n, c->in[1], "axis (input 1)", &axis_value) ||
	    mc_norm_axis(n, axis_value, x->shape.rank, &axis))
		return -1;
	size_t outer = 1, len = x->shape.rank ? (size_t)x->shape.dims[axis] : 1, inner = 1;
	for (int d = 0; d < x->shape.rank; d++) {
		if (d < axis)
			outer *= (size_t)x->shape.dims[d];
		else if (d > axis)
			inner *= (size_t)x->shape.dims[d];
	}
	bool ints = mc_dtype_is_int(x->dtype);
	for (size_t o = 0; o < outer; o++)
		for (size_t i = 0; i < inner; i++) {
			double prod = 1;
			uint64_t iprod = 1; /* integers wrap instead of overflowing */
			for (size_t step = 0; step < len; step++) {
				size_t k = p->reverse ? len - 1 - step : step;
				size_t at = (o * len + k) * inner + i;
				if (p->exclusive)
					cumprod_store(y, at, ints, iprod, prod);
				if (ints)
					iprod *= (uint64_t)mc_get_i(x, at);
				else
					prod *= mc_get_f(x, at);
				if (!p->exclusive)
					cumprod_store(y, at, ints, iprod, prod);
			}
		}
	return 0;
}

static const mc_op op_cumprod = {
	.name = "CumProd", .min_opset = 26, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
	.parse = cumprod_parse, .infer = cumprod_infer, .eval = cumprod_eval,
};

const mc_op *const mc_ops_signal[] = {
	&op_dft17,
	&op_dft20,
	&op_stft,
	&op_hann,
	&op_hamming,
	&op_blackman,
	&op_mel,
	&op_cumprod,
	NULL,
};
