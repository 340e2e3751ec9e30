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

/* Typical inference for ops whose outputs are shaped like input 0. */
int mc_infer_same_as_input0(mc_infer_ctx *c);

#endif
