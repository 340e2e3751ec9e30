/* Lowerings of the elementwise family (libcore/ops/elementwise.c), Swish
 * and the quantisation ops QuantizeLinear, DequantizeLinear and
 * DynamicQuantizeLinear (libcore/ops/quant.c).
 *
 * Pointwise ops give one element's value from their arguments; aot/lower.c
 * supplies loops, broadcasting and fusion. Values are computed in the
 * compute type of the input dtype (f32 for float32, float16, bfloat16 and
 * the small floats, as ONNX Runtime does; f64 for double; integers in their
 * own type, wrapping), and each function follows the reference eval in
 * libcore/ops/elementwise.c step by step where the result could differ:
 * NaN handling, integer division and remainder, rounding. */
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "lower.h"
#include "../libcore/ops/elementwise.h"
#include "../libcore/ops/qint.h"
#include "../libcore/ops/quant.h"

/* ---- expression shorthands ---- */

/* Constant v in the type of `like` (integer or float). */
static mc_kexpr *num(mc_lower_ctx *c, const mc_kexpr *like, double v)
{
	return mc_k_const_as(c->kb, like->type, v);
}

static mc_kexpr *bin(mc_lower_ctx *c, mc_kbinop op, mc_kexpr *a, mc_kexpr *b)
{
	return mc_k_bin(c->kb, op, a, b);
}

static mc_kexpr *un(mc_lower_ctx *c, mc_kunop op, mc_kexpr *a)
{
	return mc_k_un(c->kb, op, a);
}

static mc_kexpr *sel(mc_lower_ctx *c, mc_kexpr *cond, mc_kexpr *a, mc_kexpr *b)
{
	return mc_k_select(c->kb, cond, a, b);
}

static mc_kexpr *let(mc_lower_ctx *c, mc_kexpr *e)
{
	return mc_kb_let(c->kb, e);
}

/* Attribute slot k of a map op (see elementwise.h for the slots). */
static double attr(const mc_lower_ctx *c, int k)
{
	return ((const attr_vals *)c->node->params)->v[k];
}

/* v clamped to [0, 1]; NaN stays NaN, like the reference's clamp01. */
static mc_kexpr *clamp01(mc_lower_ctx *c, mc_kexpr *v)
{
	v = let(c, v);
	return sel(c, bin(c, MC_KB_LT, v, num(c, v, 0)), num(c, v, 0),
	           sel(c, bin(c, MC_KB_GT, v, num(c, v, 1)), num(c, v, 1), v));
}

/* exp(x) - 1 without the cancellation near 0: tanh(x/2) * (exp(x) + 1). */
static mc_kexpr *expm1_of(mc_lower_ctx *c, mc_kexpr *x)
{
	x = let(c, x);
	mc_kexpr *t = un(c, MC_KU_TANH, bin(c, MC_KB_MUL, x, num(c, x, 0.5)));
	return bin(c, MC_KB_MUL, t, bin(c, MC_KB_ADD, un(c, MC_KU_EXP, x), num(c, x, 1)));
}

/* log(1 + y) for y >= 0 without losing tiny y (Kahan's trick): with
 * u = 1 + y rounded, log(u) * y / (u - 1) corrects u's rounding error. */
static mc_kexpr *log1p_of(mc_lower_ctx *c, mc_kexpr *y)
{
	y = let(c, y);
	mc_kexpr *u = let(c, bin(c, MC_KB_ADD, y, num(c, y, 1)));
	mc_kexpr *one = num(c, y, 1);
	mc_kexpr *corrected = bin(c, MC_KB_MUL, un(c, MC_KU_LOG, u),
	                          bin(c, MC_KB_DIV, y, bin(c, MC_KB_SUB, u, one)));
	return sel(c, bin(c, MC_KB_EQ, u, num(c, y, 1)), y, corrected);
}

/* softplus(x) = max(x, 0) + log1p(exp(-|x|)): exp never overflows. */
static mc_kexpr *softplus_of(mc_lower_ctx *c, mc_kexpr *x)
{
	x = let(c, x);
	mc_kexpr *pos = sel(c, bin(c, MC_KB_GT, x, num(c, x, 0)), x, num(c, x, 0));
	mc_kexpr *e = un(c, MC_KU_EXP, un(c, MC_KU_NEG, un(c, MC_KU_ABS, x)));
	return bin(c, MC_KB_ADD, pos, log1p_of(c, e));
}

static mc_kexpr *sigmoid_of(mc_lower_ctx *c, mc_kexpr *x)
{
	return mc_k_sigmoid(c->kb, x);
}

/* ---- legacy broadcasting (before opset 7) ----
 * Add & co with broadcast=1 and an axis, and PRelu's per-channel slope,
 * align input 1 at an axis rather than numpy's right end. The generic
 * kernel loads operands right-aligned; where that differs, input 1 is
 * loaded again at its legacy view's index. (The toolbox has no way to
 * give an operand's view, nor to refuse a node from a pointwise function:
 * the one case left, a fused non-elementwise anchor, fails at run time.) */

/* Whether an open FOR statement runs 0..n. */
static bool loop_over(const mc_kstmt *s, int64_t n)
{
	int64_t lo, hi;
	return s && s->kind == MC_KS_FOR && mc_k_is_const(s->a, &lo) && mc_k_is_const(s->b, &hi) &&
	       lo == 0 && hi == n;
}

/* The output coordinates of the element being computed, when the group's
 * anchor is computed by the generic elementwise kernel (whose output shape
 * an epilogue shares): its open loops are one per output dim, or one flat
 * loop over the elements. */
static bool pointwise_coords(mc_lower_ctx *c, mc_kexpr **coords)
{
	mc_kb *kb = c->kb;
	const mc_shape *os = &c->out[0]->shape;
	if (!c->group)
		return false;
	if (!mc_op_has(c->g->nodes[c->group->anchor].id, MC_OF_PW))
		return false;
	if (kb->depth == os->rank) {
		for (int d = 0; d < os->rank; d++) {
			if (!loop_over(kb->open[d + 1], os->dims[d]))
				return false;
			coords[d] = mc_k_var(kb, kb->open[d + 1]->var);
		}
		return true;
	}
	if (kb->depth != 1 || !loop_over(kb->open[1], (int64_t)mc_numel(os)))
		return false;
	mc_kexpr *rest = mc_k_var(kb, kb->open[1]->var);
	for (int d = os->rank - 1; d > 0; d--) {
		mc_kexpr *dim = mc_k_index(kb, os->dims[d]);
		coords[d] = let(c, bin(c, MC_KB_REM, rest, dim));
		rest = let(c, bin(c, MC_KB_DIV, rest, dim));
	}
	coords[0] = rest;
	return true;
}

/* Argument i of a map op, corrected for legacy broadcasting. */
static mc_kexpr *operand(mc_lower_ctx *c, mc_kexpr *const *a, int i)
{
	if (c->node->opset >= 7 || i != 1 || c->n_in != 2 || !c->in[0] || !c->in[1])
		return a[i];
	const mc_shape *os = &c->out[0]->shape;
	mc_shape shapes[2] = { c->in[0]->shape, c->in[1]->shape }, views[2], out;
	if (mc_ew_shapes(c->node, 2, shapes, views, &out))
		return a[i];
	int64_t right[MC_MAX_RANK], legacy[MC_MAX_RANK];
	mc_broadcast_strides(&shapes[1], os, right);
	mc_broadcast_strides(&views[1], os, legacy);
	if (views[1].rank <= os->rank && memcmp(right, legacy, sizeof(int64_t) * (size_t)os->rank) == 0)
		return a[i];
	mc_kexpr *coords[MC_MAX_RANK];
	if (pointwise_coords(c, coords))
		return mc_lower_load(c, i, mc_lower_bcast(c->kb, &views[1], os, coords));
	/* an epilogue elsewhere: the store's index is right for a full-size
	 * or single-element operand */
	size_t n = mc_numel(&shapes[1]);
	if (n == mc_numel(os) || n == 1)
		return a[i];
	mc_lower_error(c, "legacy (opset %d) broadcasting of input 1 fused into a %s kernel has no "
	               "C lowering (not supported); the generated code reports bad input",
	               c->node->opset, c->g->nodes[c->group->anchor].op_type);
	mc_kb_fail(c->kb, MC_STATUS_BAD_INPUT);
	return num(c, a[i], 0);
}

/* ---- unary ops ---- */

#define PW(name) static mc_kexpr *pw_##name(mc_lower_ctx *c, mc_kexpr *const *a)

/* Unary ops that are one math function of the IR. */
#define PW_MATH(name, op) \
	PW(name) { return un(c, op, a[0]); }
PW_MATH(tanh, MC_KU_TANH)
PW_MATH(exp, MC_KU_EXP)
PW_MATH(log, MC_KU_LOG)
PW_MATH(sqrt, MC_KU_SQRT)
PW_MATH(erf, MC_KU_ERF)
PW_MATH(neg, MC_KU_NEG)
PW_MATH(floor, MC_KU_FLOOR)
PW_MATH(ceil, MC_KU_CEIL)
PW_MATH(round, MC_KU_RINT) /* half to even, as nearbyint */
PW_MATH(sin, MC_KU_SIN)
PW_MATH(cos, MC_KU_COS)
PW_MATH(tan, MC_KU_TAN)
PW_MATH(asin, MC_KU_ASIN)
PW_MATH(acos, MC_KU_ACOS)
PW_MATH(atan, MC_KU_ATAN)
PW_MATH(sinh, MC_KU_SINH)
PW_MATH(cosh, MC_KU_COSH)
PW_MATH(asinh, MC_KU_ASINH)
PW_MATH(acosh, MC_KU_ACOSH)
PW_MATH(atanh, MC_KU_ATANH)
PW_MATH(isnan, MC_KU_ISNAN)
PW_MATH(not, MC_KU_NOT)
PW_MATH(bitwise_not, MC_KU_BITNOT)

/* x < 0 ? 0 : x keeps NaN (a max() would not). */
PW(relu)
{
	mc_kexpr *x = let(c, a[0]);
	return sel(c, bin(c, MC_KB_LT, x, num(c, x, 0)), num(c, x, 0), x);
}

PW(leaky_relu)
{
	mc_kexpr *x = let(c, a[0]);
	return sel(c, bin(c, MC_KB_LT, x, num(c, x, 0)), bin(c, MC_KB_MUL, num(c, x, attr(c, 0)), x), x);
}

PW(sigmoid) { return sigmoid_of(c, a[0]); }

PW(hard_sigmoid)
{
	mc_kexpr *x = a[0];
	return clamp01(c, bin(c, MC_KB_ADD, bin(c, MC_KB_MUL, num(c, x, attr(c, 0)), x),
	                      num(c, x, attr(c, 1))));
}

PW(hard_swish)
{
	mc_kexpr *x = let(c, a[0]);
	mc_kexpr *gate = bin(c, MC_KB_ADD, bin(c, MC_KB_DIV, x, num(c, x, 6)), num(c, x, 0.5));
	return bin(c, MC_KB_MUL, x, clamp01(c, gate));
}

/* Integers: abs(INT_MIN) wraps (the emitter's helper); unsigned: itself. */
PW(abs)
{
	if (!mc_ktype_is_signed(a[0]->type))
		return a[0];
	return un(c, MC_KU_ABS, a[0]);
}

PW(reciprocal) { return bin(c, MC_KB_DIV, num(c, a[0], 1), a[0]); }

/* Floats: 1, -1, or x itself for zeros and NaN; integers: -1, 0, 1. */
PW(sign)
{
	mc_kexpr *x = let(c, a[0]);
	if (!mc_ktype_is_signed(x->type))
		return mc_k_cast(c->kb, x->type, bin(c, MC_KB_NE, x, num(c, x, 0)));
	mc_kexpr *rest = mc_ktype_is_float(x->type) ? x : num(c, x, 0);
	return sel(c, bin(c, MC_KB_GT, x, num(c, x, 0)), num(c, x, 1),
	           sel(c, bin(c, MC_KB_LT, x, num(c, x, 0)), num(c, x, -1), rest));
}

PW(elu)
{
	mc_kexpr *x = let(c, a[0]);
	return sel(c, bin(c, MC_KB_LT, x, num(c, x, 0)),
	           bin(c, MC_KB_MUL, num(c, x, attr(c, 0)), expm1_of(c, x)), x);
}

PW(selu)
{
	mc_kexpr *x = let(c, a[0]);
	double alpha = attr(c, 0), gamma = attr(c, 1);
	return sel(c, bin(c, MC_KB_GT, x, num(c, x, 0)), bin(c, MC_KB_MUL, num(c, x, gamma), x),
	           bin(c, MC_KB_MUL, num(c, x, gamma * alpha), expm1_of(c, x)));
}

PW(celu)
{
	mc_kexpr *x = let(c, a[0]);
	double alpha = attr(c, 0);
	mc_kexpr *neg = bin(c, MC_KB_MUL, num(c, x, alpha),
	                    expm1_of(c, bin(c, MC_KB_DIV, x, num(c, x, alpha))));
	return sel(c, bin(c, MC_KB_GT, x, num(c, x, 0)), x, neg);
}

PW(softplus) { return softplus_of(c, a[0]); }

PW(softsign)
{
	mc_kexpr *x = let(c, a[0]);
	return bin(c, MC_KB_DIV, x, bin(c, MC_KB_ADD, num(c, x, 1), un(c, MC_KU_ABS, x)));
}

PW(thresholded_relu)
{
	mc_kexpr *x = let(c, a[0]);
	return sel(c, bin(c, MC_KB_GT, x, num(c, x, attr(c, 0))), x, num(c, x, 0));
}

/* approximate="tanh": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));
 * "none": 0.5 x (1 + erf(x / sqrt(2))). */
PW(gelu)
{
	mc_kexpr *x = let(c, a[0]), *inner;
	if (attr(c, 0) != 0) {
		mc_kexpr *cube = bin(c, MC_KB_MUL, bin(c, MC_KB_MUL, num(c, x, 0.044715), x),
		                     bin(c, MC_KB_MUL, x, x));
		inner = un(c, MC_KU_TANH, bin(c, MC_KB_MUL, num(c, x, 0.7978845608028654),
		                              bin(c, MC_KB_ADD, x, cube)));
	} else {
		inner = un(c, MC_KU_ERF, bin(c, MC_KB_MUL, x, num(c, x, 0.7071067811865476)));
	}
	return bin(c, MC_KB_MUL, bin(c, MC_KB_MUL, num(c, x, 0.5), x),
	           bin(c, MC_KB_ADD, num(c, x, 1), inner));
}

PW(mish)
{
	mc_kexpr *x = let(c, a[0]);
	return bin(c, MC_KB_MUL, x, un(c, MC_KU_TANH, softplus_of(c, x)));
}

/* detect_negative (slot 0), detect_positive (slot 1) */
PW(isinf)
{
	bool neg = attr(c, 0) != 0, pos = attr(c, 1) != 0;
	if (!neg && !pos)
		return mc_k_int(c->kb, MC_KT_BOOL, 0);
	mc_kexpr *x = let(c, a[0]), *inf = un(c, MC_KU_ISINF, x);
	if (neg && pos)
		return inf;
	return bin(c, MC_KB_AND, inf, bin(c, neg ? MC_KB_LT : MC_KB_GT, x, num(c, x, 0)));
}

/* bias (slot 0), lambd (slot 1). Integers go through double like the
 * reference; the caller's conversion back saturates. */
PW(shrink)
{
	mc_kexpr *x = a[0];
	if (!mc_ktype_is_float(x->type))
		x = mc_k_cast(c->kb, MC_KT_F64, x);
	x = let(c, x);
	double bias = attr(c, 0), lambd = attr(c, 1);
	return sel(c, bin(c, MC_KB_LT, x, num(c, x, -lambd)), bin(c, MC_KB_ADD, x, num(c, x, bias)),
	           sel(c, bin(c, MC_KB_GT, x, num(c, x, lambd)), bin(c, MC_KB_SUB, x, num(c, x, bias)),
	               num(c, x, 0)));
}

PW(swish)
{
	double alpha = 1.0;
	if (mc_attr_float(c->node, "alpha", 1.0, &alpha))
		alpha = 1.0; /* validated by inference already */
	mc_kexpr *x = let(c, a[0]);
	return bin(c, MC_KB_MUL, x, sigmoid_of(c, bin(c, MC_KB_MUL, num(c, x, alpha), x)));
}

/* ---- binary ops ---- */

#define PW_BIN(name, op) \
	PW(name) { return bin(c, op, a[0], operand(c, a, 1)); }
PW_BIN(add, MC_KB_ADD)
PW_BIN(sub, MC_KB_SUB)
PW_BIN(mul, MC_KB_MUL)
PW_BIN(div, MC_KB_DIV) /* integers truncate; x / 0 gives 0 (the reference refuses) */
PW_BIN(equal, MC_KB_EQ)
PW_BIN(less, MC_KB_LT)
PW_BIN(greater, MC_KB_GT)
PW_BIN(less_equal, MC_KB_LE)
PW_BIN(greater_equal, MC_KB_GE)
PW_BIN(and, MC_KB_AND)
PW_BIN(or, MC_KB_OR)
PW_BIN(xor, MC_KB_XOR)
PW_BIN(bitwise_and, MC_KB_AND)
PW_BIN(bitwise_or, MC_KB_OR)
PW_BIN(bitwise_xor, MC_KB_XOR)

/* Slot 0 is 1 for direction="LEFT"; shifts by the width or more give 0. */
PW(bitshift)
{
	return bin(c, attr(c, 0) != 0 ? MC_KB_SHL : MC_KB_SHR, a[0], a[1]);
}

/* Integer power by squaring, wrapping like the dtype; a negative exponent
 * gives the truncated 1 / base^|e| (only 1 and -1 have nonzero ones). */
static mc_kexpr *int_pow(mc_lower_ctx *c, mc_kexpr *base, mc_kexpr *exponent)
{
	mc_kb *kb = c->kb;
	mc_ktype t = base->type;
	base = let(c, base);
	exponent = let(c, exponent);
	mc_kexpr *r = mc_kb_local(kb, mc_k_int(kb, t, 1));
	mc_kexpr *b = mc_kb_local(kb, base);
	mc_kexpr *e = mc_kb_local(kb, mc_k_cast(kb, MC_KT_U64, exponent));
	mc_kb_fori(kb, 64, 0);
	mc_kb_if(kb, bin(c, MC_KB_EQ, e, mc_k_int(kb, MC_KT_U64, 0)));
	mc_kb_break(kb);
	mc_kb_end(kb);
	mc_kb_if(kb, bin(c, MC_KB_NE, bin(c, MC_KB_AND, e, mc_k_int(kb, MC_KT_U64, 1)),
	                 mc_k_int(kb, MC_KT_U64, 0)));
	mc_kb_assign(kb, r, bin(c, MC_KB_MUL, r, b));
	mc_kb_end(kb);
	mc_kb_assign(kb, b, bin(c, MC_KB_MUL, b, b));
	mc_kb_assign(kb, e, bin(c, MC_KB_SHR, e, mc_k_int(kb, MC_KT_U64, 1)));
	mc_kb_end(kb);
	if (!mc_ktype_is_signed(exponent->type))
		return r;
	mc_kexpr *one = mc_k_int(kb, t, 1), *zero = mc_k_int(kb, t, 0);
	mc_kexpr *neg = sel(c, bin(c, MC_KB_EQ, base, one), one, zero);
	if (mc_ktype_is_signed(t)) {
		mc_kexpr *odd = bin(c, MC_KB_NE, bin(c, MC_KB_AND, exponent, num(c, exponent, 1)),
		                    num(c, exponent, 0));
		neg = sel(c, bin(c, MC_KB_EQ, base, mc_k_int(kb, t, -1)),
		          sel(c, odd, mc_k_int(kb, t, -1), one), neg);
	}
	return sel(c, bin(c, MC_KB_LT, exponent, num(c, exponent, 0)), neg, r);
}

int mc_lower_pow_small_exponent(const mc_graph *g, const mc_node *n)
{
	if (n->id != MC_OP_Pow || n->n_inputs != 2 || n->inputs[0] < 0 || n->inputs[1] < 0)
		return 0;
	const mc_value *x = &g->values[n->inputs[0]];
	const mc_tensor *y = g->values[n->inputs[1]].konst;
	if ((x->dtype != MC_FLOAT && x->dtype != MC_DOUBLE) || !y || y->numel != 1)
		return 0;
	double e = mc_get_f(y, 0);
	return e == 1.0 ? 1 : e == 2.0 ? 2 : 0;
}

/* The result has the base's dtype. A float on either side computes pow in
 * floats (double for an integer base, converted back with saturation). */
PW(pow)
{
	mc_kexpr *x = a[0], *y = operand(c, a, 1);
	int small = mc_lower_pow_small_exponent(c->g, c->node);
	if (small == 1)
		return x;
	if (small == 2) { /* x * x is pow(x, 2) rounded once, as pow's result */
		x = let(c, x);
		return bin(c, MC_KB_MUL, x, x);
	}
	if (mc_ktype_is_float(x->type))
		return bin(c, MC_KB_POW, x, mc_k_cast(c->kb, x->type, y));
	if (mc_ktype_is_float(y->type))
		return bin(c, MC_KB_POW, mc_k_cast(c->kb, MC_KT_F64, x), mc_k_cast(c->kb, MC_KT_F64, y));
	return int_pow(c, x, y);
}

/* fmod=1 (slot 0): the dividend's sign (C's fmod / %); fmod=0: the
 * divisor's (Python's %): a nonzero remainder of the other sign moves by
 * one divisor. Integer x % 0 gives 0 (the reference refuses). */
PW(mod)
{
	mc_kexpr *x = a[0], *y = let(c, a[1]);
	bool is_float = mc_ktype_is_float(x->type);
	mc_kexpr *r = bin(c, is_float ? MC_KB_FMOD : MC_KB_REM, x, y);
	if (attr(c, 0) != 0 || !mc_ktype_is_signed(x->type))
		return r;
	r = let(c, r);
	mc_kexpr *other_sign = bin(c, MC_KB_NE, bin(c, MC_KB_LT, r, num(c, r, 0)),
	                           bin(c, MC_KB_LT, y, num(c, y, 0)));
	mc_kexpr *fix = bin(c, MC_KB_AND, bin(c, MC_KB_NE, r, num(c, r, 0)), other_sign);
	return sel(c, fix, bin(c, MC_KB_ADD, r, y), r);
}

PW(prelu)
{
	mc_kexpr *x = let(c, a[0]);
	if (!mc_ktype_is_signed(x->type))
		return x; /* unsigned values are never negative */
	mc_kexpr *slope = operand(c, a, 1);
	return sel(c, bin(c, MC_KB_LT, x, num(c, x, 0)), bin(c, MC_KB_MUL, x, slope), x);
}

/* ---- variadic ops ---- */

/* Max and Min propagate NaN from either side, like numpy.maximum. */
static mc_kexpr *fold_minmax(mc_lower_ctx *c, mc_kexpr *const *a, mc_kbinop take_b_if)
{
	mc_kexpr *acc = a[0];
	for (int i = 1; i < c->n_in; i++) {
		acc = let(c, acc);
		mc_kexpr *b = let(c, a[i]);
		mc_kexpr *v = sel(c, bin(c, take_b_if, acc, b), b, acc);
		if (mc_ktype_is_float(b->type))
			v = sel(c, un(c, MC_KU_ISNAN, b), b, v);
		acc = v;
	}
	return acc;
}

PW(max) { return fold_minmax(c, a, MC_KB_LT); }
PW(min) { return fold_minmax(c, a, MC_KB_GT); }

PW(sum)
{
	mc_kexpr *acc = a[0];
	for (int i = 1; i < c->n_in; i++)
		acc = bin(c, MC_KB_ADD, acc, a[i]);
	return acc;
}

PW(mean)
{
	mc_kexpr *sum = pw_sum(c, a);
	return bin(c, MC_KB_DIV, sum, num(c, sum, c->n_in));
}

/* ---- Clip, Where ---- */

/* min(max(x, lo), hi): with lo > hi every element becomes hi; NaN stays.
 * Before opset 11 the bounds are attributes (infinite when absent). */
PW(clip)
{
	mc_kexpr *x = a[0], *lo = NULL, *hi = NULL;
	if (c->node->opset < 11) {
		const clip_attrs *p = c->node->params;
		if (!(isinf(p->lo) && p->lo < 0))
			lo = num(c, x, p->lo);
		if (!(isinf(p->hi) && p->hi > 0))
			hi = num(c, x, p->hi);
	} else {
		lo = c->n_in > 1 ? a[1] : NULL;
		hi = c->n_in > 2 ? a[2] : NULL;
	}
	if (lo) {
		x = let(c, x);
		lo = let(c, lo);
		x = sel(c, bin(c, MC_KB_LT, x, lo), lo, x);
	}
	if (hi) {
		x = let(c, x);
		hi = let(c, hi);
		x = sel(c, bin(c, MC_KB_GT, x, hi), hi, x);
	}
	return x;
}

PW(where) { return sel(c, a[0], a[1], a[2]); }

/* ---- Cast, CastLike ---- */

static bool is_subbyte_int(mc_dtype t)
{
	return t == MC_INT4 || t == MC_UINT4 || t == MC_INT2 || t == MC_UINT2;
}

/* The largest finite magnitude of a small float type, and the magnitude
 * from which rounding leaves the range (ties round to even: beyond it when
 * the largest code is odd). */
static void small_float_limit(mc_dtype t, double *limit, bool *tie_out)
{
	double max = 0;
	int max_code = 0;
	for (int code = 0; code < 128; code++) {
		double v = mc_small_float_to_double(t, (uint8_t)code);
		if (isfinite(v) && v > max) {
			max = v;
			max_code = code;
		}
	}
	double below = mc_small_float_to_double(t, (uint8_t)(max_code - 1));
	*limit = max + (max - below) / 2;
	*tie_out = (max_code & 1) != 0;
}

/* A value on its way to a small float type's store, as Cast converts it:
 * the store rounds, clamps finite values to the largest one and keeps inf
 * where the type has it (float8e5m2). With saturate, inf clamps too; without,
 * whatever rounding takes out of range becomes inf (float8e5m2) or NaN. */
static mc_kexpr *small_float_range(mc_lower_ctx *c, mc_dtype t, mc_kexpr *v, bool saturate)
{
	const mc_small_float *f = mc_small_float_format(t);
	bool has_inf = f && f->has_inf;
	if (saturate) {
		if (!has_inf)
			return v;
		double max = mc_small_float_to_double(t, (uint8_t)f->max);
		v = let(c, v);
		mc_kexpr *is_inf = bin(c, MC_KB_EQ, un(c, MC_KU_ABS, v), num(c, v, INFINITY));
		mc_kexpr *clamped = sel(c, bin(c, MC_KB_LT, v, num(c, v, 0)), num(c, v, -max),
		                        num(c, v, max));
		return sel(c, is_inf, clamped, v);
	}
	double limit;
	bool tie_out;
	if (t == MC_FLOAT8E8M0) { /* rounding up: 2^-127 .. 2^127 */
		v = let(c, v);
		mc_kexpr *m = let(c, un(c, MC_KU_ABS, v));
		mc_kexpr *ok = bin(c, MC_KB_AND, bin(c, MC_KB_GT, m, num(c, m, ldexp(1, -128))),
		                   bin(c, MC_KB_LE, m, num(c, m, ldexp(1, 127))));
		return sel(c, ok, v, num(c, v, NAN));
	}
	small_float_limit(t, &limit, &tie_out);
	v = let(c, v);
	mc_kexpr *m = un(c, MC_KU_ABS, v);
	mc_kexpr *out = bin(c, tie_out ? MC_KB_GE : MC_KB_GT, m, num(c, m, limit));
	mc_kexpr *beyond = has_inf ? sel(c, bin(c, MC_KB_LT, v, num(c, v, 0)), num(c, v, -INFINITY),
	                                 num(c, v, INFINITY))
	                           : num(c, v, NAN);
	return sel(c, out, beyond, v);
}

/* Cases the C target cannot convert like the reference. */
static int cast_check(mc_lower_ctx *c, mc_dtype to, mc_round_mode round)
{
	mc_dtype from = c->in[0]->dtype;
	if (from == to)
		return 0;
	if (to == MC_FLOAT8E8M0 && round != MC_ROUND_UP)
		return mc_lower_error(c, "conversion to float8e8m0 with round_mode other than \"up\" has "
		                      "no C lowering (not supported)");
	return 0;
}

/* x converted towards `to`: the store (or the caller's cast) does the rest.
 * Floats to 4-bit and 2-bit integers wrap after saturating to int64, as
 * the reference does; small-float targets get small_float_range. */
static mc_kexpr *cast_value(mc_lower_ctx *c, mc_kexpr *x, mc_dtype to, bool saturate)
{
	mc_dtype from = c->in[0]->dtype;
	if (from == to)
		return x;
	if (mc_dtype_is_float(from) && is_subbyte_int(to))
		return mc_k_cast(c->kb, MC_KT_I64, x);
	if (!mc_dtype_is_small_float(to) || to == MC_FLOAT4E2M1)
		return x;
	if (!mc_ktype_is_float(x->type)) {
		if (saturate) /* an integer is never inf */
			return x;
		x = mc_k_cast(c->kb, MC_KT_F64, x);
	}
	return small_float_range(c, to, x, saturate);
}

/* Cast and CastLike: one flat loop (CastLike's input 1 only gives the
 * dtype, whatever its shape). */
static int lower_cast(mc_lower_ctx *c)
{
	const cast_attrs *p = c->node->params;
	mc_dtype to = c->out[0]->dtype;
	if (cast_check(c, to, p->round))
		return -1;
	mc_kb *kb = c->kb;
	mc_kexpr *i = mc_kb_fori(kb, (int64_t)mc_numel(&c->out[0]->shape), MC_KF_PARALLEL | MC_KF_VECTOR);
	mc_lower_store(c, 0, NULL, i, cast_value(c, mc_lower_load(c, 0, i), to, p->saturate));
	mc_kb_end(kb);
	return 0;
}

/* ---- Dropout ---- */

/* The identity in inference; the optional mask is all true (1.0 before
 * opset 10, where it has the input's dtype). */
static int lower_dropout(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	bool mask = c->n_out > 1 && c->out[1] && c->out_buf[1] >= 0;
	bool data = c->out[0] && c->out_buf[0] >= 0;
	mc_kexpr *i = mc_kb_fori(kb, (int64_t)mc_numel(&c->in[0]->shape), MC_KF_PARALLEL | MC_KF_VECTOR);
	if (data)
		mc_lower_store(c, 0, NULL, i, mc_lower_load(c, 0, i));
	if (mask)
		mc_lower_store(c, 1, NULL, i, mc_k_const_as(kb, mc_ktype_of(c->out[1]->dtype), 1));
	mc_kb_end(kb);
	return 0;
}

/* ---- QuantizeLinear, DequantizeLinear ---- */

/* Opens the loops over x and gives the linear index of its element (lin)
 * and of the matching scale / zero point element (param); returns the
 * number of loops to close. Per tensor: one flat loop; per axis: loops
 * over [outer, C, inner]; blocked: one loop per dim of x. */
static int qdq_loops(mc_lower_ctx *c, const qlayout *l, mc_kexpr **lin, mc_kexpr **param)
{
	mc_kb *kb = c->kb;
	const mc_shape *xs = &c->in[0]->shape;
	const mc_shape *ss = &c->in[1]->shape;
	if (l->mode == QL_TENSOR) {
		*lin = mc_kb_fori(kb, (int64_t)mc_numel(xs), MC_KF_PARALLEL | MC_KF_VECTOR);
		*param = mc_k_index(kb, 0);
		return 1;
	}
	if (l->mode == QL_AXIS) {
		int64_t outer = 1, inner = 1, ch = xs->dims[l->axis];
		for (int d = 0; d < l->axis; d++)
			outer *= xs->dims[d];
		for (int d = l->axis + 1; d < xs->rank; d++)
			inner *= xs->dims[d];
		int open = 0;
		mc_kexpr *o = mc_k_index(kb, 0), *in = mc_k_index(kb, 0);
		if (outer > 1) {
			o = mc_kb_fori(kb, outer, MC_KF_PARALLEL);
			open++;
		}
		mc_kexpr *k = mc_kb_fori(kb, ch, MC_KF_PARALLEL);
		open++;
		if (inner > 1) {
			in = mc_kb_fori(kb, inner, MC_KF_PARALLEL | MC_KF_VECTOR);
			open++;
		}
		*lin = mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, o, ch), k), inner), in);
		*param = k;
		return open;
	}
	mc_kexpr *coords[MC_MAX_RANK], *pc[MC_MAX_RANK];
	mc_lower_loops(kb, xs, coords, MC_KF_PARALLEL);
	for (int d = 0; d < xs->rank; d++)
		pc[d] = d == l->axis ? mc_k_div(kb, coords[d], mc_k_index(kb, l->block)) : coords[d];
	*lin = mc_lower_linear(kb, xs, coords);
	*param = mc_lower_linear(kb, ss, pc);
	return xs->rank;
}

/* Round half to even, then clamp to [lo, hi] (v is never NaN here). */
static mc_kexpr *round_clamp(mc_lower_ctx *c, mc_kexpr *v, int64_t lo, int64_t hi)
{
	v = let(c, un(c, MC_KU_RINT, v));
	return sel(c, bin(c, MC_KB_LT, v, num(c, v, (double)lo)), num(c, v, (double)lo),
	           sel(c, bin(c, MC_KB_GT, v, num(c, v, (double)hi)), num(c, v, (double)hi), v));
}

/* y = saturate(round(x / scale) + zero_point), or for float8 / float4
 * outputs the conversion of x / scale + zero_point. The division runs at
 * the reference's precision: double, or float32 (float16 / bfloat16
 * precision rounds the float32 quotient through a scratch element). */
static int lower_quantize(mc_lower_ctx *c)
{
	if (!c->out[0] || c->out_buf[0] < 0)
		return 0;
	const qdq_params *p = c->node->params;
	const mc_value *x = c->in[0], *scale = c->in[1];
	bool has_zp = c->n_in > 2 && c->in[2];
	qlayout l;
	if (mc_qlayout_infer(c->node, p, &x->shape, scale, has_zp ? c->in[2] : NULL, &l))
		return -1;
	mc_dtype out = c->out[0]->dtype;
	mc_dtype prec = p->precision ? (mc_dtype)p->precision : mc_quant_promote(x->dtype, scale->dtype);
	mc_ktype ft = prec == MC_DOUBLE ? MC_KT_F64 : MC_KT_F32;
	bool to_float = mc_dtype_is_small_float(out);
	if (to_float && cast_check(c, out, MC_ROUND_UP))
		return -1;
	mc_kb *kb = c->kb;
	int rounding = -1;
	if (prec == MC_FLOAT16 || prec == MC_BFLOAT16)
		rounding = mc_kb_scratch(kb, prec, mc_numel(&x->shape));
	mc_kexpr *lin, *pi;
	int open = qdq_loops(c, &l, &lin, &pi);
	lin = let(c, lin);
	pi = let(c, pi);
	mc_kexpr *q = bin(c, MC_KB_DIV, mc_k_cast(kb, ft, mc_lower_load(c, 0, lin)),
	                  mc_k_cast(kb, ft, mc_lower_load(c, 1, pi)));
	if (rounding >= 0) {
		mc_kb_store(kb, rounding, lin, q);
		q = mc_k_load(kb, rounding, lin);
	}
	q = let(c, q);
	mc_kexpr *zp = has_zp ? mc_k_cast(kb, ft, mc_lower_load(c, 2, pi)) : mc_k_float(kb, ft, 0);
	mc_kexpr *y;
	if (to_float) {
		y = bin(c, MC_KB_ADD, q, zp);
		if (prec != MC_DOUBLE)
			y = mc_k_cast(kb, MC_KT_F32, y);
		if (out != MC_FLOAT4E2M1)
			y = small_float_range(c, out, y, p->saturate);
	} else {
		int64_t lo, hi;
		mc_quant_range(out, &lo, &hi);
		/* NaN quantizes to the zero point */
		mc_kexpr *finite = sel(c, un(c, MC_KU_ISNAN, q), mc_k_float(kb, ft, 0), q);
		y = round_clamp(c, bin(c, MC_KB_ADD, un(c, MC_KU_RINT, finite), zp), lo, hi);
		y = mc_k_cast(kb, mc_ktype_of(out), y);
	}
	mc_lower_store(c, 0, NULL, lin, y);
	mc_kb_end_n(kb, open);
	return 0;
}

/* y = (x - zero_point) * scale; integers are centred in a type wide enough
 * not to wrap, float8 / float4 codes as their values. */
static int lower_dequantize(mc_lower_ctx *c)
{
	if (!c->out[0] || c->out_buf[0] < 0)
		return 0;
	const qdq_params *p = c->node->params;
	const mc_value *x = c->in[0], *scale = c->in[1];
	bool has_zp = c->n_in > 2 && c->in[2];
	qlayout l;
	if (mc_qlayout_infer(c->node, p, &x->shape, scale, has_zp ? c->in[2] : NULL, &l))
		return -1;
	mc_kb *kb = c->kb;
	mc_ktype ft = mc_ktype_of(c->out[0]->dtype);
	mc_ktype wide = mc_dtype_is_float(x->dtype) ? MC_KT_F32
	                : x->dtype == MC_INT32 ? MC_KT_I64 : MC_KT_I32;
	mc_kexpr *lin, *pi;
	int open = qdq_loops(c, &l, &lin, &pi);
	lin = let(c, lin);
	pi = let(c, pi);
	mc_kexpr *centered = mc_k_cast(kb, wide, mc_lower_load(c, 0, lin));
	if (has_zp)
		centered = bin(c, MC_KB_SUB, centered, mc_k_cast(kb, wide, mc_lower_load(c, 2, pi)));
	mc_kexpr *y = bin(c, MC_KB_MUL, mc_k_cast(kb, ft, centered),
	                  mc_k_cast(kb, ft, mc_lower_load(c, 1, pi)));
	mc_lower_store(c, 0, NULL, lin, y);
	mc_kb_end_n(kb, open);
	return 0;
}

/* ---- DynamicQuantizeLinear ---- */

/* Two passes, in float32 like the reference: the range [min(x, 0),
 * max(x, 0)] gives the scale and the zero point, then x is quantized. */
static int lower_dynamic_quantize(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	int64_t n = (int64_t)mc_numel(&c->in[0]->shape);
	mc_kexpr *maxx = mc_kb_local(kb, mc_k_float(kb, MC_KT_F32, 0));
	mc_kexpr *minx = mc_kb_local(kb, mc_k_float(kb, MC_KT_F32, 0));
	mc_kexpr *i = mc_kb_fori(kb, n, MC_KF_REDUCE);
	mc_kexpr *v = let(c, mc_k_cast(kb, MC_KT_F32, mc_lower_load(c, 0, i)));
	mc_kb_assign(kb, maxx, sel(c, bin(c, MC_KB_GT, v, maxx), v, maxx));
	mc_kb_assign(kb, minx, sel(c, bin(c, MC_KB_LT, v, minx), v, minx));
	mc_kb_end(kb);
	/* the range always holds 0: empty only when x is all zeros; scale 1 then */
	mc_kexpr *one = mc_k_float(kb, MC_KT_F32, 1);
	mc_kexpr *scale = let(c, sel(c, bin(c, MC_KB_EQ, maxx, minx), one,
	                               bin(c, MC_KB_DIV, bin(c, MC_KB_SUB, maxx, minx),
	                                   mc_k_float(kb, MC_KT_F32, 255))));
	mc_kexpr *zpf = let(c, bin(c, MC_KB_SUB, mc_k_float(kb, MC_KT_F32, 0),
	                           bin(c, MC_KB_DIV, minx, scale)));
	/* a NaN zero point (x holding -inf and inf) becomes 0 */
	zpf = sel(c, un(c, MC_KU_ISNAN, zpf), mc_k_float(kb, MC_KT_F32, 0), zpf);
	mc_kexpr *zp = let(c, round_clamp(c, zpf, 0, 255));
	if (c->n_out > 1 && c->out[1] && c->out_buf[1] >= 0)
		mc_lower_store(c, 1, NULL, mc_k_index(kb, 0), scale);
	if (c->n_out > 2 && c->out[2] && c->out_buf[2] >= 0)
		mc_lower_store(c, 2, NULL, mc_k_index(kb, 0), mc_k_cast(kb, MC_KT_U8, zp));
	if (c->out[0] && c->out_buf[0] >= 0) {
		i = mc_kb_fori(kb, n, MC_KF_PARALLEL | MC_KF_VECTOR);
		mc_kexpr *q = let(c, bin(c, MC_KB_DIV, mc_k_cast(kb, MC_KT_F32, mc_lower_load(c, 0, i)),
		                         scale));
		mc_kexpr *y = sel(c, un(c, MC_KU_ISNAN, q), zp,
		                  round_clamp(c, bin(c, MC_KB_ADD, un(c, MC_KU_RINT, q), zp), 0, 255));
		mc_lower_store(c, 0, NULL, i, mc_k_cast(kb, MC_KT_U8, y));
		mc_kb_end(kb);
	}
	return 0;
}

/* ---- the integer ops of quantized regions (libcore/ops/qint.h) ---- */

static const qi_params *qi(const mc_lower_ctx *c)
{
	return c->node->params;
}

static mc_kexpr *i64(mc_lower_ctx *c, int64_t v)
{
	return mc_k_int(c->kb, MC_KT_I64, v);
}

/* x - zp in i64. */
static mc_kexpr *centred(mc_lower_ctx *c, mc_kexpr *x, int64_t zp)
{
	return bin(c, MC_KB_SUB, mc_k_cast(c->kb, MC_KT_I64, x), i64(c, zp));
}

/* x - zp in i32 (|x - zp| <= 255 for 8-bit operands). */
static mc_kexpr *centred32(mc_lower_ctx *c, mc_kexpr *x, int64_t zp)
{
	return bin(c, MC_KB_SUB, mc_k_cast(c->kb, MC_KT_I32, x), mc_k_int(c->kb, MC_KT_I32, zp));
}

/* QiAdd and QiRequant take i32 arithmetic alone where its bounds hold
 * (mc_lower_requant_terms): their lane-wise vector form too. */
bool mc_lower_has_ivec_form(const mc_node *n)
{
	const qi_params *p = n->params;
	if (n->id == MC_OP_QiAdd) {
		int64_t m[2] = { p->mult, p->b_mult };
		return mc_requant_terms_fit(2, m, p->shift);
	}
	return n->id == MC_OP_QiRequant && mc_requant_terms_fit(1, &p->mult, p->shift);
}

PW(qiadd)
{
	const qi_params *p = qi(c);
	mc_kexpr *x[2] = { centred32(c, a[0], p->x_zp), centred32(c, a[1], p->b_zp) };
	int64_t m[2] = { p->mult, p->b_mult };
	mc_kexpr *r = mc_lower_requant_terms(c->kb, 2, x, m, p->shift, p->y_zp, p->lo, p->hi);
	if (r)
		return r;
	mc_kexpr *sum = bin(c, MC_KB_ADD, bin(c, MC_KB_MUL, centred(c, a[0], p->x_zp), i64(c, p->mult)),
	                    bin(c, MC_KB_MUL, centred(c, a[1], p->b_zp), i64(c, p->b_mult)));
	/* |x - zp| <= 255 for 8-bit operands */
	return mc_lower_requant_bounded(c->kb, sum, NULL, i64(c, p->shift), p->y_zp, p->lo, p->hi,
	                                255 * (llabs(p->mult) + llabs(p->b_mult)));
}

PW(qimul)
{
	const qi_params *p = qi(c);
	mc_kexpr *prod = bin(c, MC_KB_MUL, centred(c, a[0], p->x_zp), centred(c, a[1], p->b_zp));
	return mc_lower_requant_bounded(c->kb, prod, i64(c, p->mult), i64(c, p->shift), p->y_zp, p->lo, p->hi,
	                                255 * 255 * llabs(p->mult));
}

PW(qirequant)
{
	const qi_params *p = qi(c);
	mc_kexpr *x = centred32(c, a[0], p->x_zp);
	mc_kexpr *r = mc_lower_requant_terms(c->kb, 1, &x, &p->mult, p->shift, p->y_zp, p->lo, p->hi);
	if (r)
		return r;
	return mc_lower_requant_bounded(c->kb, centred(c, a[0], p->x_zp), i64(c, p->mult), i64(c, p->shift),
	                                p->y_zp, p->lo, p->hi, 255 * llabs(p->mult));
}

/* mc_qi_quantize: rint(x * inv_scale) + y_zp clamped, in f32 (exact:
 * beyond 2^24 the clamp decides); NaN gives y_zp clamped. */
PW(qiquantize)
{
	const qi_params *p = qi(c);
	mc_kb *kb = c->kb;
	mc_kexpr *v = let(c, un(c, MC_KU_RINT, bin(c, MC_KB_MUL, a[0], mc_k_float(kb, MC_KT_F32,
	                                                                      (float)p->inv_scale))));
	mc_kexpr *r = bin(c, MC_KB_ADD, v, mc_k_float(kb, MC_KT_F32, (double)p->y_zp));
	r = bin(c, MC_KB_MAX, r, mc_k_float(kb, MC_KT_F32, (double)p->lo));
	r = bin(c, MC_KB_MIN, r, mc_k_float(kb, MC_KT_F32, (double)p->hi));
	int64_t z = p->y_zp < p->lo ? p->lo : p->y_zp > p->hi ? p->hi : p->y_zp;
	return sel(c, un(c, MC_KU_ISNAN, v), mc_k_int(kb, MC_KT_I32, z), mc_k_cast(kb, MC_KT_I32, r));
}

/* QiLut: y = table[x - lowest]. */
static int lower_qilut(mc_lower_ctx *c)
{
	if (!c->out[0])
		return 0;
	mc_kb *kb = c->kb;
	int64_t base = c->in[0]->dtype == MC_INT8 ? -128 : 0;
	mc_kexpr *i = mc_kb_fori(kb, (int64_t)mc_numel(&c->out[0]->shape), MC_KF_PARALLEL);
	mc_kexpr *x = mc_k_cast(kb, MC_KT_INDEX, mc_lower_load(c, 0, i));
	mc_kexpr *y = mc_lower_load(c, 1, mc_k_addi(kb, x, -base));
	mc_lower_store(c, 0, NULL, i, y);
	mc_kb_end(kb);
	return 0;
}

/* ---- the table ---- */

#define POINTWISE(var, name, fn) static const mc_lowering var = { name, NULL, pw_##fn, 0 }
POINTWISE(l_relu, MC_OP_Relu, relu);
POINTWISE(l_leaky_relu, MC_OP_LeakyRelu, leaky_relu);
POINTWISE(l_sigmoid, MC_OP_Sigmoid, sigmoid);
POINTWISE(l_hard_sigmoid, MC_OP_HardSigmoid, hard_sigmoid);
POINTWISE(l_hard_swish, MC_OP_HardSwish, hard_swish);
POINTWISE(l_tanh, MC_OP_Tanh, tanh);
POINTWISE(l_exp, MC_OP_Exp, exp);
POINTWISE(l_log, MC_OP_Log, log);
POINTWISE(l_sqrt, MC_OP_Sqrt, sqrt);
POINTWISE(l_erf, MC_OP_Erf, erf);
POINTWISE(l_neg, MC_OP_Neg, neg);
POINTWISE(l_abs, MC_OP_Abs, abs);
POINTWISE(l_reciprocal, MC_OP_Reciprocal, reciprocal);
POINTWISE(l_floor, MC_OP_Floor, floor);
POINTWISE(l_ceil, MC_OP_Ceil, ceil);
POINTWISE(l_round, MC_OP_Round, round);
POINTWISE(l_sign, MC_OP_Sign, sign);
POINTWISE(l_sin, MC_OP_Sin, sin);
POINTWISE(l_cos, MC_OP_Cos, cos);
POINTWISE(l_tan, MC_OP_Tan, tan);
POINTWISE(l_asin, MC_OP_Asin, asin);
POINTWISE(l_acos, MC_OP_Acos, acos);
POINTWISE(l_atan, MC_OP_Atan, atan);
POINTWISE(l_sinh, MC_OP_Sinh, sinh);
POINTWISE(l_cosh, MC_OP_Cosh, cosh);
POINTWISE(l_asinh, MC_OP_Asinh, asinh);
POINTWISE(l_acosh, MC_OP_Acosh, acosh);
POINTWISE(l_atanh, MC_OP_Atanh, atanh);
POINTWISE(l_elu, MC_OP_Elu, elu);
POINTWISE(l_selu, MC_OP_Selu, selu);
POINTWISE(l_celu, MC_OP_Celu, celu);
POINTWISE(l_softplus, MC_OP_Softplus, softplus);
POINTWISE(l_softsign, MC_OP_Softsign, softsign);
POINTWISE(l_thresholded_relu, MC_OP_ThresholdedRelu, thresholded_relu);
POINTWISE(l_gelu, MC_OP_Gelu, gelu);
POINTWISE(l_mish, MC_OP_Mish, mish);
POINTWISE(l_isnan, MC_OP_IsNaN, isnan);
POINTWISE(l_isinf, MC_OP_IsInf, isinf);
POINTWISE(l_shrink, MC_OP_Shrink, shrink);
POINTWISE(l_bitwise_not, MC_OP_BitwiseNot, bitwise_not);
POINTWISE(l_not, MC_OP_Not, not);
POINTWISE(l_swish, MC_OP_Swish, swish);
POINTWISE(l_add, MC_OP_Add, add);
POINTWISE(l_sub, MC_OP_Sub, sub);
POINTWISE(l_mul, MC_OP_Mul, mul);
POINTWISE(l_div, MC_OP_Div, div);
POINTWISE(l_pow, MC_OP_Pow, pow);
POINTWISE(l_mod, MC_OP_Mod, mod);
POINTWISE(l_prelu, MC_OP_PRelu, prelu);
POINTWISE(l_bitshift, MC_OP_BitShift, bitshift);
POINTWISE(l_bitwise_and, MC_OP_BitwiseAnd, bitwise_and);
POINTWISE(l_bitwise_or, MC_OP_BitwiseOr, bitwise_or);
POINTWISE(l_bitwise_xor, MC_OP_BitwiseXor, bitwise_xor);
POINTWISE(l_equal, MC_OP_Equal, equal);
POINTWISE(l_less, MC_OP_Less, less);
POINTWISE(l_greater, MC_OP_Greater, greater);
POINTWISE(l_less_equal, MC_OP_LessOrEqual, less_equal);
POINTWISE(l_greater_equal, MC_OP_GreaterOrEqual, greater_equal);
POINTWISE(l_and, MC_OP_And, and);
POINTWISE(l_or, MC_OP_Or, or);
POINTWISE(l_xor, MC_OP_Xor, xor);
POINTWISE(l_max, MC_OP_Max, max);
POINTWISE(l_min, MC_OP_Min, min);
POINTWISE(l_sum, MC_OP_Sum, sum);
POINTWISE(l_mean, MC_OP_Mean, mean);
POINTWISE(l_clip, MC_OP_Clip, clip);
POINTWISE(l_where, MC_OP_Where, where);

static const mc_lowering l_cast = { MC_OP_Cast, lower_cast, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_castlike = { MC_OP_CastLike, lower_cast, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_identity = { MC_OP_Identity, mc_lower_copy, NULL,
	                                    MC_LOWER_ALIAS | MC_LOWER_EPILOGUE };
/* Not an alias: the optional mask output needs a kernel of its own. */
static const mc_lowering l_dropout = { MC_OP_Dropout, lower_dropout, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_quantize = { MC_OP_QuantizeLinear, lower_quantize, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_dequantize = { MC_OP_DequantizeLinear, lower_dequantize, NULL,
	                                      MC_LOWER_EPILOGUE };
static const mc_lowering l_dynamic_quantize = { MC_OP_DynamicQuantizeLinear, lower_dynamic_quantize,
	                                            NULL, MC_LOWER_EPILOGUE };

POINTWISE(l_qiadd, MC_OP_QiAdd, qiadd);
POINTWISE(l_qimul, MC_OP_QiMul, qimul);
POINTWISE(l_qirequant, MC_OP_QiRequant, qirequant);
POINTWISE(l_qiquantize, MC_OP_QiQuantize, qiquantize);
static const mc_lowering l_qilut = { MC_OP_QiLut, lower_qilut, NULL, MC_LOWER_EPILOGUE };

const mc_lowering *const mc_lower_elementwise[] = {
	/* unary */
	&l_relu, &l_leaky_relu, &l_sigmoid, &l_hard_sigmoid, &l_hard_swish, &l_tanh, &l_exp,
	&l_log, &l_sqrt, &l_erf, &l_neg, &l_abs, &l_reciprocal, &l_floor, &l_ceil, &l_round,
	&l_sign, &l_sin, &l_cos, &l_tan, &l_asin, &l_acos, &l_atan, &l_sinh, &l_cosh, &l_asinh,
	&l_acosh, &l_atanh, &l_elu, &l_selu, &l_celu, &l_softplus, &l_softsign,
	&l_thresholded_relu, &l_gelu, &l_mish, &l_isnan, &l_isinf, &l_shrink, &l_bitwise_not,
	&l_not, &l_swish,
	/* binary and variadic */
	&l_add, &l_sub, &l_mul, &l_div, &l_pow, &l_mod, &l_prelu, &l_bitshift, &l_bitwise_and,
	&l_bitwise_or, &l_bitwise_xor, &l_equal, &l_less, &l_greater, &l_less_equal,
	&l_greater_equal, &l_and, &l_or, &l_xor, &l_max, &l_min, &l_sum, &l_mean,
	/* the rest */
	&l_clip, &l_where, &l_cast, &l_castlike, &l_identity, &l_dropout,
	/* quantisation */
	&l_quantize, &l_dequantize, &l_dynamic_quantize,
	&l_qiadd, &l_qimul, &l_qirequant, &l_qiquantize, &l_qilut,
	NULL,
};
