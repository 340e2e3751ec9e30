/* The static memory plan: one offset in the arena for every buffer, such
 * that two buffers live at the same step never overlap in memory.
 *
 * Requests are placed as "items": a lone buffer, or an in-place chain
 * A -> B -> C (each member takes over the storage of the one before it at
 * the step where that one dies) placed at one offset. A chain keeps the
 * exact profile of its members: each occupies [off, off + its size) during
 * its own live interval only, so a small tail behind a big head blocks
 * nothing beyond its own bytes.
 *
 * Placement is greedy, TensorFlow Lite Micro's planner generalised to
 * chains: items in some order, each at an offset where it overlaps no
 * placed buffer live at the same time as one of its members. Several runs
 * are tried and the smallest arena kept:
 *   - orderings (size, breadth, size x length, length, first use) x {first
 *     fit, best fit} x {chains merged, not merged}; the first run tried
 *     (size descending, first fit, merged: TFLM's) wins ties;
 *   - then a local search on the best order: move an item, rerun, keep the
 *     order if the arena is no larger.
 * The search stops as soon as an arena meets the lower bound (most CNNs
 * get there with the first orderings), and a work budget bounds it on
 * graphs where buffers overlap thousands of others. Everything is
 * deterministic (fixed seed, work counted in operations, not time). The
 * result is never worse than the first run (TFLM's greedy, in-place
 * chains merged), nor, unless the work budget runs out first, than TFLM's
 * greedy without in-place sharing.
 *
 * Sizes and offsets are computed in units of `align` ("blocks"), which
 * makes every offset aligned by construction. Finding the buffers that
 * overlap an item in time uses a segment tree over the steps, so a run
 * costs about O(n log n + conflicts) on chain-like graphs and O(n^2 log n)
 * at worst. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "program.h"

/* Requests at most: keeps step and tree index arithmetic inside int. */
#define MAX_REQUESTS (INT_MAX / 8)

/* ---- small growable int list ---- */
typedef struct {
	int *v;
	int n, cap;
} int_list;

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q) {
		mc_error("out of memory");
		exit(3); /* like mc_xmalloc */
	}
	return q;
}

static void il_push(int_list *l, int x)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 4;
		l->v = xrealloc(l->v, (size_t)l->cap * sizeof *l->v);
	}
	l->v[l->n++] = x;
}

/* ---- the problem, in blocks and compressed steps ---- */
typedef struct {
	int n;
	const mc_mem_req *reqs;
	size_t *blocks;  /* per request: aligned size in blocks; 0: not in the arena */
	int *cfirst;     /* per arena request: its interval in compressed steps */
	int *clast;
	int n_steps;     /* distinct steps among the arena requests' bounds */
	/* In-place links kept for chains: at most one child per parent, no
	 * cycles; -1 where none. */
	int *parent;
	int *child;
	bool any_link;
} problem;

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

static int step_index(const int *steps, int n_steps, int s)
{
	const int *p = bsearch(&s, steps, (size_t)n_steps, sizeof *steps, cmp_int);
	return (int)(p - steps);
}

static int check_requests(const mc_mem_req *reqs, int n, size_t align)
{
	if (n < 0 || n > MAX_REQUESTS || (n > 0 && !reqs)) {
		mc_error("memory plan: bad request count %d", n);
		return -1;
	}
	if (align == 0 || (align & (align - 1)) != 0) {
		mc_error("memory plan: alignment %zu is not a power of two", align);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		const mc_mem_req *r = &reqs[i];
		if (r->bytes && r->first > r->last) {
			mc_error("memory plan: buffer %d has an empty live interval [%d, %d]", i,
			         r->first, r->last);
			return -1;
		}
		if (r->inplace_of < -1 || r->inplace_of >= n || r->inplace_of == i) {
			mc_error("memory plan: buffer %d names buffer %d as its in-place source", i,
			         r->inplace_of);
			return -1;
		}
	}
	return 0;
}

/* Sizes in blocks; false on overflow of the rounding. */
static bool compute_blocks(problem *pb, size_t align)
{
	for (int i = 0; i < pb->n; i++) {
		size_t bytes = pb->reqs[i].bytes, rounded;
		if (!mc_add_size(bytes, align - 1, &rounded)) {
			mc_error("memory plan: buffer %d (%zu bytes) overflows when aligned to %zu",
			         i, bytes, align);
			return false;
		}
		pb->blocks[i] = rounded / align;
	}
	return true;
}

static void compress_steps(problem *pb)
{
	int *steps = mc_xmalloc(2 * (size_t)pb->n * sizeof *steps);
	int n = 0;
	for (int i = 0; i < pb->n; i++) {
		if (!pb->blocks[i])
			continue;
		steps[n++] = pb->reqs[i].first;
		steps[n++] = pb->reqs[i].last;
	}
	qsort(steps, (size_t)n, sizeof *steps, cmp_int);
	int u = 0;
	for (int k = 0; k < n; k++)
		if (u == 0 || steps[u - 1] != steps[k])
			steps[u++] = steps[k];
	pb->n_steps = u;
	for (int i = 0; i < pb->n; i++) {
		pb->cfirst[i] = pb->clast[i] = 0;
		if (!pb->blocks[i])
			continue;
		pb->cfirst[i] = step_index(steps, u, pb->reqs[i].first);
		pb->clast[i] = step_index(steps, u, pb->reqs[i].last);
	}
	free(steps);
}

/* i may take over j's storage: both in the arena, j dies where i is
 * born, and i is no larger (raw bytes: an in-place kernel writes element k
 * over element k, so the output's elements must not be wider), unless its
 * kernel says it may grow past j's end. */
static bool legal_link(const problem *pb, int i, int j)
{
	const mc_mem_req *ri = &pb->reqs[i], *rj = &pb->reqs[j];
	return pb->blocks[i] && pb->blocks[j] && rj->last == ri->first &&
	       (ri->bytes <= rj->bytes || ri->grows);
}

/* Keeps one child per parent (the largest: it saves the most; ties to the
 * lowest index) and drops links on cycles (only possible when every member
 * lives at one step). */
static void choose_links(problem *pb)
{
	int n = pb->n;
	for (int i = 0; i < n; i++)
		pb->parent[i] = pb->child[i] = -1;
	for (int i = 0; i < n; i++) {
		int j = pb->reqs[i].inplace_of;
		if (j < 0 || !legal_link(pb, i, j))
			continue;
		int c = pb->child[j];
		if (c < 0 || pb->reqs[i].bytes > pb->reqs[c].bytes)
			pb->child[j] = i;
	}
	for (int j = 0; j < n; j++)
		if (pb->child[j] >= 0)
			pb->parent[pb->child[j]] = j;
	/* Every request has at most one parent and one child, so the links
	 * form paths and cycles; walking down from the heads reaches all but
	 * the cycles. */
	bool *seen = mc_xcalloc((size_t)n ? (size_t)n : 1, sizeof *seen);
	for (int h = 0; h < n; h++)
		if (pb->parent[h] < 0)
			for (int m = h; m >= 0 && !seen[m]; m = pb->child[m])
				seen[m] = true;
	pb->any_link = false;
	for (int i = 0; i < n; i++) {
		if (!seen[i])
			pb->parent[i] = pb->child[i] = -1;
		if (pb->parent[i] >= 0)
			pb->any_link = true;
	}
	free(seen);
}

static void problem_free(problem *pb)
{
	free(pb->blocks);
	free(pb->cfirst);
	free(pb->clast);
	free(pb->parent);
	free(pb->child);
}

static int problem_init(problem *pb, const mc_mem_req *reqs, int n, size_t align)
{
	size_t nn = n ? (size_t)n : 1;
	*pb = (problem){.n = n, .reqs = reqs};
	pb->blocks = mc_xcalloc(nn, sizeof *pb->blocks);
	pb->cfirst = mc_xcalloc(nn, sizeof *pb->cfirst);
	pb->clast = mc_xcalloc(nn, sizeof *pb->clast);
	pb->parent = mc_xcalloc(nn, sizeof *pb->parent);
	pb->child = mc_xcalloc(nn, sizeof *pb->child);
	if (!compute_blocks(pb, align)) {
		problem_free(pb);
		return -1;
	}
	compress_steps(pb);
	choose_links(pb);
	return 0;
}

/* ---- items: what the greedy places as one unit ---- */
typedef struct {
	int n_items;
	int *start;     /* n_items + 1: members of item k are member[start[k] .. start[k+1]) */
	int *member;    /* request indices, chain order */
	size_t *size;   /* per item: blocks of its largest member */
	int *first;     /* per item: union of its members' intervals (compressed) */
	int *last;
	int64_t *length;/* per item: steps that union spans (uncompressed) */
} items;

static void items_free(items *it)
{
	free(it->start);
	free(it->member);
	free(it->size);
	free(it->first);
	free(it->last);
	free(it->length);
}

/* Items of the arena requests: chains when merge, else one per request. */
static void items_build(items *it, const problem *pb, bool merge)
{
	size_t nn = pb->n ? (size_t)pb->n : 1;
	it->n_items = 0;
	it->start = mc_xmalloc((nn + 1) * sizeof *it->start);
	it->member = mc_xmalloc(nn * sizeof *it->member);
	it->size = mc_xmalloc(nn * sizeof *it->size);
	it->first = mc_xmalloc(nn * sizeof *it->first);
	it->last = mc_xmalloc(nn * sizeof *it->last);
	it->length = mc_xmalloc(nn * sizeof *it->length);
	int n_members = 0;
	for (int h = 0; h < pb->n; h++) {
		if (!pb->blocks[h] || (merge && pb->parent[h] >= 0))
			continue; /* not in the arena, or not a chain's head */
		int k = it->n_items++;
		it->start[k] = n_members;
		it->size[k] = 0;
		it->first[k] = pb->cfirst[h];
		it->last[k] = pb->clast[h];
		int first = pb->reqs[h].first, last = pb->reqs[h].last;
		for (int m = h; m >= 0; m = merge ? pb->child[m] : -1) {
			it->member[n_members++] = m;
			if (pb->blocks[m] > it->size[k])
				it->size[k] = pb->blocks[m];
			if (pb->cfirst[m] < it->first[k])
				it->first[k] = pb->cfirst[m];
			if (pb->clast[m] > it->last[k])
				it->last[k] = pb->clast[m];
			if (pb->reqs[m].first < first)
				first = pb->reqs[m].first;
			if (pb->reqs[m].last > last)
				last = pb->reqs[m].last;
		}
		it->length[k] = (int64_t)last - first + 1;
	}
	it->start[it->n_items] = n_members;
}

/* ---- orderings ---- */
typedef struct {
	size_t size;
	int64_t length; /* steps spanned */
	int first;
	int index;      /* item index: the final tie-break */
	double area;    /* size x length */
	size_t breadth; /* blocks live at the most crowded step it spans */
} item_key;

static int cmp_size(size_t a, size_t b) { return (a < b) - (a > b); } /* descending */
static int cmp_asc(int64_t a, int64_t b) { return (a > b) - (a < b); }

static int by_size(const void *pa, const void *pb)
{
	const item_key *a = pa, *b = pb;
	int c = cmp_size(a->size, b->size);
	if (!c)
		c = cmp_asc(b->length, a->length);
	return c ? c : cmp_asc(a->index, b->index);
}

static int by_length(const void *pa, const void *pb)
{
	const item_key *a = pa, *b = pb;
	int c = cmp_asc(b->length, a->length);
	if (!c)
		c = cmp_size(a->size, b->size);
	return c ? c : cmp_asc(a->index, b->index);
}

static int by_area(const void *pa, const void *pb)
{
	const item_key *a = pa, *b = pb;
	int c = (a->area < b->area) - (a->area > b->area);
	if (!c)
		c = cmp_size(a->size, b->size);
	return c ? c : cmp_asc(a->index, b->index);
}

static int by_first(const void *pa, const void *pb)
{
	const item_key *a = pa, *b = pb;
	int c = cmp_asc(a->first, b->first);
	if (!c)
		c = cmp_size(a->size, b->size);
	return c ? c : cmp_asc(a->index, b->index);
}

/* Items at the most crowded steps first ("greedy by breadth", Pisarchyk &
 * Lee 2020): the peak is packed before anything can fragment it. */
static int by_breadth(const void *pa, const void *pb)
{
	const item_key *a = pa, *b = pb;
	int c = cmp_size(a->breadth, b->breadth);
	if (!c)
		c = cmp_size(a->size, b->size);
	if (!c)
		c = cmp_asc(b->length, a->length);
	return c ? c : cmp_asc(a->index, b->index);
}

/* by_size first: it is TFLM's order, and the first run wins ties. */
static int (*const orderings[])(const void *, const void *) = {
	by_size, by_breadth, by_area, by_length, by_first,
};
#define N_ORDERINGS ((int)(sizeof orderings / sizeof *orderings))

static size_t add_sat(size_t a, size_t b)
{
	return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

/* Per item, the most blocks live at one step of its interval (no in-place
 * sharing counted: a heuristic only): live blocks per compressed step from
 * a difference array, then range maxima from a bottom-up segment tree. */
static void compute_breadth(const problem *pb, const items *it, size_t *breadth)
{
	int leaves = 1;
	while (leaves < pb->n_steps + 1)
		leaves *= 2;
	size_t *tree = mc_xcalloc(2 * (size_t)leaves, sizeof *tree);
	size_t *add = mc_xcalloc((size_t)leaves, sizeof *add), *sub = mc_xcalloc((size_t)leaves, sizeof *sub);
	for (int i = 0; i < pb->n; i++)
		if (pb->blocks[i]) {
			add[pb->cfirst[i]] = add_sat(add[pb->cfirst[i]], pb->blocks[i]);
			sub[pb->clast[i] + 1] = add_sat(sub[pb->clast[i] + 1], pb->blocks[i]);
		}
	/* live(s) = sum of add[0..s] - sum of sub[0..s]; saturated sums can
	 * only make the heuristic coarser */
	size_t born = 0, dead = 0;
	for (int s = 0; s < pb->n_steps; s++) {
		born = add_sat(born, add[s]);
		dead = add_sat(dead, sub[s]);
		tree[leaves + s] = born > dead ? born - dead : 0;
	}
	for (int k = leaves - 1; k >= 1; k--)
		tree[k] = tree[2 * k] > tree[2 * k + 1] ? tree[2 * k] : tree[2 * k + 1];
	for (int k = 0; k < it->n_items; k++) {
		size_t best = 0;
		for (int lo = it->first[k] + leaves, hi = it->last[k] + leaves + 1; lo < hi;
		     lo >>= 1, hi >>= 1) {
			if ((lo & 1) && tree[lo] > best)
				best = tree[lo];
			if ((lo & 1))
				lo++;
			if ((hi & 1) && tree[hi - 1] > best)
				best = tree[hi - 1];
			if ((hi & 1))
				hi--;
		}
		breadth[k] = best;
	}
	free(tree);
	free(add);
	free(sub);
}

static void make_order(const items *it, const size_t *breadth, int which, item_key *keys,
                       int *order)
{
	for (int k = 0; k < it->n_items; k++) {
		int64_t len = it->length[k];
		keys[k] = (item_key){.size = it->size[k], .length = len, .first = it->first[k],
		                     .index = k, .area = (double)it->size[k] * (double)len,
		                     .breadth = breadth[k]};
	}
	qsort(keys, (size_t)it->n_items, sizeof *keys, orderings[which]);
	for (int k = 0; k < it->n_items; k++)
		order[k] = keys[k].index;
}

/* ---- the greedy placer ---- */
/* Offsets o forbidden by one placed buffer: [lo, hi). */
typedef struct {
	size_t lo, hi;
} span;

typedef struct {
	int leaves;        /* segment tree leaves: a power of two >= n_steps */
	/* 2 * leaves nodes: node k holds the placed requests whose interval
	 * covers node k's steps (each request sits in O(log) nodes, and at most
	 * once on any leaf-to-root path). */
	int_list *node;
	int_list *starts;  /* per step: placed requests whose interval starts there */
	size_t *off;       /* per request: offset in blocks once placed */
	span *forbid;
	size_t n_forbid, cap_forbid;
	uint64_t work;     /* a measure of the time spent, see place_item */
} placer;

static void placer_init(placer *pl, const problem *pb)
{
	pl->leaves = 1;
	while (pl->leaves < pb->n_steps)
		pl->leaves *= 2;
	pl->node = mc_xcalloc(2 * (size_t)pl->leaves, sizeof *pl->node);
	pl->starts = mc_xcalloc((size_t)pl->leaves, sizeof *pl->starts);
	pl->off = mc_xcalloc(pb->n ? (size_t)pb->n : 1, sizeof *pl->off);
	pl->forbid = NULL;
	pl->n_forbid = pl->cap_forbid = 0;
	pl->work = 0;
}

static void placer_reset(placer *pl)
{
	for (int k = 0; k < 2 * pl->leaves; k++)
		pl->node[k].n = 0;
	for (int s = 0; s < pl->leaves; s++)
		pl->starts[s].n = 0;
}

static void placer_free(placer *pl)
{
	for (int k = 0; k < 2 * pl->leaves; k++)
		free(pl->node[k].v);
	for (int s = 0; s < pl->leaves; s++)
		free(pl->starts[s].v);
	free(pl->node);
	free(pl->starts);
	free(pl->off);
	free(pl->forbid);
}

/* A buffer of `size` blocks at o overlaps placed buffer p unless
 * o + size <= off[p] or o >= off[p] + blocks[p]. */
static void forbid_by(placer *pl, const problem *pb, int p, size_t size)
{
	if (pl->n_forbid == pl->cap_forbid) {
		pl->cap_forbid = pl->cap_forbid ? 2 * pl->cap_forbid : 64;
		pl->forbid = xrealloc(pl->forbid, pl->cap_forbid * sizeof *pl->forbid);
	}
	size_t off = pl->off[p];
	/* off + blocks[p] was checked when p was placed, so off + 1 fits. */
	pl->forbid[pl->n_forbid++] = (span){
		.lo = off + 1 > size ? off + 1 - size : 0,
		.hi = off + pb->blocks[p],
	};
}

/* Forbidden offsets of member m: placed buffers live at one of its steps,
 * i.e. those covering its first step plus those starting inside it. */
static void collect_conflicts(placer *pl, const problem *pb, int m)
{
	int first = pb->cfirst[m], last = pb->clast[m];
	size_t size = pb->blocks[m];
	for (int k = first + pl->leaves; k >= 1; k >>= 1)
		for (int x = 0; x < pl->node[k].n; x++)
			forbid_by(pl, pb, pl->node[k].v[x], size);
	for (int s = first + 1; s <= last; s++)
		for (int x = 0; x < pl->starts[s].n; x++)
			forbid_by(pl, pb, pl->starts[s].v[x], size);
}

static int cmp_span(const void *pa, const void *pb)
{
	const span *a = pa, *b = pb;
	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	return (a->hi > b->hi) - (a->hi < b->hi);
}

/* The lowest allowed offset (first fit), or the start of the allowed range
 * with the least room to spare (best fit; the open top only when no
 * bounded range exists). */
static size_t pick_offset(placer *pl, bool best_fit)
{
	if (!pl->n_forbid)
		return 0;
	qsort(pl->forbid, pl->n_forbid, sizeof *pl->forbid, cmp_span);
	size_t cur = 0, best = 0, best_slack = SIZE_MAX;
	bool found = false;
	for (size_t k = 0; k < pl->n_forbid; k++) {
		const span *f = &pl->forbid[k];
		if (f->lo > cur) { /* offsets cur .. f->lo - 1 are allowed */
			if (!best_fit)
				return cur;
			size_t slack = f->lo - 1 - cur;
			if (!found || slack < best_slack) {
				best = cur;
				best_slack = slack;
				found = true;
			}
		}
		if (f->hi > cur)
			cur = f->hi;
	}
	return found ? best : cur;
}

static void tree_insert(placer *pl, int first, int last, int m)
{
	for (int lo = first + pl->leaves, hi = last + pl->leaves + 1; lo < hi; lo >>= 1, hi >>= 1) {
		if (lo & 1)
			il_push(&pl->node[lo++], m);
		if (hi & 1)
			il_push(&pl->node[--hi], m);
	}
}

/* Places item k; *top grows to the end of its highest member. False when
 * the end overflows. */
static bool place_item(placer *pl, const problem *pb, const items *it, int k, bool best_fit,
                       size_t *top)
{
	pl->n_forbid = 0;
	for (int x = it->start[k]; x < it->start[k + 1]; x++) {
		int m = it->member[x];
		collect_conflicts(pl, pb, m);
		pl->work += 16 + (uint64_t)(pb->clast[m] - pb->cfirst[m]); /* tree walks, step scan */
	}
	pl->work += pl->n_forbid;
	size_t o = pick_offset(pl, best_fit);
	for (int x = it->start[k]; x < it->start[k + 1]; x++) {
		int m = it->member[x];
		size_t end;
		if (!mc_add_size(o, pb->blocks[m], &end))
			return false;
		if (end > *top)
			*top = end;
		pl->off[m] = o;
		tree_insert(pl, pb->cfirst[m], pb->clast[m], m);
		il_push(&pl->starts[pb->cfirst[m]], m);
	}
	return true;
}

/* One greedy run; false when the arena would not fit in size_t bytes. */
static bool run_greedy(placer *pl, const problem *pb, const items *it, const int *order,
                       bool best_fit, size_t align, size_t *arena_blocks)
{
	placer_reset(pl);
	size_t top = 0, bytes;
	for (int x = 0; x < it->n_items; x++)
		if (!place_item(pl, pb, it, order[x], best_fit, &top))
			return false;
	*arena_blocks = top;
	return mc_mul_size(top, align, &bytes);
}

/* ---- the lower bound ----
 * max over steps s of the aligned bytes live at s. A member of a chain the
 * plan merged counts from the step after its birth: at its first step its
 * parent occupies the same bytes, is still live and already counted (so an
 * in-place pair counts once, as the larger of the two, exactly where it
 * shares storage: a member that grows past its parent adds its excess). Buffers the plan did not merge
 * count separately, even if they could have shared: the bound is the one
 * of the plan's own sharing decisions, the one its arena can be compared
 * with. */
typedef struct {
	int64_t step;
	size_t blocks;
} event;

static int cmp_event(const void *pa, const void *pb)
{
	const event *a = pa, *b = pb;
	return (a->step > b->step) - (a->step < b->step);
}

static bool lower_bound_blocks(const problem *pb, bool merged, size_t *out)
{
	size_t nn = pb->n ? (size_t)pb->n : 1;
	event *births = mc_xmalloc(2 * nn * sizeof *births), *deaths = mc_xmalloc(2 * nn * sizeof *deaths);
	size_t nb = 0;
	size_t nev = 0;
	for (int i = 0; i < pb->n; i++) {
		if (!pb->blocks[i])
			continue;
		int64_t first = pb->reqs[i].first, last = pb->reqs[i].last;
		if (merged && pb->parent[i] >= 0) {
			/* a member that grows past the chain's members live at its
			 * birth (its parent, and theirs through one-step members)
			 * adds its excess at that step */
			size_t shared = 0;
			for (int a = pb->parent[i]; a >= 0 && pb->reqs[a].last >= first; a = pb->parent[a])
				shared = pb->blocks[a] > shared ? pb->blocks[a] : shared;
			if (pb->blocks[i] > shared) {
				births[nev] = (event){first, pb->blocks[i] - shared};
				deaths[nev++] = (event){first + 1, pb->blocks[i] - shared};
			}
			first++;
		}
		if (first > last)
			continue;
		births[nev] = (event){first, pb->blocks[i]};
		deaths[nev++] = (event){last + 1, pb->blocks[i]};
	}
	nb = nev;
	qsort(births, nb, sizeof *births, cmp_event);
	qsort(deaths, nb, sizeof *deaths, cmp_event);
	size_t live = 0, peak = 0, b = 0, d = 0;
	bool ok = true;
	while (ok && b < nb) {
		int64_t t = births[b].step;
		while (d < nb && deaths[d].step <= t)
			live -= deaths[d++].blocks;
		while (ok && b < nb && births[b].step == t)
			ok = mc_add_size(live, births[b++].blocks, &live);
		if (live > peak)
			peak = live;
	}
	free(births);
	free(deaths);
	*out = peak;
	return ok;
}

/* ---- the search ---- */
typedef struct {
	const problem *pb;
	size_t align;
	size_t floor;      /* no plan can beat it: the bound with every link merged */
	bool found;
	bool merged;       /* the best plan's policy, fit and item order */
	bool best_fit;
	int *order;
	size_t arena_blocks;
	size_t *off;       /* per request, blocks */
	uint64_t work;     /* spent by all runs so far */
	uint64_t last_work;/* of the latest run: the estimate of the next one */
} search;

/* Work (conflicts examined, see place_item) all runs together may spend
 * beyond the first: about a second. Graphs where every buffer
 * overlaps thousands of others in time get fewer runs, not slower ones. */
#define WORK_BUDGET 30000000u

static bool can_afford_run(const search *se)
{
	return !se->found || se->work + se->last_work <= WORK_BUDGET;
}

static bool timed_run(search *se, placer *pl, const items *it, const int *order, bool best_fit,
                      size_t *arena)
{
	pl->work = 0;
	bool ok = run_greedy(pl, se->pb, it, order, best_fit, se->align, arena);
	se->work += pl->work;
	se->last_work = pl->work;
	return ok;
}

static void keep_if_better(search *se, const placer *pl, const items *it, const int *order,
                           bool merged, bool best_fit, size_t arena, bool keep_ties)
{
	if (se->found && (arena > se->arena_blocks || (arena == se->arena_blocks && !keep_ties)))
		return;
	se->found = true;
	se->merged = merged;
	se->best_fit = best_fit;
	se->arena_blocks = arena;
	memcpy(se->order, order, (size_t)it->n_items * sizeof *order);
	memcpy(se->off, pl->off, (size_t)se->pb->n * sizeof *se->off);
}

static bool at_floor(const search *se)
{
	return se->found && se->arena_blocks <= se->floor;
}

/* Every ordering with both fits, until one reaches the floor. */
static void try_orderings(search *se, bool merge)
{
	const problem *pb = se->pb;
	items it;
	items_build(&it, pb, merge);
	placer pl;
	placer_init(&pl, pb);
	size_t nk = it.n_items ? (size_t)it.n_items : 1;
	item_key *keys = mc_xmalloc(nk * sizeof *keys);
	int *order = mc_xmalloc(nk * sizeof *order);
	size_t *breadth = mc_xmalloc(nk * sizeof *breadth);
	compute_breadth(pb, &it, breadth);
	for (int o = 0; o < N_ORDERINGS && !at_floor(se) && can_afford_run(se); o++) {
		make_order(&it, breadth, o, keys, order);
		for (int fit = 0; fit < 2 && !at_floor(se) && can_afford_run(se); fit++) {
			size_t arena;
			if (timed_run(se, &pl, &it, order, fit == 1, &arena))
				keep_if_better(se, &pl, &it, order, merge, fit == 1, arena, false);
		}
	}
	free(keys);
	free(order);
	free(breadth);
	placer_free(&pl);
	items_free(&it);
}

static uint32_t next_random(uint64_t *state) /* xorshift64 */
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return (uint32_t)(*state >> 32);
}

#define MAX_IMPROVE_RUNS 256

/* dst = src with the entry at `from` moved to index `to`. */
static void move_item(int *dst, const int *src, int n, int from, int to)
{
	int moved = src[from];
	for (int x = 0, y = 0; x < n; x++) {
		if (x == from)
			continue;
		if (y == to)
			dst[y++] = moved;
		dst[y++] = src[x];
	}
	if (to == n - 1)
		dst[n - 1] = moved;
}

/* Greedy runs perturbing the best order: an item that reaches the top of
 * the arena moves to a random earlier place, or any item anywhere; the new order
 * is kept when its arena is no larger (sideways moves let the search cross
 * plateaus). Stops at the lower bound, after MAX_IMPROVE_RUNS runs or
 * when the work budget is spent; the seed is fixed and the work measure
 * counts operations, not time, so the result is deterministic. */
static void improve(search *se, size_t lower_bound)
{
	const problem *pb = se->pb;
	items it;
	items_build(&it, pb, se->merged);
	if (it.n_items < 2) {
		items_free(&it);
		return;
	}
	placer pl;
	placer_init(&pl, pb);
	size_t nk = (size_t)it.n_items;
	int *trial = mc_xmalloc(nk * sizeof *trial), *tops = mc_xmalloc(nk * sizeof *tops);
	int *pos = mc_xmalloc(nk * sizeof *pos);
	uint64_t rng = 0x9e3779b97f4a7c15u;
	for (int t = 0; t < MAX_IMPROVE_RUNS && se->arena_blocks > lower_bound && can_afford_run(se);
	     t++) {
		int n_tops = 0;
		for (int x = 0; x < it.n_items; x++) {
			int k = se->order[x], head = it.member[it.start[k]];
			pos[k] = x;
			if (se->off[head] + it.size[k] == se->arena_blocks)
				tops[n_tops++] = k;
		}
		int from, to;
		if ((t & 1) || !n_tops) { /* any item, anywhere */
			from = (int)(next_random(&rng) % nk);
			to = (int)(next_random(&rng) % nk);
		} else { /* a top item, earlier */
			from = pos[tops[next_random(&rng) % (uint32_t)n_tops]];
			to = from ? (int)(next_random(&rng) % (uint32_t)from) : 0;
		}
		if (from == to)
			continue;
		move_item(trial, se->order, it.n_items, from, to);
		size_t arena;
		if (timed_run(se, &pl, &it, trial, se->best_fit, &arena))
			keep_if_better(se, &pl, &it, trial, se->merged, se->best_fit, arena, true);
	}
	free(trial);
	free(tops);
	free(pos);
	placer_free(&pl);
	items_free(&it);
}

/* ---- the entry point ---- */
static int plan_error(problem *pb, search *se)
{
	mc_error("memory plan: the arena would exceed %zu bytes", SIZE_MAX);
	free(se->off);
	free(se->order);
	problem_free(pb);
	return -1;
}

int mc_plan_memory(const mc_mem_req *reqs, int n, size_t align, mc_mem_plan *out)
{
	if (!out) {
		mc_error("memory plan: no output");
		return -1;
	}
	*out = (mc_mem_plan){0};
	if (check_requests(reqs, n, align))
		return -1;
	problem pb;
	if (problem_init(&pb, reqs, n, align))
		return -1;
	size_t nn = n ? (size_t)n : 1;
	search se = {.pb = &pb, .align = align, .off = mc_xcalloc(nn, sizeof *se.off),
	             .order = mc_xcalloc(nn, sizeof *se.order)};
	/* Any arena is at least either bound, so if one overflows so does
	 * every arena. */
	size_t lb_merged, lb_apart;
	if (!lower_bound_blocks(&pb, true, &lb_merged) || !lower_bound_blocks(&pb, false, &lb_apart))
		return plan_error(&pb, &se);
	se.floor = lb_merged;
	try_orderings(&se, true);
	if (pb.any_link)
		try_orderings(&se, false);
	if (!se.found)
		return plan_error(&pb, &se);
	size_t lb = se.merged ? lb_merged : lb_apart;
	improve(&se, lb);
	/* Every offset is below the arena's end, whose byte count fits. */
	out->offsets = mc_xcalloc(nn, sizeof *out->offsets);
	for (int i = 0; i < n; i++)
		out->offsets[i] = pb.blocks[i] ? se.off[i] * align : 0;
	out->arena_bytes = se.arena_blocks * align;
	out->lower_bound = lb * align; /* lb <= arena: the plan is valid */
	free(se.off);
	free(se.order);
	problem_free(&pb);
	char why[256];
	if (mc_plan_check(reqs, n, align, out, why, sizeof why)) {
		mc_error("internal error: %s", why);
		mc_mem_plan_free(out);
		return -1;
	}
	return 0;
}

void mc_mem_plan_free(mc_mem_plan *p)
{
	if (!p)
		return;
	free(p->offsets);
	p->offsets = NULL;
}
