/* The ceiling of one AVX-512 register tile on this core: MR rows by NV
 * vectors of 16 columns, a block of KC = 128 rows of B (in L1) and MR rows
 * of A 1024 floats apart, the tile's sums loaded before and stored after
 * (as the K-blocked GEMM does), called over and over. Against
 * bench/peak.c's FMAs alone it says what the loads around them cost. A
 * measurement tool, not a test:
 *   for s in "6 4" "8 3" "12 2" "4 6"; do set -- $s
 *     cc -O3 -march=native -funroll-all-loops -DMR=$1 -DNV=$2 bench/tile_ceiling.c -o /tmp/tc && /tmp/tc
 *   done */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef MR
#define MR 6
#endif
#ifndef NV
#define NV 4
#endif
#define KC 128
#define A_STRIDE 1024

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

__attribute__((noinline)) static void tile(const float *restrict a, const float *restrict b,
                                           float *restrict c)
{
	__m512 acc[MR][NV];
	for (int r = 0; r < MR; r++)
		for (int v = 0; v < NV; v++)
			acc[r][v] = _mm512_loadu_ps(c + (r * NV + v) * 16);
	for (int k = 0; k < KC; k++) {
		__m512 bv[NV];
		for (int v = 0; v < NV; v++)
			bv[v] = _mm512_loadu_ps(b + (k * NV + v) * 16);
		for (int r = 0; r < MR; r++) {
			__m512 x = _mm512_set1_ps(a[r * A_STRIDE + k]);
			for (int v = 0; v < NV; v++)
				acc[r][v] = _mm512_fmadd_ps(x, bv[v], acc[r][v]);
		}
	}
	for (int r = 0; r < MR; r++)
		for (int v = 0; v < NV; v++)
			_mm512_storeu_ps(c + (r * NV + v) * 16, acc[r][v]);
}

int main(void)
{
	float *a = aligned_alloc(64, sizeof(float) * MR * A_STRIDE);
	float *b = aligned_alloc(64, sizeof(float) * KC * NV * 16);
	float *c = aligned_alloc(64, sizeof(float) * MR * NV * 16);
	if (!a || !b || !c)
		return 1;
	for (int i = 0; i < MR * A_STRIDE; i++)
		a[i] = 1e-3f * (float)(i % 7);
	for (int i = 0; i < KC * NV * 16; i++)
		b[i] = 1e-3f * (float)(i % 5);
	for (int i = 0; i < MR * NV * 16; i++)
		c[i] = 0;
	long reps = 3000000;
	double t0 = now();
	for (long r = 0; r < reps; r++)
		tile(a, b, c);
	double t = now() - t0;
	printf("%dx%d tile: %.1f GMAC/s (c[0] %g)\n", MR, NV, (double)reps * MR * NV * 16 * KC / t / 1e9,
	       (double)c[0]);
	free(a);
	free(b);
	free(c);
	return 0;
}
