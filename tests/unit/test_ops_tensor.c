/* Tensor ops (libcore/ops/tensor.c): small graphs built in memory, typed
 * by mc_infer_graph (which folds constant nodes with the ops' eval) and run
 * by the reference interpreter. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"

TestSuite(tensor_ops, .init = capture_diags);

/* ---- tensors ---- */

static mc_shape shape_of(const char *text)
{
	mc_shape s;
	cr_assert(mc_parse_shape(text, &s), "bad test shape %s", text);
	return s;
}

static mc_tensor *tens_f(mc_dtype t, const char *shape, const double *vals)
{
	mc_shape s = shape_of(shape);
	mc_tensor *x = mc_tensor_new(t, &s);
	cr_assert(x);
	for (size_t i = 0; vals && i < x->numel; i++)
		mc_set_f(x, i, vals[i]);
	return x;
}

static mc_tensor *tens_i(mc_dtype t, const char *shape, const int64_t *vals)
{
	mc_shape s = shape_of(shape);
	mc_tensor *x = mc_tensor_new(t, &s);
	cr_assert(x);
	for (size_t i = 0; vals && i < x->numel; i++)
		mc_set_i(x, i, vals[i]);
	return x;
}

/* 0, 1, 2, ... as t */
static mc_tensor *iota(mc_dtype t, const char *shape)
{
	mc_tensor *x = tens_f(t, shape, NULL);
	for (size_t i = 0; i < x->numel; i++)
		mc_set_f(x, i, (double)i);
	return x;
}

static void expect_shape_text(const mc_tensor *t, const char *shape)
{
	mc_shape s = shape_of(shape);
	char a[128], b[128];
	cr_assert(mc_shape_eq(&t->shape, &s), "shape %s, expected %s",
	          mc_shape_str(&t->shape, a, sizeof a), mc_shape_str(&s, b, sizeof b));
}

/* ---- a tiny graph builder ---- */

static mc_graph *graph_new(int opset)
{
	mc_graph *g = mc_xcalloc(1, sizeof *g);
	g->name = mc_xstrdup("test");
	g->opset = opset;
	return g;
}

static int *push_index(int *list, int *count, int v)
{
	list = realloc(list, (size_t)(*count + 1) * sizeof *list);
	cr_assert(list);
	list[(*count)++] = v;
	return list;
}

static void add_input(mc_graph *g, const char *name, mc_dtype t, const char *shape)
{
	int v = mc_graph_add_value(g, name, MC_VAL_INPUT);
	g->values[v].dtype = t;
	g->values[v].shape = shape_of(shape);
	g->values[v].typed = true;
	g->inputs = push_index(g->inputs, &g->n_inputs, v);
}

/* The graph takes ownership of t. */
static void add_const(mc_graph *g, const char *name, mc_tensor *t)
{
	int v = mc_graph_add_value(g, name, MC_VAL_CONST);
	g->values[v].dtype = t->dtype;
	g->values[v].shape = t->shape;
	g->values[v].typed = true;
	g->values[v].konst = t;
}

static void add_output(mc_graph *g, const char *name)
{
	int v = mc_graph_find(g, name);
	cr_assert(v >= 0, "no value %s", name);
	g->outputs = push_index(g->outputs, &g->n_outputs, v);
}

/* Splits "a,b,,c" into value indices; "" names an omitted value (-1).
 * Outputs get new values produced by node `self`. */
static int *value_list(mc_graph *g, const char *names, int *count, int self)
{
	int *list = NULL;
	char buf[256];
	*count = 0;
	if (!*names)
		return mc_xcalloc(1, sizeof *list);
	snprintf(buf, sizeof buf, "%s", names);
	for (char *p = buf, *end; p; p = end ? end + 1 : NULL) {
		end = strchr(p, ',');
		if (end)
			*end = 0;
		int v = -1;
		if (*p && self < 0) {
			v = mc_graph_find(g, p);
			cr_assert(v >= 0, "no value %s", p);
		} else if (*p) {
			v = mc_graph_add_value(g, p, MC_VAL_NODE);
			g->values[v].producer = self;
		}
		list = push_index(list, count, v);
	}
	return list;
}

/* Adds a node; attributes go on with add_int, add_ints, add_tensor right after. */
static mc_node *add_node(mc_graph *g, const char *op, const char *ins, const char *outs)
{
	g->nodes = realloc(g->nodes, (size_t)(g->n_nodes + 1) * sizeof *g->nodes);
	cr_assert(g->nodes);
	int self = g->n_nodes++;
	mc_node *n = &g->nodes[self];
	memset(n, 0, sizeof *n);
	n->name = mc_xstrdup("n");
	n->op_type = mc_xstrdup(op);
	n->domain = mc_xstrdup("");
	n->opset = g->opset;
	n->op = mc_registry_find(op, g->opset, NULL);
	cr_assert(n->op, "%s is not registered at opset %d", op, g->opset);
	n->inputs = value_list(g, ins, &n->n_inputs, -1);
	n->outputs = value_list(g, outs, &n->n_outputs, self);
	return n;
}

static mc_attr *new_attr(mc_node *n, const char *name, mc_attr_type t)
{
	n->attrs = realloc(n->attrs, (size_t)(n->n_attrs + 1) * sizeof *n->attrs);
	cr_assert(n->attrs);
	mc_attr *a = &n->attrs[n->n_attrs++];
	memset(a, 0, sizeof *a);
	a->name = mc_xstrdup(name);
	a->type = t;
	return a;
}

static void add_int(mc_node *n, const char *name, int64_t v)
{
	new_attr(n, name, MC_ATTR_INT)->i = v;
}

static void add_ints(mc_node *n, const char *name, size_t count, ...)
{
	mc_attr *a = new_attr(n, name, MC_ATTR_INTS);
	va_list ap;
	a->n = count;
	a->ints = mc_xcalloc(count ? count : 1, sizeof *a->ints);
	va_start(ap, count);
	for (size_t k = 0; k < count; k++)
		a->ints[k] = va_arg(ap, int64_t);
	va_end(ap);
}

static void add_tensor(mc_node *n, const char *name, mc_tensor *t)
{
	new_attr(n, name, MC_ATTR_TENSOR)->t = t;
}

/* parse (as import would), infer with folding, then run. */
static int compile(mc_graph *g)
{
	for (int i = 0; i < g->n_nodes; i++) {
		mc_node *n = &g->nodes[i];
		if (n->op->parse && n->op->parse(n))
			return -1;
	}
	return mc_infer_graph(g);
}

static int run(mc_graph *g, mc_tensor *const *in, mc_tensor **out)
{
	if (compile(g))
		return -1;
	return mc_interp_run(g, in, out, NULL);
}

/* Frees the graph and n result tensors. */
static void free_graph(mc_graph *g, mc_tensor **t, int n)
{
	for (int i = 0; i < n; i++)
		mc_tensor_free(t[i]);
	mc_graph_free(g);
}

#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define F64(...) ((const double[]){__VA_ARGS__})
#define COUNT(...) (sizeof((const double[]){__VA_ARGS__}) / sizeof(double))
/* Exact values. */
#define EXPECT(t, ...) expect_values(t, F64(__VA_ARGS__), COUNT(__VA_ARGS__), 0)

/* ---- Reshape ---- */

Test(tensor_ops, reshape_zero_copies_and_minus_one_infers)
{
	mc_graph *g = graph_new(13);
	add_input(g, "x", MC_FLOAT, "2x3x4");
	add_const(g, "s", tens_i(MC_INT64, "2", I64(0, -1)));
	add_node(g, "Reshape", "x,s", "y");
	add_output(g, "y");
	mc_tensor *in[] = {iota(MC_FLOAT, "2x3x4")}, *out[1] = {0};
	cr_assert_eq(run(g, in, out), 0, "%s", last_error);
	expect_shape_text(out[0], "2x12");
	cr_assert_eq(memcmp(out[0]->data, in[0]->data, in[0]->nbytes), 0);
	mc_tensor_free(in[0]);
	free_graph(g, out, 1);
}

Test(tensor_ops, reshape_allowzero_keeps_zero)
{
	mc_graph *g = graph_new(14);
	add_input(g, "x", MC_FLOAT, "0x3x4");
	add_const(g, "s", tens_i(MC_INT64, "3", I64(3, 4, 0)));
	add_int(add_node(g, "Reshape", "x,s", "y"), "allowzero", 1);
	add_output(g, "y");
	cr_assert_eq(compile(g), 0, "%s", last_error);
	cr_assert_eq(g->values[g->outputs[0]].shape.dims[2], 0);
	cr_assert_eq(g->values[g->outputs[0]].shape.dims[0], 3);
	mc_graph_free(g);
}

Test(tensor_ops, reshape_opset1_shape_attribute)
{
	mc_graph *g = graph_new(1);
	add_const(g, "x", iota(MC_INT32, "6"));
	add_ints(add_node(g, "Reshape", "x", "y"), "shape", 2, (int64_t)3, (int64_t)-1);
	add_output(g, "y");
	mc_tensor *out[1] = {0};
	cr_assert_eq(run(g, NULL, out), 0, "%s", last_error);
	expect_shape_text(out[0], "3x2");
	EXPECT(out[0], 0, 1, 2, 3, 4, 5);
	free_graph(g, out, 1);
}

Test(tensor_ops, reshape_errors)
{
	mc_graph *g = graph_new(13);
	add_input(g, "x", MC_FLOAT, "2x3");
	add_const(g, "s", tens_i(MC_INT64, "2", I64(4, 2)));
	add_node(g, "Reshape", "x,s", "y");
	add_output(g, "y");
	cr_assert_neq(compile(g), 0);
	cr_assert(strstr(last_error, "cannot reshape"), "%s", last_error);
	mc_graph_free(g);

	/* a shape that is not a constant is a clear error */
	g = graph_new(13);
	add_input(g, "x", MC_FLOAT, "2x3");
	add_input(g, "s", MC_INT64, "2");
	add_node(g, "Reshape", "x,s", "y");
	add_output(g, "y");
	cr_assert_neq(compile(g), 0);
	cr_assert(strstr(last_error, "compile time"), "%s", last_error);
	mc_graph_free(g);
}

/* ---- Flatten, Squeeze, Unsqueeze ---- */

Test(tensor_ops, flatten_axes)
{
	static const struct {
		int opset;
		int64_t axis;
		const char *want;
	} cases[] = {{13, 0, "1x24"}, {13, 2, "6x4"}, {13, -1, "6x4"}, {13, 3, "24x1"}, {9, 1, "2x12"}};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		mc_graph *g = graph_new(cases[k].opset);
		add_input(g, "x", MC_FLOAT, "2x3x4");
		add_int(add_node(g, "Flatten", "x", "y"), "axis", cases[k].axis);
		add_output(g, "y");
		cr_assert_eq(compile(g), 0, "%s", last_error);
		mc_tensor *y = mc_tensor_new(MC_FLOAT, &g->values[g->outputs[0]].shape);
		expect_shape_text(y, cases[k].want);
		mc_tensor_free(y);
		mc_graph_free(g);
	}
}

Test(tensor_ops, squeeze_and_unsqueeze_across_opsets)
{
	/* opset 11: axes attributes */
	mc_graph *g = graph_new(11);
	add_const(g, "x", iota(MC_FLOAT, "1x3x1x2"));
	add_ints(add_node(g, "Squeeze", "x", "s"), "axes", 1, (int64_t)-2);
	add_ints(add_node(g, "Unsqueeze", "s", "u"), "axes", 2, (int64_t)-1, (int64_t)0);
	add_node(g, "Squeeze", "u", "all");
	add_output(g, "s");
	add_output(g, "u");
	add_output(g, "all");
	mc_tensor *out[3] = {0};
	cr_assert_eq(run(g, NULL, out), 0, "%s", last_error);
	expect_shape_text(out[0], "1x3x2");
	expect_shape_text(out[1], "1x1x3x2x1");
	expect_shape_text(out[2], "3x2");
	EXPECT(out[2], 0, 1, 2, 3, 4, 5);
	free_graph(g, out, 3);

	/* opset 13: axes inputs, normalised against the output rank */
	g = graph_new(13);
	add_input(g, "x", MC_FLOAT, "3x4");
	add_const(g, "a", tens_i(MC_INT64, "2", I64(3, 1)));
	add_node(g, "Unsqueeze", "x,a", "u");
	add_const(g, "b", tens_i(MC_INT64, "1", I64(-1)));
	add_node(g, "Squeeze", "u,b", "s");
	add_output(g, "s");
	cr_assert_eq(compile(g), 0, "%s", last_error);
	mc_tensor *s = mc_tensor_new(MC_FLOAT, &g->values[g->outputs[0]].shape);
	expect_shape_text(s, "3x1x4");
	mc_tensor_free(s);
	mc_graph_free(g);
}

Test(tensor_ops, squeeze_rejects_non_unit_axis)
{
	mc_graph *g = graph_new(13);
	add_input(g, "x", MC_FLOAT, "3x4");
	add_const(g, "a", tens_i(MC_INT64, "1", I64(0)));
	add_node(g, "Squeeze", "x,a", "y");
	add_output(g, "y");
	cr_assert_neq(compile(g), 0);
	cr_assert(strstr(last_error, "cannot squeeze axis 0"), "%s", last_error);
	mc_graph_free(g);
}

/* ---- Transpose, Concat, Split ---- */

Test(tensor_ops, transpose_perm_and_default)
{
	mc_graph *g = graph_new(13);
	add_input(g, "x", MC_FLOAT, "2x3x2");
	add_ints(add_node(g, "Transpose", "x", "p"), "perm", 3, (int64_t)1, (int64_t)0,
	         (int64_t)2);
	add_node(g, "Transpose", "x", "r");
	add_output(g, "p");
	add_output(g, "r");
	mc_tensor *in[] = {iota(MC_FLOAT, "2x3x2")}, *out[2] = {0};
	cr_assert_eq(run(g, in, out), 0, "%s", last_error);
	expect_shape_text(out[0], "3x2x2");
	EXPECT(out[0], 0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11);
	expect_shape_text(out[1], "2x3x2");
	EXPECT(out[1], 0, 6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11);
	mc_tensor_free(in[0]);
	free_graph(g, out, 2);
}

Test(tensor_ops, transpose_rejects_bad_perm)
{
	mc_graph *g = graph_new(13);
	add_input(g, "x", MC_FLOAT, "2x3");
	add_ints(add_node(g, "Transpose", "x", "y"), "perm", 2, (int64_t)1, (int64_t)1);
	add_output(g, "y");
	cr_assert_neq(compile(g), 0);
	cr_assert(strstr(last_error, "permutation"), "%s", last_error);
	mc_graph_free(g);
}

Test(tensor_ops, concat_middle_axis)
{
	mc_graph *g = graph_new(13);
	add_input(g, "a", MC_INT64, "2x1");
	add_const(g, "b", tens_i(MC_INT64, "2x2", I64(10, 11, 12, 13)));
	add_int(add_node(g, "Concat", "a,b,a", "y"), "axis", -1);
	add_output(g, "y");
	mc_tensor *in[] = {tens_i(MC_INT64, "2x1", I64(1, 2))}, *out[1] = {0};
	cr_assert_eq(run(g, in, out), 0, "%s", last_error);
	expect_shape_text(out[0], "2x4");
	EXPECT(out[0], 1, 10, 11, 1, 2, 12, 13, 2);
	mc_tensor_free(in[0]);
	free_graph(g, out, 1);
}

Test(tensor_ops, split_opset18_uneven_last_chunk)
{
	mc_graph *g = graph_new(18);
	add_input(g, "x", MC_FLOAT, "2x7");
	mc_node *n = add_node(g, "Split", "x", "a,b,c");
	add_int(n, "axis", 1);
	add_int(n, "num_outputs", 3);
	add_output(g, "a");
	add_output(g, "b");
	add_output(g, "c");
	mc_tensor *in[] = {iota(MC_FLOAT, "2x7")}, *out[3] = {0};
	cr_assert_eq(run(g, in, out), 0, "%s", last_error);
	expect_shape_text(out[0], "2x3");
	expect_shape_text(out[2], "2x1");
	EXPECT(out[1], 3, 4, 5, 10, 11, 12);
	EXPECT(out[2], 6, 13);
	mc_tensor_free(in[0]);
	free_graph(g, out, 3);
}

Test(tensor_ops, split_sizes_attribute_and_input)
{
	/* opset 11: split attribute */
	mc_graph *g = graph_new(11);
	add_input(g, "x", MC_INT32, "5");
	add_ints(add_node(g, "Split", "x", "a,b"), "split", 2, (int64_t)1, (int64_t)4);
	add_output(g, "b");
	mc_tensor *in[] = {iota(MC_INT32, "5")}, *out[1] = {0};
	cr_assert_eq(run(g, in, out), 0, "%s", last_error);
	EXPECT(out[0], 1, 2, 3, 4);
	free_graph(g, out, 1);

	/* opset 13: split input, zero-size parts allowed */
	g = graph_new(13);
	add_input(g, "x", MC_INT32, "5");
	add_const(g, "s", tens_i(MC_INT64, "3", I64(0, 3, 2)));
	add_node(g, "Split", "x,s", "a,b,c");
	add_output(g, "a");
	add_output(g, "c");
	mc_tensor *out2[2] = {0};
	cr_assert_eq(run(g, in, out2), 0, "%s", last_error);
	expect_shape_text(out2[0], "0");
	EXPECT(out2[1], 3, 4);
	free_graph(g, out2, 2);

	/* opset 13 without a list: parts must be equal */
	g = graph_new(13);
	add_input(g, "x", MC_INT32, "5");
	add_node(g, "Split", "x", "a,b");
	add_output(g, "a");
	cr_assert_neq(compile(g), 0);
	cr_assert(strstr(last_error, "evenly"), "%s", last_error);
	mc_graph_free(g);
	mc_tensor_free(in[0]);
}

/* ---- Shape, Size: shapes only ---- */

Test(tensor_ops, shape_start_end_clamped)
{
	static const struct {
		int64_t start, end;
		double want[4];
		size_t n;
	} cases[] = {{0, 99, {2, 3, 4, 5}, 4}, {-1, 99, {5}, 1}, {1, -1, {3, 4}, 2},
	             {-99, 1, {2}, 1}, {3, 1, {0}, 0}};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		mc_graph *g = graph_new(15);
		add_input(g, "x", MC_FLOAT, "2x3x4x5");
		mc_node *n = add_node(g, "Shape", "x", "s");
		add_int(n, "start", cases[k].start);
		add_int(n, "end", cases[k].end);
		add_output(g, "s");
		/* folded from shapes alone: the constant exists before any run */
		cr_assert_eq(compile(g), 0, "%s", last_error);
		const mc_tensor *s = g->values[g->outputs[0]].konst;
		cr_assert(s, "Shape was not folded");
		cr_assert_eq(s->dtype, MC_INT64);
		expect_values(s, cases[k].want, cases[k].n, 0);
		mc_graph_free(g);
	}
}

Test(tensor_ops, shape_and_size_never_read_data)
{
	/* eval gets a tensor without data: reading it would crash */
	const mc_op *shape = mc_registry_find("Shape", 13, NULL);
	const mc_op *size = mc_registry_find("Size", 13, NULL);
	cr_assert(shape && size);
	cr_assert(shape->flags & MC_OP_SHAPE_ONLY);
	cr_assert(size->flags & MC_OP_SHAPE_ONLY);
	mc_tensor ghost = {.dtype = MC_FLOAT, .shape = shape_of("3x0x7"), .numel = 0};
	const mc_tensor *in[] = {&ghost};
	mc_node n = {.name = "n", .op_type = "Shape", .domain = "", .opset = 13,
	             .n_inputs = 1, .n_outputs = 1};
	mc_tensor *s = tens_i(MC_INT64, "3", NULL), *z = tens_i(MC_INT64, "scalar", NULL);
	mc_eval_ctx c = {.node = &n, .n_in = 1, .n_out = 1, .in = in, .out = &s};
	cr_assert_eq(shape->eval(&c), 0);
	EXPECT(s, 3, 0, 7);
	n.op_type = "Size";
	c.out = &z;
	cr_assert_eq(size->eval(&c), 0);
	EXPECT(z, 0);
	mc_tensor_free(s);
	mc_tensor_free(z);
}

/* ---- shape subgraphs resolved at compile time ---- */

Test(tensor_ops, shape_subgraph_folds_into_reshape_and_constantofshape)
{
	mc_graph *g = graph_new(17);
	add_input(g, "x", MC_FLOAT, "2x3x4");
	add_input(g, "y", MC_FLOAT, "4x6");
	add_node(g, "Shape", "x", "sx");
	add_node(g, "Reshape", "y,sx", "r");
	mc_node *n = add_node(g, "ConstantOfShape", "sx", "c");
	add_tensor(n, "value", tens_i(MC_INT32, "1", I64(7)));
	add_output(g, "r");
	add_output(g, "c");
	mc_tensor *in[] = {iota(MC_FLOAT, "2x3x4"), iota(MC_FLOAT, "4x6")}, *out[2] = {0};
	cr_assert_eq(run(g, in, out), 0, "%s", last_error);
	expect_shape_text(out[0], "2x3x4");
	cr_assert_eq(mc_get_f(out[0], 23), 23);
	expect_shape_text(out[1], "2x3x4");
	cr_assert_eq(out[1]->dtype, MC_INT32);
	cr_assert_eq(mc_get_i(out[1], 0), 7);
	cr_assert_eq(mc_get_i(out[1], 23), 7);
	cr_assert(g->values[g->outputs[1]].konst, "ConstantOfShape was not folded");
	mc_tensor_free(in[0]);
	mc_tensor_free(in[1]);
	free_graph(g, out, 2);
}

/* ---- ConstantOfShape, Range ---- */

Test(tensor_ops, constantofshape_default_and_scalar)
{
	mc_graph *g = graph_new(9);
	add_const(g, "s", tens_i(MC_INT64, "2", I64(2, 0)));
	add_const(g, "e", tens_i(MC_INT64, "0", NULL));
	add_node(g, "ConstantOfShape", "s", "z");
	add_tensor(add_node(g, "ConstantOfShape", "e", "one"), "value",
	           tens_f(MC_DOUBLE, "1", F64(1.5)));
	add_output(g, "z");
	add_output(g, "one");
	mc_tensor *out[2] = {0};
	cr_assert_eq(run(g, NULL, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_FLOAT);
	expect_shape_text(out[0], "2x0");
	expect_shape_text(out[1], "scalar");
	EXPECT(out[1], 1.5);
	free_graph(g, out, 2);
}

Test(tensor_ops, range_int_and_float)
{
	mc_graph *g = graph_new(11);
	add_const(g, "a", tens_i(MC_INT32, "scalar", I64(10)));
	add_const(g, "b", tens_i(MC_INT32, "scalar", I64(4)));
	add_const(g, "c", tens_i(MC_INT32, "scalar", I64(-3)));
	add_node(g, "Range", "a,b,c", "ri");
	add_const(g, "fa", tens_f(MC_FLOAT, "scalar", F64(1)));
	add_const(g, "fb", tens_f(MC_FLOAT, "scalar", F64(2)));
	add_const(g, "fc", tens_f(MC_FLOAT, "scalar", F64(0.25)));
	add_node(g, "Range", "fa,fb,fc", "rf");
	add_node(g, "Range", "b,a,c", "empty");
	add_output(g, "ri");
	add_output(g, "rf");
	add_output(g, "empty");
	mc_tensor *out[3] = {0};
	cr_assert_eq(run(g, NULL, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_INT32);
	EXPECT(out[0], 10, 7);
	EXPECT(out[1], 1, 1.25, 1.5, 1.75);
	expect_shape_text(out[2], "0");
	free_graph(g, out, 3);
}

/* ---- Expand, Tile, EyeLike ---- */

Test(tensor_ops, expand_bidirectional)
{
	mc_graph *g = graph_new(13);
	add_input(g, "x", MC_FLOAT, "3x1");
	add_const(g, "s", tens_i(MC_INT64, "3", I64(2, 1, 2)));
	add_node(g, "Expand", "x,s", "y");
	add_output(g, "y");
	mc_tensor *in[] = {tens_f(MC_FLOAT, "3x1", F64(1, 2, 3))}, *out[1] = {0};
	cr_assert_eq(run(g, in, out), 0, "%s", last_error);
	expect_shape_text(out[0], "2x3x2");
	EXPECT(out[0], 1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3);
	mc_tensor_free(in[0]);
	free_graph(g, out, 1);
}

Test(tensor_ops, tile_repeats_and_opset1)
{
	mc_graph *g = graph_new(13);
	add_input(g, "x", MC_UINT8, "2x2");
	add_const(g, "r", tens_i(MC_INT64, "2", I64(2, 2)));
	add_node(g, "Tile", "x,r", "y");
	add_output(g, "y");
	mc_tensor *in[] = {tens_i(MC_UINT8, "2x2", I64(1, 2, 3, 4))}, *out[1] = {0};
	cr_assert_eq(run(g, in, out), 0, "%s", last_error);
	expect_shape_text(out[0], "4x4");
	EXPECT(out[0], 1, 2, 1, 2, 3, 4, 3, 4, 1, 2, 1, 2, 3, 4, 3, 4);
	free_graph(g, out, 1);

	g = graph_new(1);
	add_input(g, "x", MC_UINT8, "2x2");
	add_const(g, "t", tens_i(MC_INT64, "scalar", I64(3)));
	add_const(g, "a", tens_i(MC_INT64, "scalar", I64(1)));
	add_node(g, "Tile", "x,t,a", "y");
	add_output(g, "y");
	mc_tensor *out2[1] = {0};
	cr_assert_eq(run(g, in, out2), 0, "%s", last_error);
	expect_shape_text(out2[0], "2x6");
	EXPECT(out2[0], 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4);
	mc_tensor_free(in[0]);
	free_graph(g, out2, 1);
}

Test(tensor_ops, eyelike_offset_and_dtype)
{
	mc_graph *g = graph_new(9);
	add_input(g, "x", MC_INT32, "3x4");
	mc_node *n = add_node(g, "EyeLike", "x", "y");
	add_int(n, "k", 1);
	add_int(n, "dtype", MC_DOUBLE);
	add_output(g, "y");
	mc_tensor *in[] = {tens_i(MC_INT32, "3x4", NULL)}, *out[1] = {0};
	cr_assert_eq(run(g, in, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_DOUBLE);
	EXPECT(out[0], 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1);
	mc_tensor_free(in[0]);
	free_graph(g, out, 1);
}

/* ---- absurd shapes are errors, not crashes or huge allocations ---- */

Test(tensor_ops, overflowing_shapes_are_errors)
{
	const int64_t big = (int64_t)1 << 40;
	mc_graph *g = graph_new(13);
	add_input(g, "x", MC_FLOAT, "1");
	add_const(g, "s", tens_i(MC_INT64, "3", I64(big, big, 0)));
	add_node(g, "Expand", "x,s", "y");
	add_output(g, "y");
	cr_assert_neq(compile(g), 0);
	cr_assert(strstr(last_error, "too large"), "%s", last_error);
	mc_graph_free(g);

	g = graph_new(13);
	add_input(g, "x", MC_FLOAT, "2x2");
	add_const(g, "r", tens_i(MC_INT64, "2", I64(big, big)));
	add_node(g, "Tile", "x,r", "y");
	add_output(g, "y");
	cr_assert_neq(compile(g), 0);
	cr_assert(strstr(last_error, "too large"), "%s", last_error);
	mc_graph_free(g);

	g = graph_new(13);
	add_const(g, "s", tens_i(MC_INT64, "2", I64(big, big)));
	add_node(g, "ConstantOfShape", "s", "y");
	add_output(g, "y");
	cr_assert_neq(compile(g), 0);
	cr_assert(strstr(last_error, "too large"), "%s", last_error);
	mc_graph_free(g);

	g = graph_new(13);
	add_const(g, "a", tens_i(MC_INT64, "scalar", I64(INT64_MIN)));
	add_const(g, "b", tens_i(MC_INT64, "scalar", I64(INT64_MAX)));
	add_const(g, "c", tens_i(MC_INT64, "scalar", I64(1)));
	add_node(g, "Range", "a,b,c", "y");
	add_output(g, "y");
	cr_assert_neq(compile(g), 0);
	cr_assert(strstr(last_error, "too large"), "%s", last_error);
	mc_graph_free(g);

	g = graph_new(14);
	add_input(g, "x", MC_FLOAT, "0");
	add_const(g, "s", tens_i(MC_INT64, "3", I64(big, big, 0)));
	add_int(add_node(g, "Reshape", "x,s", "y"), "allowzero", 1);
	add_output(g, "y");
	cr_assert_neq(compile(g), 0);
	cr_assert(strstr(last_error, "too large"), "%s", last_error);
	mc_graph_free(g);
}
