/*
 * bench/mcu's bare-metal harness: one compiled model on the MPS2 AN386
 * board (Cortex-M4F) under qemu-system-arm -icount shift=0, built by
 * bench/mcu/run with the cortex-m4 firmware example's startup.c and link.ld.
 *
 *   arm-none-eabi-gcc ... -I DIR -DMODEL=NAME -DUMODEL=UNAME \
 *       -DMODEL_HEADER='"NAME.h"' [-DRUNS=3] bench/mcu/main.c
 *
 * Fills the input with seeded values (int8/uint8: every code; float: uniform
 * in [-4, 4); --io-in-arena: in the arena, before each run, as the model
 * reuses its bytes), runs the model once to warm up and RUNS more times, each
 * timed with the CMSDK APB timer 0 (25 MHz: under -icount shift=0 one tick
 * is 40 instructions) and each with the stack below main's frame painted
 * beforehand. Prints, over semihosting, in the format of the TFLM images of
 * ../shared/mcu-anchor/tflm/:
 *   bench modelc model=NAME
 *   arena_bytes=N input_bytes=N output_bytes=N
 *   status=0
 *   stack_bytes=N        (the most any run reached, painted)
 *   warmup_ticks=N
 *   run_ticks=N          (one line per timed run)
 *   runs=N total_ticks=N
 *   checksum=XXXXXXXX    (FNV-1a of the output bytes of the last run)
 *   done
 * bench/mcu/run's mix.py pass counts from the second entry into NAME_run
 * (the first timed run) until control is back in main: nothing else runs
 * between the two timer reads.
 *
 * With -DBOARD_AN547 (bench/mcu/run --m55): the MPS3 AN547 board
 * (Cortex-M55, qemu -M mps3-an547), timed with SysTick (32 MHz: 31.25
 * instructions a tick; 24 bits, so at most 524 M instructions a run).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include MODEL_HEADER

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define RUN CAT(MODEL, _run)
#define STR_(a) #a
#define STR(a) STR_(a)
#define UM(s) CAT(UMODEL, s)

#if UM(_NUM_INPUTS) != 1 || UM(_NUM_OUTPUTS) != 1
#error "bench/mcu/main.c: one input and one output only"
#endif

#ifndef RUNS
#define RUNS 3
#endif
#define PAINT_BYTES 16384u
#define PAINT 0xa5a5a5a5u

static unsigned char arena[UM(_ARENA_BYTES)] __attribute__((aligned(UM(_ARENA_ALIGN))));
#if UM(_IO_IN_ARENA)
/* --io-in-arena: the input and output live in the arena (as TFLM's do);
 * the input is written there before each run, as it is reused once read */
#define IO_IN_ARENA 1
#define INPUT ((unsigned char *)UM(_INPUT_0_AT)(arena))
#define OUTPUT ((const unsigned char *)UM(_OUTPUT_0_AT)(arena))
#else
static unsigned char input[UM(_INPUT_0_BYTES)] __attribute__((aligned(16)));
static unsigned char output[UM(_OUTPUT_0_BYTES)] __attribute__((aligned(16)));
#define IO_IN_ARENA 0
#define INPUT input
#define OUTPUT output
#endif

#if defined(BOARD_AN547)
/* MPS3 AN547 (Cortex-M55): SysTick on the 32 MHz processor clock (under
 * -icount shift=0 one tick is 31.25 instructions), 24 bits: counts down */
#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
static void timer_start(void)
{
	SYST_CSR = 0;
	SYST_RVR = 0xffffffu;
	SYST_CVR = 0;
	SYST_CSR = 5;
}
static uint32_t timer_read(void)
{
	return SYST_CVR;
}
#define TIMER_MASK 0xffffffu
#else
/* CMSDK APB timer 0 of the AN386: counts down from RELOAD at 25 MHz */
#define TIMER0_CTRL (*(volatile uint32_t *)0x40000000u)
#define TIMER0_VALUE (*(volatile uint32_t *)0x40000004u)
#define TIMER0_RELOAD (*(volatile uint32_t *)0x40000008u)
static void timer_start(void)
{
	TIMER0_CTRL = 0;
	TIMER0_RELOAD = 0xffffffffu;
	TIMER0_VALUE = 0xffffffffu;
	TIMER0_CTRL = 1;
}
static uint32_t timer_read(void)
{
	return TIMER0_VALUE;
}
#define TIMER_MASK 0xffffffffu
#endif

static uint32_t seed;
static uint32_t next(void)
{
	seed = seed * 1664525u + 1013904223u;
	return seed >> 8;
}

static void fill_input(void)
{
	int dtype = UM(_INPUT_0_DTYPE);
	seed = 12345u;
	if (dtype == MODELC_FLOAT) {
		float *x = (float *)(void *)INPUT;
		for (size_t i = 0; i < UM(_INPUT_0_NUMEL); i++)
			x[i] = (float)(int32_t)(next() & 0xffffu) * (8.0f / 65536.0f) - 4.0f;
	} else {
		for (size_t i = 0; i < UM(_INPUT_0_BYTES); i++)
			INPUT[i] = (unsigned char)next();
	}
}

/* Paints PAINT_BYTES below this leaf's frame (sp - 16 down), where the
 * model's run will put its frames. */
static __attribute__((noinline)) uint32_t *paint_stack(void)
{
	uint32_t sp;
	__asm volatile("mov %0, sp" : "=r"(sp));
	uint32_t *bottom = (uint32_t *)((sp - PAINT_BYTES - 16u) & ~7u);
	for (uint32_t *p = bottom; p < (uint32_t *)(sp - 16u); p++)
		*p = PAINT;
	return bottom;
}

static uint32_t stack_used(const uint32_t *bottom, uint32_t sp)
{
	const uint32_t *p = bottom;
	while (p < (const uint32_t *)sp && *p == PAINT)
		p++;
	return sp - (uint32_t)p;
}

int main(void)
{
#if IO_IN_ARENA
	const void *const *in = NULL;
	void *const *out = NULL;
#else
	const void *in[1] = { input };
	void *out[1] = { output };
#endif
	uint32_t ticks[RUNS + 1], stack = 0, total = 0, h = 2166136261u;
	int status = 0;

	printf("bench modelc model=%s\n", STR(MODEL));
	for (int r = 0; r <= RUNS && status == 0; r++) {
		uint32_t sp, t0, t1;
		if (r == 0 || IO_IN_ARENA)
			fill_input();
		uint32_t *bottom = paint_stack();
		__asm volatile("mov %0, sp" : "=r"(sp));
		timer_start();
		t0 = timer_read();
		status = RUN(arena, in, out);
		t1 = timer_read();
		ticks[r] = (t0 - t1) & TIMER_MASK;
		uint32_t used = stack_used(bottom, sp);
		if (used > stack)
			stack = used;
	}
	printf("arena_bytes=%lu input_bytes=%lu output_bytes=%lu\n", (unsigned long)UM(_ARENA_BYTES),
	       (unsigned long)(IO_IN_ARENA ? 0 : UM(_INPUT_0_BYTES)),
	       (unsigned long)(IO_IN_ARENA ? 0 : UM(_OUTPUT_0_BYTES)));
	printf("status=%d\n", status);
	if (status != 0) {
		printf("FAILED\n");
		return 1;
	}
	printf("stack_bytes=%lu\n", (unsigned long)stack);
	printf("warmup_ticks=%lu\n", (unsigned long)ticks[0]);
	for (int r = 1; r <= RUNS; r++) {
		printf("run_ticks=%lu\n", (unsigned long)ticks[r]);
		total += ticks[r];
	}
	printf("runs=%d total_ticks=%lu\n", RUNS, (unsigned long)total);
	for (size_t i = 0; i < UM(_OUTPUT_0_BYTES); i++) {
		h ^= OUTPUT[i];
		h *= 16777619u;
	}
	printf("checksum=%08lx\n", (unsigned long)h);
	printf("done\n");
	return 0;
}
