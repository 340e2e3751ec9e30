/* Timing driver for one compiled model, spoken to by bench/ort.js over
 * stdin/stdout so that modelc's runs and ONNX Runtime's interleave in one
 * process tree.
 *
 *   cc -O3 -march=native -I build/bench/NAME -DMODEL=NAME -DUMODEL=UNAME \
 *      -DMODEL_HEADER='"NAME.h"' bench/driver.c NAME.c NAME_weights.c -lm
 *   driver INPUT_FILE...      (raw little-endian, one per input, in order)
 *
 * Commands, one per line; every answer is one line:
 *   run N      runs the model N times; answers "ok T1 T2 ..." (ns per call)
 *   write DIR  runs once, writes output k to DIR/k.bin; answers "ok T"
 *   quit       exits
 * A failed run answers "error ..." (the status NAME_run returned).
 *
 * Built with -DWORKERS=N -pthread and DIR/modelc_threads_pthread.c (the
 * model compiled with modelc --threads N; bench/run --threads N), it also
 * takes "trun N" and "twrite DIR": the same through NAME_run_threads on
 * runtime-min's pthread pool of N workers, made once at start so that the
 * timed calls do not pay for thread creation. */
#define _POSIX_C_SOURCE 200112L
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include MODEL_HEADER
#ifdef WORKERS
#include "modelc_threads_pthread.h"
#endif

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define RUN CAT(MODEL, _run)
#define INPUT_DESCS CAT(MODEL, _inputs)
#define OUTPUT_DESCS CAT(MODEL, _outputs)
#define NUM_INPUTS CAT(UMODEL, _NUM_INPUTS)
#define NUM_OUTPUTS CAT(UMODEL, _NUM_OUTPUTS)
#define ARENA_BYTES CAT(UMODEL, _ARENA_BYTES)
#define ARENA_ALIGN CAT(UMODEL, _ARENA_ALIGN)
#define RUN_THREADS CAT(MODEL, _run_threads)
/* -DCOUNTED: the model has counted outputs (NAME_run_counted); write
 * writes their counted entries, as ONNX Runtime gives them */
#ifdef COUNTED
#undef RUN
#undef RUN_THREADS
#define RUN(a, i, o) CAT(MODEL, _run_counted)(a, i, o, counts)
#define RUN_THREADS(a, i, o, t) CAT(MODEL, _run_counted_threads)(a, i, o, counts, t)
static int64_t counts[CAT(UMODEL, _NUM_OUTPUTS) + 1];
static const int counted_axis[] = CAT(UMODEL, _OUTPUT_COUNTED_AXES);
#endif

/* Bytes of one element of a MODELC_* type (one per element for the
 * sub-byte types, as modelc_rt.h stores them). */
static size_t dtype_bytes(int dtype)
{
	switch (dtype) {
	case MODELC_DOUBLE: case MODELC_INT64: case MODELC_UINT64:
		return 8;
	case MODELC_FLOAT: case MODELC_INT32: case MODELC_UINT32:
		return 4;
	case MODELC_FLOAT16: case MODELC_BFLOAT16: case MODELC_INT16: case MODELC_UINT16:
		return 2;
	default:
		return 1;
	}
}

static size_t desc_bytes(const modelc_tensor_desc *d)
{
	size_t n = dtype_bytes(d->dtype);
	for (int i = 0; i < d->rank; i++)
		n *= (size_t)d->dims[i];
	return n;
}

/* A zeroed buffer aligned for any vector load (at least 64 bytes). */
static void *alloc_aligned(size_t bytes, size_t align)
{
	void *p = NULL;
	if (align < 64)
		align = 64;
	bytes = (bytes + align - 1) / align * align;
	if (posix_memalign(&p, align, bytes ? bytes : align))
		return NULL;
	memset(p, 0, bytes ? bytes : align);
	return p;
}

static int read_input(const char *path, void *buf, size_t bytes)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "driver: cannot open %s\n", path);
		return -1;
	}
	size_t got = fread(buf, 1, bytes, f);
	int extra = fgetc(f);
	fclose(f);
	if (got != bytes || extra != EOF) {
		fprintf(stderr, "driver: %s: want exactly %zu bytes\n", path, bytes);
		return -1;
	}
	return 0;
}

static int64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void *arena;
static const void *inputs[NUM_INPUTS > 0 ? NUM_INPUTS : 1];
static void *outputs[NUM_OUTPUTS > 0 ? NUM_OUTPUTS : 1];

#ifdef WORKERS
static modelc_threads threads;
#endif

/* One call: on one thread, or (threaded) on the pool. */
static int run_once(int threaded)
{
#ifdef WORKERS
	if (threaded)
		return RUN_THREADS(arena, inputs, outputs, &threads);
#endif
	(void)threaded;
	return RUN(arena, inputs, outputs);
}

static void cmd_run(long n, int threaded)
{
	int64_t *t = malloc(sizeof *t * (size_t)(n > 0 ? n : 1));
	if (!t) {
		printf("error out of memory\n");
		return;
	}
	for (long i = 0; i < n; i++) {
		int64_t t0 = now_ns();
		int rc = run_once(threaded);
		t[i] = now_ns() - t0;
		if (rc != MODELC_OK) {
			printf("error status %d\n", rc);
			free(t);
			return;
		}
	}
	printf("ok");
	for (long i = 0; i < n; i++)
		printf(" %lld", (long long)t[i]);
	printf("\n");
	free(t);
}

static void cmd_write(const char *dir, int threaded)
{
	int64_t t0 = now_ns();
	int rc = run_once(threaded);
	int64_t t = now_ns() - t0;
	if (rc != MODELC_OK) {
		printf("error status %d\n", rc);
		return;
	}
	for (int k = 0; k < NUM_OUTPUTS; k++) {
		char path[4096];
		snprintf(path, sizeof path, "%s/%d.bin", dir, k);
		FILE *f = fopen(path, "wb");
		size_t bytes = desc_bytes(&OUTPUT_DESCS[k]);
		/* blocks before the counted axis, each its first counts[k] entries */
		size_t blocks = 1, part = bytes;
#ifdef COUNTED
		const modelc_tensor_desc *d = &OUTPUT_DESCS[k];
		if (counted_axis[k] >= 0 && d->dims[counted_axis[k]] > 0) {
			for (int a = 0; a < counted_axis[k]; a++)
				blocks *= (size_t)d->dims[a];
			part = bytes / blocks / (size_t)d->dims[counted_axis[k]] * (size_t)counts[k];
		}
#endif
		bool ok = f != NULL;
		for (size_t b = 0; b < blocks && ok; b++)
			ok = fwrite((const char *)outputs[k] + b * (bytes / blocks), 1, part, f) == part;
		if (!f || !ok || fclose(f)) {
			printf("error cannot write %s\n", path);
			return;
		}
	}
	printf("ok %lld\n", (long long)t);
}

int main(int argc, char **argv)
{
	if (argc != 1 + NUM_INPUTS) {
		fprintf(stderr, "driver: want %d input files, got %d\n", NUM_INPUTS, argc - 1);
		return 2;
	}
	arena = alloc_aligned(ARENA_BYTES, ARENA_ALIGN);
	if (!arena)
		return 2;
	for (int i = 0; i < NUM_INPUTS; i++) {
		size_t bytes = desc_bytes(&INPUT_DESCS[i]);
		void *buf = alloc_aligned(bytes, 64);
		if (!buf || read_input(argv[1 + i], buf, bytes))
			return 2;
		inputs[i] = buf;
	}
	for (int k = 0; k < NUM_OUTPUTS; k++)
		if (!(outputs[k] = alloc_aligned(desc_bytes(&OUTPUT_DESCS[k]), 64)))
			return 2;
#ifdef WORKERS
	modelc_pthread_pool *pool = modelc_pthread_pool_new(WORKERS);
	if (!pool) {
		fprintf(stderr, "driver: cannot start %d workers\n", WORKERS);
		return 2;
	}
	threads = (modelc_threads){ modelc_pthread_parallel_for, pool };
	const int threaded_ok = 1;
#else
	const int threaded_ok = 0;
#endif
	char line[4096];
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\r\n")] = 0;
		int threaded = line[0] == 't';
		const char *cmd = line + threaded;
		if (threaded && !threaded_ok)
			printf("error '%s': not built with -DWORKERS\n", line);
		else if (!strncmp(cmd, "run ", 4))
			cmd_run(strtol(cmd + 4, NULL, 10), threaded);
		else if (!strncmp(cmd, "write ", 6))
			cmd_write(cmd + 6, threaded);
		else if (!threaded && !strcmp(line, "quit"))
			break;
		else
			printf("error unknown command '%s'\n", line);
		fflush(stdout);
	}
#ifdef WORKERS
	modelc_pthread_pool_free(pool);
#endif
	return 0;
}
