/* dtypes, half-precision and small-float conversion, checked size
 * arithmetic, shapes. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "modelc.h"

const char *mc_dtype_name(mc_dtype t)
{
	switch (t) {
	case MC_FLOAT: return "float32";
	case MC_UINT8: return "uint8";
	case MC_INT8: return "int8";
	case MC_UINT16: return "uint16";
	case MC_INT16: return "int16";
	case MC_INT32: return "int32";
	case MC_INT64: return "int64";
	case MC_STRING: return "string";
	case MC_BOOL: return "bool";
	case MC_FLOAT16: return "float16";
	case MC_DOUBLE: return "float64";
	case MC_UINT32: return "uint32";
	case MC_UINT64: return "uint64";
	case MC_BFLOAT16: return "bfloat16";
	case MC_FLOAT8E4M3FN: return "float8e4m3fn";
	case MC_FLOAT8E4M3FNUZ: return "float8e4m3fnuz";
	case MC_FLOAT8E5M2: return "float8e5m2";
	case MC_FLOAT8E5M2FNUZ: return "float8e5m2fnuz";
	case MC_UINT4: return "uint4";
	case MC_INT4: return "int4";
	case MC_FLOAT4E2M1: return "float4e2m1";
	case MC_FLOAT8E8M0: return "float8e8m0";
	case MC_UINT2: return "uint2";
	case MC_INT2: return "int2";
	default: return "?";
	}
}

size_t mc_dtype_size(mc_dtype t)
{
	switch (t) {
	case MC_BOOL: case MC_UINT8: case MC_INT8: return 1;
	/* one byte per element in memory, whatever the packed width */
	case MC_FLOAT8E4M3FN: case MC_FLOAT8E4M3FNUZ: case MC_FLOAT8E5M2:
	case MC_FLOAT8E5M2FNUZ: case MC_FLOAT8E8M0: case MC_UINT4: case MC_INT4:
	case MC_FLOAT4E2M1: case MC_UINT2: case MC_INT2: return 1;
	case MC_UINT16: case MC_INT16: case MC_FLOAT16: case MC_BFLOAT16: return 2;
	case MC_FLOAT: case MC_INT32: case MC_UINT32: return 4;
	case MC_INT64: case MC_UINT64: case MC_DOUBLE: return 8;
	default: return 0;
	}
}

int mc_dtype_packed_bits(mc_dtype t)
{
	switch (t) {
	case MC_UINT4: case MC_INT4: case MC_FLOAT4E2M1: return 4;
	case MC_UINT2: case MC_INT2: return 2;
	default: return 8 * (int)mc_dtype_size(t);
	}
}

bool mc_dtype_supported(mc_dtype t) { return mc_dtype_size(t) != 0; }

bool mc_dtype_is_small_float(mc_dtype t)
{
	switch (t) {
	case MC_FLOAT8E4M3FN: case MC_FLOAT8E4M3FNUZ: case MC_FLOAT8E5M2:
	case MC_FLOAT8E5M2FNUZ: case MC_FLOAT8E8M0: case MC_FLOAT4E2M1: return true;
	default: return false;
	}
}

bool mc_dtype_is_float(mc_dtype t)
{
	return t == MC_FLOAT || t == MC_FLOAT16 || t == MC_DOUBLE || t == MC_BFLOAT16 ||
	       mc_dtype_is_small_float(t);
}

bool mc_dtype_is_int(mc_dtype t)
{
	switch (t) {
	case MC_UINT8: case MC_INT8: case MC_UINT16: case MC_INT16: case MC_INT32:
	case MC_INT64: case MC_UINT32: case MC_UINT64:
	case MC_UINT4: case MC_INT4: case MC_UINT2: case MC_INT2: return true;
	default: return false;
	}
}

bool mc_dtype_is_signed(mc_dtype t)
{
	return t == MC_INT8 || t == MC_INT16 || t == MC_INT32 || t == MC_INT64 ||
	       t == MC_INT4 || t == MC_INT2 || (mc_dtype_is_float(t) && t != MC_FLOAT8E8M0);
}

float mc_half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
	uint32_t bits;
	if (exp == 0) {
		if (man == 0) {
			bits = sign;
		} else { /* subnormal: value is man * 2^-24 */
			float f = ldexpf((float)man, -24);
			return sign ? -f : f;
		}
	} else if (exp == 31) {
		bits = sign | 0x7f800000u | (man << 13);
	} else {
		bits = sign | ((exp + 112) << 23) | (man << 13);
	}
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

uint16_t mc_float_to_half(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
	uint32_t ax = x & 0x7fffffffu;
	if (ax >= 0x7f800000u) /* inf or nan */
		return sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0);
	if (ax >= 0x477ff000u) /* rounds to >= 65520: overflow */
		return sign | 0x7c00;
	if (ax < 0x38800000u) { /* below the smallest normal half: subnormal */
		float a;
		memcpy(&a, &ax, 4);
		/* nearbyint uses the current rounding mode: ties to even */
		return sign | (uint16_t)nearbyintf(a * 16777216.0f);
	}
	uint32_t mant_odd = (ax >> 13) & 1;
	ax += 0xfff + mant_odd; /* round to nearest even */
	return sign | (uint16_t)((ax - (112u << 23)) >> 13);
}

float mc_bf16_to_float(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16;
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

uint16_t mc_float_to_bf16(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

/* ---- small floats: the float8 types and float4e2m1 ----
 * One description per format; encoding rounds the exact value to the
 * format's precision (round to nearest even) and only then looks at the
 * range, so "[x] > FLT_MAX" in the spec's tables means the rounded value. */
typedef mc_small_float small_float;

const mc_small_float *mc_small_float_format(mc_dtype t)
{
	static const small_float e4m3fn = {3, 7, 7, 0x7e, false, true, false, 0x7f};
	static const small_float e4m3fnuz = {3, 8, 7, 0x7f, false, true, true, 0x80};
	static const small_float e5m2 = {2, 15, 7, 0x7b, true, true, false, 0x7e};
	static const small_float e5m2fnuz = {2, 16, 7, 0x7f, false, true, true, 0x80};
	static const small_float e2m1 = {1, 1, 3, 0x7, false, false, false, 0};
	switch (t) {
	case MC_FLOAT8E4M3FN: return &e4m3fn;
	case MC_FLOAT8E4M3FNUZ: return &e4m3fnuz;
	case MC_FLOAT8E5M2: return &e5m2;
	case MC_FLOAT8E5M2FNUZ: return &e5m2fnuz;
	case MC_FLOAT4E2M1: return &e2m1;
	default: return NULL;
	}
}

/* Value of a code without its sign bit (mag <= f->max). */
static double small_float_magnitude(const small_float *f, unsigned mag)
{
	unsigned e = mag >> f->mbits, m = mag & ((1u << f->mbits) - 1);
	if (e == 0) /* subnormal */
		return ldexp((double)m, 1 - f->bias - f->mbits);
	return ldexp((double)((1u << f->mbits) | m), (int)e - f->bias - f->mbits);
}

double mc_small_float_to_double(mc_dtype t, uint8_t code)
{
	if (t == MC_FLOAT8E8M0)
		return code == 0xff ? NAN : ldexp(1.0, code - 127);
	const small_float *f = mc_small_float_format(t);
	if (!f)
		return 0;
	unsigned sign_bit = 1u << f->sign_shift, mag = code & (sign_bit - 1);
	if (f->fnuz && code == 0x80)
		return NAN;
	if (mag > f->max)
		return f->has_inf && mag == f->max + 1u ? ((code & sign_bit) ? -INFINITY : INFINITY)
		                                        : NAN;
	double v = small_float_magnitude(f, mag);
	return (code & sign_bit) ? -v : v;
}

/* Code of a value already rounded to the format (0 < r <= largest). */
static unsigned small_float_encode_exact(const small_float *f, double r)
{
	int e;
	frexp(r, &e); /* r = m * 2^e, m in [0.5, 1): leading bit at 2^(e-1) */
	int exp_field = e - 1 + f->bias;
	if (exp_field < 1) /* subnormal: r is a multiple of the smallest step */
		return (unsigned)ldexp(r, f->bias - 1 + f->mbits);
	unsigned m = (unsigned)ldexp(r, f->mbits - (e - 1)) - (1u << f->mbits);
	return ((unsigned)exp_field << f->mbits) | m;
}

uint8_t mc_double_to_small_float(mc_dtype t, double v, bool saturate)
{
	if (t == MC_FLOAT8E8M0)
		return mc_double_to_e8m0(v, saturate, MC_ROUND_UP);
	const small_float *f = mc_small_float_format(t);
	if (!f)
		return 0;
	unsigned sign = signbit(v) ? 1u << f->sign_shift : 0;
	if (!f->has_nan) /* float4e2m1: no NaN, no inf, always saturates */
		saturate = true;
	if (v != v) {
		if (!f->has_nan) /* ONNX's reference gives -0 */
			return (uint8_t)(1u << f->sign_shift);
		return f->fnuz ? 0x80 : (uint8_t)(sign | f->nan);
	}
	double a = fabs(v), r = a;
	if (!isinf(a)) {
		/* Round on the grid of a's binade, never finer than subnormals. */
		int e;
		frexp(a, &e);
		int lead = e - 1 < 1 - f->bias ? 1 - f->bias : e - 1;
		double step = ldexp(1.0, lead - f->mbits);
		r = nearbyint(a / step) * step; /* ties to even in the default mode */
	}
	if (r > small_float_magnitude(f, f->max)) {
		if (saturate)
			return (uint8_t)(sign | f->max);
		if (f->has_inf)
			return (uint8_t)(sign | (f->max + 1u));
		return f->fnuz ? 0x80 : (uint8_t)(sign | f->nan);
	}
	if (r == 0)
		return f->fnuz ? 0 : (uint8_t)sign;
	return (uint8_t)(sign | small_float_encode_exact(f, r));
}

uint8_t mc_double_to_e8m0(double v, bool saturate, mc_round_mode mode)
{
	const uint8_t nan = 0xff, largest = 0xfe, smallest = 0;
	if (v != v)
		return nan;
	double a = fabs(v);
	if (isinf(a))
		return saturate ? largest : nan;
	if (a == 0)
		return saturate ? smallest : nan;
	int e;
	double m = 2 * frexp(a, &e); /* a = m * 2^(e-1), m in [1, 2) */
	int p = e - 1;
	if ((mode == MC_ROUND_UP && m > 1) || (mode == MC_ROUND_NEAREST && m >= 1.5))
		p++;
	if (p > 127)
		return saturate ? largest : nan;
	if (p < -127)
		return saturate ? smallest : nan;
	return (uint8_t)(p + 127);
}

bool mc_mul_size(size_t a, size_t b, size_t *out)
{
	return !__builtin_mul_overflow(a, b, out);
}

bool mc_add_size(size_t a, size_t b, size_t *out)
{
	return !__builtin_add_overflow(a, b, out);
}

bool mc_shape_numel(const mc_shape *s, size_t *out)
{
	size_t nonzero = 1; /* product of the non-zero dims: the largest stride */
	bool empty = false;
	if (s->rank < 0 || s->rank > MC_MAX_RANK)
		return false;
	for (int i = 0; i < s->rank; i++) {
		if (s->dims[i] < 0)
			return false;
		if (s->dims[i] == 0)
			empty = true;
		else if (!mc_mul_size(nonzero, (size_t)s->dims[i], &nonzero))
			return false;
	}
	/* Keep bytes of the widest dtype representable in int64 too; for an
	 * empty tensor, the product of its other dimensions, so that any
	 * partial product of dimensions (loop bounds, strides) fits as well. */
	if (nonzero > (size_t)INT64_MAX / 8)
		return false;
	*out = empty ? 0 : nonzero;
	return true;
}

size_t mc_shape_extent(const mc_shape *s)
{
	size_t n = 1;
	for (int i = 0; i < s->rank && i < MC_MAX_RANK; i++)
		if (s->dims[i] > 1 && !mc_mul_size(n, (size_t)s->dims[i], &n))
			return SIZE_MAX;
	return n;
}

size_t mc_numel(const mc_shape *s)
{
	size_t n = 1;
	for (int i = 0; i < s->rank; i++)
		n *= (size_t)s->dims[i];
	return n;
}

bool mc_shape_eq(const mc_shape *a, const mc_shape *b)
{
	if (a->rank != b->rank)
		return false;
	for (int i = 0; i < a->rank; i++)
		if (a->dims[i] != b->dims[i])
			return false;
	return true;
}

const char *mc_shape_str(const mc_shape *s, char *buf, size_t n)
{
	size_t off = 0;
	if (s->rank == 0) {
		snprintf(buf, n, "scalar");
		return buf;
	}
	buf[0] = 0;
	for (int i = 0; i < s->rank && off < n; i++) {
		int k = snprintf(buf + off, n - off, i ? "x%lld" : "%lld", (long long)s->dims[i]);
		if (k < 0)
			break;
		off += (size_t)k;
	}
	return buf;
}

bool mc_broadcast(const mc_shape *a, const mc_shape *b, mc_shape *out)
{
	int r = a->rank > b->rank ? a->rank : b->rank;
	mc_shape o = {.rank = r};
	for (int i = 0; i < r; i++) {
		int ia = i - (r - a->rank), ib = i - (r - b->rank);
		int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
		if (da == db || db == 1)
			o.dims[i] = da;
		else if (da == 1)
			o.dims[i] = db;
		else
			return false;
	}
	*out = o;
	return true;
}

void mc_strides(const mc_shape *s, int64_t strides[MC_MAX_RANK])
{
	int64_t st = 1;
	for (int i = s->rank - 1; i >= 0; i--) {
		strides[i] = st;
		st *= s->dims[i];
	}
}

void mc_broadcast_strides(const mc_shape *in, const mc_shape *out,
                          int64_t strides[MC_MAX_RANK])
{
	int64_t own[MC_MAX_RANK];
	mc_strides(in, own);
	for (int i = 0; i < out->rank; i++) {
		int j = i - (out->rank - in->rank);
		strides[i] = (j < 0 || in->dims[j] == 1) ? 0 : own[j];
	}
}
