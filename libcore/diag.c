/* Diagnostics: one line per problem, to stderr or a sink set by tests. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelc.h"

static mc_diag_sink sink;
static void *sink_user;

void mc_set_diag_sink(mc_diag_sink s, void *user)
{
	sink = s;
	sink_user = user;
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
	if (sink)
		sink(line, sink_user);
	else
		fprintf(stderr, "%s\n", line);
}

static unsigned long errors_reported;

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

/* Straight to stderr, not through the sink: a broken invariant must be
 * seen even by a test that captures diagnostics. */
void mc_assert_fail(const char *cond, const char *file, int line)
{
	fprintf(stderr, "modelc: internal error: %s:%d: assertion failed: %s\n", file, line, cond);
	abort();
}

static void oom(void)
{
	fputs("modelc: error: out of memory\n", stderr);
	exit(3);
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
