/* Index ops (libcore/ops/index.c): registry entries called directly on
 * tiny inputs, checking real numbers and error messages. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "modelc.h"

/* ---- a tiny harness: one node, inputs given as tensors ---- */

static char last_error[1024];

static void capture(const char *line, void *user)
{
	(void)user;
	snprintf(last_error, sizeof last_error, "%s", line);
}

static mc_tensor *tensor_f(const mc_shape *s, const double *v)
{
	mc_tensor *t = mc_tensor_new(MC_FLOAT, s);
	for (size_t i = 0; i < t->numel; i++)
		mc_set_f(t, i, v[i]);
	return t;
}

static mc_tensor *tensor_i(mc_dtype dt, const mc_shape *s, const int64_t *v)
{
	mc_tensor *t = mc_tensor_new(dt, s);
	for (size_t i = 0; i < t->numel; i++)
		mc_set_i(t, i, v[i]);
	return t;
}

static mc_tensor *iota(const mc_shape *s)
{
	mc_tensor *t = mc_tensor_new(MC_FLOAT, s);
	for (size_t i = 0; i < t->numel; i++)
		mc_set_f(t, i, (double)i);
	return t;
}

static mc_shape shp(int rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
	mc_shape s = {.rank = rank, .dims = {d0, d1, d2, d3}};
	return s;
}

static mc_attr attr_i(const char *name, int64_t v)
{
	return (mc_attr){.name = (char *)name, .type = MC_ATTR_INT, .i = v};
}

static mc_attr attr_f(const char *name, double v)
{
	return (mc_attr){.name = (char *)name, .type = MC_ATTR_FLOAT, .f = v};
}

static mc_attr attr_s(const char *name, const char *v)
{
	return (mc_attr){.name = (char *)name, .type = MC_ATTR_STRING, .s = (char *)v};
}

static mc_attr attr_ints(const char *name, int64_t *v, size_t n)
{
	return (mc_attr){.name = (char *)name, .type = MC_ATTR_INTS, .ints = v, .n = n};
}

/* Runs op on in[0..n_in) (NULL = omitted input). Inputs whose bit is set in
 * const_mask are known at compile time. Returns the output, or NULL after
 * an error (kept in last_error). The inputs are freed. */
static mc_tensor *run_op(const char *op_type, int opset, mc_attr *attrs, int n_attrs,
                         mc_tensor **in, int n_in, unsigned const_mask)
{
	bool known;
	mc_node node = {.name = "t", .op_type = (char *)op_type, .domain = "", .opset = opset,
	                .n_attrs = n_attrs, .attrs = attrs};
	node.op = mc_registry_find(op_type, opset, &known);
	cr_assert(node.op, "no registry entry for %s at opset %d", op_type, opset);
	mc_set_diag_sink(capture, NULL);
	last_error[0] = 0;
	mc_value vals[8], outv;
	const mc_value *vin[8];
	memset(vals, 0, sizeof vals);
	memset(&outv, 0, sizeof outv);
	for (int i = 0; i < n_in; i++) {
		vin[i] = NULL;
		if (!in[i])
			continue;
		vals[i].name = "v";
		vals[i].dtype = in[i]->dtype;
		vals[i].shape = in[i]->shape;
		vals[i].typed = true;
		vals[i].konst = (const_mask >> i) & 1 ? in[i] : NULL;
		vin[i] = &vals[i];
	}
	mc_value *vout[1] = {&outv};
	mc_tensor *out = NULL;
	int rc = node.op->parse ? node.op->parse(&node) : 0;
	if (!rc) {
		mc_infer_ctx ic = {.node = &node, .n_in = n_in, .n_out = 1, .in = vin, .out = vout};
		rc = node.op->infer(&ic);
	}
	if (!rc) {
		out = mc_tensor_new(outv.dtype, &outv.shape);
		mc_tensor *outs[1] = {out};
		mc_eval_ctx ec = {.node = &node, .n_in = n_in, .n_out = 1,
		                  .in = (const mc_tensor *const *)in, .out = outs};
		rc = node.op->eval(&ec);
	}
	if (rc) {
		mc_tensor_free(out);
		out = NULL;
	}
	for (int i = 0; i < n_in; i++)
		mc_tensor_free(in[i]);
	mc_set_diag_sink(NULL, NULL);
	return out;
}

static void expect_values(mc_tensor *t, const mc_shape *s, const double *want, size_t n)
{
	char a[64], b[64];
	cr_assert(t, "op failed: %s", last_error);
	cr_assert(mc_shape_eq(&t->shape, s), "shape %s, expected %s",
	          mc_shape_str(&t->shape, a, sizeof a), mc_shape_str(s, b, sizeof b));
	cr_assert_eq(t->numel, n);
	for (size_t i = 0; i < n; i++)
		cr_assert_float_eq(mc_get_f(t, i), want[i], 1e-5, "element %zu: %g, expected %g", i,
		                   mc_get_f(t, i), want[i]);
	mc_tensor_free(t);
}

/* ---- Slice ---- */

Test(ops_index, slice_negative_step_and_clamping)
{
	mc_shape s10 = shp(1, 10, 0, 0, 0), s1 = shp(1, 1, 0, 0, 0);
	/* x[-1:INT64_MIN:-3] = 9, 6, 3, 0 */
	mc_tensor *in[5] = {iota(&s10), tensor_i(MC_INT64, &s1, (int64_t[]){-1}),
	                    tensor_i(MC_INT64, &s1, (int64_t[]){INT64_MIN}), NULL,
	                    tensor_i(MC_INT64, &s1, (int64_t[]){-3})};
	mc_shape s4 = shp(1, 4, 0, 0, 0);
	expect_values(run_op("Slice", 13, NULL, 0, in, 5, 0x1e), &s4, (double[]){9, 6, 3, 0}, 4);

	/* start past the end clamps: empty result */
	mc_tensor *in2[3] = {iota(&s10), tensor_i(MC_INT64, &s1, (int64_t[]){20}),
	                     tensor_i(MC_INT64, &s1, (int64_t[]){1000})};
	mc_shape s0 = shp(1, 0, 0, 0, 0);
	expect_values(run_op("Slice", 13, NULL, 0, in2, 3, 0x6), &s0, NULL, 0);
}

Test(ops_index, slice_attributes_before_opset_10)
{
	mc_shape s = shp(2, 3, 4, 0, 0);
	int64_t starts[] = {1, -3}, ends[] = {INT64_MAX, -1}, axes[] = {0, 1};
	mc_attr at[] = {attr_ints("starts", starts, 2), attr_ints("ends", ends, 2),
	                attr_ints("axes", axes, 2)};
	mc_tensor *in[1] = {iota(&s)};
	mc_shape want = shp(2, 2, 2, 0, 0);
	expect_values(run_op("Slice", 1, at, 3, in, 1, 0), &want, (double[]){5, 6, 9, 10}, 4);
}

Test(ops_index, slice_needs_constant_starts)
{
	mc_shape s10 = shp(1, 10, 0, 0, 0), s1 = shp(1, 1, 0, 0, 0);
	mc_tensor *in[3] = {iota(&s10), tensor_i(MC_INT64, &s1, (int64_t[]){1}),
	                    tensor_i(MC_INT64, &s1, (int64_t[]){3})};
	cr_assert_null(run_op("Slice", 13, NULL, 0, in, 3, 0x4));
	cr_assert(strstr(last_error, "starts") && strstr(last_error, "compile time"), "%s",
	          last_error);
}

/* ---- Gather family ---- */

Test(ops_index, gather_negative_and_out_of_range)
{
	mc_shape s = shp(2, 3, 2, 0, 0), si = shp(2, 1, 2, 0, 0);
	mc_tensor *in[2] = {iota(&s), tensor_i(MC_INT64, &si, (int64_t[]){-1, 0})};
	mc_shape want = shp(3, 1, 2, 2, 0);
	expect_values(run_op("Gather", 13, NULL, 0, in, 2, 0), &want, (double[]){4, 5, 0, 1}, 4);

	mc_tensor *bad[2] = {iota(&s), tensor_i(MC_INT32, &si, (int64_t[]){0, 3})};
	cr_assert_null(run_op("Gather", 13, NULL, 0, bad, 2, 0));
	cr_assert(strstr(last_error, "node 't'") && strstr(last_error, "index 3"), "%s",
	          last_error);
}

Test(ops_index, gather_elements_axis1)
{
	mc_shape s = shp(2, 2, 2, 0, 0);
	mc_attr at[] = {attr_i("axis", 1)};
	mc_tensor *in[2] = {tensor_f(&s, (double[]){1, 2, 3, 4}),
	                    tensor_i(MC_INT64, &s, (int64_t[]){0, 0, 1, -2})};
	expect_values(run_op("GatherElements", 13, at, 1, in, 2, 0), &s,
	              (double[]){1, 1, 4, 3}, 4);
}

Test(ops_index, gathernd_batch_dims)
{
	/* data [2,2,2], indices [2,1] with batch_dims 1: data[b, idx[b]] */
	mc_shape s = shp(3, 2, 2, 2, 0), si = shp(2, 2, 1, 0, 0);
	mc_attr at[] = {attr_i("batch_dims", 1)};
	mc_tensor *in[2] = {iota(&s), tensor_i(MC_INT64, &si, (int64_t[]){1, 0})};
	mc_shape want = shp(2, 2, 2, 0, 0);
	expect_values(run_op("GatherND", 13, at, 1, in, 2, 0), &want, (double[]){2, 3, 4, 5}, 4);
}

/* ---- Scatter family ---- */

Test(ops_index, scatternd_add_with_duplicates)
{
	mc_shape s = shp(1, 4, 0, 0, 0), si = shp(2, 3, 1, 0, 0), su = shp(1, 3, 0, 0, 0);
	mc_attr at[] = {attr_s("reduction", "add")};
	mc_tensor *in[3] = {tensor_f(&s, (double[]){1, 1, 1, 1}),
	                    tensor_i(MC_INT64, &si, (int64_t[]){1, 1, -1}),
	                    tensor_f(&su, (double[]){10, 20, 5})};
	expect_values(run_op("ScatterND", 18, at, 1, in, 3, 0), &s, (double[]){1, 31, 1, 6}, 4);
}

Test(ops_index, scatter_elements_mul_and_bad_index)
{
	mc_shape s = shp(2, 1, 5, 0, 0), si = shp(2, 1, 2, 0, 0);
	mc_attr at[] = {attr_i("axis", 1), attr_s("reduction", "mul")};
	mc_tensor *in[3] = {tensor_f(&s, (double[]){1, 2, 3, 4, 5}),
	                    tensor_i(MC_INT64, &si, (int64_t[]){1, 1}),
	                    tensor_f(&si, (double[]){1.5, 2})};
	expect_values(run_op("ScatterElements", 18, at, 2, in, 3, 0), &s,
	              (double[]){1, 6, 3, 4, 5}, 5);

	mc_tensor *bad[3] = {iota(&s), tensor_i(MC_INT64, &si, (int64_t[]){0, -6}), iota(&si)};
	cr_assert_null(run_op("ScatterElements", 18, at, 2, bad, 3, 0));
	cr_assert(strstr(last_error, "index -6"), "%s", last_error);
}

/* ---- Pad ---- */

static mc_tensor *pad1d(const char *mode, int64_t b, int64_t e)
{
	mc_shape s = shp(1, 4, 0, 0, 0), sp = shp(1, 2, 0, 0, 0);
	mc_attr at[] = {attr_s("mode", mode)};
	mc_tensor *in[2] = {tensor_f(&s, (double[]){1, 2, 3, 4}),
	                    tensor_i(MC_INT64, &sp, (int64_t[]){b, e})};
	return run_op("Pad", 19, at, 1, in, 2, 0x2);
}

Test(ops_index, pad_modes)
{
	mc_shape s9 = shp(1, 9, 0, 0, 0), s3 = shp(1, 3, 0, 0, 0);
	expect_values(pad1d("reflect", 3, 2), &s9, (double[]){4, 3, 2, 1, 2, 3, 4, 3, 2}, 9);
	expect_values(pad1d("edge", 3, 2), &s9, (double[]){1, 1, 1, 1, 2, 3, 4, 4, 4}, 9);
	expect_values(pad1d("wrap", 3, 2), &s9, (double[]){2, 3, 4, 1, 2, 3, 4, 1, 2}, 9);
	expect_values(pad1d("constant", -2, 1), &s3, (double[]){3, 4, 0}, 3);
	/* cropping happens first: reflect sees [2, 3, 4] */
	mc_shape s5 = shp(1, 5, 0, 0, 0);
	expect_values(pad1d("reflect", -1, 2), &s5, (double[]){2, 3, 4, 3, 2}, 5);
}

Test(ops_index, pad_opset2_attributes)
{
	mc_shape s = shp(2, 1, 2, 0, 0);
	int64_t pads[] = {0, 1, 0, 0};
	mc_attr at[] = {attr_ints("pads", pads, 4), attr_f("value", 7.5)};
	mc_tensor *in[1] = {tensor_f(&s, (double[]){1, 2})};
	mc_shape want = shp(2, 1, 3, 0, 0);
	expect_values(run_op("Pad", 2, at, 2, in, 1, 0), &want, (double[]){7.5, 1, 2}, 3);
}

/* ---- Resize ---- */

Test(ops_index, resize_linear_half_pixel)
{
	mc_shape s = shp(4, 1, 1, 2, 2), ss = shp(1, 4, 0, 0, 0);
	mc_attr at[] = {attr_s("mode", "linear")};
	mc_tensor *in[3] = {tensor_f(&s, (double[]){1, 2, 3, 4}), NULL,
	                    tensor_f(&ss, (double[]){1, 1, 2, 2})};
	mc_shape want = shp(4, 1, 1, 4, 4);
	double y[] = {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5,
	              2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4};
	expect_values(run_op("Resize", 19, at, 1, in, 3, 0x4), &want, y, 16);
}

Test(ops_index, resize_sizes_nearest_opset11_empty_scales)
{
	/* The M-LSD pattern: empty roi and scales, sizes given. */
	mc_shape s = shp(4, 1, 1, 2, 2), e = shp(1, 0, 0, 0, 0), sz = shp(1, 4, 0, 0, 0);
	mc_attr at[] = {attr_s("mode", "nearest"), attr_s("nearest_mode", "floor"),
	                attr_s("coordinate_transformation_mode", "asymmetric")};
	mc_tensor *in[4] = {tensor_f(&s, (double[]){1, 2, 3, 4}), tensor_f(&e, NULL),
	                    tensor_f(&e, NULL), tensor_i(MC_INT64, &sz, (int64_t[]){1, 1, 3, 3})};
	mc_shape want = shp(4, 1, 1, 3, 3);
	expect_values(run_op("Resize", 11, at, 3, in, 4, 0xe), &want,
	              (double[]){1, 1, 2, 1, 1, 2, 3, 3, 4}, 9);
}

Test(ops_index, resize_cubic_downsample)
{
	/* ONNX's test_resize_downsample_scales_cubic: 4x4 iota+1, scale 0.8 */
	mc_shape s = shp(4, 1, 1, 4, 4), ss = shp(1, 4, 0, 0, 0);
	mc_attr at[] = {attr_s("mode", "cubic")};
	double x[16];
	for (int i = 0; i < 16; i++)
		x[i] = i + 1;
	mc_tensor *in[3] = {tensor_f(&s, x), NULL, tensor_f(&ss, (double[]){1, 1, 0.8, 0.8})};
	mc_shape want = shp(4, 1, 1, 3, 3);
	double y[] = {1.47119141, 2.78125, 4.08251953, 6.71142578, 8.02148438,
	              9.32275391, 11.91650391, 13.2265625, 14.52783203};
	expect_values(run_op("Resize", 19, at, 1, in, 3, 0x4), &want, y, 9);
}

Test(ops_index, resize_needs_constant_scales)
{
	mc_shape s = shp(4, 1, 1, 2, 2), ss = shp(1, 4, 0, 0, 0);
	mc_tensor *in[3] = {iota(&s), NULL, tensor_f(&ss, (double[]){1, 1, 2, 2})};
	cr_assert_null(run_op("Resize", 19, NULL, 0, in, 3, 0));
	cr_assert(strstr(last_error, "scales") && strstr(last_error, "compile time"), "%s",
	          last_error);
}

Test(ops_index, upsample_nearest_opset9)
{
	mc_shape s = shp(2, 2, 2, 0, 0), ss = shp(1, 2, 0, 0, 0);
	mc_tensor *in[2] = {tensor_f(&s, (double[]){1, 2, 3, 4}),
	                    tensor_f(&ss, (double[]){1, 3})};
	mc_shape want = shp(2, 2, 6, 0, 0);
	expect_values(run_op("Upsample", 9, NULL, 0, in, 2, 0x2), &want,
	              (double[]){1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4}, 12);
}

/* ---- DepthToSpace / SpaceToDepth / OneHot / Trilu / Compress ---- */

Test(ops_index, depth_to_space_crd_and_back)
{
	mc_shape s = shp(4, 1, 4, 1, 1);
	mc_attr at[] = {attr_i("blocksize", 2), attr_s("mode", "CRD")};
	mc_tensor *in[1] = {iota(&s)};
	mc_shape want = shp(4, 1, 1, 2, 2);
	expect_values(run_op("DepthToSpace", 13, at, 2, in, 1, 0), &want,
	              (double[]){0, 1, 2, 3}, 4);

	/* DCR with 2 channels: depth = (i*b + j)*C + c */
	mc_shape s8 = shp(4, 1, 8, 1, 1);
	mc_attr dcr[] = {attr_i("blocksize", 2)};
	mc_tensor *in2[1] = {iota(&s8)};
	mc_tensor *wide = run_op("DepthToSpace", 13, dcr, 1, in2, 1, 0);
	cr_assert(wide, "%s", last_error);
	mc_shape ws = shp(4, 1, 2, 2, 2);
	mc_tensor *in3[1] = {mc_tensor_clone(wide)};
	expect_values(wide, &ws, (double[]){0, 2, 4, 6, 1, 3, 5, 7}, 8);
	expect_values(run_op("SpaceToDepth", 13, dcr, 1, in3, 1, 0), &s8,
	              (double[]){0, 1, 2, 3, 4, 5, 6, 7}, 8);
}

Test(ops_index, onehot_negative_and_out_of_range)
{
	mc_shape si = shp(1, 3, 0, 0, 0), sc = shp(0, 0, 0, 0, 0), sv = shp(1, 2, 0, 0, 0);
	mc_tensor *in[3] = {tensor_i(MC_INT64, &si, (int64_t[]){-1, 1, 5}),
	                    tensor_f(&sc, (double[]){3}), tensor_f(&sv, (double[]){-2, 7})};
	mc_shape want = shp(2, 3, 3, 0, 0);
	expect_values(run_op("OneHot", 11, NULL, 0, in, 3, 0x2), &want,
	              (double[]){-2, -2, 7, -2, 7, -2, -2, -2, -2}, 9);
}

Test(ops_index, trilu_lower_with_k)
{
	mc_shape s = shp(2, 2, 3, 0, 0), sk = shp(0, 0, 0, 0, 0);
	mc_attr at[] = {attr_i("upper", 0)};
	mc_tensor *in[2] = {tensor_f(&s, (double[]){1, 2, 3, 4, 5, 6}),
	                    tensor_i(MC_INT64, &sk, (int64_t[]){-1})};
	expect_values(run_op("Trilu", 14, at, 1, in, 2, 0), &s, (double[]){0, 0, 0, 4, 0, 0}, 6);
}

Test(ops_index, compress_constant_condition)
{
	mc_shape s = shp(2, 3, 2, 0, 0), sc = shp(1, 2, 0, 0, 0);
	mc_attr at[] = {attr_i("axis", -1)};
	mc_tensor *in[2] = {iota(&s), tensor_i(MC_BOOL, &sc, (int64_t[]){0, 1})};
	mc_shape want = shp(2, 3, 1, 0, 0);
	expect_values(run_op("Compress", 11, at, 1, in, 2, 0x2), &want, (double[]){1, 3, 5}, 3);

	mc_tensor *in2[2] = {iota(&s), tensor_i(MC_BOOL, &sc, (int64_t[]){0, 1})};
	cr_assert_null(run_op("Compress", 11, at, 1, in2, 2, 0));
	cr_assert(strstr(last_error, "condition") && strstr(last_error, "compile time"), "%s",
	          last_error);
}
