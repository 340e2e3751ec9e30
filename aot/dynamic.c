/* --dim NAME=LO..HI: one library for every size of a symbolic dimension.
 *
 * The lowerings are written for constant shapes, and tuned for them. So
 * rather than teach each one symbols, the program is built at every size
 * d in [LO, HI] and the kernels are merged: kernels of the same name whose
 * IR is the same statement for statement, integer constants apart, become
 * one version, each such constant the polynomial in d (degree 2 at most,
 * rational, exact at every size it serves) that gives it at every member
 * size: a loop bound d, a stride 256 d, the d^2 of a [heads, d, d] block.
 * Where the statements differ (a rest tile that exists at one size and
 * not the next, a loop folded away at one iteration), the kernel keeps a
 * version per class of sizes, and the run function picks it by the size.
 * Each size's code is then exactly the code the compiler makes for that
 * size alone, which is what makes it correct at every size, and as fast.
 *
 * Memory is planned once, at HI, in HI's kernel order; every buffer at a
 * smaller size must fit its place there (checked), and a weight that
 * depends on the size (a position table sliced to the sequence) must be a
 * prefix of HI's. The program emitted is HI's with its kernels replaced
 * by the versions (mc_program.dyn). */
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "../freezing/freezing.h"

/* More versions than this for one kernel is refused: its lowering depends
 * on the size in a way the merge cannot express (the message names it). */
#define MAX_VERSIONS 24

/* realloc that aborts on OOM, as mc_xmalloc (IR-sized, never model data) */
static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		abort();
	return q;
}

/* The integer constants of a kernel, in walk order. */
typedef struct {
	int64_t *v;
	int n, cap;
} slots;

static void push_slot(slots *s, int64_t v)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 256;
		s->v = xrealloc(s->v, (size_t)s->cap * sizeof *s->v);
	}
	s->v[s->n++] = v;
}

/* An integer constant of a scalar: a number that may depend on the size. */
static bool is_slot(const mc_kexpr *e)
{
	return e->kind == MC_KE_CONST && e->lanes <= 1 && e->type != MC_KT_BOOL && !mc_ktype_is_float(e->type);
}

/* ---- the same IR, integer constants apart ---- */
static bool same_expr(const mc_kexpr *a, const mc_kexpr *b, slots *out)
{
	if (!a || !b)
		return a == b;
	if (a->kind != b->kind || a->type != b->type || a->op != b->op || a->var != b->var ||
	    a->buf != b->buf || a->lanes != b->lanes || a->stride != b->stride)
		return false;
	if (is_slot(a))
		push_slot(out, b->i);
	else if (a->i != b->i || memcmp(&a->f, &b->f, sizeof a->f) != 0) {
		return false;
	}
	return same_expr(a->a, b->a, out) && same_expr(a->b, b->b, out) && same_expr(a->c, b->c, out);
}

static bool same_template(const mc_ktemplate *a, const mc_ktemplate *b, slots *out)
{
	/* every number of a template the same: targets print them as they are */
	mc_ktemplate x = *a, y = *b;
	x.y_at = x.wt_at = x.x_at = NULL;
	y.y_at = y.wt_at = y.x_at = NULL;
#define SAME(f) (memcmp(&x.f, &y.f, sizeof x.f) == 0)
	bool same = SAME(kind) && SAME(n) && SAME(cin) && SAME(h) && SAME(w) && SAME(cout) && SAME(kh) &&
	            SAME(kw) && SAME(oh) && SAME(ow) && SAME(sh) && SAME(sw) && SAME(ph) && SAME(pw) &&
	            SAME(dh) && SAME(dw) && SAME(splits) && SAME(k_split) && SAME(mma) && SAME(k_step) &&
	            SAME(wt_tf32) && SAME(x_tf32) && SAME(a_st) && SAME(b_st) && SAME(hq) && SAME(hkv) &&
	            SAME(sq) && SAME(skv) && SAME(hd) && SAME(hdv) && SAME(q_st) && SAME(k_st) &&
	            SAME(v_st) && SAME(m_st) && SAME(y_st) && SAME(q_at) && SAME(k_at) && SAME(v_at) &&
	            SAME(v) && SAME(mask) && SAME(scale) && SAME(direct) && SAME(nhwc) && SAME(x) &&
	            SAME(wt) && SAME(out) && SAME(bias) && SAME(y) && SAME(consts) && SAME(cell) &&
	            SAME(kp) && SAME(tm) && SAME(tp) && SAME(tiles);
#undef SAME
	return same && same_expr(a->y_at, b->y_at, out) && same_expr(a->wt_at, b->wt_at, out) &&
	       same_expr(a->x_at, b->x_at, out);
}

static bool same_block(const mc_kstmt *a, const mc_kstmt *b, slots *out)
{
	for (; a && b; a = a->next, b = b->next) {
		if (a->kind != b->kind || a->var != b->var || a->buf != b->buf || a->code != b->code ||
		    a->flags != b->flags || !!a->tmpl != !!b->tmpl)
			return false;
		if (!same_expr(a->a, b->a, out) || !same_expr(a->b, b->b, out) || !same_expr(a->c, b->c, out))
			return false;
		if (a->tmpl && !same_template(a->tmpl, b->tmpl, out))
			return false;
		if (!same_block(a->body, b->body, out) || !same_block(a->orelse, b->orelse, out))
			return false;
	}
	return !a && !b;
}

/* Buffers and variables alike (places are HI's, checked apart). */
static bool same_kernel(const mc_kernel *a, const mc_kernel *b, slots *out)
{
	if (a->n_bufs != b->n_bufs || a->n_vars != b->n_vars || a->inplace_input0 != b->inplace_input0 ||
	    a->inplace_grows != b->inplace_grows)
		return false;
	for (int i = 0; i < a->n_bufs; i++) {
		const mc_kbuf *x = &a->bufs[i], *y = &b->bufs[i];
		if (x->dtype != y->dtype || x->written != y->written || x->transient != y->transient ||
		    x->grows_over != y->grows_over || x->copies != y->copies || x->loc.kind != y->loc.kind)
			return false;
	}
	for (int i = 0; i < a->n_vars; i++) {
		const mc_kvar *x = &a->vars[i], *y = &b->vars[i];
		if (x->type != y->type || x->mutable_ != y->mutable_ || x->is_loop != y->is_loop ||
		    x->lanes != y->lanes)
			return false;
	}
	return same_block(a->body, b->body, out);
}

/* ---- polynomials through exact points ---- */
typedef __int128 wide;

static wide wabs(wide x)
{
	return x < 0 ? -x : x;
}

static wide wgcd(wide a, wide b)
{
	a = wabs(a);
	b = wabs(b);
	while (b) {
		wide t = a % b;
		a = b;
		b = t;
	}
	return a;
}

static wide poly_num(const wide c[3], int64_t d)
{
	return (c[2] * d + c[1]) * d + c[0];
}

int64_t mc_dyn_poly_at(const mc_dyn_poly *q, int64_t d)
{
	wide c[3] = { q->c[0], q->c[1], q->c[2] };
	return (int64_t)(poly_num(c, d) / q->den);
}

bool mc_dyn_poly_const(const mc_dyn_poly *q)
{
	return q->c[1] == 0 && q->c[2] == 0 && q->den == 1;
}

/* The polynomial of degree < n_pts through the first n_pts points (1 to
 * 3, sizes distinct) that gives v[i] at s[i] for every i < n exactly,
 * its coefficients and every partial sum of its evaluation within
 * [-limit, limit] at those sizes. */
static bool fit_through(const int64_t *s, const int64_t *v, int n, int n_pts, int64_t limit, mc_dyn_poly *q)
{
	wide c[3] = { 0, 0, 0 }, den = 1;
	if (n_pts == 1) {
		c[0] = v[0];
	} else if (n_pts == 2) {
		/* v0 (s1 - d) + v1 (d - s0), over s1 - s0 */
		c[1] = (wide)v[1] - v[0];
		c[0] = (wide)v[0] * s[1] - (wide)v[1] * s[0];
		den = (wide)s[1] - s[0];
	} else {
		/* Lagrange over the common denominator (s0-s1)(s0-s2)(s1-s2) */
		wide d01 = (wide)s[0] - s[1], d02 = (wide)s[0] - s[2], d12 = (wide)s[1] - s[2];
		wide w[3] = { (wide)v[0] * d12, -(wide)v[1] * d02, (wide)v[2] * d01 };
		for (int i = 0; i < 3; i++) {
			int64_t p = s[(i + 1) % 3], r = s[(i + 2) % 3]; /* (d - p)(d - r) */
			c[2] += w[i];
			c[1] -= w[i] * ((wide)p + r);
			c[0] += w[i] * ((wide)p * r);
		}
		den = d01 * d02 * d12;
	}
	if (den < 0) {
		den = -den;
		for (int i = 0; i < 3; i++)
			c[i] = -c[i];
	}
	wide g = wgcd(wgcd(wgcd(c[0], c[1]), c[2]), den);
	if (g > 1) {
		den /= g;
		for (int i = 0; i < 3; i++)
			c[i] /= g;
	}
	for (int i = 0; i < 3; i++)
		if (wabs(c[i]) > limit)
			return false;
	if (den > limit)
		return false;
	for (int i = 0; i < n; i++) {
		wide t2 = c[2] * s[i], t1 = t2 * s[i] + c[1] * s[i], num = t1 + c[0];
		if (wabs(t2) > limit || wabs(t1) > limit || wabs(num) > limit || wabs(c[1] * s[i]) > limit)
			return false;
		if (num % den != 0 || num / den != v[i])
			return false;
	}
	*q = (mc_dyn_poly){ { (int64_t)c[0], (int64_t)c[1], (int64_t)c[2] }, (int64_t)den };
	return true;
}

bool mc_dyn_fit(const int64_t *s, const int64_t *v, int n, int64_t limit, mc_dyn_poly *q)
{
	/* the same at every size: the number stays the literal it is (in its
	 * own type, however large), no arithmetic in the index type */
	int same = 1;
	while (same < n && v[same] == v[0])
		same++;
	if (same == n) {
		*q = (mc_dyn_poly){ { n > 0 ? v[0] : 0, 0, 0 }, 1 };
		return true;
	}
	for (int k = 2; k <= 3 && k <= n; k++)
		if (fit_through(s, v, n, k, limit, q))
			return true;
	return false;
}

/* ---- the versions of one kernel ---- */
typedef struct {
	mc_kernel *rep;        /* the IR of its first member (kept in the merge's pool) */
	int n_slots;
	int n, cap;            /* members */
	int64_t *sizes;
	int64_t *vals;         /* member m's slots at vals[m * n_slots] */
} group;

typedef struct {
	const mc_kernel *hi;   /* the kernel in the program built at hi */
	group *groups;
	int n_groups;
	/* after the fit: versions (a group split by the sizes whose numbers
	 * fit one polynomial each), and each version's polys per slot */
	int n_versions;
	int *version_group;
	int64_t **version_sizes;
	int *version_n;
	mc_dyn_poly **version_polys;
} entry;

typedef struct {
	const mc_compile_opts *o;
	int pin;
	const char *param;
	int64_t lo, hi;
	mc_kpool *pool;
	mc_graph *g_hi;
	mc_program p_hi;
	entry *e;              /* per kernel of p_hi */
	mc_dyn_poly *io_polys; /* (n_inputs + n_outputs) * MC_MAX_RANK */
	int64_t *io_vals;      /* per size: the io dims, (hi - lo + 1) rows */
	int64_t limit;         /* the widest number a poly may reach (the index type's) */
} merge;

static void add_member(merge *m, entry *e, const mc_kernel *k, int64_t d)
{
	group *gr = NULL;
	slots sl = { 0 };
	for (int i = 0; i < e->n_groups && !gr; i++) {
		sl.n = 0;
		if (same_kernel(e->groups[i].rep, k, &sl))
			gr = &e->groups[i];
	}
	if (!gr) {
		e->groups = xrealloc(e->groups, (size_t)(e->n_groups + 1) * sizeof *e->groups);
		gr = &e->groups[e->n_groups++];
		memset(gr, 0, sizeof *gr);
		gr->rep = mc_kernel_clone(m->pool, k);
		sl.n = 0;
		same_kernel(gr->rep, k, &sl);
		gr->n_slots = sl.n;
	}
	if (gr->n == gr->cap) {
		gr->cap = gr->cap ? 2 * gr->cap : 8;
		gr->sizes = xrealloc(gr->sizes, (size_t)gr->cap * sizeof *gr->sizes);
		gr->vals = xrealloc(gr->vals, (size_t)gr->cap * (size_t)(gr->n_slots + 1) * sizeof *gr->vals);
	}
	gr->sizes[gr->n] = d;
	memcpy(gr->vals + (size_t)gr->n * (size_t)gr->n_slots, sl.v, (size_t)gr->n_slots * sizeof *sl.v);
	gr->n++;
	free(sl.v);
}

/* The places are HI's: at size d every buffer must fit HI's place of it,
 * and read the same weight (or a prefix of it). */
static int check_places(const merge *m, const mc_program *p, const mc_kernel *k, const mc_kernel *h,
                        int64_t d)
{
	for (int i = 0; i < k->n_bufs; i++) {
		const mc_kbuf *x = &k->bufs[i], *y = &h->bufs[i];
		size_t xb = mc_kbuf_storage_count(x) * mc_dtype_size(x->dtype);
		size_t yb = mc_kbuf_storage_count(y) * mc_dtype_size(y->dtype);
		const char *why = NULL;
		if (x->loc.kind != y->loc.kind || x->dtype != y->dtype || x->written != y->written ||
		    x->transient != y->transient || x->copies != y->copies)
			why = "is another kind of buffer than at the upper bound";
		else switch (x->loc.kind) {
		case MC_LOC_ARENA:
			if (xb > yb)
				why = "is larger than at the upper bound";
			else if (x->slab != y->slab)
				why = "sits at another place in a concatenation";
			break;
		case MC_LOC_INPUT:
		case MC_LOC_OUTPUT:
			if (x->loc.index != y->loc.index)
				why = "is another graph input or output";
			break;
		case MC_LOC_WEIGHT: {
			const mc_tensor *a = p->weights[x->loc.index].t, *b = m->p_hi.weights[y->loc.index].t;
			if (a->dtype != b->dtype || a->nbytes > b->nbytes || memcmp(a->data, b->data, a->nbytes) != 0)
				why = "reads a weight that is not a prefix of the upper bound's";
			break;
		}
		default:
			break;
		}
		if (why) {
			mc_error("--dim %s=%lld..%lld: at %s=%lld, buffer b%d of kernel %s (%s) %s; "
			         "this kernel cannot serve every size yet",
			         m->param, (long long)m->lo, (long long)m->hi, m->param, (long long)d, i, k->name,
			         k->comment ? k->comment : "", why);
			return -1;
		}
	}
	return 0;
}

/* The same steps, kernels apart (they are matched by name: the order a
 * size's plan chose is not HI's, which every size runs in). */
static int count_steps(const mc_step *x, int n, int *ifs)
{
	int k = 0;
	for (int i = 0; i < n; i++)
		if (x[i].kind == MC_STEP_KERNEL)
			k++;
		else
			++*ifs, k += count_steps(x[i].then_steps, x[i].n_then, ifs) +
			             count_steps(x[i].else_steps, x[i].n_else, ifs);
	return k;
}

static bool same_steps(const mc_program *a, const mc_program *b)
{
	int ia = 0, ib = 0;
	return count_steps(a->steps, a->n_steps, &ia) == count_steps(b->steps, b->n_steps, &ib) && ia == ib;
}

/* The options with the pin at size d. */
static int build_at(merge *m, int64_t d, mc_graph **g, mc_program *p, const char *model_path)
{
	mc_compile_opts o = *m->o;
	int n = o.import.n_dim_pins;
	mc_dim_pin *pins = mc_xcalloc((size_t)n + 1, sizeof *pins);
	memcpy(pins, o.import.dim_pins, (size_t)n * sizeof *pins);
	pins[m->pin].value = d;
	pins[m->pin].hi = 0;
	o.import.dim_pins = pins;
	o.sizes_vary = true;
	if (d != m->hi) { /* dumps and stats: the upper bound's */
		o.dump_after = NULL;
		o.stats = false;
	}
	int rc = -1;
	mc_target_config target;
	memset(p, 0, sizeof *p);
	*g = mc_import_file(model_path, &o.import);
	if (*g && !mc_apply_binds(*g, &o) && !mc_infer_graph(*g) && !mc_target_resolve(&o, &target) &&
	    !mc_freeze_and_build(*g, &o, &target, p))
		rc = 0;
	if (rc && *g) /* past the import, which names the model's own problem (a --dim naming nothing) */
		mc_error("--dim %s=%lld..%lld: the model does not compile at %s=%lld (above)", m->param,
		         (long long)m->lo, (long long)m->hi, m->param, (long long)d);
	free(pins);
	return rc;
}

static int find_kernel(const mc_program *p, const char *name)
{
	for (int i = 0; i < p->n_kernels; i++)
		if (!strcmp(p->kernels[i]->name, name))
			return i;
	return -1;
}

static void io_dims_at(const mc_program *p, int64_t *row)
{
	int c = 0;
	for (int t = 0; t < 2; t++) {
		const mc_io_desc *io = t ? p->outputs : p->inputs;
		for (int i = 0; i < (t ? p->n_outputs : p->n_inputs); i++)
			for (int j = 0; j < MC_MAX_RANK; j++, c++)
				row[c] = j < io[i].shape.rank ? io[i].shape.dims[j] : 0;
	}
}

/* Size d's program, merged into the versions. */
static int merge_size(merge *m, int64_t d, const mc_program *p)
{
	const mc_program *h = &m->p_hi;
	if (p->n_kernels != h->n_kernels || p->n_inputs != h->n_inputs || p->n_outputs != h->n_outputs ||
	    !same_steps(h, p)) {
		mc_error("--dim %s=%lld..%lld: at %s=%lld the model compiles to other kernels than at %lld "
		         "(%d against %d); it cannot serve every size yet",
		         m->param, (long long)m->lo, (long long)m->hi, m->param, (long long)d, (long long)m->hi,
		         p->n_kernels, h->n_kernels);
		return -1;
	}
	for (int i = 0; i < h->n_kernels; i++) {
		int j = find_kernel(p, h->kernels[i]->name);
		if (j < 0)
			return mc_error("--dim %s: kernel %s is missing at %s=%lld", m->param, h->kernels[i]->name,
			                m->param, (long long)d), -1;
		const mc_kernel *k = p->kernels[j];
		if (k->n_bufs != h->kernels[i]->n_bufs) {
			mc_error("--dim %s: kernel %s has other buffers at %s=%lld than at %lld", m->param, k->name,
			         m->param, (long long)d, (long long)m->hi);
			return -1;
		}
		if (check_places(m, p, k, h->kernels[i], d))
			return -1;
		add_member(m, &m->e[i], k, d);
	}
	int n_io = h->n_inputs + h->n_outputs;
	io_dims_at(p, m->io_vals + (size_t)(d - m->lo) * (size_t)n_io * MC_MAX_RANK);
	for (int i = 0; i < h->n_inputs + h->n_outputs; i++) {
		const mc_io_desc *a = i < h->n_inputs ? &p->inputs[i] : &p->outputs[i - h->n_inputs];
		const mc_io_desc *b = i < h->n_inputs ? &h->inputs[i] : &h->outputs[i - h->n_inputs];
		if (a->dtype != b->dtype || a->shape.rank != b->shape.rank || strcmp(a->name, b->name) != 0) {
			mc_error("--dim %s: %s has another type or rank at %s=%lld", m->param, a->name, m->param,
			         (long long)d);
			return -1;
		}
	}
	return 0;
}

/* The polys of every slot over the members mem[0 .. n) of g (malloc'd),
 * or NULL where a slot fits none. */
static mc_dyn_poly *class_polys(const merge *m, const group *g, const int *mem, int n)
{
	int64_t *s = mc_xmalloc((size_t)n * sizeof *s), *v = mc_xmalloc((size_t)n * sizeof *v);
	mc_dyn_poly *polys = mc_xmalloc((size_t)(g->n_slots + 1) * sizeof *polys);
	bool ok = true;
	for (int k = 0; k < n; k++)
		s[k] = g->sizes[mem[k]];
	for (int j = 0; j < g->n_slots && ok; j++) {
		for (int k = 0; k < n; k++)
			v[k] = g->vals[(size_t)mem[k] * (size_t)g->n_slots + (size_t)j];
		ok = mc_dyn_fit(s, v, n, m->limit, &polys[j]);
	}
	free(s);
	free(v);
	if (!ok) {
		free(polys);
		return NULL;
	}
	return polys;
}

static void add_version(entry *e, const group *g, int gi, const int *mem, int n, mc_dyn_poly *polys)
{
	int k = e->n_versions++;
	e->version_group = xrealloc(e->version_group, (size_t)e->n_versions * sizeof(int));
	e->version_sizes = xrealloc(e->version_sizes, (size_t)e->n_versions * sizeof(int64_t *));
	e->version_n = xrealloc(e->version_n, (size_t)e->n_versions * sizeof(int));
	e->version_polys = xrealloc(e->version_polys, (size_t)e->n_versions * sizeof(mc_dyn_poly *));
	e->version_group[k] = gi;
	e->version_n[k] = n;
	e->version_sizes[k] = mc_xmalloc((size_t)n * sizeof(int64_t));
	for (int i = 0; i < n; i++)
		e->version_sizes[k][i] = g->sizes[mem[i]];
	e->version_polys[k] = polys;
}

/* A group's members in classes whose every slot fits one polynomial:
 * all of them, or by the size modulo the smallest m that does, or runs
 * of consecutive sizes. Appends the versions to e. */
#define MAX_MODULUS 64
static void fit_group(const merge *m, entry *e, int gi)
{
	const group *g = &e->groups[gi];
	int *mem = mc_xmalloc((size_t)g->n * sizeof *mem);
	for (int k = 0; k < g->n; k++)
		mem[k] = k;
	mc_dyn_poly *all = class_polys(m, g, mem, g->n);
	if (all) {
		add_version(e, g, gi, mem, g->n, all);
		free(mem);
		return;
	}
	/* members by residue: class r's at mem[at[r] .. at[r + 1]) */
	int at[MAX_MODULUS + 1];
	mc_dyn_poly *polys[MAX_MODULUS];
	for (int mod = 2; mod <= MAX_MODULUS; mod++) {
		int r = 0, n = 0;
		bool ok = true;
		for (; r < mod && ok; r++) {
			at[r] = n;
			for (int k = 0; k < g->n; k++)
				if (((g->sizes[k] % mod) + mod) % mod == r)
					mem[n++] = k;
			polys[r] = n > at[r] ? class_polys(m, g, mem + at[r], n - at[r]) : NULL;
			ok = n == at[r] || polys[r];
		}
		at[r] = n;
		for (int c = 0; c < r; c++) {
			if (ok && polys[c])
				add_version(e, g, gi, mem + at[c], at[c + 1] - at[c], polys[c]);
			else
				free(polys[c]);
		}
		if (ok) {
			free(mem);
			return;
		}
	}
	/* runs of consecutive sizes, each as long as it fits (members are
	 * in the order they came: the upper bound first); one member always
	 * fits (its numbers are constants) */
	int *by_size = mc_xmalloc((size_t)g->n * sizeof *by_size);
	for (int k = 0; k < g->n; k++) {
		int j = k;
		for (; j > 0 && g->sizes[by_size[j - 1]] > g->sizes[k]; j--)
			by_size[j] = by_size[j - 1];
		by_size[j] = k;
	}
	for (int start = 0; start < g->n;) {
		mem[0] = by_size[start];
		mc_dyn_poly *q = class_polys(m, g, mem, 1), *longer;
		int n = 1;
		for (; start + n < g->n; n++) {
			mem[n] = by_size[start + n];
			if (!(longer = class_polys(m, g, mem, n + 1)))
				break;
			free(q);
			q = longer;
		}
		add_version(e, g, gi, mem, n, q);
		start += n;
	}
	free(by_size);
	free(mem);
}

/* ---- the versions as kernels ---- */
static mc_kexpr *new_expr(mc_kpool *pool, mc_kexpr_kind kind, mc_ktype type)
{
	mc_kexpr *e = mc_kpool_alloc(pool, sizeof *e);
	e->kind = kind;
	e->type = type;
	return e;
}

static mc_kexpr *index_const(mc_kpool *pool, int64_t v)
{
	mc_kexpr *e = new_expr(pool, MC_KE_CONST, MC_KT_INDEX);
	e->i = v;
	return e;
}

static mc_kexpr *index_bin(mc_kpool *pool, mc_kbinop op, mc_kexpr *a, mc_kexpr *b)
{
	mc_kexpr *e = new_expr(pool, MC_KE_BIN, MC_KT_INDEX);
	e->op = op;
	e->a = a;
	e->b = b;
	return e;
}

/* c * d^k as an expression (NULL for 0) */
static mc_kexpr *term(mc_kpool *pool, int64_t c, int k)
{
	if (c == 0)
		return NULL;
	mc_kexpr *x = k == 0 ? index_const(pool, c) : new_expr(pool, MC_KE_DIM, MC_KT_INDEX);
	if (k == 2)
		x = index_bin(pool, MC_KB_MUL, x, new_expr(pool, MC_KE_DIM, MC_KT_INDEX));
	if (k > 0 && c != 1)
		x = index_bin(pool, MC_KB_MUL, index_const(pool, c), x);
	return x;
}

/* The poly as an expression of the slot's type, written over e. */
static void put_poly(mc_kpool *pool, mc_kexpr *e, const mc_dyn_poly *q)
{
	mc_kexpr *sum = NULL;
	for (int k = 2; k >= 0; k--) {
		mc_kexpr *t = term(pool, q->c[k], k);
		if (t)
			sum = sum ? index_bin(pool, MC_KB_ADD, sum, t) : t;
	}
	if (!sum)
		sum = index_const(pool, 0);
	if (q->den != 1)
		sum = index_bin(pool, MC_KB_DIV, sum, index_const(pool, q->den));
	if (e->type != MC_KT_INDEX) {
		mc_kexpr *c = new_expr(pool, MC_KE_CAST, e->type);
		c->a = sum;
		sum = c;
	}
	*e = *sum;
}

typedef struct {
	mc_kpool *pool;
	const mc_dyn_poly *polys;
	int at;
} rewrite;

static void rewrite_expr(rewrite *r, mc_kexpr *e)
{
	if (!e)
		return;
	if (is_slot(e)) {
		const mc_dyn_poly *q = &r->polys[r->at++];
		if (!mc_dyn_poly_const(q))
			put_poly(r->pool, e, q);
		else
			e->i = q->c[0];
		return;
	}
	rewrite_expr(r, e->a);
	rewrite_expr(r, e->b);
	rewrite_expr(r, e->c);
}

static void rewrite_block(rewrite *r, mc_kstmt *s)
{
	for (; s; s = s->next) {
		rewrite_expr(r, s->a);
		rewrite_expr(r, s->b);
		rewrite_expr(r, s->c);
		if (s->tmpl) {
			mc_ktemplate *t = (mc_ktemplate *)s->tmpl;
			rewrite_expr(r, t->y_at);
			rewrite_expr(r, t->wt_at);
			rewrite_expr(r, t->x_at);
		}
		rewrite_block(r, s->body);
		rewrite_block(r, s->orelse);
	}
}

/* Version v of entry e: its group's IR with the polys, HI's places. */
static mc_kernel *version_kernel(merge *m, const entry *e, int v)
{
	const group *g = &e->groups[e->version_group[v]];
	mc_kernel *k = mc_kernel_clone(m->pool, g->rep);
	rewrite r = { m->pool, e->version_polys[v], 0 };
	rewrite_block(&r, k->body);
	memcpy(k->bufs, e->hi->bufs, (size_t)k->n_bufs * sizeof *k->bufs);
	for (int i = 0; i < k->n_bufs; i++)
		k->bufs[i].packed = NULL;
	if (e->n_versions > 1) {
		char name[512];
		snprintf(name, sizeof name, "%s_v%d", e->hi->name, v);
		k->name = mc_kpool_strdup(m->pool, name);
	}
	return k;
}

static void free_merge(merge *m)
{
	if (m->e) {
		for (int i = 0; i < m->p_hi.n_kernels; i++) {
			entry *e = &m->e[i];
			for (int g = 0; g < e->n_groups; g++) {
				free(e->groups[g].sizes);
				free(e->groups[g].vals);
			}
			free(e->groups);
			for (int v = 0; v < e->n_versions; v++) {
				free(e->version_sizes[v]);
				free(e->version_polys[v]);
			}
			free(e->version_group);
			free(e->version_sizes);
			free(e->version_n);
			free(e->version_polys);
		}
	}
	free(m->e);
	free(m->io_polys);
	free(m->io_vals);
	mc_program_free(&m->p_hi);
	mc_graph_free(m->g_hi);
	mc_kpool_free(m->pool);
}

static int check_dynamic_opts(const merge *m)
{
	const mc_compile_opts *o = m->o;
	const char *no = NULL;
	if (o->target && strcmp(o->target, "c") != 0 && strcmp(o->target, "llvm") != 0)
		no = "--target cuda";
	else if (o->threads > 1)
		no = "--threads";
	else if (o->io_in_arena)
		no = "--io-in-arena";
	else if (o->n_pools > 0)
		no = "--pool";
	else if (o->blas && strcmp(o->blas, "none") != 0)
		no = "--blas";
	if (no) {
		mc_error("--dim %s=%lld..%lld: a dynamic dimension does not work with %s yet", m->param,
		         (long long)m->lo, (long long)m->hi, no);
		return -1;
	}
	if (m->hi - m->lo > 4096) {
		mc_error("--dim %s=%lld..%lld: at most 4097 sizes (the program is built at each)", m->param,
		         (long long)m->lo, (long long)m->hi);
		return -1;
	}
	for (int i = 0; i < o->import.n_dim_pins; i++)
		if (i != m->pin && o->import.dim_pins[i].hi > o->import.dim_pins[i].value) {
			mc_error("--dim: one dynamic dimension per model for now (%s and %s)", m->param,
			         o->import.dim_pins[i].param);
			return -1;
		}
	return 0;
}

int mc_compile_dynamic(const char *model_path, const char *model_abs, const char *out_dir,
                       const mc_compile_opts *o_in, int pin)
{
	mc_compile_opts o = *o_in;
	char dump_dir[4096];
	mc_default_dump_dir(&o, out_dir, dump_dir, sizeof dump_dir);
	const mc_dim_pin *dp = &o.import.dim_pins[pin];
	merge m = { .o = &o, .pin = pin, .param = dp->param, .lo = dp->value, .hi = dp->hi,
	            .pool = mc_kpool_new() };
	if (check_dynamic_opts(&m)) {
		mc_kpool_free(m.pool);
		return -1;
	}
	int rc = -1;
	mc_program dyn_p = { 0 };
	mc_dynamic dyn = { 0 };
	if (build_at(&m, m.hi, &m.g_hi, &m.p_hi, model_path))
		goto out;
	const mc_program *h = &m.p_hi;
	m.limit = h->max_index >= INT32_MAX ? INT64_MAX / 4 : INT32_MAX;
	m.e = mc_xcalloc((size_t)h->n_kernels + 1, sizeof *m.e);
	int n_io = h->n_inputs + h->n_outputs;
	m.io_vals = mc_xcalloc((size_t)(m.hi - m.lo + 1) * (size_t)n_io * MC_MAX_RANK + 1, sizeof(int64_t));
	for (int i = 0; i < h->n_kernels; i++) {
		if (h->kernels[i]->n_splits) {
			mc_error("--dim: kernel %s is split for threads", h->kernels[i]->name);
			goto out;
		}
		m.e[i].hi = h->kernels[i];
		add_member(&m, &m.e[i], h->kernels[i], m.hi);
	}
	io_dims_at(h, m.io_vals + (size_t)(m.hi - m.lo) * (size_t)n_io * MC_MAX_RANK);
	for (int64_t d = m.lo; d < m.hi; d++) {
		mc_graph *g = NULL;
		mc_program p;
		mc_progress("--dim %s: building size %lld (%lld..%lld)", m.param, (long long)d, (long long)m.lo,
		            (long long)m.hi);
		int bad = build_at(&m, d, &g, &p, model_path) || merge_size(&m, d, &p);
		mc_program_free(&p);
		mc_graph_free(g);
		if (bad)
			goto out;
	}
	/* the versions */
	int n_kernels = 0;
	for (int i = 0; i < h->n_kernels; i++) {
		entry *e = &m.e[i];
		for (int gi = 0; gi < e->n_groups; gi++)
			fit_group(&m, e, gi);
		if (e->n_versions > MAX_VERSIONS) {
			mc_error("--dim %s=%lld..%lld: kernel %s (%s) has %d versions over the sizes (at most %d): "
			         "its lowering depends on the size in a way it cannot serve yet",
			         m.param, (long long)m.lo, (long long)m.hi, e->hi->name,
			         e->hi->comment ? e->hi->comment : "", e->n_versions, MAX_VERSIONS);
			goto out;
		}
		n_kernels += e->n_versions;
	}
	/* the inputs' and outputs' dims */
	int64_t n_sizes = m.hi - m.lo + 1;
	m.io_polys = mc_xcalloc((size_t)n_io * MC_MAX_RANK + 1, sizeof *m.io_polys);
	int64_t *s = mc_xmalloc((size_t)n_sizes * sizeof *s), *v = mc_xmalloc((size_t)n_sizes * sizeof *v);
	bool io_ok = true;
	for (int c = 0; c < n_io * MC_MAX_RANK && io_ok; c++) {
		for (int64_t d = 0; d < n_sizes; d++) {
			s[d] = m.lo + d;
			v[d] = m.io_vals[(size_t)d * (size_t)n_io * MC_MAX_RANK + (size_t)c];
		}
		io_ok = mc_dyn_fit(s, v, (int)n_sizes, INT64_MAX / 4, &m.io_polys[c]);
		if (!io_ok) {
			int t = c / MC_MAX_RANK;
			mc_error("--dim %s: dimension %d of %s is not a polynomial of %s", m.param, c % MC_MAX_RANK,
			         t < h->n_inputs ? h->inputs[t].name : h->outputs[t - h->n_inputs].name, m.param);
		}
	}
	free(s);
	free(v);
	if (!io_ok)
		goto out;
	/* the program: HI's, its kernels the versions */
	dyn = (mc_dynamic){ .name = (char *)m.param, .lo = m.lo, .hi = m.hi, .n_of = h->n_kernels,
	                    .of = mc_kpool_alloc(m.pool, sizeof(mc_dyn_kernel) * (size_t)(h->n_kernels + 1)),
	                    .in_dims = m.io_polys, .out_dims = m.io_polys + h->n_inputs * MC_MAX_RANK };
	dyn_p = *h;
	dyn_p.kernels = mc_xcalloc((size_t)n_kernels + 1, sizeof *dyn_p.kernels);
	dyn_p.n_kernels = dyn_p.cap_kernels = 0;
	for (int i = 0; i < h->n_kernels; i++) {
		entry *e = &m.e[i];
		mc_dyn_kernel *of = &dyn.of[i];
		of->first = dyn_p.n_kernels;
		of->n_versions = e->n_versions;
		if (e->n_versions > 1) {
			of->version_of = mc_kpool_alloc(m.pool, (size_t)n_sizes);
			for (int k = 0; k < e->n_versions; k++)
				for (int j = 0; j < e->version_n[k]; j++)
					of->version_of[e->version_sizes[k][j] - m.lo] = (unsigned char)k;
		}
		for (int k = 0; k < e->n_versions; k++)
			dyn_p.kernels[dyn_p.n_kernels++] = version_kernel(&m, e, k);
	}
	dyn_p.dyn = &dyn;
	dyn_p.map = NULL; /* of HI's kernels, not of these versions */
	if (o.stats) {
		int many = 0;
		for (int i = 0; i < h->n_kernels; i++)
			many += m.e[i].n_versions > 1;
		fprintf(stderr, "modelc: stats: --dim %s=%lld..%lld: %d kernels at the upper bound, %d versions "
		                "(%d kernels with more than one)\n", m.param, (long long)m.lo, (long long)m.hi,
		        h->n_kernels, n_kernels, many);
		for (int i = 0; i < h->n_kernels; i++)
			if (m.e[i].n_versions > 1)
				fprintf(stderr, "modelc: stats:   %s: %d versions (%s)\n", m.e[i].hi->name,
				        m.e[i].n_versions, m.e[i].hi->comment ? m.e[i].hi->comment : "");
	}
	if (mc_program_check(&dyn_p))
		goto out;
	mc_target_config target;
	if (mc_target_resolve(&o, &target))
		goto out;
	rc = mc_emit_program(&dyn_p, &target, &o, model_abs, m.g_hi->sha256, out_dir);
out:
	free(dyn_p.kernels);
	free_merge(&m);
	return rc;
}
