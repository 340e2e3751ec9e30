/* modelc compile --report: NAME_report.html, a picture of what the compile
 * did (X-CUBE-AI's analyze, TFLM's PrintMemoryPlan): the totals of
 * NAME.json, the fused kernels in run order with the tensors between them,
 * a table per kernel, and the memory plan as a timeline. One file, inline
 * CSS and SVG, no script and no URL: it opens from a firmware build's
 * artifacts anywhere. It draws the program's own map (mc_program_map),
 * kept from the plan the code was emitted from, never a second plan. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"

/* ---- text ---- */

static void html_text(mc_strbuf *b, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '<': mc_sb_puts(b, "&lt;"); break;
		case '>': mc_sb_puts(b, "&gt;"); break;
		case '&': mc_sb_puts(b, "&amp;"); break;
		case '"': mc_sb_puts(b, "&quot;"); break;
		default:
			/* control bytes are not text (XML refuses them in SVG) */
			mc_sb_printf(b, "%c", (unsigned char)*s < 0x20 ? ' ' : *s);
		}
	}
}

/* s in at most about max bytes: its start and its end around an ellipsis
 * where longer (exported graphs' names run to a hundred characters, their
 * prefix shared, their end telling them apart); never cut inside a UTF-8
 * sequence. */
static void html_short(mc_strbuf *b, const char *s, size_t max)
{
	size_t n = strlen(s);
	if (n <= max || max < 8) {
		html_text(b, s);
		return;
	}
	size_t head = max / 3, tail = n - (max - head - 1);
	while (head > 0 && ((unsigned char)s[head] & 0xc0) == 0x80)
		head--;
	while (tail < n && ((unsigned char)s[tail] & 0xc0) == 0x80)
		tail++;
	char *cut = mc_xmalloc(head + 1);
	memcpy(cut, s, head);
	cut[head] = 0;
	html_text(b, cut);
	mc_sb_puts(b, "\xe2\x80\xa6");
	html_text(b, s + tail);
	free(cut);
}

/* 1234567 as "1,234,567": byte counts read at a glance */
static void grouped(mc_strbuf *b, double x)
{
	char digits[64];
	snprintf(digits, sizeof digits, "%.0f", x);
	size_t n = strlen(digits);
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && (n - i) % 3 == 0)
			mc_sb_puts(b, ",");
		mc_sb_printf(b, "%c", digits[i]);
	}
}

/* 55296 as "54.0 KiB" */
static void human_bytes(mc_strbuf *b, double x)
{
	const char *unit[] = { "B", "KiB", "MiB", "GiB" };
	int u = 0;
	while (x >= 1024 && u < 3) {
		x /= 1024;
		u++;
	}
	if (u == 0)
		mc_sb_printf(b, "%.0f B", x);
	else
		mc_sb_printf(b, "%.1f %s", x, unit[u]);
}

static void human_count(mc_strbuf *b, double x)
{
	if (x >= 1e9)
		mc_sb_printf(b, "%.2f G", x / 1e9);
	else if (x >= 1e6)
		mc_sb_printf(b, "%.2f M", x / 1e6);
	else if (x >= 1e3)
		mc_sb_printf(b, "%.1f k", x / 1e3);
	else
		mc_sb_printf(b, "%.0f", x);
}

/* ---- per-kernel figures ---- */

typedef struct {
	size_t read, written;   /* bytes of the buffers it loads from and stores into */
	double us;              /* time a run from the profile; < 0: none */
} kernel_figures;

/* Bytes a kernel moves: every buffer with a place (arena, weight, input,
 * output) at its stored size, counted as written where the kernel stores
 * into it, else as read. */
static void kernel_bytes(const mc_kernel *k, kernel_figures *f)
{
	for (int i = 0; i < k->n_bufs; i++) {
		const mc_kbuf *kb = &k->bufs[i];
		if (kb->loc.kind == MC_LOC_NONE || kb->transient)
			continue;
		size_t bytes = mc_kbuf_storage_count(kb) * mc_dtype_size(kb->dtype);
		if (kb->written)
			f->written += bytes;
		else
			f->read += bytes;
	}
}

/* The kernel a profile's line names, by its own name (k3_conv) or its
 * function's (NAME_k3_conv); -1 for none. */
static int kernel_named(const mc_program *p, const char *prefix, const char *name)
{
	size_t np = strlen(prefix);
	bool prefixed = strncmp(name, prefix, np) == 0 && name[np] == '_';
	for (int i = 0; i < p->n_kernels; i++)
		if (!strcmp(name, p->kernels[i]->name) || (prefixed && !strcmp(name + np + 1, p->kernels[i]->name)))
			return i;
	return -1;
}

/* --report-profile FILE: lines "KERNEL MICROSECONDS" (bench/profile
 * --times writes them), '#' comments; a kernel named twice adds up.
 * *unmatched counts names of no kernel (a profile of other options). */
static int read_profile(const mc_program *p, const char *prefix, const char *path, kernel_figures *f,
                        int *unmatched)
{
	FILE *in = fopen(path, "r");
	if (!in)
		return mc_error("--report-profile: cannot read '%s': %s", path, strerror(errno)), -1;
	char line[1024], name[512];
	int lineno = 0, rc = 0;
	*unmatched = 0;
	while (!rc && fgets(line, sizeof line, in)) {
		lineno++;
		double us;
		char *s = line + strspn(line, " \t");
		if (*s == '#' || *s == '\n' || !*s)
			continue;
		if (sscanf(s, "%511s %lf", name, &us) != 2 || !(us >= 0 && us < 1e15)) { /* NaN too */
			mc_error("--report-profile %s:%d: expected a kernel's name and its microseconds", path, lineno);
			rc = -1;
			break;
		}
		int k = kernel_named(p, prefix, name);
		if (k < 0) {
			(*unmatched)++;
			continue;
		}
		f[k].us = (f[k].us < 0 ? 0 : f[k].us) + us;
	}
	fclose(in);
	if (!rc && *unmatched)
		mc_warn("--report-profile %s: %d kernel name%s not in this program (profiled with other options?)",
		        path, *unmatched, *unmatched == 1 ? "" : "s");
	return rc;
}

/* ---- the page ---- */

static const char style[] =
	"body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:20px 28px;color:#1d2330;"
	"background:#fbfbfd}\n"
	"h1{font-size:22px;margin:0 0 2px}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #d8dce6;"
	"padding-bottom:4px}\n"
	".sub{color:#5b6478;margin:0 0 14px;font-size:13px}code{font:12px ui-monospace,Menlo,Consolas,monospace}\n"
	".cards{display:flex;flex-wrap:wrap;gap:10px}.card{background:#fff;border:1px solid #d8dce6;"
	"border-radius:6px;padding:8px 14px;min-width:150px}\n"
	".card b{display:block;font-size:19px}.card span{color:#5b6478;font-size:12px}\n"
	".note{color:#5b6478;font-size:12px;margin:4px 0}\n"
	".cols{display:flex;gap:20px;align-items:flex-start}.cols>div{min-width:0}.cols>div+div{overflow-x:auto}\n"
	".cols>div:first-child{flex:0 0 auto;width:542px}\n"
	"table.k{border-collapse:collapse;background:#fff;font-size:11px}table.k code{font-size:11px}\n"
	"table.k th,table.k td{border:1px solid #e1e4ec;padding:2px 6px;text-align:right;vertical-align:top}\n"
	"table.k th{background:#eef0f5}table.k .l{text-align:left}\n"
	"table.k tr:target{background:#fff3c4}table.k tfoot td{font-weight:600;background:#f4f5f8}\n"
	"svg{background:#fff;border:1px solid #d8dce6;border-radius:6px}\n"
	"svg text{font:11px ui-monospace,Menlo,Consolas,monospace;fill:#1d2330}\n"
	"svg .kn{font-weight:700;fill:#1f3f8f}svg .ax{fill:#5b6478}\n"
	"svg .box{fill:#f6f8ff;stroke:#4a68c0;stroke-width:1.2}svg .io{fill:#f3faf3;stroke:#3b8a3e}\n"
	"svg .e{fill:none;stroke:#8893ad;stroke-width:1}svg a:hover .box{fill:#e4eaff}\n"
	"svg .buf{stroke:#fff;stroke-width:.5}svg .buf:hover{stroke:#000;stroke-width:1.5}\n"
	"svg .peak{stroke:#c0392b;stroke-width:1.5;stroke-dasharray:5 3}svg .top{stroke:#c0392b;stroke-width:1.5}\n"
	"svg .lb{stroke:#7f8c8d;stroke-dasharray:2 3}svg .grid{stroke:#eceef3}\n";

/* NAME_ARENA_BYTES as the header spells it */
static void arena_macro(char *out, size_t n, const char *name)
{
	char up[256];
	snprintf(out, n, "%s_ARENA_BYTES", mc_name_upper(name, up, sizeof up));
}

/* the kernel's function in NAME.c (NAME.cu, NAME.o): what a reader finds there */
static void kernel_fn(mc_strbuf *b, const mc_compile_opts *o, const mc_kernel *k)
{
	html_text(b, o->name);
	mc_sb_puts(b, "_");
	html_text(b, k->name);
}

static void card(mc_strbuf *b, const char *what, double bytes, bool known, const char *note)
{
	mc_sb_puts(b, "<div class=\"card\"><span>");
	html_text(b, what);
	mc_sb_puts(b, "</span><b>");
	if (known)
		human_bytes(b, bytes);
	else
		mc_sb_puts(b, "&mdash;");
	mc_sb_puts(b, "</b><span>");
	if (known) {
		grouped(b, bytes);
		mc_sb_puts(b, " bytes");
	}
	if (note && *note) {
		mc_sb_puts(b, known ? "; " : "");
		html_text(b, note);
	}
	mc_sb_puts(b, "</span></div>\n");
}

static void totals(mc_strbuf *b, const mc_program *p, const mc_compile_opts *o, const mc_stack_usage *stack,
                   const mc_flash *flash)
{
	mc_sb_puts(b, "<h2>Totals</h2>\n<div class=\"cards\">\n");
	char note[600];
	snprintf(note, sizeof note, "code %.1f KiB + constants %.1f KiB", flash->code_bytes / 1024.0,
	         flash->const_bytes / 1024.0);
	card(b, "flash (code + weights)", (double)flash->total_bytes, flash->sized, flash->sized ? note : flash->why);
	arena_macro(note, sizeof note, o->name);
	card(b, "arena (RAM)", (double)p->arena_bytes, true, note);
	card(b, "arena lower bound", (double)p->lower_bound, true, "most bytes live at one step");
	bool bounded = stack->measured && stack->bound.bounded;
	card(b, "stack of the run", (double)stack->bound.bytes, bounded,
	     bounded ? stack->compiler : stack->measured ? stack->bound.why : stack->note);
	card(b, "weights", (double)p->weight_bytes, true, "");
	mc_sb_puts(b, "<div class=\"card\"><span>MACs of one run</span><b>");
	human_count(b, p->macs);
	mc_sb_puts(b, "</b><span>");
	grouped(b, p->macs);
	mc_sb_printf(b, "</span></div>\n<div class=\"card\"><span>kernels</span><b>%d</b><span>%d weight arrays</span>"
	             "</div>\n</div>\n", p->n_kernels, p->n_weights);
	if (flash->sized) {
		mc_sb_puts(b, "<p class=\"note\">flash measured from ");
		html_text(b, flash->from);
		mc_sb_puts(b, "</p>\n");
	}
}

/* ---- the graph: one column of kernel boxes, in run order ---- */

#define BOX_X 12
#define BOX_W 340
#define LINE_H 15
#define GAP 18
#define MAX_LINES 10

typedef struct {
	int n;                   /* boxes: inputs, the kernels, outputs */
	double *y, *h;
} column;

/* Box i of the column: 0 the inputs, 1..n_kernels the kernels, then the outputs. */
static int box_lines(const mc_program *p, int i)
{
	const mc_program_map *m = p->map;
	if (i == 0)
		return p->n_inputs;
	if (i == p->n_kernels + 1)
		return p->n_outputs;
	int n = m->kernels[i - 1].n_nodes ? m->kernels[i - 1].n_nodes : 1;
	return n > MAX_LINES ? MAX_LINES : n;
}

static void io_line(mc_strbuf *b, const mc_io_desc *d)
{
	html_short(b, d->name, 28);
	mc_sb_printf(b, " %s[", mc_dtype_name(d->dtype));
	for (int k = 0; k < d->shape.rank; k++)
		mc_sb_printf(b, "%s%lld", k ? "," : "", (long long)d->shape.dims[k]);
	mc_sb_puts(b, "]");
}

static void io_box(mc_strbuf *b, const column *c, int i, const char *what, const mc_io_desc *d, int n)
{
	mc_sb_printf(b, "<rect class=\"box io\" x=\"%d\" y=\"%.0f\" width=\"%d\" height=\"%.0f\" rx=\"5\"/>\n"
	             "<text class=\"kn\" x=\"%d\" y=\"%.0f\">%s</text>\n", BOX_X, c->y[i], BOX_W, c->h[i],
	             BOX_X + 8, c->y[i] + 16, what);
	for (int j = 0; j < n; j++) {
		mc_sb_printf(b, "<text x=\"%d\" y=\"%.0f\">", BOX_X + 16, c->y[i] + 16 + LINE_H * (j + 1));
		io_line(b, &d[j]);
		mc_sb_puts(b, "</text>\n");
	}
}

static void kernel_box(mc_strbuf *b, const mc_program *p, const mc_compile_opts *o, const column *c, int s)
{
	const mc_kernel *k = p->kernels[s];
	const mc_map_kernel *mk = &p->map->kernels[s];
	int i = s + 1;
	mc_sb_puts(b, "<a href=\"#");
	kernel_fn(b, o, k);
	mc_sb_puts(b, "\"><title>");
	kernel_fn(b, o, k);
	mc_sb_puts(b, ": ");
	html_text(b, k->comment);
	mc_sb_printf(b, "</title>\n<rect class=\"box\" x=\"%d\" y=\"%.0f\" width=\"%d\" height=\"%.0f\" rx=\"5\"/>\n"
	             "<text class=\"kn\" x=\"%d\" y=\"%.0f\" data-kernel=\"", BOX_X, c->y[i], BOX_W, c->h[i],
	             BOX_X + 8, c->y[i] + 16);
	kernel_fn(b, o, k);
	mc_sb_puts(b, "\">");
	kernel_fn(b, o, k);
	mc_sb_puts(b, "</text>\n");
	int lines = box_lines(p, i);
	for (int j = 0; j < lines; j++) {
		mc_sb_printf(b, "<text x=\"%d\" y=\"%.0f\">", BOX_X + 16, c->y[i] + 16 + LINE_H * (j + 1));
		if (!mk->n_nodes)
			mc_sb_puts(b, "(copy into a graph output)");
		else if (j == MAX_LINES - 1 && mk->n_nodes > MAX_LINES)
			mc_sb_printf(b, "\xe2\x80\xa6 %d more nodes", mk->n_nodes - j);
		else {
			html_text(b, mk->nodes[j].op_type);
			mc_sb_puts(b, " ");
			/* the line within the box: about 46 characters of 11px monospace */
			size_t op = strlen(mk->nodes[j].op_type);
			html_short(b, mk->nodes[j].name, op < 34 ? 46 - op : 12);
		}
		mc_sb_puts(b, "</text>\n");
	}
	mc_sb_puts(b, "</a>\n");
}

/* The tensors flowing from box `from` to box `to` (column indices), as
 * one edge: a short arrow between neighbours, else an arc on the right
 * whose width grows with the span, so that nested arcs stay apart. */
static void edge(mc_strbuf *b, const column *c, int from, int to, const char *names)
{
	double x = BOX_X + BOX_W;
	mc_sb_puts(b, "<path class=\"e\" marker-end=\"url(#arrow)\" d=\"");
	if (to == from + 1) {
		double cx = BOX_X + BOX_W / 2.0;
		mc_sb_printf(b, "M%.0f %.0fV%.0f", cx, c->y[from] + c->h[from], c->y[to] - 1);
	} else {
		double y0 = c->y[from] + c->h[from] / 2, y1 = c->y[to] + c->h[to] / 2;
		int span = to - from;
		double dx = 16 + 4.0 * (span < 40 ? span : 40);
		mc_sb_printf(b, "M%.0f %.0fC%.0f %.0f %.0f %.0f %.0f %.0f", x, y0, x + dx, y0, x + dx, y1, x + 1, y1);
	}
	mc_sb_puts(b, "\"><title>");
	html_text(b, names);
	mc_sb_puts(b, "</title></path>\n");
}

/* Edges into box `to`: from every box that wrote a tensor it reads
 * (writers[t]: the boxes that have written tensor t so far, a Concat's
 * slabs more than one), one edge per source box naming its tensors. */
typedef struct {
	int n, cap;
	int *box;
} box_list;

static void add_box(box_list *l, int box)
{
	for (int i = 0; i < l->n; i++)
		if (l->box[i] == box)
			return;
	l->box = mc_grow_array(l->box, &l->cap, l->n + 1, sizeof *l->box);
	l->box[l->n++] = box;
}

static void edges_into(mc_strbuf *b, const mc_program_map *m, const column *c, const box_list *writers,
                       const int *reads, int n_reads, int to)
{
	/* sources in column order: the same text for the same program */
	for (int from = 0; from < to; from++) {
		mc_strbuf names = { 0 };
		for (int r = 0; r < n_reads; r++) {
			const box_list *w = &writers[reads[r]];
			for (int j = 0; j < w->n; j++)
				if (w->box[j] == from) {
					mc_sb_puts(&names, names.len ? ", " : "");
					mc_sb_puts(&names, m->tensors[reads[r]].name);
				}
		}
		if (names.len)
			edge(b, c, from, to, names.data);
		mc_sb_free(&names);
	}
}

static void graph_edges(mc_strbuf *b, const mc_program *p, const column *c)
{
	const mc_program_map *m = p->map;
	box_list *writers = mc_xcalloc((size_t)m->n_tensors + 1, sizeof *writers);
	int *reads = mc_xcalloc((size_t)m->n_tensors + 1, sizeof(int));
	for (int t = 0; t < m->n_tensors; t++)
		if (m->tensors[t].where == MC_MAP_INPUT)
			add_box(&writers[t], 0);
	for (int s = 0; s < m->n_kernels; s++) {
		const mc_map_kernel *mk = &m->kernels[s];
		int n = 0;
		for (int j = 0; j < mk->n_touch; j++)
			if (!mk->touch[j].written)
				reads[n++] = mk->touch[j].tensor;
		edges_into(b, m, c, writers, reads, n, s + 1);
		for (int j = 0; j < mk->n_touch; j++)
			if (mk->touch[j].written)
				add_box(&writers[mk->touch[j].tensor], s + 1);
	}
	int n = 0;
	for (int t = 0; t < m->n_tensors; t++)
		if (m->tensors[t].where == MC_MAP_OUTPUT)
			reads[n++] = t;
	edges_into(b, m, c, writers, reads, n, c->n - 1);
	for (int t = 0; t < m->n_tensors; t++)
		free(writers[t].box);
	free(writers);
	free(reads);
}

static void graph(mc_strbuf *b, const mc_program *p, const mc_compile_opts *o)
{
	column c = { .n = p->n_kernels + 2 };
	c.y = mc_xcalloc((size_t)c.n, sizeof *c.y);
	c.h = mc_xcalloc((size_t)c.n, sizeof *c.h);
	double y = 10;
	for (int i = 0; i < c.n; i++) {
		c.y[i] = y;
		c.h[i] = 24 + LINE_H * box_lines(p, i);
		y += c.h[i] + GAP;
	}
	int width = BOX_X + BOX_W + 16 + 4 * 40 + 12;
	mc_sb_printf(b, "<svg id=\"graph\" width=\"%d\" height=\"%.0f\" "
	             "data-kernels=\"%d\">\n<defs><marker id=\"arrow\" viewBox=\"0 0 8 8\" refX=\"8\" refY=\"4\" "
	             "markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0 0L8 4L0 8z\" "
	             "fill=\"#8893ad\"/></marker></defs>\n", width, y, p->n_kernels);
	graph_edges(b, p, &c);
	io_box(b, &c, 0, "inputs", p->inputs, p->n_inputs);
	for (int s = 0; s < p->n_kernels; s++)
		kernel_box(b, p, o, &c, s);
	io_box(b, &c, c.n - 1, "outputs", p->outputs, p->n_outputs);
	mc_sb_puts(b, "</svg>\n");
	free(c.y);
	free(c.h);
}

/* ---- the table ---- */

static void ops_of(mc_strbuf *b, const mc_map_kernel *mk)
{
	if (!mk->n_nodes)
		mc_sb_puts(b, "copy into a graph output");
	for (int j = 0; j < mk->n_nodes; j++) {
		mc_sb_puts(b, j ? " + " : "");
		html_text(b, mk->nodes[j].op_type);
	}
}

static void table(mc_strbuf *b, const mc_program *p, const mc_compile_opts *o, const kernel_figures *f,
                  bool timed)
{
	double total_us = 0, macs = 0;
	size_t read = 0, written = 0;
	for (int s = 0; s < p->n_kernels; s++) {
		total_us += f[s].us > 0 ? f[s].us : 0;
		macs += p->map->kernels[s].macs;
		read += f[s].read;
		written += f[s].written;
	}
	mc_sb_puts(b, "<table class=\"k\" id=\"kernels\">\n<thead><tr><th>#</th><th class=\"l\">kernel</th><th class=\"l\">ops</th>"
	              "<th>MACs</th><th>read</th><th>written</th><th>moved</th>");
	if (timed)
		mc_sb_puts(b, "<th>&micro;s</th><th>%</th>");
	mc_sb_puts(b, "</tr></thead>\n<tbody>\n");
	for (int s = 0; s < p->n_kernels; s++) {
		const mc_map_kernel *mk = &p->map->kernels[s];
		mc_sb_puts(b, "<tr id=\"");
		kernel_fn(b, o, p->kernels[s]);
		mc_sb_printf(b, "\"><td>%d</td><td class=\"l\"><code>", s);
		kernel_fn(b, o, p->kernels[s]);
		mc_sb_puts(b, "</code></td><td class=\"l\" title=\"");
		for (int j = 0; j < mk->n_nodes; j++) {
			mc_sb_puts(b, j ? "; " : "");
			html_text(b, mk->nodes[j].name);
		}
		mc_sb_puts(b, "\">");
		ops_of(b, mk);
		mc_sb_puts(b, "</td><td>");
		grouped(b, mk->macs);
		mc_sb_puts(b, "</td><td>");
		grouped(b, (double)f[s].read);
		mc_sb_puts(b, "</td><td>");
		grouped(b, (double)f[s].written);
		mc_sb_puts(b, "</td><td>");
		grouped(b, (double)(f[s].read + f[s].written));
		mc_sb_puts(b, "</td>");
		if (timed && f[s].us >= 0)
			mc_sb_printf(b, "<td>%.1f</td><td>%.1f</td>", f[s].us, total_us > 0 ? 100 * f[s].us / total_us : 0);
		else if (timed)
			mc_sb_puts(b, "<td>&mdash;</td><td></td>");
		mc_sb_puts(b, "</tr>\n");
	}
	mc_sb_puts(b, "</tbody>\n<tfoot><tr><td></td><td class=\"l\">all</td><td></td><td>");
	grouped(b, macs);
	mc_sb_puts(b, "</td><td>");
	grouped(b, (double)read);
	mc_sb_puts(b, "</td><td>");
	grouped(b, (double)written);
	mc_sb_puts(b, "</td><td>");
	grouped(b, (double)(read + written));
	mc_sb_puts(b, "</td>");
	if (timed)
		mc_sb_printf(b, "<td>%.1f</td><td>100</td>", total_us);
	mc_sb_puts(b, "</tr></tfoot>\n</table>\n");
}

/* ---- the memory plan: a timeline per pool ---- */

#define TL_W 1280
#define TL_H 300
#define TL_L 86
#define TL_R 16
#define TL_T 24
#define TL_B 34

static size_t round_up(size_t x, size_t align)
{
	return align ? (x + align - 1) / align * align : x;
}

/* The pool's top as its buffers reach it (the highest byte any uses,
 * rounded to the arena's alignment as the plan rounds its size). */
static size_t pool_top(const mc_program *p, int pool)
{
	size_t top = 0;
	for (int i = 0; i < p->map->n_bufs; i++) {
		const mc_map_buf *mb = &p->map->bufs[i];
		if (mb->pool == pool && mb->bytes && mb->offset + mb->bytes > top)
			top = mb->offset + mb->bytes;
	}
	return round_up(top, p->arena_align);
}

/* 8 hues, by buffer index: neighbours in the plan differ */
static const char *const hues[] = { "#5b8def", "#f0a54a", "#53b883", "#d9689a", "#8e7cc3", "#4fb3bf",
	                                "#c9a227", "#e07060" };

static void timeline_buf(mc_strbuf *b, const mc_program *p, const mc_compile_opts *o, int i, double step_w,
                         double scale)
{
	const mc_map_buf *mb = &p->map->bufs[i];
	double x0 = TL_L + mb->first * step_w, x1 = TL_L + (mb->last + 1) * step_w;
	double y1 = TL_T + TL_H - (double)mb->offset * scale, y0 = y1 - (double)mb->bytes * scale;
	mc_sb_printf(b, "<rect class=\"buf\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
	             "<title>", x0, y0, x1 - x0 > 1 ? x1 - x0 : 1, y1 - y0 > 0.5 ? y1 - y0 : 0.5,
	             mb->scratch ? "#b8bec9" : hues[i % 8]);
	if (mb->scratch) {
		mc_sb_puts(b, "scratch of ");
		html_text(b, o->name);
		mc_sb_puts(b, "_");
	}
	html_text(b, mb->name);
	mc_sb_printf(b, ": %zu bytes at offset %zu, kernels %d..%d", mb->bytes, mb->offset, mb->first, mb->last);
	if (mb->inplace_of >= 0 && mb->offset == p->map->bufs[mb->inplace_of].offset) {
		mc_sb_puts(b, ", in place of ");
		html_text(b, p->map->bufs[mb->inplace_of].name);
	}
	mc_sb_puts(b, "</title></rect>\n");
}

static bool live_at(const mc_map_buf *mb, int pool, int s)
{
	return mb->pool == pool && mb->first <= s && s <= mb->last;
}

/* The step with the most bytes live in the pool, and those bytes; a
 * buffer that took over its source's storage at that step counts once
 * with it (the larger of the two), as it lies in the arena. */
static int peak_step(const mc_program *p, int pool, size_t *peak)
{
	const mc_program_map *m = p->map;
	int at = 0;
	*peak = 0;
	for (int s = 0; s < p->n_kernels; s++) {
		size_t live = 0;
		for (int i = 0; i < m->n_bufs; i++) {
			const mc_map_buf *mb = &m->bufs[i], *src = mb->inplace_of >= 0 ? &m->bufs[mb->inplace_of] : NULL;
			if (!live_at(mb, pool, s))
				continue;
			live += mb->bytes;
			if (src && live_at(src, pool, s) && src->offset == mb->offset)
				live -= mb->bytes < src->bytes ? mb->bytes : src->bytes;
		}
		if (live > *peak) {
			*peak = live;
			at = s;
		}
	}
	return at;
}

static void timeline_axes(mc_strbuf *b, const mc_program *p, size_t top, double step_w)
{
	for (int q = 0; q <= 4; q++) {
		double y = TL_T + TL_H - TL_H * q / 4.0;
		mc_sb_printf(b, "<line class=\"grid\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>"
		             "<text class=\"ax\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">", TL_L, TL_W - TL_R, y, y,
		             TL_L - 6, y + 4);
		human_bytes(b, (double)top * q / 4);
		mc_sb_puts(b, "</text>\n");
	}
	int every = 1;
	while (p->n_kernels / every > 24)
		every *= p->n_kernels / every > 60 ? 5 : 2;
	for (int s = 0; s < p->n_kernels; s += every)
		mc_sb_printf(b, "<text class=\"ax\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n",
		             TL_L + (s + 0.5) * step_w, TL_T + TL_H + 14, s);
	mc_sb_printf(b, "<text class=\"ax\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">kernel (step) in run order"
	             "</text>\n<text class=\"ax\" x=\"%d\" y=\"%d\">arena offset</text>\n", TL_L + (TL_W - TL_L) / 2,
	             TL_T + TL_H + 30, 4, TL_T - 10);
}

static void timeline(mc_strbuf *b, const mc_program *p, const mc_compile_opts *o, int pool, const char *title)
{
	size_t top = pool_top(p, pool), peak;
	int at = peak_step(p, pool, &peak);
	int steps = p->n_kernels > 0 ? p->n_kernels : 1;
	double step_w = (TL_W - TL_L - TL_R) / (double)steps;
	double scale = top ? TL_H / (double)top : 0;
	mc_sb_printf(b, "<h3>");
	html_text(b, title);
	mc_sb_printf(b, "</h3>\n<svg class=\"timeline\" width=\"%d\" "
	             "height=\"%d\" data-pool=\"%d\" data-pool-bytes=\"%zu\" data-peak-live=\"%zu\" "
	             "data-peak-step=\"%d\">\n", TL_W, TL_T + TL_H + TL_B + 4, pool, top, peak, at);
	timeline_axes(b, p, top, step_w);
	for (int i = 0; i < p->map->n_bufs; i++)
		if (p->map->bufs[i].pool == pool && p->map->bufs[i].bytes)
			timeline_buf(b, p, o, i, step_w, scale);
	if (p->n_pools <= 1 && top && p->lower_bound < top) {
		double y = TL_T + TL_H - (double)p->lower_bound * scale;
		mc_sb_printf(b, "<line class=\"lb\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"><title>lower bound "
		             "%zu bytes</title></line>\n", TL_L, TL_W - TL_R, y, y, p->lower_bound);
	}
	/* the arena's top, and the step where the most bytes are live */
	double px = TL_L + (at + 0.5) * step_w;
	mc_sb_printf(b, "<line class=\"top\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>\n"
	             "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" fill=\"#c0392b\">top: %zu bytes</text>\n"
	             "<line class=\"peak\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/>\n"
	             "<text x=\"%.1f\" y=\"%d\" text-anchor=\"%s\" fill=\"#c0392b\">peak: %zu bytes live at "
	             "kernel %d</text>\n</svg>\n", TL_L, TL_W - TL_R, TL_T, TL_T, TL_W - TL_R, TL_T - 6, top, px, px,
	             TL_T, TL_T + TL_H, px + (px > TL_W / 2 ? -6 : 6), TL_T + 14, px > TL_W / 2 ? "end" : "start",
	             peak, at);
}

static void memory(mc_strbuf *b, const mc_program *p, const mc_compile_opts *o)
{
	/* the arena as the drawn buffers reach it: NAME_ARENA_BYTES, pools laid one after another */
	size_t arena = 0;
	int n_pools = p->n_pools > 1 ? p->n_pools : 1;
	for (int k = 0; k < n_pools; k++)
		arena += pool_top(p, k);
	mc_sb_printf(b, "<section id=\"memory\" data-arena-bytes=\"%zu\">\n<h2>Memory plan</h2>\n"
	             "<p class=\"note\">Every arena buffer is a bar over the kernels it lives across, at its "
	             "offset; hover for its name. Red: the arena's top and the kernel where most bytes are live"
	             "%s.</p>\n", arena, p->n_pools > 1 ? "" : "; grey dashes: the lower bound");
	char title[512], macro[200];
	arena_macro(macro, sizeof macro, o->name);
	if (p->n_pools <= 1) {
		snprintf(title, sizeof title, "one arena: %zu bytes (%s)", p->arena_bytes, macro);
		timeline(b, p, o, 0, title);
	}
	for (int k = 0; k < p->n_pools && p->n_pools > 1; k++) {
		snprintf(title, sizeof title, "pool %d '%s': %zu bytes (at %zu of %s's layout)", k,
		         p->pool_names[k], p->pool_bytes[k], p->pool_at[k], macro);
		timeline(b, p, o, k, title);
	}
	mc_sb_puts(b, "</section>\n");
}

int mc_write_report(const mc_program *p, const mc_compile_opts *o, const mc_stack_usage *stack,
                    const mc_flash *flash, const char *dir)
{
	/* check_opts refuses --report with --dim LO..HI, whose programs keep no map */
	MC_ASSERT(p->map && !p->dyn);
	kernel_figures *f = mc_xcalloc((size_t)p->n_kernels + 1, sizeof *f);
	for (int s = 0; s < p->n_kernels; s++) {
		f[s].us = -1;
		kernel_bytes(p->kernels[s], &f[s]);
	}
	int unmatched = 0;
	if (o->report_profile && read_profile(p, o->name, o->report_profile, f, &unmatched)) {
		free(f);
		return -1;
	}
	mc_strbuf b = { 0 };
	mc_sb_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>");
	html_text(&b, o->name);
	mc_sb_printf(&b, ": modelc report</title>\n<style>\n%s</style>\n</head>\n<body>\n<h1>", style);
	html_text(&b, o->name);
	mc_sb_printf(&b, "</h1>\n<p class=\"sub\">modelc %s, target %s", MC_VERSION, p->target.desc->name);
	if (o->argv_line && *o->argv_line) {
		mc_sb_puts(&b, ", options <code>");
		html_text(&b, o->argv_line);
		mc_sb_puts(&b, "</code>");
	}
	mc_sb_puts(&b, "</p>\n");
	totals(&b, p, o, stack, flash);
	memory(&b, p, o);
	mc_sb_puts(&b, "<div class=\"cols\">\n<div>\n<h2>Kernels in run order</h2>\n<p class=\"note\">Each box is "
	               "one generated function, listing the ONNX nodes fused into it; arrows carry tensors "
	               "(hover for names). A click shows its row.</p>\n");
	graph(&b, p, o);
	mc_sb_puts(&b, "</div>\n<div>\n<h2>Per kernel</h2>\n<p class=\"note\">Bytes of the buffers each kernel "
	               "reads and writes (arena, weights, inputs, outputs)");
	if (o->report_profile && unmatched)
		mc_sb_printf(&b, "; times from the profile given (%d name%s in it matched no kernel)", unmatched,
		             unmatched == 1 ? "" : "s");
	else if (o->report_profile)
		mc_sb_puts(&b, "; times from the profile given, a run's mean");
	mc_sb_puts(&b, ".</p>\n");
	table(&b, p, o, f, o->report_profile != NULL);
	mc_sb_puts(&b, "</div>\n</div>\n</body>\n</html>\n");
	free(f);
	char path[4200];
	snprintf(path, sizeof path, "%s/%s_report.html", dir, o->name);
	int rc = mc_write_if_changed(path, b.data, b.len);
	mc_sb_free(&b);
	return rc;
}
