/* Scan and Loop unrolled for code generation: the generated code has no
 * loops over graphs, so a Scan or Loop whose inputs are not all known
 * (those fold whole) becomes its body's nodes once per iteration. The
 * iteration count must be known when compiling: a Scan's from its static
 * shapes, a Loop's from a constant trip count and a condition that cannot
 * end it early (a for loop). Each iteration's scan slices are Gathers of
 * the scan inputs, its iteration number a constant, its states the
 * previous iteration's body results, and the stacked outputs Concats of
 * the iterations' slices. The other passes then fold, merge and fuse the
 * copies like any other nodes.
 *
 * The copies cost code per iteration, so one that would unroll into more
 * nodes than the limit (--unroll-limit) is left as it is and the compiler
 * says why (mc_unroll_refusal). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../libcore/ops/loop.h"
#include "graph_edit.h"

static bool has_zero_elements(const mc_value *v)
{
	size_t numel;
	return !mc_shape_numel(&v->shape, &numel) || numel == 0;
}

/* What keeps any body from being unrolled `copies` times, or NULL. */
static const char *body_refusal(const mc_graph *g, const mc_node *n, int64_t copies, int extra,
                                int limit, char *buf, size_t len)
{
	const mc_graph *body = mc_loop_body(n);
	if (!n->params || !body || !n->op)
		return "it has no typed body";
	for (int i = 0; i < body->n_nodes; i++) {
		const mc_node *bn = &body->nodes[i];
		if (bn->n_implicit || (bn->op && (bn->op->flags & MC_OP_SUBGRAPH))) {
			snprintf(buf, len, "its body's node '%s' (%s) holds a subgraph", bn->name,
			         bn->op_type);
			return buf;
		}
	}
	for (int k = 0; k < n->n_inputs; k++)
		if (n->inputs[k] >= 0 && has_zero_elements(&g->values[n->inputs[k]]))
			return "an input has no elements";
	for (int k = 0; k < n->n_outputs; k++)
		if (n->outputs[k] >= 0 && has_zero_elements(&g->values[n->outputs[k]]))
			return "an output has no elements";
	if (copies > limit / (body->n_nodes + extra + 1)) {
		snprintf(buf, len, "%lld iterations of its %d-node body would make more than %d nodes "
		         "(--unroll-limit)", (long long)copies, body->n_nodes, limit);
		return buf;
	}
	return NULL;
}

static const char *scan_refusal(const mc_graph *g, const mc_node *n, int limit, char *buf,
                                size_t len)
{
	const scan_params *p = n->params;
	bool v8 = n->opset < 9;
	if (p && p->seq_len < 1)
		return "its sequence is empty";
	const char *why = body_refusal(g, n, !p ? 0 : v8 ? p->batch * p->seq_len : p->seq_len,
	                               p ? p->n_scan_in : 0, limit, buf, len);
	if (why)
		return why;
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

static const char *loop_refusal(const mc_graph *g, const mc_node *n, int limit, char *buf,
                                size_t len)
{
	const loop_params *p = n->params;
	if (p && p->iters < 0) {
		snprintf(buf, len, "its iteration count is not known at compile time (%s)",
		         p->iters_why ? p->iters_why : "the trip count or condition is not constant");
		return buf;
	}
	return body_refusal(g, n, p ? p->iters : 0, 0, limit, buf, len);
}

const char *mc_unroll_refusal(const mc_graph *g, const mc_node *n, int limit, char *buf, size_t len)
{
	if (limit <= 0)
		limit = MC_DEFAULT_UNROLL_LIMIT;
	if (n->domain[0])
		return "it is not of the default domain";
	if (n->id == MC_OP_Scan)
		return scan_refusal(g, n, limit, buf, len);
	if (n->id == MC_OP_Loop)
		return loop_refusal(g, n, limit, buf, len);
	return "only Scan and Loop unroll";
}

/* ---- building the unrolled nodes ---- */

/* A zeroed tensor for a new constant; the shapes are the graph's own,
 * which inference has already sized. */
static mc_tensor *new_tensor(mc_dtype t, const mc_shape *s)
{
	mc_tensor *r = mc_tensor_new(t, s);
	if (!r) {
		mc_error("out of memory");
		exit(3);
	}
	return r;
}


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
static int add_node(unroller *u, mc_opid id, const char *what, const int *ins, int n_in,
                    int out, int axis)
{
	mc_node *n = push_node(u);
	char name[1024];
	snprintf(name, sizeof name, "%s/%s", u->prefix, what);
	n->name = mc_xstrdup(name);
	n->domain = mc_xstrdup("");
	mc_node_set_op(n, id, u->g->opset);
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
		return mc_node_error(n, "internal error: no %s at opset %d to unroll with", mc_op_name(id),
		                     n->opset);
	return n->op->parse ? n->op->parse(n) : 0;
}

/* An Identity copying `in` into the node's output `out`. */
static void add_identity(unroller *u, const char *what, int in, int out)
{
	char name[1100];
	snprintf(name, sizeof name, "%s/%s", u->prefix, what);
	mc_node *id = push_node(u);
	*id = ge_identity_node(u->g, name, in, out);
	id->guard = u->guard;
	id->guard_else = u->guard_else;
}

static int int64_const(unroller *u, const char *what, const int64_t *vals, int count, bool scalar)
{
	mc_shape s = {.rank = scalar ? 0 : 1, .dims = {count}};
	mc_tensor *t = new_tensor(MC_INT64, &s);
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
	return add_node(u, MC_OP_Gather, what, ins, 2, v, axis) ? -1 : v;
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
		rc = add_node(u, MC_OP_Reshape, name, ins, 2, pieces[i], INT_MIN);
	}
	if (!rc && count > 1)
		rc = add_node(u, MC_OP_Concat, what, pieces, count, dst, axis);
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

/* Body value bv as a value of g in this iteration (map: -2 not yet); with
 * konst, a constant inference found for it is kept. */
static int map_value(unroller *u, int *map, int bv, const char *iter, bool konst)
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
	if (konst && src->konst)
		u->g->values[v].konst = mc_tensor_clone(src->konst);
	return map[bv] = v;
}

/* One iteration: the body's nodes reading ins[] (a value of g for each body
 * input); outs[] gets the body's outputs as values of g. With konst, the
 * constants inference found inside the body hold for every iteration and
 * are kept. */
static int run_iteration(unroller *u, const int *ins, int *outs, const char *iter, bool konst)
{
	const mc_graph *b = u->body;
	int *map = mc_xmalloc(((size_t)b->n_values + 1) * sizeof *map), rc = 0;
	for (int v = 0; v < b->n_values; v++)
		map[v] = -2;
	for (int i = 0; i < b->n_inputs; i++)
		map[b->inputs[i]] = ins[i];
	for (int i = 0; i < b->n_nodes && !rc; i++) {
		const mc_node *bn = &b->nodes[i];
		mc_node *n = push_node(u);
		char name[1024];
		snprintf(name, sizeof name, "%s/%s/%s", u->prefix, iter, bn->name[0] ? bn->name : bn->op_type);
		n->name = mc_xstrdup(name);
		n->op_type = mc_xstrdup(bn->op_type);
		n->id = bn->id;
		n->domain = mc_xstrdup(bn->domain);
		n->opset = bn->opset;
		n->op = bn->op;
		n->n_inputs = bn->n_inputs;
		n->n_outputs = bn->n_outputs;
		n->inputs = mc_xmalloc(((size_t)bn->n_inputs + 1) * sizeof *n->inputs);
		n->outputs = mc_xmalloc(((size_t)bn->n_outputs + 1) * sizeof *n->outputs);
		for (int k = 0; k < bn->n_inputs; k++)
			n->inputs[k] = map_value(u, map, bn->inputs[k], iter, konst);
		for (int k = 0; k < bn->n_outputs; k++)
			n->outputs[k] = map_value(u, map, bn->outputs[k], iter, konst);
		n->n_attrs = bn->n_attrs;
		n->attrs = mc_xcalloc((size_t)bn->n_attrs + 1, sizeof *n->attrs);
		for (int a = 0; a < bn->n_attrs; a++)
			n->attrs[a] = clone_attr(&bn->attrs[a]);
		rc = n->op && n->op->parse ? n->op->parse(n) : 0;
	}
	for (int k = 0; k < b->n_outputs && !rc; k++)
		outs[k] = map_value(u, map, b->outputs[k], iter, konst);
	free(map);
	return rc;
}

/* States, then slices: a Scan body's inputs; its outputs back into states
 * and outs. */
static int scan_iteration(unroller *u, const scan_params *p, int *states, const int *slices,
                          int *outs, const char *iter)
{
	int n_in = p->n_state + p->n_scan_in, n_out = p->n_state + p->n_scan_out;
	int *ins = mc_xmalloc(((size_t)n_in + 1) * sizeof *ins);
	int *res = mc_xmalloc(((size_t)n_out + 1) * sizeof *res);
	memcpy(ins, states, (size_t)p->n_state * sizeof *ins);
	memcpy(ins + p->n_state, slices, (size_t)p->n_scan_in * sizeof *ins);
	int rc = run_iteration(u, ins, res, iter, true);
	if (!rc) {
		memcpy(states, res, (size_t)p->n_state * sizeof *states);
		memcpy(outs, res + p->n_state, (size_t)p->n_scan_out * sizeof *outs);
	}
	free(res);
	free(ins);
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
			rc = scan_iteration(u, p, states, slices, outs, iter);
		for (int k = 0; k < p->n_scan_out && !rc; k++)
			ys[(size_t)k * L + (p->out_dir[k] ? L - 1 - t : t)] = outs[k];
	}
	for (int k = 0; k < p->n_state && !rc; k++) {
		if (n->outputs[k] < 0)
			continue;
		char what[32];
		snprintf(what, sizeof what, "state%d", k);
		add_identity(u, what, states[k], n->outputs[k]);
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
				rc = scan_iteration(u, p, states, slices, outs, iter);
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
				mc_tensor *zero = new_tensor(slice->dtype, &slice->shape);
				char zname[1100];
				snprintf(zname, sizeof zname, "%s/b%d/zero%d", u->prefix, b, k);
				int z = ge_add_const(u->g, zname, zero);
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

/* A for loop: the iteration number a constant, the condition the constant
 * true (the body was typed with it true, and its count is known, so the
 * condition it computes cannot end the loop early); carried values feed the
 * next iteration, scan slices are stacked along a new axis 0. A body typed
 * once per iteration number (shapes that depend on it) keeps none of the
 * constants of its last typing: its copies are typed again once spliced. */
static int unroll_loop(unroller *u, const mc_node *n, const loop_params *p)
{
	const mc_graph *b = u->body;
	int n_carried = n->n_inputs - 2, n_scan = n->n_outputs - n_carried, L = (int)p->iters;
	int rc = 0;
	int *ins = mc_xmalloc(((size_t)b->n_inputs + 1) * sizeof *ins);
	int *res = mc_xmalloc(((size_t)b->n_outputs + 1) * sizeof *res);
	int *ys = mc_xmalloc(((size_t)n_scan * L + 1) * sizeof *ys); /* [k][t] */
	const mc_value *iv = &b->values[b->inputs[0]], *cv = &b->values[b->inputs[1]];
	mc_tensor *yes = new_tensor(MC_BOOL, &cv->shape);
	mc_set_i(yes, 0, 1);
	char what[1100];
	snprintf(what, sizeof what, "%s/cond", u->prefix);
	ins[1] = ge_add_const(u->g, what, yes);
	for (int k = 0; k < n_carried; k++)
		ins[2 + k] = n->inputs[2 + k];
	for (int t = 0; t < L && !rc; t++) {
		char iter[32];
		snprintf(iter, sizeof iter, "i%d", t);
		mc_tensor *it = new_tensor(MC_INT64, &iv->shape);
		mc_set_i(it, 0, t);
		snprintf(what, sizeof what, "%s/%s/iteration", u->prefix, iter);
		ins[0] = ge_add_const(u->g, what, it);
		rc = run_iteration(u, ins, res, iter, !p->per_iteration);
		for (int k = 0; k < n_carried && !rc; k++)
			ins[2 + k] = res[1 + k];
		for (int k = 0; k < n_scan && !rc; k++)
			ys[(size_t)k * L + t] = res[1 + n_carried + k];
	}
	for (int k = 0; k < n_carried && !rc; k++) {
		if (n->outputs[k] < 0)
			continue;
		snprintf(what, sizeof what, "carried%d", k);
		add_identity(u, what, ins[2 + k], n->outputs[k]);
	}
	for (int k = 0; k < n_scan && !rc; k++) {
		snprintf(what, sizeof what, "stacked%d", k);
		int dst = n->outputs[n_carried + k];
		if (dst >= 0)
			rc = stack(u, ys + (size_t)k * L, L, 0, dst, what) < 0;
	}
	free(ys);
	free(res);
	free(ins);
	return rc ? -1 : 0;
}

/* Replaces the Scan or Loop at pos by its unrolled nodes. */
static int unroll_node(mc_graph *g, int pos)
{
	const mc_node *n = &g->nodes[pos];
	const mc_graph *body = mc_loop_body(n);
	bool loop = n->id == MC_OP_Loop;
	bool retype = loop && ((const loop_params *)n->params)->per_iteration;
	char *prefix = mc_xstrdup(n->name[0] ? n->name : loop ? "loop" : "scan");
	unroller u = {.g = g, .body = body, .prefix = prefix, .guard = n->guard,
	              .guard_else = n->guard_else};
	u.const_of = mc_xmalloc(((size_t)body->n_values + 1) * sizeof *u.const_of);
	for (int v = 0; v < body->n_values; v++)
		u.const_of[v] = -1;
	int rc = loop ? unroll_loop(&u, n, n->params)
	              : n->opset < 9 ? unroll8(&u, n, n->params) : unroll9(&u, n, n->params);
	if (rc) {
		for (int i = 0; i < u.count; i++)
			ge_node_free(&u.nodes[i]);
	} else {
		ge_splice_nodes(g, pos, u.nodes, u.count);
		for (int i = pos; i < pos + u.count && retype && !rc; i++)
			rc = mc_infer_node(g, i);
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
		if ((n->id != MC_OP_Scan && n->id != MC_OP_Loop) ||
		    mc_unroll_refusal(g, n, o ? o->unroll_limit : 0, why, sizeof why))
			continue;
		int before = g->n_nodes;
		if (unroll_node(g, i))
			return -1;
		i += g->n_nodes - before; /* past the copies */
		changes++;
	}
	return changes;
}
