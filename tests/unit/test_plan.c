/* The static memory planner (aot/plan.c): exact offsets on small cases,
 * in-place sharing only where legal, alignment, the lower bound, errors, a
 * validator run over many random instances, the arena against TFLite
 * Micro's greedy baseline and against the lower bound on CNN-like
 * schedules, and a 100k-buffer instance. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../aot/aot.h"
#include "op_harness.h"

TestSuite(plan, .init = capture_diags);

#define REQ(bytes_, first_, last_) ((mc_mem_req){(bytes_), (first_), (last_), -1, false})
#define INPLACE(bytes_, first_, last_, of) ((mc_mem_req){(bytes_), (first_), (last_), (of), false})
#define GROWS(bytes_, first_, last_, of) ((mc_mem_req){(bytes_), (first_), (last_), (of), true})

static size_t round_up(size_t bytes, size_t align)
{
	return (bytes + align - 1) / align * align;
}

/* ---- an independent validator ---- */

static bool live_together(const mc_mem_req *a, const mc_mem_req *b)
{
	return a->first <= b->last && b->first <= a->last;
}

/* j is i's in-place source and the plan gave them one storage. */
static bool shares_with_parent(const mc_mem_req *r, const mc_mem_plan *p, int i)
{
	int j = r[i].inplace_of;
	return j >= 0 && r[i].bytes && r[j].bytes && r[j].last == r[i].first &&
	       (r[i].bytes <= r[j].bytes || r[i].grows) && p->offsets[i] == p->offsets[j];
}

/* a descends from b along links that each share storage. */
static bool shared_descendant(const mc_mem_req *r, int n, const mc_mem_plan *p, int a, int b)
{
	for (int m = a, hops = 0; hops <= n && shares_with_parent(r, p, m); hops++) {
		m = r[m].inplace_of;
		if (m == b)
			return true;
	}
	return false;
}

static int by_first_index(const void *pa, const void *pb, const mc_mem_req *r)
{
	int a = *(const int *)pa, b = *(const int *)pb;
	if (r[a].first != r[b].first)
		return r[a].first < r[b].first ? -1 : 1;
	return (a > b) - (a < b);
}

static const mc_mem_req *sort_reqs;
static int cmp_by_first(const void *a, const void *b)
{
	return by_first_index(a, b, sort_reqs);
}

/* The lower bound by its definition: per step, the rounded bytes of every
 * live buffer, a buffer sharing its live parent's storage not counted. */
static size_t brute_lower_bound(const mc_mem_req *r, int n, size_t align, const mc_mem_plan *p)
{
	int lo = 0, hi = -1;
	for (int i = 0; i < n; i++) {
		if (!r[i].bytes)
			continue;
		if (hi < lo || r[i].first < lo)
			lo = r[i].first;
		if (r[i].last > hi)
			hi = r[i].last;
	}
	if (hi < lo)
		return 0;
	size_t width = (size_t)(hi - lo) + 2;
	int64_t *delta = calloc(width, sizeof *delta);
	for (int i = 0; i < n; i++) {
		if (!r[i].bytes)
			continue;
		int64_t sz = (int64_t)round_up(r[i].bytes, align);
		delta[r[i].first - lo] += sz;
		delta[r[i].last - lo + 1] -= sz;
		/* sharing its parent at step `first` (where the parent is live):
		 * only what it has beyond the parent's bytes counts there */
		if (shares_with_parent(r, p, i)) {
			/* the largest of the chain's members live at its birth: its
			 * parent, and theirs through one-step members */
			int64_t psz = 0;
			for (int a = i, hops = 0; hops <= n && shares_with_parent(r, p, a) &&
			                          r[r[a].inplace_of].last >= r[i].first; hops++) {
				a = r[a].inplace_of;
				int64_t asz = (int64_t)round_up(r[a].bytes, align);
				psz = asz > psz ? asz : psz;
			}
			int64_t shared = sz < psz ? sz : psz;
			delta[r[i].first - lo] -= shared;
			delta[r[i].first - lo + 1] += shared;
		}
	}
	int64_t live = 0, peak = 0;
	for (size_t s = 0; s < width; s++) {
		live += delta[s];
		if (live > peak)
			peak = live;
	}
	free(delta);
	return (size_t)peak;
}

/* NULL if the plan is valid, else what is wrong (static buffer). */
static const char *check_plan(const mc_mem_req *r, int n, size_t align, const mc_mem_plan *p)
{
	static char why[256];
	size_t top = 0;
	if (p->arena_bytes % align)
		return "arena not a multiple of align";
	for (int i = 0; i < n; i++) {
		if (!r[i].bytes)
			continue;
		size_t end = p->offsets[i] + round_up(r[i].bytes, align);
		if (p->offsets[i] % align) {
			snprintf(why, sizeof why, "buffer %d at %zu is misaligned", i, p->offsets[i]);
			return why;
		}
		if (end > top)
			top = end;
	}
	if (top != p->arena_bytes) {
		snprintf(why, sizeof why, "arena %zu but highest end %zu", p->arena_bytes, top);
		return why;
	}
	/* pairs live together: sweep in order of first step */
	int *idx = malloc((n > 0 ? (size_t)n : 1) * sizeof *idx);
	int m = 0;
	for (int i = 0; i < n; i++)
		if (r[i].bytes)
			idx[m++] = i;
	sort_reqs = r;
	qsort(idx, (size_t)m, sizeof *idx, cmp_by_first);
	const char *bad = NULL;
	for (int x = 0; x < m && !bad; x++) {
		int a = idx[x];
		for (int y = x + 1; y < m && r[idx[y]].first <= r[a].last && !bad; y++) {
			int b = idx[y];
			if (!live_together(&r[a], &r[b]))
				continue;
			size_t ea = p->offsets[a] + round_up(r[a].bytes, align);
			size_t eb = p->offsets[b] + round_up(r[b].bytes, align);
			if (ea <= p->offsets[b] || eb <= p->offsets[a])
				continue;
			if (shared_descendant(r, n, p, a, b) || shared_descendant(r, n, p, b, a))
				continue;
			snprintf(why, sizeof why, "buffers %d [%zu, %zu) and %d [%zu, %zu) overlap", a,
			         p->offsets[a], ea, b, p->offsets[b], eb);
			bad = why;
		}
	}
	free(idx);
	if (bad)
		return bad;
	size_t lb = brute_lower_bound(r, n, align, p);
	if (lb != p->lower_bound) {
		snprintf(why, sizeof why, "lower bound %zu, expected %zu", p->lower_bound, lb);
		return why;
	}
	if (p->lower_bound > p->arena_bytes)
		return "lower bound above the arena";
	return NULL;
}

static mc_mem_plan plan_ok(const mc_mem_req *r, int n, size_t align)
{
	mc_mem_plan p;
	cr_assert_eq(mc_plan_memory(r, n, align, &p), 0, "plan failed: %s", last_error);
	const char *why = check_plan(r, n, align, &p);
	cr_assert_null(why, "invalid plan: %s", why);
	return p;
}

#define EXPECT_OFFSETS(p, ...) do { \
	size_t want_[] = {__VA_ARGS__}; \
	for (size_t k_ = 0; k_ < sizeof want_ / sizeof *want_; k_++) \
		cr_expect_eq((p).offsets[k_], want_[k_], "offset %zu: %zu, expected %zu", k_, \
		             (p).offsets[k_], want_[k_]); \
} while (0)

/* ---- small cases with exact offsets ---- */

Test(plan, empty_and_zero_byte_buffers)
{
	mc_mem_plan p = plan_ok(NULL, 0, 64);
	cr_assert_eq(p.arena_bytes, 0);
	cr_assert_eq(p.lower_bound, 0);
	mc_mem_plan_free(&p);

	mc_mem_req r[] = {REQ(0, 0, 5), REQ(0, 3, 1) /* ignored, even its interval */};
	p = plan_ok(r, 2, 64);
	cr_assert_eq(p.arena_bytes, 0);
	cr_assert_eq(p.lower_bound, 0);
	EXPECT_OFFSETS(p, 0, 0);
	mc_mem_plan_free(&p);
}

/* a feeds b feeds c: b goes first (largest), a and c share the rest. */
Test(plan, sequence_exact_offsets)
{
	mc_mem_req r[] = {REQ(100, 0, 1), REQ(200, 1, 2), REQ(100, 2, 3)};
	mc_mem_plan p = plan_ok(r, 3, 64);
	EXPECT_OFFSETS(p, 256, 0, 256);
	cr_assert_eq(p.arena_bytes, 384);
	cr_assert_eq(p.lower_bound, 384);
	mc_mem_plan_free(&p);
}

/* Buffers never live together all sit at 0; align 1 keeps exact sizes. */
Test(plan, disjoint_lifetimes_reuse_offset_zero)
{
	mc_mem_req r[] = {REQ(10, 0, 0), REQ(30, 1, 1), REQ(20, 2, 2)};
	mc_mem_plan p = plan_ok(r, 3, 1);
	EXPECT_OFFSETS(p, 0, 0, 0);
	cr_assert_eq(p.arena_bytes, 30);
	cr_assert_eq(p.lower_bound, 30);
	mc_mem_plan_free(&p);
}

/* A hole left by a dead buffer is reused by a later one that fits. */
Test(plan, fills_gap_below_live_buffer)
{
	/* 0: [0,1] 256; 1: [0,3] 256; 2: [2,3] 128 fits where 0 was */
	mc_mem_req r[] = {REQ(256, 0, 1), REQ(256, 0, 3), REQ(128, 2, 3)};
	mc_mem_plan p = plan_ok(r, 3, 64);
	/* size order, ties longer first: 1 at 0, 0 at 256, 2 at 256 */
	EXPECT_OFFSETS(p, 256, 0, 256);
	cr_assert_eq(p.arena_bytes, 512);
	cr_assert_eq(p.lower_bound, 512);
	mc_mem_plan_free(&p);
}

Test(plan, offsets_and_arena_are_aligned)
{
	mc_mem_req r[] = {REQ(1, 0, 2), REQ(65, 0, 2), REQ(3, 1, 2), REQ(130, 2, 4)};
	for (size_t align = 1; align <= 256; align *= 2) {
		mc_mem_plan p = plan_ok(r, 4, align);
		size_t sum = 0;
		for (int i = 0; i < 4; i++)
			sum += round_up(r[i].bytes, align);
		/* all four are live at step 2 */
		cr_assert_eq(p.lower_bound, sum, "align %zu", align);
		cr_assert_eq(p.arena_bytes, sum, "align %zu", align);
		mc_mem_plan_free(&p);
	}
}

/* ---- in-place ---- */

/* j dies where i is born, i no larger: one storage; x beside them. */
Test(plan, inplace_pair_shares_storage)
{
	mc_mem_req r[] = {REQ(256, 0, 1), INPLACE(256, 1, 2, 0), REQ(64, 0, 2)};
	mc_mem_plan p = plan_ok(r, 3, 64);
	EXPECT_OFFSETS(p, 0, 0, 256);
	cr_assert_eq(p.arena_bytes, 320);
	cr_assert_eq(p.lower_bound, 320);
	mc_mem_plan_free(&p);
}

/* Smaller output in place of a larger input (raw bytes 200 <= 256). */
Test(plan, inplace_smaller_output_shares)
{
	mc_mem_req r[] = {REQ(256, 0, 1), INPLACE(200, 1, 2, 0)};
	mc_mem_plan p = plan_ok(r, 2, 64);
	EXPECT_OFFSETS(p, 0, 0);
	cr_assert_eq(p.arena_bytes, 256);
	cr_assert_eq(p.lower_bound, 256);
	mc_mem_plan_free(&p);
}

/* An output larger than its source cannot take it over, even when both
 * round to the same aligned size. */
Test(plan, inplace_refused_when_output_is_larger)
{
	mc_mem_req r[] = {REQ(256, 0, 1), INPLACE(320, 1, 2, 0)};
	mc_mem_plan p = plan_ok(r, 2, 64);
	EXPECT_OFFSETS(p, 320, 0);
	cr_assert_eq(p.arena_bytes, 576);
	cr_assert_eq(p.lower_bound, 576);
	mc_mem_plan_free(&p);

	mc_mem_req same_blocks[] = {REQ(60, 0, 1), INPLACE(63, 1, 2, 0)};
	p = plan_ok(same_blocks, 2, 64);
	cr_assert_neq(p.offsets[0], p.offsets[1]);
	cr_assert_eq(p.arena_bytes, 128);
	cr_assert_eq(p.lower_bound, 128);
	mc_mem_plan_free(&p);
}

/* The source must die exactly where the output is born. */
Test(plan, inplace_refused_when_source_outlives_the_step)
{
	mc_mem_req r[] = {REQ(256, 0, 2), INPLACE(256, 1, 3, 0)};
	mc_mem_plan p = plan_ok(r, 2, 64);
	EXPECT_OFFSETS(p, 0, 256);
	cr_assert_eq(p.arena_bytes, 512);
	cr_assert_eq(p.lower_bound, 512);
	mc_mem_plan_free(&p);
}

/* A zero-byte source is not in the arena: nothing to take over. */
Test(plan, inplace_of_zero_byte_buffer_is_ignored)
{
	mc_mem_req r[] = {REQ(0, 0, 1), INPLACE(256, 1, 2, 0), REQ(64, 1, 1)};
	mc_mem_plan p = plan_ok(r, 3, 64);
	EXPECT_OFFSETS(p, 0, 0, 256);
	cr_assert_eq(p.arena_bytes, 320);
	mc_mem_plan_free(&p);
}

/* A -> B -> C, shrinking: one storage for all three. */
Test(plan, inplace_grows_where_the_kernel_allows_it)
{
	mc_mem_req r[] = {REQ(256, 0, 1), GROWS(320, 1, 2, 0)};
	mc_mem_plan p = plan_ok(r, 2, 64);
	cr_assert_eq(p.offsets[0], p.offsets[1], "the larger output starts at its source");
	cr_assert_eq(p.arena_bytes, 320);
	cr_assert_eq(p.lower_bound, 320);
	mc_mem_plan_free(&p);

	/* a third buffer live at the shared step sits above the grown one */
	mc_mem_req three[] = {REQ(256, 0, 1), GROWS(320, 1, 2, 0), REQ(64, 1, 1)};
	p = plan_ok(three, 3, 64);
	cr_assert_eq(p.arena_bytes, 384);
	cr_assert_eq(p.lower_bound, 384);
	mc_mem_plan_free(&p);
}

Test(plan, inplace_chain)
{
	mc_mem_req r[] = {REQ(512, 0, 1), INPLACE(256, 1, 2, 0), INPLACE(128, 2, 3, 1),
	                  REQ(64, 3, 4)};
	mc_mem_plan p = plan_ok(r, 4, 64);
	EXPECT_OFFSETS(p, 0, 0, 0, 128);
	cr_assert_eq(p.arena_bytes, 512);
	cr_assert_eq(p.lower_bound, 512);
	mc_mem_plan_free(&p);
}

/* Two candidates for one source: the larger takes it, the other goes
 * beside them. */
Test(plan, inplace_one_taker_per_source)
{
	mc_mem_req r[] = {REQ(256, 0, 1), INPLACE(128, 1, 2, 0), INPLACE(256, 1, 2, 0)};
	mc_mem_plan p = plan_ok(r, 3, 64);
	EXPECT_OFFSETS(p, 0, 256, 0);
	cr_assert_eq(p.arena_bytes, 384);
	cr_assert_eq(p.lower_bound, 384);
	mc_mem_plan_free(&p);
}

/* Degenerate links in a cycle (all at one step) are dropped, not looped on. */
Test(plan, inplace_cycle_is_dropped)
{
	mc_mem_req r[] = {INPLACE(64, 3, 3, 1), INPLACE(64, 3, 3, 0)};
	mc_mem_plan p = plan_ok(r, 2, 64);
	cr_assert_eq(p.arena_bytes, 128);
	cr_assert_eq(p.lower_bound, 128);
	mc_mem_plan_free(&p);
}

/* ---- errors ---- */

Test(plan, rejects_bad_arguments)
{
	mc_mem_req r[] = {REQ(64, 0, 1), REQ(64, 1, 2)};
	mc_mem_plan p;
	cr_assert_eq(mc_plan_memory(r, 2, 0, &p), -1);
	cr_assert(strstr(last_error, "alignment 0"), "%s", last_error);
	cr_assert_null(p.offsets);
	cr_assert_eq(mc_plan_memory(r, 2, 48, &p), -1);
	cr_assert(strstr(last_error, "alignment 48"), "%s", last_error);
	cr_assert_eq(mc_plan_memory(r, -1, 64, &p), -1);
	cr_assert(strstr(last_error, "count -1"), "%s", last_error);

	mc_mem_req backwards[] = {REQ(64, 2, 1)};
	cr_assert_eq(mc_plan_memory(backwards, 1, 64, &p), -1);
	cr_assert(strstr(last_error, "buffer 0 has an empty live interval [2, 1]"), "%s",
	          last_error);

	mc_mem_req self[] = {INPLACE(64, 0, 1, 0)};
	cr_assert_eq(mc_plan_memory(self, 1, 64, &p), -1);
	cr_assert(strstr(last_error, "in-place source"), "%s", last_error);
	mc_mem_req outside[] = {REQ(64, 0, 1), INPLACE(64, 1, 2, 2)};
	cr_assert_eq(mc_plan_memory(outside, 2, 64, &p), -1);
	cr_assert(strstr(last_error, "buffer 1 names buffer 2"), "%s", last_error);
}

Test(plan, reports_overflow)
{
	mc_mem_plan p;
	mc_mem_req huge[] = {REQ(SIZE_MAX - 10, 0, 1)};
	cr_assert_eq(mc_plan_memory(huge, 1, 64, &p), -1);
	cr_assert(strstr(last_error, "overflows when aligned"), "%s", last_error);

	/* each fits, both together do not */
	size_t half = (SIZE_MAX / 2 + 1) & ~(size_t)63;
	mc_mem_req pair[] = {REQ(half, 0, 1), REQ(half, 1, 2)};
	cr_assert_eq(mc_plan_memory(pair, 2, 64, &p), -1);
	cr_assert(strstr(last_error, "arena would exceed"), "%s", last_error);
	cr_assert_null(p.offsets);

	/* ... unless they never live together (too big for the validator's
	 * int64 arithmetic: checked here by hand) */
	pair[1].first = 2;
	pair[1].last = 3;
	cr_assert_eq(mc_plan_memory(pair, 2, 64, &p), 0, "%s", last_error);
	cr_assert_eq(p.offsets[0], 0);
	cr_assert_eq(p.offsets[1], 0);
	cr_assert_eq(p.arena_bytes, half);
	cr_assert_eq(p.lower_bound, half);
	mc_mem_plan_free(&p);
}

/* ---- the validator itself must catch bad plans ---- */

Test(plan, validator_rejects_bad_plans)
{
	mc_mem_req r[] = {REQ(256, 0, 1), INPLACE(256, 1, 2, 0), REQ(128, 0, 2),
	                  INPLACE(256, 1, 2, 0)};
	mc_mem_plan p = plan_ok(r, 4, 64);
	size_t saved[4];
	memcpy(saved, p.offsets, sizeof saved);
	/* buffer 2 moved onto buffer 0 */
	p.offsets[2] = p.offsets[0];
	cr_assert_not_null(check_plan(r, 4, 64, &p));
	memcpy(p.offsets, saved, sizeof saved);
	/* both candidates at the source's offset: siblings overlap */
	p.offsets[1] = p.offsets[3] = p.offsets[0];
	cr_assert_not_null(check_plan(r, 4, 64, &p));
	memcpy(p.offsets, saved, sizeof saved);
	p.offsets[2] += 1;
	cr_assert_not_null(check_plan(r, 4, 64, &p));
	memcpy(p.offsets, saved, sizeof saved);
	p.lower_bound += 64;
	cr_assert_not_null(check_plan(r, 4, 64, &p));
	p.lower_bound -= 64;
	p.arena_bytes += 64;
	cr_assert_not_null(check_plan(r, 4, 64, &p));
	p.arena_bytes -= 64;
	cr_assert_null(check_plan(r, 4, 64, &p));
	mc_mem_plan_free(&p);
}

/* ---- random instances ---- */

static uint64_t rng_state;
static uint32_t rnd(uint32_t n) /* 0 .. n-1 */
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state % n);
}

/* Buffers with random sizes and intervals; some in-place candidates legal,
 * some too large, some whose source does not die at the right step. */
static int random_instance(mc_mem_req *r, int max_n, size_t *align)
{
	static const size_t aligns[] = {1, 4, 16, 64};
	int n = 1 + (int)rnd((uint32_t)max_n), steps = 1 + (int)rnd(30);
	*align = aligns[rnd(4)];
	for (int i = 0; i < n; i++) {
		int a = (int)rnd((uint32_t)steps), len = rnd(4) ? (int)rnd(4) : (int)rnd((uint32_t)steps);
		size_t bytes = rnd(10) == 0 ? 0 : 1 + rnd(rnd(2) ? 300 : 4000);
		r[i] = REQ(bytes, a, a + len);
		if (i > 0 && rnd(3) == 0) {
			int j = (int)rnd((uint32_t)i);
			r[i].inplace_of = j;
			if (rnd(4)) { /* mostly legal in time */
				r[i].first = r[j].last;
				r[i].last = r[i].first + (int)rnd(5);
			}
			if (rnd(4) && r[j].bytes)
				r[i].bytes = 1 + rnd((uint32_t)r[j].bytes);
			else if (rnd(2)) /* a kernel that writes past its source's end */
				r[i].grows = true;
		}
	}
	return n;
}

/* TFLM's greedy planner, naively: by rounded size (descending; ties: longer
 * interval, then index), each at the lowest offset clear of every placed
 * buffer live at the same time; no in-place sharing. */
static size_t tflm_arena(const mc_mem_req *r, int n, size_t align)
{
	int *order = malloc((size_t)n * sizeof *order);
	size_t *off = malloc((size_t)n * sizeof *off), *sz = malloc((size_t)n * sizeof *sz);
	bool *placed = calloc((size_t)n, sizeof *placed);
	for (int i = 0; i < n; i++) {
		order[i] = i;
		sz[i] = round_up(r[i].bytes, align);
	}
	for (int x = 1; x < n; x++) /* insertion sort: stable */
		for (int y = x; y > 0; y--) {
			int a = order[y - 1], b = order[y];
			int64_t la = (int64_t)r[a].last - r[a].first, lb = (int64_t)r[b].last - r[b].first;
			if (sz[a] > sz[b] || (sz[a] == sz[b] && la >= lb))
				break;
			order[y - 1] = b;
			order[y] = a;
		}
	size_t top = 0;
	for (int x = 0; x < n; x++) {
		int i = order[x];
		if (!sz[i])
			continue;
		/* the lowest clear offset is 0 or the end of a placed buffer */
		size_t o = SIZE_MAX;
		for (int c = -1; c < n; c++) {
			if (c >= 0 && !placed[c])
				continue;
			size_t at = c < 0 ? 0 : off[c] + sz[c];
			bool clear = at < o;
			for (int k = 0; k < n && clear; k++)
				clear = !(placed[k] && live_together(&r[i], &r[k]) && at < off[k] + sz[k] &&
				          off[k] < at + sz[i]);
			if (clear)
				o = at;
		}
		off[i] = o;
		placed[i] = true;
		if (o + sz[i] > top)
			top = o + sz[i];
	}
	free(order);
	free(off);
	free(sz);
	free(placed);
	return top;
}

Test(plan, random_instances_are_valid_and_beat_tflm_baseline)
{
	enum { MAX_N = 80, RUNS = 1000 };
	mc_mem_req r[MAX_N];
	rng_state = 0x9e3779b97f4a7c15u;
	int better = 0, shared = 0;
	for (int run = 0; run < RUNS; run++) {
		size_t align;
		int n = random_instance(r, MAX_N, &align);
		mc_mem_plan p;
		cr_assert_eq(mc_plan_memory(r, n, align, &p), 0, "run %d: %s", run, last_error);
		const char *why = check_plan(r, n, align, &p);
		cr_assert_null(why, "run %d: %s", run, why);
		size_t base = tflm_arena(r, n, align);
		cr_assert_leq(p.arena_bytes, base, "run %d: arena %zu, TFLM %zu", run,
		              p.arena_bytes, base);
		better += p.arena_bytes < base;
		for (int i = 0; i < n; i++)
			shared += shares_with_parent(r, &p, i);
		if (run % 10 == 0) { /* deterministic (checked on some: it takes time) */
			mc_mem_plan q;
			cr_assert_eq(mc_plan_memory(r, n, align, &q), 0);
			cr_assert_eq(q.arena_bytes, p.arena_bytes);
			cr_assert_eq(memcmp(q.offsets, p.offsets, (size_t)n * sizeof *p.offsets), 0);
			mc_mem_plan_free(&q);
		}
		mc_mem_plan_free(&p);
	}
	cr_log_info("%d random instances: better than TFLM in %d, %d in-place shares", RUNS,
	            better, shared);
	/* the extra orderings and in-place sharing do pay off */
	cr_assert_gt(better, RUNS / 10, "better than TFLM in %d of %d", better, RUNS);
	cr_assert_gt(shared, RUNS / 2, "%d in-place shares", shared);
}

/* ---- CNN-like schedules ---- */

typedef struct {
	mc_mem_req *r;
	int n, cap, step;
} sched;

/* A new buffer produced at the current step (which then advances); its
 * last use is set by use(). */
static int produce(sched *s, size_t bytes, int inplace_of)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 256;
		s->r = realloc(s->r, (size_t)s->cap * sizeof *s->r);
	}
	s->r[s->n] = INPLACE(bytes, s->step, s->step, inplace_of);
	s->step++;
	return s->n++;
}

/* Buffer b is read by the step just produced. */
static void use(sched *s, int b)
{
	s->r[b].last = s->step - 1;
}

/* Conv -> conv -> add(residual), ResNet's basic block (float32, c x hw). */
static int resnet_block(sched *s, int x, size_t c, size_t hw, bool down)
{
	int shortcut = x;
	size_t cout = down ? 2 * c : c, hwo = down ? hw / 4 : hw;
	if (down) {
		shortcut = produce(s, cout * hwo * 4, -1); /* 1x1 stride-2 conv */
		use(s, x);
	}
	int h1 = produce(s, cout * hwo * 4, -1);
	use(s, x);
	int h2 = produce(s, cout * hwo * 4, -1);
	use(s, h1);
	int y = produce(s, cout * hwo * 4, h2); /* Add: in place of h2 */
	use(s, h2);
	use(s, shortcut);
	return y;
}

/* MobileNetV2's inverted residual: expand 1x1, depthwise, project, add. */
static int mobilenet_block(sched *s, int x, size_t c, size_t hw, size_t cout, bool stride2)
{
	size_t hwo = stride2 ? hw / 4 : hw;
	int e = produce(s, 6 * c * hw * 4, -1);
	use(s, x);
	int d = produce(s, 6 * c * hwo * 4, -1);
	use(s, e);
	int pj = produce(s, cout * hwo * 4, -1);
	use(s, d);
	if (stride2 || cout != c)
		return pj;
	int y = produce(s, cout * hwo * 4, pj);
	use(s, pj);
	use(s, x);
	return y;
}

static void expect_within_10_percent(const sched *s, const char *what)
{
	mc_mem_plan p = plan_ok(s->r, s->n, 64);
	double ratio = (double)p.arena_bytes / (double)p.lower_bound;
	cr_log_info("%s: %d buffers, arena %zu, lower bound %zu, ratio %.4f", what, s->n,
	            p.arena_bytes, p.lower_bound, ratio);
	cr_assert_leq(p.arena_bytes * 10, p.lower_bound * 11, "%s: arena %zu vs lower bound %zu",
	              what, p.arena_bytes, p.lower_bound);
	/* in-place adds do share */
	int shared = 0;
	for (int i = 0; i < s->n; i++)
		shared += shares_with_parent(s->r, &p, i);
	cr_assert_gt(shared, 0, "%s: no in-place sharing", what);
	mc_mem_plan_free(&p);
}

Test(plan, resnet18_like_within_10_percent_of_lower_bound)
{
	sched s = {0};
	int x = produce(&s, 64 * 112 * 112 * 4, -1); /* stem conv */
	int pool = produce(&s, 64 * 56 * 56 * 4, -1);
	use(&s, x);
	x = pool;
	size_t c = 64, hw = 56 * 56;
	for (int stage = 0; stage < 4; stage++)
		for (int b = 0; b < 2; b++) {
			bool down = stage > 0 && b == 0;
			x = resnet_block(&s, x, c, hw, down);
			if (down) {
				c *= 2;
				hw /= 4;
			}
		}
	int gap = produce(&s, c * 4, -1);
	use(&s, x);
	int fc = produce(&s, 1000 * 4, -1);
	use(&s, gap);
	use(&s, fc); /* the output is read after the last step */
	expect_within_10_percent(&s, "resnet18");
	free(s.r);
}

Test(plan, mobilenet_v2_like_within_10_percent_of_lower_bound)
{
	static const struct { size_t t_unused, c; int n, s; } cfg[] = {
		{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
		{6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1},
	};
	sched s = {0};
	int x = produce(&s, 32 * 112 * 112 * 4, -1);
	size_t c = 32, hw = 112 * 112;
	for (size_t k = 0; k < sizeof cfg / sizeof *cfg; k++)
		for (int i = 0; i < cfg[k].n; i++) {
			bool stride2 = i == 0 && cfg[k].s == 2;
			x = mobilenet_block(&s, x, c, hw, cfg[k].c, stride2);
			c = cfg[k].c;
			if (stride2)
				hw /= 4;
		}
	int last = produce(&s, 1280 * hw * 4, -1);
	use(&s, x);
	use(&s, last);
	expect_within_10_percent(&s, "mobilenet_v2");
	free(s.r);
}

/* An encoder-decoder with skips held across the whole network. */
Test(plan, unet_like_within_10_percent_of_lower_bound)
{
	sched s = {0};
	int skips[4];
	size_t c = 32, hw = 128 * 128;
	int x = produce(&s, c * hw * 4, -1);
	for (int level = 0; level < 4; level++) {
		int a = produce(&s, c * hw * 4, -1);
		use(&s, x);
		int b = produce(&s, c * hw * 4, a); /* ReLU in place */
		use(&s, a);
		skips[level] = b;
		x = produce(&s, c * hw, -1); /* MaxPool 2x2 */
		use(&s, b);
		hw /= 4;
		c *= 2;
	}
	for (int level = 3; level >= 0; level--) {
		hw *= 4;
		c /= 2;
		int up = produce(&s, c * hw * 4, -1);
		use(&s, x);
		int cat = produce(&s, 2 * c * hw * 4, -1);
		use(&s, up);
		use(&s, skips[level]);
		x = produce(&s, c * hw * 4, -1);
		use(&s, cat);
	}
	use(&s, x);
	expect_within_10_percent(&s, "unet");
	free(s.r);
}

/* Random CNN-like graphs: a main path with multi-branch blocks joined by a
 * concat (Inception, YOLO necks), skips held for a while (U-Net, FPN),
 * in-place elementwise ops and resolution changes. */
static void random_cnn(sched *s, int n_steps)
{
	size_t size = (64 + 64 * rnd(4)) * 1024;
	int x = produce(s, size, -1), held[64], n_held = 0;
	while (s->step < n_steps) {
		uint32_t r = rnd(100);
		if (r < 15) { /* resolution change */
			static const double scale[] = {0.25, 0.5, 2, 4};
			double f = scale[rnd(4)] * (double)size;
			size = f < 1024 ? 1024 : f > (1 << 24) ? 1 << 24 : (size_t)f;
			int y = produce(s, size, -1);
			use(s, x);
			x = y;
		} else if (r < 35) { /* branches, then concat */
			int k = 2 + (int)rnd(3), outs[4];
			size_t total = 0;
			for (int b = 0; b < k; b++) {
				int t = x;
				for (int d = 1 + (int)rnd(3); d > 0; d--) {
					static const double scale[] = {0.25, 0.5, 1, 1.5};
					int y = produce(s, (size_t)(scale[rnd(4)] * (double)size) + 64, -1);
					use(s, t);
					t = y;
				}
				outs[b] = t;
				total += s->r[t].bytes;
			}
			size = total > (1 << 24) ? 1 << 24 : total;
			x = produce(s, size, -1);
			for (int b = 0; b < k; b++)
				use(s, outs[b]);
		} else if (r < 45 && n_held < 64) { /* keep x for a later join */
			held[n_held++] = x;
			int y = produce(s, size, -1);
			use(s, x);
			x = y;
		} else if (r < 55 && n_held) { /* join the latest skip */
			int skip = held[--n_held];
			if (s->r[skip].bytes > size)
				size = s->r[skip].bytes;
			int y = produce(s, size, -1);
			use(s, x);
			use(s, skip);
			x = y;
		} else if (r < 75) { /* elementwise, in place */
			int y = produce(s, size, x);
			use(s, x);
			x = y;
		} else {
			int y = produce(s, size, -1);
			use(s, x);
			x = y;
		}
	}
	while (n_held)
		use(s, held[--n_held]);
	use(s, x);
}

Test(plan, random_cnn_graphs_near_lower_bound)
{
	enum { RUNS = 200 };
	rng_state = 0x2545f4914f6cdd1du;
	int within = 0, at_bound = 0;
	double sum = 0, worst = 0;
	for (int run = 0; run < RUNS; run++) {
		sched s = {0};
		random_cnn(&s, 50 + (int)rnd(250));
		mc_mem_plan p = plan_ok(s.r, s.n, 64);
		double ratio = (double)p.arena_bytes / (double)p.lower_bound;
		sum += ratio;
		worst = ratio > worst ? ratio : worst;
		within += p.arena_bytes * 10 <= p.lower_bound * 11;
		at_bound += p.arena_bytes == p.lower_bound;
		mc_mem_plan_free(&p);
		free(s.r);
	}
	cr_log_info("%d random CNN graphs: %d at the lower bound, %d within 10%%, mean ratio %.4f, "
	            "worst %.4f", RUNS, at_bound, within, sum / RUNS, worst);
	cr_assert_geq(within, RUNS * 98 / 100);
	cr_assert_geq(at_bound, RUNS * 85 / 100);
	cr_assert_leq(sum / RUNS, 1.01);
}

/* 100k buffers: residual stages plus a few buffers live throughout. */
Test(plan, hundred_thousand_buffers)
{
	sched s = {0};
	int keep[8];
	for (int k = 0; k < 8; k++)
		keep[k] = produce(&s, 4096 * (size_t)(k + 1), -1);
	int x = produce(&s, 65536, -1);
	while (s.n < 100000)
		x = resnet_block(&s, x, 16 + (size_t)(s.n % 7) * 16, 256, false);
	use(&s, x);
	for (int k = 0; k < 8; k++)
		use(&s, keep[k]);
	clock_t t0 = clock();
	mc_mem_plan p = plan_ok(s.r, s.n, 64);
	double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
	cr_log_info("%d buffers: arena %zu, lower bound %zu, %.2f s (with validation)", s.n,
	            p.arena_bytes, p.lower_bound, secs);
	cr_assert_leq(p.arena_bytes * 10, p.lower_bound * 11);
	cr_assert_lt(secs, 30.0);
	mc_mem_plan_free(&p);
	free(s.r);
}

/* Every buffer overlaps about a thousand others in time: the work budget
 * cuts the number of greedy runs, not the quality of each. */
Test(plan, dense_overlaps_stay_fast)
{
	enum { N = 10000 };
	mc_mem_req *r = malloc(N * sizeof *r);
	rng_state = 0xdeadbeefcafef00du;
	for (int i = 0; i < N; i++)
		r[i] = REQ(1024 * (1 + rnd(64)), i, i + (int)rnd(1500));
	clock_t t0 = clock();
	mc_mem_plan p;
	cr_assert_eq(mc_plan_memory(r, N, 64, &p), 0);
	double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
	const char *why = check_plan(r, N, 64, &p);
	cr_assert_null(why, "%s", why);
	cr_log_info("dense: arena %zu, lower bound %zu (%.4f), %.2f s", p.arena_bytes,
	            p.lower_bound, (double)p.arena_bytes / (double)p.lower_bound, secs);
	cr_assert_leq(p.arena_bytes * 10, p.lower_bound * 12);
	cr_assert_lt(secs, 30.0);
	mc_mem_plan_free(&p);
	free(r);
}

/* ---- the memory-aware kernel order (aot/order.c) ---- */

typedef struct {
	int n, n_roots;
	mc_order_kernel k[10];
	int roots[10][4];
	bool writes[10][4];
	size_t scratch[10];
	size_t root_bytes[16];
} order_case;

static void touch(order_case *c, int kernel, int root, bool w)
{
	mc_order_kernel *k = &c->k[kernel];
	c->roots[kernel][k->n_touch] = root;
	c->writes[kernel][k->n_touch] = w;
	k->n_touch++;
	k->roots = c->roots[kernel];
	k->writes = c->writes[kernel];
}

/* The peak of running c's kernels in `order` (a buffer live from its first
 * toucher to its last), or SIZE_MAX if the order runs a kernel before one
 * it conflicts with that the given order runs first. */
static size_t order_peak(const order_case *c, const int *order)
{
	int at[10], first[16], last[16];
	for (int i = 0; i < c->n; i++)
		at[order[i]] = i;
	for (int r = 0; r < c->n_roots; r++)
		first[r] = c->n, last[r] = -1;
	for (int i = 0; i < c->n; i++)
		for (int t = 0; t < c->k[i].n_touch; t++) {
			int r = c->k[i].roots[t];
			first[r] = at[i] < first[r] ? at[i] : first[r];
			last[r] = at[i] > last[r] ? at[i] : last[r];
			for (int j = 0; j < i; j++)
				for (int u = 0; u < c->k[j].n_touch; u++)
					if (c->k[j].roots[u] == r && (c->k[j].writes[u] || c->k[i].writes[t]) && at[j] > at[i])
						return SIZE_MAX;
		}
	size_t peak = 0;
	for (int s = 0; s < c->n; s++) {
		size_t live = c->k[order[s]].scratch;
		for (int r = 0; r < c->n_roots; r++)
			if (first[r] <= s && s <= last[r])
				live += c->root_bytes[r];
		peak = live > peak ? live : peak;
	}
	return peak;
}

static size_t best_peak(const order_case *c, int *perm, int k)
{
	if (k == c->n)
		return order_peak(c, perm);
	size_t best = SIZE_MAX;
	for (int i = k; i < c->n; i++) {
		int t = perm[k]; perm[k] = perm[i]; perm[i] = t;
		size_t p = best_peak(c, perm, k + 1);
		best = p < best ? p : best;
		t = perm[k]; perm[k] = perm[i]; perm[i] = t;
	}
	return best;
}

static void set_scratch(order_case *c)
{
	for (int i = 0; i < c->n; i++)
		c->k[i].scratch = c->scratch[i];
}

/* a = f(in); b1 = g(a), b2 = g(a) (100 bytes each, listed first); s1 =
 * h(b1), s2 = h(b2); out = s1 + s2: running each h right after its g keeps
 * one big buffer live, not two. */
Test(plan, order_runs_a_branch_where_its_result_is_needed)
{
	order_case c = { .n = 6, .n_roots = 5, .root_bytes = { 10, 100, 100, 1, 1 } };
	touch(&c, 0, 0, true);
	touch(&c, 1, 0, false); touch(&c, 1, 1, true);
	touch(&c, 2, 0, false); touch(&c, 2, 2, true);
	touch(&c, 3, 1, false); touch(&c, 3, 3, true);
	touch(&c, 4, 2, false); touch(&c, 4, 4, true);
	touch(&c, 5, 3, false); touch(&c, 5, 4, false);
	int given[6] = { 0, 1, 2, 3, 4, 5 }, order[6];
	cr_assert_eq(order_peak(&c, given), 210);
	size_t peak = mc_order_for_memory(c.n, c.k, c.n_roots, c.root_bytes, order);
	cr_assert_eq(peak, 111, "peak %zu", peak);
	cr_assert_eq(order_peak(&c, order), 111, "order %d %d %d %d %d %d", order[0], order[1], order[2],
	             order[3], order[4], order[5]);
}

/* Random DAG-shaped cases of up to 8 kernels (each writes one buffer and
 * reads some earlier ones, or writes a slab of an earlier buffer): the
 * order keeps every conflicting pair, its peak is the one it reports, never
 * above the given order's, and the best of all orders (the search is
 * exact at this size). */
Test(plan, order_is_valid_and_optimal_on_small_random_graphs)
{
	rng_state = 0x2545f4914f6cdd1dULL;
	for (int iter = 0; iter < 300; iter++) {
		order_case c = { .n = 2 + (int)rnd(7) };
		c.n_roots = c.n;
		for (int i = 0; i < c.n; i++) {
			c.root_bytes[i] = 1 + rnd(rnd(2) ? 10 : 200);
			c.scratch[i] = rnd(3) ? 0 : rnd(50);
			touch(&c, i, i, true);
			for (int j = 0; j < i && c.k[i].n_touch < 4; j++)
				if (rnd(3) == 0)
					touch(&c, i, j, rnd(8) == 0);
		}
		set_scratch(&c);
		int given[10], order[10], perm[10];
		for (int i = 0; i < c.n; i++)
			given[i] = perm[i] = i;
		size_t peak = mc_order_for_memory(c.n, c.k, c.n_roots, c.root_bytes, order);
		size_t got = order_peak(&c, order);
		cr_assert_neq(got, SIZE_MAX, "case %d: the order breaks a dependence", iter);
		cr_assert_eq(got, peak, "case %d: reported %zu, the order's peak %zu", iter, peak, got);
		cr_assert_leq(got, order_peak(&c, given), "case %d", iter);
		cr_assert_eq(got, best_peak(&c, perm, 0), "case %d: %zu, the best order %zu", iter, got,
		             best_peak(&c, perm, 0));
	}
}
