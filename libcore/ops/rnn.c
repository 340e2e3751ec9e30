/* Recurrent layers: RNN, GRU, LSTM (ONNX opsets 1..23).
 * The three ops share attribute parsing, the activation-function table,
 * the shape checks and the direction / batch / time loop with its
 * sequence-length masking; each op supplies only its cell: how one time
 * step turns (x_t, H_{t-1}, C_{t-1}) into (H_t, C_t). Computed in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "rnn.h"

enum { IN_X, IN_W, IN_R, IN_B, IN_SEQ_LENS, IN_INITIAL_H, IN_INITIAL_C, IN_P };
enum { OUT_Y, OUT_Y_H, OUT_Y_C };

/* ---- activation functions ---- */

/* Which of activation_alpha / activation_beta each function consumes (the
 * lists are consumed in order, only by the functions that take them, as
 * ONNX Runtime does) and its defaults: those of the ONNX op of that name, as
 * the spec says (ONNX Runtime instead uses 0 for absent ThresholdedRelu,
 * ScaledTanh and Affine parameters). ScaledTanh has no ONNX default; 1, 1
 * makes it plain tanh. */
static const struct {
	const char *name;
	bool takes_alpha, takes_beta;
	double alpha, beta;
} act_table[ACT_COUNT] = {
	[ACT_SIGMOID] = {"Sigmoid", false, false, 0, 0},
	[ACT_TANH] = {"Tanh", false, false, 0, 0},
	[ACT_RELU] = {"Relu", false, false, 0, 0},
	[ACT_LEAKY_RELU] = {"LeakyRelu", true, false, 0.01, 0},
	[ACT_THRESHOLDED_RELU] = {"ThresholdedRelu", true, false, 1.0, 0},
	[ACT_SCALED_TANH] = {"ScaledTanh", true, true, 1.0, 1.0},
	[ACT_HARD_SIGMOID] = {"HardSigmoid", true, true, 0.2, 0.5},
	[ACT_ELU] = {"Elu", true, false, 1.0, 0},
	[ACT_SOFTSIGN] = {"Softsign", false, false, 0, 0},
	[ACT_SOFTPLUS] = {"Softplus", false, false, 0, 0},
	[ACT_AFFINE] = {"Affine", true, true, 1.0, 0.0},
};

static double act_eval(const rnn_act *a, double x)
{
	switch (a->fn) {
	case ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
	case ACT_TANH: return tanh(x);
	case ACT_RELU: return x > 0 ? x : 0;
	case ACT_LEAKY_RELU: return x >= 0 ? x : a->alpha * x;
	case ACT_THRESHOLDED_RELU: return x > a->alpha ? x : 0;
	case ACT_SCALED_TANH: return a->alpha * tanh(a->beta * x);
	case ACT_HARD_SIGMOID: return fmax(0.0, fmin(1.0, a->alpha * x + a->beta));
	case ACT_ELU: return x >= 0 ? x : a->alpha * expm1(x);
	case ACT_SOFTSIGN: return x / (1.0 + fabs(x));
	/* log(1 + e^x) without overflow for large x */
	case ACT_SOFTPLUS: return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
	case ACT_AFFINE: return a->alpha * x + a->beta;
	case ACT_COUNT: break;
	}
	return x;
}

/* Activation names are matched ignoring case, as ONNX Runtime does. */
static int act_lookup(const char *name)
{
	for (int f = 0; f < ACT_COUNT; f++) {
		const char *a = act_table[f].name, *b = name;
		while (*a && (*a | 0x20) == (*b | 0x20))
			a++, b++;
		if (!*a && !*b)
			return f;
	}
	return -1;
}

/* ---- per-op description and parsed attributes ---- */

struct rnn_cell;
typedef void (*rnn_step_fn)(const struct rnn_cell *cell, const double *x, double *h,
                            double *c);

static void rnn_step(const struct rnn_cell *cell, const double *x, double *h, double *c);
static void gru_step(const struct rnn_cell *cell, const double *x, double *h, double *c);
static void lstm_step(const struct rnn_cell *cell, const double *x, double *h, double *c);

static const struct rnn_desc {
	int n_gates;              /* rows of W and R per direction, in hidden_size units */
	int n_acts;               /* activation functions per direction */
	act_fn default_acts[3];
	rnn_step_fn step;
} descs[] = {
	[KIND_RNN] = {1, 1, {ACT_TANH}, rnn_step},
	[KIND_GRU] = {3, 2, {ACT_SIGMOID, ACT_TANH}, gru_step},
	[KIND_LSTM] = {4, 3, {ACT_SIGMOID, ACT_TANH, ACT_TANH}, lstm_step},
};

static int parse_direction(mc_node *n, rnn_params *p)
{
	const char *dir;
	if (mc_attr_string(n, "direction", "forward", &dir))
		return -1;
	p->num_dirs = 1;
	if (strcmp(dir, "bidirectional") == 0)
		p->num_dirs = 2;
	else if (strcmp(dir, "reverse") == 0)
		p->reverse = true;
	else if (strcmp(dir, "forward") != 0)
		return mc_node_error(n, "direction '%s' is not forward, reverse or bidirectional",
		                     dir);
	return 0;
}

static int parse_activations(mc_node *n, rnn_params *p)
{
	const struct rnn_desc *desc = &descs[p->kind];
	const mc_attr *names = mc_attr_find(n, "activations");
	const float *alpha, *beta;
	size_t n_alpha, n_beta, next_alpha = 0, next_beta = 0;
	if (mc_attr_floats(n, "activation_alpha", &alpha, &n_alpha) ||
	    mc_attr_floats(n, "activation_beta", &beta, &n_beta))
		return -1;
	if (names && names->type != MC_ATTR_STRINGS)
		return mc_node_error(n, "attribute 'activations' must be a list of strings");
	size_t want = (size_t)desc->n_acts * (size_t)p->num_dirs;
	if (names && names->n != want)
		return mc_node_error(n, "attribute 'activations' has %zu names; %s with %d "
		                     "direction(s) takes %zu", names->n, n->op_type, p->num_dirs,
		                     want);
	for (size_t k = 0; k < want; k++) {
		int fn = desc->default_acts[k % (size_t)desc->n_acts];
		if (names && (fn = act_lookup(names->strings[k])) < 0)
			return mc_node_error(n, "activation function '%s' is not supported",
			                     names->strings[k]);
		rnn_act *a = &p->act[k / (size_t)desc->n_acts][k % (size_t)desc->n_acts];
		a->fn = (act_fn)fn;
		a->alpha = act_table[fn].alpha;
		a->beta = act_table[fn].beta;
		if (act_table[fn].takes_alpha && next_alpha < n_alpha)
			a->alpha = alpha[next_alpha++];
		if (act_table[fn].takes_beta && next_beta < n_beta)
			a->beta = beta[next_beta++];
	}
	return 0;
}

static int parse_flag(mc_node *n, const char *name, bool *out)
{
	int64_t v;
	if (mc_attr_int(n, name, 0, &v))
		return -1;
	if (v != 0 && v != 1)
		return mc_node_error(n, "attribute '%s' must be 0 or 1, got %lld", name,
		                     (long long)v);
	*out = v != 0;
	return 0;
}

static int rnn_parse_kind(mc_node *n, rnn_kind kind)
{
	rnn_params *p = mc_params_new(n, sizeof *p);
	p->kind = kind;
	if (parse_direction(n, p) || parse_activations(n, p))
		return -1;
	if (mc_attr_int(n, "hidden_size", 0, &p->hidden_size))
		return -1;
	if (mc_attr_find(n, "hidden_size") && p->hidden_size < 1)
		return mc_node_error(n, "hidden_size must be positive, got %lld",
		                     (long long)p->hidden_size);
	p->has_clip = mc_attr_find(n, "clip") != NULL;
	if (mc_attr_float(n, "clip", 0, &p->clip))
		return -1;
	if (p->has_clip && !(p->clip > 0))
		return mc_node_error(n, "clip must be a positive threshold, got %g", p->clip);
	int64_t layout = 0;
	if (mc_attr_int(n, "layout", 0, &layout))
		return -1;
	if (layout != 0 && n->opset < 14)
		return mc_node_error(n, "attribute 'layout' needs opset 14 or newer");
	if (layout != 0 && layout != 1)
		return mc_node_error(n, "layout must be 0 or 1, got %lld", (long long)layout);
	p->layout = (int)layout;
	if (kind == KIND_LSTM && parse_flag(n, "input_forget", &p->input_forget))
		return -1;
	/* linear_before_reset appeared in GRU-3; GRU-1 always resets first. */
	if (kind == KIND_GRU && n->opset >= 3) {
		int64_t lbr;
		if (mc_attr_int(n, "linear_before_reset", 0, &lbr))
			return -1;
		p->linear_before_reset = lbr != 0;
	}
	/* output_sequence (opset 1) only said that Y may be omitted. */
	return 0;
}

static int rnn_parse(mc_node *n) { return rnn_parse_kind(n, KIND_RNN); }
static int gru_parse(mc_node *n) { return rnn_parse_kind(n, KIND_GRU); }
static int lstm_parse(mc_node *n) { return rnn_parse_kind(n, KIND_LSTM); }

/* ---- shape inference ---- */

static mc_shape shape3(int64_t a, int64_t b, int64_t c)
{
	mc_shape s = {.rank = 3, .dims = {a, b, c}};
	return s;
}

/* Checks that an input has the expected dtype and shape. */
static int expect_input(mc_infer_ctx *c, int i, const char *what, mc_dtype t,
                        const mc_shape *want)
{
	const mc_value *v = mc_opt_in(c, i);
	if (v->dtype == t && mc_shape_eq(&v->shape, want))
		return 0;
	char a[256], b[256];
	return mc_node_error(c->node, "input %d (%s) must be %s %s, got %s %s", i, what,
	                     mc_dtype_name(t), mc_shape_str(want, a, sizeof a),
	                     mc_dtype_name(v->dtype), mc_shape_str(&v->shape, b, sizeof b));
}

static bool dtype_allowed(mc_dtype t, int opset)
{
	return t == MC_FLOAT || t == MC_FLOAT16 || t == MC_DOUBLE ||
	       (t == MC_BFLOAT16 && opset >= 22);
}

static int check_seq_lens(const mc_node *n, const mc_tensor *lens, int64_t seq)
{
	for (size_t b = 0; b < lens->numel; b++) {
		int64_t len = mc_get_i(lens, b);
		if (len < 0 || len > seq)
			return mc_node_error(n, "sequence_lens[%zu] = %lld is outside [0, %lld]", b,
			                     (long long)len, (long long)seq);
	}
	return 0;
}

static int rnn_infer(mc_infer_ctx *c)
{
	const mc_node *n = c->node;
	const rnn_params *p = n->params;
	const struct rnn_desc *desc = &descs[p->kind];
	const mc_value *x = mc_opt_in(c, IN_X), *w = mc_opt_in(c, IN_W), *r = mc_opt_in(c, IN_R);
	if (!x || !w || !r)
		return mc_node_error(n, "inputs X, W and R are required");
	mc_dtype t = x->dtype;
	if (!dtype_allowed(t, n->opset))
		return mc_node_error(n, "X has dtype %s; %s takes float16, float32 or float64%s",
		                     mc_dtype_name(t), n->op_type,
		                     n->opset >= 22 ? " or bfloat16" : "");
	if (x->shape.rank != 3 || w->shape.rank != 3 || r->shape.rank != 3)
		return mc_node_error(n, "X, W and R must have rank 3, got %d, %d and %d",
		                     x->shape.rank, w->shape.rank, r->shape.rank);
	int64_t seq = x->shape.dims[p->layout ? 1 : 0], batch = x->shape.dims[p->layout ? 0 : 1];
	int64_t input = x->shape.dims[2], hidden = r->shape.dims[2], dirs = p->num_dirs;
	int64_t gates = desc->n_gates, rows = w->shape.dims[1];
	if (p->hidden_size && p->hidden_size != hidden)
		return mc_node_error(n, "hidden_size is %lld but R has shape [%lld, %lld, %lld]",
		                     (long long)p->hidden_size, (long long)r->shape.dims[0],
		                     (long long)r->shape.dims[1], (long long)r->shape.dims[2]);
	/* B and P sizes below are 2 x rows and 3 x hidden: keep them in range */
	if (rows > INT64_MAX / 4)
		return mc_node_error(n, "W has %lld rows, too many", (long long)rows);
	if (rows % gates != 0 || rows / gates != hidden)
		return mc_node_error(n, "W has %lld rows per direction; %s needs %lld x hidden_size "
		                     "(%lld)", (long long)rows, n->op_type, (long long)gates,
		                     (long long)hidden);
	mc_shape want = shape3(dirs, rows, input);
	if (expect_input(c, IN_W, "W", t, &want))
		return -1;
	want = shape3(dirs, rows, hidden);
	if (expect_input(c, IN_R, "R", t, &want))
		return -1;
	const mc_value *b = mc_opt_in(c, IN_B);
	if (b) {
		want = (mc_shape){.rank = 2, .dims = {dirs, 2 * rows}};
		if (expect_input(c, IN_B, "B", t, &want))
			return -1;
	}
	const mc_value *lens = mc_opt_in(c, IN_SEQ_LENS);
	if (lens) {
		if ((lens->dtype != MC_INT32 && lens->dtype != MC_INT64) || lens->shape.rank != 1 ||
		    lens->shape.dims[0] != batch)
			return mc_node_error(n, "sequence_lens must be int32 [%lld]", (long long)batch);
		if (lens->konst && check_seq_lens(n, lens->konst, seq))
			return -1;
	}
	mc_shape state = p->layout ? shape3(batch, dirs, hidden) : shape3(dirs, batch, hidden);
	if (mc_opt_in(c, IN_INITIAL_H) && expect_input(c, IN_INITIAL_H, "initial_h", t, &state))
		return -1;
	if (p->kind == KIND_LSTM) {
		if (mc_opt_in(c, IN_INITIAL_C) &&
		    expect_input(c, IN_INITIAL_C, "initial_c", t, &state))
			return -1;
		want = (mc_shape){.rank = 2, .dims = {dirs, 3 * hidden}};
		if (mc_opt_in(c, IN_P) && expect_input(c, IN_P, "P", t, &want))
			return -1;
	}
	mc_shape y = {.rank = 4, .dims = {seq, dirs, batch, hidden}};
	if (p->layout)
		y = (mc_shape){.rank = 4, .dims = {batch, seq, dirs, hidden}};
	mc_set_out(c, OUT_Y, t, &y);
	for (int k = OUT_Y_H; k < c->n_out; k++)
		mc_set_out(c, k, t, &state);
	return 0;
}

/* ---- evaluation ---- */

/* Dimensions and index arithmetic shared by all three ops; both layouts. */
typedef struct {
	size_t seq, batch, input, hidden, dirs;
	int layout;
} rnn_dims;

static size_t x_offset(const rnn_dims *d, size_t t, size_t b)
{
	return (d->layout ? b * d->seq + t : t * d->batch + b) * d->input;
}

static size_t y_offset(const rnn_dims *d, size_t t, size_t dir, size_t b)
{
	return d->layout ? ((b * d->seq + t) * d->dirs + dir) * d->hidden
	                 : ((t * d->dirs + dir) * d->batch + b) * d->hidden;
}

/* initial_h, initial_c, Y_h, Y_c */
static size_t state_offset(const rnn_dims *d, size_t dir, size_t b)
{
	return (d->layout ? b * d->dirs + dir : dir * d->batch + b) * d->hidden;
}

/* One direction's weights and scratch, as a cell step sees them. */
typedef struct rnn_cell {
	const rnn_params *p;
	size_t input, hidden;
	const double *w, *r;      /* [gates * hidden, input], [gates * hidden, hidden] */
	const double *wb, *rb;    /* [gates * hidden] each; NULL when B is omitted */
	const double *peep;       /* LSTM [3 * hidden] (i, o, f); NULL when P is omitted */
	const rnn_act *act;       /* f, g, h */
	double *pre;              /* scratch [gates * hidden]: gate pre-activations */
	double *tmp;              /* scratch [hidden] */
} rnn_cell;

/* v . M[row] + bias[row] for M of `width` columns; bias NULL: none. */
static double affine_row(const double *m, const double *bias, size_t width, size_t row,
                         const double *v)
{
	const double *mrow = m + row * width;
	double s = bias ? bias[row] : 0;
	for (size_t k = 0; k < width; k++)
		s += v[k] * mrow[k];
	return s;
}

/* x_t . W[row] + Wb[row] */
static double input_part(const rnn_cell *c, size_t row, const double *x)
{
	return affine_row(c->w, c->wb, c->input, row, x);
}

/* h . R[row] + Rb[row] */
static double recur_part(const rnn_cell *c, size_t row, const double *h)
{
	return affine_row(c->r, c->rb, c->hidden, row, h);
}

/* Activation `which` (0: f, 1: g, 2: h); clip bounds its input. */
static double activate(const rnn_cell *c, int which, double v)
{
	if (c->p->has_clip)
		v = fmin(c->p->clip, fmax(-c->p->clip, v));
	return act_eval(&c->act[which], v);
}

/* Ht = f(Xt W^T + Ht-1 R^T + Wb + Rb) */
static void rnn_step(const rnn_cell *cell, const double *x, double *h, double *c)
{
	(void)c;
	size_t hs = cell->hidden;
	for (size_t j = 0; j < hs; j++)
		cell->pre[j] = input_part(cell, j, x) + recur_part(cell, j, h);
	for (size_t j = 0; j < hs; j++)
		h[j] = activate(cell, 0, cell->pre[j]);
}

/* Gates z, r, h in that order:
 *   zt = f(Xt Wz + Ht-1 Rz + Wbz + Rbz), rt likewise
 *   ht = g(Xt Wh + (rt . Ht-1) Rh + Rbh + Wbh)      linear_before_reset = 0
 *   ht = g(Xt Wh + rt . (Ht-1 Rh + Rbh) + Wbh)      linear_before_reset = 1
 *   Ht = (1 - zt) . ht + zt . Ht-1 */
static void gru_step(const rnn_cell *cell, const double *x, double *h, double *c)
{
	(void)c;
	size_t hs = cell->hidden;
	double *z = cell->pre, *r = cell->pre + hs, *hh = cell->pre + 2 * hs;
	for (size_t j = 0; j < hs; j++) {
		z[j] = activate(cell, 0, input_part(cell, j, x) + recur_part(cell, j, h));
		r[j] = activate(cell, 0, input_part(cell, hs + j, x) + recur_part(cell, hs + j, h));
	}
	if (cell->p->linear_before_reset) {
		for (size_t j = 0; j < hs; j++)
			hh[j] = activate(cell, 1, input_part(cell, 2 * hs + j, x) +
			                              r[j] * recur_part(cell, 2 * hs + j, h));
	} else {
		for (size_t j = 0; j < hs; j++)
			cell->tmp[j] = r[j] * h[j];
		for (size_t j = 0; j < hs; j++)
			hh[j] = activate(cell, 1, input_part(cell, 2 * hs + j, x) +
			                              recur_part(cell, 2 * hs + j, cell->tmp));
	}
	for (size_t j = 0; j < hs; j++)
		h[j] = (1 - z[j]) * hh[j] + z[j] * h[j];
}

/* Gates i, o, f, c in that order; peepholes P in order i, o, f:
 *   it = f(Xt Wi + Ht-1 Ri + Pi . Ct-1 + Wbi + Rbi)
 *   ft = f(Xt Wf + Ht-1 Rf + Pf . Ct-1 + Wbf + Rbf)   (1 - it with input_forget)
 *   ct = g(Xt Wc + Ht-1 Rc + Wbc + Rbc)
 *   Ct = ft . Ct-1 + it . ct
 *   ot = f(Xt Wo + Ht-1 Ro + Po . Ct + Wbo + Rbo)
 *   Ht = ot . h(Ct)
 * clip bounds the gates' pre-activations only, not Ct on its way into h:
 * ONNX Runtime does so, and Ct is a state, not a gate input. */
static void lstm_step(const rnn_cell *cell, const double *x, double *h, double *c)
{
	size_t hs = cell->hidden;
	/* every pre-activation reads the old Ht-1: all of them first */
	for (size_t row = 0; row < 4 * hs; row++)
		cell->pre[row] = input_part(cell, row, x) + recur_part(cell, row, h);
	const double *pi = cell->pre, *po = cell->pre + hs, *pf = cell->pre + 2 * hs,
	             *pc = cell->pre + 3 * hs, *peep = cell->peep;
	for (size_t j = 0; j < hs; j++) {
		double it = activate(cell, 0, pi[j] + (peep ? peep[j] * c[j] : 0));
		double ft = cell->p->input_forget
		                    ? 1 - it
		                    : activate(cell, 0, pf[j] + (peep ? peep[2 * hs + j] * c[j] : 0));
		double ct = activate(cell, 1, pc[j]);
		c[j] = ft * c[j] + it * ct;
		double ot = activate(cell, 0, po[j] + (peep ? peep[hs + j] * c[j] : 0));
		h[j] = ot * act_eval(&cell->act[2], c[j]); /* unclipped */
	}
}

/* Input tensor as doubles, or NULL when the optional input is omitted. */
static double *opt_doubles(const mc_eval_ctx *c, int i)
{
	return mc_opt_tensor(c, i) ? mc_tensor_to_double(c->in[i]) : NULL;
}

static void store(mc_tensor *t, size_t off, const double *v, size_t n)
{
	for (size_t k = 0; k < n; k++)
		mc_set_f(t, off + k, v[k]);
}

/* Runs one direction over one batch entry's sequence of `len` steps:
 * steps past len leave Y zero; Y_h / Y_c get the last step's state, or zero
 * when len is 0 (as ONNX Runtime does). */
static void run_sequence(const mc_eval_ctx *c, const rnn_dims *d, const rnn_cell *cell,
                         const double *x, size_t dir, size_t b, size_t len, bool reverse,
                         double *h, double *cs)
{
	const mc_tensor *init_h = mc_opt_tensor(c, IN_INITIAL_H);
	const mc_tensor *init_c = mc_opt_tensor(c, IN_INITIAL_C);
	mc_tensor *y = mc_opt_out(c, OUT_Y), *y_h = mc_opt_out(c, OUT_Y_H);
	mc_tensor *y_c = mc_opt_out(c, OUT_Y_C);
	size_t so = state_offset(d, dir, b);
	for (size_t j = 0; j < d->hidden; j++) {
		h[j] = init_h ? mc_get_f(init_h, so + j) : 0;
		cs[j] = init_c ? mc_get_f(init_c, so + j) : 0;
	}
	rnn_step_fn step = descs[cell->p->kind].step;
	for (size_t s = 0; s < len; s++) {
		size_t t = reverse ? len - 1 - s : s;
		step(cell, x + x_offset(d, t, b), h, cs);
		if (y)
			store(y, y_offset(d, t, dir, b), h, d->hidden);
	}
	if (len == 0) {
		memset(h, 0, d->hidden * sizeof *h);
		memset(cs, 0, d->hidden * sizeof *cs);
	}
	if (y_h)
		store(y_h, so, h, d->hidden);
	if (y_c)
		store(y_c, so, cs, d->hidden);
}

static int rnn_eval(mc_eval_ctx *c)
{
	const mc_node *n = c->node;
	const rnn_params *p = n->params;
	const struct rnn_desc *desc = &descs[p->kind];
	const mc_tensor *xt = c->in[IN_X], *rt = c->in[IN_R];
	const mc_tensor *lens = mc_opt_tensor(c, IN_SEQ_LENS);
	rnn_dims d = {
		.seq = (size_t)xt->shape.dims[p->layout ? 1 : 0],
		.batch = (size_t)xt->shape.dims[p->layout ? 0 : 1],
		.input = (size_t)xt->shape.dims[2],
		.hidden = (size_t)rt->shape.dims[2],
		.dirs = (size_t)p->num_dirs,
		.layout = p->layout,
	};
	if (lens && check_seq_lens(n, lens, (int64_t)d.seq))
		return -1;
	/* steps past a sequence's length stay zero */
	if (mc_opt_out(c, OUT_Y))
		memset(c->out[OUT_Y]->data, 0, c->out[OUT_Y]->nbytes);
	double *x = mc_tensor_to_double(xt), *w = mc_tensor_to_double(c->in[IN_W]);
	double *r = mc_tensor_to_double(rt);
	double *bias = opt_doubles(c, IN_B), *peep = opt_doubles(c, IN_P);
	size_t rows = (size_t)desc->n_gates * d.hidden; /* W's rows per direction */
	double *pre = mc_xmalloc(rows * sizeof *pre);
	double *tmp = mc_xmalloc(d.hidden * sizeof *tmp);
	double *h = mc_xmalloc(d.hidden * sizeof *h), *cs = mc_xmalloc(d.hidden * sizeof *cs);
	for (size_t dir = 0; dir < d.dirs; dir++) {
		rnn_cell cell = {
			.p = p, .input = d.input, .hidden = d.hidden,
			.w = w + dir * rows * d.input, .r = r + dir * rows * d.hidden,
			.wb = bias ? bias + dir * 2 * rows : NULL,
			.rb = bias ? bias + dir * 2 * rows + rows : NULL,
			.peep = peep ? peep + dir * 3 * d.hidden : NULL,
			.act = p->act[dir], .pre = pre, .tmp = tmp,
		};
		bool reverse = p->reverse || dir == 1;
		for (size_t b = 0; b < d.batch; b++) {
			size_t len = lens ? (size_t)mc_get_i(lens, b) : d.seq;
			run_sequence(c, &d, &cell, x, dir, b, len, reverse, h, cs);
		}
	}
	free(x);
	free(w);
	free(r);
	free(bias);
	free(peep);
	free(pre);
	free(tmp);
	free(h);
	free(cs);
	return 0;
}

static const mc_op op_rnn = {
	.name = "RNN", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 3, .max_inputs = 6, .min_outputs = 0, .max_outputs = 2,
	.parse = rnn_parse, .infer = rnn_infer, .eval = rnn_eval,
};

static const mc_op op_gru = {
	.name = "GRU", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 3, .max_inputs = 6, .min_outputs = 0, .max_outputs = 2,
	.parse = gru_parse, .infer = rnn_infer, .eval = rnn_eval,
};

static const mc_op op_lstm = {
	.name = "LSTM", .min_opset = 1, .max_opset = MC_MAX_OPSET,
	.min_inputs = 3, .max_inputs = 8, .min_outputs = 0, .max_outputs = 3,
	.parse = lstm_parse, .infer = rnn_infer, .eval = rnn_eval,
};

const mc_op *const mc_ops_rnn[] = {
	&op_rnn,
	&op_gru,
	&op_lstm,
	NULL,
};
