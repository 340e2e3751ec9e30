/* The compiled program (aot/program.c): its kernels, steps, weights and
 * the static memory plan (aot/plan.c), and the stages that build it from a
 * frozen graph. */
#ifndef MODELC_PROGRAM_H
#define MODELC_PROGRAM_H

#include "lower.h"
#include "strbuf.h"

/* ---- memory plan (aot/plan.c): offsets in one arena ---- */
typedef struct {
	size_t bytes;     /* 0: not in the arena */
	int first, last;  /* steps (inclusive) during which the buffer is live */
	/* A buffer that dies at step `first` and whose storage this one may
	 * take over (in-place elementwise); -1 if none. */
	int inplace_of;
	/* This one may be larger than inplace_of (its kernel writes over the
	 * source in an order that never overwrites what it has yet to read). */
	bool grows;
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

/* Pools (aot/pools.c): each request to one of n_pools pools, the first
 * ones (capacity[k] bytes each; the last's 0: no bound) taking the
 * requests of highest priority that fit, an in-place pair together;
 * each pool planned alone. pool_of, offsets (into the request's pool)
 * per request; pool_bytes per pool. 0, or -1 after reporting. */
int mc_plan_pools(const mc_mem_req *reqs, int n, const double *priority, size_t align,
                  const size_t *capacity, int n_pools, int *pool_of, size_t *offsets,
                  size_t *pool_bytes);

/* ---- a memory-aware kernel order (aot/order.c) ---- */
typedef struct {
	int n_touch;
	const int *roots;      /* the arena buffers (0 .. n_roots-1) it reads or writes */
	const bool *writes;    /* per touch: it writes that buffer */
	size_t scratch;        /* bytes of its own, live during it alone */
} mc_order_kernel;

/* An order of the n kernels (order[i]: the kernel to run i-th) that keeps
 * each pair touching one buffer, one of them writing it, as given, and
 * whose peak of live bytes (a buffer live from the first kernel touching
 * it to the last) is as low as a bounded search finds; that peak. The
 * given order is one of those searched, not always the one returned. */
size_t mc_order_for_memory(int n, const mc_order_kernel *k, int n_roots, const size_t *root_bytes,
                           int *order);

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
	double scale;               /* quantized (--quantized-io): real = (q - zero_point) * scale; else 0 */
	int64_t zero_point;
	/* An output whose extent on count_axis depends on the data (mc_value.
	 * counted): shape holds the bound, and after a run the int64 at
	 * count_at (in the arena) says how many entries of that axis are the
	 * result */
	bool counted;
	int count_axis;
	mc_loc count_at;
} mc_io_desc;

typedef struct {
	const mc_tensor *t;         /* frozen data (owned by the graph) */
	size_t align;
} mc_weight;

/* --dim NAME=LO..HI (aot/dynamic.c): one program for every size d in
 * [lo, hi] of one symbolic dimension. A number that depends on d is
 * (c[2] d^2 + c[1] d + c[0]) / den, the division exact at every d it
 * serves. */
typedef struct {
	int64_t c[3], den;
} mc_dyn_poly;

/* What a kernel of the program built at hi became: its versions,
 * kernels[first .. first + n_versions), and the one each size runs. */
typedef struct {
	int first, n_versions;
	unsigned char *version_of; /* per d - lo (n_versions > 1; else NULL) */
} mc_dyn_kernel;

typedef struct mc_dynamic {
	char *name;                 /* the dim_param */
	int64_t lo, hi;
	int n_of;                   /* the kernels of the program built at hi */
	mc_dyn_kernel *of;          /* steps' kernel indices index this */
	/* each input's and output's dims (MC_MAX_RANK a tensor), as run-time
	 * numbers; their shapes in the program are those at hi */
	mc_dyn_poly *in_dims, *out_dims;
} mc_dynamic;

/* The poly's value at d (exact where it serves d). */
int64_t mc_dyn_poly_at(const mc_dyn_poly *q, int64_t d);
/* The polynomial of degree 2 at most, rational, that gives vals[i] at
 * sizes[i] for every i < n exactly, its coefficients and partial sums
 * within [-limit, limit] there: true and *q, or false. */
bool mc_dyn_fit(const int64_t *sizes, const int64_t *vals, int n, int64_t limit, mc_dyn_poly *q);
/* True if the poly is a constant. */
bool mc_dyn_poly_const(const mc_dyn_poly *q);

/* --pool: the arena split into named pools, each its own memory */
#define MC_MAX_POOLS 8
#define MC_POOL_NAME 32

/* What the program is made of, in words and numbers for modelc compile
 * --report (aot/report.c); kept by mc_build_program from its final kernel
 * order and plan, so that the report draws what was planned rather than
 * planning again. All of it lives in the program's pool. */
typedef struct {
	const char *op_type, *name;   /* an ONNX node the kernel computes */
} mc_map_node;

typedef struct {
	int tensor;                   /* index in mc_program_map.tensors */
	bool written;
} mc_map_touch;

typedef struct {
	int n_nodes;                  /* the anchor, its epilogues, the gathers read through;
	                               * 0: a copy into a graph output */
	mc_map_node *nodes;
	double macs;                  /* of its nodes (mc_node_macs) */
	int n_touch;                  /* the tensors it reads or writes (no weights) */
	mc_map_touch *touch;
} mc_map_kernel;

typedef enum { MC_MAP_ARENA, MC_MAP_INPUT, MC_MAP_OUTPUT } mc_map_where;

typedef struct {
	const char *name;             /* the graph value's name (a storage root) */
	mc_map_where where;
} mc_map_tensor;

/* One request of the memory plan: its bytes over kernels first..last
 * (inclusive), at offset in its pool (0 without --pool). */
typedef struct {
	const char *name;             /* the value's name, or the kernel's whose scratch it is */
	bool scratch;
	size_t bytes, offset;
	int first, last, pool;
	int inplace_of;               /* the buffer whose storage it took over, or -1 */
} mc_map_buf;

typedef struct mc_program_map {
	int n_kernels;                /* as mc_program.kernels, same order */
	mc_map_kernel *kernels;
	int n_tensors;
	mc_map_tensor *tensors;
	int n_bufs;
	mc_map_buf *bufs;
} mc_program_map;

typedef struct mc_program {
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
	/* the arena and its lower bound for the kernels in the graph's order,
	 * before the memory-aware order (aot/order.c) */
	size_t arena_in_order, lower_bound_in_order;
	/* --pool (2 or more; 0: one arena): arena buffers (loc.index) live in
	 * pool k at offsets of their own; run with one pointer each, or one
	 * arena of arena_bytes holding pool k at pool_at[k] */
	int n_pools;
	size_t pool_bytes[MC_MAX_POOLS], pool_at[MC_MAX_POOLS];
	char pool_names[MC_MAX_POOLS][MC_POOL_NAME];
	/* --io-in-arena: the inputs and outputs live in the arena, at
	 * input_at[i] and output_at[j] (MC_LOC_ARENA: pool, offset) */
	bool io_in_arena;
	int threads;                /* --threads: > 1, parallel loops through NAME_run_threads' hook */
	int64_t threads_min_work;   /* the work (statement runs) from which a loop splits */
	bool blas;                  /* --blas openblas: kernels may call cblas_sgemm (MC_TMPL_SGEMM) */
	int64_t blas_min_macs;      /* > 0: the products they hand it, from this many multiply-adds
	                             * (else MC_BLAS_MIN_ROWS... of aot/kir.h) */
	mc_loc *input_at, *output_at;
	/* --weights-section, --code-section: linker sections ("" default) */
	char weights_section[128], code_section[128];
	size_t weight_bytes;
	int64_t max_index;          /* largest element count of any buffer */
	mc_target_config target;    /* what the kernels were built for (isa NULL: generic) */
	double macs;                /* multiply-accumulates of one run (Conv, Gemm, MatMul...) */
	int n_owned, cap_owned;
	mc_tensor **owned;          /* weights the program made (float32 ones stored as float16) */
	/* --dim NAME=LO..HI: the sizes it serves (kernels are then the
	 * versions, steps name dyn->of); NULL: every shape fixed */
	const mc_dynamic *dyn;
	/* the kernels' nodes and the plan's buffers, for --report; NULL: not
	 * kept (a --dim LO..HI program, whose kernels are versions) */
	const mc_program_map *map;
} mc_program;

void mc_program_free(mc_program *p);
/* The byte in the one arena (NAME_run's) of an arena place: with pools,
 * its pool's place plus its offset in it. */
size_t mc_program_arena_offset(const mc_program *p, const mc_loc *at);
/* Whether an output of p is counted (mc_io_desc.counted): the run then
 * gives the counts (NAME_run_counted). */
bool mc_program_counted(const mc_program *p);
/* The suffix of p's plain run function: "run", "run_counted" (counted
 * outputs) or "run_dims" (--dim LO..HI). */
const char *mc_program_run_name(const mc_program *p);
/* mc_kernel_check on every kernel of p: 0, or -1 after reporting an
 * internal error (a bug in a lowering, not in the model). */
int mc_program_check(const mc_program *p);


/* Builds the program from an inferred graph (fusion, plan, lowering) for
 * target t (mc_target_resolve); the pieces used by mc_compile, exposed for
 * tests. */
int mc_fuse(const mc_graph *g, bool no_fuse, mc_group **groups, int *n_groups);
/* Gathers inlined into each group reading them (mc_group.gather), their
 * outputs never stored; removes the gathers' own groups. With `resizes`
 * (--optimize memory): a nearest Resize read only by pointwise nodes and
 * Concats (its output often the largest buffer of an FPN or U-Net). On a
 * grid target: a Split along a 3-D tensor's last axis read only as Q, K
 * or V of attention templates (a packed projection's parts, read in
 * place: one launch and one copy fewer a layer). */
void mc_fuse_inline_gathers(const mc_graph *g, mc_group *groups, int *n_groups, bool resizes, bool grid);
/* The group of each node (malloc'd, g->n_nodes entries): the group it is
 * the anchor or an epilogue of; a gather's, the last group reading through
 * it (where its input is read); -1 for none. */
int *mc_group_of_nodes(const mc_graph *g, const mc_group *groups, int n_groups);
/* The stages, in order: schedule, lower, storage (the dtype each buffer
 * is stored in, the target's storage types: --dtype fp16 stores float32
 * activations and weights as float16 on the cuda target, computing in
 * float32; graph inputs, outputs and kernel scratch stay float32),
 * liveness, plan, order (the kernels reordered where that shrinks the
 * plan's arena), pools (--pool: each arena buffer's pool), place, steps;
 * --dump-after NAME writes what one left into the dump directory. */
int mc_build_program(mc_graph *g, const mc_target_config *t, const mc_compile_opts *o, mc_program *p);
/* NAME is one of those stages. */
bool mc_program_stage_known(const char *name);
/* DIR/SEQ-WHAT.txt (the dump directory of o) written by write(ctx, f) when
 * --dump-after names WHAT or all: 0 (also when not asked), -1 after
 * reporting. The program stages dump through it as 91-schedule.txt ...
 * 99-steps.txt, the final kernels as 90-kernels.txt. */
int mc_dump_after(const mc_compile_opts *o, int seq, const char *what,
                  void (*write)(const void *ctx, FILE *f), const void *ctx);
/* Every kernel of the program p (an mc_program) as text. */
void mc_program_dump_kernels(const void *p, FILE *f);

#endif
