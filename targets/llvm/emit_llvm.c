/* The LLVM target: builds the compiled program (aot.h) as LLVM IR through
 * the LLVM C API, optimises it for --triple/--cpu/--features and writes
 *   NAME.h        the C target's header (the same contract)
 *   NAME.o        the kernels, NAME_run, the descriptor tables, the weights
 *   libNAME.a     NAME.o as a static library with its symbol index
 *   modelc_rt.h   runtime-min (status codes, modelc_tensor_desc)
 *   NAME.ll       with --emit-llvm: the optimised IR, for reading
 * with no C compiler between modelc and the library. It lowers the same
 * kernel IR the C emitter prints, statement by statement, with the same
 * semantics (targets/common/emit_cfamily.c and runtime-min/modelc_rt.h say
 * what each operation does at the edges: wrapping, division by zero,
 * saturating conversions);
 * vectors are LLVM vector types, legalised by LLVM for the target. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/emit_cfamily.h"
#include "archive.h"

#ifndef MC_HAVE_LLVM

bool mc_llvm_available(void)
{
	return false;
}

int mc_emit_llvm(const mc_program *p, const mc_compile_opts *o, const char *dir)
{
	(void)p;
	(void)o;
	(void)dir;
	mc_error("the llvm target is not in this build of modelc (configure found no llvm-config "
	         "15 or newer; install llvm-19-dev and run ./configure again)");
	return -1;
}

const char *mc_llvm_default_isa(const mc_compile_opts *o)
{
	(void)o;
	return NULL;
}

#else

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

/* LLVM is loaded when this target runs, not linked: after the headers, the
 * generated defines make each LLVM-C call below go through mc_llvm. */
#include "llvm_api.h"
#include "llvm_functions.h"

bool mc_llvm_available(void)
{
	return true;
}

typedef struct {
	const mc_program *p;
	const mc_compile_opts *o;
	mc_cemit ce;              /* names, the index width, restrict facts */
	LLVMContextRef ctx;
	LLVMModuleRef mod;
	LLVMBuilderRef b;
	LLVMTargetDataRef td;
	LLVMTypeRef i1, i8, i16, i32, i64, f32, f64, ptr, idx, half;
	LLVMValueRef *weights;    /* per weight: its global, NULL when empty */
	LLVMValueRef small_table[MC_INT2 + 1]; /* per small float dtype: its codes' values */
	/* the kernel being built */
	const mc_kernel *k;
	LLVMValueRef fn;
	LLVMValueRef *buf_ptr;    /* per buffer: its pointer parameter */
	LLVMValueRef *var_slot;   /* per variable: its stack slot (mem2reg makes registers of them) */
	LLVMValueRef dim;         /* --dim LO..HI: the size, the kernel's last parameter (MC_KE_DIM) */
	LLVMBasicBlockRef loop_exit[MC_KB_MAX_DEPTH];
	int loops;
	int err;
} lemit;

static void fail(lemit *e, const char *fmt, const char *arg)
{
	if (!e->err) {
		char msg[512];
		snprintf(msg, sizeof msg, fmt, arg ? arg : "");
		mc_error("LLVM target: kernel '%s': %s", e->k ? e->k->name : "-", msg);
	}
	e->err = -1;
}

/* ---- types ---- */
static LLVMTypeRef ktype(lemit *e, mc_ktype t)
{
	switch (t) {
	case MC_KT_BOOL: return e->i1;
	case MC_KT_I8: case MC_KT_U8: return e->i8;
	case MC_KT_I16: case MC_KT_U16: return e->i16;
	case MC_KT_I32: case MC_KT_U32: return e->i32;
	case MC_KT_I64: case MC_KT_U64: return e->i64;
	case MC_KT_F32: return e->f32;
	case MC_KT_F64: return e->f64;
	case MC_KT_INDEX: return e->idx;
	default: return NULL;
	}
}

static LLVMTypeRef ktype_lanes(lemit *e, mc_ktype t, int lanes)
{
	LLVMTypeRef s = ktype(e, t);
	return lanes > 1 && s ? LLVMVectorType(s, (unsigned)lanes) : s;
}

/* An element in memory, as the C target stores it (mc_ce_storage_type). */
static LLVMTypeRef storage(lemit *e, mc_dtype t)
{
	switch (t) {
	case MC_FLOAT: return e->f32;
	case MC_DOUBLE: return e->f64;
	case MC_INT16: case MC_UINT16: case MC_FLOAT16: case MC_BFLOAT16: return e->i16;
	case MC_INT32: case MC_UINT32: return e->i32;
	case MC_INT64: case MC_UINT64: return e->i64;
	default: return mc_ce_storage_type(t) ? e->i8 : NULL;
	}
}

/* unsigned ints and bool */
static bool is_unsigned(mc_ktype t)
{
	return !mc_ktype_is_signed(t);
}

/* ---- calls ---- */
static LLVMAttributeRef enum_attr(lemit *e, const char *name)
{
	return LLVMCreateEnumAttribute(e->ctx, LLVMGetEnumAttributeKindForName(name, strlen(name)), 0);
}

static LLVMValueRef intrinsic(lemit *e, const char *name, LLVMTypeRef *over, int n_over, LLVMValueRef *args,
                              int n_args)
{
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	if (!id) {
		fail(e, "LLVM has no intrinsic %s", name);
		return LLVMGetPoison(e->f32);
	}
	LLVMValueRef f = LLVMGetIntrinsicDeclaration(e->mod, id, over, (size_t)n_over);
	LLVMTypeRef ft = LLVMIntrinsicGetType(e->ctx, id, over, (size_t)n_over);
	return LLVMBuildCall2(e->b, ft, f, args, (unsigned)n_args, "");
}

/* A C library function (libm): float f(float[, float]) or the double one. */
static LLVMValueRef libcall(lemit *e, const char *base, bool f32, LLVMValueRef a, LLVMValueRef b)
{
	char name[32];
	snprintf(name, sizeof name, "%s%s", base, f32 ? "f" : "");
	LLVMTypeRef t = f32 ? e->f32 : e->f64;
	LLVMTypeRef params[2] = { t, t };
	LLVMTypeRef ft = LLVMFunctionType(t, params, b ? 2 : 1, 0);
	LLVMValueRef f = LLVMGetNamedFunction(e->mod, name);
	if (!f) {
		f = LLVMAddFunction(e->mod, name, ft);
		LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, enum_attr(e, "nounwind"));
	}
	LLVMValueRef args[2] = { a, b };
	return LLVMBuildCall2(e->b, ft, f, args, b ? 2 : 1, "");
}

static LLVMValueRef private_global(lemit *e, LLVMValueRef init, const char *name, unsigned align);

/* ---- conversions between memory and compute types ---- */
static LLVMValueRef f16_to_f32(lemit *e, LLVMValueRef bits)
{
	LLVMValueRef h = LLVMBuildBitCast(e->b, bits, e->half, "");
	return LLVMBuildFPExt(e->b, h, e->f32, "");
}

/* round to nearest even, overflow to inf (LLVM's fptrunc) */
static LLVMValueRef f32_to_f16(lemit *e, LLVMValueRef f)
{
	LLVMValueRef h = LLVMBuildFPTrunc(e->b, f, e->half, "");
	return LLVMBuildBitCast(e->b, h, e->i16, "");
}

static LLVMValueRef bf16_to_f32(lemit *e, LLVMValueRef bits)
{
	LLVMValueRef w = LLVMBuildShl(e->b, LLVMBuildZExt(e->b, bits, e->i32, ""), LLVMConstInt(e->i32, 16, 0), "");
	return LLVMBuildBitCast(e->b, w, e->f32, "");
}

/* modelc_f32_to_bf16: round to nearest even; NaN stays a quiet NaN */
static LLVMValueRef f32_to_bf16(lemit *e, LLVMValueRef f)
{
	LLVMBuilderRef b = e->b;
	LLVMValueRef x = LLVMBuildBitCast(b, f, e->i32, "");
	LLVMValueRef hi = LLVMBuildLShr(b, x, LLVMConstInt(e->i32, 16, 0), "");
	LLVMValueRef lsb = LLVMBuildAnd(b, hi, LLVMConstInt(e->i32, 1, 0), "");
	LLVMValueRef r = LLVMBuildAdd(b, x, LLVMBuildAdd(b, LLVMConstInt(e->i32, 0x7fff, 0), lsb, ""), "");
	LLVMValueRef rounded = LLVMBuildLShr(b, r, LLVMConstInt(e->i32, 16, 0), "");
	LLVMValueRef quiet = LLVMBuildOr(b, hi, LLVMConstInt(e->i32, 0x40, 0), "");
	LLVMValueRef is_nan = LLVMBuildFCmp(b, LLVMRealUNO, f, f, "");
	return LLVMBuildTrunc(b, LLVMBuildSelect(b, is_nan, quiet, rounded, ""), e->i16, "");
}

/* modelc_wrap_i4 and friends: two's complement at the width, in a byte */
static LLVMValueRef wrap_bits(lemit *e, LLVMValueRef v, unsigned bits, bool is_signed)
{
	LLVMValueRef mask = LLVMConstInt(e->i8, (1u << bits) - 1u, 0);
	LLVMValueRef m = LLVMBuildAnd(e->b, v, mask, "");
	if (!is_signed)
		return m;
	LLVMValueRef top = LLVMConstInt(e->i8, 1u << (bits - 1u), 0);
	return LLVMBuildSub(e->b, LLVMBuildXor(e->b, m, top, ""), top, "");
}

/* A small float's code (float8 types, float4e2m1, float8e8m0) to f32: a
 * table of every code's value, made by the reference's own decoding
 * (mc_small_float_to_double), so the two cannot disagree. */
static LLVMValueRef small_to_f32(lemit *e, mc_dtype dt, LLVMValueRef code)
{
	if (!e->small_table[dt]) {
		LLVMValueRef v[256];
		for (unsigned c = 0; c < 256; c++)
			v[c] = LLVMConstReal(e->f32, (double)(float)mc_small_float_to_double(dt, (uint8_t)c));
		char name[300];
		snprintf(name, sizeof name, "%s_%s_values", e->ce.name, mc_dtype_name(dt));
		e->small_table[dt] = private_global(e, LLVMConstArray(e->f32, v, 256), name, 16);
	}
	LLVMValueRef i = LLVMBuildZExt(e->b, code, e->i32, "");
	if (dt == MC_FLOAT4E2M1) /* a nibble in a byte, as modelc_f4e2m1_to_f32 reads it */
		i = LLVMBuildAnd(e->b, i, LLVMConstInt(e->i32, 0xf, 0), "");
	LLVMValueRef p = LLVMBuildInBoundsGEP2(e->b, e->f32, e->small_table[dt], &i, 1, "");
	return LLVMBuildLoad2(e->b, e->f32, p, "");
}

/* modelc_f32_to_small, branch-free: round to nearest even at the format's
 * precision (never finer than its subnormals), saturate at the largest
 * finite value, inf to inf where the format has it (else saturated too),
 * NaN to the format's NaN (float4e2m1: -0), no -0 in FNUZ formats. */
static LLVMValueRef f32_to_small(lemit *e, const mc_small_float *f, LLVMValueRef v)
{
	LLVMBuilderRef b = e->b;
#define K(n) LLVMConstInt(e->i32, (unsigned long long)(n), 0)
	LLVMValueRef x = LLVMBuildBitCast(b, v, e->i32, "");
	LLVMValueRef ax = LLVMBuildAnd(b, x, K(0x7fffffffu), "");
	LLVMValueRef neg = LLVMBuildICmp(b, LLVMIntSLT, x, K(0), "");
	LLVMValueRef sign = LLVMBuildSelect(b, neg, K(1u << (unsigned)f->sign_shift), K(0), "");
	LLVMValueRef nan_code = !f->has_nan ? K(1u << (unsigned)f->sign_shift) : f->fnuz ? K(0x80) : LLVMBuildOr(b, sign, K(f->nan), "");
	LLVMValueRef biased = LLVMBuildLShr(b, ax, K(23), "");
	LLVMValueRef ex = LLVMBuildSub(b, biased, K(127), "");
	LLVMValueRef min_lead = K(1 - f->bias);
	LLVMValueRef lead = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, ex, min_lead, ""), min_lead, ex, "");
	LLVMValueRef shift = LLVMBuildAdd(b, LLVMBuildSub(b, lead, ex, ""), K(23 - f->mbits), "");
	LLVMValueRef to_zero = LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntEQ, biased, K(0), ""),
	                                   LLVMBuildICmp(b, LLVMIntSGE, shift, K(25), ""), "");
	LLVMValueRef s = LLVMBuildSelect(b, to_zero, K(1), shift, "");
	LLVMValueRef m = LLVMBuildOr(b, LLVMBuildAnd(b, ax, K(0x7fffffu), ""), K(0x800000u), "");
	LLVMValueRef q = LLVMBuildLShr(b, m, s, "");
	LLVMValueRef rem = LLVMBuildAnd(b, m, LLVMBuildSub(b, LLVMBuildShl(b, K(1), s, ""), K(1), ""), "");
	LLVMValueRef half = LLVMBuildShl(b, K(1), LLVMBuildSub(b, s, K(1), ""), "");
	LLVMValueRef odd = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, q, K(1), ""), K(0), "");
	LLVMValueRef up = LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntUGT, rem, half, ""),
	                              LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, rem, half, ""), odd, ""), "");
	q = LLVMBuildAdd(b, q, LLVMBuildZExt(b, up, e->i32, ""), "");
	q = LLVMBuildSelect(b, to_zero, K(0), q, "");
	/* subnormal codes are q; normal ones (exp - 1) << mbits plus q, which
	 * carries into the exponent when rounding reached the next binade */
	LLVMValueRef mag = LLVMBuildAdd(b, LLVMBuildShl(b, LLVMBuildAdd(b, lead, K(f->bias - 1), ""), K(f->mbits), ""), q, "");
	mag = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGT, mag, K(f->max), ""), K(f->max), mag, "");
	LLVMValueRef r = LLVMBuildOr(b, sign, mag, "");
	r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, q, K(0), ""), f->fnuz ? K(0) : sign, r, "");
	r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, ax, K(0x7f800000u), ""),
	                    LLVMBuildOr(b, sign, K(f->has_inf ? f->max + 1u : f->max), ""), r, "");
	r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGT, ax, K(0x7f800000u), ""), nan_code, r, "");
#undef K
	return LLVMBuildTrunc(b, r, e->i8, "");
}

/* modelc_f32_to_f8e8m0: up to a power of two, saturating (ONNX Cast's
 * defaults); NaN gives 0xff, inf the largest code, zero the smallest. */
static LLVMValueRef f32_to_e8m0(lemit *e, LLVMValueRef v)
{
	LLVMBuilderRef b = e->b;
#define K(n) LLVMConstInt(e->i32, (unsigned long long)(n), 0)
	LLVMValueRef ax = LLVMBuildAnd(b, LLVMBuildBitCast(b, v, e->i32, ""), K(0x7fffffffu), "");
	LLVMValueRef biased = LLVMBuildLShr(b, ax, K(23), "");
	LLVMValueRef frac = LLVMBuildAnd(b, ax, K(0x7fffffu), "");
	LLVMValueRef p_normal = LLVMBuildAdd(b, LLVMBuildSub(b, biased, K(127), ""),
	                                     LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntNE, frac, K(0), ""), e->i32, ""), "");
	/* f32 subnormal: ax * 2^-149, its leading bit found by ctlz */
	LLVMValueRef args[2] = { ax, LLVMConstInt(e->i1, 0, 0) };
	LLVMValueRef lz = intrinsic(e, "llvm.ctlz", &e->i32, 1, args, 2);
	LLVMValueRef lead = LLVMBuildSub(b, K(31), lz, "");
	LLVMValueRef below = LLVMBuildSub(b, LLVMBuildShl(b, K(1), lead, ""), K(1), "");
	LLVMValueRef p_sub = LLVMBuildAdd(b, LLVMBuildSub(b, lead, K(149), ""),
	                                  LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, ax, below, ""), K(0), ""),
	                                                e->i32, ""), "");
	LLVMValueRef p = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, biased, K(0), ""), p_sub, p_normal, "");
	LLVMValueRef r = LLVMBuildAdd(b, p, K(127), "");
	r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, p, K(-127), ""), K(0), r, "");
	r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, p, K(127), ""), K(0xfe), r, "");
	r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, ax, K(0), ""), K(0), r, "");
	r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, ax, K(0x7f800000u), ""), K(0xfe), r, "");
	r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGT, ax, K(0x7f800000u), ""), K(0xff), r, "");
#undef K
	return LLVMBuildTrunc(b, r, e->i8, "");
}

static LLVMValueRef widen(lemit *e, mc_dtype dt, LLVMValueRef v)
{
	switch (dt) {
	case MC_FLOAT16: return f16_to_f32(e, v);
	case MC_BFLOAT16: return bf16_to_f32(e, v);
	case MC_BOOL: return LLVMBuildICmp(e->b, LLVMIntNE, v, LLVMConstInt(e->i8, 0, 0), "");
	default:
		return mc_dtype_is_small_float(dt) ? small_to_f32(e, dt, v) : v;
	}
}

static LLVMValueRef narrow(lemit *e, mc_dtype dt, LLVMValueRef v)
{
	switch (dt) {
	case MC_FLOAT16: return f32_to_f16(e, v);
	case MC_BFLOAT16: return f32_to_bf16(e, v);
	case MC_BOOL: return LLVMBuildZExt(e->b, v, e->i8, "");
	case MC_INT4: return wrap_bits(e, v, 4, true);
	case MC_INT2: return wrap_bits(e, v, 2, true);
	case MC_UINT4: return wrap_bits(e, v, 4, false);
	case MC_UINT2: return wrap_bits(e, v, 2, false);
	case MC_FLOAT8E8M0: return f32_to_e8m0(e, v);
	default:
		if (mc_small_float_format(dt)) /* the reference's own description of the format */
			return f32_to_small(e, mc_small_float_format(dt), v);
		return v;
	}
}

/* ---- expressions ---- */
static LLVMValueRef expr(lemit *e, const mc_kexpr *x);

static LLVMValueRef elem_ptr(lemit *e, int buf, LLVMTypeRef elt, const mc_kexpr *index)
{
	LLVMValueRef i = expr(e, index);
	return LLVMBuildInBoundsGEP2(e->b, elt, e->buf_ptr[buf], &i, 1, "");
}

static LLVMValueRef load(lemit *e, const mc_kexpr *x)
{
	const mc_kbuf *kb = &e->k->bufs[x->buf];
	if (x->lanes > 1) {
		/* f32 from float32; i32 from int32, or 8-bit elements widened
		 * (sign- or zero-) lane by lane */
		unsigned n = (unsigned)x->lanes;
		LLVMTypeRef elt = kb->dtype == MC_FLOAT ? e->f32 : kb->dtype == MC_INT32 ? e->i32
		                : kb->dtype == MC_INT8 || kb->dtype == MC_UINT8 ? e->i8 : NULL;
		if (!elt || (x->type == MC_KT_I32) != (kb->dtype != MC_FLOAT)) {
			fail(e, "vector load from a buffer of dtype %s", mc_dtype_name(kb->dtype));
			return LLVMGetPoison(LLVMVectorType(e->f32, n));
		}
		unsigned step = x->stride == 2 && elt == e->i8 ? 2 : 1;
		LLVMValueRef l = LLVMBuildLoad2(e->b, LLVMVectorType(elt, n * step), elem_ptr(e, x->buf, elt, x->a), "");
		LLVMSetAlignment(l, elt == e->i8 ? 1 : 4);
		if (step == 2) { /* every other element: the even ones of 2n */
			LLVMValueRef *idx = mc_xcalloc(n, sizeof *idx);
			for (unsigned i = 0; i < n; i++)
				idx[i] = LLVMConstInt(e->i32, 2 * i, 0);
			l = LLVMBuildShuffleVector(e->b, l, LLVMGetPoison(LLVMTypeOf(l)), LLVMConstVector(idx, n), "");
			free(idx);
		}
		if (elt == e->i8)
			l = kb->dtype == MC_INT8 ? LLVMBuildSExt(e->b, l, LLVMVectorType(e->i32, n), "")
			                         : LLVMBuildZExt(e->b, l, LLVMVectorType(e->i32, n), "");
		return l;
	}
	LLVMTypeRef st = storage(e, kb->dtype);
	if (!st) {
		fail(e, "buffer of dtype %s, which has no storage", mc_dtype_name(kb->dtype));
		return LLVMGetPoison(e->f32);
	}
	return widen(e, kb->dtype, LLVMBuildLoad2(e->b, st, elem_ptr(e, x->buf, st, x->a), ""));
}

static LLVMValueRef int_const(lemit *e, mc_ktype t, int64_t v)
{
	return LLVMConstInt(ktype(e, t), (unsigned long long)v, 0);
}

static LLVMValueRef splat(lemit *e, LLVMValueRef s, int lanes)
{
	LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(s), (unsigned)lanes);
	LLVMValueRef v = LLVMBuildInsertElement(e->b, LLVMGetPoison(vt), s, LLVMConstInt(e->i32, 0, 0), "");
	return LLVMBuildShuffleVector(e->b, v, LLVMGetPoison(vt), LLVMConstNull(LLVMVectorType(e->i32, (unsigned)lanes)),
	                              "");
}

/* The lane count of a value's type: 1 for a scalar. */
static unsigned lanes_of(LLVMValueRef v)
{
	LLVMTypeRef t = LLVMTypeOf(v);
	return LLVMGetTypeKind(t) == LLVMVectorTypeKind ? LLVMGetVectorSize(t) : 1;
}

/* Scalar type s, or a vector of it as wide as `like`'s type. */
static LLVMTypeRef same_lanes(LLVMTypeRef s, LLVMValueRef like)
{
	unsigned n = lanes_of(like);
	return n > 1 ? LLVMVectorType(s, n) : s;
}

/* The integer constant v of scalar type s, splat to `like`'s lane count
 * (integer constants that meet vector values: i32 vectors). */
static LLVMValueRef const_like(LLVMTypeRef s, LLVMValueRef like, unsigned long long v)
{
	LLVMValueRef c = LLVMConstInt(s, v, 0);
	unsigned n = lanes_of(like);
	if (n <= 1)
		return c;
	LLVMValueRef *elts = mc_xcalloc(n, sizeof *elts);
	for (unsigned i = 0; i < n; i++)
		elts[i] = c;
	LLVMValueRef r = LLVMConstVector(elts, n);
	free(elts);
	return r;
}

/* The integer constant v of value a's own type (its element type for a vector). */
static LLVMValueRef const_of(LLVMValueRef a, unsigned long long v)
{
	LLVMTypeRef t = LLVMTypeOf(a);
	return const_like(LLVMGetTypeKind(t) == LLVMVectorTypeKind ? LLVMGetElementType(t) : t, a, v);
}

/* Whether the target has the Arm DSP extension (ARMv7E-M: Cortex-M4, M7):
 * then SXTB16 and DOT2 are its SXTB16 and SMLAD. */
static bool arm_dsp(const lemit *e)
{
	const char *t = e->o->triple;
	return t && (!strncmp(t, "thumbv7em", 9) || !strncmp(t, "armv7em", 7));
}

/* The signed 8-bit (or 16-bit) field of a at bit `at`, as i32. */
static LLVMValueRef sfield(lemit *e, LLVMValueRef a, unsigned at, LLVMTypeRef narrow)
{
	if (at)
		a = LLVMBuildLShr(e->b, a, const_of(a, at), "");
	return LLVMBuildSExt(e->b, LLVMBuildTrunc(e->b, a, same_lanes(narrow, a), ""), LLVMTypeOf(a), "");
}

/* MC_KU_SXTB16 (hi: of a rotated by 8) */
static LLVMValueRef sxtb16(lemit *e, LLVMValueRef a, bool hi)
{
	if (hi)
		a = LLVMBuildOr(e->b, LLVMBuildLShr(e->b, a, const_of(a, 8), ""), LLVMBuildShl(e->b, a, const_of(a, 24), ""),
		                "");
	if (arm_dsp(e) && lanes_of(a) == 1)
		return intrinsic(e, "llvm.arm.sxtb16", NULL, 0, &a, 1);
	LLVMValueRef lo = LLVMBuildAnd(e->b, sfield(e, a, 0, e->i8), const_of(a, 0xffff), "");
	LLVMValueRef up = LLVMBuildShl(e->b, sfield(e, a, 16, e->i8), const_of(a, 16), "");
	return LLVMBuildOr(e->b, lo, up, "");
}

/* MC_KE_DOT2: acc + lo(a) lo(b) + hi(a) hi(b), wrapping; lane by lane
 * for vectors: the 16-bit halves as a vector of twice the lanes, sign-
 * extended and multiplied, then the even and odd products (each i32 lane's
 * pair, whichever the byte order) added: x86's pmaddwd pattern. */
static LLVMValueRef dot2(lemit *e, LLVMValueRef a, LLVMValueRef b, LLVMValueRef acc)
{
	unsigned n = lanes_of(acc);
	if (n > 1) {
		LLVMTypeRef h16 = LLVMVectorType(e->i16, 2 * n), h32 = LLVMVectorType(e->i32, 2 * n);
		LLVMValueRef ha = LLVMBuildSExt(e->b, LLVMBuildBitCast(e->b, a, h16, ""), h32, "");
		LLVMValueRef hb = LLVMBuildSExt(e->b, LLVMBuildBitCast(e->b, b, h16, ""), h32, "");
		LLVMValueRef p = LLVMBuildMul(e->b, ha, hb, "");
		LLVMValueRef *idx = mc_xcalloc(2 * (size_t)n, sizeof *idx);
		for (unsigned i = 0; i < n; i++) {
			idx[i] = LLVMConstInt(e->i32, 2 * i, 0);
			idx[n + i] = LLVMConstInt(e->i32, 2 * i + 1, 0);
		}
		LLVMValueRef even = LLVMBuildShuffleVector(e->b, p, LLVMGetPoison(h32), LLVMConstVector(idx, n), "");
		LLVMValueRef odd = LLVMBuildShuffleVector(e->b, p, LLVMGetPoison(h32), LLVMConstVector(idx + n, n), "");
		free(idx);
		return LLVMBuildAdd(e->b, acc, LLVMBuildAdd(e->b, even, odd, ""), "");
	}
	if (arm_dsp(e)) {
		LLVMValueRef args[3] = { a, b, acc };
		return intrinsic(e, "llvm.arm.smlad", NULL, 0, args, 3);
	}
	LLVMValueRef lo = LLVMBuildMul(e->b, sfield(e, a, 0, e->i16), sfield(e, b, 0, e->i16), "");
	LLVMValueRef hi = LLVMBuildMul(e->b, sfield(e, a, 16, e->i16), sfield(e, b, 16, e->i16), "");
	return LLVMBuildAdd(e->b, acc, LLVMBuildAdd(e->b, lo, hi, ""), "");
}

/* MC_KE_DOT4: acc + the four products of a's unsigned (a_signed: signed)
 * bytes and b's signed ones, wrapping, lane by lane: the bytes as a vector
 * of 4n, widened and multiplied, each lane's four products added (x86's
 * vpdpbusd pattern, aarch64's sdot). */
static LLVMValueRef dot4(lemit *e, LLVMValueRef a, LLVMValueRef b, LLVMValueRef acc, bool a_signed)
{
	unsigned n = lanes_of(acc);
	LLVMTypeRef b8 = LLVMVectorType(e->i8, 4 * n), w32 = LLVMVectorType(e->i32, 4 * n);
	LLVMValueRef a8 = LLVMBuildBitCast(e->b, a, b8, "");
	LLVMValueRef p = LLVMBuildMul(e->b, a_signed ? LLVMBuildSExt(e->b, a8, w32, "") : LLVMBuildZExt(e->b, a8, w32, ""),
	                              LLVMBuildSExt(e->b, LLVMBuildBitCast(e->b, b, b8, ""), w32, ""), "");
	LLVMValueRef *idx = mc_xcalloc(n, sizeof *idx), sum = NULL;
	for (unsigned j = 0; j < 4; j++) {
		for (unsigned i = 0; i < n; i++)
			idx[i] = LLVMConstInt(e->i32, 4 * i + j, 0);
		LLVMValueRef part = LLVMBuildShuffleVector(e->b, p, LLVMGetPoison(w32), LLVMConstVector(idx, n), "");
		sum = sum ? LLVMBuildAdd(e->b, sum, part, "") : part;
	}
	free(idx);
	if (n == 1) /* a scalar: the one lane of <1 x i32> */
		sum = LLVMBuildExtractElement(e->b, sum, LLVMConstInt(e->i32, 0, 0), "");
	return LLVMBuildAdd(e->b, acc, sum, "");
}

/* MC_KE_RQ32 (modelc_rt.h's modelc_rq32): the same arithmetic; for a
 * vector acc lane by lane (in i64 lanes), mult and low scalars shared by
 * every lane. */
static LLVMValueRef rq32(lemit *e, LLVMValueRef acc, LLVMValueRef mult, LLVMValueRef low, int form)
{
	LLVMBuilderRef b = e->b;
	unsigned n = lanes_of(acc);
	if (form == MC_RQ32_HALF_UP) { /* (hi + 2^(low - 1)) >> low, lane by lane */
		if (n > 1 && lanes_of(mult) == 1) {
			mult = splat(e, mult, (int)n);
			low = splat(e, low, (int)n);
		}
		LLVMTypeRef w64 = same_lanes(e->i64, acc);
		LLVMValueRef v = LLVMBuildMul(b, LLVMBuildSExt(b, acc, w64, ""), LLVMBuildSExt(b, mult, w64, ""), "");
		LLVMValueRef hi = LLVMBuildTrunc(b, LLVMBuildLShr(b, v, const_of(v, 32), ""), LLVMTypeOf(acc), "");
		LLVMValueRef half = LLVMBuildShl(b, const_of(low, 1), LLVMBuildSub(b, low, const_of(low, 1), ""), "");
		return LLVMBuildAShr(b, LLVMBuildAdd(b, hi, half, ""), low, "");
	}
	bool twice = form == MC_RQ32_TWICE;
	LLVMTypeRef t64 = same_lanes(e->i64, acc), t32 = LLVMTypeOf(acc);
	/* (int64)mult, 2^(low + 31) - 1: once for scalar constants (then
	 * splat), lane by lane for vectors of per-lane constants */
	bool per_lane = lanes_of(mult) > 1;
	LLVMTypeRef c64 = per_lane ? t64 : e->i64;
	LLVMValueRef m64 = LLVMBuildSExt(b, mult, c64, "");
	LLVMValueRef sh = LLVMBuildAdd(b, LLVMBuildZExt(b, low, c64, ""), const_of(m64, 31), "");
	LLVMValueRef half = LLVMBuildSub(b, LLVMBuildShl(b, const_of(m64, 1), sh, ""), const_of(m64, 1), "");
	if (n > 1 && !per_lane) {
		m64 = splat(e, m64, (int)n);
		half = splat(e, half, (int)n);
		low = splat(e, low, (int)n);
	}
	LLVMValueRef v = LLVMBuildMul(b, LLVMBuildSExt(b, acc, t64, ""), m64, "");
	if (twice)
		v = LLVMBuildAdd(b, v, v, "");
	LLVMValueRef c32 = const_of(v, 32);
	LLVMValueRef hi = LLVMBuildTrunc(b, LLVMBuildLShr(b, v, c32, ""), t32, "");
	LLVMValueRef odd = LLVMBuildAnd(b, LLVMBuildAShr(b, hi, low, ""), const_of(hi, 1), "");
	LLVMValueRef sum = LLVMBuildAdd(b, LLVMBuildAdd(b, v, half, ""), LLVMBuildZExt(b, odd, t64, ""), "");
	return LLVMBuildAShr(b, LLVMBuildTrunc(b, LLVMBuildLShr(b, sum, c32, ""), t32, ""), low, "");
}

static LLVMValueRef un(lemit *e, const mc_kexpr *x)
{
	mc_ktype t = x->a->type;
	LLVMValueRef a = expr(e, x->a);
	LLVMTypeRef at = LLVMTypeOf(a);
	bool is_float = mc_ktype_is_float(t);
	switch (x->op) {
	case MC_KU_NEG:
		if (is_float)
			return LLVMBuildFNeg(e->b, a, "");
		if (t == MC_KT_BOOL) /* -x is x modulo 2 */
			return a;
		return t == MC_KT_INDEX ? LLVMBuildNSWNeg(e->b, a, "") : LLVMBuildNeg(e->b, a, "");
	case MC_KU_NOT:
		if (t != MC_KT_BOOL)
			return LLVMBuildICmp(e->b, LLVMIntEQ, a, LLVMConstNull(at), "");
		return LLVMBuildNot(e->b, a, "");
	case MC_KU_BITNOT:
		if (is_float)
			break;
		return LLVMBuildNot(e->b, a, "");
	case MC_KU_ISNAN:
		if (!is_float)
			return LLVMConstInt(e->i1, 0, 0);
		return LLVMBuildFCmp(e->b, LLVMRealUNO, a, a, "");
	case MC_KU_ISINF: {
		if (!is_float)
			return LLVMConstInt(e->i1, 0, 0);
		LLVMValueRef abs = intrinsic(e, "llvm.fabs", &at, 1, &a, 1);
		return LLVMBuildFCmp(e->b, LLVMRealOEQ, abs, LLVMConstReal(at, (double)INFINITY), "");
	}
	default:
		break;
	}
	if (!is_float) {
		switch (x->op) {
		case MC_KU_FLOOR: case MC_KU_CEIL: case MC_KU_TRUNC: case MC_KU_RINT: case MC_KU_ROUND:
			return a;
		case MC_KU_SXTB16: case MC_KU_SXTB16_HI:
			return sxtb16(e, a, x->op == MC_KU_SXTB16_HI);
		case MC_KU_ABS:
			if (is_unsigned(t))
				return a;
			return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, a, LLVMConstNull(at), ""),
			                       LLVMBuildNeg(e->b, a, ""), a, "");
		default:
			fail(e, "math function on integers", NULL);
			return a;
		}
	}
	/* operations with an exact LLVM intrinsic; the rest are libm calls */
	static const char *const intrinsics[MC_KU__COUNT] = {
		[MC_KU_ABS] = "llvm.fabs", [MC_KU_SQRT] = "llvm.sqrt", [MC_KU_FLOOR] = "llvm.floor",
		[MC_KU_CEIL] = "llvm.ceil", [MC_KU_TRUNC] = "llvm.trunc", [MC_KU_RINT] = "llvm.rint",
		[MC_KU_ROUND] = "llvm.round",
	};
	static const char *const libm[MC_KU__COUNT] = {
		[MC_KU_EXP] = "exp", [MC_KU_LOG] = "log", [MC_KU_SIN] = "sin", [MC_KU_COS] = "cos",
		[MC_KU_TAN] = "tan", [MC_KU_ASIN] = "asin", [MC_KU_ACOS] = "acos", [MC_KU_ATAN] = "atan",
		[MC_KU_SINH] = "sinh", [MC_KU_COSH] = "cosh", [MC_KU_TANH] = "tanh", [MC_KU_ASINH] = "asinh",
		[MC_KU_ACOSH] = "acosh", [MC_KU_ATANH] = "atanh", [MC_KU_ERF] = "erf",
	};
	if ((unsigned)x->op < MC_KU__COUNT && intrinsics[x->op])
		return intrinsic(e, intrinsics[x->op], &at, 1, &a, 1);
	if ((unsigned)x->op < MC_KU__COUNT && libm[x->op] && x->lanes <= 1)
		return libcall(e, libm[x->op], t == MC_KT_F32, a, NULL);
	fail(e, "unary operation without an llvm lowering", NULL);
	return a;
}

static LLVMValueRef min_max(lemit *e, int op, bool is_float, bool uns, LLVMValueRef a, LLVMValueRef b)
{
	/* a < b ? a : b (a > b for max), NaN falling through to b, as the C target */
	LLVMValueRef c;
	if (is_float)
		c = LLVMBuildFCmp(e->b, op == MC_KB_MIN ? LLVMRealOLT : LLVMRealOGT, a, b, "");
	else
		c = LLVMBuildICmp(e->b, op == MC_KB_MIN ? (uns ? LLVMIntULT : LLVMIntSLT) : (uns ? LLVMIntUGT : LLVMIntSGT),
		                  a, b, "");
	return LLVMBuildSelect(e->b, c, a, b, "");
}

static LLVMValueRef compare(lemit *e, int op, mc_ktype t, LLVMValueRef a, LLVMValueRef b)
{
	if (mc_ktype_is_float(t)) {
		/* ordered like C's <, except != which is true for NaN */
		static const LLVMRealPredicate preds[] = { LLVMRealOLT, LLVMRealOLE, LLVMRealOGT,
		                                           LLVMRealOGE, LLVMRealOEQ, LLVMRealUNE };
		return LLVMBuildFCmp(e->b, preds[op - MC_KB_LT], a, b, "");
	}
	bool uns = is_unsigned(t);
	static const LLVMIntPredicate spreds[] = { LLVMIntSLT, LLVMIntSLE, LLVMIntSGT, LLVMIntSGE, LLVMIntEQ, LLVMIntNE };
	static const LLVMIntPredicate upreds[] = { LLVMIntULT, LLVMIntULE, LLVMIntUGT, LLVMIntUGE, LLVMIntEQ, LLVMIntNE };
	int i = op - MC_KB_LT;
	return LLVMBuildICmp(e->b, uns ? upreds[i] : spreds[i], a, b, "");
}

/* modelc_div/rem: x / 0 and x % 0 give 0, INT_MIN / -1 wraps */
static LLVMValueRef int_div_rem(lemit *e, bool div, bool uns, LLVMValueRef a, LLVMValueRef b)
{
	LLVMTypeRef t = LLVMTypeOf(a);
	LLVMValueRef zero = LLVMConstNull(t), one = const_of(a, 1);
	LLVMValueRef b_zero = LLVMBuildICmp(e->b, LLVMIntEQ, b, zero, "");
	if (uns) {
		LLVMValueRef safe = LLVMBuildSelect(e->b, b_zero, one, b, "");
		LLVMValueRef q = div ? LLVMBuildUDiv(e->b, a, safe, "") : LLVMBuildURem(e->b, a, safe, "");
		return LLVMBuildSelect(e->b, b_zero, zero, q, "");
	}
	LLVMValueRef b_m1 = LLVMBuildICmp(e->b, LLVMIntEQ, b, LLVMConstAllOnes(t), "");
	LLVMValueRef odd = LLVMBuildOr(e->b, b_zero, b_m1, "");
	LLVMValueRef safe = LLVMBuildSelect(e->b, odd, one, b, "");
	LLVMValueRef q = div ? LLVMBuildSDiv(e->b, a, safe, "") : LLVMBuildSRem(e->b, a, safe, "");
	LLVMValueRef at_m1 = div ? LLVMBuildNeg(e->b, a, "") : zero;
	return LLVMBuildSelect(e->b, b_zero, zero, LLVMBuildSelect(e->b, b_m1, at_m1, q, ""), "");
}

/* modelc_shl/shr: a shift by the width or more, or by a negative amount, gives 0 */
static LLVMValueRef int_shift(lemit *e, bool left, bool uns, LLVMValueRef a, LLVMValueRef b)
{
	LLVMTypeRef t = LLVMTypeOf(a);
	unsigned bits = LLVMGetIntTypeWidth(LLVMGetTypeKind(t) == LLVMVectorTypeKind ? LLVMGetElementType(t) : t);
	LLVMValueRef out = LLVMBuildICmp(e->b, LLVMIntUGE, b, const_of(a, bits), ""); /* negatives too */
	LLVMValueRef safe = LLVMBuildSelect(e->b, out, LLVMConstNull(t), b, "");
	LLVMValueRef s = left ? LLVMBuildShl(e->b, a, safe, "")
	                      : uns ? LLVMBuildLShr(e->b, a, safe, "") : LLVMBuildAShr(e->b, a, safe, "");
	return LLVMBuildSelect(e->b, out, LLVMConstNull(t), s, "");
}

static LLVMValueRef bin(lemit *e, const mc_kexpr *x)
{
	mc_ktype t = x->a->type;
	LLVMValueRef a = expr(e, x->a), b = expr(e, x->b);
	int op = x->op;
	if (op >= MC_KB_LT && op <= MC_KB_NE)
		return compare(e, op, t, a, b);
	if (mc_ktype_is_float(t)) {
		switch (op) {
		case MC_KB_ADD: return LLVMBuildFAdd(e->b, a, b, "");
		case MC_KB_SUB: return LLVMBuildFSub(e->b, a, b, "");
		case MC_KB_MUL: return LLVMBuildFMul(e->b, a, b, "");
		case MC_KB_DIV: return LLVMBuildFDiv(e->b, a, b, "");
		case MC_KB_REM: case MC_KB_FMOD: return LLVMBuildFRem(e->b, a, b, ""); /* C's fmod */
		case MC_KB_MIN: case MC_KB_MAX: return min_max(e, op, true, false, a, b);
		case MC_KB_POW: case MC_KB_ATAN2:
			if (x->lanes <= 1)
				return libcall(e, op == MC_KB_POW ? "pow" : "atan2", t == MC_KT_F32, a, b);
			break;
		default: break;
		}
		fail(e, "binary operation on floats without an llvm lowering", NULL);
		return a;
	}
	if (t == MC_KT_BOOL) {
		switch (op) {
		case MC_KB_AND: case MC_KB_MIN: return LLVMBuildAnd(e->b, a, b, "");
		case MC_KB_OR: case MC_KB_MAX: return LLVMBuildOr(e->b, a, b, "");
		case MC_KB_XOR: return LLVMBuildXor(e->b, a, b, "");
		default: fail(e, "arithmetic on bools", NULL); return a;
		}
	}
	bool uns = is_unsigned(t);
	if (t == MC_KT_INDEX) { /* never wraps: the index type holds every index */
		switch (op) {
		case MC_KB_ADD: return LLVMBuildNSWAdd(e->b, a, b, "");
		case MC_KB_SUB: return LLVMBuildNSWSub(e->b, a, b, "");
		case MC_KB_MUL: return LLVMBuildNSWMul(e->b, a, b, "");
		case MC_KB_DIV: return LLVMBuildSDiv(e->b, a, b, "");
		case MC_KB_REM: return LLVMBuildSRem(e->b, a, b, "");
		default: break;
		}
	}
	switch (op) {
	case MC_KB_ADD: return LLVMBuildAdd(e->b, a, b, ""); /* wraps, as ONNX's integers */
	case MC_KB_SUB: return LLVMBuildSub(e->b, a, b, "");
	case MC_KB_MUL: return LLVMBuildMul(e->b, a, b, "");
	case MC_KB_DIV: case MC_KB_REM: case MC_KB_FMOD: return int_div_rem(e, op == MC_KB_DIV, uns, a, b);
	case MC_KB_MIN: case MC_KB_MAX: return min_max(e, op, false, uns, a, b);
	case MC_KB_AND: return LLVMBuildAnd(e->b, a, b, "");
	case MC_KB_OR: return LLVMBuildOr(e->b, a, b, "");
	case MC_KB_XOR: return LLVMBuildXor(e->b, a, b, "");
	case MC_KB_SHL: case MC_KB_SHR: return int_shift(e, op == MC_KB_SHL, uns, a, b);
	default: break;
	}
	fail(e, "pow/atan2 on integers has no llvm lowering", NULL);
	return a;
}

static LLVMValueRef cast(lemit *e, const mc_kexpr *x)
{
	mc_ktype to = x->type, from = x->a->type;
	LLVMValueRef a = expr(e, x->a);
	if (to == from)
		return a;
	LLVMTypeRef tt = ktype(e, to);
	if (to == MC_KT_BOOL) {
		if (mc_ktype_is_float(from))
			return LLVMBuildFCmp(e->b, LLVMRealUNE, a, LLVMConstNull(LLVMTypeOf(a)), "");
		return LLVMBuildICmp(e->b, LLVMIntNE, a, LLVMConstNull(LLVMTypeOf(a)), "");
	}
	bool from_float = mc_ktype_is_float(from), to_float = mc_ktype_is_float(to);
	if (from_float && to_float)
		return to == MC_KT_F64 ? LLVMBuildFPExt(e->b, a, tt, "") : LLVMBuildFPTrunc(e->b, a, tt, "");
	if (from_float) { /* truncates; NaN gives 0, out of range saturates (modelc_f32_to_i32...) */
		LLVMTypeRef over[2] = { tt, LLVMTypeOf(a) };
		return intrinsic(e, is_unsigned(to) ? "llvm.fptoui.sat" : "llvm.fptosi.sat", over, 2, &a, 1);
	}
	bool src_uns = is_unsigned(from);
	if (to_float)
		return src_uns ? LLVMBuildUIToFP(e->b, a, tt, "") : LLVMBuildSIToFP(e->b, a, tt, "");
	unsigned wf = LLVMGetIntTypeWidth(LLVMTypeOf(a)), wt = LLVMGetIntTypeWidth(tt);
	if (wt < wf)
		return LLVMBuildTrunc(e->b, a, tt, "");
	if (wt > wf)
		return src_uns ? LLVMBuildZExt(e->b, a, tt, "") : LLVMBuildSExt(e->b, a, tt, "");
	return a;
}

static LLVMValueRef expr(lemit *e, const mc_kexpr *x)
{
	switch (x->kind) {
	case MC_KE_CONST:
		if (mc_ktype_is_float(x->type))
			return LLVMConstReal(ktype(e, x->type), x->f);
		if (x->type == MC_KT_BOOL)
			return LLVMConstInt(e->i1, x->i != 0, 0);
		return int_const(e, x->type, x->i);
	case MC_KE_VAR: {
		const mc_kvar *v = &e->k->vars[x->var];
		return LLVMBuildLoad2(e->b, ktype_lanes(e, v->type, v->lanes), e->var_slot[x->var], "");
	}
	case MC_KE_LOAD:
		return load(e, x);
	case MC_KE_UN:
		return un(e, x);
	case MC_KE_BIN:
		return bin(e, x);
	case MC_KE_SELECT: {
		LLVMValueRef c = expr(e, x->a), t = expr(e, x->b), f = expr(e, x->c);
		return LLVMBuildSelect(e->b, c, t, f, "");
	}
	case MC_KE_CAST:
		return cast(e, x);
	case MC_KE_FMA: {
		LLVMValueRef a = expr(e, x->a), b = expr(e, x->b), c = expr(e, x->c);
		if (x->lanes > 1) { /* the vector form is fused, as the C target's intrinsics */
			LLVMValueRef args[3] = { a, b, c };
			LLVMTypeRef t = LLVMTypeOf(a);
			return intrinsic(e, "llvm.fma", &t, 1, args, 3);
		}
		/* a * b + c, rounded twice like the C target and the reference */
		return LLVMBuildFAdd(e->b, LLVMBuildFMul(e->b, a, b, ""), c, "");
	}
	case MC_KE_SPLAT:
		return splat(e, expr(e, x->a), x->lanes);
	case MC_KE_LANE:
		return LLVMBuildExtractElement(e->b, expr(e, x->a), LLVMConstInt(e->i32, (unsigned long long)x->i, 0), "");
	case MC_KE_BITS:
		return LLVMBuildBitCast(e->b, expr(e, x->a), ktype_lanes(e, x->type, x->lanes), "");
	case MC_KE_DOT2:
		return dot2(e, expr(e, x->a), expr(e, x->b), expr(e, x->c));
	case MC_KE_DOT4:
		return dot4(e, expr(e, x->a), expr(e, x->b), expr(e, x->c), x->i != 0);
	case MC_KE_RQ32:
		return rq32(e, expr(e, x->a), expr(e, x->b), expr(e, x->c), (int)x->i);
	case MC_KE_DIM:    /* --dim LO..HI: the run's size */
		if (e->dim)
			return e->dim;
		break;
	case MC_KE_SPLITS: /* the cuda target's alone */
		break;
	}
	fail(e, "unknown expression kind", NULL);
	return LLVMGetPoison(e->f32);
}

/* ---- statements ---- */
static bool terminated(lemit *e)
{
	return LLVMGetBasicBlockTerminator(LLVMGetInsertBlock(e->b)) != NULL;
}

/* Code after a return or break is unreachable; it goes into a block of its own. */
static void continue_dead(lemit *e)
{
	LLVMPositionBuilderAtEnd(e->b, LLVMAppendBasicBlockInContext(e->ctx, e->fn, "dead"));
}

static void block(lemit *e, const mc_kstmt *s);

static LLVMValueRef as_bool(lemit *e, LLVMValueRef v)
{
	LLVMTypeRef t = LLVMTypeOf(v);
	if (t == e->i1)
		return v;
	if (t == e->f32 || t == e->f64)
		return LLVMBuildFCmp(e->b, LLVMRealUNE, v, LLVMConstNull(t), "");
	return LLVMBuildICmp(e->b, LLVMIntNE, v, LLVMConstNull(t), "");
}

static void for_loop(lemit *e, const mc_kstmt *s)
{
	const mc_kvar *v = &e->k->vars[s->var];
	LLVMTypeRef vt = ktype(e, v->type);
	LLVMValueRef slot = e->var_slot[s->var];
	LLVMBuildStore(e->b, expr(e, s->a), slot);
	LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "for");
	LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "body");
	LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "next");
	LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "done");
	LLVMBuildBr(e->b, head);
	LLVMPositionBuilderAtEnd(e->b, head);
	LLVMValueRef i = LLVMBuildLoad2(e->b, vt, slot, "");
	bool uns = is_unsigned(v->type);
	LLVMValueRef more = LLVMBuildICmp(e->b, uns ? LLVMIntULT : LLVMIntSLT, i, expr(e, s->b), "");
	LLVMBuildCondBr(e->b, more, body, exit);
	LLVMPositionBuilderAtEnd(e->b, body);
	if (e->loops >= MC_KB_MAX_DEPTH) {
		fail(e, "loops nested too deep", NULL);
		return;
	}
	e->loop_exit[e->loops++] = exit;
	block(e, s->body);
	e->loops--;
	if (!terminated(e))
		LLVMBuildBr(e->b, next);
	LLVMPositionBuilderAtEnd(e->b, next);
	LLVMValueRef cur = LLVMBuildLoad2(e->b, vt, slot, "");
	LLVMValueRef one = LLVMConstInt(vt, 1, 0);
	LLVMBuildStore(e->b, uns ? LLVMBuildNUWAdd(e->b, cur, one, "") : LLVMBuildNSWAdd(e->b, cur, one, ""), slot);
	LLVMBuildBr(e->b, head);
	LLVMPositionBuilderAtEnd(e->b, exit);
}

static void if_stmt(lemit *e, const mc_kstmt *s)
{
	LLVMValueRef c = as_bool(e, expr(e, s->a));
	LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "then");
	LLVMBasicBlockRef orelse = s->orelse ? LLVMAppendBasicBlockInContext(e->ctx, e->fn, "else") : NULL;
	LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "endif");
	LLVMBuildCondBr(e->b, c, then, orelse ? orelse : join);
	LLVMPositionBuilderAtEnd(e->b, then);
	block(e, s->body);
	if (!terminated(e))
		LLVMBuildBr(e->b, join);
	if (orelse) {
		LLVMPositionBuilderAtEnd(e->b, orelse);
		block(e, s->orelse);
		if (!terminated(e))
			LLVMBuildBr(e->b, join);
	}
	LLVMPositionBuilderAtEnd(e->b, join);
}

static void store(lemit *e, const mc_kstmt *s)
{
	const mc_kbuf *kb = &e->k->bufs[s->buf];
	LLVMValueRef v = expr(e, s->b);
	if (s->b->lanes > 1) {
		/* f32 into float32; i32 into int32, or truncated (wrapping) into 8-bit elements */
		bool is_int = s->b->type == MC_KT_I32;
		LLVMTypeRef elt = kb->dtype == MC_FLOAT && !is_int ? e->f32
		                : !is_int ? NULL
		                : kb->dtype == MC_INT32 ? e->i32
		                : kb->dtype == MC_INT8 || kb->dtype == MC_UINT8 ? e->i8 : NULL;
		if (!elt) {
			fail(e, "vector store into a buffer of dtype %s", mc_dtype_name(kb->dtype));
			return;
		}
		if (elt == e->i8)
			v = LLVMBuildTrunc(e->b, v, LLVMVectorType(e->i8, (unsigned)s->b->lanes), "");
		LLVMValueRef st = LLVMBuildStore(e->b, v, elem_ptr(e, s->buf, elt, s->a));
		LLVMSetAlignment(st, elt == e->i8 ? 1 : 4);
		return;
	}
	LLVMTypeRef t = storage(e, kb->dtype);
	if (!t) {
		fail(e, "buffer of dtype %s, which has no storage", mc_dtype_name(kb->dtype));
		return;
	}
	LLVMBuildStore(e->b, narrow(e, kb->dtype, v), elem_ptr(e, s->buf, t, s->a));
}

static void stmt(lemit *e, const mc_kstmt *s)
{
	switch (s->kind) {
	case MC_KS_FOR:
		for_loop(e, s);
		return;
	case MC_KS_DECL: case MC_KS_ASSIGN:
		LLVMBuildStore(e->b, expr(e, s->a), e->var_slot[s->var]);
		return;
	case MC_KS_STORE:
		store(e, s);
		return;
	case MC_KS_IF:
		if_stmt(e, s);
		return;
	case MC_KS_BREAK:
		if (e->loops == 0) {
			fail(e, "break outside a loop", NULL);
			return;
		}
		LLVMBuildBr(e->b, e->loop_exit[e->loops - 1]);
		continue_dead(e);
		return;
	case MC_KS_FAIL:
		LLVMBuildRet(e->b, LLVMConstInt(e->i32, (unsigned long long)s->code, 0));
		continue_dead(e);
		return;
	case MC_KS_TEMPLATE:
		fail(e, "a target template outside its target", NULL);
		return;
	}
	fail(e, "unknown statement kind", NULL);
}

static void block(lemit *e, const mc_kstmt *s)
{
	for (; s && !e->err; s = s->next)
		stmt(e, s);
}

/* ---- kernels: int k(ptr b0, ptr b1, ...), one pointer per buffer it touches ---- */
static LLVMValueRef build_kernel(lemit *e, const mc_kernel *k, int **used_out, int *n_used_out)
{
	e->k = k;
	mc_ce_begin_kernel(&e->ce, k);
	int *used = mc_xcalloc((size_t)k->n_bufs + 1, sizeof *used), n_used = 0;
	for (int i = 0; i < k->n_bufs; i++)
		if (e->ce.buf_uses[i])
			used[n_used++] = i;
	LLVMTypeRef *params = mc_xcalloc((size_t)n_used + 2, sizeof *params);
	for (int i = 0; i < n_used; i++)
		params[i] = e->ptr;
	bool dyn = e->p->dyn != NULL; /* --dim LO..HI: the size after the buffers */
	if (dyn)
		params[n_used] = e->idx;
	mc_strbuf name = { 0 };
	e->ce.sb = &name;
	mc_ce_kernel_name(&e->ce, k); /* the C target's name for it */
	e->ce.sb = NULL;
	LLVMValueRef fn = LLVMAddFunction(e->mod, name.data,
	                                  LLVMFunctionType(e->i32, params, (unsigned)n_used + dyn, 0));
	e->dim = dyn ? LLVMGetParam(fn, (unsigned)n_used) : NULL;
	mc_sb_free(&name);
	free(params);
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	if (e->p->code_section[0])
		LLVMSetSection(fn, e->p->code_section);
	LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, enum_attr(e, "nounwind"));
	e->fn = fn;
	e->buf_ptr = mc_xcalloc((size_t)k->n_bufs + 1, sizeof *e->buf_ptr);
	for (int i = 0; i < n_used; i++) {
		e->buf_ptr[used[i]] = LLVMGetParam(fn, (unsigned)i);
		/* restrict where true (mc_ce_is_restrict): no other buffer of the
		 * kernel shares its storage */
		if (mc_ce_is_restrict(&e->ce, used[i]))
			LLVMAddAttributeAtIndex(fn, (unsigned)i + 1, enum_attr(e, "noalias"));
	}
	LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(e->ctx, fn, "entry");
	LLVMPositionBuilderAtEnd(e->b, entry);
	e->var_slot = mc_xcalloc((size_t)k->n_vars + 1, sizeof *e->var_slot);
	for (int i = 0; i < k->n_vars; i++) {
		LLVMTypeRef t = ktype_lanes(e, k->vars[i].type, k->vars[i].lanes);
		if (!t) {
			fail(e, "variable of type %s", mc_ktype_name(k->vars[i].type));
			break;
		}
		e->var_slot[i] = LLVMBuildAlloca(e->b, t, "");
	}
	e->loops = 0;
	block(e, k->body);
	if (!e->err && !terminated(e))
		LLVMBuildRet(e->b, LLVMConstInt(e->i32, 0, 0));
	free(e->var_slot);
	free(e->buf_ptr);
	e->var_slot = e->buf_ptr = NULL;
	e->dim = NULL;
	mc_ce_end_kernel(&e->ce);
	e->k = NULL;
	*used_out = used;
	*n_used_out = n_used;
	return fn;
}

/* ---- weights and tables ---- */
static LLVMValueRef const_bytes(lemit *e, const void *data, size_t n)
{
	return LLVMConstStringInContext(e->ctx, (const char *)data, (unsigned)n, 1);
}

static LLVMValueRef private_global(lemit *e, LLVMValueRef init, const char *name, unsigned align)
{
	LLVMValueRef g = LLVMAddGlobal(e->mod, LLVMTypeOf(init), name);
	LLVMSetInitializer(g, init);
	LLVMSetGlobalConstant(g, 1);
	LLVMSetLinkage(g, LLVMPrivateLinkage);
	LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
	if (align)
		LLVMSetAlignment(g, align);
	return g;
}

/* The weights as the C target stores them, in the target's byte order. */
static int build_weights(lemit *e)
{
	const mc_program *p = e->p;
	e->weights = mc_xcalloc((size_t)p->n_weights + 1, sizeof *e->weights);
	bool big = LLVMByteOrder(e->td) == LLVMBigEndian;
	for (int i = 0; i < p->n_weights; i++) {
		const mc_tensor *t = p->weights[i].t;
		if (!mc_ce_storage_type(t->dtype)) {
			mc_error("LLVM target: constant %d has dtype %s, which has no storage", i, mc_dtype_name(t->dtype));
			return -1;
		}
		if (t->numel == 0)
			continue;
		size_t esize = mc_dtype_size(t->dtype), n = t->numel * esize;
		if (n > UINT32_MAX) {
			mc_error("LLVM target: constant %d is %zu bytes, over LLVM's 4 GiB constant limit", i, n);
			return -1;
		}
		unsigned char *bytes = malloc(n);
		if (!bytes) {
			mc_error("LLVM target: out of memory for constant %d (%zu bytes)", i, n);
			return -1;
		}
		memcpy(bytes, t->data, n);
		if (t->dtype == MC_BOOL)
			for (size_t j = 0; j < n; j++)
				bytes[j] = bytes[j] != 0;
		if (big && esize > 1)
			for (size_t j = 0; j < n; j += esize)
				for (size_t a = 0, b = esize - 1; a < b; a++, b--) {
					unsigned char c = bytes[j + a];
					bytes[j + a] = bytes[j + b];
					bytes[j + b] = c;
				}
		size_t align = mc_ce_weight_align(&p->weights[i]);
		char name[300];
		snprintf(name, sizeof name, "%s_w%d", e->ce.name, i);
		e->weights[i] = private_global(e, const_bytes(e, bytes, n), name, (unsigned)align);
		/* a local symbol, not a private label: a firmware's map and nm show
		 * where each weight array went (flash) */
		LLVMSetLinkage(e->weights[i], LLVMInternalLinkage);
		if (p->weights_section[0])
			LLVMSetSection(e->weights[i], p->weights_section);
		free(bytes);
	}
	return 0;
}

static LLVMValueRef c_string(lemit *e, const char *s, const char *name)
{
	return private_global(e, LLVMConstStringInContext(e->ctx, s, (unsigned)strlen(s), 0), name, 1);
}

/* NAME_inputs / NAME_outputs: modelc_tensor_desc { name, dtype, rank, dims } */
static void build_desc_table(lemit *e, const char *kind, const char *table, const mc_io_desc *d, int n)
{
	if (n == 0)
		return;
	LLVMTypeRef fields[4] = { e->ptr, e->i32, e->i32, e->ptr };
	LLVMTypeRef desc = LLVMStructTypeInContext(e->ctx, fields, 4, 0);
	LLVMValueRef *rows = mc_xcalloc((size_t)n, sizeof *rows);
	char name[400];
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof name, "%s_%s%d_name", e->ce.name, kind, i);
		LLVMValueRef nm = c_string(e, d[i].name ? d[i].name : "", name);
		LLVMValueRef dims = LLVMConstPointerNull(e->ptr);
		if (d[i].shape.rank > 0) {
			LLVMValueRef v[MC_MAX_RANK];
			for (int j = 0; j < d[i].shape.rank; j++)
				v[j] = LLVMConstInt(e->i64, (unsigned long long)d[i].shape.dims[j], 1);
			snprintf(name, sizeof name, "%s_%s%d_dims", e->ce.name, kind, i);
			dims = private_global(e, LLVMConstArray(e->i64, v, (unsigned)d[i].shape.rank), name, 8);
		}
		/* MODELC_* are ONNX's numbers, as mc_dtype; 0 where the header has none */
		int dtype = mc_ce_dtype_const(d[i].dtype) ? (int)d[i].dtype : 0;
		LLVMValueRef vals[4] = { nm, LLVMConstInt(e->i32, (unsigned long long)dtype, 0),
		                         LLVMConstInt(e->i32, (unsigned long long)d[i].shape.rank, 0), dims };
		rows[i] = LLVMConstNamedStruct(desc, vals, 4);
	}
	snprintf(name, sizeof name, "%s_%s", e->ce.name, table);
	LLVMValueRef g = LLVMAddGlobal(e->mod, LLVMArrayType(desc, (unsigned)n), name);
	LLVMSetInitializer(g, LLVMConstArray(desc, rows, (unsigned)n));
	LLVMSetGlobalConstant(g, 1);
	free(rows);
}

/* ---- NAME_run ---- */
typedef struct {
	LLVMValueRef fn;
	int *used;
	int n_used;
} kernel_fn;

static LLVMValueRef io_ptr(lemit *e, LLVMValueRef table, int index)
{
	LLVMValueRef i = LLVMConstInt(e->i32, (unsigned long long)index, 0);
	return LLVMBuildLoad2(e->b, e->ptr, LLVMBuildInBoundsGEP2(e->b, e->ptr, table, &i, 1, ""), "");
}

/* base: the arena's pools' first bytes (one: the arena's) */
static LLVMValueRef loc_ptr(lemit *e, const mc_loc *l, const LLVMValueRef *base, LLVMValueRef in,
                            LLVMValueRef out)
{
	switch (l->kind) {
	case MC_LOC_ARENA: {
		LLVMValueRef off = LLVMConstInt(e->i64, l->offset, 0);
		int k = e->p->n_pools > 1 ? l->index : 0;
		return LLVMBuildInBoundsGEP2(e->b, e->i8, base[k], &off, 1, "");
	}
	case MC_LOC_WEIGHT:
		if (l->index < 0 || l->index >= e->p->n_weights)
			break;
		return e->weights[l->index] ? e->weights[l->index] : LLVMConstPointerNull(e->ptr);
	case MC_LOC_INPUT:
		return io_ptr(e, in, l->index);
	case MC_LOC_OUTPUT:
		return io_ptr(e, out, l->index);
	default:
		break;
	}
	fail(e, "buffer without a location (memory plan missing)", NULL);
	return LLVMConstPointerNull(e->ptr);
}

static void ret_if(lemit *e, LLVMValueRef cond, LLVMValueRef status)
{
	LLVMBasicBlockRef bad = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "fail");
	LLVMBasicBlockRef ok = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "ok");
	LLVMBuildCondBr(e->b, cond, bad, ok);
	LLVMPositionBuilderAtEnd(e->b, bad);
	LLVMBuildRet(e->b, status);
	LLVMPositionBuilderAtEnd(e->b, ok);
}

/* Kernel i of the program on its buffers' places (and, with --dim, the
 * run's size e->dim); a status other than 0 returns it. */
static void call_kernel(lemit *e, int i, const kernel_fn *kf, const LLVMValueRef *base, LLVMValueRef in,
                        LLVMValueRef out)
{
	const kernel_fn *k = &kf[i];
	const mc_kernel *kern = e->p->kernels[i];
	LLVMValueRef *args = mc_xcalloc((size_t)k->n_used + 2, sizeof *args);
	for (int j = 0; j < k->n_used; j++)
		args[j] = loc_ptr(e, &kern->bufs[k->used[j]].loc, base, in, out);
	if (e->p->dyn)
		args[k->n_used] = e->dim;
	LLVMValueRef st = LLVMBuildCall2(e->b, LLVMGlobalGetValueType(k->fn), k->fn, args,
	                                 (unsigned)k->n_used + (e->p->dyn != NULL), "");
	free(args);
	ret_if(e, LLVMBuildICmp(e->b, LLVMIntNE, st, LLVMConstInt(e->i32, 0, 0), ""), st);
}

/* --dim NAME=LO..HI: kernel i of the program built at HI through the
 * version the run's size takes (a table by size, as the C target's). */
static void dyn_call(lemit *e, int i, const kernel_fn *kf, const LLVMValueRef *base, LLVMValueRef in,
                     LLVMValueRef out)
{
	const mc_dynamic *dyn = e->p->dyn;
	const mc_dyn_kernel *of = &dyn->of[i];
	if (of->n_versions < 2) {
		call_kernel(e, of->first, kf, base, in, out);
		return;
	}
	int64_t n = dyn->hi - dyn->lo + 1;
	char name[64];
	snprintf(name, sizeof name, "version_%d", i);
	LLVMValueRef table = private_global(e, const_bytes(e, of->version_of, (size_t)n), name, 1);
	LLVMValueRef at = LLVMBuildSub(e->b, LLVMBuildSExt(e->b, e->dim, e->i64, ""),
	                               LLVMConstInt(e->i64, (unsigned long long)dyn->lo, 1), "");
	LLVMValueRef v = LLVMBuildLoad2(e->b, e->i8, LLVMBuildInBoundsGEP2(e->b, e->i8, table, &at, 1, ""), "");
	LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "called");
	LLVMBasicBlockRef last = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "version");
	LLVMValueRef sw = LLVMBuildSwitch(e->b, v, last, (unsigned)of->n_versions - 1);
	for (int k = 0; k < of->n_versions; k++) {
		LLVMBasicBlockRef bb = k + 1 < of->n_versions ? LLVMAppendBasicBlockInContext(e->ctx, e->fn, "version") : last;
		if (k + 1 < of->n_versions)
			LLVMAddCase(sw, LLVMConstInt(e->i8, (unsigned long long)k, 0), bb);
		LLVMPositionBuilderAtEnd(e->b, bb);
		call_kernel(e, of->first + k, kf, base, in, out);
		LLVMBuildBr(e->b, join);
	}
	LLVMPositionBuilderAtEnd(e->b, join);
}

static void run_steps(lemit *e, const mc_step *steps, int n, const kernel_fn *kf, const LLVMValueRef *base,
                      LLVMValueRef in, LLVMValueRef out)
{
	for (int i = 0; i < n && !e->err; i++) {
		const mc_step *s = &steps[i];
		if (s->kind == MC_STEP_IF) {
			if (s->cond.kind == MC_LOC_WEIGHT && !mc_ce_is_cond_weight(&e->ce, s->cond.index)) {
				fail(e, "If step: condition without a valid location", NULL);
				return;
			}
			LLVMValueRef c = LLVMBuildLoad2(e->b, e->i8, loc_ptr(e, &s->cond, base, in, out), "");
			c = LLVMBuildICmp(e->b, LLVMIntNE, c, LLVMConstInt(e->i8, 0, 0), "");
			LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "then");
			LLVMBasicBlockRef orelse = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "else");
			LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "endif");
			LLVMBuildCondBr(e->b, c, then, orelse);
			LLVMPositionBuilderAtEnd(e->b, then);
			run_steps(e, s->then_steps, s->n_then, kf, base, in, out);
			LLVMBuildBr(e->b, join);
			LLVMPositionBuilderAtEnd(e->b, orelse);
			run_steps(e, s->else_steps, s->n_else, kf, base, in, out);
			LLVMBuildBr(e->b, join);
			LLVMPositionBuilderAtEnd(e->b, join);
			continue;
		}
		if (s->kind != MC_STEP_KERNEL || s->kernel < 0 || s->kernel >= e->p->n_kernels) {
			fail(e, "step names no kernel", NULL);
			return;
		}
		if (e->p->dyn) {
			dyn_call(e, s->kernel, kf, base, in, out);
			continue;
		}
		call_kernel(e, s->kernel, kf, base, in, out);
	}
}

static void ret_if_misaligned(lemit *e, LLVMValueRef ptr, size_t align)
{
	LLVMTypeRef intptr = LLVMIntPtrTypeInContext(e->ctx, e->td);
	LLVMValueRef addr = LLVMBuildPtrToInt(e->b, ptr, intptr, "");
	LLVMValueRef mis = LLVMBuildAnd(e->b, addr, LLVMConstInt(intptr, align - 1, 0), "");
	ret_if(e, LLVMBuildICmp(e->b, LLVMIntNE, mis, LLVMConstNull(intptr), ""),
	       LLVMConstInt(e->i32, MC_STATUS_MISALIGNED, 0));
}

/* --io-in-arena: each input copied into its place, or each output out of
 * its place, where the caller's table is not NULL and its pointer neither
 * NULL nor the place (the C target's copies) */
static void io_copies(lemit *e, const LLVMValueRef *base, LLVMValueRef table, bool outputs)
{
	const mc_program *p = e->p;
	int n = outputs ? p->n_outputs : p->n_inputs;
	if (n == 0)
		return;
	LLVMBasicBlockRef some = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "io");
	LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "io_done");
	LLVMBuildCondBr(e->b, LLVMBuildIsNull(e->b, table, ""), done, some);
	LLVMPositionBuilderAtEnd(e->b, some);
	for (int i = 0; i < n; i++) {
		const mc_io_desc *d = outputs ? &p->outputs[i] : &p->inputs[i];
		LLVMValueRef at = loc_ptr(e, outputs ? &p->output_at[i] : &p->input_at[i], base, NULL, NULL);
		LLVMValueRef ptr = io_ptr(e, table, i);
		LLVMValueRef skip = LLVMBuildOr(e->b, LLVMBuildIsNull(e->b, ptr, ""),
		                                LLVMBuildICmp(e->b, LLVMIntEQ, ptr, at, ""), "");
		LLVMBasicBlockRef copy = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "copy");
		LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "copied");
		LLVMBuildCondBr(e->b, skip, next, copy);
		LLVMPositionBuilderAtEnd(e->b, copy);
		LLVMValueRef bytes = LLVMConstInt(e->i64, mc_ce_io_bytes(d), 0);
		LLVMBuildMemCpy(e->b, outputs ? ptr : at, 1, outputs ? at : ptr, 1, bytes);
		LLVMBuildBr(e->b, next);
		LLVMPositionBuilderAtEnd(e->b, next);
	}
	LLVMBuildBr(e->b, done);
	LLVMPositionBuilderAtEnd(e->b, done);
}

static LLVMValueRef run_function(lemit *e, const char *suffix)
{
	char name[300];
	snprintf(name, sizeof name, "%s_%s", e->ce.name, suffix);
	/* NAME_run_counted: the counts array after the outputs */
	LLVMTypeRef params[4] = { e->ptr, e->ptr, e->ptr, e->ptr };
	unsigned n_params = strcmp(suffix, "run_counted") == 0 || strcmp(suffix, "run_dims") == 0 ? 4 : 3;
	LLVMValueRef fn = LLVMAddFunction(e->mod, name, LLVMFunctionType(e->i32, params, n_params, 0));
	LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, enum_attr(e, "nounwind"));
	if (e->p->code_section[0])
		LLVMSetSection(fn, e->p->code_section);
	e->fn = fn;
	LLVMPositionBuilderAtEnd(e->b, LLVMAppendBasicBlockInContext(e->ctx, fn, "entry"));
	return fn;
}

/* With pools, int NAME_run(void *arena, ...): each pool's place in the one
 * arena, then NAME_run_pools. */
static void build_run_one_arena(lemit *e, LLVMValueRef run_pools)
{
	const mc_program *p = e->p;
	LLVMValueRef fn = run_function(e, "run");
	LLVMValueRef arena = LLVMGetParam(fn, 0);
	ret_if(e, LLVMBuildIsNull(e->b, arena, ""), LLVMConstInt(e->i32, MC_STATUS_NULL_ARGUMENT, 0));
	ret_if_misaligned(e, arena, mc_ce_arena_align(p));
	LLVMTypeRef table_t = LLVMArrayType(e->ptr, (unsigned)p->n_pools);
	LLVMValueRef table = LLVMBuildAlloca(e->b, table_t, "pools");
	for (int k = 0; k < p->n_pools; k++) {
		LLVMValueRef off = LLVMConstInt(e->i64, p->pool_at[k], 0);
		LLVMValueRef idx[2] = { LLVMConstInt(e->i32, 0, 0), LLVMConstInt(e->i32, (unsigned)k, 0) };
		LLVMBuildStore(e->b, LLVMBuildInBoundsGEP2(e->b, e->i8, arena, &off, 1, ""),
		               LLVMBuildInBoundsGEP2(e->b, table_t, table, idx, 2, ""));
	}
	LLVMValueRef args[3] = { table, LLVMGetParam(fn, 1), LLVMGetParam(fn, 2) };
	LLVMBuildRet(e->b, LLVMBuildCall2(e->b, LLVMGlobalGetValueType(run_pools), run_pools, args, 3, ""));
}

static LLVMValueRef dims_size(lemit *e, LLVMValueRef dims);

/* int NAME_run(void *arena, const void *const inputs[], void *const outputs[])
 * (with pools: NAME_run_pools(void *const pools[], ...)): the C target's
 * checks, then the steps */
static void build_run(lemit *e, const kernel_fn *kf)
{
	const mc_program *p = e->p;
	bool pools = p->n_pools > 1, counted = mc_program_counted(p);
	LLVMValueRef fn = run_function(e, pools ? "run_pools" : mc_program_run_name(p));
	LLVMValueRef first = LLVMGetParam(fn, 0), in = LLVMGetParam(fn, 1), out = LLVMGetParam(fn, 2);
	LLVMValueRef null_arg = LLVMConstInt(e->i32, MC_STATUS_NULL_ARGUMENT, 0);
	if (counted)
		ret_if(e, LLVMBuildIsNull(e->b, LLVMGetParam(fn, 3), ""), null_arg);
	if (p->dyn) /* the size first: out of bounds (or no dims), nothing is touched */
		e->dim = dims_size(e, LLVMGetParam(fn, 3));
	LLVMValueRef base[MC_MAX_POOLS] = { first };
	if (pools) {
		ret_if(e, LLVMBuildIsNull(e->b, first, ""), null_arg);
		for (int k = 0; k < p->n_pools; k++) {
			base[k] = io_ptr(e, first, k);
			if (p->pool_bytes[k] > 0)
				ret_if(e, LLVMBuildIsNull(e->b, base[k], ""), null_arg);
		}
	} else if (p->arena_bytes > 0) {
		ret_if(e, LLVMBuildIsNull(e->b, first, ""), null_arg);
	}
	struct { LLVMValueRef table; int n; } io[2] = { { in, p->n_inputs }, { out, p->n_outputs } };
	for (int t = 0; t < 2 && !p->io_in_arena; t++) {
		if (io[t].n == 0)
			continue;
		ret_if(e, LLVMBuildIsNull(e->b, io[t].table, ""), null_arg);
		for (int i = 0; i < io[t].n; i++)
			ret_if(e, LLVMBuildIsNull(e->b, io_ptr(e, io[t].table, i), ""), null_arg);
	}
	for (int k = 0; k < (pools ? p->n_pools : 1); k++)
		if (!pools || p->pool_bytes[k] > 0)
			ret_if_misaligned(e, base[k], mc_ce_arena_align(p));
	const mc_io_desc *descs[2] = { p->inputs, p->outputs };
	for (int t = 0; t < 2 && !p->io_in_arena; t++)
		for (int i = 0; i < io[t].n; i++) {
			size_t a = mc_ce_io_align(&descs[t][i]);
			if (a > 1)
				ret_if_misaligned(e, io_ptr(e, io[t].table, i), a);
		}
	if (p->io_in_arena)
		io_copies(e, base, in, false);
	run_steps(e, p->steps, p->n_steps, kf, base, in, out);
	if (p->io_in_arena)
		io_copies(e, base, out, true);
	for (int i = 0; i < p->n_outputs && counted; i++) {
		/* each counted output's count, where its count op left it; -1 */
		const mc_io_desc *d = &p->outputs[i];
		LLVMValueRef v = d->counted ? LLVMBuildLoad2(e->b, e->i64, loc_ptr(e, &d->count_at, base, in, out), "")
		                            : LLVMConstInt(e->i64, (unsigned long long)-1, 1);
		LLVMValueRef at = LLVMConstInt(e->i32, (unsigned long long)i, 0);
		LLVMBuildStore(e->b, v, LLVMBuildInBoundsGEP2(e->b, e->i64, LLVMGetParam(fn, 3), &at, 1, ""));
	}
	LLVMBuildRet(e->b, LLVMConstInt(e->i32, 0, 0));
	e->dim = NULL;
	if (pools)
		build_run_one_arena(e, fn);
}

/* --dim: dims[0] checked (NULL or outside [LO, HI] returns
 * MODELC_ERR_BAD_DIM from the function being built), as an i64. */
static LLVMValueRef dims_checked(lemit *e, LLVMValueRef dims)
{
	const mc_dynamic *dyn = e->p->dyn;
	LLVMValueRef bad = LLVMConstInt(e->i32, MC_STATUS_BAD_DIM, 0);
	ret_if(e, LLVMBuildIsNull(e->b, dims, ""), bad);
	LLVMValueRef d = LLVMBuildLoad2(e->b, e->i64, dims, "d");
	LLVMValueRef out = LLVMBuildOr(e->b,
	                               LLVMBuildICmp(e->b, LLVMIntSLT, d, LLVMConstInt(e->i64, (unsigned long long)dyn->lo, 1), ""),
	                               LLVMBuildICmp(e->b, LLVMIntSGT, d, LLVMConstInt(e->i64, (unsigned long long)dyn->hi, 1), ""), "");
	ret_if(e, out, bad);
	return d;
}

/* The run's size in the index type, for the kernels. */
static LLVMValueRef dims_size(lemit *e, LLVMValueRef dims)
{
	return LLVMBuildTrunc(e->b, dims_checked(e, dims), e->idx, "dim");
}

/* --dim: int NAME_input_shape(int i, const int64_t dims[], int64_t shape[])
 * and NAME_output_shape, each dim a polynomial of the size (the C
 * target's put_dyn_tables). */
static void build_shape_fn(lemit *e, bool outputs)
{
	const mc_program *p = e->p;
	const mc_dynamic *dyn = p->dyn;
	const mc_io_desc *io = outputs ? p->outputs : p->inputs;
	const mc_dyn_poly *polys = outputs ? dyn->out_dims : dyn->in_dims;
	int count = outputs ? p->n_outputs : p->n_inputs;
	char name[300];
	snprintf(name, sizeof name, "%s_%s_shape", e->ce.name, outputs ? "output" : "input");
	LLVMTypeRef params[3] = { e->i32, e->ptr, e->ptr };
	LLVMValueRef fn = LLVMAddFunction(e->mod, name, LLVMFunctionType(e->i32, params, 3, 0));
	LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, enum_attr(e, "nounwind"));
	if (p->code_section[0])
		LLVMSetSection(fn, p->code_section);
	e->fn = fn;
	LLVMPositionBuilderAtEnd(e->b, LLVMAppendBasicBlockInContext(e->ctx, fn, "entry"));
	LLVMValueRef i = LLVMGetParam(fn, 0), dims = LLVMGetParam(fn, 1), shape = LLVMGetParam(fn, 2);
	LLVMValueRef null_arg = LLVMConstInt(e->i32, MC_STATUS_NULL_ARGUMENT, 0);
	ret_if(e, LLVMBuildIsNull(e->b, dims, ""), null_arg);
	ret_if(e, LLVMBuildIsNull(e->b, shape, ""), null_arg);
	LLVMValueRef d = dims_checked(e, dims);
	LLVMBasicBlockRef bad = LLVMAppendBasicBlockInContext(e->ctx, fn, "no_such");
	LLVMValueRef sw = LLVMBuildSwitch(e->b, i, bad, (unsigned)count);
	for (int t = 0; t < count; t++) {
		LLVMBasicBlockRef bb = LLVMAppendBasicBlockInContext(e->ctx, fn, "tensor");
		LLVMAddCase(sw, LLVMConstInt(e->i32, (unsigned long long)t, 0), bb);
		LLVMPositionBuilderAtEnd(e->b, bb);
		for (int j = 0; j < io[t].shape.rank; j++) {
			const mc_dyn_poly *q = &polys[t * MC_MAX_RANK + j];
			/* (c2 d + c1) d + c0, then / den: exact where it serves d */
			LLVMValueRef v = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, LLVMConstInt(e->i64, (unsigned long long)q->c[2], 1), d, ""),
			                              LLVMConstInt(e->i64, (unsigned long long)q->c[1], 1), "");
			v = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, v, d, ""), LLVMConstInt(e->i64, (unsigned long long)q->c[0], 1), "");
			v = LLVMBuildSDiv(e->b, v, LLVMConstInt(e->i64, (unsigned long long)q->den, 1), "");
			LLVMValueRef at = LLVMConstInt(e->i32, (unsigned long long)j, 0);
			LLVMBuildStore(e->b, v, LLVMBuildInBoundsGEP2(e->b, e->i64, shape, &at, 1, ""));
		}
		LLVMBuildRet(e->b, LLVMConstInt(e->i32, 0, 0));
	}
	LLVMPositionBuilderAtEnd(e->b, bad);
	LLVMBuildRet(e->b, LLVMConstInt(e->i32, MC_STATUS_BAD_INDEX, 0));
}

/* ---- the target machine ---- */
static char *host_string(char *(*get)(void))
{
	char *s = get(), *copy = mc_xstrdup(s ? s : "");
	LLVMDisposeMessage(s);
	return copy;
}

static LLVMTargetMachineRef target_machine(const mc_compile_opts *o, char **triple_out)
{
	char *triple = o->triple ? mc_xstrdup(o->triple) : host_string(LLVMGetDefaultTargetTriple);
	char *norm = LLVMNormalizeTargetTriple(triple);
	free(triple);
	triple = mc_xstrdup(norm);
	LLVMDisposeMessage(norm);
	LLVMTargetRef target;
	char *err = NULL;
	if (LLVMGetTargetFromTriple(triple, &target, &err)) {
		mc_error("LLVM target: --triple '%s': %s", triple, err ? err : "unknown");
		LLVMDisposeMessage(err);
		free(triple);
		return NULL;
	}
	bool native = o->cpu && !strcmp(o->cpu, "native");
	char *cpu = native ? host_string(LLVMGetHostCPUName) : mc_xstrdup(o->cpu ? o->cpu : "generic");
	char *features = native && !o->features ? host_string(LLVMGetHostCPUFeatures)
	                                        : mc_xstrdup(o->features ? o->features : "");
	/* bare metal links at fixed addresses; hosted code goes into PIE programs */
	LLVMRelocMode reloc = strstr(triple, "-none") ? LLVMRelocStatic : LLVMRelocPIC;
	LLVMCodeGenOptLevel level = o->opt && strcmp(o->opt, "O3") ? LLVMCodeGenLevelDefault
	                                                            : LLVMCodeGenLevelAggressive;
	LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, cpu, features, level,
	                                                  reloc, LLVMCodeModelDefault);
	free(cpu);
	free(features);
	if (!tm) {
		mc_error("LLVM target: no target machine for '%s'", triple);
		free(triple);
		return NULL;
	}
	*triple_out = triple;
	return tm;
}

static int write_bytes(const char *dir, const char *name, const char *suffix, const void *data, size_t n)
{
	size_t len = strlen(dir) + strlen(name) + strlen(suffix) + 8;
	char *path = mc_xmalloc(len);
	snprintf(path, len, "%s/%s%s", dir, name, suffix);
	int r = mc_write_if_changed(path, data, n);
	free(path);
	return r;
}

/* The global symbols the object defines, for the archive's index. */
static char **defined_symbols(lemit *e, int *n_out)
{
	int n = 0, cap = 8;
	char **syms = mc_xcalloc((size_t)cap, sizeof *syms);
	for (int pass = 0; pass < 2; pass++) {
		LLVMValueRef v = pass == 0 ? LLVMGetFirstFunction(e->mod) : LLVMGetFirstGlobal(e->mod);
		for (; v; v = pass == 0 ? LLVMGetNextFunction(v) : LLVMGetNextGlobal(v)) {
			if (LLVMIsDeclaration(v) || LLVMGetLinkage(v) != LLVMExternalLinkage)
				continue;
			size_t len;
			const char *name = LLVMGetValueName2(v, &len);
			if (n == cap)
				syms = mc_grow_array(syms, &cap, cap * 2, sizeof *syms);
			syms[n++] = mc_xstrdup(name);
		}
	}
	*n_out = n;
	return syms;
}

static int emit_object(lemit *e, LLVMTargetMachineRef tm, const char *dir)
{
	char *err = NULL;
	if (LLVMVerifyModule(e->mod, LLVMReturnStatusAction, &err)) {
		mc_error("LLVM target: internal error, the IR does not verify: %.400s", err ? err : "");
		LLVMDisposeMessage(err);
		return -1;
	}
	LLVMDisposeMessage(err);
	/* --opt: as clang's -O3, -Os and -Oz: the size levels mark every
	 * function optsize (Oz also minsize), which the code generator reads,
	 * and neither unrolls; Oz does not vectorise loops either */
	const char *opt = e->o->opt ? e->o->opt : "O3";
	bool for_size = strcmp(opt, "O3") != 0, min = !strcmp(opt, "Oz");
	for (LLVMValueRef f = LLVMGetFirstFunction(e->mod); for_size && f; f = LLVMGetNextFunction(f)) {
		if (LLVMIsDeclaration(f))
			continue;
		LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, enum_attr(e, "optsize"));
		if (min)
			LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, enum_attr(e, "minsize"));
	}
	char pipeline[32];
	snprintf(pipeline, sizeof pipeline, "default<%s>", opt);
	LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
	LLVMPassBuilderOptionsSetLoopVectorization(po, !min);
	LLVMPassBuilderOptionsSetSLPVectorization(po, !min);
	LLVMPassBuilderOptionsSetLoopUnrolling(po, !for_size);
	LLVMErrorRef perr = LLVMRunPasses(e->mod, pipeline, tm, po);
	LLVMDisposePassBuilderOptions(po);
	if (perr) {
		char *msg = LLVMGetErrorMessage(perr);
		mc_error("LLVM target: optimising failed: %s", msg);
		LLVMDisposeErrorMessage(msg);
		return -1;
	}
	const char *name = e->ce.name;
	if (e->o->emit_llvm) {
		char *ir = LLVMPrintModuleToString(e->mod);
		int r = write_bytes(dir, name, ".ll", ir, strlen(ir));
		LLVMDisposeMessage(ir);
		if (r)
			return -1;
	}
	LLVMMemoryBufferRef obj = NULL;
	if (LLVMTargetMachineEmitToMemoryBuffer(tm, e->mod, LLVMObjectFile, &err, &obj)) {
		mc_error("LLVM target: code generation failed: %s", err ? err : "unknown");
		LLVMDisposeMessage(err);
		return -1;
	}
	const void *data = LLVMGetBufferStart(obj);
	size_t size = LLVMGetBufferSize(obj);
	int n_syms = 0;
	char **syms = defined_symbols(e, &n_syms);
	char member[300];
	snprintf(member, sizeof member, "%s.o", name);
	mc_ar_member m = { member, data, size, (const char *const *)syms, n_syms };
	unsigned char *ar = NULL;
	size_t ar_len = 0;
	int r = write_bytes(dir, name, ".o", data, size);
	if (!r && mc_ar_build(&m, 1, &ar, &ar_len)) {
		mc_error("LLVM target: cannot build lib%s.a (out of memory, or over 4 GiB)", name);
		r = -1;
	}
	if (!r) {
		char lib[320];
		snprintf(lib, sizeof lib, "lib%s", name);
		r = write_bytes(dir, lib, ".a", ar, ar_len);
	}
	free(ar);
	for (int i = 0; i < n_syms; i++)
		free(syms[i]);
	free(syms);
	LLVMDisposeMemoryBuffer(obj);
	return r;
}

static int build_module(lemit *e)
{
	if (build_weights(e))
		return -1;
	const mc_program *p = e->p;
	build_desc_table(e, "in", "inputs", p->inputs, p->n_inputs);
	build_desc_table(e, "out", "outputs", p->outputs, p->n_outputs);
	kernel_fn *kf = mc_xcalloc((size_t)p->n_kernels + 1, sizeof *kf);
	for (int i = 0; i < p->n_kernels && !e->err; i++)
		kf[i].fn = build_kernel(e, p->kernels[i], &kf[i].used, &kf[i].n_used);
	if (!e->err)
		build_run(e, kf);
	for (int outputs = 0; outputs < 2 && p->dyn && !e->err; outputs++)
		build_shape_fn(e, outputs);
	for (int i = 0; i < p->n_kernels; i++)
		free(kf[i].used);
	free(kf);
	return e->err;
}

int mc_emit_llvm(const mc_program *p, const mc_compile_opts *o, const char *dir)
{
	const char *why = mc_llvm_load(); /* which also initialises LLVM's targets */
	if (why) {
		mc_error("LLVM target: %s", why);
		return -1;
	}
	lemit e = { .p = p, .o = o };
	if (mc_ce_init(&e.ce, p, o, "LLVM target"))
		return -1;
	int rc = -1;
	char *triple = NULL;
	LLVMTargetMachineRef tm = target_machine(o, &triple);
	mc_strbuf header = { 0 };
	if (!tm)
		goto out_ce;
	e.ctx = LLVMContextCreate();
	e.mod = LLVMModuleCreateWithNameInContext(e.ce.name, e.ctx);
	e.b = LLVMCreateBuilderInContext(e.ctx);
	e.td = LLVMCreateTargetDataLayout(tm);
	LLVMSetTarget(e.mod, triple);
	LLVMSetModuleDataLayout(e.mod, e.td);
	e.i1 = LLVMInt1TypeInContext(e.ctx);
	e.i8 = LLVMInt8TypeInContext(e.ctx);
	e.i16 = LLVMInt16TypeInContext(e.ctx);
	e.i32 = LLVMInt32TypeInContext(e.ctx);
	e.i64 = LLVMInt64TypeInContext(e.ctx);
	e.f32 = LLVMFloatTypeInContext(e.ctx);
	e.f64 = LLVMDoubleTypeInContext(e.ctx);
	e.half = LLVMHalfTypeInContext(e.ctx);
	e.ptr = LLVMPointerTypeInContext(e.ctx, 0);
	e.idx = e.ce.idx64 ? e.i64 : e.i32;
	if (build_module(&e))
		goto out;
	e.ce.sb = &header;
	mc_ce_header(&e.ce);
	if (e.ce.err || write_bytes(dir, e.ce.name, ".h", header.data, header.len) ||
	    write_bytes(dir, "modelc_rt", ".h", mc_runtime_min_h, strlen(mc_runtime_min_h)) ||
	    emit_object(&e, tm, dir))
		goto out;
	rc = 0;
out:
	mc_sb_free(&header);
	free(e.weights);
	LLVMDisposeBuilder(e.b);
	LLVMDisposeModule(e.mod);
	LLVMDisposeTargetData(e.td);
	LLVMContextDispose(e.ctx);
	LLVMDisposeTargetMachine(tm);
	free(triple);
out_ce:
	mc_ce_fini(&e.ce);
	return rc;
}

/* The kernel generators' ISA for a triple, CPU and features: the vector
 * widths and register counts they tile for (LLVM legalises any width, so
 * this is about speed, not correctness). NULL: generic. */
const char *mc_llvm_default_isa(const mc_compile_opts *o)
{
	if (mc_llvm_load())
		return NULL; /* mc_emit_llvm reports why */
	char *host = host_string(LLVMGetDefaultTargetTriple);
	const char *triple = o->triple ? o->triple : host;
	const char *isa = NULL;
	bool native = o->cpu && !strcmp(o->cpu, "native");
	if (!strncmp(triple, "x86_64", 6)) {
		char *feat = native && !o->features ? host_string(LLVMGetHostCPUFeatures)
		                                    : mc_xstrdup(o->features ? o->features : "");
		const char *cpu = o->cpu ? o->cpu : "";
		static const char *const avx512_cpus[] = { "x86-64-v4", "skylake-avx512", "cascadelake", "cooperlake",
		                                           "icelake-server", "icelake-client", "tigerlake",
		                                           "sapphirerapids", "znver4", "znver5", NULL };
		static const char *const avx2_cpus[] = { "x86-64-v3", "haswell", "broadwell", "skylake", "alderlake",
		                                         "raptorlake", "znver1", "znver2", "znver3", NULL };
		bool is512 = strstr(feat, "+avx512f") && strstr(feat, "+avx512vl");
		bool is2 = strstr(feat, "+avx2") && strstr(feat, "+fma");
		for (int i = 0; avx512_cpus[i]; i++)
			is512 |= !strcmp(cpu, avx512_cpus[i]);
		for (int i = 0; avx2_cpus[i]; i++)
			is2 |= !strcmp(cpu, avx2_cpus[i]);
		isa = is512 ? "avx512" : is2 ? "avx2" : NULL;
		free(feat);
	} else if (!strncmp(triple, "aarch64", 7) || !strncmp(triple, "arm64", 5)) {
		char *feat = native && !o->features ? host_string(LLVMGetHostCPUFeatures)
		                                    : mc_xstrdup(o->features ? o->features : "");
		isa = strstr(feat, "+dotprod") ? "neon-dotprod" : "neon";
		free(feat);
	} else if (!strncmp(triple, "thumbv7em", 9) || !strncmp(triple, "armv7em", 7)) {
		isa = "cortex-m";
	}
	free(host);
	return isa;
}

#endif
