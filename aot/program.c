/* From an inferred, frozen graph to a program: fusion groups lowered into
 * kernels, every buffer given a place (arena offset, weight, input or
 * output slot) by the memory plan. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "../libcore/ops/tensor.h"
#include "../freezing/graph_edit.h"

#define ARENA_ALIGN 64

static mc_kernel *new_kernel(mc_program *p, const char *name, const char *comment)
{
	mc_kernel *k = mc_kpool_alloc(p->pool, sizeof *k);
	k->name = mc_kpool_strdup(p->pool, name);
	k->comment = mc_kpool_strdup(p->pool, comment);
	p->kernels = mc_grow_array(p->kernels, &p->cap_kernels, p->n_kernels + 1, sizeof *p->kernels);
	p->kernels[p->n_kernels++] = k;
	return k; /* its step comes from make_steps, once every kernel exists */
}

void mc_program_free(mc_program *p)
{
	if (!p)
		return;
	for (int i = 0; i < p->n_kernels; i++) {
		for (int b = 0; b < p->kernels[i]->n_bufs; b++)
			mc_tensor_free(p->kernels[i]->bufs[b].packed);
		free(p->kernels[i]->bufs);
		free(p->kernels[i]->vars);
	}
	free(p->kernels);
	free(p->steps);
	free(p->weights);
	for (int i = 0; i < p->n_owned; i++)
		mc_tensor_free(p->owned[i]);
	free(p->owned);
	for (int i = 0; i < p->n_inputs; i++)
		free(p->inputs[i].name);
	for (int i = 0; i < p->n_outputs; i++)
		free(p->outputs[i].name);
	free(p->inputs);
	free(p->outputs);
	free(p->input_at);
	free(p->output_at);
	free(p->prefix);
	mc_kpool_free(p->pool);
	memset(p, 0, sizeof *p);
}

size_t mc_program_arena_offset(const mc_program *p, const mc_loc *at)
{
	return (p->n_pools > 1 ? p->pool_at[at->index] : 0) + at->offset;
}

bool mc_program_counted(const mc_program *p)
{
	for (int i = 0; i < p->n_outputs; i++)
		if (p->outputs[i].counted)
			return true;
	return false;
}

const char *mc_program_run_name(const mc_program *p)
{
	return p->dyn ? "run_dims" : mc_program_counted(p) ? "run_counted" : "run";
}

/* An If whose condition is known only at run time: both branches are
 * inlined, their nodes guarded by the condition; the program runs one or
 * the other (MC_STEP_IF). Nested ones are not supported yet. */
static int inline_runtime_ifs(mc_graph *g)
{
	for (int i = 0; i < g->n_nodes; i++) {
		mc_node *n = &g->nodes[i];
		if (n->id != MC_OP_If || !n->op)
			continue;
		const mc_value *cond = &g->values[n->inputs[0]];
		if (cond->konst)
			continue; /* freezing keeps one branch of these */
		if (n->guard)
			return mc_node_error(n, "an If inside another If's branch, both with run-time "
			                        "conditions, is not supported by the compiler yet");
		for (int a = 0; a < n->n_attrs; a++) {
			const mc_graph *b = n->attrs[a].g;
			for (int k = 0; b && k < b->n_nodes; k++)
				if (b->nodes[k].op && (b->nodes[k].op->flags & MC_OP_SUBGRAPH) &&
				    b->nodes[k].id != MC_OP_If)
					return mc_node_error(n, "branch node '%s' (%s) holds a subgraph: not supported "
					                        "by the compiler yet", b->nodes[k].name, b->nodes[k].op_type);
		}
		ge_inline_if(g, i, -1);
		i = -1; /* indices moved: start over (a nested If is now visible) */
	}
	return 0;
}

/* Every node of every group needs a lowering; all missing ones are
 * reported at once. */
static int check_lowerings(const mc_graph *g, int unroll_limit)
{
	int missing = 0;
	for (int n = 0; n < g->n_nodes; n++) {
		const mc_node *nd = &g->nodes[n];
		char why[256];
		bool loop_like = nd->id == MC_OP_Scan || nd->id == MC_OP_Loop;
		const char *unroll_why = loop_like ? mc_unroll_refusal(g, nd, unroll_limit, why, sizeof why) : NULL;
		if (unroll_why) {
			mc_node_error(nd, "%s is compiled by unrolling its body, and this one cannot be: %s",
			              nd->op_type, unroll_why);
			missing++;
		} else if (!mc_lowering_find(nd->id)) {
			mc_node_error(nd, "has no lowering to kernels yet (op %s is not supported by the compiler)",
			              nd->op_type);
			missing++;
		}
	}
	if (missing)
		mc_error("%d node%s cannot be compiled", missing, missing == 1 ? "" : "s");
	return missing ? -1 : 0;
}

static void ident_part(char *dst, size_t n, const char *src)
{
	size_t j = 0;
	for (size_t i = 0; src[i] && j + 1 < n && j < 24; i++) {
		char ch = src[i];
		bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
		dst[j++] = ok ? ch : '_';
	}
	dst[j] = 0;
}

static void group_names(const mc_graph *g, const mc_group *gr, int idx, mc_program *p,
                        char *name, size_t name_len, char **comment)
{
	const mc_node *a = &g->nodes[gr->anchor];
	char part[32];
	ident_part(part, sizeof part, a->name[0] ? a->name : a->op_type);
	snprintf(name, name_len, "k%d_%s", idx, part);
	mc_strbuf sb = { 0 };
	mc_sb_printf(&sb, "%s '%s'", a->op_type, a->name);
	for (int e = 0; e < gr->n_epi; e++)
		mc_sb_printf(&sb, " + %s '%s'", g->nodes[gr->epi[e]].op_type, g->nodes[gr->epi[e]].name);
	/* a comment must not close itself */
	for (char *s = sb.data; s && (s = strstr(s, "*/")); )
		s[1] = '_';
	*comment = mc_kpool_strdup(p->pool, sb.data ? sb.data : "");
	mc_sb_free(&sb);
}

typedef struct {
	int *root;          /* storage root of each value (aliases share one) */
	size_t *off;        /* bytes from its root's start (a Concat's input: its slab) */
	int *out_slot;      /* output index a value is written to directly, -1 */
	int *req;           /* memory request of each arena root, -1 */
	int *weight;        /* weight index of each constant value, -1 */
} value_maps;

/* ---- the stages of mc_build_program ----
 * Each stage reads what the ones before it left in `build` and adds its
 * own part; --dump-after NAME writes what it left (DIR/debug/9N-NAME.txt). */
typedef struct {
	mc_graph *g;
	const mc_compile_opts *o;
	mc_program *p;
	/* storage of float32 activations in the arena and of float32 weights
	 * (the target's: MC_FLOAT16 under cuda's --dtype fp16); graph inputs,
	 * outputs and kernel scratch stay float32 */
	mc_dtype act_store, weight_store;
	mc_group *groups;           /* schedule: in run order */
	int n_groups;
	value_maps m;
	bool *copy_out;             /* per graph output: a kernel copies it in */
	/* --io-in-arena: per value, the storage root of a graph output (it
	 * lives to the run's end); per output, the request of the place a
	 * copy kernel writes it to (a constant output), -1 */
	bool *output_root;
	int *out_req;
	int *group_kernel;          /* lower: kernel of each group, -1 for an alias */
	int *kguard;                /* per kernel: mc_node.guard of its nodes */
	bool *kelse;                /* per kernel: in an If's else branch */
	mc_dtype *store;            /* storage: dtype each value's bytes are stored in */
	int *first, *last;          /* liveness: steps of each storage root */
	mc_mem_req *reqs;           /* plan: arena roots, then kernel scratch */
	int *req_what;              /* per request: its value, or -1 - the kernel of a scratch */
	int n_reqs, cap_reqs;
	mc_mem_plan plan;
	uint64_t *weight_hash;      /* place: per program weight, of its stored bytes */
	int *req_pool;              /* pools: per request, its pool (NULL: one arena) */
} build;

static size_t store_bytes(const build *b, int v)
{
	return mc_numel(&b->g->values[v].shape) * mc_dtype_size(b->store[v]);
}

static int value_loc(build *b, int v, mc_loc *loc);

static int find_input(const mc_graph *g, int v)
{
	for (int i = 0; i < g->n_inputs; i++)
		if (g->inputs[i] == v)
			return i;
	return -1;
}

/* A storage root the plan places in the arena: every computed value but
 * those written straight into an output; with --io-in-arena, the graph's
 * inputs and outputs too. */
static bool in_arena(const build *b, int root)
{
	const mc_value *v = &b->g->values[root];
	if (b->o->io_in_arena)
		return v->kind == MC_VAL_NODE || v->kind == MC_VAL_INPUT;
	return v->kind == MC_VAL_NODE && b->m.out_slot[root] < 0;
}

/* A kernel copying value v (or its storage root) into output slot j. */
static void copy_to_output(const mc_graph *g, mc_program *p, int v, int j)
{
	char name[48];
	snprintf(name, sizeof name, "k%d_output%d", p->n_kernels, j);
	mc_kernel *k = new_kernel(p, name, "copy into a graph output");
	mc_kb kb;
	mc_kb_begin(&kb, p->pool, k);
	const mc_value *val = &g->values[v];
	size_t n = mc_numel(&val->shape);
	int src = mc_kb_buf(&kb, v, val->dtype, n, false);
	int dst = mc_kb_buf(&kb, -1, val->dtype, n, true);
	k->bufs[dst].loc = (mc_loc){ .kind = MC_LOC_OUTPUT, .index = j };
	mc_kexpr *i = mc_kb_fori(&kb, (int64_t)n, MC_KF_PARALLEL | MC_KF_VECTOR);
	mc_kb_store(&kb, dst, i, mc_k_load(&kb, src, i));
	mc_kb_end(&kb);
}


static bool reads_root(const mc_graph *g, const value_maps *m, const mc_node *n, int r)
{
	(void)g;
	for (int i = 0; i < n->n_inputs; i++)
		if (n->inputs[i] >= 0 && m->root[n->inputs[i]] == r)
			return true;
	return false;
}

/* In-place candidate of a group's stored value: an operand read only at
 * the element being written (same shape), dying at this step; or the
 * anchor's input 0 where the kernel says it may write over it. */
static int inplace_candidate(const build *b, const mc_group *gr, int step, int out)
{
	const mc_graph *g = b->g;
	const value_maps *m = &b->m;
	bool pointwise = mc_op_has(g->nodes[gr->anchor].id, MC_OF_PW);
	size_t obytes = store_bytes(b, out);
	const mc_kernel *k = b->p->kernels[step];
	const mc_node *an = &g->nodes[gr->anchor];
	int over_input0 = -1;
	size_t input0_bytes = 0;
	if (k->inplace_input0 && an->n_inputs > 0 && an->inputs[0] >= 0) {
		int r = m->root[an->inputs[0]];
		if (in_arena(b, r) && m->req[r] >= 0 && b->last[r] == step && m->off[an->inputs[0]] == 0 &&
		    (k->inplace_grows || store_bytes(b, r) >= obytes)) {
			over_input0 = m->req[r];
			input0_bytes = store_bytes(b, r);
		}
	}
	/* input 0 where it is as large as the output; one the output would
	 * grow over only where no operand as large dies here (which saves more) */
	if (over_input0 >= 0 && input0_bytes >= obytes)
		return over_input0;
	for (int e = -1; e < gr->n_epi; e++) {
		const mc_node *nd = &g->nodes[e < 0 ? gr->anchor : gr->epi[e]];
		if (e < 0 && !pointwise)
			continue; /* a non-pointwise anchor reads its inputs anywhere */
		for (int i = 0; i < nd->n_inputs; i++) {
			int v = nd->inputs[i];
			if (v < 0 || (e >= 0 && i == gr->epi_chain_in[e]))
				continue;
			int r = m->root[v];
			if (!pointwise && reads_root(g, m, &g->nodes[gr->anchor], r))
				continue; /* the anchor reads it elsewhere too (a residual) */
			if (!in_arena(b, r) || m->req[r] < 0 || b->last[r] != step ||
			    !mc_shape_eq(&g->values[v].shape, &g->values[out].shape) || store_bytes(b, r) != obytes)
				continue;
			return m->req[r];
		}
	}
	return over_input0;
}

/* Value v is stored by group gr's kernel: the last member's output, or one
 * of the anchor's outputs when nothing is fused into it. */
static bool stored_by(const mc_graph *g, const mc_group *gr, int v)
{
	if (gr->alias)
		return false;
	if (gr->n_epi > 0)
		return g->nodes[gr->epi[gr->n_epi - 1]].outputs[0] == v;
	const mc_node *a = &g->nodes[gr->anchor];
	for (int k = 0; k < a->n_outputs; k++)
		if (a->outputs[k] == v)
			return true;
	return false;
}

/* Concat without a copy: where every dim before the axis is 1, each input
 * is one contiguous slab of the output, so the kernel producing it can
 * store it there directly and the Concat needs no kernel (squeezenet's fire
 * modules: two convolutions each). Each input must be stored by a kernel
 * of its own (not a graph input, output, constant or alias), appear once,
 * and start at an aligned offset, for the kernels' vector access. Outer
 * Concats first, so that a nested one's slabs land in the outermost
 * storage. */
static void concats_in_place(const mc_graph *g, mc_group *groups, int n_groups, value_maps *m)
{
	int *group_of = mc_group_of_nodes(g, groups, n_groups);
	for (int i = n_groups - 1; i >= 0; i--) {
		mc_group *gr = &groups[i];
		const mc_node *nd = &g->nodes[gr->anchor];
		int x = nd->outputs[0], axis;
		if (nd->id != MC_OP_Concat || gr->alias || gr->n_epi || nd->guard || x < 0 ||
		    g->values[x].kind != MC_VAL_NODE || ge_is_graph_output(g, x))
			continue;
		const mc_shape *xs = &g->values[x].shape;
		if (mc_concat_axis(nd, xs->rank, &axis))
			continue; /* the lowering reports it */
		bool ok = nd->n_inputs >= 1;
		for (int d = 0; d < axis; d++)
			ok = ok && xs->dims[d] == 1;
		size_t at = m->off[x], elem = mc_dtype_size(g->values[x].dtype);
		for (int k = 0; k < nd->n_inputs && ok; k++) {
			int v = nd->inputs[k];
			const mc_value *val = v >= 0 ? &g->values[v] : NULL;
			ok = val && val->kind == MC_VAL_NODE && !ge_is_graph_output(g, v) && m->root[v] == v &&
			     mc_numel(&val->shape) > 0 && at % ARENA_ALIGN == 0 && val->producer >= 0 &&
			     !g->nodes[val->producer].guard && group_of[val->producer] >= 0 &&
			     stored_by(g, &groups[group_of[val->producer]], v);
			for (int j = 0; j < k && ok; j++)
				ok = nd->inputs[j] != v;
			at += val ? mc_numel(&val->shape) * elem : 0;
		}
		if (!ok)
			continue;
		at = m->off[x];
		for (int k = 0; k < nd->n_inputs; k++) {
			int v = nd->inputs[k];
			m->root[v] = m->root[x];
			m->off[v] = at;
			at += mc_numel(&g->values[v].shape) * elem;
		}
		gr->alias = gr->slabs = true;
	}
	free(group_of);
}

/* Marks in used[] (n_bufs entries) the buffers a statement of k loads or
 * stores: a fast kernel reading a packed copy leaves the original weight
 * registered but unread, and an unread constant must not become a weight. */
static void mark_expr(const mc_kexpr *x, bool *used)
{
	for (; x; x = x->b) {
		if (x->kind == MC_KE_LOAD)
			used[x->buf] = true;
		mark_expr(x->a, used);
		mark_expr(x->c, used);
	}
}

static void mark_block(const mc_kstmt *s, bool *used)
{
	for (; s; s = s->next) {
		if (s->kind == MC_KS_STORE)
			used[s->buf] = true;
		mark_expr(s->a, used);
		mark_expr(s->b, used);
		mark_expr(s->c, used);
		mark_block(s->body, used);
		mark_block(s->orelse, used);
	}
}

/* The run function's steps: kernels in order; the kernels of an If's
 * branches (contiguous: then, then else) become one IF step. */
static int make_steps(build *b)
{
	mc_program *p = b->p;
	const int *kguard = b->kguard;
	const bool *kelse = b->kelse;
	for (int s = 0; s < p->n_kernels; ) {
		p->steps = mc_grow_array(p->steps, &p->cap_steps, p->n_steps + 1, sizeof *p->steps);
		mc_step *st = &p->steps[p->n_steps++];
		if (!kguard[s]) {
			*st = (mc_step){ .kind = MC_STEP_KERNEL, .kernel = s++ };
			continue;
		}
		int gv = kguard[s], t0 = s;
		while (s < p->n_kernels && kguard[s] == gv && !kelse[s])
			s++;
		int e0 = s;
		while (s < p->n_kernels && kguard[s] == gv && kelse[s])
			s++;
		*st = (mc_step){ .kind = MC_STEP_IF, .n_then = e0 - t0, .n_else = s - e0 };
		st->then_steps = mc_kpool_alloc(p->pool, sizeof(mc_step) * (size_t)(st->n_then + 1));
		st->else_steps = mc_kpool_alloc(p->pool, sizeof(mc_step) * (size_t)(st->n_else + 1));
		for (int k = 0; k < st->n_then; k++)
			st->then_steps[k] = (mc_step){ .kind = MC_STEP_KERNEL, .kernel = t0 + k };
		for (int k = 0; k < st->n_else; k++)
			st->else_steps[k] = (mc_step){ .kind = MC_STEP_KERNEL, .kernel = e0 + k };
		if (value_loc(b, gv - 1, &st->cond))
			return -1;
	}
	return 0;
}

/* schedule: Ifs with run-time conditions inlined, every node checked for a
 * lowering, fusion groups in run order, Concats stored in place, aliases
 * given their root, graph outputs a kernel writes directly. */
static int stage_schedule(build *b)
{
	mc_graph *g = b->g;
	if (inline_runtime_ifs(g) || check_lowerings(g, b->o->unroll_limit) ||
	    mc_fuse(g, b->o->no_fuse, &b->groups, &b->n_groups))
		return -1;
	if (!b->o->no_fuse)
		mc_fuse_inline_gathers(g, b->groups, &b->n_groups, b->o->optimize && !strcmp(b->o->optimize, "memory"),
		                       b->p->target.desc->grid);
	/* sized now: inlining Ifs adds values and nodes */
	size_t nv = (size_t)g->n_values + 1, nn = (size_t)g->n_nodes + (size_t)g->n_outputs + 1;
	b->m = (value_maps){ mc_xcalloc(nv, sizeof(int)), mc_xcalloc(nv, sizeof(size_t)),
	                     mc_xcalloc(nv, sizeof(int)), mc_xcalloc(nv, sizeof(int)),
	                     mc_xcalloc(nv, sizeof(int)) };
	b->copy_out = mc_xcalloc((size_t)g->n_outputs + 1, sizeof(bool));
	b->output_root = mc_xcalloc(nv, sizeof(bool));
	b->out_req = mc_xcalloc((size_t)g->n_outputs + 1, sizeof(int));
	b->group_kernel = mc_xcalloc(nn, sizeof(int));
	b->kguard = mc_xcalloc(nn, sizeof(int));
	b->kelse = mc_xcalloc(nn, sizeof(bool));
	b->store = mc_xcalloc(nv, sizeof(mc_dtype));
	b->first = mc_xcalloc(nv, sizeof(int));
	b->last = mc_xcalloc(nv, sizeof(int));
	value_maps *m = &b->m;
	for (int v = 0; v < g->n_values; v++) {
		m->root[v] = v;
		m->out_slot[v] = m->req[v] = m->weight[v] = -1;
	}
	concats_in_place(g, b->groups, b->n_groups, m);
	for (int i = 0; i < b->n_groups; i++)
		if (b->groups[i].alias && !b->groups[i].slabs) {
			const mc_node *nd = &g->nodes[b->groups[i].anchor];
			m->root[nd->outputs[0]] = m->root[nd->inputs[0]];
			m->off[nd->outputs[0]] = m->off[nd->inputs[0]];
		}
	for (int j = 0; j < g->n_outputs; j++) {
		int v = g->outputs[j], r = m->root[v];
		b->out_req[j] = -1;
		if (b->o->io_in_arena) {
			/* read where it is, an alias or an input too; a constant is
			 * copied from the weights */
			if (g->values[r].kind == MC_VAL_CONST)
				b->copy_out[j] = true;
			else
				b->output_root[r] = true;
		} else if (g->values[v].kind == MC_VAL_NODE && r == v && m->out_slot[v] < 0)
			m->out_slot[v] = j;
		else
			b->copy_out[j] = true;
	}
	return 0;
}

static void dump_schedule(const void *ctx, FILE *f)
{
	const build *b = ctx;
	const mc_graph *g = b->g;
	for (int i = 0; i < b->n_groups; i++) {
		const mc_group *gr = &b->groups[i];
		const mc_node *a = &g->nodes[gr->anchor];
		fprintf(f, "group %d: %s '%s'", i, a->op_type, a->name);
		for (int e = 0; e < gr->n_epi; e++)
			fprintf(f, " + %s '%s'", g->nodes[gr->epi[e]].op_type, g->nodes[gr->epi[e]].name);
		for (int j = 0; j < gr->n_gather; j++)
			fprintf(f, " (through %s '%s')", g->nodes[gr->gather[j]].op_type, g->nodes[gr->gather[j]].name);
		fprintf(f, "%s\n", gr->slabs ? "  (no kernel: its inputs store into it)"
		                   : gr->alias ? "  (no kernel: shares its input's bytes)" : "");
	}
}

/* Whether the storage of group gi's anchor input 0 is read by no later
 * group (nor is a graph output): a lowering may then write over it. The
 * plan still checks where the kernels end up (the order stage may move a
 * reader after it). */
static bool input0_dies_in(const build *b, const int *group_of, int gi)
{
	const mc_graph *g = b->g;
	const mc_node *a = &g->nodes[b->groups[gi].anchor];
	if (a->n_inputs < 1 || a->inputs[0] < 0)
		return false;
	int r = b->m.root[a->inputs[0]];
	if (!in_arena(b, r))
		return false;
	/* within the group, only input 0 itself, or an epilogue operand read
	 * at the element being written, may read that storage */
	const mc_group *gr = &b->groups[gi];
	for (int k = 1; k < a->n_inputs; k++)
		if (a->inputs[k] >= 0 && b->m.root[a->inputs[k]] == r)
			return false;
	int out = g->nodes[gr->n_epi ? gr->epi[gr->n_epi - 1] : gr->anchor].outputs[0];
	for (int e = 0; e < gr->n_epi; e++) {
		const mc_node *en = &g->nodes[gr->epi[e]];
		for (int k = 0; k < en->n_inputs; k++)
			if (k != gr->epi_chain_in[e] && en->inputs[k] >= 0 && b->m.root[en->inputs[k]] == r &&
			    (out < 0 || !mc_shape_eq(&g->values[en->inputs[k]].shape, &g->values[out].shape)))
				return false;
	}
	for (int u = 0; u < g->n_values; u++) {
		if (b->m.root[u] != r)
			continue;
		if (ge_is_graph_output(g, u))
			return false;
		for (int n = 0; n < g->n_nodes; n++)
			for (int i = 0; i < g->nodes[n].n_inputs; i++)
				if (g->nodes[n].inputs[i] == u && group_of[n] > gi)
					return false;
	}
	return true;
}

/* lower: one kernel per group that is not an alias, and a copy into each
 * graph output no kernel writes directly; each checked by the kernel-IR
 * verifier (aot/kcheck.c). The plan's validator runs in mc_plan_memory. */
static int stage_lower(build *b)
{
	mc_graph *g = b->g;
	mc_program *p = b->p;
	bool for_memory = b->o->optimize && !strcmp(b->o->optimize, "memory");
	int *group_of = for_memory ? mc_group_of_nodes(g, b->groups, b->n_groups) : NULL;
	for (int i = 0; i < b->n_groups; i++) {
		const mc_group *gr = &b->groups[i];
		b->group_kernel[i] = -1;
		if (gr->alias)
			continue;
		char name[64], *comment;
		group_names(g, gr, p->n_kernels, p, name, sizeof name, &comment);
		mc_kernel *k = new_kernel(p, name, comment);
		mc_kb kb;
		mc_kb_begin(&kb, p->pool, k);
		kb.isa = p->target.isa;
		kb.target = p->target.desc;
		kb.for_memory = for_memory;
		kb.sizes_vary = b->o->sizes_vary;
		kb.for_size = b->o->optimize && !strcmp(b->o->optimize, "size");
		kb.threads = p->threads;
		kb.blas = p->blas && p->target.activations == MC_FLOAT; /* sgemm's float32 output */
		kb.blas_min_macs = p->blas_min_macs;
		kb.input0_dies = for_memory && input0_dies_in(b, group_of, i);
		const mc_node *an = &g->nodes[gr->anchor];
		unsigned long errors = mc_error_count();
		if (mc_lower_group(g, gr, &kb, mc_lowering_find(an->id)) || mc_error_count() != errors) {
			free(group_of);
			return -1;
		}
		if (kb.depth != 0) {
			free(group_of);
			return mc_node_error(an, "lowering left %d blocks open", kb.depth);
		}
		if (an->guard) {
			/* the condition stays live while a branch may run */
			mc_kb_buf(&kb, an->guard - 1, MC_BOOL, 1, false);
			b->kguard[p->n_kernels - 1] = an->guard;
			b->kelse[p->n_kernels - 1] = an->guard_else;
		}
		b->group_kernel[i] = p->n_kernels - 1;
	}
	free(group_of);
	for (int j = 0; j < g->n_outputs; j++)
		if (b->copy_out[j])
			copy_to_output(g, p, g->outputs[j], j);
	/* --threads: the loops the workers split, before the plan sizes the
	 * scratch copies they ask for (aot/ksplit.c) */
	for (int s = 0; s < p->n_kernels; s++)
		mc_ksplit_plan(p->pool, p->kernels[s], p->threads, p->threads_min_work);
	return mc_program_check(p);
}

void mc_program_dump_kernels(const void *p, FILE *f)
{
	const mc_program *prog = p;
	for (int i = 0; i < prog->n_kernels; i++)
		mc_kernel_dump(prog->kernels[i], f);
}

static void dump_kernels(const void *ctx, FILE *f)
{
	mc_program_dump_kernels(((const build *)ctx)->p, f);
}

/* storage: the dtype each value is stored in, decided before the plan so
 * that it sizes what is stored. Float32 values in the arena take
 * act_store (the kernels widen on load and round on store, computing in
 * float32); graph inputs and outputs and constants keep their dtype here
 * (float constants become weight_store weights when placed). */
static int stage_storage(build *b)
{
	const mc_graph *g = b->g;
	value_maps *m = &b->m;
	for (int v = 0; v < g->n_values; v++) {
		int r = m->root[v];
		const mc_value *rv = &g->values[r];
		/* graph inputs and outputs keep their dtype, in the arena too */
		bool activation = rv->kind == MC_VAL_NODE && m->out_slot[r] < 0 && !b->output_root[r];
		b->store[v] = rv->dtype == MC_FLOAT && activation ? b->act_store : g->values[v].dtype;
		/* a slab's offset into its root, in the root's stored bytes */
		if (b->store[v] != g->values[v].dtype)
			m->off[v] = m->off[v] / mc_dtype_size(g->values[v].dtype) * mc_dtype_size(b->store[v]);
	}
	for (int s = 0; s < b->p->n_kernels; s++) {
		mc_kernel *k = b->p->kernels[s];
		for (int i = 0; i < k->n_bufs; i++) {
			mc_kbuf *kb = &k->bufs[i];
			if (kb->value >= 0 && kb->dtype == MC_FLOAT && g->values[kb->value].kind == MC_VAL_NODE)
				kb->dtype = b->store[kb->value];
		}
	}
	return 0;
}

static void dump_storage(const void *ctx, FILE *f)
{
	const build *b = ctx;
	const mc_graph *g = b->g;
	int changed = 0;
	for (int v = 0; v < g->n_values; v++)
		if (b->store[v] != g->values[v].dtype) {
			fprintf(f, "value '%s': %s stored as %s\n", g->values[v].name,
			        mc_dtype_name(g->values[v].dtype), mc_dtype_name(b->store[v]));
			changed++;
		}
	fprintf(f, "%d value%s stored in another dtype; float32 weights stored as %s\n", changed,
	        changed == 1 ? "" : "s", mc_dtype_name(b->weight_store));
}

/* liveness: the first and last step that touches each storage root. */
static int stage_liveness(build *b)
{
	for (int v = 0; v < b->g->n_values; v++)
		b->first[v] = b->last[v] = -1;
	for (int s = 0; s < b->p->n_kernels; s++) {
		const mc_kernel *k = b->p->kernels[s];
		for (int i = 0; i < k->n_bufs; i++) {
			int v = k->bufs[i].value;
			if (v < 0)
				continue;
			int r = b->m.root[v];
			if (b->first[r] < 0 || s < b->first[r])
				b->first[r] = s;
			if (s > b->last[r])
				b->last[r] = s;
		}
	}
	/* a counted output's count is read after the last kernel */
	for (int j = 0; j < b->g->n_outputs; j++) {
		const mc_value *ov = &b->g->values[b->g->outputs[j]];
		if (ov->counted)
			b->last[b->m.root[ov->count_value]] = b->p->n_kernels > 0 ? b->p->n_kernels - 1 : 0;
	}
	if (b->o->io_in_arena) {
		/* the caller writes the inputs before the run (each gets a place,
		 * read or not) and reads the outputs after it */
		int end = b->p->n_kernels > 0 ? b->p->n_kernels - 1 : 0;
		for (int i = 0; i < b->g->n_inputs; i++) {
			int r = b->m.root[b->g->inputs[i]];
			b->first[r] = 0;
			if (b->last[r] < 0)
				b->last[r] = 0;
		}
		for (int v = 0; v < b->g->n_values; v++)
			if (b->output_root[v]) {
				if (b->first[v] < 0)
					b->first[v] = 0;
				b->last[v] = end;
			}
	}
	return 0;
}

static void dump_liveness(const void *ctx, FILE *f)
{
	const build *b = ctx;
	for (int v = 0; v < b->g->n_values; v++)
		if (b->first[v] >= 0)
			fprintf(f, "value '%s': steps %d..%d\n", b->g->values[v].name, b->first[v], b->last[v]);
}

static void add_request(build *b, size_t bytes, int first, int last, int what)
{
	int cap = b->cap_reqs;
	b->reqs = mc_grow_array(b->reqs, &b->cap_reqs, b->n_reqs + 1, sizeof *b->reqs);
	b->req_what = mc_grow_array(b->req_what, &cap, b->cap_reqs, sizeof *b->req_what);
	b->reqs[b->n_reqs] = (mc_mem_req){ .bytes = bytes, .first = first, .last = last, .inplace_of = -1 };
	b->req_what[b->n_reqs++] = what;
}

/* The memory request of a kernel buffer that is not a value: its scratch,
 * or a constant output's copy under --io-in-arena; -1 for none. */
static int buf_request(const build *b, const mc_kbuf *kb)
{
	if (kb->value >= 0)
		return b->m.req[b->m.root[kb->value]];
	if (kb->transient)
		return -1;
	if (kb->loc.kind == MC_LOC_NONE)
		return kb->loc.index;
	if (kb->loc.kind == MC_LOC_OUTPUT && b->o->io_in_arena)
		return b->out_req[kb->loc.index];
	return -1;
}

/* The request scratch buffer i of kernel s may lie over (its grows_over:
 * a value that dies at s, whose storage no other buffer of the kernel
 * reads: the kernel vouches for its own reads of it), or -1. */
static int scratch_over(const build *b, int s, int i)
{
	const mc_kernel *k = b->p->kernels[s];
	int o = k->bufs[i].grows_over;
	int v = o >= 0 ? k->bufs[o].value : -1;
	if (v < 0)
		return -1;
	int r = b->m.root[v];
	if (b->m.req[r] < 0 || b->last[r] != s || b->m.off[v] != 0)
		return -1;
	for (int j = 0; j < k->n_bufs; j++)
		if (j != o && k->bufs[j].value >= 0 && b->m.root[k->bufs[j].value] == r)
			return -1;
	return b->m.req[r];
}

/* plan: a memory request per arena root and per kernel scratch, in-place
 * candidates, and the offsets (aot/plan.c). */
static int stage_plan(build *b)
{
	const mc_graph *g = b->g;
	mc_program *p = b->p;
	value_maps *m = &b->m;
	for (int v = 0; v < g->n_values; v++) {
		if (m->root[v] != v || b->first[v] < 0 || !in_arena(b, v))
			continue;
		m->req[v] = b->n_reqs;
		add_request(b, store_bytes(b, v), b->first[v], b->last[v], v);
	}
	for (int i = 0; i < b->n_groups; i++) {
		const mc_group *gr = &b->groups[i];
		if (gr->alias || b->group_kernel[i] < 0)
			continue;
		int out = g->nodes[gr->n_epi ? gr->epi[gr->n_epi - 1] : gr->anchor].outputs[0];
		if (out < 0 || m->root[out] != out || m->req[out] < 0)
			continue;
		int src = inplace_candidate(b, gr, b->group_kernel[i], out), in0 = g->nodes[gr->anchor].inputs[0];
		b->reqs[m->req[out]].inplace_of = src;
		/* only over the input its kernel writes over in order */
		b->reqs[m->req[out]].grows = src >= 0 && p->kernels[b->group_kernel[i]]->inplace_grows &&
		                             in0 >= 0 && src == m->req[m->root[in0]];
	}
	for (int s = 0; s < p->n_kernels; s++) {
		mc_kernel *k = p->kernels[s];
		for (int i = 0; i < k->n_bufs; i++)
			if (k->bufs[i].value < 0 && k->bufs[i].loc.kind == MC_LOC_NONE && !k->bufs[i].transient) {
				k->bufs[i].loc.index = b->n_reqs; /* request index until placed */
				add_request(b, mc_kbuf_storage_count(&k->bufs[i]) * mc_dtype_size(k->bufs[i].dtype), s, s,
				            -1 - s);
				int over = scratch_over(b, s, i);
				if (over >= 0) {
					b->reqs[b->n_reqs - 1].inplace_of = over;
					b->reqs[b->n_reqs - 1].grows = true;
				}
			} else if (k->bufs[i].value < 0 && k->bufs[i].loc.kind == MC_LOC_OUTPUT && b->o->io_in_arena) {
				/* a constant output's copy: in the arena to the run's end */
				b->out_req[k->bufs[i].loc.index] = b->n_reqs;
				add_request(b, k->bufs[i].count * mc_dtype_size(k->bufs[i].dtype), s,
				            p->n_kernels - 1, -1 - s);
			}
	}
	if (mc_plan_memory(b->reqs, b->n_reqs, ARENA_ALIGN, &b->plan))
		return -1;
	p->arena_bytes = b->plan.arena_bytes;
	p->lower_bound = b->plan.lower_bound;
	return 0;
}

/* Puts the kernels in the order `order` (order[i]: the old index of the
 * i-th), with what is indexed by kernel. */
static void permute_kernels(build *b, const int *order)
{
	mc_program *p = b->p;
	int n = p->n_kernels;
	mc_kernel **old = mc_xcalloc((size_t)n, sizeof *old);
	int *guard = mc_xcalloc((size_t)n, sizeof(int)), *inv = mc_xcalloc((size_t)n, sizeof(int));
	bool *els = mc_xcalloc((size_t)n, sizeof(bool));
	memcpy(old, p->kernels, (size_t)n * sizeof *old);
	memcpy(guard, b->kguard, (size_t)n * sizeof(int));
	memcpy(els, b->kelse, (size_t)n * sizeof(bool));
	for (int i = 0; i < n; i++) {
		p->kernels[i] = old[order[i]];
		b->kguard[i] = guard[order[i]];
		b->kelse[i] = els[order[i]];
		inv[order[i]] = i;
	}
	for (int i = 0; i < b->n_groups; i++)
		if (b->group_kernel[i] >= 0)
			b->group_kernel[i] = inv[b->group_kernel[i]];
	free(old);
	free(guard);
	free(inv);
	free(els);
}

/* Liveness and the plan again, for the kernels' present order. */
static int replan(build *b)
{
	for (int v = 0; v < b->g->n_values; v++)
		b->m.req[v] = -1;
	b->n_reqs = 0;
	mc_mem_plan_free(&b->plan);
	return stage_liveness(b) || stage_plan(b);
}

/* order: the kernels in an order whose plan needs a smaller arena, where
 * the search (aot/order.c) finds one: the arena's buffers live across
 * fewer steps together (a branch run where its result is needed, not
 * where the graph lists it). Kernels of If branches keep their order. */
static int stage_order(build *b)
{
	mc_program *p = b->p;
	int n = p->n_kernels;
	p->arena_in_order = p->arena_bytes;
	p->lower_bound_in_order = p->lower_bound;
	for (int s = 0; s < n; s++)
		if (b->kguard[s])
			return 0;
	if (n < 3 || p->arena_bytes == 0)
		return 0;
	/* every stored value orders its kernels (an output slot read later,
	 * too); only the arena's count bytes */
	const mc_graph *g = b->g;
	size_t *root_bytes = mc_xcalloc((size_t)g->n_values + 1, sizeof(size_t));
	for (int v = 0; v < g->n_values; v++)
		if (b->m.root[v] == v && b->m.req[v] >= 0)
			root_bytes[v] = b->reqs[b->m.req[v]].bytes;
	mc_order_kernel *ok = mc_xcalloc((size_t)n, sizeof *ok);
	for (int s = 0; s < n; s++) {
		const mc_kernel *k = p->kernels[s];
		int *roots = mc_xcalloc((size_t)k->n_bufs + 1, sizeof(int));
		bool *wr = mc_xcalloc((size_t)k->n_bufs + 1, sizeof(bool));
		for (int i = 0; i < k->n_bufs; i++) {
			const mc_kbuf *kb = &k->bufs[i];
			if (kb->value < 0) {
				if (kb->loc.kind == MC_LOC_NONE && !kb->transient)
					ok[s].scratch += b->reqs[kb->loc.index].bytes;
				continue;
			}
			if (g->values[kb->value].kind == MC_VAL_CONST)
				continue;
			roots[ok[s].n_touch] = b->m.root[kb->value];
			wr[ok[s].n_touch++] = kb->written;
		}
		ok[s].roots = roots;
		ok[s].writes = wr;
	}
	int *order = mc_xcalloc((size_t)n, sizeof(int));
	mc_order_for_memory(n, ok, g->n_values, root_bytes, order);
	bool moved = false;
	for (int s = 0; s < n; s++)
		moved |= order[s] != s;
	int rc = 0;
	if (moved) {
		permute_kernels(b, order);
		rc = replan(b);
		if (!rc && p->arena_bytes >= p->arena_in_order) {
			/* no gain in the plan itself: the given order stays */
			int *back = mc_xcalloc((size_t)n, sizeof(int));
			for (int s = 0; s < n; s++)
				back[order[s]] = s;
			permute_kernels(b, back);
			free(back);
			rc = replan(b);
		}
	}
	for (int s = 0; s < n; s++) {
		free((void *)ok[s].roots);
		free((void *)ok[s].writes);
	}
	free(ok);
	free(order);
	free(root_bytes);
	return rc;
}

/* pools: with --pool, each arena buffer in a pool of its own memory, the
 * first pools taking the buffers the most kernels touch (per byte, the
 * most traffic), and each pool planned alone (aot/pools.c); the offsets
 * in the plan become offsets into the buffer's pool. */
static int stage_pools(build *b)
{
	mc_program *p = b->p;
	mc_pool_spec spec[MC_MAX_POOLS];
	int n = mc_pool_specs(b->o, spec);
	if (n < 0)
		return -1;
	if (n == 1 && spec[0].bytes && p->arena_bytes > spec[0].bytes)
		return mc_error("--pool %s: the arena needs %zu bytes, more than its %zu", spec[0].name,
		                p->arena_bytes, spec[0].bytes), -1;
	if (n < 2)
		return 0;
	double *touches = mc_xcalloc((size_t)b->n_reqs + 1, sizeof(double));
	for (int s = 0; s < p->n_kernels; s++) {
		const mc_kernel *k = p->kernels[s];
		for (int i = 0; i < k->n_bufs; i++) {
			int r = buf_request(b, &k->bufs[i]);
			if (r >= 0)
				touches[r] += 1;
		}
	}
	size_t cap[MC_MAX_POOLS];
	for (int k = 0; k < n; k++)
		cap[k] = spec[k].bytes;
	b->req_pool = mc_xcalloc((size_t)b->n_reqs + 1, sizeof(int));
	int rc = mc_plan_pools(b->reqs, b->n_reqs, touches, ARENA_ALIGN, cap, n, b->req_pool,
	                       b->plan.offsets, p->pool_bytes);
	free(touches);
	if (rc)
		return -1;
	p->n_pools = n;
	size_t at = 0;
	for (int k = 0; k < n; k++) {
		memcpy(p->pool_names[k], spec[k].name, sizeof p->pool_names[k]);
		p->pool_at[k] = at;
		if (!mc_add_size(at, (p->pool_bytes[k] + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN, &at))
			return mc_error("--pool: the pools overflow size_t"), -1;
	}
	p->arena_bytes = at;
	return 0;
}

static void dump_pools(const void *ctx, FILE *f)
{
	const build *b = ctx;
	const mc_program *p = b->p;
	if (!p->n_pools) {
		fprintf(f, "one arena of %zu bytes\n", p->arena_bytes);
		return;
	}
	for (int k = 0; k < p->n_pools; k++)
		fprintf(f, "pool %d '%s': %zu bytes (at %zu of the one-arena layout)\n", k, p->pool_names[k],
		        p->pool_bytes[k], p->pool_at[k]);
	for (int i = 0; i < b->n_reqs; i++) {
		int w = b->req_what[i];
		fprintf(f, "%-6d pool %d %12zu %12zu  ", i, b->req_pool[i], b->plan.offsets[i], b->reqs[i].bytes);
		if (w >= 0)
			fprintf(f, "value '%s'\n", b->g->values[w].name);
		else
			fprintf(f, "scratch of %s\n", p->kernels[-1 - w]->name);
	}
}

/* The memory plan, TFLM's PrintMemoryPlan in text: one line per buffer
 * with its place and life, then the arena against its lower bound at the
 * step where the most bytes are live. */
static void dump_plan(const void *ctx, FILE *f)
{
	const build *b = ctx;
	const mc_mem_plan *pl = &b->plan;
	int n_steps = b->p->n_kernels, peak_step = -1;
	size_t peak = 0;
	fprintf(f, "%-6s %12s %12s %6s %6s  %s\n", "buffer", "offset", "bytes", "first", "last", "what");
	for (int i = 0; i < b->n_reqs; i++) {
		const mc_mem_req *r = &b->reqs[i];
		int w = b->req_what[i];
		fprintf(f, "%-6d %12zu %12zu %6d %6d  ", i, pl->offsets[i], r->bytes, r->first, r->last);
		if (w >= 0)
			fprintf(f, "value '%s'", b->g->values[w].name);
		else
			fprintf(f, "scratch of %s", b->p->kernels[-1 - w]->name);
		if (r->inplace_of >= 0)
			fprintf(f, " (in place of buffer %d)", r->inplace_of);
		fputc('\n', f);
	}
	for (int s = 0; s < n_steps; s++) {
		size_t live = 0;
		for (int i = 0; i < b->n_reqs; i++)
			if (b->reqs[i].first <= s && s <= b->reqs[i].last)
				live += b->reqs[i].bytes;
		if (live > peak || peak_step < 0) {
			peak = live;
			peak_step = s;
		}
	}
	fprintf(f, "arena %zu bytes; peak %zu bytes live at step %d, in-place pairs counted apart "
	           "(lower bound %zu)\n", pl->arena_bytes, peak, peak_step, pl->lower_bound);
}

/* A weight in the dtype it is stored in: a float32 tensor becomes
 * weight_store (converted once, owned by the program). */
static const mc_tensor *stored_weight(build *b, const mc_tensor *t)
{
	if (t->dtype != MC_FLOAT || b->weight_store != MC_FLOAT16)
		return t;
	mc_program *p = b->p;
	mc_tensor *h = mc_tensor_new(MC_FLOAT16, &t->shape);
	if (!h) {
		mc_error("--dtype fp16: no memory for a weight of %zu elements", t->numel);
		return NULL;
	}
	const float *src = t->data;
	uint16_t *dst = h->data;
	for (size_t j = 0; j < t->numel; j++)
		dst[j] = mc_float_to_half(src[j]);
	p->owned = mc_grow_array(p->owned, &p->cap_owned, p->n_owned + 1, sizeof *p->owned);
	p->owned[p->n_owned++] = h;
	return h;
}

static uint64_t bytes_hash(const void *data, size_t n)
{
	const unsigned char *c = data;
	uint64_t h = 1469598103934665603u; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 1099511628211u;
	return h;
}

/* The program's weight holding t's bytes: one stored copy per distinct
 * content (two Gemms packing one initializer alike, equal constants the
 * exporter wrote twice), a new weight otherwise. */
static int add_weight(build *b, const mc_tensor *t)
{
	mc_program *p = b->p;
	const mc_tensor *w = stored_weight(b, t);
	if (!w)
		return -1;
	uint64_t h = bytes_hash(w->data, w->nbytes);
	for (int i = 0; i < p->n_weights; i++) {
		const mc_tensor *o = p->weights[i].t;
		if (b->weight_hash[i] == h && o->dtype == w->dtype && o->numel == w->numel &&
		    o->nbytes == w->nbytes && !memcmp(o->data, w->data, w->nbytes))
			return i;
	}
	int cap = p->cap_weights;
	p->weights = mc_grow_array(p->weights, &p->cap_weights, p->n_weights + 1, sizeof *p->weights);
	b->weight_hash = mc_grow_array(b->weight_hash, &cap, p->cap_weights, sizeof *b->weight_hash);
	b->weight_hash[p->n_weights] = h;
	p->weights[p->n_weights] = (mc_weight){ .t = w, .align = ARENA_ALIGN };
	p->weight_bytes += w->nbytes;
	return p->n_weights++;
}

/* The place of request r, plus off bytes: its pool's, where there are. */
static mc_loc arena_loc(const build *b, int r, size_t off)
{
	return (mc_loc){ .kind = MC_LOC_ARENA, .index = b->req_pool ? b->req_pool[r] : 0,
	                 .offset = b->plan.offsets[r] + off };
}

/* Where value v lives: its storage root's place, plus its offset in it. */
static int value_loc(build *b, int v, mc_loc *loc)
{
	const mc_graph *g = b->g;
	value_maps *m = &b->m;
	int r = m->root[v];
	const mc_value *rv = &g->values[r];
	if (rv->kind == MC_VAL_CONST) {
		if (m->weight[r] < 0 && (m->weight[r] = add_weight(b, rv->konst)) < 0)
			return -1;
		*loc = (mc_loc){ .kind = MC_LOC_WEIGHT, .index = m->weight[r] };
	} else if (m->req[r] >= 0)
		*loc = arena_loc(b, m->req[r], m->off[v]);
	else if (rv->kind == MC_VAL_INPUT)
		*loc = (mc_loc){ .kind = MC_LOC_INPUT, .index = find_input(g, r) };
	else if (m->out_slot[r] >= 0)
		*loc = (mc_loc){ .kind = MC_LOC_OUTPUT, .index = m->out_slot[r] };
	else
		return mc_error("internal: value '%s' has no place", rv->name), -1;
	return 0;
}

/* ---- constant fills: read as a number, never stored ----
 * A constant whose elements are all equal (ConstantOfShape, Expand of a
 * scalar, the zeros a Concat pads channels with, once folded) costs flash
 * for nothing: every load of it becomes that number (a splat for a vector
 * load), and a constant no statement reads then never becomes a weight. */
typedef struct {
	mc_kpool *pool;
	const bool *fill;       /* per kernel buffer: a constant fill no template reads */
	mc_kexpr **value;       /* per kernel buffer: its number, a scalar constant */
} fill_loads;

static void fold_fill_expr(const fill_loads *fl, mc_kexpr *x)
{
	for (; x; x = x->b) {
		if (x->kind == MC_KE_LOAD && fl->fill[x->buf]) {
			const mc_kexpr *v = fl->value[x->buf];
			if (x->lanes > 1) {
				/* a vector load widens each element as the scalar does */
				mc_kexpr *c = mc_kpool_alloc(fl->pool, sizeof *c);
				*c = *v;
				c->type = x->type;
				x->kind = MC_KE_SPLAT;
				x->a = c;
				x->stride = 0;
			} else {
				x->kind = MC_KE_CONST;
				x->i = v->i;
				x->f = v->f;
				x->a = NULL;
			}
			x->buf = 0;
			return; /* a load's only operand is its index */
		}
		fold_fill_expr(fl, x->a);
		fold_fill_expr(fl, x->c);
	}
}

static void fold_fill_block(const fill_loads *fl, mc_kstmt *s)
{
	for (; s; s = s->next) {
		fold_fill_expr(fl, s->a);
		fold_fill_expr(fl, s->b);
		fold_fill_expr(fl, s->c);
		fold_fill_block(fl, s->body);
		fold_fill_block(fl, s->orelse);
	}
}

static void mark_template_bufs(const mc_kstmt *s, bool *used)
{
	for (; s; s = s->next) {
		if (s->kind == MC_KS_TEMPLATE) {
			/* every buffer field, set or not: a field a kind leaves at 0
			 * keeps buffer 0 stored, which costs nothing but flash */
			const mc_ktemplate *t = s->tmpl;
			const int fields[] = { t->x, t->wt, t->out, t->bias, t->y, t->consts, t->cell, t->v, t->mask };
			for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
				if (fields[i] >= 0)
					used[fields[i]] = true;
		}
		mark_template_bufs(s->body, used);
		mark_template_bufs(s->orelse, used);
	}
}

/* The number every element of t holds, as a constant of the type a load
 * of it has (the value it has once stored: float32 as weight_store); NULL
 * if t's elements differ. */
static mc_kexpr *fill_value(const build *b, mc_kpool *pool, const mc_tensor *t, mc_ktype type)
{
	if (t->numel == 0 || t->nbytes % t->numel)
		return NULL;
	size_t elt = t->nbytes / t->numel;
	const unsigned char *d = t->data;
	for (size_t i = 1; i < t->numel; i++)
		if (memcmp(d, d + i * elt, elt))
			return NULL;
	mc_kexpr *c = mc_kpool_alloc(pool, sizeof *c);
	c->kind = MC_KE_CONST;
	c->type = type;
	if (mc_ktype_is_float(type)) {
		double v = mc_get_f(t, 0);
		if (t->dtype == MC_FLOAT && b->weight_store == MC_FLOAT16)
			v = mc_half_to_float(mc_float_to_half((float)v));
		c->f = type == MC_KT_F32 ? (double)(float)v : v;
	} else {
		c->i = mc_get_i(t, 0);
		if (type == MC_KT_BOOL)
			c->i = c->i != 0;
		c->f = (double)c->i;
	}
	return c;
}

static void fold_fill_loads(const build *b, mc_kernel *k, const bool *in_template)
{
	const mc_graph *g = b->g;
	bool *fill = mc_xcalloc((size_t)k->n_bufs + 1, sizeof(bool));
	mc_kexpr **value = mc_xcalloc((size_t)k->n_bufs + 1, sizeof *value);
	bool any = false;
	for (int i = 0; i < k->n_bufs; i++) {
		const mc_kbuf *kb = &k->bufs[i];
		const mc_tensor *t = kb->packed;
		if (!t && kb->value >= 0 && g->values[b->m.root[kb->value]].kind == MC_VAL_CONST)
			t = g->values[b->m.root[kb->value]].konst;
		if (!t || kb->written || in_template[i])
			continue;
		value[i] = fill_value(b, b->p->pool, t, mc_ktype_of(kb->dtype));
		any |= fill[i] = value[i] != NULL;
	}
	if (any)
		fold_fill_block(&(fill_loads){ b->p->pool, fill, value }, k->body);
	free(fill);
	free(value);
}

/* place: every kernel buffer's location (arena offset, weight, input or
 * output slot); constants a kernel reads become weights, in the dtype
 * they are stored in. */
static int stage_place(build *b)
{
	const mc_graph *g = b->g;
	mc_program *p = b->p;
	for (int s = 0; s < p->n_kernels; s++) {
		mc_kernel *k = p->kernels[s];
		bool *in_template = mc_xcalloc((size_t)k->n_bufs + 1, sizeof(bool));
		mark_template_bufs(k->body, in_template);
		fold_fill_loads(b, k, in_template);
		bool *used = mc_xcalloc((size_t)k->n_bufs + 1, sizeof(bool));
		mark_block(k->body, used);
		int rc = 0;
		for (int i = 0; i < k->n_bufs && !rc; i++) {
			mc_kbuf *kb = &k->bufs[i];
			/* an unread constant, or a packed one whose loads all became
			 * numbers, is no weight */
			if (!used[i] && !in_template[i] &&
			    ((kb->value >= 0 && g->values[kb->value].kind == MC_VAL_CONST) || kb->packed)) {
				kb->loc = (mc_loc){ .kind = MC_LOC_NONE };
				continue;
			}
			if ((int64_t)kb->count > p->max_index)
				p->max_index = (int64_t)kb->count;
			if (kb->packed) {
				int w = add_weight(b, kb->packed);
				rc = w < 0;
				kb->loc = (mc_loc){ .kind = MC_LOC_WEIGHT, .index = w };
			} else if (kb->value < 0) {
				int r = buf_request(b, kb);
				if (r >= 0)
					kb->loc = arena_loc(b, r, 0);
				continue;
			} else {
				kb->slab = b->m.off[kb->value];
				rc = value_loc(b, kb->value, &kb->loc);
			}
			/* a float32 weight read as float32 is read as it is stored */
			const mc_tensor *src = kb->packed ? kb->packed : g->values[b->m.root[kb->value]].konst;
			if (!rc && kb->loc.kind == MC_LOC_WEIGHT && kb->dtype == MC_FLOAT && src->dtype == MC_FLOAT)
				kb->dtype = b->weight_store;
		}
		free(used);
		free(in_template);
		if (rc)
			return -1;
	}
	return 0;
}

/* steps: the run function's steps, and the graph's inputs and outputs. */
static int stage_steps(build *b)
{
	const mc_graph *g = b->g;
	mc_program *p = b->p;
	if (make_steps(b))
		return -1;
	p->n_inputs = g->n_inputs;
	p->n_outputs = g->n_outputs;
	p->inputs = mc_xcalloc((size_t)g->n_inputs + 1, sizeof *p->inputs);
	p->outputs = mc_xcalloc((size_t)g->n_outputs + 1, sizeof *p->outputs);
	for (int i = 0; i < g->n_inputs; i++) {
		const mc_value *v = &g->values[g->inputs[i]];
		p->inputs[i] = (mc_io_desc){ .name = mc_xstrdup(v->name), .dtype = v->dtype, .shape = v->shape,
		                             .scale = v->io_scale, .zero_point = v->io_zero_point };
	}
	for (int i = 0; i < g->n_outputs; i++) {
		const mc_value *v = &g->values[g->outputs[i]];
		p->outputs[i] = (mc_io_desc){ .name = mc_xstrdup(v->name), .dtype = v->dtype, .shape = v->shape,
		                              .scale = v->io_scale, .zero_point = v->io_zero_point };
		if (v->counted) {
			p->outputs[i].counted = true;
			p->outputs[i].count_axis = v->count_axis;
			if (value_loc(b, v->count_value, &p->outputs[i].count_at))
				return -1;
		}
	}
	if (!b->o->io_in_arena)
		return 0;
	p->io_in_arena = true;
	p->input_at = mc_xcalloc((size_t)g->n_inputs + 1, sizeof *p->input_at);
	p->output_at = mc_xcalloc((size_t)g->n_outputs + 1, sizeof *p->output_at);
	for (int i = 0; i < g->n_inputs; i++)
		if (value_loc(b, g->inputs[i], &p->input_at[i]))
			return -1;
	for (int j = 0; j < g->n_outputs; j++) {
		if (b->copy_out[j])
			p->output_at[j] = arena_loc(b, b->out_req[j], 0);
		else if (value_loc(b, g->outputs[j], &p->output_at[j]))
			return -1;
	}
	return 0;
}

static void dump_steps_of(const mc_program *p, const mc_step *st, int n, int depth, FILE *f)
{
	for (int i = 0; i < n; i++) {
		fprintf(f, "%*s", 2 * depth, "");
		if (st[i].kind == MC_STEP_KERNEL) {
			fprintf(f, "run %s\n", p->kernels[st[i].kernel]->name);
			continue;
		}
		fprintf(f, "if (bool at %s %d + %zu)\n", st[i].cond.kind == MC_LOC_WEIGHT ? "weight" : "place",
		        st[i].cond.index, st[i].cond.offset);
		dump_steps_of(p, st[i].then_steps, st[i].n_then, depth + 1, f);
		fprintf(f, "%*selse\n", 2 * depth, "");
		dump_steps_of(p, st[i].else_steps, st[i].n_else, depth + 1, f);
	}
}

static void dump_steps(const void *ctx, FILE *f)
{
	const build *b = ctx;
	dump_steps_of(b->p, b->p->steps, b->p->n_steps, 0, f);
}

static const struct {
	const char *name;
	int (*run)(build *b);
	void (*dump)(const void *b, FILE *f);
} stages[] = {
	{ "schedule", stage_schedule, dump_schedule },
	{ "lower", stage_lower, dump_kernels },
	{ "storage", stage_storage, dump_storage },
	{ "liveness", stage_liveness, dump_liveness },
	{ "plan", stage_plan, dump_plan },
	{ "order", stage_order, dump_plan },
	{ "pools", stage_pools, dump_pools },
	{ "place", stage_place, dump_kernels },
	{ "steps", stage_steps, dump_steps },
};

bool mc_program_stage_known(const char *name)
{
	for (size_t i = 0; i < sizeof stages / sizeof *stages; i++)
		if (!strcmp(stages[i].name, name))
			return true;
	return false;
}

int mc_dump_after(const mc_compile_opts *o, int seq, const char *what,
                  void (*write)(const void *ctx, FILE *f), const void *ctx)
{
	if (!o->dump_after || !o->dump_dir || (strcmp(o->dump_after, "all") && strcmp(o->dump_after, what)))
		return 0;
	if (mc_mkdir_p(o->dump_dir, "dump directory"))
		return -1;
	char path[4096];
	snprintf(path, sizeof path, "%s/%02d-%s.txt", o->dump_dir, seq, what);
	FILE *f = fopen(path, "w");
	if (!f)
		return mc_error("cannot write '%s': %s", path, strerror(errno)), -1;
	write(ctx, f);
	if (ferror(f) | fclose(f))
		return mc_error("cannot write '%s': write failed", path), -1;
	return 0;
}

/* ---- what --report draws (mc_program_map) ---- */

/* The ONNX nodes of group gr, and their MACs, as kernel mk's. */
static void map_group_nodes(const build *b, const mc_group *gr, mc_map_kernel *mk)
{
	const mc_graph *g = b->g;
	mc_kpool *pool = b->p->pool;
	int n = 1 + gr->n_epi + gr->n_gather;
	mk->nodes = mc_kpool_alloc(pool, sizeof *mk->nodes * (size_t)n);
	for (int i = 0; i < n; i++) {
		int at = i == 0 ? gr->anchor : i <= gr->n_epi ? gr->epi[i - 1] : gr->gather[i - 1 - gr->n_epi];
		const mc_node *nd = &g->nodes[at];
		mk->nodes[i] = (mc_map_node){ mc_kpool_strdup(pool, nd->op_type), mc_kpool_strdup(pool, nd->name) };
		mk->macs += mc_node_macs(g, nd);
	}
	mk->n_nodes = n;
}

/* The tensor a kernel buffer is, as a key of map_touches: its value's
 * storage root, or n_values + j for the copy into graph output j; -1 for
 * none (a weight, scratch). */
static int tensor_key(const build *b, const mc_kbuf *kb)
{
	const mc_graph *g = b->g;
	if (kb->loc.kind == MC_LOC_NONE)
		return -1;
	if (kb->value < 0)
		return kb->loc.kind == MC_LOC_OUTPUT ? g->n_values + kb->loc.index : -1;
	int r = b->m.root[kb->value];
	return g->values[r].kind == MC_VAL_CONST ? -1 : r;
}

static mc_map_tensor key_tensor(const build *b, const mc_kbuf *kb, int key)
{
	const mc_graph *g = b->g;
	if (key >= g->n_values)
		return (mc_map_tensor){ mc_kpool_strdup(b->p->pool, g->values[g->outputs[key - g->n_values]].name),
		                        MC_MAP_OUTPUT };
	return (mc_map_tensor){ mc_kpool_strdup(b->p->pool, g->values[key].name),
	                        g->values[key].kind == MC_VAL_INPUT ? MC_MAP_INPUT
	                        : kb->loc.kind == MC_LOC_OUTPUT || b->output_root[key] ? MC_MAP_OUTPUT
	                        : MC_MAP_ARENA };
}

/* Per kernel the tensors it touches (tensor[key]: their index in the
 * map, made on first touch; constants are weights, not tensors). */
static void map_touches(const build *b, mc_program_map *map, int *tensor)
{
	mc_program *p = b->p;
	int cap = 0;
	for (int s = 0; s < p->n_kernels; s++) {
		const mc_kernel *k = p->kernels[s];
		mc_map_kernel *mk = &map->kernels[s];
		mk->touch = mc_kpool_alloc(p->pool, sizeof *mk->touch * (size_t)(k->n_bufs + 1));
		for (int i = 0; i < k->n_bufs; i++) {
			int key = tensor_key(b, &k->bufs[i]);
			if (key < 0)
				continue;
			if (tensor[key] < 0) {
				map->tensors = mc_grow_array(map->tensors, &cap, map->n_tensors + 1, sizeof *map->tensors);
				map->tensors[map->n_tensors] = key_tensor(b, &k->bufs[i], key);
				tensor[key] = map->n_tensors++;
			}
			int t = tensor[key], j = 0;
			while (j < mk->n_touch && mk->touch[j].tensor != t)
				j++;
			if (j == mk->n_touch)
				mk->touch[mk->n_touch++] = (mc_map_touch){ t, false };
			mk->touch[j].written |= k->bufs[i].written;
		}
	}
	/* into the pool, with the rest */
	mc_map_tensor *in_pool = mc_kpool_alloc(p->pool, sizeof *in_pool * (size_t)(map->n_tensors + 1));
	if (map->n_tensors)
		memcpy(in_pool, map->tensors, sizeof *in_pool * (size_t)map->n_tensors);
	free(map->tensors);
	map->tensors = in_pool;
}

/* The final plan's requests, their offsets into their pools. */
static void map_bufs(const build *b, mc_program_map *map)
{
	mc_program *p = b->p;
	map->n_bufs = b->n_reqs;
	map->bufs = mc_kpool_alloc(p->pool, sizeof *map->bufs * (size_t)(b->n_reqs + 1));
	for (int i = 0; i < b->n_reqs; i++) {
		const mc_mem_req *r = &b->reqs[i];
		int w = b->req_what[i];
		map->bufs[i] = (mc_map_buf){
			.name = mc_kpool_strdup(p->pool, w >= 0 ? b->g->values[w].name : p->kernels[-1 - w]->name),
			.scratch = w < 0, .bytes = r->bytes, .offset = b->plan.offsets[i], .first = r->first,
			.last = r->last, .pool = b->req_pool ? b->req_pool[i] : 0, .inplace_of = r->inplace_of };
	}
}

static void keep_map(const build *b)
{
	mc_program *p = b->p;
	mc_program_map *map = mc_kpool_alloc(p->pool, sizeof *map);
	map->n_kernels = p->n_kernels;
	map->kernels = mc_kpool_alloc(p->pool, sizeof *map->kernels * (size_t)(p->n_kernels + 1));
	for (int i = 0; i < b->n_groups; i++)
		if (b->group_kernel[i] >= 0)
			map_group_nodes(b, &b->groups[i], &map->kernels[b->group_kernel[i]]);
	int keys = b->g->n_values + b->g->n_outputs;
	int *tensor = mc_xcalloc((size_t)keys + 1, sizeof(int));
	for (int v = 0; v < keys; v++)
		tensor[v] = -1;
	map_touches(b, map, tensor);
	free(tensor);
	map_bufs(b, map);
	p->map = map;
}

static void build_free(build *b)
{
	free(b->copy_out);
	free(b->output_root);
	free(b->out_req);
	free(b->kguard);
	free(b->kelse);
	free(b->group_kernel);
	free(b->first);
	free(b->last);
	free(b->store);
	free(b->m.root);
	free(b->m.off);
	free(b->m.out_slot);
	free(b->m.req);
	free(b->m.weight);
	free(b->groups);
	free(b->reqs);
	free(b->req_what);
	free(b->weight_hash);
	free(b->req_pool);
	mc_mem_plan_free(&b->plan);
}

int mc_build_program(mc_graph *g, const mc_target_config *t, const mc_compile_opts *o, mc_program *p)
{
	memset(p, 0, sizeof *p);
	p->pool = mc_kpool_new();
	p->prefix = mc_xstrdup(o->name);
	p->arena_align = ARENA_ALIGN;
	p->target = *t;
	p->macs = mc_graph_macs(g);
	p->threads = o->threads > 1 ? o->threads : 1;
	p->threads_min_work = o->threads_min_work >= 0 ? o->threads_min_work : MC_SPLIT_MIN_WORK;
	p->blas = o->blas && !strcmp(o->blas, "openblas");
	p->blas_min_macs = o->blas_min_macs > 0 ? o->blas_min_macs : 0;
	snprintf(p->weights_section, sizeof p->weights_section, "%s", o->weights_section ? o->weights_section : "");
	snprintf(p->code_section, sizeof p->code_section, "%s", o->code_section ? o->code_section : "");
	build b = { .g = g, .o = o, .p = p, .act_store = t->activations,
	            .weight_store = t->weights };
	int rc = 0;
	for (size_t i = 0; i < sizeof stages / sizeof *stages && !rc; i++)
		rc = stages[i].run(&b) || mc_dump_after(o, 91 + (int)i, stages[i].name, stages[i].dump, &b) ? -1 : 0;
	if (!rc)
		keep_map(&b);
	build_free(&b);
	return rc;
}
