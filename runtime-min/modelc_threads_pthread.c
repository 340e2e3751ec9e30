/* modelc_threads_pthread.h's pool. Each parallel_for publishes its work
 * under a new generation number; the workers, which spin a while on that
 * number before sleeping on a condition variable (a run hands over one
 * loop after another, microseconds apart: a sleep and wake-up each time
 * would cost more than many loops take), run their ranges, and the last to
 * finish wakes the caller, who ran the first range meanwhile. */
#include "modelc_threads_pthread.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#define SPINS 20000 /* checks of the generation before a worker sleeps */

struct modelc_pthread_pool {
	int workers;
	pthread_t *threads;
	pthread_mutex_t mu;
	pthread_cond_t go, done;
	modelc_task_fn fn; /* the work of the current generation */
	void *arg;
	int64_t n;
	atomic_uint generation;
	atomic_int pending; /* workers still running the current generation */
	atomic_bool quit;
};

typedef struct {
	modelc_pthread_pool *pool;
	int index;
} worker_arg;

static void run_range(modelc_pthread_pool *p, int i)
{
	int64_t begin = p->n * i / p->workers, end = p->n * (i + 1) / p->workers;
	if (begin < end)
		p->fn(p->arg, begin, end);
}

static void *worker(void *arg_)
{
	worker_arg *a = arg_;
	modelc_pthread_pool *p = a->pool;
	int index = a->index;
	free(a);
	unsigned seen = 0;
	for (;;) {
		unsigned now = atomic_load_explicit(&p->generation, memory_order_acquire);
		for (int s = 0; now == seen && s < SPINS; s++)
			now = atomic_load_explicit(&p->generation, memory_order_acquire);
		if (now == seen) {
			pthread_mutex_lock(&p->mu);
			while ((now = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen &&
			       !atomic_load(&p->quit))
				pthread_cond_wait(&p->go, &p->mu);
			pthread_mutex_unlock(&p->mu);
		}
		if (atomic_load(&p->quit))
			return NULL;
		seen = now;
		run_range(p, index);
		if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
			pthread_mutex_lock(&p->mu);
			pthread_cond_signal(&p->done);
			pthread_mutex_unlock(&p->mu);
		}
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
	if (!p->threads || pthread_mutex_init(&p->mu, NULL) || pthread_cond_init(&p->go, NULL) ||
	    pthread_cond_init(&p->done, NULL)) {
		free(p->threads);
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
	pthread_cond_destroy(&p->done);
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
	p->fn = fn;
	p->arg = arg;
	p->n = n;
	atomic_store_explicit(&p->pending, p->workers - 1, memory_order_relaxed);
	pthread_mutex_lock(&p->mu); /* a sleeping worker sees the new generation on waking */
	atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
	pthread_cond_broadcast(&p->go);
	pthread_mutex_unlock(&p->mu);
	run_range(p, 0);
	for (int s = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0 && s < SPINS; s++)
		;
	if (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) {
		pthread_mutex_lock(&p->mu);
		while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0)
			pthread_cond_wait(&p->done, &p->mu);
		pthread_mutex_unlock(&p->mu);
	}
}
