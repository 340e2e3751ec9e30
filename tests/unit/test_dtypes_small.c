/* Small dtypes: float8 variants, float8e8m0, float4e2m1, int4/uint4 and
 * int2/uint2. Conversions, element access, unpacking at import, and Cast. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelc.h"

static char last_diag[1024];

static void capture(const char *line, void *user)
{
	(void)user;
	snprintf(last_diag, sizeof last_diag, "%s", line);
}

static void setup(void)
{
	last_diag[0] = 0;
	mc_set_diag_sink(capture, NULL);
}

TestSuite(dtypes_small, .init = setup);

static const mc_dtype float8_types[] = {MC_FLOAT8E4M3FN, MC_FLOAT8E4M3FNUZ, MC_FLOAT8E5M2,
                                        MC_FLOAT8E5M2FNUZ};

Test(dtypes_small, classification)
{
	for (mc_dtype t = MC_FLOAT8E4M3FN; t <= MC_INT2; t++) {
		cr_assert_eq(mc_dtype_size(t), 1, "%s", mc_dtype_name(t));
		cr_assert(mc_dtype_supported(t));
		cr_assert_neq(strcmp(mc_dtype_name(t), "?"), 0);
	}
	cr_assert_eq(mc_dtype_packed_bits(MC_INT4), 4);
	cr_assert_eq(mc_dtype_packed_bits(MC_FLOAT4E2M1), 4);
	cr_assert_eq(mc_dtype_packed_bits(MC_UINT2), 2);
	cr_assert_eq(mc_dtype_packed_bits(MC_FLOAT8E5M2), 8);
	cr_assert_eq(mc_dtype_packed_bits(MC_FLOAT), 32);
	cr_assert(mc_dtype_is_float(MC_FLOAT8E4M3FN) && mc_dtype_is_float(MC_FLOAT4E2M1));
	cr_assert(mc_dtype_is_int(MC_INT4) && mc_dtype_is_signed(MC_INT4));
	cr_assert(mc_dtype_is_int(MC_UINT2) && !mc_dtype_is_signed(MC_UINT2));
	cr_assert(!mc_dtype_is_signed(MC_FLOAT8E8M0) && mc_dtype_is_signed(MC_FLOAT8E5M2));
	cr_assert(!mc_dtype_is_small_float(MC_FLOAT16) && !mc_dtype_is_small_float(MC_INT4));
}

/* Every code that is not NaN comes back unchanged through its value. */
Test(dtypes_small, float8_codes_round_trip)
{
	for (size_t k = 0; k < sizeof float8_types / sizeof *float8_types; k++) {
		mc_dtype t = float8_types[k];
		int nans = 0;
		for (unsigned c = 0; c < 256; c++) {
			double v = mc_small_float_to_double(t, (uint8_t)c);
			if (isnan(v)) {
				nans++;
				continue;
			}
			for (int sat = 0; sat < (isinf(v) ? 1 : 2); sat++) /* saturating clamps inf */
				cr_assert_eq(mc_double_to_small_float(t, v, sat), c, "%s code 0x%02x (%g)",
				             mc_dtype_name(t), c, v);
		}
		/* E4M3FN: 0x7f, 0xff; E5M2: 3 NaN mantissas per sign; FNUZ: 0x80 */
		int want = t == MC_FLOAT8E4M3FN ? 2 : t == MC_FLOAT8E5M2 ? 6 : 1;
		cr_assert_eq(nans, want, "%s has %d NaN codes", mc_dtype_name(t), nans);
	}
}

Test(dtypes_small, float8_known_values)
{
	cr_assert_eq(mc_small_float_to_double(MC_FLOAT8E4M3FN, 0x7e), 448);
	cr_assert_eq(mc_small_float_to_double(MC_FLOAT8E4M3FNUZ, 0x7f), 240);
	cr_assert_eq(mc_small_float_to_double(MC_FLOAT8E5M2, 0x7b), 57344);
	cr_assert_eq(mc_small_float_to_double(MC_FLOAT8E5M2FNUZ, 0x7f), 57344);
	cr_assert_eq(mc_small_float_to_double(MC_FLOAT8E5M2, 0xfc), -INFINITY);
	cr_assert_eq(mc_small_float_to_double(MC_FLOAT8E4M3FN, 0x01), ldexp(1, -9));
	cr_assert_eq(mc_small_float_to_double(MC_FLOAT8E5M2FNUZ, 0x01), ldexp(1, -17));
	cr_assert_eq(mc_small_float_to_double(MC_FLOAT8E4M3FN, 0x38), 1.0);
	cr_assert_eq(mc_small_float_to_double(MC_FLOAT8E4M3FNUZ, 0x40), 1.0);

	/* round to nearest even, on the rounded value's range */
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E4M3FN, 464, false), 0x7e);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E4M3FN, 465, false), 0x7f);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E4M3FN, 465, true), 0x7e);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E4M3FN, -1e6, false), 0xff);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E5M2, 61439, false), 0x7b);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E5M2, 61440, false), 0x7c);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E5M2, -INFINITY, false), 0xfc);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E5M2, -INFINITY, true), 0xfb);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E4M3FNUZ, INFINITY, false), 0x80);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E4M3FNUZ, INFINITY, true), 0x7f);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E5M2FNUZ, 1e6, false), 0x80);
	/* subnormals: 2^-10 ties to 0, 1.5 * 2^-9 ties to 2 * 2^-9 */
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E4M3FN, ldexp(1, -10), true), 0x00);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E4M3FN, 1.5 * ldexp(1, -9), true), 0x02);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E4M3FN, 1.0625, true), 0x38);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E4M3FN, 1.1875, true), 0x3a);
	/* negative zero: kept where it exists, +0 in the FNUZ types */
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E4M3FN, -1e-7, true), 0x80);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E5M2FNUZ, -1e-7, true), 0x00);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E4M3FNUZ, -0.0, false), 0x00);
	/* NaN */
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E4M3FN, NAN, true), 0x7f);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E4M3FN, -NAN, true), 0xff);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E5M2, NAN, true), 0x7e);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E4M3FNUZ, -NAN, true), 0x80);
}

Test(dtypes_small, float4e2m1)
{
	static const double values[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
	for (unsigned c = 0; c < 16; c++) {
		double want = c & 8 ? -values[c & 7] : values[c & 7];
		double got = mc_small_float_to_double(MC_FLOAT4E2M1, (uint8_t)c);
		cr_assert_eq(got, want, "code %u: %g", c, got);
		cr_assert_eq(!!signbit(got), !!(c & 8));
		cr_assert_eq(mc_double_to_small_float(MC_FLOAT4E2M1, want, true), c);
	}
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT4E2M1, 0.25, true), 0x0);  /* tie to even */
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT4E2M1, 0.75, true), 0x2);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT4E2M1, -3.5, true), 0xe);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT4E2M1, 5, true), 0x6);
	/* no inf, no NaN: always saturates, NaN gives -0 (ONNX's reference) */
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT4E2M1, 1e6, false), 0x7);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT4E2M1, -INFINITY, false), 0xf);
	cr_assert_eq(mc_double_to_small_float(MC_FLOAT4E2M1, NAN, false), 0x8);
}

Test(dtypes_small, float8e8m0)
{
	/* test_cast_e8m0_FLOAT_to_FLOAT8E8M0: round up, saturate */
	static const double in[8] = {0, 0.124, 0.25, 0.5, 1.1, 2, 4, 8};
	static const uint8_t want[8] = {0x00, 0x7c, 0x7d, 0x7e, 0x80, 0x80, 0x81, 0x82};
	for (int i = 0; i < 8; i++)
		cr_assert_eq(mc_double_to_small_float(MC_FLOAT8E8M0, in[i], true), want[i], "%g",
		             in[i]);
	cr_assert_eq(mc_double_to_e8m0(3, true, MC_ROUND_DOWN), 0x80);
	cr_assert_eq(mc_double_to_e8m0(1.5, true, MC_ROUND_NEAREST), 0x80);
	cr_assert_eq(mc_double_to_e8m0(1.49, true, MC_ROUND_NEAREST), 0x7f);
	cr_assert_eq(mc_double_to_e8m0(-4, true, MC_ROUND_UP), 0x81);
	cr_assert_eq(mc_double_to_e8m0(NAN, true, MC_ROUND_UP), 0xff);
	cr_assert_eq(mc_double_to_e8m0(INFINITY, true, MC_ROUND_UP), 0xfe);
	cr_assert_eq(mc_double_to_e8m0(INFINITY, false, MC_ROUND_NEAREST), 0xff);
	cr_assert_eq(mc_double_to_e8m0(0, false, MC_ROUND_NEAREST), 0xff);
	cr_assert_eq(mc_double_to_e8m0(ldexp(1.5, 127), true, MC_ROUND_UP), 0xfe);
	cr_assert_eq(mc_double_to_e8m0(ldexp(1.5, 127), false, MC_ROUND_UP), 0xff);
	cr_assert_eq(mc_double_to_e8m0(ldexp(1, -130), true, MC_ROUND_UP), 0x00);
	cr_assert_eq(mc_small_float_to_double(MC_FLOAT8E8M0, 0x00), ldexp(1, -127));
	cr_assert_eq(mc_small_float_to_double(MC_FLOAT8E8M0, 0x7f), 1.0);
	cr_assert_eq(mc_small_float_to_double(MC_FLOAT8E8M0, 0xfe), ldexp(1, 127));
	cr_assert(isnan(mc_small_float_to_double(MC_FLOAT8E8M0, 0xff)));
}

Test(dtypes_small, element_access)
{
	mc_shape s = {.rank = 1, .dims = {4}};
	mc_tensor *i4 = mc_tensor_new(MC_INT4, &s), *u2 = mc_tensor_new(MC_UINT2, &s);
	mc_tensor *f8 = mc_tensor_new(MC_FLOAT8E4M3FN, &s);
	cr_assert(i4 && u2 && f8);
	cr_assert_eq(i4->nbytes, 4);
	/* integers wrap to the width */
	mc_set_i(i4, 0, -9);
	mc_set_i(i4, 1, 8);
	mc_set_i(i4, 2, -8);
	mc_set_i(i4, 3, 23);
	cr_assert_eq(mc_get_i(i4, 0), 7);
	cr_assert_eq(mc_get_i(i4, 1), -8);
	cr_assert_eq(mc_get_i(i4, 2), -8);
	cr_assert_eq(mc_get_i(i4, 3), 7);
	cr_assert_eq(mc_get_f(i4, 1), -8.0);
	mc_set_i(u2, 0, 5);
	mc_set_i(u2, 1, -1);
	cr_assert_eq(mc_get_i(u2, 0), 1);
	cr_assert_eq(mc_get_i(u2, 1), 3);
	/* floats saturate, as for int8 */
	mc_set_f(i4, 0, 100.0);
	mc_set_f(i4, 1, -100.0);
	mc_set_f(i4, 2, -2.7);
	cr_assert_eq(mc_get_i(i4, 0), 7);
	cr_assert_eq(mc_get_i(i4, 1), -8);
	cr_assert_eq(mc_get_i(i4, 2), -2);
	/* small floats store their code and saturate */
	mc_set_f(f8, 0, 1e6);
	mc_set_f(f8, 1, 0.3);
	mc_set_i(f8, 2, -3);
	cr_assert_eq(((uint8_t *)f8->data)[0], 0x7e);
	cr_assert_eq(mc_get_f(f8, 0), 448);
	cr_assert_eq(mc_get_f(f8, 1), 0.3125);
	cr_assert_eq(mc_get_i(f8, 2), -3);
	mc_tensor_free(i4);
	mc_tensor_free(u2);
	mc_tensor_free(f8);
}

/* TensorProto bytes, hand-encoded: dims (1), data_type (2), int32_data (5),
 * raw_data (9). */
Test(dtypes_small, import_unpacks_raw_data)
{
	/* int4 [3]: 0x21 0x0f holds 1, 2 | -1, padding */
	static const uint8_t int4_pb[] = {0x08, 0x03, 0x10, 22, 0x4a, 0x02, 0x21, 0x0f};
	mc_tensor *t = mc_tensor_from_pb(int4_pb, sizeof int4_pb);
	cr_assert(t, "%s", last_diag);
	cr_assert_eq(t->dtype, MC_INT4);
	cr_assert_eq(t->numel, 3);
	cr_assert_eq(mc_get_i(t, 0), 1);
	cr_assert_eq(mc_get_i(t, 1), 2);
	cr_assert_eq(mc_get_i(t, 2), -1);
	mc_tensor_free(t);

	/* float4e2m1 [2] in one byte: 0x7 (6) and 0xa (-1) */
	static const uint8_t f4_pb[] = {0x08, 0x02, 0x10, 23, 0x4a, 0x01, 0xa7};
	t = mc_tensor_from_pb(f4_pb, sizeof f4_pb);
	cr_assert(t, "%s", last_diag);
	cr_assert_eq(mc_get_f(t, 0), 6);
	cr_assert_eq(mc_get_f(t, 1), -1);
	mc_tensor_free(t);

	/* int2 [5]: 0xe4 holds 0, 1, -2, -1; 0x01 holds 1 */
	static const uint8_t i2_pb[] = {0x08, 0x05, 0x10, 26, 0x4a, 0x02, 0xe4, 0x01};
	t = mc_tensor_from_pb(i2_pb, sizeof i2_pb);
	cr_assert(t, "%s", last_diag);
	static const int64_t i2_want[5] = {0, 1, -2, -1, 1};
	for (int i = 0; i < 5; i++)
		cr_assert_eq(mc_get_i(t, (size_t)i), i2_want[i], "element %d", i);
	mc_tensor_free(t);

	/* the packed length is checked: 3 int4 need 2 bytes, not 3 */
	static const uint8_t bad_pb[] = {0x08, 0x03, 0x10, 22, 0x4a, 0x03, 0x21, 0x0f, 0x00};
	cr_assert_null(mc_tensor_from_pb(bad_pb, sizeof bad_pb));
	cr_assert(strstr(last_diag, "raw_data has 3 bytes but its shape needs 2"), "%s", last_diag);
}

Test(dtypes_small, import_unpacks_int32_data)
{
	/* uint2 [5]: two int32_data entries, one packed byte each */
	static const uint8_t u2_pb[] = {0x08, 0x05, 0x10, 25, 0x28, 0xe4, 0x01, 0x28, 0x02};
	mc_tensor *t = mc_tensor_from_pb(u2_pb, sizeof u2_pb);
	cr_assert(t, "%s", last_diag);
	static const int64_t u2_want[5] = {0, 1, 2, 3, 2};
	for (int i = 0; i < 5; i++)
		cr_assert_eq(mc_get_i(t, (size_t)i), u2_want[i], "element %d", i);
	mc_tensor_free(t);

	/* float8e5m2 [2]: one bit pattern per entry (1.0, -inf) */
	static const uint8_t f8_pb[] = {0x08, 0x02, 0x10, 19, 0x28, 0x3c, 0x28, 0xfc, 0x01};
	t = mc_tensor_from_pb(f8_pb, sizeof f8_pb);
	cr_assert(t, "%s", last_diag);
	cr_assert_eq(mc_get_f(t, 0), 1.0);
	cr_assert_eq(mc_get_f(t, 1), -INFINITY);
	mc_tensor_free(t);

	/* uint4 [3] needs 2 packed entries */
	static const uint8_t bad_pb[] = {0x08, 0x03, 0x10, 21, 0x28, 0x21};
	cr_assert_null(mc_tensor_from_pb(bad_pb, sizeof bad_pb));
	cr_assert(strstr(last_diag, "int32_data holds 1 packed bytes but its shape needs 2"), "%s",
	          last_diag);
}

/* ---- Cast and CastLike through their registry entries ---- */

static mc_attr attr_int(const char *name, int64_t v)
{
	return (mc_attr){.name = (char *)name, .type = MC_ATTR_INT, .i = v};
}

static mc_attr attr_string(const char *name, const char *v)
{
	return (mc_attr){.name = (char *)name, .type = MC_ATTR_STRING, .s = (char *)v};
}

static mc_tensor *floats(size_t n, const double *vals)
{
	mc_shape s = {.rank = 1, .dims = {(int64_t)n}};
	mc_tensor *x = mc_tensor_new(MC_FLOAT, &s);
	cr_assert(x);
	for (size_t i = 0; i < n; i++)
		mc_set_f(x, i, vals[i]);
	return x;
}

/* Runs op on constant inputs; the output, or NULL after an error. */
static mc_tensor *run(const char *op_type, int opset, mc_attr *attrs, int n_attrs, int n_in,
                      mc_tensor **in)
{
	const mc_op *op = mc_registry_find(op_type, opset, NULL);
	cr_assert(op, "%s is not registered at opset %d", op_type, opset);
	mc_node n = {.name = "t", .op_type = (char *)op_type, .domain = "", .opset = opset,
	             .op = op, .n_inputs = n_in, .n_outputs = 1, .n_attrs = n_attrs,
	             .attrs = attrs};
	mc_value vals[2] = {{0}}, out = {0};
	const mc_value *inv[2];
	mc_value *outv[1] = {&out};
	mc_tensor *res = NULL;
	for (int k = 0; k < n_in; k++) {
		vals[k] = (mc_value){.name = "in", .dtype = in[k]->dtype, .shape = in[k]->shape,
		                     .typed = true, .konst = in[k]};
		inv[k] = &vals[k];
	}
	int rc = op->parse ? op->parse(&n) : 0;
	mc_infer_ctx ic = {.node = &n, .n_in = n_in, .n_out = 1, .in = inv, .out = outv};
	if (!rc)
		rc = op->infer(&ic);
	if (!rc) {
		res = mc_tensor_new(out.dtype, &out.shape);
		cr_assert(res);
		mc_eval_ctx ec = {.node = &n, .n_in = n_in, .n_out = 1,
		                  .in = (const mc_tensor *const *)in, .out = &res};
		rc = op->eval(&ec);
	}
	free(n.params);
	for (int k = 0; k < n_in; k++)
		mc_tensor_free(in[k]);
	if (rc) {
		mc_tensor_free(res);
		res = NULL;
	}
	return res;
}

static void expect_codes(const mc_tensor *y, mc_dtype t, size_t n, const uint8_t *want)
{
	cr_assert(y, "op failed: %s", last_diag);
	cr_assert_eq(y->dtype, t, "dtype %s", mc_dtype_name(y->dtype));
	cr_assert_eq(y->numel, n);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(((const uint8_t *)y->data)[i], want[i], "element %zu: 0x%02x, want 0x%02x",
		             i, ((const uint8_t *)y->data)[i], want[i]);
}

Test(dtypes_small, cast_saturate_attribute)
{
	static const double in[5] = {0.47, 1e6, -INFINITY, NAN, -1e-7};
	mc_attr sat[1] = {attr_int("to", MC_FLOAT8E4M3FN)};
	mc_tensor *x[1] = {floats(5, in)};
	mc_tensor *y = run("Cast", 19, sat, 1, 1, x);
	expect_codes(y, MC_FLOAT8E4M3FN, 5, (const uint8_t[]){0x2f, 0x7e, 0xfe, 0x7f, 0x80});
	mc_tensor_free(y);

	mc_attr nosat[2] = {attr_int("to", MC_FLOAT8E5M2), attr_int("saturate", 0)};
	x[0] = floats(5, in);
	y = run("Cast", 19, nosat, 2, 1, x);
	expect_codes(y, MC_FLOAT8E5M2, 5, (const uint8_t[]){0x38, 0x7c, 0xfc, 0x7e, 0x80});
	mc_tensor_free(y);

	mc_attr bad[2] = {attr_int("to", MC_FLOAT8E5M2), attr_int("saturate", 2)};
	x[0] = floats(1, in);
	cr_assert_null(run("Cast", 19, bad, 2, 1, x));
	cr_assert(strstr(last_diag, "saturate must be 0 or 1"), "%s", last_diag);
}

Test(dtypes_small, cast_to_and_from_int4)
{
	/* floats to int4 wrap, as ONNX's test data has it (-9 gives 7) */
	mc_attr to[1] = {attr_int("to", MC_INT4)};
	mc_tensor *x[1] = {floats(4, (const double[]){-9, 8, 2.7, -1})};
	mc_tensor *y = run("Cast", 21, to, 1, 1, x);
	expect_codes(y, MC_INT4, 4, (const uint8_t[]){7, 0xf8, 2, 0xff});

	/* and back to float */
	mc_attr to_f[1] = {attr_int("to", MC_FLOAT)};
	mc_tensor *x2[1] = {y};
	mc_tensor *z = run("Cast", 21, to_f, 1, 1, x2);
	cr_assert(z, "%s", last_diag);
	static const double want[4] = {7, -8, 2, -1};
	for (size_t i = 0; i < 4; i++)
		cr_assert_eq(mc_get_f(z, i), want[i], "element %zu", i);
	mc_tensor_free(z);
}

Test(dtypes_small, castlike_round_mode)
{
	mc_shape empty = {.rank = 1, .dims = {0}};
	static const double in[3] = {3, 1.5, 1.25};
	mc_attr down[1] = {attr_string("round_mode", "down")};
	mc_tensor *x[2] = {floats(3, in), mc_tensor_new(MC_FLOAT8E8M0, &empty)};
	mc_tensor *y = run("CastLike", 25, down, 1, 2, x);
	expect_codes(y, MC_FLOAT8E8M0, 3, (const uint8_t[]){0x80, 0x7f, 0x7f});
	mc_tensor_free(y);

	mc_attr nearest[1] = {attr_string("round_mode", "nearest")};
	mc_tensor *x2[2] = {floats(3, in), mc_tensor_new(MC_FLOAT8E8M0, &empty)};
	y = run("CastLike", 25, nearest, 1, 2, x2);
	expect_codes(y, MC_FLOAT8E8M0, 3, (const uint8_t[]){0x81, 0x80, 0x7f});
	mc_tensor_free(y);

	mc_attr bad[1] = {attr_string("round_mode", "sideways")};
	mc_tensor *x3[2] = {floats(1, in), mc_tensor_new(MC_FLOAT8E8M0, &empty)};
	cr_assert_null(run("CastLike", 25, bad, 1, 2, x3));
	cr_assert(strstr(last_diag, "round_mode must be"), "%s", last_diag);
}
