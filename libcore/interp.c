/* Reference interpreter: evaluates a typed graph node by node with the
 * registry's reference implementations. Clarity over speed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelc.h"

/* A shape-only op (Shape, Size) reads its inputs' shapes, never their
 * data: one not known gets an empty stand-in of the right dtype and shape. */
static mc_tensor *placeholder(const mc_value *v)
{
	mc_tensor *t = mc_xcalloc(1, sizeof *t);
	t->dtype = v->dtype;
	t->shape = v->shape;
	t->numel = mc_numel(&v->shape);
	return t;
}

/* Without an environment, n is folded: subgraph ops read the graph's
 * constants (captured ones included) by value index. */
static mc_tensor **constants_env(const mc_graph *g, const mc_node *n)
{
	if (!n->n_implicit && !(n->op->flags & MC_OP_SUBGRAPH))
		return NULL;
	mc_tensor **env = mc_xcalloc((size_t)g->n_values, sizeof *env);
	for (int v = 0; v < g->n_values; v++)
		env[v] = g->values[v].konst;
	return env;
}

static int new_outputs(const mc_graph *g, const mc_node *n, bool folding, mc_tensor **out)
{
	for (int k = 0; k < n->n_outputs; k++)
		out[k] = NULL;
	for (int k = 0; k < n->n_outputs; k++) {
		if (n->outputs[k] < 0)
			continue;
		const mc_value *v = &g->values[n->outputs[k]];
		if (!(out[k] = mc_tensor_new(v->dtype, &v->shape)))
			return mc_node_error(n, "cannot allocate output '%s'%s", v->name,
			                     folding ? " for constant folding" : "");
	}
	return 0;
}

int mc_eval_node(const mc_graph *g, const mc_node *n, mc_tensor *const *env, mc_tensor **out)
{
	const mc_tensor *in[n->n_inputs + 1];
	mc_tensor *stand_in[n->n_inputs + 1];
	for (int k = 0; k < n->n_inputs; k++) {
		int v = n->inputs[k];
		stand_in[k] = NULL;
		in[k] = v < 0 ? NULL : env ? env[v] : g->values[v].konst;
		if (v >= 0 && !in[k] && (n->op->flags & MC_OP_SHAPE_ONLY))
			in[k] = stand_in[k] = placeholder(&g->values[v]);
	}
	mc_tensor **konst = env ? NULL : constants_env(g, n);
	int rc = new_outputs(g, n, !env, out);
	mc_eval_ctx c = {.node = n, .graph = g, .n_in = n->n_inputs, .n_out = n->n_outputs,
	                 .in = in, .out = out, .env = env ? env : konst};
	if (!rc)
		rc = n->op->eval(&c);
	for (int k = 0; rc && k < n->n_outputs; k++) {
		mc_tensor_free(out[k]);
		out[k] = NULL;
	}
	for (int k = 0; k < n->n_inputs; k++)
		free(stand_in[k]);
	free(konst);
	return rc;
}

int mc_interp_run(const mc_graph *g, mc_tensor *const *inputs, mc_tensor **outputs,
                  mc_tensor *const *outer)
{
	mc_tensor **env = mc_xcalloc((size_t)g->n_values, sizeof *env);
	bool *owned = mc_xcalloc((size_t)g->n_values, sizeof *owned);
	/* last node reading each value, so intermediates are freed early */
	int *last_use = mc_xmalloc((size_t)g->n_values * sizeof *last_use);
	int rc = 0;

	for (int v = 0; v < g->n_values; v++) {
		const mc_value *val = &g->values[v];
		last_use[v] = -1;
		if (val->konst)
			env[v] = val->konst;
		else if (val->kind == MC_VAL_CAPTURED)
			env[v] = outer ? outer[val->outer] : NULL;
	}
	for (int i = 0; i < g->n_nodes; i++) {
		const mc_node *n = &g->nodes[i];
		for (int k = 0; k < n->n_inputs; k++)
			if (n->inputs[k] >= 0)
				last_use[n->inputs[k]] = i;
		for (int k = 0; k < n->n_implicit; k++)
			last_use[n->implicit[k]] = i;
	}
	for (int i = 0; i < g->n_outputs; i++) {
		const mc_value *ov = &g->values[g->outputs[i]];
		last_use[g->outputs[i]] = g->n_nodes;
		if (ov->counted) /* read at the end, to trim the output */
			last_use[ov->count_value] = g->n_nodes;
	}

	for (int i = 0; i < g->n_inputs && !rc; i++) {
		int v = g->inputs[i];
		const mc_value *val = &g->values[v];
		const mc_tensor *t = inputs[i];
		char a[256], b[256];
		if (!t || t->dtype != val->dtype || !mc_shape_eq(&t->shape, &val->shape)) {
			if (t)
				mc_error("input '%s': expected %s %s, got %s %s", val->name,
				         mc_dtype_name(val->dtype), mc_shape_str(&val->shape, a, sizeof a),
				         mc_dtype_name(t->dtype), mc_shape_str(&t->shape, b, sizeof b));
			else
				mc_error("input '%s': no value given (expected %s %s)", val->name,
				         mc_dtype_name(val->dtype), mc_shape_str(&val->shape, a, sizeof a));
			rc = -1;
			break;
		}
		env[v] = inputs[i];
	}

	for (int i = 0; i < g->n_nodes && !rc; i++) {
		const mc_node *n = &g->nodes[i];
		bool all_known = true;
		for (int k = 0; k < n->n_outputs; k++)
			if (n->outputs[k] >= 0 && !env[n->outputs[k]])
				all_known = false;
		if (all_known)
			continue; /* folded at compile time */
		mc_tensor *out[n->n_outputs + 1];
		if ((rc = mc_eval_node(g, n, env, out)))
			break;
		for (int k = 0; k < n->n_outputs; k++) {
			if (!out[k])
				continue;
			env[n->outputs[k]] = out[k];
			owned[n->outputs[k]] = true;
		}
		for (int k = 0; k < n->n_inputs; k++) {
			int v = n->inputs[k];
			if (v >= 0 && owned[v] && last_use[v] == i) {
				mc_tensor_free(env[v]);
				env[v] = NULL;
				owned[v] = false;
			}
		}
	}
	for (int i = 0; i < g->n_outputs && !rc; i++) {
		const mc_value *ov = &g->values[g->outputs[i]];
		const mc_tensor *t = env[g->outputs[i]], *count = ov->counted ? env[ov->count_value] : NULL;
		/* a counted output: its meaningful entries only, as a runtime
		 * that sizes tensors by their data gives them */
		outputs[i] = !t ? NULL
		           : count ? mc_count_trim(t, ov->count_axis, *(const int64_t *)count->data)
		                   : mc_tensor_clone(t);
		if (!outputs[i]) {
			mc_error("output '%s' was not computed", g->values[g->outputs[i]].name);
			for (int k = 0; k < i; k++)
				mc_tensor_free(outputs[k]);
			rc = -1;
		}
	}
	for (int v = 0; v < g->n_values; v++)
		if (owned[v])
			mc_tensor_free(env[v]);
	free(env);
	free(owned);
	free(last_use);
	return rc;
}
