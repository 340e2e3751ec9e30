/* The C-family printer (targets/common/emit_cfamily.c), shared by the C and
 * CUDA targets: kernel IR statements and expressions, the I/O macros and
 * descriptor tables, NAME.h, the weights file. The CUDA target
 * (targets/cuda/) prints the same kernels with a few dialect changes
 * (__restrict__, a failing statement that records its status in device
 * memory) and maps parallel loops to the grid itself; the llvm target
 * shares NAME.h. Internal to the targets. */
#ifndef MODELC_EMIT_CFAMILY_H
#define MODELC_EMIT_CFAMILY_H

#include "emit_common.h"

const char *mc_ce_ctype(const mc_cemit *e, mc_ktype t);

/* Kernel bodies, between mc_ce_begin_kernel and mc_ce_end_kernel. */
void mc_ce_expr(mc_cemit *e, const mc_kexpr *x, bool top);
void mc_ce_stmt(mc_cemit *e, const mc_kstmt *s, int depth);
void mc_ce_block(mc_cemit *e, const mc_kstmt *s, int depth);
void mc_ce_indent(mc_cemit *e, int depth);
/* What vector code needs: the ISA check, its intrinsics header, the lane
 * helpers; nothing for scalar ISAs. */
void mc_ce_vector_prelude(mc_cemit *e);

void mc_ce_comment_text(mc_strbuf *sb, const char *s);
void mc_ce_c_string(mc_strbuf *sb, const char *s);
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

#endif
