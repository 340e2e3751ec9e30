/* Fusion: groups nodes into kernels. A group starts at an anchor and takes
 * on pointwise consumers as epilogues while the chained value has no other
 * use, so the intermediate is never stored. A group runs where its last
 * member stood in the node order: its other operands are ready by then. */
#include <stdlib.h>
#include <string.h>

#include "program.h"
#include "../freezing/graph_edit.h"
#include "../libcore/ops/index.h"
#include "../libcore/ops/tensor.h"
#include "lower.h"

static void count_uses(const mc_graph *g, int *uses)
{
	for (int n = 0; n < g->n_nodes; n++) {
		const mc_node *nd = &g->nodes[n];
		for (int i = 0; i < nd->n_inputs; i++)
			if (nd->inputs[i] >= 0)
				uses[nd->inputs[i]]++;
		for (int i = 0; i < nd->n_implicit; i++)
			uses[nd->implicit[i]]++;
	}
	for (int i = 0; i < g->n_outputs; i++)
		uses[g->outputs[i]] += 2; /* a graph output is never fused away */
}

static int sole_consumer(const mc_graph *g, int v, int after)
{
	for (int n = after + 1; n < g->n_nodes; n++)
		for (int i = 0; i < g->nodes[n].n_inputs; i++)
			if (g->nodes[n].inputs[i] == v)
				return n;
	return -1;
}

static int present_outputs(const mc_node *n)
{
	int k = 0;
	for (int i = 0; i < n->n_outputs; i++)
		k += n->outputs[i] >= 0;
	return k;
}

/* Can node b (consuming tail value v) join the group as an epilogue? */
static bool epilogue_ok(const mc_graph *g, int b, int v, int last, int *chain_in)
{
	const mc_node *bn = &g->nodes[b];
	const mc_node *vn = &g->nodes[last];
	if (bn->guard != vn->guard || bn->guard_else != vn->guard_else)
		return false; /* another branch, or outside the If */
	const mc_lowering *l = mc_lowering_find(bn->id);
	if (!mc_op_has(bn->id, MC_OF_PW) || !l || bn->n_outputs != 1 || bn->outputs[0] < 0 || bn->n_implicit)
		return false;
	const mc_value *out = &g->values[bn->outputs[0]];
	if (!mc_shape_eq(&out->shape, &g->values[v].shape))
		return false;
	/* Before opset 7, Add & co (broadcast=1, axis) and PRelu align input 1
	 * at an axis, not numpy's way: such a node runs in its own kernel. */
	if (bn->opset < 7 && bn->n_inputs >= 2 && bn->inputs[1] >= 0) {
		size_t m = mc_numel(&g->values[bn->inputs[1]].shape);
		if (m != 1 && m != mc_numel(&out->shape))
			return false;
	}
	int found = -1;
	for (int i = 0; i < bn->n_inputs; i++)
		if (bn->inputs[i] == v) {
			if (found >= 0)
				return false; /* Mul(x, x): the chain value is needed twice */
			found = i;
		}
	*chain_in = found;
	return found >= 0;
}

int mc_fuse(const mc_graph *g, bool no_fuse, mc_group **groups_out, int *n_out)
{
	int *uses = mc_xcalloc((size_t)g->n_values + 1, sizeof *uses);
	bool *taken = mc_xcalloc((size_t)g->n_nodes + 1, sizeof *taken);
	int *pos = mc_xcalloc((size_t)g->n_nodes + 1, sizeof *pos);
	mc_group *groups = mc_xcalloc((size_t)g->n_nodes + 1, sizeof *groups);
	int n_groups = 0;
	count_uses(g, uses);
	for (int n = 0; n < g->n_nodes; n++) {
		if (taken[n])
			continue;
		const mc_node *nd = &g->nodes[n];
		const mc_lowering *l = mc_lowering_find(nd->id);
		mc_group *gr = &groups[n_groups];
		memset(gr, 0, sizeof *gr);
		gr->anchor = n;
		taken[n] = true;
		pos[n_groups] = n;
		n_groups++;
		if (!l)
			continue;
		if (l->flags & MC_LOWER_ALIAS) {
			/* A graph output needs its own bytes: it is copied. So is a
			 * value in an If's branch (the If's outputs are written by
			 * either branch). */
			gr->alias = !ge_is_graph_output(g, nd->outputs[0]) && !nd->guard;
			if (gr->alias)
				continue;
		}
		bool can_epi = mc_op_has(nd->id, MC_OF_PW) || (l->flags & MC_LOWER_EPILOGUE);
		if (no_fuse || !can_epi || present_outputs(nd) != 1 || nd->outputs[0] < 0)
			continue;
		int tail = nd->outputs[0], last = n;
		while (gr->n_epi < MC_MAX_EPILOGUE && uses[tail] == 1) {
			int b = sole_consumer(g, tail, last), chain_in;
			if (b < 0 || taken[b] || !epilogue_ok(g, b, tail, last, &chain_in))
				break;
			gr->epi[gr->n_epi] = b;
			gr->epi_chain_in[gr->n_epi] = chain_in;
			gr->n_epi++;
			taken[b] = true;
			last = b;
			tail = g->nodes[b].outputs[0];
		}
		pos[n_groups - 1] = last;
	}
	/* Order groups by where they run; positions are distinct node indices. */
	int *order = mc_xcalloc((size_t)g->n_nodes + 1, sizeof *order);
	for (int i = 0; i < n_groups; i++)
		order[pos[i]] = i + 1;
	mc_group *sorted = mc_xcalloc((size_t)n_groups + 1, sizeof *sorted);
	int k = 0;
	for (int n = 0; n < g->n_nodes; n++)
		if (order[n])
			sorted[k++] = groups[order[n] - 1];
	free(order);
	free(groups);
	free(pos);
	free(taken);
	free(uses);
	*groups_out = sorted;
	*n_out = n_groups;
	return 0;
}

/* ---- gathers inlined into their readers (--optimize memory) ---- */

/* A constant input of n (scales, sizes), NULL where absent; false where
 * present but known only at run time. */
static bool const_input(const mc_graph *g, const mc_node *n, int i, const mc_tensor **t)
{
	*t = NULL;
	if (i < 0 || i >= n->n_inputs || n->inputs[i] < 0)
		return true;
	const mc_value *v = &g->values[n->inputs[i]];
	if (v->kind == MC_VAL_CONST) {
		*t = v->konst;
		return true;
	}
	return mc_numel(&v->shape) == 0;
}

/* n is a nearest Resize that copies input elements (libcore's map). */
static bool is_gather(const mc_graph *g, const mc_node *n)
{
	if ((n->id != MC_OP_Resize && n->id != MC_OP_Upsample) || n->guard || n->n_outputs != 1 ||
	    n->outputs[0] < 0 || n->n_inputs < 1 || n->inputs[0] < 0)
		return false;
	int si, zi;
	const mc_tensor *scales, *sizes;
	mc_resize_inputs(n, n->n_inputs, &si, &zi);
	if (!const_input(g, n, si, &scales) || !const_input(g, n, zi, &sizes))
		return false;
	int64_t *map[MC_MAX_RANK];
	mc_shape out;
	const mc_shape *in = &g->values[n->inputs[0]].shape;
	if (mc_resize_nearest_map(n, in, scales, sizes, map, &out))
		return false;
	for (int d = 0; d < in->rank; d++)
		free(map[d]);
	return true;
}

/* n is a Split along the last axis of a 3-D tensor whose parts (every
 * one present, so that each one's columns are known; none a graph
 * output) attention templates can read in place (mc_attention_one_kernel). */
static bool is_packed_split(const mc_graph *g, const mc_node *n)
{
	int axis;
	if (n->id != MC_OP_Split || n->guard || n->n_inputs < 1 || n->inputs[0] < 0 ||
	    g->values[n->inputs[0]].shape.rank != 3 || mc_split_axis(n, 3, &axis) || axis != 2)
		return false;
	for (int k = 0; k < n->n_outputs; k++)
		if (n->outputs[k] < 0 || ge_is_graph_output(g, n->outputs[k]))
			return false;
	return true;
}

/* Group gr reads v (the gather's output) at its input i where a gather
 * can stand in: a Resize's, an operand of an epilogue, or an input of a
 * pointwise or Concat anchor; a packed Split's, Q, K or V of an
 * attention template (on a grid target). */
static bool reads_through_gather(const mc_graph *g, const mc_group *gr, int node, int i, bool split, bool grid)
{
	if (gr->alias || gr->n_gather >= MC_MAX_GATHER || g->nodes[node].guard)
		return false;
	const mc_node *a = &g->nodes[node];
	if (split)
		return grid && node == gr->anchor && i <= 2 && a->inputs[i] >= 0 &&
		       mc_attention_one_kernel(g, a, NULL);
	if (node != gr->anchor)
		return true; /* an epilogue: v is not its chain (that is the group's own) */
	const mc_lowering *l = mc_lowering_find(a->id);
	/* the elementwise kernel's own loads; a pointwise op with a lowering
	 * of its own indexes inputs its own way */
	return (mc_op_has(a->id, MC_OF_PW) && l && !l->lower) || a->id == MC_OP_Concat;
}

int *mc_group_of_nodes(const mc_graph *g, const mc_group *groups, int n_groups)
{
	int *group_of = mc_xcalloc((size_t)g->n_nodes + 1, sizeof(int));
	for (int n = 0; n < g->n_nodes; n++)
		group_of[n] = -1;
	for (int i = 0; i < n_groups; i++) {
		group_of[groups[i].anchor] = i;
		for (int e = 0; e < groups[i].n_epi; e++)
			group_of[groups[i].epi[e]] = i;
		for (int j = 0; j < groups[i].n_gather; j++)
			group_of[groups[i].gather[j]] = i;
	}
	return group_of;
}

/* Does node n read an output of gather p? */
static bool reads_output_of(const mc_node *n, int k, const mc_node *p)
{
	for (int o = 0; o < p->n_outputs; o++)
		if (p->outputs[o] >= 0 && n->inputs[k] == p->outputs[o])
			return true;
	return false;
}

void mc_fuse_inline_gathers(const mc_graph *g, mc_group *groups, int *n_groups, bool resizes, bool grid)
{
	int *group_of = mc_group_of_nodes(g, groups, *n_groups);
	bool *gone = mc_xcalloc((size_t)*n_groups + 1, sizeof(bool));
	for (int i = 0; i < *n_groups; i++) {
		const mc_group *gr = &groups[i];
		const mc_node *p = &g->nodes[gr->anchor];
		if (gr->n_epi || gr->alias)
			continue;
		bool split = is_packed_split(g, p);
		if (!split && !(resizes && is_gather(g, p) && !ge_is_graph_output(g, p->outputs[0])))
			continue;
		bool ok = true, any = false;
		for (int n = 0; n < g->n_nodes && ok; n++)
			for (int k = 0; k < g->nodes[n].n_inputs && ok; k++)
				if (reads_output_of(&g->nodes[n], k, p)) {
					any = true;
					ok = group_of[n] >= 0 && !gone[group_of[n]] &&
					     reads_through_gather(g, &groups[group_of[n]], n, k, split, grid);
				}
		for (int n = 0; n < g->n_nodes && ok; n++)
			for (int k = 0; k < g->nodes[n].n_implicit && ok; k++)
				for (int o = 0; o < p->n_outputs; o++)
					ok = ok && g->nodes[n].implicit[k] != p->outputs[o];
		if (!ok || !any)
			continue;
		gone[i] = true;
		for (int n = 0; n < g->n_nodes; n++)
			for (int k = 0; k < g->nodes[n].n_inputs; k++)
				if (reads_output_of(&g->nodes[n], k, p)) {
					mc_group *rg = &groups[group_of[n]];
					bool have = false;
					for (int j = 0; j < rg->n_gather; j++)
						have |= rg->gather[j] == gr->anchor;
					if (!have)
						rg->gather[rg->n_gather++] = gr->anchor;
				}
	}
	int k = 0;
	for (int i = 0; i < *n_groups; i++)
		if (!gone[i])
			groups[k++] = groups[i];
	*n_groups = k;
	free(gone);
	free(group_of);
}
