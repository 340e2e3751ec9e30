/* The clock and the median's sort of bench/'s small timers (bench/blas/
 * time.c, bench/threads/compare.c): included once by each, which defines
 * _POSIX_C_SOURCE first. */
#ifndef BENCH_TIME_H
#define BENCH_TIME_H

#include <time.h>

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* qsort's order of doubles */
static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

#endif
