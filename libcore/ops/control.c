/* Control flow: If. A condition known at compile time selects one branch
 * during inference; otherwise both branches must agree on output types.
 * A branch that cannot be typed at all for the shapes given (silero VAD's
 * branch for the other sample rate) becomes an Unreachable node: ONNX
 * Runtime fails only if that branch is taken, and so does the compiled
 * model, with a status (MODELC_ERR_BRANCH), after a warning naming the
 * inputs that decide. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

static int if_parse(mc_node *n)
{
	mc_graph *t, *e;
	if (mc_attr_graph(n, "then_branch", &t) || mc_attr_graph(n, "else_branch", &e))
		return -1;
	if (!t || !e)
		return mc_node_error(n, "needs graph attributes then_branch and else_branch");
	if (t->n_outputs != n->n_outputs || e->n_outputs != n->n_outputs)
		return mc_node_error(n, "has %d outputs but its branches produce %d and %d",
		                     n->n_outputs, t->n_outputs, e->n_outputs);
	if (t->n_inputs || e->n_inputs)
		return mc_node_error(n, "branches must not declare inputs");
	return 0;
}

/* Appends to names (", "-separated, without repeats) the graph inputs that
 * value v of g depends on, through its producers and, for a captured
 * value, the enclosing graphs'. */
static void deciding_inputs(const mc_graph *g, int v, bool *seen, char *names, size_t n)
{
	if (v < 0 || seen[v])
		return;
	seen[v] = true;
	const mc_value *val = &g->values[v];
	if (val->kind == MC_VAL_INPUT) {
		char quoted[300];
		snprintf(quoted, sizeof quoted, "'%s'", val->name);
		if (!strstr(names, quoted)) {
			size_t len = strlen(names);
			snprintf(names + len, n - len, "%s%s", len ? ", " : "", quoted);
		}
	} else if (val->kind == MC_VAL_CAPTURED && g->parent && val->outer >= 0) {
		bool *up = mc_xcalloc((size_t)g->parent->n_values + 1, sizeof *up);
		deciding_inputs(g->parent, val->outer, up, names, n);
		free(up);
	} else if (val->kind == MC_VAL_NODE && val->producer >= 0) {
		const mc_node *p = &g->nodes[val->producer];
		for (int i = 0; i < p->n_inputs; i++)
			deciding_inputs(g, p->inputs[i], seen, names, n);
		for (int i = 0; i < p->n_implicit; i++)
			deciding_inputs(g, p->implicit[i], seen, names, n);
	}
}

static mc_attr ints_attr(const char *name, const int64_t *v, size_t n)
{
	mc_attr a = { .name = mc_xstrdup(name), .type = MC_ATTR_INTS, .n = n };
	a.ints = mc_xmalloc((n + 1) * sizeof *a.ints);
	memcpy(a.ints, v, n * sizeof *v);
	return a;
}

/* Branch b's nodes replaced by one Unreachable node that gives its
 * outputs the types of `like`'s (the other branch): attributes dtypes
 * (one per output) and shapes (per output its rank, then its dims). */
static void stub_branch(const mc_node *ifn, mc_graph *b, const mc_graph *like)
{
	for (int i = 0; i < b->n_nodes; i++)
		mc_node_free(&b->nodes[i]);
	b->n_nodes = 0;
	for (int v = 0; v < b->n_values; v++) /* their producers are gone */
		b->values[v].producer = -1;
	if (!b->cap_nodes) {
		b->cap_nodes = 1;
		b->nodes = mc_xcalloc(1, sizeof *b->nodes);
	}
	int n_out = b->n_outputs;
	int64_t *dtypes = mc_xmalloc(((size_t)n_out + 1) * sizeof *dtypes);
	int64_t *shapes = mc_xmalloc(((size_t)n_out * (MC_MAX_RANK + 1) + 1) * sizeof *shapes);
	size_t n_shapes = 0;
	mc_node *u = &b->nodes[b->n_nodes++];
	memset(u, 0, sizeof *u);
	char name[600];
	snprintf(name, sizeof name, "%s/unreachable", ifn->name);
	u->name = mc_xstrdup(name);
	u->domain = mc_xstrdup("");
	mc_node_set_op(u, MC_OP_Unreachable, ifn->opset);
	/* no inputs; passes read a node's inputs[0] and take -1 as omitted */
	u->inputs = mc_xmalloc(sizeof *u->inputs);
	u->inputs[0] = -1;
	u->n_outputs = n_out;
	u->outputs = mc_xmalloc(((size_t)n_out + 1) * sizeof *u->outputs);
	for (int k = 0; k < n_out; k++) {
		/* a value of its own: the old output may be an input or a constant */
		snprintf(name, sizeof name, "%s/unreachable_%d", ifn->name, k);
		int v = mc_graph_add_value(b, name, MC_VAL_NODE);
		b->values[v].producer = 0;
		b->outputs[k] = u->outputs[k] = v;
		const mc_value *lv = &like->values[like->outputs[k]];
		dtypes[k] = lv->dtype;
		shapes[n_shapes++] = lv->shape.rank;
		for (int d = 0; d < lv->shape.rank; d++)
			shapes[n_shapes++] = lv->shape.dims[d];
	}
	u->n_attrs = 2;
	u->attrs = mc_xcalloc(2, sizeof *u->attrs);
	u->attrs[0] = ints_attr("dtypes", dtypes, (size_t)n_out);
	u->attrs[1] = ints_attr("shapes", shapes, n_shapes);
	free(dtypes);
	free(shapes);
}

/* Infers both branches of an If with a run-time condition. One that
 * fails while the other succeeds is stubbed (above), with a warning; both
 * failing report both. 0 or -1. */
static int infer_both(const mc_infer_ctx *c, mc_graph *tg, mc_graph *eg)
{
	const mc_node *n = c->node;
	mc_diag_held held[2];
	mc_graph *branch[2] = { tg, eg };
	int rc[2];
	mc_diag_hold(&held[0]);
	rc[0] = mc_infer_graph(tg);
	mc_diag_hold(&held[1]); /* nested: replayed, it goes into held[0] */
	rc[1] = mc_infer_graph(eg);
	char first[2][512];
	for (int k = 1; k >= 0; k--) {
		memcpy(first[k], held[k].first, sizeof first[k]);
		mc_diag_release(&held[k], rc[0] && rc[1]);
	}
	if (!rc[0] && !rc[1])
		return 0;
	if (rc[0] && rc[1])
		return -1;
	int dead = rc[0] ? 0 : 1;
	char names[1024] = "", where[512];
	bool *seen = mc_xcalloc((size_t)c->graph->n_values + 1, sizeof *seen);
	deciding_inputs(c->graph, n->inputs[0], seen, names, sizeof names);
	free(seen);
	mc_warn("%s: its %s cannot run with these shapes (%s): it is compiled as a run-time error, "
	        "MODELC_ERR_BRANCH if taken; the condition depends on %s%s",
	        mc_node_where(n, where, sizeof where), dead ? "else_branch" : "then_branch",
	        first[dead], names[0] ? "input " : "", names[0] ? names : "no graph input");
	stub_branch(n, branch[dead], branch[1 - dead]);
	return mc_infer_graph(branch[dead]);
}

static int if_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	mc_graph *tg = mc_attr_find(n, "then_branch")->g, *eg = mc_attr_find(n, "else_branch")->g;
	const mc_value *cond = c->in[0];
	if (cond->dtype != MC_BOOL || mc_numel(&cond->shape) != 1)
		return mc_node_error(n, "condition must be a single bool, got %s with %zu elements",
		                     mc_dtype_name(cond->dtype), mc_numel(&cond->shape));
	int pick = -1; /* 1: then, 0: else, -1: unknown until run time */
	if (cond->konst)
		pick = mc_get_i(cond->konst, 0) != 0;
	if (pick < 0 ? infer_both(c, tg, eg) : mc_infer_graph(pick ? tg : eg))
		return -1;
	for (int k = 0; k < c->n_out; k++) {
		const mc_value *tv = &tg->values[tg->outputs[k]], *ev = &eg->values[eg->outputs[k]];
		const mc_value *src = pick == 0 ? ev : tv;
		if (pick < 0 && (tv->dtype != ev->dtype || !mc_shape_eq(&tv->shape, &ev->shape))) {
			char a[256], b[256];
			return mc_node_error(n, "output %d is %s %s in then_branch but %s %s in "
			                     "else_branch; static shapes need both to agree, or a "
			                     "condition known at compile time (--bind)", k,
			                     mc_dtype_name(tv->dtype), mc_shape_str(&tv->shape, a, sizeof a),
			                     mc_dtype_name(ev->dtype), mc_shape_str(&ev->shape, b, sizeof b));
		}
		mc_set_out(c, k, src->dtype, &src->shape);
	}
	return 0;
}

static int if_eval(mc_eval_ctx *c)
{
	const mc_node *n = c->node;
	bool cond = mc_get_i(c->in[0], 0) != 0;
	const mc_graph *b = mc_attr_find(n, cond ? "then_branch" : "else_branch")->g;
	mc_tensor *res[c->n_out + 1];
	if (mc_interp_run(b, NULL, res, c->env))
		return -1;
	int rc = 0;
	for (int k = 0; k < c->n_out; k++) {
		if (c->out[k]) {
			if (res[k]->nbytes != c->out[k]->nbytes || res[k]->dtype != c->out[k]->dtype)
				rc = mc_node_error(n, "branch output %d does not match its inferred type", k);
			else
				memcpy(c->out[k]->data, res[k]->data, res[k]->nbytes);
		}
		mc_tensor_free(res[k]);
	}
	return rc;
}

/* Unreachable: a branch that could not be typed (stub_branch). Its outputs
 * take the types its attributes hold; running it is an error. */
static int unreachable_infer(mc_infer_ctx *c)
{
	const mc_attr *dt = mc_attr_find(c->node, "dtypes"), *sh = mc_attr_find(c->node, "shapes");
	if (!dt || !sh || dt->type != MC_ATTR_INTS || sh->type != MC_ATTR_INTS ||
	    (int)dt->n != c->n_out)
		return mc_node_error(c->node, "needs attributes dtypes and shapes, one per output");
	size_t at = 0;
	for (int k = 0; k < c->n_out; k++) {
		mc_shape s = { 0 };
		if (at >= sh->n || sh->ints[at] < 0 || sh->ints[at] > MC_MAX_RANK ||
		    at + 1 + (size_t)sh->ints[at] > sh->n)
			return mc_node_error(c->node, "attribute shapes is malformed");
		s.rank = (int)sh->ints[at++];
		for (int d = 0; d < s.rank; d++)
			s.dims[d] = sh->ints[at++];
		mc_set_out(c, k, (mc_dtype)dt->ints[k], &s);
	}
	return 0;
}

static int unreachable_eval(mc_eval_ctx *c)
{
	return mc_node_error(c->node, "this If branch cannot run with the shapes the model was given "
	                              "(the warning at inference said why)");
}

static const mc_op op_unreachable = {
	.name = "Unreachable", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 0, .max_inputs = 0, .min_outputs = 1, .max_outputs = 64,
	.infer = unreachable_infer, .eval = unreachable_eval,
	.flags = MC_OP_INTERNAL | MC_OP_NO_FOLD,
};

static const mc_op op_if = {
	.name = "If", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 64,
	.parse = if_parse, .infer = if_infer, .eval = if_eval, .flags = MC_OP_SUBGRAPH,
};

const mc_op *const mc_ops_control[] = {
	&op_if,
	&op_unreachable,
	NULL,
};
