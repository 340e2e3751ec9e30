/* Lowering toolbox: loop nests, broadcast indexing, loads, and the store
 * that inlines a group's fused epilogue. The generic elementwise kernel of
 * pointwise ops lives here too, so that every pointwise op only says how
 * one element is computed. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower.h"
#include "../libcore/ops/index.h"

/* The internal channels-last ops (aot/lower_nhwc.c); declared here rather
 * than in aot.h because only this table names them. */
extern const mc_lowering *const mc_lower_nhwc[];

static const mc_lowering *const *const families[] = {
	mc_lower_elementwise, mc_lower_nn, mc_lower_tensor, mc_lower_index,
	mc_lower_reduce, mc_lower_misc, mc_lower_nhwc,
};

const mc_lowering *mc_lowering_find(mc_opid id)
{
	/* indexed by op id on first use: the family tables stay where their
	 * lowerings are */
	static const mc_lowering *by_id[MC_OP__COUNT];
	static bool indexed;
	if (!indexed) {
		for (size_t f = 0; f < sizeof families / sizeof *families; f++)
			for (const mc_lowering *const *l = families[f]; *l; l++)
				by_id[(*l)->op] = *l;
		indexed = true;
	}
	return (unsigned)id < MC_OP__COUNT && id != MC_OP_NONE ? by_id[id] : NULL;
}

int mc_lower_error(const mc_lower_ctx *c, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return mc_node_error(c->node, "%s", msg);
}

void mc_lower_loops(mc_kb *kb, const mc_shape *s, mc_kexpr **coords, unsigned flags)
{
	for (int d = 0; d < s->rank; d++)
		coords[d] = mc_kb_fori(kb, s->dims[d], flags);
}

mc_kexpr *mc_lower_linear(mc_kb *kb, const mc_shape *s, mc_kexpr *const *coords)
{
	mc_kexpr *lin = mc_k_index(kb, 0);
	for (int d = 0; d < s->rank; d++)
		lin = mc_k_add(kb, mc_k_muli(kb, lin, s->dims[d]), coords[d]);
	return lin;
}

mc_kexpr *mc_lower_bcast(mc_kb *kb, const mc_shape *in, const mc_shape *out,
                         mc_kexpr *const *coords)
{
	mc_kexpr *lin = mc_k_index(kb, 0);
	int off = out->rank - in->rank;
	for (int d = 0; d < in->rank; d++) {
		mc_kexpr *x = in->dims[d] == 1 ? mc_k_index(kb, 0) : coords[d + off];
		lin = mc_k_add(kb, mc_k_muli(kb, lin, in->dims[d]), x);
	}
	return lin;
}

mc_kexpr *mc_lower_load(mc_lower_ctx *c, int i, mc_kexpr *index)
{
	if (c->gather && c->gather[i] >= 0)
		mc_error("internal: %s '%s' reads input %d, a gather's output, by a linear index",
		         c->node->op_type, c->node->name, i);
	return mc_k_load(c->kb, c->in_buf[i], index);
}

/* Coordinate o of a gather's output along axis d as its input's: the map
 * as o itself, o / k, or a table (a packed int32 weight). */
static mc_kexpr *gather_axis(mc_lower_ctx *c, const int64_t *map, int64_t len, mc_kexpr *o)
{
	mc_kb *kb = c->kb;
	bool same = true;
	for (int64_t i = 0; i < len && same; i++)
		same = map[i] == i;
	if (same)
		return o;
	/* an upsampling by a whole factor k: k zeros first */
	int64_t k = 1;
	while (k < len && map[k] == 0)
		k++;
	bool ratio = map[0] == 0;
	for (int64_t i = 0; i < len && ratio; i++)
		ratio = map[i] == i / k;
	if (ratio)
		return mc_k_div(kb, o, mc_k_index(kb, k));
	mc_shape s = { .rank = 1, .dims = { len } };
	mc_tensor *t = mc_tensor_new(MC_INT32, &s);
	for (int64_t i = 0; i < len; i++)
		mc_set_i(t, (size_t)i, map[i]);
	int tb = mc_kb_packed(kb, t);
	return mc_k_cast(kb, MC_KT_INDEX, mc_k_load(kb, tb, o));
}

/* Index into input i's buffer (the gather's input) of the element output
 * element coords reads through the gather. */
static mc_kexpr *gathered_index(mc_lower_ctx *c, int i, const mc_shape *os, mc_kexpr *const *coords)
{
	mc_kb *kb = c->kb;
	const mc_graph *g = c->g;
	const mc_node *p = &g->nodes[c->gather[i]];
	const mc_shape *vs = &c->in[i]->shape, *xs = &g->values[p->inputs[0]].shape;
	int si, zi;
	mc_resize_inputs(p, p->n_inputs, &si, &zi);
	const mc_tensor *scales = si >= 0 && p->inputs[si] >= 0 ? g->values[p->inputs[si]].konst : NULL;
	const mc_tensor *sizes = zi >= 0 && p->inputs[zi] >= 0 ? g->values[p->inputs[zi]].konst : NULL;
	int64_t *map[MC_MAX_RANK];
	mc_shape out;
	if (mc_resize_nearest_map(p, xs, scales, sizes, map, &out)) {
		mc_error("internal: gather '%s' is no nearest Resize", p->name);
		return mc_k_index(kb, 0);
	}
	mc_kexpr *src[MC_MAX_RANK];
	int off = os->rank - vs->rank;
	for (int d = 0; d < vs->rank; d++) {
		mc_kexpr *o = vs->dims[d] == 1 ? mc_k_index(kb, 0) : coords[d + off];
		src[d] = gather_axis(c, map[d], vs->dims[d], o);
		free(map[d]);
	}
	return mc_lower_linear(kb, xs, src);
}

mc_kexpr *mc_lower_load_at(mc_lower_ctx *c, int i, const mc_shape *os, mc_kexpr *const *coords)
{
	if (c->gather && c->gather[i] >= 0)
		return mc_k_load(c->kb, c->in_buf[i], gathered_index(c, i, os, coords));
	const mc_shape *vs = &c->in[i]->shape;
	mc_kexpr *index = mc_shape_eq(vs, os) ? mc_lower_linear(c->kb, os, coords)
	                                      : mc_lower_bcast(c->kb, vs, os, coords);
	return mc_k_load(c->kb, c->in_buf[i], index);
}

const mc_tensor *mc_lower_const(const mc_lower_ctx *c, int i)
{
	return i < c->n_in && c->in[i] ? c->in[i]->konst : NULL;
}

void mc_lower_coords(mc_kb *kb, const mc_shape *s, mc_kexpr *lin, mc_kexpr **coords)
{
	mc_kexpr *rest = mc_kb_let(kb, lin);
	for (int d = s->rank - 1; d >= 0; d--) {
		if (d == 0) {
			coords[d] = rest;
			break;
		}
		coords[d] = mc_kb_let(kb, mc_k_bin(kb, MC_KB_REM, rest, mc_k_index(kb, s->dims[d])));
		rest = mc_kb_let(kb, mc_k_div(kb, rest, mc_k_index(kb, s->dims[d])));
	}
}

/* Index of value v (shaped `vs`) at an element of `out` given by lin and,
 * where broadcasting needs them, coords (made from lin on first need). */
static mc_kexpr *operand_index(mc_kb *kb, const mc_shape *vs, const mc_shape *out,
                               mc_kexpr **coords, bool *have_coords, mc_kexpr *lin)
{
	size_t n = mc_numel(vs);
	if (n == mc_numel(out))
		return lin;
	if (n == 1)
		return mc_k_index(kb, 0);
	if (!*have_coords) {
		mc_lower_coords(kb, out, lin, coords);
		*have_coords = true;
	}
	return mc_lower_bcast(kb, vs, out, coords);
}

/* A context for one node of the group, its buffers registered. */
static void node_ctx(mc_lower_ctx *base, const mc_node *n, int skip_in, mc_lower_ctx *c)
{
	mc_kb *kb = base->kb;
	const mc_graph *g = base->g;
	*c = (mc_lower_ctx){ .kb = kb, .g = g, .node = n, .group = base->group,
	                     .n_in = n->n_inputs, .n_out = n->n_outputs };
	c->in = mc_kpool_alloc(kb->pool, sizeof *c->in * (size_t)(n->n_inputs + 1));
	c->in_buf = mc_kpool_alloc(kb->pool, sizeof *c->in_buf * (size_t)(n->n_inputs + 1));
	c->out = mc_kpool_alloc(kb->pool, sizeof *c->out * (size_t)(n->n_outputs + 1));
	c->out_buf = mc_kpool_alloc(kb->pool, sizeof *c->out_buf * (size_t)(n->n_outputs + 1));
	const mc_group *gr = base->group;
	if (gr && gr->n_gather)
		c->gather = mc_kpool_alloc(kb->pool, sizeof *c->gather * (size_t)(n->n_inputs + 1));
	for (int i = 0; i < n->n_inputs; i++) {
		int v = n->inputs[i];
		c->in[i] = v >= 0 ? &g->values[v] : NULL;
		if (c->gather) {
			c->gather[i] = -1;
			for (int j = 0; j < gr->n_gather && v >= 0; j++) {
				const mc_node *gn = &g->nodes[gr->gather[j]];
				for (int o = 0; o < gn->n_outputs; o++)
					if (gn->outputs[o] == v) {
						c->gather[i] = gr->gather[j];
						v = gn->inputs[0]; /* read instead */
						break;
					}
			}
		}
		/* the chained value of an epilogue is never stored: no buffer */
		c->in_buf[i] = v >= 0 && i != skip_in
		               ? mc_kb_buf(kb, v, g->values[v].dtype, mc_numel(&g->values[v].shape), false) : -1;
	}
	for (int i = 0; i < n->n_outputs; i++) {
		int v = n->outputs[i];
		c->out[i] = v >= 0 ? &g->values[v] : NULL;
		c->out_buf[i] = -1;
	}
}

static int lane_stride(const mc_shape *vs, const mc_shape *os);

/* value as the next op reads a value of dtype dt: converted for scalars;
 * vectors stay (f32, or i32 holding 8-bit values: the store narrows). */
static mc_kexpr *storage_cast(mc_kb *kb, mc_dtype dt, mc_kexpr *value)
{
	return mc_k_lanes(value) > 1 ? value : mc_k_cast(kb, mc_ktype_of(dt), value);
}

/* The group's epilogue applied to the anchor's value of the output element
 * at lin (coords: made from lin on first need). A vector value (the caller
 * checked that every epilogue op and operand allows it) loads operands
 * contiguous along the last dim as vectors, the others as scalars to splat. */
static mc_kexpr *apply_epilogue(mc_lower_ctx *c, mc_kexpr *value, mc_kexpr **coords,
                                bool *have_coords, mc_kexpr *lin)
{
	mc_kb *kb = c->kb;
	const mc_group *gr = c->group;
	const mc_shape *os = &c->out[0]->shape;
	int lanes = mc_k_lanes(value);
	value = mc_kb_let(kb, storage_cast(kb, c->out[0]->dtype, value));
	for (int e = 0; e < gr->n_epi; e++) {
		const mc_node *en = &c->g->nodes[gr->epi[e]];
		mc_lower_ctx ec;
		node_ctx(c, en, gr->epi_chain_in[e], &ec);
		const mc_lowering *l = mc_lowering_find(en->id);
		mc_kexpr **args = mc_kpool_alloc(kb->pool, sizeof *args * (size_t)(en->n_inputs + 1));
		for (int i = 0; i < en->n_inputs; i++) {
			if (!ec.in[i])
				continue;
			if (i == gr->epi_chain_in[e]) {
				args[i] = value;
				continue;
			}
			const mc_shape *vs = &ec.in[i]->shape;
			if (ec.gather && ec.gather[i] >= 0) {
				/* scalar: the caller asked for no vectors (epilogue_vectorises) */
				if (!*have_coords) {
					mc_lower_coords(kb, os, lin, coords);
					*have_coords = true;
				}
				args[i] = mc_lower_load_at(&ec, i, os, coords);
				continue;
			}
			mc_kexpr *idx = operand_index(kb, vs, os, coords, have_coords, lin);
			bool contiguous = mc_numel(vs) == mc_numel(os) || lane_stride(vs, os) == 1;
			args[i] = lanes > 1 && contiguous ? mc_k_vload(kb, ec.in_buf[i], idx, lanes)
			                                  : mc_k_load(kb, ec.in_buf[i], idx);
		}
		value = l->pointwise(&ec, args);
		value = mc_kb_let(kb, storage_cast(kb, ec.out[0]->dtype, value));
	}
	return value;
}

static bool has_epilogue(const mc_lower_ctx *c, int k)
{
	const mc_group *gr = c->group;
	return k == 0 && gr && gr->n_epi > 0 && c->node == &c->g->nodes[gr->anchor];
}

/* Output k's element lin (a vector's first lane) gets value: in its
 * buffer, or in the lowering's ring of output rows. */
static void store_out(mc_lower_ctx *c, int k, mc_kexpr *lin, mc_kexpr *value)
{
	if (k == 0 && c->ring_elems > 0)
		mc_kb_store(c->kb, c->ring_buf, mc_k_bin(c->kb, MC_KB_REM, lin, mc_k_index(c->kb, c->ring_elems)),
		            value);
	else
		mc_kb_store(c->kb, c->out_buf[k], lin, value);
}

void mc_lower_store(mc_lower_ctx *c, int k, mc_kexpr *const *coords_in, mc_kexpr *lin,
                    mc_kexpr *value)
{
	mc_kb *kb = c->kb;
	const mc_shape *os = &c->out[k]->shape;
	mc_kexpr *coords[MC_MAX_RANK];
	bool have_coords = coords_in != NULL;
	if (coords_in)
		memcpy(coords, coords_in, sizeof(mc_kexpr *) * (size_t)os->rank);
	if (!lin)
		lin = mc_lower_linear(kb, os, coords);
	lin = mc_kb_let(kb, lin);
	if (has_epilogue(c, k))
		value = apply_epilogue(c, value, coords, &have_coords, lin);
	store_out(c, k, lin, value);
}

/* Epilogue ops whose pointwise form the vector IR can build lane-wise. */
static bool has_vector_form(const mc_graph *g, const mc_node *n)
{
	return n->opset >= 7 /* legacy broadcasting */ &&
	       (mc_op_has(n->id, MC_OF_VEC) || mc_lower_pow_small_exponent(g, n));
}

/* How an epilogue operand shaped vs varies along the output's last dim:
 * 1 contiguous (a vector load), 0 constant (a scalar splat), -1 neither. */
static int lane_stride(const mc_shape *vs, const mc_shape *os)
{
	if (mc_numel(vs) == 1 || vs->rank == 0 || vs->dims[vs->rank - 1] == 1)
		return 0;
	if (os->rank >= 1 && vs->dims[vs->rank - 1] == os->dims[os->rank - 1])
		return 1;
	return -1;
}

/* have_coords: the store knows the first lane's coordinates, so operands
 * broadcast along other dims can be indexed; else only full-size and
 * single-element operands can. */
static bool is_8bit(mc_dtype dt)
{
	return dt == MC_INT8 || dt == MC_UINT8;
}

/* float32 epilogues on f32 vectors; 8-bit integer ones (QiAdd ...) on i32
 * vectors, where their pointwise forms have one */
static bool epilogue_vectorises(const mc_lower_ctx *c, bool have_coords)
{
	const mc_group *gr = c->group;
	const mc_shape *os = &c->out[0]->shape;
	bool ints = is_8bit(c->out[0]->dtype);
	if ((c->out[0]->dtype != MC_FLOAT && !ints) || gr->n_gather)
		return false;
	for (int e = 0; e < gr->n_epi; e++) {
		const mc_node *en = &c->g->nodes[gr->epi[e]];
		if (ints ? !mc_lower_has_ivec_form(en) : !has_vector_form(c->g, en))
			return false;
		for (int i = 0; i < en->n_inputs; i++) {
			int v = en->inputs[i];
			if (v < 0)
				continue;
			const mc_value *val = &c->g->values[v];
			if (ints ? !is_8bit(val->dtype) : val->dtype != MC_FLOAT)
				return false;
			if (i == gr->epi_chain_in[e])
				continue;
			size_t m = mc_numel(&val->shape);
			if (m != mc_numel(os) && m != 1 && (!have_coords || lane_stride(&val->shape, os) < 0))
				return false;
		}
		for (int i = 0; i < en->n_outputs; i++)
			if (en->outputs[i] >= 0 &&
			    (ints ? !is_8bit(c->g->values[en->outputs[i]].dtype)
			          : c->g->values[en->outputs[i]].dtype != MC_FLOAT))
				return false;
	}
	return true;
}

int mc_lower_vec_parts(int64_t n, int lanes)
{
	return n / lanes * lanes < n ? 2 : 1;
}

mc_kexpr *mc_lower_vec_part_open(mc_kb *kb, int part, int64_t n, int lanes, unsigned flags)
{
	int64_t full = n / lanes;
	mc_kexpr *i = part ? mc_kb_for(kb, mc_k_index(kb, full * lanes), mc_k_index(kb, n), 0)
	                   : mc_k_muli(kb, mc_kb_fori(kb, full, flags), lanes);
	return mc_kb_let(kb, i);
}

void mc_lower_store_vec(mc_lower_ctx *c, int k, mc_kexpr *const *coords_in, mc_kexpr *lin,
                        mc_kexpr *value)
{
	mc_kb *kb = c->kb;
	int lanes = mc_k_lanes(value);
	const mc_shape *os = &c->out[k]->shape;
	bool epilogue = has_epilogue(c, k);
	mc_kexpr *coords[MC_MAX_RANK];
	if (coords_in)
		memcpy(coords, coords_in, sizeof(mc_kexpr *) * (size_t)os->rank);
	if (lanes == 1 || (epilogue && !epilogue_vectorises(c, coords_in != NULL))) {
		/* lane by lane through the scalar path */
		if (!coords_in) {
			lin = mc_kb_let(kb, lin);
			for (int j = 0; j < lanes; j++)
				mc_lower_store(c, k, NULL, mc_k_addi(kb, lin, j), mc_k_lane(kb, value, j));
			return;
		}
		value = mc_kb_let(kb, value);
		mc_kexpr *last = coords[os->rank - 1];
		for (int j = 0; j < lanes; j++) {
			coords[os->rank - 1] = mc_k_addi(kb, last, j);
			mc_lower_store(c, k, coords, NULL, mc_k_lane(kb, value, j));
		}
		return;
	}
	if (!lin)
		lin = mc_lower_linear(kb, os, coords);
	lin = mc_kb_let(kb, lin);
	bool have_coords = coords_in != NULL;
	if (epilogue)
		value = apply_epilogue(c, value, coords, &have_coords, lin);
	store_out(c, k, lin, value);
}

/* Lanes of the flat pointwise loop: the ISA's widest when the op and its
 * fused epilogue have vector forms on float32; else 1. */
static int flat_lanes(const mc_lower_ctx *c, size_t n)
{
	int lanes = mc_isa_lanes_upto(c->kb->isa, (int64_t)n);
	bool ints = is_8bit(c->out[0]->dtype) && mc_lower_has_ivec_form(c->node);
	if (lanes == 1 || (!ints && (!has_vector_form(c->g, c->node) || c->out[0]->dtype != MC_FLOAT)))
		return 1;
	for (int i = 0; i < c->n_in; i++)
		if (c->in[i] && (ints ? !is_8bit(c->in[i]->dtype) : c->in[i]->dtype != MC_FLOAT))
			return 1;
	if (c->group && c->group->n_epi && !epilogue_vectorises(c, false))
		return 1;
	return lanes;
}

/* The elementwise kernel of a pointwise anchor: one flat loop when every
 * operand is full-size or a scalar, else one loop per output dim. */
int mc_lower_pointwise_kernel(mc_lower_ctx *c, const mc_lowering *l)
{
	mc_kb *kb = c->kb;
	const mc_shape *os = &c->out[0]->shape;
	size_t n = mc_numel(os);
	bool flat = true;
	for (int i = 0; i < c->n_in; i++)
		if (c->in[i] && mc_numel(&c->in[i]->shape) != n && mc_numel(&c->in[i]->shape) != 1)
			flat = false;
	const mc_group *gr = c->group;
	if (gr && gr->n_gather)
		flat = false; /* gathers index by coordinates */
	for (int e = 0; gr && e < gr->n_epi; e++) {
		const mc_node *en = &c->g->nodes[gr->epi[e]];
		for (int i = 0; i < en->n_inputs; i++) {
			int v = en->inputs[i];
			size_t m = v >= 0 ? mc_numel(&c->g->values[v].shape) : 1;
			if (m != n && m != 1)
				flat = false;
		}
	}
	mc_kexpr *coords[MC_MAX_RANK], *lin;
	mc_kexpr **args = mc_kpool_alloc(kb->pool, sizeof *args * (size_t)(c->n_in + 1));
	if (flat) {
		/* vectors over the flat index, then a scalar tail */
		int lanes = flat_lanes(c, n);
		int64_t body = (int64_t)n / lanes;
		if (lanes > 1 && body > 0) {
			mc_kexpr *v = mc_kb_fori(kb, body, MC_KF_PARALLEL);
			mc_kexpr *base = mc_kb_let(kb, mc_k_muli(kb, v, lanes));
			for (int i = 0; i < c->n_in; i++)
				if (c->in[i])
					args[i] = mc_numel(&c->in[i]->shape) == n ? mc_k_vload(kb, c->in_buf[i], base, lanes)
					                                          : mc_lower_load(c, i, mc_k_index(kb, 0));
			mc_kexpr *value = l->pointwise(c, args);
			if (mc_k_lanes(value) == 1)
				value = mc_k_splat(kb, value, lanes);
			mc_lower_store_vec(c, 0, NULL, base, value);
			mc_kb_end(kb);
			if (body * lanes == (int64_t)n)
				return 0;
		} else {
			body = 0;
		}
		lin = mc_kb_for(kb, mc_k_index(kb, body * lanes), mc_k_index(kb, (int64_t)n),
		                MC_KF_PARALLEL | MC_KF_VECTOR);
		for (int i = 0; i < c->n_in; i++)
			if (c->in[i])
				args[i] = mc_lower_load(c, i, mc_numel(&c->in[i]->shape) == n ? lin : mc_k_index(kb, 0));
		mc_lower_store(c, 0, NULL, lin, l->pointwise(c, args));
		mc_kb_end(kb);
		return 0;
	}
	mc_lower_loops(kb, os, coords, MC_KF_PARALLEL);
	lin = mc_kb_let(kb, mc_lower_linear(kb, os, coords));
	for (int i = 0; i < c->n_in; i++)
		if (c->in[i])
			args[i] = c->gather && c->gather[i] >= 0 ? mc_lower_load_at(c, i, os, coords)
			          : mc_lower_load(c, i, mc_numel(&c->in[i]->shape) == n
			                                    ? lin : mc_lower_bcast(kb, &c->in[i]->shape, os, coords));
	mc_lower_store(c, 0, coords, lin, l->pointwise(c, args));
	mc_kb_end_n(kb, os->rank);
	return 0;
}

/* Output 0 is a copy of input 0's elements (aliases that could not share
 * storage: a graph output, say). */
int mc_lower_copy(mc_lower_ctx *c)
{
	mc_kb *kb = c->kb;
	mc_kexpr *i = mc_kb_fori(kb, (int64_t)mc_numel(&c->out[0]->shape), MC_KF_PARALLEL | MC_KF_VECTOR);
	mc_lower_store(c, 0, NULL, i, mc_lower_load(c, 0, i));
	mc_kb_end(kb);
	return 0;
}

/* Lowers one group into kernel k: the anchor's own lowering, or the
 * elementwise kernel for a pointwise anchor. */
int mc_lower_group(const mc_graph *g, const mc_group *gr, mc_kb *kb, const mc_lowering *l)
{
	const mc_node *n = &g->nodes[gr->anchor];
	mc_lower_ctx base = { .kb = kb, .g = g, .group = gr }, c;
	node_ctx(&base, n, -1, &c);
	for (int k = 0; k < n->n_outputs; k++) {
		int v = n->outputs[k];
		if (v < 0)
			continue;
		if (k == 0 && gr->n_epi > 0)
			v = g->nodes[gr->epi[gr->n_epi - 1]].outputs[0];
		c.out_buf[k] = mc_kb_buf(kb, v, g->values[v].dtype, mc_numel(&g->values[v].shape), true);
	}
	return l->lower ? l->lower(&c) : mc_lower_pointwise_kernel(&c, l);
}

/* Round half to even of v / 2^shift, as mc_qi_rshift: a constant shift
 * folds its rounding constant. */
static mc_kexpr *rshift_rne(mc_kb *kb, mc_kexpr *v, mc_kexpr *shift)
{
	int64_t sc;
	mc_kexpr *one = mc_k_int(kb, MC_KT_I64, 1);
	mc_kexpr *half = mc_k_is_const(shift, &sc)
		? mc_k_int(kb, MC_KT_I64, ((int64_t)1 << (sc - 1)) - 1)
		: mc_k_sub(kb, mc_k_bin(kb, MC_KB_SHL, one, mc_k_sub(kb, shift, one)), one);
	mc_kexpr *odd = mc_k_bin(kb, MC_KB_AND, mc_k_bin(kb, MC_KB_SHR, v, shift), one);
	return mc_k_bin(kb, MC_KB_SHR, mc_k_add(kb, mc_k_add(kb, v, half), odd), shift);
}

/* x >> c (arithmetic) for a constant c; x itself for 0 (NEON's vector
 * shifts start at 1). */
static mc_kexpr *shr_const(mc_kb *kb, mc_kexpr *x, int64_t c)
{
	return c ? mc_k_bin(kb, MC_KB_SHR, x, mc_k_int(kb, MC_KT_I32, c)) : x;
}

bool mc_requant_terms_fit(int n, const int64_t *mult, int64_t shift)
{
	if (n < 1 || n > 2 || shift < 16 || shift > 46)
		return false;
	for (int i = 0; i < n; i++)
		if (mult[i] <= -((int64_t)1 << 31) || mult[i] >= ((int64_t)1 << 31))
			return false;
	return true;
}

mc_kexpr *mc_lower_requant_terms(mc_kb *kb, int n, mc_kexpr *const *x, const int64_t *mult, int64_t shift,
                                 int64_t y_zp, int64_t lo, int64_t hi)
{
	if (!mc_requant_terms_fit(n, mult, shift))
		return NULL;
	/* v = sum x m = H 2^16 + L with 0 <= L < 2^16: each m = mh 2^16 + ml
	 * (ml its low 16 bits, mh the rest, signed), hi = sum x mh and lo =
	 * sum x ml in i32 (|x| <= 255: below 2^24 and 2^25), H = hi + (lo >> 16),
	 * L = lo & 0xffff */
	mc_kexpr *hs = NULL, *ls = NULL;
	for (int i = 0; i < n; i++) {
		int64_t mh = mult[i] >> 16, ml = mult[i] & 0xffff;
		mc_kexpr *xi = mc_kb_let(kb, x[i]);
		mc_kexpr *th = mc_k_mul(kb, xi, mc_k_int(kb, MC_KT_I32, mh));
		mc_kexpr *tl = mc_k_mul(kb, xi, mc_k_int(kb, MC_KT_I32, ml));
		hs = hs ? mc_k_add(kb, hs, th) : th;
		ls = ls ? mc_k_add(kb, ls, tl) : tl;
	}
	ls = mc_kb_let(kb, ls);
	mc_kexpr *h = mc_kb_let(kb, mc_k_add(kb, hs, shr_const(kb, ls, 16)));
	mc_kexpr *l = mc_k_bin(kb, MC_KB_AND, ls, mc_k_int(kb, MC_KT_I32, 0xffff));
	/* mc_qi_rshift: (v + 2^(s-1) - 1 + odd) >> s, odd = bit s of v = bit
	 * t of H (t = s - 16); the constant 2^(s-1) - 1 = ch 2^16 + cl, the low
	 * parts summed first and their carry taken into H */
	int64_t t = shift - 16, half = ((int64_t)1 << (shift - 1)) - 1;
	mc_kexpr *odd = mc_k_bin(kb, MC_KB_AND, shr_const(kb, h, t), mc_k_int(kb, MC_KT_I32, 1));
	mc_kexpr *low = mc_k_add(kb, mc_k_add(kb, l, mc_k_int(kb, MC_KT_I32, half & 0xffff)), odd);
	mc_kexpr *top = mc_k_add(kb, mc_k_add(kb, h, mc_k_int(kb, MC_KT_I32, half >> 16)), shr_const(kb, low, 16));
	mc_kexpr *r = mc_k_add(kb, shr_const(kb, top, t), mc_k_int(kb, MC_KT_I32, y_zp));
	r = mc_k_bin(kb, MC_KB_MAX, r, mc_k_int(kb, MC_KT_I32, lo));
	return mc_k_bin(kb, MC_KB_MIN, r, mc_k_int(kb, MC_KT_I32, hi));
}

mc_kexpr *mc_lower_requant(mc_kb *kb, mc_kexpr *acc, mc_kexpr *mult, mc_kexpr *shift,
                           int64_t y_zp, int64_t lo, int64_t hi)
{
	return mc_lower_requant_bounded(kb, acc, mult, shift, y_zp, lo, hi, 0);
}

mc_kexpr *mc_lower_requant_bounded(mc_kb *kb, mc_kexpr *acc, mc_kexpr *mult, mc_kexpr *shift,
                                   int64_t y_zp, int64_t lo, int64_t hi, int64_t vmax)
{
	mc_kexpr *v = mc_k_cast(kb, MC_KT_I64, acc);
	if (mult)
		v = mc_k_mul(kb, v, mc_k_cast(kb, MC_KT_I64, mult));
	v = mc_kb_let(kb, v);
	mc_kexpr *r = rshift_rne(kb, v, mc_k_cast(kb, MC_KT_I64, shift));
	int64_t sc;
	if (vmax > 0 && mc_k_is_const(shift, &sc) && sc >= 1 && sc < 63 &&
	    (vmax >> sc) + 1 + (y_zp < 0 ? -y_zp : y_zp) < ((int64_t)1 << 31)) {
		/* the rounded value and y_zp fit in 32 bits: the rest in i32 (a
		 * 32-bit core's one-instruction clamp instead of 64-bit compares) */
		r = mc_k_add(kb, mc_k_cast(kb, MC_KT_I32, r), mc_k_int(kb, MC_KT_I32, y_zp));
		r = mc_k_bin(kb, MC_KB_MAX, r, mc_k_int(kb, MC_KT_I32, lo));
		return mc_k_bin(kb, MC_KB_MIN, r, mc_k_int(kb, MC_KT_I32, hi));
	}
	r = mc_k_add(kb, r, mc_k_int(kb, MC_KT_I64, y_zp));
	r = mc_k_bin(kb, MC_KB_MAX, r, mc_k_int(kb, MC_KT_I64, lo));
	r = mc_k_bin(kb, MC_KB_MIN, r, mc_k_int(kb, MC_KT_I64, hi));
	return mc_k_cast(kb, MC_KT_I32, r);
}
