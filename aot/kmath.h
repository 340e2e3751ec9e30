/* Float32 math functions as kernel IR arithmetic (aot/kmath.c): what
 * mc_k_un builds for EXP, ERF and TANH of f32 on CPU targets, and
 * mc_k_sigmoid for the sigmoid, so that a vector of them is vector code on
 * every ISA (and a scalar one costs a few multiply-adds instead of a libm
 * call, which on a Cortex-M is hundreds of cycles). Only multiplies, adds,
 * divides, min/max and bit moves: no fused multiply-add, so the scalar and
 * vector forms, the C and llvm targets and every ISA give the same bits.
 *
 * Accuracy against the exact function, measured in float32 by
 * scripts/fit-vmath.py (which fitted the coefficients):
 *   exp     <= 0.96 ulp on [-87.3, 88.7]; 0 below -104, +inf above 88.8
 *   sigmoid <= 2.0 ulp (the test's grid: tests/unit/test_lower_elementwise.c);
 *             below -87.3 within 4e-39 of the exact value
 *   erf     <= 6.7 ulp, 4.0e-7 absolute (the ulps are near |erf| = 1)
 *   tanh    <= 5.1 ulp, 3.0e-7 absolute
 * NaN in gives NaN out. The unit test measures all four against libm. */
#ifndef MODELC_KMATH_H
#define MODELC_KMATH_H

#include "kir.h"

mc_kexpr *mc_kmath_exp(mc_kb *kb, mc_kexpr *x);
mc_kexpr *mc_kmath_erf(mc_kb *kb, mc_kexpr *x);
mc_kexpr *mc_kmath_tanh(mc_kb *kb, mc_kexpr *x);
/* 1 / (1 + e^-x): what Sigmoid and the recurrent cells' gates build
 * where mc_kmath_takes EXP of x (f32, a CPU target). */
mc_kexpr *mc_kmath_sigmoid(mc_kb *kb, mc_kexpr *x);

/* The constants of sigmoid and tanh in the order the runtime's
 * modelc_gru_gates_f32 and modelc_lstm_gates_f32 load them into s9-s31
 * (the GRU_GATES and LSTM_GATES templates):
 * -SIGMOID_HI, -SIGMOID_LO, log2 e, MAGIC, ln2 high and low, the exp
 * polynomial's five from the highest power, 1, 9, -9, tanh's numerator
 * from x^12 to x^2 and denominator from x^6 to x^2 (their constant terms
 * are 1). */
void mc_kmath_gate_consts(float out[MC_KMATH_GATE_CONSTS]);

/* Whether mc_k_un builds op of x here as the above (f32, a CPU target). */
bool mc_kmath_takes(const mc_kb *kb, mc_kunop op, const mc_kexpr *x);

#endif
