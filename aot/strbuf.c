/* Text buffers for the emitters and the write-if-changed file writer that
 * keeps an unchanged model from rebuilding anything downstream. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../libcore/modelc.h"
#include "strbuf.h"

static void sb_reserve(mc_strbuf *b, size_t extra)
{
	size_t need = b->len + extra + 1;
	if (need <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	char *d = realloc(b->data, cap);
	if (!d) {
		mc_error("out of memory");
		abort();
	}
	b->data = d;
	b->cap = cap;
}

void mc_sb_printf(mc_strbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	sb_reserve(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void mc_sb_puts(mc_strbuf *b, const char *s)
{
	size_t n = strlen(s);
	sb_reserve(b, n);
	memcpy(b->data + b->len, s, n + 1);
	b->len += n;
}

void mc_sb_free(mc_strbuf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

/* True if the file at path holds exactly data. */
static bool same_content(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return false;
	bool same = true;
	char buf[65536];
	size_t off = 0, n;
	while (same && (n = fread(buf, 1, sizeof buf, f)) > 0) {
		if (n > len - off || memcmp(buf, (const char *)data + off, n) != 0)
			same = false;
		off += n;
	}
	if (ferror(f))
		same = false;
	fclose(f);
	return same && off == len;
}

/* Writes data to a temporary beside path, then renames it over path, so
 * that path holds either its old or its new content, never a mixture.
 * Every write error (ENOSPC, EFBIG, EIO) is caught, including those that
 * only show when the buffer is flushed or the file closed. */
int mc_write_if_changed(const char *path, const void *data, size_t len)
{
	if (same_content(path, data, len))
		return 0;
	/* Temporary beside the target, so the rename stays on one file system. */
	size_t n = strlen(path) + 32;
	char *tmp = mc_xmalloc(n);
	snprintf(tmp, n, "%s.tmp%ld", path, (long)getpid());
	FILE *f = fopen(tmp, "wb");
	int err = errno;
	bool ok = f != NULL;
	if (ok && fwrite(data, 1, len, f) != len) {
		err = errno;
		ok = false;
	}
	if (ok && fflush(f) != 0) {
		err = errno;
		ok = false;
	}
	if (f && fclose(f) != 0 && ok) {
		err = errno;
		ok = false;
	}
	if (ok && rename(tmp, path) != 0) {
		err = errno;
		ok = false;
	}
	if (!ok) {
		mc_error("cannot write '%s': %s", path, strerror(err));
		if (f)
			remove(tmp);
	}
	free(tmp);
	return ok ? 0 : -1;
}
