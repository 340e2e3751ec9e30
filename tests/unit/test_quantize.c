/* The quantize pass on the patterns the MLPerf Tiny models do not have:
 * Concat of differently scaled inputs, Softmax, Pad, Sub. Each model is
 * checked twice: the integer op replaces the float one (the pass's own
 * output), and the compiled code equals the interpreter (verify). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../freezing/freezing.h"
#include "../../libcore/ops/qint.h"
#include "compile_helpers.h"

#define F ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define I8 ONNX__TENSOR_PROTO__DATA_TYPE__INT8

/* in -> QuantizeLinear(scale, zp) -> DequantizeLinear -> out. */
static void qdq(mb *b, Onnx__GraphProto *g, const char *in, const char *out, float scale, int zp)
{
	char s[64], z[64], q[64];
	snprintf(s, sizeof s, "%s_scale", out);
	snprintf(z, sizeof z, "%s_zp", out);
	snprintf(q, sizeof q, "%s_q", out);
	int64_t zv = zp;
	mb_init_floats(b, g, s, "", &scale, 1);
	mb_init_ints(b, g, z, I8, "", &zv, 1);
	char ins[256];
	snprintf(ins, sizeof ins, "%s,%s,%s", in, s, z);
	mb_node(b, g, "QuantizeLinear", NULL, ins, q);
	snprintf(ins, sizeof ins, "%s,%s,%s", q, s, z);
	mb_node(b, g, "DequantizeLinear", NULL, ins, out);
}

/* The graph after import, inference and the quantize pass. */
static mc_graph *quantized(mb *b)
{
	mc_graph *g = mb_import(b, ".", NULL);
	cr_assert(g);
	cr_assert_eq(mc_infer_graph(g), 0);
	cr_assert_geq(mc_pass_quantize(g, NULL), 1);
	return g;
}

static int count_op(const mc_graph *g, mc_opid id)
{
	int n = 0;
	for (int i = 0; i < g->n_nodes; i++)
		n += g->nodes[i].id == id;
	return n;
}

/* The integer ops against the float semantics of the same QDQ graph (the
 * interpreter without the pass, as ONNX Runtime computes it): every
 * element of output 0 within one step of its final DequantizeLinear. */
static void within_one_step(mb *b, double step)
{
	mc_graph *ref = mb_import(b, ".", NULL), *q = quantized(b);
	cr_assert(ref);
	cr_assert_eq(mc_infer_graph(ref), 0);
	mc_tensor *in[4] = {0}, *want[1] = {0}, *got[1] = {0};
	uint32_t seed = 12345;
	for (int i = 0; i < ref->n_inputs; i++) {
		const mc_value *v = &ref->values[ref->inputs[i]];
		in[i] = mc_tensor_new(v->dtype, &v->shape);
		for (size_t k = 0; k < in[i]->numel; k++) {
			seed = seed * 1664525u + 1013904223u;
			((float *)in[i]->data)[k] = (float)((seed >> 8) / 16777216.0 * 8 - 4);
		}
	}
	cr_assert_eq(mc_interp_run(ref, in, want, NULL), 0);
	cr_assert_eq(mc_interp_run(q, in, got, NULL), 0);
	for (size_t k = 0; k < want[0]->numel; k++)
		cr_assert_leq(fabs(mc_get_f(want[0], k) - mc_get_f(got[0], k)), step * 1.0001,
		              "element %zu: %g (float) vs %g (integer)", k, mc_get_f(want[0], k),
		              mc_get_f(got[0], k));
	for (int i = 0; i < ref->n_inputs; i++)
		mc_tensor_free(in[i]);
	mc_tensor_free(want[0]);
	mc_tensor_free(got[0]);
	mc_graph_free(ref);
	mc_graph_free(q);
}

static void check_and_verify(mb *b, mc_opid want, mc_opid gone, double step)
{
	within_one_step(b, step);
	mc_graph *g = quantized(b);
	cr_assert_geq(count_op(g, want), 1, "no %s", mc_op_name(want));
	cr_assert_eq(count_op(g, gone), 0, "%s left", mc_op_name(gone));
	mc_graph_free(g);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	cr_assert_eq(verify_model_with(b, &o), 0);
}

Test(quantize, concat_of_two_scales_requantises_one_input)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "1,2,3");
	mb_input(b, g, "y", F, "1,2,3");
	qdq(b, g, "x", "xd", 0.02f, 3);
	qdq(b, g, "y", "yd", 0.05f, -7);
	Onnx__NodeProto *n = mb_node(b, g, "Concat", "cat", "xd,yd", "c");
	mb_attr_int(b, n, "axis", 1);
	qdq(b, g, "c", "out", 0.04f, 1);
	mb_output(b, g, "out");
	check_and_verify(b, MC_OP_QiRequant, MC_OP_QuantizeLinear, 0.04);
}

Test(quantize, softmax_between_dq_and_q_is_integer)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "2,3,10");
	qdq(b, g, "x", "xd", 0.05f, 0);
	mb_node(b, g, "Softmax", "sm", "xd", "p");
	qdq(b, g, "p", "out", 1.0f / 256, -128);
	mb_output(b, g, "out");
	check_and_verify(b, MC_OP_QiSoftmax, MC_OP_Softmax, 1.0 / 256);
}

Test(quantize, softmax_on_a_middle_axis)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "2,7,3");
	qdq(b, g, "x", "xd", 0.1f, 5);
	Onnx__NodeProto *n = mb_node(b, g, "Softmax", "sm", "xd", "p");
	mb_attr_int(b, n, "axis", 1);
	qdq(b, g, "p", "out", 1.0f / 256, -128);
	mb_output(b, g, "out");
	check_and_verify(b, MC_OP_QiSoftmax, MC_OP_Softmax, 1.0 / 256);
}

Test(quantize, sub_and_constant_pad_run_on_the_integers)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "1,2,4,4");
	mb_input(b, g, "y", F, "1,2,4,4");
	qdq(b, g, "x", "xd", 0.03f, -2);
	qdq(b, g, "y", "yd", 0.02f, 4);
	mb_node(b, g, "Sub", "sub", "xd,yd", "d");
	qdq(b, g, "d", "dd", 0.05f, 0);
	int64_t pads[8] = {0, 0, 1, 2, 0, 0, 2, 1};
	mb_init_ints(b, g, "pads", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "8", pads, 8);
	mb_node(b, g, "Pad", "pad", "dd,pads", "pd");
	qdq(b, g, "pd", "out", 0.05f, 0);
	mb_output(b, g, "out");
	within_one_step(b, 0.05);
	mc_graph *q = quantized(b);
	cr_assert_eq(count_op(q, MC_OP_QiAdd), 1);
	cr_assert_eq(count_op(q, MC_OP_Sub), 0);
	for (int i = 0; i < q->n_nodes; i++)
		if (q->nodes[i].id == MC_OP_Pad)
			cr_assert_eq(q->values[q->nodes[i].inputs[0]].dtype, MC_INT8, "Pad on floats");
	mc_graph_free(q);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	cr_assert_eq(verify_model_with(b, &o), 0);
}

Test(quantize, zero_scale_is_an_error_naming_the_node)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "4");
	float zero = 0;
	int64_t zp = 0;
	mb_init_floats(b, g, "s", "", &zero, 1);
	mb_init_ints(b, g, "z", I8, "", &zp, 1);
	mb_node(b, g, "QuantizeLinear", "quant_x", "x,s,z", "q");
	mb_node(b, g, "DequantizeLinear", "deq_x", "q,s,z", "out");
	mb_output(b, g, "out");
	mc_graph *mg = mb_import(b, ".", NULL);
	cr_assert(mg);
	cr_assert_eq(mc_infer_graph(mg), 0);
	diag_capture();
	cr_assert_eq(mc_pass_quantize(mg, NULL), -1);
	cr_assert(strstr(diag_all(), "quant_x") && strstr(diag_all(), "scale"), "%s", diag_all());
	mc_graph_free(mg);
	mb_free(b);
}

Test(quantize, spatial_reduce_mean_is_an_integer_average)
{
	for (int keep = 0; keep <= 1; keep++) {
		mb *b = mb_new(13);
		Onnx__GraphProto *g = mb_main(b);
		mb_input(b, g, "x", F, "1,3,5,4");
		qdq(b, g, "x", "xd", 0.04f, -3);
		Onnx__NodeProto *n = mb_node(b, g, "ReduceMean", "mean", "xd", "m");
		int64_t axes[2] = {2, 3};
		mb_attr_ints(b, n, "axes", axes, 2);
		mb_attr_int(b, n, "keepdims", keep);
		qdq(b, g, "m", "out", 0.01f, 2);
		mb_output(b, g, "out");
		check_and_verify(b, MC_OP_QiAvgPool, MC_OP_ReduceMean, 0.01);
	}
}

Test(quantize, no_quantize_keeps_the_float_ops)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "1,2,3");
	mb_input(b, g, "y", F, "1,2,3");
	qdq(b, g, "x", "xd", 0.02f, 3);
	qdq(b, g, "y", "yd", 0.05f, -7);
	mb_node(b, g, "Add", "add", "xd,yd", "s");
	qdq(b, g, "s", "out", 0.04f, 1);
	mb_output(b, g, "out");
	for (int skip = 0; skip <= 1; skip++) {
		mc_graph *mg = mb_import(b, ".", NULL);
		cr_assert(mg);
		cr_assert_eq(mc_infer_graph(mg), 0);
		mc_freeze_opts o = {.no_quantize = skip};
		cr_assert_eq(mc_freeze(mg, &o), 0);
		cr_assert_eq(count_op(mg, MC_OP_QiAdd), !skip);
		cr_assert_eq(count_op(mg, MC_OP_Add), skip);
		mc_graph_free(mg);
	}
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.no_quantize = true;
	cr_assert_eq(verify_model_with(b, &o), 0);
}

Test(quantize, a_chain_of_pointwise_ops_is_one_table)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "2,16");
	qdq(b, g, "x", "xd", 0.03f, 0);
	float sqrt2 = 1.41421356f, one = 1;
	mb_init_floats(b, g, "sqrt2", "", &sqrt2, 1);
	mb_init_floats(b, g, "one", "", &one, 1);
	mb_node(b, g, "Div", "div", "xd,sqrt2", "d");
	mb_node(b, g, "Erf", "erf", "d", "e");
	mb_node(b, g, "Add", "add", "one,e", "a"); /* the value as the second operand */
	qdq(b, g, "a", "out", 1.0f / 128, -128);
	mb_output(b, g, "out");
	mc_graph *q = quantized(b);
	cr_assert_eq(count_op(q, MC_OP_QiLut), 1);
	cr_assert_eq(count_op(q, MC_OP_Erf) + count_op(q, MC_OP_Div) + count_op(q, MC_OP_Add), 0);
	mc_graph_free(q);
	check_and_verify(b, MC_OP_QiLut, MC_OP_Erf, 1.0 / 128);
}

/* x [n, c, h, w] -> Q/DQ (uint8, zero point 37) -> 1x1 Conv with m output
 * channels (per-channel int8 weights, int32 bias) -> Q/DQ; with ties, the
 * scales are powers of two and the weights -1, 0, 1 (factor 1/4: a sum of
 * 2 mod 4 is a tie). */
static mb *pointwise_scaled(int n, int c, int h, int w, int m, bool ties)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	char dims[64];
	snprintf(dims, sizeof dims, "%d,%d,%d,%d", n, c, h, w);
	mb_input(b, g, "x", F, dims);
	float xs = ties ? 0.0625f : 0.03f;
	int64_t xz = 37;
	mb_init_floats(b, g, "xs", "", &xs, 1);
	mb_init_ints(b, g, "xz", ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, "", &xz, 1);
	mb_node(b, g, "QuantizeLinear", NULL, "x,xs,xz", "xq");
	mb_node(b, g, "DequantizeLinear", NULL, "xq,xs,xz", "xd");
	int64_t wv[64 * 64], bv[64];
	float ws[64], bs[64];
	uint32_t seed = 7;
	for (int i = 0; i < m * c; i++) {
		seed = seed * 1664525u + 1013904223u;
		wv[i] = ties ? (int64_t)(seed >> 24) % 3 - 1 : (int64_t)(seed >> 24) - 128;
	}
	for (int o = 0; o < m; o++) {
		ws[o] = ties ? 0.0625f : 0.002f + 0.0005f * (float)o;
		bs[o] = xs * ws[o];
		bv[o] = ties ? 0 : (int64_t)o * 97 - 300;
	}
	char wd[32], md[16];
	snprintf(wd, sizeof wd, "%d,%d,1,1", m, c);
	snprintf(md, sizeof md, "%d", m);
	mb_init_ints(b, g, "w", I8, wd, wv, (size_t)(m * c));
	mb_init_floats(b, g, "ws", md, ws, (size_t)m);
	mb_init_ints(b, g, "bias", ONNX__TENSOR_PROTO__DATA_TYPE__INT32, md, bv, (size_t)m);
	mb_init_floats(b, g, "bs", md, bs, (size_t)m);
	mb_attr_int(b, mb_node(b, g, "DequantizeLinear", "wdq", "w,ws", "wd"), "axis", 0);
	mb_attr_int(b, mb_node(b, g, "DequantizeLinear", "bdq", "bias,bs", "bd"), "axis", 0);
	Onnx__NodeProto *conv = mb_node(b, g, "Conv", "conv", "xd,wd,bd", "y");
	int64_t k[2] = {1, 1};
	mb_attr_ints(b, conv, "kernel_shape", k, 2);
	qdq(b, g, "y", "out", ties ? 0.015625f : 0.05f, -3);
	mb_output(b, g, "out");
	return b;
}

static mb *pointwise_model(int n, int c, int h, int w, int m)
{
	return pointwise_scaled(n, c, h, w, m, false);
}

Test(quantize, pointwise_ties_round_to_even)
{
	/* factor 0.0625 * 0.0625 / 2^-6 = 1/4: shift 32, the split requantisation */
	mb *b = pointwise_scaled(1, 4, 8, 8, 8, true);
	within_one_step(b, 0.015625);
	mc_graph *q = quantized(b);
	for (int i = 0; i < q->n_nodes; i++)
		if (q->nodes[i].id == MC_OP_QiConv) {
			const mc_tensor *sh = q->values[q->nodes[i].inputs[QI_SHIFT]].konst;
			cr_assert(sh && mc_get_i(sh, 0) >= 32);
		}
	mc_graph_free(q);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	cr_assert_eq(verify_model_with(b, &o), 0);
}

Test(quantize, pointwise_convolutions_tiled_agree)
{
	/* odd and even pixel counts, a batch, channels not a multiple of the tile */
	static const int shapes[][5] = {
		{1, 16, 3, 5, 8}, {1, 7, 4, 4, 12}, {2, 5, 1, 3, 4}, {1, 9, 2, 3, 6},
	};
	for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
		const int *d = shapes[s];
		mb *b = pointwise_model(d[0], d[1], d[2], d[3], d[4]);
		within_one_step(b, 0.05);
		mc_compile_opts o;
		mc_compile_opts_init(&o);
		cr_assert_eq(verify_model_with(b, &o), 0, "shape %zu", s);
	}
}

/* a [r, k] (uint8, zero point 41) -> Q/DQ -> Gemm(transB) or MatMul by a
 * constant int8 weight of n columns (per-column scales) -> Q/DQ. */
static mb *product_model(bool gemm, int r, int k, int n)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	char dims[64];
	snprintf(dims, sizeof dims, "%d,%d", r, k);
	mb_input(b, g, "a", F, dims);
	float as = 0.025f;
	int64_t az = 41;
	mb_init_floats(b, g, "as", "", &as, 1);
	mb_init_ints(b, g, "az", ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, "", &az, 1);
	mb_node(b, g, "QuantizeLinear", NULL, "a,as,az", "aq");
	mb_node(b, g, "DequantizeLinear", NULL, "aq,as,az", "ad");
	int64_t wv[64 * 64];
	float ws[64];
	uint32_t seed = 11;
	for (int i = 0; i < n * k; i++) {
		seed = seed * 1664525u + 1013904223u;
		wv[i] = (int64_t)(seed >> 24) - 128;
	}
	for (int o = 0; o < n; o++)
		ws[o] = 0.003f + 0.0004f * (float)o;
	char wd[32], nd[16];
	snprintf(wd, sizeof wd, gemm ? "%d,%d" : "%2$d,%1$d", n, k); /* Gemm: [N, K]; MatMul: [K, N] */
	snprintf(nd, sizeof nd, "%d", n);
	mb_init_ints(b, g, "w", I8, wd, wv, (size_t)(n * k));
	mb_init_floats(b, g, "ws", nd, ws, (size_t)n);
	mb_attr_int(b, mb_node(b, g, "DequantizeLinear", "wdq", "w,ws", "wd"), "axis", gemm ? 0 : 1);
	if (gemm)
		mb_attr_int(b, mb_node(b, g, "Gemm", "gemm", "ad,wd", "y"), "transB", 1);
	else
		mb_node(b, g, "MatMul", "mm", "ad,wd", "y");
	qdq(b, g, "y", "out", 0.04f, 5);
	mb_output(b, g, "out");
	return b;
}

Test(quantize, matrix_products_by_constants_tiled_agree)
{
	/* odd and even row counts, columns a multiple of the tile or not */
	static const int shapes[][4] = {
		{1, 3, 12, 8}, {1, 1, 20, 4}, {0, 4, 9, 12}, {0, 5, 7, 6},
	};
	for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
		const int *d = shapes[s];
		mb *b = product_model(d[0], d[1], d[2], d[3]);
		within_one_step(b, 0.04);
		mc_compile_opts o;
		mc_compile_opts_init(&o);
		cr_assert_eq(verify_model_with(b, &o), 0, "shape %zu", s);
	}
}
