/* Attribute readers of the tensor family (libcore/ops/tensor.c) shared with
 * its lowerings (aot/lower_tensor.c), so that both read the node the same
 * way. Each returns -1 after reporting. */
#ifndef MODELC_OPS_TENSOR_H
#define MODELC_OPS_TENSOR_H

#include "../modelc.h"

/* Transpose: perm as given, or the reversed dims by default. */
int mc_transpose_perm(const mc_node *n, int rank, int64_t perm[MC_MAX_RANK]);
/* Concat's and Split's axis, normalised against rank. */
int mc_concat_axis(const mc_node *n, int rank, int *axis);
int mc_split_axis(const mc_node *n, int rank, int *axis);
/* Shape: the [start, end) range of dims it reports, clamped to [0, rank]. */
int mc_shape_range(const mc_node *n, int rank, int64_t *start, int64_t *end);

#endif
