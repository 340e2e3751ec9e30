/* Conformance runner: ONNX backend test directories through the reference
 * interpreter, or (--compiled) through the whole compiler: compile to C,
 * build with the host compiler, run, compare. Each test runs in a child
 * process, so a crash is counted as CRASH and the run goes on; -j runs
 * several at once. With --expect, every test not listed there as failing
 * must pass: the run fails on any regression or crash. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "modelc.h"
#include "../../aot/aot.h"
#include "onnx/onnx.pb-c.h"

enum { PASS, FAIL, UNSUPPORTED, CRASH, NSTATUS };
static const char *status_name[] = {"PASS", "FAIL", "UNSUPPORTED", "CRASH"};

/* The ops the foundation issue names: a test counts as "in scope" when all
 * of its ops (subgraphs included) are in this list. */
static const char *scope_ops[] = {
	"Conv", "ConvTranspose", "Gemm", "MatMul", "BatchNormalization", "Relu", "LeakyRelu",
	"PRelu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Exp", "Log", "Sqrt",
	"Pow", "Erf", "Add", "Sub", "Mul", "Div", "Max", "Min", "Neg", "Abs", "MaxPool",
	"AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Softmax", "LogSoftmax",
	"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ArgMax", "Reshape", "Flatten",
	"Squeeze", "Unsqueeze", "Transpose", "Concat", "Split", "Slice", "Gather", "Pad",
	"Resize", "Expand", "Tile", "Cast", "Shape", "ConstantOfShape", "Range", "Where", "Equal",
	"Less", "Greater", "Not", "And", "Identity", "Dropout", "LayerNormalization",
	"InstanceNormalization", "DepthToSpace", "SpaceToDepth", "GreaterOrEqual",
	"LessOrEqual", "Size", "If", "LSTM", "GRU", "Constant",
};

static const double rel_tol = 1e-3;
static double abs_tol = 1e-7;
/* --compiled: the generated code is what is compared. */
static bool compiled;
/* --target: what --compiled compiles to (c, or llvm: NAME_main.c linked to libNAME.a) */
static const char *compile_target = "c";
static bool keep_dirs;
/* --threads N (compiled, c target): each test compiled with --threads N;
 * the harness's N workers are compared with the expected outputs, and a
 * second run on one worker must give the same bytes. */
static int threads = 1;

/* Upstream's own overrides (onnx/backend/test: test_dft* gets atol 1e-6 to
 * 1e-3 by runtime): the stored DFT outputs carry float32 FFT noise where
 * the exact value is 0. */
static const struct {
	const char *prefix;
	double atol;
} tolerance_overrides[] = {
	{"test_dft", 1e-5},
};

static double abs_tol_for(const char *test)
{
	for (size_t i = 0; i < sizeof tolerance_overrides / sizeof *tolerance_overrides; i++)
		if (strncmp(test, tolerance_overrides[i].prefix, strlen(tolerance_overrides[i].prefix)) == 0)
			return tolerance_overrides[i].atol;
	return 1e-7;
}

/* ---- op lists straight from the protobuf ---- */
typedef struct {
	char **names;
	int n, cap;
} strset;

static void strset_add(strset *s, const char *x)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->names[i], x) == 0)
			return;
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		s->names = realloc(s->names, (size_t)s->cap * sizeof *s->names);
	}
	s->names[s->n++] = mc_xstrdup(x);
}

static void strset_free(strset *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->names[i]);
	free(s->names);
	s->n = s->cap = 0;
	s->names = NULL;
}

static void collect_ops(const Onnx__GraphProto *g, strset *ops, int depth)
{
	if (!g || depth > 16)
		return;
	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		char name[256];
		bool other = n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0;
		snprintf(name, sizeof name, "%s%s%s", other ? n->domain : "", other ? ":" : "",
		         n->op_type ? n->op_type : "?");
		strset_add(ops, name);
		for (size_t a = 0; a < n->n_attribute; a++) {
			collect_ops(n->attribute[a]->g, ops, depth + 1);
			for (size_t k = 0; k < n->attribute[a]->n_graphs; k++)
				collect_ops(n->attribute[a]->graphs[k], ops, depth + 1);
		}
	}
}

static unsigned char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
	if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	*len = (size_t)n;
	return b;
}

static bool model_ops(const char *model, strset *ops)
{
	size_t len;
	unsigned char *buf = read_all(model, &len);
	if (!buf)
		return false;
	Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, buf);
	free(buf);
	if (!m)
		return false;
	collect_ops(m->graph, ops, 0);
	onnx__model_proto__free_unpacked(m, NULL);
	return true;
}

static bool in_scope(const strset *ops)
{
	for (int i = 0; i < ops->n; i++) {
		bool found = false;
		for (size_t k = 0; k < sizeof scope_ops / sizeof *scope_ops; k++)
			found |= strcmp(ops->names[i], scope_ops[k]) == 0;
		if (!found)
			return false;
	}
	return ops->n > 0;
}

/* ---- one test, in the child ---- */
static char first_error[1024];

static void capture(const char *line, void *user)
{
	(void)user;
	if (!first_error[0])
		snprintf(first_error, sizeof first_error, "%s", line);
}

static bool close_enough(const mc_tensor *got, const mc_tensor *want, char *why, size_t n)
{
	char a[256], b[256];
	if (got->dtype != want->dtype || !mc_shape_eq(&got->shape, &want->shape)) {
		snprintf(why, n, "got %s %s, expected %s %s", mc_dtype_name(got->dtype),
		         mc_shape_str(&got->shape, a, sizeof a), mc_dtype_name(want->dtype),
		         mc_shape_str(&want->shape, b, sizeof b));
		return false;
	}
	for (size_t i = 0; i < got->numel; i++) {
		if (mc_dtype_is_float(got->dtype)) {
			double x = mc_get_f(got, i), y = mc_get_f(want, i);
			if (isnan(x) && isnan(y))
				continue;
			if (x == y)
				continue;
			if (!(fabs(x - y) <= abs_tol + rel_tol * fabs(y))) {
				snprintf(why, n, "element %zu: got %.9g, expected %.9g", i, x, y);
				return false;
			}
		} else if (mc_get_i(got, i) != mc_get_i(want, i)) {
			snprintf(why, n, "element %zu: got %lld, expected %lld", i,
			         (long long)mc_get_i(got, i), (long long)mc_get_i(want, i));
			return false;
		}
	}
	return true;
}

static bool is_unsupported_message(const char *m)
{
	return strstr(m, "unsupported") || strstr(m, "not supported");
}

/* Inputs that may set a shape: integer tensors and small tensors of any
 * type (Resize's scales, Compress's condition, Range's scalars). */
static bool bindable(mc_dtype t, const mc_shape *s)
{
	return mc_dtype_is_int(t) || mc_numel(s) <= 16;
}

/* Imports the test's model and its input data. With bind_small, bindable
 * inputs become compile-time constants, as a user would --bind them: static
 * shapes need shape-setting inputs (Reshape's shape, Tile's repeats) known
 * when compiling. On success *in holds the remaining runtime inputs. */
static mc_graph *prepare(const char *dir, bool bind_small, mc_tensor ***in, char *msg, size_t n,
                         int *status)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/model.onnx", dir);
	first_error[0] = 0;
	mc_graph *g = mc_import_file(path, NULL);
	if (!g) {
		snprintf(msg, n, "%s", first_error);
		*status = is_unsupported_message(first_error) ? UNSUPPORTED : FAIL;
		return NULL;
	}
	int n_in = g->n_inputs;
	mc_tensor **data = mc_xcalloc((size_t)n_in + 1, sizeof *data);
	for (int i = 0; i < n_in; i++) {
		snprintf(path, sizeof path, "%s/test_data_set_0/input_%d.pb", dir, i);
		data[i] = mc_tensor_from_pb_file(path);
		if (!data[i]) {
			snprintf(msg, n, "input %d: %s", i, first_error);
			*status = is_unsupported_message(first_error) ? UNSUPPORTED : FAIL;
			goto fail;
		}
		/* The data fixes symbolic dims, as a user's --input-shape would. */
		mc_value *v = &g->values[g->inputs[i]];
		if (!v->typed && v->shape.rank == data[i]->shape.rank) {
			v->shape = data[i]->shape;
			v->typed = true;
		}
	}
	/* Bind from the back so that earlier input positions stay put. */
	for (int i = n_in - 1; bind_small && i >= 0; i--) {
		if (!bindable(data[i]->dtype, &data[i]->shape))
			continue;
		if (mc_graph_bind_input(g, i, data[i])) {
			snprintf(msg, n, "%s", first_error);
			*status = FAIL;
			goto fail;
		}
		data[i] = NULL;
	}
	*in = mc_xcalloc((size_t)g->n_inputs + 1, sizeof **in);
	for (int i = 0, k = 0; i < n_in; i++)
		if (data[i])
			(*in)[k++] = data[i];
	free(data);
	return g;
fail:
	for (int i = 0; i < n_in; i++)
		mc_tensor_free(data[i]);
	free(data);
	mc_graph_free(g);
	return NULL;
}

static bool has_bindable_input(const mc_graph *g)
{
	for (int i = 0; i < g->n_inputs; i++)
		if (bindable(g->values[g->inputs[i]].dtype, &g->values[g->inputs[i]].shape))
			return true;
	return false;
}

static int remove_tree(const char *dir)
{
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd);
}

/* --threads: the harness in dir, whose outputs on `threads` workers are
 * out, runs again on one into dir/one; every output must be the same
 * bytes. */
static int same_on_one_worker(const char *dir, const mc_graph *g, mc_tensor **out, char *msg, size_t n)
{
	char cmd[8192];
	size_t len = (size_t)snprintf(cmd, sizeof cmd, "cd '%s' && mkdir one && ./m_main one --threads 1", dir);
	for (int i = 0; i < g->n_inputs; i++)
		len += (size_t)snprintf(cmd + len, sizeof cmd - len, " input_%d.bin", i);
	snprintf(cmd + len, sizeof cmd - len, " > one.log 2>&1");
	int ws = system(cmd);
	if (ws == -1 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
		snprintf(msg, n, "the run on one worker failed (status %d)", ws);
		return ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) <= 128 ? FAIL : CRASH;
	}
	for (int k = 0; k < g->n_outputs; k++) {
		char path[4200];
		snprintf(path, sizeof path, "%s/one/output_%d.bin", dir, k);
		/* out[k]'s shape: a counted output's is the count its run gave */
		mc_tensor *one = mc_tensor_read_file(path, out[k]->dtype, &out[k]->shape);
		size_t at = 0;
		const unsigned char *a = out[k]->data, *b = one ? one->data : NULL;
		while (b && at < out[k]->nbytes && a[at] == b[at])
			at++;
		bool same = b && at == out[k]->nbytes;
		mc_tensor_free(one);
		if (!same) {
			snprintf(msg, n, "output %d on %d workers differs from one worker's at byte %zu", k, threads, at);
			return FAIL;
		}
	}
	return PASS;
}

/* Compiles g into a temporary directory, builds the harness with $MODELC_CC
 * (cc) and $MODELC_CFLAGS, runs it on `in`, reads the outputs. */
static int compiled_run(mc_graph *g, mc_tensor **in, mc_tensor **out, char *msg, size_t n)
{
	const char *tmp = getenv("TMPDIR");
	char dir[4096];
	snprintf(dir, sizeof dir, "%s/modelc-conf-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		snprintf(msg, n, "mkdtemp: %s", strerror(errno));
		return FAIL;
	}
	int status = FAIL;
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "m";
	o.harness = true;
	o.no_stack_usage = true; /* a compile of NAME.c per test, for a figure nobody reads */
	o.target = compile_target;
	o.isa = getenv("MODELC_ISA");       /* NULL: generic (llvm: from the triple) */
	o.layout = getenv("MODELC_LAYOUT"); /* NULL: auto */
	o.optimize = getenv("MODELC_OPTIMIZE"); /* NULL: speed */
	o.io_in_arena = getenv("MODELC_IO_IN_ARENA") != NULL; /* the harness copies in and out */
	o.threads = threads;
	o.threads_min_work = 1; /* the tests' small loops split too */
	if (mc_compile_graph(g, NULL, dir, &o)) {
		snprintf(msg, n, "%s", first_error);
		status = strstr(first_error, "has no lowering") || is_unsupported_message(first_error)
		         ? UNSUPPORTED : FAIL;
		goto done;
	}
	const char *cc = getenv("MODELC_CC"), *cflags = getenv("MODELC_CFLAGS");
	int exit_status;
	first_error[0] = 0;
	/* the C target's sources as one translation unit: a third of the
	 * compiler runs over thousands of tests */
	int r = mc_run_harness_ex(dir, o.name, cc && *cc ? cc : "cc",
	                          cflags && *cflags ? cflags : "-std=c99 -O1 -Wall -Wextra -Werror", true, g, in,
	                          out, &exit_status);
	if (r) {
		snprintf(msg, n, "%s", first_error);
		status = r == MC_HARNESS_RUN && (exit_status > 128 || exit_status < 0) ? CRASH : FAIL;
		goto done;
	}
	status = threads > 1 ? same_on_one_worker(dir, g, out, msg, n) : PASS;
done:
	if (!keep_dirs)
		remove_tree(dir);
	else
		fprintf(stderr, "kept %s\n", dir);
	return status;
}

/* Returns a status; writes a one-line message into msg. */
static int run_one(const char *dir, char *msg, size_t n)
{
	char path[4096];
	int status = FAIL;
	mc_tensor **in = NULL;
	mc_set_diag_sink(capture, NULL);
	mc_graph *g = prepare(dir, false, &in, msg, n, &status);
	if (!g)
		return status;
	if (mc_infer_graph(g)) {
		bool retry = has_bindable_input(g);
		snprintf(msg, n, "%s", first_error);
		status = is_unsupported_message(first_error) ? UNSUPPORTED : FAIL;
		for (int i = 0; i < g->n_inputs; i++)
			mc_tensor_free(in[i]);
		free(in);
		in = NULL;
		mc_graph_free(g);
		if (!retry)
			return status;
		g = prepare(dir, true, &in, msg, n, &status);
		if (!g)
			return status;
		if (mc_infer_graph(g)) {
			snprintf(msg, n, "%s", first_error);
			status = is_unsupported_message(first_error) ? UNSUPPORTED : FAIL;
			goto done;
		}
		status = FAIL;
		msg[0] = 0;
	}
	mc_tensor **out = mc_xcalloc((size_t)g->n_outputs + 1, sizeof *out);
	if (compiled) {
		status = compiled_run(g, in, out, msg, n);
		if (status != PASS) {
			for (int i = 0; i < g->n_outputs; i++)
				mc_tensor_free(out[i]);
			free(out);
			goto done;
		}
	} else if (mc_interp_run(g, in, out, NULL)) {
		snprintf(msg, n, "%s", first_error);
		status = is_unsupported_message(first_error) ? UNSUPPORTED : FAIL;
		free(out);
		goto done;
	}
	status = PASS;
	for (int i = 0; i < g->n_outputs && status == PASS; i++) {
		snprintf(path, sizeof path, "%s/test_data_set_0/output_%d.pb", dir, i);
		mc_tensor *want = mc_tensor_from_pb_file(path);
		char why[512];
		if (!want) {
			snprintf(msg, n, "output %d: %s", i, first_error);
			status = is_unsupported_message(first_error) ? UNSUPPORTED : FAIL;
		} else if (!close_enough(out[i], want, why, sizeof why)) {
			snprintf(msg, n, "output %d ('%s'): %s", i, g->values[g->outputs[i]].name, why);
			status = FAIL;
		}
		mc_tensor_free(want);
	}
	for (int i = 0; i < g->n_outputs; i++)
		mc_tensor_free(out[i]);
	free(out);
done:
	for (int i = 0; i < g->n_inputs; i++)
		mc_tensor_free(in[i]);
	free(in);
	mc_graph_free(g);
	return status;
}

#define STATUS_EXIT_BASE 40

/* Forks so that a crash or a hang is contained and counted; the child's
 * message comes back through a pipe (short: it never fills the pipe). */
typedef struct {
	pid_t pid;
	int fd;
	int index;
} child;

static child start_child(const char *dir, int index)
{
	int pipefd[2];
	child ch = { -1, -1, index };
	if (pipe(pipefd) != 0)
		return ch;
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid == 0) {
		close(pipefd[0]);
		alarm(compiled ? 300 : 120);
		char m[1024] = "";
		const char *base = strrchr(dir, '/');
		abs_tol = abs_tol_for(base ? base + 1 : dir);
		int st = run_one(dir, m, sizeof m);
		if (write(pipefd[1], m, strlen(m)) < 0)
			_exit(100);
		/* Offset so that a sanitizer's exit status 1 reads as a crash. */
		_exit(STATUS_EXIT_BASE + st);
	}
	close(pipefd[1]);
	ch.pid = pid;
	ch.fd = pipefd[0];
	return ch;
}

static int finish_child(child *ch, int ws, char *msg, size_t n)
{
	ssize_t r, total = 0;
	while (total < (ssize_t)n - 1 && (r = read(ch->fd, msg + total, n - 1 - (size_t)total)) > 0)
		total += r;
	msg[total > 0 ? total : 0] = 0;
	close(ch->fd);
	if (WIFSIGNALED(ws)) {
		snprintf(msg, n, "killed by signal %d (%s)", WTERMSIG(ws), strsignal(WTERMSIG(ws)));
		return CRASH;
	}
	int code = WEXITSTATUS(ws) - STATUS_EXIT_BASE;
	if (code >= 0 && code < NSTATUS && code != CRASH)
		return code;
	snprintf(msg, n, "child exited with status %d", WEXITSTATUS(ws));
	return CRASH;
}

/* ---- expectations ---- */
typedef struct {
	char *test;
	int status;
} expectation;

static expectation *expects;
static int n_expects;

static int load_expect(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "conformance: cannot open %s: %s\n", path, strerror(errno));
		return -1;
	}
	char line[4096];
	while (fgets(line, sizeof line, f)) {
		if (line[0] == '#' || line[0] == '\n')
			continue;
		char *tab = strchr(line, '\t');
		if (!tab)
			continue;
		*tab = 0;
		char *st = tab + 1, *end = strchr(st, '\t');
		if (end)
			*end = 0;
		st[strcspn(st, "\n")] = 0;
		int s = -1;
		for (int k = 0; k < NSTATUS; k++)
			if (strcmp(st, status_name[k]) == 0)
				s = k;
		if (s < 0)
			continue;
		expects = realloc(expects, (size_t)(n_expects + 1) * sizeof *expects);
		expects[n_expects++] = (expectation){mc_xstrdup(line), s};
	}
	fclose(f);
	return 0;
}

static int expected_status(const char *test)
{
	for (int i = 0; i < n_expects; i++)
		if (strcmp(expects[i].test, test) == 0)
			return expects[i].status;
	return PASS;
}

/* ---- per-op table ---- */
typedef struct {
	char *op;
	int count[NSTATUS];
} op_row;

static op_row *rows;
static int n_rows;

static void count_op(const char *op, int status)
{
	for (int i = 0; i < n_rows; i++)
		if (strcmp(rows[i].op, op) == 0) {
			rows[i].count[status]++;
			return;
		}
	rows = realloc(rows, (size_t)(n_rows + 1) * sizeof *rows);
	memset(&rows[n_rows], 0, sizeof *rows);
	rows[n_rows].op = mc_xstrdup(op);
	rows[n_rows++].count[status] = 1;
}

static int cmp_row(const void *a, const void *b)
{
	return strcmp(((const op_row *)a)->op, ((const op_row *)b)->op);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void usage(void)
{
	fputs("usage: conformance [-v] [-j N] [--compiled [--target c|llvm] [--threads N] [--keep]]\n"
	      "                   [--filter SUBSTR]...\n"
	      "                   [--expect FILE] [--write-expect FILE] [--ops] DIR...\n"
	      "DIR holds test directories (each with model.onnx and test_data_set_0/).\n"
	      "--compiled compiles each test to C, builds it with $MODELC_CC (cc) and\n"
	      "$MODELC_CFLAGS (-std=c99 -O1 -Wall -Wextra -Werror), runs and compares;\n"
	      "--target llvm compiles through the LLVM target instead (libNAME.a, no C\n"
	      "sources) and links the driver to it;\n"
	      "--threads N compiles with --threads N (c target): the harness's N workers\n"
	      "are compared, then its outputs on one worker must be the same bytes;\n"
	      "--keep leaves the generated directories in $TMPDIR.\n",
	      stderr);
}

int main(int argc, char **argv)
{
	const char *filters[64], *dirs[16], *expect_path = NULL, *write_expect = NULL;
	int n_filters = 0, n_dirs = 0;
	bool verbose = false, op_table = false;
	long jobs = 1;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-v") == 0)
			verbose = true;
		else if (strcmp(argv[i], "--compiled") == 0)
			compiled = true;
		else if (strcmp(argv[i], "--target") == 0 && i + 1 < argc)
			compile_target = argv[++i];
		else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
			threads = (int)strtol(argv[++i], NULL, 10);
			if (threads < 1 || threads > 64) {
				usage();
				return 2;
			}
		} else if (strcmp(argv[i], "--keep") == 0)
			keep_dirs = true;
		else if (strcmp(argv[i], "-j") == 0 && i + 1 < argc) {
			jobs = strtol(argv[++i], NULL, 10);
			if (jobs < 1)
				jobs = 1;
		}
		else if (strcmp(argv[i], "--ops") == 0)
			op_table = true;
		else if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc && n_filters < 64)
			filters[n_filters++] = argv[++i];
		else if (strcmp(argv[i], "--expect") == 0 && i + 1 < argc)
			expect_path = argv[++i];
		else if (strcmp(argv[i], "--write-expect") == 0 && i + 1 < argc)
			write_expect = argv[++i];
		else if (argv[i][0] == '-') {
			usage();
			return 2;
		} else if (n_dirs < 16)
			dirs[n_dirs++] = argv[i];
	}
	if (!n_dirs) {
		usage();
		return 2;
	}
	if (expect_path && load_expect(expect_path))
		return 2;
	FILE *wf = NULL;
	if (write_expect) {
		wf = fopen(write_expect, "w");
		if (!wf) {
			fprintf(stderr, "conformance: cannot write %s\n", write_expect);
			return 2;
		}
		fprintf(wf, "# test\tstatus\tmessage: tests that do not pass today. Generated by\n"
		            "# build/conformance --write-expect; every test not listed must pass.\n");
	}
	int total[NSTATUS] = {0}, scope[NSTATUS] = {0}, regressions = 0, improvements = 0;
	/* The tests, in a stable order. */
	char **tests = NULL, **names = NULL;
	int n_tests = 0;
	for (int d = 0; d < n_dirs; d++) {
		DIR *dp = opendir(dirs[d]);
		if (!dp) {
			fprintf(stderr, "conformance: cannot open %s: %s\n", dirs[d], strerror(errno));
			return 2;
		}
		char **here = NULL;
		int nh = 0;
		struct dirent *e;
		while ((e = readdir(dp))) {
			if (e->d_name[0] == '.')
				continue;
			here = realloc(here, (size_t)(nh + 1) * sizeof *here);
			here[nh++] = mc_xstrdup(e->d_name);
		}
		closedir(dp);
		qsort(here, (size_t)nh, sizeof *here, cmp_str);
		for (int t = 0; t < nh; t++) {
			char tdir[4096], model[4200];
			snprintf(tdir, sizeof tdir, "%s/%s", dirs[d], here[t]);
			snprintf(model, sizeof model, "%s/model.onnx", tdir);
			bool match = n_filters == 0;
			for (int f = 0; f < n_filters; f++)
				match |= strstr(here[t], filters[f]) != NULL;
			struct stat st;
			if (match && stat(model, &st) == 0) {
				tests = realloc(tests, (size_t)(n_tests + 1) * sizeof *tests);
				names = realloc(names, (size_t)(n_tests + 1) * sizeof *names);
				tests[n_tests] = mc_xstrdup(tdir);
				names[n_tests++] = mc_xstrdup(here[t]);
			}
			free(here[t]);
		}
		free(here);
	}
	int *result = mc_xcalloc((size_t)n_tests + 1, sizeof *result);
	char (*msgs)[1024] = mc_xcalloc((size_t)n_tests + 1, sizeof *msgs);
	child *running = mc_xcalloc((size_t)jobs + 1, sizeof *running);
	int next = 0, n_running = 0;
	while (next < n_tests || n_running > 0) {
		while (next < n_tests && n_running < jobs) {
			running[n_running] = start_child(tests[next], next);
			if (running[n_running].pid < 0) {
				result[next] = CRASH;
				snprintf(msgs[next], sizeof msgs[next], "cannot fork: %s", strerror(errno));
				next++;
				continue;
			}
			n_running++;
			next++;
		}
		int ws;
		pid_t pid = wait(&ws);
		if (pid < 0)
			break;
		for (int k = 0; k < n_running; k++)
			if (running[k].pid == pid) {
				int i = running[k].index;
				result[i] = finish_child(&running[k], ws, msgs[i], sizeof msgs[i]);
				running[k] = running[--n_running];
				break;
			}
	}
	free(running);
	for (int t = 0; t < n_tests; t++) {
		char model[4200];
		snprintf(model, sizeof model, "%s/model.onnx", tests[t]);
		strset ops = {0};
		model_ops(model, &ops);
		int s = result[t];
		const char *msg = msgs[t];
		total[s]++;
		bool scoped = in_scope(&ops);
		if (scoped)
			scope[s]++;
		for (int k = 0; k < ops.n; k++)
			count_op(ops.names[k], s);
		int want = expected_status(names[t]);
		const char *mark = "";
		if (expect_path && s != want) {
			if (s == PASS) {
				improvements++;
				mark = " [now passes: update the expect file]";
			} else {
				regressions++;
				mark = " [REGRESSION]";
			}
		}
		if (verbose || s != PASS || *mark)
			printf("%-11s %s%s%s%s\n", status_name[s], names[t], msg[0] ? ": " : "", msg, mark);
		if (wf && s != PASS)
			fprintf(wf, "%s\t%s\t%s\n", names[t], status_name[s], msg);
		strset_free(&ops);
		free(names[t]);
		free(tests[t]);
	}
	free(names);
	free(tests);
	free(result);
	free(msgs);
	if (op_table) {
		qsort(rows, (size_t)n_rows, sizeof *rows, cmp_row);
		printf("\n%-36s %6s %6s %6s %6s\n", "op", "pass", "fail", "unsup", "crash");
		for (int i = 0; i < n_rows; i++)
			printf("%-36s %6d %6d %6d %6d\n", rows[i].op, rows[i].count[PASS],
			       rows[i].count[FAIL], rows[i].count[UNSUPPORTED], rows[i].count[CRASH]);
	}
	int all = total[PASS] + total[FAIL] + total[UNSUPPORTED] + total[CRASH];
	int in_all = scope[PASS] + scope[FAIL] + scope[UNSUPPORTED] + scope[CRASH];
	printf("\nconformance (%s): %d tests: %d pass, %d fail, %d unsupported, "
	       "%d crash\n", !compiled ? "reference interpreter" : strcmp(compile_target, "c") ? "compiled, llvm target" : "compiled C", all, total[PASS], total[FAIL], total[UNSUPPORTED], total[CRASH]);
	printf("in scope (all ops in the foundation list): %d tests: %d pass (%.1f%%), %d fail, "
	       "%d unsupported, %d crash\n", in_all, scope[PASS],
	       in_all ? 100.0 * scope[PASS] / in_all : 0.0, scope[FAIL], scope[UNSUPPORTED],
	       scope[CRASH]);
	if (expect_path)
		printf("against %s: %d regression%s, %d newly passing\n", expect_path, regressions,
		       regressions == 1 ? "" : "s", improvements);
	if (wf)
		fclose(wf);
	return (total[CRASH] || regressions) ? 1 : 0;
}
