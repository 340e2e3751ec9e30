/* A memory-aware kernel order (mc_order_for_memory): among the orders that
 * keep every conflicting pair of accesses to a buffer as the given order
 * has them, one whose peak of live arena bytes is lowest, found by a beam
 * search over the sets of kernels already run (Serenity's dynamic
 * programme over a DAG's downsets, bounded: the bytes live after a set of
 * kernels do not depend on the order they ran in, so equal sets merge and
 * only the best peak reaching each is kept). */
#include <stdlib.h>
#include <string.h>

#include "program.h"

/* Sets kept a level, and kernels looked at past the first one not yet run
 * (the search moves a kernel at most this far from where its producers
 * leave it; in a CNN or a transformer the branches that can be reordered
 * are a few kernels wide). */
#define BEAM_STATES 256
#define LOOKAHEAD 48

typedef struct {
	size_t mem, peak;       /* live after the set; highest of any step so far */
	uint64_t hash;          /* Zobrist hash of the set */
	int parent, kernel;     /* the set before and the kernel added */
	int frontier;           /* lowest kernel not in the set */
	int seq;                /* insertion order: ties keep the earlier */
} state;

typedef struct {
	int n, n_roots, words;
	const mc_order_kernel *k;
	const size_t *root_bytes;
	int *pred_at, *pred;          /* CSR: kernels that must run before each kernel */
	int *touch_at, *touch;        /* CSR: kernels touching each root */
	uint64_t *zobrist;
} search;

static bool has(const uint64_t *bits, int i)
{
	return bits[i / 64] >> (i % 64) & 1;
}

static uint64_t mix(uint64_t x) /* splitmix64 */
{
	x += 0x9e3779b97f4a7c15u;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
	return x ^ (x >> 31);
}

/* CSR of the kernels touching each root, in kernel order. */
static void index_touches(search *s)
{
	s->touch_at = mc_xcalloc((size_t)s->n_roots + 1, sizeof(int));
	for (int i = 0; i < s->n; i++)
		for (int t = 0; t < s->k[i].n_touch; t++)
			s->touch_at[s->k[i].roots[t] + 1]++;
	for (int r = 0; r < s->n_roots; r++)
		s->touch_at[r + 1] += s->touch_at[r];
	int *fill = mc_xcalloc((size_t)s->n_roots + 1, sizeof(int));
	s->touch = mc_xcalloc((size_t)s->touch_at[s->n_roots] + 1, sizeof(int));
	for (int i = 0; i < s->n; i++)
		for (int t = 0; t < s->k[i].n_touch; t++) {
			int r = s->k[i].roots[t];
			s->touch[s->touch_at[r] + fill[r]++] = i;
		}
	free(fill);
}

static bool writes(const mc_order_kernel *k, int root)
{
	for (int t = 0; t < k->n_touch; t++)
		if (k->roots[t] == root && k->writes[t])
			return true;
	return false;
}

/* j must follow i (i < j) where both touch a root and one writes it. */
static void index_preds(search *s)
{
	s->pred_at = mc_xcalloc((size_t)s->n + 1, sizeof(int));
	int cap = 0, n_pred = 0;
	int *pred = NULL;
	for (int j = 0; j < s->n; j++) {
		int start = n_pred;
		for (int t = 0; t < s->k[j].n_touch; t++) {
			int r = s->k[j].roots[t];
			bool jw = s->k[j].writes[t];
			for (int u = s->touch_at[r]; u < s->touch_at[r + 1] && s->touch[u] < j; u++) {
				int i = s->touch[u];
				if (!jw && !writes(&s->k[i], r))
					continue;
				bool dup = false;
				for (int q = start; q < n_pred && !dup; q++)
					dup = pred[q] == i;
				if (dup)
					continue;
				pred = mc_grow_array(pred, &cap, n_pred + 1, sizeof *pred);
				pred[n_pred++] = i;
			}
		}
		s->pred_at[j + 1] = n_pred;
	}
	s->pred = pred;
}

static bool ready(const search *s, const uint64_t *bits, int j)
{
	for (int q = s->pred_at[j]; q < s->pred_at[j + 1]; q++)
		if (!has(bits, s->pred[q]))
			return false;
	return true;
}

/* Running kernel j after the set `bits` (live bytes mem): the step's live
 * bytes, and the bytes live after it. */
static void step_bytes(const search *s, const uint64_t *bits, size_t mem, int j, size_t *step, size_t *after)
{
	size_t born = 0, dying = 0;
	const mc_order_kernel *k = &s->k[j];
	for (int t = 0; t < k->n_touch; t++) {
		int r = k->roots[t];
		bool dup = false;
		for (int u = 0; u < t && !dup; u++)
			dup = k->roots[u] == r;
		if (dup)
			continue;
		bool any_done = false, all_done = true;
		for (int u = s->touch_at[r]; u < s->touch_at[r + 1]; u++) {
			int i = s->touch[u];
			if (i == j)
				continue;
			if (has(bits, i))
				any_done = true;
			else
				all_done = false;
		}
		if (!any_done)
			born += s->root_bytes[r];
		if (all_done)
			dying += s->root_bytes[r];
	}
	*step = mem + born + k->scratch;
	*after = mem + born - dying;
}

static int by_peak(const void *pa, const void *pb)
{
	const state *a = pa, *b = pb;
	if (a->peak != b->peak)
		return a->peak < b->peak ? -1 : 1;
	if (a->mem != b->mem)
		return a->mem < b->mem ? -1 : 1;
	return (a->seq > b->seq) - (a->seq < b->seq);
}

size_t mc_order_for_memory(int n, const mc_order_kernel *k, int n_roots, const size_t *root_bytes,
                           int *order)
{
	for (int i = 0; i < n; i++)
		order[i] = i;
	if (n < 2)
		return 0;
	search s = { .n = n, .n_roots = n_roots, .words = (n + 63) / 64, .k = k, .root_bytes = root_bytes };
	index_touches(&s);
	index_preds(&s);
	s.zobrist = mc_xcalloc((size_t)n, sizeof(uint64_t));
	for (int i = 0; i < n; i++)
		s.zobrist[i] = mix((uint64_t)i + 1);
	size_t w = (size_t)s.words;
	/* each level's sets (bits) and states; the (parent, kernel) links of
	 * every level, to read the order back */
	uint64_t *bits = mc_xcalloc(BEAM_STATES * w, sizeof(uint64_t));
	uint64_t *next_bits = mc_xcalloc(BEAM_STATES * w, sizeof(uint64_t));
	state *cur = mc_xcalloc(BEAM_STATES, sizeof(state));
	int cap_kids = BEAM_STATES * LOOKAHEAD;
	state *kids = mc_xcalloc((size_t)cap_kids, sizeof(state));
	int table_size = 1;
	while (table_size < 2 * cap_kids)
		table_size *= 2;
	int *table = mc_xcalloc((size_t)table_size, sizeof(int));
	int *link = mc_xcalloc((size_t)n * BEAM_STATES * 2, sizeof(int));
	int n_cur = 1;
	cur[0] = (state){ 0 };
	for (int level = 0; level < n; level++) {
		int n_kids = 0;
		memset(table, -1, (size_t)table_size * sizeof(int));
		for (int si = 0; si < n_cur; si++) {
			const state *st = &cur[si];
			const uint64_t *sb = bits + (size_t)si * w;
			int looked = 0;
			for (int j = st->frontier; j < n && looked < LOOKAHEAD; j++) {
				if (has(sb, j))
					continue;
				looked++;
				if (!ready(&s, sb, j))
					continue;
				size_t step, after;
				step_bytes(&s, sb, st->mem, j, &step, &after);
				state kid = { .mem = after, .peak = step > st->peak ? step : st->peak,
				              .hash = st->hash ^ s.zobrist[j], .parent = si, .kernel = j,
				              .seq = n_kids };
				int h = (int)(kid.hash & (uint64_t)(table_size - 1));
				while (table[h] >= 0 && kids[table[h]].hash != kid.hash)
					h = (h + 1) & (table_size - 1);
				if (table[h] >= 0) {
					/* the same set: the same bytes live after it */
					state *old = &kids[table[h]];
					if (kid.peak < old->peak) {
						kid.seq = old->seq;
						*old = kid;
					}
					continue;
				}
				table[h] = n_kids;
				kids[n_kids++] = kid;
			}
		}
		if (n_kids == 0)
			break; /* unreachable: the given order is always open */
		qsort(kids, (size_t)n_kids, sizeof *kids, by_peak);
		int keep = n_kids < BEAM_STATES ? n_kids : BEAM_STATES;
		for (int i = 0; i < keep; i++) {
			state *kid = &kids[i];
			uint64_t *nb = next_bits + (size_t)i * w;
			memcpy(nb, bits + (size_t)kid->parent * w, w * sizeof(uint64_t));
			nb[kid->kernel / 64] |= (uint64_t)1 << (kid->kernel % 64);
			int f = cur[kid->parent].frontier;
			while (f < n && has(nb, f))
				f++;
			link[((size_t)level * BEAM_STATES + (size_t)i) * 2] = kid->parent;
			link[((size_t)level * BEAM_STATES + (size_t)i) * 2 + 1] = kid->kernel;
			kid->frontier = f;
			kid->parent = i;
		}
		memcpy(cur, kids, (size_t)keep * sizeof *cur);
		n_cur = keep;
		uint64_t *t = bits;
		bits = next_bits;
		next_bits = t;
	}
	size_t peak = cur[0].peak;
	for (int level = n - 1, at = 0; level >= 0; level--) {
		order[level] = link[((size_t)level * BEAM_STATES + (size_t)at) * 2 + 1];
		at = link[((size_t)level * BEAM_STATES + (size_t)at) * 2];
	}
	free(link);
	free(table);
	free(kids);
	free(cur);
	free(bits);
	free(next_bits);
	free(s.zobrist);
	free(s.touch_at);
	free(s.touch);
	free(s.pred_at);
	free(s.pred);
	return peak;
}
