/* The integer ops of quantized regions (libcore/ops/qint.c): internal ops
 * the quantize pass (freezing/quantize.c) makes from QDQ patterns and
 * QLinear* nodes with constant scales, lowered by aot/lower_qint.c.
 *
 * Every one computes in integers only: int8 or uint8 operands, int32 sums,
 * and one requantisation step, y = clamp(y_zp + mc_qi_scale(acc, mult,
 * shift), lo, hi), whose 32-bit multiplier and shift are fixed at compile
 * time (the scheme of TFLM and CMSIS-NN). The reference interpreter, the
 * folder and every target run this arithmetic, so they agree bit for bit.
 *
 *   QiConv     x, w, [bias], mult, shift, [w_zp]   Conv's attributes
 *   QiMatMul   a, b, [bias], mult, shift, [b_zp]   numpy matmul; per column n
 *   QiAdd      a, b    y = rq(a_mult (a - a_zp) + b_mult (b - b_zp)); b_mult < 0: Sub
 *   QiMul      a, b    y = rq(mult (a - a_zp) (b - b_zp))
 *   QiRequant  x       y = rq(mult (x - x_zp))
 *   QiAvgPool  x       y = rq(mult sum over the window of (x - x_zp)); no pads;
 *                      keepdims 0: a window over all spatial dims, dropped
 *   QiLut      x, t    y = t[x - lowest of x's type]: any unary op as a table
 *   QiQuantize x       float x: y = clamp(rint(x * inv_scale) + y_zp), a
 *                      multiplication where QuantizeLinear divides
 *   QiSoftmax  x, t    along axis: e = t[max - x] (t[d] = 2^14 exp(-d x_scale),
 *                      int32), r = (2^32 - 1) / sum(e) once per row (one
 *                      32-bit integer division), y = rq((e * r) >> 1): the
 *                      probability in 31 bits, mult = 2^-31 / y_scale
 *
 * Scalar parameters are attributes: x_zero_point (a's), b_zero_point,
 * y_zero_point, multiplier, b_multiplier, shift, lo, hi (the clamp, which
 * holds a fused Relu or Clip), to (the output's dtype) and inv_scale. */
#ifndef MODELC_OPS_QINT_H
#define MODELC_OPS_QINT_H

#include "../modelc.h"

/* Inputs of QiConv and QiMatMul. mult and shift are int32 with one value
 * per output channel (QiConv) or column (QiMatMul); bias int32 the same;
 * w_zp (b_zp) of w's type, the same or absent (zero). */
enum { QI_X, QI_W, QI_B, QI_MULT, QI_SHIFT, QI_W_ZP };

typedef struct {
	int64_t x_zp, b_zp, y_zp;
	int64_t mult, b_mult, shift;
	int64_t lo, hi;
	mc_dtype to;
	double inv_scale;
} qi_params;

/* acc * mult / 2^shift rounded to nearest, ties to even: the one
 * rescaling step of every integer op. |acc| < 2^31, 0 <= mult < 2^31,
 * 1 <= shift <= 62, so nothing overflows int64. Arithmetic shifts. */
static inline int64_t mc_qi_rshift(int64_t v, int64_t shift)
{
	return (v + ((int64_t)1 << (shift - 1)) - 1 + ((v >> shift) & 1)) >> shift;
}

static inline int64_t mc_qi_scale(int64_t acc, int64_t mult, int64_t shift)
{
	return mc_qi_rshift(acc * mult, shift);
}

/* The largest |sum| of k products of two centred 8-bit values (each
 * within +-255) plus a bias within +-bias_max (k below 2^31 / 255^2). */
static inline int64_t mc_qi_sum_bound(int64_t k, int64_t bias_max)
{
	return k * 255 * 255 + bias_max;
}

/* max |t[i]| of an integer tensor; 0 for NULL. */
int64_t mc_qi_abs_max(const mc_tensor *t);

static inline int64_t mc_qi_clamp(int64_t v, const qi_params *p)
{
	return v < p->lo ? p->lo : v > p->hi ? p->hi : v;
}

/* The multiplier and shift of a real factor: real ~= mult * 2^-shift with
 * mult in [2^30, 2^31) (smaller only where shift would pass 62). False if
 * real is not a finite positive number below 2^30. */
bool mc_qi_multiplier(double real, int32_t *mult, int32_t *shift);
/* The shift that gives the larger of two factors a 31-bit multiplier, and
 * both multipliers at that shift (QiAdd). */
bool mc_qi_multiplier2(double a, double b, int32_t *ma, int32_t *mb, int32_t *shift);

/* QiAdd's (mul false) or QiMul's result for one pair, before y_zp. */
int64_t mc_qi_binary(bool mul, const qi_params *p, int64_t a, int64_t b);
/* QiQuantize of one float, clamp included. */
int64_t mc_qi_quantize(const qi_params *p, float x);
/* QiAvgPool's window (kernel_shape, strides) and output shape of x. */
int mc_qi_pool_geom(const mc_node *n, const mc_shape *x, int64_t *kern, int64_t *stride,
                    mc_shape *out);

/* QiSoftmax: its axis (negative counts from the end) or -1 after reporting;
 * rows up to MC_QI_SOFTMAX_MAX (sums of the table stay far inside 32 bits
 * and the reciprocal keeps 10 bits or more). */
#define MC_QI_SOFTMAX_MAX 256
int64_t mc_qi_softmax_axis(const mc_node *n, const mc_shape *x);

#endif
