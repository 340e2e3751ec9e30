/* Writes the hostile corpus into DIR and prints a manifest on stdout, one
 * line per file: FILE <tab> exact|part <tab> inspect|compile <tab>
 * EXPECTED-ERROR-TEXT (see corpus.h; "compile": only compiling refuses
 * it). Used by tests/hostile/check.
 * Companion files of some cases go into DIR's parent, so give a DIR of its
 * own inside a scratch directory. */
#include <stdio.h>

#include "corpus.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	for (int i = 0; i < hostile_n_cases; i++) {
		const hostile_case *c = &hostile_cases[i];
		char path[4096];
		snprintf(path, sizeof path, "%s/%s", argv[1], c->file);
		if (c->write(path)) {
			fprintf(stderr, "gen: cannot write '%s'\n", path);
			return 1;
		}
		printf("%s\t%s\t%s\t%s\n", c->file, c->how & EXACT ? "exact" : "part",
		       c->how & COMPILE_ONLY ? "compile" : "inspect", c->expect);
	}
	return 0;
}
