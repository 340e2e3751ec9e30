/* Helpers every emitter needs (targets/c, cuda and llvm): the emitter's
 * names and index width, C storage types and dtype constants, weights'
 * alignment and If conditions, buffers' use counts and restrict facts, and
 * writing a file. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "emit_common.h"

typedef mc_cemit emitter;

void mc_ce_fail(emitter *e, const char *what)
{
	if (!e->err)
		mc_error("%s: kernel '%s': %s", e->target, e->k ? e->k->name : "?", what);
	e->err = -1;
}

/* C type of a buffer element in memory. */
const char *mc_ce_storage_type(mc_dtype t)
{
	switch (t) {
	case MC_FLOAT: return "float";
	case MC_DOUBLE: return "double";
	case MC_INT8: case MC_INT4: case MC_INT2: return "int8_t";
	case MC_INT16: return "int16_t";
	case MC_INT32: return "int32_t";
	case MC_INT64: return "int64_t";
	case MC_UINT16: case MC_FLOAT16: case MC_BFLOAT16: return "uint16_t";
	case MC_UINT32: return "uint32_t";
	case MC_UINT64: return "uint64_t";
	case MC_BOOL: case MC_UINT8: case MC_UINT4: case MC_UINT2: return "uint8_t";
	default: return mc_dtype_is_small_float(t) ? "uint8_t" : NULL;
	}
}

const char *mc_ce_dtype_const(mc_dtype t)
{
	switch (t) {
	case MC_FLOAT: return "MODELC_FLOAT";
	case MC_UINT8: return "MODELC_UINT8";
	case MC_INT8: return "MODELC_INT8";
	case MC_UINT16: return "MODELC_UINT16";
	case MC_INT16: return "MODELC_INT16";
	case MC_INT32: return "MODELC_INT32";
	case MC_INT64: return "MODELC_INT64";
	case MC_BOOL: return "MODELC_BOOL";
	case MC_FLOAT16: return "MODELC_FLOAT16";
	case MC_DOUBLE: return "MODELC_DOUBLE";
	case MC_UINT32: return "MODELC_UINT32";
	case MC_UINT64: return "MODELC_UINT64";
	case MC_BFLOAT16: return "MODELC_BFLOAT16";
	case MC_FLOAT8E4M3FN: return "MODELC_FLOAT8E4M3FN";
	case MC_FLOAT8E4M3FNUZ: return "MODELC_FLOAT8E4M3FNUZ";
	case MC_FLOAT8E5M2: return "MODELC_FLOAT8E5M2";
	case MC_FLOAT8E5M2FNUZ: return "MODELC_FLOAT8E5M2FNUZ";
	case MC_UINT4: return "MODELC_UINT4";
	case MC_INT4: return "MODELC_INT4";
	case MC_FLOAT4E2M1: return "MODELC_FLOAT4E2M1";
	case MC_FLOAT8E8M0: return "MODELC_FLOAT8E8M0";
	case MC_UINT2: return "MODELC_UINT2";
	case MC_INT2: return "MODELC_INT2";
	default: return NULL;
	}
}

/* ---- use counts: unused buffers get no pointer, unused locals a (void) ---- */
static void scan_expr(emitter *e, const mc_kexpr *x)
{
	if (!x)
		return;
	if (x->kind == MC_KE_VAR && x->var >= 0 && x->var < e->k->n_vars)
		e->var_reads[x->var]++;
	if (x->kind == MC_KE_LOAD && x->buf >= 0 && x->buf < e->k->n_bufs)
		e->buf_uses[x->buf]++;
	scan_expr(e, x->a);
	scan_expr(e, x->b);
	scan_expr(e, x->c);
}

void mc_ce_scan_block(emitter *e, const mc_kstmt *s)
{
	for (; s; s = s->next) {
		if (s->kind == MC_KS_STORE && s->buf >= 0 && s->buf < e->k->n_bufs)
			e->buf_uses[s->buf]++;
		if (s->kind == MC_KS_TEMPLATE) {
			const mc_ktemplate *t = s->tmpl;
			bool gates = t->kind == MC_TMPL_GRU_GATES || t->kind == MC_TMPL_LSTM_GATES;
			bool attn = t->kind == MC_TMPL_ATTENTION;
			int bufs[8] = { t->x, t->kind == MC_TMPL_S8_PAIRS ? -1 : t->wt, t->out,
			                t->kind == MC_TMPL_GEMV_F32 ? t->bias : gates ? t->consts : -1, gates ? t->y : -1,
			                t->kind == MC_TMPL_LSTM_GATES ? t->cell : -1, attn ? t->v : -1, attn ? t->mask : -1 };
			for (int i = 0; i < 8; i++)
				if (bufs[i] >= 0 && bufs[i] < e->k->n_bufs)
					e->buf_uses[bufs[i]]++;
			scan_expr(e, t->wt_at); /* NULL where a kind has none */
			scan_expr(e, t->x_at);
			scan_expr(e, t->y_at);
		}
		scan_expr(e, s->a);
		scan_expr(e, s->b);
		scan_expr(e, s->c);
		mc_ce_scan_block(e, s->body);
		mc_ce_scan_block(e, s->orelse);
	}
}

void mc_ce_kernel_name(emitter *e, const mc_kernel *k)
{
	mc_sb_printf(e->sb, "%s_", e->name);
	for (const char *s = k->name; *s; s++)
		mc_sb_printf(e->sb, "%c", isalnum((unsigned char)*s) ? *s : '_');
}

const mc_weight *mc_ce_weight_of(const emitter *e, int index)
{
	if (index < 0 || index >= e->p->n_weights)
		return NULL;
	return &e->p->weights[index];
}

bool mc_ce_is_cond_weight(const emitter *e, int index)
{
	const mc_weight *w = mc_ce_weight_of(e, index);
	return w && w->t->numel > 0 && w->t->dtype == MC_BOOL;
}

size_t mc_ce_weight_align(const mc_weight *w)
{
	/* aligned() needs a power of two */
	return w->align && (w->align & (w->align - 1)) == 0 ? w->align : 16;
}

/* Whether two buffers of a kernel may share storage: the same input,
 * output or weight, or intersecting arena ranges (in-place kernels).
 * Inputs, outputs, weights and the arena never overlap each other (the
 * run function's contract). */
static bool may_overlap(const mc_kbuf *a, const mc_kbuf *b)
{
	if (a->loc.kind != b->loc.kind)
		return false;
	if (a->loc.kind != MC_LOC_ARENA || a->loc.index != b->loc.index) /* arena: index is the pool */
		return a->loc.index == b->loc.index && a->loc.kind != MC_LOC_ARENA;
	size_t ea = a->loc.offset + mc_kbuf_storage_count(a) * mc_dtype_size(a->dtype);
	size_t eb = b->loc.offset + mc_kbuf_storage_count(b) * mc_dtype_size(b->dtype);
	return a->loc.offset < eb && b->loc.offset < ea;
}

/* restrict lets the compiler keep values in registers across stores and
 * vectorise without run-time alias checks; only where it is true. */
bool mc_ce_is_restrict(const emitter *e, int i)
{
	for (int j = 0; j < e->k->n_bufs; j++)
		if (j != i && e->buf_uses[j] && may_overlap(&e->k->bufs[i], &e->k->bufs[j]))
			return false;
	return true;
}

void mc_ce_begin_kernel(emitter *e, const mc_kernel *k)
{
	e->k = k;
	e->var_reads = mc_xcalloc((size_t)k->n_vars + 1, sizeof(int));
	e->buf_uses = mc_xcalloc((size_t)k->n_bufs + 1, sizeof(int));
	mc_ce_scan_block(e, k->body);
}

void mc_ce_end_kernel(emitter *e)
{
	free(e->var_reads);
	free(e->buf_uses);
	e->var_reads = e->buf_uses = NULL;
	e->k = NULL;
}

size_t mc_ce_arena_align(const mc_program *p)
{
	return p->arena_align ? p->arena_align : 16;
}

size_t mc_ce_io_align(const mc_io_desc *d)
{
	/* no C type is aligned beyond its size, and every size is 1, 2, 4 or 8 */
	size_t n = mc_dtype_size(d->dtype);
	return n > 1 ? n : 1;
}

size_t mc_ce_io_numel(const mc_io_desc *d)
{
	size_t n = 1;
	for (int i = 0; i < d->shape.rank; i++)
		n *= (size_t)d->shape.dims[i];
	return n;
}

size_t mc_ce_io_bytes(const mc_io_desc *d)
{
	return mc_ce_io_numel(d) * mc_dtype_size(d->dtype);
}

/* ---- the emitter: its names and index width; files ---- */
static bool is_identifier(const char *s)
{
	if (!s || !(isalpha((unsigned char)*s) || *s == '_'))
		return false;
	for (; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '_'))
			return false;
	return true;
}

/* Largest element count any buffer needs, also when the program leaves
 * max_index unset. */
static int64_t max_index(const mc_program *p)
{
	int64_t m = p->max_index;
	for (int i = 0; i < p->n_kernels; i++)
		for (int j = 0; j < p->kernels[i]->n_bufs; j++)
			if ((int64_t)p->kernels[i]->bufs[j].count > m)
				m = (int64_t)p->kernels[i]->bufs[j].count;
	return m;
}

int mc_ce_write_file(const char *dir, const char *name, const char *suffix, const mc_strbuf *sb)
{
	size_t n = strlen(dir) + strlen(name) + strlen(suffix) + 2;
	char *path = mc_xmalloc(n);
	snprintf(path, n, "%s/%s%s", dir, name, suffix);
	int r = mc_write_if_changed(path, sb->data ? sb->data : "", sb->len);
	free(path);
	return r;
}

int mc_ce_init(emitter *e, const mc_program *p, const mc_compile_opts *o, const char *target)
{
	const char *name = p->prefix ? p->prefix : o ? o->name : NULL;
	*e = (emitter){ .p = p, .name = name, .target = target };
	if (!is_identifier(name)) {
		mc_error("%s: model name '%s' is not a C identifier (use --name)", target, name ? name : "");
		return -1;
	}
	e->upper = mc_xstrdup(name);
	for (char *c = e->upper; *c; c++)
		*c = (char)toupper((unsigned char)*c);
	/* Every index fits in 31 bits: int32_t keeps loops cheap on 32-bit MCUs. */
	e->idx64 = max_index(p) >= INT32_MAX;
	snprintf(e->idx_type, sizeof e->idx_type, "%s_idx", name);
	return 0;
}

void mc_ce_fini(emitter *e)
{
	free(e->upper);
	e->upper = NULL;
}
