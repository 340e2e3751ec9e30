/* Parsed attributes (node->params) of NegativeLogLikelihoodLoss and
 * SoftmaxCrossEntropyLoss (libcore/ops/loss.c), shared with their lowerings
 * (aot/lower_reduce.c). */
#ifndef MODELC_OPS_LOSS_H
#define MODELC_OPS_LOSS_H

#include "../modelc.h"

typedef enum { REDUCE_NONE, REDUCE_SUM, REDUCE_MEAN } loss_reduction;

typedef struct {
	loss_reduction reduction;
	bool has_ignore;
	int64_t ignore_index;
} loss_params;

#endif
