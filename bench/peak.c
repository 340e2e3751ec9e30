/* The core's peak f32 FMA throughput, the yardstick of bench/'s "% of
 * peak" columns: a loop of independent fused multiply-adds on as many
 * accumulators as hide the FMA latency on every port, in the widest vectors
 * the compiler targets (AVX-512, AVX2+FMA, NEON, else scalar).
 *
 *   cc -O3 -march=native bench/peak.c -o peak -lm && ./peak [SECONDS]
 *
 * Prints "peak_gflops G isa NAME lanes L" (one line): the best of 50
 * timed stretches, each about SECONDS / 50 long (default 0.5 s in all).
 * On a shared machine single figures vary up to 2x (here: ~57 or ~115
 * GFLOP/s, as if a sibling thread the VM does not show took half the FMA
 * units): bench/ort.js measures again after every model, keeps the best. */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#define ISA "avx512"
#define LANES 16
#define ACCS 24 /* of 32 registers: 2 ports x 4 cycles latency, with room */
typedef __m512 vec;
#define VSET(x) _mm512_set1_ps(x)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VSUM(v) _mm512_reduce_add_ps(v)
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define ISA "avx2"
#define LANES 8
#define ACCS 12 /* of 16 registers */
typedef __m256 vec;
#define VSET(x) _mm256_set1_ps(x)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
static float vsum(vec v)
{
	float f[8];
	_mm256_storeu_ps(f, v);
	return f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
}
#define VSUM(v) vsum(v)
#elif defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>
#define ISA "neon"
#define LANES 4
#define ACCS 24
typedef float32x4_t vec;
#define VSET(x) vdupq_n_f32(x)
#define VFMA(a, b, c) vfmaq_f32(c, a, b)
#define VSUM(v) vaddvq_f32(v)
#else
#define ISA "scalar"
#define LANES 1
#define ACCS 8
typedef float vec;
#define VSET(x) (x)
/* Without a hardware FMA, fmaf is a slow library call: a multiply and an
 * add are the same two flops. */
#ifdef __FP_FAST_FMAF
#define VFMA(a, b, c) fmaf(a, b, c)
#else
#define VFMA(a, b, c) ((a) * (b) + (c))
#endif
#define VSUM(v) (v)
#endif

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* iters x ACCS FMAs per lane. The multiplier keeps the accumulators
 * bounded (a fixed point near 1e3), so no denormal or infinity slows the
 * loop; the sum is returned so that nothing is optimised away. */
static float fma_loop(long iters, float mul, float add)
{
	vec acc[ACCS];
	vec m = VSET(mul), a = VSET(add);
	for (int k = 0; k < ACCS; k++)
		acc[k] = VSET((float)k);
	for (long i = 0; i < iters; i++) {
#pragma GCC unroll 32
		for (int k = 0; k < ACCS; k++)
			acc[k] = VFMA(acc[k], m, a);
	}
	float s = 0;
	for (int k = 0; k < ACCS; k++)
		s += VSUM(acc[k]);
	return s;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 0.5;
	if (!(seconds > 0))
		seconds = 0.5;
	/* The multiplier and addend come from outside the compiler's view. */
	volatile float mul = 0.999f, add = 1.0f;
	volatile float sink = 0;
	/* Many short stretches, the best kept: on a shared machine the odds
	 * that one of them runs undisturbed are better than for one long run. */
	const int stretches = 50;
	long iters = 1 << 12;
	for (;;) {
		double t0 = now_s();
		sink += fma_loop(iters, mul, add);
		if (now_s() - t0 >= seconds / stretches || iters > (1L << 40))
			break;
		iters *= 2;
	}
	double best = 0;
	for (int r = 0; r < stretches; r++) {
		double t0 = now_s();
		sink += fma_loop(iters, mul, add);
		double dt = now_s() - t0;
		double gflops = 2.0 * LANES * ACCS * (double)iters / dt * 1e-9;
		if (gflops > best)
			best = gflops;
	}
	printf("peak_gflops %.1f isa %s lanes %d\n", best, ISA, LANES);
	return sink == 12345.0f ? 1 : 0;
}
