/* Lowerings of the elementwise family (aot/lower_elementwise.c): small
 * models are compiled to C, built with the system's compiler and run; the
 * outputs are checked against known values, or against the reference
 * interpreter on random inputs (mc_verify). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>

#include "../../aot/aot.h"
#include "compile_helpers.h"
#include "model_builder.h"

/* ---- helpers ---- */

static char *write_model(mb *b, char **dir)
{
	*dir = make_temp_dir();
	char *path = malloc(strlen(*dir) + 16);
	sprintf(path, "%s/model.onnx", *dir);
	cr_assert_eq(mb_write(b, path), 0);
	return path;
}

typedef struct {
	const void *data;
	size_t bytes;
} blob;

/* Compiles the model, builds it with cc and runs it on the inputs; the
 * outputs are read into out[k] (out_bytes[k] bytes each). 0 on success,
 * -1 if the compile failed (diagnostics captured). */
static int compile_run_isa(mb *b, const char *isa, int n_in, const blob *in, int n_out, void *const *out,
                           const size_t *out_bytes)
{
	char *dir, *model = write_model(b, &dir), path[512], cmd[2048];
	snprintf(path, sizeof path, "%s/gen", dir);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "m";
	o.harness = true;
	o.isa = isa;
	diag_capture();
	int rc = mc_compile(model, path, &o);
	if (rc == 0) {
		/* the x86 vector ISAs build for this machine (the caller checked it runs them) */
		bool x86 = isa && (!strcmp(isa, "avx2") || !strcmp(isa, "avx512"));
		snprintf(cmd, sizeof cmd,
		         "cd '%s' && cc -std=c99 -O1 %s -Wall -Wextra -Werror m.c m_weights.c m_main.c -o run -lm",
		         path, x86 ? "-march=native" : "");
		cr_assert_eq(system(cmd), 0, "generated code does not build: %s", path);
		int len = snprintf(cmd, sizeof cmd, "cd '%s' && ./run .", path);
		for (int i = 0; i < n_in; i++) {
			char file[600];
			snprintf(file, sizeof file, "%s/in%d.bin", path, i);
			cr_assert_eq(write_file(file, in[i].data, in[i].bytes), 0);
			len += snprintf(cmd + len, sizeof cmd - (size_t)len, " in%d.bin", i);
		}
		cr_assert_eq(system(cmd), 0, "the compiled model failed");
		for (int k = 0; k < n_out; k++) {
			char file[600];
			snprintf(file, sizeof file, "%s/output_%d.bin", path, k);
			FILE *f = fopen(file, "rb");
			cr_assert_not_null(f);
			cr_assert_eq(fread(out[k], 1, out_bytes[k], f), out_bytes[k]);
			fclose(f);
		}
	}
	rm_tree(dir);
	free(dir);
	free(model);
	return rc;
}

static int compile_run(mb *b, int n_in, const blob *in, int n_out, void *const *out,
                       const size_t *out_bytes)
{
	return compile_run_isa(b, NULL, n_in, in, n_out, out, out_bytes);
}

/* Compiles and runs a model on seeded random inputs in [-scale, scale]
 * against the reference interpreter; true if every output is within
 * rtol 1e-4 (of the largest reference value). */
static bool verify_random(mb *b, double scale)
{
	char *dir, *model = write_model(b, &dir);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "m";
	mc_verify_opts v;
	mc_verify_opts_init(&v);
	v.scale = scale;
	/* verify prints a table per output: keep the test log quiet */
	fflush(stdout);
	int saved = dup(1), devnull = open("/dev/null", O_WRONLY);
	cr_assert(saved >= 0 && devnull >= 0);
	dup2(devnull, 1);
	int rc = mc_verify(model, &o, &v);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	close(devnull);
	rm_tree(dir);
	free(dir);
	free(model);
	return rc == 0;
}

static bool same_float(float a, float b)
{
	return (isnan(a) && isnan(b)) || a == b;
}

/* ---- pointwise semantics with exact expectations ---- */

Test(lower_elementwise, max_min_propagate_nan)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "4");
	mb_input(b, g, "y", MC_FLOAT, "4");
	mb_node(b, g, "Max", NULL, "x,y", "hi");
	mb_node(b, g, "Min", NULL, "x,y", "lo");
	mb_output(b, g, "hi");
	mb_output(b, g, "lo");
	float x[4] = { 1, NAN, 3, -2 }, y[4] = { NAN, 2, 1, -5 }, hi[4], lo[4];
	blob in[2] = { { x, sizeof x }, { y, sizeof y } };
	void *out[2] = { hi, lo };
	size_t ob[2] = { sizeof hi, sizeof lo };
	cr_assert_eq(compile_run(b, 2, in, 2, out, ob), 0, "%s", diag_all());
	float want_hi[4] = { NAN, NAN, 3, -2 }, want_lo[4] = { NAN, NAN, 1, -5 };
	for (int i = 0; i < 4; i++) {
		cr_expect(same_float(hi[i], want_hi[i]), "max[%d] = %g", i, hi[i]);
		cr_expect(same_float(lo[i], want_lo[i]), "min[%d] = %g", i, lo[i]);
	}
	mb_free(b);
}

Test(lower_elementwise, integer_mod_div_pow)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "a", MC_INT32, "4");
	mb_input(b, g, "n", MC_INT32, "4");
	mb_node(b, g, "Mod", NULL, "a,n", "py");
	Onnx__NodeProto *cm = mb_node(b, g, "Mod", NULL, "a,n", "c");
	mb_attr_int(b, cm, "fmod", 1);
	mb_node(b, g, "Div", NULL, "a,n", "q");
	mb_node(b, g, "Pow", NULL, "n,a", "p");
	mb_output(b, g, "py");
	mb_output(b, g, "c");
	mb_output(b, g, "q");
	mb_output(b, g, "p");
	int32_t a[4] = { -7, 7, -7, 3 }, n[4] = { 3, -3, -3, -2 }, py[4], cf[4], q[4], p[4];
	blob in[2] = { { a, sizeof a }, { n, sizeof n } };
	void *out[4] = { py, cf, q, p };
	size_t ob[4] = { sizeof py, sizeof cf, sizeof q, sizeof p };
	cr_assert_eq(compile_run(b, 2, in, 4, out, ob), 0, "%s", diag_all());
	/* Python's % takes the divisor's sign, C's the dividend's; division
	 * truncates; pow: 3^-7 truncates to 0, (-3)^7, (-3)^-7 -> 0, (-2)^3 */
	int32_t want_py[4] = { 2, -2, -1, -1 }, want_c[4] = { -1, 1, -1, 1 };
	int32_t want_q[4] = { -2, -2, 2, -1 }, want_p[4] = { 0, -2187, 0, -8 };
	for (int i = 0; i < 4; i++) {
		cr_expect_eq(py[i], want_py[i], "mod[%d] = %d", i, py[i]);
		cr_expect_eq(cf[i], want_c[i], "fmod[%d] = %d", i, cf[i]);
		cr_expect_eq(q[i], want_q[i], "div[%d] = %d", i, q[i]);
		cr_expect_eq(p[i], want_p[i], "pow[%d] = %d", i, p[i]);
	}
	mb_free(b);
}

Test(lower_elementwise, round_half_even_sign_clip)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "6");
	mb_input(b, g, "lo", MC_FLOAT, "");
	mb_input(b, g, "hi", MC_FLOAT, "");
	mb_node(b, g, "Round", NULL, "x", "r");
	mb_node(b, g, "Sign", NULL, "x", "s");
	mb_node(b, g, "Clip", NULL, "x,lo,hi", "c");
	mb_output(b, g, "r");
	mb_output(b, g, "s");
	mb_output(b, g, "c");
	float x[6] = { 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, NAN }, lo = 1, hi = -1, r[6], s[6], cl[6];
	blob in[3] = { { x, sizeof x }, { &lo, sizeof lo }, { &hi, sizeof hi } };
	void *out[3] = { r, s, cl };
	size_t ob[3] = { sizeof r, sizeof s, sizeof cl };
	cr_assert_eq(compile_run(b, 3, in, 3, out, ob), 0, "%s", diag_all());
	float want_r[6] = { 0, 2, 2, -0.0f, -2, NAN }, want_s[6] = { 1, 1, 1, -1, -1, NAN };
	for (int i = 0; i < 6; i++) {
		cr_expect(same_float(r[i], want_r[i]), "round[%d] = %g", i, r[i]);
		cr_expect(same_float(s[i], want_s[i]), "sign[%d] = %g", i, s[i]);
		/* min > max: every number becomes max; NaN stays */
		cr_expect(same_float(cl[i], i == 5 ? NAN : -1), "clip[%d] = %g", i, cl[i]);
	}
	mb_free(b);
}

/* Before opset 7 PRelu's 1-D slope runs along the channels, and Add's
 * broadcast/axis aligns input 1 at an axis: neither is numpy's alignment.
 * The Add is fused after the Relu. */
Test(lower_elementwise, legacy_broadcast)
{
	mb *b = mb_new(6);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "2,3,4");
	mb_input(b, g, "bias", MC_FLOAT, "3");
	float slope[3] = { 0.5f, -1, 2 };
	mb_init_floats(b, g, "slope", "3", slope, 3);
	mb_node(b, g, "PRelu", NULL, "x,slope", "p");
	mb_node(b, g, "Relu", NULL, "x", "r");
	Onnx__NodeProto *add = mb_node(b, g, "Add", NULL, "r,bias", "y");
	mb_attr_int(b, add, "broadcast", 1);
	mb_attr_int(b, add, "axis", 1);
	mb_output(b, g, "p");
	mb_output(b, g, "y");
	float x[24], bias[3] = { 10, 20, 30 }, p[24], y[24];
	for (int i = 0; i < 24; i++)
		x[i] = (float)(i % 5) - 2.0f;
	blob in[2] = { { x, sizeof x }, { bias, sizeof bias } };
	void *out[2] = { p, y };
	size_t ob[2] = { sizeof p, sizeof y };
	cr_assert_eq(compile_run(b, 2, in, 2, out, ob), 0, "%s", diag_all());
	for (int i = 0; i < 24; i++) {
		int ch = i / 4 % 3;
		float want_p = x[i] < 0 ? x[i] * slope[ch] : x[i];
		float want_y = (x[i] < 0 ? 0 : x[i]) + bias[ch];
		cr_expect_eq(p[i], want_p, "prelu[%d] = %g, want %g", i, p[i], want_p);
		cr_expect_eq(y[i], want_y, "add[%d] = %g, want %g", i, y[i], want_y);
	}
	mb_free(b);
}

/* saturate=0: out-of-range values give NaN (float8e4m3fn has no inf);
 * 464 is the tie between 448 and the next step, kept by ties-to-even. */
Test(lower_elementwise, cast_float8_no_saturate)
{
	mb *b = mb_new(21);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "5");
	Onnx__NodeProto *n = mb_node(b, g, "Cast", NULL, "x", "y");
	mb_attr_int(b, n, "to", MC_FLOAT8E4M3FN);
	mb_attr_int(b, n, "saturate", 0);
	Onnx__NodeProto *s = mb_node(b, g, "Cast", NULL, "x", "z");
	mb_attr_int(b, s, "to", MC_FLOAT8E4M3FN);
	mb_output(b, g, "y");
	mb_output(b, g, "z");
	float x[5] = { 500, 464, 465, -1000, 1 };
	uint8_t y[5], z[5];
	blob in[1] = { { x, sizeof x } };
	void *out[2] = { y, z };
	size_t ob[2] = { sizeof y, sizeof z };
	cr_assert_eq(compile_run(b, 1, in, 2, out, ob), 0, "%s", diag_all());
	for (int i = 0; i < 5; i++) {
		double got = mc_small_float_to_double(MC_FLOAT8E4M3FN, y[i]);
		double want = i == 1 ? 448 : i == 4 ? 1 : NAN;
		cr_expect(same_float((float)got, (float)want), "nonsat[%d] = %g", i, got);
		cr_expect_eq(z[i], mc_double_to_small_float(MC_FLOAT8E4M3FN, x[i], true), "sat[%d]", i);
	}
	mb_free(b);
}

/* float8e5m2 has inf: saturate=0 makes what rounds out of range inf (61440
 * is the tie above 57344: ties to even leave the range), saturate=1 clamps
 * it and inf to the largest value; a Concat moving e5m2 data keeps inf and
 * NaN codes as they are. */
Test(lower_elementwise, cast_e5m2_inf)
{
	mb *b = mb_new(21);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "6");
	mb_input(b, g, "codes", MC_FLOAT8E5M2, "4");
	Onnx__NodeProto *n = mb_node(b, g, "Cast", "nosat", "x", "y");
	mb_attr_int(b, n, "to", MC_FLOAT8E5M2);
	mb_attr_int(b, n, "saturate", 0);
	Onnx__NodeProto *s = mb_node(b, g, "Cast", "sat", "x", "z");
	mb_attr_int(b, s, "to", MC_FLOAT8E5M2);
	Onnx__NodeProto *c = mb_node(b, g, "Concat", "moved", "codes,codes", "w");
	mb_attr_int(b, c, "axis", 0);
	mb_output(b, g, "y");
	mb_output(b, g, "z");
	mb_output(b, g, "w");
	float x[6] = { 61439, 61440, -1e6f, INFINITY, -INFINITY, 1 };
	uint8_t codes[4] = { 0x7c, 0xfc, 0x7e, 0x7b };
	uint8_t y[6], z[6], w[8];
	blob in[2] = { { x, sizeof x }, { codes, sizeof codes } };
	void *out[3] = { y, z, w };
	size_t ob[3] = { sizeof y, sizeof z, sizeof w };
	cr_assert_eq(compile_run(b, 2, in, 3, out, ob), 0, "%s", diag_all());
	for (int i = 0; i < 6; i++) {
		cr_expect_eq(y[i], mc_double_to_small_float(MC_FLOAT8E5M2, x[i], false), "nosat[%d] = %#x", i, y[i]);
		cr_expect_eq(z[i], mc_double_to_small_float(MC_FLOAT8E5M2, x[i], true), "sat[%d] = %#x", i, z[i]);
	}
	cr_expect_eq(y[1], 0x7c);
	cr_expect_eq(z[3], 0x7b);
	for (int i = 0; i < 8; i++)
		cr_expect_eq(w[i], codes[i % 4], "moved[%d] = %#x", i, w[i]);
	mb_free(b);
}

/* Dropout keeps its data and writes an all-true mask. */
Test(lower_elementwise, dropout_mask)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "3");
	mb_node(b, g, "Dropout", NULL, "x", "y,mask");
	mb_output(b, g, "y");
	mb_output(b, g, "mask");
	float x[3] = { 1, -2, 3 }, y[3];
	uint8_t mask[3] = { 0, 0, 0 };
	blob in[1] = { { x, sizeof x } };
	void *out[2] = { y, mask };
	size_t ob[2] = { sizeof y, sizeof mask };
	cr_assert_eq(compile_run(b, 1, in, 2, out, ob), 0, "%s", diag_all());
	for (int i = 0; i < 3; i++) {
		cr_expect_eq(y[i], x[i]);
		cr_expect_eq(mask[i], 1);
	}
	mb_free(b);
}

/* ---- against the reference on random inputs ---- */

Test(lower_elementwise, unary_float_ops_match_reference)
{
	static const char *const ops[] = {
		"Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Exp", "Erf", "Neg", "Abs", "Floor",
		"Ceil", "Sin", "Cos", "Atan", "Sinh", "Asinh", "Elu", "Selu", "Celu", "Softplus",
		"Softsign", "ThresholdedRelu", "Mish", "LeakyRelu", "Relu", "Shrink", "Swish",
	};
	mb *b = mb_new(24);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "2,50");
	for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
		char out[32];
		snprintf(out, sizeof out, "y%zu", i);
		Onnx__NodeProto *n = mb_node(b, g, ops[i], NULL, "x", out);
		if (strcmp(ops[i], "Celu") == 0)
			mb_attr_float(b, n, "alpha", 0.7f);
		if (strcmp(ops[i], "Swish") == 0)
			mb_attr_float(b, n, "alpha", 1.5f);
		mb_output(b, g, out);
	}
	Onnx__NodeProto *gelu = mb_node(b, g, "Gelu", NULL, "x", "gelu_tanh");
	mb_attr_string(b, gelu, "approximate", "tanh");
	mb_output(b, g, "gelu_tanh");
	mb_node(b, g, "Gelu", NULL, "x", "gelu");
	mb_output(b, g, "gelu");
	cr_expect(verify_random(b, 4.0), "%s", diag_all());
	mb_free(b);
}

/* A chain fused into one kernel: Mul (broadcast) + Sigmoid + Sub + Pow. */
Test(lower_elementwise, fused_chain_matches_reference)
{
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "3,4,5");
	mb_input(b, g, "s", MC_FLOAT, "4,1");
	mb_input(b, g, "t", MC_FLOAT, "5");
	mb_node(b, g, "Mul", NULL, "x,s", "a");
	mb_node(b, g, "Sigmoid", NULL, "a", "b");
	mb_node(b, g, "Sub", NULL, "t,b", "c");
	mb_node(b, g, "Pow", NULL, "c,s", "y");
	mb_output(b, g, "y");
	cr_expect(verify_random(b, 2.0), "%s", diag_all());
	mb_free(b);
}

/* Per-axis and blocked QuantizeLinear to int8 with zero points, then
 * DequantizeLinear back; DynamicQuantizeLinear's two passes. */
Test(lower_elementwise, quantize_dequantize_match_reference)
{
	mb *b = mb_new(21);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "2,3,4");
	float scale[3] = { 0.01f, 0.02f, 0.005f }, bscale[12];
	for (int i = 0; i < 12; i++)
		bscale[i] = 0.01f + 0.002f * (float)i;
	mb_init_floats(b, g, "scale", "3", scale, 3);
	mb_init_floats(b, g, "bscale", "2,3,2", bscale, 12);
	Onnx__TensorProto *zp = mb_tensor(b, "zp", MC_INT8, "3");
	int8_t zpv[3] = { -3, 0, 7 };
	mb_raw(b, zp, zpv, sizeof zpv);
	mb_initializer(b, g, zp);
	mb_node(b, g, "QuantizeLinear", NULL, "x,scale,zp", "q");
	mb_node(b, g, "DequantizeLinear", NULL, "q,scale,zp", "dq");
	Onnx__NodeProto *bq = mb_node(b, g, "QuantizeLinear", NULL, "x,bscale", "qb");
	mb_attr_int(b, bq, "axis", 2);
	mb_attr_int(b, bq, "block_size", 2);
	mb_node(b, g, "DynamicQuantizeLinear", NULL, "x", "y,ys,yzp");
	mb_output(b, g, "q");
	mb_output(b, g, "dq");
	mb_output(b, g, "qb");
	mb_output(b, g, "y");
	mb_output(b, g, "ys");
	mb_output(b, g, "yzp");
	cr_expect(verify_random(b, 2.0), "%s", diag_all());
	mb_free(b);
}

/* float16 x and scale: the quotient is rounded to float16 before rounding
 * to an integer (the reference's precision), through a scratch buffer. */
Test(lower_elementwise, quantize_float16_precision)
{
	mb *b = mb_new(21);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT16, "64");
	mb_input(b, g, "s", MC_FLOAT16, "");
	mb_node(b, g, "QuantizeLinear", NULL, "x,s", "q");
	mb_output(b, g, "q");
	uint16_t x[64], s = mc_float_to_half(0.01f);
	uint8_t q[64];
	/* x / s lands just below k + 0.5 in float32 but on it in float16 */
	for (int i = 0; i < 64; i++)
		x[i] = mc_float_to_half(0.01f * ((float)i + 0.4999f));
	blob in[2] = { { x, sizeof x }, { &s, sizeof s } };
	void *out[1] = { q };
	size_t ob[1] = { sizeof q };
	cr_assert_eq(compile_run(b, 2, in, 1, out, ob), 0, "%s", diag_all());
	for (int i = 0; i < 64; i++) {
		float fq = mc_half_to_float(x[i]) / mc_half_to_float(s);
		float hq = mc_half_to_float(mc_float_to_half(fq));
		float want = rintf(hq);
		want = want < 0 ? 0 : want > 255 ? 255 : want;
		cr_expect_eq(q[i], (uint8_t)want, "q[%d] = %d, want %g (x/s %.6f)", i, q[i], want, fq);
	}
	mb_free(b);
}

/* ---- the vector math functions (aot/kmath.h) ---- */

/* float32 ulps of got from the exact want (spacing at want's magnitude,
 * no finer than at FLT_MIN) */
static double ulps(float got, double want)
{
	float w = (float)want;
	double spacing = nextafterf(fabsf(w), INFINITY) - fabsf(w);
	if (spacing < 1.401298464324817e-45 * 0x1p23)
		spacing = 1.401298464324817e-45 * 0x1p23;
	return fabs((double)got - want) / spacing;
}

#define KM_N 24000

/* Exp, Sigmoid, Tanh and Erf on a grid (dense on [-3, 3], coarser out to
 * +-110, and 0, +-inf, NaN) against libm in double: within the bounds
 * kmath.h states, and the same bits on the generic ISA and on the widest
 * vector ISA this machine runs. */
Test(lower_elementwise, vector_math_within_documented_bounds)
{
	static float x[KM_N], got[2][4][KM_N];
	const char *ops[4] = { "Exp", "Sigmoid", "Tanh", "Erf" };
	int n = 0;
	for (int i = 0; i < 12000; i++)
		x[n++] = (float)(-3.0 + 6.0 * i / 11999.0);
	for (int i = 0; i < 11990; i++)
		x[n++] = (float)(-110.0 + 220.0 * i / 11989.0);
	const float special[] = { 0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-30f, -1e-30f, 88.7f, -87.3f, -104.5f };
	for (int i = 0; i < 10; i++)
		x[n++] = special[i];
	cr_assert_eq(n, KM_N);
	const char *isas[2] = { "generic", host_runs_isa("avx512") ? "avx512" : "avx2" };
	for (int v = 0; v < 2; v++) {
		mb *b = mb_new(17);
		Onnx__GraphProto *g = mb_main(b);
		mb_input(b, g, "x", MC_FLOAT, "24000");
		for (int k = 0; k < 4; k++) {
			char out[8];
			snprintf(out, sizeof out, "y%d", k);
			mb_node(b, g, ops[k], out, "x", out);
			mb_output(b, g, out);
		}
		blob in = { x, sizeof x };
		void *outs[4] = { got[v][0], got[v][1], got[v][2], got[v][3] };
		size_t bytes[4] = { sizeof x, sizeof x, sizeof x, sizeof x };
		cr_assert_eq(compile_run_isa(b, isas[v], 1, &in, 4, outs, bytes), 0, "%s", isas[v]);
		mb_free(b);
	}
	cr_expect_eq(memcmp(got[0], got[1], sizeof got[0]), 0, "the %s bits differ from the generic ISA's", isas[1]);
	double worst[4] = { 0 }, worst_abs[4] = { 0 };
	for (int i = 0; i < KM_N; i++) {
		double xd = x[i], want[4] = { exp(xd), 1 / (1 + exp(-xd)), tanh(xd), erf(xd) };
		for (int k = 0; k < 4; k++) {
			float y = got[0][k][i];
			if (isnan(xd)) {
				cr_expect(isnan(y), "%s(NaN) = %g", ops[k], y);
				continue;
			}
			if (k == 0 && (xd < -87.3 || xd > 88.7)) { /* past exp's range: 0 below -104, inf above 88.8 */
				if (xd < -104 || xd > 88.8)
					cr_expect(y == (xd < 0 ? 0.0f : INFINITY), "exp(%g) = %g", xd, y);
				continue;
			}
			if (k == 1 && xd < -87.3) { /* the sigmoid's floor: absolute */
				cr_expect(fabs(y - want[1]) < 5e-39, "sigmoid(%g) = %g", xd, y);
				continue;
			}
			double u = ulps(y, want[k]), a = fabs(y - want[k]);
			if (u > worst[k])
				worst[k] = u;
			if (a > worst_abs[k] && k >= 2)
				worst_abs[k] = a;
		}
	}
	/* kmath.h's bounds (exp 0.96 ulp; sigmoid 2.0 ulp; tanh 5.1 ulp, 3.0e-7
	 * absolute; erf 6.7 ulp, 4.0e-7 absolute), on this grid */
	const double ulp_bound[4] = { 0.96, 2.0, 5.1, 6.7 }, abs_bound[4] = { 0, 0, 3.0e-7, 4.0e-7 };
	for (int k = 0; k < 4; k++) {
		cr_expect(worst[k] <= ulp_bound[k], "%s: %.2f ulp", ops[k], worst[k]);
		if (abs_bound[k] > 0)
			cr_expect(worst_abs[k] <= abs_bound[k], "%s: %.3g absolute", ops[k], worst_abs[k]);
		cr_log_info("%s: %.2f ulp, %.3g absolute", ops[k], worst[k], worst_abs[k]);
	}
}
