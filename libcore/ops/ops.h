/* Op families: each file under libcore/ops/ exports one NULL-terminated
 * table of registry entries. */
#ifndef MODELC_OPS_H
#define MODELC_OPS_H

#include "../modelc.h"

extern const mc_op *const mc_ops_elementwise[]; /* unary, binary, compare, logic, Cast, Where */
extern const mc_op *const mc_ops_nn[];          /* Conv, ConvTranspose, Gemm, MatMul, pooling */
extern const mc_op *const mc_ops_tensor[];      /* Reshape, Transpose, Concat, Split, Shape, Expand, ... */
extern const mc_op *const mc_ops_index[];       /* Slice, Gather, Scatter, Pad, Resize, DepthToSpace, ... */
extern const mc_op *const mc_ops_reduce[];      /* Reduce*, Softmax, ArgMax, normalisations */
extern const mc_op *const mc_ops_rnn[];         /* LSTM, GRU, RNN */
extern const mc_op *const mc_ops_control[];     /* If */
extern const mc_op *const mc_ops_loop[];        /* Loop, Scan */
extern const mc_op *const mc_ops_signal[];      /* DFT, STFT, windows, MelWeightMatrix, CumProd */
extern const mc_op *const mc_ops_loss[];        /* NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss */
extern const mc_op *const mc_ops_quant[];       /* QuantizeLinear, DequantizeLinear, integer matmul/conv */
extern const mc_op *const mc_ops_extra[];       /* Einsum, attention-era ops, GridSample, ... */
extern const mc_op *const mc_ops_nhwc[];        /* internal: NhwcConv, NhwcMaxPool, NhwcAveragePool */
extern const mc_op *const mc_ops_qint[];        /* internal: the integer ops of quantized regions (qint.h) */

/* Typical inference for ops whose outputs are shaped like input 0. */
int mc_infer_same_as_input0(mc_infer_ctx *c);

/* Optional inputs and outputs: NULL when omitted, trailing ones included. */
const mc_value *mc_opt_in(const mc_infer_ctx *c, int i);
const mc_tensor *mc_opt_tensor(const mc_eval_ctx *c, int i);
mc_tensor *mc_opt_out(const mc_eval_ctx *c, int i);
/* Ops whose outputs' extent may depend on the data (MC_OP_COUNTED):
 * the importer's count output, at index max_outputs, typed an int64
 * scalar; its index, or -1 where the node has none (made otherwise). */
int mc_count_out(mc_infer_ctx *c);
/* Output k shaped `bound`, counted on axis by the count output (index
 * count, mc_count_out's): its extent there is known at run time only. */
void mc_set_counted_out(mc_infer_ctx *c, int k, mc_dtype dt, const mc_shape *bound, int axis, int count);
/* res, shaped as output k but for its true extent on axis, into output k
 * (the bound's extent there; the same where the inputs were known at
 * compile time), zeros past it; frees res. -1 after reporting. */
int mc_deliver_padded(mc_eval_ctx *c, int k, mc_tensor *res, int axis);
/* n into the node's count output, where it has one. */
void mc_deliver_count(mc_eval_ctx *c, int64_t n);

/* The dims Reduce* node n takes from an input shaped in (axes_t: its axes
 * input where it has one, else NULL), as its inference plans them, and
 * whether it keeps them; -1 after reporting. */
int mc_reduce_axes(const mc_node *n, const mc_shape *in, const mc_tensor *axes_t, bool reduced[MC_MAX_RANK],
                   bool *keepdims);

/* Inputs the op cannot do without, even when the model leaves them empty:
 * "input K is required" for the first of idx[0..count) that is omitted. */
int mc_need_inputs(const mc_infer_ctx *c, const int *idx, int count);
#define MC_NEED_INPUTS(c, ...) mc_need_inputs((c), (const int[]){__VA_ARGS__}, \
	(int)(sizeof (const int[]){__VA_ARGS__} / sizeof(int)))

/* Attribute `name` holding exactly `count` ints (each dflt when absent),
 * each in [min, 2^40]; -1 after reporting. */
int mc_attr_ints_fixed(const mc_node *n, const char *name, int count, int64_t dflt, int64_t min,
                       int64_t *out);

/* Fresh zeroed node params of `size` bytes (the old ones freed). */
void *mc_params_new(mc_node *n, size_t size);
/* A zeroed working array of count elements (at least one) of `size` bytes.
 * Sized by the model, so a failure is reported (NULL), never fatal. */
void *mc_alloc_array(const mc_node *n, size_t count, size_t size);

/* Index of element i of a tensor shaped `target` in a tensor read through
 * broadcast strides `st` (see mc_broadcast_strides). */
size_t mc_bcast_index(size_t i, const mc_shape *target, const int64_t st[MC_MAX_RANK]);

#endif
