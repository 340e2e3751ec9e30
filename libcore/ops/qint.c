/* The integer ops of quantized regions (see qint.h for what each computes):
 * their attributes, shapes and reference arithmetic. The sums are
 * quant.c's (mc_conv_int64, mc_mm_int64), shared with QLinearConv and
 * QLinearMatMul; the requantisation is mc_qi_scale. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "qint.h"
#include "quant.h"

/* ---- multipliers ---- */

bool mc_qi_multiplier(double real, int32_t *mult, int32_t *shift)
{
	if (!(real > 0) || !isfinite(real) || real >= (double)(1 << 30))
		return false;
	int e;
	double f = frexp(real, &e); /* real = f * 2^e, f in [0.5, 1) */
	int64_t m = (int64_t)llround(f * 2147483648.0);
	if (m == ((int64_t)1 << 31)) {
		m >>= 1;
		e++;
	}
	int64_t s = 31 - e;
	if (s > 62) { /* a tiny factor: fewer bits, possibly 0 */
		m = (int64_t)llround(ldexp(real, 62));
		s = 62;
	}
	if (s < 1) { /* just below 2^30, rounded up to 2^31 * 2^-1 */
		m = INT32_MAX;
		s = 1;
	}
	*mult = (int32_t)m;
	*shift = (int32_t)s;
	return true;
}

bool mc_qi_multiplier2(double a, double b, int32_t *ma, int32_t *mb, int32_t *shift)
{
	int32_t m;
	if (!(a > 0) || !(b > 0) || !mc_qi_multiplier(a > b ? a : b, &m, shift))
		return false;
	*ma = (int32_t)llround(ldexp(a, *shift));
	*mb = (int32_t)llround(ldexp(b, *shift));
	return *ma >= 0 && *mb >= 0;
}

/* ---- attributes ---- */

static int qi_parse(mc_node *n)
{
	qi_params *p = mc_xcalloc(1, sizeof *p);
	n->params = p;
	int64_t to;
	if (mc_attr_int(n, "x_zero_point", 0, &p->x_zp) || mc_attr_int(n, "b_zero_point", 0, &p->b_zp) ||
	    mc_attr_int(n, "y_zero_point", 0, &p->y_zp) || mc_attr_int(n, "multiplier", 0, &p->mult) ||
	    mc_attr_int(n, "b_multiplier", 0, &p->b_mult) || mc_attr_int(n, "shift", 1, &p->shift) ||
	    mc_attr_int(n, "to", MC_INT8, &to) || mc_attr_float(n, "inv_scale", 1, &p->inv_scale))
		return -1;
	p->to = (mc_dtype)to;
	int64_t lo, hi;
	if (!mc_quant_range(p->to, &lo, &hi) || (p->to != MC_INT8 && p->to != MC_UINT8))
		return mc_node_error(n, "output type %s is not int8 or uint8", mc_dtype_name(p->to));
	if (mc_attr_int(n, "lo", lo, &p->lo) || mc_attr_int(n, "hi", hi, &p->hi))
		return -1;
	if (p->lo < lo || p->hi > hi || p->lo > p->hi)
		return mc_node_error(n, "clamp [%lld, %lld] is not inside %s's range", (long long)p->lo,
		                     (long long)p->hi, mc_dtype_name(p->to));
	if (p->shift < 1 || p->shift > 62 || p->mult < 0 || p->mult > INT32_MAX ||
	    p->b_mult < -INT32_MAX || p->b_mult > INT32_MAX)
		return mc_node_error(n, "multiplier %lld, %lld or shift %lld out of range",
		                     (long long)p->mult, (long long)p->b_mult, (long long)p->shift);
	return 0;
}

static const qi_params *params(const mc_node *n)
{
	return n->params;
}

static bool is_8bit(mc_dtype t)
{
	return t == MC_INT8 || t == MC_UINT8;
}

static int check_8bit(const mc_node *n, const char *what, const mc_value *v)
{
	if (!is_8bit(v->dtype))
		return mc_node_error(n, "%s has type %s; expected int8 or uint8", what,
		                     mc_dtype_name(v->dtype));
	return 0;
}

/* Input k, if present, holds `count` values of type t. */
static int check_vec(const mc_infer_ctx *c, int k, mc_dtype t, int64_t count, const char *what)
{
	const mc_value *v = k < c->n_in ? c->in[k] : NULL;
	if (!v)
		return 0;
	if (v->dtype != t || v->shape.rank != 1 || v->shape.dims[0] != count)
		return mc_node_error(c->node, "%s must be %s with %lld values", what, mc_dtype_name(t),
		                     (long long)count);
	return 0;
}

/* The channel parameters of QiConv and QiMatMul. */
static int check_channel_inputs(const mc_infer_ctx *c, int64_t channels)
{
	const mc_value *w = c->in[QI_W];
	if (MC_NEED_INPUTS(c, QI_X, QI_W, QI_MULT, QI_SHIFT))
		return -1;
	return check_vec(c, QI_B, MC_INT32, channels, "bias") ||
	       check_vec(c, QI_MULT, MC_INT32, channels, "multiplier") ||
	       check_vec(c, QI_SHIFT, MC_INT32, channels, "shift") ||
	       check_vec(c, QI_W_ZP, w->dtype, channels, "weight zero point");
}

/* x - zp as int64, zp one value. */
static int64_t *centered_scalar(const mc_tensor *x, int64_t zp)
{
	int64_t *v = mc_xmalloc((x->numel ? x->numel : 1) * sizeof *v);
	for (size_t i = 0; i < x->numel; i++)
		v[i] = mc_get_i(x, i) - zp;
	return v;
}

static int64_t channel_at(const mc_tensor *t, size_t ch, int64_t dflt)
{
	return t ? mc_get_i(t, ch) : dflt;
}

/* y[i] = clamp(y_zp + rq(acc[i])) with the parameters of channel ch(i). */
static void requant_channels(mc_eval_ctx *c, const int64_t *acc, size_t inner, size_t channels)
{
	const qi_params *p = params(c->node);
	mc_tensor *y = c->out[0];
	for (size_t i = 0; i < y->numel; i++) {
		size_t ch = i / inner % channels;
		int64_t r = mc_qi_scale(acc[i], mc_get_i(c->in[QI_MULT], ch), mc_get_i(c->in[QI_SHIFT], ch));
		mc_set_i(y, i, mc_qi_clamp(p->y_zp + r, p));
	}
}

/* ---- QiConv ---- */

static int qiconv_infer(mc_infer_ctx *c)
{
	if (MC_NEED_INPUTS(c, QI_X, QI_W))
		return -1;
	conv_geom g;
	if (check_8bit(c->node, "x", c->in[QI_X]) || check_8bit(c->node, "w", c->in[QI_W]) ||
	    mc_conv_geom_get(c->node, &c->in[QI_X]->shape, &c->in[QI_W]->shape, &g) ||
	    check_channel_inputs(c, g.out_ch))
		return -1;
	mc_shape os = mc_conv_out_shape(&g);
	mc_set_out(c, 0, params(c->node)->to, &os);
	return 0;
}

static int qiconv_eval(mc_eval_ctx *c)
{
	if (!c->out[0])
		return 0;
	const mc_tensor *x = c->in[QI_X], *w = c->in[QI_W];
	const mc_tensor *bias = c->in[QI_B], *wzp = c->n_in > QI_W_ZP ? c->in[QI_W_ZP] : NULL;
	conv_geom g;
	if (mc_conv_geom_get(c->node, &x->shape, &w->shape, &g))
		return -1;
	int64_t *xv = centered_scalar(x, params(c->node)->x_zp);
	int64_t *wv = mc_xmalloc((w->numel ? w->numel : 1) * sizeof *wv);
	int64_t *bv = mc_xmalloc((size_t)(g.out_ch ? g.out_ch : 1) * sizeof *bv);
	size_t per_m = g.out_ch ? w->numel / (size_t)g.out_ch : 1;
	for (size_t i = 0; i < w->numel; i++)
		wv[i] = mc_get_i(w, i) - channel_at(wzp, i / per_m, 0);
	for (int64_t m = 0; m < g.out_ch; m++)
		bv[m] = channel_at(bias, (size_t)m, 0);
	int64_t *acc = mc_conv_int64(&g, xv, wv, bv);
	size_t out_sp = 1;
	for (int d = 0; d < g.nsp; d++)
		out_sp *= (size_t)g.out[d];
	requant_channels(c, acc, out_sp, (size_t)g.out_ch);
	free(xv);
	free(wv);
	free(bv);
	free(acc);
	return 0;
}

/* ---- QiMatMul ---- */

static int qimatmul_infer(mc_infer_ctx *c)
{
	if (MC_NEED_INPUTS(c, QI_X, QI_W))
		return -1;
	mm_geom g;
	if (check_8bit(c->node, "a", c->in[QI_X]) || check_8bit(c->node, "b", c->in[QI_W]) ||
	    mc_mm_geom_get(c->node, &c->in[QI_X]->shape, &c->in[QI_W]->shape, &g) ||
	    check_channel_inputs(c, g.n))
		return -1;
	mc_set_out(c, 0, params(c->node)->to, &g.out);
	return 0;
}

static int qimatmul_eval(mc_eval_ctx *c)
{
	if (!c->out[0])
		return 0;
	const mc_tensor *a = c->in[QI_X], *b = c->in[QI_W];
	const mc_tensor *bias = c->in[QI_B], *bzp = c->n_in > QI_W_ZP ? c->in[QI_W_ZP] : NULL;
	mm_geom g;
	if (mc_mm_geom_get(c->node, &a->shape, &b->shape, &g))
		return -1;
	size_t n = (size_t)g.n;
	int64_t *av = centered_scalar(a, params(c->node)->x_zp);
	int64_t *bv = mc_xmalloc((b->numel ? b->numel : 1) * sizeof *bv);
	for (size_t i = 0; i < b->numel; i++)
		bv[i] = mc_get_i(b, i) - channel_at(bzp, i % n, 0);
	int64_t *acc = mc_mm_int64(&g, av, bv);
	for (size_t i = 0; bias && i < c->out[0]->numel; i++)
		acc[i] += mc_get_i(bias, i % n);
	requant_channels(c, acc, 1, n);
	free(av);
	free(bv);
	free(acc);
	return 0;
}

/* ---- elementwise: QiAdd, QiMul, QiRequant, QiQuantize, QiLut ---- */

static int qibinary_infer(mc_infer_ctx *c)
{
	if (MC_NEED_INPUTS(c, 0, 1))
		return -1;
	mc_shape out;
	char sa[256], sb[256];
	if (check_8bit(c->node, "a", c->in[0]) || check_8bit(c->node, "b", c->in[1]))
		return -1;
	if (!mc_broadcast(&c->in[0]->shape, &c->in[1]->shape, &out))
		return mc_node_error(c->node, "shapes %s and %s do not broadcast",
		                     mc_shape_str(&c->in[0]->shape, sa, sizeof sa),
		                     mc_shape_str(&c->in[1]->shape, sb, sizeof sb));
	mc_set_out(c, 0, params(c->node)->to, &out);
	return 0;
}

/* The integer result of QiAdd or QiMul on one pair (before y_zp). */
int64_t mc_qi_abs_max(const mc_tensor *t)
{
	int64_t m = 0;
	for (size_t i = 0; t && i < t->numel; i++) {
		int64_t v = llabs(mc_get_i(t, i));
		m = v > m ? v : m;
	}
	return m;
}

int64_t mc_qi_binary(bool mul, const qi_params *p, int64_t a, int64_t b)
{
	int64_t da = a - p->x_zp, db = b - p->b_zp;
	if (mul)
		return mc_qi_scale(da * db, p->mult, p->shift);
	/* both terms under one shift: a_mult * da + b_mult * db < 2^41 */
	return mc_qi_rshift(p->mult * da + p->b_mult * db, p->shift);
}

static int qibinary_eval(mc_eval_ctx *c, bool mul)
{
	mc_tensor *y = c->out[0];
	if (!y)
		return 0;
	const qi_params *p = params(c->node);
	int64_t sa[MC_MAX_RANK], sb[MC_MAX_RANK];
	mc_broadcast_strides(&c->in[0]->shape, &y->shape, sa);
	mc_broadcast_strides(&c->in[1]->shape, &y->shape, sb);
	for (size_t i = 0; i < y->numel; i++) {
		int64_t a = mc_get_i(c->in[0], mc_bcast_index(i, &y->shape, sa));
		int64_t b = mc_get_i(c->in[1], mc_bcast_index(i, &y->shape, sb));
		mc_set_i(y, i, mc_qi_clamp(p->y_zp + mc_qi_binary(mul, p, a, b), p));
	}
	return 0;
}

static int qiadd_eval(mc_eval_ctx *c)
{
	return qibinary_eval(c, false);
}

static int qimul_eval(mc_eval_ctx *c)
{
	return qibinary_eval(c, true);
}

static int qiunary_infer(mc_infer_ctx *c)
{
	if (MC_NEED_INPUTS(c, 0))
		return -1;
	bool quantize = c->node->id == MC_OP_QiQuantize;
	if (quantize && c->in[0]->dtype != MC_FLOAT)
		return mc_node_error(c->node, "x has type %s; expected float32",
		                     mc_dtype_name(c->in[0]->dtype));
	if (!quantize && check_8bit(c->node, "x", c->in[0]))
		return -1;
	mc_set_out(c, 0, params(c->node)->to, &c->in[0]->shape);
	return 0;
}

static int qirequant_eval(mc_eval_ctx *c)
{
	const qi_params *p = params(c->node);
	for (size_t i = 0; c->out[0] && i < c->out[0]->numel; i++) {
		int64_t r = mc_qi_scale(mc_get_i(c->in[0], i) - p->x_zp, p->mult, p->shift);
		mc_set_i(c->out[0], i, mc_qi_clamp(p->y_zp + r, p));
	}
	return 0;
}

/* rint(x * inv_scale) in float32, as the kernels compute it; NaN gives 0. */
int64_t mc_qi_quantize(const qi_params *p, float x)
{
	float v = rintf(x * (float)p->inv_scale);
	if (isnan(v))
		return mc_qi_clamp(p->y_zp, p);
	double r = (double)v + (double)p->y_zp;
	return r < (double)p->lo ? p->lo : r > (double)p->hi ? p->hi : (int64_t)r;
}

static int qiquantize_eval(mc_eval_ctx *c)
{
	const qi_params *p = params(c->node);
	const float *x = c->in[0]->data;
	for (size_t i = 0; c->out[0] && i < c->out[0]->numel; i++)
		mc_set_i(c->out[0], i, mc_qi_quantize(p, x[i]));
	return 0;
}

static int qilut_infer(mc_infer_ctx *c)
{
	if (MC_NEED_INPUTS(c, 0, 1) || check_8bit(c->node, "x", c->in[0]))
		return -1;
	const mc_value *t = c->in[1];
	if (!is_8bit(t->dtype) || t->shape.rank != 1 || t->shape.dims[0] != 256)
		return mc_node_error(c->node, "table must be int8 or uint8 with 256 values");
	mc_set_out(c, 0, t->dtype, &c->in[0]->shape);
	return 0;
}

static int qilut_eval(mc_eval_ctx *c)
{
	int64_t base = c->in[0]->dtype == MC_INT8 ? -128 : 0;
	for (size_t i = 0; c->out[0] && i < c->out[0]->numel; i++)
		mc_set_i(c->out[0], i, mc_get_i(c->in[1], (size_t)(mc_get_i(c->in[0], i) - base)));
	return 0;
}

/* ---- QiAvgPool ---- */

/* Window and output dims of x [N, C, D...]: kernel_shape, strides. */
int mc_qi_pool_geom(const mc_node *n, const mc_shape *x, int64_t *kern, int64_t *stride,
                    mc_shape *out)
{
	char s[256];
	int nsp = x->rank - 2;
	if (nsp < 1)
		return mc_node_error(n, "input %s has no spatial dims", mc_shape_str(x, s, sizeof s));
	if (mc_attr_ints_fixed(n, "kernel_shape", nsp, 1, 1, kern) ||
	    mc_attr_ints_fixed(n, "strides", nsp, 1, 1, stride))
		return -1;
	int64_t keepdims;
	if (mc_attr_int(n, "keepdims", 1, &keepdims))
		return -1;
	*out = *x;
	for (int d = 0; d < nsp; d++) {
		if (kern[d] > x->dims[d + 2])
			return mc_node_error(n, "window %lld larger than input %s", (long long)kern[d],
			                     mc_shape_str(x, s, sizeof s));
		out->dims[d + 2] = (x->dims[d + 2] - kern[d]) / stride[d] + 1;
		if (!keepdims && kern[d] != x->dims[d + 2])
			return mc_node_error(n, "keepdims 0 needs a window over the whole input");
	}
	if (!keepdims) /* the spatial dims, all 1, dropped (ReduceMean) */
		out->rank = 2;
	return 0;
}

static int qiavgpool_infer(mc_infer_ctx *c)
{
	if (MC_NEED_INPUTS(c, 0) || check_8bit(c->node, "x", c->in[0]))
		return -1;
	int64_t kern[MC_MAX_RANK], stride[MC_MAX_RANK];
	mc_shape out;
	if (mc_qi_pool_geom(c->node, &c->in[0]->shape, kern, stride, &out))
		return -1;
	mc_set_out(c, 0, params(c->node)->to, &out);
	return 0;
}

static int qiavgpool_eval(mc_eval_ctx *c)
{
	mc_tensor *y = c->out[0];
	if (!y)
		return 0;
	const qi_params *p = params(c->node);
	const mc_tensor *x = c->in[0];
	int64_t kern[MC_MAX_RANK], stride[MC_MAX_RANK];
	mc_shape os;
	if (mc_qi_pool_geom(c->node, &x->shape, kern, stride, &os))
		return -1;
	int nsp = x->shape.rank - 2;
	size_t in_sp = 1, out_sp = 1, k_sp = 1;
	for (int d = 0; d < nsp; d++) {
		in_sp *= (size_t)x->shape.dims[d + 2];
		out_sp *= (size_t)os.dims[d + 2];
		k_sp *= (size_t)kern[d];
	}
	for (size_t i = 0; i < y->numel; i++) {
		size_t plane = i / out_sp, op = i % out_sp;
		int64_t sum = 0;
		for (size_t kp = 0; kp < k_sp; kp++) {
			size_t o = op, k = kp, off = 0, scale = 1;
			for (int d = nsp - 1; d >= 0; d--) {
				size_t od = o % (size_t)os.dims[d + 2], kd = k % (size_t)kern[d];
				o /= (size_t)os.dims[d + 2];
				k /= (size_t)kern[d];
				off += (od * (size_t)stride[d] + kd) * scale;
				scale *= (size_t)x->shape.dims[d + 2];
			}
			sum += mc_get_i(x, plane * in_sp + off) - p->x_zp;
		}
		mc_set_i(y, i, mc_qi_clamp(p->y_zp + mc_qi_scale(sum, p->mult, p->shift), p));
	}
	return 0;
}

/* ---- QiSoftmax ---- */

int64_t mc_qi_softmax_axis(const mc_node *n, const mc_shape *x)
{
	int64_t axis;
	if (mc_attr_int(n, "axis", -1, &axis))
		return -1;
	if (axis < 0)
		axis += x->rank;
	if (axis < 0 || axis >= x->rank)
		return mc_node_error(n, "axis %lld out of range for rank %d", (long long)axis, x->rank);
	return axis;
}

static int qisoftmax_infer(mc_infer_ctx *c)
{
	if (MC_NEED_INPUTS(c, 0, 1) || check_8bit(c->node, "x", c->in[0]))
		return -1;
	const mc_value *t = c->in[1];
	int64_t axis = mc_qi_softmax_axis(c->node, &c->in[0]->shape);
	if (axis < 0)
		return -1;
	if (t->dtype != MC_INT32 || t->shape.rank != 1 || t->shape.dims[0] != 256)
		return mc_node_error(c->node, "table must be int32 with 256 values");
	if (c->in[0]->shape.dims[axis] > MC_QI_SOFTMAX_MAX)
		return mc_node_error(c->node, "rows longer than %d", MC_QI_SOFTMAX_MAX);
	mc_set_out(c, 0, params(c->node)->to, &c->in[0]->shape);
	return 0;
}

static int qisoftmax_eval(mc_eval_ctx *c)
{
	mc_tensor *y = c->out[0];
	if (!y)
		return 0;
	const qi_params *p = params(c->node);
	const mc_tensor *x = c->in[0], *t = c->in[1];
	int64_t axis = mc_qi_softmax_axis(c->node, &x->shape);
	if (axis < 0)
		return -1;
	size_t n = (size_t)x->shape.dims[axis], inner = 1, outer = 1;
	for (int d = (int)axis + 1; d < x->shape.rank; d++)
		inner *= (size_t)x->shape.dims[d];
	for (int d = 0; d < axis; d++)
		outer *= (size_t)x->shape.dims[d];
	for (size_t o = 0; o < outer; o++)
		for (size_t in = 0; in < inner; in++) {
			size_t base = o * n * inner + in;
			int64_t mx = INT64_MIN;
			for (size_t k = 0; k < n; k++)
				mx = mc_get_i(x, base + k * inner) > mx ? mc_get_i(x, base + k * inner) : mx;
			uint32_t sum = 0;
			for (size_t k = 0; k < n; k++)
				sum += (uint32_t)mc_get_i(t, (size_t)(mx - mc_get_i(x, base + k * inner)));
			uint32_t r = 0xffffffffu / sum; /* sum >= table[0] > 0 */
			for (size_t k = 0; k < n; k++) {
				uint32_t e = (uint32_t)mc_get_i(t, (size_t)(mx - mc_get_i(x, base + k * inner)));
				int64_t prob = (int64_t)((e * r) >> 1); /* e <= sum: no wrap */
				mc_set_i(y, base + k * inner,
				         mc_qi_clamp(p->y_zp + mc_qi_scale(prob, p->mult, p->shift), p));
			}
		}
	return 0;
}

/* ---- registry ---- */

#define QI_OP(var, opname, min_in, max_in, inf, ev)                                          \
	static const mc_op var = {                                                         \
		.name = opname, .min_opset = 1, .max_opset = MC_MAX_OPSET,                 \
		.min_inputs = min_in, .max_inputs = max_in, .min_outputs = 1, .max_outputs = 1,    \
		.parse = qi_parse, .infer = inf, .eval = ev, .flags = MC_OP_INTERNAL,      \
	}

QI_OP(op_qiconv, "QiConv", 5, 6, qiconv_infer, qiconv_eval);
QI_OP(op_qimatmul, "QiMatMul", 5, 6, qimatmul_infer, qimatmul_eval);
QI_OP(op_qiadd, "QiAdd", 2, 2, qibinary_infer, qiadd_eval);
QI_OP(op_qimul, "QiMul", 2, 2, qibinary_infer, qimul_eval);
QI_OP(op_qirequant, "QiRequant", 1, 1, qiunary_infer, qirequant_eval);
QI_OP(op_qiquantize, "QiQuantize", 1, 1, qiunary_infer, qiquantize_eval);
QI_OP(op_qilut, "QiLut", 2, 2, qilut_infer, qilut_eval);
QI_OP(op_qiavgpool, "QiAvgPool", 1, 1, qiavgpool_infer, qiavgpool_eval);
QI_OP(op_qisoftmax, "QiSoftmax", 2, 2, qisoftmax_infer, qisoftmax_eval);

const mc_op *const mc_ops_qint[] = {
	&op_qiconv, &op_qimatmul, &op_qiadd, &op_qimul, &op_qirequant,
	&op_qiquantize, &op_qilut, &op_qiavgpool, &op_qisoftmax,
	NULL,
};
