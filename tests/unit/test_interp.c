/* interp.c: the reference interpreter, on graphs of If, Constant and
 * initializers only. */
#include <criterion/criterion.h>
#include <string.h>

#include "model_builder.h"
#include "modelc.h"

#define OPSET 13

static void setup(void) { diag_capture(); }

TestSuite(interp, .init = setup);

static mc_graph *typed_graph(mb *b, const mc_import_opts *opts)
{
	mc_graph *g = mb_import(b, NULL, opts);
	cr_assert_not_null(g, "import failed:\n%s", diag_all());
	cr_assert_eq(mc_infer_graph(g), 0, "inference failed:\n%s", diag_all());
	return g;
}

static mc_tensor *bool_scalar(bool v)
{
	mc_tensor *t = mc_tensor_new(MC_BOOL, &(mc_shape){.rank = 0});
	mc_set_i(t, 0, v);
	return t;
}

static void assert_floats(const mc_tensor *t, const float *want, size_t n)
{
	cr_assert_not_null(t);
	cr_assert_eq(t->dtype, MC_FLOAT);
	cr_assert_eq(t->numel, n);
	for (size_t i = 0; i < n; i++)
		cr_assert_float_eq(mc_get_f(t, i), want[i], 0, "element %zu: %g != %g", i,
		                   mc_get_f(t, i), want[i]);
}

static const float then_v[6] = {1, 2, 3, 4, 5, 6};
static const float else_v[6] = {-1, -2, -3, -4, -5, -6};

/* cond (graph input) -> If -> y (float 2x3): then / else initializers. */
static mb *if_model(void)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "cond", MC_BOOL, "");
	mb_if_consts(b, mb_main(b), "pick", "cond", "y", "2,3", then_v, else_v, 6);
	mb_output(b, mb_main(b), "y");
	return b;
}

Test(interp, if_picks_branch_at_run_time)
{
	mb *b = if_model();
	mc_graph *g = typed_graph(b, NULL);
	for (int pass = 0; pass < 2; pass++) {
		mc_tensor *cond = bool_scalar(pass == 0);
		mc_tensor *out = NULL;
		cr_assert_eq(mc_interp_run(g, &cond, &out, NULL), 0, "%s", diag_all());
		assert_floats(out, pass == 0 ? then_v : else_v, 6);
		cr_assert(out->shape.rank == 2 && out->shape.dims[0] == 2 && out->shape.dims[1] == 3);
		mc_tensor_free(out);
		mc_tensor_free(cond);
	}
	/* any non-zero byte is true */
	mc_tensor *cond = bool_scalar(true);
	((uint8_t *)cond->data)[0] = 7;
	mc_tensor *out = NULL;
	cr_assert_eq(mc_interp_run(g, &cond, &out, NULL), 0, "%s", diag_all());
	assert_floats(out, then_v, 6);
	mc_tensor_free(out);
	mc_tensor_free(cond);
	cr_assert_eq(diag_count(), 0, "%s", diag_all());
	mc_graph_free(g);
	mb_free(b);
}

Test(interp, input_type_is_checked)
{
	mb *b = if_model();
	mc_graph *g = typed_graph(b, NULL);
	mc_tensor *wrong = mc_tensor_new(MC_FLOAT, &(mc_shape){.rank = 0});
	mc_tensor *out = NULL;
	cr_assert_eq(mc_interp_run(g, &wrong, &out, NULL), -1);
	cr_assert_eq(diag_count(), 1, "%s", diag_all());
	cr_assert_str_eq(diag_line(0),
	                 "modelc: error: input 'cond': expected bool scalar, got float32 scalar");
	mc_tensor_free(wrong);
	diag_capture();
	mc_tensor *shaped = mc_tensor_new(MC_BOOL, &(mc_shape){.rank = 1, .dims = {1}});
	cr_assert_eq(mc_interp_run(g, &shaped, &out, NULL), -1);
	cr_assert_str_eq(diag_line(0),
	                 "modelc: error: input 'cond': expected bool scalar, got bool 1");
	mc_tensor_free(shaped);
	diag_capture();
	mc_tensor *none = NULL;
	cr_assert_eq(mc_interp_run(g, &none, &out, NULL), -1);
	cr_assert_str_eq(diag_line(0),
	                 "modelc: error: input 'cond': no value given (expected bool scalar)");
	mc_graph_free(g);
	mb_free(b);
}

/* The chosen branch returns a runtime input read from the enclosing graph. */
Test(interp, branch_returns_captured_input)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "cond", MC_BOOL, "");
	mb_input(b, mb_main(b), "x", MC_FLOAT, "3");
	Onnx__GraphProto *t = mb_graph(b, "t"), *e = mb_graph(b, "e");
	mb_output(b, t, "x");
	mb_init_floats(b, e, "fallback", "3", (const float[]){9, 9, 9}, 3);
	mb_output(b, e, "fallback");
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "If", "pick", "cond", "y");
	mb_attr_graph(b, n, "then_branch", t);
	mb_attr_graph(b, n, "else_branch", e);
	mb_output(b, mb_main(b), "y");
	mb_output(b, mb_main(b), "x");
	mc_graph *g = typed_graph(b, NULL);
	cr_assert_eq(g->n_inputs, 2);
	mc_tensor *in[2];
	in[0] = bool_scalar(true);
	in[1] = mc_tensor_new(MC_FLOAT, &(mc_shape){.rank = 1, .dims = {3}});
	const float xv[3] = {0.5f, -7, 1e10f};
	memcpy(in[1]->data, xv, sizeof xv);
	mc_tensor *out[2] = {NULL, NULL};
	cr_assert_eq(mc_interp_run(g, in, out, NULL), 0, "%s", diag_all());
	assert_floats(out[0], xv, 3);
	assert_floats(out[1], xv, 3);
	cr_assert_neq(out[1], in[1], "outputs are copies the caller frees");
	mc_tensor_free(out[0]);
	mc_tensor_free(out[1]);
	mc_set_i(in[0], 0, 0);
	cr_assert_eq(mc_interp_run(g, in, out, NULL), 0, "%s", diag_all());
	assert_floats(out[0], (const float[]){9, 9, 9}, 3);
	mc_tensor_free(out[0]);
	mc_tensor_free(out[1]);
	mc_tensor_free(in[0]);
	mc_tensor_free(in[1]);
	mc_graph_free(g);
	mb_free(b);
}

/* Two levels: the inner If's condition is a runtime input captured from
 * the top graph, and its branches read top-level initializers. */
Test(interp, nested_if_with_captured_condition)
{
	mb *b = mb_new(OPSET);
	Onnx__GraphProto *m = mb_main(b);
	mb_input(b, m, "c", MC_BOOL, "");
	mb_input(b, m, "d", MC_BOOL, "");
	mb_init_floats(b, m, "A", "2", (const float[]){1, 2}, 2);
	mb_init_floats(b, m, "B", "2", (const float[]){3, 4}, 2);
	Onnx__GraphProto *it = mb_graph(b, "it"), *ie = mb_graph(b, "ie");
	mb_output(b, it, "A");
	mb_output(b, ie, "B");
	Onnx__GraphProto *ot = mb_graph(b, "ot"), *oe = mb_graph(b, "oe");
	Onnx__NodeProto *inner = mb_node(b, ot, "If", "inner", "d", "z");
	mb_attr_graph(b, inner, "then_branch", it);
	mb_attr_graph(b, inner, "else_branch", ie);
	mb_output(b, ot, "z");
	mb_init_floats(b, oe, "C", "2", (const float[]){5, 6}, 2);
	mb_output(b, oe, "C");
	Onnx__NodeProto *outer = mb_node(b, m, "If", "outer", "c", "y");
	mb_attr_graph(b, outer, "then_branch", ot);
	mb_attr_graph(b, outer, "else_branch", oe);
	mb_output(b, m, "y");
	mc_graph *g = typed_graph(b, NULL);
	cr_assert_null(g->values[mc_graph_find(g, "y")].konst);

	static const struct {
		bool c, d;
		float want[2];
	} cases[] = {
		{true, true, {1, 2}},
		{true, false, {3, 4}},
		{false, true, {5, 6}},
		{false, false, {5, 6}},
	};
	/* g->inputs follows declaration order: c, d */
	cr_assert_eq(g->inputs[0], mc_graph_find(g, "c"));
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		mc_tensor *in[2] = {bool_scalar(cases[i].c), bool_scalar(cases[i].d)};
		mc_tensor *out = NULL;
		cr_assert_eq(mc_interp_run(g, in, &out, NULL), 0, "case %zu: %s", i, diag_all());
		assert_floats(out, cases[i].want, 2);
		mc_tensor_free(out);
		mc_tensor_free(in[0]);
		mc_tensor_free(in[1]);
	}
	mc_graph_free(g);
	mb_free(b);
}

/* Several outputs from one If; one is also a graph output of the branch
 * that is a Constant inside it. */
Test(interp, if_with_two_outputs)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "cond", MC_BOOL, "");
	Onnx__GraphProto *t = mb_graph(b, "t"), *e = mb_graph(b, "e");
	mb_init_floats(b, t, "t0", "1", (const float[]){10}, 1);
	Onnx__TensorProto *k = mb_tensor(b, "t1", MC_INT64, "2");
	mb_int64_data(b, k, (const int64_t[]){-1, 1}, 2);
	mb_attr_tensor(b, mb_node(b, t, "Constant", "kt", NULL, "t1"), "value", k);
	mb_output(b, t, "t0");
	mb_output(b, t, "t1");
	mb_init_floats(b, e, "e0", "1", (const float[]){20}, 1);
	mb_attr_ints(b, mb_node(b, e, "Constant", "ke", NULL, "e1"), "value_ints",
	             (const int64_t[]){5, 6}, 2);
	mb_output(b, e, "e0");
	mb_output(b, e, "e1");
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "If", "pick", "cond", "y0,y1");
	mb_attr_graph(b, n, "then_branch", t);
	mb_attr_graph(b, n, "else_branch", e);
	mb_output(b, mb_main(b), "y1");
	mb_output(b, mb_main(b), "y0");
	mc_graph *g = typed_graph(b, NULL);
	mc_tensor *cond = bool_scalar(false);
	mc_tensor *out[2] = {NULL, NULL};
	cr_assert_eq(mc_interp_run(g, &cond, out, NULL), 0, "%s", diag_all());
	cr_assert_eq(out[0]->dtype, MC_INT64);
	cr_assert(mc_get_i(out[0], 0) == 5 && mc_get_i(out[0], 1) == 6);
	assert_floats(out[1], (const float[]){20}, 1);
	mc_tensor_free(out[0]);
	mc_tensor_free(out[1]);
	mc_set_i(cond, 0, 1);
	cr_assert_eq(mc_interp_run(g, &cond, out, NULL), 0, "%s", diag_all());
	cr_assert(mc_get_i(out[0], 0) == -1 && mc_get_i(out[0], 1) == 1);
	assert_floats(out[1], (const float[]){10}, 1);
	mc_tensor_free(out[0]);
	mc_tensor_free(out[1]);
	mc_tensor_free(cond);
	mc_graph_free(g);
	mb_free(b);
}

/* The same graph run many times gives the same results and frees what it
 * allocates (checked under the sanitizer build). */
Test(interp, repeated_runs)
{
	mb *b = if_model();
	mc_graph *g = typed_graph(b, NULL);
	for (int i = 0; i < 100; i++) {
		mc_tensor *cond = bool_scalar(i % 3 == 0);
		mc_tensor *out = NULL;
		cr_assert_eq(mc_interp_run(g, &cond, &out, NULL), 0, "%s", diag_all());
		assert_floats(out, i % 3 == 0 ? then_v : else_v, 6);
		mc_tensor_free(out);
		mc_tensor_free(cond);
	}
	mc_graph_free(g);
	mb_free(b);
}
