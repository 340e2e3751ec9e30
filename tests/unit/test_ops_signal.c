/* Signal ops (DFT, STFT, windows, MelWeightMatrix, CumProd), called
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

static mc_tensor *scalar_i64(int64_t v)
{
	mc_shape s = {.rank = 0};
	mc_tensor *x = mc_tensor_new(MC_INT64, &s);
	cr_assert_not_null(x);
	mc_set_i(x, 0, v);
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
