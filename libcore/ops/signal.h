/* Parsed attributes (node->params) of the signal ops, shared by the
 * reference implementations (signal.c) and the lowerings
 * (aot/lower_misc.c). */
#ifndef MODELC_OPS_SIGNAL_H
#define MODELC_OPS_SIGNAL_H

#include "../modelc.h"

typedef struct {
	bool inverse, onesided;
	int64_t axis_attr; /* opsets 17-19; from 20 the axis is input 2 */
} dft_params;

typedef struct {
	bool onesided;
} stft_params;

typedef struct {
	bool periodic;
	mc_dtype out_dtype;
	double a0, a1, a2;
} window_params;

typedef struct {
	bool exclusive, reverse;
} cumprod_params;

#endif
