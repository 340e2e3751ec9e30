/* A growable text buffer (aot/strbuf.c): what emitters and dumps print
 * into; and the writer of output files. */
#ifndef MODELC_STRBUF_H
#define MODELC_STRBUF_H

#include <stddef.h>

/* A growable text buffer for emitters. */
typedef struct {
	char *data;
	size_t len, cap;
} mc_strbuf;
void mc_sb_printf(mc_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mc_sb_puts(mc_strbuf *b, const char *s);
void mc_sb_free(mc_strbuf *b);

/* Writes path only if its content differs (atomic: temporary + rename), so
 * an unchanged model rebuilds nothing. */
int mc_write_if_changed(const char *path, const void *data, size_t len);

#endif
