/* Host tensors and element access through double / int64. */
#include <stdlib.h>
#include <string.h>

#include "modelc.h"

mc_tensor *mc_tensor_new(mc_dtype t, const mc_shape *s)
{
	size_t numel, nbytes, esize = mc_dtype_size(t);
	if (!esize || !mc_shape_numel(s, &numel) || !mc_mul_size(numel, esize, &nbytes))
		return NULL;
	mc_tensor *x = calloc(1, sizeof *x);
	if (!x)
		return NULL;
	/* calloc(0) may return NULL; keep data non-NULL for empty tensors */
	x->data = calloc(nbytes ? nbytes : 1, 1);
	if (!x->data) {
		free(x);
		return NULL;
	}
	x->dtype = t;
	x->shape = *s;
	x->numel = numel;
	x->nbytes = nbytes;
	return x;
}

mc_tensor *mc_tensor_clone(const mc_tensor *t)
{
	mc_tensor *x = mc_tensor_new(t->dtype, &t->shape);
	if (x)
		memcpy(x->data, t->data, t->nbytes);
	return x;
}

void mc_tensor_free(mc_tensor *t)
{
	if (!t)
		return;
	free(t->data);
	free(t);
}

double mc_get_f(const mc_tensor *t, size_t i)
{
	const void *p = t->data;
	switch (t->dtype) {
	case MC_FLOAT: return ((const float *)p)[i];
	case MC_DOUBLE: return ((const double *)p)[i];
	case MC_FLOAT16: return mc_half_to_float(((const uint16_t *)p)[i]);
	case MC_BFLOAT16: return mc_bf16_to_float(((const uint16_t *)p)[i]);
	case MC_UINT8: return ((const uint8_t *)p)[i];
	case MC_INT8: return ((const int8_t *)p)[i];
	case MC_UINT16: return ((const uint16_t *)p)[i];
	case MC_INT16: return ((const int16_t *)p)[i];
	case MC_INT32: return ((const int32_t *)p)[i];
	case MC_INT64: return (double)((const int64_t *)p)[i];
	case MC_UINT32: return ((const uint32_t *)p)[i];
	case MC_UINT64: return (double)((const uint64_t *)p)[i];
	case MC_BOOL: return ((const uint8_t *)p)[i] != 0;
	/* sub-byte integers are stored extended to a byte */
	case MC_INT4: case MC_INT2: return ((const int8_t *)p)[i];
	case MC_UINT4: case MC_UINT2: return ((const uint8_t *)p)[i];
	default:
		if (mc_dtype_is_small_float(t->dtype))
			return mc_small_float_to_double(t->dtype, ((const uint8_t *)p)[i]);
		return 0;
	}
}

/* Float to integer conversion saturates instead of invoking UB on NaN or
 * out-of-range values; ONNX leaves those cases undefined. */
static int64_t f2i(double v, double lo, double hi)
{
	if (v != v)
		return 0;
	if (v <= lo)
		return (int64_t)lo;
	if (v >= hi)
		return (int64_t)hi;
	return (int64_t)v;
}

void mc_set_f(mc_tensor *t, size_t i, double v)
{
	void *p = t->data;
	switch (t->dtype) {
	case MC_FLOAT: ((float *)p)[i] = (float)v; break;
	case MC_DOUBLE: ((double *)p)[i] = v; break;
	case MC_FLOAT16: ((uint16_t *)p)[i] = mc_float_to_half((float)v); break;
	case MC_BFLOAT16: ((uint16_t *)p)[i] = mc_float_to_bf16((float)v); break;
	case MC_UINT8: ((uint8_t *)p)[i] = (uint8_t)f2i(v, 0, 255); break;
	case MC_INT8: ((int8_t *)p)[i] = (int8_t)f2i(v, -128, 127); break;
	case MC_UINT16: ((uint16_t *)p)[i] = (uint16_t)f2i(v, 0, 65535); break;
	case MC_INT16: ((int16_t *)p)[i] = (int16_t)f2i(v, -32768, 32767); break;
	case MC_INT32: ((int32_t *)p)[i] = (int32_t)f2i(v, -2147483648.0, 2147483647.0); break;
	case MC_UINT32: ((uint32_t *)p)[i] = (uint32_t)f2i(v, 0, 4294967295.0); break;
	case MC_INT64:
		((int64_t *)p)[i] = f2i(v, -9223372036854775808.0, 9223372036854774784.0);
		break;
	case MC_UINT64:
		((uint64_t *)p)[i] = (v != v || v <= 0) ? 0 :
		                     v >= 18446744073709549568.0 ? UINT64_MAX : (uint64_t)v;
		break;
	case MC_BOOL: ((uint8_t *)p)[i] = v != 0; break;
	/* sub-byte integers saturate like the wider ones */
	case MC_INT4: ((int8_t *)p)[i] = (int8_t)f2i(v, -8, 7); break;
	case MC_UINT4: ((uint8_t *)p)[i] = (uint8_t)f2i(v, 0, 15); break;
	case MC_INT2: ((int8_t *)p)[i] = (int8_t)f2i(v, -2, 1); break;
	case MC_UINT2: ((uint8_t *)p)[i] = (uint8_t)f2i(v, 0, 3); break;
	default:
		if (mc_dtype_is_small_float(t->dtype))
			((uint8_t *)p)[i] = mc_double_to_small_float(t->dtype, v, true);
		break;
	}
}

/* Keeps the low `bits` bits of v, sign-extended (two's complement wrap). */
static int8_t wrap_signed(int64_t v, int bits)
{
	uint8_t low = (uint8_t)((uint64_t)v & ((1u << bits) - 1)), sign = (uint8_t)(1u << (bits - 1));
	return (int8_t)((int)(low ^ sign) - (int)sign);
}

int64_t mc_get_i(const mc_tensor *t, size_t i)
{
	const void *p = t->data;
	switch (t->dtype) {
	case MC_UINT8: return ((const uint8_t *)p)[i];
	case MC_INT8: return ((const int8_t *)p)[i];
	case MC_UINT16: return ((const uint16_t *)p)[i];
	case MC_INT16: return ((const int16_t *)p)[i];
	case MC_INT32: return ((const int32_t *)p)[i];
	case MC_INT64: return ((const int64_t *)p)[i];
	case MC_UINT32: return ((const uint32_t *)p)[i];
	case MC_UINT64: return (int64_t)((const uint64_t *)p)[i];
	case MC_BOOL: return ((const uint8_t *)p)[i] != 0;
	case MC_INT4: case MC_INT2: return ((const int8_t *)p)[i];
	case MC_UINT4: case MC_UINT2: return ((const uint8_t *)p)[i];
	default: return f2i(mc_get_f(t, i), -9223372036854775808.0, 9223372036854774784.0);
	}
}

void mc_set_i(mc_tensor *t, size_t i, int64_t v)
{
	void *p = t->data;
	switch (t->dtype) {
	case MC_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
	case MC_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
	case MC_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
	case MC_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
	case MC_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
	case MC_INT64: ((int64_t *)p)[i] = v; break;
	case MC_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
	case MC_UINT64: ((uint64_t *)p)[i] = (uint64_t)v; break;
	case MC_BOOL: ((uint8_t *)p)[i] = v != 0; break;
	/* integers wrap to the type's width, like the wider ones above */
	case MC_INT4: ((int8_t *)p)[i] = wrap_signed(v, 4); break;
	case MC_UINT4: ((uint8_t *)p)[i] = (uint8_t)((uint64_t)v & 0xf); break;
	case MC_INT2: ((int8_t *)p)[i] = wrap_signed(v, 2); break;
	case MC_UINT2: ((uint8_t *)p)[i] = (uint8_t)((uint64_t)v & 0x3); break;
	default: mc_set_f(t, i, (double)v); break;
	}
}

double *mc_tensor_to_double(const mc_tensor *t)
{
	double *d = mc_xmalloc((t->numel ? t->numel : 1) * sizeof *d);
	for (size_t i = 0; i < t->numel; i++)
		d[i] = mc_get_f(t, i);
	return d;
}

void mc_tensor_from_double(mc_tensor *t, const double *src)
{
	for (size_t i = 0; i < t->numel; i++)
		mc_set_f(t, i, src[i]);
}
