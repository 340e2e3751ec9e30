/* The CUDA target: prints a compiled program (aot.h) as CUDA C++ for
 * NVIDIA GPUs, with the same kernels the C target prints (the C-family
 * printer of targets/common, in its CUDA dialect):
 *   NAME.h          constants, the device layout, the NAME_cuda API
 *   NAME.cu         one or more __global__ functions per kernel, the launch
 *                   sequence, init (weights uploaded once, the sequence
 *                   captured into a CUDA graph), run, copies, status
 *   NAME_weights.c  the frozen constants as host const arrays (the C
 *                   target's file), uploaded by NAME_cuda_init
 *   modelc_rt.h     runtime-min, whose helpers are __host__ __device__
 *                   under nvcc
 *
 * Everything lives in one device allocation of NAME_DEVICE_BYTES: the
 * status word, the weights, the activation arena, the inputs and the
 * outputs, each at an offset fixed at generation time. Kernels take its
 * base address alone, so the captured graph is valid for every run and a
 * run is one cudaGraphLaunch: no allocation, no copy, no synchronisation.
 *
 * Grid mapping: each top-level statement of a kernel becomes one launch.
 * A loop nest whose outer loops are parallel (MC_KF_PARALLEL) with
 * constant bounds is collapsed into one flat index, a thread per
 * iteration, in a grid-stride loop; the loops inside run in that thread,
 * or, where few iterations each run a long reduction, a warp per
 * iteration splits it over its lanes (see "warp reductions"). Statements
 * without such a loop (and kernels whose top-level statements share
 * mutable locals) run in one thread, or one warp for a whole-tensor
 * reduction: correct, and counted by --stats so that the lowerings that
 * need GPU forms can be found. A template statement (MC_KS_TEMPLATE) is a
 * kernel of this target's own, printed from its parameters. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../common/emit_cfamily.h"

#define STATUS_BYTES 256   /* the status word's slot at offset 0 */
#define REGION_ALIGN 256   /* arena, inputs, outputs */
#define WEIGHT_ALIGN 64
#define BLOCK 256          /* threads per block */
#define ATTN_WARPS (BLOCK / 32) /* MC_TMPL_ATTENTION: a block's warps */
#define MAX_BLOCKS 65535   /* beyond that, threads stride */
#define MAX_COLLAPSE 16

typedef struct launch {
	const mc_kstmt *stmt;           /* NULL: the kernel's whole body */
	int n_pre;
	const mc_kstmt **pre;           /* top-level immutable lets before stmt */
	int n_loops;                    /* collapsed parallel loops, outermost first */
	const mc_kstmt *loops[MAX_COLLAPSE];
	int64_t begin[MAX_COLLAPSE], extent[MAX_COLLAPSE];
	int n_lets;                     /* lets between collapsed loops, in order */
	const mc_kstmt *lets[64];
	const mc_kstmt *body;           /* innermost collapsed loop's body */
	int64_t total;                  /* iterations (1 with no loops) */
	bool warp;                      /* a warp per iteration: its reductions split over lanes */
	/* A one-split conv template whose next launch, the bias and epilogue
	 * over the output, becomes a device function its stores call. */
	const struct launch *epi;
	bool absorbed;                  /* that next launch: not launched itself */
} launch;

typedef struct {
	mc_cemit ce;
	size_t *weight_off;             /* per weight */
	size_t arena_off, *in_off, *out_off, device_bytes;
	char **guards;                  /* per kernel: condition text, or NULL */
	int *calls;                     /* per kernel: steps launching it */
	int n_launches, n_single, n_warp, n_tmpl; /* --stats */
	int n_emitted;                  /* launches in the sequence (NAME_NUM_LAUNCHES) */
	mc_strbuf first_launch;         /* its first kernel's name */
	int64_t max_total;
	/* The templates planned in several K splits, in kernel order: each
	 * one's kernel and template. Init plans each one's splits for the
	 * device (NAME_cuda.splits[i]), which its kernel's launches pass in
	 * (the template's grid and the sum after it). */
	int n_split;
	const mc_kernel **split_k;
	const mc_ktemplate **split_t;
} cuda_emitter;

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

/* ---- device layout ---- */
/* The plan index of kernel k's template of several splits, or -1. */
static int kernel_split(const cuda_emitter *c, const mc_kernel *k)
{
	for (int i = 0; i < c->n_split; i++)
		if (c->split_k[i] == k)
			return i;
	return -1;
}

/* The plan index of kernel k's template writing buffer out (-1: one
 * split, no plan). */
static int split_of_out(const cuda_emitter *c, const mc_kernel *k, int out)
{
	for (int i = 0; i < c->n_split; i++)
		if (c->split_k[i] == k && c->split_t[i]->out == out)
			return i;
	return -1;
}

static int split_index(const cuda_emitter *c, const mc_kernel *k, const mc_ktemplate *t)
{
	return split_of_out(c, k, t->out);
}

static void collect_split_templates(cuda_emitter *c)
{
	const mc_program *p = c->ce.p;
	int n = 0;
	for (int ki = 0; ki < p->n_kernels; ki++)
		for (const mc_kstmt *s = p->kernels[ki]->body; s; s = s->next)
			n += s->kind == MC_KS_TEMPLATE && s->tmpl->splits > 1;
	c->split_k = mc_xcalloc((size_t)n + 1, sizeof *c->split_k);
	c->split_t = mc_xcalloc((size_t)n + 1, sizeof *c->split_t);
	for (int ki = 0; ki < p->n_kernels; ki++)
		for (const mc_kstmt *s = p->kernels[ki]->body; s; s = s->next)
			if (s->kind == MC_KS_TEMPLATE && s->tmpl->splits > 1) {
				c->split_k[c->n_split] = p->kernels[ki];
				c->split_t[c->n_split++] = s->tmpl;
			}
}

static void plan_layout(cuda_emitter *c)
{
	const mc_program *p = c->ce.p;
	size_t off = STATUS_BYTES;
	collect_split_templates(c);
	c->weight_off = mc_xcalloc((size_t)p->n_weights + 1, sizeof(size_t));
	for (int i = 0; i < p->n_weights; i++) {
		size_t a = p->weights[i].align > WEIGHT_ALIGN ? p->weights[i].align : WEIGHT_ALIGN;
		off = round_up(off, a);
		c->weight_off[i] = off;
		off += p->weights[i].t->numel * mc_dtype_size(p->weights[i].t->dtype);
	}
	c->arena_off = off = round_up(off, REGION_ALIGN);
	off += p->arena_bytes;
	c->in_off = mc_xcalloc((size_t)p->n_inputs + 1, sizeof(size_t));
	c->out_off = mc_xcalloc((size_t)p->n_outputs + 1, sizeof(size_t));
	for (int i = 0; i < p->n_inputs; i++) {
		c->in_off[i] = off = round_up(off, REGION_ALIGN);
		off += mc_numel(&p->inputs[i].shape) * mc_dtype_size(p->inputs[i].dtype);
	}
	for (int i = 0; i < p->n_outputs; i++) {
		c->out_off[i] = off = round_up(off, REGION_ALIGN);
		off += mc_numel(&p->outputs[i].shape) * mc_dtype_size(p->outputs[i].dtype);
	}
	c->device_bytes = round_up(off, REGION_ALIGN);
}

static bool loc_offset(const cuda_emitter *c, const mc_loc *l, size_t *off)
{
	const mc_program *p = c->ce.p;
	switch (l->kind) {
	case MC_LOC_ARENA: *off = c->arena_off + l->offset; return true;
	case MC_LOC_WEIGHT:
		if (l->index < 0 || l->index >= p->n_weights)
			return false;
		*off = c->weight_off[l->index];
		return true;
	case MC_LOC_INPUT:
		if (l->index < 0 || l->index >= p->n_inputs)
			return false;
		*off = c->in_off[l->index];
		return true;
	case MC_LOC_OUTPUT:
		if (l->index < 0 || l->index >= p->n_outputs)
			return false;
		*off = c->out_off[l->index];
		return true;
	default:
		return false;
	}
}

/* ---- guards: a kernel inside If steps runs only where its conditions
 * hold, read from device memory by the kernel itself, so that the whole
 * sequence stays one graph with no host decision ---- */
static int collect_guards(cuda_emitter *c, const mc_step *steps, int n, const char *guard)
{
	const mc_program *p = c->ce.p;
	for (int i = 0; i < n; i++) {
		const mc_step *s = &steps[i];
		if (s->kind == MC_STEP_KERNEL) {
			if (s->kernel < 0 || s->kernel >= p->n_kernels) {
				mc_error("CUDA target: a step names no kernel");
				return -1;
			}
			if (c->calls[s->kernel]++) {
				mc_error("CUDA target: kernel '%s' is launched by two steps", p->kernels[s->kernel]->name);
				return -1;
			}
			c->guards[s->kernel] = guard ? mc_xstrdup(guard) : NULL;
			continue;
		}
		size_t off;
		if (!loc_offset(c, &s->cond, &off)) {
			mc_error("CUDA target: If step: condition without a valid location");
			return -1;
		}
		size_t len = (guard ? strlen(guard) : 0) + 64;
		char *then_g = mc_xmalloc(len), *else_g = mc_xmalloc(len);
		snprintf(then_g, len, "%s%sdev[%zu] != 0", guard ? guard : "", guard ? " && " : "", off);
		snprintf(else_g, len, "%s%sdev[%zu] == 0", guard ? guard : "", guard ? " && " : "", off);
		int rc = collect_guards(c, s->then_steps, s->n_then, then_g);
		if (!rc)
			rc = collect_guards(c, s->else_steps, s->n_else, else_g);
		free(then_g);
		free(else_g);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- launches ---- */
static bool is_let(const mc_kernel *k, const mc_kstmt *s)
{
	return s->kind == MC_KS_DECL && !k->vars[s->var].mutable_;
}

/* A BREAK in s's block that is not inside a loop of that block: it would
 * leave the enclosing loop. */
static bool breaks_out(const mc_kstmt *s)
{
	for (; s; s = s->next) {
		if (s->kind == MC_KS_BREAK)
			return true;
		if (s->kind == MC_KS_IF && (breaks_out(s->body) || breaks_out(s->orelse)))
			return true;
	}
	return false;
}

static bool collapsible(const mc_kstmt *s, int64_t *begin, int64_t *extent)
{
	int64_t b, e;
	if (s->kind != MC_KS_FOR || !(s->flags & MC_KF_PARALLEL) || !mc_k_is_const(s->a, &b) ||
	    !mc_k_is_const(s->b, &e))
		return false;
	*begin = b;
	*extent = e > b ? e - b : 0;
	return true;
}

/* Collapses the parallel loop nest starting at s into l. */
static void collapse(const mc_kernel *k, const mc_kstmt *s, launch *l)
{
	int64_t b, e;
	int lets_at[MAX_COLLAPSE + 1];
	lets_at[0] = 0;
	while (l->n_loops < MAX_COLLAPSE && collapsible(s, &b, &e)) {
		l->loops[l->n_loops] = s;
		l->begin[l->n_loops] = b;
		l->extent[l->n_loops++] = e;
		l->body = s->body;
		lets_at[l->n_loops] = l->n_lets;
		/* the next level: lets, then one more parallel loop and nothing else */
		const mc_kstmt *t = s->body;
		int n = l->n_lets;
		while (t && is_let(k, t) && n < (int)(sizeof l->lets / sizeof *l->lets))
			l->lets[n++] = t, t = t->next;
		if (!t || t->next || !collapsible(t, &b, &e))
			break;
		l->n_lets = n;
		s = t;
	}
	/* a loop whose body breaks out of it stays a loop */
	while (l->n_loops > 0 && breaks_out(l->body)) {
		l->n_loops--;
		l->n_lets = lets_at[l->n_loops];
		l->body = l->n_loops ? l->loops[l->n_loops - 1]->body : NULL;
	}
	l->total = 1;
	for (int i = 0; i < l->n_loops; i++)
		l->total *= l->extent[i];
}

/* ---- warp reductions ----
 * A launch with few iterations but long reduction loops (a GEMV, a
 * convolution over many channels on a small image, a global pool) gives
 * each iteration a warp instead of a thread: a top-level reduction loop of
 * its body that only accumulates one float or integer local (acc = acc +
 * e, or a maximum or minimum by select) runs with its iterations spread
 * over the 32 lanes, then the lanes combine their partial values with
 * shuffles, so that every lane goes on with the whole result. */
enum { RED_NONE, RED_ADD, RED_MAX, RED_MIN, RED_MAX_NAN, RED_MIN_NAN };
#define WARP_MAX_ITERS 65536   /* above this, a thread per iteration has parallelism enough */
#define WARP_MIN_EXTENT 32

static bool is_var(const mc_kexpr *x, int var)
{
	return x && x->kind == MC_KE_VAR && x->var == var;
}

/* The combining operation of `acc = value`, or RED_NONE. */
static int combine_of(const mc_kexpr *v, int acc)
{
	if (v->kind == MC_KE_BIN && v->op == MC_KB_ADD && (is_var(v->a, acc) || is_var(v->b, acc)))
		return RED_ADD;
	if (v->kind == MC_KE_FMA && is_var(v->c, acc))
		return RED_ADD;
	if (v->kind == MC_KE_BIN && (v->op == MC_KB_MAX || v->op == MC_KB_MIN) &&
	    (is_var(v->a, acc) || is_var(v->b, acc)))
		return v->op == MC_KB_MAX ? RED_MAX : RED_MIN;
	/* c ? x : acc with c = (x > acc) | isnan(x): a maximum (or with <, a
	 * minimum) that a NaN wins (Softmax's, ReduceMax's) */
	if (v->kind == MC_KE_SELECT && is_var(v->c, acc) && v->a->kind == MC_KE_BIN && v->a->op == MC_KB_OR) {
		const mc_kexpr *c = v->a->a, *nan = v->a->b;
		bool x_first = c->kind == MC_KE_BIN && c->b && is_var(c->b, acc) && c->a == v->b;
		bool nan_of_x = nan->kind == MC_KE_UN && nan->op == MC_KU_ISNAN && nan->a == v->b;
		if (x_first && nan_of_x && c->op == MC_KB_GT)
			return RED_MAX_NAN;
		if (x_first && nan_of_x && c->op == MC_KB_LT)
			return RED_MIN_NAN;
	}
	/* c ? x : acc with c = x > acc (a maximum) or x < acc (a minimum) */
	if (v->kind == MC_KE_SELECT && is_var(v->c, acc) && v->a->kind == MC_KE_BIN) {
		const mc_kexpr *c = v->a;
		bool x_first = c->b && is_var(c->b, acc) && c->a == v->b;
		if (x_first && c->op == MC_KB_GT)
			return RED_MAX;
		if (x_first && c->op == MC_KB_LT)
			return RED_MIN;
	}
	return RED_NONE;
}

typedef struct {
	int acc;        /* the one outer variable the loop assigns */
	int op;         /* RED_*; RED_NONE: not splittable */
	int reads;      /* reads of acc its accumulating assignments make */
	bool *inner;    /* per variable: declared inside the loop */
} red_scan;

static int reads_of(const mc_kexpr *x, int var)
{
	if (!x)
		return 0;
	return is_var(x, var) + reads_of(x->a, var) + reads_of(x->b, var) + reads_of(x->c, var);
}

static int reads_in(const mc_kstmt *s, int var)
{
	int n = 0;
	for (; s; s = s->next)
		n += reads_of(s->a, var) + reads_of(s->b, var) + reads_of(s->c, var) + reads_in(s->body, var) +
		     reads_in(s->orelse, var);
	return n;
}

/* Walks a reduction loop's body: every assignment to a variable declared
 * outside must accumulate into the same one with the same operation; no
 * store, failure or break out of the loop. */
static bool scan_reduction(const mc_kstmt *s, red_scan *r, int depth)
{
	for (; s; s = s->next) {
		switch (s->kind) {
		case MC_KS_DECL:
		case MC_KS_FOR:
			r->inner[s->var] = true;
			break;
		case MC_KS_ASSIGN:
			if (r->inner[s->var])
				break;
			if (r->acc >= 0 && r->acc != s->var)
				return false;
			r->acc = s->var;
			int op = combine_of(s->a, s->var);
			if (op == RED_NONE || (r->op != RED_NONE && r->op != op))
				return false;
			r->op = op;
			r->reads += s->a->kind == MC_KE_SELECT ? 2 : 1;
			break;
		case MC_KS_STORE:
		case MC_KS_FAIL:
			return false;
		case MC_KS_BREAK:
			if (depth == 0)
				return false;
			break;
		case MC_KS_TEMPLATE:
			return false;
		case MC_KS_IF:
			break;
		}
		if (s->body && !scan_reduction(s->body, r, depth + (s->kind == MC_KS_FOR)))
			return false;
		if (s->orelse && !scan_reduction(s->orelse, r, depth))
			return false;
	}
	return true;
}

/* The accumulator and operation if s is a reduction loop that lanes may
 * split; RED_NONE otherwise. */
static int splittable(const mc_kernel *k, const mc_kstmt *s, int *acc)
{
	int64_t b, e;
	if (s->kind != MC_KS_FOR || !(s->flags & MC_KF_REDUCE))
		return RED_NONE;
	/* only long loops pay for the shuffles (window taps have variable bounds
	 * but few iterations) */
	if (!mc_k_is_const(s->a, &b) || !mc_k_is_const(s->b, &e) || e - b < WARP_MIN_EXTENT)
		return RED_NONE;
	red_scan r = { .acc = -1, .op = RED_NONE };
	r.inner = mc_xcalloc((size_t)k->n_vars + 1, sizeof(bool));
	r.inner[s->var] = true;
	bool ok = scan_reduction(s->body, &r, 0);
	free(r.inner);
	/* acc read nowhere but in its accumulation (a partial value must not
	 * leak into anything else) */
	if (!ok || r.acc < 0 || reads_in(s->body, r.acc) != r.reads)
		return RED_NONE;
	/* floats (their order changes, as any GPU reduction's), or integer sums
	 * (the quantized models' convolutions): those are exact in any order,
	 * since the quantize pass bounds every partial sum, so bit-identical */
	const mc_kvar *v = &k->vars[r.acc];
	bool integer = v->type == MC_KT_I32 || v->type == MC_KT_I64;
	if (v->lanes > 1 || (v->type != MC_KT_F32 && v->type != MC_KT_F64 && !integer) || !v->mutable_)
		return RED_NONE;
	*acc = r.acc;
	return r.op;
}

static bool lane_loop(const mc_kernel *k, const mc_kstmt *s);

/* A kernel with no parallel loop whose body is lets, locals, splittable
 * reductions and then stores (a mean of a whole tensor, a dot product, a
 * LayerNormalization of one row): one warp runs it, lane 0 stores, or
 * the lanes share a loop of stores. Stores come last, so no lane reads
 * what another wrote. */
static bool one_warp(const mc_kernel *k)
{
	bool stored = false, split = false;
	int acc;
	for (const mc_kstmt *s = k->body; s; s = s->next) {
		switch (s->kind) {
		case MC_KS_DECL:
		case MC_KS_ASSIGN:
			break;
		case MC_KS_STORE:
			stored = true;
			break;
		case MC_KS_FOR:
			if (!stored && splittable(k, s, &acc) != RED_NONE)
				split = true;
			else if (lane_loop(k, s)) /* stores the lanes share */
				stored = true;
			else
				return false;
			break;
		default:
			return false;
		}
	}
	return split;
}

static bool wants_warp(const mc_kernel *k, const launch *l)
{
	if (!l->stmt)
		return one_warp(k);
	if (l->n_loops == 0 || l->total > WARP_MAX_ITERS)
		return false;
	int acc;
	for (const mc_kstmt *s = l->body; s; s = s->next)
		if (splittable(k, s, &acc) != RED_NONE)
			return true;
	return false;
}

/* The launches of kernel k (caller frees *out and each pre). */
static int plan_launches(const mc_kernel *k, launch **out)
{
	int n = 0, cap = 0, n_pre = 0, n_lets = 0;
	launch *ls = NULL;
	const mc_kstmt *pre[256];
	bool shared_state = false;
	for (const mc_kstmt *s = k->body; s; s = s->next) {
		if ((s->kind == MC_KS_DECL && !is_let(k, s)) || s->kind == MC_KS_ASSIGN ||
		    s->kind == MC_KS_BREAK)
			shared_state = true;
		n_lets += is_let(k, s);
	}
	/* shared locals, or very many lets to repeat in each launch: one
	 * launch runs the whole body */
	if (shared_state || !k->body || n_lets > (int)(sizeof pre / sizeof *pre)) {
		ls = mc_xcalloc(1, sizeof *ls);
		ls->total = 1;
		ls->warp = (shared_state || !k->body) && wants_warp(k, ls);
		*out = ls;
		return 1;
	}
	for (const mc_kstmt *s = k->body; s; s = s->next) {
		if (is_let(k, s)) {
			pre[n_pre++] = s;
			continue;
		}
		ls = mc_grow_array(ls, &cap, n + 1, sizeof *ls);
		launch *l = &ls[n++];
		l->stmt = s;
		l->n_pre = n_pre;
		l->pre = mc_xcalloc((size_t)n_pre + 1, sizeof *l->pre);
		memcpy(l->pre, pre, (size_t)n_pre * sizeof *pre);
		if (s->kind == MC_KS_TEMPLATE) {
			l->total = 1;
			continue;
		}
		collapse(k, s, l);
		l->warp = wants_warp(k, l);
	}
	/* a direct (one-split) template and the nest over its output (the bias
	 * and the epilogue) that follows: fused, as the lowering planned */
	for (int i = 0; i < n; i++) {
		const launch *t = &ls[i], *f = i + 1 < n ? &ls[i + 1] : NULL;
		if (!t->stmt || t->stmt->kind != MC_KS_TEMPLATE || !t->stmt->tmpl->direct)
			continue;
		const mc_ktemplate *tp = t->stmt->tmpl;
		bool ok = f && f->n_loops >= 2 && !f->warp && f->n_pre == t->n_pre;
		if (ok && tp->kind == MC_TMPL_ATTENTION) {
			/* over Y in its own order (the template's linear index) */
			int64_t all = 1;
			for (int d = 0; d < f->n_loops; d++) {
				ok = ok && f->begin[d] == 0;
				all *= f->extent[d];
			}
			ok = ok && all == tp->n * tp->hq * tp->sq * tp->hdv;
		} else if (ok && tp->kind == MC_TMPL_GEMM) {
			/* over a product's output: [batch..., rows..., P] */
			int64_t all = 1;
			for (int d = 0; d < f->n_loops; d++) {
				ok = ok && f->begin[d] == 0;
				all *= f->extent[d];
			}
			ok = ok && f->extent[f->n_loops - 1] == tp->ow && all == tp->n * tp->cout * tp->ow;
		} else if (ok) {
			int64_t want[4] = { tp->n, tp->nhwc ? tp->oh : tp->cout, tp->nhwc ? tp->ow : tp->oh,
			                    tp->nhwc ? tp->cout : tp->ow };
			ok = f->n_loops == 4;
			for (int d = 0; ok && d < 4; d++)
				ok = f->begin[d] == 0 && f->extent[d] == want[d];
		}
		if (ok) { /* put_kernel refuses a direct template left unfused */
			ls[i].epi = f;
			ls[i + 1].absorbed = true;
		}
	}
	*out = ls;
	return n;
}

/* ---- printing ---- */
static void put_launch_name(cuda_emitter *c, const mc_kernel *k, int i, int n)
{
	mc_ce_kernel_name(&c->ce, k);
	if (n > 1)
		mc_sb_printf(c->ce.sb, "_p%d", i);
}

static void put_buffer_ptr(cuda_emitter *c, int i)
{
	mc_cemit *e = &c->ce;
	const mc_kbuf *b = &e->k->bufs[i];
	const char *st = mc_ce_storage_type(b->dtype);
	const char *q = b->written ? "" : "const ";
	size_t off;
	if (!st) {
		mc_ce_fail(e, "buffer of a dtype without C storage");
		return;
	}
	if (!loc_offset(c, &b->loc, &off)) {
		mc_ce_fail(e, "buffer without a location (memory plan missing)");
		return;
	}
	if (b->written && (b->loc.kind == MC_LOC_WEIGHT || b->loc.kind == MC_LOC_INPUT)) {
		mc_ce_fail(e, b->loc.kind == MC_LOC_WEIGHT ? "kernel writes a weight" : "kernel writes a graph input");
		return;
	}
	mc_sb_printf(e->sb, "\t%s%s *%sconst b%d = (%s%s *)(dev + %zu); /* %s[%zu]", q, st,
	             mc_ce_is_restrict(e, i) ? "__restrict__ " : "", i, q, st, off,
	             mc_dtype_name(b->dtype), b->count);
	if (b->value >= 0)
		mc_sb_printf(e->sb, ", value %d", b->value);
	else if (b->loc.kind == MC_LOC_WEIGHT)
		mc_sb_puts(e->sb, ", packed");
	else
		mc_sb_puts(e->sb, ", scratch");
	mc_sb_puts(e->sb, " */\n");
}

static bool has_fail(const mc_kstmt *s)
{
	for (; s; s = s->next)
		if (s->kind == MC_KS_FAIL || has_fail(s->body) || has_fail(s->orelse))
			return true;
	return false;
}

/* One statement alone (scan and print functions walk a whole block). */
static mc_kstmt alone(const mc_kstmt *s)
{
	mc_kstmt t = *s;
	t.next = NULL;
	return t;
}

/* The pointers to the buffers that the statements stmts[0..n) (each alone)
 * and the block `block` (may be NULL) touch, but buffer `skip` (-1: none),
 * and the status word if one of them can fail: a launch or device function
 * declares only what it uses. The kernel-wide use counts stay as they are. */
static void put_buffer_ptrs(cuda_emitter *c, const mc_kstmt *const *stmts, int n, const mc_kstmt *block,
                            int skip)
{
	mc_cemit *e = &c->ce;
	const mc_kernel *k = e->k;
	int *kernel_uses = e->buf_uses, *kernel_reads = e->var_reads;
	e->buf_uses = mc_xcalloc((size_t)k->n_bufs + 1, sizeof(int));
	e->var_reads = mc_xcalloc((size_t)k->n_vars + 1, sizeof(int));
	bool fails = block && has_fail(block);
	for (int i = 0; i < n; i++) {
		mc_kstmt t = alone(stmts[i]);
		mc_ce_scan_block(e, &t);
		fails = fails || has_fail(&t);
	}
	if (block)
		mc_ce_scan_block(e, block);
	free(e->var_reads);
	e->var_reads = kernel_reads;
	if (skip >= 0)
		e->buf_uses[skip] = 0;
	for (int i = 0; i < k->n_bufs; i++)
		if (e->buf_uses[i])
			put_buffer_ptr(c, i);
	if (fails)
		mc_sb_puts(e->sb, "\tint *const st = (int *)dev; /* the status word */\n");
	free(e->buf_uses);
	e->buf_uses = kernel_uses;
}

/* ---- templates ---- */
#define TMPL_TILE 64

/* The template's results: LOOPS opens loops (closed here, a brace for each
 * `{` in it) that define mm (row of A) and pp (row of B) of the value VAL;
 * stored into the split's partial sums (in t's output order), or through
 * the epilogue EPI (one split) with the output coordinates EPI_ARGS
 * (put_epilogue_args). */
static void put_template_stores(cuda_emitter *c, const mc_ktemplate *t, const char *loops, const char *val,
                                const char *epi, const char *epi_args)
{
	mc_strbuf *sb = c->ce.sb;
	int opened = 0, depth = 0; /* the loops' braces; the depth of their body */
	for (const char *s = loops; (s = strchr(s, '{')); s++)
		opened++;
	for (const char *s = loops; (s = strstr(s, "for (")); s++)
		depth++;
	const char *tabs = "\t\t\t\t\t\t\t\t";
	int d = depth + 1;
	if (!epi)
		mc_sb_puts(sb, "\tfloat *__restrict__ const o = part + ((size_t)split * N + n) * M * P;\n");
	else
		mc_sb_puts(sb, "\t(void)split;\n");
	mc_sb_puts(sb, loops);
	mc_sb_printf(sb, "%.*sif (mm < M && pp < P) {\n", d, tabs);
	if (!epi)
		mc_sb_printf(sb, "%.*so[%s] = %s;\n", d + 1, tabs, t->nhwc ? "pp * M + mm" : "mm * P + pp", val);
	else
		mc_sb_printf(sb, "%.*s%s(dev, %s, %s); /* bias and the fused epilogue */\n", d + 1, tabs, epi, epi_args, val);
	mc_sb_printf(sb, "%.*s}\n", d, tabs);
	for (int i = 0; i < opened; i++)
		mc_sb_printf(sb, "%.*s}\n", depth, tabs);
}

/* The output coordinates a template's result (n, mm, pp) has in the nest
 * el over its output, as the epilogue's arguments, into ARGS: a
 * convolution's [n][m][oh][ow] (pp = oh * OW + ow), or [n][oh][ow][m]
 * channels-last; a product's output
 * [batch..., rows..., P], whose leading coordinates are those of n * M +
 * mm (the batch, and A's rows where they fold several dims). */
static void put_epilogue_args(cuda_emitter *c, const mc_ktemplate *t, const launch *el, mc_strbuf *args)
{
	const char *vt[MC_MAX_RANK];
	for (int i = 0; i < el->n_loops; i++)
		vt[i] = mc_ce_ctype(&c->ce, c->ce.k->vars[el->loops[i]->var].type);
	if (t->kind == MC_TMPL_CONV2D_SPLITK && t->nhwc) { /* [n][oh][ow][m] */
		mc_sb_printf(args, "(%s)n, (%s)(pp / OW), (%s)(pp %% OW), (%s)mm", vt[0], vt[1], vt[2], vt[3]);
		return;
	}
	if (t->kind == MC_TMPL_CONV2D_SPLITK) {
		mc_sb_printf(args, "(%s)n, (%s)mm, (%s)(pp / OW), (%s)(pp %% OW)", vt[0], vt[1], vt[2], vt[3]);
		return;
	}
	int r = el->n_loops;
	char coord[MC_MAX_RANK][128];
	int64_t div = 1;
	if (t->kind == MC_TMPL_ATTENTION) { /* the nest's coordinates of Y's element lin */
		for (int i = r - 1; i >= 0; i--) {
			snprintf(coord[i], sizeof coord[i], i > 0 ? "(%s)(lin / %" PRId64 " %% %" PRId64 ")" : "(%s)(lin / %" PRId64 ")",
			         vt[i], div, el->extent[i]);
			div *= el->extent[i];
		}
		for (int i = 0; i < r; i++)
			mc_sb_printf(args, i ? ", %s" : "%s", coord[i]);
		return;
	}
	for (int i = r - 2; i >= 0; i--) {
		if (i > 0)
			snprintf(coord[i], sizeof coord[i], "(%s)((n * M + mm) / %" PRId64 " %% %" PRId64 ")", vt[i], div,
			         el->extent[i]);
		else
			snprintf(coord[i], sizeof coord[i], "(%s)((n * M + mm) / %" PRId64 ")", vt[i], div);
		div *= el->extent[i];
	}
	for (int i = 0; i < r - 1; i++)
		mc_sb_printf(args, "%s, ", coord[i]);
	mc_sb_printf(args, "(%s)pp", vt[r - 1]);
}

/* The lines every template opens with: its splits (constants where it
 * has one; else the kernel's parameters, the plan NAME_cuda_init made for
 * the device, at most the planned slices), the block's output tile, its
 * split of K and its n; a convolution's (CONV) image too. */
static void put_template_block(cuda_emitter *c, const mc_ktemplate *t, bool conv)
{
	mc_strbuf *sb = c->ce.sb;
	if (split_index(c, c->ce.k, t) < 0)
		mc_sb_printf(sb, "\tenum { SPLITS = 1, KSPLIT = %" PRId64 " };\n", t->k_split);
	else /* the device's (init's plan), at most the planned slices */
		mc_sb_printf(sb, "\tconst int SPLITS = splits, KSPLIT = ksplit; /* at most %" PRId64 " splits */\n", t->splits);
	mc_sb_puts(sb, "\tconst int m0 = blockIdx.y * 64, p0 = blockIdx.x * 64;\n");
	mc_sb_puts(sb, t->n == 1 ? "\tconst int split = blockIdx.z, n = 0; /* one batch: z is the split */\n\t(void)SPLITS;\n"
	                         : "\tconst int split = blockIdx.z % SPLITS, n = blockIdx.z / SPLITS;\n");
	mc_sb_puts(sb,
		"\tconst int kbeg = split * KSPLIT, kend = kbeg + KSPLIT < K ? kbeg + KSPLIT : K;\n");
	if (conv)
		mc_sb_puts(sb, "\tconst auto *__restrict__ const xn = x + (size_t)n * CIN * H * W;\n");
}

/* One im2col element, x at (k = kx, pixel px) or 0 outside the image, as
 * `TYPE v`; IN indents it. LOAD opens the read of x (a conversion, or
 * "("). */
static void put_im2col_value(mc_strbuf *sb, const char *in, const char *type, const char *load)
{
	mc_sb_printf(sb,
		"%s%s v = 0;\n"
		"%sif (kx < kend && px < P) {\n"
		"%s\tconst int ci = kx / (KH * KW), r = kx %% (KH * KW), kh = r / KW, kw = r %% KW;\n"
		"%s\tconst int ih = ih0 + kh * DH, iw = iw0 + kw * DW;\n"
		"%s\tif ((unsigned)ih < (unsigned)H && (unsigned)iw < (unsigned)W)\n"
		"%s\t\tv = %sxn[(ci * H + ih) * W + iw]);\n"
		"%s}\n",
		in, type, in, in, in, in, in, load, in);
}

/* One operand of the tensor-core template as its loads see it: rows of M
 * (A, the weights of a convolution) or of P (B, its im2col), each thread
 * moving 8 consecutive k of row ROW (< LIM) a group. STRIDED: element
 * (row r, k) at PTR[r * row + k * kst]; one 16-byte load for the 8 where
 * `vec` (k contiguous, rows and base 16-byte aligned). IM2COL: the
 * convolution's input window (put_template_block's xn, ih0, iw0), its k
 * over (ci, kh, kw), or channels-last (kh, kw, ci). */
typedef struct {
	const char *ptr, *row_var, *lim;
	int64_t row, kst;
	bool vec, im2col;
	bool nhwc;       /* IM2COL channels-last: k runs over the taps, then CIN channels; vec: 8 channels of a tap */
	const char *lr, *lk; /* this thread's row and first k in the tile (put_template_mma) */
	bool is_float;   /* F16: float storage (a graph input), rounded as it loads */
	bool rounded;    /* TF32: the floats are TF32 already (packed weights) */
} mma_operand;

/* Operand o's 8 k of group h into its register R[h] (F16: a uint4 of
 * half pairs, the lower k in the low half; else float R[h][8]). IN
 * indents; KV is the step's first k. */
static void put_operand_load(mc_strbuf *sb, const char *in, const char *kv, const mma_operand *o, const char *R,
                             bool f16)
{
	const char *r = o->row_var, *lim = o->lim, *ptr = o->ptr;
	mc_sb_printf(sb, "%s{\n%s\tconst int kx = %s + %s + 32 * h;\n", in, in, kv, o->lk);
	if (o->im2col && o->nhwc && o->vec) {
		/* channels-last, CIN a multiple of 8: the 8 k are 8 channels of
		 * one tap, contiguous, one bounds check */
		mc_sb_printf(sb,
			"%s\tconst int tap = kx / CIN, ih = ih0 + tap / KW * DH, iw = iw0 + tap %% KW * DW;\n"
			"%s\tconst bool in = kx < kend && %s < %s && (unsigned)ih < (unsigned)H && (unsigned)iw < (unsigned)W;\n",
			in, in, r, lim);
		if (f16)
			mc_sb_printf(sb, "%s\t%s[h] = in ? *(const uint4 *)&%s[(ih * W + iw) * CIN + kx %% CIN] : make_uint4(0u, 0u, 0u, 0u);\n",
			             in, R, ptr);
		else
			mc_sb_printf(sb,
				"%s\tconst float4 z = make_float4(0.0f, 0.0f, 0.0f, 0.0f);\n"
				"%s\tconst float4 u = in ? *(const float4 *)&%s[(ih * W + iw) * CIN + kx %% CIN] : z;\n"
				"%s\tconst float4 v = in ? *(const float4 *)&%s[(ih * W + iw) * CIN + kx %% CIN + 4] : z;\n"
				"%s\t%s[h][0] = u.x, %s[h][1] = u.y, %s[h][2] = u.z, %s[h][3] = u.w;\n"
				"%s\t%s[h][4] = v.x, %s[h][5] = v.y, %s[h][6] = v.z, %s[h][7] = v.w;\n",
				in, in, ptr, in, ptr, in, R, R, R, R, in, R, R, R, R);
		mc_sb_printf(sb, "%s}\n", in);
		return;
	}
	if (o->im2col) {
		/* the 8 k are consecutive: the first one's channel and tap divided
		 * out once, then stepped (the divisions for each were most of a
		 * step's instructions); channels-last, the channel steps first */
		const char *first = o->nhwc ? "int ci = kx % CIN, kh = kx / CIN / KW, kw = kx / CIN % KW;"
		                            : "int ci = kx / (KH * KW), kh = kx % (KH * KW) / KW, kw = kx % KW;";
		const char *at = o->nhwc ? "(ih * W + iw) * CIN + ci" : "(ci * H + ih) * W + iw";
		const char *inner = o->nhwc ? "ci" : "kw", *mid = o->nhwc ? "kw" : "kh", *outer = o->nhwc ? "kh" : "ci";
		const char *inner_n = o->nhwc ? "CIN" : "KW", *mid_n = o->nhwc ? "KW" : "KH";
		mc_sb_printf(sb,
			"%s\t%s\n"
			"%s\t%s u[8];\n"
			"#pragma unroll\n"
			"%s\tfor (int i = 0; i < 8; i++) {\n"
			"%s\t\tconst int ih = ih0 + kh * DH, iw = iw0 + kw * DW;\n"
			"%s\t\tu[i] = 0;\n"
			"%s\t\tif (kx + i < kend && %s < %s && (unsigned)ih < (unsigned)H && (unsigned)iw < (unsigned)W)\n"
			"%s\t\t\tu[i] = %s%s[%s]);\n"
			"%s\t\tif (++%s == %s) {\n"
			"%s\t\t\t%s = 0;\n"
			"%s\t\t\tif (++%s == %s) {\n"
			"%s\t\t\t\t%s = 0;\n"
			"%s\t\t\t\t%s++;\n"
			"%s\t\t\t}\n"
			"%s\t\t}\n"
			"%s\t}\n",
			in, first, in, f16 ? "uint16_t" : "float", in, in, in, in, r, lim, in,
			f16 && o->is_float ? "modelc_f32_to_f16(" : "(", ptr, at, in, inner, inner_n, in, inner, in, mid, mid_n,
			in, mid, in, outer, in, in, in);
		if (f16)
			mc_sb_printf(sb, "%s\t%s[h] = make_uint4(u[0] | (unsigned)u[1] << 16, u[2] | (unsigned)u[3] << 16,\n"
			                 "%s\t                   u[4] | (unsigned)u[5] << 16, u[6] | (unsigned)u[7] << 16);\n",
			             in, R, in);
		else
			mc_sb_printf(sb, "#pragma unroll\n%s\tfor (int i = 0; i < 8; i++)\n%s\t\t%s[h][i] = u[i];\n", in, in, R);
		mc_sb_printf(sb, "%s}\n", in);
		return;
	}
	char at[160];
	snprintf(at, sizeof at, "%s[%s * %" PRId64 " + (kx + %%d) * %" PRId64 "]", ptr, r, o->row, o->kst);
	if (o->vec && f16)
		mc_sb_printf(sb, "%s\tif (%s < %s && kx + 8 <= kend)\n"
		                 "%s\t\t%s[h] = *(const uint4 *)&%s[%s * %" PRId64 " + kx];\n"
		                 "%s\telse", in, r, lim, in, R, ptr, r, o->row, in);
	else if (o->vec)
		mc_sb_printf(sb, "%s\tif (%s < %s && kx + 8 <= kend) {\n"
		                 "%s\t\tconst float4 u = *(const float4 *)&%s[%s * %" PRId64 " + kx], v = *(const float4 *)&%s[%s * %" PRId64 " + kx + 4];\n"
		                 "%s\t\t%s[h][0] = u.x, %s[h][1] = u.y, %s[h][2] = u.z, %s[h][3] = u.w;\n"
		                 "%s\t\t%s[h][4] = v.x, %s[h][5] = v.y, %s[h][6] = v.z, %s[h][7] = v.w;\n"
		                 "%s\t} else", in, r, lim, in, ptr, r, o->row, ptr, r, o->row, in, R, R, R, R, in, R, R, R, R, in);
	else
		mc_sb_printf(sb, "%s\t", in);
	if (f16) { /* two k a word, the lower in the low half */
		const char *cv = o->is_float ? "modelc_f32_to_f16(" : "(";
		mc_sb_puts(sb, o->vec ? " { /* the row's end */\n" : "{\n");
		for (int w = 0; w < 4; w++) {
			char lo[200], hi[200];
			snprintf(lo, sizeof lo, at, 2 * w);
			snprintf(hi, sizeof hi, at, 2 * w + 1);
			mc_sb_printf(sb, "%s\t\t%s[h].%c = (%s < %s && kx + %d < kend ? %s%s) : 0u) |\n"
			                 "%s\t\t          (unsigned)(%s < %s && kx + %d < kend ? %s%s) : 0u) << 16;\n",
			             in, R, "xyzw"[w], r, lim, 2 * w, cv, lo, in, r, lim, 2 * w + 1, cv, hi);
		}
		mc_sb_printf(sb, "%s\t}\n", in);
	} else {
		char ai[200];
		snprintf(ai, sizeof ai, "%s[%s * %" PRId64 " + (kx + i) * %" PRId64 "]", ptr, r, o->row, o->kst);
		mc_sb_printf(sb, "%sfor (int i = 0; i < 8; i++)%s\n%s\t\t%s[h][i] = %s < %s && kx + i < kend ? %s : 0.0f;\n",
		             o->vec ? " " : "", o->vec ? " /* the row's end */" : "", in, R, r, lim, ai);
	}
	mc_sb_printf(sb, "%s}\n", in);
}

/* Operand o's group h from its register R to shared memory S's stage ST
 * (TF32: rounded there, unless it is already). */
static void put_operand_stage(mc_strbuf *sb, const char *in, const char *st, const mma_operand *o, const char *R,
                              const char *S, bool f16)
{
	if (f16) {
		mc_sb_printf(sb, "%s*(uint4 *)&%s[%s][%s][(%s + 32 * h) / 2] = %s[h];\n", in, S, st, o->lr, o->lk, R);
		return;
	}
	char round[160];
	if (o->rounded)
		snprintf(round, sizeof round, "u[i] = __float_as_uint(%s[h][i]); /* rounded when generated */", R);
	else
		snprintf(round, sizeof round, "asm(\"cvt.rna.tf32.f32 %%0, %%1;\" : \"=r\"(u[i]) : \"f\"(%s[h][i]));", R);
	mc_sb_printf(sb,
		"%s{\n"
		"%s\tunsigned u[8]; /* rounded to TF32 */\n"
		"#pragma unroll\n"
		"%s\tfor (int i = 0; i < 8; i++)\n"
		"%s\t\t%s\n"
		"%s\t*(uint4 *)&%s[%s][%s][%s + 32 * h] = make_uint4(u[0], u[1], u[2], u[3]);\n"
		"%s\t*(uint4 *)&%s[%s][%s][%s + 32 * h + 4] = make_uint4(u[4], u[5], u[6], u[7]);\n"
		"%s}\n",
		in, in, in, in, round, in, S, st, o->lr, o->lk, in, S, st, o->lr, o->lk, in);
}

/* The template on tensor cores (mma.sync, sm_80+): F16, half inputs
 * (m16n8k16), else float32 inputs rounded to TF32 (m16n8k8); float32 sums
 * either way. Tiles of 64 rows of A (M) x 64 rows of B (P), t->k_step k at
 * a time (64 halves or 32 floats: rows of 32 words; the 64 halve the
 * steps, each of which waits on its loads: squeezenet1_1 5% faster); its
 * eight warps (2 x 4) each own 32 x 16 of the tile: 2 x 2 mma fragments.
 * Shared memory holds both tiles k-contiguous (As[m][k], Bs[p][k]), a
 * fragment's register a 32-bit word there; rows are padded so that the
 * eight rows a fragment reads fall in distinct banks. Each thread moves 8
 * consecutive k of one row (m of A, p of B) per group of 32 k: the warp's
 * global reads run along m or p, or along k where rows are k-contiguous;
 * its shared stores are 16 bytes wide. The block's lines (m0, p0, split,
 * n, kbeg, kend, the operands' pointers) are printed before. */
static void put_template_mma(cuda_emitter *c, const mc_ktemplate *t, bool f16, const mma_operand *a_in,
                             const mma_operand *b_in, const char *epi, const char *epi_args)
{
	mc_strbuf *sb = c->ce.sb;
	/* which row and k of a tile each thread moves: rows of contiguous k
	 * (vec) along k, four threads to a row's 32 k (a warp reads 8 runs of
	 * 64 bytes); others along the rows (a warp reads 32 neighbouring
	 * elements of one k: channels-first pixels) */
	mma_operand a = *a_in, b = *b_in;
	const mma_operand *A = &a, *B = &b;
	a.lr = "ar", a.lk = "ak", b.lr = "br", b.lk = "bk";
	const char *along_k = "threadIdx.x >> 2, %s = (threadIdx.x & 3) * 8";
	const char *along_rows = "threadIdx.x & 63, %s = (threadIdx.x >> 6) * 8";
	char rows[2][96];
	snprintf(rows[0], sizeof rows[0], a.vec ? along_k : along_rows, "ak");
	snprintf(rows[1], sizeof rows[1], b.vec ? along_k : along_rows, "bk");
	/* k a step (64 halves or 32 floats: a row of 32 words), in groups of
	 * 32 (a thread's 8 k of a row each); rows padded by 4 words */
	int kt = t->k_step > 0 ? t->k_step : 32, groups = kt / 32, words = f16 ? kt / 2 : kt;
	int pitch = words + 4;
	mc_sb_printf(sb,
		"\t/* on tensor cores: mma.sync %s, float32 sums */\n"
		"\t__shared__ __align__(16) unsigned As[2][64][%d];\n"
		"\t__shared__ __align__(16) unsigned Bs[2][64][%d];\n"
		"\tconst int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
		"\tconst int g = lane >> 2, tg = lane & 3; /* a fragment's row, its k (pair) */\n"
		"\tconst int wm = (warp >> 2) * 32, wp = (warp & 3) * 16;\n"
		"\tconst int ar = %s; /* this thread's row and k in A's tile */\n"
		"\tconst int br = %s; /* in B's */\n"
		"\tconst int mx = m0 + ar, px = p0 + br;\n",
		f16 ? "m16n8k16 f16" : "m16n8k8 tf32", pitch, pitch, rows[0], rows[1]);
	if (A->im2col || B->im2col)
		mc_sb_puts(sb, "\tconst int ih0 = (px / OW) * SH - PH, iw0 = (px % OW) * SW - PW;\n");
	mc_sb_printf(sb,
		"\tfloat acc[2][2][4];\n"
		"\tfor (int i = 0; i < 2; i++)\n\t\tfor (int j = 0; j < 2; j++)\n\t\t\tfor (int r = 0; r < 4; r++)\n"
		"\t\t\t\tacc[i][j][r] = 0.0f;\n"
		"\t%s ra[%d]%s, rb[%d]%s; /* the next tiles, on their way to shared memory */\n",
		f16 ? "uint4" : "float", groups, f16 ? "" : "[8]", groups, f16 ? "" : "[8]");
	for (int pass = 0; pass < 2; pass++) {
		const char *in = pass ? "\t\t\t\t" : "\t\t\t";
		char kv[32];
		snprintf(kv, sizeof kv, pass ? "k0 + %d" : "kbeg", kt);
		if (pass)
			mc_sb_printf(sb,
				"\tint stage = 0;\n"
				"\tfor (int k0 = kbeg; k0 < kend; k0 += %d) {\n"
				"\t\tconst bool more = k0 + %d < kend;\n"
				"\t\tif (more) {\n", kt, kt);
		else
			mc_sb_puts(sb, "\t{\n");
		mc_sb_printf(sb, "#pragma unroll\n%.*sfor (int h = 0; h < %d; h++) { /* this thread's groups of k */\n",
		             pass ? 3 : 2, "\t\t\t", groups);
		put_operand_load(sb, in, kv, A, "ra", f16);
		put_operand_load(sb, in, kv, B, "rb", f16);
		mc_sb_printf(sb, "%.*s}\n", pass ? 3 : 2, "\t\t\t");
		if (pass) {
			/* a step: the fragments of both tiles from shared memory, 2 x 2 mma */
			mc_sb_printf(sb,
				"\t\t}\n#pragma unroll\n"
				"\t\tfor (int kk = 0; kk < %d; kk += 8) { /* %d %s */\n"
				"\t\t\tunsigned a[2][4], b[2][2];\n"
				"#pragma unroll\n"
				"\t\t\tfor (int i = 0; i < 2; i++) {\n"
				"\t\t\t\tconst unsigned *r = &As[stage][wm + i * 16 + g][kk + tg];\n"
				"\t\t\t\ta[i][0] = r[0];\n\t\t\t\ta[i][1] = r[8 * %d];\n"
				"\t\t\t\ta[i][2] = r[4];\n\t\t\t\ta[i][3] = r[8 * %d + 4];\n"
				"\t\t\t}\n"
				"#pragma unroll\n"
				"\t\t\tfor (int j = 0; j < 2; j++) {\n"
				"\t\t\t\tconst unsigned *r = &Bs[stage][wp + j * 8 + g][kk + tg];\n"
				"\t\t\t\tb[j][0] = r[0];\n\t\t\t\tb[j][1] = r[4];\n"
				"\t\t\t}\n"
				"#pragma unroll\n"
				"\t\t\tfor (int i = 0; i < 2; i++)\n"
				"#pragma unroll\n"
				"\t\t\t\tfor (int j = 0; j < 2; j++)\n"
				"\t\t\t\t\tasm volatile(\"mma.sync.aligned.%s.row.col.f32.%s.%s.f32 ",
				words, f16 ? kt / 16 : kt / 8, f16 ? "k16 steps, two k a word" : "k8 steps", pitch, pitch,
				f16 ? "m16n8k16" : "m16n8k8", f16 ? "f16" : "tf32", f16 ? "f16" : "tf32");
			mc_sb_puts(sb,
				"{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\"\n"
				"\t\t\t\t\t             : \"+f\"(acc[i][j][0]), \"+f\"(acc[i][j][1]), \"+f\"(acc[i][j][2]), \"+f\"(acc[i][j][3])\n"
				"\t\t\t\t\t             : \"r\"(a[i][0]), \"r\"(a[i][1]), \"r\"(a[i][2]), \"r\"(a[i][3]), \"r\"(b[j][0]), \"r\"(b[j][1]));\n"
				"\t\t}\n");
			mc_sb_puts(sb, "\t\tif (more) {\n");
		}
		/* registers to the other stage (the first tiles: stage 0) */
		const char *st = pass ? "stage ^ 1" : "0";
		mc_sb_printf(sb, "#pragma unroll\n%.*sfor (int h = 0; h < %d; h++) {\n", pass ? 3 : 2, "\t\t\t", groups);
		put_operand_stage(sb, in, st, A, "ra", "As", f16);
		put_operand_stage(sb, in, st, B, "rb", "Bs", f16);
		mc_sb_printf(sb, "%.*s}\n", pass ? 3 : 2, "\t\t\t");
		if (pass)
			mc_sb_puts(sb, "\t\t}\n\t\t__syncthreads();\n\t\tstage ^= 1;\n\t}\n");
		else
			mc_sb_puts(sb, "\t}\n\t__syncthreads();\n");
	}
	/* a fragment's accumulators: r = 0, 1 at row g, columns 2 tg + r;
	 * r = 2, 3 at row g + 8 */
	put_template_stores(c, t,
		"\tfor (int i = 0; i < 2; i++)\n\t\tfor (int j = 0; j < 2; j++)\n\t\t\tfor (int r = 0; r < 4; r++) {\n"
		"\t\t\t\tconst int mm = m0 + wm + i * 16 + g + (r >> 1) * 8, pp = p0 + wp + j * 8 + tg * 2 + (r & 1);\n",
		"acc[i][j][r]", epi, epi_args);
}

/* A buffer's device address is 16-byte aligned (vector loads). */
static bool buf_aligned16(const cuda_emitter *c, int buf)
{
	size_t off;
	return loc_offset(c, &c->ce.k->bufs[buf].loc, &off) && off % 16 == 0;
}

/* MC_TMPL_GEMM (tensor cores only): a batched product, the batch's n-th
 * pair of matrices at the operands' batch strides. */
static void put_template_gemm(cuda_emitter *c, const mc_ktemplate *t, const char *epi, const char *epi_args)
{
	mc_strbuf *sb = c->ce.sb;
	const mc_kbuf *ab = &c->ce.k->bufs[t->wt], *bb = &c->ce.k->bufs[t->x];
	bool f16 = ab->dtype == MC_FLOAT16 || bb->dtype == MC_FLOAT16;
	if (!t->mma || (!f16 && (ab->dtype != MC_FLOAT || bb->dtype != MC_FLOAT))) {
		mc_ce_fail(&c->ce, "a matrix product template off tensor cores or on other storage");
		return;
	}
	mc_sb_printf(sb,
		"\t/* a matrix product: %" PRId64 " of M %" PRId64 " x K %" PRId64 " by K x P %" PRId64
		", in %" PRId64 " splits of %" PRId64 " */\n"
		"\tconst %s *__restrict__ const a = b%d;\n"
		"\tconst %s *__restrict__ const bm = b%d;\n",
		t->n, t->cout, t->cin, t->ow, t->splits, t->k_split,
		ab->dtype == MC_FLOAT16 ? "uint16_t" : "float", t->wt, bb->dtype == MC_FLOAT16 ? "uint16_t" : "float", t->x);
	if (!epi)
		mc_sb_printf(sb, "\tfloat *__restrict__ const part = b%d;\n", t->out);
	mc_sb_printf(sb, "\tenum { M = %" PRId64 ", P = %" PRId64 ", K = %" PRId64 ", N = %" PRId64 " };\n",
	             t->cout, t->ow, t->cin, t->n);
	put_template_block(c, t, false);
	mc_sb_printf(sb,
		"\tconst auto *__restrict__ const an = a + (size_t)n * %" PRId64 ";\n"
		"\tconst auto *__restrict__ const bn = bm + (size_t)n * %" PRId64 ";\n",
		t->a_st[0], t->b_st[0]);
	/* 16-byte loads of 8 k: k contiguous, every row and batch start and
	 * the buffer aligned */
	mma_operand A = { .ptr = "an", .row_var = "mx", .lim = "M", .row = t->a_st[1], .kst = t->a_st[2],
	                  .is_float = f16 && ab->dtype == MC_FLOAT, .rounded = t->wt_tf32 };
	mma_operand B = { .ptr = "bn", .row_var = "px", .lim = "P", .row = t->b_st[2], .kst = t->b_st[1],
	                  .is_float = f16 && bb->dtype == MC_FLOAT, .rounded = t->x_tf32 };
	A.vec = A.kst == 1 && A.row % 8 == 0 && t->a_st[0] % 8 == 0 && !A.is_float && buf_aligned16(c, t->wt);
	B.vec = B.kst == 1 && B.row % 8 == 0 && t->b_st[0] % 8 == 0 && !B.is_float && buf_aligned16(c, t->x);
	put_template_mma(c, t, f16, &A, &B, epi, epi_args);
}

/* MC_TMPL_CONV2D_SPLITK: an implicit GEMM, C[m][p] = sum_k wt[k][m] *
 * im2col(x)[k][p], over the split's range of k. Tiles of 64 channels x 64
 * pixels, 16 k at a time in shared memory; each of the 256 threads keeps a
 * 4 x 4 tile of accumulators. The buffer pointers are printed above. */
static void put_template_conv(cuda_emitter *c, const mc_ktemplate *t, const char *epi, const char *epi_args)
{
	mc_strbuf *sb = c->ce.sb;
	int64_t m = t->cout, pix = t->oh * t->ow, k = t->cin * t->kh * t->kw;
	mc_sb_printf(sb,
		"\t/* conv2d as an implicit GEMM: M %" PRId64 " channels, P %" PRId64 " pixels, K %" PRId64
		", in %" PRId64 " splits of %" PRId64 " */\n",
		m, pix, k, t->splits, t->k_split);
	/* --dtype fp16: x and the weights are float16, widened as they load */
	bool x16 = c->ce.k->bufs[t->x].dtype == MC_FLOAT16, w16 = c->ce.k->bufs[t->wt].dtype == MC_FLOAT16;
	const char *xl = x16 ? "modelc_f16_to_f32(" : "(", *wl = w16 ? "modelc_f16_to_f32(" : "(";
	mc_sb_printf(sb,
		"\tconst %s *__restrict__ const x = b%d;\n"
		"\tconst %s *__restrict__ const wt = b%d;\n",
		x16 ? "uint16_t" : "float", t->x, w16 ? "uint16_t" : "float", t->wt);
	if (!epi)
		mc_sb_printf(sb, "\tfloat *__restrict__ const part = b%d;\n", t->out);
	mc_sb_printf(sb,
		"\tenum { M = %" PRId64 ", P = %" PRId64 ", K = %" PRId64 ", H = %" PRId64 ", W = %" PRId64
		", KH = %" PRId64 ", KW = %" PRId64 ", OW = %" PRId64 ",\n"
		"\t       SH = %" PRId64 ", SW = %" PRId64 ", PH = %" PRId64 ", PW = %" PRId64 ", DH = %" PRId64
		", DW = %" PRId64 ", CIN = %" PRId64 ", N = %" PRId64 " };\n",
		m, pix, k, t->h, t->w, t->kh, t->kw, t->ow, t->sh, t->sw, t->ph, t->pw, t->dh, t->dw, t->cin, t->n);
	bool one_by_one = t->kh == 1 && t->kw == 1 && t->sh == 1 && t->sw == 1 && t->ph == 0 && t->pw == 0 &&
	                  t->oh == t->h && t->ow == t->w;
	if (t->nhwc && !t->mma) {
		mc_ce_fail(&c->ce, "a channels-last convolution template off tensor cores");
		return;
	}
	if (t->mma) {
		/* --dtype fp16 stores the weights as half, and activations but for
		 * the graph's inputs: a float input is rounded to half as it loads */
		if (x16 && !w16) {
			mc_ce_fail(&c->ce, "a tensor-core convolution with float weights and half inputs");
			return;
		}
		put_template_block(c, t, true);
		/* the weights' rows (K long) are 16-byte aligned when K is a
		 * multiple of 8; a 1x1 convolution's input is K rows of P pixels */
		mma_operand A = { .ptr = "wt", .row_var = "mx", .lim = "M", .row = k, .kst = 1, .vec = k % 8 == 0,
		                  .rounded = t->wt_tf32 };
		mma_operand B = { .ptr = "xn", .row_var = "px", .lim = "P", .row = 1, .kst = pix, .im2col = !one_by_one,
		                  .is_float = w16 && !x16 };
		if (t->nhwc) { /* a pixel's k: its taps' channels, contiguous; 8 aligned ones a load */
			B.nhwc = true;
			B.row = t->cin;
			B.kst = 1;
			B.vec = t->cin % 8 == 0 && !B.is_float && buf_aligned16(c, t->x);
		}
		put_template_mma(c, t, w16, &A, &B, epi, epi_args);
		return;
	}
	/* vector loads where rows are contiguous and 16-byte aligned: the
	 * packed weights when M is a multiple of 4; the input of a 1x1,
	 * stride-1, unpadded convolution (pixels are then columns of x) */
	bool a_vec = m % 4 == 0 && !w16;
	bool b_vec = one_by_one && pix % 4 == 0 && !x16;
	mc_sb_puts(sb,
		"\t__shared__ __align__(16) float As[2][16][64];\n"
		"\t__shared__ __align__(16) float Bs[2][16][64];\n"
		"\tconst int tid = threadIdx.x;\n");
	put_template_block(c, t, true);
	mc_sb_puts(sb,
		"\tconst int tm = (tid / 16) * 4, tp = (tid % 16) * 4;\n"
		"\tfloat acc[4][4];\n"
		"\tfor (int i = 0; i < 4; i++)\n\t\tfor (int j = 0; j < 4; j++)\n\t\t\tacc[i][j] = 0.0f;\n");
	if (!b_vec) /* a thread loads the same pixel column of every im2col tile */
		mc_sb_puts(sb,
			"\tconst int px = p0 + tid % 64, ih0 = (px / OW) * SH - PH, iw0 = (px % OW) * SW - PW;\n");
	/* registers that carry the next tiles from global to shared memory
	 * while the current ones are multiplied */
	mc_sb_puts(sb, a_vec ? "\tfloat4 ra;\n" : "\tfloat ra[4];\n");
	mc_sb_puts(sb, b_vec ? "\tfloat4 rb;\n" : "\tfloat rb[4];\n");
	for (int pass = 0; pass < 2; pass++) {
		/* pass 0: the first tiles; pass 1: the loop */
		const char *in = pass ? "\t\t\t" : "\t";
		const char *kv = pass ? "(k0 + 16)" : "kbeg";
		if (pass)
			mc_sb_puts(sb,
				"\tint stage = 0;\n"
				"\tfor (int k0 = kbeg; k0 < kend; k0 += 16) {\n"
				"\t\tconst bool more = k0 + 16 < kend;\n"
				"\t\tif (more) {\n");
		else
			mc_sb_puts(sb, "\t{\n");
		if (a_vec)
			mc_sb_printf(sb,
				"%s{ /* weights: 16 k x 64 channels, a float4 each */\n"
				"%s\tconst int kx = %s + tid / 16, mx = m0 + (tid %% 16) * 4;\n"
				"%s\tra = kx < kend && mx < M ? *(const float4 *)&wt[kx * M + mx] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);\n"
				"%s}\n", in, in, kv, in, in);
		else
			mc_sb_printf(sb,
				"%sfor (int i = 0; i < 4; i++) { /* weights: 16 k x 64 channels */\n"
				"%s\tconst int e = tid + i * 256, kx = %s + e / 64, mx = m0 + e %% 64;\n"
				"%s\tra[i] = kx < kend && mx < M ? %swt[kx * M + mx]) : 0.0f;\n"
				"%s}\n", in, in, kv, in, wl, in);
		if (b_vec)
			mc_sb_printf(sb,
				"%s{ /* input rows of a 1x1 convolution: 16 k x 64 pixels, a float4 each */\n"
				"%s\tconst int kx = %s + tid / 16, px = p0 + (tid %% 16) * 4;\n"
				"%s\trb = kx < kend && px < P ? *(const float4 *)&xn[kx * P + px] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);\n"
				"%s}\n", in, in, kv, in, in);
		else {
			mc_sb_printf(sb,
				"%sfor (int i = 0; i < 4; i++) { /* im2col: 16 k x 64 pixels */\n"
				"%s\tconst int kx = %s + tid / 64 + i * 4;\n", in, in, kv);
			char body[16];
			snprintf(body, sizeof body, "%s\t", in);
			put_im2col_value(sb, body, "float", xl);
			mc_sb_printf(sb, "%s\trb[i] = v;\n%s}\n", in, in);
		}
		if (pass) {
			mc_sb_puts(sb,
				"\t\t}\n"
				"#pragma unroll\n"
				"\t\tfor (int kk = 0; kk < 16; kk++) {\n"
				"\t\t\tconst float4 a = *(const float4 *)&As[stage][kk][tm], b = *(const float4 *)&Bs[stage][kk][tp];\n"
				"\t\t\tconst float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};\n"
				"#pragma unroll\n"
				"\t\t\tfor (int i = 0; i < 4; i++)\n"
				"#pragma unroll\n"
				"\t\t\t\tfor (int j = 0; j < 4; j++)\n"
				"\t\t\t\t\tacc[i][j] = fmaf(av[i], bv[j], acc[i][j]);\n"
				"\t\t}\n"
				"\t\tif (more) {\n");
		}
		/* registers to the other stage (the first tiles: stage 0) */
		const char *st = pass ? "stage ^ 1" : "0";
		if (a_vec)
			mc_sb_printf(sb, "%s*(float4 *)&As[%s][tid / 16][(tid %% 16) * 4] = ra;\n", in, st);
		else
			mc_sb_printf(sb, "%sfor (int i = 0; i < 4; i++)\n%s\tAs[%s][(tid + i * 256) / 64][(tid + i * 256) %% 64] = ra[i];\n",
			             in, in, st);
		if (b_vec)
			mc_sb_printf(sb, "%s*(float4 *)&Bs[%s][tid / 16][(tid %% 16) * 4] = rb;\n", in, st);
		else
			mc_sb_printf(sb, "%sfor (int i = 0; i < 4; i++)\n%s\tBs[%s][tid / 64 + i * 4][tid %% 64] = rb[i];\n",
			             in, in, st);
		if (pass)
			mc_sb_puts(sb, "\t\t}\n\t\t__syncthreads();\n\t\tstage ^= 1;\n\t}\n");
		else
			mc_sb_puts(sb, "\t}\n\t__syncthreads();\n");
	}
	put_template_stores(c, t, "\tfor (int i = 0; i < 4; i++)\n\t\tfor (int j = 0; j < 4; j++) {\n"
	                       "\t\t\tconst int mm = m0 + tm + i, pp = p0 + tp + j;\n",
	                    "acc[i][j]", epi, epi_args);
}

/* The attention template's operand buf: how an element loads as float
 * (half widened), and its element type. */
static const char *attn_load(const cuda_emitter *c, int buf)
{
	return c->ce.k->bufs[buf].dtype == MC_FLOAT16 ? "modelc_f16_to_f32" : "";
}

static const char *attn_type(const cuda_emitter *c, int buf)
{
	return c->ce.k->bufs[buf].dtype == MC_FLOAT16 ? "uint16_t" : "float";
}

/* MC_TMPL_ATTENTION's warps a query row: as many as its keys have chunks
 * of 32, a power of two up to the block's (a row has too few keys to
 * keep a GPU busy a warp each; more would idle). The block's other warps
 * take the next rows: ATTN_WARPS / attn_row_warps rows a block. */
static int attn_row_warps(const mc_ktemplate *t)
{
	int w = 1;
	while (w < ATTN_WARPS && 32 * w < t->skv)
		w *= 2;
	return w;
}

/* MC_TMPL_ATTENTION: attn_row_warps warps per query row (n, h, s), its
 * scaled query in shared memory, the row's warps taking its keys in
 * chunks of 32 in turn; the block's warps in groups, a row each. A chunk: lane u
 * scores key t0 + u (K's row read whole, 16 bytes a load where it can);
 * the chunk's maximum and sum by shuffles, the warp's running ones
 * rescaling its sums so far (online softmax); then each of the chunk's
 * weights, shuffled to every lane, times V's row, a lane's columns each.
 * The warps' maxima, totals and sums then combine in shared memory, a
 * thread per column, into the fused nest over Y (EPI) at Y's linear
 * index. */
static void put_template_attention(cuda_emitter *c, const mc_ktemplate *t, const char *epi, const char *epi_args)
{
	mc_strbuf *sb = c->ce.sb;
	if (!epi) {
		mc_ce_fail(&c->ce, "internal error: an attention template without the nest over its output");
		return;
	}
	bool k16 = c->ce.k->bufs[t->wt].dtype == MC_FLOAT16;
	int per = k16 ? 8 : 4; /* elements a 16-byte load */
	bool k_vec = t->k_st[3] == 1 && t->hd % per == 0 && t->k_st[0] % per == 0 && t->k_st[1] % per == 0 &&
	             t->k_st[2] % per == 0 && t->k_at % per == 0 && buf_aligned16(c, t->wt);
	int lanes_dv = (int)((t->hdv + 31) / 32);
	mc_sb_printf(sb,
		"\t/* attention: %" PRId64 " x %" PRId64 " heads (%" PRId64 " of K and V) of %" PRId64 " queries over %" PRId64
		" keys, %" PRId64 " / %" PRId64 " wide%s */\n"
		"\tconst %s *__restrict__ const q = b%d + %" PRId64 ";\n"
		"\tconst %s *__restrict__ const k = b%d + %" PRId64 ";\n"
		"\tconst %s *__restrict__ const v = b%d + %" PRId64 ";\n",
		t->n, t->hq, t->hkv, t->sq, t->skv, t->hd, t->hdv, t->mask >= 0 ? ", a mask added" : "",
		attn_type(c, t->x), t->x, t->q_at, attn_type(c, t->wt), t->wt, t->k_at, attn_type(c, t->v), t->v,
		t->v_at);
	if (t->mask >= 0)
		mc_sb_printf(sb, "\tconst %s *__restrict__ const mask = b%d;\n", attn_type(c, t->mask), t->mask);
	mc_sb_printf(sb,
		"\tenum { HQ = %" PRId64 ", GROUP = %" PRId64 ", SQ = %" PRId64 ", SKV = %" PRId64 ", D = %" PRId64
		", DV = %" PRId64 ", WARPS = %d, ROWS = %d, ALL_ROWS = %" PRId64 " }; /* WARPS a row, ROWS a block */\n"
		"\t__shared__ float qs_all[ROWS][D], part_m_all[ROWS][WARPS], part_l_all[ROWS][WARPS], "
		"part_acc_all[ROWS][WARPS][DV];\n"
		"\tconst int lane = threadIdx.x & 31, rr = (threadIdx.x >> 5) / WARPS, warp = (threadIdx.x >> 5) %% WARPS;\n"
		"\tconst int tr = threadIdx.x %% (WARPS * 32); /* the thread within its row's warps */\n"
		"\tfloat *const qs = qs_all[rr], *const part_m = part_m_all[rr], *const part_l = part_l_all[rr];\n"
		"\tfloat (*const part_acc)[DV] = part_acc_all[rr];\n"
		"\tconst int live_row = blockIdx.x * ROWS + rr, row = live_row < ALL_ROWS ? live_row : ALL_ROWS - 1;\n"
		"\tconst int s = row %% SQ, h = row / SQ %% HQ, n = row / (SQ * HQ), hk = h / GROUP;\n"
		"\tconst auto *__restrict__ const kh = k + (size_t)n * %" PRId64 " + (size_t)hk * %" PRId64 ";\n"
		"\tconst auto *__restrict__ const vh = v + (size_t)n * %" PRId64 " + (size_t)hk * %" PRId64 ";\n"
		"\tfor (int d = tr; d < D; d += WARPS * 32)\n"
		"\t\tqs[d] = %s(q[(size_t)n * %" PRId64 " + (size_t)h * %" PRId64 " + (size_t)s * %" PRId64
		" + (size_t)d * %" PRId64 "]) * %.9gf;\n"
		"\t__syncthreads();\n"
		"\tfloat m = -INFINITY, l = 0.0f, acc[%d];\n"
		"#pragma unroll\n"
		"\tfor (int j = 0; j < %d; j++)\n\t\tacc[j] = 0.0f;\n"
		"\tfor (int t0 = warp * 32; t0 < SKV; t0 += WARPS * 32) {\n"
		"\t\tconst int t = t0 + lane;\n"
		"\t\tfloat sc = -INFINITY;\n"
		"\t\tif (t < SKV) {\n"
		"\t\t\tconst auto *__restrict__ const kr = kh + (size_t)t * %" PRId64 ";\n"
		"\t\t\tfloat dot = 0.0f;\n",
		t->hq, t->hq / t->hkv, t->sq, t->skv, t->hd, t->hdv, attn_row_warps(t), ATTN_WARPS / attn_row_warps(t),
		t->n * t->hq * t->sq, t->k_st[0], t->k_st[1], t->v_st[0],
		t->v_st[1], attn_load(c, t->x), t->q_st[0], t->q_st[1], t->q_st[2], t->q_st[3], t->scale, lanes_dv,
		lanes_dv, t->k_st[2]);
	if (k_vec && k16)
		mc_sb_puts(sb,
			"#pragma unroll\n"
			"\t\t\tfor (int d = 0; d < D; d += 8) {\n"
			"\t\t\t\tconst uint4 w = *(const uint4 *)&kr[d];\n"
			"\t\t\t\tconst unsigned wv[4] = {w.x, w.y, w.z, w.w};\n"
			"#pragma unroll\n"
			"\t\t\t\tfor (int e = 0; e < 4; e++) {\n"
			"\t\t\t\t\tdot = fmaf(qs[d + 2 * e], modelc_f16_to_f32((uint16_t)(wv[e] & 0xffffu)), dot);\n"
			"\t\t\t\t\tdot = fmaf(qs[d + 2 * e + 1], modelc_f16_to_f32((uint16_t)(wv[e] >> 16)), dot);\n"
			"\t\t\t\t}\n\t\t\t}\n");
	else if (k_vec)
		mc_sb_puts(sb,
			"#pragma unroll\n"
			"\t\t\tfor (int d = 0; d < D; d += 4) {\n"
			"\t\t\t\tconst float4 w = *(const float4 *)&kr[d];\n"
			"\t\t\t\tdot = fmaf(qs[d], w.x, dot);\n"
			"\t\t\t\tdot = fmaf(qs[d + 1], w.y, dot);\n"
			"\t\t\t\tdot = fmaf(qs[d + 2], w.z, dot);\n"
			"\t\t\t\tdot = fmaf(qs[d + 3], w.w, dot);\n"
			"\t\t\t}\n");
	else
		mc_sb_printf(sb,
			"\t\t\tfor (int d = 0; d < D; d++)\n"
			"\t\t\t\tdot = fmaf(qs[d], %s(kr[(size_t)d * %" PRId64 "]), dot);\n",
			attn_load(c, t->wt), t->k_st[3]);
	if (t->mask >= 0)
		mc_sb_printf(sb,
			"\t\t\tdot += %s(mask[(size_t)n * %" PRId64 " + (size_t)h * %" PRId64 " + (size_t)s * %" PRId64
			" + (size_t)t * %" PRId64 "]);\n",
			attn_load(c, t->mask), t->m_st[0], t->m_st[1], t->m_st[2], t->m_st[3]);
	/* a chunk's weights times V: unrolled whole where the chunk is full
	 * (its 32 rows' loads in flight together) */
	char pv[1024];
	snprintf(pv, sizeof pv,
		"\t\t\tconst float pu = __shfl_sync(0xffffffffu, p, u);\n"
		"\t\t\tconst auto *__restrict__ const vr = vh + (size_t)(t0 + u) * %" PRId64 ";\n"
		"#pragma unroll\n"
		"\t\t\tfor (int j = 0; j < %d; j++)\n"
		"\t\t\t\tif (lane + 32 * j < DV)\n"
		"\t\t\t\t\tacc[j] = fmaf(pu, %s(vr[(size_t)(lane + 32 * j) * %" PRId64 "]), acc[j]);\n",
		t->v_st[2], lanes_dv, attn_load(c, t->v), t->v_st[3]);
	mc_sb_printf(sb,
		"\t\t\tsc = dot;\n"
		"\t\t}\n"
		"\t\tfloat cm = sc;\n"
		"#pragma unroll\n"
		"\t\tfor (int o = 16; o > 0; o >>= 1)\n"
		"\t\t\tcm = fmaxf(cm, __shfl_xor_sync(0xffffffffu, cm, o));\n"
		"\t\tconst float mn = fmaxf(m, cm), base = mn == -INFINITY ? 0.0f : mn; /* all masked so far: no NaN yet */\n"
		"\t\tconst float corr = expf(m - base), p = expf(sc - base);\n"
		"\t\tfloat ps = p;\n"
		"#pragma unroll\n"
		"\t\tfor (int o = 16; o > 0; o >>= 1)\n"
		"\t\t\tps += __shfl_xor_sync(0xffffffffu, ps, o);\n"
		"\t\tl = l * corr + ps;\n"
		"#pragma unroll\n"
		"\t\tfor (int j = 0; j < %d; j++)\n\t\t\tacc[j] *= corr;\n"
		"\t\tif (t0 + 32 <= SKV) {\n"
		"#pragma unroll\n"
		"\t\t\tfor (int u = 0; u < 32; u++) {\n%s\t\t\t}\n"
		"\t\t} else {\n"
		"\t\t\tfor (int u = 0; u < SKV - t0; u++) {\n%s\t\t\t}\n"
		"\t\t}\n"
		"\t\tm = mn;\n"
		"\t}\n"
		"\t/* the warps' parts, combined a thread per column */\n"
		"\tif (lane == 0) {\n\t\tpart_m[warp] = m;\n\t\tpart_l[warp] = l;\n\t}\n"
		"#pragma unroll\n"
		"\tfor (int j = 0; j < %d; j++)\n"
		"\t\tif (lane + 32 * j < DV)\n"
		"\t\t\tpart_acc[warp][lane + 32 * j] = acc[j];\n"
		"\t__syncthreads();\n"
		"\tfor (int d = tr; d < DV && live_row < ALL_ROWS; d += WARPS * 32) {\n"
		"\t\tfloat mx = -INFINITY, lt = 0.0f, at = 0.0f;\n"
		"#pragma unroll\n"
		"\t\tfor (int w = 0; w < WARPS; w++)\n\t\t\tmx = fmaxf(mx, part_m[w]);\n"
		"\t\tconst float base = mx == -INFINITY ? 0.0f : mx;\n"
		"#pragma unroll\n"
		"\t\tfor (int w = 0; w < WARPS; w++) {\n"
		"\t\t\tconst float f = expf(part_m[w] - base);\n"
		"\t\t\tlt += part_l[w] * f;\n"
		"\t\t\tat += part_acc[w][d] * f;\n"
		"\t\t}\n"
		"\t\tconst int lin = n * %" PRId64 " + h * %" PRId64 " + s * %" PRId64 " + d * %" PRId64 ";\n"
		"\t\t%s(dev, %s, at / lt); /* the fused epilogue */\n"
		"\t}\n",
		lanes_dv, pv, pv, lanes_dv, t->y_st[0], t->y_st[1], t->y_st[2], t->y_st[3], epi, epi_args);
}

/* A template statement's kernel body: EPI, its fused epilogue's name (the
 * nest el over its output), or NULL. */
static void put_template(cuda_emitter *c, const mc_ktemplate *t, const char *epi, const launch *el)
{
	mc_strbuf args = { 0 };
	if (epi)
		put_epilogue_args(c, t, el, &args);
	if (t->kind == MC_TMPL_ATTENTION)
		put_template_attention(c, t, epi, args.data ? args.data : "");
	else
		(t->kind == MC_TMPL_GEMM ? put_template_gemm : put_template_conv)(c, t, epi, args.data ? args.data : "");
	mc_sb_free(&args);
}

/* The bias-and-epilogue launch el of a one-split template, as a device
 * function of one output element: its loop variables are parameters and
 * its read of the template's result is the value passed in. */
static void put_epilogue_fn(cuda_emitter *c, int ki, int idx, int n, const launch *tl)
{
	mc_cemit *e = &c->ce;
	mc_strbuf *sb = e->sb;
	const mc_kernel *k = e->p->kernels[ki];
	const launch *el = tl->epi;
	int sbuf = tl->stmt->tmpl->out;
	mc_sb_puts(sb, "static __device__ __forceinline__ void ");
	put_launch_name(c, k, idx, n);
	mc_sb_puts(sb, "_epi(unsigned char *const dev");
	for (int d = 0; d < el->n_loops; d++) {
		const mc_kvar *v = &k->vars[el->loops[d]->var];
		mc_sb_printf(sb, ", const %s v%d", mc_ce_ctype(e, v->type), el->loops[d]->var);
	}
	mc_sb_puts(sb, ", const float part)\n{\n");
	/* the template's result comes in as `part`, not through its buffer */
	put_buffer_ptrs(c, &el->stmt, 1, NULL, sbuf);
	for (int d = 0; d < el->n_loops; d++)
		if (e->var_reads[el->loops[d]->var] == 0)
			mc_sb_printf(sb, "\t(void)v%d;\n", el->loops[d]->var);
	e->subst_buf = sbuf;
	e->subst_text = "part";
	for (int i = 0; i < el->n_lets; i++)
		mc_ce_stmt(e, el->lets[i], 1);
	mc_ce_block(e, el->body, 1);
	e->subst_text = NULL;
	mc_sb_puts(sb, "}\n\n");
}

/* A loop of a warp's body that is no reduction but whose iterations the
 * lanes may share (LayerNorm's and Softmax's stores after their sums):
 * it assigns nothing declared outside it, leaves only by its end, and no
 * buffer it stores is one it loads, so no iteration reads another's
 * result. Otherwise every lane would run all of it. */
static bool lane_loop(const mc_kernel *k, const mc_kstmt *s)
{
	if (s->kind != MC_KS_FOR)
		return false;
	bool *inner = mc_xcalloc((size_t)k->n_vars + 1, sizeof(bool));
	bool *loaded = mc_xcalloc((size_t)k->n_bufs + 1, sizeof(bool));
	bool *stored = mc_xcalloc((size_t)k->n_bufs + 1, sizeof(bool));
	inner[s->var] = true;
	mc_kexpr_mark_loads(s->a, loaded);
	mc_kexpr_mark_loads(s->b, loaded);
	bool ok = mc_kbody_closed(s->body, inner, loaded, stored);
	for (int i = 0; ok && i < k->n_bufs; i++)
		ok = !(loaded[i] && stored[i]);
	free(inner);
	free(loaded);
	free(stored);
	return ok;
}

/* Loop s with its iterations dealt to the warp's lanes (lane, lane + 32,
 * ...), WHAT its comment. */
static void put_lane_loop(mc_cemit *e, const mc_kstmt *s, int depth, const char *what)
{
	const char *vt = mc_ce_ctype(e, e->k->vars[s->var].type);
	mc_ce_indent(e, depth);
	mc_sb_printf(e->sb, "for (%s v%d = ", vt, s->var);
	mc_ce_expr(e, s->a, false);
	mc_sb_printf(e->sb, " + (%s)lane; v%d < ", vt, s->var);
	mc_ce_expr(e, s->b, false);
	mc_sb_printf(e->sb, "; v%d += 32) { /* %s */\n", s->var, what);
	mc_ce_block(e, s->body, depth + 1);
	mc_ce_indent(e, depth);
	mc_sb_puts(e->sb, "}\n");
}

/* A warp's body: top-level reduction loops split over the lanes, and
 * loops whose iterations are independent shared among them. */
static void put_warp_block(cuda_emitter *c, const mc_kstmt *s, int depth, bool one_lane_stores)
{
	mc_cemit *e = &c->ce;
	const mc_kernel *k = e->k;
	for (; s; s = s->next) {
		int acc, op = splittable(k, s, &acc);
		if (s->kind == MC_KS_STORE && one_lane_stores) {
			mc_ce_indent(e, depth);
			mc_sb_puts(e->sb, "if (lane == 0)\n");
			mc_ce_stmt(e, s, depth + 1);
			continue;
		}
		if (op == RED_NONE && lane_loop(k, s)) {
			/* the lanes' iterations interleaved; synchronised around, so
			 * that what a lane reads before or after, another's stores
			 * do not race */
			mc_ce_indent(e, depth);
			mc_sb_puts(e->sb, "__syncwarp();\n");
			put_lane_loop(e, s, depth, "shared among the warp's lanes");
			mc_ce_indent(e, depth);
			mc_sb_puts(e->sb, "__syncwarp();\n");
			continue;
		}
		if (op == RED_NONE) {
			mc_ce_stmt(e, s, depth);
			continue;
		}
		const char *at = mc_ce_ctype(e, k->vars[acc].type);
		if (op == RED_ADD) { /* the start value counts once, not once a lane */
			mc_ce_indent(e, depth);
			mc_sb_printf(e->sb, "const %s w%d = v%d;\n", at, acc, acc);
			mc_ce_indent(e, depth);
			mc_sb_printf(e->sb, "v%d = 0;\n", acc);
		}
		put_lane_loop(e, s, depth, "split over the warp's lanes");
		mc_ce_indent(e, depth);
		mc_sb_printf(e->sb, "for (int o = 16; o > 0; o >>= 1) {\n");
		mc_ce_indent(e, depth + 1);
		mc_sb_printf(e->sb, "const %s u = __shfl_xor_sync(0xffffffffu, v%d, o);\n", at, acc);
		mc_ce_indent(e, depth + 1);
		if (op == RED_ADD)
			mc_sb_printf(e->sb, "v%d = v%d + u;\n", acc, acc);
		else if (op == RED_MAX_NAN || op == RED_MIN_NAN)
			mc_sb_printf(e->sb, "v%d = ((u %s v%d) | (isnan(u) != 0)) ? u : v%d;\n", acc,
			             op == RED_MAX_NAN ? ">" : "<", acc, acc);
		else
			mc_sb_printf(e->sb, "v%d = u %s v%d ? u : v%d;\n", acc, op == RED_MAX ? ">" : "<", acc, acc);
		mc_ce_indent(e, depth);
		mc_sb_puts(e->sb, "}\n");
		if (op == RED_ADD) {
			mc_ce_indent(e, depth);
			mc_sb_printf(e->sb, "v%d = w%d + v%d;\n", acc, acc, acc);
		}
	}
}

static void put_launch(cuda_emitter *c, int ki, int idx, int n, const launch *l)
{
	mc_cemit *e = &c->ce;
	mc_strbuf *sb = e->sb;
	const mc_kernel *k = e->p->kernels[ki];
	mc_sb_printf(sb, "__global__ void __launch_bounds__(%d) ", BLOCK);
	put_launch_name(c, k, idx, n);
	/* splits, ksplit: the K splits of the kernel's template on this
	 * device, how long each (init's plan) */
	mc_sb_puts(sb, kernel_split(c, k) >= 0 ? "(unsigned char *const dev, const int splits, const int ksplit)\n{\n"
	                                         "\t(void)splits;\n\t(void)ksplit;\n"
	                                       : "(unsigned char *const dev, int, int)\n{\n");
	mc_sb_puts(sb, "\tMODELC_CUDA_WAIT_FOR_PREVIOUS();\n");
	if (l->stmt) { /* its lets and its statement; a fused template stores through its epilogue */
		const mc_kstmt **stmts = mc_xcalloc((size_t)l->n_pre + 1, sizeof *stmts);
		memcpy(stmts, l->pre, (size_t)l->n_pre * sizeof *stmts);
		stmts[l->n_pre] = l->stmt;
		put_buffer_ptrs(c, stmts, l->n_pre + 1, NULL, l->epi ? l->stmt->tmpl->out : -1);
		free(stmts);
	} else {
		put_buffer_ptrs(c, NULL, 0, k->body, -1);
	}
	const char *guard = c->guards[ki];
	if (guard)
		mc_sb_printf(sb, "\tif (!(%s)) /* an If branch not taken */\n\t\treturn;\n", guard);

	if (!l->stmt && l->warp) {
		mc_sb_puts(sb, "\tconst unsigned lane = threadIdx.x & 31u;\n"
		               "\tif (blockIdx.x != 0 || threadIdx.x >= 32) /* one warp */\n\t\treturn;\n");
		put_warp_block(c, k->body, 1, true);
		mc_sb_puts(sb, "}\n\n");
		return;
	}
	if (!l->stmt) {
		mc_sb_puts(sb, "\tif (blockIdx.x != 0 || threadIdx.x != 0) /* sequential */\n\t\treturn;\n");
		mc_ce_block(e, k->body, 1);
		mc_sb_puts(sb, "}\n\n");
		return;
	}
	if (l->stmt->kind == MC_KS_TEMPLATE) {
		char epi[512] = "";
		if (l->epi) {
			mc_strbuf name = { 0 };
			mc_strbuf *keep = e->sb;
			e->sb = &name;
			put_launch_name(c, k, idx, n);
			e->sb = keep;
			snprintf(epi, sizeof epi, "%s_epi", name.data);
			mc_sb_free(&name);
		}
		put_template(c, l->stmt->tmpl, l->epi ? epi : NULL, l->epi);
		mc_sb_puts(sb, "}\n\n");
		return;
	}
	for (int i = 0; i < l->n_pre; i++) {
		mc_ce_stmt(e, l->pre[i], 1);
		mc_sb_printf(sb, "\t(void)v%d;\n", l->pre[i]->var);
	}
	if (l->n_loops == 0) {
		mc_sb_puts(sb, "\tif (blockIdx.x != 0 || threadIdx.x != 0) /* sequential */\n\t\treturn;\n");
		mc_ce_stmt(e, l->stmt, 1);
		mc_sb_puts(sb, "}\n\n");
		return;
	}
	/* 32-bit arithmetic where the flat index and its stride fit: a
	 * division by a constant is then a multiply and a shift */
	const char *tt = l->total + (int64_t)BLOCK * MAX_BLOCKS < INT32_MAX ? "unsigned" : "unsigned long long";
	const char *suffix = strcmp(tt, "unsigned") ? "ull" : "u";
	if (l->warp) {
		/* a warp per iteration: t is the same in all its lanes */
		mc_sb_puts(sb, "\tconst unsigned lane = threadIdx.x & 31u;\n");
		mc_sb_printf(sb, "\tfor (%s t = ((%s)blockIdx.x * blockDim.x + threadIdx.x) >> 5; t < %" PRId64 "%s;"
		                 " t += ((%s)gridDim.x * blockDim.x) >> 5) {\n",
		             tt, tt, l->total, suffix, tt);
	} else {
		mc_sb_printf(sb, "\tfor (%s t = (%s)blockIdx.x * blockDim.x + threadIdx.x; t < %" PRId64 "%s;"
		                 " t += (%s)gridDim.x * blockDim.x) {\n",
		             tt, tt, l->total, suffix, tt);
	}
	if (l->n_loops > 1)
		mc_sb_printf(sb, "\t\t%s r = t;\n", tt);
	for (int i = l->n_loops - 1; i >= 0; i--) {
		const mc_kvar *v = &k->vars[l->loops[i]->var];
		const char *vt = mc_ce_ctype(e, v->type);
		const char *src = l->n_loops > 1 ? "r" : "t";
		mc_sb_printf(sb, "\t\tconst %s v%d = (%s)(", vt, l->loops[i]->var, vt);
		if (i > 0)
			mc_sb_printf(sb, "%s %% %" PRId64 "%s", src, l->extent[i], suffix);
		else
			mc_sb_puts(sb, src);
		if (l->begin[i])
			mc_sb_printf(sb, " + %" PRId64, l->begin[i]);
		mc_sb_puts(sb, ");\n");
		if (i > 0)
			mc_sb_printf(sb, "\t\tr /= %" PRId64 "%s;\n", l->extent[i], suffix);
		if (e->var_reads[l->loops[i]->var] == 0)
			mc_sb_printf(sb, "\t\t(void)v%d;\n", l->loops[i]->var);
	}
	for (int i = 0; i < l->n_lets; i++)
		mc_ce_stmt(e, l->lets[i], 2);
	if (l->warp)
		put_warp_block(c, l->body, 2, false);
	else
		mc_ce_block(e, l->body, 2);
	mc_sb_puts(sb, "\t}\n}\n\n");
}

/* The template's grid: output tiles x (batch x splits). */
static void template_grid(const mc_ktemplate *t, int64_t g[3])
{
	if (t->kind == MC_TMPL_ATTENTION) { /* a block per ATTN_WARPS / attn_row_warps query rows */
		int rows = ATTN_WARPS / attn_row_warps(t);
		g[0] = (t->n * t->hq * t->sq + rows - 1) / rows;
		g[1] = g[2] = 1;
		return;
	}
	g[0] = (t->oh * t->ow + TMPL_TILE - 1) / TMPL_TILE;
	g[1] = (t->cout + TMPL_TILE - 1) / TMPL_TILE;
	g[2] = t->n * t->splits;
}

static int64_t grid_of(const launch *l, int *block)
{
	if (l->stmt && l->stmt->kind == MC_KS_TEMPLATE) {
		int64_t g[3];
		template_grid(l->stmt->tmpl, g);
		*block = BLOCK;
		return g[0] * g[1] * g[2];
	}
	int64_t threads = (l->n_loops ? l->total : 1) * (l->warp ? 32 : 1);
	*block = threads >= BLOCK ? BLOCK : (int)((threads + 31) / 32 * 32);
	int64_t grid = (threads + *block - 1) / *block;
	return grid > MAX_BLOCKS ? MAX_BLOCKS : grid;
}

typedef struct {
	launch *ls;
	int n;
} kernel_launches;

static void put_kernel(cuda_emitter *c, int ki, kernel_launches *kl)
{
	mc_cemit *e = &c->ce;
	const mc_kernel *k = e->p->kernels[ki];
	mc_ce_begin_kernel(e, k);
	kl->n = plan_launches(k, &kl->ls);
	for (int i = 0; i < kl->n; i++)
		if (kl->ls[i].stmt && kl->ls[i].stmt->kind == MC_KS_TEMPLATE && kl->ls[i].stmt->tmpl->direct &&
		    !kl->ls[i].epi)
			mc_ce_fail(e, "internal error: a direct template without the nest over its output");
	mc_ce_kernel_comment(e, k);
	for (int i = 0; i < kl->n && !e->err; i++) {
		launch *l = &kl->ls[i];
		if (l->absorbed)
			continue;
		if (l->epi)
			put_epilogue_fn(c, ki, i, kl->n, l);
		put_launch(c, ki, i, kl->n, l);
		c->n_launches++;
		bool tmpl = l->stmt && l->stmt->kind == MC_KS_TEMPLATE;
		if (tmpl)
			c->n_tmpl++;
		else if (l->n_loops == 0 && !l->warp)
			c->n_single++;
		if (l->warp)
			c->n_warp++;
		if (l->total > c->max_total)
			c->max_total = l->total;
	}
	mc_ce_end_kernel(e);
}

/* The launches in order (kernel, launch), those with work. */
static int count_launches(cuda_emitter *c, const kernel_launches *kls)
{
	int n = 0;
	for (int ki = 0; ki < c->ce.p->n_kernels; ki++)
		for (int i = 0; c->calls[ki] && i < kls[ki].n; i++)
			if (!(kls[ki].ls[i].n_loops && kls[ki].ls[i].total == 0) && !kls[ki].ls[i].absorbed)
				n++;
	return n;
}

static void put_launch_sequence(cuda_emitter *c, kernel_launches *kls)
{
	mc_cemit *e = &c->ce;
	const mc_program *p = e->p;
	int n = c->n_emitted = count_launches(c, kls);
	{
		mc_sb_printf(e->sb, "const char *const %s_launch_names[%d] = {\n", e->name, n + 1);
		for (int ki = 0; ki < p->n_kernels; ki++)
			for (int i = 0; c->calls[ki] && i < kls[ki].n; i++) {
				const launch *l = &kls[ki].ls[i];
				if ((l->n_loops && l->total == 0) || l->absorbed)
					continue;
				int block;
				int64_t grid = grid_of(l, &block);
				mc_sb_puts(e->sb, "\t\"");
				put_launch_name(c, p->kernels[ki], i, kls[ki].n);
				mc_sb_printf(e->sb, " <<<%" PRId64 ", %d>>>%s\",\n", grid, block,
				             l->stmt && l->stmt->kind == MC_KS_TEMPLATE ? l->epi ? " (template + epilogue)" : " (template)"
				             : l->warp ? l->n_loops ? " (warps)" : " (one warp)"
				             : l->n_loops ? "" : " (one thread)");
			}
		mc_sb_puts(e->sb, "\tNULL,\n};\n\n");
	}
	mc_sb_printf(e->sb,
		"/* One launch on s. With pdl (programmatic dependent launch), the kernel\n"
		" * may be scheduled while the one before it still runs: its first statement\n"
		" * waits for that one's end and writes, so the launch's latency hides\n"
		" * behind the previous kernel's work instead of following it. */\n"
		"static cudaError_t %s_go(void (*kernel)(unsigned char *, int, int), dim3 grid, unsigned block,\n"
		"                        unsigned char *dev, const int *splits, cudaStream_t s, int pdl)\n{\n"
		"\tcudaLaunchAttribute attr;\n"
		"\tattr.id = cudaLaunchAttributeProgrammaticStreamSerialization;\n"
		"\tattr.val.programmaticStreamSerializationAllowed = 1;\n"
		"\tcudaLaunchConfig_t cfg = {};\n"
		"\tcfg.gridDim = grid;\n\tcfg.blockDim = dim3(block);\n\tcfg.stream = s;\n"
		"\tcfg.attrs = &attr;\n\tcfg.numAttrs = pdl ? 1 : 0;\n"
		"\treturn cudaLaunchKernelEx(&cfg, kernel, dev, splits ? splits[0] : 0, splits ? splits[1] : 0);\n}\n\n",
		e->name);
	mc_sb_printf(e->sb, "/* The whole inference: every launch, in order, on stream s; with ev\n"
	                    " * (profiling), an event after each; pdl for every launch but the\n"
	                    " * first (whose predecessor is the caller's). The first error, if any. */\n"
	                    "static cudaError_t %s_launch_all(unsigned char *dev, const int *splits, cudaStream_t s, cudaEvent_t *ev,\n"
	                    "                              int pdl)\n"
	                    "{\n\tcudaError_t err;\n",
	             e->name);
	int at = 0;
	for (int ki = 0; ki < p->n_kernels; ki++) {
		if (!c->calls[ki])
			continue;
		for (int i = 0; i < kls[ki].n; i++) {
			const launch *l = &kls[ki].ls[i];
			if ((l->n_loops && l->total == 0) || l->absorbed)
				continue; /* an empty loop nest, or fused into a template */
			int block;
			int64_t g[3] = { grid_of(l, &block), 1, 1 };
			if (l->stmt && l->stmt->kind == MC_KS_TEMPLATE)
				template_grid(l->stmt->tmpl, g);
			mc_sb_printf(e->sb, "\tif ((err = %s_go(", e->name);
			put_launch_name(c, p->kernels[ki], i, kls[ki].n);
			if (at == 0) { /* init asks this one whether the code has the wait */
				mc_strbuf *keep = e->sb;
				e->sb = &c->first_launch;
				put_launch_name(c, p->kernels[ki], i, kls[ki].n);
				e->sb = keep;
			}
			int si = l->stmt && l->stmt->kind == MC_KS_TEMPLATE ? split_index(c, p->kernels[ki], l->stmt->tmpl) : -1;
			int ks = kernel_split(c, p->kernels[ki]);
			if (si >= 0) /* the device's splits (init's plan) */
				mc_sb_printf(e->sb, ", dim3(%" PRId64 ", %" PRId64 ", %" PRId64 " * splits[%d])", g[0], g[1],
				             l->stmt->tmpl->n, 2 * si);
			else
				mc_sb_printf(e->sb, ", dim3(%" PRId64 ", %" PRId64 ", %" PRId64 ")", g[0], g[1], g[2]);
			if (ks >= 0)
				mc_sb_printf(e->sb, ", %d, dev, splits + %d, s, %s)) != cudaSuccess)\n\t\treturn err;\n", block,
				             2 * ks, at == 0 ? "0" : "pdl");
			else
				mc_sb_printf(e->sb, ", %d, dev, NULL, s, %s)) != cudaSuccess)\n\t\treturn err;\n", block,
				             at == 0 ? "0" : "pdl");
			mc_sb_printf(e->sb, "\tif (ev)\n\t\tcudaEventRecord(ev[%d], s);\n", ++at);
		}
	}
	if (n == 0)
		mc_sb_puts(e->sb, "\t(void)dev;\n\t(void)s;\n\t(void)ev;\n\t(void)err;\n");
	if (c->n_split == 0)
		mc_sb_puts(e->sb, "\t(void)splits; /* no template of several splits */\n");
	if (n <= 1)
		mc_sb_puts(e->sb, "\t(void)pdl; /* one launch: nothing to overlap */\n");
	mc_sb_puts(e->sb, "\treturn cudaSuccess;\n}\n\n");
}

/* ---- NAME.h ---- */
static void put_header(cuda_emitter *c)
{
	mc_cemit *e = &c->ce;
	const mc_program *p = e->p;
	mc_strbuf *sb = e->sb;
	const char *N = e->upper, *n = e->name;
	mc_sb_printf(sb, "/* %s.h: generated by modelc " MC_VERSION " (cuda target); do not edit.\n", n);
	mc_ce_io_comment(e, "Inputs (row-major, in the model's own layout)", p->inputs, p->n_inputs);
	mc_ce_io_comment(e, "Outputs", p->outputs, p->n_outputs);
	mc_sb_puts(sb, " */\n");
	mc_sb_printf(sb, "#ifndef %s_MODELC_H\n#define %s_MODELC_H\n\n#include <cuda_runtime_api.h>\n\n"
	                 "#include \"modelc_rt.h\"\n\n", N, N);
	mc_sb_puts(sb, "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n");
	mc_sb_printf(sb,
		"/* One device allocation holds everything: the status word, the weights,\n"
		" * the activation arena, the inputs and the outputs, at fixed offsets. */\n"
		"#define %s_DEVICE_BYTES %zuu\n#define %s_DEVICE_ALIGN %du\n"
		"#define %s_WEIGHT_BYTES %zuu\n#define %s_ARENA_OFFSET %zuu\n#define %s_ARENA_BYTES %zuu\n"
		"#define %s_NUM_INPUTS %d\n#define %s_NUM_OUTPUTS %d\n#define %s_NUM_LAUNCHES %d\n\n",
		N, c->device_bytes, N, REGION_ALIGN, N, p->weight_bytes, N, c->arena_off, N, p->arena_bytes,
		N, p->n_inputs, N, p->n_outputs, N, c->n_emitted);
	mc_sb_puts(sb, "/* Per input and output: name, element type (MODELC_*), rank, shape\n"
	               " * (an initializer list; absent for scalars), elements, bytes, and its\n"
	               " * offset in the device allocation. */\n");
	mc_ce_io_macros(e, "INPUT", p->inputs, p->n_inputs);
	for (int i = 0; i < p->n_inputs; i++)
		mc_sb_printf(sb, "#define %s_INPUT_%d_OFFSET %zuu\n", N, i, c->in_off[i]);
	mc_ce_io_macros(e, "OUTPUT", p->outputs, p->n_outputs);
	for (int i = 0; i < p->n_outputs; i++)
		mc_sb_printf(sb, "#define %s_OUTPUT_%d_OFFSET %zuu\n", N, i, c->out_off[i]);
	mc_sb_puts(sb, "\n/* Names, types and shapes, as tables. */\n");
	if (p->n_inputs > 0)
		mc_sb_printf(sb, "extern const modelc_tensor_desc %s_inputs[%s_NUM_INPUTS];\n", n, N);
	if (p->n_outputs > 0)
		mc_sb_printf(sb, "extern const modelc_tensor_desc %s_outputs[%s_NUM_OUTPUTS];\n", n, N);
	mc_sb_printf(sb, "extern const char *const %s_launch_names[%s_NUM_LAUNCHES + 1]; /* NULL-terminated */\n", n, N);
	mc_sb_printf(sb,
		"\n/* A loaded model: the caller owns the struct (no global state; two\n"
		" * structs, two independent models on the GPU). */\n"
		"typedef struct {\n"
		"\tunsigned char *device;  /* %s_DEVICE_BYTES of device memory */\n"
		"\tcudaStream_t stream;    /* every launch and copy goes here */\n"
		"\tcudaGraphExec_t graph;  /* the captured inference; NULL without graphs */\n"
		"\tint pdl;                /* launches overlap (programmatic dependent launch) */\n"
		"\tint owns_device;        /* init allocated device (free releases it) */\n"
		"\tcudaError_t error;      /* the failed CUDA call's error after MODELC_ERR_CUDA */\n"
		"\tint sms;                /* the multiprocessors the K splits are planned for */\n"
		"\tint splits[%d];         /* per template of K splits: how many on this device, how long */\n"
		"} %s_cuda;\n\n"
		"/* init flags: launch the kernels one by one instead of a CUDA graph;\n"
		" * no programmatic dependent launch (which init turns on where the\n"
		" * kernels run as sm_90 or newer code: each may then be scheduled while\n"
		" * the one before it finishes); plan the K splits for n multiprocessors\n"
		" * instead of the device's own count, which init reads (tests, tuning). */\n"
		"#define %s_CUDA_NO_GRAPH 1u\n#define %s_CUDA_NO_PDL 2u\n"
		"#define %s_CUDA_SMS(n) ((unsigned)(n) << 8) /* n < 2^24 */\n\n",
		N, 2 * (c->n_split > 0 ? c->n_split : 1), n, N, N, N);
	mc_sb_printf(sb,
		"/* Loads the model: device is %s_DEVICE_BYTES of device memory aligned to\n"
		" * %s_DEVICE_ALIGN (cudaMalloc's are), or NULL to have init allocate it;\n"
		" * uploads the weights, and captures the whole inference into a CUDA graph\n"
		" * (unless flags has %s_CUDA_NO_GRAPH; %s_CUDA_NO_PDL: see above).\n"
		" * stream may be 0 (the default stream). Synchronises stream before it\n"
		" * returns. Returns MODELC_OK, or\n"
		" * MODELC_ERR_NULL_ARGUMENT, MODELC_ERR_MISALIGNED, MODELC_ERR_CUDA (m->error\n"
		" * says why; m is then released). */\n"
		"int %s_cuda_init(%s_cuda *m, void *device, cudaStream_t stream, unsigned flags);\n\n"
		"/* Runs one inference on m->stream: the inputs are read from, and the\n"
		" * outputs written to, their places in device memory (%s_cuda_input /\n"
		" * %s_cuda_output). Asynchronous: one graph launch, no allocation, no\n"
		" * copy, no synchronisation. MODELC_OK or MODELC_ERR_CUDA. */\n"
		"int %s_cuda_run(%s_cuda *m);\n\n"
		"/* Device addresses of input i and output i (NULL if i is out of range):\n"
		" * fill or read them with your own kernels or copies on m->stream. */\n"
		"void *%s_cuda_input(const %s_cuda *m, int i);\n"
		"void *%s_cuda_output(const %s_cuda *m, int i);\n\n"
		"/* Copy helpers, asynchronous on m->stream: host must stay valid (and,\n"
		" * for get_output, unread) until the stream reaches them; pinned host\n"
		" * memory makes them truly asynchronous. MODELC_OK, MODELC_ERR_NULL_ARGUMENT\n"
		" * (also for i out of range) or MODELC_ERR_CUDA. */\n"
		"int %s_cuda_set_input(%s_cuda *m, int i, const void *host);\n"
		"int %s_cuda_get_output(%s_cuda *m, int i, void *host);\n\n"
		"/* Waits for m->stream, then returns the status of the runs since the last\n"
		" * call: MODELC_OK, MODELC_ERR_BAD_INDEX or MODELC_ERR_BAD_INPUT (invalid\n"
		" * input data; outputs unspecified), or MODELC_ERR_CUDA; and clears it. */\n"
		"int %s_cuda_status(%s_cuda *m);\n\n"
		"/* Profiling: runs once kernel by kernel (no graph), recording event ev[0]\n"
		" * before the first launch and ev[i + 1] after launch i; ev holds\n"
		" * %s_NUM_LAUNCHES + 1 events the caller created. %s_launch_names[i]\n"
		" * names launch i and its grid. */\n"
		"int %s_cuda_run_profiled(%s_cuda *m, cudaEvent_t *ev);\n\n"
		"/* Releases the graph and, if init allocated it, the device memory. */\n"
		"void %s_cuda_free(%s_cuda *m);\n\n",
		N, N, N, N, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, N, n, n, n, n, n);
	mc_sb_puts(sb, "#ifdef __cplusplus\n}\n#endif\n\n");
	mc_sb_printf(sb, "#endif /* %s_MODELC_H */\n", N);
}

/* ---- NAME.cu: the host side ---- */
static void put_host(cuda_emitter *c)
{
	mc_cemit *e = &c->ce;
	const mc_program *p = e->p;
	mc_strbuf *sb = e->sb;
	const char *N = e->upper, *n = e->name;
	/* the weights table: host array, device offset, bytes */
	int n_up = 0;
	for (int i = 0; i < p->n_weights; i++)
		if (p->weights[i].t->numel > 0)
			n_up++;
	if (n_up > 0) {
		mc_sb_printf(sb, "static const struct {\n\tconst void *host;\n\tsize_t offset, bytes;\n"
		                 "} %s_uploads[%d] = {\n", n, n_up);
		for (int i = 0; i < p->n_weights; i++) {
			const mc_tensor *t = p->weights[i].t;
			if (t->numel > 0)
				mc_sb_printf(sb, "\t{%s_w%d, %zu, %zu},\n", n, i, c->weight_off[i],
				             t->numel * mc_dtype_size(t->dtype));
		}
		mc_sb_puts(sb, "};\n\n");
	}
	if (c->n_split > 0) {
		mc_sb_printf(sb, "/* the templates of K splits, as modelc_cuda_splits takes them (most: the\n"
		                 " * slices their partial sums have room for) */\n"
		                 "static const struct {\n\tint64_t tiles, k;\n\tint step, mma;\n\tint64_t most;\n"
		                 "} %s_split_plans[%d] = {\n", n, c->n_split);
		for (int i = 0; i < c->n_split; i++) {
			const mc_ktemplate *t = c->split_t[i];
			mc_sb_printf(sb, "\t{%" PRId64 ", %" PRId64 ", %d, %d, %" PRId64 "},\n", t->tiles,
			             t->cin * t->kh * t->kw, t->k_step, t->mma, t->splits);
		}
		mc_sb_puts(sb, "};\n\n");
	}
	mc_sb_printf(sb,
		"static int %s_cuda_fail(%s_cuda *m, cudaError_t err)\n{\n"
		"\tm->error = err;\n\treturn MODELC_ERR_CUDA;\n}\n\n", n, n);
	mc_sb_printf(sb,
		"void %s_cuda_free(%s_cuda *m)\n{\n"
		"\tif (!m)\n\t\treturn;\n"
		"\tif (m->graph)\n\t\tcudaGraphExecDestroy(m->graph);\n"
		"\tif (m->owns_device && m->device)\n\t\tcudaFree(m->device);\n"
		"\tm->graph = NULL;\n\tm->device = NULL;\n\tm->owns_device = 0;\n}\n\n", n, n);
	mc_sb_printf(sb,
		"/* Captures the launch sequence on a private stream (capture cannot use\n"
		" * the legacy default stream) into a graph. */\n"
		"static cudaError_t %s_capture(%s_cuda *m)\n{\n"
		"\tcudaStream_t cs;\n\tcudaGraph_t g = NULL;\n"
		"\tcudaError_t err = cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking);\n"
		"\tif (err != cudaSuccess)\n\t\treturn err;\n"
		"\terr = cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal);\n"
		"\tif (err == cudaSuccess) {\n"
		"\t\terr = %s_launch_all(m->device, m->splits, cs, NULL, m->pdl);\n"
		"\t\tcudaError_t end = cudaStreamEndCapture(cs, &g);\n"
		"\t\tif (err == cudaSuccess)\n\t\t\terr = end;\n\t}\n"
		"\tif (err == cudaSuccess)\n\t\terr = cudaGraphInstantiate(&m->graph, g, 0);\n"
		"\tif (err == cudaSuccess)\n\t\terr = cudaGraphUpload(m->graph, m->stream);\n"
		"\tif (g)\n\t\tcudaGraphDestroy(g);\n"
		"\tcudaStreamDestroy(cs);\n\treturn err;\n}\n\n", n, n, n);
	mc_sb_printf(sb,
		"int %s_cuda_init(%s_cuda *m, void *device, cudaStream_t stream, unsigned flags)\n{\n"
		"\tif (!m)\n\t\treturn MODELC_ERR_NULL_ARGUMENT;\n"
		"\tmemset(m, 0, sizeof *m);\n\tm->stream = stream;\n"
		"\tif (device && (uintptr_t)device %% %s_DEVICE_ALIGN != 0)\n\t\treturn MODELC_ERR_MISALIGNED;\n"
		"\tcudaError_t err = cudaSuccess;\n"
		"\tif (device) {\n\t\tm->device = (unsigned char *)device;\n\t} else {\n"
		"\t\terr = cudaMalloc((void **)&m->device, %s_DEVICE_BYTES);\n"
		"\t\tif (err != cudaSuccess) {\n\t\t\tm->device = NULL;\n\t\t\treturn %s_cuda_fail(m, err);\n\t\t}\n"
		"\t\tm->owns_device = 1;\n\t}\n"
		"\terr = cudaMemsetAsync(m->device, 0, %d, stream); /* the status word */\n",
		n, n, N, N, n, STATUS_BYTES);
	/* the K splits for this device's multiprocessors (or the flags'
	 * count): the launches' grids and the kernels' parameters */
	mc_sb_puts(sb,
		"\tm->sms = (int)(flags >> 8);\n"
		"\tint gpu = 0;\n"
		"\tif (err == cudaSuccess && m->sms == 0)\n\t\terr = cudaGetDevice(&gpu);\n"
		"\tif (err == cudaSuccess && m->sms == 0)\n"
		"\t\terr = cudaDeviceGetAttribute(&m->sms, cudaDevAttrMultiProcessorCount, gpu);\n");
	if (c->n_split > 0)
		mc_sb_printf(sb,
			"\tfor (int i = 0; i < %d; i++) {\n"
			"\t\tint64_t len;\n"
			"\t\tm->splits[2 * i] = modelc_cuda_splits(%s_split_plans[i].tiles, %s_split_plans[i].k,\n"
			"\t\t                                      %s_split_plans[i].step, %s_split_plans[i].mma, m->sms,\n"
			"\t\t                                      %s_split_plans[i].most, &len);\n"
			"\t\tm->splits[2 * i + 1] = (int)len;\n\t}\n",
			c->n_split, n, n, n, n, n);
	if (n_up > 0)
		mc_sb_printf(sb,
			"\tfor (size_t i = 0; err == cudaSuccess && i < sizeof %s_uploads / sizeof *%s_uploads; i++)\n"
			"\t\terr = cudaMemcpyAsync(m->device + %s_uploads[i].offset, %s_uploads[i].host,\n"
			"\t\t                      %s_uploads[i].bytes, cudaMemcpyHostToDevice, stream);\n",
			n, n, n, n, n);
	if (c->first_launch.data)
		mc_sb_printf(sb,
			"\t/* the kernels wait for their predecessor only in sm_90+ code (a\n"
			"\t * library built for sm_87 alone runs on newer GPUs through its PTX,\n"
			"\t * without the wait: no overlap then) */\n"
			"\tcudaFuncAttributes fa;\n"
			"\tif (err == cudaSuccess && !(flags & %s_CUDA_NO_PDL)) {\n"
			"\t\tif (cudaFuncGetAttributes(&fa, %s) == cudaSuccess)\n"
			"\t\t\tm->pdl = fa.ptxVersion >= 90;\n"
			"\t\telse\n\t\t\t(void)cudaGetLastError(); /* not an error of init: no overlap */\n\t}\n",
			N, c->first_launch.data);
	mc_sb_printf(sb,
		"\tif (err == cudaSuccess)\n\t\terr = cudaStreamSynchronize(stream);\n"
		"\tif (err == cudaSuccess && !(flags & %s_CUDA_NO_GRAPH))\n\t\terr = %s_capture(m);\n"
		"\tif (err == cudaSuccess)\n\t\terr = cudaStreamSynchronize(stream);\n"
		"\tif (err != cudaSuccess) {\n\t\t%s_cuda_free(m);\n\t\treturn %s_cuda_fail(m, err);\n\t}\n"
		"\treturn MODELC_OK;\n}\n\n", N, n, n, n);
	mc_sb_printf(sb,
		"int %s_cuda_run(%s_cuda *m)\n{\n"
		"\tif (!m || !m->device)\n\t\treturn MODELC_ERR_NULL_ARGUMENT;\n"
		"\tcudaError_t err;\n"
		"\tif (m->graph) {\n\t\terr = cudaGraphLaunch(m->graph, m->stream);\n\t} else {\n"
		"\t\terr = %s_launch_all(m->device, m->splits, m->stream, NULL, m->pdl);\n\t}\n"
		"\treturn err == cudaSuccess ? MODELC_OK : %s_cuda_fail(m, err);\n}\n\n", n, n, n, n);
	mc_sb_printf(sb,
		"int %s_cuda_run_profiled(%s_cuda *m, cudaEvent_t *ev)\n{\n"
		"\tif (!m || !m->device || !ev)\n\t\treturn MODELC_ERR_NULL_ARGUMENT;\n"
		"\tcudaError_t err = cudaEventRecord(ev[0], m->stream);\n"
		"\tif (err == cudaSuccess) /* no overlap: each kernel's own time */\n"
		"\t\terr = %s_launch_all(m->device, m->splits, m->stream, ev, 0);\n"
		"\treturn err == cudaSuccess ? MODELC_OK : %s_cuda_fail(m, err);\n}\n\n", n, n, n, n);
	mc_sb_printf(sb, "static const size_t %s_in_at[%d] = {", n, p->n_inputs + 1);
	for (int i = 0; i < p->n_inputs; i++)
		mc_sb_printf(sb, "%s_INPUT_%d_OFFSET, ", N, i);
	mc_sb_printf(sb, "0};\nstatic const size_t %s_in_bytes[%d] = {", n, p->n_inputs + 1);
	for (int i = 0; i < p->n_inputs; i++)
		mc_sb_printf(sb, "%s_INPUT_%d_BYTES, ", N, i);
	mc_sb_printf(sb, "0};\nstatic const size_t %s_out_at[%d] = {", n, p->n_outputs + 1);
	for (int i = 0; i < p->n_outputs; i++)
		mc_sb_printf(sb, "%s_OUTPUT_%d_OFFSET, ", N, i);
	mc_sb_printf(sb, "0};\nstatic const size_t %s_out_bytes[%d] = {", n, p->n_outputs + 1);
	for (int i = 0; i < p->n_outputs; i++)
		mc_sb_printf(sb, "%s_OUTPUT_%d_BYTES, ", N, i);
	mc_sb_puts(sb, "0};\n\n");
	mc_sb_printf(sb,
		"void *%s_cuda_input(const %s_cuda *m, int i)\n{\n"
		"\treturn m && m->device && i >= 0 && i < %s_NUM_INPUTS ? m->device + %s_in_at[i] : NULL;\n}\n\n"
		"void *%s_cuda_output(const %s_cuda *m, int i)\n{\n"
		"\treturn m && m->device && i >= 0 && i < %s_NUM_OUTPUTS ? m->device + %s_out_at[i] : NULL;\n}\n\n",
		n, n, N, n, n, n, N, n);
	mc_sb_printf(sb,
		"int %s_cuda_set_input(%s_cuda *m, int i, const void *host)\n{\n"
		"\tvoid *d = %s_cuda_input(m, i);\n"
		"\tif (!d || !host)\n\t\treturn MODELC_ERR_NULL_ARGUMENT;\n"
		"\tcudaError_t err = cudaMemcpyAsync(d, host, %s_in_bytes[i], cudaMemcpyHostToDevice, m->stream);\n"
		"\treturn err == cudaSuccess ? MODELC_OK : %s_cuda_fail(m, err);\n}\n\n"
		"int %s_cuda_get_output(%s_cuda *m, int i, void *host)\n{\n"
		"\tvoid *d = %s_cuda_output(m, i);\n"
		"\tif (!d || !host)\n\t\treturn MODELC_ERR_NULL_ARGUMENT;\n"
		"\tcudaError_t err = cudaMemcpyAsync(host, d, %s_out_bytes[i], cudaMemcpyDeviceToHost, m->stream);\n"
		"\treturn err == cudaSuccess ? MODELC_OK : %s_cuda_fail(m, err);\n}\n\n",
		n, n, n, n, n, n, n, n, n, n);
	mc_sb_printf(sb,
		"int %s_cuda_status(%s_cuda *m)\n{\n"
		"\tif (!m || !m->device)\n\t\treturn MODELC_ERR_NULL_ARGUMENT;\n"
		"\tint st = 0;\n"
		"\tcudaError_t err = cudaMemcpyAsync(&st, m->device, sizeof st, cudaMemcpyDeviceToHost, m->stream);\n"
		"\tif (err == cudaSuccess)\n\t\terr = cudaMemsetAsync(m->device, 0, sizeof st, m->stream);\n"
		"\tif (err == cudaSuccess)\n\t\terr = cudaStreamSynchronize(m->stream);\n"
		"\tif (err != cudaSuccess)\n\t\treturn %s_cuda_fail(m, err);\n"
		"\treturn st;\n}\n", n, n, n);
}

/* ---- NAME.cu ---- */
static int put_source(cuda_emitter *c)
{
	mc_cemit *e = &c->ce;
	const mc_program *p = e->p;
	mc_strbuf *sb = e->sb;
	mc_sb_printf(sb, "/* %s.cu: generated by modelc " MC_VERSION " (cuda target); do not edit. */\n", e->name);
	mc_sb_printf(sb, "#include <cuda_runtime.h>\n\n#include \"%s.h\"\n\n", e->name);
	mc_sb_puts(sb, "/* Element indices: wide enough for every buffer of the model. */\n");
	mc_sb_printf(sb, "typedef %s %s;\n\n", e->idx64 ? "int64_t" : "int32_t", e->idx_type);
	/* No early griddepcontrol.launch_dependents: the next kernel then starts
	 * as this one's blocks exit. Triggered at the start instead, its blocks
	 * sat waiting on the SMs this one still used (H200, fp16: resnet18 318
	 * us against 201, squeezenet1_1 173 against 154). */
	mc_sb_puts(sb, "/* Every kernel's first statement. Under programmatic dependent launch\n"
	               " * (sm_90 and newer; see _go below) the kernel is launched before the one\n"
	               " * before it has finished; this waits until that one's writes are\n"
	               " * visible. Launched without it, the wait returns at once. */\n"
	               "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n"
	               "#define MODELC_CUDA_WAIT_FOR_PREVIOUS() asm volatile(\"griddepcontrol.wait;\" ::: \"memory\")\n"
	               "#else\n#define MODELC_CUDA_WAIT_FOR_PREVIOUS() ((void)0)\n#endif\n\n");
	bool any_fail = false;
	for (int i = 0; i < p->n_kernels; i++)
		any_fail = any_fail || has_fail(p->kernels[i]->body);
	if (any_fail)
		mc_sb_puts(sb, "/* A failing check records the first status; the run goes on but its\n"
	               " * outputs are unspecified (NAME_cuda_status reports it). */\n"
	               "static __device__ __forceinline__ void modelc_cuda_fail(int *st, int code)\n"
	               "{\n\tatomicCAS(st, 0, code);\n}\n\n");
	mc_ce_weight_decls(e, "/* Frozen constants, on the host (%s_weights.c); init uploads them. */\n"
	                      "extern \"C\" {\n", "}\n\n");
	mc_ce_desc_table(e, "in", "inputs", p->inputs, p->n_inputs);
	mc_ce_desc_table(e, "out", "outputs", p->outputs, p->n_outputs);

	c->guards = mc_xcalloc((size_t)p->n_kernels + 1, sizeof(char *));
	c->calls = mc_xcalloc((size_t)p->n_kernels + 1, sizeof(int));
	if (collect_guards(c, p->steps, p->n_steps, NULL))
		return -1;
	kernel_launches *kls = mc_xcalloc((size_t)p->n_kernels + 1, sizeof *kls);
	for (int i = 0; i < p->n_kernels && !e->err; i++)
		if (c->calls[i])
			put_kernel(c, i, &kls[i]);
	if (!e->err) {
		put_launch_sequence(c, kls);
		put_host(c);
	}
	for (int i = 0; i < p->n_kernels; i++) {
		for (int j = 0; j < kls[i].n; j++)
			free((void *)kls[i].ls[j].pre);
		free(kls[i].ls);
	}
	free(kls);
	return e->err;
}

/* MC_KE_SPLITS of the template writing buf: its kernel's parameter */
static void put_splits_of(mc_cemit *e, int buf)
{
	if (split_of_out((const cuda_emitter *)e, e->k, buf) >= 0)
		mc_sb_printf(e->sb, "((%s)splits)", e->idx_type);
	else
		mc_ce_fail(e, "the splits of a template of one split");
}

int mc_emit_cuda(const mc_program *p, const mc_compile_opts *o, const char *dir)
{
	cuda_emitter c = { 0 };
	if (mc_ce_init(&c.ce, p, o, "CUDA target"))
		return -1;
	c.ce.cuda = true;
	c.ce.put_splits = put_splits_of;
	plan_layout(&c);
	mc_strbuf header = { 0 }, source = { 0 }, weights = { 0 };
	/* the source first: it plans the launches the header counts */
	c.ce.sb = &source;
	int rc = put_source(&c);
	c.ce.sb = &header;
	if (!rc)
		put_header(&c);
	c.ce.sb = &weights;
	if (!rc)
		rc = mc_ce_weights(&c.ce);
	if (!rc && o->stats)
		fprintf(stderr, "modelc: stats: cuda: %d launches (%d templates, %d in one thread, %d a warp per output),"
		                " widest %" PRId64 " threads, device memory %zu bytes\n",
		        c.n_launches, c.n_tmpl, c.n_single, c.n_warp, c.max_total, c.device_bytes);
	const char *name = c.ce.name;
	if (!rc) {
		size_t n = strlen(dir) + 16;
		char *path = mc_xmalloc(n);
		snprintf(path, n, "%s/modelc_rt.h", dir);
		rc = mc_write_if_changed(path, mc_runtime_min_h, strlen(mc_runtime_min_h));
		free(path);
	}
	if (!rc)
		rc = mc_ce_write_file(dir, name, ".h", &header);
	if (!rc)
		rc = mc_ce_write_file(dir, name, ".cu", &source);
	if (!rc)
		rc = mc_ce_write_file(dir, name, "_weights.c", &weights);
	mc_sb_free(&header);
	mc_sb_free(&source);
	mc_sb_free(&weights);
	for (int i = 0; c.guards && i < p->n_kernels; i++)
		free(c.guards[i]);
	free(c.guards);
	free(c.calls);
	free(c.weight_off);
	free(c.in_off);
	free(c.out_off);
	free(c.split_k);
	free(c.split_t);
	mc_sb_free(&c.first_launch);
	mc_ce_fini(&c.ce);
	return rc ? -1 : 0;
}
