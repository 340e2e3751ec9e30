/* The C target (targets/c/emit_c.c): small programs built by hand with the
 * kernel builder are emitted, compiled with the system's C compiler
 * (-std=c99 -Wall -Wextra -Werror) together with a test main, and run. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../aot/aot.h"

/* ---- building programs by hand ---- */
typedef struct {
	mc_program p;
	mc_kernel *kernels[8];
	mc_step steps[8];
	mc_weight weights[4];
	mc_io_desc inputs[4], outputs[4];
	char dir[64];
} fixture;

static void fixture_init(fixture *f, const char *name)
{
	memset(f, 0, sizeof *f);
	f->p.prefix = (char *)name;
	f->p.pool = mc_kpool_new();
	f->p.kernels = f->kernels;
	f->p.steps = f->steps;
	f->p.weights = f->weights;
	f->p.inputs = f->inputs;
	f->p.outputs = f->outputs;
	f->p.arena_align = 16;
	snprintf(f->dir, sizeof f->dir, "/tmp/mc_emit_c_XXXXXX");
	cr_assert_not_null(mkdtemp(f->dir));
}

static void fixture_free(fixture *f)
{
	for (int i = 0; i < f->p.n_kernels; i++) {
		free(f->kernels[i]->bufs);
		free(f->kernels[i]->vars);
	}
	for (int i = 0; i < f->p.n_weights; i++)
		mc_tensor_free((mc_tensor *)f->weights[i].t);
	mc_kpool_free(f->p.pool);
	if (getenv("MC_EMIT_KEEP")) { /* for reading the generated code */
		fprintf(stderr, "kept %s\n", f->dir);
		return;
	}
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
	cr_assert_eq(system(cmd), 0);
}

static mc_kernel *add_kernel(fixture *f, mc_kb *kb, const char *name)
{
	mc_kernel *k = mc_kpool_alloc(f->p.pool, sizeof *k);
	k->name = mc_kpool_strdup(f->p.pool, name);
	k->comment = mc_kpool_strdup(f->p.pool, "test kernel */ with ?\?= odd text");
	mc_kb_begin(kb, f->p.pool, k);
	f->steps[f->p.n_steps++] = (mc_step){.kind = MC_STEP_KERNEL, .kernel = f->p.n_kernels};
	f->kernels[f->p.n_kernels++] = k;
	return k;
}

static void set_io(mc_io_desc *d, const char *name, mc_dtype t, int rank, const int64_t *dims)
{
	d->name = (char *)name;
	d->dtype = t;
	d->shape.rank = rank;
	for (int i = 0; i < rank; i++)
		d->shape.dims[i] = dims[i];
}

static void place(mc_kernel *k, int buf, mc_loc_kind kind, int index, size_t offset)
{
	k->bufs[buf].loc = (mc_loc){.kind = kind, .index = index, .offset = offset};
}

/* ---- compiling and running the output ---- */
static void write_text(const char *dir, const char *file, const char *text)
{
	char path[256];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	FILE *fp = fopen(path, "w");
	cr_assert_not_null(fp);
	fputs(text, fp);
	fclose(fp);
}

/* Compiles NAME.c, NAME_weights.c and main.c with `cc` and extra flags,
 * runs the program; its exit status (0 = every check passed). */
static int build_and_run(const char *dir, const char *name, const char *cc, const char *flags)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd,
	         "cd %s && %s -std=c99 -Wall -Wextra -Werror -pedantic %s -o t %s.c %s_weights.c main.c -lm"
	         " && ./t",
	         dir, cc, flags, name, name);
	return system(cmd);
}

static bool have(const char *tool)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", tool);
	return system(cmd) == 0;
}

static void emit_build_run(fixture *f, const char *main_src)
{
	cr_assert_eq(mc_emit_c(&f->p, NULL, f->dir), 0);
	write_text(f->dir, "main.c", main_src);
	cr_assert_eq(build_and_run(f->dir, f->p.prefix, "cc", "-O1"), 0, "gcc build/run failed in %s", f->dir);
	if (have("clang"))
		cr_assert_eq(build_and_run(f->dir, f->p.prefix, "clang", "-O1"), 0, "clang failed in %s", f->dir);
}

/* y = a + b over 2x3 floats */
static void build_add(fixture *f)
{
	static const int64_t dims[2] = {2, 3};
	mc_kb kb;
	mc_kernel *k = add_kernel(f, &kb, "k0_add");
	int a = mc_kb_buf(&kb, 0, MC_FLOAT, 6, false);
	int b = mc_kb_buf(&kb, 1, MC_FLOAT, 6, false);
	int y = mc_kb_buf(&kb, 2, MC_FLOAT, 6, true);
	mc_kexpr *i = mc_kb_fori(&kb, 6, MC_KF_PARALLEL);
	mc_kb_store(&kb, y, i, mc_k_add(&kb, mc_k_load(&kb, a, i), mc_k_load(&kb, b, i)));
	mc_kb_end(&kb);
	place(k, a, MC_LOC_INPUT, 0, 0);
	place(k, b, MC_LOC_INPUT, 1, 0);
	place(k, y, MC_LOC_OUTPUT, 0, 0);
	f->p.n_inputs = 2;
	f->p.n_outputs = 1;
	set_io(&f->inputs[0], "a", MC_FLOAT, 2, dims);
	set_io(&f->inputs[1], "b?\"", MC_FLOAT, 2, dims);
	set_io(&f->outputs[0], "y", MC_FLOAT, 2, dims);
}

Test(emit_c, add_two_inputs)
{
	fixture f;
	fixture_init(&f, "addm");
	build_add(&f);
	emit_build_run(&f,
		"#include <math.h>\n#include \"addm.h\"\n"
		"int main(void) {\n"
		"	float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {0.5f, -2, 1e30f, 0, 0.25f, -7}, y[6];\n"
		"	const void *in[2] = {a, b};\n	void *out[1] = {y};\n"
		"	if (addm_run(0, in, out) != MODELC_OK) return 1;\n"
		"	for (int i = 0; i < 6; i++) if (y[i] != a[i] + b[i]) return 2;\n"
		"	in[1] = 0;\n"
		"	if (addm_run(0, in, out) != MODELC_ERR_NULL_ARGUMENT) return 3;\n"
		"	if (addm_run(0, 0, out) != MODELC_ERR_NULL_ARGUMENT) return 4;\n"
		"	if (ADDM_NUM_INPUTS != 2 || ADDM_INPUT_1_NUMEL != 6 || ADDM_OUTPUT_0_BYTES != 24) return 5;\n"
		"	if (addm_inputs[1].rank != 2 || addm_inputs[1].dims[1] != 3 || addm_inputs[1].name[1] != '?') return 6;\n"
		"	if (addm_outputs[0].dtype != MODELC_FLOAT) return 7;\n"
		"	return 0;\n}\n");
	fixture_free(&f);
}

/* Two kernels through the arena: t = x * w (weight), y = t * 0.1 + 2 */
static void build_weight_arena(fixture *f)
{
	static const int64_t dims[1] = {4};
	static const float wv[4] = {0.5f, -1.0f, 3.0f, 1e-40f};
	mc_shape s = {.rank = 1, .dims = {4}};
	mc_tensor *wt = mc_tensor_new(MC_FLOAT, &s);
	memcpy(wt->data, wv, sizeof wv);
	f->weights[0] = (mc_weight){.t = wt, .align = 64};
	mc_shape s0 = {.rank = 1, .dims = {0}};
	f->weights[1] = (mc_weight){.t = mc_tensor_new(MC_FLOAT, &s0), .align = 64};
	f->p.n_weights = 2;

	mc_kb kb;
	mc_kernel *k = add_kernel(f, &kb, "k0_mul");
	int x = mc_kb_buf(&kb, 0, MC_FLOAT, 4, false);
	int w = mc_kb_buf(&kb, 1, MC_FLOAT, 4, false);
	int t = mc_kb_buf(&kb, 2, MC_FLOAT, 4, true);
	mc_kexpr *i = mc_kb_fori(&kb, 4, 0);
	mc_kexpr *prod = mc_kb_let(&kb, mc_k_mul(&kb, mc_k_load(&kb, x, i), mc_k_load(&kb, w, i)));
	mc_kb_let(&kb, mc_k_add(&kb, prod, prod)); /* unused: must not warn */
	mc_kb_store(&kb, t, i, prod);
	mc_kb_end(&kb);
	place(k, x, MC_LOC_INPUT, 0, 0);
	place(k, w, MC_LOC_WEIGHT, 0, 0);
	place(k, t, MC_LOC_ARENA, 0, 32);

	k = add_kernel(f, &kb, "k1_affine");
	t = mc_kb_buf(&kb, 2, MC_FLOAT, 4, false);
	int y = mc_kb_buf(&kb, 3, MC_FLOAT, 4, true);
	i = mc_kb_fori(&kb, 4, 0);
	mc_kb_store(&kb, y, i,
	            mc_k_fma(&kb, mc_k_load(&kb, t, i), mc_k_float(&kb, MC_KT_F32, 0.1),
	                     mc_k_float(&kb, MC_KT_F32, 2.0)));
	mc_kb_end(&kb);
	place(k, t, MC_LOC_ARENA, 0, 32);
	place(k, y, MC_LOC_OUTPUT, 0, 0);

	f->p.arena_bytes = 48;
	f->p.n_inputs = 1;
	f->p.n_outputs = 1;
	set_io(&f->inputs[0], "x", MC_FLOAT, 1, dims);
	set_io(&f->outputs[0], "y", MC_FLOAT, 1, dims);
}

Test(emit_c, weights_and_arena)
{
	fixture f;
	fixture_init(&f, "wa");
	build_weight_arena(&f);
	emit_build_run(&f,
		"#include \"wa.h\"\n"
		"static unsigned char arena[WA_ARENA_BYTES] __attribute__((aligned(WA_ARENA_ALIGN)));\n"
		"int main(void) {\n"
		"	float x[4] = {2, 2, 2, 1e38f}, y[4];\n"
		"	const float w[4] = {0.5f, -1.0f, 3.0f, 1e-40f};\n"
		"	const void *in[1] = {x};\n	void *out[1] = {y};\n"
		"	if (wa_run(arena, in, out) != MODELC_OK) return 1;\n"
		"	for (int i = 0; i < 4; i++) { float t = x[i] * w[i]; if (y[i] != t * 0.1f + 2.0f) return 2; }\n"
		"	if (wa_run(0, in, out) != MODELC_ERR_NULL_ARGUMENT) return 3;\n"
		"	if (wa_run(arena + 1, in, out) != MODELC_ERR_MISALIGNED) return 4;\n"
		"	return 0;\n}\n");
	fixture_free(&f);
}

static char *read_all(const char *dir, const char *file, size_t *len)
{
	char path[256];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	FILE *fp = fopen(path, "rb");
	cr_assert_not_null(fp, "%s missing", path);
	fseek(fp, 0, SEEK_END);
	long n = ftell(fp);
	fseek(fp, 0, SEEK_SET);
	char *d = malloc((size_t)n + 1);
	cr_assert_eq(fread(d, 1, (size_t)n, fp), (size_t)n);
	d[n] = 0;
	fclose(fp);
	*len = (size_t)n;
	return d;
}

static long mtime_ns(const char *dir, const char *file)
{
	char path[256];
	struct stat st;
	snprintf(path, sizeof path, "%s/%s", dir, file);
	cr_assert_eq(stat(path, &st), 0);
	return (long)st.st_mtim.tv_sec * 1000000000L + st.st_mtim.tv_nsec;
}

Test(emit_c, deterministic_and_write_if_changed)
{
	static const char *const files[] = {"wa.h", "wa.c", "wa_weights.c", "modelc_rt.h"};
	fixture f;
	fixture_init(&f, "wa");
	build_weight_arena(&f);
	cr_assert_eq(mc_emit_c(&f.p, NULL, f.dir), 0);
	char *first[4];
	size_t len[4];
	long mt[4];
	for (int i = 0; i < 4; i++) {
		first[i] = read_all(f.dir, files[i], &len[i]);
		mt[i] = mtime_ns(f.dir, files[i]);
	}
	usleep(20000);
	cr_assert_eq(mc_emit_c(&f.p, NULL, f.dir), 0);
	for (int i = 0; i < 4; i++) {
		size_t n;
		char *again = read_all(f.dir, files[i], &n);
		cr_assert(n == len[i] && memcmp(again, first[i], n) == 0, "%s differs", files[i]);
		cr_assert_eq(mtime_ns(f.dir, files[i]), mt[i], "%s rewritten", files[i]);
		free(again);
	}
	/* the exact weight spellings: hex floats, 0.5 as 0x1p-1f, denormal exact */
	cr_assert(strstr(first[2], "const float wa_w0[4] MODELC_ALIGN(64) = {"));
	cr_assert(strstr(first[2], "0x1p-1f, -1.0f, 3.0f,"));
	cr_assert(strstr(first[1], "0x1.99999ap-4f"), "0.1f as a hex float");
	cr_assert(!strstr(first[2], "wa_w1"), "empty weight not emitted");
	/* a changed program rewrites only what changed */
	f.p.arena_bytes = 64;
	cr_assert_eq(mc_emit_c(&f.p, NULL, f.dir), 0);
	cr_assert_neq(mtime_ns(f.dir, "wa.h"), mt[0]);
	cr_assert_eq(mtime_ns(f.dir, "wa_weights.c"), mt[2]);
	for (int i = 0; i < 4; i++)
		free(first[i]);
	fixture_free(&f);
}

/* float16 storage: y = x * 2 (computed in f32), and a bfloat16 copy. */
Test(emit_c, half_storage)
{
	static const int64_t dims[1] = {5};
	fixture f;
	fixture_init(&f, "half");
	mc_kb kb;
	mc_kernel *k = add_kernel(&f, &kb, "k0_scale");
	int x = mc_kb_buf(&kb, 0, MC_FLOAT16, 5, false);
	int y = mc_kb_buf(&kb, 1, MC_FLOAT16, 5, true);
	int z = mc_kb_buf(&kb, 2, MC_BFLOAT16, 5, true);
	mc_kexpr *i = mc_kb_fori(&kb, 5, 0);
	mc_kexpr *v = mc_kb_let(&kb, mc_k_load(&kb, x, i));
	mc_kb_store(&kb, y, i, mc_k_mul(&kb, v, mc_k_float(&kb, MC_KT_F32, 2)));
	mc_kb_store(&kb, z, i, v);
	mc_kb_end(&kb);
	place(k, x, MC_LOC_INPUT, 0, 0);
	place(k, y, MC_LOC_OUTPUT, 0, 0);
	place(k, z, MC_LOC_OUTPUT, 1, 0);
	f.p.n_inputs = 1;
	f.p.n_outputs = 2;
	set_io(&f.inputs[0], "x", MC_FLOAT16, 1, dims);
	set_io(&f.outputs[0], "y", MC_FLOAT16, 1, dims);
	set_io(&f.outputs[1], "z", MC_BFLOAT16, 1, dims);
	/* 1.0, 65504 (max: doubles to inf), NaN, smallest subnormal, -2.5 */
	emit_build_run(&f,
		"#include \"half.h\"\n"
		"int main(void) {\n"
		"	uint16_t x[5] = {0x3c00, 0x7bff, 0x7e00, 0x0001, 0xc100}, y[5], z[5];\n"
		"	const uint16_t want_y[5] = {0x4000, 0x7c00, 0x7e00, 0x0002, 0xc500};\n"
		"	const uint16_t want_z[5] = {0x3f80, 0x4780, 0x7fc0, 0x3380, 0xc020};\n"
		"	const void *in[1] = {x};\n	void *out[2] = {y, z};\n"
		"	if (half_run(0, in, out) != MODELC_OK) return 1;\n"
		"	for (int i = 0; i < 5; i++) if (y[i] != want_y[i] || z[i] != want_z[i]) return 2 + i;\n"
		"	if (HALF_INPUT_0_DTYPE != MODELC_FLOAT16) return 9;\n"
		"	return 0;\n}\n");
	fixture_free(&f);
}

/* An If step on a bool input: then writes 1, else writes 2 (as int64). */
Test(emit_c, if_step)
{
	static const int64_t dims[1] = {3};
	fixture f;
	fixture_init(&f, "branch");
	mc_kb kb;
	int64_t fill[2] = {1, 2};
	for (int b = 0; b < 2; b++) {
		mc_kernel *k = add_kernel(&f, &kb, b ? "k1_else" : "k0_then");
		int y = mc_kb_buf(&kb, 1, MC_INT64, 3, true);
		mc_kexpr *i = mc_kb_fori(&kb, 3, 0);
		mc_kb_store(&kb, y, i, mc_k_add(&kb, mc_k_cast(&kb, MC_KT_I64, i), mc_k_int(&kb, MC_KT_I64, fill[b])));
		mc_kb_end(&kb);
		place(k, y, MC_LOC_OUTPUT, 0, 0);
	}
	/* the two kernel steps become the branches of one If step */
	static mc_step then_steps[1], else_steps[1];
	then_steps[0] = f.steps[0];
	else_steps[0] = f.steps[1];
	f.steps[0] = (mc_step){.kind = MC_STEP_IF, .cond = {.kind = MC_LOC_INPUT, .index = 0},
	                       .then_steps = then_steps, .n_then = 1,
	                       .else_steps = else_steps, .n_else = 1};
	f.p.n_steps = 1;
	f.p.n_inputs = 1;
	f.p.n_outputs = 1;
	set_io(&f.inputs[0], "cond", MC_BOOL, 0, NULL);
	set_io(&f.outputs[0], "y", MC_INT64, 1, dims);
	emit_build_run(&f,
		"#include \"branch.h\"\n"
		"int main(void) {\n"
		"	uint8_t c = 1;\n	int64_t y[3];\n"
		"	const void *in[1] = {&c};\n	void *out[1] = {y};\n"
		"	if (branch_run(0, in, out) != MODELC_OK || y[0] != 1 || y[2] != 3) return 1;\n"
		"	c = 0;\n"
		"	if (branch_run(0, in, out) != MODELC_OK || y[0] != 2 || y[2] != 4) return 2;\n"
		"	if (branch_inputs[0].rank != 0 || branch_inputs[0].dims != 0) return 3;\n"
		"	return 0;\n}\n");
	fixture_free(&f);
}

/* Integer semantics without UB, checked under UBSan: wrapping i32 add,
 * division by zero and INT_MIN / -1, saturating float->int casts, a data
 * dependent failure status. */
Test(emit_c, integer_semantics_ubsan)
{
	static const int64_t dims[1] = {4};
	fixture f;
	fixture_init(&f, "ints");
	mc_kb kb;
	mc_kernel *k = add_kernel(&f, &kb, "k0_ints");
	int a = mc_kb_buf(&kb, 0, MC_INT32, 4, false);
	int b = mc_kb_buf(&kb, 1, MC_INT32, 4, false);
	int x = mc_kb_buf(&kb, 2, MC_FLOAT, 4, false);
	int sum = mc_kb_buf(&kb, 3, MC_INT32, 4, true);
	int quo = mc_kb_buf(&kb, 4, MC_INT32, 4, true);
	int cvt = mc_kb_buf(&kb, 5, MC_UINT8, 4, true);
	int neg = mc_kb_buf(&kb, 6, MC_INT8, 4, true);
	mc_kexpr *i = mc_kb_fori(&kb, 4, 0);
	mc_kexpr *va = mc_kb_let(&kb, mc_k_load(&kb, a, i));
	mc_kexpr *vb = mc_kb_let(&kb, mc_k_load(&kb, b, i));
	/* b < -100: bad input */
	mc_kb_if(&kb, mc_k_bin(&kb, MC_KB_LT, vb, mc_k_int(&kb, MC_KT_I32, -100)));
	mc_kb_fail(&kb, MC_STATUS_BAD_INPUT);
	mc_kb_end(&kb);
	mc_kb_store(&kb, sum, i, mc_k_add(&kb, va, vb));
	mc_kb_store(&kb, quo, i, mc_k_div(&kb, va, vb));
	mc_kb_store(&kb, cvt, i, mc_k_cast(&kb, MC_KT_U8, mc_k_load(&kb, x, i)));
	mc_kexpr *n8 = mc_k_cast(&kb, MC_KT_I8, va);
	mc_kb_store(&kb, neg, i, mc_k_un(&kb, MC_KU_NEG, mc_k_bin(&kb, MC_KB_MAX, n8, mc_k_int(&kb, MC_KT_I8, -128))));
	mc_kb_end(&kb);
	place(k, a, MC_LOC_INPUT, 0, 0);
	place(k, b, MC_LOC_INPUT, 1, 0);
	place(k, x, MC_LOC_INPUT, 2, 0);
	for (int o = 0; o < 4; o++)
		place(k, sum + o, MC_LOC_OUTPUT, o, 0);
	f.p.n_inputs = 3;
	f.p.n_outputs = 4;
	set_io(&f.inputs[0], "a", MC_INT32, 1, dims);
	set_io(&f.inputs[1], "b", MC_INT32, 1, dims);
	set_io(&f.inputs[2], "x", MC_FLOAT, 1, dims);
	set_io(&f.outputs[0], "sum", MC_INT32, 1, dims);
	set_io(&f.outputs[1], "quo", MC_INT32, 1, dims);
	set_io(&f.outputs[2], "cvt", MC_UINT8, 1, dims);
	set_io(&f.outputs[3], "neg", MC_INT8, 1, dims);
	cr_assert_eq(mc_emit_c(&f.p, NULL, f.dir), 0);
	write_text(f.dir, "main.c",
		"#include <math.h>\n#include \"ints.h\"\n"
		"int main(void) {\n"
		"	int32_t a[4] = {INT32_MAX, INT32_MIN, 7, -128}, b[4] = {1, -1, 0, 2}, s[4], q[4];\n"
		"	float x[4] = {NAN, 1e10f, -5.0f, 200.7f};\n	uint8_t c[4];\n	int8_t n[4];\n"
		"	const void *in[3] = {a, b, x};\n	void *out[4] = {s, q, c, n};\n"
		"	if (ints_run(0, in, out) != MODELC_OK) return 1;\n"
		"	if (s[0] != INT32_MIN || s[1] != INT32_MAX || s[2] != 7) return 2;\n"
		"	if (q[0] != INT32_MAX || q[1] != INT32_MIN || q[2] != 0 || q[3] != -64) return 3;\n"
		"	if (c[0] != 0 || c[1] != 255 || c[2] != 0 || c[3] != 200) return 4;\n"
		"	if (n[3] != -128 || n[2] != -7) return 5;\n"
		"	b[3] = -1000;\n"
		"	if (ints_run(0, in, out) != MODELC_ERR_BAD_INPUT) return 6;\n"
		"	return 0;\n}\n");
	cr_assert_eq(build_and_run(f.dir, "ints", "cc",
	                           "-O1 -fsanitize=undefined,float-cast-overflow -fno-sanitize-recover=all"),
	             0, "UBSan build failed in %s", f.dir);
	if (have("clang"))
		cr_assert_eq(build_and_run(f.dir, "ints", "clang",
		                           "-O1 -fsanitize=undefined,float-cast-overflow -fno-sanitize-recover=all"),
		             0, "clang UBSan build failed in %s", f.dir);
	fixture_free(&f);
}

Test(emit_c, rejects_bad_name)
{
	fixture f;
	fixture_init(&f, "9bad-name");
	build_add(&f);
	cr_assert_eq(mc_emit_c(&f.p, NULL, f.dir), -1);
	fixture_free(&f);
}
