/*
 * Host tool of the firmware examples: writes the stored inputs as C.
 *
 * usage: mkdata NAME COUNT SEED [SCALE]    COUNT floats uniform in [-1, 1)
 *                                          (times SCALE, when given)
 *        mkdata NAME COUNT FILE.bin        the first COUNT little-endian
 *                                          float32 values of FILE.bin
 * prints `const float NAME[COUNT] = { ... };` (hex floats: exact) on stdout.
 * The generator is a 32-bit LCG, so the values are the same everywhere.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: mkdata NAME COUNT SEED [SCALE] | mkdata NAME COUNT FILE.bin\n");
		return 2;
	}
	char *end;
	long count = strtol(argv[2], &end, 10);
	if (*end || count <= 0 || count > 1L << 24) {
		fprintf(stderr, "mkdata: bad COUNT '%s'\n", argv[2]);
		return 2;
	}
	unsigned long seed = strtoul(argv[3], &end, 10);
	FILE *f = NULL;
	if (*end) {
		f = fopen(argv[3], "rb");
		if (!f) {
			fprintf(stderr, "mkdata: %s: %s\n", argv[3], strerror(errno));
			return 1;
		}
	}
	float scale = 1.0f;
	if (argc == 5) {
		scale = strtof(argv[4], &end);
		if (*end || !(scale > 0.0f) || f) {
			fprintf(stderr, "mkdata: bad SCALE '%s' (a positive number, with a SEED only)\n", argv[4]);
			if (f)
				fclose(f);
			return 2;
		}
	}
	uint32_t state = (uint32_t)seed;
	printf("/* written by firmware-examples/tools/mkdata; do not edit */\n");
	printf("const float %s[%ld] = {\n", argv[1], count);
	for (long i = 0; i < count; i++) {
		float v;
		if (f) {
			unsigned char b[4];
			if (fread(b, 1, 4, f) != 4) {
				fprintf(stderr, "mkdata: %s: shorter than %ld floats\n", argv[3], count);
				fclose(f);
				return 1;
			}
			uint32_t bits = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
			memcpy(&v, &bits, sizeof v);
		} else {
			state = state * 1664525u + 1013904223u;
			v = (float)(state >> 8) / (float)(1u << 23) - 1.0f; /* 24 bits: exact */
			v *= scale; /* printed exactly, whatever it rounds to */
		}
		printf("\t%a,\n", (double)v);
	}
	printf("};\n");
	if (f)
		fclose(f);
	return 0;
}
