/* Lowerings of the misc family (aot/lower_misc.c): small models are
 * compiled to C, built with the host compiler, run on random inputs and
 * compared with the reference interpreter (mc_verify); a few checks look
 * at the kernels themselves. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../aot/aot.h"
#include "compile_helpers.h"
#include "model_builder.h"

/* Deterministic values in [lo, hi). */
static void fill(float *v, size_t n, unsigned seed, float lo, float hi)
{
	uint32_t s = seed * 2654435761u + 12345u;
	for (size_t i = 0; i < n; i++) {
		s = s * 1664525u + 1013904223u;
		v[i] = lo + (hi - lo) * (float)((double)(s >> 8) / 16777216.0);
	}
}

static void init_random(mb *b, const char *name, const char *dims, size_t n, unsigned seed)
{
	float *v = malloc(n * sizeof *v);
	fill(v, n, seed, -1, 1);
	mb_init_floats(b, mb_main(b), name, dims, v, n);
	free(v);
}

static void init_floats(mb *b, const char *name, const char *dims, const float *v, size_t n)
{
	mb_init_floats(b, mb_main(b), name, dims, v, n);
}

static void init_ints(mb *b, const char *name, mc_dtype t, const char *dims, const int64_t *v,
                      size_t n)
{
	mb_init_ints(b, mb_main(b), name, (int)t, dims, v, n);
}

/* List attributes model_builder lacks: an int attribute turned into the
 * wanted kind, pointing at literals that outlive the model. */
static Onnx__AttributeProto *retype(mb *b, Onnx__NodeProto *n, const char *name,
                                    Onnx__AttributeProto__AttributeType type)
{
	mb_attr_int(b, n, name, 0);
	Onnx__AttributeProto *a = n->attribute[n->n_attribute - 1];
	a->has_i = 0;
	a->type = type;
	return a;
}

static void attr_strings(mb *b, Onnx__NodeProto *n, const char *name, ProtobufCBinaryData *v,
                         size_t count)
{
	Onnx__AttributeProto *a = retype(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
	a->strings = v;
	a->n_strings = count;
}

static void attr_floats(mb *b, Onnx__NodeProto *n, const char *name, float *v, size_t count)
{
	Onnx__AttributeProto *a = retype(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
	a->floats = v;
	a->n_floats = count;
}

#define LIT(s) { sizeof(s) - 1, (uint8_t *)(s) }

static int verify_folding(mb *b, size_t fold_limit)
{
	return verify_model(b, fold_limit);
}

static int verify(mb *b)
{
	return verify_model(b, 0);
}

/* ---- recurrent layers ---- */

/* LSTM over X [seq 4, batch 3, input 5], hidden 4: bidirectional, bias,
 * constant sequence lengths (one of them 0), initial states, peepholes,
 * all three outputs. */
static mb *lstm_model(int layout, bool clip)
{
	mb *b = mb_new(22);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, layout ? "3,4,5" : "4,3,5");
	init_random(b, "w", "2,16,5", 2 * 16 * 5, 1);
	init_random(b, "r", "2,16,4", 2 * 16 * 4, 2);
	init_random(b, "bias", "2,32", 2 * 32, 3);
	init_ints(b, "lens", MC_INT32, "3", (int64_t[]){4, 0, 2}, 3);
	mb_input(b, g, "h0", MC_FLOAT, layout ? "3,2,4" : "2,3,4");
	mb_input(b, g, "c0", MC_FLOAT, layout ? "3,2,4" : "2,3,4");
	init_random(b, "p", "2,12", 2 * 12, 4);
	Onnx__NodeProto *n = mb_node(b, g, "LSTM", "lstm", "x,w,r,bias,lens,h0,c0,p", "y,yh,yc");
	mb_attr_int(b, n, "hidden_size", 4);
	mb_attr_int(b, n, "layout", layout);
	mb_attr_string(b, n, "direction", "bidirectional");
	if (clip)
		mb_attr_float(b, n, "clip", 0.4f);
	mb_output(b, g, "y");
	mb_output(b, g, "yh");
	mb_output(b, g, "yc");
	return b;
}

Test(lower_misc, lstm_bidirectional_peepholes_lengths_both_layouts)
{
	cr_assert_eq(verify(lstm_model(0, false)), 0);
	cr_assert_eq(verify(lstm_model(1, true)), 0);
}

/* GRU, reverse, run-time sequence lengths, each linear_before_reset. */
Test(lower_misc, gru_reverse_runtime_lengths_linear_before_reset)
{
	for (int lbr = 0; lbr < 2; lbr++) {
		mb *b = mb_new(22);
		Onnx__GraphProto *g = mb_main(b);
		mb_input(b, g, "x", MC_FLOAT, "4,2,3");
		init_random(b, "w", "1,15,3", 15 * 3, 5);
		init_random(b, "r", "1,15,5", 15 * 5, 6);
		init_random(b, "bias", "1,30", 30, 7);
		mb_input(b, g, "lens", MC_INT32, "2"); /* verify feeds 0..3 */
		Onnx__NodeProto *n = mb_node(b, g, "GRU", "gru", "x,w,r,bias,lens", "y,yh");
		mb_attr_int(b, n, "hidden_size", 5);
		mb_attr_int(b, n, "linear_before_reset", lbr);
		mb_attr_string(b, n, "direction", "reverse");
		mb_output(b, g, "y");
		mb_output(b, g, "yh");
		cr_assert_eq(verify(b), 0, "linear_before_reset=%d", lbr);
	}
}

/* RNN with activations that take alpha and beta, from the lists in order. */
Test(lower_misc, rnn_activation_lists_with_alpha_beta)
{
	static ProtobufCBinaryData acts[] = {LIT("HardSigmoid"), LIT("LeakyRelu")};
	static float alpha[] = {0.3f, 0.05f}, beta[] = {0.4f};
	mb *b = mb_new(22);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "3,2,3");
	init_random(b, "w", "2,4,3", 2 * 4 * 3, 8);
	init_random(b, "r", "2,4,4", 2 * 4 * 4, 9);
	Onnx__NodeProto *n = mb_node(b, g, "RNN", "rnn", "x,w,r", "y");
	mb_attr_int(b, n, "hidden_size", 4);
	mb_attr_string(b, n, "direction", "bidirectional");
	attr_strings(b, n, "activations", acts, 2);
	attr_floats(b, n, "activation_alpha", alpha, 2);
	attr_floats(b, n, "activation_beta", beta, 1);
	mb_output(b, g, "y");
	cr_assert_eq(verify(b), 0);
}

/* The recurrent layers' fast path (constant W and R: row-vector products
 * through the register tiles, gates in vectors) on a vector ISA, hidden
 * sizes with a vector tail, batch 2: LSTM with peepholes, clip and both
 * layouts; GRU each linear_before_reset, bidirectional, with and without
 * a bias; RNN with activation lists. */
Test(lower_misc, recurrent_layers_on_vector_isas)
{
	static ProtobufCBinaryData acts[] = {LIT("HardSigmoid"), LIT("LeakyRelu")};
	static float alpha[] = {0.3f, 0.05f}, beta[] = {0.4f};
	/* the widest vectors this machine runs (the paths are the same for
	 * both; one ISA keeps the sanitized CI pass short) */
	const char *isa = host_runs_isa("avx512") ? "avx512" : "avx2";
	{
		cr_assert_eq(verify_model_isa(lstm_model(0, false), isa), 0, "%s", isa);
		cr_assert_eq(verify_model_isa(lstm_model(1, true), isa), 0, "%s", isa);
		for (int lbr = 0; lbr < 2; lbr++)
			for (int biased = 0; biased < 2; biased++) {
				mb *b = mb_new(22);
				Onnx__GraphProto *g = mb_main(b);
				mb_input(b, g, "x", MC_FLOAT, "6,2,19");
				init_random(b, "w", "2,60,19", 2 * 60 * 19, 12);
				init_random(b, "r", "2,60,20", 2 * 60 * 20, 13);
				if (biased)
					init_random(b, "bias", "2,120", 2 * 120, 14);
				Onnx__NodeProto *n = mb_node(b, g, "GRU", "gru", biased ? "x,w,r,bias" : "x,w,r", "y,yh");
				mb_attr_int(b, n, "hidden_size", 20);
				mb_attr_int(b, n, "linear_before_reset", lbr);
				mb_attr_string(b, n, "direction", "bidirectional");
				mb_output(b, g, "y");
				mb_output(b, g, "yh");
				cr_assert_eq(verify_model_isa(b, isa), 0, "%s lbr=%d bias=%d", isa, lbr, biased);
			}
		mb *b = mb_new(22);
		Onnx__GraphProto *g = mb_main(b);
		mb_input(b, g, "x", MC_FLOAT, "5,2,7");
		init_random(b, "w", "2,36,7", 2 * 36 * 7, 15);
		init_random(b, "r", "2,36,36", 2 * 36 * 36, 16);
		init_random(b, "bias", "2,72", 2 * 72, 17);
		Onnx__NodeProto *n = mb_node(b, g, "RNN", "rnn", "x,w,r,bias", "y");
		mb_attr_int(b, n, "hidden_size", 36);
		mb_attr_string(b, n, "direction", "bidirectional");
		attr_strings(b, n, "activations", acts, 2);
		attr_floats(b, n, "activation_alpha", alpha, 2);
		attr_floats(b, n, "activation_beta", beta, 1);
		mb_output(b, g, "y");
		cr_assert_eq(verify_model_isa(b, isa), 0, "%s rnn", isa);
	}
}

/* A GRU (gru 1) or LSTM with lengths that take the GEMV_F32 loop down
 * every path: reductions of 19 and 20 (16 k's a turn, then single ones),
 * 27 (16, 8, then single) and 12 (8, then single); the GRU's 60 rows end
 * in a padded block of 8. */
static mb *m4_recurrent_model(int gru, int lbr)
{
	mb *b = mb_new(22);
	Onnx__GraphProto *g = mb_main(b);
	int64_t in = gru ? 19 : 27, hs = gru ? 20 : 12, rows = (gru ? 3 : 4) * hs;
	char xd[32], wd[32], rd[32], bd[32];
	snprintf(xd, sizeof xd, "6,1,%" PRId64, in);
	snprintf(wd, sizeof wd, "1,%" PRId64 ",%" PRId64, rows, in);
	snprintf(rd, sizeof rd, "1,%" PRId64 ",%" PRId64, rows, hs);
	snprintf(bd, sizeof bd, "1,%" PRId64, 2 * rows);
	mb_input(b, g, "x", MC_FLOAT, xd);
	init_random(b, "w", wd, (size_t)(rows * in), 21);
	init_random(b, "r", rd, (size_t)(rows * hs), 22);
	init_random(b, "bias", bd, (size_t)(2 * rows), 23);
	Onnx__NodeProto *n = mb_node(b, g, gru ? "GRU" : "LSTM", "cell", "x,w,r,bias", "y,yh");
	mb_attr_int(b, n, "hidden_size", hs);
	if (gru)
		mb_attr_int(b, n, "linear_before_reset", lbr);
	mb_output(b, g, "y");
	mb_output(b, g, "yh");
	return b;
}

/* --isa cortex-m's recurrent layers (the GEMV_F32 template: on an FPU the
 * runtime's VLDM and VMLA loop, elsewhere its C; the steps as GRU_GATES or
 * LSTM_GATES: the runtime's loop or the generated one) give the same bits
 * on the emulated Cortex-M4 board as the same C built for this machine,
 * inputs past the gates' clamps included, and that C matches the
 * reference: a GRU each linear_before_reset (one fused step or the split
 * one), an LSTM. */
Test(lower_misc, recurrent_products_on_the_cortex_m4)
{
	for (int v = 0; v < 3; v++) {
		int gru = v < 2, lbr = v == 1;
		cr_assert_eq(verify_model_isa(m4_recurrent_model(gru, lbr), "cortex-m"), 0, "variant %d", v);
		mb *b = m4_recurrent_model(gru, lbr);
#if !defined(__SANITIZE_ADDRESS__)
		if (!have_board()) {
			mb_free(b);
			continue;
		}
		char *dir = make_temp_dir(), path[4200], out[4300];
		snprintf(path, sizeof path, "%s/model.onnx", dir);
		snprintf(out, sizeof out, "%s/out", dir);
		cr_assert_eq(mb_write(b, path), 0);
		mc_compile_opts o;
		mc_compile_opts_init(&o);
		o.name = "t";
		o.isa = "cortex-m";
		o.no_stack_usage = true;
		cr_assert_eq(mc_compile(path, out, &o), 0, "%s", diag_all());
		char *c = read_file_in(out, "t.c", NULL);
		cr_assert(c && strstr(c, "modelc_gemv8_f32("), "the products are not GEMV_F32 templates");
		const char *gates = !gru ? "modelc_lstm_gates_f32(" : lbr ? "modelc_gru_gates_f32(" : NULL;
		cr_assert(!gates || strstr(c, gates), "the step is not the gates' template: no %s", gates);
		free(c);
		mc_graph *g = mc_import_file(path, NULL);
		cr_assert_not_null(g);
		cr_assert_eq(mc_infer_graph(g), 0);
		mc_tensor *x = mc_tensor_new(MC_FLOAT, &g->values[g->inputs[0]].shape);
		fill(x->data, x->numel, 31, -3, 3);
		for (size_t i = 0; i < x->numel; i += 7) /* past the gates' clamps too */
			((float *)x->data)[i] = i % 2 ? 300.0f : -300.0f;
		mc_tensor *board[2], *host[2];
		for (int k = 0; k < 2; k++) {
			board[k] = mc_tensor_new(MC_FLOAT, &g->values[g->outputs[k]].shape);
			host[k] = mc_tensor_new(MC_FLOAT, &g->values[g->outputs[k]].shape);
		}
		cr_assert_eq(run_compiled(out, &x, 1, 2, true, board), 0);
		cr_assert_eq(run_compiled(out, &x, 1, 2, false, host), 0);
		for (int k = 0; k < 2; k++) {
			cr_expect_eq(memcmp(board[k]->data, host[k]->data, board[k]->nbytes), 0,
			             "variant %d output %d: the board's bits differ from this machine's", v, k);
			mc_tensor_free(board[k]);
			mc_tensor_free(host[k]);
		}
		mc_tensor_free(x);
		mc_graph_free(g);
		rm_tree(dir);
		free(dir);
#endif
		mb_free(b);
	}
}

/* A run-time sequence length is checked inside the kernel. */
Test(lower_misc, rnn_runtime_lengths_are_checked)
{
	mb *b = mb_new(22);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "2,1,3");
	init_random(b, "w", "1,4,3", 12, 10);
	init_random(b, "r", "1,4,4", 16, 11);
	mb_input(b, g, "lens", MC_INT64, "1");
	mb_node(b, g, "RNN", "rnn", "x,w,r,,lens", ",yh");
	mb_output(b, g, "yh");
	mc_program p;
	mc_graph *gr = program_of(b, &p);
	cr_assert_eq(p.n_kernels, 1);
	char *text = kernel_text(p.kernels[0]);
	cr_assert_not_null(strstr(text, "fail 4"), "a bad length fails with BAD_INPUT:\n%s", text);
	free(text);
	mc_program_free(&p);
	mc_graph_free(gr);
	mb_free(b);
}

/* ---- signal ---- */

/* Onesided inverse DFT with an odd dft_length along axis 1 (opset 20). */
Test(lower_misc, dft_irfft_odd_length_and_complex_forward)
{
	mb *b = mb_new(20);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "2,5,3,2");
	init_ints(b, "len", MC_INT64, "", (int64_t[]){9}, 1);
	init_ints(b, "axis", MC_INT64, "", (int64_t[]){1}, 1);
	Onnx__NodeProto *n = mb_node(b, g, "DFT", "dft", "x,len,axis", "y");
	mb_attr_int(b, n, "inverse", 1);
	mb_attr_int(b, n, "onesided", 1);
	mb_output(b, g, "y");
	cr_assert_eq(verify(b), 0);

	b = mb_new(19);
	g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "4,7,2");
	n = mb_node(b, g, "DFT", "dft", "x", "y");
	mb_attr_int(b, n, "axis", 0);
	mb_output(b, g, "y");
	cr_assert_eq(verify(b), 0);
}

Test(lower_misc, dft_fuses_an_epilogue)
{
	mb *b = mb_new(20);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "2,8,1");
	mb_node(b, g, "DFT", "dft", "x", "f");
	mb_node(b, g, "Relu", "relu", "f", "y");
	mb_output(b, g, "y");
	mc_program p;
	mc_graph *gr = program_of(b, &p);
	cr_assert_eq(p.n_kernels, 1, "DFT + Relu is one kernel, got %d", p.n_kernels);
	mc_program_free(&p);
	mc_graph_free(gr);
	mb_free(b);
}

Test(lower_misc, stft_with_window)
{
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "2,40,1");
	init_ints(b, "step", MC_INT64, "", (int64_t[]){6}, 1);
	init_random(b, "win", "11", 11, 12);
	Onnx__NodeProto *n = mb_node(b, g, "STFT", "stft", "x,step,win", "y");
	mb_attr_int(b, n, "onesided", 1);
	mb_output(b, g, "y");
	cr_assert_eq(verify(b), 0);
}

/* A run-time axis: verify feeds 0..3, every one valid for rank 4. */
Test(lower_misc, cumprod_runtime_axis_and_exclusive_reverse)
{
	mb *b = mb_new(26);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "2,3,2,4");
	mb_input(b, g, "axis", MC_INT32, "");
	mb_node(b, g, "CumProd", "cp", "x,axis", "y");
	mb_output(b, g, "y");
	cr_assert_eq(verify(b), 0);

	b = mb_new(26);
	g = mb_main(b);
	mb_input(b, g, "x", MC_INT32, "3,5");
	init_ints(b, "axis", MC_INT64, "", (int64_t[]){-1}, 1);
	Onnx__NodeProto *n = mb_node(b, g, "CumProd", "cp", "x,axis", "y");
	mb_attr_int(b, n, "exclusive", 1);
	mb_attr_int(b, n, "reverse", 1);
	mb_output(b, g, "y");
	cr_assert_eq(verify(b), 0);
}

/* Windows and MelWeightMatrix fold; a 1-byte fold limit makes them kernels. */
Test(lower_misc, windows_and_mel_weight_matrix_unfolded)
{
	static const char *const ops[] = {"HannWindow", "HammingWindow", "BlackmanWindow"};
	for (int k = 0; k < 3; k++) {
		mb *b = mb_new(17);
		Onnx__GraphProto *g = mb_main(b);
		init_ints(b, "size", MC_INT64, "", (int64_t[]){10}, 1);
		mb_input(b, g, "z", MC_FLOAT, "10");
		Onnx__NodeProto *n = mb_node(b, g, ops[k], "win", "size", "w");
		mb_attr_int(b, n, "periodic", k != 1);
		mb_node(b, g, "Add", "add", "w,z", "y");
		mb_output(b, g, "y");
		cr_assert_eq(verify_folding(b, 1), 0, "%s", ops[k]);
	}
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	init_ints(b, "bins", MC_INT64, "", (int64_t[]){8}, 1);
	init_ints(b, "dft", MC_INT64, "", (int64_t[]){64}, 1);
	init_ints(b, "rate", MC_INT64, "", (int64_t[]){16000}, 1);
	init_floats(b, "lo", "", (float[]){20}, 1);
	init_floats(b, "hi", "", (float[]){7000}, 1);
	mb_input(b, g, "z", MC_FLOAT, "33,8");
	mb_node(b, g, "MelWeightMatrix", "mel", "bins,dft,rate,lo,hi", "m");
	mb_node(b, g, "Add", "add", "m,z", "y");
	mb_output(b, g, "y");
	cr_assert_eq(verify_folding(b, 1), 0);
}

/* ---- extra ---- */

Test(lower_misc, grid_sample_modes_and_paddings)
{
	static const char *const modes[] = {"linear", "nearest", "cubic"};
	static const char *const pads[] = {"zeros", "border", "reflection"};
	for (int m = 0; m < 3; m++)
		for (int pd = 0; pd < 3; pd++) {
			mb *b = mb_new(22);
			Onnx__GraphProto *g = mb_main(b);
			mb_input(b, g, "x", MC_FLOAT, "1,2,4,5");
			float grid[3 * 4 * 2];
			fill(grid, 24, 13, -1.6f, 1.6f);
			init_floats(b, "grid", "1,3,4,2", grid, 24);
			Onnx__NodeProto *n = mb_node(b, g, "GridSample", "gs", "x,grid", "y");
			mb_attr_string(b, n, "mode", modes[m]);
			mb_attr_string(b, n, "padding_mode", pads[pd]);
			mb_attr_int(b, n, "align_corners", pd == 1);
			mb_output(b, g, "y");
			cr_assert_eq(verify(b), 0, "mode %s, padding %s", modes[m], pads[pd]);
		}
}

Test(lower_misc, roi_align_avg_and_max)
{
	static const float rois[] = {0, 0, 3, 3, 1, 0.5f, 6.5f, 4, -2, -1, 9, 9, 5, 5, 1, 1};
	for (int max = 0; max < 2; max++) {
		mb *b = mb_new(16);
		Onnx__GraphProto *g = mb_main(b);
		mb_input(b, g, "x", MC_FLOAT, "2,3,7,8");
		init_floats(b, "rois", "4,4", rois, 16);
		init_ints(b, "bi", MC_INT64, "4", (int64_t[]){0, 1, 1, 0}, 4);
		Onnx__NodeProto *n = mb_node(b, g, "RoiAlign", "roi", "x,rois,bi", "y");
		mb_attr_string(b, n, "mode", max ? "max" : "avg");
		mb_attr_int(b, n, "output_height", 3);
		mb_attr_int(b, n, "output_width", 2);
		mb_attr_float(b, n, "spatial_scale", 0.9f);
		mb_output(b, g, "y");
		cr_assert_eq(verify(b), 0, "mode %s", max ? "max" : "avg");
	}
}

/* GQA with a past cache, a float mask, causal, softcap and every output. */
Test(lower_misc, attention_past_mask_causal_softcap_all_outputs)
{
	mb *b = mb_new(23);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "q", MC_FLOAT, "2,4,3,8");
	mb_input(b, g, "k", MC_FLOAT, "2,2,3,8");
	mb_input(b, g, "v", MC_FLOAT, "2,2,3,6");
	mb_input(b, g, "mask", MC_FLOAT, "3,6");
	mb_input(b, g, "pk", MC_FLOAT, "2,2,4,8");
	mb_input(b, g, "pv", MC_FLOAT, "2,2,4,6");
	Onnx__NodeProto *n = mb_node(b, g, "Attention", "att", "q,k,v,mask,pk,pv", "y,prk,prv,qk");
	mb_attr_int(b, n, "is_causal", 1);
	mb_attr_float(b, n, "softcap", 2.0f);
	mb_attr_int(b, n, "qk_matmul_output_mode", 2);
	mb_output(b, g, "y");
	mb_output(b, g, "prk");
	mb_output(b, g, "prv");
	mb_output(b, g, "qk");
	cr_assert_eq(verify(b), 0);
}

Test(lower_misc, rotary_embedding_interleaved_partial_with_positions)
{
	mb *b = mb_new(23);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "2,3,16");
	init_random(b, "cos", "6,2", 12, 14);
	init_random(b, "sin", "6,2", 12, 15);
	init_ints(b, "pos", MC_INT64, "2,3", (int64_t[]){0, 1, 2, 5, 4, 3}, 6);
	Onnx__NodeProto *n = mb_node(b, g, "RotaryEmbedding", "rope", "x,cos,sin,pos", "y");
	mb_attr_int(b, n, "interleaved", 1);
	mb_attr_int(b, n, "num_heads", 2);
	mb_attr_int(b, n, "rotary_embedding_dim", 4);
	mb_output(b, g, "y");
	cr_assert_eq(verify(b), 0);
}

Test(lower_misc, det_center_crop_pad)
{
	mb *b = mb_new(22);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "3,4,4");
	mb_node(b, g, "Det", "det", "x", "y");
	mb_output(b, g, "y");
	cr_assert_eq(verify(b), 0);

	b = mb_new(18);
	g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "5,6,3");
	init_ints(b, "shape", MC_INT64, "2", (int64_t[]){8, 3}, 2);
	Onnx__NodeProto *n = mb_node(b, g, "CenterCropPad", "ccp", "x,shape", "y");
	mb_attr_ints(b, n, "axes", (int64_t[]){0, 1}, 2);
	mb_output(b, g, "y");
	cr_assert_eq(verify(b), 0);
}
