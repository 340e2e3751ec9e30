/* modelc runtime-min: a parallel_for for NAME_run_threads (modelc
 * --threads N) on POSIX threads, for hosts and Linux boards (a Jetson's
 * Arm cores). Optional: firmware passes its own hook (modelc_rt.h's
 * modelc_threads). Unlike the generated code, this file makes threads and
 * allocates, once, in modelc_pthread_pool_new.
 *
 *     modelc_pthread_pool *pool = modelc_pthread_pool_new(4);
 *     modelc_threads threads = { modelc_pthread_parallel_for, pool };
 *     NAME_run_threads(arena, inputs, outputs, &threads);
 *     modelc_pthread_pool_free(pool);
 *
 * A pool serves one run at a time. */
#ifndef MODELC_THREADS_PTHREAD_H
#define MODELC_THREADS_PTHREAD_H

#include "modelc_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct modelc_pthread_pool modelc_pthread_pool;

/* workers in all, the calling thread one of them (1: no thread made);
 * NULL where a thread or memory cannot be had. */
modelc_pthread_pool *modelc_pthread_pool_new(int workers);
void modelc_pthread_pool_free(modelc_pthread_pool *pool);
/* modelc_threads.parallel_for, ctx the pool: [0, n) in pieces (4 a
 * worker) that the caller and the workers claim one at a time; returns
 * when every piece has run. */
void modelc_pthread_parallel_for(void *ctx, modelc_task_fn fn, void *arg, int64_t n);

#ifdef __cplusplus
}
#endif

#endif
