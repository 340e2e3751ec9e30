/* Lowerings of the tensor and index families (aot/lower_tensor.c,
 * aot/lower_index.c): small models compiled to C, built with the system's
 * compiler and run on chosen inputs; the outputs are checked number by
 * number, bad run-time indices by the run's status. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../../aot/aot.h"
#include "model_builder.h"

static void init_int64(mb *b, Onnx__GraphProto *g, const char *name, const char *dims,
                       const int64_t *v, size_t n)
{
	Onnx__TensorProto *t = mb_tensor(b, name, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, dims);
	mb_int64_data(b, t, v, n);
	mb_initializer(b, g, t);
}

/* ---- compile, build, run ---- */
typedef struct {
	char *dir;
	int n_kernels;  /* kernels in the generated run function */
} compiled;

static int sh(const char *fmt, const char *dir)
{
	char cmd[8192];
	snprintf(cmd, sizeof cmd, fmt, dir);
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Compiles and builds the model; false (with diagnostics captured) when
 * modelc refuses it. */
static bool compile_model(mb *b, compiled *c)
{
	char path[4096];
	c->dir = make_temp_dir();
	snprintf(path, sizeof path, "%s/m.onnx", c->dir);
	cr_assert_eq(mb_write(b, path), 0);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "m";
	o.harness = true;
	diag_capture();
	if (mc_compile(path, c->dir, &o))
		return false;
	cr_assert_eq(sh("cd '%s' && cc -std=c99 -O1 -Wall -Wextra -Werror m.c m_weights.c m_main.c "
	                "-o run -lm", c->dir), 0, "the generated code does not build");
	char text[1 << 16];
	snprintf(path, sizeof path, "%s/m.c", c->dir);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	size_t n = fread(text, 1, sizeof text - 1, f);
	fclose(f);
	text[n] = 0;
	c->n_kernels = 0;
	for (const char *s = text; (s = strstr(s, "static int m_k")); s++)
		c->n_kernels++;
	return true;
}

/* Runs with raw inputs (in[i] of in_bytes[i]); the run's exit status. */
static int run_model(compiled *c, int n_in, const void *const *in, const size_t *in_bytes)
{
	char path[4096], cmd[8192];
	int len = snprintf(cmd, sizeof cmd, "cd '%s' && ./run .", c->dir);
	for (int i = 0; i < n_in; i++) {
		snprintf(path, sizeof path, "%s/in%d.bin", c->dir, i);
		cr_assert_eq(write_file(path, in[i], in_bytes[i]), 0);
		len += snprintf(cmd + len, sizeof cmd - (size_t)len, " in%d.bin", i);
	}
	snprintf(cmd + len, sizeof cmd - (size_t)len, " 2>/dev/null");
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void read_output(compiled *c, int k, void *out, size_t bytes)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/output_%d.bin", c->dir, k);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "no output %d", k);
	cr_assert_eq(fread(out, 1, bytes, f), bytes);
	cr_assert_eq(fgetc(f), EOF, "output %d is longer than expected", k);
	fclose(f);
}

static void done(compiled *c)
{
	rm_tree(c->dir);
	free(c->dir);
}

static void expect_floats(const float *got, const float *want, size_t n)
{
	for (size_t i = 0; i < n; i++)
		cr_expect_float_eq(got[i], want[i], 1e-6, "element %zu: got %g, expected %g", i,
		                   (double)got[i], (double)want[i]);
}

#define F ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define I64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

/* Compiles b (one float input of n_x values, one float output of n_y
 * values), runs it on x and checks y. */
static void expect_run(mb *b, const float *x, size_t n_x, const float *want, size_t n_y,
                       int kernels)
{
	compiled c;
	cr_assert(compile_model(b, &c), "compile failed: %s", diag_all());
	if (kernels)
		cr_expect_eq(c.n_kernels, kernels, "%d kernels, expected %d", c.n_kernels, kernels);
	size_t bytes = n_x * sizeof(float);
	cr_assert_eq(run_model(&c, 1, (const void *[]){x}, &bytes), 0);
	float *y = calloc(n_y + 1, sizeof *y);
	read_output(&c, 0, y, n_y * sizeof *y);
	expect_floats(y, want, n_y);
	free(y);
	done(&c);
}

/* ---- tensor family ---- */

Test(lower_tensor, transpose_default_perm)
{
	mb *b = mb_new(19);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "2,3");
	mb_node(b, g, "Transpose", "t", "x", "y");
	mb_output(b, g, "y");
	expect_run(b, (float[]){0, 1, 2, 3, 4, 5}, 6, (float[]){0, 3, 1, 4, 2, 5}, 6, 1);
	mb_free(b);
}

/* Concat of a slab and a graph input with a Relu epilogue: one kernel. */
Test(lower_tensor, concat_with_fused_relu)
{
	mb *b = mb_new(19);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "2,2");
	mb_init_floats(b, g, "w", "2,1", (float[]){-7, 8}, 2);
	Onnx__NodeProto *n = mb_node(b, g, "Concat", "cat", "x,w,x", "c");
	mb_attr_int(b, n, "axis", -1);
	mb_node(b, g, "Relu", "r", "c", "y");
	mb_output(b, g, "y");
	expect_run(b, (float[]){1, -2, -3, 4}, 4, (float[]){1, 0, 0, 1, 0, 0, 4, 8, 0, 4}, 10, 1);
	mb_free(b);
}

/* Concats whose inputs are slabs of their output (dims before the axis
 * all 1, aligned offsets): the producers store into the output, nested
 * Concats too, and no Concat has a kernel of its own. */
Test(lower_tensor, concat_of_kernel_outputs_without_a_copy)
{
	mb *b = mb_new(19);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "1,16");
	mb_node(b, g, "Relu", "ra", "x", "a");
	mb_node(b, g, "Neg", "nb", "x", "bb");
	mb_node(b, g, "Abs", "ae", "x", "e");
	mb_attr_int(b, mb_node(b, g, "Concat", "c1", "a,bb", "ab"), "axis", 1);
	mb_attr_int(b, mb_node(b, g, "Concat", "c2", "ab,e", "abe"), "axis", -1);
	/* a graph output has its own bytes: this one copies */
	mb_attr_int(b, mb_node(b, g, "Concat", "c3", "abe,x", "y"), "axis", 1);
	mb_output(b, g, "y");
	float x[16], want[64];
	for (int i = 0; i < 16; i++) {
		x[i] = (float)(i - 8);
		want[i] = x[i] > 0 ? x[i] : 0;
		want[16 + i] = -x[i];
		want[32 + i] = x[i] < 0 ? -x[i] : x[i];
		want[48 + i] = x[i];
	}
	expect_run(b, x, 16, want, 64, 4); /* Relu, Neg, Abs, c3 */
	mb_free(b);
}

/* The same with 3-element slabs: the second would start unaligned, so the
 * Concat copies (its own kernel) and the result is the same. */
Test(lower_tensor, concat_of_unaligned_slabs_copies)
{
	mb *b = mb_new(19);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "1,3");
	mb_node(b, g, "Relu", "ra", "x", "a");
	mb_node(b, g, "Neg", "nb", "x", "bb");
	mb_attr_int(b, mb_node(b, g, "Concat", "c1", "a,bb", "ab"), "axis", 1);
	mb_attr_int(b, mb_node(b, g, "Concat", "c2", "ab,x", "y"), "axis", 1);
	mb_output(b, g, "y");
	expect_run(b, (float[]){-1, 2, -3}, 3, (float[]){0, 2, 0, 1, -2, 3, -1, 2, -3}, 9, 4); /* c1 too */
	mb_free(b);
}

/* Split into three with the middle output omitted. */
Test(lower_tensor, split_with_omitted_output)
{
	mb *b = mb_new(18);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "6");
	init_int64(b, g, "s", "3", (int64_t[]){1, 2, 3}, 3);
	mb_node(b, g, "Split", "sp", "x,s", "a,,c");
	mb_output(b, g, "a");
	mb_output(b, g, "c");
	compiled c;
	cr_assert(compile_model(b, &c), "compile failed: %s", diag_all());
	size_t bytes = 6 * sizeof(float);
	cr_assert_eq(run_model(&c, 1, (const void *[]){(float[]){10, 11, 12, 13, 14, 15}}, &bytes), 0);
	float a[1], cc[3];
	read_output(&c, 0, a, sizeof a);
	read_output(&c, 1, cc, sizeof cc);
	expect_floats(a, (float[]){10}, 1);
	expect_floats(cc, (float[]){13, 14, 15}, 3);
	done(&c);
	mb_free(b);
}

/* Shape and Size always fold; their lowerings (for a runtime input) give
 * the static dims: checked on the kernel they build. */
Test(lower_tensor, shape_and_size_store_static_dims)
{
	mb *b = mb_new(19);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "2,3,5");
	Onnx__NodeProto *n = mb_node(b, g, "Shape", "sh", "x", "s");
	mb_attr_int(b, n, "start", 1);
	mb_node(b, g, "Size", "sz", "x", "z");
	mb_output(b, g, "s");
	mb_output(b, g, "z");
	mc_graph *gr = mb_import(b, NULL, NULL);
	cr_assert_not_null(gr);
	cr_assert_eq(mc_infer_graph(gr), 0);
	const int64_t want[2][3] = {{2, 3, 5}, {1, 30}}; /* count, values */
	for (int node = 0; node < 2; node++) {
		mc_kpool *pool = mc_kpool_new();
		mc_kernel k = {0};
		mc_kb kb;
		mc_kb_begin(&kb, pool, &k);
		mc_group grp = {.anchor = node};
		cr_assert_eq(mc_lower_group(gr, &grp, &kb, mc_lowering_find(gr->nodes[node].id)), 0);
		int stores = 0;
		for (const mc_kstmt *s = k.body; s; s = s->next) {
			int64_t at = -1, v = -1;
			cr_assert_eq(s->kind, MC_KS_STORE);
			cr_assert(mc_k_is_const(s->a, &at) && mc_k_is_const(s->b, &v));
			cr_expect_eq(at, stores);
			cr_expect_eq(v, want[node][1 + stores], "store %d: %lld", stores, (long long)v);
			stores++;
		}
		cr_expect_eq(stores, want[node][0]);
		free(k.bufs);
		free(k.vars);
		mc_kpool_free(pool);
	}
	mc_graph_free(gr);
	mb_free(b);
}

/* ---- index family ---- */

/* Run-time indices: negative ones count from the end; one out of range
 * stops the run with MODELC_ERR_BAD_INDEX (3) instead of reading past x. */
Test(lower_index, gather_checks_runtime_indices)
{
	mb *b = mb_new(19);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "4");
	mb_input(b, g, "i", I64, "3");
	mb_node(b, g, "Gather", "ga", "x,i", "y");
	mb_output(b, g, "y");
	compiled c;
	cr_assert(compile_model(b, &c), "compile failed: %s", diag_all());
	const float x[4] = {10, 11, 12, 13};
	size_t bytes[2] = {sizeof x, 3 * sizeof(int64_t)};
	const int64_t good[3] = {-1, 0, 2}, bad[][3] = {{0, 4, 0}, {-5, 0, 0}, {INT64_MIN, 0, 0}};
	cr_assert_eq(run_model(&c, 2, (const void *[]){x, good}, bytes), 0);
	float y[3];
	read_output(&c, 0, y, sizeof y);
	expect_floats(y, (float[]){13, 10, 12}, 3);
	for (int k = 0; k < 3; k++)
		cr_expect_eq(run_model(&c, 2, (const void *[]){x, bad[k]}, bytes), MC_STATUS_BAD_INDEX,
		             "bad index set %d", k);
	done(&c);
	mb_free(b);
}

/* Repeated indices add up, in order. */
Test(lower_index, scatternd_add_with_repeats)
{
	mb *b = mb_new(18);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "4");
	init_int64(b, g, "i", "3,1", (int64_t[]){1, 1, -1}, 3);
	mb_init_floats(b, g, "u", "3", (float[]){10, 20, 30}, 3);
	Onnx__NodeProto *n = mb_node(b, g, "ScatterND", "sc", "x,i,u", "y");
	mb_attr_string(b, n, "reduction", "add");
	mb_output(b, g, "y");
	expect_run(b, (float[]){1, 2, 3, 4}, 4, (float[]){1, 32, 3, 34}, 4, 1);
	mb_free(b);
}

Test(lower_index, slice_negative_steps)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "2,5");
	init_int64(b, g, "s", "2", (int64_t[]){-1, 100}, 2);
	init_int64(b, g, "e", "2", (int64_t[]){INT64_MIN, -4}, 2);
	init_int64(b, g, "a", "2", (int64_t[]){1, 0}, 2);
	init_int64(b, g, "p", "2", (int64_t[]){-2, -1}, 2);
	mb_node(b, g, "Slice", "sl", "x,s,e,a,p", "y");
	mb_output(b, g, "y");
	/* rows 1, 0 (reversed); columns 4, 2, 0 */
	expect_run(b, (float[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 10, (float[]){9, 7, 5, 4, 2, 0}, 6, 1);
	mb_free(b);
}

/* Reflect with a crop at the end: the reflection sees the cropped axis. */
Test(lower_index, pad_reflect_after_crop)
{
	mb *b = mb_new(19);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "5");
	init_int64(b, g, "p", "2", (int64_t[]){2, -1}, 2);
	Onnx__NodeProto *n = mb_node(b, g, "Pad", "pd", "x,p", "y");
	mb_attr_string(b, n, "mode", "reflect");
	mb_output(b, g, "y");
	expect_run(b, (float[]){1, 2, 3, 4, 9}, 5, (float[]){3, 2, 1, 2, 3, 4}, 6, 1);
	mb_free(b);
}

/* The ONNX example test_resize_upsample_scales_linear, X at run time. */
Test(lower_index, resize_linear_upsample)
{
	mb *b = mb_new(19);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "1,1,2,2");
	mb_init_floats(b, g, "s", "4", (float[]){1, 1, 2, 2}, 4);
	Onnx__NodeProto *n = mb_node(b, g, "Resize", "rs", "x,,s", "y");
	mb_attr_string(b, n, "mode", "linear");
	mb_output(b, g, "y");
	expect_run(b, (float[]){1, 2, 3, 4}, 4,
	           (float[]){1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f,
	                     2.5f, 2.75f, 3.25f, 3.5f, 3, 3.25f, 3.75f, 4}, 16, 1);
	mb_free(b);
}

/* Nearest with asymmetric coordinates and the floor rule picks taps by
 * the reference's f64 arithmetic: 5 -> 3 takes 0, 1 (5/3 = 1.67), 3. */
Test(lower_index, resize_nearest_downsample_floor)
{
	mb *b = mb_new(19);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "5");
	init_int64(b, g, "z", "1", (int64_t[]){3}, 1);
	Onnx__NodeProto *n = mb_node(b, g, "Resize", "rs", "x,,,z", "y");
	mb_attr_string(b, n, "coordinate_transformation_mode", "asymmetric");
	mb_attr_string(b, n, "nearest_mode", "floor");
	mb_output(b, g, "y");
	expect_run(b, (float[]){0, 1, 2, 3, 4}, 5, (float[]){0, 1, 3}, 3, 1);
	mb_free(b);
}

/* More filter taps than the reference allows: a clear error, no kernel. */
Test(lower_index, resize_antialias_with_too_many_taps_is_refused)
{
	mb *b = mb_new(19);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "10000");
	init_int64(b, g, "z", "1", (int64_t[]){1}, 1);
	Onnx__NodeProto *n = mb_node(b, g, "Resize", "rs", "x,,,z", "y");
	mb_attr_string(b, n, "mode", "linear");
	mb_attr_int(b, n, "antialias", 1);
	mb_output(b, g, "y");
	compiled c;
	cr_assert_not(compile_model(b, &c));
	cr_expect_eq(diag_count_with("filter taps per output value is too many"), 1, "%s", diag_all());
	done(&c);
	mb_free(b);
}

Test(lower_index, depth_to_space_crd)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", F, "1,4,1,2");
	Onnx__NodeProto *n = mb_node(b, g, "DepthToSpace", "d2s", "x", "y");
	mb_attr_int(b, n, "blocksize", 2);
	mb_attr_string(b, n, "mode", "CRD");
	mb_output(b, g, "y");
	/* y[0, 0, i, w * 2 + j] = x[0, i * 2 + j, 0, w] */
	expect_run(b, (float[]){0, 1, 2, 3, 4, 5, 6, 7}, 8, (float[]){0, 2, 1, 3, 4, 6, 5, 7}, 8, 1);
	mb_free(b);
}
