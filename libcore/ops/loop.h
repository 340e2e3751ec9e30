/* Loop's and Scan's node->params, shared by the reference implementation
 * (loop.c) and the compiler's unrolling of them (freezing/unroll.c). */
#ifndef MODELC_OPS_LOOP_H
#define MODELC_OPS_LOOP_H

#include "../modelc.h"

/* The 'body' graph of a Loop or Scan node, or NULL. */
static inline mc_graph *mc_loop_body(const mc_node *n)
{
	const mc_attr *a = mc_attr_find(n, "body");
	return a && a->type == MC_ATTR_GRAPH ? a->g : NULL;
}

/* Loop: inputs (trip count, condition, carried values...), body (iteration
 * number, condition, carried...) -> (condition, carried..., scan slices...),
 * outputs (final carried values..., slices stacked along a new axis 0). */
typedef struct {
	bool folding;        /* every input constant: evaluation happens at compile time */
	bool per_iteration;  /* the body is typed for each iteration number */
	/* Set by infer: the iterations it runs whatever the run-time values
	 * (a constant trip count, a condition that cannot end it early), or
	 * -1 when that is not known at compile time. */
	int64_t iters;
	const char *iters_why; /* why iters is -1 (a string literal), or NULL */
} loop_params;

/* Scan. Opset 9+: inputs are n_state initial states then n_scan_in scan
 * inputs; each scan input is sliced along in_axis, forwards or backwards
 * (in_dir 1); body: (states, slices) -> (states, n_scan_out slices);
 * outputs: the final states, then the slices stacked along out_axis
 * (out_dir 1 fills from the end). Opset 8: a leading optional
 * sequence_lens input and a batch axis 0 on every input and output; the
 * scan axis is 1 and outputs are stacked along axis 1 in iteration order
 * (in_dir reverses inputs only). Inference normalises the axes and sets
 * seq_len (and batch). */
typedef struct {
	int n_state, n_scan_in, n_scan_out;
	int64_t seq_len;    /* set by infer */
	int64_t batch;      /* opset 8 only */
	bool folding;
	int *in_axis, *in_dir, *out_axis, *out_dir; /* point into data[] */
	int data[];
} scan_params;

#endif
