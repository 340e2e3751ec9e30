/* RNN, GRU, LSTM registry entries, called directly: parse, infer, eval on
 * tiny hand-computed cases, plus the errors a hostile model must get. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"

TestSuite(rnn, .init = capture_diags);

static double sigmoid(double x) { return 1 / (1 + exp(-x)); }

#define NEAR(got, want) cr_assert_float_eq((got), (want), 1e-6, "got %.9g, want %.9g", \
                                           (double)(got), (double)(want))

/* ---- numbers ---- */

/* H = I = 1: Ht = tanh(w x + r Ht-1 + wb + rb), every output checked. */
Test(rnn, simple_rnn_by_hand)
{
	test_node t;
	node_init(&t, "RNN", 22);
	node_attr(&t, attr_int("hidden_size", 1));
	mc_tensor *in[6] = {
		T3(MC_FLOAT, 2, 1, 1, 1.0, 2.0), T3(MC_FLOAT, 1, 1, 1, 0.5),
		T3(MC_FLOAT, 1, 1, 1, 0.25), T2(MC_FLOAT, 1, 2, 0.1, 0.2),
		NULL, T3(MC_FLOAT, 1, 1, 1, -0.5),
	};
	mc_tensor *out[2];
	cr_assert_eq(run_node_want(&t, in, 6, (bool[]){true, true}, 2, out), 0, "%s", last_error);
	double h1 = tanh(0.5 * 1 + 0.25 * -0.5 + 0.3), h2 = tanh(0.5 * 2 + 0.25 * h1 + 0.3);
	cr_assert_eq(out[0]->shape.rank, 4);
	cr_assert_eq(out[0]->numel, 2);
	NEAR(mc_get_f(out[0], 0), h1);
	NEAR(mc_get_f(out[0], 1), h2);
	NEAR(mc_get_f(out[1], 0), h2);
	free_all(in, 6);
	free_all(out, 2);
}

/* GRU zrh with H = I = 1, both readings of linear_before_reset. */
static void gru_case(bool lbr)
{
	test_node t;
	node_init(&t, "GRU", 14);
	node_attr(&t, attr_int("linear_before_reset", lbr));
	/* W = z, r, h rows; B = Wb (zrh) then Rb (zrh) */
	mc_tensor *in[6] = {
		T3(MC_FLOAT, 1, 1, 1, 0.7), T3(MC_FLOAT, 1, 3, 1, 0.2, -0.3, 0.9),
		T3(MC_FLOAT, 1, 3, 1, 0.4, 0.6, -0.8), T2(MC_FLOAT, 1, 6, 0.1, 0.2, 0.3, -0.1, 0.05, 0.5),
		NULL, T3(MC_FLOAT, 1, 1, 1, 0.6),
	};
	mc_tensor *out[2];
	cr_assert_eq(run_node_want(&t, in, 6, (bool[]){false, true}, 2, out), 0, "%s", last_error);
	double x = 0.7, h = 0.6;
	double z = sigmoid(0.2 * x + 0.4 * h + 0.1 - 0.1);
	double r = sigmoid(-0.3 * x + 0.6 * h + 0.2 + 0.05);
	double hh = lbr ? tanh(0.9 * x + 0.3 + r * (-0.8 * h + 0.5))
	                : tanh(0.9 * x + 0.3 + -0.8 * (r * h) + 0.5);
	cr_assert_null(out[0]);
	NEAR(mc_get_f(out[1], 0), (1 - z) * hh + z * h);
	free_all(in, 6);
	free_all(out, 2);
}

Test(rnn, gru_reset_before_linear) { gru_case(false); }
Test(rnn, gru_linear_before_reset) { gru_case(true); }

/* LSTM iofc with peepholes (iof), H = I = 1, no bias. */
Test(rnn, lstm_peepholes_by_hand)
{
	test_node t;
	node_init(&t, "LSTM", 7);
	mc_tensor *in[8] = {
		T3(MC_DOUBLE, 1, 1, 1, 0.5), T3(MC_DOUBLE, 1, 4, 1, 0.1, 0.2, 0.3, 0.4),
		T3(MC_DOUBLE, 1, 4, 1, -0.1, 0.5, 0.25, -0.6), NULL, NULL,
		T3(MC_DOUBLE, 1, 1, 1, 0.3), T3(MC_DOUBLE, 1, 1, 1, -0.7),
		T2(MC_DOUBLE, 1, 3, 0.9, -0.4, 0.2),
	};
	mc_tensor *out[3];
	cr_assert_eq(run_node_want(&t, in, 8, (bool[]){true, true, true}, 3, out), 0, "%s",
	             last_error);
	double x = 0.5, h = 0.3, c = -0.7;
	double i = sigmoid(0.1 * x - 0.1 * h + 0.9 * c);
	double f = sigmoid(0.3 * x + 0.25 * h + 0.2 * c);
	double g = tanh(0.4 * x - 0.6 * h);
	double c1 = f * c + i * g;
	double o = sigmoid(0.2 * x + 0.5 * h - 0.4 * c1);
	cr_assert_eq(out[0]->dtype, MC_DOUBLE);
	NEAR(mc_get_f(out[2], 0), c1);
	NEAR(mc_get_f(out[1], 0), o * tanh(c1));
	NEAR(mc_get_f(out[0], 0), o * tanh(c1));
	free_all(in, 8);
	free_all(out, 3);
}

/* Bidirectional, batch 2 with lengths 3 and 1: steps past a length are
 * zero, the forward Y_h is the last valid step, the reverse one step 0. */
Test(rnn, sequence_lens_bidirectional)
{
	test_node t;
	node_init(&t, "RNN", 22);
	node_attr(&t, attr_string("direction", "bidirectional"));
	const char *acts[] = {"Affine", "Affine"};
	float alpha[] = {1, 1}, beta[] = {0, 0};
	node_attr(&t, attr_strings("activations", acts, 2));
	node_attr(&t, attr_floats("activation_alpha", alpha, 2));
	node_attr(&t, attr_floats("activation_beta", beta, 2));
	/* Affine(1, 0) with W = 1, R = 1: the state is a running sum of x */
	mc_tensor *in[5] = {
		T3(MC_FLOAT, 3, 2, 1, 1, 10, 2, 20, 4, 40), T3(MC_FLOAT, 2, 1, 1, 1, 1),
		T3(MC_FLOAT, 2, 1, 1, 1, 1), NULL,
		tensor(MC_INT32, 1, (int64_t[]){2}, (double[]){3, 1}),
	};
	mc_tensor *out[2];
	cr_assert_eq(run_node_want(&t, in, 5, (bool[]){true, true}, 2, out), 0, "%s", last_error);
	/* Y[t][dir][b] */
	double y[3][2][2] = {{{1, 10}, {7, 10}}, {{3, 0}, {6, 0}}, {{7, 0}, {4, 0}}};
	for (int s = 0; s < 3; s++)
		for (int d = 0; d < 2; d++)
			for (int b = 0; b < 2; b++)
				NEAR(mc_get_f(out[0], (size_t)(s * 4 + d * 2 + b)), y[s][d][b]);
	double yh[2][2] = {{7, 10}, {7, 10}};
	for (int d = 0; d < 2; d++)
		for (int b = 0; b < 2; b++)
			NEAR(mc_get_f(out[1], (size_t)(d * 2 + b)), yh[d][b]);
	free_all(in, 5);
	free_all(out, 2);
}

/* layout = 1 gives the batch-first transpose of layout = 0. */
Test(rnn, layout_batch_first)
{
	double xs[2][3] = {{0.1, -0.2, 0.3}, {0.5, 0.4, -0.6}}; /* [batch][seq] */
	double x_seq_first[6], x_batch_first[6];
	for (int b = 0; b < 2; b++)
		for (int s = 0; s < 3; s++) {
			x_seq_first[s * 2 + b] = xs[b][s];
			x_batch_first[b * 3 + s] = xs[b][s];
		}
	mc_tensor *res[2][3];
	for (int layout = 0; layout < 2; layout++) {
		test_node t;
		node_init(&t, "LSTM", 14);
		node_attr(&t, attr_int("layout", layout));
		node_attr(&t, attr_float("clip", 0.4));
		int64_t xd[3] = {layout ? 2 : 3, layout ? 3 : 2, 1};
		mc_tensor *in[6] = {
			tensor(MC_FLOAT, 3, xd, layout ? x_batch_first : x_seq_first),
			T3(MC_FLOAT, 1, 8, 1, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8),
			T3(MC_FLOAT, 1, 8, 2, 1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, -5, -6, -7, -8),
			NULL, NULL, NULL,
		};
		cr_assert_eq(run_node_want(&t, in, 6, (bool[]){true, true, true}, 3, res[layout]), 0,
		             "%s", last_error);
		free_all(in, 6);
	}
	cr_assert_eq(res[1][0]->shape.dims[0], 2); /* [batch, seq, dirs, hidden] */
	cr_assert_eq(res[1][0]->shape.dims[1], 3);
	for (int b = 0; b < 2; b++)
		for (int s = 0; s < 3; s++)
			for (int j = 0; j < 2; j++)
				NEAR(mc_get_f(res[1][0], (size_t)((b * 3 + s) * 2 + j)),
				     mc_get_f(res[0][0], (size_t)((s * 2 + b) * 2 + j)));
	for (int k = 1; k < 3; k++)
		for (size_t i = 0; i < 4; i++)
			NEAR(mc_get_f(res[1][k], i), mc_get_f(res[0][k], i));
	cr_assert(fabs(mc_get_f(res[0][1], 0)) > 1e-3); /* not trivially zero */
	free_all(res[0], 3);
	free_all(res[1], 3);
}

/* Alphas and betas go, in order, only to the functions that take them. */
Test(rnn, activation_parameters_in_order)
{
	test_node t;
	node_init(&t, "GRU", 22);
	const char *acts[] = {"hardsigmoid", "LeakyRelu"}; /* names ignore case */
	float alpha[] = {0.3f, 0.05f}, beta[] = {0.6f};
	node_attr(&t, attr_strings("activations", acts, 2));
	node_attr(&t, attr_floats("activation_alpha", alpha, 2));
	node_attr(&t, attr_floats("activation_beta", beta, 1));
	mc_tensor *in[3] = {
		T3(MC_FLOAT, 1, 1, 1, -1.0), T3(MC_FLOAT, 1, 3, 1, 1.0, 2.0, 3.0),
		T3(MC_FLOAT, 1, 3, 1, 0, 0, 0),
	};
	mc_tensor *out[2];
	cr_assert_eq(run_node_want(&t, in, 3, (bool[]){false, true}, 2, out), 0, "%s", last_error);
	double z = fmax(0, 0.3f * -1.0 + 0.6f), hh = 0.05f * (3.0 * -1.0);
	NEAR(mc_get_f(out[1], 0), (1 - z) * hh);
	free_all(in, 3);
	free_all(out, 2);
}

/* LSTM input_forget couples the gates: ft = 1 - it. */
Test(rnn, lstm_input_forget)
{
	test_node t;
	node_init(&t, "LSTM", 22);
	node_attr(&t, attr_int("input_forget", 1));
	mc_tensor *in[7] = {
		T3(MC_FLOAT, 1, 1, 1, 1.0), T3(MC_FLOAT, 1, 4, 1, 0.5, 0.1, 9.0, -0.3),
		T3(MC_FLOAT, 1, 4, 1, 0, 0, 0, 0), NULL, NULL, NULL, T3(MC_FLOAT, 1, 1, 1, 2.0),
	};
	mc_tensor *out[3];
	cr_assert_eq(run_node_want(&t, in, 7, (bool[]){false, false, true}, 3, out), 0, "%s",
	             last_error);
	double i = sigmoid(0.5);
	NEAR(mc_get_f(out[2], 0), (1 - i) * 2.0 + i * tanh(-0.3));
	free_all(in, 7);
	free_all(out, 3);
}

Test(rnn, float16_outputs)
{
	test_node t;
	node_init(&t, "RNN", 7);
	node_attr(&t, attr_string("direction", "reverse"));
	mc_tensor *in[3] = {
		T3(MC_FLOAT16, 2, 1, 1, 0.5, -1.0), T3(MC_FLOAT16, 1, 1, 1, 2.0),
		T3(MC_FLOAT16, 1, 1, 1, 0.5),
	};
	mc_tensor *out[2];
	cr_assert_eq(run_node_want(&t, in, 3, (bool[]){true, true}, 2, out), 0, "%s", last_error);
	cr_assert_eq(out[1]->dtype, MC_FLOAT16);
	double h1 = tanh(-2.0), h0 = tanh(1.0 + 0.5 * h1); /* reverse: t = 1 first */
	cr_assert_float_eq(mc_get_f(out[0], 1), h1, 2e-3);
	cr_assert_float_eq(mc_get_f(out[1], 0), h0, 2e-3);
	free_all(in, 3);
	free_all(out, 2);
}

/* ---- errors ---- */

/* Runs t with every output present: it must fail with needle. */
static void expect_run_error(test_node *t, int n_in, mc_tensor **in, const char *needle)
{
	mc_tensor *out[3];
	int n_out = strcmp(t->call.op, "LSTM") == 0 ? 3 : 2;
	cr_assert_eq(run_node(t, in, n_in, n_out, out), -1, "expected an error with '%s'",
	             needle);
	expect_error(needle);
}

static void basic_inputs(mc_tensor **in, int gates)
{
	in[0] = T3(MC_FLOAT, 2, 1, 1, 1, 2);
	in[1] = tensor(MC_FLOAT, 3, (int64_t[]){1, gates, 1}, NULL);
	in[2] = tensor(MC_FLOAT, 3, (int64_t[]){1, gates, 1}, NULL);
}

Test(rnn, bad_attributes)
{
	mc_tensor *in[3];
	basic_inputs(in, 4);
	test_node t;
	node_init(&t, "LSTM", 22);
	node_attr(&t, attr_string("direction", "sideways"));
	expect_run_error(&t, 3, in, "direction 'sideways'");
	node_init(&t, "LSTM", 22);
	const char *two[] = {"Sigmoid", "Tanh"};
	node_attr(&t, attr_strings("activations", two, 2));
	expect_run_error(&t, 3, in, "has 2 names");
	node_init(&t, "LSTM", 22);
	const char *odd[] = {"Sigmoid", "Tanh", "Swish"};
	node_attr(&t, attr_strings("activations", odd, 3));
	expect_run_error(&t, 3, in, "'Swish' is not supported");
	node_init(&t, "LSTM", 22);
	node_attr(&t, attr_float("clip", -1));
	expect_run_error(&t, 3, in, "clip");
	node_init(&t, "LSTM", 13);
	node_attr(&t, attr_int("layout", 1));
	expect_run_error(&t, 3, in, "opset 14");
	node_init(&t, "LSTM", 22);
	node_attr(&t, attr_int("hidden_size", 3));
	expect_run_error(&t, 3, in, "hidden_size is 3");
	free_all(in, 3);
}

Test(rnn, bad_shapes_and_lengths)
{
	mc_tensor *in[5];
	basic_inputs(in, 4); /* LSTM rows, given to a GRU */
	test_node t;
	node_init(&t, "GRU", 22);
	expect_run_error(&t, 3, in, "needs 3 x hidden_size");
	free_all(in, 3);

	basic_inputs(in, 1);
	in[3] = T2(MC_FLOAT, 1, 3, 0, 0, 0); /* B must be [1, 2] */
	node_init(&t, "RNN", 22);
	expect_run_error(&t, 4, in, "input 3 (B)");
	mc_tensor_free(in[3]);
	in[3] = NULL;
	in[4] = tensor(MC_INT32, 1, (int64_t[]){1}, (double[]){3}); /* > seq_length 2 */
	node_init(&t, "RNN", 22);
	expect_run_error(&t, 5, in, "sequence_lens[0] = 3");
	free_all(in, 5);

	in[0] = tensor(MC_INT32, 3, (int64_t[]){2, 1, 1}, NULL);
	in[1] = tensor(MC_INT32, 3, (int64_t[]){1, 1, 1}, NULL);
	in[2] = tensor(MC_INT32, 3, (int64_t[]){1, 1, 1}, NULL);
	node_init(&t, "RNN", 22);
	expect_run_error(&t, 3, in, "dtype int32");
	free_all(in, 3);
}
