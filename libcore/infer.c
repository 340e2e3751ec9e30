/* Shape inference: types every value and evaluates what is known at
 * compile time (shape subgraphs), using each op's registry entry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelc.h"

/* Folding during inference is for shape arithmetic and small constants;
 * the freezing passes fold the rest with their own (reported) cap. */
#define INFER_FOLD_BYTES (1u << 20)

int mc_report_unsupported(const mc_graph *g)
{
	int count = 0;
	for (int i = 0; i < g->n_nodes; i++) {
		const mc_node *n = &g->nodes[i];
		if (!n->op)
			count++;
		for (int a = 0; a < n->n_attrs; a++)
			if (n->attrs[a].g)
				count += mc_report_unsupported(n->attrs[a].g);
	}
	return count;
}

static int check_input(const mc_value *v)
{
	if (v->typed)
		return 0;
	for (int d = 0; d < v->shape.rank; d++) {
		if (v->shape.dims[d] >= 0)
			continue;
		if (v->dim_param[d])
			mc_error("input '%s': dimension %d ('%s') is not fixed; pin it with "
			         "--input-shape '%s=...' (all %d dimensions)", v->name, d,
			         v->dim_param[d], v->name, v->shape.rank);
		else
			mc_error("input '%s': dimension %d is unknown; pin it with --input-shape "
			         "'%s=...' (all %d dimensions)", v->name, d, v->name, v->shape.rank);
		return -1;
	}
	mc_error("input '%s' has no known type", v->name);
	return -1;
}

#define FOLD_BUDGET_BASE ((size_t)256 << 20)

static size_t constant_bytes(const mc_graph *g)
{
	size_t total = 0;
	for (int v = 0; v < g->n_values; v++) {
		const mc_tensor *t = g->values[v].konst;
		size_t b;
		if (t && mc_mul_size(t->numel, mc_dtype_size(t->dtype), &b) && !mc_add_size(total, b, &total))
			return SIZE_MAX;
	}
	return total;
}

bool mc_fold_take(mc_graph *g, size_t bytes)
{
	while (g->parent)
		g = g->parent;
	if (!g->fold_budget) {
		size_t own = constant_bytes(g), budget;
		if (!mc_mul_size(own, 4, &own) || !mc_add_size(FOLD_BUDGET_BASE, own, &budget))
			budget = SIZE_MAX;
		g->fold_budget = budget;
	}
	if (bytes > g->fold_budget - g->folded_bytes) {
		if (!g->fold_budget_spent)
			mc_warn("compile-time evaluation stopped after %zu bytes (its budget: 256 MiB plus "
			        "4x the model's constants); the rest is computed at run time",
			        g->folded_bytes);
		g->fold_budget_spent = true;
		return false;
	}
	g->folded_bytes += bytes;
	return true;
}

static bool foldable(mc_graph *g, const mc_node *n)
{
	if (n->op->flags & MC_OP_NO_FOLD)
		return false;
	size_t bytes = 0;
	for (int k = 0; k < n->n_outputs; k++) {
		if (n->outputs[k] < 0)
			continue;
		const mc_value *v = &g->values[n->outputs[k]];
		size_t numel, b;
		if (!mc_shape_numel(&v->shape, &numel) ||
		    !mc_mul_size(numel, mc_dtype_size(v->dtype), &b) || !mc_add_size(bytes, b, &bytes))
			return false;
	}
	if (bytes > INFER_FOLD_BYTES)
		return false;
	for (int k = 0; k < n->n_outputs; k++)
		if (n->outputs[k] >= 0 && mc_shape_extent(&g->values[n->outputs[k]].shape) > INFER_FOLD_BYTES)
			return false;
	for (int k = 0; k < n->n_inputs; k++)
		if (n->inputs[k] >= 0 && mc_shape_extent(&g->values[n->inputs[k]].shape) > INFER_FOLD_BYTES)
			return false;
	if (n->op->flags & MC_OP_SHAPE_ONLY)
		return mc_fold_take(g, bytes);
	for (int k = 0; k < n->n_inputs; k++)
		if (n->inputs[k] >= 0 && !g->values[n->inputs[k]].konst)
			return false;
	for (int k = 0; k < n->n_implicit; k++)
		if (!g->values[n->implicit[k]].konst)
			return false;
	return mc_fold_take(g, bytes);
}

/* Evaluates one node on constant inputs; outputs become constants. */
static int fold(mc_graph *g, mc_node *n)
{
	const mc_tensor *in[n->n_inputs + 1];
	mc_tensor *out[n->n_outputs + 1];
	/* Shape-only ops may see inputs without data: give them empty
	 * placeholders of the right shape, never read. */
	mc_tensor *placeholders[n->n_inputs + 1];
	int rc = 0;
	for (int k = 0; k < n->n_inputs; k++) {
		placeholders[k] = NULL;
		in[k] = NULL;
		if (n->inputs[k] < 0)
			continue;
		const mc_value *v = &g->values[n->inputs[k]];
		if (v->konst) {
			in[k] = v->konst;
		} else {
			placeholders[k] = mc_xcalloc(1, sizeof(mc_tensor));
			placeholders[k]->dtype = v->dtype;
			placeholders[k]->shape = v->shape;
			placeholders[k]->numel = mc_numel(&v->shape);
			in[k] = placeholders[k];
		}
	}
	for (int k = 0; k < n->n_outputs; k++) {
		out[k] = NULL;
		if (n->outputs[k] < 0)
			continue;
		const mc_value *v = &g->values[n->outputs[k]];
		out[k] = mc_tensor_new(v->dtype, &v->shape);
		if (!out[k])
			rc = mc_node_error(n, "cannot allocate output %d", k);
	}
	/* env for subgraph ops: constants of this graph by value index */
	mc_tensor **env = mc_xcalloc((size_t)g->n_values, sizeof *env);
	for (int v = 0; v < g->n_values; v++)
		env[v] = g->values[v].konst;
	mc_eval_ctx c = {.node = n, .graph = g, .n_in = n->n_inputs, .n_out = n->n_outputs,
	                 .in = in, .out = out, .env = env};
	if (!rc)
		rc = n->op->eval(&c);
	free(env);
	for (int k = 0; k < n->n_inputs; k++)
		free(placeholders[k]);
	for (int k = 0; k < n->n_outputs; k++) {
		if (!out[k])
			continue;
		if (rc) {
			mc_tensor_free(out[k]);
			continue;
		}
		mc_value *v = &g->values[n->outputs[k]];
		mc_tensor_free(v->konst); /* inference may run again */
		v->konst = out[k];
	}
	return rc;
}

int mc_infer_node(mc_graph *g, int i)
{
	mc_node *n = &g->nodes[i];
	if (!n->op) {
		char where[512];
		mc_error("%s: cannot infer shapes through an unsupported op",
		         mc_node_where(n, where, sizeof where));
		return -1;
	}
	const mc_value *in[n->n_inputs + 1];
	mc_value *out[n->n_outputs + 1];
	for (int k = 0; k < n->n_inputs; k++) {
		in[k] = n->inputs[k] >= 0 ? &g->values[n->inputs[k]] : NULL;
		if (in[k] && !in[k]->typed)
			return mc_node_error(n, "input '%s' has no known type", in[k]->name);
	}
	for (int k = 0; k < n->n_outputs; k++)
		out[k] = n->outputs[k] >= 0 ? &g->values[n->outputs[k]] : NULL;
	mc_infer_ctx c = {.node = n, .graph = g, .n_in = n->n_inputs, .n_out = n->n_outputs,
	                  .in = in, .out = out};
	if (n->op->infer(&c))
		return -1;
	for (int k = 0; k < n->n_outputs; k++) {
		size_t numel;
		if (!out[k])
			continue;
		if (!out[k]->typed)
			return mc_node_error(n, "internal error: output %d was not typed", k);
		if (!mc_dtype_supported(out[k]->dtype))
			return mc_node_error(n, "output '%s' would have unsupported dtype %s",
			                     out[k]->name, mc_dtype_name(out[k]->dtype));
		if (!mc_shape_numel(&out[k]->shape, &numel)) {
			char buf[256];
			return mc_node_error(n, "output '%s' would have shape %s, which is too large "
			                     "or invalid", out[k]->name,
			                     mc_shape_str(&out[k]->shape, buf, sizeof buf));
		}
	}
	if (foldable(g, n) && fold(g, n))
		return -1;
	return 0;
}

int mc_infer_graph(mc_graph *g)
{
	for (int v = 0; v < g->n_values; v++) {
		mc_value *val = &g->values[v];
		if (val->kind == MC_VAL_CAPTURED && g->parent) {
			const mc_value *o = &g->parent->values[val->outer];
			val->dtype = o->dtype;
			val->shape = o->shape;
			val->typed = o->typed;
			mc_tensor_free(val->konst);
			val->konst = o->konst ? mc_tensor_clone(o->konst) : NULL;
		}
	}
	for (int i = 0; i < g->n_inputs; i++)
		if (check_input(&g->values[g->inputs[i]]))
			return -1;
	for (int i = 0; i < g->n_nodes; i++)
		if (mc_infer_node(g, i))
			return -1;
	return 0;
}
