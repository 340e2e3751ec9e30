/*
 * The linux-aarch64 example: runs the real models of the test set (each a
 * library made by CMake's modelc_add_model) on seeded inputs and prints
 * every output as float32 bits, the format ../tools/compare reads. Built
 * for aarch64 (run under qemu-aarch64) and for the host; the check
 * compares the two.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blazeface.h"
#include "embedding.h"
#include "hey_jarvis.h"
#include "melspectrogram.h"
#include "mlsd.h"

typedef int (*run_fn)(void *arena, const void *const inputs[], void *const outputs[]);

typedef struct {
	const char *name;
	run_fn run;
	size_t arena_bytes;
	int n_in, n_out;
	const modelc_tensor_desc *in, *out;
} model;

#define MODEL(n, N) { #n, n##_run, N##_ARENA_BYTES, N##_NUM_INPUTS, N##_NUM_OUTPUTS, n##_inputs, n##_outputs }
static const model models[] = {
	MODEL(blazeface, BLAZEFACE),
	MODEL(embedding, EMBEDDING),
	MODEL(hey_jarvis, HEY_JARVIS),
	MODEL(melspectrogram, MELSPECTROGRAM),
	MODEL(mlsd, MLSD),
};

static size_t numel(const modelc_tensor_desc *d)
{
	size_t n = 1;
	for (int i = 0; i < d->rank; i++)
		n *= (size_t)d->dims[i];
	return n;
}

/* uniform in [-1, 1): a 32-bit LCG, the same values on every machine */
static void fill(float *v, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		v[i] = (float)(seed >> 8) / (float)(1u << 23) - 1.0f;
	}
}

static int run_model(const model *m, uint32_t seed)
{
	enum { MAX_IO = 8 };
	const void *in[MAX_IO];
	void *out[MAX_IO];
	void *arena = m->arena_bytes ? aligned_alloc(64, (m->arena_bytes + 63) / 64 * 64) : NULL;
	int status = m->n_in > MAX_IO || m->n_out > MAX_IO || (m->arena_bytes && !arena) ? -1 : 0;
	for (int i = 0; status == 0 && i < m->n_in; i++) {
		float *v = malloc(numel(&m->in[i]) * sizeof *v);
		if (m->in[i].dtype != MODELC_FLOAT || !v) {
			fprintf(stderr, "%s: input %s: not float32 (or no memory)\n", m->name, m->in[i].name);
			free(v);
			status = -1;
			break;
		}
		fill(v, numel(&m->in[i]), seed + (uint32_t)i);
		in[i] = v;
	}
	for (int i = 0; status == 0 && i < m->n_out; i++)
		if (m->out[i].dtype != MODELC_FLOAT || !(out[i] = malloc(numel(&m->out[i]) * sizeof(float))))
			status = -1;
	if (status == 0)
		status = m->run(arena, in, out);
	for (int i = 0; status == 0 && i < m->n_out; i++) {
		const float *v = out[i];
		printf("out %s %d %zu\n", m->name, i, numel(&m->out[i]));
		for (size_t k = 0; k < numel(&m->out[i]); k++) {
			uint32_t bits;
			memcpy(&bits, &v[k], sizeof bits);
			printf("%08lx\n", (unsigned long)bits);
		}
	}
	if (status)
		fprintf(stderr, "%s: FAILED (status %d)\n", m->name, status);
	return status;
}

int main(void)
{
	int fails = 0;
	for (size_t i = 0; i < sizeof models / sizeof *models; i++)
		fails += run_model(&models[i], 1000u + (uint32_t)i) != 0;
	printf(fails ? "FAILED\n" : "done\n");
	return fails != 0;
}
