/* The quant family's geometry helpers (libcore/ops/quant.c), shared with
 * the lowerings of QLinearMatMul and QLinearConv (aot/lower_nn.c). */
#ifndef MODELC_OPS_QUANT_H
#define MODELC_OPS_QUANT_H

#include "ops.h"

/* The saturation range of a quantized integer type; false if t is not one. */
bool quant_range(mc_dtype t, int64_t *lo, int64_t *hi);
/* numpy's result type of arithmetic between two float (or int32) types:
 * the precision requantisation factors are computed at. */
mc_dtype promote(mc_dtype a, mc_dtype b);

/* numpy matmul geometry: 1-D operands are promoted (and the added dim
 * dropped from the result), batch dims broadcast. */
typedef struct {
	mc_shape a, b;        /* operands as [..., M, K] and [..., K, N] */
	mc_shape batch;       /* broadcast batch dims */
	int64_t m, k, n;
	mc_shape out;
} mm_geom;

int mm_geom_get(const mc_node *n, const mc_shape *a, const mc_shape *b, mm_geom *g);

/* Strides of a quantization parameter shaped p read at the elements of a
 * tensor shaped `target`: numpy broadcasting, except that a 1-D parameter
 * with one value per row (second-to-last dim) applies per row when per_row
 * is set. */
void param_strides(const mc_shape *p, const mc_shape *target, bool per_row,
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
int conv_geom_get(const mc_node *n, const mc_shape *x, const mc_shape *w, conv_geom *g);

#endif
