/* The kernel IR verifier: what every lowering must produce and every
 * emitter takes for granted, checked once per kernel after lowering.
 *
 *   - types: operands agree as the builder makes them (kir.c), compares
 *     give bool, vectors are f32 with consistent lane counts, variables are
 *     declared before use and assigned only when mutable;
 *   - structure: buffer and variable ids in range, stores only into
 *     buffers marked written, BREAK inside a FOR, loop marks that make
 *     sense;
 *   - bounds: every load and store stays inside its buffer, by interval
 *     arithmetic over the index expressions with the loops' bounds and the
 *     facts the enclosing IFs and SELECTs establish.
 *
 * Interval arithmetic (narrowed by the facts of enclosing IFs and
 * SELECTs) proves most accesses inside. One it cannot is reported only if
 * its range is known to be reached: an index exactly affine in variables
 * of loops with constant bounds, under no guard. Everything else (indices
 * from loaded data, windows clipped by min and max, guards the analysis
 * does not follow) is skipped, never reported: no false positives, at the
 * price of missing bugs there. Code proven unreachable is not checked. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program.h"

/* ---- integer ranges ----
 * [lo, hi], both inclusive; INT64_MIN as lo and INT64_MAX as hi stand for
 * "unbounded" on that side. Any end that would overflow becomes unbounded:
 * wider is always safe. */
#define NEG_INF INT64_MIN
#define POS_INF INT64_MAX

typedef struct {
	int64_t lo, hi;
} range;

static const range unknown = { NEG_INF, POS_INF };

static range point(int64_t v)
{
	return (range){ v, v };
}

static bool bounded(range r)
{
	return r.lo != NEG_INF && r.hi != POS_INF;
}

static bool is_inf(int64_t x)
{
	return x == NEG_INF || x == POS_INF;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* One end of a sum; inf is the value an unbounded or overflowing end gets. */
static int64_t add_end(int64_t a, int64_t b, int64_t inf)
{
	int64_t r;
	if (is_inf(a) || is_inf(b) || __builtin_add_overflow(a, b, &r))
		return inf;
	return r;
}

static range r_add(range a, range b)
{
	return (range){ add_end(a.lo, b.lo, NEG_INF), add_end(a.hi, b.hi, POS_INF) };
}

static int64_t neg_end(int64_t x)
{
	return x == NEG_INF ? POS_INF : x == POS_INF ? NEG_INF : -x;
}

static range r_neg(range a)
{
	return (range){ neg_end(a.hi), neg_end(a.lo) };
}

/* a * c, c > 0: the ends scale (an unbounded one stays so). */
static range r_scale(range a, int64_t c)
{
	int64_t lo, hi;
	if (is_inf(a.lo) || __builtin_mul_overflow(a.lo, c, &lo))
		lo = NEG_INF;
	if (is_inf(a.hi) || __builtin_mul_overflow(a.hi, c, &hi))
		hi = POS_INF;
	return (range){ lo, hi };
}

static range r_mul(range a, range b)
{
	if (b.lo == b.hi && !is_inf(b.lo)) {
		int64_t c = b.lo;
		return c == 0 ? point(0) : c > 0 ? r_scale(a, c) : r_neg(r_scale(a, -c));
	}
	if (a.lo == a.hi && !is_inf(a.lo))
		return r_mul(b, a);
	if (!bounded(a) || !bounded(b))
		return unknown;
	int64_t p[4];
	if (__builtin_mul_overflow(a.lo, b.lo, &p[0]) || __builtin_mul_overflow(a.lo, b.hi, &p[1]) ||
	    __builtin_mul_overflow(a.hi, b.lo, &p[2]) || __builtin_mul_overflow(a.hi, b.hi, &p[3]))
		return unknown;
	range r = { p[0], p[0] };
	for (int i = 1; i < 4; i++) {
		r.lo = min64(r.lo, p[i]);
		r.hi = max64(r.hi, p[i]);
	}
	return r;
}

/* Truncating division by a positive divisor: monotonic in a, so the
 * extremes are at the ends (an unbounded end of a stays unbounded). */
static int64_t div_end(int64_t a, int64_t b)
{
	return is_inf(a) ? a : a / b;
}

static range r_div(range a, range b)
{
	if (!bounded(b) || b.lo <= 0)
		return unknown;
	return (range){ min64(div_end(a.lo, b.lo), div_end(a.lo, b.hi)),
		        max64(div_end(a.hi, b.lo), div_end(a.hi, b.hi)) };
}

/* C's %: the sign of the dividend, the magnitude below the divisor. */
static range r_rem(range a, range b)
{
	if (!bounded(a) || !bounded(b) || b.lo <= 0)
		return unknown;
	if (a.lo >= 0 && a.hi < b.lo)
		return a;
	int64_t m = b.hi - 1;
	if (a.lo >= 0)
		return (range){ 0, min64(a.hi, m) };
	if (a.hi <= 0)
		return (range){ max64(a.lo, -m), 0 };
	return (range){ -m, m };
}

/* x & m with m >= 0 keeps only m's bits: 0 <= x & m <= m. */
static range r_and(range a, range b)
{
	if (a.lo >= 0 && b.lo >= 0)
		return (range){ 0, min64(a.hi, b.hi) };
	if (a.lo >= 0 && a.hi != POS_INF)
		return (range){ 0, a.hi };
	if (b.lo >= 0 && b.hi != POS_INF)
		return (range){ 0, b.hi };
	return unknown;
}

static range r_shift(range a, range b, bool left)
{
	if (b.lo != b.hi || b.lo < 0 || b.lo > 61 || a.lo < 0)
		return unknown;
	if (left)
		return r_scale(a, (int64_t)1 << b.lo);
	return (range){ a.lo >> b.lo, a.hi == POS_INF ? POS_INF : a.hi >> b.hi };
}

static range r_union(range a, range b)
{
	return (range){ min64(a.lo, b.lo), max64(a.hi, b.hi) };
}

/* The values type t can hold; unknown for index (it never wraps, so its
 * ranges come from its arithmetic) and floats (not tracked). */
static range type_range(mc_ktype t)
{
	switch (t) {
	case MC_KT_BOOL: return (range){ 0, 1 };
	case MC_KT_I8: return (range){ INT8_MIN, INT8_MAX };
	case MC_KT_U8: return (range){ 0, UINT8_MAX };
	case MC_KT_I16: return (range){ INT16_MIN, INT16_MAX };
	case MC_KT_U16: return (range){ 0, UINT16_MAX };
	case MC_KT_I32: return (range){ INT32_MIN, INT32_MAX };
	case MC_KT_U32: return (range){ 0, UINT32_MAX };
	case MC_KT_U64: return (range){ 0, POS_INF };
	default: return unknown;
	}
}

/* r as a value of type t: value arithmetic wraps, so a range that leaves
 * the type may hold any of its values. */
static range fit(mc_ktype t, range r)
{
	if (mc_ktype_is_float(t) || t == MC_KT_VOID)
		return unknown;
	if (t == MC_KT_INDEX)
		return r;
	range tr = type_range(t);
	return r.lo >= tr.lo && r.hi <= tr.hi ? r : tr;
}

/* ---- the checker ---- */
/* What an IF or SELECT condition tells about an expression inside the
 * branch it guards. */
typedef struct {
	const mc_kexpr *e;
	range r;
} fact;

#define MAX_FACTS 256

typedef struct {
	const mc_kernel *k;
	char *why;
	size_t why_len;
	bool failed;
	bool *in_scope;        /* per variable: declared and visible here */
	bool *declared;        /* per variable: declared once already */
	range *var_range;      /* per variable, while in scope */
	const mc_kexpr **init; /* per immutable local: its value (conditions look through it) */
	const mc_kstmt **loop; /* per loop variable: its FOR (the affine bounds read begin, end) */
	int *scope;            /* locals declared in the open blocks, innermost last */
	int n_scope;
	fact facts[MAX_FACTS];
	int n_facts;
	int loops;             /* FORs around the statement */
	unsigned loop_flags;   /* of the innermost */
	int dead;              /* > 0: in code proven never to run */
	int guarded;           /* > 0: under an IF or SELECT branch, in a loop with computed
	                        * bounds, or after a BREAK in the same loop */
	bool may_fail;         /* a FAIL came before: what follows may not run */
	int depth;             /* of blocks */
} checker;

static void fail(checker *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail(checker *c, const char *fmt, ...)
{
	if (c->failed)
		return;
	c->failed = true;
	if (!c->why || !c->why_len)
		return;
	int n = snprintf(c->why, c->why_len, "kernel %s: ", c->k->name);
	if (n < 0 || (size_t)n >= c->why_len)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->why + n, c->why_len - (size_t)n, fmt, ap);
	va_end(ap);
}

static bool same_expr(const mc_kexpr *a, const mc_kexpr *b)
{
	if (a == b)
		return true;
	if (!a || !b || a->kind != b->kind || a->type != b->type || a->op != b->op ||
	    a->i != b->i || a->var != b->var || a->buf != b->buf ||
	    mc_k_lanes(a) != mc_k_lanes(b) || (a->kind == MC_KE_CONST && a->f != b->f))
		return false;
	return same_expr(a->a, b->a) && same_expr(a->b, b->b) && same_expr(a->c, b->c);
}

static range var_range(const checker *c, int v)
{
	if (v < 0 || v >= c->k->n_vars || !c->in_scope[v] || c->k->vars[v].mutable_)
		return unknown;
	return c->var_range[v];
}

static range range_of(checker *c, const mc_kexpr *e);

static range bin_range(checker *c, const mc_kexpr *e)
{
	if (mc_ktype_is_float(e->a->type))
		return e->op >= MC_KB_LT ? (range){ 0, 1 } : unknown;
	range a = range_of(c, e->a), b = range_of(c, e->b);
	switch (e->op) {
	case MC_KB_ADD: return r_add(a, b);
	case MC_KB_SUB: return r_add(a, r_neg(b));
	case MC_KB_MUL: return r_mul(a, b);
	case MC_KB_DIV: return r_div(a, b);
	case MC_KB_REM: return r_rem(a, b);
	case MC_KB_MIN: return (range){ min64(a.lo, b.lo), min64(a.hi, b.hi) };
	case MC_KB_MAX: return (range){ max64(a.lo, b.lo), max64(a.hi, b.hi) };
	case MC_KB_AND: return r_and(a, b);
	case MC_KB_SHL: return r_shift(a, b, true);
	case MC_KB_SHR: return r_shift(a, b, false);
	default: return e->op >= MC_KB_LT ? (range){ 0, 1 } : unknown;
	}
}

static bool push_facts(checker *c, const mc_kexpr *cond, bool holds);

static range select_range(checker *c, const mc_kexpr *e)
{
	int mark = c->n_facts, dead = c->dead;
	bool then_runs = push_facts(c, e->a, true);
	range r = then_runs ? range_of(c, e->b) : (range){ POS_INF, NEG_INF };
	c->n_facts = mark;
	bool else_runs = push_facts(c, e->a, false);
	if (else_runs)
		r = r_union(r, range_of(c, e->c));
	c->n_facts = mark;
	c->dead = dead;
	return then_runs || else_runs ? r : unknown;
}

static range un_range(checker *c, const mc_kexpr *e)
{
	range a = range_of(c, e->a);
	switch (e->op) {
	case MC_KU_NEG: return r_neg(a);
	case MC_KU_NOT: case MC_KU_ISNAN: case MC_KU_ISINF: return (range){ 0, 1 };
	case MC_KU_ABS:
		if (a.lo >= 0)
			return a;
		return (range){ 0, max64(neg_end(a.lo), a.hi) };
	default: return unknown;
	}
}

/* The template of the kernel's top level that writes buffer out (its
 * partial sums: MC_KE_SPLITS), or NULL. */
static const mc_ktemplate *template_writing(const checker *c, int out)
{
	for (const mc_kstmt *s = c->k->body; s; s = s->next)
		if (s->kind == MC_KS_TEMPLATE && s->tmpl && s->tmpl->out == out && s->tmpl->splits >= 1)
			return s->tmpl;
	return NULL;
}

static range natural_range(checker *c, const mc_kexpr *e)
{
	if (mc_k_lanes(e) > 1 || mc_ktype_is_float(e->type))
		return unknown;
	switch (e->kind) {
	case MC_KE_CONST: return point(e->i);
	case MC_KE_VAR: return var_range(c, e->var);
	case MC_KE_UN: return un_range(c, e);
	case MC_KE_BIN: return bin_range(c, e);
	case MC_KE_SELECT: return select_range(c, e);
	case MC_KE_CAST:
		if (e->type == MC_KT_BOOL || mc_ktype_is_float(e->a->type))
			return type_range(e->type);
		return range_of(c, e->a);
	case MC_KE_FMA: return r_add(r_mul(range_of(c, e->a), range_of(c, e->b)), range_of(c, e->c));
	case MC_KE_SPLITS: {
		const mc_ktemplate *t = template_writing(c, e->buf);
		return t ? (range){ 1, t->splits } : unknown;
	}
	default: return unknown; /* loaded data */
	}
}

/* The values e may take here: its arithmetic on its operands' ranges,
 * narrowed by the facts that hold. */
static range range_of(checker *c, const mc_kexpr *e)
{
	range r = fit(e->type, natural_range(c, e));
	for (int i = 0; i < c->n_facts; i++)
		if (same_expr(c->facts[i].e, e)) {
			r.lo = max64(r.lo, c->facts[i].r.lo);
			r.hi = min64(r.hi, c->facts[i].r.hi);
		}
	return r;
}

static bool reads_mutable(const checker *c, const mc_kexpr *e)
{
	if (!e)
		return false;
	if (e->kind == MC_KE_VAR && e->var >= 0 && e->var < c->k->n_vars &&
	    c->k->vars[e->var].mutable_)
		return true;
	return reads_mutable(c, e->a) || reads_mutable(c, e->b) || reads_mutable(c, e->c);
}

/* e lies in r from here on; false if it cannot (the code never runs). A
 * fact about a mutable variable could go stale inside the branch: none is
 * kept (dropping facts only loses precision). */
static bool add_fact(checker *c, const mc_kexpr *e, range r)
{
	if (reads_mutable(c, e) || c->n_facts == MAX_FACTS)
		return true;
	range now = range_of(c, e);
	if (max64(now.lo, r.lo) > min64(now.hi, r.hi))
		return false;
	c->facts[c->n_facts++] = (fact){ e, r };
	return true;
}

static int negate_compare(int op)
{
	switch (op) {
	case MC_KB_LT: return MC_KB_GE;
	case MC_KB_LE: return MC_KB_GT;
	case MC_KB_GT: return MC_KB_LE;
	case MC_KB_GE: return MC_KB_LT;
	case MC_KB_EQ: return MC_KB_NE;
	default: return MC_KB_EQ;
	}
}

/* a < b + slack (slack 0 for <, 1 for <=) */
static bool assume_below(checker *c, const mc_kexpr *a, const mc_kexpr *b, int64_t slack)
{
	range ra = range_of(c, a), rb = range_of(c, b);
	bool ok = true;
	if (rb.hi != POS_INF)
		ok = add_fact(c, a, (range){ NEG_INF, add_end(rb.hi, slack - 1, POS_INF) });
	if (ok && ra.lo != NEG_INF)
		ok = add_fact(c, b, (range){ add_end(ra.lo, 1 - slack, NEG_INF), POS_INF });
	return ok;
}

static bool assume_compare(checker *c, int op, const mc_kexpr *a, const mc_kexpr *b)
{
	if (mc_ktype_is_float(a->type) || mc_k_lanes(a) > 1)
		return true;
	switch (op) {
	case MC_KB_LT: return assume_below(c, a, b, 0);
	case MC_KB_LE: return assume_below(c, a, b, 1);
	case MC_KB_GT: return assume_below(c, b, a, 0);
	case MC_KB_GE: return assume_below(c, b, a, 1);
	case MC_KB_EQ: {
		range ra = range_of(c, a), rb = range_of(c, b);
		return add_fact(c, a, rb) && add_fact(c, b, ra);
	}
	default: return true;
	}
}

/* Adds what `cond == holds` implies; false if that is impossible. */
static bool push_facts(checker *c, const mc_kexpr *cond, bool holds)
{
	if (!cond || mc_k_lanes(cond) > 1)
		return true;
	const mc_kexpr *init = cond->kind == MC_KE_VAR && cond->var >= 0 &&
	                       cond->var < c->k->n_vars ? c->init[cond->var] : NULL;
	if (init && c->in_scope[cond->var])
		return push_facts(c, init, holds);
	if (cond->kind == MC_KE_UN && cond->op == MC_KU_NOT)
		return push_facts(c, cond->a, !holds);
	if (cond->kind != MC_KE_BIN || cond->type != MC_KT_BOOL)
		return true;
	if (cond->a->type == MC_KT_BOOL && (cond->op == MC_KB_AND) == holds &&
	    (cond->op == MC_KB_AND || cond->op == MC_KB_OR))
		return push_facts(c, cond->a, holds) && push_facts(c, cond->b, holds);
	if (cond->op < MC_KB_LT)
		return true;
	return assume_compare(c, holds ? cond->op : negate_compare(cond->op), cond->a, cond->b);
}

/* ---- structure and types ---- */
static bool buf_ok(checker *c, int buf, const char *what)
{
	if (buf >= 0 && buf < c->k->n_bufs)
		return true;
	fail(c, "%s buffer b%d does not exist (%d buffers)", what, buf, c->k->n_bufs);
	return false;
}

static bool var_ok(checker *c, int var, const char *what)
{
	if (var >= 0 && var < c->k->n_vars)
		return true;
	fail(c, "%s variable v%d does not exist (%d variables)", what, var, c->k->n_vars);
	return false;
}

/* ---- affine forms ----
 * Intervals forget that two parts of an index move together (i - i is 0,
 * not [-9, 9]), so a range they find outside a buffer may be loose. An
 * index exactly affine in loop variables, sum of c_i * v_i + k, over
 * loops with constant bounds (a box) reaches its extremes at the box's
 * corners: that range is exact, and an access outside its buffer real. */
#define MAX_TERMS 12

typedef struct {
	bool ok;             /* exactly affine in at most MAX_TERMS loop variables */
	int n;
	int var[MAX_TERMS];
	int64_t coef[MAX_TERMS];
	int64_t k;
} affine;

static void af_term(affine *f, int var, int64_t coef)
{
	for (int i = 0; i < f->n; i++)
		if (f->var[i] == var) {
			f->ok = f->ok && !__builtin_add_overflow(f->coef[i], coef, &f->coef[i]);
			return;
		}
	if (f->n == MAX_TERMS) {
		f->ok = false;
		return;
	}
	f->var[f->n] = var;
	f->coef[f->n++] = coef;
}

/* a variable of a loop with constant bounds, visible here */
static bool box_var(const checker *c, int var)
{
	const mc_kstmt *loop = var >= 0 && var < c->k->n_vars && c->in_scope[var] ? c->loop[var] : NULL;
	return loop && mc_k_is_const(loop->a, NULL) && mc_k_is_const(loop->b, NULL);
}

/* f += scale * e, through immutable locals */
static void to_affine(checker *c, const mc_kexpr *e, int64_t scale, affine *f)
{
	int64_t v, p;
	if (!f->ok)
		return;
	bool index = e->type == MC_KT_INDEX && mc_k_lanes(e) == 1;
	bool local = index && e->kind == MC_KE_VAR && e->var >= 0 && e->var < c->k->n_vars &&
	             c->in_scope[e->var] && c->init[e->var];
	if (index && e->kind == MC_KE_CONST) {
		f->ok = !__builtin_mul_overflow(e->i, scale, &p) && !__builtin_add_overflow(f->k, p, &f->k);
	} else if (index && e->kind == MC_KE_VAR && box_var(c, e->var)) {
		af_term(f, e->var, scale);
	} else if (local) {
		to_affine(c, c->init[e->var], scale, f);
	} else if (index && e->kind == MC_KE_BIN && (e->op == MC_KB_ADD || e->op == MC_KB_SUB)) {
		to_affine(c, e->a, scale, f);
		to_affine(c, e->b, e->op == MC_KB_ADD ? scale : -scale, f);
	} else if (index && e->kind == MC_KE_BIN && e->op == MC_KB_MUL &&
	           (mc_k_is_const(e->a, &v) || mc_k_is_const(e->b, &v))) {
		f->ok = !__builtin_mul_overflow(scale, v, &p);
		to_affine(c, mc_k_is_const(e->a, NULL) ? e->b : e->a, p, f);
	} else if (index && e->kind == MC_KE_UN && e->op == MC_KU_NEG) {
		to_affine(c, e->a, -scale, f);
	} else {
		f->ok = false;
	}
}

/* The largest value of f over the box (POS_INF on overflow). */
static int64_t af_upper(const checker *c, const affine *f)
{
	int64_t hi = f->k, p;
	for (int i = 0; i < f->n; i++) {
		range vr = c->var_range[f->var[i]];
		int64_t end = f->coef[i] > 0 ? vr.hi : vr.lo;
		if (__builtin_mul_overflow(f->coef[i], end, &p))
			return POS_INF;
		hi = add_end(hi, p, POS_INF);
	}
	return hi;
}

/* The exact range of e when e is affine over the box and no guard keeps
 * part of it from running; false otherwise. */
static bool exact_range(checker *c, const mc_kexpr *e, range *r)
{
	affine f = { .ok = true }, neg = { .ok = true };
	to_affine(c, e, 1, &f);
	to_affine(c, e, -1, &neg);
	if (!f.ok || !neg.ok || c->guarded || c->may_fail)
		return false;
	*r = (range){ neg_end(af_upper(c, &neg)), af_upper(c, &f) };
	return bounded(*r);
}

/* An access of `lanes` elements at index: inside the buffer whenever the
 * index range is known. */
static bool inside(range r, int lanes, size_t count)
{
	return r.lo >= 0 && r.hi != POS_INF && (uint64_t)r.hi + (uint64_t)lanes <= count;
}

static void check_bounds(checker *c, int buf, const mc_kexpr *index, int lanes, const char *what)
{
	if (c->dead)
		return;
	size_t count = c->k->bufs[buf].count;
	range r = range_of(c, index);
	if (r.lo > r.hi || inside(r, lanes, count)) /* facts that cannot all hold, or fine */
		return;
	if (!exact_range(c, index, &r) || inside(r, lanes, count))
		return; /* not known to be wrong, or fine */
	if (r.lo < 0 || (uint64_t)r.hi + (uint64_t)lanes > count)
		fail(c, "%s b%d at [%lld, %lld]%s outside its %zu elements", what, buf, (long long)r.lo,
		     (long long)r.hi, lanes > 1 ? " (plus the vector's lanes)" : "", count);
}

static bool is_pow2(int x)
{
	return x > 1 && (x & (x - 1)) == 0;
}

static void check_expr(checker *c, const mc_kexpr *e);

/* Operands of an operation on vectors of `lanes` elements of elt: each of
 * that width and type (the builder splats scalars); RQ32's multiplier and
 * shift are i32 scalars. */
static void check_vector_operands(checker *c, const mc_kexpr *e, mc_ktype elt)
{
	const mc_kexpr *ops[3] = { e->a, e->b, e->c };
	for (int i = 0; i < 3; i++) {
		bool scalar = e->kind == MC_KE_RQ32 && i > 0 && mc_k_lanes(e->b) == 1; /* shared constants */
		if (ops[i] && (mc_k_lanes(ops[i]) != (scalar ? 1 : e->lanes) || ops[i]->type != elt) &&
		    !(e->kind == MC_KE_SELECT && i == 0))
			fail(c, "vector operand %d of a %d-lane operation: %s x %d", i, e->lanes,
			     mc_ktype_name(ops[i]->type), mc_k_lanes(ops[i]));
	}
}

static void check_vector(checker *c, const mc_kexpr *e)
{
	if (!is_pow2(e->lanes))
		fail(c, "a vector of %d lanes", e->lanes);
	/* the element type its operands have: a compare's bools come from f32 */
	mc_ktype elt = e->type == MC_KT_BOOL ? MC_KT_F32 : e->type;
	if (elt != MC_KT_F32 && elt != MC_KT_I32)
		fail(c, "a vector of %s (vectors are f32 or i32)", mc_ktype_name(e->type));
	if (e->type == MC_KT_BOOL && e->kind == MC_KE_LOAD)
		fail(c, "a vector load of bools");
	bool i32 = elt == MC_KT_I32;
	switch (e->kind) {
	case MC_KE_UN:
		if (e->op != MC_KU_NEG || i32)
			fail(c, "unary operation %d on a %s vector (only NEG of f32 has a vector form)", e->op,
			     mc_ktype_name(e->type));
		break;
	case MC_KE_BIN: {
		bool cmp = e->op >= MC_KB_LT && e->op <= MC_KB_NE;
		if (cmp && e->a->type != MC_KT_F32)
			fail(c, "a compare of %s vectors", mc_ktype_name(e->a->type));
		else if (!mc_k_vector_op(cmp ? MC_KT_F32 : elt, e->op))
			fail(c, "binary operation %d on %s vectors has no vector form", e->op,
			     mc_ktype_name(elt));
		else if ((e->op == MC_KB_SHL || e->op == MC_KB_SHR) &&
		         !(e->b->kind == MC_KE_SPLAT && e->b->a->kind == MC_KE_CONST &&
		           e->b->a->i >= (e->op == MC_KB_SHR) && e->b->a->i < 32))
			fail(c, "a vector shift by other than a constant in [0, 32) (SHR: [1, 32), NEON's)");
		if (cmp)
			elt = MC_KT_F32;
		break;
	}
	case MC_KE_DOT2: case MC_KE_DOT4: case MC_KE_RQ32:
		if (!i32)
			fail(c, "a %s vector dot2/rq32", mc_ktype_name(e->type));
		break;
	case MC_KE_FMA:
		if (i32)
			fail(c, "an i32 vector fma");
		break;
	case MC_KE_SELECT:
		if (e->a->type != MC_KT_BOOL || (mc_k_lanes(e->a) != 1 && mc_k_lanes(e->a) != e->lanes) || i32)
			fail(c, "vector select on a %s x %d condition", mc_ktype_name(e->a->type),
			     mc_k_lanes(e->a));
		break;
	case MC_KE_SPLAT:
		if (mc_k_lanes(e->a) != 1 || e->a->type != e->type)
			fail(c, "splat of a %s x %d", mc_ktype_name(e->a->type), mc_k_lanes(e->a));
		return;
	case MC_KE_BITS:
		if (mc_k_lanes(e->a) != e->lanes || e->a->type != (i32 ? MC_KT_F32 : MC_KT_I32))
			fail(c, "bits of a %s x %d as %s x %d", mc_ktype_name(e->a->type), mc_k_lanes(e->a),
			     mc_ktype_name(e->type), e->lanes);
		return;
	case MC_KE_CAST: case MC_KE_CONST: case MC_KE_LANE:
		fail(c, "a vector %s expression (kind %d)", "cast, constant or lane", e->kind);
		return;
	default:
		break;
	}
	if (e->kind != MC_KE_LOAD && e->kind != MC_KE_VAR)
		check_vector_operands(c, e, elt);
}

static bool is_bool_unop(int op)
{
	return op == MC_KU_ISNAN || op == MC_KU_ISINF || op == MC_KU_NOT;
}

static void check_scalar(checker *c, const mc_kexpr *e)
{
	const mc_kexpr *ops[3] = { e->a, e->b, e->c };
	for (int i = 0; i < 3; i++)
		if (ops[i] && mc_k_lanes(ops[i]) != 1 && e->kind != MC_KE_LANE)
			fail(c, "a %d-lane vector as operand %d of a scalar expression (kind %d)",
			     mc_k_lanes(ops[i]), i, e->kind);
	switch (e->kind) {
	case MC_KE_UN:
		if (e->type != (is_bool_unop(e->op) ? MC_KT_BOOL : e->a->type))
			fail(c, "unary operation %d on %s gives %s", e->op, mc_ktype_name(e->a->type),
			     mc_ktype_name(e->type));
		else if ((e->op == MC_KU_SXTB16 || e->op == MC_KU_SXTB16_HI) && e->type != MC_KT_I32)
			fail(c, "sxtb16 on %s", mc_ktype_name(e->type));
		break;
	case MC_KE_DOT2: case MC_KE_DOT4: case MC_KE_RQ32:
		if (e->type != MC_KT_I32 || e->a->type != MC_KT_I32 || e->b->type != MC_KT_I32 ||
		    e->c->type != MC_KT_I32)
			fail(c, "dot2/rq32 of %s, %s and %s gives %s", mc_ktype_name(e->a->type),
			     mc_ktype_name(e->b->type), mc_ktype_name(e->c->type), mc_ktype_name(e->type));
		break;
	case MC_KE_BIN: {
		bool cmp = e->op >= MC_KB_LT && e->op <= MC_KB_NE;
		if (e->a->type != e->b->type)
			fail(c, "binary operation %d on %s and %s", e->op, mc_ktype_name(e->a->type),
			     mc_ktype_name(e->b->type));
		else if (e->type != (cmp ? MC_KT_BOOL : e->a->type))
			fail(c, "binary operation %d on %s gives %s", e->op, mc_ktype_name(e->a->type),
			     mc_ktype_name(e->type));
		break;
	}
	case MC_KE_SELECT:
		if (e->a->type != MC_KT_BOOL)
			fail(c, "select on a %s condition", mc_ktype_name(e->a->type));
		else if (e->b->type != e->type || e->c->type != e->type)
			fail(c, "select of %s and %s gives %s", mc_ktype_name(e->b->type),
			     mc_ktype_name(e->c->type), mc_ktype_name(e->type));
		break;
	case MC_KE_FMA:
		if (e->a->type != e->type || e->b->type != e->type || e->c->type != e->type)
			fail(c, "fma of %s, %s and %s gives %s", mc_ktype_name(e->a->type),
			     mc_ktype_name(e->b->type), mc_ktype_name(e->c->type), mc_ktype_name(e->type));
		break;
	case MC_KE_SPLAT:
		fail(c, "a splat to %d lanes", e->lanes);
		break;
	case MC_KE_BITS:
		if (!((e->type == MC_KT_F32 && e->a->type == MC_KT_I32) ||
		      (e->type == MC_KT_I32 && e->a->type == MC_KT_F32)))
			fail(c, "bits of %s as %s", mc_ktype_name(e->a->type), mc_ktype_name(e->type));
		break;
	case MC_KE_LANE:
		if (mc_k_lanes(e->a) == 1 || e->i < 0 || e->i >= mc_k_lanes(e->a) || e->type != e->a->type)
			fail(c, "lane %lld of a %s x %d", (long long)e->i, mc_ktype_name(e->a->type),
			     mc_k_lanes(e->a));
		break;
	default:
		break;
	}
}

static void check_var_use(checker *c, const mc_kexpr *e)
{
	if (!var_ok(c, e->var, "reads"))
		return;
	const mc_kvar *v = &c->k->vars[e->var];
	if (!c->in_scope[e->var])
		fail(c, "v%d is read where it is not declared", e->var);
	else if (v->type != e->type || (v->lanes > 1 ? v->lanes : 1) != mc_k_lanes(e))
		fail(c, "v%d (%s x %d) read as %s x %d", e->var, mc_ktype_name(v->type),
		     v->lanes > 1 ? v->lanes : 1, mc_ktype_name(e->type), mc_k_lanes(e));
}

static void check_load(checker *c, const mc_kexpr *e)
{
	if (!buf_ok(c, e->buf, "a load from"))
		return;
	const mc_kbuf *b = &c->k->bufs[e->buf];
	bool vec = mc_k_lanes(e) > 1;
	if (vec && b->dtype != MC_FLOAT && !mc_k_int_vector_dtype(b->dtype))
		fail(c, "a vector load from b%d (%s)", e->buf, mc_dtype_name(b->dtype));
	else if (e->stride != 0 && (e->stride != 2 || !vec || (b->dtype != MC_INT8 && b->dtype != MC_UINT8)))
		fail(c, "a load of stride %d from b%d (%s)", e->stride, e->buf, mc_dtype_name(b->dtype));
	else if (e->type != (vec && b->dtype != MC_FLOAT ? MC_KT_I32 : mc_ktype_of(b->dtype)))
		fail(c, "a load from b%d (%s) typed %s", e->buf, mc_dtype_name(b->dtype),
		     mc_ktype_name(e->type));
	else if (e->a->type != MC_KT_INDEX || mc_k_lanes(e->a) != 1)
		fail(c, "b%d indexed by a %s x %d", e->buf, mc_ktype_name(e->a->type), mc_k_lanes(e->a));
	else
		check_bounds(c, e->buf, e->a, mc_k_lanes(e) * (e->stride == 2 ? 2 : 1), "a load from");
}

/* Operands present as the kind needs them. */
static bool shape_ok(checker *c, const mc_kexpr *e)
{
	static const int operands[] = {
		[MC_KE_CONST] = 0, [MC_KE_VAR] = 0, [MC_KE_LOAD] = 1, [MC_KE_UN] = 1, [MC_KE_BIN] = 2,
		[MC_KE_SELECT] = 3, [MC_KE_CAST] = 1, [MC_KE_FMA] = 3, [MC_KE_SPLAT] = 1, [MC_KE_LANE] = 1,
		[MC_KE_DOT2] = 3, [MC_KE_RQ32] = 3, [MC_KE_DOT4] = 3, [MC_KE_BITS] = 1, [MC_KE_SPLITS] = 0,
		[MC_KE_DIM] = 0,
	};
	if ((unsigned)e->kind > MC_KE_DIM) {
		fail(c, "an expression of unknown kind %d", e->kind);
		return false;
	}
	int n = operands[e->kind];
	if ((n >= 1) != !!e->a || (n >= 2) != !!e->b || (n >= 3) != !!e->c) {
		fail(c, "an expression of kind %d without its %d operands", e->kind, n);
		return false;
	}
	if (e->type == MC_KT_VOID || (unsigned)e->type > MC_KT_INDEX) {
		fail(c, "an expression (kind %d) of type %s", e->kind, mc_ktype_name(e->type));
		return false;
	}
	return true;
}

static void check_expr(checker *c, const mc_kexpr *e)
{
	if (c->failed || !shape_ok(c, e))
		return;
	if (e->kind == MC_KE_SELECT && mc_k_lanes(e->a) == 1) {
		/* C evaluates only the branch the condition picks */
		int mark = c->n_facts, dead = c->dead;
		check_expr(c, e->a);
		c->guarded++;
		if (!push_facts(c, e->a, true))
			c->dead++;
		check_expr(c, e->b);
		c->n_facts = mark;
		c->dead = dead;
		if (!push_facts(c, e->a, false))
			c->dead++;
		check_expr(c, e->c);
		c->n_facts = mark;
		c->dead = dead;
		c->guarded--;
	} else {
		if (e->a)
			check_expr(c, e->a);
		if (e->b)
			check_expr(c, e->b);
		if (e->c)
			check_expr(c, e->c);
	}
	if (c->failed)
		return;
	if (mc_k_lanes(e) > 1)
		check_vector(c, e);
	else
		check_scalar(c, e);
	if (e->kind == MC_KE_VAR)
		check_var_use(c, e);
	else if (e->kind == MC_KE_LOAD)
		check_load(c, e);
	else if (e->kind == MC_KE_SPLITS && (e->type != MC_KT_INDEX || !template_writing(c, e->buf)))
		fail(c, "the splits of b%d, which no template of the kernel writes", e->buf);
}

/* ---- statements ---- */
static void check_block(checker *c, const mc_kstmt *s);

static void check_for(checker *c, const mc_kstmt *s)
{
	unsigned known = MC_KF_UNROLL | MC_KF_VECTOR | MC_KF_PARALLEL | MC_KF_REDUCE | MC_KF_SPLIT_ANY;
	check_expr(c, s->a);
	check_expr(c, s->b);
	if (c->failed || !var_ok(c, s->var, "a loop over"))
		return;
	const mc_kvar *v = &c->k->vars[s->var];
	if (!v->is_loop || v->mutable_ || v->type != MC_KT_INDEX || v->lanes > 1)
		fail(c, "loop variable v%d is not an index loop variable", s->var);
	else if (c->declared[s->var])
		fail(c, "loop variable v%d declared twice", s->var);
	else if (s->a->type != MC_KT_INDEX || s->b->type != MC_KT_INDEX ||
	         mc_k_lanes(s->a) != 1 || mc_k_lanes(s->b) != 1)
		fail(c, "loop v%d over [%s, %s)", s->var, mc_ktype_name(s->a->type),
		     mc_ktype_name(s->b->type));
	else if (s->flags & ~known)
		fail(c, "loop v%d has unknown flags %#x", s->var, s->flags & ~known);
	else if ((s->flags & MC_KF_PARALLEL) && (s->flags & MC_KF_REDUCE))
		fail(c, "loop v%d is marked both parallel and a reduction", s->var);
	else if ((s->flags & MC_KF_SPLIT_ANY) && !(s->flags & MC_KF_PARALLEL))
		fail(c, "loop v%d is to split but not parallel", s->var);
	if (c->failed)
		return;
	range begin = range_of(c, s->a), end = range_of(c, s->b);
	range r = { begin.lo, end.hi == POS_INF ? POS_INF : end.hi - 1 };
	int dead = c->dead;
	if (!is_inf(r.lo) && !is_inf(r.hi) && r.lo > r.hi)
		c->dead++; /* never runs */
	/* a loop with computed bounds may not run for some outer iterations */
	int guarded = c->guarded;
	if (!mc_k_is_const(s->a, NULL) || !mc_k_is_const(s->b, NULL))
		c->guarded++;
	unsigned flags = c->loop_flags;
	c->declared[s->var] = c->in_scope[s->var] = true;
	c->var_range[s->var] = r;
	c->loop[s->var] = s;
	c->loops++;
	c->loop_flags = s->flags;
	check_block(c, s->body);
	c->loops--;
	c->loop_flags = flags;
	c->in_scope[s->var] = false;
	c->dead = dead;
	c->guarded = guarded; /* a BREAK guards the rest of its loop only */
}

static void check_decl(checker *c, const mc_kstmt *s)
{
	check_expr(c, s->a);
	if (c->failed || !var_ok(c, s->var, "a declaration of"))
		return;
	const mc_kvar *v = &c->k->vars[s->var];
	int lanes = v->lanes > 1 ? v->lanes : 1;
	if (v->is_loop)
		fail(c, "loop variable v%d declared as a local", s->var);
	else if (c->declared[s->var])
		fail(c, "v%d declared twice", s->var);
	else if (v->type != s->a->type || lanes != mc_k_lanes(s->a))
		fail(c, "v%d (%s x %d) declared with a %s x %d", s->var, mc_ktype_name(v->type), lanes,
		     mc_ktype_name(s->a->type), mc_k_lanes(s->a));
	if (c->failed)
		return;
	c->declared[s->var] = c->in_scope[s->var] = true;
	c->var_range[s->var] = lanes == 1 && !v->mutable_ ? range_of(c, s->a) : unknown;
	c->init[s->var] = v->mutable_ ? NULL : s->a;
	c->scope[c->n_scope++] = s->var;
}

static void check_assign(checker *c, const mc_kstmt *s)
{
	check_expr(c, s->a);
	if (c->failed || !var_ok(c, s->var, "an assignment to"))
		return;
	const mc_kvar *v = &c->k->vars[s->var];
	int lanes = v->lanes > 1 ? v->lanes : 1;
	if (!c->in_scope[s->var])
		fail(c, "v%d assigned where it is not declared", s->var);
	else if (!v->mutable_ || v->is_loop)
		fail(c, "v%d assigned but not mutable", s->var);
	else if (v->type != s->a->type || lanes != mc_k_lanes(s->a))
		fail(c, "v%d (%s x %d) assigned a %s x %d", s->var, mc_ktype_name(v->type), lanes,
		     mc_ktype_name(s->a->type), mc_k_lanes(s->a));
}

static void check_store(checker *c, const mc_kstmt *s)
{
	check_expr(c, s->a);
	check_expr(c, s->b);
	if (c->failed || !buf_ok(c, s->buf, "a store into"))
		return;
	const mc_kbuf *b = &c->k->bufs[s->buf];
	int lanes = mc_k_lanes(s->b);
	if (!b->written)
		fail(c, "a store into b%d, which is not marked written", s->buf);
	else if (s->a->type != MC_KT_INDEX || mc_k_lanes(s->a) != 1)
		fail(c, "b%d indexed by a %s x %d", s->buf, mc_ktype_name(s->a->type), mc_k_lanes(s->a));
	else if (lanes > 1 && b->dtype != MC_FLOAT && !mc_k_int_vector_dtype(b->dtype))
		fail(c, "a vector store into b%d (%s)", s->buf, mc_dtype_name(b->dtype));
	else if (s->b->type != (lanes > 1 && b->dtype != MC_FLOAT ? MC_KT_I32 : mc_ktype_of(b->dtype)))
		fail(c, "a %s stored into b%d (%s)", mc_ktype_name(s->b->type), s->buf,
		     mc_dtype_name(b->dtype));
	else
		check_bounds(c, s->buf, s->a, lanes, "a store into");
}

static void check_if(checker *c, const mc_kstmt *s)
{
	check_expr(c, s->a);
	if (c->failed)
		return;
	if (s->a->type != MC_KT_BOOL || mc_k_lanes(s->a) != 1) {
		fail(c, "if on a %s x %d", mc_ktype_name(s->a->type), mc_k_lanes(s->a));
		return;
	}
	int mark = c->n_facts, dead = c->dead;
	c->guarded++;
	if (!push_facts(c, s->a, true))
		c->dead++;
	check_block(c, s->body);
	c->n_facts = mark;
	c->dead = dead;
	if (!push_facts(c, s->a, false))
		c->dead++;
	check_block(c, s->orelse);
	c->n_facts = mark;
	c->dead = dead;
	c->guarded--;
}

/* A buffer a template reads or writes: of dtype, not transient, `need`
 * elements from `at` (NULL: index 0) inside it, marked written where the
 * template writes it; buf -1 passes where it is optional. */
typedef struct {
	int buf;
	const char *what;
	const mc_kexpr *at;
	int64_t need;
	bool written, optional;
} tmpl_buf;

static bool check_template_bufs(checker *c, const tmpl_buf *use, int n, mc_dtype dtype)
{
	for (int i = 0; i < n && !c->failed; i++) {
		const tmpl_buf *u = &use[i];
		if (u->optional && u->buf == -1)
			continue;
		if (!buf_ok(c, u->buf, u->what))
			return false;
		const mc_kbuf *b = &c->k->bufs[u->buf];
		if (b->dtype != dtype || b->transient || (int64_t)b->count < u->need) {
			fail(c, "%s b%d: %zu %s%s for %" PRId64 " %s", u->what, u->buf, b->count, mc_dtype_name(b->dtype),
			     b->transient ? " transient" : "", u->need, mc_dtype_name(dtype));
			return false;
		}
		if (u->written && !b->written) {
			fail(c, "%s b%d is not marked written", u->what, u->buf);
			return false;
		}
		if (!u->at)
			continue;
		check_expr(c, u->at);
		if (c->failed)
			return false;
		if (u->at->type != MC_KT_INDEX || mc_k_lanes(u->at) != 1) {
			fail(c, "%s b%d indexed by a %s", u->what, u->buf, mc_ktype_name(u->at->type));
			return false;
		}
		check_bounds(c, u->buf, u->at, (int)u->need, u->what);
	}
	return !c->failed;
}

/* DOT2_TILES reads and writes its buffers from index 0 (kir.h), the
 * weights from wt_at: each of them i32 and long enough for the shape the
 * template states. */
static void check_dot2_tiles(checker *c, const mc_ktemplate *t)
{
	if (!((t->tm == 2 && t->tp == 3) || (t->tm == 4 && t->tp == 1)) || t->kp <= 0 || t->kp % mc_dot2_kp_multiple(t->tm) ||
	    t->tiles <= 0 || t->kp > INT32_MAX / 12 || t->tiles > INT32_MAX / 12) {
		fail(c, "dot2 tiles of %" PRId64 " x %" PRId64 ", kp %" PRId64 ", %" PRId64 " tiles",
		     t->tm, t->tp, t->kp, t->tiles);
		return;
	}
	const tmpl_buf use[3] = {
		{ t->x, "template input", NULL, t->kp * t->tp, false, false },
		{ t->wt, "template weight", t->wt_at, t->tiles * (t->tm + t->kp * (t->tm / 2)), false, false },
		{ t->out, "template output", NULL, t->tiles * t->tm * t->tp, true, false },
	};
	check_template_bufs(c, use, 3, MC_INT32);
}

static void check_s8_pairs(checker *c, const mc_ktemplate *t)
{
	if (t->kp <= 0 || t->kp % 2 || t->kp > INT32_MAX / 2) {
		fail(c, "s8 pairs of kp %" PRId64, t->kp);
		return;
	}
	const tmpl_buf in = { t->x, "template input", t->x_at, 2 * t->kp, false, false };
	const tmpl_buf out = { t->out, "template output", NULL, t->kp, true, false };
	if (check_template_bufs(c, &in, 1, MC_INT8))
		check_template_bufs(c, &out, 1, MC_INT32);
}

/* GEMV_F32 reads wt, bias and x (from x_at) and writes out (kir.h): f32
 * buffers long enough for kp x tiles blocks. */
static void check_gemv_f32(checker *c, const mc_ktemplate *t)
{
	if (t->kp <= 0 || t->tiles <= 0 || t->kp > INT32_MAX / (4 * MC_GEMV_BLOCK) ||
	    t->tiles > INT32_MAX / (4 * MC_GEMV_BLOCK) || t->kp * t->tiles > INT32_MAX / (4 * MC_GEMV_BLOCK)) {
		fail(c, "gemv f32 of k %" PRId64 ", %" PRId64 " blocks", t->kp, t->tiles);
		return;
	}
	const tmpl_buf use[4] = {
		{ t->wt, "template weight", NULL, t->kp * t->tiles * MC_GEMV_BLOCK, false, false },
		{ t->bias, "template bias", NULL, t->tiles * MC_GEMV_BLOCK, false, true },
		{ t->out, "template output", NULL, t->tiles * MC_GEMV_BLOCK, true, false },
		{ t->x, "template input", t->x_at, t->kp, false, false },
	};
	check_template_bufs(c, use, 4, MC_FLOAT);
}

/* GRU_GATES and LSTM_GATES: f32 buffers of 3 or 4 kp (x, wt), kp (out
 * and the LSTM's cell), MC_KMATH_GATE_CONSTS (consts) and Y's row at
 * y_at; the body, the same computation in plain IR, checked as any block. */
static void check_rnn_gates(checker *c, const mc_kstmt *s)
{
	const mc_ktemplate *t = s->tmpl;
	bool lstm = t->kind == MC_TMPL_LSTM_GATES;
	int64_t gates = lstm ? 4 : 3;
	if (t->kp <= 0 || t->kp > INT32_MAX / 16) {
		fail(c, "recurrent gates of %" PRId64 " units", t->kp);
		return;
	}
	const tmpl_buf use[6] = {
		{ t->x, "template input", NULL, gates * t->kp, false, false },
		{ t->wt, "template state product", NULL, gates * t->kp, false, false },
		{ t->out, "template state", NULL, t->kp, true, false },
		{ t->consts, "template constants", NULL, MC_KMATH_GATE_CONSTS, false, false },
		{ t->y, "template output", t->y_at, t->kp, true, true },
		{ lstm ? t->cell : -1, "template cell state", NULL, t->kp, true, !lstm },
	};
	if (!check_template_bufs(c, use, 6, MC_FLOAT))
		return;
	if (!s->body)
		fail(c, "recurrent gates without the body that computes them");
	else
		check_block(c, s->body);
}

/* cblas_sgemm's operands: row-major, each as stored (its row stride at
 * least its row) or transposed. */
static bool sgemm_strides_ok(const mc_ktemplate *t)
{
	bool a = (t->a_st[2] == 1 && t->a_st[1] >= t->cin) || (t->a_st[1] == 1 && t->a_st[2] >= t->cout);
	bool b = (t->b_st[2] == 1 && t->b_st[1] >= t->ow) || (t->b_st[1] == 1 && t->b_st[2] >= t->cin);
	return a && b && t->a_st[0] >= 0 && t->b_st[0] >= 0;
}

static void check_template(checker *c, const mc_kstmt *s)
{
	const mc_ktemplate *t = s->tmpl;
	if (!t) {
		fail(c, "a template statement without its template");
		return;
	}
	if (t->kind == MC_TMPL_GEMV_F32) {
		check_gemv_f32(c, t);
		return;
	}
	if (t->kind == MC_TMPL_GRU_GATES || t->kind == MC_TMPL_LSTM_GATES) {
		check_rnn_gates(c, s);
		return;
	}
	if (t->kind == MC_TMPL_DOT2_TILES || t->kind == MC_TMPL_S8_PAIRS) {
		(t->kind == MC_TMPL_DOT2_TILES ? check_dot2_tiles : check_s8_pairs)(c, t);
		return;
	}
	if (t->kind == MC_TMPL_SGEMM && !sgemm_strides_ok(t)) {
		fail(c, "sgemm template: an operand neither as stored nor transposed");
		return;
	}
	if ((t->kind == MC_TMPL_GEMM || t->kind == MC_TMPL_SGEMM) && c->depth == 1 &&
	    buf_ok(c, t->wt, "template input") && buf_ok(c, t->x, "template input") &&
	    buf_ok(c, t->out, "template output")) {
		/* the operands' last elements within their buffers */
		int64_t a_end = (t->n - 1) * t->a_st[0] + (t->cout - 1) * t->a_st[1] + (t->cin - 1) * t->a_st[2];
		int64_t b_end = (t->n - 1) * t->b_st[0] + (t->cin - 1) * t->b_st[1] + (t->ow - 1) * t->b_st[2];
		if (t->n < 1 || t->cout < 1 || t->cin < 1 || t->ow < 1 || a_end >= (int64_t)c->k->bufs[t->wt].count ||
		    b_end >= (int64_t)c->k->bufs[t->x].count) {
			fail(c, "gemm template reads past its operands b%d, b%d", t->wt, t->x);
			return;
		}
		if (t->kind == MC_TMPL_SGEMM && t->n * t->cout * t->ow > (int64_t)c->k->bufs[t->out].count) {
			fail(c, "sgemm template writes past its output b%d", t->out);
			return;
		}
	}
	if (t->kind == MC_TMPL_ATTENTION && c->depth == 1 && buf_ok(c, t->x, "template input") &&
	    buf_ok(c, t->wt, "template input") && buf_ok(c, t->v, "template input") &&
	    (t->mask < 0 || buf_ok(c, t->mask, "template input"))) {
		/* each operand's last element within its buffer */
		const int64_t ext[5][4] = { { t->n, t->hq, t->sq, t->hd }, { t->n, t->hkv, t->skv, t->hd },
		                            { t->n, t->hkv, t->skv, t->hdv }, { t->n, t->hq, t->sq, t->skv },
		                            { t->n, t->hq, t->sq, t->hdv } };
		const int64_t *st[5] = { t->q_st, t->k_st, t->v_st, t->m_st, t->y_st };
		const int bufs[5] = { t->x, t->wt, t->v, t->mask, t->out };
		const int64_t first[5] = { t->q_at, t->k_at, t->v_at, 0, 0 };
		for (int o = 0; o < 5; o++) {
			int64_t end = first[o];
			for (int d = 0; d < 4; d++)
				end += (ext[o][d] - 1) * st[o][d];
			if (bufs[o] >= 0 && (t->hq < 1 || t->hkv < 1 || t->hq % t->hkv || ext[o][2] < 1 || ext[o][3] < 1 ||
			                     first[o] < 0 ||
			                     end >= (int64_t)c->k->bufs[bufs[o]].count)) {
				fail(c, "attention template reaches past b%d", bufs[o]);
				return;
			}
		}
	}
	if (c->depth != 1)
		fail(c, "a template inside a loop or if");
	else if (buf_ok(c, t->x, "template input") && buf_ok(c, t->wt, "template weight") &&
	         buf_ok(c, t->out, "template output") && !c->k->bufs[t->out].written)
		fail(c, "template output b%d is not marked written", t->out);
}

static void check_stmt(checker *c, const mc_kstmt *s)
{
	switch (s->kind) {
	case MC_KS_FOR: check_for(c, s); return;
	case MC_KS_DECL: check_decl(c, s); return;
	case MC_KS_ASSIGN: check_assign(c, s); return;
	case MC_KS_STORE: check_store(c, s); return;
	case MC_KS_IF: check_if(c, s); return;
	case MC_KS_BREAK:
		c->guarded++; /* the rest of the loop may not run */
		if (!c->loops)
			fail(c, "break outside a loop");
		else if (c->loop_flags & MC_KF_PARALLEL)
			fail(c, "break out of a parallel loop");
		return;
	case MC_KS_FAIL:
		c->may_fail = true;
		if (s->code <= MC_STATUS_OK)
			fail(c, "fail with status %d (not an error)", s->code);
		return;
	case MC_KS_TEMPLATE: check_template(c, s); return;
	}
	fail(c, "a statement of unknown kind %d", s->kind);
}

static void check_block(checker *c, const mc_kstmt *s)
{
	int mark = c->n_scope;
	c->depth++;
	for (; s && !c->failed; s = s->next)
		check_stmt(c, s);
	c->depth--;
	while (c->n_scope > mark)
		c->in_scope[c->scope[--c->n_scope]] = false;
}

int mc_kernel_check(const mc_kernel *k, char *why, size_t n)
{
	size_t nv = (size_t)k->n_vars + 1;
	checker c = { .k = k, .why = why, .why_len = n };
	c.in_scope = mc_xcalloc(nv, sizeof *c.in_scope);
	c.declared = mc_xcalloc(nv, sizeof *c.declared);
	c.var_range = mc_xcalloc(nv, sizeof *c.var_range);
	c.init = mc_xcalloc(nv, sizeof *c.init);
	c.loop = mc_xcalloc(nv, sizeof *c.loop);
	c.scope = mc_xcalloc(nv, sizeof *c.scope);
	if (why && n)
		why[0] = 0;
	check_block(&c, k->body);
	free(c.in_scope);
	free(c.declared);
	free(c.var_range);
	free(c.init);
	free(c.loop);
	free(c.scope);
	return c.failed ? -1 : 0;
}

int mc_program_check(const mc_program *p)
{
	char why[512];
	for (int i = 0; i < p->n_kernels; i++)
		if (mc_kernel_check(p->kernels[i], why, sizeof why)) {
			mc_error("internal error: kernel IR: %s", why);
			return -1;
		}
	return 0;
}
