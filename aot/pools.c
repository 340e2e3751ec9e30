/* The arena split into pools (mc_plan_pools): each buffer goes to one pool,
 * the pools first in the order given (the fast memories) taking the
 * buffers of highest priority (the caller's: the number of kernels that
 * touch each), as many as fit their capacity; each pool is then planned on
 * its own (aot/plan.c). A buffer and its in-place source stay together:
 * they share bytes. */
#include <stdlib.h>
#include <string.h>

#include "program.h"

typedef struct {
	int head;         /* the unit's first request: in-place links join requests */
	double priority;
	int index;
} unit_key;

static int by_priority(const void *pa, const void *pb)
{
	const unit_key *a = pa, *b = pb;
	if (a->priority != b->priority)
		return a->priority > b->priority ? -1 : 1;
	return (a->index > b->index) - (a->index < b->index);
}

static int find(int *up, int i)
{
	while (up[i] != i)
		i = up[i] = up[up[i]];
	return i;
}

/* The pool's requests planned alone: offsets into offsets[], its arena. */
static int plan_pool(const mc_mem_req *reqs, int n, size_t align, const int *pool_of, int k,
                     size_t *offsets, size_t *arena)
{
	int *idx = mc_xcalloc((size_t)n + 1, sizeof(int)), *sub_of = mc_xcalloc((size_t)n + 1, sizeof(int));
	mc_mem_req *sub = mc_xcalloc((size_t)n + 1, sizeof *sub);
	int m = 0;
	for (int i = 0; i < n; i++) {
		sub_of[i] = -1;
		if (pool_of[i] == k) {
			sub_of[i] = m;
			idx[m++] = i;
		}
	}
	for (int j = 0; j < m; j++) {
		sub[j] = reqs[idx[j]];
		int src = sub[j].inplace_of;
		sub[j].inplace_of = src >= 0 ? sub_of[src] : -1;
	}
	mc_mem_plan plan;
	int rc = mc_plan_memory(sub, m, align, &plan);
	if (!rc) {
		for (int j = 0; j < m; j++)
			offsets[idx[j]] = plan.offsets[j];
		*arena = plan.arena_bytes;
		mc_mem_plan_free(&plan);
	}
	free(idx);
	free(sub_of);
	free(sub);
	return rc;
}

/* Adds (sign 1) or removes (-1) unit u's bytes over its steps. */
static void account(const mc_mem_req *reqs, int n, int *up, int u, int64_t *live, int sign)
{
	for (int i = 0; i < n; i++)
		if (reqs[i].bytes && find(up, i) == u)
			for (int s = reqs[i].first; s <= reqs[i].last; s++)
				live[s] += sign * (int64_t)reqs[i].bytes;
}

int mc_plan_pools(const mc_mem_req *reqs, int n, const double *priority, size_t align,
                  const size_t *capacity, int n_pools, int *pool_of, size_t *offsets,
                  size_t *pool_bytes)
{
	int steps = 0;
	for (int i = 0; i < n; i++)
		if (reqs[i].bytes && reqs[i].last + 1 > steps)
			steps = reqs[i].last + 1;
	int *up = mc_xcalloc((size_t)n + 1, sizeof(int));
	for (int i = 0; i < n; i++)
		up[i] = i;
	for (int i = 0; i < n; i++)
		if (reqs[i].inplace_of >= 0)
			up[find(up, i)] = find(up, reqs[i].inplace_of);
	unit_key *units = mc_xcalloc((size_t)n + 1, sizeof *units);
	int n_units = 0;
	for (int i = 0; i < n; i++) {
		if (find(up, i) != i)
			continue;
		double best = 0;
		for (int j = 0; j < n; j++)
			if (find(up, j) == i && priority[j] > best)
				best = priority[j];
		units[n_units++] = (unit_key){ i, best, i };
	}
	qsort(units, (size_t)n_units, sizeof *units, by_priority);
	int last = n_pools - 1;
	for (int i = 0; i < n; i++)
		pool_of[i] = last;
	int64_t *live = mc_xcalloc((size_t)steps + 1, sizeof(int64_t));
	int *taken = mc_xcalloc((size_t)n_units + 1, sizeof(int));
	bool *placed = mc_xcalloc((size_t)n_units + 1, sizeof(bool));
	int rc = 0;
	for (int k = 0; k < last && !rc; k++) {
		memset(live, 0, ((size_t)steps + 1) * sizeof *live);
		int n_taken = 0;
		for (int u = 0; u < n_units; u++) {
			if (placed[u])
				continue;
			account(reqs, n, up, units[u].head, live, 1);
			bool fits = true;
			for (int s = 0; s < steps && fits; s++)
				fits = (size_t)live[s] <= capacity[k];
			if (!fits) {
				account(reqs, n, up, units[u].head, live, -1);
				continue;
			}
			taken[n_taken++] = u;
			placed[u] = true;
		}
		/* the live bytes fit; the plan may need more (alignment, holes):
		 * the least touched leave until it fits */
		for (;;) {
			for (int x = 0; x < n_taken; x++)
				for (int i = 0; i < n; i++)
					if (find(up, i) == units[taken[x]].head)
						pool_of[i] = k;
			size_t arena = 0;
			if ((rc = plan_pool(reqs, n, align, pool_of, k, offsets, &arena)))
				break;
			if (arena <= capacity[k] || n_taken == 0) {
				pool_bytes[k] = arena;
				break;
			}
			int u = taken[--n_taken];
			placed[u] = false;
			for (int i = 0; i < n; i++)
				if (find(up, i) == units[u].head)
					pool_of[i] = last;
		}
	}
	if (!rc) {
		size_t arena = 0;
		rc = plan_pool(reqs, n, align, pool_of, last, offsets, &arena);
		pool_bytes[last] = arena;
		if (!rc && capacity[last] && arena > capacity[last]) {
			mc_error("--pool: the last pool needs %zu bytes, more than its %zu", arena, capacity[last]);
			rc = -1;
		}
	}
	free(live);
	free(taken);
	free(placed);
	free(units);
	free(up);
	return rc;
}
