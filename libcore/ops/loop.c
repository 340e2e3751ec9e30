/* Control flow with a body graph run once per iteration: Loop and Scan.
 *
 * Shapes are static, so a value carried from one iteration to the next
 * must keep its shape, and outputs stacked over the iterations (scan
 * outputs) need an iteration count known at compile time. The body is a
 * subgraph with inputs of its own; inference types them from the node's
 * inputs before typing the body, and the reference implementation runs
 * the body with the interpreter, once per iteration. A Loop body whose
 * shapes depend on the iteration number is typed once per iteration (see
 * Loop below). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop.h"
#include "ops.h"

/* A loop whose inputs are all compile-time constants is evaluated while
 * compiling (folding); past this many body iterations, those of loops
 * nested in its body included, that is refused rather than hanging the
 * compiler on a hostile trip count. */
#define FOLD_MAX_ITERS (1 << 20)
/* Static stacked outputs: an iteration count beyond this is a shape
 * overflow even when the stacked slices are empty. */
#define MAX_STATIC_ITERS INT32_MAX

/* ---- shared helpers ---- */

/* Drops what an earlier inference of g folded or typed, so that typing the
 * body again (new input types) cannot reuse stale results. Nested
 * subgraphs get their captured values refreshed by mc_infer_graph, but
 * their folded node values too are stale. */
static void forget_folds(mc_graph *g)
{
	for (int v = 0; v < g->n_values; v++) {
		mc_value *val = &g->values[v];
		if (val->kind != MC_VAL_NODE)
			continue;
		mc_tensor_free(val->konst);
		val->konst = NULL;
		val->typed = false;
	}
	for (int i = 0; i < g->n_nodes; i++)
		for (int a = 0; a < g->nodes[i].n_attrs; a++)
			if (g->nodes[i].attrs[a].g)
				forget_folds(g->nodes[i].attrs[a].g);
}

/* Types body input k as (t, s). A declared dtype or rank must agree;
 * declared dims may be unknown (-1), known ones must agree. */
static int type_body_input(const mc_node *n, mc_graph *body, int k, mc_dtype t,
                           const mc_shape *s, const char *what)
{
	mc_value *v = &body->values[body->inputs[k]];
	char a[256], b[256];
	if (v->dtype != MC_UNDEFINED && v->dtype != t)
		return mc_node_error(n, "body input %d ('%s', the %s) is declared %s but receives %s",
		                     k, v->name, what, mc_dtype_name(v->dtype), mc_dtype_name(t));
	bool fits = v->dtype == MC_UNDEFINED || v->shape.rank == s->rank;
	for (int d = 0; fits && v->dtype != MC_UNDEFINED && d < s->rank; d++)
		fits = v->shape.dims[d] < 0 || v->shape.dims[d] == s->dims[d];
	if (!fits)
		return mc_node_error(n, "body input %d ('%s', the %s) is declared with shape %s but "
		                     "receives %s", k, v->name, what, mc_shape_str(&v->shape, a, sizeof a),
		                     mc_shape_str(s, b, sizeof b));
	v->dtype = t;
	v->shape = *s;
	v->typed = true;
	return 0;
}

/* The shape a one-element body input (iteration number, condition) gets:
 * the declared rank with every dim 1 (a scalar when nothing is declared). */
static int one_element_shape(const mc_node *n, const mc_graph *body, int k, mc_shape *s)
{
	const mc_value *v = &body->values[body->inputs[k]];
	memset(s, 0, sizeof *s);
	if (v->dtype == MC_UNDEFINED)
		return 0;
	s->rank = v->shape.rank;
	for (int d = 0; d < s->rank; d++) {
		if (v->shape.dims[d] > 1 || v->shape.dims[d] == 0)
			return mc_node_error(n, "body input %d ('%s') must hold a single element", k,
			                     v->name);
		s->dims[d] = 1;
	}
	return 0;
}

static bool same_type(const mc_value *a, const mc_value *b)
{
	return a->dtype == b->dtype && mc_shape_eq(&a->shape, &b->shape);
}

/* Body output k, the carried value for input `in`, must keep its type. */
static int check_carried(const mc_node *n, const mc_graph *body, int k, const mc_value *in)
{
	const mc_value *o = &body->values[body->outputs[k]];
	if (same_type(o, in))
		return 0;
	char a[256], b[256];
	return mc_node_error(n, "body output %d ('%s') is %s %s but the value it carries into the "
	                     "next iteration is %s %s; static shapes need it unchanged", k, o->name,
	                     mc_dtype_name(o->dtype), mc_shape_str(&o->shape, a, sizeof a),
	                     mc_dtype_name(in->dtype), mc_shape_str(&in->shape, b, sizeof b));
}

/* `slice` with a dim of `len` inserted at `axis`: the stacked shape. */
static int stacked_shape(const mc_node *n, int k, const mc_shape *slice, int axis, int64_t len,
                         mc_shape *out)
{
	char buf[256];
	size_t numel;
	if (slice->rank + 1 > MC_MAX_RANK)
		return mc_node_error(n, "scan output %d would have rank %d, above the maximum %d", k,
		                     slice->rank + 1, MC_MAX_RANK);
	out->rank = slice->rank + 1;
	for (int d = 0, s = 0; d < out->rank; d++)
		out->dims[d] = d == axis ? len : slice->dims[s++];
	if (len > MAX_STATIC_ITERS || !mc_shape_numel(out, &numel))
		return mc_node_error(n, "scan output %d would have shape %s, which is too large", k,
		                     mc_shape_str(out, buf, sizeof buf));
	return 0;
}

/* Whether every value the node reads is known at compile time: then its
 * evaluation is a fold, which FOLD_MAX_ITERS bounds. */
static bool all_inputs_const(const mc_infer_ctx *c)
{
	for (int k = 0; k < c->n_in; k++)
		if (c->in[k] && !c->in[k]->konst)
			return false;
	for (int k = 0; k < c->node->n_implicit; k++)
		if (!c->graph->values[c->node->implicit[k]].konst)
			return false;
	return true;
}

/* Copies slice `index` of `n` along a dim, between `whole` (outer x n x
 * inner bytes) and a dense slice (outer x inner bytes). */
static void slice_copy(uint8_t *whole, uint8_t *slice, size_t outer, size_t n, size_t inner,
                       size_t index, bool into_slice)
{
	for (size_t o = 0; o < outer; o++) {
		uint8_t *w = whole + (o * n + index) * inner, *s = slice + o * inner;
		memcpy(into_slice ? s : w, into_slice ? w : s, inner);
	}
}

/* Geometry of slicing t along its dims lo..hi taken as one axis: elements
 * before, entries along it, bytes after. */
static void axis_geometry(const mc_tensor *t, int lo, int hi, size_t *outer, size_t *n,
                          size_t *inner)
{
	*outer = 1;
	*n = 1;
	*inner = mc_dtype_size(t->dtype);
	for (int d = 0; d < t->shape.rank; d++) {
		size_t dim = (size_t)t->shape.dims[d];
		if (d < lo)
			*outer *= dim;
		else if (d > hi)
			*inner *= dim;
		else
			*n *= dim;
	}
}

static bool tensor_fits(const mc_tensor *t, mc_dtype dt, const mc_shape *s)
{
	return t && t->dtype == dt && mc_shape_eq(&t->shape, s);
}

static void free_all(mc_tensor **t, int n)
{
	for (int k = 0; k < n; k++) {
		mc_tensor_free(t[k]);
		t[k] = NULL;
	}
}

/* Copies the final carried values into the outputs that exist. */
static void emit_state(mc_tensor **out, mc_tensor *const *state, int n)
{
	for (int k = 0; k < n; k++)
		if (out[k])
			memcpy(out[k]->data, state[k]->data, state[k]->nbytes);
}

/* The folding in progress: the outermost constant Loop or Scan being run
 * while compiling, and the body iterations run so far. A loop nested in
 * its body need not be constant itself (it may read the outer body's
 * inputs), and nesting multiplies: every iteration counts. */
static struct {
	const mc_node *node;
	int64_t iters;
} folding_run;

/* Starts the count when n folds and no folding is in progress; true if
 * it did (the caller then calls fold_end). */
static bool fold_begin(const mc_node *n, bool folding)
{
	if (!folding || folding_run.node)
		return false;
	folding_run.node = n;
	folding_run.iters = 0;
	return true;
}

static void fold_end(bool began)
{
	if (began)
		folding_run.node = NULL;
}

/* Counts one body iteration against the folding in progress, if any. */
static int fold_budget(void)
{
	if (folding_run.node && ++folding_run.iters > FOLD_MAX_ITERS)
		return mc_node_error(folding_run.node, "its inputs are all compile-time constants "
		                     "but it runs more than %d iterations (nested loops included); "
		                     "refusing to evaluate it while compiling", FOLD_MAX_ITERS);
	return 0;
}

/* ---- Loop ---- */
/* inputs: M (trip count, optional), cond (optional), N carried values;
 * body: (iteration, cond, N carried) -> (cond, N carried, K scan slices);
 * outputs: N final carried values, K scan outputs stacked on a new axis 0.
 *
 * The body is typed once, with the iteration number unknown, except when
 * it reads the iteration number and the trip count is a small constant:
 * then it is typed once per iteration with the iteration number constant
 * (shapes inside may depend on it, as with Slice(x, i, i + 1)), and eval
 * types it again before each iteration. Generated code must unroll such a
 * loop. */

/* Per-iteration typing is tried up to this trip count. */
#define UNROLL_MAX_ITERS 1024

static int loop_parse(mc_node *n)
{
	mc_graph *body;
	if (mc_attr_graph(n, "body", &body))
		return -1;
	if (!body)
		return mc_node_error(n, "needs a graph attribute 'body'");
	if (n->n_inputs < 2)
		return mc_node_error(n, "needs the trip count and condition inputs (either may be "
		                     "empty), got %d inputs", n->n_inputs);
	int n_carried = n->n_inputs - 2;
	if (n->n_outputs < n_carried)
		return mc_node_error(n, "has %d loop-carried inputs but only %d outputs", n_carried,
		                     n->n_outputs);
	if (body->n_inputs != 2 + n_carried)
		return mc_node_error(n, "body takes %d inputs, expected %d (iteration number, "
		                     "condition, %d loop-carried values)", body->n_inputs,
		                     2 + n_carried, n_carried);
	if (body->n_outputs != 1 + n->n_outputs)
		return mc_node_error(n, "body produces %d outputs, expected %d (condition, then one "
		                     "per node output)", body->n_outputs, 1 + n->n_outputs);
	for (int k = 2; k < n->n_inputs; k++)
		if (n->inputs[k] < 0)
			return mc_node_error(n, "loop-carried input %d is missing (empty name)", k);
	n->params = mc_xcalloc(1, sizeof(loop_params));
	return 0;
}

/* Types the body's inputs from the node's inputs. */
static int loop_type_inputs(mc_infer_ctx *c, mc_graph *body)
{
	const mc_node *n = c->node;
	mc_shape iter_shape, cond_shape;
	if (one_element_shape(n, body, 0, &iter_shape) || one_element_shape(n, body, 1, &cond_shape))
		return -1;
	if (type_body_input(n, body, 0, MC_INT64, &iter_shape, "iteration number") ||
	    type_body_input(n, body, 1, MC_BOOL, &cond_shape, "condition"))
		return -1;
	for (int k = 2; k < c->n_in; k++)
		if (type_body_input(n, body, k, c->in[k]->dtype, &c->in[k]->shape, "loop-carried value"))
			return -1;
	return 0;
}

static void loop_untype_inputs(mc_graph *body)
{
	for (int k = 0; k < 2; k++) {
		mc_value *v = &body->values[body->inputs[k]];
		mc_tensor_free(v->konst);
		v->konst = NULL;
	}
}

/* Types the body for iteration `iter` (-1: any iteration). Inside the body
 * the condition input is always true: an iteration runs only while the
 * condition holds, and with no condition input the body gets true. Typing
 * with it as the constant true lets a body that passes it on (or computes
 * true from it) be known never to stop early. The constants stay on the
 * inputs, for the caller to read what they made constant, until
 * loop_untype_inputs. */
static int loop_type_iteration(const mc_node *n, mc_graph *body, int64_t iter)
{
	mc_value *iv = &body->values[body->inputs[0]], *cv = &body->values[body->inputs[1]];
	forget_folds(body);
	loop_untype_inputs(body);
	cv->konst = mc_tensor_new(MC_BOOL, &cv->shape);
	if (iter >= 0)
		iv->konst = mc_tensor_new(MC_INT64, &iv->shape);
	if (!cv->konst || (iter >= 0 && !iv->konst))
		return mc_node_error(n, "out of memory");
	mc_set_i(cv->konst, 0, 1);
	if (iter >= 0)
		mc_set_i(iv->konst, 0, iter);
	if (mc_infer_graph(body)) {
		if (iter >= 0)
			return mc_node_error(n, "cannot type its body for iteration %lld (above)",
			                     (long long)iter);
		return mc_node_error(n, "cannot type its body (above): static shapes need every shape "
		                     "inside the body known at compile time and the same in every "
		                     "iteration; shapes may depend on the iteration number only "
		                     "with a constant trip count of at most %d", UNROLL_MAX_ITERS);
	}
	return 0;
}

/* One run of a loop: shared by eval and by inference (which counts the
 * iterations of an all-constant loop that may stop early). */
typedef struct {
	const mc_node *node;
	mc_graph *body;
	mc_tensor *const *env;
	const mc_tensor *trip, *cond;  /* NULL when omitted */
	const mc_tensor *const *init;  /* n_carried initial values */
	int n_carried, n_scan;
	bool folding, per_iteration;
	mc_tensor **carried_out;       /* n_carried (entries may be NULL); NULL: count only */
	mc_tensor **scan_out;          /* n_scan (entries may be NULL); NULL: count only */
	int64_t iters;                 /* out: iterations run */
} loop_run;

/* Stores iteration i's scan slices into the stacked outputs. */
static int loop_store_scan(loop_run *r, mc_tensor **res, int64_t i)
{
	for (int k = 0; k < r->n_scan; k++) {
		mc_tensor *o = r->scan_out[k], *s = res[1 + r->n_carried + k];
		if (!o)
			continue;
		size_t outer, n, inner;
		axis_geometry(o, 0, 0, &outer, &n, &inner);
		if ((uint64_t)i >= n)
			return mc_node_error(r->node, "runs more iterations than the %zu its scan "
			                     "output %d was sized for", n, k);
		if (s->dtype != o->dtype || s->nbytes != inner)
			return mc_node_error(r->node, "scan output %d: body slice does not match its "
			                     "inferred type", k);
		slice_copy(o->data, s->data, 1, n, inner, (size_t)i, false);
	}
	return 0;
}

/* Runs iteration i: args are (iteration, cond, carried...), res gets the
 * body's outputs. */
static int loop_step(loop_run *r, int64_t i, mc_tensor **args, mc_tensor **res)
{
	if (r->per_iteration) {
		int rc = loop_type_iteration(r->node, r->body, i);
		loop_untype_inputs(r->body);
		if (rc)
			return -1;
	}
	mc_set_i(args[0], 0, i);
	mc_set_i(args[1], 0, 1);
	return mc_interp_run(r->body, args, res, r->env);
}

static int loop_execute(loop_run *r)
{
	const mc_node *n = r->node;
	const mc_graph *body = r->body;
	int nb_in = body->n_inputs, nb_out = body->n_outputs;
	const mc_value *iv = &body->values[body->inputs[0]], *cv = &body->values[body->inputs[1]];
	mc_tensor *args[nb_in + 1], *res[nb_out + 1];
	int rc = 0;
	int64_t trip = r->trip ? mc_get_i(r->trip, 0) : INT64_MAX;
	bool go = r->cond ? mc_get_i(r->cond, 0) != 0 : true;

	memset(args, 0, sizeof args);
	memset(res, 0, sizeof res);
	args[0] = mc_tensor_new(MC_INT64, &iv->shape);
	args[1] = mc_tensor_new(MC_BOOL, &cv->shape);
	for (int k = 0; k < r->n_carried; k++)
		args[2 + k] = mc_tensor_clone(r->init[k]);
	for (int k = 0; k < nb_in; k++)
		if (!args[k])
			rc = mc_node_error(n, "out of memory");
	int64_t i = 0;
	bool began = fold_begin(n, r->folding);
	for (; !rc && go && i < trip; i++) {
		if ((rc = fold_budget()) || (rc = loop_step(r, i, args, res)))
			break;
		if (r->cond)
			go = mc_get_i(res[0], 0) != 0;
		for (int k = 0; k < r->n_carried && !rc; k++) {
			mc_tensor *next = res[1 + k];
			if (!tensor_fits(next, args[2 + k]->dtype, &args[2 + k]->shape)) {
				rc = mc_node_error(n, "body output %d changed type between iterations",
				                   1 + k);
				break;
			}
			mc_tensor_free(args[2 + k]);
			args[2 + k] = next;
			res[1 + k] = NULL;
		}
		if (!rc && r->scan_out)
			rc = loop_store_scan(r, res, i);
		free_all(res, nb_out);
	}
	fold_end(began);
	r->iters = i;
	if (!rc && r->scan_out) {
		for (int k = 0; k < r->n_scan; k++)
			if (r->scan_out[k] && (uint64_t)i != (uint64_t)r->scan_out[k]->shape.dims[0])
				rc = mc_node_error(n, "ran %lld iterations but its scan output %d was sized "
				                   "for %lld", (long long)i, k,
				                   (long long)r->scan_out[k]->shape.dims[0]);
	}
	if (!rc && r->carried_out)
		emit_state(r->carried_out, args + 2, r->n_carried);
	free_all(args, nb_in);
	return rc;
}

/* The parent graph's constants as an environment for running the body at
 * compile time. */
static mc_tensor **const_env(const mc_graph *g)
{
	mc_tensor **env = mc_xcalloc((size_t)g->n_values + 1, sizeof *env);
	for (int v = 0; v < g->n_values; v++)
		env[v] = g->values[v].konst;
	return env;
}

/* Whether the loop, once started, can only end through its trip count. */
static bool loop_never_stops_early(const mc_infer_ctx *c, const mc_value *cond_out)
{
	/* Without a condition input the body's condition output is ignored. */
	return !c->in[1] || (cond_out->konst && mc_get_i(cond_out->konst, 0));
}

/* Why the iteration count is not static, or NULL when *iters is set.
 * Called while the body is typed with its condition input true. */
static const char *loop_static_iters(const mc_infer_ctx *c, const mc_value *cond_out,
                                     int64_t *iters)
{
	const mc_value *trip = c->in[0], *cond = c->in[1];
	bool trip_known = !trip || trip->konst;
	int64_t m = !trip ? INT64_MAX : trip->konst ? mc_get_i(trip->konst, 0) : 0;
	if (m < 0)
		m = 0;
	if ((cond && cond->konst && !mc_get_i(cond->konst, 0)) || (trip_known && m == 0)) {
		*iters = 0;
		return NULL;
	}
	if (cond && !cond->konst)
		return "the condition input is not a compile-time constant";
	if (!trip_known)
		return "the trip count is not a compile-time constant";
	/* The loop starts and runs at least once. */
	if (cond && cond_out->konst && !mc_get_i(cond_out->konst, 0)) {
		*iters = 1;
		return NULL;
	}
	if (!loop_never_stops_early(c, cond_out))
		return "the body's condition output may end it early";
	*iters = m;
	return NULL;
}

/* The iteration count of a loop with scan outputs whose count is not
 * static (why): only an all-constant loop, run now, can give it. */
static int loop_count_iters(mc_infer_ctx *c, mc_graph *body, int n_scan, const char *why,
                            int64_t *iters)
{
	const mc_node *n = c->node;
	const loop_params *p = n->params;
	if (!all_inputs_const(c))
		return mc_node_error(n, "its %d scan output%s need%s an iteration count known at "
		                     "compile time, but %s; static shapes need a constant trip count "
		                     "and condition (--bind the inputs they depend on)", n_scan,
		                     n_scan == 1 ? "" : "s", n_scan == 1 ? "s" : "", why);
	int n_carried = c->n_in - 2;
	const mc_tensor *init[n_carried + 1];
	for (int k = 0; k < n_carried; k++)
		init[k] = c->in[2 + k]->konst;
	mc_tensor **env = const_env(c->graph);
	loop_run r = {.node = n, .body = body, .env = env,
	              .trip = c->in[0] ? c->in[0]->konst : NULL,
	              .cond = c->in[1] ? c->in[1]->konst : NULL, .init = init,
	              .n_carried = n_carried, .n_scan = n_scan, .folding = true,
	              .per_iteration = p->per_iteration};
	int rc = loop_execute(&r);
	free(env);
	*iters = r.iters;
	return rc;
}

static int loop_check_one(const mc_node *n, const mc_value *v, mc_dtype t, const char *what)
{
	size_t numel;
	if (v->dtype != t || !mc_shape_numel(&v->shape, &numel) || numel != 1)
		return mc_node_error(n, "%s '%s' must be a single %s, got %s with %zu elements", what,
		                     v->name, mc_dtype_name(t), mc_dtype_name(v->dtype),
		                     mc_shape_numel(&v->shape, &numel) ? numel : 0);
	return 0;
}

/* The body's condition output and carried values, once the body is typed. */
static int loop_check_outputs(mc_infer_ctx *c, const mc_graph *body)
{
	if (loop_check_one(c->node, &body->values[body->outputs[0]], MC_BOOL,
	                   "body condition output"))
		return -1;
	for (int k = 0; k < c->n_in - 2; k++)
		if (check_carried(c->node, body, 1 + k, c->in[2 + k]))
			return -1;
	return 0;
}

/* Whether any node of g (or of its subgraphs) reads value v, or g returns it. */
static bool reads_value(const mc_graph *g, int v)
{
	for (int i = 0; i < g->n_outputs; i++)
		if (g->outputs[i] == v)
			return true;
	for (int i = 0; i < g->n_nodes; i++) {
		const mc_node *nd = &g->nodes[i];
		for (int k = 0; k < nd->n_inputs; k++)
			if (nd->inputs[k] == v)
				return true;
		for (int k = 0; k < nd->n_implicit; k++)
			if (nd->implicit[k] == v)
				return true;
	}
	return false;
}

static bool has_loop(const mc_graph *g)
{
	for (int i = 0; i < g->n_nodes; i++) {
		const mc_node *nd = &g->nodes[i];
		if (!nd->domain[0] && (!strcmp(nd->op_type, "Loop") || !strcmp(nd->op_type, "Scan")))
			return true;
		for (int a = 0; a < nd->n_attrs; a++)
			if (nd->attrs[a].g && has_loop(nd->attrs[a].g))
				return true;
	}
	return false;
}

/* Per-iteration typing: the body reads the iteration number, the trip
 * count is a small constant, and no loop inside multiplies the typing work. */
static bool loop_wants_per_iteration(const mc_infer_ctx *c, const mc_graph *body)
{
	const mc_value *trip = c->in[0];
	if (!trip || !trip->konst)
		return false;
	int64_t m = mc_get_i(trip->konst, 0);
	return m >= 1 && m <= UNROLL_MAX_ITERS && reads_value(body, body->inputs[0]) &&
	       !has_loop(body);
}

/* One typing for every iteration. *iters: the iteration count, for scan
 * outputs. */
static int loop_infer_static(mc_infer_ctx *c, mc_graph *body, int64_t *iters)
{
	const mc_node *n = c->node;
	const mc_value *cond_out = &body->values[body->outputs[0]], *cond = c->in[1];
	int n_scan = c->n_out - (c->n_in - 2);
	const char *why = NULL;
	int rc = loop_type_iteration(n, body, -1);
	if (!rc)
		rc = loop_check_outputs(c, body);
	bool skipped = cond && cond->konst && !mc_get_i(cond->konst, 0);
	if (!rc && !c->in[0] && !skipped && loop_never_stops_early(c, cond_out))
		rc = mc_node_error(n, "has no trip count and %s: once started it never ends",
		                   cond ? "its body's condition output is always true"
		                        : "no condition");
	*iters = 0;
	if (!rc)
		why = loop_static_iters(c, cond_out, iters);
	loop_untype_inputs(body);
	if (!rc && why && n_scan > 0)
		rc = loop_count_iters(c, body, n_scan, why, iters);
	else if (why)
		*iters = -1;
	((loop_params *)n->params)->iters_why = *iters < 0 ? why : NULL;
	return rc;
}

/* A typing per iteration (constant trip count m >= 1): every iteration's
 * carried values and scan slices must have the same types; the body's
 * condition output, constant in some iteration, may fix the count. */
static int loop_infer_per_iteration(mc_infer_ctx *c, mc_graph *body, int64_t *iters)
{
	const mc_node *n = c->node;
	const mc_value *cond = c->in[1], *cond_out = &body->values[body->outputs[0]];
	int n_carried = c->n_in - 2, n_scan = c->n_out - n_carried;
	int64_t m = mc_get_i(c->in[0]->konst, 0);
	bool skipped = cond && cond->konst && !mc_get_i(cond->konst, 0);
	const char *why = cond && !cond->konst ? "the condition input is not a compile-time "
	                                         "constant" : NULL;
	mc_dtype first_t[n_scan + 1];
	mc_shape first_s[n_scan + 1];
	int rc = 0;
	*iters = skipped ? 0 : m;
	for (int64_t i = 0; i < m && !rc; i++) {
		bool stop = skipped; /* typed once for the types, never run */
		rc = loop_type_iteration(n, body, i);
		if (!rc)
			rc = loop_check_outputs(c, body);
		for (int k = 0; k < n_scan && !rc; k++) {
			const mc_value *s = &body->values[body->outputs[1 + n_carried + k]];
			char a[256], b[256];
			if (i == 0) {
				first_t[k] = s->dtype;
				first_s[k] = s->shape;
			} else if (s->dtype != first_t[k] || !mc_shape_eq(&s->shape, &first_s[k])) {
				rc = mc_node_error(n, "scan output %d is %s %s in iteration 0 but %s %s in "
				                   "iteration %lld; stacking needs one type", k,
				                   mc_dtype_name(first_t[k]),
				                   mc_shape_str(&first_s[k], a, sizeof a),
				                   mc_dtype_name(s->dtype), mc_shape_str(&s->shape, b, sizeof b),
				                   (long long)i);
			}
		}
		if (!rc && cond && !why && !skipped) {
			if (!cond_out->konst)
				why = "the body's condition output may end it early";
			else if (!mc_get_i(cond_out->konst, 0))
				stop = true, *iters = i + 1;
		}
		loop_untype_inputs(body);
		if (stop)
			break;
	}
	if (!rc && n_scan > 0 && why)
		rc = loop_count_iters(c, body, n_scan, why, iters);
	else if (why)
		*iters = -1;
	((loop_params *)n->params)->iters_why = *iters < 0 ? why : NULL;
	return rc;
}

static int loop_infer(mc_infer_ctx *c)
{
	mc_node *n = c->node;
	loop_params *p = n->params;
	mc_graph *body = mc_loop_body(n);
	int n_carried = c->n_in - 2, n_scan = c->n_out - n_carried;
	if (c->in[0] && loop_check_one(n, c->in[0], MC_INT64, "trip count"))
		return -1;
	if (c->in[1] && loop_check_one(n, c->in[1], MC_BOOL, "condition"))
		return -1;
	if (loop_type_inputs(c, body))
		return -1;
	p->per_iteration = loop_wants_per_iteration(c, body);
	int64_t iters;
	if (p->per_iteration ? loop_infer_per_iteration(c, body, &iters)
	                     : loop_infer_static(c, body, &iters))
		return -1;
	p->iters = iters;
	for (int k = 0; k < n_carried; k++)
		mc_set_out(c, k, c->in[2 + k]->dtype, &c->in[2 + k]->shape);
	for (int k = 0; k < n_scan; k++) {
		const mc_value *s = &body->values[body->outputs[1 + n_carried + k]];
		mc_shape stacked;
		if (stacked_shape(n, k, &s->shape, 0, iters, &stacked))
			return -1;
		mc_set_out(c, n_carried + k, s->dtype, &stacked);
	}
	p->folding = all_inputs_const(c);
	return 0;
}

static int loop_eval(mc_eval_ctx *c)
{
	const mc_node *n = c->node;
	const loop_params *p = n->params;
	int n_carried = c->n_in - 2;
	loop_run r = {.node = n, .body = mc_loop_body(n), .env = c->env, .trip = c->in[0],
	              .cond = c->in[1], .init = c->in + 2, .n_carried = n_carried,
	              .n_scan = c->n_out - n_carried, .folding = p->folding,
	              .per_iteration = p->per_iteration, .carried_out = c->out,
	              .scan_out = c->out + n_carried};
	return loop_execute(&r);
}

static const mc_op op_loop = {
	.name = "Loop", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 0, .max_inputs = MC_MAX_NODE_IO, .min_outputs = 0, .max_outputs = MC_MAX_NODE_IO,
	.parse = loop_parse, .infer = loop_infer, .eval = loop_eval, .flags = MC_OP_SUBGRAPH,
};

/* ---- Scan ---- */
/* The inputs, outputs and attributes: see loop.h. */

/* Reads an optional ints attribute of `count` entries into dst (dflt if absent). */
static int scan_ints_attr(mc_node *n, const char *name, int count, int *dst, int dflt,
                          bool is_direction)
{
	const int64_t *v;
	size_t len;
	if (mc_attr_ints(n, name, &v, &len))
		return -1;
	if (v && len != (size_t)count)
		return mc_node_error(n, "attribute '%s' has %zu entries, expected %d", name, len,
		                     count);
	for (int k = 0; k < count; k++) {
		int64_t x = v ? v[k] : dflt;
		if (is_direction && x != 0 && x != 1)
			return mc_node_error(n, "attribute '%s'[%d] is %lld; directions are 0 "
			                     "(forward) or 1 (reverse)", name, k, (long long)x);
		if (!is_direction && (x < -MC_MAX_RANK || x > MC_MAX_RANK))
			return mc_node_error(n, "attribute '%s'[%d] is %lld, not a valid axis", name, k,
			                     (long long)x);
		dst[k] = (int)x;
	}
	return 0;
}

static int scan_parse(mc_node *n)
{
	mc_graph *body;
	bool v8 = n->opset < 9;
	int64_t m;
	if (mc_attr_graph(n, "body", &body))
		return -1;
	if (!body)
		return mc_node_error(n, "needs a graph attribute 'body'");
	if (mc_attr_int(n, "num_scan_inputs", -1, &m))
		return -1;
	int first = v8 ? 1 : 0; /* opset 8: sequence_lens comes first */
	if (m < 1 || m > n->n_inputs - first)
		return mc_node_error(n, "num_scan_inputs is %lld but the node has %d state and scan "
		                     "inputs; it must be between 1 and that", (long long)m,
		                     n->n_inputs - first);
	int n_scan_in = (int)m, n_state = n->n_inputs - first - n_scan_in;
	if (n->n_outputs < n_state)
		return mc_node_error(n, "has %d state inputs but only %d outputs", n_state,
		                     n->n_outputs);
	int n_scan_out = n->n_outputs - n_state;
	if (body->n_inputs != n_state + n_scan_in || body->n_outputs != n->n_outputs)
		return mc_node_error(n, "body has %d inputs and %d outputs, expected %d and %d",
		                     body->n_inputs, body->n_outputs, n_state + n_scan_in,
		                     n->n_outputs);
	for (int k = first; k < n->n_inputs; k++)
		if (n->inputs[k] < 0)
			return mc_node_error(n, "input %d is missing (empty name)", k);
	size_t ints = 2 * (size_t)n_scan_in + 2 * (size_t)n_scan_out;
	scan_params *p = mc_xcalloc(1, sizeof *p + ints * sizeof(int));
	n->params = p;
	p->n_state = n_state;
	p->n_scan_in = n_scan_in;
	p->n_scan_out = n_scan_out;
	p->in_axis = p->data;
	p->in_dir = p->in_axis + n_scan_in;
	p->out_axis = p->in_dir + n_scan_in;
	p->out_dir = p->out_axis + n_scan_out;
	if (v8)
		return scan_ints_attr(n, "directions", n_scan_in, p->in_dir, 0, true);
	if (scan_ints_attr(n, "scan_input_axes", n_scan_in, p->in_axis, 0, false) ||
	    scan_ints_attr(n, "scan_input_directions", n_scan_in, p->in_dir, 0, true) ||
	    scan_ints_attr(n, "scan_output_axes", n_scan_out, p->out_axis, 0, false) ||
	    scan_ints_attr(n, "scan_output_directions", n_scan_out, p->out_dir, 0, true))
		return -1;
	return 0;
}

/* `s` without dim `axis`. */
static mc_shape drop_dim(const mc_shape *s, int axis)
{
	mc_shape r = {.rank = s->rank - 1};
	for (int d = 0, o = 0; d < s->rank; d++)
		if (d != axis)
			r.dims[o++] = s->dims[d];
	return r;
}

/* Opset 9+: normalises the axes and finds the common sequence length. */
static int scan9_geometry(mc_infer_ctx *c, scan_params *p)
{
	const mc_node *n = c->node;
	for (int j = 0; j < p->n_scan_in; j++) {
		const mc_value *x = c->in[p->n_state + j];
		int axis;
		if (x->shape.rank < 1)
			return mc_node_error(n, "scan input %d ('%s') is a scalar; it needs an axis to "
			                     "scan along", j, x->name);
		if (mc_norm_axis(n, p->in_axis[j], x->shape.rank, &axis))
			return -1;
		p->in_axis[j] = axis;
		int64_t len = x->shape.dims[axis];
		if (j == 0)
			p->seq_len = len;
		else if (len != p->seq_len)
			return mc_node_error(n, "scan input %d ('%s') has %lld entries along its scan "
			                     "axis but scan input 0 has %lld", j, x->name, (long long)len,
			                     (long long)p->seq_len);
	}
	if (p->seq_len > MAX_STATIC_ITERS)
		return mc_node_error(n, "sequence length %lld is too large", (long long)p->seq_len);
	return 0;
}

/* Opset 8: batch axis 0 on every input, scan axis 1 on scan inputs. */
static int scan8_geometry(mc_infer_ctx *c, scan_params *p)
{
	const mc_node *n = c->node;
	for (int k = 1; k < c->n_in; k++) {
		const mc_value *x = c->in[k];
		bool is_scan = k >= 1 + p->n_state;
		if (x->shape.rank < (is_scan ? 2 : 1))
			return mc_node_error(n, "input %d ('%s') needs a batch axis%s", k, x->name,
			                     is_scan ? " and a sequence axis" : "");
		if (k == 1)
			p->batch = x->shape.dims[0];
		else if (x->shape.dims[0] != p->batch)
			return mc_node_error(n, "input %d ('%s') has batch size %lld, input 1 has %lld",
			                     k, x->name, (long long)x->shape.dims[0], (long long)p->batch);
		if (is_scan && k == 1 + p->n_state)
			p->seq_len = x->shape.dims[1];
		else if (is_scan && x->shape.dims[1] != p->seq_len)
			return mc_node_error(n, "scan input '%s' has sequence length %lld, the first has "
			                     "%lld", x->name, (long long)x->shape.dims[1],
			                     (long long)p->seq_len);
	}
	const mc_value *lens = c->in[0];
	if (lens && (lens->dtype != MC_INT32 && lens->dtype != MC_INT64))
		return mc_node_error(n, "sequence_lens must be int32 or int64, got %s",
		                     mc_dtype_name(lens->dtype));
	if (lens && (lens->shape.rank != 1 || lens->shape.dims[0] != p->batch))
		return mc_node_error(n, "sequence_lens must have shape [%lld]", (long long)p->batch);
	int64_t work;
	if (p->seq_len > MAX_STATIC_ITERS || p->batch > MAX_STATIC_ITERS ||
	    __builtin_mul_overflow(p->seq_len, p->batch, &work) || work > MAX_STATIC_ITERS)
		return mc_node_error(n, "batch %lld x sequence length %lld is too large",
		                     (long long)p->batch, (long long)p->seq_len);
	return 0;
}

static int scan_type_body(mc_infer_ctx *c, scan_params *p, mc_graph *body, bool v8)
{
	const mc_node *n = c->node;
	int first = v8 ? 1 : 0;
	forget_folds(body);
	for (int k = 0; k < p->n_state; k++) {
		const mc_value *x = c->in[first + k];
		mc_shape s = v8 ? drop_dim(&x->shape, 0) : x->shape;
		if (type_body_input(n, body, k, x->dtype, &s, "state"))
			return -1;
	}
	for (int j = 0; j < p->n_scan_in; j++) {
		const mc_value *x = c->in[first + p->n_state + j];
		mc_shape s = v8 ? drop_dim(&x->shape, 0) : drop_dim(&x->shape, p->in_axis[j]);
		if (v8)
			s = drop_dim(&s, 0);
		if (type_body_input(n, body, p->n_state + j, x->dtype, &s, "scan slice"))
			return -1;
	}
	if (mc_infer_graph(body))
		return mc_node_error(n, "cannot type its body (above): static shapes need every shape "
		                     "inside the body known at compile time and the same in every "
		                     "iteration (not depending on the slice or state values)");
	return 0;
}

static int scan_infer(mc_infer_ctx *c)
{
	mc_node *n = c->node;
	scan_params *p = n->params;
	mc_graph *body = mc_loop_body(n);
	bool v8 = n->opset < 9;
	int first = v8 ? 1 : 0;
	if (v8 ? scan8_geometry(c, p) : scan9_geometry(c, p))
		return -1;
	if (scan_type_body(c, p, body, v8))
		return -1;
	for (int k = 0; k < p->n_state; k++) {
		const mc_value *x = c->in[first + k], *o = &body->values[body->outputs[k]];
		mc_shape want = v8 ? drop_dim(&x->shape, 0) : x->shape;
		if (o->dtype != x->dtype || !mc_shape_eq(&o->shape, &want)) {
			char a[256], b[256];
			return mc_node_error(n, "body output %d ('%s') is %s %s but state %d is %s %s; "
			                     "static shapes need it unchanged", k, o->name,
			                     mc_dtype_name(o->dtype), mc_shape_str(&o->shape, a, sizeof a),
			                     k, mc_dtype_name(x->dtype), mc_shape_str(&want, b, sizeof b));
		}
		mc_set_out(c, k, x->dtype, &x->shape);
	}
	for (int k = 0; k < p->n_scan_out; k++) {
		const mc_value *o = &body->values[body->outputs[p->n_state + k]];
		mc_shape stacked;
		if (v8) {
			mc_shape per_batch;
			if (stacked_shape(n, k, &o->shape, 0, p->seq_len, &per_batch) ||
			    stacked_shape(n, k, &per_batch, 0, p->batch, &stacked))
				return -1;
		} else {
			int axis;
			if (mc_norm_axis(n, p->out_axis[k], o->shape.rank + 1, &axis))
				return -1;
			p->out_axis[k] = axis;
			if (stacked_shape(n, k, &o->shape, axis, p->seq_len, &stacked))
				return -1;
		}
		mc_set_out(c, p->n_state + k, o->dtype, &stacked);
	}
	p->folding = all_inputs_const(c);
	return 0;
}

/* One sequence to run the body over: a whole opset-9 Scan, or one batch
 * entry of an opset-8 Scan. */
typedef struct scan_seq {
	const mc_node *node;
	const mc_graph *body;
	const scan_params *p;
	mc_tensor *const *env;
	const mc_tensor *const *scan_in;  /* n_scan_in */
	mc_tensor **scan_out;             /* n_scan_out, entries may be NULL */
	int64_t batch_index;              /* opset 8 */
	int64_t len;                      /* iterations to run */
} scan_seq;

/* Position of iteration t's slice in a sequence of len, given direction. */
static size_t seq_pos(int64_t t, int64_t len, int dir)
{
	return (size_t)(dir ? len - 1 - t : t);
}

/* Moves slice `pos` of a stacked tensor (scan input or output) to or from
 * `slice`; -1 when the slice does not fit the stacked tensor. */
static int scan_move(const scan_seq *s, mc_tensor *whole, mc_tensor *slice, int axis,
                     size_t pos, bool into_slice)
{
	size_t outer, n, inner;
	if (s->node->opset < 9) {
		/* [batch, seq, ...]: batch x seq entries along one flat axis */
		axis_geometry(whole, 0, 1, &outer, &n, &inner);
		pos += (size_t)s->batch_index * (size_t)whole->shape.dims[1];
	} else {
		axis_geometry(whole, axis, axis, &outer, &n, &inner);
	}
	if (slice->dtype != whole->dtype || slice->nbytes != outer * inner || pos >= n)
		return -1;
	slice_copy(whole->data, slice->data, outer, n, inner, pos, into_slice);
	return 0;
}

/* Runs the body over one sequence; states (n_state tensors) are replaced
 * by the body's results, iteration by iteration. */
static int scan_run_seq(const scan_seq *s, mc_tensor **states)
{
	const scan_params *p = s->p;
	const mc_graph *body = s->body;
	bool v8 = s->node->opset < 9;
	int nb_in = body->n_inputs, nb_out = body->n_outputs;
	mc_tensor *args[nb_in + 1], *res[nb_out + 1];
	int rc = 0;
	memset(args, 0, sizeof args);
	memset(res, 0, sizeof res);
	for (int j = 0; j < p->n_scan_in; j++) {
		const mc_value *v = &body->values[body->inputs[p->n_state + j]];
		args[p->n_state + j] = mc_tensor_new(v->dtype, &v->shape);
		if (!args[p->n_state + j])
			rc = mc_node_error(s->node, "out of memory");
	}
	for (int64_t t = 0; t < s->len && !rc; t++) {
		if ((rc = fold_budget()))
			break;
		for (int k = 0; k < p->n_state; k++)
			args[k] = states[k];
		for (int j = 0; j < p->n_scan_in && !rc; j++)
			if (scan_move(s, (mc_tensor *)s->scan_in[j], args[p->n_state + j], p->in_axis[j],
			              seq_pos(t, s->len, p->in_dir[j]), true))
				rc = mc_node_error(s->node, "scan input %d does not match its body input", j);
		if (rc)
			break;
		if ((rc = mc_interp_run(body, args, res, s->env)))
			break;
		for (int k = 0; k < p->n_state && !rc; k++) {
			if (!tensor_fits(res[k], states[k]->dtype, &states[k]->shape)) {
				rc = mc_node_error(s->node, "body output %d changed type between iterations",
				                   k);
				break;
			}
			mc_tensor_free(states[k]);
			states[k] = res[k];
			res[k] = NULL;
		}
		for (int k = 0; k < p->n_scan_out && !rc; k++) {
			mc_tensor *o = s->scan_out[k], *slice = res[p->n_state + k];
			if (!o)
				continue;
			/* opset 8 stacks in iteration order */
			size_t pos = v8 ? (size_t)t : seq_pos(t, p->seq_len, p->out_dir[k]);
			if (scan_move(s, o, slice, p->out_axis[k], pos, false))
				rc = mc_node_error(s->node, "scan output %d: body slice does not match its "
				                   "inferred type", k);
		}
		free_all(res, nb_out);
	}
	for (int j = 0; j < p->n_scan_in; j++)
		mc_tensor_free(args[p->n_state + j]);
	return rc;
}

static int scan9_eval(mc_eval_ctx *c, const scan_params *p)
{
	mc_tensor *states[p->n_state + 1];
	int rc = 0;
	for (int k = 0; k < p->n_state; k++)
		if (!(states[k] = mc_tensor_clone(c->in[k])))
			rc = mc_node_error(c->node, "out of memory");
	scan_seq s = {.node = c->node, .body = mc_loop_body(c->node), .p = p, .env = c->env,
	              .scan_in = c->in + p->n_state, .scan_out = c->out + p->n_state,
	              .len = p->seq_len};
	if (!rc)
		rc = scan_run_seq(&s, states);
	if (!rc)
		emit_state(c->out, states, p->n_state);
	for (int k = 0; k < p->n_state; k++)
		mc_tensor_free(states[k]);
	return rc;
}

/* Opset 8: each batch entry is its own sequence, of sequence_lens[b]
 * steps when given; scan output steps past that stay zero. */
static int scan8_eval(mc_eval_ctx *c, const scan_params *p)
{
	const mc_node *n = c->node;
	const mc_graph *body = mc_loop_body(n);
	mc_tensor *states[p->n_state + 1];
	int rc = 0;
	for (int64_t b = 0; b < p->batch && !rc; b++) {
		int64_t len = c->in[0] ? mc_get_i(c->in[0], (size_t)b) : p->seq_len;
		if (len < 0 || len > p->seq_len)
			return mc_node_error(n, "sequence_lens[%lld] is %lld, outside [0, %lld]",
			                     (long long)b, (long long)len, (long long)p->seq_len);
		for (int k = 0; k < p->n_state; k++) {
			const mc_value *v = &body->values[body->inputs[k]];
			states[k] = mc_tensor_new(v->dtype, &v->shape);
			if (!states[k]) {
				free_all(states, k);
				return mc_node_error(n, "out of memory");
			}
			size_t outer, cnt, inner;
			axis_geometry(c->in[1 + k], 0, 0, &outer, &cnt, &inner);
			slice_copy(c->in[1 + k]->data, states[k]->data, 1, cnt, inner, (size_t)b, true);
		}
		scan_seq s = {.node = n, .body = body, .p = p, .env = c->env,
		              .scan_in = c->in + 1 + p->n_state, .scan_out = c->out + p->n_state,
		              .batch_index = b, .len = len};
		rc = scan_run_seq(&s, states);
		for (int k = 0; k < p->n_state && !rc; k++) {
			if (!c->out[k])
				continue;
			size_t outer, cnt, inner;
			axis_geometry(c->out[k], 0, 0, &outer, &cnt, &inner);
			slice_copy(c->out[k]->data, states[k]->data, 1, cnt, inner, (size_t)b, false);
		}
		free_all(states, p->n_state);
	}
	return rc;
}

static int scan_eval(mc_eval_ctx *c)
{
	const scan_params *p = c->node->params;
	bool began = fold_begin(c->node, p->folding);
	int rc = c->node->opset < 9 ? scan8_eval(c, p) : scan9_eval(c, p);
	fold_end(began);
	return rc;
}

static const mc_op op_scan8 = {
	.name = "Scan", .min_opset = 8, .max_opset = 8,
	.min_inputs = 0, .max_inputs = MC_MAX_NODE_IO, .min_outputs = 1, .max_outputs = MC_MAX_NODE_IO,
	.parse = scan_parse, .infer = scan_infer, .eval = scan_eval, .flags = MC_OP_SUBGRAPH,
};

static const mc_op op_scan = {
	.name = "Scan", .min_opset = 9, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = MC_MAX_NODE_IO, .min_outputs = 1, .max_outputs = MC_MAX_NODE_IO,
	.parse = scan_parse, .infer = scan_infer, .eval = scan_eval, .flags = MC_OP_SUBGRAPH,
};

const mc_op *const mc_ops_loop[] = {
	&op_loop,
	&op_scan8,
	&op_scan,
	NULL,
};
