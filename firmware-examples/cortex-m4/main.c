/*
 * The cortex-m4 example: runs three compiled models (the default digits
 * model on 8 stored test images, the openWakeWord speech embedding and
 * its hey_jarvis classifier on stored features) and prints every output
 * as float32 bits, with a checksum per model.
 *
 * Then the embedding again, compiled with its arena as two pools
 * (embpools_run_pools), each in its own memory: the same bits.
 *
 * Built twice from the same sources: for the MPS2 AN386 board (Cortex-M4F,
 * arm-none-eabi-gcc, output over semihosting; run in qemu-system-arm) and
 * for the host (cc): `make check` compares the two.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "inputs.h" /* and the models' headers */

/* The models run one after another: one arena, as large as the largest
 * one needs (in .bss: RAM, zeroed at reset; nothing on the heap). */
#define MAX2(a, b) ((a) > (b) ? (a) : (b))
#define ARENA_BYTES MAX2(MAX2(DIGITS_ARENA_BYTES, EMBEDDING_ARENA_BYTES), HEY_JARVIS_ARENA_BYTES)
typedef char arena_alignment_is_enough[DIGITS_ARENA_ALIGN <= 64 && EMBEDDING_ARENA_ALIGN <= 64 &&
                                       HEY_JARVIS_ARENA_ALIGN <= 64 ? 1 : -1];
static unsigned char arena[ARENA_BYTES] __attribute__((aligned(64)));

/* embpools, the embedding with its arena as two pools: the fast one (the
 * buffers the most kernels touch, at most 64 KiB) with the rest of RAM,
 * the other in .bss.psram, which link.ld puts in the board's PSRAM. */
static unsigned char pool_fast[EMBPOOLS_POOL_0_BYTES] __attribute__((aligned(64)));
static unsigned char pool_slow[EMBPOOLS_POOL_1_BYTES] __attribute__((aligned(64), section(".bss.psram")));
static float embpools_out[EMBPOOLS_OUTPUT_0_NUMEL];

static float digits_logits[DIGITS_OUTPUT_0_NUMEL];
static float embedding_out[EMBEDDING_OUTPUT_0_NUMEL];
static float hey_jarvis_out[HEY_JARVIS_OUTPUT_0_NUMEL];

/* FNV-1a over the outputs' bits */
static uint32_t fnv1a(uint32_t h, const float *values, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		uint32_t bits;
		memcpy(&bits, &values[i], sizeof bits);
		for (int b = 0; b < 4; b++) {
			h ^= (bits >> (8 * b)) & 0xffu;
			h *= 16777619u;
		}
	}
	return h;
}

/* `out MODEL INDEX COUNT`, then one line of hex bits per value (what
 * tools/compare reads) */
static uint32_t print_output(const char *model, int index, const float *values, size_t count, uint32_t h)
{
	printf("out %s %d %lu\n", model, index, (unsigned long)count);
	for (size_t i = 0; i < count; i++) {
		uint32_t bits;
		memcpy(&bits, &values[i], sizeof bits);
		printf("%08lx\n", (unsigned long)bits);
	}
	return fnv1a(h, values, count);
}

static int argmax(const float *values, size_t count)
{
	size_t best = 0;
	for (size_t i = 1; i < count; i++)
		if (values[i] > values[best])
			best = i;
	return (int)best;
}

/* One run of a model with one input and one output; prints the output and
 * folds it into *h when the run succeeds. Returns the run's status. */
typedef int (*run_fn)(void *arena, const void *const inputs[], void *const outputs[]);
static int run_one(const char *model, int index, run_fn run, const float *input, float *output, size_t count,
                   uint32_t *h)
{
	const void *in[1] = { input };
	void *out[1] = { output };
	int status = run(arena, in, out);
	if (status == 0)
		*h = print_output(model, index, output, count, *h);
	return status;
}

#define FNV_START 2166136261u

int main(void)
{
	int status = 0;
	uint32_t h = FNV_START;
	printf("modelc cortex-m4 example\n");
	for (int i = 0; i < DIGITS_IMAGES && status == 0; i++) {
		status = run_one("digits", i, digits_run, &digits_images[i * DIGITS_INPUT_0_NUMEL], digits_logits,
		                 DIGITS_OUTPUT_0_NUMEL, &h);
		if (status == 0)
			printf("digits: image %d is a %d\n", i, argmax(digits_logits, DIGITS_OUTPUT_0_NUMEL));
	}
	if (status == 0)
		printf("checksum digits %08lx\n", (unsigned long)h);
	h = FNV_START;
	if (status == 0 && (status = run_one("embedding", 0, embedding_run, embedding_input, embedding_out,
	                                     EMBEDDING_OUTPUT_0_NUMEL, &h)) == 0)
		printf("checksum embedding %08lx\n", (unsigned long)h);
	h = FNV_START;
	if (status == 0 && (status = run_one("hey_jarvis", 0, hey_jarvis_run, hey_jarvis_input, hey_jarvis_out,
	                                     HEY_JARVIS_OUTPUT_0_NUMEL, &h)) == 0)
		printf("checksum hey_jarvis %08lx\n", (unsigned long)h);
	if (status == 0) {
		const void *in[1] = { embedding_input };
		void *out[1] = { embpools_out };
		void *pools[EMBPOOLS_NUM_POOLS] = { pool_fast, pool_slow };
		h = FNV_START;
		if ((status = embpools_run_pools(pools, in, out)) == 0) {
			h = print_output("embpools", 0, embpools_out, EMBPOOLS_OUTPUT_0_NUMEL, h);
			printf("checksum embpools %08lx\n", (unsigned long)h);
			if (memcmp(embpools_out, embedding_out, sizeof embpools_out)) {
				printf("embpools: output differs from the one-arena build\n");
				status = -1;
			} else {
				printf("embpools: pools %s (%u bytes) and %s (%u bytes): same bits as embedding\n",
				       EMBPOOLS_POOL_0_NAME, (unsigned)EMBPOOLS_POOL_0_BYTES, EMBPOOLS_POOL_1_NAME,
				       (unsigned)EMBPOOLS_POOL_1_BYTES);
			}
		}
	}
	printf(status == 0 ? "done\n" : "FAILED: status %d\n", status);
	return status == 0 ? 0 : 1;
}
