/* Parsed attributes (node->params) of the reduce family's ops
 * (libcore/ops/reduce.c), shared with their lowerings (aot/lower_reduce.c). */
#ifndef MODELC_OPS_REDUCE_H
#define MODELC_OPS_REDUCE_H

#include "../modelc.h"

/* ReduceSum ... ReduceSumSquare */
typedef enum {
	R_SUM, R_MEAN, R_PROD, R_MAX, R_MIN, R_L1, R_L2, R_LOGSUM, R_LOGSUMEXP, R_SUMSQ,
} reduce_kind;

typedef struct {
	reduce_kind kind;
	bool axes_input;
	bool keepdims, noop_empty;
} reduce_params;

/* ArgMax, ArgMin */
typedef struct {
	int64_t axis;
	bool keepdims, last, want_max;
} arg_params;

/* Softmax, LogSoftmax, Hardmax */
typedef enum { SM_SOFTMAX, SM_LOGSOFTMAX, SM_HARDMAX } softmax_kind;

typedef struct {
	softmax_kind kind;
	int64_t axis;
	bool coerce_2d; /* before opset 13: the input is flattened to 2-D at axis */
} softmax_params;

/* CumSum */
typedef struct {
	bool exclusive, reverse;
} cumsum_params;

/* TopK */
typedef struct {
	int64_t axis, k_attr; /* k is an attribute before opset 10 */
	bool largest;
} topk_params;

/* BatchNormalization */
typedef struct {
	double epsilon, momentum;
	bool spatial;  /* before opset 9: spatial=0 normalises each (C, D...) element */
	bool training; /* statistics of the batch instead of the running ones */
} bn_params;

/* InstanceNormalization */
typedef struct {
	double epsilon;
} eps_params;

/* LayerNormalization */
typedef struct {
	int64_t axis;
	double epsilon;
	mc_dtype stash; /* dtype of the Mean and InvStdDev outputs */
} layernorm_params;

/* GroupNormalization */
typedef struct {
	double epsilon;
	int64_t groups;
	bool per_channel; /* opset 21: scale and bias are per channel, not per group */
} groupnorm_params;

/* LpNormalization */
typedef struct {
	int64_t axis, p;
} lpnorm_params;

/* LRN */
typedef struct {
	double alpha, beta, bias;
	int64_t size;
} lrn_params;

#endif
