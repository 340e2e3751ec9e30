/*
 * The cortex-m4-kws example: MLPerf Tiny's int8 keyword-spotting model
 * (DS-CNN, k1_kws_ref_model.onnx, QDQ: modelc runs it as integer ops)
 * compiled with --isa cortex-m, run on stored MFCC-like features; prints
 * the 12 class probabilities as float32 bits (what ../tools/compare reads),
 * the predicted class, a checksum, and the model's memory: arena bytes
 * and, on the board, the stack one run reached (painted) and the timer
 * ticks of one run (under qemu -icount shift=0: 40 instructions a tick).
 *
 * Built twice from the same sources: for the MPS2 AN386 board (Cortex-M4F,
 * arm-none-eabi-gcc, output over semihosting; run in qemu-system-arm) and
 * for the host (cc): `make check` compares the two bit for bit.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kws.h"

#define KWS_INPUTS 4
extern const float kws_features[KWS_INPUTS * KWS_INPUT_0_NUMEL];

static unsigned char arena[KWS_ARENA_BYTES] __attribute__((aligned(KWS_ARENA_ALIGN)));
static float probs[KWS_OUTPUT_0_NUMEL];

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

#if defined(__arm__)
/* CMSDK APB timer 0 of the AN386 (25 MHz; under -icount shift=0 one tick
 * is 40 guest instructions): counts down from RELOAD. */
#define TIMER0_CTRL (*(volatile uint32_t *)0x40000000u)
#define TIMER0_VALUE (*(volatile uint32_t *)0x40000004u)
#define TIMER0_RELOAD (*(volatile uint32_t *)0x40000008u)
#define PAINT_BYTES 4096u
#define PAINT 0xa5a5a5a5u

/* Paints PAINT_BYTES below this frame (the stack the model's run will
 * use: this leaf function's sp minus 16 bytes: up to about
 * 16 bytes + its frame of what the run uses counts as used) */
static __attribute__((noinline)) uint32_t *paint_stack(void)
{
	uint32_t sp;
	__asm volatile("mov %0, sp" : "=r"(sp));
	uint32_t *bottom = (uint32_t *)((sp - PAINT_BYTES - 16u) & ~7u);
	for (uint32_t *p = bottom; p < (uint32_t *)(sp - 16u); p++)
		*p = PAINT;
	return bottom;
}

/* bytes of the painted region that were written, from its top (sp at the call) */
static uint32_t stack_used(const uint32_t *bottom, uint32_t sp)
{
	const uint32_t *p = bottom;
	while (p < (const uint32_t *)sp && *p == PAINT)
		p++;
	return sp - (uint32_t)p;
}
#endif

int main(void)
{
	int status = 0;
	uint32_t h = 2166136261u;
	printf("modelc cortex-m4-kws example (int8 DS-CNN, k1_kws_ref_model)\n");
	printf("arena_bytes %lu\n", (unsigned long)KWS_ARENA_BYTES);
	for (int i = 0; i < KWS_INPUTS && status == 0; i++) {
		const void *in[1] = { &kws_features[i * KWS_INPUT_0_NUMEL] };
		void *out[1] = { probs };
#if defined(__arm__)
		uint32_t sp, t0, t1;
		uint32_t *bottom = paint_stack();
		__asm volatile("mov %0, sp" : "=r"(sp));
		TIMER0_CTRL = 0;
		TIMER0_RELOAD = 0xffffffffu;
		TIMER0_VALUE = 0xffffffffu;
		TIMER0_CTRL = 1;
		t0 = TIMER0_VALUE;
		status = kws_run(arena, in, out);
		t1 = TIMER0_VALUE;
		printf("stack_bytes %lu\n", (unsigned long)stack_used(bottom, sp));
		printf("run_ticks %lu\n", (unsigned long)(t0 - t1));
#else
		status = kws_run(arena, in, out);
#endif
		if (status != 0)
			break;
		printf("out kws %d %lu\n", i, (unsigned long)KWS_OUTPUT_0_NUMEL);
		int best = 0;
		for (size_t k = 0; k < KWS_OUTPUT_0_NUMEL; k++) {
			uint32_t bits;
			memcpy(&bits, &probs[k], sizeof bits);
			printf("%08lx\n", (unsigned long)bits);
			if (probs[k] > probs[best])
				best = (int)k;
		}
		h = fnv1a(h, probs, KWS_OUTPUT_0_NUMEL);
		printf("kws: input %d is class %d (p=%d/1000)\n", i, best, (int)(probs[best] * 1000.0f + 0.5f));
	}
	if (status == 0)
		printf("checksum kws %08lx\n", (unsigned long)h);
	printf(status == 0 ? "done\n" : "FAILED: status %d\n", status);
	return status == 0 ? 0 : 1;
}
