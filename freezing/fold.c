/* Constant folding: every node whose inputs are known at compile time is
 * evaluated with its registry entry and replaced by constants; an If whose
 * condition is known is replaced by the nodes of the branch it takes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_edit.h"

size_t freeze_fold_limit(const mc_freeze_opts *o)
{
	return o && o->fold_limit ? o->fold_limit : MC_DEFAULT_FOLD_LIMIT;
}

/* The fold pass's side of the policy (mc_infer_fold_rule is inference's). */
static mc_fold_rule fold_rule(size_t limit)
{
	return (mc_fold_rule){.limit = limit, .by_inputs = true};
}

static bool outputs_known(const mc_graph *g, const mc_node *n)
{
	for (int k = 0; k < n->n_outputs; k++)
		if (n->outputs[k] >= 0 && !g->values[n->outputs[k]].konst)
			return false;
	return true;
}

/* Evaluates node n on its constant inputs; its outputs become constants.
 * Inference may already have computed them (small results): then they are
 * only marked. */
static int fold_node(mc_graph *g, mc_node *n)
{
	if (outputs_known(g, n)) {
		for (int k = 0; k < n->n_outputs; k++)
			if (n->outputs[k] >= 0)
				ge_make_const(g, n->outputs[k], g->values[n->outputs[k]].konst);
		return 0;
	}
	mc_tensor **out = mc_xcalloc((size_t)n->n_outputs + 1, sizeof *out);
	int rc = mc_eval_node(g, n, NULL, out);
	for (int k = 0; k < n->n_outputs && !rc; k++)
		if (out[k])
			ge_make_const(g, n->outputs[k], out[k]);
	free(out);
	return rc;
}

/* ---- If with a known condition ---- */

typedef struct {
	mc_graph *g;        /* the graph the If lives in */
	mc_graph *branch;   /* the branch taken */
	const char *prefix; /* the If's name, for unique value names */
	int *map;           /* branch value -> g value; -2 not mapped yet */
} inliner;

/* The g value standing for branch value bv, made on first use. */
static int map_value(inliner *in, int bv)
{
	if (bv < 0 || in->map[bv] != -2)
		return bv < 0 ? -1 : in->map[bv];
	mc_value *src = &in->branch->values[bv];
	if (src->kind == MC_VAL_CAPTURED)
		return in->map[bv] = src->outer;
	char base[1024];
	if (mc_graph_find(in->g, src->name) < 0)
		snprintf(base, sizeof base, "%s", src->name);
	else
		snprintf(base, sizeof base, "%s/%s", in->prefix, src->name);
	char *name = ge_unique_name(in->g, base);
	int v = mc_graph_add_value(in->g, name, src->kind == MC_VAL_CONST ? MC_VAL_CONST : MC_VAL_NODE);
	free(name);
	src = &in->branch->values[bv];
	mc_value *dst = &in->g->values[v];
	dst->dtype = src->dtype;
	dst->shape = src->shape;
	dst->typed = src->typed;
	dst->konst = src->konst; /* moved: the branch is freed with the If */
	src->konst = NULL;
	return in->map[bv] = v;
}

static void map_subgraph_captures(inliner *in, mc_node *n)
{
	for (int a = 0; a < n->n_attrs; a++) {
		mc_graph *sub = n->attrs[a].g;
		if (!sub)
			continue;
		ge_reparent(sub, in->g);
		for (int v = 0; v < sub->n_values; v++)
			if (sub->values[v].kind == MC_VAL_CAPTURED)
				sub->values[v].outer = map_value(in, sub->values[v].outer);
	}
}

/* Moves one branch node into the parent's value space. */
static mc_node move_node(inliner *in, mc_node *n)
{
	for (int k = 0; k < n->n_inputs; k++)
		n->inputs[k] = map_value(in, n->inputs[k]);
	for (int k = 0; k < n->n_outputs; k++)
		n->outputs[k] = map_value(in, n->outputs[k]);
	int kept = 0;
	for (int k = 0; k < n->n_implicit; k++) {
		int v = map_value(in, n->implicit[k]);
		bool dup = false;
		for (int j = 0; j < kept; j++)
			dup |= n->implicit[j] == v;
		if (!dup)
			n->implicit[kept++] = v;
	}
	n->n_implicit = kept;
	map_subgraph_captures(in, n);
	mc_node moved = *n;
	memset(n, 0, sizeof *n);
	return moved;
}

/* Moves branch b's nodes (and copies of its outputs into the If's values
 * if_out) into nodes[], renaming values into g. With direct, a branch node
 * computing an output writes the If's value itself and constant outputs
 * become constants; otherwise (both branches kept) every output is copied
 * by an Identity, so that each branch writes the If's values. */
static int move_branch(mc_graph *g, mc_graph *b, const int *if_out, int n_out, const char *prefix,
                       bool direct_ok, mc_node *nodes, int count)
{
	inliner in = {.g = g, .branch = b, .prefix = prefix};
	in.map = mc_xmalloc(((size_t)b->n_values + 1) * sizeof *in.map);
	for (int v = 0; v < b->n_values; v++)
		in.map[v] = -2;
	/* branch outputs computed by a branch node: that node writes the If's
	 * output value itself (the first time it appears) */
	bool *direct = mc_xcalloc((size_t)n_out + 1, sizeof *direct);
	for (int k = 0; k < n_out && direct_ok; k++) {
		int bv = b->outputs[k];
		if (if_out[k] >= 0 && b->values[bv].kind == MC_VAL_NODE && in.map[bv] == -2) {
			in.map[bv] = if_out[k];
			direct[k] = true;
		}
	}
	for (int i = 0; i < b->n_nodes; i++)
		nodes[count++] = move_node(&in, &b->nodes[i]);
	for (int k = 0; k < n_out; k++) {
		if (if_out[k] < 0 || direct[k])
			continue;
		int src = map_value(&in, b->outputs[k]);
		const mc_value *sv = &g->values[src];
		if (direct_ok && sv->kind == MC_VAL_CONST && sv->konst) {
			ge_make_const(g, if_out[k], mc_tensor_clone(sv->konst));
			continue;
		}
		char name[1024];
		snprintf(name, sizeof name, "%s/%s_output_%d", prefix, direct_ok ? "if" : b->name, k);
		nodes[count++] = ge_identity_node(g, name, src, if_out[k]);
	}
	b->n_nodes = 0; /* its nodes are moved: freeing the If frees the rest */
	free(direct);
	free(in.map);
	return count;
}

void ge_inline_if(mc_graph *g, int pos, int which)
{
	mc_node *ifn = &g->nodes[pos];
	mc_graph *tb = mc_attr_find(ifn, "then_branch")->g, *eb = mc_attr_find(ifn, "else_branch")->g;
	int n_out = ifn->n_outputs, cond = ifn->inputs[0], guard = ifn->guard;
	bool guard_else = ifn->guard_else;
	int *if_out = mc_xmalloc(((size_t)n_out + 1) * sizeof *if_out);
	memcpy(if_out, ifn->outputs, (size_t)n_out * sizeof *if_out);
	char *prefix = mc_xstrdup(ifn->name[0] ? ifn->name : "if");
	int cap = tb->n_nodes + eb->n_nodes + 2 * n_out + 1, count = 0;
	mc_node *nodes = mc_xcalloc((size_t)cap, sizeof *nodes);
	if (which >= 0) {
		count = move_branch(g, which ? tb : eb, if_out, n_out, prefix, true, nodes, 0);
		for (int i = 0; i < count; i++) {
			nodes[i].guard = guard;
			nodes[i].guard_else = guard_else;
		}
	} else {
		int n_then = move_branch(g, tb, if_out, n_out, prefix, false, nodes, 0);
		count = move_branch(g, eb, if_out, n_out, prefix, false, nodes, n_then);
		for (int i = 0; i < count; i++) {
			nodes[i].guard = cond + 1;
			nodes[i].guard_else = i >= n_then;
		}
	}
	ge_splice_nodes(g, pos, nodes, count);
	free(nodes);
	free(if_out);
	free(prefix);
}

/* An If whose condition is known but which cannot be folded whole. */
static bool known_if(const mc_graph *g, const mc_node *n, bool *cond)
{
	if (n->id != MC_OP_If || !n->op || n->n_inputs < 1 || n->inputs[0] < 0)
		return false;
	const mc_value *c = &g->values[n->inputs[0]];
	if (!c->konst || c->konst->numel != 1)
		return false;
	const mc_attr *t = mc_attr_find(n, "then_branch"), *e = mc_attr_find(n, "else_branch");
	if (!t || !e || !t->g || !e->g)
		return false;
	*cond = mc_get_i(c->konst, 0) != 0;
	return true;
}

/* One sweep in node order: a folded node's outputs are constants for the
 * nodes after it. Returns the number folded, or -1. *capped counts the
 * nodes left by the cap. */
static int fold_sweep(mc_graph *g, const mc_fold_rule *rule, int *capped)
{
	bool *dead = mc_xcalloc((size_t)g->n_nodes + 1, sizeof *dead);
	int folded = 0, rc = 0;
	*capped = 0;
	for (int i = 0; i < g->n_nodes; i++) {
		mc_node *n = &g->nodes[i];
		size_t bytes;
		mc_fold_verdict v = mc_fold_policy(g, n, rule, !outputs_known(g, n), &bytes);
		if (v == MC_FOLD_NO)
			continue;
		if (v != MC_FOLD_YES) {
			++*capped;
			continue;
		}
		if (fold_node(g, n)) {
			rc = -1;
			break;
		}
		dead[i] = true;
		folded++;
	}
	ge_remove_nodes(g, dead);
	free(dead);
	return rc ? -1 : folded;
}

/* A branch's captured values carry the constants inference knew; those the
 * parent's folding made known since are copied in. */
static void refresh_captures(mc_graph *g)
{
	for (int v = 0; g->parent && v < g->n_values; v++) {
		mc_value *cv = &g->values[v];
		const mc_value *pv = cv->kind == MC_VAL_CAPTURED ? &g->parent->values[cv->outer] : NULL;
		if (pv && !cv->konst && pv->konst)
			cv->konst = mc_tensor_clone(pv->konst);
	}
}

static int fold_quietly(mc_graph *g, const mc_freeze_opts *o)
{
	return freeze_fold(g, o, false);
}

int freeze_fold(mc_graph *g, const mc_freeze_opts *o, bool report)
{
	mc_fold_rule rule = fold_rule(freeze_fold_limit(o));
	int changes = 0;
	refresh_captures(g);
	for (;;) {
		int capped;
		int folded = fold_sweep(g, &rule, &capped);
		if (folded < 0)
			return -1;
		changes += folded;
		int inlined = 0;
		for (int i = 0; i < g->n_nodes; i++) {
			bool cond;
			if (known_if(g, &g->nodes[i], &cond)) {
				ge_inline_if(g, i, cond);
				inlined++;
			}
		}
		changes += inlined;
		if (!inlined)
			break;
	}
	int in_branches = ge_run_on_branches(g, o, fold_quietly);
	if (in_branches < 0)
		return -1;
	if (report)
		freeze_fold_report(g, o);
	return changes + in_branches;
}

int mc_pass_fold(mc_graph *g, const mc_freeze_opts *o)
{
	return freeze_fold(g, o, true);
}

/* Nodes of g and of its If branches left by the cap, listed on stats. */
static int count_capped(mc_graph *g, const mc_freeze_opts *o, size_t limit)
{
	mc_fold_rule rule = fold_rule(limit);
	int count = 0;
	for (int i = 0; i < g->n_nodes; i++) {
		const mc_node *n = &g->nodes[i];
		size_t bytes;
		if (n->id == MC_OP_If)
			for (int a = 0; a < n->n_attrs; a++)
				if (n->attrs[a].g)
					count += count_capped(n->attrs[a].g, o, limit);
		if (mc_fold_policy(g, n, &rule, false, &bytes) != MC_FOLD_CAPPED)
			continue;
		if (o && o->stats) {
			char where[512];
			fprintf(o->stats, "freeze: fold: %s left unfolded: %zu bytes over the cap\n",
			        mc_node_where(n, where, sizeof where), bytes);
		}
		count++;
	}
	return count;
}

int freeze_fold_report(mc_graph *g, const mc_freeze_opts *o)
{
	size_t limit = freeze_fold_limit(o);
	int count = count_capped(g, o, limit);
	if (count)
		mc_warn("constant folding left %d node(s) unfolded: their results exceed the "
		        "fold limit of %zu bytes", count, limit);
	return count;
}
