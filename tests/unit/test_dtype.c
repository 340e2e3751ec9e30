/* dtype.c and shape helpers: half / bfloat16 conversion (rounding ties,
 * subnormals, inf, nan), checked sizes, broadcasting, shape parsing. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "modelc.h"

static float bits_to_float(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static uint32_t float_to_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static mc_shape shape_of(int rank, const int64_t *dims)
{
	mc_shape s = {.rank = rank};
	for (int i = 0; i < rank; i++)
		s.dims[i] = dims[i];
	return s;
}

Test(dtype, half_roundtrip)
{
	cr_assert_eq(mc_float_to_half(1.0f), 0x3c00);
	cr_assert_float_eq(mc_half_to_float(0x3c00), 1.0f, 0);
	cr_assert_eq(mc_float_to_half(65504.0f), 0x7bff);
	cr_assert_eq(mc_float_to_half(1e6f), 0x7c00);
	cr_assert_float_eq(mc_half_to_float(0x0001), 5.9604645e-8f, 1e-12);
}

/* Every finite half converts to float and back to itself. */
Test(dtype, half_every_finite_value_roundtrips)
{
	for (uint32_t h = 0; h < 0x10000; h++) {
		if ((h & 0x7c00) == 0x7c00)
			continue; /* inf / nan: tested below */
		uint16_t back = mc_float_to_half(mc_half_to_float((uint16_t)h));
		cr_assert_eq(back, h, "half 0x%04x came back as 0x%04x", h, back);
	}
}

Test(dtype, half_known_values)
{
	cr_assert_eq(mc_float_to_half(-2.0f), 0xc000);
	cr_assert_eq(mc_float_to_half(0.5f), 0x3800);
	cr_assert_eq(mc_float_to_half(0.0f), 0x0000);
	cr_assert_eq(mc_float_to_half(-0.0f), 0x8000);
	cr_assert_eq(mc_float_to_half(6.103515625e-05f), 0x0400);  /* smallest normal */
	cr_assert_eq(mc_float_to_half(-65504.0f), 0xfbff);
	cr_assert_eq(mc_half_to_float(0x3555), 0.333251953125f);
	cr_assert_eq(mc_half_to_float(0xfbff), -65504.0f);
	cr_assert_eq(mc_half_to_float(0x0400), 6.103515625e-05f);
}

Test(dtype, half_rounding_ties_to_even)
{
	/* 1 + 2^-11 is halfway between 1 (even mantissa) and 1 + 2^-10 */
	cr_assert_eq(mc_float_to_half(1.0f + 0x1p-11f), 0x3c00);
	/* 1 + 3*2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even) */
	cr_assert_eq(mc_float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);
	/* just above the tie rounds up, just below rounds down */
	cr_assert_eq(mc_float_to_half(nextafterf(1.0f + 0x1p-11f, 2.0f)), 0x3c01);
	cr_assert_eq(mc_float_to_half(nextafterf(1.0f + 3 * 0x1p-11f, 0.0f)), 0x3c01);
	/* 2048 + 1 is a tie between 2048 and 2050 (half spacing 2 there) */
	cr_assert_eq(mc_float_to_half(2049.0f), mc_float_to_half(2048.0f));
	cr_assert_eq(mc_float_to_half(2051.0f), mc_float_to_half(2052.0f));
}

Test(dtype, half_overflow_boundary)
{
	/* 65520 is the tie between 65504 (odd mantissa) and 65536: rounds to inf */
	cr_assert_eq(mc_float_to_half(65520.0f), 0x7c00);
	cr_assert_eq(mc_float_to_half(nextafterf(65520.0f, 0.0f)), 0x7bff);
	cr_assert_eq(mc_float_to_half(-65520.0f), 0xfc00);
	cr_assert_eq(mc_float_to_half(3.0e38f), 0x7c00);
}

Test(dtype, half_subnormals)
{
	cr_assert_eq(mc_float_to_half(0x1p-24f), 0x0001);          /* smallest subnormal */
	cr_assert_eq(mc_float_to_half(1023 * 0x1p-24f), 0x03ff);   /* largest subnormal */
	cr_assert_eq(mc_float_to_half(-3 * 0x1p-24f), 0x8003);
	/* 2^-25 is the tie between 0 and the smallest subnormal: to even (0) */
	cr_assert_eq(mc_float_to_half(0x1p-25f), 0x0000);
	cr_assert_eq(mc_float_to_half(-0x1p-25f), 0x8000);
	cr_assert_eq(mc_float_to_half(nextafterf(0x1p-25f, 1.0f)), 0x0001);
	/* 1.5 * 2^-24 ties between 1 (odd) and 2 (even) subnormal units */
	cr_assert_eq(mc_float_to_half(1.5f * 0x1p-24f), 0x0002);
	cr_assert_eq(mc_float_to_half(2.5f * 0x1p-24f), 0x0002);
	/* halfway between the largest subnormal and the smallest normal: up */
	cr_assert_eq(mc_float_to_half(1023.5f * 0x1p-24f), 0x0400);
	cr_assert_eq(mc_float_to_half(1e-10f), 0x0000);
	cr_assert_eq(mc_half_to_float(0x03ff), 1023 * 0x1p-24f);
	cr_assert_eq(mc_half_to_float(0x8001), -0x1p-24f);
	/* float subnormals become signed zero */
	cr_assert_eq(mc_float_to_half(bits_to_float(0x00000001)), 0x0000);
	cr_assert_eq(mc_float_to_half(bits_to_float(0x80000001)), 0x8000);
}

Test(dtype, half_inf_nan)
{
	cr_assert_eq(mc_float_to_half(INFINITY), 0x7c00);
	cr_assert_eq(mc_float_to_half(-INFINITY), 0xfc00);
	uint16_t n = mc_float_to_half(NAN);
	cr_assert_eq(n & 0x7c00, 0x7c00, "nan exponent: 0x%04x", n);
	cr_assert_neq(n & 0x03ff, 0, "nan must keep a non-zero mantissa: 0x%04x", n);
	/* a float nan whose payload lives only in the low bits stays a nan */
	n = mc_float_to_half(bits_to_float(0x7f800001));
	cr_assert(n > 0x7c00 && n <= 0x7fff, "0x%04x", n);
	n = mc_float_to_half(bits_to_float(0xff800001));
	cr_assert(n > 0xfc00, "negative nan keeps its sign: 0x%04x", n);
	cr_assert(isinf(mc_half_to_float(0x7c00)) && mc_half_to_float(0x7c00) > 0);
	cr_assert(isinf(mc_half_to_float(0xfc00)) && mc_half_to_float(0xfc00) < 0);
	cr_assert(isnan(mc_half_to_float(0x7e00)));
	cr_assert(isnan(mc_half_to_float(0x7c01)));
	cr_assert(isnan(mc_half_to_float(0xfe00)));
}

Test(dtype, bf16_values_and_ties)
{
	cr_assert_eq(mc_float_to_bf16(1.0f), 0x3f80);
	cr_assert_eq(mc_float_to_bf16(-2.0f), 0xc000);
	cr_assert_eq(mc_bf16_to_float(0x3f80), 1.0f);
	cr_assert_eq(mc_bf16_to_float(0x4049), 3.140625f);
	/* 1 + 2^-8 ties between 1 (even) and 1 + 2^-7: to 1 */
	cr_assert_eq(mc_float_to_bf16(1.0f + 0x1p-8f), 0x3f80);
	/* 1 + 3*2^-8 ties between 1 + 2^-7 (odd) and 1 + 2^-6: up */
	cr_assert_eq(mc_float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
	cr_assert_eq(mc_float_to_bf16(nextafterf(1.0f + 0x1p-8f, 2.0f)), 0x3f81);
	/* the largest float rounds up to inf; inf stays inf */
	cr_assert_eq(mc_float_to_bf16(bits_to_float(0x7f7fffff)), 0x7f80);
	cr_assert_eq(mc_float_to_bf16(INFINITY), 0x7f80);
	cr_assert_eq(mc_float_to_bf16(-INFINITY), 0xff80);
	/* subnormals are representable in bfloat16 */
	cr_assert_eq(mc_float_to_bf16(bits_to_float(0x00010000)), 0x0001);
	cr_assert_eq(mc_bf16_to_float(0x0001), bits_to_float(0x00010000));
	cr_assert_eq(mc_float_to_bf16(-0.0f), 0x8000);
}

Test(dtype, bf16_nan_stays_nan)
{
	/* truncation alone would turn this nan (payload in low bits) into inf */
	uint16_t n = mc_float_to_bf16(bits_to_float(0x7f800001));
	cr_assert(n > 0x7f80 && n <= 0x7fff, "0x%04x", n);
	n = mc_float_to_bf16(bits_to_float(0xffffffff));
	cr_assert((n & 0x7f80) == 0x7f80 && (n & 0x7f), "0x%04x", n);
	cr_assert(isnan(mc_bf16_to_float(mc_float_to_bf16(NAN))));
}

Test(dtype, bf16_every_value_roundtrips)
{
	for (uint32_t h = 0; h < 0x10000; h++) {
		float f = mc_bf16_to_float((uint16_t)h);
		cr_assert_eq(float_to_bits(f), h << 16);
		if (isnan(f))
			continue;
		cr_assert_eq(mc_float_to_bf16(f), h, "bf16 0x%04x", h);
	}
}

Test(dtype, names_and_sizes)
{
	cr_assert_str_eq(mc_dtype_name(MC_FLOAT), "float32");
	cr_assert_str_eq(mc_dtype_name(MC_DOUBLE), "float64");
	cr_assert_str_eq(mc_dtype_name((mc_dtype)99), "?");
	cr_assert_eq(mc_dtype_size(MC_BFLOAT16), 2);
	cr_assert_eq(mc_dtype_size(MC_UINT64), 8);
	cr_assert_eq(mc_dtype_size(MC_BOOL), 1);
	cr_assert_eq(mc_dtype_size(MC_STRING), 0);
	cr_assert(!mc_dtype_supported(MC_STRING));
	cr_assert(!mc_dtype_supported((mc_dtype)14)); /* complex64 */
	cr_assert(mc_dtype_is_float(MC_BFLOAT16));
	cr_assert(!mc_dtype_is_int(MC_BOOL));
	cr_assert(mc_dtype_is_int(MC_UINT64));
	cr_assert(!mc_dtype_is_signed(MC_UINT8));
	cr_assert(mc_dtype_is_signed(MC_INT8));
}

Test(shape, checked_size_arithmetic)
{
	size_t r;
	cr_assert(mc_mul_size(1u << 20, 1u << 20, &r) && r == (size_t)1 << 40);
	cr_assert(!mc_mul_size(SIZE_MAX / 2 + 1, 2, &r));
	cr_assert(mc_add_size(SIZE_MAX - 1, 1, &r) && r == SIZE_MAX);
	cr_assert(!mc_add_size(SIZE_MAX, 1, &r));
}

Test(shape, numel)
{
	size_t n = 99;
	mc_shape scalar = {.rank = 0};
	cr_assert(mc_shape_numel(&scalar, &n) && n == 1);
	mc_shape s = shape_of(4, (int64_t[]){1, 3, 224, 224});
	cr_assert(mc_shape_numel(&s, &n) && n == 150528);
	cr_assert_eq(mc_numel(&s), 150528);
	s = shape_of(3, (int64_t[]){5, 0, 7});
	cr_assert(mc_shape_numel(&s, &n) && n == 0);
}

Test(shape, numel_overflow_refused)
{
	size_t n = 12345;
	/* 2^32 * 2^32 overflows size_t */
	mc_shape s = shape_of(2, (int64_t[]){INT64_C(1) << 32, INT64_C(1) << 32});
	cr_assert(!mc_shape_numel(&s, &n));
	/* 2^62 elements fit size_t but not their bytes in int64 */
	s = shape_of(1, (int64_t[]){INT64_C(1) << 62});
	cr_assert(!mc_shape_numel(&s, &n));
	s = shape_of(2, (int64_t[]){INT64_C(1) << 31, INT64_C(1) << 31});
	cr_assert(!mc_shape_numel(&s, &n));
	/* the largest accepted count keeps 8-byte elements inside int64 */
	s = shape_of(1, (int64_t[]){INT64_MAX / 8});
	cr_assert(mc_shape_numel(&s, &n) && n == (size_t)(INT64_MAX / 8));
	n = 12345;
	s = shape_of(1, (int64_t[]){INT64_MAX / 8 + 1});
	cr_assert(!mc_shape_numel(&s, &n));
	s = shape_of(1, (int64_t[]){INT64_MAX});
	cr_assert(!mc_shape_numel(&s, &n));
	/* negative dims (unknown) and bad ranks */
	s = shape_of(2, (int64_t[]){-1, 3});
	cr_assert(!mc_shape_numel(&s, &n));
	s.rank = MC_MAX_RANK + 1;
	cr_assert(!mc_shape_numel(&s, &n));
	s.rank = -1;
	cr_assert(!mc_shape_numel(&s, &n));
	cr_assert_eq(n, 12345, "a refused shape leaves *out alone");
}

Test(shape, tensor_new_refuses_overflow)
{
	mc_shape s = shape_of(1, (int64_t[]){INT64_C(1) << 62});
	cr_assert_null(mc_tensor_new(MC_FLOAT, &s));
	s = shape_of(1, (int64_t[]){3});
	cr_assert_null(mc_tensor_new(MC_STRING, &s));
	mc_tensor *t = mc_tensor_new(MC_FLOAT16, &s);
	cr_assert_not_null(t);
	cr_assert_eq(t->nbytes, 6);
	cr_assert_eq(t->numel, 3);
	mc_tensor_free(t);
	s = shape_of(2, (int64_t[]){0, 4});
	t = mc_tensor_new(MC_INT64, &s);
	cr_assert_not_null(t);
	cr_assert_not_null(t->data, "empty tensors keep non-NULL data");
	cr_assert_eq(t->nbytes, 0);
	mc_tensor_free(t);
}

static void check_broadcast(int ra, const int64_t *a, int rb, const int64_t *b, int rw,
                            const int64_t *want)
{
	mc_shape sa = shape_of(ra, a), sb = shape_of(rb, b), out;
	char x[64], y[64];
	cr_assert(mc_broadcast(&sa, &sb, &out), "%s with %s", mc_shape_str(&sa, x, sizeof x),
	          mc_shape_str(&sb, y, sizeof y));
	mc_shape w = shape_of(rw, want);
	cr_assert(mc_shape_eq(&out, &w), "got %s", mc_shape_str(&out, x, sizeof x));
	/* broadcasting is symmetric */
	cr_assert(mc_broadcast(&sb, &sa, &out) && mc_shape_eq(&out, &w));
}

Test(shape, broadcast)
{
	check_broadcast(2, (int64_t[]){2, 3}, 1, (int64_t[]){3}, 2, (int64_t[]){2, 3});
	check_broadcast(2, (int64_t[]){2, 1}, 2, (int64_t[]){1, 4}, 2, (int64_t[]){2, 4});
	check_broadcast(0, NULL, 3, (int64_t[]){4, 1, 5}, 3, (int64_t[]){4, 1, 5});
	check_broadcast(4, (int64_t[]){8, 1, 6, 1}, 3, (int64_t[]){7, 1, 5}, 4,
	                (int64_t[]){8, 7, 6, 5});
	check_broadcast(1, (int64_t[]){0}, 1, (int64_t[]){1}, 1, (int64_t[]){0});
	check_broadcast(2, (int64_t[]){1, 0}, 2, (int64_t[]){3, 1}, 2, (int64_t[]){3, 0});
}

Test(shape, broadcast_incompatible)
{
	mc_shape a = shape_of(2, (int64_t[]){2, 3}), b = shape_of(1, (int64_t[]){2}), out;
	out.rank = 77;
	cr_assert(!mc_broadcast(&a, &b, &out));
	cr_assert_eq(out.rank, 77, "a refused broadcast leaves *out alone");
	a = shape_of(1, (int64_t[]){0});
	b = shape_of(1, (int64_t[]){2});
	cr_assert(!mc_broadcast(&a, &b, &out));
}

Test(shape, broadcast_strides)
{
	mc_shape in = shape_of(2, (int64_t[]){3, 1}), out = shape_of(3, (int64_t[]){2, 3, 4});
	int64_t st[MC_MAX_RANK];
	mc_broadcast_strides(&in, &out, st);
	cr_assert_eq(st[0], 0);
	cr_assert_eq(st[1], 1);
	cr_assert_eq(st[2], 0);
	mc_strides(&out, st);
	cr_assert(st[0] == 12 && st[1] == 4 && st[2] == 1);
}

Test(shape, shape_str)
{
	char buf[64];
	mc_shape s = shape_of(4, (int64_t[]){1, 3, 224, 224});
	cr_assert_str_eq(mc_shape_str(&s, buf, sizeof buf), "1x3x224x224");
	mc_shape scalar = {0};
	cr_assert_str_eq(mc_shape_str(&scalar, buf, sizeof buf), "scalar");
	char small[6];
	mc_shape_str(&s, small, sizeof small);
	cr_assert_str_eq(small, "1x3x2", "truncated to the buffer");
}

Test(shape, parse_shape)
{
	mc_shape s;
	cr_assert(mc_parse_shape("1x3x224x224", &s));
	cr_assert(s.rank == 4 && s.dims[0] == 1 && s.dims[1] == 3 && s.dims[2] == 224 &&
	          s.dims[3] == 224);
	cr_assert(mc_parse_shape("2,5", &s));
	cr_assert(s.rank == 2 && s.dims[0] == 2 && s.dims[1] == 5);
	cr_assert(mc_parse_shape("scalar", &s));
	cr_assert_eq(s.rank, 0);
	cr_assert(mc_parse_shape("0", &s));
	cr_assert(s.rank == 1 && s.dims[0] == 0);
	cr_assert(mc_parse_shape("1x1x1x1x1x1x1x1", &s));
	cr_assert_eq(s.rank, MC_MAX_RANK);
}

Test(shape, parse_shape_rejects_junk)
{
	static const char *const junk[] = {
		"", "x", "1x", "x1", "1xx2", "-1", "1x-2", "+1", " 1", "1 ", "1x2y", "abc",
		"1.5", "1x1x1x1x1x1x1x1x1", /* rank 9 */
		"99999999999999999999",     /* past int64 */
		"4611686018427387904",      /* 2^62: too many elements */
		"4294967296x4294967296",    /* overflows size_t */
		"Scalar",
	};
	for (size_t i = 0; i < sizeof junk / sizeof *junk; i++) {
		mc_shape s = {.rank = 3};
		cr_assert(!mc_parse_shape(junk[i], &s), "'%s' must be refused", junk[i]);
		cr_assert_eq(s.rank, 3, "'%s': a refused shape leaves *out alone", junk[i]);
	}
}
