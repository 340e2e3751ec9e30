/* Loss ops (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss), called
 * straight through the registry on small inputs with known answers. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelc.h"

#define MAXIO 8

static char last_error[1024];

static void capture(const char *line, void *user)
{
	(void)user;
	snprintf(last_error, sizeof last_error, "%s", line);
}

static mc_tensor *tensor(mc_dtype t, int rank, const int64_t *dims, const double *values)
{
	mc_shape s = {.rank = rank};
	for (int d = 0; d < rank; d++)
		s.dims[d] = dims[d];
	mc_tensor *x = mc_tensor_new(t, &s);
	cr_assert_not_null(x);
	for (size_t i = 0; values && i < x->numel; i++)
		mc_set_f(x, i, values[i]);
	return x;
}


static mc_attr attr_int(const char *name, int64_t v)
{
	mc_attr a = {.name = (char *)name, .type = MC_ATTR_INT, .i = v};
	return a;
}

typedef struct {
	const char *op;
	int opset;
	mc_attr *attrs;
	int n_attrs;
	unsigned runtime_inputs; /* bit k: input k is not known at compile time */
} op_call;

/* Runs one node through the registry: parse, infer (inputs constant unless
 * marked runtime), then eval into freshly allocated outputs. 0 on success;
 * outputs left NULL on failure. */
static int run_op(const op_call *call, mc_tensor **in, int n_in, mc_tensor **out, int n_out)
{
	bool known;
	const mc_op *op = mc_registry_find(call->op, call->opset, &known);
	cr_assert_not_null(op, "%s opset %d is not registered", call->op, call->opset);
	int inputs[MAXIO], outputs[MAXIO];
	for (int k = 0; k < n_in; k++)
		inputs[k] = in[k] ? k : -1;
	for (int k = 0; k < n_out; k++)
		outputs[k] = k;
	mc_node n = {.name = (char *)"t", .op_type = (char *)call->op, .domain = (char *)"",
	             .opset = call->opset, .op = op, .n_inputs = n_in, .n_outputs = n_out,
	             .inputs = inputs, .outputs = outputs, .n_attrs = call->n_attrs,
	             .attrs = call->attrs};
	mc_value vin[MAXIO], vout[MAXIO];
	const mc_value *pin[MAXIO];
	mc_value *pout[MAXIO];
	memset(vin, 0, sizeof vin);
	memset(vout, 0, sizeof vout);
	for (int k = 0; k < n_in; k++) {
		pin[k] = NULL;
		if (!in[k])
			continue;
		vin[k] = (mc_value){.name = (char *)"in", .dtype = in[k]->dtype, .shape = in[k]->shape,
		                    .typed = true,
		                    .konst = (call->runtime_inputs >> k) & 1 ? NULL : in[k]};
		pin[k] = &vin[k];
	}
	for (int k = 0; k < n_out; k++) {
		vout[k].name = (char *)"out";
		pout[k] = &vout[k];
		out[k] = NULL;
	}
	mc_set_diag_sink(capture, NULL);
	last_error[0] = 0;
	int rc = op->parse ? op->parse(&n) : 0;
	mc_infer_ctx ic = {.node = &n, .n_in = n_in, .n_out = n_out, .in = pin, .out = pout};
	if (!rc)
		rc = op->infer(&ic);
	for (int k = 0; !rc && k < n_out; k++) {
		cr_assert(vout[k].typed, "output %d not typed", k);
		out[k] = mc_tensor_new(vout[k].dtype, &vout[k].shape);
		cr_assert_not_null(out[k]);
	}
	mc_eval_ctx ec = {.node = &n, .n_in = n_in, .n_out = n_out,
	                  .in = (const mc_tensor *const *)in, .out = out};
	if (!rc)
		rc = op->eval(&ec);
	free(n.params);
	mc_set_diag_sink(NULL, NULL);
	return rc;
}

static void expect_shape(const mc_tensor *t, int rank, const int64_t *dims)
{
	cr_assert_eq(t->shape.rank, rank, "rank %d, expected %d", t->shape.rank, rank);
	for (int d = 0; d < rank; d++)
		cr_assert_eq(t->shape.dims[d], dims[d], "dim %d is %lld, expected %lld", d,
		             (long long)t->shape.dims[d], (long long)dims[d]);
}

static void expect_values(const mc_tensor *t, const double *want, size_t n, double tol)
{
	cr_assert_eq(t->numel, n, "got %zu elements, expected %zu", t->numel, n);
	for (size_t i = 0; i < n; i++) {
		double got = mc_get_f(t, i);
		cr_assert(fabs(got - want[i]) <= tol, "element %zu: got %.9g, expected %.9g", i, got,
		          want[i]);
	}
}

static void free_all(mc_tensor **t, int n)
{
	for (int k = 0; k < n; k++)
		mc_tensor_free(t[k]);
}

static mc_attr attr_string(const char *name, const char *v)
{
	mc_attr a = {.name = (char *)name, .type = MC_ATTR_STRING, .s = (char *)v};
	return a;
}

/* scores N=2, C=3, D=2 and their log-softmax over classes (numpy) */
static const double scores[12] = {0.5, 1.0, 2.0, -1.0, 0.0, 0.25,
                                  1.0, 1.0, 0.0, 3.0, -2.0, 0.5};
static const double log_probs[12] = {-1.80635571, -0.47480573, -0.30635571, -2.47480573,
                                     -2.30635571, -1.22480573, -0.34901222, -2.1967341,
                                     -1.34901222, -0.1967341, -3.34901222, -2.6967341};

/* ---- NegativeLogLikelihoodLoss ---- */

Test(loss, nll_none_picks_minus_the_label_entry)
{
	mc_attr attrs[] = {attr_string("reduction", "none")};
	op_call call = {"NegativeLogLikelihoodLoss", 13, attrs, 1, 0};
	mc_tensor *in[2] = {tensor(MC_FLOAT, 2, (int64_t[]){3, 2}, (double[]){1, 2, 3, 4, 5, 6}),
	                    tensor(MC_INT64, 1, (int64_t[]){3}, (double[]){1, 0, 1})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 2, out, 1), 0, "%s", last_error);
	expect_shape(out[0], 1, (int64_t[]){3});
	expect_values(out[0], (double[]){-2, -3, -6}, 3, 0);
	free_all(in, 2);
	free_all(out, 1);
}

Test(loss, nll_weighted_mean_skips_ignore_index)
{
	/* labels (N=2, D=2) = [[2, 0], [1, -1]], -1 ignored; weights 0.5, 2, 1:
	 * sum = -(1 * 0.0) - (0.5 * 1.0) - (2 * 0.0) = -0.5, total weight 3.5 */
	mc_attr attrs[] = {attr_int("ignore_index", -1)};
	op_call call = {"NegativeLogLikelihoodLoss", 22, attrs, 1, 0};
	mc_tensor *in[3] = {tensor(MC_DOUBLE, 3, (int64_t[]){2, 3, 2}, scores),
	                    tensor(MC_INT32, 2, (int64_t[]){2, 2}, (double[]){2, 0, 1, -1}),
	                    tensor(MC_DOUBLE, 1, (int64_t[]){3}, (double[]){0.5, 2, 1})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 3, out, 1), 0, "%s", last_error);
	expect_shape(out[0], 0, NULL);
	expect_values(out[0], (double[]){-0.5 / 3.5}, 1, 1e-12);
	free_all(in, 3);
	free_all(out, 1);
}

Test(loss, nll_sum_without_weight)
{
	mc_attr attrs[] = {attr_string("reduction", "sum")};
	op_call call = {"NegativeLogLikelihoodLoss", 12, attrs, 1, 0};
	mc_tensor *in[2] = {tensor(MC_FLOAT, 3, (int64_t[]){2, 3, 2}, scores),
	                    tensor(MC_INT64, 2, (int64_t[]){2, 2}, (double[]){2, 0, 1, 1})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 2, out, 1), 0, "%s", last_error);
	expect_values(out[0], (double[]){-(0.0 + 1.0 + 0.0 + 3.0)}, 1, 1e-6);
	free_all(in, 2);
	free_all(out, 1);
}

Test(loss, nll_label_out_of_range_is_an_error)
{
	op_call call = {"NegativeLogLikelihoodLoss", 13, NULL, 0, 0};
	mc_tensor *in[2] = {tensor(MC_FLOAT, 2, (int64_t[]){2, 3}, NULL),
	                    tensor(MC_INT64, 1, (int64_t[]){2}, (double[]){0, 3})};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&call, in, 2, out, 1), 0);
	cr_assert(strstr(last_error, "label 3"), "message: %s", last_error);
	free_all(in, 2);
	free_all(out, 1);
}

Test(loss, nll_rejects_labels_of_the_wrong_shape)
{
	op_call call = {"NegativeLogLikelihoodLoss", 13, NULL, 0, 0};
	mc_tensor *in[2] = {tensor(MC_FLOAT, 3, (int64_t[]){2, 3, 4}, NULL),
	                    tensor(MC_INT64, 2, (int64_t[]){2, 3}, NULL)};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&call, in, 2, out, 1), 0);
	cr_assert(strstr(last_error, "does not fit"), "message: %s", last_error);
	free_all(in, 2);
}

Test(loss, unknown_reduction_is_rejected)
{
	mc_attr attrs[] = {attr_string("reduction", "max")};
	op_call call = {"NegativeLogLikelihoodLoss", 13, attrs, 1, 0};
	mc_tensor *in[2] = {tensor(MC_FLOAT, 2, (int64_t[]){2, 3}, NULL),
	                    tensor(MC_INT64, 1, (int64_t[]){2}, NULL)};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&call, in, 2, out, 1), 0);
	cr_assert(strstr(last_error, "'max'"), "message: %s", last_error);
	free_all(in, 2);
}

/* ---- SoftmaxCrossEntropyLoss ---- */

Test(loss, sce_none_with_weight_and_log_prob)
{
	mc_attr attrs[] = {attr_string("reduction", "none")};
	op_call call = {"SoftmaxCrossEntropyLoss", 13, attrs, 1, 0};
	mc_tensor *in[3] = {tensor(MC_DOUBLE, 3, (int64_t[]){2, 3, 2}, scores),
	                    tensor(MC_INT64, 2, (int64_t[]){2, 2}, (double[]){2, 0, 1, 1}),
	                    tensor(MC_DOUBLE, 1, (int64_t[]){3}, (double[]){0.5, 2, 1})};
	mc_tensor *out[2];
	cr_assert_eq(run_op(&call, in, 3, out, 2), 0, "%s", last_error);
	expect_shape(out[0], 2, (int64_t[]){2, 2});
	expect_values(out[0], (double[]){2.30635571, 0.23740286, 2.69802443, 0.39346819}, 4,
	              1e-7);
	expect_shape(out[1], 3, (int64_t[]){2, 3, 2});
	expect_values(out[1], log_probs, 12, 1e-7);
	free_all(in, 3);
	free_all(out, 2);
}

Test(loss, sce_mean_with_ignore_index)
{
	/* ignoring label 1 leaves two losses, 2.30635571 and 0.47480573, of
	 * weight 1 each (no weight input): the mean is over those two */
	mc_attr attrs[] = {attr_int("ignore_index", 1)};
	op_call call = {"SoftmaxCrossEntropyLoss", 12, attrs, 1, 0};
	mc_tensor *in[2] = {tensor(MC_FLOAT, 3, (int64_t[]){2, 3, 2}, scores),
	                    tensor(MC_INT64, 2, (int64_t[]){2, 2}, (double[]){2, 0, 1, 1})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 2, out, 1), 0, "%s", last_error);
	expect_values(out[0], (double[]){(2.30635571 + 0.47480573) / 2}, 1, 1e-6);
	free_all(in, 2);
	free_all(out, 1);
}
