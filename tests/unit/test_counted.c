/* Data-dependent extents (libcore/counted.c): a detector's tail, boxes
 * through NonMaxSuppression and the kept ones gathered, compiled once and
 * run on inputs that keep different numbers of boxes, against the
 * interpreter; and what would read the padding as data, refused. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../../aot/aot.h"
#include "compile_helpers.h"
#include "model_builder.h"

#define BOXES 40
#define CLASSES 2

/* boxes [1, 40, 4] and scores [1, 2, 40] in; NonMaxSuppression with
 * torchvision's max_output_boxes_per_class (INT64_MAX), IoU 0.3 and a
 * score floor 0.2; its selection, and the kept boxes [K, 4] gathered
 * through its third column, out. tail: an op (ReduceMax over axis 0, or
 * Shape) on the selection, a third output; NULL: none. */
static mb *detector_tail(const char *tail)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "boxes", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "1,40,4");
	mb_input(b, g, "scores", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "1,2,40");
	int64_t most = INT64_MAX, col = 2, axis1 = 1, flat[] = { BOXES, 4 };
	float iou = 0.3f, floor = 0.2f;
	mb_init_ints(b, g, "most", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "1", &most, 1);
	mb_init_floats(b, g, "iou", "1", &iou, 1);
	mb_init_floats(b, g, "floor", "1", &floor, 1);
	mb_init_ints(b, g, "col", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "1", &col, 1);
	mb_init_ints(b, g, "axis1", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "1", &axis1, 1);
	mb_init_ints(b, g, "flat", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "2", flat, 2);
	mb_node(b, g, "NonMaxSuppression", "nms", "boxes,scores,most,iou,floor", "sel");
	Onnx__NodeProto *gc = mb_node(b, g, "Gather", "box_col", "sel,col", "idx2");
	mb_attr_int(b, gc, "axis", 1);
	mb_node(b, g, "Squeeze", "squeeze", "idx2,axis1", "idx");
	mb_node(b, g, "Reshape", "flat_boxes", "boxes,flat", "all");
	mb_node(b, g, "Gather", "kept", "all,idx", "kept");
	mb_output(b, g, "sel");
	mb_output(b, g, "kept");
	if (tail) {
		mb_attr_int(b, mb_node(b, g, "Cast", "as_float", "sel", "self"), "to", 1);
		Onnx__NodeProto *t = mb_node(b, g, tail, "tail", "self", "t");
		int64_t axis0 = 0;
		if (strcmp(tail, "Shape") != 0)
			mb_attr_ints(b, t, "axes", &axis0, 1);
		mb_output(b, g, "t");
	}
	return b;
}

/* Uniform values in [lo, hi), seeded. */
static void fill(float *x, size_t n, unsigned seed, float lo, float hi)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		x[i] = lo + (hi - lo) * (float)((seed >> 8) & 0xffff) / 65536.0f;
	}
}

static void write_bytes(const char *path, const mc_tensor *t)
{
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(t->data, 1, t->nbytes, f), t->nbytes);
	fclose(f);
}

/* The file's bytes (malloc'd) and their count. */
static char *read_bytes(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "no %s", path);
	char *d = malloc(1 << 20);
	*n = fread(d, 1, 1 << 20, f);
	fclose(f);
	return d;
}

/* Fills a model's inputs for one run: in[0..n) shaped as the graph's. */
typedef void (*fill_fn)(mc_tensor **in, unsigned seed);

static void fill_boxes(mc_tensor **in, unsigned seed)
{
	/* corners in 0..20, sides up to 10: more or fewer overlap */
	fill(in[0]->data, in[0]->numel, 7 * seed + 1, 0, 20);
	fill(in[1]->data, in[1]->numel, 7 * seed + 2, 0, 1);
	for (size_t k = 0; k < BOXES; k++) { /* [y1, x1, y2, x2], y2 = y1 + h */
		float *bx = (float *)in[0]->data + 4 * k;
		bx[2] = bx[0] + bx[2] / 2;
		bx[3] = bx[1] + bx[3] / 2;
	}
}

/* b's model compiled once with the test driver, run on 3 fillings of its
 * inputs; every output's bytes must be the interpreter's (a counted one's
 * counted entries only). The counts of output 0 go in counts[3]. */
static void compiled_against_interpreter(mb *b, fill_fn fill_in, const char *tag, int64_t *counts);

/* b compiled and run as above; then on inputs bad_in fills (seeds 0 and
 * 1), which ONNX Runtime refuses, the run must return MODELC_ERR_BAD_INPUT. */
static void compiled_refusing(mb *b, fill_fn fill_in, fill_fn bad_in, const char *tag, int64_t *counts);

static void compiled_against_interpreter(mb *b, fill_fn fill_in, const char *tag, int64_t *counts)
{
	compiled_refusing(b, fill_in, NULL, tag, counts);
}

static void compiled_refusing(mb *b, fill_fn fill_in, fill_fn bad_in, const char *tag, int64_t *counts)
{
	char dir[64], out[96], cmd[512];
	snprintf(dir, sizeof dir, "/tmp/mc_counted_XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	char *model = save_model(b, dir, "m.onnx");
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.harness = true;
	o.no_stack_usage = true;
	snprintf(out, sizeof out, "%s/out", dir);
	cr_assert_eq(mc_compile(model, out, &o), 0, "%s: did not compile", tag);
	snprintf(cmd, sizeof cmd, "cd '%s' && cc -std=c99 -O1 -Wall -Wextra -Werror t.c t_weights.c t_main.c -lm "
	         "-o main > build.log 2>&1", out);
	cr_assert_eq(system(cmd), 0, "%s: the library did not build (%s/build.log)", tag, out);
	mc_graph *g = mc_import_file(model, NULL);
	cr_assert_not_null(g);
	cr_assert_eq(mc_infer_graph(g), 0);
	int n_in = g->n_inputs, n_out = g->n_outputs;
	cr_assert(n_in <= 4 && n_out <= 4);
	for (unsigned seed = 0; seed < 3; seed++) {
		mc_tensor *in[4], *ref[4] = { NULL };
		char path[160];
		for (int i = 0; i < n_in; i++) {
			const mc_value *v = &g->values[g->inputs[i]];
			in[i] = mc_tensor_new(v->dtype, &v->shape);
		}
		fill_in(in, seed);
		cr_assert_eq(mc_interp_run(g, in, ref, NULL), 0);
		size_t len = (size_t)snprintf(cmd, sizeof cmd, "cd '%s' && mkdir -p res && out/main res", dir);
		for (int i = 0; i < n_in; i++) {
			snprintf(path, sizeof path, "%s/in%d.bin", dir, i);
			write_bytes(path, in[i]);
			len += (size_t)snprintf(cmd + len, sizeof cmd - len, " in%d.bin", i);
		}
		snprintf(cmd + len, sizeof cmd - len, " > run.log 2>&1");
		cr_assert_eq(system(cmd), 0, "%s: the run failed (%s/run.log)", tag, dir);
		counts[seed] = ref[0]->shape.dims[g->values[g->outputs[0]].count_axis];
		for (int k = 0; k < n_out; k++) {
			size_t n;
			snprintf(path, sizeof path, "%s/res/output_%d.bin", dir, k);
			char *got = read_bytes(path, &n);
			cr_expect(n == ref[k]->nbytes && memcmp(got, ref[k]->data, n) == 0,
			          "%s: output %d at seed %u: %zu bytes, the interpreter's %zu (count %lld)", tag, k, seed,
			          n, ref[k]->nbytes, (long long)counts[seed]);
			free(got);
		}
		for (int i = 0; i < n_in; i++)
			mc_tensor_free(in[i]);
		for (int k = 0; k < n_out; k++)
			mc_tensor_free(ref[k]);
	}
	cr_expect(counts[0] != counts[1] || counts[1] != counts[2], "%s: the inputs give different counts", tag);
	for (unsigned seed = 0; bad_in && seed < 2; seed++) {
		mc_tensor *in[4];
		char path[160];
		size_t len = (size_t)snprintf(cmd, sizeof cmd, "cd '%s' && out/main res", dir);
		for (int i = 0; i < n_in; i++) {
			const mc_value *v = &g->values[g->inputs[i]];
			in[i] = mc_tensor_new(v->dtype, &v->shape);
		}
		bad_in(in, seed);
		for (int i = 0; i < n_in; i++) {
			snprintf(path, sizeof path, "%s/in%d.bin", dir, i);
			write_bytes(path, in[i]);
			len += (size_t)snprintf(cmd + len, sizeof cmd - len, " in%d.bin", i);
			mc_tensor_free(in[i]);
		}
		snprintf(cmd + len, sizeof cmd - len, " > run.log 2>&1");
		int st = system(cmd);
		cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == MC_STATUS_BAD_INPUT,
		          "%s: invalid input %u: exit status %d, not MODELC_ERR_BAD_INPUT", tag, seed,
		          WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
	mc_graph_free(g);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
	free(model);
}

Test(counted, nms_detector_every_count_served, .timeout = 240)
{
	char dir[64], out[96], path[160], cmd[128];
	snprintf(dir, sizeof dir, "/tmp/mc_counted_XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	char *model = save_model(detector_tail(NULL), dir, "m.onnx");
	/* the selection counted on its rows, to classes x boxes */
	mc_graph *g = mc_import_file(model, NULL);
	cr_assert(g && mc_infer_graph(g) == 0);
	const mc_value *sel = &g->values[g->outputs[0]];
	cr_expect(sel->counted && sel->count_axis == 0 && sel->shape.dims[0] == CLASSES * BOXES);
	mc_graph_free(g);
	/* the header: the counted axes and the run that gives the counts */
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.no_stack_usage = true;
	snprintf(out, sizeof out, "%s/out", dir);
	cr_assert_eq(mc_compile(model, out, &o), 0);
	size_t n;
	snprintf(path, sizeof path, "%s/t.h", out);
	char *h = read_bytes(path, &n);
	h[n < (1 << 20) ? n : (1 << 20) - 1] = 0;
	cr_expect(strstr(h, "#define T_OUTPUT_0_COUNTED_AXIS 0") && strstr(h, "#define T_OUTPUT_1_COUNTED_AXIS 0") &&
	          strstr(h, "int t_run_counted(") && !strstr(h, "int t_run("),
	          "the header names the counted axes and declares t_run_counted only");
	free(h);
	free(model);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
	int64_t counts[3];
	compiled_against_interpreter(detector_tail(NULL), fill_boxes, "nms", counts);
	cr_expect(counts[0] > 0 && counts[1] > 0 && counts[2] > 0);
}

/* x[x > 0.3] as exporters write it: NonZero of the mask, transposed to
 * [K, 2] coordinates, GatherND. */
static mb *masked(void)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "6,7");
	float t = 0.3f;
	mb_init_floats(b, g, "t", "", &t, 1);
	mb_node(b, g, "Greater", "mask", "x,t", "m");
	mb_node(b, g, "NonZero", "nz", "m", "nz");
	mb_node(b, g, "Transpose", "coords", "nz", "at");
	mb_node(b, g, "GatherND", "pick", "x,at", "y");
	mb_output(b, g, "y");
	mb_output(b, g, "at");
	return b;
}

static void fill_x(mc_tensor **in, unsigned seed)
{
	fill(in[0]->data, in[0]->numel, 11 * seed + 3, -1, 1);
}

Test(counted, nonzero_mask_every_count_served, .timeout = 240)
{
	int64_t counts[3];
	compiled_against_interpreter(masked(), fill_x, "nonzero", counts);
}

/* TopK with k an input: values and indices [3, k] of x [3, 10], then
 * the values doubled (a pointwise op keeps the count). */
static mb *topk_runtime_k(void)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "3,10");
	mb_input(b, g, "k", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "1");
	float two = 2;
	mb_init_floats(b, g, "two", "", &two, 1);
	mb_node(b, g, "TopK", "top", "x,k", "v,i");
	mb_node(b, g, "Mul", "double", "v,two", "y");
	mb_output(b, g, "y");
	mb_output(b, g, "i");
	return b;
}

static void fill_x_k(mc_tensor **in, unsigned seed)
{
	fill(in[0]->data, in[0]->numel, 5 * seed + 9, -1, 1);
	*(int64_t *)in[1]->data = 2 + 3 * (int64_t)seed; /* 2, 5, 8 */
}

/* k outside [0, 10]: 11, then -1 */
static void fill_bad_k(mc_tensor **in, unsigned seed)
{
	fill_x_k(in, 0);
	*(int64_t *)in[1]->data = seed ? -1 : 11;
}

Test(counted, topk_runtime_k_every_count_served, .timeout = 240)
{
	int64_t counts[3];
	compiled_refusing(topk_runtime_k(), fill_x_k, fill_bad_k, "topk", counts);
	cr_expect(counts[0] == 2 && counts[1] == 5 && counts[2] == 8);
}

/* Compress of x [3, 8] along axis 1 by a condition known at run time,
 * cond_len long (longer than 8: true there is invalid): [3, K], counted
 * on axis 1 (blocks of the bound in the arena, of K in the file). */
static mb *compress_runtime(const char *cond_len)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "3,8");
	mb_input(b, g, "keep", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, cond_len);
	mb_attr_int(b, mb_node(b, g, "Compress", "pick", "x,keep", "y"), "axis", 1);
	mb_output(b, g, "y");
	return b;
}

static void fill_x_keep(mc_tensor **in, unsigned seed)
{
	fill(in[0]->data, in[0]->numel, 3 * seed + 4, -1, 1);
	uint8_t *keep = in[1]->data;
	for (int i = 0; i < 8; i++) /* 1, 4 and 6 of the 8 */
		keep[i] = seed == 0 ? i == 5 : seed == 1 ? i % 2 == 0 : i != 2 && i != 7;
}

static void fill_x_keep10(mc_tensor **in, unsigned seed)
{
	fill(in[0]->data, in[0]->numel, 3 * seed + 4, -1, 1);
	uint8_t *keep = in[1]->data;
	for (int i = 0; i < 10; i++)
		keep[i] = i < 8 && (i + (int)seed) % 3 == 0;
}

static void fill_bad_keep(mc_tensor **in, unsigned seed)
{
	fill_x_keep10(in, 0);
	((uint8_t *)in[1]->data)[8 + seed] = 1;
}

Test(counted, compress_runtime_condition_every_count_served, .timeout = 240)
{
	int64_t counts[3];
	compiled_refusing(compress_runtime("10"), fill_x_keep10, fill_bad_keep, "compress, long condition", counts);
	compiled_against_interpreter(compress_runtime("8"), fill_x_keep, "compress", counts);
	cr_expect(counts[0] == 1 && counts[1] == 4 && counts[2] == 6);
}

/* Unique of x [4, 6] along axis 1 (sorted) or flattened (in order of
 * first place): all four outputs. */
static mb *unique_of(bool by_axis)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "4,6");
	Onnx__NodeProto *u = mb_node(b, g, "Unique", "u", "x", "y,first,inverse,times");
	if (by_axis)
		mb_attr_int(b, u, "axis", 1);
	else
		mb_attr_int(b, u, "sorted", 0);
	mb_output(b, g, "y");
	mb_output(b, g, "first");
	mb_output(b, g, "inverse");
	mb_output(b, g, "times");
	return b;
}

/* values from a set of 2, 3 or 4: repeats, more or fewer */
static void fill_repeats(mc_tensor **in, unsigned seed)
{
	float *x = in[0]->data;
	unsigned r = 17 * seed + 5;
	for (size_t i = 0; i < in[0]->numel; i++) {
		r = r * 1103515245u + 12345u;
		x[i] = (float)((r >> 16) % (2 + seed)) - 1.5f;
	}
}

/* columns from a set of 2, 3 or 4 (each column's 4 values alike) */
static void fill_column_repeats(mc_tensor **in, unsigned seed)
{
	float *x = in[0]->data;
	for (int j = 0; j < 6; j++) {
		int pick = (int)((j * 7 + seed * 3) % (2 + seed));
		for (int i = 0; i < 4; i++)
			x[i * 6 + j] = (float)(pick * 4 + i) * 0.25f;
	}
}

Test(counted, unique_every_count_served, .timeout = 240)
{
	int64_t counts[3];
	compiled_against_interpreter(unique_of(false), fill_repeats, "unique, flattened", counts);
	compiled_against_interpreter(unique_of(true), fill_column_repeats, "unique, axis 1", counts);
	cr_expect(counts[0] == 2 && counts[1] == 3 && counts[2] == 4, "%lld %lld %lld", (long long)counts[0],
	          (long long)counts[1], (long long)counts[2]);
}

/* What would read the padding as data is refused at compile time, naming
 * the node: a reduction over the counted axis, the Shape of it (the bound,
 * not the count). */
Test(counted, padding_never_read_as_data)
{
	char dir[64], out[96], cmd[128];
	snprintf(dir, sizeof dir, "/tmp/mc_counted_XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	const char *tails[] = { "ReduceMax", "Shape" };
	for (int i = 0; i < 2; i++) {
		char *model = save_model(detector_tail(tails[i]), dir, "m.onnx");
		mc_compile_opts o;
		mc_compile_opts_init(&o);
		o.name = "t";
		snprintf(out, sizeof out, "%s/out", dir);
		cr_expect_neq(mc_compile(model, out, &o), 0, "%s over the counted axis compiled", tails[i]);
		free(model);
	}
	/* and what has no NAME_run_counted yet */
	char *model = save_model(detector_tail(NULL), dir, "m.onnx");
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.io_in_arena = true;
	cr_expect_neq(mc_compile(model, out, &o), 0, "--io-in-arena with a counted output compiled");
	free(model);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
}
