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

#include "aot.h"
#include "../libcore/ops/rnn.h"

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
	mc_kexpr *prod = mc_k_mul(kb, mc_k_load(kb, abuf, mc_k_add(kb, a0, k)),
	                          mc_k_load(kb, bbuf, mc_k_add(kb, b0, k)));
	mc_kb_assign(kb, acc, mc_k_add(kb, acc, mc_k_cast(kb, acc->type, prod)));
	mc_kb_end(kb);
	return acc;
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
		return mc_k_div(kb, one, mc_k_add(kb, one, mc_k_un(kb, MC_KU_EXP, mc_k_un(kb, MC_KU_NEG, x))));
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
		                   mc_k_mul(kb, alpha, mc_k_sub(kb, mc_k_un(kb, MC_KU_EXP, x), one)));
	case ACT_SOFTSIGN:
		return mc_k_div(kb, x, mc_k_add(kb, one, mc_k_un(kb, MC_KU_ABS, x)));
	case ACT_SOFTPLUS: {
		/* log(1 + e^x) without overflow for large x */
		mc_kexpr *big = mc_k_add(kb, x, mc_k_un(kb, MC_KU_LOG, mc_k_add(kb, one,
		                         mc_k_un(kb, MC_KU_EXP, mc_k_un(kb, MC_KU_NEG, x)))));
		mc_kexpr *small = mc_k_un(kb, MC_KU_LOG, mc_k_add(kb, one, mc_k_un(kb, MC_KU_EXP, x)));
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
			init = mc_k_add(kb, init, mc_k_load(kb, c->in_buf[RI_B], mc_k_addi(kb, bo, r->rows)));
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
		                 mc_k_add(kb, mc_k_index(kb, (int64_t)r->dir * 2 * r->rows + r->rows), row));
	mc_kexpr *acc = mc_kb_local(kb, mc_k_cast(kb, r->kt, init));
	return dot_into(kb, acc, r->h, mc_k_index(kb, 0), c->in_buf[RI_R],
	                mc_k_muli(kb, drow, r->hidden), r->hidden);
}

/* Ht = f(Xt W^T + Ht-1 R^T + Wb + Rb) */
static void rnn_step_ir(rnn_low *r)
{
	mc_kb *kb = r->c->kb;
	mc_kexpr *j = mc_kb_fori(kb, r->hidden, 0);
	mc_kb_store(kb, r->pre, j, rnn_row(r, j, true, r->h));
	mc_kb_end(kb);
	j = mc_kb_fori(kb, r->hidden, 0);
	mc_kb_store(kb, r->h, j, rnn_activate(r, 0, mc_k_load(kb, r->pre, j)));
	mc_kb_end(kb);
}

/* GRU gates z, r, h (rnn.c: gru_step). */
static void gru_step_ir(rnn_low *r)
{
	mc_kb *kb = r->c->kb;
	int64_t hs = r->hidden;
	mc_kexpr *row = mc_kb_fori(kb, 2 * hs, 0);
	mc_kb_store(kb, r->pre, row, rnn_activate(r, 0, rnn_row(r, row, true, r->h)));
	mc_kb_end(kb);
	mc_kexpr *j;
	if (r->p->linear_before_reset) {
		j = mc_kb_fori(kb, hs, 0);
		mc_kexpr *row2 = mc_k_addi(kb, j, 2 * hs);
		mc_kexpr *xpart = rnn_row(r, row2, false, -1);
		mc_kexpr *rpart = rnn_recur_row(r, row2);
		mc_kexpr *rt = mc_k_load(kb, r->pre, mc_k_addi(kb, j, hs));
		mc_kb_store(kb, r->pre, row2, rnn_activate(r, 1, mc_k_add(kb, xpart, mc_k_mul(kb, rt, rpart))));
		mc_kb_end(kb);
	} else {
		j = mc_kb_fori(kb, hs, MC_KF_VECTOR);
		mc_kb_store(kb, r->tmp, j, mc_k_mul(kb, mc_k_load(kb, r->pre, mc_k_addi(kb, j, hs)),
		                                    mc_k_load(kb, r->h, j)));
		mc_kb_end(kb);
		j = mc_kb_fori(kb, hs, 0);
		mc_kexpr *row2 = mc_k_addi(kb, j, 2 * hs);
		mc_kb_store(kb, r->pre, row2, rnn_activate(r, 1, rnn_row(r, row2, true, r->tmp)));
		mc_kb_end(kb);
	}
	j = mc_kb_fori(kb, hs, 0);
	mc_kexpr *z = mc_kb_let(kb, mc_k_load(kb, r->pre, j));
	mc_kexpr *hh = mc_k_load(kb, r->pre, mc_k_addi(kb, j, 2 * hs));
	mc_kexpr *one = fconst(kb, r->kt, 1);
	mc_kb_store(kb, r->h, j, mc_k_add(kb, mc_k_mul(kb, mc_k_sub(kb, one, z), hh),
	                                  mc_k_mul(kb, z, mc_k_load(kb, r->h, j))));
	mc_kb_end(kb);
}

/* Peephole weight `part` (0: i, 1: o, 2: f) of unit j times c, or NULL. */
static mc_kexpr *lstm_peep(rnn_low *r, int part, mc_kexpr *j, mc_kexpr *cval)
{
	mc_lower_ctx *c = r->c;
	mc_kb *kb = c->kb;
	if (!opt_in(c, RI_P))
		return NULL;
	mc_kexpr *at = mc_k_addi(kb, j, ((int64_t)r->dir * 3 + part) * r->hidden);
	return mc_k_mul(kb, mc_k_load(kb, c->in_buf[RI_P], at), cval);
}

static mc_kexpr *add_opt(mc_kb *kb, mc_kexpr *a, mc_kexpr *b)
{
	return b ? mc_k_add(kb, a, b) : a;
}

/* LSTM gates i, o, f, c (rnn.c: lstm_step). */
static void lstm_step_ir(rnn_low *r)
{
	mc_kb *kb = r->c->kb;
	int64_t hs = r->hidden;
	mc_kexpr *row = mc_kb_fori(kb, 4 * hs, 0);
	mc_kb_store(kb, r->pre, row, rnn_row(r, row, true, r->h));
	mc_kb_end(kb);
	mc_kexpr *j = mc_kb_fori(kb, hs, 0);
	mc_kexpr *cold = mc_kb_let(kb, mc_k_load(kb, r->cs, j));
	mc_kexpr *pi = mc_k_load(kb, r->pre, j), *po = mc_k_load(kb, r->pre, mc_k_addi(kb, j, hs));
	mc_kexpr *pf = mc_k_load(kb, r->pre, mc_k_addi(kb, j, 2 * hs));
	mc_kexpr *pc = mc_k_load(kb, r->pre, mc_k_addi(kb, j, 3 * hs));
	mc_kexpr *it = mc_kb_let(kb, rnn_activate(r, 0, add_opt(kb, pi, lstm_peep(r, 0, j, cold))));
	mc_kexpr *ft = r->p->input_forget
	                       ? mc_k_sub(kb, fconst(kb, r->kt, 1), it)
	                       : rnn_activate(r, 0, add_opt(kb, pf, lstm_peep(r, 2, j, cold)));
	ft = mc_kb_let(kb, ft);
	mc_kexpr *ct = mc_kb_let(kb, rnn_activate(r, 1, pc));
	mc_kexpr *cnew = mc_kb_let(kb, mc_k_add(kb, mc_k_mul(kb, ft, cold), mc_k_mul(kb, it, ct)));
	mc_kb_store(kb, r->cs, j, cnew);
	mc_kexpr *ot = mc_kb_let(kb, rnn_activate(r, 0, add_opt(kb, po, lstm_peep(r, 1, j, cnew))));
	/* h takes C unclipped, as rnn.c does */
	mc_kexpr *hc = rnn_act_expr(kb, &r->p->act[r->dir][2], r->kt, cnew);
	mc_kb_store(kb, r->h, j, mc_k_mul(kb, ot, hc));
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
		v = mc_k_cast(kb, r->kt, mc_k_load(kb, c->in_buf[in], mc_k_add(kb, rnn_state_at(r, b), j)));
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
		v = mc_k_select(kb, mc_k_bin(kb, MC_KB_EQ, len, mc_k_index(kb, 0)), fconst(kb, r->kt, 0), v);
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
	mc_kexpr *xrow = r->p->layout ? mc_k_add(kb, mc_k_muli(kb, b, r->seq), t)
	                              : mc_k_add(kb, mc_k_muli(kb, t, r->batch), b);
	r->x_at = mc_kb_let(kb, mc_k_muli(kb, xrow, r->input));
	switch (r->p->kind) {
	case KIND_RNN: rnn_step_ir(r); break;
	case KIND_GRU: gru_step_ir(r); break;
	case KIND_LSTM: lstm_step_ir(r); break;
	}
	if (opt_out(c, RO_Y)) {
		mc_kexpr *slot = r->p->layout
		        ? mc_k_addi(kb, mc_k_muli(kb, mc_k_add(kb, mc_k_muli(kb, b, r->seq), t), r->dirs), r->dir)
		        : mc_k_add(kb, mc_k_muli(kb, mc_k_addi(kb, mc_k_muli(kb, t, r->dirs), r->dir), r->batch), b);
		mc_kexpr *at = mc_kb_let(kb, mc_k_muli(kb, slot, r->hidden));
		mc_kexpr *j = mc_kb_fori(kb, r->hidden, MC_KF_VECTOR);
		mc_kb_store(kb, c->out_buf[RO_Y], mc_k_add(kb, at, j), mc_k_load(kb, r->h, j));
		mc_kb_end(kb);
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
	mc_kexpr *bad = mc_k_bin(kb, MC_KB_OR, mc_k_bin(kb, MC_KB_LT, len, mc_k_int(kb, len->type, 0)),
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
	bool has_lens = opt_in(c, RI_LENS) != NULL;
	/* steps past a sequence's length leave Y zero */
	if (has_lens && opt_out(c, RO_Y))
		fill(kb, c->out_buf[RO_Y], mc_k_index(kb, 0), (int64_t)mc_numel(&c->out[RO_Y]->shape),
		     fconst(kb, r.kt, 0));
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

static const mc_lowering l_rnn = { "RNN", lower_rnn, NULL, 0 };
static const mc_lowering l_gru = { "GRU", lower_rnn, NULL, 0 };
static const mc_lowering l_lstm = { "LSTM", lower_rnn, NULL, 0 };

const mc_lowering *const mc_lower_misc[] = {
	&l_rnn,
	&l_gru,
	&l_lstm,
	NULL,
};
