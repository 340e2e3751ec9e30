/* Diagnostics: one line per problem, to stderr or a sink set by tests. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "modelc.h"

static mc_diag_sink sink;
static void *sink_user;

void mc_set_diag_sink(mc_diag_sink s, void *user)
{
	sink = s;
	sink_user = user;
}

static void oom(void)
{
	fputs("modelc: error: out of memory\n", stderr);
	exit(3);
}

/* One finished line to the sink, or to stderr. */
static void deliver(const char *line)
{
	if (sink)
		sink(line, sink_user);
	else
		fprintf(stderr, "%s\n", line);
}

static void emit(const char *kind, const char *fmt, va_list ap)
{
	char line[1024];
	int n = snprintf(line, sizeof line, "modelc: %s: ", kind);
	vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
	/* One line per diagnostic even when a model name holds a newline. */
	for (char *p = line; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	deliver(line);
}

static unsigned long errors_reported;

static void hold_line(const char *line, void *user)
{
	mc_diag_held *h = user;
	size_t n = strlen(line);
	if (!h->first[0] && strncmp(line, "modelc: error: ", 15) == 0)
		snprintf(h->first, sizeof h->first, "%s", line + 15);
	h->lines = realloc(h->lines, h->len + n + 2);
	if (!h->lines)
		oom();
	memcpy(h->lines + h->len, line, n);
	h->len += n;
	h->lines[h->len++] = '\n';
	h->lines[h->len] = 0;
}

void mc_diag_hold(mc_diag_held *h)
{
	*h = (mc_diag_held){ .sink = sink, .user = sink_user, .errors = errors_reported };
	sink = hold_line;
	sink_user = h;
}

void mc_diag_release(mc_diag_held *h, bool replay)
{
	sink = h->sink;
	sink_user = h->user;
	if (!replay)
		errors_reported = h->errors;
	for (char *line = h->lines; replay && line && *line; ) {
		char *end = strchr(line, '\n');
		*end = 0;
		deliver(line);
		line = end + 1;
	}
	free(h->lines);
	h->lines = NULL;
	h->len = 0;
}

unsigned long mc_error_count(void)
{
	return errors_reported;
}

void mc_error(const char *fmt, ...)
{
	va_list ap;
	errors_reported++;
	va_start(ap, fmt);
	emit("error", fmt, ap);
	va_end(ap);
}

void mc_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	emit("warning", fmt, ap);
	va_end(ap);
}

static double progress_t0 = -1, progress_after = 1;
static bool progress_on;

static double seconds_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void mc_progress_begin(void)
{
	const char *off = getenv("MODELC_NO_PROGRESS"), *after = getenv("MODELC_PROGRESS_AFTER");
	progress_on = isatty(STDERR_FILENO) && !(off && *off && strcmp(off, "0"));
	progress_after = after && *after ? atof(after) : 1.0;
	progress_t0 = seconds_now();
}

void mc_progress(const char *fmt, ...)
{
	if (!progress_on || progress_t0 < 0)
		return;
	double t = seconds_now() - progress_t0;
	if (t < progress_after)
		return;
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	fprintf(stderr, "modelc: %.1f s: %s\n", t, line);
}

/* Straight to stderr, not through the sink: a broken invariant must be
 * seen even by a test that captures diagnostics. */
void mc_assert_fail(const char *cond, const char *file, int line)
{
	fprintf(stderr, "modelc: internal error: %s:%d: assertion failed: %s\n", file, line, cond);
	abort();
}

void *mc_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom();
	return p;
}

void *mc_xcalloc(size_t n, size_t m)
{
	void *p = calloc(n ? n : 1, m ? m : 1);
	if (!p)
		oom();
	return p;
}

char *mc_xstrdup(const char *s)
{
	char *p = strdup(s ? s : "");
	if (!p)
		oom();
	return p;
}
