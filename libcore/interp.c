/* Reference interpreter: evaluates a typed graph node by node with the
 * registry's reference implementations. Clarity over speed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelc.h"

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
	for (int i = 0; i < g->n_outputs; i++)
		last_use[g->outputs[i]] = g->n_nodes;

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
		const mc_tensor *in[n->n_inputs + 1];
		mc_tensor *out[n->n_outputs + 1];
		for (int k = 0; k < n->n_inputs; k++)
			in[k] = n->inputs[k] >= 0 ? env[n->inputs[k]] : NULL;
		for (int k = 0; k < n->n_outputs; k++) {
			out[k] = NULL;
			if (n->outputs[k] < 0)
				continue;
			const mc_value *v = &g->values[n->outputs[k]];
			out[k] = mc_tensor_new(v->dtype, &v->shape);
			if (!out[k]) {
				rc = mc_node_error(n, "cannot allocate output '%s'", v->name);
				break;
			}
			env[n->outputs[k]] = out[k];
			owned[n->outputs[k]] = true;
		}
		if (rc)
			break;
		mc_eval_ctx c = {.node = n, .graph = g, .n_in = n->n_inputs, .n_out = n->n_outputs,
		                 .in = in, .out = out, .env = env};
		rc = n->op->eval(&c);
		for (int k = 0; k < n->n_inputs && !rc; k++) {
			int v = n->inputs[k];
			if (v >= 0 && owned[v] && last_use[v] == i) {
				mc_tensor_free(env[v]);
				env[v] = NULL;
				owned[v] = false;
			}
		}
	}
	for (int i = 0; i < g->n_outputs && !rc; i++) {
		outputs[i] = env[g->outputs[i]] ? mc_tensor_clone(env[g->outputs[i]]) : NULL;
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
