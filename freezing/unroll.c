/* Scan unrolled for code generation: the generated code has no loops over
 * graphs, so a Scan whose inputs are not all known (those fold whole)
 * becomes its body's nodes once per iteration. Shapes are static, so the
 * iteration count is known; each iteration's scan slices are Gathers of
 * the scan inputs, its states the previous iteration's body results, and
 * the stacked outputs Concats of the iterations' slices. The other passes
 * then fold, merge and fuse the copies like any other nodes.
 *
 * The copies cost code per iteration, so a Scan that would unroll into
 * more than MAX_UNROLLED_NODES nodes is left as it is and the compiler
 * says why (mc_scan_unroll_refusal). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../libcore/ops/loop.h"
#include "graph_edit.h"

#define MAX_UNROLLED_NODES 4096

static const mc_graph *body_of(const mc_node *n)
{
	const mc_attr *a = mc_attr_find(n, "body");
	return a && a->type == MC_ATTR_GRAPH ? a->g : NULL;
}

static bool has_zero_elements(const mc_value *v)
{
	size_t numel;
	return !mc_shape_numel(&v->shape, &numel) || numel == 0;
}

const char *mc_scan_unroll_refusal(const mc_graph *g, const mc_node *n, char *buf, size_t len)
{
	const scan_params *p = n->params;
	const mc_graph *body = body_of(n);
	bool v8 = n->opset < 9;
	if (!p || !body || !n->op)
		return "it has no typed body";
	for (int i = 0; i < body->n_nodes; i++) {
		const mc_node *bn = &body->nodes[i];
		if (bn->n_implicit || (bn->op && (bn->op->flags & MC_OP_SUBGRAPH))) {
			snprintf(buf, len, "its body's node '%s' (%s) holds a subgraph", bn->name,
			         bn->op_type);
			return buf;
		}
	}
	if (p->seq_len < 1)
		return "its sequence is empty";
	for (int k = 0; k < n->n_inputs; k++)
		if (n->inputs[k] >= 0 && has_zero_elements(&g->values[n->inputs[k]]))
			return "an input has no elements";
	for (int k = 0; k < n->n_outputs; k++)
		if (n->outputs[k] >= 0 && has_zero_elements(&g->values[n->outputs[k]]))
			return "an output has no elements";
	int64_t copies = v8 ? p->batch * p->seq_len : p->seq_len;
	if (copies > MAX_UNROLLED_NODES / (body->n_nodes + p->n_scan_in + 1)) {
		snprintf(buf, len, "%lld iterations of its %d-node body would make more than %d nodes",
		         (long long)copies, body->n_nodes, MAX_UNROLLED_NODES);
		return buf;
	}
	if (v8 && n->n_inputs > 0 && n->inputs[0] >= 0) {
		const mc_tensor *lens = g->values[n->inputs[0]].konst;
		if (!lens)
			return "its sequence_lens is known only at run time";
		for (size_t b = 0; b < lens->numel; b++) {
			int64_t l = mc_get_i(lens, b);
			if (l < 0 || l > p->seq_len) {
				snprintf(buf, len, "sequence_lens[%zu] is %lld, outside [0, %lld]", b,
				         (long long)l, (long long)p->seq_len);
				return buf;
			}
		}
	}
	return NULL;
}

/* ---- building the unrolled nodes ---- */

typedef struct {
	mc_graph *g;
	const mc_graph *body;
	const char *prefix;      /* the Scan's name, for the new names */
	int guard;
	bool guard_else;
	mc_node *nodes;
	int count, cap;
	int *const_of;           /* a body constant's copy in g (shared by the iterations), or -1 */
} unroller;

static int new_value(unroller *u, const char *what, mc_dtype dtype, const mc_shape *shape)
{
	char base[1024];
	snprintf(base, sizeof base, "%s/%s", u->prefix, what);
	char *name = ge_unique_name(u->g, base);
	int v = mc_graph_add_value(u->g, name, MC_VAL_NODE);
	free(name);
	mc_value *val = &u->g->values[v];
	val->dtype = dtype;
	val->shape = *shape;
	val->typed = true;
	return v;
}

static mc_node *push_node(unroller *u)
{
	if (u->count == u->cap) {
		u->cap = u->cap ? 2 * u->cap : 64;
		u->nodes = realloc(u->nodes, (size_t)u->cap * sizeof *u->nodes);
		if (!u->nodes) {
			mc_error("out of memory");
			exit(3);
		}
	}
	mc_node *n = &u->nodes[u->count++];
	memset(n, 0, sizeof *n);
	n->guard = u->guard;
	n->guard_else = u->guard_else;
	return n;
}

/* A node of the default domain at g's opset writing `out`; an axis other
 * than INT_MIN becomes its attribute 'axis'. */
static int add_node(unroller *u, const char *op_type, const char *what, const int *ins, int n_in,
                    int out, int axis)
{
	mc_node *n = push_node(u);
	char name[1024];
	snprintf(name, sizeof name, "%s/%s", u->prefix, what);
	n->name = mc_xstrdup(name);
	n->op_type = mc_xstrdup(op_type);
	n->domain = mc_xstrdup("");
	n->opset = u->g->opset;
	n->op = mc_registry_find(op_type, n->opset, NULL);
	n->n_inputs = n_in;
	n->inputs = mc_xmalloc((size_t)n_in * sizeof *n->inputs);
	memcpy(n->inputs, ins, (size_t)n_in * sizeof *n->inputs);
	n->n_outputs = 1;
	n->outputs = mc_xmalloc(sizeof *n->outputs);
	n->outputs[0] = out;
	if (axis != INT_MIN) {
		n->n_attrs = 1;
		n->attrs = mc_xcalloc(1, sizeof *n->attrs);
		n->attrs[0].name = mc_xstrdup("axis");
		n->attrs[0].type = MC_ATTR_INT;
		n->attrs[0].i = axis;
	}
	if (!n->op)
		return mc_node_error(n, "internal error: no %s at opset %d to unroll Scan with", op_type,
		                     n->opset);
	return n->op->parse ? n->op->parse(n) : 0;
}

static int int64_const(unroller *u, const char *what, const int64_t *vals, int count, bool scalar)
{
	mc_shape s = {.rank = scalar ? 0 : 1, .dims = {count}};
	mc_tensor *t = mc_tensor_new(MC_INT64, &s);
	if (!t) {
		mc_error("out of memory");
		exit(3);
	}
	for (int i = 0; i < count; i++)
		mc_set_i(t, (size_t)i, vals[i]);
	char base[1024];
	snprintf(base, sizeof base, "%s/%s", u->prefix, what);
	return ge_add_const(u->g, base, t);
}

/* Entry `index` of src along `axis`, that axis dropped: a new value, or -1. */
static int take(unroller *u, int src, int64_t index, int axis, const char *what)
{
	mc_dtype dtype = u->g->values[src].dtype;
	mc_shape s = u->g->values[src].shape, r = {.rank = s.rank - 1};
	for (int d = 0, o = 0; d < s.rank; d++)
		if (d != axis)
			r.dims[o++] = s.dims[d];
	char idx_name[1100];
	snprintf(idx_name, sizeof idx_name, "%s_index", what);
	int ins[2] = {src, int64_const(u, idx_name, &index, 1, true)};
	int v = new_value(u, what, dtype, &r);
	return add_node(u, "Gather", what, ins, 2, v, axis) ? -1 : v;
}

/* vals[0..count) (one shape) stacked along a new axis `axis` into dst (a
 * new value when dst < 0): each reshaped to hold the axis, then one Concat.
 * Returns the stacked value, or -1. */
static int stack(unroller *u, const int *vals, int count, int axis, int dst, const char *what)
{
	mc_dtype dtype = u->g->values[vals[0]].dtype;
	mc_shape s = u->g->values[vals[0]].shape, one = {.rank = s.rank + 1}, all;
	for (int d = 0, i = 0; d <= s.rank; d++)
		one.dims[d] = d == axis ? 1 : s.dims[i++];
	all = one;
	all.dims[axis] = count;
	if (dst < 0)
		dst = new_value(u, what, dtype, &all);
	char name[1100];
	snprintf(name, sizeof name, "%s_shape", what);
	int shape = int64_const(u, name, one.dims, one.rank, false);
	int *pieces = mc_xmalloc((size_t)count * sizeof *pieces);
	int rc = 0;
	for (int i = 0; i < count && !rc; i++) {
		snprintf(name, sizeof name, "%s_%d", what, i);
		pieces[i] = count == 1 ? dst : new_value(u, name, dtype, &one);
		int ins[2] = {vals[i], shape};
		rc = add_node(u, "Reshape", name, ins, 2, pieces[i], INT_MIN);
	}
	if (!rc && count > 1)
		rc = add_node(u, "Concat", what, pieces, count, dst, axis);
	free(pieces);
	return rc ? -1 : dst;
}

static mc_attr clone_attr(const mc_attr *a)
{
	mc_attr c = *a;
	c.name = mc_xstrdup(a->name);
	c.s = a->s ? mc_xstrdup(a->s) : NULL;
	c.t = a->t ? mc_tensor_clone(a->t) : NULL;
	c.floats = a->n && a->floats ? mc_xmalloc(a->n * sizeof *c.floats) : NULL;
	c.ints = a->n && a->ints ? mc_xmalloc(a->n * sizeof *c.ints) : NULL;
	c.strings = a->n && a->strings ? mc_xcalloc(a->n, sizeof *c.strings) : NULL;
	for (size_t i = 0; i < a->n; i++) {
		if (c.floats)
			c.floats[i] = a->floats[i];
		if (c.ints)
			c.ints[i] = a->ints[i];
		if (c.strings)
			c.strings[i] = mc_xstrdup(a->strings[i]);
	}
	return c;
}

/* Body value bv as a value of g in this iteration (map: -2 not yet). */
static int map_value(unroller *u, int *map, int bv, const char *iter)
{
	if (bv < 0)
		return -1;
	if (map[bv] != -2)
		return map[bv];
	const mc_value *src = &u->body->values[bv];
	if (src->kind == MC_VAL_CAPTURED)
		return map[bv] = src->outer;
	if (src->kind == MC_VAL_CONST) {
		if (u->const_of[bv] < 0)
			u->const_of[bv] = ge_add_const(u->g, src->name, mc_tensor_clone(src->konst));
		return map[bv] = u->const_of[bv];
	}
	char what[1024];
	snprintf(what, sizeof what, "%s/%s", iter, src->name);
	int v = new_value(u, what, src->dtype, &src->shape);
	if (src->konst)
		u->g->values[v].konst = mc_tensor_clone(src->konst);
	return map[bv] = v;
}

/* One iteration: the body's nodes on states[0..n_state) (replaced by its
 * results) and slices[]; its scan outputs into outs[]. */
static int run_iteration(unroller *u, int n_state, int *states, const int *slices, int *outs,
                         const char *iter)
{
	const mc_graph *b = u->body;
	int *map = mc_xmalloc(((size_t)b->n_values + 1) * sizeof *map), rc = 0;
	for (int v = 0; v < b->n_values; v++)
		map[v] = -2;
	for (int i = 0; i < b->n_inputs; i++)
		map[b->inputs[i]] = i < n_state ? states[i] : slices[i - n_state];
	for (int i = 0; i < b->n_nodes && !rc; i++) {
		const mc_node *bn = &b->nodes[i];
		mc_node *n = push_node(u);
		char name[1024];
		snprintf(name, sizeof name, "%s/%s/%s", u->prefix, iter, bn->name[0] ? bn->name : bn->op_type);
		n->name = mc_xstrdup(name);
		n->op_type = mc_xstrdup(bn->op_type);
		n->domain = mc_xstrdup(bn->domain);
		n->opset = bn->opset;
		n->op = bn->op;
		n->n_inputs = bn->n_inputs;
		n->n_outputs = bn->n_outputs;
		n->inputs = mc_xmalloc(((size_t)bn->n_inputs + 1) * sizeof *n->inputs);
		n->outputs = mc_xmalloc(((size_t)bn->n_outputs + 1) * sizeof *n->outputs);
		for (int k = 0; k < bn->n_inputs; k++)
			n->inputs[k] = map_value(u, map, bn->inputs[k], iter);
		for (int k = 0; k < bn->n_outputs; k++)
			n->outputs[k] = map_value(u, map, bn->outputs[k], iter);
		n->n_attrs = bn->n_attrs;
		n->attrs = mc_xcalloc((size_t)bn->n_attrs + 1, sizeof *n->attrs);
		for (int a = 0; a < bn->n_attrs; a++)
			n->attrs[a] = clone_attr(&bn->attrs[a]);
		rc = n->op && n->op->parse ? n->op->parse(n) : 0;
	}
	for (int k = 0; k < b->n_outputs && !rc; k++) {
		int v = map_value(u, map, b->outputs[k], iter);
		if (k < n_state)
			states[k] = v;
		else
			outs[k - n_state] = v;
	}
	free(map);
	return rc;
}

/* Opset 9+: one sequence over the whole inputs. */
static int unroll9(unroller *u, const mc_node *n, const scan_params *p)
{
	int L = (int)p->seq_len, rc = 0;
	int *states = mc_xmalloc(((size_t)p->n_state + 1) * sizeof *states);
	int *slices = mc_xmalloc(((size_t)p->n_scan_in + 1) * sizeof *slices);
	int *ys = mc_xmalloc(((size_t)p->n_scan_out * L + 1) * sizeof *ys); /* [k][t] */
	int *outs = mc_xmalloc(((size_t)p->n_scan_out + 1) * sizeof *outs);
	memcpy(states, n->inputs, (size_t)p->n_state * sizeof *states);
	for (int t = 0; t < L && !rc; t++) {
		char iter[32], what[64];
		snprintf(iter, sizeof iter, "i%d", t);
		for (int j = 0; j < p->n_scan_in && !rc; j++) {
			snprintf(what, sizeof what, "%s/slice%d", iter, j);
			int pos = p->in_dir[j] ? L - 1 - t : t;
			slices[j] = take(u, n->inputs[p->n_state + j], pos, p->in_axis[j], what);
			rc = slices[j] < 0;
		}
		if (!rc)
			rc = run_iteration(u, p->n_state, states, slices, outs, iter);
		for (int k = 0; k < p->n_scan_out && !rc; k++)
			ys[(size_t)k * L + (p->out_dir[k] ? L - 1 - t : t)] = outs[k];
	}
	for (int k = 0; k < p->n_state && !rc; k++) {
		if (n->outputs[k] < 0)
			continue;
		char name[1100];
		snprintf(name, sizeof name, "%s/state%d", u->prefix, k);
		mc_node *id = push_node(u);
		*id = ge_identity_node(u->g, name, states[k], n->outputs[k]);
		id->guard = u->guard;
		id->guard_else = u->guard_else;
	}
	for (int k = 0; k < p->n_scan_out && !rc; k++) {
		char what[64];
		snprintf(what, sizeof what, "stacked%d", k);
		int dst = n->outputs[p->n_state + k];
		if (dst >= 0)
			rc = stack(u, ys + (size_t)k * L, L, p->out_axis[k], dst, what) < 0;
	}
	free(outs);
	free(ys);
	free(slices);
	free(states);
	return rc ? -1 : 0;
}

/* Opset 8: each batch entry is its own sequence, of sequence_lens[b]
 * iterations when given (a constant); scan output entries past that are
 * zero. The batch entries' results are stacked along axis 0. */
static int unroll8(unroller *u, const mc_node *n, const scan_params *p)
{
	int B = (int)p->batch, L = (int)p->seq_len, rc = 0;
	const mc_tensor *lens = n->inputs[0] >= 0 ? u->g->values[n->inputs[0]].konst : NULL;
	int *states = mc_xmalloc(((size_t)p->n_state + 1) * sizeof *states);
	int *rows = mc_xmalloc(((size_t)p->n_scan_in + 1) * sizeof *rows);
	int *slices = mc_xmalloc(((size_t)p->n_scan_in + 1) * sizeof *slices);
	int *outs = mc_xmalloc(((size_t)p->n_scan_out + 1) * sizeof *outs);
	int *ys = mc_xmalloc(((size_t)L + 1) * sizeof *ys);
	int *final = mc_xmalloc(((size_t)p->n_state * B + 1) * sizeof *final);   /* [k][b] */
	int *stacked = mc_xmalloc(((size_t)p->n_scan_out * B + 1) * sizeof *stacked); /* [k][b] */
	int *per_iter = mc_xmalloc(((size_t)p->n_scan_out * L + 1) * sizeof *per_iter); /* [k][t] */
	for (int b = 0; b < B && !rc; b++) {
		int len = lens ? (int)mc_get_i(lens, (size_t)b) : L;
		char what[64], iter[64];
		for (int k = 0; k < p->n_state && !rc; k++) {
			snprintf(what, sizeof what, "b%d/state%d", b, k);
			states[k] = take(u, n->inputs[1 + k], b, 0, what);
			rc = states[k] < 0;
		}
		for (int j = 0; j < p->n_scan_in && !rc; j++) {
			snprintf(what, sizeof what, "b%d/input%d", b, j);
			rows[j] = take(u, n->inputs[1 + p->n_state + j], b, 0, what);
			rc = rows[j] < 0;
		}
		for (int t = 0; t < len && !rc; t++) {
			snprintf(iter, sizeof iter, "b%d/i%d", b, t);
			for (int j = 0; j < p->n_scan_in && !rc; j++) {
				snprintf(what, sizeof what, "%s/slice%d", iter, j);
				slices[j] = take(u, rows[j], p->in_dir[j] ? len - 1 - t : t, 0, what);
				rc = slices[j] < 0;
			}
			if (!rc)
				rc = run_iteration(u, p->n_state, states, slices, outs, iter);
			for (int k = 0; k < p->n_scan_out && !rc; k++)
				per_iter[(size_t)k * L + t] = outs[k];
		}
		for (int k = 0; k < p->n_state; k++)
			final[(size_t)k * B + b] = states[k];
		for (int k = 0; k < p->n_scan_out && !rc; k++) {
			if (n->outputs[p->n_state + k] < 0)
				continue;
			const mc_value *slice = &u->body->values[u->body->outputs[p->n_state + k]];
			for (int t = 0; t < L; t++)
				ys[t] = t < len ? per_iter[(size_t)k * L + t] : -1;
			if (len < L) {
				mc_tensor *zero = mc_tensor_new(slice->dtype, &slice->shape);
				if (!zero) {
					mc_error("out of memory");
					exit(3);
				}
				snprintf(what, sizeof what, "%s/b%d/zero%d", u->prefix, b, k);
				int z = ge_add_const(u->g, what, zero);
				for (int t = len; t < L; t++)
					ys[t] = z;
			}
			snprintf(what, sizeof what, "b%d/stacked%d", b, k);
			stacked[(size_t)k * B + b] = stack(u, ys, L, 0, -1, what);
			rc = stacked[(size_t)k * B + b] < 0;
		}
	}
	for (int k = 0; k < p->n_state && !rc; k++) {
		char what[64];
		snprintf(what, sizeof what, "state%d", k);
		if (n->outputs[k] >= 0)
			rc = stack(u, final + (size_t)k * B, B, 0, n->outputs[k], what) < 0;
	}
	for (int k = 0; k < p->n_scan_out && !rc; k++) {
		char what[64];
		snprintf(what, sizeof what, "stacked%d", k);
		if (n->outputs[p->n_state + k] >= 0)
			rc = stack(u, stacked + (size_t)k * B, B, 0, n->outputs[p->n_state + k], what) < 0;
	}
	free(per_iter);
	free(stacked);
	free(final);
	free(ys);
	free(outs);
	free(slices);
	free(rows);
	free(states);
	return rc ? -1 : 0;
}

static int unroll_scan(mc_graph *g, int pos)
{
	const mc_node *n = &g->nodes[pos];
	const mc_graph *body = body_of(n);
	char *prefix = mc_xstrdup(n->name[0] ? n->name : "scan");
	unroller u = {.g = g, .body = body, .prefix = prefix, .guard = n->guard,
	              .guard_else = n->guard_else};
	u.const_of = mc_xmalloc(((size_t)body->n_values + 1) * sizeof *u.const_of);
	for (int v = 0; v < body->n_values; v++)
		u.const_of[v] = -1;
	int rc = n->opset < 9 ? unroll8(&u, n, n->params) : unroll9(&u, n, n->params);
	if (rc) {
		for (int i = 0; i < u.count; i++)
			ge_node_free(&u.nodes[i]);
	} else {
		ge_splice_nodes(g, pos, u.nodes, u.count);
	}
	free(u.nodes);
	free(u.const_of);
	free(prefix);
	return rc;
}

int mc_pass_unroll(mc_graph *g, const mc_freeze_opts *o)
{
	int changes = ge_run_on_branches(g, o, mc_pass_unroll);
	if (changes < 0)
		return -1;
	for (int i = 0; i < g->n_nodes; i++) {
		const mc_node *n = &g->nodes[i];
		char why[256];
		if (n->domain[0] || strcmp(n->op_type, "Scan") || mc_scan_unroll_refusal(g, n, why, sizeof why))
			continue;
		int before = g->n_nodes;
		if (unroll_scan(g, i))
			return -1;
		i += g->n_nodes - before; /* past the copies */
		changes++;
	}
	return changes;
}
