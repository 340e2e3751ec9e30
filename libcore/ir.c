/* Graph IR bookkeeping. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelc.h"

int mc_graph_find(const mc_graph *g, const char *name)
{
	/* Linear scan is fine for lookups during import only; import builds a
	 * hash index of its own for the hot path. */
	for (int i = g->n_values - 1; i >= 0; i--)
		if (strcmp(g->values[i].name, name) == 0)
			return i;
	return -1;
}

int mc_graph_add_value(mc_graph *g, const char *name, mc_value_kind kind)
{
	if (g->n_values == g->cap_values) {
		g->cap_values = g->cap_values ? 2 * g->cap_values : 64;
		g->values = realloc(g->values, (size_t)g->cap_values * sizeof *g->values);
		if (!g->values) {
			mc_error("out of memory");
			exit(3);
		}
	}
	mc_value *v = &g->values[g->n_values];
	memset(v, 0, sizeof *v);
	v->name = mc_xstrdup(name);
	v->kind = kind;
	v->producer = -1;
	v->outer = -1;
	return g->n_values++;
}

static void attr_free(mc_attr *a)
{
	free(a->name);
	free(a->s);
	mc_tensor_free(a->t);
	if (a->g)
		mc_graph_free(a->g);
	free(a->floats);
	free(a->ints);
	for (size_t i = 0; a->strings && i < a->n; i++)
		free(a->strings[i]);
	free(a->strings);
}

void mc_node_free(mc_node *n)
{
	free(n->name);
	free(n->op_type);
	free(n->domain);
	free(n->inputs);
	free(n->outputs);
	free(n->implicit);
	for (int a = 0; a < n->n_attrs; a++)
		attr_free(&n->attrs[a]);
	free(n->attrs);
	free(n->params);
	memset(n, 0, sizeof *n);
}

void mc_graph_free(mc_graph *g)
{
	if (!g)
		return;
	for (int i = 0; i < g->n_values; i++) {
		free(g->values[i].name);
		mc_tensor_free(g->values[i].konst);
		for (int d = 0; d < MC_MAX_RANK; d++)
			free(g->values[i].dim_param[d]);
	}
	for (int i = 0; i < g->n_nodes; i++)
		mc_node_free(&g->nodes[i]);
	free(g->values);
	free(g->nodes);
	free(g->inputs);
	free(g->outputs);
	free(g->name);
	free(g->model_dir);
	free(g);
}

const char *mc_node_where(const mc_node *n, char *buf, size_t len)
{
	/* Only the default domain's opset is known; other domains are refused. */
	if (n->domain[0])
		snprintf(buf, len, "node '%s' (%s:%s)", n->name, n->domain, n->op_type);
	else
		snprintf(buf, len, "node '%s' (%s, opset %d)", n->name, n->op_type, n->opset);
	return buf;
}

int mc_graph_bind_input(mc_graph *g, int i, mc_tensor *t)
{
	mc_value *v = &g->values[g->inputs[i]];
	for (int d = 0; d < v->shape.rank && d < t->shape.rank; d++)
		if (v->shape.dims[d] >= 0 && v->shape.dims[d] != t->shape.dims[d])
			goto mismatch;
	if (t->dtype != v->dtype || t->shape.rank != v->shape.rank)
		goto mismatch;
	v->kind = MC_VAL_CONST;
	v->konst = t;
	v->shape = t->shape;
	v->typed = true;
	memmove(&g->inputs[i], &g->inputs[i + 1], (size_t)(g->n_inputs - i - 1) * sizeof(int));
	g->n_inputs--;
	return 0;
mismatch:;
	char a[256], b[256];
	mc_error("cannot bind input '%s' (%s %s) to a %s %s value", v->name, mc_dtype_name(v->dtype),
	         mc_shape_str(&v->shape, a, sizeof a), mc_dtype_name(t->dtype),
	         mc_shape_str(&t->shape, b, sizeof b));
	return -1;
}
