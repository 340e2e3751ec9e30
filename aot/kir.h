/* The loop-level kernel IR (aot/kir.c): types, expressions, vectors,
 * statements, buffers and kernels; the instruction sets kernels are tiled
 * for (aot/isa.c); the builder; the run function's status codes. Targets
 * read what this header describes and only print it. */
#ifndef MODELC_KIR_H
#define MODELC_KIR_H

#include <stdio.h>

#include "../libcore/modelc.h"
#include "target.h"

/* ---- kernel IR: types ----
 * Values computed in kernels. Storage dtypes without a C type are widened on
 * load and narrowed on store: float16, bfloat16 and the small floats compute
 * in f32; int4/int2 in i8/u8; bool in MC_KT_BOOL (0 or 1). MC_KT_INDEX is
 * the type of loop variables and element indices: it never wraps (the
 * emitter picks a width that holds every index of the model), whereas
 * signed value arithmetic wraps like ONNX's (the emitter prints it so that
 * C sees no signed overflow). */
typedef enum {
	MC_KT_VOID,
	MC_KT_BOOL,
	MC_KT_I8, MC_KT_U8, MC_KT_I16, MC_KT_U16,
	MC_KT_I32, MC_KT_U32, MC_KT_I64, MC_KT_U64,
	MC_KT_F32, MC_KT_F64,
	MC_KT_INDEX,
} mc_ktype;

mc_ktype mc_ktype_of(mc_dtype storage);
bool mc_ktype_is_float(mc_ktype t);
bool mc_ktype_is_signed(mc_ktype t);   /* signed ints, floats, index */
const char *mc_ktype_name(mc_ktype t); /* "f32", ... for dumps */

/* ---- kernel IR: expressions (immutable trees; sharing a subtree prints it
 * twice, so bind reused values with mc_kb_let) ---- */
typedef enum {
	MC_KE_CONST,
	MC_KE_VAR,     /* loop index or local variable */
	MC_KE_LOAD,    /* buffer[index] */
	MC_KE_UN,
	MC_KE_BIN,
	MC_KE_SELECT,  /* a ? b : c */
	MC_KE_CAST,    /* to type; float->int truncates, x->bool is x != 0 */
	MC_KE_FMA,     /* a * b + c */
	MC_KE_SPLAT,   /* the scalar a in every lane */
	MC_KE_LANE,    /* lane i of the vector a (a scalar) */
	/* i32 only: c + lo(a) * lo(b) + hi(a) * hi(b), wrapping, where lo and hi
	 * are the signed 16-bit halves of a and b (the Cortex-M DSP extension's
	 * SMLAD: two multiply-accumulates in one instruction) */
	MC_KE_DOT2,
	/* i32 only: the split requantisation of an int32 sum (aot/kern_qconv.c):
	 * v = a * b in 64 bits, doubled where i has MC_RQ32_TWICE, rounded to
	 * nearest, ties to even, at 32 + c bits (c in [0, 31]) and narrowed to
	 * 32 bits; the caller guarantees v + 2^(31 + c) fits int64. In C the
	 * runtime's modelc_rq32: inline, out of line in a build for size.
	 * MC_RQ32_HALF_UP (not with TWICE): the caller also
	 * guarantees c >= 1 and that no v lands on a tie, so rounding half up
	 * gives the same, from v's high word: (hi + 2^(c - 1)) >> c, three
	 * instructions on a 32-bit core (the runtime's modelc_rq32u). */
	MC_KE_RQ32,
	/* i32 only: c + the sum over the four bytes i of a and b of
	 * unsigned(a.byte i) * signed(b.byte i), wrapping (x86's VNNI
	 * vpdpbusd: four multiply-accumulates a lane); where i is 1, a's
	 * bytes are signed too (aarch64's sdot) */
	MC_KE_DOT4,
	/* the 32 bits of a (f32 or i32) read as `type` (the other of the two),
	 * lane by lane: aot/kmath.c builds 2^n from its exponent bits */
	MC_KE_BITS,
	/* index: how many K splits the template whose `out` is buffer `buf`
	 * runs in on this device, in [1, that template's splits] (the cuda
	 * target's kernel parameter: the plan NAME_cuda_init made for the
	 * device's multiprocessors, aot/kern_cuda.c) */
	MC_KE_SPLITS,
	/* index: the run-time size of the program's dynamic dimension
	 * (--dim NAME=LO..HI, aot/dynamic.c), a parameter of every kernel of
	 * such a program; in [LO, HI] */
	MC_KE_DIM,
} mc_kexpr_kind;

typedef enum {
	MC_KU_NEG, MC_KU_NOT /* logical */, MC_KU_BITNOT,
	MC_KU_ABS, MC_KU_SQRT, MC_KU_EXP, MC_KU_LOG,
	MC_KU_SIN, MC_KU_COS, MC_KU_TAN, MC_KU_ASIN, MC_KU_ACOS, MC_KU_ATAN,
	MC_KU_SINH, MC_KU_COSH, MC_KU_TANH, MC_KU_ASINH, MC_KU_ACOSH, MC_KU_ATANH,
	MC_KU_FLOOR, MC_KU_CEIL, MC_KU_TRUNC,
	MC_KU_RINT,    /* round half to even */
	MC_KU_ROUND,   /* round half away from zero */
	MC_KU_ERF,
	MC_KU_ISNAN, MC_KU_ISINF, /* result bool */
	/* i32 only: bytes 0 and 2 (SXTB16_HI: 1 and 3) of a, sign-extended into
	 * the low and high 16-bit halves (SXTB16, and SXTB16 with ROR #8) */
	MC_KU_SXTB16, MC_KU_SXTB16_HI,
	MC_KU__COUNT
} mc_kunop;

typedef enum {
	MC_KB_ADD, MC_KB_SUB, MC_KB_MUL,
	MC_KB_DIV,     /* ints: truncating; x/0 gives 0, INT_MIN/-1 wraps */
	MC_KB_REM,     /* ints: C's %; x%0 gives 0 */
	MC_KB_FMOD,    /* floats: C's fmod */
	MC_KB_POW, MC_KB_ATAN2,
	MC_KB_MIN, MC_KB_MAX, /* a < b ? a : b (NaN handling is the lowering's) */
	MC_KB_AND, MC_KB_OR, MC_KB_XOR, /* bitwise (on bool: logical) */
	MC_KB_SHL, MC_KB_SHR,           /* shift >= width gives 0 */
	MC_KB_LT, MC_KB_LE, MC_KB_GT, MC_KB_GE, MC_KB_EQ, MC_KB_NE, /* result bool */
	MC_KB__COUNT
} mc_kbinop;

typedef struct mc_kexpr {
	mc_kexpr_kind kind;
	mc_ktype type;
	int op;                  /* mc_kunop / mc_kbinop */
	int64_t i;               /* CONST of an integer/bool/index type */
	double f;                /* CONST of a float type */
	int var;                 /* VAR: variable id in the kernel */
	int buf;                 /* LOAD: buffer id in the kernel */
	int lanes;               /* > 1: a vector (see "vectors" below); 0, 1: scalar */
	int stride;              /* vector LOAD: 2, every other element (8-bit); else 0 */
	struct mc_kexpr *a, *b, *c; /* operands; LOAD's index is a */
} mc_kexpr;

/* ---- kernel IR: vectors ----
 * An expression (or variable) with lanes > 1 holds that many f32 or i32
 * values. A vector load or store touches `lanes` consecutive elements of
 * its buffer starting at its index (no alignment required).
 * - f32 vectors load from and store to float32 buffers. ADD, SUB, MUL,
 *   DIV, MIN, MAX, FMA, NEG and SELECT work lane by lane, and so do the
 *   compares, whose vector of bools may only feed a SELECT's condition.
 * - i32 vectors (integer kernels) load from int32, int8 and uint8 buffers
 *   (8-bit elements widened, sign- or zero-; from 8-bit buffers also every
 *   other element, stride 2, which reads 2 x lanes elements from the
 *   index: the last one unused), store to the same (narrowed
 *   to 8 bits by truncation: the lowering clamps first). ADD, SUB, MUL,
 *   MIN, MAX, AND, OR, XOR, SHL and SHR (arithmetic; both by a constant
 *   below 32, SHR's not 0) work lane by lane, as
 *   do DOT2, DOT4 and RQ32 (whose multiplier and shift are both scalars, shared
 *   by every lane, or both vectors); no compares, selects or casts.
 * The builder splats a scalar operand of a vector operation (as i32 if it
 * is i32 itself or the vector is, else as f32). Which lane counts exist is
 * the target ISA's (mc_isa_has_lanes: the same widths for both element
 * types); lowerings ask before building vectors, and build scalar code
 * (lanes 1) for the generic ISA and for tails. */

/* ---- kernel IR: statements ---- */
typedef enum {
	MC_KS_FOR,     /* for (var = begin; var < end; var++) body */
	MC_KS_DECL,    /* declares var = init (a value or a mutable local) */
	MC_KS_ASSIGN,  /* var = value */
	MC_KS_STORE,   /* buffer[index] = value (converted to the storage dtype) */
	MC_KS_IF,      /* if (cond) body else orelse */
	MC_KS_BREAK,   /* leaves the innermost FOR */
	MC_KS_FAIL,    /* the kernel returns status `code` (bad data at run time) */
	MC_KS_TEMPLATE,/* a target template computes `tmpl` (see below) */
} mc_kstmt_kind;

/* Templates: computations a target implements with a hand-tuned kernel of
 * its own where loops of scalar IR cannot use the hardware well (shared
 * memory tiles, tensor cores). Lowerings emit them only for a target that
 * has them (kb->isa), as one top-level statement of a kernel, whose other
 * statements finish the job in plain IR (bias, splits, fused epilogues). */
typedef enum {
	/* 2-D convolution, NCHW float32 (NHWC with `nhwc`), group 1, as an
	 * implicit GEMM in K splits: out[s][n][m][p] = sum over k in [s*k_split, (s+1)*k_split) of
	 * wt[k][m] * x[n][ci][ih][iw], with k = (ci*kh + i)*kw + j, p = oh*ow_n + ow,
	 * ih = oh*sh - ph + i*dh, iw = ow*sw - pw + j*dw, x taken as 0 outside
	 * the image. wt is the weight re-laid K x M at generation time, or kept
	 * M x K where `mma` (the tensor-core form reads rows of k). */
	MC_TMPL_CONV2D_SPLITK,
	/* A batched matrix product on tensor cores (mma), in K splits as the
	 * convolution's: out[s][b][m][p] = sum over k in the split of
	 * wt[b*a_st[0] + m*a_st[1] + k*a_st[2]] * x[b*b_st[0] + k*b_st[1] + p*b_st[2]]
	 * for b < n, m < cout (A's rows), p < ow (B's columns; oh 1) and k <
	 * cin (kh = kw = 1): MatMul and Gemm. A batch stride of 0 gives every
	 * product the same matrix. */
	MC_TMPL_GEMM,
	/* Attention without past, causal frontier or softcap (the cuda target,
	 * aot/kern_cuda.c): out at y_st = softmax over keys of scale * Q.K
	 * [+ mask] times V, each operand read at its strides over [n, head,
	 * row, column] from q_at, k_at, v_at (x: Q [n][hq][sq][hd], wt: K
	 * [n][hkv][skv][hd], v: V [.][.][skv][hdv], mask: [n][hq][sq][skv],
	 * broadcast dims stride 0), query head h reading kv head h / (hq /
	 * hkv). `out` is transient. */
	MC_TMPL_ATTENTION,
	/* Integer tiles of SMLAD pairs (aot/kern_qdual.c; the C target, where
	 * the runtime's Cortex-M micro-kernels hold every sum, pair and pointer
	 * in the core's registers, which a C compiler's allocation of the same
	 * loop does not: modelc_dot2_2x3 and modelc_dot2_4x1 of modelc_rt.h).
	 * wt holds each tile's tm biases, then its kp x tm/2 weight words
	 * (W = tm + kp * tm/2 words a tile). For t < tiles, i < tm, j < tp:
	 *   out[(t*tm + i)*tp + j] = wt[t*W + i] + the sum over k < kp of
	 *     DOT2(SXTB16 (SXTB16_HI where i is odd) of wt[t*W + tm + k*(tm/2) + i/2],
	 *          x[k*tp + j]),
	 * wrapping; i32 buffers, x and out from index 0, wt from wt_at (an
	 * index expression: the tiles of a chunk of channels). (tm, tp) is
	 * (2, 3) or (4, 1), kp a multiple of mc_dot2_kp_multiple(tm) (the k
	 * pairs a step of the micro-kernel's loop). Unlike CONV2D_SPLITK it
	 * may sit inside loops: the loop over pixel blocks writes x and reads
	 * out around it. */
	MC_TMPL_DOT2_TILES,
	/* The pairs DOT2_TILES reads of an int8 row, four bytes a word load
	 * (the runtime's modelc_s8_pairs): for q < kp / 2, h < 2,
	 *   out[2q + h] = x[x_at + 4q + h] in the low half-word and
	 *                 x[x_at + 4q + h + 2] in the high one,
	 * sign-extended (SXTB16 of the word and of its rotation by 8); x int8,
	 * out i32 from index 0, kp even. Written from the last word down, so
	 * that out may start where x's row does. */
	MC_TMPL_S8_PAIRS,
	/* Float row-vector products in blocks of MC_GEMV_BLOCK rows (the
	 * runtime's modelc_gemv8_f32: on a Cortex-M with the single-precision
	 * FPU a hand-scheduled loop of VLDM and VMLA, about 1.08 instructions a
	 * multiply-add, where a C compiler's scalar tiles take 3 or more). wt
	 * holds each block's k x MC_GEMV_BLOCK weights, k-major; bias (-1:
	 * none, zeros) MC_GEMV_BLOCK a block. For t < tiles, i < MC_GEMV_BLOCK:
	 *   out[t*MC_GEMV_BLOCK + i] = bias[t*MC_GEMV_BLOCK + i]
	 *     + wt[(t*kp + k)*MC_GEMV_BLOCK + i] * x[x_at + k] for k = 0 .. kp-1,
	 * added in that order, each a multiply rounded then an add rounded
	 * (VMLA, not a fused VFMA: the C fallback's bits); f32 buffers, wt,
	 * bias and out from index 0. May sit inside loops, like DOT2_TILES. */
	MC_TMPL_GEMV_F32,
	/* The step of a GRU with linear_before_reset and its default gates
	 * (sigmoid, tanh; no clip) after its two products, each unit's three
	 * sums side by side (the products' rows interleaved), for j < kp:
	 *   z = sigmoid(x[3j] + wt[3j]), r = sigmoid(x[3j+1] + wt[3j+1]),
	 *   c = tanh(x[3j+2] + r * wt[3j+2]),
	 *   out[j] = (1 - z) * c + z * out[j], and y[y_at + j] = out[j] (y -1: none),
	 * sigmoid and tanh kmath's (aot/kmath.h), x the input's product, wt the
	 * state's, out the state; f32 buffers from index 0. The statement's
	 * body computes the same in plain IR: the C target runs the runtime's
	 * modelc_gru_gates_f32 where the core has the single-precision FPU (a
	 * hand-scheduled loop with kmath's constants in 23 registers, loaded
	 * from `consts`, MC_KMATH_GATE_CONSTS of them: mc_kmath_gate_consts), the
	 * body elsewhere. The two give the same bits: the loop performs the
	 * body's operations in its order. */
	MC_TMPL_GRU_GATES,
	/* The same for an LSTM without peepholes or clip, its default
	 * activations (modelc_lstm_gates_f32), sums i, o, f, g at 4j, `cell` the
	 * cell state: c = sigmoid(f) cell[j] + sigmoid(i) tanh(g) into cell[j],
	 * out[j] = sigmoid(o) tanh(c) = y[y_at + j], each sum x's plus wt's. */
	MC_TMPL_LSTM_GATES,
	/* --blas openblas (the C target): a batched float product by the
	 * BLAS's cblas_sgemm, row-major:
	 *   out[(b*cout + m)*ow + p] = scale * sum over k < cin of
	 *     wt[b*a_st[0] + m*a_st[1] + k*a_st[2]] * x[b*b_st[0] + k*b_st[1] + p*b_st[2]]
	 * for b < n, m < cout, p < ow; each operand's a_st[1] or a_st[2] (b_st
	 * the same) is 1 (a matrix read as stored, or transposed). The sums'
	 * order is the BLAS's (results within float tolerance of the
	 * generated tiles', not their bits). */
	MC_TMPL_SGEMM,
} mc_tmpl_kind;

/* --blas openblas: the products OpenBLAS's sgemm runs faster than the
 * generated tiles on one core (bench/blas/run, bench/RESULTS.md): with
 * 8-lane vectors (AVX2) at least 64 rows, 128 columns and a depth of 128
 * (1.1-1.3x there; fewer rows lose up to 7x, a thin 3136 x 64 x 64 15%);
 * with 16 lanes (AVX-512: MC_BLAS_MAX_LANES) none, the tiles 1.02-2x
 * faster at every size measured. */
#define MC_BLAS_MAX_LANES 8
#define MC_BLAS_MIN_ROWS 64
#define MC_BLAS_MIN_COLS 128
#define MC_BLAS_MIN_DEPTH 128

#define MC_KMATH_GATE_CONSTS 23 /* GRU/LSTM_GATES: kmath's constants the micro-kernels keep in registers */
#define MC_GEMV_BLOCK 8 /* GEMV_F32's rows a block: 8 sums, two k's 16 weights and 8 of x fill the 32 registers */

typedef struct mc_ktemplate {
	mc_tmpl_kind kind;
	int64_t n, cin, h, w, cout, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw;
	int64_t splits, k_split;
	bool mma;                 /* on tensor cores (isa->mma); wt is M x K */
	int k_step;               /* k a step of the tensor-core form (isa->mma_k); k_split a multiple */
	bool wt_tf32;             /* wt's floats are already rounded to TF32 (the template's operands) */
	bool x_tf32;              /* GEMM: x's too */
	int64_t a_st[3], b_st[3]; /* GEMM: the operands' strides (kind's comment) */
	int64_t hq, hkv, sq, skv, hd, hdv;   /* ATTENTION's sizes (kind's comment) */
	int64_t q_st[4], k_st[4], v_st[4], m_st[4], y_st[4];
	int64_t q_at, k_at, v_at;            /* ATTENTION: Q's, K's, V's element 0 in their buffers */
	int v, mask;                         /* ATTENTION: V's buffer, the mask's (-1: none) */
	double scale;
	/* One split: the target passes each sum straight to the loop nest that
	 * follows (over out's [n][cout][oh][ow], which loads out at its linear
	 * index once), so `out` is transient: it has no storage. */
	bool direct;
	/* CONV2D_SPLITK channels-last (NhwcConv): x is [n][h][w][cin], k runs
	 * over (i, j, ci), ci fastest (wt packed so), and out (the splits' and
	 * the nest's) is [n][p][cout] */
	bool nhwc;
	int x, wt, out;           /* kernel buffers */
	int bias;                 /* GEMV_F32: the blocks' biases; -1: none */
	int y, consts, cell;      /* GRU/LSTM_GATES: Y (-1: none), kmath's constants, C */
	struct mc_kexpr *y_at;    /* GRU/LSTM_GATES: the step's row of Y */
	/* DOT2_TILES: k pairs, channels and pixels a tile, tiles; GEMV_F32: kp
	 * the reduction's length, tiles the blocks; CONV2D_SPLITK and GEMM:
	 * tiles the output's 64 x 64 tiles (the splits' plan) */
	int64_t kp, tm, tp, tiles;
	struct mc_kexpr *wt_at;
	struct mc_kexpr *x_at;    /* S8_PAIRS, GEMV_F32: the row's first element in x */
} mc_ktemplate;

/* Hints for the emitters; C may ignore them. */
enum {
	MC_KF_UNROLL = 1u << 0,
	MC_KF_VECTOR = 1u << 1,
	MC_KF_PARALLEL = 1u << 2, /* iterations independent (CUDA grid, threads) */
	MC_KF_REDUCE = 1u << 3,   /* reduction loop */
	/* --threads: a parallel loop the workers split whatever its work
	 * (aot/ksplit.c): it reads rows the kernel before left in each
	 * worker's cache, a transfer its statement count does not show */
	MC_KF_SPLIT_ANY = 1u << 4,
};

typedef struct mc_kstmt {
	mc_kstmt_kind kind;
	struct mc_kstmt *next;   /* next statement of the same block */
	int var;                 /* FOR, DECL, ASSIGN */
	int buf;                 /* STORE */
	int code;                /* FAIL */
	unsigned flags;          /* FOR: MC_KF_* */
	mc_kexpr *a, *b, *c;     /* FOR: begin, end; DECL/ASSIGN: value (a);
	                          * STORE: index (a), value (b); IF: cond (a) */
	struct mc_kstmt *body;   /* FOR, IF-then */
	struct mc_kstmt *orelse; /* IF-else */
	const mc_ktemplate *tmpl; /* TEMPLATE */
} mc_kstmt;

/* Where a kernel buffer lives once the memory plan is done. */
typedef enum {
	MC_LOC_NONE,
	MC_LOC_ARENA,    /* arena + offset */
	MC_LOC_WEIGHT,   /* frozen constant number `index` */
	MC_LOC_INPUT,    /* inputs[index] */
	MC_LOC_OUTPUT,   /* outputs[index] */
} mc_loc_kind;

typedef struct {
	mc_loc_kind kind;
	int index;
	size_t offset;
} mc_loc;

typedef struct {
	int value;        /* graph value id, or -1 for kernel scratch */
	mc_dtype dtype;   /* storage dtype */
	size_t count;     /* elements */
	bool written;     /* the kernel stores into it */
	mc_loc loc;       /* filled in by the plan before emission */
	size_t slab;      /* of loc.offset, the bytes into its storage (a Concat's input) */
	/* A constant the lowering made (weights re-laid at generation time in
	 * the order the kernel reads them): value is -1, the kernel owns it,
	 * and it becomes one of the program's weights. */
	mc_tensor *packed;
	/* Scratch whose values pass in registers (a direct template's out):
	 * the plan gives it no bytes and no place (loc MC_LOC_NONE). */
	bool transient;
	/* Scratch the plan may lay over buffer grows_over (a value read here,
	 * -1: none) where that value dies in this kernel and no other buffer
	 * reads its storage, the scratch the larger: the kernel reads that
	 * buffer only to fill the scratch, in an order that never overwrites
	 * what it has yet to read. */
	int grows_over;
	/* Scratch private to the iterations of a split loop (--threads,
	 * aot/ksplit.c): one copy of `count` elements a chunk (0: one). */
	int copies;
} mc_kbuf;

/* The elements a buffer's storage holds: its copies' (mc_kbuf.copies). */
static inline size_t mc_kbuf_storage_count(const mc_kbuf *b)
{
	return b->count * (size_t)(b->copies > 1 ? b->copies : 1);
}

typedef struct {
	mc_ktype type;
	bool mutable_;    /* assigned after its declaration */
	bool is_loop;     /* FOR variable */
	int lanes;        /* > 1: a vector variable */
} mc_kvar;

typedef struct mc_kernel {
	char *name;       /* "k12_conv1": unique, a C identifier suffix */
	char *comment;    /* the nodes it computes, for readers of the code */
	int n_bufs, cap_bufs;
	mc_kbuf *bufs;
	int n_vars, cap_vars;
	mc_kvar *vars;
	mc_kstmt *body;
	/* The kernel may write its output over its anchor's input 0 (the plan
	 * gives them one offset where that input dies here): it never stores
	 * where it has yet to read (aot/kern_conv.c's row ring); grows: the
	 * output may be the larger. */
	bool inplace_input0, inplace_grows;
	/* --threads: the top-level nests the workers split (aot/ksplit.c) */
	int n_splits;
	struct mc_ksplit *splits;
} mc_kernel;

/* A top-level nest the workers split as one range of `count` iterations:
 * levels[0] is the kernel's loop, each next level the body of the one
 * before (after lets); iteration f of the range is the levels' indices,
 * the last level's varying fastest. chunks 0: the range splits anywhere;
 * > 0: into exactly that many chunks of iterations, c * count / chunks
 * up to (c + 1) * count / chunks, chunk c on scratch copy c (mc_kbuf.copies). */
#define MC_KSPLIT_LEVELS 8
typedef struct mc_ksplit {
	const mc_kstmt *levels[MC_KSPLIT_LEVELS];
	int depth;
	int64_t count;
	int chunks;
} mc_ksplit;

/* ---- target instruction sets (--isa) ----
 * What a CPU target offers the kernel generators: the f32 vector widths the
 * emitter can print and how many vector (or, for scalar ISAs, float)
 * registers register blocking may fill. The generators choose tiles from
 * this; the C emitter prints vectors as the ISA's intrinsics. */
typedef enum {
	MC_ISA_GENERIC,   /* portable C99, scalar code */
	MC_ISA_AVX2,      /* x86-64 AVX2 + FMA: 8 and 4 lanes, 16 registers */
	MC_ISA_AVX512,    /* x86-64 AVX-512F/VL: 16, 8 and 4 lanes, 32 registers
	                   * ("avx512-vnni": and VNNI, which integer kernels use) */
	MC_ISA_NEON,      /* AArch64 Advanced SIMD: 4 lanes, 32 registers */
	MC_ISA_CORTEX_M,  /* Cortex-M4F/M7 FPU: scalar, 32 single registers */
	MC_ISA_CUDA,      /* the cuda target: scalar code, one thread per
	                   * iteration of the parallel loops; never --isa */
} mc_isa_kind;

typedef struct mc_isa {
	mc_isa_kind kind;
	const char *name;       /* as --isa spells it */
	int max_lanes;          /* widest f32 vector; 1: no vectors */
	int vregs;              /* registers a micro-kernel may fill */
	bool mma;               /* cuda: convolutions multiply on tensor cores */
	int mma_k;              /* k a tensor-core step: 64 with half operands, 32 with TF32 */
	bool mma_tf32;          /* the operands are TF32 (fp32 storage), not half */
	bool dot4;              /* integer kernels take DOT4 (VNNI, sdot), not DOT2 pairs */
	bool dot4_signed;       /* DOT4 takes signed bytes by signed (NEON sdot), not unsigned by signed (VNNI) */
} mc_isa;

/* "generic", "avx2", "avx512", "avx512-vnni", "neon", "neon-dotprod",
 * "cortex-m"; "native": the widest this machine runs. NULL if unknown. */
const mc_isa *mc_isa_find(const char *name);
/* The cuda target's ISA (mc_isa_find does not name it); mma: convolutions
 * on tensor cores (--dtype fp16 or --tf32, every arch sm_80 or newer),
 * half: their operands are half (--dtype fp16), else TF32. */
const mc_isa *mc_isa_cuda(bool mma, bool half);
/* True if vectors of `lanes` f32 exist on isa (1 is always true). */
bool mc_isa_has_lanes(const mc_isa *isa, int lanes);
/* The widest lane count of isa that is <= n (1 if none). */
int mc_isa_lanes_upto(const mc_isa *isa, int64_t n);

/* ---- kernel builder: appends statements at a cursor, like LLVM's
 * IRBuilder. All IR memory comes from the builder's pool and lives until
 * mc_kpool_free. ---- */
typedef struct mc_kpool mc_kpool;
mc_kpool *mc_kpool_new(void);
void mc_kpool_free(mc_kpool *p);
void *mc_kpool_alloc(mc_kpool *p, size_t n); /* zeroed */
/* arr (of *cap elements of elt bytes) grown to hold at least need, the new
 * elements zeroed; aborts on OOM (IR-sized, never model-data-sized). */
void *mc_grow_array(void *arr, int *cap, int need, size_t elt);
char *mc_kpool_strdup(mc_kpool *p, const char *s);

#define MC_KB_MAX_DEPTH 64
typedef struct mc_kb {
	mc_kpool *pool;
	mc_kernel *k;
	/* Open blocks: the tail pointer of each, innermost last. */
	mc_kstmt **tail[MC_KB_MAX_DEPTH];
	mc_kstmt *open[MC_KB_MAX_DEPTH]; /* FOR/IF owning block d, NULL at 0 */
	int depth;
	const mc_isa *isa;       /* the target's; never NULL (generic by default) */
	const mc_target *target; /* never NULL (the C target by default) */
	/* --optimize memory: the lowerings trade time for arena bytes (no
	 * Winograd scratch; outputs written over a dying input, below);
	 * --optimize size: for flash (no Winograd weights) */
	bool for_memory, for_size;
	/* The anchor's input 0 dies at this kernel (no later kernel reads its
	 * storage), so a lowering may write over it (mc_kernel.inplace_input0) */
	bool input0_dies;
	/* --threads N: the workers that may split the kernel's parallel loops
	 * (aot/ksplit.c); 1 for one */
	int threads;
	/* --blas openblas: large float products may call cblas_sgemm
	 * (MC_TMPL_SGEMM, the C target): those of MC_BLAS_MIN_ROWS rows and
	 * more (and columns, depth), or with blas_min_macs > 0 those of that
	 * many multiply-adds */
	bool blas;
	int64_t blas_min_macs;
	/* --dim NAME=LO..HI: the program is built at every size and the
	 * kernels merged (aot/dynamic.c), so a lowering keeps its statements
	 * the same at every size where that costs little: counts that depend
	 * on a shape computed at run time from a variable, not folded */
	bool sizes_vary;
} mc_kb;

void mc_kb_begin(mc_kb *kb, mc_kpool *pool, mc_kernel *k);
/* Buffers: a graph value read (written=false) or written; scratch is a
 * kernel-private arena area the plan allocates for this kernel only. */
int mc_kb_buf(mc_kb *kb, int value, mc_dtype dtype, size_t count, bool written);
int mc_kb_scratch(mc_kb *kb, mc_dtype dtype, size_t count);
/* Scratch the plan may lay over buffer `over` (see mc_kbuf.grows_over). */
int mc_kb_scratch_over(mc_kb *kb, mc_dtype dtype, size_t count, int over);
/* Scratch that never reaches memory (see mc_kbuf.transient). */
int mc_kb_transient(mc_kb *kb, mc_dtype dtype, size_t count);
/* A constant made by the lowering (takes ownership of t): see mc_kbuf.packed. */
int mc_kb_packed(mc_kb *kb, mc_tensor *t);

/* Expressions. Integer helpers fold constants (0 + x, 1 * x, 2 * 3) so that
 * the printed index arithmetic stays readable. */
mc_kexpr *mc_k_index(mc_kb *kb, int64_t v);           /* MC_KT_INDEX constant */
mc_kexpr *mc_k_int(mc_kb *kb, mc_ktype t, int64_t v);
mc_kexpr *mc_k_float(mc_kb *kb, mc_ktype t, double v);
mc_kexpr *mc_k_const_as(mc_kb *kb, mc_ktype t, double v); /* int or float by t */
mc_kexpr *mc_k_var(mc_kb *kb, int var);
mc_kexpr *mc_k_load(mc_kb *kb, int buf, mc_kexpr *index);
mc_kexpr *mc_k_un(mc_kb *kb, mc_kunop op, mc_kexpr *a);
mc_kexpr *mc_k_sigmoid(mc_kb *kb, mc_kexpr *x); /* 1 / (1 + e^-x) */
mc_kexpr *mc_k_bin(mc_kb *kb, mc_kbinop op, mc_kexpr *a, mc_kexpr *b); /* same types */
mc_kexpr *mc_k_select(mc_kb *kb, mc_kexpr *cond, mc_kexpr *a, mc_kexpr *b);
mc_kexpr *mc_k_cast(mc_kb *kb, mc_ktype t, mc_kexpr *a); /* no-op if already t */
mc_kexpr *mc_k_fma(mc_kb *kb, mc_kexpr *a, mc_kexpr *b, mc_kexpr *c);
mc_kexpr *mc_k_bits(mc_kb *kb, mc_ktype t, mc_kexpr *a); /* MC_KE_BITS: f32 <-> i32 */
mc_kexpr *mc_k_splits(mc_kb *kb, int out); /* MC_KE_SPLITS of the template writing buffer out */
mc_kexpr *mc_k_dot2(mc_kb *kb, mc_kexpr *a, mc_kexpr *b, mc_kexpr *acc); /* MC_KE_DOT2, i32 */
mc_kexpr *mc_k_dot4(mc_kb *kb, mc_kexpr *a, mc_kexpr *b, mc_kexpr *acc, bool a_signed); /* MC_KE_DOT4, i32 */
enum { MC_RQ32_TWICE = 1, MC_RQ32_HALF_UP = 2 }; /* RQ32's forms (its i) */
mc_kexpr *mc_k_rq32(mc_kb *kb, mc_kexpr *acc, mc_kexpr *mult, mc_kexpr *low, int form); /* MC_KE_RQ32 */
#define mc_k_add(kb, a, b) mc_k_bin((kb), MC_KB_ADD, (a), (b))
#define mc_k_sub(kb, a, b) mc_k_bin((kb), MC_KB_SUB, (a), (b))
#define mc_k_mul(kb, a, b) mc_k_bin((kb), MC_KB_MUL, (a), (b))
#define mc_k_div(kb, a, b) mc_k_bin((kb), MC_KB_DIV, (a), (b))
/* Index arithmetic shorthands: a + c, a * c with a constant c. */
mc_kexpr *mc_k_addi(mc_kb *kb, mc_kexpr *a, int64_t c);
mc_kexpr *mc_k_muli(mc_kb *kb, mc_kexpr *a, int64_t c);
bool mc_k_is_const(const mc_kexpr *e, int64_t *v);
/* Vectors (see above). */
mc_kexpr *mc_k_vload(mc_kb *kb, int buf, mc_kexpr *index, int lanes);
mc_kexpr *mc_k_vload2(mc_kb *kb, int buf, mc_kexpr *index, int lanes); /* stride 2, 8-bit */
mc_kexpr *mc_k_splat(mc_kb *kb, mc_kexpr *scalar, int lanes);
mc_kexpr *mc_k_lane(mc_kb *kb, mc_kexpr *vec, int lane);
int mc_k_lanes(const mc_kexpr *e); /* 1 for a scalar */
bool mc_k_int_vector_dtype(mc_dtype dt); /* i32 vectors load and store it */
bool mc_k_vector_op(mc_ktype elt, mc_kbinop op); /* op has a vector form on elt */

/* Statements. mc_kb_for opens a loop and returns its variable (as an
 * expression); mc_kb_if opens the then-block; mc_kb_else switches to the
 * else-block; mc_kb_end closes the innermost open FOR or IF. */
mc_kexpr *mc_kb_for(mc_kb *kb, mc_kexpr *begin, mc_kexpr *end, unsigned flags);
mc_kexpr *mc_kb_fori(mc_kb *kb, int64_t end, unsigned flags); /* 0..end */
void mc_kb_if(mc_kb *kb, mc_kexpr *cond);
void mc_kb_else(mc_kb *kb);
void mc_kb_end(mc_kb *kb);
void mc_kb_end_n(mc_kb *kb, int n);
mc_kexpr *mc_kb_let(mc_kb *kb, mc_kexpr *init);           /* immutable local */
mc_kexpr *mc_kb_local(mc_kb *kb, mc_kexpr *init);         /* mutable local */
void mc_kb_assign(mc_kb *kb, mc_kexpr *var, mc_kexpr *value);
void mc_kb_store(mc_kb *kb, int buf, mc_kexpr *index, mc_kexpr *value);
void mc_kb_break(mc_kb *kb);
void mc_kb_fail(mc_kb *kb, int status);
void mc_kb_template(mc_kb *kb, const mc_ktemplate *t); /* copies t */

/* A loop's body s (its loop variable marked in inner): false where it
 * assigns a variable declared outside it, breaks out of it, fails or
 * holds a template; inner (n_vars + 1) gets the variables it declares,
 * loaded and stored (n_bufs + 1; NULL: not wanted) the buffers it loads
 * and stores. Whether its iterations may run apart (a GPU's lanes,
 * workers), with what the caller asks of the buffers. */
bool mc_kbody_closed(const mc_kstmt *s, bool *inner, bool *loaded, bool *stored);

/* --threads (aot/ksplit.c): k's splits for `workers` workers (none below
 * two), and its private scratch's copies; a loop splits from min_work
 * statement runs (its iterations' statements, each loop's counted its
 * trips' times). */
void mc_ksplit_plan(mc_kpool *pool, mc_kernel *k, int workers, int64_t min_work);
/* The default min_work: a parallel_for costs a pool about 1.5 us (two
 * cores handing cache lines over, runtime-min's pool on a 2-core host);
 * a loop of fewer statement runs (a few microseconds) gains less than
 * that from a second worker. */
#define MC_SPLIT_MIN_WORK 16384
/* A parallel loop of constant bounds [*from, *from + *count). */
bool mc_ksplit_const_parallel(const mc_kstmt *s, int64_t *from, int64_t *count);
/* Marks in loaded[] the buffers expression x loads. */
void mc_kexpr_mark_loads(const mc_kexpr *x, bool *loaded);
/* A template whose statement holds the same computation in plain IR (its
 * body, built next, up to mc_kb_end), for targets and cores without the
 * runtime's micro-kernel (GRU_GATES, LSTM_GATES). */
void mc_kb_template_open(mc_kb *kb, const mc_ktemplate *t);
int64_t mc_dot2_kp_multiple(int64_t tm); /* DOT2_TILES: kp's multiple for tiles of tm channels */

/* A deep copy of k in pool (expressions shared in k are copied apart;
 * packed constants and splits are left out: the copy is IR only). */
mc_kernel *mc_kernel_clone(mc_kpool *pool, const mc_kernel *k);

/* Readable text of a kernel (--dump-after, tests). */
void mc_kernel_dump(const mc_kernel *k, FILE *f);

/* The kernel IR verifier (aot/kcheck.c): types and lane counts agree as
 * the builder makes them, ids in range, stores only into written buffers,
 * BREAK inside a FOR, legal loop marks, variables declared before use, and
 * no load or store outside its buffer where the index's range is known to
 * be reached (exactly affine over loops with constant bounds, unguarded);
 * indices it cannot prove inside nor outside are skipped, never reported.
 * 0, or -1 with a one-line reason naming the kernel in why. */
int mc_kernel_check(const mc_kernel *k, char *why, size_t n);

/* ---- run-time status codes of the generated run function ---- */
enum {
	MC_STATUS_OK = 0,
	MC_STATUS_NULL_ARGUMENT = 1,  /* arena, inputs or outputs NULL */
	MC_STATUS_MISALIGNED = 2,     /* arena not aligned to ARENA_ALIGN, or an input or output pointer
	                                 * not to its element's size */
	MC_STATUS_BAD_INDEX = 3,      /* an index input out of range (Gather, ...) */
	MC_STATUS_BAD_INPUT = 4,      /* other invalid input data */
	MC_STATUS_BAD_DIM = 6,        /* a dynamic dimension's size outside its bounds */
	MC_STATUS_BRANCH = 7,         /* an If branch taken that cannot run with the model's shapes */
};

#endif
