/* Quantization registry entries (QuantizeLinear, DequantizeLinear,
 * DynamicQuantizeLinear, QLinearMatMul, QLinearConv) called directly: parse,
 * infer, eval on tiny cases computed by hand, plus the errors a hostile
 * model must get. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelc.h"

/* ---- a node built by hand ---- */

typedef struct {
	mc_node node;
	mc_attr attrs[8];
} test_node;

static void node_init(test_node *t, const char *op, int opset)
{
	memset(t, 0, sizeof *t);
	t->node.name = (char *)"n";
	t->node.op_type = (char *)op;
	t->node.domain = (char *)"";
	t->node.opset = opset;
	t->node.attrs = t->attrs;
}

static void attr_int(test_node *t, const char *name, int64_t v)
{
	cr_assert_lt(t->node.n_attrs, 8);
	mc_attr *a = &t->attrs[t->node.n_attrs++];
	a->name = (char *)name;
	a->type = MC_ATTR_INT;
	a->i = v;
}

static void attr_ints(test_node *t, const char *name, int64_t *v, size_t n)
{
	cr_assert_lt(t->node.n_attrs, 8);
	mc_attr *a = &t->attrs[t->node.n_attrs++];
	a->name = (char *)name;
	a->type = MC_ATTR_INTS;
	a->ints = v;
	a->n = n;
}

/* ---- diagnostics captured for error tests ---- */

static char last_error[1024];

static void capture(const char *line, void *user)
{
	(void)user;
	snprintf(last_error, sizeof last_error, "%s", line);
}

static void quiet(void)
{
	last_error[0] = 0;
	mc_set_diag_sink(capture, NULL);
}

TestSuite(quant, .init = quiet);

/* ---- running an entry: parse, infer, allocate, eval ---- */

#define MAX_IO 10

/* in[i] NULL: omitted input. out[k] is a new tensor for each of the n_out
 * outputs on success (the caller frees). */
static int run_op(test_node *t, mc_tensor *const *in, int n_in, int n_out, mc_tensor **out)
{
	mc_node *n = &t->node;
	int in_idx[MAX_IO], out_idx[MAX_IO];
	n->n_inputs = n_in;
	n->n_outputs = n_out;
	n->inputs = in_idx;
	n->outputs = out_idx;
	for (int i = 0; i < n_in; i++)
		in_idx[i] = in[i] ? i : -1;
	for (int k = 0; k < n_out; k++)
		out_idx[k] = MAX_IO + k;
	n->op = mc_registry_find(n->op_type, n->opset, NULL);
	cr_assert_not_null(n->op, "no registry entry for %s-%d", n->op_type, n->opset);
	int rc = n->op->parse ? n->op->parse(n) : 0;
	mc_value vin[MAX_IO], vout[MAX_IO];
	const mc_value *pin[MAX_IO];
	mc_value *pout[MAX_IO];
	memset(vin, 0, sizeof vin);
	memset(vout, 0, sizeof vout);
	for (int i = 0; i < n_in; i++) {
		pin[i] = NULL;
		if (!in[i])
			continue;
		vin[i].name = (char *)"in";
		vin[i].dtype = in[i]->dtype;
		vin[i].shape = in[i]->shape;
		vin[i].typed = true;
		pin[i] = &vin[i];
	}
	for (int k = 0; k < n_out; k++) {
		vout[k].name = (char *)"out";
		pout[k] = &vout[k];
		out[k] = NULL;
	}
	mc_infer_ctx ic = {.node = n, .n_in = n_in, .n_out = n_out, .in = pin, .out = pout};
	if (!rc)
		rc = n->op->infer(&ic);
	for (int k = 0; k < n_out && !rc; k++)
		out[k] = mc_tensor_new(vout[k].dtype, &vout[k].shape);
	mc_eval_ctx ec = {.node = n, .n_in = n_in, .n_out = n_out,
	                  .in = (const mc_tensor *const *)in, .out = out};
	if (!rc)
		rc = n->op->eval(&ec);
	free(n->params);
	n->params = NULL;
	if (rc)
		for (int k = 0; k < n_out; k++) {
			mc_tensor_free(out[k]);
			out[k] = NULL;
		}
	return rc;
}

static mc_tensor *tensor(mc_dtype t, int rank, const int64_t *dims, const double *vals)
{
	mc_shape s = {.rank = rank};
	if (rank)
		memcpy(s.dims, dims, (size_t)rank * sizeof *dims);
	mc_tensor *x = mc_tensor_new(t, &s);
	for (size_t i = 0; vals && i < x->numel; i++)
		mc_set_f(x, i, vals[i]);
	return x;
}

#define S0(t, v) tensor(t, 0, NULL, (double[]){v})
#define T1(t, a, ...) tensor(t, 1, (int64_t[]){a}, (double[]){__VA_ARGS__})
#define T2(t, a, b, ...) tensor(t, 2, (int64_t[]){a, b}, (double[]){__VA_ARGS__})
#define T4(t, a, b, c, d, ...) tensor(t, 4, (int64_t[]){a, b, c, d}, (double[]){__VA_ARGS__})

static void free_all(mc_tensor **t, int n)
{
	for (int i = 0; i < n; i++)
		mc_tensor_free(t[i]);
}

static void expect_ints(const mc_tensor *t, const int64_t *want, size_t n)
{
	cr_assert_eq(t->numel, n, "got %zu elements, want %zu", t->numel, n);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(mc_get_i(t, i), want[i], "element %zu: got %lld, want %lld", i,
		             (long long)mc_get_i(t, i), (long long)want[i]);
}

#define EXPECT_INTS(t, ...) expect_ints((t), (int64_t[]){__VA_ARGS__}, \
	sizeof (int64_t[]){__VA_ARGS__} / sizeof(int64_t))

static void expect_error(const char *needle)
{
	cr_assert(strstr(last_error, needle), "message '%s' lacks '%s'", last_error, needle);
	cr_assert(strstr(last_error, "node 'n'"), "message '%s' does not name the node",
	          last_error);
}

/* ---- QuantizeLinear / DequantizeLinear ---- */

/* x / 0.5 rounded half to even, plus 10, saturated to uint8. */
Test(quant, quantize_per_tensor_rounds_half_even_and_saturates)
{
	test_node t;
	node_init(&t, "QuantizeLinear", 13);
	mc_tensor *in[3] = {T1(MC_FLOAT, 6, 0.25, 0.75, 1.25, -3, 200, -100), S0(MC_FLOAT, 0.5),
	                    S0(MC_UINT8, 10)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 3, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_UINT8);
	/* 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -6, 400, -200 */
	EXPECT_INTS(out[0], 10, 12, 12, 4, 255, 0);
	free_all(in, 3);
	free_all(out, 1);
}

Test(quant, quantize_per_axis_int8)
{
	test_node t;
	node_init(&t, "QuantizeLinear", 19);
	attr_int(&t, "axis", 0);
	mc_tensor *in[3] = {T2(MC_FLOAT, 2, 2, 1, 2, 3, 4), T1(MC_FLOAT, 2, 1, 0.1),
	                    T1(MC_INT8, 2, 0, -100)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 3, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_INT8);
	EXPECT_INTS(out[0], 1, 2, -70, -60);
	free_all(in, 3);
	free_all(out, 1);
}

/* No zero point: output_dtype picks the type (opset 21). */
Test(quant, quantize_output_dtype_int16)
{
	test_node t;
	node_init(&t, "QuantizeLinear", 21);
	attr_int(&t, "output_dtype", MC_INT16);
	mc_tensor *in[2] = {T1(MC_FLOAT, 2, 1000, -100000), S0(MC_FLOAT, 0.25)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 2, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_INT16);
	EXPECT_INTS(out[0], 4000, -32768);
	free_all(in, 2);
	free_all(out, 1);
}

/* Blocks of 2 along axis 1, the last block short (3 = 2 + 1). */
Test(quant, dequantize_blocked)
{
	test_node t;
	node_init(&t, "DequantizeLinear", 21);
	attr_int(&t, "axis", 1);
	attr_int(&t, "block_size", 2);
	mc_tensor *in[3] = {T2(MC_UINT8, 2, 3, 10, 20, 30, 40, 50, 60),
	                    T2(MC_FLOAT, 2, 2, 1, 2, 0.5, 10), T2(MC_UINT8, 2, 2, 0, 10, 40, 50)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 3, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_FLOAT);
	double want[6] = {10, 20, 40, 0, 5, 100};
	for (int i = 0; i < 6; i++)
		cr_assert_float_eq(mc_get_f(out[0], (size_t)i), want[i], 1e-9, "element %d", i);
	free_all(in, 3);
	free_all(out, 1);
}

Test(quant, dequantize_float16_scale_gives_float16)
{
	test_node t;
	node_init(&t, "DequantizeLinear", 19);
	mc_tensor *in[3] = {T1(MC_INT8, 2, -128, 127), S0(MC_FLOAT16, 0.5), S0(MC_INT8, -1)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 3, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_FLOAT16);
	cr_assert_float_eq(mc_get_f(out[0], 0), -63.5, 1e-9);
	cr_assert_float_eq(mc_get_f(out[0], 1), 64, 1e-9);
	free_all(in, 3);
	free_all(out, 1);
}

/* ---- the small types: int4/uint4/int2/uint2, float8, float4e2m1 ---- */

/* A tensor of small-float bit codes, set byte by byte (no conversion). */
static mc_tensor *codes(mc_dtype t, int rank, const int64_t *dims, const uint8_t *bits)
{
	mc_tensor *x = tensor(t, rank, dims, NULL);
	memcpy(x->data, bits, x->numel);
	return x;
}

#define C0(t, v) codes(t, 0, NULL, (uint8_t[]){v})
#define C1(t, a, ...) codes(t, 1, (int64_t[]){a}, (uint8_t[]){__VA_ARGS__})

static void expect_codes(const mc_tensor *t, const uint8_t *want, size_t n)
{
	cr_assert_eq(t->numel, n, "got %zu elements, want %zu", t->numel, n);
	for (size_t i = 0; i < n; i++) {
		uint8_t got = ((const uint8_t *)t->data)[i];
		cr_assert_eq(got, want[i], "element %zu: got code 0x%02x, want 0x%02x", i, got,
		             want[i]);
	}
}

#define EXPECT_CODES(t, ...) expect_codes((t), (uint8_t[]){__VA_ARGS__}, \
	sizeof (uint8_t[]){__VA_ARGS__})

/* x / 0.5 = 0.5, 1.5, 2.5, -5, -40, 40: half to even gives 0, 2, 2, then
 * + 1 and saturation to [-8, 7]. */
Test(quant, quantize_int4_rounds_half_even_and_saturates)
{
	test_node t;
	node_init(&t, "QuantizeLinear", 21);
	mc_tensor *in[3] = {T1(MC_FLOAT, 6, 0.25, 0.75, 1.25, -2.5, -20, 20), S0(MC_FLOAT, 0.5),
	                    S0(MC_INT4, 1)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 3, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_INT4);
	EXPECT_INTS(out[0], 1, 3, 3, -4, -8, 7);
	free_all(in, 3);
	free_all(out, 1);
}

/* uint2 saturates to [0, 3], int2 to [-2, 1]; -0.5 and 0.5 round to 0. */
Test(quant, quantize_2bit_ranges)
{
	test_node t;
	node_init(&t, "QuantizeLinear", 25);
	attr_int(&t, "output_dtype", MC_UINT2);
	mc_tensor *in[2] = {T1(MC_FLOAT, 4, -1, 0.6, 1.5, 10), S0(MC_FLOAT, 1)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 2, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_UINT2);
	EXPECT_INTS(out[0], 0, 1, 2, 3);
	free_all(out, 1);
	node_init(&t, "QuantizeLinear", 25);
	attr_int(&t, "output_dtype", MC_INT2);
	mc_tensor *x = in[0];
	in[0] = T1(MC_FLOAT, 4, -3, -0.5, 0.5, 1.5);
	mc_tensor_free(x);
	cr_assert_eq(run_op(&t, in, 2, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_INT2);
	EXPECT_INTS(out[0], -2, 0, 0, 1);
	free_all(in, 2);
	free_all(out, 1);
}

/* (x - (-1)) * 0.5 */
Test(quant, dequantize_int4)
{
	test_node t;
	node_init(&t, "DequantizeLinear", 21);
	mc_tensor *in[3] = {T1(MC_INT4, 3, -8, 7, 0), S0(MC_FLOAT, 0.5), S0(MC_INT4, -1)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 3, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_FLOAT);
	double want[3] = {-3.5, 4, 0.5};
	for (int i = 0; i < 3; i++)
		cr_assert_float_eq(mc_get_f(out[0], (size_t)i), want[i], 1e-9, "element %d", i);
	free_all(in, 3);
	free_all(out, 1);
}

/* x / 2 = 0.5, 1.5, 50, 500, -1.5 in float8e4m3fn (bias 7, 3 mantissa bits):
 * 0.5 = 0x30, 1.5 = 0x3c, 50 = 1.5625 * 2^5 lies halfway between 48 (0x64)
 * and 52 (0x65) and goes to the even 48, 500 > 448 saturates to 0x7e,
 * -1.5 = 0xbc. Without saturation 500 becomes NaN (0x7f). */
Test(quant, quantize_float8e4m3fn)
{
	for (int saturate = 0; saturate <= 1; saturate++) {
		test_node t;
		node_init(&t, "QuantizeLinear", 19);
		attr_int(&t, "saturate", saturate);
		mc_tensor *in[3] = {T1(MC_FLOAT, 5, 1, 3, 100, 1000, -3), S0(MC_FLOAT, 2),
		                    C1(MC_FLOAT8E4M3FN, 1, 0x00)};
		mc_tensor *out[1];
		cr_assert_eq(run_op(&t, in, 3, 1, out), 0, "%s", last_error);
		cr_assert_eq(out[0]->dtype, MC_FLOAT8E4M3FN);
		if (saturate)
			EXPECT_CODES(out[0], 0x30, 0x3c, 0x64, 0x7e, 0xbc);
		else
			EXPECT_CODES(out[0], 0x30, 0x3c, 0x64, 0x7f, 0xbc);
		free_all(in, 3);
		free_all(out, 1);
	}
}

/* A float8 zero point is added as a float: x / 2 + 1 = 1.5 (0x3c),
 * 2.5 = 1.25 * 2 (0x42), 51 -> 52 (0x65), -0.5 (0xb0). */
Test(quant, quantize_float8e4m3fn_zero_point)
{
	test_node t;
	node_init(&t, "QuantizeLinear", 19);
	mc_tensor *in[3] = {T1(MC_FLOAT, 4, 1, 3, 100, -3), S0(MC_FLOAT, 2),
	                    C0(MC_FLOAT8E4M3FN, 0x38)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 3, 1, out), 0, "%s", last_error);
	EXPECT_CODES(out[0], 0x3c, 0x42, 0x65, 0xb0);
	free_all(in, 3);
	free_all(out, 1);
}

/* Codes 0.5, 48, 448, -1.5 and NaN, minus the zero point 1.0 (0x38), times 2. */
Test(quant, dequantize_float8e4m3fn)
{
	test_node t;
	node_init(&t, "DequantizeLinear", 19);
	mc_tensor *in[3] = {C1(MC_FLOAT8E4M3FN, 5, 0x30, 0x64, 0x7e, 0xbc, 0x7f), S0(MC_FLOAT, 2),
	                    C0(MC_FLOAT8E4M3FN, 0x38)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 3, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_FLOAT);
	double want[4] = {-1, 94, 894, -5};
	for (int i = 0; i < 4; i++)
		cr_assert_float_eq(mc_get_f(out[0], (size_t)i), want[i], 1e-9, "element %d", i);
	cr_assert(isnan(mc_get_f(out[0], 4)));
	free_all(in, 3);
	free_all(out, 1);
}

/* float4e2m1 holds 0, 0.5, 1, 1.5, 2, 3, 4, 6: 0.7 -> 0.5 (0x1), ties 2.5
 * -> 2 (0x4), 5 -> 4 (0x6), -1.25 -> -1 (0xa) go to the even mantissa,
 * 100 saturates to 6 (0x7). */
Test(quant, quantize_float4e2m1)
{
	test_node t;
	node_init(&t, "QuantizeLinear", 23);
	attr_int(&t, "output_dtype", MC_FLOAT4E2M1);
	mc_tensor *in[2] = {T1(MC_FLOAT, 5, 0.7, 2.5, 5, 100, -1.25), S0(MC_FLOAT, 1)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 2, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_FLOAT4E2M1);
	EXPECT_CODES(out[0], 0x1, 0x4, 0x6, 0x7, 0xa);
	free_all(in, 2);
	free_all(out, 1);
}

Test(quant, int4_needs_opset_21)
{
	test_node t;
	node_init(&t, "QuantizeLinear", 19);
	mc_tensor *in[3] = {T1(MC_FLOAT, 1, 1), S0(MC_FLOAT, 1), S0(MC_INT4, 0)};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&t, in, 3, 1, out), 0);
	expect_error("needs opset 21");
	free_all(in, 3);
}

Test(quant, float8e8m0_output_is_refused)
{
	test_node t;
	node_init(&t, "QuantizeLinear", 25);
	attr_int(&t, "output_dtype", MC_FLOAT8E8M0);
	mc_tensor *in[2] = {T1(MC_FLOAT, 1, 1), S0(MC_FLOAT, 1)};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&t, in, 2, 1, out), 0);
	expect_error("not a quantized type");
	free_all(in, 2);
}

Test(quant, bad_saturate_is_refused)
{
	test_node t;
	node_init(&t, "QuantizeLinear", 19);
	attr_int(&t, "saturate", 2);
	mc_tensor *in[2] = {T1(MC_FLOAT, 1, 1), S0(MC_FLOAT, 1)};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&t, in, 2, 1, out), 0);
	expect_error("saturate");
	free_all(in, 2);
}

Test(quant, scale_shape_must_fit)
{
	test_node t;
	node_init(&t, "DequantizeLinear", 13);
	mc_tensor *in[2] = {T2(MC_UINT8, 2, 3, 1, 2, 3, 4, 5, 6), T1(MC_FLOAT, 2, 1, 1)};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&t, in, 2, 1, out), 0);
	expect_error("per-axis");
	free_all(in, 2);
}

Test(quant, per_axis_needs_opset_13)
{
	test_node t;
	node_init(&t, "QuantizeLinear", 10);
	mc_tensor *in[2] = {T2(MC_FLOAT, 1, 2, 1, 2), T1(MC_FLOAT, 2, 1, 1)};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&t, in, 2, 1, out), 0);
	expect_error("opset 13");
	free_all(in, 2);
}

Test(quant, missing_scale_is_an_error)
{
	test_node t;
	node_init(&t, "QuantizeLinear", 13);
	mc_tensor *in[2] = {T1(MC_FLOAT, 1, 1), NULL};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&t, in, 2, 1, out), 0);
	expect_error("input 1 is required");
	free_all(in, 2);
}

/* ---- DynamicQuantizeLinear ---- */

/* range [-1, 2]: scale 3/255, zero point 85. */
Test(quant, dynamic_quantize)
{
	test_node t;
	node_init(&t, "DynamicQuantizeLinear", 11);
	mc_tensor *in[1] = {T1(MC_FLOAT, 4, 0, 2, -1, 1)};
	mc_tensor *out[3];
	cr_assert_eq(run_op(&t, in, 1, 3, out), 0, "%s", last_error);
	cr_assert_float_eq(mc_get_f(out[1], 0), 3.0 / 255, 1e-7);
	EXPECT_INTS(out[2], 85);
	EXPECT_INTS(out[0], 85, 255, 0, 170);
	free_all(in, 1);
	free_all(out, 3);
}

Test(quant, dynamic_quantize_all_zero_uses_scale_one)
{
	test_node t;
	node_init(&t, "DynamicQuantizeLinear", 11);
	mc_tensor *in[1] = {T1(MC_FLOAT, 2, 0, 0)};
	mc_tensor *out[3];
	cr_assert_eq(run_op(&t, in, 1, 3, out), 0, "%s", last_error);
	cr_assert_float_eq(mc_get_f(out[1], 0), 1.0, 1e-9);
	EXPECT_INTS(out[2], 0);
	EXPECT_INTS(out[0], 0, 0);
	free_all(in, 1);
	free_all(out, 3);
}

/* ---- QLinearMatMul, QLinearConv ---- */

Test(quant, qlinear_matmul_requantizes)
{
	test_node t;
	node_init(&t, "QLinearMatMul", 10);
	mc_tensor *in[8] = {
		T2(MC_UINT8, 1, 2, 12, 14), S0(MC_FLOAT, 0.5), S0(MC_UINT8, 10),
		T2(MC_UINT8, 2, 2, 1, 3, 2, 0), S0(MC_FLOAT, 0.25), S0(MC_UINT8, 1),
		S0(MC_FLOAT, 0.125), S0(MC_UINT8, 100),
	};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 8, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_UINT8);
	/* [2, 4] x [[0, 2], [1, -1]] = [4, 0]; times 0.5 * 0.25 / 0.125 = 1 */
	EXPECT_INTS(out[0], 104, 100);
	free_all(in, 8);
	free_all(out, 1);
}

Test(quant, qlinear_conv_with_bias_and_strides)
{
	test_node t;
	node_init(&t, "QLinearConv", 10);
	int64_t strides[2] = {2, 2};
	attr_ints(&t, "strides", strides, 2);
	mc_tensor *in[9] = {
		T4(MC_INT8, 1, 1, 3, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9), S0(MC_FLOAT, 1), S0(MC_INT8, 0),
		T4(MC_INT8, 1, 1, 2, 2, 1, 1, 1, 1), T1(MC_FLOAT, 1, 0.5), T1(MC_INT8, 1, 0),
		S0(MC_FLOAT, 2), S0(MC_INT8, -5), T1(MC_INT32, 1, 4),
	};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 9, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_INT8);
	cr_assert_eq(out[0]->numel, 1);
	/* (1 + 2 + 4 + 5 + bias 4) * 0.5 / 2 - 5 = -1 */
	EXPECT_INTS(out[0], -1);
	free_all(in, 9);
	free_all(out, 1);
}

/* Batch broadcast and a 1-D b; per-row a zero points [1, 2]. */
Test(quant, qlinear_matmul_batch_and_per_row_zero_points)
{
	test_node t;
	node_init(&t, "QLinearMatMul", 21);
	mc_tensor *in[8] = {
		tensor(MC_INT8, 3, (int64_t[]){2, 2, 2}, (double[]){1, 2, 3, 4, 5, 6, 7, 8}),
		S0(MC_FLOAT, 1), T1(MC_INT8, 2, 1, 2), T1(MC_INT8, 2, 1, -1), S0(MC_FLOAT, 1),
		S0(MC_INT8, 0), S0(MC_FLOAT, 1), S0(MC_INT8, 0),
	};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 8, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_INT8);
	cr_assert_eq(out[0]->shape.rank, 2);
	/* rows minus [1, 2]: [0, 1], [1, 2], [4, 5], [5, 6]; dot with [1, -1] */
	EXPECT_INTS(out[0], -1, -1, -1, -1);
	free_all(in, 8);
	free_all(out, 1);
}

Test(quant, qlinear_matmul_rejects_float_operands)
{
	test_node t;
	node_init(&t, "QLinearMatMul", 10);
	mc_tensor *in[8] = {T2(MC_FLOAT, 1, 1, 1), S0(MC_FLOAT, 1), S0(MC_UINT8, 0),
	                    T2(MC_UINT8, 1, 1, 1), S0(MC_FLOAT, 1), S0(MC_UINT8, 0),
	                    S0(MC_FLOAT, 1), S0(MC_UINT8, 0)};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&t, in, 8, 1, out), 0);
	expect_error("int8 or uint8");
	free_all(in, 8);
}

/* Two 1x1 filters with per-channel weight scales and zero points, pad 1. */
Test(quant, qlinear_conv_padding_and_per_channel)
{
	test_node t;
	node_init(&t, "QLinearConv", 10);
	int64_t pads[4] = {1, 1, 1, 1};
	attr_ints(&t, "pads", pads, 4);
	mc_tensor *in[8] = {
		T4(MC_UINT8, 1, 1, 2, 2, 3, 4, 5, 6), S0(MC_FLOAT, 1), S0(MC_UINT8, 1),
		T4(MC_UINT8, 2, 1, 1, 1, 2, 3), T1(MC_FLOAT, 2, 1, 2), T1(MC_UINT8, 2, 1, 0),
		S0(MC_FLOAT, 1), S0(MC_UINT8, 0),
	};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 8, 1, out), 0, "%s", last_error);
	int64_t want_shape[4] = {1, 2, 4, 4};
	for (int d = 0; d < 4; d++)
		cr_assert_eq(out[0]->shape.dims[d], want_shape[d]);
	/* channel 0: (x - 1) * 1 * 1; channel 1: (x - 1) * 3 * 2; padding gives 0 */
	cr_assert_eq(mc_get_i(out[0], 0), 0);
	cr_assert_eq(mc_get_i(out[0], 5), 2);
	cr_assert_eq(mc_get_i(out[0], 10), 5);
	cr_assert_eq(mc_get_i(out[0], 16 + 6), 18);
	cr_assert_eq(mc_get_i(out[0], 16 + 10), 30);
	free_all(in, 8);
	free_all(out, 1);
}

static int qlinear_conv_geometry_error(test_node *t, mc_tensor *x, mc_tensor *w)
{
	mc_tensor *in[8] = {x, S0(MC_FLOAT, 1), S0(MC_UINT8, 0), w, S0(MC_FLOAT, 1),
	                    S0(MC_UINT8, 0), S0(MC_FLOAT, 1), S0(MC_UINT8, 0)};
	mc_tensor *out[1];
	int rc = run_op(t, in, 8, 1, out);
	free_all(in, 8);
	return rc;
}

Test(quant, qlinear_conv_group_mismatch)
{
	test_node t;
	node_init(&t, "QLinearConv", 10);
	attr_int(&t, "group", 2);
	cr_assert_neq(qlinear_conv_geometry_error(&t, T4(MC_UINT8, 1, 3, 1, 1, 1, 2, 3),
	                                          T4(MC_UINT8, 2, 1, 1, 1, 1, 1)), 0);
	expect_error("group 2");
}

Test(quant, qlinear_conv_kernel_larger_than_input)
{
	test_node t;
	node_init(&t, "QLinearConv", 10);
	cr_assert_neq(qlinear_conv_geometry_error(&t, T4(MC_UINT8, 1, 1, 1, 1, 1),
	                                          T4(MC_UINT8, 1, 1, 2, 2, 1, 1, 1, 1)), 0);
	expect_error("exceeds");
}

/* K = 0: every product is the empty sum, requantized to the zero point. */
Test(quant, qlinear_matmul_empty_inner_dim)
{
	test_node t;
	node_init(&t, "QLinearMatMul", 10);
	mc_tensor *in[8] = {tensor(MC_UINT8, 2, (int64_t[]){2, 0}, NULL), S0(MC_FLOAT, 1),
	                    S0(MC_UINT8, 3), tensor(MC_UINT8, 2, (int64_t[]){0, 2}, NULL),
	                    S0(MC_FLOAT, 1), S0(MC_UINT8, 0), S0(MC_FLOAT, 1), S0(MC_UINT8, 7)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 8, 1, out), 0, "%s", last_error);
	EXPECT_INTS(out[0], 7, 7, 7, 7);
	free_all(in, 8);
	free_all(out, 1);
}
