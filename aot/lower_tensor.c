/* Lowerings of the tensor family (see aot/aot.h: mc_lowering): ops that
 * move or generate elements. Each output element is computed from its
 * coordinates and stored once through mc_lower_store, so every op here but
 * the aliases takes a fused epilogue. Attributes are read through the
 * registry's own readers (libcore/ops/tensor.h); shapes come inferred. */
#include <string.h>

#include "lower.h"
#include "../libcore/ops/tensor.h"

/* Nothing to store: the output is omitted or has no elements (loops over
 * an empty dim would still print index arithmetic such as x % 0). */
static bool nothing_to_store(const mc_lower_ctx *c, int k)
{
	return !c->out[k] || c->out_buf[k] < 0 || mc_numel(&c->out[k]->shape) == 0;
}

/* The output's compute type. */
static mc_ktype out_type(const mc_lower_ctx *c, int k)
{
	return mc_ktype_of(c->out[k]->dtype);
}

/* ---- Transpose: output coords permuted into the input's ---- */
static int lower_transpose(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *is = &c->in[0]->shape, *os = &c->out[0]->shape;
	int64_t perm[MC_MAX_RANK];
	mc_kexpr *oc[MC_MAX_RANK], *ic[MC_MAX_RANK];
	if (mc_transpose_perm(c->node, is->rank, perm))
		return -1;
	if (nothing_to_store(c, 0))
		return 0;
	mc_lower_loops(kb, os, oc, MC_KF_PARALLEL);
	for (int d = 0; d < os->rank; d++)
		ic[perm[d]] = oc[d];
	mc_lower_store(c, 0, oc, NULL, mc_lower_load(c, 0, mc_lower_linear(kb, is, ic)));
	mc_kb_end_n(kb, os->rank);
	return 0;
}

/* ---- Concat: one loop nest per input, writing its slab ----
 * With --optimize memory, where input 0 dies here, its nest runs first and
 * backwards, so the output may take over its storage and grow past it: each
 * element goes at an index no lower than the one it came from, which is
 * either its own (read just before) or one read already. */
static int lower_concat(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *os = &c->out[0]->shape;
	int axis;
	if (mc_concat_axis(c->node, os->rank, &axis))
		return -1;
	if (nothing_to_store(c, 0))
		return 0;
	bool down = kb->for_memory && kb->input0_dies && c->n_in > 0 && c->in[0] &&
	            c->in[0]->dtype == c->out[0]->dtype;
	if (down)
		kb->k->inplace_input0 = kb->k->inplace_grows = true;
	int64_t offset = 0;
	for (int k = 0; k < c->n_in; k++) {
		const mc_shape *is = &c->in[k]->shape;
		mc_kexpr *ic[MC_MAX_RANK], *oc[MC_MAX_RANK];
		if (mc_numel(is) == 0) {
			offset += is->dims[axis];
			continue;
		}
		mc_lower_loops(kb, is, ic, down && k == 0 ? 0 : MC_KF_PARALLEL);
		if (down && k == 0)
			for (int d = 0; d < is->rank; d++)
				ic[d] = mc_kb_let(kb, mc_k_sub(kb, mc_k_index(kb, is->dims[d] - 1), ic[d]));
		memcpy(oc, ic, sizeof ic);
		oc[axis] = mc_k_addi(kb, ic[axis], offset);
		mc_lower_store(c, 0, oc, NULL, mc_lower_load_at(c, k, is, ic));
		mc_kb_end_n(kb, is->rank);
		offset += is->dims[axis];
	}
	return 0;
}

/* ---- Split: one loop nest per output, reading its slab ---- */

/* Length of each part along the axis, from the inferred output shapes. An
 * omitted output has no shape: it is derived when it is the only one. */
static int split_lengths(const mc_lower_ctx *c, int axis, int64_t *len)
{
	int64_t dim = c->in[0]->shape.dims[axis], known = 0;
	int unknown = -1;
	for (int k = 0; k < c->n_out; k++) {
		if (c->out[k]) {
			len[k] = c->out[k]->shape.dims[axis];
			known += len[k];
		} else if (unknown < 0) {
			unknown = k;
			len[k] = 0;
		} else {
			len[k] = 0;
			/* two omitted outputs: their split point is unknown here,
			 * which matters only if a present output follows them */
			for (int j = k + 1; j < c->n_out; j++)
				if (c->out[j])
					return mc_lower_error(c, "Split with several omitted outputs before "
					                      "a present one has no C lowering");
		}
	}
	if (unknown >= 0)
		len[unknown] = dim - known;
	return 0;
}

static int lower_split(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *is = &c->in[0]->shape;
	int axis;
	if (mc_split_axis(c->node, is->rank, &axis))
		return -1;
	int64_t *len = mc_kpool_alloc(kb->pool, sizeof *len * (size_t)(c->n_out + 1));
	if (split_lengths(c, axis, len))
		return -1;
	/* equal parts, every one stored: one nest stores them all (on a grid,
	 * one launch instead of one a part) */
	bool equal = c->n_out > 1;
	for (int k = 0; k < c->n_out && equal; k++)
		equal = !nothing_to_store(c, k) && len[k] == len[0];
	if (equal) {
		const mc_shape *os = &c->out[0]->shape;
		mc_kexpr *oc[MC_MAX_RANK], *ic[MC_MAX_RANK];
		mc_lower_loops(kb, os, oc, MC_KF_PARALLEL);
		memcpy(ic, oc, sizeof oc);
		for (int k = 0; k < c->n_out; k++) {
			ic[axis] = mc_k_addi(kb, oc[axis], k * len[0]);
			mc_lower_store(c, k, oc, NULL, mc_lower_load(c, 0, mc_lower_linear(kb, is, ic)));
		}
		mc_kb_end_n(kb, os->rank);
		return 0;
	}
	int64_t offset = 0;
	for (int k = 0; k < c->n_out; k++) {
		if (!nothing_to_store(c, k)) {
			const mc_shape *os = &c->out[k]->shape;
			mc_kexpr *oc[MC_MAX_RANK], *ic[MC_MAX_RANK];
			mc_lower_loops(kb, os, oc, MC_KF_PARALLEL);
			memcpy(ic, oc, sizeof oc);
			ic[axis] = mc_k_addi(kb, oc[axis], offset);
			mc_lower_store(c, k, oc, NULL, mc_lower_load(c, 0, mc_lower_linear(kb, is, ic)));
			mc_kb_end_n(kb, os->rank);
		}
		offset += len[k];
	}
	return 0;
}

/* ---- Expand: numpy broadcasting of the input to the output ---- */
static int lower_expand(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *os = &c->out[0]->shape;
	mc_kexpr *oc[MC_MAX_RANK];
	if (nothing_to_store(c, 0))
		return 0;
	mc_lower_loops(kb, os, oc, MC_KF_PARALLEL);
	mc_kexpr *src = mc_lower_bcast(kb, &c->in[0]->shape, os, oc);
	mc_lower_store(c, 0, oc, NULL, mc_lower_load(c, 0, src));
	mc_kb_end_n(kb, os->rank);
	return 0;
}

/* ---- Tile: each output coordinate wraps at the input's dim ---- */
static int lower_tile(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *is = &c->in[0]->shape, *os = &c->out[0]->shape;
	mc_kexpr *oc[MC_MAX_RANK], *ic[MC_MAX_RANK];
	if (nothing_to_store(c, 0))
		return 0;
	mc_lower_loops(kb, os, oc, MC_KF_PARALLEL);
	for (int d = 0; d < os->rank; d++)
		ic[d] = is->dims[d] == os->dims[d] ? oc[d]
		        : mc_k_bin(kb, MC_KB_REM, oc[d], mc_k_index(kb, is->dims[d]));
	mc_lower_store(c, 0, oc, NULL, mc_lower_load(c, 0, mc_lower_linear(kb, is, ic)));
	mc_kb_end_n(kb, os->rank);
	return 0;
}

/* ---- generators ---- */

/* EyeLike: ones where col = row + k. */
static int lower_eyelike(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *os = &c->out[0]->shape;
	mc_ktype t = out_type(c, 0);
	int64_t k;
	mc_kexpr *oc[2];
	if (mc_attr_int(c->node, "k", 0, &k))
		return -1;
	if (nothing_to_store(c, 0))
		return 0;
	mc_lower_loops(kb, os, oc, MC_KF_PARALLEL);
	mc_kexpr *on = mc_k_bin(kb, MC_KB_EQ, oc[1], mc_k_addi(kb, oc[0], k));
	mc_lower_store(c, 0, oc, NULL,
	               mc_k_select(kb, on, mc_k_const_as(kb, t, 1), mc_k_const_as(kb, t, 0)));
	mc_kb_end_n(kb, 2);
	return 0;
}

/* ConstantOfShape: the attribute's one value (float 0 without it). */
static int lower_constantofshape(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_attr *a = mc_attr_find(c->node, "value");
	mc_ktype t = out_type(c, 0);
	mc_kexpr *v;
	if (nothing_to_store(c, 0))
		return 0;
	if (!a || !a->t)
		v = mc_k_const_as(kb, t, 0);
	else if (mc_ktype_is_float(t))
		v = mc_k_float(kb, t, mc_get_f(a->t, 0));
	else
		v = mc_k_int(kb, t, t == MC_KT_BOOL ? mc_get_i(a->t, 0) != 0 : mc_get_i(a->t, 0));
	mc_kexpr *i = mc_kb_fori(kb, (int64_t)mc_numel(&c->out[0]->shape),
	                         MC_KF_PARALLEL | MC_KF_VECTOR);
	mc_lower_store(c, 0, NULL, i, v);
	mc_kb_end(kb);
	return 0;
}

/* Range: start + i * delta, read at run time (the length is static).
 * Floats go through f64 like the reference; integers compute in their
 * type, where start + i * delta stays between start and limit. */
static int lower_range(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	mc_ktype t = out_type(c, 0);
	mc_ktype ct = mc_ktype_is_float(t) ? MC_KT_F64 : t;
	if (nothing_to_store(c, 0))
		return 0;
	mc_kexpr *start = mc_kb_let(kb, mc_k_cast(kb, ct, mc_lower_load(c, 0, mc_k_index(kb, 0))));
	mc_kexpr *delta = mc_kb_let(kb, mc_k_cast(kb, ct, mc_lower_load(c, 2, mc_k_index(kb, 0))));
	mc_kexpr *i = mc_kb_fori(kb, c->out[0]->shape.dims[0], MC_KF_PARALLEL);
	mc_kexpr *v = mc_k_add(kb, start, mc_k_mul(kb, mc_k_cast(kb, ct, i), delta));
	mc_lower_store(c, 0, &i, i, v);
	mc_kb_end(kb);
	return 0;
}

/* Shape and Size: constants from the static shape, one store each. */
static int lower_shape(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	const mc_shape *is = &c->in[0]->shape;
	int64_t start, end;
	if (mc_shape_range(c->node, is->rank, &start, &end))
		return -1;
	if (nothing_to_store(c, 0))
		return 0;
	for (int64_t d = start; d < end; d++) {
		mc_kexpr *i = mc_k_index(kb, d - start);
		mc_lower_store(c, 0, &i, i, mc_k_int(kb, out_type(c, 0), is->dims[d]));
	}
	return 0;
}

static int lower_size(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	if (nothing_to_store(c, 0))
		return 0;
	mc_lower_store(c, 0, NULL, mc_k_index(c->kb, 0),
	               mc_k_int(kb, out_type(c, 0), (int64_t)mc_numel(&c->in[0]->shape)));
	return 0;
}

/* Reshape, Flatten, Squeeze, Unsqueeze share their input's storage; the
 * copy runs only where they cannot (a graph output). */
static const mc_lowering l_reshape = { MC_OP_Reshape, mc_lower_copy, NULL, MC_LOWER_ALIAS };
static const mc_lowering l_flatten = { MC_OP_Flatten, mc_lower_copy, NULL, MC_LOWER_ALIAS };
static const mc_lowering l_squeeze = { MC_OP_Squeeze, mc_lower_copy, NULL, MC_LOWER_ALIAS };
static const mc_lowering l_unsqueeze = { MC_OP_Unsqueeze, mc_lower_copy, NULL, MC_LOWER_ALIAS };
static const mc_lowering l_transpose = { MC_OP_Transpose, lower_transpose, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_concat = { MC_OP_Concat, lower_concat, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_split = { MC_OP_Split, lower_split, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_expand = { MC_OP_Expand, lower_expand, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_tile = { MC_OP_Tile, lower_tile, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_eyelike = { MC_OP_EyeLike, lower_eyelike, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_constantofshape = { MC_OP_ConstantOfShape, lower_constantofshape, NULL,
                                               MC_LOWER_EPILOGUE };
static const mc_lowering l_range = { MC_OP_Range, lower_range, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_shape = { MC_OP_Shape, lower_shape, NULL, MC_LOWER_EPILOGUE };
static const mc_lowering l_size = { MC_OP_Size, lower_size, NULL, MC_LOWER_EPILOGUE };

const mc_lowering *const mc_lower_tensor[] = {
	&l_reshape, &l_flatten, &l_squeeze, &l_unsqueeze, &l_transpose, &l_concat, &l_split,
	&l_expand, &l_tile, &l_eyelike, &l_constantofshape, &l_range, &l_shape, &l_size,
	NULL,
};
