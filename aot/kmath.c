/* Float32 exp, erf and tanh as kernel IR arithmetic (see kmath.h). */
#include "kmath.h"

/* exp(x) = 2^n e^r, x = n ln2 + r, |r| <= ln2/2 (Cody-Waite: n ln2_hi is
 * exact, ln2_hi having 10 significant bits); e^r = 1 + r + r^2 P(r). */
#define LOG2E 1.4426950408889634
#define LN2_HI 0.693145751953125
#define LN2_LO 1.428606765330187e-06
/* 1.5 * 2^23: t = y + MAGIC rounds y to an integer n (ties to even) for
 * |y| < 2^22, and t's low mantissa bits hold n + 2^22 */
#define MAGIC 12582912.0
#define MAGIC_BITS 0x4B400000
#define EXP_LO -104.0  /* e^-104 rounds to 0 in float32 */
#define EXP_HI 88.8    /* e^88.8 rounds to +inf */
#define SIGMOID_LO -87.33 /* above ln 2^-126 = -87.3365: n >= -126 */
#define SIGMOID_HI 88.37  /* below 127.5 ln 2 = 88.376: n <= 127 */
#define TANH_HI 9.0       /* tanh(9) rounds to 1 */

static const double exp_p[] = { 0.49999988079071045, 0.166665181517601, 0.04166953265666962,
	                         0.008368915878236294, 0.0013751407386735082 };

/* erf(x) = x P(x^2) / Q(x^2) on [-4, 4] (erf(4) is 1 in float32); tanh the
 * same on [-9, 9]. */
static const double erf_p[] = { 1.1283791065216064, 0.20371192693710327, 0.051059432327747345,
	                         0.0038406741805374622, 0.00014338745677378029,
	                         -1.922065393955563e-06, 1.9099443804293514e-08 };
static const double erf_q[] = { 1.0, 0.5138670206069946, 0.11654715985059738,
	                         0.014657935127615929, 0.0009837778052315116 };
static const double tanh_p[] = { 1.0, 0.13086028397083282, 0.0031061647459864616,
	                          1.1176078260177746e-05, -2.0305501280404314e-08,
	                          5.312328008044709e-11, -8.566610013591505e-14 };
static const double tanh_q[] = { 1.0, 0.46419358253479004, 0.024504100903868675,
	                          0.0002549283381085843 };

#define COUNT(a) ((int)(sizeof(a) / sizeof *(a)))

static mc_kexpr *f(mc_kb *kb, double v)
{
	return mc_k_float(kb, MC_KT_F32, v);
}

static mc_kexpr *i32(mc_kb *kb, int64_t v)
{
	return mc_k_int(kb, MC_KT_I32, v);
}

/* c[0] + x (c[1] + x (...)), a multiply and an add a step. */
static mc_kexpr *horner(mc_kb *kb, const double *c, int n, mc_kexpr *x)
{
	mc_kexpr *acc = f(kb, c[n - 1]);
	for (int i = n - 2; i >= 0; i--)
		acc = mc_kb_let(kb, mc_k_add(kb, mc_k_mul(kb, acc, x), f(kb, c[i])));
	return acc;
}

/* x clamped to [lo, hi], NaN kept: MIN and MAX give their second operand
 * when a compare is false. */
static mc_kexpr *clamp(mc_kb *kb, mc_kexpr *x, double lo, double hi)
{
	x = mc_k_bin(kb, MC_KB_MIN, f(kb, hi), x);
	return mc_kb_let(kb, mc_k_bin(kb, MC_KB_MAX, f(kb, lo), x));
}

/* 2^e for an i32 e in [-126, 127]: e + 127 in the exponent field. */
static mc_kexpr *pow2(mc_kb *kb, mc_kexpr *e)
{
	return mc_kb_let(kb, mc_k_bits(kb, MC_KT_F32,
	                               mc_k_bin(kb, MC_KB_SHL, mc_k_add(kb, e, i32(kb, 127)), i32(kb, 23))));
}

/* e^r for x = n ln2 + r, t = x log2e + MAGIC (n = t - MAGIC) */
static mc_kexpr *exp_poly(mc_kb *kb, mc_kexpr *x, mc_kexpr *t)
{
	mc_kexpr *n = mc_kb_let(kb, mc_k_sub(kb, t, f(kb, MAGIC)));
	mc_kexpr *r = mc_kb_let(kb, mc_k_sub(kb, x, mc_k_mul(kb, n, f(kb, LN2_HI))));
	r = mc_kb_let(kb, mc_k_sub(kb, r, mc_k_mul(kb, n, f(kb, LN2_LO))));
	mc_kexpr *p = horner(kb, exp_p, COUNT(exp_p), r);
	p = mc_k_mul(kb, mc_k_mul(kb, r, r), p);
	return mc_kb_let(kb, mc_k_add(kb, mc_k_add(kb, p, r), f(kb, 1.0)));
}

mc_kexpr *mc_kmath_exp(mc_kb *kb, mc_kexpr *x)
{
	x = clamp(kb, x, EXP_LO, EXP_HI);
	mc_kexpr *t = mc_kb_let(kb, mc_k_add(kb, mc_k_mul(kb, x, f(kb, LOG2E)), f(kb, MAGIC)));
	mc_kexpr *p = exp_poly(kb, x, t);
	mc_kexpr *ni = mc_kb_let(kb, mc_k_sub(kb, mc_k_bits(kb, MC_KT_I32, t), i32(kb, MAGIC_BITS)));
	/* n in [-150, 128]: 2^n as two factors, each inside float32's normal
	 * range, so that results near overflow and underflow round once */
	mc_kexpr *n1 = mc_kb_let(kb, mc_k_bin(kb, MC_KB_SHR, ni, i32(kb, 1)));
	mc_kexpr *n2 = mc_k_sub(kb, ni, n1);
	return mc_k_mul(kb, mc_k_mul(kb, p, pow2(kb, n1)), pow2(kb, n2));
}

/* 1 / (1 + e^-x), -x clamped to [SIGMOID_LO, SIGMOID_HI] so that 2^n is
 * one normal factor, read straight off t's bits: t = n + 1.5 * 2^23 holds
 * n in its low mantissa bits, and t's bits shifted up by 23 are n's in the
 * exponent field. Past the clamp the result is 1 (x > 87.3: 1 + e is 1
 * anyway) or about 4e-39 (x < -88.3, where the exact one is smaller). */
mc_kexpr *mc_kmath_sigmoid(mc_kb *kb, mc_kexpr *x)
{
	mc_kexpr *m = clamp(kb, mc_k_un(kb, MC_KU_NEG, x), SIGMOID_LO, SIGMOID_HI);
	mc_kexpr *t = mc_kb_let(kb, mc_k_add(kb, mc_k_mul(kb, m, f(kb, LOG2E)), f(kb, MAGIC)));
	mc_kexpr *p = exp_poly(kb, m, t);
	mc_kexpr *scale = mc_k_bits(kb, MC_KT_F32, mc_k_add(kb, mc_k_bin(kb, MC_KB_SHL, mc_k_bits(kb, MC_KT_I32, t), i32(kb, 23)),
	                                                    i32(kb, 127 << 23)));
	mc_kexpr *e = mc_k_mul(kb, p, scale);
	return mc_k_div(kb, f(kb, 1.0), mc_k_add(kb, e, f(kb, 1.0)));
}

static mc_kexpr *odd_rational(mc_kb *kb, mc_kexpr *x, double hi, const double *p, int np,
                              const double *q, int nq)
{
	x = clamp(kb, x, -hi, hi);
	mc_kexpr *x2 = mc_kb_let(kb, mc_k_mul(kb, x, x));
	mc_kexpr *num = mc_k_mul(kb, x, horner(kb, p, np, x2));
	return mc_k_bin(kb, MC_KB_DIV, num, horner(kb, q, nq, x2));
}

mc_kexpr *mc_kmath_erf(mc_kb *kb, mc_kexpr *x)
{
	return odd_rational(kb, x, 4.0, erf_p, COUNT(erf_p), erf_q, COUNT(erf_q));
}

mc_kexpr *mc_kmath_tanh(mc_kb *kb, mc_kexpr *x)
{
	return odd_rational(kb, x, TANH_HI, tanh_p, COUNT(tanh_p), tanh_q, COUNT(tanh_q));
}

void mc_kmath_gate_consts(float out[MC_KMATH_GATE_CONSTS])
{
	/* the micro-kernels' sigmoid (mc_kmath_sigmoid on -x) and tanh
	 * (odd_rational) take tanh_p[0] and tanh_q[0] to be 1: a refit that
	 * changed them would part their bits from the generated loop's, which
	 * tests/unit/test_lower_misc.c compares on the emulated board */
	_Static_assert(COUNT(exp_p) == 5 && COUNT(tanh_p) == 7 && COUNT(tanh_q) == 4, "the micro-kernel's table");
	int n = 0;
	out[n++] = (float)-SIGMOID_HI;
	out[n++] = (float)-SIGMOID_LO;
	out[n++] = (float)LOG2E;
	out[n++] = (float)MAGIC;
	out[n++] = (float)LN2_HI;
	out[n++] = (float)LN2_LO;
	for (int i = 4; i >= 0; i--)
		out[n++] = (float)exp_p[i];
	out[n++] = 1.0f;
	out[n++] = (float)TANH_HI;
	out[n++] = (float)-TANH_HI;
	for (int i = 6; i >= 1; i--)
		out[n++] = (float)tanh_p[i];
	for (int i = 3; i >= 1; i--)
		out[n++] = (float)tanh_q[i];
}

bool mc_kmath_takes(const mc_kb *kb, mc_kunop op, const mc_kexpr *x)
{
	if (x->type != MC_KT_F32 || kb->target->grid) /* GPUs have fast exp units of their own */
		return false;
	return op == MC_KU_EXP || op == MC_KU_ERF || op == MC_KU_TANH;
}
