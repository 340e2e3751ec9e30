/* Graph simplification: no-op nodes removed (identity), unused nodes
 * removed (dce), duplicate nodes and constants merged (cse). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_edit.h"

/* ==== identity ==== */

/* Transpose that moves only size-1 dims and leaves the shape as it was. */
static bool transpose_is_noop(const mc_node *n, const mc_value *x, const mc_value *y)
{
	if (!mc_shape_eq(&x->shape, &y->shape))
		return false;
	const int64_t *perm;
	size_t count;
	if (mc_attr_ints(n, "perm", &perm, &count))
		return false;
	int rank = x->shape.rank, last = -1;
	if (perm && count != (size_t)rank)
		return false;
	for (int i = 0; i < rank; i++) {
		int64_t axis = perm ? perm[i] : rank - 1 - i;
		if (axis < 0 || axis >= rank)
			return false;
		if (x->shape.dims[axis] == 1)
			continue;
		if (axis < last)
			return false;
		last = (int)axis;
	}
	return true;
}

/* The node passes input 0 through unchanged to output 0. */
static bool is_noop(const mc_graph *g, const mc_node *n, const int *uses)
{
	if (!n->op || n->n_inputs < 1 || n->inputs[0] < 0 || n->n_outputs < 1 || n->outputs[0] < 0)
		return false;
	const mc_value *x = &g->values[n->inputs[0]], *y = &g->values[n->outputs[0]];
	if (x->dtype != y->dtype || !x->typed || !y->typed)
		return false;
	if (n->id == MC_OP_Identity)
		return true;
	if (n->id == MC_OP_Dropout)
		/* inference rejects random dropping; the mask must be unused */
		return n->n_outputs < 2 || n->outputs[1] < 0 || uses[n->outputs[1]] == 0;
	if (n->id == MC_OP_Reshape || n->id == MC_OP_Flatten || n->id == MC_OP_Squeeze ||
	    n->id == MC_OP_Unsqueeze || n->id == MC_OP_Expand)
		return mc_shape_eq(&x->shape, &y->shape);
	if (n->id == MC_OP_Cast || n->id == MC_OP_CastLike)
		return mc_shape_eq(&x->shape, &y->shape);
	if (n->id == MC_OP_Transpose)
		return transpose_is_noop(n, x, y);
	return false;
}

/* Keeps a no-op whose output is a graph output as a plain Identity. */
static bool make_identity(mc_graph *g, int i)
{
	mc_node *n = &g->nodes[i];
	if (n->id == MC_OP_Identity)
		return false;
	mc_node id = ge_identity_node(g, n->name, n->inputs[0], n->outputs[0]);
	int out = n->outputs[0];
	for (int k = 1; k < n->n_outputs; k++) /* an unused Dropout mask */
		if (n->outputs[k] >= 0)
			g->values[n->outputs[k]].producer = -1;
	ge_node_free(n);
	*n = id;
	g->values[out].producer = i;
	return true;
}

/* Removes no-op node i (x -> y), recording in `to` the values replaced.
 * Returns 1 if the graph changed. */
static int remove_noop(mc_graph *g, int i, int *uses, bool *dead, int *to,
                       const bool *is_output)
{
	mc_node *n = &g->nodes[i];
	int x = n->inputs[0], y = n->outputs[0];
	if (!is_output[y]) {
		to[y] = x;
		uses[x] += uses[y] - 1;
		uses[y] = 0;
		dead[i] = true;
		return 1;
	}
	/* y names a graph output and must stay: x's producer writes y instead,
	 * when x is an ordinary intermediate */
	int p = g->values[x].producer;
	if (g->values[x].kind != MC_VAL_NODE || p < 0 || is_output[x])
		return make_identity(g, i);
	mc_node *pn = &g->nodes[p];
	for (int k = 0; k < pn->n_outputs; k++)
		if (pn->outputs[k] == x)
			pn->outputs[k] = y;
	to[x] = y; /* readers before node i too: ge_renames_apply */
	g->values[y].producer = p;
	g->values[x].producer = -1;
	uses[y] += uses[x] - 1;
	uses[x] = 0;
	n->inputs[0] = y; /* the dead node no longer reads x */
	dead[i] = true;
	return 1;
}

int mc_pass_identity(mc_graph *g, const mc_freeze_opts *o)
{
	int changes = ge_run_on_branches(g, o, mc_pass_identity);
	if (changes < 0)
		return -1;
	int *uses = ge_use_counts(g);
	bool *dead = mc_xcalloc((size_t)g->n_nodes + 1, sizeof *dead);
	bool *is_output = ge_output_marks(g);
	int *to = ge_renames_new(g);
	for (int i = 0; i < g->n_nodes; i++) {
		ge_rename_reads(&g->nodes[i], to);
		if (is_noop(g, &g->nodes[i], uses))
			changes += remove_noop(g, i, uses, dead, to, is_output);
	}
	ge_renames_apply(g, to);
	ge_remove_nodes(g, dead);
	free(to);
	free(is_output);
	free(dead);
	free(uses);
	return changes;
}

/* ==== dce ==== */

int mc_pass_dce(mc_graph *g, const mc_freeze_opts *o)
{
	/* branches first: what they stop reading may die here */
	int in_branches = ge_run_on_branches(g, o, mc_pass_dce);
	if (in_branches < 0)
		return -1;
	bool *used = mc_xcalloc((size_t)g->n_values + 1, sizeof *used);
	bool *dead = mc_xcalloc((size_t)g->n_nodes + 1, sizeof *dead);
	for (int i = 0; i < g->n_outputs; i++)
		used[g->outputs[i]] = true;
	/* reverse topological order: a node is live once a live node reads it */
	for (int i = g->n_nodes - 1; i >= 0; i--) {
		const mc_node *n = &g->nodes[i];
		bool live = false;
		for (int k = 0; k < n->n_outputs; k++)
			live |= n->outputs[k] >= 0 && used[n->outputs[k]];
		if (!live) {
			dead[i] = true;
			continue;
		}
		for (int k = 0; k < n->n_inputs; k++)
			if (n->inputs[k] >= 0)
				used[n->inputs[k]] = true;
		for (int k = 0; k < n->n_implicit; k++)
			used[n->implicit[k]] = true;
	}
	int removed = ge_remove_nodes(g, dead);
	free(used);
	free(dead);
	return in_branches + removed;
}

/* ==== cse ==== */

static uint64_t hash_bytes(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;
	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull; /* FNV-1a */
	return h;
}

static uint64_t hash_int(uint64_t h, int64_t v)
{
	return hash_bytes(h, &v, sizeof v);
}

static uint64_t hash_tensor(uint64_t h, const mc_tensor *t)
{
	h = hash_int(h, t->dtype);
	h = hash_int(h, t->shape.rank);
	for (int d = 0; d < t->shape.rank; d++)
		h = hash_int(h, t->shape.dims[d]);
	return hash_bytes(h, t->data, t->nbytes);
}

static bool tensor_eq(const mc_tensor *a, const mc_tensor *b)
{
	return a->dtype == b->dtype && mc_shape_eq(&a->shape, &b->shape) &&
	       a->nbytes == b->nbytes && memcmp(a->data, b->data, a->nbytes) == 0;
}

static bool attr_eq(const mc_attr *a, const mc_attr *b)
{
	if (a->type != b->type || strcmp(a->name, b->name) != 0)
		return false;
	switch (a->type) {
	case MC_ATTR_FLOAT: return memcmp(&a->f, &b->f, sizeof a->f) == 0;
	case MC_ATTR_INT: return a->i == b->i;
	case MC_ATTR_STRING: return strcmp(a->s ? a->s : "", b->s ? b->s : "") == 0;
	case MC_ATTR_TENSOR: return a->t && b->t && tensor_eq(a->t, b->t);
	case MC_ATTR_FLOATS:
		return a->n == b->n && (!a->n || memcmp(a->floats, b->floats, a->n * sizeof(float)) == 0);
	case MC_ATTR_INTS:
		return a->n == b->n && (!a->n || memcmp(a->ints, b->ints, a->n * sizeof(int64_t)) == 0);
	case MC_ATTR_STRINGS:
		if (a->n != b->n)
			return false;
		for (size_t i = 0; i < a->n; i++)
			if (strcmp(a->strings[i], b->strings[i]) != 0)
				return false;
		return true;
	default: return false; /* graphs: never merged */
	}
}

/* Attributes are compared as sets: their order in the file is no part of
 * the semantics. */
static bool attrs_eq(const mc_node *a, const mc_node *b)
{
	if (a->n_attrs != b->n_attrs)
		return false;
	for (int i = 0; i < a->n_attrs; i++) {
		const mc_attr *other = mc_attr_find(b, a->attrs[i].name);
		if (!other || !attr_eq(&a->attrs[i], other))
			return false;
	}
	return true;
}

static bool cse_candidate(const mc_node *n)
{
	if (!n->op || (n->op->flags & (MC_OP_NO_FOLD | MC_OP_SUBGRAPH)) || n->n_implicit)
		return false;
	for (int a = 0; a < n->n_attrs; a++)
		if (n->attrs[a].g || n->attrs[a].type == MC_ATTR_GRAPH ||
		    n->attrs[a].type == MC_ATTR_GRAPHS)
			return false;
	return true;
}

/* Merging n into an earlier node would rename a graph output. */
static bool writes_graph_output(const bool *is_output, const mc_node *n)
{
	for (int k = 0; k < n->n_outputs; k++)
		if (n->outputs[k] >= 0 && is_output[n->outputs[k]])
			return true;
	return false;
}

/* Hash of what makes two nodes compute the same thing. Attribute values
 * are left to nodes_eq (their order varies). */
static uint64_t node_hash(const mc_node *n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	h = hash_int(h, n->id);
	h = hash_int(h, n->opset);
	h = hash_int(h, n->n_inputs);
	for (int k = 0; k < n->n_inputs; k++)
		h = hash_int(h, n->inputs[k]);
	h = hash_int(h, n->n_outputs);
	for (int k = 0; k < n->n_outputs; k++)
		h = hash_int(h, n->outputs[k] >= 0);
	return hash_int(h, n->n_attrs);
}

static bool nodes_eq(const mc_node *a, const mc_node *b)
{
	/* ops outside the table (other domains) are never merged */
	if (a->id != b->id || a->id == MC_OP_NONE || a->opset != b->opset || a->n_inputs != b->n_inputs || a->n_outputs != b->n_outputs)
		return false;
	for (int k = 0; k < a->n_inputs; k++)
		if (a->inputs[k] != b->inputs[k])
			return false;
	for (int k = 0; k < a->n_outputs; k++)
		if ((a->outputs[k] >= 0) != (b->outputs[k] >= 0))
			return false;
	return attrs_eq(a, b);
}

/* Open-addressing table of indices (nodes or values) keyed by a hash. */
typedef struct {
	size_t cap;
	uint64_t *keys;
	int *items;
} table;

static table table_new(int count)
{
	table t = {.cap = 16};
	while (t.cap < 2 * (size_t)count + 1)
		t.cap *= 2;
	t.keys = mc_xcalloc(t.cap, sizeof *t.keys);
	t.items = mc_xmalloc(t.cap * sizeof *t.items);
	for (size_t i = 0; i < t.cap; i++)
		t.items[i] = -1;
	return t;
}

static void table_free(table *t)
{
	free(t->keys);
	free(t->items);
}

/* Finds an item with key h for which same(item) holds, else inserts `item`
 * and returns -1. */
static int table_find_or_add(table *t, uint64_t h, int item,
                             bool (*same)(const void *ctx, int a, int b), const void *ctx)
{
	for (size_t i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
		if (t->items[i] < 0) {
			t->keys[i] = h;
			t->items[i] = item;
			return -1;
		}
		if (t->keys[i] == h && same(ctx, t->items[i], item))
			return t->items[i];
	}
}

static bool same_node(const void *ctx, int a, int b)
{
	const mc_graph *g = ctx;
	return nodes_eq(&g->nodes[a], &g->nodes[b]);
}

static bool same_const(const void *ctx, int a, int b)
{
	const mc_graph *g = ctx;
	return tensor_eq(g->values[a].konst, g->values[b].konst);
}

/* Identical constants: the later ones' readers read the first. */
static int merge_constants(mc_graph *g)
{
	int *uses = ge_use_counts(g);
	bool *is_output = ge_output_marks(g);
	int *to = ge_renames_new(g);
	table t = table_new(g->n_values);
	int merged = 0;
	for (int v = 0; v < g->n_values; v++) {
		const mc_value *val = &g->values[v];
		if (val->kind != MC_VAL_CONST || !val->konst || !uses[v])
			continue;
		int first = table_find_or_add(&t, hash_tensor(0xcbf29ce484222325ull, val->konst), v,
		                              same_const, g);
		/* uses by graph outputs stay: only node readers move */
		if (first >= 0 && uses[v] > (is_output[v] ? 1 : 0)) {
			to[v] = first;
			merged++;
		}
	}
	ge_renames_apply(g, to);
	table_free(&t);
	free(to);
	free(is_output);
	free(uses);
	return merged;
}

/* Identical nodes on identical inputs: the later one's readers read the
 * first one's outputs. Node order makes chains merge in one sweep. */
static int merge_nodes(mc_graph *g)
{
	table t = table_new(g->n_nodes);
	bool *dead = mc_xcalloc((size_t)g->n_nodes + 1, sizeof *dead);
	bool *is_output = ge_output_marks(g);
	int *to = ge_renames_new(g);
	int merged = 0;
	for (int i = 0; i < g->n_nodes; i++) {
		mc_node *n = &g->nodes[i];
		/* readers come after writers: renamed before they are compared */
		ge_rename_reads(n, to);
		if (!cse_candidate(n))
			continue;
		int first = table_find_or_add(&t, node_hash(n), i, same_node, g);
		if (first < 0 || writes_graph_output(is_output, n))
			continue;
		for (int k = 0; k < n->n_outputs; k++)
			if (n->outputs[k] >= 0)
				to[n->outputs[k]] = g->nodes[first].outputs[k];
		dead[i] = true;
		merged++;
	}
	ge_renames_apply(g, to);
	ge_remove_nodes(g, dead);
	free(to);
	free(is_output);
	free(dead);
	table_free(&t);
	return merged;
}

int mc_pass_cse(mc_graph *g, const mc_freeze_opts *o)
{
	int merged = ge_run_on_branches(g, o, mc_pass_cse);
	if (merged < 0)
		return -1;
	merged += merge_constants(g);
	return merged + merge_nodes(g);
}
