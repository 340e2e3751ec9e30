/* Scan compiled by unrolling (freezing/unroll.c): models built as ONNX
 * protobufs, compiled to C, built, run and compared with the reference
 * interpreter (which runs the Scan itself); the Scans the compiler must
 * refuse, with the reason; and the graph the pass leaves. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../freezing/freezing.h"
#include "compile_helpers.h"

#define F32 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define I64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

/* body(s[2], a[2], b[2]) -> (s + a * b, (s + a * b) * k): k is the main
 * graph's initializer, read by the body as a captured value. */
static Onnx__GraphProto *mac_body(mb *b)
{
	Onnx__GraphProto *body = mb_graph(b, "body");
	mb_input(b, body, "s", F32, "2");
	mb_input(b, body, "a", F32, "2");
	mb_input(b, body, "c", F32, "2");
	mb_node(b, body, "Mul", "mul", "a,c", "ac");
	mb_node(b, body, "Add", "add", "s,ac", "s_out");
	mb_node(b, body, "Mul", "scale", "s_out,k", "y_t");
	mb_output(b, body, "s_out");
	mb_output(b, body, "y_t");
	return body;
}

/* Opset 16: x [2, len] read along axis 1 backwards, z [len, 2] along axis
 * 0 forwards; y stacked along axis 1, filled from the end with out_dir. */
static mb *scan9_model(int64_t out_dir, int len)
{
	mb *b = mb_new(16);
	Onnx__GraphProto *g = mb_main(b);
	char x_dims[32], z_dims[32];
	snprintf(x_dims, sizeof x_dims, "2,%d", len);
	snprintf(z_dims, sizeof z_dims, "%d,2", len);
	mb_input(b, g, "s0", F32, "2");
	mb_input(b, g, "x", F32, x_dims);
	mb_input(b, g, "z", F32, z_dims);
	mb_init_floats(b, g, "k", "2", (const float[]){0.5f, -2.0f}, 2);
	Onnx__NodeProto *n = mb_node(b, g, "Scan", "scan", "s0,x,z", "s,y");
	mb_attr_graph(b, n, "body", mac_body(b));
	mb_attr_int(b, n, "num_scan_inputs", 2);
	mb_attr_ints(b, n, "scan_input_axes", (const int64_t[]){-1, 0}, 2);
	mb_attr_ints(b, n, "scan_input_directions", (const int64_t[]){1, 0}, 2);
	mb_attr_ints(b, n, "scan_output_axes", (const int64_t[]){1}, 1);
	mb_attr_ints(b, n, "scan_output_directions", (const int64_t[]){out_dir}, 1);
	mb_output(b, g, "s");
	mb_output(b, g, "y");
	return b;
}

Test(unroll, scan9_axes_and_directions_compile)
{
	cr_assert_eq(verify_model(scan9_model(0, 5), 0), 0);
	cr_assert_eq(verify_model(scan9_model(1, 5), 0), 0);
}

/* Opset 8: batch 3, sequence_lens a constant [3, 1, 0]: a batch entry's
 * state stops after its length, its stacked slices past it are zero. */
static mb *scan8_model(bool lens_known)
{
	mb *b = mb_new(8);
	Onnx__GraphProto *g = mb_main(b);
	if (lens_known)
		mb_init_ints(b, g, "lens", I64, "3", (const int64_t[]){3, 1, 0}, 3);
	else
		mb_input(b, g, "lens", I64, "3");
	mb_input(b, g, "s0", F32, "3,2");
	mb_input(b, g, "x", F32, "3,3,2");
	mb_input(b, g, "z", F32, "3,3,2");
	mb_init_floats(b, g, "k", "2", (const float[]){1.5f, 3.0f}, 2);
	Onnx__NodeProto *n = mb_node(b, g, "Scan", "scan", "lens,s0,x,z", "s,y");
	mb_attr_graph(b, n, "body", mac_body(b));
	mb_attr_int(b, n, "num_scan_inputs", 2);
	mb_attr_ints(b, n, "directions", (const int64_t[]){1, 0}, 2);
	mb_output(b, g, "s");
	mb_output(b, g, "y");
	return b;
}

Test(unroll, scan8_batches_and_constant_sequence_lens_compile)
{
	cr_assert_eq(verify_model(scan8_model(true), 0), 0);
}

/* The compile error of b's model (b freed): every line joined. */
static char *compile_error(mb *b)
{
	char *dir = make_temp_dir(), model[4096], out[4096];
	snprintf(model, sizeof model, "%s/m.onnx", dir);
	snprintf(out, sizeof out, "%s/out", dir);
	cr_assert_eq(mb_write(b, model), 0);
	mb_free(b);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	diag_capture();
	cr_assert_neq(mc_compile(model, out, &o), 0, "compiled a Scan it should refuse");
	char *text = strdup(diag_all());
	rm_tree(dir);
	free(dir);
	return text;
}

Test(unroll, scans_that_cannot_unroll_are_refused_with_the_reason)
{
	char *why = compile_error(scan8_model(false));
	cr_assert(strstr(why, "Scan is compiled by unrolling its body, and this one cannot be: "
	                      "its sequence_lens is known only at run time"), "%s", why);
	free(why);

	/* 5000 iterations of a 3-node body */
	why = compile_error(scan9_model(0, 5000));
	cr_assert(strstr(why, "node 'scan' (Scan"), "%s", why);
	cr_assert(strstr(why, "5000 iterations of its 3-node body would make more than 4096 nodes"),
	          "%s", why);
	free(why);

	/* a body holding an If on a run-time condition */
	mb *b = mb_new(16);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "s0", F32, "2");
	mb_input(b, g, "x", F32, "3,2");
	mb_input(b, g, "cond", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, "");
	Onnx__GraphProto *body = mb_graph(b, "body"), *tg = mb_graph(b, "then"),
	                 *eg = mb_graph(b, "else");
	mb_input(b, body, "s", F32, "2");
	mb_input(b, body, "v", F32, "2");
	mb_node(b, tg, "Add", "t_add", "s,v", "t_out");
	mb_output(b, tg, "t_out");
	mb_node(b, eg, "Sub", "e_sub", "s,v", "e_out");
	mb_output(b, eg, "e_out");
	Onnx__NodeProto *n = mb_node(b, body, "If", "pick", "cond", "s_out");
	mb_attr_graph(b, n, "then_branch", tg);
	mb_attr_graph(b, n, "else_branch", eg);
	mb_node(b, body, "Identity", "copy", "s_out", "y_t");
	mb_output(b, body, "s_out");
	mb_output(b, body, "y_t");
	n = mb_node(b, g, "Scan", "scan", "s0,x", "s,y");
	mb_attr_graph(b, n, "body", body);
	mb_attr_int(b, n, "num_scan_inputs", 1);
	mb_output(b, g, "s");
	mb_output(b, g, "y");
	why = compile_error(b);
	cr_assert(strstr(why, "its body's node 'pick' (If) holds a subgraph"), "%s", why);
	free(why);
}

/* After freezing: no Scan left, the body's nodes once per iteration
 * (two Muls and an Add each), a Gather per scan input and iteration. */
Test(unroll, the_pass_leaves_the_body_once_per_iteration)
{
	mb *b = scan9_model(0, 5);
	mc_graph *g = mb_import(b, ".", NULL);
	cr_assert_not_null(g);
	cr_assert_eq(mc_infer_graph(g), 0);
	mc_freeze_opts o = {0};
	cr_assert_eq(mc_freeze(g, &o), 0, "%s", diag_all());
	int scans = 0, gathers = 0, muls = 0, adds = 0, concats = 0;
	for (int i = 0; i < g->n_nodes; i++) {
		const char *op = g->nodes[i].op_type;
		scans += !strcmp(op, "Scan");
		gathers += !strcmp(op, "Gather");
		muls += !strcmp(op, "Mul");
		adds += !strcmp(op, "Add");
		concats += !strcmp(op, "Concat");
	}
	cr_assert_eq(scans, 0);
	cr_assert_eq(gathers, 10);
	cr_assert_eq(muls, 10);
	cr_assert_eq(adds, 5);
	cr_assert_eq(concats, 1);
	mc_graph_free(g);
	mb_free(b);
}

/* Every unrolled iteration transposes the state the same way, planned at
 * the same arena offsets: kernels identical to the text, which GCC 12 merges
 * into one function. Its later calls must still run (MODELC_KERNEL_END):
 * built at -O2, as users build. */
Test(unroll, identical_kernels_each_run_at_O2)
{
	mb *b = mb_new(16);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "s0", F32, "2,8,8");
	mb_input(b, g, "x", F32, "4,2,8,1");
	Onnx__GraphProto *body = mb_graph(b, "body");
	mb_input(b, body, "s", F32, "2,8,8");
	mb_input(b, body, "v", F32, "2,8,1");
	Onnx__NodeProto *t = mb_node(b, body, "Transpose", "flip", "s", "st");
	mb_attr_ints(b, t, "perm", (const int64_t[]){0, 2, 1}, 3);
	mb_node(b, body, "MatMul", "read", "st,v", "r");
	mb_node(b, body, "Sub", "delta", "v,r", "d");
	Onnx__NodeProto *tv = mb_node(b, body, "Transpose", "row", "d", "dr");
	mb_attr_ints(b, tv, "perm", (const int64_t[]){0, 2, 1}, 3);
	mb_node(b, body, "MatMul", "outer", "v,dr", "w");
	mb_node(b, body, "Add", "write", "s,w", "s_out");
	mb_node(b, body, "MatMul", "out", "s_out,v", "y_t");
	mb_output(b, body, "s_out");
	mb_output(b, body, "y_t");
	Onnx__NodeProto *n = mb_node(b, g, "Scan", "scan", "s0,x", "s,y");
	mb_attr_graph(b, n, "body", body);
	mb_attr_int(b, n, "num_scan_inputs", 1);
	mb_output(b, g, "s");
	mb_output(b, g, "y");
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	cr_assert_eq(verify_model_cflags(b, &o, "-std=c99 -O2 -Wall -Wextra -Werror"), 0);
}

/* ---- Loop ---- */

/* A for loop (trip count 4, no condition input): x <- x * w + i, each
 * iteration's x stacked (with_scan); w is a run-time input the body
 * captures. */
static mb *for_loop_model(const char *cond_input, bool trip_known, bool with_scan)
{
	mb *b = mb_new(16);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x0", F32, "3");
	mb_input(b, g, "w", F32, "3");
	if (trip_known)
		mb_init_ints(b, g, "trip", I64, "", (const int64_t[]){4}, 1);
	else
		mb_input(b, g, "trip", I64, "");
	if (cond_input[0])
		mb_input(b, g, cond_input, ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, "");
	Onnx__GraphProto *body = mb_graph(b, "body");
	mb_input(b, body, "i", I64, "");
	mb_input(b, body, "c", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, "");
	mb_input(b, body, "x", F32, "3");
	Onnx__NodeProto *cast = mb_node(b, body, "Cast", "to_float", "i", "fi");
	mb_attr_int(b, cast, "to", F32);
	mb_node(b, body, "Mul", "scale", "x,w", "xw");
	mb_node(b, body, "Add", "shift", "xw,fi", "x_out");
	mb_node(b, body, "Identity", "keep_going", "c", "c_out");
	mb_output(b, body, "c_out");
	mb_output(b, body, "x_out");
	if (with_scan) {
		mb_node(b, body, "Identity", "record", "x_out", "y_t");
		mb_output(b, body, "y_t");
	}
	char ins[64];
	snprintf(ins, sizeof ins, "trip,%s,x0", cond_input);
	Onnx__NodeProto *n = mb_node(b, g, "Loop", "for_loop", ins, with_scan ? "x,y" : "x");
	mb_attr_graph(b, n, "body", body);
	mb_output(b, g, "x");
	if (with_scan)
		mb_output(b, g, "y");
	return b;
}

Test(unroll, for_loop_compiles)
{
	cr_assert_eq(verify_model(for_loop_model("", true, true), 0), 0);
	cr_assert_eq(verify_model(for_loop_model("", true, false), 0), 0);
}

/* The body sums the first i + 1 rows of a run-time input: a slice whose
 * shape depends on the iteration number, so the body is typed once per
 * iteration and its copies typed again once unrolled. The condition is
 * the constant true, passed on by the body. */
static mb *prefix_sum_model(void)
{
	mb *b = mb_new(16);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "data", F32, "5,2");
	mb_input(b, g, "acc0", F32, "1,2");
	mb_init_ints(b, g, "trip", I64, "", (const int64_t[]){5}, 1);
	mb_const_bool(b, g, "go", true);
	Onnx__GraphProto *body = mb_graph(b, "body");
	mb_input(b, body, "i", I64, "");
	mb_input(b, body, "c", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, "");
	mb_input(b, body, "acc", F32, "1,2");
	mb_init_ints(b, body, "axes", I64, "1", (const int64_t[]){0}, 1);
	mb_init_ints(b, body, "one", I64, "1", (const int64_t[]){1}, 1);
	mb_init_ints(b, body, "zero", I64, "1", (const int64_t[]){0}, 1);
	mb_node(b, body, "Unsqueeze", "last", "i,axes", "s");
	mb_node(b, body, "Add", "end", "s,one", "e");
	mb_node(b, body, "Slice", "rows", "data,zero,e", "prefix");
	mb_node(b, body, "ReduceSum", "total", "prefix,axes", "r");
	mb_node(b, body, "Add", "sum", "acc,r", "acc_out");
	mb_node(b, body, "Identity", "keep_going", "c", "c_out");
	mb_output(b, body, "c_out");
	mb_output(b, body, "acc_out");
	mb_output(b, body, "r");
	Onnx__NodeProto *n = mb_node(b, g, "Loop", "rows", "trip,go,acc0", "acc,rows_out");
	mb_attr_graph(b, n, "body", body);
	mb_output(b, g, "acc");
	mb_output(b, g, "rows_out");
	return b;
}

Test(unroll, loop_reading_its_iteration_number_compiles)
{
	cr_assert_eq(verify_model(prefix_sum_model(), 0), 0);
}

/* Right after the pass, iteration t's slice holds t + 1 rows. */
Test(unroll, per_iteration_copies_are_typed_for_their_iteration)
{
	mb *b = prefix_sum_model();
	mc_graph *g = mb_import(b, ".", NULL);
	cr_assert_not_null(g);
	cr_assert_eq(mc_infer_graph(g), 0);
	cr_assert_eq(mc_pass_unroll(g, NULL), 1, "%s", diag_all());
	int slices = 0;
	for (int i = 0; i < g->n_nodes; i++) {
		const mc_node *n = &g->nodes[i];
		if (strcmp(n->op_type, "Slice"))
			continue;
		const mc_value *v = &g->values[n->outputs[0]];
		cr_assert_eq(v->shape.rank, 2);
		cr_assert_eq(v->shape.dims[0], slices + 1, "%s: %lld rows", v->name,
		             (long long)v->shape.dims[0]);
		slices++;
	}
	cr_assert_eq(slices, 5);
	mc_graph_free(g);
	mb_free(b);
}

Test(unroll, loops_without_a_known_count_are_refused_with_the_reason)
{
	char *why = compile_error(for_loop_model("", false, false));
	cr_assert(strstr(why, "Loop is compiled by unrolling its body, and this one cannot be: its "
	                      "iteration count is not known at compile time (the trip count is not a "
	                      "compile-time constant)"), "%s", why);
	free(why);
	why = compile_error(for_loop_model("cond", true, false));
	cr_assert(strstr(why, "(the condition input is not a compile-time constant)"), "%s", why);
	free(why);
}

/* --unroll-limit moves the bound: 700 iterations of a 3-node body with two
 * scan inputs make about 4200 nodes. */
Test(unroll, the_limit_is_an_option)
{
	mb *b = scan9_model(0, 700);
	mc_graph *g = mb_import(b, ".", NULL);
	cr_assert_not_null(g);
	cr_assert_eq(mc_infer_graph(g), 0);
	const mc_node *scan = NULL;
	for (int i = 0; i < g->n_nodes; i++)
		if (!strcmp(g->nodes[i].op_type, "Scan"))
			scan = &g->nodes[i];
	cr_assert_not_null(scan);
	char why[256];
	const char *r = mc_unroll_refusal(g, scan, 0, why, sizeof why);
	cr_assert(r && strstr(r, "more than 4096 nodes (--unroll-limit)"), "%s", r ? r : "(none)");
	cr_assert_null(mc_unroll_refusal(g, scan, 5000, why, sizeof why));
	mc_freeze_opts o = {.unroll_limit = 5000};
	cr_assert_eq(mc_pass_unroll(g, &o), 1, "%s", diag_all());
	mc_graph_free(g);
	mb_free(b);
}
