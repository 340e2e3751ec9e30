/* The hostile model corpus: files that must be refused with exactly one
 * error line, never a crash or a hang. Each case writes its file (and any
 * companion files) from code, so the corpus is reproducible and needs no
 * binary blobs in the repository.
 *
 * Used by tests/unit/test_hostile.c (Criterion, in-process import) and by
 * tests/hostile/gen.c (writes the files for tests/hostile/check, which runs
 * `modelc inspect` on each). */
#ifndef HOSTILE_CORPUS_H
#define HOSTILE_CORPUS_H

#include <stdbool.h>

typedef struct {
	const char *file;   /* file name inside the corpus directory */
	/* The error line after "modelc: error: " (exact), or a part of it. */
	const char *expect;
	bool exact;
	/* Writes the model to `path`; companions go next to it or one level up
	 * (the corpus directory's parent belongs to the corpus too). 0 on
	 * success. */
	int (*write)(const char *path);
} hostile_case;

extern const hostile_case hostile_cases[];
extern const int hostile_n_cases;

#endif
