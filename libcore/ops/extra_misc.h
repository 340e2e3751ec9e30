/* Parsed attributes (node->params) of Attention, GridSample and RoiAlign,
 * shared by the reference implementations (extra.c) and the lowerings
 * (aot/lower_misc.c). */
#ifndef MODELC_OPS_EXTRA_MISC_H
#define MODELC_OPS_EXTRA_MISC_H

#include "../modelc.h"

typedef struct {
	bool causal;
	int64_t q_heads, kv_heads; /* 0 when absent */
	/* qk_matmul_output: 0 the scaled Q.K^T, 1 after softcap, 2 after softcap
	 * and the mask/bias, 3 after softmax (modes 1 to 3 as the ONNX test data;
	 * the ONNX reference also softcaps mode 0, which no test covers) */
	int64_t qk_mode;
	bool has_scale;
	double scale, softcap;
} attn_params;

typedef enum { GS_LINEAR, GS_NEAREST, GS_CUBIC } gs_mode;
typedef enum { GS_ZEROS, GS_BORDER, GS_REFLECTION } gs_pad;

typedef struct {
	gs_mode mode;
	gs_pad pad;
	bool align;
} gs_params;

typedef struct {
	bool max_mode;
	bool half_pixel;
	int64_t out_h, out_w, sampling_ratio;
	double spatial_scale;
} roi_params;

#endif
