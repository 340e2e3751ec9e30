/* Elementwise ops: unary maths, binary and variadic arithmetic with numpy
 * broadcasting, comparisons, logic and bitwise ops, Clip, Where, Cast,
 * CastLike, Identity and Dropout (inference).
 *
 * Every op with broadcasting runs through one N-ary loop, broadcast_each.
 * Values are computed in one of three classes so that results are exact:
 * double for floating types, int64 for signed integers and bool, uint64 for
 * unsigned integers (wrap-around, division and comparisons differ). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "elementwise.h"
#include "ops.h"

/* ---- dtype sets ---- */

enum {
	T_FLOAT = 1u << 0, /* float16/32/64, bfloat16 */
	T_SINT = 1u << 1,
	T_UINT = 1u << 2,
	T_BOOL = 1u << 3,
	T_INT = T_SINT | T_UINT,
	T_SIGNED = T_FLOAT | T_SINT,
	T_NUM = T_FLOAT | T_INT,
	T_ANY = T_NUM | T_BOOL,
};

static unsigned type_bit(mc_dtype t)
{
	if (mc_dtype_is_float(t))
		return T_FLOAT;
	if (mc_dtype_is_int(t))
		return mc_dtype_is_signed(t) ? T_SINT : T_UINT;
	return t == MC_BOOL ? T_BOOL : 0;
}

static int check_dtype(const mc_node *n, int input, mc_dtype t, unsigned allowed)
{
	if (type_bit(t) & allowed)
		return 0;
	return mc_node_error(n, "input %d has dtype %s, which this op does not support", input,
	                     mc_dtype_name(t));
}

/* ---- values in their computation class ---- */

typedef enum { CLS_F, CLS_I, CLS_U } num_class;

/* Reading .u of a CLS_I value (or .i of CLS_U) reinterprets the same 64
 * bits, which gives wrapping add/sub/mul for both classes at once. */
typedef union {
	double f;
	int64_t i;
	uint64_t u;
} num;

static num nf(double v) { return (num){.f = v}; }
static num ni(int64_t v) { return (num){.i = v}; }
static num nu(uint64_t v) { return (num){.u = v}; }
static num nbool(bool v) { return (num){.i = v}; }

static num_class class_of(mc_dtype t)
{
	if (mc_dtype_is_float(t))
		return CLS_F;
	return type_bit(t) == T_UINT ? CLS_U : CLS_I;
}

static num load(const mc_tensor *t, size_t i, num_class k)
{
	return k == CLS_F ? nf(mc_get_f(t, i)) : ni(mc_get_i(t, i));
}

static void store(mc_tensor *t, size_t i, num_class k, num v)
{
	if (k == CLS_F)
		mc_set_f(t, i, v.f);
	else
		mc_set_i(t, i, v.i); /* truncates to the dtype's width */
}

static double to_double(num_class k, num v)
{
	return k == CLS_F ? v.f : k == CLS_I ? (double)v.i : (double)v.u;
}

/* Float to integer saturates (NaN gives 0): ONNX leaves it undefined, and
 * a plain C conversion would be UB. */
static num from_double(num_class k, double v)
{
	if (k == CLS_F)
		return nf(v);
	if (v != v)
		return ni(0);
	if (k == CLS_U)
		return nu(v <= 0 ? 0 : v >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)v);
	if (v <= -9223372036854775808.0)
		return ni(INT64_MIN);
	return ni(v >= 9223372036854775808.0 ? INT64_MAX : (int64_t)v);
}

/* ---- the generic N-ary broadcasting loop ---- */

typedef void (*element_fn)(void *state, const size_t *at, size_t o);

/* Calls fn once per element o of a tensor shaped `out` (row-major order),
 * with at[k] the offset of the matching element of input k, whose shape
 * `views[k]` broadcasts against `out` (numpy rules, right-aligned). */
static void broadcast_each(int n, const mc_shape *views, const mc_shape *out, element_fn fn,
                           void *state)
{
	int rank = out->rank;
	int64_t(*strides)[MC_MAX_RANK] = mc_xcalloc((size_t)n, sizeof *strides);
	size_t *at = mc_xcalloc((size_t)n, sizeof *at);
	int64_t idx[MC_MAX_RANK] = {0};
	size_t total = mc_numel(out);
	for (int k = 0; k < n; k++)
		mc_broadcast_strides(&views[k], out, strides[k]);
	for (size_t o = 0; o < total; o++) {
		fn(state, at, o);
		/* odometer step: the innermost dim first, carrying outwards */
		for (int d = rank - 1; d >= 0; d--) {
			for (int k = 0; k < n; k++)
				at[k] += (size_t)strides[k][d];
			if (++idx[d] < out->dims[d])
				break;
			for (int k = 0; k < n; k++)
				at[k] -= (size_t)(strides[k][d] * out->dims[d]);
			idx[d] = 0;
		}
	}
	free(strides);
	free(at);
}

/* ---- op descriptors ---- */

/* Numeric attributes of an op, read in parse into attr_vals in order. */
typedef struct {
	const char *name;
	double dflt;
	bool is_int;
} attr_spec;

typedef struct {
	num_class cls;       /* class of input 0 (and of the others) */
	num_class cls_b;     /* class of input 1: differs only for Pow */
	const attr_vals *p;  /* the node's attributes */
	bool div_by_zero;    /* set by integer Div / Mod */
} kernel_env;

typedef num (*unary_fn)(kernel_env *e, num a);
typedef num (*binary_fn)(kernel_env *e, num a, num b);

enum {
	/* Before opset 7: attributes broadcast/axis align input 1 at axis. */
	F_LEGACY_BCAST = 1u << 0,
	/* Input 1 broadcasts to input 0, never the reverse (PRelu). */
	F_UNIDIR = 1u << 1,
	/* Input 1 may have another numeric dtype (Pow's exponent). */
	F_MIXED = 1u << 2,
	/* Divide the folded sum by the input count (Mean). */
	F_MEAN = 1u << 3,
};

/* A map op computes each output element from the broadcast elements of
 * its inputs: unary ops apply `un` (or the libm function `math`), binary
 * and variadic ops fold `bin` left to right. */
typedef struct {
	mc_op op;            /* first member: node->op points here */
	unsigned types;      /* accepted dtypes of the inputs (T_*) */
	mc_dtype out;        /* fixed output dtype; MC_UNDEFINED: input 0's */
	double (*math)(double);
	unary_fn un;
	binary_fn bin;
	const attr_spec *attrs;
	int (*check)(mc_node *n, attr_vals *p); /* extra attribute validation */
	unsigned flags;
} ew_op;

static const ew_op *ew_of(const mc_node *n) { return (const ew_op *)n->op; }

static int map_parse(mc_node *n)
{
	const ew_op *e = ew_of(n);
	attr_vals *p = mc_params_new(n, sizeof *p);
	for (int k = 0; e->attrs && e->attrs[k].name; k++) {
		const attr_spec *s = &e->attrs[k];
		if (s->is_int) {
			int64_t v;
			if (mc_attr_int(n, s->name, (int64_t)s->dflt, &v))
				return -1;
			p->v[k] = (double)v;
		} else if (mc_attr_float(n, s->name, s->dflt, &p->v[k])) {
			return -1;
		}
	}
	return e->check ? e->check(n, p) : 0;
}

/* Old (opset < 7) broadcasting: with broadcast=1, input 1's shape lines up
 * with input 0's dims starting at `axis` (default: as a suffix); trailing
 * ones make that a numpy-style right alignment. Without it, shapes must be
 * equal. */
static int legacy_view(const mc_node *n, const mc_shape *a, const mc_shape *b, mc_shape *view)
{
	int64_t bcast, axis;
	if (mc_attr_int(n, "broadcast", 0, &bcast) ||
	    mc_attr_int(n, "axis", a->rank - b->rank, &axis))
		return -1;
	*view = *b;
	if (!bcast && !mc_shape_eq(a, b)) {
		char sa[256], sb[256];
		return mc_node_error(n, "input shapes %s and %s differ; before opset 7 that needs "
		                     "broadcast=1", mc_shape_str(a, sa, sizeof sa),
		                     mc_shape_str(b, sb, sizeof sb));
	}
	if (!bcast)
		return 0;
	int64_t at = axis < 0 ? axis + a->rank : axis;
	if (at < 0 || b->rank > a->rank || at > a->rank - b->rank)
		return mc_node_error(n, "legacy broadcast of a rank-%d input at axis %lld does not fit "
		                     "rank %d", b->rank, (long long)axis, a->rank);
	for (int d = b->rank; d < a->rank - (int)at; d++)
		view->dims[view->rank++] = 1;
	return 0;
}

/* PRelu before opset 7 applied a 1-D slope along the channel axis (1). */
static void old_prelu_view(const mc_shape *x, const mc_shape *slope, mc_shape *view)
{
	*view = *slope;
	if (slope->rank != 1 || x->rank < 2 || slope->dims[0] != x->dims[1] || slope->dims[0] == 1)
		return;
	for (int d = 2; d < x->rank; d++)
		view->dims[view->rank++] = 1;
}

/* The shape each input is broadcast as (views) and the output shape. */
int mc_ew_shapes(const mc_node *n, int count, const mc_shape *shapes, mc_shape *views,
                 mc_shape *out)
{
	const ew_op *e = ew_of(n);
	char a[256], b[256];
	for (int k = 0; k < count; k++)
		views[k] = shapes[k];
	if ((e->flags & F_LEGACY_BCAST) && n->opset < 7 && count == 2) {
		if (legacy_view(n, &shapes[0], &shapes[1], &views[1]))
			return -1;
		if (!mc_broadcast(&shapes[0], &views[1], out) || !mc_shape_eq(out, &shapes[0]))
			return mc_node_error(n, "input shapes %s and %s are incompatible for legacy "
			                     "broadcasting",
			                     mc_shape_str(&shapes[0], a, sizeof a),
			                     mc_shape_str(&shapes[1], b, sizeof b));
		return 0;
	}
	if ((e->flags & F_UNIDIR) && count == 2) {
		if (n->opset < 7)
			old_prelu_view(&shapes[0], &shapes[1], &views[1]);
		if (!mc_broadcast(&shapes[0], &views[1], out) || !mc_shape_eq(out, &shapes[0]))
			return mc_node_error(n, "input 1 of shape %s does not broadcast to input 0 of "
			                     "shape %s", mc_shape_str(&shapes[1], b, sizeof b),
			                     mc_shape_str(&shapes[0], a, sizeof a));
		return 0;
	}
	*out = shapes[0];
	for (int k = 1; k < count; k++) {
		mc_shape next;
		if (!mc_broadcast(out, &shapes[k], &next))
			return mc_node_error(n, "input %d of shape %s does not broadcast with shape %s", k,
			                     mc_shape_str(&shapes[k], b, sizeof b),
			                     mc_shape_str(out, a, sizeof a));
		*out = next;
	}
	return 0;
}

static int map_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const ew_op *e = ew_of(n);
	mc_dtype t = c->in[0]->dtype;
	if (check_dtype(n, 0, t, e->types))
		return -1;
	for (int k = 1; k < c->n_in; k++) {
		mc_dtype tk = c->in[k]->dtype;
		if (e->flags & F_MIXED) {
			if (check_dtype(n, k, tk, T_NUM))
				return -1;
		} else if (tk != t) {
			return mc_node_error(n, "input %d has dtype %s but input 0 has %s; they must match",
			                     k, mc_dtype_name(tk), mc_dtype_name(t));
		}
	}
	mc_shape *shapes = mc_xmalloc((size_t)c->n_in * 2 * sizeof *shapes), out;
	for (int k = 0; k < c->n_in; k++)
		shapes[k] = c->in[k]->shape;
	int rc = mc_ew_shapes(n, c->n_in, shapes, shapes + c->n_in, &out);
	free(shapes);
	if (rc)
		return -1;
	mc_set_out(c, 0, e->out ? e->out : t, &out);
	return 0;
}

typedef struct {
	const ew_op *e;
	const mc_tensor *const *in;
	int n;
	mc_tensor *out;
	num_class out_cls;
	kernel_env env;
} map_state;

static void map_element(void *state, const size_t *at, size_t o)
{
	map_state *s = state;
	const ew_op *e = s->e;
	num acc = load(s->in[0], at[0], s->env.cls);
	if (e->math)
		acc = nf(e->math(acc.f));
	else if (e->un)
		acc = e->un(&s->env, acc);
	for (int k = 1; k < s->n; k++)
		acc = e->bin(&s->env, acc, load(s->in[k], at[k], k == 1 ? s->env.cls_b : s->env.cls));
	if (e->flags & F_MEAN)
		acc.f /= s->n;
	store(s->out, o, s->out_cls, acc);
}

static int map_eval(mc_eval_ctx *c)
{
	const ew_op *e = ew_of(c->node);
	mc_shape *shapes = mc_xmalloc((size_t)c->n_in * 2 * sizeof *shapes), *views, out;
	views = shapes + c->n_in;
	for (int k = 0; k < c->n_in; k++)
		shapes[k] = c->in[k]->shape;
	int rc = mc_ew_shapes(c->node, c->n_in, shapes, views, &out);
	if (!rc) {
		const mc_tensor *b = c->n_in > 1 ? c->in[1] : c->in[0];
		map_state s = {
			.e = e, .in = c->in, .n = c->n_in, .out = c->out[0],
			.out_cls = class_of(c->out[0]->dtype),
			.env = {.cls = class_of(c->in[0]->dtype), .cls_b = class_of(b->dtype),
			        .p = c->node->params},
		};
		broadcast_each(c->n_in, views, &c->out[0]->shape, map_element, &s);
		if (s.env.div_by_zero)
			rc = mc_node_error(c->node, "integer division by zero");
	}
	free(shapes);
	return rc;
}

/* ---- unary kernels ---- */

/* Attribute slots, in the order of each op's attr_spec list. */
#define ALPHA(e) ((e)->p->v[0])
#define BETA(e) ((e)->p->v[1])

static num un_relu(kernel_env *e, num a)
{
	if (e->cls == CLS_F)
		return nf(a.f < 0 ? 0 : a.f);
	return e->cls == CLS_I && a.i < 0 ? ni(0) : a;
}

static num un_neg(kernel_env *e, num a)
{
	return e->cls == CLS_F ? nf(-a.f) : nu(0 - a.u);
}

static num un_abs(kernel_env *e, num a)
{
	if (e->cls == CLS_F)
		return nf(fabs(a.f));
	return e->cls == CLS_I && a.i < 0 ? nu(0 - a.u) : a;
}

static num un_sign(kernel_env *e, num a)
{
	switch (e->cls) {
	case CLS_F: return nf(a.f > 0 ? 1 : a.f < 0 ? -1 : a.f == 0 ? 0 : a.f);
	case CLS_I: return ni((a.i > 0) - (a.i < 0));
	default: return nu(a.u != 0);
	}
}

static num un_reciprocal(kernel_env *e, num a) { (void)e; return nf(1 / a.f); }

static num un_sigmoid(kernel_env *e, num a)
{
	(void)e;
	double x = a.f;
	/* exp of a non-positive argument never overflows */
	return nf(x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)));
}

static double clamp01(double v) { return v < 0 ? 0 : v > 1 ? 1 : v; }

static num un_hard_sigmoid(kernel_env *e, num a) { return nf(clamp01(ALPHA(e) * a.f + BETA(e))); }

static num un_hard_swish(kernel_env *e, num a)
{
	(void)e;
	return nf(a.f * clamp01(a.f / 6 + 0.5));
}

static num un_leaky_relu(kernel_env *e, num a) { return nf(a.f < 0 ? ALPHA(e) * a.f : a.f); }

static num un_elu(kernel_env *e, num a) { return nf(a.f < 0 ? ALPHA(e) * expm1(a.f) : a.f); }

/* Selu: attributes alpha, gamma */
static num un_selu(kernel_env *e, num a)
{
	double x = a.f, gamma = BETA(e);
	return nf(x > 0 ? gamma * x : gamma * ALPHA(e) * expm1(x));
}

static num un_celu(kernel_env *e, num a)
{
	double x = a.f, alpha = ALPHA(e);
	return nf(x > 0 ? x : alpha * expm1(x / alpha));
}

static double softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

static num un_softplus(kernel_env *e, num a) { (void)e; return nf(softplus(a.f)); }

static num un_softsign(kernel_env *e, num a) { (void)e; return nf(a.f / (1 + fabs(a.f))); }

static num un_thresholded_relu(kernel_env *e, num a) { return nf(a.f > ALPHA(e) ? a.f : 0); }

/* Gelu: slot 0 is 1 for approximate="tanh"; the constants are sqrt(2/pi)
 * and 1/sqrt(2). */
static num un_gelu(kernel_env *e, num a)
{
	double x = a.f;
	if (ALPHA(e) != 0)
		return nf(0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))));
	return nf(0.5 * x * (1 + erf(x * 0.7071067811865476)));
}

static num un_mish(kernel_env *e, num a) { (void)e; return nf(a.f * tanh(softplus(a.f))); }

/* Shrink: attributes bias, lambd; integer inputs go through double like
 * the reference, which casts the float result back. */
static num un_shrink(kernel_env *e, num a)
{
	double x = to_double(e->cls, a), bias = ALPHA(e), lambd = BETA(e);
	return from_double(e->cls, x < -lambd ? x + bias : x > lambd ? x - bias : 0);
}

static num un_isnan(kernel_env *e, num a) { (void)e; return nbool(isnan(a.f)); }

/* IsInf: attributes detect_negative, detect_positive */
static num un_isinf(kernel_env *e, num a)
{
	return nbool(isinf(a.f) && (a.f < 0 ? ALPHA(e) != 0 : BETA(e) != 0));
}

static num un_not(kernel_env *e, num a) { (void)e; return nbool(!a.i); }

static num un_bitwise_not(kernel_env *e, num a) { (void)e; return nu(~a.u); }

/* ---- binary kernels ---- */

static num bin_add(kernel_env *e, num a, num b)
{
	return e->cls == CLS_F ? nf(a.f + b.f) : nu(a.u + b.u);
}

static num bin_sub(kernel_env *e, num a, num b)
{
	return e->cls == CLS_F ? nf(a.f - b.f) : nu(a.u - b.u);
}

static num bin_mul(kernel_env *e, num a, num b)
{
	return e->cls == CLS_F ? nf(a.f * b.f) : nu(a.u * b.u);
}

/* Integer division truncates toward zero, like C. */
static num bin_div(kernel_env *e, num a, num b)
{
	switch (e->cls) {
	case CLS_F: return nf(a.f / b.f);
	case CLS_U:
		if (!b.u)
			return e->div_by_zero = true, nu(0);
		return nu(a.u / b.u);
	default:
		if (!b.i)
			return e->div_by_zero = true, ni(0);
		if (b.i == -1) /* INT64_MIN / -1 wraps instead of trapping */
			return nu(0 - a.u);
		return ni(a.i / b.i);
	}
}

/* Mod: slot 0 is the fmod attribute. fmod=1 takes the dividend's sign
 * (C fmod / %); fmod=0 the divisor's (Python %). */
static num bin_mod(kernel_env *e, num a, num b)
{
	bool dividend_sign = ALPHA(e) != 0;
	switch (e->cls) {
	case CLS_F: {
		double r = fmod(a.f, b.f);
		if (!dividend_sign && r != 0 && (r < 0) != (b.f < 0))
			r += b.f;
		return nf(r);
	}
	case CLS_U:
		if (!b.u)
			return e->div_by_zero = true, nu(0);
		return nu(a.u % b.u);
	default: {
		if (!b.i)
			return e->div_by_zero = true, ni(0);
		if (b.i == -1) /* INT64_MIN % -1 is UB in C */
			return ni(0);
		int64_t r = a.i % b.i;
		if (!dividend_sign && r != 0 && (r < 0) != (b.i < 0))
			r += b.i;
		return ni(r);
	}
	}
}

enum { ORD_LT = 1, ORD_EQ = 2, ORD_GT = 4 }; /* unordered (NaN): none */

static unsigned order(const kernel_env *e, num a, num b)
{
	switch (e->cls) {
	case CLS_F: return a.f < b.f ? ORD_LT : a.f > b.f ? ORD_GT : a.f == b.f ? ORD_EQ : 0;
	case CLS_I: return a.i < b.i ? ORD_LT : a.i > b.i ? ORD_GT : ORD_EQ;
	default: return a.u < b.u ? ORD_LT : a.u > b.u ? ORD_GT : ORD_EQ;
	}
}

static num bin_equal(kernel_env *e, num a, num b) { return nbool(order(e, a, b) & ORD_EQ); }
static num bin_less(kernel_env *e, num a, num b) { return nbool(order(e, a, b) & ORD_LT); }
static num bin_greater(kernel_env *e, num a, num b) { return nbool(order(e, a, b) & ORD_GT); }

static num bin_less_equal(kernel_env *e, num a, num b)
{
	return nbool(order(e, a, b) & (ORD_LT | ORD_EQ));
}

static num bin_greater_equal(kernel_env *e, num a, num b)
{
	return nbool(order(e, a, b) & (ORD_GT | ORD_EQ));
}

/* Max and Min propagate NaN, like numpy.maximum. */
static num bin_max(kernel_env *e, num a, num b)
{
	if (e->cls == CLS_F && isnan(b.f))
		return b;
	return order(e, a, b) & ORD_LT ? b : a;
}

static num bin_min(kernel_env *e, num a, num b)
{
	if (e->cls == CLS_F && isnan(b.f))
		return b;
	return order(e, a, b) & ORD_GT ? b : a;
}

/* Exponentiation by squaring, wrapping like the integer dtype. */
static uint64_t ipow(uint64_t base, uint64_t exp)
{
	uint64_t r = 1;
	for (; exp; exp >>= 1, base *= base)
		if (exp & 1)
			r *= base;
	return r;
}

/* Pow: the result has the base's dtype; an integer base with an integer
 * exponent stays exact in integers. */
static num bin_pow(kernel_env *e, num a, num b)
{
	if (e->cls == CLS_F || e->cls_b == CLS_F)
		return from_double(e->cls, pow(to_double(e->cls, a), to_double(e->cls_b, b)));
	if (e->cls_b == CLS_I && b.i < 0) { /* 1/a^|b| truncated to an integer */
		if (e->cls == CLS_I && a.i == -1)
			return ni(b.u & 1 ? -1 : 1);
		return a.u == 1 ? a : ni(0);
	}
	return nu(ipow(a.u, b.u));
}

static num bin_prelu(kernel_env *e, num a, num b)
{
	switch (e->cls) {
	case CLS_F: return nf(a.f < 0 ? a.f * b.f : a.f);
	case CLS_I: return a.i < 0 ? nu(a.u * b.u) : a;
	default: return a; /* unsigned values are never negative */
	}
}

static num bin_and(kernel_env *e, num a, num b) { (void)e; return nbool(a.i && b.i); }
static num bin_or(kernel_env *e, num a, num b) { (void)e; return nbool(a.i || b.i); }
static num bin_xor(kernel_env *e, num a, num b) { (void)e; return nbool(!a.i != !b.i); }
static num bin_bitand(kernel_env *e, num a, num b) { (void)e; return nu(a.u & b.u); }
static num bin_bitor(kernel_env *e, num a, num b) { (void)e; return nu(a.u | b.u); }
static num bin_bitxor(kernel_env *e, num a, num b) { (void)e; return nu(a.u ^ b.u); }

/* BitShift: slot 0 is 1 for direction="LEFT"; inputs are unsigned. */
static num bin_bitshift(kernel_env *e, num a, num b)
{
	if (b.u >= 64)
		return nu(0);
	return nu(ALPHA(e) != 0 ? a.u << b.u : a.u >> b.u);
}

/* ---- attribute checks ---- */

static int check_gelu(mc_node *n, attr_vals *p)
{
	const char *approx;
	if (mc_attr_string(n, "approximate", "none", &approx))
		return -1;
	if (strcmp(approx, "none") && strcmp(approx, "tanh"))
		return mc_node_error(n, "approximate must be \"none\" or \"tanh\", not \"%s\"", approx);
	p->v[0] = strcmp(approx, "tanh") == 0;
	return 0;
}

static int check_bitshift(mc_node *n, attr_vals *p)
{
	const char *dir;
	if (mc_attr_string(n, "direction", "", &dir))
		return -1;
	if (strcmp(dir, "LEFT") && strcmp(dir, "RIGHT"))
		return mc_node_error(n, "direction must be \"LEFT\" or \"RIGHT\", not \"%s\"", dir);
	p->v[0] = strcmp(dir, "LEFT") == 0;
	return 0;
}

static int check_mod(mc_node *n, attr_vals *p)
{
	if (p->v[0] != 0 && p->v[0] != 1)
		return mc_node_error(n, "fmod must be 0 or 1, not %g", p->v[0]);
	return 0;
}

static int check_celu(mc_node *n, attr_vals *p)
{
	if (p->v[0] == 0)
		return mc_node_error(n, "alpha must not be 0");
	return 0;
}

static const attr_spec alpha_001[] = {{"alpha", 0.01, false}, {NULL, 0, false}};
static const attr_spec alpha_1[] = {{"alpha", 1.0, false}, {NULL, 0, false}};
static const attr_spec hard_sigmoid_attrs[] = {
	{"alpha", 0.2, false}, {"beta", 0.5, false}, {NULL, 0, false}};
static const attr_spec selu_attrs[] = {
	{"alpha", 1.67326319217681884765625, false},
	{"gamma", 1.05070102214813232421875, false},
	{NULL, 0, false}};
static const attr_spec shrink_attrs[] = {
	{"bias", 0.0, false}, {"lambd", 0.5, false}, {NULL, 0, false}};
static const attr_spec isinf_attrs[] = {
	{"detect_negative", 1, true}, {"detect_positive", 1, true}, {NULL, 0, false}};
static const attr_spec mod_attrs[] = {{"fmod", 0, true}, {NULL, 0, false}};

/* ---- the map op table ---- */

#define MAP_OP(NAME, FIRST, MIN_IN, MAX_IN, FLAGS)                                          \
	.op = {.name = NAME, .min_opset = FIRST, .max_opset = MC_MAX_OPSET,                 \
	       .min_inputs = MIN_IN, .max_inputs = MAX_IN, .min_outputs = 1, .max_outputs = 1, \
	       .parse = map_parse, .infer = map_infer, .eval = map_eval, .flags = FLAGS}
#define UNARY(NAME, FIRST) MAP_OP(NAME, FIRST, 1, 1, 0)
#define BINARY(NAME, FIRST) MAP_OP(NAME, FIRST, 2, 2, 0)
#define VARIADIC(NAME, FIRST) MAP_OP(NAME, FIRST, 1, 1 << 20, MC_OP_VARIADIC)

static const ew_op op_relu = {UNARY("Relu", 1), .types = T_SIGNED, .un = un_relu};
static const ew_op op_leaky_relu = {UNARY("LeakyRelu", 1), .types = T_FLOAT,
                                    .un = un_leaky_relu, .attrs = alpha_001};
static const ew_op op_sigmoid = {UNARY("Sigmoid", 1), .types = T_FLOAT, .un = un_sigmoid};
static const ew_op op_hard_sigmoid = {UNARY("HardSigmoid", 1), .types = T_FLOAT,
                                      .un = un_hard_sigmoid, .attrs = hard_sigmoid_attrs};
static const ew_op op_hard_swish = {UNARY("HardSwish", 14), .types = T_FLOAT,
                                    .un = un_hard_swish};
static const ew_op op_tanh = {UNARY("Tanh", 1), .types = T_FLOAT, .math = tanh};
static const ew_op op_exp = {UNARY("Exp", 1), .types = T_FLOAT, .math = exp};
static const ew_op op_log = {UNARY("Log", 1), .types = T_FLOAT, .math = log};
static const ew_op op_sqrt = {UNARY("Sqrt", 1), .types = T_FLOAT, .math = sqrt};
static const ew_op op_erf = {UNARY("Erf", 9), .types = T_FLOAT, .math = erf};
static const ew_op op_neg = {UNARY("Neg", 1), .types = T_SIGNED, .un = un_neg};
static const ew_op op_abs = {UNARY("Abs", 1), .types = T_NUM, .un = un_abs};
static const ew_op op_reciprocal = {UNARY("Reciprocal", 1), .types = T_FLOAT,
                                    .un = un_reciprocal};
static const ew_op op_floor = {UNARY("Floor", 1), .types = T_FLOAT, .math = floor};
static const ew_op op_ceil = {UNARY("Ceil", 1), .types = T_FLOAT, .math = ceil};
/* nearbyint in the default rounding mode rounds half to even */
static const ew_op op_round = {UNARY("Round", 11), .types = T_FLOAT, .math = nearbyint};
static const ew_op op_sign = {UNARY("Sign", 9), .types = T_NUM, .un = un_sign};
static const ew_op op_sin = {UNARY("Sin", 7), .types = T_FLOAT, .math = sin};
static const ew_op op_cos = {UNARY("Cos", 7), .types = T_FLOAT, .math = cos};
static const ew_op op_tan = {UNARY("Tan", 7), .types = T_FLOAT, .math = tan};
static const ew_op op_asin = {UNARY("Asin", 7), .types = T_FLOAT, .math = asin};
static const ew_op op_acos = {UNARY("Acos", 7), .types = T_FLOAT, .math = acos};
static const ew_op op_atan = {UNARY("Atan", 7), .types = T_FLOAT, .math = atan};
static const ew_op op_sinh = {UNARY("Sinh", 9), .types = T_FLOAT, .math = sinh};
static const ew_op op_cosh = {UNARY("Cosh", 9), .types = T_FLOAT, .math = cosh};
static const ew_op op_asinh = {UNARY("Asinh", 9), .types = T_FLOAT, .math = asinh};
static const ew_op op_acosh = {UNARY("Acosh", 9), .types = T_FLOAT, .math = acosh};
static const ew_op op_atanh = {UNARY("Atanh", 9), .types = T_FLOAT, .math = atanh};
static const ew_op op_elu = {UNARY("Elu", 1), .types = T_FLOAT, .un = un_elu,
                             .attrs = alpha_1};
static const ew_op op_selu = {UNARY("Selu", 1), .types = T_FLOAT, .un = un_selu,
                              .attrs = selu_attrs};
static const ew_op op_celu = {UNARY("Celu", 12), .types = T_FLOAT, .un = un_celu,
                              .attrs = alpha_1, .check = check_celu};
static const ew_op op_softplus = {UNARY("Softplus", 1), .types = T_FLOAT, .un = un_softplus};
static const ew_op op_softsign = {UNARY("Softsign", 1), .types = T_FLOAT, .un = un_softsign};
static const ew_op op_thresholded_relu = {UNARY("ThresholdedRelu", 10), .types = T_FLOAT,
                                          .un = un_thresholded_relu, .attrs = alpha_1};
static const ew_op op_gelu = {UNARY("Gelu", 20), .types = T_FLOAT, .un = un_gelu,
                              .check = check_gelu};
static const ew_op op_mish = {UNARY("Mish", 18), .types = T_FLOAT, .un = un_mish};
static const ew_op op_isnan = {UNARY("IsNaN", 9), .types = T_FLOAT, .out = MC_BOOL,
                               .un = un_isnan};
static const ew_op op_isinf = {UNARY("IsInf", 10), .types = T_FLOAT, .out = MC_BOOL,
                               .un = un_isinf, .attrs = isinf_attrs};
static const ew_op op_shrink = {UNARY("Shrink", 9), .types = T_NUM, .un = un_shrink,
                                .attrs = shrink_attrs};
static const ew_op op_bitwise_not = {UNARY("BitwiseNot", 18), .types = T_INT,
                                     .un = un_bitwise_not};
static const ew_op op_not = {UNARY("Not", 1), .types = T_BOOL, .un = un_not};

static const ew_op op_add = {BINARY("Add", 1), .types = T_NUM, .bin = bin_add,
                             .flags = F_LEGACY_BCAST};
static const ew_op op_sub = {BINARY("Sub", 1), .types = T_NUM, .bin = bin_sub,
                             .flags = F_LEGACY_BCAST};
static const ew_op op_mul = {BINARY("Mul", 1), .types = T_NUM, .bin = bin_mul,
                             .flags = F_LEGACY_BCAST};
static const ew_op op_div = {BINARY("Div", 1), .types = T_NUM, .bin = bin_div,
                             .flags = F_LEGACY_BCAST};
static const ew_op op_pow = {BINARY("Pow", 1), .types = T_NUM, .bin = bin_pow,
                             .flags = F_LEGACY_BCAST | F_MIXED};
static const ew_op op_mod = {BINARY("Mod", 10), .types = T_NUM, .bin = bin_mod,
                             .attrs = mod_attrs, .check = check_mod};
static const ew_op op_prelu = {BINARY("PRelu", 1), .types = T_NUM, .bin = bin_prelu,
                               .flags = F_UNIDIR};
static const ew_op op_bitshift = {BINARY("BitShift", 11), .types = T_UINT,
                                  .bin = bin_bitshift, .check = check_bitshift};
static const ew_op op_bitwise_and = {BINARY("BitwiseAnd", 18), .types = T_INT,
                                     .bin = bin_bitand};
static const ew_op op_bitwise_or = {BINARY("BitwiseOr", 18), .types = T_INT,
                                    .bin = bin_bitor};
static const ew_op op_bitwise_xor = {BINARY("BitwiseXor", 18), .types = T_INT,
                                     .bin = bin_bitxor};
static const ew_op op_equal = {BINARY("Equal", 1), .types = T_ANY, .out = MC_BOOL,
                               .bin = bin_equal, .flags = F_LEGACY_BCAST};
static const ew_op op_less = {BINARY("Less", 1), .types = T_NUM, .out = MC_BOOL,
                              .bin = bin_less, .flags = F_LEGACY_BCAST};
static const ew_op op_greater = {BINARY("Greater", 1), .types = T_NUM, .out = MC_BOOL,
                                 .bin = bin_greater, .flags = F_LEGACY_BCAST};
static const ew_op op_less_equal = {BINARY("LessOrEqual", 12), .types = T_NUM,
                                    .out = MC_BOOL, .bin = bin_less_equal};
static const ew_op op_greater_equal = {BINARY("GreaterOrEqual", 12), .types = T_NUM,
                                       .out = MC_BOOL, .bin = bin_greater_equal};
static const ew_op op_and = {BINARY("And", 1), .types = T_BOOL, .bin = bin_and,
                             .flags = F_LEGACY_BCAST};
static const ew_op op_or = {BINARY("Or", 1), .types = T_BOOL, .bin = bin_or,
                            .flags = F_LEGACY_BCAST};
static const ew_op op_xor = {BINARY("Xor", 1), .types = T_BOOL, .bin = bin_xor,
                             .flags = F_LEGACY_BCAST};

static const ew_op op_max = {VARIADIC("Max", 1), .types = T_NUM, .bin = bin_max};
static const ew_op op_min = {VARIADIC("Min", 1), .types = T_NUM, .bin = bin_min};
static const ew_op op_sum = {VARIADIC("Sum", 1), .types = T_FLOAT, .bin = bin_add};
static const ew_op op_mean = {VARIADIC("Mean", 1), .types = T_FLOAT, .bin = bin_add,
                              .flags = F_MEAN};

/* ---- Clip ---- */

static int clip_parse(mc_node *n)
{
	clip_attrs *p = mc_params_new(n, sizeof *p);
	if (n->opset >= 11)
		return 0;
	if (n->n_inputs > 1)
		return mc_node_error(n, "takes min and max as attributes before opset 11, not inputs");
	if (mc_attr_float(n, "min", -INFINITY, &p->lo) || mc_attr_float(n, "max", INFINITY, &p->hi))
		return -1;
	return 0;
}

static int clip_infer(mc_infer_ctx *c)
{
	mc_dtype t = c->in[0]->dtype;
	if (check_dtype(c->node, 0, t, T_NUM))
		return -1;
	for (int k = 1; k < c->n_in; k++) {
		const mc_value *b = c->in[k];
		if (!b)
			continue;
		if (b->dtype != t)
			return mc_node_error(c->node, "bound input %d has dtype %s, input 0 has %s", k,
			                     mc_dtype_name(b->dtype), mc_dtype_name(t));
		if (mc_numel(&b->shape) != 1)
			return mc_node_error(c->node, "bound input %d must be a scalar, it has %zu "
			                     "elements", k, mc_numel(&b->shape));
	}
	mc_set_out(c, 0, t, &c->in[0]->shape);
	return 0;
}

static int clip_eval(mc_eval_ctx *c)
{
	const clip_attrs *p = c->node->params;
	const mc_tensor *x = c->in[0];
	kernel_env env = {.cls = class_of(x->dtype)};
	const mc_tensor *lo_t = c->n_in > 1 ? c->in[1] : NULL, *hi_t = c->n_in > 2 ? c->in[2] : NULL;
	bool has_lo = lo_t || c->node->opset < 11, has_hi = hi_t || c->node->opset < 11;
	num lo = lo_t ? load(lo_t, 0, env.cls) : from_double(env.cls, p->lo);
	num hi = hi_t ? load(hi_t, 0, env.cls) : from_double(env.cls, p->hi);
	/* min(max(x, lo), hi): with lo > hi every element becomes hi */
	for (size_t i = 0; i < x->numel; i++) {
		num v = load(x, i, env.cls);
		if (has_lo && (order(&env, v, lo) & ORD_LT))
			v = lo;
		if (has_hi && (order(&env, v, hi) & ORD_GT))
			v = hi;
		store(c->out[0], i, env.cls, v);
	}
	return 0;
}

static const mc_op op_clip = {
	.name = "Clip", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
	.parse = clip_parse, .infer = clip_infer, .eval = clip_eval,
};

/* ---- Where ---- */

static int where_infer(mc_infer_ctx *c)
{
	const mc_value *cond = c->in[0], *x = c->in[1], *y = c->in[2];
	char a[256], b[256], d[256];
	mc_shape xy, out;
	if (cond->dtype != MC_BOOL)
		return mc_node_error(c->node, "condition must be bool, not %s",
		                     mc_dtype_name(cond->dtype));
	if (x->dtype != y->dtype)
		return mc_node_error(c->node, "inputs 1 and 2 have dtypes %s and %s; they must match",
		                     mc_dtype_name(x->dtype), mc_dtype_name(y->dtype));
	if (!mc_broadcast(&x->shape, &y->shape, &xy) || !mc_broadcast(&cond->shape, &xy, &out))
		return mc_node_error(c->node, "shapes %s, %s and %s do not broadcast together",
		                     mc_shape_str(&cond->shape, a, sizeof a),
		                     mc_shape_str(&x->shape, b, sizeof b),
		                     mc_shape_str(&y->shape, d, sizeof d));
	mc_set_out(c, 0, x->dtype, &out);
	return 0;
}

typedef struct {
	const mc_tensor *const *in;
	mc_tensor *out;
	size_t esize;
} where_state;

static void where_element(void *state, const size_t *at, size_t o)
{
	where_state *s = state;
	bool cond = ((const uint8_t *)s->in[0]->data)[at[0]] != 0;
	const uint8_t *src = s->in[cond ? 1 : 2]->data;
	memcpy((uint8_t *)s->out->data + o * s->esize, src + at[cond ? 1 : 2] * s->esize, s->esize);
}

static int where_eval(mc_eval_ctx *c)
{
	mc_shape views[3] = {c->in[0]->shape, c->in[1]->shape, c->in[2]->shape};
	where_state s = {.in = c->in, .out = c->out[0], .esize = mc_dtype_size(c->out[0]->dtype)};
	broadcast_each(3, views, &c->out[0]->shape, where_element, &s);
	return 0;
}

static const mc_op op_where = {
	.name = "Where", .min_opset = 9, .max_opset = MC_MAX_OPSET,
	.min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
	.infer = where_infer, .eval = where_eval,
};

/* ---- Cast, CastLike ---- */

/* Cast-1 named the target type by its TensorProto enum name. */
static const struct {
	const char *name;
	mc_dtype t;
} cast_names[] = {
	{"FLOAT", MC_FLOAT},   {"UINT8", MC_UINT8},       {"INT8", MC_INT8},
	{"UINT16", MC_UINT16}, {"INT16", MC_INT16},       {"INT32", MC_INT32},
	{"INT64", MC_INT64},   {"STRING", MC_STRING},     {"BOOL", MC_BOOL},
	{"FLOAT16", MC_FLOAT16}, {"DOUBLE", MC_DOUBLE},   {"UINT32", MC_UINT32},
	{"UINT64", MC_UINT64}, {"BFLOAT16", MC_BFLOAT16},
};

static int cast_target_ok(const mc_node *n, int64_t to)
{
	if (to == MC_STRING)
		return mc_node_error(n, "casting to string is not supported");
	if (to < 0 || to > 1000 || !mc_dtype_supported((mc_dtype)to))
		return mc_node_error(n, "casting to dtype %lld is not supported (complex types "
		                     "are not)", (long long)to);
	return 0;
}

/* saturate and round_mode, absent before the opsets that added them. */
static int cast_parse_modes(mc_node *n, cast_attrs *p)
{
	int64_t saturate;
	const char *round;
	if (mc_attr_int(n, "saturate", 1, &saturate) ||
	    mc_attr_string(n, "round_mode", "up", &round))
		return -1;
	if (saturate != 0 && saturate != 1)
		return mc_node_error(n, "saturate must be 0 or 1, not %lld", (long long)saturate);
	p->saturate = saturate;
	if (strcmp(round, "up") == 0)
		p->round = MC_ROUND_UP;
	else if (strcmp(round, "down") == 0)
		p->round = MC_ROUND_DOWN;
	else if (strcmp(round, "nearest") == 0)
		p->round = MC_ROUND_NEAREST;
	else
		return mc_node_error(n, "round_mode must be \"up\", \"down\" or \"nearest\", not "
		                     "\"%s\"", round);
	return 0;
}

static int cast_parse(mc_node *n)
{
	cast_attrs *p = mc_params_new(n, sizeof *p);
	if (cast_parse_modes(n, p))
		return -1;
	const mc_attr *a = mc_attr_find(n, "to");
	if (!a)
		return mc_node_error(n, "needs the attribute 'to'");
	if (a->type == MC_ATTR_STRING) {
		for (size_t k = 0; k < sizeof cast_names / sizeof *cast_names; k++)
			if (strcmp(a->s, cast_names[k].name) == 0)
				p->to = cast_names[k].t;
		if (p->to == MC_UNDEFINED)
			return mc_node_error(n, "unknown target type \"%s\"", a->s);
		return cast_target_ok(n, p->to);
	}
	int64_t v;
	if (mc_attr_int(n, "to", 0, &v) || cast_target_ok(n, v))
		return -1;
	p->to = (mc_dtype)v;
	return 0;
}

static int castlike_parse(mc_node *n)
{
	cast_attrs *p = mc_params_new(n, sizeof *p);
	return cast_parse_modes(n, p);
}

static int cast_infer(mc_infer_ctx *c)
{
	mc_set_out(c, 0, ((const cast_attrs *)c->node->params)->to, &c->in[0]->shape);
	return 0;
}

static int castlike_infer(mc_infer_ctx *c)
{
	if (cast_target_ok(c->node, c->in[1]->dtype))
		return -1;
	mc_set_out(c, 0, c->in[1]->dtype, &c->in[0]->shape);
	return 0;
}

static bool is_subbyte_int(mc_dtype t)
{
	return t == MC_INT4 || t == MC_UINT4 || t == MC_INT2 || t == MC_UINT2;
}

/* Integers convert with wrap-around (like numpy astype), floats to integers
 * saturate, anything to bool is "nonzero" (NaN included). Two exceptions
 * follow ONNX's reference (and its test data): small-float targets round
 * the exact value under the node's saturate and round_mode, and floats to
 * 4-bit and 2-bit integers wrap (float -9 gives int4 7). */
static void convert_element(const mc_tensor *src, size_t i, mc_tensor *dst, size_t j,
                            const cast_attrs *p)
{
	num_class k = class_of(src->dtype);
	if (mc_dtype_is_small_float(dst->dtype)) {
		double v = to_double(k, load(src, i, k));
		uint8_t *codes = dst->data; /* one code per byte (modelc.h) */
		codes[j] = dst->dtype == MC_FLOAT8E8M0 ? mc_double_to_e8m0(v, p->saturate, p->round)
		                                       : mc_double_to_small_float(dst->dtype, v, p->saturate);
		return;
	}
	bool to_float = mc_dtype_is_float(dst->dtype);
	switch (k) {
	case CLS_F:
		if (is_subbyte_int(dst->dtype))
			mc_set_i(dst, j, from_double(CLS_I, mc_get_f(src, i)).i);
		else
			mc_set_f(dst, j, mc_get_f(src, i));
		break;
	case CLS_U:
		if (to_float)
			mc_set_f(dst, j, (double)(uint64_t)mc_get_i(src, i));
		else
			mc_set_i(dst, j, mc_get_i(src, i));
		break;
	case CLS_I:
		if (to_float)
			mc_set_f(dst, j, (double)mc_get_i(src, i));
		else
			mc_set_i(dst, j, mc_get_i(src, i));
		break;
	}
}

static int cast_eval(mc_eval_ctx *c)
{
	const mc_tensor *x = c->in[0];
	mc_tensor *y = c->out[0];
	if (x->dtype == y->dtype) {
		memcpy(y->data, x->data, x->nbytes);
		return 0;
	}
	for (size_t i = 0; i < x->numel; i++)
		convert_element(x, i, y, i, c->node->params);
	return 0;
}

static const mc_op op_cast = {
	.name = "Cast", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
	.parse = cast_parse, .infer = cast_infer, .eval = cast_eval,
};

static const mc_op op_castlike = {
	.name = "CastLike", .min_opset = 15, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
	.parse = castlike_parse, .infer = castlike_infer, .eval = cast_eval,
};

/* ---- Identity, Dropout ---- */

static int copy_eval(mc_eval_ctx *c)
{
	memcpy(c->out[0]->data, c->in[0]->data, c->in[0]->nbytes);
	return 0;
}

static const mc_op op_identity = {
	.name = "Identity", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
	.infer = mc_infer_same_as_input0, .eval = copy_eval,
};

/* Dropout is the identity in inference. From opset 12 a training_mode
 * input may ask for random dropping, which is refused unless ratio is 0.
 * The mask is bool from opset 10, the input's dtype before. */
static int dropout_parse(mc_node *n)
{
	if (n->opset < 12 && n->n_inputs > 1)
		return mc_node_error(n, "takes ratio as an attribute before opset 12, not an input");
	return 0;
}

static int dropout_training(const mc_node *n, const mc_tensor *ratio, const mc_tensor *training)
{
	if (!training || !mc_get_i(training, 0))
		return 0;
	double r = ratio ? mc_get_f(ratio, 0) : 0.5;
	if (r == 0)
		return 0;
	return mc_node_error(n, "training mode with ratio %g (random dropping) is not supported; "
	                     "only inference: training_mode false, or ratio 0", r);
}

static int dropout_infer(mc_infer_ctx *c)
{
	const mc_value *x = c->in[0];
	const mc_value *ratio = c->n_in > 1 ? c->in[1] : NULL;
	const mc_value *training = c->n_in > 2 ? c->in[2] : NULL;
	if (check_dtype(c->node, 0, x->dtype, T_FLOAT))
		return -1;
	if (ratio && (!mc_dtype_is_float(ratio->dtype) || mc_numel(&ratio->shape) != 1))
		return mc_node_error(c->node, "ratio must be a floating-point scalar");
	if (training && (training->dtype != MC_BOOL || mc_numel(&training->shape) != 1))
		return mc_node_error(c->node, "training_mode must be a bool scalar");
	/* Whether this node drops at random must be settled when compiling:
	 * generated code has no random path. */
	if (training && !training->konst)
		return mc_node_error(c->node, "a run-time training_mode is not supported; it must be "
		                     "known at compile time (bind input '%s')", training->name);
	if (training && mc_get_i(training->konst, 0) && ratio && !ratio->konst)
		return mc_node_error(c->node, "with training_mode true, a run-time ratio is not "
		                     "supported; it must be known at compile time (bind input '%s')",
		                     ratio->name);
	if (training && dropout_training(c->node, ratio ? ratio->konst : NULL, training->konst))
		return -1;
	mc_set_out(c, 0, x->dtype, &x->shape);
	if (c->n_out > 1)
		mc_set_out(c, 1, c->node->opset >= 10 ? MC_BOOL : x->dtype, &x->shape);
	return 0;
}

static int dropout_eval(mc_eval_ctx *c)
{
	const mc_tensor *ratio = c->n_in > 1 ? c->in[1] : NULL;
	const mc_tensor *training = c->n_in > 2 ? c->in[2] : NULL;
	if (dropout_training(c->node, ratio, training))
		return -1;
	memcpy(c->out[0]->data, c->in[0]->data, c->in[0]->nbytes);
	mc_tensor *mask = c->n_out > 1 ? c->out[1] : NULL;
	for (size_t i = 0; mask && i < mask->numel; i++)
		mc_set_f(mask, i, 1);
	return 0;
}

static const mc_op op_dropout = {
	.name = "Dropout", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 3, .min_outputs = 1, .max_outputs = 2,
	.parse = dropout_parse, .infer = dropout_infer, .eval = dropout_eval,
};

const mc_op *const mc_ops_elementwise[] = {
	/* unary */
	&op_relu.op, &op_leaky_relu.op, &op_sigmoid.op, &op_hard_sigmoid.op, &op_hard_swish.op,
	&op_tanh.op, &op_exp.op, &op_log.op, &op_sqrt.op, &op_erf.op, &op_neg.op, &op_abs.op,
	&op_reciprocal.op, &op_floor.op, &op_ceil.op, &op_round.op, &op_sign.op, &op_sin.op,
	&op_cos.op, &op_tan.op, &op_asin.op, &op_acos.op, &op_atan.op, &op_sinh.op, &op_cosh.op,
	&op_asinh.op, &op_acosh.op, &op_atanh.op, &op_elu.op, &op_selu.op, &op_celu.op,
	&op_softplus.op, &op_softsign.op, &op_thresholded_relu.op, &op_gelu.op, &op_mish.op,
	&op_isnan.op, &op_isinf.op, &op_shrink.op, &op_bitwise_not.op, &op_not.op,
	/* binary and variadic */
	&op_add.op, &op_sub.op, &op_mul.op, &op_div.op, &op_pow.op, &op_mod.op, &op_prelu.op,
	&op_bitshift.op, &op_bitwise_and.op, &op_bitwise_or.op, &op_bitwise_xor.op,
	&op_equal.op, &op_less.op, &op_greater.op, &op_less_equal.op, &op_greater_equal.op,
	&op_and.op, &op_or.op, &op_xor.op, &op_max.op, &op_min.op, &op_sum.op, &op_mean.op,
	/* the rest */
	&op_clip, &op_where, &op_cast, &op_castlike, &op_identity, &op_dropout,
	NULL,
};
