/* Node params and geometry of QuantizeLinear / DequantizeLinear
 * (libcore/ops/quant.c), shared with their lowering
 * (aot/lower_elementwise.c). */
#ifndef MODELC_OPS_QUANT_H
#define MODELC_OPS_QUANT_H

#include "../modelc.h"

typedef struct {
	bool quantize;
	int64_t axis;
	int64_t block_size;   /* 0: per-tensor or per-axis */
	int64_t output_dtype; /* 0 when absent */
	bool saturate;        /* QuantizeLinear 19+ to float8: clamp, not inf/NaN */
	int64_t precision;    /* QuantizeLinear 23+: dtype of the division; 0 if absent */
} qdq_params;

/* How scale and zero point map onto x. */
typedef enum { QL_TENSOR, QL_AXIS, QL_BLOCKED } ql_mode;

typedef struct {
	ql_mode mode;
	int axis;
	int64_t block;
} qlayout;

/* Decides per-tensor / per-axis / blocked from the scale's shape and checks
 * the zero point (may be NULL) against it; -1 after reporting. */
int mc_qlayout_infer(const mc_node *n, const qdq_params *p, const mc_shape *x,
                     const mc_value *scale, const mc_value *zp, qlayout *l);
/* The saturation range of a quantized integer type; false if t is not one. */
bool mc_quant_range(mc_dtype t, int64_t *lo, int64_t *hi);
/* numpy's result type of arithmetic between two float (or int32) types:
 * the precision of QuantizeLinear's division when no precision is given. */
mc_dtype mc_quant_promote(mc_dtype a, mc_dtype b);

#endif
