/* aot/macs.c: multiply-accumulates of one run, checked against counts
 * worked out by hand for small graphs of each counted op. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "../../aot/aot.h"
#include "model_builder.h"
#include "modelc.h"

#define OPSET 13

static void setup(void) { diag_capture(); }

TestSuite(macs, .init = setup);

/* A float initializer of n zeros (values do not matter for counts). */
static void zeros(mb *b, Onnx__GraphProto *g, const char *name, const char *dims, size_t n)
{
	float *v = calloc(n, sizeof *v);
	mb_init_floats(b, g, name, dims, v, n);
	free(v);
}

static double macs_of(mb *b)
{
	mc_graph *g = mb_import(b, NULL, NULL);
	cr_assert_not_null(g, "import failed:\n%s", diag_all());
	cr_assert_eq(mc_infer_graph(g), 0, "inference failed:\n%s", diag_all());
	double m = mc_graph_macs(g);
	mc_graph_free(g);
	mb_free(b);
	return m;
}

Test(macs, conv_dense_padded)
{
	/* Y [1,4,8,8]: 256 outputs, each over 3 channels x 3x3 taps. */
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", 1, "1,3,8,8");
	zeros(b, mb_main(b), "w", "4,3,3,3", 108);
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "Conv", "c", "x,w", "y");
	mb_attr_ints(b, n, "pads", (const int64_t[]){ 1, 1, 1, 1 }, 4);
	mb_output(b, mb_main(b), "y");
	double got = macs_of(b);
	cr_assert_float_eq(got, 256.0 * 27, 0, "got %.0f", got);
}

Test(macs, nhwc_conv_counts_like_conv)
{
	/* The layout pass's NhwcConv: data [N, H, W, C], weight still OIHW.
	 * Made here by relabelling an inferred Conv (the pass may not run on
	 * a graph this small): Y [1,8,8,4] is the same 256 outputs x 27. */
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", 1, "1,3,8,8");
	zeros(b, mb_main(b), "w", "4,3,3,3", 108);
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "Conv", "c", "x,w", "y");
	mb_attr_ints(b, n, "pads", (const int64_t[]){ 1, 1, 1, 1 }, 4);
	mb_output(b, mb_main(b), "y");
	mc_graph *g = mb_import(b, NULL, NULL);
	cr_assert_not_null(g, "import failed:\n%s", diag_all());
	cr_assert_eq(mc_infer_graph(g), 0, "inference failed:\n%s", diag_all());
	mc_node *conv = &g->nodes[0];
	mc_node_set_op(conv, MC_OP_NhwcConv, conv->opset);
	g->values[conv->inputs[0]].shape = (mc_shape){ 4, { 1, 8, 8, 3 } };
	g->values[conv->outputs[0]].shape = (mc_shape){ 4, { 1, 8, 8, 4 } };
	double got = mc_graph_macs(g);
	mc_graph_free(g);
	mb_free(b);
	cr_assert_float_eq(got, 256.0 * 27, 0, "got %.0f", got);
}

Test(macs, conv_depthwise_strided)
{
	/* group 8, stride 2, no pads: Y [1,8,3,3] = 72 outputs x 1 x 3x3. */
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", 1, "1,8,7,7");
	zeros(b, mb_main(b), "w", "8,1,3,3", 72);
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "Conv", "c", "x,w", "y");
	mb_attr_int(b, n, "group", 8);
	mb_attr_ints(b, n, "strides", (const int64_t[]){ 2, 2 }, 2);
	mb_output(b, mb_main(b), "y");
	double got = macs_of(b);
	cr_assert_float_eq(got, 72.0 * 9, 0, "got %.0f", got);
}

Test(macs, conv_1d_long_kernel)
{
	/* Like melspectrogram's front: k 512, stride 160 over 1280 samples:
	 * (1280 - 512) / 160 + 1 = 5 frames x 257 channels, each over 512 taps. */
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", 1, "1,1,1280");
	zeros(b, mb_main(b), "w", "257,1,512", 257 * 512);
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "Conv", "c", "x,w", "y");
	mb_attr_ints(b, n, "strides", (const int64_t[]){ 160 }, 1);
	mb_output(b, mb_main(b), "y");
	double got = macs_of(b);
	cr_assert_float_eq(got, 5.0 * 257 * 512, 0, "got %.0f", got);
}

Test(macs, conv_transpose)
{
	/* Every one of X's 32 elements scatters into 3 channels x 3x3 taps. */
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", 1, "1,2,4,4");
	zeros(b, mb_main(b), "w", "2,3,3,3", 54);
	mb_node(b, mb_main(b), "ConvTranspose", "c", "x,w", "y");
	mb_output(b, mb_main(b), "y");
	double got = macs_of(b);
	cr_assert_float_eq(got, 32.0 * 27, 0, "got %.0f", got);
}

Test(macs, gemm_and_batched_matmul)
{
	/* Gemm with transA: A [5,2] -> M 2, K 5, N 7: 70. MatMul [2,3,4] x
	 * [4,6] -> [2,3,6] over K 4: 144. The Relu between counts nothing. */
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "a", 1, "5,2");
	zeros(b, mb_main(b), "b", "5,7", 35);
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "Gemm", "g", "a,b", "y");
	mb_attr_int(b, n, "transA", 1);
	mb_node(b, mb_main(b), "Relu", "r", "y", "yr");
	mb_output(b, mb_main(b), "yr");
	mb_input(b, mb_main(b), "p", 1, "2,3,4");
	zeros(b, mb_main(b), "q", "4,6", 24);
	mb_node(b, mb_main(b), "MatMul", "m", "p,q", "z");
	mb_output(b, mb_main(b), "z");
	double got = macs_of(b);
	cr_assert_float_eq(got, 70.0 + 144, 0, "got %.0f", got);
}

Test(macs, recurrent_layers_count_their_gate_products)
{
	/* bidirectional GRU over X [seq 5, batch 2, input 3], hidden 4: W
	 * [2, 12, 3], R [2, 12, 4]: 10 steps x (72 + 96) = 1680 */
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", 1, "5,2,3");
	zeros(b, mb_main(b), "w", "2,12,3", 72);
	zeros(b, mb_main(b), "r", "2,12,4", 96);
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "GRU", "gru", "x,w,r", "y");
	mb_attr_int(b, n, "hidden_size", 4);
	mb_attr_string(b, n, "direction", "bidirectional");
	mb_output(b, mb_main(b), "y");
	double got = macs_of(b);
	cr_assert_float_eq(got, 1680.0, 0, "got %.0f", got);
}

Test(macs, if_counts_the_larger_branch)
{
	/* then: two MatMuls (2x3x4 = 24, then 2x4x4 = 32); else: one (24).
	 * The condition is a runtime input, so the If stays. */
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "cond", 9, "");
	mb_input(b, mb_main(b), "a", 1, "2,3");
	zeros(b, mb_main(b), "b", "3,4", 12);
	zeros(b, mb_main(b), "d", "4,4", 16);
	Onnx__GraphProto *tg = mb_graph(b, "then"), *eg = mb_graph(b, "else");
	mb_node(b, tg, "MatMul", "t1", "a,b", "t");
	mb_node(b, tg, "MatMul", "t2", "t,d", "tout");
	mb_output(b, tg, "tout");
	mb_node(b, eg, "MatMul", "e1", "a,b", "eout");
	mb_output(b, eg, "eout");
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "If", "if", "cond", "y");
	mb_attr_graph(b, n, "then_branch", tg);
	mb_attr_graph(b, n, "else_branch", eg);
	mb_output(b, mb_main(b), "y");
	double got = macs_of(b);
	cr_assert_float_eq(got, 24.0 + 32, 0, "got %.0f", got);
}

Test(macs, unknown_ops_and_null_count_zero)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", 1, "4,4");
	mb_node(b, mb_main(b), "Relu", "r", "x", "y");
	mb_output(b, mb_main(b), "y");
	double got = macs_of(b);
	cr_assert_float_eq(got, 0, 0, "got %.0f", got);
	cr_assert_float_eq(mc_graph_macs(NULL), 0, 0, "NULL graph");
}

Test(macs, scan_body_counts_per_iteration)
{
	/* A Scan over 6 rows of x [6,3], body MatMul(row [1,3], w [3,4]):
	 * 4 outputs x 3 per step, 6 steps. */
	mb *b = mb_new(16);
	Onnx__GraphProto *body = mb_graph(b, "body");
	mb_input(b, body, "s", 1, "1,4");
	mb_input(b, body, "row", 1, "1,3");
	mb_node(b, body, "MatMul", "mm", "row,w", "p");
	mb_node(b, body, "Add", "acc", "s,p", "s_out");
	mb_output(b, body, "s_out");
	mb_input(b, mb_main(b), "s0", 1, "1,4");
	mb_input(b, mb_main(b), "x", 1, "6,1,3");
	zeros(b, mb_main(b), "w", "3,4", 12);
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "Scan", "scan", "s0,x", "s");
	mb_attr_graph(b, n, "body", body);
	mb_attr_int(b, n, "num_scan_inputs", 1);
	mb_output(b, mb_main(b), "s");
	double got = macs_of(b);
	cr_assert_float_eq(got, 6.0 * 12, 0, "got %.0f", got);
}
