/* The nn family's parsed attributes and window geometry (libcore/ops/nn.c),
 * shared with its lowering (aot/lower_nn.c) so that both read the same
 * inferred geometry. */
#ifndef MODELC_OPS_NN_H
#define MODELC_OPS_NN_H

#include "../modelc.h"

#define MAX_SP (MC_MAX_RANK - 2) /* spatial dims: all but N and C */

enum { PAD_NOTSET, PAD_SAME_UPPER, PAD_SAME_LOWER, PAD_VALID };

typedef struct {
	int64_t v[2 * MAX_SP];
	size_t n;
	bool given;
} int_list;

/* Attributes of every op in nn.c, read once by parse (node->params). */
typedef struct {
	int auto_pad;
	int_list kernel, strides, dilations, pads, output_padding, output_shape;
	bool ceil_mode, count_include_pad;
	int64_t storage_order, group;
	double p; /* LpPool, GlobalLpPool */
	double alpha, beta;
	bool trans_a, trans_b, broadcast;
} nn_params;

/* One sliding window over the spatial dims. pb/pe are the pads at the
 * beginning and end of each dim; ConvTranspose may make them negative. */
typedef struct {
	int nsp;
	int64_t in[MAX_SP], out[MAX_SP];
	int64_t k[MAX_SP], s[MAX_SP], d[MAX_SP];
	int64_t pb[MAX_SP], pe[MAX_SP];
} win_geom;

/* Kernel, strides, dilations, explicit pads and input sizes from the
 * attributes; `kernel` gives the kernel from W (NULL for the pools). */
int mc_win_setup(const mc_node *n, const nn_params *p, const mc_shape *x, const int64_t *kernel,
                 win_geom *g);
/* Output size and pads of Conv and the pools. */
int mc_win_forward(const mc_node *n, const nn_params *p, win_geom *g);
/* Output size and pads of ConvTranspose. */
int mc_win_transposed(const mc_node *n, const nn_params *p, win_geom *g);

/* Shapes of a numpy-style matrix product: a 1-D A is a row (its M dim
 * dropped from the output), a 1-D B a column; batch dims broadcast. */
typedef struct {
	mc_shape a_batch, b_batch, batch;
	int64_t m, k, n;
} mm_dims;

int mc_matmul_dims(const mc_node *nd, const mc_shape *a, const mc_shape *b, mm_dims *d,
                   mc_shape *out);

/* M, K, N of Gemm's A' * B' (and the checks of A, B and C's shapes). */
int mc_gemm_dims(const mc_node *n, const nn_params *p, const mc_shape *a, const mc_shape *b,
                 const mc_shape *cs, int64_t mkn[3]);

#endif
