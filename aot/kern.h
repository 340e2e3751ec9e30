/* The register-tiled micro-kernel shared by the dense fast kernels
 * (aot/kern_gemm.c, aot/kern_conv.c): C[rows][n] += A[rows][K] * B[K][n]
 * where B is a constant packed at generation time into column panels.
 *
 * A panel is a few vectors side by side (their lane counts need not be
 * equal: 16 + 8 + 4 covers 28 columns); packed, it is [K][width], zero
 * padded where its last vector reaches past n. A tile holds mr rows x the
 * panel's vectors in accumulators; each reduction step loads the panel's
 * vectors once, broadcasts one A element per row and multiply-adds: the
 * block is straight-line code, the reduction loops stay loops. */
#ifndef MODELC_KERN_H
#define MODELC_KERN_H

#include "lower.h"

#define KT_MAX_MR 12    /* rows of a tile */
#define KT_MAX_VEC 8    /* vectors of a panel */
#define KT_MAX_SETS 4   /* accumulator sets (independent chains along K) */
#define KT_MAX_PARTS 8  /* panels a run-time rest of columns is cut into */

/* How one panel is cut into vectors, and the rows of its full tiles. */
typedef struct {
	int nvec;
	int lanes[KT_MAX_VEC];
	int valid[KT_MAX_VEC];   /* columns of each vector inside n (< lanes: padding) */
	int64_t width;           /* sum of lanes: the packed row length */
	int mr;
	int sets;                /* accumulator sets a tile of this panel keeps */
} kt_shape;

/* The columns [0, n) of the output: n_main panels shaped `main`, then one
 * panel shaped `tail` (tail.nvec 0: none). */
typedef struct {
	int64_t n, k;
	int64_t n_main;
	kt_shape main, tail;
	bool direct;             /* B read where it is, [k][n] row-major (not packed) */
	/* Packed for the GEMV_F32 template (kir.h; kt_gemv only): panels of
	 * MC_GEMV_BLOCK columns, one vector each, the last zero padded. */
	bool gemv_f32;
	/* Direct where sizes vary (--dim LO..HI, mc_kb.sizes_vary): n may be
	 * the dynamic size, so the panels are counted at run time (the
	 * statements then do not change with n): n / main.width panels
	 * shaped `main`, then the rest cut in binary, parts[i] (parts[i].width
	 * columns, a power of two) where the rest has that bit, then the rest
	 * & single_mask columns one by one (shaped `single`); tail unused. */
	bool n_vary;
	int n_parts;
	kt_shape parts[KT_MAX_PARTS], single;
	int64_t single_mask;
} kt_cols;

/* Chooses panels and tile rows for n columns, `rows` rows (an upper bound
 * on the rows one tile may take) and a reduction of length k on isa. */
void kt_plan(const mc_isa *isa, int64_t n, int64_t k, int64_t rows, kt_cols *cols);
/* The rows to plan a product of `rows` rows with: rows, or where sizes
 * vary (--dim LO..HI, mc_kb.sizes_vary) no bound, so that the tile rows
 * (and the accumulator sets with them) do not change with a dynamic
 * row count; fewer rows then go in the rest tiles. */
int64_t kt_plan_rows(const mc_kb *kb, int64_t rows);
/* The same for a B that is not packed (a tensor computed at run time): no
 * padded vector, since it would read past B's rows; the columns a vector
 * leaves go one by one. Where sizes vary, kt_cols.n_vary's panels, and
 * accumulator sets that do not change with a depth k under 32. */
void kt_plan_direct(const mc_kb *kb, int64_t n, int64_t k, int64_t rows, kt_cols *cols);

/* Columns for kt_gemv alone: on a target with the Cortex-M micro-kernels
 * (mc_target.mcu_templates) on --isa cortex-m, the GEMV_F32 template's
 * panels; else kt_plan's for one row. */
void kt_plan_gemv(const mc_kb *kb, int64_t n, int64_t k, kt_cols *cols);

/* Accumulator sets for a tile of mr rows x nvec vectors over a reduction
 * of length k (independent FMA chains where the tile alone has too few). */
int kt_sets(const mc_isa *isa, int mr, int nvec, int64_t k);

/* B's element at reduction index k and column j (scaled as the kernel
 * wants it), for packing. */
typedef double (*kt_get_fn)(const void *ctx, int64_t k, int64_t j);

/* The packed B of cols as a kernel buffer (mc_kb_packed). -1 on OOM. */
int kt_pack(mc_kb *kb, const kt_cols *cols, kt_get_fn get, const void *ctx);
/* A packed copy of a per-column bias (zero padded like B); -1 on OOM. */
int kt_pack_bias(mc_kb *kb, const kt_cols *cols, kt_get_fn get, const void *ctx);

/* Where panel p starts in the packed B and in the output columns. */
typedef struct {
	const kt_shape *shape;
	mc_kexpr *col0;          /* first output column */
	mc_kexpr *b0;            /* B index of (k = 0, column col0) */
	int64_t b_stride;        /* B index step from k to k + 1 */
} kt_panel;

/* The main panel number `p` (an index expression), or the tail. */
kt_panel kt_main_panel(mc_kb *kb, const kt_cols *cols, mc_kexpr *p);
kt_panel kt_tail_panel(mc_kb *kb, const kt_cols *cols);
/* The panel shaped s of a direct B whose first column is col0. */
kt_panel kt_direct_panel(const kt_cols *cols, const kt_shape *s, mc_kexpr *col0);

/* One register tile: mr rows of a panel. */
typedef struct {
	kt_panel panel;
	int mr, sets;
	int a_buf, b_buf;
	mc_kexpr *a_row[KT_MAX_MR];   /* A index of each row at reduction offset 0 */
	mc_kexpr *acc[KT_MAX_SETS][KT_MAX_MR][KT_MAX_VEC];
} kt_tile;

/* Declares the accumulators: the packed bias (bias_buf, -1: zero) in set
 * 0, zero in the others. a_row[] must be filled by the caller. */
void kt_tile_init(mc_kb *kb, kt_tile *t, int bias_buf);
/* One reduction step into set `set`: every row reads A at a_row[r] + a_off,
 * the panel reads B at b0 + b_k * width. */
void kt_tile_step(mc_kb *kb, kt_tile *t, int set, mc_kexpr *a_off, mc_kexpr *b_k);
/* Steps over k in [0, len): the loop unrolled by t->sets (one set per
 * copy), the rest into set 0. a_off(k) = k * a_step, b_k = k. */
void kt_tile_reduce(mc_kb *kb, kt_tile *t, int64_t len, int64_t a_step);
/* Stores the tile (sets summed) through the node's output 0: row r's
 * column 0 is at linear index row_lin[r]; row_coords[r] (NULL: none) are
 * the output coords of that element, the last one replaced per vector. */
void kt_tile_store(mc_lower_ctx *c, kt_tile *t, mc_kexpr *const *row_lin,
                   mc_kexpr **const *row_coords);

/* Elements of one packed row of B (every panel's width; packed, B holds k
 * of them). */
int64_t kt_packed_cols(const kt_cols *cols);
/* The rows of cols' register tiles: the main panels', or the tail's where
 * there is no main panel; with n_vary, the least multiple of every
 * panel's (a chunk of such rows leaves no panel a rest). */
int kt_tile_rows(const kt_cols *cols);

/* Loop order by B's size. Each block of rows (pixels) reads all of B
 * once. B up to KT_BIG_B_BYTES stays in a core's L2 from one block to the
 * next; a larger one does not, and the kernels then take up to
 * KT_BIG_B_A_BYTES of A a block, panel by panel (A read from L2 once a
 * panel, B once a block from memory). resnet50's last 1x1 convolutions (49
 * rows, 4 MB of B) had read B 9 times a call, ConvNeXt's last MLPs 9. */
#define KT_BIG_B_BYTES (512 * 1024)
#define KT_BIG_B_A_BYTES (1024 * 1024)
/* The bytes of cols' packed B: k rows of kt_packed_cols(cols) floats. */
int64_t kt_packed_bytes(const kt_cols *cols);
/* Whether that B is big (above). */
static inline bool kt_b_is_big(const kt_cols *cols)
{
	return kt_packed_bytes(cols) > KT_BIG_B_BYTES;
}

/* One row: out[j] = bias[j] + sum over kk < k of a[a_at + kk] * B[kk][j] for
 * the columns j of cols (B packed by kt_pack, bias by kt_pack_bias or -1),
 * stored as whole vectors into the f32 buffer out_buf at j: it holds
 * kt_packed_cols(cols) elements, the padded lanes past n included. */
void kt_gemv(mc_kb *kb, const kt_cols *cols, int a_buf, mc_kexpr *a_at, int b_buf, int bias_buf,
             int out_buf);

/* An A that is not stored as a matrix (kern_conv: the input pixels under
 * each output pixel's window): row `row` starts at row_at(ctx, row), and
 * reduction step kk lies k_at(ctx, kk) past that; k_at is kk itself
 * within runs of `run` steps (a kernel row's taps and channels), each run
 * starting at k_at of its first step. */
typedef struct {
	mc_kexpr *(*row_at)(mc_kb *kb, const void *ctx, mc_kexpr *row);
	mc_kexpr *(*k_at)(mc_kb *kb, const void *ctx, mc_kexpr *kk);
	int64_t run;
	int64_t bytes;           /* of what the rows read, all of them */
	const void *ctx;
} kt_implicit_a;

/* A whole product C[rows][n] = A[rows][k] * B (+ bias) stored through the
 * node's output 0 (laid out [rows][n], row-major): the rows in chunks that
 * stay in cache, each chunk panel by panel, each panel tile by tile.
 * Shared by Gemm, MatMul and 1x1 convolutions. With batch > 1 there are
 * `batch` such products one after the other in the output (rows each), A's
 * and B's moving on by a_batch and b_batch elements (0: the same operand
 * for every batch). */
typedef struct {
	int64_t rows, k;
	int a_buf;               /* A: rows x k floats, row-major */
	int b_buf, bias_buf;     /* packed by kt_pack / kt_pack_bias, or B itself
	                          * (cols->direct); bias -1: none */
	const kt_cols *cols;
	int64_t batch, a_batch, b_batch;
	const kt_implicit_a *implicit; /* NULL: A is a_buf as above; else A is
	                                * implicit (batch 1), read from a_buf */
} kt_gemm;
void kt_gemm_emit(mc_lower_ctx *c, const kt_gemm *g);

/* --blas openblas (aot/kern_gemm.c): whether a batch of m x n x k float
 * products goes to cblas_sgemm (mc_kb.blas and the rule of kir.h:
 * MC_BLAS_MAX_LANES and MC_BLAS_MIN_*, or --blas-min-macs), and whether
 * the node's operands are read as stored (no gather fused in, no ring of
 * output rows). */
bool kt_blas_takes(const mc_kb *kb, int64_t batch, int64_t m, int64_t n, int64_t k);
bool kt_blas_operands_plain(const mc_lower_ctx *c);
/* What the product adds: buf's element per column (full: per element;
 * one: its only one) times beta; buf -1 none. */
typedef struct {
	int buf;
	bool full, one;
	double beta;
} kt_blas_bias;
/* The MC_TMPL_SGEMM t (every field but out set) into output 0; where a
 * bias or a fused epilogue follows, into scratch and a nest that adds the
 * bias and stores through the epilogue (an epilogue's operand may share
 * the output's storage, read at the element written). */
void kt_blas_emit(mc_lower_ctx *c, mc_ktemplate *t, const kt_blas_bias *bias);

#endif
