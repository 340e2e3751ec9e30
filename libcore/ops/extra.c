/* Ops beyond the core families: Einsum, RMSNormalization, Swish, Attention,
 * RotaryEmbedding, GridSample, RoiAlign, Det, CenterCropPad, Col2Im, and
 * the ops whose output shape depends on data (NonZero, Unique,
 * NonMaxSuppression), which are supported only on compile-time constants.
 * Reference implementations: direct loops in double (int64 for integer
 * Einsum), following the ONNX reference implementation's arithmetic. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "extra_norm.h"
#include "ops.h"
#include "extra.h"
#include "extra_misc.h"

/* ---- shared helpers ---- */

/* An integer input that sets the output shape: it must be a constant. A
 * runtime value is a missing feature (dynamic shapes), reported as such. */
static int shape_input(mc_infer_ctx *c, int i, int64_t *out, size_t cap, size_t *count)
{
	const mc_value *v = mc_opt_in(c, i);
	if (v && !v->konst)
		return mc_node_error(c->node, "a runtime value for input %d ('%s') is not supported: "
		                     "it sets the output shape, so it must be known at compile time",
		                     i, v->name);
	return mc_const_ints(c, i, out, cap, count);
}

static int check_float(const mc_node *n, const char *what, const mc_value *v)
{
	if (!mc_dtype_is_float(v->dtype))
		return mc_node_error(n, "%s has type %s; expected a float type", what,
		                     mc_dtype_name(v->dtype));
	return 0;
}

/* True when `p` broadcasts to exactly `target`. */
static bool broadcasts_to(const mc_shape *p, const mc_shape *target)
{
	mc_shape o;
	return mc_broadcast(p, target, &o) && mc_shape_eq(&o, target);
}

static double sigmoid(double x)
{
	if (x >= 0)
		return 1.0 / (1.0 + exp(-x));
	double e = exp(x);
	return e / (1.0 + e);
}

/* Stable merge sort of an index array with a context-taking comparator. */
typedef int (*cmp_fn)(size_t a, size_t b, const void *ctx);

static void merge_sort(size_t *v, size_t n, cmp_fn cmp, const void *ctx)
{
	if (n < 2)
		return;
	size_t *tmp = mc_xmalloc(n * sizeof *tmp);
	for (size_t width = 1; width < n; width *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * width) {
			size_t mid = lo + width < n ? lo + width : n;
			size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
			size_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi)
				tmp[k++] = cmp(v[j], v[i], ctx) < 0 ? v[j++] : v[i++];
			while (i < mid)
				tmp[k++] = v[i++];
			while (j < hi)
				tmp[k++] = v[j++];
		}
		memcpy(v, tmp, n * sizeof *v);
	}
	free(tmp);
}

/* ---- Einsum ---- */

static int letter_id(char ch)
{
	return MC_MAX_RANK + (isupper((unsigned char)ch) ? ch - 'A' : 26 + ch - 'a');
}

/* One operand or output term: letters and at most one "...". */
static int einsum_term(mc_node *n, const char *s, size_t len, char *out)
{
	size_t k = 0, letters = 0;
	bool ellipsis = false;
	for (size_t i = 0; i < len;) {
		if (s[i] == '.') {
			if (ellipsis || len - i < 3 || strncmp(s + i, "...", 3) != 0)
				return mc_node_error(n, "equation term '%.*s' has a malformed ellipsis",
				                     (int)len, s);
			ellipsis = true;
			out[k++] = ELLIPSIS;
			i += 3;
			continue;
		}
		if (!isalpha((unsigned char)s[i]) || !isascii((unsigned char)s[i]))
			return mc_node_error(n, "equation term '%.*s' has invalid character '%c'",
			                     (int)len, s, s[i]);
		if (++letters > MC_MAX_RANK)
			return mc_node_error(n, "equation term '%.*s' has more than %d labels",
			                     (int)len, s, MC_MAX_RANK);
		out[k++] = s[i++];
	}
	out[k] = 0;
	return 0;
}

static int einsum_parse(mc_node *n)
{
	const char *eq;
	if (mc_attr_string(n, "equation", NULL, &eq))
		return -1;
	if (!eq)
		return mc_node_error(n, "needs the 'equation' attribute");
	size_t len = strlen(eq), k = 0;
	char *s = mc_xmalloc(len + 1);
	for (size_t i = 0; i < len; i++)
		if (!isspace((unsigned char)eq[i]))
			s[k++] = eq[i];
	s[k] = 0;
	einsum_params p;
	memset(&p, 0, sizeof p);
	char *arrow = strstr(s, "->");
	size_t lhs_len = arrow ? (size_t)(arrow - s) : k;
	int rc = 0;
	if (arrow) {
		p.explicit_out = true;
		rc = einsum_term(n, arrow + 2, strlen(arrow + 2), p.out);
	}
	for (size_t start = 0; !rc;) {
		const char *comma = memchr(s + start, ',', lhs_len - start);
		size_t end = comma ? (size_t)(comma - s) : lhs_len;
		if (p.n_terms == EINSUM_MAX_INPUTS) {
			rc = mc_node_error(n, "equation has more than %d operands", EINSUM_MAX_INPUTS);
			break;
		}
		rc = einsum_term(n, s + start, end - start, p.terms[p.n_terms++]);
		if (!comma)
			break;
		start = end + 1;
	}
	free(s);
	if (rc)
		return -1;
	if (p.n_terms != n->n_inputs)
		return mc_node_error(n, "equation '%s' has %d operands but the node has %d inputs",
		                     eq, p.n_terms, n->n_inputs);
	memcpy(mc_params_new(n, sizeof p), &p, sizeof p);
	return 0;
}

/* Records a label's size; ellipsis dims broadcast (size 1 stretches). */
static int einsum_size(const mc_node *n, einsum_plan *pl, int label, int64_t dim)
{
	int64_t *s = &pl->size[label];
	if (*s < 0 || (label < MC_MAX_RANK && *s == 1))
		*s = dim;
	else if (dim != *s && !(label < MC_MAX_RANK && dim == 1)) {
		if (label < MC_MAX_RANK)
			return mc_node_error(n, "ellipsis dimensions %lld and %lld do not broadcast",
			                     (long long)*s, (long long)dim);
		int id = label - MC_MAX_RANK;
		return mc_node_error(n, "label '%c' has sizes %lld and %lld",
		                     id < 26 ? 'A' + id : 'a' + id - 26, (long long)*s,
		                     (long long)dim);
	}
	return 0;
}

int mc_einsum_plan_make(const mc_node *n, const mc_shape *const *shapes, einsum_plan *pl)
{
	const einsum_params *p = n->params;
	int count[EINSUM_LABELS] = {0};
	memset(pl, 0, sizeof *pl);
	for (int l = 0; l < EINSUM_LABELS; l++)
		pl->size[l] = -1;
	for (int k = 0; k < p->n_terms; k++) {
		const char *t = p->terms[k];
		const mc_shape *s = shapes[k];
		bool has_ell = strchr(t, ELLIPSIS) != NULL;
		int letters = (int)strlen(t) - has_ell, ell = s->rank - letters;
		if (ell < 0 || (!has_ell && ell != 0))
			return mc_node_error(n, "operand %d has rank %d but its term '%s' has %d labels",
			                     k, s->rank, t, letters);
		if (ell > pl->ell_rank)
			pl->ell_rank = ell;
		int d = 0;
		for (const char *c = t; *c; c++) {
			if (*c == ELLIPSIS) {
				for (int j = 0; j < ell; j++, d++) {
					pl->in_label[k][d] = MC_MAX_RANK - ell + j;
					if (einsum_size(n, pl, pl->in_label[k][d], s->dims[d]))
						return -1;
				}
				continue;
			}
			int id = letter_id(*c);
			pl->in_label[k][d] = id;
			count[id]++;
			if (einsum_size(n, pl, id, s->dims[d++]))
				return -1;
		}
	}
	/* output: the ellipsis dims, then the labels */
	if (!p->explicit_out) {
		for (int j = 0; j < pl->ell_rank; j++)
			pl->out_label[pl->out_rank++] = MC_MAX_RANK - pl->ell_rank + j;
		for (int id = MC_MAX_RANK; id < EINSUM_LABELS; id++) {
			if (count[id] != 1)
				continue;
			if (pl->out_rank == MC_MAX_RANK)
				return mc_node_error(n, "output would have more than %d dims", MC_MAX_RANK);
			pl->out_label[pl->out_rank++] = id;
		}
	} else {
		bool seen[EINSUM_LABELS] = {false};
		for (const char *c = p->out; *c; c++) {
			if (*c == ELLIPSIS) {
				if (pl->out_rank + pl->ell_rank > MC_MAX_RANK)
					return mc_node_error(n, "output would have more than %d dims",
					                     MC_MAX_RANK);
				for (int j = 0; j < pl->ell_rank; j++)
					pl->out_label[pl->out_rank++] = MC_MAX_RANK - pl->ell_rank + j;
				continue;
			}
			int id = letter_id(*c);
			if (pl->size[id] < 0)
				return mc_node_error(n, "output label '%c' appears in no operand", *c);
			if (seen[id])
				return mc_node_error(n, "output label '%c' is repeated", *c);
			seen[id] = true;
			if (pl->out_rank == MC_MAX_RANK)
				return mc_node_error(n, "output would have more than %d dims", MC_MAX_RANK);
			pl->out_label[pl->out_rank++] = id;
		}
	}
	pl->out_shape.rank = pl->out_rank;
	for (int d = 0; d < pl->out_rank; d++)
		pl->out_shape.dims[d] = pl->size[pl->out_label[d]];
	return 0;
}

static int einsum_infer(mc_infer_ctx *c)
{
	const mc_shape *shapes[EINSUM_MAX_INPUTS];
	for (int k = 0; k < c->n_in; k++) {
		if (!c->in[k])
			return mc_node_error(c->node, "input %d is required", k);
		if (c->in[k]->dtype != c->in[0]->dtype)
			return mc_node_error(c->node, "inputs have different types %s and %s",
			                     mc_dtype_name(c->in[0]->dtype),
			                     mc_dtype_name(c->in[k]->dtype));
		shapes[k] = &c->in[k]->shape;
	}
	mc_dtype t = c->in[0]->dtype;
	if (!mc_dtype_is_float(t) && !mc_dtype_is_int(t))
		return mc_node_error(c->node, "type %s is not supported", mc_dtype_name(t));
	einsum_plan pl;
	if (mc_einsum_plan_make(c->node, shapes, &pl))
		return -1;
	mc_set_out(c, 0, t, &pl.out_shape);
	return 0;
}

/* Sums the product of the operands over every combination of label values:
 * the output's labels index the result, the others are summed over. */
static int einsum_eval(mc_eval_ctx *c)
{
	const mc_shape *shapes[EINSUM_MAX_INPUTS];
	int n_in = c->n_in;
	for (int k = 0; k < n_in; k++)
		shapes[k] = &c->in[k]->shape;
	einsum_plan pl;
	if (mc_einsum_plan_make(c->node, shapes, &pl))
		return -1;
	mc_tensor *y = c->out[0];
	if (!y)
		return 0;
	bool is_float = mc_dtype_is_float(y->dtype);
	/* labels in use, and each one's stride in every operand and the output */
	int labels[EINSUM_LABELS], nl = 0;
	int64_t st[EINSUM_MAX_INPUTS + 1][EINSUM_LABELS];
	memset(st, 0, sizeof st);
	size_t total = 1;
	for (int l = 0; l < EINSUM_LABELS; l++)
		if (pl.size[l] >= 0) {
			labels[nl++] = l;
			if (!mc_mul_size(total, (size_t)pl.size[l], &total))
				return mc_node_error(c->node, "the iteration space is too large");
		}
	for (int k = 0; k < n_in; k++) {
		int64_t strides[MC_MAX_RANK];
		mc_strides(shapes[k], strides);
		for (int d = 0; d < shapes[k]->rank; d++) {
			int l = pl.in_label[k][d];
			/* a size-1 ellipsis dim broadcasts: stride 0 */
			if (shapes[k]->dims[d] == pl.size[l])
				st[k][l] += strides[d]; /* a repeated label walks the diagonal */
		}
	}
	int64_t ostrides[MC_MAX_RANK];
	mc_strides(&pl.out_shape, ostrides);
	for (int d = 0; d < pl.out_rank; d++)
		st[n_in][pl.out_label[d]] = ostrides[d];

	size_t on = y->numel ? y->numel : 1;
	double *accf = is_float ? mc_xcalloc(on, sizeof *accf) : NULL;
	uint64_t *acci = is_float ? NULL : mc_xcalloc(on, sizeof *acci);
	int64_t coord[EINSUM_LABELS] = {0}, idx[EINSUM_MAX_INPUTS + 1] = {0};
	for (size_t it = 0; it < total; it++) {
		if (is_float) {
			double prod = 1;
			for (int k = 0; k < n_in; k++)
				prod *= mc_get_f(c->in[k], (size_t)idx[k]);
			accf[idx[n_in]] += prod;
		} else {
			/* unsigned arithmetic wraps instead of overflowing */
			uint64_t prod = 1;
			for (int k = 0; k < n_in; k++)
				prod *= (uint64_t)mc_get_i(c->in[k], (size_t)idx[k]);
			acci[idx[n_in]] += prod;
		}
		for (int j = nl - 1; j >= 0; j--) {
			int l = labels[j];
			for (int k = 0; k <= n_in; k++)
				idx[k] += st[k][l];
			if (++coord[l] < pl.size[l])
				break;
			for (int k = 0; k <= n_in; k++)
				idx[k] -= st[k][l] * pl.size[l];
			coord[l] = 0;
		}
	}
	for (size_t i = 0; i < y->numel; i++) {
		if (is_float)
			mc_set_f(y, i, accf[i]);
		else
			mc_set_i(y, i, (int64_t)acci[i]);
	}
	free(accf);
	free(acci);
	return 0;
}

/* ---- RMSNormalization ---- */

static int rms_parse(mc_node *n)
{
	rms_params p;
	int64_t stash;
	if (mc_attr_int(n, "axis", -1, &p.axis) || mc_attr_float(n, "epsilon", 1e-5, &p.epsilon) ||
	    mc_attr_int(n, "stash_type", 1, &stash))
		return -1;
	/* every stash type computes in double here, at least as precise */
	memcpy(mc_params_new(n, sizeof p), &p, sizeof p);
	return 0;
}

static int rms_infer(mc_infer_ctx *c)
{
	const rms_params *p = c->node->params;
	if (MC_NEED_INPUTS(c, 0, 1))
		return -1;
	const mc_value *x = c->in[0], *scale = c->in[1];
	int axis;
	char a[256], b[256];
	if (check_float(c->node, "X", x) || check_float(c->node, "scale", scale) ||
	    mc_norm_axis(c->node, p->axis, x->shape.rank, &axis))
		return -1;
	if (!broadcasts_to(&scale->shape, &x->shape))
		return mc_node_error(c->node, "scale shape %s does not broadcast to X shape %s",
		                     mc_shape_str(&scale->shape, a, sizeof a),
		                     mc_shape_str(&x->shape, b, sizeof b));
	mc_set_out(c, 0, x->dtype, &x->shape);
	return 0;
}

static int rms_eval(mc_eval_ctx *c)
{
	const rms_params *p = c->node->params;
	const mc_tensor *x = c->in[0], *scale = c->in[1];
	mc_tensor *y = c->out[0];
	int axis;
	if (!y || mc_norm_axis(c->node, p->axis, x->shape.rank, &axis))
		return y ? -1 : 0;
	size_t inner = 1;
	for (int d = axis; d < x->shape.rank; d++)
		inner *= (size_t)x->shape.dims[d];
	int64_t st[MC_MAX_RANK];
	mc_broadcast_strides(&scale->shape, &x->shape, st);
	for (size_t o = 0; inner && o < x->numel / inner; o++) {
		double ss = 0;
		for (size_t i = 0; i < inner; i++) {
			double v = mc_get_f(x, o * inner + i);
			ss += v * v;
		}
		double r = 1.0 / sqrt(ss / (double)inner + p->epsilon);
		for (size_t i = 0; i < inner; i++) {
			size_t e = o * inner + i;
			mc_set_f(y, e,
			         mc_get_f(x, e) * r * mc_get_f(scale, mc_bcast_index(e, &x->shape, st)));
		}
	}
	return 0;
}

/* ---- Swish: x * sigmoid(alpha * x) ---- */

static int swish_infer(mc_infer_ctx *c)
{
	double alpha;
	if (MC_NEED_INPUTS(c, 0) || check_float(c->node, "X", c->in[0]) ||
	    mc_attr_float(c->node, "alpha", 1.0, &alpha))
		return -1;
	return mc_infer_same_as_input0(c);
}

static int swish_eval(mc_eval_ctx *c)
{
	double alpha;
	if (mc_attr_float(c->node, "alpha", 1.0, &alpha))
		return -1;
	const mc_tensor *x = c->in[0];
	for (size_t i = 0; c->out[0] && i < x->numel; i++) {
		double v = mc_get_f(x, i);
		mc_set_f(c->out[0], i, v * sigmoid(alpha * v));
	}
	return 0;
}

/* ---- Attention (opset 23, 24) ---- */

enum { AT_Q, AT_K, AT_V, AT_MASK, AT_PAST_K, AT_PAST_V, AT_NONPAD };
enum { AT_Y, AT_PRESENT_K, AT_PRESENT_V, AT_QK };

static int attn_parse(mc_node *n)
{
	attn_params p = {0};
	int64_t causal, prec;
	if (mc_attr_int(n, "is_causal", 0, &causal) || mc_attr_int(n, "q_num_heads", 0, &p.q_heads) ||
	    mc_attr_int(n, "kv_num_heads", 0, &p.kv_heads) ||
	    mc_attr_int(n, "qk_matmul_output_mode", 0, &p.qk_mode) ||
	    mc_attr_float(n, "scale", 0, &p.scale) || mc_attr_float(n, "softcap", 0, &p.softcap) ||
	    mc_attr_int(n, "softmax_precision", 0, &prec))
		return -1;
	p.causal = causal != 0;
	p.has_scale = mc_attr_find(n, "scale") != NULL;
	if (p.qk_mode < 0 || p.qk_mode > 3)
		return mc_node_error(n, "qk_matmul_output_mode %lld is not 0..3", (long long)p.qk_mode);
	if (p.q_heads < 0 || p.kv_heads < 0)
		return mc_node_error(n, "q_num_heads and kv_num_heads must be positive");
	/* softmax_precision: computed in double whatever it asks for */
	if (prec && prec != MC_FLOAT && prec != MC_FLOAT16 && prec != MC_DOUBLE &&
	    prec != MC_BFLOAT16)
		return mc_node_error(n, "softmax_precision %lld is not a float type", (long long)prec);
	memcpy(mc_params_new(n, sizeof p), &p, sizeof p);
	return 0;
}

/* Sizes of one attention call; Q, K, V seen as [B, heads, seq, head_size]. */
typedef struct {
	bool is_3d;
	int64_t b, hq, hkv, sq, skv, past, total, d, dv;
	int64_t mask_len;          /* last dim of attn_mask (<= total), 0 if none */
	mc_shape mask_target;      /* [B, Hq, Sq, mask_len] */
} attn_geom;

typedef struct {
	const mc_shape *q, *k, *v, *mask, *past_k, *past_v, *nonpad;
	mc_dtype mask_type;
} attn_shapes;

static int attn_geom_get(const mc_node *n, const attn_shapes *s, attn_geom *g)
{
	const attn_params *p = n->params;
	char a[256], b[256], e[256];
	memset(g, 0, sizeof *g);
	int r = s->q->rank;
	if ((r != 3 && r != 4) || s->k->rank != r || s->v->rank != r)
		return mc_node_error(n, "Q %s, K %s, V %s must all be 3-D or all 4-D",
		                     mc_shape_str(s->q, a, sizeof a), mc_shape_str(s->k, b, sizeof b),
		                     mc_shape_str(s->v, e, sizeof e));
	g->is_3d = r == 3;
	g->b = s->q->dims[0];
	if (g->is_3d) {
		if (!p->q_heads || !p->kv_heads)
			return mc_node_error(n, "3-D inputs need q_num_heads and kv_num_heads");
		g->hq = p->q_heads;
		g->hkv = p->kv_heads;
		g->sq = s->q->dims[1];
		g->skv = s->k->dims[1];
		if (s->q->dims[2] % g->hq || s->k->dims[2] % g->hkv || s->v->dims[2] % g->hkv)
			return mc_node_error(n, "hidden sizes of Q %s, K %s, V %s are not multiples of "
			                     "the head counts", mc_shape_str(s->q, a, sizeof a),
			                     mc_shape_str(s->k, b, sizeof b), mc_shape_str(s->v, e, sizeof e));
		g->d = s->q->dims[2] / g->hq;
		if (s->k->dims[2] / g->hkv != g->d)
			return mc_node_error(n, "K head size differs from Q head size");
		g->dv = s->v->dims[2] / g->hkv;
		if (s->v->dims[1] != g->skv || s->k->dims[0] != g->b || s->v->dims[0] != g->b)
			return mc_node_error(n, "K %s and V %s disagree with Q %s",
			                     mc_shape_str(s->k, b, sizeof b), mc_shape_str(s->v, e, sizeof e),
			                     mc_shape_str(s->q, a, sizeof a));
	} else {
		g->hq = s->q->dims[1];
		g->sq = s->q->dims[2];
		g->d = s->q->dims[3];
		g->hkv = s->k->dims[1];
		g->skv = s->k->dims[2];
		g->dv = s->v->dims[3];
		if (s->k->dims[0] != g->b || s->v->dims[0] != g->b || s->k->dims[3] != g->d ||
		    s->v->dims[1] != g->hkv || s->v->dims[2] != g->skv)
			return mc_node_error(n, "K %s and V %s disagree with Q %s",
			                     mc_shape_str(s->k, b, sizeof b), mc_shape_str(s->v, e, sizeof e),
			                     mc_shape_str(s->q, a, sizeof a));
		if ((p->q_heads && p->q_heads != g->hq) || (p->kv_heads && p->kv_heads != g->hkv))
			return mc_node_error(n, "q_num_heads / kv_num_heads disagree with the inputs");
	}
	if (g->hkv <= 0 || g->hq % g->hkv)
		return mc_node_error(n, "%lld query heads cannot share %lld key/value heads",
		                     (long long)g->hq, (long long)g->hkv);
	if (!s->past_k != !s->past_v)
		return mc_node_error(n, "past_key and past_value must be given together");
	if (s->past_k) {
		const mc_shape *pk = s->past_k, *pv = s->past_v;
		if (pk->rank != 4 || pv->rank != 4 || pk->dims[0] != g->b || pk->dims[1] != g->hkv ||
		    pk->dims[3] != g->d || pv->dims[0] != g->b || pv->dims[1] != g->hkv ||
		    pv->dims[2] != pk->dims[2] || pv->dims[3] != g->dv)
			return mc_node_error(n, "past_key %s / past_value %s do not fit [%lld, %lld, P, "
			                     "%lld] / [.., %lld]", mc_shape_str(pk, a, sizeof a),
			                     mc_shape_str(pv, b, sizeof b), (long long)g->b,
			                     (long long)g->hkv, (long long)g->d, (long long)g->dv);
		g->past = pk->dims[2];
	}
	g->total = g->past + g->skv;
	if (s->mask) {
		const mc_shape *m = s->mask;
		if (s->mask_type != MC_BOOL && !mc_dtype_is_float(s->mask_type))
			return mc_node_error(n, "attn_mask has type %s; expected bool or float",
			                     mc_dtype_name(s->mask_type));
		if (m->rank < 1 || m->rank > 4 || m->dims[m->rank - 1] > g->total)
			return mc_node_error(n, "attn_mask %s does not fit [B, heads, %lld, %lld]",
			                     mc_shape_str(m, a, sizeof a), (long long)g->sq,
			                     (long long)g->total);
		g->mask_len = m->dims[m->rank - 1];
		g->mask_target = (mc_shape){4, {g->b, g->hq, g->sq, g->mask_len}};
		if (!broadcasts_to(m, &g->mask_target))
			return mc_node_error(n, "attn_mask %s does not broadcast to %s",
			                     mc_shape_str(m, a, sizeof a),
			                     mc_shape_str(&g->mask_target, b, sizeof b));
	}
	if (s->nonpad && (s->nonpad->rank != 1 || s->nonpad->dims[0] != g->b))
		return mc_node_error(n, "nonpad_kv_seqlen %s must be 1-D with %lld values",
		                     mc_shape_str(s->nonpad, a, sizeof a), (long long)g->b);
	return 0;
}

static int attn_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const attn_params *p = n->params;
	if (MC_NEED_INPUTS(c, AT_Q, AT_K, AT_V))
		return -1;
	const mc_value *q = c->in[AT_Q], *mask = mc_opt_in(c, AT_MASK);
	const mc_value *nonpad = mc_opt_in(c, AT_NONPAD);
	const mc_value *pk = mc_opt_in(c, AT_PAST_K), *pv = mc_opt_in(c, AT_PAST_V);
	if (check_float(n, "Q", q) || check_float(n, "K", c->in[AT_K]) ||
	    check_float(n, "V", c->in[AT_V]))
		return -1;
	if (nonpad && n->opset < 24)
		return mc_node_error(n, "nonpad_kv_seqlen (input 6) needs opset 24 or newer");
	if (nonpad && nonpad->dtype != MC_INT64)
		return mc_node_error(n, "nonpad_kv_seqlen must be int64");
	attn_shapes s = {&q->shape, &c->in[AT_K]->shape, &c->in[AT_V]->shape,
	                 mask ? &mask->shape : NULL, pk ? &pk->shape : NULL,
	                 pv ? &pv->shape : NULL, nonpad ? &nonpad->shape : NULL,
	                 mask ? mask->dtype : MC_UNDEFINED};
	attn_geom g;
	if (attn_geom_get(n, &s, &g))
		return -1;
	(void)p;
	mc_shape y = g.is_3d ? (mc_shape){3, {g.b, g.sq, g.hq * g.dv}}
	                     : (mc_shape){4, {g.b, g.hq, g.sq, g.dv}};
	mc_shape present_k = {4, {g.b, g.hkv, g.total, g.d}};
	mc_shape present_v = {4, {g.b, g.hkv, g.total, g.dv}};
	mc_shape qk = {4, {g.b, g.hq, g.sq, g.total}};
	mc_set_out(c, AT_Y, q->dtype, &y);
	if (c->n_out > AT_PRESENT_K)
		mc_set_out(c, AT_PRESENT_K, c->in[AT_K]->dtype, &present_k);
	if (c->n_out > AT_PRESENT_V)
		mc_set_out(c, AT_PRESENT_V, c->in[AT_V]->dtype, &present_v);
	if (c->n_out > AT_QK)
		mc_set_out(c, AT_QK, q->dtype, &qk);
	return 0;
}

/* K or V with the past concatenated in front: [B, Hkv, total, width]. */
static double *attn_present(const attn_geom *g, const mc_tensor *past, const mc_tensor *cur,
                            int64_t width)
{
	size_t n = (size_t)(g->b * g->hkv * g->total * width);
	double *out = mc_xmalloc((n ? n : 1) * sizeof *out);
	for (int64_t b = 0; b < g->b; b++)
		for (int64_t h = 0; h < g->hkv; h++)
			for (int64_t t = 0; t < g->total; t++)
				for (int64_t d = 0; d < width; d++) {
					size_t src;
					const mc_tensor *from = cur;
					int64_t s = t - g->past;
					if (t < g->past) {
						from = past;
						src = (size_t)(((b * g->hkv + h) * g->past + t) * width + d);
					} else if (g->is_3d) {
						src = (size_t)(((b * g->skv + s) * g->hkv + h) * width + d);
					} else {
						src = (size_t)(((b * g->hkv + h) * g->skv + s) * width + d);
					}
					out[((b * g->hkv + h) * g->total + t) * width + d] = mc_get_f(from, src);
				}
	return out;
}

/* Additive bias for query i, key j of (batch b, head h): attn_mask (bool:
 * false masks; keys past its length are masked), causal frontier,
 * nonpad_kv_seqlen padding. */
static double attn_bias(const attn_geom *g, const attn_params *p, const mc_tensor *mask,
                        const int64_t *mask_st, const mc_tensor *nonpad, int64_t b, int64_t h,
                        int64_t i, int64_t j)
{
	double bias = 0;
	if (mask) {
		if (j >= g->mask_len)
			return -INFINITY;
		size_t idx = (size_t)(b * mask_st[0] + h * mask_st[1] + i * mask_st[2] + j * mask_st[3]);
		if (mask->dtype == MC_BOOL)
			bias = mc_get_i(mask, idx) ? 0 : -INFINITY;
		else
			bias = mc_get_f(mask, idx);
	}
	if (p->causal) {
		/* bottom-right aligned: the keys before this query block are the past,
		 * or (static cache) the valid keys minus the queries */
		int64_t offset = g->past;
		if (!g->past && nonpad)
			offset = mc_get_i(nonpad, (size_t)b) - g->sq;
		if (j > i + offset)
			bias = -INFINITY;
	}
	if (nonpad && j >= mc_get_i(nonpad, (size_t)b))
		bias = -INFINITY;
	return bias;
}

static int attn_eval(mc_eval_ctx *c)
{
	const mc_node *n = c->node;
	const attn_params *p = n->params;
	const mc_tensor *q = c->in[AT_Q], *mask = mc_opt_tensor(c, AT_MASK);
	const mc_tensor *pk = mc_opt_tensor(c, AT_PAST_K), *pv = mc_opt_tensor(c, AT_PAST_V);
	const mc_tensor *nonpad = mc_opt_tensor(c, AT_NONPAD);
	attn_shapes s = {&q->shape, &c->in[AT_K]->shape, &c->in[AT_V]->shape,
	                 mask ? &mask->shape : NULL, pk ? &pk->shape : NULL,
	                 pv ? &pv->shape : NULL, nonpad ? &nonpad->shape : NULL,
	                 mask ? mask->dtype : MC_UNDEFINED};
	attn_geom g;
	if (attn_geom_get(n, &s, &g))
		return -1;
	double *kk = attn_present(&g, pk, c->in[AT_K], g.d);
	double *vv = attn_present(&g, pv, c->in[AT_V], g.dv);
	int64_t mask_st[MC_MAX_RANK] = {0};
	if (mask)
		mc_broadcast_strides(&mask->shape, &g.mask_target, mask_st);
	double scale = p->has_scale ? p->scale : 1.0 / sqrt((double)g.d);
	mc_tensor *y = c->out[AT_Y], *qk_out = mc_opt_out(c, AT_QK);
	size_t tn = (size_t)g.total;
	double *raw = mc_xmalloc((tn ? tn : 1) * sizeof *raw);
	double *capped = mc_xmalloc((tn ? tn : 1) * sizeof *capped);
	double *biased = mc_xmalloc((tn ? tn : 1) * sizeof *biased);
	int64_t group = g.hq / g.hkv;
	for (int64_t b = 0; b < g.b; b++)
		for (int64_t h = 0; h < g.hq; h++) {
			int64_t hk = h / group; /* query heads share kv heads in blocks */
			for (int64_t i = 0; i < g.sq; i++) {
				double mx = -INFINITY;
				for (int64_t j = 0; j < g.total; j++) {
					double dot = 0;
					for (int64_t d = 0; d < g.d; d++) {
						size_t qi = g.is_3d ? (size_t)(((b * g.sq + i) * g.hq + h) * g.d + d)
						                    : (size_t)(((b * g.hq + h) * g.sq + i) * g.d + d);
						dot += mc_get_f(q, qi) * kk[((b * g.hkv + hk) * g.total + j) * g.d + d];
					}
					raw[j] = dot * scale;
					capped[j] = p->softcap > 0 ? p->softcap * tanh(raw[j] / p->softcap) : raw[j];
					biased[j] = capped[j] +
					            attn_bias(&g, p, mask, mask_st, nonpad, b, h, i, j);
					if (biased[j] > mx)
						mx = biased[j];
				}
				/* softmax; a row with every key masked gives zeros, not NaN */
				double sum = 0;
				for (int64_t j = 0; j < g.total; j++) {
					biased[j] = mx == -INFINITY ? 0 : exp(biased[j] - mx);
					sum += biased[j];
				}
				size_t row = (size_t)(((b * g.hq + h) * g.sq + i) * g.total);
				for (int64_t j = 0; j < g.total; j++) {
					double prob = sum > 0 ? biased[j] / sum : 0;
					if (qk_out) {
						double v = p->qk_mode == 0 ? raw[j] : p->qk_mode == 1 ? capped[j]
						         : p->qk_mode == 2 ? capped[j] + attn_bias(&g, p, mask, mask_st,
						                                                   nonpad, b, h, i, j)
						         : prob;
						mc_set_f(qk_out, row + (size_t)j, v);
					}
					biased[j] = prob;
				}
				for (int64_t d = 0; y && d < g.dv; d++) {
					double acc = 0;
					for (int64_t j = 0; j < g.total; j++)
						if (biased[j] != 0) /* masked keys never contribute, even NaN/inf */
							acc += biased[j] * vv[((b * g.hkv + hk) * g.total + j) * g.dv + d];
					size_t yi = g.is_3d ? (size_t)(((b * g.sq + i) * g.hq + h) * g.dv + d)
					                    : (size_t)(((b * g.hq + h) * g.sq + i) * g.dv + d);
					mc_set_f(y, yi, acc);
				}
			}
		}
	mc_tensor *present_k = mc_opt_out(c, AT_PRESENT_K);
	mc_tensor *present_v = mc_opt_out(c, AT_PRESENT_V);
	for (size_t i = 0; present_k && i < present_k->numel; i++)
		mc_set_f(present_k, i, kk[i]);
	for (size_t i = 0; present_v && i < present_v->numel; i++)
		mc_set_f(present_v, i, vv[i]);
	free(kk);
	free(vv);
	free(raw);
	free(capped);
	free(biased);
	return 0;
}

/* ---- RotaryEmbedding (opset 23) ---- */

enum { RE_X, RE_COS, RE_SIN, RE_POS };

typedef struct {
	bool is_3d;
	int64_t b, s, h, d, rot;
	int64_t max_pos;          /* rows of the caches when position_ids is given */
} rope_geom;

static int rope_geom_get(const mc_node *n, const mc_shape *x, const mc_shape *cos_s,
                         const mc_shape *sin_s, const mc_shape *pos, rope_geom *g)
{
	int64_t interleaved, heads, rot;
	char a[256], b[256];
	memset(g, 0, sizeof *g);
	if (mc_attr_int(n, "interleaved", 0, &interleaved) || mc_attr_int(n, "num_heads", 0, &heads) ||
	    mc_attr_int(n, "rotary_embedding_dim", 0, &rot))
		return -1;
	if (x->rank == 4) {
		g->b = x->dims[0], g->h = x->dims[1], g->s = x->dims[2], g->d = x->dims[3];
	} else if (x->rank == 3) {
		if (heads <= 0 || x->dims[2] % heads)
			return mc_node_error(n, "3-D input %s needs num_heads dividing its hidden size",
			                     mc_shape_str(x, a, sizeof a));
		g->is_3d = true;
		g->b = x->dims[0], g->s = x->dims[1], g->h = heads, g->d = x->dims[2] / heads;
	} else {
		return mc_node_error(n, "input %s must be 3-D or 4-D", mc_shape_str(x, a, sizeof a));
	}
	g->rot = rot ? rot : g->d;
	if (g->rot < 0 || g->rot > g->d || g->rot % 2)
		return mc_node_error(n, "rotary_embedding_dim %lld must be even and at most the head "
		                     "size %lld", (long long)g->rot, (long long)g->d);
	if (!mc_shape_eq(cos_s, sin_s))
		return mc_node_error(n, "cos_cache %s and sin_cache %s differ",
		                     mc_shape_str(cos_s, a, sizeof a), mc_shape_str(sin_s, b, sizeof b));
	bool ok;
	if (pos) {
		ok = pos->rank == 2 && pos->dims[0] == g->b && pos->dims[1] == g->s &&
		     cos_s->rank == 2 && cos_s->dims[1] == g->rot / 2;
		g->max_pos = cos_s->rank == 2 ? cos_s->dims[0] : 0;
	} else {
		ok = cos_s->rank == 3 && cos_s->dims[0] == g->b && cos_s->dims[1] == g->s &&
		     cos_s->dims[2] == g->rot / 2;
	}
	if (!ok)
		return mc_node_error(n, "caches %s do not fit input %s with rotary dim %lld%s",
		                     mc_shape_str(cos_s, a, sizeof a), mc_shape_str(x, b, sizeof b),
		                     (long long)g->rot,
		                     pos ? " and position_ids [batch, seq]" : " (no position_ids: "
		                     "caches are [batch, seq, rot/2])");
	return 0;
}

static int rope_infer(mc_infer_ctx *c)
{
	if (MC_NEED_INPUTS(c, RE_X, RE_COS, RE_SIN))
		return -1;
	const mc_value *x = c->in[RE_X], *pos = mc_opt_in(c, RE_POS);
	rope_geom g;
	if (check_float(c->node, "input", x) || check_float(c->node, "cos_cache", c->in[RE_COS]) ||
	    check_float(c->node, "sin_cache", c->in[RE_SIN]))
		return -1;
	if (pos && !mc_dtype_is_int(pos->dtype))
		return mc_node_error(c->node, "position_ids must be integers");
	if (rope_geom_get(c->node, &x->shape, &c->in[RE_COS]->shape, &c->in[RE_SIN]->shape,
	                  pos ? &pos->shape : NULL, &g))
		return -1;
	return mc_infer_same_as_input0(c);
}

static int rope_eval(mc_eval_ctx *c)
{
	const mc_tensor *x = c->in[RE_X], *cs = c->in[RE_COS], *sn = c->in[RE_SIN];
	const mc_tensor *pos = mc_opt_tensor(c, RE_POS);
	mc_tensor *y = c->out[0];
	rope_geom g;
	int64_t interleaved;
	if (!y)
		return 0;
	if (rope_geom_get(c->node, &x->shape, &cs->shape, &sn->shape, pos ? &pos->shape : NULL, &g) ||
	    mc_attr_int(c->node, "interleaved", 0, &interleaved))
		return -1;
	int64_t half = g.rot / 2;
	for (int64_t b = 0; b < g.b; b++)
		for (int64_t s = 0; s < g.s; s++) {
			int64_t row = b * g.s + s;
			if (pos) {
				row = mc_get_i(pos, (size_t)(b * g.s + s));
				if (row < 0 || row >= g.max_pos)
					return mc_node_error(c->node, "position id %lld is outside the caches' "
					                     "%lld rows", (long long)row, (long long)g.max_pos);
			}
			for (int64_t h = 0; h < g.h; h++) {
				size_t base = g.is_3d ? (size_t)(((b * g.s + s) * g.h + h) * g.d)
				                      : (size_t)(((b * g.h + h) * g.s + s) * g.d);
				for (int64_t d = g.rot; d < g.d; d++)
					mc_set_f(y, base + (size_t)d, mc_get_f(x, base + (size_t)d));
				for (int64_t k = 0; k < half; k++) {
					/* the pair rotated by angle k: (k, k + half), or (2k, 2k + 1) */
					size_t i1 = base + (size_t)(interleaved ? 2 * k : k);
					size_t i2 = base + (size_t)(interleaved ? 2 * k + 1 : k + half);
					double co = mc_get_f(cs, (size_t)(row * half + k));
					double si = mc_get_f(sn, (size_t)(row * half + k));
					double x1 = mc_get_f(x, i1), x2 = mc_get_f(x, i2);
					mc_set_f(y, i1, co * x1 - si * x2);
					mc_set_f(y, i2, si * x1 + co * x2);
				}
			}
		}
	return 0;
}

/* ---- GridSample (opsets 16 (2-D), 20+ (N-D)) ---- */

static int gs_parse(mc_node *n)
{
	gs_params p;
	const char *mode, *pad;
	int64_t align;
	bool old = n->opset < 20; /* opset 16 spells the modes bilinear / bicubic */
	if (mc_attr_string(n, "mode", old ? "bilinear" : "linear", &mode) ||
	    mc_attr_string(n, "padding_mode", "zeros", &pad) ||
	    mc_attr_int(n, "align_corners", 0, &align))
		return -1;
	if (strcmp(mode, old ? "bilinear" : "linear") == 0)
		p.mode = GS_LINEAR;
	else if (strcmp(mode, "nearest") == 0)
		p.mode = GS_NEAREST;
	else if (strcmp(mode, old ? "bicubic" : "cubic") == 0)
		p.mode = GS_CUBIC;
	else
		return mc_node_error(n, "mode '%s' is not %s", mode,
		                     old ? "bilinear, nearest or bicubic" : "linear, nearest or cubic");
	if (strcmp(pad, "zeros") == 0)
		p.pad = GS_ZEROS;
	else if (strcmp(pad, "border") == 0)
		p.pad = GS_BORDER;
	else if (strcmp(pad, "reflection") == 0)
		p.pad = GS_REFLECTION;
	else
		return mc_node_error(n, "padding_mode '%s' is not zeros, border or reflection", pad);
	p.align = align != 0;
	memcpy(mc_params_new(n, sizeof p), &p, sizeof p);
	return 0;
}

static int gs_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	if (MC_NEED_INPUTS(c, 0, 1))
		return -1;
	const mc_value *x = c->in[0], *grid = c->in[1];
	char a[256], b[256];
	int r = x->shape.rank - 2;
	if (check_float(n, "X", x) || check_float(n, "grid", grid))
		return -1;
	if (r < 1 || (n->opset < 20 && r != 2))
		return mc_node_error(n, "X %s must be %s", mc_shape_str(&x->shape, a, sizeof a),
		                     n->opset < 20 ? "4-D before opset 20" : "at least 3-D");
	if (grid->shape.rank != r + 2 || grid->shape.dims[0] != x->shape.dims[0] ||
	    grid->shape.dims[r + 1] != r)
		return mc_node_error(n, "grid %s must be [N, out dims..., %d] for X %s",
		                     mc_shape_str(&grid->shape, a, sizeof a), r,
		                     mc_shape_str(&x->shape, b, sizeof b));
	mc_shape out = {r + 2, {x->shape.dims[0], x->shape.dims[1]}};
	for (int d = 0; d < r; d++)
		out.dims[d + 2] = grid->shape.dims[d + 1];
	mc_set_out(c, 0, x->dtype, &out);
	return 0;
}

/* Normalized [-1, 1] coordinate to pixel coordinate. */
static double gs_denorm(double v, int64_t len, bool align)
{
	return align ? (v + 1) / 2.0 * (double)(len - 1) : ((v + 1) * (double)len - 1) / 2.0;
}

/* Reflects x into [lo, hi] by the nearer border until it lies inside. */
static double gs_reflect(double x, double lo, double hi)
{
	double range = hi - lo;
	if (range <= 0)
		return lo;
	if (x < lo) {
		double dx = lo - x, k = floor(dx / range), r = dx - k * range;
		return fmod(k, 2) == 0 ? lo + r : hi - r;
	}
	if (x > hi) {
		double dx = x - hi, k = floor(dx / range), r = dx - k * range;
		return fmod(k, 2) == 0 ? hi - r : lo + r;
	}
	return x;
}

/* Pixel index after the padding rule; -1 means "outside: zero". */
static int64_t gs_index(const gs_params *p, int64_t i, int64_t len, double lo, double hi)
{
	if (p->pad == GS_ZEROS)
		return i >= 0 && i < len ? i : -1;
	if (p->pad == GS_REFLECTION)
		i = (int64_t)gs_reflect((double)i, lo, hi);
	return i < 0 ? 0 : i >= len ? len - 1 : i;
}

static void gs_cubic_coeffs(double t, double w[4])
{
	const double a = -0.75; /* Keys' cubic convolution, as PyTorch */
	double x = fabs(t);
	w[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
	w[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
	w[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
	w[3] = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a;
}

static int gs_eval(mc_eval_ctx *c)
{
	const gs_params *p = c->node->params;
	const mc_tensor *x = c->in[0], *grid = c->in[1];
	mc_tensor *y = c->out[0];
	if (!y)
		return 0;
	int r = x->shape.rank - 2;
	int64_t nb = x->shape.dims[0], ch = x->shape.dims[1];
	const int64_t *dims = x->shape.dims + 2;
	size_t in_sp = 1, out_sp = 1, sp_stride[MC_MAX_RANK];
	for (int d = r - 1; d >= 0; d--) {
		sp_stride[d] = in_sp;
		in_sp *= (size_t)dims[d];
		out_sp *= (size_t)y->shape.dims[d + 2];
	}
	double lo[MC_MAX_RANK], hi[MC_MAX_RANK];
	for (int d = 0; d < r; d++) {
		lo[d] = p->align ? 0 : -0.5;
		hi[d] = p->align ? (double)dims[d] - 1 : (double)dims[d] - 0.5;
	}
	if (in_sp == 0) /* nothing to sample: the output stays zero */
		return 0;
	int taps = p->mode == GS_LINEAR ? 2 : p->mode == GS_CUBIC ? 4 : 1;
	for (int64_t b = 0; b < nb; b++)
		for (size_t o = 0; o < out_sp; o++) {
			/* pixel coordinates; the grid lists them innermost dim first */
			double pos[MC_MAX_RANK];
			bool nan = false;
			for (int d = 0; d < r; d++) {
				size_t gi = ((size_t)b * out_sp + o) * (size_t)r + (size_t)(r - 1 - d);
				double v = gs_denorm(mc_get_f(grid, gi), dims[d], p->align);
				if (p->mode == GS_NEAREST)
					v = nearbyint(v); /* half to even, as the ONNX test data */
				if (v < lo[d] || v > hi[d]) {
					if (p->pad == GS_BORDER)
						v = v < 0 ? 0 : v > (double)dims[d] - 1 ? (double)dims[d] - 1 : v;
					else if (p->pad == GS_REFLECTION)
						v = gs_reflect(v, lo[d], hi[d]);
				}
				nan = nan || isnan(v);
				/* far outside is as good as just outside, and converts safely */
				pos[d] = fmax(-1e12, fmin(1e12, v));
			}
			int64_t base[MC_MAX_RANK];
			double w[MC_MAX_RANK][4];
			for (int d = 0; d < r && !nan; d++) {
				if (p->mode == GS_NEAREST) {
					base[d] = (int64_t)pos[d];
					w[d][0] = 1;
					continue;
				}
				double f = floor(pos[d]), t = pos[d] - f;
				base[d] = (int64_t)f - (p->mode == GS_CUBIC);
				if (p->mode == GS_LINEAR)
					w[d][0] = 1 - t, w[d][1] = t;
				else
					gs_cubic_coeffs(t, w[d]);
			}
			size_t combos = 1;
			for (int d = 0; d < r; d++)
				combos *= (size_t)taps;
			for (int64_t cc = 0; cc < ch; cc++) {
				size_t yi = ((size_t)b * (size_t)ch + (size_t)cc) * out_sp + o;
				if (nan) {
					mc_set_f(y, yi, NAN);
					continue;
				}
				size_t xbase = ((size_t)b * (size_t)ch + (size_t)cc) * in_sp;
				double acc = 0;
				for (size_t k = 0; k < combos; k++) {
					double weight = 1;
					size_t off = 0, kk = k;
					bool zero = false;
					for (int d = r - 1; d >= 0; d--) {
						int tap = (int)(kk % (size_t)taps);
						kk /= (size_t)taps;
						int64_t i = gs_index(p, base[d] + tap, dims[d], lo[d], hi[d]);
						zero = zero || i < 0;
						weight *= w[d][tap];
						off += (size_t)(i < 0 ? 0 : i) * sp_stride[d];
					}
					if (!zero)
						acc += weight * mc_get_f(x, xbase + off);
				}
				mc_set_f(y, yi, acc);
			}
		}
	return 0;
}

/* ---- RoiAlign (opsets 10, 16+) ---- */

static int roi_parse(mc_node *n)
{
	roi_params p;
	const char *mode, *ctm;
	if (mc_attr_string(n, "mode", "avg", &mode) ||
	    mc_attr_string(n, "coordinate_transformation_mode",
	                   n->opset >= 16 ? "half_pixel" : "output_half_pixel", &ctm) ||
	    mc_attr_int(n, "output_height", 1, &p.out_h) || mc_attr_int(n, "output_width", 1, &p.out_w) ||
	    mc_attr_int(n, "sampling_ratio", 0, &p.sampling_ratio) ||
	    mc_attr_float(n, "spatial_scale", 1.0, &p.spatial_scale))
		return -1;
	if (strcmp(mode, "avg") && strcmp(mode, "max"))
		return mc_node_error(n, "mode '%s' is not avg or max", mode);
	p.max_mode = strcmp(mode, "max") == 0;
	if (n->opset < 16)
		ctm = "output_half_pixel"; /* the only behaviour before opset 16 */
	if (strcmp(ctm, "half_pixel") && strcmp(ctm, "output_half_pixel"))
		return mc_node_error(n, "coordinate_transformation_mode '%s' is not half_pixel or "
		                     "output_half_pixel", ctm);
	p.half_pixel = strcmp(ctm, "half_pixel") == 0;
	if (p.out_h < 1 || p.out_w < 1 || p.sampling_ratio < 0 || p.sampling_ratio > 1 << 16)
		return mc_node_error(n, "output_height, output_width must be positive and "
		                     "sampling_ratio non-negative");
	memcpy(mc_params_new(n, sizeof p), &p, sizeof p);
	return 0;
}

static int roi_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const roi_params *p = n->params;
	if (MC_NEED_INPUTS(c, 0, 1, 2))
		return -1;
	const mc_value *x = c->in[0], *rois = c->in[1], *bi = c->in[2];
	if (check_float(n, "X", x) || check_float(n, "rois", rois))
		return -1;
	if (x->shape.rank != 4 || rois->shape.rank != 2 || rois->shape.dims[1] != 4 ||
	    bi->shape.rank != 1 || bi->shape.dims[0] != rois->shape.dims[0] ||
	    !mc_dtype_is_int(bi->dtype))
		return mc_node_error(n, "needs X [N, C, H, W], rois [R, 4] and integer batch_indices [R]");
	mc_shape out = {4, {rois->shape.dims[0], x->shape.dims[1], p->out_h, p->out_w}};
	mc_set_out(c, 0, x->dtype, &out);
	return 0;
}

/* Bilinear sample of one plane at (y, x), with ONNX Runtime's border rules;
 * in max mode the corners are combined by max of weighted values. */
static double roi_sample(const mc_tensor *x, size_t plane, int64_t h, int64_t w, double yy,
                         double xx, bool max_mode)
{
	if (yy < -1.0 || yy > (double)h || xx < -1.0 || xx > (double)w)
		return 0;
	yy = yy < 0 ? 0 : yy;
	xx = xx < 0 ? 0 : xx;
	int64_t y0 = (int64_t)yy, x0 = (int64_t)xx, y1, x1;
	if (y0 >= h - 1)
		y1 = y0 = h - 1, yy = (double)y0;
	else
		y1 = y0 + 1;
	if (x0 >= w - 1)
		x1 = x0 = w - 1, xx = (double)x0;
	else
		x1 = x0 + 1;
	double ly = yy - (double)y0, lx = xx - (double)x0, hy = 1 - ly, hx = 1 - lx;
	double v[4] = {
		hy * hx * mc_get_f(x, plane + (size_t)(y0 * w + x0)),
		hy * lx * mc_get_f(x, plane + (size_t)(y0 * w + x1)),
		ly * hx * mc_get_f(x, plane + (size_t)(y1 * w + x0)),
		ly * lx * mc_get_f(x, plane + (size_t)(y1 * w + x1)),
	};
	if (!max_mode)
		return v[0] + v[1] + v[2] + v[3];
	return fmax(fmax(v[0], v[1]), fmax(v[2], v[3]));
}

static int roi_eval(mc_eval_ctx *c)
{
	const mc_node *n = c->node;
	const roi_params *p = n->params;
	const mc_tensor *x = c->in[0], *rois = c->in[1], *bidx = c->in[2];
	mc_tensor *y = c->out[0];
	if (!y)
		return 0;
	int64_t nb = x->shape.dims[0], ch = x->shape.dims[1], h = x->shape.dims[2],
	        w = x->shape.dims[3];
	int64_t nr = rois->shape.dims[0];
	double off = p->half_pixel ? 0.5 : 0.0;
	if (h == 0 || w == 0) /* nothing to sample: the output stays zero */
		nr = 0;
	for (int64_t r = 0; r < nr; r++) {
		int64_t b = mc_get_i(bidx, (size_t)r);
		if (b < 0 || b >= nb)
			return mc_node_error(n, "batch index %lld of ROI %lld is outside [0, %lld)",
			                     (long long)b, (long long)r, (long long)nb);
		double box[4];
		for (int k = 0; k < 4; k++) {
			box[k] = mc_get_f(rois, (size_t)(r * 4 + k)) * p->spatial_scale - off;
			if (!isfinite(box[k]) || fabs(box[k]) > 1e12)
				return mc_node_error(n, "ROI %lld has a non-finite or huge coordinate",
				                     (long long)r);
		}
		double rw = box[2] - box[0], rh = box[3] - box[1];
		if (!p->half_pixel) { /* malformed ROIs are forced to 1x1 */
			rw = fmax(rw, 1.0);
			rh = fmax(rh, 1.0);
		}
		double bh = rh / (double)p->out_h, bw = rw / (double)p->out_w;
		double gh = p->sampling_ratio > 0 ? (double)p->sampling_ratio : ceil(bh);
		double gw = p->sampling_ratio > 0 ? (double)p->sampling_ratio : ceil(bw);
		if (gh > 1 << 16 || gw > 1 << 16)
			return mc_node_error(n, "ROI %lld is too large to sample", (long long)r);
		int64_t grid_h = gh > 0 ? (int64_t)gh : 0, grid_w = gw > 0 ? (int64_t)gw : 0;
		double count = grid_h * grid_w > 1 ? (double)(grid_h * grid_w) : 1.0;
		for (int64_t cc = 0; cc < ch; cc++) {
			size_t plane = (size_t)((b * ch + cc) * h * w);
			for (int64_t ph = 0; ph < p->out_h; ph++)
				for (int64_t pw = 0; pw < p->out_w; pw++) {
					double acc = 0;
					bool first = true;
					for (int64_t iy = 0; iy < grid_h; iy++) {
						double yy = box[1] + (double)ph * bh + ((double)iy + 0.5) * bh / (double)grid_h;
						for (int64_t ix = 0; ix < grid_w; ix++) {
							double xx = box[0] + (double)pw * bw +
							            ((double)ix + 0.5) * bw / (double)grid_w;
							double v = roi_sample(x, plane, h, w, yy, xx, p->max_mode);
							if (!p->max_mode)
								acc += v;
							else if (first || v > acc)
								acc = v;
							first = false;
						}
					}
					size_t yi = (size_t)(((r * ch + cc) * p->out_h + ph) * p->out_w + pw);
					mc_set_f(y, yi, p->max_mode ? acc : acc / count);
				}
		}
	}
	return 0;
}

/* ---- Det ---- */

static int det_infer(mc_infer_ctx *c)
{
	if (MC_NEED_INPUTS(c, 0))
		return -1;
	const mc_value *x = c->in[0];
	char a[256];
	const mc_shape *s = &x->shape;
	if (check_float(c->node, "X", x))
		return -1;
	if (s->rank < 2 || s->dims[s->rank - 1] != s->dims[s->rank - 2])
		return mc_node_error(c->node, "X %s must be [..., M, M]", mc_shape_str(s, a, sizeof a));
	mc_shape out = {s->rank - 2, {0}};
	memcpy(out.dims, s->dims, sizeof(int64_t) * (size_t)out.rank);
	mc_set_out(c, 0, x->dtype, &out);
	return 0;
}

/* LU decomposition with partial pivoting, in double. */
static double det_of(double *a, int64_t m)
{
	double det = 1;
	for (int64_t k = 0; k < m; k++) {
		int64_t piv = k;
		for (int64_t i = k + 1; i < m; i++)
			if (fabs(a[i * m + k]) > fabs(a[piv * m + k]))
				piv = i;
		if (a[piv * m + k] == 0)
			return 0;
		if (piv != k) {
			for (int64_t j = 0; j < m; j++) {
				double t = a[k * m + j];
				a[k * m + j] = a[piv * m + j];
				a[piv * m + j] = t;
			}
			det = -det;
		}
		det *= a[k * m + k];
		for (int64_t i = k + 1; i < m; i++) {
			double f = a[i * m + k] / a[k * m + k];
			for (int64_t j = k; j < m; j++)
				a[i * m + j] -= f * a[k * m + j];
		}
	}
	return det;
}

static int det_eval(mc_eval_ctx *c)
{
	const mc_tensor *x = c->in[0];
	mc_tensor *y = c->out[0];
	if (!y)
		return 0;
	int64_t m = x->shape.dims[x->shape.rank - 1];
	size_t mm = (size_t)(m * m);
	double *a = mc_xmalloc((mm ? mm : 1) * sizeof *a);
	for (size_t k = 0; k < y->numel; k++) {
		for (size_t i = 0; i < mm; i++)
			a[i] = mc_get_f(x, k * mm + i);
		mc_set_f(y, k, det_of(a, m));
	}
	free(a);
	return 0;
}

/* ---- CenterCropPad (opset 18) ---- */

/* For every dim: the output size and the offset from output to input index. */
static int ccp_plan(mc_infer_ctx *c, mc_shape *out, int64_t offset[MC_MAX_RANK])
{
	const mc_node *n = c->node;
	const mc_shape *x = &c->in[0]->shape;
	int64_t sizes[MC_MAX_RANK];
	size_t count;
	const int64_t *axes_attr;
	size_t n_axes;
	if (shape_input(c, 1, sizes, MC_MAX_RANK, &count) ||
	    mc_attr_ints(n, "axes", &axes_attr, &n_axes))
		return -1;
	int axes[MC_MAX_RANK];
	if (!axes_attr)
		n_axes = (size_t)x->rank;
	if (n_axes > (size_t)x->rank || count != n_axes)
		return mc_node_error(n, "shape has %zu values for %zu axes", count, n_axes);
	bool seen[MC_MAX_RANK] = {false};
	for (size_t k = 0; k < n_axes; k++) {
		if (!axes_attr)
			axes[k] = (int)k;
		else if (mc_norm_axis(n, axes_attr[k], x->rank, &axes[k]))
			return -1;
		if (seen[axes[k]])
			return mc_node_error(n, "axis %d is repeated", axes[k]);
		seen[axes[k]] = true;
	}
	*out = *x;
	memset(offset, 0, sizeof(int64_t) * MC_MAX_RANK);
	for (size_t k = 0; k < n_axes; k++) {
		int a = axes[k];
		int64_t dim = x->dims[a], want = sizes[k];
		if (want < 0)
			return mc_node_error(n, "target size %lld is negative", (long long)want);
		out->dims[a] = want;
		/* crop starts at floor((dim - want) / 2); padding puts floor of the
		 * difference / 2 before the data */
		offset[a] = want <= dim ? (dim - want) / 2 : -((want - dim) / 2);
	}
	return 0;
}

static int ccp_infer(mc_infer_ctx *c)
{
	if (MC_NEED_INPUTS(c, 0, 1))
		return -1;
	mc_shape out;
	int64_t offset[MC_MAX_RANK];
	if (ccp_plan(c, &out, offset))
		return -1;
	mc_set_out(c, 0, c->in[0]->dtype, &out);
	return 0;
}

static int ccp_eval(mc_eval_ctx *c)
{
	const mc_tensor *x = c->in[0];
	mc_tensor *y = c->out[0];
	if (!y)
		return 0;
	/* offsets again, from the constant shape input and the output shape */
	int64_t offset[MC_MAX_RANK];
	for (int d = 0; d < x->shape.rank; d++) {
		int64_t dim = x->shape.dims[d], want = y->shape.dims[d];
		offset[d] = want <= dim ? (dim - want) / 2 : -((want - dim) / 2);
	}
	size_t esz = mc_dtype_size(x->dtype);
	int64_t xst[MC_MAX_RANK];
	mc_strides(&x->shape, xst);
	for (size_t i = 0; i < y->numel; i++) {
		size_t rem = i, src = 0;
		bool inside = true;
		for (int d = x->shape.rank - 1; d >= 0; d--) {
			int64_t o = (int64_t)(rem % (size_t)y->shape.dims[d]);
			rem /= (size_t)y->shape.dims[d];
			int64_t s = o + offset[d];
			inside = inside && s >= 0 && s < x->shape.dims[d];
			src += (size_t)(s < 0 ? 0 : s) * (size_t)xst[d];
		}
		if (inside)
			memcpy((char *)y->data + i * esz, (const char *)x->data + src * esz, esz);
	}
	return 0;
}

/* ---- Col2Im (opset 18) ---- */

int mc_col2im_plan(const mc_node *n, const mc_shape *x, const int64_t *image,
                   const int64_t *block, int r, col2im_geom *g)
{
	char a[256];
	memset(g, 0, sizeof *g);
	g->r = r;
	if (x->rank != 3 || r < 1 || r > MC_MAX_RANK - 2)
		return mc_node_error(n, "input %s must be [N, C * prod(block), L] with 1..%d image dims",
		                     mc_shape_str(x, a, sizeof a), MC_MAX_RANK - 2);
	if (mc_attr_ints_fixed(n, "dilations", r, 1, 1, g->dil) ||
	    mc_attr_ints_fixed(n, "strides", r, 1, 1, g->stride) ||
	    mc_attr_ints_fixed(n, "pads", 2 * r, 0, 0, g->pad))
		return -1;
	int64_t kprod = 1, lprod = 1;
	for (int d = 0; d < r; d++) {
		g->image[d] = image[d];
		g->block[d] = block[d];
		if (image[d] < 1 || block[d] < 1 || image[d] > ((int64_t)1 << 40) ||
		    block[d] > ((int64_t)1 << 40))
			return mc_node_error(n, "image_shape and block_shape values must be positive");
		int64_t span = g->dil[d] * (block[d] - 1) + 1;
		int64_t room = image[d] + g->pad[d] + g->pad[d + r] - span;
		if (room < 0)
			return mc_node_error(n, "block does not fit the padded image on dim %d", d);
		g->cols[d] = room / g->stride[d] + 1;
		if (kprod > ((int64_t)1 << 40) / block[d] || lprod > ((int64_t)1 << 40) / g->cols[d])
			return mc_node_error(n, "block or image too large");
		kprod *= block[d];
		lprod *= g->cols[d];
	}
	if (x->dims[1] % kprod || x->dims[2] != lprod)
		return mc_node_error(n, "input %s does not match %lld block elements and %lld blocks",
		                     mc_shape_str(x, a, sizeof a), (long long)kprod, (long long)lprod);
	g->n = x->dims[0];
	g->ch = x->dims[1] / kprod;
	g->blocks = kprod;
	return 0;
}

static int col2im_infer(mc_infer_ctx *c)
{
	if (MC_NEED_INPUTS(c, 0, 1, 2))
		return -1;
	int64_t image[MC_MAX_RANK] = {0}, block[MC_MAX_RANK] = {0};
	size_t ni = 0, nbk = 0;
	if (shape_input(c, 1, image, MC_MAX_RANK, &ni) || shape_input(c, 2, block, MC_MAX_RANK, &nbk))
		return -1;
	if (ni != nbk)
		return mc_node_error(c->node, "image_shape and block_shape differ in length");
	col2im_geom g;
	if (mc_col2im_plan(c->node, &c->in[0]->shape, image, block, (int)ni, &g))
		return -1;
	mc_shape out = {g.r + 2, {g.n, g.ch}};
	for (int d = 0; d < g.r; d++)
		out.dims[d + 2] = g.image[d];
	mc_set_out(c, 0, c->in[0]->dtype, &out);
	return 0;
}

/* Each column entry adds into the image pixel its block position covers. */
static int col2im_eval(mc_eval_ctx *c)
{
	const mc_tensor *x = c->in[0];
	mc_tensor *y = c->out[0];
	if (!y)
		return 0;
	int r = y->shape.rank - 2;
	int64_t image[MC_MAX_RANK] = {0}, block[MC_MAX_RANK] = {0};
	for (int d = 0; d < r; d++) {
		image[d] = y->shape.dims[d + 2];
		block[d] = mc_get_i(c->in[2], (size_t)d);
	}
	col2im_geom g;
	if (mc_col2im_plan(c->node, &x->shape, image, block, r, &g))
		return -1;
	size_t img = 1, cols = (size_t)x->shape.dims[2];
	for (int d = 0; d < r; d++)
		img *= (size_t)g.image[d];
	double *acc = mc_xcalloc(y->numel ? y->numel : 1, sizeof *acc);
	for (int64_t b = 0; b < g.n; b++)
		for (int64_t cc = 0; cc < g.ch; cc++)
			for (int64_t k = 0; k < g.blocks; k++)
				for (size_t l = 0; l < cols; l++) {
					size_t off = 0, kk = (size_t)k, ll = l, scale = 1;
					bool inside = true;
					for (int d = r - 1; d >= 0; d--) {
						int64_t kd = (int64_t)(kk % (size_t)g.block[d]);
						int64_t ld = (int64_t)(ll % (size_t)g.cols[d]);
						kk /= (size_t)g.block[d];
						ll /= (size_t)g.cols[d];
						int64_t pos = ld * g.stride[d] - g.pad[d] + kd * g.dil[d];
						inside = inside && pos >= 0 && pos < g.image[d];
						off += (size_t)(pos < 0 ? 0 : pos) * scale;
						scale *= (size_t)g.image[d];
					}
					if (!inside)
						continue;
					size_t src = (size_t)((b * x->shape.dims[1] + cc * g.blocks + k)) * cols + l;
					acc[(size_t)(b * g.ch + cc) * img + off] += mc_get_f(x, src);
				}
	mc_tensor_from_double(y, acc);
	free(acc);
	return 0;
}

/* ---- data-dependent output shapes: NonZero, Unique, NonMaxSuppression ----
 * Static shapes need the data at compile time: these ops run during
 * inference on constant inputs and are refused otherwise. */

static int need_constant_inputs(mc_infer_ctx *c)
{
	for (int k = 0; k < c->n_in; k++)
		if (c->in[k] && !c->in[k]->konst)
			return mc_node_error(c->node, "a runtime value for input %d ('%s') is not "
			                     "supported: the output shape depends on its data, so it must "
			                     "be known at compile time", k, c->in[k]->name);
	return 0;
}

/* Copies computed results into the preallocated outputs. */
static int deliver(mc_eval_ctx *c, mc_tensor **res, int count)
{
	int rc = 0;
	for (int k = 0; k < count; k++) {
		mc_tensor *o = mc_opt_out(c, k);
		if (o && res[k]) {
			if (o->nbytes != res[k]->nbytes || o->dtype != res[k]->dtype)
				rc = mc_node_error(c->node, "output %d does not match its inferred shape", k);
			else
				memcpy(o->data, res[k]->data, o->nbytes);
		}
		mc_tensor_free(res[k]);
	}
	return rc;
}

static mc_tensor *nonzero_compute(const mc_tensor *x)
{
	size_t nnz = 0;
	for (size_t i = 0; i < x->numel; i++)
		nnz += mc_get_f(x, i) != 0;
	mc_shape s = {2, {x->shape.rank, (int64_t)nnz}};
	mc_tensor *y = mc_tensor_new(MC_INT64, &s);
	if (!y)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < x->numel; i++) {
		if (mc_get_f(x, i) == 0)
			continue;
		size_t rem = i;
		for (int d = x->shape.rank - 1; d >= 0; d--) {
			mc_set_i(y, (size_t)d * nnz + k, (int64_t)(rem % (size_t)x->shape.dims[d]));
			rem /= (size_t)x->shape.dims[d];
		}
		k++;
	}
	return y;
}

static int nonzero_infer(mc_infer_ctx *c)
{
	if (MC_NEED_INPUTS(c, 0))
		return -1;
	int count = mc_count_out(c);
	if (!c->in[0]->konst) { /* [rank, up to every element], counted */
		if (count < 0)
			return need_constant_inputs(c);
		const mc_shape *xs = &c->in[0]->shape;
		mc_shape s = {2, {xs->rank, (int64_t)mc_numel(xs)}};
		mc_set_counted_out(c, 0, MC_INT64, &s, 1, count);
		return 0;
	}
	mc_tensor *y = nonzero_compute(c->in[0]->konst);
	if (!y)
		return mc_node_error(c->node, "cannot allocate the result");
	mc_set_out(c, 0, MC_INT64, &y->shape);
	mc_tensor_free(y);
	return 0;
}

static int nonzero_eval(mc_eval_ctx *c)
{
	mc_tensor *y = nonzero_compute(c->in[0]);
	if (!y)
		return mc_node_error(c->node, "cannot allocate the result");
	mc_deliver_count(c, y->shape.dims[1]);
	return mc_deliver_padded(c, 0, y, 1);
}

/* Unique: slices along axis (or single elements) compared lexicographically. */
typedef struct {
	const mc_tensor *x;
	size_t outer, inner, n;  /* slice a holds x[o, a, i] for all o, i */
} slices;

static int slice_cmp(size_t a, size_t b, const void *ctx)
{
	const slices *s = ctx;
	bool fl = mc_dtype_is_float(s->x->dtype);
	for (size_t o = 0; o < s->outer; o++)
		for (size_t i = 0; i < s->inner; i++) {
			size_t ia = (o * s->n + a) * s->inner + i, ib = (o * s->n + b) * s->inner + i;
			if (fl) {
				double va = mc_get_f(s->x, ia), vb = mc_get_f(s->x, ib);
				if (va != vb)
					return va < vb ? -1 : 1;
			} else {
				int64_t va = mc_get_i(s->x, ia), vb = mc_get_i(s->x, ib);
				if (va != vb)
					return va < vb ? -1 : 1;
			}
		}
	return 0;
}

static int index_cmp(size_t a, size_t b, const void *ctx)
{
	const size_t *first = ctx;
	return first[a] < first[b] ? -1 : first[a] > first[b];
}

static int unique_compute(const mc_node *n, const mc_tensor *x, mc_tensor *res[4])
{
	const mc_attr *axis_attr = mc_attr_find(n, "axis");
	int64_t sorted_attr;
	if (mc_attr_int(n, "sorted", 1, &sorted_attr))
		return -1;
	slices s = {x, 1, 1, x->numel};
	int axis = -1;
	if (axis_attr) {
		if (axis_attr->type != MC_ATTR_INT)
			return mc_node_error(n, "attribute 'axis' must be an int");
		if (mc_norm_axis(n, axis_attr->i, x->shape.rank, &axis))
			return -1;
		s.n = (size_t)x->shape.dims[axis];
		for (int d = 0; d < axis; d++)
			s.outer *= (size_t)x->shape.dims[d];
		for (int d = axis + 1; d < x->shape.rank; d++)
			s.inner *= (size_t)x->shape.dims[d];
	}
	size_t *order = mc_xmalloc((s.n ? s.n : 1) * sizeof *order);
	for (size_t a = 0; a < s.n; a++)
		order[a] = a;
	merge_sort(order, s.n, slice_cmp, &s);
	/* groups of equal slices in sorted order; stability makes the first
	 * of each group its first occurrence */
	size_t *group_of = mc_xmalloc((s.n ? s.n : 1) * sizeof *group_of);
	size_t *first = mc_xmalloc((s.n ? s.n : 1) * sizeof *first);
	size_t *count = mc_xcalloc(s.n ? s.n : 1, sizeof *count);
	size_t ng = 0;
	for (size_t k = 0; k < s.n; k++) {
		if (k == 0 || slice_cmp(order[k - 1], order[k], &s) != 0)
			first[ng++] = order[k];
		group_of[order[k]] = ng - 1;
		count[ng - 1]++;
	}
	/* output order of the groups: sorted, or by first occurrence */
	size_t *rank_of = mc_xmalloc((ng ? ng : 1) * sizeof *rank_of);
	size_t *gorder = mc_xmalloc((ng ? ng : 1) * sizeof *gorder);
	for (size_t k = 0; k < ng; k++)
		gorder[k] = k;
	if (!sorted_attr)
		merge_sort(gorder, ng, index_cmp, first);
	for (size_t k = 0; k < ng; k++)
		rank_of[gorder[k]] = k;
	mc_shape ys = x->shape;
	if (axis < 0)
		ys = (mc_shape){1, {(int64_t)ng}};
	else
		ys.dims[axis] = (int64_t)ng;
	mc_shape gs = {1, {(int64_t)ng}}, xs = {1, {(int64_t)s.n}};
	res[0] = mc_tensor_new(x->dtype, &ys);
	res[1] = mc_tensor_new(MC_INT64, &gs);
	res[2] = mc_tensor_new(MC_INT64, &xs);
	res[3] = mc_tensor_new(MC_INT64, &gs);
	int rc = 0;
	if (!res[0] || !res[1] || !res[2] || !res[3]) {
		rc = mc_node_error(n, "cannot allocate the result");
	} else {
		size_t esz = mc_dtype_size(x->dtype);
		for (size_t k = 0; k < ng; k++) {
			size_t g = gorder[k];
			for (size_t o = 0; o < s.outer; o++)
				memcpy((char *)res[0]->data + ((o * ng + k) * s.inner) * esz,
				       (const char *)x->data + ((o * s.n + first[g]) * s.inner) * esz,
				       s.inner * esz);
			mc_set_i(res[1], k, (int64_t)first[g]);
			mc_set_i(res[3], k, (int64_t)count[g]);
		}
		for (size_t a = 0; a < s.n; a++)
			mc_set_i(res[2], a, (int64_t)rank_of[group_of[a]]);
	}
	free(order);
	free(group_of);
	free(first);
	free(count);
	free(rank_of);
	free(gorder);
	if (rc)
		for (int k = 0; k < 4; k++)
			mc_tensor_free(res[k]), res[k] = NULL;
	return rc;
}

/* Unique's axis (-1: flattened) and the number of slices along it. */
static int unique_axis(const mc_node *n, const mc_shape *xs, int *axis, int64_t *slices_n)
{
	const mc_attr *a = mc_attr_find(n, "axis");
	*axis = -1;
	*slices_n = (int64_t)mc_numel(xs);
	if (!a)
		return 0;
	if (a->type != MC_ATTR_INT)
		return mc_node_error(n, "attribute 'axis' must be an int");
	if (mc_norm_axis(n, a->i, xs->rank, axis))
		return -1;
	*slices_n = xs->dims[*axis];
	return 0;
}

static int unique_infer(mc_infer_ctx *c)
{
	if (MC_NEED_INPUTS(c, 0))
		return -1;
	int count = mc_count_out(c);
	if (!c->in[0]->konst && count >= 0) {
		/* known at run time: Y, indices and counts padded to every slice,
		 * counted (libcore/counted.c) by the unique ones; inverse_indices
		 * whole */
		const mc_shape *xs = &c->in[0]->shape;
		int axis;
		int64_t n;
		if (unique_axis(c->node, xs, &axis, &n))
			return -1;
		mc_shape ys = *xs, gs = {1, {n}};
		if (axis < 0)
			ys = gs;
		for (int k = 0; k < 4 && k < c->n_out; k++) {
			if (k == 2 && c->out[2])
				mc_set_out(c, 2, MC_INT64, &gs);
			else if (c->out[k])
				mc_set_counted_out(c, k, k ? MC_INT64 : c->in[0]->dtype, k ? &gs : &ys,
				                   k == 0 && axis >= 0 ? axis : 0, count);
		}
		return 0;
	}
	if (need_constant_inputs(c))
		return -1;
	mc_tensor *res[4] = {NULL};
	if (unique_compute(c->node, c->in[0]->konst, res))
		return -1;
	for (int k = 0; k < 4; k++) {
		if (k < c->n_out && c->out[k])
			mc_set_out(c, k, res[k]->dtype, &res[k]->shape);
		mc_tensor_free(res[k]);
	}
	return 0;
}

static int unique_eval(mc_eval_ctx *c)
{
	int axis;
	int64_t n;
	mc_tensor *res[4] = {NULL};
	if (unique_axis(c->node, &c->in[0]->shape, &axis, &n) || unique_compute(c->node, c->in[0], res))
		return -1;
	/* inverse_indices whole; Y, indices and counts padded; the count */
	mc_deliver_count(c, res[1]->shape.dims[0]);
	mc_tensor *whole[4] = {NULL, NULL, res[2], NULL};
	int rc = deliver(c, whole, 3);
	static const int padded[] = {0, 1, 3};
	for (int i = 0; i < 3; i++) {
		int k = padded[i];
		if (mc_deliver_padded(c, k, res[k], k == 0 && axis >= 0 ? axis : 0))
			rc = -1;
	}
	return rc;
}

enum { NMS_BOXES, NMS_SCORES, NMS_MAX_OUT, NMS_IOU, NMS_SCORE_THRESHOLD };

typedef struct {
	const mc_tensor *scores;
	size_t base;
} nms_sort_ctx;

/* Higher score first; equal scores keep the lower box index first. */
static int nms_cmp(size_t a, size_t b, const void *ctx)
{
	const nms_sort_ctx *s = ctx;
	double va = mc_get_f(s->scores, s->base + a), vb = mc_get_f(s->scores, s->base + b);
	if (va != vb)
		return va > vb ? -1 : 1;
	return a < b ? -1 : a > b;
}

/* Corners of a box as (y_min, x_min, y_max, x_max). */
static void nms_corners(const mc_tensor *boxes, size_t at, bool center, double out[4])
{
	double v[4];
	for (int k = 0; k < 4; k++)
		v[k] = mc_get_f(boxes, at + (size_t)k);
	if (center) { /* [x_center, y_center, width, height] */
		out[0] = v[1] - v[3] / 2, out[2] = v[1] + v[3] / 2;
		out[1] = v[0] - v[2] / 2, out[3] = v[0] + v[2] / 2;
	} else {      /* [y1, x1, y2, x2], either diagonal */
		out[0] = fmin(v[0], v[2]), out[2] = fmax(v[0], v[2]);
		out[1] = fmin(v[1], v[3]), out[3] = fmax(v[1], v[3]);
	}
}

static bool nms_suppress(const double a[4], const double b[4], double iou_threshold)
{
	double ih = fmin(a[2], b[2]) - fmax(a[0], b[0]), iw = fmin(a[3], b[3]) - fmax(a[1], b[1]);
	if (ih <= 0 || iw <= 0)
		return false;
	double inter = ih * iw;
	double area_a = (a[2] - a[0]) * (a[3] - a[1]), area_b = (b[2] - b[0]) * (b[3] - b[1]);
	double uni = area_a + area_b - inter;
	if (area_a <= 0 || area_b <= 0 || uni <= 0)
		return false;
	return inter / uni > iou_threshold;
}

static int nms_compute(const mc_node *n, const mc_tensor *const *in, int n_in, mc_tensor **res)
{
	const mc_tensor *boxes = in[NMS_BOXES], *scores = in[NMS_SCORES];
	const mc_tensor *max_t = n_in > NMS_MAX_OUT ? in[NMS_MAX_OUT] : NULL;
	const mc_tensor *iou_t = n_in > NMS_IOU ? in[NMS_IOU] : NULL;
	const mc_tensor *thr_t = n_in > NMS_SCORE_THRESHOLD ? in[NMS_SCORE_THRESHOLD] : NULL;
	int64_t center;
	if (mc_attr_int(n, "center_point_box", 0, &center))
		return -1;
	int64_t max_out = max_t && max_t->numel ? mc_get_i(max_t, 0) : 0;
	double iou = iou_t && iou_t->numel ? mc_get_f(iou_t, 0) : 0;
	bool has_thr = thr_t && thr_t->numel;
	double thr = has_thr ? mc_get_f(thr_t, 0) : 0;
	size_t nb = (size_t)boxes->shape.dims[0], nbox = (size_t)boxes->shape.dims[1];
	size_t ncls = (size_t)scores->shape.dims[1];
	size_t cap = max_out > 0 ? (size_t)max_out : 0;
	if (cap > nbox)
		cap = nbox;
	size_t total_cap = nb * ncls * cap;
	int64_t *sel = mc_xmalloc((total_cap ? total_cap : 1) * 3 * sizeof *sel);
	size_t *cand = mc_xmalloc((nbox ? nbox : 1) * sizeof *cand);
	size_t *kept = mc_xmalloc((nbox ? nbox : 1) * sizeof *kept);
	size_t ns = 0;
	for (size_t b = 0; b < nb; b++)
		for (size_t cl = 0; cl < ncls; cl++) {
			nms_sort_ctx ctx = {scores, (b * ncls + cl) * nbox};
			size_t nc = 0, nk = 0;
			for (size_t i = 0; i < nbox; i++)
				if (!has_thr || mc_get_f(scores, ctx.base + i) > thr)
					cand[nc++] = i;
			merge_sort(cand, nc, nms_cmp, &ctx);
			for (size_t k = 0; k < nc && nk < cap; k++) {
				double a[4], o[4];
				nms_corners(boxes, (b * nbox + cand[k]) * 4, center != 0, a);
				bool keep = true;
				for (size_t j = 0; j < nk && keep; j++) {
					nms_corners(boxes, (b * nbox + kept[j]) * 4, center != 0, o);
					keep = !nms_suppress(a, o, iou);
				}
				if (!keep)
					continue;
				kept[nk++] = cand[k];
				sel[ns * 3] = (int64_t)b, sel[ns * 3 + 1] = (int64_t)cl;
				sel[ns * 3 + 2] = (int64_t)cand[k];
				ns++;
			}
		}
	mc_shape s = {2, {(int64_t)ns, 3}};
	res[0] = mc_tensor_new(MC_INT64, &s);
	if (res[0])
		memcpy(res[0]->data, sel, ns * 3 * sizeof *sel);
	free(sel);
	free(cand);
	free(kept);
	return res[0] ? 0 : mc_node_error(n, "cannot allocate the result");
}

/* Rows output 0 may take: batches x classes x min(max_output_boxes_per_class, boxes),
 * the boxes alone where that input is known only at run time. */
static int64_t nms_bound(mc_infer_ctx *c)
{
	const mc_shape *bs = &c->in[NMS_BOXES]->shape, *ss = &c->in[NMS_SCORES]->shape;
	const mc_value *mv = c->n_in > NMS_MAX_OUT ? c->in[NMS_MAX_OUT] : NULL;
	int64_t cap = bs->dims[1];
	if (!mv || (mv->konst && mv->konst->numel == 0))
		cap = 0;
	else if (mv->konst && mc_get_i(mv->konst, 0) < cap)
		cap = mc_get_i(mv->konst, 0);
	if (cap < 0)
		cap = 0;
	return bs->dims[0] * ss->dims[1] * cap;
}

static int nms_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	if (MC_NEED_INPUTS(c, NMS_BOXES, NMS_SCORES))
		return -1;
	const mc_shape *bs = &c->in[NMS_BOXES]->shape, *ss = &c->in[NMS_SCORES]->shape;
	int64_t center;
	if (mc_attr_int(n, "center_point_box", 0, &center))
		return -1;
	if (center != 0 && center != 1)
		return mc_node_error(n, "center_point_box must be 0 or 1");
	if (bs->rank != 3 || bs->dims[2] != 4 || ss->rank != 3 || ss->dims[0] != bs->dims[0] ||
	    ss->dims[2] != bs->dims[1])
		return mc_node_error(n, "needs boxes [B, N, 4] and scores [B, classes, N]");
	if (check_float(n, "boxes", c->in[NMS_BOXES]) || check_float(n, "scores", c->in[NMS_SCORES]))
		return -1;
	bool known = true;
	for (int k = 0; k < c->n_in; k++)
		known = known && (!c->in[k] || c->in[k]->konst);
	int count = mc_count_out(c);
	if (!known) { /* padded to the bound; the count says how many rows are boxes */
		if (count < 0)
			return need_constant_inputs(c);
		mc_shape s = {2, {nms_bound(c), 3}};
		mc_set_counted_out(c, 0, MC_INT64, &s, 0, count);
		return 0;
	}
	const mc_tensor *in[5] = {NULL};
	for (int k = 0; k < c->n_in && k < 5; k++)
		in[k] = c->in[k] ? c->in[k]->konst : NULL;
	mc_tensor *res[1] = {NULL};
	if (nms_compute(n, in, c->n_in, res))
		return -1;
	mc_set_out(c, 0, MC_INT64, &res[0]->shape);
	mc_tensor_free(res[0]);
	return 0;
}

/* The selected rows, then zero rows to output 0's (inferred) bound; the
 * count in output 1 where the node has it. */
static int nms_eval(mc_eval_ctx *c)
{
	mc_tensor *res[1] = {NULL};
	if (nms_compute(c->node, c->in, c->n_in, res))
		return -1;
	mc_deliver_count(c, res[0]->shape.dims[0]);
	return mc_deliver_padded(c, 0, res[0], 0);
}

/* ---- registry ---- */

static const mc_op op_einsum = {
	.name = "Einsum", .min_opset = 12, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = EINSUM_MAX_INPUTS, .min_outputs = 1, .max_outputs = 1,
	.parse = einsum_parse, .infer = einsum_infer, .eval = einsum_eval,
	.flags = MC_OP_VARIADIC,
};

static const mc_op op_rms_normalization = {
	.name = "RMSNormalization", .min_opset = 23, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
	.parse = rms_parse, .infer = rms_infer, .eval = rms_eval,
};

static const mc_op op_swish = {
	.name = "Swish", .min_opset = 24, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
	.infer = swish_infer, .eval = swish_eval,
};

static const mc_op op_attention = {
	.name = "Attention", .min_opset = 23, .max_opset = MC_MAX_OPSET,
	.min_inputs = 3, .max_inputs = 7, .min_outputs = 1, .max_outputs = 4,
	.parse = attn_parse, .infer = attn_infer, .eval = attn_eval,
};

static const mc_op op_rotary_embedding = {
	.name = "RotaryEmbedding", .min_opset = 23, .max_opset = MC_MAX_OPSET,
	.min_inputs = 3, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
	.infer = rope_infer, .eval = rope_eval,
};

static const mc_op op_grid_sample = {
	.name = "GridSample", .min_opset = 16, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
	.parse = gs_parse, .infer = gs_infer, .eval = gs_eval,
};

static const mc_op op_roi_align = {
	.name = "RoiAlign", .min_opset = 10, .max_opset = MC_MAX_OPSET,
	.min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
	.parse = roi_parse, .infer = roi_infer, .eval = roi_eval,
};

static const mc_op op_det = {
	.name = "Det", .min_opset = 11, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
	.infer = det_infer, .eval = det_eval,
};

static const mc_op op_center_crop_pad = {
	.name = "CenterCropPad", .min_opset = 18, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
	.infer = ccp_infer, .eval = ccp_eval,
};

static const mc_op op_col2im = {
	.name = "Col2Im", .min_opset = 18, .max_opset = MC_MAX_OPSET,
	.min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
	.infer = col2im_infer, .eval = col2im_eval,
};

static const mc_op op_nonzero = {
	.name = "NonZero", .min_opset = 9, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
	.infer = nonzero_infer, .eval = nonzero_eval, .flags = MC_OP_COUNTED,
};

static const mc_op op_unique = {
	.name = "Unique", .min_opset = 11, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 4,
	.infer = unique_infer, .eval = unique_eval, .flags = MC_OP_COUNTED,
};

static const mc_op op_non_max_suppression = {
	.name = "NonMaxSuppression", .min_opset = 10, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
	.infer = nms_infer, .eval = nms_eval, .flags = MC_OP_COUNTED,
};

const mc_op *const mc_ops_extra[] = {
	&op_einsum,
	&op_rms_normalization,
	&op_swish,
	&op_attention,
	&op_rotary_embedding,
	&op_grid_sample,
	&op_roi_align,
	&op_det,
	&op_center_crop_pad,
	&op_col2im,
	&op_nonzero,
	&op_unique,
	&op_non_max_suppression,
	NULL,
};
