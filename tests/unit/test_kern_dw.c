/* Fast channels-last kernels of depthwise convolutions (aot/kern_dw.c) and
 * pools (aot/kern_pool.c): models whose inputs are declared channels-last
 * get their Conv and pool nodes retyped to the internal ops, are compiled
 * for each ISA, built, run on random inputs and compared with the
 * reference interpreter; a few checks look at the kernels themselves. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../aot/aot.h"
#include "compile_helpers.h"
#include "model_builder.h"

/* ---- cases ---- */

typedef enum { EPI_NONE, EPI_RELU, EPI_RELU6, EPI_ADD } epilogue;

/* One depthwise Conv or pool on x [batch, (h,) w, c]: window k x k (k on a
 * rank-3 input), stride s, dilation d, pads {top, left, bottom, right}
 * (rank 3: {left, right} in pads[1] and pads[3]). */
typedef struct {
	int rank;
	int64_t c, h, w, k, s, d, pads[4];
	bool bias;
	epilogue epi;
	int64_t batch;
} win_case;

static int64_t out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe)
{
	return (in + pb + pe - ((k - 1) * d + 1)) / s + 1;
}

static void fill(float *v, size_t n, unsigned seed)
{
	uint32_t s = seed * 2654435761u + 12345u;
	for (size_t i = 0; i < n; i++) {
		s = s * 1664525u + 1013904223u;
		v[i] = (float)((double)(s >> 8) / 16777216.0 * 2.0 - 1.0);
	}
}

static void init_random(mb *b, const char *name, const char *dims, size_t n, unsigned seed)
{
	float *v = malloc(n * sizeof *v);
	fill(v, n, seed);
	mb_init_floats(b, mb_main(b), name, dims, v, n);
	free(v);
}

/* "1,h,w,c" or "1,w,c" */
static void data_dims(const win_case *wc, int64_t h, int64_t w, char *buf, size_t n)
{
	long long nb = wc->batch;
	if (wc->rank == 4)
		snprintf(buf, n, "%lld,%lld,%lld,%lld", nb, (long long)h, (long long)w, (long long)wc->c);
	else
		snprintf(buf, n, "%lld,%lld,%lld", nb, (long long)w, (long long)wc->c);
}

static void window_attrs(mb *b, Onnx__NodeProto *n, const win_case *wc)
{
	int nsp = wc->rank - 2;
	int64_t k[2] = { wc->k, wc->k }, s[2] = { wc->s, wc->s }, d[2] = { wc->d, wc->d };
	int64_t pads[4];
	if (nsp == 2)
		memcpy(pads, wc->pads, sizeof pads);
	else
		pads[0] = wc->pads[1], pads[1] = wc->pads[3];
	mb_attr_ints(b, n, "kernel_shape", k, (size_t)nsp);
	mb_attr_ints(b, n, "strides", s, (size_t)nsp);
	mb_attr_ints(b, n, "dilations", d, (size_t)nsp);
	mb_attr_ints(b, n, "pads", pads, 2 * (size_t)nsp);
}

/* Case i of a model: input xi, output yi; Conv (depthwise) with its
 * epilogue, or the pool op. */
static void add_case(mb *b, int i, const win_case *wc, const char *pool)
{
	Onnx__GraphProto *g = mb_main(b);
	char x[16], y[16], w[16], bias[16], c[16], dims[64], ins[64];
	snprintf(x, sizeof x, "x%d", i);
	snprintf(y, sizeof y, "y%d", i);
	snprintf(c, sizeof c, "c%d", i);
	data_dims(wc, wc->h, wc->w, dims, sizeof dims);
	mb_input(b, g, x, MC_FLOAT, dims);
	if (pool) {
		Onnx__NodeProto *n = mb_node(b, g, pool, NULL, x, y);
		window_attrs(b, n, wc);
		mb_output(b, g, y);
		return;
	}
	snprintf(w, sizeof w, "w%d", i);
	snprintf(bias, sizeof bias, "b%d", i);
	int64_t kh = wc->rank == 4 ? wc->k : 1, taps = kh * wc->k;
	if (wc->rank == 4)
		snprintf(dims, sizeof dims, "%lld,1,%lld,%lld", (long long)wc->c, (long long)wc->k,
		         (long long)wc->k);
	else
		snprintf(dims, sizeof dims, "%lld,1,%lld", (long long)wc->c, (long long)wc->k);
	init_random(b, w, dims, (size_t)(wc->c * taps), 10u + (unsigned)i);
	if (wc->bias) {
		snprintf(dims, sizeof dims, "%lld", (long long)wc->c);
		init_random(b, bias, dims, (size_t)wc->c, 30u + (unsigned)i);
	}
	snprintf(ins, sizeof ins, "%s,%s%s%s", x, w, wc->bias ? "," : "", wc->bias ? bias : "");
	Onnx__NodeProto *n = mb_node(b, g, "Conv", NULL, ins, wc->epi == EPI_NONE ? y : c);
	window_attrs(b, n, wc);
	mb_attr_int(b, n, "group", wc->c);
	char r[16], lo[16], hi[16];
	switch (wc->epi) {
	case EPI_NONE:
		break;
	case EPI_RELU:
		mb_node(b, g, "Relu", NULL, c, y);
		break;
	case EPI_RELU6:
		snprintf(lo, sizeof lo, "lo%d", i);
		snprintf(hi, sizeof hi, "hi%d", i);
		mb_init_floats(b, g, lo, "", (float[]){ 0 }, 1);
		mb_init_floats(b, g, hi, "", (float[]){ 6 }, 1);
		snprintf(ins, sizeof ins, "%s,%s,%s", c, lo, hi);
		mb_node(b, g, "Clip", NULL, ins, y);
		break;
	case EPI_ADD: /* a residual: another input of the output's shape */
		snprintf(r, sizeof r, "r%d", i);
		data_dims(wc, out_dim(wc->h, wc->k, wc->s, wc->d, wc->pads[0], wc->pads[2]),
		          out_dim(wc->w, wc->k, wc->s, wc->d, wc->pads[1], wc->pads[3]), dims,
		          sizeof dims);
		mb_input(b, g, r, MC_FLOAT, dims);
		snprintf(ins, sizeof ins, "%s,%s", c, r);
		mb_node(b, g, "Add", NULL, ins, y);
		break;
	}
	mb_output(b, g, y);
}

static mb *model_of(const win_case *cases, int n, const char *pool, bool count_pad,
                    bool ceil_mode)
{
	mb *b = mb_new(19);
	for (int i = 0; i < n; i++)
		add_case(b, i, &cases[i], pool);
	if (pool)
		for (size_t k = 0; k < mb_main(b)->n_node; k++) {
			if (count_pad)
				mb_attr_int(b, mb_main(b)->node[k], "count_include_pad", 1);
			if (ceil_mode)
				mb_attr_int(b, mb_main(b)->node[k], "ceil_mode", 1);
		}
	return b;
}

/* ---- compile, run, compare ---- */

/* Conv and pool nodes become their internal channels-last ops (the
 * model's inputs are declared channels-last already). */
static mc_graph *nhwc_graph(mb *b)
{
	mc_graph *g = mb_import(b, ".", NULL);
	cr_assert_not_null(g, "%s", diag_all());
	for (int k = 0; k < g->n_nodes; k++) {
		mc_node *n = &g->nodes[k];
		mc_opid internal = n->id == MC_OP_Conv      ? MC_OP_NhwcConv
		                   : n->id == MC_OP_MaxPool   ? MC_OP_NhwcMaxPool
		                   : n->id == MC_OP_AveragePool ? MC_OP_NhwcAveragePool
		                                               : MC_OP_NONE;
		if (internal == MC_OP_NONE)
			continue;
		mc_node_set_op(n, internal, n->opset);
		cr_assert_not_null(n->op);
		free(n->params);
		n->params = NULL;
		cr_assert_eq(n->op->parse(n), 0, "%s", diag_all());
	}
	cr_assert_eq(mc_infer_graph(g), 0, "%s", diag_all());
	return g;
}

static mc_tensor *random_input(const mc_value *v, unsigned seed)
{
	mc_tensor *t = mc_tensor_new(MC_FLOAT, &v->shape);
	fill(t->data, t->numel, seed);
	return t;
}

#define MAX_IO 32

/* Compiles b's model for isa, runs it and compares every output with the
 * interpreter's. */
static void check_isa(mb *b, const char *isa)
{
	if (!host_runs_isa(isa))
		return; /* the caller frees b */
	mc_graph *g = nhwc_graph(b);
	cr_assert_leq(g->n_inputs, MAX_IO);
	mc_tensor *in[MAX_IO] = { 0 }, *want[MAX_IO] = { 0 }, *got[MAX_IO] = { 0 };
	for (int i = 0; i < g->n_inputs; i++)
		in[i] = random_input(&g->values[g->inputs[i]], 50u + (unsigned)i);
	cr_assert_eq(mc_interp_run(g, in, want, NULL), 0, "%s", diag_all());
	char *dir = make_temp_dir();
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.isa = isa;
	o.harness = true;
	o.no_stack_usage = true;
	cr_assert_eq(mc_compile_graph(g, NULL, dir, &o), 0, "%s", diag_all());
	int status;
	const char *flags = strcmp(isa, "generic") == 0 ? "-std=c99 -O1 -Wall -Wextra -Werror"
	                                                 : "-std=c99 -O1 -march=native -Wall -Wextra -Werror";
	cr_assert_eq(mc_run_harness(dir, "t", "cc", flags, g, in, got, &status), 0, "%s: %s", isa,
	             diag_all());
	for (int o = 0; o < g->n_outputs; o++) {
		const float *gv = got[o]->data, *wv = want[o]->data;
		for (size_t i = 0; i < want[o]->numel; i++)
			cr_assert(fabsf(gv[i] - wv[i]) <= 1e-5f + 1e-5f * fabsf(wv[i]),
			          "%s: output %d element %zu: %.9g, want %.9g", isa, o, i, gv[i], wv[i]);
	}
	for (int i = 0; i < MAX_IO; i++) {
		mc_tensor_free(in[i]);
		mc_tensor_free(want[i]);
		mc_tensor_free(got[i]);
	}
	rm_tree(dir);
	free(dir);
	mc_graph_free(g);
}

static void check_all_isas(const win_case *cases, int n, const char *pool, bool count_pad,
                           bool ceil_mode)
{
	static const char *const isas[] = { "generic", "avx2", "avx512" };
	for (int i = 0; i < 3; i++) {
		mb *b = model_of(cases, n, pool, count_pad, ceil_mode);
		check_isa(b, isas[i]);
		mb_free(b);
	}
}

#define N_OF(a) ((int)(sizeof(a) / sizeof *(a)))

/* ---- depthwise convolutions ---- */

/* blazeface and mlsd's shapes: 3x3, stride 1 pads 1 and stride 2 pads
 * [0,0,1,1], with bias, Relu / ReLU6 / residual Add fused. */
static const win_case dw_models[] = {
	{ 4, 24, 9, 11, 3, 1, 1, { 1, 1, 1, 1 }, true, EPI_RELU, 1 },
	{ 4, 28, 8, 8, 3, 2, 1, { 0, 0, 1, 1 }, true, EPI_RELU6, 1 },
	{ 4, 42, 6, 13, 3, 1, 1, { 1, 1, 1, 1 }, true, EPI_ADD, 1 },
	{ 4, 96, 5, 5, 3, 1, 1, { 1, 1, 1, 1 }, false, EPI_NONE, 1 },
	{ 4, 32, 9, 9, 3, 2, 1, { 0, 0, 1, 1 }, true, EPI_NONE, 1 },
};

Test(kern_dw, model_shapes_fused_epilogues)
{
	check_all_isas(dw_models, N_OF(dw_models), NULL, false, false);
}

/* Odd channel counts (every chunk width and the scalar tail), 3x3 and
 * 5x5, strides 1 and 2, asymmetric pads, dilation 2. */
static const win_case dw_odd[] = {
	{ 4, 1, 7, 9, 3, 1, 1, { 1, 1, 1, 1 }, true, EPI_NONE, 1 },
	{ 4, 3, 6, 10, 3, 2, 1, { 1, 0, 0, 2 }, false, EPI_RELU, 1 },
	{ 4, 5, 9, 7, 5, 1, 1, { 2, 2, 2, 2 }, true, EPI_NONE, 1 },
	{ 4, 17, 11, 12, 5, 2, 1, { 1, 2, 2, 0 }, true, EPI_RELU6, 1 },
	{ 4, 24, 9, 10, 3, 1, 2, { 2, 2, 2, 2 }, true, EPI_NONE, 1 },
	{ 4, 28, 12, 9, 5, 2, 2, { 3, 1, 0, 4 }, false, EPI_NONE, 1 },
	{ 4, 42, 5, 17, 3, 1, 1, { 0, 2, 1, 0 }, true, EPI_NONE, 1 },
	{ 4, 20, 4, 30, 3, 1, 1, { 0, 0, 0, 0 }, true, EPI_NONE, 1 },
	{ 4, 13, 3, 3, 3, 1, 1, { 1, 1, 1, 1 }, true, EPI_NONE, 1 },
	{ 4, 9, 6, 14, 11, 1, 1, { 5, 5, 5, 5 }, true, EPI_NONE, 1 },
	{ 3, 17, 1, 20, 5, 1, 1, { 0, 2, 0, 2 }, true, EPI_NONE, 1 },
	{ 3, 8, 1, 33, 3, 2, 2, { 0, 1, 0, 3 }, false, EPI_RELU, 1 },
	{ 4, 20, 5, 6, 3, 2, 1, { 1, 1, 1, 1 }, true, EPI_ADD, 3 },
	{ 4, 7, 2, 3, 5, 1, 1, { 2, 2, 2, 2 }, true, EPI_NONE, 1 },
	{ 4, 16, 10, 19, 3, 3, 3, { 1, 2, 3, 4 }, true, EPI_NONE, 1 },
};

Test(kern_dw, odd_channels_windows_strides_dilations)
{
	check_all_isas(dw_odd, N_OF(dw_odd), NULL, false, false);
}

/* The kernel: weights packed, no padding branches, the epilogue inlined. */
Test(kern_dw, packed_weight_no_branches_fused_relu)
{
	mb *b = model_of(dw_models, 1, NULL, false, false);
	mc_graph *g = nhwc_graph(b);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.isa = "avx512";
	mc_program p;
	mc_target_config t;
	cr_assert_eq(mc_target_resolve(&o, &t), 0);
	cr_assert_eq(mc_build_program(g, &t, &o, &p), 0, "%s", diag_all());
	cr_assert_eq(p.n_kernels, 1, "Conv + Relu is one kernel, got %d", p.n_kernels);
	const mc_kernel *k = p.kernels[0];
	bool packed = false;
	for (int i = 0; i < k->n_bufs; i++)
		packed |= k->bufs[i].packed != NULL;
	char *text = kernel_text(k);
	cr_assert(packed, "the weight is packed:\n%s", text);
	cr_assert_null(strstr(text, "if "), "padding is handled by tap ranges:\n%s", text);
	cr_assert_not_null(strstr(text, " +16]"), "16-lane vectors:\n%s", text);
	cr_assert_not_null(strstr(text, " +8]"), "an 8-lane tail for C = 24:\n%s", text);
	free(text);
	mc_program_free(&p);
	mc_graph_free(g);
	mb_free(b);
}

/* ---- pools ---- */

static const win_case pool_cases[] = {
	{ 4, 1, 7, 9, 3, 2, 1, { 1, 1, 1, 1 }, false, EPI_NONE, 1 },
	{ 4, 5, 6, 10, 3, 2, 1, { 1, 0, 0, 2 }, false, EPI_NONE, 1 },
	{ 4, 17, 9, 7, 2, 2, 1, { 0, 0, 0, 0 }, false, EPI_NONE, 1 },
	{ 4, 24, 11, 12, 5, 1, 1, { 2, 1, 2, 2 }, false, EPI_NONE, 1 },
	{ 4, 28, 9, 10, 3, 2, 2, { 2, 2, 1, 1 }, false, EPI_NONE, 1 },
	{ 4, 42, 8, 8, 2, 2, 1, { 0, 0, 1, 1 }, false, EPI_NONE, 1 },
	{ 3, 3, 1, 20, 3, 2, 1, { 0, 1, 0, 2 }, false, EPI_NONE, 1 },
	{ 3, 20, 1, 15, 4, 3, 2, { 0, 0, 0, 3 }, false, EPI_NONE, 1 },
	{ 4, 12, 5, 6, 3, 2, 1, { 1, 1, 1, 1 }, false, EPI_NONE, 2 },
	{ 4, 6, 2, 3, 3, 1, 1, { 1, 1, 1, 1 }, false, EPI_NONE, 1 },
};

Test(kern_pool, maxpool)
{
	check_all_isas(pool_cases, N_OF(pool_cases), "MaxPool", false, false);
}

Test(kern_pool, maxpool_ceil_mode)
{
	check_all_isas(pool_cases, N_OF(pool_cases), "MaxPool", false, true);
}

Test(kern_pool, averagepool_excluding_pads)
{
	check_all_isas(pool_cases, N_OF(pool_cases), "AveragePool", false, false);
}

Test(kern_pool, averagepool_counting_pads_ceil_mode)
{
	check_all_isas(pool_cases, N_OF(pool_cases), "AveragePool", true, true);
	check_all_isas(pool_cases, N_OF(pool_cases), "AveragePool", true, false);
}

Test(kern_pool, vectors_over_channels)
{
	mb *b = model_of(pool_cases + 3, 1, "MaxPool", false, false);
	mc_graph *g = nhwc_graph(b);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.isa = "avx2";
	mc_program p;
	mc_target_config t;
	cr_assert_eq(mc_target_resolve(&o, &t), 0);
	cr_assert_eq(mc_build_program(g, &t, &o, &p), 0, "%s", diag_all());
	char *text = kernel_text(p.kernels[0]);
	cr_assert_not_null(strstr(text, " +8]"), "8-lane vectors:\n%s", text);
	cr_assert_null(strstr(text, "if "), "padding is handled by tap ranges:\n%s", text);
	free(text);
	mc_program_free(&p);
	mc_graph_free(g);
	mb_free(b);
}
