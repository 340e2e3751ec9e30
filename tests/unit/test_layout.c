/* Channels-last layout: the internal ops NhwcConv, NhwcMaxPool and
 * NhwcAveragePool (libcore/ops/nhwc.c) against their ONNX ops on
 * transposed data, their lowerings (aot/lower_nhwc.c) against the
 * reference, and the layout pass (freezing/layout.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../aot/aot.h"
#include "../../freezing/freezing.h"
#include "compile_helpers.h"
#include "model_builder.h"
#include "op_harness.h"

/* ---- running one node of a given registry entry ---- */

/* parse, infer and eval of op on inputs in[0..n_in) (all runtime values);
 * the single output, or NULL after an error. */
static mc_tensor *run_entry(const mc_op *op, const char *op_type, mc_attr *attrs, int n_attrs,
                            mc_tensor *const *in, int n_in)
{
	cr_assert_not_null(op, "%s is not registered", op_type);
	int inputs[4], outputs[1] = {4};
	mc_value vin[4], vout = {.name = (char *)"out"};
	const mc_value *pin[4];
	mc_value *pout[1] = {&vout};
	for (int k = 0; k < n_in; k++) {
		inputs[k] = k;
		vin[k] = (mc_value){.name = (char *)"in", .kind = MC_VAL_INPUT, .dtype = in[k]->dtype,
		                    .shape = in[k]->shape, .typed = true};
		pin[k] = &vin[k];
	}
	mc_node n = {.name = (char *)"n", .op_type = (char *)op_type, .domain = (char *)"",
	             .opset = 19, .op = op, .n_inputs = n_in, .n_outputs = 1, .inputs = inputs,
	             .outputs = outputs, .n_attrs = n_attrs, .attrs = attrs};
	capture_diags();
	mc_tensor *y = NULL;
	int rc = op->parse ? op->parse(&n) : 0;
	mc_infer_ctx ic = {.node = &n, .n_in = n_in, .n_out = 1, .in = pin, .out = pout};
	if (!rc)
		rc = op->infer(&ic);
	if (!rc) {
		y = mc_tensor_new(vout.dtype, &vout.shape);
		mc_eval_ctx ec = {.node = &n, .n_in = n_in, .n_out = 1,
		                  .in = (const mc_tensor *const *)in, .out = &y};
		rc = op->eval(&ec);
	}
	free(n.params);
	if (rc) {
		mc_tensor_free(y);
		return NULL;
	}
	return y;
}

/* t with its dims reordered: result dim i is t's dim perm[i]. */
static mc_tensor *permute(const mc_tensor *t, const int *perm)
{
	int rank = t->shape.rank;
	mc_shape s = {.rank = rank};
	for (int i = 0; i < rank; i++)
		s.dims[i] = t->shape.dims[perm[i]];
	mc_tensor *r = mc_tensor_new(t->dtype, &s);
	int64_t st[MC_MAX_RANK], pos[MC_MAX_RANK] = {0};
	mc_strides(&t->shape, st);
	for (size_t k = 0; k < r->numel; k++) {
		int64_t off = 0;
		for (int i = 0; i < rank; i++)
			off += pos[i] * st[perm[i]];
		mc_set_f(r, k, mc_get_f(t, (size_t)off));
		for (int i = rank - 1; i >= 0 && ++pos[i] == s.dims[i]; i--)
			pos[i] = 0;
	}
	return r;
}

static mc_tensor *to_nhwc(const mc_tensor *t)
{
	int perm[MC_MAX_RANK] = {0}, r = t->shape.rank;
	for (int i = 1; i < r - 1; i++)
		perm[i] = i + 1;
	perm[r - 1] = 1;
	return permute(t, perm);
}

static mc_tensor *to_nchw(const mc_tensor *t)
{
	int perm[MC_MAX_RANK] = {0}, r = t->shape.rank;
	perm[1] = r - 1;
	for (int i = 2; i < r; i++)
		perm[i] = i - 1;
	return permute(t, perm);
}

static mc_tensor *random_tensor(int rank, const int64_t *dims, unsigned seed)
{
	mc_tensor *t = tensor(MC_FLOAT, rank, dims, NULL);
	uint32_t s = seed * 2654435761u + 7u;
	for (size_t i = 0; i < t->numel; i++) {
		s = s * 1664525u + 1013904223u;
		mc_set_f(t, i, (double)(s >> 8) / 16777216.0 * 2.0 - 1.0);
	}
	return t;
}

/* The ONNX op on x (NCHW) and the internal op on x transposed give the
 * same values (the internal one transposed back). */
static void check_same(const char *onnx, mc_attr *attrs, int n_attrs, mc_tensor **in, int n_in)
{
	char internal[64];
	snprintf(internal, sizeof internal, "Nhwc%s", onnx);
	mc_tensor *want = run_entry(mc_registry_find(onnx, 19, NULL), onnx, attrs, n_attrs, in, n_in);
	cr_assert_not_null(want, "%s: %s", onnx, last_error);
	mc_tensor *nin[4];
	for (int k = 0; k < n_in; k++)
		nin[k] = k == 0 ? to_nhwc(in[0]) : in[k];
	mc_tensor *got = run_entry(mc_registry_find_internal(internal), internal, attrs, n_attrs, nin,
	                           n_in);
	cr_assert_not_null(got, "%s: %s", internal, last_error);
	mc_tensor *back = to_nchw(got);
	cr_assert(mc_shape_eq(&back->shape, &want->shape));
	for (size_t i = 0; i < want->numel; i++)
		cr_assert_float_eq(mc_get_f(back, i), mc_get_f(want, i), 1e-6, "%s element %zu", internal,
		                   i);
	mc_tensor_free(nin[0]);
	mc_tensor_free(got);
	mc_tensor_free(back);
	mc_tensor_free(want);
	free_all(in, n_in);
}

/* ---- the registry ---- */

Test(layout, internal_ops_are_hidden_from_models)
{
	static const char *const names[] = {"NhwcConv", "NhwcMaxPool", "NhwcAveragePool"};
	for (int i = 0; i < 3; i++) {
		bool known = true;
		cr_assert_null(mc_registry_find(names[i], 19, &known));
		cr_assert(!known, "%s is not a name a model may use", names[i]);
		const mc_op *op = mc_registry_find_internal(names[i]);
		cr_assert_not_null(op);
		cr_assert(op->flags & MC_OP_INTERNAL);
	}
	cr_assert_null(mc_registry_find_internal("Conv"), "ONNX ops are not internal");
}

/* ---- eval against the ONNX ops ---- */

Test(layout, conv_dense_pads_strides_bias)
{
	mc_attr a[] = {attr_ints("pads", (int64_t[]){1, 0, 2, 1}, 4),
	               attr_ints("strides", (int64_t[]){2, 1}, 2)};
	mc_tensor *in[] = {random_tensor(4, (int64_t[]){2, 3, 7, 6}, 1),
	                   random_tensor(4, (int64_t[]){5, 3, 3, 2}, 2),
	                   random_tensor(1, (int64_t[]){5}, 3)};
	check_same("Conv", a, 2, in, 3);
}

Test(layout, conv_depthwise_same_upper_dilated)
{
	mc_attr a[] = {attr_int("group", 4), attr_string("auto_pad", "SAME_UPPER"),
	               attr_ints("dilations", (int64_t[]){2, 1}, 2)};
	mc_tensor *in[] = {random_tensor(4, (int64_t[]){1, 4, 6, 5}, 4),
	                   random_tensor(4, (int64_t[]){4, 1, 3, 3}, 5)};
	check_same("Conv", a, 3, in, 2);
}

Test(layout, conv_grouped)
{
	mc_attr a[] = {attr_int("group", 2)};
	mc_tensor *in[] = {random_tensor(4, (int64_t[]){1, 4, 5, 5}, 6),
	                   random_tensor(4, (int64_t[]){6, 2, 2, 3}, 7),
	                   random_tensor(1, (int64_t[]){6}, 8)};
	check_same("Conv", a, 1, in, 3);
}

Test(layout, conv_1d_strided)
{
	mc_attr a[] = {attr_ints("strides", (int64_t[]){3}, 1)};
	mc_tensor *in[] = {random_tensor(3, (int64_t[]){1, 2, 20}, 9),
	                   random_tensor(3, (int64_t[]){3, 2, 5}, 10)};
	check_same("Conv", a, 1, in, 2);
}

Test(layout, maxpool_ceil_pads)
{
	mc_attr a[] = {attr_ints("kernel_shape", (int64_t[]){3, 3}, 2),
	               attr_ints("strides", (int64_t[]){2, 2}, 2),
	               attr_ints("pads", (int64_t[]){1, 1, 0, 0}, 4), attr_int("ceil_mode", 1)};
	mc_tensor *in[] = {random_tensor(4, (int64_t[]){2, 3, 8, 7}, 11)};
	check_same("MaxPool", a, 4, in, 1);
}

Test(layout, averagepool_count_include_pad)
{
	mc_attr a[] = {attr_ints("kernel_shape", (int64_t[]){3, 2}, 2),
	               attr_ints("pads", (int64_t[]){1, 1, 1, 0}, 4),
	               attr_int("count_include_pad", 1)};
	mc_tensor *in[] = {random_tensor(4, (int64_t[]){1, 3, 5, 6}, 12)};
	check_same("AveragePool", a, 3, in, 1);
}

Test(layout, averagepool_1d_excluding_pads)
{
	mc_attr a[] = {attr_ints("kernel_shape", (int64_t[]){4}, 1),
	               attr_ints("strides", (int64_t[]){2}, 1),
	               attr_ints("pads", (int64_t[]){2, 2}, 2)};
	mc_tensor *in[] = {random_tensor(3, (int64_t[]){1, 3, 9}, 13)};
	check_same("AveragePool", a, 3, in, 1);
}

Test(layout, infer_refuses_rank_2)
{
	mc_attr a[] = {attr_ints("kernel_shape", (int64_t[]){2}, 1)};
	mc_tensor *x = random_tensor(2, (int64_t[]){3, 4}, 14);
	mc_tensor *y = run_entry(mc_registry_find_internal("NhwcMaxPool"), "NhwcMaxPool", a, 1, &x, 1);
	cr_assert_null(y);
	cr_assert_not_null(strstr(last_error, "rank 3"), "%s", last_error);
	mc_tensor_free(x);
}

/* ---- lowerings: compiled code against the reference ---- */

/* Deterministic float initializer. */
static void init_random(mb *b, const char *name, const char *dims, size_t n, unsigned seed)
{
	float *v = malloc(n * sizeof *v);
	uint32_t s = seed * 2654435761u + 12345u;
	for (size_t i = 0; i < n; i++) {
		s = s * 1664525u + 1013904223u;
		v[i] = (float)((double)(s >> 8) / 16777216.0 * 2.0 - 1.0);
	}
	mb_init_floats(b, mb_main(b), name, dims, v, n);
	free(v);
}

/* Node 0 of b's model, an ONNX Conv or pool whose input the model already
 * declares channels-last, becomes its internal op; the graph is compiled
 * (isa as given), run on random inputs and compared with the reference
 * interpreter. */
static void check_lowered(mb *b, const char *isa)
{
	if (!host_runs_isa(isa)) {
		mb_free(b);
		return;
	}
	mc_graph *g = mb_import(b, ".", NULL);
	cr_assert_not_null(g);
	mc_node *n = &g->nodes[0];
	mc_opid internal = n->id == MC_OP_Conv ? MC_OP_NhwcConv
	                   : n->id == MC_OP_MaxPool ? MC_OP_NhwcMaxPool : MC_OP_NhwcAveragePool;
	mc_node_set_op(n, internal, n->opset);
	cr_assert_not_null(n->op);
	cr_assert_eq(n->op->parse(n), 0);
	cr_assert_eq(mc_infer_graph(g), 0, "%s", diag_all());
	mc_tensor *in[4] = {0}, *want[2] = {0}, *got[2] = {0};
	for (int i = 0; i < g->n_inputs; i++) {
		const mc_value *v = &g->values[g->inputs[i]];
		in[i] = random_tensor(v->shape.rank, v->shape.dims, 20u + (unsigned)i);
	}
	cr_assert_eq(mc_interp_run(g, in, want, NULL), 0);
	char *dir = make_temp_dir();
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.isa = isa;
	o.harness = true;
	o.no_stack_usage = true;
	cr_assert_eq(mc_compile_graph(g, NULL, dir, &o), 0, "%s", diag_all());
	int status;
	const char *cflags = strcmp(isa, "generic") ? "-std=c99 -O1 -march=native -Wall -Wextra -Werror"
	                                            : "-std=c99 -O1 -Wall -Wextra -Werror";
	cr_assert_eq(mc_run_harness(dir, "t", "cc", cflags, g, in, got, &status), 0, "%s", diag_all());
	for (size_t i = 0; i < want[0]->numel; i++)
		cr_assert_float_eq(mc_get_f(got[0], i), mc_get_f(want[0], i), 1e-5, "element %zu", i);
	rm_tree(dir);
	free(dir);
	mc_tensor_free(in[0]);
	mc_tensor_free(want[0]);
	mc_tensor_free(got[0]);
	mc_graph_free(g);
	mb_free(b);
}

/* x [1,7,6,4] NHWC, weight [M, 4/group, 3, 3], pads, stride, Relu. */
static mb *nhwc_conv_model(int64_t group, int64_t m)
{
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	char wdims[64], bdims[32];
	snprintf(wdims, sizeof wdims, "%lld,%lld,3,3", (long long)m, (long long)(4 / group));
	snprintf(bdims, sizeof bdims, "%lld", (long long)m);
	mb_input(b, g, "x", MC_FLOAT, "1,7,6,4");
	init_random(b, "w", wdims, (size_t)(m * (4 / group) * 9), 1);
	init_random(b, "bias", bdims, (size_t)m, 2);
	Onnx__NodeProto *n = mb_node(b, g, "Conv", "conv", "x,w,bias", "c");
	mb_attr_int(b, n, "group", group);
	mb_attr_ints(b, n, "strides", (int64_t[]){2, 1}, 2);
	mb_attr_ints(b, n, "pads", (int64_t[]){1, 0, 1, 2}, 4);
	mb_node(b, g, "Relu", "relu", "c", "y");
	mb_output(b, g, "y");
	return b;
}

Test(layout, lowered_conv_dense)
{
	check_lowered(nhwc_conv_model(1, 6), "generic");
	check_lowered(nhwc_conv_model(1, 6), "avx512");
}

Test(layout, lowered_conv_depthwise_and_grouped)
{
	check_lowered(nhwc_conv_model(4, 4), "generic");
	check_lowered(nhwc_conv_model(2, 6), "avx2");
}

static mb *nhwc_pool_model(const char *op, bool include_pad)
{
	mb *b = mb_new(19);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "2,7,6,3");
	Onnx__NodeProto *n = mb_node(b, g, op, "pool", "x", "y");
	mb_attr_ints(b, n, "kernel_shape", (int64_t[]){3, 3}, 2);
	mb_attr_ints(b, n, "strides", (int64_t[]){2, 2}, 2);
	mb_attr_ints(b, n, "pads", (int64_t[]){1, 1, 1, 0}, 4);
	mb_attr_int(b, n, "ceil_mode", 1);
	if (include_pad)
		mb_attr_int(b, n, "count_include_pad", 1);
	mb_output(b, g, "y");
	return b;
}

Test(layout, lowered_pools)
{
	check_lowered(nhwc_pool_model("MaxPool", false), "generic");
	check_lowered(nhwc_pool_model("AveragePool", false), "avx512");
	check_lowered(nhwc_pool_model("AveragePool", true), "generic");
}

/* ---- the layout pass ---- */

static int count_ops(const mc_graph *g, const char *op)
{
	int count = 0;
	for (int i = 0; i < g->n_nodes; i++)
		count += !strcmp(g->nodes[i].op_type, op);
	return count;
}

/* Frozen graph of b's model with the given --layout. */
static mc_graph *frozen(mb *b, const char *layout)
{
	mc_graph *g = mb_import(b, ".", NULL);
	cr_assert_not_null(g);
	cr_assert_eq(mc_infer_graph(g), 0, "%s", diag_all());
	mc_freeze_opts o = {.layout = layout};
	cr_assert_eq(mc_freeze(g, &o), 0, "%s", diag_all());
	return g;
}

/* x [1,8,9,9] -> Conv 3x3 (8->16) -> Relu -> depthwise Conv -> Add(residual
 * with a per-channel constant) -> MaxPool -> Concat(zeros on channels) ->
 * Pad(H, W) -> Slice(channels) -> y; and a Softmax over channels (which
 * needs the channels-first value) -> z. */
static mb *chain_model(void)
{
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "1,8,9,9");
	init_random(b, "w1", "16,8,3,3", 16 * 8 * 9, 3);
	init_random(b, "b1", "16", 16, 4);
	init_random(b, "w2", "16,1,3,3", 16 * 9, 5);
	init_random(b, "k", "16,1,1", 16, 6);
	mb_init_floats(b, g, "zeros", "1,4,4,4", (float[64]){0}, 64);
	mb_init_ints(b, g, "pads", MC_INT64, "8", (int64_t[]){0, 0, 1, 2, 0, 0, 2, 1}, 8);
	mb_init_ints(b, g, "starts", MC_INT64, "1", (int64_t[]){2}, 1);
	mb_init_ints(b, g, "ends", MC_INT64, "1", (int64_t[]){15}, 1);
	mb_init_ints(b, g, "axes", MC_INT64, "1", (int64_t[]){1}, 1);
	Onnx__NodeProto *n = mb_node(b, g, "Conv", "c1", "x,w1,b1", "a");
	mb_attr_ints(b, n, "pads", (int64_t[]){1, 1, 1, 1}, 4);
	mb_node(b, g, "Relu", "r", "a", "ra");
	n = mb_node(b, g, "Conv", "c2", "ra,w2", "d");
	mb_attr_int(b, n, "group", 16);
	mb_attr_ints(b, n, "pads", (int64_t[]){1, 1, 1, 1}, 4);
	mb_node(b, g, "Add", "add", "d,k", "e");
	n = mb_node(b, g, "MaxPool", "mp", "e", "f");
	mb_attr_ints(b, n, "kernel_shape", (int64_t[]){2, 2}, 2);
	mb_attr_ints(b, n, "strides", (int64_t[]){2, 2}, 2);
	n = mb_node(b, g, "Concat", "cat", "f,zeros", "h");
	mb_attr_int(b, n, "axis", 1);
	mb_node(b, g, "Pad", "pad", "h,pads", "p");
	mb_node(b, g, "Slice", "sl", "p,starts,ends,axes", "y");
	n = mb_node(b, g, "Softmax", "sm", "e", "z");
	mb_attr_int(b, n, "axis", 1);
	mb_output(b, g, "y");
	mb_output(b, g, "z");
	return b;
}

Test(layout, pass_keeps_transposes_at_the_boundary)
{
	mb *b = chain_model();
	mc_graph *g = frozen(b, NULL);
	cr_assert_eq(count_ops(g, "NhwcConv"), 2);
	cr_assert_eq(count_ops(g, "NhwcMaxPool"), 1);
	cr_assert_eq(count_ops(g, "Conv"), 0);
	/* x in, y out, e back for the Softmax */
	cr_assert_eq(count_ops(g, "Transpose"), 3, "got %d", count_ops(g, "Transpose"));
	mc_graph_free(g);
	mb_free(b);
}

Test(layout, pass_nchw_leaves_the_graph)
{
	mb *b = chain_model();
	mc_graph *g = frozen(b, "nchw");
	cr_assert_eq(count_ops(g, "NhwcConv"), 0);
	cr_assert_eq(count_ops(g, "Transpose"), 0);
	mc_graph_free(g);
	mb_free(b);
}

static mb *narrow_conv_model(void)
{
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "1,4,6,6");
	init_random(b, "w", "6,4,3,3", 6 * 4 * 9, 1);
	mb_node(b, g, "Conv", "conv", "x,w", "y");
	mb_output(b, g, "y");
	return b;
}

Test(layout, pass_auto_skips_narrow_convolutions)
{
	mb *b = narrow_conv_model(); /* 6 output channels */
	mc_graph *g = frozen(b, NULL);
	cr_assert_eq(count_ops(g, "NhwcConv"), 0);
	mc_graph_free(g);
	mb_free(b);
	b = narrow_conv_model();
	g = frozen(b, "nhwc");
	cr_assert_eq(count_ops(g, "NhwcConv"), 1);
	cr_assert_eq(count_ops(g, "Transpose"), 2);
	mc_graph_free(g);
	mb_free(b);
}

/* The branches of an If with a run-time condition are laid out too (silero
 * VAD is one such If around the whole model; its convolutions stayed
 * channels-first, 12x slower): each branch's Conv becomes an NhwcConv. */
Test(layout, pass_lays_out_run_time_if_branches)
{
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "1,8,9,9");
	mb_input(b, g, "cond", MC_BOOL, "");
	init_random(b, "w1", "16,8,3,3", 16 * 8 * 9, 3);
	init_random(b, "w2", "16,8,3,3", 16 * 8 * 9, 4);
	Onnx__GraphProto *tg = mb_graph(b, "then"), *eg = mb_graph(b, "else");
	Onnx__NodeProto *n = mb_node(b, tg, "Conv", "tc", "x,w1", "t_out");
	mb_attr_ints(b, n, "pads", (int64_t[]){1, 1, 1, 1}, 4);
	mb_output(b, tg, "t_out");
	n = mb_node(b, eg, "Conv", "ec", "x,w2", "e_out");
	mb_attr_ints(b, n, "pads", (int64_t[]){1, 1, 1, 1}, 4);
	mb_output(b, eg, "e_out");
	n = mb_node(b, g, "If", "if", "cond", "y");
	mb_attr_graph(b, n, "then_branch", tg);
	mb_attr_graph(b, n, "else_branch", eg);
	mb_output(b, g, "y");
	mc_graph *fg = frozen(b, NULL);
	int ifs = 0;
	for (int i = 0; i < fg->n_nodes; i++) {
		const mc_node *nd = &fg->nodes[i];
		if (nd->id != MC_OP_If)
			continue;
		ifs++;
		for (int a = 0; a < 2; a++) {
			const mc_graph *br = mc_attr_find(nd, a ? "else_branch" : "then_branch")->g;
			cr_assert_eq(count_ops(br, "NhwcConv"), 1, "branch %d", a);
			cr_assert_eq(count_ops(br, "Conv"), 0, "branch %d", a);
		}
	}
	cr_assert_eq(ifs, 1);
	mc_graph_free(fg);
	/* compiled, each branch gives the interpreter's answer */
	char *dir = make_temp_dir(), path[4200], xin[4200], cin[4200];
	snprintf(path, sizeof path, "%s/if.onnx", dir);
	cr_assert_eq(mb_write(b, path), 0);
	float x[8 * 9 * 9];
	for (int i = 0; i < 8 * 9 * 9; i++)
		x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
	snprintf(xin, sizeof xin, "%s/x.bin", dir);
	cr_assert_eq(write_file(xin, x, sizeof x), 0);
	for (unsigned char c = 0; c <= 1; c++) {
		snprintf(cin, sizeof cin, "%s/cond.bin", dir);
		cr_assert_eq(write_file(cin, &c, 1), 0);
		const char *names[] = { "x", "cond" }, *files[] = { xin, cin };
		mc_compile_opts o;
		mc_compile_opts_init(&o);
		o.name = "t";
		mc_verify_opts v;
		mc_verify_opts_init(&v);
		v.n_inputs = 2;
		v.input_names = names;
		v.input_files = files;
		cr_assert_eq(mc_verify(path, &o, &v), 0, "cond %d: %s", c, diag_all());
	}
	rm_tree(dir);
	free(dir);
	mb_free(b);
}

Test(layout, pass_compiled_matches_reference)
{
	cr_assert_eq(verify_model(chain_model(), 0), 0);
}

/* 1-D: Unsqueeze -> Conv(k 8, stride 3, 12 channels) -> Unsqueeze ->
 * Transpose(0,1,3,2), as melspectrogram. */
Test(layout, pass_1d_conv_unsqueeze_transpose)
{
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "1,40");
	mb_init_ints(b, g, "ax", MC_INT64, "1", (int64_t[]){1}, 1);
	init_random(b, "w", "12,1,8", 96, 7);
	mb_node(b, g, "Unsqueeze", "u1", "x,ax", "xu");
	Onnx__NodeProto *n = mb_node(b, g, "Conv", "c", "xu,w", "c");
	mb_attr_ints(b, n, "strides", (int64_t[]){3}, 1);
	mb_node(b, g, "Unsqueeze", "u2", "c,ax", "cu");
	n = mb_node(b, g, "Transpose", "t", "cu", "y");
	mb_attr_ints(b, n, "perm", (int64_t[]){0, 1, 3, 2}, 4);
	mb_output(b, g, "y");
	mc_graph *fg = frozen(b, NULL);
	cr_assert_eq(count_ops(fg, "NhwcConv"), 1);
	cr_assert_eq(count_ops(fg, "Transpose"), 0, "the output transpose cancels");
	mc_graph_free(fg);
	cr_assert_eq(verify_model(b, 0), 0);
}

/* A squeeze-and-excitation block, as EfficientNet's: Conv 3x3 (8 -> 16),
 * SiLU (Mul(x, Sigmoid(x))), GlobalAveragePool, Conv 1x1 (16 -> 4), SiLU,
 * Conv 1x1 (4 -> 16), Sigmoid, Mul(the activation, the scale): all of it
 * stays channels-last (the pool becomes a ReduceMean over the
 * alternative's spatial axes, the SiLUs Swish): a Transpose at the input
 * and one at the output only; compiled for generic and the vector ISAs,
 * it matches the reference. */
static mb *se_model(void)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "1,8,9,7");
	init_random(b, "w1", "16,8,3,3", 16 * 8 * 9, 21);
	init_random(b, "w2", "4,16,1,1", 4 * 16, 22);
	init_random(b, "b2", "4", 4, 23);
	init_random(b, "w3", "16,4,1,1", 16 * 4, 24);
	Onnx__NodeProto *n = mb_node(b, g, "Conv", "c1", "x,w1", "a");
	mb_attr_ints(b, n, "pads", (int64_t[]){1, 1, 1, 1}, 4);
	mb_node(b, g, "Sigmoid", "s1", "a", "as");
	mb_node(b, g, "Mul", "m1", "a,as", "act");
	mb_node(b, g, "GlobalAveragePool", "gap", "act", "sq");
	mb_node(b, g, "Conv", "c2", "sq,w2,b2", "e");
	mb_node(b, g, "Sigmoid", "s2", "e", "es");
	mb_node(b, g, "Mul", "m2", "es,e", "ea");
	mb_node(b, g, "Conv", "c3", "ea,w3", "f");
	mb_node(b, g, "Sigmoid", "s3", "f", "scale");
	mb_node(b, g, "Mul", "m3", "act,scale", "y");
	mb_output(b, g, "y");
	return b;
}

Test(layout, squeeze_excitation_stays_channels_last)
{
	mb *b = se_model();
	mc_graph *g = frozen(b, "nhwc");
	cr_assert_eq(count_ops(g, "NhwcConv"), 3);
	cr_assert_eq(count_ops(g, "GlobalAveragePool"), 0);
	cr_assert_eq(count_ops(g, "ReduceMean"), 1);
	cr_assert_eq(count_ops(g, "Swish"), 2);
	cr_assert_eq(count_ops(g, "Transpose"), 2, "got %d", count_ops(g, "Transpose"));
	mc_graph_free(g);
	mb_free(b);
	static const char *const isas[] = { "generic", "avx2", "avx512" };
	for (int i = 0; i < 3; i++)
		cr_assert_eq(verify_model_isa(se_model(), isas[i]), 0, "%s", isas[i]);
}

/* ConvNeXt's shape: x [1,8,5,5] -> a dense 1x1 Conv (8 -> 16), then two
 * blocks of a depthwise 3x3 Conv -> Transpose to channels-last -> MatMul
 * over channels -> Transpose back -> Mul by a per-channel scale -> Add the
 * block's input. */
static mb *convnext_model(void)
{
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "1,8,5,5");
	init_random(b, "w0", "16,8,1,1", 16 * 8, 11);
	mb_node(b, g, "Conv", "stem", "x,w0", "s0");
	for (int i = 0; i < 2; i++) {
		char nm[16][32];
		for (int k = 0; k < 16; k++)
			snprintf(nm[k], sizeof nm[k], "b%d_%d", i, k);
		init_random(b, nm[0], "16,1,3,3", 16 * 9, 12 + i);
		init_random(b, nm[1], "16,16", 16 * 16, 14 + i);
		init_random(b, nm[2], "16,1,1", 16, 16 + i);
		char in[64], out[32];
		snprintf(in, sizeof in, "s%d,%s", i, nm[0]);
		Onnx__NodeProto *n = mb_node(b, g, "Conv", nm[3], in, nm[4]);
		mb_attr_int(b, n, "group", 16);
		mb_attr_ints(b, n, "pads", (int64_t[]){1, 1, 1, 1}, 4);
		n = mb_node(b, g, "Transpose", nm[5], nm[4], nm[6]);
		mb_attr_ints(b, n, "perm", (int64_t[]){0, 2, 3, 1}, 4);
		snprintf(in, sizeof in, "%s,%s", nm[6], nm[1]);
		mb_node(b, g, "MatMul", nm[7], in, nm[8]);
		n = mb_node(b, g, "Transpose", nm[9], nm[8], nm[10]);
		mb_attr_ints(b, n, "perm", (int64_t[]){0, 3, 1, 2}, 4);
		snprintf(in, sizeof in, "%s,%s", nm[10], nm[2]);
		mb_node(b, g, "Mul", nm[11], in, nm[12]);
		snprintf(in, sizeof in, "%s,s%d", nm[12], i);
		snprintf(out, sizeof out, i ? "y" : "s%d", i + 1);
		mb_node(b, g, "Add", nm[13], in, out);
	}
	mb_output(b, g, "y");
	return b;
}

/* The model's transposes back to channels-first vanish: the residual sums
 * and the next block's convolution read the channels-last values. auto:
 * only x's and y's transposes stay. "depthwise" (cuda's): the dense Conv
 * stays channels-first, its output transposed once, for the first block
 * and the residual sum both. */
Test(layout, transposes_back_to_channels_first_vanish)
{
	const char *layouts[] = { NULL, "depthwise" };
	const int dense[] = { 0, 1 }, transposes[] = { 2, 2 };
	for (int i = 0; i < 2; i++) {
		mb *b = convnext_model();
		mc_graph *g = frozen(b, layouts[i]);
		cr_assert_eq(count_ops(g, "NhwcConv"), 3 - dense[i], "%s", layouts[i] ? layouts[i] : "auto");
		cr_assert_eq(count_ops(g, "Conv"), dense[i]);
		cr_assert_eq(count_ops(g, "Transpose"), transposes[i], "%s: got %d", layouts[i] ? layouts[i] : "auto",
		             count_ops(g, "Transpose"));
		mc_graph_free(g);
		mb_free(b);
		mc_compile_opts o;
		mc_compile_opts_init(&o);
		o.layout = layouts[i];
		cr_assert_eq(verify_model_with(convnext_model(), &o), 0, "%s", layouts[i] ? layouts[i] : "auto");
	}
	/* nchw: every one stays */
	mb *b = convnext_model();
	mc_graph *g = frozen(b, "nchw");
	cr_assert_eq(count_ops(g, "Transpose"), 4);
	mc_graph_free(g);
	mb_free(b);
}

/* A ViT's patch embedding: x [1,3,16,16] -> Conv 4x4 stride 4 (3->16) ->
 * Reshape [1,16,16] (channels, patches) -> Transpose(0,2,1) (patches,
 * channels) -> Add of a position table -> y. The Reshape merges h and w,
 * side by side in the channels-last alternative too: it reshapes that
 * ([1,16 patches,16]) and the model's Transpose of tokens vanishes; only
 * the input's remains. A reshape that splits the channels stays on the
 * channels-first value. */
static mb *patches_model(bool split_channels)
{
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "1,3,16,16");
	init_random(b, "w", "16,3,4,4", 16 * 3 * 16, 7);
	init_random(b, "pos", "1,16,16", 16 * 16, 8);
	if (split_channels)
		mb_init_ints(b, g, "shape", MC_INT64, "4", (int64_t[]){ 1, 4, 4, 16 }, 4);
	else
		mb_init_ints(b, g, "shape", MC_INT64, "3", (int64_t[]){ 1, 16, -1 }, 3);
	Onnx__NodeProto *n = mb_node(b, g, "Conv", "embed", "x,w", "c");
	mb_attr_ints(b, n, "kernel_shape", (int64_t[]){ 4, 4 }, 2);
	mb_attr_ints(b, n, "strides", (int64_t[]){ 4, 4 }, 2);
	mb_node(b, g, "Reshape", "flat", "c,shape", "r");
	if (split_channels) {
		mb_output(b, g, "r");
		return b;
	}
	n = mb_node(b, g, "Transpose", "tokens", "r", "t");
	mb_attr_ints(b, n, "perm", (int64_t[]){ 0, 2, 1 }, 3);
	mb_node(b, g, "Add", "add", "t,pos", "y");
	mb_output(b, g, "y");
	return b;
}

Test(layout, patches_reshaped_channels_last_need_no_transpose)
{
	mb *b = patches_model(false);
	mc_graph *g = frozen(b, "nhwc");
	cr_assert_eq(count_ops(g, "NhwcConv"), 1);
	cr_assert_eq(count_ops(g, "Transpose"), 1, "got %d", count_ops(g, "Transpose"));
	mc_graph_free(g);
	mb_free(b);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.layout = "nhwc";
	cr_assert_eq(verify_model_with(patches_model(false), &o), 0);
	/* [1,16,4,4] to [1,4,4,16] splits the channels: the value goes back
	 * channels-first for it */
	b = patches_model(true);
	g = frozen(b, "nhwc");
	cr_assert_eq(count_ops(g, "Transpose"), 2, "got %d", count_ops(g, "Transpose"));
	mc_graph_free(g);
	mb_free(b);
	cr_assert_eq(verify_model_with(patches_model(true), &o), 0);
}
