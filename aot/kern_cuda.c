/* Conv on the cuda target (see aot/aot.h: MC_TMPL_CONV2D_SPLITK). A thread
 * per output element reads each weight and input value from memory for
 * one multiply; the target's implicit-GEMM template keeps tiles of both in
 * shared memory and computes a register tile per thread (or tensor-core
 * fragments a warp). Small images with many channels give few output
 * tiles, so the reduction is split into K ranges that run side by side,
 * each writing its partial sums into a scratch buffer; a plain IR loop then
 * adds the splits and the bias and stores through the fused epilogue
 * (mc_lower_store), a thread per output.
 *
 *   kernel: template -> S[splits][N][M][P];  for each output: bias + sum_s S[s]
 *
 * With one split the target folds the second statement into the
 * template's stores (mc_ktemplate.direct: its sums never reach memory). */
#include <string.h>

#include "lower_window.h"
#include "../libcore/ops/nn.h"
#define MODELC_CUDA_SPLITS /* the runtime's rule for them */
#include "../runtime-min/modelc_rt.h"

#define TILE_M 64          /* the template's output tile: 64 channels x 64 pixels */
#define TILE_P 64
#define TILE_K 32          /* splits are whole steps of the FFMA form (2 of 16); on tensor cores, of isa->mma_k */
/* the splits (K ranges side by side where the tiles alone leave the GPU
 * idle): modelc_cuda_splits of the runtime, which the generator asks for
 * MODELC_CUDA_PLAN_SMS (the slices of partial sums it makes room for) and
 * NAME_cuda_init again for the device's multiprocessors. On an H200, on
 * tensor cores: two waves of blocks made resnet18 fp16 0.89x the time of
 * four, the others within 1%; 32 k a split at least, against 64:
 * mobilenet_v2 0.90x, mobilenet_v3_small 0.89x, squeezenet 0.98x, resnet18
 * 1.04x the time (256 was 1.5-1.9x slower). */
#define MIN_PIXELS 32
#define MIN_ROWS 16        /* a product's rows (A's) the tensor-core template takes */

static int64_t ceil_div(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

/* v rounded to TF32 (10 mantissa bits) to nearest, ties away from zero:
 * what the template's cvt.rna.tf32.f32 gives on the device. */
static float round_tf32(float v)
{
	uint32_t u;
	memcpy(&u, &v, sizeof u);
	if ((u & 0x7f800000u) != 0x7f800000u) /* not inf or NaN */
		u = (u + 0x1000u) & ~0x1fffu;
	memcpy(&v, &u, sizeof v);
	return v;
}

/* wt[k][m] = w[m][k]: the FFMA template reads a row of channels per k; the
 * tensor-core one rows of k (wt[m][k], the weight's own order). With tf32,
 * each rounded to TF32 here, once, instead of on every load. A
 * channels-last convolution's k run over the taps, then the CIN channels
 * (cin > 0: w's k = ci * taps + tap goes to tap * cin + ci), the order of
 * its input's elements. */
static mc_tensor *packed_weights(const mc_tensor *w, int64_t m, int64_t k, bool transpose, bool tf32, int64_t cin)
{
	mc_shape s = { .rank = 2, .dims = { transpose ? k : m, transpose ? m : k } };
	mc_tensor *t = mc_tensor_new(MC_FLOAT, &s);
	if (!t)
		return NULL;
	const float *src = w->data;
	float *dst = t->data;
	int64_t taps = cin > 0 ? k / cin : 1;
	for (int64_t i = 0; i < m; i++)
		for (int64_t j = 0; j < k; j++) {
			int64_t kk = cin > 0 ? j % taps * cin + j / taps : j;
			dst[transpose ? kk * m + i : i * k + kk] = tf32 ? round_tf32(src[i * k + j]) : src[i * k + j];
		}
	return t;
}

/* t's K splits (splits, k_split), its form (mma, k_step) for an output
 * of n x m x pix (outn elements) over a reduction of k, planned for
 * MODELC_CUDA_PLAN_SMS: the most a device may run it in. 1: too large for
 * the template's 32-bit indexes. */
static int plan_splits(mc_lower_ctx *c, mc_ktemplate *t, int64_t m, int64_t pix, int64_t k, int64_t outn)
{
	t->tiles = ceil_div(m, TILE_M) * ceil_div(pix, TILE_P) * t->n; /* what init asks again with */
	bool mma = c->kb->isa && c->kb->isa->mma;
	int step = mma ? c->kb->isa->mma_k : TILE_K;
	t->splits = modelc_cuda_splits(t->tiles, k, step, mma, MODELC_CUDA_PLAN_SMS, INT32_MAX, &t->k_split);
	t->mma = mma;
	t->k_step = step;
	return t->splits * outn >= INT32_MAX;
}

/* The template's result, t->out (one split: transient, straight to this
 * nest; else the splits' partial sums), made into the output and stored
 * through the fused epilogue: a convolution's bias (input BIAS_IN along
 * the channels; -1: none) plus the splits' sums; or a product's ALPHA
 * times those sums plus BETA times input C_IN broadcast to the output
 * (-1: none). */
static void sum_splits(mc_lower_ctx *c, const mc_ktemplate *t, int bias_in, int c_in, double alpha, double beta)
{
	mc_kb *kb = c->kb;
	const mc_shape *os = &c->out[0]->shape;
	int64_t outn = (int64_t)mc_numel(os);
	mc_kexpr *coords[MC_MAX_RANK];
	mc_lower_loops(kb, os, coords, MC_KF_PARALLEL);
	mc_kexpr *lin = mc_kb_let(kb, mc_lower_linear(kb, os, coords));
	mc_kexpr *acc = mc_kb_local(kb, bias_in >= 0 ? mc_lower_load(c, bias_in, coords[t->nhwc ? os->rank - 1 : 1])
	                                             : mc_k_float(kb, MC_KT_F32, 0));
	/* the device runs the template in splits(out) of the planned slices
	 * (init's plan for its multiprocessors): the first always, the others
	 * where they were written, each load independent of the last */
	mc_kexpr *run = t->splits > 1 ? mc_kb_let(kb, mc_k_splits(kb, t->out)) : NULL;
	for (int64_t s = 0; s < t->splits; s++) {
		mc_kexpr *part = mc_k_load(kb, t->out, mc_k_addi(kb, lin, s * outn));
		if (s > 0)
			part = mc_k_select(kb, mc_k_bin(kb, MC_KB_LT, mc_k_index(kb, s), run), part, mc_k_float(kb, MC_KT_F32, 0));
		mc_kb_assign(kb, acc, mc_k_add(kb, acc, part));
	}
	mc_kexpr *v = acc;
	if (alpha != 1)
		v = mc_k_mul(kb, mc_k_float(kb, MC_KT_F32, alpha), v);
	if (c_in >= 0 && beta != 0) {
		mc_kexpr *b = mc_lower_load(c, c_in, mc_lower_bcast(kb, &c->in[c_in]->shape, os, coords));
		v = mc_k_add(kb, v, beta == 1 ? b : mc_k_mul(kb, mc_k_float(kb, MC_KT_F32, beta), b));
	}
	mc_lower_store(c, 0, coords, lin, v);
	mc_kb_end_n(kb, os->rank);
}

/* A 2-D convolution of group 1 and a constant float weight, float32 data
 * of rank 4: what the template takes. */
static bool conv_fits(const mc_lower_ctx *c)
{
	const nn_params *p = c->node->params;
	const mc_tensor *w = mc_lower_const(c, 1);
	return c->out[0] && p->group == 1 && c->in[0]->shape.rank == 4 && mc_is_f32(c->out[0]) &&
	       mc_is_f32(c->in[0]) && mc_is_f32(c->in[1]) && w && w->dtype == MC_FLOAT;
}

/* The template over convolution c of window g (nhwc: an NhwcConv). */
static int conv_template(mc_lower_ctx *c, const win_geom *gp, bool nhwc)
{
	const win_geom g = *gp;
	const mc_tensor *w = mc_lower_const(c, 1);
	const mc_shape *xs = &c->in[0]->shape, *os = &c->out[0]->shape, *ws = &c->in[1]->shape;
	mc_ktemplate t = {
		.kind = MC_TMPL_CONV2D_SPLITK, .nhwc = nhwc,
		.n = xs->dims[0], .cin = ws->dims[1], .h = g.in[0], .w = g.in[1],
		.cout = ws->dims[0], .kh = g.k[0], .kw = g.k[1], .oh = g.out[0], .ow = g.out[1],
		.sh = g.s[0], .sw = g.s[1], .ph = g.pb[0], .pw = g.pb[1], .dh = g.d[0], .dw = g.d[1],
	};
	int64_t m = t.cout, k = t.cin * t.kh * t.kw, pix = t.oh * t.ow;
	int64_t outn = (int64_t)mc_numel(os);
	/* a tile of 64 pixels over a smaller image is mostly waste: there a
	 * thread (or warp) per output does better */
	if (pix < MIN_PIXELS)
		return 1;
	if (m == 0 || k == 0 || pix == 0 || t.n == 0 || outn >= INT32_MAX / 4 ||
	    (int64_t)mc_numel(xs) >= INT32_MAX || m * k >= INT32_MAX)
		return 1;
	if (plan_splits(c, &t, m, pix, k, outn))
		return 1;
	mc_kb *kb = c->kb;
	/* TF32 operands (fp32 storage on tensor cores; fp16 halves them later) */
	t.wt_tf32 = t.mma && c->kb->isa->mma_tf32;
	mc_tensor *wt = packed_weights(w, m, k, !t.mma, t.wt_tf32, nhwc ? t.cin : 0);
	if (!wt)
		return 1;
	t.x = c->in_buf[0];
	t.wt = mc_kb_packed(kb, wt);
	/* one split: its sums go straight to the bias and epilogue below */
	t.direct = t.splits == 1;
	t.out = t.direct ? mc_kb_transient(kb, MC_FLOAT, (size_t)outn)
	                 : mc_kb_scratch(kb, MC_FLOAT, (size_t)(t.splits * outn));
	mc_kb_template(kb, &t);

	/* out = bias + the splits' sums, through the epilogue */
	sum_splits(c, &t, c->n_in > 2 && c->in[2] ? 2 : -1, -1, 1, 1);
	return 0;
}

int mc_kern_conv_cuda(mc_lower_ctx *c)
{
	if (!conv_fits(c))
		return 1;
	const nn_params *p = c->node->params;
	win_geom g;
	if (mc_win_setup(c->node, p, &c->in[0]->shape, c->in[1]->shape.dims + 2, &g) ||
	    mc_win_forward(c->node, p, &g))
		return -1;
	return conv_template(c, &g, false);
}

/* channels-last on tensor cores alone: the FFMA template reads channels
 * first */
int mc_kern_conv_nhwc_cuda(mc_lower_ctx *c, const win_geom *g)
{
	if (!c->kb->target->conv_template || !c->kb->isa || !c->kb->isa->mma || !conv_fits(c))
		return 1;
	return conv_template(c, g, true);
}

/* MatMul and Gemm on tensor cores: batched (each operand's batch its own
 * or broadcast), either operand transposed. A constant 2-D B is packed
 * k-contiguous ([P][K], rounded to TF32 once where the operands are TF32)
 * and every row of A, whatever its rank, is a row of one product. */
int mc_kern_gemm_cuda(mc_lower_ctx *c)
{
	if (!c->kb->isa || !c->kb->isa->mma || !c->out[0] || !mc_is_f32(c->out[0]) || !mc_is_f32(c->in[0]) ||
	    !mc_is_f32(c->in[1]))
		return 1;
	const mc_shape *as = &c->in[0]->shape, *bs = &c->in[1]->shape, *os = &c->out[0]->shape;
	bool gemm = c->node->id == MC_OP_Gemm;
	const nn_params *p = gemm ? c->node->params : NULL;
	bool ta = gemm && p->trans_a, tb = gemm && p->trans_b;
	if (as->rank < 2 || bs->rank < 2 || os->rank < 2)
		return 1;
	int64_t m = as->dims[as->rank - (ta ? 1 : 2)], k = as->dims[as->rank - (ta ? 2 : 1)];
	int64_t n = bs->dims[bs->rank - (tb ? 2 : 1)];
	if (bs->dims[bs->rank - (tb ? 1 : 2)] != k || os->dims[os->rank - 1] != n)
		return 1;
	int64_t outn = (int64_t)mc_numel(os);
	if (k == 0 || outn == 0 || (int64_t)mc_numel(as) >= INT32_MAX || (int64_t)mc_numel(bs) >= INT32_MAX ||
	    outn >= INT32_MAX / 4)
		return 1;
	const mc_tensor *bc = mc_lower_const(c, 1);
	bool pack = bc && bc->dtype == MC_FLOAT && bs->rank == 2 && !ta;
	mc_ktemplate t = { .kind = MC_TMPL_GEMM, .cin = k, .kh = 1, .kw = 1, .h = 1, .oh = 1, .ow = n,
	                   .sh = 1, .sw = 1, .dh = 1, .dw = 1 };
	if (pack) { /* one product: A's rows, B packed */
		t.n = 1;
		m = (int64_t)mc_numel(as) / k;
		int64_t a_st[3] = { 0, k, 1 }, b_st[3] = { 0, 1, k };
		memcpy(t.a_st, a_st, sizeof a_st);
		memcpy(t.b_st, b_st, sizeof b_st);
	} else {
		int64_t a_step = mc_matmul_batch_step(as, os), b_step = mc_matmul_batch_step(bs, os);
		if (a_step < 0 || b_step < 0)
			return 1;
		t.n = outn / (m * n);
		int64_t a_st[3] = { a_step, ta ? 1 : k, ta ? m : 1 }, b_st[3] = { b_step, tb ? 1 : n, tb ? k : 1 };
		memcpy(t.a_st, a_st, sizeof a_st);
		memcpy(t.b_st, b_st, sizeof b_st);
	}
	t.cout = m;
	t.w = n;
	/* a 64-row tile over fewer rows is mostly waste (the classifier heads'
	 * one row): there a warp per output element runs it */
	if (m < MIN_ROWS || plan_splits(c, &t, m, n, k, outn))
		return 1;
	mc_kb *kb = c->kb;
	t.wt = c->in_buf[0];
	if (pack) {
		t.x_tf32 = c->kb->isa->mma_tf32;
		mc_tensor *bt = packed_weights(bc, tb ? n : k, tb ? k : n, !tb, t.x_tf32, 0);
		if (!bt)
			return 1;
		t.x = mc_kb_packed(kb, bt);
	} else {
		t.x = c->in_buf[1];
	}
	t.direct = t.splits == 1;
	t.out = t.direct ? mc_kb_transient(kb, MC_FLOAT, (size_t)outn)
	                 : mc_kb_scratch(kb, MC_FLOAT, (size_t)(t.splits * outn));
	mc_kb_template(kb, &t);
	int c_in = gemm && c->n_in > 2 && c->in[2] ? 2 : -1;
	sum_splits(c, &t, -1, c_in, gemm ? p->alpha : 1, gemm ? p->beta : 1);
	return 0;
}

/* Attention on the cuda target (MC_TMPL_ATTENTION): a few warps per query
 * row, a few rows a block (the emitter's choice, by the keys' count),
 * a row's warps taking its keys in chunks of 32 (a lane's key each: its
 * score; then the chunk's weights times V, a lane's columns each),
 * softmax online (the running maximum and sum rescale what came before),
 * the warps' parts combined at the end. The template's sums go straight
 * to the nest over Y after it (the epilogue). Head sizes up to
 * MC_ATTN_MAX_HEAD (mc_attention_one_kernel, which chose this). */

/* Where operand i's element 0 lies in its buffer, and its rows' stride:
 * a part of a Split along the last axis read in place (c->gather) starts
 * at the part's first column of the Split's input, whose rows are wider;
 * else at 0, its rows as wide as its own. */
static int64_t attention_operand(const mc_lower_ctx *c, int i, int64_t *row_width)
{
	const mc_shape *s = &c->in[i]->shape;
	*row_width = s->dims[s->rank - 1];
	if (!c->gather || c->gather[i] < 0)
		return 0;
	const mc_node *split = &c->g->nodes[c->gather[i]];
	const mc_shape *packed = &c->g->values[split->inputs[0]].shape;
	int64_t at = 0;
	for (int k = 0; k < split->n_outputs && split->outputs[k] != c->node->inputs[i]; k++)
		at += c->g->values[split->outputs[k]].shape.dims[s->rank - 1]; /* every part present (fuse.c) */
	*row_width = packed->dims[packed->rank - 1];
	return at;
}

int mc_kern_attention_cuda(mc_lower_ctx *c, const mc_attn_sizes *a)
{
	const mc_value *mask = a->mask_in >= 0 ? c->in[a->mask_in] : NULL;
	const mc_shape *os = &c->out[0]->shape;
	int64_t outn = (int64_t)mc_numel(os);
	mc_ktemplate t = { .kind = MC_TMPL_ATTENTION, .n = a->b, .hq = a->hq, .hkv = a->hkv, .sq = a->sq,
	                   .skv = a->skv, .hd = a->d, .hdv = a->dv, .scale = a->scale, .splits = 1, .k_split = 1,
	                   .mask = -1 };
	/* strides over [n, head, row, column]: 3-D operands are [n][row][heads * width],
	 * rows as wide as the buffer's (a packed projection's, read in place) */
	int64_t rows[4] = { a->sq, a->skv, a->skv, a->sq }, heads[4] = { a->hq, a->hkv, a->hkv, a->hq };
	int64_t width[4] = { a->d, a->d, a->dv, a->dv };
	int64_t *st[4] = { t.q_st, t.k_st, t.v_st, t.y_st }, *at[3] = { &t.q_at, &t.k_at, &t.v_at };
	for (int o = 0; o < 4; o++) {
		int64_t r = rows[o], h = heads[o], w = width[o], row = h * w;
		if (o < 3)
			*at[o] = attention_operand(c, o, &row);
		int64_t s3[4] = { r * row, w, row, 1 }, s4[4] = { h * r * w, r * w, w, 1 };
		memcpy(st[o], a->is_3d ? s3 : s4, sizeof s3);
	}
	if (mask) {
		mc_shape target = { .rank = 4, .dims = { a->b, a->hq, a->sq, a->skv } };
		int64_t ms[MC_MAX_RANK] = { 0 };
		mc_broadcast_strides(&mask->shape, &target, ms);
		memcpy(t.m_st, ms, sizeof t.m_st);
	}
	mc_kb *kb = c->kb;
	t.x = c->in_buf[0];
	t.wt = c->in_buf[1];
	t.v = c->in_buf[2];
	t.mask = mask ? c->in_buf[a->mask_in] : -1;
	t.direct = true;
	t.out = mc_kb_transient(kb, MC_FLOAT, (size_t)outn);
	mc_kb_template(kb, &t);
	/* Y through the epilogue, reading the template's sums */
	mc_kexpr *coords[MC_MAX_RANK];
	mc_lower_loops(kb, os, coords, MC_KF_PARALLEL);
	mc_kexpr *lin = mc_kb_let(kb, mc_lower_linear(kb, os, coords));
	mc_lower_store(c, 0, coords, lin, mc_k_load(kb, t.out, lin));
	mc_kb_end_n(kb, os->rank);
	return 0;
}
