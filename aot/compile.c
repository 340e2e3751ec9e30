/* The compile pipeline: import, bind, infer, freeze, build the program,
 * emit the target's sources, then NAME.json and build.ninja. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "aot.h"
#include "../freezing/freezing.h"

void mc_compile_opts_init(mc_compile_opts *o)
{
	memset(o, 0, sizeof *o);
	o->name = "model";
	o->target = "c";
	o->fold_limit = MC_DEFAULT_FOLD_LIMIT;
	o->stack_cc = "cc";
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

static int file_sha256(const char *path, char hex[65])
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		mc_error("cannot read '%s': %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	void *m = st.st_size ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
	close(fd);
	if (st.st_size && m == MAP_FAILED) {
		mc_error("cannot map '%s'", path);
		return -1;
	}
	mc_sha256_hex(m ? m : "", (size_t)st.st_size, hex);
	if (m)
		munmap(m, (size_t)st.st_size);
	return 0;
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

static void json_io(mc_strbuf *b, const mc_io_desc *d, int n)
{
	mc_sb_puts(b, "[");
	for (int i = 0; i < n; i++) {
		mc_sb_puts(b, i ? ",\n    {\"name\": " : "\n    {\"name\": ");
		json_string(b, d[i].name);
		mc_sb_printf(b, ", \"dtype\": \"%s\", \"shape\": [", mc_dtype_name(d[i].dtype));
		for (int k = 0; k < d[i].shape.rank; k++)
			mc_sb_printf(b, "%s%lld", k ? ", " : "", (long long)d[i].shape.dims[k]);
		mc_sb_puts(b, "]}");
	}
	mc_sb_puts(b, n ? "\n  ]" : "]");
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

static int write_json(const mc_program *p, const mc_compile_opts *o, const char *model_abs,
                      const char *sha, const char *dir)
{
	/* dir is the staging directory, where NAME.c already is. */
	mc_stack_usage stack = { 0 };
	if (o->no_stack_usage)
		snprintf(stack.note, sizeof stack.note, "not measured (--no-stack-usage)");
	else
		mc_stack_measure(dir, o->name, o->stack_cc, &stack);
	if (o->stats)
		stats_stack(o, &stack);
	mc_strbuf b = { 0 };
	mc_sb_puts(&b, "{\n  \"name\": ");
	json_string(&b, o->name);
	mc_sb_printf(&b, ",\n  \"modelc_version\": \"%s\",\n  \"target\": \"%s\",\n  \"model\": ",
	             MC_VERSION, o->target);
	json_string(&b, model_abs);
	mc_sb_printf(&b, ",\n  \"model_sha256\": \"%s\",\n  \"options\": ", sha);
	json_string(&b, o->argv_line ? o->argv_line : "");
	mc_sb_puts(&b, ",\n  \"inputs\": ");
	json_io(&b, p->inputs, p->n_inputs);
	mc_sb_puts(&b, ",\n  \"outputs\": ");
	json_io(&b, p->outputs, p->n_outputs);
	mc_sb_printf(&b, ",\n  \"arena_bytes\": %zu,\n  \"arena_align\": %zu,\n  \"arena_lower_bound\": %zu,\n"
	             "  \"weight_bytes\": %zu,\n  \"weights\": %d,\n  \"kernels\": %d",
	             p->arena_bytes, p->arena_align, p->lower_bound, p->weight_bytes, p->n_weights,
	             p->n_kernels);
	json_stack(&b, &stack);
	mc_stack_usage_free(&stack);
	mc_sb_puts(&b, "\n}\n");
	char path[4096];
	snprintf(path, sizeof path, "%s/%s.json", dir, o->name);
	int rc = mc_write_if_changed(path, b.data, b.len);
	mc_sb_free(&b);
	return rc;
}

/* NAME.ninja from the template aot/model.ninja.in (@NAME@, @MODEL@,
 * @MODELC@, @OPTIONS@, @VERSION@ filled in), and build.ninja, which sets
 * defaults and includes it. */
static int write_ninja(const mc_compile_opts *o, const char *model_abs, const char *dir)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		snprintf(self, sizeof self, "modelc");
	else
		self[n] = 0;
	mc_strbuf b = { 0 };
	for (const char *s = mc_model_ninja_in; *s; ) {
		if (strncmp(s, "@NAME@", 6) == 0) {
			mc_sb_puts(&b, o->name);
			s += 6;
		} else if (strncmp(s, "@MODEL@", 7) == 0) {
			mc_sb_puts(&b, model_abs);
			s += 7;
		} else if (strncmp(s, "@MODELC@", 8) == 0) {
			mc_sb_puts(&b, self);
			s += 8;
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
	mc_sb_printf(&b, "# Generated by modelc %s: `ninja` here builds lib%s.a.\n"
	             "ninja_required_version = 1.10\n"
	             "cc = cc\ncflags = -std=c99 -O2 -Wall -Wextra\nar = ar\n%s_dir = .\n"
	             "include %s.ninja\ndefault lib%s.a\n",
	             MC_VERSION, o->name, o->name, o->name, o->name);
	snprintf(path, sizeof path, "%s/build.ninja", dir);
	rc = mc_write_if_changed(path, b.data, b.len);
	mc_sb_free(&b);
	return rc;
}

static int dump_kernels(const mc_program *p, const mc_compile_opts *o)
{
	if (!o->dump_after || !o->dump_dir)
		return 0;
	if (strcmp(o->dump_after, "all") && strcmp(o->dump_after, "kernels"))
		return 0;
	if (mc_mkdir_p(o->dump_dir, "dump directory"))
		return -1;
	char path[4096];
	snprintf(path, sizeof path, "%s/90-kernels.txt", o->dump_dir);
	FILE *f = fopen(path, "w");
	if (!f) {
		mc_error("cannot write '%s': %s", path, strerror(errno));
		return -1;
	}
	for (int i = 0; i < p->n_kernels; i++)
		mc_kernel_dump(p->kernels[i], f);
	return fclose(f) ? -1 : 0;
}

static int check_opts(const mc_compile_opts *o)
{
	if (!is_identifier(o->name)) {
		mc_error("--name '%s' is not a C identifier", o->name ? o->name : "");
		return -1;
	}
	if (strcmp(o->target, "c")) {
		mc_error("unknown target '%s' (this build knows: c)", o->target);
		return -1;
	}
	return 0;
}

/* Emission goes first into a staging directory beside DIR, so that a run
 * that fails half-way leaves DIR as it was; a complete one is then moved
 * in file by file, only the files whose content changed. */
static int stage_name(const char *out_dir, char *stage, size_t n)
{
	size_t len = strlen(out_dir);
	while (len > 1 && out_dir[len - 1] == '/')
		len--;
	if (snprintf(stage, n, "%.*s.modelc-tmp-%ld", (int)len, out_dir, (long)getpid()) >= (int)n) {
		mc_error("path too long: %s", out_dir);
		return -1;
	}
	return 0;
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

static int read_whole(const char *path, char **data, size_t *len)
{
	FILE *f = fopen(path, "rb");
	long n = -1;
	if (f && fseek(f, 0, SEEK_END) == 0)
		n = ftell(f);
	if (!f || n < 0 || fseek(f, 0, SEEK_SET) != 0) {
		mc_error("cannot read '%s': %s", path, strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	*data = mc_xmalloc((size_t)n + 1);
	*len = fread(*data, 1, (size_t)n, f);
	fclose(f);
	if (*len != (size_t)n) {
		mc_error("cannot read '%s'", path);
		return -1;
	}
	return 0;
}

static int commit_stage(const char *stage, const char *out_dir)
{
	if (mc_mkdir_p(out_dir, "output directory"))
		return -1;
	DIR *d = opendir(stage);
	if (!d) {
		mc_error("cannot read '%s': %s", stage, strerror(errno));
		return -1;
	}
	int rc = 0;
	struct dirent *e;
	char from[4608], to[4608];
	while (rc == 0 && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(from, sizeof from, "%s/%s", stage, e->d_name);
		snprintf(to, sizeof to, "%s/%s", out_dir, e->d_name);
		char *data = NULL;
		size_t len = 0;
		rc = read_whole(from, &data, &len) || mc_write_if_changed(to, data, len) ? -1 : 0;
		free(data);
	}
	closedir(d);
	return rc;
}

int mc_compile_graph(mc_graph *g, const char *model_abs, const char *out_dir,
                     const mc_compile_opts *o_in)
{
	mc_compile_opts o = *o_in;
	if (check_opts(&o))
		return -1;
	char dump_dir[4096];
	if (o.dump_after && !o.dump_dir) {
		snprintf(dump_dir, sizeof dump_dir, "%s/debug", out_dir);
		o.dump_dir = dump_dir;
	}
	double t0 = now_ms();
	int rc = -1;
	mc_program p = { 0 };
	mc_freeze_opts fo = { .fold_limit = o.fold_limit, .dump_after = o.dump_after,
	                      .dump_dir = o.dump_dir, .stats = o.stats ? stderr : NULL };
	if (mc_freeze(g, &fo))
		goto out;
	double t_freeze = now_ms();
	if (mc_build_program(g, &o, &p))
		goto out;
	double t_build = now_ms();
	if (dump_kernels(&p, &o))
		goto out;
	char sha[65] = "", stage[4200];
	if ((model_abs && file_sha256(model_abs, sha)) || stage_name(out_dir, stage, sizeof stage))
		goto out;
	remove_stage(stage); /* a leftover of a killed run with this pid */
	if (mc_mkdir_p(stage, "staging directory"))
		goto out;
	bool emitted = !mc_emit_c(&p, &o, stage) && !write_json(&p, &o, model_abs ? model_abs : "", sha, stage) &&
	               !(model_abs && write_ninja(&o, model_abs, stage)) &&
	               !(o.harness && mc_emit_harness(&p, &o, stage));
	if (!emitted || commit_stage(stage, out_dir)) {
		remove_stage(stage);
		goto out;
	}
	remove_stage(stage);
	if (o.stats) {
		fprintf(stderr, "modelc: stats: freezing %.1f ms, %d nodes left\n", t_freeze - t0, g->n_nodes);
		fprintf(stderr, "modelc: stats: fusion+lowering+plan %.1f ms, %d kernels\n", t_build - t_freeze,
		        p.n_kernels);
		fprintf(stderr, "modelc: stats: arena %zu bytes, lower bound %zu bytes (%.3fx), weights %zu bytes in %d arrays\n",
		        p.arena_bytes, p.lower_bound,
		        p.lower_bound ? (double)p.arena_bytes / (double)p.lower_bound : 1.0, p.weight_bytes,
		        p.n_weights);
		fprintf(stderr, "modelc: stats: emission %.1f ms\n", now_ms() - t_build);
	}
	rc = 0;
out:
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
	double t0 = now_ms();
	mc_graph *g = mc_import_file(model_path, &o->import);
	if (!g)
		return -1;
	int rc = -1;
	double t_import = now_ms();
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
