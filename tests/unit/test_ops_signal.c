/* Signal ops (DFT, STFT, windows, MelWeightMatrix, CumProd), called
 * straight through the registry on small inputs with known answers. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"

static mc_tensor *scalar_i64(int64_t v)
{
	mc_shape s = {.rank = 0};
	mc_tensor *x = mc_tensor_new(MC_INT64, &s);
	cr_assert_not_null(x);
	mc_set_i(x, 0, v);
	return x;
}

/* ---- DFT ---- */

Test(signal, dft_real_forward_opset20_default_axis)
{
	/* [1, 2, 3, 4] -> [10, -2+2i, -2, -2-2i] */
	op_call call = {"DFT", 20, NULL, 0, 0};
	mc_tensor *in[1] = {tensor(MC_FLOAT, 2, (int64_t[]){4, 1}, (double[]){1, 2, 3, 4})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 1, out, 1), 0, "%s", last_error);
	expect_shape(out[0], 2, (int64_t[]){4, 2});
	expect_values(out[0], (double[]){10, 0, -2, 2, -2, 0, -2, -2}, 8, 1e-5);
	free_all(in, 1);
	free_all(out, 1);
}

Test(signal, dft_opset17_axis_attribute_and_zero_padding)
{
	/* two signals along axis 1, padded to 4: [1, 1] -> [2, 1-i, 0, 1+i] and
	 * [0, 2] -> [2, -2i, -2, 2i] */
	mc_attr attrs[] = {attr_int("axis", 1)};
	op_call call = {"DFT", 17, attrs, 1, 0};
	mc_tensor *in[2] = {tensor(MC_DOUBLE, 3, (int64_t[]){2, 2, 1}, (double[]){1, 1, 0, 2}),
	                    scalar_i64(4)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 2, out, 1), 0, "%s", last_error);
	expect_shape(out[0], 3, (int64_t[]){2, 4, 2});
	expect_values(out[0], (double[]){2, 0, 1, -1, 0, 0, 1, 1,
	                                 2, 0, 0, -2, -2, 0, 0, 2}, 16, 1e-12);
	free_all(in, 2);
	free_all(out, 1);
}

Test(signal, dft_rfft_then_irfft_round_trip)
{
	mc_attr fwd_attrs[] = {attr_int("onesided", 1)};
	op_call fwd = {"DFT", 20, fwd_attrs, 1, 0};
	mc_tensor *in[1] = {tensor(MC_FLOAT, 2, (int64_t[]){4, 1}, (double[]){1, 2, 3, 4})};
	mc_tensor *half[1];
	cr_assert_eq(run_op(&fwd, in, 1, half, 1), 0, "%s", last_error);
	expect_shape(half[0], 2, (int64_t[]){3, 2});
	expect_values(half[0], (double[]){10, 0, -2, 2, -2, 0}, 6, 1e-5);

	/* the default IRFFT length is 2 * (3 - 1) = 4: the signal comes back */
	mc_attr inv_attrs[] = {attr_int("onesided", 1), attr_int("inverse", 1)};
	op_call inv = {"DFT", 20, inv_attrs, 2, 0};
	mc_tensor *back[1];
	cr_assert_eq(run_op(&inv, half, 1, back, 1), 0, "%s", last_error);
	expect_shape(back[0], 2, (int64_t[]){4, 1});
	expect_values(back[0], (double[]){1, 2, 3, 4}, 4, 1e-5);
	free_all(in, 1);
	free_all(half, 1);
	free_all(back, 1);
}

Test(signal, dft_inverse_complex_scales_by_length)
{
	/* the inverse of [4, 0, 0, 0] (complex) is [1, 1, 1, 1] */
	mc_attr attrs[] = {attr_int("inverse", 1)};
	op_call call = {"DFT", 20, attrs, 1, 0};
	mc_tensor *in[1] = {tensor(MC_FLOAT, 2, (int64_t[]){4, 2}, (double[]){4, 0, 0, 0, 0, 0, 0, 0})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 1, out, 1), 0, "%s", last_error);
	expect_values(out[0], (double[]){1, 0, 1, 0, 1, 0, 1, 0}, 8, 1e-6);
	free_all(in, 1);
	free_all(out, 1);
}

Test(signal, dft_rejects_the_complex_axis)
{
	op_call call = {"DFT", 20, NULL, 0, 0};
	mc_tensor *in[3] = {tensor(MC_FLOAT, 3, (int64_t[]){1, 4, 1}, NULL), NULL, scalar_i64(-1)};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&call, in, 3, out, 1), 0);
	cr_assert(strstr(last_error, "axis -1"), "message: %s", last_error);
	free_all(in, 3);
}

Test(signal, dft_length_must_be_constant)
{
	op_call call = {"DFT", 20, NULL, 0, 1u << 1};
	mc_tensor *in[2] = {tensor(MC_FLOAT, 2, (int64_t[]){4, 1}, NULL), scalar_i64(4)};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&call, in, 2, out, 1), 0);
	cr_assert(strstr(last_error, "compile time"), "message: %s", last_error);
	free_all(in, 2);
}

/* ---- STFT ---- */

Test(signal, stft_frames_and_onesided_bins)
{
	/* signal 0..7, frames of 4 every 2 samples: 3 frames of 3 bins; frame f
	 * starts at 2f, so its DFT is [6 + 8f, -2+2i, -2] */
	op_call call = {"STFT", 17, NULL, 0, 0};
	double sig[8] = {0, 1, 2, 3, 4, 5, 6, 7};
	mc_tensor *in[4] = {tensor(MC_FLOAT, 3, (int64_t[]){1, 8, 1}, sig), scalar_i64(2), NULL,
	                    scalar_i64(4)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 4, out, 1), 0, "%s", last_error);
	expect_shape(out[0], 4, (int64_t[]){1, 3, 3, 2});
	expect_values(out[0], (double[]){6, 0, -2, 2, -2, 0,
	                                 14, 0, -2, 2, -2, 0,
	                                 22, 0, -2, 2, -2, 0}, 18, 1e-5);
	free_all(in, 4);
	free_all(out, 1);
}

Test(signal, stft_window_weights_each_frame)
{
	/* window [1, 0]: each frame's DFT is its first sample, in every bin */
	mc_attr attrs[] = {attr_int("onesided", 0)};
	op_call call = {"STFT", 17, attrs, 1, 0};
	mc_tensor *in[3] = {tensor(MC_FLOAT, 3, (int64_t[]){1, 4, 1}, (double[]){3, 9, 5, 9}),
	                    scalar_i64(2), tensor(MC_FLOAT, 1, (int64_t[]){2}, (double[]){1, 0})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 3, out, 1), 0, "%s", last_error);
	expect_shape(out[0], 4, (int64_t[]){1, 2, 2, 2});
	expect_values(out[0], (double[]){3, 0, 3, 0, 5, 0, 5, 0}, 8, 1e-6);
	free_all(in, 3);
	free_all(out, 1);
}

Test(signal, stft_window_must_match_frame_length)
{
	op_call call = {"STFT", 17, NULL, 0, 0};
	mc_tensor *in[4] = {tensor(MC_FLOAT, 3, (int64_t[]){1, 8, 1}, NULL), scalar_i64(2),
	                    tensor(MC_FLOAT, 1, (int64_t[]){3}, NULL), scalar_i64(4)};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&call, in, 4, out, 1), 0);
	cr_assert(strstr(last_error, "frame_length"), "message: %s", last_error);
	free_all(in, 4);
}

/* ---- windows ---- */

Test(signal, hann_periodic_and_hamming_symmetric)
{
	op_call hann = {"HannWindow", 17, NULL, 0, 0};
	mc_tensor *in[1] = {scalar_i64(4)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&hann, in, 1, out, 1), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_FLOAT);
	expect_values(out[0], (double[]){0, 0.5, 1, 0.5}, 4, 1e-7);
	free_all(out, 1);

	mc_attr attrs[] = {attr_int("periodic", 0), attr_int("output_datatype", MC_DOUBLE)};
	op_call hamming = {"HammingWindow", 17, attrs, 2, 0};
	cr_assert_eq(run_op(&hamming, in, 1, out, 1), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_DOUBLE);
	/* 25/46 - 21/46 cos(2 pi n / 3) */
	expect_values(out[0], (double[]){4.0 / 46, 71.0 / 92, 71.0 / 92, 4.0 / 46}, 4, 1e-12);
	free_all(in, 1);
	free_all(out, 1);
}

Test(signal, blackman_single_sample_symmetric_is_one)
{
	mc_attr attrs[] = {attr_int("periodic", 0)};
	op_call call = {"BlackmanWindow", 17, attrs, 1, 0};
	mc_tensor *in[1] = {scalar_i64(1)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 1, out, 1), 0, "%s", last_error);
	expect_values(out[0], (double[]){1}, 1, 0);
	free_all(in, 1);
	free_all(out, 1);
}

Test(signal, window_size_must_be_constant)
{
	op_call call = {"HannWindow", 17, NULL, 0, 1u};
	mc_tensor *in[1] = {scalar_i64(4)};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&call, in, 1, out, 1), 0);
	cr_assert(strstr(last_error, "compile time"), "message: %s", last_error);
	free_all(in, 1);
}

/* ---- MelWeightMatrix ---- */

Test(signal, mel_weight_matrix_triangles)
{
	/* 3 mel bins over [0, 4000] Hz, dft_length 8 at 8 kHz: the corner bins
	 * are 0, 0, 0, 1, 1 (the ONNX reference formula), so bins 0 and 1 are
	 * spikes on DFT bin 0 and bin 2 one on DFT bin 1 */
	op_call call = {"MelWeightMatrix", 17, NULL, 0, 0};
	mc_tensor *in[5] = {scalar_i64(3), scalar_i64(8), scalar_i64(8000),
	                    tensor(MC_FLOAT, 0, NULL, (double[]){0}),
	                    tensor(MC_FLOAT, 0, NULL, (double[]){4000})};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 5, out, 1), 0, "%s", last_error);
	expect_shape(out[0], 2, (int64_t[]){5, 3});
	expect_values(out[0], (double[]){1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 15, 0);
	free_all(in, 5);
	free_all(out, 1);
}

Test(signal, mel_edge_above_nyquist_is_an_error)
{
	op_call call = {"MelWeightMatrix", 17, NULL, 0, 0};
	mc_tensor *in[5] = {scalar_i64(8), scalar_i64(16), scalar_i64(8000),
	                    tensor(MC_FLOAT, 0, NULL, (double[]){0}),
	                    tensor(MC_FLOAT, 0, NULL, (double[]){8000})};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&call, in, 5, out, 1), 0);
	cr_assert(strstr(last_error, "outside"), "message: %s", last_error);
	free_all(in, 5);
	free_all(out, 1);
}

/* ---- CumProd ---- */

Test(signal, cumprod_float_axis_and_reverse)
{
	mc_attr attrs[] = {attr_int("reverse", 1)};
	op_call call = {"CumProd", 26, attrs, 1, 1u << 1}; /* axis known only at run time */
	mc_tensor *in[2] = {tensor(MC_DOUBLE, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6}),
	                    scalar_i64(-1)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 2, out, 1), 0, "%s", last_error);
	expect_values(out[0], (double[]){6, 6, 3, 120, 30, 6}, 6, 0);
	free_all(in, 2);
	free_all(out, 1);
}

Test(signal, cumprod_int32_exclusive_wraps)
{
	/* 65536 * 65536 wraps to 0 in int32, as the integer product does */
	mc_attr attrs[] = {attr_int("exclusive", 1)};
	op_call call = {"CumProd", 26, attrs, 1, 0};
	mc_tensor *in[2] = {tensor(MC_INT32, 1, (int64_t[]){4}, (double[]){65536, 65536, 3, 5}),
	                    scalar_i64(0)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&call, in, 2, out, 1), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_INT32);
	expect_values(out[0], (double[]){1, 65536, 0, 0}, 4, 0);
	free_all(in, 2);
	free_all(out, 1);
}

Test(signal, cumprod_axis_out_of_range_at_run_time)
{
	op_call call = {"CumProd", 26, NULL, 0, 1u << 1};
	mc_tensor *in[2] = {tensor(MC_FLOAT, 1, (int64_t[]){3}, NULL), scalar_i64(2)};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&call, in, 2, out, 1), 0);
	cr_assert(strstr(last_error, "out of range"), "message: %s", last_error);
	free_all(in, 2);
	free_all(out, 1);
}
