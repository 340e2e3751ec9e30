/* Lowering graph nodes into the kernel IR: fusion groups, the lowering
 * table (one entry per op id, in aot/lower_*.c), the lowerings' toolbox
 * (aot/lower.c) and the fast kernels (aot/kern_*.c). */
#ifndef MODELC_LOWER_H
#define MODELC_LOWER_H

#include "kir.h"

/* ---- fusion groups and the schedule ---- */
/* One step of the program: a group of nodes computed by one kernel. The
 * anchor is lowered by its own lowering; each epilogue node is pointwise
 * and consumes the previous member's output (input `chain_in`), inlined
 * into the anchor's stores. Only the last member's output is stored. */
#define MC_MAX_EPILOGUE 16
#define MC_MAX_GATHER 8
typedef struct {
	int anchor;                       /* node index */
	int n_epi;
	int epi[MC_MAX_EPILOGUE];         /* node indices, in order */
	int epi_chain_in[MC_MAX_EPILOGUE];/* which input of epi[i] is the chain */
	bool alias;                       /* anchor's output shares its input's storage; no kernel */
	bool slabs;                       /* alias too: a Concat whose inputs are stored into it */
	/* Gathers (nearest Resizes) this group's members read through: their
	 * outputs are never stored; a load of one reads its input at the
	 * element the gather would have copied (mc_fuse's inline_gathers) */
	int n_gather;
	int gather[MC_MAX_GATHER];
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
	/* ring_elems > 0: mc_lower_store* put output 0's element lin at
	 * ring_buf[lin % ring_elems] instead (a ring of output rows the
	 * lowering copies out itself: aot/kern_conv.c) */
	int ring_buf;
	int64_t ring_elems;
	/* per input: the gather (a node of group->gather) whose output it is,
	 * read through it (in_buf then holds the gather's input); -1 none.
	 * NULL where the group has no gathers. */
	int *gather;
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
	mc_opid op;                 /* the op it lowers */
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
/* The lowering of op id; NULL if it has none. */
const mc_lowering *mc_lowering_find(mc_opid id);

/* Toolbox for lowerings (aot/lower.c). */
/* Opens one loop per dim of s (outermost first) and puts the variables in
 * coords; close them with mc_kb_end_n(kb, s->rank). */
void mc_lower_loops(mc_kb *kb, const mc_shape *s, mc_kexpr **coords, unsigned flags);
/* Coordinates of linear index lin in shape s, as let-bound variables (its
 * inverse). */
void mc_lower_coords(mc_kb *kb, const mc_shape *s, mc_kexpr *lin, mc_kexpr **coords);
/* Row-major linear index of coords in shape s. */
mc_kexpr *mc_lower_linear(mc_kb *kb, const mc_shape *s, mc_kexpr *const *coords);
/* Index into `in` broadcast to `out` (numpy rules, right-aligned) at the
 * coords of an element of `out`. */
mc_kexpr *mc_lower_bcast(mc_kb *kb, const mc_shape *in, const mc_shape *out,
                         mc_kexpr *const *coords);
/* Loads input i at a linear index (compute type of its dtype). */
mc_kexpr *mc_lower_load(mc_lower_ctx *c, int i, mc_kexpr *index);
/* Loads input i's element that output element coords (of shape os)
 * reads: broadcast numpy's way, and through the group's gather where
 * input i is one's output (mc_group.gather). */
mc_kexpr *mc_lower_load_at(mc_lower_ctx *c, int i, const mc_shape *os, mc_kexpr *const *coords);
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
/* Parts of [0, n) in vectors of `lanes` (at most n): whole vectors, then
 * (where some are left) the rest one at a time. mc_lower_vec_part_open
 * opens part `part`'s loop (the vectors' with `flags`) and returns its
 * first index, let-bound; the caller ends it. */
int mc_lower_vec_parts(int64_t n, int lanes);
mc_kexpr *mc_lower_vec_part_open(mc_kb *kb, int part, int64_t n, int lanes, unsigned flags);
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
/* A depthwise weight [c, 1, k[0], .. k[nk-1]] re-laid taps first, [k...][cp]
 * (channels c..cp zero): a tap's weights of neighbouring channels side by
 * side, as channels-last outputs read them (aot/kern_dw.c). NULL: out of
 * memory. */
mc_tensor *mc_dw_taps_first(const mc_tensor *w, int64_t c, const int64_t *k, int nk, int64_t cp);
int mc_kern_pool_nhwc(mc_lower_ctx *c);    /* NhwcMaxPool, NhwcAveragePool */
int mc_kern_gemm(mc_lower_ctx *c);         /* Gemm, MatMul with a constant B */
int mc_kern_conv_cuda(mc_lower_ctx *c);    /* Conv on the cuda target: MC_TMPL_CONV2D_SPLITK */
int mc_kern_gemm_cuda(mc_lower_ctx *c);    /* MatMul and Gemm on tensor cores: MC_TMPL_GEMM */
/* An Attention's sizes (aot/lower_misc.c), Q, K, V seen as [b, heads,
 * rows, head size]; mask_in: its input (float, [.., skv]), -1: none. */
typedef struct {
	int64_t b, hq, hkv, sq, skv, d, dv;
	bool is_3d;
	double scale;
	int mask_in;
} mc_attn_sizes;
#define MC_ATTN_MAX_HEAD 256 /* the template's widest head: a lane keeps 256 / 32 sums */
/* Attention node n runs as the cuda target's one kernel (on a grid
 * target): Y alone; no past, causal mask, softcap or padding; float32
 * operands, a float mask (if any) as long as the keys; heads up to
 * MC_ATTN_MAX_HEAD wide; every operand indexable by int32. Its sizes into
 * *s. The one owner of that choice: lower_attention follows it, and
 * fusion reads a 3-D Q, K or V through the Split making it (a part of a
 * packed projection) only where it holds. */
bool mc_attention_one_kernel(const mc_graph *g, const mc_node *n, mc_attn_sizes *s);
/* MC_TMPL_ATTENTION for an Attention where mc_attention_one_kernel holds;
 * a 3-D Q, K or V read through a Split (c->gather) is read in place, a
 * column range of the Split's input. */
int mc_kern_attention_cuda(mc_lower_ctx *c, const mc_attn_sizes *a);
/* Elements one product of a batched MatMul moves an operand shaped s on
 * (output os): its matrix's size, 0 where every product reads the same
 * matrix, -1 for a partial broadcast. */
int64_t mc_matmul_batch_step(const mc_shape *s, const mc_shape *os);
int mc_kern_qconv_pointwise(mc_lower_ctx *c); /* QiConv 1x1: register-tiled int32 sums */
int mc_kern_qconv_window(mc_lower_ctx *c);    /* QiConv, group 1: 4 output channels a pass */
int mc_kern_qmatmul(mc_lower_ctx *c);         /* QiMatMul 2-D by a constant B: tiled like 1x1 */
int mc_kern_qdual(mc_lower_ctx *c);   /* QiConv (group 1), QiMatMul: SMLAD pairs, --isa cortex-m */
int mc_kern_qdw(mc_lower_ctx *c);     /* QiConv depthwise 2-D: SMLAD on a paired plane, --isa cortex-m */
int mc_kern_qvec(mc_lower_ctx *c);    /* QiConv (group 1): DOT2 on i32 vectors, --isa avx2/avx512/neon */
int mc_kern_qdwvec(mc_lower_ctx *c);  /* QiConv depthwise 2-D: DOT2 on i32 vectors along pixels */
int mc_kern_qmatvec(mc_lower_ctx *c); /* QiMatMul by a constant: DOT2 on i32 vectors along columns */

/* Integer requantisation (libcore/ops/qint.h, mc_qi_scale and the clamp)
 * as IR: clamp(y_zp + round(acc * mult / 2^shift)), in i32. acc, mult and
 * shift are any integer type; mult NULL: acc is already the product. */
mc_kexpr *mc_lower_requant(mc_kb *kb, mc_kexpr *acc, mc_kexpr *mult, mc_kexpr *shift,
                           int64_t y_zp, int64_t lo, int64_t hi);
/* The same where the caller knows |acc * mult| <= vmax (0: unknown): with a
 * constant shift whose result fits 32 bits, the zero point and clamp run
 * in i32. */
mc_kexpr *mc_lower_requant_bounded(mc_kb *kb, mc_kexpr *acc, mc_kexpr *mult, mc_kexpr *shift,
                                   int64_t y_zp, int64_t lo, int64_t hi, int64_t vmax);

/* The same, clamp(y_zp + mc_qi_rshift(sum of x[i] * mult[i], shift)), for
 * one or two terms x (i32, |x| <= 255: centred 8-bit values) with
 * constant multipliers below 2^31 in magnitude and a constant shift in
 * [16, 46], in i32 arithmetic alone (the 64-bit sum as two 16-bit-aligned
 * parts): a 32-bit core's cheaper form, and one that i32 vectors run lane
 * by lane. NULL where the bounds do not hold. */
mc_kexpr *mc_lower_requant_terms(mc_kb *kb, int n, mc_kexpr *const *x, const int64_t *mult, int64_t shift,
                                 int64_t y_zp, int64_t lo, int64_t hi);
bool mc_requant_terms_fit(int n, const int64_t *mult, int64_t shift);
/* A float Pow node's exponent where it is the constant 1 or 2 (the
 * pointwise form multiplies, exactly as pow rounds, and has a vector
 * form), else 0. */
int mc_lower_pow_small_exponent(const mc_graph *g, const mc_node *n);

/* Whether n's pointwise form builds i32 vector operations alone from 8-bit
 * operands (QiAdd, QiRequant whose constants fit mc_lower_requant_terms):
 * lane-wise integer epilogues and elementwise kernels. */
bool mc_lower_has_ivec_form(const mc_node *n);

/* The per-channel requantisation of QiConv and QiMatMul (aot/kern_qconv.c):
 * mc_rq_prepare packs what it needs once per kernel (where every shift is
 * 31 or more, s - 32 per channel for the kernel IR's RQ32, whose shifts run
 * on 32-bit words); mc_rq_emit gives clamp(y_zp + mc_qi_scale(acc, mult[oc],
 * shift[oc])) as i32, bit-identical to mc_lower_requant. */
typedef struct {
	bool split;
	int pre;                  /* 1: products doubled, shifts one more (some s is 31) */
	int low;                  /* packed: int32 s' - 32 (s' = s + pre), 0 where below;
	                           * -1 where every channel's is low_all */
	int64_t low_all;
	bool scaled;              /* split after sums times 2^(32 - s) where s < 32 */
	int lmul;                 /* packed (scaled): int32 2^(32 - s), or 1 */
	int multv, lowv, lmulv;   /* mc_rq_pad's tables, or -1 */
	bool half_up;             /* split, every s' 33 or more, no tie possible: RQ32's half-up form */
} mc_rq_pack;
void mc_rq_prepare(mc_lower_ctx *c, mc_rq_pack *r);
mc_kexpr *mc_rq_emit(mc_lower_ctx *c, const mc_rq_pack *r, mc_kexpr *acc, mc_kexpr *oc);
/* The same in two steps: channel oc's constants bound to locals once, then
 * applied to any number of its sums. */
typedef struct {
	mc_kexpr *mult, *shift;   /* split: shift is s' - 32 */
	mc_kexpr *scale;          /* scaled: the sum's factor; else NULL */
} mc_rq_chan;
mc_rq_chan mc_rq_channel(mc_lower_ctx *c, const mc_rq_pack *r, mc_kexpr *oc);
mc_kexpr *mc_rq_apply(mc_lower_ctx *c, const mc_rq_pack *r, const mc_rq_chan *ch, mc_kexpr *acc);
/* Vectors whose lanes are consecutive channels (split only): mc_rq_pad
 * packs the multiplier, shift and factor per channel, padded to count (a
 * multiple of the lanes); mc_rq_channel_vec loads those of channels oc0..
 * as vectors, which mc_rq_apply takes like a channel's scalars. */
void mc_rq_pad(mc_lower_ctx *c, mc_rq_pack *r, int64_t count);
mc_rq_chan mc_rq_channel_vec(mc_lower_ctx *c, const mc_rq_pack *r, mc_kexpr *oc0, int lanes);

/* QiConv's or QiMatMul's constant bias (0 without one) as int32 less x_zp
 * times each of the m output channels' weight sum, the weight [m, K] or,
 * transposed, [K, m] (aot/kern_qconv.c): for kernels that multiply x
 * itself, reading x_zp in any padding. */
mc_tensor *mc_kq_folded_bias(const mc_lower_ctx *c, int64_t m, bool transposed, int64_t x_zp);

/* Constant input data at compile time (attributes that became inputs). */
const mc_tensor *mc_lower_const(const mc_lower_ctx *c, int i);
/* v is present and float32 (what the fast kernels handle). */
static inline bool mc_is_f32(const mc_value *v)
{
	return v && v->dtype == MC_FLOAT;
}
/* "node 'x' (Op, opset N): <msg>" like mc_node_error. */
int mc_lower_error(const mc_lower_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
