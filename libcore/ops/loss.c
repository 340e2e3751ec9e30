/* Training losses that also appear in exported inference graphs:
 * NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
 *
 * Both view the scores as N x C x D (D = d1 * ... * dk, 1 for 2-D input)
 * and the labels as N x D. The per-element loss is -weight[c] * x[n][c][d]
 * for c = label[n][d], and 0 where the label equals ignore_index. The mean
 * divides the sum by the total weight of the elements not ignored (their
 * count without a weight input), as the ONNX reference does; when every
 * element is ignored that is 0 / 0, NaN. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loss.h"
#include "ops.h"

static int loss_parse(mc_node *n)
{
	const char *reduction;
	int64_t ignore_index;
	if (mc_attr_string(n, "reduction", "mean", &reduction) ||
	    mc_attr_int(n, "ignore_index", 0, &ignore_index))
		return -1;
	loss_params *p = mc_params_new(n, sizeof *p);
	if (strcmp(reduction, "none") == 0)
		p->reduction = REDUCE_NONE;
	else if (strcmp(reduction, "sum") == 0)
		p->reduction = REDUCE_SUM;
	else if (strcmp(reduction, "mean") == 0)
		p->reduction = REDUCE_MEAN;
	else
		return mc_node_error(n, "reduction '%s' is not one of none, sum, mean", reduction);
	p->has_ignore = mc_attr_find(n, "ignore_index") != NULL;
	p->ignore_index = ignore_index;
	return 0;
}

/* Checks scores (N, C, d1..dk), labels (N, d1..dk) and the optional
 * weight (C), then types output 0: the labels' shape, or a scalar. */
static int loss_infer_common(mc_infer_ctx *c, const char *scores_name, const char *labels_name)
{
	const mc_node *n = c->node;
	const loss_params *p = n->params;
	const mc_value *x = c->in[0], *labels = c->in[1];
	const mc_value *weight = c->n_in > 2 ? c->in[2] : NULL;
	char xs[256], ls[256];
	if (!mc_dtype_is_float(x->dtype))
		return mc_node_error(n, "%s has dtype %s; a floating-point tensor is expected",
		                     scores_name, mc_dtype_name(x->dtype));
	if (labels->dtype != MC_INT32 && labels->dtype != MC_INT64)
		return mc_node_error(n, "%s has dtype %s; int32 or int64 is expected", labels_name,
		                     mc_dtype_name(labels->dtype));
	if (x->shape.rank < 2)
		return mc_node_error(n, "%s must have shape (N, C) or (N, C, d1, ..., dk), got %s",
		                     scores_name, mc_shape_str(&x->shape, xs, sizeof xs));
	bool fits = labels->shape.rank == x->shape.rank - 1 && labels->shape.dims[0] == x->shape.dims[0];
	for (int d = 1; fits && d < labels->shape.rank; d++)
		fits = labels->shape.dims[d] == x->shape.dims[d + 1];
	if (!fits)
		return mc_node_error(n, "%s has shape %s, which does not fit %s of shape %s "
		                     "(expected its shape without dimension 1)", labels_name,
		                     mc_shape_str(&labels->shape, ls, sizeof ls), scores_name,
		                     mc_shape_str(&x->shape, xs, sizeof xs));
	if (weight && (weight->dtype != x->dtype || weight->shape.rank != 1 ||
	               weight->shape.dims[0] != x->shape.dims[1]))
		return mc_node_error(n, "weight must be a 1-D %s tensor of %lld elements (one per "
		                     "class), got %s %s", mc_dtype_name(x->dtype),
		                     (long long)x->shape.dims[1], mc_dtype_name(weight->dtype),
		                     mc_shape_str(&weight->shape, ls, sizeof ls));
	mc_shape scalar = {.rank = 0};
	mc_set_out(c, 0, x->dtype, p->reduction == REDUCE_NONE ? &labels->shape : &scalar);
	return 0;
}

/* The tensor's values as doubles; sized by the model, so a failed
 * allocation is reported rather than fatal. */
static double *to_doubles(const mc_node *n, const mc_tensor *t)
{
	double *v = mc_alloc_array(n, t->numel, sizeof *v);
	for (size_t i = 0; v && i < t->numel; i++)
		v[i] = mc_get_f(t, i);
	return v;
}

/* The loss from log-probabilities logp (N x C x D, doubles) into y. */
static int nll_compute(const mc_node *n, const double *logp, const mc_shape *xs,
                       const mc_tensor *labels, const mc_tensor *weight, mc_tensor *y)
{
	const loss_params *p = n->params;
	size_t batch = (size_t)xs->dims[0], classes = (size_t)xs->dims[1], inner = 1;
	for (int d = 2; d < xs->rank; d++)
		inner *= (size_t)xs->dims[d];
	double sum = 0, weight_sum = 0;
	for (size_t b = 0; b < batch; b++)
		for (size_t i = 0; i < inner; i++) {
			size_t at = b * inner + i;
			int64_t label = mc_get_i(labels, at);
			double loss = 0, w = 0;
			if (!p->has_ignore || label != p->ignore_index) {
				if (label < 0 || (uint64_t)label >= classes)
					return mc_node_error(n, "label %lld at position %zu is outside [0, %zu)%s",
					                     (long long)label, at, classes,
					                     p->has_ignore ? " and is not ignore_index" : "");
				w = weight ? mc_get_f(weight, (size_t)label) : 1.0;
				loss = -w * logp[(b * classes + (size_t)label) * inner + i];
			}
			if (p->reduction == REDUCE_NONE)
				mc_set_f(y, at, loss);
			sum += loss;
			weight_sum += w;
		}
	if (p->reduction == REDUCE_SUM)
		mc_set_f(y, 0, sum);
	else if (p->reduction == REDUCE_MEAN)
		mc_set_f(y, 0, sum / weight_sum);
	return 0;
}

/* ==== NegativeLogLikelihoodLoss ==== */

static int nll_infer(mc_infer_ctx *c)
{
	return loss_infer_common(c, "input", "target");
}

static int nll_eval(mc_eval_ctx *c)
{
	const mc_tensor *x = c->in[0], *weight = c->n_in > 2 ? c->in[2] : NULL;
	double *logp = to_doubles(c->node, x);
	if (!logp)
		return -1;
	int rc = nll_compute(c->node, logp, &x->shape, c->in[1], weight, c->out[0]);
	free(logp);
	return rc;
}

static const mc_op op_nll = {
	.name = "NegativeLogLikelihoodLoss", .min_opset = 12, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
	.parse = loss_parse, .infer = nll_infer, .eval = nll_eval,
};

/* ==== SoftmaxCrossEntropyLoss ==== */

static int sce_infer(mc_infer_ctx *c)
{
	if (loss_infer_common(c, "scores", "labels"))
		return -1;
	/* log_prob, when asked for, has the scores' type and shape */
	mc_set_out(c, 1, c->in[0]->dtype, &c->in[0]->shape);
	return 0;
}

/* Log-softmax over dimension 1 of x (N x C x D), in place on doubles. */
static void log_softmax_classes(double *v, size_t batch, size_t classes, size_t inner)
{
	for (size_t b = 0; b < batch; b++)
		for (size_t i = 0; i < inner; i++) {
			double *base = v + b * classes * inner + i;
			double max = -INFINITY, sum = 0;
			for (size_t k = 0; k < classes; k++)
				max = fmax(max, base[k * inner]);
			for (size_t k = 0; k < classes; k++)
				sum += exp(base[k * inner] - max);
			double log_sum = log(sum);
			for (size_t k = 0; k < classes; k++)
				base[k * inner] = base[k * inner] - max - log_sum;
		}
}

static int sce_eval(mc_eval_ctx *c)
{
	const mc_tensor *x = c->in[0], *weight = c->n_in > 2 ? c->in[2] : NULL;
	mc_tensor *log_prob = c->n_out > 1 ? c->out[1] : NULL;
	size_t batch = (size_t)x->shape.dims[0], classes = (size_t)x->shape.dims[1], inner = 1;
	for (int d = 2; d < x->shape.rank; d++)
		inner *= (size_t)x->shape.dims[d];
	double *logp = to_doubles(c->node, x);
	if (!logp)
		return -1;
	log_softmax_classes(logp, batch, classes, inner);
	if (log_prob)
		mc_tensor_from_double(log_prob, logp);
	int rc = nll_compute(c->node, logp, &x->shape, c->in[1], weight, c->out[0]);
	free(logp);
	return rc;
}

static const mc_op op_sce = {
	.name = "SoftmaxCrossEntropyLoss", .min_opset = 12, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 2,
	.parse = loss_parse, .infer = sce_infer, .eval = sce_eval,
};

const mc_op *const mc_ops_loss[] = {
	&op_nll,
	&op_sce,
	NULL,
};
