/* modelc_ivec_neon.h: pasted by modelc into NAME.c (after <arm_neon.h>) where
 * integer kernels use i32 vectors, --isa neon. */
/* i32 vectors of the integer kernels: 8-bit loads widened and stores
 * narrowed (truncating), DOT2 (pairs of 16-bit products) and RQ32 (the
 * runtime's modelc_rq32, lane by lane). */
#define MODELC_IV static inline __attribute__((unused))
MODELC_IV int32x4_t modelc_lds84(const int8_t *p)
{
	int8_t t[8] = {0};
	memcpy(t, p, 4);
	return vmovl_s16(vget_low_s16(vmovl_s8(vld1_s8(t))));
}
MODELC_IV int32x4_t modelc_ldu84(const uint8_t *p)
{
	uint8_t t[8] = {0};
	memcpy(t, p, 4);
	return vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(vld1_u8(t)))));
}
/* every other 8-bit element from p (stride 2; reads 8 bytes) */
MODELC_IV int32x4_t modelc_lds84_s2(const int8_t *p)
{
	int8_t t[8];
	memcpy(t, p, 8);
	int16x8_t w = vmovl_s8(vld1_s8(t));
	return vmovl_s16(vget_low_s16(vuzp1q_s16(w, w)));
}
MODELC_IV int32x4_t modelc_ldu84_s2(const uint8_t *p)
{
	uint8_t t[8];
	memcpy(t, p, 8);
	uint16x8_t w = vmovl_u8(vld1_u8(t));
	return vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vuzp1q_u16(w, w))));
}
MODELC_IV void modelc_st8_4(void *p, int32x4_t v)
{
	int16x4_t h = vmovn_s32(v);
	int8x8_t b = vmovn_s16(vcombine_s16(h, h));
	int8_t t[8];
	vst1_s8(t, b);
	memcpy(p, t, 4);
}
MODELC_IV int32x4_t modelc_dot2_4(int32x4_t a, int32x4_t b, int32x4_t c)
{
	int16x8_t a16 = vreinterpretq_s16_s32(a), b16 = vreinterpretq_s16_s32(b);
	int32x4_t lo = vmull_s16(vget_low_s16(a16), vget_low_s16(b16));
	int32x4_t hi = vmull_high_s16(a16, b16);
	return vaddq_s32(c, vpaddq_s32(lo, hi));
}
/* DOT4 of signed bytes by signed bytes: sdot where the build has the
 * dot product extension (-march=armv8.2-a+dotprod), widening multiplies
 * and pairwise adds otherwise */
MODELC_IV int32x4_t modelc_dot4s_4(int32x4_t a, int32x4_t b, int32x4_t c)
{
#if defined(__ARM_FEATURE_DOTPROD)
	return vdotq_s32(c, vreinterpretq_s8_s32(a), vreinterpretq_s8_s32(b));
#else
	int8x16_t a8 = vreinterpretq_s8_s32(a), b8 = vreinterpretq_s8_s32(b);
	int16x8_t lo = vmull_s8(vget_low_s8(a8), vget_low_s8(b8)), hi = vmull_high_s8(a8, b8);
	return vaddq_s32(c, vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)));
#endif
}
MODELC_IV int64x2_t modelc_rq32r_(int64x2_t v, int32_t low)
{
	int64x2_t half = vdupq_n_s64((INT64_C(1) << (low + 31)) - 1);
	uint64x2_t odd = vandq_u64(vshlq_u64(vreinterpretq_u64_s64(v), vdupq_n_s64(-(32 + low))), vdupq_n_u64(1));
	return vaddq_s64(vaddq_s64(v, half), vreinterpretq_s64_u64(odd));
}
MODELC_IV int32x4_t modelc_rq32v4_(int32x4_t acc, int32_t mult, int32_t low, int twice)
{
	int32x2_t m = vdup_n_s32(mult);
	int64x2_t lo = vmull_s32(vget_low_s32(acc), m), hi = vmull_high_s32(acc, vdupq_n_s32(mult));
	if (twice) {
		lo = vaddq_s64(lo, lo);
		hi = vaddq_s64(hi, hi);
	}
	int32x4_t r = vcombine_s32(vshrn_n_s64(modelc_rq32r_(lo, low), 32), vshrn_n_s64(modelc_rq32r_(hi, low), 32));
	return vshlq_s32(r, vdupq_n_s32(-low));
}
/* the same with per-lane constants */
MODELC_IV int64x2_t modelc_rq32rv_(int64x2_t v, int64x2_t low)
{
	int64x2_t one = vdupq_n_s64(1);
	int64x2_t half = vsubq_s64(vshlq_s64(one, vaddq_s64(low, vdupq_n_s64(31))), one);
	uint64x2_t odd = vandq_u64(vshlq_u64(vreinterpretq_u64_s64(v), vnegq_s64(vaddq_s64(low, vdupq_n_s64(32)))),
	                           vdupq_n_u64(1));
	return vaddq_s64(vaddq_s64(v, half), vreinterpretq_s64_u64(odd));
}
MODELC_IV int32x4_t modelc_rq32p4_(int32x4_t acc, int32x4_t mult, int32x4_t low, int twice)
{
	int64x2_t lo = vmull_s32(vget_low_s32(acc), vget_low_s32(mult)), hi = vmull_high_s32(acc, mult);
	if (twice) {
		lo = vaddq_s64(lo, lo);
		hi = vaddq_s64(hi, hi);
	}
	int64x2_t llo = vmovl_s32(vget_low_s32(low)), lhi = vmovl_high_s32(low);
	int32x4_t r = vcombine_s32(vshrn_n_s64(modelc_rq32rv_(lo, llo), 32), vshrn_n_s64(modelc_rq32rv_(hi, lhi), 32));
	return vshlq_s32(r, vnegq_s32(low));
}
MODELC_IV int32x4_t modelc_rq32v_4(int32x4_t a, int32x4_t m, int32x4_t l) { return modelc_rq32p4_(a, m, l, 0); }
MODELC_IV int32x4_t modelc_rq32x2v_4(int32x4_t a, int32x4_t m, int32x4_t l) { return modelc_rq32p4_(a, m, l, 1); }
MODELC_IV int32x4_t modelc_rq32_4(int32x4_t a, int32_t m, int32_t l) { return modelc_rq32v4_(a, m, l, 0); }
MODELC_IV int32x4_t modelc_rq32x2_4(int32x4_t a, int32_t m, int32_t l) { return modelc_rq32v4_(a, m, l, 1); }
/* RQ32's half-up form (modelc_rq32u: no ties, low >= 1): the products'
 * high words shifted right by low, rounding (VRSHL: + 2^(low - 1)) */
MODELC_IV int32x4_t modelc_rq32uv_4(int32x4_t a, int32x4_t m, int32x4_t l)
{
	int32x4_t hi = vcombine_s32(vshrn_n_s64(vmull_s32(vget_low_s32(a), vget_low_s32(m)), 32),
	                            vshrn_n_s64(vmull_high_s32(a, m), 32));
	return vrshlq_s32(hi, vnegq_s32(l));
}
MODELC_IV int32x4_t modelc_rq32u_4(int32x4_t a, int32_t m, int32_t l) { return modelc_rq32uv_4(a, vdupq_n_s32(m), vdupq_n_s32(l)); }
MODELC_IV int32_t modelc_lanei4(int32x4_t v, int i)
{
	int32_t t[4];
	vst1q_s32(t, v);
	return t[i];
}
