/* Stack usage of the generated run function, for NAME.json: NAME.c is
 * compiled once more with -fstack-usage (gcc >= 10 also writes its call
 * graph with -fcallgraph-info=su), and the worst case of NAME_run is its
 * own frame plus the deepest chain of the static functions (kernels) it
 * calls. The figure belongs to that compiler, target and flags, which the
 * manifest records with it. Nothing here can fail the compile: a missing
 * compiler or a failed build leaves a note instead of a figure. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "compile.h"

extern char **environ;

/* Deeper call chains than this are not worth a bound (generated code has
 * two or three levels: run, kernels, runtime helpers). */
#define MAX_CALL_DEPTH 1000

/* ---- the call graph ---- */
static int find_fn(const mc_stack_graph *g, const char *key)
{
	for (int i = 0; i < g->n_fns; i++)
		if (strcmp(g->fns[i].key, key) == 0)
			return i;
	return -1;
}

/* A function not seen before is external until a node line defines it: an
 * edge may name a callee the compiler describes later, or never. */
static int add_fn(mc_stack_graph *g, const char *key)
{
	g->fns = mc_grow_array(g->fns, &g->cap_fns, g->n_fns + 1, sizeof *g->fns);
	mc_stack_fn *f = &g->fns[g->n_fns];
	f->key = mc_xstrdup(key);
	f->name = mc_xstrdup(key);
	f->kind = MC_FRAME_EXTERNAL;
	return g->n_fns++;
}

static int fn_of(mc_stack_graph *g, const char *key)
{
	int i = find_fn(g, key);
	return i >= 0 ? i : add_fn(g, key);
}

static void add_call(mc_stack_graph *g, int caller, int callee)
{
	mc_stack_fn *f = &g->fns[caller];
	f->callees = mc_grow_array(f->callees, &f->cap_callees, f->n_callees + 1, sizeof *f->callees);
	f->callees[f->n_callees++] = callee;
}

void mc_stack_graph_free(mc_stack_graph *g)
{
	for (int i = 0; i < g->n_fns; i++) {
		free(g->fns[i].key);
		free(g->fns[i].name);
		free(g->fns[i].callees);
	}
	free(g->fns);
	memset(g, 0, sizeof *g);
}

/* "static", "dynamic" or "dynamic,bounded"; anything else is taken as
 * dynamic, the cautious reading. */
static mc_frame_kind frame_kind(const char *q, size_t len)
{
	if (len == 6 && strncmp(q, "static", 6) == 0)
		return MC_FRAME_STATIC;
	if (len == 15 && strncmp(q, "dynamic,bounded", 15) == 0)
		return MC_FRAME_BOUNDED;
	return MC_FRAME_DYNAMIC;
}

static bool parse_bytes(const char *s, char **end, size_t *bytes)
{
	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	unsigned long long v = strtoull(s, end, 10);
	if (errno || v > SIZE_MAX / 2)
		return false;
	*bytes = (size_t)v;
	return true;
}

/* ---- .su: file:line[:col]:name TAB bytes TAB qualifiers ---- */
static int parse_su_line(mc_stack_graph *g, const char *line, size_t len, int no, char *why, size_t n)
{
	const char *tab1 = memchr(line, '\t', len);
	const char *tab2 = tab1 ? memchr(tab1 + 1, '\t', len - (size_t)(tab1 + 1 - line)) : NULL;
	size_t bytes;
	char *end;
	if (!tab2 || !parse_bytes(tab1 + 1, &end, &bytes) || end != tab2) {
		snprintf(why, n, ".su line %d: expected 'file:line:name<TAB>bytes<TAB>qualifiers'", no);
		return -1;
	}
	const char *name = tab1;
	while (name > line && name[-1] != ':')
		name--;
	char key[512];
	snprintf(key, sizeof key, "%.*s", (int)(tab1 - name), name);
	/* One entry per line: gcc prints two clones of a function by one name. */
	int f = add_fn(g, key);
	g->fns[f].bytes = bytes;
	g->fns[f].kind = frame_kind(tab2 + 1, len - (size_t)(tab2 + 1 - line));
	return 0;
}

static int for_each_line(mc_stack_graph *g, const char *text, char *why, size_t n,
                         int (*fn)(mc_stack_graph *, const char *, size_t, int, char *, size_t))
{
	int no = 0;
	for (const char *s = text; *s; ) {
		const char *nl = strchr(s, '\n');
		size_t len = nl ? (size_t)(nl - s) : strlen(s), next = nl ? len + 1 : len;
		if (len && s[len - 1] == '\r')
			len--;
		no++;
		if (len && fn(g, s, len, no, why, n))
			return -1;
		s += next;
	}
	return 0;
}

int mc_stack_parse_su(mc_stack_graph *g, const char *text, char *why, size_t n)
{
	return for_each_line(g, text, why, n, parse_su_line);
}

/* ---- .ci: gcc's call graph in VCG ----
 *   node: { title: "f.c:k3" label: "k3\nf.c:10:12\n56 bytes (static)" }
 *   node: { title: "expf" label: "expf\n<decl location>" shape : ellipse }
 *   edge: { sourcename: "run" targetname: "f.c:k3" label: "f.c:99:3" }
 * Static functions' titles carry the file name; a call through a pointer
 * goes to the node "__indirect_call". */

/* The quoted value after `field: ` in line (malloc'd), escapes left as
 * written (a label's line breaks are the two characters \n); NULL if none. */
static char *quoted_field(const char *line, size_t len, const char *field)
{
	size_t flen = strlen(field);
	for (size_t i = 0; i + flen + 3 <= len; i++) {
		if (strncmp(line + i, field, flen) || strncmp(line + i + flen, ": \"", 3))
			continue;
		size_t from = i + flen + 3;
		for (size_t j = from; j < len; j++) {
			if (line[j] == '\\' && j + 1 < len) {
				j++;
			} else if (line[j] == '"') {
				char *v = mc_xmalloc(j - from + 1);
				memcpy(v, line + from, j - from);
				v[j - from] = 0;
				return v;
			}
		}
		return NULL;
	}
	return NULL;
}

/* A defined function's label: "name\nlocation\nN bytes (qualifiers)". */
static bool parse_label(const char *label, char *name, size_t n, size_t *bytes, mc_frame_kind *kind)
{
	const char *nl = strstr(label, "\\n");
	snprintf(name, n, "%.*s", nl ? (int)(nl - label) : (int)strlen(label), label);
	const char *last = label;
	for (const char *s = label; (s = strstr(s, "\\n")); s += 2)
		last = s + 2;
	char *end;
	if (last == label || !parse_bytes(last, &end, bytes) || strncmp(end, " bytes (", 8))
		return false;
	const char *q = end + 8, *close = strchr(q, ')');
	if (!close)
		return false;
	*kind = frame_kind(q, (size_t)(close - q));
	return true;
}

static int parse_ci_node(mc_stack_graph *g, const char *line, size_t len, int no, char *why, size_t n)
{
	char *title = quoted_field(line, len, "title"), *label = quoted_field(line, len, "label");
	int rc = 0;
	if (!title || !label) {
		snprintf(why, n, ".ci line %d: a node without title or label", no);
		rc = -1;
		goto out;
	}
	int i = fn_of(g, title); /* may move g->fns */
	mc_stack_fn *f = &g->fns[i];
	size_t bytes;
	mc_frame_kind kind;
	char *name = mc_xmalloc(strlen(label) + 1);
	if (strcmp(title, "__indirect_call") == 0) {
		f->kind = MC_FRAME_INDIRECT;
	} else if (parse_label(label, name, strlen(label) + 1, &bytes, &kind)) {
		free(f->name);
		f->name = mc_xstrdup(name);
		f->bytes = bytes;
		f->kind = kind;
	} /* else external: a declaration without a frame */
	free(name);
out:
	free(title);
	free(label);
	return rc;
}

static int parse_ci_edge(mc_stack_graph *g, const char *line, size_t len, int no, char *why, size_t n)
{
	char *from = quoted_field(line, len, "sourcename"), *to = quoted_field(line, len, "targetname");
	int rc = 0;
	if (!from || !to) {
		snprintf(why, n, ".ci line %d: an edge without sourcename or targetname", no);
		rc = -1;
	} else {
		int caller = fn_of(g, from);
		add_call(g, caller, fn_of(g, to));
	}
	free(from);
	free(to);
	return rc;
}

static int parse_ci_line(mc_stack_graph *g, const char *line, size_t len, int no, char *why, size_t n)
{
	if (len >= 5 && strncmp(line, "node:", 5) == 0)
		return parse_ci_node(g, line, len, no, why, n);
	if (len >= 5 && strncmp(line, "edge:", 5) == 0)
		return parse_ci_edge(g, line, len, no, why, n);
	return 0; /* graph: {, }, ... */
}

int mc_stack_parse_ci(mc_stack_graph *g, const char *text, char *why, size_t n)
{
	g->has_calls = true;
	return for_each_line(g, text, why, n, parse_ci_line);
}

/* ---- the worst case ---- */
typedef struct {
	const mc_stack_graph *g;
	mc_stack_bound *b;
	char *state;          /* 0 unvisited, 1 on the current path, 2 done */
	size_t *depth;        /* done: the function's worst case */
	bool *external;       /* reached external callees */
	int *path, n_path;
} walk;

static void say_recursion(walk *w, int f)
{
	mc_strbuf s = { 0 };
	int from = w->n_path - 1;
	while (from > 0 && w->path[from] != f)
		from--;
	mc_sb_puts(&s, "recursion: ");
	for (int i = from; i < w->n_path; i++)
		mc_sb_printf(&s, "%s -> ", w->g->fns[w->path[i]].name);
	mc_sb_puts(&s, w->g->fns[f].name);
	snprintf(w->b->why, sizeof w->b->why, "%s", s.data);
	mc_sb_free(&s);
}

/* false: unbounded (b->why says why). */
static bool walk_fn(walk *w, int f)
{
	const mc_stack_fn *fn = &w->g->fns[f];
	const char *caller = w->n_path ? w->g->fns[w->path[w->n_path - 1]].name : "the root";
	if (w->state[f] == 2)
		return true;
	if (w->state[f] == 1) {
		say_recursion(w, f);
		return false;
	}
	switch (fn->kind) {
	case MC_FRAME_EXTERNAL:
		w->external[f] = true;
		w->state[f] = 2;
		return true;
	case MC_FRAME_INDIRECT:
		snprintf(w->b->why, sizeof w->b->why, "%s calls through a function pointer", caller);
		return false;
	case MC_FRAME_DYNAMIC:
		snprintf(w->b->why, sizeof w->b->why,
		         "%s has a frame of run-time size (alloca or a variable-length array)", fn->name);
		return false;
	case MC_FRAME_STATIC:
	case MC_FRAME_BOUNDED:
		break;
	}
	if (w->n_path == MAX_CALL_DEPTH) {
		snprintf(w->b->why, sizeof w->b->why, "calls nested deeper than %d", MAX_CALL_DEPTH);
		return false;
	}
	w->state[f] = 1;
	w->path[w->n_path++] = f;
	size_t deepest = 0;
	for (int i = 0; i < fn->n_callees; i++) {
		int c = fn->callees[i];
		if (!walk_fn(w, c))
			return false;
		if (w->depth[c] > deepest)
			deepest = w->depth[c];
	}
	if (fn->bytes > SIZE_MAX - deepest) {
		snprintf(w->b->why, sizeof w->b->why, "the sum of frames overflows");
		return false;
	}
	w->n_path--;
	w->state[f] = 2;
	w->depth[f] = fn->bytes + deepest;
	return true;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Without call edges every frame may lie on the path; a dynamic one makes
 * the sum unbounded. */
static void sum_frames(const mc_stack_graph *g, mc_stack_bound *b)
{
	b->bounded = true;
	for (int i = 0; i < g->n_fns && b->bounded; i++) {
		const mc_stack_fn *f = &g->fns[i];
		if (f->kind == MC_FRAME_DYNAMIC) {
			snprintf(b->why, sizeof b->why,
			         "%s has a frame of run-time size (alloca or a variable-length array)", f->name);
			b->bounded = false;
		} else if (f->kind == MC_FRAME_STATIC || f->kind == MC_FRAME_BOUNDED) {
			if (f->bytes > SIZE_MAX - b->bytes) {
				snprintf(b->why, sizeof b->why, "the sum of frames overflows");
				b->bounded = false;
			}
			b->bytes += f->bytes;
		}
	}
}

static int find_root(const mc_stack_graph *g, const char *root)
{
	int i = find_fn(g, root);
	if (i >= 0 && g->fns[i].kind != MC_FRAME_EXTERNAL)
		return i;
	for (i = 0; i < g->n_fns; i++)
		if (strcmp(g->fns[i].name, root) == 0 && g->fns[i].kind != MC_FRAME_EXTERNAL)
			return i;
	return -1;
}

int mc_stack_worst(const mc_stack_graph *g, const char *root, mc_stack_bound *b)
{
	memset(b, 0, sizeof *b);
	int r = find_root(g, root);
	if (r < 0) {
		snprintf(b->why, sizeof b->why, "no function '%s' in the compiler's stack usage", root);
		return -1;
	}
	if (!g->has_calls) {
		sum_frames(g, b);
		return 0;
	}
	size_t n = (size_t)g->n_fns;
	walk w = { .g = g, .b = b, .state = mc_xcalloc(n, 1), .depth = mc_xcalloc(n, sizeof(size_t)),
	           .external = mc_xcalloc(n, sizeof(bool)), .path = mc_xcalloc(MAX_CALL_DEPTH, sizeof(int)) };
	b->bounded = walk_fn(&w, r);
	if (b->bounded) {
		b->bytes = w.depth[r];
		int cap = 0;
		for (int i = 0; i < g->n_fns; i++)
			if (w.external[i]) {
				b->excludes = mc_grow_array(b->excludes, &cap, b->n_excludes + 1, sizeof *b->excludes);
				b->excludes[b->n_excludes++] = mc_xstrdup(g->fns[i].name);
			}
		if (b->n_excludes)
			qsort(b->excludes, (size_t)b->n_excludes, sizeof *b->excludes, cmp_str);
	}
	free(w.state);
	free(w.depth);
	free(w.external);
	free(w.path);
	return 0;
}

void mc_stack_bound_free(mc_stack_bound *b)
{
	for (int i = 0; i < b->n_excludes; i++)
		free(b->excludes[i]);
	free(b->excludes);
	b->excludes = NULL;
	b->n_excludes = 0;
}

/* ---- running the compiler ---- */
#define MAX_CC_WORDS 32

typedef struct {
	char text[1024];              /* cc, split in place */
	char *words[MAX_CC_WORDS];
	int n;
} cc_words;

static bool split_cc(const char *cc, cc_words *w)
{
	snprintf(w->text, sizeof w->text, "%s", cc ? cc : "");
	w->n = 0;
	char *save = NULL;
	for (char *s = strtok_r(w->text, " \t", &save); s; s = strtok_r(NULL, " \t", &save)) {
		if (w->n == MAX_CC_WORDS - 12) /* room for our flags */
			return false;
		w->words[w->n++] = s;
	}
	return w->n > 0;
}

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	mc_strbuf b = { 0 };
	char chunk[4096];
	size_t got;
	while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
		mc_sb_printf(&b, "%.*s", (int)got, chunk);
	fclose(f);
	if (!b.data)
		mc_sb_puts(&b, "");
	return b.data;
}

static void first_line(const char *path, char *out, size_t n)
{
	char *text = read_text(path);
	snprintf(out, n, "%.*s", text ? (int)strcspn(text, "\n") : 0, text ? text : "");
	free(text);
}

/* The line of the log that says what went wrong: its first error, else its
 * first line; without the staging directory's name, which would make
 * NAME.json differ from run to run. */
static void error_line(const char *log, const char *dir, char *out, size_t n)
{
	char *text = read_text(log);
	const char *line = text ? text : "";
	for (const char *s = line; *s; ) {
		size_t len = strcspn(s, "\n");
		char buf[512];
		snprintf(buf, sizeof buf, "%.*s", (int)len, s);
		if (strstr(buf, "error")) {
			line = s;
			break;
		}
		s += len + (s[len] == '\n');
	}
	size_t dlen = strlen(dir), k = 0;
	for (const char *s = line; *s && *s != '\n' && k + 1 < n; ) {
		if (strncmp(s, dir, dlen) == 0 && s[dlen] == '/') {
			s += dlen + 1;
			continue;
		}
		out[k++] = *s++;
	}
	out[k] = 0;
	free(text);
}

/* The environment with LC_ALL=C, so that a compiler's message in a note
 * reads the same whatever the locale. */
static char **c_locale_env(void)
{
	size_t n = 0;
	while (environ[n])
		n++;
	char **env = mc_xcalloc(n + 2, sizeof *env);
	size_t k = 0;
	env[k++] = "LC_ALL=C";
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "LC_ALL=", 7))
			env[k++] = environ[i];
	return env;
}

/* Runs argv (in dir's context) with stdout and stderr into log; 0 when it
 * exits 0, else -1 with why. */
static int run_logged(char *const argv[], const char *dir, const char *log, char *why, size_t n)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	pid_t pid;
	char **env = c_locale_env();
	int e = posix_spawnp(&pid, argv[0], &fa, NULL, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	free(env);
	if (e) {
		snprintf(why, n, "cannot run '%s': %s", argv[0], strerror(e));
		return -1;
	}
	int ws;
	while (waitpid(pid, &ws, 0) < 0)
		if (errno != EINTR) {
			snprintf(why, n, "waiting for '%s': %s", argv[0], strerror(errno));
			return -1;
		}
	if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
		return 0;
	char line[256];
	error_line(log, dir, line, sizeof line);
	if (WIFEXITED(ws) && WEXITSTATUS(ws) == 127 && !*line)
		snprintf(why, n, "cannot run '%s'", argv[0]); /* a libc whose spawn reports exec late */
	else if (WIFEXITED(ws))
		snprintf(why, n, "'%s' failed (exit status %d)%s%s", argv[0], WEXITSTATUS(ws), *line ? ": " : "",
		         line);
	else
		snprintf(why, n, "'%s' was killed by signal %d", argv[0], WTERMSIG(ws));
	return -1;
}

static const char *const tmp_suffixes[] = { ".o", ".su", ".ci", ".log", "-id.c" };

static void tmp_path(const char *dir, const char *name, const char *suffix, char *out, size_t n)
{
	snprintf(out, n, "%s/%s.stack-tmp%s", dir, name, suffix);
}

/* What the compiler is, from its own predefined macros: "gcc 12 2 0",
 * "clang 14 0 6"; and the red zone its target's ABI gives leaf functions. */
static const char id_source[] =
	"#if defined(__clang__)\n"
	"modelc_cc clang __clang_major__ __clang_minor__ __clang_patchlevel__\n"
	"#elif defined(__GNUC__)\n"
	"modelc_cc gcc __GNUC__ __GNUC_MINOR__ __GNUC_PATCHLEVEL__\n"
	"#else\n"
	"modelc_cc cc 0 0 0\n"
	"#endif\n"
	"#if defined(__x86_64__) && !defined(_WIN32)\n"
	"modelc_red_zone 128\n"
	"#elif defined(__powerpc64__)\n"
	"modelc_red_zone 288\n"
	"#elif defined(__aarch64__) && defined(__APPLE__)\n"
	"modelc_red_zone 128\n"
	"#else\n"
	"modelc_red_zone 0\n"
	"#endif\n";

typedef struct {
	char family[16];
	int major, minor, patch;
} cc_id;

static int identify(const char *dir, const char *name, cc_words *w, cc_id *id, mc_stack_usage *u)
{
	char src[4200], log[4200];
	tmp_path(dir, name, "-id.c", src, sizeof src);
	tmp_path(dir, name, ".log", log, sizeof log);
	FILE *f = fopen(src, "w");
	if (!f || fputs(id_source, f) < 0 || fclose(f)) {
		snprintf(u->note, sizeof u->note, "cannot write '%s'", src);
		return -1;
	}
	char *argv[MAX_CC_WORDS + 4];
	int n = 0;
	for (int i = 0; i < w->n; i++)
		argv[n++] = w->words[i];
	argv[n++] = "-E";
	argv[n++] = "-P";
	argv[n++] = src;
	argv[n] = NULL;
	if (run_logged(argv, dir, log, u->note, sizeof u->note))
		return -1;
	char *text = read_text(log);
	const char *cc_line = text ? strstr(text, "modelc_cc ") : NULL;
	const char *rz_line = text ? strstr(text, "modelc_red_zone ") : NULL;
	unsigned long rz = 0;
	bool ok = cc_line && rz_line &&
	          sscanf(cc_line, "modelc_cc %15s %d %d %d", id->family, &id->major, &id->minor, &id->patch) == 4 &&
	          sscanf(rz_line, "modelc_red_zone %lu", &rz) == 1;
	free(text);
	if (!ok) {
		snprintf(u->note, sizeof u->note, "'%s' does not say what compiler it is", w->words[0]);
		return -1;
	}
	u->red_zone = rz;
	for (int i = 1; i < w->n; i++)
		if (strcmp(w->words[i], "-mno-red-zone") == 0)
			u->red_zone = 0;
	snprintf(u->compiler, sizeof u->compiler, "%s %d.%d.%d", id->family, id->major, id->minor, id->patch);
	/* The triple, for readers; a compiler without -dumpmachine leaves it empty. */
	char *dm[] = { w->words[0], "-dumpmachine", NULL };
	char why[256];
	if (run_logged(dm, dir, log, why, sizeof why) == 0)
		first_line(log, u->target, sizeof u->target);
	return 0;
}

static void remove_tmp(const char *dir, const char *name)
{
	char path[4200];
	for (size_t i = 0; i < sizeof tmp_suffixes / sizeof *tmp_suffixes; i++) {
		tmp_path(dir, name, tmp_suffixes[i], path, sizeof path);
		unlink(path);
	}
}

/* Compiles dir/NAME.c into the temporary object and reads back its .ci
 * (callgraph) or .su. */
static int compile_and_parse(const char *dir, const char *name, cc_words *w, const cc_id *id,
                             mc_stack_usage *u, mc_stack_graph *g)
{
	bool callgraph = strcmp(id->family, "gcc") == 0 && id->major >= 10;
	char src[4200], obj[4200], log[4200], out[4200];
	snprintf(src, sizeof src, "%s/%s.c", dir, name);
	tmp_path(dir, name, ".o", obj, sizeof obj);
	tmp_path(dir, name, ".log", log, sizeof log);
	tmp_path(dir, name, callgraph ? ".ci" : ".su", out, sizeof out);
	char *argv[MAX_CC_WORDS + 12];
	int n = 0;
	argv[n++] = w->words[0];
	argv[n++] = "-std=c99";
	argv[n++] = "-O2";
	for (int i = 1; i < w->n; i++) /* after -O2, so that the caller's -Os wins */
		argv[n++] = w->words[i];
	argv[n++] = "-fstack-usage";
	if (callgraph)
		argv[n++] = "-fcallgraph-info=su";
	mc_strbuf flags = { 0 };
	for (int i = 1; i < n; i++)
		mc_sb_printf(&flags, "%s%s", i > 1 ? " " : "", argv[i]);
	snprintf(u->flags, sizeof u->flags, "%s", flags.data);
	mc_sb_free(&flags);
	argv[n++] = "-c";
	argv[n++] = src;
	argv[n++] = "-o";
	argv[n++] = obj;
	argv[n] = NULL;
	u->method = callgraph ? "callgraph" : "su-only";
	char why[400];
	if (run_logged(argv, dir, log, why, sizeof why)) {
		snprintf(u->note, sizeof u->note, "the stack-usage compile failed: %s", why);
		return -1;
	}
	/* the flash it takes, for NAME.json; not knowing it is no failure */
	u->sized = mc_object_sizes_of(obj, &u->object, why, sizeof why) == 0;
	char *text = read_text(out);
	if (!text) {
		snprintf(u->note, sizeof u->note, "%s -fstack-usage wrote no %s", w->words[0], callgraph ? ".ci" : ".su");
		return -1;
	}
	int rc = callgraph ? mc_stack_parse_ci(g, text, why, sizeof why) : mc_stack_parse_su(g, text, why, sizeof why);
	free(text);
	if (rc)
		snprintf(u->note, sizeof u->note, "cannot read the compiler's stack usage: %s", why);
	return rc;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void mc_stack_measure(const char *dir, const char *name, const char *cc, mc_stack_usage *u)
{
	mc_stack_measure_run(dir, name, "run", cc, u);
}

void mc_stack_measure_run(const char *dir, const char *name, const char *run, const char *cc,
                          mc_stack_usage *u)
{
	memset(u, 0, sizeof *u);
	double t0 = now_ms();
	cc_words w;
	cc_id id = { 0 };
	mc_stack_graph g = { 0 };
	if (!split_cc(cc ? cc : "cc", &w)) {
		snprintf(u->note, sizeof u->note, "--stack-cc '%s': no compiler, or too many words", cc ? cc : "");
		goto out;
	}
	if (identify(dir, name, &w, &id, u) || compile_and_parse(dir, name, &w, &id, u, &g))
		goto out;
	char root[300];
	snprintf(root, sizeof root, "%s_%s", name, run);
	if (mc_stack_worst(&g, root, &u->bound)) {
		snprintf(u->note, sizeof u->note, "%s", u->bound.why);
		goto out;
	}
	if (u->bound.bounded)
		u->bound.bytes += u->red_zone;
	u->measured = true;
out:
	mc_stack_graph_free(&g);
	remove_tmp(dir, name);
	u->ms = now_ms() - t0;
}

void mc_stack_usage_free(mc_stack_usage *u)
{
	mc_stack_bound_free(&u->bound);
}
