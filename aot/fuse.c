/* Fusion: groups nodes into kernels. A group starts at an anchor and takes
 * on pointwise consumers as epilogues while the chained value has no other
 * use, so the intermediate is never stored. A group runs where its last
 * member stood in the node order: its other operands are ready by then. */
#include <stdlib.h>
#include <string.h>

#include "lower.h"
#include "../freezing/graph_edit.h"

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
