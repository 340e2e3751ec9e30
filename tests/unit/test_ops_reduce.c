/* Reductions and normalisations, called straight through the registry:
 * parse, infer, eval on small tensors with known answers. */
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

static mc_shape shape(int rank, const int64_t *dims)
{
	mc_shape s = {.rank = rank};
	for (int d = 0; d < rank; d++)
		s.dims[d] = dims[d];
	return s;
}

static mc_tensor *tensor(mc_dtype t, int rank, const int64_t *dims, const double *values)
{
	mc_shape s = shape(rank, dims);
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

static mc_attr attr_float(const char *name, double v)
{
	mc_attr a = {.name = (char *)name, .type = MC_ATTR_FLOAT, .f = v};
	return a;
}

static mc_attr attr_ints(const char *name, int64_t *v, size_t n)
{
	mc_attr a = {.name = (char *)name, .type = MC_ATTR_INTS, .ints = v, .n = n};
	return a;
}

typedef struct {
	const char *op;
	int opset;
	mc_attr *attrs;
	int n_attrs;
	unsigned runtime_inputs; /* bit k: input k is not known at compile time */
} op_call;

/* Runs one node: parse, infer (inputs constant unless marked runtime),
 * then eval into freshly allocated outputs. 0 on success. */
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

static void expect_values(const mc_tensor *t, const double *want, size_t n, double tol)
{
	cr_assert_eq(t->numel, n, "got %zu elements, expected %zu", t->numel, n);
	for (size_t i = 0; i < n; i++) {
		double got = mc_get_f(t, i);
		if (isinf(want[i]))
			cr_assert(got == want[i], "element %zu: got %g, expected %g", i, got, want[i]);
		else
			cr_assert(fabs(got - want[i]) <= tol, "element %zu: got %.9g, expected %.9g", i,
			          got, want[i]);
	}
}

static void free_all(mc_tensor **t, int n)
{
	for (int k = 0; k < n; k++)
		mc_tensor_free(t[k]);
}

/* ---- Reduce* ---- */

Test(reduce, sum_axes_attribute_old_opset)
{
	int64_t axes[] = {1};
	mc_attr attrs[] = {attr_ints("axes", axes, 1), attr_int("keepdims", 0)};
	op_call call = {"ReduceSum", 11, attrs, 2, 0};
	mc_tensor *in[1] = {tensor(MC_FLOAT, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 1, out, 1), 0, "%s", last_error);
	cr_assert_eq(out[0]->shape.rank, 1);
	expect_values(out[0], (double[]){6, 15}, 2, 1e-6);
	free_all(in, 1);
	free_all(out, 1);
}

Test(reduce, mean_axes_input_keepdims)
{
	op_call call = {"ReduceMean", 18, NULL, 0, 0};
	mc_tensor *in[2] = {tensor(MC_FLOAT, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6}),
	                    tensor(MC_INT64, 1, (int64_t[]){1}, (double[]){-2})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 2, out, 1), 0, "%s", last_error);
	cr_assert_eq(out[0]->shape.rank, 2);
	cr_assert_eq(out[0]->shape.dims[0], 1);
	cr_assert_eq(out[0]->shape.dims[1], 3);
	expect_values(out[0], (double[]){2.5, 3.5, 4.5}, 3, 1e-6);
	free_all(in, 2);
	free_all(out, 1);
}

Test(reduce, max_of_empty_set_is_minus_inf)
{
	op_call call = {"ReduceMax", 20, NULL, 0, 0};
	mc_tensor *in[2] = {tensor(MC_FLOAT, 2, (int64_t[]){2, 0}, NULL),
	                    tensor(MC_INT64, 1, (int64_t[]){1}, (double[]){1})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 2, out, 1), 0, "%s", last_error);
	expect_values(out[0], (double[]){-INFINITY, -INFINITY}, 2, 0);
	free_all(in, 2);
	free_all(out, 1);
}

Test(reduce, noop_with_empty_axes_keeps_elementwise_part)
{
	mc_attr attrs[] = {attr_int("noop_with_empty_axes", 1)};
	op_call call = {"ReduceSumSquare", 18, attrs, 1, 0};
	mc_tensor *in[2] = {tensor(MC_FLOAT, 1, (int64_t[]){3}, (double[]){1, -2, 3}),
	                    tensor(MC_INT64, 1, (int64_t[]){0}, NULL)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 2, out, 1), 0, "%s", last_error);
	expect_values(out[0], (double[]){1, 4, 9}, 3, 0);
	free_all(in, 2);
	free_all(out, 1);
}

Test(reduce, int64_sum_is_exact)
{
	/* 2^53 + 1 is not a double: an integer path must keep it */
	op_call call = {"ReduceSum", 13, NULL, 0, 0};
	mc_shape s = {.rank = 1, .dims = {2}};
	mc_tensor *in[1] = {mc_tensor_new(MC_INT64, &s)};
	mc_set_i(in[0], 0, INT64_C(9007199254740992));
	mc_set_i(in[0], 1, 1);
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 1, out, 1), 0, "%s", last_error);
	cr_assert_eq(mc_get_i(out[0], 0), INT64_C(9007199254740993));
	free_all(in, 1);
	free_all(out, 1);
}

Test(reduce, log_sum_exp_does_not_overflow)
{
	op_call call = {"ReduceLogSumExp", 13, NULL, 0, 0};
	mc_tensor *in[1] = {tensor(MC_FLOAT, 1, (int64_t[]){2}, (double[]){1000, 1000})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 1, out, 1), 0, "%s", last_error);
	expect_values(out[0], (double[]){1000 + log(2.0)}, 1, 1e-3);
	free_all(in, 1);
	free_all(out, 1);
}

Test(reduce, log_sum_exp_infinities)
{
	int64_t axes[] = {1};
	mc_attr attrs[] = {attr_ints("axes", axes, 1), attr_int("keepdims", 0)};
	op_call call = {"ReduceLogSumExp", 13, attrs, 2, 0};
	mc_tensor *in[1] = {tensor(MC_FLOAT, 2, (int64_t[]){2, 2},
	                           (double[]){-INFINITY, -INFINITY, INFINITY, 1})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 1, out, 1), 0, "%s", last_error);
	expect_values(out[0], (double[]){-INFINITY, INFINITY}, 2, 0);
	free_all(in, 1);
	free_all(out, 1);
}

Test(reduce, axes_input_must_be_constant)
{
	op_call call = {"ReduceMean", 18, NULL, 0, 1u << 1};
	mc_tensor *in[2] = {tensor(MC_FLOAT, 1, (int64_t[]){3}, NULL),
	                    tensor(MC_INT64, 1, (int64_t[]){1}, (double[]){0})};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&call, in, 2, out, 1), 0);
	cr_assert(strstr(last_error, "compile time"), "message: %s", last_error);
	cr_assert(strstr(last_error, "ReduceMean"), "message: %s", last_error);
	free_all(in, 2);
}

Test(reduce, duplicate_axes_rejected)
{
	int64_t axes[] = {0, -2};
	mc_attr attrs[] = {attr_ints("axes", axes, 2)};
	op_call call = {"ReduceProd", 1, attrs, 1, 0};
	mc_tensor *in[1] = {tensor(MC_FLOAT, 2, (int64_t[]){2, 2}, NULL)};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&call, in, 1, out, 1), 0);
	cr_assert(strstr(last_error, "twice"), "message: %s", last_error);
	free_all(in, 1);
}

/* ---- ArgMax, softmax family, CumSum, TopK ---- */

Test(argmax, select_last_index)
{
	mc_attr attrs[] = {attr_int("select_last_index", 1), attr_int("keepdims", 0)};
	op_call last = {"ArgMax", 13, attrs, 2, 0}, first = {"ArgMax", 13, attrs + 1, 1, 0};
	mc_tensor *in[1] = {tensor(MC_FLOAT, 1, (int64_t[]){4}, (double[]){1, 3, 3, 2})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&last, in, 1, out, 1), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_INT64);
	cr_assert_eq(mc_get_i(out[0], 0), 2);
	free_all(out, 1);
	cr_assert_eq(run_op(&first, in, 1, out, 1), 0, "%s", last_error);
	cr_assert_eq(mc_get_i(out[0], 0), 1);
	free_all(out, 1);
	free_all(in, 1);
}

Test(softmax, old_opset_coerces_to_2d)
{
	/* opset 11, axis 1 on 1x2x2: one softmax over all four values */
	op_call old = {"Softmax", 11, NULL, 0, 0}, cur = {"Softmax", 13, NULL, 0, 0};
	mc_tensor *in[1] = {tensor(MC_FLOAT, 3, (int64_t[]){1, 2, 2}, (double[]){0, 0, 0, 0})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&old, in, 1, out, 1), 0, "%s", last_error);
	expect_values(out[0], (double[]){0.25, 0.25, 0.25, 0.25}, 4, 1e-7);
	free_all(out, 1);
	cr_assert_eq(run_op(&cur, in, 1, out, 1), 0, "%s", last_error);
	expect_values(out[0], (double[]){0.5, 0.5, 0.5, 0.5}, 4, 1e-7);
	free_all(out, 1);
	free_all(in, 1);
}

Test(softmax, log_softmax_large_values)
{
	op_call call = {"LogSoftmax", 13, NULL, 0, 0};
	mc_tensor *in[1] = {tensor(MC_FLOAT, 1, (int64_t[]){2}, (double[]){10000, 10000})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 1, out, 1), 0, "%s", last_error);
	expect_values(out[0], (double[]){-log(2.0), -log(2.0)}, 2, 1e-6);
	free_all(in, 1);
	free_all(out, 1);
}

Test(softmax, hardmax_first_maximum_wins)
{
	op_call call = {"Hardmax", 13, NULL, 0, 0};
	mc_tensor *in[1] = {tensor(MC_FLOAT, 2, (int64_t[]){2, 3}, (double[]){1, 5, 5, 7, 2, 7})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 1, out, 1), 0, "%s", last_error);
	expect_values(out[0], (double[]){0, 1, 0, 1, 0, 0}, 6, 0);
	free_all(in, 1);
	free_all(out, 1);
}

Test(cumsum, exclusive_reverse)
{
	mc_attr attrs[] = {attr_int("exclusive", 1), attr_int("reverse", 1)};
	op_call call = {"CumSum", 14, attrs, 2, 0};
	mc_tensor *in[2] = {tensor(MC_INT32, 1, (int64_t[]){4}, (double[]){1, 2, 3, 4}),
	                    tensor(MC_INT64, 0, NULL, (double[]){0})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 2, out, 1), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_INT32);
	expect_values(out[0], (double[]){9, 7, 4, 0}, 4, 0);
	free_all(in, 2);
	free_all(out, 1);
}

Test(topk, ties_keep_lower_index)
{
	op_call call = {"TopK", 11, NULL, 0, 0};
	mc_tensor *in[2] = {tensor(MC_FLOAT, 1, (int64_t[]){5}, (double[]){1, 3, 2, 3, 0}),
	                    tensor(MC_INT64, 1, (int64_t[]){1}, (double[]){3})};
	mc_tensor *out[2];
	cr_assert_eq(run_op(&call, in, 2, out, 2), 0, "%s", last_error);
	expect_values(out[0], (double[]){3, 3, 2}, 3, 0);
	expect_values(out[1], (double[]){1, 3, 2}, 3, 0);
	free_all(out, 2);
	mc_attr smallest[] = {attr_int("largest", 0)};
	call.attrs = smallest;
	call.n_attrs = 1;
	cr_assert_eq(run_op(&call, in, 2, out, 2), 0, "%s", last_error);
	expect_values(out[0], (double[]){0, 1, 2}, 3, 0);
	expect_values(out[1], (double[]){4, 0, 2}, 3, 0);
	free_all(out, 2);
	free_all(in, 2);
}

Test(topk, k_larger_than_axis_rejected)
{
	op_call call = {"TopK", 11, NULL, 0, 0};
	mc_tensor *in[2] = {tensor(MC_FLOAT, 1, (int64_t[]){2}, NULL),
	                    tensor(MC_INT64, 1, (int64_t[]){1}, (double[]){3})};
	mc_tensor *out[2];
	cr_assert_neq(run_op(&call, in, 2, out, 2), 0);
	cr_assert(strstr(last_error, "k = 3"), "message: %s", last_error);
	free_all(in, 2);
}

/* ---- normalisations ---- */

Test(norm, batchnorm_inference)
{
	mc_attr attrs[] = {attr_float("epsilon", 0)};
	op_call call = {"BatchNormalization", 15, attrs, 1, 0};
	/* N=1, C=2, 2 values per channel */
	mc_tensor *in[5] = {tensor(MC_FLOAT, 3, (int64_t[]){1, 2, 2}, (double[]){1, 3, 10, 20}),
	                    tensor(MC_FLOAT, 1, (int64_t[]){2}, (double[]){2, 1}),
	                    tensor(MC_FLOAT, 1, (int64_t[]){2}, (double[]){0, 5}),
	                    tensor(MC_FLOAT, 1, (int64_t[]){2}, (double[]){1, 10}),
	                    tensor(MC_FLOAT, 1, (int64_t[]){2}, (double[]){4, 25})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 5, out, 1), 0, "%s", last_error);
	expect_values(out[0], (double[]){0, 2, 5, 7}, 4, 1e-6);
	free_all(in, 5);
	free_all(out, 1);
}

Test(norm, batchnorm_training_outputs)
{
	mc_attr attrs[] = {attr_int("training_mode", 1), attr_float("epsilon", 0),
	                   attr_float("momentum", 0.5)};
	op_call call = {"BatchNormalization", 15, attrs, 3, 0};
	mc_tensor *in[5] = {tensor(MC_FLOAT, 2, (int64_t[]){2, 1}, (double[]){1, 3}),
	                    tensor(MC_FLOAT, 1, (int64_t[]){1}, (double[]){1}),
	                    tensor(MC_FLOAT, 1, (int64_t[]){1}, (double[]){0}),
	                    tensor(MC_FLOAT, 1, (int64_t[]){1}, (double[]){0}),
	                    tensor(MC_FLOAT, 1, (int64_t[]){1}, (double[]){1})};
	mc_tensor *out[3];
	cr_assert_eq(run_op(&call, in, 5, out, 3), 0, "%s", last_error);
	expect_values(out[0], (double[]){-1, 1}, 2, 1e-6); /* batch mean 2, variance 1 */
	expect_values(out[1], (double[]){1}, 1, 1e-6);     /* 0 * 0.5 + 2 * 0.5 */
	expect_values(out[2], (double[]){1}, 1, 1e-6);     /* 1 * 0.5 + 1 * 0.5 */
	free_all(in, 5);
	free_all(out, 3);
}

Test(norm, layernorm_statistics_outputs)
{
	mc_attr attrs[] = {attr_float("epsilon", 0)};
	op_call call = {"LayerNormalization", 17, attrs, 1, 0};
	mc_tensor *in[3] = {tensor(MC_FLOAT, 2, (int64_t[]){2, 2}, (double[]){1, 3, 0, 4}),
	                    tensor(MC_FLOAT, 1, (int64_t[]){2}, (double[]){1, 2}), NULL};
	mc_tensor *out[3];
	cr_assert_eq(run_op(&call, in, 3, out, 3), 0, "%s", last_error);
	expect_values(out[0], (double[]){-1, 2, -1, 2}, 4, 1e-6);
	cr_assert_eq(out[1]->shape.rank, 2);
	cr_assert_eq(out[1]->shape.dims[1], 1);
	expect_values(out[1], (double[]){2, 2}, 2, 1e-6);
	expect_values(out[2], (double[]){1, 0.5}, 2, 1e-6);
	free_all(in, 3);
	free_all(out, 3);
}

Test(norm, groupnorm_scale_per_group_then_per_channel)
{
	mc_attr attrs[] = {attr_int("num_groups", 1), attr_float("epsilon", 0)};
	mc_tensor *x = tensor(MC_FLOAT, 3, (int64_t[]){1, 2, 1}, (double[]){1, 3});
	/* opset 18: one scale per group */
	op_call v18 = {"GroupNormalization", 18, attrs, 2, 0};
	mc_tensor *in18[3] = {x, tensor(MC_FLOAT, 1, (int64_t[]){1}, (double[]){2}),
	                      tensor(MC_FLOAT, 1, (int64_t[]){1}, (double[]){1})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&v18, in18, 3, out, 1), 0, "%s", last_error);
	expect_values(out[0], (double[]){-1, 3}, 2, 1e-6);
	free_all(out, 1);
	/* opset 21: one scale per channel */
	op_call v21 = {"GroupNormalization", 21, attrs, 2, 0};
	mc_tensor *in21[3] = {x, tensor(MC_FLOAT, 1, (int64_t[]){2}, (double[]){2, 3}),
	                      tensor(MC_FLOAT, 1, (int64_t[]){2}, (double[]){0, 1})};
	cr_assert_eq(run_op(&v21, in21, 3, out, 1), 0, "%s", last_error);
	expect_values(out[0], (double[]){-2, 4}, 2, 1e-6);
	free_all(out, 1);
	cr_assert_neq(run_op(&v18, in21, 3, out, 1), 0); /* per-channel scale at opset 18 */
	free_all(in18, 3);
	free_all(in21 + 1, 2);
}

Test(norm, lp_normalization_zero_row_stays_zero)
{
	mc_attr attrs[] = {attr_int("p", 1)};
	op_call call = {"LpNormalization", 1, attrs, 1, 0};
	mc_tensor *in[1] = {tensor(MC_FLOAT, 2, (int64_t[]){2, 2}, (double[]){1, -3, 0, 0})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 1, out, 1), 0, "%s", last_error);
	expect_values(out[0], (double[]){0.25, -0.75, 0, 0}, 4, 1e-7);
	free_all(in, 1);
	free_all(out, 1);
}

Test(norm, lrn_window_over_channels)
{
	mc_attr attrs[] = {attr_int("size", 3), attr_float("alpha", 3), attr_float("beta", 1),
	                   attr_float("bias", 1)};
	op_call call = {"LRN", 13, attrs, 4, 0};
	mc_tensor *in[1] = {tensor(MC_FLOAT, 2, (int64_t[]){1, 3}, (double[]){1, 2, 3})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 1, out, 1), 0, "%s", last_error);
	/* squares summed over the window: 1+4, 1+4+9, 4+9; alpha/size = 1 */
	expect_values(out[0], (double[]){1.0 / 6, 2.0 / 15, 3.0 / 14}, 3, 1e-7);
	free_all(in, 1);
	free_all(out, 1);
}

Test(norm, mean_variance_normalization)
{
	int64_t axes[] = {1};
	mc_attr attrs[] = {attr_ints("axes", axes, 1)};
	op_call call = {"MeanVarianceNormalization", 13, attrs, 1, 0};
	mc_tensor *in[1] = {tensor(MC_FLOAT, 2, (int64_t[]){2, 2}, (double[]){1, 3, 5, 5})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 1, out, 1), 0, "%s", last_error);
	expect_values(out[0], (double[]){-1, 1, 0, 0}, 4, 1e-6);
	free_all(in, 1);
	free_all(out, 1);
}
