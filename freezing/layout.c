/* The channels-last layout pass (mc_pass_layout).
 *
 * Deciding (o->layout): "nchw" leaves the graph alone; "nhwc" converts;
 * "auto" (or NULL) converts when the graph's convolutions do real work in
 * channels: of the multiply-accumulates of all Conv nodes, at least half
 * are in convertible ones (below) with 8 or more output channels, whose
 * channel dim is then the one the kernels vectorise. "depthwise" (the
 * cuda target's in float32) converts only depthwise convolutions
 * whose output the model itself transposes to channels-last, and no
 * pools.
 *
 * Converting: each convertible Conv (float32, rank 3 or 4, constant
 * weight, group 1 or depthwise) becomes NhwcConv and each single-output
 * float32 MaxPool / AveragePool of rank 3 or 4 its Nhwc form, with a
 * Transpose to channels-last in front and the result known as a
 * transposed alternative of the original value. One walk in topological
 * order then sinks those transposes: every value v may have an `alt`,
 * alt = Transpose(v, perm), computed instead of v; v itself is
 * "materialised" (Transpose(alt, inverse) written into v, its index kept)
 * only where a node that cannot run on the alternative, or a graph
 * output, reads it. Nodes that run on alternatives:
 * - pointwise ops whose non-constant inputs all have alternatives of one
 *   perm (constants re-laid at compile time: unsqueezed to the full rank,
 *   then permuted);
 * - Transpose: composes with the alternative's perm, or vanishes; one
 *   back to channels-first of a value without an alternative, read only
 *   by such nodes, is dropped (its input is the alternative);
 * - Concat, Slice (constant axes), Pad (constant pads, no axes), Resize
 *   (roi/scales/sizes permuted, no axes), Unsqueeze: axes remapped;
 * - Reshape, where the alternative holds its elements in the same order;
 * - the Nhwc ops themselves.
 * A Transpose that a conversion asks for of a value which is itself a
 * Transpose (or an order-keeping Reshape) of something composes with it,
 * so the model's own boundary transposes cancel. Value indices never
 * change; new values and nodes are typed by the registry's inference. */
#include <stdlib.h>
#include <string.h>

#include "graph_edit.h"
#include "../libcore/ops/ops.h"
#include "../libcore/ops/nn.h"
#include "../libcore/ops/tensor.h"

typedef struct {
	int alt;                  /* Transpose(v, perm), computed; -1 none */
	int perm[MC_MAX_RANK];
	bool lazy;                /* v's producer now makes alt; v exists only if materialised */
	int subst;                /* reads of v read this value instead; -1 none */
} vstate;

typedef struct {
	mc_graph *g;
	vstate *st;
	int cap_st;
	mc_node *nodes;           /* the new node list */
	int n_nodes, cap_nodes;
	int *producer;            /* per value: index in the new list, -1 */
	int cap_producer;
	bool *is_output;
	bool *alt_readers;        /* per value of the graph as given: its readers all run on alternatives */
	bool *to_last;            /* "depthwise": per value, read only by Transposes to channels-last; else NULL */
	int changes;
} lay;

/* ---- small helpers ---- */

/* arr (of *cap elements of elt bytes) grown to hold at least need. */
static void *grow(void *arr, int *cap, int need, size_t elt)
{
	if (need <= *cap)
		return arr;
	int n = *cap ? *cap : 16;
	while (n < need)
		n *= 2;
	arr = realloc(arr, (size_t)n * elt);
	if (!arr) {
		mc_error("out of memory");
		exit(3);
	}
	*cap = n;
	return arr;
}

static void grow_state(lay *L)
{
	int need = L->g->n_values;
	if (need <= L->cap_st)
		return;
	int old = L->cap_st;
	L->st = grow(L->st, &L->cap_st, need, sizeof *L->st);
	for (int v = old; v < L->cap_st; v++) {
		L->st[v].alt = L->st[v].subst = -1;
		L->st[v].lazy = false;
	}
	int oldp = L->cap_producer;
	L->producer = grow(L->producer, &L->cap_producer, need, sizeof *L->producer);
	for (int v = oldp; v < L->cap_producer; v++)
		L->producer[v] = -1;
}

static bool perm_is_identity(const int *p, int rank)
{
	for (int i = 0; i < rank; i++)
		if (p[i] != i)
			return false;
	return true;
}

static void perm_inverse(const int *p, int rank, int *inv)
{
	for (int i = 0; i < rank; i++)
		inv[p[i]] = i;
}

static void perm_nhwc(int rank, int *p)
{
	p[0] = 0;
	for (int i = 1; i < rank - 1; i++)
		p[i] = i + 1;
	p[rank - 1] = 1;
}

static mc_value *val(lay *L, int v)
{
	return &L->g->values[v];
}

/* True if Transpose(v, p) keeps v's elements in the same order (it moves
 * size-1 dims only): a reshape. */
static bool perm_keeps_order(const mc_shape *s, const int *p)
{
	int last = -1;
	for (int i = 0; i < s->rank; i++) {
		if (s->dims[p[i]] == 1)
			continue;
		if (p[i] < last)
			return false;
		last = p[i];
	}
	return true;
}

static int new_value(lay *L, const char *base)
{
	char *name = ge_unique_name(L->g, base);
	int v = mc_graph_add_value(L->g, name, MC_VAL_NODE);
	free(name);
	grow_state(L);
	return v;
}

static mc_attr ints_attr(const char *name, const int *v, int n)
{
	mc_attr a = {.name = mc_xstrdup(name), .type = MC_ATTR_INTS, .n = (size_t)n};
	a.ints = mc_xmalloc(((size_t)n + 1) * sizeof *a.ints);
	for (int i = 0; i < n; i++)
		a.ints[i] = v[i];
	return a;
}

/* Types node n's outputs with the registry's inference. */
static int infer_node(lay *L, mc_node *n)
{
	const mc_value *in[8] = {0};
	mc_value *out[2] = {0};
	if (n->n_inputs > 8 || n->n_outputs > 2)
		return mc_node_error(n, "layout: too many inputs");
	for (int k = 0; k < n->n_inputs; k++)
		in[k] = n->inputs[k] >= 0 ? val(L, n->inputs[k]) : NULL;
	for (int k = 0; k < n->n_outputs; k++)
		out[k] = n->outputs[k] >= 0 ? val(L, n->outputs[k]) : NULL;
	mc_infer_ctx c = {.node = n, .graph = L->g, .n_in = n->n_inputs, .n_out = n->n_outputs,
	                  .in = in, .out = out};
	return n->op->infer(&c);
}

/* Appends n (moved) to the new list. */
static void push_node(lay *L, mc_node *n)
{
	L->nodes = grow(L->nodes, &L->cap_nodes, L->n_nodes + 1, sizeof *L->nodes);
	for (int k = 0; k < n->n_outputs; k++)
		if (n->outputs[k] >= 0)
			L->producer[n->outputs[k]] = L->n_nodes;
	L->nodes[L->n_nodes++] = *n;
}

/* A new node of a default-domain op (or an internal one) reading in[] and
 * writing out; typed; appended. */
static int emit(lay *L, mc_opid id, const char *name, const int *in, int n_in, int out,
                mc_attr *attrs, int n_attrs)
{
	mc_node n = {0};
	n.name = mc_xstrdup(name);
	n.domain = mc_xstrdup("");
	mc_node_set_op(&n, id, L->g->opset);
	n.n_inputs = n_in;
	n.n_outputs = 1;
	n.inputs = mc_xmalloc(((size_t)n_in + 1) * sizeof *n.inputs);
	memcpy(n.inputs, in, (size_t)n_in * sizeof *in);
	n.outputs = mc_xmalloc(sizeof *n.outputs);
	n.outputs[0] = out;
	n.n_attrs = n_attrs;
	n.attrs = mc_xcalloc((size_t)n_attrs + 1, sizeof *n.attrs);
	if (n_attrs)
		memcpy(n.attrs, attrs, (size_t)n_attrs * sizeof *attrs);
	if (!n.op || (n.op->parse && n.op->parse(&n)) || infer_node(L, &n)) {
		mc_node_free(&n);
		return mc_error("layout: cannot make a %s node", mc_op_name(id)), -1;
	}
	push_node(L, &n);
	L->changes++;
	return 0;
}

/* ---- transposes ---- */

/* Constant t transposed by p (rank of t = length of p). */
static mc_tensor *permute_const(const mc_tensor *t, const int *p)
{
	int rank = t->shape.rank;
	mc_shape s = {.rank = rank};
	for (int i = 0; i < rank; i++)
		s.dims[i] = t->shape.dims[p[i]];
	mc_tensor *r = mc_tensor_new(t->dtype, &s);
	if (!r)
		return NULL;
	size_t esz = mc_dtype_size(t->dtype);
	int64_t st[MC_MAX_RANK], pos[MC_MAX_RANK] = {0};
	mc_strides(&t->shape, st);
	for (size_t k = 0; k < r->numel; k++) {
		int64_t off = 0;
		for (int i = 0; i < rank; i++)
			off += pos[i] * st[p[i]];
		memcpy((char *)r->data + k * esz, (const char *)t->data + (size_t)off * esz, esz);
		for (int i = rank - 1; i >= 0 && ++pos[i] == s.dims[i]; i--)
			pos[i] = 0;
	}
	return r;
}

/* The value Transpose(v, p), made or found: reuses v's alternative, composes
 * with a Transpose (or order-keeping Reshape) producing v, permutes a
 * constant, and emits a Transpose only when nothing else does. dest >= 0:
 * the value to write when one is emitted. -1 on error. */
static int transpose_of(lay *L, int v, const int *p, int dest)
{
	mc_value *x = val(L, v);
	int rank = x->shape.rank, r[MC_MAX_RANK], inv[MC_MAX_RANK];
	if (perm_is_identity(p, rank))
		return v;
	vstate *s = &L->st[v];
	if (s->alt >= 0) { /* v = T(alt, inv(perm)): T(v, p) = T(alt, inv(perm)[p]) */
		perm_inverse(s->perm, rank, inv);
		for (int i = 0; i < rank; i++)
			r[i] = inv[p[i]];
		return perm_is_identity(r, rank) ? s->alt : transpose_of(L, s->alt, r, dest);
	}
	int pi = L->producer[v];
	if (pi >= 0 && L->nodes[pi].id == MC_OP_Transpose) {
		const mc_node *t = &L->nodes[pi];
		int64_t q[MC_MAX_RANK];
		if (!mc_transpose_perm(t, rank, q)) {
			for (int i = 0; i < rank; i++)
				r[i] = (int)q[p[i]];
			return transpose_of(L, t->inputs[0], r, dest);
		}
	}
	mc_shape target = {.rank = rank};
	for (int i = 0; i < rank; i++)
		target.dims[i] = x->shape.dims[p[i]];
	if (pi >= 0 && L->nodes[pi].id == MC_OP_Reshape && perm_keeps_order(&x->shape, p)) {
		int u = L->nodes[pi].inputs[0];
		if (mc_shape_eq(&val(L, u)->shape, &target))
			return u;
	}
	if (x->konst && dest < 0) {
		mc_tensor *t = permute_const(x->konst, p);
		if (!t)
			return mc_error("layout: out of memory"), -1;
		int c = ge_add_const(L->g, x->name, t);
		grow_state(L);
		return c;
	}
	int out = dest >= 0 ? dest : new_value(L, x->name);
	char name[64];
	snprintf(name, sizeof name, "layout_transpose_%d", out);
	if (perm_keeps_order(&x->shape, p) && mc_numel(&x->shape) > 0) {
		/* only size-1 dims move: a Reshape, which shares storage */
		mc_shape s = {.rank = 1, .dims = {rank}};
		mc_tensor *t = mc_tensor_new(MC_INT64, &s);
		for (int i = 0; i < rank; i++)
			mc_set_i(t, (size_t)i, target.dims[i]);
		int in[2] = {v, ge_add_const(L->g, "layout_shape", t)};
		grow_state(L);
		return emit(L, MC_OP_Reshape, name, in, 2, out, NULL, 0) ? -1 : out;
	}
	mc_attr a = ints_attr("perm", p, rank);
	if (emit(L, MC_OP_Transpose, name, &v, 1, out, &a, 1))
		return -1;
	return out;
}

/* Reads of v by a node that needs v itself: materialises a lazy v. */
static int need_plain(lay *L, int v)
{
	vstate *s = &L->st[v];
	if (!s->lazy)
		return 0;
	s->lazy = false;
	int rank = val(L, s->alt)->shape.rank, inv[MC_MAX_RANK];
	perm_inverse(s->perm, rank, inv);
	int w = transpose_of(L, s->alt, inv, v);
	if (w < 0)
		return -1;
	if (w == v)
		return 0;
	if (L->is_output[v]) { /* the interface keeps its name */
		mc_node id = ge_identity_node(L->g, "layout_output", w, v);
		push_node(L, &id);
		return 0;
	}
	s->subst = w;
	return 0;
}

static int renamed(lay *L, int v)
{
	while (v >= 0 && L->st[v].subst >= 0)
		v = L->st[v].subst;
	return v;
}

/* Records that the node just rewritten now writes alt (perm p of v). */
static void set_alt(lay *L, int v, int alt, const int *p, int rank)
{
	vstate *s = &L->st[v];
	s->alt = alt;
	memcpy(s->perm, p, (size_t)rank * sizeof *p);
	s->lazy = true;
}

/* Redirects node n's output 0 to a fresh value (the alternative of the
 * old one, with perm p); re-types n. */
static int redirect_output(lay *L, mc_node *n, const int *p)
{
	int v = n->outputs[0];
	int alt = new_value(L, val(L, v)->name);
	n->outputs[0] = alt;
	if (infer_node(L, n))
		return -1;
	set_alt(L, v, alt, p, val(L, v)->shape.rank);
	L->changes++;
	return 0;
}

/* ---- which nodes convert ---- */

static bool float_rank34(const mc_value *x)
{
	return x->typed && x->dtype == MC_FLOAT && (x->shape.rank == 3 || x->shape.rank == 4);
}

/* Per value (malloc'd): read, and only read, by Transposes to
 * channels-last (a model's own: ConvNeXt's after each depthwise
 * convolution). */
static bool *read_channels_last(const mc_graph *g)
{
	bool *only = mc_xcalloc((size_t)g->n_values + 1, sizeof *only), *other = mc_xcalloc((size_t)g->n_values + 1, 1);
	for (int i = 0; i < g->n_nodes; i++) {
		const mc_node *n = &g->nodes[i];
		int64_t q[MC_MAX_RANK];
		int last[MC_MAX_RANK], x = n->n_inputs > 0 ? n->inputs[0] : -1, rank = x >= 0 ? g->values[x].shape.rank : 0;
		bool to_last = n->id == MC_OP_Transpose && n->op && !n->guard && x >= 0 && (rank == 3 || rank == 4) &&
		               !mc_transpose_perm(n, rank, q);
		if (to_last) {
			perm_nhwc(rank, last);
			for (int d = 0; d < rank; d++)
				to_last = to_last && q[d] == last[d];
		}
		for (int k = 0; k < n->n_inputs; k++)
			if (n->inputs[k] >= 0)
				*(to_last ? &only[n->inputs[k]] : &other[n->inputs[k]]) = true;
		for (int k = 0; k < n->n_implicit; k++)
			other[n->implicit[k]] = true;
	}
	for (int k = 0; k < g->n_outputs; k++)
		other[g->outputs[k]] = true;
	for (int v = 0; v < g->n_values; v++)
		only[v] = only[v] && !other[v];
	free(other);
	return only;
}

/* A Conv that becomes NhwcConv. With to_last ("depthwise"), only a
 * depthwise one whose output is read only by Transposes to channels-last:
 * the cuda target in float32 keeps its dense convolutions channels-first
 * (their templates'), and converts where the model itself goes
 * channels-last next, so that no transpose is added. */
static bool conv_convertible(const mc_graph *g, const mc_node *n, const bool *to_last)
{
	if (n->id != MC_OP_Conv || !n->op || n->n_inputs < 2 || n->inputs[0] < 0 || n->inputs[1] < 0 ||
	    n->outputs[0] < 0)
		return false;
	const mc_value *x = &g->values[n->inputs[0]], *w = &g->values[n->inputs[1]];
	const nn_params *p = n->params;
	if (!float_rank34(x) || !w->konst || !p)
		return false;
	int64_t c = x->shape.dims[1];
	if (to_last)
		return p->group == c && w->shape.dims[0] == c && p->group > 1 && to_last[n->outputs[0]];
	return p->group == 1 || (p->group == c && w->shape.dims[0] == c);
}

static bool pool_convertible(const mc_graph *g, const mc_node *n, const bool *to_last)
{
	if (to_last || (n->id != MC_OP_MaxPool && n->id != MC_OP_AveragePool) || !n->op || n->inputs[0] < 0 ||
	    n->outputs[0] < 0)
		return false;
	for (int k = 1; k < n->n_outputs; k++)
		if (n->outputs[k] >= 0)
			return false; /* MaxPool's Indices count in channels-first order */
	return float_rank34(&g->values[n->inputs[0]]);
}

static double conv_macs(const mc_graph *g, const mc_node *n)
{
	const mc_value *w = &g->values[n->inputs[1]], *y = &g->values[n->outputs[0]];
	double per = 1;
	for (int i = 1; i < w->shape.rank; i++)
		per *= (double)w->shape.dims[i];
	return (double)mc_shape_extent(&y->shape) * per;
}

/* The rule of "auto" (see the top of the file); "depthwise" (to_last
 * given): where one converts. */
static bool wants_nhwc(const mc_graph *g, const char *layout, const bool *to_last)
{
	if (layout && !strcmp(layout, "nchw"))
		return false;
	bool forced = layout && (!strcmp(layout, "nhwc") || to_last);
	double all = 0, wide = 0;
	int convertible = 0;
	for (int i = 0; i < g->n_nodes; i++) {
		const mc_node *n = &g->nodes[i];
		if (pool_convertible(g, n, to_last))
			convertible++;
		if (n->id != MC_OP_Conv || n->n_inputs < 2 || n->inputs[1] < 0 || n->outputs[0] < 0 ||
		    !g->values[n->outputs[0]].typed || !g->values[n->inputs[1]].typed)
			continue;
		double macs = conv_macs(g, n);
		all += macs;
		if (!conv_convertible(g, n, to_last))
			continue;
		convertible++;
		if (g->values[n->inputs[1]].shape.dims[0] >= 8)
			wide += macs;
	}
	if (forced)
		return convertible > 0;
	return wide > 0 && wide >= 0.5 * all;
}

/* ---- rewriting one node ---- */

/* The channels-last internal op standing for a window op. */
static mc_opid nhwc_form(mc_opid id)
{
	switch (id) {
	case MC_OP_Conv: return MC_OP_NhwcConv;
	case MC_OP_MaxPool: return MC_OP_NhwcMaxPool;
	case MC_OP_AveragePool: return MC_OP_NhwcAveragePool;
	default: return MC_OP_NONE;
	}
}

/* Conv / pools: input 0 to channels-last, the node becomes its Nhwc op. */
static int convert_window_op(lay *L, mc_node *n)
{
	int rank = val(L, n->inputs[0])->shape.rank, p[MC_MAX_RANK];
	perm_nhwc(rank, p);
	int x = n->inputs[0], xt = transpose_of(L, x, p, -1);
	if (xt < 0)
		return -1;
	if (L->to_last && L->st[x].alt < 0 && xt != x) {
		/* x stays too; its other readers (a residual sum) may read the
		 * channels-last copy made here instead of transposing again */
		L->st[x].alt = xt;
		memcpy(L->st[x].perm, p, (size_t)rank * sizeof *p);
	}
	mc_node_set_op(n, nhwc_form(n->id), n->opset);
	n->inputs[0] = xt;
	n->n_outputs = 1; /* an omitted Indices */
	for (int k = 1; k < n->n_inputs; k++)
		if (n->inputs[k] >= 0 && need_plain(L, n->inputs[k]))
			return -1;
	return redirect_output(L, n, p);
}

/* The one perm shared by the alternatives of n's non-constant inputs
 * (first..last), of the output's rank; false if they differ, one has none,
 * or none has one. */
static bool common_perm(lay *L, const mc_node *n, int first, int last, int rank, int *p)
{
	bool found = false;
	for (int k = first; k <= last && k < n->n_inputs; k++) {
		int v = n->inputs[k];
		if (v < 0 || val(L, v)->konst)
			continue;
		const vstate *s = &L->st[v];
		if (s->alt < 0 || val(L, v)->shape.rank != rank)
			return false;
		if (found && memcmp(p, s->perm, (size_t)rank * sizeof *p))
			return false;
		memcpy(p, s->perm, (size_t)rank * sizeof *p);
		found = true;
	}
	return found;
}

/* Constant input k of n re-laid for perm p: unsqueezed to rank, permuted. */
static int relay_const(lay *L, mc_node *n, int k, const int *p, int rank)
{
	const mc_value *c = val(L, n->inputs[k]);
	if (c->shape.rank == 0)
		return 0;
	mc_tensor full = *c->konst;
	full.shape.rank = rank;
	int lead = rank - c->shape.rank;
	for (int i = 0; i < rank; i++)
		full.shape.dims[i] = i < lead ? 1 : c->konst->shape.dims[i - lead];
	mc_tensor *t = permute_const(&full, p);
	if (!t)
		return mc_error("layout: out of memory"), -1;
	n->inputs[k] = ge_add_const(L->g, c->name, t);
	grow_state(L);
	return 0;
}

static int convert_pointwise(lay *L, mc_node *n, const int *p, int rank)
{
	for (int k = 0; k < n->n_inputs; k++) {
		int v = n->inputs[k];
		if (v < 0)
			continue;
		if (val(L, v)->konst) {
			if (val(L, v)->shape.rank > rank || relay_const(L, n, k, p, rank))
				return -1;
			continue;
		}
		n->inputs[k] = L->st[v].alt;
	}
	return redirect_output(L, n, p);
}

/* Can the constant inputs of a pointwise node be re-laid? */
static bool consts_fit(lay *L, const mc_node *n, int rank)
{
	for (int k = 0; k < n->n_inputs; k++)
		if (n->inputs[k] >= 0 && val(L, n->inputs[k])->konst &&
		    val(L, n->inputs[k])->shape.rank > rank)
			return false;
	return true;
}

/* Axis a of v as an axis of its alternative (perm p). */
static int alt_axis(const int *p, int rank, int a)
{
	for (int i = 0; i < rank; i++)
		if (p[i] == a)
			return i;
	return a;
}

static mc_attr *find_attr(mc_node *n, const char *name)
{
	for (int a = 0; a < n->n_attrs; a++)
		if (!strcmp(n->attrs[a].name, name))
			return &n->attrs[a];
	return NULL;
}

/* An int64 constant input of n, copied into out (at most cap); -1 absent. */
static int const_ints(lay *L, const mc_node *n, int k, int64_t *out, int cap)
{
	if (k >= n->n_inputs || n->inputs[k] < 0)
		return -1;
	const mc_tensor *t = val(L, n->inputs[k])->konst;
	if (!t || t->shape.rank > 1 || t->numel > (size_t)cap || !mc_dtype_is_int(t->dtype))
		return -2;
	for (size_t i = 0; i < t->numel; i++)
		out[i] = mc_get_i(t, i);
	return (int)t->numel;
}

static int new_ints_const(lay *L, const mc_node *n, int k, const int64_t *v, int count)
{
	mc_shape s = {.rank = 1, .dims = {count}};
	mc_tensor *t = mc_tensor_new(MC_INT64, &s);
	for (int i = 0; i < count; i++)
		mc_set_i(t, (size_t)i, v[i]);
	n->inputs[k] = ge_add_const(L->g, val(L, n->inputs[k])->name, t);
	grow_state(L);
	return 0;
}

static int new_floats_const(lay *L, const mc_node *n, int k, const double *v, int count)
{
	const mc_tensor *old = val(L, n->inputs[k])->konst;
	mc_shape s = {.rank = 1, .dims = {count}};
	mc_tensor *t = mc_tensor_new(old->dtype, &s);
	for (int i = 0; i < count; i++)
		mc_set_f(t, (size_t)i, v[i]);
	n->inputs[k] = ge_add_const(L->g, val(L, n->inputs[k])->name, t);
	grow_state(L);
	return 0;
}

/* A Reshape of a value with an alternative (perm p) that merges one run
 * of its dims [a, b] which lies in the same order in the alternative
 * (ViT's patches, [n, c, h, w] to [n, c, h w], with the alternative [n, h,
 * w, c]): the alternative reshaped so (to [n, h w, c]) is its output's,
 * with the perm that follows; the model's transpose of tokens next then
 * vanishes. 1: not such a reshape. */
static int merge_reshape(lay *L, mc_node *n, const int *p)
{
	int x = n->inputs[0], y = n->outputs[0];
	if (y < 0 || !val(L, y)->typed)
		return 1;
	const mc_shape *s = &val(L, x)->shape, *o = &val(L, y)->shape;
	int r = s->rank, a = 0, b;
	while (a < r && a < o->rank && s->dims[a] == o->dims[a])
		a++;
	if (a >= o->rank)
		return 1;
	int64_t run = s->dims[a];
	for (b = a; b + 1 < r && run < o->dims[a]; )
		run *= s->dims[++b];
	if (run != o->dims[a] || b == a || o->rank != r - (b - a))
		return 1;
	for (int d = b + 1; d < r; d++)
		if (s->dims[d] != o->dims[d - (b - a)])
			return 1;
	int inv[MC_MAX_RANK], q[MC_MAX_RANK];
	int64_t dims[MC_MAX_RANK];
	perm_inverse(p, r, inv);
	for (int d = a; d <= b; d++)
		if (inv[d] != inv[a] + (d - a))
			return 1; /* not in order, side by side, in the alternative */
	int j = 0;
	for (int i = 0; i < r; i++) {
		if (i > inv[a] && i <= inv[b])
			continue; /* merged into the run's first */
		int d = p[i];
		q[j] = d < a ? d : d <= b ? a : d - (b - a);
		dims[j] = o->dims[q[j]];
		j++;
	}
	if (new_ints_const(L, n, 1, dims, j))
		return -1;
	n->inputs[0] = L->st[x].alt;
	return redirect_output(L, n, q);
}

/* Axis-remapping ops on an input with an alternative. 1: not handled
 * (the caller materialises), 0: rewritten, -1: error. */
static int convert_axis_op(lay *L, mc_node *n)
{
	int x = n->inputs[0];
	if (x < 0 || L->st[x].alt < 0 || !val(L, x)->typed)
		return 1;
	int rank = val(L, x)->shape.rank, p[MC_MAX_RANK], inv[MC_MAX_RANK];
	memcpy(p, L->st[x].perm, sizeof p);
	perm_inverse(p, rank, inv);
	int alt = L->st[x].alt;
	int64_t v[2 * MC_MAX_RANK], w[2 * MC_MAX_RANK];
	if (n->id == MC_OP_Concat) {
		mc_attr *a = find_attr(n, "axis");
		int q[MC_MAX_RANK];
		if (!a || a->type != MC_ATTR_INT || !common_perm(L, n, 0, n->n_inputs - 1, rank, q) ||
		    memcmp(q, p, (size_t)rank * sizeof *p))
			return 1;
		int axis = (int)(a->i < 0 ? a->i + rank : a->i);
		if (axis < 0 || axis >= rank)
			return 1;
		for (int k = 0; k < n->n_inputs; k++)
			if (val(L, n->inputs[k])->konst && val(L, n->inputs[k])->shape.rank != rank)
				return 1;
		for (int k = 0; k < n->n_inputs; k++) {
			if (val(L, n->inputs[k])->konst) {
				if (relay_const(L, n, k, p, rank))
					return -1;
			} else {
				n->inputs[k] = L->st[n->inputs[k]].alt;
			}
		}
		a->i = alt_axis(p, rank, axis);
		return redirect_output(L, n, p);
	}
	for (int k = 1; k < n->n_inputs; k++) /* the other inputs must be constants */
		if (n->inputs[k] >= 0 && !val(L, n->inputs[k])->konst)
			return 1;
	if (n->id == MC_OP_Pad && n->opset >= 11) {
		if (n->n_inputs > 3 && n->inputs[3] >= 0)
			return 1; /* axes */
		if (const_ints(L, n, 1, v, 2 * MC_MAX_RANK) != 2 * rank)
			return 1;
		for (int i = 0; i < rank; i++) {
			w[i] = v[p[i]];
			w[rank + i] = v[rank + p[i]];
		}
		new_ints_const(L, n, 1, w, 2 * rank);
	} else if (n->id == MC_OP_Slice && n->opset >= 10) {
		int count = const_ints(L, n, 1, v, MC_MAX_RANK);
		if (count < 0)
			return 1;
		if (n->n_inputs > 3 && n->inputs[3] >= 0) {
			if (const_ints(L, n, 3, w, MC_MAX_RANK) != count)
				return 1;
		} else {
			return 1; /* implicit axes: left as they are (rare) */
		}
		for (int i = 0; i < count; i++) {
			int64_t a = w[i] < 0 ? w[i] + rank : w[i];
			if (a < 0 || a >= rank)
				return 1;
			w[i] = alt_axis(p, rank, (int)a);
		}
		new_ints_const(L, n, 3, w, count);
	} else if (n->id == MC_OP_Resize && n->opset >= 11 && !find_attr(n, "axes")) {
		for (int k = 1; k < n->n_inputs && k < 4; k++) {
			int in = n->inputs[k];
			if (in < 0 || !val(L, in)->konst->numel)
				continue;
			const mc_tensor *t = val(L, in)->konst;
			int per = k == 1 ? 2 : 1;
			if (t->numel != (size_t)(per * rank))
				return 1;
			double d[2 * MC_MAX_RANK];
			for (int h = 0; h < per; h++)
				for (int i = 0; i < rank; i++)
					d[h * rank + i] = mc_get_f(t, (size_t)(h * rank + p[i]));
			if (k == 3) {
				for (int i = 0; i < rank; i++)
					w[i] = (int64_t)d[i];
				new_ints_const(L, n, 3, w, rank);
			} else {
				new_floats_const(L, n, k, d, per * rank);
			}
		}
	} else if (n->id == MC_OP_Unsqueeze && n->opset >= 13) {
		int count = const_ints(L, n, 1, v, MC_MAX_RANK);
		int orank = rank + count;
		if (count < 0 || orank > MC_MAX_RANK)
			return 1;
		bool ins[MC_MAX_RANK] = {false};
		for (int i = 0; i < count; i++) {
			int64_t a = v[i] < 0 ? v[i] + orank : v[i];
			if (a < 0 || a >= orank || ins[a])
				return 1;
			ins[a] = true;
		}
		/* output position j of u: an inserted dim, or x's dim m. In the
		 * alternative (same axes inserted) x's dim m sits at the place of
		 * alt dim inv[m]. q: alt_u = T(u, q). */
		int place[MC_MAX_RANK], q[MC_MAX_RANK], m = 0;
		for (int j = 0; j < orank; j++)
			if (!ins[j])
				place[m++] = j; /* the m-th kept position */
		/* alt_u position place[i] holds alt dim i = x dim p[i], which in u is
		 * at place[p[i]]; inserted dims stay in place. */
		for (int j = 0; j < orank; j++)
			q[j] = j;
		for (int i = 0; i < rank; i++)
			q[place[i]] = place[p[i]];
		n->inputs[0] = alt;
		return redirect_output(L, n, q);
	} else if ((n->id == MC_OP_GlobalAveragePool || n->id == MC_OP_GlobalMaxPool) && rank >= 3 &&
	           n->n_attrs == 0) {
		/* the spatial dims reduced and kept as 1: a ReduceMean (ReduceMax)
		 * of the alternative over the places the perm gave them, whose
		 * output is the pool's under the same perm (an SE block's squeeze
		 * stays channels-last, and so do its FCs and its channel scale) */
		int axes[MC_MAX_RANK];
		for (int d = 2; d < rank; d++)
			axes[d - 2] = alt_axis(p, rank, d);
		mc_opid id = n->id == MC_OP_GlobalAveragePool ? MC_OP_ReduceMean : MC_OP_ReduceMax;
		free(n->attrs);
		free(n->params);
		n->params = NULL;
		n->n_attrs = 2;
		n->attrs = mc_xcalloc(3, sizeof *n->attrs);
		n->attrs[0] = ints_attr("axes", axes, rank - 2);
		n->attrs[1] = (mc_attr){ .name = mc_xstrdup("keepdims"), .type = MC_ATTR_INT, .i = 1 };
		if (!mc_node_set_op(n, id, 13) || (n->op->parse && n->op->parse(n)))
			return mc_error("layout: cannot make a %s node", mc_op_name(id)), -1;
	} else if (n->id == MC_OP_Reshape) {
		/* a 0 in the shape copies an input dim: not the same with alt */
		int count = const_ints(L, n, 1, v, MC_MAX_RANK);
		if (count < 0)
			return 1;
		if (!perm_keeps_order(&val(L, x)->shape, p))
			return merge_reshape(L, n, p);
		for (int i = 0; i < count; i++)
			if (v[i] == 0)
				return 1;
		n->inputs[0] = alt;
		L->changes++;
		return infer_node(L, n);
	} else {
		return 1;
	}
	n->inputs[0] = alt;
	return redirect_output(L, n, p);
}

/* A Transpose of a value with an alternative: composes. One back to
 * channels-first (a model's own, after channels-last work: ConvNeXt's
 * blocks) of a value without one, read only by nodes that can run on
 * alternatives, is dropped: its input is its output's alternative, and
 * what reads it stays channels-last (the next block's convolution, the
 * residual sums between), the Transpose made only where a reader needs
 * the channels-first value itself. */
static int convert_transpose(lay *L, mc_node *n, bool *dropped)
{
	int x = n->inputs[0];
	*dropped = false;
	if (x < 0)
		return 1;
	int rank = val(L, x)->shape.rank, inv[MC_MAX_RANK], r[MC_MAX_RANK];
	int64_t q[MC_MAX_RANK];
	if (mc_transpose_perm(n, rank, q))
		return 1;
	if (L->st[x].alt < 0) {
		int y = n->outputs[0], last[MC_MAX_RANK];
		if (y < 0 || (rank != 3 && rank != 4) || !L->alt_readers[y] || L->is_output[y])
			return 1;
		perm_nhwc(rank, last);
		for (int i = 0; i < rank; i++)
			if (q[last[i]] != i)
				return 1; /* not channels-last's inverse */
		set_alt(L, y, x, last, rank);
		*dropped = true;
		L->changes++;
		return 0;
	}
	perm_inverse(L->st[x].perm, rank, inv);
	for (int i = 0; i < rank; i++)
		r[i] = inv[q[i]];
	int y = n->outputs[0];
	if (perm_is_identity(r, rank) && !L->is_output[y]) {
		L->st[y].subst = L->st[x].alt;
		*dropped = true;
		L->changes++;
		return 0;
	}
	mc_attr *a = find_attr(n, "perm");
	mc_attr na = ints_attr("perm", r, rank);
	if (a) {
		free(a->name);
		free(a->ints);
		*a = na;
	} else {
		n->attrs = realloc(n->attrs, (size_t)(n->n_attrs + 1) * sizeof *n->attrs);
		n->attrs[n->n_attrs++] = na;
	}
	n->inputs[0] = L->st[x].alt;
	L->changes++;
	return 0;
}

/* ---- the walk ---- */

static int plain_inputs(lay *L, mc_node *n)
{
	for (int k = 0; k < n->n_inputs; k++)
		if (n->inputs[k] >= 0 && need_plain(L, n->inputs[k]))
			return -1;
	for (int k = 0; k < n->n_implicit; k++)
		if (need_plain(L, n->implicit[k]))
			return -1;
	return 0;
}

static int visit(lay *L, mc_node *n, bool *dropped)
{
	*dropped = false;
	for (int k = 0; k < n->n_inputs; k++)
		n->inputs[k] = renamed(L, n->inputs[k]);
	for (int k = 0; k < n->n_implicit; k++)
		n->implicit[k] = renamed(L, n->implicit[k]);
	if (n->n_implicit || n->guard || !n->op)
		return plain_inputs(L, n);
	if (conv_convertible(L->g, n, L->to_last) || pool_convertible(L->g, n, L->to_last))
		return convert_window_op(L, n);
	int rc = 1;
	if (n->id == MC_OP_Transpose)
		rc = convert_transpose(L, n, dropped);
	else if (n->n_outputs == 1 && n->outputs[0] >= 0 && mc_op_has(n->id, MC_OF_REMAP)) {
		int rank = val(L, n->outputs[0])->shape.rank, p[MC_MAX_RANK];
		if (val(L, n->outputs[0])->typed && common_perm(L, n, 0, n->n_inputs - 1, rank, p) &&
		    consts_fit(L, n, rank))
			rc = convert_pointwise(L, n, p, rank);
	} else if (n->n_outputs == 1 && n->outputs[0] >= 0) {
		rc = convert_axis_op(L, n);
	}
	return rc == 1 ? plain_inputs(L, n) : rc;
}

static int run_walk(lay *L)
{
	mc_graph *g = L->g;
	for (int i = 0; i < g->n_nodes; i++) {
		mc_node n = g->nodes[i];
		bool dropped;
		if (visit(L, &n, &dropped)) {
			g->nodes[i] = n;
			return -1;
		}
		memset(&g->nodes[i], 0, sizeof g->nodes[i]);
		if (dropped)
			mc_node_free(&n);
		else
			push_node(L, &n);
	}
	for (int k = 0; k < g->n_outputs; k++)
		if (need_plain(L, g->outputs[k]))
			return -1;
	return 0;
}

/* Per value: every reader is a node that can take an alternative (a
 * pointwise op, a Transpose, a window op that converts); not for a graph
 * output or a value read inside a subgraph. */
static bool *alt_readers(const mc_graph *g, const bool *to_last)
{
	bool *ok = mc_xcalloc((size_t)g->n_values + 1, sizeof *ok);
	for (int v = 0; v < g->n_values; v++)
		ok[v] = true;
	for (int i = 0; i < g->n_nodes; i++) {
		const mc_node *n = &g->nodes[i];
		bool takes = !n->n_implicit && !n->guard && n->op &&
		             (n->id == MC_OP_Transpose || conv_convertible(g, n, to_last) ||
		              pool_convertible(g, n, to_last) ||
		              (n->n_outputs == 1 && mc_op_has(n->id, MC_OF_REMAP)));
		for (int k = 0; k < n->n_inputs; k++)
			if (n->inputs[k] >= 0 && !takes)
				ok[n->inputs[k]] = false;
		for (int k = 0; k < n->n_implicit; k++)
			ok[n->implicit[k]] = false;
	}
	for (int k = 0; k < g->n_outputs; k++)
		ok[g->outputs[k]] = false;
	return ok;
}

int mc_pass_layout(mc_graph *g, const mc_freeze_opts *o)
{
	/* the branches of an If with a run-time condition are laid out as
	 * graphs of their own (silero VAD's whole model is one) */
	int in_branches = ge_run_on_branches(g, o, mc_pass_layout);
	if (in_branches < 0)
		return -1;
	const char *layout = o ? o->layout : NULL;
	bool *to_last = layout && !strcmp(layout, "depthwise") ? read_channels_last(g) : NULL;
	if (!wants_nhwc(g, layout, to_last)) {
		free(to_last);
		return in_branches;
	}
	lay L = {.g = g, .to_last = to_last};
	grow_state(&L);
	L.is_output = ge_output_marks(g);
	L.alt_readers = alt_readers(g, to_last);
	int rc = run_walk(&L);
	/* the new list replaces the old (nodes left in g->nodes after an
	 * error are moved over too, so that nothing leaks) */
	for (int i = 0; i < g->n_nodes; i++)
		if (g->nodes[i].op_type)
			push_node(&L, &g->nodes[i]);
	free(g->nodes);
	g->nodes = L.nodes;
	g->n_nodes = L.n_nodes;
	g->cap_nodes = L.cap_nodes;
	for (int v = 0; v < g->n_values; v++)
		if (g->values[v].kind == MC_VAL_NODE)
			g->values[v].producer = L.producer[v];
	free(L.st);
	free(L.producer);
	free(L.is_output);
	free(L.alt_readers);
	free(L.to_last);
	return rc < 0 ? -1 : L.changes + in_branches;
}
