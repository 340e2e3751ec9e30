/* modelc_threads_pthread.h's pool.
 *
 * A run hands over one loop after another, microseconds apart. Each
 * parallel_for cuts [0, n) into pieces (PIECES_A_WORKER a worker) and
 * publishes them under a new generation number; every thread, the caller
 * first, claims the next piece with one compare-and-swap of the word
 * (generation, next piece) and runs it, until none is left. So no thread
 * waits for another to start: a worker that wakes late (a sleeping thread
 * can take tens of microseconds to come back, more in a virtual machine)
 * finds less or nothing to do, and the caller never waits longer than a
 * piece that has started. Idle workers spin on the word (SPINS) before
 * they sleep on a condition variable, so that the next loop of the same
 * run finds them awake. The outputs do not depend on who ran which piece
 * (the generated code's promise: any ranges, any order). */
#include "modelc_threads_pthread.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#define PIECES_A_WORKER 4
#define SPINS (1u << 21) /* checks of the word before a worker sleeps: about 2 ms */

struct modelc_pthread_pool {
	int workers;
	pthread_t *threads;
	pthread_mutex_t mu;
	pthread_cond_t go;
	/* the current generation's loop, written before its word */
	atomic_uintptr_t fn, arg; /* modelc_task_fn, void * */
	atomic_llong n, piece;
	atomic_uint pieces;
	/* generation << 32 | the next piece to claim */
	atomic_ullong work;
	atomic_uint finished; /* pieces of this generation run to their end */
	atomic_int sleepers;
	atomic_bool quit;
};

typedef struct {
	modelc_pthread_pool *pool;
} worker_arg;

static unsigned generation_of(unsigned long long word)
{
	return (unsigned)(word >> 32);
}

/* The word's next piece while a new generation's loop is being written:
 * nothing to claim yet. */
#define WRITING 0xffffffffu

/* Claims and runs pieces of generation gen until none is left. The loop's
 * fields are read as a seqlock's data: before the claim, an acquire fence
 * between (parallel_for writes them between a WRITING word, a release
 * fence, and the open word). A claim that succeeds found the word still
 * at gen with pieces left, so the generation had not ended and the fields
 * read were gen's. */
static void run_pieces(modelc_pthread_pool *p, unsigned gen)
{
	unsigned long long word = atomic_load_explicit(&p->work, memory_order_acquire);
	for (;;) {
		unsigned next = (unsigned)word;
		if (generation_of(word) != gen)
			return;
		if (next == WRITING) {
			word = atomic_load_explicit(&p->work, memory_order_acquire);
			continue;
		}
		unsigned pieces = atomic_load_explicit(&p->pieces, memory_order_relaxed);
		modelc_task_fn fn = (modelc_task_fn)atomic_load_explicit(&p->fn, memory_order_relaxed);
		void *arg = (void *)atomic_load_explicit(&p->arg, memory_order_relaxed);
		int64_t n = atomic_load_explicit(&p->n, memory_order_relaxed);
		int64_t piece = atomic_load_explicit(&p->piece, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (next >= pieces)
			return;
		if (!atomic_compare_exchange_weak_explicit(&p->work, &word, word + 1, memory_order_acq_rel,
		                                           memory_order_acquire))
			continue; /* word reloaded */
		int64_t begin = (int64_t)next * piece, end = begin + piece < n ? begin + piece : n;
		fn(arg, begin, end);
		atomic_fetch_add_explicit(&p->finished, 1, memory_order_acq_rel);
		word = atomic_load_explicit(&p->work, memory_order_acquire);
	}
}

/* Waits for a generation other than seen: spins SPINS times, then sleeps. */
static unsigned next_generation(modelc_pthread_pool *p, unsigned seen)
{
	for (unsigned s = 0; s < SPINS; s++) {
		unsigned now = generation_of(atomic_load_explicit(&p->work, memory_order_acquire));
		if (now != seen || atomic_load_explicit(&p->quit, memory_order_relaxed))
			return now;
	}
	/* the caller reads sleepers after its new word (both sequentially
	 * consistent): it wakes us, or we see the word below */
	atomic_fetch_add(&p->sleepers, 1);
	pthread_mutex_lock(&p->mu);
	unsigned now;
	while ((now = generation_of(atomic_load(&p->work))) == seen && !atomic_load(&p->quit))
		pthread_cond_wait(&p->go, &p->mu);
	pthread_mutex_unlock(&p->mu);
	atomic_fetch_sub(&p->sleepers, 1);
	return now;
}

static void *worker(void *arg_)
{
	worker_arg *a = arg_;
	modelc_pthread_pool *p = a->pool;
	free(a);
	unsigned seen = 0;
	for (;;) {
		seen = next_generation(p, seen);
		if (atomic_load(&p->quit))
			return NULL;
		run_pieces(p, seen);
	}
}

modelc_pthread_pool *modelc_pthread_pool_new(int workers)
{
	if (workers < 1)
		return NULL;
	modelc_pthread_pool *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->workers = workers;
	p->threads = calloc((size_t)workers, sizeof *p->threads);
	if (!p->threads || pthread_mutex_init(&p->mu, NULL) || pthread_cond_init(&p->go, NULL)) {
		free(p->threads);
		free(p);
		return NULL;
	}
	for (int i = 1; i < workers; i++) {
		worker_arg *a = malloc(sizeof *a);
		if (a)
			a->pool = p;
		if (!a || pthread_create(&p->threads[i], NULL, worker, a)) {
			free(a);
			p->workers = i; /* the ones made */
			modelc_pthread_pool_free(p);
			return NULL;
		}
	}
	return p;
}

void modelc_pthread_pool_free(modelc_pthread_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	atomic_store(&p->quit, true);
	atomic_fetch_add(&p->work, 1ull << 32);
	pthread_cond_broadcast(&p->go);
	pthread_mutex_unlock(&p->mu);
	for (int i = 1; i < p->workers; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->go);
	pthread_mutex_destroy(&p->mu);
	free(p->threads);
	free(p);
}

void modelc_pthread_parallel_for(void *ctx, modelc_task_fn fn, void *arg, int64_t n)
{
	modelc_pthread_pool *p = ctx;
	if (p->workers == 1 || n < 2) {
		fn(arg, 0, n);
		return;
	}
	int64_t want = (int64_t)p->workers * PIECES_A_WORKER;
	int64_t piece = (n + want - 1) / want;
	unsigned pieces = (unsigned)((n + piece - 1) / piece);
	/* the last generation is over (each piece finished): the new one's
	 * word says WRITING while its loop is written (run_pieces) */
	unsigned gen = generation_of(atomic_load(&p->work)) + 1;
	atomic_store_explicit(&p->work, (unsigned long long)gen << 32 | WRITING, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&p->fn, (uintptr_t)fn, memory_order_relaxed);
	atomic_store_explicit(&p->arg, (uintptr_t)arg, memory_order_relaxed);
	atomic_store_explicit(&p->n, n, memory_order_relaxed);
	atomic_store_explicit(&p->piece, piece, memory_order_relaxed);
	atomic_store_explicit(&p->pieces, pieces, memory_order_relaxed);
	atomic_store_explicit(&p->finished, 0, memory_order_relaxed);
	atomic_store(&p->work, (unsigned long long)gen << 32);
	if (atomic_load(&p->sleepers) > 0) {
		pthread_mutex_lock(&p->mu);
		pthread_cond_broadcast(&p->go);
		pthread_mutex_unlock(&p->mu);
	}
	run_pieces(p, gen);
	/* the pieces others claimed are running: wait for their ends */
	for (unsigned s = 1; atomic_load_explicit(&p->finished, memory_order_acquire) < pieces; s++)
		if (s % 4096 == 0)
			sched_yield();
}
