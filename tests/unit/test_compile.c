/* The compile pipeline end to end: compile a small model, build the
 * generated C with the host compiler, run it, check the numbers; and the
 * output directory's properties (determinism, write-if-changed, binds,
 * fusion, run-time If). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "../../aot/aot.h"
#include "compile_helpers.h"
#include "model_builder.h"

/* Compiles `model` into dir with the harness, builds and runs it on the
 * given float inputs, reads output 0 (n floats) into out. */
static void compile_run(const char *model, const char *dir, mc_compile_opts *o, int n_in,
                        const float *const *in, const size_t *in_n, float *out, size_t n)
{
	o->harness = true;
	cr_assert_eq(mc_compile(model, dir, o), 0, "compile failed");
	char cmd[8192];
	snprintf(cmd, sizeof cmd, "cd '%s' && cc -std=c99 -O1 -Wall -Wextra -Werror %s.c %s_weights.c "
	         "%s_main.c -o run -lm", dir, o->name, o->name, o->name);
	cr_assert_eq(system(cmd), 0, "generated code does not build: %s", cmd);
	size_t len = (size_t)snprintf(cmd, sizeof cmd, "cd '%s' && ./run .", dir);
	for (int i = 0; i < n_in; i++) {
		char path[4096];
		snprintf(path, sizeof path, "%s/in%d.bin", dir, i);
		cr_assert_eq(write_file(path, in[i], in_n[i]), 0);
		len += (size_t)snprintf(cmd + len, sizeof cmd - len, " in%d.bin", i);
	}
	cr_assert_eq(system(cmd), 0, "generated code failed: %s", cmd);
	char path[4096];
	snprintf(path, sizeof path, "%s/output_0.bin", dir);
	FILE *f = fopen(path, "rb");
	cr_assert(f);
	cr_assert_eq(fread(out, sizeof(float), n, f), n);
	fclose(f);
}

/* y = Relu(If(cond, x + 1, ELSE)) - 1 for x of 4 floats, the else branch
 * eg (output e_out), cond a bool value of the main graph g. */
static char *if_tail(mb *b, Onnx__GraphProto *g, Onnx__GraphProto *eg, const char *dir, const char *file)
{
	float one = 1;
	Onnx__GraphProto *tg = mb_graph(b, "then");
	mb_init_floats(b, tg, "one", "", &one, 1);
	mb_node(b, tg, "Add", "then_add", "x,one", "t_out");
	mb_output(b, tg, "t_out");
	mb_output(b, eg, "e_out");
	Onnx__NodeProto *n = mb_node(b, g, "If", "if", "cond", "z");
	mb_attr_graph(b, n, "then_branch", tg);
	mb_attr_graph(b, n, "else_branch", eg);
	mb_node(b, g, "Relu", "relu", "z", "r");
	mb_init_floats(b, g, "minus", "", &one, 1);
	mb_node(b, g, "Sub", "sub", "r,minus", "y");
	mb_output(b, g, "y");
	return save_model(b, dir, file);
}

/* y = Relu(If(cond, x + 1, x * 3)) - 1 */
static char *if_model(const char *dir)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "4");
	mb_input(b, g, "cond", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, "");
	float three = 3;
	Onnx__GraphProto *eg = mb_graph(b, "else");
	mb_init_floats(b, eg, "three", "", &three, 1);
	mb_node(b, eg, "Mul", "else_mul", "x,three", "e_out");
	return if_tail(b, g, eg, dir, "if.onnx");
}

Test(compile, runtime_if_runs_the_branch_its_condition_picks)
{
	char *tmp = make_temp_dir(), out_dir[4096];
	char *model = if_model(tmp);
	snprintf(out_dir, sizeof out_dir, "%s/out", tmp);
	float x[4] = { -2, -0.5f, 0.5f, 2 }, y[4];
	const size_t sizes[2] = { sizeof x, 1 };
	for (int c = 0; c <= 1; c++) {
		unsigned char cond = (unsigned char)c;
		float cond_f;
		memcpy(&cond_f, (unsigned char[4]){ cond, 0, 0, 0 }, sizeof cond_f);
		const float *in[2] = { x, &cond_f };
		mc_compile_opts o;
		mc_compile_opts_init(&o);
		o.name = "ifm";
		compile_run(model, out_dir, &o, 2, in, sizes, y, 4);
		for (int i = 0; i < 4; i++) {
			float z = c ? x[i] + 1 : x[i] * 3;
			float want = (z > 0 ? z : 0) - 1;
			cr_assert_float_eq(y[i], want, 1e-6, "cond %d, element %d: %g, want %g", c, i, y[i], want);
		}
	}
	rm_tree(tmp);
	free(model);
	free(tmp);
}

/* y = Relu(If(sr == 16000, x + 1, Reshape(x, [3]))) - 1, x of 4 elements:
 * the else branch cannot be typed (4 elements into 3), as silero VAD's
 * branch for 8000 cannot on 512 samples. */
static char *untypable_branch_model(const char *dir)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "4");
	mb_input(b, g, "sr", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "");
	const int64_t rate = 16000, three[1] = { 3 };
	mb_init_ints(b, g, "rate", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "", &rate, 1);
	mb_node(b, g, "Equal", "is_16k", "sr,rate", "cond");
	Onnx__GraphProto *eg = mb_graph(b, "else");
	mb_init_ints(b, eg, "shape3", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "1", three, 1);
	mb_node(b, eg, "Reshape", "else_reshape", "x,shape3", "e_out");
	return if_tail(b, g, eg, dir, "branch.onnx");
}

/* A branch that cannot be typed compiles, with a warning naming the input
 * that decides, into a run that gives MODELC_ERR_BRANCH (7) if it is
 * taken; the interpreter fails there too; the other branch runs. */
Test(compile, untypable_branch_is_a_run_time_error)
{
	char *tmp = make_temp_dir(), out_dir[4096], cmd[9000], path[4200];
	char *model = untypable_branch_model(tmp);
	snprintf(out_dir, sizeof out_dir, "%s/out", tmp);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "br";
	o.harness = true;
	diag_capture();
	cr_assert_eq(mc_compile(model, out_dir, &o), 0, "%s", diag_all());
	cr_assert_eq(diag_count_with("modelc: warning: node 'if' (If, opset 13): its else_branch cannot run "
	                             "with these shapes (node 'else_reshape' (Reshape, opset 13)"), 1, "%s",
	             diag_all());
	cr_assert_eq(diag_count_with("MODELC_ERR_BRANCH if taken; the condition depends on input 'sr'"), 1,
	             "%s", diag_all());
	cr_assert_eq(diag_count_with("modelc: error"), 0, "%s", diag_all());
	snprintf(cmd, sizeof cmd, "cd '%s' && cc -std=c99 -O1 -Wall -Wextra -Werror br.c br_weights.c "
	         "br_main.c -o run -lm", out_dir);
	cr_assert_eq(system(cmd), 0, "generated code does not build: %s", cmd);
	float x[4] = { -2, -0.5f, 0.5f, 2 };
	snprintf(path, sizeof path, "%s/x.bin", out_dir);
	cr_assert_eq(write_file(path, x, sizeof x), 0);
	for (int k = 0; k < 2; k++) {
		int64_t sr = k ? 8000 : 16000;
		snprintf(path, sizeof path, "%s/sr.bin", out_dir);
		cr_assert_eq(write_file(path, &sr, sizeof sr), 0);
		snprintf(path, sizeof path, "%s/output_0.bin", out_dir);
		remove(path);
		snprintf(cmd, sizeof cmd, "cd '%s' && ./run . x.bin sr.bin 2>/dev/null", out_dir);
		int status = system(cmd);
		cr_assert(WIFEXITED(status));
		if (k) {
			cr_assert_eq(WEXITSTATUS(status), 7, "sr 8000: status %d, want MODELC_ERR_BRANCH",
			             WEXITSTATUS(status));
			continue;
		}
		cr_assert_eq(WEXITSTATUS(status), 0);
		float y[4];
		FILE *f = fopen(path, "rb");
		cr_assert(f);
		cr_assert_eq(fread(y, sizeof(float), 4, f), 4);
		fclose(f);
		for (int i = 0; i < 4; i++) {
			float want = (x[i] + 1 > 0 ? x[i] + 1 : 0) - 1;
			cr_assert_float_eq(y[i], want, 1e-6, "element %d: %g, want %g", i, y[i], want);
		}
	}
	/* the interpreter: the taken branch fails, naming it */
	mc_graph *g = mc_import_file(model, NULL);
	cr_assert(g && !mc_infer_graph(g), "%s", diag_all());
	mc_shape s4 = { 1, { 4 } }, s0 = { 0 };
	mc_tensor *in[2] = { mc_tensor_new(MC_FLOAT, &s4), mc_tensor_new(MC_INT64, &s0) }, *out[2] = { 0 };
	memcpy(in[0]->data, x, sizeof x);
	((int64_t *)in[1]->data)[0] = 8000;
	diag_capture();
	cr_assert_neq(mc_interp_run(g, in, out, NULL), 0);
	cr_assert_eq(diag_count_with("node 'if/unreachable' (Unreachable, opset 13): this If branch cannot run"), 1,
	             "%s", diag_all());
	mc_tensor_free(in[0]);
	mc_tensor_free(in[1]);
	mc_graph_free(g);
	rm_tree(tmp);
	free(model);
	free(tmp);
}

static char *chain_model(const char *dir, const char *file)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "2,3");
	mb_input(b, g, "s", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "1");
	float bias[3] = { 1, -2, 0.5f };
	mb_init_floats(b, g, "bias", "3", bias, 3);
	mb_node(b, g, "Add", "add", "x,bias", "t");
	mb_node(b, g, "Relu", "relu", "t", "r");
	mb_node(b, g, "Mul", "mul", "r,s", "y");
	mb_output(b, g, "y");
	return save_model(b, dir, file);
}

Test(compile, pointwise_chain_is_one_kernel_and_bind_folds_an_input)
{
	char *tmp = make_temp_dir();
	char *model = chain_model(tmp, "chain.onnx");
	mc_graph *g = mc_import_file(model, NULL);
	cr_assert(g);
	cr_assert_eq(mc_infer_graph(g), 0);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	mc_program p;
	mc_target_config t;
	cr_assert_eq(mc_target_resolve(&o, &t), 0);
	cr_assert_eq(mc_build_program(g, &t, &o, &p), 0);
	cr_assert_eq(p.n_kernels, 1, "Add, Relu and Mul fuse into one loop, got %d kernels", p.n_kernels);
	cr_assert_eq(p.arena_bytes, 0, "nothing intermediate is stored");
	mc_program_free(&p);
	mc_graph_free(g);

	char out_dir[4096];
	snprintf(out_dir, sizeof out_dir, "%s/bound", tmp);
	const char *names[] = { "s" }, *values[] = { "2.5" };
	o.name = "chain";
	o.bind_names = names;
	o.bind_values = values;
	o.n_binds = 1;
	float x[6] = { -3, -1, 0, 1, 2, 3 }, y[6];
	const float *in[1] = { x };
	const size_t sizes[1] = { sizeof x };
	compile_run(model, out_dir, &o, 1, in, sizes, y, 6);
	const float bias[3] = { 1, -2, 0.5f };
	for (int i = 0; i < 6; i++) {
		float t = x[i] + bias[i % 3];
		cr_assert_float_eq(y[i], (t > 0 ? t : 0) * 2.5f, 1e-6);
	}
	char header[4200];
	snprintf(header, sizeof header, "grep -q 'CHAIN_NUM_INPUTS 1' '%s/chain.h'", out_dir);
	cr_assert_eq(system(header), 0, "a bound input leaves the run function's inputs");
	rm_tree(tmp);
	free(model);
	free(tmp);
}

static long mtime_ns(const char *path)
{
	struct stat st;
	cr_assert_eq(stat(path, &st), 0, "%s", path);
	return (long)st.st_mtim.tv_sec * 1000000000L + st.st_mtim.tv_nsec;
}

Test(compile, output_is_deterministic_and_rewritten_only_when_changed)
{
	char *tmp = make_temp_dir(), a[4096], b[4096], cmd[9000];
	char *model = chain_model(tmp, "m.onnx");
	snprintf(a, sizeof a, "%s/a", tmp);
	snprintf(b, sizeof b, "%s/b", tmp);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "det";
	/* two runs into one path give the same bytes (build.ninja names the
	 * directory by its absolute path, so compare at one path) */
	cr_assert_eq(mc_compile(model, a, &o), 0);
	cr_assert_eq(rename(a, b), 0);
	cr_assert_eq(mc_compile(model, a, &o), 0);
	snprintf(cmd, sizeof cmd, "diff -r '%s' '%s' > /dev/null", a, b);
	cr_assert_eq(system(cmd), 0, "two output directories differ");
	char real[4096], line[8300];
	cr_assert(realpath(a, real));
	snprintf(line, sizeof line, "\ndet_dir = %s\ninclude $det_dir/det.ninja\n", real);
	char *nj = read_file_in(a, "build.ninja", NULL);
	cr_assert(nj && strstr(nj, line), "build.ninja does not name its directory:\n%s", nj);
	free(nj);
	/* the model by its path from the directory: no absolute path */
	nj = read_file_in(a, "det.ninja", NULL);
	cr_assert(nj && strstr(nj, "\ndet_model = $det_dir/../m.onnx\n") && !strstr(nj, tmp),
	          "det.ninja does not name the model by its path from the directory:\n%s", nj);
	free(nj);
	nj = read_file_in(a, "det.json", NULL);
	cr_assert(nj && strstr(nj, "\"model\": \"../m.onnx\"") && !strstr(nj, tmp), "det.json: %s", nj);
	free(nj);
	snprintf(cmd, sizeof cmd, "ls '%s' | grep -q modelc-tmp", tmp);
	cr_assert_neq(system(cmd), 0, "the staging directory was left behind");
	char path[4200];
	snprintf(path, sizeof path, "%s/det.c", a);
	long before = mtime_ns(path);
	cr_assert_eq(mc_compile(model, a, &o), 0);
	cr_assert_eq(mtime_ns(path), before, "an unchanged file was rewritten");
	snprintf(path, sizeof path, "%s/det.ninja", a);
	cr_assert_eq(mtime_ns(path) > 0, 1);
	rm_tree(tmp);
	free(model);
	free(tmp);
}

Test(compile, bad_name_and_unknown_bind_are_clear_errors)
{
	char *tmp = make_temp_dir(), out_dir[4096];
	char *model = chain_model(tmp, "m.onnx");
	snprintf(out_dir, sizeof out_dir, "%s/o", tmp);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	diag_capture();
	o.name = "9lives";
	cr_assert_eq(mc_compile(model, out_dir, &o), -1);
	cr_assert_eq(diag_count_with("not a C identifier"), 1, "%s", diag_all());
	o.name = "ok";
	const char *names[] = { "nope" }, *values[] = { "1" };
	o.bind_names = names;
	o.bind_values = values;
	o.n_binds = 1;
	diag_capture();
	cr_assert_eq(mc_compile(model, out_dir, &o), -1);
	cr_assert_eq(diag_count_with("no input named 'nope'"), 1, "%s", diag_all());
	rm_tree(tmp);
	free(model);
	free(tmp);
}

/* y1 = Gemm(x, W) + Gemm(Relu(x), W2), W2 a second initializer equal to W;
 * y2 = Concat(z, ConstantOfShape(1x2x3x3) of 0) * Expand(1.5, 1x4x3x3). */
static char *fill_model(const char *dir)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "2,16");
	mb_input(b, g, "z", MC_FLOAT, "1,2,3,3");
	float w[16 * 16];
	for (int i = 0; i < 16 * 16; i++)
		w[i] = (float)((i * 37) % 29 - 14) / 16.0f;
	mb_init_floats(b, g, "W", "16,16", w, 16 * 16);
	mb_init_floats(b, g, "W2", "16,16", w, 16 * 16);
	mb_node(b, g, "Gemm", "gemm1", "x,W", "a");
	mb_node(b, g, "Relu", "relu", "x", "rx");
	mb_node(b, g, "Gemm", "gemm2", "rx,W2", "c");
	mb_node(b, g, "Add", "add", "a,c", "y1");
	mb_output(b, g, "y1");
	mb_init_ints(b, g, "pad_shape", MC_INT64, "4", (const int64_t[]){ 1, 2, 3, 3 }, 4);
	Onnx__TensorProto *zero = mb_tensor(b, "zero", MC_FLOAT, "1");
	mb_float_data(b, zero, (const float[]){ 0 }, 1);
	Onnx__NodeProto *n = mb_node(b, g, "ConstantOfShape", "fill", "pad_shape", "pad");
	mb_attr_tensor(b, n, "value", zero);
	n = mb_node(b, g, "Concat", "concat", "z,pad", "zp");
	mb_attr_int(b, n, "axis", 1);
	float k = 1.5f;
	mb_init_floats(b, g, "k", "", &k, 1);
	mb_init_ints(b, g, "full_shape", MC_INT64, "4", (const int64_t[]){ 1, 4, 3, 3 }, 4);
	mb_node(b, g, "Expand", "expand", "k,full_shape", "ks");
	mb_node(b, g, "Mul", "mul", "zp,ks", "y2");
	mb_output(b, g, "y2");
	return save_model(b, dir, "fill.onnx");
}

Test(compile, constant_fills_are_not_stored_and_equal_weights_are_stored_once)
{
	char *tmp = make_temp_dir();
	char *model = fill_model(tmp);
	char out_dir[4096];
	snprintf(out_dir, sizeof out_dir, "%s/out", tmp);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "fill";
	o.no_stack_usage = true;
	float x[32], z[18], y1[32], y2[36];
	for (int i = 0; i < 32; i++)
		x[i] = (float)(i % 7) - 3.0f;
	for (int i = 0; i < 18; i++)
		z[i] = (float)i * 0.25f - 2.0f;
	const float *in[2] = { x, z };
	const size_t sizes[2] = { sizeof x, sizeof z };
	compile_run(model, out_dir, &o, 2, in, sizes, y1, 32);
	/* W once, in whatever form the two Gemms read it alike; no zeros, no 1.5s */
	size_t wb = json_number(out_dir, "fill.json", "weight_bytes");
	cr_assert_eq(wb, 16 * 16 * sizeof(float), "weight bytes %zu, want one copy of W (%zu)", wb,
	             16 * 16 * sizeof(float));
	char path[4200];
	snprintf(path, sizeof path, "%s/output_1.bin", out_dir);
	FILE *f = fopen(path, "rb");
	cr_assert(f);
	cr_assert_eq(fread(y2, sizeof(float), 36, f), 36);
	fclose(f);
	for (int i = 0; i < 32; i++) {
		int r = i / 16, c = i % 16;
		float want = 0;
		for (int j = 0; j < 16; j++) {
			float xv = x[r * 16 + j];
			want += (xv + (xv > 0 ? xv : 0)) * ((float)((j * 16 + c) * 37 % 29 - 14) / 16.0f);
		}
		cr_assert_float_eq(y1[i], want, 1e-4, "y1[%d] = %g, want %g", i, y1[i], want);
	}
	for (int i = 0; i < 36; i++)
		cr_assert_eq(y2[i], i < 18 ? z[i] * 1.5f : 0.0f, "y2[%d] = %g", i, y2[i]);
	rm_tree(tmp);
	free(model);
	free(tmp);
}

/* y = Relu(x) (float32 6), z = q + q (uint8 5) */
static char *io_model(const char *dir)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "6");
	mb_input(b, g, "q", MC_UINT8, "5");
	mb_node(b, g, "Relu", "relu", "x", "y");
	mb_node(b, g, "Add", "add", "q,q", "z");
	mb_output(b, g, "y");
	mb_output(b, g, "z");
	return save_model(b, dir, "io.onnx");
}

/* Every input and output pointer at offsets 0..3 from an aligned address:
 * the float ones off 4 give MODELC_ERR_MISALIGNED with nothing written,
 * the others the right numbers; built with the sanitizers, which stop
 * at any misaligned access. */
static const char io_align_main[] =
	"#include <stdio.h>\n#include <string.h>\n#include \"io.h\"\n"
	"static _Alignas(16) unsigned char buf[4][64];\n"
	"int main(void) {\n"
	"	static _Alignas(64) unsigned char arena[IO_ARENA_BYTES + 64];\n"
	"	const float x[6] = { -2, -0.5f, 0, 0.5f, 2, -3 };\n"
	"	const unsigned char q[5] = { 0, 1, 7, 100, 200 };\n"
	"	for (int ox = 0; ox < 4; ox++) for (int oq = 0; oq < 4; oq++)\n"
	"	for (int oy = 0; oy < 4; oy++) for (int oz = 0; oz < 4; oz++) {\n"
	"		memset(buf, 0xa5, sizeof buf);\n"
	"		memcpy(buf[0] + ox, x, sizeof x);\n"
	"		memcpy(buf[1] + oq, q, sizeof q);\n"
	"		const void *in[2] = { buf[0] + ox, buf[1] + oq };\n"
	"		void *out[2] = { buf[2] + oy, buf[3] + oz };\n"
	"		int st = io_run(arena, in, out);\n"
	"		int bad = ox % 4 != 0 || oy % 4 != 0;\n"
	"		if (bad) {\n"
	"			if (st != MODELC_ERR_MISALIGNED) { printf(\"%d%d%d%d: status %d\\n\", ox, oq, oy, oz, st); return 1; }\n"
	"			for (int i = 0; i < 64; i++)\n"
	"				if (buf[2][i] != 0xa5 || buf[3][i] != 0xa5) { printf(\"written\\n\"); return 1; }\n"
	"			continue;\n"
	"		}\n"
	"		if (st != MODELC_OK) { printf(\"%d%d%d%d: status %d\\n\", ox, oq, oy, oz, st); return 1; }\n"
	"		float y[6];\n"
	"		memcpy(y, buf[2] + oy, sizeof y);\n"
	"		for (int i = 0; i < 6; i++)\n"
	"			if (y[i] != (x[i] > 0 ? x[i] : 0)) { printf(\"y[%d] = %g\\n\", i, y[i]); return 1; }\n"
	"		for (int i = 0; i < 5; i++)\n"
	"			if (buf[3][oz + i] != (unsigned char)(q[i] + q[i])) { printf(\"z[%d]\\n\", i); return 1; }\n"
	"	}\n"
	"	return 0;\n}\n";

/* Compiles model into dir with o (its target: C sources, or llvm's
 * libNAME.a), writes main_src as dir/main.c, builds it with the model under
 * the sanitizers and runs it, then the shell command `then` (may be "");
 * the exit status of all that. */
static int run_driver(const char *model, const char *dir, const mc_compile_opts *o, const char *main_src,
                      const char *then)
{
	cr_assert_eq(mc_compile(model, dir, o), 0);
	char path[4200];
	snprintf(path, sizeof path, "%s/main.c", dir);
	cr_assert_eq(write_file(path, main_src, strlen(main_src)), 0);
	char cmd[9000];
	const char *san = "-O1 -fsanitize=undefined,address -fno-sanitize-recover=all";
	if (o->target)
		snprintf(cmd, sizeof cmd, "cd '%s' && cc -std=c11 %s main.c lib%s.a -o t -lm && ./t %s", dir, san,
		         o->name, then);
	else
		snprintf(cmd, sizeof cmd, "cd '%s' && cc -std=c11 -Wall -Wextra -Werror %s %s.c %s_weights.c "
		         "main.c -o t -lm && ./t %s", dir, san, o->name, o->name, then);
	int rc = system(cmd);
	if (rc)
		fprintf(stderr, "failed: %s\n", cmd);
	return rc;
}

static void io_align_run(const char *target)
{
	char *tmp = make_temp_dir();
	char *model = io_model(tmp);
	char dir[4096];
	snprintf(dir, sizeof dir, "%s/out", tmp);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "io";
	o.no_stack_usage = true;
	o.target = target;
	cr_assert_eq(run_driver(model, dir, &o, io_align_main, ""), 0);
	rm_tree(tmp);
	free(model);
	free(tmp);
}

Test(compile, inputs_and_outputs_at_any_offset_are_right_or_a_status)
{
	io_align_run(NULL);
	if (mc_llvm_available())
		io_align_run("llvm");
}

/* ---- --optimize memory: nearest Resizes read through, never stored ---- */

/* y = Relu(a + Resize(x, x2 nearest)), z = Concat(Resize(x, sizes 7x5,
 * half_pixel), b) along channels; x [1, 3, 4, 3]. */
static mb *gather_model(void)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "1,3,4,3");
	mb_input(b, g, "a", MC_FLOAT, "1,3,8,6");
	mb_input(b, g, "b", MC_FLOAT, "1,2,7,5");
	mb_init_floats(b, g, "scales", "4", (const float[]){ 1, 1, 2, 2 }, 4);
	mb_init_floats(b, g, "no_scales", "0", NULL, 0);
	mb_init_ints(b, g, "sizes", MC_INT64, "4", (const int64_t[]){ 1, 3, 7, 5 }, 4);
	Onnx__NodeProto *n = mb_node(b, g, "Resize", "up2", "x,,scales", "u");
	mb_attr_string(b, n, "mode", "nearest");
	mb_attr_string(b, n, "coordinate_transformation_mode", "asymmetric");
	mb_attr_string(b, n, "nearest_mode", "floor");
	mb_node(b, g, "Add", "add", "a,u", "s");
	mb_node(b, g, "Relu", "relu", "s", "y");
	n = mb_node(b, g, "Resize", "to75", "x,,no_scales,sizes", "v");
	mb_attr_string(b, n, "mode", "nearest");
	n = mb_node(b, g, "Concat", "cat", "v,b", "z");
	mb_attr_int(b, n, "axis", 1);
	mb_output(b, g, "y");
	mb_output(b, g, "z");
	return b;
}

Test(compile, memory_reads_through_nearest_resizes)
{
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.optimize = "memory";
	cr_assert_eq(verify_model_with(gather_model(), &o), 0);
	/* neither resized tensor is stored: the arena holds nothing */
	char *tmp = make_temp_dir(), *path = save_model(gather_model(), tmp, "g.onnx"), out[4200];
	for (int k = 0; k < 2; k++) {
		snprintf(out, sizeof out, "%s/%s", tmp, k ? "memory" : "speed");
		o.optimize = k ? "memory" : "speed";
		o.no_stack_usage = true;
		cr_assert_eq(mc_compile(path, out, &o), 0);
		size_t arena = json_number(out, "t.json", "arena_bytes");
		if (k)
			cr_assert_eq(arena, 0, "arena %zu", arena);
		else
			cr_assert_gt(arena, 0);
	}
	rm_tree(tmp);
	free(path);
	free(tmp);
}

/* x [1, 6, 10, 10] -> Relu(Conv3x3 6 -> 12) -> Conv1x1 12 -> 12 + that
 * (scaled: times input s [1, 12, 1, 1]) -> Conv1x1 12 -> 4: buffers of
 * 4.8 KB and scratch, more than the fast pool holds. */
static mb *conv_chain_model(bool scaled)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "1,6,10,10");
	if (scaled) /* y2 = (c2 + y1) * s */
		mb_input(b, g, "s", MC_FLOAT, "1,12,1,1");
	float w1[12 * 6 * 9], w2[12 * 12], w3[4 * 12];
	for (int i = 0; i < 12 * 6 * 9; i++)
		w1[i] = (float)((i * 29) % 17 - 8) / 32.0f;
	for (int i = 0; i < 12 * 12; i++)
		w2[i] = (float)((i * 13) % 11 - 5) / 16.0f;
	for (int i = 0; i < 4 * 12; i++)
		w3[i] = (float)((i * 7) % 9 - 4) / 8.0f;
	mb_init_floats(b, g, "w1", "12,6,3,3", w1, 12 * 6 * 9);
	mb_init_floats(b, g, "w2", "12,12,1,1", w2, 12 * 12);
	mb_init_floats(b, g, "w3", "4,12,1,1", w3, 4 * 12);
	Onnx__NodeProto *n = mb_node(b, g, "Conv", "c1", "x,w1", "c1");
	mb_attr_ints(b, n, "pads", (const int64_t[]){ 1, 1, 1, 1 }, 4);
	mb_node(b, g, "Relu", "r1", "c1", "y1");
	mb_node(b, g, "Conv", "c2", "y1,w2", "c2");
	mb_node(b, g, "Add", "a2", "c2,y1", scaled ? "sum2" : "y2");
	if (scaled)
		mb_node(b, g, "Mul", "scale", "sum2,s", "y2");
	mb_node(b, g, "Conv", "c3", "y2,w3", "y");
	mb_output(b, g, "y");
	return b;
}

/* ---- --pool: the arena in several memories ---- */

/* Runs the model in dir through NAME_run (one arena) and NAME_run_pools
 * (each pool its own static array, the fast one first, all at odd places
 * relative to each other) on the same input; outputs must be the same
 * bits, and a NULL or misaligned pool a status. */
static const char pools_main[] =
	"#include <stdio.h>\n#include <string.h>\n#include \"pm.h\"\n"
	"static _Alignas(64) unsigned char arena[PM_ARENA_BYTES];\n"
	"static _Alignas(64) unsigned char p0[PM_POOL_0_BYTES + 64];\n"
	"static _Alignas(64) unsigned char p1[PM_POOL_1_BYTES + 64];\n"
	"static float x[PM_INPUT_0_NUMEL], y1[PM_OUTPUT_0_NUMEL], y2[PM_OUTPUT_0_NUMEL];\n"
	"int main(void) {\n"
	"	if (PM_NUM_POOLS != 2 || PM_POOL_fast != 0 || strcmp(PM_POOL_1_NAME, \"slow\")) return 1;\n"
	"	if (PM_POOL_0_BYTES > 4096 || PM_POOL_0_BYTES == 0) { printf(\"fast %u\\n\", PM_POOL_0_BYTES); return 1; }\n"
	"	for (unsigned i = 0; i < PM_INPUT_0_NUMEL; i++) x[i] = (float)((i * 37) % 23) / 11.0f - 1.0f;\n"
	"	const void *in[1] = { x };\n"
	"	void *o1[1] = { y1 }, *o2[1] = { y2 };\n"
	"	if (pm_run(arena, in, o1) != MODELC_OK) return 2;\n"
	"	void *pools[2] = { p0, p1 + 64 }; /* two places apart */\n"
	"	if (pm_run_pools(pools, in, o2) != MODELC_OK) return 3;\n"
	"	if (memcmp(y1, y2, sizeof y1)) { printf(\"pools differ\\n\"); return 4; }\n"
	"	pools[1] = NULL;\n"
	"	if (pm_run_pools(pools, in, o2) != MODELC_ERR_NULL_ARGUMENT) return 5;\n"
	"	pools[1] = p1 + 4;\n"
	"	if (pm_run_pools(pools, in, o2) != MODELC_ERR_MISALIGNED) return 6;\n"
	"	return 0;\n}\n";

static void pools_run(const char *target)
{
	char *tmp = make_temp_dir(), *path = save_model(conv_chain_model(false), tmp, "m.onnx"), dir[4200];
	snprintf(dir, sizeof dir, "%s/out", tmp);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "pm";
	o.target = target;
	o.no_stack_usage = true;
	o.pools[0] = "fast:4K";
	o.pools[1] = "slow";
	o.n_pools = 2;
	o.weights_section = ".rodata.pm_weights";
	o.code_section = ".text.pm_code";
	/* and the named sections in the objects */
	const char *then = target ? "&& objdump -h libpm.a | grep -q '.rodata.pm_weights' && "
	                            "objdump -h libpm.a | grep -q '.text.pm_code'"
	                          : "&& cc -c pm.c pm_weights.c && objdump -h pm_weights.o | grep -q "
	                            "'.rodata.pm_weights' && objdump -h pm.o | grep -q '.text.pm_code'";
	cr_assert_eq(run_driver(path, dir, &o, pools_main, then), 0);
	rm_tree(tmp);
	free(path);
	free(tmp);
}

Test(compile, pools_run_apart_and_match_one_arena)
{
	pools_run(NULL);
	if (mc_llvm_available())
		pools_run("llvm");
}

/* ---- NAME.json's flash ---- */

/* From the objects: code, constants (the weights among them) and no
 * writable data, on both targets; a cut or foreign object is an error. */
Test(compile, json_gives_the_flash_of_the_objects)
{
	char *tmp = make_temp_dir(), *path = save_model(conv_chain_model(false), tmp, "m.onnx"), dir[4200];
	for (int k = 0; k < 1 + mc_llvm_available(); k++) {
		mc_compile_opts o;
		mc_compile_opts_init(&o);
		o.name = "fl";
		o.target = k ? "llvm" : NULL;
		snprintf(dir, sizeof dir, "%s/%s", tmp, k ? "llvm" : "c");
		cr_assert_eq(mc_compile(path, dir, &o), 0);
		size_t total = json_number(dir, "fl.json", "total_bytes"), code = json_number(dir, "fl.json", "code_bytes");
		size_t consts = json_number(dir, "fl.json", "const_bytes"), weights = json_number(dir, "fl.json", "weight_bytes");
		cr_assert_gt(code, 1000, "code %zu", code);
		cr_assert_geq(consts, weights, "constants %zu, weights %zu", consts, weights);
		cr_assert_eq(total, code + consts);
		cr_assert_eq(json_number(dir, "fl.json", "static_ram_bytes"), 0);
	}
	/* the llvm target's object, cut: an error, not a figure */
	mc_object_sizes s;
	char why[256], obj[4300];
	snprintf(obj, sizeof obj, "%s/m.onnx", tmp);
	cr_assert_eq(mc_object_sizes_of(obj, &s, why, sizeof why), -1);
	cr_assert(strstr(why, "not an ELF"), "%s", why);
	if (mc_llvm_available()) {
		snprintf(obj, sizeof obj, "%s/llvm/fl.o", tmp);
		size_t len;
		char *bytes = read_file_in(tmp, "llvm/fl.o", &len);
		cr_assert_not_null(bytes);
		cr_assert_eq(mc_object_sizes_of(obj, &s, why, sizeof why), 0);
		cr_assert_eq(write_file(obj, bytes, len - 40), 0); /* into the last section header */
		cr_assert_eq(mc_object_sizes_of(obj, &s, why, sizeof why), -1);
		cr_assert(strstr(why, "past the end"), "%s", why);
		free(bytes);
	}
	rm_tree(tmp);
	free(path);
	free(tmp);
}

/* ---- --io-in-arena: inputs and outputs in the arena ---- */

/* x [1, 6, 10, 10], s [1, 12, 1, 1] -> y1 = Relu(Conv3x3) -> y2 = (Conv1x1(y1)
 * + y1) * s -> y = Conv1x1 12 -> 4; outputs y, flat = Reshape(y1) (an alias
 * of a buffer that would die) and k = Identity of a constant (a copy). */
static mb *io_arena_model(void)
{
	mb *b = conv_chain_model(true);
	Onnx__GraphProto *g = mb_main(b);
	mb_init_ints(b, g, "flat_shape", MC_INT64, "2", (const int64_t[]){ 1, 1200 }, 2);
	mb_node(b, g, "Reshape", "flat", "y1,flat_shape", "flat");
	mb_init_floats(b, g, "kv", "3", (const float[]){ 1.5f, -2.0f, 0.25f }, 3);
	mb_node(b, g, "Identity", "k", "kv", "k");
	mb_output(b, g, "flat");
	mb_output(b, g, "k");
	return b;
}

/* The same inputs through copies (pointers at odd addresses: memcpy), then
 * written at their places with no pointers given, over an arena of other
 * garbage each time: the same output bits; a misaligned arena a status. */
static const char io_arena_main[] =
	"#include <stdio.h>\n#include <string.h>\n#include \"ia.h\"\n"
	"static _Alignas(64) unsigned char arena[IA_ARENA_BYTES + 64];\n"
	"static float x[IA_INPUT_0_NUMEL], s[IA_INPUT_1_NUMEL];\n"
	"static unsigned char xb[sizeof x + 1], sb[sizeof s + 1];\n"
	"static unsigned char o0[IA_OUTPUT_0_BYTES + 1], o1[IA_OUTPUT_1_BYTES + 1], o2[IA_OUTPUT_2_BYTES + 1];\n"
	"int main(void) {\n"
	"	if (!IA_IO_IN_ARENA || IA_INPUT_1_OFFSET + IA_INPUT_1_BYTES > IA_ARENA_BYTES ||\n"
	"	    IA_OUTPUT_1_OFFSET + IA_OUTPUT_1_BYTES > IA_ARENA_BYTES) return 1;\n"
	"	for (unsigned i = 0; i < IA_INPUT_0_NUMEL; i++) x[i] = (float)((i * 37) % 23) / 11.0f - 1.0f;\n"
	"	for (unsigned i = 0; i < IA_INPUT_1_NUMEL; i++) s[i] = 0.5f + (float)i / 8.0f;\n"
	"	memcpy(xb + 1, x, sizeof x);\n"
	"	memcpy(sb + 1, s, sizeof s);\n"
	"	const void *in[2] = { xb + 1, sb + 1 };\n"
	"	void *out[3] = { o0 + 1, o1 + 1, o2 + 1 };\n"
	"	memset(arena, 0x5a, sizeof arena);\n"
	"	if (ia_run(arena, in, out) != MODELC_OK) return 2;\n"
	"	memset(arena, 0xa5, sizeof arena);\n"
	"	memcpy(IA_INPUT_0_AT(arena), x, sizeof x);\n"
	"	memcpy(IA_INPUT_1_AT(arena), s, sizeof s);\n"
	"	if (ia_run(arena, NULL, NULL) != MODELC_OK) return 3;\n"
	"	if (memcmp(IA_OUTPUT_0_AT(arena), o0 + 1, IA_OUTPUT_0_BYTES) ||\n"
	"	    memcmp(IA_OUTPUT_1_AT(arena), o1 + 1, IA_OUTPUT_1_BYTES) ||\n"
	"	    memcmp(IA_OUTPUT_2_AT(arena), o2 + 1, IA_OUTPUT_2_BYTES)) { printf(\"in place differs\\n\"); return 4; }\n"
	"	float k[3];\n"
	"	memcpy(k, o2 + 1, sizeof k);\n"
	"	if (k[0] != 1.5f || k[1] != -2.0f || k[2] != 0.25f) return 5;\n"
	"	/* one input given (its place), one not: the other written there */\n"
	"	memset(arena, 0x33, sizeof arena);\n"
	"	memcpy(IA_INPUT_0_AT(arena), x, sizeof x);\n"
	"	const void *half[2] = { IA_INPUT_0_AT(arena), NULL };\n"
	"	memcpy(IA_INPUT_1_AT(arena), s, sizeof s);\n"
	"	if (ia_run(arena, half, out) != MODELC_OK) return 6;\n"
	"	if (memcmp(IA_OUTPUT_0_AT(arena), o0 + 1, IA_OUTPUT_0_BYTES)) return 7;\n"
	"	if (ia_run(arena + 4, in, out) != MODELC_ERR_MISALIGNED) return 8;\n"
	"	if (ia_run(NULL, in, out) != MODELC_ERR_NULL_ARGUMENT) return 9;\n"
	"	return 0;\n}\n";

static void io_arena_run(const char *target)
{
	char *tmp = make_temp_dir(), *path = save_model(io_arena_model(), tmp, "m.onnx"), dir[4200];
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "ia";
	o.target = target;
	o.no_stack_usage = true;
	/* against the interpreter, through the copies (NAME_main.c) */
	cr_assert_eq(verify_model_with(io_arena_model(), (o.io_in_arena = true, &o)), 0);
	snprintf(dir, sizeof dir, "%s/out", tmp);
	cr_assert_eq(run_driver(path, dir, &o, io_arena_main, ""), 0);
	size_t in_arena = json_number(dir, "ia.json", "arena_bytes");
	/* NAME.json's place of input 0 is the header's */
	char *h = read_file_in(dir, "ia.h", NULL), *def = h ? strstr(h, "#define IA_INPUT_0_OFFSET ") : NULL;
	cr_assert_not_null(def);
	cr_assert_eq(strtoull(def + strlen("#define IA_INPUT_0_OFFSET "), NULL, 10),
	             json_number(dir, "ia.json", "arena_offset"));
	free(h);
	/* the caller's buffers before: the arena now holds them, and less */
	o.io_in_arena = false;
	snprintf(dir, sizeof dir, "%s/apart", tmp);
	cr_assert_eq(mc_compile(path, dir, &o), 0);
	size_t apart = json_number(dir, "ia.json", "arena_bytes");
	size_t io = (600 + 12 + 400 + 1200 + 3) * sizeof(float);
	cr_assert_lt(in_arena, apart + io, "in the arena %zu, apart %zu + %zu", in_arena, apart, io);
	/* and with pools: each input's and output's pool in the header */
	o.io_in_arena = true;
	o.pools[0] = "fast:4K";
	o.pools[1] = "slow";
	o.n_pools = 2;
	cr_assert_eq(verify_model_with(io_arena_model(), &o), 0);
	rm_tree(tmp);
	free(path);
	free(tmp);
}

Test(compile, io_in_arena_reuses_the_inputs_and_runs_without_copies)
{
	io_arena_run(NULL);
	if (mc_llvm_available())
		io_arena_run("llvm");
}

/* Concat(y, y, Reshape(y)) with y dying there: input 0's storage is read
 * again by the later inputs, so the Concat must not write over it. */
Test(compile, memory_concat_keeps_an_input_read_twice)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "1,3,4,5");
	mb_node(b, g, "Relu", "relu", "x", "y");
	mb_init_ints(b, g, "shape", MC_INT64, "4", (const int64_t[]){ 1, 3, 4, 5 }, 4);
	mb_node(b, g, "Reshape", "same", "y,shape", "y2");
	Onnx__NodeProto *n = mb_node(b, g, "Concat", "cat", "y,y,y2", "c");
	mb_attr_int(b, n, "axis", 1);
	mb_node(b, g, "Neg", "neg", "c", "nc");
	n = mb_node(b, g, "ReduceSum", "sum", "nc", "z");
	mb_attr_int(b, n, "keepdims", 1);
	mb_output(b, g, "z");
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.optimize = "memory";
	cr_assert_eq(verify_model_with(b, &o), 0);
}
