/* Node params and geometry of QuantizeLinear / DequantizeLinear
 * (libcore/ops/quant.c), shared with their lowering
 * (aot/lower_elementwise.c); the geometry of QLinearMatMul and QLinearConv,
 * shared with theirs (aot/lower_nn.c). */
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

/* numpy matmul geometry: 1-D operands are promoted (and the added dim
 * dropped from the result), batch dims broadcast. */
typedef struct {
	mc_shape a, b;        /* operands as [..., M, K] and [..., K, N] */
	mc_shape batch;       /* broadcast batch dims */
	int64_t m, k, n;
	mc_shape out;
} mm_geom;

int mc_mm_geom_get(const mc_node *n, const mc_shape *a, const mc_shape *b, mm_geom *g);

/* Strides of a quantization parameter shaped p read at the elements of a
 * tensor shaped `target`: numpy broadcasting, except that a 1-D parameter
 * with one value per row (second-to-last dim) applies per row when per_row
 * is set. */
void mc_qparam_strides(const mc_shape *p, const mc_shape *target, bool per_row,
                       int64_t st[MC_MAX_RANK]);

/* Inputs of QLinearMatMul and QLinearConv. */
enum { QM_A, QM_A_SCALE, QM_A_ZP, QM_B, QM_B_SCALE, QM_B_ZP, QM_Y_SCALE, QM_Y_ZP };
enum { QC_X, QC_X_SCALE, QC_X_ZP, QC_W, QC_W_SCALE, QC_W_ZP, QC_Y_SCALE, QC_Y_ZP, QC_B };

typedef struct {
	int nsp;                        /* spatial dims */
	int64_t batch, in_ch, out_ch, group;
	int64_t in[MC_MAX_RANK], kern[MC_MAX_RANK], out[MC_MAX_RANK];
	int64_t stride[MC_MAX_RANK], dil[MC_MAX_RANK], pad[MC_MAX_RANK]; /* pad: leading */
} conv_geom;

/* Conv geometry from attributes and the shapes of x [N, C, D...] and
 * w [M, C/group, K...], as the ONNX Conv spec defines it. */
int mc_conv_geom_get(const mc_node *n, const mc_shape *x, const mc_shape *w, conv_geom *g);
mc_shape mc_conv_out_shape(const conv_geom *g);

/* The integer sums of the quantized products (QLinearConv, QLinearMatMul
 * and the integer ops of qint.h), malloc'd, in int64 (8-bit operands
 * cannot overflow it): operands already centred on their zero points.
 * conv: acc[n, m, out...] over the group's channels and the window, taps in
 * the padding skipped, plus bias[m] (may be NULL); matmul: acc[batch, m, n]. */
int64_t *mc_conv_int64(const conv_geom *g, const int64_t *x, const int64_t *w, const int64_t *bias);
int64_t *mc_mm_int64(const mm_geom *g, const int64_t *a, const int64_t *b);

#endif
