/* The C target: prints a compiled program (aot.h) as C99 sources that need
 * only stdint.h, stddef.h, string.h and math.h:
 *   NAME.h          constants, descriptor tables, the run function
 *   NAME.c          one static function per kernel, and NAME_run
 *   NAME_weights.c  the frozen constants as const arrays (flash)
 *   modelc_rt.h     runtime-min: status codes, conversions, safe integer ops
 * Output is a pure function of the program: no dates, no paths, no
 * pointer values, so an unchanged model rewrites nothing. */
#include <stdlib.h>
#include <string.h>

#include "../common/emit_cfamily.h"

/* runtime-min/modelc_rt.h, embedded at build time (scripts/embed-text). */
extern const char mc_runtime_min_h[];
/* runtime-min's pthread parallel_for (--threads), the same way. */
extern const char mc_threads_pthread_h[], mc_threads_pthread_c[];

typedef mc_cemit emitter;

/* One pointer per buffer the kernel touches, typed by its storage. */
/* copy: where not NULL, the C expression of the scratch copy (a chunk's,
 * --threads) the pointer is to. */
static void put_buffer_ptr(emitter *e, int i, const char *copy, bool *uses_arena, bool *uses_in, bool *uses_out)
{
	const mc_kbuf *b = &e->k->bufs[i];
	const char *st = mc_ce_storage_type(b->dtype);
	const char *q = b->written ? "" : "const ";
	if (!st) {
		mc_ce_fail(e, "buffer of a dtype without C storage");
		return;
	}
	mc_sb_printf(e->sb, "\t%s%s *%sconst b%d = ", q, st, mc_ce_is_restrict(e, i) ? "restrict " : "", i);
	switch (b->loc.kind) {
	case MC_LOC_ARENA:
		if (e->p->n_pools > 1)
			mc_sb_printf(e->sb, "(%s%s *)(pool[%d] + %zu)", q, st, b->loc.index, b->loc.offset);
		else
			mc_sb_printf(e->sb, "(%s%s *)(arena + %zu)", q, st, b->loc.offset);
		if (copy)
			mc_sb_printf(e->sb, " + (size_t)%s * %zu", copy, b->count);
		mc_sb_puts(e->sb, ";");
		*uses_arena = true;
		break;
	case MC_LOC_WEIGHT: {
		const mc_weight *w = mc_ce_weight_of(e, b->loc.index);
		if (!w || b->written) {
			mc_ce_fail(e, !w ? "buffer names a missing weight" : "kernel writes a weight");
			return;
		}
		if (w->t->numel == 0)
			mc_sb_puts(e->sb, "NULL; /* empty weight */");
		else
			mc_sb_printf(e->sb, "%s_w%d;", e->name, b->loc.index);
		break;
	}
	case MC_LOC_INPUT:
		if (b->written) {
			mc_ce_fail(e, "kernel writes a graph input");
			return;
		}
		mc_sb_printf(e->sb, "(const %s *)in[%d];", st, b->loc.index);
		*uses_in = true;
		break;
	case MC_LOC_OUTPUT:
		mc_sb_printf(e->sb, "(%s%s *)out[%d];", q, st, b->loc.index);
		*uses_out = true;
		break;
	default:
		mc_ce_fail(e, "buffer without a location (memory plan missing)");
		return;
	}
	mc_sb_printf(e->sb, " /* %s[%zu]", mc_dtype_name(b->dtype), b->count);
	if (b->value >= 0)
		mc_sb_printf(e->sb, ", value %d", b->value);
	else
		mc_sb_puts(e->sb, ", scratch");
	mc_sb_puts(e->sb, " */\n");
}

/* --code-section: where the kernels and run functions go */
static void put_section(emitter *e)
{
	if (e->p->code_section[0])
		mc_sb_printf(e->sb, "__attribute__((section(\"%s\"))) ", e->p->code_section);
}

/* The kernel's buffer pointers; copies: leave out the scratch with
 * copies (a chunk's, declared in its loop). */
static void put_buffer_ptrs(emitter *e, bool *uses_arena, bool *uses_in, bool *uses_out, bool voided, bool copies)
{
	for (int i = 0; i < e->k->n_bufs; i++)
		if (e->buf_uses[i] && !(copies && e->k->bufs[i].copies > 1)) {
			put_buffer_ptr(e, i, NULL, uses_arena, uses_in, uses_out);
			if (voided) /* read in a part only, or not in this part */
				mc_sb_printf(e->sb, "\t(void)b%d;\n", i);
		}
}

/* --threads: the kernel's m-th split (aot/ksplit.c) as
 * NAME_kN_tM(task, begin, end), begin and end iterations of its range, or
 * with chunks, chunks (each its iterations on its scratch copies):
 * iteration f is the levels' indices, the last level's varying fastest,
 * then their lets and the last level's body. */
static void put_part(emitter *e, const mc_ksplit *sp, int m)
{
	const mc_kernel *k = e->k;
	const mc_kstmt *const *levels = sp->levels;
	int depth = sp->depth;
	put_section(e);
	mc_sb_puts(e->sb, "static void ");
	mc_ce_kernel_name(e, k);
	mc_sb_printf(e->sb, "_t%d(void *task, int64_t begin, int64_t end)\n{\n", m);
	mc_sb_printf(e->sb, "\tconst %s_task *t = (const %s_task *)task;\n"
	                    "\tunsigned char *arena = t->arena;\n\tconst void *const *in = t->in;\n"
	                    "\tvoid *const *out = t->out;\n", e->name, e->name);
	bool ua = false, ui = false, uo = false;
	put_buffer_ptrs(e, &ua, &ui, &uo, true, sp->chunks > 0);
	mc_sb_puts(e->sb, "\t(void)arena;\n\t(void)in;\n\t(void)out;\n");
	for (const mc_kstmt *t = k->body; t != levels[0]; t = t->next)
		if (t->kind == MC_KS_DECL) {
			mc_ce_stmt(e, t, 1);
			mc_sb_printf(e->sb, "\t(void)v%d;\n", t->var);
		}
	int ind = 1;
	if (sp->chunks > 0) {
		mc_sb_puts(e->sb, "\tfor (int64_t c = begin; c < end; c++) {\n");
		for (int i = 0; i < k->n_bufs; i++)
			if (e->buf_uses[i] && k->bufs[i].copies > 1) {
				mc_sb_puts(e->sb, "\t");
				put_buffer_ptr(e, i, "c", &ua, &ui, &uo);
				/* the copies of another part's loop too */
				mc_sb_printf(e->sb, "\t\t(void)b%d;\n", i);
			}
		mc_sb_printf(e->sb, "\t\tfor (int64_t f = c * %lld / %d; f < (c + 1) * %lld / %d; f++) {\n",
		             (long long)sp->count, sp->chunks, (long long)sp->count, sp->chunks);
		ind = 2;
	} else {
		mc_sb_puts(e->sb, "\tfor (int64_t f = begin; f < end; f++) {\n");
	}
	const char *tabs = ind == 2 ? "\t\t\t" : "\t\t";
	if (depth > 1)
		mc_sb_printf(e->sb, "%sint64_t r = f;\n", tabs);
	for (int i = depth - 1; i >= 0; i--) {
		int64_t from, n;
		mc_ksplit_const_parallel(levels[i], &from, &n);
		const mc_kvar *v = &k->vars[levels[i]->var];
		const char *type = mc_ce_ctype(e, v->type);
		if (depth == 1)
			mc_sb_printf(e->sb, "%sconst %s v%d = (%s)(%lld + f);\n", tabs, type, levels[i]->var, type,
			             (long long)from);
		else if (i > 0)
			mc_sb_printf(e->sb, "%sconst %s v%d = (%s)(%lld + r %% %lld);\n%sr /= %lld;\n", tabs, type,
			             levels[i]->var, type, (long long)from, (long long)n, tabs, (long long)n);
		else
			mc_sb_printf(e->sb, "%sconst %s v%d = (%s)(%lld + r);\n", tabs, type, levels[i]->var, type,
			             (long long)from);
	}
	for (int i = 0; i + 1 < depth; i++) /* the lets between the levels */
		for (const mc_kstmt *t = levels[i]->body; t != levels[i + 1]; t = t->next)
			mc_ce_stmt(e, t, ind + 1);
	mc_ce_block(e, levels[depth - 1]->body, ind + 1);
	/* as every kernel (modelc_rt.h): a part GCC judged const would be
	 * called once for two kernels' calls, or its stores moved */
	mc_sb_puts(e->sb, ind == 2 ? "\t\t}\n\t}\n\tMODELC_KERNEL_END();\n}\n\n" : "\t}\n\tMODELC_KERNEL_END();\n}\n\n");
}

static void put_kernel(emitter *e, const mc_kernel *k)
{
	mc_ce_begin_kernel(e, k);
	/* the splits' range functions first, then the kernel, which calls
	 * them in their loops' places */
	int parts = k->n_splits;
	for (int m = 0; m < parts; m++)
		put_part(e, &k->splits[m], m);
	mc_ce_kernel_comment(e, k);
	/* --isa cortex-m: each kernel a function of its own. Inlined into the
	 * run function (each is called once), its loops get GCC 12's register
	 * allocation of the whole model: 10% more instructions on the MLPerf
	 * Tiny keyword spotter's 14 registers. */
	const mc_isa *isa = e->p->target.isa;
	put_section(e);
	mc_sb_puts(e->sb, isa && isa->kind == MC_ISA_CORTEX_M ? "MODELC_NOINLINE static int " : "static int ");
	mc_ce_kernel_name(e, k);
	bool pools = e->p->n_pools > 1;
	bool threads = e->p->threads > 1;
	mc_sb_puts(e->sb, pools ? "(unsigned char *const *pool, const void *const *in, void *const *out"
	                        : "(unsigned char *arena, const void *const *in, void *const *out");
	if (e->p->dyn) /* --dim NAME=LO..HI: the size, MC_KE_DIM */
		mc_sb_printf(e->sb, ", const %s dim", e->idx_type);
	mc_sb_puts(e->sb, threads ? ", const modelc_threads *threads)\n{\n" : ")\n{\n");
	if (e->p->dyn)
		mc_sb_puts(e->sb, "\t(void)dim;\n");
	bool uses_arena = parts > 0, uses_in = parts > 0, uses_out = parts > 0;
	put_buffer_ptrs(e, &uses_arena, &uses_in, &uses_out, parts > 0, false);
	if (!uses_arena)
		mc_sb_puts(e->sb, pools ? "\t(void)pool;\n" : "\t(void)arena;\n");
	if (!uses_in)
		mc_sb_puts(e->sb, "\t(void)in;\n");
	if (!uses_out)
		mc_sb_puts(e->sb, "\t(void)out;\n");
	if (threads && !parts)
		mc_sb_puts(e->sb, "\t(void)threads;\n");
	int m = 0;
	for (const mc_kstmt *s = k->body; s; s = s->next) {
		if (m == parts || k->splits[m].levels[0] != s) {
			mc_ce_stmt(e, s, 1);
			if (parts && s->kind == MC_KS_DECL) /* maybe read in the parts only */
				mc_sb_printf(e->sb, "\t(void)v%d;\n", s->var);
			continue;
		}
		mc_sb_printf(e->sb, "\t{\n\t\t%s_task task = { arena, in, out };\n\t\tif (threads)\n"
		                    "\t\t\tthreads->parallel_for(threads->ctx, ", e->name);
		mc_ce_kernel_name(e, k);
		/* a range of chunks, or of iterations */
		int64_t n = k->splits[m].chunks > 0 ? k->splits[m].chunks : k->splits[m].count;
		mc_sb_printf(e->sb, "_t%d, &task, %lld);\n\t\telse\n\t\t\t", m, (long long)n);
		mc_ce_kernel_name(e, k);
		mc_sb_printf(e->sb, "_t%d(&task, 0, %lld);\n\t}\n", m, (long long)n);
		m++;
	}
	mc_sb_puts(e->sb, "\tMODELC_KERNEL_END();\n\treturn MODELC_OK;\n}\n\n");
	mc_ce_end_kernel(e);
}

/* ---- the run function ---- */
static void put_cond(emitter *e, const mc_loc *l)
{
	switch (l->kind) {
	case MC_LOC_ARENA:
		if (e->p->n_pools > 1)
			mc_sb_printf(e->sb, "pool[%d][%zu] != 0", l->index, l->offset);
		else
			mc_sb_printf(e->sb, "((const unsigned char *)arena)[%zu] != 0", l->offset);
		return;
	case MC_LOC_INPUT:
		mc_sb_printf(e->sb, "((const uint8_t *)inputs[%d])[0] != 0", l->index);
		return;
	case MC_LOC_OUTPUT:
		mc_sb_printf(e->sb, "((const uint8_t *)outputs[%d])[0] != 0", l->index);
		return;
	case MC_LOC_WEIGHT:
		if (mc_ce_is_cond_weight(e, l->index)) {
			mc_sb_printf(e->sb, "%s_w%d[0] != 0", e->name, l->index);
			return;
		}
		break;
	default:
		break;
	}
	mc_ce_fail(e, "If step: condition without a valid location");
}

/* --dim NAME=LO..HI: kernel i of the program built at HI, through the
 * version its size runs (NAME_kI_version, a table by size). */
static void put_dyn_call(emitter *e, int i, int depth)
{
	const mc_dynamic *dyn = e->p->dyn;
	const mc_dyn_kernel *of = &dyn->of[i];
	if (of->n_versions > 1) {
		mc_ce_indent(e, depth);
		mc_sb_printf(e->sb, "switch (%s_version_%d[dim - %lld]) {\n", e->name, i, (long long)dyn->lo);
	}
	for (int v = 0; v < of->n_versions; v++) {
		int ind = depth + (of->n_versions > 1);
		if (of->n_versions > 1) {
			mc_ce_indent(e, depth);
			mc_sb_printf(e->sb, v + 1 < of->n_versions ? "case %d:\n" : "default: /* %d */\n", v);
		}
		mc_ce_indent(e, ind);
		mc_sb_puts(e->sb, "status = ");
		mc_ce_kernel_name(e, e->p->kernels[of->first + v]);
		mc_sb_puts(e->sb, "((unsigned char *)arena, inputs, outputs, dim);\n");
		if (of->n_versions > 1) {
			mc_ce_indent(e, ind);
			mc_sb_puts(e->sb, "break;\n");
		}
	}
	if (of->n_versions > 1) {
		mc_ce_indent(e, depth);
		mc_sb_puts(e->sb, "}\n");
	}
	mc_ce_indent(e, depth);
	mc_sb_puts(e->sb, "if (status != MODELC_OK)\n");
	mc_ce_indent(e, depth + 1);
	mc_sb_puts(e->sb, "return status;\n");
}

/* A dim as C over int64_t d: its nonzero terms, then / den. */
static void put_poly(emitter *e, const mc_dyn_poly *q)
{
	static const char *const power[3] = { "", "d", "d * d" };
	bool any = false;
	if (q->den != 1)
		mc_sb_puts(e->sb, "(");
	for (int k = 2; k >= 0; k--) {
		long long c = (long long)q->c[k];
		if (c == 0 && (k > 0 || any))
			continue;
		if (any)
			mc_sb_puts(e->sb, c < 0 ? " - " : " + ");
		else if (c < 0)
			mc_sb_puts(e->sb, "-");
		c = c < 0 ? -c : c;
		if (k == 0)
			mc_sb_printf(e->sb, "%lld", c);
		else if (c == 1)
			mc_sb_puts(e->sb, power[k]);
		else
			mc_sb_printf(e->sb, "%lld * %s", c, power[k]);
		any = true;
	}
	if (q->den != 1)
		mc_sb_printf(e->sb, ") / %lld", (long long)q->den);
}

/* --dim NAME=LO..HI: the version tables, and NAME_input_shape and
 * NAME_output_shape (each dim a polynomial of the size). */
static void put_dyn_tables(emitter *e)
{
	const mc_dynamic *dyn = e->p->dyn;
	int64_t n = dyn->hi - dyn->lo + 1;
	mc_sb_printf(e->sb, "/* --dim %s=%lld..%lld: the version of each kernel that each size runs. */\n",
	             dyn->name, (long long)dyn->lo, (long long)dyn->hi);
	for (int i = 0; i < dyn->n_of; i++) {
		if (dyn->of[i].n_versions < 2)
			continue;
		mc_sb_printf(e->sb, "static const unsigned char %s_version_%d[%lld] = {", e->name, i, (long long)n);
		for (int64_t d = 0; d < n; d++)
			mc_sb_printf(e->sb, "%s%d", d == 0 ? "\n\t" : d % 32 ? ", " : ",\n\t", dyn->of[i].version_of[d]);
		mc_sb_puts(e->sb, "\n};\n");
	}
	for (int t = 0; t < 2; t++) {
		const mc_io_desc *io = t ? e->p->outputs : e->p->inputs;
		const mc_dyn_poly *polys = t ? dyn->out_dims : dyn->in_dims;
		int count = t ? e->p->n_outputs : e->p->n_inputs;
		put_section(e);
		mc_sb_printf(e->sb, "\nint %s_%s_shape(int i, const int64_t dims[], int64_t shape[])\n{\n"
		                    "\tif (dims == NULL || shape == NULL)\n\t\treturn MODELC_ERR_NULL_ARGUMENT;\n"
		                    "\tif (dims[0] < %s_DIM_0_MIN || dims[0] > %s_DIM_0_MAX)\n"
		                    "\t\treturn MODELC_ERR_BAD_DIM;\n\tconst int64_t d = dims[0];\n\t(void)d;\n"
		                    "\tswitch (i) {\n", e->name, t ? "output" : "input", e->upper, e->upper);
		for (int i = 0; i < count; i++) {
			mc_sb_printf(e->sb, "\tcase %d:\n", i);
			for (int j = 0; j < io[i].shape.rank; j++) {
				const mc_dyn_poly *q = &polys[i * MC_MAX_RANK + j];
				mc_sb_printf(e->sb, "\t\tshape[%d] = ", j);
				put_poly(e, q);
				mc_sb_puts(e->sb, ";\n");
			}
			mc_sb_puts(e->sb, "\t\treturn MODELC_OK;\n");
		}
		mc_sb_puts(e->sb, "\tdefault:\n\t\treturn MODELC_ERR_BAD_INDEX;\n\t}\n}\n");
	}
	mc_sb_puts(e->sb, "\n");
}

static void put_steps(emitter *e, const mc_step *steps, int n, int depth)
{
	for (int i = 0; i < n; i++) {
		const mc_step *s = &steps[i];
		if (s->kind == MC_STEP_IF) {
			mc_ce_indent(e, depth);
			mc_sb_puts(e->sb, "if (");
			put_cond(e, &s->cond);
			mc_sb_puts(e->sb, ") {\n");
			put_steps(e, s->then_steps, s->n_then, depth + 1);
			if (s->n_else > 0) {
				mc_ce_indent(e, depth);
				mc_sb_puts(e->sb, "} else {\n");
				put_steps(e, s->else_steps, s->n_else, depth + 1);
			}
			mc_ce_indent(e, depth);
			mc_sb_puts(e->sb, "}\n");
			continue;
		}
		if (s->kind != MC_STEP_KERNEL || s->kernel < 0 || s->kernel >= e->p->n_kernels) {
			mc_ce_fail(e, "step names no kernel");
			return;
		}
		if (e->p->dyn) {
			put_dyn_call(e, s->kernel, depth);
			continue;
		}
		mc_ce_indent(e, depth);
		mc_sb_puts(e->sb, "status = ");
		mc_ce_kernel_name(e, e->p->kernels[s->kernel]);
		mc_sb_puts(e->sb, e->p->n_pools > 1 ? "(pool, inputs, outputs);\n"
		              : e->p->threads > 1 ? "((unsigned char *)arena, inputs, outputs, threads);\n"
		                                  : "((unsigned char *)arena, inputs, outputs);\n");
		mc_ce_indent(e, depth);
		mc_sb_puts(e->sb, "if (status != MODELC_OK)\n");
		mc_ce_indent(e, depth + 1);
		mc_sb_puts(e->sb, "return status;\n");
	}
}

static bool steps_call_kernels(const mc_step *steps, int n)
{
	for (int i = 0; i < n; i++) {
		if (steps[i].kind == MC_STEP_KERNEL)
			return true;
		if (steps_call_kernels(steps[i].then_steps, steps[i].n_then) ||
		    steps_call_kernels(steps[i].else_steps, steps[i].n_else))
			return true;
	}
	return false;
}

/* Inputs and outputs are arrays of their element type: a pointer off its
 * element's alignment is a status, never a misaligned access. */
static void put_io_align_check(emitter *e)
{
	const mc_program *p = e->p;
	bool any = false;
	for (int t = 0; t < 2; t++) {
		const mc_io_desc *io = t ? p->outputs : p->inputs;
		for (int i = 0; i < (t ? p->n_outputs : p->n_inputs); i++) {
			size_t a = mc_ce_io_align(&io[i]);
			if (a == 1)
				continue;
			mc_sb_printf(e->sb, any ? " ||\n\t    " : "\tif (");
			mc_sb_printf(e->sb, "(uintptr_t)%s[%d] %% %zu != 0", t ? "outputs" : "inputs", i, a);
			any = true;
		}
	}
	if (any)
		mc_sb_puts(e->sb, ")\n\t\treturn MODELC_ERR_MISALIGNED;\n");
}

/* --io-in-arena: input or output i's place in the arena */
static void put_io_place(emitter *e, const mc_loc *at)
{
	if (e->p->n_pools > 1)
		mc_sb_printf(e->sb, "pool[%d] + %zu", at->index, at->offset);
	else
		mc_sb_printf(e->sb, "(unsigned char *)arena + %zu", at->offset);
}

/* --io-in-arena: each input copied into its place, or each output out of
 * its place, where the caller passes a pointer elsewhere (memcpy: any
 * alignment) */
static void put_io_copies(emitter *e, bool outputs)
{
	const mc_program *p = e->p;
	const char *table = outputs ? "outputs" : "inputs";
	int n = outputs ? p->n_outputs : p->n_inputs;
	if (n == 0)
		return;
	mc_sb_printf(e->sb, "\tif (%s != NULL) {\n", table);
	for (int i = 0; i < n; i++) {
		const mc_io_desc *d = outputs ? &p->outputs[i] : &p->inputs[i];
		mc_sb_puts(e->sb, "\t\tunsigned char *at");
		mc_sb_printf(e->sb, "%d = ", i);
		put_io_place(e, outputs ? &p->output_at[i] : &p->input_at[i]);
		mc_sb_printf(e->sb, ";\n\t\tif (%s[%d] != NULL && %s[%d] != (void *)at%d)\n", table, i, table, i, i);
		if (outputs)
			mc_sb_printf(e->sb, "\t\t\tmemcpy(outputs[%d], at%d, %zuu);\n", i, i, mc_ce_io_bytes(d));
		else
			mc_sb_printf(e->sb, "\t\t\tmemcpy(at%d, inputs[%d], %zuu);\n", i, i, mc_ce_io_bytes(d));
	}
	mc_sb_puts(e->sb, "\t}\n");
}

/* NAME_run with pools: the pools' places in the one arena, then
 * NAME_run_pools. */
static void put_run_one_arena(emitter *e)
{
	const mc_program *p = e->p;
	put_section(e);
	mc_sb_printf(e->sb, "int %s_run(void *arena, const void *const inputs[], void *const outputs[])\n{\n", e->name);
	mc_sb_printf(e->sb, "\tif (arena == NULL)\n\t\treturn MODELC_ERR_NULL_ARGUMENT;\n"
	                    "\tif ((uintptr_t)arena %% %s_ARENA_ALIGN != 0)\n"
	                    "\t\treturn MODELC_ERR_MISALIGNED;\n", e->upper);
	mc_sb_printf(e->sb, "\tvoid *pools[%s_NUM_POOLS];\n", e->upper);
	for (int k = 0; k < p->n_pools; k++)
		mc_sb_printf(e->sb, "\tpools[%d] = (unsigned char *)arena + %s_POOL_%d_AT;\n", k, e->upper, k);
	mc_sb_printf(e->sb, "\treturn %s_run_pools(pools, inputs, outputs);\n}\n\n", e->name);
}

/* NAME_run_counted's counts: each counted output's, read from the arena
 * where its count op left it; -1 for the others. */
static void put_counts(emitter *e)
{
	const mc_program *p = e->p;
	for (int i = 0; i < p->n_outputs; i++) {
		const mc_io_desc *d = &p->outputs[i];
		if (!d->counted) {
			mc_sb_printf(e->sb, "\tcounts[%d] = -1;\n", i);
			continue;
		}
		mc_sb_printf(e->sb, "\tcounts[%d] = *(const int64_t *)(const void *)((const unsigned char *)arena + %zuu);\n",
		             i, mc_program_arena_offset(p, &d->count_at));
	}
}

static void put_run(emitter *e)
{
	const mc_program *p = e->p;
	bool pools = p->n_pools > 1, counted = mc_program_counted(p);
	if (pools)
		put_run_one_arena(e);
	put_section(e);
	if (pools)
		mc_sb_printf(e->sb, "int %s_run_pools(void *const pools[], const void *const inputs[], "
		                    "void *const outputs[])\n{\n", e->name);
	else if (p->threads > 1 && counted) {
		mc_sb_printf(e->sb, "int %s_run_counted(void *arena, const void *const inputs[], void *const outputs[],\n"
		                    "                   int64_t counts[])\n{\n"
		                    "\treturn %s_run_counted_threads(arena, inputs, outputs, counts, NULL);\n}\n\n",
		             e->name, e->name);
		put_section(e);
		mc_sb_printf(e->sb, "int %s_run_counted_threads(void *arena, const void *const inputs[], void *const outputs[],\n"
		                    "                           int64_t counts[], const modelc_threads *threads)\n{\n"
		                    "\tif (counts == NULL)\n\t\treturn MODELC_ERR_NULL_ARGUMENT;\n", e->name);
		if (!steps_call_kernels(p->steps, p->n_steps))
			mc_sb_puts(e->sb, "\t(void)threads;\n");
	}
	else if (p->threads > 1) {
		mc_sb_printf(e->sb, "int %s_run(void *arena, const void *const inputs[], void *const outputs[])\n{\n"
		                    "\treturn %s_run_threads(arena, inputs, outputs, NULL);\n}\n\n", e->name, e->name);
		put_section(e);
		mc_sb_printf(e->sb, "int %s_run_threads(void *arena, const void *const inputs[], void *const outputs[],\n"
		                    "                   const modelc_threads *threads)\n{\n", e->name);
		if (!steps_call_kernels(p->steps, p->n_steps))
			mc_sb_puts(e->sb, "\t(void)threads;\n");
	}
	else if (p->dyn)
		mc_sb_printf(e->sb, "int %s_run_dims(void *arena, const void *const inputs[], void *const outputs[],\n"
		                    "                const int64_t dims[])\n{\n", e->name);
	else if (counted)
		mc_sb_printf(e->sb, "int %s_run_counted(void *arena, const void *const inputs[], void *const outputs[],\n"
		                    "                   int64_t counts[])\n{\n"
		                    "\tif (counts == NULL)\n\t\treturn MODELC_ERR_NULL_ARGUMENT;\n", e->name);
	else
		mc_sb_printf(e->sb, "int %s_run(void *arena, const void *const inputs[], void *const outputs[])\n{\n", e->name);
	if (p->dyn) /* the size first: out of bounds, nothing is touched */
		mc_sb_printf(e->sb, "\tif (dims == NULL || dims[0] < %s_DIM_0_MIN || dims[0] > %s_DIM_0_MAX)\n"
		                    "\t\treturn MODELC_ERR_BAD_DIM;\n"
		                    "\tconst %s dim = (%s)dims[0];\n", e->upper, e->upper, e->idx_type, e->idx_type);
	if (steps_call_kernels(p->steps, p->n_steps))
		mc_sb_puts(e->sb, "\tint status;\n\n");
	if (pools) {
		mc_sb_puts(e->sb, "\tif (pools == NULL)\n\t\treturn MODELC_ERR_NULL_ARGUMENT;\n");
		mc_sb_printf(e->sb, "\tunsigned char *pool[%s_NUM_POOLS];\n", e->upper);
		for (int k = 0; k < p->n_pools; k++) {
			mc_sb_printf(e->sb, "\tpool[%d] = (unsigned char *)pools[%d];\n", k, k);
			if (p->pool_bytes[k] > 0)
				mc_sb_printf(e->sb, "\tif (pool[%d] == NULL)\n\t\treturn MODELC_ERR_NULL_ARGUMENT;\n"
				                    "\tif ((uintptr_t)pool[%d] %% %s_ARENA_ALIGN != 0)\n"
				                    "\t\treturn MODELC_ERR_MISALIGNED;\n", k, k, e->upper);
		}
	} else if (p->arena_bytes > 0) {
		mc_sb_puts(e->sb, "\tif (arena == NULL)\n\t\treturn MODELC_ERR_NULL_ARGUMENT;\n");
	}
	if (p->n_inputs > 0 && !p->io_in_arena) {
		mc_sb_puts(e->sb, "\tif (inputs == NULL)\n\t\treturn MODELC_ERR_NULL_ARGUMENT;\n");
		mc_sb_printf(e->sb, "\tfor (int i = 0; i < %s_NUM_INPUTS; i++)\n"
		                    "\t\tif (inputs[i] == NULL)\n"
		                    "\t\t\treturn MODELC_ERR_NULL_ARGUMENT;\n", e->upper);
	}
	if (p->n_outputs > 0 && !p->io_in_arena) {
		mc_sb_puts(e->sb, "\tif (outputs == NULL)\n\t\treturn MODELC_ERR_NULL_ARGUMENT;\n");
		mc_sb_printf(e->sb, "\tfor (int i = 0; i < %s_NUM_OUTPUTS; i++)\n"
		                    "\t\tif (outputs[i] == NULL)\n"
		                    "\t\t\treturn MODELC_ERR_NULL_ARGUMENT;\n", e->upper);
	}
	if (!pools)
		mc_sb_printf(e->sb, "\tif ((uintptr_t)arena %% %s_ARENA_ALIGN != 0)\n"
		                    "\t\treturn MODELC_ERR_MISALIGNED;\n", e->upper);
	if (p->io_in_arena)
		put_io_copies(e, false);
	else
		put_io_align_check(e);
	bool calls = steps_call_kernels(p->steps, p->n_steps);
	bool copies = p->io_in_arena && p->n_inputs + p->n_outputs > 0;
	if (pools && !calls && !copies)
		mc_sb_puts(e->sb, "\t(void)pool;\n");
	if (!calls && p->n_inputs == 0)
		mc_sb_puts(e->sb, "\t(void)inputs;\n");
	if (!calls && p->n_outputs == 0)
		mc_sb_puts(e->sb, "\t(void)outputs;\n");
	mc_sb_puts(e->sb, "\n");
	put_steps(e, p->steps, p->n_steps, 1);
	if (p->io_in_arena)
		put_io_copies(e, true);
	if (counted)
		put_counts(e);
	mc_sb_puts(e->sb, "\treturn MODELC_OK;\n}\n");
}

/* Whether a kernel calls the BLAS (--blas openblas): a top-level
 * MC_TMPL_SGEMM statement. */
static bool calls_blas(const mc_program *p)
{
	for (int i = 0; i < p->n_kernels; i++)
		for (const mc_kstmt *s = p->kernels[i]->body; s; s = s->next)
			if (s->kind == MC_KS_TEMPLATE && s->tmpl->kind == MC_TMPL_SGEMM)
				return true;
	return false;
}

static void put_source(emitter *e)
{
	const mc_program *p = e->p;
	mc_strbuf *sb = e->sb;
	mc_sb_printf(sb, "/* %s.c: generated by modelc " MC_VERSION "; do not edit. */\n", e->name);
	mc_sb_printf(sb, "#include \"%s.h\"\n", e->name);
	/* --blas openblas: its large products (link -lopenblas) */
	mc_sb_puts(sb, calls_blas(p) ? "#include <cblas.h>\n\n" : "\n");
	mc_ce_vector_prelude(e);
	mc_sb_puts(sb, "/* Element indices: wide enough for every buffer of the model. */\n");
	mc_sb_printf(sb, "typedef %s %s;\n\n", e->idx64 ? "int64_t" : "int32_t", e->idx_type);
	mc_ce_weight_decls(e, "/* Frozen constants (%s_weights.c). */\n", "\n");
	mc_ce_desc_table(e, "in", "inputs", p->inputs, p->n_inputs);
	mc_ce_desc_table(e, "out", "outputs", p->outputs, p->n_outputs);
	if (p->threads > 1)
		mc_sb_printf(sb, "/* What a kernel's split loop reads besides its range (--threads). */\n"
		                 "typedef struct {\n\tunsigned char *arena;\n\tconst void *const *in;\n"
		                 "\tvoid *const *out;\n} %s_task;\n\n", e->name);
	for (int i = 0; i < p->n_kernels && !e->err; i++)
		put_kernel(e, p->kernels[i]);
	if (!e->err && p->dyn)
		put_dyn_tables(e);
	if (!e->err)
		put_run(e);
}

int mc_emit_c_sources(const mc_program *p, const mc_compile_opts *o, mc_c_sources *out)
{
	*out = (mc_c_sources){0};
	emitter e;
	if (mc_ce_init(&e, p, o, "C target"))
		return -1;
	e.sb = &out->header;
	mc_ce_header(&e);
	e.sb = &out->source;
	put_source(&e);
	e.sb = &out->weights;
	if (!e.err)
		e.err = mc_ce_weights(&e);
	mc_ce_fini(&e);
	if (e.err)
		mc_c_sources_free(out);
	return e.err;
}

void mc_c_sources_free(mc_c_sources *s)
{
	mc_sb_free(&s->header);
	mc_sb_free(&s->source);
	mc_sb_free(&s->weights);
}

int mc_emit_c(const mc_program *p, const mc_compile_opts *o, const char *dir)
{
	mc_c_sources src;
	if (mc_emit_c_sources(p, o, &src))
		return -1;
	const char *name = p->prefix ? p->prefix : o->name;
	size_t n = strlen(dir) + 16;
	char *path = mc_xmalloc(n);
	snprintf(path, n, "%s/modelc_rt.h", dir);
	int r = mc_write_if_changed(path, mc_runtime_min_h, strlen(mc_runtime_min_h));
	free(path);
	/* --threads: a ready parallel_for for POSIX systems, beside the library (not in it) */
	const char *pthread_files[2][2] = { { "modelc_threads_pthread.h", mc_threads_pthread_h },
	                                     { "modelc_threads_pthread.c", mc_threads_pthread_c } };
	for (int i = 0; i < 2 && !r && p->threads > 1; i++) {
		n = strlen(dir) + strlen(pthread_files[i][0]) + 2;
		path = mc_xmalloc(n);
		snprintf(path, n, "%s/%s", dir, pthread_files[i][0]);
		r = mc_write_if_changed(path, pthread_files[i][1], strlen(pthread_files[i][1]));
		free(path);
	}
	if (!r)
		r = mc_ce_write_file(dir, name, ".h", &src.header);
	if (!r)
		r = mc_ce_write_file(dir, name, ".c", &src.source);
	if (!r)
		r = mc_ce_write_file(dir, name, "_weights.c", &src.weights);
	mc_c_sources_free(&src);
	return r;
}
