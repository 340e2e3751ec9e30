/* The hostile model corpus: files that must be refused with exactly one
 * error line, never a crash or a hang. Each case writes its file (and any
 * companion files) from code, so the corpus is reproducible and needs no
 * binary blobs in the repository.
 *
 * Used by tests/unit/test_hostile.c (Criterion, in-process import and
 * inference, as `modelc inspect`) and by tests/hostile/gen.c (writes the
 * files for tests/hostile/check, which runs `modelc inspect` and `modelc
 * compile` on each). */
#ifndef HOSTILE_CORPUS_H
#define HOSTILE_CORPUS_H

#include <stdbool.h>

/* hostile_case.how: */
enum {
	PART = 0,         /* the error line holds the expected text */
	EXACT = 1,        /* the error line is the expected text */
	/* Only compiling finds the problem (the freezing passes, memory
	 * planning): `modelc inspect` accepts the model. */
	COMPILE_ONLY = 2,
};

typedef struct {
	const char *file;   /* file name inside the corpus directory */
	/* The error line after "modelc: error: ", or a part of it; "{dir}"
	 * stands for the directory that holds the model file. */
	const char *expect;
	unsigned how;       /* EXACT or PART, | COMPILE_ONLY */
	/* Writes the model to `path`; companions go next to it or one level up
	 * (the corpus directory's parent belongs to the corpus too). 0 on
	 * success. */
	int (*write)(const char *path);
} hostile_case;

extern const hostile_case hostile_cases[];
extern const int hostile_n_cases;

#endif
