/* The compile pipeline: import, bind, infer, freeze, build the program,
 * emit the target's sources, then NAME.json and build.ninja. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "compile.h"
#include "../freezing/freezing.h"

void mc_compile_opts_init(mc_compile_opts *o)
{
	memset(o, 0, sizeof *o);
	o->name = "model";
	o->target = "c";
	o->fold_limit = MC_DEFAULT_FOLD_LIMIT;
	o->stack_cc = "cc";
	o->blas_min_macs = -1;
	o->threads_min_work = -1;
}

static bool is_identifier(const char *s)
{
	if (!s || !*s || (*s >= '0' && *s <= '9'))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

/* --bind NAME=VALUE: VALUE is a tensor file (raw or .npy) when one exists
 * by that name, else comma-separated numbers filling the input's shape. */
static mc_tensor *bind_value(const mc_value *v, const char *text)
{
	struct stat st;
	if (stat(text, &st) == 0)
		return mc_tensor_read_file(text, v->dtype, &v->shape);
	mc_tensor *t = mc_tensor_new(v->dtype, &v->shape);
	if (!t) {
		mc_error("cannot bind input '%s': bad shape", v->name);
		return NULL;
	}
	size_t i = 0;
	const char *s = text;
	while (*s) {
		char *end;
		double x = strtod(s, &end);
		if (end == s || i >= t->numel) {
			mc_error("--bind %s=%s: expected %zu comma-separated numbers or a tensor file",
			         v->name, text, t->numel);
			mc_tensor_free(t);
			return NULL;
		}
		if (mc_dtype_is_float(v->dtype))
			mc_set_f(t, i++, x);
		else
			mc_set_i(t, i++, (int64_t)x);
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',') {
			mc_error("--bind %s=%s: junk after a number", v->name, text);
			mc_tensor_free(t);
			return NULL;
		}
	}
	if (i != t->numel) {
		mc_error("--bind %s=%s: %zu numbers for %zu elements", v->name, text, i, t->numel);
		mc_tensor_free(t);
		return NULL;
	}
	return t;
}

int mc_apply_binds(mc_graph *g, const mc_compile_opts *o)
{
	for (int b = 0; b < o->n_binds; b++) {
		int found = -1;
		for (int i = 0; i < g->n_inputs; i++)
			if (strcmp(g->values[g->inputs[i]].name, o->bind_names[b]) == 0)
				found = i;
		if (found < 0) {
			mc_error("--bind: the model has no input named '%s'", o->bind_names[b]);
			return -1;
		}
		mc_tensor *t = bind_value(&g->values[g->inputs[found]], o->bind_values[b]);
		if (!t || mc_graph_bind_input(g, found, t))
			return -1;
	}
	return 0;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void json_string(mc_strbuf *b, const char *s)
{
	mc_sb_puts(b, "\"");
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			mc_sb_printf(b, "\\%c", ch);
		else if (ch < 0x20)
			mc_sb_printf(b, "\\u%04x", ch);
		else
			mc_sb_printf(b, "%c", ch);
	}
	mc_sb_puts(b, "\"");
}

/* at: --io-in-arena's places, or NULL: the byte in the one arena, and with
 * pools the pool and the byte in it */
static void json_io(mc_strbuf *b, const mc_program *p, const mc_io_desc *d, const mc_loc *at, int n)
{
	mc_sb_puts(b, "[");
	for (int i = 0; i < n; i++) {
		mc_sb_puts(b, i ? ",\n    {\"name\": " : "\n    {\"name\": ");
		json_string(b, d[i].name);
		mc_sb_printf(b, ", \"dtype\": \"%s\", \"shape\": [", mc_dtype_name(d[i].dtype));
		for (int k = 0; k < d[i].shape.rank; k++)
			mc_sb_printf(b, "%s%lld", k ? ", " : "", (long long)d[i].shape.dims[k]);
		mc_sb_puts(b, "]");
		if (d[i].scale > 0)
			mc_sb_printf(b, ", \"scale\": %.9g, \"zero_point\": %lld", d[i].scale,
			             (long long)d[i].zero_point);
		if (d[i].counted) /* shape holds the bound there; the run gives the count */
			mc_sb_printf(b, ", \"counted_axis\": %d", d[i].count_axis);
		if (at)
			mc_sb_printf(b, ", \"arena_offset\": %zu", mc_program_arena_offset(p, &at[i]));
		if (at && p->n_pools > 1)
			mc_sb_printf(b, ", \"pool\": %d, \"pool_offset\": %zu", at[i].index, at[i].offset);
		mc_sb_puts(b, "}");
	}
	mc_sb_puts(b, n ? "\n  ]" : "]");
}

/* What the model's code and constants take in flash, from an object: the
 * llvm target's NAME.o (the weights in it), or the stack measure's compile
 * of NAME.c (the weights beside it, in NAME_weights.c: weight_bytes, their
 * arrays' padding aside); or not sized, and why. */
static void measure_flash(const mc_program *p, const mc_stack_usage *u, const char *dir, const char *name,
                          mc_flash *f)
{
	const mc_target *t = p->target.desc;
	mc_object_sizes s;
	size_t weights_apart = 0;
	memset(f, 0, sizeof *f);
	if (t->object) {
		char path[4200];
		snprintf(path, sizeof path, "%s/%s.o", dir, name);
		f->sized = mc_object_sizes_of(path, &s, f->why, sizeof f->why) == 0;
		snprintf(f->from, sizeof f->from, "%s.o", name);
	} else if (u->sized) {
		s = u->object;
		f->sized = true;
		weights_apart = p->weight_bytes;
		snprintf(f->from, sizeof f->from, "%s.c by %s %s, and the weights", name, u->compiler, u->flags);
	} else {
		snprintf(f->why, sizeof f->why, "%s", u->measured ? "not measured (the stack measure's object is not ELF)"
		                                                  : u->note);
	}
	if (!f->sized)
		return;
	f->code_bytes = s.text_bytes;
	f->const_bytes = s.rodata_bytes + weights_apart;
	f->total_bytes = s.text_bytes + f->const_bytes + s.data_bytes;
	f->static_ram_bytes = s.data_bytes + s.bss_bytes;
}

/* "flash": measure_flash's figure, or null and a note. */
static void json_flash(mc_strbuf *b, const mc_flash *f)
{
	if (!f->sized) {
		mc_sb_puts(b, ",\n  \"flash\": null,\n  \"flash_note\": ");
		json_string(b, f->why);
		return;
	}
	mc_sb_printf(b, ",\n  \"flash\": {\"total_bytes\": %zu, \"code_bytes\": %zu, \"const_bytes\": %zu, "
	             "\"static_ram_bytes\": %zu, \"from\": ", f->total_bytes, f->code_bytes, f->const_bytes,
	             f->static_ram_bytes);
	json_string(b, f->from);
	mc_sb_puts(b, "}");
}

/* "stack": NAME_run's worst-case stack (aot/stack.c), or null and a note. */
static void json_stack(mc_strbuf *b, const mc_stack_usage *u)
{
	if (!u->measured) {
		mc_sb_puts(b, ",\n  \"stack\": null,\n  \"stack_note\": ");
		json_string(b, u->note);
		return;
	}
	if (u->bound.bounded) {
		mc_sb_printf(b, ",\n  \"stack\": {\"run_bytes\": %zu", u->bound.bytes);
	} else {
		mc_sb_puts(b, ",\n  \"stack\": {\"run_bytes\": null, \"unbounded\": ");
		json_string(b, u->bound.why);
	}
	mc_sb_printf(b, ", \"method\": \"%s\", \"compiler\": ", u->method);
	json_string(b, u->compiler);
	mc_sb_puts(b, ", \"target\": ");
	json_string(b, u->target);
	mc_sb_puts(b, ", \"flags\": ");
	json_string(b, u->flags);
	mc_sb_printf(b, ", \"red_zone\": %zu, \"excludes\": ", u->red_zone);
	if (!u->bound.bounded || strcmp(u->method, "callgraph")) {
		mc_sb_puts(b, "null}"); /* unknown: a .su does not name callees */
		return;
	}
	mc_sb_puts(b, "[");
	for (int i = 0; i < u->bound.n_excludes; i++) {
		mc_sb_puts(b, i ? ", " : "");
		json_string(b, u->bound.excludes[i]);
	}
	mc_sb_puts(b, "]}");
}

static void stats_stack(const mc_compile_opts *o, const mc_stack_usage *u)
{
	if (!u->measured) {
		fprintf(stderr, "modelc: stats: stack of %s_run: %s%s\n", o->name,
		        strncmp(u->note, "not measured", 12) ? "not measured: " : "", u->note);
		return;
	}
	if (u->bound.bounded)
		fprintf(stderr, "modelc: stats: stack of %s_run: %zu bytes", o->name, u->bound.bytes);
	else
		fprintf(stderr, "modelc: stats: stack of %s_run: unbounded (%s)", o->name, u->bound.why);
	fprintf(stderr, " (%s, %s, %s", u->compiler, *u->target ? u->target : "unknown target", u->method);
	for (int i = 0; i < u->bound.n_excludes; i++)
		fprintf(stderr, "%s%s", i ? ", " : "; not counted: ", u->bound.excludes[i]);
	fprintf(stderr, "), %.1f ms\n", u->ms);
}

/* NAME_run's stack, measured where the target and options allow, into u
 * (mc_stack_usage_free it). */
static void measure_stack(const mc_program *p, const mc_compile_opts *o, const char *dir, mc_stack_usage *u)
{
	const mc_target *t = p->target.desc;
	memset(u, 0, sizeof *u);
	if (t->object)
		snprintf(u->note, sizeof u->note, "not measured (the %s target writes objects; "
		         "measure them with the firmware's linker)", t->name);
	else if (!t->measures_stack)
		snprintf(u->note, sizeof u->note, "not measured (the %s target's run only launches)",
		         t->name);
	else if (o->no_stack_usage)
		snprintf(u->note, sizeof u->note, "not measured (--no-stack-usage)");
	else {
		mc_progress("measuring the stack and flash (%s)", o->stack_cc ? o->stack_cc : "cc");
		mc_stack_measure_run(dir, o->name, mc_program_run_name(p), o->stack_cc, u);
	}
	if (o->stats)
		stats_stack(o, u);
}

static int write_json(const mc_program *p, const mc_compile_opts *o, const char *model_rel,
                      const char *sha, const char *dir, const mc_stack_usage *stack, const mc_flash *flash)
{
	const mc_target *t = p->target.desc;
	mc_strbuf b = { 0 };
	mc_sb_puts(&b, "{\n  \"name\": ");
	json_string(&b, o->name);
	mc_sb_printf(&b, ",\n  \"modelc_version\": \"%s\",\n  \"target\": \"%s\",\n  \"dtype\": \"%s\",\n  \"model\": ",
	             MC_VERSION, t->name, o->dtype ? o->dtype : "fp32");
	json_string(&b, model_rel);
	mc_sb_printf(&b, ",\n  \"model_sha256\": \"%s\",\n  \"options\": ", sha);
	json_string(&b, o->argv_line ? o->argv_line : "");
	mc_sb_puts(&b, ",\n  \"inputs\": ");
	json_io(&b, p, p->inputs, p->input_at, p->n_inputs);
	mc_sb_puts(&b, ",\n  \"outputs\": ");
	json_io(&b, p, p->outputs, p->output_at, p->n_outputs);
	mc_sb_printf(&b, ",\n  \"io_in_arena\": %s", p->io_in_arena ? "true" : "false");
	mc_sb_printf(&b, ",\n  \"arena_bytes\": %zu,\n  \"arena_align\": %zu,\n  \"arena_lower_bound\": %zu,\n"
	             "  \"arena_bytes_in_order\": %zu,\n  \"arena_lower_bound_in_order\": %zu,\n"
	             "  \"weight_bytes\": %zu,\n  \"weights\": %d,\n  \"kernels\": %d,\n  \"macs\": %.0f",
	             p->arena_bytes, p->arena_align, p->lower_bound, p->arena_in_order,
	             p->lower_bound_in_order, p->weight_bytes, p->n_weights, p->n_kernels, p->macs);
	json_stack(&b, stack);
	json_flash(&b, flash);
	mc_sb_puts(&b, "\n}\n");
	char path[4096];
	snprintf(path, sizeof path, "%s/%s.json", dir, o->name);
	int rc = mc_write_if_changed(path, b.data, b.len);
	mc_sb_free(&b);
	return rc;
}

/* NAME.json and, with --report, NAME_report.html, from one measure of the
 * stack and flash; dir is the staging directory, where NAME.c already is. */
static int write_manifests(const mc_program *p, const mc_compile_opts *o, const char *model_rel,
                           const char *sha, const char *dir)
{
	mc_stack_usage stack;
	mc_flash flash;
	measure_stack(p, o, dir, &stack);
	measure_flash(p, &stack, dir, o->name, &flash);
	int rc = write_json(p, o, model_rel, sha, dir, &stack, &flash) ||
	         (o->report && mc_write_report(p, o, &stack, &flash, dir)) ? -1 : 0;
	mc_stack_usage_free(&stack);
	return rc;
}

/* PATH's last component, trailing slashes ignored: [*start, *end). */
static void last_component(const char *path, size_t *start, size_t *end)
{
	size_t len = strlen(path);
	while (len > 1 && path[len - 1] == '/')
		len--;
	size_t s = len;
	while (s > 0 && path[s - 1] != '/')
		s--;
	*start = s;
	*end = len;
}

/* DIR's absolute path, symlinks resolved, into abs: ninja reads every path
 * relative to its own working directory, so build.ninja names DIR by it to
 * work as a subninja of a build elsewhere as well as on its own. DIR may
 * not exist yet; then the stage was made beside it, in its parent. */
static int out_dir_abs(const char *out_dir, const char *stage, char *abs, size_t n)
{
	char real[4096];
	if (realpath(out_dir, real)) {
		if (snprintf(abs, n, "%s", real) < (int)n)
			return 0;
		mc_error("path too long: %s", real);
		return -1;
	}
	size_t start, len;
	last_component(out_dir, &start, &len);
	char *slash;
	if (!realpath(stage, real) || !(slash = strrchr(real, '/'))) {
		mc_error("cannot resolve output directory '%s': %s", out_dir, strerror(errno));
		return -1;
	}
	*slash = 0;
	if (snprintf(abs, n, "%s/%.*s", real, (int)(len - start), out_dir + start) < (int)n)
		return 0;
	mc_error("path too long: %s", out_dir);
	return -1;
}

/* The path of absolute path `to` relative to absolute directory `from`
 * (both without symlinks), into rel: NAME.ninja and NAME.json name the
 * model by it, so that a project's tree (model, generated directory)
 * gives the same files wherever it is checked out. 0, or -1 after
 * reporting. */
static int path_from_dir(const char *from, const char *to, char *rel, size_t n)
{
	/* the common directories: up to a '/' both have, or all of from */
	size_t common = 0, i = 0;
	while (from[i] && from[i] == to[i])
		if (from[i++] == '/')
			common = i;
	if (!from[i] && to[i] == '/')
		common = i + 1;
	const char *from_rest = common > strlen(from) ? "" : from + common;
	mc_strbuf b = { 0 };
	while (*from_rest) { /* one "../" per directory of from below the common ones */
		mc_sb_puts(&b, "../");
		from_rest += strcspn(from_rest, "/");
		from_rest += *from_rest == '/';
	}
	mc_sb_puts(&b, to + common);
	int rc = 0;
	if (b.len < n) {
		memcpy(rel, b.data, b.len + 1);
	} else {
		mc_error("path too long: %s", to);
		rc = -1;
	}
	mc_sb_free(&b);
	return rc;
}

/* s as text of a ninja file: '$' is its escape, and a space or ':'
 * escaped too reads the same in a variable's value as in a path. */
static void ninja_text(mc_strbuf *b, const char *s)
{
	for (; *s; s++)
		mc_sb_puts(b, *s == '$' ? "$$" : *s == ' ' ? "$ " : *s == ':' ? "$:" : (char[2]){ *s, 0 });
}

/* NAME.ninja from the template aot/model.ninja.in (@NAME@, @MODEL@: the
 * model's path from the output directory, @OPTIONS@, @VERSION@ filled in),
 * and build.ninja, which sets defaults and includes it. The modelc that
 * regenerates is the tool variable $modelc (default: modelc on PATH), like
 * $cc: a path of this modelc would make the directory differ from one
 * checkout or installation of modelc to the next. */
static int write_ninja(const mc_target_config *t, const mc_compile_opts *o, const char *model_rel,
                       const char *dir, const char *dir_abs)
{
	mc_strbuf b = { 0 };
	for (const char *s = t->desc->ninja_in; *s; ) {
		if (strncmp(s, "@NAME@", 6) == 0) {
			mc_sb_puts(&b, o->name);
			s += 6;
		} else if (strncmp(s, "@MODEL@", 7) == 0) {
			ninja_text(&b, model_rel);
			s += 7;
		} else if (strncmp(s, "@OPTIONS@", 9) == 0) {
			if (o->argv_line && *o->argv_line)
				mc_sb_printf(&b, " %s", o->argv_line);
			s += 9;
		} else if (strncmp(s, "@VERSION@", 9) == 0) {
			mc_sb_puts(&b, MC_VERSION);
			s += 9;
		} else {
			mc_sb_printf(&b, "%c", *s++);
		}
	}
	char path[4096];
	snprintf(path, sizeof path, "%s/%s.ninja", dir, o->name);
	int rc = mc_write_if_changed(path, b.data, b.len);
	mc_sb_free(&b);
	if (rc)
		return rc;
	b = (mc_strbuf){ 0 };
	/* vector code needs its ISA enabled (NAME.c stops with #error otherwise) */
	const mc_isa *isa = t->isa;
	const char *isa_flags = !isa ? "" : isa->kind == MC_ISA_AVX512 ? " -mavx512f -mavx512vl -mfma"
	                                  : isa->kind == MC_ISA_AVX2 ? " -mavx2 -mfma" : "";
	mc_sb_printf(&b, "# Generated by modelc %s: builds lib%s.a, on its own (`ninja` here, or\n"
	             "# `ninja -C DIR`) or as a subninja of another build (`subninja DIR/build.ninja`,\n"
	             "# whose edges then name $%s_dir/lib%s.a). Ninja reads paths relative to\n"
	             "# its working directory, so %s_dir is this directory's absolute path\n"
	             "# (moved: run modelc compile again). No `default`: on its own ninja builds\n"
	             "# every final output, the library; as a subninja it adds nothing to the\n"
	             "# parent's defaults. Its variables below shadow the parent's; to build with\n"
	             "# your own compiler, set them and include %s.ninja instead (see there).\n"
	             "ninja_required_version = 1.10\n"
	             "modelc = modelc\ncc = cc\ncflags = -std=c99 -O2 -Wall -Wextra%s\nar = ar\n",
	             MC_VERSION, o->name, o->name, o->name, o->name, o->name, isa_flags);
	if (t->desc->gpu) {
		/* one -gencode per arch: SASS for each, and PTX of the newest so
		 * that later GPUs can still run the library */
		mc_sb_puts(&b, "nvcc = nvcc\nnvccflags = -O3 -std=c++17");
		const char *arch = o->cuda_arch ? o->cuda_arch : MC_CUDA_ARCH_DEFAULT;
		char last[32] = "";
		for (const char *a = arch; *a; ) {
			size_t len = strcspn(a, ",");
			const char *num = a + strcspn(a, "0123456789");
			size_t nlen = len - (size_t)(num - a);
			if (nlen >= sizeof last)
				nlen = sizeof last - 1;
			mc_sb_printf(&b, " -gencode arch=compute_%.*s,code=sm_%.*s", (int)nlen, num, (int)nlen, num);
			snprintf(last, sizeof last, "%.*s", (int)nlen, num);
			a += len + (a[len] == ',');
		}
		mc_sb_printf(&b, " -gencode arch=compute_%s,code=compute_%s\n", last, last);
	}
	mc_sb_printf(&b, "%s_dir = ", o->name);
	ninja_text(&b, dir_abs);
	mc_sb_printf(&b, "\ninclude $%s_dir/%s.ninja\n", o->name, o->name);
	if (o->blas && !strcmp(o->blas, "openblas")) /* what a program linking the library adds */
		mc_sb_printf(&b, "# --blas openblas: %s.c may call cblas_sgemm; link programs with $%s_libs\n"
		             "%s_libs = -lopenblas\n", o->name, o->name, o->name);
	snprintf(path, sizeof path, "%s/build.ninja", dir);
	rc = mc_write_if_changed(path, b.data, b.len);
	mc_sb_free(&b);
	return rc;
}

/* sm_NN[a] (or compute_NN) words separated by commas. */
static bool cuda_arch_ok(const char *s)
{
	while (*s) {
		size_t n = strncmp(s, "sm_", 3) == 0 ? 3 : strncmp(s, "compute_", 8) == 0 ? 8 : 0;
		if (!n || !isdigit((unsigned char)s[n]))
			return false;
		s += n;
		while (isdigit((unsigned char)*s))
			s++;
		if (*s == 'a' || *s == 'f')
			s++;
		if (*s == ',' && s[1])
			s++;
		else if (*s)
			return false;
	}
	return true;
}

bool mc_cuda_archs_at_least(const char *list, int min)
{
	for (const char *a = list ? list : MC_CUDA_ARCH_DEFAULT; *a; a += strcspn(a, ","), a += *a == ',') {
		const char *num = a + strcspn(a, "0123456789");
		if (atoi(num) < min)
			return false;
	}
	return true;
}

static int check_opts(const mc_compile_opts *o)
{
	if (!is_identifier(o->name)) {
		mc_error("--name '%s' is not a C identifier", o->name ? o->name : "");
		return -1;
	}
	const mc_target *t = mc_target_named(o->target);
	if (!t)
		return -1;
	if (o->dump_after && strcmp(o->dump_after, "all") && strcmp(o->dump_after, "kernels") &&
	    !mc_freeze_pass_known(o->dump_after) && !mc_program_stage_known(o->dump_after)) {
		mc_error("--dump-after '%s': no such pass (known: the freezing passes fold, unroll, bn, "
		         "pad, patterns, identity, cse, dce, layout; the program stages schedule, lower, storage, "
		         "liveness, plan, order, pools, place, steps; kernels; all)", o->dump_after);
		return -1;
	}
	if (t->available && !t->available()) {
		t->emit(NULL, o, NULL); /* reports why */
		return -1;
	}
	if (!t->object && (o->triple || o->cpu || o->features || o->emit_llvm || o->opt)) {
		mc_error("%s needs --target llvm%s", o->triple ? "--triple" : o->cpu ? "--cpu"
		         : o->features ? "--features" : o->emit_llvm ? "--emit-llvm" : "--opt",
		         o->opt ? " (the C and cuda targets are optimised by the flags of the compiler that "
		                  "builds them)" : "");
		return -1;
	}
	if (o->opt && strcmp(o->opt, "O3") && strcmp(o->opt, "Os") && strcmp(o->opt, "Oz")) {
		mc_error("unknown --opt '%s' (known: O3, Os, Oz)", o->opt);
		return -1;
	}
	if (!t->cpu_isa && o->isa) {
		mc_error("--isa chooses CPU vector code: not with --target %s", t->name);
		return -1;
	}
	if (o->cuda_arch && (!t->gpu || !cuda_arch_ok(o->cuda_arch))) {
		mc_error(!t->gpu ? "--cuda-arch needs --target cuda"
		               : "--cuda-arch '%s': expected a comma-separated list like sm_87,sm_90",
		         o->cuda_arch);
		return -1;
	}
	if (o->dtype && strcmp(o->dtype, "fp32") && strcmp(o->dtype, "fp16")) {
		mc_error("unknown --dtype '%s' (known: fp32, fp16)", o->dtype);
		return -1;
	}
	if (o->dtype && !strcmp(o->dtype, "fp16") && !t->fp16) {
		mc_error("--dtype fp16 needs --target cuda");
		return -1;
	}
	if (o->tf32 && (!t->tf32 || (o->dtype && strcmp(o->dtype, "fp32")))) {
		mc_error("--tf32 needs --target cuda and --dtype fp32 (fp16 multiplies in half on tensor cores)");
		return -1;
	}
	if (o->tf32 && !mc_cuda_archs_at_least(o->cuda_arch, 80)) {
		mc_error("--tf32 needs tensor cores of sm_80 or newer, and --cuda-arch '%s' has an older arch",
		         o->cuda_arch ? o->cuda_arch : MC_CUDA_ARCH_DEFAULT);
		return -1;
	}
	if (o->isa && !mc_isa_find(o->isa)) {
		mc_error("unknown --isa '%s' (known: generic, avx2, avx512, avx512-vnni, neon, neon-dotprod, cortex-m, native)", o->isa);
		return -1;
	}
	if (o->layout && strcmp(o->layout, "auto") && strcmp(o->layout, "nchw") && strcmp(o->layout, "nhwc") &&
	    strcmp(o->layout, "depthwise")) {
		mc_error("unknown --layout '%s' (known: auto, nchw, nhwc, depthwise)", o->layout);
		return -1;
	}
	if (o->optimize && strcmp(o->optimize, "speed") && strcmp(o->optimize, "size") &&
	    strcmp(o->optimize, "memory")) {
		mc_error("unknown --optimize '%s' (known: speed, size, memory)", o->optimize);
		return -1;
	}
	for (int i = 0; o->report && i < o->import.n_dim_pins; i++)
		if (o->import.dim_pins[i].hi > o->import.dim_pins[i].value) {
			mc_error("--report: not with --dim %s=LO..HI yet (its kernels are versions for sizes)",
			         o->import.dim_pins[i].param);
			return -1;
		}
	mc_pool_spec pools[MC_MAX_POOLS];
	int n_pools = mc_pool_specs(o, pools);
	if (n_pools < 0)
		return -1;
	if (n_pools > 1 && o->target && !strcmp(o->target, "cuda")) {
		mc_error("--pool: the cuda target has one device allocation (the c and llvm targets "
		         "take pools)");
		return -1;
	}
	if (o->threads > 1 && o->target && strcmp(o->target, "c")) {
		mc_error("--threads: only the c target splits its loops over workers (the %s target "
		         "does not yet)", o->target);
		return -1;
	}
	if (o->blas && strcmp(o->blas, "openblas") && strcmp(o->blas, "none")) {
		mc_error("--blas: '%s' is not a BLAS modelc calls (openblas, or none)", o->blas);
		return -1;
	}
	if (o->blas && !strcmp(o->blas, "openblas") && o->target && strcmp(o->target, "c")) {
		mc_error("--blas openblas: only the c target calls a BLAS (the %s target runs its own "
		         "kernels)", o->target);
		return -1;
	}
	if (o->threads > 1 && n_pools > 1) {
		mc_error("--threads with --pool: not supported yet (NAME_run_threads takes one arena)");
		return -1;
	}
	if (o->io_in_arena && o->target && !strcmp(o->target, "cuda")) {
		mc_error("--io-in-arena: the cuda target's inputs and outputs are host memory (the c and "
		         "llvm targets take it)");
		return -1;
	}
	const char *sections[2] = { o->weights_section, o->code_section };
	for (int i = 0; i < 2; i++) {
		const char *sec = sections[i];
		bool ok = sec && *sec && strlen(sec) < 128;
		for (const char *c = sec; ok && *c; c++)
			ok = isalnum((unsigned char)*c) || *c == '.' || *c == '_' || *c == '$';
		if (sec && !ok) {
			mc_error("--%s-section '%s': a section name is letters, digits, '.', '_' and '$' "
			         "(at most 127)", i ? "code" : "weights", sec);
			return -1;
		}
	}
	return 0;
}

int mc_pool_specs(const mc_compile_opts *o, mc_pool_spec *specs)
{
	if (o->n_pools > MC_MAX_POOLS) {
		mc_error("--pool: at most %d pools", MC_MAX_POOLS);
		return -1;
	}
	for (int i = 0; i < o->n_pools; i++) {
		const char *arg = o->pools[i], *colon = strchr(arg, ':');
		size_t len = colon ? (size_t)(colon - arg) : strlen(arg);
		bool ok = len > 0 && len < MC_POOL_NAME && (isalpha((unsigned char)arg[0]) || arg[0] == '_');
		for (size_t k = 0; k < len && ok; k++)
			ok = isalnum((unsigned char)arg[k]) || arg[k] == '_';
		if (!ok) {
			mc_error("--pool '%s': the name must be a C identifier of at most %d characters",
			         arg, MC_POOL_NAME - 1);
			return -1;
		}
		memcpy(specs[i].name, arg, len);
		specs[i].name[len] = 0;
		for (int j = 0; j < i; j++)
			if (!strcmp(specs[j].name, specs[i].name)) {
				mc_error("--pool '%s': pool names must differ", specs[i].name);
				return -1;
			}
		specs[i].bytes = 0;
		if (colon) {
			char *end;
			errno = 0;
			unsigned long long v = strtoull(colon + 1, &end, 10);
			unsigned long long unit = *end == 'K' || *end == 'k' ? 1024 : *end == 'M' || *end == 'm' ? 1048576 : 1;
			if (unit > 1)
				end++;
			if (end == colon + 1 || *end || errno || v == 0 || v > SIZE_MAX / unit || colon[1] == '-') {
				mc_error("--pool '%s': '%s' is not a byte count (e.g. 65536, 64K, 2M)", arg, colon + 1);
				return -1;
			}
			specs[i].bytes = (size_t)(v * unit);
		} else if (i + 1 < o->n_pools) {
			mc_error("--pool '%s': every pool but the last needs its size (NAME:BYTES)", arg);
			return -1;
		}
	}
	return o->n_pools;
}

/* Output discipline. Emission goes first into a staging directory beside
 * DIR (DIR.modelc-tmp-PID; DIR/.modelc-tmp-PID where DIR's parent is not
 * writable), so that a run that fails or is killed while emitting leaves
 * DIR as it was. A complete stage is then committed in two steps:
 *  1. each file whose content changed (and NAME.json with them) moves into
 *     DIR as NAME.tmpPID: a rename, a copy where the stage is on another
 *     file system. A failure here (a full disk) removes them again: DIR is
 *     left untouched.
 *  2. the old NAME.json is removed, then each file is renamed over its
 *     name, in a fixed order: the ninja files, the sources, NAME.json last.
 *     NAME.json is an output of the regeneration edge (model.ninja.in) and
 *     holds the model's sha256: until the new one is in place, that edge
 *     lacks an output, so it is out of date for ninja, and for any tool,
 *     whatever the mtimes say (a model put in place with an old mtime).
 * Files whose content is unchanged keep their mtime (restat). DIR itself
 * is never swapped for the stage: ninja runs inside it, and its log and
 * objects live there. The stages and temporaries of killed runs are
 * removed by a later run once their process is gone. */
#define STAGE_TAG ".modelc-tmp-"

/* The pid in NAME if NAME is PREFIX followed by 1 to 9 digits, else 0. */
static long tagged_pid(const char *name, const char *prefix)
{
	size_t n = strlen(prefix);
	if (strncmp(name, prefix, n) != 0 || strlen(name + n) < 1 || strlen(name + n) > 9)
		return 0;
	long pid = 0;
	for (const char *s = name + n; *s; s++) {
		if (*s < '0' || *s > '9')
			return 0;
		pid = pid * 10 + (*s - '0');
	}
	return pid;
}

/* A zombie (killed, its parent not yet told) writes nothing any more.
 * Where /proc is missing it counts as alive. */
static bool is_zombie(long pid)
{
	char path[64], stat_line[256];
	snprintf(path, sizeof path, "/proc/%ld/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	size_t n = fread(stat_line, 1, sizeof stat_line - 1, f);
	fclose(f);
	stat_line[n] = 0;
	const char *comm_end = strrchr(stat_line, ')'); /* "pid (comm) state ..." */
	return comm_end && comm_end[1] == ' ' && comm_end[2] == 'Z';
}

/* Whether the run that made a stage or temporary may still be writing it.
 * Our own pid is an earlier process's. A pid reused by another process
 * keeps a leftover until that one exits: harmless, it is never output. */
static bool run_alive(long pid)
{
	if (pid == (long)getpid())
		return false;
	if (kill((pid_t)pid, 0) != 0 && errno != EPERM)
		return false;
	return !is_zombie(pid);
}

static void remove_stage(const char *stage)
{
	DIR *d = opendir(stage);
	if (!d)
		return;
	struct dirent *e;
	char path[4608];
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(path, sizeof path, "%s/%s", stage, e->d_name);
			unlink(path);
		}
	closedir(d);
	rmdir(stage);
}

/* Removes the stages of dead runs: the directories PREFIX<pid> in the
 * directory of the path PREFIX. */
static void remove_stale_stages(const char *prefix)
{
	const char *slash = strrchr(prefix, '/');
	char dir[4200];
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else
		snprintf(dir, sizeof dir, "%.*s", slash > prefix ? (int)(slash - prefix) : 1, prefix);
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	char path[4608];
	struct stat st;
	while ((e = readdir(d))) {
		long pid = tagged_pid(e->d_name, slash ? slash + 1 : prefix);
		if (!pid || run_alive(pid) || snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
			continue;
		if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
			remove_stage(path);
	}
	closedir(d);
}

/* The stage's path, beside DIR: DIR as given (less trailing slashes), or
 * its real path where it ends in "." or "..", then STAGE_TAG and our pid. */
static int stage_path(const char *out_dir, char *stage, size_t n, char *prefix, size_t n_prefix)
{
	size_t start, len;
	last_component(out_dir, &start, &len);
	const char *base = out_dir, *last = out_dir + start;
	size_t last_len = len - start; /* 0 for "/" */
	char real[4096];
	if (last_len == 0 || (last_len == 1 && last[0] == '.') ||
	    (last_len == 2 && last[0] == '.' && last[1] == '.')) {
		if (!realpath(out_dir, real)) {
			mc_error("cannot open output directory '%s': %s", out_dir, strerror(errno));
			return -1;
		}
		base = real;
		len = strlen(real);
	}
	if (snprintf(prefix, n_prefix, "%.*s" STAGE_TAG, (int)len, base) >= (int)n_prefix ||
	    snprintf(stage, n, "%s%ld", prefix, (long)getpid()) >= (int)n) {
		mc_error("path too long: %s", out_dir);
		return -1;
	}
	return 0;
}

/* Makes an empty stage for this run, first removing those of dead runs. */
static int make_stage(const char *out_dir, char *stage, size_t n)
{
	char prefix[4200], inside_prefix[4200], inside[4240];
	if (stage_path(out_dir, stage, n, prefix, sizeof prefix))
		return -1;
	remove_stale_stages(prefix);
	snprintf(inside_prefix, sizeof inside_prefix, "%s/" STAGE_TAG, out_dir);
	snprintf(inside, sizeof inside, "%s%ld", inside_prefix, (long)getpid());
	remove_stale_stages(inside_prefix);
	if (mkdir(stage, 0777) == 0)
		return 0;
	int err = errno;
	if (err == ENOENT) /* DIR's parent does not exist yet */
		return mc_mkdir_p(stage, "staging directory");
	if ((err == EACCES || err == EPERM || err == EROFS) && strlen(inside) < n &&
	    mkdir(inside, 0777) == 0) {
		snprintf(stage, n, "%s", inside);
		return 0;
	}
	mc_error("cannot create staging directory '%s': %s", stage, strerror(err));
	return -1;
}

/* Whether two files hold the same bytes (false if either is unreadable). */
static bool same_file_content(const char *a, const char *b)
{
	FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
	bool same = fa && fb;
	char ba[16384], bb[16384];
	while (same) {
		size_t na = fread(ba, 1, sizeof ba, fa), nb = fread(bb, 1, sizeof bb, fb);
		if (na != nb || memcmp(ba, bb, na) != 0 || ferror(fa) || ferror(fb))
			same = false;
		else if (na == 0)
			break;
	}
	if (fa)
		fclose(fa);
	if (fb)
		fclose(fb);
	return same;
}

/* Copies FROM to TO; errors name SHOWN, the file the user knows. */
static int copy_file(const char *from, const char *to, const char *shown)
{
	int in = open(from, O_RDONLY);
	if (in < 0) {
		mc_error("cannot read '%s': %s", from, strerror(errno));
		return -1;
	}
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0666);
	int read_err = 0, write_err = out < 0 ? errno : 0;
	char buf[65536];
	while (!read_err && !write_err) {
		ssize_t got = read(in, buf, sizeof buf);
		if (got < 0 && errno != EINTR)
			read_err = errno;
		if (got <= 0)
			break;
		for (ssize_t off = 0; off < got && !write_err;) {
			ssize_t put = write(out, buf + off, (size_t)(got - off));
			if (put < 0 && errno != EINTR)
				write_err = errno;
			else if (put > 0)
				off += put;
		}
	}
	close(in);
	if (out >= 0 && close(out) != 0 && !write_err)
		write_err = errno;
	if (read_err)
		mc_error("cannot read '%s': %s", from, strerror(read_err));
	else if (write_err)
		mc_error("cannot write '%s': %s", shown, strerror(write_err));
	if ((read_err || write_err) && out >= 0)
		unlink(to);
	return read_err || write_err ? -1 : 0;
}

typedef struct {
	char name[256];
	bool moved; /* into DIR as NAME.tmpPID, not yet renamed over NAME */
} staged_file;

/* Commit order: the ninja files, then the rest by name, NAME.json last. */
static int commit_rank(const char *file, const char *manifest)
{
	size_t n = strlen(file);
	if (n > 6 && strcmp(file + n - 6, ".ninja") == 0)
		return 0;
	return strcmp(file, manifest) == 0 ? 2 : 1;
}

static bool commits_before(const char *a, const char *b, const char *manifest)
{
	int ra = commit_rank(a, manifest), rb = commit_rank(b, manifest);
	return ra != rb ? ra < rb : strcmp(a, b) < 0;
}

/* The stage's regular files, in commit order; NULL on error. */
static staged_file *list_stage(const char *stage, const char *name, int *n_files)
{
	DIR *d = opendir(stage);
	if (!d) {
		mc_error("cannot read '%s': %s", stage, strerror(errno));
		return NULL;
	}
	char manifest[300], path[4608];
	snprintf(manifest, sizeof manifest, "%s.json", name);
	staged_file *files = NULL;
	int n = 0, cap = 0;
	struct dirent *e;
	struct stat st;
	while ((e = readdir(d))) {
		snprintf(path, sizeof path, "%s/%s", stage, e->d_name);
		if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
			continue;
		files = mc_grow_array(files, &cap, n + 1, sizeof *files);
		int at = n++;
		while (at > 0 && commits_before(e->d_name, files[at - 1].name, manifest)) {
			files[at] = files[at - 1];
			at--;
		}
		snprintf(files[at].name, sizeof files[at].name, "%s", e->d_name);
		files[at].moved = false;
	}
	closedir(d);
	*n_files = n;
	return files ? files : mc_xmalloc(sizeof *files);
}

/* Removes the NAME.tmp<pid> of dead runs in DIR, for the names we write. */
static void remove_stale_temporaries(const char *out_dir, const staged_file *files, int n)
{
	DIR *d = opendir(out_dir);
	if (!d)
		return;
	struct dirent *e;
	char prefix[300], path[4608];
	while ((e = readdir(d)))
		for (int i = 0; i < n; i++) {
			snprintf(prefix, sizeof prefix, "%s.tmp", files[i].name);
			long pid = tagged_pid(e->d_name, prefix);
			if (pid && !run_alive(pid)) {
				snprintf(path, sizeof path, "%s/%s", out_dir, e->d_name);
				unlink(path);
			}
		}
	closedir(d);
}

static void temporary_path(char *tmp, size_t n, const char *out_dir, const char *file)
{
	snprintf(tmp, n, "%s/%s.tmp%ld", out_dir, file, (long)getpid());
}

/* Step 1: each changed file moves into DIR as NAME.tmpPID. The manifest
 * (last) moves whenever another file did, even unchanged, so that step 2
 * can take the old one out first. */
static int move_in(const char *stage, const char *out_dir, staged_file *files, int n,
                   const char *manifest)
{
	bool any = false;
	char from[4608], to[4608], tmp[4640];
	for (int i = 0; i < n; i++) {
		snprintf(from, sizeof from, "%s/%s", stage, files[i].name);
		snprintf(to, sizeof to, "%s/%s", out_dir, files[i].name);
		temporary_path(tmp, sizeof tmp, out_dir, files[i].name);
		if (same_file_content(to, from) && !(any && strcmp(files[i].name, manifest) == 0))
			continue;
		if (rename(from, tmp) != 0) {
			int err = errno;
			if (err != EXDEV)
				mc_error("cannot write '%s': %s", to, strerror(err));
			if (err != EXDEV || copy_file(from, tmp, to))
				return -1;
		}
		files[i].moved = any = true;
	}
	return 0;
}

/* Step 2: the old manifest out, then every moved file over its name in
 * order, the new manifest last. Killed in between, DIR lacks its manifest:
 * out of date for ninja (a missing output) and for any other tool, whatever
 * the mtimes say. */
static int put_in_place(const char *out_dir, staged_file *files, int n, const char *manifest)
{
	char to[4608], tmp[4640];
	snprintf(to, sizeof to, "%s/%s", out_dir, manifest);
	if (n > 0 && files[n - 1].moved && strcmp(files[n - 1].name, manifest) == 0 &&
	    unlink(to) != 0 && errno != ENOENT) {
		mc_error("cannot write '%s': %s", to, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (!files[i].moved)
			continue;
		snprintf(to, sizeof to, "%s/%s", out_dir, files[i].name);
		temporary_path(tmp, sizeof tmp, out_dir, files[i].name);
		if (rename(tmp, to) != 0) {
			mc_error("cannot write '%s': %s", to, strerror(errno));
			return -1;
		}
		files[i].moved = false;
	}
	return 0;
}

static int commit_stage(const char *stage, const char *out_dir, const char *name)
{
	int n = 0;
	staged_file *files = list_stage(stage, name, &n);
	if (!files)
		return -1;
	char manifest[300], tmp[4640];
	snprintf(manifest, sizeof manifest, "%s.json", name);
	int rc = mc_mkdir_p(out_dir, "output directory");
	/* Two runs into one DIR commit one after the other, not interleaved;
	 * where the file system has no locks, they go unlocked. */
	int lock = rc == 0 ? open(out_dir, O_RDONLY | O_DIRECTORY) : -1;
	if (lock >= 0)
		flock(lock, LOCK_EX);
	if (rc == 0) {
		remove_stale_temporaries(out_dir, files, n);
		rc = move_in(stage, out_dir, files, n, manifest) || put_in_place(out_dir, files, n, manifest) ? -1 : 0;
	}
	for (int i = 0; i < n; i++)
		if (files[i].moved) { /* after a failure */
			temporary_path(tmp, sizeof tmp, out_dir, files[i].name);
			unlink(tmp);
		}
	if (lock >= 0)
		close(lock); /* and the lock with it */
	free(files);
	return rc;
}

/* The importer's count output (MC_OP_COUNTED) of a node whose output 0
 * came out fixed (TopK of a known k, Compress of a known condition): no
 * one reads it, and a kernel storing it would cost a launch on a GPU. */
static void drop_fixed_counts(mc_graph *g)
{
	for (int i = 0; i < g->n_nodes; i++) {
		mc_node *n = &g->nodes[i];
		int last = n->op ? n->op->max_outputs : -1;
		if (!n->op || !(n->op->flags & MC_OP_COUNTED) || last >= n->n_outputs)
			continue;
		bool counted = false;
		for (int k = 0; k < last; k++)
			counted = counted || (n->outputs[k] >= 0 && g->values[n->outputs[k]].counted);
		if (!counted)
			n->outputs[last] = -1;
	}
}

int mc_freeze_and_build(mc_graph *g, const mc_compile_opts *o, const mc_target_config *target,
                        mc_program *p)
{
	mc_freeze_opts fo = { .fold_limit = o->fold_limit, .unroll_limit = o->unroll_limit,
	                      .dump_after = o->dump_after,
	                      .dump_dir = o->dump_dir, .stats = o->stats ? stderr : NULL,
	                      .layout = target->layout, .quantized_io = o->quantized_io,
	                      .no_quantize = o->no_quantize,
	                      .fuse_attention = target->desc && target->desc->gpu,
	                      .merge_sibling_convs = target->desc && target->desc->gpu };
	double t0 = now_ms();
	memset(p, 0, sizeof *p);
	drop_fixed_counts(g);
	mc_progress("freezing %d nodes (folding, layout, fusion patterns)", g->n_nodes);
	if (mc_freeze(g, &fo))
		return -1;
	double t_freeze = now_ms();
	if (o->stats)
		mc_quant_islands(g, stderr, "modelc: stats: ");
	mc_progress("fusing, lowering and planning %d nodes", g->n_nodes);
	if (mc_build_program(g, target, o, p))
		return -1;
	if (mc_dump_after(o, 90, "kernels", mc_program_dump_kernels, p))
		return -1;
	if (o->stats) {
		fprintf(stderr, "modelc: stats: freezing %.1f ms, %d nodes left\n", t_freeze - t0, g->n_nodes);
		fprintf(stderr, "modelc: stats: fusion+lowering+plan %.1f ms, %d kernels\n", now_ms() - t_freeze,
		        p->n_kernels);
	}
	return 0;
}

int mc_emit_program(const mc_program *p, const mc_target_config *target, const mc_compile_opts *o,
                    const char *model_abs, const char *sha, const char *out_dir)
{
	double t0 = now_ms();
	if (mc_program_counted(p) && (target->desc->gpu || p->n_pools > 1 || p->io_in_arena || p->dyn ||
	                              (p->threads > 1 && target->desc != &mc_target_c))) {
		/* NAME_run_counted: the CPU targets', on one arena */
		for (int i = 0; i < p->n_outputs; i++)
			if (p->outputs[i].counted)
				return mc_error("output '%s' has a data-dependent extent (a count made at run time): "
				                "only the C and llvm targets on one arena give the counts yet (this is "
				                "--target %s%s%s%s)",
				                p->outputs[i].name, target->desc->name, p->n_pools > 1 ? " --pool" : "",
				                p->io_in_arena ? " --io-in-arena" : "", p->dyn ? " --dim LO..HI" : ""), -1;
	}
	char stage[4200];
	if (make_stage(out_dir, stage, sizeof stage))
		return -1;
	/* the model by its path from the output directory: no absolute path in
	 * the files but build.ninja's of the directory itself */
	char dir_abs[4096], model_rel[4096] = "";
	mc_progress("writing %d kernels and %zu bytes of weights (%s target)", p->n_kernels, p->weight_bytes,
	            target->desc->name);
	bool emitted = !(model_abs && (out_dir_abs(out_dir, stage, dir_abs, sizeof dir_abs) ||
	                               path_from_dir(dir_abs, model_abs, model_rel, sizeof model_rel))) &&
	               !target->desc->emit(p, o, stage) &&
	               !write_manifests(p, o, model_rel, sha, stage) &&
	               !(model_abs && write_ninja(target, o, model_rel, stage, dir_abs)) &&
	               !(o->harness && mc_emit_harness(p, o, stage));
	if (emitted)
		mc_progress("moving the files into %s", out_dir);
	bool committed = emitted && !commit_stage(stage, out_dir, o->name);
	remove_stage(stage);
	if (!committed)
		return -1;
	if (o->stats) {
		fprintf(stderr, "modelc: stats: arena %zu bytes, lower bound %zu bytes (%.3fx), weights %zu bytes in %d arrays\n",
		        p->arena_bytes, p->lower_bound,
		        p->lower_bound ? (double)p->arena_bytes / (double)p->lower_bound : 1.0, p->weight_bytes,
		        p->n_weights);
		fprintf(stderr, "modelc: stats: kernels in the graph's order: arena %zu bytes, lower bound %zu bytes%s\n",
		        p->arena_in_order, p->lower_bound_in_order,
		        p->arena_bytes < p->arena_in_order ? " (reordered)" : "");
		fprintf(stderr, "modelc: stats: emission %.1f ms\n", now_ms() - t0);
	}
	return 0;
}

/* --dump-after without --dump-dir: OUT/debug (dump_dir: its storage) */
void mc_default_dump_dir(mc_compile_opts *o, const char *out_dir, char *dump_dir, size_t n)
{
	if (o->dump_after && !o->dump_dir) {
		snprintf(dump_dir, n, "%s/debug", out_dir);
		o->dump_dir = dump_dir;
	}
}

int mc_compile_graph(mc_graph *g, const char *model_abs, const char *out_dir,
                     const mc_compile_opts *o_in)
{
	mc_compile_opts o = *o_in;
	if (check_opts(&o))
		return -1;
	char dump_dir[4096];
	mc_default_dump_dir(&o, out_dir, dump_dir, sizeof dump_dir);
	int rc = -1;
	mc_program p = { 0 };
	mc_target_config target;
	/* The fingerprint of the bytes imported (the file may have changed
	 * since); empty for a graph that did not come from a file. */
	char sha[65];
	memcpy(sha, g->sha256, sizeof sha);
	if (!mc_target_resolve(&o, &target) && !mc_freeze_and_build(g, &o, &target, &p) &&
	    !mc_emit_program(&p, &target, &o, model_abs, sha, out_dir))
		rc = 0;
	mc_program_free(&p);
	return rc;
}

int mc_compile(const char *model_path, const char *out_dir, const mc_compile_opts *o)
{
	if (check_opts(o))
		return -1;
	char model_abs[4096];
	if (!realpath(model_path, model_abs)) {
		mc_error("cannot open model '%s': %s", model_path, strerror(errno));
		return -1;
	}
	for (int i = 0; i < o->import.n_dim_pins; i++)
		if (o->import.dim_pins[i].hi > o->import.dim_pins[i].value)
			return mc_compile_dynamic(model_path, model_abs, out_dir, o, i);
	double t0 = now_ms();
	mc_graph *g = mc_import_file(model_path, &o->import);
	if (!g)
		return -1;
	int rc = -1;
	double t_import = now_ms();
	mc_progress("inferring the shapes of %d nodes", g->n_nodes);
	if (mc_apply_binds(g, o) || mc_infer_graph(g))
		goto out;
	if (o->stats)
		fprintf(stderr, "modelc: stats: import %.1f ms, inference %.1f ms, %d nodes\n",
		        t_import - t0, now_ms() - t_import, g->n_nodes);
	rc = mc_compile_graph(g, model_abs, out_dir, o);
out:
	mc_graph_free(g);
	return rc;
}
