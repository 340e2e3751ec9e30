/* Node params of the elementwise family (libcore/ops/elementwise.c), shared
 * with its lowering (aot/lower_elementwise.c) so that attributes are parsed
 * in one place only. */
#ifndef MODELC_OPS_ELEMENTWISE_H
#define MODELC_OPS_ELEMENTWISE_H

#include "../modelc.h"

/* Params of the map ops (unary, binary and variadic ops): their numeric
 * attributes in the order of the op's attribute list. Slots per op:
 *   LeakyRelu, Elu, Celu, ThresholdedRelu: v[0] alpha
 *   HardSigmoid: alpha, beta      Selu: alpha, gamma
 *   Shrink: bias, lambd           IsInf: detect_negative, detect_positive
 *   Gelu: v[0] 1 for approximate="tanh"
 *   BitShift: v[0] 1 for direction="LEFT"
 *   Mod: v[0] fmod */
typedef struct {
	double v[4];
} attr_vals;

/* Clip before opset 11: the bounds are attributes (-inf/+inf when absent);
 * from 11 they are optional scalar inputs. */
typedef struct {
	double lo, hi;
} clip_attrs;

/* Cast and CastLike: what a conversion needs beyond the target dtype. */
typedef struct {
	mc_dtype to;          /* Cast's target; CastLike takes its input 1's dtype */
	bool saturate;        /* float8 and float8e8m0 targets (opset 19+) */
	mc_round_mode round;  /* float8e8m0 targets (opset 24+) */
} cast_attrs;

/* For a map op node (not Clip, Where, Cast, Identity, Dropout): the shape
 * each of its `count` inputs (shapes) is broadcast as (views; they differ
 * from the shapes only for legacy broadcasting before opset 7: Add's
 * broadcast/axis attributes, PRelu's per-channel slope) and the output
 * shape. -1 after reporting. */
int mc_ew_shapes(const mc_node *n, int count, const mc_shape *shapes, mc_shape *views,
                 mc_shape *out);

#endif
