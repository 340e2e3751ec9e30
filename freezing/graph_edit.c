/* Graph-editing utilities shared by the freezing passes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_edit.h"

bool ge_is_graph_output(const mc_graph *g, int v)
{
	for (int i = 0; i < g->n_outputs; i++)
		if (g->outputs[i] == v)
			return true;
	return false;
}

int *ge_use_counts(const mc_graph *g)
{
	int *uses = mc_xcalloc((size_t)g->n_values + 1, sizeof *uses);
	for (int i = 0; i < g->n_nodes; i++) {
		const mc_node *n = &g->nodes[i];
		for (int k = 0; k < n->n_inputs; k++)
			if (n->inputs[k] >= 0)
				uses[n->inputs[k]]++;
		for (int k = 0; k < n->n_implicit; k++)
			uses[n->implicit[k]]++;
	}
	for (int i = 0; i < g->n_outputs; i++)
		uses[g->outputs[i]]++;
	return uses;
}

/* Subgraph values captured from `from` now capture `to`. Deeper subgraphs
 * capture through their own parent's captured values, so one level is
 * enough. */
static void replace_captures(mc_node *n, int from, int to)
{
	for (int a = 0; a < n->n_attrs; a++) {
		mc_graph *sub = n->attrs[a].g;
		if (!sub)
			continue;
		for (int v = 0; v < sub->n_values; v++)
			if (sub->values[v].kind == MC_VAL_CAPTURED && sub->values[v].outer == from)
				sub->values[v].outer = to;
	}
}

/* Implicit inputs are a set: a replacement may make two entries equal. */
static void replace_implicit(mc_node *n, int from, int to)
{
	bool has_to = false, changed = false;
	for (int k = 0; k < n->n_implicit; k++)
		has_to |= n->implicit[k] == to;
	int kept = 0;
	for (int k = 0; k < n->n_implicit; k++) {
		int v = n->implicit[k];
		if (v == from) {
			changed = true;
			if (has_to)
				continue;
			v = to;
			has_to = true;
		}
		n->implicit[kept++] = v;
	}
	n->n_implicit = kept;
	if (changed)
		replace_captures(n, from, to);
}

void ge_replace_uses(mc_graph *g, int from, int to)
{
	for (int i = 0; i < g->n_nodes; i++) {
		mc_node *n = &g->nodes[i];
		for (int k = 0; k < n->n_inputs; k++)
			if (n->inputs[k] == from)
				n->inputs[k] = to;
		replace_implicit(n, from, to);
	}
}

int *ge_renames_new(const mc_graph *g)
{
	int *to = mc_xmalloc(((size_t)g->n_values + 1) * sizeof *to);
	for (int v = 0; v <= g->n_values; v++)
		to[v] = -1;
	return to;
}

int ge_renamed(int *to, int v)
{
	int last = v;
	while (to[last] >= 0)
		last = to[last];
	while (to[v] >= 0) { /* shorten the chain for the next lookup */
		int next = to[v];
		to[v] = last;
		v = next;
	}
	return last;
}

void ge_rename_reads(mc_node *n, int *to)
{
	for (int k = 0; k < n->n_inputs; k++)
		if (n->inputs[k] >= 0)
			n->inputs[k] = ge_renamed(to, n->inputs[k]);
	bool any = false;
	for (int k = 0; k < n->n_implicit; k++)
		any |= to[n->implicit[k]] >= 0;
	if (!any)
		return;
	/* replace_implicit rewrites the set: walk a copy */
	int count = n->n_implicit;
	int *was = mc_xmalloc((size_t)count * sizeof *was);
	memcpy(was, n->implicit, (size_t)count * sizeof *was);
	for (int k = 0; k < count; k++)
		if (to[was[k]] >= 0)
			replace_implicit(n, was[k], ge_renamed(to, was[k]));
	free(was);
}

void ge_renames_apply(mc_graph *g, int *to)
{
	for (int i = 0; i < g->n_nodes; i++)
		ge_rename_reads(&g->nodes[i], to);
}

bool *ge_output_marks(const mc_graph *g)
{
	bool *marks = mc_xcalloc((size_t)g->n_values + 1, sizeof *marks);
	for (int i = 0; i < g->n_outputs; i++)
		marks[g->outputs[i]] = true;
	return marks;
}

void ge_node_free(mc_node *n)
{
	mc_node_free(n);
}

int ge_remove_nodes(mc_graph *g, const bool *dead)
{
	int *newidx = mc_xmalloc(((size_t)g->n_nodes + 1) * sizeof *newidx);
	int kept = 0;
	for (int i = 0; i < g->n_nodes; i++) {
		if (dead[i]) {
			newidx[i] = -1;
			ge_node_free(&g->nodes[i]);
			continue;
		}
		newidx[i] = kept;
		g->nodes[kept++] = g->nodes[i];
	}
	int removed = g->n_nodes - kept;
	for (int v = 0; v < g->n_values; v++)
		if (g->values[v].producer >= 0)
			g->values[v].producer = newidx[g->values[v].producer];
	g->n_nodes = kept;
	free(newidx);
	return removed;
}

void ge_splice_nodes(mc_graph *g, int pos, mc_node *nodes, int count)
{
	int n = g->n_nodes, total = n - 1 + count;
	/* producers first, while node indices are still the old ones */
	for (int v = 0; v < g->n_values; v++) {
		int p = g->values[v].producer;
		if (p == pos)
			g->values[v].producer = -1;
		else if (p > pos)
			g->values[v].producer = p - 1 + count;
	}
	ge_node_free(&g->nodes[pos]);
	if (total > g->cap_nodes) {
		g->cap_nodes = total;
		g->nodes = realloc(g->nodes, (size_t)total * sizeof *g->nodes);
		if (!g->nodes) {
			mc_error("out of memory");
			exit(3);
		}
	}
	memmove(&g->nodes[pos + count], &g->nodes[pos + 1], (size_t)(n - pos - 1) * sizeof *g->nodes);
	for (int i = 0; i < count; i++) {
		g->nodes[pos + i] = nodes[i];
		for (int k = 0; k < nodes[i].n_outputs; k++)
			if (nodes[i].outputs[k] >= 0)
				g->values[nodes[i].outputs[k]].producer = pos + i;
	}
	g->n_nodes = total;
}

void ge_reparent(mc_graph *sub, mc_graph *parent)
{
	sub->parent = parent;
	sub->depth = parent->depth + 1;
	for (int i = 0; i < sub->n_nodes; i++)
		for (int a = 0; a < sub->nodes[i].n_attrs; a++)
			if (sub->nodes[i].attrs[a].g)
				ge_reparent(sub->nodes[i].attrs[a].g, sub);
}

static bool is_if(const mc_node *n)
{
	return n->id == MC_OP_If;
}

int ge_run_on_branches(mc_graph *g, const mc_freeze_opts *o,
                       int (*pass)(mc_graph *, const mc_freeze_opts *))
{
	int changes = 0;
	for (int i = 0; i < g->n_nodes; i++) {
		mc_node *n = &g->nodes[i];
		if (!is_if(n))
			continue;
		int before = changes;
		for (int a = 0; a < n->n_attrs; a++) {
			if (!n->attrs[a].g)
				continue;
			int rc = pass(n->attrs[a].g, o);
			if (rc < 0)
				return -1;
			changes += rc;
		}
		if (changes != before)
			ge_refresh_implicit(n);
	}
	return changes;
}

void ge_refresh_implicit(mc_node *n)
{
	n->n_implicit = 0;
	for (int a = 0; a < n->n_attrs; a++) {
		const mc_graph *sub = n->attrs[a].g;
		if (!sub)
			continue;
		int *uses = ge_use_counts(sub);
		for (int v = 0; v < sub->n_values; v++) {
			if (sub->values[v].kind != MC_VAL_CAPTURED || !uses[v])
				continue;
			int o = sub->values[v].outer;
			bool seen = false;
			for (int k = 0; k < n->n_implicit; k++)
				seen |= n->implicit[k] == o;
			if (seen)
				continue;
			n->implicit = realloc(n->implicit, (size_t)(n->n_implicit + 1) * sizeof(int));
			if (!n->implicit) {
				mc_error("out of memory");
				exit(3);
			}
			n->implicit[n->n_implicit++] = o;
		}
		free(uses);
	}
}

char *ge_unique_name(const mc_graph *g, const char *base)
{
	if (mc_graph_find(g, base) < 0)
		return mc_xstrdup(base);
	size_t len = strlen(base) + 24;
	char *name = mc_xmalloc(len);
	for (long k = 2;; k++) {
		snprintf(name, len, "%s_%ld", base, k);
		if (mc_graph_find(g, name) < 0)
			return name;
	}
}

int ge_add_const(mc_graph *g, const char *base, mc_tensor *t)
{
	char *name = ge_unique_name(g, base);
	int v = mc_graph_add_value(g, name, MC_VAL_CONST);
	free(name);
	ge_make_const(g, v, t);
	return v;
}

void ge_make_const(mc_graph *g, int v, mc_tensor *t)
{
	mc_value *val = &g->values[v];
	if (val->konst != t)
		mc_tensor_free(val->konst);
	val->konst = t;
	val->kind = MC_VAL_CONST;
	val->producer = -1;
	val->dtype = t->dtype;
	val->shape = t->shape;
	val->typed = true;
}

mc_node ge_identity_node(const mc_graph *g, const char *name, int in, int out)
{
	mc_node n = {0};
	n.name = mc_xstrdup(name);
	n.domain = mc_xstrdup("");
	mc_node_set_op(&n, MC_OP_Identity, g->opset);
	n.n_inputs = n.n_outputs = 1;
	n.inputs = mc_xmalloc(sizeof(int));
	n.outputs = mc_xmalloc(sizeof(int));
	n.inputs[0] = in;
	n.outputs[0] = out;
	return n;
}
