/* Loop and Scan: tiny models built as ONNX protobufs (bodies are real
 * subgraphs), imported, typed and run by the reference interpreter;
 * numbers checked by hand, and the errors hostile models must get. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelc.h"
#include "onnx/onnx.pb-c.h"

/* ---- diagnostics captured for error tests ---- */

static char first_error[1024];

static void capture(const char *line, void *user)
{
	(void)user;
	if (!first_error[0])
		snprintf(first_error, sizeof first_error, "%s", line);
}

/* ---- every allocation of a test model, freed together ---- */

static void *pool[4096];
static int n_pool;

static void *palloc(size_t n)
{
	cr_assert_lt(n_pool, 4096);
	return pool[n_pool++] = calloc(1, n ? n : 1);
}

static char *pstr(const char *s)
{
	return strcpy(palloc(strlen(s) + 1), s);
}

static void setup(void)
{
	first_error[0] = 0;
	n_pool = 0;
	mc_set_diag_sink(capture, NULL);
}

static void teardown(void)
{
	for (int i = 0; i < n_pool; i++)
		free(pool[i]);
	n_pool = 0;
}

TestSuite(loop, .init = setup, .fini = teardown);

/* ---- building protobufs ---- */

#define CAP 16

/* rank < 0: no type at all */
static Onnx__ValueInfoProto *vi(const char *name, int dtype, int rank, const int64_t *dims)
{
	Onnx__ValueInfoProto *v = palloc(sizeof *v);
	*v = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
	v->name = pstr(name);
	if (rank < 0)
		return v;
	Onnx__TypeProto *tp = palloc(sizeof *tp);
	Onnx__TypeProto__Tensor *tt = palloc(sizeof *tt);
	Onnx__TensorShapeProto *sp = palloc(sizeof *sp);
	*tp = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
	*tt = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
	*sp = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
	tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
	tp->tensor_type = tt;
	v->type = tp;
	tt->has_elem_type = 1;
	tt->elem_type = dtype;
	tt->shape = sp;
	sp->n_dim = (size_t)rank;
	sp->dim = palloc((size_t)rank * sizeof *sp->dim);
	for (int d = 0; d < rank; d++) {
		Onnx__TensorShapeProto__Dimension *dim = palloc(sizeof *dim);
		*dim = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
		if (dims[d] >= 0) {
			dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
			dim->dim_value = dims[d];
		}
		sp->dim[d] = dim;
	}
	return v;
}

#define VI(name, dtype, ...) \
	vi(name, dtype, (int)(sizeof((int64_t[]){0, __VA_ARGS__}) / sizeof(int64_t)) - 1, \
	   (int64_t[]){__VA_ARGS__ + 0})
#define VI0(name, dtype) vi(name, dtype, 0, NULL)

/* Splits "a,b,,c" into names ("" for an omitted one). */
static size_t names(const char *list, char ***out)
{
	*out = palloc(CAP * sizeof **out);
	size_t n = 0;
	if (!*list)
		return 0;
	for (const char *p = list;; p++) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		cr_assert_lt(n, CAP);
		(*out)[n] = palloc(len + 1);
		memcpy((*out)[n++], p, len);
		if (!e)
			break;
		p = e;
	}
	return n;
}

static Onnx__NodeProto *node(const char *op, const char *ins, const char *outs)
{
	Onnx__NodeProto *n = palloc(sizeof *n);
	*n = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
	n->op_type = pstr(op);
	n->name = pstr(op);
	n->n_input = names(ins, &n->input);
	n->n_output = names(outs, &n->output);
	n->attribute = palloc(CAP * sizeof *n->attribute);
	return n;
}

static Onnx__AttributeProto *attr(Onnx__NodeProto *n, const char *name,
                                  Onnx__AttributeProto__AttributeType t)
{
	Onnx__AttributeProto *a = palloc(sizeof *a);
	*a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
	a->name = pstr(name);
	a->has_type = 1;
	a->type = t;
	n->attribute[n->n_attribute++] = a;
	return a;
}

static void attr_graph(Onnx__NodeProto *n, const char *name, Onnx__GraphProto *g)
{
	attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = g;
}

static void attr_int(Onnx__NodeProto *n, const char *name, int64_t v)
{
	Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
	a->has_i = 1;
	a->i = v;
}

static void attr_ints(Onnx__NodeProto *n, const char *name, const int64_t *v, size_t count)
{
	Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
	a->n_ints = count;
	a->ints = palloc(count * sizeof *v);
	memcpy(a->ints, v, count * sizeof *v);
}

static Onnx__GraphProto *graph(const char *name)
{
	Onnx__GraphProto *g = palloc(sizeof *g);
	*g = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
	g->name = pstr(name);
	g->node = palloc(CAP * sizeof *g->node);
	g->input = palloc(CAP * sizeof *g->input);
	g->output = palloc(CAP * sizeof *g->output);
	g->initializer = palloc(CAP * sizeof *g->initializer);
	return g;
}

static void g_in(Onnx__GraphProto *g, Onnx__ValueInfoProto *v) { g->input[g->n_input++] = v; }
static void g_out(Onnx__GraphProto *g, Onnx__ValueInfoProto *v) { g->output[g->n_output++] = v; }
static void g_node(Onnx__GraphProto *g, Onnx__NodeProto *n) { g->node[g->n_node++] = n; }

static void g_out_untyped(Onnx__GraphProto *g, const char *name)
{
	g_out(g, vi(name, 0, -1, NULL));
}

/* Initializers: int64 or float32 data. */
static void g_init(Onnx__GraphProto *g, const char *name, int dtype, int rank,
                   const int64_t *dims, const double *vals)
{
	Onnx__TensorProto *t = palloc(sizeof *t);
	*t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
	t->name = pstr(name);
	t->has_data_type = 1;
	t->data_type = dtype;
	t->n_dims = (size_t)rank;
	t->dims = palloc((size_t)rank * sizeof(int64_t));
	size_t numel = 1;
	for (int d = 0; d < rank; d++) {
		t->dims[d] = dims[d];
		numel *= (size_t)dims[d];
	}
	if (dtype == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) {
		t->n_int64_data = numel;
		t->int64_data = palloc(numel * sizeof(int64_t));
		for (size_t i = 0; i < numel; i++)
			t->int64_data[i] = (int64_t)vals[i];
	} else if (dtype == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL) {
		t->n_int32_data = numel;
		t->int32_data = palloc(numel * sizeof(int32_t));
		for (size_t i = 0; i < numel; i++)
			t->int32_data[i] = vals[i] != 0;
	} else {
		t->n_float_data = numel;
		t->float_data = palloc(numel * sizeof(float));
		for (size_t i = 0; i < numel; i++)
			t->float_data[i] = (float)vals[i];
	}
	g->initializer[g->n_initializer++] = t;
}

static void g_scalar_i64(Onnx__GraphProto *g, const char *name, int64_t v)
{
	Onnx__TensorProto *t;
	g_init(g, name, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0, NULL, (double[]){0});
	t = g->initializer[g->n_initializer - 1];
	t->int64_data[0] = v; /* exact, beyond double's 53 bits */
}

/* Imports and types a model; NULL (first_error set) on failure. */
static mc_graph *load(Onnx__GraphProto *g, int opset)
{
	Onnx__OperatorSetIdProto op = ONNX__OPERATOR_SET_ID_PROTO__INIT;
	Onnx__OperatorSetIdProto *ops[1] = {&op};
	Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
	op.domain = (char *)"";
	op.has_version = 1;
	op.version = opset;
	m.has_ir_version = 1;
	m.ir_version = 8;
	m.n_opset_import = 1;
	m.opset_import = ops;
	m.graph = g;
	size_t len = onnx__model_proto__get_packed_size(&m);
	uint8_t *buf = palloc(len);
	onnx__model_proto__pack(&m, buf);
	mc_graph *ir = mc_import_buffer(buf, len, ".", NULL);
	if (ir && mc_infer_graph(ir)) {
		mc_graph_free(ir);
		return NULL;
	}
	return ir;
}

static mc_tensor *tensor(mc_dtype t, int rank, const int64_t *dims, const double *vals)
{
	mc_shape s = {.rank = rank};
	if (rank)
		memcpy(s.dims, dims, (size_t)rank * sizeof *dims);
	mc_tensor *x = mc_tensor_new(t, &s);
	for (size_t i = 0; vals && i < x->numel; i++)
		mc_set_f(x, i, vals[i]);
	return x;
}

#define T1(t, a, ...) tensor(t, 1, (int64_t[]){a}, (double[]){__VA_ARGS__})
#define T2(t, a, b, ...) tensor(t, 2, (int64_t[]){a, b}, (double[]){__VA_ARGS__})
#define T0(t, v) tensor(t, 0, NULL, (double[]){v})

/* Runs g on inputs; outputs must be freed by the caller. */
static void run(mc_graph *g, mc_tensor **in, mc_tensor **out)
{
	cr_assert_eq(mc_interp_run(g, in, out, NULL), 0, "%s", first_error);
}

static void expect(const mc_tensor *t, int rank, const int64_t *dims, const double *vals)
{
	cr_assert_eq(t->shape.rank, rank);
	for (int d = 0; d < rank; d++)
		cr_assert_eq(t->shape.dims[d], dims[d], "dim %d: %lld", d, (long long)t->shape.dims[d]);
	for (size_t i = 0; i < t->numel; i++)
		cr_assert_float_eq(mc_get_f(t, i), vals[i], 1e-6, "element %zu: got %g, want %g", i,
		                   mc_get_f(t, i), vals[i]);
}

#define EXPECT1(t, a, ...) expect(t, 1, (int64_t[]){a}, (double[]){__VA_ARGS__})
#define EXPECT2(t, a, b, ...) expect(t, 2, (int64_t[]){a, b}, (double[]){__VA_ARGS__})

static void free_tensors(mc_tensor **t, int n)
{
	for (int i = 0; i < n; i++)
		mc_tensor_free(t[i]);
}

enum { F32 = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, I64 = ONNX__TENSOR_PROTO__DATA_TYPE__INT64,
       BOOL_ = ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, I32 = ONNX__TENSOR_PROTO__DATA_TYPE__INT32 };

/* ---- Loop ---- */

/* body(i, c, acc) -> (c, acc + w + float(i), acc + w + float(i)); w is
 * read from the enclosing graph. */
static Onnx__GraphProto *sum_body(int64_t width)
{
	Onnx__GraphProto *b = graph("body");
	g_in(b, VI0("i", I64));
	g_in(b, VI0("c", BOOL_));
	g_in(b, VI("acc", F32, width));
	g_node(b, node("Identity", "c", "c_out"));
	g_node(b, node("Add", "acc,w", "t"));
	Onnx__NodeProto *cast = node("Cast", "i", "fi");
	attr_int(cast, "to", F32);
	g_node(b, cast);
	g_node(b, node("Add", "t,fi", "acc_out"));
	g_node(b, node("Identity", "acc_out", "slice"));
	g_out(b, VI0("c_out", BOOL_));
	g_out(b, VI("acc_out", F32, width));
	g_out(b, VI("slice", F32, width));
	return b;
}

/* A trip count known only at run time is fine without scan outputs. */
Test(loop, runtime_trip_count_with_captured_value)
{
	Onnx__GraphProto *g = graph("g");
	Onnx__GraphProto *b = sum_body(2);
	b->n_output = 2; /* no scan output */
	Onnx__NodeProto *n = node("Loop", "M,,a0", "a");
	attr_graph(n, "body", b);
	g_node(g, n);
	g_in(g, VI0("M", I64));
	g_in(g, VI("a0", F32, 2));
	g_in(g, VI("w", F32, 2));
	g_out_untyped(g, "a");
	mc_graph *ir = load(g, 13);
	cr_assert_not_null(ir, "%s", first_error);
	mc_tensor *in[3] = {T0(MC_INT64, 4), T1(MC_FLOAT, 2, 1, 2), T1(MC_FLOAT, 2, 0.5, -1)};
	mc_tensor *out[1];
	run(ir, in, out);
	/* a0 + 4 w + (0 + 1 + 2 + 3) */
	EXPECT1(out[0], 2, 1 + 2 + 6, 2 - 4 + 6);
	free_tensors(out, 1);
	mc_tensor_free(in[0]);
	in[0] = T0(MC_INT64, -3); /* a negative trip count runs nothing */
	run(ir, in, out);
	EXPECT1(out[0], 2, 1, 2);
	free_tensors(out, 1);
	free_tensors(in, 3);
	mc_graph_free(ir);
}

Test(loop, constant_trip_count_stacks_scan_outputs)
{
	Onnx__GraphProto *g = graph("g");
	Onnx__NodeProto *n = node("Loop", "M,cond,a0", "a,s");
	attr_graph(n, "body", sum_body(2));
	g_node(g, n);
	g_scalar_i64(g, "M", 3);
	g_init(g, "cond", BOOL_, 0, NULL, (double[]){1});
	g_in(g, VI("a0", F32, 2));
	g_in(g, VI("w", F32, 2));
	g_out_untyped(g, "a");
	g_out_untyped(g, "s");
	mc_graph *ir = load(g, 11);
	cr_assert_not_null(ir, "%s", first_error);
	mc_tensor *in[2] = {T1(MC_FLOAT, 2, 0, 10), T1(MC_FLOAT, 2, 1, 1)};
	mc_tensor *out[2];
	run(ir, in, out);
	EXPECT1(out[0], 2, 6, 16);
	EXPECT2(out[1], 3, 2, 1, 11, 3, 13, 6, 16);
	free_tensors(out, 2);
	free_tensors(in, 2);
	mc_graph_free(ir);
}

/* body(i, c, x) -> (2x < 100, 2x, 2x): a while loop, all constant. */
static Onnx__GraphProto *doubling_body(void)
{
	Onnx__GraphProto *b = graph("body");
	g_in(b, VI0("i", I64));
	g_in(b, VI0("c", BOOL_));
	g_in(b, VI0("x", F32));
	g_init(b, "two", F32, 0, NULL, (double[]){2});
	g_init(b, "limit", F32, 0, NULL, (double[]){100});
	g_node(b, node("Mul", "x,two", "x2"));
	g_node(b, node("Less", "x2,limit", "go"));
	g_node(b, node("Identity", "x2", "slice"));
	g_out(b, VI0("go", BOOL_));
	g_out(b, VI0("x2", F32));
	g_out(b, VI0("slice", F32));
	return b;
}

/* Stopping early makes the stacked length data-dependent: fine when
 * everything is constant (the loop is folded while compiling). */
Test(loop, constant_early_exit_is_folded)
{
	Onnx__GraphProto *g = graph("g");
	Onnx__NodeProto *n = node("Loop", "M,cond,x0", "x,s");
	attr_graph(n, "body", doubling_body());
	g_node(g, n);
	g_scalar_i64(g, "M", 100);
	g_init(g, "cond", BOOL_, 0, NULL, (double[]){1});
	g_init(g, "x0", F32, 0, NULL, (double[]){1.5});
	g_out_untyped(g, "x");
	g_out_untyped(g, "s");
	mc_graph *ir = load(g, 13);
	cr_assert_not_null(ir, "%s", first_error);
	const mc_value *s = &ir->values[ir->outputs[1]];
	cr_assert_not_null(s->konst, "the loop should have been folded");
	EXPECT1(s->konst, 7, 3, 6, 12, 24, 48, 96, 192);
	cr_assert_float_eq(mc_get_f(ir->values[ir->outputs[0]].konst, 0), 192, 1e-9);
	mc_graph_free(ir);
}

/* The same loop on a run-time start value: a while loop without scan
 * outputs, ended by the body's condition. */
Test(loop, runtime_while_loop)
{
	Onnx__GraphProto *g = graph("g");
	Onnx__GraphProto *b = doubling_body();
	b->n_output = 2;
	Onnx__NodeProto *n = node("Loop", ",cond,x0", "x");
	attr_graph(n, "body", b);
	g_node(g, n);
	g_in(g, VI0("cond", BOOL_));
	g_in(g, VI0("x0", F32));
	g_out_untyped(g, "x");
	mc_graph *ir = load(g, 16);
	cr_assert_not_null(ir, "%s", first_error);
	mc_tensor *in[2] = {T0(MC_BOOL, 1), T0(MC_FLOAT, 7)};
	mc_tensor *out[1];
	run(ir, in, out);
	cr_assert_float_eq(mc_get_f(out[0], 0), 112, 1e-9);
	free_tensors(out, 1);
	mc_set_i(in[0], 0, 0); /* false: the body never runs */
	run(ir, in, out);
	cr_assert_float_eq(mc_get_f(out[0], 0), 7, 1e-9);
	free_tensors(out, 1);
	free_tensors(in, 2);
	mc_graph_free(ir);
}

Test(loop, scan_outputs_need_a_constant_trip_count)
{
	Onnx__GraphProto *g = graph("g");
	Onnx__NodeProto *n = node("Loop", "M,,a0", "a,s");
	attr_graph(n, "body", sum_body(2));
	g_node(g, n);
	g_in(g, VI0("M", I64));
	g_in(g, VI("a0", F32, 2));
	g_in(g, VI("w", F32, 2));
	g_out_untyped(g, "a");
	g_out_untyped(g, "s");
	cr_assert_null(load(g, 13));
	cr_assert(strstr(first_error, "iteration count known at compile time"), "%s", first_error);
	cr_assert(strstr(first_error, "trip count"), "%s", first_error);
}

Test(loop, early_exit_with_runtime_values_is_refused)
{
	Onnx__GraphProto *g = graph("g");
	Onnx__NodeProto *n = node("Loop", "M,cond,x0", "x,s");
	attr_graph(n, "body", doubling_body());
	g_node(g, n);
	g_scalar_i64(g, "M", 100);
	g_init(g, "cond", BOOL_, 0, NULL, (double[]){1});
	g_in(g, VI0("x0", F32));
	g_out_untyped(g, "x");
	g_out_untyped(g, "s");
	cr_assert_null(load(g, 13));
	cr_assert(strstr(first_error, "condition output may end it early"), "%s", first_error);
}

/* A hostile trip count with scan outputs is a shape overflow, not an
 * allocation; empty slices too. */
Test(loop, absurd_trip_count_is_a_shape_error)
{
	for (int width = 0; width <= 2; width += 2) {
		first_error[0] = 0;
		Onnx__GraphProto *g = graph("g");
		Onnx__NodeProto *n = node("Loop", "M,,a0", "a,s");
		attr_graph(n, "body", sum_body(width));
		g_node(g, n);
		g_scalar_i64(g, "M", (int64_t)1 << 62);
		g_in(g, VI("a0", F32, width));
		g_in(g, VI("w", F32, width));
		g_out_untyped(g, "a");
		g_out_untyped(g, "s");
		cr_assert_null(load(g, 13));
		cr_assert(strstr(first_error, "too large"), "%s", first_error);
	}
}

/* All constant and no scan outputs: folding would run 2^62 iterations. */
Test(loop, absurd_constant_loop_is_not_folded_forever)
{
	Onnx__GraphProto *g = graph("g");
	Onnx__GraphProto *b = sum_body(1);
	b->n_output = 2;
	Onnx__NodeProto *n = node("Loop", "M,,a0", "a");
	attr_graph(n, "body", b);
	g_node(g, n);
	g_scalar_i64(g, "M", (int64_t)1 << 62);
	g_init(g, "a0", F32, 1, (int64_t[]){1}, (double[]){0});
	g_init(g, "w", F32, 1, (int64_t[]){1}, (double[]){1});
	g_out_untyped(g, "a");
	cr_assert_null(load(g, 13));
	cr_assert(strstr(first_error, "refusing to evaluate it while compiling"), "%s", first_error);
}

Test(loop, carried_value_must_keep_its_shape)
{
	Onnx__GraphProto *b = graph("body");
	g_in(b, VI0("i", I64));
	g_in(b, VI0("c", BOOL_));
	g_in(b, VI("acc", F32, -1));
	Onnx__NodeProto *cat = node("Concat", "acc,acc", "grown");
	attr_int(cat, "axis", 0);
	g_node(b, node("Identity", "c", "c_out"));
	g_node(b, cat);
	g_out(b, VI0("c_out", BOOL_));
	g_out(b, VI("grown", F32, -1));
	Onnx__GraphProto *g = graph("g");
	Onnx__NodeProto *n = node("Loop", "M,,a0", "a");
	attr_graph(n, "body", b);
	g_node(g, n);
	g_in(g, VI0("M", I64));
	g_in(g, VI("a0", F32, 2));
	g_out_untyped(g, "a");
	cr_assert_null(load(g, 13));
	cr_assert(strstr(first_error, "static shapes need it unchanged"), "%s", first_error);
}

Test(loop, endless_loop_is_refused)
{
	Onnx__GraphProto *g = graph("g");
	Onnx__GraphProto *b = sum_body(2);
	b->n_output = 2;
	Onnx__NodeProto *n = node("Loop", ",,a0", "a");
	attr_graph(n, "body", b);
	g_node(g, n);
	g_in(g, VI("a0", F32, 2));
	g_in(g, VI("w", F32, 2));
	g_out_untyped(g, "a");
	cr_assert_null(load(g, 13));
	cr_assert(strstr(first_error, "never ends"), "%s", first_error);
}

Test(loop, body_arity_is_checked)
{
	Onnx__GraphProto *g = graph("g");
	Onnx__NodeProto *n = node("Loop", "M,,a0", "a,s,extra");
	attr_graph(n, "body", sum_body(2));
	g_node(g, n);
	g_in(g, VI0("M", I64));
	g_in(g, VI("a0", F32, 2));
	g_in(g, VI("w", F32, 2));
	g_out_untyped(g, "a");
	cr_assert_null(load(g, 13));
	cr_assert(strstr(first_error, "body produces 3 outputs, expected 4"), "%s", first_error);
}

/* ---- Scan ---- */

/* body(s, v) -> (s + v, s + v) over float [width] slices */
static Onnx__GraphProto *running_sum_body(int dtype, int width)
{
	Onnx__GraphProto *b = graph("body");
	g_in(b, VI("s", dtype, width));
	g_in(b, VI("v", dtype, width));
	g_node(b, node("Add", "s,v", "s_out"));
	g_node(b, node("Identity", "s_out", "slice"));
	g_out(b, VI("s_out", dtype, width));
	g_out(b, VI("slice", dtype, width));
	return b;
}

/* x is [2, 3] scanned along axis 1 backwards; the running sums are
 * stacked along axis 1, filled from the end. */
Test(loop, scan9_axes_and_directions)
{
	Onnx__GraphProto *g = graph("g");
	Onnx__NodeProto *n = node("Scan", "s0,x", "s,y");
	attr_graph(n, "body", running_sum_body(I32, 2));
	attr_int(n, "num_scan_inputs", 1);
	attr_ints(n, "scan_input_axes", (int64_t[]){-1}, 1);
	attr_ints(n, "scan_input_directions", (int64_t[]){1}, 1);
	attr_ints(n, "scan_output_axes", (int64_t[]){1}, 1);
	attr_ints(n, "scan_output_directions", (int64_t[]){1}, 1);
	g_node(g, n);
	g_in(g, VI("s0", I32, 2));
	g_in(g, VI("x", I32, 2, 3));
	g_out_untyped(g, "s");
	g_out_untyped(g, "y");
	mc_graph *ir = load(g, 16);
	cr_assert_not_null(ir, "%s", first_error);
	mc_tensor *in[2] = {T1(MC_INT32, 2, 100, 200), T2(MC_INT32, 2, 3, 1, 2, 3, 4, 5, 6)};
	mc_tensor *out[2];
	run(ir, in, out);
	/* slices in order: x[:,2], x[:,1], x[:,0] */
	EXPECT1(out[0], 2, 106, 215);
	/* iteration t lands at column 2 - t: sums 103|206, 105|211, 106|215 */
	EXPECT2(out[1], 2, 3, 106, 105, 103, 215, 211, 206);
	free_tensors(out, 2);
	free_tensors(in, 2);
	mc_graph_free(ir);
}

/* Opset 8: batch axis 0, sequence_lens cut sequences short; reversed
 * inputs read the first len entries backwards; the rest stays zero. */
Test(loop, scan8_batch_and_sequence_lens)
{
	Onnx__GraphProto *g = graph("g");
	Onnx__NodeProto *n = node("Scan", "lens,s0,x", "s,y");
	attr_graph(n, "body", running_sum_body(F32, 1));
	attr_int(n, "num_scan_inputs", 1);
	attr_ints(n, "directions", (int64_t[]){1}, 1);
	g_node(g, n);
	g_in(g, VI("lens", I64, 2));
	g_in(g, VI("s0", F32, 2, 1));
	g_in(g, VI("x", F32, 2, 3, 1));
	g_out_untyped(g, "s");
	g_out_untyped(g, "y");
	mc_graph *ir = load(g, 8);
	cr_assert_not_null(ir, "%s", first_error);
	mc_tensor *in[3] = {T1(MC_INT64, 2, 3, 2), T2(MC_FLOAT, 2, 1, 0, 10),
	                    tensor(MC_FLOAT, 3, (int64_t[]){2, 3, 1},
	                           (double[]){1, 2, 3, 4, 5, 6})};
	mc_tensor *out[2];
	run(ir, in, out);
	EXPECT2(out[0], 2, 1, 6, 19);
	expect(out[1], 3, (int64_t[]){2, 3, 1}, (double[]){3, 5, 6, 15, 19, 0});
	free_tensors(out, 2);
	mc_set_i(in[0], 1, 4); /* longer than the sequence */
	cr_assert_neq(mc_interp_run(ir, in, out, NULL), 0);
	cr_assert(strstr(first_error, "sequence_lens[1] is 4"), "%s", first_error);
	free_tensors(in, 3);
	mc_graph_free(ir);
}

Test(loop, scan_lengths_must_agree)
{
	Onnx__GraphProto *b = graph("body");
	g_in(b, VI0("a", F32));
	g_in(b, VI0("b", F32));
	g_node(b, node("Add", "a,b", "c"));
	g_out(b, VI0("c", F32));
	Onnx__GraphProto *g = graph("g");
	Onnx__NodeProto *n = node("Scan", "x,y", "z");
	attr_graph(n, "body", b);
	attr_int(n, "num_scan_inputs", 2);
	g_node(g, n);
	g_in(g, VI("x", F32, 3));
	g_in(g, VI("y", F32, 4));
	g_out_untyped(g, "z");
	cr_assert_null(load(g, 11));
	cr_assert(strstr(first_error, "has 4 entries along its scan axis"), "%s", first_error);
}

Test(loop, scan_attributes_are_validated)
{
	Onnx__GraphProto *g = graph("g");
	Onnx__NodeProto *n = node("Scan", "s0,x", "s,y");
	attr_graph(n, "body", running_sum_body(F32, 2));
	attr_int(n, "num_scan_inputs", 1);
	attr_ints(n, "scan_input_directions", (int64_t[]){2}, 1);
	g_node(g, n);
	g_in(g, VI("s0", F32, 2));
	g_in(g, VI("x", F32, 3, 2));
	g_out_untyped(g, "s");
	g_out_untyped(g, "y");
	cr_assert_null(load(g, 11));
	cr_assert(strstr(first_error, "directions are 0"), "%s", first_error);

	first_error[0] = 0;
	n->n_attribute = 2; /* drop the directions */
	attr_ints(n, "scan_output_axes", (int64_t[]){0, 1}, 2);
	cr_assert_null(load(g, 11));
	cr_assert(strstr(first_error, "has 2 entries, expected 1"), "%s", first_error);

	first_error[0] = 0;
	n->n_attribute = 2;
	attr_ints(n, "scan_input_axes", (int64_t[]){2}, 1);
	cr_assert_null(load(g, 11));
	cr_assert(strstr(first_error, "out of range"), "%s", first_error);
}

/* A state whose declared body type disagrees with the node's input. */
Test(loop, scan_body_declarations_must_agree)
{
	Onnx__GraphProto *g = graph("g");
	Onnx__NodeProto *n = node("Scan", "s0,x", "s,y");
	attr_graph(n, "body", running_sum_body(F32, 3));
	attr_int(n, "num_scan_inputs", 1);
	g_node(g, n);
	g_in(g, VI("s0", F32, 2));
	g_in(g, VI("x", F32, 4, 2));
	g_out_untyped(g, "s");
	g_out_untyped(g, "y");
	cr_assert_null(load(g, 11));
	cr_assert(strstr(first_error, "declared with shape 3 but receives 2"), "%s", first_error);
}

/* ---- Loop bodies whose shapes depend on the iteration number ---- */

enum { SLICE_ONE, SLICE_PREFIX };

/* body(i, c, y[1]) -> (i < stop_after, y + x[i:i+1], y + x[i:i+1]) with
 * x = [1, 2, 3, 4, 5]; SLICE_PREFIX stacks x[0:i+1] instead, whose shape
 * changes from one iteration to the next. */
static Onnx__GraphProto *slicing_body(int slice, int64_t stop_after)
{
	Onnx__GraphProto *b = graph("body");
	g_in(b, VI0("i", I64));
	g_in(b, VI0("c", BOOL_));
	g_in(b, VI("y", F32, 1));
	g_init(b, "x", F32, 1, (int64_t[]){5}, (double[]){1, 2, 3, 4, 5});
	g_init(b, "axes", I64, 1, (int64_t[]){1}, (double[]){0});
	g_init(b, "zero", I64, 1, (int64_t[]){1}, (double[]){0});
	g_scalar_i64(b, "one", 1);
	g_scalar_i64(b, "stop_after", stop_after);
	g_node(b, node("Unsqueeze", "i,axes", "start"));
	g_node(b, node("Add", "i,one", "i1"));
	g_node(b, node("Unsqueeze", "i1,axes", "end"));
	g_node(b, node("Slice", "x,start,end", "xi"));
	g_node(b, node("Add", "y,xi", "y_out"));
	g_node(b, node("Less", "i,stop_after", "go"));
	if (slice == SLICE_PREFIX)
		g_node(b, node("Slice", "x,zero,end", "stacked"));
	else
		g_node(b, node("Identity", "y_out", "stacked"));
	g_out(b, VI0("go", BOOL_));
	g_out(b, VI("y_out", F32, 1));
	g_out(b, VI("stacked", F32, -1));
	return b;
}

static mc_graph *slicing_loop(const char *inputs, int slice, int64_t stop_after, int64_t m)
{
	Onnx__GraphProto *g = graph("g");
	Onnx__NodeProto *n = node("Loop", inputs, "y,s");
	attr_graph(n, "body", slicing_body(slice, stop_after));
	g_node(g, n);
	g_scalar_i64(g, "M", m);
	g_init(g, "cond", BOOL_, 0, NULL, (double[]){1});
	g_in(g, VI("y0", F32, 1));
	g_out_untyped(g, "y");
	g_out_untyped(g, "s");
	return load(g, 13);
}

/* As ONNX's test_loop11: Slice(x, i, i + 1) needs i at compile time. */
Test(loop, body_typed_per_iteration)
{
	mc_graph *ir = slicing_loop("M,,y0", SLICE_ONE, 0, 5);
	cr_assert_not_null(ir, "%s", first_error);
	mc_tensor *in[1] = {T1(MC_FLOAT, 1, 10)};
	mc_tensor *out[2];
	run(ir, in, out);
	EXPECT1(out[0], 1, 25);
	EXPECT2(out[1], 5, 1, 11, 13, 16, 20, 25);
	free_tensors(out, 2);
	free_tensors(in, 1);
	mc_graph_free(ir);
}

/* With the iteration number constant, the body's condition output is
 * constant in every iteration: the loop stops after iteration 2, known at
 * compile time though y is not. */
Test(loop, per_iteration_condition_fixes_the_count)
{
	mc_graph *ir = slicing_loop("M,cond,y0", SLICE_ONE, 2, 5);
	cr_assert_not_null(ir, "%s", first_error);
	mc_tensor *in[1] = {T1(MC_FLOAT, 1, 0)};
	mc_tensor *out[2];
	run(ir, in, out);
	EXPECT1(out[0], 1, 6);
	EXPECT2(out[1], 3, 1, 1, 3, 6);
	free_tensors(out, 2);
	free_tensors(in, 1);
	mc_graph_free(ir);
}

Test(loop, per_iteration_scan_slices_must_keep_their_shape)
{
	cr_assert_null(slicing_loop("M,,y0", SLICE_PREFIX, 0, 3));
	cr_assert(strstr(first_error, "in iteration 0 but float32 2 in iteration 1"), "%s",
	          first_error);
}

/* Past the per-iteration limit the body is typed once, and fails. */
Test(loop, long_loop_with_iteration_dependent_shapes_is_refused)
{
	cr_assert_null(slicing_loop("M,,y0", SLICE_ONE, 0, 100000));
	cr_assert(strstr(first_error, "Slice"), "%s", first_error);
}
