/* Extra-family registry entries called directly: parse, infer, eval on tiny
 * cases computed by hand, plus the errors a hostile model must get. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"

TestSuite(extra, .init = capture_diags);

/* ---- Einsum ---- */

Test(extra, einsum_matmul_int64)
{
	test_node t;
	node_init(&t, "Einsum", 12);
	node_attr(&t, attr_string("equation", "ij, jk -> ik"));
	mc_tensor *in[2] = {T2(MC_INT64, 2, 2, 1, 2, 3, 4), T2(MC_INT64, 2, 2, 5, 6, 7, 8)};
	mc_tensor *out[1];
	cr_assert_eq(run_node(&t, in, 2, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_INT64);
	EXPECT_INTS(out[0], 19, 22, 43, 50);
	free_all(in, 2);
	free_all(out, 1);
}

/* Implicit output drops a repeated label: "ii" is the trace. */
Test(extra, einsum_trace_and_diagonal)
{
	test_node t;
	node_init(&t, "Einsum", 12);
	node_attr(&t, attr_string("equation", "ii"));
	mc_tensor *in[1] = {T2(MC_FLOAT, 2, 2, 1, 2, 3, 4)};
	mc_tensor *out[1];
	cr_assert_eq(run_node(&t, in, 1, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->shape.rank, 0);
	EXPECT_FLOATS(out[0], 5);
	free_all(out, 1);
	node_init(&t, "Einsum", 12);
	node_attr(&t, attr_string("equation", "ii->i"));
	cr_assert_eq(run_node(&t, in, 1, 1, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], 1, 4);
	free_all(in, 1);
	free_all(out, 1);
}

/* "...ij,jk" implicit: output "...ik"; the second operand has no batch. */
Test(extra, einsum_ellipsis_implicit)
{
	test_node t;
	node_init(&t, "Einsum", 12);
	node_attr(&t, attr_string("equation", "...ij,jk"));
	mc_tensor *in[2] = {T3(MC_DOUBLE, 2, 1, 2, 1, 2, 3, 4), T2(MC_DOUBLE, 2, 1, 1, 1)};
	mc_tensor *out[1];
	cr_assert_eq(run_node(&t, in, 2, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->shape.rank, 3);
	cr_assert_eq(out[0]->shape.dims[0], 2);
	EXPECT_FLOATS(out[0], 3, 7);
	free_all(in, 2);
	free_all(out, 1);
}

Test(extra, einsum_size_mismatch)
{
	test_node t;
	node_init(&t, "Einsum", 12);
	node_attr(&t, attr_string("equation", "ij,jk->ik"));
	mc_tensor *in[2] = {T2(MC_FLOAT, 1, 2, 1, 2), T2(MC_FLOAT, 3, 1, 1, 2, 3)};
	mc_tensor *out[1];
	cr_assert_neq(run_node(&t, in, 2, 1, out), 0);
	expect_error("label 'j' has sizes 2 and 3");
	free_all(in, 2);
}

Test(extra, einsum_malformed_equation)
{
	test_node t;
	node_init(&t, "Einsum", 12);
	node_attr(&t, attr_string("equation", "i..j->ij"));
	mc_tensor *in[1] = {T2(MC_FLOAT, 1, 1, 1)};
	mc_tensor *out[1];
	cr_assert_neq(run_node(&t, in, 1, 1, out), 0);
	expect_error("malformed ellipsis");
	free_all(in, 1);
}

/* ---- RMSNormalization, Swish ---- */

Test(extra, rms_normalization)
{
	test_node t;
	node_init(&t, "RMSNormalization", 23);
	node_attr(&t, attr_float("epsilon", 0));
	mc_tensor *in[2] = {T2(MC_FLOAT, 2, 2, 3, 4, 0, 2), T1(MC_FLOAT, 2, 1, 2)};
	mc_tensor *out[1];
	cr_assert_eq(run_node(&t, in, 2, 1, out), 0, "%s", last_error);
	double r = sqrt(12.5);
	EXPECT_FLOATS(out[0], 3 / r, 8 / r, 0, 2 * 2 / sqrt(2));
	free_all(in, 2);
	free_all(out, 1);
}

Test(extra, swish_alpha)
{
	test_node t;
	node_init(&t, "Swish", 24);
	node_attr(&t, attr_float("alpha", 2));
	mc_tensor *in[1] = {T1(MC_FLOAT, 2, 1, -3)};
	mc_tensor *out[1];
	cr_assert_eq(run_node(&t, in, 1, 1, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], 1 / (1 + exp(-2.0)), -3 / (1 + exp(6.0)));
	free_all(in, 1);
	free_all(out, 1);
}

/* ---- Attention ---- */

/* One head of size 1, two queries and keys; causal: query 0 sees key 0,
 * query 1 weighs scores [0, ln 2] as [1/3, 2/3]. */
Test(extra, attention_causal_by_hand)
{
	test_node t;
	node_init(&t, "Attention", 23);
	node_attr(&t, attr_int("is_causal", 1));
	node_attr(&t, attr_int("qk_matmul_output_mode", 3));
	mc_tensor *in[3] = {T4(MC_FLOAT, 1, 1, 2, 1, 1, 1), T4(MC_FLOAT, 1, 1, 2, 1, 0, log(2.0)),
	                    T4(MC_FLOAT, 1, 1, 2, 1, 3, 6)};
	mc_tensor *out[4];
	cr_assert_eq(run_node(&t, in, 3, 4, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], 3, 5);
	EXPECT_FLOATS(out[3], 1, 0, 1.0 / 3, 2.0 / 3);
	free_all(in, 3);
	free_all(out, 4);
}

/* A zero query averages the values, past included; present = past ++ new. */
Test(extra, attention_past_and_present)
{
	test_node t;
	node_init(&t, "Attention", 23);
	mc_tensor *in[6] = {T4(MC_FLOAT, 1, 1, 1, 1, 0), T4(MC_FLOAT, 1, 1, 1, 1, 2),
	                    T4(MC_FLOAT, 1, 1, 1, 1, 1), NULL, T4(MC_FLOAT, 1, 1, 1, 1, 7),
	                    T4(MC_FLOAT, 1, 1, 1, 1, 5)};
	mc_tensor *out[3];
	cr_assert_eq(run_node(&t, in, 6, 3, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], 3);
	EXPECT_FLOATS(out[1], 7, 2);
	EXPECT_FLOATS(out[2], 5, 1);
	free_all(in, 6);
	free_all(out, 3);
}

Test(extra, attention_fully_masked_row_is_zero)
{
	test_node t;
	node_init(&t, "Attention", 23);
	mc_tensor *in[4] = {T4(MC_FLOAT, 1, 1, 1, 1, 1), T4(MC_FLOAT, 1, 1, 1, 1, 1),
	                    T4(MC_FLOAT, 1, 1, 1, 1, 9), T2(MC_BOOL, 1, 1, 0)};
	mc_tensor *out[1];
	cr_assert_eq(run_node(&t, in, 4, 1, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], 0);
	free_all(in, 4);
	free_all(out, 1);
}

Test(extra, attention_3d_needs_head_counts)
{
	test_node t;
	node_init(&t, "Attention", 23);
	mc_tensor *in[3] = {T3(MC_FLOAT, 1, 1, 2, 1, 1), T3(MC_FLOAT, 1, 1, 2, 1, 1),
	                    T3(MC_FLOAT, 1, 1, 2, 1, 1)};
	mc_tensor *out[1];
	cr_assert_neq(run_node(&t, in, 3, 1, out), 0);
	expect_error("q_num_heads");
	free_all(in, 3);
}

/* ---- RotaryEmbedding ---- */

Test(extra, rotary_embedding_rotates_pairs)
{
	test_node t;
	node_init(&t, "RotaryEmbedding", 23);
	double th = 0.3;
	mc_tensor *in[4] = {T4(MC_FLOAT, 1, 1, 1, 2, 1, 2), T2(MC_FLOAT, 2, 1, 1, cos(th)),
	                    T2(MC_FLOAT, 2, 1, 0, sin(th)), T2(MC_INT64, 1, 1, 1)};
	mc_tensor *out[1];
	cr_assert_eq(run_node(&t, in, 4, 1, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], cos(th) - 2 * sin(th), sin(th) + 2 * cos(th));
	free_all(in, 4);
	free_all(out, 1);
}

Test(extra, rotary_embedding_position_out_of_range)
{
	test_node t;
	node_init(&t, "RotaryEmbedding", 23);
	mc_tensor *in[4] = {T4(MC_FLOAT, 1, 1, 1, 2, 1, 2), T2(MC_FLOAT, 2, 1, 1, 1),
	                    T2(MC_FLOAT, 2, 1, 0, 0), T2(MC_INT64, 1, 1, 2)};
	mc_tensor *out[1];
	cr_assert_neq(run_node(&t, in, 4, 1, out), 0);
	expect_error("position id 2");
	free_all(in, 4);
}

/* ---- GridSample, RoiAlign ---- */

static void grid_sample_case(const char *mode, double want)
{
	test_node t;
	node_init(&t, "GridSample", 22);
	node_attr(&t, attr_string("mode", mode));
	mc_tensor *in[2] = {T4(MC_FLOAT, 1, 1, 2, 2, 1, 2, 3, 4), T4(MC_FLOAT, 1, 1, 1, 2, 0, 0)};
	mc_tensor *out[1];
	cr_assert_eq(run_node(&t, in, 2, 1, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], want);
	free_all(in, 2);
	free_all(out, 1);
}

/* The centre of a 2x2 image: pixel coordinate (0.5, 0.5). */
Test(extra, grid_sample_linear_centre) { grid_sample_case("linear", 2.5); }
Test(extra, grid_sample_nearest_centre) { grid_sample_case("nearest", 1); }

Test(extra, grid_sample_old_mode_names)
{
	test_node t;
	node_init(&t, "GridSample", 16);
	node_attr(&t, attr_string("mode", "linear"));
	mc_tensor *in[2] = {T4(MC_FLOAT, 1, 1, 1, 1, 1), T4(MC_FLOAT, 1, 1, 1, 2, 0, 0)};
	mc_tensor *out[1];
	cr_assert_neq(run_node(&t, in, 2, 1, out), 0);
	expect_error("bilinear");
	free_all(in, 2);
}

Test(extra, roi_align_one_sample)
{
	test_node t;
	node_init(&t, "RoiAlign", 16);
	node_attr(&t, attr_string("coordinate_transformation_mode", "output_half_pixel"));
	node_attr(&t, attr_int("sampling_ratio", 1));
	mc_tensor *in[3] = {T4(MC_FLOAT, 1, 1, 2, 2, 1, 2, 3, 4), T2(MC_FLOAT, 1, 4, 0, 0, 1, 1),
	                    T1(MC_INT64, 1, 0)};
	mc_tensor *out[1];
	cr_assert_eq(run_node(&t, in, 3, 1, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], 2.5);
	free_all(in, 3);
	free_all(out, 1);
}

Test(extra, roi_align_bad_batch_index)
{
	test_node t;
	node_init(&t, "RoiAlign", 16);
	mc_tensor *in[3] = {T4(MC_FLOAT, 1, 1, 2, 2, 1, 2, 3, 4), T2(MC_FLOAT, 1, 4, 0, 0, 1, 1),
	                    T1(MC_INT64, 1, 3)};
	mc_tensor *out[1];
	cr_assert_neq(run_node(&t, in, 3, 1, out), 0);
	expect_error("batch index 3");
	free_all(in, 3);
}

/* ---- Det ---- */

Test(extra, det_batched_with_pivoting)
{
	test_node t;
	node_init(&t, "Det", 22);
	mc_tensor *in[1] = {T3(MC_DOUBLE, 2, 3, 3, 2, 0, 1, 1, 3, 2, 1, 1, 2,
	                       0, 1, 0, 1, 0, 0, 0, 0, 1)};
	mc_tensor *out[1];
	cr_assert_eq(run_node(&t, in, 1, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->shape.rank, 1);
	EXPECT_FLOATS(out[0], 6, -1);
	free_all(in, 1);
	free_all(out, 1);
}

/* ---- CenterCropPad, Col2Im ---- */

Test(extra, center_crop_pad)
{
	test_node t;
	node_init(&t, "CenterCropPad", 18);
	mc_tensor *in[2] = {T1(MC_FLOAT, 4, 1, 2, 3, 4), T1(MC_INT64, 1, 2)};
	mc_tensor *out[1];
	cr_assert_eq(run_node_konst(&t, in, 2, 1, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], 2, 3);
	free_all(out, 1);
	mc_set_i(in[1], 0, 7);
	cr_assert_eq(run_node_konst(&t, in, 2, 1, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], 0, 1, 2, 3, 4, 0, 0);
	free_all(out, 1);
	cr_assert_neq(run_node(&t, in, 2, 1, out), 0);
	expect_error("not supported");
	free_all(in, 2);
}

/* Two overlapping 1x2 blocks on a 1x3 image: the middle pixel sums both. */
Test(extra, col2im_overlap_sums)
{
	test_node t;
	node_init(&t, "Col2Im", 18);
	mc_tensor *in[3] = {T3(MC_FLOAT, 1, 2, 2, 1, 2, 3, 4), T1(MC_INT64, 2, 1, 3),
	                    T1(MC_INT64, 2, 1, 2)};
	mc_tensor *out[1];
	cr_assert_eq(run_node_konst(&t, in, 3, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->shape.rank, 4);
	cr_assert_eq(out[0]->shape.dims[3], 3);
	EXPECT_FLOATS(out[0], 1, 5, 4);
	free_all(in, 3);
	free_all(out, 1);
}

/* ---- data-dependent shapes ---- */

Test(extra, nonzero_constant_and_runtime)
{
	test_node t;
	node_init(&t, "NonZero", 13);
	mc_tensor *in[1] = {T2(MC_FLOAT, 2, 2, 1, 0, 0, 3)};
	mc_tensor *out[1];
	cr_assert_eq(run_node_konst(&t, in, 1, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->shape.dims[0], 2);
	cr_assert_eq(out[0]->shape.dims[1], 2);
	EXPECT_INTS(out[0], 0, 1, 0, 1);
	free_all(out, 1);
	cr_assert_neq(run_node(&t, in, 1, 1, out), 0);
	expect_error("depends on its data");
	free_all(in, 1);
}

static void unique_case(int64_t sorted, const int64_t *y, const int64_t *idx, const int64_t *inv,
                        const int64_t *cnt)
{
	test_node t;
	node_init(&t, "Unique", 11);
	node_attr(&t, attr_int("sorted", sorted));
	mc_tensor *in[1] = {T1(MC_INT64, 5, 2, 1, 1, 3, 2)};
	mc_tensor *out[4];
	cr_assert_eq(run_node_konst(&t, in, 1, 4, out), 0, "%s", last_error);
	expect_ints(out[0], y, 3);
	expect_ints(out[1], idx, 3);
	expect_ints(out[2], inv, 5);
	expect_ints(out[3], cnt, 3);
	free_all(in, 1);
	free_all(out, 4);
}

Test(extra, unique_sorted)
{
	unique_case(1, (int64_t[]){1, 2, 3}, (int64_t[]){1, 0, 3}, (int64_t[]){1, 0, 0, 2, 1},
	            (int64_t[]){2, 2, 1});
}

Test(extra, unique_first_occurrence_order)
{
	unique_case(0, (int64_t[]){2, 1, 3}, (int64_t[]){0, 1, 3}, (int64_t[]){0, 1, 1, 2, 0},
	            (int64_t[]){2, 2, 1});
}

/* Box 1 overlaps box 0 with IoU 0.9 / 1.1 and is suppressed. */
Test(extra, non_max_suppression)
{
	test_node t;
	node_init(&t, "NonMaxSuppression", 11);
	mc_tensor *in[5] = {
		T3(MC_FLOAT, 1, 3, 4, 0, 0, 1, 1, 0, 0.1, 1, 1.1, 0, 2, 1, 3),
		T3(MC_FLOAT, 1, 1, 3, 0.9, 0.8, 0.7), T1(MC_INT64, 1, 10), T1(MC_FLOAT, 1, 0.5),
		T1(MC_FLOAT, 1, 0.0),
	};
	mc_tensor *out[1];
	cr_assert_eq(run_node_konst(&t, in, 5, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->shape.dims[0], 2);
	EXPECT_INTS(out[0], 0, 0, 0, 0, 0, 2);
	free_all(in, 5);
	free_all(out, 1);
}

Test(extra, center_crop_pad_negative_axis)
{
	test_node t;
	node_init(&t, "CenterCropPad", 18);
	int64_t axes[1] = {-1};
	node_attr(&t, attr_ints("axes", axes, 1));
	mc_tensor *in[2] = {T2(MC_INT32, 2, 3, 1, 2, 3, 4, 5, 6), T1(MC_INT64, 1, 1)};
	mc_tensor *out[1];
	cr_assert_eq(run_node_konst(&t, in, 2, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->shape.dims[0], 2);
	EXPECT_INTS(out[0], 2, 5);
	free_all(in, 2);
	free_all(out, 1);
}

/* Empty images: nothing to sample, outputs are zero, nothing is read. */
Test(extra, empty_images_sample_zero)
{
	test_node t;
	node_init(&t, "GridSample", 20);
	mc_tensor *in[3] = {tensor(MC_FLOAT, 4, (int64_t[]){1, 1, 0, 2}, NULL),
	                    T4(MC_FLOAT, 1, 1, 1, 2, 0, 0)};
	mc_tensor *out[1];
	cr_assert_eq(run_node(&t, in, 2, 1, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], 0);
	free_all(in, 2);
	free_all(out, 1);
	node_init(&t, "RoiAlign", 16);
	in[0] = tensor(MC_FLOAT, 4, (int64_t[]){1, 1, 0, 0}, NULL);
	in[1] = T2(MC_FLOAT, 1, 4, 0, 0, 1, 1);
	in[2] = T1(MC_INT64, 1, 0);
	cr_assert_eq(run_node(&t, in, 3, 1, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], 0);
	free_all(in, 3);
	free_all(out, 1);
}
