/* Loss ops (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss), called
 * straight through the registry on small inputs with known answers. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"

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
