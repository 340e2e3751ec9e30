/* infer.c: typing every value, folding what is known at compile time.
 * Graphs use only If, Constant and initializers. */
#include <criterion/criterion.h>
#include <malloc.h>
#include <string.h>

#include "model_builder.h"
#include "modelc.h"

#define OPSET 13

static void setup(void) { diag_capture(); }

TestSuite(infer, .init = setup);

static mc_graph *import_ok(mb *b, const mc_import_opts *opts)
{
	mc_graph *g = mb_import(b, NULL, opts);
	cr_assert_not_null(g, "import failed:\n%s", diag_all());
	return g;
}

static const mc_value *value(const mc_graph *g, const char *name)
{
	int v = mc_graph_find(g, name);
	cr_assert_geq(v, 0, "no value '%s'", name);
	return &g->values[v];
}

/* Runtime condition, both branches float 2x2: the If output is typed but
 * not folded. */
Test(infer, runtime_if_is_typed_not_folded)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "cond", MC_BOOL, "");
	mb_if_consts(b, mb_main(b), "pick", "cond", "y", "2,2", (const float[]){1, 2, 3, 4},
	             (const float[]){5, 6, 7, 8}, 4);
	mb_output(b, mb_main(b), "y");
	mc_graph *g = import_ok(b, NULL);
	cr_assert_eq(mc_infer_graph(g), 0, "%s", diag_all());
	const mc_value *y = value(g, "y");
	cr_assert(y->typed);
	cr_assert_eq(y->dtype, MC_FLOAT);
	cr_assert(y->shape.rank == 2 && y->shape.dims[0] == 2 && y->shape.dims[1] == 2);
	cr_assert_null(y->konst, "a runtime condition cannot be folded");
	mc_graph_free(g);
	mb_free(b);
}

Test(infer, branches_must_agree_for_runtime_condition)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "cond", MC_BOOL, "1");
	Onnx__GraphProto *t = mb_graph(b, "t"), *e = mb_graph(b, "e");
	mb_init_floats(b, t, "three", "3", (const float[]){1, 2, 3}, 3);
	mb_output(b, t, "three");
	mb_init_floats(b, e, "two", "2", (const float[]){1, 2}, 2);
	mb_output(b, e, "two");
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "If", "pick", "cond", "y");
	mb_attr_graph(b, n, "then_branch", t);
	mb_attr_graph(b, n, "else_branch", e);
	mb_output(b, mb_main(b), "y");
	mc_graph *g = import_ok(b, NULL);
	cr_assert_eq(mc_infer_graph(g), -1);
	cr_assert_eq(diag_count(), 1, "%s", diag_all());
	cr_assert_str_eq(diag_line(0),
	                 "modelc: error: node 'pick' (If, opset 13): output 0 is float32 3 in "
	                 "then_branch but float32 2 in else_branch; static shapes need both to "
	                 "agree, or a condition known at compile time (--bind)");
	mc_graph_free(g);
	mb_free(b);
}

Test(infer, constant_condition_picks_one_branch_shape)
{
	/* same branches as above, but the condition is a constant: no conflict */
	mb *b = mb_new(OPSET);
	mb_const_bool(b, mb_main(b), "cond", false);
	Onnx__GraphProto *t = mb_graph(b, "t"), *e = mb_graph(b, "e");
	mb_init_floats(b, t, "three", "3", (const float[]){1, 2, 3}, 3);
	mb_output(b, t, "three");
	mb_init_floats(b, e, "two", "2", (const float[]){9, 8}, 2);
	mb_output(b, e, "two");
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "If", "pick", "cond", "y");
	mb_attr_graph(b, n, "then_branch", t);
	mb_attr_graph(b, n, "else_branch", e);
	mb_output(b, mb_main(b), "y");
	mc_graph *g = import_ok(b, NULL);
	cr_assert_eq(mc_infer_graph(g), 0, "%s", diag_all());
	const mc_value *y = value(g, "y");
	cr_assert(y->typed && y->shape.rank == 1 && y->shape.dims[0] == 2);
	cr_assert_not_null(y->konst);
	cr_assert_float_eq(mc_get_f(y->konst, 0), 9, 0);
	cr_assert_float_eq(mc_get_f(y->konst, 1), 8, 0);
	mc_graph_free(g);
	mb_free(b);
}

Test(infer, condition_must_be_one_bool)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "cond", MC_FLOAT, "");
	mb_if_consts(b, mb_main(b), "pick", "cond", "y", "1", (const float[]){1},
	             (const float[]){2}, 1);
	mb_output(b, mb_main(b), "y");
	mc_graph *g = import_ok(b, NULL);
	cr_assert_eq(mc_infer_graph(g), -1);
	cr_assert_str_eq(diag_line(0),
	                 "modelc: error: node 'pick' (If, opset 13): condition must be a single "
	                 "bool, got float32 with 1 elements");
	mc_graph_free(g);
	mb_free(b);

	diag_capture();
	b = mb_new(OPSET);
	mb_input(b, mb_main(b), "cond", MC_BOOL, "2");
	mb_if_consts(b, mb_main(b), "pick", "cond", "y", "1", (const float[]){1},
	             (const float[]){2}, 1);
	mb_output(b, mb_main(b), "y");
	g = import_ok(b, NULL);
	cr_assert_eq(mc_infer_graph(g), -1);
	cr_assert_str_eq(diag_line(0),
	                 "modelc: error: node 'pick' (If, opset 13): condition must be a single "
	                 "bool, got bool with 2 elements");
	mc_graph_free(g);
	mb_free(b);
}

/* A branch output captured from a runtime input gets the input's type. */
Test(infer, captured_values_take_the_parent_type)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "cond", MC_BOOL, "");
	mb_input(b, mb_main(b), "x", MC_INT64, "N,2");
	Onnx__GraphProto *t = mb_graph(b, "t"), *e = mb_graph(b, "e");
	mb_output(b, t, "x");
	Onnx__TensorProto *z = mb_tensor(b, "zeros", MC_INT64, "3,2");
	mb_int64_data(b, z, (const int64_t[]){0, 0, 0, 0, 0, 0}, 6);
	mb_initializer(b, e, z);
	mb_output(b, e, "zeros");
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "If", "pick", "cond", "y");
	mb_attr_graph(b, n, "then_branch", t);
	mb_attr_graph(b, n, "else_branch", e);
	mb_output(b, mb_main(b), "y");
	mc_input_pin pin = {.name = "x", .shape = {.rank = 2, .dims = {3, 2}}};
	mc_import_opts opts = {.pins = &pin, .n_pins = 1};
	mc_graph *g = import_ok(b, &opts);
	cr_assert_eq(mc_infer_graph(g), 0, "%s", diag_all());
	const mc_graph *tg = mc_attr_find(&g->nodes[0], "then_branch")->g;
	const mc_value *xc = value(tg, "x");
	cr_assert_eq(xc->kind, MC_VAL_CAPTURED);
	cr_assert(xc->typed && xc->dtype == MC_INT64 && xc->shape.dims[0] == 3);
	cr_assert_null(xc->konst);
	const mc_value *y = value(g, "y");
	cr_assert(y->typed && y->dtype == MC_INT64 && y->shape.dims[0] == 3);
	cr_assert_null(y->konst);
	mc_graph_free(g);
	mb_free(b);
}

/* With a constant condition but a runtime value read by the branch, the
 * If is typed from the chosen branch and left for run time. */
Test(infer, constant_condition_with_runtime_capture_is_not_folded)
{
	mb *b = mb_new(OPSET);
	mb_const_bool(b, mb_main(b), "cond", true);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "4");
	Onnx__GraphProto *t = mb_graph(b, "t"), *e = mb_graph(b, "e");
	mb_output(b, t, "x");
	/* the other branch does not even agree on shape: it is never typed */
	mb_init_floats(b, e, "one", "1", (const float[]){1}, 1);
	mb_output(b, e, "one");
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "If", "pick", "cond", "y");
	mb_attr_graph(b, n, "then_branch", t);
	mb_attr_graph(b, n, "else_branch", e);
	mb_output(b, mb_main(b), "y");
	mc_graph *g = import_ok(b, NULL);
	cr_assert_eq(mc_infer_graph(g), 0, "%s", diag_all());
	const mc_value *y = value(g, "y");
	cr_assert(y->typed && y->shape.rank == 1 && y->shape.dims[0] == 4);
	cr_assert_null(y->konst);
	mc_tensor *x = mc_tensor_new(MC_FLOAT, &(mc_shape){.rank = 1, .dims = {4}});
	for (size_t i = 0; i < 4; i++)
		mc_set_f(x, i, 0.5 * (double)i);
	mc_tensor *out = NULL;
	cr_assert_eq(mc_interp_run(g, &x, &out, NULL), 0, "%s", diag_all());
	cr_assert_eq(out->numel, 4);
	cr_assert_eq(memcmp(out->data, x->data, x->nbytes), 0);
	mc_tensor_free(out);
	mc_tensor_free(x);
	mc_graph_free(g);
	mb_free(b);
}

Test(infer, unsupported_op_stops_inference)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "2");
	mb_node(b, mb_main(b), "NoSuchOp", "mystery", "x", "y");
	mb_output(b, mb_main(b), "y");
	mc_import_opts opts = {.allow_unsupported = true};
	mc_graph *g = import_ok(b, &opts);
	diag_capture();
	cr_assert_eq(mc_infer_graph(g), -1);
	cr_assert_eq(diag_count(), 1, "%s", diag_all());
	cr_assert_str_eq(diag_line(0),
	                 "modelc: error: node 'mystery' (NoSuchOp, opset 13): cannot infer shapes "
	                 "through an unsupported op");
	mc_graph_free(g);
	mb_free(b);
}

Test(infer, report_unsupported_counts_subgraphs)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "cond", MC_BOOL, "");
	Onnx__GraphProto *t = mb_graph(b, "t"), *e = mb_graph(b, "e");
	mb_node(b, t, "Missing1", "m1", "cond", "a");
	mb_node(b, t, "Missing2", "m2", "a", "ta");
	mb_output(b, t, "ta");
	mb_node(b, e, "Missing3", "m3", "cond", "ea");
	mb_output(b, e, "ea");
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "If", "pick", "cond", "y");
	mb_attr_graph(b, n, "then_branch", t);
	mb_attr_graph(b, n, "else_branch", e);
	mb_output(b, mb_main(b), "y");
	mc_import_opts opts = {.allow_unsupported = true};
	mc_graph *g = import_ok(b, &opts);
	cr_assert_eq(diag_count(), 3, "each node is named once:\n%s", diag_all());
	cr_assert_eq(mc_report_unsupported(g), 3);
	mc_graph_free(g);
	mb_free(b);
}

Test(infer, graph_without_nodes)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_UINT8, "1,3,2");
	mb_output(b, mb_main(b), "x");
	mc_graph *g = import_ok(b, NULL);
	cr_assert_eq(mc_infer_graph(g), 0, "%s", diag_all());
	cr_assert_eq(diag_count(), 0);
	mc_graph_free(g);
	mb_free(b);
}

/* Heap bytes in use (glibc); constant under ASan, whose LeakSanitizer
 * reports leaks at exit instead. */
static size_t heap_in_use(void)
{
	return mallinfo2().uordblks;
}

/* Later passes re-run inference on a graph already inferred: results stay
 * the same, and folded values are replaced, not leaked. */
Test(infer, running_twice_is_stable)
{
	mb *b = mb_new(OPSET);
	mb_const_bool(b, mb_main(b), "cond", true);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "2");
	mb_if_consts(b, mb_main(b), "pick", "cond", "y", "2", (const float[]){1, 2},
	             (const float[]){3, 4}, 2);
	mb_output(b, mb_main(b), "y");
	mb_output(b, mb_main(b), "x");
	mc_graph *g = import_ok(b, NULL);
	cr_assert_eq(mc_infer_graph(g), 0, "%s", diag_all());
	/* no assertions inside the measured loop: they may allocate */
	int failed = 0;
	size_t before = heap_in_use();
	for (int pass = 0; pass < 50; pass++)
		failed += mc_infer_graph(g) != 0;
	size_t after = heap_in_use();
	cr_assert_eq(failed, 0, "%s", diag_all());
	const mc_value *y = value(g, "y");
	cr_assert_not_null(y->konst);
	cr_assert_float_eq(mc_get_f(y->konst, 0), 1, 0);
	cr_assert_float_eq(mc_get_f(y->konst, 1), 2, 0);
	long long grew = (long long)after - (long long)before;
	cr_assert_lt(grew, 1024, "50 more inference passes kept %lld more heap bytes", grew);
	mc_graph_free(g);
	mb_free(b);
}
