/* One product compiled twice (bench/blas/run): NAME_run of the generated
 * tiles (TILES_HEADER's t_run) and of the --blas openblas build (b_run),
 * alternating batches on the same input; prints the medians of the
 * batches' means (us) and the largest difference between the two outputs
 * relative to the largest output. OpenBLAS on one thread (its own pool
 * off: OPENBLAS_NUM_THREADS=1 from the caller). */
#define _POSIX_C_SOURCE 200112L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../bench_time.h"

#include "t.h"
#include "b.h"

#define BATCHES 7

int main(void)
{
	size_t in_n = 1, out_n = 1;
	for (int i = 0; i < t_inputs[0].rank; i++)
		in_n *= (size_t)t_inputs[0].dims[i];
	for (int i = 0; i < t_outputs[0].rank; i++)
		out_n *= (size_t)t_outputs[0].dims[i];
	float *x = malloc(in_n * sizeof *x), *y[2] = { malloc(out_n * 4), malloc(out_n * 4) };
	void *arena[2];
	if (!x || !y[0] || !y[1] || posix_memalign(&arena[0], 64, T_ARENA_BYTES + 64) ||
	    posix_memalign(&arena[1], 64, B_ARENA_BYTES + 64))
		return 2;
	for (size_t i = 0; i < in_n; i++)
		x[i] = (float)((i * 40503u) % 2001) / 1000.0f - 1.0f;
	const void *in[1] = { x };
	void *o0[1] = { y[0] }, *o1[1] = { y[1] };
	if (t_run(arena[0], in, o0) || b_run(arena[1], in, o1))
		return 2;
	double diff = 0, top = 0;
	for (size_t i = 0; i < out_n; i++) {
		diff = fmax(diff, fabs((double)y[0][i] - y[1][i]));
		top = fmax(top, fabs((double)y[0][i]));
	}
	double t0 = now_us();
	t_run(arena[0], in, o0);
	double one = now_us() - t0;
	int reps = one > 0 ? (int)(1e5 / one) : 100;
	reps = reps < 3 ? 3 : reps > 10000 ? 10000 : reps;
	double tt[BATCHES], tb[BATCHES];
	for (int b = 0; b < BATCHES; b++) {
		double a = now_us();
		for (int r = 0; r < reps; r++)
			t_run(arena[0], in, o0);
		double m = now_us();
		for (int r = 0; r < reps; r++)
			b_run(arena[1], in, o1);
		tt[b] = (m - a) / reps;
		tb[b] = (now_us() - m) / reps;
	}
	qsort(tt, BATCHES, sizeof *tt, cmp_double);
	qsort(tb, BATCHES, sizeof *tb, cmp_double);
	printf("%.1f %.1f %.2f %.1e\n", tt[BATCHES / 2], tb[BATCHES / 2], tt[BATCHES / 2] / tb[BATCHES / 2],
	       top > 0 ? diff / top : diff);
	return 0;
}
