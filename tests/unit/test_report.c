/* modelc compile --report (aot/report.c): the page names every kernel
 * function of NAME.c, its memory timeline reaches NAME_ARENA_BYTES (one
 * arena and pools), it holds nothing fetched and nothing of the machine,
 * a profile's times land in their rows, and a failed compile leaves no
 * report behind. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../aot/aot.h"
#include "compile_helpers.h"
#include "model_builder.h"

/* x -> Conv+Relu -> Conv, + the Relu's output (a tensor skipping a
 * kernel), -> Concat with x -> Conv -> y: kernels whose buffers overlap
 * in time, and an arc in the graph. */
static mb *small_net(void)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "1,4,8,8");
	float w1[8 * 4 * 9], w2[8 * 8], w3[3 * 12];
	for (int i = 0; i < 8 * 4 * 9; i++)
		w1[i] = (float)((i * 29) % 17 - 8) / 32.0f;
	for (int i = 0; i < 8 * 8; i++)
		w2[i] = (float)((i * 13) % 11 - 5) / 16.0f;
	for (int i = 0; i < 3 * 12; i++)
		w3[i] = (float)((i * 7) % 9 - 4) / 8.0f;
	mb_init_floats(b, g, "w1", "8,4,3,3", w1, 8 * 4 * 9);
	mb_init_floats(b, g, "w2", "8,8,1,1", w2, 8 * 8);
	mb_init_floats(b, g, "w3", "3,12,1,1", w3, 3 * 12);
	Onnx__NodeProto *n = mb_node(b, g, "Conv", "conv<1>", "x,w1", "c1");
	mb_attr_ints(b, n, "pads", (const int64_t[]){ 1, 1, 1, 1 }, 4);
	mb_node(b, g, "Relu", "relu1", "c1", "y1");
	mb_node(b, g, "Conv", "conv2", "y1,w2", "c2");
	mb_node(b, g, "Add", "add2", "c2,y1", "y2");
	mb_node(b, g, "Sigmoid", "gate", "y2", "y3");
	mb_attr_int(b, mb_node(b, g, "Concat", "cat", "y3,x", "cat"), "axis", 1);
	mb_node(b, g, "Conv", "conv3", "cat,w3", "y");
	mb_output(b, g, "y");
	return b;
}

typedef struct {
	char *tmp, *model;
} fixture;

static fixture setup(void)
{
	fixture f = { make_temp_dir(), NULL };
	f.model = save_model(small_net(), f.tmp, "net.onnx");
	return f;
}

static void teardown(fixture *f)
{
	rm_tree(f->tmp);
	free(f->tmp);
	free(f->model);
}

static void report_opts(mc_compile_opts *o, const char *name)
{
	mc_compile_opts_init(o);
	o->name = name;
	o->report = true;
	o->no_stack_usage = true;
}

/* The number in `attr="N"` of the page; cr fails where it is missing or
 * there twice (one figure for the tests to check). */
static size_t attr_number(const char *html, const char *attr)
{
	char pat[128];
	snprintf(pat, sizeof pat, "%s=\"", attr);
	const char *at = strstr(html, pat);
	cr_assert_not_null(at, "the report has no %s", attr);
	cr_assert_null(strstr(at + 1, pat), "the report has %s twice", attr);
	return (size_t)strtoull(at + strlen(pat), NULL, 10);
}

/* How many times needle is in text. */
static int count_of(const char *text, const char *needle)
{
	int n = 0;
	for (const char *at = strstr(text, needle); at; at = strstr(at + 1, needle))
		n++;
	return n;
}

/* NAME_ARENA_BYTES of dir/NAME.h */
static size_t header_arena(const char *dir, const char *name)
{
	char file[256], macro[256];
	snprintf(file, sizeof file, "%s.h", name);
	size_t i = 0;
	for (; name[i]; i++)
		macro[i] = name[i] >= 'a' && name[i] <= 'z' ? (char)(name[i] - 32) : name[i];
	snprintf(macro + i, sizeof macro - i, "_ARENA_BYTES ");
	char *h = read_file_in(dir, file, NULL);
	cr_assert_not_null(h);
	const char *at = strstr(h, macro);
	cr_assert_not_null(at, "%s has no %s", file, macro);
	size_t v = (size_t)strtoull(at + strlen(macro), NULL, 10);
	free(h);
	return v;
}

/* Every `static int NAME_kN_...(` of NAME.c appears in the report as a
 * drawn kernel (data-kernel) and a table row (id); their count. */
static int check_kernels_named(const char *c_src, const char *html, const char *name)
{
	char head[128];
	snprintf(head, sizeof head, "\nstatic int %s_k", name);
	int n = 0;
	for (const char *at = strstr(c_src, head); at; at = strstr(at + 1, head)) {
		const char *fn = at + strlen("\nstatic int ");
		size_t len = strcspn(fn, "(");
		char drawn[512], row[512];
		snprintf(drawn, sizeof drawn, "data-kernel=\"%.*s\"", (int)len, fn);
		snprintf(row, sizeof row, "<tr id=\"%.*s\"", (int)len, fn);
		cr_assert_not_null(strstr(html, drawn), "the report does not draw %.*s", (int)len, fn);
		cr_assert_not_null(strstr(html, row), "the report's table has no row for %.*s", (int)len, fn);
		n++;
	}
	return n;
}

Test(report, names_every_kernel_and_reaches_the_arena)
{
	fixture f = setup();
	char dir[4200];
	snprintf(dir, sizeof dir, "%s/out", f.tmp);
	mc_compile_opts o;
	report_opts(&o, "rep");
	cr_assert_eq(mc_compile(f.model, dir, &o), 0);
	char *html = read_file_in(dir, "rep_report.html", NULL), *c_src = read_file_in(dir, "rep.c", NULL);
	cr_assert_not_null(html, "no rep_report.html");
	cr_assert_not_null(c_src);
	int kernels = check_kernels_named(c_src, html, "rep");
	cr_assert_geq(kernels, 3, "%d kernels in rep.c", kernels);
	cr_assert_eq(attr_number(html, "data-kernels"), (size_t)kernels, "a box per kernel function");
	size_t arena = header_arena(dir, "rep");
	cr_assert_gt(arena, 0);
	cr_assert_eq(attr_number(html, "data-arena-bytes"), arena, "the timeline's top is REP_ARENA_BYTES");
	/* the node names, escaped; the nodes fused into one kernel listed together */
	cr_assert_not_null(strstr(html, "conv&lt;1&gt;"));
	cr_assert_null(strstr(html, "conv<1>"));
	cr_assert_not_null(strstr(html, "Conv + Relu"), "conv<1> and relu1 are one kernel");
	/* the tensors between boxes: x into the first kernel and, past the
	 * ones between, into the Concat's; y into the outputs */
	int x_edges = count_of(html, "<title>x</title></path>");
	cr_assert_eq(x_edges, 2, "%d edges carry x", x_edges);
	cr_assert_not_null(strstr(html, "<title>y</title></path>"), "no edge into the outputs");
	free(html);
	free(c_src);
	teardown(&f);
}

Test(report, one_timeline_per_pool_summing_to_the_arena)
{
	fixture f = setup();
	char dir[4200];
	snprintf(dir, sizeof dir, "%s/pools", f.tmp);
	mc_compile_opts o;
	report_opts(&o, "pl");
	o.pools[0] = "fast:1K";
	o.pools[1] = "slow";
	o.n_pools = 2;
	cr_assert_eq(mc_compile(f.model, dir, &o), 0);
	char *html = read_file_in(dir, "pl_report.html", NULL);
	cr_assert_not_null(html);
	cr_assert_eq(count_of(html, "<svg class=\"timeline\""), 2);
	cr_assert_not_null(strstr(html, "pool 0 'fast'"));
	cr_assert_eq(attr_number(html, "data-arena-bytes"), header_arena(dir, "pl"));
	free(html);
	teardown(&f);
}

/* Self-contained and reproducible: no script, nothing fetched, no path
 * of this machine; the same bytes from another output directory. */
Test(report, fetches_nothing_and_is_the_same_anywhere)
{
	fixture f = setup();
	char a[4200], b[4200];
	snprintf(a, sizeof a, "%s/a", f.tmp);
	snprintf(b, sizeof b, "%s/deeper/b", f.tmp);
	mc_compile_opts o;
	report_opts(&o, "same");
	cr_assert_eq(mc_compile(f.model, a, &o), 0);
	cr_assert_eq(mc_compile(f.model, b, &o), 0);
	size_t na, nb;
	char *ha = read_file_in(a, "same_report.html", &na), *hb = read_file_in(b, "same_report.html", &nb);
	cr_assert(ha && hb);
	cr_assert(na == nb && !memcmp(ha, hb, na), "the report depends on where it is written");
	const char *banned[] = { "<script", "http:", "https:", "src=", "@import", "<link", "<img", "<iframe",
	                         f.tmp };
	for (size_t i = 0; i < sizeof banned / sizeof *banned; i++)
		cr_assert_null(strstr(ha, banned[i]), "the report holds '%s'", banned[i]);
	for (const char *u = strstr(ha, "url("); u; u = strstr(u + 1, "url("))
		cr_assert_eq(u[4], '#', "a url() that is not of this page");
	free(ha);
	free(hb);
	teardown(&f);
}

Test(report, gives_the_profiles_times)
{
	fixture f = setup();
	char dir[4200], prof[4200];
	snprintf(dir, sizeof dir, "%s/prof", f.tmp);
	mc_compile_opts o;
	report_opts(&o, "pr");
	cr_assert_eq(mc_compile(f.model, dir, &o), 0); /* for the kernels' names */
	char *c_src = read_file_in(dir, "pr.c", NULL);
	const char *fn = strstr(c_src, "\nstatic int pr_k0_");
	cr_assert_not_null(fn);
	fn += strlen("\nstatic int pr_");
	snprintf(prof, sizeof prof, "%s/times.tsv", f.tmp);
	char text[600];
	/* by the kernel's own name and by its function's, one matching nothing */
	int n = snprintf(text, sizeof text, "# kernel us\n%.*s\t12.25\npr_%.*s 30.25\nm_k99_gone 1\n",
	                 (int)strcspn(fn, "("), fn, (int)strcspn(fn, "("), fn);
	cr_assert_eq(write_file(prof, text, (size_t)n), 0);
	o.report_profile = prof;
	cr_assert_eq(mc_compile(f.model, dir, &o), 0);
	char *html = read_file_in(dir, "pr_report.html", NULL);
	cr_assert_not_null(html);
	cr_assert_not_null(strstr(html, "<td>42.5</td><td>100.0</td>"), "k0's time, both lines added");
	cr_assert_not_null(strstr(html, "(1 name in it matched no kernel)"));
	free(html);
	free(c_src);
	teardown(&f);
}

/* A compile that fails after emission (an unreadable profile) commits
 * nothing: neither the report nor the sources beside it. */
Test(report, a_failed_compile_leaves_no_report)
{
	fixture f = setup();
	char dir[4200], missing[4200];
	snprintf(dir, sizeof dir, "%s/fail", f.tmp);
	snprintf(missing, sizeof missing, "%s/no-such-profile", f.tmp);
	mc_compile_opts o;
	report_opts(&o, "fl");
	o.report_profile = missing;
	diag_capture();
	cr_assert_eq(mc_compile(f.model, dir, &o), -1);
	cr_assert_eq(diag_count_with("--report-profile"), 1, "%s", diag_all());
	char path[4300];
	snprintf(path, sizeof path, "%s/fl_report.html", dir);
	cr_assert_neq(access(path, F_OK), 0, "a report was left");
	snprintf(path, sizeof path, "%s/fl.c", dir);
	cr_assert_neq(access(path, F_OK), 0, "sources were left");
	/* and without --report, no page */
	report_opts(&o, "fl");
	o.report = false;
	cr_assert_eq(mc_compile(f.model, dir, &o), 0);
	snprintf(path, sizeof path, "%s/fl_report.html", dir);
	cr_assert_neq(access(path, F_OK), 0);
	teardown(&f);
}

/* An output that is the input itself: a copy kernel writes it, and the
 * graph draws it flowing from the inputs through that kernel out. */
Test(report, draws_a_copied_output)
{
	mb *m = mb_new(13);
	Onnx__GraphProto *g = mb_main(m);
	mb_input(m, g, "x", MC_FLOAT, "1,4");
	mb_node(m, g, "Relu", "relu", "x", "y");
	mb_output(m, g, "y");
	mb_output(m, g, "x");
	char *tmp = make_temp_dir(), *model = save_model(m, tmp, "copy.onnx"), dir[4200];
	snprintf(dir, sizeof dir, "%s/out", tmp);
	mc_compile_opts o;
	report_opts(&o, "cp");
	cr_assert_eq(mc_compile(model, dir, &o), 0);
	char *html = read_file_in(dir, "cp_report.html", NULL), *c_src = read_file_in(dir, "cp.c", NULL);
	cr_assert(html && c_src);
	cr_assert_eq(check_kernels_named(c_src, html, "cp"), 2);
	cr_assert_not_null(strstr(html, "(copy into a graph output)"));
	int x_edges = count_of(html, "<title>x</title></path>");
	/* into the Relu's kernel, into the copy, out of the copy */
	cr_assert_eq(x_edges, 3, "%d edges carry x", x_edges);
	free(html);
	free(c_src);
	rm_tree(tmp);
	free(tmp);
	free(model);
}
