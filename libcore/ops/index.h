/* Plans and attribute readers of the index family (libcore/ops/index.c)
 * shared with its lowerings (aot/lower_index.c): both read a node's
 * geometry through the same code. Functions return -1 after reporting. */
#ifndef MODELC_OPS_INDEX_H
#define MODELC_OPS_INDEX_H

#include "../modelc.h"

/* ---- Slice ---- */
typedef struct {
	int64_t start[MC_MAX_RANK], step[MC_MAX_RANK];
	mc_shape out;
} slice_plan;

/* From attributes before opset 10, else from the tensors t[0..3] (starts,
 * ends, axes, steps; axes and steps may be NULL). */
int mc_slice_make_plan(const mc_node *n, const mc_shape *data, const mc_tensor *const *t,
                       slice_plan *p);

/* ---- Gather family ---- */
int mc_gather_axis(const mc_node *n, int rank, int *axis);
int mc_gathernd_batch(const mc_node *n);

/* ---- Scatter reductions ---- */
enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };
int mc_parse_reduction(const mc_node *n, int *red);

/* ---- Pad ---- */
enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

typedef struct {
	int mode;
	int64_t begin[MC_MAX_RANK], end[MC_MAX_RANK];
	mc_shape out;
} pad_plan;

/* Pads from the attribute (before opset 11) or pads_t/axes_t (axes_t may
 * be NULL). Negative pads crop before padding. */
int mc_pad_make_plan(const mc_node *n, const mc_shape *data, const mc_tensor *pads_t,
                     const mc_tensor *axes_t, pad_plan *p);

/* ---- Resize / Upsample ---- */
enum { RS_NEAREST, RS_LINEAR, RS_CUBIC };
enum {
	CT_HALF_PIXEL, CT_HALF_PIXEL_SYMMETRIC, CT_PYTORCH_HALF_PIXEL, CT_ALIGN_CORNERS,
	CT_ASYMMETRIC, CT_TF_HALF_PIXEL_FOR_NN, CT_TF_CROP_AND_RESIZE,
};
/* NR_SIMPLE: Upsample and Resize-10 round down when upsampling and up when
 * downsampling (ONNX Runtime's rule; upsampling by whole factors then is
 * the plain repeat of the ONNX reference). */
enum { NR_ROUND_PREFER_FLOOR, NR_ROUND_PREFER_CEIL, NR_FLOOR, NR_CEIL, NR_SIMPLE };
enum { KA_STRETCH, KA_NOT_LARGER, KA_NOT_SMALLER };

typedef struct {
	int mode, coord, nearest, keep_aspect;
	double cubic_a, extrapolation;
	bool exclude_outside, antialias;
	bool upsample;       /* Upsample, or Resize before opset 11 */
	size_t n_axes;       /* 0: all axes */
	int64_t axes[MC_MAX_RANK];
} resize_attrs;

typedef struct {
	mc_shape out;
	double scale[MC_MAX_RANK];
	/* Output size as a real number (scale * input size): the reference's
	 * align_corners and tf_crop_and_resize divide by it, not by the
	 * rounded size. */
	double width[MC_MAX_RANK];
	int n_axes, axes[MC_MAX_RANK]; /* the resized axes, in the given order */
} resize_plan;

int mc_resize_read_attrs(const mc_node *n, resize_attrs *a);
/* scales_t/sizes_t: the tensors that set the output shape (NULL or empty:
 * absent; Upsample-7/8 read the attribute 'scales'). */
int mc_resize_make_plan(const mc_node *n, const resize_attrs *a, const mc_shape *in,
                        const mc_tensor *scales_t, const mc_tensor *sizes_t,
                        resize_plan *p);
/* Which inputs hold scales and sizes (-1: none), by op and opset. */
void mc_resize_inputs(const mc_node *n, int n_in, int *scales_i, int *sizes_i);
/* Filter taps per output position along an axis of this scale. */
double mc_resize_taps(const resize_attrs *a, double scale);
/* A nearest Resize as a gather: output element (o0, o1, ...) is input
 * element (map[0][o0], map[1][o1], ...) (the reference's own taps); the
 * maps malloc'd, *out the output shape. 1 where it is no plain gather
 * (another mode, tf_crop_and_resize), -1 after reporting. */
int mc_resize_nearest_map(const mc_node *n, const mc_shape *in, const mc_tensor *scales,
                          const mc_tensor *sizes, int64_t **map, mc_shape *out);

/* ---- the rest ---- */
int mc_d2s_crd(const mc_node *n, bool *crd);   /* DepthToSpace mode CRD? */
int mc_onehot_axis(const mc_node *n, int out_rank, int *axis);
int mc_compress_axis(const mc_node *n, int rank, int *axis); /* -1: flattened */

#endif
