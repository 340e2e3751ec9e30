/* Hostile models (tests/hostile/corpus.c), imported in-process the way
 * `modelc inspect` does it (and compiled, for those only compiling can
 * refuse): each must give exactly one error line with the expected text.
 * Each case runs in its own process (Criterion), so a crash is reported
 * against the case that caused it. tests/hostile/check runs the same
 * corpus through the built modelc binary. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../aot/aot.h"
#include "../../freezing/freezing.h"

/* configure builds only the .c files of tests/unit: the corpus is compiled in here. */
#include "../hostile/corpus.c"

/* Criterion reports a crash without the parameter: name the case on
 * stderr first. The handler runs on its own stack (stack overflows). */
static const char *current_case;

static void on_crash(int sig)
{
	static const char msg[] = "hostile case crashed: ";
	if (write(2, msg, sizeof msg - 1) < 0 ||
	    write(2, current_case, strlen(current_case)) < 0 || write(2, "\n", 1) < 0) {
		/* nothing more to do: the signal is re-raised below */
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static void name_the_case_on_crash(const char *file)
{
	static char alt[1 << 16];
	stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt};
	struct sigaction sa = {.sa_handler = on_crash, .sa_flags = SA_ONSTACK};
	current_case = file;
	sigaltstack(&ss, NULL);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	sigaction(SIGABRT, &sa, NULL);
}

/* The steps of `modelc inspect` that can report an error. */
static void inspect(const char *path)
{
	mc_import_opts opts = {.allow_unsupported = true};
	mc_graph *g = mc_import_file(path, &opts);
	if (!g)
		return;
	bool pinned = true;
	for (int i = 0; i < g->n_inputs; i++)
		pinned &= g->values[g->inputs[i]].typed;
	if (pinned && !mc_report_unsupported(g) && !mc_infer_graph(g)) {
		/* a QDQ model: inspect runs the quantize pass (its integer ops) */
		bool qdq = false;
		for (int i = 0; i < g->n_nodes; i++)
			qdq |= g->nodes[i].id == MC_OP_QuantizeLinear ||
			       g->nodes[i].id == MC_OP_DequantizeLinear;
		if (qdq)
			mc_pass_quantize(g, NULL);
	}
	mc_graph_free(g);
}

/* The expected text with every "{dir}" replaced by dir. */
static const char *expected_text(const char *expect, const char *dir)
{
	static char buf[16384];
	size_t len = 0;
	const char *p = expect, *mark;
	while ((mark = strstr(p, "{dir}"))) {
		len += (size_t)snprintf(buf + len, sizeof buf - len, "%.*s%s", (int)(mark - p), p,
		                        dir);
		cr_assert_lt(len, sizeof buf);
		p = mark + strlen("{dir}");
	}
	snprintf(buf + len, sizeof buf - len, "%s", p);
	return buf;
}

/* Criterion may run each case in a freshly started process (other
 * addresses): pass indices, not pointers. */
static int case_index[256];

ParameterizedTestParameters(hostile, corpus)
{
	cr_assert_leq(hostile_n_cases, 256);
	for (int i = 0; i < hostile_n_cases; i++)
		case_index[i] = i;
	return cr_make_param_array(int, case_index, (size_t)hostile_n_cases);
}

ParameterizedTest(int *index, hostile, corpus, .timeout = 60)
{
	const hostile_case *c = &hostile_cases[*index];
	name_the_case_on_crash(c->file);
	char *dir = make_temp_dir();
	char sub[4200], path[8400];
	/* a directory of its own: some cases put companions one level up */
	snprintf(sub, sizeof sub, "%s/corpus", dir);
	cr_assert_eq(mkdir(sub, 0777), 0);
	snprintf(path, sizeof path, "%s/%s", sub, c->file);
	cr_assert_eq(c->write(path), 0, "%s: cannot write the file", c->file);

	diag_capture();
	inspect(path);
	if (c->how & COMPILE_ONLY) {
		cr_expect_eq(diag_count(), 0, "%s: inspect should accept it, got:\n%s", c->file,
		             diag_all());
		char out[4300];
		snprintf(out, sizeof out, "%s/out", dir);
		mc_compile_opts opts;
		mc_compile_opts_init(&opts);
		opts.name = "m";
		diag_capture();
		cr_expect_neq(mc_compile(path, out, &opts), 0, "%s: compiled", c->file);
		cr_expect_neq(access(out, F_OK), 0, "%s: a failed compile created %s", c->file, out);
	}
	cr_expect_eq(diag_count(), 1, "%s: want exactly one error line, got:\n%s", c->file,
	             diag_all());
	const char *line = diag_line(0);
	const char *prefix = "modelc: error: ";
	const char *want = expected_text(c->expect, sub);
	cr_expect_eq(strncmp(line, prefix, strlen(prefix)), 0, "%s: %s", c->file, line);
	if (c->how & EXACT)
		cr_expect_str_eq(line + strlen(prefix), want, "%s", c->file);
	else
		cr_expect_not_null(strstr(line, want), "%s: '%s' does not contain '%s'", c->file,
		                   line, want);
	rm_tree(dir);
	free(dir);
}
