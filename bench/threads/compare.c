/* --threads against one thread for one compiled model (issue 23, until
 * bench/run takes --threads): runs NAME_run and NAME_run_threads on
 * runtime-min's pthread pool of WORKERS workers and on a hook that runs
 * the work one iteration at a time, last first; checks that all three give
 * the same bytes, then times both in alternating batches and prints the
 * medians of the batches' means. Inputs: a fixed pattern (the timing does
 * not depend on the values).
 *
 *   cc -O3 -march=native -pthread -I DIR -DMODEL=NAME -DUMODEL=UNAME \
 *      -DMODEL_HEADER='"NAME.h"' bench/threads/compare.c DIR/NAME.c \
 *      DIR/NAME_weights.c DIR/modelc_threads_pthread.c -lm
 *   compare WORKERS BATCHES     (bench/threads/run does all of it) */
#define _POSIX_C_SOURCE 200112L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../bench_time.h"

#include MODEL_HEADER
#include "modelc_threads_pthread.h"

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define RUN CAT(MODEL, _run)
#define RUN_THREADS CAT(MODEL, _run_threads)
#define INPUT_DESCS CAT(MODEL, _inputs)
#define OUTPUT_DESCS CAT(MODEL, _outputs)
#define NUM_INPUTS CAT(UMODEL, _NUM_INPUTS)
#define NUM_OUTPUTS CAT(UMODEL, _NUM_OUTPUTS)
#define ARENA_BYTES CAT(UMODEL, _ARENA_BYTES)

static size_t desc_bytes(const modelc_tensor_desc *d)
{
	size_t n = d->dtype == MODELC_DOUBLE || d->dtype == MODELC_INT64 || d->dtype == MODELC_UINT64 ? 8
	         : d->dtype == MODELC_FLOAT || d->dtype == MODELC_INT32 || d->dtype == MODELC_UINT32 ? 4
	         : d->dtype == MODELC_FLOAT16 || d->dtype == MODELC_INT16 || d->dtype == MODELC_UINT16 ? 2 : 1;
	for (int i = 0; i < d->rank; i++)
		n *= (size_t)d->dims[i];
	return n;
}

static void backwards(void *ctx, modelc_task_fn fn, void *arg, int64_t n)
{
	(void)ctx;
	for (int64_t i = n - 1; i >= 0; i--)
		fn(arg, i, i + 1);
}

int main(int argc, char **argv)
{
	int workers = argc > 1 ? atoi(argv[1]) : 2, batches = argc > 2 ? atoi(argv[2]) : 9;
	if (workers < 1 || batches < 1 || batches > 1000)
		return fprintf(stderr, "usage: compare WORKERS BATCHES\n"), 2;
	void *arena = NULL;
	if (posix_memalign(&arena, 64, ARENA_BYTES ? ARENA_BYTES : 64))
		return 2;
	const void *in[NUM_INPUTS > 0 ? NUM_INPUTS : 1];
	void *out[3][NUM_OUTPUTS > 0 ? NUM_OUTPUTS : 1];
	for (int i = 0; i < NUM_INPUTS; i++) {
		size_t n = desc_bytes(&INPUT_DESCS[i]);
		unsigned char *x = malloc(n ? n : 1);
		if (!x)
			return 2;
		for (size_t k = 0; k < n; k++) /* small values of any type: bytes 0..7 */
			x[k] = (unsigned char)((k * 2654435761u) >> 29);
		if (INPUT_DESCS[i].dtype == MODELC_FLOAT) /* floats in [-1, 1) */
			for (size_t k = 0; k < n / 4; k++)
				((float *)x)[k] = (float)((k * 2654435761u) % 2000) / 1000.0f - 1.0f;
		in[i] = x;
	}
	for (int c = 0; c < 3; c++)
		for (int i = 0; i < NUM_OUTPUTS; i++)
			if (!(out[c][i] = calloc(1, desc_bytes(&OUTPUT_DESCS[i]) + 1)))
				return 2;
	modelc_pthread_pool *pool = modelc_pthread_pool_new(workers);
	modelc_threads pooled = { modelc_pthread_parallel_for, pool }, reversed = { backwards, NULL };
	if (!pool || RUN(arena, in, out[0]) || RUN_THREADS(arena, in, out[1], &pooled) ||
	    RUN_THREADS(arena, in, out[2], &reversed))
		return fprintf(stderr, "compare: a run failed\n"), 2;
	int same = 1;
	for (int i = 0; i < NUM_OUTPUTS; i++) {
		size_t n = desc_bytes(&OUTPUT_DESCS[i]);
		same &= !memcmp(out[0][i], out[1][i], n) && !memcmp(out[0][i], out[2][i], n);
	}
	/* a batch: as many runs as take about 0.2 s on one thread */
	double t0 = now_us();
	RUN(arena, in, out[0]);
	double one = now_us() - t0;
	int reps = one > 0 ? (int)(2e5 / one) : 100;
	reps = reps < 1 ? 1 : reps > 1000 ? 1000 : reps;
	double *t1 = calloc((size_t)batches, sizeof *t1), *tn = calloc((size_t)batches, sizeof *tn);
	if (!t1 || !tn)
		return 2;
	for (int b = 0; b < batches; b++) {
		double a = now_us();
		for (int r = 0; r < reps; r++)
			RUN(arena, in, out[0]);
		double m = now_us();
		for (int r = 0; r < reps; r++)
			RUN_THREADS(arena, in, out[1], &pooled);
		t1[b] = (m - a) / reps;
		tn[b] = (now_us() - m) / reps;
	}
	qsort(t1, (size_t)batches, sizeof *t1, cmp_double);
	qsort(tn, (size_t)batches, sizeof *tn, cmp_double);
	printf("%.1f %.1f %.2f %s\n", t1[batches / 2], tn[batches / 2], t1[batches / 2] / tn[batches / 2],
	       same ? "yes" : "NO");
	modelc_pthread_pool_free(pool);
	return same ? 0 : 1;
}
