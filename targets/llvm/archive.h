/* A static library (ar archive, System V/GNU format with a symbol index)
 * of in-memory objects: what `ar crs` writes, without an ar program, so
 * the llvm target needs no toolchain on the build host. Deterministic: no
 * dates, owners or modes from the machine. */
#ifndef MODELC_ARCHIVE_H
#define MODELC_ARCHIVE_H

#include <stddef.h>

typedef struct {
	const char *name;        /* file name inside the archive (no '/') */
	const void *data;
	size_t size;
	const char *const *symbols; /* global symbols it defines, for the index */
	int n_symbols;
} mc_ar_member;

/* The archive's bytes in *out (malloc'd, *out_len long). -1 if a name
 * is empty or has a '/' or a newline, the archive would pass 4 GiB (the
 * 32-bit offsets of the index), or memory ran out. */
int mc_ar_build(const mc_ar_member *members, int n, unsigned char **out, size_t *out_len);

#endif
