/* The bytes an ELF object puts in flash and RAM, from its section headers
 * (for NAME.json: what the measuring compile of NAME.c, or the llvm
 * target's NAME.o, holds). ELF32 and ELF64, either byte order: every
 * toolchain modelc's firmware builds use writes ELF. */
#include "compile.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	SHF_WRITE = 0x1,
	SHF_ALLOC = 0x2,
	SHF_EXECINSTR = 0x4,
	SHT_NOBITS = 8,
};

typedef struct {
	const unsigned char *data;
	size_t len;
	bool big;   /* big-endian */
} elf_bytes;

/* An unsigned field of `width` bytes at off; false past the end. */
static bool field(const elf_bytes *e, size_t off, int width, uint64_t *v)
{
	if (off > e->len || e->len - off < (size_t)width)
		return false;
	*v = 0;
	for (int i = 0; i < width; i++) {
		unsigned b = e->data[off + (size_t)(e->big ? i : width - 1 - i)];
		*v = *v << 8 | b;
	}
	return true;
}

static int parse(const elf_bytes *e, mc_object_sizes *s, char *why, size_t n)
{
	const unsigned char *d = e->data;
	if (e->len < 52 || memcmp(d, "\177ELF", 4) || (d[4] != 1 && d[4] != 2)) {
		snprintf(why, n, "not an ELF object");
		return -1;
	}
	bool b64 = d[4] == 2;
	int word = b64 ? 8 : 4;
	uint64_t shoff, shentsize, shnum, shstrndx, names = 0;
	if (!field(e, b64 ? 0x28 : 0x20, word, &shoff) || !field(e, b64 ? 0x3a : 0x2e, 2, &shentsize) ||
	    !field(e, b64 ? 0x3c : 0x30, 2, &shnum) || !field(e, b64 ? 0x3e : 0x32, 2, &shstrndx) ||
	    shentsize < (uint64_t)(b64 ? 64 : 40) || shoff > e->len) {
		snprintf(why, n, "an ELF header cut short");
		return -1;
	}
	/* the section names' table: where it is, and none where it is not */
	if (shstrndx < shnum)
		field(e, (size_t)(shoff + shstrndx * shentsize) + (b64 ? 0x18 : 0x10), word, &names);
	for (uint64_t i = 0; i < shnum; i++) {
		size_t at = (size_t)(shoff + i * shentsize);
		uint64_t name, type, flags, size;
		if (!field(e, at, 4, &name) || !field(e, at + 4, 4, &type) || !field(e, at + 8, word, &flags) ||
		    !field(e, at + (b64 ? 0x20 : 0x14), word, &size)) {
			snprintf(why, n, "section header %llu past the end", (unsigned long long)i);
			return -1;
		}
		if (!(flags & SHF_ALLOC))
			continue;
		/* position-independent code's tables of addresses: written once,
		 * by the loader; a static image's linker puts them in flash */
		static const char relro[] = ".data.rel.ro";
		bool read_only = names && names + name < e->len && e->len - (names + name) >= sizeof relro - 1 &&
		                 !memcmp(e->data + names + name, relro, sizeof relro - 1);
		if (flags & SHF_EXECINSTR)
			s->text_bytes += size;
		else if (type == SHT_NOBITS)
			s->bss_bytes += size;
		else if ((flags & SHF_WRITE) && !read_only)
			s->data_bytes += size;
		else
			s->rodata_bytes += size;
	}
	return 0;
}

int mc_object_sizes_of(const char *path, mc_object_sizes *s, char *why, size_t n)
{
	memset(s, 0, sizeof *s);
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(why, n, "cannot open '%s'", path);
		return -1;
	}
	long end = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
	if (end < 0 || fseek(f, 0, SEEK_SET)) {
		fclose(f);
		snprintf(why, n, "cannot read '%s'", path);
		return -1;
	}
	size_t len = (size_t)end;
	unsigned char *buf = mc_xmalloc(len ? len : 1);
	size_t got = fread(buf, 1, len, f);
	len = got;
	bool bad = ferror(f);
	fclose(f);
	int rc = -1;
	if (bad)
		snprintf(why, n, "cannot read '%s'", path);
	else
		rc = parse(&(elf_bytes){ buf, len, len > 5 && buf[5] == 2 }, s, why, n);
	free(buf);
	return rc;
}
