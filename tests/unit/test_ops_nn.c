/* Conv, ConvTranspose, pools, Gemm, MatMul: registry entries called
 * directly on small tensors, against known numbers and naive loops. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelc.h"

/* ---- helpers ---- */

static char last_diag[1024];

static void capture(const char *line, void *user)
{
	(void)user;
	snprintf(last_diag, sizeof last_diag, "%s", line);
}

static void quiet(void)
{
	last_diag[0] = 0;
	mc_set_diag_sink(capture, NULL);
}

TestSuite(ops_nn, .init = quiet);

static mc_attr a_ints(const char *name, int n, const int64_t *v)
{
	return (mc_attr){.name = (char *)name, .type = MC_ATTR_INTS, .n = (size_t)n,
	                 .ints = (int64_t *)v};
}

static mc_attr a_int(const char *name, int64_t v)
{
	return (mc_attr){.name = (char *)name, .type = MC_ATTR_INT, .i = v};
}

static mc_attr a_float(const char *name, double v)
{
	return (mc_attr){.name = (char *)name, .type = MC_ATTR_FLOAT, .f = v};
}

static mc_attr a_str(const char *name, const char *v)
{
	return (mc_attr){.name = (char *)name, .type = MC_ATTR_STRING, .s = (char *)v};
}

static mc_tensor *tensor(mc_dtype t, int rank, const int64_t *dims, const double *v)
{
	mc_shape s = {.rank = rank};
	memcpy(s.dims, dims, (size_t)rank * sizeof *dims);
	mc_tensor *x = mc_tensor_new(t, &s);
	cr_assert(x);
	for (size_t i = 0; v && i < x->numel; i++)
		mc_set_f(x, i, v[i]);
	return x;
}

/* Random values in [-1, 1), from a fixed seed per test. */
static mc_tensor *random_tensor(int rank, const int64_t *dims)
{
	mc_tensor *x = tensor(MC_FLOAT, rank, dims, NULL);
	for (size_t i = 0; i < x->numel; i++)
		mc_set_f(x, i, rand() / (RAND_MAX + 1.0) * 2 - 1);
	return x;
}

/* Runs one op: parse, infer on values typed from the tensors (inputs are
 * constants, as when folding), eval. NULL inputs are omitted optionals.
 * Returns 0, or -1 with the diagnostic in last_diag. */
static int run_op(const char *op, int opset, mc_attr *attrs, int n_attrs,
                  mc_tensor **in, int n_in, mc_tensor **out, int n_out)
{
	const mc_op *e = mc_registry_find(op, opset, NULL);
	cr_assert(e, "%s is not registered at opset %d", op, opset);
	int inputs[8], outputs[8];
	for (int k = 0; k < 8; k++) {
		inputs[k] = k < n_in && in[k] ? k : -1;
		outputs[k] = k;
	}
	mc_node node = {.name = "t", .op_type = (char *)op, .domain = "", .opset = opset,
	                .op = e, .n_inputs = n_in, .n_outputs = n_out, .inputs = inputs,
	                .outputs = outputs, .n_attrs = n_attrs, .attrs = attrs};
	int rc = e->parse ? e->parse(&node) : 0;
	mc_value vin[8] = {{0}}, vout[8] = {{0}};
	const mc_value *pin[8];
	mc_value *pout[8];
	for (int k = 0; k < n_in; k++) {
		pin[k] = NULL;
		if (!in[k])
			continue;
		vin[k] = (mc_value){.name = "in", .kind = MC_VAL_CONST, .dtype = in[k]->dtype,
		                    .shape = in[k]->shape, .typed = true, .konst = in[k]};
		pin[k] = &vin[k];
	}
	for (int k = 0; k < n_out; k++) {
		vout[k].name = "out";
		pout[k] = &vout[k];
		out[k] = NULL;
	}
	if (!rc) {
		mc_infer_ctx ic = {.node = &node, .n_in = n_in, .n_out = n_out, .in = pin,
		                   .out = pout};
		rc = e->infer(&ic);
	}
	if (!rc) {
		for (int k = 0; k < n_out; k++) {
			cr_assert(vout[k].typed);
			out[k] = mc_tensor_new(vout[k].dtype, &vout[k].shape);
		}
		mc_eval_ctx ec = {.node = &node, .n_in = n_in, .n_out = n_out,
		                  .in = (const mc_tensor *const *)in, .out = out};
		rc = e->eval(&ec);
	}
	free(node.params);
	return rc;
}

static void assert_values(const mc_tensor *t, const double *want, size_t n, double tol)
{
	cr_assert_eq(t->numel, n, "got %zu values, want %zu", t->numel, n);
	for (size_t i = 0; i < n; i++)
		cr_assert(fabs(mc_get_f(t, i) - want[i]) <= tol, "value %zu is %g, want %g", i,
		          mc_get_f(t, i), want[i]);
}

static void assert_shape(const mc_tensor *t, int rank, const int64_t *dims)
{
	cr_assert_eq(t->shape.rank, rank);
	for (int i = 0; i < rank; i++)
		cr_assert_eq(t->shape.dims[i], dims[i], "dim %d is %lld, want %lld", i,
		             (long long)t->shape.dims[i], (long long)dims[i]);
}

static void free_all(mc_tensor **t, int n)
{
	for (int i = 0; i < n; i++)
		mc_tensor_free(t[i]);
}

/* ---- Conv ---- */

Test(ops_nn, conv_basic_with_padding)
{
	double x[25], w[9];
	for (int i = 0; i < 25; i++)
		x[i] = i;
	for (int i = 0; i < 9; i++)
		w[i] = 1;
	static const int64_t xd[] = {1, 1, 5, 5}, wd[] = {1, 1, 3, 3}, pads[] = {1, 1, 1, 1};
	mc_tensor *in[] = {tensor(MC_FLOAT, 4, xd, x), tensor(MC_FLOAT, 4, wd, w)}, *out[1];
	mc_attr at[] = {a_ints("pads", 4, pads)};
	cr_assert_eq(run_op("Conv", 11, at, 1, in, 2, out, 1), 0, "%s", last_diag);
	static const double want[] = {12, 21, 27, 33, 24, 33, 54, 63, 72, 51, 63, 99, 108, 117,
	                              81, 93, 144, 153, 162, 111, 72, 111, 117, 123, 84};
	assert_shape(out[0], 4, xd);
	assert_values(out[0], want, 25, 0);
	free_all(in, 2);
	free_all(out, 1);
}

/* Naive convolution over 1 to 3 spatial dims, straight from the
 * definition, with mc_get_f per element. */
static double naive_conv_at(const mc_tensor *x, const mc_tensor *w, int64_t group,
                            const int64_t *s, const int64_t *d, const int64_t *pb,
                            int64_t n, int64_t oc, const int64_t *o)
{
	int nsp = x->shape.rank - 2;
	int64_t cin = x->shape.dims[1], cg = cin / group, mg = w->shape.dims[0] / group;
	int64_t k[3] = {1, 1, 1}, in[3] = {1, 1, 1};
	for (int i = 0; i < nsp; i++) {
		k[i] = w->shape.dims[2 + i];
		in[i] = x->shape.dims[2 + i];
	}
	double acc = 0;
	for (int64_t c = 0; c < cg; c++)
		for (int64_t k0 = 0; k0 < k[0]; k0++)
			for (int64_t k1 = 0; k1 < k[1]; k1++)
				for (int64_t k2 = 0; k2 < k[2]; k2++) {
					int64_t kk[3] = {k0, k1, k2}, pos[3] = {0, 0, 0};
					bool inside = true;
					for (int i = 0; i < nsp; i++) {
						pos[i] = o[i] * s[i] + kk[i] * d[i] - pb[i];
						inside = inside && pos[i] >= 0 && pos[i] < in[i];
					}
					if (!inside)
						continue;
					int64_t ic = oc / mg * cg + c;
					size_t xi = (size_t)((((n * cin + ic) * in[0] + pos[0]) * in[1] + pos[1]) *
					                     in[2] + pos[2]);
					size_t wi = (size_t)((((oc * cg + c) * k[0] + k0) * k[1] + k1) * k[2] + k2);
					acc += mc_get_f(x, xi) * mc_get_f(w, wi);
				}
	return acc;
}

/* Random Conv cases (1-D to 3-D, groups, strides, dilations, asymmetric
 * pads, bias) against the naive definition. */
Test(ops_nn, conv_random_against_naive)
{
	srand(1);
	for (int trial = 0; trial < 40; trial++) {
		int nsp = 1 + trial % 3;
		int64_t group = 1 + rand() % 3, cg = 1 + rand() % 3, mg = 1 + rand() % 2;
		int64_t xd[5] = {1 + rand() % 2, group * cg}, wd[5] = {group * mg, cg}, bd[1] = {group * mg};
		int64_t s[3], d[3], pads[6], k[3];
		for (int i = 0; i < nsp; i++) {
			xd[2 + i] = 3 + rand() % 5;
			k[i] = wd[2 + i] = 1 + rand() % 3;
			s[i] = 1 + rand() % 2;
			d[i] = 1 + rand() % 2;
			pads[i] = rand() % 3;
			pads[nsp + i] = rand() % 3;
			if ((k[i] - 1) * d[i] + 1 > xd[2 + i] + pads[i] + pads[nsp + i])
				d[i] = 1;
		}
		mc_tensor *in[] = {random_tensor(nsp + 2, xd), random_tensor(nsp + 2, wd),
		                   random_tensor(1, bd)};
		mc_tensor *out[1];
		mc_attr at[] = {a_ints("strides", nsp, s), a_ints("dilations", nsp, d),
		                a_ints("pads", 2 * nsp, pads), a_int("group", group),
		                a_ints("kernel_shape", nsp, k)};
		cr_assert_eq(run_op("Conv", 22, at, 5, in, 3, out, 1), 0, "%s", last_diag);
		const mc_tensor *y = out[0];
		int64_t o[3] = {0, 0, 0}, od[3] = {1, 1, 1};
		for (int i = 0; i < nsp; i++) {
			od[i] = (xd[2 + i] + pads[i] + pads[nsp + i] - ((k[i] - 1) * d[i] + 1)) / s[i] + 1;
			cr_assert_eq(y->shape.dims[2 + i], od[i], "trial %d dim %d", trial, i);
		}
		size_t idx = 0;
		for (int64_t n = 0; n < xd[0]; n++)
			for (int64_t oc = 0; oc < wd[0]; oc++)
				for (o[0] = 0; o[0] < od[0]; o[0]++)
					for (o[1] = 0; o[1] < od[1]; o[1]++)
						for (o[2] = 0; o[2] < od[2]; o[2]++, idx++) {
							double want = naive_conv_at(in[0], in[1], group, s, d, pads, n, oc,
							                            o) + mc_get_f(in[2], (size_t)oc);
							cr_assert_float_eq(mc_get_f(y, idx), want, 1e-5,
							                   "trial %d element %zu", trial, idx);
						}
		free_all(in, 3);
		free_all(out, 1);
	}
}

Test(ops_nn, conv_auto_pad_same_and_kernel_from_weights)
{
	/* 1-D, kernel 4 from W, stride 3, input 10: output ceil(10/3) = 4,
	 * total pad (4-1)*3 + 4 - 10 = 3: SAME_UPPER puts 1 before, SAME_LOWER 2 */
	double x[10], w[4] = {1, 10, 100, 1000};
	for (int i = 0; i < 10; i++)
		x[i] = i + 1;
	static const int64_t xd[] = {1, 1, 10}, wd[] = {1, 1, 4}, s[] = {3};
	const char *modes[] = {"SAME_UPPER", "SAME_LOWER"};
	/* SAME_UPPER windows start at -1: [pad,1,2,3] [3..6] [6..9] [9,10,pad,pad] */
	static const double upper_full[] = {1 * 10 + 2 * 100 + 3 * 1000,
	                                    3 + 4 * 10 + 5 * 100 + 6 * 1000,
	                                    6 + 7 * 10 + 8 * 100 + 9 * 1000, 9 + 10 * 10};
	static const double lower_full[] = {1 * 100 + 2 * 1000, 2 + 3 * 10 + 4 * 100 + 5 * 1000,
	                                    5 + 6 * 10 + 7 * 100 + 8 * 1000,
	                                    8 + 9 * 10 + 10 * 100};
	for (int m = 0; m < 2; m++) {
		mc_tensor *in[] = {tensor(MC_FLOAT, 3, xd, x), tensor(MC_FLOAT, 3, wd, w)}, *out[1];
		mc_attr at[] = {a_str("auto_pad", modes[m]), a_ints("strides", 1, s)};
		cr_assert_eq(run_op("Conv", 1, at, 2, in, 2, out, 1), 0, "%s", last_diag);
		assert_values(out[0], m == 0 ? upper_full : lower_full, 4, 1e-3);
		free_all(in, 2);
		free_all(out, 1);
	}
}

Test(ops_nn, conv_rejects_bad_shapes)
{
	static const int64_t xd[] = {1, 3, 5, 5}, wd[] = {4, 2, 3, 3}, big[] = {1, 1, 9, 9};
	mc_tensor *in[] = {tensor(MC_FLOAT, 4, xd, NULL), tensor(MC_FLOAT, 4, wd, NULL)}, *out[1];
	cr_assert_eq(run_op("Conv", 11, NULL, 0, in, 2, out, 1), -1);
	cr_assert(strstr(last_diag, "node 't' (Conv"), "%s", last_diag);
	mc_tensor_free(in[1]);
	in[1] = tensor(MC_FLOAT, 4, big, NULL);
	mc_tensor_free(in[0]);
	static const int64_t x1[] = {1, 1, 5, 5};
	in[0] = tensor(MC_FLOAT, 4, x1, NULL);
	cr_assert_eq(run_op("Conv", 11, NULL, 0, in, 2, out, 1), -1);
	cr_assert(strstr(last_diag, "larger than the padded input"), "%s", last_diag);
	static const int64_t bad_strides[] = {1};
	mc_attr at[] = {a_ints("strides", 1, bad_strides)};
	cr_assert_eq(run_op("Conv", 11, at, 1, in, 2, out, 1), -1);
	cr_assert(strstr(last_diag, "strides"), "%s", last_diag);
	free_all(in, 2);
}

/* ---- ConvTranspose ---- */

Test(ops_nn, conv_transpose_matches_scatter)
{
	/* 1 x 1 x 3 x 3 input, 1 x 2 x 3 x 3 ones kernel, strides 3 x 2,
	 * output_shape 10 x 8 (the ONNX example): checked against a scatter */
	srand(2);
	static const int64_t xd[] = {1, 2, 3, 3}, wd[] = {2, 2, 3, 3}, s[] = {3, 2},
	                     os[] = {10, 8};
	mc_tensor *in[] = {random_tensor(4, xd), random_tensor(4, wd)}, *out[1];
	mc_attr at[] = {a_ints("strides", 2, s), a_ints("output_shape", 2, os)};
	cr_assert_eq(run_op("ConvTranspose", 11, at, 2, in, 2, out, 1), 0, "%s", last_diag);
	static const int64_t want_shape[] = {1, 2, 10, 8};
	assert_shape(out[0], 4, want_shape);
	/* full size 3*2+3 = 9 x 2*2+3 = 7; total pads -1, -1: begin 0, end -1 */
	double want[2 * 10 * 8] = {0};
	for (int c = 0; c < 2; c++)
		for (int m = 0; m < 2; m++)
			for (int i = 0; i < 3; i++)
				for (int j = 0; j < 3; j++)
					for (int ki = 0; ki < 3; ki++)
						for (int kj = 0; kj < 3; kj++) {
							int oi = i * 3 + ki, oj = j * 2 + kj;
							want[(m * 10 + oi) * 8 + oj] +=
								mc_get_f(in[0], (size_t)((c * 3 + i) * 3 + j)) *
								mc_get_f(in[1], (size_t)(((c * 2 + m) * 3 + ki) * 3 + kj));
						}
	assert_values(out[0], want, 160, 1e-5);
	free_all(in, 2);
	free_all(out, 1);
}

Test(ops_nn, conv_transpose_pads_groups_bias)
{
	/* 1-D, 2 groups, stride 2, dilation 2, pads 1/2, output_padding 1 */
	static const int64_t xd[] = {1, 2, 3}, wd[] = {2, 1, 2}, bd[] = {2};
	static const int64_t s[] = {2}, d[] = {2}, pads[] = {1, 2}, op[] = {1};
	static const double x[] = {1, 2, 3, 4, 5, 6}, w[] = {1, 10, 2, 20}, b[] = {0.5, -0.5};
	mc_tensor *in[] = {tensor(MC_DOUBLE, 3, xd, x), tensor(MC_DOUBLE, 3, wd, w),
	                   tensor(MC_DOUBLE, 1, bd, b)}, *out[1];
	mc_attr at[] = {a_ints("strides", 1, s), a_ints("dilations", 1, d),
	                a_ints("pads", 2, pads), a_ints("output_padding", 1, op), a_int("group", 2)};
	cr_assert_eq(run_op("ConvTranspose", 22, at, 5, in, 3, out, 1), 0, "%s", last_diag);
	/* full length 2*2 + 1 + 3 = 8, minus pads: 5; position o = 2i + 2t - 1 */
	double want[10] = {0};
	for (int g = 0; g < 2; g++) {
		for (int o = 0; o < 5; o++)
			want[g * 5 + o] = b[g];
		for (int i = 0; i < 3; i++)
			for (int t = 0; t < 2; t++) {
				int o = 2 * i + 2 * t - 1;
				if (o >= 0 && o < 5)
					want[g * 5 + o] += x[g * 3 + i] * w[g * 2 + t];
			}
	}
	static const int64_t want_shape[] = {1, 2, 5};
	assert_shape(out[0], 3, want_shape);
	assert_values(out[0], want, 10, 1e-12);
	free_all(in, 3);
	free_all(out, 1);
}

/* ---- pools ---- */

Test(ops_nn, maxpool_indices_and_storage_order)
{
	double x[16];
	for (int i = 0; i < 16; i++)
		x[i] = (i * 7) % 16; /* a permutation: the maxima are unique */
	static const int64_t xd[] = {1, 1, 4, 4}, k[] = {2, 2}, s[] = {2, 2};
	for (int order = 0; order < 2; order++) {
		mc_tensor *in[] = {tensor(MC_FLOAT, 4, xd, x)}, *out[2];
		mc_attr at[] = {a_ints("kernel_shape", 2, k), a_ints("strides", 2, s),
		                a_int("storage_order", order)};
		cr_assert_eq(run_op("MaxPool", 12, at, 3, in, 1, out, 2), 0, "%s", last_diag);
		/* rows: 0 7 14 5 | 12 3 10 1 | 8 15 6 13 | 4 11 2 9; the maxima sit
		 * at (1,0) (0,2) (2,1) (2,3) */
		static const double want[] = {12, 14, 15, 13};
		static const double rows[] = {4, 2, 9, 11}, cols[] = {1, 8, 6, 14};
		assert_values(out[0], want, 4, 0);
		assert_values(out[1], order ? cols : rows, 4, 0);
		free_all(in, 1);
		free_all(out, 2);
	}
}

Test(ops_nn, avgpool_pads_ceil_and_count_include_pad)
{
	double x[9];
	for (int i = 0; i < 9; i++)
		x[i] = i + 1;
	static const int64_t xd[] = {1, 1, 3, 3}, k[] = {2, 2}, s[] = {2, 2}, pads[] = {1, 1, 0, 0};
	for (int include = 0; include < 2; include++) {
		mc_tensor *in[] = {tensor(MC_FLOAT, 4, xd, x)}, *out[1];
		mc_attr at[] = {a_ints("kernel_shape", 2, k), a_ints("strides", 2, s),
		                a_ints("pads", 4, pads), a_int("count_include_pad", include),
		                a_int("ceil_mode", 1)};
		cr_assert_eq(run_op("AveragePool", 19, at, 5, in, 1, out, 1), 0, "%s", last_diag);
		/* padded 4x4 from -1: windows rows {-1,0} {1,2}, same for cols; ceil
		 * mode adds no window since a third would start past the input */
		static const int64_t want_shape[] = {1, 1, 2, 2};
		assert_shape(out[0], 4, want_shape);
		static const double excl[] = {1, 2.5, 5.5, 7};
		static const double incl[] = {0.25, 1.25, 2.75, 7};
		assert_values(out[0], include ? incl : excl, 4, 1e-6);
		free_all(in, 1);
		free_all(out, 1);
	}
}

Test(ops_nn, lppool_and_global_pools)
{
	static const double x[] = {3, -4, 0, 12, 1, 2, 3, 4};
	static const int64_t xd[] = {1, 2, 4}, k[] = {2}, s[] = {2};
	mc_tensor *in[] = {tensor(MC_FLOAT, 3, xd, x)}, *out[1];
	mc_attr at[] = {a_ints("kernel_shape", 1, k), a_ints("strides", 1, s), a_int("p", 2)};
	cr_assert_eq(run_op("LpPool", 18, at, 3, in, 1, out, 1), 0, "%s", last_diag);
	static const double lp[] = {5, 12, sqrt(5), 5};
	assert_values(out[0], lp, 4, 1e-5);
	mc_tensor_free(out[0]);

	cr_assert_eq(run_op("GlobalAveragePool", 1, NULL, 0, in, 1, out, 1), 0);
	static const int64_t gshape[] = {1, 2, 1};
	static const double avg[] = {11.0 / 4, 2.5}, mx[] = {12, 4};
	assert_shape(out[0], 3, gshape);
	assert_values(out[0], avg, 2, 1e-6);
	mc_tensor_free(out[0]);
	cr_assert_eq(run_op("GlobalMaxPool", 22, NULL, 0, in, 1, out, 1), 0);
	assert_values(out[0], mx, 2, 0);
	mc_tensor_free(out[0]);
	mc_attr p1[] = {a_float("p", 1.0)};
	cr_assert_eq(run_op("GlobalLpPool", 1, p1, 1, in, 1, out, 1), 0, "%s", last_diag);
	static const double l1[] = {19, 10};
	assert_values(out[0], l1, 2, 1e-5);
	free_all(in, 1);
	free_all(out, 1);
}

Test(ops_nn, pool_attributes_checked_against_opset)
{
	static const int64_t xd[] = {1, 1, 4, 4}, k[] = {2, 2}, d[] = {2, 2};
	mc_tensor *in[] = {tensor(MC_FLOAT, 4, xd, NULL)}, *out[1];
	mc_attr at[] = {a_ints("kernel_shape", 2, k), a_ints("dilations", 2, d)};
	cr_assert_eq(run_op("AveragePool", 11, at, 2, in, 1, out, 1), -1);
	cr_assert(strstr(last_diag, "dilations"), "%s", last_diag);
	cr_assert_eq(run_op("MaxPool", 12, at, 1, in, 1, out, 1), 0, "%s", last_diag);
	mc_tensor_free(out[0]);
	mc_attr bad[] = {a_ints("kernel_shape", 1, k)};
	cr_assert_eq(run_op("MaxPool", 12, bad, 1, in, 1, out, 1), -1);
	cr_assert(strstr(last_diag, "kernel_shape"), "%s", last_diag);
	free_all(in, 1);
}

/* ---- Gemm, MatMul ---- */

Test(ops_nn, gemm_transposes_alpha_beta_broadcast)
{
	/* A' = [[1,2,3],[4,5,6]] given as its transpose, B' = [[1,0],[0,1],[1,1]]
	 * given as its transpose; C a row broadcast over M */
	static const double at_[] = {1, 4, 2, 5, 3, 6}, bt[] = {1, 0, 1, 0, 1, 1}, c[] = {10, 20};
	static const int64_t ad[] = {3, 2}, bd[] = {2, 3}, cd[] = {2};
	mc_tensor *in[] = {tensor(MC_FLOAT, 2, ad, at_), tensor(MC_FLOAT, 2, bd, bt),
	                   tensor(MC_FLOAT, 1, cd, c)}, *out[1];
	mc_attr at[] = {a_int("transA", 1), a_int("transB", 1), a_float("alpha", 2),
	                a_float("beta", 0.5)};
	cr_assert_eq(run_op("Gemm", 13, at, 4, in, 3, out, 1), 0, "%s", last_diag);
	/* A'B' = [[4,5],[10,11]] */
	static const double want[] = {13, 20, 25, 32};
	assert_values(out[0], want, 4, 1e-6);
	free_all(out, 1);
	/* before opset 7 without broadcast=1, C must be M x N */
	cr_assert_eq(run_op("Gemm", 6, at, 4, in, 3, out, 1), -1);
	cr_assert(strstr(last_diag, "broadcast"), "%s", last_diag);
	mc_attr at6[] = {a_int("transA", 1), a_int("transB", 1), a_float("alpha", 2),
	                 a_float("beta", 0.5), a_int("broadcast", 1)};
	cr_assert_eq(run_op("Gemm", 6, at6, 5, in, 3, out, 1), 0, "%s", last_diag);
	assert_values(out[0], want, 4, 1e-6);
	free_all(out, 1);
	/* C is required before opset 11 */
	cr_assert_eq(run_op("Gemm", 9, at, 4, in, 2, out, 1), -1);
	free_all(in, 3);
}

Test(ops_nn, matmul_broadcast_and_vectors)
{
	srand(3);
	static const int64_t ad[] = {2, 1, 3, 4}, bd[] = {3, 4, 5};
	mc_tensor *in[] = {random_tensor(4, ad), random_tensor(3, bd)}, *out[1];
	cr_assert_eq(run_op("MatMul", 13, NULL, 0, in, 2, out, 1), 0, "%s", last_diag);
	static const int64_t want_shape[] = {2, 3, 3, 5};
	assert_shape(out[0], 4, want_shape);
	for (int p = 0; p < 2; p++)
		for (int q = 0; q < 3; q++)
			for (int i = 0; i < 3; i++)
				for (int j = 0; j < 5; j++) {
					double acc = 0;
					for (int t = 0; t < 4; t++)
						acc += mc_get_f(in[0], (size_t)((p * 3 + i) * 4 + t)) *
						       mc_get_f(in[1], (size_t)((q * 4 + t) * 5 + j));
					size_t yi = (size_t)(((p * 3 + q) * 3 + i) * 5 + j);
					cr_assert_float_eq(mc_get_f(out[0], yi), acc, 1e-5);
				}
	free_all(in, 2);
	free_all(out, 1);

	/* 1-D x 1-D is a scalar; 1-D x 3-D drops M */
	static const int64_t vd[] = {3}, md[] = {2, 3, 2};
	static const double v[] = {1, 2, 3}, m[] = {1, 0, 0, 1, 1, 1, 2, 0, 0, 2, 1, 1};
	mc_tensor *vv[] = {tensor(MC_FLOAT, 1, vd, v), tensor(MC_FLOAT, 1, vd, v)};
	cr_assert_eq(run_op("MatMul", 1, NULL, 0, vv, 2, out, 1), 0);
	cr_assert_eq(out[0]->shape.rank, 0);
	static const double dot[] = {14};
	assert_values(out[0], dot, 1, 0);
	mc_tensor_free(out[0]);
	mc_tensor_free(vv[1]);
	vv[1] = tensor(MC_FLOAT, 3, md, m);
	cr_assert_eq(run_op("MatMul", 9, NULL, 0, vv, 2, out, 1), 0);
	static const int64_t vm_shape[] = {2, 2};
	static const double vm[] = {4, 5, 5, 7};
	assert_shape(out[0], 2, vm_shape);
	assert_values(out[0], vm, 4, 0);
	free_all(vv, 2);
	free_all(out, 1);
}

Test(ops_nn, matmul_int64_is_exact)
{
	static const int64_t ad[] = {1, 2}, bd[] = {2, 1};
	mc_tensor *in[] = {tensor(MC_INT64, 2, ad, NULL), tensor(MC_INT64, 2, bd, NULL)}, *out[1];
	mc_set_i(in[0], 0, (INT64_C(1) << 53) + 1);
	mc_set_i(in[0], 1, 3);
	mc_set_i(in[1], 0, 1);
	mc_set_i(in[1], 1, 1);
	cr_assert_eq(run_op("MatMul", 13, NULL, 0, in, 2, out, 1), 0, "%s", last_diag);
	cr_assert_eq(out[0]->dtype, MC_INT64);
	cr_assert_eq(mc_get_i(out[0], 0), (INT64_C(1) << 53) + 4);
	free_all(in, 2);
	free_all(out, 1);
}

Test(ops_nn, matmul_integer_zero_points)
{
	static const int64_t ad[] = {2, 2}, bd[] = {2, 2}, zd[] = {2};
	static const double a[] = {10, 20, 30, 40}, b[] = {1, 2, 3, 4}, za[] = {10, 30}, zb[] = {1, 0};
	mc_tensor *in[] = {tensor(MC_UINT8, 2, ad, a), tensor(MC_INT8, 2, bd, b),
	                   tensor(MC_UINT8, 1, zd, za), tensor(MC_INT8, 1, zd, zb)}, *out[1];
	cr_assert_eq(run_op("MatMulInteger", 10, NULL, 0, in, 4, out, 1), 0, "%s", last_diag);
	/* (A - za per row) = [[0,10],[0,10]], (B - zb per col) = [[0,2],[2,4]] */
	static const double want[] = {20, 40, 20, 40};
	cr_assert_eq(out[0]->dtype, MC_INT32);
	assert_values(out[0], want, 4, 0);
	free_all(in, 4);
	free_all(out, 1);
}

Test(ops_nn, conv_integer_per_channel_zero_point)
{
	/* x - 2 = [1, 2, 3]; w - zw per output channel: [1, 1] and [0, -1] */
	static const int64_t xd[] = {1, 1, 3}, wd[] = {2, 1, 2}, sd[] = {1}, zd[] = {2};
	static const double x[] = {3, 4, 5}, w[] = {2, 2, 5, 4}, zx[] = {2}, zw[] = {1, 5};
	mc_tensor *in[] = {tensor(MC_UINT8, 3, xd, x), tensor(MC_INT8, 3, wd, w),
	                   tensor(MC_UINT8, 1, sd, zx), tensor(MC_INT8, 1, zd, zw)}, *out[1];
	cr_assert_eq(run_op("ConvInteger", 10, NULL, 0, in, 4, out, 1), 0, "%s", last_diag);
	static const double want[] = {3, 5, -2, -3};
	cr_assert_eq(out[0]->dtype, MC_INT32);
	assert_values(out[0], want, 4, 0);
	free_all(in, 4);
	free_all(out, 1);
}
