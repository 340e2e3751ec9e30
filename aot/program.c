/* From an inferred, frozen graph to a program: fusion groups lowered into
 * kernels, every buffer given a place (arena offset, weight, input or
 * output slot) by the memory plan. */
#include <stdlib.h>
#include <string.h>

#include "aot.h"
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
	free(p->prefix);
	mc_kpool_free(p->pool);
	memset(p, 0, sizeof *p);
}

/* An If whose condition is known only at run time: both branches are
 * inlined, their nodes guarded by the condition; the program runs one or
 * the other (MC_STEP_IF). Nested ones are not supported yet. */
static int inline_runtime_ifs(mc_graph *g)
{
	for (int i = 0; i < g->n_nodes; i++) {
		mc_node *n = &g->nodes[i];
		if (strcmp(n->op_type, "If") || n->domain[0] || !n->op)
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
				    strcmp(b->nodes[k].op_type, "If"))
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
		bool loop_like = !nd->domain[0] && (!strcmp(nd->op_type, "Scan") || !strcmp(nd->op_type, "Loop"));
		const char *unroll_why = loop_like ? mc_unroll_refusal(g, nd, unroll_limit, why, sizeof why) : NULL;
		if (unroll_why) {
			mc_node_error(nd, "%s is compiled by unrolling its body, and this one cannot be: %s",
			              nd->op_type, unroll_why);
			missing++;
		} else if (!mc_lowering_find(nd->op_type)) {
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

static int find_input(const mc_graph *g, int v)
{
	for (int i = 0; i < g->n_inputs; i++)
		if (g->inputs[i] == v)
			return i;
	return -1;
}

static bool in_arena(const mc_graph *g, const value_maps *m, int root)
{
	const mc_value *v = &g->values[root];
	return v->kind == MC_VAL_NODE && m->out_slot[root] < 0;
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

static int weight_of(const mc_graph *g, mc_program *p, value_maps *m, int v)
{
	if (m->weight[v] < 0) {
		p->weights = mc_grow_array(p->weights, &p->cap_weights, p->n_weights + 1, sizeof *p->weights);
		p->weights[p->n_weights] = (mc_weight){ .t = g->values[v].konst, .align = ARENA_ALIGN };
		p->weight_bytes += g->values[v].konst->nbytes;
		m->weight[v] = p->n_weights++;
	}
	return m->weight[v];
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
 * the element being written (same shape), dying at this step. */
static int inplace_candidate(const mc_graph *g, const mc_group *gr, const value_maps *m,
                             const int *last, int step, int out)
{
	const mc_lowering *l = mc_lowering_find(g->nodes[gr->anchor].op_type);
	const mc_value *ov = &g->values[out];
	size_t obytes = mc_numel(&ov->shape) * mc_dtype_size(ov->dtype);
	for (int e = -1; e < gr->n_epi; e++) {
		const mc_node *nd = &g->nodes[e < 0 ? gr->anchor : gr->epi[e]];
		if (e < 0 && l->lower)
			continue; /* a non-pointwise anchor reads its inputs anywhere */
		for (int i = 0; i < nd->n_inputs; i++) {
			int v = nd->inputs[i];
			if (v < 0 || (e >= 0 && i == gr->epi_chain_in[e]))
				continue;
			int r = m->root[v];
			const mc_value *rv = &g->values[r];
			if (l->lower && reads_root(g, m, &g->nodes[gr->anchor], r))
				continue; /* the anchor reads it elsewhere too (a residual) */
			if (!in_arena(g, m, r) || m->req[r] < 0 || last[r] != step ||
			    !mc_shape_eq(&g->values[v].shape, &ov->shape) ||
			    mc_numel(&rv->shape) * mc_dtype_size(rv->dtype) != obytes)
				continue;
			return m->req[r];
		}
	}
	return -1;
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
	int *group_of = mc_xcalloc((size_t)g->n_nodes + 1, sizeof(int));
	for (int i = 0; i < n_groups; i++) {
		group_of[groups[i].anchor] = i;
		for (int e = 0; e < groups[i].n_epi; e++)
			group_of[groups[i].epi[e]] = i;
	}
	for (int i = n_groups - 1; i >= 0; i--) {
		mc_group *gr = &groups[i];
		const mc_node *nd = &g->nodes[gr->anchor];
		int x = nd->outputs[0], axis;
		if (strcmp(nd->op_type, "Concat") || gr->alias || gr->n_epi || nd->guard || x < 0 ||
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
			     !g->nodes[val->producer].guard && stored_by(g, &groups[group_of[val->producer]], v);
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

/* Where value v lives: its storage root's place, plus its offset in it. */
static int value_loc(const mc_graph *g, mc_program *p, value_maps *m, const mc_mem_plan *plan,
                     int v, mc_loc *loc)
{
	int r = m->root[v];
	const mc_value *rv = &g->values[r];
	if (rv->kind == MC_VAL_CONST)
		*loc = (mc_loc){ .kind = MC_LOC_WEIGHT, .index = weight_of(g, p, m, r) };
	else if (rv->kind == MC_VAL_INPUT)
		*loc = (mc_loc){ .kind = MC_LOC_INPUT, .index = find_input(g, r) };
	else if (m->out_slot[r] >= 0)
		*loc = (mc_loc){ .kind = MC_LOC_OUTPUT, .index = m->out_slot[r] };
	else if (m->req[r] >= 0)
		*loc = (mc_loc){ .kind = MC_LOC_ARENA, .offset = plan->offsets[m->req[r]] + m->off[v] };
	else {
		mc_error("internal: value '%s' has no place", rv->name);
		return -1;
	}
	return 0;
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
static int make_steps(const mc_graph *g, mc_program *p, value_maps *m, const mc_mem_plan *plan,
                      const int *kguard, const bool *kelse)
{
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
		if (value_loc(g, p, m, plan, gv - 1, &st->cond))
			return -1;
	}
	return 0;
}

int mc_build_program(mc_graph *g, const mc_compile_opts *o, mc_program *p)
{
	memset(p, 0, sizeof *p);
	p->pool = mc_kpool_new();
	p->prefix = mc_xstrdup(o->name);
	p->arena_align = ARENA_ALIGN;
	bool cuda = o->target && !strcmp(o->target, "cuda");
	bool mma = cuda && ((o->dtype && !strcmp(o->dtype, "fp16")) || o->tf32) &&
	           mc_cuda_archs_at_least(o->cuda_arch, 80);
	p->isa = cuda ? mc_isa_cuda(mma, o->dtype && !strcmp(o->dtype, "fp16")) : mc_isa_find(o->isa);
	if (!p->isa) {
		mc_error("unknown --isa '%s'", o->isa);
		return -1;
	}
	p->macs = mc_graph_macs(g);
	if (inline_runtime_ifs(g) || check_lowerings(g, o->unroll_limit))
		return -1;
	mc_group *groups;
	int n_groups;
	if (mc_fuse(g, o->no_fuse, &groups, &n_groups))
		return -1;
	size_t nv = (size_t)g->n_values + 1;
	value_maps m = { mc_xcalloc(nv, sizeof(int)), mc_xcalloc(nv, sizeof(size_t)), mc_xcalloc(nv, sizeof(int)),
	                 mc_xcalloc(nv, sizeof(int)), mc_xcalloc(nv, sizeof(int)) };
	int *first = mc_xcalloc(nv, sizeof(int)), *last = mc_xcalloc(nv, sizeof(int));
	int *group_kernel = mc_xcalloc((size_t)n_groups + 1, sizeof(int));
	/* guard and branch of each kernel (mc_node.guard of its nodes) */
	int *kguard = mc_xcalloc((size_t)n_groups + (size_t)g->n_outputs + 1, sizeof(int));
	bool *kelse = mc_xcalloc((size_t)n_groups + (size_t)g->n_outputs + 1, sizeof(bool));
	int rc = -1;
	for (int v = 0; v < g->n_values; v++) {
		m.root[v] = v;
		m.out_slot[v] = m.req[v] = m.weight[v] = first[v] = -1;
		last[v] = -1;
	}
	concats_in_place(g, groups, n_groups, &m);
	for (int i = 0; i < n_groups; i++)
		if (groups[i].alias && !groups[i].slabs) {
			const mc_node *nd = &g->nodes[groups[i].anchor];
			m.root[nd->outputs[0]] = m.root[nd->inputs[0]];
			m.off[nd->outputs[0]] = m.off[nd->inputs[0]];
		}
	/* Graph outputs produced by a kernel are written in place. */
	bool *copy_out = mc_xcalloc((size_t)g->n_outputs + 1, sizeof(bool));
	for (int j = 0; j < g->n_outputs; j++) {
		int v = g->outputs[j];
		if (g->values[v].kind == MC_VAL_NODE && m.root[v] == v && m.out_slot[v] < 0)
			m.out_slot[v] = j;
		else
			copy_out[j] = true;
	}
	/* Lower every group. */
	for (int i = 0; i < n_groups; i++) {
		const mc_group *gr = &groups[i];
		group_kernel[i] = -1;
		if (gr->alias)
			continue;
		char name[64], *comment;
		group_names(g, gr, p->n_kernels, p, name, sizeof name, &comment);
		mc_kernel *k = new_kernel(p, name, comment);
		mc_kb kb;
		mc_kb_begin(&kb, p->pool, k);
		kb.isa = p->isa;
		const mc_lowering *l = mc_lowering_find(g->nodes[gr->anchor].op_type);
		unsigned long errors = mc_error_count();
		if (mc_lower_group(g, gr, &kb, l) || mc_error_count() != errors)
			goto out;
		if (kb.depth != 0) {
			mc_node_error(&g->nodes[gr->anchor], "lowering left %d blocks open", kb.depth);
			goto out;
		}
		const mc_node *an = &g->nodes[gr->anchor];
		if (an->guard) {
			/* the condition stays live while a branch may run */
			mc_kb_buf(&kb, an->guard - 1, MC_BOOL, 1, false);
			kguard[p->n_kernels - 1] = an->guard;
			kelse[p->n_kernels - 1] = an->guard_else;
		}
		group_kernel[i] = p->n_kernels - 1;
	}
	for (int j = 0; j < g->n_outputs; j++)
		if (copy_out[j])
			copy_to_output(g, p, g->outputs[j], j);
	/* Liveness of storage roots over the kernel order. */
	for (int s = 0; s < p->n_kernels; s++) {
		const mc_kernel *k = p->kernels[s];
		for (int b = 0; b < k->n_bufs; b++) {
			int v = k->bufs[b].value;
			if (v < 0)
				continue;
			int r = m.root[v];
			if (first[r] < 0 || s < first[r])
				first[r] = s;
			if (s > last[r])
				last[r] = s;
		}
	}
	/* Memory requests: arena roots, then scratch. */
	int n_reqs = 0, cap_reqs = 0;
	mc_mem_req *reqs = NULL;
	for (int v = 0; v < g->n_values; v++) {
		if (m.root[v] != v || first[v] < 0 || !in_arena(g, &m, v))
			continue;
		const mc_value *val = &g->values[v];
		reqs = mc_grow_array(reqs, &cap_reqs, n_reqs + 1, sizeof *reqs);
		reqs[n_reqs] = (mc_mem_req){ .bytes = mc_numel(&val->shape) * mc_dtype_size(val->dtype),
		                             .first = first[v], .last = last[v], .inplace_of = -1 };
		m.req[v] = n_reqs++;
	}
	for (int i = 0; i < n_groups; i++) {
		const mc_group *gr = &groups[i];
		if (gr->alias || group_kernel[i] < 0)
			continue;
		int out = g->nodes[gr->n_epi ? gr->epi[gr->n_epi - 1] : gr->anchor].outputs[0];
		if (out < 0 || m.root[out] != out || m.req[out] < 0)
			continue;
		reqs[m.req[out]].inplace_of = inplace_candidate(g, gr, &m, last, group_kernel[i], out);
	}
	for (int s = 0; s < p->n_kernels; s++) {
		mc_kernel *k = p->kernels[s];
		for (int b = 0; b < k->n_bufs; b++)
			if (k->bufs[b].value < 0 && k->bufs[b].loc.kind == MC_LOC_NONE) {
				reqs = mc_grow_array(reqs, &cap_reqs, n_reqs + 1, sizeof *reqs);
				reqs[n_reqs] = (mc_mem_req){ .bytes = k->bufs[b].count * mc_dtype_size(k->bufs[b].dtype),
				                             .first = s, .last = s, .inplace_of = -1 };
				k->bufs[b].loc.index = n_reqs++; /* request index until placed */
			}
	}
	mc_mem_plan plan;
	if (mc_plan_memory(reqs, n_reqs, ARENA_ALIGN, &plan)) {
		free(reqs);
		goto out;
	}
	p->arena_bytes = plan.arena_bytes;
	p->lower_bound = plan.lower_bound;
	/* Places. */
	for (int s = 0; s < p->n_kernels; s++) {
		mc_kernel *k = p->kernels[s];
		bool *used = mc_xcalloc((size_t)k->n_bufs + 1, sizeof(bool));
		mark_block(k->body, used);
		for (int b = 0; b < k->n_bufs; b++) {
			mc_kbuf *kb = &k->bufs[b];
			if (!used[b] && kb->value >= 0 && g->values[kb->value].kind == MC_VAL_CONST &&
			    !kb->packed) {
				kb->loc = (mc_loc){ .kind = MC_LOC_NONE };
				continue;
			}
			if ((int64_t)kb->count > p->max_index)
				p->max_index = (int64_t)kb->count;
			if (kb->packed) {
				p->weights = mc_grow_array(p->weights, &p->cap_weights, p->n_weights + 1,
				                           sizeof *p->weights);
				p->weights[p->n_weights] = (mc_weight){ .t = kb->packed, .align = ARENA_ALIGN };
				p->weight_bytes += kb->packed->nbytes;
				kb->loc = (mc_loc){ .kind = MC_LOC_WEIGHT, .index = p->n_weights++ };
				continue;
			}
			if (kb->value < 0) {
				if (kb->loc.kind == MC_LOC_NONE)
					kb->loc = (mc_loc){ .kind = MC_LOC_ARENA, .offset = plan.offsets[kb->loc.index] };
				continue;
			}
			kb->slab = m.off[kb->value];
			if (value_loc(g, p, &m, &plan, kb->value, &kb->loc)) {
				free(used);
				mc_mem_plan_free(&plan);
				free(reqs);
				goto out;
			}
		}
		free(used);
	}
	if (make_steps(g, p, &m, &plan, kguard, kelse)) {
		mc_mem_plan_free(&plan);
		free(reqs);
		goto out;
	}
	mc_mem_plan_free(&plan);
	free(reqs);
	p->n_inputs = g->n_inputs;
	p->n_outputs = g->n_outputs;
	p->inputs = mc_xcalloc((size_t)g->n_inputs + 1, sizeof *p->inputs);
	p->outputs = mc_xcalloc((size_t)g->n_outputs + 1, sizeof *p->outputs);
	for (int i = 0; i < g->n_inputs; i++) {
		const mc_value *v = &g->values[g->inputs[i]];
		p->inputs[i] = (mc_io_desc){ mc_xstrdup(v->name), v->dtype, v->shape };
	}
	for (int i = 0; i < g->n_outputs; i++) {
		const mc_value *v = &g->values[g->outputs[i]];
		p->outputs[i] = (mc_io_desc){ mc_xstrdup(v->name), v->dtype, v->shape };
	}
	rc = mc_program_check(p);
out:
	free(copy_out);
	free(kguard);
	free(kelse);
	free(group_kernel);
	free(first);
	free(last);
	free(m.root);
	free(m.off);
	free(m.out_slot);
	free(m.req);
	free(m.weight);
	free(groups);
	return rc;
}

int mc_program_store_fp16(mc_program *p)
{
	bool *half = mc_xcalloc((size_t)p->n_weights + 1, sizeof(bool));
	p->owned = mc_xcalloc((size_t)p->n_weights + 1, sizeof *p->owned);
	for (int i = 0; i < p->n_weights; i++) {
		const mc_tensor *t = p->weights[i].t;
		if (t->dtype != MC_FLOAT)
			continue;
		mc_tensor *h = mc_tensor_new(MC_FLOAT16, &t->shape);
		if (!h) {
			free(half);
			mc_error("--dtype fp16: no memory for a weight of %zu elements", t->numel);
			return -1;
		}
		const float *src = t->data;
		uint16_t *dst = h->data;
		for (size_t j = 0; j < t->numel; j++)
			dst[j] = mc_float_to_half(src[j]);
		p->owned[p->n_owned++] = h;
		p->weights[i].t = h;
		p->weight_bytes -= t->numel * 2;
		half[i] = true;
	}
	for (int k = 0; k < p->n_kernels; k++)
		for (int b = 0; b < p->kernels[k]->n_bufs; b++) {
			mc_kbuf *kb = &p->kernels[k]->bufs[b];
			bool arena_value = kb->loc.kind == MC_LOC_ARENA && kb->value >= 0;
			bool weight = kb->loc.kind == MC_LOC_WEIGHT && kb->loc.index >= 0 &&
			              kb->loc.index < p->n_weights && half[kb->loc.index];
			if (kb->dtype == MC_FLOAT && (arena_value || weight)) {
				kb->dtype = MC_FLOAT16;
				/* the plan's float-sized storage keeps its place; a slab
				 * in it starts after half the bytes */
				kb->loc.offset -= kb->slab / 2;
				kb->slab /= 2;
			}
		}
	free(half);
	return 0;
}
