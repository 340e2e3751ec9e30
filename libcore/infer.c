/* Shape inference: types every value and evaluates what is known at
 * compile time (shape subgraphs), using each op's registry entry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelc.h"

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

const mc_fold_rule mc_infer_fold_rule = {.limit = (size_t)1 << 20, .bound_inputs = true};

/* Bytes of v's data as typed; SIZE_MAX if they overflow. */
static size_t value_bytes(const mc_value *v)
{
	size_t numel, bytes;
	if (!mc_shape_numel(&v->shape, &numel) || !mc_mul_size(numel, mc_dtype_size(v->dtype), &bytes))
		return SIZE_MAX;
	return bytes;
}

/* Bytes of the values vals[0..count) (the known ones with konst_only). */
static size_t sum_bytes(const mc_graph *g, const int *vals, int count, bool konst_only)
{
	size_t total = 0;
	for (int k = 0; k < count; k++) {
		if (vals[k] < 0 || (konst_only && !g->values[vals[k]].konst))
			continue;
		if (!mc_add_size(total, value_bytes(&g->values[vals[k]]), &total))
			return SIZE_MAX;
	}
	return total;
}

/* Every input the node reads (implicit ones included) is known; shape-only
 * ops need only typed inputs. */
static bool inputs_known(const mc_graph *g, const mc_node *n)
{
	bool shape_only = n->op->flags & MC_OP_SHAPE_ONLY;
	for (int k = 0; k < n->n_inputs; k++) {
		const mc_value *v = n->inputs[k] >= 0 ? &g->values[n->inputs[k]] : NULL;
		if (v && !v->konst && !(shape_only && v->typed))
			return false;
	}
	for (int k = 0; k < n->n_implicit; k++)
		if (!g->values[n->implicit[k]].konst)
			return false;
	return true;
}

/* A loop nest over an empty tensor still runs over its other dimensions
 * (EyeLike on 2^40 x 0): no value may span more than limit elements. */
static bool extents_within(const mc_graph *g, const int *vals, int count, size_t limit)
{
	for (int k = 0; k < count; k++)
		if (vals[k] >= 0 && mc_shape_extent(&g->values[vals[k]].shape) > limit)
			return false;
	return true;
}

/* bytes: of n's outputs together. */
static bool within_limit(const mc_graph *g, const mc_node *n, const mc_fold_rule *r,
                         size_t bytes)
{
	if (!extents_within(g, n->outputs, n->n_outputs, r->limit) ||
	    (r->bound_inputs && !extents_within(g, n->inputs, n->n_inputs, r->limit)))
		return false;
	if (bytes <= r->limit)
		return true;
	if (!r->by_inputs)
		return false;
	size_t in_bytes = sum_bytes(g, n->inputs, n->n_inputs, true);
	size_t imp = sum_bytes(g, n->implicit, n->n_implicit, true);
	return mc_add_size(in_bytes, imp, &in_bytes) && bytes <= in_bytes;
}

mc_fold_verdict mc_fold_policy(mc_graph *g, const mc_node *n, const mc_fold_rule *rule, bool take,
                               size_t *bytes)
{
	*bytes = sum_bytes(g, n->outputs, n->n_outputs, false);
	if (!n->op || !n->op->eval || (n->op->flags & MC_OP_NO_FOLD) || !inputs_known(g, n))
		return MC_FOLD_NO;
	if (!within_limit(g, n, rule, *bytes))
		return MC_FOLD_CAPPED;
	if (take && !mc_fold_take(g, *bytes))
		return MC_FOLD_SPENT;
	return MC_FOLD_YES;
}

/* Evaluates one node on constant inputs; outputs become constants. */
static int fold(mc_graph *g, mc_node *n)
{
	mc_tensor *out[n->n_outputs + 1];
	if (mc_eval_node(g, n, NULL, out))
		return -1;
	for (int k = 0; k < n->n_outputs; k++) {
		if (!out[k])
			continue;
		mc_value *v = &g->values[n->outputs[k]];
		mc_tensor_free(v->konst); /* inference may run again */
		v->konst = out[k];
	}
	return 0;
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
	for (int k = 0; k < n->n_outputs; k++) {
		out[k] = n->outputs[k] >= 0 ? &g->values[n->outputs[k]] : NULL;
		if (out[k])
			out[k]->counted = false; /* inference may run again */
	}
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
	if (mc_count_propagate(g, n))
		return -1;
	size_t bytes;
	if (mc_fold_policy(g, n, &mc_infer_fold_rule, true, &bytes) == MC_FOLD_YES && fold(g, n))
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
	for (int i = 0; i < g->n_outputs && g->parent; i++)
		if (g->values[g->outputs[i]].counted) {
			mc_error("subgraph output '%s' has a data-dependent extent: not supported",
			         g->values[g->outputs[i]].name);
			return -1;
		}
	return 0;
}
