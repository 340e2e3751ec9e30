/* --threads: which of a kernel's loops the workers split, decided once
 * after lowering (the plan sizes the scratch copies it asks for; the C
 * emitter prints the ranges). A loop of less work than min_work (its
 * statement runs) stays on the calling thread, unless marked
 * MC_KF_SPLIT_ANY (kir.h).
 *
 * A top-level parallel loop of constant bounds splits where its
 * iterations share nothing but what they read: no failure or break out of
 * the loop, no assignment to a variable declared outside it
 * (mc_kbody_closed), and no mutable local before it at the top level (a
 * range recomputes the lets before it, not locals). Scratch the loop
 * stores into is the one thing its iterations may share in the serial
 * code: a Winograd tile row's transforms, a packed block. Scratch the
 * loop stores into but never loads is its iterations' slots (another nest
 * reads them), as an output is: independent iterations (MC_KF_PARALLEL)
 * store into different places. Scratch it stores into and loads is each
 * iteration's own; where the loop alone touches it, each iteration reads
 * only what it stored, so each worker may have a copy: the range then
 * splits into exactly `workers` chunks, chunk c running on copy c. Such
 * scratch touched outside the loop too keeps the loop serial.
 *
 * A top-level loop of one iteration (a batch of one) first becomes a let
 * and its body top-level statements, whose loops may split in turn. */
#include <stdlib.h>

#include "kir.h"

/* A parallel loop of constant bounds [*from, *from + *count). */
bool mc_ksplit_const_parallel(const mc_kstmt *s, int64_t *from, int64_t *count)
{
	int64_t to;
	if (s->kind != MC_KS_FOR || !(s->flags & MC_KF_PARALLEL) || !mc_k_is_const(s->a, from) ||
	    !mc_k_is_const(s->b, &to))
		return false;
	*count = to - *from;
	return true;
}

/* The nest split as one range: loop s, then while the range has fewer
 * than SPLIT_CHUNKS iterations a worker and the body is lets and one more
 * such loop, that loop too (a batch of one, an image's rows: each worker
 * a few rows). */
#define SPLIT_CHUNKS 8
static bool split_nest(const mc_kernel *k, const mc_kstmt *s, int workers, mc_ksplit *sp)
{
	int64_t from, n;
	if (!mc_ksplit_const_parallel(s, &from, &n))
		return false;
	sp->depth = 0;
	sp->levels[sp->depth++] = s;
	sp->count = n;
	while (sp->depth < MC_KSPLIT_LEVELS && sp->count < SPLIT_CHUNKS * workers) {
		const mc_kstmt *t = sp->levels[sp->depth - 1]->body;
		while (t && t->kind == MC_KS_DECL && !k->vars[t->var].mutable_)
			t = t->next;
		if (!t || t->next || !mc_ksplit_const_parallel(t, &from, &n))
			break;
		sp->levels[sp->depth++] = t;
		sp->count *= n;
	}
	return sp->count >= 2;
}

/* The statements statement s runs, each loop's body counted its trips'
 * times (SPLIT_GUESS_TRIPS where its bounds are not constants), capped at
 * WORK_CAP. */
#define SPLIT_GUESS_TRIPS 16
#define WORK_CAP ((int64_t)1 << 40)
static int64_t list_work(const mc_kstmt *s);
static int64_t stmt_work(const mc_kstmt *s)
{
	int64_t from, to;
	switch (s->kind) {
	case MC_KS_FOR: {
		int64_t trips = mc_k_is_const(s->a, &from) && mc_k_is_const(s->b, &to) ? to - from : SPLIT_GUESS_TRIPS;
		int64_t body = list_work(s->body);
		return trips > 0 && body > WORK_CAP / trips ? WORK_CAP : 1 + trips * body;
	}
	case MC_KS_IF: {
		int64_t a = list_work(s->body), b = list_work(s->orelse);
		return 1 + (a > b ? a : b);
	}
	case MC_KS_TEMPLATE:
		return WORK_CAP; /* a library's product, a micro-kernel: large */
	default:
		return 1;
	}
}

static int64_t list_work(const mc_kstmt *s)
{
	int64_t w = 0;
	for (; s && w < WORK_CAP; s = s->next)
		w += stmt_work(s);
	return w < WORK_CAP ? w : WORK_CAP;
}

static void mark_list(const mc_kstmt *s, bool *loaded, bool *stored);

/* Marks the buffers statement s loads and stores. */
static void mark_access(const mc_kstmt *s, bool *loaded, bool *stored)
{
	if (s->kind == MC_KS_STORE)
		stored[s->buf] = true;
	mc_kexpr_mark_loads(s->a, loaded);
	mc_kexpr_mark_loads(s->b, loaded);
	mc_kexpr_mark_loads(s->c, loaded);
	mark_list(s->body, loaded, stored);
	mark_list(s->orelse, loaded, stored);
}

static void mark_list(const mc_kstmt *s, bool *loaded, bool *stored)
{
	for (; s; s = s->next)
		mark_access(s, loaded, stored);
}

/* What a split loop does with a scratch buffer. */
enum { NOT_STORED, SLOTS, PRIVATE };

/* Whether top-level loop s splits (sp), and where it does, what it does
 * with each scratch buffer (use, n_bufs: SLOTS, PRIVATE or NOT_STORED). */
static bool split_loop(const mc_kernel *k, const mc_kstmt *s, int workers, int64_t min_work, mc_ksplit *sp,
                       int *use)
{
	if (!split_nest(k, s, workers, sp))
		return false;
	/* a hand-over to the workers would cost more */
	if (!(s->flags & MC_KF_SPLIT_ANY) && stmt_work(s) < min_work)
		return false;
	for (const mc_kstmt *t = k->body; t != s; t = t->next)
		if (t->kind == MC_KS_DECL && k->vars[t->var].mutable_)
			return false;
	size_t nb = (size_t)k->n_bufs + 1;
	bool *inner = mc_xcalloc((size_t)k->n_vars + 1, sizeof(bool));
	bool *loaded = mc_xcalloc(nb, sizeof(bool)), *stored = mc_xcalloc(nb, sizeof(bool));
	bool *out_loaded = mc_xcalloc(nb, sizeof(bool)), *out_stored = mc_xcalloc(nb, sizeof(bool));
	inner[s->var] = true;
	bool ok = mc_kbody_closed(s->body, inner, loaded, stored);
	for (const mc_kstmt *t = k->body; t; t = t->next)
		if (t != s) /* the rest of the kernel */
			mark_access(t, out_loaded, out_stored);
	bool copies = false;
	for (int i = 0; ok && i < k->n_bufs; i++) {
		const mc_kbuf *b = &k->bufs[i];
		/* scratch the loop only stores into is its iterations' slots,
		 * as an output's; scratch it stores and loads, their own */
		use[i] = !stored[i] || b->value >= 0 || b->transient ? NOT_STORED : loaded[i] ? PRIVATE : SLOTS;
		ok = use[i] != PRIVATE || (!out_loaded[i] && !out_stored[i] && b->loc.kind == MC_LOC_NONE);
		copies |= use[i] == PRIVATE;
	}
	free(inner);
	free(loaded);
	free(stored);
	free(out_loaded);
	free(out_stored);
	if (!ok)
		return false;
	sp->chunks = copies ? (int)(sp->count < workers ? sp->count : workers) : 0;
	return true;
}

/* Whether statements s break out of the loop around them. */
static bool breaks_out(const mc_kstmt *s)
{
	for (; s; s = s->next)
		if (s->kind == MC_KS_BREAK || (s->kind == MC_KS_IF && (breaks_out(s->body) || breaks_out(s->orelse))))
			return true;
	return false;
}

/* Each top-level loop of one iteration becomes a let of its variable,
 * its body following it at the top level. */
static void flatten_single_loops(mc_kernel *k)
{
	for (mc_kstmt *s = k->body; s; s = s->next) {
		int64_t from, to;
		if (s->kind != MC_KS_FOR || !mc_k_is_const(s->a, &from) || !mc_k_is_const(s->b, &to) ||
		    to - from != 1 || breaks_out(s->body))
			continue;
		mc_kstmt *body = s->body, *last = body;
		while (last && last->next)
			last = last->next;
		s->kind = MC_KS_DECL;
		s->b = NULL;
		s->body = NULL;
		s->flags = 0;
		k->vars[s->var].is_loop = false;
		if (last) {
			last->next = s->next;
			s->next = body;
		}
	}
}

void mc_ksplit_plan(mc_kpool *pool, mc_kernel *k, int workers, int64_t min_work)
{
	k->n_splits = 0;
	k->splits = NULL;
	/* a kernel that writes its output over its input stores, in order,
	 * only where it has read already (--optimize memory): no split */
	if (workers < 2 || k->inplace_input0)
		return;
	flatten_single_loops(k);
	int n = 0;
	for (const mc_kstmt *s = k->body; s; s = s->next)
		n++;
	mc_ksplit *splits = mc_kpool_alloc(pool, (size_t)(n ? n : 1) * sizeof *splits);
	int *use = mc_xcalloc((size_t)k->n_bufs + 1, sizeof(int));
	for (const mc_kstmt *s = k->body; s; s = s->next) {
		mc_ksplit *sp = &splits[k->n_splits];
		if (!split_loop(k, s, workers, min_work, sp, use))
			continue;
		k->n_splits++;
		for (int i = 0; i < k->n_bufs; i++) {
			/* none laid over an input that other workers may still
			 * be reading (it was filled in order) */
			if (use[i] != NOT_STORED)
				k->bufs[i].grows_over = -1;
			if (use[i] == PRIVATE) /* a copy a chunk */
				k->bufs[i].copies = sp->chunks;
		}
	}
	free(use);
	k->splits = k->n_splits ? splits : NULL;
}
