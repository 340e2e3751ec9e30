/* Zero padding folded into the convolution that reads it: Pad(x) -> Conv
 * becomes Conv(x) with the pads added to its own, so no padded copy of the
 * activation is ever written (M-LSD pads before each stride-2 depthwise). */
#include <stdlib.h>
#include <string.h>

#include "graph_edit.h"

/* The Pad's pads when they are a zero, constant-mode padding of the
 * spatial dims only (none negative); false otherwise. */
static bool zero_spatial_pads(const mc_graph *g, const mc_node *pad, int64_t *pads, int rank)
{
	const char *mode;
	if (mc_attr_string(pad, "mode", "constant", &mode) || strcmp(mode, "constant"))
		return false;
	const int64_t *p = NULL;
	size_t count = 0;
	if (pad->opset < 11) {
		double value;
		if (mc_attr_float(pad, "value", 0, &value) || value != 0 ||
		    mc_attr_ints(pad, "pads", &p, &count))
			return false;
	} else {
		if (pad->n_inputs < 2 || pad->inputs[1] < 0 || (pad->n_inputs > 3 && pad->inputs[3] >= 0))
			return false; /* no pads, or explicit axes */
		const mc_tensor *t = g->values[pad->inputs[1]].konst;
		if (!t || t->dtype != MC_INT64)
			return false;
		p = t->data;
		count = t->numel;
		if (pad->n_inputs > 2 && pad->inputs[2] >= 0) {
			const mc_tensor *v = g->values[pad->inputs[2]].konst;
			if (!v || v->numel != 1 || mc_get_f(v, 0) != 0)
				return false;
		}
	}
	if (!p || count != (size_t)(2 * rank))
		return false;
	for (int i = 0; i < 2 * rank; i++) {
		if (p[i] < 0 || ((i % rank) < 2 && p[i] != 0))
			return false;
		pads[i] = p[i];
	}
	return true;
}

/* Conv's pads as [begin.., end..] of its nsp spatial dims; false where
 * auto_pad decides them. */
static bool conv_pads(const mc_node *conv, int nsp, int64_t *pads)
{
	const char *auto_pad;
	if (mc_attr_string(conv, "auto_pad", "NOTSET", &auto_pad) || strcmp(auto_pad, "NOTSET"))
		return false;
	const int64_t *p;
	size_t count;
	if (mc_attr_ints(conv, "pads", &p, &count) || (p && count != (size_t)(2 * nsp)))
		return false;
	for (int i = 0; i < 2 * nsp; i++)
		pads[i] = p ? p[i] : 0;
	return true;
}

static void set_pads(mc_node *conv, const int64_t *pads, int nsp)
{
	mc_attr *a = NULL;
	for (int i = 0; i < conv->n_attrs; i++)
		if (strcmp(conv->attrs[i].name, "pads") == 0)
			a = &conv->attrs[i];
	if (!a) {
		conv->attrs = realloc(conv->attrs, sizeof *conv->attrs * (size_t)(conv->n_attrs + 1));
		if (!conv->attrs)
			abort();
		a = &conv->attrs[conv->n_attrs++];
		memset(a, 0, sizeof *a);
		a->name = mc_xstrdup("pads");
		a->type = MC_ATTR_INTS;
	}
	free(a->ints);
	a->ints = mc_xcalloc((size_t)(2 * nsp), sizeof *a->ints);
	memcpy(a->ints, pads, sizeof *pads * (size_t)(2 * nsp));
	a->n = (size_t)(2 * nsp);
}

/* Conv node ci reads a Pad it can absorb: do it. */
static bool fold_one(mc_graph *g, int ci, const int *uses)
{
	mc_node *conv = &g->nodes[ci];
	if (conv->id != MC_OP_Conv || !conv->op || conv->n_inputs < 1 || conv->inputs[0] < 0)
		return false;
	int v = conv->inputs[0];
	int pi = g->values[v].producer;
	if (pi < 0 || uses[v] != 1 || ge_is_graph_output(g, v) || g->nodes[pi].id != MC_OP_Pad ||
	    !g->nodes[pi].op)
		return false;
	const mc_node *pad = &g->nodes[pi];
	int rank = g->values[pad->inputs[0]].shape.rank, nsp = rank - 2;
	int64_t pp[2 * MC_MAX_RANK], cp[2 * MC_MAX_RANK], sum[2 * MC_MAX_RANK];
	if (nsp < 1 || pad->guard != conv->guard || pad->guard_else != conv->guard_else ||
	    !zero_spatial_pads(g, pad, pp, rank) || !conv_pads(conv, nsp, cp))
		return false;
	for (int i = 0; i < nsp; i++) {
		sum[i] = cp[i] + pp[2 + i];
		sum[nsp + i] = cp[nsp + i] + pp[rank + 2 + i];
	}
	set_pads(conv, sum, nsp);
	free(conv->params);
	conv->params = NULL;
	if (conv->op->parse && conv->op->parse(conv))
		return false; /* cannot happen: the same attributes, larger pads */
	conv->inputs[0] = pad->inputs[0];
	return true;
}

int mc_pass_fold_pad(mc_graph *g, const mc_freeze_opts *o)
{
	int folded = ge_run_on_branches(g, o, mc_pass_fold_pad);
	if (folded < 0)
		return -1;
	int *uses = ge_use_counts(g);
	for (int i = 0; i < g->n_nodes; i++)
		if (fold_one(g, i, uses))
			folded++; /* the Pad is left without readers: dce removes it */
	free(uses);
	return folded;
}
