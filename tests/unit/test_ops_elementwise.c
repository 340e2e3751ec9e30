/* Elementwise ops, called through their registry entries on tiny inputs. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"

static void expect_f(const mc_tensor *y, mc_dtype t, int rank, const int64_t *dims,
                     const double *want)
{
	cr_assert(y, "op failed: %s", last_error);
	cr_assert_eq(y->dtype, t, "dtype %s", mc_dtype_name(y->dtype));
	expect_shape(y, rank, dims);
	for (size_t i = 0; i < y->numel; i++) {
		double got = mc_get_f(y, i);
		if (isnan(want[i]))
			cr_assert(isnan(got), "element %zu: got %g, want nan", i, got);
		else
			cr_assert(fabs(got - want[i]) <= 1e-6 * (1 + fabs(want[i])),
			          "element %zu: got %.9g, want %.9g", i, got, want[i]);
	}
}

static void expect_i(const mc_tensor *y, mc_dtype t, size_t count, const int64_t *want)
{
	cr_assert(y, "op failed: %s", last_error);
	cr_assert_eq(y->dtype, t, "dtype %s", mc_dtype_name(y->dtype));
	expect_ints(y, want, count);
}

TestSuite(ops_elementwise, .init = capture_diags);

Test(ops_elementwise, add_numpy_broadcast)
{
	mc_tensor *in[2] = {
		tensor(MC_FLOAT, 2, (int64_t[]){2, 1}, (double[]){10, 20}),
		tensor(MC_FLOAT, 1, (int64_t[]){3}, (double[]){1, 2, 3}),
	};
	mc_tensor *y = run_one(&(op_call){"Add", 14, NULL, 0, 0}, in, 2);
	expect_f(y, MC_FLOAT, 2, (int64_t[]){2, 3}, (double[]){11, 12, 13, 21, 22, 23});
	mc_tensor_free(y);
}

Test(ops_elementwise, sub_legacy_broadcast_at_axis)
{
	/* opset 6: B of shape [2] lines up with A's axis 0 */
	mc_attr attrs[] = {attr_int("broadcast", 1), attr_int("axis", 0)};
	mc_tensor *in[2] = {
		tensor(MC_DOUBLE, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6}),
		tensor(MC_DOUBLE, 1, (int64_t[]){2}, (double[]){1, 10}),
	};
	mc_tensor *y = run_one(&(op_call){"Sub", 6, attrs, 2, 0}, in, 2);
	expect_f(y, MC_DOUBLE, 2, (int64_t[]){2, 3}, (double[]){0, 1, 2, -6, -5, -4});
	mc_tensor_free(y);
}

Test(ops_elementwise, legacy_without_broadcast_needs_equal_shapes)
{
	mc_tensor *in[2] = {
		tensor(MC_FLOAT, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6}),
		tensor(MC_FLOAT, 1, (int64_t[]){3}, (double[]){1, 2, 3}),
	};
	cr_assert_null(run_one(&(op_call){"Mul", 6, NULL, 0, 0}, in, 2));
	cr_assert(strstr(last_error, "broadcast=1"), "%s", last_error);
}

Test(ops_elementwise, int_div_truncates_and_mod_signs)
{
	mc_tensor *in[2] = {
		tensor(MC_INT32, 1, (int64_t[]){4}, (double[]){-7, 7, -7, 7}),
		tensor(MC_INT32, 1, (int64_t[]){4}, (double[]){2, -2, -2, 2}),
	};
	mc_tensor *y = run_one(&(op_call){"Div", 14, NULL, 0, 0}, in, 2);
	expect_i(y, MC_INT32, 4, (int64_t[]){-3, -3, 3, 3});
	mc_tensor_free(y);

	/* fmod=0: the result takes the divisor's sign */
	mc_tensor *in2[2] = {
		tensor(MC_INT64, 1, (int64_t[]){4}, (double[]){-7, 7, -7, 7}),
		tensor(MC_INT64, 1, (int64_t[]){4}, (double[]){2, -2, -2, 2}),
	};
	y = run_one(&(op_call){"Mod", 13, NULL, 0, 0}, in2, 2);
	expect_i(y, MC_INT64, 4, (int64_t[]){1, -1, -1, 1});
	mc_tensor_free(y);

	/* fmod=1: the dividend's sign */
	mc_attr fmod = attr_int("fmod", 1);
	mc_tensor *in3[2] = {
		tensor(MC_FLOAT, 1, (int64_t[]){2}, (double[]){-7.5, 7.5}),
		tensor(MC_FLOAT, 1, (int64_t[]){2}, (double[]){2, -2}),
	};
	y = run_one(&(op_call){"Mod", 13, &fmod, 1, 0}, in3, 2);
	expect_f(y, MC_FLOAT, 1, (int64_t[]){2}, (double[]){-1.5, 1.5});
	mc_tensor_free(y);
}

Test(ops_elementwise, int_division_by_zero_is_an_error)
{
	mc_tensor *in[2] = {
		tensor(MC_INT32, 1, (int64_t[]){2}, (double[]){1, 2}),
		tensor(MC_INT32, 1, (int64_t[]){2}, (double[]){1, 0}),
	};
	cr_assert_null(run_one(&(op_call){"Div", 14, NULL, 0, 0}, in, 2));
	cr_assert(strstr(last_error, "division by zero"), "%s", last_error);
}

Test(ops_elementwise, uint64_compares_unsigned)
{
	mc_tensor *a = mc_tensor_new(MC_UINT64, &(mc_shape){.rank = 1, .dims = {2}});
	mc_tensor *b = mc_tensor_new(MC_UINT64, &(mc_shape){.rank = 1, .dims = {2}});
	((uint64_t *)a->data)[0] = UINT64_MAX;
	((uint64_t *)a->data)[1] = 1;
	((uint64_t *)b->data)[0] = 1;
	((uint64_t *)b->data)[1] = 2;
	mc_tensor *in[2] = {a, mc_tensor_clone(b)};
	mc_tensor *y = run_one(&(op_call){"Max", 13, NULL, 0, 0}, in, 2);
	cr_assert(y, "%s", last_error);
	cr_assert_eq(((uint64_t *)y->data)[0], UINT64_MAX);
	cr_assert_eq(((uint64_t *)y->data)[1], 2);
	mc_tensor_free(y);

	mc_tensor *a2 = mc_tensor_new(MC_UINT64, &(mc_shape){.rank = 1, .dims = {2}});
	((uint64_t *)a2->data)[0] = UINT64_MAX;
	mc_tensor *in2[2] = {a2, b};
	y = run_one(&(op_call){"Greater", 13, NULL, 0, 0}, in2, 2);
	expect_i(y, MC_BOOL, 2, (int64_t[]){1, 0});
	mc_tensor_free(y);
}

Test(ops_elementwise, round_half_to_even)
{
	mc_tensor *in[1] = {
		tensor(MC_FLOAT, 1, (int64_t[]){6}, (double[]){0.5, 1.5, 2.5, -0.5, -1.5, 2.6})};
	mc_tensor *y = run_one(&(op_call){"Round", 11, NULL, 0, 0}, in, 1);
	expect_f(y, MC_FLOAT, 1, (int64_t[]){6}, (double[]){0, 2, 2, 0, -2, 3});
	mc_tensor_free(y);
}

Test(ops_elementwise, clip_attributes_then_inputs)
{
	mc_attr attrs[] = {attr_float("min", -1), attr_float("max", 2)};
	mc_tensor *in[1] = {tensor(MC_FLOAT, 1, (int64_t[]){4}, (double[]){-5, 0.5, 3, NAN})};
	mc_tensor *y = run_one(&(op_call){"Clip", 6, attrs, 2, 0}, in, 1);
	expect_f(y, MC_FLOAT, 1, (int64_t[]){4}, (double[]){-1, 0.5, 2, NAN});
	mc_tensor_free(y);

	/* opset 13, int8, only max given (min omitted) */
	mc_tensor *in2[3] = {tensor(MC_INT8, 1, (int64_t[]){3}, (double[]){-100, 5, 100}), NULL,
	                     tensor(MC_INT8, 0, NULL, (double[]){7})};
	y = run_one(&(op_call){"Clip", 13, NULL, 0, 0}, in2, 3);
	expect_i(y, MC_INT8, 3, (int64_t[]){-100, 5, 7});
	mc_tensor_free(y);
}

Test(ops_elementwise, where_broadcasts_three_ways)
{
	mc_tensor *in[3] = {
		tensor(MC_BOOL, 2, (int64_t[]){2, 1}, (double[]){1, 0}),
		tensor(MC_INT64, 1, (int64_t[]){3}, (double[]){1, 2, 3}),
		tensor(MC_INT64, 0, NULL, (double[]){-1}),
	};
	mc_tensor *y = run_one(&(op_call){"Where", 16, NULL, 0, 0}, in, 3);
	expect_i(y, MC_INT64, 6, (int64_t[]){1, 2, 3, -1, -1, -1});
	mc_tensor_free(y);
}

Test(ops_elementwise, cast_saturates_truncates_and_names_types)
{
	mc_attr to = attr_int("to", MC_INT8);
	mc_tensor *in[1] = {tensor(MC_FLOAT, 1, (int64_t[]){4}, (double[]){-2.7, 2.7, 1000, NAN})};
	mc_tensor *y = run_one(&(op_call){"Cast", 13, &to, 1, 0}, in, 1);
	expect_i(y, MC_INT8, 4, (int64_t[]){-2, 2, 127, 0});
	mc_tensor_free(y);

	/* Cast-1 names the type by string; bool is "nonzero" */
	mc_attr to_s = attr_string("to", "BOOL");
	mc_tensor *in2[1] = {tensor(MC_FLOAT, 1, (int64_t[]){3}, (double[]){0, -0.5, 3})};
	y = run_one(&(op_call){"Cast", 1, &to_s, 1, 0}, in2, 1);
	expect_i(y, MC_BOOL, 3, (int64_t[]){0, 1, 1});
	mc_tensor_free(y);

	/* int64 to int16 wraps, like numpy astype */
	mc_attr to16 = attr_int("to", MC_INT16);
	mc_tensor *in3[1] = {tensor(MC_INT64, 1, (int64_t[]){2}, (double[]){65537, -1})};
	y = run_one(&(op_call){"Cast", 13, &to16, 1, 0}, in3, 1);
	expect_i(y, MC_INT16, 2, (int64_t[]){1, -1});
	mc_tensor_free(y);
}

Test(ops_elementwise, cast_to_string_is_refused)
{
	mc_attr to = attr_int("to", MC_STRING);
	mc_tensor *in[1] = {tensor(MC_FLOAT, 1, (int64_t[]){1}, (double[]){1})};
	cr_assert_null(run_one(&(op_call){"Cast", 13, &to, 1, 0}, in, 1));
	cr_assert(strstr(last_error, "string is not supported"), "%s", last_error);
}

Test(ops_elementwise, pow_mixed_dtypes)
{
	mc_tensor *in[2] = {
		tensor(MC_INT64, 1, (int64_t[]){3}, (double[]){3, -2, 2}),
		tensor(MC_INT32, 1, (int64_t[]){3}, (double[]){4, 3, 62}),
	};
	mc_tensor *y = run_one(&(op_call){"Pow", 15, NULL, 0, 0}, in, 2);
	expect_i(y, MC_INT64, 3, (int64_t[]){81, -8, INT64_C(1) << 62});
	mc_tensor_free(y);

	mc_tensor *in2[2] = {
		tensor(MC_FLOAT, 1, (int64_t[]){2}, (double[]){4, 2}),
		tensor(MC_INT64, 1, (int64_t[]){1}, (double[]){-1}),
	};
	y = run_one(&(op_call){"Pow", 15, NULL, 0, 0}, in2, 2);
	expect_f(y, MC_FLOAT, 1, (int64_t[]){2}, (double[]){0.25, 0.5});
	mc_tensor_free(y);
}

Test(ops_elementwise, prelu_old_opset_slope_on_channels)
{
	/* opset 6: a slope of C values applies along axis 1 */
	mc_tensor *in[2] = {
		tensor(MC_FLOAT, 3, (int64_t[]){1, 2, 2}, (double[]){-1, 1, -1, 1}),
		tensor(MC_FLOAT, 1, (int64_t[]){2}, (double[]){0.5, 0.25}),
	};
	mc_tensor *y = run_one(&(op_call){"PRelu", 6, NULL, 0, 0}, in, 2);
	expect_f(y, MC_FLOAT, 3, (int64_t[]){1, 2, 2}, (double[]){-0.5, 1, -0.25, 1});
	mc_tensor_free(y);

	/* opset 16: numpy rules, and the slope may not grow the output */
	mc_tensor *in2[2] = {
		tensor(MC_FLOAT, 1, (int64_t[]){2}, (double[]){-1, 1}),
		tensor(MC_FLOAT, 2, (int64_t[]){2, 2}, (double[]){1, 1, 1, 1}),
	};
	cr_assert_null(run_one(&(op_call){"PRelu", 16, NULL, 0, 0}, in2, 2));
	cr_assert(strstr(last_error, "does not broadcast"), "%s", last_error);
}

Test(ops_elementwise, mean_of_three_with_broadcast)
{
	mc_tensor *in[3] = {
		tensor(MC_FLOAT, 1, (int64_t[]){2}, (double[]){1, 2}),
		tensor(MC_FLOAT, 0, NULL, (double[]){3}),
		tensor(MC_FLOAT, 2, (int64_t[]){2, 1}, (double[]){5, 8}),
	};
	mc_tensor *y = run_one(&(op_call){"Mean", 13, NULL, 0, 0}, in, 3);
	expect_f(y, MC_FLOAT, 2, (int64_t[]){2, 2}, (double[]){3, 10.0 / 3, 4, 13.0 / 3});
	mc_tensor_free(y);
}

Test(ops_elementwise, activations_with_attributes)
{
	mc_attr approx = attr_string("approximate", "tanh");
	mc_tensor *in[1] = {tensor(MC_FLOAT, 1, (int64_t[]){2}, (double[]){1, -1})};
	mc_tensor *y = run_one(&(op_call){"Gelu", 20, &approx, 1, 0}, in, 1);
	expect_f(y, MC_FLOAT, 1, (int64_t[]){2}, (double[]){0.8411920, -0.1588080});
	mc_tensor_free(y);

	mc_attr alpha = attr_float("alpha", 0.1);
	mc_tensor *in2[1] = {tensor(MC_FLOAT16, 1, (int64_t[]){2}, (double[]){-2, 3})};
	y = run_one(&(op_call){"LeakyRelu", 16, &alpha, 1, 0}, in2, 1);
	expect_f(y, MC_FLOAT16, 1, (int64_t[]){2}, (double[]){mc_half_to_float(mc_float_to_half(-0.2f)), 3});
	mc_tensor_free(y);

	mc_attr neg_only = attr_int("detect_positive", 0);
	mc_tensor *in3[1] = {tensor(MC_FLOAT, 1, (int64_t[]){3}, (double[]){-INFINITY, INFINITY, NAN})};
	y = run_one(&(op_call){"IsInf", 20, &neg_only, 1, 0}, in3, 1);
	expect_i(y, MC_BOOL, 3, (int64_t[]){1, 0, 0});
	mc_tensor_free(y);
}

Test(ops_elementwise, bad_attribute_and_dtype_are_reported)
{
	mc_attr approx = attr_string("approximate", "fast");
	mc_tensor *in[1] = {tensor(MC_FLOAT, 1, (int64_t[]){1}, (double[]){1})};
	cr_assert_null(run_one(&(op_call){"Gelu", 20, &approx, 1, 0}, in, 1));
	cr_assert(strstr(last_error, "approximate"), "%s", last_error);

	mc_tensor *in2[1] = {tensor(MC_INT32, 1, (int64_t[]){1}, (double[]){1})};
	cr_assert_null(run_one(&(op_call){"Sqrt", 13, NULL, 0, 0}, in2, 1));
	cr_assert(strstr(last_error, "int32"), "%s", last_error);

	mc_tensor *in3[2] = {tensor(MC_FLOAT, 1, (int64_t[]){1}, (double[]){1}),
	                     tensor(MC_DOUBLE, 1, (int64_t[]){1}, (double[]){1})};
	cr_assert_null(run_one(&(op_call){"Add", 14, NULL, 0, 0}, in3, 2));
	cr_assert(strstr(last_error, "must match"), "%s", last_error);
}

Test(ops_elementwise, bitshift_truncates_to_width)
{
	mc_attr left = attr_string("direction", "LEFT");
	mc_tensor *in[2] = {tensor(MC_UINT8, 1, (int64_t[]){3}, (double[]){1, 255, 3}),
	                    tensor(MC_UINT8, 1, (int64_t[]){3}, (double[]){7, 1, 200})};
	mc_tensor *y = run_one(&(op_call){"BitShift", 11, &left, 1, 0}, in, 2);
	expect_i(y, MC_UINT8, 3, (int64_t[]){128, 254, 0});
	mc_tensor_free(y);
}

Test(ops_elementwise, dropout_is_identity_with_true_mask)
{
	mc_tensor *in[1] = {tensor(MC_FLOAT, 1, (int64_t[]){2}, (double[]){1.5, -2})};
	mc_tensor *mask = run_out(&(op_call){"Dropout", 13, NULL, 0, 0}, in, 1, 2, 1);
	expect_i(mask, MC_BOOL, 2, (int64_t[]){1, 1});
	mc_tensor_free(mask);

	/* training with a nonzero ratio is random: refused */
	mc_tensor *in2[3] = {tensor(MC_FLOAT, 1, (int64_t[]){1}, (double[]){1}),
	                     tensor(MC_FLOAT, 0, NULL, (double[]){0.5}),
	                     tensor(MC_BOOL, 0, NULL, (double[]){1})};
	cr_assert_null(run_one(&(op_call){"Dropout", 13, NULL, 0, 0}, in2, 3));
	cr_assert(strstr(last_error,
	                 "training mode with ratio 0.5 (random dropping) is not supported"),
	          "%s", last_error);
}
