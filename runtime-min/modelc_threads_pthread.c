/* modelc_threads_pthread.h's pool.
 *
 * A run hands over one loop after another, microseconds apart. Each
 * parallel_for cuts [0, n) into one even contiguous share a worker (the
 * caller's the first), each share into pieces (PIECES_A_WORKER), and
 * publishes them under a new generation number. Each thread runs the
 * pieces of its own share first, claiming the next with one
 * compare-and-swap of the share's word (generation, next piece), then
 * claims what is left of the others'. So a worker keeps the rows it had
 * in the loop before (and in its cache), yet no thread waits for another
 * to start: a worker that wakes late (a sleeping thread can take tens of
 * microseconds to come back, more in a virtual machine) finds its share
 * taken, and the caller never waits longer than a piece that has started.
 * Idle workers spin on the generation (SPINS) before they sleep on a
 * condition variable, so that the next loop of the same run finds them
 * awake. The outputs do not depend on who ran which piece (the generated
 * code's promise: any ranges, any order). */
#include "modelc_threads_pthread.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#define PIECES_A_WORKER 4
#define SPINS (1u << 21) /* checks of the generation before a worker sleeps: about 2 ms */

/* A share's word: generation << 32 | its next piece, on a line of its own. */
typedef struct {
	atomic_ullong word;
	char pad[64 - sizeof(atomic_ullong)];
} share;

struct modelc_pthread_pool {
	int workers;
	pthread_t *threads;
	share *shares; /* one a worker */
	pthread_mutex_t mu;
	pthread_cond_t go;
	/* the current generation's loop, written while its shares' words say
	 * WRITING */
	atomic_uintptr_t fn, arg; /* modelc_task_fn, void * */
	atomic_llong n;
	atomic_uint generation; /* what idle workers watch */
	atomic_uint finished;   /* pieces of this generation run to their end */
	atomic_int sleepers;
	atomic_bool quit;
};

typedef struct {
	modelc_pthread_pool *pool;
	int index;
} worker_arg;

/* Share s of [0, n): iterations [*lo, *lo + *len), the workers' even
 * parts; returns its pieces, PIECES_A_WORKER or one an iteration. */
static unsigned share_of(const modelc_pthread_pool *p, int64_t n, int s, int64_t *lo, int64_t *len)
{
	*lo = n * s / p->workers;
	*len = n * (s + 1) / p->workers - *lo;
	return (unsigned)(*len < PIECES_A_WORKER ? *len : PIECES_A_WORKER);
}

/* A share's next piece while a new generation's loop is being written:
 * nothing to claim yet. */
#define WRITING 0xffffffffu

/* Claims and runs the pieces left in share s of generation gen. The
 * loop's fields are read as a seqlock's data: before the claim, an
 * acquire fence between (parallel_for writes them between WRITING words,
 * a release fence, and the open ones). A claim that succeeds found the
 * word still at gen with pieces left in the share, so the generation had
 * not ended and the fields read were gen's. False once the generation is
 * over. */
static bool run_share(modelc_pthread_pool *p, unsigned gen, int s)
{
	atomic_ullong *w = &p->shares[s].word;
	unsigned long long word = atomic_load_explicit(w, memory_order_acquire);
	for (;;) {
		unsigned next = (unsigned)word;
		if ((unsigned)(word >> 32) != gen)
			return false;
		if (next == WRITING) {
			word = atomic_load_explicit(w, memory_order_acquire);
			continue;
		}
		modelc_task_fn fn = (modelc_task_fn)atomic_load_explicit(&p->fn, memory_order_relaxed);
		void *arg = (void *)atomic_load_explicit(&p->arg, memory_order_relaxed);
		int64_t n = atomic_load_explicit(&p->n, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		int64_t lo, len;
		unsigned count = share_of(p, n, s, &lo, &len);
		if (next >= count)
			return true;
		if (!atomic_compare_exchange_weak_explicit(w, &word, word + 1, memory_order_acq_rel,
		                                           memory_order_acquire))
			continue; /* word reloaded */
		fn(arg, lo + len * next / count, lo + len * (next + 1) / count);
		atomic_fetch_add_explicit(&p->finished, 1, memory_order_acq_rel);
		word = atomic_load_explicit(w, memory_order_acquire);
	}
}

/* Thread `self`'s part of generation gen: its share, then the others'. */
static void run_pieces(modelc_pthread_pool *p, unsigned gen, int self)
{
	for (int i = 0; i < p->workers; i++)
		if (!run_share(p, gen, (self + i) % p->workers))
			return;
}

/* Waits for a generation other than seen: spins SPINS times, then sleeps. */
static unsigned next_generation(modelc_pthread_pool *p, unsigned seen)
{
	for (unsigned s = 0; s < SPINS; s++) {
		unsigned now = atomic_load_explicit(&p->generation, memory_order_acquire);
		if (now != seen || atomic_load_explicit(&p->quit, memory_order_relaxed))
			return now;
	}
	/* the caller reads sleepers after its new generation (both
	 * sequentially consistent): it wakes us, or we see the generation */
	atomic_fetch_add(&p->sleepers, 1);
	pthread_mutex_lock(&p->mu);
	unsigned now;
	while ((now = atomic_load(&p->generation)) == seen && !atomic_load(&p->quit))
		pthread_cond_wait(&p->go, &p->mu);
	pthread_mutex_unlock(&p->mu);
	atomic_fetch_sub(&p->sleepers, 1);
	return now;
}

static void *worker(void *arg_)
{
	worker_arg *a = arg_;
	modelc_pthread_pool *p = a->pool;
	int self = a->index;
	free(a);
	unsigned seen = 0;
	for (;;) {
		seen = next_generation(p, seen);
		if (atomic_load(&p->quit))
			return NULL;
		run_pieces(p, seen, self);
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
	p->shares = calloc((size_t)workers, sizeof *p->shares);
	if (!p->threads || !p->shares || pthread_mutex_init(&p->mu, NULL) || pthread_cond_init(&p->go, NULL)) {
		free(p->threads);
		free(p->shares);
		free(p);
		return NULL;
	}
	for (int i = 1; i < workers; i++) {
		worker_arg *a = malloc(sizeof *a);
		if (a)
			*a = (worker_arg){ p, i };
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
	atomic_fetch_add(&p->generation, 1);
	pthread_cond_broadcast(&p->go);
	pthread_mutex_unlock(&p->mu);
	for (int i = 1; i < p->workers; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->go);
	pthread_mutex_destroy(&p->mu);
	free(p->threads);
	free(p->shares);
	free(p);
}

void modelc_pthread_parallel_for(void *ctx, modelc_task_fn fn, void *arg, int64_t n)
{
	modelc_pthread_pool *p = ctx;
	if (p->workers == 1 || n < 2) {
		fn(arg, 0, n);
		return;
	}
	unsigned pieces = 0;
	for (int s = 0; s < p->workers; s++) {
		int64_t lo, len;
		pieces += share_of(p, n, s, &lo, &len);
	}
	/* the last generation is over (each piece finished): the new one's
	 * words say WRITING while its loop is written (run_share) */
	unsigned gen = atomic_load_explicit(&p->generation, memory_order_relaxed) + 1;
	for (int s = 0; s < p->workers; s++)
		atomic_store_explicit(&p->shares[s].word, (unsigned long long)gen << 32 | WRITING,
		                      memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&p->fn, (uintptr_t)fn, memory_order_relaxed);
	atomic_store_explicit(&p->arg, (uintptr_t)arg, memory_order_relaxed);
	atomic_store_explicit(&p->n, n, memory_order_relaxed);
	atomic_store_explicit(&p->finished, 0, memory_order_relaxed);
	for (int s = 0; s < p->workers; s++)
		atomic_store_explicit(&p->shares[s].word, (unsigned long long)gen << 32, memory_order_release);
	atomic_store(&p->generation, gen);
	if (atomic_load(&p->sleepers) > 0) {
		pthread_mutex_lock(&p->mu);
		pthread_cond_broadcast(&p->go);
		pthread_mutex_unlock(&p->mu);
	}
	run_pieces(p, gen, 0);
	/* the pieces others claimed are running: wait for their ends */
	for (unsigned s = 1; atomic_load_explicit(&p->finished, memory_order_acquire) < pieces; s++)
		if (s % 4096 == 0)
			sched_yield();
}
