/* Stack usage of the run function (aot/stack.c): the .su/.ci parsers and
 * the worst case on hand-written compiler output; the measurement with the
 * host compiler; NAME.json's "stack"; and, end to end, that a compiled
 * model runs on a thread whose stack is the recorded figure plus a margin
 * (tests/models/stack_run.c, found from the repository root, where the
 * unit tests run). */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../aot/aot.h"
#include "model_builder.h"

#define STACK_RUN_C "tests/models/stack_run.c"

/* Parses .ci text (or .su when su is set) and computes root's worst case. */
static void worst_of(const char *text, bool su, const char *root, mc_stack_bound *b)
{
	mc_stack_graph g = { 0 };
	char why[256] = "";
	int rc = su ? mc_stack_parse_su(&g, text, why, sizeof why) : mc_stack_parse_ci(&g, text, why, sizeof why);
	cr_assert_eq(rc, 0, "parse failed: %s", why);
	cr_assert_eq(mc_stack_worst(&g, root, b), 0, "%s", b->why);
	mc_stack_graph_free(&g);
}

/* gcc 12's -fcallgraph-info=su, abridged: static functions' titles carry
 * the file; a clone keeps its suffix in the title only; memcpy's node comes
 * after an edge to it; k0 and k1 both call the helper (a diamond); `unused`
 * is not reachable from m_run. */
static const char ci_kernels[] =
	"graph: { title: \"/tmp/s/m.c\"\n"
	"node: { title: \"/tmp/s/m.c:m_k0.constprop.0\" label: \"m_k0.constprop\\n/tmp/s/m.c:10:12\\n48 bytes (static)\" }\n"
	"node: { title: \"/tmp/s/m.c:m_k1\" label: \"m_k1\\n/tmp/s/m.c:20:12\\n60 bytes (static)\" }\n"
	"node: { title: \"/tmp/s/m.c:modelc_helper\" label: \"modelc_helper\\n/tmp/s/modelc_rt.h:5:1\\n32 bytes (dynamic,bounded)\" }\n"
	"node: { title: \"/tmp/s/m.c:unused\" label: \"unused\\n/tmp/s/m.c:30:12\\n100000 bytes (static)\" }\n"
	"node: { title: \"m_run\" label: \"m_run\\n/tmp/s/m.c:99:5\\n96 bytes (static)\" }\n"
	"edge: { sourcename: \"m_run\" targetname: \"/tmp/s/m.c:m_k0.constprop.0\" label: \"/tmp/s/m.c:100:3\" }\n"
	"edge: { sourcename: \"m_run\" targetname: \"/tmp/s/m.c:m_k1\" label: \"/tmp/s/m.c:101:3\" }\n"
	"edge: { sourcename: \"m_run\" targetname: \"/tmp/s/m.c:m_k0.constprop.0\" label: \"/tmp/s/m.c:102:3\" }\n"
	"edge: { sourcename: \"/tmp/s/m.c:m_k0.constprop.0\" targetname: \"/tmp/s/m.c:modelc_helper\" label: \"/tmp/s/m.c:11:3\" }\n"
	"edge: { sourcename: \"/tmp/s/m.c:m_k1\" targetname: \"/tmp/s/m.c:modelc_helper\" label: \"/tmp/s/m.c:21:3\" }\n"
	"edge: { sourcename: \"/tmp/s/m.c:m_k1\" targetname: \"memcpy\" label: \"/tmp/s/m.c:22:3\" }\n"
	"node: { title: \"memcpy\" label: \"__builtin_memcpy\\n<built-in>\" shape : ellipse }\n"
	"node: { title: \"expf\" label: \"expf\\n/usr/include/x86_64-linux-gnu/bits/mathcalls.h:95:1\" shape : ellipse }\n"
	"edge: { sourcename: \"/tmp/s/m.c:modelc_helper\" targetname: \"expf\" label: \"/tmp/s/modelc_rt.h:6:9\" }\n"
	"node: { title: \"tanhf\" label: \"tanhf\\n/usr/include/x86_64-linux-gnu/bits/mathcalls.h:75:1\" shape : ellipse }\n"
	"edge: { sourcename: \"/tmp/s/m.c:unused\" targetname: \"tanhf\" label: \"/tmp/s/m.c:31:9\" }\n"
	"}\n";

Test(stack, callgraph_worst_path_counts_the_deepest_chain_once)
{
	mc_stack_bound b;
	worst_of(ci_kernels, false, "m_run", &b);
	cr_assert(b.bounded, "%s", b.why);
	/* m_run 96 + max(k0 48, k1 60) + helper 32 (its bound); unused not reached */
	cr_assert_eq(b.bytes, 96 + 60 + 32, "got %zu", b.bytes);
	cr_assert_eq(b.n_excludes, 2);
	cr_assert_str_eq(b.excludes[0], "expf");
	cr_assert_str_eq(b.excludes[1], "memcpy");
	mc_stack_bound_free(&b);

	/* From a kernel, by its name rather than its title. */
	worst_of(ci_kernels, false, "m_k0.constprop", &b);
	cr_assert(b.bounded);
	cr_assert_eq(b.bytes, 48 + 32);
	mc_stack_bound_free(&b);
}

Test(stack, callgraph_with_crlf_lines_parses_the_same)
{
	mc_strbuf s = { 0 };
	for (const char *c = ci_kernels; *c; c++)
		mc_sb_puts(&s, *c == '\n' ? "\r\n" : (char[]){ *c, 0 });
	mc_stack_bound b;
	worst_of(s.data, false, "m_run", &b);
	cr_assert(b.bounded);
	cr_assert_eq(b.bytes, 188);
	mc_stack_bound_free(&b);
	mc_sb_free(&s);
}

Test(stack, recursion_is_unbounded_and_named)
{
	static const char ci[] =
		"node: { title: \"r_run\" label: \"r_run\\nr.c:1:5\\n16 bytes (static)\" }\n"
		"node: { title: \"r.c:a\" label: \"a\\nr.c:2:12\\n16 bytes (static)\" }\n"
		"node: { title: \"r.c:b\" label: \"b\\nr.c:3:12\\n16 bytes (static)\" }\n"
		"edge: { sourcename: \"r_run\" targetname: \"r.c:a\" label: \"r.c:1:20\" }\n"
		"edge: { sourcename: \"r.c:a\" targetname: \"r.c:b\" label: \"r.c:2:20\" }\n"
		"edge: { sourcename: \"r.c:b\" targetname: \"r.c:a\" label: \"r.c:3:20\" }\n";
	mc_stack_bound b;
	worst_of(ci, false, "r_run", &b);
	cr_assert_not(b.bounded);
	cr_assert_str_eq(b.why, "recursion: a -> b -> a");
	mc_stack_bound_free(&b);

	static const char self[] =
		"node: { title: \"s_run\" label: \"s_run\\ns.c:1:5\\n16 bytes (static)\" }\n"
		"edge: { sourcename: \"s_run\" targetname: \"s_run\" label: \"s.c:1:20\" }\n";
	worst_of(self, false, "s_run", &b);
	cr_assert_not(b.bounded);
	cr_assert_str_eq(b.why, "recursion: s_run -> s_run");
	mc_stack_bound_free(&b);
}

Test(stack, dynamic_frames_and_indirect_calls_are_unbounded)
{
	static const char dyn[] =
		"node: { title: \"d_run\" label: \"d_run\\nd.c:1:5\\n16 bytes (static)\" }\n"
		"node: { title: \"d.c:vla\" label: \"vla\\nd.c:2:12\\n32 bytes (dynamic)\" }\n"
		"edge: { sourcename: \"d_run\" targetname: \"d.c:vla\" label: \"d.c:1:20\" }\n";
	mc_stack_bound b;
	worst_of(dyn, false, "d_run", &b);
	cr_assert_not(b.bounded);
	cr_assert(strstr(b.why, "vla has a frame of run-time size"), "%s", b.why);
	mc_stack_bound_free(&b);

	static const char ind[] =
		"node: { title: \"i_run\" label: \"i_run\\ni.c:1:5\\n16 bytes (static)\" }\n"
		"node: { title: \"__indirect_call\" label: \"Indirect Call Placeholder\" shape : ellipse }\n"
		"edge: { sourcename: \"i_run\" targetname: \"__indirect_call\" label: \"i.c:1:20\" }\n";
	worst_of(ind, false, "i_run", &b);
	cr_assert_not(b.bounded);
	cr_assert_str_eq(b.why, "i_run calls through a function pointer");
	mc_stack_bound_free(&b);
}

Test(stack, su_alone_sums_every_frame)
{
	/* gcc's file:line:col:name and clang's file:line:name */
	static const char su[] =
		"/tmp/s/m.c:10:12:m_k0.constprop\t48\tstatic\n"
		"/tmp/s/m.c:10:12:m_k0.constprop\t40\tstatic\n"
		"m.c:20:m_k1\t64\tdynamic,bounded\n"
		"/tmp/s/m.c:99:5:m_run\t96\tstatic\n";
	mc_stack_bound b;
	worst_of(su, true, "m_run", &b);
	cr_assert(b.bounded);
	cr_assert_eq(b.bytes, 48 + 40 + 64 + 96);
	cr_assert_eq(b.n_excludes, 0);
	mc_stack_bound_free(&b);

	worst_of("m.c:1:5:m_run\t16\tstatic\nm.c:2:1:alloc\t32\tdynamic\n", true, "m_run", &b);
	cr_assert_not(b.bounded);
	cr_assert(strstr(b.why, "alloc has a frame of run-time size"), "%s", b.why);
	mc_stack_bound_free(&b);
}

Test(stack, malformed_input_and_a_missing_root_are_reported)
{
	mc_stack_graph g = { 0 };
	char why[256] = "";
	cr_assert_eq(mc_stack_parse_su(&g, "m.c:1:5:m_run\t16\tstatic\nm.c:2:5:k 16 static\n", why, sizeof why), -1);
	cr_assert(strstr(why, "line 2"), "%s", why);
	mc_stack_graph_free(&g);
	cr_assert_eq(mc_stack_parse_su(&g, "m.c:1:5:m_run\tmany\tstatic\n", why, sizeof why), -1);
	mc_stack_graph_free(&g);
	cr_assert_eq(mc_stack_parse_ci(&g, "node: { title: \"x\" }\n", why, sizeof why), -1);
	cr_assert(strstr(why, "line 1"), "%s", why);
	mc_stack_graph_free(&g);
	cr_assert_eq(mc_stack_parse_ci(&g, "edge: { sourcename: \"x\" targetname: \"y", why, sizeof why), -1);
	mc_stack_graph_free(&g);

	mc_stack_bound b;
	cr_assert_eq(mc_stack_parse_ci(&g, ci_kernels, why, sizeof why), 0);
	cr_assert_eq(mc_stack_worst(&g, "other_run", &b), -1);
	cr_assert(strstr(b.why, "no function 'other_run'"), "%s", b.why);
	/* an external function is no root either */
	cr_assert_eq(mc_stack_worst(&g, "expf", &b), -1);
	mc_stack_graph_free(&g);
}

/* ---- with the host compiler ---- */
/* A text file's content. */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot read %s", path);
	mc_strbuf b = { 0 };
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		mc_sb_printf(&b, "%.*s", (int)n, chunk);
	fclose(f);
	if (!b.data)
		mc_sb_puts(&b, "");
	return b.data;
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[16384];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	return system(cmd);
}

/* A run function whose kernel has a `bytes`-byte frame and calls expf. */
static void write_deep_model(const char *dir, int bytes)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/t.c", dir);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fprintf(f, "#include <math.h>\n"
	        "int t_run(void *arena, const void *const inputs[], void *const outputs[]);\n"
	        "static __attribute__((noinline)) float kernel(const float *x, int n)\n{\n"
	        "\tvolatile float buf[%d];\n"
	        "\tfor (int i = %d - 1; i >= 0; i--)\n\t\tbuf[i] = x[i %% n];\n"
	        "\treturn expf(buf[0]) + buf[%d - 1];\n}\n"
	        "int t_run(void *arena, const void *const inputs[], void *const outputs[])\n{\n"
	        "\t(void)arena;\n"
	        "\t*(float *)outputs[0] = kernel(inputs[0], 4);\n"
	        "\treturn 0;\n}\n", bytes / 4, bytes / 4, bytes / 4);
	cr_assert_eq(fclose(f), 0);
}

/* Only t.c (and what the test wrote) may be left: no NAME.stack-tmp.* */
static void assert_no_temporaries(const char *dir)
{
	cr_assert_neq(sh("ls '%s' | grep -q stack-tmp", dir), 0, "temporary files left in %s", dir);
}

Test(stack, measure_with_the_host_compiler)
{
	char *dir = make_temp_dir();
	write_deep_model(dir, 4096);
	mc_stack_usage u;
	mc_stack_measure(dir, "t", "cc", &u);
	cr_assert(u.measured, "%s", u.note);
	cr_assert(u.bound.bounded, "%s", u.bound.why);
	cr_assert_geq(u.bound.bytes, 4096, "the kernel's buffer alone is 4096 bytes, got %zu", u.bound.bytes);
	cr_assert_lt(u.bound.bytes, 4096 + 1024);
	cr_assert(strstr(u.flags, "-fstack-usage"), "%s", u.flags);
	if (strcmp(u.method, "callgraph") == 0) {
		cr_assert_eq(u.bound.n_excludes, 1);
		cr_assert_str_eq(u.bound.excludes[0], "expf");
	}
	mc_stack_usage_free(&u);
	assert_no_temporaries(dir);

	if (sh("clang --version > /dev/null 2>&1") == 0) { /* frames only: the sum */
		mc_stack_measure(dir, "t", "clang", &u);
		cr_assert(u.measured, "%s", u.note);
		cr_assert_str_eq(u.method, "su-only");
		cr_assert(u.bound.bounded);
		cr_assert_geq(u.bound.bytes, 4096);
		mc_stack_usage_free(&u);
	}
	mc_stack_measure(dir, "t", "/nonexistent/cc", &u);
	cr_assert_not(u.measured);
	cr_assert(strstr(u.note, "cannot run '/nonexistent/cc'"), "%s", u.note);
	mc_stack_usage_free(&u);
	mc_stack_measure(dir, "t", "cc -no-such-flag-for-modelc", &u);
	cr_assert_not(u.measured);
	cr_assert(strstr(u.note, "failed"), "%s", u.note);
	cr_assert_null(strstr(u.note, dir), "the note names the temporary directory: %s", u.note);
	mc_stack_usage_free(&u);
	mc_stack_measure(dir, "missing", "cc", &u);
	cr_assert_not(u.measured);
	mc_stack_usage_free(&u);
	assert_no_temporaries(dir);
	rm_tree(dir);
	free(dir);
}

/* ---- end to end ---- */
/* y = Tanh(Exp(x) * w) + x with one kernel per node, over 64 floats. */
static char *math_model(const char *dir)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "64");
	float w[64];
	for (int i = 0; i < 64; i++)
		w[i] = 0.25f * (float)(i % 5) - 0.5f;
	mb_init_floats(b, g, "w", "64", w, 64);
	mb_node(b, g, "Exp", "exp", "x", "e");
	mb_node(b, g, "Mul", "mul", "e,w", "m");
	mb_node(b, g, "Tanh", "tanh", "m", "t");
	mb_node(b, g, "Add", "add", "t,x", "y");
	mb_output(b, g, "y");
	char *path = malloc(4096);
	snprintf(path, 4096, "%s/math.onnx", dir);
	cr_assert_eq(mb_write(b, path), 0);
	mb_free(b);
	return path;
}

static long run_bytes_of(const char *json_path)
{
	char *json = slurp(json_path);
	const char *s = strstr(json, "\"stack\": {\"run_bytes\": ");
	cr_assert_not_null(s, "no stack figure in %s:\n%s", json_path, json);
	long n = strtol(s + strlen("\"stack\": {\"run_bytes\": "), NULL, 10);
	free(json);
	return n;
}

/* Builds dir's model with stack_run.c for a stack bound of run_bytes and
 * runs it on IN.bin; the exit status (or 128 + signal). */
static int run_limited(const char *dir, const char *name, bool harness, long run_bytes)
{
	const char *f = "-std=c99 -O2 -Wall -Wextra -Werror";
	cr_assert_eq(access(STACK_RUN_C, R_OK), 0, STACK_RUN_C " not found: run the unit tests from the repository root");
	cr_assert_eq(sh("cd '%s' && cc %s -c %s.c -o model.o && cc %s -DMODELC_RUN=%s_run -DRUN_BYTES=%ld "
	                "-c '%s/" STACK_RUN_C "' -o stack_run.o", dir, f, name, f, name, run_bytes,
	                getcwd((char[4096]){ 0 }, 4096)), 0);
	if (harness)
		cr_assert_eq(sh("cd '%s' && cc %s -c %s_weights.c -o weights.o && cc %s -D%s_run=modelc_stack_run "
		                "-c %s_main.c -o main.o", dir, f, name, f, name, name), 0);
	else /* a main of our own */
		cr_assert_eq(sh("cd '%s' && printf '%%s\\n' '#include <stdio.h>' "
		                "'int modelc_stack_run(void *, const void *const[], void *const[]);' "
		                "'int main(void) { float x[4] = {1, 2, 3, 4}, y; const void *in[1] = {x}; void *out[1] = {&y};' "
		                "'return modelc_stack_run(0, in, out); }' > main.c && cc %s -c main.c -o main.o",
		                dir, f), 0);
	cr_assert_eq(sh("cd '%s' && cc *.o -o run -pthread -Wl,-z,now -lm", dir), 0);
	int ws = sh("cd '%s' && ./run . IN.bin 2> stack.log", dir);
	return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

Test(stack, compiled_model_runs_on_a_stack_of_its_recorded_size)
{
	char *tmp = make_temp_dir(), out[4200], path[4300];
	char *model = math_model(tmp);
	snprintf(out, sizeof out, "%s/gen", tmp);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "sm";
	o.harness = true;
	o.no_fuse = true;
	cr_assert_eq(mc_compile(model, out, &o), 0);
	assert_no_temporaries(out);
	snprintf(path, sizeof path, "%s/sm.json", out);
	long n = run_bytes_of(path);
	cr_assert_gt(n, 0);

	float x[64];
	for (int i = 0; i < 64; i++)
		x[i] = (float)i / 16.0f - 2.0f;
	snprintf(path, sizeof path, "%s/IN.bin", out);
	cr_assert_eq(write_file(path, x, sizeof x), 0);
	int rc = run_limited(out, "sm", true, n);
	snprintf(path, sizeof path, "%s/stack.log", out);
	char *log = slurp(path);
	cr_assert_eq(rc, 0, "the run on a stack of run_bytes (%ld) + 16 KiB: exit %d\n%s", n, rc, log);
	cr_assert(strstr(log, "reached"), "%s", log);
	free(log);
	snprintf(path, sizeof path, "%s/output_0.bin", out);
	float y[64];
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f);
	cr_assert_eq(fread(y, sizeof *y, 64, f), 64);
	fclose(f);
	for (int i = 0; i < 64; i++) {
		float w = 0.25f * (float)(i % 5) - 0.5f;
		float want = tanhf(expf(x[i]) * w) + x[i];
		cr_assert_float_eq(y[i], want, 1e-5, "y[%d] = %g, want %g", i, y[i], want);
	}

	/* --no-stack-usage: null and why */
	o.no_stack_usage = true;
	cr_assert_eq(mc_compile(model, out, &o), 0);
	snprintf(path, sizeof path, "%s/sm.json", out);
	char *json = slurp(path);
	cr_assert(strstr(json, "\"stack\": null,\n  \"stack_note\": \"not measured (--no-stack-usage)\""), "%s", json);
	free(json);
	rm_tree(tmp);
	free(model);
	free(tmp);
}

/* The check itself can fail: a 64 KiB frame run against a smaller figure
 * goes deeper than it (status 99), and on a stack far too small it dies on
 * the guard page instead of writing past it. */
Test(stack, limited_stack_run_catches_an_underestimate)
{
	char *dir = make_temp_dir(), path[4200];
	write_deep_model(dir, 65536);
	mc_stack_usage u;
	mc_stack_measure(dir, "t", "cc", &u);
	cr_assert(u.measured && u.bound.bounded, "%s%s", u.note, u.bound.why);
	long n = (long)u.bound.bytes;
	mc_stack_usage_free(&u);
	snprintf(path, sizeof path, "%s/IN.bin", dir);
	cr_assert_eq(write_file(path, "", 0), 0);
	cr_assert_eq(run_limited(dir, "t", false, n), 0, "the measured figure %ld holds", n);
	cr_assert_eq(run_limited(dir, "t", false, n - 4096), 99, "4 KiB under the figure");
	int rc = run_limited(dir, "t", false, 0);
	cr_assert_eq(rc, 128 + SIGSEGV, "a 64 KiB frame on a 16 KiB stack: exit %d", rc);
	rm_tree(dir);
	free(dir);
}
