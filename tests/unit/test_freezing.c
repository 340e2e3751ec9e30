/* freezing/: constant folding (shape subgraphs, the size cap, If with a
 * known condition), BN and per-channel Mul/Add folding into Conv and Gemm,
 * identity removal, DCE, CSE, the driver's stats and dumps. Every pass is
 * checked for what it removes and, through the reference interpreter, for
 * computing the same outputs before and after. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../freezing/freezing.h"
#include "compile_helpers.h"
#include "model_builder.h"
#include "modelc.h"

#define OPSET 13

static void setup(void) { diag_capture(); }

TestSuite(freezing, .init = setup);

/* ---- helpers ---- */

static mc_graph *typed(mb *b)
{
	mc_graph *g = mb_import(b, NULL, NULL);
	cr_assert_not_null(g, "import failed:\n%s", diag_all());
	cr_assert_eq(mc_infer_graph(g), 0, "inference failed:\n%s", diag_all());
	return g;
}

static uint64_t rng_state;

static double uniform(void) /* [-1, 1) */
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (double)(rng_state >> 11) / 4503599627370496.0 - 1;
}

static float *random_floats(size_t n, double lo, double hi)
{
	float *v = malloc(n * sizeof *v);
	for (size_t i = 0; i < n; i++)
		v[i] = (float)(lo + (hi - lo) * (uniform() + 1) / 2);
	return v;
}

/* An initializer of random values in [lo, hi). */
static void init_random(mb *b, const char *name, const char *dims, size_t n, double lo, double hi)
{
	float *v = random_floats(n, lo, hi);
	mb_init_floats(b, mb_main(b), name, dims, v, n);
	free(v);
}

typedef struct {
	int n_in, n_out;
	mc_tensor *in[8];
	mc_tensor *out[8];
} run_data;

static void random_inputs(const mc_graph *g, run_data *r)
{
	r->n_in = g->n_inputs;
	for (int i = 0; i < g->n_inputs; i++) {
		const mc_value *v = &g->values[g->inputs[i]];
		r->in[i] = mc_tensor_new(v->dtype, &v->shape);
		for (size_t k = 0; k < r->in[i]->numel; k++)
			mc_set_f(r->in[i], k, v->dtype == MC_BOOL ? uniform() > 0 : uniform());
	}
}

static void run(const mc_graph *g, run_data *r)
{
	r->n_out = g->n_outputs;
	cr_assert_eq(mc_interp_run(g, r->in, r->out, NULL), 0, "interpreter failed:\n%s", diag_all());
}

static void free_outputs(run_data *r)
{
	for (int i = 0; i < r->n_out; i++)
		mc_tensor_free(r->out[i]);
}

static void free_run(run_data *r)
{
	free_outputs(r);
	for (int i = 0; i < r->n_in; i++)
		mc_tensor_free(r->in[i]);
}

/* Runs g on r's inputs and checks every output against r->out. */
static void assert_same_outputs(const mc_graph *g, const run_data *ref, double tol)
{
	run_data now = *ref;
	run(g, &now);
	cr_assert_eq(now.n_out, ref->n_out);
	for (int i = 0; i < ref->n_out; i++) {
		const mc_tensor *a = ref->out[i], *b = now.out[i];
		cr_assert_eq(a->dtype, b->dtype, "output %d dtype", i);
		cr_assert(mc_shape_eq(&a->shape, &b->shape), "output %d shape", i);
		for (size_t k = 0; k < a->numel; k++)
			cr_assert(fabs(mc_get_f(a, k) - mc_get_f(b, k)) <= tol,
			          "output %d element %zu: %.9g before, %.9g after", i, k, mc_get_f(a, k),
			          mc_get_f(b, k));
		mc_tensor_free(now.out[i]);
	}
}

static int count_op(const mc_graph *g, const char *op)
{
	int n = 0;
	for (int i = 0; i < g->n_nodes; i++)
		n += strcmp(g->nodes[i].op_type, op) == 0;
	return n;
}

/* Producers and values agree, nodes are in topological order. */
static void assert_consistent(const mc_graph *g)
{
	int *seen = calloc((size_t)g->n_values, sizeof *seen);
	for (int v = 0; v < g->n_values; v++)
		seen[v] = g->values[v].kind != MC_VAL_NODE || g->values[v].konst;
	for (int i = 0; i < g->n_nodes; i++) {
		const mc_node *n = &g->nodes[i];
		for (int k = 0; k < n->n_inputs; k++)
			cr_assert(n->inputs[k] < 0 || seen[n->inputs[k]],
			          "node %d (%s) reads '%s' before it is computed", i, n->op_type,
			          g->values[n->inputs[k]].name);
		for (int k = 0; k < n->n_outputs; k++) {
			if (n->outputs[k] < 0)
				continue;
			cr_assert_eq(g->values[n->outputs[k]].producer, i, "producer of '%s'",
			             g->values[n->outputs[k]].name);
			seen[n->outputs[k]] = 1;
		}
	}
	for (int v = 0; v < g->n_values; v++) {
		int p = g->values[v].producer;
		if (p < 0)
			continue;
		cr_assert(p < g->n_nodes, "value '%s' has producer %d of %d nodes", g->values[v].name, p,
		          g->n_nodes);
		bool found = false;
		for (int k = 0; k < g->nodes[p].n_outputs; k++)
			found |= g->nodes[p].outputs[k] == v;
		cr_assert(found, "value '%s': producer %d does not write it", g->values[v].name, p);
	}
	free(seen);
}

static int output_named(const mc_graph *g, int i, const char *name)
{
	return strcmp(g->values[g->outputs[i]].name, name) == 0;
}

/* ---- fold ---- */

/* x -> Shape -> Gather(0) -> Unsqueeze -> Concat(-1) -> Reshape(x): the
 * shape computation folds into one constant, leaving the Reshape. */
Test(freezing, shape_subgraph_folds)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "2,3,4");
	Onnx__TensorProto *zero = mb_tensor(b, "zero", MC_INT64, "");
	mb_int64_data(b, zero, (int64_t[]){0}, 1);
	mb_initializer(b, mb_main(b), zero);
	Onnx__TensorProto *axes = mb_tensor(b, "axes", MC_INT64, "1");
	mb_int64_data(b, axes, (int64_t[]){0}, 1);
	mb_initializer(b, mb_main(b), axes);
	Onnx__TensorProto *rest = mb_tensor(b, "rest", MC_INT64, "1");
	mb_int64_data(b, rest, (int64_t[]){-1}, 1);
	mb_initializer(b, mb_main(b), rest);
	mb_node(b, mb_main(b), "Shape", "shape", "x", "s");
	mb_node(b, mb_main(b), "Gather", "gather", "s,zero", "d0");
	mb_node(b, mb_main(b), "Unsqueeze", "unsq", "d0,axes", "d0v");
	Onnx__NodeProto *cat = mb_node(b, mb_main(b), "Concat", "cat", "d0v,rest", "newshape");
	mb_attr_int(b, cat, "axis", 0);
	mb_node(b, mb_main(b), "Reshape", "reshape", "x,newshape", "y");
	mb_node(b, mb_main(b), "Relu", "relu", "y", "z");
	mb_output(b, mb_main(b), "z");
	mc_graph *g = typed(b);
	run_data r;
	random_inputs(g, &r);
	run(g, &r);
	cr_assert_eq(g->n_nodes, 6);
	cr_assert_eq(mc_pass_fold(g, NULL), 4, "%s", diag_all());
	cr_assert_eq(g->n_nodes, 2);
	cr_assert_eq(count_op(g, "Reshape"), 1);
	cr_assert_eq(count_op(g, "Relu"), 1);
	const mc_value *ns = &g->values[mc_graph_find(g, "newshape")];
	cr_assert_eq(ns->kind, MC_VAL_CONST);
	cr_assert_eq(ns->producer, -1);
	cr_assert_eq(mc_get_i(ns->konst, 0), 2);
	cr_assert_eq(mc_get_i(ns->konst, 1), -1);
	assert_consistent(g);
	assert_same_outputs(g, &r, 0);
	cr_assert_eq(mc_pass_fold(g, NULL), 0, "a second run finds nothing");
	cr_assert_eq(diag_count(), 0, "%s", diag_all());
	free_run(&r);
	mc_graph_free(g);
	mb_free(b);
}

/* Over the cap: a Tile of a constant stays (reported once); a Transpose of
 * the same constant folds, being no larger than its input. */
Test(freezing, fold_cap_respected)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "32,32");
	init_random(b, "w", "16,16", 256, -1, 1);
	Onnx__TensorProto *reps = mb_tensor(b, "reps", MC_INT64, "2");
	mb_int64_data(b, reps, (int64_t[]){2, 2}, 2);
	mb_initializer(b, mb_main(b), reps);
	mb_node(b, mb_main(b), "Tile", "tile", "w,reps", "big");
	mb_node(b, mb_main(b), "Transpose", "tr", "w", "wt");
	mb_node(b, mb_main(b), "Tile", "tile2", "wt,reps", "big2");
	mb_node(b, mb_main(b), "Add", "add", "x,big", "s");
	mb_node(b, mb_main(b), "Add", "add2", "s,big2", "y");
	mb_output(b, mb_main(b), "y");
	mc_graph *g = typed(b);
	run_data r;
	random_inputs(g, &r);
	run(g, &r);
	char *stats = NULL;
	size_t stats_len = 0;
	FILE *sf = open_memstream(&stats, &stats_len);
	mc_freeze_opts o = {.fold_limit = 2048, .stats = sf};
	cr_assert_eq(mc_pass_fold(g, &o), 1, "%s", diag_all());
	fclose(sf);
	cr_assert_eq(count_op(g, "Transpose"), 0);
	cr_assert_eq(count_op(g, "Tile"), 2);
	cr_assert_eq(diag_count(), 1, "%s", diag_all());
	cr_assert_str_eq(diag_line(0), "modelc: warning: constant folding left 2 node(s) unfolded: "
	                               "their results exceed the fold limit of 2048 bytes");
	cr_assert(strstr(stats, "node 'tile' (Tile, opset 13) left unfolded: 4096 bytes"), "%s", stats);
	cr_assert(strstr(stats, "node 'tile2' (Tile, opset 13) left unfolded"), "%s", stats);
	assert_consistent(g);
	assert_same_outputs(g, &r, 0);
	free(stats);
	/* with the default cap, everything constant folds */
	diag_capture();
	cr_assert_eq(mc_pass_fold(g, NULL), 2);
	cr_assert_eq(count_op(g, "Tile"), 0);
	cr_assert_eq(diag_count(), 0, "%s", diag_all());
	assert_same_outputs(g, &r, 0);
	free_run(&r);
	mc_graph_free(g);
	mb_free(b);
}

/* If with a constant condition: the taken branch's nodes replace it. The
 * branch reads a runtime input of the parent, and outputs a node's result,
 * a constant and the captured input itself. */
static mb *if_model(bool cond)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "2,3");
	mb_const_bool(b, mb_main(b), "cond", cond);
	init_random(b, "bias", "3", 3, -1, 1);
	Onnx__GraphProto *t = mb_graph(b, "then"), *e = mb_graph(b, "else");
	/* then: relu(x) + bias, the constant [1,2,3], x */
	mb_node(b, t, "Relu", "t_relu", "x", "t_r");
	mb_node(b, t, "Add", "t_add", "t_r,bias", "t_out");
	mb_init_floats(b, t, "t_const", "3", (const float[]){1, 2, 3}, 3);
	mb_output(b, t, "t_out");
	mb_output(b, t, "t_const");
	mb_output(b, t, "x");
	/* else: neg(x), the constant [4,5,6], neg(x) again */
	mb_node(b, e, "Neg", "e_neg", "x", "e_out");
	mb_init_floats(b, e, "e_const", "3", (const float[]){4, 5, 6}, 3);
	mb_output(b, e, "e_out");
	mb_output(b, e, "e_const");
	mb_output(b, e, "e_out");
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "If", "pick", "cond", "y0,y1,y2");
	mb_attr_graph(b, n, "then_branch", t);
	mb_attr_graph(b, n, "else_branch", e);
	mb_node(b, mb_main(b), "Mul", "after", "y0,y2", "z");
	mb_output(b, mb_main(b), "z");
	mb_output(b, mb_main(b), "y1");
	mb_output(b, mb_main(b), "y2");
	return b;
}

static void check_if_inlined(bool cond)
{
	mb *b = if_model(cond);
	mc_graph *g = typed(b);
	run_data r;
	random_inputs(g, &r);
	run(g, &r);
	int y0 = mc_graph_find(g, "y0"), y2 = mc_graph_find(g, "y2");
	cr_assert_gt(mc_pass_fold(g, NULL), 0, "%s", diag_all());
	cr_assert_eq(count_op(g, "If"), 0);
	cr_assert_eq(mc_graph_find(g, "y0"), y0, "value indices never change");
	cr_assert(output_named(g, 0, "z") && output_named(g, 1, "y1") && output_named(g, 2, "y2"));
	cr_assert_eq(g->values[mc_graph_find(g, "y1")].kind, MC_VAL_CONST);
	if (cond) {
		/* Relu, Add (writing y0), Identity (x -> y2), Mul */
		cr_assert_eq(g->n_nodes, 4);
		cr_assert_str_eq(g->nodes[g->values[y0].producer].op_type, "Add");
		cr_assert_str_eq(g->nodes[g->values[y2].producer].op_type, "Identity");
	} else {
		/* Neg (writing y0), Identity (y0 -> y2), Mul */
		cr_assert_eq(g->n_nodes, 3);
		cr_assert_str_eq(g->nodes[g->values[y0].producer].op_type, "Neg");
	}
	assert_consistent(g);
	assert_same_outputs(g, &r, 0);
	/* the driver removes what is left to remove: y2 stays a graph output */
	cr_assert_eq(mc_freeze(g, NULL), 0, "%s", diag_all());
	assert_consistent(g);
	assert_same_outputs(g, &r, 0);
	cr_assert_eq(diag_count(), 0, "%s", diag_all());
	free_run(&r);
	mc_graph_free(g);
	mb_free(b);
}

Test(freezing, if_true_condition_inlined) { check_if_inlined(true); }
Test(freezing, if_false_condition_inlined) { check_if_inlined(false); }

/* A condition known only at run time leaves the If alone. */
Test(freezing, if_runtime_condition_stays)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "c", MC_BOOL, "");
	mb_input(b, mb_main(b), "x", MC_FLOAT, "3");
	Onnx__GraphProto *t = mb_graph(b, "then"), *e = mb_graph(b, "else");
	mb_node(b, t, "Relu", "t_relu", "x", "t_out");
	mb_output(b, t, "t_out");
	mb_node(b, e, "Neg", "e_neg", "x", "e_out");
	mb_output(b, e, "e_out");
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "If", "pick", "c", "y");
	mb_attr_graph(b, n, "then_branch", t);
	mb_attr_graph(b, n, "else_branch", e);
	mb_output(b, mb_main(b), "y");
	mc_graph *g = typed(b);
	cr_assert_eq(mc_freeze(g, NULL), 0, "%s", diag_all());
	cr_assert_eq(count_op(g, "If"), 1);
	cr_assert_eq(mc_graph_node_count(g), 3);
	mc_graph_free(g);
	mb_free(b);
}

/* An If with a run-time condition: its branches are simplified in place
 * (fold, identity, CSE, DCE), and a parent node only a dead branch node
 * read goes too. */
Test(freezing, if_branches_simplified)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "c", MC_BOOL, "");
	mb_input(b, mb_main(b), "x", MC_FLOAT, "3");
	mb_node(b, mb_main(b), "Exp", "exp", "x", "e");
	Onnx__GraphProto *t = mb_graph(b, "then"), *el = mb_graph(b, "else");
	mb_init_floats(b, t, "k1", "3", (const float[]){1, 2, 3}, 3);
	mb_init_floats(b, t, "k2", "3", (const float[]){4, 5, 6}, 3);
	mb_init_floats(b, t, "k3", "3", (const float[]){7, 8, 9}, 3);
	mb_init_floats(b, t, "k4", "3", (const float[]){7, 8, 9}, 3);
	mb_node(b, t, "Add", "t1", "k1,k2", "s12");
	mb_node(b, t, "Identity", "t2", "x", "xi");
	mb_node(b, t, "Mul", "t3", "xi,s12", "m");
	mb_node(b, t, "Add", "t4", "m,k3", "a3");
	mb_node(b, t, "Add", "t5", "m,k4", "a4");
	mb_node(b, t, "Sum", "t6", "a3,a4", "t_out");
	mb_node(b, t, "Exp", "t7", "e", "unused");
	mb_output(b, t, "t_out");
	mb_node(b, el, "Neg", "e1", "x", "e_out");
	mb_output(b, el, "e_out");
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "If", "pick", "c", "y");
	mb_attr_graph(b, n, "then_branch", t);
	mb_attr_graph(b, n, "else_branch", el);
	mb_output(b, mb_main(b), "y");
	mc_graph *g = typed(b);
	run_data r[2];
	for (int k = 0; k < 2; k++) {
		random_inputs(g, &r[k]);
		mc_set_i(r[k].in[0], 0, k);
		run(g, &r[k]);
	}
	cr_assert_eq(mc_graph_node_count(g), 10);
	cr_assert_eq(mc_freeze(g, NULL), 0, "%s", diag_all());
	/* then: Mul, Add, Sum; else: Neg; main: If */
	cr_assert_eq(mc_graph_node_count(g), 5);
	cr_assert_eq(g->n_nodes, 1);
	cr_assert_eq(g->nodes[0].n_implicit, 1, "only x is still captured");
	cr_assert_eq(g->nodes[0].implicit[0], mc_graph_find(g, "x"));
	for (int k = 0; k < 2; k++) {
		assert_same_outputs(g, &r[k], 0);
		free_run(&r[k]);
	}
	cr_assert_eq(diag_count(), 0, "%s", diag_all());
	mc_graph_free(g);
	mb_free(b);
}

/* ---- BN and per-channel folding ---- */

/* x [1,3,6,6] -> Conv(w [4,3,3,3], bias?) -> BatchNormalization -> y */
static mb *conv_bn_model(bool with_bias, int opset)
{
	mb *b = mb_new(opset);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "1,3,6,6");
	init_random(b, "w", "4,3,3,3", 108, -1, 1);
	if (with_bias)
		init_random(b, "cb", "4", 4, -1, 1);
	init_random(b, "scale", "4", 4, 0.5, 2);
	init_random(b, "shift", "4", 4, -1, 1);
	init_random(b, "mean", "4", 4, -0.5, 0.5);
	init_random(b, "var", "4", 4, 0.1, 3);
	Onnx__NodeProto *c = mb_node(b, mb_main(b), "Conv", "conv", with_bias ? "x,w,cb" : "x,w", "c");
	mb_attr_ints(b, c, "pads", (int64_t[]){1, 1, 1, 1}, 4);
	Onnx__NodeProto *bn = mb_node(b, mb_main(b), "BatchNormalization", "bn",
	                              "c,scale,shift,mean,var", "y");
	mb_attr_float(b, bn, "epsilon", 1e-3f);
	mb_output(b, mb_main(b), "y");
	return b;
}

static void check_conv_bn(bool with_bias, int opset)
{
	rng_state = 12345 + (uint64_t)with_bias;
	mb *b = conv_bn_model(with_bias, opset);
	mc_graph *g = typed(b);
	run_data r;
	random_inputs(g, &r);
	run(g, &r);
	int y = mc_graph_find(g, "y"), w = mc_graph_find(g, "w");
	cr_assert_eq(mc_pass_fold_bn(g, NULL), 1, "%s", diag_all());
	cr_assert_eq(g->n_nodes, 1);
	const mc_node *conv = &g->nodes[0];
	cr_assert_str_eq(conv->op_type, "Conv");
	cr_assert_eq(conv->outputs[0], y, "the Conv writes the BN's output");
	cr_assert_eq(g->values[y].producer, 0);
	cr_assert_eq(conv->n_inputs, 3, "a bias is created when absent");
	cr_assert_neq(conv->inputs[1], w, "new weights, the original kept");
	cr_assert_eq(g->values[conv->inputs[1]].kind, MC_VAL_CONST);
	cr_assert_eq(g->values[conv->inputs[2]].konst->dtype, MC_FLOAT);
	assert_consistent(g);
	assert_same_outputs(g, &r, 1e-5);
	free_run(&r);
	mc_graph_free(g);
	mb_free(b);
}

Test(freezing, bn_into_conv_with_bias) { check_conv_bn(true, OPSET); }
Test(freezing, bn_into_conv_without_bias) { check_conv_bn(false, OPSET); }
Test(freezing, bn_into_conv_opset15) { check_conv_bn(true, 15); }

/* The Conv's output read by another node too: nothing folds. */
Test(freezing, bn_not_folded_when_conv_output_shared)
{
	mb *b = conv_bn_model(true, OPSET);
	mb_output(b, mb_main(b), "c");
	mc_graph *g = typed(b);
	cr_assert_eq(mc_pass_fold_bn(g, NULL), 0);
	cr_assert_eq(g->n_nodes, 2);
	mc_graph_free(g);
	mb_free(b);
}

/* Pad(x, zero, spatial) -> Conv: the pads move into the Conv (added to
 * its own) and the Pad goes; a Pad of another value stays. The compiled
 * result of both is checked against the reference by verify. */
static mb *pad_conv_model(float value)
{
	mb *b = mb_new(OPSET);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "1,2,5,6");
	init_random(b, "w", "3,2,3,3", 54, -1, 1);
	mb_init_ints(b, g, "p", MC_INT64, "8", (const int64_t[]){ 0, 0, 1, 0, 0, 0, 0, 2 }, 8);
	mb_init_floats(b, g, "v", "", (const float[]){ value }, 1);
	mb_node(b, g, "Pad", "pad", "x,p,v", "xp");
	Onnx__NodeProto *n = mb_node(b, g, "Conv", "conv", "xp,w", "y");
	mb_attr_ints(b, n, "pads", (int64_t[]){ 1, 1, 0, 1 }, 4);
	mb_output(b, g, "y");
	return b;
}

static const int64_t *conv_pads_of(const mc_graph *g)
{
	for (int i = 0; i < g->n_nodes; i++)
		if (strcmp(g->nodes[i].op_type, "Conv") == 0)
			return mc_attr_find(&g->nodes[i], "pads")->ints;
	return NULL;
}

Test(freezing, zero_pad_into_conv)
{
	mb *b = pad_conv_model(0);
	mc_graph *g = typed(b);
	cr_assert_eq(mc_pass_fold_pad(g, NULL), 1);
	cr_assert_gt(mc_pass_dce(g, NULL), 0);
	cr_assert_eq(count_op(g, "Pad"), 0);
	const int64_t *p = conv_pads_of(g);
	cr_assert(p[0] == 2 && p[1] == 1 && p[2] == 0 && p[3] == 3, "pads %lld %lld %lld %lld",
	          (long long)p[0], (long long)p[1], (long long)p[2], (long long)p[3]);
	mc_graph_free(g);
	cr_assert_eq(verify_model(b, 0), 0);
}

Test(freezing, nonzero_pad_stays)
{
	mb *b = pad_conv_model(0.5f);
	mc_graph *g = typed(b);
	cr_assert_eq(mc_pass_fold_pad(g, NULL), 0);
	cr_assert_eq(count_op(g, "Pad"), 1);
	mc_graph_free(g);
	cr_assert_eq(verify_model(b, 0), 0);
}

/* ConvTranspose with groups: W is [C, M/group, k...]. */
Test(freezing, bn_into_grouped_conv_transpose)
{
	rng_state = 777;
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "1,4,3,3");
	init_random(b, "w", "4,3,2,2", 48, -1, 1);
	init_random(b, "scale", "6", 6, 0.5, 2);
	init_random(b, "shift", "6", 6, -1, 1);
	init_random(b, "mean", "6", 6, -0.5, 0.5);
	init_random(b, "var", "6", 6, 0.1, 3);
	Onnx__NodeProto *c = mb_node(b, mb_main(b), "ConvTranspose", "convt", "x,w", "c");
	mb_attr_int(b, c, "group", 2);
	mb_node(b, mb_main(b), "BatchNormalization", "bn", "c,scale,shift,mean,var", "y");
	mb_output(b, mb_main(b), "y");
	mc_graph *g = typed(b);
	run_data r;
	random_inputs(g, &r);
	run(g, &r);
	cr_assert_eq(mc_pass_fold_bn(g, NULL), 1, "%s", diag_all());
	cr_assert_eq(g->n_nodes, 1);
	assert_consistent(g);
	assert_same_outputs(g, &r, 1e-5);
	free_run(&r);
	mc_graph_free(g);
	mb_free(b);
}

/* Gemm (transB) -> BatchNormalization, with and without C. */
static void check_gemm_bn(bool with_c)
{
	rng_state = 99 + (uint64_t)with_c;
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "2,5");
	init_random(b, "w", "4,5", 20, -1, 1);
	if (with_c)
		init_random(b, "c", "4", 4, -1, 1);
	init_random(b, "scale", "4", 4, 0.5, 2);
	init_random(b, "shift", "4", 4, -1, 1);
	init_random(b, "mean", "4", 4, -0.5, 0.5);
	init_random(b, "var", "4", 4, 0.1, 3);
	Onnx__NodeProto *gm = mb_node(b, mb_main(b), "Gemm", "fc", with_c ? "x,w,c" : "x,w", "h");
	mb_attr_int(b, gm, "transB", 1);
	mb_attr_float(b, gm, "beta", 0.5f);
	mb_node(b, mb_main(b), "BatchNormalization", "bn", "h,scale,shift,mean,var", "y");
	mb_output(b, mb_main(b), "y");
	mc_graph *g = typed(b);
	run_data r;
	random_inputs(g, &r);
	run(g, &r);
	cr_assert_eq(mc_pass_fold_bn(g, NULL), 1, "%s", diag_all());
	cr_assert_eq(g->n_nodes, 1);
	cr_assert_eq(g->nodes[0].n_inputs, 3);
	assert_consistent(g);
	assert_same_outputs(g, &r, 1e-5);
	free_run(&r);
	mc_graph_free(g);
	mb_free(b);
}

Test(freezing, bn_into_gemm_with_c) { check_gemm_bn(true); }
Test(freezing, bn_into_gemm_without_c) { check_gemm_bn(false); }

/* Conv -> Mul [4,1,1] -> Add [1,4,1,1] -> Sub scalar -> Div [4,1,1]: all
 * four fold; a Mul varying along the width does not. */
Test(freezing, mul_add_fold_into_conv)
{
	rng_state = 4242;
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "1,3,5,5");
	init_random(b, "w", "4,3,3,3", 108, -1, 1);
	init_random(b, "cb", "4", 4, -1, 1);
	init_random(b, "k_mul", "4,1,1", 4, 0.5, 2);
	init_random(b, "k_add", "1,4,1,1", 4, -1, 1);
	init_random(b, "k_sub", "", 1, -1, 1);
	init_random(b, "k_div", "4,1,1", 4, 0.5, 2);
	init_random(b, "k_row", "1,1,3", 3, 0.5, 2);
	mb_node(b, mb_main(b), "Conv", "conv", "x,w,cb", "c");
	mb_node(b, mb_main(b), "Mul", "mul", "k_mul,c", "m");
	mb_node(b, mb_main(b), "Add", "add", "m,k_add", "a");
	mb_node(b, mb_main(b), "Sub", "sub", "a,k_sub", "s");
	mb_node(b, mb_main(b), "Div", "div", "s,k_div", "d");
	mb_node(b, mb_main(b), "Mul", "row", "d,k_row", "y");
	mb_output(b, mb_main(b), "y");
	mc_graph *g = typed(b);
	run_data r;
	random_inputs(g, &r);
	run(g, &r);
	cr_assert_eq(mc_pass_fold_bn(g, NULL), 4, "%s", diag_all());
	cr_assert_eq(g->n_nodes, 2);
	cr_assert_str_eq(g->nodes[0].op_type, "Conv");
	cr_assert_eq(g->nodes[0].outputs[0], mc_graph_find(g, "d"));
	cr_assert_str_eq(g->nodes[1].op_type, "Mul");
	assert_consistent(g);
	assert_same_outputs(g, &r, 1e-5);
	free_run(&r);
	mc_graph_free(g);
	mb_free(b);
}

/* A Conv whose weights are computed (Transpose of a constant) folds once
 * constant folding has run: the driver repeats the passes. */
Test(freezing, freeze_folds_bn_after_weights_fold)
{
	rng_state = 5;
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "1,2,4,4");
	init_random(b, "wt", "2,3,1,1", 6, -1, 1);
	init_random(b, "scale", "3", 3, 0.5, 2);
	init_random(b, "shift", "3", 3, -1, 1);
	init_random(b, "mean", "3", 3, -0.5, 0.5);
	init_random(b, "var", "3", 3, 0.1, 3);
	Onnx__NodeProto *t = mb_node(b, mb_main(b), "Transpose", "tw", "wt", "w");
	mb_attr_ints(b, t, "perm", (int64_t[]){1, 0, 2, 3}, 4);
	mb_node(b, mb_main(b), "Conv", "conv", "x,w", "c");
	mb_node(b, mb_main(b), "BatchNormalization", "bn", "c,scale,shift,mean,var", "y");
	mb_output(b, mb_main(b), "y");
	mc_graph *g = typed(b);
	run_data r;
	random_inputs(g, &r);
	run(g, &r);
	cr_assert_eq(mc_freeze(g, NULL), 0, "%s", diag_all());
	cr_assert_eq(g->n_nodes, 1);
	assert_same_outputs(g, &r, 1e-5);
	free_run(&r);
	mc_graph_free(g);
	mb_free(b);
}

/* ---- identity ---- */

/* x -> Identity -> Relu -> Dropout -> Reshape(same) -> Cast(same) ->
 * Transpose(size-1 dims only) -> Identity -> y (graph output): the Relu
 * ends up writing y itself. */
Test(freezing, identity_chain_removed_output_kept)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "1,1,3");
	Onnx__TensorProto *shape = mb_tensor(b, "shape", MC_INT64, "3");
	mb_int64_data(b, shape, (int64_t[]){1, 1, 3}, 3);
	mb_initializer(b, mb_main(b), shape);
	mb_node(b, mb_main(b), "Identity", "id1", "x", "a");
	mb_node(b, mb_main(b), "Relu", "relu", "a", "r");
	mb_node(b, mb_main(b), "Dropout", "drop", "r", "d,mask_unused");
	mb_node(b, mb_main(b), "Reshape", "reshape", "d,shape", "rs");
	Onnx__NodeProto *cast = mb_node(b, mb_main(b), "Cast", "cast", "rs", "cs");
	mb_attr_int(b, cast, "to", MC_FLOAT);
	Onnx__NodeProto *tr = mb_node(b, mb_main(b), "Transpose", "tr", "cs", "t");
	mb_attr_ints(b, tr, "perm", (int64_t[]){1, 0, 2}, 3);
	mb_node(b, mb_main(b), "Identity", "id2", "t", "y");
	mb_output(b, mb_main(b), "y");
	mc_graph *g = typed(b);
	run_data r;
	random_inputs(g, &r);
	run(g, &r);
	cr_assert_eq(mc_pass_identity(g, NULL), 6, "%s", diag_all());
	cr_assert_eq(g->n_nodes, 1);
	cr_assert_str_eq(g->nodes[0].op_type, "Relu");
	cr_assert(output_named(g, 0, "y"));
	cr_assert_eq(g->nodes[0].outputs[0], g->outputs[0]);
	cr_assert_eq(g->nodes[0].inputs[0], g->inputs[0]);
	assert_consistent(g);
	assert_same_outputs(g, &r, 0);
	free_run(&r);
	mc_graph_free(g);
	mb_free(b);
}

/* A graph input or another graph output behind an Identity output: one
 * Identity stays; a no-op Reshape there becomes an Identity. */
Test(freezing, identity_kept_between_graph_boundaries)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "2,3");
	Onnx__TensorProto *shape = mb_tensor(b, "shape", MC_INT64, "2");
	mb_int64_data(b, shape, (int64_t[]){2, 3}, 2);
	mb_initializer(b, mb_main(b), shape);
	mb_node(b, mb_main(b), "Identity", "id", "x", "y1");
	mb_node(b, mb_main(b), "Relu", "relu", "x", "r");
	mb_node(b, mb_main(b), "Reshape", "rs", "r,shape", "y2");
	mb_node(b, mb_main(b), "Dropout", "drop", "x", "y3,mask");
	mb_output(b, mb_main(b), "y1");
	mb_output(b, mb_main(b), "r");
	mb_output(b, mb_main(b), "y2");
	mb_output(b, mb_main(b), "y3");
	mc_graph *g = typed(b);
	run_data r;
	random_inputs(g, &r);
	run(g, &r);
	cr_assert_eq(mc_pass_identity(g, NULL), 2, "the Reshape and the Dropout change");
	cr_assert_eq(g->n_nodes, 4);
	cr_assert_eq(count_op(g, "Identity"), 3);
	cr_assert_eq(count_op(g, "Reshape") + count_op(g, "Dropout"), 0);
	cr_assert_eq(g->values[mc_graph_find(g, "mask")].producer, -1);
	cr_assert_eq(mc_pass_identity(g, NULL), 0);
	assert_consistent(g);
	assert_same_outputs(g, &r, 0);
	free_run(&r);
	mc_graph_free(g);
	mb_free(b);
}

/* Real work stays: a Transpose that reorders data, a Dropout whose mask
 * is read, a Cast to another type, a Reshape that changes the shape. */
Test(freezing, identity_keeps_real_work)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "2,2");
	Onnx__TensorProto *shape = mb_tensor(b, "shape", MC_INT64, "1");
	mb_int64_data(b, shape, (int64_t[]){4}, 1);
	mb_initializer(b, mb_main(b), shape);
	mb_node(b, mb_main(b), "Transpose", "tr", "x", "t");
	mb_node(b, mb_main(b), "Dropout", "drop", "t", "d,mask");
	Onnx__NodeProto *cast = mb_node(b, mb_main(b), "Cast", "cast", "d", "c");
	mb_attr_int(b, cast, "to", MC_DOUBLE);
	mb_node(b, mb_main(b), "Reshape", "rs", "c,shape", "y");
	mb_output(b, mb_main(b), "y");
	mb_output(b, mb_main(b), "mask");
	mc_graph *g = typed(b);
	cr_assert_eq(mc_pass_identity(g, NULL), 0);
	cr_assert_eq(g->n_nodes, 4);
	mc_graph_free(g);
	mb_free(b);
}

/* ---- dce ---- */

Test(freezing, dce_removes_unused_nodes)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "3");
	mb_input(b, mb_main(b), "c", MC_BOOL, "");
	mb_node(b, mb_main(b), "Relu", "dead1", "x", "a");
	mb_node(b, mb_main(b), "Neg", "dead2", "a", "b");
	mb_node(b, mb_main(b), "Exp", "captured", "x", "e");
	mb_node(b, mb_main(b), "Abs", "live", "x", "y");
	/* an If whose branch reads e: e stays alive through the capture */
	Onnx__GraphProto *t = mb_graph(b, "then"), *el = mb_graph(b, "else");
	mb_node(b, t, "Identity", "t_id", "e", "t_out");
	mb_output(b, t, "t_out");
	mb_node(b, el, "Identity", "e_id", "y", "e_out");
	mb_output(b, el, "e_out");
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "If", "pick", "c", "z");
	mb_attr_graph(b, n, "then_branch", t);
	mb_attr_graph(b, n, "else_branch", el);
	mb_output(b, mb_main(b), "z");
	mc_graph *g = typed(b);
	run_data r;
	random_inputs(g, &r);
	run(g, &r);
	cr_assert_eq(mc_pass_dce(g, NULL), 2);
	cr_assert_eq(g->n_nodes, 3);
	cr_assert_eq(count_op(g, "Relu") + count_op(g, "Neg"), 0);
	cr_assert_eq(count_op(g, "Exp"), 1);
	cr_assert_eq(mc_graph_find(g, "a") >= 0, 1, "dead values stay as values");
	cr_assert_eq(g->values[mc_graph_find(g, "a")].producer, -1);
	assert_consistent(g);
	assert_same_outputs(g, &r, 0);
	cr_assert_eq(mc_pass_dce(g, NULL), 0);
	free_run(&r);
	mc_graph_free(g);
	mb_free(b);
}

/* ---- cse ---- */

Test(freezing, cse_merges_nodes_and_constants)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "2,3");
	mb_input(b, mb_main(b), "w", MC_FLOAT, "3,3");
	mb_init_floats(b, mb_main(b), "k1", "3", (const float[]){1, 2, 3}, 3);
	mb_init_floats(b, mb_main(b), "k2", "3", (const float[]){1, 2, 3}, 3);
	mb_init_floats(b, mb_main(b), "k3", "3", (const float[]){1, 2, 4}, 3);
	mb_node(b, mb_main(b), "Relu", "r1", "x", "a1");
	mb_node(b, mb_main(b), "Relu", "r2", "x", "a2");
	mb_node(b, mb_main(b), "Add", "p1", "a1,k1", "b1");
	mb_node(b, mb_main(b), "Add", "p2", "a2,k2", "b2");
	mb_node(b, mb_main(b), "Add", "p3", "a2,k3", "b3");
	/* the same attributes in another order merge; other values do not */
	Onnx__NodeProto *g1 = mb_node(b, mb_main(b), "Gemm", "g1", "b1,w", "c1");
	mb_attr_int(b, g1, "transB", 1);
	mb_attr_float(b, g1, "alpha", 2);
	Onnx__NodeProto *g2 = mb_node(b, mb_main(b), "Gemm", "g2", "b2,w", "c2");
	mb_attr_float(b, g2, "alpha", 2);
	mb_attr_int(b, g2, "transB", 1);
	Onnx__NodeProto *g3 = mb_node(b, mb_main(b), "Gemm", "g3", "b2,w", "c3");
	mb_attr_float(b, g3, "alpha", 3);
	mb_attr_int(b, g3, "transB", 1);
	mb_node(b, mb_main(b), "Sum", "sum", "c1,c2,c3,b3", "y");
	mb_output(b, mb_main(b), "y");
	mb_output(b, mb_main(b), "c2");
	mc_graph *g = typed(b);
	run_data r;
	random_inputs(g, &r);
	run(g, &r);
	/* k2 -> k1, r2 -> r1, p2 -> p1; g2 writes a graph output and stays */
	cr_assert_eq(mc_pass_cse(g, NULL), 3, "%s", diag_all());
	cr_assert_eq(count_op(g, "Relu"), 1);
	cr_assert_eq(count_op(g, "Add"), 2);
	cr_assert_eq(count_op(g, "Gemm"), 3);
	cr_assert(output_named(g, 1, "c2"));
	assert_consistent(g);
	assert_same_outputs(g, &r, 0);
	/* with c2 no graph output, g2 merges into g1 */
	g->n_outputs = 1;
	cr_assert_eq(mc_pass_cse(g, NULL), 1);
	cr_assert_eq(count_op(g, "Gemm"), 2);
	free_run(&r);
	mc_graph_free(g);
	mb_free(b);
}

/* ---- driver, dump ---- */

static bool file_exists(const char *dir, const char *name)
{
	char path[1024];
	struct stat st;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return stat(path, &st) == 0;
}

static char *read_text(const char *dir, const char *name)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	char *buf = calloc(1, 1 << 16);
	size_t n = fread(buf, 1, (1 << 16) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

Test(freezing, freeze_stats_and_dumps)
{
	rng_state = 31;
	mb *b = conv_bn_model(false, OPSET);
	mc_graph *g = typed(b);
	char *tmp = make_temp_dir();
	char dir[1024];
	snprintf(dir, sizeof dir, "%s/dumps/freeze", tmp);
	char *stats = NULL;
	size_t stats_len = 0;
	FILE *sf = open_memstream(&stats, &stats_len);
	mc_freeze_opts o = {.dump_after = "bn", .dump_dir = dir, .stats = sf};
	cr_assert_eq(mc_freeze(g, &o), 0, "%s", diag_all());
	fclose(sf);
	/* round 1 folds the BN, round 2 finds nothing: 18 pass runs (the layout
	 * pass, which finds no convolution here, prints nothing) */
	int lines = 0;
	for (char *p = stats; *p; p++)
		lines += *p == '\n';
	cr_assert_eq(lines, 18, "%s", stats);
	cr_assert(strstr(stats, "freeze: bn "), "%s", stats);
	cr_assert(strstr(stats, "2 -> 1 nodes"), "%s", stats);
	cr_assert(file_exists(dir, "00-input.txt"));
	cr_assert(file_exists(dir, "04-bn.txt"));
	cr_assert(file_exists(dir, "13-bn.txt"));
	cr_assert(!file_exists(dir, "02-fold.txt"));
	char *in = read_text(dir, "00-input.txt"), *out = read_text(dir, "04-bn.txt");
	cr_assert(strstr(in, "input %x : float32 1x3x6x6\n"), "%s", in);
	cr_assert(strstr(in, "const %w : float32 4x3x3x3 (432 bytes) ["), "%s", in);
	cr_assert(strstr(in, "%c = Conv(%x, %w) {pads=[1, 1, 1, 1]}  : float32 1x4x6x6\n"), "%s", in);
	cr_assert(strstr(in, "%y = BatchNormalization(%c, %scale, %shift, %mean, %var) "
	                     "{epsilon=0.00100000005}  : float32 1x4x6x6\n"), "%s", in);
	cr_assert(strstr(in, "output %y : float32 1x4x6x6\n"), "%s", in);
	cr_assert(strstr(out, "%y = Conv(%x, %w_folded, %conv_bias_folded)"), "%s", out);
	cr_assert(!strstr(out, "BatchNormalization"), "%s", out);
	free(in);
	free(out);
	free(stats);
	rm_tree(tmp);
	free(tmp);
	mc_graph_free(g);
	mb_free(b);
}

Test(freezing, dump_dir_error_is_reported)
{
	mb *b = conv_bn_model(false, OPSET);
	mc_graph *g = typed(b);
	char *tmp = make_temp_dir();
	char file[1024];
	snprintf(file, sizeof file, "%s/plain", tmp);
	cr_assert_eq(write_file(file, "x", 1), 0);
	mc_freeze_opts o = {.dump_after = "all", .dump_dir = file};
	cr_assert_eq(mc_freeze(g, &o), -1);
	cr_assert_eq(diag_count(), 1, "%s", diag_all());
	cr_assert(strstr(diag_line(0), "cannot create dump directory"), "%s", diag_line(0));
	rm_tree(tmp);
	free(tmp);
	mc_graph_free(g);
	mb_free(b);
}

Test(freezing, node_count_includes_subgraphs)
{
	mb *b = mb_new(OPSET);
	mb_input(b, mb_main(b), "c", MC_BOOL, "");
	mb_if_consts(b, mb_main(b), "pick", "c", "y", "2", (const float[]){1, 2},
	             (const float[]){3, 4}, 2);
	mb_node(b, mb_main(b), "Neg", "neg", "y", "z");
	mb_output(b, mb_main(b), "z");
	mc_graph *g = typed(b);
	cr_assert_eq(mc_graph_node_count(g), 2);
	mc_graph_free(g);
	mb_free(b);
}

/* ---- the budget of compile-time evaluation ---- */

/* 300 doublings of a 1 MiB constant made from a 32-byte file: evaluating
 * them all would produce 300 MiB; the budget (256 MiB plus 4x the model's
 * constants) stops it, says so once, and the rest stays for run time. */
Test(freezing, fold_budget_stops_a_chain_of_large_constants)
{
	mb *b = mb_new(OPSET);
	Onnx__GraphProto *g = mb_main(b);
	int64_t shape = 262144;
	mb_init_ints(b, g, "shape", MC_INT64, "1", &shape, 1);
	mb_node(b, g, "ConstantOfShape", "fill", "shape", "v0");
	char in[32], out[32];
	enum { CHAIN = 300 };
	for (int i = 0; i < CHAIN; i++) {
		snprintf(in, sizeof in, "v%d,v%d", i, i);
		snprintf(out, sizeof out, "v%d", i + 1);
		mb_node(b, g, "Add", NULL, in, out);
	}
	mb_input(b, g, "x", MC_FLOAT, "262144");
	snprintf(in, sizeof in, "x,v%d", CHAIN);
	mb_node(b, g, "Add", "last", in, "y");
	mb_output(b, g, "y");
	mc_graph *m = typed(b);
	mc_freeze_opts fo = {0};
	cr_assert_eq(mc_freeze(m, &fo), 0, "%s", diag_all());
	cr_assert_leq(m->folded_bytes, m->fold_budget);
	cr_assert_eq(m->fold_budget, ((size_t)256 << 20) + 4 * 8, "the model's own constants are 8 bytes");
	cr_assert(m->fold_budget_spent);
	cr_assert_not_null(strstr(diag_all(), "compile-time evaluation stopped after"), "%s", diag_all());
	/* Every Add the budget did not cover is still there, to run. */
	cr_assert_gt(mc_graph_node_count(m), CHAIN - 256);
	mc_graph_free(m);
	mb_free(b);
}

/* ---- written-out ops (freezing/patterns.c) ---- */

/* ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div over the last
 * axis of x [2, 3, 37] (as PyTorch writes layer_norm at opset 13), then
 * Mul gamma and Add beta where affine; eps_first: Add(eps, v). */
static mb *written_out_layernorm(bool affine, bool eps_first)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "2,3,37");
	mb_init_floats(b, g, "two", "", (float[]){2}, 1);
	mb_init_floats(b, g, "eps", "", (float[]){1e-5f}, 1);
	Onnx__NodeProto *m = mb_node(b, g, "ReduceMean", "m", "x", "mean");
	mb_attr_ints(b, m, "axes", (int64_t[]){-1}, 1);
	mb_node(b, g, "Sub", "sub", "x,mean", "d");
	mb_node(b, g, "Pow", "pow", "d,two", "sq");
	Onnx__NodeProto *v = mb_node(b, g, "ReduceMean", "v", "sq", "var");
	mb_attr_ints(b, v, "axes", (int64_t[]){2}, 1);
	mb_node(b, g, "Add", "add", eps_first ? "eps,var" : "var,eps", "ve");
	mb_node(b, g, "Sqrt", "sqrt", "ve", "sd");
	mb_node(b, g, "Div", "div", "d,sd", affine ? "n" : "y");
	if (affine) {
		init_random(b, "gamma", "37", 37, 0.5, 1.5);
		init_random(b, "beta", "37", 37, -0.5, 0.5);
		mb_node(b, g, "Mul", "mul", "n,gamma", "ng");
		mb_node(b, g, "Add", "addb", "beta,ng", "y");
	}
	mb_output(b, g, "y");
	return b;
}

static void check_layernorm_fused(bool affine, bool eps_first)
{
	rng_state = 777 + (uint64_t)affine;
	mb *b = written_out_layernorm(affine, eps_first);
	mc_graph *g = typed(b);
	run_data r;
	random_inputs(g, &r);
	run(g, &r);
	cr_assert_eq(mc_pass_patterns(g, NULL), 1, "%s", diag_all());
	cr_assert_eq(count_op(g, "LayerNormalization"), 1);
	cr_assert_eq(g->n_nodes, 1, "every written-out node replaced");
	const mc_node *ln = &g->nodes[0];
	cr_assert_eq(ln->outputs[0], mc_graph_find(g, "y"));
	cr_assert_eq(ln->n_inputs, affine ? 3 : 2);
	assert_consistent(g);
	assert_same_outputs(g, &r, 1e-5);
	free_run(&r);
	mc_graph_free(g);
	mb_free(b);
}

Test(freezing, written_out_layernorm_fused_affine) { check_layernorm_fused(true, false); }
Test(freezing, written_out_layernorm_fused_plain) { check_layernorm_fused(false, true); }

/* x - mean read elsewhere too: the written-out form stays. */
Test(freezing, written_out_layernorm_kept_when_shared)
{
	mb *b = written_out_layernorm(true, false);
	mb_output(b, mb_main(b), "d");
	mc_graph *g = typed(b);
	cr_assert_eq(mc_pass_patterns(g, NULL), 0);
	cr_assert_eq(count_op(g, "LayerNormalization"), 0);
	mc_graph_free(g);
	mb_free(b);
}

/* Mul(x, Sigmoid(x)) in either order becomes Swish; where the Sigmoid's
 * output is read elsewhere too, both stay. */
static mb *silu_model(bool sigmoid_first, bool shared)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "3,17");
	mb_node(b, g, "Sigmoid", "sig", "x", "s");
	mb_node(b, g, "Mul", "mul", sigmoid_first ? "s,x" : "x,s", "y");
	mb_output(b, g, "y");
	if (shared)
		mb_output(b, g, "s");
	return b;
}

Test(freezing, written_out_silu_becomes_swish)
{
	for (int order = 0; order < 2; order++) {
		rng_state = 99 + (uint64_t)order;
		mb *b = silu_model(order, false);
		mc_graph *g = typed(b);
		run_data r;
		random_inputs(g, &r);
		run(g, &r);
		cr_assert_eq(mc_pass_patterns(g, NULL), 1, "%s", diag_all());
		cr_assert_eq(g->n_nodes, 1);
		cr_assert_eq(count_op(g, "Swish"), 1);
		assert_consistent(g);
		assert_same_outputs(g, &r, 1e-6);
		free_run(&r);
		mc_graph_free(g);
		mb_free(b);
	}
	mb *b = silu_model(false, true);
	mc_graph *g = typed(b);
	cr_assert_eq(mc_pass_patterns(g, NULL), 0);
	cr_assert_eq(count_op(g, "Swish"), 0);
	mc_graph_free(g);
	mb_free(b);
}

/* x * 0.5 * (1 + erf(x / sqrt 2)) as PyTorch exports GELU before opset 20
 * (or x times 1/sqrt 2, Muls either way round) becomes one Gelu; where
 * the Erf's output is read elsewhere too, everything stays. */
static mb *written_out_gelu(bool by_mul, bool swapped, bool shared)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "2,19");
	mb_init_floats(b, g, "c", "", (float[]){by_mul ? 0.70710677f : 1.4142135f}, 1);
	mb_init_floats(b, g, "one", "", (float[]){1}, 1);
	mb_init_floats(b, g, "half", "", (float[]){0.5f}, 1);
	mb_node(b, g, by_mul ? "Mul" : "Div", "scale", by_mul && swapped ? "c,x" : "x,c", "d");
	mb_node(b, g, "Erf", "erf", "d", "e");
	mb_node(b, g, "Add", "add", swapped ? "one,e" : "e,one", "a");
	mb_node(b, g, "Mul", "mul", swapped ? "a,x" : "x,a", "m");
	mb_node(b, g, "Mul", "mul2", swapped ? "half,m" : "m,half", "y");
	mb_output(b, g, "y");
	if (shared)
		mb_output(b, g, "e");
	return b;
}

Test(freezing, written_out_gelu_becomes_gelu)
{
	for (int form = 0; form < 4; form++) {
		rng_state = 4242 + (uint64_t)form;
		mb *b = written_out_gelu(form & 1, form & 2, false);
		mc_graph *g = typed(b);
		run_data r;
		random_inputs(g, &r);
		run(g, &r);
		cr_assert_eq(mc_pass_patterns(g, NULL), 1, "form %d: %s", form, diag_all());
		cr_assert_eq(g->n_nodes, 1);
		cr_assert_eq(count_op(g, "Gelu"), 1);
		assert_consistent(g);
		assert_same_outputs(g, &r, 1e-6);
		free_run(&r);
		mc_graph_free(g);
		mb_free(b);
	}
	mb *b = written_out_gelu(false, false, true);
	mc_graph *g = typed(b);
	cr_assert_eq(mc_pass_patterns(g, NULL), 0);
	cr_assert_eq(count_op(g, "Gelu"), 0);
	mc_graph_free(g);
	mb_free(b);
}

/* Written-out attention as exporters write it: B 2, S 5, H 2 heads of D 4.
 * Form 1 (packed): one [B, S, 3 H D] projection split into heads (torch's
 * MultiheadAttention, ViT) and the scores times 1/sqrt(D); else three
 * projections and a mask [B, 1, 1, S] added: form 0, K^T by one
 * Transpose, the scores divided by sqrt(D); form 2 (torch's
 * scaled_dot_product_attention), K^T by a Transpose of K's heads, Q and
 * K^T each times D^-1/4 before the product. shared: the scores are an
 * output too, which keeps them written out. */
static mb *written_out_attention(int form, bool shared)
{
	bool packed = form == 1, sdpa = form == 2;
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	if (packed) {
		mb_input(b, g, "qkv", MC_FLOAT, "2,5,24");
		mb_init_ints(b, g, "shape5", MC_INT64, "5", (int64_t[]){ 2, 5, 3, 2, 4 }, 5);
		mb_node(b, g, "Reshape", "r", "qkv,shape5", "r5");
		Onnx__NodeProto *t = mb_node(b, g, "Transpose", "t", "r5", "t5");
		mb_attr_ints(b, t, "perm", (int64_t[]){ 2, 0, 3, 1, 4 }, 5);
		mb_init_ints(b, g, "ones", MC_INT64, "3", (int64_t[]){ 1, 1, 1 }, 3);
		mb_node(b, g, "Split", "split", "t5,ones", "s0,s1,s2");
		mb_init_ints(b, g, "zero", MC_INT64, "1", (int64_t[]){ 0 }, 1);
		mb_node(b, g, "Squeeze", "sq0", "s0,zero", "q4");
		mb_node(b, g, "Squeeze", "sq1", "s1,zero", "k4");
		mb_node(b, g, "Squeeze", "sq2", "s2,zero", "v4");
		Onnx__NodeProto *kt = mb_node(b, g, "Transpose", "kt", "k4", "kt4");
		mb_attr_ints(b, kt, "perm", (int64_t[]){ 0, 1, 3, 2 }, 4);
		mb_node(b, g, "MatMul", "qk", "q4,kt4", "s");
		mb_init_floats(b, g, "c", "", (float[]){ 0.5f }, 1);
		mb_node(b, g, "Mul", "scale", "s,c", "scores");
	} else {
		const char *names[3] = { "q", "k", "v" };
		mb_init_ints(b, g, "shape4", MC_INT64, "4", (int64_t[]){ 2, 5, 2, 4 }, 4);
		for (int i = 0; i < 3; i++) {
			char in[8], r[8], t[8], rn[8], tn[8], ins[24];
			snprintf(in, sizeof in, "%s3", names[i]);
			snprintf(r, sizeof r, "%sr", names[i]);
			snprintf(t, sizeof t, "%st", names[i]);
			snprintf(rn, sizeof rn, "r%s", names[i]);
			snprintf(tn, sizeof tn, "t%s", names[i]);
			snprintf(ins, sizeof ins, "%s,shape4", in);
			mb_input(b, g, in, MC_FLOAT, "2,5,8");
			mb_node(b, g, "Reshape", rn, ins, r);
			Onnx__NodeProto *tr = mb_node(b, g, "Transpose", tn, r, t);
			mb_attr_ints(b, tr, "perm", i == 1 && !sdpa ? (int64_t[]){ 0, 2, 3, 1 } : (int64_t[]){ 0, 2, 1, 3 }, 4);
		}
		if (sdpa) {
			Onnx__NodeProto *kt = mb_node(b, g, "Transpose", "ktt", "kt", "ktt");
			mb_attr_ints(b, kt, "perm", (int64_t[]){ 0, 1, 3, 2 }, 4);
			mb_init_floats(b, g, "c", "", (float[]){ 0.70710678f }, 1);
			mb_node(b, g, "Mul", "qscale", "qt,c", "qs");
			mb_node(b, g, "Mul", "kscale", "c,ktt", "ks");
			mb_node(b, g, "MatMul", "qk", "qs,ks", "sd");
		} else {
			mb_node(b, g, "MatMul", "qk", "qt,kt", "s");
			mb_init_floats(b, g, "c", "", (float[]){ 2.0f }, 1);
			mb_node(b, g, "Div", "scale", "s,c", "sd");
		}
		mb_input(b, g, "mask", MC_FLOAT, "2,1,1,5");
		mb_node(b, g, "Add", "masked", "sd,mask", "scores");
	}
	mb_node(b, g, "Softmax", "softmax", "scores", "p");
	mb_node(b, g, "MatMul", "pv", packed ? "p,v4" : "p,vt", "o4");
	Onnx__NodeProto *to = mb_node(b, g, "Transpose", "to", "o4", "o4t");
	mb_attr_ints(b, to, "perm", (int64_t[]){ 0, 2, 1, 3 }, 4);
	mb_init_ints(b, g, "shape3", MC_INT64, "3", (int64_t[]){ 2, 5, 8 }, 3);
	mb_node(b, g, "Reshape", "ro", "o4t,shape3", "y");
	mb_output(b, g, "y");
	if (shared)
		mb_output(b, g, "scores");
	return b;
}

/* b's graph, its outputs on random inputs in *r, after the patterns that
 * only a target asking for them (o) applies: once each. */
static mc_graph *patterns_where_asked(mb *b, const mc_freeze_opts *o, run_data *r, int form)
{
	mc_graph *g = typed(b);
	random_inputs(g, r);
	run(g, r);
	cr_assert_eq(mc_pass_patterns(g, NULL), 0, "only where the target asks");
	cr_assert_eq(mc_pass_patterns(g, o), 1, "form %d: %s", form, diag_all());
	mc_pass_dce(g, NULL);
	return g;
}

Test(freezing, written_out_attention_becomes_attention)
{
	mc_freeze_opts o = { .fuse_attention = true };
	for (int form = 0; form < 3; form++) {
		bool packed = form == 1;
		rng_state = 777 + (uint64_t)form;
		mb *b = written_out_attention(form, false);
		run_data r;
		mc_graph *g = patterns_where_asked(b, &o, &r, form);
		cr_assert_eq(count_op(g, "Attention"), 1);
		cr_assert_eq(count_op(g, "Softmax"), 0);
		cr_assert_eq(count_op(g, "MatMul"), 0);
		cr_assert_eq(count_op(g, "Transpose"), 0);
		cr_assert_eq(count_op(g, "Mul"), 0, "form %d: the scalings fold into the scale", form);
		cr_assert_eq(count_op(g, "Split"), packed, "the packed heads: one Split of the projection");
		cr_assert_eq(g->n_nodes, 1 + packed);
		assert_consistent(g);
		assert_same_outputs(g, &r, 1e-6);
		free_run(&r);
		mc_graph_free(g);
		mb_free(b);
	}
	/* the scores read elsewhere: left as they are */
	mb *b = written_out_attention(0, true);
	mc_graph *g = typed(b);
	cr_assert_eq(mc_pass_patterns(g, &o), 0);
	cr_assert_eq(count_op(g, "Attention"), 0);
	mc_graph_free(g);
	mb_free(b);
}

/* Sibling projections (an attention block's q, k, v: x W_i + b_i, the
 * parts of different widths) become one product, one Add and a Split
 * where the target asks; a product without its bias stays apart. */
Test(freezing, sibling_projections_become_one_product)
{
	rng_state = 4711;
	mb *b = mb_new(13);
	Onnx__GraphProto *g0 = mb_main(b);
	mb_input(b, g0, "x", MC_FLOAT, "2,5,8");
	static float w[3][8 * 6], bias[3][6], lone[8 * 3];
	const int widths[3] = { 6, 6, 4 };
	for (int s = 0; s < 3; s++) {
		char wn[8], bn[8], mn[8], an[8], yn[8], zn[8], io[24], dims[16], bdims[8];
		for (int i = 0; i < 8 * widths[s]; i++)
			w[s][i] = (float)((i * 7 + s * 3) % 11 - 5) / 8;
		for (int i = 0; i < widths[s]; i++)
			bias[s][i] = (float)(i - s) / 4;
		snprintf(wn, sizeof wn, "w%d", s);
		snprintf(bn, sizeof bn, "b%d", s);
		snprintf(mn, sizeof mn, "m%d", s);
		snprintf(an, sizeof an, "a%d", s);
		snprintf(yn, sizeof yn, "y%d", s);
		snprintf(zn, sizeof zn, "z%d", s);
		snprintf(dims, sizeof dims, "8,%d", widths[s]);
		snprintf(bdims, sizeof bdims, "%d", widths[s]);
		mb_init_floats(b, g0, wn, dims, w[s], (size_t)(8 * widths[s]));
		mb_init_floats(b, g0, bn, bdims, bias[s], (size_t)widths[s]);
		snprintf(io, sizeof io, "x,%s", wn);
		mb_node(b, g0, "MatMul", mn, io, yn);
		snprintf(io, sizeof io, s == 1 ? "%s,%s" : "%s,%s", s == 1 ? bn : yn, s == 1 ? yn : bn);
		mb_node(b, g0, "Add", an, io, zn);
		mb_output(b, g0, zn);
	}
	for (int i = 0; i < 8 * 3; i++)
		lone[i] = (float)(i % 5) / 4;
	mb_init_floats(b, g0, "wl", "8,3", lone, 8 * 3);
	mb_node(b, g0, "MatMul", "lone", "x,wl", "yl");
	mb_output(b, g0, "yl");
	mc_graph *g = typed(b);
	run_data r;
	random_inputs(g, &r);
	run(g, &r);
	mc_freeze_opts o = { .fuse_attention = true };
	cr_assert_eq(mc_pass_patterns(g, &o), 1, "%s", diag_all());
	cr_assert_eq(count_op(g, "MatMul"), 2, "the three as one, the lone one apart");
	cr_assert_eq(count_op(g, "Add"), 1);
	cr_assert_eq(count_op(g, "Split"), 1);
	assert_consistent(g);
	assert_same_outputs(g, &r, 1e-6);
	free_run(&r);
	mc_graph_free(g);
	mb_free(b);
}

/* Concatenated sibling convolutions of one input (a 1x1 and a 3x3 with
 * its pads, as squeezenet's fire modules; with strides 2 on an odd image,
 * the 1x1 without a bias; through Relus, or not) become one convolution
 * where the target asks, the same outputs; a dilated sibling stays
 * apart. */
static mb *sibling_convs(int form)
{
	bool relu = form != 1, strided = form == 1 || form == 2, dilated = form == 3;
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "1,4,9,9");
	static float w1[3 * 4], w3[5 * 4 * 9], b3[5];
	for (int i = 0; i < 3 * 4; i++)
		w1[i] = (float)((i * 7) % 11 - 5) / 8;
	for (int i = 0; i < 5 * 4 * 9; i++)
		w3[i] = (float)((i * 5) % 13 - 6) / 8;
	for (int i = 0; i < 5; i++)
		b3[i] = (float)(i - 2) / 4;
	mb_init_floats(b, g, "w1", "3,4,1,1", w1, 3 * 4);
	mb_init_floats(b, g, "w3", "5,4,3,3", w3, 5 * 4 * 9);
	mb_init_floats(b, g, "b3", "5", b3, 5);
	Onnx__NodeProto *c1 = mb_node(b, g, "Conv", "e1", "x,w1", "c1");
	Onnx__NodeProto *c3 = mb_node(b, g, "Conv", "e3", "x,w3,b3", "c3");
	if (dilated) { /* the 3x3's taps 2 apart: no window holds both */
		mb_attr_ints(b, c3, "pads", (int64_t[]){ 2, 2, 2, 2 }, 4);
		mb_attr_ints(b, c3, "dilations", (int64_t[]){ 2, 2 }, 2);
	} else {
		mb_attr_ints(b, c3, "pads", (int64_t[]){ 1, 1, 1, 1 }, 4);
	}
	if (strided) {
		mb_attr_ints(b, c1, "strides", (int64_t[]){ 2, 2 }, 2);
		mb_attr_ints(b, c3, "strides", (int64_t[]){ 2, 2 }, 2);
	}
	if (relu) {
		mb_node(b, g, "Relu", "r1", "c1", "a1");
		mb_node(b, g, "Relu", "r3", "c3", "a3");
	}
	Onnx__NodeProto *cat = mb_node(b, g, "Concat", "cat", relu ? "a1,a3" : "c1,c3", "y");
	mb_attr_int(b, cat, "axis", 1);
	mb_output(b, g, "y");
	return b;
}

Test(freezing, concatenated_sibling_convolutions_become_one)
{
	mc_freeze_opts o = { .merge_sibling_convs = true };
	for (int form = 0; form < 3; form++) {
		rng_state = 99 + (uint64_t)form;
		mb *b = sibling_convs(form);
		run_data r;
		mc_graph *g = patterns_where_asked(b, &o, &r, form);
		cr_assert_eq(count_op(g, "Conv"), 1);
		cr_assert_eq(count_op(g, "Concat"), 0);
		cr_assert_eq(count_op(g, "Relu"), form != 1);
		const mc_node *conv = &g->nodes[0];
		const mc_shape *ws = &g->values[conv->inputs[1]].shape;
		cr_assert(ws->rank == 4 && ws->dims[0] == 8 && ws->dims[2] == 3 && ws->dims[3] == 3);
		assert_consistent(g);
		assert_same_outputs(g, &r, 1e-6);
		free_run(&r);
		mc_graph_free(g);
		mb_free(b);
	}
	/* a dilated sibling: apart */
	mb *b = sibling_convs(3);
	mc_graph *g = typed(b);
	cr_assert_eq(mc_pass_patterns(g, &o), 0);
	cr_assert_eq(count_op(g, "Conv"), 2);
	mc_graph_free(g);
	mb_free(b);
}
