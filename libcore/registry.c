/* The op registry: one table per op family (libcore/ops/), searched by
 * name and opset. Each entry is the single home of an op's semantics.
 * Internal ops (MC_OP_INTERNAL: what modelc's passes make, like the
 * channels-last NhwcConv) are found only by mc_registry_find_internal, so
 * that a model naming them is refused as using an unknown op. */
#include <stdlib.h>
#include <string.h>

#include "modelc.h"
#include "ops/ops.h"

static const mc_op *const *families[] = {
	mc_ops_elementwise, mc_ops_nn,  mc_ops_tensor, mc_ops_index,
	mc_ops_reduce,      mc_ops_rnn, mc_ops_control, mc_ops_quant,
	mc_ops_extra,       mc_ops_loop, mc_ops_signal,  mc_ops_loss,
	mc_ops_nhwc,        mc_ops_qint,
};

const mc_op *mc_registry_find(const char *op_type, int opset, bool *known_name)
{
	if (known_name)
		*known_name = false;
	for (size_t f = 0; f < sizeof families / sizeof *families; f++)
		for (const mc_op *const *p = families[f]; *p; p++) {
			if (((*p)->flags & MC_OP_INTERNAL) || strcmp((*p)->name, op_type) != 0)
				continue;
			if (known_name)
				*known_name = true;
			if (opset >= (*p)->min_opset && opset <= (*p)->max_opset)
				return *p;
		}
	return NULL;
}

const mc_op *mc_registry_find_internal(const char *op_type)
{
	for (size_t f = 0; f < sizeof families / sizeof *families; f++)
		for (const mc_op *const *p = families[f]; *p; p++)
			if (((*p)->flags & MC_OP_INTERNAL) && !strcmp((*p)->name, op_type))
				return *p;
	return NULL;
}

const mc_op *mc_registry_find_id(mc_opid id, int opset)
{
	const char *name = mc_op_name(id);
	for (size_t f = 0; id != MC_OP_NONE && f < sizeof families / sizeof *families; f++)
		for (const mc_op *const *p = families[f]; *p; p++)
			if (!strcmp((*p)->name, name) && opset >= (*p)->min_opset && opset <= (*p)->max_opset)
				return *p;
	return NULL;
}

bool mc_node_set_op(mc_node *n, mc_opid id, int opset)
{
	free(n->op_type);
	n->op_type = mc_xstrdup(mc_op_name(id));
	n->id = id;
	n->opset = opset;
	n->op = mc_registry_find_id(id, opset);
	return n->op != NULL;
}

const mc_op *const *mc_registry_all(int *count)
{
	static const mc_op *all[1024];
	static int n;
	if (!n)
		for (size_t f = 0; f < sizeof families / sizeof *families; f++)
			for (const mc_op *const *p = families[f]; *p && n < 1024; p++)
				all[n++] = *p;
	*count = n;
	return all;
}
