/* Window geometry and channel chunking shared by the channels-last kernels
 * of depthwise convolutions (aot/kern_dw.c) and pools (aot/kern_pool.c).
 * Data is [N, D1.., C] of rank 3 or 4; a rank-3 tensor is seen as 2-D with
 * a height of 1, so each generator has one 2-D path. */
#ifndef MODELC_KERN_NHWC_H
#define MODELC_KERN_NHWC_H

#include "lower.h"

/* One spatial dim: input and output extents, taps, stride, dilation and
 * the pads at both ends. */
typedef struct {
	int64_t in, out, k, s, d, pb, pe;
} mc_nhwc_dim;

typedef struct {
	int rank;           /* of the data: 3 or 4 */
	int64_t n, c;       /* batch, channels */
	mc_nhwc_dim h, w;   /* h is the unit dim for rank 3 */
} mc_nhwc_geom;

/* The geometry of c's node (attributes as ONNX Conv / pools: nn_params),
 * whose input 0 is channels-last; kernel is the window (the weight's
 * spatial dims) or NULL for pools. 0; 1 for a shape no NHWC kernel
 * handles (rank, non-float32 data); -1 after reporting. */
int mc_nhwc_geom_of(const mc_lower_ctx *c, const int64_t *kernel, mc_nhwc_geom *g);

/* Output columns [*lo, *hi) whose whole window lies inside the input. */
void mc_nhwc_interior(const mc_nhwc_dim *d, int64_t *lo, int64_t *hi);

/* The window of output position o: tap t reads input start + t*d, inside
 * the input for t in [lo, hi) (constants where no position needs more). */
typedef struct {
	mc_kexpr *start, *lo, *hi;
} mc_nhwc_taps;
void mc_nhwc_taps_at(mc_kb *kb, const mc_nhwc_dim *d, mc_kexpr *o, mc_nhwc_taps *t);
/* Taps inside the explicitly padded input (AveragePool counting pads). */
mc_kexpr *mc_nhwc_padded_taps(mc_kb *kb, const mc_nhwc_dim *d, mc_kexpr *o);

/* A loop over [lo, hi), or lo itself where that is one value known now;
 * *depth counts the blocks opened. */
mc_kexpr *mc_nhwc_range(mc_kb *kb, mc_kexpr *lo, mc_kexpr *hi, unsigned flags, int *depth);

/* Calls fn for every chunk of channels [0, c): a loop over chunks of the
 * ISA's widest vector, one chunk of each narrower width, then a loop over
 * the last channels one by one (lanes 1). c0 is the chunk's first channel. */
typedef void (*mc_nhwc_chunk_fn)(void *ctx, mc_kexpr *c0, int lanes);
void mc_nhwc_chunks(mc_kb *kb, int64_t c, mc_nhwc_chunk_fn fn, void *ctx);

/* Loads `lanes` f32 at index (a scalar for lanes 1). */
mc_kexpr *mc_nhwc_vload(mc_kb *kb, int buf, mc_kexpr *index, int lanes);
/* Stores value (lanes wide) at output 0's element coords through the
 * epilogue-applying stores. */
void mc_nhwc_store(mc_lower_ctx *c, mc_kexpr *const *coords, mc_kexpr *value);

#endif
