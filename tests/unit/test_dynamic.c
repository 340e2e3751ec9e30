/* --dim NAME=LO..HI (aot/dynamic.c): the polynomials kernels' numbers
 * become, and whole models compiled once for a range of sizes, built and
 * run at several sizes against the interpreter at each. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../aot/aot.h"
#include "compile_helpers.h"
#include "model_builder.h"

Test(dynamic, poly_fit)
{
	int64_t s[40], v[40];
	mc_dyn_poly q;
	for (int i = 0; i < 40; i++)
		s[i] = 16 + 3 * i;
	/* a stride: 256 d + 8 */
	for (int i = 0; i < 40; i++)
		v[i] = 256 * s[i] + 8;
	cr_assert(mc_dyn_fit(s, v, 40, INT32_MAX, &q));
	cr_expect(q.c[2] == 0 && q.c[1] == 256 && q.c[0] == 8 && q.den == 1);
	/* a [heads, d, d] block: 4 d^2 */
	for (int i = 0; i < 40; i++)
		v[i] = 4 * s[i] * s[i];
	cr_assert(mc_dyn_fit(s, v, 40, INT32_MAX, &q));
	for (int i = 0; i < 40; i++)
		cr_expect_eq(mc_dyn_poly_at(&q, s[i]), v[i]);
	/* exact at these sizes only through a division: (d - 1) / 3 */
	for (int i = 0; i < 40; i++)
		v[i] = (s[i] - 1) / 3;
	cr_assert(mc_dyn_fit(s, v, 40, INT32_MAX, &q));
	cr_expect_eq(q.den, 3);
	for (int i = 0; i < 40; i++)
		cr_expect_eq(mc_dyn_poly_at(&q, s[i]), v[i]);
	/* a constant */
	for (int i = 0; i < 40; i++)
		v[i] = 77;
	cr_assert(mc_dyn_fit(s, v, 40, INT32_MAX, &q));
	cr_expect(mc_dyn_poly_const(&q) && q.c[0] == 77);
	/* a constant past the index type stays the literal it is */
	for (int i = 0; i < 40; i++)
		v[i] = INT64_C(1) << 40;
	cr_assert(mc_dyn_fit(s, v, 40, INT32_MAX, &q));
	cr_expect(mc_dyn_poly_const(&q) && q.c[0] == INT64_C(1) << 40);
	/* no polynomial: a chunk of 8192 / d rows, a remainder */
	for (int i = 0; i < 40; i++)
		v[i] = 8192 / s[i];
	cr_expect(!mc_dyn_fit(s, v, 40, INT32_MAX, &q));
	for (int i = 0; i < 40; i++)
		v[i] = s[i] % 6;
	cr_expect(!mc_dyn_fit(s, v, 40, INT32_MAX, &q));
	/* past the index type: refused, not wrapped */
	for (int i = 0; i < 40; i++)
		v[i] = 1000000 * s[i] * s[i];
	cr_expect(!mc_dyn_fit(s, v, 40, INT32_MAX, &q));
	cr_expect(mc_dyn_fit(s, v, 40, INT64_MAX / 4, &q));
}

/* ---- whole models ---- */
static void fill(float *x, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		x[i] = (float)((seed >> 9) % 2001) / 1000.0f - 1.0f;
	}
}

static Onnx__TensorProto *weights(mb *b, Onnx__GraphProto *g, const char *name, const char *dims, size_t n,
                                  unsigned seed)
{
	float *v = malloc(n * sizeof *v);
	fill(v, n, seed);
	for (size_t i = 0; i < n; i++)
		v[i] *= 0.3f;
	Onnx__TensorProto *t = mb_init_floats(b, g, name, dims, v, n);
	free(v);
	return t;
}

/* An encoder layer of a dynamic sequence [1, seq, 16]: a position table
 * sliced to the sequence through Shape and Gather, projections, scores
 * [1, seq, seq], softmax over the keys, and their product with V. The
 * queries and keys are 256 wide, so that the scores' rows come in several
 * chunks (aot/kern_gemm.c) from 24 rows on. */
static mb *encoder(void)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "1,seq,16");
	weights(b, g, "pos", "40,16", 40 * 16, 1);
	weights(b, g, "wq", "16,256", 16 * 256, 2);
	weights(b, g, "wk", "16,256", 16 * 256, 3);
	weights(b, g, "wv", "16,24", 16 * 24, 4);
	weights(b, g, "bv", "24", 24, 5);
	int64_t one = 1, zero = 0;
	mb_init_ints(b, g, "one", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "", &one, 1);
	mb_init_ints(b, g, "zero1", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "1", &zero, 1);
	mb_init_ints(b, g, "axes0", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "1", &zero, 1);
	mb_node(b, g, "Shape", "shape", "x", "s");
	mb_node(b, g, "Gather", "len", "s,one", "n");
	mb_node(b, g, "Unsqueeze", "len1", "n,axes0", "n1");
	mb_node(b, g, "Slice", "pos_slice", "pos,zero1,n1,axes0", "p");
	mb_node(b, g, "Add", "add_pos", "x,p", "h");
	mb_node(b, g, "MatMul", "q", "h,wq", "q");
	mb_node(b, g, "MatMul", "k", "h,wk", "k");
	mb_node(b, g, "MatMul", "v", "h,wv", "v0");
	mb_node(b, g, "Add", "v_bias", "v0,bv", "v");
	Onnx__NodeProto *t = mb_node(b, g, "Transpose", "kt", "k", "kt");
	int64_t perm[] = { 0, 2, 1 };
	mb_attr_ints(b, t, "perm", perm, 3);
	mb_node(b, g, "MatMul", "scores", "q,kt", "sc");
	Onnx__NodeProto *sm = mb_node(b, g, "Softmax", "softmax", "sc", "pr");
	mb_attr_int(b, sm, "axis", -1);
	mb_node(b, g, "MatMul", "attend", "pr,v", "y");
	mb_output(b, g, "y");
	return b;
}

/* A CNN of a dynamic batch [n, 3, 9, 9]: two convolutions (one strided),
 * a global pool and a classifier. */
static mb *cnn(void)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "n,3,9,9");
	weights(b, g, "w1", "16,3,3,3", 16 * 27, 6);
	weights(b, g, "b1", "16", 16, 7);
	weights(b, g, "w2", "32,16,3,3", 32 * 16 * 9, 8);
	weights(b, g, "wf", "10,32", 320, 9);
	weights(b, g, "bf", "10", 10, 10);
	int64_t pads[] = { 1, 1, 1, 1 }, strides[] = { 2, 2 };
	Onnx__NodeProto *c1 = mb_node(b, g, "Conv", "conv1", "x,w1,b1", "c1");
	mb_attr_ints(b, c1, "pads", pads, 4);
	mb_node(b, g, "Relu", "relu1", "c1", "r1");
	Onnx__NodeProto *c2 = mb_node(b, g, "Conv", "conv2", "r1,w2", "c2");
	mb_attr_ints(b, c2, "strides", strides, 2);
	mb_node(b, g, "Relu", "relu2", "c2", "r2");
	mb_node(b, g, "GlobalAveragePool", "pool", "r2", "gp");
	mb_node(b, g, "Flatten", "flat", "gp", "f");
	Onnx__NodeProto *fc = mb_node(b, g, "Gemm", "fc", "f,wf,bf", "y");
	mb_attr_int(b, fc, "transB", 1);
	mb_output(b, g, "y");
	return b;
}

typedef struct {
	char dir[64];
	char *model;
	const char *param;
} dyn_case;

/* b compiled for param in [lo, hi] into dir/out with the test driver and
 * built, for target ("c" or "llvm"); 0, or -1 after a failed expectation. */
static int compile_dynamic_for(dyn_case *c, mb *b, const char *param, int64_t lo, int64_t hi,
                               const char *target)
{
	snprintf(c->dir, sizeof c->dir, "/tmp/mc_dynamic_XXXXXX");
	cr_assert_not_null(mkdtemp(c->dir));
	c->model = save_model(b, c->dir, "m.onnx");
	c->param = param;
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.harness = true;
	o.no_stack_usage = true;
	bool llvm = strcmp(target, "llvm") == 0;
	o.target = target;
	if (llvm) /* the kernels tiled for this machine's CPU */
		o.cpu = "native";
	else
		o.isa = host_runs_isa("avx512") ? "avx512" : host_runs_isa("avx2") ? "avx2" : "generic";
	mc_dim_pin pin = { param, lo, hi };
	o.import.dim_pins = &pin;
	o.import.n_dim_pins = 1;
	char out[128], cmd[512];
	snprintf(out, sizeof out, "%s/out", c->dir);
	if (mc_compile(c->model, out, &o) != 0) {
		cr_expect_fail("mc_compile with --dim %s=%lld..%lld failed", param, (long long)lo, (long long)hi);
		return -1;
	}
	if (llvm)
		snprintf(cmd, sizeof cmd, "cd '%s' && cc -std=c99 -O1 -Wall -Wextra -Werror t_main.c libt.a -lm "
		         "-o main > build.log 2>&1", out);
	else
		snprintf(cmd, sizeof cmd,
		         "cd '%s' && cc -std=c99 -O1 -march=native -Wall -Wextra -Werror t.c t_weights.c t_main.c -lm "
		         "-o main > build.log 2>&1", out);
	int rc = system(cmd);
	cr_expect_eq(rc, 0, "the dynamic library did not build (%s/build.log)", out);
	return rc == 0 ? 0 : -1;
}

static int compile_dynamic(dyn_case *c, mb *b, const char *param, int64_t lo, int64_t hi)
{
	return compile_dynamic_for(c, b, param, lo, hi, "c");
}

/* Runs the built driver at size d on x (its bytes); the exit status. */
static int run_at(const dyn_case *c, int64_t d, const mc_tensor *x, mc_tensor *y)
{
	char in[128], cmd[512];
	snprintf(in, sizeof in, "%s/x.bin", c->dir);
	FILE *f = fopen(in, "wb");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(x->data, 1, x->nbytes, f), x->nbytes);
	fclose(f);
	snprintf(cmd, sizeof cmd, "cd '%s' && mkdir -p res && out/main res --dim %s=%lld x.bin > run.log 2>&1",
	         c->dir, c->param, (long long)d);
	int st = system(cmd);
	st = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	if (st != 0 || !y)
		return st;
	char path[128];
	snprintf(path, sizeof path, "%s/res/output_0.bin", c->dir);
	f = fopen(path, "rb");
	cr_assert_not_null(f, "no output at %s=%lld", c->param, (long long)d);
	size_t got = fread(y->data, 1, y->nbytes, f);
	int extra = fgetc(f);
	fclose(f);
	cr_expect(got == y->nbytes && extra == EOF, "output at %s=%lld: %zu bytes, expected %zu", c->param,
	          (long long)d, got, y->nbytes);
	return 0;
}

/* The compiled library at size d against the interpreter on the model
 * pinned at d. */
static void check_size(const dyn_case *c, int64_t d)
{
	mc_dim_pin pin = { c->param, d, 0 };
	mc_import_opts io = { .dim_pins = &pin, .n_dim_pins = 1 };
	mc_graph *g = mc_import_file(c->model, &io);
	cr_assert_not_null(g);
	cr_assert_eq(mc_infer_graph(g), 0);
	const mc_value *xv = &g->values[g->inputs[0]];
	mc_tensor *x = mc_tensor_new(xv->dtype, &xv->shape);
	fill(x->data, x->numel, (unsigned)d * 7919u);
	mc_tensor *ref = NULL;
	cr_assert_eq(mc_interp_run(g, &x, &ref, NULL), 0);
	mc_tensor *y = mc_tensor_new(ref->dtype, &ref->shape);
	cr_assert_eq(run_at(c, d, x, y), 0, "the run at %s=%lld failed", c->param, (long long)d);
	const float *a = y->data, *r = ref->data;
	double worst = 0, scale = 0;
	for (size_t i = 0; i < ref->numel; i++) {
		worst = fmax(worst, fabs((double)a[i] - r[i]));
		scale = fmax(scale, fabs((double)r[i]));
	}
	cr_expect(worst <= 1e-4 * scale + 1e-6, "at %s=%lld: max |diff| %g (max |ref| %g)", c->param, (long long)d,
	          worst, scale);
	mc_tensor_free(x);
	mc_tensor_free(y);
	mc_tensor_free(ref);
	mc_graph_free(g);
}

static void remove_case(dyn_case *c)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", c->dir);
	cr_expect_eq(system(cmd), 0);
	free(c->model);
}

Test(dynamic, encoder_sequence_every_size_served, .timeout = 240)
{
	dyn_case c;
	/* the scores' columns, the softmax's rows and probs x V's depth are
	 * the sequence: each binary part of the columns, the vector tails and
	 * a chunk of rows full or not are each met at some of these sizes */
	if (compile_dynamic(&c, encoder(), "seq", 3, 40))
		return;
	int64_t sizes[] = { 3, 4, 5, 11, 16, 17, 19, 24, 25, 31, 36, 40 };
	for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
		check_size(&c, sizes[i]);
	remove_case(&c);
}

/* The same through the llvm target (libt.a, no C of the model): the
 * kernels take the size as their last parameter, the run picks versions
 * from a table, the shape functions are in the object. */
Test(dynamic, llvm_target_every_size_served, .timeout = 240)
{
	if (!mc_llvm_available())
		cr_skip_test("modelc was built without LLVM");
	dyn_case c;
	if (compile_dynamic_for(&c, encoder(), "seq", 3, 40, "llvm"))
		return;
	int64_t sizes[] = { 3, 5, 16, 17, 25, 40 };
	for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
		check_size(&c, sizes[i]);
	mc_shape hi = { .rank = 3, .dims = { 1, 40, 16 } }; /* the driver reads the largest size's bytes */
	mc_tensor *x = mc_tensor_new(MC_FLOAT, &hi);
	cr_expect_eq(run_at(&c, 41, x, NULL), MC_STATUS_BAD_DIM);
	cr_expect_eq(run_at(&c, 2, x, NULL), MC_STATUS_BAD_DIM);
	mc_tensor_free(x);
	remove_case(&c);
	if (compile_dynamic_for(&c, cnn(), "n", 1, 6, "llvm"))
		return;
	for (int64_t d = 1; d <= 6; d++)
		check_size(&c, d);
	remove_case(&c);
}

Test(dynamic, cnn_batch_every_size_served, .timeout = 240)
{
	dyn_case c;
	if (compile_dynamic(&c, cnn(), "n", 1, 6))
		return;
	for (int64_t d = 1; d <= 6; d++)
		check_size(&c, d);
	remove_case(&c);
}

/* Sizes outside the bounds: MODELC_ERR_BAD_DIM (6), nothing run. */
Test(dynamic, size_out_of_bounds_is_a_status, .timeout = 240)
{
	dyn_case c;
	if (compile_dynamic(&c, cnn(), "n", 2, 4))
		return;
	mc_shape s = { .rank = 4, .dims = { 4, 3, 9, 9 } };
	mc_tensor *x = mc_tensor_new(MC_FLOAT, &s);
	cr_expect_eq(run_at(&c, 1, x, NULL), MC_STATUS_BAD_DIM);
	cr_expect_eq(run_at(&c, 5, x, NULL), MC_STATUS_BAD_DIM);
	cr_expect_eq(run_at(&c, -3, x, NULL), MC_STATUS_BAD_DIM);
	cr_expect_eq(run_at(&c, 4, x, NULL), 0);
	mc_tensor_free(x);
	char *h = NULL;
	size_t n = 0;
	char path[128];
	snprintf(path, sizeof path, "%s/out/t.h", c.dir);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	h = calloc(1, 1 << 20);
	n = fread(h, 1, (1 << 20) - 1, f);
	fclose(f);
	cr_expect(n > 0 && strstr(h, "#define T_DIM_0_MIN 2") && strstr(h, "#define T_DIM_0_MAX 4") &&
	          strstr(h, "int t_run_dims(") && !strstr(h, "int t_run("),
	          "the header describes the dimension and declares t_run_dims only");
	free(h);
	remove_case(&c);
}

/* What does not work with a dynamic dimension yet is refused by name. */
Test(dynamic, unsupported_options_refused)
{
	char dir[64];
	snprintf(dir, sizeof dir, "/tmp/mc_dynamic_XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	char *model = save_model(cnn(), dir, "m.onnx");
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.threads = 2;
	mc_dim_pin pin = { "n", 1, 4 };
	o.import.dim_pins = &pin;
	o.import.n_dim_pins = 1;
	char out[128];
	snprintf(out, sizeof out, "%s/out", dir);
	cr_expect_neq(mc_compile(model, out, &o), 0);
	o.threads = 0;
	o.target = "cuda";
	cr_expect_neq(mc_compile(model, out, &o), 0);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
	free(model);
}
