/* Freezing: passes over an inferred graph that use what is known at compile
 * time. Each pass is a function over the IR that keeps the graph typed and
 * topologically ordered; node indices may change, value indices never do
 * (dead values simply stay unused). */
#ifndef MODELC_FREEZING_H
#define MODELC_FREEZING_H

#include <stdio.h>

#include "../libcore/modelc.h"

typedef struct {
	/* A folded constant may have at most this many bytes, unless it is no
	 * larger than the constants it is computed from (transposing a weight
	 * always folds); nodes left unfolded because of it are reported. */
	size_t fold_limit;
	const char *dump_after;   /* a pass name or "all"; NULL: none */
	const char *dump_dir;     /* directory for dumps (created if missing) */
	FILE *stats;              /* per-pass time and node counts; NULL: none */
	const char *layout;       /* "auto", "nchw", "nhwc"; NULL: "auto" (mc_pass_layout) */
	int unroll_limit;         /* nodes an unrolled Scan or Loop may make; 0: MC_DEFAULT_UNROLL_LIMIT */
	bool quantized_io;        /* mc_quantized_io after the passes' fixed point */
	bool no_quantize;         /* --no-quantize: QDQ runs as float (the quantize pass is skipped) */
	bool fuse_attention;      /* written-out attention becomes one Attention (patterns: the
	                           * target runs it as one kernel) */
	bool merge_sibling_convs; /* Concat of convolutions of one input becomes one (patterns:
	                           * the target's launches cost more than a window's zero taps) */
} mc_freeze_opts;

#define MC_DEFAULT_FOLD_LIMIT ((size_t)1 << 22)
#define MC_DEFAULT_UNROLL_LIMIT 4096

typedef struct {
	const char *name;         /* "fold", "bn", "identity", "dce", "cse", ... */
	int (*run)(mc_graph *g, const mc_freeze_opts *o);
} mc_pass;

/* The passes in the order mc_freeze runs them (NULL-terminated). */
extern const mc_pass mc_freeze_passes[];
/* A pass --dump-after may name: one of mc_freeze_passes or layout. */
bool mc_freeze_pass_known(const char *name);

/* Runs every pass (to a fixed point where one pass enables another),
 * dumping and timing as the options ask. -1 after reporting. */
int mc_freeze(mc_graph *g, const mc_freeze_opts *o);

/* Individual passes. Each returns the number of changes it made (0: the
 * graph is as it was), or -1 after reporting. They work on g and on the
 * branches of its If nodes (an If whose condition is known is replaced by
 * its branch's nodes); Loop and Scan bodies are left as they are, being
 * typed again for each iteration. A fold_limit of 0 means
 * MC_DEFAULT_FOLD_LIMIT; o may be NULL. */
int mc_pass_fold(mc_graph *g, const mc_freeze_opts *o);       /* constant folding, If with known cond */
int mc_pass_fold_bn(mc_graph *g, const mc_freeze_opts *o);    /* BN, per-channel Mul/Add into Conv/Gemm */
int mc_pass_fold_pad(mc_graph *g, const mc_freeze_opts *o);   /* zero Pad into the Conv reading it */
int mc_pass_patterns(mc_graph *g, const mc_freeze_opts *o);    /* written-out Swish, GELU, LayerNorm, attention: one node */
int mc_pass_identity(mc_graph *g, const mc_freeze_opts *o);   /* Identity, Dropout, no-op Reshape/Cast/Transpose */
int mc_pass_dce(mc_graph *g, const mc_freeze_opts *o);
int mc_pass_cse(mc_graph *g, const mc_freeze_opts *o);
/* Channels-last layout (o->layout): Conv and pools to their Nhwc forms,
 * transposes sunk to the graph's boundary (freezing/layout.c). mc_freeze
 * runs it once, after the other passes' fixed point. */
int mc_pass_layout(mc_graph *g, const mc_freeze_opts *o);
/* Quantized regions (QDQ) to the integer ops of libcore/ops/qint.h
 * (freezing/quantize.c); first in every round, before fold. */
int mc_pass_quantize(mc_graph *g, const mc_freeze_opts *o);
/* --quantized-io: a graph input whose only reader is a QiQuantize becomes
 * that integer input, and a graph output a per-tensor DequantizeLinear
 * writes becomes its integer input; their scale and zero point go to the
 * value (io_scale, io_zero_point) and on to the header. Changes made. */
int mc_quantized_io(mc_graph *g);
/* What the reference interpreter runs (modelc run, verify): the integer ops
 * the compiled code runs, so that they agree bit for bit; -1 after
 * reporting. */
int mc_quantize_reference(mc_graph *g, bool quantized_io);
/* Prints (to f, each line after prefix) every float node next to a
 * quantized value, with why it stayed float; returns their count. */
int mc_quant_islands(const mc_graph *g, FILE *f, const char *prefix);
/* Scan and Loop nodes become their body's nodes once per iteration (the
 * generated code has no loops over graphs): freezing/unroll.c. */
int mc_pass_unroll(mc_graph *g, const mc_freeze_opts *o);
/* Why Scan or Loop node n of g cannot be unrolled into at most `limit`
 * nodes (0: the default), or NULL when it can (buf, len may hold the text). */
const char *mc_unroll_refusal(const mc_graph *g, const mc_node *n, int limit, char *buf, size_t len);

/* Readable text of the graph: one line per node with input/output names,
 * dtypes and shapes; constants summarised. */
void mc_graph_dump(const mc_graph *g, FILE *f);
/* Count of nodes, subgraphs included. */
int mc_graph_node_count(const mc_graph *g);

#endif
