/* The memory plan's invariants, checked independently of how plan.c
 * searched for it: a plan that breaks one would have two tensors scribble
 * over each other at run time, which no test of outputs is sure to catch. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "program.h"

typedef struct {
	int first;
	int index;
} by_first;

static int cmp_first(const void *pa, const void *pb)
{
	const by_first *a = pa, *b = pb;
	if (a->first != b->first)
		return a->first < b->first ? -1 : 1;
	return (a->index > b->index) - (a->index < b->index);
}

static int bad(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int bad(char *why, size_t n, const char *fmt, ...)
{
	if (why && n) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, n, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* i takes over its in-place source's storage, as plan.c's legal_link
 * allows it: the source dies where i is born, i is no larger (or may
 * grow), one offset. */
static bool shares_with_source(const mc_mem_req *r, const mc_mem_plan *p, int i)
{
	int j = r[i].inplace_of;
	return j >= 0 && r[i].bytes && r[j].bytes && r[j].last == r[i].first &&
	       (r[i].bytes <= r[j].bytes || r[i].grows) && p->offsets[i] == p->offsets[j];
}

/* a reaches b through links that each share storage (a chain A -> B -> C
 * whose middle lives one step has A and C live together at one offset). */
static bool shares_through_links(const mc_mem_req *r, int n, const mc_mem_plan *p, int a, int b)
{
	for (int m = a, hops = 0; hops < n && shares_with_source(r, p, m); hops++) {
		m = r[m].inplace_of;
		if (m == b)
			return true;
	}
	return false;
}

static int check_places(const mc_mem_req *r, int n, size_t align, const mc_mem_plan *p,
                        char *why, size_t why_len)
{
	if (p->lower_bound > p->arena_bytes)
		return bad(why, why_len, "memory plan: lower bound %zu above the arena's %zu bytes",
		           p->lower_bound, p->arena_bytes);
	for (int i = 0; i < n; i++) {
		size_t end;
		if (!r[i].bytes)
			continue;
		if (p->offsets[i] % align)
			return bad(why, why_len, "memory plan: buffer %d at offset %zu is not aligned to %zu",
			           i, p->offsets[i], align);
		if (!mc_add_size(p->offsets[i], r[i].bytes, &end) || end > p->arena_bytes)
			return bad(why, why_len, "memory plan: buffer %d at [%zu, +%zu) ends past the arena's "
			           "%zu bytes", i, p->offsets[i], r[i].bytes, p->arena_bytes);
		if (r[i].inplace_of < -1 || r[i].inplace_of >= n)
			return bad(why, why_len, "memory plan: buffer %d names buffer %d as its in-place source",
			           i, r[i].inplace_of);
	}
	return 0;
}

/* Pairs live at one step, found by a sweep in order of first step; each is
 * checked for overlap in the arena. */
static int check_overlaps(const mc_mem_req *r, int n, const mc_mem_plan *p, char *why,
                          size_t why_len)
{
	by_first *order = mc_xmalloc((n > 0 ? (size_t)n : 1) * sizeof *order);
	int m = 0, rc = 0;
	for (int i = 0; i < n; i++)
		if (r[i].bytes)
			order[m++] = (by_first){ r[i].first, i };
	qsort(order, (size_t)m, sizeof *order, cmp_first);
	for (int x = 0; x < m && !rc; x++) {
		int a = order[x].index;
		for (int y = x + 1; y < m && r[order[y].index].first <= r[a].last && !rc; y++) {
			int b = order[y].index;
			size_t ea = p->offsets[a] + r[a].bytes, eb = p->offsets[b] + r[b].bytes;
			if (ea <= p->offsets[b] || eb <= p->offsets[a])
				continue;
			if (shares_through_links(r, n, p, a, b) || shares_through_links(r, n, p, b, a))
				continue;
			rc = bad(why, why_len, "memory plan: buffers %d [%zu, %zu) and %d [%zu, %zu), both "
			         "live at step %d, overlap", a, p->offsets[a], ea, b, p->offsets[b], eb,
			         r[b].first);
		}
	}
	free(order);
	return rc;
}

int mc_plan_check(const mc_mem_req *reqs, int n, size_t align, const mc_mem_plan *plan,
                  char *why, size_t why_len)
{
	if (why && why_len)
		why[0] = 0;
	if (n < 0 || (n > 0 && (!reqs || !plan->offsets)) || !align)
		return bad(why, why_len, "memory plan: %d requests without offsets", n);
	if (check_places(reqs, n, align, plan, why, why_len))
		return -1;
	return check_overlaps(reqs, n, plan, why, why_len);
}
