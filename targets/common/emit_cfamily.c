/* The C-family printer, shared by the C and CUDA targets (and NAME.h with
 * the llvm target): kernel IR statements and expressions (vectors as the
 * ISA's intrinsics), the I/O macros and descriptor tables, the header and
 * the weights file. Output is a pure function of the program: no dates, no
 * paths, no pointer values. */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "emit_cfamily.h"

typedef mc_cemit emitter;

/* ---- types ---- */
const char *mc_ce_ctype(const emitter *e, mc_ktype t)
{
	switch (t) {
	case MC_KT_BOOL: return "int";
	case MC_KT_I8: return "int8_t";
	case MC_KT_U8: return "uint8_t";
	case MC_KT_I16: return "int16_t";
	case MC_KT_U16: return "uint16_t";
	case MC_KT_I32: return "int32_t";
	case MC_KT_U32: return "uint32_t";
	case MC_KT_I64: return "int64_t";
	case MC_KT_U64: return "uint64_t";
	case MC_KT_F32: return "float";
	case MC_KT_F64: return "double";
	case MC_KT_INDEX: return e->idx_type;
	default: return "void";
	}
}

/* Suffix of the runtime's per-type helpers (modelc_div_i32, ...). */
static const char *tsuffix(const emitter *e, mc_ktype t)
{
	switch (t) {
	case MC_KT_I8: return "i8";
	case MC_KT_U8: return "u8";
	case MC_KT_I16: return "i16";
	case MC_KT_U16: return "u16";
	case MC_KT_I32: return "i32";
	case MC_KT_U32: return "u32";
	case MC_KT_I64: return "i64";
	case MC_KT_U64: return "u64";
	case MC_KT_F32: return "f32";
	case MC_KT_F64: return "f64";
	case MC_KT_INDEX: return e->idx64 ? "i64" : "i32";
	default: return "?";
	}
}

/* Runtime helpers that widen a stored element to its compute type, and
 * narrow it back; NULL where C's own conversion is right. */
static const char *load_fn(mc_dtype t)
{
	switch (t) {
	case MC_FLOAT16: return "modelc_f16_to_f32";
	case MC_BFLOAT16: return "modelc_bf16_to_f32";
	case MC_FLOAT8E4M3FN: return "modelc_f8e4m3fn_to_f32";
	case MC_FLOAT8E4M3FNUZ: return "modelc_f8e4m3fnuz_to_f32";
	case MC_FLOAT8E5M2: return "modelc_f8e5m2_to_f32";
	case MC_FLOAT8E5M2FNUZ: return "modelc_f8e5m2fnuz_to_f32";
	case MC_FLOAT4E2M1: return "modelc_f4e2m1_to_f32";
	case MC_FLOAT8E8M0: return "modelc_f8e8m0_to_f32";
	default: return NULL;
	}
}

static const char *store_fn(mc_dtype t)
{
	switch (t) {
	case MC_FLOAT16: return "modelc_f32_to_f16";
	case MC_BFLOAT16: return "modelc_f32_to_bf16";
	case MC_FLOAT8E4M3FN: return "modelc_f32_to_f8e4m3fn";
	case MC_FLOAT8E4M3FNUZ: return "modelc_f32_to_f8e4m3fnuz";
	case MC_FLOAT8E5M2: return "modelc_f32_to_f8e5m2";
	case MC_FLOAT8E5M2FNUZ: return "modelc_f32_to_f8e5m2fnuz";
	case MC_FLOAT4E2M1: return "modelc_f32_to_f4e2m1";
	case MC_FLOAT8E8M0: return "modelc_f32_to_f8e8m0";
	case MC_INT4: return "modelc_wrap_i4";
	case MC_INT2: return "modelc_wrap_i2";
	case MC_UINT4: return "modelc_wrap_u4";
	case MC_UINT2: return "modelc_wrap_u2";
	case MC_BOOL: return "(uint8_t)";
	default: return NULL;
	}
}

/* ---- constants ---- */
/* Exact and compact: small integral values as "2.0", others as hex
 * floats, with the f suffix for f32; negative values in parentheses when
 * `paren` (inside expressions). */
static void put_float(mc_strbuf *sb, double v, bool f32, bool paren)
{
	const char *suf = f32 ? "f" : "";
	bool neg = signbit(v);
	double a = fabs(v);
	char body[64];
	if (isnan(v)) {
		mc_sb_puts(sb, "NAN");
		return;
	}
	if (isinf(v))
		snprintf(body, sizeof body, "INFINITY");
	else if (a == floor(a) && a < 1e7)
		snprintf(body, sizeof body, "%.1f%s", a, suf);
	else
		snprintf(body, sizeof body, "%a%s", a, suf);
	if (neg)
		mc_sb_printf(sb, paren ? "(-%s)" : "-%s", body);
	else
		mc_sb_puts(sb, body);
}

/* v reduced to the values of t, as the C conversion would (the IR may
 * carry a constant wider than its type). */
static int64_t wrap_const(mc_ktype t, int64_t v)
{
	switch (t) {
	case MC_KT_BOOL: return v != 0;
	case MC_KT_I8: return (int8_t)v;
	case MC_KT_U8: return (uint8_t)v;
	case MC_KT_I16: return (int16_t)v;
	case MC_KT_U16: return (uint16_t)v;
	case MC_KT_I32: return (int32_t)v;
	case MC_KT_U32: return (uint32_t)v;
	default: return v;
	}
}

static void put_int_const(emitter *e, mc_ktype t, int64_t v)
{
	mc_strbuf *sb = e->sb;
	v = wrap_const(t, v);
	switch (t) {
	case MC_KT_U32:
		mc_sb_printf(sb, "%" PRIu32 "u", (uint32_t)v);
		return;
	case MC_KT_U64:
		mc_sb_printf(sb, "UINT64_C(%" PRIu64 ")", (uint64_t)v);
		return;
	case MC_KT_I64:
		if (v == INT64_MIN)
			mc_sb_puts(sb, "INT64_MIN");
		else
			mc_sb_printf(sb, v < 0 ? "(INT64_C(%" PRId64 "))" : "INT64_C(%" PRId64 ")", v);
		return;
	case MC_KT_INDEX:
		if (v > INT32_MAX || v < -INT32_MAX) {
			if (v == INT64_MIN)
				mc_sb_puts(sb, "INT64_MIN");
			else
				mc_sb_printf(sb, v < 0 ? "(INT64_C(%" PRId64 "))" : "INT64_C(%" PRId64 ")", v);
			return;
		}
		break;
	case MC_KT_I32:
		if (v == INT32_MIN) {
			mc_sb_puts(sb, "INT32_MIN");
			return;
		}
		break;
	default:
		break;
	}
	mc_sb_printf(sb, v < 0 ? "(%" PRId64 ")" : "%" PRId64, v);
}

/* ---- expressions ---- */

/* name(a) / name(a, b) */
static void put_call(emitter *e, const char *fn, const mc_kexpr *a, const mc_kexpr *b)
{
	mc_sb_printf(e->sb, "%s(", fn);
	mc_ce_expr(e, a, true);
	if (b) {
		mc_sb_puts(e->sb, ", ");
		mc_ce_expr(e, b, true);
	}
	mc_sb_puts(e->sb, ")");
}

static void put_helper(emitter *e, const char *op, mc_ktype t, const mc_kexpr *a,
                       const mc_kexpr *b)
{
	char fn[64];
	snprintf(fn, sizeof fn, "modelc_%s_%s", op, tsuffix(e, t));
	put_call(e, fn, a, b);
}

/* (a op b), optionally wrapped in a cast to the result type: int8_t and
 * friends compute in int and are narrowed back. */
static void put_infix(emitter *e, const char *op, const mc_kexpr *a, const mc_kexpr *b,
                      const char *cast, bool top)
{
	if (cast)
		mc_sb_printf(e->sb, "((%s)(", cast);
	else if (!top)
		mc_sb_puts(e->sb, "(");
	mc_ce_expr(e, a, false);
	mc_sb_printf(e->sb, " %s ", op);
	mc_ce_expr(e, b, false);
	if (cast)
		mc_sb_puts(e->sb, "))");
	else if (!top)
		mc_sb_puts(e->sb, ")");
}

static const char *const infix_ops[MC_KB__COUNT] = {
	[MC_KB_ADD] = "+", [MC_KB_SUB] = "-", [MC_KB_MUL] = "*", [MC_KB_DIV] = "/",
	[MC_KB_REM] = "%", [MC_KB_AND] = "&", [MC_KB_OR] = "|", [MC_KB_XOR] = "^",
	[MC_KB_SHL] = "<<", [MC_KB_SHR] = ">>", [MC_KB_LT] = "<", [MC_KB_LE] = "<=",
	[MC_KB_GT] = ">", [MC_KB_GE] = ">=", [MC_KB_EQ] = "==", [MC_KB_NE] = "!=",
};

static bool is_compare(int op)
{
	return op >= MC_KB_LT && op <= MC_KB_NE;
}

static void put_float_bin(emitter *e, const mc_kexpr *x, bool top)
{
	bool f32 = x->a->type == MC_KT_F32;
	char fn[32];
	switch (x->op) {
	case MC_KB_ADD: case MC_KB_SUB: case MC_KB_MUL: case MC_KB_DIV:
		put_infix(e, infix_ops[x->op], x->a, x->b, NULL, top);
		return;
	case MC_KB_REM: case MC_KB_FMOD: case MC_KB_POW: case MC_KB_ATAN2:
		snprintf(fn, sizeof fn, "%s%s",
		         x->op == MC_KB_POW ? "pow" : x->op == MC_KB_ATAN2 ? "atan2" : "fmod",
		         f32 ? "f" : "");
		put_call(e, fn, x->a, x->b);
		return;
	case MC_KB_MIN: case MC_KB_MAX:
		put_helper(e, x->op == MC_KB_MIN ? "min" : "max", x->a->type, x->a, x->b);
		return;
	default:
		mc_ce_fail(e, "bitwise operation on floats");
	}
}

/* min(max(v, lo), hi) on i32 with [lo, hi] the range of an n-bit signed
 * (or unsigned) integer, as the runtime's modelc_ssat/modelc_usat: one
 * SSAT/USAT instruction on an Arm core (the requantisations' clamps), the
 * same two compares elsewhere. */
static bool put_saturate(emitter *e, const mc_kexpr *x)
{
	const mc_kexpr *in = x->a;
	int64_t lo, hi;
	if (x->op != MC_KB_MIN || x->a->type != MC_KT_I32 || in->kind != MC_KE_BIN || in->op != MC_KB_MAX ||
	    !mc_k_is_const(x->b, &hi) || !mc_k_is_const(in->b, &lo))
		return false;
	for (int n = 1; n <= 31; n++) {
		bool sat = lo == -((int64_t)1 << (n - 1)) && hi == ((int64_t)1 << (n - 1)) - 1;
		bool usat = lo == 0 && hi == ((int64_t)1 << n) - 1;
		if (!sat && !usat)
			continue;
		mc_sb_printf(e->sb, "%s(", sat ? "modelc_ssat" : "modelc_usat");
		mc_ce_expr(e, in->a, true);
		mc_sb_printf(e->sb, ", %d)", n);
		return true;
	}
	return false;
}

/* (a & 0xffff) | (b << 16) on i32: the runtime's modelc_pack16 (PKHBT on
 * the Arm DSP extension, where compilers make UXTH and ORR of it). */
static bool put_pack16(emitter *e, const mc_kexpr *x)
{
	int64_t mask, shift;
	const mc_kexpr *lo = x->a, *hi = x->b;
	if (x->op != MC_KB_OR || x->type != MC_KT_I32 || mc_k_lanes(x) > 1 || lo->kind != MC_KE_BIN ||
	    lo->op != MC_KB_AND || hi->kind != MC_KE_BIN || hi->op != MC_KB_SHL || !mc_k_is_const(lo->b, &mask) ||
	    mask != 0xffff || !mc_k_is_const(hi->b, &shift) || shift != 16)
		return false;
	mc_sb_puts(e->sb, "modelc_pack16(");
	mc_ce_expr(e, lo->a, true);
	mc_sb_puts(e->sb, ", ");
	mc_ce_expr(e, hi->a, true);
	mc_sb_puts(e->sb, ")");
	return true;
}

static void put_int_bin(emitter *e, const mc_kexpr *x, bool top)
{
	mc_ktype t = x->a->type;
	/* Types narrower than int are promoted: narrow the result back. */
	bool narrow = t == MC_KT_I8 || t == MC_KT_U8 || t == MC_KT_I16 || t == MC_KT_U16;
	const char *cast = narrow ? mc_ce_ctype(e, t) : NULL;
	switch (x->op) {
	case MC_KB_ADD: case MC_KB_SUB: case MC_KB_MUL:
		if (t == MC_KT_I32 || t == MC_KT_I64) {
			put_helper(e, x->op == MC_KB_ADD ? "add" : x->op == MC_KB_SUB ? "sub" : "mul",
			           t, x->a, x->b);
		} else if (t == MC_KT_U16 && x->op == MC_KB_MUL) {
			/* 65535 * 65535 overflows int: multiply as unsigned */
			mc_sb_puts(e->sb, "((uint16_t)((uint32_t)");
			mc_ce_expr(e, x->a, false);
			mc_sb_puts(e->sb, " * (uint32_t)");
			mc_ce_expr(e, x->b, false);
			mc_sb_puts(e->sb, "))");
		} else {
			put_infix(e, infix_ops[x->op], x->a, x->b, cast, top);
		}
		return;
	case MC_KB_DIV: case MC_KB_REM: case MC_KB_FMOD:
		put_helper(e, x->op == MC_KB_DIV ? "div" : "rem", t, x->a, x->b);
		return;
	case MC_KB_MIN: case MC_KB_MAX:
		if (put_saturate(e, x))
			return;
		put_helper(e, x->op == MC_KB_MIN ? "min" : "max", t, x->a, x->b);
		return;
	case MC_KB_AND: case MC_KB_OR: case MC_KB_XOR:
		if (put_pack16(e, x))
			return;
		put_infix(e, infix_ops[x->op], x->a, x->b, cast ? cast : mc_ce_ctype(e, t), top);
		return;
	case MC_KB_SHL: case MC_KB_SHR:
		put_helper(e, x->op == MC_KB_SHL ? "shl" : "shr", t, x->a, x->b);
		return;
	default:
		mc_ce_fail(e, "pow/atan2 on integers has no C lowering");
	}
}

/* Index arithmetic never wraps (the index type holds every index): plain C. */
static void put_index_bin(emitter *e, const mc_kexpr *x, bool top)
{
	if (x->op == MC_KB_MIN || x->op == MC_KB_MAX) {
		mc_sb_puts(e->sb, "(");
		mc_ce_expr(e, x->a, false);
		mc_sb_puts(e->sb, x->op == MC_KB_MIN ? " < " : " > ");
		mc_ce_expr(e, x->b, false);
		mc_sb_puts(e->sb, " ? ");
		mc_ce_expr(e, x->a, false);
		mc_sb_puts(e->sb, " : ");
		mc_ce_expr(e, x->b, false);
		mc_sb_puts(e->sb, ")");
		return;
	}
	if (!infix_ops[x->op]) {
		mc_ce_fail(e, "unsupported operation on indices");
		return;
	}
	put_infix(e, infix_ops[x->op], x->a, x->b, NULL, top);
}

static void put_bool_bin(emitter *e, const mc_kexpr *x, bool top)
{
	switch (x->op) {
	case MC_KB_AND: case MC_KB_MIN:
		put_infix(e, "&", x->a, x->b, NULL, top);
		return;
	case MC_KB_OR: case MC_KB_MAX:
		put_infix(e, "|", x->a, x->b, NULL, top);
		return;
	case MC_KB_XOR:
		put_infix(e, "^", x->a, x->b, NULL, top);
		return;
	default:
		mc_ce_fail(e, "arithmetic on bools");
	}
}

/* The range of an integer type, for comparisons against constants. */
static bool int_range(mc_ktype t, int64_t *lo, uint64_t *hi)
{
	switch (t) {
	case MC_KT_I8: *lo = INT8_MIN; *hi = INT8_MAX; return true;
	case MC_KT_U8: *lo = 0; *hi = UINT8_MAX; return true;
	case MC_KT_I16: *lo = INT16_MIN; *hi = INT16_MAX; return true;
	case MC_KT_U16: *lo = 0; *hi = UINT16_MAX; return true;
	case MC_KT_I32: *lo = INT32_MIN; *hi = INT32_MAX; return true;
	case MC_KT_U32: *lo = 0; *hi = UINT32_MAX; return true;
	case MC_KT_I64: *lo = INT64_MIN; *hi = INT64_MAX; return true;
	case MC_KT_U64: *lo = 0; *hi = UINT64_MAX; return true;
	default: return false;
	}
}

/* a < b and a > b on (int64 or uint64) values: unsigned types' constants
 * are their bits in int64. */
static bool lt_mixed(int64_t a, bool a_unsigned, int64_t b, bool b_unsigned)
{
	if (a_unsigned && b_unsigned)
		return (uint64_t)a < (uint64_t)b;
	if (a_unsigned) /* a >= 0 */
		return b >= 0 && (uint64_t)a < (uint64_t)b;
	if (b_unsigned)
		return a < 0 || (uint64_t)a < (uint64_t)b;
	return a < b;
}

/* 1 or 0 when `x op c` (c constant) has that value for every x of the
 * type, -1 otherwise. gcc's -Wtype-limits (in -Wextra) rejects such
 * comparisons (u < 0, i8 >= -128), which lowerings write naturally. */
static int tautology(int op, mc_ktype t, int64_t c)
{
	int64_t lo;
	uint64_t hi;
	if (!int_range(t, &lo, &hi))
		return -1;
	bool u = !mc_ktype_is_signed(t);
	c = wrap_const(t, c);
	bool c_below = lt_mixed(c, u, lo, false);              /* c < lo */
	bool c_above = lt_mixed((int64_t)hi, true, c, u);      /* hi < c */
	bool c_is_lo = !c_below && !lt_mixed(lo, false, c, u); /* c == lo */
	bool c_is_hi = !c_above && !lt_mixed(c, u, (int64_t)hi, true);
	switch (op) {
	case MC_KB_LT: return (c_above) ? 1 : (c_below || c_is_lo) ? 0 : -1;
	case MC_KB_LE: return (c_above || c_is_hi) ? 1 : c_below ? 0 : -1;
	case MC_KB_GT: return (c_below) ? 1 : (c_above || c_is_hi) ? 0 : -1;
	case MC_KB_GE: return (c_below || c_is_lo) ? 1 : c_above ? 0 : -1;
	case MC_KB_EQ: return (c_below || c_above) ? 0 : -1;
	case MC_KB_NE: return (c_below || c_above) ? 1 : -1;
	default: return -1;
	}
}

static int swap_compare(int op)
{
	switch (op) {
	case MC_KB_LT: return MC_KB_GT;
	case MC_KB_LE: return MC_KB_GE;
	case MC_KB_GT: return MC_KB_LT;
	case MC_KB_GE: return MC_KB_LE;
	default: return op;
	}
}

static void put_compare(emitter *e, const mc_kexpr *x, bool top)
{
	int64_t c;
	const mc_kexpr *var = NULL;
	int known = -1;
	if (mc_k_is_const(x->b, &c) && !mc_k_is_const(x->a, NULL)) {
		var = x->a;
		known = tautology(x->op, x->a->type, c);
	} else if (mc_k_is_const(x->a, &c) && !mc_k_is_const(x->b, NULL)) {
		var = x->b;
		known = tautology(swap_compare(x->op), x->b->type, c);
	}
	if (known >= 0) { /* keep the operand's reads, drop the comparison */
		mc_sb_puts(e->sb, "((void)");
		mc_ce_expr(e, var, false);
		mc_sb_printf(e->sb, ", %d)", known);
		return;
	}
	put_infix(e, infix_ops[x->op], x->a, x->b, NULL, top);
}

static void put_bin(emitter *e, const mc_kexpr *x, bool top)
{
	mc_ktype t = x->a->type;
	if (is_compare(x->op)) {
		put_compare(e, x, top);
		return;
	}
	if (mc_ktype_is_float(t))
		put_float_bin(e, x, top);
	else if (t == MC_KT_INDEX)
		put_index_bin(e, x, top);
	else if (t == MC_KT_BOOL)
		put_bool_bin(e, x, top);
	else
		put_int_bin(e, x, top);
}

static const char *const math_fns[MC_KU__COUNT] = {
	[MC_KU_SQRT] = "sqrt", [MC_KU_EXP] = "exp", [MC_KU_LOG] = "log", [MC_KU_SIN] = "sin",
	[MC_KU_COS] = "cos", [MC_KU_TAN] = "tan", [MC_KU_ASIN] = "asin", [MC_KU_ACOS] = "acos",
	[MC_KU_ATAN] = "atan", [MC_KU_SINH] = "sinh", [MC_KU_COSH] = "cosh", [MC_KU_TANH] = "tanh",
	[MC_KU_ASINH] = "asinh", [MC_KU_ACOSH] = "acosh", [MC_KU_ATANH] = "atanh",
	[MC_KU_FLOOR] = "floor", [MC_KU_CEIL] = "ceil", [MC_KU_TRUNC] = "trunc",
	[MC_KU_RINT] = "rint", [MC_KU_ROUND] = "round", [MC_KU_ERF] = "erf", [MC_KU_ABS] = "fabs",
};

/* (cast)(pre a) */
static void put_prefix(emitter *e, const char *cast, const char *pre, const mc_kexpr *a)
{
	if (cast)
		mc_sb_printf(e->sb, "((%s)(%s", cast, pre);
	else
		mc_sb_printf(e->sb, "(%s", pre);
	mc_ce_expr(e, a, false);
	mc_sb_puts(e->sb, cast ? "))" : ")");
}

static void put_neg(emitter *e, const mc_kexpr *x)
{
	mc_ktype t = x->type;
	switch (t) {
	case MC_KT_F32: case MC_KT_F64: case MC_KT_INDEX:
		put_prefix(e, NULL, "-", x->a);
		return;
	case MC_KT_I32: case MC_KT_I64:
		put_helper(e, "neg", t, x->a, NULL);
		return;
	case MC_KT_I8: case MC_KT_I16:
		put_prefix(e, mc_ce_ctype(e, t), "-", x->a);
		return;
	case MC_KT_U8: case MC_KT_U16: case MC_KT_U32:
		put_prefix(e, mc_ce_ctype(e, t), "0u - ", x->a);
		return;
	case MC_KT_U64:
		put_prefix(e, mc_ce_ctype(e, t), "UINT64_C(0) - ", x->a);
		return;
	default: /* bool: -x is x modulo 2 */
		mc_ce_expr(e, x->a, false);
		return;
	}
}

static void put_un(emitter *e, const mc_kexpr *x)
{
	mc_ktype t = x->a->type;
	bool is_float = mc_ktype_is_float(t);
	char fn[32];
	switch (x->op) {
	case MC_KU_NEG:
		put_neg(e, x);
		return;
	case MC_KU_NOT:
		put_prefix(e, NULL, "!", x->a);
		return;
	case MC_KU_BITNOT:
		if (is_float)
			mc_ce_fail(e, "bitwise not on floats");
		else if (t == MC_KT_BOOL)
			put_prefix(e, NULL, "!", x->a);
		else
			put_prefix(e, mc_ce_ctype(e, t), "~", x->a);
		return;
	case MC_KU_SXTB16: case MC_KU_SXTB16_HI: /* the runtime's, as modelc_smlad */
		put_call(e, x->op == MC_KU_SXTB16 ? "modelc_sxtb16" : "modelc_sxtb16_hi", x->a, NULL);
		return;
	case MC_KU_ISNAN: case MC_KU_ISINF:
		if (!is_float) { /* integers are never NaN or inf */
			mc_sb_puts(e->sb, "((void)");
			mc_ce_expr(e, x->a, false);
			mc_sb_puts(e->sb, ", 0)");
			return;
		}
		mc_sb_puts(e->sb, x->op == MC_KU_ISNAN ? "(isnan(" : "(isinf(");
		mc_ce_expr(e, x->a, true);
		mc_sb_puts(e->sb, ") != 0)");
		return;
	default:
		break;
	}
	if (!is_float) {
		switch (x->op) {
		case MC_KU_FLOOR: case MC_KU_CEIL: case MC_KU_TRUNC: case MC_KU_RINT: case MC_KU_ROUND:
			mc_ce_expr(e, x->a, false);
			return;
		case MC_KU_ABS:
			if (t == MC_KT_INDEX) {
				mc_sb_puts(e->sb, "(");
				mc_ce_expr(e, x->a, false);
				mc_sb_puts(e->sb, " < 0 ? -");
				mc_ce_expr(e, x->a, false);
				mc_sb_puts(e->sb, " : ");
				mc_ce_expr(e, x->a, false);
				mc_sb_puts(e->sb, ")");
			} else if (mc_ktype_is_signed(t)) {
				put_helper(e, "abs", t, x->a, NULL);
			} else {
				mc_ce_expr(e, x->a, false);
			}
			return;
		default:
			mc_ce_fail(e, "math function on integers");
			return;
		}
	}
	if ((unsigned)x->op >= MC_KU__COUNT || !math_fns[x->op]) {
		mc_ce_fail(e, "unknown unary operation");
		return;
	}
	snprintf(fn, sizeof fn, "%s%s", math_fns[x->op], t == MC_KT_F32 ? "f" : "");
	put_call(e, fn, x->a, NULL);
}

static void put_cast(emitter *e, const mc_kexpr *x)
{
	mc_ktype to = x->type, from = x->a->type;
	if (to == MC_KT_BOOL) {
		mc_sb_puts(e->sb, "(");
		mc_ce_expr(e, x->a, false);
		mc_sb_puts(e->sb, " != 0)");
		return;
	}
	if (mc_ktype_is_float(from) && !mc_ktype_is_float(to)) {
		/* C leaves NaN and out-of-range conversions undefined: saturate */
		char fn[48];
		snprintf(fn, sizeof fn, "modelc_%s_to_%s", tsuffix(e, from), tsuffix(e, to));
		if (to == MC_KT_INDEX)
			mc_sb_printf(e->sb, "(%s)", e->idx_type);
		put_call(e, fn, x->a, NULL);
		return;
	}
	mc_sb_printf(e->sb, "((%s)", mc_ce_ctype(e, to));
	mc_ce_expr(e, x->a, false);
	mc_sb_puts(e->sb, ")");
}

static void put_load(emitter *e, const mc_kexpr *x)
{
	if (e->subst_text && x->buf == e->subst_buf) {
		mc_sb_puts(e->sb, e->subst_text);
		return;
	}
	mc_dtype dt = e->k->bufs[x->buf].dtype;
	const char *fn = load_fn(dt);
	if (fn)
		mc_sb_printf(e->sb, "%s(", fn);
	else if (dt == MC_BOOL)
		mc_sb_puts(e->sb, "(");
	mc_sb_printf(e->sb, "b%d[", x->buf);
	mc_ce_expr(e, x->a, true);
	mc_sb_puts(e->sb, "]");
	if (fn)
		mc_sb_puts(e->sb, ")");
	else if (dt == MC_BOOL)
		mc_sb_puts(e->sb, " != 0)");
}

/* ---- vectors: printed as the ISA's intrinsics ---- */
typedef struct {
	const char *type, *mask;   /* vector and compare-result C types */
	const char *pre;           /* intrinsic prefix: _mm512_, _mm256_, _mm_, v */
	const char *itype;         /* the i32 vector's C type */
	const char *isuf;          /* suffix of x86's whole-register integer intrinsics */
} vec_names;

static bool vec_names_of(const emitter *e, int lanes, vec_names *n)
{
	mc_isa_kind k = e->p->target.isa ? e->p->target.isa->kind : MC_ISA_GENERIC;
	if (k == MC_ISA_AVX512 && lanes == 16)
		*n = (vec_names){ "__m512", "__mmask16", "_mm512_", "__m512i", "si512" };
	else if ((k == MC_ISA_AVX512 || k == MC_ISA_AVX2) && lanes == 8)
		*n = (vec_names){ "__m256", "__m256", "_mm256_", "__m256i", "si256" };
	else if ((k == MC_ISA_AVX512 || k == MC_ISA_AVX2) && lanes == 4)
		*n = (vec_names){ "__m128", "__m128", "_mm_", "__m128i", "si128" };
	else if (k == MC_ISA_NEON && lanes == 4)
		*n = (vec_names){ "float32x4_t", "uint32x4_t", "", "int32x4_t", "" };
	else
		return false;
	return true;
}

static bool is_neon(const emitter *e)
{
	return e->p->target.isa && e->p->target.isa->kind == MC_ISA_NEON;
}

static const char *vtype(emitter *e, const mc_kvar *v)
{
	vec_names n;
	if (!vec_names_of(e, v->lanes, &n)) {
		mc_ce_fail(e, "vector width the ISA does not have");
		return "void";
	}
	return v->type == MC_KT_BOOL ? n.mask : v->type == MC_KT_I32 ? n.itype : n.type;
}

/* pre##op(a, b) for x86; NEON's own names. */
static void put_vcall(emitter *e, const vec_names *n, const char *op, const mc_kexpr *a,
                      const mc_kexpr *b)
{
	mc_sb_printf(e->sb, "%s%s(", n->pre, op);
	mc_ce_expr(e, a, true);
	if (b) {
		mc_sb_puts(e->sb, ", ");
		mc_ce_expr(e, b, true);
	}
	mc_sb_puts(e->sb, ")");
}

/* pre##fn(a, b, c) */
static void put_call3(emitter *e, const char *pre, const char *fn, const mc_kexpr *a,
                      const mc_kexpr *b, const mc_kexpr *c)
{
	const mc_kexpr *args[3] = { a, b, c };
	mc_sb_printf(e->sb, "%s%s(", pre, fn);
	for (int i = 0; i < 3; i++) {
		if (i)
			mc_sb_puts(e->sb, ", ");
		mc_ce_expr(e, args[i], true);
	}
	mc_sb_puts(e->sb, ")");
}

static void put_vec_compare(emitter *e, const vec_names *n, const mc_kexpr *x)
{
	if (is_neon(e)) {
		static const char *const fns[] = { "vcltq_f32", "vcleq_f32", "vcgtq_f32",
		                                   "vcgeq_f32", "vceqq_f32", "vceqq_f32" };
		if (x->op == MC_KB_NE)
			mc_sb_puts(e->sb, "vmvnq_u32(");
		put_vcall(e, n, fns[x->op - MC_KB_LT], x->a, x->b);
		if (x->op == MC_KB_NE)
			mc_sb_puts(e->sb, ")");
		return;
	}
	/* ordered predicates like C's <, except != which is true for NaN */
	static const char *const preds[] = { "_CMP_LT_OQ", "_CMP_LE_OQ", "_CMP_GT_OQ",
	                                     "_CMP_GE_OQ", "_CMP_EQ_OQ", "_CMP_NEQ_UQ" };
	bool mask = strcmp(n->pre, "_mm512_") == 0;
	mc_sb_printf(e->sb, "%s%s(", n->pre, mask ? "cmp_ps_mask" : "cmp_ps");
	mc_ce_expr(e, x->a, true);
	mc_sb_puts(e->sb, ", ");
	mc_ce_expr(e, x->b, true);
	mc_sb_printf(e->sb, ", %s)", preds[x->op - MC_KB_LT]);
}

static void put_vec_bin(emitter *e, const vec_names *n, const mc_kexpr *x)
{
	if (x->op >= MC_KB_LT && x->op <= MC_KB_NE) {
		put_vec_compare(e, n, x);
		return;
	}
	if (is_neon(e)) {
		switch (x->op) {
		case MC_KB_ADD: put_vcall(e, n, "vaddq_f32", x->a, x->b); return;
		case MC_KB_SUB: put_vcall(e, n, "vsubq_f32", x->a, x->b); return;
		case MC_KB_MUL: put_vcall(e, n, "vmulq_f32", x->a, x->b); return;
		case MC_KB_DIV: put_vcall(e, n, "vdivq_f32", x->a, x->b); return;
		case MC_KB_MIN: case MC_KB_MAX: /* a < b ? a : b, as the scalar code */
			mc_sb_printf(e->sb, "vbslq_f32(%s(", x->op == MC_KB_MIN ? "vcltq_f32" : "vcgtq_f32");
			mc_ce_expr(e, x->a, true);
			mc_sb_puts(e->sb, ", ");
			mc_ce_expr(e, x->b, true);
			mc_sb_puts(e->sb, "), ");
			mc_ce_expr(e, x->a, true);
			mc_sb_puts(e->sb, ", ");
			mc_ce_expr(e, x->b, true);
			mc_sb_puts(e->sb, ")");
			return;
		default: break;
		}
	} else {
		/* minps/maxps return the second operand when either is NaN: the
		 * scalar a < b ? a : b exactly */
		static const char *const ops[] = { [MC_KB_ADD] = "add_ps", [MC_KB_SUB] = "sub_ps",
			[MC_KB_MUL] = "mul_ps", [MC_KB_DIV] = "div_ps", [MC_KB_MIN] = "min_ps",
			[MC_KB_MAX] = "max_ps" };
		if (x->op <= MC_KB_MAX && ops[x->op]) {
			put_vcall(e, n, ops[x->op], x->a, x->b);
			return;
		}
	}
	mc_ce_fail(e, "binary operation without a vector form");
}

/* i32 vectors: the ISA's integer intrinsics; loads and stores of 8-bit
 * elements, DOT2, DOT4 and RQ32 through the helpers of
 * runtime-min/modelc_ivec_*.h (mc_ce_vector_prelude pastes them). */
static void put_ivec_bin(emitter *e, const vec_names *n, const mc_kexpr *x)
{
	if (is_neon(e)) {
		static const char *const fns[] = { [MC_KB_ADD] = "vaddq_s32", [MC_KB_SUB] = "vsubq_s32",
			[MC_KB_MUL] = "vmulq_s32", [MC_KB_MIN] = "vminq_s32", [MC_KB_MAX] = "vmaxq_s32",
			[MC_KB_AND] = "vandq_s32", [MC_KB_OR] = "vorrq_s32", [MC_KB_XOR] = "veorq_s32" };
		if (x->op == MC_KB_SHL || x->op == MC_KB_SHR) {
			mc_sb_puts(e->sb, x->op == MC_KB_SHL ? "vshlq_n_s32(" : "vshrq_n_s32(");
			mc_ce_expr(e, x->a, true);
			mc_sb_printf(e->sb, ", %lld)", (long long)x->b->a->i);
		} else if ((unsigned)x->op < sizeof fns / sizeof *fns && fns[x->op]) {
			put_vcall(e, n, fns[x->op], x->a, x->b);
		} else {
			mc_ce_fail(e, "binary operation without an i32 vector form");
		}
		return;
	}
	char op[24];
	switch (x->op) {
	case MC_KB_ADD: put_vcall(e, n, "add_epi32", x->a, x->b); return;
	case MC_KB_SUB: put_vcall(e, n, "sub_epi32", x->a, x->b); return;
	case MC_KB_MUL: put_vcall(e, n, "mullo_epi32", x->a, x->b); return;
	case MC_KB_MIN: put_vcall(e, n, "min_epi32", x->a, x->b); return;
	case MC_KB_MAX: put_vcall(e, n, "max_epi32", x->a, x->b); return;
	case MC_KB_AND: case MC_KB_OR: case MC_KB_XOR:
		snprintf(op, sizeof op, "%s_%s", x->op == MC_KB_AND ? "and" : x->op == MC_KB_OR ? "or" : "xor",
		         n->isuf);
		put_vcall(e, n, op, x->a, x->b);
		return;
	case MC_KB_SHL: case MC_KB_SHR: /* by a constant (kcheck); SHR arithmetic */
		mc_sb_printf(e->sb, "%s%s_epi32(", n->pre, x->op == MC_KB_SHL ? "slli" : "srai");
		mc_ce_expr(e, x->a, true);
		mc_sb_printf(e->sb, ", %lld)", (long long)x->b->a->i);
		return;
	default:
		break;
	}
	mc_ce_fail(e, "binary operation without an i32 vector form");
}

static void put_ivec_expr(emitter *e, const vec_names *n, const mc_kexpr *x)
{
	bool neon = is_neon(e);
	switch (x->kind) {
	case MC_KE_VAR:
		mc_sb_printf(e->sb, "v%d", x->var);
		return;
	case MC_KE_LOAD: {
		mc_dtype dt = e->k->bufs[x->buf].dtype;
		if (dt != MC_INT32)
			mc_sb_printf(e->sb, "modelc_ld%s%d%s(&b%d[", dt == MC_UINT8 ? "u8" : "s8", x->lanes,
			             x->stride == 2 ? "_s2" : "", x->buf);
		else if (neon)
			mc_sb_printf(e->sb, "vld1q_s32(&b%d[", x->buf);
		else
			mc_sb_printf(e->sb, "%sloadu_%s((const void *)&b%d[", n->pre, n->isuf, x->buf);
		mc_ce_expr(e, x->a, true);
		mc_sb_puts(e->sb, "])");
		return;
	}
	case MC_KE_SPLAT:
		put_vcall(e, n, neon ? "vdupq_n_s32" : "set1_epi32", x->a, NULL);
		return;
	case MC_KE_BIN:
		put_ivec_bin(e, n, x);
		return;
	case MC_KE_BITS: {
		char op[24];
		snprintf(op, sizeof op, "castps_%s", n->isuf);
		put_vcall(e, n, neon ? "vreinterpretq_s32_f32" : op, x->a, NULL);
		return;
	}
	case MC_KE_DOT2: case MC_KE_DOT4:
		mc_sb_printf(e->sb, "modelc_dot%d%s_%d(", x->kind == MC_KE_DOT2 ? 2 : 4, x->kind == MC_KE_DOT4 && x->i ? "s" : "",
		             x->lanes);
		break;
	case MC_KE_RQ32: /* constants shared by the lanes, or per lane (v) */
		mc_sb_printf(e->sb, "modelc_rq32%s%s_%d(", x->i == MC_RQ32_TWICE ? "x2" : x->i == MC_RQ32_HALF_UP ? "u" : "",
		             mc_k_lanes(x->b) > 1 ? "v" : "", x->lanes);
		break;
	default:
		mc_ce_fail(e, "expression without an i32 vector form");
		return;
	}
	mc_ce_expr(e, x->a, true);
	mc_sb_puts(e->sb, ", ");
	mc_ce_expr(e, x->b, true);
	mc_sb_puts(e->sb, ", ");
	mc_ce_expr(e, x->c, true);
	mc_sb_puts(e->sb, ")");
}

static void put_vec_expr(emitter *e, const mc_kexpr *x)
{
	vec_names n;
	if (!vec_names_of(e, x->lanes, &n)) {
		mc_ce_fail(e, "vector width the ISA does not have");
		return;
	}
	if (x->type == MC_KT_I32) {
		put_ivec_expr(e, &n, x);
		return;
	}
	bool neon = is_neon(e);
	switch (x->kind) {
	case MC_KE_VAR:
		mc_sb_printf(e->sb, "v%d", x->var);
		return;
	case MC_KE_LOAD:
		if (neon)
			mc_sb_printf(e->sb, "vld1q_f32(&b%d[", x->buf);
		else
			mc_sb_printf(e->sb, "%sloadu_ps(&b%d[", n.pre, x->buf);
		mc_ce_expr(e, x->a, true);
		mc_sb_puts(e->sb, "])");
		return;
	case MC_KE_SPLAT:
		put_vcall(e, &n, neon ? "vdupq_n_f32" : "set1_ps", x->a, NULL);
		return;
	case MC_KE_BIN:
		put_vec_bin(e, &n, x);
		return;
	case MC_KE_BITS: {
		char op[24];
		snprintf(op, sizeof op, "cast%s_ps", n.isuf);
		put_vcall(e, &n, neon ? "vreinterpretq_f32_s32" : op, x->a, NULL);
		return;
	}
	case MC_KE_UN: /* NEG: -0.0f - a flips the sign of zeros too */
		if (neon) {
			put_vcall(e, &n, "vnegq_f32", x->a, NULL);
			return;
		}
		mc_sb_printf(e->sb, "%ssub_ps(%sset1_ps(-0.0f), ", n.pre, n.pre);
		mc_ce_expr(e, x->a, true);
		mc_sb_puts(e->sb, ")");
		return;
	case MC_KE_FMA: /* vfmaq_f32(c, a, b) = c + a * b */
		if (neon)
			put_call3(e, "vfmaq_f32", "", x->c, x->a, x->b);
		else
			put_call3(e, n.pre, "fmadd_ps", x->a, x->b, x->c);
		return;
	case MC_KE_SELECT:
		if (mc_k_lanes(x->a) == 1) { /* one whole vector or the other */
			mc_sb_puts(e->sb, "(");
			mc_ce_expr(e, x->a, false);
			mc_sb_puts(e->sb, " ? ");
			mc_ce_expr(e, x->b, false);
			mc_sb_puts(e->sb, " : ");
			mc_ce_expr(e, x->c, false);
			mc_sb_puts(e->sb, ")");
		} else if (neon) {
			put_call3(e, "vbslq_f32", "", x->a, x->b, x->c);
		} else if (x->lanes == 16) { /* blend takes the mask's set lanes from its 2nd vector */
			put_call3(e, "_mm512_mask_blend_ps", "", x->a, x->c, x->b);
		} else {
			put_call3(e, n.pre, "blendv_ps", x->c, x->b, x->a);
		}
		return;
	default:
		break;
	}
	mc_ce_fail(e, "expression without a vector form");
}

/* Lane i of a vector: the runtime's modelc_laneN helpers (emitted by
 * put_vector_prelude). */
static void put_lane(emitter *e, const mc_kexpr *x)
{
	mc_sb_printf(e->sb, "modelc_lane%s%d(", x->type == MC_KT_I32 ? "i" : "", x->a->lanes);
	mc_ce_expr(e, x->a, true);
	mc_sb_printf(e->sb, ", %lld)", (long long)x->i);
}

void mc_ce_expr(emitter *e, const mc_kexpr *x, bool top)
{
	if (x->lanes > 1) {
		put_vec_expr(e, x);
		return;
	}
	switch (x->kind) {
	case MC_KE_CONST:
		if (mc_ktype_is_float(x->type))
			put_float(e->sb, x->f, x->type == MC_KT_F32, true);
		else
			put_int_const(e, x->type, x->i);
		return;
	case MC_KE_VAR:
		mc_sb_printf(e->sb, "v%d", x->var);
		return;
	case MC_KE_LOAD:
		put_load(e, x);
		return;
	case MC_KE_UN:
		put_un(e, x);
		return;
	case MC_KE_BIN:
		put_bin(e, x, top);
		return;
	case MC_KE_SELECT:
		if (!top)
			mc_sb_puts(e->sb, "(");
		mc_ce_expr(e, x->a, false);
		mc_sb_puts(e->sb, " ? ");
		mc_ce_expr(e, x->b, false);
		mc_sb_puts(e->sb, " : ");
		mc_ce_expr(e, x->c, false);
		if (!top)
			mc_sb_puts(e->sb, ")");
		return;
	case MC_KE_CAST:
		put_cast(e, x);
		return;
	case MC_KE_FMA: {
		/* a * b + c, unfused: fma() is a slow library call without an FPU
		 * instruction, and the reference rounds twice as well. */
		mc_kexpr mul = {.kind = MC_KE_BIN, .type = x->c->type, .op = MC_KB_MUL,
		                .a = x->a, .b = x->b};
		mc_kexpr add = {.kind = MC_KE_BIN, .type = x->c->type, .op = MC_KB_ADD,
		                .a = &mul, .b = x->c};
		put_bin(e, &add, top);
		return;
	}
	case MC_KE_LANE:
		put_lane(e, x);
		return;
	case MC_KE_BITS: /* the runtime's (modelc_rt.h) */
		mc_sb_puts(e->sb, x->type == MC_KT_I32 ? "((int32_t)modelc_f32_bits(" : "modelc_bits_f32((uint32_t)(");
		mc_ce_expr(e, x->a, true);
		mc_sb_puts(e->sb, "))");
		return;
	case MC_KE_DOT2: /* the runtime's (modelc_rt.h): SMLAD where the DSP extension is */
		put_call3(e, "", "modelc_smlad", x->a, x->b, x->c);
		return;
	case MC_KE_DOT4: /* the runtime's (modelc_rt.h) */
		put_call3(e, "", x->i ? "modelc_dot4ss" : "modelc_dot4us", x->a, x->b, x->c);
		return;
	case MC_KE_RQ32: /* the runtime's (modelc_rt.h) */
		put_call3(e, "", x->i == MC_RQ32_TWICE ? "modelc_rq32x2" : x->i == MC_RQ32_HALF_UP ? "modelc_rq32u" : "modelc_rq32",
		          x->a, x->b, x->c);
		return;
	case MC_KE_SPLITS:
		if (e->put_splits) {
			e->put_splits(e, x->buf);
			return;
		}
		mc_ce_fail(e, "a device's K splits off the cuda target");
		return;
	case MC_KE_DIM: /* the kernel's parameter (aot/dynamic.c) */
		mc_sb_puts(e->sb, "dim");
		return;
	case MC_KE_SPLAT:
		break;
	}
	mc_ce_fail(e, "unknown expression kind");
}

/* ---- statements ---- */
void mc_ce_indent(emitter *e, int depth)
{
	for (int i = 0; i < depth; i++)
		mc_sb_puts(e->sb, "\t");
}

static const char *status_name(int code)
{
	switch (code) {
	case MC_STATUS_OK: return "MODELC_OK";
	case MC_STATUS_NULL_ARGUMENT: return "MODELC_ERR_NULL_ARGUMENT";
	case MC_STATUS_MISALIGNED: return "MODELC_ERR_MISALIGNED";
	case MC_STATUS_BAD_INDEX: return "MODELC_ERR_BAD_INDEX";
	case MC_STATUS_BAD_INPUT: return "MODELC_ERR_BAD_INPUT";
	case MC_STATUS_BRANCH: return "MODELC_ERR_BRANCH";
	default: return NULL;
	}
}


static void put_store(emitter *e, const mc_kstmt *s)
{
	if (s->b->lanes > 1) {
		vec_names n;
		if (!vec_names_of(e, s->b->lanes, &n)) {
			mc_ce_fail(e, "vector width the ISA does not have");
			return;
		}
		mc_dtype dt = e->k->bufs[s->buf].dtype;
		const mc_kexpr *v = s->b;
		if ((dt == MC_INT8 || dt == MC_UINT8) && v->kind == MC_KE_LOAD && !v->stride && v->buf != s->buf &&
		    e->k->bufs[v->buf].dtype == dt) {
			/* bytes copied as they are (widened and narrowed back, else);
			 * within one buffer the two could overlap: as before */
			mc_sb_printf(e->sb, "memcpy(&b%d[", s->buf);
			mc_ce_expr(e, s->a, true);
			mc_sb_printf(e->sb, "], &b%d[", v->buf);
			mc_ce_expr(e, v->a, true);
			mc_sb_printf(e->sb, "], %d);\n", v->lanes);
			return;
		}
		if (dt == MC_INT8 || dt == MC_UINT8)
			mc_sb_printf(e->sb, "modelc_st8_%d(&b%d[", s->b->lanes, s->buf);
		else if (dt == MC_INT32 && is_neon(e))
			mc_sb_printf(e->sb, "vst1q_s32(&b%d[", s->buf);
		else if (dt == MC_INT32)
			mc_sb_printf(e->sb, "%sstoreu_%s((void *)&b%d[", n.pre, n.isuf, s->buf);
		else if (is_neon(e))
			mc_sb_printf(e->sb, "vst1q_f32(&b%d[", s->buf);
		else
			mc_sb_printf(e->sb, "%sstoreu_ps(&b%d[", n.pre, s->buf);
		mc_ce_expr(e, s->a, true);
		mc_sb_puts(e->sb, "], ");
		mc_ce_expr(e, s->b, true);
		mc_sb_puts(e->sb, ");\n");
		return;
	}
	const char *fn = store_fn(e->k->bufs[s->buf].dtype);
	mc_sb_printf(e->sb, "b%d[", s->buf);
	mc_ce_expr(e, s->a, true);
	mc_sb_puts(e->sb, "] = ");
	if (fn) {
		mc_sb_printf(e->sb, "%s(", fn);
		mc_ce_expr(e, s->b, true);
		mc_sb_puts(e->sb, ")");
	} else {
		mc_ce_expr(e, s->b, true);
	}
	mc_sb_puts(e->sb, ";\n");
}

void mc_ce_stmt(emitter *e, const mc_kstmt *s, int depth)
{
	const mc_kvar *v = (s->kind == MC_KS_FOR || s->kind == MC_KS_DECL) ? &e->k->vars[s->var] : NULL;
	mc_ce_indent(e, depth);
	switch (s->kind) {
	case MC_KS_FOR:
		mc_sb_printf(e->sb, "for (%s v%d = ", mc_ce_ctype(e, v->type), s->var);
		mc_ce_expr(e, s->a, true);
		mc_sb_printf(e->sb, "; v%d < ", s->var);
		mc_ce_expr(e, s->b, false);
		mc_sb_printf(e->sb, "; v%d++) {\n", s->var);
		mc_ce_block(e, s->body, depth + 1);
		mc_ce_indent(e, depth);
		mc_sb_puts(e->sb, "}\n");
		return;
	case MC_KS_DECL:
		mc_sb_printf(e->sb, "%s%s v%d = ", v->mutable_ ? "" : "const ",
		             v->lanes > 1 ? vtype(e, v) : mc_ce_ctype(e, v->type), s->var);
		mc_ce_expr(e, s->a, true);
		mc_sb_puts(e->sb, ";\n");
		if (e->var_reads[s->var] == 0) { /* keeps -Wunused-variable quiet */
			mc_ce_indent(e, depth);
			mc_sb_printf(e->sb, "(void)v%d;\n", s->var);
		}
		return;
	case MC_KS_ASSIGN:
		mc_sb_printf(e->sb, "v%d = ", s->var);
		mc_ce_expr(e, s->a, true);
		mc_sb_puts(e->sb, ";\n");
		return;
	case MC_KS_STORE:
		put_store(e, s);
		return;
	case MC_KS_IF:
		mc_sb_puts(e->sb, "if (");
		mc_ce_expr(e, s->a, true);
		mc_sb_puts(e->sb, ") {\n");
		mc_ce_block(e, s->body, depth + 1);
		if (s->orelse) {
			mc_ce_indent(e, depth);
			mc_sb_puts(e->sb, "} else {\n");
			mc_ce_block(e, s->orelse, depth + 1);
		}
		mc_ce_indent(e, depth);
		mc_sb_puts(e->sb, "}\n");
		return;
	case MC_KS_BREAK:
		mc_sb_puts(e->sb, "break;\n");
		return;
	case MC_KS_TEMPLATE: {
		/* the cuda target prints its own; DOT2_TILES, S8_PAIRS and GEMV_F32
		 * are the runtime's */
		const mc_ktemplate *t = s->tmpl;
		if (t->kind == MC_TMPL_CONV2D_SPLITK || t->kind == MC_TMPL_GEMM || t->kind == MC_TMPL_ATTENTION || e->cuda) {
			mc_ce_fail(e, "a target template outside its target");
			return;
		}
		if (t->kind == MC_TMPL_GRU_GATES || t->kind == MC_TMPL_LSTM_GATES) {
			/* the runtime's micro-kernel where the core has it, else the body */
			bool lstm = t->kind == MC_TMPL_LSTM_GATES;
			mc_sb_printf(e->sb, "/* %s gates: the runtime's micro-kernel, or this loop */\n#if MODELC_FPU_ASM\n",
			             lstm ? "LSTM" : "GRU");
			mc_ce_indent(e, depth);
			mc_sb_printf(e->sb, "modelc_%s_gates_f32(b%d, ", lstm ? "lstm" : "gru", t->out);
			if (t->y >= 0) {
				mc_sb_printf(e->sb, "b%d + ", t->y);
				mc_ce_expr(e, t->y_at, false);
			} else {
				mc_sb_puts(e->sb, "(float *)0");
			}
			if (lstm)
				mc_sb_printf(e->sb, ", b%d", t->cell);
			mc_sb_printf(e->sb, ", b%d, b%d, b%d, %" PRId64 ");\n#else\n", t->x, t->wt, t->consts, t->kp);
			mc_ce_indent(e, depth);
			mc_sb_printf(e->sb, "(void)b%d;\n", t->consts);
			mc_ce_block(e, s->body, depth);
			mc_sb_puts(e->sb, "#endif\n");
			return;
		}
		if (t->kind == MC_TMPL_GEMV_F32) {
			mc_sb_printf(e->sb, "modelc_gemv8_f32(b%d, b%d, ", t->out, t->wt);
			if (t->bias >= 0)
				mc_sb_printf(e->sb, "b%d, b%d + ", t->bias, t->x);
			else
				mc_sb_printf(e->sb, "(const float *)0, b%d + ", t->x);
			mc_ce_expr(e, t->x_at, false);
			mc_sb_printf(e->sb, ", %" PRId64 ", %" PRId64 ");\n", t->kp, t->tiles);
			return;
		}
		if (t->kind == MC_TMPL_SGEMM) {
			/* --blas openblas: a call a product of the batch */
			bool ta = t->a_st[2] != 1, tb = t->b_st[2] != 1;
			int64_t lda = ta ? t->a_st[2] : t->a_st[1], ldb = tb ? t->b_st[2] : t->b_st[1];
			mc_sb_printf(e->sb, "for (int64_t b = 0; b < %" PRId64 "; b++)\n", t->n);
			mc_ce_indent(e, depth + 1);
			mc_sb_printf(e->sb, "cblas_sgemm(CblasRowMajor, %s, %s, %" PRId64 ", %" PRId64 ", %" PRId64
			             ", %af, b%d + b * %" PRId64 ", %" PRId64 ", b%d + b * %" PRId64 ", %" PRId64
			             ", 0.0f, b%d + b * %" PRId64 ", %" PRId64 ");\n",
			             ta ? "CblasTrans" : "CblasNoTrans", tb ? "CblasTrans" : "CblasNoTrans", t->cout, t->ow,
			             t->cin, (double)(float)t->scale, t->wt, t->a_st[0], lda, t->x, t->b_st[0], ldb, t->out,
			             t->cout * t->ow, t->ow);
			return;
		}
		if (t->kind == MC_TMPL_S8_PAIRS) {
			mc_sb_printf(e->sb, "modelc_s8_pairs(b%d, b%d + ", t->out, t->x);
			mc_ce_expr(e, t->x_at, false);
			mc_sb_printf(e->sb, ", %" PRId64 ");\n", t->kp);
			return;
		}
		mc_sb_printf(e->sb, "modelc_dot2_%" PRId64 "x%" PRId64 "(b%d, b%d + ", t->tm, t->tp, t->out, t->wt);
		mc_ce_expr(e, t->wt_at, false);
		mc_sb_printf(e->sb, ", b%d, %" PRId64 ", %" PRId64 ");\n", t->x, t->kp, t->tiles);
		return;
	}
	case MC_KS_FAIL: {
		const char *name = status_name(s->code);
		char code[32];
		if (!name) {
			snprintf(code, sizeof code, "%d", s->code);
			name = code;
		}
		/* device code cannot return a status: the thread records it in the
		 * status word (st, see targets/cuda) and stops */
		if (e->cuda)
			mc_sb_printf(e->sb, "{\n%*smodelc_cuda_fail(st, %s);\n%*sreturn;\n%*s}\n",
			             depth + 1, "", name, depth + 1, "", depth, "");
		else
			mc_sb_printf(e->sb, "return %s;\n", name);
		return;
	}
	}
	mc_ce_fail(e, "unknown statement kind");
}

void mc_ce_block(emitter *e, const mc_kstmt *s, int depth)
{
	for (; s; s = s->next)
		mc_ce_stmt(e, s, depth);
}

/* ---- kernels ---- */
/* Text safe inside a block comment: no comment terminator or opener
 * (-Wcomment), no trigraph, no backslash (which would join a line to the
 * next), printable ASCII only. */
void mc_ce_comment_text(mc_strbuf *sb, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c == '*' && s[1] == '/') || (c == '/' && s[1] == '*'))
			mc_sb_printf(sb, "%c ", c);
		else if (c == '?' && s[1] == '?')
			mc_sb_puts(sb, "?_");
		else if (c == '\n')
			mc_sb_puts(sb, "\n * ");
		else if (c < 32 || c > 126 || c == '\\')
			mc_sb_puts(sb, "_");
		else
			mc_sb_printf(sb, "%c", c);
	}
}

/* A C string literal of s. */
void mc_ce_c_string(mc_strbuf *sb, const char *s)
{
	mc_sb_puts(sb, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\' || c == '?')
			mc_sb_printf(sb, "\\%c", c);
		else if (c < 32 || c > 126)
			mc_sb_printf(sb, "\\%03o", c);
		else
			mc_sb_printf(sb, "%c", c);
	}
	mc_sb_puts(sb, "\"");
}

void mc_ce_kernel_comment(emitter *e, const mc_kernel *k)
{
	mc_sb_puts(e->sb, "/* ");
	mc_ce_comment_text(e->sb, k->name);
	if (k->comment) {
		mc_sb_puts(e->sb, ": ");
		mc_ce_comment_text(e->sb, k->comment);
	}
	mc_sb_puts(e->sb, " */\n");
}

/* ---- NAME.h ---- */
void mc_ce_io_comment(emitter *e, const char *title, const mc_io_desc *d, int n)
{
	char shape[256];
	mc_sb_printf(e->sb, " * %s:\n", title);
	for (int i = 0; i < n; i++) {
		mc_sb_printf(e->sb, " *   %d: \"", i);
		mc_ce_comment_text(e->sb, d[i].name ? d[i].name : "");
		mc_sb_printf(e->sb, "\" %s %s", mc_dtype_name(d[i].dtype),
		             mc_shape_str(&d[i].shape, shape, sizeof shape));
		if (d[i].scale > 0)
			mc_sb_printf(e->sb, ", quantized: real = (q - %" PRId64 ") * %.9g", d[i].zero_point,
			             d[i].scale);
		mc_sb_puts(e->sb, "\n");
	}
	if (n == 0)
		mc_sb_puts(e->sb, " *   (none)\n");
}

void mc_ce_io_macros(emitter *e, const char *kind, const mc_io_desc *d, int n)
{
	for (int i = 0; i < n; i++) {
		const char *dc = mc_ce_dtype_const(d[i].dtype);
		size_t numel = mc_ce_io_numel(&d[i]);
		mc_sb_printf(e->sb, "#define %s_%s_%d_NAME ", e->upper, kind, i);
		mc_ce_c_string(e->sb, d[i].name ? d[i].name : "");
		mc_sb_printf(e->sb, "\n#define %s_%s_%d_DTYPE %s\n", e->upper, kind, i, dc ? dc : "0");
		mc_sb_printf(e->sb, "#define %s_%s_%d_RANK %d\n", e->upper, kind, i, d[i].shape.rank);
		if (d[i].shape.rank > 0) { /* an initializer: int64_t dims[] = NAME_INPUT_0_SHAPE; */
			mc_sb_printf(e->sb, "#define %s_%s_%d_SHAPE {", e->upper, kind, i);
			for (int j = 0; j < d[i].shape.rank; j++)
				mc_sb_printf(e->sb, j ? ", %" PRId64 : "%" PRId64, d[i].shape.dims[j]);
			mc_sb_puts(e->sb, "}\n");
		}
		mc_sb_printf(e->sb, "#define %s_%s_%d_NUMEL %zuu\n", e->upper, kind, i, numel);
		mc_sb_printf(e->sb, "#define %s_%s_%d_BYTES %zuu\n", e->upper, kind, i, mc_ce_io_bytes(&d[i]));
		const mc_loc *at = e->p->io_in_arena ? (kind[0] == 'I' ? e->p->input_at : e->p->output_at) : NULL;
		if (at) {
			mc_sb_printf(e->sb, "#define %s_%s_%d_OFFSET %zuu\n", e->upper, kind, i,
			             mc_program_arena_offset(e->p, &at[i]));
			mc_sb_printf(e->sb, "#define %s_%s_%d_AT(arena) ((void *)((unsigned char *)(arena) + "
			                    "%s_%s_%d_OFFSET))\n", e->upper, kind, i, e->upper, kind, i);
			if (e->p->n_pools > 1) {
				mc_sb_printf(e->sb, "#define %s_%s_%d_POOL %d\n", e->upper, kind, i, at[i].index);
				mc_sb_printf(e->sb, "#define %s_%s_%d_POOL_OFFSET %zuu\n", e->upper, kind, i, at[i].offset);
			}
		}
		if (d[i].scale > 0) { /* --quantized-io: real = (q - ZERO_POINT) * SCALE */
			mc_sb_printf(e->sb, "#define %s_%s_%d_SCALE %.9gf\n", e->upper, kind, i, d[i].scale);
			mc_sb_printf(e->sb, "#define %s_%s_%d_ZERO_POINT %" PRId64 "\n", e->upper, kind, i,
			             d[i].zero_point);
		}
	}
}

/* NAME_run's comment in NAME.h: each takes the upper-case name six times */
static const char run_doc[] =
	"\n/* Runs the model once.\n"
	" *   arena:   %s_ARENA_BYTES bytes aligned to %s_ARENA_ALIGN, owned by the\n"
	" *            caller (static, stack or heap); its content on entry does not\n"
	" *            matter and is garbage on return. May be NULL if %s_ARENA_BYTES\n"
	" *            is 0.\n"
	" *   inputs:  %s_NUM_INPUTS pointers; inputs[i] points to input i's elements,\n"
	" *            dense and row-major, aligned to their element's size (float: 4\n"
	" *            bytes; int8: any address); outputs[i] likewise.\n"
	" *   outputs: %s_NUM_OUTPUTS pointers to caller buffers of %s_OUTPUT_<i>_BYTES\n"
	" *            bytes each, which the run fills. The arena, the inputs and the\n"
	" *            outputs must not overlap (outputs not each other either).\n"
	" * Returns MODELC_OK (0), or MODELC_ERR_NULL_ARGUMENT (a NULL pointer),\n"
	" * MODELC_ERR_MISALIGNED (the arena, an input or an output off its alignment;\n"
	" * nothing is read or written), MODELC_ERR_BAD_INDEX or MODELC_ERR_BAD_INPUT\n"
	" * (invalid input data; outputs are then unspecified). Never aborts.\n"
	" * Reentrant: no global mutable state, no heap, no I/O; concurrent runs need\n"
	" * their own arenas and outputs. */\n";
static const char run_doc_io_in_arena[] =
	"\n/* Runs the model once (--io-in-arena).\n"
	" *   arena:   %s_ARENA_BYTES bytes aligned to %s_ARENA_ALIGN, owned by the\n"
	" *            caller; it holds the inputs and outputs too: input i at\n"
	" *            %s_INPUT_<i>_AT(arena), output i at %s_OUTPUT_<i>_AT(arena).\n"
	" *            The rest of it is garbage on return, the inputs included (their\n"
	" *            bytes are reused once read).\n"
	" *   inputs:  NULL, or %s_NUM_INPUTS pointers: a non-NULL inputs[i] other than\n"
	" *            input i's place is copied there first (any alignment).\n"
	" *   outputs: NULL, or %s_NUM_OUTPUTS pointers: output i is copied to a non-NULL\n"
	" *            outputs[i] other than its place (any alignment). Copies must not\n"
	" *            overlap the arena, nor each other.\n"
	" * Returns MODELC_OK (0), or MODELC_ERR_NULL_ARGUMENT (a NULL arena),\n"
	" * MODELC_ERR_MISALIGNED (the arena off its alignment; nothing is read or\n"
	" * written), MODELC_ERR_BAD_INDEX or MODELC_ERR_BAD_INPUT (invalid input data;\n"
	" * outputs are then unspecified). Never aborts. Reentrant: no global mutable\n"
	" * state, no heap, no I/O; concurrent runs need their own arenas. */\n";

/* --dim NAME=LO..HI (aot/dynamic.c): the dimension, its bounds, the
 * shape functions and NAME_run_dims. */
static void put_dyn_header(emitter *e)
{
	const mc_dynamic *dyn = e->p->dyn;
	mc_strbuf *sb = e->sb;
	mc_sb_printf(sb, "\n/* The dynamic dimension (--dim %s=%lld..%lld): every size in [MIN, MAX]\n"
	                 " * runs, each with the code compiled for that size. The SHAPE, NUMEL and\n"
	                 " * BYTES above are at MAX, what the caller's buffers must hold; the\n"
	                 " * shapes at a size are %s_input_shape's and %s_output_shape's. */\n",
	             dyn->name, (long long)dyn->lo, (long long)dyn->hi, e->name, e->name);
	mc_sb_printf(sb, "#define %s_NUM_DIMS 1\n#define %s_DIM_0_NAME ", e->upper, e->upper);
	mc_ce_c_string(sb, dyn->name);
	mc_sb_printf(sb, "\n#define %s_DIM_0_MIN %lld\n#define %s_DIM_0_MAX %lld\n\n", e->upper, (long long)dyn->lo,
	             e->upper, (long long)dyn->hi);
	mc_sb_printf(sb, "/* Input or output i's shape (its rank's dims) when the dims are\n"
	                 " * dims[%s_NUM_DIMS]: MODELC_OK, MODELC_ERR_BAD_DIM (a size outside its\n"
	                 " * bounds), MODELC_ERR_NULL_ARGUMENT or MODELC_ERR_BAD_INDEX (no such i). */\n"
	                 "int %s_input_shape(int i, const int64_t dims[], int64_t shape[]);\n"
	                 "int %s_output_shape(int i, const int64_t dims[], int64_t shape[]);\n",
	             e->upper, e->name, e->name);
	mc_sb_printf(sb, "\n/* Runs the model once at the sizes dims[%s_NUM_DIMS].\n"
	                 " *   arena:   %s_ARENA_BYTES bytes aligned to %s_ARENA_ALIGN (the\n"
	                 " *            largest size's), owned by the caller; garbage on return.\n"
	                 " *   inputs:  %s_NUM_INPUTS pointers to input i's elements at these sizes\n"
	                 " *            (%s_input_shape), dense and row-major, aligned to their\n"
	                 " *            element's size; outputs[i] likewise (%s_output_shape),\n"
	                 " *            which the run fills. Nothing may overlap.\n"
	                 " * Returns MODELC_OK (0), or MODELC_ERR_BAD_DIM (dims NULL or a size\n"
	                 " * outside [%s_DIM_<k>_MIN, %s_DIM_<k>_MAX]; nothing is read or written),\n"
	                 " * MODELC_ERR_NULL_ARGUMENT, MODELC_ERR_MISALIGNED (nothing is read or\n"
	                 " * written), MODELC_ERR_BAD_INDEX or MODELC_ERR_BAD_INPUT (invalid input\n"
	                 " * data; outputs are then unspecified). Never aborts. Reentrant: no global\n"
	                 " * mutable state, no heap, no I/O. */\n"
	                 "int %s_run_dims(void *arena, const void *const inputs[], void *const outputs[],\n"
	                 "                const int64_t dims[]);\n\n",
	             e->upper, e->upper, e->upper, e->upper, e->name, e->name, e->upper, e->upper, e->name);
}

/* Outputs whose extent depends on the data (NonMaxSuppression...): which
 * axis, and NAME_run_counted, which says how much of it each run filled. */
static void put_counted_header(emitter *e)
{
	const mc_program *p = e->p;
	mc_strbuf *sb = e->sb;
	mc_sb_puts(sb, "\n/* Outputs whose extent on one axis depends on the data (the count of a\n"
	               " * NonMaxSuppression, ...): their SHAPE above is the bound, and after a run\n"
	               " * only the first counts[i] entries of axis COUNTED_AXIS are the result\n"
	               " * (the rest is padding); the other outputs have no COUNTED_AXIS. */\n");
	for (int i = 0; i < p->n_outputs; i++)
		if (p->outputs[i].counted)
			mc_sb_printf(sb, "#define %s_OUTPUT_%d_COUNTED_AXIS %d\n", e->upper, i, p->outputs[i].count_axis);
	mc_sb_printf(sb, "/* The same for every output, as an initializer list (-1: not counted). */\n"
	                 "#define %s_OUTPUT_COUNTED_AXES {", e->upper);
	for (int i = 0; i < p->n_outputs; i++)
		mc_sb_printf(sb, "%s%d", i ? ", " : "", p->outputs[i].counted ? p->outputs[i].count_axis : -1);
	mc_sb_puts(sb, "}\n");
	mc_sb_printf(sb, "\n/* Runs the model once.\n"
	                 " *   arena:   %s_ARENA_BYTES bytes aligned to %s_ARENA_ALIGN, owned by the\n"
	                 " *            caller; garbage on return.\n"
	                 " *   inputs:  %s_NUM_INPUTS pointers to input i's %s_INPUT_<i>_BYTES,\n"
	                 " *            aligned to their element's size; outputs likewise, at their\n"
	                 " *            bound (%s_OUTPUT_<i>_BYTES). Nothing may overlap.\n"
	                 " *   counts:  %s_NUM_OUTPUTS entries: counts[i] is how many entries of\n"
	                 " *            output i's COUNTED_AXIS the run filled, -1 for an output\n"
	                 " *            without one.\n"
	                 " * Returns MODELC_OK (0), MODELC_ERR_NULL_ARGUMENT, MODELC_ERR_MISALIGNED\n"
	                 " * (nothing is read or written), MODELC_ERR_BAD_INDEX or MODELC_ERR_BAD_INPUT\n"
	                 " * (invalid input data; outputs and counts are then unspecified). Never\n"
	                 " * aborts. Reentrant: no global mutable state, no heap, no I/O. */\n"
	                 "int %s_run_counted(void *arena, const void *const inputs[], void *const outputs[],\n"
	                 "                   int64_t counts[]);\n\n",
	             e->upper, e->upper, e->upper, e->upper, e->upper, e->upper, e->name);
}

void mc_ce_header(emitter *e)
{
	const mc_program *p = e->p;
	mc_strbuf *sb = e->sb;
	mc_sb_printf(sb, "/* %s.h: generated by modelc " MC_VERSION "; do not edit.\n", e->name);
	mc_ce_io_comment(e, "Inputs (row-major, in the model's own layout)", p->inputs, p->n_inputs);
	mc_ce_io_comment(e, "Outputs", p->outputs, p->n_outputs);
	mc_sb_puts(sb, " */\n");
	mc_sb_printf(sb, "#ifndef %s_MODELC_H\n#define %s_MODELC_H\n\n#include \"modelc_rt.h\"\n\n", e->upper, e->upper);
	mc_sb_puts(sb, "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n");
	mc_sb_puts(sb, "/* Scratch memory the caller passes to the run function. */\n");
	mc_sb_printf(sb, "#define %s_ARENA_BYTES %zuu\n", e->upper, p->arena_bytes);
	mc_sb_printf(sb, "#define %s_ARENA_ALIGN %zuu\n", e->upper, mc_ce_arena_align(p));
	if (p->n_pools > 1) {
		mc_sb_printf(sb, "/* The arena's pools (%s_run_pools): name, bytes, place in the one arena. */\n",
		             e->name);
		mc_sb_printf(sb, "#define %s_NUM_POOLS %d\n", e->upper, p->n_pools);
		for (int k = 0; k < p->n_pools; k++) {
			mc_sb_printf(sb, "#define %s_POOL_%d_NAME \"%s\"\n", e->upper, k, p->pool_names[k]);
			mc_sb_printf(sb, "#define %s_POOL_%d_BYTES %zuu\n", e->upper, k, p->pool_bytes[k]);
			mc_sb_printf(sb, "#define %s_POOL_%d_AT %zuu\n", e->upper, k, p->pool_at[k]);
			mc_sb_printf(sb, "#define %s_POOL_%s %d\n", e->upper, p->pool_names[k], k);
		}
	}
	mc_sb_printf(sb, "#define %s_NUM_INPUTS %d\n", e->upper, p->n_inputs);
	mc_sb_printf(sb, "#define %s_NUM_OUTPUTS %d\n\n", e->upper, p->n_outputs);
	mc_sb_puts(sb, "/* Per input and output: name, element type (MODELC_*), rank, shape\n"
	               " * (an initializer list; absent for scalars), elements, bytes");
	if (p->io_in_arena)
		mc_sb_puts(sb, ";\n * --io-in-arena: its place in the arena (OFFSET: the byte in the one\n"
		               " * arena; AT(arena): its address there; with pools, POOL and the byte\n"
		               " * in it, POOL_OFFSET)");
	mc_sb_puts(sb, ". */\n");
	if (p->io_in_arena)
		mc_sb_printf(sb, "#define %s_IO_IN_ARENA 1\n", e->upper);
	mc_ce_io_macros(e, "INPUT", p->inputs, p->n_inputs);
	mc_ce_io_macros(e, "OUTPUT", p->outputs, p->n_outputs);
	mc_sb_puts(sb, "\n/* Names, types and shapes, as tables. */\n");
	if (p->n_inputs > 0)
		mc_sb_printf(sb, "extern const modelc_tensor_desc %s_inputs[%s_NUM_INPUTS];\n", e->name, e->upper);
	if (p->n_outputs > 0)
		mc_sb_printf(sb, "extern const modelc_tensor_desc %s_outputs[%s_NUM_OUTPUTS];\n", e->name, e->upper);
	if (p->dyn) {
		put_dyn_header(e);
	} else if (mc_program_counted(p)) {
		put_counted_header(e);
	} else {
		mc_sb_printf(sb, p->io_in_arena ? run_doc_io_in_arena : run_doc, e->upper, e->upper, e->upper,
		             e->upper, e->upper, e->upper);
		mc_sb_printf(sb, "int %s_run(void *arena, const void *const inputs[], void *const outputs[]);\n\n",
		             e->name);
	}
	if (p->threads > 1 && mc_program_counted(p))
		mc_sb_printf(sb,
			"/* The same with the model's parallel loops handed to threads->parallel_for\n"
			" * (modelc_rt.h; NULL: one thread). The outputs and counts are bit-identical\n"
			" * to %s_run_counted's however the hook splits and orders the work. */\n"
			"int %s_run_counted_threads(void *arena, const void *const inputs[], void *const outputs[],\n"
			"                           int64_t counts[], const modelc_threads *threads);\n\n", e->name, e->name);
	else if (p->threads > 1)
		mc_sb_printf(sb,
			"/* The same with the model's parallel loops handed to threads->parallel_for\n"
			" * (modelc_rt.h; NULL: one thread). The outputs are bit-identical to\n"
			" * %s_run's however the hook splits and orders the work. */\n"
			"int %s_run_threads(void *arena, const void *const inputs[], void *const outputs[],\n"
			"                   const modelc_threads *threads);\n\n", e->name, e->name);
	if (p->n_pools > 1) {
		mc_sb_printf(sb,
			"/* The same with the arena as %s_NUM_POOLS pools, each in memory of the\n"
			" * caller's choosing (--pool; the first ones hold the buffers the most\n"
			" * kernels touch): pools[k] points to %s_POOL_<k>_BYTES bytes aligned to\n"
			" * %s_ARENA_ALIGN (NULL where 0). %s_run takes them as one arena holding\n"
			" * pool k at byte %s_POOL_<k>_AT. */\n",
			e->upper, e->upper, e->upper, e->name, e->upper);
		mc_sb_printf(sb, "int %s_run_pools(void *const pools[], const void *const inputs[], "
		                 "void *const outputs[]);\n\n", e->name);
	}
	mc_sb_puts(sb, "#ifdef __cplusplus\n}\n#endif\n\n");
	mc_sb_printf(sb, "#endif /* %s_MODELC_H */\n", e->upper);
}

/* ---- NAME.c ---- */
void mc_ce_desc_table(emitter *e, const char *kind, const char *table, const mc_io_desc *d, int n)
{
	if (n == 0)
		return;
	for (int i = 0; i < n; i++) {
		if (d[i].shape.rank == 0)
			continue;
		mc_sb_printf(e->sb, "static const int64_t %s_%s%d_dims[%d] = {", e->name, kind, i, d[i].shape.rank);
		for (int j = 0; j < d[i].shape.rank; j++)
			mc_sb_printf(e->sb, j ? ", %" PRId64 : "%" PRId64, d[i].shape.dims[j]);
		mc_sb_puts(e->sb, "};\n");
	}
	mc_sb_printf(e->sb, "const modelc_tensor_desc %s_%s[%d] = {\n", e->name, table, n);
	for (int i = 0; i < n; i++) {
		const char *dc = mc_ce_dtype_const(d[i].dtype);
		mc_sb_puts(e->sb, "\t{");
		mc_ce_c_string(e->sb, d[i].name ? d[i].name : "");
		mc_sb_printf(e->sb, ", %s, %d, ", dc ? dc : "0", d[i].shape.rank);
		if (d[i].shape.rank == 0)
			mc_sb_puts(e->sb, "NULL},\n");
		else
			mc_sb_printf(e->sb, "%s_%s%d_dims},\n", e->name, kind, i);
	}
	mc_sb_puts(e->sb, "};\n\n");
}

/* runtime-min's i32 vector helpers, embedded at build time. */
extern const char mc_ivec_x86_h[], mc_ivec_neon_h[];

static bool expr_has_ivec(const mc_kexpr *x)
{
	if (!x)
		return false;
	if (x->lanes > 1 && x->type == MC_KT_I32)
		return true;
	return expr_has_ivec(x->a) || expr_has_ivec(x->b) || expr_has_ivec(x->c);
}

static bool block_has_ivec(const mc_kstmt *s)
{
	for (; s; s = s->next)
		if (expr_has_ivec(s->a) || expr_has_ivec(s->b) || expr_has_ivec(s->c) ||
		    block_has_ivec(s->body) || block_has_ivec(s->orelse))
			return true;
	return false;
}

/* Whether some kernel computes on i32 vectors (integer kernels). */
static bool program_has_ivec(const mc_program *p)
{
	for (int i = 0; i < p->n_kernels; i++)
		if (block_has_ivec(p->kernels[i]->body))
			return true;
	return false;
}

/* What vector code needs: the ISA check, its intrinsics header and the
 * lane extraction helpers (memory round trips compilers turn into shuffles),
 * and where integer kernels use them, the i32 vector helpers. */
void mc_ce_vector_prelude(emitter *e)
{
	const mc_isa *isa = e->p->target.isa;
	if (!isa || isa->max_lanes <= 1)
		return;
	mc_strbuf *sb = e->sb;
	static const struct {
		mc_isa_kind kind;
		const char *cond, *flags, *header;
	} checks[] = {
		{ MC_ISA_AVX512, "!defined(__AVX512F__) || !defined(__AVX512VL__)", "-mavx512f -mavx512vl -mfma",
		  "immintrin.h" },
		{ MC_ISA_AVX2, "!defined(__AVX2__) || !defined(__FMA__)", "-mavx2 -mfma", "immintrin.h" },
		{ MC_ISA_NEON, "!defined(__ARM_NEON) || !defined(__aarch64__)", "an AArch64 compiler",
		  "arm_neon.h" },
	};
	for (size_t i = 0; i < sizeof checks / sizeof *checks; i++) {
		if (checks[i].kind != isa->kind)
			continue;
		mc_sb_printf(sb, "/* Generated with --isa %s. */\n#if %s\n", isa->name, checks[i].cond);
		mc_sb_printf(sb, "#error \"%s.c was generated with --isa %s: build it with %s "
		                 "(or -march=native on such a machine)\"\n#endif\n",
		             e->name, isa->name, checks[i].flags);
		mc_sb_printf(sb, "#include <%s>\n\n", checks[i].header);
	}
	for (int lanes = 4; lanes <= isa->max_lanes; lanes *= 2) {
		vec_names n;
		if (!vec_names_of(e, lanes, &n))
			continue;
		/* unused ones must not warn (clang -Wunused-function) */
		mc_sb_printf(sb, "__attribute__((unused)) static inline float modelc_lane%d(%s v, int i)\n"
		                 "{\n\tfloat t[%d];\n",
		             lanes, n.type, lanes);
		if (is_neon(e))
			mc_sb_puts(sb, "\tvst1q_f32(t, v);\n");
		else
			mc_sb_printf(sb, "\t%sstoreu_ps(t, v);\n", n.pre);
		mc_sb_puts(sb, "\treturn t[i];\n}\n\n");
	}
	if (program_has_ivec(e->p)) {
		mc_sb_puts(sb, is_neon(e) ? mc_ivec_neon_h : mc_ivec_x86_h);
		mc_sb_puts(sb, "\n");
	}
}

/* The extern declarations of the weights NAME_weights.c defines, after
 * `open` (a format taking the model name) and before `close`; nothing
 * without weights. */
void mc_ce_weight_decls(emitter *e, const char *open, const char *close)
{
	bool any = false;
	for (int i = 0; i < e->p->n_weights; i++) {
		const mc_tensor *t = e->p->weights[i].t;
		if (t->numel == 0 || !mc_ce_storage_type(t->dtype))
			continue;
		if (!any)
			mc_sb_printf(e->sb, open, e->name);
		any = true;
		mc_sb_printf(e->sb, "extern const %s %s_w%d[%zu];\n", mc_ce_storage_type(t->dtype), e->name, i,
		             t->numel);
	}
	if (any)
		mc_sb_puts(e->sb, close);
}

/* ---- NAME_weights.c ---- */
static void put_weight_value(mc_strbuf *sb, const mc_tensor *t, size_t i)
{
	const void *d = t->data;
	switch (t->dtype) {
	case MC_FLOAT: {
		float v = ((const float *)d)[i];
		if (v == 0 && !signbit(v))
			mc_sb_puts(sb, "0");
		else
			put_float(sb, v, true, false);
		return;
	}
	case MC_DOUBLE: {
		double v = ((const double *)d)[i];
		if (v == 0 && !signbit(v))
			mc_sb_puts(sb, "0");
		else
			put_float(sb, v, false, false);
		return;
	}
	case MC_FLOAT16: case MC_BFLOAT16:
		mc_sb_printf(sb, "0x%04x", ((const uint16_t *)d)[i]);
		return;
	case MC_INT8: case MC_INT4: case MC_INT2:
		mc_sb_printf(sb, "%d", ((const int8_t *)d)[i]);
		return;
	case MC_INT16:
		mc_sb_printf(sb, "%d", ((const int16_t *)d)[i]);
		return;
	case MC_INT32: {
		int32_t v = ((const int32_t *)d)[i];
		if (v == INT32_MIN)
			mc_sb_puts(sb, "INT32_MIN");
		else
			mc_sb_printf(sb, "%" PRId32, v);
		return;
	}
	case MC_INT64: {
		int64_t v = ((const int64_t *)d)[i];
		if (v == INT64_MIN)
			mc_sb_puts(sb, "INT64_MIN");
		else if (v > INT32_MAX || v < -INT32_MAX)
			mc_sb_printf(sb, "INT64_C(%" PRId64 ")", v);
		else
			mc_sb_printf(sb, "%" PRId64, v);
		return;
	}
	case MC_UINT16:
		mc_sb_printf(sb, "%u", ((const uint16_t *)d)[i]);
		return;
	case MC_UINT32:
		mc_sb_printf(sb, "%" PRIu32 "u", ((const uint32_t *)d)[i]);
		return;
	case MC_UINT64:
		mc_sb_printf(sb, "UINT64_C(%" PRIu64 ")", ((const uint64_t *)d)[i]);
		return;
	case MC_BOOL:
		mc_sb_printf(sb, "%d", ((const uint8_t *)d)[i] != 0);
		return;
	case MC_UINT8: case MC_UINT4: case MC_UINT2:
		mc_sb_printf(sb, "%u", ((const uint8_t *)d)[i]);
		return;
	default: /* small floats: their bit codes */
		mc_sb_printf(sb, "0x%02x", ((const uint8_t *)d)[i]);
		return;
	}
}

int mc_ce_weights(emitter *e)
{
	const mc_program *p = e->p;
	mc_strbuf *sb = e->sb;
	mc_sb_printf(sb, "/* %s_weights.c: generated by modelc " MC_VERSION "; do not edit.\n"
	                 " * The model's frozen constants, const so that they stay in flash. */\n",
	             e->name);
	if (e->cuda) /* built by the host compiler, without CUDA's headers */
		mc_sb_puts(sb, "#include \"modelc_rt.h\"\n");
	else
		mc_sb_printf(sb, "#include \"%s.h\"\n", e->name);
	for (int i = 0; i < p->n_weights; i++) {
		const mc_tensor *t = p->weights[i].t;
		const char *st = mc_ce_storage_type(t->dtype);
		if (!st) {
			mc_error("%s: constant %d has dtype %s, which has no C storage", e->target, i,
			         mc_dtype_name(t->dtype));
			return -1;
		}
		if (t->numel == 0)
			continue;
		size_t align = mc_ce_weight_align(&p->weights[i]);
		mc_sb_printf(sb, "\n/* %s", mc_dtype_name(t->dtype));
		char shape[256];
		mc_sb_printf(sb, " %s */\n", mc_shape_str(&t->shape, shape, sizeof shape));
		if (p->weights_section[0])
			mc_sb_printf(sb, "__attribute__((section(\"%s\"))) ", p->weights_section);
		mc_sb_printf(sb, "const %s %s_w%d[%zu] MODELC_ALIGN(%zu) = {", st, e->name, i, t->numel, align);
		int per_line = t->dtype == MC_FLOAT || t->dtype == MC_DOUBLE ? 6 : 12;
		for (size_t j = 0; j < t->numel; j++) {
			mc_sb_puts(sb, j % (size_t)per_line ? " " : "\n\t");
			put_weight_value(sb, t, j);
			mc_sb_puts(sb, ",");
		}
		mc_sb_puts(sb, "\n};\n");
	}
	return 0;
}
