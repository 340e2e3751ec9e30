/* modelc runtime-min: the only header generated models need besides the C
 * library's stdint.h, stddef.h, string.h and math.h. Status codes, tensor
 * descriptors, and the small helpers generated kernels call: storage
 * conversions of the 16-bit and small float types, and integer arithmetic
 * without undefined behaviour. C99, no I/O, no heap, no global state.
 *
 * Every model's output directory carries an identical copy; the include
 * guard lets several models' headers share one translation unit. */
#ifndef MODELC_RT_H
#define MODELC_RT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef __CUDACC__ /* the hardware's half conversions, in device code */
#include <cuda_fp16.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status codes returned by NAME_run ---- */
enum {
	MODELC_OK = 0,
	MODELC_ERR_NULL_ARGUMENT = 1, /* arena, inputs, outputs or one of their pointers NULL */
	MODELC_ERR_MISALIGNED = 2,    /* arena not aligned to NAME_ARENA_ALIGN, or an input or
	                               * output not to its element's size (bytes: any address) */
	MODELC_ERR_BAD_INDEX = 3,     /* an index input out of range (Gather, ...) */
	MODELC_ERR_BAD_INPUT = 4,     /* other invalid input data */
	MODELC_ERR_CUDA = 5,          /* a CUDA call failed (cuda target: NAME_cuda.error says which) */
	MODELC_ERR_BAD_DIM = 6,       /* a dynamic dimension's size outside its bounds (--dim
	                               * NAME=LO..HI: NAME_DIM_<k>_MIN..MAX), or dims NULL;
	                               * nothing is read or written */
	MODELC_ERR_BRANCH = 7         /* the inputs chose an If branch that cannot run with the
	                               * shapes the model was compiled for (modelc warned, naming
	                               * the inputs that decide); the outputs are not written */
};

/* ---- several cores: NAME_run_threads (modelc --threads N) ----
 * The run hands each parallel loop of the model to the caller's
 * parallel_for(ctx, fn, arg, n), which must call fn(arg, begin, end) for
 * ranges that cover [0, n) once, each range on any worker and in any
 * order, and return when every call has returned. The iterations are
 * independent and each writes its own outputs, so the results do not
 * depend on how [0, n) is cut or on the order. The generated code makes
 * no thread and keeps no state: the hook is the caller's (an RTOS's task
 * pool, or runtime-min's modelc_threads_pthread.c). */
typedef void (*modelc_task_fn)(void *arg, int64_t begin, int64_t end);
typedef struct {
	void (*parallel_for)(void *ctx, modelc_task_fn fn, void *arg, int64_t n);
	void *ctx;
} modelc_threads;

/* ---- element types, numbered as ONNX's TensorProto.DataType ----
 * In memory: bool is one byte (0 or 1); float16 and bfloat16 are uint16_t
 * bit patterns; the float8 types, float8e8m0 and float4e2m1 (low nibble)
 * are one uint8_t code each; int4/int2 are int8_t (sign-extended) and
 * uint4/uint2 uint8_t, one element per byte. */
enum {
	MODELC_FLOAT = 1,
	MODELC_UINT8 = 2,
	MODELC_INT8 = 3,
	MODELC_UINT16 = 4,
	MODELC_INT16 = 5,
	MODELC_INT32 = 6,
	MODELC_INT64 = 7,
	MODELC_BOOL = 9,
	MODELC_FLOAT16 = 10,
	MODELC_DOUBLE = 11,
	MODELC_UINT32 = 12,
	MODELC_UINT64 = 13,
	MODELC_BFLOAT16 = 16,
	MODELC_FLOAT8E4M3FN = 17,
	MODELC_FLOAT8E4M3FNUZ = 18,
	MODELC_FLOAT8E5M2 = 19,
	MODELC_FLOAT8E5M2FNUZ = 20,
	MODELC_UINT4 = 21,
	MODELC_INT4 = 22,
	MODELC_FLOAT4E2M1 = 23,
	MODELC_FLOAT8E8M0 = 24,
	MODELC_UINT2 = 25,
	MODELC_INT2 = 26
};

/* One input or output: dims has rank entries (NULL for a scalar);
 * row-major, in the model's own layout. */
typedef struct {
	const char *name;
	int dtype;
	int rank;
	const int64_t *dims;
} modelc_tensor_desc;

/* The helpers below serve the host and, in CUDA builds (the cuda target's
 * NAME.cu), device code too. */
#ifdef __CUDACC__
#define MODELC_FN static inline __host__ __device__
#else
#define MODELC_FN static inline
#endif

/* Alignment of weight arrays; placed between the declarator and the
 * initializer: `const float w[4] MODELC_ALIGN(16) = {...};` */
#if defined(__GNUC__) || defined(__clang__)
#define MODELC_ALIGN(n) __attribute__((aligned(n)))
#else
#define MODELC_ALIGN(n)
#endif

/* Kernels of --isa cortex-m: functions of their own (targets/c/emit_c.c). */
#if defined(__GNUC__) || defined(__clang__)
#define MODELC_NOINLINE __attribute__((noinline))
#else
#define MODELC_NOINLINE
#endif

/* Ends every kernel of the C target. GCC 12 (x86-64 and arm-none-eabi
 * alike) can judge a kernel "const" once it has rewritten the kernel's
 * loops, although the kernel stores through its arena pointer, and then
 * drops a later call of it or moves memory accesses across one (identical
 * kernels, merged into one function, then ran once instead of once per
 * copy). An empty asm that clobbers memory is never const and costs no
 * instruction. */
#if defined(__GNUC__) || defined(__clang__)
#define MODELC_KERNEL_END() __asm__ __volatile__("" ::: "memory")
#else
#define MODELC_KERNEL_END() ((void)0)
#endif

/* ---- float bits ---- */
MODELC_FN uint32_t modelc_f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}

MODELC_FN float modelc_bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* x >> shift rounded to nearest, ties to even (1 <= shift <= 31). */
MODELC_FN uint32_t modelc_shr_rne(uint32_t x, unsigned shift)
{
	uint32_t q = x >> shift, rem = x & ((1u << shift) - 1u), half = 1u << (shift - 1u);
	if (rem > half || (rem == half && (q & 1u)))
		q++;
	return q;
}

/* ---- float16 (IEEE binary16) ---- */
MODELC_FN float modelc_f16_to_f32(uint16_t h)
{
#ifdef __CUDA_ARCH__ /* one conversion instruction on the GPU, same result */
	return __half2float(__ushort_as_half(h));
#endif
	uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
	if (exp == 0) { /* zero or subnormal: man * 2^-24 */
		float f = (float)man * 0x1p-24f;
		return sign ? -f : f;
	}
	if (exp == 31) /* inf or NaN (payload kept) */
		return modelc_bits_f32(sign | 0x7f800000u | (man << 13));
	return modelc_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

/* Round to nearest even; overflow gives inf; NaN stays NaN. */
MODELC_FN uint16_t modelc_f32_to_f16(float f)
{
#ifdef __CUDA_ARCH__ /* round to nearest even, like the code below */
	return __half_as_ushort(__float2half_rn(f));
#endif
	uint32_t x = modelc_f32_bits(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
	uint32_t ax = x & 0x7fffffffu;
	if (ax >= 0x7f800000u) /* inf or NaN */
		return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
	if (ax >= 0x477ff000u) /* rounds to >= 65520: overflow */
		return (uint16_t)(sign | 0x7c00u);
	if (ax < 0x38800000u) { /* below the smallest normal half */
		uint32_t e = ax >> 23;
		if (e < 102) /* below 2^-25: rounds to zero */
			return sign;
		/* units of 2^-24: (1.m * 2^23) * 2^(e - 150 + 24) */
		return (uint16_t)(sign | modelc_shr_rne((ax & 0x7fffffu) | 0x800000u, 126u - e));
	}
	ax += 0xfffu + ((ax >> 13) & 1u);
	return (uint16_t)(sign | ((ax - (112u << 23)) >> 13));
}

/* ---- bfloat16 ---- */
MODELC_FN float modelc_bf16_to_f32(uint16_t h)
{
	return modelc_bits_f32((uint32_t)h << 16);
}

MODELC_FN uint16_t modelc_f32_to_bf16(float f)
{
	uint32_t x = modelc_f32_bits(f);
	if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet */
		return (uint16_t)((x >> 16) | 0x40u);
	x += 0x7fffu + ((x >> 16) & 1u);
	return (uint16_t)(x >> 16);
}

/* ---- small floats (float8 types, float4e2m1): round to nearest even,
 * finite values beyond the largest finite one clamp to it, inf stays inf
 * where the format has it (float8e5m2) and clamps elsewhere, so that data
 * moved through a kernel keeps its codes (Cast's saturate=1 clamps inf
 * before the store, saturate=0 makes overflow inf); NaN gives the format's
 * NaN (float4e2m1 has none: -0); FNUZ formats have no -0. Parameters:
 * mantissa bits, bias, the sign bit's position, the largest finite
 * magnitude code, whether max + 1 is inf, whether NaN exists, FNUZ, the
 * positive NaN code. ---- */
MODELC_FN float modelc_small_to_f32(uint8_t code, unsigned mbits, int bias, unsigned sign_shift,
                                        unsigned max, int has_inf, int fnuz)
{
	uint32_t sign_bit = 1u << sign_shift, mag = code & (sign_bit - 1u);
	uint32_t sign = (code & sign_bit) ? 0x80000000u : 0u;
	if (fnuz && code == 0x80u)
		return NAN;
	if (mag > max) {
		if (has_inf && mag == max + 1u)
			return modelc_bits_f32(sign | 0x7f800000u);
		return NAN;
	}
	uint32_t e = mag >> mbits, m = mag & ((1u << mbits) - 1u);
	if (e == 0) { /* subnormal: m * 2^(1 - bias - mbits), exact in f32 */
		uint32_t scale = (uint32_t)(127 + 1 - bias - (int)mbits) << 23;
		return modelc_bits_f32(sign | modelc_f32_bits((float)m * modelc_bits_f32(scale)));
	}
	return modelc_bits_f32(sign | ((uint32_t)((int)e - bias + 127) << 23) | (m << (23u - mbits)));
}

MODELC_FN uint8_t modelc_f32_to_small(float f, unsigned mbits, int bias, unsigned sign_shift,
                                          unsigned max, int has_nan, int fnuz, unsigned nan, int has_inf)
{
	uint32_t x = modelc_f32_bits(f), ax = x & 0x7fffffffu;
	uint32_t sign = (x >> 31) ? 1u << sign_shift : 0u;
	if (ax > 0x7f800000u) { /* NaN */
		if (!has_nan)
			return (uint8_t)(1u << sign_shift);
		return (uint8_t)(fnuz ? 0x80u : (sign | nan));
	}
	if (ax >= 0x7f800000u) /* inf stays inf where the format has it, else saturates */
		return (uint8_t)(sign | (has_inf ? max + 1u : max));
	int e = (int)(ax >> 23) - 127; /* binade of f (f32 subnormals round to 0 below) */
	int lead = e < 1 - bias ? 1 - bias : e;
	/* f = s * 2^(e - 23) with s the 24-bit significand; keep mbits bits
	 * below the format's leading bit: shift right by lead - mbits - e + 23. */
	int shift = lead - (int)mbits - e + 23;
	uint32_t q;
	if ((ax >> 23) == 0 || shift >= 25)
		q = 0;
	else
		q = modelc_shr_rne((ax & 0x7fffffu) | 0x800000u, (unsigned)shift);
	if (q == 0)
		return (uint8_t)(fnuz ? 0u : sign);
	/* subnormal codes are q; normal ones (exp - 1) << mbits plus q, which
	 * carries into the exponent when rounding reached the next binade */
	uint32_t mag = ((uint32_t)(lead + bias - 1) << mbits) + q;
	if (mag > max)
		mag = max;
	return (uint8_t)(sign | mag);
}

MODELC_FN float modelc_f8e4m3fn_to_f32(uint8_t c) { return modelc_small_to_f32(c, 3, 7, 7, 0x7e, 0, 0); }
MODELC_FN float modelc_f8e4m3fnuz_to_f32(uint8_t c) { return modelc_small_to_f32(c, 3, 8, 7, 0x7f, 0, 1); }
MODELC_FN float modelc_f8e5m2_to_f32(uint8_t c) { return modelc_small_to_f32(c, 2, 15, 7, 0x7b, 1, 0); }
MODELC_FN float modelc_f8e5m2fnuz_to_f32(uint8_t c) { return modelc_small_to_f32(c, 2, 16, 7, 0x7f, 0, 1); }
MODELC_FN float modelc_f4e2m1_to_f32(uint8_t c) { return modelc_small_to_f32(c & 0xfu, 1, 1, 3, 0x7, 0, 0); }
MODELC_FN uint8_t modelc_f32_to_f8e4m3fn(float f) { return modelc_f32_to_small(f, 3, 7, 7, 0x7e, 1, 0, 0x7f, 0); }
MODELC_FN uint8_t modelc_f32_to_f8e4m3fnuz(float f) { return modelc_f32_to_small(f, 3, 8, 7, 0x7f, 1, 1, 0x80, 0); }
MODELC_FN uint8_t modelc_f32_to_f8e5m2(float f) { return modelc_f32_to_small(f, 2, 15, 7, 0x7b, 1, 0, 0x7e, 1); }
MODELC_FN uint8_t modelc_f32_to_f8e5m2fnuz(float f) { return modelc_f32_to_small(f, 2, 16, 7, 0x7f, 1, 1, 0x80, 0); }
MODELC_FN uint8_t modelc_f32_to_f4e2m1(float f) { return modelc_f32_to_small(f, 1, 1, 3, 0x7, 0, 0, 0, 0); }

/* float8e8m0: 2^(code - 127), no sign, no zero; 0xff is NaN. */
MODELC_FN float modelc_f8e8m0_to_f32(uint8_t c)
{
	if (c == 0xffu)
		return NAN;
	return modelc_bits_f32(c ? (uint32_t)c << 23 : 0x400000u);
}

/* Rounds up to a power of two and saturates (ONNX Cast's defaults): NaN
 * gives NaN, inf the largest code, zero and tiny values the smallest. */
MODELC_FN uint8_t modelc_f32_to_f8e8m0(float f)
{
	uint32_t ax = modelc_f32_bits(f) & 0x7fffffffu;
	if (ax > 0x7f800000u)
		return 0xffu;
	if (ax == 0x7f800000u)
		return 0xfeu;
	if (ax == 0)
		return 0;
	int p;
	if (ax >> 23) {
		p = (int)(ax >> 23) - 127 + ((ax & 0x7fffffu) != 0);
	} else { /* f32 subnormal: ax * 2^-149 */
		int lead = 22;
		while (!(ax >> lead))
			lead--;
		p = lead - 149 + ((ax & ((1u << lead) - 1u)) != 0);
	}
	if (p > 127)
		return 0xfeu;
	if (p < -127)
		return 0;
	return (uint8_t)(p + 127);
}

/* Sub-byte integers kept in a byte: wrap to the width (two's complement). */
MODELC_FN int8_t modelc_wrap_i4(int8_t v) { return (int8_t)(((v & 0xf) ^ 0x8) - 0x8); }
MODELC_FN int8_t modelc_wrap_i2(int8_t v) { return (int8_t)(((v & 0x3) ^ 0x2) - 0x2); }
MODELC_FN uint8_t modelc_wrap_u4(uint8_t v) { return (uint8_t)(v & 0xfu); }
MODELC_FN uint8_t modelc_wrap_u2(uint8_t v) { return (uint8_t)(v & 0x3u); }

/* ---- integer arithmetic without undefined behaviour ----
 * Signed add/sub/mul/neg wrap (computed in the unsigned type); division
 * by zero gives 0 and INT_MIN / -1 wraps; shifts by the width or more (or
 * by a negative amount) give 0; abs(INT_MIN) wraps. */
#define MODELC_WRAP_OPS(S, T, U)                                                              \
	MODELC_FN T modelc_add_##S(T a, T b) { return (T)((U)a + (U)b); }                    \
	MODELC_FN T modelc_sub_##S(T a, T b) { return (T)((U)a - (U)b); }                    \
	MODELC_FN T modelc_mul_##S(T a, T b) { return (T)((U)a * (U)b); }                    \
	MODELC_FN T modelc_neg_##S(T a) { return (T)((U)0 - (U)a); }
MODELC_WRAP_OPS(i32, int32_t, uint32_t)
MODELC_WRAP_OPS(i64, int64_t, uint64_t)
#undef MODELC_WRAP_OPS

#define MODELC_SIGNED_OPS(S, T, U, MIN, BITS)                                                 \
	MODELC_FN T modelc_div_##S(T a, T b)                                                 \
	{                                                                                        \
		if (b == 0)                                                                          \
			return 0;                                                                        \
		if (b == -1)                                                                         \
			return (T)((U)0 - (U)a);                                                         \
		return (T)(a / b);                                                                   \
	}                                                                                        \
	MODELC_FN T modelc_rem_##S(T a, T b)                                                 \
	{                                                                                        \
		if (b == 0 || b == -1)                                                               \
			return 0;                                                                        \
		return (T)(a % b);                                                                   \
	}                                                                                        \
	MODELC_FN T modelc_abs_##S(T a) { return a < 0 ? (T)((U)0 - (U)a) : a; }             \
	MODELC_FN T modelc_shl_##S(T a, T b)                                                 \
	{                                                                                        \
		return (b < 0 || b >= BITS) ? (T)0 : (T)((U)a << b);                                 \
	}                                                                                        \
	MODELC_FN T modelc_shr_##S(T a, T b) { return (b < 0 || b >= BITS) ? (T)0 : (T)(a >> b); } \
	MODELC_FN T modelc_min_##S(T a, T b) { return a < b ? a : b; }                       \
	MODELC_FN T modelc_max_##S(T a, T b) { return a > b ? a : b; }
MODELC_SIGNED_OPS(i8, int8_t, uint8_t, INT8_MIN, 8)
MODELC_SIGNED_OPS(i16, int16_t, uint16_t, INT16_MIN, 16)
MODELC_SIGNED_OPS(i32, int32_t, uint32_t, INT32_MIN, 32)
MODELC_SIGNED_OPS(i64, int64_t, uint64_t, INT64_MIN, 64)
#undef MODELC_SIGNED_OPS

#define MODELC_UNSIGNED_OPS(S, T, BITS)                                                       \
	MODELC_FN T modelc_div_##S(T a, T b) { return b == 0 ? (T)0 : (T)(a / b); }          \
	MODELC_FN T modelc_rem_##S(T a, T b) { return b == 0 ? (T)0 : (T)(a % b); }          \
	MODELC_FN T modelc_shl_##S(T a, T b) { return b >= BITS ? (T)0 : (T)((T)a << b); }   \
	MODELC_FN T modelc_shr_##S(T a, T b) { return b >= BITS ? (T)0 : (T)(a >> b); }      \
	MODELC_FN T modelc_min_##S(T a, T b) { return a < b ? a : b; }                       \
	MODELC_FN T modelc_max_##S(T a, T b) { return a > b ? a : b; }
MODELC_UNSIGNED_OPS(u8, uint8_t, 8)
MODELC_UNSIGNED_OPS(u16, uint16_t, 16)
MODELC_UNSIGNED_OPS(u32, uint32_t, 32)
MODELC_UNSIGNED_OPS(u64, uint64_t, 64)
#undef MODELC_UNSIGNED_OPS

/* ---- dual 16-bit multiply-accumulates (the kernel IR's DOT2 and SXTB16):
 * one instruction each on a core with the Arm DSP extension (Cortex-M4, M7,
 * M33, M55), plain C elsewhere with the same results ---- */
#if defined(__ARM_FEATURE_DSP) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
/* GCC does not fold a rotation into SXTB16's operand: spelled out */
MODELC_FN int32_t modelc_sxtb16(int32_t a)
{
	int32_t r;
	__asm__("sxtb16 %0, %1" : "=r"(r) : "r"(a));
	return r;
}
MODELC_FN int32_t modelc_sxtb16_hi(int32_t a)
{
	int32_t r;
	__asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(a));
	return r;
}
MODELC_FN int32_t modelc_smlad(int32_t a, int32_t b, int32_t acc)
{
	int32_t r;
	__asm__("smlad %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(acc));
	return r;
}
/* lo's low half-word, hi's low half-word above it (PKHBT) */
MODELC_FN int32_t modelc_pack16(int32_t lo, int32_t hi)
{
	int32_t r;
	__asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(lo), "r"(hi));
	return r;
}
#else
MODELC_FN int32_t modelc_pack16(int32_t lo, int32_t hi)
{
	return (int32_t)(((uint32_t)lo & 0xffffu) | (uint32_t)hi << 16);
}
/* the signed byte or half-word of u at bit `at` */
MODELC_FN int32_t modelc_sbyte_(uint32_t u, int at) { return (int32_t)(((u >> at) & 0xffu) ^ 0x80u) - 0x80; }
MODELC_FN int32_t modelc_shalf_(uint32_t u, int at) { return (int32_t)(((u >> at) & 0xffffu) ^ 0x8000u) - 0x8000; }
MODELC_FN int32_t modelc_sxtb16(int32_t a)
{
	uint32_t u = (uint32_t)a;
	return (int32_t)(((uint32_t)modelc_sbyte_(u, 0) & 0xffffu) | ((uint32_t)modelc_sbyte_(u, 16) << 16));
}
MODELC_FN int32_t modelc_sxtb16_hi(int32_t a) { return modelc_sxtb16((int32_t)((uint32_t)a >> 8)); }
MODELC_FN int32_t modelc_smlad(int32_t a, int32_t b, int32_t acc)
{
	uint32_t ua = (uint32_t)a, ub = (uint32_t)b;
	uint32_t lo = (uint32_t)(modelc_shalf_(ua, 0) * modelc_shalf_(ub, 0));
	uint32_t hi = (uint32_t)(modelc_shalf_(ua, 16) * modelc_shalf_(ub, 16));
	return (int32_t)((uint32_t)acc + lo + hi);
}
#endif

/* ---- tiles of SMLAD pairs (the kernel IR's DOT2_TILES template, kir.h):
 * w holds each tile's TM biases, then its kp x TM/2 weight words (W =
 * TM + kp * TM/2 words a tile); for t < tiles, i < TM, j < TP,
 *   out[(t*TM + i)*TP + j] = w[t*W + i]
 *     + sum over k < kp of smlad(sxtb16 (_hi where i is odd) of
 *       w[t*W + TM + k*(TM/2) + i/2], x[k*TP + j]),
 * wrapping; kp a multiple of 4 (2 x 3) or 8 (4 x 1). On a Thumb-2 core
 * with the DSP extension (Cortex-M4, M7, M33, M55) hand-scheduled
 * micro-kernels: every sum, pair and pointer in the 14 registers, loads in
 * runs (each but the last of a run costs one cycle on the M4), four or
 * eight k pairs a branch. Elsewhere the same in C. ---- */
MODELC_FN void modelc_dot2_tiles_c(int32_t *out, const int32_t *w, const int32_t *x, int32_t kp, int32_t tiles,
                                   int32_t tm, int32_t tp)
{
	for (int32_t t = 0; t < tiles; t++, w += tm + kp * (tm / 2))
		for (int32_t i = 0; i < tm; i++)
			for (int32_t j = 0; j < tp; j++) {
				int32_t acc = w[i];
				for (int32_t k = 0; k < kp; k++) {
					int32_t word = w[tm + k * (tm / 2) + i / 2];
					acc = modelc_smlad(i % 2 ? modelc_sxtb16_hi(word) : modelc_sxtb16(word), x[k * tp + j], acc);
				}
				out[(t * tm + i) * tp + j] = acc;
			}
}

/* The pairs of an int8 row the 4 x 1 tiles read (the kernel IR's S8_PAIRS
 * template): out[2q] = (x[4q], x[4q + 2]), out[2q + 1] = (x[4q + 1],
 * x[4q + 3]), low half first; SXTB16 of a word and of its rotation by 8.
 * From the last word down: out may start where x does (a row that dies
 * there), as each word lies at or past the bytes it and later words read. */
MODELC_FN void modelc_s8_pairs(int32_t *out, const int8_t *x, int32_t kp)
{
	for (int32_t q = kp / 2 - 1; q >= 0; q--) {
		const uint8_t *b = (const uint8_t *)x + 4 * q;
		int32_t word = (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
		out[2 * q] = modelc_sxtb16(word);
		out[2 * q + 1] = modelc_sxtb16_hi(word);
	}
}

#if defined(__ARM_FEATURE_DSP) && defined(__thumb2__) && (defined(__GNUC__) || defined(__clang__)) && \
	!defined(__CUDACC__) && !defined(MODELC_NO_ASM)
/* The micro-kernels are naked (no compiler prologue: all 14 registers are
 * theirs, whatever the flags, frame pointer or not). What they keep across
 * the loops (the callee-saved registers, out and its end, x) goes into
 * their own stack arguments, which the caller allocates (AAPCS lets the
 * callee write them): sp never moves, and the caller's frame, which a
 * stack bound measures, holds it all. Entry: r0 out, r1 w, r2 x, r3 kp;
 * [sp] tiles; then [sp] out's end, [sp, #4..#36] r4-r11, lr, [sp, #40]
 * out (advanced), [sp, #44] x. In the loop: r0 w, r1 x, r2 x's end, r3..
 * the sums. */
#define MODELC_DOT2_U_ __attribute__((unused)) /* read by the assembly: -Wunused-parameter */
#define MODELC_DOT2_ARGS                                                                            \
	int32_t *out MODELC_DOT2_U_, const int32_t *w MODELC_DOT2_U_, const int32_t *x MODELC_DOT2_U_,    \
	int32_t kp MODELC_DOT2_U_, int32_t tiles MODELC_DOT2_U_, int32_t s0_ MODELC_DOT2_U_,              \
	int32_t s1_ MODELC_DOT2_U_, int32_t s2_ MODELC_DOT2_U_, int32_t s3_ MODELC_DOT2_U_,               \
	int32_t s4_ MODELC_DOT2_U_, int32_t s5_ MODELC_DOT2_U_, int32_t s6_ MODELC_DOT2_U_,               \
	int32_t s7_ MODELC_DOT2_U_, int32_t s8_ MODELC_DOT2_U_, int32_t s9_ MODELC_DOT2_U_,               \
	int32_t s10_ MODELC_DOT2_U_
/* X_END: r4 = x's end - x in words, from r3 = kp; OUT_END: r5 = the sums
 * of all tiles in bytes, from r5 = tiles */
#define MODELC_DOT2_ENTER(X_END, OUT_END)                                                           \
	"add ip, sp, #4\n\t"                                                                            \
	"stmia ip, {r4-r11, lr}\n\t"                                                                    \
	"str r0, [sp, #40]\n\t"                                                                         \
	"str r2, [sp, #44]\n\t"                                                                         \
	"ldr r5, [sp]\n\t"                                                                              \
	X_END                                                                                           \
	OUT_END                                                                                         \
	"add r5, r0, r5\n\t"                                                                            \
	"str r5, [sp]\n\t"                                                                              \
	"mov r0, r1\n\t"                                                                                \
	"add r2, r2, r4, lsl #2\n\t"
#define MODELC_DOT2_LEAVE(LAST)                                                                     \
	"cmp r1, r2\n\t"                                                                                \
	"bne 1b\n\t"                                                                                    \
	"ldr lr, [sp, #40]\n\t"                                                                         \
	"stmia lr!, {r3-" LAST "}\n\t"                                                                  \
	"str lr, [sp, #40]\n\t"                                                                         \
	"ldr ip, [sp]\n\t"                                                                              \
	"cmp lr, ip\n\t"                                                                                \
	"bne 2b\n\t"                                                                                    \
	"add ip, sp, #4\n\t"                                                                            \
	"ldmia ip, {r4-r11, lr}\n\t"                                                                    \
	"bx lr\n\t"
/* one k pair of 2 channels x 3 pixels: sums r3-r5 (channel 0), r6-r8 */
#define MODELC_DOT2_2X3_STEP                                                                        \
	"ldr ip, [r0], #4\n\t"                                                                          \
	"ldr r9, [r1], #4\n\t"                                                                          \
	"ldr r10, [r1], #4\n\t"                                                                         \
	"ldr r11, [r1], #4\n\t"                                                                         \
	"sxtb16 lr, ip\n\t"                                                                             \
	"sxtb16 ip, ip, ror #8\n\t"                                                                     \
	"smlad r3, lr, r9, r3\n\t"                                                                      \
	"smlad r4, lr, r10, r4\n\t"                                                                     \
	"smlad r5, lr, r11, r5\n\t"                                                                     \
	"smlad r6, ip, r9, r6\n\t"                                                                      \
	"smlad r7, ip, r10, r7\n\t"                                                                     \
	"smlad r8, ip, r11, r8\n\t"
__attribute__((naked, noinline, unused)) static void modelc_dot2_2x3_arm(MODELC_DOT2_ARGS)
{
	__asm__ volatile(
		MODELC_DOT2_ENTER("add r4, r3, r3, lsl #1\n\t", /* kp * 3 words of x */
		                  "add r5, r5, r5, lsl #1\n\tlsl r5, r5, #3\n\t") /* 24 bytes a tile */
		"2:\n\t"
		"ldr r1, [sp, #44]\n\t"
		"ldr r3, [r0], #4\n\t"
		"ldr r6, [r0], #4\n\t"
		"mov r4, r3\n\t"
		"mov r5, r3\n\t"
		"mov r7, r6\n\t"
		"mov r8, r6\n\t"
		"1:\n\t"
		MODELC_DOT2_2X3_STEP MODELC_DOT2_2X3_STEP MODELC_DOT2_2X3_STEP MODELC_DOT2_2X3_STEP
		MODELC_DOT2_LEAVE("r8"));
}
/* two k pairs of 4 channels x 1 pixel: x pairs r7, r8; weight words
 * r9-r12 (channels 0-1 and 2-3 of the first pair, then the second's);
 * sums r3-r6 */
#define MODELC_DOT2_4X1_HALF(W, X, S0, S1)                                                          \
	"sxtb16 lr, " W "\n\t"                                                                          \
	"sxtb16 " W ", " W ", ror #8\n\t"                                                               \
	"smlad " S0 ", lr, " X ", " S0 "\n\t"                                                           \
	"smlad " S1 ", " W ", " X ", " S1 "\n\t"
#define MODELC_DOT2_4X1_STEPS                                                                       \
	"ldr r7, [r1], #4\n\t"                                                                          \
	"ldr r8, [r1], #4\n\t"                                                                          \
	"ldr r9, [r0], #4\n\t"                                                                          \
	"ldr r10, [r0], #4\n\t"                                                                         \
	"ldr r11, [r0], #4\n\t"                                                                         \
	"ldr ip, [r0], #4\n\t"                                                                          \
	MODELC_DOT2_4X1_HALF("r9", "r7", "r3", "r4")                                                    \
	MODELC_DOT2_4X1_HALF("r10", "r7", "r5", "r6")                                                   \
	MODELC_DOT2_4X1_HALF("r11", "r8", "r3", "r4")                                                   \
	MODELC_DOT2_4X1_HALF("ip", "r8", "r5", "r6")
__attribute__((naked, noinline, unused)) static void modelc_dot2_4x1_arm(MODELC_DOT2_ARGS)
{
	__asm__ volatile(
		MODELC_DOT2_ENTER("mov r4, r3\n\t", /* kp words of x */
		                  "lsl r5, r5, #4\n\t") /* 16 bytes a tile */
		"2:\n\t"
		"ldr r1, [sp, #44]\n\t"
		"ldmia r0!, {r3-r6}\n\t"
		"1:\n\t"
		MODELC_DOT2_4X1_STEPS MODELC_DOT2_4X1_STEPS MODELC_DOT2_4X1_STEPS MODELC_DOT2_4X1_STEPS
		MODELC_DOT2_LEAVE("r6"));
}
MODELC_FN void modelc_dot2_2x3(int32_t *out, const int32_t *w, const int32_t *x, int32_t kp, int32_t tiles)
{
	modelc_dot2_2x3_arm(out, w, x, kp, tiles, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
}
MODELC_FN void modelc_dot2_4x1(int32_t *out, const int32_t *w, const int32_t *x, int32_t kp, int32_t tiles)
{
	modelc_dot2_4x1_arm(out, w, x, kp, tiles, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
}
#else
MODELC_FN void modelc_dot2_2x3(int32_t *out, const int32_t *w, const int32_t *x, int32_t kp, int32_t tiles)
{
	modelc_dot2_tiles_c(out, w, x, kp, tiles, 2, 3);
}
MODELC_FN void modelc_dot2_4x1(int32_t *out, const int32_t *w, const int32_t *x, int32_t kp, int32_t tiles)
{
	modelc_dot2_tiles_c(out, w, x, kp, tiles, 4, 1);
}
#endif

/* ---- row-vector products in blocks of 8 floats (the kernel IR's
 * GEMV_F32 template, kir.h): w holds each block's k x 8 weights, k-major,
 * bias (null: zeros) 8 a block; for b < blocks, i < 8,
 *   out[b*8 + i] = bias[b*8 + i] + w[(b*k + j)*8 + i] * x[j], j = 0 .. k-1,
 * added in that order, each product rounded before its sum (not fused).
 * On a core with the single-precision FPU in Thumb-2 (Cortex-M4F, M7,
 * M33, M55) a hand-scheduled loop: the 8 sums in s0-s7, two k's weights
 * loaded by one VLDM into s8-s23, eight of x by one into s24-s31, one VMLA
 * (multiply, round, add, round: this C's bits) a multiply-add; 138
 * instructions for 128 of them. Elsewhere the same in C. ---- */
MODELC_FN void modelc_gemv8_f32_c(float *out, const float *w, const float *bias, const float *x, int32_t k,
                                  int32_t blocks)
{
	for (int32_t b = 0; b < blocks; b++, out += 8) {
		float acc[8];
		for (int i = 0; i < 8; i++)
			acc[i] = bias ? bias[b * 8 + i] : 0.0f;
		for (int32_t j = 0; j < k; j++, w += 8)
			for (int i = 0; i < 8; i++) {
				float p = w[i] * x[j];
				acc[i] = acc[i] + p;
			}
		for (int i = 0; i < 8; i++)
			out[i] = acc[i];
	}
}

/* MODELC_FPU_ASM: a Thumb-2 core with the single-precision FPU (Cortex-M4F,
 * M7, M33, M55) and a compiler that takes GNU assembly: the hand-scheduled
 * float micro-kernels below run; elsewhere their C (GEMV_F32) or the
 * generated code's own loop (GRU_GATES, which tests this macro). */
#if defined(__ARM_FP) && (__ARM_FP & 4) && defined(__thumb2__) && (defined(__GNUC__) || defined(__clang__)) && \
	!defined(__CUDACC__) && !defined(MODELC_NO_ASM)
#define MODELC_FPU_ASM 1
#else
#define MODELC_FPU_ASM 0
#endif

#if MODELC_FPU_ASM
/* the 8 sums += the weights in W0..W7 times x's element in X */
#define MODELC_GEMV8_MLA(X, W0, W1, W2, W3, W4, W5, W6, W7) \
	"vmla.f32 s0, " W0 ", " X "\n\t" "vmla.f32 s1, " W1 ", " X "\n\t" \
	"vmla.f32 s2, " W2 ", " X "\n\t" "vmla.f32 s3, " W3 ", " X "\n\t" \
	"vmla.f32 s4, " W4 ", " X "\n\t" "vmla.f32 s5, " W5 ", " X "\n\t" \
	"vmla.f32 s6, " W6 ", " X "\n\t" "vmla.f32 s7, " W7 ", " X "\n\t"
#define MODELC_GEMV8_LO(X) MODELC_GEMV8_MLA(X, "s8", "s9", "s10", "s11", "s12", "s13", "s14", "s15")
#define MODELC_GEMV8_HI(X) MODELC_GEMV8_MLA(X, "s16", "s17", "s18", "s19", "s20", "s21", "s22", "s23")
/* two k's: their 16 weights, x's elements in X0 and X1 */
#define MODELC_GEMV8_PAIR(X0, X1) "vldmia %[w]!, {s8-s23}\n\t" MODELC_GEMV8_LO(X0) MODELC_GEMV8_HI(X1)
/* eight k's: x's into s24-s31, four pairs */
#define MODELC_GEMV8_CHUNK                                                                        \
	"vldmia %[xp]!, {s24-s31}\n\t" MODELC_GEMV8_PAIR("s24", "s25") MODELC_GEMV8_PAIR("s26", "s27") \
		MODELC_GEMV8_PAIR("s28", "s29") MODELC_GEMV8_PAIR("s30", "s31")
/* one k */
#define MODELC_GEMV8_ONE "vldmia %[xp]!, {s24}\n\t" "vldmia %[w]!, {s8-s15}\n\t" MODELC_GEMV8_LO("s24")
MODELC_FN void modelc_gemv8_f32(float *out, const float *w, const float *bias, const float *x, int32_t k,
                                int32_t blocks)
{
	static const float zeros[8];
	const float *b = bias ? bias : zeros;
	int32_t b_step = bias ? 32 : 0, n;
	const float *xp;
	if (k <= 0 || blocks <= 0) {
		modelc_gemv8_f32_c(out, w, bias, x, k, blocks);
		return;
	}
	/* a block: 16 k's a turn, then 8, then one at a time */
	__asm__ volatile(
		"1:\n\t"
		"vldmia %[b], {s0-s7}\n\t"
		"add %[b], %[b], %[b_step]\n\t"
		"mov %[xp], %[x]\n\t"
		"lsrs %[n], %[k], #4\n\t"
		"beq 3f\n\t"
		"2:\n\t"
		MODELC_GEMV8_CHUNK
		MODELC_GEMV8_CHUNK
		"subs %[n], %[n], #1\n\t"
		"bne 2b\n\t"
		"3:\n\t"
		"tst %[k], #8\n\t"
		"beq 4f\n\t"
		MODELC_GEMV8_CHUNK
		"4:\n\t"
		"ands %[n], %[k], #7\n\t"
		"beq 6f\n\t"
		"5:\n\t"
		MODELC_GEMV8_ONE
		"subs %[n], %[n], #1\n\t"
		"bne 5b\n\t"
		"6:\n\t"
		"vstmia %[out]!, {s0-s7}\n\t"
		"subs %[blocks], %[blocks], #1\n\t"
		"bne 1b\n\t"
		: [out] "+r"(out), [w] "+r"(w), [b] "+r"(b), [blocks] "+r"(blocks), [xp] "=&r"(xp), [n] "=&r"(n)
		: [x] "r"(x), [k] "r"(k), [b_step] "r"(b_step)
		: "cc", "memory", "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12",
		  "s13", "s14", "s15", "s16", "s17", "s18", "s19", "s20", "s21", "s22", "s23", "s24", "s25", "s26",
		  "s27", "s28", "s29", "s30", "s31");
}
#else
MODELC_FN void modelc_gemv8_f32(float *out, const float *w, const float *bias, const float *x, int32_t k,
                                int32_t blocks)
{
	modelc_gemv8_f32_c(out, w, bias, x, k, blocks);
}
#endif

/* ---- the gates of a GRU or LSTM step (the kernel IR's GRU_GATES and
 * LSTM_GATES templates, kir.h), after the step's products: xp and hp hold
 * each unit's gate sums side by side (the products' rows interleaved),
 * sigmoid and tanh are kmath's (aot/kmath.h) and k holds their constants
 * (mc_kmath_gate_consts), in s9-s31 for the whole loop:
 *   -88.37 87.33 log2e MAGIC ln2hi ln2lo e4 e3 e2 e1 e0 1 9 -9 p6..p1 q3..q1.
 * Each performs the operations of the generated code's own loop in its
 * order (its bits; a NaN's sign aside), where a C compiler's build of that
 * loop reloads the constants every iteration. The sigmoid runs on -x's
 * negation (x clamped to [-88.37, 87.33]; t = MAGIC - x log2e; r' = x +
 * n ln2 = -r; the polynomial's steps as VMLS on r'); clamps branch out of
 * line to fix-ups after the loop (L1: x below the range, L2 above, L3/L4
 * the way back). ---- */
#if MODELC_FPU_ASM
/* RES = sigmoid(X); X, T, N, Q scratch; %[t] a core register */
#define MODELC_SIGMOID_ASM(X, T, N, Q, RES, L1, L2, L3, L4)                                       \
	"vcmp.f32 " X ", s9\n\t" "vmrs APSR_nzcv, fpscr\n\t" "bmi " L1 "f\n\t" L3 ":\n\t"              \
	"vcmp.f32 " X ", s10\n\t" "vmrs APSR_nzcv, fpscr\n\t" "bgt " L2 "f\n\t" L4 ":\n\t"             \
	"vmov.f32 " T ", s12\n\t" "vmls.f32 " T ", " X ", s11\n\t" "vmov %[t], " T "\n\t"              \
	"vsub.f32 " N ", " T ", s12\n\t" "lsl %[t], %[t], #23\n\t" "vmla.f32 " X ", " N ", s13\n\t"    \
	"add %[t], %[t], #0x3f800000\n\t" "vmla.f32 " X ", " N ", s14\n\t"                             \
	"vmov.f32 " N ", s16\n\t" "vmls.f32 " N ", s15, " X "\n\t"                                     \
	"vmov.f32 " Q ", s17\n\t" "vmls.f32 " Q ", " N ", " X "\n\t"                                   \
	"vmov.f32 " N ", s18\n\t" "vmls.f32 " N ", " Q ", " X "\n\t"                                   \
	"vmov.f32 " Q ", s19\n\t" "vmls.f32 " Q ", " N ", " X "\n\t"                                   \
	"vmul.f32 " T ", " X ", " X "\n\t" "vmul.f32 " Q ", " T ", " Q "\n\t"                          \
	"vsub.f32 " Q ", " Q ", " X "\n\t" "vadd.f32 " Q ", " Q ", s20\n\t" "vmov " T ", %[t]\n\t"     \
	"vmul.f32 " Q ", " Q ", " T "\n\t" "vadd.f32 " Q ", " Q ", s20\n\t" "vdiv.f32 " RES ", s20, " Q "\n\t"
#define MODELC_SIGMOID_FIX(X, L1, L2, L3, L4)                                                      \
	L1 ":\n\t" "vmov.f32 " X ", s9\n\t" "b " L3 "b\n\t" L2 ":\n\t" "vmov.f32 " X ", s10\n\t" "b " L4 "b\n\t"
/* X = tanh(X); X2, A, B scratch */
#define MODELC_TANH_ASM(X, X2, A, B, L1, L2, L3, L4)                                              \
	"vcmp.f32 " X ", s21\n\t" "vmrs APSR_nzcv, fpscr\n\t" "bgt " L2 "f\n\t" L4 ":\n\t"             \
	"vcmp.f32 " X ", s22\n\t" "vmrs APSR_nzcv, fpscr\n\t" "bmi " L1 "f\n\t" L3 ":\n\t"             \
	"vmul.f32 " X2 ", " X ", " X "\n\t"                                                            \
	"vmov.f32 " A ", s24\n\t" "vmla.f32 " A ", s23, " X2 "\n\t"                                    \
	"vmov.f32 " B ", s25\n\t" "vmla.f32 " B ", " A ", " X2 "\n\t"                                  \
	"vmov.f32 " A ", s26\n\t" "vmla.f32 " A ", " B ", " X2 "\n\t"                                  \
	"vmov.f32 " B ", s27\n\t" "vmla.f32 " B ", " A ", " X2 "\n\t"                                  \
	"vmov.f32 " A ", s28\n\t" "vmla.f32 " A ", " B ", " X2 "\n\t"                                  \
	"vmov.f32 " B ", s20\n\t" "vmla.f32 " B ", " A ", " X2 "\n\t" "vmul.f32 " X ", " X ", " B "\n\t" \
	"vmov.f32 " A ", s30\n\t" "vmla.f32 " A ", s29, " X2 "\n\t"                                    \
	"vmov.f32 " B ", s31\n\t" "vmla.f32 " B ", " A ", " X2 "\n\t"                                  \
	"vmov.f32 " A ", s20\n\t" "vmla.f32 " A ", " B ", " X2 "\n\t" "vdiv.f32 " X ", " X ", " A "\n\t"
#define MODELC_TANH_FIX(X, L1, L2, L3, L4)                                                         \
	L2 ":\n\t" "vmov.f32 " X ", s21\n\t" "b " L4 "b\n\t" L1 ":\n\t" "vmov.f32 " X ", s22\n\t" "b " L3 "b\n\t"
/* the unit's new h (in register R) into h and y, then the next unit; past
 * the loop, over the fix-ups */
#define MODELC_GATES_NEXT(R)                                                                       \
	"vstmia %[h]!, {" R "}\n\t" "vstmia %[y]!, {" R "}\n\t" "subs %[n], %[n], #1\n\t" "bne 1b\n\t" "b 9f\n\t"
#define MODELC_GATES_CLOBBERS                                                                      \
	"cc", "memory", "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12", \
		"s13", "s14", "s15", "s16", "s17", "s18", "s19", "s20", "s21", "s22", "s23", "s24", "s25",   \
		"s26", "s27", "s28", "s29", "s30", "s31"

/* GRU (linear_before_reset), sums z, r, c at 3j:
 *   z = sigmoid(xp[3j] + hp[3j]), r = sigmoid(xp[3j+1] + hp[3j+1]),
 *   c = tanh(xp[3j+2] + r * hp[3j+2]), h[j] = (1 - z) c + z h[j] = y[j];
 * about 100 instructions a unit (GCC's loop: 125). */
MODELC_FN void modelc_gru_gates_f32(float *h, float *y, const float *xp, const float *hp, const float *k, int32_t n)
{
	uint32_t t;
	if (n <= 0)
		return;
	if (!y)
		y = h; /* stored twice, harmlessly */
	/* x's sums in s0-s2, h's in s3-s5; z in s8, r in s6, c in s2 */
	__asm__ volatile(
		"vldmia %[k], {s9-s31}\n\t"
		"1:\n\t"
		"vldmia %[xp]!, {s0-s2}\n\t"
		"vldmia %[hp]!, {s3-s5}\n\t"
		"vadd.f32 s0, s0, s3\n\t"
		MODELC_SIGMOID_ASM("s0", "s3", "s6", "s7", "s8", "20", "21", "22", "23")
		"vadd.f32 s1, s1, s4\n\t"
		MODELC_SIGMOID_ASM("s1", "s0", "s3", "s4", "s6", "30", "31", "32", "33")
		"vmla.f32 s2, s6, s5\n\t"
		MODELC_TANH_ASM("s2", "s0", "s1", "s3", "40", "41", "42", "43")
		"vldr s0, [%[h]]\n\t"
		"vsub.f32 s1, s20, s8\n\t"
		"vmul.f32 s1, s1, s2\n\t"
		"vmla.f32 s1, s8, s0\n\t"
		MODELC_GATES_NEXT("s1")
		MODELC_SIGMOID_FIX("s0", "20", "21", "22", "23")
		MODELC_SIGMOID_FIX("s1", "30", "31", "32", "33")
		MODELC_TANH_FIX("s2", "40", "41", "42", "43")
		"9:\n\t"
		: [xp] "+r"(xp), [hp] "+r"(hp), [h] "+r"(h), [y] "+r"(y), [n] "+r"(n), [t] "=&r"(t)
		: [k] "r"(k)
		: MODELC_GATES_CLOBBERS);
}

/* LSTM (no peepholes, no clip, the default activations), sums i, o, f, g
 * at 4j, each the two products' added:
 *   c[j] = sigmoid(f) c[j] + sigmoid(i) tanh(g), h[j] = sigmoid(o) tanh(c[j]) = y[j];
 * about 160 instructions a unit (GCC's loop: 196). */
MODELC_FN void modelc_lstm_gates_f32(float *h, float *y, float *c, const float *xp, const float *hp, const float *k,
                                     int32_t n)
{
	uint32_t t;
	if (n <= 0)
		return;
	if (!y)
		y = h;
	/* the sums i, o, f, g in s0-s3; sigmoid(i) in s7, sigmoid(f) in s6,
	 * tanh(g) in s3, the new c in s5, sigmoid(o) in s4 */
	__asm__ volatile(
		"vldmia %[k], {s9-s31}\n\t"
		"1:\n\t"
		"vldmia %[xp]!, {s0-s3}\n\t"
		"vldmia %[hp]!, {s4-s7}\n\t"
		"vadd.f32 s0, s0, s4\n\t"
		"vadd.f32 s1, s1, s5\n\t"
		"vadd.f32 s2, s2, s6\n\t"
		"vadd.f32 s3, s3, s7\n\t"
		MODELC_SIGMOID_ASM("s0", "s4", "s5", "s6", "s7", "20", "21", "22", "23")
		MODELC_SIGMOID_ASM("s2", "s0", "s4", "s5", "s6", "30", "31", "32", "33")
		MODELC_TANH_ASM("s3", "s0", "s2", "s4", "40", "41", "42", "43")
		"vldr s8, [%[c]]\n\t"
		"vmul.f32 s5, s6, s8\n\t"
		"vmla.f32 s5, s7, s3\n\t"
		"vstmia %[c]!, {s5}\n\t"
		MODELC_SIGMOID_ASM("s1", "s0", "s2", "s3", "s4", "50", "51", "52", "53")
		MODELC_TANH_ASM("s5", "s0", "s2", "s3", "60", "61", "62", "63")
		"vmul.f32 s0, s4, s5\n\t"
		MODELC_GATES_NEXT("s0")
		MODELC_SIGMOID_FIX("s0", "20", "21", "22", "23")
		MODELC_SIGMOID_FIX("s2", "30", "31", "32", "33")
		MODELC_TANH_FIX("s3", "40", "41", "42", "43")
		MODELC_SIGMOID_FIX("s1", "50", "51", "52", "53")
		MODELC_TANH_FIX("s5", "60", "61", "62", "63")
		"9:\n\t"
		: [xp] "+r"(xp), [hp] "+r"(hp), [h] "+r"(h), [y] "+r"(y), [c] "+r"(c), [n] "+r"(n), [t] "=&r"(t)
		: [k] "r"(k)
		: MODELC_GATES_CLOBBERS);
}
#endif

/* The kernel IR's DOT4: acc + the four products of a's unsigned bytes and
 * b's signed ones (x86's vpdpbusd), wrapping; modelc_dot4ss: a's bytes
 * signed too (aarch64's sdot). */
MODELC_FN int32_t modelc_dot4ss(int32_t a, int32_t b, int32_t acc)
{
	uint32_t ua = (uint32_t)a, ub = (uint32_t)b, sum = (uint32_t)acc;
	for (int i = 0; i < 32; i += 8)
		sum += (uint32_t)(((int32_t)(((ua >> i) & 0xffu) ^ 0x80u) - 0x80) * ((int32_t)(((ub >> i) & 0xffu) ^ 0x80u) - 0x80));
	return (int32_t)sum;
}
MODELC_FN int32_t modelc_dot4us(int32_t a, int32_t b, int32_t acc)
{
	uint32_t ua = (uint32_t)a, ub = (uint32_t)b, sum = (uint32_t)acc;
	for (int i = 0; i < 32; i += 8)
		sum += (uint32_t)((int32_t)((ua >> i) & 0xffu) * ((int32_t)(((ub >> i) & 0xffu) ^ 0x80u) - 0x80));
	return (int32_t)sum;
}

/* The split requantisation (the kernel IR's RQ32): v = acc * mult (x2:
 * doubled), rounded to nearest, ties to even, at 32 + low bits (low in
 * [0, 31]); the generator guarantees that v + 2^(31 + low) fits int64.
 * Out of line when built for size (one copy for every sum), inline
 * otherwise. */
#if defined(__OPTIMIZE_SIZE__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#define MODELC_RQ_FN __attribute__((noinline, unused)) static
#else
#define MODELC_RQ_FN MODELC_FN
#endif
MODELC_FN int32_t modelc_rq32_round(uint64_t v, int32_t low)
{
	int32_t hi = (int32_t)(uint32_t)(v >> 32);
	uint64_t sum = v + ((UINT64_C(1) << (low + 31)) - 1u) + (uint64_t)((hi >> low) & 1);
	return (int32_t)(uint32_t)(sum >> 32) >> low;
}
MODELC_RQ_FN int32_t modelc_rq32(int32_t acc, int32_t mult, int32_t low)
{
	return modelc_rq32_round((uint64_t)((int64_t)acc * mult), low);
}
MODELC_RQ_FN int32_t modelc_rq32x2(int32_t acc, int32_t mult, int32_t low)
{
	return modelc_rq32_round((uint64_t)((int64_t)acc * mult) * 2u, low);
}
/* The same where the generator proved that no product lands on a tie and
 * low >= 1: rounding half up is then rounding half to even, and the
 * product's high word alone gives it (SMULL, ADD, ASR on a Cortex-M). */
#if defined(__ARM_FEATURE_DSP) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
/* SMMLA: the high word of acc * mult plus the rounding term in one
 * instruction (the compilers make SMULL and ADD of the C below) */
MODELC_FN int32_t modelc_rq32u(int32_t acc, int32_t mult, int32_t low)
{
	int32_t sum;
	__asm__("smmla %0, %1, %2, %3" : "=r"(sum) : "r"(acc), "r"(mult), "r"((int32_t)(UINT32_C(1) << (low - 1))));
	return sum >> low;
}
#else
MODELC_FN int32_t modelc_rq32u(int32_t acc, int32_t mult, int32_t low)
{
	uint32_t hi = (uint32_t)((uint64_t)((int64_t)acc * mult) >> 32);
	return (int32_t)(hi + (UINT32_C(1) << (low - 1))) >> low;
}
#endif

/* min(max(v, lo), hi) for the range of an n-bit integer, n a constant:
 * SSAT and USAT where the core has them (ARMv6 and Cortex-M3 on) */
#if defined(__ARM_FEATURE_SAT) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#include <arm_acle.h>
#define modelc_ssat(v, n) ((int32_t)__ssat((v), (n)))
#define modelc_usat(v, n) ((int32_t)__usat((v), (n)))
#else
#define modelc_ssat(v, n) modelc_min_i32(modelc_max_i32((v), -(int32_t)(UINT32_C(1) << ((n) - 1))), (int32_t)((UINT32_C(1) << ((n) - 1)) - 1u))
#define modelc_usat(v, n) modelc_min_i32(modelc_max_i32((v), 0), (int32_t)((UINT32_C(1) << (n)) - 1u))
#endif

MODELC_FN float modelc_min_f32(float a, float b) { return a < b ? a : b; }
MODELC_FN float modelc_max_f32(float a, float b) { return a > b ? a : b; }
MODELC_FN double modelc_min_f64(double a, double b) { return a < b ? a : b; }
MODELC_FN double modelc_max_f64(double a, double b) { return a > b ? a : b; }

/* ---- float to integer: truncates; NaN gives 0 and out-of-range values
 * saturate (C leaves both undefined) ---- */
#define MODELC_F2I(S, T, F, FS, LO, HI, TMIN, TMAX)                                          \
	MODELC_FN T modelc_##FS##_to_##S(F v)                                                \
	{                                                                                        \
		if (v != v)                                                                          \
			return 0;                                                                        \
		if (v <= (F)(LO))                                                                    \
			return TMIN;                                                                     \
		if (v >= (F)(HI))                                                                    \
			return TMAX;                                                                     \
		return (T)v;                                                                         \
	}
/* The bounds are exactly representable in both float and double; HI is
 * the first value that no longer fits. */
MODELC_F2I(i8, int8_t, float, f32, -128.0f, 128.0f, INT8_MIN, INT8_MAX)
MODELC_F2I(u8, uint8_t, float, f32, 0.0f, 256.0f, 0, UINT8_MAX)
MODELC_F2I(i16, int16_t, float, f32, -32768.0f, 32768.0f, INT16_MIN, INT16_MAX)
MODELC_F2I(u16, uint16_t, float, f32, 0.0f, 65536.0f, 0, UINT16_MAX)
MODELC_F2I(i32, int32_t, float, f32, -0x1p31f, 0x1p31f, INT32_MIN, INT32_MAX)
MODELC_F2I(u32, uint32_t, float, f32, 0.0f, 0x1p32f, 0, UINT32_MAX)
MODELC_F2I(i64, int64_t, float, f32, -0x1p63f, 0x1p63f, INT64_MIN, INT64_MAX)
MODELC_F2I(u64, uint64_t, float, f32, 0.0f, 0x1p64f, 0, UINT64_MAX)
MODELC_F2I(i8, int8_t, double, f64, -128.0, 128.0, INT8_MIN, INT8_MAX)
MODELC_F2I(u8, uint8_t, double, f64, 0.0, 256.0, 0, UINT8_MAX)
MODELC_F2I(i16, int16_t, double, f64, -32768.0, 32768.0, INT16_MIN, INT16_MAX)
MODELC_F2I(u16, uint16_t, double, f64, 0.0, 65536.0, 0, UINT16_MAX)
MODELC_F2I(i32, int32_t, double, f64, -0x1p31, 0x1p31, INT32_MIN, INT32_MAX)
MODELC_F2I(u32, uint32_t, double, f64, 0.0, 0x1p32, 0, UINT32_MAX)
MODELC_F2I(i64, int64_t, double, f64, -0x1p63, 0x1p63, INT64_MIN, INT64_MAX)
MODELC_F2I(u64, uint64_t, double, f64, 0.0, 0x1p64, 0, UINT64_MAX)
#undef MODELC_F2I

#if defined(__CUDACC__) || defined(MODELC_CUDA_SPLITS)
/* ---- the cuda target's K splits ----
 * A convolution or matrix product template (aot/kern_cuda.c) of `tiles`
 * output tiles (of 64 x 64) over a reduction of length k splits the
 * reduction into ranges that run side by side where its tiles alone leave
 * the GPU's `sms` multiprocessors idle: enough blocks for two waves on
 * tensor cores (mma; none where the tiles alone give every SM one), four
 * for the FFMA form, each range at least MODELC_CUDA_MIN_K_SPLIT long and
 * a multiple of step, at most max_splits of them. The generator plans for
 * MODELC_CUDA_PLAN_SMS (the scratch the partial sums need); NAME_cuda_init
 * asks again with the device's own count, so that one library fits a
 * Jetson Orin's 16 SMs and an H100's 132. Returns the number of splits;
 * *k_split is each one's length. */
#define MODELC_CUDA_PLAN_SMS 132
#define MODELC_CUDA_MIN_K_SPLIT 32
/* The length of each of `splits` ranges over k, in whole steps. */
MODELC_FN int64_t modelc_cuda_split_len(int64_t k, int64_t splits, int64_t step)
{
	return ((k + splits - 1) / splits + step - 1) / step * step;
}

MODELC_FN int modelc_cuda_splits(int64_t tiles, int64_t k, int step, int mma, int sms, int64_t max_splits,
                                 int64_t *k_split)
{
	/* measured on an H200: bench/RESULTS.md (two waves against four on
	 * tensor cores; 32 k a split against 64 and 256) */
	int64_t want = (int64_t)sms * (mma ? 2 : 4);
	int64_t splits = tiles >= want || (mma && tiles >= sms) || tiles < 1 ? 1 : (want + tiles - 1) / tiles;
	int64_t most = k / MODELC_CUDA_MIN_K_SPLIT;
	if (splits > most)
		splits = most > 1 ? most : 1;
	if (splits > max_splits)
		splits = max_splits;
	if (splits < 1 || step < 1 || k < 1) {
		*k_split = k > 0 ? k : 1;
		return 1;
	}
	/* the ranges of that length, each length again for their count */
	int64_t len = modelc_cuda_split_len(k, splits, step);
	splits = (k + len - 1) / len;
	*k_split = modelc_cuda_split_len(k, splits, step);
	return (int)splits;
}
#endif

#ifdef __cplusplus
}
#endif

#endif /* MODELC_RT_H */
