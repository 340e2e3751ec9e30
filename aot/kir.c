/* The kernel IR: pool, builder and dump. Builders fold constant index
 * arithmetic so the emitted code reads like hand-written loops. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kir.h"
#include "kmath.h"

/* ---- pool ---- */
typedef struct chunk {
	struct chunk *next;
	size_t used, cap;
	max_align_t data[];
} chunk;

struct mc_kpool {
	chunk *head;
};

mc_kpool *mc_kpool_new(void)
{
	return mc_xcalloc(1, sizeof(mc_kpool));
}

void mc_kpool_free(mc_kpool *p)
{
	if (!p)
		return;
	for (chunk *c = p->head, *next; c; c = next) {
		next = c->next;
		free(c);
	}
	free(p);
}

void *mc_kpool_alloc(mc_kpool *p, size_t n)
{
	n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
	if (!p->head || p->head->cap - p->head->used < n) {
		size_t cap = n > 65536 ? n : 65536;
		chunk *c = mc_xmalloc(sizeof(chunk) + cap);
		c->next = p->head;
		c->used = 0;
		c->cap = cap;
		p->head = c;
	}
	void *r = (char *)p->head->data + p->head->used;
	p->head->used += n;
	memset(r, 0, n);
	return r;
}

char *mc_kpool_strdup(mc_kpool *p, const char *s)
{
	size_t n = strlen(s) + 1;
	char *r = mc_kpool_alloc(p, n);
	memcpy(r, s, n);
	return r;
}

/* ---- types ---- */
mc_ktype mc_ktype_of(mc_dtype t)
{
	switch (t) {
	case MC_BOOL: return MC_KT_BOOL;
	case MC_INT8: case MC_INT4: case MC_INT2: return MC_KT_I8;
	case MC_UINT8: case MC_UINT4: case MC_UINT2: return MC_KT_U8;
	case MC_INT16: return MC_KT_I16;
	case MC_UINT16: return MC_KT_U16;
	case MC_INT32: return MC_KT_I32;
	case MC_UINT32: return MC_KT_U32;
	case MC_INT64: return MC_KT_I64;
	case MC_UINT64: return MC_KT_U64;
	case MC_DOUBLE: return MC_KT_F64;
	default:
		return mc_dtype_is_float(t) ? MC_KT_F32 : MC_KT_VOID;
	}
}

bool mc_ktype_is_float(mc_ktype t)
{
	return t == MC_KT_F32 || t == MC_KT_F64;
}

bool mc_ktype_is_signed(mc_ktype t)
{
	switch (t) {
	case MC_KT_I8: case MC_KT_I16: case MC_KT_I32: case MC_KT_I64:
	case MC_KT_F32: case MC_KT_F64: case MC_KT_INDEX:
		return true;
	default:
		return false;
	}
}

const char *mc_ktype_name(mc_ktype t)
{
	static const char *const names[] = {
		[MC_KT_VOID] = "void", [MC_KT_BOOL] = "bool", [MC_KT_I8] = "i8", [MC_KT_U8] = "u8",
		[MC_KT_I16] = "i16", [MC_KT_U16] = "u16", [MC_KT_I32] = "i32", [MC_KT_U32] = "u32",
		[MC_KT_I64] = "i64", [MC_KT_U64] = "u64", [MC_KT_F32] = "f32", [MC_KT_F64] = "f64",
		[MC_KT_INDEX] = "idx",
	};
	return (unsigned)t < sizeof names / sizeof *names ? names[t] : "?";
}

/* ---- builder ---- */
void mc_kb_begin(mc_kb *kb, mc_kpool *pool, mc_kernel *k)
{
	memset(kb, 0, sizeof *kb);
	kb->pool = pool;
	kb->k = k;
	kb->tail[0] = &k->body;
	kb->isa = mc_isa_find("generic");
	kb->target = &mc_target_c;
	while (*kb->tail[0])
		kb->tail[0] = &(*kb->tail[0])->next;
}

void *mc_grow_array(void *arr, int *cap, int need, size_t elt)
{
	if (need <= *cap)
		return arr;
	int n = *cap ? *cap * 2 : 8;
	while (n < need)
		n *= 2;
	void *r = realloc(arr, (size_t)n * elt);
	if (!r) {
		mc_error("out of memory");
		abort();
	}
	memset((char *)r + (size_t)*cap * elt, 0, (size_t)(n - *cap) * elt);
	*cap = n;
	return r;
}

int mc_kb_buf(mc_kb *kb, int value, mc_dtype dtype, size_t count, bool written)
{
	mc_kernel *k = kb->k;
	for (int i = 0; i < k->n_bufs; i++)
		if (value >= 0 && k->bufs[i].value == value) {
			k->bufs[i].written |= written;
			return i;
		}
	k->bufs = mc_grow_array(k->bufs, &k->cap_bufs, k->n_bufs + 1, sizeof *k->bufs);
	mc_kbuf *b = &k->bufs[k->n_bufs];
	b->value = value;
	b->dtype = dtype;
	b->count = count;
	b->written = written;
	b->grows_over = -1;
	return k->n_bufs++;
}

int mc_kb_scratch(mc_kb *kb, mc_dtype dtype, size_t count)
{
	return mc_kb_buf(kb, -1, dtype, count, true);
}

int mc_kb_scratch_over(mc_kb *kb, mc_dtype dtype, size_t count, int over)
{
	int b = mc_kb_scratch(kb, dtype, count);
	kb->k->bufs[b].grows_over = over;
	return b;
}

int mc_kb_transient(mc_kb *kb, mc_dtype dtype, size_t count)
{
	int b = mc_kb_scratch(kb, dtype, count);
	kb->k->bufs[b].transient = true;
	return b;
}

int mc_kb_packed(mc_kb *kb, mc_tensor *t)
{
	int b = mc_kb_buf(kb, -1, t->dtype, mc_numel(&t->shape), false);
	kb->k->bufs[b].packed = t;
	/* not scratch: the program turns it into a weight */
	kb->k->bufs[b].loc = (mc_loc){ .kind = MC_LOC_WEIGHT, .index = -1 };
	return b;
}

/* Misuse of vectors is a bug in a lowering, not in the model: reported
 * (which fails the compile: the program builder counts errors) rather than
 * aborting; the builder goes on with a well-formed tree nobody prints. */
static void vector_bug(const char *what)
{
	mc_error("internal: kernel IR: %s", what);
}

static int new_var(mc_kb *kb, mc_ktype t, bool mutable_, bool is_loop)
{
	mc_kernel *k = kb->k;
	k->vars = mc_grow_array(k->vars, &k->cap_vars, k->n_vars + 1, sizeof *k->vars);
	k->vars[k->n_vars] = (mc_kvar){ .type = t, .mutable_ = mutable_, .is_loop = is_loop };
	return k->n_vars++;
}

static mc_kexpr *expr(mc_kb *kb, mc_kexpr_kind kind, mc_ktype t)
{
	mc_kexpr *e = mc_kpool_alloc(kb->pool, sizeof *e);
	e->kind = kind;
	e->type = t;
	return e;
}

int mc_k_lanes(const mc_kexpr *e)
{
	return e->lanes > 1 ? e->lanes : 1;
}

mc_kexpr *mc_k_splat(mc_kb *kb, mc_kexpr *scalar, int lanes)
{
	if (lanes <= 1)
		return scalar;
	if (mc_k_lanes(scalar) != 1)
		vector_bug("splat of a vector");
	/* i32 stays i32 (integer vectors); anything else becomes f32 */
	mc_ktype elt = scalar->type == MC_KT_I32 ? MC_KT_I32 : MC_KT_F32;
	mc_kexpr *e = expr(kb, MC_KE_SPLAT, elt);
	e->a = mc_k_cast(kb, elt, scalar);
	e->lanes = lanes;
	return e;
}

mc_kexpr *mc_k_bits(mc_kb *kb, mc_ktype t, mc_kexpr *a)
{
	if (!((t == MC_KT_F32 && a->type == MC_KT_I32) || (t == MC_KT_I32 && a->type == MC_KT_F32)))
		vector_bug("bits of other than f32 as i32 or i32 as f32");
	mc_kexpr *e = expr(kb, MC_KE_BITS, t);
	e->a = a;
	e->lanes = a->lanes;
	return e;
}

mc_kexpr *mc_k_splits(mc_kb *kb, int out)
{
	mc_kexpr *e = expr(kb, MC_KE_SPLITS, MC_KT_INDEX);
	e->buf = out;
	return e;
}

mc_kexpr *mc_k_lane(mc_kb *kb, mc_kexpr *vec, int lane)
{
	if (mc_k_lanes(vec) == 1)
		return vec;
	if (lane < 0 || lane >= vec->lanes)
		vector_bug("lane out of range");
	if (vec->kind == MC_KE_SPLAT)
		return vec->a;
	mc_kexpr *e = expr(kb, MC_KE_LANE, vec->type);
	e->a = vec;
	e->i = lane;
	return e;
}

mc_kexpr *mc_k_vload(mc_kb *kb, int buf, mc_kexpr *index, int lanes)
{
	mc_kexpr *e = mc_k_load(kb, buf, index);
	if (lanes > 1) {
		mc_dtype dt = kb->k->bufs[buf].dtype;
		if (dt != MC_FLOAT && !mc_k_int_vector_dtype(dt))
			vector_bug("vector load from a buffer that is not float32, int32 or 8-bit");
		if (dt != MC_FLOAT)
			e->type = MC_KT_I32; /* widened lane by lane */
		e->lanes = lanes;
	}
	return e;
}

mc_kexpr *mc_k_vload2(mc_kb *kb, int buf, mc_kexpr *index, int lanes)
{
	mc_dtype dt = kb->k->bufs[buf].dtype;
	if (lanes < 2 || (dt != MC_INT8 && dt != MC_UINT8))
		vector_bug("a stride-2 load is a vector from an 8-bit buffer");
	mc_kexpr *e = mc_k_vload(kb, buf, index, lanes);
	e->stride = 2;
	return e;
}

bool mc_k_int_vector_dtype(mc_dtype dt)
{
	return dt == MC_INT32 || dt == MC_INT8 || dt == MC_UINT8;
}

/* The lane count of an operation on a and b (and c): all vectors must
 * agree; scalars are splat to it. */
static int common_lanes(mc_kexpr *a, mc_kexpr *b, mc_kexpr *c)
{
	int l = 1;
	mc_kexpr *ops[3] = { a, b, c };
	for (int i = 0; i < 3; i++) {
		if (!ops[i] || mc_k_lanes(ops[i]) == 1)
			continue;
		if (l != 1 && l != ops[i]->lanes)
			vector_bug("operands of different lane counts");
		l = ops[i]->lanes;
	}
	return l;
}

/* The element type of the vectors among a, b, c (f32 if none is i32). */
static mc_ktype common_elt(mc_kexpr *a, mc_kexpr *b, mc_kexpr *c)
{
	mc_kexpr *ops[3] = { a, b, c };
	for (int i = 0; i < 3; i++)
		if (ops[i] && mc_k_lanes(ops[i]) > 1 && ops[i]->type == MC_KT_I32)
			return MC_KT_I32;
	return MC_KT_F32;
}

static mc_kexpr *to_lanes(mc_kb *kb, mc_kexpr *x, int lanes, mc_ktype elt)
{
	if (mc_k_lanes(x) == lanes)
		return x;
	return mc_k_splat(kb, mc_k_cast(kb, elt, x), lanes);
}

mc_kexpr *mc_k_int(mc_kb *kb, mc_ktype t, int64_t v)
{
	mc_kexpr *e = expr(kb, MC_KE_CONST, t);
	e->i = v;
	e->f = (double)v;
	return e;
}

mc_kexpr *mc_k_index(mc_kb *kb, int64_t v)
{
	return mc_k_int(kb, MC_KT_INDEX, v);
}

mc_kexpr *mc_k_float(mc_kb *kb, mc_ktype t, double v)
{
	mc_kexpr *e = expr(kb, MC_KE_CONST, t);
	e->f = t == MC_KT_F32 ? (double)(float)v : v;
	return e;
}

mc_kexpr *mc_k_const_as(mc_kb *kb, mc_ktype t, double v)
{
	if (mc_ktype_is_float(t))
		return mc_k_float(kb, t, v);
	if (t == MC_KT_BOOL)
		return mc_k_int(kb, t, v != 0);
	return mc_k_int(kb, t, (int64_t)v);
}

mc_kexpr *mc_k_var(mc_kb *kb, int var)
{
	mc_kexpr *e = expr(kb, MC_KE_VAR, kb->k->vars[var].type);
	e->var = var;
	e->lanes = kb->k->vars[var].lanes;
	return e;
}

mc_kexpr *mc_k_load(mc_kb *kb, int buf, mc_kexpr *index)
{
	mc_kexpr *e = expr(kb, MC_KE_LOAD, mc_ktype_of(kb->k->bufs[buf].dtype));
	e->buf = buf;
	e->a = mc_k_cast(kb, MC_KT_INDEX, index);
	return e;
}

static bool is_bool_result(int op)
{
	return op == MC_KU_ISNAN || op == MC_KU_ISINF || op == MC_KU_NOT;
}

mc_kexpr *mc_k_un(mc_kb *kb, mc_kunop op, mc_kexpr *a)
{
	if (mc_k_lanes(a) > 1 && op == MC_KU_ISNAN) /* x != x */
		return mc_k_bin(kb, MC_KB_NE, a, a);
	if (mc_kmath_takes(kb, op, a))
		return op == MC_KU_EXP ? mc_kmath_exp(kb, a)
		     : op == MC_KU_ERF ? mc_kmath_erf(kb, a)
		                       : mc_kmath_tanh(kb, a);
	if (mc_k_lanes(a) > 1 && op == MC_KU_ABS && a->type == MC_KT_F32) { /* max(x, -x) */
		a = mc_kb_let(kb, a);
		return mc_k_bin(kb, MC_KB_MAX, a, mc_k_un(kb, MC_KU_NEG, a));
	}
	mc_kexpr *e = expr(kb, MC_KE_UN, is_bool_result((int)op) ? MC_KT_BOOL : a->type);
	e->op = (int)op;
	e->a = a;
	e->lanes = a->lanes;
	if (mc_k_lanes(a) > 1 && op != MC_KU_NEG)
		vector_bug("only NEG has a vector form among unary operations");
	return e;
}

/* 1 / (1 + e^-x), for Sigmoid and the recurrent cells' gates: kmath's
 * where it takes EXP of x; else through e = e^-|x|, which cannot
 * overflow, and one division: r = 1 / (1 + e), r for x >= 0, e r below. */
mc_kexpr *mc_k_sigmoid(mc_kb *kb, mc_kexpr *x)
{
	if (mc_kmath_takes(kb, MC_KU_EXP, x))
		return mc_kmath_sigmoid(kb, x);
	x = mc_kb_let(kb, x);
	mc_kexpr *one = mc_k_const_as(kb, x->type, 1);
	mc_kexpr *e = mc_kb_let(kb, mc_k_un(kb, MC_KU_EXP, mc_k_un(kb, MC_KU_NEG, mc_k_un(kb, MC_KU_ABS, x))));
	mc_kexpr *r = mc_kb_let(kb, mc_k_bin(kb, MC_KB_DIV, one, mc_k_bin(kb, MC_KB_ADD, one, e)));
	return mc_k_select(kb, mc_k_bin(kb, MC_KB_GE, x, mc_k_const_as(kb, x->type, 0)), r,
	                   mc_k_bin(kb, MC_KB_MUL, e, r));
}

bool mc_k_is_const(const mc_kexpr *e, int64_t *v)
{
	if (e->kind != MC_KE_CONST || mc_ktype_is_float(e->type))
		return false;
	if (v)
		*v = e->i;
	return true;
}


static bool is_compare(mc_kbinop op)
{
	return op >= MC_KB_LT && op <= MC_KB_NE;
}

/* Index arithmetic is folded; value arithmetic only where it cannot change
 * the result (x + 0, x * 1 on integers). */
static mc_kexpr *vector_bin(mc_kb *kb, mc_kbinop op, mc_kexpr *a, mc_kexpr *b, int lanes)
{
	mc_ktype elt = common_elt(a, b, NULL);
	if (!mc_k_vector_op(elt, op))
		vector_bug("this binary operation has no vector form");
	mc_kexpr *e = expr(kb, MC_KE_BIN, is_compare(op) ? MC_KT_BOOL : elt);
	e->op = (int)op;
	e->a = to_lanes(kb, a, lanes, elt);
	e->b = to_lanes(kb, b, lanes, elt);
	e->lanes = lanes;
	return e;
}

bool mc_k_vector_op(mc_ktype elt, mc_kbinop op)
{
	if (elt == MC_KT_I32)
		return op == MC_KB_ADD || op == MC_KB_SUB || op == MC_KB_MUL || op == MC_KB_MIN ||
		       op == MC_KB_MAX || op == MC_KB_AND || op == MC_KB_OR || op == MC_KB_XOR ||
		       op == MC_KB_SHL || op == MC_KB_SHR;
	return op <= MC_KB_DIV || op == MC_KB_MIN || op == MC_KB_MAX || is_compare(op);
}

mc_kexpr *mc_k_bin(mc_kb *kb, mc_kbinop op, mc_kexpr *a, mc_kexpr *b)
{
	int lanes = common_lanes(a, b, NULL);
	if (lanes > 1)
		return vector_bin(kb, op, a, b, lanes);
	int64_t x = 0, y = 0;
	/* A constant takes the other side's type; otherwise b follows a. Two
	 * computed operands of different types are a lowering's bug (no real
	 * model or conformance test builds one), which a quiet cast to a's
	 * type would hide. */
	if (a->type != b->type) {
		MC_ASSERT(a->kind == MC_KE_CONST || b->kind == MC_KE_CONST);
		if (a->kind == MC_KE_CONST && b->kind != MC_KE_CONST)
			a = mc_ktype_is_float(a->type) || mc_ktype_is_float(b->type)
			        ? mc_k_const_as(kb, b->type, a->f) : mc_k_int(kb, b->type, a->i);
		else
			b = mc_k_cast(kb, a->type, b);
	}
	bool ca = mc_k_is_const(a, &x), cb = mc_k_is_const(b, &y);
	if (a->type == MC_KT_INDEX && b->type == MC_KT_INDEX) {
		if (ca && cb) {
			switch (op) {
			case MC_KB_ADD: return mc_k_index(kb, x + y);
			case MC_KB_SUB: return mc_k_index(kb, x - y);
			case MC_KB_MUL: return mc_k_index(kb, x * y);
			case MC_KB_DIV: if (y > 0) return mc_k_index(kb, x / y); break;
			case MC_KB_REM: if (y > 0) return mc_k_index(kb, x % y); break;
			case MC_KB_MIN: return mc_k_index(kb, x < y ? x : y);
			case MC_KB_MAX: return mc_k_index(kb, x > y ? x : y);
			default: break;
			}
		}
		if (op == MC_KB_MUL && ((ca && x == 0) || (cb && y == 0)))
			return mc_k_index(kb, 0);
		if (op == MC_KB_DIV && cb && y == 1)
			return a;
		if (op == MC_KB_REM && cb && y == 1)
			return mc_k_index(kb, 0);
	}
	if (!mc_ktype_is_float(a->type) && a->type == b->type) {
		if ((op == MC_KB_ADD || op == MC_KB_SUB) && cb && y == 0)
			return a;
		if (op == MC_KB_ADD && ca && x == 0)
			return b;
		if (op == MC_KB_MUL && cb && y == 1)
			return a;
		if (op == MC_KB_MUL && ca && x == 1)
			return b;
	}
	mc_kexpr *e = expr(kb, MC_KE_BIN, is_compare(op) ? MC_KT_BOOL : a->type);
	e->op = (int)op;
	e->a = a;
	e->b = b;
	return e;
}

mc_kexpr *mc_k_addi(mc_kb *kb, mc_kexpr *a, int64_t c)
{
	return mc_k_bin(kb, MC_KB_ADD, a, mc_k_int(kb, a->type, c));
}

mc_kexpr *mc_k_muli(mc_kb *kb, mc_kexpr *a, int64_t c)
{
	return mc_k_bin(kb, MC_KB_MUL, a, mc_k_int(kb, a->type, c));
}

mc_kexpr *mc_k_select(mc_kb *kb, mc_kexpr *cond, mc_kexpr *a, mc_kexpr *b)
{
	int lanes = common_lanes(cond, a, b);
	if (lanes > 1) {
		/* a scalar condition picks one whole vector or the other */
		if (mc_k_lanes(cond) == 1)
			cond = mc_k_cast(kb, MC_KT_BOOL, cond);
		else if (mc_k_lanes(cond) != lanes || cond->type != MC_KT_BOOL)
			vector_bug("a vector select needs a compare of its lane count as its condition");
		mc_kexpr *e = expr(kb, MC_KE_SELECT, MC_KT_F32);
		e->a = cond;
		e->b = to_lanes(kb, a, lanes, MC_KT_F32);
		e->c = to_lanes(kb, b, lanes, MC_KT_F32);
		e->lanes = lanes;
		return e;
	}
	mc_kexpr *e = expr(kb, MC_KE_SELECT, a->type);
	e->a = mc_k_cast(kb, MC_KT_BOOL, cond);
	e->b = a;
	e->c = b;
	return e;
}

mc_kexpr *mc_k_cast(mc_kb *kb, mc_ktype t, mc_kexpr *a)
{
	if (a->type == t)
		return a;
	if (mc_k_lanes(a) > 1)
		vector_bug("vectors are float32 only: no casts");
	if (a->kind == MC_KE_CONST && !mc_ktype_is_float(a->type) && !mc_ktype_is_float(t) &&
	    t != MC_KT_BOOL && (t == MC_KT_INDEX || t == MC_KT_I64))
		return mc_k_int(kb, t, a->i);
	mc_kexpr *e = expr(kb, MC_KE_CAST, t);
	e->a = a;
	return e;
}

mc_kexpr *mc_k_fma(mc_kb *kb, mc_kexpr *a, mc_kexpr *b, mc_kexpr *c)
{
	int lanes = common_lanes(a, b, c);
	if (lanes > 1) {
		mc_kexpr *e = expr(kb, MC_KE_FMA, MC_KT_F32);
		e->a = to_lanes(kb, a, lanes, MC_KT_F32);
		e->b = to_lanes(kb, b, lanes, MC_KT_F32);
		e->c = to_lanes(kb, c, lanes, MC_KT_F32);
		e->lanes = lanes;
		return e;
	}
	mc_kexpr *e = expr(kb, MC_KE_FMA, c->type);
	e->a = a;
	e->b = b;
	e->c = c;
	return e;
}

mc_kexpr *mc_k_dot2(mc_kb *kb, mc_kexpr *a, mc_kexpr *b, mc_kexpr *acc)
{
	int lanes = common_lanes(a, b, acc);
	mc_kexpr *e = expr(kb, MC_KE_DOT2, MC_KT_I32);
	e->a = to_lanes(kb, a, lanes, MC_KT_I32);
	e->b = to_lanes(kb, b, lanes, MC_KT_I32);
	e->c = to_lanes(kb, acc, lanes, MC_KT_I32);
	e->lanes = lanes > 1 ? lanes : 0;
	return e;
}

mc_kexpr *mc_k_dot4(mc_kb *kb, mc_kexpr *a, mc_kexpr *b, mc_kexpr *acc, bool a_signed)
{
	mc_kexpr *e = mc_k_dot2(kb, a, b, acc);
	e->kind = MC_KE_DOT4;
	e->i = a_signed;
	return e;
}

mc_kexpr *mc_k_rq32(mc_kb *kb, mc_kexpr *acc, mc_kexpr *mult, mc_kexpr *low, int form)
{
	if (mc_k_lanes(mult) != mc_k_lanes(low) || (mc_k_lanes(mult) > 1 && mc_k_lanes(mult) != mc_k_lanes(acc)))
		vector_bug("rq32's multiplier and shift: both scalars (shared by the lanes) or both per lane");
	if ((form & MC_RQ32_HALF_UP) && form != MC_RQ32_HALF_UP)
		vector_bug("rq32's half-up form: products not doubled");
	mc_kexpr *e = expr(kb, MC_KE_RQ32, MC_KT_I32);
	e->lanes = acc->lanes;
	e->a = acc;
	e->b = mult;
	e->c = low;
	e->i = form;
	return e;
}

/* ---- statements ---- */
static mc_kstmt *append(mc_kb *kb, mc_kstmt_kind kind)
{
	mc_kstmt *s = mc_kpool_alloc(kb->pool, sizeof *s);
	s->kind = kind;
	*kb->tail[kb->depth] = s;
	kb->tail[kb->depth] = &s->next;
	return s;
}

static void push(mc_kb *kb, mc_kstmt *owner, mc_kstmt **block)
{
	if (kb->depth + 1 >= MC_KB_MAX_DEPTH) {
		mc_error("kernel nesting deeper than %d", MC_KB_MAX_DEPTH);
		abort();
	}
	kb->depth++;
	kb->open[kb->depth] = owner;
	kb->tail[kb->depth] = block;
}

mc_kexpr *mc_kb_for(mc_kb *kb, mc_kexpr *begin, mc_kexpr *end, unsigned flags)
{
	mc_kstmt *s = append(kb, MC_KS_FOR);
	s->var = new_var(kb, MC_KT_INDEX, false, true);
	s->a = mc_k_cast(kb, MC_KT_INDEX, begin);
	s->b = mc_k_cast(kb, MC_KT_INDEX, end);
	s->flags = flags;
	push(kb, s, &s->body);
	return mc_k_var(kb, s->var);
}

mc_kexpr *mc_kb_fori(mc_kb *kb, int64_t end, unsigned flags)
{
	return mc_kb_for(kb, mc_k_index(kb, 0), mc_k_index(kb, end), flags);
}

void mc_kb_if(mc_kb *kb, mc_kexpr *cond)
{
	mc_kstmt *s = append(kb, MC_KS_IF);
	s->a = mc_k_cast(kb, MC_KT_BOOL, cond);
	push(kb, s, &s->body);
}

void mc_kb_else(mc_kb *kb)
{
	mc_kstmt *s = kb->open[kb->depth];
	if (!s || s->kind != MC_KS_IF) {
		mc_error("kernel builder: else outside if");
		abort();
	}
	kb->tail[kb->depth] = &s->orelse;
}

void mc_kb_end(mc_kb *kb)
{
	if (kb->depth == 0) {
		mc_error("kernel builder: end without an open block");
		abort();
	}
	kb->depth--;
}

void mc_kb_end_n(mc_kb *kb, int n)
{
	while (n-- > 0)
		mc_kb_end(kb);
}

static mc_kexpr *decl(mc_kb *kb, mc_kexpr *init, bool mutable_)
{
	mc_kstmt *s = append(kb, MC_KS_DECL);
	s->var = new_var(kb, init->type, mutable_, false);
	kb->k->vars[s->var].lanes = init->lanes;
	s->a = init;
	return mc_k_var(kb, s->var);
}

mc_kexpr *mc_kb_let(mc_kb *kb, mc_kexpr *init)
{
	if (init->kind == MC_KE_CONST || init->kind == MC_KE_VAR)
		return init;
	return decl(kb, init, false);
}

mc_kexpr *mc_kb_local(mc_kb *kb, mc_kexpr *init)
{
	return decl(kb, init, true);
}

void mc_kb_assign(mc_kb *kb, mc_kexpr *var, mc_kexpr *value)
{
	mc_kstmt *s = append(kb, MC_KS_ASSIGN);
	s->var = var->var;
	int lanes = kb->k->vars[var->var].lanes > 1 ? kb->k->vars[var->var].lanes : 1;
	if (lanes > 1)
		value = to_lanes(kb, value, lanes, kb->k->vars[var->var].type);
	else if (mc_k_lanes(value) > 1)
		vector_bug("a vector assigned to a scalar");
	s->a = mc_k_cast(kb, var->type, value);
}

void mc_kb_store(mc_kb *kb, int buf, mc_kexpr *index, mc_kexpr *value)
{
	mc_kstmt *s = append(kb, MC_KS_STORE);
	s->buf = buf;
	s->a = mc_k_cast(kb, MC_KT_INDEX, index);
	mc_dtype dt = kb->k->bufs[buf].dtype;
	if (mc_k_lanes(value) > 1) {
		/* f32 into float32; i32 into int32, or narrowed (wrapping) into 8 bits */
		if (value->type != (dt == MC_FLOAT ? MC_KT_F32 : MC_KT_I32) ||
		    (dt != MC_FLOAT && !mc_k_int_vector_dtype(dt)))
			vector_bug("vector store of another type than its buffer's");
		s->b = value;
		return;
	}
	s->b = mc_k_cast(kb, mc_ktype_of(dt), value);
}

void mc_kb_break(mc_kb *kb)
{
	append(kb, MC_KS_BREAK);
}

void mc_kb_fail(mc_kb *kb, int status)
{
	mc_kstmt *s = append(kb, MC_KS_FAIL);
	s->code = status;
}

static mc_kstmt *template_stmt(mc_kb *kb, const mc_ktemplate *t)
{
	mc_kstmt *s = append(kb, MC_KS_TEMPLATE);
	mc_ktemplate *copy = mc_kpool_alloc(kb->pool, sizeof *copy);
	*copy = *t;
	s->tmpl = copy;
	return s;
}

void mc_kb_template(mc_kb *kb, const mc_ktemplate *t)
{
	template_stmt(kb, t);
}

void mc_kb_template_open(mc_kb *kb, const mc_ktemplate *t)
{
	mc_kstmt *s = template_stmt(kb, t);
	push(kb, s, &s->body);
}

/* 2 x 3: four pairs a step (52 instructions); 4 x 1: eight (92) */
int64_t mc_dot2_kp_multiple(int64_t tm)
{
	return tm == 4 ? 8 : 4;
}

/* ---- dump ---- */
static const char *const un_names[MC_KU__COUNT] = {
	"neg", "not", "bitnot", "abs", "sqrt", "exp", "log", "sin", "cos", "tan", "asin",
	"acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "floor", "ceil",
	"trunc", "rint", "round", "erf", "isnan", "isinf", "sxtb16", "sxtb16hi",
};
static const char *const bin_names[MC_KB__COUNT] = {
	"+", "-", "*", "/", "%", "fmod", "pow", "atan2", "min", "max", "&", "|", "^", "<<", ">>",
	"<", "<=", ">", ">=", "==", "!=",
};

static void dump_expr(const mc_kexpr *e, FILE *f)
{
	switch (e->kind) {
	case MC_KE_CONST:
		if (mc_ktype_is_float(e->type))
			fprintf(f, "%.9g", e->f);
		else
			fprintf(f, "%lld", (long long)e->i);
		break;
	case MC_KE_VAR: fprintf(f, "v%d", e->var); break;
	case MC_KE_SPLITS: fprintf(f, "splits(b%d)", e->buf); break;
	case MC_KE_DIM: fputs("dim", f); break;
	case MC_KE_LOAD:
		fprintf(f, "b%d[", e->buf);
		dump_expr(e->a, f);
		if (mc_k_lanes(e) > 1)
			fprintf(f, " +%d%s", e->lanes, e->stride == 2 ? " step 2" : "");
		fputc(']', f);
		break;
	case MC_KE_SPLAT:
		fprintf(f, "splat%d(", e->lanes);
		dump_expr(e->a, f);
		fputc(')', f);
		break;
	case MC_KE_LANE:
		fputc('(', f);
		dump_expr(e->a, f);
		fprintf(f, ").%lld", (long long)e->i);
		break;
	case MC_KE_UN:
		fprintf(f, "%s(", un_names[e->op]);
		dump_expr(e->a, f);
		fputc(')', f);
		break;
	case MC_KE_BIN:
		fputc('(', f);
		dump_expr(e->a, f);
		fprintf(f, " %s ", bin_names[e->op]);
		dump_expr(e->b, f);
		fputc(')', f);
		break;
	case MC_KE_SELECT:
		fputc('(', f);
		dump_expr(e->a, f);
		fputs(" ? ", f);
		dump_expr(e->b, f);
		fputs(" : ", f);
		dump_expr(e->c, f);
		fputc(')', f);
		break;
	case MC_KE_CAST:
		fprintf(f, "%s(", mc_ktype_name(e->type));
		dump_expr(e->a, f);
		fputc(')', f);
		break;
	case MC_KE_BITS:
		fprintf(f, "bits_%s(", mc_ktype_name(e->type));
		dump_expr(e->a, f);
		fputc(')', f);
		break;
	case MC_KE_FMA: case MC_KE_DOT2: case MC_KE_DOT4: case MC_KE_RQ32:
		fputs(e->kind == MC_KE_FMA    ? "fma("
		      : e->kind == MC_KE_DOT2 ? "dot2("
		      : e->kind == MC_KE_DOT4 ? (e->i ? "dot4s(" : "dot4(")
		      : e->i == MC_RQ32_TWICE ? "rq32x2("
		      : e->i == MC_RQ32_HALF_UP ? "rq32u("
		                                : "rq32(",
		      f);
		dump_expr(e->a, f);
		fputs(", ", f);
		dump_expr(e->b, f);
		fputs(", ", f);
		dump_expr(e->c, f);
		fputc(')', f);
		break;
	}
}

static void dump_block(const mc_kernel *k, const mc_kstmt *s, int ind, FILE *f)
{
	for (; s; s = s->next) {
		fprintf(f, "%*s", ind * 2, "");
		switch (s->kind) {
		case MC_KS_FOR:
			fprintf(f, "for v%d in [", s->var);
			dump_expr(s->a, f);
			fputs(", ", f);
			dump_expr(s->b, f);
			fprintf(f, ")%s%s {\n", s->flags & MC_KF_PARALLEL ? " parallel" : "",
			        s->flags & MC_KF_REDUCE ? " reduce" : "");
			dump_block(k, s->body, ind + 1, f);
			fprintf(f, "%*s}\n", ind * 2, "");
			break;
		case MC_KS_DECL:
			fprintf(f, "%s v%d: %s", k->vars[s->var].mutable_ ? "var" : "let", s->var,
			        mc_ktype_name(k->vars[s->var].type));
			if (k->vars[s->var].lanes > 1)
				fprintf(f, "x%d", k->vars[s->var].lanes);
			fputs(" = ", f);
			dump_expr(s->a, f);
			fputc('\n', f);
			break;
		case MC_KS_ASSIGN:
			fprintf(f, "v%d = ", s->var);
			dump_expr(s->a, f);
			fputc('\n', f);
			break;
		case MC_KS_STORE:
			fprintf(f, "b%d[", s->buf);
			dump_expr(s->a, f);
			fputs("] = ", f);
			dump_expr(s->b, f);
			fputc('\n', f);
			break;
		case MC_KS_IF:
			fputs("if ", f);
			dump_expr(s->a, f);
			fputs(" {\n", f);
			dump_block(k, s->body, ind + 1, f);
			if (s->orelse) {
				fprintf(f, "%*s} else {\n", ind * 2, "");
				dump_block(k, s->orelse, ind + 1, f);
			}
			fprintf(f, "%*s}\n", ind * 2, "");
			break;
		case MC_KS_BREAK: fputs("break\n", f); break;
		case MC_KS_FAIL: fprintf(f, "fail %d\n", s->code); break;
		case MC_KS_TEMPLATE: {
			const mc_ktemplate *t = s->tmpl;
			if (t->kind == MC_TMPL_S8_PAIRS) {
				fprintf(f, "template s8_pairs(x b%d[", t->x);
				dump_expr(t->x_at, f);
				fprintf(f, "] -> b%d) kp %" PRId64 "\n", t->out, t->kp);
				break;
			}
			if (t->kind == MC_TMPL_GRU_GATES || t->kind == MC_TMPL_LSTM_GATES) {
				bool lstm = t->kind == MC_TMPL_LSTM_GATES;
				fprintf(f, "template %s_gates(x b%d, wt b%d, consts b%d -> b%d, ", lstm ? "lstm" : "gru", t->x, t->wt,
				        t->consts, t->out);
				if (lstm)
					fprintf(f, "cell b%d, ", t->cell);
				fprintf(f, "y b%d", t->y);
				if (t->y_at) {
					fputc('[', f);
					dump_expr(t->y_at, f);
					fputc(']', f);
				}
				fprintf(f, ") n %" PRId64 " {\n", t->kp);
				dump_block(k, s->body, ind + 1, f);
				fprintf(f, "%*s}\n", ind * 2, "");
				break;
			}
			if (t->kind == MC_TMPL_GEMV_F32) {
				fprintf(f, "template gemv_f32(wt b%d, bias b%d, x b%d[", t->wt, t->bias, t->x);
				dump_expr(t->x_at, f);
				fprintf(f, "] -> b%d) k %" PRId64 " blocks %" PRId64 "\n", t->out, t->kp, t->tiles);
				break;
			}
			if (t->kind == MC_TMPL_DOT2_TILES) {
				fprintf(f, "template dot2_%" PRId64 "x%" PRId64 "(wt b%d[", t->tm, t->tp, t->wt);
				dump_expr(t->wt_at, f);
				fprintf(f, "], x b%d -> b%d) kp %" PRId64 " tiles %" PRId64 "\n", t->x, t->out, t->kp, t->tiles);
				break;
			}
			if (t->kind == MC_TMPL_ATTENTION) {
				fprintf(f, "template attention(q b%d, k b%d, v b%d, mask b%d -> b%d) %" PRId64 " x %" PRId64
				           " heads (%" PRId64 " kv) of %" PRId64 " queries, %" PRId64 " keys, %" PRId64 "/%" PRId64
				           " wide, scale %g\n",
				        t->x, t->wt, t->v, t->mask, t->out, t->n, t->hq, t->hkv, t->sq, t->skv, t->hd, t->hdv, t->scale);
				break;
			}
			if (t->kind == MC_TMPL_GEMM) {
				fprintf(f, "template gemm(a b%d [%" PRId64 ",%" PRId64 ",%" PRId64 "], b b%d [%" PRId64 ",%" PRId64
				           ",%" PRId64 "] -> b%d) %" PRId64 " of %" PRId64 "x%" PRId64 "x%" PRId64 " splits %" PRId64
				           " of %" PRId64 "\n",
				        t->wt, t->a_st[0], t->a_st[1], t->a_st[2], t->x, t->b_st[0], t->b_st[1], t->b_st[2], t->out,
				        t->n, t->cout, t->cin, t->ow, t->splits, t->k_split);
				break;
			}
			fprintf(f, "template conv2d_splitk%s(x b%d, wt b%d -> b%d) n %" PRId64 " cin %" PRId64
			           " %" PRId64 "x%" PRId64 " cout %" PRId64 " kernel %" PRId64 "x%" PRId64
			           " out %" PRId64 "x%" PRId64 " stride %" PRId64 ",%" PRId64 " pad %" PRId64
			           ",%" PRId64 " dilation %" PRId64 ",%" PRId64 " splits %" PRId64 " of %" PRId64 "\n",
			        t->mma ? "_mma" : "", t->x, t->wt, t->out, t->n, t->cin, t->h, t->w, t->cout, t->kh, t->kw, t->oh, t->ow,
			        t->sh, t->sw, t->ph, t->pw, t->dh, t->dw, t->splits, t->k_split);
			break;
		}
		}
	}
}

void mc_kernel_dump(const mc_kernel *k, FILE *f)
{
	fprintf(f, "kernel %s", k->name);
	if (k->comment)
		fprintf(f, "  # %s", k->comment);
	fputc('\n', f);
	for (int i = 0; i < k->n_bufs; i++)
		fprintf(f, "  b%d: %s[%zu] value %d%s%s\n", i, mc_dtype_name(k->bufs[i].dtype),
		        k->bufs[i].count, k->bufs[i].value, k->bufs[i].written ? " (written)" : "",
		        k->bufs[i].transient ? " (transient)" : "");
	dump_block(k, k->body, 1, f);
}

void mc_kexpr_mark_loads(const mc_kexpr *x, bool *loaded)
{
	if (!x)
		return;
	if (x->kind == MC_KE_LOAD)
		loaded[x->buf] = true;
	mc_kexpr_mark_loads(x->a, loaded);
	mc_kexpr_mark_loads(x->b, loaded);
	mc_kexpr_mark_loads(x->c, loaded);
}

static bool body_closed(const mc_kstmt *s, bool *inner, bool *loaded, bool *stored, int loops)
{
	for (; s; s = s->next) {
		switch (s->kind) {
		case MC_KS_DECL:
		case MC_KS_FOR:
			inner[s->var] = true;
			break;
		case MC_KS_ASSIGN:
			if (!inner[s->var])
				return false;
			break;
		case MC_KS_STORE:
			if (stored)
				stored[s->buf] = true;
			break;
		case MC_KS_BREAK:
			if (loops == 0)
				return false;
			break;
		case MC_KS_FAIL:
		case MC_KS_TEMPLATE:
			return false;
		case MC_KS_IF:
			break;
		}
		if (loaded) {
			mc_kexpr_mark_loads(s->a, loaded);
			mc_kexpr_mark_loads(s->b, loaded);
			mc_kexpr_mark_loads(s->c, loaded);
		}
		if (s->body && !body_closed(s->body, inner, loaded, stored, loops + (s->kind == MC_KS_FOR)))
			return false;
		if (s->orelse && !body_closed(s->orelse, inner, loaded, stored, loops))
			return false;
	}
	return true;
}

bool mc_kbody_closed(const mc_kstmt *s, bool *inner, bool *loaded, bool *stored)
{
	return body_closed(s, inner, loaded, stored, 0);
}

/* ---- deep copy ---- */
static mc_kexpr *clone_expr(mc_kpool *pool, const mc_kexpr *e)
{
	if (!e)
		return NULL;
	mc_kexpr *c = mc_kpool_alloc(pool, sizeof *c);
	*c = *e;
	c->a = clone_expr(pool, e->a);
	c->b = clone_expr(pool, e->b);
	c->c = clone_expr(pool, e->c);
	return c;
}

static mc_kstmt *clone_block(mc_kpool *pool, const mc_kstmt *s)
{
	mc_kstmt *head = NULL, **tail = &head;
	for (; s; s = s->next) {
		mc_kstmt *c = mc_kpool_alloc(pool, sizeof *c);
		*c = *s;
		c->next = NULL;
		c->a = clone_expr(pool, s->a);
		c->b = clone_expr(pool, s->b);
		c->c = clone_expr(pool, s->c);
		c->body = clone_block(pool, s->body);
		c->orelse = clone_block(pool, s->orelse);
		if (s->tmpl) {
			mc_ktemplate *t = mc_kpool_alloc(pool, sizeof *t);
			*t = *s->tmpl;
			t->y_at = clone_expr(pool, s->tmpl->y_at);
			t->wt_at = clone_expr(pool, s->tmpl->wt_at);
			t->x_at = clone_expr(pool, s->tmpl->x_at);
			c->tmpl = t;
		}
		*tail = c;
		tail = &c->next;
	}
	return head;
}

mc_kernel *mc_kernel_clone(mc_kpool *pool, const mc_kernel *k)
{
	mc_kernel *c = mc_kpool_alloc(pool, sizeof *c);
	*c = *k;
	c->name = mc_kpool_strdup(pool, k->name);
	c->comment = k->comment ? mc_kpool_strdup(pool, k->comment) : NULL;
	c->bufs = mc_kpool_alloc(pool, sizeof *c->bufs * (size_t)(k->n_bufs + 1));
	memcpy(c->bufs, k->bufs, sizeof *c->bufs * (size_t)k->n_bufs);
	for (int i = 0; i < k->n_bufs; i++)
		c->bufs[i].packed = NULL;
	c->cap_bufs = k->n_bufs;
	c->vars = mc_kpool_alloc(pool, sizeof *c->vars * (size_t)(k->n_vars + 1));
	memcpy(c->vars, k->vars, sizeof *c->vars * (size_t)k->n_vars);
	c->cap_vars = k->n_vars;
	c->body = clone_block(pool, k->body);
	c->n_splits = 0;
	c->splits = NULL;
	return c;
}
