/* Lowerings of the misc family (see aot/aot.h: mc_lowering): the recurrent
 * layers (RNN, GRU, LSTM), signal processing (DFT, STFT, windows, CumProd)
 * and the ops beyond the core families (Attention, GridSample, RoiAlign,
 * RotaryEmbedding, CenterCropPad, Det). Each follows its registry entry's
 * reference eval (libcore/ops/rnn.c, signal.c, extra.c) step by step, in the
 * compute type of its input (f32 accumulates in f32, like ONNX Runtime).
 *
 * None of them sets MC_LOWER_EPILOGUE: they write outputs over several
 * passes (time steps, zero fill then values), storing with mc_kb_store. */
#include <math.h>
#include <string.h>

#include "kern.h"
#include "kmath.h"
#include "lower.h"
#include "../libcore/ops/rnn.h"
#include "../libcore/ops/signal.h"
#include "../libcore/ops/extra_misc.h"

/* ==== shared helpers ==== */

/* The scratch dtype that holds values of compute type kt. */
static mc_dtype scratch_dtype(mc_ktype kt)
{
	return kt == MC_KT_F64 ? MC_DOUBLE : MC_FLOAT;
}

static mc_kexpr *fconst(mc_kb *kb, mc_ktype kt, double v)
{
	return mc_k_float(kb, kt, v);
}

/* A mutable local holding init, then acc += a[a0 + k] * b[b0 + k] for k <
 * width: the dot product of two contiguous rows. Returns the local. */
static mc_kexpr *dot_into(mc_kb *kb, mc_kexpr *acc, int abuf, mc_kexpr *a0, int bbuf,
                          mc_kexpr *b0, int64_t width)
{
	mc_kexpr *k = mc_kb_fori(kb, width, MC_KF_REDUCE);
	mc_kexpr *x = mc_k_load(kb, abuf, mc_k_add(kb, a0, k));
	/* rows of two dtypes (inference lets Q and a past K differ): the
	 * product in a's type */
	mc_kexpr *y = mc_k_cast(kb, x->type, mc_k_load(kb, bbuf, mc_k_add(kb, b0, k)));
	mc_kexpr *prod = mc_k_mul(kb, x, y);
	mc_kb_assign(kb, acc, mc_k_add(kb, acc, mc_k_cast(kb, acc->type, prod)));
	mc_kb_end(kb);
	return acc;
}

/* a * n + b: one step of a row-major offset. */
static mc_kexpr *mad(mc_kb *kb, mc_kexpr *a, int64_t n, mc_kexpr *b)
{
	return mc_k_add(kb, mc_k_muli(kb, a, n), b);
}

/* Input i, or NULL when omitted (trailing ones included). */
static const mc_value *opt_in(const mc_lower_ctx *c, int i)
{
	return i < c->n_in ? c->in[i] : NULL;
}

/* Output k, or NULL when omitted. */
static const mc_value *opt_out(const mc_lower_ctx *c, int k)
{
	return k < c->n_out ? c->out[k] : NULL;
}

/* Fills n elements of buffer buf from offset `at` with the value v. */
static void fill(mc_kb *kb, int buf, mc_kexpr *at, int64_t n, mc_kexpr *v)
{
	mc_kexpr *i = mc_kb_fori(kb, n, MC_KF_VECTOR);
	mc_kb_store(kb, buf, mc_k_add(kb, at, i), v);
	mc_kb_end(kb);
}

/* ==== RNN, GRU, LSTM ==== */

enum { RI_X, RI_W, RI_R, RI_B, RI_LENS, RI_H0, RI_C0, RI_P };
enum { RO_Y, RO_Y_H, RO_Y_C };

/* x bounded to [-clip, clip] where the op clips, as rnn.c's activate. */
static mc_kexpr *rnn_clip(mc_kb *kb, const rnn_params *p, mc_ktype kt, mc_kexpr *x)
{
	if (!p->has_clip)
		return x;
	x = mc_k_bin(kb, MC_KB_MAX, x, fconst(kb, kt, -p->clip));
	return mc_k_bin(kb, MC_KB_MIN, x, fconst(kb, kt, p->clip));
}

/* One activation function of the recurrent ops (rnn.c: act_eval). */
static mc_kexpr *rnn_act_expr(mc_kb *kb, const rnn_act *a, mc_ktype kt, mc_kexpr *x)
{
	x = mc_kb_let(kb, x);
	mc_kexpr *zero = fconst(kb, kt, 0), *one = fconst(kb, kt, 1);
	mc_kexpr *alpha = fconst(kb, kt, a->alpha), *beta = fconst(kb, kt, a->beta);
	switch (a->fn) {
	case ACT_SIGMOID:
		return mc_k_sigmoid(kb, x);
	case ACT_TANH:
		return mc_k_un(kb, MC_KU_TANH, x);
	case ACT_RELU:
		return mc_k_select(kb, mc_k_bin(kb, MC_KB_GT, x, zero), x, zero);
	case ACT_LEAKY_RELU:
		return mc_k_select(kb, mc_k_bin(kb, MC_KB_GE, x, zero), x, mc_k_mul(kb, alpha, x));
	case ACT_THRESHOLDED_RELU:
		return mc_k_select(kb, mc_k_bin(kb, MC_KB_GT, x, alpha), x, zero);
	case ACT_SCALED_TANH:
		return mc_k_mul(kb, alpha, mc_k_un(kb, MC_KU_TANH, mc_k_mul(kb, beta, x)));
	case ACT_HARD_SIGMOID: {
		mc_kexpr *v = mc_k_add(kb, mc_k_mul(kb, alpha, x), beta);
		return mc_k_bin(kb, MC_KB_MAX, mc_k_bin(kb, MC_KB_MIN, v, one), zero);
	}
	case ACT_ELU:
		return mc_k_select(kb, mc_k_bin(kb, MC_KB_GE, x, zero), x,
		                   mc_k_mul(kb, alpha,
		                            mc_k_sub(kb, mc_k_un(kb, MC_KU_EXP, x), one)));
	case ACT_SOFTSIGN:
		return mc_k_div(kb, x, mc_k_add(kb, one, mc_k_un(kb, MC_KU_ABS, x)));
	case ACT_SOFTPLUS: {
		/* log(1 + e^x) without overflow for large x */
		mc_kexpr *big = mc_k_add(kb, x, mc_k_un(kb, MC_KU_LOG, mc_k_add(kb, one,
		                         mc_k_un(kb, MC_KU_EXP, mc_k_un(kb, MC_KU_NEG, x)))));
		mc_kexpr *small =
		        mc_k_un(kb, MC_KU_LOG, mc_k_add(kb, one, mc_k_un(kb, MC_KU_EXP, x)));
		return mc_k_select(kb, mc_k_bin(kb, MC_KB_GT, x, zero), big, small);
	}
	case ACT_AFFINE:
		return mc_k_add(kb, mc_k_mul(kb, alpha, x), beta);
	case ACT_COUNT:
		break;
	}
	return x;
}

/* Everything a time step needs: sizes, buffers and the current offsets. */
typedef struct {
	mc_lower_ctx *c;
	const rnn_params *p;
	mc_ktype kt;
	int64_t seq, batch, input, hidden, dirs, rows;
	int h, cs, pre, tmp;        /* scratch: H, C, gate pre-activations, GRU r.H */
	int dir;                    /* direction being built */
	mc_kexpr *x_at;             /* offset of x_t (a row of `input` values) */
	mc_kexpr *y_at;             /* offset of the step's row of Y; NULL: no Y */
	/* Where W and R are constants (f32, a CPU target): each step's gate
	 * pre-activations as row-vector products through the register-tiled
	 * micro-kernel (aot/kern.h), W and R packed at generation time:
	 * xp = x_t W^T + biases, hp = h R^T (+ the GRU's Rbh where
	 * linear_before_reset keeps it apart); the GRU without it multiplies
	 * r.h by R's h rows apart (hh). Else rnn_row's dot products. */
	bool fast;
	/* The GRU's or LSTM's step as the GRU_GATES or LSTM_GATES template
	 * (the C target on --isa cortex-m; kir.h): xw's and hr's rows
	 * interleaved, each unit's gates side by side; the micro-kernel's
	 * constants in `consts`. */
	bool gates;
	int consts;
	struct rnn_proj {
		kt_cols cols;
		int b[2], bias[2];      /* packed B and bias per direction; bias -1: none */
		int out;                /* the product's scratch */
	} xw, hr, hh;
} rnn_low;

/* Activation `which` of the current direction on a clipped input. */
static mc_kexpr *rnn_activate(rnn_low *r, int which, mc_kexpr *v)
{
	mc_kb *kb = r->c->kb;
	return rnn_act_expr(kb, &r->p->act[r->dir][which], r->kt, rnn_clip(kb, r->p, r->kt, v));
}

/* x_t . W[row] + Wb[row] (+ h . R[row] + Rb[row] when with_recur) for gate
 * row `row` of the current direction, accumulated in a fresh local. */
static mc_kexpr *rnn_row(rnn_low *r, mc_kexpr *row, bool with_recur, int hbuf)
{
	mc_lower_ctx *c = r->c;
	mc_kb *kb = c->kb;
	mc_kexpr *drow = mc_k_add(kb, mc_k_index(kb, (int64_t)r->dir * r->rows), row);
	mc_kexpr *init = fconst(kb, r->kt, 0);
	if (opt_in(c, RI_B)) {
		mc_kexpr *bo = mc_k_add(kb, mc_k_index(kb, (int64_t)r->dir * 2 * r->rows), row);
		init = mc_k_load(kb, c->in_buf[RI_B], bo);
		if (with_recur)
			init = mc_k_add(kb, init,
			                mc_k_load(kb, c->in_buf[RI_B], mc_k_addi(kb, bo, r->rows)));
	}
	mc_kexpr *acc = mc_kb_local(kb, mc_k_cast(kb, r->kt, init));
	dot_into(kb, acc, c->in_buf[RI_X], r->x_at, c->in_buf[RI_W], mc_k_muli(kb, drow, r->input),
	         r->input);
	if (with_recur)
		dot_into(kb, acc, hbuf, mc_k_index(kb, 0), c->in_buf[RI_R],
		         mc_k_muli(kb, drow, r->hidden), r->hidden);
	return acc;
}

/* h . R[row] + Rb[row] alone (GRU with linear_before_reset). */
static mc_kexpr *rnn_recur_row(rnn_low *r, mc_kexpr *row)
{
	mc_lower_ctx *c = r->c;
	mc_kb *kb = c->kb;
	mc_kexpr *drow = mc_k_add(kb, mc_k_index(kb, (int64_t)r->dir * r->rows), row);
	mc_kexpr *init = fconst(kb, r->kt, 0);
	if (opt_in(c, RI_B))
		init = mc_k_load(kb, c->in_buf[RI_B],
		                 mc_k_add(kb,
		                          mc_k_index(kb, (int64_t)r->dir * 2 * r->rows + r->rows),
		                          row));
	mc_kexpr *acc = mc_kb_local(kb, mc_k_cast(kb, r->kt, init));
	return dot_into(kb, acc, r->h, mc_k_index(kb, 0), c->in_buf[RI_R],
	                mc_k_muli(kb, drow, r->hidden), r->hidden);
}

/* ---- the fast path's products ---- */

/* Columns [col0, col0 + n) of W or R (dirs x rows x k) transposed, and
 * their bias (Wb and/or Rb of B, dirs x 2 rows). */
typedef struct {
	const mc_tensor *m, *b;
	int64_t dir, rows, k, col0;
	bool wb;                   /* the bias holds Wb */
	int64_t rb_lo, rb_hi;      /* and Rb for the columns (of all rows) in [lo, hi) */
	int64_t hidden, gates;     /* gates > 0: column j is gate j % gates's row of unit j / gates */
} rnn_src;

/* W's or R's row (within the direction) behind column j */
static int64_t rnn_src_row(const rnn_src *s, int64_t j)
{
	return s->gates > 0 ? (j % s->gates) * s->hidden + j / s->gates : s->col0 + j;
}

static double rnn_src_at(const void *ctx, int64_t kk, int64_t j)
{
	const rnn_src *s = ctx;
	return mc_get_f(s->m, (size_t)(((s->dir * s->rows) + rnn_src_row(s, j)) * s->k + kk));
}

static double rnn_bias_at(const void *ctx, int64_t kk, int64_t j)
{
	(void)kk;
	const rnn_src *s = ctx;
	int64_t col = rnn_src_row(s, j), at = s->dir * 2 * s->rows + col;
	double v = 0;
	if (s->wb)
		v += mc_get_f(s->b, (size_t)at);
	if (col >= s->rb_lo && col < s->rb_hi)
		v += mc_get_f(s->b, (size_t)(at + s->rows));
	return v;
}

/* Plans and packs one product per direction: columns [col0, col0 + n) of
 * input `in` (W or R), k long; its scratch. -1 on OOM. */
static int rnn_proj_make(rnn_low *r, struct rnn_proj *pr, int in, int64_t k, int64_t col0,
                         int64_t n, bool wb, int64_t rb_lo, int64_t rb_hi)
{
	mc_kb *kb = r->c->kb;
	const mc_tensor *bias = opt_in(r->c, RI_B) ? mc_lower_const(r->c, RI_B) : NULL;
	bool biased = bias && (wb || rb_lo < rb_hi);
	kt_plan_gemv(kb, n, k, &pr->cols);
	for (int d = 0; d < r->dirs; d++) {
		rnn_src src = { mc_lower_const(r->c, in), bias, d, r->rows, k, col0, wb, rb_lo, rb_hi,
		                r->hidden, r->gates ? r->rows / r->hidden : 0 };
		pr->b[d] = kt_pack(kb, &pr->cols, rnn_src_at, &src);
		pr->bias[d] = biased ? kt_pack_bias(kb, &pr->cols, rnn_bias_at, &src) : -1;
		if (pr->b[d] < 0 || (biased && pr->bias[d] < 0))
			return -1;
	}
	pr->out = mc_kb_scratch(kb, MC_FLOAT, (size_t)kt_packed_cols(&pr->cols));
	return 0;
}

/* Whether the step goes through GRU_GATES or LSTM_GATES: the C target's
 * Cortex-M micro-kernels; a GRU with linear_before_reset or an LSTM
 * without peepholes or coupled gates; the default activations, no clip
 * (kir.h). */
static bool rnn_gates_apply(const rnn_low *r)
{
	const rnn_params *p = r->p;
	const mc_kb *kb = r->c->kb;
	bool gru = p->kind == KIND_GRU && p->linear_before_reset;
	bool lstm = p->kind == KIND_LSTM && !opt_in(r->c, RI_P) && !p->input_forget;
	if ((!gru && !lstm) || p->has_clip || !kb->target->mcu_templates || kb->isa->kind != MC_ISA_CORTEX_M ||
	    r->kt != MC_KT_F32)
		return false;
	for (int d = 0; d < r->dirs; d++)
		if (p->act[d][0].fn != ACT_SIGMOID || p->act[d][1].fn != ACT_TANH ||
		    (lstm && p->act[d][2].fn != ACT_TANH))
			return false;
	return true;
}

static int rnn_fast_setup(rnn_low *r)
{
	mc_lower_ctx *c = r->c;
	const rnn_params *p = r->p;
	bool biased = opt_in(c, RI_B) != NULL;
	if (r->kt != MC_KT_F32 || c->kb->target->grid || !mc_lower_const(c, RI_W) ||
	    !mc_lower_const(c, RI_R) || (biased && !mc_lower_const(c, RI_B)))
		return 0;
	int64_t hs = r->hidden, rows = r->rows;
	bool gru = p->kind == KIND_GRU;
	/* Rb joins Wb in xp, but for the GRU's h rows under linear_before_reset:
	 * those go with hp, inside r's product */
	int64_t rb_joined = gru && p->linear_before_reset ? 2 * hs : rows;
	r->gates = rnn_gates_apply(r);
	if (r->gates) {
		mc_tensor *t = mc_tensor_new(MC_FLOAT, &(mc_shape){ .rank = 1, .dims = { MC_KMATH_GATE_CONSTS } });
		if (!t)
			return -1;
		mc_kmath_gate_consts(t->data);
		if ((r->consts = mc_kb_packed(c->kb, t)) < 0)
			return -1;
	}
	if (rnn_proj_make(r, &r->xw, RI_W, r->input, 0, rows, true, 0, rb_joined) < 0)
		return -1;
	if (gru && !p->linear_before_reset) {
		if (rnn_proj_make(r, &r->hr, RI_R, hs, 0, 2 * hs, false, 0, 0) < 0 ||
		    rnn_proj_make(r, &r->hh, RI_R, hs, 2 * hs, hs, false, 0, 0) < 0)
			return -1;
	} else if (rnn_proj_make(r, &r->hr, RI_R, hs, 0, rows, false, rb_joined, rows) < 0) {
		return -1;
	}
	r->fast = true;
	return 0;
}

/* xp and hp of the step (the GRU's hh comes later: it needs r). */
static void rnn_fast_products(rnn_low *r)
{
	mc_lower_ctx *c = r->c;
	int d = r->dir;
	kt_gemv(c->kb, &r->xw.cols, c->in_buf[RI_X], r->x_at, r->xw.b[d], r->xw.bias[d], r->xw.out);
	kt_gemv(c->kb, &r->hr.cols, r->h, mc_k_index(c->kb, 0), r->hr.b[d], r->hr.bias[d], r->hr.out);
}

/* body(r, j, lanes) for j in [0, n): on the fast path whole vectors of
 * the ISA's widest lanes that fit, the rest one by one; else one by one
 * (the dot products of rnn_row are scalar). */
typedef void (*rnn_body_fn)(rnn_low *r, mc_kexpr *j, int lanes);

static void rnn_vec_loop(rnn_low *r, int64_t n, rnn_body_fn body)
{
	mc_kb *kb = r->c->kb;
	int lanes = r->fast ? mc_isa_lanes_upto(kb->isa, n) : 1;
	for (int part = 0; part < mc_lower_vec_parts(n, lanes); part++) {
		body(r, mc_lower_vec_part_open(kb, part, n, lanes, 0), part ? 1 : lanes);
		mc_kb_end(kb);
	}
}

static mc_kexpr *ld(rnn_low *r, int buf, mc_kexpr *at, int lanes)
{
	return mc_k_vload(r->c->kb, buf, at, lanes);
}

/* The pre-activation of gate row `row` (lanes of them): x_t . W[row] +
 * Wb[row], plus h . R[row] + Rb[row] when with_recur. */
static mc_kexpr *rnn_pre(rnn_low *r, mc_kexpr *row, bool with_recur, int lanes)
{
	mc_kb *kb = r->c->kb;
	if (!r->fast)
		return rnn_row(r, row, with_recur, r->h);
	mc_kexpr *v = ld(r, r->xw.out, row, lanes);
	return with_recur ? mc_k_add(kb, v, ld(r, r->hr.out, row, lanes)) : v;
}

static void rnn_pre_body(rnn_low *r, mc_kexpr *j, int lanes)
{
	mc_kb_store(r->c->kb, r->pre, j, rnn_pre(r, j, true, lanes));
}

/* The step's new h at units j..: into H, and into Y's row where it is
 * wanted (the loop that makes h stores it: no pass of its own). */
static void rnn_store_h(rnn_low *r, mc_kexpr *j, mc_kexpr *v)
{
	mc_kb *kb = r->c->kb;
	v = mc_kb_let(kb, v);
	mc_kb_store(kb, r->h, j, v);
	if (r->y_at)
		mc_kb_store(kb, r->c->out_buf[RO_Y], mc_k_add(kb, r->y_at, j), v);
}

static void rnn_h_body(rnn_low *r, mc_kexpr *j, int lanes)
{
	rnn_store_h(r, j, rnn_activate(r, 0, ld(r, r->pre, j, lanes)));
}

/* Ht = f(Xt W^T + Ht-1 R^T + Wb + Rb) */
static void rnn_step_ir(rnn_low *r)
{
	rnn_vec_loop(r, r->hidden, rnn_pre_body);
	rnn_vec_loop(r, r->hidden, rnn_h_body);
}

/* GRU: z and r, activated, into pre's first 2 hs rows. */
static void gru_zr_body(rnn_low *r, mc_kexpr *row, int lanes)
{
	mc_kb_store(r->c->kb, r->pre, row, rnn_activate(r, 0, rnn_pre(r, row, true, lanes)));
}

/* GRU with linear_before_reset: h~ = g(x Wh + Wbh + r (h Rh + Rbh)). */
static void gru_lbr_body(rnn_low *r, mc_kexpr *j, int lanes)
{
	mc_kb *kb = r->c->kb;
	int64_t hs = r->hidden;
	mc_kexpr *row2 = mc_kb_let(kb, mc_k_addi(kb, j, 2 * hs));
	mc_kexpr *xpart = rnn_pre(r, row2, false, lanes);
	mc_kexpr *rpart = r->fast ? ld(r, r->hr.out, row2, lanes) : rnn_recur_row(r, row2);
	mc_kexpr *rt = ld(r, r->pre, mc_k_addi(kb, j, hs), lanes);
	mc_kb_store(kb, r->pre, row2, rnn_activate(r, 1, mc_k_add(kb, xpart, mc_k_mul(kb, rt, rpart))));
}

/* GRU without it: h~ = g(x Wh + (r . h) Rh + Wbh + Rbh), r . h in tmp. */
static void gru_h_body(rnn_low *r, mc_kexpr *j, int lanes)
{
	mc_kb *kb = r->c->kb;
	mc_kexpr *row2 = mc_kb_let(kb, mc_k_addi(kb, j, 2 * r->hidden));
	mc_kexpr *v = r->fast ? mc_k_add(kb, rnn_pre(r, row2, false, lanes), ld(r, r->hh.out, j, lanes))
	                      : rnn_row(r, row2, true, r->tmp);
	mc_kb_store(kb, r->pre, row2, rnn_activate(r, 1, v));
}

/* h = (1 - z) h~ + z h */
static void gru_out_body(rnn_low *r, mc_kexpr *j, int lanes)
{
	mc_kb *kb = r->c->kb;
	int64_t hs = r->hidden;
	mc_kexpr *z = mc_kb_let(kb, ld(r, r->pre, j, lanes));
	mc_kexpr *hh = ld(r, r->pre, mc_k_addi(kb, j, 2 * hs), lanes);
	mc_kexpr *one = fconst(kb, r->kt, 1);
	rnn_store_h(r, j, mc_k_add(kb, mc_k_mul(kb, mc_k_sub(kb, one, z), hh),
	                           mc_k_mul(kb, z, ld(r, r->h, j, lanes))));
}

/* The product row of gate g (0: z, 1: r, 2: h~) of units j.. */
static mc_kexpr *gru_gate_row(rnn_low *r, int g, mc_kexpr *j)
{
	mc_kb *kb = r->c->kb;
	if (r->gates)
		return mc_k_addi(kb, mc_k_muli(kb, j, 3), g);
	return mc_k_addi(kb, j, g * r->hidden);
}

/* The fast path with linear_before_reset: the whole step of units j.. in
 * one pass (each unit's z, r, h~ and new h need only that unit's sums),
 * nothing through pre. */
static void gru_fused_body(rnn_low *r, mc_kexpr *j, int lanes)
{
	mc_kb *kb = r->c->kb;
	mc_kexpr *z = mc_kb_let(kb, rnn_activate(r, 0, rnn_pre(r, gru_gate_row(r, 0, j), true, lanes)));
	mc_kexpr *rt = mc_kb_let(kb, rnn_activate(r, 0, rnn_pre(r, gru_gate_row(r, 1, j), true, lanes)));
	mc_kexpr *row2 = mc_kb_let(kb, gru_gate_row(r, 2, j));
	mc_kexpr *xpart = rnn_pre(r, row2, false, lanes), *rpart = ld(r, r->hr.out, row2, lanes);
	mc_kexpr *hh = mc_kb_let(kb, rnn_activate(r, 1, mc_k_add(kb, xpart, mc_k_mul(kb, rt, rpart))));
	mc_kexpr *one = fconst(kb, r->kt, 1);
	rnn_store_h(r, j, mc_k_add(kb, mc_k_mul(kb, mc_k_sub(kb, one, z), hh),
	                           mc_k_mul(kb, z, ld(r, r->h, j, lanes))));
}

/* The step's GRU_GATES or LSTM_GATES statement; its body, the same in IR,
 * comes next, up to mc_kb_end. */
static void rnn_gates_open(rnn_low *r, mc_tmpl_kind kind)
{
	mc_ktemplate t = { .kind = kind, .x = r->xw.out, .wt = r->hr.out, .out = r->h, .cell = r->cs,
	                   .consts = r->consts, .y = r->y_at ? r->c->out_buf[RO_Y] : -1, .y_at = r->y_at,
	                   .kp = r->hidden };
	mc_kb_template_open(r->c->kb, &t);
}

/* GRU gates z, r, h (rnn.c: gru_step). */
static void gru_step_ir(rnn_low *r)
{
	mc_kb *kb = r->c->kb;
	int64_t hs = r->hidden;
	if (r->fast && r->p->linear_before_reset) {
		if (r->gates)
			rnn_gates_open(r, MC_TMPL_GRU_GATES);
		rnn_vec_loop(r, hs, gru_fused_body);
		if (r->gates)
			mc_kb_end(kb);
		return;
	}
	rnn_vec_loop(r, 2 * hs, gru_zr_body);
	if (r->p->linear_before_reset) {
		rnn_vec_loop(r, hs, gru_lbr_body);
	} else {
		mc_kexpr *j = mc_kb_fori(kb, hs, MC_KF_VECTOR);
		mc_kb_store(kb, r->tmp, j, mc_k_mul(kb, mc_k_load(kb, r->pre, mc_k_addi(kb, j, hs)),
		                                    mc_k_load(kb, r->h, j)));
		mc_kb_end(kb);
		if (r->fast)
			kt_gemv(kb, &r->hh.cols, r->tmp, mc_k_index(kb, 0), r->hh.b[r->dir], -1, r->hh.out);
		rnn_vec_loop(r, hs, gru_h_body);
	}
	rnn_vec_loop(r, hs, gru_out_body);
}

/* Peephole weight `part` (0: i, 1: o, 2: f) of units j.. times c, or NULL. */
static mc_kexpr *lstm_peep(rnn_low *r, int part, mc_kexpr *j, mc_kexpr *cval, int lanes)
{
	mc_lower_ctx *c = r->c;
	mc_kb *kb = c->kb;
	if (!opt_in(c, RI_P))
		return NULL;
	mc_kexpr *at = mc_k_addi(kb, j, ((int64_t)r->dir * 3 + part) * r->hidden);
	return mc_k_mul(kb, ld(r, c->in_buf[RI_P], at, lanes), cval);
}

static mc_kexpr *add_opt(mc_kb *kb, mc_kexpr *a, mc_kexpr *b)
{
	return b ? mc_k_add(kb, a, b) : a;
}

/* Gate `g` (0: i, 1: o, 2: f, 3: c) of units j..: pre's row, or on the
 * fast path straight from the step's products. */
static mc_kexpr *lstm_gate(rnn_low *r, int g, mc_kexpr *j, int lanes)
{
	mc_kb *kb = r->c->kb;
	mc_kexpr *row = r->gates ? mc_k_addi(kb, mc_k_muli(kb, j, 4), g) : mc_k_addi(kb, j, g * r->hidden);
	return r->fast ? rnn_pre(r, row, true, lanes) : ld(r, r->pre, row, lanes);
}

static void lstm_body(rnn_low *r, mc_kexpr *j, int lanes)
{
	mc_kb *kb = r->c->kb;
	mc_kexpr *cold = mc_kb_let(kb, ld(r, r->cs, j, lanes));
	mc_kexpr *pi = lstm_gate(r, 0, j, lanes), *po = lstm_gate(r, 1, j, lanes);
	mc_kexpr *it = mc_kb_let(kb, rnn_activate(r, 0, add_opt(kb, pi, lstm_peep(r, 0, j, cold, lanes))));
	mc_kexpr *ft = r->p->input_forget
	                       ? mc_k_sub(kb, fconst(kb, r->kt, 1), it)
	                       : rnn_activate(r, 0, add_opt(kb, lstm_gate(r, 2, j, lanes),
	                                                    lstm_peep(r, 2, j, cold, lanes)));
	ft = mc_kb_let(kb, ft);
	mc_kexpr *ct = mc_kb_let(kb, rnn_activate(r, 1, lstm_gate(r, 3, j, lanes)));
	mc_kexpr *cnew = mc_kb_let(kb, mc_k_add(kb, mc_k_mul(kb, ft, cold), mc_k_mul(kb, it, ct)));
	mc_kb_store(kb, r->cs, j, cnew);
	mc_kexpr *ot = mc_kb_let(kb, rnn_activate(r, 0, add_opt(kb, po, lstm_peep(r, 1, j, cnew, lanes))));
	/* h takes C unclipped, as rnn.c does */
	mc_kexpr *hc = rnn_act_expr(kb, &r->p->act[r->dir][2], r->kt, cnew);
	rnn_store_h(r, j, mc_k_mul(kb, ot, hc));
}

/* LSTM gates i, o, f, c (rnn.c: lstm_step). */
static void lstm_step_ir(rnn_low *r)
{
	mc_kb *kb = r->c->kb;
	if (!r->fast) {
		mc_kexpr *row = mc_kb_fori(kb, 4 * r->hidden, 0);
		mc_kb_store(kb, r->pre, row, rnn_pre(r, row, true, 1));
		mc_kb_end(kb);
	}
	if (r->gates)
		rnn_gates_open(r, MC_TMPL_LSTM_GATES);
	rnn_vec_loop(r, r->hidden, lstm_body);
	if (r->gates)
		mc_kb_end(kb);
}

/* Offset of element 0 of the hidden vector of (dir, b) in initial_h/c, Y_h, Y_c. */
static mc_kexpr *rnn_state_at(rnn_low *r, mc_kexpr *b)
{
	mc_kb *kb = r->c->kb;
	mc_kexpr *slot = r->p->layout ? mc_k_addi(kb, mc_k_muli(kb, b, r->dirs), r->dir)
	                              : mc_k_addi(kb, b, (int64_t)r->dir * r->batch);
	return mc_k_muli(kb, slot, r->hidden);
}

/* State buffer dst (H or C) from initial input `in` (or zeros). */
static void rnn_init_state(rnn_low *r, int dst, int in, mc_kexpr *b)
{
	mc_lower_ctx *c = r->c;
	mc_kb *kb = c->kb;
	mc_kexpr *j = mc_kb_fori(kb, r->hidden, MC_KF_VECTOR);
	mc_kexpr *v = fconst(kb, r->kt, 0);
	if (opt_in(c, in))
		v = mc_k_cast(kb, r->kt,
		              mc_k_load(kb, c->in_buf[in], mc_k_add(kb, rnn_state_at(r, b), j)));
	mc_kb_store(kb, dst, j, v);
	mc_kb_end(kb);
}

/* Y_h or Y_c from state src: zero for an empty sequence (len == 0). */
static void rnn_final_state(rnn_low *r, int out, int src, mc_kexpr *b, mc_kexpr *len)
{
	mc_lower_ctx *c = r->c;
	mc_kb *kb = c->kb;
	if (!opt_out(c, out))
		return;
	mc_kexpr *at = mc_kb_let(kb, rnn_state_at(r, b));
	mc_kexpr *j = mc_kb_fori(kb, r->hidden, MC_KF_VECTOR);
	mc_kexpr *v = mc_k_load(kb, src, j);
	if (len)
		v = mc_k_select(kb, mc_k_bin(kb, MC_KB_EQ, len, mc_k_index(kb, 0)),
		                fconst(kb, r->kt, 0), v);
	mc_kb_store(kb, c->out_buf[out], mc_k_add(kb, at, j), v);
	mc_kb_end(kb);
}

/* The steps of one direction over one batch entry; len is the sequence's
 * run-time length (NULL: the full sequence). */
static void rnn_sequence(rnn_low *r, mc_kexpr *b, mc_kexpr *len, bool reverse)
{
	mc_lower_ctx *c = r->c;
	mc_kb *kb = c->kb;
	mc_kexpr *s = mc_kb_fori(kb, r->seq, 0);
	if (len)
		mc_kb_if(kb, mc_k_bin(kb, MC_KB_LT, s, len));
	mc_kexpr *t = s;
	if (reverse)
		t = mc_k_sub(kb, len ? mc_k_addi(kb, len, -1) : mc_k_index(kb, r->seq - 1), s);
	t = mc_kb_let(kb, t);
	mc_kexpr *xrow = r->p->layout ? mad(kb, b, r->seq, t)
	                              : mad(kb, t, r->batch, b);
	r->x_at = mc_kb_let(kb, mc_k_muli(kb, xrow, r->input));
	r->y_at = NULL;
	if (opt_out(c, RO_Y)) {
		mc_kexpr *slot = r->p->layout
		        ? mc_k_addi(kb, mc_k_muli(kb, mad(kb, b, r->seq, t), r->dirs), r->dir)
		        : mad(kb, mc_k_addi(kb, mc_k_muli(kb, t, r->dirs), r->dir), r->batch, b);
		r->y_at = mc_kb_let(kb, mc_k_muli(kb, slot, r->hidden));
	}
	if (r->fast)
		rnn_fast_products(r);
	switch (r->p->kind) {
	case KIND_RNN: rnn_step_ir(r); break;
	case KIND_GRU: gru_step_ir(r); break;
	case KIND_LSTM: lstm_step_ir(r); break;
	}
	if (len)
		mc_kb_end(kb);
	mc_kb_end(kb);
}

/* The sequence length of batch entry b, checked to lie in [0, seq]. */
static mc_kexpr *rnn_seq_len(rnn_low *r, mc_kexpr *b)
{
	mc_lower_ctx *c = r->c;
	mc_kb *kb = c->kb;
	mc_kexpr *len = mc_kb_let(kb, mc_k_load(kb, c->in_buf[RI_LENS], b));
	mc_kexpr *bad =
	        mc_k_bin(kb, MC_KB_OR, mc_k_bin(kb, MC_KB_LT, len, mc_k_int(kb, len->type, 0)),
	                 mc_k_bin(kb, MC_KB_GT, len, mc_k_int(kb, len->type, r->seq)));
	mc_kb_if(kb, bad);
	mc_kb_fail(kb, MC_STATUS_BAD_INPUT);
	mc_kb_end(kb);
	return mc_kb_let(kb, mc_k_cast(kb, MC_KT_INDEX, len));
}

static int lower_rnn(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const rnn_params *p = c->node->params;
	const mc_shape *xs = &c->in[RI_X]->shape;
	static const int gates[] = {[KIND_RNN] = 1, [KIND_GRU] = 3, [KIND_LSTM] = 4};
	rnn_low r = {
		.c = c, .p = p, .kt = mc_ktype_of(c->in[RI_X]->dtype),
		.seq = xs->dims[p->layout ? 1 : 0], .batch = xs->dims[p->layout ? 0 : 1],
		.input = xs->dims[2], .hidden = c->in[RI_R]->shape.dims[2], .dirs = p->num_dirs,
		.tmp = -1, .cs = -1,
	};
	r.rows = gates[p->kind] * r.hidden;
	mc_dtype sd = scratch_dtype(r.kt);
	r.h = mc_kb_scratch(kb, sd, (size_t)r.hidden);
	r.pre = mc_kb_scratch(kb, sd, (size_t)r.rows);
	if (p->kind == KIND_LSTM)
		r.cs = mc_kb_scratch(kb, sd, (size_t)r.hidden);
	if (p->kind == KIND_GRU)
		r.tmp = mc_kb_scratch(kb, sd, (size_t)r.hidden);
	if (rnn_fast_setup(&r) < 0)
		return -1;
	bool has_lens = opt_in(c, RI_LENS) != NULL;
	/* steps past a sequence's length leave Y zero */
	if (has_lens && opt_out(c, RO_Y))
		fill(kb, c->out_buf[RO_Y], mc_k_index(kb, 0),
		     (int64_t)mc_numel(&c->out[RO_Y]->shape), fconst(kb, r.kt, 0));
	for (r.dir = 0; r.dir < r.dirs; r.dir++) {
		mc_kexpr *b = mc_kb_fori(kb, r.batch, 0);
		mc_kexpr *len = has_lens ? rnn_seq_len(&r, b) : NULL;
		rnn_init_state(&r, r.h, RI_H0, b);
		if (r.cs >= 0)
			rnn_init_state(&r, r.cs, RI_C0, b);
		rnn_sequence(&r, b, len, p->reverse || r.dir == 1);
		rnn_final_state(&r, RO_Y_H, r.h, b, len);
		if (r.cs >= 0)
			rnn_final_state(&r, RO_Y_C, r.cs, b, len);
		mc_kb_end(kb);
	}
	return 0;
}

static const mc_lowering l_rnn = { MC_OP_RNN, lower_rnn, NULL, 0 };
static const mc_lowering l_gru = { MC_OP_GRU, lower_rnn, NULL, 0 };
static const mc_lowering l_lstm = { MC_OP_LSTM, lower_rnn, NULL, 0 };

/* ==== signal: DFT, STFT, windows, CumProd ==== */

/* An integer scalar input known at compile time (it set a shape). */
static int const_int(mc_lower_ctx *c, int i, const char *what, int64_t *out)
{
	const mc_tensor *t = mc_lower_const(c, i);
	if (!t || t->numel != 1 || !mc_dtype_is_int(t->dtype))
		return mc_lower_error(c, "%s must be a compile-time integer scalar", what);
	*out = mc_get_i(t, 0);
	return 0;
}

/* A plain DFT over one line, as signal.c's dft_line: re/im (scratch; im
 * -1 for a real line) hold `used` samples of a transform of length len,
 * whose bins k < n_out are stored (times scale) at out_at + k * kstride
 * (real) and + 1 (imaginary, when has_im_out). cosv/sinv hold cos and sin
 * of 2 pi m / len. */
typedef struct {
	mc_ktype kt;
	int cosv, sinv, re, im;
	int64_t used, len, n_out;
	int sign;
	double scale;
	bool has_im_out;
} dft_line_ir;

static void dft_line_lower(mc_lower_ctx *c, const dft_line_ir *d, mc_kexpr *out_at, int64_t kstride)
{
	mc_kb *kb = c->kb;
	mc_kexpr *k = mc_kb_fori(kb, d->n_out, 0);
	mc_kexpr *sre = mc_kb_local(kb, fconst(kb, d->kt, 0));
	mc_kexpr *sim = mc_kb_local(kb, fconst(kb, d->kt, 0));
	mc_kexpr *m = mc_kb_local(kb, mc_k_index(kb, 0)); /* k * t mod len */
	mc_kexpr *t = mc_kb_fori(kb, d->used, MC_KF_REDUCE);
	mc_kexpr *co = mc_kb_let(kb, mc_k_load(kb, d->cosv, m));
	mc_kexpr *si = mc_k_load(kb, d->sinv, m);
	si = mc_kb_let(kb, d->sign < 0 ? mc_k_un(kb, MC_KU_NEG, si) : si);
	mc_kexpr *xr = mc_kb_let(kb, mc_k_load(kb, d->re, t));
	if (d->im >= 0) {
		mc_kexpr *xi = mc_kb_let(kb, mc_k_load(kb, d->im, t));
		mc_kb_assign(kb, sre,
		             mc_k_add(kb, sre,
		                      mc_k_sub(kb, mc_k_mul(kb, xr, co), mc_k_mul(kb, xi, si))));
		mc_kb_assign(kb, sim,
		             mc_k_add(kb, sim,
		                      mc_k_add(kb, mc_k_mul(kb, xr, si), mc_k_mul(kb, xi, co))));
	} else {
		mc_kb_assign(kb, sre, mc_k_add(kb, sre, mc_k_mul(kb, xr, co)));
		mc_kb_assign(kb, sim, mc_k_add(kb, sim, mc_k_mul(kb, xr, si)));
	}
	mc_kb_assign(kb, m, mc_k_add(kb, m, k));
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_GE, m, mc_k_index(kb, d->len)));
	mc_kb_assign(kb, m, mc_k_sub(kb, m, mc_k_index(kb, d->len)));
	mc_kb_end(kb);
	mc_kb_end(kb);
	mc_kexpr *at = mc_kb_let(kb, mc_k_add(kb, out_at, mc_k_muli(kb, k, kstride)));
	mc_kexpr *vr = sre, *vi = sim;
	if (d->scale != 1.0) {
		vr = mc_k_mul(kb, vr, fconst(kb, d->kt, d->scale));
		vi = mc_k_mul(kb, vi, fconst(kb, d->kt, d->scale));
	}
	mc_lower_store(c, 0, NULL, at, vr);
	if (d->has_im_out)
		mc_lower_store(c, 0, NULL, mc_k_addi(kb, at, 1), vi);
	mc_kb_end(kb);
}

/* Twiddle tables cos, sin of 2 pi m / len (angles in double, as signal.c). */
static void dft_twiddles(mc_kb *kb, dft_line_ir *d)
{
	mc_dtype sd = scratch_dtype(d->kt);
	d->cosv = mc_kb_scratch(kb, sd, (size_t)d->len);
	d->sinv = mc_kb_scratch(kb, sd, (size_t)d->len);
	mc_kexpr *m = mc_kb_fori(kb, d->len, 0);
	mc_kexpr *angle = mc_kb_let(kb, mc_k_div(kb, mc_k_mul(kb, fconst(kb, MC_KT_F64, 2.0 * M_PI),
	                                                      mc_k_cast(kb, MC_KT_F64, m)),
	                                         fconst(kb, MC_KT_F64, (double)d->len)));
	mc_kb_store(kb, d->cosv, m, mc_k_un(kb, MC_KU_COS, angle));
	mc_kb_store(kb, d->sinv, m, mc_k_un(kb, MC_KU_SIN, angle));
	mc_kb_end(kb);
}

static int lower_dft(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_node *n = c->node;
	const dft_params *p = n->params;
	const mc_shape *xs = &c->in[0]->shape, *os = &c->out[0]->shape;
	int rank = xs->rank;
	int64_t axis = n->opset >= 20 ? -2 : p->axis_attr;
	if (n->opset >= 20 && opt_in(c, 2) && const_int(c, 2, "axis (input 2)", &axis))
		return -1;
	if (axis < 0)
		axis += rank;
	if (axis < 0 || axis > rank - 2)
		return mc_lower_error(c, "DFT axis %lld is out of range", (long long)axis);
	int64_t n_in = xs->dims[axis], comp_in = xs->dims[rank - 1];
	int64_t n_out = os->dims[axis], comp_out = os->dims[rank - 1];
	bool irfft = p->inverse && p->onesided;
	int64_t len = irfft ? 2 * (n_in - 1) : n_in;
	if (opt_in(c, 1) && const_int(c, 1, "dft_length (input 1)", &len))
		return -1;
	if (len < 1)
		return mc_lower_error(c, "DFT length %lld is not positive", (long long)len);
	int64_t outer = 1, inner = 1;
	for (int d = 0; d < rank - 1; d++) {
		if (d < axis)
			outer *= xs->dims[d];
		else if (d > axis)
			inner *= xs->dims[d];
	}
	mc_ktype kt = mc_ktype_of(c->in[0]->dtype);
	dft_line_ir d = {
		.kt = kt, .len = len, .n_out = n_out, .sign = p->inverse ? 1 : -1,
		.scale = p->inverse ? 1.0 / (double)len : 1.0, .has_im_out = comp_out == 2,
		.used = irfft ? len : (n_in < len ? n_in : len), .im = -1,
	};
	dft_twiddles(kb, &d);
	int64_t line = n_in > len ? n_in : len;
	d.re = mc_kb_scratch(kb, scratch_dtype(kt), (size_t)line);
	if (comp_in == 2)
		d.im = mc_kb_scratch(kb, scratch_dtype(kt), (size_t)line);
	mc_kexpr *o = mc_kb_fori(kb, outer, 0);
	mc_kexpr *i = mc_kb_fori(kb, inner, 0);
	/* x[o, t, i, :] at ((o * n_in + t) * inner + i) * comp_in */
	mc_kexpr *x0 = mc_kb_let(kb, mc_k_muli(kb, mad(kb, o, n_in * inner, i), comp_in));
	if (irfft) {
		/* the full spectrum from its first half: X[k] = conj(X[len - k]);
		 * bins the input lacks are zero */
		mc_kexpr *k = mc_kb_fori(kb, len, 0);
		mc_kexpr *mirrored =
		        mc_kb_let(kb, mc_k_bin(kb, MC_KB_GT, k, mc_k_index(kb, len / 2)));
		mc_kexpr *src = mc_kb_let(kb, mc_k_select(kb, mirrored,
		                                          mc_k_sub(kb, mc_k_index(kb, len), k), k));
		mc_kb_if(kb, mc_k_bin(kb, MC_KB_LT, src, mc_k_index(kb, n_in)));
		mc_kexpr *at = mc_kb_let(kb, mc_k_add(kb, x0, mc_k_muli(kb, src, inner * comp_in)));
		mc_kb_store(kb, d.re, k, mc_lower_load(c, 0, at));
		mc_kexpr *im = mc_kb_let(kb, mc_lower_load(c, 0, mc_k_addi(kb, at, 1)));
		mc_kb_store(kb, d.im, k, mc_k_select(kb, mirrored, mc_k_un(kb, MC_KU_NEG, im), im));
		mc_kb_else(kb);
		mc_kb_store(kb, d.re, k, fconst(kb, kt, 0));
		mc_kb_store(kb, d.im, k, fconst(kb, kt, 0));
		mc_kb_end(kb);
		mc_kb_end(kb);
	} else {
		mc_kexpr *t = mc_kb_fori(kb, d.used, 0);
		mc_kexpr *at = mc_kb_let(kb, mc_k_add(kb, x0, mc_k_muli(kb, t, inner * comp_in)));
		mc_kb_store(kb, d.re, t, mc_lower_load(c, 0, at));
		if (d.im >= 0)
			mc_kb_store(kb, d.im, t, mc_lower_load(c, 0, mc_k_addi(kb, at, 1)));
		mc_kb_end(kb);
	}
	/* y[o, k, i, :] at ((o * n_out + k) * inner + i) * comp_out */
	mc_kexpr *y0 = mc_kb_let(kb, mc_k_muli(kb, mad(kb, o, n_out * inner, i), comp_out));
	dft_line_lower(c, &d, y0, inner * comp_out);
	mc_kb_end_n(kb, 2);
	return 0;
}

enum { ST_SIGNAL, ST_STEP, ST_WINDOW, ST_LENGTH };

static int lower_stft(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *xs = &c->in[ST_SIGNAL]->shape, *os = &c->out[0]->shape;
	const mc_value *window = opt_in(c, ST_WINDOW);
	int64_t step, frame_len = window ? window->shape.dims[0] : xs->dims[1];
	if (const_int(c, ST_STEP, "frame_step (input 1)", &step))
		return -1;
	if (opt_in(c, ST_LENGTH) && const_int(c, ST_LENGTH, "frame_length (input 3)", &frame_len))
		return -1;
	int64_t batch = xs->dims[0], slen = xs->dims[1], comp = xs->dims[2];
	int64_t frames = os->dims[1], bins = os->dims[2];
	if (frame_len < 1 || frame_len > slen || step < 1)
		return mc_lower_error(c, "STFT frame length %lld or step %lld out of range",
		                      (long long)frame_len, (long long)step);
	mc_ktype kt = mc_ktype_of(c->in[ST_SIGNAL]->dtype);
	dft_line_ir d = {
		.kt = kt, .len = frame_len, .n_out = bins, .sign = -1, .scale = 1.0,
		.has_im_out = true, .used = frame_len, .im = -1,
	};
	dft_twiddles(kb, &d);
	d.re = mc_kb_scratch(kb, scratch_dtype(kt), (size_t)frame_len);
	if (comp == 2)
		d.im = mc_kb_scratch(kb, scratch_dtype(kt), (size_t)frame_len);
	mc_kexpr *b = mc_kb_fori(kb, batch, 0);
	mc_kexpr *f = mc_kb_fori(kb, frames, 0);
	/* signal[b, f * step + t, :] */
	mc_kexpr *x0 = mc_kb_let(kb, mc_k_muli(kb, mad(kb, b, slen, mc_k_muli(kb, f, step)), comp));
	mc_kexpr *t = mc_kb_fori(kb, frame_len, 0);
	mc_kexpr *w = window ? mc_kb_let(kb, mc_lower_load(c, ST_WINDOW, t)) : NULL;
	mc_kexpr *at = mc_kb_let(kb, mc_k_add(kb, x0, mc_k_muli(kb, t, comp)));
	mc_kexpr *v = mc_lower_load(c, ST_SIGNAL, at);
	mc_kb_store(kb, d.re, t, w ? mc_k_mul(kb, w, v) : v);
	if (d.im >= 0) {
		v = mc_lower_load(c, ST_SIGNAL, mc_k_addi(kb, at, 1));
		mc_kb_store(kb, d.im, t, w ? mc_k_mul(kb, w, v) : v);
	}
	mc_kb_end(kb);
	mc_kexpr *y0 = mc_kb_let(kb, mc_k_muli(kb, mad(kb, b, frames, f), bins * 2));
	dft_line_lower(c, &d, y0, 2);
	mc_kb_end_n(kb, 2);
	return 0;
}

/* w[i] = a0 - a1 cos(2 pi i / N) + a2 cos(4 pi i / N), in double, as
 * signal.c's window_eval (usually folded: the size is a constant). */
static int lower_window(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const window_params *p = c->node->params;
	int64_t size = c->out[0]->shape.dims[0];
	double period = p->periodic ? (double)size : (double)size - 1;
	mc_kexpr *i = mc_kb_fori(kb, size, MC_KF_PARALLEL);
	mc_kexpr *w;
	if (period > 0) {
		mc_kexpr *x = mc_kb_let(kb, mc_k_div(kb,
		                                     mc_k_mul(kb, fconst(kb, MC_KT_F64, 2.0 * M_PI),
		                                              mc_k_cast(kb, MC_KT_F64, i)),
		                                     fconst(kb, MC_KT_F64, period)));
		w = mc_k_sub(kb, fconst(kb, MC_KT_F64, p->a0),
		             mc_k_mul(kb, fconst(kb, MC_KT_F64, p->a1), mc_k_un(kb, MC_KU_COS, x)));
		w = mc_k_add(kb, w,
		             mc_k_mul(kb, fconst(kb, MC_KT_F64, p->a2),
		                      mc_k_un(kb, MC_KU_COS,
		                              mc_k_mul(kb, fconst(kb, MC_KT_F64, 2), x))));
	} else {
		w = fconst(kb, MC_KT_F64, 1.0); /* a one-sample symmetric window */
	}
	mc_lower_store(c, 0, NULL, i, mc_k_cast(kb, mc_ktype_of(c->out[0]->dtype), w));
	mc_kb_end(kb);
	return 0;
}

/* CumProd along `axis` of x seen as outer x len x inner: a running
 * product per inner position, innermost loop over contiguous memory. */
static void cumprod_axis(mc_lower_ctx *c, int axis, int prod)
{
	mc_kb *kb = c->kb;
	const cumprod_params *p = c->node->params;
	const mc_shape *xs = &c->in[0]->shape;
	mc_ktype kt = mc_ktype_of(c->in[0]->dtype);
	int64_t outer = 1, len = xs->dims[axis], inner = 1;
	for (int d = 0; d < xs->rank; d++) {
		if (d < axis)
			outer *= xs->dims[d];
		else if (d > axis)
			inner *= xs->dims[d];
	}
	mc_kexpr *o = mc_kb_fori(kb, outer, 0);
	fill(kb, prod, mc_k_index(kb, 0), inner, mc_k_const_as(kb, kt, 1));
	mc_kexpr *step = mc_kb_fori(kb, len, 0);
	mc_kexpr *k = p->reverse ? mc_k_sub(kb, mc_k_index(kb, len - 1), step) : step;
	mc_kexpr *row = mc_kb_let(kb, mc_k_muli(kb, mad(kb, o, len, k), inner));
	mc_kexpr *i = mc_kb_fori(kb, inner, MC_KF_VECTOR);
	mc_kexpr *at = mc_kb_let(kb, mc_k_add(kb, row, i));
	mc_kexpr *before = mc_kb_let(kb, mc_k_load(kb, prod, i));
	mc_kexpr *after = mc_kb_let(kb, mc_k_mul(kb, before, mc_lower_load(c, 0, at)));
	mc_kb_store(kb, prod, i, after);
	mc_lower_store(c, 0, NULL, at, p->exclusive ? before : after);
	mc_kb_end_n(kb, 3);
}

static int lower_cumprod(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *xs = &c->in[0]->shape;
	int rank = xs->rank;
	if (rank == 0)
		return mc_lower_error(c, "CumProd of a scalar has no C lowering");
	int64_t inner_max = 1;
	for (int d = 1; d < rank; d++)
		inner_max *= xs->dims[d];
	mc_ktype kt = mc_ktype_of(c->in[0]->dtype);
	mc_dtype sd = mc_ktype_is_float(kt) ? scratch_dtype(kt) : c->in[0]->dtype;
	int prod = mc_kb_scratch(kb, sd, (size_t)(inner_max ? inner_max : 1));
	const mc_tensor *ax = mc_lower_const(c, 1);
	if (ax) {
		int64_t a = mc_get_i(ax, 0);
		if (a < -rank || a >= rank)
			return mc_lower_error(c, "CumProd axis %lld is out of range", (long long)a);
		cumprod_axis(c, (int)(a < 0 ? a + rank : a), prod);
		return 0;
	}
	/* a run-time axis: checked, then one scan per possible axis */
	mc_kexpr *a =
	        mc_kb_let(kb, mc_k_cast(kb, MC_KT_I64, mc_lower_load(c, 1, mc_k_index(kb, 0))));
	a = mc_kb_let(kb, mc_k_select(kb, mc_k_bin(kb, MC_KB_LT, a, mc_k_int(kb, MC_KT_I64, 0)),
	                              mc_k_add(kb, a, mc_k_int(kb, MC_KT_I64, rank)), a));
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_OR, mc_k_bin(kb, MC_KB_LT, a, mc_k_int(kb, MC_KT_I64, 0)),
	                      mc_k_bin(kb, MC_KB_GE, a, mc_k_int(kb, MC_KT_I64, rank))));
	mc_kb_fail(kb, MC_STATUS_BAD_INPUT);
	mc_kb_end(kb);
	for (int d = 0; d < rank; d++) {
		mc_kb_if(kb, mc_k_bin(kb, MC_KB_EQ, a, mc_k_int(kb, MC_KT_I64, d)));
		cumprod_axis(c, d, prod);
		mc_kb_end(kb);
	}
	return 0;
}

static const mc_lowering l_dft = { MC_OP_DFT, lower_dft, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_stft = { MC_OP_STFT, lower_stft, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_hann = { MC_OP_HannWindow, lower_window, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_hamming = { MC_OP_HammingWindow, lower_window, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_blackman = { MC_OP_BlackmanWindow, lower_window, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_cumprod = { MC_OP_CumProd, lower_cumprod, NULL, MC_LOWER_EPILOGUE };

/* ---- MelWeightMatrix: folds when its inputs are constants; this is the
 * run-time form (sample_rate or the edges fed at run time), step by step
 * as signal.c's mel_eval. ---- */

/* numpy's float floor division a // b (signal.c: floor_div). */
static mc_kexpr *floor_div_ir(mc_kb *kb, mc_kexpr *a, mc_kexpr *b)
{
	mc_ktype t = MC_KT_F64;
	mc_kexpr *zero = fconst(kb, t, 0);
	mc_kexpr *mod = mc_kb_let(kb, mc_k_bin(kb, MC_KB_FMOD, a, b));
	mc_kexpr *div = mc_kb_local(kb, mc_k_div(kb, mc_k_sub(kb, a, mod), b));
	mc_kexpr *sign_differs = mc_k_bin(kb, MC_KB_NE, mc_k_bin(kb, MC_KB_LT, b, zero),
	                                  mc_k_bin(kb, MC_KB_LT, mod, zero));
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_AND, mc_k_bin(kb, MC_KB_NE, mod, zero), sign_differs));
	mc_kb_assign(kb, div, mc_k_sub(kb, div, fconst(kb, t, 1)));
	mc_kb_end(kb);
	mc_kexpr *fl = mc_kb_let(kb, mc_k_un(kb, MC_KU_FLOOR, div));
	mc_kexpr *rounded =
	        mc_k_select(kb, mc_k_bin(kb, MC_KB_GT, mc_k_sub(kb, div, fl), fconst(kb, t, 0.5)),
	                    mc_k_add(kb, fl, fconst(kb, t, 1)), fl);
	/* a zero quotient keeps the sign of a / b (only the sign of 0 differs) */
	return mc_k_select(kb, mc_k_bin(kb, MC_KB_EQ, div, zero), zero, rounded);
}

/* Stores w at [spectrogram bin j, mel bin i]; j (i64) is checked. */
static void mel_store_ir(mc_lower_ctx *c, mc_kexpr *j, mc_kexpr *i, int64_t spec, int64_t mel_bins,
                         mc_kexpr *w)
{
	mc_kb *kb = c->kb;
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_OR, mc_k_bin(kb, MC_KB_LT, j, mc_k_int(kb, j->type, 0)),
	                      mc_k_bin(kb, MC_KB_GE, j, mc_k_int(kb, j->type, spec))));
	mc_kb_fail(kb, MC_STATUS_BAD_INPUT);
	mc_kb_end(kb);
	mc_kexpr *at = mad(kb, mc_k_cast(kb, MC_KT_INDEX, j), mel_bins, i);
	mc_kb_store(kb, c->out_buf[0], at, w);
}

/* Opens the loop over spectrogram bins first..last (i64, first <= last),
 * after checking that all of them lie in [0, spec), as the reference fails
 * on the first store outside. */
static mc_kexpr *mel_span(mc_kb *kb, mc_kexpr *first, mc_kexpr *last, int64_t spec)
{
	mc_kb_if(kb,
	         mc_k_bin(kb, MC_KB_OR, mc_k_bin(kb, MC_KB_LT, first, mc_k_int(kb, MC_KT_I64, 0)),
	                  mc_k_bin(kb, MC_KB_GE, last, mc_k_int(kb, MC_KT_I64, spec))));
	mc_kb_fail(kb, MC_STATUS_BAD_INPUT);
	mc_kb_end(kb);
	return mc_kb_for(kb, mc_k_cast(kb, MC_KT_INDEX, first),
	                 mc_k_addi(kb, mc_k_cast(kb, MC_KT_INDEX, last), 1), 0);
}

static int lower_mel(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	mc_ktype f64 = MC_KT_F64, i64 = MC_KT_I64;
	int64_t spec = c->out[0]->shape.dims[0], mel_bins = c->out[0]->shape.dims[1], dft_length;
	if (const_int(c, 1, "dft_length (input 1)", &dft_length))
		return -1;
	mc_ktype ot = mc_ktype_of(c->out[0]->dtype);
	mc_kexpr *sr = mc_kb_let(kb, mc_k_cast(kb, i64, mc_lower_load(c, 2, mc_k_index(kb, 0))));
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_LT, sr, mc_k_int(kb, i64, 1)));
	mc_kb_fail(kb, MC_STATUS_BAD_INPUT);
	mc_kb_end(kb);
	mc_kexpr *mel_of[2];
	for (int e = 0; e < 2; e++) { /* 2595 log10(1 + hz / 700) */
		mc_kexpr *hz = mc_k_cast(kb, f64, mc_lower_load(c, 3 + e, mc_k_index(kb, 0)));
		mc_kexpr *l = mc_k_un(kb, MC_KU_LOG,
		                      mc_k_add(kb, fconst(kb, f64, 1),
		                               mc_k_div(kb, hz, fconst(kb, f64, 700))));
		mel_of[e] = mc_kb_let(kb, mc_k_mul(kb, fconst(kb, f64, 2595.0 / log(10.0)), l));
	}
	mc_kexpr *step = mc_kb_let(kb, mc_k_div(kb, mc_k_sub(kb, mel_of[1], mel_of[0]),
	                                        fconst(kb, f64, (double)(mel_bins + 2))));
	/* the DFT bin of each triangle corner */
	int bins = mc_kb_scratch(kb, MC_INT64, (size_t)(mel_bins + 2));
	mc_kexpr *i = mc_kb_fori(kb, mel_bins + 2, 0);
	mc_kexpr *mel = mc_k_add(kb, mc_k_mul(kb, mc_k_cast(kb, f64, i), step), mel_of[0]);
	mc_kexpr *hz = mc_k_mul(kb, fconst(kb, f64, 700),
	                        mc_k_sub(kb, mc_k_bin(kb, MC_KB_POW, fconst(kb, f64, 10),
	                                              mc_k_div(kb, mel, fconst(kb, f64, 2595))),
	                                 fconst(kb, f64, 1)));
	mc_kexpr *bin =
	        mc_kb_let(kb,
	                  floor_div_ir(kb,
	                               mc_k_mul(kb, fconst(kb, f64, (double)dft_length + 1.0), hz),
	                               mc_k_cast(kb, f64, sr)));
	/* NaN fails the comparison: also bad */
	mc_kb_if(kb, mc_k_un(kb, MC_KU_NOT,
	                     mc_k_bin(kb, MC_KB_LE, mc_k_un(kb, MC_KU_ABS, bin),
	                              fconst(kb, f64, 4e18))));
	mc_kb_fail(kb, MC_STATUS_BAD_INPUT);
	mc_kb_end(kb);
	mc_kb_store(kb, bins, i, mc_k_cast(kb, i64, bin));
	mc_kb_end(kb);
	fill(kb, c->out_buf[0], mc_k_index(kb, 0), spec * mel_bins, mc_k_const_as(kb, ot, 0));
	i = mc_kb_fori(kb, mel_bins, 0);
	mc_kexpr *left = mc_kb_let(kb, mc_k_load(kb, bins, i));
	mc_kexpr *center = mc_kb_let(kb, mc_k_load(kb, bins, mc_k_addi(kb, i, 1)));
	mc_kexpr *right = mc_kb_let(kb, mc_k_load(kb, bins, mc_k_addi(kb, i, 2)));
	mc_kexpr *rise = mc_kb_let(kb, mc_k_sub(kb, center, left));
	mc_kexpr *fall = mc_kb_let(kb, mc_k_sub(kb, right, center));
	mc_kexpr *zero = mc_k_int(kb, i64, 0);
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_EQ, rise, zero));
	mel_store_ir(c, center, i, spec, mel_bins, mc_k_const_as(kb, ot, 1));
	mc_kb_end(kb);
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_AND, mc_k_bin(kb, MC_KB_NE, rise, zero),
	                      mc_k_bin(kb, MC_KB_LE, left, center)));
	mc_kexpr *j = mc_kb_let(kb, mc_k_cast(kb, i64, mel_span(kb, left, center, spec)));
	mc_kexpr *w =
	        mc_k_div(kb, mc_k_cast(kb, f64, mc_k_sub(kb, j, left)), mc_k_cast(kb, f64, rise));
	mel_store_ir(c, j, i, spec, mel_bins, mc_k_cast(kb, ot, w));
	mc_kb_end_n(kb, 2);
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_GT, fall, zero));
	j = mc_kb_let(kb, mc_k_cast(kb, i64,
	                            mel_span(kb, center, mc_k_sub(kb, right, mc_k_int(kb, i64, 1)),
	                                     spec)));
	w = mc_k_div(kb, mc_k_cast(kb, f64, mc_k_sub(kb, right, j)), mc_k_cast(kb, f64, fall));
	mel_store_ir(c, j, i, spec, mel_bins, mc_k_cast(kb, ot, w));
	mc_kb_end_n(kb, 3);
	return 0;
}

static const mc_lowering l_mel = { MC_OP_MelWeightMatrix, lower_mel, NULL, 0 };

/* ==== Unreachable: an If branch that cannot run with the model's shapes
 * (libcore/ops/control.c): taken, the run stops with its status ==== */
static int lower_unreachable(mc_lower_ctx *c)
{
	mc_kb_fail(c->kb, MC_STATUS_BRANCH);
	return 0;
}

static const mc_lowering l_unreachable = { MC_OP_Unreachable, lower_unreachable, NULL, 0 };

/* ==== extra: CenterCropPad, RotaryEmbedding, Det, GridSample, RoiAlign ==== */

/* Output element = the input element at the same coordinates shifted by
 * the crop/pad offset, or zero in the padding (extra.c: ccp_eval). */
static int lower_center_crop_pad(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *xs = &c->in[0]->shape, *os = &c->out[0]->shape;
	mc_ktype kt = mc_ktype_of(c->in[0]->dtype);
	mc_kexpr *coords[MC_MAX_RANK], *inside = NULL, *src = mc_k_index(kb, 0);
	bool empty_in = mc_numel(xs) == 0;
	mc_lower_loops(kb, os, coords, MC_KF_PARALLEL);
	for (int d = 0; d < xs->rank && !empty_in; d++) {
		int64_t dim = xs->dims[d], want = os->dims[d];
		int64_t off = want <= dim ? (dim - want) / 2 : -((want - dim) / 2);
		mc_kexpr *s = mc_k_addi(kb, coords[d], off);
		if (want > dim) {
			/* padded: inside when -off <= o < -off + dim; index clamped */
			mc_kexpr *in_d =
			        mc_k_bin(kb, MC_KB_AND,
			                 mc_k_bin(kb, MC_KB_GE, coords[d], mc_k_index(kb, -off)),
			                 mc_k_bin(kb, MC_KB_LT, coords[d],
			                          mc_k_index(kb, dim - off)));
			inside = inside ? mc_k_bin(kb, MC_KB_AND, inside, in_d) : in_d;
			s = mc_k_bin(kb, MC_KB_MIN, mc_k_bin(kb, MC_KB_MAX, s, mc_k_index(kb, 0)),
			             mc_k_index(kb, dim - 1));
		}
		src = mad(kb, src, dim, s);
	}
	mc_kexpr *v = mc_k_const_as(kb, kt, 0);
	if (!empty_in) {
		v = mc_lower_load(c, 0, src);
		if (inside)
			v = mc_k_select(kb, inside, v, mc_k_const_as(kb, kt, 0));
	}
	mc_lower_store(c, 0, coords, NULL, v);
	mc_kb_end_n(kb, os->rank);
	return 0;
}

enum { RE_X, RE_COS, RE_SIN, RE_POS };

/* extra.c: rope_eval. The pair (k, k + rot/2), or (2k, 2k + 1) when
 * interleaved, rotates by the cached angle of the token's position. */
static int lower_rotary_embedding(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_node *n = c->node;
	const mc_shape *xs = &c->in[RE_X]->shape;
	int64_t interleaved, heads, rot;
	if (mc_attr_int(n, "interleaved", 0, &interleaved) ||
	    mc_attr_int(n, "num_heads", 0, &heads) ||
	    mc_attr_int(n, "rotary_embedding_dim", 0, &rot))
		return -1;
	bool is_3d = xs->rank == 3;
	int64_t nb = xs->dims[0], seq = is_3d ? xs->dims[1] : xs->dims[2];
	int64_t nh = is_3d ? heads : xs->dims[1];
	if (nh <= 0)
		return mc_lower_error(c, "RotaryEmbedding needs num_heads for a 3-D input");
	int64_t hd = is_3d ? xs->dims[2] / nh : xs->dims[3];
	if (!rot)
		rot = hd;
	int64_t half = rot / 2;
	const mc_value *pos = opt_in(c, RE_POS);
	int64_t max_pos = pos ? c->in[RE_COS]->shape.dims[0] : 0;
	mc_ktype kt = mc_ktype_of(c->in[RE_X]->dtype);
	mc_kexpr *b = mc_kb_fori(kb, nb, MC_KF_PARALLEL);
	mc_kexpr *s = mc_kb_fori(kb, seq, 0);
	mc_kexpr *tok = mc_kb_let(kb, mad(kb, b, seq, s));
	mc_kexpr *row = tok;
	if (pos) {
		mc_kexpr *pid =
		        mc_kb_let(kb, mc_k_cast(kb, MC_KT_I64, mc_lower_load(c, RE_POS, tok)));
		mc_kb_if(kb,
		         mc_k_bin(kb, MC_KB_OR,
		                  mc_k_bin(kb, MC_KB_LT, pid, mc_k_int(kb, MC_KT_I64, 0)),
		                  mc_k_bin(kb, MC_KB_GE, pid, mc_k_int(kb, MC_KT_I64, max_pos))));
		mc_kb_fail(kb, MC_STATUS_BAD_INDEX);
		mc_kb_end(kb);
		row = mc_kb_let(kb, mc_k_cast(kb, MC_KT_INDEX, pid));
	}
	mc_kexpr *cache = mc_kb_let(kb, mc_k_muli(kb, row, half));
	mc_kexpr *h = mc_kb_fori(kb, nh, 0);
	mc_kexpr *base = is_3d ? mc_k_muli(kb, mad(kb, tok, nh, h), hd)
	                       : mc_k_muli(kb, mad(kb, mad(kb, b, nh, h), seq, s), hd);
	base = mc_kb_let(kb, base);
	if (rot < hd) {
		mc_kexpr *d = mc_kb_for(kb, mc_k_index(kb, rot), mc_k_index(kb, hd), MC_KF_VECTOR);
		mc_kexpr *at = mc_kb_let(kb, mc_k_add(kb, base, d));
		mc_lower_store(c, 0, NULL, at, mc_lower_load(c, RE_X, at));
		mc_kb_end(kb);
	}
	mc_kexpr *k = mc_kb_fori(kb, half, 0);
	mc_kexpr *i1 = mc_kb_let(kb, mc_k_add(kb, base, interleaved ? mc_k_muli(kb, k, 2) : k));
	mc_kexpr *i2 = mc_kb_let(kb, interleaved ? mc_k_addi(kb, i1, 1) : mc_k_addi(kb, i1, half));
	mc_kexpr *co =
	        mc_kb_let(kb, mc_k_cast(kb, kt, mc_lower_load(c, RE_COS, mc_k_add(kb, cache, k))));
	mc_kexpr *si =
	        mc_kb_let(kb, mc_k_cast(kb, kt, mc_lower_load(c, RE_SIN, mc_k_add(kb, cache, k))));
	mc_kexpr *x1 = mc_kb_let(kb, mc_lower_load(c, RE_X, i1));
	mc_kexpr *x2 = mc_kb_let(kb, mc_lower_load(c, RE_X, i2));
	mc_lower_store(c, 0, NULL, i1, mc_k_sub(kb, mc_k_mul(kb, co, x1), mc_k_mul(kb, si, x2)));
	mc_lower_store(c, 0, NULL, i2, mc_k_add(kb, mc_k_mul(kb, si, x1), mc_k_mul(kb, co, x2)));
	mc_kb_end_n(kb, 4);
	return 0;
}

/* Determinant of each trailing m x m matrix by LU decomposition with
 * partial pivoting (extra.c: det_of), on a scratch copy. */
static int lower_det(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *xs = &c->in[0]->shape;
	int64_t m = xs->dims[xs->rank - 1], mm = m * m;
	int64_t count = (int64_t)mc_numel(&c->out[0]->shape);
	mc_ktype kt = mc_ktype_of(c->in[0]->dtype);
	int a = mc_kb_scratch(kb, scratch_dtype(kt), (size_t)(mm ? mm : 1));
	mc_kexpr *mat = mc_kb_fori(kb, count, 0);
	mc_kexpr *e = mc_kb_fori(kb, mm, MC_KF_VECTOR);
	mc_kb_store(kb, a, e, mc_lower_load(c, 0, mad(kb, mat, mm, e)));
	mc_kb_end(kb);
	mc_kexpr *det = mc_kb_local(kb, fconst(kb, kt, 1));
	mc_kexpr *k = mc_kb_fori(kb, m, 0);
	mc_kexpr *piv = mc_kb_local(kb, k);
	mc_kexpr *i = mc_kb_for(kb, mc_k_addi(kb, k, 1), mc_k_index(kb, m), 0);
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_GT,
	                      mc_k_un(kb, MC_KU_ABS, mc_k_load(kb, a, mad(kb, i, m, k))),
	                      mc_k_un(kb, MC_KU_ABS, mc_k_load(kb, a, mad(kb, piv, m, k)))));
	mc_kb_assign(kb, piv, i);
	mc_kb_end_n(kb, 2);
	mc_kexpr *pk = mc_kb_let(kb, mc_k_load(kb, a, mad(kb, piv, m, k)));
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_EQ, pk, fconst(kb, kt, 0)));
	mc_kb_assign(kb, det, fconst(kb, kt, 0));
	mc_kb_break(kb);
	mc_kb_end(kb);
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_NE, piv, k));
	mc_kexpr *j = mc_kb_fori(kb, m, 0);
	mc_kexpr *ak = mc_kb_let(kb, mad(kb, k, m, j));
	mc_kexpr *ap = mc_kb_let(kb, mad(kb, piv, m, j));
	mc_kexpr *t = mc_kb_let(kb, mc_k_load(kb, a, ak));
	mc_kb_store(kb, a, ak, mc_k_load(kb, a, ap));
	mc_kb_store(kb, a, ap, t);
	mc_kb_end(kb);
	mc_kb_assign(kb, det, mc_k_un(kb, MC_KU_NEG, det));
	mc_kb_end(kb);
	mc_kexpr *kk = mc_kb_let(kb, mc_k_load(kb, a, mad(kb, k, m, k)));
	mc_kb_assign(kb, det, mc_k_mul(kb, det, kk));
	i = mc_kb_for(kb, mc_k_addi(kb, k, 1), mc_k_index(kb, m), 0);
	mc_kexpr *f = mc_kb_let(kb, mc_k_div(kb, mc_k_load(kb, a, mad(kb, i, m, k)), kk));
	j = mc_kb_for(kb, k, mc_k_index(kb, m), MC_KF_VECTOR);
	mc_kexpr *at = mc_kb_let(kb, mad(kb, i, m, j));
	mc_kb_store(kb, a, at, mc_k_sub(kb, mc_k_load(kb, a, at),
	                                mc_k_mul(kb, f, mc_k_load(kb, a, mad(kb, k, m, j)))));
	mc_kb_end_n(kb, 3);
	mc_lower_store(c, 0, NULL, mat, det);
	mc_kb_end(kb);
	return 0;
}

/* ---- GridSample ---- */

/* Reflects x into [lo, hi] by the nearer border (extra.c: gs_reflect). */
static mc_kexpr *gs_reflect_ir(mc_kb *kb, mc_kexpr *x, double lo, double hi)
{
	double range = hi - lo;
	mc_ktype t = MC_KT_F64;
	if (range <= 0)
		return fconst(kb, t, lo);
	x = mc_kb_let(kb, x);
	mc_kexpr *below = mc_kb_let(kb, mc_k_bin(kb, MC_KB_LT, x, fconst(kb, t, lo)));
	mc_kexpr *dx = mc_kb_let(kb, mc_k_select(kb, below, mc_k_sub(kb, fconst(kb, t, lo), x),
	                                         mc_k_sub(kb, x, fconst(kb, t, hi))));
	mc_kexpr *k =
	        mc_kb_let(kb, mc_k_un(kb, MC_KU_FLOOR, mc_k_div(kb, dx, fconst(kb, t, range))));
	mc_kexpr *r = mc_kb_let(kb, mc_k_sub(kb, dx, mc_k_mul(kb, k, fconst(kb, t, range))));
	mc_kexpr *even =
	        mc_kb_let(kb, mc_k_bin(kb, MC_KB_EQ, mc_k_bin(kb, MC_KB_FMOD, k, fconst(kb, t, 2)),
	                               fconst(kb, t, 0)));
	mc_kexpr *lo_r = mc_k_add(kb, fconst(kb, t, lo), r),
	         *hi_r = mc_k_sub(kb, fconst(kb, t, hi), r);
	mc_kexpr *from_below = mc_k_select(kb, even, lo_r, hi_r);
	mc_kexpr *from_above = mc_k_select(kb, even, hi_r, lo_r);
	return mc_k_select(kb, below, from_below,
	                   mc_k_select(kb, mc_k_bin(kb, MC_KB_GT, x, fconst(kb, t, hi)), from_above,
	                               x));
}

/* Keys' cubic convolution coefficient `tap` at fraction t (a = -0.75). */
static mc_kexpr *gs_cubic_ir(mc_kb *kb, mc_kexpr *t, int tap)
{
	const double a = -0.75;
	mc_ktype ty = MC_KT_F64;
	mc_kexpr *x = mc_k_un(kb, MC_KU_ABS, t);
	mc_kexpr *one = fconst(kb, ty, 1);
	switch (tap) {
	case 0: x = mc_k_add(kb, x, one); break;
	case 2: x = mc_k_sub(kb, one, x); break;
	case 3: x = mc_k_sub(kb, fconst(kb, ty, 2), x); break;
	default: break;
	}
	x = mc_kb_let(kb, x);
	if (tap == 1 || tap == 2) /* ((a + 2) x - (a + 3)) x x + 1 */
		return mc_k_add(kb,
		                mc_k_mul(kb,
		                         mc_k_mul(kb,
		                                  mc_k_sub(kb,
		                                           mc_k_mul(kb, fconst(kb, ty, a + 2), x),
		                                           fconst(kb, ty, a + 3)),
		                                  x),
		                         x),
		                one);
	/* ((a x - 5a) x + 8a) x - 4a */
	mc_kexpr *v = mc_k_sub(kb, mc_k_mul(kb, fconst(kb, ty, a), x), fconst(kb, ty, 5 * a));
	v = mc_k_add(kb, mc_k_mul(kb, v, x), fconst(kb, ty, 8 * a));
	return mc_k_sub(kb, mc_k_mul(kb, v, x), fconst(kb, ty, 4 * a));
}

/* Pixel index base + tap along a dim of length len after the padding
 * rule; *valid is false where zeros padding reads outside. */
static mc_kexpr *gs_index_ir(mc_kb *kb, const gs_params *p, mc_kexpr *i, int64_t len, double lo,
                             double hi, mc_kexpr **valid)
{
	*valid = NULL;
	if (p->pad == GS_ZEROS) {
		*valid = mc_k_bin(kb, MC_KB_AND, mc_k_bin(kb, MC_KB_GE, i, mc_k_index(kb, 0)),
		                  mc_k_bin(kb, MC_KB_LT, i, mc_k_index(kb, len)));
	} else if (p->pad == GS_REFLECTION) {
		i = mc_k_cast(kb, MC_KT_INDEX,
		              gs_reflect_ir(kb, mc_k_cast(kb, MC_KT_F64, i), lo, hi));
	}
	return mc_kb_let(kb, mc_k_bin(kb, MC_KB_MIN, mc_k_bin(kb, MC_KB_MAX, i, mc_k_index(kb, 0)),
	                              mc_k_index(kb, len - 1)));
}

static int lower_grid_sample(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const gs_params *p = c->node->params;
	const mc_shape *xs = &c->in[0]->shape, *os = &c->out[0]->shape;
	int r = xs->rank - 2;
	int64_t nb = xs->dims[0], ch = xs->dims[1];
	const int64_t *dims = xs->dims + 2;
	int64_t in_sp = 1, out_sp = 1, sp_stride[MC_MAX_RANK];
	for (int d = r - 1; d >= 0; d--) {
		sp_stride[d] = in_sp;
		in_sp *= dims[d];
		out_sp *= os->dims[d + 2];
	}
	mc_ktype kt = mc_ktype_of(c->in[0]->dtype), f64 = MC_KT_F64;
	int taps = p->mode == GS_LINEAR ? 2 : p->mode == GS_CUBIC ? 4 : 1;
	int64_t combos = 1;
	for (int d = 0; d < r; d++)
		combos *= taps;
	if (combos > 4096)
		return mc_lower_error(c,
		                      "GridSample over %d dims has too many taps for a C lowering",
		                      r);
	mc_kexpr *b = mc_kb_fori(kb, nb, MC_KF_PARALLEL);
	mc_kexpr *o = mc_kb_fori(kb, out_sp, 0);
	if (in_sp == 0) { /* nothing to sample: zeros */
		mc_kexpr *cc = mc_kb_fori(kb, ch, 0);
		mc_lower_store(c, 0, NULL, mad(kb, mad(kb, b, ch, cc), out_sp, o),
		               fconst(kb, kt, 0));
		mc_kb_end_n(kb, 3);
		return 0;
	}
	mc_kexpr *gbase = mc_kb_let(kb, mc_k_muli(kb, mad(kb, b, out_sp, o), r));
	mc_kexpr *nan = NULL, *base[MC_MAX_RANK], *w[MC_MAX_RANK][4];
	double lo[MC_MAX_RANK], hi[MC_MAX_RANK];
	for (int d = 0; d < r; d++) {
		double len = (double)dims[d];
		lo[d] = p->align ? 0 : -0.5;
		hi[d] = p->align ? len - 1 : len - 0.5;
		/* pixel coordinate; the grid lists them innermost dim first */
		mc_kexpr *g =
		        mc_k_cast(kb, f64, mc_lower_load(c, 1, mc_k_addi(kb, gbase, r - 1 - d)));
		mc_kexpr *one = fconst(kb, f64, 1), *two = fconst(kb, f64, 2);
		mc_kexpr *v = p->align ? mc_k_mul(kb, mc_k_div(kb, mc_k_add(kb, g, one), two),
		                                  fconst(kb, f64, len - 1))
		                       : mc_k_div(kb,
		                                  mc_k_sub(kb,
		                                           mc_k_mul(kb, mc_k_add(kb, g, one),
		                                                    fconst(kb, f64, len)),
		                                           one),
		                                  two);
		v = mc_kb_let(kb, v);
		if (p->mode == GS_NEAREST)
			v = mc_kb_let(kb, mc_k_un(kb, MC_KU_RINT, v)); /* half to even */
		if (p->pad == GS_BORDER) {
			mc_kexpr *out = mc_k_bin(kb, MC_KB_OR,
			                         mc_k_bin(kb, MC_KB_LT, v, fconst(kb, f64, lo[d])),
			                         mc_k_bin(kb, MC_KB_GT, v, fconst(kb, f64, hi[d])));
			mc_kexpr *cl =
			        mc_k_select(kb, mc_k_bin(kb, MC_KB_LT, v, fconst(kb, f64, 0)),
			                    fconst(kb, f64, 0),
			                    mc_k_select(kb,
			                                mc_k_bin(kb, MC_KB_GT, v,
			                                         fconst(kb, f64, len - 1)),
			                                fconst(kb, f64, len - 1), v));
			v = mc_kb_let(kb, mc_k_select(kb, out, cl, v));
		} else if (p->pad == GS_REFLECTION) {
			v = mc_kb_let(kb, gs_reflect_ir(kb, v, lo[d], hi[d]));
		}
		mc_kexpr *isn = mc_k_un(kb, MC_KU_ISNAN, v);
		nan = nan ? mc_k_bin(kb, MC_KB_OR, nan, isn) : isn;
		/* far outside is as good as just outside, and converts safely */
		v = mc_kb_let(kb, mc_k_select(kb, mc_k_bin(kb, MC_KB_LT, v, fconst(kb, f64, -1e12)),
		                              fconst(kb, f64, -1e12),
		                              mc_k_select(kb,
		                                          mc_k_bin(kb, MC_KB_GT, v,
		                                                   fconst(kb, f64, 1e12)),
		                                          fconst(kb, f64, 1e12), v)));
		if (p->mode == GS_NEAREST) {
			base[d] = mc_kb_let(kb, mc_k_cast(kb, MC_KT_INDEX, v));
			w[d][0] = fconst(kb, f64, 1);
			continue;
		}
		mc_kexpr *fl = mc_kb_let(kb, mc_k_un(kb, MC_KU_FLOOR, v));
		mc_kexpr *t = mc_kb_let(kb, mc_k_sub(kb, v, fl));
		base[d] = mc_kb_let(kb, mc_k_addi(kb, mc_k_cast(kb, MC_KT_INDEX, fl),
		                                  p->mode == GS_CUBIC ? -1 : 0));
		for (int k = 0; k < taps; k++)
			w[d][k] = mc_kb_let(kb,
			                    p->mode == GS_LINEAR
			                            ? (k ? t : mc_k_sub(kb, fconst(kb, f64, 1), t))
			                            : gs_cubic_ir(kb, t, k));
	}
	nan = mc_kb_let(kb, nan);
	/* per tap combination: weight, offset in the plane, validity */
	mc_kexpr **cw = mc_kpool_alloc(kb->pool, sizeof *cw * (size_t)combos);
	mc_kexpr **coff = mc_kpool_alloc(kb->pool, sizeof *coff * (size_t)combos);
	mc_kexpr **cvalid = mc_kpool_alloc(kb->pool, sizeof *cvalid * (size_t)combos);
	mc_kexpr *idx[MC_MAX_RANK][4], *valid[MC_MAX_RANK][4];
	for (int d = 0; d < r; d++)
		for (int k = 0; k < taps; k++)
			idx[d][k] = gs_index_ir(kb, p, mc_k_addi(kb, base[d], k), dims[d], lo[d],
			                        hi[d], &valid[d][k]);
	for (int64_t k = 0; k < combos; k++) {
		mc_kexpr *weight = NULL, *off = mc_k_index(kb, 0), *ok = NULL;
		int64_t kk = k;
		for (int d = r - 1; d >= 0; d--) {
			int tap = (int)(kk % taps);
			kk /= taps;
			weight = weight ? mc_k_mul(kb, weight, w[d][tap]) : w[d][tap];
			off = mc_k_add(kb, off, mc_k_muli(kb, idx[d][tap], sp_stride[d]));
			if (valid[d][tap])
				ok = ok ? mc_k_bin(kb, MC_KB_AND, ok, valid[d][tap])
				        : valid[d][tap];
		}
		cw[k] = mc_kb_let(kb, mc_k_cast(kb, kt, weight));
		coff[k] = mc_kb_let(kb, off);
		cvalid[k] = ok ? mc_kb_let(kb, ok) : NULL;
	}
	mc_kexpr *cc = mc_kb_fori(kb, ch, 0);
	mc_kexpr *plane = mc_kb_let(kb, mc_k_muli(kb, mad(kb, b, ch, cc), in_sp));
	mc_kexpr *acc = mc_kb_local(kb, fconst(kb, kt, 0));
	for (int64_t k = 0; k < combos; k++) {
		mc_kexpr *term =
		        mc_k_mul(kb, cw[k], mc_lower_load(c, 0, mc_k_add(kb, plane, coff[k])));
		if (cvalid[k])
			term = mc_k_select(kb, cvalid[k], term, fconst(kb, kt, 0));
		mc_kb_assign(kb, acc, mc_k_add(kb, acc, term));
	}
	mc_kexpr *yi = mad(kb, mad(kb, b, ch, cc), out_sp, o);
	mc_lower_store(c, 0, NULL, yi, mc_k_select(kb, nan, fconst(kb, kt, NAN), acc));
	mc_kb_end_n(kb, 3);
	return 0;
}

/* ---- RoiAlign ---- */

/* Bilinear sample of one plane at (yy, xx) with ONNX Runtime's border
 * rules (extra.c: roi_sample), into the local v; 0 outside. */
static void roi_sample_ir(mc_lower_ctx *c, mc_kexpr *v, mc_kexpr *plane, int64_t h, int64_t w,
                          mc_kexpr *yy, mc_kexpr *xx, bool max_mode)
{
	mc_kb *kb = c->kb;
	mc_ktype f64 = MC_KT_F64, kt = v->type;
	mc_kexpr *out =
	        mc_k_bin(kb, MC_KB_OR,
	                 mc_k_bin(kb, MC_KB_OR, mc_k_bin(kb, MC_KB_LT, yy, fconst(kb, f64, -1)),
	                          mc_k_bin(kb, MC_KB_GT, yy, fconst(kb, f64, (double)h))),
	                 mc_k_bin(kb, MC_KB_OR, mc_k_bin(kb, MC_KB_LT, xx, fconst(kb, f64, -1)),
	                          mc_k_bin(kb, MC_KB_GT, xx, fconst(kb, f64, (double)w))));
	mc_kb_if(kb, out);
	mc_kb_assign(kb, v, fconst(kb, kt, 0));
	mc_kb_else(kb);
	mc_kexpr *lo[2], *hi[2], *frac[2], *pt[2] = {yy, xx};
	int64_t len[2] = {h, w};
	for (int a = 0; a < 2; a++) {
		mc_kexpr *q = mc_kb_let(kb, mc_k_bin(kb, MC_KB_MAX, pt[a], fconst(kb, f64, 0)));
		mc_kexpr *q0 = mc_kb_let(kb, mc_k_cast(kb, MC_KT_INDEX, q));
		mc_kexpr *edge =
		        mc_kb_let(kb, mc_k_bin(kb, MC_KB_GE, q0, mc_k_index(kb, len[a] - 1)));
		lo[a] = mc_kb_let(kb, mc_k_select(kb, edge, mc_k_index(kb, len[a] - 1), q0));
		hi[a] = mc_kb_let(kb, mc_k_select(kb, edge, mc_k_index(kb, len[a] - 1),
		                                  mc_k_addi(kb, q0, 1)));
		mc_kexpr *qq = mc_k_select(kb, edge, fconst(kb, f64, (double)(len[a] - 1)), q);
		frac[a] = mc_kb_let(kb, mc_k_sub(kb, qq, mc_k_cast(kb, f64, lo[a])));
	}
	mc_kexpr *ly = frac[0], *lx = frac[1];
	mc_kexpr *hy = mc_kb_let(kb, mc_k_sub(kb, fconst(kb, f64, 1), ly));
	mc_kexpr *hx = mc_kb_let(kb, mc_k_sub(kb, fconst(kb, f64, 1), lx));
	mc_kexpr *wt[4] = {mc_k_mul(kb, hy, hx), mc_k_mul(kb, hy, lx), mc_k_mul(kb, ly, hx),
	                   mc_k_mul(kb, ly, lx)};
	mc_kexpr *ys[4] = {lo[0], lo[0], hi[0], hi[0]}, *xs[4] = {lo[1], hi[1], lo[1], hi[1]};
	mc_kexpr *val[4];
	for (int k = 0; k < 4; k++) {
		mc_kexpr *at = mc_k_add(kb, plane, mad(kb, ys[k], w, xs[k]));
		val[k] = mc_kb_let(kb,
		                   mc_k_mul(kb, mc_k_cast(kb, kt, wt[k]), mc_lower_load(c, 0, at)));
	}
	if (max_mode)
		mc_kb_assign(kb, v, mc_k_bin(kb, MC_KB_MAX, mc_k_bin(kb, MC_KB_MAX, val[0], val[1]),
		                             mc_k_bin(kb, MC_KB_MAX, val[2], val[3])));
	else
		mc_kb_assign(kb, v,
		             mc_k_add(kb, mc_k_add(kb, mc_k_add(kb, val[0], val[1]), val[2]),
		                      val[3]));
	mc_kb_end(kb);
}

static int lower_roi_align(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const roi_params *p = c->node->params;
	const mc_shape *xs = &c->in[0]->shape;
	int64_t nb = xs->dims[0], ch = xs->dims[1], h = xs->dims[2], w = xs->dims[3];
	int64_t nr = c->in[1]->shape.dims[0];
	mc_ktype kt = mc_ktype_of(c->in[0]->dtype), f64 = MC_KT_F64;
	double off = p->half_pixel ? 0.5 : 0.0;
	if (h == 0 || w == 0) { /* nothing to sample: zeros */
		mc_kexpr *i = mc_kb_fori(kb, (int64_t)mc_numel(&c->out[0]->shape), MC_KF_PARALLEL);
		mc_lower_store(c, 0, NULL, i, fconst(kb, kt, 0));
		mc_kb_end(kb);
		return 0;
	}
	mc_kexpr *r = mc_kb_fori(kb, nr, 0);
	mc_kexpr *bi = mc_kb_let(kb, mc_k_cast(kb, MC_KT_I64, mc_lower_load(c, 2, r)));
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_OR, mc_k_bin(kb, MC_KB_LT, bi, mc_k_int(kb, MC_KT_I64, 0)),
	                      mc_k_bin(kb, MC_KB_GE, bi, mc_k_int(kb, MC_KT_I64, nb))));
	mc_kb_fail(kb, MC_STATUS_BAD_INDEX);
	mc_kb_end(kb);
	mc_kexpr *b = mc_kb_let(kb, mc_k_cast(kb, MC_KT_INDEX, bi));
	mc_kexpr *box[4], *bad = NULL;
	for (int k = 0; k < 4; k++) {
		mc_kexpr *v = mc_k_cast(kb, f64,
		                        mc_lower_load(c, 1, mc_k_addi(kb, mc_k_muli(kb, r, 4), k)));
		box[k] = mc_kb_let(kb,
		                   mc_k_sub(kb, mc_k_mul(kb, v, fconst(kb, f64, p->spatial_scale)),
		                            fconst(kb, f64, off)));
		/* NaN fails the comparison: also bad */
		mc_kexpr *b_k = mc_k_un(kb, MC_KU_NOT,
		                        mc_k_bin(kb, MC_KB_LE, mc_k_un(kb, MC_KU_ABS, box[k]),
		                                 fconst(kb, f64, 1e12)));
		bad = bad ? mc_k_bin(kb, MC_KB_OR, bad, b_k) : b_k;
	}
	mc_kb_if(kb, bad);
	mc_kb_fail(kb, MC_STATUS_BAD_INPUT);
	mc_kb_end(kb);
	mc_kexpr *rw = mc_k_sub(kb, box[2], box[0]), *rh = mc_k_sub(kb, box[3], box[1]);
	if (!p->half_pixel) { /* malformed ROIs are forced to 1x1 */
		rw = mc_k_bin(kb, MC_KB_MAX, rw, fconst(kb, f64, 1));
		rh = mc_k_bin(kb, MC_KB_MAX, rh, fconst(kb, f64, 1));
	}
	mc_kexpr *bh = mc_kb_let(kb, mc_k_div(kb, rh, fconst(kb, f64, (double)p->out_h)));
	mc_kexpr *bw = mc_kb_let(kb, mc_k_div(kb, rw, fconst(kb, f64, (double)p->out_w)));
	mc_kexpr *gh, *gw;
	if (p->sampling_ratio > 0) {
		gh = gw = fconst(kb, f64, (double)p->sampling_ratio);
	} else {
		gh = mc_kb_let(kb, mc_k_un(kb, MC_KU_CEIL, bh));
		gw = mc_kb_let(kb, mc_k_un(kb, MC_KU_CEIL, bw));
		mc_kb_if(kb,
		         mc_k_bin(kb, MC_KB_OR, mc_k_bin(kb, MC_KB_GT, gh, fconst(kb, f64, 65536)),
		                  mc_k_bin(kb, MC_KB_GT, gw, fconst(kb, f64, 65536))));
		mc_kb_fail(kb, MC_STATUS_BAD_INPUT);
		mc_kb_end(kb);
	}
	mc_kexpr *grid_h =
	        mc_kb_let(kb, mc_k_select(kb, mc_k_bin(kb, MC_KB_GT, gh, fconst(kb, f64, 0)),
	                                  mc_k_cast(kb, MC_KT_INDEX, gh), mc_k_index(kb, 0)));
	mc_kexpr *grid_w =
	        mc_kb_let(kb, mc_k_select(kb, mc_k_bin(kb, MC_KB_GT, gw, fconst(kb, f64, 0)),
	                                  mc_k_cast(kb, MC_KT_INDEX, gw), mc_k_index(kb, 0)));
	mc_kexpr *n_samples = mc_k_mul(kb, grid_h, grid_w);
	mc_kexpr *count = mc_kb_let(kb, mc_k_cast(kb, kt,
	                                          mc_k_select(kb,
	                                                      mc_k_bin(kb, MC_KB_GT, n_samples,
	                                                               mc_k_index(kb, 1)),
	                                                      n_samples, mc_k_index(kb, 1))));
	mc_kexpr *fgh = mc_kb_let(kb, mc_k_cast(kb, f64, grid_h)),
	         *fgw = mc_kb_let(kb, mc_k_cast(kb, f64, grid_w));
	mc_kexpr *cc = mc_kb_fori(kb, ch, 0);
	mc_kexpr *plane = mc_kb_let(kb, mc_k_muli(kb, mad(kb, b, ch, cc), h * w));
	mc_kexpr *ph = mc_kb_fori(kb, p->out_h, 0);
	mc_kexpr *pw = mc_kb_fori(kb, p->out_w, 0);
	mc_kexpr *acc = mc_kb_local(kb, fconst(kb, kt, 0));
	mc_kexpr *first = mc_kb_local(kb, mc_k_int(kb, MC_KT_BOOL, 1));
	mc_kexpr *iy = mc_kb_for(kb, mc_k_index(kb, 0), grid_h, 0);
	mc_kexpr *half = fconst(kb, f64, 0.5);
	mc_kexpr *yy =
	        mc_k_add(kb, mc_k_add(kb, box[1], mc_k_mul(kb, mc_k_cast(kb, f64, ph), bh)),
	                 mc_k_div(kb, mc_k_mul(kb, mc_k_add(kb, mc_k_cast(kb, f64, iy), half), bh),
	                          fgh));
	yy = mc_kb_let(kb, yy);
	mc_kexpr *ix = mc_kb_for(kb, mc_k_index(kb, 0), grid_w, 0);
	mc_kexpr *xx =
	        mc_k_add(kb, mc_k_add(kb, box[0], mc_k_mul(kb, mc_k_cast(kb, f64, pw), bw)),
	                 mc_k_div(kb, mc_k_mul(kb, mc_k_add(kb, mc_k_cast(kb, f64, ix), half), bw),
	                          fgw));
	xx = mc_kb_let(kb, xx);
	mc_kexpr *v = mc_kb_local(kb, fconst(kb, kt, 0));
	roi_sample_ir(c, v, plane, h, w, yy, xx, p->max_mode);
	if (p->max_mode) {
		mc_kb_if(kb, mc_k_bin(kb, MC_KB_OR, first, mc_k_bin(kb, MC_KB_GT, v, acc)));
		mc_kb_assign(kb, acc, v);
		mc_kb_end(kb);
		mc_kb_assign(kb, first, mc_k_int(kb, MC_KT_BOOL, 0));
	} else {
		mc_kb_assign(kb, acc, mc_k_add(kb, acc, v));
	}
	mc_kb_end_n(kb, 2);
	mc_kexpr *yi = mad(kb, mad(kb, mad(kb, r, ch, cc), p->out_h, ph), p->out_w, pw);
	mc_lower_store(c, 0, NULL, yi, p->max_mode ? acc : mc_k_div(kb, acc, count));
	mc_kb_end_n(kb, 4);
	return 0;
}

/* ---- Attention (opset 23, 24) ---- */

enum { AT_Q, AT_K, AT_V, AT_MASK, AT_PAST_K, AT_PAST_V, AT_NONPAD };
enum { AT_Y, AT_PRESENT_K, AT_PRESENT_V, AT_QK };

/* Sizes as extra.c's attn_geom; Q, K, V seen as [B, heads, seq, head]. */
typedef struct {
	mc_lower_ctx *c;
	const attn_params *p;
	mc_ktype kt;
	bool is_3d;
	int64_t b, hq, hkv, sq, skv, past, total, d, dv, mask_len;
	mc_shape mask_target;
} attn_low;

/* Offset of element 0 of row s (a token) of K or V (width w) for batch b,
 * kv head hk: the past part (s < past) or the current input. */
static mc_kexpr *attn_kv_row(const attn_low *a, bool past, mc_kexpr *b, mc_kexpr *hk,
                             mc_kexpr *s, int64_t w)
{
	mc_kb *kb = a->c->kb;
	if (past)
		return mc_k_muli(kb, mad(kb, mad(kb, b, a->hkv, hk), a->past, s), w);
	if (a->is_3d)
		return mc_k_muli(kb, mad(kb, mad(kb, b, a->skv, s), a->hkv, hk), w);
	return mc_k_muli(kb, mad(kb, mad(kb, b, a->hkv, hk), a->skv, s), w);
}

/* Copies K or V with the past in front into present_key / present_value. */
static void attn_present(const attn_low *a, int out, int past_in, int cur_in, int64_t w)
{
	mc_lower_ctx *c = a->c;
	mc_kb *kb = c->kb;
	if (!opt_out(c, out))
		return;
	mc_kexpr *b = mc_kb_fori(kb, a->b, MC_KF_PARALLEL);
	mc_kexpr *hk = mc_kb_fori(kb, a->hkv, 0);
	for (int part = a->past ? 0 : 1; part < 2; part++) {
		bool past = part == 0;
		mc_kexpr *t = mc_kb_fori(kb, past ? a->past : a->skv, 0);
		mc_kexpr *src = mc_kb_let(kb, attn_kv_row(a, past, b, hk, t, w));
		mc_kexpr *tt = past ? t : mc_k_addi(kb, t, a->past);
		mc_kexpr *dst =
		        mc_kb_let(kb,
		                  mc_k_muli(kb, mad(kb, mad(kb, b, a->hkv, hk), a->total, tt), w));
		mc_kexpr *e = mc_kb_fori(kb, w, MC_KF_VECTOR);
		mc_kb_store(kb, c->out_buf[out], mc_k_add(kb, dst, e),
		            mc_lower_load(c, past ? past_in : cur_in, mc_k_add(kb, src, e)));
		mc_kb_end_n(kb, 2);
	}
	mc_kb_end_n(kb, 2);
}

/* Additive bias of query i, key j (extra.c: attn_bias): attn_mask (bool:
 * false masks; keys past its length are masked), the causal frontier,
 * nonpad_kv_seqlen padding. NULL when nothing applies. */
static mc_kexpr *attn_bias_ir(const attn_low *a, mc_kexpr *b, mc_kexpr *h, mc_kexpr *i,
                              mc_kexpr *j, mc_kexpr *nonpad)
{
	mc_lower_ctx *c = a->c;
	mc_kb *kb = c->kb;
	mc_kexpr *ninf = fconst(kb, a->kt, -INFINITY), *bias = NULL;
	const mc_value *mask = opt_in(c, AT_MASK);
	if (mask) {
		if (a->mask_len == 0) {
			bias = ninf;
		} else {
			mc_kexpr *coords[4] = {b, h, i,
			                       mc_k_bin(kb, MC_KB_MIN, j,
			                                mc_k_index(kb, a->mask_len - 1))};
			mc_kexpr *mv = mc_lower_load(c, AT_MASK,
			                             mc_lower_bcast(kb, &mask->shape,
			                                            &a->mask_target, coords));
			mv = mask->dtype == MC_BOOL
			             ? mc_k_select(kb, mv, fconst(kb, a->kt, 0), ninf)
			             : mc_k_cast(kb, a->kt, mv);
			bias = mc_k_select(kb,
			                   mc_k_bin(kb, MC_KB_LT, j, mc_k_index(kb, a->mask_len)),
			                   mv, ninf);
		}
	}
	mc_kexpr *masked = NULL;
	if (a->p->causal) {
		/* bottom-right aligned: the keys before this query block are the
		 * past, or (static cache) the valid keys minus the queries */
		mc_kexpr *offset = mc_k_index(kb, a->past);
		if (!a->past && nonpad)
			offset = mc_k_addi(kb, nonpad, -a->sq);
		masked = mc_k_bin(kb, MC_KB_GT, j, mc_k_add(kb, i, offset));
	}
	if (nonpad) {
		mc_kexpr *pad = mc_k_bin(kb, MC_KB_GE, j, nonpad);
		masked = masked ? mc_k_bin(kb, MC_KB_OR, masked, pad) : pad;
	}
	if (masked)
		bias = mc_k_select(kb, masked, ninf, bias ? bias : fconst(kb, a->kt, 0));
	return bias;
}

/* Input i or output k of node n, NULL when omitted. */
static const mc_value *node_in(const mc_graph *g, const mc_node *n, int i)
{
	return i < n->n_inputs && n->inputs[i] >= 0 ? &g->values[n->inputs[i]] : NULL;
}

static const mc_value *node_out(const mc_graph *g, const mc_node *n, int k)
{
	return k < n->n_outputs && n->outputs[k] >= 0 ? &g->values[n->outputs[k]] : NULL;
}

/* Q, K and V's sizes, seen as [b, heads, rows, head size] (a 3-D one's
 * heads from q_num_heads and kv_num_heads), and the scale; no mask.
 * False where a 3-D Attention lacks its head counts. */
static bool attn_sizes(const attn_params *p, const mc_shape *qs, const mc_shape *ks, const mc_shape *vs,
                       mc_attn_sizes *a)
{
	*a = (mc_attn_sizes){ .is_3d = qs->rank == 3, .b = qs->dims[0], .mask_in = -1 };
	if (a->is_3d) {
		if (p->q_heads <= 0 || p->kv_heads <= 0)
			return false;
		a->hq = p->q_heads, a->hkv = p->kv_heads;
		a->sq = qs->dims[1], a->skv = ks->dims[1];
		a->d = qs->dims[2] / a->hq, a->dv = vs->dims[2] / a->hkv;
	} else {
		a->hq = qs->dims[1], a->sq = qs->dims[2], a->d = qs->dims[3];
		a->hkv = ks->dims[1], a->skv = ks->dims[2], a->dv = vs->dims[3];
	}
	a->scale = p->has_scale ? p->scale : 1.0 / sqrt((double)a->d);
	return true;
}

bool mc_attention_one_kernel(const mc_graph *g, const mc_node *n, mc_attn_sizes *s)
{
	const attn_params *p = n->params;
	const mc_value *q = node_in(g, n, AT_Q), *k = node_in(g, n, AT_K), *v = node_in(g, n, AT_V);
	const mc_value *mask = node_in(g, n, AT_MASK), *y = node_out(g, n, AT_Y);
	if (n->id != MC_OP_Attention || !p || !mc_is_f32(q) || !mc_is_f32(k) || !mc_is_f32(v) || !mc_is_f32(y) ||
	    (mask && !mc_is_f32(mask)) || node_out(g, n, AT_PRESENT_K) || node_out(g, n, AT_PRESENT_V) ||
	    node_out(g, n, AT_QK) || node_in(g, n, AT_PAST_K) || node_in(g, n, AT_PAST_V) ||
	    node_in(g, n, AT_NONPAD) || p->causal || p->softcap > 0)
		return false;
	const mc_shape *qs = &q->shape, *ks = &k->shape, *vs = &v->shape;
	mc_attn_sizes a;
	if ((qs->rank != 3 && qs->rank != 4) || ks->rank != qs->rank || vs->rank != qs->rank ||
	    !attn_sizes(p, qs, ks, vs, &a))
		return false;
	a.mask_in = mask ? AT_MASK : -1;
	if (a.b < 1 || a.hq < 1 || a.hkv < 1 || a.hq % a.hkv || a.sq < 1 || a.skv < 1 || a.d < 1 || a.dv < 1 ||
	    a.d > MC_ATTN_MAX_HEAD || a.dv > MC_ATTN_MAX_HEAD ||
	    (mask && mask->shape.dims[mask->shape.rank - 1] != a.skv))
		return false;
	const mc_value *all[5] = { q, k, v, y, mask };
	for (int i = 0; i < 5; i++)
		if (all[i] && (int64_t)mc_numel(&all[i]->shape) >= INT32_MAX)
			return false;
	if (s)
		*s = a;
	return true;
}

static int lower_attention(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const attn_params *p = c->node->params;
	const mc_shape *qs = &c->in[AT_Q]->shape, *ks = &c->in[AT_K]->shape,
	               *vs = &c->in[AT_V]->shape;
	mc_attn_sizes sz;
	if (!attn_sizes(p, qs, ks, vs, &sz))
		return mc_lower_error(c, "3-D Attention needs q_num_heads and kv_num_heads");
	attn_low a = { .c = c, .p = p, .kt = mc_ktype_of(c->in[AT_Q]->dtype), .is_3d = sz.is_3d, .b = sz.b,
	               .hq = sz.hq, .hkv = sz.hkv, .sq = sz.sq, .skv = sz.skv, .d = sz.d, .dv = sz.dv };
	const mc_value *past_k = opt_in(c, AT_PAST_K), *mask = opt_in(c, AT_MASK);
	a.past = past_k ? past_k->shape.dims[2] : 0;
	a.total = a.past + a.skv;
	if (mask) {
		a.mask_len = mask->shape.dims[mask->shape.rank - 1];
		a.mask_target = (mc_shape){4, {a.b, a.hq, a.sq, a.mask_len}};
	}
	if (a.hkv <= 0 || a.hq % a.hkv)
		return mc_lower_error(c, "Attention heads %lld / %lld do not group",
		                      (long long)a.hq, (long long)a.hkv);
	int64_t group = a.hq / a.hkv;
	double scale = sz.scale;
	mc_ktype kt = a.kt;
	bool want_y = opt_out(c, AT_Y) != NULL, want_qk = opt_out(c, AT_QK) != NULL;
	mc_attn_sizes one;
	if (kb->target->grid && mc_attention_one_kernel(c->g, c->node, &one))
		return mc_kern_attention_cuda(c, &one);
	attn_present(&a, AT_PRESENT_K, AT_PAST_K, AT_K, a.d);
	attn_present(&a, AT_PRESENT_V, AT_PAST_V, AT_V, a.dv);
	if (!want_y && !want_qk)
		return 0;
	int row = mc_kb_scratch(kb, scratch_dtype(kt), (size_t)(a.total ? a.total : 1));
	mc_kexpr *b = mc_kb_fori(kb, a.b, MC_KF_PARALLEL);
	mc_kexpr *nonpad = NULL;
	if (opt_in(c, AT_NONPAD))
		nonpad = mc_kb_let(kb, mc_k_cast(kb, MC_KT_INDEX, mc_lower_load(c, AT_NONPAD, b)));
	mc_kexpr *h = mc_kb_fori(kb, a.hq, 0);
	mc_kexpr *hk = mc_kb_let(kb, mc_k_div(kb, h, mc_k_index(kb, group)));
	mc_kexpr *i = mc_kb_fori(kb, a.sq, 0);
	mc_kexpr *q0 = a.is_3d ? mc_k_muli(kb, mad(kb, mad(kb, b, a.sq, i), a.hq, h), a.d)
	                       : mc_k_muli(kb, mad(kb, mad(kb, b, a.hq, h), a.sq, i), a.d);
	q0 = mc_kb_let(kb, q0);
	mc_kexpr *qk0 =
	        mc_kb_let(kb, mc_k_muli(kb, mad(kb, mad(kb, b, a.hq, h), a.sq, i), a.total));
	mc_kexpr *mx = mc_kb_local(kb, fconst(kb, kt, -INFINITY));
	/* scores: scaled Q.K, softcap, bias */
	for (int part = a.past ? 0 : 1; part < 2; part++) {
		bool past = part == 0;
		mc_kexpr *s = mc_kb_fori(kb, past ? a.past : a.skv, 0);
		mc_kexpr *j = mc_kb_let(kb, past ? s : mc_k_addi(kb, s, a.past));
		mc_kexpr *k0 = mc_kb_let(kb, attn_kv_row(&a, past, b, hk, s, a.d));
		mc_kexpr *dot = mc_kb_local(kb, fconst(kb, kt, 0));
		dot_into(kb, dot, c->in_buf[AT_Q], q0, c->in_buf[past ? AT_PAST_K : AT_K], k0, a.d);
		mc_kexpr *raw = mc_kb_let(kb, mc_k_mul(kb, dot, fconst(kb, kt, scale)));
		mc_kexpr *capped = raw;
		if (p->softcap > 0)
			capped = mc_kb_let(kb,
			                   mc_k_mul(kb, fconst(kb, kt, p->softcap),
			                            mc_k_un(kb, MC_KU_TANH,
			                                    mc_k_div(kb, raw,
			                                             fconst(kb, kt, p->softcap)))));
		mc_kexpr *bias = attn_bias_ir(&a, b, h, i, j, nonpad);
		mc_kexpr *biased = mc_kb_let(kb, bias ? mc_k_add(kb, capped, bias) : capped);
		mc_kb_store(kb, row, j, biased);
		if (want_qk && p->qk_mode < 3)
			mc_kb_store(kb, c->out_buf[AT_QK], mc_k_add(kb, qk0, j),
			            p->qk_mode == 0 ? raw : p->qk_mode == 1 ? capped : biased);
		mc_kb_assign(kb, mx,
		             mc_k_select(kb, mc_k_bin(kb, MC_KB_GT, biased, mx), biased, mx));
		mc_kb_end(kb);
	}
	/* softmax; a row with every key masked gives zeros, not NaN */
	mc_kexpr *all_masked = mc_kb_let(kb, mc_k_bin(kb, MC_KB_EQ, mx, fconst(kb, kt, -INFINITY)));
	mc_kexpr *sum = mc_kb_local(kb, fconst(kb, kt, 0));
	mc_kexpr *j = mc_kb_fori(kb, a.total, 0);
	mc_kexpr *e = mc_kb_let(kb, mc_k_select(kb, all_masked, fconst(kb, kt, 0),
	                                        mc_k_un(kb, MC_KU_EXP,
	                                                mc_k_sub(kb, mc_k_load(kb, row, j), mx))));
	mc_kb_store(kb, row, j, e);
	mc_kb_assign(kb, sum, mc_k_add(kb, sum, e));
	mc_kb_end(kb);
	j = mc_kb_fori(kb, a.total, 0);
	mc_kexpr *prob =
	        mc_kb_let(kb,
	                  mc_k_select(kb, mc_k_bin(kb, MC_KB_GT, sum, fconst(kb, kt, 0)),
	                              mc_k_div(kb, mc_k_load(kb, row, j), sum), fconst(kb, kt, 0)));
	mc_kb_store(kb, row, j, prob);
	if (want_qk && p->qk_mode == 3)
		mc_kb_store(kb, c->out_buf[AT_QK], mc_k_add(kb, qk0, j), prob);
	mc_kb_end(kb);
	if (want_y) {
		mc_kexpr *y0 = a.is_3d ? mc_k_muli(kb, mad(kb, mad(kb, b, a.sq, i), a.hq, h), a.dv)
		                       : mc_k_muli(kb, mad(kb, mad(kb, b, a.hq, h), a.sq, i), a.dv);
		y0 = mc_kb_let(kb, y0);
		mc_kexpr *dd = mc_kb_fori(kb, a.dv, 0);
		mc_kexpr *acc = mc_kb_local(kb, fconst(kb, kt, 0));
		for (int part = a.past ? 0 : 1; part < 2; part++) {
			bool past = part == 0;
			mc_kexpr *s = mc_kb_fori(kb, past ? a.past : a.skv, MC_KF_REDUCE);
			mc_kexpr *pj =
			        mc_kb_let(kb,
			                  mc_k_load(kb, row, past ? s : mc_k_addi(kb, s, a.past)));
			mc_kexpr *v =
			        mc_lower_load(c, past ? AT_PAST_V : AT_V,
			                      mc_k_add(kb, attn_kv_row(&a, past, b, hk, s, a.dv),
			                               dd));
			/* masked keys never contribute, even NaN or inf values */
			mc_kexpr *term =
			        mc_k_select(kb, mc_k_bin(kb, MC_KB_NE, pj, fconst(kb, kt, 0)),
			                    mc_k_mul(kb, pj, mc_k_cast(kb, kt, v)),
			                    fconst(kb, kt, 0));
			mc_kb_assign(kb, acc, mc_k_add(kb, acc, term));
			mc_kb_end(kb);
		}
		mc_lower_store(c, AT_Y, NULL, mc_k_add(kb, y0, dd), acc);
		mc_kb_end(kb);
	}
	mc_kb_end_n(kb, 3);
	return 0;
}

/* ---- NonMaxSuppression on values known at run time ----
 * Output 0 is counted (libcore/counted.c): the selected rows from row 0,
 * then zero rows to its bound; output 1 (the importer's) the count. Per
 * batch and class, the best live candidate is kept and every live one
 * that overlaps it too much dies, until cap boxes are kept or none lives:
 * the same boxes, in the same order, as the reference's sort by score
 * (ties by index) and greedy pass over it (libcore/ops/extra.c), since a
 * box dies there exactly when a better kept one overlaps it. In double,
 * as the reference computes. */

/* Box `at` (element index into boxes) as (y_min, x_min, y_max, x_max). */
static void nms_corners_ir(mc_lower_ctx *c, mc_kexpr *at, bool center, mc_kexpr **out)
{
	mc_kb *kb = c->kb;
	mc_kexpr *v[4];
	for (int k = 0; k < 4; k++)
		v[k] = mc_kb_let(kb, mc_k_cast(kb, MC_KT_F64, mc_lower_load(c, 0, mc_k_addi(kb, at, k))));
	if (center) { /* [x_center, y_center, width, height] */
		mc_kexpr *hh = mc_kb_let(kb, mc_k_div(kb, v[3], fconst(kb, MC_KT_F64, 2)));
		mc_kexpr *hw = mc_kb_let(kb, mc_k_div(kb, v[2], fconst(kb, MC_KT_F64, 2)));
		out[0] = mc_kb_let(kb, mc_k_sub(kb, v[1], hh));
		out[2] = mc_kb_let(kb, mc_k_add(kb, v[1], hh));
		out[1] = mc_kb_let(kb, mc_k_sub(kb, v[0], hw));
		out[3] = mc_kb_let(kb, mc_k_add(kb, v[0], hw));
		return;
	}
	for (int k = 0; k < 2; k++) { /* either diagonal */
		out[k] = mc_kb_let(kb, mc_k_bin(kb, MC_KB_MIN, v[k], v[k + 2]));
		out[k + 2] = mc_kb_let(kb, mc_k_bin(kb, MC_KB_MAX, v[k], v[k + 2]));
	}
}

/* Whether boxes a and b overlap by more than iou (extra.c: nms_suppress). */
static mc_kexpr *nms_overlap_ir(mc_kb *kb, mc_kexpr *const *a, mc_kexpr *const *b, mc_kexpr *iou)
{
	mc_kexpr *zero = fconst(kb, MC_KT_F64, 0);
	mc_kexpr *ih = mc_kb_let(kb, mc_k_sub(kb, mc_k_bin(kb, MC_KB_MIN, a[2], b[2]),
	                                      mc_k_bin(kb, MC_KB_MAX, a[0], b[0])));
	mc_kexpr *iw = mc_kb_let(kb, mc_k_sub(kb, mc_k_bin(kb, MC_KB_MIN, a[3], b[3]),
	                                      mc_k_bin(kb, MC_KB_MAX, a[1], b[1])));
	mc_kexpr *inter = mc_kb_let(kb, mc_k_mul(kb, ih, iw));
	mc_kexpr *area_a = mc_kb_let(kb, mc_k_mul(kb, mc_k_sub(kb, a[2], a[0]), mc_k_sub(kb, a[3], a[1])));
	mc_kexpr *area_b = mc_kb_let(kb, mc_k_mul(kb, mc_k_sub(kb, b[2], b[0]), mc_k_sub(kb, b[3], b[1])));
	mc_kexpr *uni = mc_kb_let(kb, mc_k_sub(kb, mc_k_add(kb, area_a, area_b), inter));
	mc_kexpr *ok = mc_k_bin(kb, MC_KB_AND, mc_k_bin(kb, MC_KB_GT, ih, zero), mc_k_bin(kb, MC_KB_GT, iw, zero));
	ok = mc_k_bin(kb, MC_KB_AND, ok, mc_k_bin(kb, MC_KB_GT, area_a, zero));
	ok = mc_k_bin(kb, MC_KB_AND, ok, mc_k_bin(kb, MC_KB_GT, area_b, zero));
	ok = mc_k_bin(kb, MC_KB_AND, ok, mc_k_bin(kb, MC_KB_GT, uni, zero));
	return mc_k_bin(kb, MC_KB_AND, ok, mc_k_bin(kb, MC_KB_GT, mc_k_div(kb, inter, uni), iou));
}

static int lower_nms(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *bs = &c->in[0]->shape, *ss = &c->in[1]->shape;
	if (!c->out[0]->counted)
		return mc_lower_error(c, "NonMaxSuppression without its count (made by the importer)");
	int64_t center;
	if (mc_attr_int(c->node, "center_point_box", 0, &center))
		return -1;
	int64_t nb = bs->dims[0], nbox = bs->dims[1], ncls = ss->dims[1];
	int64_t bound = c->out[0]->shape.dims[0];
	mc_kexpr *zero = mc_k_index(kb, 0);
	/* the run-time parameters; absent: no box kept, no overlap, no floor */
	mc_kexpr *cap = zero, *iou = fconst(kb, MC_KT_F64, 0), *thr = NULL;
	if (c->n_in > 2 && c->in[2] && mc_numel(&c->in[2]->shape) > 0) {
		/* clamped in 64 bits, then an index (torchvision gives INT64_MAX) */
		mc_kexpr *m = mc_k_cast(kb, MC_KT_I64, mc_lower_load(c, 2, zero));
		m = mc_k_bin(kb, MC_KB_MAX, mc_k_int(kb, MC_KT_I64, 0),
		             mc_k_bin(kb, MC_KB_MIN, m, mc_k_int(kb, MC_KT_I64, nbox)));
		cap = mc_kb_let(kb, mc_k_cast(kb, MC_KT_INDEX, m));
	}
	if (c->n_in > 3 && c->in[3] && mc_numel(&c->in[3]->shape) > 0)
		iou = mc_kb_let(kb, mc_k_cast(kb, MC_KT_F64, mc_lower_load(c, 3, zero)));
	if (c->n_in > 4 && c->in[4] && mc_numel(&c->in[4]->shape) > 0)
		thr = mc_kb_let(kb, mc_k_cast(kb, MC_KT_F64, mc_lower_load(c, 4, zero)));
	int alive = mc_kb_scratch(kb, MC_BOOL, (size_t)(nbox > 0 ? nbox : 1));
	/* each box's corners, once a batch: every pick compares them all */
	int corner = mc_kb_scratch(kb, MC_DOUBLE, (size_t)(nbox > 0 ? 4 * nbox : 1));
	mc_kexpr *t = mc_k_int(kb, MC_KT_BOOL, 1), *f = mc_k_int(kb, MC_KT_BOOL, 0);
	mc_kexpr *count = mc_kb_local(kb, zero);
	mc_kexpr *b = mc_kb_fori(kb, nb, 0);
	mc_kexpr *bbase = mc_kb_let(kb, mc_k_muli(kb, b, nbox * 4));
	mc_kexpr *i = mc_kb_fori(kb, nbox, MC_KF_PARALLEL);
	mc_kexpr *box[4];
	nms_corners_ir(c, mc_k_add(kb, bbase, mc_k_muli(kb, i, 4)), center != 0, box);
	for (int k = 0; k < 4; k++)
		mc_kb_store(kb, corner, mc_k_addi(kb, mc_k_muli(kb, i, 4), k), box[k]);
	mc_kb_end(kb);
	mc_kexpr *cl = mc_kb_fori(kb, ncls, 0);
	mc_kexpr *sbase = mc_kb_let(kb, mad(kb, mad(kb, b, ncls, cl), nbox, zero));
	i = mc_kb_fori(kb, nbox, 0);
	mc_kexpr *score = mc_k_cast(kb, MC_KT_F64, mc_lower_load(c, 1, mc_k_add(kb, sbase, i)));
	mc_kb_store(kb, alive, i, thr ? mc_k_bin(kb, MC_KB_GT, score, thr) : t);
	mc_kb_end(kb);
	mc_kexpr *kept = mc_kb_local(kb, zero);
	mc_kb_fori(kb, nbox, 0);
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_GE, kept, cap));
	mc_kb_break(kb);
	mc_kb_end(kb);
	/* the best live candidate: the highest score, the lowest index of
	 * equals (in the scores' own type: the same order as in double) */
	mc_kexpr *best = mc_kb_local(kb, mc_k_index(kb, -1));
	mc_ktype st = mc_ktype_of(c->in[1]->dtype);
	mc_kexpr *best_score = mc_kb_local(kb, mc_k_const_as(kb, st, 0));
	i = mc_kb_fori(kb, nbox, 0);
	mc_kexpr *s = mc_kb_let(kb, mc_lower_load(c, 1, mc_k_add(kb, sbase, i)));
	mc_kexpr *better = mc_k_bin(kb, MC_KB_OR, mc_k_bin(kb, MC_KB_LT, best, zero),
	                            mc_k_bin(kb, MC_KB_GT, s, best_score));
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_AND, mc_k_bin(kb, MC_KB_NE, mc_k_load(kb, alive, i), f), better));
	mc_kb_assign(kb, best, i);
	mc_kb_assign(kb, best_score, s);
	mc_kb_end_n(kb, 2);
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_LT, best, zero));
	mc_kb_break(kb);
	mc_kb_end(kb);
	mc_kb_store(kb, alive, best, f);
	mc_kexpr *row = mc_kb_let(kb, mc_k_muli(kb, count, 3));
	mc_kexpr *sel[3] = { b, cl, best };
	for (int k = 0; k < 3; k++)
		mc_lower_store(c, 0, NULL, mc_k_addi(kb, row, k), mc_k_cast(kb, MC_KT_I64, sel[k]));
	mc_kb_assign(kb, count, mc_k_addi(kb, count, 1));
	mc_kb_assign(kb, kept, mc_k_addi(kb, kept, 1));
	mc_kexpr *a[4], *o[4];
	for (int k = 0; k < 4; k++)
		a[k] = mc_kb_let(kb, mc_k_load(kb, corner, mc_k_addi(kb, mc_k_muli(kb, best, 4), k)));
	i = mc_kb_fori(kb, nbox, 0);
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_NE, mc_k_load(kb, alive, i), f));
	for (int k = 0; k < 4; k++)
		o[k] = mc_kb_let(kb, mc_k_load(kb, corner, mc_k_addi(kb, mc_k_muli(kb, i, 4), k)));
	mc_kb_if(kb, nms_overlap_ir(kb, a, o, iou));
	mc_kb_store(kb, alive, i, f);
	mc_kb_end_n(kb, 3);
	mc_kb_end_n(kb, 3); /* picks, classes, batches */
	/* zero rows to the bound: the padding every later op computes over */
	mc_kexpr *r = mc_kb_for(kb, mc_k_muli(kb, count, 3), mc_k_index(kb, bound * 3), 0);
	mc_lower_store(c, 0, NULL, r, mc_k_int(kb, MC_KT_I64, 0));
	mc_kb_end(kb);
	if (c->n_out > 1 && c->out[1])
		mc_lower_store(c, 1, NULL, zero, mc_k_cast(kb, MC_KT_I64, count));
	return 0;
}

/* NonZero on a value known at run time: output 0 is [rank, bound] counted
 * on axis 1 (libcore/counted.c), each nonzero element's coordinates in
 * one column, in row-major order, then zero columns to the bound; the
 * count in output 1. */
static int lower_nonzero(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	if (!c->out[0]->counted)
		return mc_lower_error(c, "NonZero without its count (made by the importer)");
	const mc_shape *xs = &c->in[0]->shape;
	int64_t bound = c->out[0]->shape.dims[1];
	mc_kexpr *count = mc_kb_local(kb, mc_k_index(kb, 0));
	mc_kexpr *i = mc_kb_fori(kb, (int64_t)mc_numel(xs), 0);
	mc_kexpr *x = mc_lower_load(c, 0, i);
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_NE, x, mc_k_const_as(kb, mc_ktype_of(c->in[0]->dtype), 0)));
	mc_kexpr *coords[MC_MAX_RANK];
	mc_lower_coords(kb, xs, i, coords);
	for (int d = 0; d < xs->rank; d++)
		mc_lower_store(c, 0, NULL, mc_k_add(kb, mc_k_index(kb, d * bound), count),
		               mc_k_cast(kb, MC_KT_I64, coords[d]));
	mc_kb_assign(kb, count, mc_k_addi(kb, count, 1));
	mc_kb_end_n(kb, 2);
	for (int d = 0; d < xs->rank; d++) {
		mc_kexpr *j = mc_kb_for(kb, count, mc_k_index(kb, bound), 0);
		mc_lower_store(c, 0, NULL, mc_k_addi(kb, j, d * bound), mc_k_int(kb, MC_KT_I64, 0));
		mc_kb_end(kb);
	}
	if (c->n_out > 1 && c->out[1])
		mc_lower_store(c, 1, NULL, mc_k_index(kb, 0), mc_k_cast(kb, MC_KT_I64, count));
	return 0;
}

/* ---- Unique on a value known at run time ----
 * Slices along the axis (single elements flattened) compared as the
 * reference does (libcore/ops/extra.c: slice_cmp, outer index first).
 * Each slice's first equal one is found by looking back, the unique ones
 * ranked (by value, or by first place with sorted = 0) by counting the
 * unique ones before them: O(slices^2) comparisons, no sort, no heap.
 * Y, indices and counts are counted (libcore/counted.c) by the unique
 * slices; inverse_indices is whole; the count in output 4. */
typedef struct {
	mc_lower_ctx *c;
	int64_t outer, n, inner;
	mc_ktype t;
} uniq_view;

static mc_kexpr *uniq_at(mc_kb *kb, const uniq_view *u, mc_kexpr *e, mc_kexpr *a)
{
	mc_kexpr *o = mc_k_div(kb, e, mc_k_index(kb, u->inner)), *i = mc_k_bin(kb, MC_KB_REM, e, mc_k_index(kb, u->inner));
	return mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, o, u->n), a), u->inner), i);
}

/* -1, 0 or 1 as slice a orders before, with or after slice b: the first
 * element that differs decides (< before). */
static mc_kexpr *uniq_cmp(mc_kb *kb, const uniq_view *u, mc_kexpr *a, mc_kexpr *b)
{
	mc_kexpr *res = mc_kb_local(kb, mc_k_index(kb, 0));
	mc_kexpr *e = mc_kb_fori(kb, u->outer * u->inner, 0);
	mc_kexpr *va = mc_kb_let(kb, mc_lower_load(u->c, 0, uniq_at(kb, u, e, a)));
	mc_kexpr *vb = mc_kb_let(kb, mc_lower_load(u->c, 0, uniq_at(kb, u, e, b)));
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_NE, va, vb));
	mc_kb_assign(kb, res, mc_k_select(kb, mc_k_bin(kb, MC_KB_LT, va, vb), mc_k_index(kb, -1), mc_k_index(kb, 1)));
	mc_kb_break(kb);
	mc_kb_end_n(kb, 2);
	return mc_kb_let(kb, res);
}

static int lower_unique(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	if (c->n_out < 5 || !c->out[4] || !(c->out[0] ? c->out[0] : c->out[1])->counted)
		return mc_lower_error(c, "Unique's inputs must be constants (they fold at compile time) "
		                      "where it has no count (made by the importer)");
	const mc_shape *xs = &c->in[0]->shape;
	const mc_attr *ax = mc_attr_find(c->node, "axis");
	int64_t sorted = 1;
	if (mc_attr_int(c->node, "sorted", 1, &sorted))
		return -1;
	uniq_view u = { c, 1, (int64_t)mc_numel(xs), 1, mc_ktype_of(c->in[0]->dtype) };
	if (ax) {
		int axis = (int)(ax->i < 0 ? ax->i + xs->rank : ax->i);
		u.n = xs->dims[axis];
		for (int d = 0; d < axis; d++)
			u.outer *= xs->dims[d];
		for (int d = axis + 1; d < xs->rank; d++)
			u.inner *= xs->dims[d];
	}
	size_t n = (size_t)(u.n > 0 ? u.n : 1);
	int first = mc_kb_scratch(kb, MC_INT64, n), rank = mc_kb_scratch(kb, MC_INT64, n);
	/* each slice's first equal one */
	mc_kexpr *a = mc_kb_fori(kb, u.n, 0);
	mc_kexpr *f = mc_kb_local(kb, a);
	mc_kexpr *b = mc_kb_for(kb, mc_k_index(kb, 0), a, 0);
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_EQ, uniq_cmp(kb, &u, b, a), mc_k_index(kb, 0)));
	mc_kb_assign(kb, f, b);
	mc_kb_break(kb);
	mc_kb_end_n(kb, 2);
	mc_kb_store(kb, first, a, mc_k_cast(kb, MC_KT_I64, f));
	mc_kb_end(kb);
	/* each unique one's place among them: those before it by value (or
	 * by place) */
	mc_kexpr *count = mc_kb_local(kb, mc_k_index(kb, 0));
	a = mc_kb_fori(kb, u.n, 0);
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_EQ, mc_k_cast(kb, MC_KT_INDEX, mc_k_load(kb, first, a)), a));
	mc_kb_assign(kb, count, mc_k_addi(kb, count, 1));
	mc_kexpr *r = mc_kb_local(kb, mc_k_index(kb, 0));
	b = mc_kb_fori(kb, u.n, 0);
	mc_kexpr *unique_b = mc_k_bin(kb, MC_KB_EQ, mc_k_cast(kb, MC_KT_INDEX, mc_k_load(kb, first, b)), b);
	if (sorted) {
		mc_kb_if(kb, unique_b);
		mc_kb_if(kb, mc_k_bin(kb, MC_KB_LT, uniq_cmp(kb, &u, b, a), mc_k_index(kb, 0)));
		mc_kb_assign(kb, r, mc_k_addi(kb, r, 1));
		mc_kb_end_n(kb, 2);
	} else {
		mc_kb_if(kb, mc_k_bin(kb, MC_KB_AND, unique_b, mc_k_bin(kb, MC_KB_LT, b, a)));
		mc_kb_assign(kb, r, mc_k_addi(kb, r, 1));
		mc_kb_end(kb);
	}
	mc_kb_end(kb); /* b */
	mc_kb_store(kb, rank, a, mc_k_cast(kb, MC_KT_I64, r));
	/* Y's slice, its index and its count at that place */
	if (c->out[0]) {
		mc_kexpr *e = mc_kb_fori(kb, u.outer * u.inner, 0);
		mc_kexpr *o = mc_kb_let(kb, mc_k_div(kb, e, mc_k_index(kb, u.inner)));
		mc_kexpr *i = mc_kb_let(kb, mc_k_bin(kb, MC_KB_REM, e, mc_k_index(kb, u.inner)));
		mc_lower_store(c, 0, NULL, mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, o, u.n), r), u.inner), i),
		               mc_lower_load(c, 0, uniq_at(kb, &u, e, a)));
		mc_kb_end(kb);
	}
	if (c->out[1])
		mc_lower_store(c, 1, NULL, r, mc_k_cast(kb, MC_KT_I64, a));
	if (c->out[3]) {
		mc_kexpr *times = mc_kb_local(kb, mc_k_int(kb, MC_KT_I64, 0));
		b = mc_kb_fori(kb, u.n, 0);
		mc_kb_if(kb, mc_k_bin(kb, MC_KB_EQ, mc_k_cast(kb, MC_KT_INDEX, mc_k_load(kb, first, b)), a));
		mc_kb_assign(kb, times, mc_k_bin(kb, MC_KB_ADD, times, mc_k_int(kb, MC_KT_I64, 1)));
		mc_kb_end_n(kb, 2);
		mc_lower_store(c, 3, NULL, r, times);
	}
	mc_kb_end_n(kb, 2); /* if unique, a */
	if (c->out[2]) { /* each slice: its unique one's place */
		a = mc_kb_fori(kb, u.n, 0);
		mc_lower_store(c, 2, NULL, a, mc_k_load(kb, rank, mc_k_cast(kb, MC_KT_INDEX, mc_k_load(kb, first, a))));
		mc_kb_end(kb);
	}
	/* zeros past the count: the padding every later op computes over */
	if (c->out[0]) {
		mc_kexpr *o = mc_kb_fori(kb, u.outer, 0);
		mc_kexpr *j = mc_kb_for(kb, count, mc_k_index(kb, u.n), 0);
		mc_kexpr *i = mc_kb_fori(kb, u.inner, 0);
		mc_lower_store(c, 0, NULL, mc_k_add(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, o, u.n), j), u.inner), i),
		               mc_k_const_as(kb, u.t, 0));
		mc_kb_end_n(kb, 3);
	}
	for (int k = 1; k < 4; k += 2) {
		if (!c->out[k])
			continue;
		mc_kexpr *j = mc_kb_for(kb, count, mc_k_index(kb, u.n), 0);
		mc_lower_store(c, k, NULL, j, mc_k_int(kb, MC_KT_I64, 0));
		mc_kb_end(kb);
	}
	mc_lower_store(c, 4, NULL, mc_k_index(kb, 0), mc_k_cast(kb, MC_KT_I64, count));
	return 0;
}

static const mc_lowering l_ccp = {MC_OP_CenterCropPad, lower_center_crop_pad, NULL, MC_LOWER_EPILOGUE};
static const mc_lowering l_rope = {MC_OP_RotaryEmbedding, lower_rotary_embedding, NULL,
                                   MC_LOWER_EPILOGUE};
static const mc_lowering l_det = { MC_OP_Det, lower_det, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_grid_sample = {MC_OP_GridSample, lower_grid_sample, NULL, MC_LOWER_EPILOGUE};
static const mc_lowering l_roi_align = { MC_OP_RoiAlign, lower_roi_align, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_attention = { MC_OP_Attention, lower_attention, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_nonzero = { MC_OP_NonZero, lower_nonzero, NULL, 0 };
static const mc_lowering l_unique = { MC_OP_Unique, lower_unique, NULL, 0 };
static const mc_lowering l_nms = { MC_OP_NonMaxSuppression, lower_nms, NULL, 0 };

const mc_lowering *const mc_lower_misc[] = {
	&l_rnn,
	&l_gru,
	&l_lstm,
	&l_dft,
	&l_stft,
	&l_hann,
	&l_hamming,
	&l_blackman,
	&l_cumprod,
	&l_mel,
	&l_unreachable,
	&l_ccp,
	&l_rope,
	&l_det,
	&l_grid_sample,
	&l_roi_align,
	&l_attention,
	&l_nonzero,
	&l_unique,
	&l_nms,
	NULL,
};
