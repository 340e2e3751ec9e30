/* import.c: ONNX ModelProto -> graph IR. Models are built in memory with
 * the protobuf-c generated API (model_builder.h); only If, Constant and
 * initializers are used, so these tests do not depend on other ops. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model_builder.h"
#include "modelc.h"

#define OPSET 13

static void setup(void) { diag_capture(); }

TestSuite(import, .init = setup);
TestSuite(external, .init = setup);

/* ---- helpers ---- */
static mc_graph *import_ok(mb *b, const char *dir, const mc_import_opts *opts)
{
	mc_graph *g = mb_import(b, dir, opts);
	cr_assert_not_null(g, "import failed:\n%s", diag_all());
	return g;
}

/* Import must fail and its first diagnostic must be exactly `want`. */
static void import_fails(mb *b, const char *dir, const mc_import_opts *opts, const char *want)
{
	mc_graph *g = mb_import(b, dir, opts);
	cr_assert_null(g, "import should fail with: %s", want);
	cr_assert_geq(diag_count(), 1);
	cr_assert_str_eq(diag_line(0), want, "all diagnostics:\n%s", diag_all());
}

static const mc_value *value(const mc_graph *g, const char *name)
{
	int v = mc_graph_find(g, name);
	cr_assert_geq(v, 0, "no value '%s'", name);
	return &g->values[v];
}

static void assert_floats(const mc_tensor *t, const float *want, size_t n)
{
	cr_assert_not_null(t);
	cr_assert_eq(t->numel, n);
	for (size_t i = 0; i < n; i++)
		cr_assert_float_eq(mc_get_f(t, i), want[i], 0, "element %zu: %g != %g", i,
		                   mc_get_f(t, i), want[i]);
}

static void assert_ints(const mc_tensor *t, const int64_t *want, size_t n)
{
	cr_assert_not_null(t);
	cr_assert_eq(t->numel, n);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(mc_get_i(t, i), want[i], "element %zu: %lld != %lld", i,
		             (long long)mc_get_i(t, i), (long long)want[i]);
}

/* ---- initializers ---- */
Test(import, initializer_raw_data)
{
	mb *b = mb_new(OPSET);
	const float w[6] = {1.5f, -2, 3, 4, 5, 6e-3f};
	mb_init_floats(b, mb_main(b), "W", "2,3", w, 6);
	mb_output(b, mb_main(b), "W");
	mc_graph *g = import_ok(b, NULL, NULL);
	const mc_value *v = value(g, "W");
	cr_assert_eq(v->kind, MC_VAL_CONST);
	cr_assert(v->typed);
	cr_assert_eq(v->dtype, MC_FLOAT);
	cr_assert(v->shape.rank == 2 && v->shape.dims[0] == 2 && v->shape.dims[1] == 3);
	assert_floats(v->konst, w, 6);
	cr_assert_eq(g->n_inputs, 0);
	cr_assert_eq(g->n_outputs, 1);
	cr_assert_eq(g->outputs[0], mc_graph_find(g, "W"));
	cr_assert_eq(g->opset, OPSET);
	cr_assert_eq(diag_count(), 0, "%s", diag_all());
	mc_graph_free(g);
	mb_free(b);
}

Test(import, initializer_typed_fields)
{
	mb *b = mb_new(OPSET);
	Onnx__GraphProto *m = mb_main(b);
	Onnx__TensorProto *t;

	t = mb_tensor(b, "f32", MC_FLOAT, "3");
	mb_float_data(b, t, (const float[]){0.25f, -1, 1e30f}, 3);
	mb_initializer(b, m, t);
	t = mb_tensor(b, "i64", MC_INT64, "2");
	mb_int64_data(b, t, (const int64_t[]){INT64_MIN, INT64_MAX}, 2);
	mb_initializer(b, m, t);
	t = mb_tensor(b, "i8", MC_INT8, "3");
	mb_int32_data(b, t, (const int32_t[]){-128, 0, 127}, 3);
	mb_initializer(b, m, t);
	t = mb_tensor(b, "u8", MC_UINT8, "2");
	mb_int32_data(b, t, (const int32_t[]){0, 255}, 2);
	mb_initializer(b, m, t);
	t = mb_tensor(b, "i32", MC_INT32, "2");
	mb_int32_data(b, t, (const int32_t[]){INT32_MIN, 7}, 2);
	mb_initializer(b, m, t);
	t = mb_tensor(b, "b", MC_BOOL, "3");
	mb_int32_data(b, t, (const int32_t[]){0, 1, 2}, 3);
	mb_initializer(b, m, t);
	/* float16 data is stored as bit patterns in int32_data */
	t = mb_tensor(b, "f16", MC_FLOAT16, "3");
	mb_int32_data(b, t, (const int32_t[]){0x3c00, 0xc000, 0x3555}, 3);
	mb_initializer(b, m, t);
	t = mb_tensor(b, "bf16", MC_BFLOAT16, "1");
	mb_int32_data(b, t, (const int32_t[]){0x4049}, 1);
	mb_initializer(b, m, t);
	/* empty tensors need no data field at all */
	t = mb_tensor(b, "empty", MC_FLOAT, "0,3");
	mb_initializer(b, m, t);
	mb_output(b, m, "f32");

	mc_graph *g = import_ok(b, NULL, NULL);
	assert_floats(value(g, "f32")->konst, (const float[]){0.25f, -1, 1e30f}, 3);
	assert_ints(value(g, "i64")->konst, (const int64_t[]){INT64_MIN, INT64_MAX}, 2);
	assert_ints(value(g, "i8")->konst, (const int64_t[]){-128, 0, 127}, 3);
	cr_assert_eq(value(g, "i8")->konst->dtype, MC_INT8);
	assert_ints(value(g, "u8")->konst, (const int64_t[]){0, 255}, 2);
	assert_ints(value(g, "i32")->konst, (const int64_t[]){INT32_MIN, 7}, 2);
	const mc_tensor *bt = value(g, "b")->konst;
	cr_assert_eq(bt->nbytes, 3);
	cr_assert(((uint8_t *)bt->data)[0] == 0 && ((uint8_t *)bt->data)[1] == 1 &&
	          ((uint8_t *)bt->data)[2] == 1, "bools are stored as 0 / 1");
	const mc_tensor *h = value(g, "f16")->konst;
	cr_assert_eq(h->nbytes, 6);
	cr_assert_eq(((uint16_t *)h->data)[0], 0x3c00);
	assert_floats(h, (const float[]){1, -2, 0.333251953125f}, 3);
	assert_floats(value(g, "bf16")->konst, (const float[]){3.140625f}, 1);
	const mc_value *e = value(g, "empty");
	cr_assert(e->konst && e->konst->numel == 0 && e->shape.rank == 2 && e->shape.dims[1] == 3);
	mc_graph_free(g);
	mb_free(b);
}

Test(import, initializer_data_count_mismatch)
{
	mb *b = mb_new(OPSET);
	Onnx__TensorProto *t = mb_tensor(b, "W", MC_FLOAT, "2,2");
	mb_float_data(b, t, (const float[]){1, 2, 3}, 3);
	mb_initializer(b, mb_main(b), t);
	mb_output(b, mb_main(b), "W");
	import_fails(b, NULL, NULL,
	             "modelc: error: tensor 'W': float_data holds 3 values but its shape needs 4");
	mb_free(b);
}

Test(import, initializer_raw_size_mismatch)
{
	mb *b = mb_new(OPSET);
	mb_init_floats(b, mb_main(b), "W", "2,2", (const float[]){1, 2, 3}, 3);
	mb_output(b, mb_main(b), "W");
	import_fails(b, NULL, NULL,
	             "modelc: error: tensor 'W': raw_data has 12 bytes but its shape needs 16");
	mb_free(b);
}

Test(import, initializer_missing_data)
{
	mb *b = mb_new(OPSET);
	mb_initializer(b, mb_main(b), mb_tensor(b, "W", MC_INT64, "2"));
	mb_output(b, mb_main(b), "W");
	import_fails(b, NULL, NULL,
	             "modelc: error: tensor 'W': int64_data holds 0 values but its shape needs 2");
	mb_free(b);
}

Test(import, initializer_bad_type_and_dims)
{
	mb *b = mb_new(OPSET);
	mb_initializer(b, mb_main(b), mb_tensor(b, "S", MC_STRING, "1"));
	mb_output(b, mb_main(b), "S");
	import_fails(b, NULL, NULL,
	             "modelc: error: tensor 'S': data type 8 (string) is not supported");
	mb_free(b);

	diag_capture();
	b = mb_new(OPSET);
	mb_initializer(b, mb_main(b), mb_tensor(b, "N", MC_FLOAT, "2,-3"));
	mb_output(b, mb_main(b), "N");
	import_fails(b, NULL, NULL, "modelc: error: tensor 'N': dimension 1 is negative (-3)");
	mb_free(b);

	diag_capture();
	b = mb_new(OPSET);
	mb_initializer(b, mb_main(b), mb_tensor(b, "R", MC_FLOAT, "1,1,1,1,1,1,1,1,1"));
	mb_output(b, mb_main(b), "R");
	import_fails(b, NULL, NULL,
	             "modelc: error: tensor 'R': rank 9 exceeds the supported maximum 8");
	mb_free(b);

	diag_capture();
	b = mb_new(OPSET);
	Onnx__TensorProto *t = mb_tensor(b, "U", MC_FLOAT, "1");
	t->has_data_type = 0;
	mb_initializer(b, mb_main(b), t);
	mb_output(b, mb_main(b), "U");
	import_fails(b, NULL, NULL, "modelc: error: tensor 'U' has no data type");
	mb_free(b);
}

Test(import, initializer_defined_twice)
{
	mb *b = mb_new(OPSET);
	mb_init_floats(b, mb_main(b), "W", "1", (const float[]){1}, 1);
	mb_init_floats(b, mb_main(b), "W", "1", (const float[]){2}, 1);
	mb_output(b, mb_main(b), "W");
	import_fails(b, NULL, NULL, "modelc: error: initializer 'W' is defined twice");
	mb_free(b);
}

/* ---- Constant nodes, inputs with defaults ---- */
Test(import, constant_node_becomes_constant_value)
{
	mb *b = mb_new(OPSET);
	Onnx__GraphProto *m = mb_main(b);
	Onnx__TensorProto *t = mb_tensor(b, "ignored", MC_FLOAT, "2");
	mb_raw(b, t, (const float[]){7, 8}, 8);
	mb_attr_tensor(b, mb_node(b, m, "Constant", "k", NULL, "c"), "value", t);
	mb_attr_ints(b, mb_node(b, m, "Constant", "k2", NULL, "ci"), "value_ints",
	             (const int64_t[]){4, -5, 6}, 3);
	mb_attr_float(b, mb_node(b, m, "Constant", "k3", NULL, "cf"), "value_float", 0.5f);
	mb_attr_int(b, mb_node(b, m, "Constant", "k4", NULL, "cn"), "value_int", -9);
	mb_output(b, m, "c");
	mb_output(b, m, "ci");
	mc_graph *g = import_ok(b, NULL, NULL);
	cr_assert_eq(g->n_nodes, 0, "Constant nodes are folded away at import");
	const mc_value *c = value(g, "c");
	cr_assert_eq(c->kind, MC_VAL_CONST);
	cr_assert_eq(c->producer, -1);
	cr_assert(c->typed && c->dtype == MC_FLOAT);
	assert_floats(c->konst, (const float[]){7, 8}, 2);
	const mc_value *ci = value(g, "ci");
	cr_assert(ci->dtype == MC_INT64 && ci->shape.rank == 1 && ci->shape.dims[0] == 3);
	assert_ints(ci->konst, (const int64_t[]){4, -5, 6}, 3);
	const mc_value *cf = value(g, "cf");
	cr_assert(cf->dtype == MC_FLOAT && cf->shape.rank == 0);
	assert_floats(cf->konst, (const float[]){0.5f}, 1);
	const mc_value *cn = value(g, "cn");
	cr_assert(cn->dtype == MC_INT64 && cn->shape.rank == 0);
	assert_ints(cn->konst, (const int64_t[]){-9}, 1);
	mc_graph_free(g);
	mb_free(b);
}

Test(import, constant_node_needs_one_value)
{
	mb *b = mb_new(OPSET);
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "Constant", "k", NULL, "c");
	mb_attr_int(b, n, "value_int", 1);
	mb_attr_int(b, n, "value_int", 2);
	mb_output(b, mb_main(b), "c");
	import_fails(b, NULL, NULL,
	             "modelc: error: node 'k' (Constant, opset 13): needs exactly one value "
	             "attribute, has 2");
	mb_free(b);
}

Test(import, input_with_initializer_is_constant)
{
	mb *b = mb_new(OPSET);
	Onnx__GraphProto *m = mb_main(b);
	mb_init_floats(b, m, "bias", "2", (const float[]){0.5f, -0.5f}, 2);
	mb_input(b, m, "bias", MC_FLOAT, "2");
	mb_input(b, m, "x", MC_FLOAT, "2");
	mb_output(b, m, "x");
	mb_output(b, m, "bias");
	mc_graph *g = import_ok(b, NULL, NULL);
	cr_assert_eq(g->n_inputs, 1, "only x is a runtime input");
	cr_assert_eq(g->inputs[0], mc_graph_find(g, "x"));
	cr_assert_eq(value(g, "x")->kind, MC_VAL_INPUT);
	const mc_value *bias = value(g, "bias");
	cr_assert_eq(bias->kind, MC_VAL_CONST);
	assert_floats(bias->konst, (const float[]){0.5f, -0.5f}, 2);
	mc_graph_free(g);
	mb_free(b);
}

Test(import, input_declared_twice)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "2");
	mb_input(b, mb_main(b), "x", MC_FLOAT, "2");
	mb_output(b, mb_main(b), "x");
	import_fails(b, NULL, NULL, "modelc: error: graph input 'x' is declared twice");
	mb_free(b);
}

/* ---- opsets and domains ---- */
Test(import, node_of_other_domain_is_named)
{
	mb *b = mb_new(OPSET);
	mb_opset_import(b, "com.example", 1);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "2");
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "Fancy", "f1", "x", "y");
	mb_node_domain(b, n, "com.example");
	mb_output(b, mb_main(b), "y");
	mc_graph *g = mb_import(b, NULL, NULL);
	cr_assert_null(g);
	/* one node: its own line says it all, no count follows */
	cr_assert_eq(diag_count(), 1, "%s", diag_all());
	cr_assert_eq(diag_count_with("node 'f1' (com.example:Fancy"), 1, "%s", diag_all());
	cr_assert_eq(diag_count_with("operator domain 'com.example' is not supported"), 1, "%s",
	             diag_all());
	mb_free(b);
}

Test(import, unused_extra_domain_is_fine)
{
	mb *b = mb_new(OPSET);
	mb_opset_import(b, "ai.onnx.ml", 3);
	mb_opset_import(b, "com.microsoft", 1);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "2");
	mb_output(b, mb_main(b), "x");
	mc_graph *g = import_ok(b, NULL, NULL);
	cr_assert_eq(g->opset, OPSET);
	cr_assert_eq(diag_count(), 0, "%s", diag_all());
	mc_graph_free(g);
	mb_free(b);
}

Test(import, ai_onnx_domain_is_the_default)
{
	mb *b = mb_new(OPSET);
	mb_const_bool(b, mb_main(b), "c", true);
	Onnx__NodeProto *n = mb_if_consts(b, mb_main(b), "if1", "c", "y", "1", (const float[]){1},
	                                  (const float[]){2}, 1);
	mb_node_domain(b, n, "ai.onnx");
	mb_output(b, mb_main(b), "y");
	mc_graph *g = import_ok(b, NULL, NULL);
	cr_assert_eq(g->n_nodes, 1);
	cr_assert_str_eq(g->nodes[0].domain, "");
	cr_assert_not_null(g->nodes[0].op);
	mc_graph_free(g);
	mb_free(b);
}

Test(import, opset_checks)
{
	char want[256];
	mb *b = mb_new(MC_MAX_OPSET + 1);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "2");
	mb_output(b, mb_main(b), "x");
	snprintf(want, sizeof want,
	         "modelc: error: the model imports opset %d of the default domain; modelc knows "
	         "opsets up to %d", MC_MAX_OPSET + 1, MC_MAX_OPSET);
	import_fails(b, NULL, NULL, want);
	mb_free(b);

	diag_capture();
	b = mb_new(OPSET);
	mb_model(b)->n_opset_import = 0;
	mb_output(b, mb_main(b), "x");
	import_fails(b, NULL, NULL, "modelc: error: the model imports no opset");
	mb_free(b);

	diag_capture();
	b = mb_new(OPSET);
	mb_model(b)->opset_import[0]->domain = "com.example";
	import_fails(b, NULL, NULL,
	             "modelc: error: the model imports only the operator domain 'com.example', "
	             "which is not supported (only the default ONNX domain is)");
	mb_free(b);
}

Test(import, empty_buffer)
{
	cr_assert_null(mc_import_buffer((const uint8_t *)"", 0, NULL, NULL));
	cr_assert_eq(diag_count(), 1, "%s", diag_all());
	cr_assert_str_eq(diag_line(0), "modelc: error: the model file is empty");
}

Test(import, ir_version_checks)
{
	mb *b = mb_new(OPSET);
	mb_model(b)->has_ir_version = 0;
	import_fails(b, NULL, NULL, "modelc: error: not an ONNX model: ir_version is missing");
	mb_free(b);

	diag_capture();
	b = mb_new(OPSET);
	mb_model(b)->ir_version = 2;
	import_fails(b, NULL, NULL, "modelc: error: unsupported ONNX IR version 2");
	mb_free(b);

	diag_capture();
	b = mb_new(OPSET);
	mb_model(b)->graph = NULL;
	import_fails(b, NULL, NULL, "modelc: error: not an ONNX model: the graph is missing");
	mb_free(b);
}

/* ---- graph structure ---- */
Test(import, missing_node_input)
{
	mb *b = mb_new(OPSET);
	mb_if_consts(b, mb_main(b), "if1", "nope", "y", "1", (const float[]){1},
	             (const float[]){2}, 1);
	mb_output(b, mb_main(b), "y");
	import_fails(b, NULL, NULL,
	             "modelc: error: node 'if1' (If, opset 13): input 'nope' is not produced by "
	             "any node, initializer or graph input");
	mb_free(b);
}

Test(import, duplicate_output_name)
{
	mb *b = mb_new(OPSET);
	mb_const_bool(b, mb_main(b), "c", true);
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "Constant", "k2", NULL, "c");
	mb_attr_int(b, n, "value_int", 3);
	mb_output(b, mb_main(b), "c");
	import_fails(b, NULL, NULL,
	             "modelc: error: node 'k2' (Constant, opset 13): output 'c' is already defined "
	             "elsewhere in the graph");
	mb_free(b);
}

Test(import, output_shadowing_an_input)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "1");
	mb_const_bool(b, mb_main(b), "c", true);
	mb_if_consts(b, mb_main(b), "if1", "c", "x", "1", (const float[]){1}, (const float[]){2}, 1);
	mb_output(b, mb_main(b), "x");
	import_fails(b, NULL, NULL,
	             "modelc: error: node 'if1' (If, opset 13): output 'x' is already defined "
	             "elsewhere in the graph");
	mb_free(b);
}

/* An If whose condition is a bool produced by the other: i1 <- c2 <- i2 <- c1 <- i1. */
static void add_bool_if(mb *b, Onnx__GraphProto *g, const char *name, const char *cond,
                        const char *out)
{
	Onnx__GraphProto *tg = mb_graph(b, "t"), *eg = mb_graph(b, "e");
	char tn[64], en[64];
	snprintf(tn, sizeof tn, "%s_t", out);
	snprintf(en, sizeof en, "%s_e", out);
	mb_const_bool(b, tg, tn, true);
	mb_output(b, tg, tn);
	mb_const_bool(b, eg, en, false);
	mb_output(b, eg, en);
	Onnx__NodeProto *n = mb_node(b, g, "If", name, cond, out);
	mb_attr_graph(b, n, "then_branch", tg);
	mb_attr_graph(b, n, "else_branch", eg);
}

Test(import, cycle_is_refused)
{
	mb *b = mb_new(OPSET);
	add_bool_if(b, mb_main(b), "i1", "c2", "c1");
	add_bool_if(b, mb_main(b), "i2", "c1", "c2");
	mb_output(b, mb_main(b), "c1");
	import_fails(b, NULL, NULL,
	             "modelc: error: node 'i1' (If, opset 13): the graph has a cycle through this "
	             "node");
	cr_assert_eq(diag_count(), 1, "%s", diag_all());
	mb_free(b);
}

Test(import, self_loop_is_refused)
{
	mb *b = mb_new(OPSET);
	add_bool_if(b, mb_main(b), "me", "c", "c");
	mb_output(b, mb_main(b), "c");
	import_fails(b, NULL, NULL,
	             "modelc: error: node 'me' (If, opset 13): the graph has a cycle through this "
	             "node");
	mb_free(b);
}

Test(import, nodes_are_sorted_topologically)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "c0", MC_BOOL, "");
	/* the consumer comes first in the file */
	add_bool_if(b, mb_main(b), "second", "c1", "c2");
	add_bool_if(b, mb_main(b), "first", "c0", "c1");
	mb_output(b, mb_main(b), "c2");
	mc_graph *g = import_ok(b, NULL, NULL);
	cr_assert_eq(g->n_nodes, 2);
	cr_assert_str_eq(g->nodes[0].name, "first");
	cr_assert_str_eq(g->nodes[1].name, "second");
	cr_assert_eq(value(g, "c1")->producer, 0, "producers are renumbered after sorting");
	cr_assert_eq(value(g, "c2")->producer, 1);
	mc_graph_free(g);
	mb_free(b);
}

Test(import, graph_output_never_produced)
{
	mb *b = mb_new(OPSET);
	mb_output(b, mb_main(b), "ghost");
	import_fails(b, NULL, NULL, "modelc: error: graph output 'ghost' is never produced");
	mb_free(b);
}

Test(import, newline_in_name_stays_one_line)
{
	mb *b = mb_new(OPSET);
	mb_if_consts(b, mb_main(b), "evil\nname\r", "nope", "y", "1", (const float[]){1},
	             (const float[]){2}, 1);
	mb_output(b, mb_main(b), "y");
	import_fails(b, NULL, NULL,
	             "modelc: error: node 'evil name ' (If, opset 13): input 'nope' is not "
	             "produced by any node, initializer or graph input");
	mb_free(b);
}

/* ---- input shapes and pins ---- */
Test(import, pins_fix_symbolic_dims)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "N,3,?");
	mb_output(b, mb_main(b), "x");
	mc_input_pin pin = {.name = "x", .shape = {.rank = 3, .dims = {5, 3, 7}}};
	mc_import_opts opts = {.pins = &pin, .n_pins = 1};
	mc_graph *g = import_ok(b, NULL, &opts);
	const mc_value *x = value(g, "x");
	cr_assert(x->typed);
	cr_assert(x->shape.rank == 3 && x->shape.dims[0] == 5 && x->shape.dims[1] == 3 &&
	          x->shape.dims[2] == 7);
	cr_assert_str_eq(x->dim_param[0], "N", "the symbolic name is kept for messages");
	cr_assert_eq(mc_infer_graph(g), 0, "%s", diag_all());
	mc_graph_free(g);
	mb_free(b);
}

Test(import, pin_for_input_without_shape)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_INT64, NULL);
	mb_output(b, mb_main(b), "x");
	mc_input_pin pin = {.name = "x", .shape = {.rank = 2, .dims = {4, 1}}};
	mc_import_opts opts = {.pins = &pin, .n_pins = 1};
	mc_graph *g = import_ok(b, NULL, &opts);
	const mc_value *x = value(g, "x");
	cr_assert(x->typed && x->shape.rank == 2 && x->shape.dims[0] == 4);
	mc_graph_free(g);
	mb_free(b);

	diag_capture();
	b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_INT64, NULL);
	mb_output(b, mb_main(b), "x");
	import_fails(b, NULL, NULL,
	             "modelc: error: input 'x': its rank is unknown; give its shape with "
	             "--input-shape 'x=...'");
	mb_free(b);
}

Test(import, dim_pins_by_name)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "batch,3");
	mb_input(b, mb_main(b), "y", MC_FLOAT, "batch,seq");
	mb_output(b, mb_main(b), "x");
	mc_dim_pin dims[] = {{"batch", 2, 0}, {"seq", 9, 0}};
	mc_import_opts opts = {.dim_pins = dims, .n_dim_pins = 2};
	mc_graph *g = import_ok(b, NULL, &opts);
	const mc_value *x = value(g, "x"), *y = value(g, "y");
	cr_assert(x->typed && x->shape.dims[0] == 2 && x->shape.dims[1] == 3);
	cr_assert(y->typed && y->shape.dims[0] == 2 && y->shape.dims[1] == 9);
	mc_graph_free(g);
	mb_free(b);
}

/* mc_dim_pin is API: a negative value must be refused as such, not turned
 * into a misleading "too large". */
Test(import, negative_dim_pin_refused)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "batch,3");
	mb_output(b, mb_main(b), "x");
	mc_dim_pin dims[] = {{"batch", -3, 0}};
	mc_import_opts opts = {.dim_pins = dims, .n_dim_pins = 1};
	cr_assert_null(mb_import(b, NULL, &opts));
	cr_assert_eq(diag_count(), 1, "%s", diag_all());
	cr_assert_eq(diag_count_with("negative"), 1, "%s", diag_all());
	cr_assert_eq(diag_count_with("'x'"), 1, "%s", diag_all());
	mb_free(b);
}

/* A --dim naming no dimension of the inputs is an error listing those the
 * model has, not silently nothing pinned. */
Test(import, dim_pin_naming_nothing_refused)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "batch,3");
	mb_input(b, mb_main(b), "y", MC_FLOAT, "batch,seq");
	mb_output(b, mb_main(b), "x");
	mc_dim_pin dims[] = {{"sq", 4, 0}};
	mc_import_opts opts = {.dim_pins = dims, .n_dim_pins = 1};
	cr_assert_null(mb_import(b, NULL, &opts));
	cr_assert_eq(diag_count(), 1, "%s", diag_all());
	cr_assert_eq(diag_count_with("no input has a dimension named 'sq' (the model's symbolic dimensions: "
	                             "'batch', 'seq')"), 1, "%s", diag_all());
	mb_free(b);
}

Test(import, pin_disagreeing_with_model)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "N,3");
	mb_output(b, mb_main(b), "x");
	mc_input_pin pin = {.name = "x", .shape = {.rank = 2, .dims = {1, 4}}};
	mc_import_opts opts = {.pins = &pin, .n_pins = 1};
	import_fails(b, NULL, &opts,
	             "modelc: error: input 'x': --input-shape gives 4 for dimension 1, the model "
	             "declares 3");
	diag_capture();
	pin.shape = (mc_shape){.rank = 3, .dims = {1, 3, 1}};
	import_fails(b, NULL, &opts,
	             "modelc: error: input 'x': --input-shape gives rank 3 but the model declares "
	             "rank 2");
	diag_capture();
	pin = (mc_input_pin){.name = "nosuch", .shape = {.rank = 1, .dims = {1}}};
	import_fails(b, NULL, &opts,
	             "modelc: error: --input-shape names 'nosuch', which is not a graph input");
	mb_free(b);
	/* a scalar input: the error says how to pin one, and that pin works */
	b = mb_new(OPSET);
	mb_input(b, mb_main(b), "sr", MC_INT64, "");
	mb_output(b, mb_main(b), "sr");
	diag_capture();
	pin = (mc_input_pin){.name = "sr", .shape = {.rank = 1, .dims = {1}}};
	import_fails(b, NULL, &opts,
	             "modelc: error: input 'sr': --input-shape gives rank 1 but the model declares rank 0 "
	             "(a scalar: --input-shape 'sr=scalar')");
	cr_assert(mc_parse_shape("scalar", &pin.shape) && pin.shape.rank == 0);
	mc_graph *g = mb_import(b, NULL, &opts);
	cr_assert_not_null(g, "%s", diag_all());
	cr_assert_eq(g->values[g->inputs[0]].shape.rank, 0);
	mc_graph_free(g);
	mb_free(b);
	/* and an input of unknown rank pinned as a scalar */
	b = mb_new(OPSET);
	mb_input(b, mb_main(b), "sr", MC_INT64, NULL);
	mb_output(b, mb_main(b), "sr");
	g = mb_import(b, NULL, &opts);
	cr_assert_not_null(g, "%s", diag_all());
	cr_assert_eq(g->values[g->inputs[0]].shape.rank, 0);
	mc_graph_free(g);
	mb_free(b);
}

Test(import, input_checks)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "2,-1");
	mb_output(b, mb_main(b), "x");
	import_fails(b, NULL, NULL, "modelc: error: input 'x': dimension 1 is negative (-1)");
	mb_free(b);

	diag_capture();
	b = mb_new(OPSET);
	mb_input(b, mb_main(b), "s", MC_STRING, "2");
	mb_output(b, mb_main(b), "s");
	import_fails(b, NULL, NULL, "modelc: error: input 's': data type 8 (string) is not supported");
	mb_free(b);

	diag_capture();
	b = mb_new(OPSET);
	mb_input(b, mb_main(b), "r", MC_FLOAT, "1,1,1,1,1,1,1,1,1");
	mb_output(b, mb_main(b), "r");
	import_fails(b, NULL, NULL,
	             "modelc: error: input 'r': rank 9 exceeds the supported maximum 8");
	mb_free(b);

	diag_capture();
	b = mb_new(OPSET);
	Onnx__ValueInfoProto *vi = mb_input(b, mb_main(b), "q", MC_FLOAT, "1");
	vi->type->value_case = ONNX__TYPE_PROTO__VALUE__NOT_SET;
	mb_output(b, mb_main(b), "q");
	import_fails(b, NULL, NULL,
	             "modelc: error: input 'q': non-tensor inputs (sequence, optional, map) are "
	             "not supported");
	mb_free(b);
}

Test(import, unknown_dim_fails_inference_naming_it)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "3,batch");
	mb_output(b, mb_main(b), "x");
	mc_graph *g = import_ok(b, NULL, NULL);
	cr_assert(!value(g, "x")->typed);
	cr_assert_eq(diag_count(), 0, "import itself is fine (inspect shows the model)");
	cr_assert_eq(mc_infer_graph(g), -1);
	cr_assert_eq(diag_count(), 1, "%s", diag_all());
	cr_assert_str_eq(diag_line(0),
	                 "modelc: error: input 'x': dimension 1 ('batch') is not fixed; pin it with "
	                 "--input-shape 'x=...' (all 2 dimensions)");
	mc_graph_free(g);

	diag_capture();
	mb_main(b)->input[0] = NULL;
	mb_main(b)->n_input = 0;
	mb_input(b, mb_main(b), "x", MC_FLOAT, "?,2");
	g = import_ok(b, NULL, NULL);
	cr_assert_eq(mc_infer_graph(g), -1);
	cr_assert_str_eq(diag_line(0),
	                 "modelc: error: input 'x': dimension 0 is unknown; pin it with "
	                 "--input-shape 'x=...' (all 2 dimensions)");
	mc_graph_free(g);
	mb_free(b);
}

/* ---- If and captured values ---- */

/* main: c = true, d = false, A = {1, 2}
 *   If(c) then: If(d) then: {7, 7}  else: A   (A captured two levels down)
 *         else: {3, 4}
 * Everything is known at compile time: inference folds y to A. */
static mb *nested_if_model(bool c, bool d)
{
	mb *b = mb_new(OPSET);
	Onnx__GraphProto *m = mb_main(b);
	mb_const_bool(b, m, "c", c);
	mb_const_bool(b, m, "d", d);
	mb_init_floats(b, m, "A", "2", (const float[]){1, 2}, 2);

	Onnx__GraphProto *inner_then = mb_graph(b, "inner_then");
	mb_init_floats(b, inner_then, "sevens", "2", (const float[]){7, 7}, 2);
	mb_output(b, inner_then, "sevens");
	Onnx__GraphProto *inner_else = mb_graph(b, "inner_else");
	mb_output(b, inner_else, "A");

	Onnx__GraphProto *outer_then = mb_graph(b, "outer_then");
	Onnx__NodeProto *inner = mb_node(b, outer_then, "If", "inner", "d", "z");
	mb_attr_graph(b, inner, "then_branch", inner_then);
	mb_attr_graph(b, inner, "else_branch", inner_else);
	mb_output(b, outer_then, "z");
	Onnx__GraphProto *outer_else = mb_graph(b, "outer_else");
	mb_init_floats(b, outer_else, "other", "2", (const float[]){3, 4}, 2);
	mb_output(b, outer_else, "other");

	Onnx__NodeProto *outer = mb_node(b, m, "If", "outer", "c", "y");
	mb_attr_graph(b, outer, "then_branch", outer_then);
	mb_attr_graph(b, outer, "else_branch", outer_else);
	mb_output(b, m, "y");
	return b;
}

Test(import, captured_values_are_recorded)
{
	mb *b = nested_if_model(true, false);
	mc_graph *g = import_ok(b, NULL, NULL);
	cr_assert_eq(g->n_nodes, 1);
	const mc_node *outer = &g->nodes[0];
	cr_assert_str_eq(outer->name, "outer");
	/* the outer If reads d and A through its then branch */
	bool has_d = false, has_a = false;
	for (int k = 0; k < outer->n_implicit; k++) {
		has_d |= outer->implicit[k] == mc_graph_find(g, "d");
		has_a |= outer->implicit[k] == mc_graph_find(g, "A");
	}
	cr_assert(has_d && has_a, "implicit inputs of 'outer': %d", outer->n_implicit);
	const mc_graph *then_g = mc_attr_find(outer, "then_branch")->g;
	cr_assert_not_null(then_g);
	cr_assert_eq(then_g->parent, g);
	int a_in_then = mc_graph_find(then_g, "A");
	cr_assert_geq(a_in_then, 0, "A is captured into the then branch");
	cr_assert_eq(then_g->values[a_in_then].kind, MC_VAL_CAPTURED);
	cr_assert_eq(then_g->values[a_in_then].outer, mc_graph_find(g, "A"));
	mc_graph_free(g);
	mb_free(b);
}

Test(import, if_with_constant_condition_folds)
{
	static const struct {
		bool c, d;
		float want[2];
	} cases[] = {
		{true, false, {1, 2}},
		{true, true, {7, 7}},
		{false, false, {3, 4}},
		{false, true, {3, 4}},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		mb *b = nested_if_model(cases[i].c, cases[i].d);
		mc_graph *g = import_ok(b, NULL, NULL);
		cr_assert_eq(mc_infer_graph(g), 0, "%s", diag_all());
		const mc_value *y = value(g, "y");
		cr_assert(y->typed && y->dtype == MC_FLOAT && y->shape.rank == 1 &&
		          y->shape.dims[0] == 2);
		cr_assert_not_null(y->konst, "case %zu: y must be folded", i);
		assert_floats(y->konst, cases[i].want, 2);
		/* the interpreter takes the folded value as is */
		mc_tensor *out = NULL;
		cr_assert_eq(mc_interp_run(g, NULL, &out, NULL), 0, "%s", diag_all());
		assert_floats(out, cases[i].want, 2);
		mc_tensor_free(out);
		mc_graph_free(g);
		mb_free(b);
	}
}

Test(import, subgraph_nesting_limit)
{
	mb *b = mb_new(OPSET);
	mb_const_bool(b, mb_main(b), "c", true);
	/* MC_MAX_GRAPH_DEPTH + 2 nested If nodes, each branch holding the next */
	Onnx__GraphProto *g = mb_main(b);
	for (int depth = 0; depth <= MC_MAX_GRAPH_DEPTH + 1; depth++) {
		Onnx__GraphProto *t = mb_graph(b, "deep"), *e = mb_graph(b, "deep_else");
		mb_init_floats(b, e, "e", "1", (const float[]){0}, 1);
		mb_output(b, e, "e");
		mb_output(b, t, "y");
		Onnx__NodeProto *n = mb_node(b, g, "If", "nest", "c", "y");
		mb_attr_graph(b, n, "then_branch", t);
		mb_attr_graph(b, n, "else_branch", e);
		if (depth == 0)
			mb_output(b, g, "y");
		g = t;
	}
	char want[256];
	snprintf(want, sizeof want,
	         "modelc: error: graph 'deep': subgraphs are nested more than %d deep",
	         MC_MAX_GRAPH_DEPTH);
	import_fails(b, NULL, NULL, want);
	cr_assert_eq(diag_count(), 1, "%s", diag_all());
	mb_free(b);
}

/* ---- unsupported ops ---- */
Test(import, unsupported_op_is_named)
{
	mb *b = mb_new(17);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "2");
	mb_node(b, mb_main(b), "NoSuchOp", "mystery", "x", "y");
	mb_output(b, mb_main(b), "y");
	mc_graph *g = mb_import(b, NULL, NULL);
	cr_assert_null(g);
	cr_assert_eq(diag_count(), 1, "%s", diag_all());
	cr_assert_str_eq(diag_line(0),
	                 "modelc: error: node 'mystery' (NoSuchOp, opset 17): unsupported op");
	mb_free(b);
}

Test(import, unsupported_ops_allowed_for_inspect)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "2");
	mb_node(b, mb_main(b), "NoSuchOp", "a", "x", "y");
	mb_const_bool(b, mb_main(b), "c", true);
	/* one more inside a branch: reported with its own name */
	Onnx__GraphProto *t = mb_graph(b, "t"), *e = mb_graph(b, "e");
	mb_node(b, t, "AlsoMissing", "inner", "y", "ty");
	mb_output(b, t, "ty");
	mb_output(b, e, "y");
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "If", "if1", "c", "z");
	mb_attr_graph(b, n, "then_branch", t);
	mb_attr_graph(b, n, "else_branch", e);
	mb_output(b, mb_main(b), "z");
	mc_import_opts opts = {.allow_unsupported = true};
	mc_graph *g = import_ok(b, NULL, &opts);
	cr_assert_eq(diag_count(), 2, "%s", diag_all());
	cr_assert_eq(diag_count_with("node 'a' (NoSuchOp, opset 13): unsupported op"), 1, "%s",
	             diag_all());
	cr_assert_eq(diag_count_with("node 'inner' (AlsoMissing, opset 13): unsupported op"), 1,
	             "%s", diag_all());
	cr_assert_eq(mc_report_unsupported(g), 2);
	cr_assert_eq(mc_infer_graph(g), -1, "inference stops at an unsupported op");
	cr_assert_eq(diag_count_with("cannot infer shapes through an unsupported op"), 1, "%s",
	             diag_all());
	mc_graph_free(g);
	mb_free(b);

	/* without allow_unsupported both are named, then counted */
	diag_capture();
	b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "2");
	mb_node(b, mb_main(b), "NoSuchOp", "a", "x", "y");
	mb_node(b, mb_main(b), "NoSuchOp", "b", "y", "z");
	mb_output(b, mb_main(b), "z");
	cr_assert_null(mb_import(b, NULL, NULL));
	cr_assert_eq(diag_count(), 3, "%s", diag_all());
	cr_assert_str_eq(diag_line(2), "modelc: error: 2 nodes use unsupported ops");
	mb_free(b);
}

Test(import, op_arity_is_checked)
{
	mb *b = mb_new(OPSET);
	mb_const_bool(b, mb_main(b), "c", true);
	Onnx__NodeProto *n = mb_if_consts(b, mb_main(b), "if2", "c", "y", "1", (const float[]){1},
	                                  (const float[]){2}, 1);
	/* If takes exactly one input */
	char *two[] = {"c", "c"};
	n->input = two;
	n->n_input = 2;
	mb_output(b, mb_main(b), "y");
	import_fails(b, NULL, NULL,
	             "modelc: error: node 'if2' (If, opset 13): has 2 inputs and 1 outputs; the op "
	             "takes 1 to 1 inputs and 1 to 64 outputs");
	mb_free(b);
}

/* ---- files ---- */
Test(import, import_file_errors)
{
	char *dir = make_temp_dir();
	char path[4200];
	snprintf(path, sizeof path, "%s/absent.onnx", dir);
	cr_assert_null(mc_import_file(path, NULL));
	char want[4400];
	snprintf(want, sizeof want,
	         "modelc: error: cannot open model '%s': No such file or directory", path);
	cr_assert_str_eq(diag_line(0), want);
	diag_capture();
	cr_assert_null(mc_import_file(dir, NULL));
	snprintf(want, sizeof want, "modelc: error: model '%s' is not a regular file", dir);
	cr_assert_str_eq(diag_line(0), want);
	diag_capture();
	snprintf(path, sizeof path, "%s/empty.onnx", dir);
	cr_assert_eq(write_file(path, "", 0), 0);
	cr_assert_null(mc_import_file(path, NULL));
	cr_assert_str_eq(diag_line(0), "modelc: error: the model file is empty");
	rm_tree(dir);
	free(dir);
}

Test(import, model_fifo_refused_without_blocking, .timeout = 3)
{
	char *dir = make_temp_dir();
	char path[4200], want[4400];
	snprintf(path, sizeof path, "%s/model.onnx", dir);
	cr_assert_eq(mkfifo(path, 0600), 0);
	cr_assert_null(mc_import_file(path, NULL));
	snprintf(want, sizeof want, "modelc: error: model '%s' is not a regular file", path);
	cr_assert_str_eq(diag_line(0), want);
	rm_tree(dir);
	free(dir);
}

/* ---- external data ---- */
static char *ext_dir;

static void ext_setup(void)
{
	diag_capture();
	ext_dir = make_temp_dir();
}

static void ext_teardown(void)
{
	rm_tree(ext_dir);
	free(ext_dir);
}

static const char *in_dir(const char *name)
{
	static char buf[2][4200];
	static int which;
	which ^= 1;
	snprintf(buf[which], sizeof buf[which], "%s/%s", ext_dir, name);
	return buf[which];
}

/* weights.bin: 8 bytes of junk, then 4 floats. */
static const float ext_w[4] = {0.125f, -3, 1e-7f, 42};

static void write_weights(const char *name)
{
	unsigned char buf[8 + sizeof ext_w];
	memset(buf, 0xee, 8);
	memcpy(buf + 8, ext_w, sizeof ext_w);
	cr_assert_eq(write_file(in_dir(name), buf, sizeof buf), 0);
}

/* A model whose initializer W (float 2x2) lives in external data. */
static mb *ext_model(const char *location, const char *offset, const char *length)
{
	mb *b = mb_new(OPSET);
	Onnx__TensorProto *t = mb_tensor(b, "W", MC_FLOAT, "2,2");
	mb_external(b, t, "location", location);
	if (offset)
		mb_external(b, t, "offset", offset);
	if (length)
		mb_external(b, t, "length", length);
	mb_initializer(b, mb_main(b), t);
	mb_output(b, mb_main(b), "W");
	return b;
}

Test(external, reads_location_offset_length, .init = ext_setup, .fini = ext_teardown)
{
	write_weights("weights.bin");
	mb *b = ext_model("weights.bin", "8", "16");
	mc_graph *g = import_ok(b, ext_dir, NULL);
	assert_floats(value(g, "W")->konst, ext_w, 4);
	mc_graph_free(g);
	mb_free(b);
}

Test(external, relative_to_model_file, .init = ext_setup, .fini = ext_teardown)
{
	cr_assert_eq(mkdir(in_dir("sub"), 0777), 0);
	write_weights("sub/w.bin");
	mb *b = ext_model("sub/w.bin", "8", NULL);
	cr_assert_eq(mb_write(b, in_dir("model.onnx")), 0);
	/* the current directory must not matter */
	char cwd[4096];
	cr_assert_not_null(getcwd(cwd, sizeof cwd));
	cr_assert_eq(chdir("/"), 0);
	mc_graph *g = mc_import_file(in_dir("model.onnx"), NULL);
	cr_assert_not_null(g, "%s", diag_all());
	assert_floats(value(g, "W")->konst, ext_w, 4);
	mc_graph_free(g);
	cr_assert_eq(chdir(cwd), 0);
	mb_free(b);
}

Test(external, dotdot_refused, .init = ext_setup, .fini = ext_teardown)
{
	mb *b = ext_model("../weights.bin", NULL, NULL);
	import_fails(b, ext_dir, NULL,
	             "modelc: error: tensor 'W': external data location '../weights.bin' leaves the "
	             "model's directory");
	diag_capture();
	mb_free(b);
	b = ext_model("sub/../../weights.bin", NULL, NULL);
	import_fails(b, ext_dir, NULL,
	             "modelc: error: tensor 'W': external data location 'sub/../../weights.bin' "
	             "leaves the model's directory");
	mb_free(b);
}

Test(external, absolute_path_refused, .init = ext_setup, .fini = ext_teardown)
{
	write_weights("weights.bin");
	mb *b = ext_model(in_dir("weights.bin"), "8", NULL);
	char want[4400];
	snprintf(want, sizeof want,
	         "modelc: error: tensor 'W': external data location '%s' leaves the model's "
	         "directory", in_dir("weights.bin"));
	import_fails(b, ext_dir, NULL, want);
	mb_free(b);
}

Test(external, symlink_leaving_dir_refused, .init = ext_setup, .fini = ext_teardown)
{
	char *outside = make_temp_dir();
	char target[4200];
	snprintf(target, sizeof target, "%s/secret.bin", outside);
	cr_assert_eq(write_file(target, ext_w, sizeof ext_w), 0);
	cr_assert_eq(symlink(target, in_dir("link.bin")), 0);
	mb *b = ext_model("link.bin", NULL, NULL);
	import_fails(b, ext_dir, NULL,
	             "modelc: error: tensor 'W': external data location 'link.bin' leaves the "
	             "model's directory (through a symbolic link)");
	mb_free(b);
	/* a directory symlink too */
	diag_capture();
	cr_assert_eq(symlink(outside, in_dir("linkdir")), 0);
	b = ext_model("linkdir/secret.bin", NULL, NULL);
	import_fails(b, ext_dir, NULL,
	             "modelc: error: tensor 'W': external data location 'linkdir/secret.bin' leaves "
	             "the model's directory (through a symbolic link)");
	mb_free(b);
	rm_tree(outside);
	free(outside);
}

Test(external, symlink_inside_dir_is_fine, .init = ext_setup, .fini = ext_teardown)
{
	write_weights("weights.bin");
	cr_assert_eq(symlink("weights.bin", in_dir("alias.bin")), 0);
	mb *b = ext_model("alias.bin", "8", "16");
	mc_graph *g = import_ok(b, ext_dir, NULL);
	assert_floats(value(g, "W")->konst, ext_w, 4);
	mc_graph_free(g);
	mb_free(b);
}

Test(external, past_end_refused, .init = ext_setup, .fini = ext_teardown)
{
	write_weights("weights.bin"); /* 24 bytes */
	mb *b = ext_model("weights.bin", "9", "16");
	import_fails(b, ext_dir, NULL,
	             "modelc: error: tensor 'W': external data offset 9 + 16 bytes is past the end "
	             "of 'weights.bin' (24 bytes)");
	mb_free(b);
	diag_capture();
	b = ext_model("weights.bin", "9223372036854775807", NULL);
	import_fails(b, ext_dir, NULL,
	             "modelc: error: tensor 'W': external data offset 9223372036854775807 + 16 "
	             "bytes is past the end of 'weights.bin' (24 bytes)");
	mb_free(b);
}

Test(external, length_mismatch_refused, .init = ext_setup, .fini = ext_teardown)
{
	write_weights("weights.bin");
	mb *b = ext_model("weights.bin", "8", "12");
	import_fails(b, ext_dir, NULL,
	             "modelc: error: tensor 'W': external data length 12 does not match its shape "
	             "(16 bytes)");
	mb_free(b);
}

Test(external, bad_fields_refused, .init = ext_setup, .fini = ext_teardown)
{
	write_weights("weights.bin");
	mb *b = ext_model("weights.bin", "8x", NULL);
	import_fails(b, ext_dir, NULL,
	             "modelc: error: tensor 'W': external data offset '8x' is not a non-negative "
	             "integer");
	mb_free(b);
	diag_capture();
	b = ext_model("weights.bin", NULL, "-16");
	import_fails(b, ext_dir, NULL,
	             "modelc: error: tensor 'W': external data length '-16' is not a non-negative "
	             "integer");
	mb_free(b);
	diag_capture();
	b = ext_model("", NULL, NULL);
	import_fails(b, ext_dir, NULL, "modelc: error: tensor 'W': external data has no location");
	mb_free(b);
	diag_capture();
	b = ext_model("missing.bin", NULL, NULL);
	char want[4400];
	snprintf(want, sizeof want,
	         "modelc: error: tensor 'W': cannot open external data '%s': No such file or "
	         "directory", in_dir("missing.bin"));
	import_fails(b, ext_dir, NULL, want);
	mb_free(b);
}

Test(external, not_a_regular_file, .init = ext_setup, .fini = ext_teardown)
{
	cr_assert_eq(mkdir(in_dir("d"), 0777), 0);
	mb *b = ext_model("d", NULL, NULL);
	char want[4400];
	snprintf(want, sizeof want,
	         "modelc: error: tensor 'W': cannot read external data '%s': not a regular file",
	         in_dir("d"));
	import_fails(b, ext_dir, NULL, want);
	mb_free(b);
}

/* A FIFO (or a device) named by a model must be refused, not opened for a
 * read that blocks forever. */
Test(external, fifo_refused_without_blocking, .init = ext_setup, .fini = ext_teardown,
     .timeout = 3)
{
	cr_assert_eq(mkfifo(in_dir("pipe"), 0600), 0);
	mb *b = ext_model("pipe", NULL, NULL);
	char want[4400];
	snprintf(want, sizeof want,
	         "modelc: error: tensor 'W': cannot read external data '%s': not a regular file",
	         in_dir("pipe"));
	import_fails(b, ext_dir, NULL, want);
	mb_free(b);
}

Test(external, refused_without_model_dir, .init = ext_setup, .fini = ext_teardown)
{
	write_weights("weights.bin");
	mb *b = ext_model("weights.bin", "8", NULL);
	import_fails(b, NULL, NULL, "modelc: error: tensor 'W': external data is not allowed here");
	mb_free(b);
}
