/* Parsed attributes (node->params) of RMSNormalization (libcore/ops/extra.c),
 * shared with its lowering (aot/lower_reduce.c). */
#ifndef MODELC_OPS_EXTRA_NORM_H
#define MODELC_OPS_EXTRA_NORM_H

#include "../modelc.h"

typedef struct {
	int64_t axis;
	double epsilon;
} rms_params;

#endif
