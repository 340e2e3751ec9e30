/* The fast dense channels-last convolution (aot/kern_conv.c): models whose
 * Conv nodes become NhwcConv (their inputs declared channels-last) with odd
 * shapes (M = 1, 3, 17, 24, 28, 42, 257; C = 1, 3, 5; pads, strides 2,
 * dilations 2, auto_pad, kernels 1x1, 1x3, 3x1, 3x3, 5x5, 1-D k = 512
 * stride 160; fused Relu and residual Add), compiled for generic, avx2 and
 * avx512, built with -march=native, run, and compared with the reference
 * interpreter; and a check that the fast kernel is the one used. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../aot/aot.h"
#include "compile_helpers.h"
#include "model_builder.h"

static const char *const isas[] = { "generic", "avx2", "avx512" };

static void init_random(mb *b, const char *name, const char *dims, size_t n, unsigned seed)
{
	float *v = malloc((n ? n : 1) * sizeof *v);
	uint32_t s = seed * 2654435761u + 12345u;
	for (size_t i = 0; i < n; i++) {
		s = s * 1664525u + 1013904223u;
		v[i] = (float)((double)(s >> 8) / 16777216.0 * 2.0 - 1.0);
	}
	mb_init_floats(b, mb_main(b), name, dims, v, n);
	free(v);
}

static mc_tensor *random_tensor(const mc_shape *s, unsigned seed)
{
	mc_tensor *t = mc_tensor_new(MC_FLOAT, s);
	uint32_t x = seed * 2654435761u + 7u;
	for (size_t i = 0; i < t->numel; i++) {
		x = x * 1664525u + 1013904223u;
		mc_set_f(t, i, (double)(x >> 8) / 16777216.0 * 2.0 - 1.0);
	}
	return t;
}

/* One convolution: input [n, h, w, c] channels-last (h 0: 1-D [n, w, c]),
 * weight [m, c, kh, kw]. */
typedef struct {
	int64_t n, h, w, c, m, kh, kw, sh, sw, dh, dw;
	int64_t pads[4];          /* h begin, w begin, h end, w end */
	const char *auto_pad;     /* NULL: explicit pads */
	bool bias;
	const char *epi;          /* NULL, "Relu" or "Add" (residual input r<i>, then Relu) */
} conv_case;

static void dims_str(char *buf, size_t len, const int64_t *d, int n)
{
	buf[0] = 0;
	for (int i = 0; i < n; i++)
		snprintf(buf + strlen(buf), len - strlen(buf), "%s%lld", i ? "," : "", (long long)d[i]);
}

static int64_t out_extent(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe,
                          const char *auto_pad)
{
	if (auto_pad)
		return (in + s - 1) / s;
	return (in + pb + pe - ((k - 1) * d + 1)) / s + 1;
}

/* Adds case i's input x<i>, weight, bias and Conv (+ epilogue), output y<i>. */
static void add_case(mb *b, int i, const conv_case *cc)
{
	Onnx__GraphProto *g = mb_main(b);
	bool one_d = cc->h == 0;
	char x[16], w[16], bias[16], y[16], c[16], r[16], a[16], d[128], ins[64];
	snprintf(x, sizeof x, "x%d", i);
	snprintf(w, sizeof w, "w%d", i);
	snprintf(bias, sizeof bias, "b%d", i);
	snprintf(y, sizeof y, "y%d", i);
	snprintf(c, sizeof c, "c%d", i);
	snprintf(r, sizeof r, "r%d", i);
	snprintf(a, sizeof a, "a%d", i);
	int64_t xd[4] = { cc->n, cc->h, cc->w, cc->c }, x1[3] = { cc->n, cc->w, cc->c };
	dims_str(d, sizeof d, one_d ? x1 : xd, one_d ? 3 : 4);
	mb_input(b, g, x, MC_FLOAT, d);
	int64_t wd[4] = { cc->m, cc->c, cc->kh, cc->kw }, w1[3] = { cc->m, cc->c, cc->kw };
	dims_str(d, sizeof d, one_d ? w1 : wd, one_d ? 3 : 4);
	init_random(b, w, d, (size_t)(cc->m * cc->c * cc->kh * cc->kw), 10u + (unsigned)i);
	snprintf(ins, sizeof ins, "%s,%s", x, w);
	if (cc->bias) {
		dims_str(d, sizeof d, &cc->m, 1);
		init_random(b, bias, d, (size_t)cc->m, 50u + (unsigned)i);
		snprintf(ins, sizeof ins, "%s,%s,%s", x, w, bias);
	}
	const char *conv_out = cc->epi ? c : y;
	Onnx__NodeProto *n = mb_node(b, g, "Conv", NULL, ins, conv_out);
	if (one_d) {
		mb_attr_ints(b, n, "strides", &cc->sw, 1);
		mb_attr_ints(b, n, "dilations", &cc->dw, 1);
		if (!cc->auto_pad)
			mb_attr_ints(b, n, "pads", (int64_t[]){ cc->pads[1], cc->pads[3] }, 2);
	} else {
		mb_attr_ints(b, n, "strides", (int64_t[]){ cc->sh, cc->sw }, 2);
		mb_attr_ints(b, n, "dilations", (int64_t[]){ cc->dh, cc->dw }, 2);
		if (!cc->auto_pad)
			mb_attr_ints(b, n, "pads", cc->pads, 4);
	}
	if (cc->auto_pad)
		mb_attr_string(b, n, "auto_pad", cc->auto_pad);
	if (cc->epi && strcmp(cc->epi, "Add") == 0) {
		int64_t oh = one_d ? 1 : out_extent(cc->h, cc->kh, cc->sh, cc->dh, cc->pads[0],
		                                    cc->pads[2], cc->auto_pad);
		int64_t ow = out_extent(cc->w, cc->kw, cc->sw, cc->dw, cc->pads[1], cc->pads[3],
		                        cc->auto_pad);
		int64_t od[4] = { cc->n, oh, ow, cc->m }, o1[3] = { cc->n, ow, cc->m };
		dims_str(d, sizeof d, one_d ? o1 : od, one_d ? 3 : 4);
		mb_input(b, g, r, MC_FLOAT, d);
		char add_in[40];
		snprintf(add_in, sizeof add_in, "%s,%s", c, r);
		mb_node(b, g, "Add", NULL, add_in, a);
		mb_node(b, g, "Relu", NULL, a, y);
	} else if (cc->epi) {
		mb_node(b, g, cc->epi, NULL, c, y);
	}
	mb_output(b, g, y);
}

/* Every Conv of g becomes NhwcConv (its input is already channels-last). */
static void to_internal(mc_graph *g)
{
	for (int i = 0; i < g->n_nodes; i++) {
		mc_node *n = &g->nodes[i];
		if (n->id != MC_OP_Conv)
			continue;
		free(n->params);
		n->params = NULL;
		mc_node_set_op(n, MC_OP_NhwcConv, n->opset);
		cr_assert_not_null(n->op);
		cr_assert_eq(n->op->parse(n), 0);
	}
}

/* The model of cases compiled for isa, run, compared with the reference:
 * max|err| <= 1e-5 + 1e-4 * max|ref| per output. */
static void check_cases(const conv_case *cases, int n_cases, const char *isa)
{
	if (!host_runs_isa(isa))
		return;
	mb *b = mb_new(17);
	for (int i = 0; i < n_cases; i++)
		add_case(b, i, &cases[i]);
	mc_graph *g = mb_import(b, ".", NULL);
	cr_assert_not_null(g);
	to_internal(g);
	cr_assert_eq(mc_infer_graph(g), 0);
	mc_tensor *in[32] = { 0 }, *want[16] = { 0 }, *got[16] = { 0 };
	cr_assert(g->n_inputs <= 32 && g->n_outputs <= 16);
	for (int i = 0; i < g->n_inputs; i++)
		in[i] = random_tensor(&g->values[g->inputs[i]].shape, 20u + (unsigned)i);
	cr_assert_eq(mc_interp_run(g, in, want, NULL), 0);
	char *dir = make_temp_dir();
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.isa = isa;
	o.harness = true;
	o.no_stack_usage = true;
	cr_assert_eq(mc_compile_graph(g, NULL, dir, &o), 0);
	int status;
	cr_assert_eq(mc_run_harness(dir, "t", "cc", "-std=c99 -O1 -march=native -Wall -Wextra -Werror",
	                            g, in, got, &status), 0, "--isa %s", isa);
	for (int k = 0; k < g->n_outputs; k++) {
		double ref = 0, err = 0;
		for (size_t i = 0; i < want[k]->numel; i++) {
			ref = fmax(ref, fabs(mc_get_f(want[k], i)));
			err = fmax(err, fabs(mc_get_f(got[k], i) - mc_get_f(want[k], i)));
		}
		cr_expect(err <= 1e-5 + 1e-4 * ref, "--isa %s output %d: max|err| %g, max|ref| %g", isa,
		          k, err, ref);
	}
	rm_tree(dir);
	free(dir);
	for (int i = 0; i < g->n_inputs; i++)
		mc_tensor_free(in[i]);
	for (int k = 0; k < g->n_outputs; k++) {
		mc_tensor_free(want[k]);
		mc_tensor_free(got[k]);
	}
	mc_graph_free(g);
	mb_free(b);
}

static void check_all_isas(const conv_case *cases, int n)
{
	for (size_t i = 0; i < sizeof isas / sizeof *isas; i++)
		check_cases(cases, n, isas[i]);
}

#define N_OF(a) ((int)(sizeof(a) / sizeof *(a)))

/* The program of case cc alone for isa, its Conv channels-last; *bp is
 * the model, for the caller to free with the graph and the program. */
static mc_graph *case_program(const conv_case *cc, const char *isa, mb **bp, mc_program *p)
{
	mb *b = mb_new(17);
	add_case(b, 0, cc);
	mc_graph *g = mb_import(b, ".", NULL);
	cr_assert_not_null(g);
	to_internal(g);
	cr_assert_eq(mc_infer_graph(g), 0);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.isa = isa;
	mc_target_config t;
	cr_assert_eq(mc_target_resolve(&o, &t), 0);
	cr_assert_eq(mc_build_program(g, &t, &o, p), 0);
	*bp = b;
	return g;
}

/* 2-D windows: pads, strides, dilations, odd kernels and channel counts. */
Test(kern_conv, windows_2d)
{
	static const conv_case cases[] = {
		{ 1, 9, 11, 5, 24, 3, 3, 1, 1, 1, 1, { 1, 1, 1, 1 }, NULL, true, "Relu" },
		{ 1, 7, 6, 3, 17, 3, 3, 2, 2, 1, 1, { 1, 0, 1, 2 }, NULL, true, NULL },
		{ 1, 12, 13, 1, 3, 5, 5, 1, 1, 2, 2, { 2, 2, 2, 2 }, NULL, false, NULL },
		{ 2, 5, 9, 5, 1, 1, 3, 1, 1, 1, 1, { 0, 1, 0, 1 }, NULL, true, NULL },
		{ 1, 6, 4, 3, 257, 3, 1, 1, 1, 1, 1, { 0, 0, 0, 0 }, NULL, false, NULL },
		{ 1, 9, 7, 3, 24, 3, 3, 2, 2, 1, 1, { 0 }, "SAME_UPPER", true, NULL },
		{ 1, 8, 10, 3, 28, 3, 3, 1, 2, 2, 1, { 1, 2, 0, 1 }, NULL, true, NULL },
		{ 1, 6, 20, 5, 24, 3, 3, 1, 1, 1, 1, { 1, 1, 1, 1 }, NULL, true, "Add" },
	};
	check_all_isas(cases, N_OF(cases));
}

/* 1x1: the flat GEMM (stride 1, no pads) and the strided one. */
Test(kern_conv, pointwise)
{
	static const conv_case cases[] = {
		{ 2, 5, 7, 5, 42, 1, 1, 1, 1, 1, 1, { 0 }, NULL, true, "Relu" },
		{ 1, 7, 7, 3, 28, 1, 1, 2, 2, 1, 1, { 0 }, NULL, false, NULL },
		{ 1, 16, 16, 96, 96, 1, 1, 1, 1, 1, 1, { 0 }, NULL, true, "Add" },
		{ 1, 3, 3, 17, 3, 1, 1, 1, 1, 1, 1, { 0 }, NULL, true, NULL },
	};
	check_all_isas(cases, N_OF(cases));
}

/* 1-D: the STFT-like k = 512 stride 160 (padded and not), dilation 2. */
Test(kern_conv, windows_1d)
{
	static const conv_case cases[] = {
		{ 1, 0, 1600, 1, 17, 1, 512, 1, 160, 1, 1, { 0, 256, 0, 256 }, NULL, false, NULL },
		{ 1, 0, 1200, 1, 24, 1, 512, 1, 160, 1, 1, { 0 }, NULL, true, NULL },
		{ 2, 0, 11, 3, 5, 1, 3, 1, 1, 1, 2, { 0, 2, 0, 1 }, NULL, true, "Relu" },
	};
	check_all_isas(cases, N_OF(cases));
}

/* The dense 3x3 of the speed target (64 -> 64 on 40x40). */
Test(kern_conv, dense_64x64_3x3)
{
	static const conv_case cases[] = {
		{ 1, 40, 40, 64, 64, 3, 3, 1, 1, 1, 1, { 1, 1, 1, 1 }, NULL, true, "Relu" },
	};
	check_all_isas(cases, N_OF(cases));
}

/* The fast kernel runs: a packed weight, and 16-lane vectors on avx512. */
Test(kern_conv, packs_weights_and_vectorises)
{
	static const conv_case cc = { 1, 6, 6, 8, 32, 3, 3, 1, 1, 1, 1, { 1, 1, 1, 1 }, NULL, true,
	                              NULL };
	mb *b;
	mc_program p;
	mc_graph *g = case_program(&cc, "avx512", &b, &p);
	cr_assert_eq(p.n_kernels, 1);
	const mc_kernel *k = p.kernels[0];
	char *text = kernel_text(k);
	cr_expect_not_null(strstr(text, "x16"), "16-lane vectors:\n%s", text);
	int packed = 0;
	for (int i = 0; i < k->n_bufs; i++)
		packed += k->bufs[i].packed != NULL;
	cr_expect_eq(packed, 2, "weight and bias packed:\n%s", text);
	cr_expect_null(strstr(text, "if "), "no branch on padding:\n%s", text);
	free(text);
	mc_program_free(&p);
	mc_graph_free(g);
	mb_free(b);
}

/* Winograd F(2x2, 3x3) (3x3, stride 1, both channel counts >= 16, vector
 * ISAs): odd output sizes (partial tiles), dilations (tiles of outputs d
 * apart, not covering the output exactly), asymmetric and no pads, channel
 * counts that are no lane multiple, a batch, several tile blocks, fused
 * Relu and residual Add. */
Test(kern_conv, winograd)
{
	static const conv_case cases[] = {
		{ 1, 9, 7, 16, 24, 3, 3, 1, 1, 1, 1, { 1, 1, 1, 1 }, NULL, true, "Relu" },
		{ 1, 12, 10, 37, 19, 3, 3, 1, 1, 1, 1, { 0, 1, 1, 0 }, NULL, true, NULL },
		{ 2, 5, 4, 20, 33, 3, 3, 1, 1, 1, 1, { 0, 0, 0, 0 }, NULL, false, NULL },
		{ 1, 23, 21, 16, 16, 3, 3, 1, 1, 1, 1, { 1, 1, 1, 1 }, NULL, true, "Add" },
		{ 1, 23, 19, 16, 20, 3, 3, 1, 1, 5, 5, { 5, 5, 5, 5 }, NULL, true, "Relu" },
		{ 1, 14, 13, 17, 16, 3, 3, 1, 1, 2, 3, { 2, 1, 0, 3 }, NULL, true, NULL },
	};
	check_all_isas(cases, N_OF(cases));
}

/* It is the Winograd kernel that runs there: a packed transformed weight
 * of 16 x C x M and two scratch areas; not on the generic ISA. */
Test(kern_conv, winograd_chosen)
{
	static const conv_case cc = { 1, 9, 7, 16, 24, 3, 3, 1, 1, 1, 1, { 1, 1, 1, 1 }, NULL, true,
	                              NULL };
	static const char *const names[] = { "avx512", "generic" };
	for (int i = 0; i < 2; i++) {
		mb *b;
		mc_program p;
		mc_graph *g = case_program(&cc, names[i], &b, &p);
		const mc_kernel *k = p.kernels[0];
		int scratch = scratch_buffers(k);
		size_t packed = 0;
		for (int j = 0; j < k->n_bufs; j++)
			if (k->bufs[j].packed)
				packed = k->bufs[j].count;
		if (i == 0) {
			cr_expect_eq(scratch, 2, "input and product blocks");
			cr_expect_eq(packed, (size_t)(16 * 16 * 24), "U packed: 16 x C rows of 16 + 8 columns");
		} else {
			cr_expect_eq(scratch, 0, "no Winograd on the generic ISA");
		}
		mc_program_free(&p);
		mc_graph_free(g);
		mb_free(b);
	}
}

/* A big U (16 x 64 x 160 packed: 768 KB) over an image of 49 tiles: one
 * block takes them all (U read once), the transforms' scratch sized for
 * 49 tiles rounded up to whole register tiles, not a 40-tile block. */
Test(kern_conv, winograd_whole_image)
{
	static const conv_case cc = { 1, 14, 14, 64, 160, 3, 3, 1, 1, 1, 1, { 1, 1, 1, 1 }, NULL, true,
	                              "Relu" };
	check_all_isas(&cc, 1);
	mb *b;
	mc_program p;
	mc_graph *g = case_program(&cc, "avx512", &b, &p);
	const mc_kernel *k = p.kernels[0];
	size_t v_count = 0; /* the first scratch: V, 16 x tiles x 64 */
	for (int j = 0; j < k->n_bufs && !v_count; j++)
		if (k->bufs[j].value < 0 && !k->bufs[j].packed)
			v_count = k->bufs[j].count;
	cr_expect_eq(scratch_buffers(k), 2, "V and X");
	cr_expect_geq(v_count, (size_t)(16 * 49 * 64), "V holds every tile: %zu", v_count);
	cr_expect_lt(v_count, (size_t)(16 * 60 * 64), "V holds one block: %zu", v_count);
	mc_program_free(&p);
	mc_graph_free(g);
	mb_free(b);
}

/* Big weights (over KT_BIG_B_BYTES packed, aot/kern.h) over small images:
 * 3x3 convolutions panel by panel over every output row (stride 1 on 7x7,
 * where Winograd's U would be big for 16 tiles, and stride 2), a strided
 * 1x1, and a flat 1x1 in K blocks with a residual Add after the last. */
static const conv_case big_weights[] = {
	{ 1, 7, 7, 64, 300, 3, 3, 1, 1, 1, 1, { 1, 1, 1, 1 }, NULL, true, "Relu" },
	{ 1, 9, 8, 64, 300, 3, 3, 2, 2, 1, 1, { 1, 1, 1, 1 }, NULL, true, NULL },
	{ 1, 6, 6, 512, 300, 1, 1, 2, 2, 1, 1, { 0 }, NULL, true, "Add" },
	{ 1, 7, 7, 512, 300, 1, 1, 1, 1, 1, 1, { 0 }, NULL, true, "Add" },
};

Test(kern_conv, big_weights_small_images)
{
	check_all_isas(big_weights, N_OF(big_weights));
}

/* The scratch buffers of case cc's kernel for isa. */
static int case_scratch(const conv_case *cc, const char *isa)
{
	mb *b;
	mc_program p;
	mc_graph *g = case_program(cc, isa, &b, &p);
	int scratch = scratch_buffers(p.kernels[0]);
	mc_program_free(&p);
	mc_graph_free(g);
	mb_free(b);
	return scratch;
}

/* The 7x7 one is not Winograd on avx512: it takes every output pixel in
 * flat tiles, over a padded copy of its input in K blocks (two scratch
 * areas: the copy and the partial sums, no transforms); the flat 1x1 is
 * K-blocked (one scratch: the partial sums). */
Test(kern_conv, big_weights_kernels)
{
	static const int cases[] = { 0, 3 }, want[] = { 2, 1 };
	for (int i = 0; i < 2; i++) {
		int scratch = case_scratch(&big_weights[cases[i]], "avx512");
		cr_expect_eq(scratch, want[i], "case %d: %d scratch buffer(s), not %d", cases[i], scratch,
		             want[i]);
	}
}

/* Short output rows over a small input: tiles over the flat index of
 * every output pixel (rows of a tile in different output rows and
 * images), padding from a zeroed copy: dilation along W (runs of one
 * channel vector), a batch of two with stride 2 and uneven pads, a
 * big weight with dilation in K blocks of one tap's channels, 1-D. */
static const conv_case flat_cases[] = {
	{ 1, 8, 7, 8, 40, 3, 3, 1, 1, 2, 2, { 2, 2, 2, 2 }, NULL, true, "Relu" },
	{ 2, 9, 9, 24, 36, 3, 3, 2, 2, 1, 1, { 1, 0, 0, 1 }, NULL, true, "Add" },
	{ 1, 7, 7, 64, 300, 3, 3, 1, 1, 2, 2, { 2, 2, 2, 2 }, NULL, true, NULL },
	{ 2, 0, 9, 16, 20, 1, 3, 1, 2, 1, 1, { 0, 1, 0, 1 }, NULL, true, "Relu" },
};

Test(kern_conv, flat_pixels)
{
	check_all_isas(flat_cases, N_OF(flat_cases));
}

/* Which takes a row (8 input channels: not Winograd): flat tiles on
 * avx512 (a padded copy; a 7-pixel row by rows would be a tile of 3 and
 * four of one), rows of tiles where the rows are long (200 pixels: a
 * rest tile and 2 border pixels are few beside the full tiles; no copy)
 * and on the scalar ISA. */
Test(kern_conv, flat_pixels_chosen)
{
	static const conv_case long_rows = { 1, 3, 200, 8, 40, 3, 3, 1, 1, 1, 1, { 1, 1, 1, 1 }, NULL,
	                                     true, NULL };
	static const struct {
		const conv_case *cc;
		const char *isa;
		int scratch;
	} checks[] = {
		{ &flat_cases[0], "avx512", 1 },
		{ &flat_cases[0], "generic", 0 },
		{ &long_rows, "avx512", 0 },
	};
	for (size_t i = 0; i < N_OF(checks); i++) {
		int scratch = case_scratch(checks[i].cc, checks[i].isa);
		cr_expect_eq(scratch, checks[i].scratch, "check %zu: %d scratch buffer(s), not %d", i,
		             scratch, checks[i].scratch);
	}
}

/* ---- --optimize memory: outputs written over a dying input ---- */

/* x [2, 10, 12, 8] channels-last, through
 *   y1 = Relu(Conv3x3(x) 8 -> 16)
 *   y2 = Relu(Conv3x3(y1) 16 -> 16 + y1)   rows up, delay 1, over y1
 *   y3 = Conv1x1(y2) 16 -> 32              rows down, growing over y2
 *   y4 = Conv5x5 pad 2 (y3) 32 -> 24       rows up, delay 2, shrinking
 *   y5 = Relu(Concat(y4, Conv1x1(x) 8 -> 8))  input 0 backwards, growing
 *   out = Conv1x1(y5) 32 -> 4 */
static mb *ring_model(void)
{
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "xl", MC_FLOAT, "2,10,12,8");
	Onnx__NodeProto *t = mb_node(b, g, "Transpose", "to_nchw", "xl", "x");
	mb_attr_ints(b, t, "perm", (const int64_t[]){ 0, 3, 1, 2 }, 4);
	static const struct { const char *w, *dims; size_t n; int64_t k; } ws[] = {
		{ "w1", "16,8,3,3", 16 * 8 * 9, 3 }, { "w2", "16,16,3,3", 16 * 16 * 9, 3 },
		{ "w3", "32,16,1,1", 32 * 16, 1 }, { "w4", "24,32,5,5", 24 * 32 * 25, 5 },
		{ "w5", "8,8,1,1", 64, 1 }, { "w6", "4,32,1,1", 128, 1 },
	};
	for (unsigned i = 0; i < sizeof ws / sizeof *ws; i++)
		init_random(b, ws[i].w, ws[i].dims, ws[i].n, 40 + i);
	init_random(b, "b1", "16", 16, 50);
	Onnx__NodeProto *n = mb_node(b, g, "Conv", "c1", "x,w1,b1", "c1");
	mb_attr_ints(b, n, "pads", (const int64_t[]){ 1, 1, 1, 1 }, 4);
	mb_node(b, g, "Relu", "r1", "c1", "y1");
	n = mb_node(b, g, "Conv", "c2", "y1,w2", "c2");
	mb_attr_ints(b, n, "pads", (const int64_t[]){ 1, 1, 1, 1 }, 4);
	mb_node(b, g, "Add", "a2", "c2,y1", "s2");
	mb_node(b, g, "Relu", "r2", "s2", "y2");
	mb_node(b, g, "Conv", "c3", "y2,w3", "y3");
	n = mb_node(b, g, "Conv", "c4", "y3,w4", "y4");
	mb_attr_ints(b, n, "pads", (const int64_t[]){ 2, 2, 2, 2 }, 4);
	mb_node(b, g, "Conv", "c5", "x,w5", "y5x");
	n = mb_node(b, g, "Concat", "cat", "y4,y5x", "cat");
	mb_attr_int(b, n, "axis", 1);
	mb_node(b, g, "Relu", "r5", "cat", "y5");
	mb_node(b, g, "Conv", "c6", "y5,w6", "out");
	mb_output(b, g, "out");
	return b;
}

/* Writes ring_model to dir/ring.onnx and compiles it with --optimize opt;
 * NAME.json's arena. */
static size_t ring_arena(const char *dir, const char *opt)
{
	char out[4096];
	char *path = save_model(ring_model(), dir, "ring.onnx");
	snprintf(out, sizeof out, "%s/%s", dir, opt);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "ring";
	o.optimize = opt;
	o.no_stack_usage = true;
	cr_assert_eq(mc_compile(path, out, &o), 0);
	free(path);
	return json_number(out, "ring.json", "arena_bytes");
}

Test(kern_conv, memory_rings_write_over_the_input_and_stay_exact)
{
	for (unsigned i = 0; i < sizeof isas / sizeof *isas; i++) {
		mc_compile_opts o;
		mc_compile_opts_init(&o);
		o.name = "t";
		o.isa = isas[i];
		o.optimize = "memory";
		if (strcmp(isas[i], "generic"))
			cr_assert_eq(verify_model_isa_with(ring_model(), &o), 0, "isa %s", isas[i]);
		else
			cr_assert_eq(verify_model_with(ring_model(), &o), 0);
	}
	char *dir = make_temp_dir();
	size_t speed = ring_arena(dir, "speed"), memory = ring_arena(dir, "memory");
	/* y1..y3 each take their input's place: the largest step (y3 and y4,
	 * 2 x 10 x 12 x (32 + 24) floats) holds the output alone plus rings */
	cr_assert_lt(memory, speed, "memory %zu, speed %zu", memory, speed);
	cr_assert_leq(memory, (size_t)2 * 10 * 12 * 32 * 4 + 8192, "memory %zu", memory);
	rm_tree(dir);
	free(dir);
}
