/* modelc core: dtypes, tensors, diagnostics, graph IR, op registry.
 * One shared header in the QBE style: every module of libcore, freezing,
 * aot and the targets includes it. */
#ifndef MODELC_H
#define MODELC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "optab.h"

#define MC_VERSION "0.1.0"
#define MC_MAX_RANK 8
/* The newest default-domain opset the registry knows; a model importing a
 * newer one is refused rather than silently given older semantics. */
#define MC_MAX_OPSET 28
/* Subgraph nesting deeper than this is refused (recursion bombs). */
#define MC_MAX_GRAPH_DEPTH 32
/* Inputs or outputs of one node; evaluation keeps them on the stack. */
#define MC_MAX_NODE_IO 4096
/* Attributes of one node (ONNX ops have a few dozen at most): names are
 * checked for duplicates pairwise. */
#define MC_MAX_NODE_ATTRS 1024
/* Nodes of a whole model, subgraphs included: the passes are linear or a
 * little more in the node count, so this bounds compile time and memory. */
#define MC_MAX_NODES 100000

/* ---- dtypes: numbered as ONNX TensorProto.DataType ----
 * In memory (mc_tensor) every dtype below 8 bits and every 8-bit float takes
 * one byte per element, so all shape and indexing code sees ordinary 1-byte
 * elements: int4/int2 sign-extended in an int8, uint4/uint2 zero-extended
 * in a uint8, the float8 types, float8e8m0 and float4e2m1 as their bit code
 * (float4e2m1 in the low nibble). Packing two or four elements per byte
 * exists only in ONNX files, and is undone at import. */
typedef enum {
	MC_UNDEFINED = 0,
	MC_FLOAT = 1,
	MC_UINT8 = 2,
	MC_INT8 = 3,
	MC_UINT16 = 4,
	MC_INT16 = 5,
	MC_INT32 = 6,
	MC_INT64 = 7,
	MC_STRING = 8,
	MC_BOOL = 9,
	MC_FLOAT16 = 10,
	MC_DOUBLE = 11,
	MC_UINT32 = 12,
	MC_UINT64 = 13,
	MC_BFLOAT16 = 16,
	MC_FLOAT8E4M3FN = 17,   /* no inf; NaN 0x7f/0xff; max 448 */
	MC_FLOAT8E4M3FNUZ = 18, /* no inf, no -0; NaN 0x80; max 240 */
	MC_FLOAT8E5M2 = 19,     /* IEEE-like: inf and NaN; max 57344 */
	MC_FLOAT8E5M2FNUZ = 20, /* no inf, no -0; NaN 0x80; max 57344 */
	MC_UINT4 = 21,
	MC_INT4 = 22,
	MC_FLOAT4E2M1 = 23,     /* no inf, no NaN; max 6 */
	MC_FLOAT8E8M0 = 24,     /* 2^(code-127), no sign, no zero; NaN 0xff */
	MC_UINT2 = 25,
	MC_INT2 = 26,
} mc_dtype;

const char *mc_dtype_name(mc_dtype t);   /* "float32", ...; "?" if unknown */
size_t mc_dtype_size(mc_dtype t);        /* in memory; 0 if unsupported */
/* Bits per element in ONNX's packed form: 4 or 2 for the sub-byte types,
 * else 8 * mc_dtype_size; 0 if unsupported. */
int mc_dtype_packed_bits(mc_dtype t);
bool mc_dtype_supported(mc_dtype t);
/* float16/32/64, bfloat16, the float8 types, float8e8m0, float4e2m1 */
bool mc_dtype_is_float(mc_dtype t);
bool mc_dtype_is_int(mc_dtype t);        /* signed/unsigned integers (int4...), not bool */
bool mc_dtype_is_signed(mc_dtype t);     /* signed ints and floats, not float8e8m0 */
/* The float types stored as a bit code: float8 types, float8e8m0, float4e2m1. */
bool mc_dtype_is_small_float(mc_dtype t);
float mc_half_to_float(uint16_t h);
uint16_t mc_float_to_half(float f);      /* round to nearest even */
float mc_bf16_to_float(uint16_t h);
uint16_t mc_float_to_bf16(float f);
/* Bit code of a small float type (mc_dtype_is_small_float) to its value. */
double mc_small_float_to_double(mc_dtype t, uint8_t code);
/* The layout of the float8 types and float4e2m1 (not float8e8m0), what
 * encoders of them (the reference here, targets in generated code) need. */
typedef struct {
	int mbits;        /* mantissa bits */
	int bias;
	int sign_shift;   /* the sign bit's position */
	uint8_t max;      /* code of the largest finite value */
	bool has_inf;     /* max + 1 is inf (E5M2) */
	bool has_nan;     /* false for float4e2m1 */
	bool fnuz;        /* NaN is 0x80, there is no -0 */
	uint8_t nan;      /* positive NaN code (fnuz: 0x80) */
} mc_small_float;
/* NULL for other dtypes (float8e8m0 included). */
const mc_small_float *mc_small_float_format(mc_dtype t);
/* Value to bit code, rounding to nearest even, as ONNX's Cast. Out of range
 * (inf included): saturate clamps to the largest finite value; otherwise
 * inf where the type has it, else NaN. float4e2m1 always saturates (and
 * gives -0 for NaN, as ONNX's reference does); the FNUZ types have no -0.
 * float8e8m0 rounds up (mc_double_to_e8m0). */
uint8_t mc_double_to_small_float(mc_dtype t, double v, bool saturate);
/* float8e8m0 (Cast's round_mode): up rounds any fraction up, down drops it,
 * nearest takes the nearer power of two (ties, 1.5 * 2^e, up); the sign is
 * ignored. As the spec's table: NaN gives NaN; inf, zero and values out of
 * range give the largest or smallest code when saturating, else NaN. */
typedef enum { MC_ROUND_UP, MC_ROUND_DOWN, MC_ROUND_NEAREST } mc_round_mode;
uint8_t mc_double_to_e8m0(double v, bool saturate, mc_round_mode mode);

/* ---- checked size arithmetic: false on overflow ---- */
bool mc_mul_size(size_t a, size_t b, size_t *out);
bool mc_add_size(size_t a, size_t b, size_t *out);

/* ---- shapes ---- */
typedef struct {
	int rank;
	int64_t dims[MC_MAX_RANK];
} mc_shape;

/* Element count; false if any dim is negative or the product overflows
 * (elements or bytes of the largest dtype must fit in size_t/int64). A
 * zero dim does not hide the others: their product (every stride) must fit
 * too. */
bool mc_shape_numel(const mc_shape *s, size_t *out);
/* Product of the dimensions with zeros counted as one (saturating): the
 * work of a loop nest over the shape, which an empty tensor with huge
 * other dimensions still costs. */
size_t mc_shape_extent(const mc_shape *s);
size_t mc_numel(const mc_shape *s);  /* caller knows it is valid */
bool mc_shape_eq(const mc_shape *a, const mc_shape *b);
/* "1x3x224x224", "scalar" */
const char *mc_shape_str(const mc_shape *s, char *buf, size_t n);
/* Multidirectional (numpy) broadcast; false if incompatible. */
bool mc_broadcast(const mc_shape *a, const mc_shape *b, mc_shape *out);
/* Row-major strides in elements. */
void mc_strides(const mc_shape *s, int64_t strides[MC_MAX_RANK]);
/* Strides of `in` as seen through broadcasting to `out` (0 on broadcast
 * dims); `in` is right-aligned against `out`. */
void mc_broadcast_strides(const mc_shape *in, const mc_shape *out,
                          int64_t strides[MC_MAX_RANK]);

/* ---- tensors (host memory, row-major, dense) ---- */
typedef struct mc_tensor {
	mc_dtype dtype;
	mc_shape shape;
	size_t numel;
	size_t nbytes;
	void *data;   /* malloc'd, owned by the tensor; non-NULL even if empty */
} mc_tensor;

mc_tensor *mc_tensor_new(mc_dtype t, const mc_shape *s); /* zeroed; NULL on overflow/OOM */
mc_tensor *mc_tensor_clone(const mc_tensor *t);
void mc_tensor_free(mc_tensor *t);
/* Element access converting through double / int64 (clarity over speed). */
double mc_get_f(const mc_tensor *t, size_t i);
void mc_set_f(mc_tensor *t, size_t i, double v);
int64_t mc_get_i(const mc_tensor *t, size_t i);
void mc_set_i(mc_tensor *t, size_t i, int64_t v);
/* Converts a whole tensor's data to/from double arrays (malloc'd). */
double *mc_tensor_to_double(const mc_tensor *t);
void mc_tensor_from_double(mc_tensor *t, const double *src);

/* ---- diagnostics ---- */
/* Errors are printed as one line: "modelc: error: <where>: <message>".
 * Functions return 0 on success and -1 after reporting. */
void mc_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void mc_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Errors reported so far: a stage whose helpers cannot return failure
 * (kernel builders) checks that none was added. */
unsigned long mc_error_count(void);
/* Tests capture messages instead of printing them. */
typedef void (*mc_diag_sink)(const char *line, void *user);
void mc_set_diag_sink(mc_diag_sink sink, void *user);
/* Diagnostics held back while something is tried that may fail (an If
 * branch's inference): mc_diag_hold keeps the lines made from then on
 * instead of printing them, and mc_diag_release puts the sink back and,
 * with replay, passes the lines on as they would have gone; without,
 * they are dropped and the error count restored. first: the first error
 * line held (for a warning quoting it). Holds may nest. */
typedef struct {
	mc_diag_sink sink;
	void *user;
	unsigned long errors;
	char *lines;        /* held lines, each ending in '\n' (malloc'd) */
	size_t len;
	char first[512];
} mc_diag_held;
void mc_diag_hold(mc_diag_held *h);
void mc_diag_release(mc_diag_held *h, bool replay);
/* Progress of long work on a terminal: mc_progress_begin starts the
 * clock; mc_progress prints "modelc: 2.4 s: <what starts now>" to stderr
 * when stderr is a terminal and the work has taken a second
 * (MODELC_PROGRESS_AFTER seconds) so far, so that a 50 MB model does not
 * look hung while a small one prints nothing; MODELC_NO_PROGRESS=1 turns
 * it off. */
void mc_progress_begin(void);
void mc_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* An internal invariant: a bug in modelc when it fails, never bad model
 * input (that is an mc_error). Aborts with file:line and the condition, in
 * every build: a wrong kernel compiled quietly costs more than the test. */
#define MC_ASSERT(cond) \
	((cond) ? (void)0 : mc_assert_fail(#cond, __FILE__, __LINE__))
_Noreturn void mc_assert_fail(const char *cond, const char *file, int line);
void *mc_xmalloc(size_t n);       /* aborts on OOM: never on model-sized data */
void *mc_xcalloc(size_t n, size_t m);
char *mc_xstrdup(const char *s);

/* ---- graph IR ---- */
struct mc_graph;
struct mc_op;

typedef enum {
	MC_ATTR_UNDEFINED = 0,
	MC_ATTR_FLOAT = 1,
	MC_ATTR_INT = 2,
	MC_ATTR_STRING = 3,
	MC_ATTR_TENSOR = 4,
	MC_ATTR_GRAPH = 5,
	MC_ATTR_FLOATS = 6,
	MC_ATTR_INTS = 7,
	MC_ATTR_STRINGS = 8,
	MC_ATTR_TENSORS = 9,
	MC_ATTR_GRAPHS = 10,
} mc_attr_type;

typedef struct mc_attr {
	char *name;
	mc_attr_type type;
	double f;
	int64_t i;
	char *s;          /* NUL-terminated copy of the string */
	mc_tensor *t;
	struct mc_graph *g;
	size_t n;         /* count for floats / ints / strings */
	float *floats;
	int64_t *ints;
	char **strings;
} mc_attr;

typedef enum {
	MC_VAL_INPUT,        /* graph input fed at run time */
	MC_VAL_CONST,        /* initializer, Constant, or folded */
	MC_VAL_NODE,         /* produced by a node */
	MC_VAL_CAPTURED,     /* subgraph reference to an enclosing scope's value */
} mc_value_kind;

typedef struct mc_value {
	char *name;
	mc_value_kind kind;
	mc_dtype dtype;       /* MC_UNDEFINED until inferred */
	mc_shape shape;
	bool typed;           /* dtype and shape are known */
	mc_tensor *konst;     /* data when known at compile time, else NULL */
	int producer;         /* node index, or -1 */
	int outer;            /* MC_VAL_CAPTURED: index in the parent graph */
	/* Declared input dims that were symbolic: names kept for messages. */
	char *dim_param[MC_MAX_RANK];
	/* A graph input or output passed in its quantized type (--quantized-io):
	 * real = (q - io_zero_point) * io_scale; io_scale 0 otherwise. */
	double io_scale;
	int64_t io_zero_point;
	/* A data-dependent extent (NonMaxSuppression on values known only at
	 * run time; libcore/counted.c): the shape holds its bound on axis
	 * count_axis, and at run time only the first n entries of that axis
	 * are meaningful, n the int64 scalar value count_value; the rest is
	 * padding that every op computes over harmlessly. */
	bool counted;
	int count_axis, count_value;
} mc_value;

typedef struct mc_node {
	char *name;           /* never NULL: "" when the model gave none */
	char *op_type;
	mc_opid id;           /* its row of the op table (MC_OP_NONE: another domain, unknown) */
	char *domain;         /* "" for the default domain */
	int opset;            /* the model's opset for this node's domain */
	const struct mc_op *op; /* NULL if unsupported */
	int n_inputs, n_outputs;
	int *inputs;          /* value indices; -1 for an omitted optional input */
	int *outputs;         /* value indices; -1 for an omitted optional output */
	/* Values that subgraphs of this node read from this graph: they must be
	 * computed before the node runs, like its inputs. */
	int n_implicit;
	int *implicit;
	int n_attrs;
	mc_attr *attrs;
	void *params;         /* op-private, set by op->parse, freed with free() */
	/* Set on the nodes of an If's branches inlined for code generation:
	 * 1 + the value index of the condition they run under (0: always),
	 * and whether they belong to the else branch. */
	int guard;
	bool guard_else;
} mc_node;

typedef struct mc_graph {
	char *name;
	struct mc_graph *parent;   /* enclosing graph for subgraphs */
	int depth;
	int n_values, cap_values;
	mc_value *values;
	int n_nodes, cap_nodes;
	mc_node *nodes;            /* in topological order after import */
	int n_inputs, n_outputs;
	int *inputs;               /* runtime inputs only (initializers excluded) */
	int *outputs;
	int opset;                 /* default-domain opset */
	char *model_dir;           /* for external data; NULL in subgraphs */
	char sha256[65];           /* of the model file's bytes as imported; "" if not from a file */
	/* Root graph: bytes compile-time evaluation may produce in all (set
	 * on first use) and has produced (mc_fold_take). */
	size_t fold_budget, folded_bytes;
	bool fold_budget_spent;
} mc_graph;

/* Looks a value up by name in this graph only; -1 if absent. */
int mc_graph_find(const mc_graph *g, const char *name);
int mc_graph_add_value(mc_graph *g, const char *name, mc_value_kind kind);
void mc_graph_free(mc_graph *g);
/* Frees what a node owns (not the node struct itself, which is zeroed). */
void mc_node_free(mc_node *n);
/* Freezes runtime input g->inputs[i] to the constant t (--bind): it leaves
 * the input list, and inference then folds what depends only on it. The
 * graph takes ownership of t. -1 if t's dtype or shape does not fit. */
int mc_graph_bind_input(mc_graph *g, int i, mc_tensor *t);
/* "node 'conv1' (Conv, opset 13)": the prefix of every node diagnostic. */
const char *mc_node_where(const mc_node *n, char *buf, size_t len);

/* ---- import ---- */
typedef struct {
	const char *name;
	mc_shape shape;
} mc_input_pin;

/* A symbolic dimension fixed by name (--dim batch_size=1): every input
 * dimension declared with that dim_param takes the value. */
typedef struct {
	const char *param;
	int64_t value;
	/* > value: --dim NAME=LO..HI, a dimension that stays dynamic within
	 * [value, hi] (aot/dynamic.c builds the program at each size) */
	int64_t hi;
} mc_dim_pin;

typedef struct {
	const mc_input_pin *pins; /* --input-shape pins */
	int n_pins;
	const mc_dim_pin *dim_pins; /* --dim pins */
	int n_dim_pins;
	/* Unsupported ops are reported but do not fail import (inspect). */
	bool allow_unsupported;
} mc_import_opts;

void mc_sha256_hex(const void *data, size_t len, char hex[65]);

/* Reads, validates, resolves ops against the registry, sorts topologically.
 * Does not run shape inference. NULL after reporting an error. */
mc_graph *mc_import_file(const char *path, const mc_import_opts *opts);
mc_graph *mc_import_buffer(const uint8_t *buf, size_t len, const char *model_dir,
                           const mc_import_opts *opts);
/* A serialized onnx.TensorProto (conformance .pb files). */
mc_tensor *mc_tensor_from_pb_file(const char *path);
mc_tensor *mc_tensor_from_pb(const uint8_t *buf, size_t len);

/* ---- shape inference ---- */
/* Types every value of g (and of its subgraphs). Nodes whose inputs are all
 * known and that the registry can evaluate get their outputs computed
 * (shape subgraphs), as mc_fold_policy allows under mc_infer_fold_rule. */
int mc_infer_graph(mc_graph *g);
/* Types node i's outputs from its typed inputs (and folds it as
 * mc_infer_graph does): a pass that adds nodes types them with it. */
int mc_infer_node(mc_graph *g, int i);
/* After node n's inference: its outputs counted where a counted input's
 * axis lands on one of theirs; an error naming n where n would read the
 * padding as data (libcore/counted.c). */
int mc_count_propagate(mc_graph *g, mc_node *n);
/* Marks v counted on axis by the int64 scalar value count_value. */
void mc_count_mark(mc_value *v, int axis, int count_value);
/* A copy of t with the first count entries of axis only. */
mc_tensor *mc_count_trim(const mc_tensor *t, int axis, int64_t count);
/* Compile-time evaluation (inference and the freezing passes) shares one
 * budget per model, 256 MiB plus four times the model's own constant
 * bytes, so that a small file cannot make modelc evaluate gigabytes (a
 * chain of Adds on one large constant). True if bytes more may be
 * produced, and counts them; once spent, says so once (a warning) and
 * the rest is left to run time. */
bool mc_fold_take(mc_graph *g, size_t bytes);
/* The folding policy, asked by inference and by the fold pass about every
 * node: may n be evaluated now and its outputs become constants? Its op
 * must have a reference implementation and not be MC_OP_NO_FOLD, its
 * inputs must be known (only typed for a shape-only op), and its outputs
 * within the rule's limit: their bytes (*bytes), and the elements each
 * spans (an empty tensor's other dimensions are still looped over). With
 * take, a node that passes draws its bytes from the model's budget
 * (mc_fold_take); without, the verdict only reports. */
typedef struct {
	size_t limit; /* bytes of the outputs together; elements of each */
	/* A larger result still folds when no larger than the constants it
	 * reads (transposing a weight always folds). */
	bool by_inputs;
	/* No input may span more than limit elements either: bounds the work
	 * as well as the result. */
	bool bound_inputs;
} mc_fold_rule;
/* Inference folds under a rule of its own: it runs in every command
 * (inspect, run, verify, compile) and unreported, so it does only cheap
 * work, shape arithmetic and small constants (1 MiB, inputs bounded, no
 * exception); the fold pass, which only compile runs, folds the rest under
 * --fold-limit and reports what that leaves. tests/hostile's
 * gather_folded_oob and scan_bomb are refused by compile, not inspect. */
extern const mc_fold_rule mc_infer_fold_rule;
typedef enum {
	MC_FOLD_NO,     /* cannot run at compile time (yet) */
	MC_FOLD_YES,
	MC_FOLD_CAPPED, /* over the limit: the fold pass reports it */
	MC_FOLD_SPENT,  /* the budget is spent (warned once) */
} mc_fold_verdict;
mc_fold_verdict mc_fold_policy(mc_graph *g, const mc_node *n, const mc_fold_rule *rule, bool take,
                               size_t *bytes);
/* Count of unsupported nodes (reported once each, all at once). */
int mc_report_unsupported(const mc_graph *g);

/* Multiply-accumulates of one run of an inferred g (the op table's macs
 * column: convolutions, Gemm, MatMul and their integer, quantised and
 * internal forms; If's larger branch; Loop and Scan bodies per
 * iteration), for inspect, --stats, NAME.json and the benchmarks. */
double mc_graph_macs(const mc_graph *g);
/* The same count for one node of g (an If's or Loop's: its body's). */
double mc_node_macs(const mc_graph *g, const mc_node *n);

/* ---- reference interpreter ---- */
/* inputs[i] for g->inputs[i]; on success outputs[i] for g->outputs[i] are
 * new tensors the caller frees. `outer` binds captured values of a subgraph
 * (the enclosing environment, indexed by the parent's values); NULL at top. */
int mc_interp_run(const mc_graph *g, mc_tensor *const *inputs, mc_tensor **outputs,
                  mc_tensor *const *outer);
/* Runs node n's reference implementation: the one place that evaluates a
 * node, for the interpreter and for folding (inference, the fold pass).
 * env holds g's values by index (the interpreter's); NULL folds n on the
 * graph's constants (konst). A shape-only op's unknown input is a
 * placeholder with its dtype and shape. out[k] (n_outputs entries) gets a
 * new tensor of output k's inferred dtype and shape, NULL where omitted;
 * on failure, after an error naming the node, none (all NULL). */
int mc_eval_node(const mc_graph *g, const mc_node *n, mc_tensor *const *env, mc_tensor **out);

/* ---- tensor files (tensorio.c) ---- */
/* Reads a raw little-endian file (its size must match) or a .npy file
 * (dtype and shape must match) as a tensor of the given type. */
mc_tensor *mc_tensor_read_file(const char *path, mc_dtype t, const mc_shape *s);
/* The same for a counted output (mc_value.counted): on axis, any extent
 * from 0 to s's, given by the .npy header or by the raw file's size. */
mc_tensor *mc_tensor_read_counted(const char *path, mc_dtype t, const mc_shape *s, int axis);
/* g's inputs from `--input NAME=FILE` pairs (n of them) into in (g's
 * n_inputs slots, NULL on entry): each a graph input, given once; every
 * input left without a file named in one error. -1 after reporting (the
 * tensors read stay in in, for the caller to free). */
int mc_read_inputs(const mc_graph *g, int n, const char *const *names, const char *const *files,
                   mc_tensor **in);
/* Writes raw little-endian bytes atomically (temporary name, then rename). */
int mc_tensor_write_raw(const char *path, const mc_tensor *t);
/* Output file name: every char outside [A-Za-z0-9_.-] becomes '_', + ".bin". */
void mc_output_file_name(const char *value_name, char *buf, size_t n);
/* mkdir -p: creates dir and its missing parents; -1 after reporting
 * "cannot create <what> '<dir>': ...". */
int mc_mkdir_p(const char *dir, const char *what);
/* Parses "1x3x224x224" (or "scalar"); false on junk or overflow. */
bool mc_parse_shape(const char *text, mc_shape *out);

/* ---- op registry ---- */
/* Shape inference sees each input as a value: dtype, shape, and konst when
 * the data is known at compile time (needed by Reshape, Slice, ...). */
typedef struct {
	mc_node *node;
	const mc_graph *graph;
	int n_in, n_out;
	const mc_value **in;   /* NULL for an omitted optional input */
	mc_value **out;        /* NULL for an omitted optional output */
} mc_infer_ctx;

/* Evaluation gets input tensors (NULL for omitted optionals) and outputs
 * already allocated with the inferred dtype and shape (NULL if omitted). */
typedef struct {
	const mc_node *node;
	const mc_graph *graph;
	int n_in, n_out;
	const mc_tensor *const *in;
	mc_tensor **out;
	mc_tensor *const *env; /* the graph's environment, for subgraph ops */
} mc_eval_ctx;

typedef struct mc_op {
	const char *name;      /* ONNX op_type, default domain */
	int min_opset, max_opset; /* opset range this entry implements */
	int min_inputs, max_inputs;
	int min_outputs, max_outputs;
	/* Validates attributes and stores them in node->params (optional). */
	int (*parse)(mc_node *n);
	/* Sets dtype/shape of every present output; may read in[i]->konst. */
	int (*infer)(mc_infer_ctx *c);
	/* Reference implementation. */
	int (*eval)(mc_eval_ctx *c);
	unsigned flags;
} mc_op;

enum {
	/* Output depends only on input shapes (Shape, Size): foldable as soon
	 * as shapes are known. */
	MC_OP_SHAPE_ONLY = 1u << 0,
	/* Never fold at compile time (random ops). */
	MC_OP_NO_FOLD = 1u << 1,
	/* Holds subgraphs; the interpreter passes env. */
	MC_OP_SUBGRAPH = 1u << 2,
	/* Inputs are one variadic list: none of them may be omitted. */
	MC_OP_VARIADIC = 1u << 3,
	/* Made by modelc's own passes (NhwcConv...), never by a model:
	 * mc_registry_find skips it, mc_registry_find_internal finds it. */
	MC_OP_INTERNAL = 1u << 4,
	/* Output 0's extent depends on the data: the importer gives the node
	 * one more output than the model's, an int64 scalar, the count of
	 * output 0's meaningful entries when its inputs are known only at run
	 * time (output 0 is then counted, padded to its bound). */
	MC_OP_COUNTED = 1u << 5,
};

/* Finds the entry for op_type at the given opset; NULL if none. Sets
 * *known_name if some entry has this name (unsupported opset vs unknown). */
const mc_op *mc_registry_find(const char *op_type, int opset, bool *known_name);
/* An internal op (MC_OP_INTERNAL) by name; NULL if none. */
const mc_op *mc_registry_find_internal(const char *op_type);
/* The entry for op id at the given opset, internal ops included (what
 * passes use to make nodes); NULL if none. */
const mc_op *mc_registry_find_id(mc_opid id, int opset);
/* Makes n an `id` node at opset: its op_type, id and registry entry; false
 * if the registry has no entry for it (n->op is then NULL). */
bool mc_node_set_op(mc_node *n, mc_opid id, int opset);
/* All entries, for inspect/tests. */
const mc_op *const *mc_registry_all(int *count);

/* ---- helpers for op implementations (libcore/ops_util.c) ---- */
const mc_attr *mc_attr_find(const mc_node *n, const char *name);
/* Typed getters: return -1 after reporting if present with the wrong type. */
int mc_attr_int(const mc_node *n, const char *name, int64_t dflt, int64_t *out);
int mc_attr_float(const mc_node *n, const char *name, double dflt, double *out);
int mc_attr_string(const mc_node *n, const char *name, const char *dflt, const char **out);
/* *out points into the attribute; *count = 0 and *out = NULL if absent. */
int mc_attr_ints(const mc_node *n, const char *name, const int64_t **out, size_t *count);
int mc_attr_floats(const mc_node *n, const char *name, const float **out, size_t *count);
/* *out = NULL if absent. */
int mc_attr_graph(const mc_node *n, const char *name, mc_graph **out);
/* Reports "node '...' (Op, opset N): <msg>" and returns -1. */
int mc_node_error(const mc_node *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Normalises a possibly negative axis against rank; -1 after reporting. */
int mc_norm_axis(const mc_node *n, int64_t axis, int rank, int *out);
/* Sets an output value's type. */
void mc_set_out(mc_infer_ctx *c, int i, mc_dtype t, const mc_shape *s);
/* Reads a 1-D (or scalar) integer constant input as int64; -1 if the input
 * is not known at compile time (reported, naming what must be constant). */
int mc_const_ints(mc_infer_ctx *c, int i, int64_t *out, size_t cap, size_t *count);

#endif
