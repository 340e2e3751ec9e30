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
