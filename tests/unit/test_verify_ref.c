/* modelc verify --input ... --reference DIR (aot/verify.c): the compiled
 * model on given inputs against output files another runtime wrote, raw
 * or .npy, named as `modelc run` names outputs. The references here are
 * the interpreter's outputs written as such files: they pass, and each
 * kind of damage to them is caught. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../aot/aot.h"
#include "model_builder.h"

static char *dir;
static char model[4200], input[4200], refdir[4200];
static mc_tensor *ref[3]; /* the interpreter's outputs: y:0, i, nz */

/* x [2, 3] in; out: "y:0" = 2x (its file y_0.bin), i = ArgMax(x, axis
 * 1) (int64 [2, 1]) and nz = NonZero(x) (int64 [2, K], K counted at run
 * time, at most 6). */
static mb *small_model(void)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "2,3");
	float two = 2;
	mb_init_floats(b, g, "two", "", &two, 1);
	mb_node(b, g, "Mul", "double", "x,two", "y:0");
	mb_attr_int(b, mb_node(b, g, "ArgMax", "amax", "x", "i"), "axis", 1);
	mb_node(b, g, "NonZero", "nz", "x", "nz");
	mb_output(b, g, "y:0");
	mb_output(b, g, "i");
	mb_output(b, g, "nz");
	return b;
}

static const char *in_dir(const char *base, const char *file)
{
	static char buf[2][4300];
	static int k;
	k ^= 1;
	snprintf(buf[k], sizeof buf[k], "%s/%s", base, file);
	return buf[k];
}

/* The model, an input with zeros (NonZero keeps 4 of 6) and the
 * interpreter's outputs for it. */
static void setup(void)
{
	dir = make_temp_dir();
	snprintf(model, sizeof model, "%s/model.onnx", dir);
	snprintf(input, sizeof input, "%s/x.bin", dir);
	snprintf(refdir, sizeof refdir, "%s/ref", dir);
	cr_assert_eq(mc_mkdir_p(refdir, "reference directory"), 0);
	mb *b = small_model();
	cr_assert_eq(mb_write(b, model), 0);
	mc_graph *g = mb_import(b, dir, NULL);
	cr_assert_not_null(g);
	cr_assert_eq(mc_infer_graph(g), 0);
	const float x[6] = {1, 0, -2, 0, 3, 0.5f};
	cr_assert_eq(write_file(input, x, sizeof x), 0);
	mc_shape s = {.rank = 2, .dims = {2, 3}};
	mc_tensor *in = mc_tensor_new(MC_FLOAT, &s);
	memcpy(in->data, x, sizeof x);
	cr_assert_eq(mc_interp_run(g, &in, ref, NULL), 0);
	cr_assert_eq(ref[2]->shape.dims[1], 4);
	mc_tensor_free(in);
	mc_graph_free(g);
	mb_free(b);
	diag_capture();
}

static void teardown(void)
{
	for (int k = 0; k < 3; k++)
		mc_tensor_free(ref[k]);
	rm_tree(dir);
	free(dir);
}

TestSuite(verify_ref, .init = setup, .fini = teardown, .timeout = 120);

static const char *const files[3] = {"y_0", "i", "nz"};

static void write_raw(int k, const mc_tensor *t)
{
	char name[64];
	snprintf(name, sizeof name, "%s.bin", files[k]);
	cr_assert_eq(write_file(in_dir(refdir, name), t->data, t->nbytes), 0);
}

/* A .npy v1 file as numpy's np.save writes it: header padded with spaces
 * to a multiple of 64, ended by a newline. */
static void write_npy(int k, const mc_tensor *t, const char *descr)
{
	char dict[256], dims[128] = "", name[64];
	for (int d = 0; d < t->shape.rank; d++)
		snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%lld,%s",
		         (long long)t->shape.dims[d], d + 1 < t->shape.rank ? " " : "");
	snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, dims);
	size_t hl = strlen(dict), total = (10 + hl + 1 + 63) / 64 * 64, hlen = total - 10;
	unsigned char *buf = malloc(total + t->nbytes);
	memcpy(buf, "\x93NUMPY\x01\x00", 8);
	buf[8] = (unsigned char)(hlen & 0xff);
	buf[9] = (unsigned char)(hlen >> 8);
	memset(buf + 10, ' ', hlen);
	memcpy(buf + 10, dict, hl);
	buf[total - 1] = '\n';
	memcpy(buf + total, t->data, t->nbytes);
	snprintf(name, sizeof name, "%s.npy", files[k]);
	cr_assert_eq(write_file(in_dir(refdir, name), buf, total + t->nbytes), 0);
	free(buf);
}

static void write_all_raw(void)
{
	for (int k = 0; k < 3; k++)
		write_raw(k, ref[k]);
}

static int verify(double atol, bool atol_given)
{
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	mc_verify_opts v;
	mc_verify_opts_init(&v);
	v.cflags = "-std=c99 -O1 -Wall -Wextra -Werror";
	static const char *names[1] = {"x"}, *paths[1];
	paths[0] = input;
	v.n_inputs = 1;
	v.input_names = names;
	v.input_files = paths;
	v.reference = refdir;
	v.atol = atol;
	v.atol_given = atol_given;
	return mc_verify(model, &o, &v);
}

Test(verify_ref, raw_references_pass)
{
	write_all_raw();
	cr_expect_eq(verify(1e-6, false), 0, "%s", diag_all());
}

Test(verify_ref, npy_references_pass)
{
	write_npy(0, ref[0], "<f4");
	write_npy(1, ref[1], "<i8");
	write_npy(2, ref[2], "<i8");
	cr_expect_eq(verify(1e-6, false), 0, "%s", diag_all());
}

/* One float element off by 1e-3 (the bound: 1e-6 + 1e-4 * 6) */
Test(verify_ref, perturbed_float_fails)
{
	mc_tensor *t = mc_tensor_clone(ref[0]);
	((float *)t->data)[4] += 1e-3f;
	write_all_raw();
	write_raw(0, t);
	mc_tensor_free(t);
	cr_expect_eq(verify(1e-6, false), 1);
}

/* An integer output must match exactly, unless --atol says how far */
Test(verify_ref, integers_exact_unless_atol)
{
	mc_tensor *t = mc_tensor_clone(ref[1]);
	((int64_t *)t->data)[1] += 1;
	write_all_raw();
	write_npy(1, t, "<i8");
	unlink(in_dir(refdir, "i.bin"));
	mc_tensor_free(t);
	cr_expect_eq(verify(1e-6, false), 1);
	cr_expect_eq(verify(1, true), 0, "%s", diag_all());
}

/* A counted output's count is its reference file's: one entry fewer (the
 * first 3 of each row of nz, as a run that kept 3 would write them) is a
 * mismatch, not an error. */
Test(verify_ref, other_count_fails)
{
	mc_shape s = {.rank = 2, .dims = {2, 3}};
	mc_tensor *t = mc_tensor_new(MC_INT64, &s);
	for (int r = 0; r < 2; r++)
		memcpy((int64_t *)t->data + 3 * r, (int64_t *)ref[2]->data + 4 * r, 3 * sizeof(int64_t));
	write_all_raw();
	write_raw(2, t);
	cr_expect_eq(verify(1e-6, false), 1);
	/* the same as .npy, its shape saying the count */
	unlink(in_dir(refdir, "nz.bin"));
	write_npy(2, t, "<i8");
	cr_expect_eq(verify(1e-6, false), 1);
	mc_tensor_free(t);
}

Test(verify_ref, missing_reference_is_an_error)
{
	write_all_raw();
	unlink(in_dir(refdir, "i.bin"));
	cr_expect_eq(verify(1e-6, false), -1);
	cr_expect_eq(diag_count_with("output 'i': no reference file"), 1, "%s", diag_all());
}

Test(verify_ref, wrong_size_is_an_error)
{
	write_all_raw();
	cr_assert_eq(write_file(in_dir(refdir, "y_0.bin"), ref[0]->data, ref[0]->nbytes - 4), 0);
	cr_expect_eq(verify(1e-6, false), -1);
	cr_expect_eq(diag_count_with("holds 20 bytes of data; float32 2x3 needs 24"), 1, "%s", diag_all());
}

Test(verify_ref, wrong_npy_dtype_and_shape_are_errors)
{
	write_all_raw();
	unlink(in_dir(refdir, "y_0.bin"));
	write_npy(0, ref[0], "<f8");
	cr_expect_eq(verify(1e-6, false), -1);
	cr_expect_eq(diag_count_with(".npy dtype is '<f8', not float32"), 1, "%s", diag_all());
	mc_tensor *t = mc_tensor_clone(ref[0]);
	t->shape = (mc_shape){.rank = 2, .dims = {3, 2}};
	write_npy(0, t, "<f4");
	mc_tensor_free(t);
	diag_capture();
	cr_expect_eq(verify(1e-6, false), -1);
	cr_expect_eq(diag_count_with(".npy shape 3x2 does not match the expected 2x3"), 1, "%s", diag_all());
}

Test(verify_ref, both_files_are_an_error)
{
	write_all_raw();
	write_npy(1, ref[1], "<i8");
	cr_expect_eq(verify(1e-6, false), -1);
	cr_expect_eq(diag_count_with("output 'i': both"), 1, "%s", diag_all());
}

Test(verify_ref, every_input_needed)
{
	write_all_raw();
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	mc_verify_opts v;
	mc_verify_opts_init(&v);
	v.reference = refdir;
	cr_expect_eq(mc_verify(model, &o, &v), -1);
	cr_expect_eq(diag_count_with("--reference DIR holds outputs for given inputs"), 1, "%s", diag_all());
}
