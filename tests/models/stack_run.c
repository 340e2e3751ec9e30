/* Test support: checks the stack figure modelc records in NAME.json
 * ("stack": {"run_bytes": N}) by running NAME_run on a thread whose stack
 * is N + MARGIN bytes, with a guard below it, painted beforehand so that
 * the depth the run reached can be read back afterwards. It takes over the
 * harness's call to NAME_run:
 *
 *   cc -std=c99 -O2 -c NAME.c NAME_weights.c
 *   cc -std=c99 -O2 -DNAME_run=modelc_stack_run -c NAME_main.c
 *   cc -std=c99 -O2 -DMODELC_RUN=NAME_run -DRUN_BYTES=N -c stack_run.c
 *   cc *.o -o run -pthread -Wl,-z,now -lm
 *
 * The model must be built with the compiler and optimisation modelc
 * measured with (NAME.json's stack.compiler and stack.flags). -z now binds
 * libm at load time: a lazy binding would run the dynamic linker's
 * resolver, which saves the vector registers on the stack, on this thread.
 *
 * Returns the run's status, or STATUS_OVER when it went deeper than
 * RUN_BYTES + SLACK; prints the figures on stderr. A run that needs more
 * than the whole stack dies of SIGSEGV on the guard. */
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if !defined(MODELC_RUN) || !defined(RUN_BYTES)
#error "build with -DMODELC_RUN=NAME_run -DRUN_BYTES=N"
#endif

/* The thread's stack beyond the run's own bytes: glibc keeps the thread's
 * descriptor and static TLS at the top of a stack it is given (2 to 6 KiB),
 * the thread start takes a few frames, and libm's functions (expf, ...),
 * which NAME.json lists as not counted, need a little. */
#ifndef MARGIN
#define MARGIN (16 * 1024)
#endif
/* How much deeper than RUN_BYTES the run may reach: the frames libm's
 * functions push (their red zone is in RUN_BYTES already), and the bytes of
 * this file's frame between where the depth is measured from and the call
 * instruction. */
#ifndef SLACK
#define SLACK 128
#endif
/* Below the stack: far more than any one frame could skip. */
#define GUARD (1024 * 1024)
#define PAINT 0x5a
#define STATUS_OVER 99

/* -DMODELC_COUNTED: the run is NAME_run_counted, which takes the counts */
#ifdef MODELC_COUNTED
#define COUNTS_PARAM , int64_t counts[]
#define COUNTS_ARG(c) , (c)->counts
#else
#define COUNTS_PARAM
#define COUNTS_ARG(c)
#endif
int MODELC_RUN(void *arena, const void *const inputs[], void *const outputs[] COUNTS_PARAM);
int modelc_stack_run(void *arena, const void *const inputs[], void *const outputs[] COUNTS_PARAM);

struct call {
	void *arena;
	const void *const *inputs;
	void *const *outputs;
	int64_t *counts;
	int status;
	unsigned char *top; /* at or above the stack pointer the run starts at */
};

static void *run_on_thread(void *arg)
{
	struct call *c = arg;
	c->top = __builtin_frame_address(0);
	c->status = MODELC_RUN(c->arena, c->inputs, c->outputs COUNTS_ARG(c));
	return NULL;
}

static size_t stack_min(void)
{
#ifdef _SC_THREAD_STACK_MIN
	long m = sysconf(_SC_THREAD_STACK_MIN);
	if (m > 0)
		return (size_t)m;
#endif
	return PTHREAD_STACK_MIN;
}

int modelc_stack_run(void *arena, const void *const inputs[], void *const outputs[] COUNTS_PARAM)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t size = (size_t)RUN_BYTES + MARGIN;
	if (size < stack_min())
		size = stack_min();
	size = (size + page - 1) / page * page;
	unsigned char *map = mmap(NULL, GUARD + size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED || mprotect(map, GUARD, PROT_NONE)) {
		perror("stack_run: mmap");
		return 100;
	}
	unsigned char *stack = map + GUARD;
	memset(stack, PAINT, size);
	pthread_attr_t attr;
	pthread_t thread;
#ifdef MODELC_COUNTED
	struct call c = { arena, inputs, outputs, counts, -1, NULL };
#else
	struct call c = { arena, inputs, outputs, NULL, -1, NULL };
#endif
	if (pthread_attr_init(&attr) || pthread_attr_setstack(&attr, stack, size) ||
	    pthread_create(&thread, &attr, run_on_thread, &c) || pthread_join(thread, NULL)) {
		fprintf(stderr, "stack_run: cannot run a thread on a %zu-byte stack\n", size);
		return 100;
	}
	pthread_attr_destroy(&attr);
	size_t low = 0;
	while (low < size && stack[low] == PAINT)
		low++;
	size_t used = (size_t)(c.top - (stack + low));
	fprintf(stderr, "stack_run: the run reached %zu bytes deep; NAME.json: %lu; thread stack %zu bytes\n",
	        used, (unsigned long)RUN_BYTES, size);
	munmap(map, GUARD + size);
	if (used > (size_t)RUN_BYTES + SLACK) {
		fprintf(stderr, "stack_run: deeper than NAME.json's run_bytes + %d\n", SLACK);
		return STATUS_OVER;
	}
	return c.status;
}
