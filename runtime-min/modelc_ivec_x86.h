/* modelc_ivec_x86.h: pasted by modelc into NAME.c (after <immintrin.h>) where
 * integer kernels use i32 vectors, --isa avx2 and avx512 (SSE4.1 and AVX2
 * for 4 and 8 lanes, AVX-512F for 16). */
/* i32 vectors of the integer kernels: 8-bit loads widened and stores
 * narrowed (truncating), DOT2 (pairs of 16-bit products, VNNI where the
 * build has it) and RQ32 (the runtime's modelc_rq32, lane by lane). */
#define MODELC_IV static inline __attribute__((unused))
MODELC_IV __m128i modelc_ld4b_(const void *p)
{
	int32_t w;
	memcpy(&w, p, 4);
	return _mm_cvtsi32_si128(w);
}
MODELC_IV __m128i modelc_lds84(const int8_t *p) { return _mm_cvtepi8_epi32(modelc_ld4b_(p)); }
MODELC_IV __m128i modelc_ldu84(const uint8_t *p) { return _mm_cvtepu8_epi32(modelc_ld4b_(p)); }
MODELC_IV __m256i modelc_lds88(const int8_t *p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p)); }
MODELC_IV __m256i modelc_ldu88(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p)); }
/* every other 8-bit element from p (stride 2; reads 2 x lanes bytes):
 * 16-bit words widened, their low bytes extended */
MODELC_IV __m128i modelc_lds84_s2(const int8_t *p)
{
	return _mm_srai_epi32(_mm_slli_epi32(_mm_cvtepi16_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p)), 24), 24);
}
MODELC_IV __m128i modelc_ldu84_s2(const uint8_t *p)
{
	return _mm_and_si128(_mm_cvtepu16_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p)), _mm_set1_epi32(0xff));
}
MODELC_IV __m256i modelc_lds88_s2(const int8_t *p)
{
	return _mm256_srai_epi32(_mm256_slli_epi32(_mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)), 24), 24);
}
MODELC_IV __m256i modelc_ldu88_s2(const uint8_t *p)
{
	return _mm256_and_si256(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)), _mm256_set1_epi32(0xff));
}
/* the low byte of each i32 lane into the low 4 bytes of its 128-bit half */
MODELC_IV __m128i modelc_bytes4_(__m128i v)
{
	return _mm_shuffle_epi8(v, _mm_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
}
MODELC_IV void modelc_st8_4(void *p, __m128i v)
{
	int32_t w = _mm_cvtsi128_si32(modelc_bytes4_(v));
	memcpy(p, &w, 4);
}
MODELC_IV void modelc_st8_8(void *p, __m256i v)
{
	__m128i lo = modelc_bytes4_(_mm256_castsi256_si128(v)), hi = modelc_bytes4_(_mm256_extracti128_si256(v, 1));
	_mm_storel_epi64((__m128i *)p, _mm_unpacklo_epi32(lo, hi));
}
MODELC_IV __m128i modelc_dot2_4(__m128i a, __m128i b, __m128i c)
{
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
	return _mm_dpwssd_epi32(c, a, b);
#else
	return _mm_add_epi32(c, _mm_madd_epi16(a, b));
#endif
}
MODELC_IV __m256i modelc_dot2_8(__m256i a, __m256i b, __m256i c)
{
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
	return _mm256_dpwssd_epi32(c, a, b);
#elif defined(__AVXVNNI__)
	return _mm256_dpwssd_avx_epi32(c, a, b);
#else
	return _mm256_add_epi32(c, _mm256_madd_epi16(a, b));
#endif
}
/* DOT4: four products of a's unsigned and b's signed bytes a lane (VNNI's
 * vpdpbusd; else each byte widened to 16 bits, two pmaddwd: exact) */
MODELC_IV __m128i modelc_dot4e_(__m128i a, __m128i b)
{
	__m128i m = _mm_set1_epi16(0xff);
	__m128i ae = _mm_and_si128(a, m), ao = _mm_srli_epi16(a, 8);
	__m128i be = _mm_srai_epi16(_mm_slli_epi16(b, 8), 8), bo = _mm_srai_epi16(b, 8);
	return _mm_add_epi32(_mm_madd_epi16(ae, be), _mm_madd_epi16(ao, bo));
}
MODELC_IV __m256i modelc_dot4e8_(__m256i a, __m256i b)
{
	__m256i m = _mm256_set1_epi16(0xff);
	__m256i ae = _mm256_and_si256(a, m), ao = _mm256_srli_epi16(a, 8);
	__m256i be = _mm256_srai_epi16(_mm256_slli_epi16(b, 8), 8), bo = _mm256_srai_epi16(b, 8);
	return _mm256_add_epi32(_mm256_madd_epi16(ae, be), _mm256_madd_epi16(ao, bo));
}
MODELC_IV __m128i modelc_dot4_4(__m128i a, __m128i b, __m128i c)
{
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
	return _mm_dpbusd_epi32(c, a, b);
#else
	return _mm_add_epi32(c, modelc_dot4e_(a, b));
#endif
}
MODELC_IV __m256i modelc_dot4_8(__m256i a, __m256i b, __m256i c)
{
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
	return _mm256_dpbusd_epi32(c, a, b);
#elif defined(__AVXVNNI__)
	return _mm256_dpbusd_avx_epi32(c, a, b);
#else
	return _mm256_add_epi32(c, modelc_dot4e8_(a, b));
#endif
}
/* RQ32 of the even lanes' 64-bit products p (odd: of acc >> 32): rounded
 * as modelc_rq32_round, the result in the high half of each 64-bit lane */
MODELC_IV __m128i modelc_rq32v4_(__m128i acc, int32_t mult, int32_t low, int twice)
{
	__m128i m = _mm_set1_epi32(mult);
	__m128i ev = _mm_mul_epi32(acc, m), od = _mm_mul_epi32(_mm_srli_epi64(acc, 32), m);
	if (twice) {
		ev = _mm_add_epi64(ev, ev);
		od = _mm_add_epi64(od, od);
	}
	__m128i half = _mm_set1_epi64x((INT64_C(1) << (low + 31)) - 1), one = _mm_set1_epi64x(1);
	__m128i sh = _mm_cvtsi32_si128(32 + low);
	ev = _mm_add_epi64(_mm_add_epi64(ev, half), _mm_and_si128(_mm_srl_epi64(ev, sh), one));
	od = _mm_add_epi64(_mm_add_epi64(od, half), _mm_and_si128(_mm_srl_epi64(od, sh), one));
	__m128i r = _mm_blend_epi16(_mm_srli_epi64(ev, 32), od, 0xcc);
	return _mm_sra_epi32(r, _mm_cvtsi32_si128(low));
}
MODELC_IV __m256i modelc_rq32v8_(__m256i acc, int32_t mult, int32_t low, int twice)
{
	__m256i m = _mm256_set1_epi32(mult);
	__m256i ev = _mm256_mul_epi32(acc, m), od = _mm256_mul_epi32(_mm256_srli_epi64(acc, 32), m);
	if (twice) {
		ev = _mm256_add_epi64(ev, ev);
		od = _mm256_add_epi64(od, od);
	}
	__m256i half = _mm256_set1_epi64x((INT64_C(1) << (low + 31)) - 1), one = _mm256_set1_epi64x(1);
	__m128i sh = _mm_cvtsi32_si128(32 + low);
	ev = _mm256_add_epi64(_mm256_add_epi64(ev, half), _mm256_and_si256(_mm256_srl_epi64(ev, sh), one));
	od = _mm256_add_epi64(_mm256_add_epi64(od, half), _mm256_and_si256(_mm256_srl_epi64(od, sh), one));
	__m256i r = _mm256_blend_epi32(_mm256_srli_epi64(ev, 32), od, 0xaa);
	return _mm256_sra_epi32(r, _mm_cvtsi32_si128(low));
}
/* the same with per-lane constants (AVX2's variable shifts) */
MODELC_IV __m128i modelc_rq32p4_(__m128i acc, __m128i mult, __m128i low, int twice)
{
	__m128i ev = _mm_mul_epi32(acc, mult), od = _mm_mul_epi32(_mm_srli_epi64(acc, 32), _mm_srli_epi64(mult, 32));
	if (twice) {
		ev = _mm_add_epi64(ev, ev);
		od = _mm_add_epi64(od, od);
	}
	__m128i one = _mm_set1_epi64x(1), le = _mm_and_si128(low, _mm_set1_epi64x(0xffffffff)), lo = _mm_srli_epi64(low, 32);
	__m128i c31 = _mm_set1_epi64x(31), c32 = _mm_set1_epi64x(32);
	ev = _mm_add_epi64(_mm_add_epi64(ev, _mm_sub_epi64(_mm_sllv_epi64(one, _mm_add_epi64(le, c31)), one)),
	                   _mm_and_si128(_mm_srlv_epi64(ev, _mm_add_epi64(le, c32)), one));
	od = _mm_add_epi64(_mm_add_epi64(od, _mm_sub_epi64(_mm_sllv_epi64(one, _mm_add_epi64(lo, c31)), one)),
	                   _mm_and_si128(_mm_srlv_epi64(od, _mm_add_epi64(lo, c32)), one));
	return _mm_srav_epi32(_mm_blend_epi16(_mm_srli_epi64(ev, 32), od, 0xcc), low);
}
MODELC_IV __m256i modelc_rq32p8_(__m256i acc, __m256i mult, __m256i low, int twice)
{
	__m256i ev = _mm256_mul_epi32(acc, mult), od = _mm256_mul_epi32(_mm256_srli_epi64(acc, 32), _mm256_srli_epi64(mult, 32));
	if (twice) {
		ev = _mm256_add_epi64(ev, ev);
		od = _mm256_add_epi64(od, od);
	}
	__m256i one = _mm256_set1_epi64x(1), le = _mm256_and_si256(low, _mm256_set1_epi64x(0xffffffff));
	__m256i lo = _mm256_srli_epi64(low, 32), c31 = _mm256_set1_epi64x(31), c32 = _mm256_set1_epi64x(32);
	ev = _mm256_add_epi64(_mm256_add_epi64(ev, _mm256_sub_epi64(_mm256_sllv_epi64(one, _mm256_add_epi64(le, c31)), one)),
	                      _mm256_and_si256(_mm256_srlv_epi64(ev, _mm256_add_epi64(le, c32)), one));
	od = _mm256_add_epi64(_mm256_add_epi64(od, _mm256_sub_epi64(_mm256_sllv_epi64(one, _mm256_add_epi64(lo, c31)), one)),
	                      _mm256_and_si256(_mm256_srlv_epi64(od, _mm256_add_epi64(lo, c32)), one));
	return _mm256_srav_epi32(_mm256_blend_epi32(_mm256_srli_epi64(ev, 32), od, 0xaa), low);
}
MODELC_IV __m128i modelc_rq32v_4(__m128i a, __m128i m, __m128i l) { return modelc_rq32p4_(a, m, l, 0); }
MODELC_IV __m128i modelc_rq32x2v_4(__m128i a, __m128i m, __m128i l) { return modelc_rq32p4_(a, m, l, 1); }
MODELC_IV __m256i modelc_rq32v_8(__m256i a, __m256i m, __m256i l) { return modelc_rq32p8_(a, m, l, 0); }
MODELC_IV __m256i modelc_rq32x2v_8(__m256i a, __m256i m, __m256i l) { return modelc_rq32p8_(a, m, l, 1); }
MODELC_IV __m128i modelc_rq32_4(__m128i a, int32_t m, int32_t l) { return modelc_rq32v4_(a, m, l, 0); }
MODELC_IV __m128i modelc_rq32x2_4(__m128i a, int32_t m, int32_t l) { return modelc_rq32v4_(a, m, l, 1); }
MODELC_IV __m256i modelc_rq32_8(__m256i a, int32_t m, int32_t l) { return modelc_rq32v8_(a, m, l, 0); }
MODELC_IV __m256i modelc_rq32x2_8(__m256i a, int32_t m, int32_t l) { return modelc_rq32v8_(a, m, l, 1); }
/* RQ32's half-up form (modelc_rq32u: no ties, low >= 1): the products'
 * high words, (hi + 2^(low - 1)) >> low */
MODELC_IV __m128i modelc_rq32hi4_(__m128i acc, __m128i mult)
{
	__m128i ev = _mm_mul_epi32(acc, mult), od = _mm_mul_epi32(_mm_srli_epi64(acc, 32), _mm_srli_epi64(mult, 32));
	return _mm_blend_epi16(_mm_srli_epi64(ev, 32), od, 0xcc);
}
MODELC_IV __m256i modelc_rq32hi8_(__m256i acc, __m256i mult)
{
	__m256i ev = _mm256_mul_epi32(acc, mult), od = _mm256_mul_epi32(_mm256_srli_epi64(acc, 32), _mm256_srli_epi64(mult, 32));
	return _mm256_blend_epi32(_mm256_srli_epi64(ev, 32), od, 0xaa);
}
MODELC_IV __m128i modelc_rq32u_4(__m128i a, int32_t m, int32_t l)
{
	__m128i r = _mm_add_epi32(modelc_rq32hi4_(a, _mm_set1_epi32(m)), _mm_set1_epi32((int32_t)(UINT32_C(1) << (l - 1))));
	return _mm_sra_epi32(r, _mm_cvtsi32_si128(l));
}
MODELC_IV __m256i modelc_rq32u_8(__m256i a, int32_t m, int32_t l)
{
	__m256i r = _mm256_add_epi32(modelc_rq32hi8_(a, _mm256_set1_epi32(m)), _mm256_set1_epi32((int32_t)(UINT32_C(1) << (l - 1))));
	return _mm256_sra_epi32(r, _mm_cvtsi32_si128(l));
}
MODELC_IV __m128i modelc_rq32uv_4(__m128i a, __m128i m, __m128i l)
{
	__m128i one = _mm_set1_epi32(1);
	return _mm_srav_epi32(_mm_add_epi32(modelc_rq32hi4_(a, m), _mm_sllv_epi32(one, _mm_sub_epi32(l, one))), l);
}
MODELC_IV __m256i modelc_rq32uv_8(__m256i a, __m256i m, __m256i l)
{
	__m256i one = _mm256_set1_epi32(1);
	return _mm256_srav_epi32(_mm256_add_epi32(modelc_rq32hi8_(a, m), _mm256_sllv_epi32(one, _mm256_sub_epi32(l, one))), l);
}
MODELC_IV int32_t modelc_lanei4(__m128i v, int i)
{
	int32_t t[4];
	_mm_storeu_si128((__m128i *)(void *)t, v);
	return t[i];
}
MODELC_IV int32_t modelc_lanei8(__m256i v, int i)
{
	int32_t t[8];
	_mm256_storeu_si256((__m256i *)(void *)t, v);
	return t[i];
}
#if defined(__AVX512F__)
MODELC_IV __m512i modelc_lds816(const int8_t *p) { return _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)); }
MODELC_IV __m512i modelc_ldu816(const uint8_t *p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)); }
MODELC_IV __m512i modelc_lds816_s2(const int8_t *p)
{
	return _mm512_srai_epi32(_mm512_slli_epi32(_mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)p)), 24), 24);
}
MODELC_IV __m512i modelc_ldu816_s2(const uint8_t *p)
{
	return _mm512_and_si512(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)p)), _mm512_set1_epi32(0xff));
}
MODELC_IV void modelc_st8_16(void *p, __m512i v) { _mm_storeu_si128((__m128i *)p, _mm512_cvtepi32_epi8(v)); }
MODELC_IV __m512i modelc_dot2_16(__m512i a, __m512i b, __m512i c)
{
#if defined(__AVX512VNNI__)
	return _mm512_dpwssd_epi32(c, a, b);
#elif defined(__AVX512BW__)
	return _mm512_add_epi32(c, _mm512_madd_epi16(a, b));
#else
	__m256i lo = _mm256_madd_epi16(_mm512_castsi512_si256(a), _mm512_castsi512_si256(b));
	__m256i hi = _mm256_madd_epi16(_mm512_extracti64x4_epi64(a, 1), _mm512_extracti64x4_epi64(b, 1));
	return _mm512_add_epi32(c, _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
#endif
}
MODELC_IV __m512i modelc_dot4_16(__m512i a, __m512i b, __m512i c)
{
#if defined(__AVX512VNNI__)
	return _mm512_dpbusd_epi32(c, a, b);
#else
	__m256i lo = modelc_dot4e8_(_mm512_castsi512_si256(a), _mm512_castsi512_si256(b));
	__m256i hi = modelc_dot4e8_(_mm512_extracti64x4_epi64(a, 1), _mm512_extracti64x4_epi64(b, 1));
	return _mm512_add_epi32(c, _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
#endif
}
MODELC_IV __m512i modelc_rq32v16_(__m512i acc, int32_t mult, int32_t low, int twice)
{
	__m512i m = _mm512_set1_epi32(mult);
	__m512i ev = _mm512_mul_epi32(acc, m), od = _mm512_mul_epi32(_mm512_srli_epi64(acc, 32), m);
	if (twice) {
		ev = _mm512_add_epi64(ev, ev);
		od = _mm512_add_epi64(od, od);
	}
	__m512i half = _mm512_set1_epi64((INT64_C(1) << (low + 31)) - 1), one = _mm512_set1_epi64(1);
	__m128i sh = _mm_cvtsi32_si128(32 + low);
	ev = _mm512_add_epi64(_mm512_add_epi64(ev, half), _mm512_and_si512(_mm512_srl_epi64(ev, sh), one));
	od = _mm512_add_epi64(_mm512_add_epi64(od, half), _mm512_and_si512(_mm512_srl_epi64(od, sh), one));
	__m512i r = _mm512_mask_blend_epi32(0xaaaa, _mm512_srli_epi64(ev, 32), od);
	return _mm512_sra_epi32(r, _mm_cvtsi32_si128(low));
}
MODELC_IV __m512i modelc_rq32p16_(__m512i acc, __m512i mult, __m512i low, int twice)
{
	__m512i ev = _mm512_mul_epi32(acc, mult), od = _mm512_mul_epi32(_mm512_srli_epi64(acc, 32), _mm512_srli_epi64(mult, 32));
	if (twice) {
		ev = _mm512_add_epi64(ev, ev);
		od = _mm512_add_epi64(od, od);
	}
	__m512i one = _mm512_set1_epi64(1), le = _mm512_and_si512(low, _mm512_set1_epi64(0xffffffff));
	__m512i lo = _mm512_srli_epi64(low, 32), c31 = _mm512_set1_epi64(31), c32 = _mm512_set1_epi64(32);
	ev = _mm512_add_epi64(_mm512_add_epi64(ev, _mm512_sub_epi64(_mm512_sllv_epi64(one, _mm512_add_epi64(le, c31)), one)),
	                      _mm512_and_si512(_mm512_srlv_epi64(ev, _mm512_add_epi64(le, c32)), one));
	od = _mm512_add_epi64(_mm512_add_epi64(od, _mm512_sub_epi64(_mm512_sllv_epi64(one, _mm512_add_epi64(lo, c31)), one)),
	                      _mm512_and_si512(_mm512_srlv_epi64(od, _mm512_add_epi64(lo, c32)), one));
	return _mm512_srav_epi32(_mm512_mask_blend_epi32(0xaaaa, _mm512_srli_epi64(ev, 32), od), low);
}
MODELC_IV __m512i modelc_rq32v_16(__m512i a, __m512i m, __m512i l) { return modelc_rq32p16_(a, m, l, 0); }
MODELC_IV __m512i modelc_rq32x2v_16(__m512i a, __m512i m, __m512i l) { return modelc_rq32p16_(a, m, l, 1); }
MODELC_IV __m512i modelc_rq32_16(__m512i a, int32_t m, int32_t l) { return modelc_rq32v16_(a, m, l, 0); }
MODELC_IV __m512i modelc_rq32x2_16(__m512i a, int32_t m, int32_t l) { return modelc_rq32v16_(a, m, l, 1); }
MODELC_IV __m512i modelc_rq32hi16_(__m512i acc, __m512i mult)
{
	__m512i ev = _mm512_mul_epi32(acc, mult), od = _mm512_mul_epi32(_mm512_srli_epi64(acc, 32), _mm512_srli_epi64(mult, 32));
	return _mm512_mask_blend_epi32(0xaaaa, _mm512_srli_epi64(ev, 32), od);
}
MODELC_IV __m512i modelc_rq32u_16(__m512i a, int32_t m, int32_t l)
{
	__m512i r = _mm512_add_epi32(modelc_rq32hi16_(a, _mm512_set1_epi32(m)), _mm512_set1_epi32((int32_t)(UINT32_C(1) << (l - 1))));
	return _mm512_sra_epi32(r, _mm_cvtsi32_si128(l));
}
MODELC_IV __m512i modelc_rq32uv_16(__m512i a, __m512i m, __m512i l)
{
	__m512i one = _mm512_set1_epi32(1);
	return _mm512_srav_epi32(_mm512_add_epi32(modelc_rq32hi16_(a, m), _mm512_sllv_epi32(one, _mm512_sub_epi32(l, one))), l);
}
MODELC_IV int32_t modelc_lanei16(__m512i v, int i)
{
	int32_t t[16];
	_mm512_storeu_si512((void *)t, v);
	return t[i];
}
#endif
