/* Lowerings of the nn family (aot/lower_nn.c): small models are compiled
 * to C, built with the host compiler, run on random inputs and compared
 * with the reference interpreter (mc_verify); a few checks look at the
 * kernels themselves (fusion of the epilogue, no padding branches). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../aot/aot.h"
#include "compile_helpers.h"
#include "model_builder.h"

/* Deterministic weights in [-1, 1). */
static void fill(float *v, size_t n, unsigned seed)
{
	uint32_t s = seed * 2654435761u + 12345u;
	for (size_t i = 0; i < n; i++) {
		s = s * 1664525u + 1013904223u;
		v[i] = (float)((double)(s >> 8) / 16777216.0 * 2.0 - 1.0);
	}
}

static void init_random(mb *b, const char *name, const char *dims, size_t n, unsigned seed)
{
	float *v = malloc(n * sizeof *v);
	fill(v, n, seed);
	mb_init_floats(b, mb_main(b), name, dims, v, n);
	free(v);
}

static void init_ints(mb *b, const char *name, mc_dtype t, const char *dims, const int64_t *v,
                      size_t n)
{
	mb_init_ints(b, mb_main(b), name, (int)t, dims, v, n);
}

static int verify(mb *b)
{
	return verify_model(b, 0);
}


/* ---- convolutions ---- */

/* Conv x[1,4,7,6] w[6,2,3,3] (2 groups), stride 2x1, dilation 1x2,
 * asymmetric pads, bias, then Relu. */
static mb *conv_relu_model(void)
{
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "1,4,7,6");
	init_random(b, "w", "6,2,3,3", 6 * 2 * 3 * 3, 1);
	init_random(b, "bias", "6", 6, 2);
	Onnx__NodeProto *n = mb_node(b, g, "Conv", "conv", "x,w,bias", "c");
	mb_attr_int(b, n, "group", 2);
	mb_attr_ints(b, n, "strides", (int64_t[]){2, 1}, 2);
	mb_attr_ints(b, n, "dilations", (int64_t[]){1, 2}, 2);
	mb_attr_ints(b, n, "pads", (int64_t[]){1, 2, 0, 1}, 4);
	mb_node(b, g, "Relu", "relu", "c", "y");
	mb_output(b, g, "y");
	return b;
}

Test(lower_nn, conv_groups_strides_dilations_pads_bias_relu)
{
	cr_assert_eq(verify(conv_relu_model()), 0);
}

Test(lower_nn, conv_fuses_relu_and_has_no_padding_branches)
{
	mb *b = conv_relu_model();
	mc_program p;
	mc_graph *g = program_of(b, &p);
	cr_assert_eq(p.n_kernels, 1, "Conv + Relu is one kernel, got %d", p.n_kernels);
	char *text = kernel_text(p.kernels[0]);
	cr_assert_null(strstr(text, "if "), "padding is handled by tap ranges:\n%s", text);
	cr_assert_not_null(strstr(text, "+ Relu 'relu'"), "the Relu epilogue is inlined:\n%s", text);
	free(text);
	mc_program_free(&p);
	mc_graph_free(g);
	mb_free(b);
}

Test(lower_nn, conv1d_depthwise_same_lower_runtime_weights)
{
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "2,3,9");
	mb_input(b, g, "w", MC_FLOAT, "3,1,4");
	Onnx__NodeProto *n = mb_node(b, g, "Conv", "conv", "x,w", "y");
	mb_attr_int(b, n, "group", 3);
	mb_attr_ints(b, n, "strides", (int64_t[]){2}, 1);
	mb_attr_string(b, n, "auto_pad", "SAME_LOWER");
	mb_output(b, g, "y");
	cr_assert_eq(verify(b), 0);
}

Test(lower_nn, conv3d_pads_larger_than_kernel)
{
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "1,2,3,4,3");
	init_random(b, "w", "3,2,2,1,2", 3 * 2 * 2 * 1 * 2, 3);
	Onnx__NodeProto *n = mb_node(b, g, "Conv", "conv", "x,w", "y");
	mb_attr_ints(b, n, "pads", (int64_t[]){0, 3, 1, 2, 0, 3}, 6);
	mb_attr_ints(b, n, "strides", (int64_t[]){1, 2, 2}, 3);
	mb_output(b, g, "y");
	cr_assert_eq(verify(b), 0);
}

/* Both ways a transposed window runs: over the taps (dilation > 1) and
 * over the inputs (dilation 1, stride > 1). */
static mb *conv_transpose_model(int64_t stride, int64_t dilation)
{
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "1,4,3,4");
	init_random(b, "w", "4,3,3,2", 4 * 3 * 3 * 2, 4);
	init_random(b, "bias", "6", 6, 5);
	Onnx__NodeProto *n = mb_node(b, g, "ConvTranspose", "convt", "x,w,bias", "y");
	mb_attr_int(b, n, "group", 2);
	mb_attr_ints(b, n, "strides", (int64_t[]){stride, 2}, 2);
	mb_attr_ints(b, n, "dilations", (int64_t[]){dilation, 1}, 2);
	mb_attr_ints(b, n, "pads", (int64_t[]){1, 0, 0, 1}, 4);
	mb_attr_ints(b, n, "output_padding", (int64_t[]){1, 1}, 2);
	mb_output(b, g, "y");
	return b;
}

Test(lower_nn, conv_transpose_stride_dilation_groups)
{
	cr_assert_eq(verify(conv_transpose_model(2, 2)), 0);
	cr_assert_eq(verify(conv_transpose_model(3, 1)), 0);
	cr_assert_eq(verify(conv_transpose_model(1, 3)), 0);
}

Test(lower_nn, conv_transpose_output_shape)
{
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "1,1,3,3");
	init_random(b, "w", "1,2,3,3", 18, 6);
	Onnx__NodeProto *n = mb_node(b, g, "ConvTranspose", "convt", "x,w", "y");
	mb_attr_ints(b, n, "strides", (int64_t[]){3, 2}, 2);
	mb_attr_ints(b, n, "output_shape", (int64_t[]){10, 8}, 2);
	mb_output(b, g, "y");
	cr_assert_eq(verify(b), 0);
}

/* ---- pools ---- */

Test(lower_nn, maxpool_indices_ceil_column_major)
{
	mb *b = mb_new(12);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "2,3,7,6");
	Onnx__NodeProto *n = mb_node(b, g, "MaxPool", "pool", "x", "y,i");
	mb_attr_ints(b, n, "kernel_shape", (int64_t[]){3, 2}, 2);
	mb_attr_ints(b, n, "strides", (int64_t[]){2, 2}, 2);
	mb_attr_ints(b, n, "pads", (int64_t[]){1, 0, 1, 1}, 4);
	mb_attr_ints(b, n, "dilations", (int64_t[]){1, 2}, 2);
	mb_attr_int(b, n, "ceil_mode", 1);
	mb_attr_int(b, n, "storage_order", 1);
	mb_output(b, g, "y");
	mb_output(b, g, "i");
	cr_assert_eq(verify(b), 0);
}

Test(lower_nn, averagepool_count_include_pad_ceil)
{
	for (int include = 0; include < 2; include++) {
		mb *b = mb_new(19);
		Onnx__GraphProto *g = mb_main(b);
		mb_input(b, g, "x", MC_FLOAT, "1,2,5,6");
		Onnx__NodeProto *n = mb_node(b, g, "AveragePool", "pool", "x", "y");
		mb_attr_ints(b, n, "kernel_shape", (int64_t[]){3, 3}, 2);
		mb_attr_ints(b, n, "strides", (int64_t[]){2, 2}, 2);
		mb_attr_ints(b, n, "pads", (int64_t[]){1, 1, 1, 0}, 4);
		mb_attr_int(b, n, "ceil_mode", 1);
		mb_attr_int(b, n, "count_include_pad", include);
		mb_output(b, g, "y");
		cr_assert_eq(verify(b), 0, "count_include_pad=%d", include);
	}
}

/* End pads wider than the kernel: the last windows lie wholly in the
 * padding (no taps: NaN averages, -inf maxima, index -1). */
Test(lower_nn, pools_with_windows_wholly_in_padding)
{
	mb *b = mb_new(12);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "1,2,3,3");
	const char *ops[] = { "AveragePool", "AveragePool", "MaxPool" };
	const char *outs[] = { "a", "b", "c,i" };
	for (int k = 0; k < 3; k++) {
		Onnx__NodeProto *n = mb_node(b, g, ops[k], NULL, "x", outs[k]);
		mb_attr_ints(b, n, "kernel_shape", (int64_t[]){2, 2}, 2);
		mb_attr_ints(b, n, "pads", (int64_t[]){0, 1, 3, 3}, 4);
		if (k == 1)
			mb_attr_int(b, n, "count_include_pad", 1);
	}
	mb_output(b, g, "a");
	mb_output(b, g, "b");
	mb_output(b, g, "c");
	mb_output(b, g, "i");
	cr_assert_eq(verify(b), 0);
}

Test(lower_nn, lppool_and_global_pools)
{
	mb *b = mb_new(18);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "2,3,5,4");
	Onnx__NodeProto *n = mb_node(b, g, "LpPool", "lp", "x", "a");
	mb_attr_ints(b, n, "kernel_shape", (int64_t[]){2, 2}, 2);
	mb_attr_int(b, n, "p", 3);
	mb_node(b, g, "GlobalAveragePool", "gap", "x", "b");
	mb_node(b, g, "GlobalMaxPool", "gmp", "x", "c");
	mb_node(b, g, "GlobalLpPool", "glp", "x", "d");
	mb_output(b, g, "a");
	mb_output(b, g, "b");
	mb_output(b, g, "c");
	mb_output(b, g, "d");
	cr_assert_eq(verify(b), 0);
}

/* ---- matrix products ---- */

Test(lower_nn, matmul_broadcast_batches_and_vectors)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "a", MC_FLOAT, "2,1,3,4");
	mb_input(b, g, "b", MC_FLOAT, "3,4,5");
	mb_input(b, g, "v", MC_FLOAT, "4");
	mb_node(b, g, "MatMul", "mm", "a,b", "y");
	mb_node(b, g, "MatMul", "mv", "a,v", "z");
	mb_node(b, g, "MatMul", "vm", "v,b", "u");
	mb_output(b, g, "y");
	mb_output(b, g, "z");
	mb_output(b, g, "u");
	cr_assert_eq(verify(b), 0);
}

Test(lower_nn, gemm_transposes_alpha_beta_bias_vector)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "a", MC_FLOAT, "4,3");
	init_random(b, "w", "5,4", 20, 7);
	init_random(b, "c", "5", 5, 8);
	Onnx__NodeProto *n = mb_node(b, g, "Gemm", "gemm", "a,w,c", "y");
	mb_attr_int(b, n, "transA", 1);
	mb_attr_int(b, n, "transB", 1);
	mb_attr_float(b, n, "alpha", 0.5f);
	mb_attr_float(b, n, "beta", -2.0f);
	mb_output(b, g, "y");
	cr_assert_eq(verify(b), 0);
}

Test(lower_nn, matmul_integer_zero_points_per_row)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "a", MC_UINT8, "3,4");
	mb_input(b, g, "b", MC_UINT8, "4,2");
	init_ints(b, "za", MC_UINT8, "3", (int64_t[]){1, 2, 3}, 3);
	init_ints(b, "zb", MC_UINT8, "", (int64_t[]){2}, 1);
	mb_node(b, g, "MatMulInteger", "mmi", "a,b,za,zb", "y");
	mb_output(b, g, "y");
	cr_assert_eq(verify(b), 0);
}

Test(lower_nn, qlinear_matmul_uint8)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "a", MC_UINT8, "2,3,4");
	mb_input(b, g, "b", MC_UINT8, "4,3");
	mb_init_floats(b, g, "sa", "", (float[]){0.25f}, 1);
	mb_init_floats(b, g, "sb", "", (float[]){0.5f}, 1);
	mb_init_floats(b, g, "sy", "", (float[]){0.1875f}, 1);
	init_ints(b, "za", MC_UINT8, "", (int64_t[]){1}, 1);
	init_ints(b, "zb", MC_UINT8, "", (int64_t[]){2}, 1);
	init_ints(b, "zy", MC_UINT8, "", (int64_t[]){100}, 1);
	mb_node(b, g, "QLinearMatMul", "q", "a,sa,za,b,sb,zb,sy,zy", "y");
	mb_output(b, g, "y");
	cr_assert_eq(verify(b), 0);
}

Test(lower_nn, qlinear_conv_per_channel_bias)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_UINT8, "1,2,5,5");
	init_ints(b, "w", MC_UINT8, "3,2,2,2",
	          (int64_t[]){1, 2, 3, 0, 2, 1, 0, 3, 3, 3, 1, 0, 2, 2, 1, 1, 0, 1, 2, 3, 1, 1, 2, 0},
	          24);
	mb_init_floats(b, g, "sx", "", (float[]){0.5f}, 1);
	mb_init_floats(b, g, "sw", "3", (float[]){0.25f, 0.125f, 0.75f}, 3);
	mb_init_floats(b, g, "sy", "", (float[]){0.375f}, 1);
	init_ints(b, "zx", MC_UINT8, "", (int64_t[]){1}, 1);
	init_ints(b, "zw", MC_UINT8, "", (int64_t[]){1}, 1);
	init_ints(b, "zy", MC_UINT8, "", (int64_t[]){10}, 1);
	init_ints(b, "bias", MC_INT32, "3", (int64_t[]){5, -7, 100}, 3);
	Onnx__NodeProto *n = mb_node(b, g, "QLinearConv", "q", "x,sx,zx,w,sw,zw,sy,zy,bias", "y");
	mb_attr_ints(b, n, "pads", (int64_t[]){1, 1, 0, 1}, 4);
	mb_output(b, g, "y");
	cr_assert_eq(verify(b), 0);
}

Test(lower_nn, conv_integer_per_channel_zero_point)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_UINT8, "1,1,4,4");
	mb_input(b, g, "w", MC_UINT8, "2,1,2,2");
	init_ints(b, "zx", MC_UINT8, "", (int64_t[]){1}, 1);
	init_ints(b, "zw", MC_UINT8, "2", (int64_t[]){2, 0}, 2);
	Onnx__NodeProto *n = mb_node(b, g, "ConvInteger", "ci", "x,w,zx,zw", "y");
	mb_attr_ints(b, n, "pads", (int64_t[]){1, 1, 1, 1}, 4);
	mb_output(b, g, "y");
	cr_assert_eq(verify(b), 0);
}

/* ---- Einsum, Col2Im ---- */

Test(lower_nn, einsum_batch_matmul_diagonal_and_sum)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "a", MC_FLOAT, "2,3,4");
	mb_input(b, g, "b", MC_FLOAT, "2,4,5");
	mb_input(b, g, "s", MC_FLOAT, "3,3");
	mb_attr_string(b, mb_node(b, g, "Einsum", "bmm", "a,b", "y"), "equation", "bij,bjk->bik");
	mb_attr_string(b, mb_node(b, g, "Einsum", "diag", "s", "d"), "equation", "ii->i");
	mb_attr_string(b, mb_node(b, g, "Einsum", "sum", "a", "t"), "equation", "...j->...");
	mb_attr_string(b, mb_node(b, g, "Einsum", "outer", "s,a", "o"), "equation", "ij,bkl->jbl");
	mb_output(b, g, "y");
	mb_output(b, g, "d");
	mb_output(b, g, "t");
	mb_output(b, g, "o");
	cr_assert_eq(verify(b), 0);
}

Test(lower_nn, col2im_strides_dilations_pads)
{
	mb *b = mb_new(18);
	Onnx__GraphProto *g = mb_main(b);
	/* image 5x6, block 2x3, dilation 2x1, stride 1x2, pads 1,0,0,1:
	 * columns ((5+1-3)/1+1) x ((6+1-3)/2+1) = 4 x 3 */
	mb_input(b, g, "x", MC_FLOAT, "2,12,12");
	init_ints(b, "image", MC_INT64, "2", (int64_t[]){5, 6}, 2);
	init_ints(b, "block", MC_INT64, "2", (int64_t[]){2, 3}, 2);
	Onnx__NodeProto *n = mb_node(b, g, "Col2Im", "c2i", "x,image,block", "y");
	mb_attr_ints(b, n, "dilations", (int64_t[]){2, 1}, 2);
	mb_attr_ints(b, n, "strides", (int64_t[]){1, 2}, 2);
	mb_attr_ints(b, n, "pads", (int64_t[]){1, 0, 0, 1}, 4);
	mb_output(b, g, "y");
	cr_assert_eq(verify(b), 0);
}

/* Conv(x) + x: the Add's operand x is also read by the convolution at
 * other positions, so the sum must not take x's storage (in place, it
 * would overwrite x while the convolution still reads it). */
Test(lower_nn, conv_plus_its_own_input)
{
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "1,3,6,6");
	init_random(b, "w", "3,3,3,3", 81, 9);
	mb_node(b, g, "Relu", "r", "x", "xr");
	Onnx__NodeProto *n = mb_node(b, g, "Conv", "conv", "xr,w", "c");
	mb_attr_ints(b, n, "pads", (int64_t[]){1, 1, 1, 1}, 4);
	mb_node(b, g, "Add", "add", "c,xr", "s");
	mb_node(b, g, "GlobalAveragePool", "gap", "s", "y"); /* s lives in the arena */
	mb_output(b, g, "y");
	cr_assert_eq(verify(b), 0);
}
