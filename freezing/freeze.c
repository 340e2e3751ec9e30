/* The freezing driver: runs the passes to a fixed point, times them,
 * dumps the graph between them; and the graph's text dump. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "graph_edit.h"

const mc_pass mc_freeze_passes[] = {
	{"quantize", mc_pass_quantize},
	{"fold", mc_pass_fold},
	{"unroll", mc_pass_unroll},
	{"bn", mc_pass_fold_bn},
	{"pad", mc_pass_fold_pad},
	{"patterns", mc_pass_patterns},
	{"identity", mc_pass_identity},
	{"cse", mc_pass_cse},
	{"dce", mc_pass_dce},
	{NULL, NULL},
};

bool mc_freeze_pass_known(const char *name)
{
	for (const mc_pass *p = mc_freeze_passes; p->name; p++)
		if (!strcmp(p->name, name))
			return true;
	return !strcmp(name, "layout");
}

/* Rounds of every pass; each round that changes something may enable more
 * (a folded weight lets BN fold; a removed Identity lets CSE merge). */
#define MAX_ROUNDS 8

int mc_graph_node_count(const mc_graph *g)
{
	int count = g->n_nodes;
	for (int i = 0; i < g->n_nodes; i++)
		for (int a = 0; a < g->nodes[i].n_attrs; a++)
			if (g->nodes[i].attrs[a].g)
				count += mc_graph_node_count(g->nodes[i].attrs[a].g);
	return count;
}

/* ---- dump ---- */

static void indent(FILE *f, int depth)
{
	for (int i = 0; i < depth; i++)
		fputs("    ", f);
}

static void type_str(const mc_value *v, char *buf, size_t n)
{
	char shape[256];
	if (!v->typed)
		snprintf(buf, n, "%s ?", mc_dtype_name(v->dtype));
	else
		snprintf(buf, n, "%s %s", mc_dtype_name(v->dtype),
		         mc_shape_str(&v->shape, shape, sizeof shape));
}

/* The first few elements of a tensor. */
static void print_values(FILE *f, const mc_tensor *t, size_t max)
{
	if (!mc_dtype_supported(t->dtype) || t->dtype == MC_STRING) {
		fputs(" [...]", f);
		return;
	}
	fputs(" [", f);
	for (size_t i = 0; i < t->numel && i < max; i++) {
		if (i)
			fputs(", ", f);
		if (mc_dtype_is_float(t->dtype))
			fprintf(f, "%.6g", mc_get_f(t, i));
		else
			fprintf(f, "%lld", (long long)mc_get_i(t, i));
	}
	fputs(t->numel > max ? ", ...]" : "]", f);
}

static void print_attr(FILE *f, const mc_attr *a)
{
	char shape[256];
	fprintf(f, "%s=", a->name);
	switch (a->type) {
	case MC_ATTR_FLOAT: fprintf(f, "%.9g", a->f); break;
	case MC_ATTR_INT: fprintf(f, "%lld", (long long)a->i); break;
	case MC_ATTR_STRING: fprintf(f, "\"%s\"", a->s ? a->s : ""); break;
	case MC_ATTR_TENSOR:
		if (a->t) {
			fprintf(f, "tensor<%s %s>", mc_dtype_name(a->t->dtype),
			        mc_shape_str(&a->t->shape, shape, sizeof shape));
			print_values(f, a->t, 4);
		}
		break;
	case MC_ATTR_GRAPH: fprintf(f, "graph<%s>", a->g && a->g->name ? a->g->name : ""); break;
	case MC_ATTR_FLOATS:
	case MC_ATTR_INTS:
	case MC_ATTR_STRINGS:
		fputc('[', f);
		for (size_t i = 0; i < a->n && i < 32; i++) {
			if (i)
				fputs(", ", f);
			if (a->type == MC_ATTR_FLOATS)
				fprintf(f, "%.9g", a->floats[i]);
			else if (a->type == MC_ATTR_INTS)
				fprintf(f, "%lld", (long long)a->ints[i]);
			else
				fprintf(f, "\"%s\"", a->strings[i]);
		}
		fputs(a->n > 32 ? ", ...]" : "]", f);
		break;
	default: fputs("?", f); break;
	}
}

static void print_value_list(FILE *f, const mc_graph *g, const int *vals, int count)
{
	for (int k = 0; k < count; k++) {
		if (k)
			fputs(", ", f);
		if (vals[k] < 0)
			fputs("_", f);
		else
			fprintf(f, "%%%s", g->values[vals[k]].name);
	}
}

static void dump_graph(const mc_graph *g, FILE *f, int depth);

static void dump_node(const mc_graph *g, const mc_node *n, FILE *f, int depth)
{
	char type[512];
	indent(f, depth);
	print_value_list(f, g, n->outputs, n->n_outputs);
	fprintf(f, " = %s%s%s(", n->domain, n->domain[0] ? "." : "", n->op_type);
	print_value_list(f, g, n->inputs, n->n_inputs);
	fputc(')', f);
	if (n->n_attrs) {
		fputs(" {", f);
		for (int a = 0; a < n->n_attrs; a++) {
			if (a)
				fputs(", ", f);
			print_attr(f, &n->attrs[a]);
		}
		fputc('}', f);
	}
	if (n->n_implicit) {
		fputs(" captures(", f);
		print_value_list(f, g, n->implicit, n->n_implicit);
		fputc(')', f);
	}
	fputs("  :", f);
	for (int k = 0; k < n->n_outputs; k++) {
		if (n->outputs[k] < 0)
			continue;
		type_str(&g->values[n->outputs[k]], type, sizeof type);
		fprintf(f, "%s %s", k ? "," : "", type);
	}
	fputc('\n', f);
	for (int a = 0; a < n->n_attrs; a++)
		if (n->attrs[a].g) {
			indent(f, depth + 1);
			fprintf(f, "%s:\n", n->attrs[a].name);
			dump_graph(n->attrs[a].g, f, depth + 2);
		}
}

static void dump_graph(const mc_graph *g, FILE *f, int depth)
{
	char type[512];
	indent(f, depth);
	fprintf(f, "graph '%s': %d inputs, %d outputs, %d nodes\n", g->name ? g->name : "",
	        g->n_inputs, g->n_outputs, g->n_nodes);
	for (int i = 0; i < g->n_inputs; i++) {
		type_str(&g->values[g->inputs[i]], type, sizeof type);
		indent(f, depth);
		fprintf(f, "input %%%s : %s\n", g->values[g->inputs[i]].name, type);
	}
	/* constants and captures that something reads, in value order */
	int *uses = ge_use_counts(g);
	for (int v = 0; v < g->n_values; v++) {
		const mc_value *val = &g->values[v];
		if (!uses[v] || (val->kind != MC_VAL_CONST && val->kind != MC_VAL_CAPTURED))
			continue;
		type_str(val, type, sizeof type);
		indent(f, depth);
		if (val->kind == MC_VAL_CAPTURED) {
			fprintf(f, "capture %%%s : %s\n", val->name, type);
			continue;
		}
		fprintf(f, "const %%%s : %s (%zu bytes)", val->name, type,
		        val->konst ? val->konst->nbytes : 0);
		if (val->konst)
			print_values(f, val->konst, 6);
		fputc('\n', f);
	}
	free(uses);
	for (int i = 0; i < g->n_nodes; i++)
		dump_node(g, &g->nodes[i], f, depth);
	for (int i = 0; i < g->n_outputs; i++) {
		type_str(&g->values[g->outputs[i]], type, sizeof type);
		indent(f, depth);
		fprintf(f, "output %%%s : %s\n", g->values[g->outputs[i]].name, type);
	}
}

void mc_graph_dump(const mc_graph *g, FILE *f)
{
	dump_graph(g, f, 0);
}

/* ---- driver ---- */

static int dump_file(const mc_graph *g, const mc_freeze_opts *o, int seq, const char *what)
{
	const char *dir = o->dump_dir && *o->dump_dir ? o->dump_dir : ".";
	if (mc_mkdir_p(dir, "dump directory"))
		return -1;
	size_t len = strlen(dir) + strlen(what) + 32;
	char *path = mc_xmalloc(len);
	snprintf(path, len, "%s/%02d-%s.txt", dir, seq, what);
	FILE *f = fopen(path, "w");
	int rc = 0;
	if (!f) {
		mc_error("cannot write graph dump '%s': %s", path, strerror(errno));
		rc = -1;
	} else {
		mc_graph_dump(g, f);
		if (ferror(f) | fclose(f)) {
			mc_error("cannot write graph dump '%s': write failed", path);
			rc = -1;
		}
	}
	free(path);
	return rc;
}

static bool dumps_after(const mc_freeze_opts *o, const char *pass)
{
	return o->dump_after && (strcmp(o->dump_after, "all") == 0 ||
	                         strcmp(o->dump_after, pass) == 0);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Runs one pass: timing, stats and dump. Its changes, or -1. */
static int run_pass(mc_graph *g, const mc_freeze_opts *o, const mc_pass *p, int *seq)
{
	int before = mc_graph_node_count(g);
	double t0 = now_ms();
	/* the fold cap is reported once, after the last round */
	int rc = p->run == mc_pass_fold ? freeze_fold(g, o, false) : p->run(g, o);
	double ms = now_ms() - t0;
	if (rc < 0)
		return -1;
	/* the layout pass is reported where it converted something */
	if (p->run == mc_pass_layout && !rc)
		return 0;
	(*seq)++;
	if (o->stats)
		fprintf(o->stats, "freeze: %-9s %9.3f ms  %d -> %d nodes\n", p->name, ms, before,
		        mc_graph_node_count(g));
	if (dumps_after(o, p->name) && dump_file(g, o, *seq, p->name))
		return -1;
	return rc;
}

/* After the fixed point: the layout, then what it leaves behind (unused
 * transposes, no-op ones, duplicates). */
static const mc_pass layout_passes[] = {
	{"layout", mc_pass_layout},
	{"identity", mc_pass_identity},
	{"cse", mc_pass_cse},
	{"dce", mc_pass_dce},
	{NULL, NULL},
};

int mc_freeze(mc_graph *g, const mc_freeze_opts *opts)
{
	mc_freeze_opts o = opts ? *opts : (mc_freeze_opts){0};
	o.fold_limit = freeze_fold_limit(opts);
	int seq = 0;
	if (o.dump_after && dump_file(g, &o, seq, "input"))
		return -1;
	for (int round = 0; round < MAX_ROUNDS; round++) {
		int changes = 0;
		for (const mc_pass *p = mc_freeze_passes; p->name; p++) {
			if (o.no_quantize && p->run == mc_pass_quantize)
				continue;
			int rc = run_pass(g, &o, p, &seq);
			if (rc < 0)
				return -1;
			changes += rc;
		}
		if (!changes)
			break;
	}
	if (o.quantized_io && mc_quantized_io(g) > 0)
		for (const mc_pass *p = layout_passes + 1; p->name; p++)
			if (run_pass(g, &o, p, &seq) < 0)
				return -1;
	int rc = run_pass(g, &o, &layout_passes[0], &seq);
	for (const mc_pass *p = layout_passes + 1; rc > 0 && p->name; p++)
		if (run_pass(g, &o, p, &seq) < 0)
			return -1;
	if (rc < 0)
		return -1;
	freeze_fold_report(g, &o);
	return 0;
}
