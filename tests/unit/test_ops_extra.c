/* Extra-family registry entries called directly: parse, infer, eval on tiny
 * cases computed by hand, plus the errors a hostile model must get. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelc.h"

/* ---- a node built by hand ---- */

typedef struct {
	mc_node node;
	mc_attr attrs[8];
} test_node;

static void node_init(test_node *t, const char *op, int opset)
{
	memset(t, 0, sizeof *t);
	t->node.name = (char *)"n";
	t->node.op_type = (char *)op;
	t->node.domain = (char *)"";
	t->node.opset = opset;
	t->node.attrs = t->attrs;
}

static void attr_int(test_node *t, const char *name, int64_t v)
{
	cr_assert_lt(t->node.n_attrs, 8);
	mc_attr *a = &t->attrs[t->node.n_attrs++];
	a->name = (char *)name;
	a->type = MC_ATTR_INT;
	a->i = v;
}

static void attr_float(test_node *t, const char *name, double v)
{
	cr_assert_lt(t->node.n_attrs, 8);
	mc_attr *a = &t->attrs[t->node.n_attrs++];
	a->name = (char *)name;
	a->type = MC_ATTR_FLOAT;
	a->f = v;
}

static void attr_string(test_node *t, const char *name, const char *v)
{
	cr_assert_lt(t->node.n_attrs, 8);
	mc_attr *a = &t->attrs[t->node.n_attrs++];
	a->name = (char *)name;
	a->type = MC_ATTR_STRING;
	a->s = (char *)v;
}

static void attr_ints(test_node *t, const char *name, int64_t *v, size_t n)
{
	cr_assert_lt(t->node.n_attrs, 8);
	mc_attr *a = &t->attrs[t->node.n_attrs++];
	a->name = (char *)name;
	a->type = MC_ATTR_INTS;
	a->ints = v;
	a->n = n;
}

/* ---- diagnostics captured for error tests ---- */

static char last_error[1024];

static void capture(const char *line, void *user)
{
	(void)user;
	snprintf(last_error, sizeof last_error, "%s", line);
}

static void quiet(void)
{
	last_error[0] = 0;
	mc_set_diag_sink(capture, NULL);
}

TestSuite(extra, .init = quiet);

/* ---- running an entry: parse, infer, allocate, eval ---- */

#define MAX_IO 10

/* in[i] NULL: omitted input. out[k] is a new tensor for each of the n_out
 * outputs on success (the caller frees). konst: inputs are known at compile
 * time. */
static int run_op_k(test_node *t, mc_tensor *const *in, int n_in, int n_out, mc_tensor **out,
                    bool konst)
{
	mc_node *n = &t->node;
	int in_idx[MAX_IO], out_idx[MAX_IO];
	n->n_inputs = n_in;
	n->n_outputs = n_out;
	n->inputs = in_idx;
	n->outputs = out_idx;
	for (int i = 0; i < n_in; i++)
		in_idx[i] = in[i] ? i : -1;
	for (int k = 0; k < n_out; k++)
		out_idx[k] = MAX_IO + k;
	n->op = mc_registry_find(n->op_type, n->opset, NULL);
	cr_assert_not_null(n->op, "no registry entry for %s-%d", n->op_type, n->opset);
	int rc = n->op->parse ? n->op->parse(n) : 0;
	mc_value vin[MAX_IO], vout[MAX_IO];
	const mc_value *pin[MAX_IO];
	mc_value *pout[MAX_IO];
	memset(vin, 0, sizeof vin);
	memset(vout, 0, sizeof vout);
	for (int i = 0; i < n_in; i++) {
		pin[i] = NULL;
		if (!in[i])
			continue;
		vin[i].name = (char *)"in";
		vin[i].dtype = in[i]->dtype;
		vin[i].shape = in[i]->shape;
		vin[i].typed = true;
		vin[i].konst = konst ? in[i] : NULL;
		pin[i] = &vin[i];
	}
	for (int k = 0; k < n_out; k++) {
		vout[k].name = (char *)"out";
		pout[k] = &vout[k];
		out[k] = NULL;
	}
	mc_infer_ctx ic = {.node = n, .n_in = n_in, .n_out = n_out, .in = pin, .out = pout};
	if (!rc)
		rc = n->op->infer(&ic);
	for (int k = 0; k < n_out && !rc; k++)
		out[k] = mc_tensor_new(vout[k].dtype, &vout[k].shape);
	mc_eval_ctx ec = {.node = n, .n_in = n_in, .n_out = n_out,
	                  .in = (const mc_tensor *const *)in, .out = out};
	if (!rc)
		rc = n->op->eval(&ec);
	free(n->params);
	n->params = NULL;
	if (rc)
		for (int k = 0; k < n_out; k++) {
			mc_tensor_free(out[k]);
			out[k] = NULL;
		}
	return rc;
}

static int run_op(test_node *t, mc_tensor *const *in, int n_in, int n_out, mc_tensor **out)
{
	return run_op_k(t, in, n_in, n_out, out, false);
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

#define S0(t, v) tensor(t, 0, NULL, (double[]){v})
#define T1(t, a, ...) tensor(t, 1, (int64_t[]){a}, (double[]){__VA_ARGS__})
#define T2(t, a, b, ...) tensor(t, 2, (int64_t[]){a, b}, (double[]){__VA_ARGS__})
#define T3(t, a, b, c, ...) tensor(t, 3, (int64_t[]){a, b, c}, (double[]){__VA_ARGS__})
#define T4(t, a, b, c, d, ...) tensor(t, 4, (int64_t[]){a, b, c, d}, (double[]){__VA_ARGS__})

static void free_all(mc_tensor **t, int n)
{
	for (int i = 0; i < n; i++)
		mc_tensor_free(t[i]);
}

static void expect_ints(const mc_tensor *t, const int64_t *want, size_t n)
{
	cr_assert_eq(t->numel, n, "got %zu elements, want %zu", t->numel, n);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(mc_get_i(t, i), want[i], "element %zu: got %lld, want %lld", i,
		             (long long)mc_get_i(t, i), (long long)want[i]);
}

#define EXPECT_INTS(t, ...) expect_ints((t), (int64_t[]){__VA_ARGS__}, \
	sizeof (int64_t[]){__VA_ARGS__} / sizeof(int64_t))

static void expect_floats(const mc_tensor *t, const double *want, size_t n)
{
	cr_assert_eq(t->numel, n, "got %zu elements, want %zu", t->numel, n);
	for (size_t i = 0; i < n; i++)
		cr_assert_float_eq(mc_get_f(t, i), want[i], 1e-6, "element %zu: got %.9g, want %.9g",
		                   i, mc_get_f(t, i), want[i]);
}

#define EXPECT_FLOATS(t, ...) expect_floats((t), (double[]){__VA_ARGS__}, \
	sizeof (double[]){__VA_ARGS__} / sizeof(double))

static void expect_error(const char *needle)
{
	cr_assert(strstr(last_error, needle), "message '%s' lacks '%s'", last_error, needle);
	cr_assert(strstr(last_error, "node 'n'"), "message '%s' does not name the node",
	          last_error);
}

/* ---- Einsum ---- */

Test(extra, einsum_matmul_int64)
{
	test_node t;
	node_init(&t, "Einsum", 12);
	attr_string(&t, "equation", "ij, jk -> ik");
	mc_tensor *in[2] = {T2(MC_INT64, 2, 2, 1, 2, 3, 4), T2(MC_INT64, 2, 2, 5, 6, 7, 8)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 2, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->dtype, MC_INT64);
	EXPECT_INTS(out[0], 19, 22, 43, 50);
	free_all(in, 2);
	free_all(out, 1);
}

/* Implicit output drops a repeated label: "ii" is the trace. */
Test(extra, einsum_trace_and_diagonal)
{
	test_node t;
	node_init(&t, "Einsum", 12);
	attr_string(&t, "equation", "ii");
	mc_tensor *in[1] = {T2(MC_FLOAT, 2, 2, 1, 2, 3, 4)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 1, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->shape.rank, 0);
	EXPECT_FLOATS(out[0], 5);
	free_all(out, 1);
	node_init(&t, "Einsum", 12);
	attr_string(&t, "equation", "ii->i");
	cr_assert_eq(run_op(&t, in, 1, 1, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], 1, 4);
	free_all(in, 1);
	free_all(out, 1);
}

/* "...ij,jk" implicit: output "...ik"; the second operand has no batch. */
Test(extra, einsum_ellipsis_implicit)
{
	test_node t;
	node_init(&t, "Einsum", 12);
	attr_string(&t, "equation", "...ij,jk");
	mc_tensor *in[2] = {T3(MC_DOUBLE, 2, 1, 2, 1, 2, 3, 4), T2(MC_DOUBLE, 2, 1, 1, 1)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 2, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->shape.rank, 3);
	cr_assert_eq(out[0]->shape.dims[0], 2);
	EXPECT_FLOATS(out[0], 3, 7);
	free_all(in, 2);
	free_all(out, 1);
}

Test(extra, einsum_size_mismatch)
{
	test_node t;
	node_init(&t, "Einsum", 12);
	attr_string(&t, "equation", "ij,jk->ik");
	mc_tensor *in[2] = {T2(MC_FLOAT, 1, 2, 1, 2), T2(MC_FLOAT, 3, 1, 1, 2, 3)};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&t, in, 2, 1, out), 0);
	expect_error("label 'j' has sizes 2 and 3");
	free_all(in, 2);
}

Test(extra, einsum_malformed_equation)
{
	test_node t;
	node_init(&t, "Einsum", 12);
	attr_string(&t, "equation", "i..j->ij");
	mc_tensor *in[1] = {T2(MC_FLOAT, 1, 1, 1)};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&t, in, 1, 1, out), 0);
	expect_error("malformed ellipsis");
	free_all(in, 1);
}

/* ---- RMSNormalization, Swish ---- */

Test(extra, rms_normalization)
{
	test_node t;
	node_init(&t, "RMSNormalization", 23);
	attr_float(&t, "epsilon", 0);
	mc_tensor *in[2] = {T2(MC_FLOAT, 2, 2, 3, 4, 0, 2), T1(MC_FLOAT, 2, 1, 2)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 2, 1, out), 0, "%s", last_error);
	double r = sqrt(12.5);
	EXPECT_FLOATS(out[0], 3 / r, 8 / r, 0, 2 * 2 / sqrt(2));
	free_all(in, 2);
	free_all(out, 1);
}

Test(extra, swish_alpha)
{
	test_node t;
	node_init(&t, "Swish", 24);
	attr_float(&t, "alpha", 2);
	mc_tensor *in[1] = {T1(MC_FLOAT, 2, 1, -3)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 1, 1, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], 1 / (1 + exp(-2.0)), -3 / (1 + exp(6.0)));
	free_all(in, 1);
	free_all(out, 1);
}

/* ---- Attention ---- */

/* One head of size 1, two queries and keys; causal: query 0 sees key 0,
 * query 1 weighs scores [0, ln 2] as [1/3, 2/3]. */
Test(extra, attention_causal_by_hand)
{
	test_node t;
	node_init(&t, "Attention", 23);
	attr_int(&t, "is_causal", 1);
	attr_int(&t, "qk_matmul_output_mode", 3);
	mc_tensor *in[3] = {T4(MC_FLOAT, 1, 1, 2, 1, 1, 1), T4(MC_FLOAT, 1, 1, 2, 1, 0, log(2.0)),
	                    T4(MC_FLOAT, 1, 1, 2, 1, 3, 6)};
	mc_tensor *out[4];
	cr_assert_eq(run_op(&t, in, 3, 4, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], 3, 5);
	EXPECT_FLOATS(out[3], 1, 0, 1.0 / 3, 2.0 / 3);
	free_all(in, 3);
	free_all(out, 4);
}

/* A zero query averages the values, past included; present = past ++ new. */
Test(extra, attention_past_and_present)
{
	test_node t;
	node_init(&t, "Attention", 23);
	mc_tensor *in[6] = {T4(MC_FLOAT, 1, 1, 1, 1, 0), T4(MC_FLOAT, 1, 1, 1, 1, 2),
	                    T4(MC_FLOAT, 1, 1, 1, 1, 1), NULL, T4(MC_FLOAT, 1, 1, 1, 1, 7),
	                    T4(MC_FLOAT, 1, 1, 1, 1, 5)};
	mc_tensor *out[3];
	cr_assert_eq(run_op(&t, in, 6, 3, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], 3);
	EXPECT_FLOATS(out[1], 7, 2);
	EXPECT_FLOATS(out[2], 5, 1);
	free_all(in, 6);
	free_all(out, 3);
}

Test(extra, attention_fully_masked_row_is_zero)
{
	test_node t;
	node_init(&t, "Attention", 23);
	mc_tensor *in[4] = {T4(MC_FLOAT, 1, 1, 1, 1, 1), T4(MC_FLOAT, 1, 1, 1, 1, 1),
	                    T4(MC_FLOAT, 1, 1, 1, 1, 9), T2(MC_BOOL, 1, 1, 0)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 4, 1, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], 0);
	free_all(in, 4);
	free_all(out, 1);
}

Test(extra, attention_3d_needs_head_counts)
{
	test_node t;
	node_init(&t, "Attention", 23);
	mc_tensor *in[3] = {T3(MC_FLOAT, 1, 1, 2, 1, 1), T3(MC_FLOAT, 1, 1, 2, 1, 1),
	                    T3(MC_FLOAT, 1, 1, 2, 1, 1)};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&t, in, 3, 1, out), 0);
	expect_error("q_num_heads");
	free_all(in, 3);
}

/* ---- RotaryEmbedding ---- */

Test(extra, rotary_embedding_rotates_pairs)
{
	test_node t;
	node_init(&t, "RotaryEmbedding", 23);
	double th = 0.3;
	mc_tensor *in[4] = {T4(MC_FLOAT, 1, 1, 1, 2, 1, 2), T2(MC_FLOAT, 2, 1, 1, cos(th)),
	                    T2(MC_FLOAT, 2, 1, 0, sin(th)), T2(MC_INT64, 1, 1, 1)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 4, 1, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], cos(th) - 2 * sin(th), sin(th) + 2 * cos(th));
	free_all(in, 4);
	free_all(out, 1);
}

Test(extra, rotary_embedding_position_out_of_range)
{
	test_node t;
	node_init(&t, "RotaryEmbedding", 23);
	mc_tensor *in[4] = {T4(MC_FLOAT, 1, 1, 1, 2, 1, 2), T2(MC_FLOAT, 2, 1, 1, 1),
	                    T2(MC_FLOAT, 2, 1, 0, 0), T2(MC_INT64, 1, 1, 2)};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&t, in, 4, 1, out), 0);
	expect_error("position id 2");
	free_all(in, 4);
}

/* ---- GridSample, RoiAlign ---- */

static void grid_sample_case(const char *mode, double want)
{
	test_node t;
	node_init(&t, "GridSample", 22);
	attr_string(&t, "mode", mode);
	mc_tensor *in[2] = {T4(MC_FLOAT, 1, 1, 2, 2, 1, 2, 3, 4), T4(MC_FLOAT, 1, 1, 1, 2, 0, 0)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 2, 1, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], want);
	free_all(in, 2);
	free_all(out, 1);
}

/* The centre of a 2x2 image: pixel coordinate (0.5, 0.5). */
Test(extra, grid_sample_linear_centre) { grid_sample_case("linear", 2.5); }
Test(extra, grid_sample_nearest_centre) { grid_sample_case("nearest", 1); }

Test(extra, grid_sample_old_mode_names)
{
	test_node t;
	node_init(&t, "GridSample", 16);
	attr_string(&t, "mode", "linear");
	mc_tensor *in[2] = {T4(MC_FLOAT, 1, 1, 1, 1, 1), T4(MC_FLOAT, 1, 1, 1, 2, 0, 0)};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&t, in, 2, 1, out), 0);
	expect_error("bilinear");
	free_all(in, 2);
}

Test(extra, roi_align_one_sample)
{
	test_node t;
	node_init(&t, "RoiAlign", 16);
	attr_string(&t, "coordinate_transformation_mode", "output_half_pixel");
	attr_int(&t, "sampling_ratio", 1);
	mc_tensor *in[3] = {T4(MC_FLOAT, 1, 1, 2, 2, 1, 2, 3, 4), T2(MC_FLOAT, 1, 4, 0, 0, 1, 1),
	                    T1(MC_INT64, 1, 0)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 3, 1, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], 2.5);
	free_all(in, 3);
	free_all(out, 1);
}

Test(extra, roi_align_bad_batch_index)
{
	test_node t;
	node_init(&t, "RoiAlign", 16);
	mc_tensor *in[3] = {T4(MC_FLOAT, 1, 1, 2, 2, 1, 2, 3, 4), T2(MC_FLOAT, 1, 4, 0, 0, 1, 1),
	                    T1(MC_INT64, 1, 3)};
	mc_tensor *out[1];
	cr_assert_neq(run_op(&t, in, 3, 1, out), 0);
	expect_error("batch index 3");
	free_all(in, 3);
}

/* ---- Det ---- */

Test(extra, det_batched_with_pivoting)
{
	test_node t;
	node_init(&t, "Det", 22);
	mc_tensor *in[1] = {T3(MC_DOUBLE, 2, 3, 3, 2, 0, 1, 1, 3, 2, 1, 1, 2,
	                       0, 1, 0, 1, 0, 0, 0, 0, 1)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 1, 1, out), 0, "%s", last_error);
	cr_assert_eq(out[0]->shape.rank, 1);
	EXPECT_FLOATS(out[0], 6, -1);
	free_all(in, 1);
	free_all(out, 1);
}

/* ---- CenterCropPad, Col2Im ---- */

Test(extra, center_crop_pad)
{
	test_node t;
	node_init(&t, "CenterCropPad", 18);
	mc_tensor *in[2] = {T1(MC_FLOAT, 4, 1, 2, 3, 4), T1(MC_INT64, 1, 2)};
	mc_tensor *out[1];
	cr_assert_eq(run_op_k(&t, in, 2, 1, out, true), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], 2, 3);
	free_all(out, 1);
	mc_set_i(in[1], 0, 7);
	cr_assert_eq(run_op_k(&t, in, 2, 1, out, true), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], 0, 1, 2, 3, 4, 0, 0);
	free_all(out, 1);
	cr_assert_neq(run_op(&t, in, 2, 1, out), 0);
	expect_error("not supported");
	free_all(in, 2);
}

/* Two overlapping 1x2 blocks on a 1x3 image: the middle pixel sums both. */
Test(extra, col2im_overlap_sums)
{
	test_node t;
	node_init(&t, "Col2Im", 18);
	mc_tensor *in[3] = {T3(MC_FLOAT, 1, 2, 2, 1, 2, 3, 4), T1(MC_INT64, 2, 1, 3),
	                    T1(MC_INT64, 2, 1, 2)};
	mc_tensor *out[1];
	cr_assert_eq(run_op_k(&t, in, 3, 1, out, true), 0, "%s", last_error);
	cr_assert_eq(out[0]->shape.rank, 4);
	cr_assert_eq(out[0]->shape.dims[3], 3);
	EXPECT_FLOATS(out[0], 1, 5, 4);
	free_all(in, 3);
	free_all(out, 1);
}

/* ---- data-dependent shapes ---- */

Test(extra, nonzero_constant_and_runtime)
{
	test_node t;
	node_init(&t, "NonZero", 13);
	mc_tensor *in[1] = {T2(MC_FLOAT, 2, 2, 1, 0, 0, 3)};
	mc_tensor *out[1];
	cr_assert_eq(run_op_k(&t, in, 1, 1, out, true), 0, "%s", last_error);
	cr_assert_eq(out[0]->shape.dims[0], 2);
	cr_assert_eq(out[0]->shape.dims[1], 2);
	EXPECT_INTS(out[0], 0, 1, 0, 1);
	free_all(out, 1);
	cr_assert_neq(run_op(&t, in, 1, 1, out), 0);
	expect_error("depends on its data");
	free_all(in, 1);
}

static void unique_case(int64_t sorted, const int64_t *y, const int64_t *idx, const int64_t *inv,
                        const int64_t *cnt)
{
	test_node t;
	node_init(&t, "Unique", 11);
	attr_int(&t, "sorted", sorted);
	mc_tensor *in[1] = {T1(MC_INT64, 5, 2, 1, 1, 3, 2)};
	mc_tensor *out[4];
	cr_assert_eq(run_op_k(&t, in, 1, 4, out, true), 0, "%s", last_error);
	expect_ints(out[0], y, 3);
	expect_ints(out[1], idx, 3);
	expect_ints(out[2], inv, 5);
	expect_ints(out[3], cnt, 3);
	free_all(in, 1);
	free_all(out, 4);
}

Test(extra, unique_sorted)
{
	unique_case(1, (int64_t[]){1, 2, 3}, (int64_t[]){1, 0, 3}, (int64_t[]){1, 0, 0, 2, 1},
	            (int64_t[]){2, 2, 1});
}

Test(extra, unique_first_occurrence_order)
{
	unique_case(0, (int64_t[]){2, 1, 3}, (int64_t[]){0, 1, 3}, (int64_t[]){0, 1, 1, 2, 0},
	            (int64_t[]){2, 2, 1});
}

/* Box 1 overlaps box 0 with IoU 0.9 / 1.1 and is suppressed. */
Test(extra, non_max_suppression)
{
	test_node t;
	node_init(&t, "NonMaxSuppression", 11);
	mc_tensor *in[5] = {
		T3(MC_FLOAT, 1, 3, 4, 0, 0, 1, 1, 0, 0.1, 1, 1.1, 0, 2, 1, 3),
		T3(MC_FLOAT, 1, 1, 3, 0.9, 0.8, 0.7), T1(MC_INT64, 1, 10), T1(MC_FLOAT, 1, 0.5),
		T1(MC_FLOAT, 1, 0.0),
	};
	mc_tensor *out[1];
	cr_assert_eq(run_op_k(&t, in, 5, 1, out, true), 0, "%s", last_error);
	cr_assert_eq(out[0]->shape.dims[0], 2);
	EXPECT_INTS(out[0], 0, 0, 0, 0, 0, 2);
	free_all(in, 5);
	free_all(out, 1);
}

Test(extra, center_crop_pad_negative_axis)
{
	test_node t;
	node_init(&t, "CenterCropPad", 18);
	int64_t axes[1] = {-1};
	attr_ints(&t, "axes", axes, 1);
	mc_tensor *in[2] = {T2(MC_INT32, 2, 3, 1, 2, 3, 4, 5, 6), T1(MC_INT64, 1, 1)};
	mc_tensor *out[1];
	cr_assert_eq(run_op_k(&t, in, 2, 1, out, true), 0, "%s", last_error);
	cr_assert_eq(out[0]->shape.dims[0], 2);
	EXPECT_INTS(out[0], 2, 5);
	free_all(in, 2);
	free_all(out, 1);
}

/* Empty images: nothing to sample, outputs are zero, nothing is read. */
Test(extra, empty_images_sample_zero)
{
	test_node t;
	node_init(&t, "GridSample", 20);
	mc_tensor *in[3] = {tensor(MC_FLOAT, 4, (int64_t[]){1, 1, 0, 2}, NULL),
	                    T4(MC_FLOAT, 1, 1, 1, 2, 0, 0)};
	mc_tensor *out[1];
	cr_assert_eq(run_op(&t, in, 2, 1, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], 0);
	free_all(in, 2);
	free_all(out, 1);
	node_init(&t, "RoiAlign", 16);
	in[0] = tensor(MC_FLOAT, 4, (int64_t[]){1, 1, 0, 0}, NULL);
	in[1] = T2(MC_FLOAT, 1, 4, 0, 0, 1, 1);
	in[2] = T1(MC_INT64, 1, 0);
	cr_assert_eq(run_op(&t, in, 3, 1, out), 0, "%s", last_error);
	EXPECT_FLOATS(out[0], 0);
	free_all(in, 3);
	free_all(out, 1);
}
