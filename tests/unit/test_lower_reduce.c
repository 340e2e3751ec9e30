/* Lowerings of the reduce family (aot/lower_reduce.c), end to end: a tiny
 * model is compiled to C with its test harness, built with the system's C
 * compiler (-std=c99 -Wall -Wextra -Werror) and run; outputs and the run
 * status are checked against numbers worked out here. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../../aot/aot.h"
#include "compile_helpers.h"
#include "model_builder.h"

#define F ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define I64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64
#define I32 ONNX__TENSOR_PROTO__DATA_TYPE__INT32

typedef struct {
	char *dir;
	int status;          /* the harness's exit status: the run status */
	char source[1 << 16];/* the start of m.c, for checks on the kernels */
} run_result;

static void read_bytes(const char *path, void *buf, size_t len)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot open %s", path);
	size_t got = fread(buf, 1, len, f);
	fclose(f);
	cr_assert_eq(got, len, "%s: %zu bytes, expected %zu", path, got, len);
}

/* Compiles model b, builds it and runs it on the given raw inputs. */
static void compile_and_run(mb *b, int n_in, const void *const *in, const size_t *in_len,
                            run_result *r)
{
	char path[512], cmd[2048];
	memset(r, 0, sizeof *r);
	r->dir = make_temp_dir();
	snprintf(path, sizeof path, "%s/model.onnx", r->dir);
	cr_assert_eq(mb_write(b, path), 0);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "m";
	o.harness = true;
	char out[512];
	snprintf(out, sizeof out, "%s/out", r->dir);
	diag_capture();
	cr_assert_eq(mc_compile(path, out, &o), 0, "compile failed: %s", diag_all());
	snprintf(cmd, sizeof cmd,
	         "cd '%s' && cc -std=c99 -O1 -Wall -Wextra -Werror m.c m_weights.c m_main.c -o m_main -lm",
	         out);
	cr_assert_eq(system(cmd), 0, "the generated code does not build");
	int len = snprintf(cmd, sizeof cmd, "cd '%s' && ./m_main '%s'", out, out);
	for (int i = 0; i < n_in; i++) {
		snprintf(path, sizeof path, "%s/in%d.bin", r->dir, i);
		cr_assert_eq(write_file(path, in[i], in_len[i]), 0);
		len += snprintf(cmd + len, sizeof cmd - (size_t)len, " '%s'", path);
	}
	snprintf(cmd + len, sizeof cmd - (size_t)len, " 2>/dev/null");
	int st = system(cmd);
	cr_assert(WIFEXITED(st));
	r->status = WEXITSTATUS(st);
	snprintf(path, sizeof path, "%s/m.c", out);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f);
	size_t got = fread(r->source, 1, sizeof r->source - 1, f);
	r->source[got] = 0;
	fclose(f);
}

static void output(const run_result *r, int k, void *buf, size_t len)
{
	char path[512];
	snprintf(path, sizeof path, "%s/out/output_%d.bin", r->dir, k);
	read_bytes(path, buf, len);
}

static void done(run_result *r, mb *b)
{
	rm_tree(r->dir);
	free(r->dir);
	mb_free(b);
}

static void assert_close(const float *got, const double *want, int n)
{
	for (int i = 0; i < n; i++) {
		if (isnan(want[i])) {
			cr_assert(isnan(got[i]), "element %d: %g, expected NaN", i, got[i]);
			continue;
		}
		cr_assert(fabs(got[i] - want[i]) <= 1e-5 + 1e-5 * fabs(want[i]),
		          "element %d: %.9g, expected %.9g", i, got[i], want[i]);
	}
}

Test(lower_reduce, reduce_sum_over_a_constant_axes_input)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "2,3,4");
	Onnx__TensorProto *axes = mb_tensor(b, "axes", I64, "1");
	mb_int64_data(b, axes, (int64_t[]){1}, 1);
	mb_initializer(b, g, axes);
	Onnx__NodeProto *n = mb_node(b, g, "ReduceSum", "r", "x,axes", "y");
	mb_attr_int(b, n, "keepdims", 0);
	mb_output(b, g, "y");
	float x[24], y[8];
	double want[8] = {0};
	for (int i = 0; i < 24; i++)
		x[i] = (float)(i * i % 7) - 2.5f;
	for (int a = 0; a < 2; a++)
		for (int j = 0; j < 3; j++)
			for (int k = 0; k < 4; k++)
				want[a * 4 + k] += x[(a * 3 + j) * 4 + k];
	run_result r;
	compile_and_run(b, 1, (const void *[]){x}, (size_t[]){sizeof x}, &r);
	cr_assert_eq(r.status, 0);
	output(&r, 0, y, sizeof y);
	assert_close(y, want, 8);
	done(&r, b);
}

Test(lower_reduce, reduce_max_keeps_nan_and_min_of_ints)
{
	mb *b = mb_new(18);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "2,3");
	mb_input(b, g, "i", I32, "2,3");
	mb_node(b, g, "ReduceMax", "mx", "x", "y");
	Onnx__NodeProto *n = mb_node(b, g, "ReduceMin", "mn", "i", "z");
	mb_attr_int(b, n, "keepdims", 0);
	mb_output(b, g, "y");
	mb_output(b, g, "z");
	float x[6] = {1, NAN, 3, -4, 5, 6}, y[1];
	int32_t i[6] = {7, -3, 9, 2147483647, -2147483647 - 1, 0}, z[1];
	run_result r;
	compile_and_run(b, 2, (const void *[]){x, i}, (size_t[]){sizeof x, sizeof i}, &r);
	cr_assert_eq(r.status, 0);
	output(&r, 0, y, sizeof y);
	output(&r, 1, z, sizeof z);
	cr_assert(isnan(y[0]), "ReduceMax gave %g, expected NaN", y[0]);
	cr_assert_eq(z[0], INT32_MIN);
	done(&r, b);
}

Test(lower_reduce, softmax_takes_a_fused_add_epilogue)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "2,3");
	mb_init_floats(b, g, "bias", "3", (float[]){10, 20, 30}, 3);
	mb_node(b, g, "Softmax", "sm", "x", "s");
	mb_node(b, g, "Add", "add", "s,bias", "y");
	mb_output(b, g, "y");
	float x[6] = {1, 2, 3, -1, 0, 1000}, y[6];
	double want[6];
	for (int row = 0; row < 2; row++) {
		double mx = -INFINITY, sum = 0;
		for (int k = 0; k < 3; k++)
			mx = fmax(mx, x[row * 3 + k]);
		for (int k = 0; k < 3; k++)
			sum += exp(x[row * 3 + k] - mx);
		for (int k = 0; k < 3; k++)
			want[row * 3 + k] = exp(x[row * 3 + k] - mx) / sum + 10 * (k + 1);
	}
	run_result r;
	compile_and_run(b, 1, (const void *[]){x}, (size_t[]){sizeof x}, &r);
	cr_assert_eq(r.status, 0);
	output(&r, 0, y, sizeof y);
	assert_close(y, want, 6);
	cr_assert_not_null(strstr(r.source, "Softmax 'sm' + Add 'add'"), "Add was not fused");
	done(&r, b);
}

/* Softmax and LogSoftmax along rows of 75 (four 16-lane vectors and a
 * tail, nine 8-lane ones and a tail; rows of 64 or more go in vectors)
 * and LayerNormalization along rows of 37 and 8, with a fused Mul
 * epilogue, on the vector ISAs; compared with the interpreter. */
Test(lower_reduce, softmax_and_layer_norm_rows_in_vectors)
{
	static const char *const isas[] = { "avx2", "avx512" };
	for (int i = 0; i < 2; i++) {
		mb *b = mb_new(17);
		Onnx__GraphProto *g = mb_main(b);
		mb_input(b, g, "xs", F, "3,5,75");
		mb_input(b, g, "x", F, "3,5,37");
		mb_input(b, g, "z", F, "4,8");
		mb_input(b, g, "zs", F, "2,64");
		mb_init_floats(b, g, "two", "1", (float[]){2}, 1);
		mb_node(b, g, "Softmax", "sm", "xs", "s");
		mb_node(b, g, "Mul", "mul", "s,two", "y");
		mb_node(b, g, "LogSoftmax", "lsm", "zs", "w");
		float gamma[37], beta[37];
		for (int k = 0; k < 37; k++) {
			gamma[k] = 0.5f + 0.03f * (float)k;
			beta[k] = 0.1f * (float)(k % 5) - 0.2f;
		}
		mb_init_floats(b, g, "gamma", "37", gamma, 37);
		mb_init_floats(b, g, "beta", "37", beta, 37);
		mb_node(b, g, "LayerNormalization", "ln", "x,gamma,beta", "u");
		mb_init_floats(b, g, "gamma8", "8", gamma, 8);
		mb_node(b, g, "LayerNormalization", "ln8", "z,gamma8", "v");
		mb_output(b, g, "y");
		mb_output(b, g, "w");
		mb_output(b, g, "u");
		mb_output(b, g, "v");
		cr_assert_eq(verify_model_isa(b, isas[i]), 0, "%s", isas[i]);
	}
}

Test(lower_reduce, topk_breaks_ties_by_lower_index)
{
	mb *b = mb_new(11);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "2,5");
	Onnx__TensorProto *k = mb_tensor(b, "k", I64, "1");
	mb_int64_data(b, k, (int64_t[]){3}, 1);
	mb_initializer(b, g, k);
	mb_node(b, g, "TopK", "big", "x,k", "v,i");
	Onnx__NodeProto *n = mb_node(b, g, "TopK", "small", "x,k", "sv,si");
	mb_attr_int(b, n, "largest", 0);
	mb_output(b, g, "v");
	mb_output(b, g, "i");
	mb_output(b, g, "sv");
	mb_output(b, g, "si");
	float x[10] = {1, 3, 3, 2, 3, /**/ 4, NAN, -1, 4, -1}, v[6], sv[6];
	int64_t idx[6], sidx[6];
	run_result r;
	compile_and_run(b, 1, (const void *[]){x}, (size_t[]){sizeof x}, &r);
	cr_assert_eq(r.status, 0);
	output(&r, 0, v, sizeof v);
	output(&r, 1, idx, sizeof idx);
	output(&r, 2, sv, sizeof sv);
	output(&r, 3, sidx, sizeof sidx);
	static const int64_t want_i[6] = {1, 2, 4, 1, 0, 3};  /* NaN ranks highest */
	static const int64_t want_si[6] = {0, 3, 1, 2, 4, 0};
	for (int j = 0; j < 6; j++) {
		cr_assert_eq(idx[j], want_i[j], "largest, place %d: index %lld", j, (long long)idx[j]);
		cr_assert_eq(sidx[j], want_si[j], "smallest, place %d: index %lld", j, (long long)sidx[j]);
		float xv = x[(j / 3) * 5 + want_i[j]], xs = x[(j / 3) * 5 + want_si[j]];
		cr_assert(isnan(xv) ? isnan(v[j]) : v[j] == xv);
		cr_assert_eq(sv[j], xs);
	}
	done(&r, b);
}

Test(lower_reduce, argmax_select_last_index_and_argmin)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "2,4");
	Onnx__NodeProto *n = mb_node(b, g, "ArgMax", "amax", "x", "a");
	mb_attr_int(b, n, "axis", 1);
	mb_attr_int(b, n, "select_last_index", 1);
	n = mb_node(b, g, "ArgMin", "amin", "x", "m");
	mb_attr_int(b, n, "axis", 0);
	mb_attr_int(b, n, "keepdims", 0);
	mb_output(b, g, "a");
	mb_output(b, g, "m");
	float x[8] = {2, 7, 7, 1, /**/ 0, 5, -3, 5};
	int64_t a[2], m[4];
	run_result r;
	compile_and_run(b, 1, (const void *[]){x}, (size_t[]){sizeof x}, &r);
	cr_assert_eq(r.status, 0);
	output(&r, 0, a, sizeof a);
	output(&r, 1, m, sizeof m);
	cr_assert_eq(a[0], 2);
	cr_assert_eq(a[1], 3);
	static const int64_t want_m[4] = {1, 1, 1, 0};
	for (int j = 0; j < 4; j++)
		cr_assert_eq(m[j], want_m[j], "column %d: %lld", j, (long long)m[j]);
	done(&r, b);
}

/* A label outside [0, C) stops the run with MC_STATUS_BAD_INDEX; an
 * ignored one counts for nothing in the mean. */
static mb *nll_model(void)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "3,2");
	mb_input(b, g, "t", I64, "3");
	Onnx__NodeProto *n = mb_node(b, g, "NegativeLogLikelihoodLoss", "nll", "x,t", "y");
	mb_attr_int(b, n, "ignore_index", -1);
	mb_output(b, g, "y");
	return b;
}

Test(lower_reduce, nll_loss_mean_and_bad_label)
{
	float x[6] = {-0.5f, -2, -1, -0.25f, -3, -4}, y[1];
	int64_t good[3] = {1, -1, 0}, bad[3] = {1, 2, 0};
	mb *b = nll_model();
	run_result r;
	compile_and_run(b, 2, (const void *[]){x, good}, (size_t[]){sizeof x, sizeof good}, &r);
	cr_assert_eq(r.status, 0);
	output(&r, 0, y, sizeof y);
	assert_close(y, (double[]){(2.0 + 3.0) / 2}, 1);
	done(&r, b);
	b = nll_model();
	compile_and_run(b, 2, (const void *[]){x, bad}, (size_t[]){sizeof x, sizeof bad}, &r);
	cr_assert_eq(r.status, MC_STATUS_BAD_INDEX, "status %d", r.status);
	done(&r, b);
}

static mb *cumsum_model(void)
{
	mb *b = mb_new(14);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", I32, "2,3");
	mb_input(b, g, "axis", I64, "");
	Onnx__NodeProto *n = mb_node(b, g, "CumSum", "cs", "x,axis", "y");
	mb_attr_int(b, n, "exclusive", 1);
	mb_attr_int(b, n, "reverse", 1);
	mb_output(b, g, "y");
	return b;
}

Test(lower_reduce, cumsum_with_a_run_time_axis)
{
	int32_t x[6] = {1, 2, 3, 4, 5, 6}, y[6];
	int64_t last = -1, zero = 0, bad = 2;
	static const int32_t want_last[6] = {5, 3, 0, 11, 6, 0}, want_zero[6] = {4, 5, 6, 0, 0, 0};
	mb *b = cumsum_model();
	run_result r;
	compile_and_run(b, 2, (const void *[]){x, &last}, (size_t[]){sizeof x, sizeof last}, &r);
	cr_assert_eq(r.status, 0);
	output(&r, 0, y, sizeof y);
	for (int j = 0; j < 6; j++)
		cr_assert_eq(y[j], want_last[j], "axis -1, element %d: %d", j, y[j]);
	done(&r, b);
	b = cumsum_model();
	compile_and_run(b, 2, (const void *[]){x, &zero}, (size_t[]){sizeof x, sizeof zero}, &r);
	cr_assert_eq(r.status, 0);
	output(&r, 0, y, sizeof y);
	for (int j = 0; j < 6; j++)
		cr_assert_eq(y[j], want_zero[j], "axis 0, element %d: %d", j, y[j]);
	done(&r, b);
	b = cumsum_model();
	compile_and_run(b, 2, (const void *[]){x, &bad}, (size_t[]){sizeof x, sizeof bad}, &r);
	cr_assert_eq(r.status, MC_STATUS_BAD_INDEX, "status %d", r.status);
	done(&r, b);
}

Test(lower_reduce, layer_norm_with_mean_and_inv_std_dev)
{
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "2,4");
	mb_init_floats(b, g, "scale", "4", (float[]){1, 2, 0.5f, -1}, 4);
	mb_init_floats(b, g, "bias", "1", (float[]){0.25f}, 1);
	Onnx__NodeProto *n = mb_node(b, g, "LayerNormalization", "ln", "x,scale,bias", "y,mean,inv");
	mb_attr_float(b, n, "epsilon", 1e-3f);
	mb_output(b, g, "y");
	mb_output(b, g, "mean");
	mb_output(b, g, "inv");
	float x[8] = {1, 2, 3, 4, -1, 0, 5, 8}, y[8], mean[2], inv[2];
	static const double scale[4] = {1, 2, 0.5, -1};
	double want[8], want_mean[2], want_inv[2];
	for (int row = 0; row < 2; row++) {
		double m = 0, v = 0;
		for (int k = 0; k < 4; k++)
			m += x[row * 4 + k] / 4.0;
		for (int k = 0; k < 4; k++)
			v += (x[row * 4 + k] - m) * (x[row * 4 + k] - m) / 4.0;
		want_mean[row] = m;
		want_inv[row] = 1 / sqrt(v + (double)1e-3f);
		for (int k = 0; k < 4; k++)
			want[row * 4 + k] = (x[row * 4 + k] - m) * want_inv[row] * scale[k] + 0.25;
	}
	run_result r;
	compile_and_run(b, 1, (const void *[]){x}, (size_t[]){sizeof x}, &r);
	cr_assert_eq(r.status, 0);
	output(&r, 0, y, sizeof y);
	output(&r, 1, mean, sizeof mean);
	output(&r, 2, inv, sizeof inv);
	assert_close(y, want, 8);
	assert_close(mean, want_mean, 2);
	assert_close(inv, want_inv, 2);
	done(&r, b);
}

/* A spatial mean and sum of a channels-last [N, H, W, C] value over a
 * long run (50 x 43 = 2150 rows, 16 slices of 134 and 6 rows left over;
 * 24 channels: a vector and a tail): the slices' sums, then the rows left
 * over; compared with the interpreter. */
Test(lower_reduce, long_spatial_means_in_slices)
{
	static const char *const isas[] = { "avx2", "avx512" };
	for (int i = 0; i < 2; i++) {
		mb *b = mb_new(12); /* ReduceSum's axes an attribute */
		Onnx__GraphProto *g = mb_main(b);
		mb_input(b, g, "x", F, "2,50,43,24");
		Onnx__NodeProto *n = mb_node(b, g, "ReduceMean", "mean", "x", "y");
		mb_attr_ints(b, n, "axes", (int64_t[]){ 1, 2 }, 2);
		n = mb_node(b, g, "ReduceSum", "sum", "x", "z");
		mb_attr_ints(b, n, "axes", (int64_t[]){ 1, 2 }, 2);
		mb_attr_int(b, n, "keepdims", 0);
		mb_output(b, g, "y");
		mb_output(b, g, "z");
		cr_assert_eq(verify_model_isa(b, isas[i]), 0, "%s", isas[i]);
	}
}

/* --threads 2 with the default least work: a squeeze-and-excitation sized
 * mean (14 x 14 rows of 32 channels, little work) still splits its slices
 * (MC_KF_SPLIT_ANY: each worker reads the rows it holds); a mean of 49
 * rows (no slices) does not. */
Test(lower_reduce, small_sliced_means_split_over_the_workers)
{
	static const char *const shapes[] = { "1,14,14,32", "1,7,7,32" };
	for (int i = 0; i < 2; i++) {
		mb *b = mb_new(12);
		Onnx__GraphProto *g = mb_main(b);
		mb_input(b, g, "x", F, shapes[i]);
		Onnx__NodeProto *n = mb_node(b, g, "ReduceMean", "mean", "x", "y");
		mb_attr_ints(b, n, "axes", (int64_t[]){ 1, 2 }, 2);
		mb_output(b, g, "y");
		mc_compile_opts o;
		mc_compile_opts_init(&o);
		o.name = "t";
		o.isa = "avx512";
		o.threads = 2;
		mc_program p;
		mc_graph *gr = program_with(b, &o, &p);
		int splits = 0;
		for (int k = 0; k < p.n_kernels; k++)
			splits += p.kernels[k]->n_splits;
		cr_expect_eq(splits, i == 0 ? 1 : 0, "%s: %d split loop(s)", shapes[i], splits);
		mc_program_free(&p);
		mc_graph_free(gr);
		mb_free(b);
	}
}
