/* ar archives (archive.h). The layout, as GNU ar and every ELF linker read
 * it: the magic "!<arch>\n"; then members, each a 60-byte text header and
 * its data padded to an even length. The first member, named "/", is the
 * symbol index (a big-endian count, the header offset of the member that
 * defines each symbol, then the names, NUL-terminated); names longer than
 * 15 bytes live in the "//" member and are written "/OFFSET". */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../libcore/modelc.h"
#include "archive.h"

typedef struct {
	unsigned char *data;
	size_t len, cap;
	bool oom;          /* the objects are model-sized: out of memory is an error, not an abort */
} bytes;

static void put(bytes *b, const void *p, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n)
			cap *= 2;
		unsigned char *d = realloc(b->data, cap);
		if (!d) {
			b->oom = true;
			return;
		}
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

static void put_be32(bytes *b, uint32_t v)
{
	unsigned char c[4] = { (unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
	                       (unsigned char)v };
	put(b, c, 4);
}

/* name (16), date (12), uid (6), gid (6), mode (8), size (10), "`\n" */
static void put_header(bytes *b, const char *name, size_t size)
{
	char h[61];
	snprintf(h, sizeof h, "%-16s%-12s%-6s%-6s%-8s%-10zu`\n", name, "0", "0", "0", "644", size);
	put(b, h, 60);
}

static void put_member(bytes *b, const char *name, const void *data, size_t size)
{
	put_header(b, name, size);
	put(b, data, size);
	if (size % 2)
		put(b, "\n", 1);
}

static size_t padded(size_t n)
{
	return n + n % 2;
}

int mc_ar_build(const mc_ar_member *members, int n, unsigned char **out, size_t *out_len)
{
	*out = NULL;
	*out_len = 0;
	/* the long-name table and each member's header name */
	bytes names = { 0 };
	char (*header_names)[17] = mc_xcalloc((size_t)n + 1, sizeof *header_names);
	size_t n_syms = 0, sym_text = 0;
	for (int i = 0; i < n; i++) {
		const char *nm = members[i].name;
		if (strchr(nm, '/') || strchr(nm, '\n') || !*nm) {
			free(header_names);
			free(names.data);
			return -1;
		}
		size_t len = strlen(nm);
		if (len <= 15) {
			snprintf(header_names[i], sizeof header_names[i], "%s/", nm);
		} else {
			snprintf(header_names[i], sizeof header_names[i], "/%zu", names.len);
			put(&names, nm, len);
			put(&names, "/\n", 2);
		}
		n_syms += (size_t)members[i].n_symbols;
		for (int s = 0; s < members[i].n_symbols; s++)
			sym_text += strlen(members[i].symbols[s]) + 1;
	}
	/* where each member's header will start: after the magic, the index
	 * and the name table */
	size_t index_size = 4 + 4 * n_syms + sym_text;
	size_t pos = 8 + 60 + padded(index_size);
	if (names.len)
		pos += 60 + padded(names.len);
	uint64_t *offsets = mc_xcalloc((size_t)n + 1, sizeof *offsets);
	for (int i = 0; i < n; i++) {
		offsets[i] = pos;
		pos += 60 + padded(members[i].size);
	}
	if (pos > UINT32_MAX) {
		free(offsets);
		free(header_names);
		free(names.data);
		return -1;
	}
	bytes b = { 0 };
	put(&b, "!<arch>\n", 8);
	put_header(&b, "/", index_size);
	put_be32(&b, (uint32_t)n_syms);
	for (int i = 0; i < n; i++)
		for (int s = 0; s < members[i].n_symbols; s++)
			put_be32(&b, (uint32_t)offsets[i]);
	for (int i = 0; i < n; i++)
		for (int s = 0; s < members[i].n_symbols; s++)
			put(&b, members[i].symbols[s], strlen(members[i].symbols[s]) + 1);
	if (index_size % 2)
		put(&b, "\n", 1);
	if (names.len)
		put_member(&b, "//", names.data, names.len);
	for (int i = 0; i < n; i++)
		put_member(&b, header_names[i], members[i].data, members[i].size);
	free(offsets);
	free(header_names);
	free(names.data);
	if (b.oom || names.oom) {
		free(b.data);
		return -1;
	}
	*out = b.data;
	*out_len = b.len;
	return 0;
}
