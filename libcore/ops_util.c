/* Helpers shared by op implementations: attributes, errors, axes, optional
 * inputs, working memory, broadcast indexing. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelc.h"
#include "ops/ops.h"

const mc_attr *mc_attr_find(const mc_node *n, const char *name)
{
	for (int i = 0; i < n->n_attrs; i++)
		if (strcmp(n->attrs[i].name, name) == 0)
			return &n->attrs[i];
	return NULL;
}

int mc_node_error(const mc_node *n, const char *fmt, ...)
{
	char where[512], msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	mc_error("%s: %s", mc_node_where(n, where, sizeof where), msg);
	return -1;
}

static const char *attr_type_name(mc_attr_type t)
{
	static const char *names[] = {"undefined", "float", "int", "string", "tensor",
	                              "graph", "floats", "ints", "strings", "tensors", "graphs"};
	return (unsigned)t < sizeof names / sizeof *names ? names[t] : "?";
}

static const mc_attr *typed(const mc_node *n, const char *name, mc_attr_type want, int *err)
{
	const mc_attr *a = mc_attr_find(n, name);
	*err = 0;
	if (a && a->type != want) {
		mc_node_error(n, "attribute '%s' has type %s, expected %s", name,
		              attr_type_name(a->type), attr_type_name(want));
		*err = -1;
		return NULL;
	}
	return a;
}

int mc_attr_int(const mc_node *n, const char *name, int64_t dflt, int64_t *out)
{
	int err;
	const mc_attr *a = typed(n, name, MC_ATTR_INT, &err);
	*out = a ? a->i : dflt;
	return err;
}

int mc_attr_float(const mc_node *n, const char *name, double dflt, double *out)
{
	int err;
	const mc_attr *a = typed(n, name, MC_ATTR_FLOAT, &err);
	*out = a ? a->f : dflt;
	return err;
}

int mc_attr_string(const mc_node *n, const char *name, const char *dflt, const char **out)
{
	int err;
	const mc_attr *a = typed(n, name, MC_ATTR_STRING, &err);
	*out = a ? a->s : dflt;
	return err;
}

int mc_attr_ints(const mc_node *n, const char *name, const int64_t **out, size_t *count)
{
	int err;
	const mc_attr *a = typed(n, name, MC_ATTR_INTS, &err);
	*out = a ? a->ints : NULL;
	*count = a ? a->n : 0;
	return err;
}

int mc_attr_floats(const mc_node *n, const char *name, const float **out, size_t *count)
{
	int err;
	const mc_attr *a = typed(n, name, MC_ATTR_FLOATS, &err);
	*out = a ? a->floats : NULL;
	*count = a ? a->n : 0;
	return err;
}

int mc_attr_graph(const mc_node *n, const char *name, mc_graph **out)
{
	int err;
	const mc_attr *a = typed(n, name, MC_ATTR_GRAPH, &err);
	*out = a ? a->g : NULL;
	return err;
}

int mc_norm_axis(const mc_node *n, int64_t axis, int rank, int *out)
{
	if (axis < -(int64_t)rank || axis >= (int64_t)rank)
		return mc_node_error(n, "axis %lld is out of range for rank %d", (long long)axis,
		                     rank);
	*out = (int)(axis < 0 ? axis + rank : axis);
	return 0;
}

void mc_set_out(mc_infer_ctx *c, int i, mc_dtype t, const mc_shape *s)
{
	mc_value *v = i < c->n_out ? c->out[i] : NULL;
	if (!v)
		return;
	v->dtype = t;
	v->shape = *s;
	v->typed = true;
}

int mc_const_ints(mc_infer_ctx *c, int i, int64_t *out, size_t cap, size_t *count)
{
	const mc_value *v = mc_opt_in(c, i);
	if (!v)
		return mc_node_error(c->node, "input %d is missing", i);
	if (!v->konst)
		return mc_node_error(c->node, "input %d ('%s') must be known at compile time "
		                     "(it sets a shape); pin the graph inputs it depends on",
		                     i, v->name);
	const mc_tensor *t = v->konst;
	if (t->shape.rank > 1 || !mc_dtype_is_int(t->dtype))
		return mc_node_error(c->node, "input %d ('%s') must be a 1-D integer tensor", i,
		                     v->name);
	if (t->numel > cap)
		return mc_node_error(c->node, "input %d ('%s') has %zu elements, at most %zu allowed",
		                     i, v->name, t->numel, cap);
	for (size_t k = 0; k < t->numel; k++)
		out[k] = mc_get_i(t, k);
	*count = t->numel;
	return 0;
}

int mc_infer_same_as_input0(mc_infer_ctx *c)
{
	for (int k = 0; k < c->n_out; k++)
		mc_set_out(c, k, c->in[0]->dtype, &c->in[0]->shape);
	return 0;
}

const mc_value *mc_opt_in(const mc_infer_ctx *c, int i)
{
	return i < c->n_in ? c->in[i] : NULL;
}

const mc_tensor *mc_opt_tensor(const mc_eval_ctx *c, int i)
{
	return i < c->n_in ? c->in[i] : NULL;
}

mc_tensor *mc_opt_out(const mc_eval_ctx *c, int i)
{
	return i < c->n_out ? c->out[i] : NULL;
}

int mc_count_out(mc_infer_ctx *c)
{
	int at = c->node->op ? c->node->op->max_outputs : -1;
	if (!c->node->op || !(c->node->op->flags & MC_OP_COUNTED) || at >= c->n_out || !c->out[at])
		return -1;
	mc_shape scalar = {0, {0}};
	mc_set_out(c, at, MC_INT64, &scalar);
	return at;
}

void mc_set_counted_out(mc_infer_ctx *c, int k, mc_dtype dt, const mc_shape *bound, int axis, int count)
{
	mc_set_out(c, k, dt, bound);
	mc_count_mark(c->out[k], axis, c->node->outputs[count]);
}

int mc_deliver_padded(mc_eval_ctx *c, int k, mc_tensor *res, int axis)
{
	mc_tensor *o = mc_opt_out(c, k);
	int rc = 0;
	if (o) {
		size_t outer = 1, inner = mc_dtype_size(res->dtype);
		for (int d = 0; d < axis; d++)
			outer *= (size_t)res->shape.dims[d];
		for (int d = axis + 1; d < res->shape.rank; d++)
			inner *= (size_t)res->shape.dims[d];
		size_t have = (size_t)res->shape.dims[axis] * inner, room = (size_t)o->shape.dims[axis] * inner;
		if (o->dtype != res->dtype || o->shape.rank != res->shape.rank || have > room || outer * room != o->nbytes)
			rc = mc_node_error(c->node, "output %d does not match its inferred shape", k);
		for (size_t b = 0; b < outer && !rc; b++) {
			memcpy((char *)o->data + b * room, (const char *)res->data + b * have, have);
			memset((char *)o->data + b * room + have, 0, room - have);
		}
	}
	mc_tensor_free(res);
	return rc;
}

void mc_deliver_count(mc_eval_ctx *c, int64_t n)
{
	int at = c->node->op ? c->node->op->max_outputs : -1;
	mc_tensor *count = at >= 0 && (c->node->op->flags & MC_OP_COUNTED) ? mc_opt_out(c, at) : NULL;
	if (count)
		*(int64_t *)count->data = n;
}

int mc_need_inputs(const mc_infer_ctx *c, const int *idx, int count)
{
	for (int k = 0; k < count; k++)
		if (idx[k] >= c->n_in || !c->in[idx[k]])
			return mc_node_error(c->node, "input %d is required", idx[k]);
	return 0;
}

int mc_attr_ints_fixed(const mc_node *n, const char *name, int count, int64_t dflt, int64_t min,
                       int64_t *out)
{
	const int64_t *v;
	size_t len;
	if (mc_attr_ints(n, name, &v, &len))
		return -1;
	if (v && len != (size_t)count)
		return mc_node_error(n, "attribute '%s' has %zu values, expected %d", name, len, count);
	for (int k = 0; k < count; k++) {
		out[k] = v ? v[k] : dflt;
		if (out[k] < min || out[k] > ((int64_t)1 << 40))
			return mc_node_error(n, "attribute '%s' value %lld is out of range", name,
			                     (long long)out[k]);
	}
	return 0;
}

void *mc_params_new(mc_node *n, size_t size)
{
	free(n->params);
	n->params = mc_xcalloc(1, size);
	return n->params;
}

void *mc_alloc_array(const mc_node *n, size_t count, size_t size)
{
	size_t bytes;
	void *p = NULL;
	if (mc_mul_size(count ? count : 1, size, &bytes))
		p = calloc(1, bytes);
	if (!p)
		mc_node_error(n, "cannot allocate a working array of %zu elements", count);
	return p;
}

size_t mc_bcast_index(size_t i, const mc_shape *target, const int64_t st[MC_MAX_RANK])
{
	size_t idx = 0;
	for (int d = target->rank - 1; d >= 0; d--) {
		size_t dim = (size_t)target->dims[d];
		if (dim == 0) /* an empty dim has only coordinate 0 to offer */
			continue;
		idx += (i % dim) * (size_t)st[d];
		i /= dim;
	}
	return idx;
}
