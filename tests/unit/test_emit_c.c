/* The C target (targets/c/emit_c.c): small programs built by hand with the
 * kernel builder are emitted, compiled with the system's C compiler
 * (-std=c99 -Wall -Wextra -Werror) together with a test main, and run. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../aot/aot.h"
#include "compile_helpers.h"
#include "model_builder.h"

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
	k->comment = mc_kpool_strdup(f->p.pool, "test kernel */ with ?\?= odd text /* \\\n*\\?\?/");
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
		"	{ static const int64_t shape[] = ADDM_INPUT_1_SHAPE; if (shape[0] != 2 || shape[1] != 3) return 8; }\n"
		"	if (ADDM_INPUT_1_NAME[1] != '?' || ADDM_INPUT_1_NAME[2] != '\"' || ADDM_OUTPUT_0_NAME[0] != 'y') return 9;\n"
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
	char *d = read_file_in(dir, file, len);
	cr_assert_not_null(d, "%s/%s missing", dir, file);
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

/* ---- every operation on every type, compiled warning-free and run under
 * UBSan on extreme values (INT_MIN-like, -1/NaN, 0, huge) ---- */
static const mc_kbinop int_binops[] = {
	MC_KB_ADD, MC_KB_SUB, MC_KB_MUL, MC_KB_DIV, MC_KB_REM, MC_KB_MIN, MC_KB_MAX,
	MC_KB_AND, MC_KB_OR, MC_KB_XOR, MC_KB_SHL, MC_KB_SHR,
};
static const mc_kbinop compares[] = {
	MC_KB_LT, MC_KB_LE, MC_KB_GT, MC_KB_GE, MC_KB_EQ, MC_KB_NE,
};
static const mc_kbinop float_binops[] = {
	MC_KB_ADD, MC_KB_SUB, MC_KB_MUL, MC_KB_DIV, MC_KB_FMOD, MC_KB_POW, MC_KB_ATAN2,
	MC_KB_MIN, MC_KB_MAX,
};
static const mc_ktype all_ints[] = {
	MC_KT_I8, MC_KT_U8, MC_KT_I16, MC_KT_U16, MC_KT_I32, MC_KT_U32, MC_KT_I64, MC_KT_U64,
};

/* acc ^= each op of a, b and of a against the type's limits */
static mc_kexpr *int_ops(mc_kb *kb, mc_kexpr *a, mc_kexpr *b)
{
	mc_ktype t = a->type;
	mc_kexpr *acc = mc_kb_local(kb, a);
	for (size_t j = 0; j < sizeof int_binops / sizeof *int_binops; j++)
		mc_kb_assign(kb, acc, mc_k_bin(kb, MC_KB_XOR, acc, mc_k_bin(kb, int_binops[j], a, b)));
	int64_t limits[] = {0, -1, INT8_MIN, 255, INT32_MIN, UINT32_MAX, INT64_MIN, 7};
	for (size_t j = 0; j < sizeof compares / sizeof *compares; j++) {
		mc_kb_assign(kb, acc, mc_k_bin(kb, MC_KB_XOR, acc, mc_k_cast(kb, t, mc_k_bin(kb, compares[j], a, b))));
		for (size_t l = 0; l < sizeof limits / sizeof *limits; l++) {
			mc_kexpr *c = mc_k_int(kb, t, limits[l]);
			mc_kexpr *cmp = l % 2 ? mc_k_bin(kb, compares[j], a, c) : mc_k_bin(kb, compares[j], c, a);
			mc_kb_assign(kb, acc, mc_k_bin(kb, MC_KB_XOR, acc, mc_k_cast(kb, t, cmp)));
		}
	}
	mc_kb_assign(kb, acc, mc_k_bin(kb, MC_KB_XOR, acc, mc_k_div(kb, a, mc_k_int(kb, t, -1))));
	mc_kb_assign(kb, acc, mc_k_bin(kb, MC_KB_XOR, acc, mc_k_bin(kb, MC_KB_REM, mc_k_int(kb, t, INT64_MIN), b)));
	static const mc_kunop uns[] = {MC_KU_NEG, MC_KU_BITNOT, MC_KU_ABS, MC_KU_FLOOR, MC_KU_ROUND};
	for (size_t j = 0; j < sizeof uns / sizeof *uns; j++)
		mc_kb_assign(kb, acc, mc_k_bin(kb, MC_KB_XOR, acc, mc_k_un(kb, uns[j], a)));
	mc_kb_assign(kb, acc, mc_k_bin(kb, MC_KB_XOR, acc, mc_k_cast(kb, t, mc_k_un(kb, MC_KU_NOT, mc_k_cast(kb, MC_KT_BOOL, a)))));
	mc_kb_assign(kb, acc, mc_k_bin(kb, MC_KB_XOR, acc, mc_k_cast(kb, t, mc_k_un(kb, MC_KU_ISNAN, b))));
	for (size_t j = 0; j < sizeof all_ints / sizeof *all_ints; j++)
		mc_kb_assign(kb, acc, mc_k_bin(kb, MC_KB_XOR, acc, mc_k_cast(kb, t, mc_k_cast(kb, all_ints[j], a))));
	mc_kexpr *f = mc_k_cast(kb, MC_KT_F32, a), *d = mc_k_cast(kb, MC_KT_F64, b);
	mc_kb_assign(kb, acc, mc_k_bin(kb, MC_KB_XOR, acc, mc_k_cast(kb, t, mc_k_mul(kb, f, mc_k_float(kb, MC_KT_F32, 3.5)))));
	mc_kb_assign(kb, acc, mc_k_bin(kb, MC_KB_XOR, acc, mc_k_cast(kb, t, mc_k_mul(kb, d, mc_k_float(kb, MC_KT_F64, -1e300)))));
	mc_kb_assign(kb, acc, mc_k_select(kb, mc_k_bin(kb, MC_KB_LT, a, b), acc, mc_k_fma(kb, a, b, acc)));
	if (t == MC_KT_I32) { /* the Arm DSP forms (modelc_rt.h) and the clamps printed as SSAT/USAT */
		mc_kexpr *sx = mc_k_un(kb, MC_KU_SXTB16, a), *sh = mc_k_un(kb, MC_KU_SXTB16_HI, b);
		mc_kb_assign(kb, acc, mc_k_dot2(kb, sx, sh, acc));
		mc_kb_assign(kb, acc, mc_k_dot2(kb, a, b, acc));
		mc_kexpr *low = mc_k_bin(kb, MC_KB_AND, b, mc_k_int(kb, t, 31));
		mc_kb_assign(kb, acc, mc_k_add(kb, acc, mc_k_rq32(kb, a, b, low, false)));
		mc_kb_assign(kb, acc, mc_k_add(kb, acc, mc_k_rq32(kb, acc, a, low, true)));
		mc_kexpr *s8 = mc_k_bin(kb, MC_KB_MAX, acc, mc_k_int(kb, t, -128));
		mc_kb_assign(kb, acc, mc_k_bin(kb, MC_KB_ADD, acc, mc_k_bin(kb, MC_KB_MIN, s8, mc_k_int(kb, t, 127))));
		mc_kexpr *u8 = mc_k_bin(kb, MC_KB_MAX, acc, mc_k_int(kb, t, 0));
		mc_kb_assign(kb, acc, mc_k_bin(kb, MC_KB_ADD, acc, mc_k_bin(kb, MC_KB_MIN, u8, mc_k_int(kb, t, 255))));
	}
	return acc;
}

static mc_kexpr *float_ops(mc_kb *kb, mc_kexpr *a, mc_kexpr *b)
{
	mc_ktype t = a->type;
	mc_kexpr *acc = mc_kb_local(kb, a);
	for (size_t j = 0; j < sizeof float_binops / sizeof *float_binops; j++)
		mc_kb_assign(kb, acc, mc_k_add(kb, acc, mc_k_bin(kb, float_binops[j], a, b)));
	for (size_t j = 0; j < sizeof compares / sizeof *compares; j++)
		mc_kb_assign(kb, acc, mc_k_add(kb, acc, mc_k_cast(kb, t, mc_k_bin(kb, compares[j], a, b))));
	for (int op = MC_KU_NEG; op < MC_KU__COUNT; op++) {
		if (op == MC_KU_NOT || op == MC_KU_BITNOT || op == MC_KU_SXTB16 || op == MC_KU_SXTB16_HI)
			continue; /* integer only */
		mc_kb_assign(kb, acc, mc_k_add(kb, acc, mc_k_cast(kb, t, mc_k_un(kb, (mc_kunop)op, a))));
	}
	for (size_t j = 0; j < sizeof all_ints / sizeof *all_ints; j++)
		mc_kb_assign(kb, acc, mc_k_add(kb, acc, mc_k_cast(kb, t, mc_k_cast(kb, all_ints[j], b))));
	mc_kb_assign(kb, acc, mc_k_add(kb, acc, mc_k_cast(kb, t, mc_k_cast(kb, MC_KT_BOOL, b))));
	mc_kb_assign(kb, acc, mc_k_add(kb, acc, mc_k_cast(kb, t, mc_k_cast(kb, MC_KT_INDEX, b))));
	mc_kb_assign(kb, acc, mc_k_add(kb, acc, mc_k_cast(kb, t, mc_k_cast(kb, t == MC_KT_F32 ? MC_KT_F64 : MC_KT_F32, b))));
	mc_kexpr *consts[] = {
		mc_k_float(kb, t, NAN), mc_k_float(kb, t, -INFINITY), mc_k_float(kb, t, -0.0),
		mc_k_float(kb, t, 1e-45), mc_k_float(kb, t, 3.4028234663852886e38), mc_k_float(kb, t, 0.1),
	};
	for (size_t j = 0; j < sizeof consts / sizeof *consts; j++)
		mc_kb_assign(kb, acc, mc_k_fma(kb, acc, consts[j], mc_k_select(kb, mc_k_bin(kb, MC_KB_LT, a, consts[j]), a, b)));
	return acc;
}

static mc_kexpr *bool_ops(mc_kb *kb, mc_kexpr *a, mc_kexpr *b)
{
	static const mc_kbinop ops[] = {MC_KB_AND, MC_KB_OR, MC_KB_XOR, MC_KB_MIN, MC_KB_MAX,
	                                MC_KB_EQ, MC_KB_NE, MC_KB_LT, MC_KB_GE};
	mc_kexpr *acc = mc_kb_local(kb, a);
	for (size_t j = 0; j < sizeof ops / sizeof *ops; j++)
		mc_kb_assign(kb, acc, mc_k_bin(kb, MC_KB_XOR, acc, mc_k_bin(kb, ops[j], a, b)));
	mc_kb_assign(kb, acc, mc_k_bin(kb, MC_KB_XOR, acc, mc_k_un(kb, MC_KU_NOT, a)));
	mc_kb_assign(kb, acc, mc_k_bin(kb, MC_KB_XOR, acc, mc_k_un(kb, MC_KU_BITNOT, b)));
	mc_kb_assign(kb, acc, mc_k_bin(kb, MC_KB_XOR, acc, mc_k_cast(kb, MC_KT_BOOL, mc_k_cast(kb, MC_KT_F32, a))));
	mc_kb_assign(kb, acc, mc_k_bin(kb, MC_KB_XOR, acc, mc_k_cast(kb, MC_KT_BOOL, mc_k_cast(kb, MC_KT_U64, b))));
	return acc;
}

Test(emit_c, every_op_every_type_ubsan)
{
	static const mc_dtype dtypes[] = {
		MC_FLOAT, MC_DOUBLE, MC_FLOAT16, MC_BFLOAT16, MC_FLOAT8E4M3FN, MC_FLOAT8E4M3FNUZ,
		MC_FLOAT8E5M2, MC_FLOAT8E5M2FNUZ, MC_FLOAT4E2M1, MC_FLOAT8E8M0,
		MC_INT8, MC_UINT8, MC_INT16, MC_UINT16, MC_INT32, MC_UINT32, MC_INT64, MC_UINT64,
		MC_INT4, MC_UINT4, MC_INT2, MC_UINT2, MC_BOOL,
	};
	enum { N = sizeof dtypes / sizeof *dtypes };
	static const int64_t dims[1] = {4};
	static mc_io_desc ins[N], outs[N];
	fixture f;
	fixture_init(&f, "sink");
	f.p.inputs = ins;
	f.p.outputs = outs;
	mc_kb kb;
	mc_kernel *k = add_kernel(&f, &kb, "k0_sink");
	for (int d = 0; d < N; d++) {
		int in = mc_kb_buf(&kb, 2 * d, dtypes[d], 4, false);
		int out = mc_kb_buf(&kb, 2 * d + 1, dtypes[d], 4, true);
		place(k, in, MC_LOC_INPUT, d, 0);
		place(k, out, MC_LOC_OUTPUT, d, 0);
		set_io(&ins[d], "in", dtypes[d], 1, dims);
		set_io(&outs[d], "out", dtypes[d], 1, dims);
		mc_kexpr *i = mc_kb_fori(&kb, 4, MC_KF_PARALLEL | MC_KF_VECTOR);
		mc_kexpr *a = mc_kb_let(&kb, mc_k_load(&kb, in, i));
		/* b = in[(i + 1) % 4], and index min/max/div exercised on the way */
		mc_kexpr *j = mc_k_bin(&kb, MC_KB_REM, mc_k_addi(&kb, i, 1), mc_k_index(&kb, 4));
		j = mc_k_bin(&kb, MC_KB_MIN, mc_k_bin(&kb, MC_KB_MAX, j, mc_k_index(&kb, 0)), mc_k_index(&kb, 3));
		mc_kexpr *b = mc_kb_let(&kb, mc_k_load(&kb, in, j));
		mc_kexpr *r;
		if (a->type == MC_KT_BOOL)
			r = bool_ops(&kb, a, b);
		else if (mc_ktype_is_float(a->type))
			r = float_ops(&kb, a, b);
		else
			r = int_ops(&kb, a, b);
		mc_kb_store(&kb, out, i, r);
		mc_kb_end(&kb);
	}
	f.p.n_inputs = f.p.n_outputs = N;
	cr_assert_eq(mc_emit_c(&f.p, NULL, f.dir), 0);
	write_text(f.dir, "main.c",
		"#include <string.h>\n#include \"sink.h\"\n"
		"static const unsigned char fill[4] = {0x80, 0xff, 0x00, 0x7f};\n"
		"static unsigned char data[2 * SINK_NUM_INPUTS][32] __attribute__((aligned(8)));\n"
		"int main(void) {\n"
		"	const void *in[SINK_NUM_INPUTS];\n	void *out[SINK_NUM_OUTPUTS];\n"
		"	for (int i = 0; i < SINK_NUM_INPUTS; i++) {\n"
		"		int size = (int)(sizeof data[0] / 4);\n"
		"		int es = sink_inputs[i].dtype == MODELC_DOUBLE || sink_inputs[i].dtype == MODELC_INT64 ||\n"
		"		         sink_inputs[i].dtype == MODELC_UINT64 ? 8 : 4;\n"
		"		(void)size;\n"
		"		for (int e = 0; e < 4; e++) memset(data[i] + e * es, fill[e], (size_t)es);\n"
		"		in[i] = data[i];\n		out[i] = data[SINK_NUM_INPUTS + i];\n"
		"	}\n"
		"	return sink_run(0, in, out) != MODELC_OK;\n}\n");
	const char *san = "-O1 -fsanitize=undefined,float-cast-overflow -fno-sanitize-recover=all";
	cr_assert_eq(build_and_run(f.dir, "sink", "cc", san), 0, "gcc failed in %s", f.dir);
	cr_assert_eq(build_and_run(f.dir, "sink", "cc", "-O2"), 0, "gcc -O2 failed in %s", f.dir);
	if (have("clang"))
		cr_assert_eq(build_and_run(f.dir, "sink", "clang", san), 0, "clang failed in %s", f.dir);
	fixture_free(&f);
}

/* ---- storage conversions of the generated code against libcore's ---- */
static void put_array(char **p, const char *type, const char *name, size_t n, const double *v, bool as_float)
{
	*p += sprintf(*p, "static const %s %s[%zu] = {", type, name, n);
	for (size_t i = 0; i < n; i++)
		*p += !as_float ? sprintf(*p, "%lld,", (long long)v[i])
		      : isnan(v[i]) ? sprintf(*p, "NAN,")
		      : isinf(v[i]) ? sprintf(*p, "%sINFINITY,", v[i] < 0 ? "-" : "")
		                    : sprintf(*p, "%a,", v[i]);
	*p += sprintf(*p, "};\n");
}

/* Every small-float type and the 16-bit floats, in one program: codes
 * 0..255 loaded to f32 (compared with mc_small_float_to_double), and a
 * spread of f32 values stored (compared with mc_set_f, which saturates,
 * except that inf stays inf in float8e5m2: data moved through a kernel
 * keeps its codes). */
Test(emit_c, small_float_storage_matches_libcore)
{
	static const mc_dtype types[] = {
		MC_FLOAT8E4M3FN, MC_FLOAT8E4M3FNUZ, MC_FLOAT8E5M2, MC_FLOAT8E5M2FNUZ,
		MC_FLOAT4E2M1, MC_FLOAT8E8M0, MC_FLOAT16, MC_BFLOAT16,
	};
	enum { NT = sizeof types / sizeof *types, NV = 64 };
	static mc_io_desc ins[2 * NT], outs[2 * NT];
	double vals[NV];
	for (int i = 0; i < NV; i++) /* ties, subnormals, overflow, inf, NaN */
		vals[i] = i % 8 == 7 ? -ldexp(1.0 + i / 64.0, i / 2 - 20) : ldexp(1.0 + (i % 5) / 8.0, i - 30) * (i % 3 ? 1 : -1);
	vals[0] = NAN;
	vals[1] = INFINITY;
	vals[2] = -0.0;
	vals[3] = 0.0;
	vals[4] = 1e30;
	vals[5] = 0.3125; /* ties in e2m1/e4m3 */
	vals[6] = 5.0;
	fixture f;
	fixture_init(&f, "sf");
	f.p.inputs = ins;
	f.p.outputs = outs;
	mc_kb kb;
	mc_kernel *k = add_kernel(&f, &kb, "k0_conv");
	/* main.c: file-scope data (p), setup (q) and checks (r) per type */
	char *src = malloc(1 << 20), *p = src, *setup = malloc(1 << 16), *q = setup, *checks = malloc(1 << 16), *r = checks;
	p += sprintf(p, "#include <math.h>\n#include \"sf.h\"\n");
	static double want_dec[256], want_enc[NV], xs[NV];
	for (int v = 0; v < NV; v++)
		xs[v] = (float)vals[v];
	put_array(&p, "float", "xs", NV, xs, true);
	for (int t = 0; t < NT; t++) {
		mc_dtype dt = types[t];
		bool half = dt == MC_FLOAT16 || dt == MC_BFLOAT16;
		int ncodes = dt == MC_FLOAT4E2M1 ? 16 : 256;
		int codes = mc_kb_buf(&kb, 4 * t, dt, 256, false);
		int decoded = mc_kb_buf(&kb, 4 * t + 1, MC_FLOAT, 256, true);
		int x = mc_kb_buf(&kb, 4 * t + 2, MC_FLOAT, NV, false);
		int enc = mc_kb_buf(&kb, 4 * t + 3, dt, NV, true);
		mc_kexpr *i = mc_kb_fori(&kb, ncodes, 0);
		mc_kb_store(&kb, decoded, i, mc_k_load(&kb, codes, i));
		mc_kb_end(&kb);
		i = mc_kb_fori(&kb, NV, 0);
		mc_kb_store(&kb, enc, i, mc_k_load(&kb, x, i));
		mc_kb_end(&kb);
		place(k, codes, MC_LOC_INPUT, 2 * t, 0);
		place(k, x, MC_LOC_INPUT, 2 * t + 1, 0);
		place(k, decoded, MC_LOC_OUTPUT, 2 * t, 0);
		place(k, enc, MC_LOC_OUTPUT, 2 * t + 1, 0);
		int64_t n256[1] = {256}, nv[1] = {NV};
		set_io(&ins[2 * t], "codes", dt, 1, n256);
		set_io(&ins[2 * t + 1], "x", MC_FLOAT, 1, nv);
		set_io(&outs[2 * t], "decoded", MC_FLOAT, 1, n256);
		set_io(&outs[2 * t + 1], "enc", dt, 1, nv);

		mc_shape s = {.rank = 1, .dims = {1}};
		mc_tensor *one = mc_tensor_new(dt, &s);
		for (int c = 0; c < 256; c++) {
			((uint8_t *)one->data)[0] = (uint8_t)c; /* the low byte of a half */
			want_dec[c] = c < ncodes ? (float)mc_get_f(one, 0) : 0;
		}
		for (int v = 0; v < NV; v++) {
			mc_set_f(one, 0, xs[v]);
			want_enc[v] = half ? ((uint16_t *)one->data)[0] : ((uint8_t *)one->data)[0];
			if (dt == MC_FLOAT8E5M2 && isinf(xs[v]))
				want_enc[v] = xs[v] < 0 ? 0xfc : 0x7c;
		}
		mc_tensor_free(one);
		char name[32];
		snprintf(name, sizeof name, "want_dec%d", t);
		put_array(&p, "float", name, 256, want_dec, true);
		snprintf(name, sizeof name, "want_enc%d", t);
		put_array(&p, "unsigned", name, NV, want_enc, false);
		const char *st = half ? "uint16_t" : "uint8_t";
		p += sprintf(p, "static %s codes%d[256], enc%d[%d];\nstatic float dec%d[256];\n", st, t, t, NV, t);
		q += sprintf(q, "\tfor (int c = 0; c < 256; c++) codes%d[c] = (%s)c;\n"
		                "\tin[%d] = codes%d; in[%d] = xs; out[%d] = dec%d; out[%d] = enc%d;\n",
		             t, st, 2 * t, t, 2 * t + 1, 2 * t, t, 2 * t + 1, t);
		r += sprintf(r, "\tfor (int c = 0; c < %d; c++)\n"
		                "\t\tif (!(dec%d[c] == want_dec%d[c] || (isnan(dec%d[c]) && isnan(want_dec%d[c])))) return 10 + %d;\n"
		                "\tfor (int v = 0; v < %d; v++) if (enc%d[v] != want_enc%d[v]) return 20 + %d;\n",
		             ncodes, t, t, t, t, t, NV, t, t, t);
	}
	p += sprintf(p, "int main(void) {\n\tconst void *in[%d];\n\tvoid *out[%d];\n%s"
	                "\tif (sf_run(0, in, out) != MODELC_OK) return 1;\n%s\treturn 0;\n}\n",
	             2 * NT, 2 * NT, setup, checks);
	free(setup);
	free(checks);
	f.p.n_inputs = f.p.n_outputs = 2 * NT;
	emit_build_run(&f, src);
	free(src);
	fixture_free(&f);
}

/* Loops that break, a failure status from inside a nested loop, a mutable
 * local never read, sub-byte integer stores wrapping like libcore's. */
Test(emit_c, break_fail_and_int4)
{
	static const int64_t dims[1] = {6};
	fixture f;
	fixture_init(&f, "ctl");
	mc_kb kb;
	mc_kernel *k = add_kernel(&f, &kb, "k0_find");
	int x = mc_kb_buf(&kb, 0, MC_INT64, 6, false);
	int first = mc_kb_buf(&kb, 1, MC_INT64, 1, true);
	int i4 = mc_kb_buf(&kb, 2, MC_INT4, 6, true);
	int u2 = mc_kb_buf(&kb, 3, MC_UINT2, 6, true);
	/* first index with x[i] > 10, or -1; x[i] < -100 anywhere fails */
	mc_kexpr *found = mc_kb_local(&kb, mc_k_int(&kb, MC_KT_I64, -1));
	mc_kexpr *unused = mc_kb_local(&kb, mc_k_int(&kb, MC_KT_I32, 0));
	mc_kexpr *i = mc_kb_fori(&kb, 6, 0);
	mc_kexpr *v = mc_kb_let(&kb, mc_k_load(&kb, x, i));
	mc_kb_assign(&kb, unused, mc_k_cast(&kb, MC_KT_I32, v));
	mc_kb_if(&kb, mc_k_bin(&kb, MC_KB_GT, v, mc_k_int(&kb, MC_KT_I64, 10)));
	mc_kb_assign(&kb, found, mc_k_cast(&kb, MC_KT_I64, i));
	mc_kb_break(&kb);
	mc_kb_end(&kb);
	mc_kb_end(&kb);
	mc_kb_store(&kb, first, mc_k_index(&kb, 0), found);
	i = mc_kb_fori(&kb, 2, 0);
	mc_kexpr *j = mc_kb_fori(&kb, 3, 0);
	mc_kexpr *lin = mc_k_add(&kb, mc_k_muli(&kb, i, 3), j);
	v = mc_kb_let(&kb, mc_k_load(&kb, x, lin));
	mc_kb_if(&kb, mc_k_bin(&kb, MC_KB_LT, v, mc_k_int(&kb, MC_KT_I64, -100)));
	mc_kb_fail(&kb, MC_STATUS_BAD_INDEX);
	mc_kb_else(&kb);
	mc_kb_store(&kb, i4, lin, mc_k_cast(&kb, MC_KT_I8, v));
	mc_kb_store(&kb, u2, lin, mc_k_cast(&kb, MC_KT_U8, v));
	mc_kb_end_n(&kb, 3);
	place(k, x, MC_LOC_INPUT, 0, 0);
	for (int o = 0; o < 3; o++)
		place(k, first + o, MC_LOC_OUTPUT, o, 0);
	f.p.n_inputs = 1;
	f.p.n_outputs = 3;
	int64_t one[1] = {1};
	set_io(&f.inputs[0], "x", MC_INT64, 1, dims);
	set_io(&f.outputs[0], "first", MC_INT64, 1, one);
	set_io(&f.outputs[1], "i4", MC_INT4, 1, dims);
	set_io(&f.outputs[2], "u2", MC_UINT2, 1, dims);
	emit_build_run(&f,
		"#include \"ctl.h\"\n"
		"int main(void) {\n"
		"	int64_t x[6] = {3, 8, 9, 11, 12, -5}, first;\n	int8_t i4[6];\n	uint8_t u2[6];\n"
		"	const void *in[1] = {x};\n	void *out[3] = {&first, i4, u2};\n"
		"	if (ctl_run(0, in, out) != MODELC_OK || first != 3) return 1;\n"
		"	if (i4[0] != 3 || i4[1] != -8 || i4[2] != -7 || i4[4] != -4 || i4[5] != -5) return 2;\n"
		"	if (u2[0] != 3 || u2[1] != 0 || u2[3] != 3 || u2[5] != 3) return 3;\n"
		"	x[3] = 5; x[4] = -1000;\n"
		"	if (ctl_run(0, in, out) != MODELC_ERR_BAD_INDEX || first != -1) return 4;\n"
		"	return 0;\n}\n");
	fixture_free(&f);
}

/* An in-place kernel (input and output at one arena offset) gets no
 * restrict on either pointer; disjoint buffers do. */
Test(emit_c, inplace_without_restrict)
{
	static const int64_t dims[1] = {8};
	fixture f;
	fixture_init(&f, "inpl");
	mc_kb kb;
	int values[4] = {0, 1, 2, 3};
	for (int s = 0; s < 3; s++) {
		mc_kernel *k = add_kernel(&f, &kb, s == 0 ? "k0_load" : s == 1 ? "k1_twice" : "k2_store");
		int a = mc_kb_buf(&kb, values[s], MC_FLOAT, 8, false);
		int b = mc_kb_buf(&kb, values[s + 1], MC_FLOAT, 8, true);
		mc_kexpr *i = mc_kb_fori(&kb, 8, 0);
		mc_kexpr *v = mc_k_load(&kb, a, i);
		mc_kb_store(&kb, b, i, s == 1 ? mc_k_add(&kb, v, v) : v);
		mc_kb_end(&kb);
		place(k, a, s == 0 ? MC_LOC_INPUT : MC_LOC_ARENA, 0, 0);
		place(k, b, s == 2 ? MC_LOC_OUTPUT : MC_LOC_ARENA, 0, 0);
	}
	f.p.arena_bytes = 32;
	f.p.n_inputs = f.p.n_outputs = 1;
	set_io(&f.inputs[0], "x", MC_FLOAT, 1, dims);
	set_io(&f.outputs[0], "y", MC_FLOAT, 1, dims);
	emit_build_run(&f,
		"#include \"inpl.h\"\n"
		"static float arena[8] __attribute__((aligned(INPL_ARENA_ALIGN)));\n"
		"int main(void) {\n"
		"	float x[8] = {1, 2, 3, 4, 5, 6, 7, -8}, y[8];\n"
		"	const void *in[1] = {x};\n	void *out[1] = {y};\n"
		"	if (inpl_run(arena, in, out) != MODELC_OK) return 1;\n"
		"	for (int i = 0; i < 8; i++) if (y[i] != 2 * x[i]) return 2;\n"
		"	return 0;\n}\n");
	size_t n;
	char *c = read_all(f.dir, "inpl.c", &n);
	const char *k1 = strstr(c, "inpl_k1_twice(unsigned char");
	cr_assert_not_null(k1);
	const char *k2 = strstr(k1, "inpl_k2_store(");
	cr_assert(strstr(c, "float *restrict const b1 = (float *)(arena + 0);"), "k0's output is restrict");
	const char *r = strstr(k1, "restrict");
	cr_assert(!r || r > k2, "the in-place kernel must not use restrict");
	free(c);
	fixture_free(&f);
}

/* --threads: a model run through NAME_run_threads gives NAME_run's bytes
 * exactly, on runtime-min's pthread pool of 2 and 3 workers and through a
 * firmware-style hook that runs the work one iteration at a time, last
 * first, on the calling thread; and that hook is called (the loops are
 * split at all). IN_N and OUT_N: the input's and output's floats. */
static const char threads_main[] =
	"#include \"thr.h\"\n#include \"modelc_threads_pthread.c\"\n#include <stdio.h>\n"
	"static long calls;\n"
	"static void backwards(void *ctx, modelc_task_fn fn, void *arg, int64_t n)\n{\n"
	"\t(void)ctx;\n\tcalls++;\n\tfor (int64_t i = n - 1; i >= 0; i--)\n\t\tfn(arg, i, i + 1);\n}\n"
	"static float x[IN_N], y0[OUT_N], y1[OUT_N];\n"
	"static _Alignas(64) unsigned char arena[THR_ARENA_BYTES + 1];\n"
	"int main(void)\n{\n"
	"\tfor (int i = 0; i < IN_N; i++)\n\t\tx[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;\n"
	"\tconst void *in[1] = { x };\n\tvoid *o0[1] = { y0 }, *o1[1] = { y1 };\n"
	"\tif (thr_run(arena, in, o0))\n\t\treturn 2;\n"
	"\tmodelc_threads hook = { backwards, NULL };\n"
	"\tif (thr_run_threads(arena, in, o1, &hook) || memcmp(y0, y1, sizeof y0) || calls < 3)\n"
	"\t\treturn printf(\"backwards: %ld calls\\n\", calls), 3;\n"
	"\tfor (int w = 2; w <= 3; w++) {\n"
	"\t\tmodelc_pthread_pool *pool = modelc_pthread_pool_new(w);\n"
	"\t\tmodelc_threads t = { modelc_pthread_parallel_for, pool };\n"
	"\t\tfor (int r = 0; r < 20; r++) {\n"
	"\t\t\tmemset(y1, 0, sizeof y1);\n"
	"\t\t\tif (!pool || thr_run_threads(arena, in, o1, &t) || memcmp(y0, y1, sizeof y0))\n"
	"\t\t\t\treturn printf(\"%d workers, run %d\\n\", w, r), 4;\n\t\t}\n"
	"\t\tmodelc_pthread_pool_free(pool);\n\t}\n"
	"\treturn 0;\n}\n";

/* Compiles b (input x, output y) with --threads 2 for isa (where the host
 * runs it) and runs threads_main on it; returns the source's text. */
static char *check_threads(mb *b, const char *isa, int in_n, int out_n)
{
	if (!host_runs_isa(isa)) {
		mb_free(b);
		return NULL;
	}
	char *dir = make_temp_dir();
	char *model = save_model(b, dir, "thr.onnx");
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "thr";
	o.isa = isa;
	o.threads = 2;
	o.threads_min_work = 1; /* these small models' loops split too */
	o.no_stack_usage = true;
	cr_assert_eq(mc_compile(model, dir, &o), 0);
	char main_c[sizeof threads_main + 64];
	snprintf(main_c, sizeof main_c, "#define IN_N %d\n#define OUT_N %d\n%s", in_n, out_n, threads_main);
	write_text(dir, "main.c", main_c);
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "cd %s && cc -std=c11 -O1 -march=native -Wall -Wextra -Werror -pthread -o t thr.c "
	                          "thr_weights.c main.c -lm && ./t", dir);
	cr_assert_eq(system(cmd), 0, "in %s", dir);
	char *src = read_file_in(dir, "thr.c", NULL);
	rm_tree(dir);
	free(dir);
	free(model);
	return src;
}

/* A small CNN: a convolution on the CPU kernels' tiles, a max pool, a
 * product and a softmax. */
Test(emit_c, threads_give_one_threads_bytes)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "2,3,12,12");
	static float w1[8 * 3 * 9], b1[8], w2[8 * 6 * 6 * 10];
	for (int i = 0; i < 8 * 3 * 9; i++)
		w1[i] = (float)((i * 7) % 13 - 6) / 16;
	for (int i = 0; i < 8; i++)
		b1[i] = (float)(i - 4) / 8;
	for (int i = 0; i < 8 * 6 * 6 * 10; i++)
		w2[i] = (float)((i * 5) % 17 - 8) / 64;
	mb_init_floats(b, g, "w1", "8,3,3,3", w1, 8 * 3 * 9);
	mb_init_floats(b, g, "b1", "8", b1, 8);
	mb_init_floats(b, g, "w2", "288,10", w2, 8 * 6 * 6 * 10);
	mb_init_ints(b, g, "flat", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "2", (int64_t[]){ 2, 288 }, 2);
	Onnx__NodeProto *n = mb_node(b, g, "Conv", "conv", "x,w1,b1", "c");
	mb_attr_ints(b, n, "pads", (int64_t[]){ 1, 1, 1, 1 }, 4);
	mb_node(b, g, "Relu", "relu", "c", "r");
	n = mb_node(b, g, "MaxPool", "pool", "r", "p");
	mb_attr_ints(b, n, "kernel_shape", (int64_t[]){ 2, 2 }, 2);
	mb_attr_ints(b, n, "strides", (int64_t[]){ 2, 2 }, 2);
	mb_node(b, g, "Reshape", "reshape", "p,flat", "f");
	mb_node(b, g, "MatMul", "fc", "f,w2", "z");
	mb_node(b, g, "Softmax", "softmax", "z", "y");
	mb_output(b, g, "y");
	free(check_threads(b, "generic", 2 * 3 * 12 * 12, 2 * 10));
}

/* Two 3x3 convolutions in Winograd's tiles (AVX2), whose scratch the
 * iterations of the split loops share in the serial code: with a batch
 * of two, each image's blocks on a copy of their own (the batch's loop in
 * chunks); with one, the image's loop becomes its body, whose full blocks
 * split in chunks (each on a copy) and whose last block's loops split
 * over its tiles and its 16 products (slots of one scratch). */
static mb *wino_pair(int batch)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	char dims[32];
	snprintf(dims, sizeof dims, "%d,16,20,20", batch);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, dims);
	static float w[2][16 * 16 * 9];
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < 16 * 16 * 9; i++)
			w[k][i] = (float)((i * (7 + k)) % 13 - 6) / 64;
	mb_init_floats(b, g, "w1", "16,16,3,3", w[0], 16 * 16 * 9);
	mb_init_floats(b, g, "w2", "16,16,3,3", w[1], 16 * 16 * 9);
	Onnx__NodeProto *n = mb_node(b, g, "Conv", "conv1", "x,w1", "c");
	mb_attr_ints(b, n, "pads", (int64_t[]){ 1, 1, 1, 1 }, 4);
	mb_node(b, g, "Relu", "relu", "c", "r");
	n = mb_node(b, g, "Conv", "conv2", "r,w2", "y");
	mb_attr_ints(b, n, "pads", (int64_t[]){ 1, 1, 1, 1 }, 4);
	mb_output(b, g, "y");
	return b;
}

Test(emit_c, threads_split_winograd_blocks_on_scratch_copies)
{
	for (int batch = 1; batch <= 2; batch++) {
		char *src = check_threads(wino_pair(batch), "avx2", batch * 16 * 400, batch * 16 * 400);
		if (!src)
			return;
		/* the blocks' chunks, each on its own copy of the scratch */
		cr_assert(strstr(src, "for (int64_t c = begin; c < end; c++) {"), "batch %d: no chunks", batch);
		cr_assert(strstr(src, " + (size_t)c * "), "batch %d: no scratch copies", batch);
		free(src);
	}
}

/* Attention's product of two computed tensors over 3 heads: the heads'
 * row chunks are one loop the workers split evenly (not the heads alone,
 * 2:1 over 2 workers), the rows left over of each head a second. */
Test(emit_c, threads_split_a_batch_of_products_in_row_chunks)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "3,50,16");
	Onnx__NodeProto *n = mb_node(b, g, "Transpose", "t", "x", "xt");
	mb_attr_ints(b, n, "perm", (int64_t[]){ 0, 2, 1 }, 3);
	mb_node(b, g, "MatMul", "qk", "x,xt", "y");
	mb_output(b, g, "y");
	char *src = check_threads(b, "generic", 3 * 50 * 16, 3 * 50 * 50);
	cr_assert_not_null(src);
	/* 6 chunks of 8 rows a head (the generic tiles' 4 rows twice), then
	 * each head's last 2 */
	cr_assert(strstr(src, "thr_k1_qk_t0, &task, 18);") && strstr(src, "thr_k1_qk_t1, &task, 3);"), "%s", src);
	free(src);
}

/* A product whose B (1536 x 384: 2.4 MB) is split by panels and whose
 * rows are a chunk in K blocks and a rest on partial sums of their own:
 * two split loops, each declaring the scratch copies of both (convnext's
 * MLPs), and built with -Werror. */
Test(emit_c, threads_split_big_b_chunk_and_rest)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "196,1536");
	static float w[1536 * 384];
	for (int i = 0; i < 1536 * 384; i++)
		w[i] = (float)((i * 7) % 23 - 11) / 256;
	mb_init_floats(b, g, "w", "1536,384", w, 1536 * 384);
	mb_node(b, g, "MatMul", "mlp", "x,w", "h");
	mb_node(b, g, "Softmax", "softmax", "h", "y"); /* a third split loop */
	mb_output(b, g, "y");
	char *src = check_threads(b, "avx2", 196 * 1536, 196 * 384);
	if (!src)
		return;
	cr_assert(strstr(src, "thr_k0_mlp_t1"), "two split loops");
	free(src);
}

/* --threads against no --threads: the same model compiled both ways gives
 * the same bytes. With --threads a product's rows come in smaller chunks
 * (a share a worker), so each row must sum alike wherever its tile falls:
 * products of 300 and 257 rows whose columns leave a tail panel. */
Test(emit_c, threads_build_gives_the_plain_builds_bytes)
{
	if (!host_runs_isa("avx2"))
		return;
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "300,72");
	static float w1[72 * 44], w2[44 * 100];
	for (int i = 0; i < 72 * 44; i++)
		w1[i] = (float)((i * 7) % 23 - 11) / 32;
	for (int i = 0; i < 44 * 100; i++)
		w2[i] = (float)((i * 5) % 19 - 9) / 16;
	mb_init_floats(b, g, "w1", "72,44", w1, 72 * 44);
	mb_init_floats(b, g, "w2", "44,100", w2, 44 * 100);
	mb_node(b, g, "MatMul", "m1", "x,w1", "h");
	mb_node(b, g, "MatMul", "m2", "h,w2", "y");
	mb_output(b, g, "y");
	char *dir = make_temp_dir();
	char *model = save_model(b, dir, "m.onnx");
	const char *names[2] = { "one", "thr" };
	for (int k = 0; k < 2; k++) {
		mc_compile_opts o;
		mc_compile_opts_init(&o);
		o.name = names[k];
		o.isa = "avx2";
		o.threads = k ? 2 : 0;
		o.no_stack_usage = true;
		cr_assert_eq(mc_compile(model, dir, &o), 0, "%s", diag_all());
	}
	write_text(dir, "main.c",
	           "#include \"one.h\"\n#include \"thr.h\"\n#include \"modelc_threads_pthread.c\"\n#include <string.h>\n"
	           "static float x[300 * 72], y0[300 * 100], y1[300 * 100];\n"
	           "static _Alignas(64) unsigned char a0[ONE_ARENA_BYTES + 1], a1[THR_ARENA_BYTES + 1];\n"
	           "int main(void)\n{\n"
	           "\tfor (int i = 0; i < 300 * 72; i++)\n\t\tx[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;\n"
	           "\tconst void *in[1] = { x };\n\tvoid *o0[1] = { y0 }, *o1[1] = { y1 };\n"
	           "\tmodelc_pthread_pool *pool = modelc_pthread_pool_new(2);\n"
	           "\tmodelc_threads t = { modelc_pthread_parallel_for, pool };\n"
	           "\tif (!pool || one_run(a0, in, o0) || thr_run_threads(a1, in, o1, &t))\n\t\treturn 2;\n"
	           "\tmodelc_pthread_pool_free(pool);\n"
	           "\treturn memcmp(y0, y1, sizeof y0) ? 3 : 0;\n}\n");
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "cd %s && cc -std=c11 -O1 -march=native -Wall -Wextra -Werror -pthread -o t one.c "
	                          "one_weights.c thr.c thr_weights.c main.c -lm && ./t", dir);
	cr_assert_eq(system(cmd), 0, "in %s", dir);
	rm_tree(dir);
	free(dir);
	free(model);
}
