/* Control flow: If. A condition known at compile time selects one branch
 * during inference; otherwise both branches must agree on output types. */
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
	if (pick != 0 && mc_infer_graph(tg))
		return -1;
	if (pick != 1 && mc_infer_graph(eg))
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

static const mc_op op_if = {
	.name = "If", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 64,
	.parse = if_parse, .infer = if_infer, .eval = if_eval, .flags = MC_OP_SUBGRAPH,
};

const mc_op *const mc_ops_control[] = {
	&op_if,
	NULL,
};
