/* Parsed Einsum equations and Col2Im geometry (libcore/ops/extra.c),
 * shared with their lowerings (aot/lower_nn.c). */
#ifndef MODELC_OPS_EXTRA_H
#define MODELC_OPS_EXTRA_H

#include "../modelc.h"

/* Einsum labels: ids below MC_MAX_RANK are ellipsis dims (right-aligned, so
 * the output's ellipsis dims are the last ids of that range), then
 * 'A'..'Z', then 'a'..'z': increasing id order is the implicit output's
 * order. */
#define EINSUM_MAX_INPUTS 32
#define EINSUM_LABELS (MC_MAX_RANK + 52)
#define ELLIPSIS '.'

typedef struct {
	int n_terms;
	char terms[EINSUM_MAX_INPUTS][MC_MAX_RANK + 2]; /* letters; '.' stands for "..." */
	bool explicit_out;
	char out[MC_MAX_RANK + 2];
} einsum_params;

typedef struct {
	int ell_rank;                   /* dims the ellipsis covers in the output */
	int64_t size[EINSUM_LABELS];    /* -1: label not used */
	int in_label[EINSUM_MAX_INPUTS][MC_MAX_RANK];
	int out_rank;
	int out_label[MC_MAX_RANK];
	mc_shape out_shape;
} einsum_plan;

/* The labels of every operand dim and of the output, and each label's size. */
int mc_einsum_plan_make(const mc_node *n, const mc_shape *const *shapes, einsum_plan *pl);

typedef struct {
	int r;
	int64_t n, ch, blocks;
	int64_t image[MC_MAX_RANK], block[MC_MAX_RANK], cols[MC_MAX_RANK];
	int64_t dil[MC_MAX_RANK], stride[MC_MAX_RANK], pad[2 * MC_MAX_RANK];
} col2im_geom;

/* Col2Im's geometry for input x [N, C * prod(block), L] and r image dims. */
int mc_col2im_plan(const mc_node *n, const mc_shape *x, const int64_t *image,
                   const int64_t *block, int r, col2im_geom *g);

#endif
