/* modelc ahead-of-time core: the loop-level kernel IR, lowering of graph
 * nodes into it, fusion groups, the static memory plan and the compile
 * pipeline. Targets (targets/c, cuda, llvm) read what this header describes
 * and only print it; they never look at ONNX semantics. */
#ifndef MODELC_AOT_H
#define MODELC_AOT_H

#include <stdio.h>

#include "../libcore/modelc.h"

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
	struct mc_kexpr *a, *b, *c; /* operands; LOAD's index is a */
} mc_kexpr;

/* ---- kernel IR: vectors ----
 * An expression (or variable) with lanes > 1 holds that many f32 values:
 * f32 is the only vector element type so far. A vector load or store
 * touches `lanes` consecutive elements of an f32 buffer starting at its
 * index (no alignment required). ADD, SUB, MUL, DIV, MIN, MAX, FMA, NEG and
 * SELECT work lane by lane, and so do the compares, whose vector of bools
 * may only feed a SELECT's condition. The builder splats a scalar operand
 * of a vector operation. Which lane counts exist is the target ISA's
 * (mc_isa_has_lanes); lowerings ask before building vectors, and build
 * scalar code (lanes 1) for the generic ISA and for tails. */

/* ---- kernel IR: statements ---- */
typedef enum {
	MC_KS_FOR,     /* for (var = begin; var < end; var++) body */
	MC_KS_DECL,    /* declares var = init (a value or a mutable local) */
	MC_KS_ASSIGN,  /* var = value */
	MC_KS_STORE,   /* buffer[index] = value (converted to the storage dtype) */
	MC_KS_IF,      /* if (cond) body else orelse */
	MC_KS_BREAK,   /* leaves the innermost FOR */
	MC_KS_FAIL,    /* the kernel returns status `code` (bad data at run time) */
	MC_KS_TEMPLATE,/* a target template computes `tmpl` (cuda only, see below) */
} mc_kstmt_kind;

/* Templates: computations a target implements with a hand-tuned kernel of
 * its own where loops of scalar IR cannot use the hardware well (shared
 * memory tiles, tensor cores). Lowerings emit them only for a target that
 * has them (kb->isa), as one top-level statement of a kernel, whose other
 * statements finish the job in plain IR (bias, splits, fused epilogues). */
typedef enum {
	/* 2-D convolution, NCHW float32, group 1, as an implicit GEMM in K
	 * splits: out[s][n][m][p] = sum over k in [s*k_split, (s+1)*k_split) of
	 * wt[k][m] * x[n][ci][ih][iw], with k = (ci*kh + i)*kw + j, p = oh*ow_n + ow,
	 * ih = oh*sh - ph + i*dh, iw = ow*sw - pw + j*dw, x taken as 0 outside
	 * the image. wt is the weight re-laid K x M at generation time, or kept
	 * M x K where `mma` (the tensor-core form reads rows of k). */
	MC_TMPL_CONV2D_SPLITK,
} mc_tmpl_kind;

typedef struct mc_ktemplate {
	mc_tmpl_kind kind;
	int64_t n, cin, h, w, cout, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw;
	int64_t splits, k_split;
	bool mma;                 /* on tensor cores (isa->mma); wt is M x K */
	int k_step;               /* k a step of the tensor-core form (isa->mma_k); k_split a multiple */
	bool wt_tf32;             /* wt's floats are already rounded to TF32 (the template's operands) */
	int x, wt, out;           /* kernel buffers */
} mc_ktemplate;

/* Hints for the emitters; C may ignore them. */
enum {
	MC_KF_UNROLL = 1u << 0,
	MC_KF_VECTOR = 1u << 1,
	MC_KF_PARALLEL = 1u << 2, /* iterations independent (CUDA grid, threads) */
	MC_KF_REDUCE = 1u << 3,   /* reduction loop */
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
} mc_kbuf;

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
} mc_kernel;

/* ---- target instruction sets (--isa) ----
 * What a CPU target offers the kernel generators: the f32 vector widths the
 * emitter can print and how many vector (or, for scalar ISAs, float)
 * registers register blocking may fill. The generators choose tiles from
 * this; the C emitter prints vectors as the ISA's intrinsics. */
typedef enum {
	MC_ISA_GENERIC,   /* portable C99, scalar code */
	MC_ISA_AVX2,      /* x86-64 AVX2 + FMA: 8 and 4 lanes, 16 registers */
	MC_ISA_AVX512,    /* x86-64 AVX-512F/VL: 16, 8 and 4 lanes, 32 registers */
	MC_ISA_NEON,      /* AArch64 Advanced SIMD: 4 lanes, 32 registers */
	MC_ISA_CORTEX_M,  /* Cortex-M4F/M7 FPU: scalar, 32 single registers */
	MC_ISA_CUDA,      /* the cuda target: scalar code, one thread per
	                   * iteration of the parallel loops; never --isa */
} mc_isa_kind;

typedef struct {
	mc_isa_kind kind;
	const char *name;       /* as --isa spells it */
	int max_lanes;          /* widest f32 vector; 1: no vectors */
	int vregs;              /* registers a micro-kernel may fill */
	bool mma;               /* cuda: convolutions multiply on tensor cores */
	int mma_k;              /* k a tensor-core step: 64 with half operands, 32 with TF32 */
	bool mma_tf32;          /* the operands are TF32 (fp32 storage), not half */
} mc_isa;

/* "generic", "avx2", "avx512", "neon", "cortex-m"; "native": the widest this
 * machine runs. NULL if unknown. */
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
} mc_kb;

void mc_kb_begin(mc_kb *kb, mc_kpool *pool, mc_kernel *k);
/* Buffers: a graph value read (written=false) or written; scratch is a
 * kernel-private arena area the plan allocates for this kernel only. */
int mc_kb_buf(mc_kb *kb, int value, mc_dtype dtype, size_t count, bool written);
int mc_kb_scratch(mc_kb *kb, mc_dtype dtype, size_t count);
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
mc_kexpr *mc_k_bin(mc_kb *kb, mc_kbinop op, mc_kexpr *a, mc_kexpr *b); /* same types */
mc_kexpr *mc_k_select(mc_kb *kb, mc_kexpr *cond, mc_kexpr *a, mc_kexpr *b);
mc_kexpr *mc_k_cast(mc_kb *kb, mc_ktype t, mc_kexpr *a); /* no-op if already t */
mc_kexpr *mc_k_fma(mc_kb *kb, mc_kexpr *a, mc_kexpr *b, mc_kexpr *c);
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
mc_kexpr *mc_k_splat(mc_kb *kb, mc_kexpr *scalar, int lanes);
mc_kexpr *mc_k_lane(mc_kb *kb, mc_kexpr *vec, int lane);
int mc_k_lanes(const mc_kexpr *e); /* 1 for a scalar */

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
	MC_STATUS_MISALIGNED = 2,     /* arena not aligned to ARENA_ALIGN */
	MC_STATUS_BAD_INDEX = 3,      /* an index input out of range (Gather, ...) */
	MC_STATUS_BAD_INPUT = 4,      /* other invalid input data */
};

/* ---- fusion groups and the schedule ---- */
/* One step of the program: a group of nodes computed by one kernel. The
 * anchor is lowered by its own lowering; each epilogue node is pointwise
 * and consumes the previous member's output (input `chain_in`), inlined
 * into the anchor's stores. Only the last member's output is stored. */
#define MC_MAX_EPILOGUE 16
typedef struct {
	int anchor;                       /* node index */
	int n_epi;
	int epi[MC_MAX_EPILOGUE];         /* node indices, in order */
	int epi_chain_in[MC_MAX_EPILOGUE];/* which input of epi[i] is the chain */
	bool alias;                       /* anchor's output shares its input's storage; no kernel */
	bool slabs;                       /* alias too: a Concat whose inputs are stored into it */
} mc_group;

/* ---- lowering: one entry per op, in aot/lower_*.c ---- */
typedef struct mc_lower_ctx mc_lower_ctx;
struct mc_lower_ctx {
	mc_kb *kb;
	const mc_graph *g;
	const mc_node *node;             /* the node being lowered */
	const mc_group *group;           /* its group (epilogue applies to output 0) */
	int n_in, n_out;
	const mc_value **in;             /* NULL if omitted */
	const mc_value **out;            /* NULL if omitted */
	int *in_buf;                     /* kernel buffer of each input, -1 if omitted */
	int *out_buf;                    /* kernel buffer each output stores into, -1 if omitted */
};

/* A lowering builds the node's kernel body with c->kb; it reads inputs with
 * mc_lower_load* and writes every output element exactly once through
 * mc_lower_store (which applies fused epilogues). -1 after reporting (for a
 * case it does not handle: name it, like "Resize mode 'cubic' has no C
 * lowering"). */
typedef int (*mc_lower_fn)(mc_lower_ctx *c);
/* Pointwise ops give the scalar result from scalar arguments (loaded in
 * their compute types, NULL for omitted inputs); the generic elementwise
 * kernel handles loops and broadcasting, and fusion chains them. */
typedef mc_kexpr *(*mc_pointwise_fn)(mc_lower_ctx *c, mc_kexpr *const *args);

typedef struct {
	const char *op;             /* ONNX op_type, default domain */
	mc_lower_fn lower;          /* NULL for pointwise-only entries */
	mc_pointwise_fn pointwise;  /* set for pointwise ops */
	unsigned flags;
} mc_lowering;

enum {
	/* Output 0 may carry a fused epilogue: each element is stored once,
	 * with its final value, through mc_lower_store. */
	MC_LOWER_EPILOGUE = 1u << 0,
	/* Output 0 is input 0's bytes reinterpreted (Reshape, Squeeze, ...):
	 * shares its storage; `lower` (a copy) runs only where sharing cannot. */
	MC_LOWER_ALIAS = 1u << 1,
};

/* Family tables (NULL-terminated), like the registry's. */
extern const mc_lowering *const mc_lower_elementwise[];
extern const mc_lowering *const mc_lower_nn[];
extern const mc_lowering *const mc_lower_tensor[];
extern const mc_lowering *const mc_lower_index[];
extern const mc_lowering *const mc_lower_reduce[];
extern const mc_lowering *const mc_lower_misc[];
const mc_lowering *mc_lowering_find(const char *op_type);

/* Toolbox for lowerings (aot/lower.c). */
/* Opens one loop per dim of s (outermost first) and puts the variables in
 * coords; close them with mc_kb_end_n(kb, s->rank). */
void mc_lower_loops(mc_kb *kb, const mc_shape *s, mc_kexpr **coords, unsigned flags);
/* Row-major linear index of coords in shape s. */
mc_kexpr *mc_lower_linear(mc_kb *kb, const mc_shape *s, mc_kexpr *const *coords);
/* Index into `in` broadcast to `out` (numpy rules, right-aligned) at the
 * coords of an element of `out`. */
mc_kexpr *mc_lower_bcast(mc_kb *kb, const mc_shape *in, const mc_shape *out,
                         mc_kexpr *const *coords);
/* Loads input i at a linear index (compute type of its dtype). */
mc_kexpr *mc_lower_load(mc_lower_ctx *c, int i, mc_kexpr *index);
/* Stores the value of output `k`'s element at coords (rank of the output;
 * may be NULL when lin is given and no epilogue needs coords) and linear
 * index lin (may be NULL: computed from coords). Applies the group's
 * epilogue to output 0 and converts to the storage dtype. */
void mc_lower_store(mc_lower_ctx *c, int k, mc_kexpr *const *coords, mc_kexpr *lin,
                    mc_kexpr *value);
/* The same for a vector value: its lanes are consecutive elements of output
 * k along its last dim, coords (and lin) those of the first lane. Fused
 * epilogues apply lane-wise where each epilogue op has a vector form and
 * each of its other operands is contiguous or constant along the last dim;
 * otherwise lane by lane. */
void mc_lower_store_vec(mc_lower_ctx *c, int k, mc_kexpr *const *coords, mc_kexpr *lin,
                        mc_kexpr *value);
/* The elementwise kernel of a pointwise op (l->pointwise) as anchor. */
int mc_lower_pointwise_kernel(mc_lower_ctx *c, const mc_lowering *l);
/* Output 0 = input 0, element by element: the `lower` of alias ops. */
int mc_lower_copy(mc_lower_ctx *c);
/* Lowers group gr into the kernel kb builds (registers its buffers). */
int mc_lower_group(const mc_graph *g, const mc_group *gr, mc_kb *kb, const mc_lowering *l);
/* Fast kernels (aot/kern_*.c), tried first by the lowerings of their ops:
 * 0 done, 1 not handled here (the caller builds its plain kernel), -1 after
 * reporting. They choose tiles from kb->isa and pack weights at generation
 * time (mc_kb_packed). */
int mc_kern_conv_nhwc(mc_lower_ctx *c);    /* NhwcConv, dense (group 1) */
int mc_kern_wino_nhwc(mc_lower_ctx *c);    /* NhwcConv 3x3 stride 1, Winograd F(2x2, 3x3) */
int mc_kern_dwconv_nhwc(mc_lower_ctx *c);  /* NhwcConv, depthwise */
int mc_kern_pool_nhwc(mc_lower_ctx *c);    /* NhwcMaxPool, NhwcAveragePool */
int mc_kern_gemm(mc_lower_ctx *c);         /* Gemm, MatMul with a constant B */
int mc_kern_conv_cuda(mc_lower_ctx *c);    /* Conv on the cuda target: MC_TMPL_CONV2D_SPLITK */
/* Multiply-accumulates of one run of g (Conv, ConvTranspose, Gemm, MatMul
 * and their internal forms), for --stats, NAME.json and the benchmarks. */
double mc_graph_macs(const mc_graph *g);

/* Constant input data at compile time (attributes that became inputs). */
const mc_tensor *mc_lower_const(const mc_lower_ctx *c, int i);
/* v is present and float32 (what the fast kernels handle). */
static inline bool mc_is_f32(const mc_value *v)
{
	return v && v->dtype == MC_FLOAT;
}
/* "node 'x' (Op, opset N): <msg>" like mc_node_error. */
int mc_lower_error(const mc_lower_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- memory plan (aot/plan.c): offsets in one arena ---- */
typedef struct {
	size_t bytes;     /* 0: not in the arena */
	int first, last;  /* steps (inclusive) during which the buffer is live */
	/* A buffer that dies at step `first` and whose storage this one may
	 * take over (in-place elementwise); -1 if none. */
	int inplace_of;
} mc_mem_req;

typedef struct {
	size_t arena_bytes;
	size_t lower_bound;   /* max over steps of the bytes live at that step */
	size_t *offsets;      /* per request (malloc'd) */
} mc_mem_plan;

/* Greedy by size, best fit, honouring in-place candidates where the
 * storage is still free; every offset a multiple of align. */
int mc_plan_memory(const mc_mem_req *reqs, int n, size_t align, mc_mem_plan *out);
void mc_mem_plan_free(mc_mem_plan *p);
/* A plan's invariants (aot/plan_check.c): every offset aligned, every
 * buffer inside arena_bytes, lower_bound <= arena_bytes, and no two buffers
 * live at one step overlapping in the arena, except a buffer and its
 * in-place source (followed link by link) at one offset, as
 * mc_plan_memory may place them. 0, or -1 with the reason in why.
 * mc_plan_memory runs it on every plan it makes. */
int mc_plan_check(const mc_mem_req *reqs, int n, size_t align, const mc_mem_plan *plan,
                  char *why, size_t why_len);

/* ---- the compiled program ---- */
typedef enum { MC_STEP_KERNEL, MC_STEP_IF } mc_step_kind;
typedef struct mc_step {
	mc_step_kind kind;
	int kernel;                 /* KERNEL: index in prog->kernels */
	mc_loc cond;                /* IF: a bool scalar's location */
	struct mc_step *then_steps, *else_steps; /* IF: arrays */
	int n_then, n_else;
} mc_step;

typedef struct {
	char *name;                 /* the graph's name for it */
	mc_dtype dtype;
	mc_shape shape;
} mc_io_desc;

typedef struct {
	const mc_tensor *t;         /* frozen data (owned by the graph) */
	size_t align;
} mc_weight;

typedef struct {
	char *prefix;               /* --name */
	mc_kpool *pool;
	int n_kernels, cap_kernels;
	mc_kernel **kernels;
	int n_steps, cap_steps;
	mc_step *steps;
	int n_weights, cap_weights;
	mc_weight *weights;
	int n_inputs, n_outputs;
	mc_io_desc *inputs, *outputs; /* value names, dtypes, shapes */
	size_t arena_bytes, arena_align, lower_bound;
	size_t weight_bytes;
	int64_t max_index;          /* largest element count of any buffer */
	const mc_isa *isa;          /* what the kernels were built for */
	double macs;                /* multiply-accumulates of one run (Conv, Gemm, MatMul...) */
	int n_owned;
	mc_tensor **owned;          /* weights the program made (mc_program_store_fp16) */
} mc_program;

void mc_program_free(mc_program *p);
/* mc_kernel_check on every kernel of p: 0, or -1 after reporting an
 * internal error (a bug in a lowering, not in the model). */
int mc_program_check(const mc_program *p);
/* --dtype fp16: every float32 weight and activation of p is stored as
 * float16 (kernels widen on load and round on store, computing in float32);
 * the graph's inputs and outputs and kernel scratch stay float32. The
 * memory plan is kept (each buffer in the first half of its place). */
int mc_program_store_fp16(mc_program *p);

/* ---- the compile pipeline (aot/compile.c) ---- */
typedef struct {
	const char *name;           /* prefix of every generated identifier/file */
	const char *target;         /* "c", "cuda" or "llvm" */
	const char *cuda_arch;      /* --cuda-arch sm_87,sm_90: the archs build.ninja's nvcc builds for */
	const char *dtype;          /* --dtype fp32|fp16 (cuda): fp16 stores activations and weights as
	                             * float16, computing in float32; NULL: fp32 */
	bool tf32;                  /* --tf32 (cuda, fp32): convolutions multiply in TF32 on tensor
	                             * cores (10-bit mantissa, float32 sums), as PyTorch's cuDNN does */
	const char *isa;            /* --isa: mc_isa_find's names; NULL: "generic" (llvm: from the triple) */
	const char *triple;         /* --triple (llvm): the target; NULL: this machine's */
	const char *cpu;            /* --cpu (llvm): LLVM's CPU name, or "native"; NULL: generic */
	const char *features;       /* --features (llvm): LLVM's +feat,-feat list; NULL: the CPU's */
	bool emit_llvm;             /* --emit-llvm (llvm): also write NAME.ll, the optimised IR */
	const char *opt;            /* --opt O3|Os|Oz (llvm): LLVM's pipeline; NULL: O3 (Os, Oz: smaller
	                             * code for microcontrollers' flash) */
	const char *layout;         /* --layout auto|nchw|nhwc; NULL: "auto" */
	mc_import_opts import;
	const char **bind_names;    /* --bind NAME=FILE|VALUE */
	const char **bind_values;
	int n_binds;
	size_t fold_limit;          /* bytes a folded constant may have */
	int unroll_limit;           /* --unroll-limit: nodes an unrolled Scan or Loop may make (0: 4096) */
	const char *dump_after;     /* pass name or "all"; NULL: no dumps */
	const char *dump_dir;       /* where dumps go (default OUT/debug) */
	bool stats;                 /* per-pass metrics on stderr */
	bool harness;               /* also write NAME_main.c, a test driver */
	bool no_fuse;               /* each node its own kernel (debugging) */
	bool no_stack_usage;        /* skip measuring NAME_run's stack (aot/stack.c) */
	const char *stack_cc;       /* compiler (and flags) that measures it; "cc" */
	const char *argv_line;      /* for NAME.json (reproducing the build) */
} mc_compile_opts;

void mc_compile_opts_init(mc_compile_opts *o);
/* model -> output directory. 0 on success; -1 after reporting. */
int mc_compile(const char *model_path, const char *out_dir, const mc_compile_opts *o);

/* Applies o's --bind options to an imported graph (before inference). */
int mc_apply_binds(mc_graph *g, const mc_compile_opts *o);
/* The pipeline from an inferred graph (after import, --bind and
 * inference): freezing, program, emission. model_abs (may be NULL) names the
 * model file for NAME.json and NAME.ninja; NAME.json's sha256 is g->sha256,
 * the digest mc_import_file took of the bytes it imported. */
int mc_compile_graph(mc_graph *g, const char *model_abs, const char *out_dir,
                     const mc_compile_opts *o);
/* NAME_main.c: a test driver for the compiled model (stdio and malloc, so
 * never part of the library): NAME_main OUTDIR IN0.bin IN1.bin ... reads raw
 * inputs, runs, writes OUTDIR/output_K.bin; exit status = run status. */
int mc_emit_harness(const mc_program *p, const mc_compile_opts *o, const char *dir);

/* ---- stack usage of the run function (aot/stack.c) ----
 * NAME.c is compiled with -fstack-usage (and, with gcc >= 10,
 * -fcallgraph-info=su); the worst case of NAME_run is its own frame plus the
 * deepest chain of functions it calls. A frame counts the bytes a function
 * moves the stack pointer by, the return address its caller pushed included. */
typedef enum {
	MC_FRAME_STATIC,     /* a fixed frame */
	MC_FRAME_BOUNDED,    /* variable, at most `bytes` ("dynamic,bounded") */
	MC_FRAME_DYNAMIC,    /* variable without a bound (alloca, VLA) */
	MC_FRAME_EXTERNAL,   /* defined elsewhere (libm's expf, memcpy): not counted */
	MC_FRAME_INDIRECT,   /* a call through a pointer: callee unknown */
} mc_frame_kind;

typedef struct {
	char *key;           /* .ci node title (static ones carry the file name) */
	char *name;          /* the function's name */
	mc_frame_kind kind;
	size_t bytes;
	int n_callees, cap_callees;
	int *callees;        /* indices in the graph, one per call edge */
} mc_stack_fn;

typedef struct {
	int n_fns, cap_fns;
	mc_stack_fn *fns;
	bool has_calls;      /* from a .ci: the call edges are known */
} mc_stack_graph;

/* Add a compiler's .su (one line per function: file:line[:col]:name, bytes,
 * qualifiers) or .ci (gcc's VCG call graph) text to g. 0, or -1 with the
 * reason in why. */
int mc_stack_parse_su(mc_stack_graph *g, const char *text, char *why, size_t n);
int mc_stack_parse_ci(mc_stack_graph *g, const char *text, char *why, size_t n);
void mc_stack_graph_free(mc_stack_graph *g);

typedef struct {
	bool bounded;
	size_t bytes;        /* bounded: the worst case */
	char why[256];       /* unbounded, or no such root: why */
	int n_excludes;
	char **excludes;     /* external callees reachable from the root, sorted */
} mc_stack_bound;

/* The worst-case stack depth of root. With call edges: its frame plus the
 * deepest path through its callees (recursion, an indirect call or a dynamic
 * frame on the way: unbounded; external callees listed, not counted).
 * Without (a .su alone): the sum of every frame, a bound because generated
 * code never recurses. 0, or -1 when root is not in g (why says so). */
int mc_stack_worst(const mc_stack_graph *g, const char *root, mc_stack_bound *b);
void mc_stack_bound_free(mc_stack_bound *b);

typedef struct {
	bool measured;       /* false: note says why (no compiler, it failed, ...) */
	char note[512];
	mc_stack_bound bound; /* bound.bytes includes red_zone */
	const char *method;  /* "callgraph" or "su-only" */
	char compiler[64];   /* "gcc 12.2.0", "clang 14.0.6" */
	char target[64];     /* the compiler's -dumpmachine */
	char flags[512];     /* flags of the measuring compile */
	size_t red_zone;     /* bytes below the stack pointer a leaf may use (x86-64 SysV: 128) */
	double ms;           /* time taken */
} mc_stack_usage;

/* Measures NAME_run's stack from dir/NAME.c with cc ("gcc", or words such
 * as "arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb"). Its temporary files
 * (dir/NAME.stack-tmp.*) are removed. Never fails: u->note says why when
 * nothing was measured. */
void mc_stack_measure(const char *dir, const char *name, const char *cc, mc_stack_usage *u);
void mc_stack_usage_free(mc_stack_usage *u);

/* modelc verify (aot/verify.c). */
typedef struct {
	uint64_t seed;              /* random inputs: floats uniform in [-scale, scale] */
	double scale;
	double rtol, atol;          /* pass: max|err| <= atol + rtol * max|ref| */
	const char *cc, *cflags;    /* the host compiler that builds the code */
	bool keep;                  /* leave the temporary directory */
} mc_verify_opts;
void mc_verify_opts_init(mc_verify_opts *v);
/* 0: every output within tolerance; 1: beyond it; -1: error (reported). */
int mc_verify(const char *model, const mc_compile_opts *o, const mc_verify_opts *v);

/* Builds DIR's NAME.c, NAME_weights.c and the harness NAME_main.c with
 * `cc cflags` (log in DIR/cc.log), runs it on `in` (g's inputs; log in
 * DIR/run.log) and reads `out` typed as g's outputs. 0 on success; else,
 * reported: MC_HARNESS_BUILD, MC_HARNESS_RUN (exit_status: the driver's
 * exit status, 128 + signal number when killed), or -1. */
enum { MC_HARNESS_BUILD = 1, MC_HARNESS_RUN = 2 };
int mc_run_harness(const char *dir, const char *name, const char *cc, const char *cflags,
                   const mc_graph *g, mc_tensor *const *in, mc_tensor **out, int *exit_status);

/* Builds the program from an inferred graph (fusion, plan, lowering); the
 * pieces used by mc_compile, exposed for tests. */
int mc_fuse(const mc_graph *g, bool no_fuse, mc_group **groups, int *n_groups);
int mc_build_program(mc_graph *g, const mc_compile_opts *o, mc_program *p);

/* ---- output files ---- */
/* Writes path only if its content differs (atomic: temporary + rename), so
 * an unchanged model rebuilds nothing. */
int mc_write_if_changed(const char *path, const void *data, size_t len);
/* A growable text buffer for emitters. */
typedef struct {
	char *data;
	size_t len, cap;
} mc_strbuf;
void mc_sb_printf(mc_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mc_sb_puts(mc_strbuf *b, const char *s);
void mc_sb_free(mc_strbuf *b);

/* Text embedded at build time (scripts/embed-text). */
extern const char mc_model_ninja_in[];   /* aot/model.ninja.in */
extern const char mc_model_cuda_ninja_in[]; /* aot/model_cuda.ninja.in */
extern const char mc_model_llvm_ninja_in[]; /* aot/model_llvm.ninja.in */
extern const char mc_runtime_min_h[];    /* runtime-min/modelc_rt.h */

/* The C target: writes NAME.h, NAME.c, NAME_weights.c and the runtime-min
 * files into dir (targets/c/emit_c.c). */
int mc_emit_c(const mc_program *p, const mc_compile_opts *o, const char *dir);
/* The CUDA target: NAME.h, NAME.cu, NAME_weights.c and the runtime-min
 * files (targets/cuda/emit_cuda.c). */
int mc_emit_cuda(const mc_program *p, const mc_compile_opts *o, const char *dir);
#define MC_CUDA_ARCH_DEFAULT "sm_87,sm_90"
/* The LLVM target: NAME.h, NAME.o, libNAME.a, the runtime-min files and,
 * with --emit-llvm, NAME.ll (targets/llvm/emit_llvm.c). Built only where
 * configure found LLVM: mc_llvm_available says whether this modelc has it. */
int mc_emit_llvm(const mc_program *p, const mc_compile_opts *o, const char *dir);
bool mc_llvm_available(void);
/* The --isa the llvm target's kernels are generated for when none is
 * given: from o's triple, CPU and features; NULL: generic. */
const char *mc_llvm_default_isa(const mc_compile_opts *o);
/* whether every arch of a --cuda-arch list (NULL: the default) is sm_MIN or newer */
bool mc_cuda_archs_at_least(const char *list, int min);
/* The same three files as text, written nowhere (the fuzzer, tests). */
typedef struct {
	mc_strbuf header, source, weights;
} mc_c_sources;
int mc_emit_c_sources(const mc_program *p, const mc_compile_opts *o, mc_c_sources *out);
void mc_c_sources_free(mc_c_sources *s);

#endif
