/* Helpers every emitter needs (targets/common/emit_common.c): the
 * emitter's state (names, index width, the kernel being emitted and its
 * use counts), C storage types and dtype constants (NAME.h's contract),
 * weights' alignment and If conditions, restrict facts, writing a file.
 * Internal to the targets. */
#ifndef MODELC_EMIT_COMMON_H
#define MODELC_EMIT_COMMON_H

#include "../../aot/compile.h"

typedef struct mc_cemit {
	const mc_program *p;
	const char *name;     /* identifier prefix */
	char *upper;          /* its upper-case form, for macros */
	const char *target;   /* "C target", "CUDA target": errors start with it */
	bool cuda;            /* CUDA C++ dialect (device code) */
	bool idx64;           /* MC_KT_INDEX is int64_t (else int32_t) */
	char idx_type[160];   /* C name of the index type */
	mc_strbuf *sb;
	const mc_kernel *k;   /* kernel being printed */
	int *var_reads;       /* per variable of k: times read */
	int *buf_uses;        /* per buffer of k: loads and stores */
	/* With subst_text: loads of buffer subst_buf print as that text (the
	 * cuda target's fused template epilogues read their value so). */
	int subst_buf;
	const char *subst_text;
	/* MC_KE_SPLITS of the template writing buffer buf: the cuda target's
	 * device plan (NULL elsewhere: no target but cuda lowers to it) */
	void (*put_splits)(struct mc_cemit *e, int buf);
	int err;
} mc_cemit;

/* Checks p's name, fills in name, upper, idx64 and idx_type. -1 after
 * reporting. */
int mc_ce_init(mc_cemit *e, const mc_program *p, const mc_compile_opts *o, const char *target);
void mc_ce_fini(mc_cemit *e);
void mc_ce_fail(mc_cemit *e, const char *what);

const char *mc_ce_storage_type(mc_dtype t); /* NULL: no C storage */
const char *mc_ce_dtype_const(mc_dtype t);  /* "MODELC_FLOAT", ... */
const mc_weight *mc_ce_weight_of(const mc_cemit *e, int index);
/* Weight `index` can be an If step's condition: a non-empty bool constant. */
bool mc_ce_is_cond_weight(const mc_cemit *e, int index);
/* A weight array's alignment: its own where a power of two, else 16. */
size_t mc_ce_weight_align(const mc_weight *w);
size_t mc_ce_arena_align(const mc_program *p);
/* The alignment the run function requires of an input's or output's
 * pointer (MODELC_ERR_MISALIGNED otherwise): the kernels read and write it
 * as an array of its element type, so its element's size (1: none). */
size_t mc_ce_io_align(const mc_io_desc *d);
/* An input's or output's elements and bytes. */
size_t mc_ce_io_numel(const mc_io_desc *d);
size_t mc_ce_io_bytes(const mc_io_desc *d);

/* Kernel use counts. mc_ce_begin_kernel counts uses (unused buffers get no
 * pointer, unused locals a (void)); mc_ce_end_kernel frees the counts. */
void mc_ce_begin_kernel(mc_cemit *e, const mc_kernel *k);
void mc_ce_end_kernel(mc_cemit *e);
void mc_ce_scan_block(mc_cemit *e, const mc_kstmt *s);
bool mc_ce_is_restrict(const mc_cemit *e, int i);
/* NAME_kernel: its C identifier, into e->sb. */
void mc_ce_kernel_name(mc_cemit *e, const mc_kernel *k);

int mc_ce_write_file(const char *dir, const char *name, const char *suffix, const mc_strbuf *sb);

#endif
