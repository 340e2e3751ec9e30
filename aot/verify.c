/* modelc verify: compile, build with the host compiler, run on seeded
 * random inputs (or the given ones), compare with the reference
 * interpreter (or another runtime's output files). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compile.h"
#include "../freezing/freezing.h"

void mc_verify_opts_init(mc_verify_opts *v)
{
	memset(v, 0, sizeof *v);
	v->seed = 1;
	v->scale = 1.0;
	v->rtol = 1e-4;
	v->atol = 1e-6;
	v->cc = "cc";
	v->cflags = "-std=c99 -O2 -Wall -Wextra -Werror";
}

static uint64_t next_rand(uint64_t *s)
{
	/* xorshift64*: deterministic across hosts */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static void fill_random(mc_tensor *t, uint64_t *s, double scale)
{
	for (size_t i = 0; i < t->numel; i++) {
		uint64_t r = next_rand(s);
		if (mc_dtype_is_float(t->dtype))
			mc_set_f(t, i, scale * ((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0));
		else if (t->dtype == MC_BOOL)
			mc_set_i(t, i, (int64_t)(r >> 63));
		else
			mc_set_i(t, i, (int64_t)((r >> 33) % 4)); /* small: indices stay in range */
	}
}

static int write_file(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f) {
		mc_error("cannot write '%s': %s", path, strerror(errno));
		return -1;
	}
	bool ok = fwrite(data, 1, n, f) == n;
	if (fclose(f) || !ok) {
		mc_error("cannot write '%s'", path);
		return -1;
	}
	return 0;
}

/* The first line of DIR/FILE, for a message. */
static void first_log_line(const char *dir, const char *file, char *buf, size_t n)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	buf[0] = 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	if (fgets(buf, (int)n, f))
		buf[strcspn(buf, "\n")] = 0;
	fclose(f);
}

int mc_run_harness(const char *dir, const char *name, const char *cc, const char *cflags,
                   const mc_graph *g, mc_tensor *const *in, mc_tensor **out, int *exit_status)
{
	return mc_run_harness_ex(dir, name, cc, cflags, false, g, in, out, exit_status);
}

/* What a program linking the library adds (--blas openblas: -lopenblas),
 * as build.ninja beside it names it (NAME_libs = ...); "" for nothing. */
static void link_libs(const char *dir, const char *name, char *libs, size_t n)
{
	char path[4200], line[512], key[300];
	snprintf(path, sizeof path, "%s/build.ninja", dir);
	snprintf(key, sizeof key, "%s_libs = ", name);
	libs[0] = 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, key, strlen(key))) {
			snprintf(libs, n, " %s", line + strlen(key));
			libs[strcspn(libs, "\n")] = 0;
		}
	fclose(f);
}

int mc_run_harness_ex(const char *dir, const char *name, const char *cc, const char *cflags, bool one_unit,
                      const mc_graph *g, mc_tensor *const *in, mc_tensor **out, int *exit_status)
{
	char cmd[16384], line[512], libs[256];
	*exit_status = 0;
	link_libs(dir, name, libs, sizeof libs);
	/* the llvm target leaves a library, no sources: link the driver to it */
	char src[4200], lib[4200];
	snprintf(src, sizeof src, "%s/%s.c", dir, name);
	snprintf(lib, sizeof lib, "%s/lib%s.a", dir, name);
	if (access(src, F_OK) != 0 && access(lib, F_OK) == 0) {
		snprintf(cmd, sizeof cmd, "cd '%s' && %s %s %s_main.c -o %s_main ./lib%s.a%s -lm > cc.log 2>&1",
		         dir, cc, cflags, name, name, name, libs);
	} else if (one_unit) {
		/* the harness first: it defines _POSIX_C_SOURCE before any header */
		char unity[4200], text[4200];
		snprintf(unity, sizeof unity, "%s/%s_unity.c", dir, name);
		int len = snprintf(text, sizeof text, "#include \"%s_main.c\"\n#include \"%s.c\"\n#include \"%s_weights.c\"\n",
		                   name, name, name);
		if (write_file(unity, text, (size_t)len))
			return -1;
		snprintf(cmd, sizeof cmd, "cd '%s' && %s %s -I. %s_unity.c -o %s_main%s -lm > cc.log 2>&1", dir, cc,
		         cflags, name, name, libs);
	} else {
		snprintf(cmd, sizeof cmd, "cd '%s' && %s %s %s.c %s_weights.c %s_main.c -o %s_main%s -lm > cc.log 2>&1",
		         dir, cc, cflags, name, name, name, name, libs);
	}
	if (system(cmd) != 0) {
		first_log_line(dir, "cc.log", line, sizeof line);
		mc_error("generated code does not compile: %s", line);
		return MC_HARNESS_BUILD;
	}
	size_t len = (size_t)snprintf(cmd, sizeof cmd, "cd '%s' && ./%s_main .", dir, name);
	for (int i = 0; i < g->n_inputs; i++) {
		char path[4200];
		snprintf(path, sizeof path, "%s/input_%d.bin", dir, i);
		if (write_file(path, in[i]->data, in[i]->nbytes))
			return -1;
		len += (size_t)snprintf(cmd + len, sizeof cmd - len, " input_%d.bin", i);
	}
	snprintf(cmd + len, sizeof cmd - len, " > run.log 2>&1");
	int ws = system(cmd);
	if (ws == -1 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
		/* the shell reports a signal as 128 + its number */
		*exit_status = ws != -1 && WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
		first_log_line(dir, "run.log", line, sizeof line);
		mc_error("the compiled model failed (exit status %d): %s", *exit_status, line);
		return MC_HARNESS_RUN;
	}
	for (int k = 0; k < g->n_outputs; k++) {
		const mc_value *v = &g->values[g->outputs[k]];
		char path[4200];
		snprintf(path, sizeof path, "%s/output_%d.bin", dir, k);
		/* a counted output's file holds the entries its run filled */
		if (!(out[k] = mc_tensor_read_counted(path, v->dtype, &v->shape, v->counted ? v->count_axis : -1)))
			return -1;
	}
	return 0;
}

/* Output v's reference: DIR/FILE.npy or DIR/FILE.bin, FILE as `modelc
 * run` names it; a counted output's count is the file's. NULL after
 * reporting. */
static mc_tensor *read_reference(const char *dir, const mc_value *v)
{
	char file[512], bin[4200], npy[4200];
	mc_output_file_name(v->name, file, sizeof file);
	snprintf(bin, sizeof bin, "%s/%s", dir, file);
	snprintf(npy, sizeof npy, "%s/%.*s.npy", dir, (int)strlen(file) - 4, file);
	bool has_bin = access(bin, F_OK) == 0, has_npy = access(npy, F_OK) == 0;
	if (has_bin == has_npy) {
		if (has_bin)
			mc_error("output '%s': both '%s' and '%s' are there; which is the reference?", v->name, bin, npy);
		else
			mc_error("output '%s': no reference file '%s' (raw) or '%s' (.npy)", v->name, bin, npy);
		return NULL;
	}
	return mc_tensor_read_counted(has_npy ? npy : bin, v->dtype, &v->shape, v->counted ? v->count_axis : -1);
}

/* One output's line of the table; whether it is within tolerance. exact:
 * every element equal (integers against another runtime). */
static bool compare_output(const mc_value *val, const mc_tensor *want, const mc_tensor *got, double atol,
                           double rtol, bool exact)
{
	double max_ref = 0, max_err = 0, se = 0, sr = 0;
	bool nan_mismatch = false;
	/* a counted output's count: another one is a mismatch, not a reason
	 * to read past the shorter */
	if (!mc_shape_eq(&want->shape, &got->shape)) {
		char why[600], a[256], b[256];
		if (val->counted)
			snprintf(why, sizeof why, "count %lld on axis %d, reference %lld",
			         (long long)got->shape.dims[val->count_axis], val->count_axis,
			         (long long)want->shape.dims[val->count_axis]);
		else
			snprintf(why, sizeof why, "shape %s, reference %s", mc_shape_str(&got->shape, a, sizeof a),
			         mc_shape_str(&want->shape, b, sizeof b));
		printf("%-32s %-10s %14s %14s %14s  FAIL (%s)\n", val->name, mc_dtype_name(val->dtype), "-", "-", "-",
		       why);
		return false;
	}
	for (size_t i = 0; i < want->numel; i++) {
		double a = mc_get_f(want, i), b = mc_get_f(got, i);
		if (isnan(a) || isnan(b)) {
			nan_mismatch |= isnan(a) != isnan(b);
			continue;
		}
		if (isinf(a) || isinf(b)) {
			nan_mismatch |= a != b;
			continue;
		}
		double d = fabs(a - b);
		max_ref = fmax(max_ref, fabs(a));
		max_err = fmax(max_err, d);
		se += d * d;
		sr += a * a;
	}
	double rrmse = sr > 0 ? sqrt(se / sr) : sqrt(se);
	bool pass = !nan_mismatch && (exact ? max_err == 0 : max_err <= atol + rtol * max_ref);
	printf("%-32s %-10s %14.6g %14.6g %14.6g  %s\n", val->name, mc_dtype_name(val->dtype), max_ref, max_err,
	       rrmse, pass ? "ok" : nan_mismatch ? "FAIL (NaN/inf mismatch)" : exact ? "FAIL (not exact)" : "FAIL");
	return pass;
}

int mc_verify(const char *model, const mc_compile_opts *o, const mc_verify_opts *v)
{
	/* the code must run here: the C target, or the llvm one built for this machine */
	const mc_target *t = mc_target_named(o->target);
	if (!t)
		return -1;
	if (t->object && o->triple) {
		mc_error("verify runs the compiled model on this machine: not with --triple");
		return -1;
	}
	if (!t->verify) {
		mc_error("verify builds and runs the C or llvm target on this machine; the %s target runs on "
		         "a GPU (tests/cuda/check)", t->name);
		return -1;
	}
	if (v->reference && !v->n_inputs) {
		mc_error("--reference DIR holds outputs for given inputs: name them with --input NAME=FILE");
		return -1;
	}
	mc_graph *g = mc_import_file(model, &o->import);
	if (!g)
		return -1;
	int rc = -1, n_in = 0;
	mc_tensor **in = NULL, **want = NULL, **got = NULL;
	char dir[4096] = "";
	/* Bound inputs are constants for the reference too. */
	if (mc_apply_binds(g, o))
		goto out;
	if (mc_infer_graph(g) || (!o->no_quantize && mc_quantize_reference(g, o->quantized_io)))
		goto out;
	n_in = g->n_inputs;
	in = mc_xcalloc((size_t)n_in + 1, sizeof *in);
	want = mc_xcalloc((size_t)g->n_outputs + 1, sizeof *want);
	got = mc_xcalloc((size_t)g->n_outputs + 1, sizeof *got);
	uint64_t seed = v->seed * 0x9E3779B97F4A7C15ull + 1;
	if (v->n_inputs && mc_read_inputs(g, v->n_inputs, v->input_names, v->input_files, in))
		goto out;
	for (int i = 0; i < n_in && !v->n_inputs; i++) {
		const mc_value *val = &g->values[g->inputs[i]];
		in[i] = mc_tensor_new(val->dtype, &val->shape);
		if (!in[i]) {
			mc_error("input '%s' is too large", val->name);
			goto out;
		}
		fill_random(in[i], &seed, v->scale);
	}
	for (int k = 0; v->reference && k < g->n_outputs; k++)
		if (!(want[k] = read_reference(v->reference, &g->values[g->outputs[k]])))
			goto out;
	if (!v->reference)
		mc_progress("running the reference interpreter");
	if (!v->reference && mc_interp_run(g, in, want, NULL))
		goto out;
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof dir, "%s/modelc-verify-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		mc_error("mkdtemp: %s", strerror(errno));
		dir[0] = 0;
		goto out;
	}
	mc_compile_opts co = *o;
	co.harness = true;
	if (mc_compile(model, dir, &co))
		goto out;
	int exit_status;
	mc_progress("building the generated code with %s and running it", v->cc ? v->cc : "cc");
	if (mc_run_harness(dir, co.name, v->cc, v->cflags, g, in, got, &exit_status))
		goto out;
	bool ok = true;
	printf("%-32s %-10s %14s %14s %14s  %s\n", "output", "dtype", "max|ref|", "max|err|", "rel RMSE",
	       "verdict");
	for (int k = 0; k < g->n_outputs; k++) {
		const mc_value *val = &g->values[g->outputs[k]];
		bool exact = v->reference && !v->atol_given && !mc_dtype_is_float(val->dtype);
		ok &= compare_output(val, want[k], got[k], v->atol, v->rtol, exact);
	}
	printf("tolerance: max|err| <= %g + %g * max|ref| (--atol, --rtol)", v->atol, v->rtol);
	if (v->reference && !v->atol_given)
		printf("; integer and bool outputs exact");
	if (v->n_inputs)
		printf("; the inputs given");
	else
		printf("; seed %llu", (unsigned long long)v->seed);
	printf("; reference: %s\n", v->reference ? v->reference : "the interpreter");
	rc = ok ? 0 : 1;
out:
	if (dir[0] && !v->keep) {
		char cmd[4200];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			mc_warn("could not remove %s", dir);
	} else if (dir[0]) {
		fprintf(stderr, "modelc: kept %s\n", dir);
	}
	for (int i = 0; i < n_in; i++)
		mc_tensor_free(in[i]);
	for (int k = 0; want && k < g->n_outputs; k++) {
		mc_tensor_free(want[k]);
		mc_tensor_free(got[k]);
	}
	free(in);
	free(want);
	free(got);
	mc_graph_free(g);
	return rc;
}
