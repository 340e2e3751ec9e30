/* dtypes, half-precision conversion, checked size arithmetic, shapes. */
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
	default: return "?";
	}
}

size_t mc_dtype_size(mc_dtype t)
{
	switch (t) {
	case MC_BOOL: case MC_UINT8: case MC_INT8: return 1;
	case MC_UINT16: case MC_INT16: case MC_FLOAT16: case MC_BFLOAT16: return 2;
	case MC_FLOAT: case MC_INT32: case MC_UINT32: return 4;
	case MC_INT64: case MC_UINT64: case MC_DOUBLE: return 8;
	default: return 0;
	}
}

bool mc_dtype_supported(mc_dtype t) { return mc_dtype_size(t) != 0; }

bool mc_dtype_is_float(mc_dtype t)
{
	return t == MC_FLOAT || t == MC_FLOAT16 || t == MC_DOUBLE || t == MC_BFLOAT16;
}

bool mc_dtype_is_int(mc_dtype t)
{
	switch (t) {
	case MC_UINT8: case MC_INT8: case MC_UINT16: case MC_INT16: case MC_INT32:
	case MC_INT64: case MC_UINT32: case MC_UINT64: return true;
	default: return false;
	}
}

bool mc_dtype_is_signed(mc_dtype t)
{
	return t == MC_INT8 || t == MC_INT16 || t == MC_INT32 || t == MC_INT64 ||
	       mc_dtype_is_float(t);
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
	size_t n = 1;
	if (s->rank < 0 || s->rank > MC_MAX_RANK)
		return false;
	for (int i = 0; i < s->rank; i++) {
		if (s->dims[i] < 0 || !mc_mul_size(n, (size_t)s->dims[i], &n))
			return false;
	}
	/* Keep bytes of the widest dtype representable in int64 too. */
	if (n > (size_t)INT64_MAX / 8)
		return false;
	*out = n;
	return true;
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
