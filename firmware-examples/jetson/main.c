/*
 * The jetson example: two models (the openWakeWord speech embedding and
 * its hey_jarvis classifier), each compiled twice by modelc: for the GPU
 * (`--target cuda`, NAME_gpu_cuda_*) and as the C fallback (the default
 * target, NAME_run). On stored inputs it runs the C fallback and prints
 * every output as float32 bits on stdout, the format ../tools/compare
 * reads. Where a CUDA device is there and a model's CUDA half
 * initialises, it runs the same inputs on the GPU too, writes those
 * outputs to --gpu-log FILE (same format, same names) and compares them
 * with the C fallback's: max|gpu - c| / max|c| <= RTOL. Without a GPU it
 * says so on stderr and runs the C fallback alone.
 *
 *   app [--gpu-log FILE] [--repeat N] [--require-gpu]
 * --repeat N: N more runs of each, timed (mean microseconds per run).
 * --require-gpu: a missing GPU fails (for a check on a GPU machine).
 * Exit status: 0 when every run succeeded and the GPU agreed; 1 if not.
 *
 * Built with -DAPP_NO_CUDA the GPU half is compiled out: the C fallback
 * alone, for a board without CUDA or a build without its toolkit (the
 * aarch64 cross build of firmware-examples/check).
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inputs.h" /* and the C fallbacks' headers */
#ifndef APP_NO_CUDA
#include <cuda_runtime_api.h>

#include "embedding_gpu.h"
#include "hey_jarvis_gpu.h"
#endif

/* fp32 on both sides; the GPU contracts multiply-adds and sums in
 * another order, which moves these models by about 1e-7 */
#define RTOL 1e-5

/* The C fallbacks run one after another: one arena, as large as the
 * larger one needs, aligned for both. */
#define MAX2(a, b) ((a) > (b) ? (a) : (b))
typedef char arena_alignment_is_enough[EMBEDDING_ARENA_ALIGN <= 64 && HEY_JARVIS_ARENA_ALIGN <= 64 ? 1 : -1];
static unsigned char arena[MAX2(EMBEDDING_ARENA_BYTES, HEY_JARVIS_ARENA_BYTES)] __attribute__((aligned(64)));

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* `out MODEL INDEX COUNT`, then one line of hex bits per value */
static void print_output(FILE *f, const char *model, const float *values, size_t count)
{
	fprintf(f, "out %s 0 %lu\n", model, (unsigned long)count);
	for (size_t i = 0; i < count; i++) {
		uint32_t bits;
		memcpy(&bits, &values[i], sizeof bits);
		fprintf(f, "%08lx\n", (unsigned long)bits);
	}
}

typedef int (*c_run_fn)(void *arena, const void *const inputs[], void *const outputs[]);

/* One run of a C fallback (one input, one output), then `repeat` timed
 * ones; returns the first run's status. */
static int run_c(c_run_fn run, const float *input, float *output, int repeat, double *us)
{
	const void *in[1] = { input };
	void *out[1] = { output };
	int status = run(arena, in, out);
	double t0 = now_us();
	for (int i = 0; status == 0 && i < repeat; i++)
		status = run(arena, in, out);
	*us = repeat > 0 ? (now_us() - t0) / repeat : 0;
	return status;
}

#ifndef APP_NO_CUDA
/* NAME_on_gpu: one inference of model NAME on the GPU, then `repeat`
 * timed ones: init (one device allocation, the weights uploaded once, the
 * inference captured into a CUDA graph; *up says whether it succeeded),
 * input, run, output, then status, which waits for the stream. Returns
 * MODELC_OK or the first failing step's status (MODELC_ERR_CUDA: *err says
 * why). The models' types differ, hence a macro rather than function
 * pointers. */
#define DEFINE_ON_GPU(NAME) \
	static int NAME##_on_gpu(const float *input, float *output, int repeat, double *us, cudaError_t *err, \
	                         int *up) \
	{ \
		NAME##_cuda m; \
		int status = NAME##_cuda_init(&m, NULL, 0, 0); \
		*up = status == MODELC_OK; \
		if (status != MODELC_OK) { \
			*err = m.error; /* init released m */ \
			return status; \
		} \
		status = NAME##_cuda_set_input(&m, 0, input); \
		if (status == MODELC_OK) \
			status = NAME##_cuda_run(&m); \
		if (status == MODELC_OK) \
			status = NAME##_cuda_get_output(&m, 0, output); \
		int done = NAME##_cuda_status(&m); \
		if (status == MODELC_OK) \
			status = done; \
		double t0 = now_us(); \
		for (int i = 0; status == MODELC_OK && i < repeat; i++) \
			status = NAME##_cuda_run(&m); \
		if (repeat > 0 && status == MODELC_OK) \
			status = NAME##_cuda_status(&m); \
		*us = repeat > 0 ? (now_us() - t0) / repeat : 0; \
		*err = m.error; \
		NAME##_cuda_free(&m); \
		return status; \
	}
DEFINE_ON_GPU(embedding_gpu)
DEFINE_ON_GPU(hey_jarvis_gpu)

/* The GPU half of both models has the C fallback's inputs and outputs. */
typedef char same_shapes[EMBEDDING_GPU_INPUT_0_NUMEL == EMBEDDING_INPUT_0_NUMEL &&
                         EMBEDDING_GPU_OUTPUT_0_NUMEL == EMBEDDING_OUTPUT_0_NUMEL &&
                         HEY_JARVIS_GPU_INPUT_0_NUMEL == HEY_JARVIS_INPUT_0_NUMEL &&
                         HEY_JARVIS_GPU_OUTPUT_0_NUMEL == HEY_JARVIS_OUTPUT_0_NUMEL ? 1 : -1];
typedef int (*gpu_run_fn)(const float *input, float *output, int repeat, double *us, cudaError_t *err, int *up);

/* max|a - b| / max|b| (NaN counts as a difference) */
static double rel_err(const float *a, const float *b, size_t n)
{
	double diff = 0, ref = 0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - (double)b[i]);
		if (!(d <= diff))
			diff = isnan(d) ? INFINITY : d;
		if (fabs((double)b[i]) > ref)
			ref = fabs((double)b[i]);
	}
	return ref > 0 ? diff / ref : diff;
}

/* Whether there is a CUDA device to run on; says which on stderr, or why not. */
static int have_gpu(void)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n == 0) {
		fprintf(stderr, "jetson: no CUDA device (%s): running the C fallback only\n",
		        e != cudaSuccess ? cudaGetErrorString(e) : "none found");
		return 0;
	}
	struct cudaDeviceProp p;
	if (cudaGetDeviceProperties(&p, 0) == cudaSuccess)
		fprintf(stderr, "jetson: GPU: %s (sm_%d%d)\n", p.name, p.major, p.minor);
	return 1;
}
#endif

typedef struct {
	const char *name;
	c_run_fn run;
	const float *input;
	float *out_c, *out_gpu;
	size_t count; /* values of the output */
#ifndef APP_NO_CUDA
	gpu_run_fn on_gpu;
#endif
} model;

static float embedding_c[EMBEDDING_OUTPUT_0_NUMEL], embedding_g[EMBEDDING_OUTPUT_0_NUMEL];
static float hey_jarvis_c[HEY_JARVIS_OUTPUT_0_NUMEL], hey_jarvis_g[HEY_JARVIS_OUTPUT_0_NUMEL];

#ifndef APP_NO_CUDA
#define GPU_FN(n) , n##_gpu_on_gpu
#else
#define GPU_FN(n)
#endif
static const model models[] = {
	{ "embedding", embedding_run, embedding_input, embedding_c, embedding_g, EMBEDDING_OUTPUT_0_NUMEL
	  GPU_FN(embedding) },
	{ "hey_jarvis", hey_jarvis_run, hey_jarvis_input, hey_jarvis_c, hey_jarvis_g, HEY_JARVIS_OUTPUT_0_NUMEL
	  GPU_FN(hey_jarvis) },
};

int main(int argc, char **argv)
{
	const char *gpu_log_path = NULL;
	int repeat = 0, require_gpu = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--gpu-log") && i + 1 < argc) {
			gpu_log_path = argv[++i];
		} else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
			repeat = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--require-gpu")) {
			require_gpu = 1;
		} else {
			fprintf(stderr, "usage: app [--gpu-log FILE] [--repeat N] [--require-gpu]\n");
			return 2;
		}
	}
	FILE *gpu_log = NULL;
	if (gpu_log_path && !(gpu_log = fopen(gpu_log_path, "w"))) {
		perror(gpu_log_path);
		return 2;
	}
#ifndef APP_NO_CUDA
	int gpu = have_gpu();
#else
	fprintf(stderr, "jetson: built without CUDA (APP_NO_CUDA): running the C fallback only\n");
#endif
	int fails = 0, gpu_runs = 0;
	for (size_t k = 0; k < sizeof models / sizeof *models; k++) {
		const model *m = &models[k];
		double us_c = 0;
		int status = run_c(m->run, m->input, m->out_c, repeat, &us_c);
		if (status) {
			fprintf(stderr, "%s: C fallback FAILED (status %d)\n", m->name, status);
			fails++;
			continue;
		}
		print_output(stdout, m->name, m->out_c, m->count);
		if (repeat > 0)
			fprintf(stderr, "%s: C fallback: %.1f us per run\n", m->name, us_c);
#ifndef APP_NO_CUDA
		if (!gpu)
			continue;
		double us_g = 0;
		cudaError_t err = cudaSuccess;
		int up = 0;
		status = m->on_gpu(m->input, m->out_gpu, repeat, &us_g, &err, &up);
		if (!up) { /* no room, no kernels for this GPU, ...: the fallback serves */
			fprintf(stderr, "%s: the CUDA model did not initialise (status %d: %s): C fallback only\n", m->name,
			        status, status == MODELC_ERR_CUDA ? cudaGetErrorString(err) : "see modelc_rt.h");
			continue;
		}
		if (status) {
			fprintf(stderr, "%s: GPU FAILED (status %d%s%s)\n", m->name, status,
			        status == MODELC_ERR_CUDA ? ": " : "", status == MODELC_ERR_CUDA ? cudaGetErrorString(err) : "");
			fails++;
			continue;
		}
		gpu_runs++;
		if (gpu_log)
			print_output(gpu_log, m->name, m->out_gpu, m->count);
		double e = rel_err(m->out_gpu, m->out_c, m->count);
		int ok = e <= RTOL;
		fprintf(stderr, "%s: GPU vs C fallback: max|diff|/max|c| %.3e (<= %.0e): %s\n", m->name, e, RTOL,
		        ok ? "ok" : "FAIL");
		if (repeat > 0)
			fprintf(stderr, "%s: GPU (CUDA graph): %.1f us per run\n", m->name, us_g);
		fails += !ok;
#endif
	}
	if (require_gpu && gpu_runs < (int)(sizeof models / sizeof *models)) {
		fprintf(stderr, "jetson: --require-gpu: only %d models ran on a GPU\n", gpu_runs);
		fails++;
	}
	printf(fails ? "FAILED\n" : "done\n");
	if (gpu_log) {
		fprintf(gpu_log, fails ? "FAILED\n" : "done\n");
		fclose(gpu_log);
	}
	fprintf(stderr, "jetson: %s: %d models, %d on the GPU and compared with the C fallback\n",
	        fails ? "FAIL" : "ok", (int)(sizeof models / sizeof *models), gpu_runs);
	return fails != 0;
}
