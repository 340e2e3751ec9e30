/* The C-family printer (targets/c/emit_c.c), shared by the C and CUDA
 * targets: kernel IR statements and expressions, buffer pointers, the I/O
 * macros and descriptor tables, the weights file. The CUDA target
 * (targets/cuda/) prints the same kernels with a few dialect changes
 * (__restrict__, a failing statement that records its status in device
 * memory) and maps parallel loops to the grid itself. Internal to the
 * targets. */
#ifndef MODELC_EMIT_C_H
#define MODELC_EMIT_C_H

#include "../../aot/aot.h"

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
	int err;
} mc_cemit;

/* Checks p's name, fills in name, upper, idx64 and idx_type. -1 after
 * reporting. */
int mc_ce_init(mc_cemit *e, const mc_program *p, const mc_compile_opts *o, const char *target);
void mc_ce_fini(mc_cemit *e);
void mc_ce_fail(mc_cemit *e, const char *what);

const char *mc_ce_ctype(const mc_cemit *e, mc_ktype t);
const char *mc_ce_storage_type(mc_dtype t); /* NULL: no C storage */
const char *mc_ce_dtype_const(mc_dtype t);  /* "MODELC_FLOAT", ... */
const mc_weight *mc_ce_weight_of(const mc_cemit *e, int index);
/* Weight `index` can be an If step's condition: a non-empty bool constant. */
bool mc_ce_is_cond_weight(const mc_cemit *e, int index);
/* A weight array's alignment: its own where a power of two, else 16. */
size_t mc_ce_weight_align(const mc_weight *w);
size_t mc_ce_arena_align(const mc_program *p);

/* Kernel bodies. mc_ce_begin_kernel counts uses (unused buffers get no
 * pointer, unused locals a (void)); mc_ce_end_kernel frees the counts. */
void mc_ce_begin_kernel(mc_cemit *e, const mc_kernel *k);
void mc_ce_end_kernel(mc_cemit *e);
void mc_ce_scan_block(mc_cemit *e, const mc_kstmt *s);
void mc_ce_expr(mc_cemit *e, const mc_kexpr *x, bool top);
void mc_ce_stmt(mc_cemit *e, const mc_kstmt *s, int depth);
void mc_ce_block(mc_cemit *e, const mc_kstmt *s, int depth);
void mc_ce_indent(mc_cemit *e, int depth);
bool mc_ce_is_restrict(const mc_cemit *e, int i);

void mc_ce_comment_text(mc_strbuf *sb, const char *s);
void mc_ce_c_string(mc_strbuf *sb, const char *s);
void mc_ce_kernel_name(mc_cemit *e, const mc_kernel *k);
void mc_ce_kernel_comment(mc_cemit *e, const mc_kernel *k); /* its name and nodes */
void mc_ce_io_comment(mc_cemit *e, const char *title, const mc_io_desc *d, int n);
void mc_ce_io_macros(mc_cemit *e, const char *kind, const mc_io_desc *d, int n);
void mc_ce_desc_table(mc_cemit *e, const char *kind, const char *table, const mc_io_desc *d, int n);
/* NAME.h of the C target (the LLVM target's too: the same contract). */
void mc_ce_header(mc_cemit *e);
/* The weights' extern declarations, between open (a format of the model
 * name) and close; nothing without weights. */
void mc_ce_weight_decls(mc_cemit *e, const char *open, const char *close);
/* NAME_weights.c: the frozen constants as const arrays. */
int mc_ce_weights(mc_cemit *e);
int mc_ce_write_file(const char *dir, const char *name, const char *suffix, const mc_strbuf *sb);

#endif
