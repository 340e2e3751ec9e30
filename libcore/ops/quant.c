/* Quantization ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
 * QLinearMatMul, QLinearConv (MatMulInteger and ConvInteger live in nn.c).
 *
 * QuantizeLinear / DequantizeLinear handle the integer types from int2 to
 * int16 and the float8 and float4e2m1 types (float8e8m0 is a scale type,
 * never a quantized one). Integer products accumulate in int64,
 * requantisation is done in double with the rounding steps of the ONNX
 * reference (round half to even, then saturate). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "quant.h"

/* ---- element types ---- */

/* The saturation range of a quantized integer type; false if t is not one. */
bool mc_quant_range(mc_dtype t, int64_t *lo, int64_t *hi)
{
	*lo = *hi = 0;
	switch (t) {
	case MC_UINT8: *lo = 0, *hi = 255; return true;
	case MC_INT8: *lo = -128, *hi = 127; return true;
	case MC_UINT16: *lo = 0, *hi = 65535; return true;
	case MC_INT16: *lo = -32768, *hi = 32767; return true;
	case MC_UINT4: *lo = 0, *hi = 15; return true;
	case MC_INT4: *lo = -8, *hi = 7; return true;
	case MC_UINT2: *lo = 0, *hi = 3; return true;
	case MC_INT2: *lo = -2, *hi = 1; return true;
	default: return false;
	}
}

/* The float types QuantizeLinear can produce, stored as their bit code:
 * float8e8m0 has no sign and no zero, it is a scale type only. */
static bool is_quant_float(mc_dtype t)
{
	return mc_dtype_is_small_float(t) && t != MC_FLOAT8E8M0;
}

static bool is_quant_type(mc_dtype t)
{
	int64_t lo, hi;
	return mc_quant_range(t, &lo, &hi) || is_quant_float(t);
}

/* The first opset whose QuantizeLinear / DequantizeLinear knows type t. */
static int quant_type_opset(mc_dtype t)
{
	switch (t) {
	case MC_FLOAT8E4M3FN: case MC_FLOAT8E4M3FNUZ: case MC_FLOAT8E5M2: case MC_FLOAT8E5M2FNUZ:
		return 19;
	case MC_INT16: case MC_UINT16: case MC_INT4: case MC_UINT4:
		return 21;
	case MC_FLOAT4E2M1:
		return 23;
	case MC_INT2: case MC_UINT2:
		return 25;
	default:
		return 10;
	}
}

/* float32/16/64 and bfloat16: the types of scales and dequantized values. */
static bool is_wide_float(mc_dtype t)
{
	return mc_dtype_is_float(t) && !mc_dtype_is_small_float(t);
}

static bool is_8bit(mc_dtype t)
{
	return t == MC_UINT8 || t == MC_INT8;
}

/* Rounds a value to what a binary operation at precision p would give. */
static double round_to(mc_dtype p, double v)
{
	switch (p) {
	case MC_FLOAT: return (float)v;
	case MC_FLOAT16: return mc_half_to_float(mc_float_to_half((float)v));
	case MC_BFLOAT16: return mc_bf16_to_float(mc_float_to_bf16((float)v));
	default: return v;
	}
}

/* a / b as computed at precision p: float16 and bfloat16 arithmetic goes
 * through float32, as numpy does. */
static double div_at(mc_dtype p, double a, double b)
{
	if (p == MC_DOUBLE)
		return a / b;
	return round_to(p, (float)a / (float)b);
}

/* numpy's result type of arithmetic between two float (or int32) types. */
mc_dtype mc_quant_promote(mc_dtype a, mc_dtype b)
{
	if (a == b)
		return a;
	if (a == MC_DOUBLE || b == MC_DOUBLE || !mc_dtype_is_float(a) || !mc_dtype_is_float(b))
		return MC_DOUBLE;
	return MC_FLOAT;
}

/* Round half to even, then clamp to [lo, hi]; NaN goes to `nan_to`. */
static int64_t saturate_round(double v, int64_t lo, int64_t hi, int64_t nan_to)
{
	if (isnan(v))
		return nan_to;
	double r = nearbyint(v);
	if (r <= (double)lo)
		return lo;
	if (r >= (double)hi)
		return hi;
	return (int64_t)r;
}

/* ---- QuantizeLinear / DequantizeLinear ---- */

static int check_type_attr(mc_node *n, const char *name, int64_t t, bool want_float)
{
	mc_dtype d = (mc_dtype)t;
	bool ok = t > 0 && t < 64 && mc_dtype_supported(d) &&
	          (want_float ? is_wide_float(d) : is_quant_type(d));
	if (!ok)
		return mc_node_error(n, "%s %lld is not a %s type", name, (long long)t,
		                     want_float ? "float32, float16, bfloat16 or double"
		                                : "quantized");
	return 0;
}

/* Whether the node's opset knows t as a quantized type (checked in infer,
 * where the type is known even when it comes from the zero point). */
static int check_quant_opset(const mc_node *n, mc_dtype t)
{
	if (n->opset < quant_type_opset(t))
		return mc_node_error(n, "%s quantization needs opset %d or newer", mc_dtype_name(t),
		                     quant_type_opset(t));
	return 0;
}

static int qdq_parse(mc_node *n, bool quantize)
{
	qdq_params p = {.quantize = quantize, .axis = 1, .saturate = true};
	int64_t saturate = 1;
	if (n->opset >= 13 && mc_attr_int(n, "axis", 1, &p.axis))
		return -1;
	if (n->opset >= 21 && mc_attr_int(n, "block_size", 0, &p.block_size))
		return -1;
	if (p.block_size < 0)
		return mc_node_error(n, "block_size %lld is negative", (long long)p.block_size);
	/* saturate only matters for float8 outputs; float4e2m1 always saturates */
	if (quantize && n->opset >= 19 && mc_attr_int(n, "saturate", 1, &saturate))
		return -1;
	if (saturate != 0 && saturate != 1)
		return mc_node_error(n, "saturate %lld is not 0 or 1", (long long)saturate);
	p.saturate = saturate == 1;
	if (n->opset >= (quantize ? 21 : 23)) {
		if (mc_attr_int(n, "output_dtype", 0, &p.output_dtype))
			return -1;
		if (p.output_dtype && check_type_attr(n, "output_dtype", p.output_dtype, !quantize))
			return -1;
	}
	if (quantize && n->opset >= 23) {
		if (mc_attr_int(n, "precision", 0, &p.precision))
			return -1;
		if (p.precision && check_type_attr(n, "precision", p.precision, true))
			return -1;
	}
	n->params = mc_xmalloc(sizeof p);
	memcpy(n->params, &p, sizeof p);
	return 0;
}

static int quantize_parse(mc_node *n)
{
	return qdq_parse(n, true);
}

static int dequantize_parse(mc_node *n)
{
	return qdq_parse(n, false);
}

/* A scalar or a 1-D tensor of one value. The spec asks for the scale and
 * the zero point to have one shape, yet its own tests pair a scalar scale
 * with a [1] zero point: both mean one value for the whole tensor. */
static bool is_single(const mc_shape *s)
{
	return s->rank == 0 || (s->rank == 1 && s->dims[0] == 1);
}

/* Decides per-tensor / per-axis / blocked from the scale's shape and checks
 * the zero point against it. */
int mc_qlayout_infer(const mc_node *n, const qdq_params *p, const mc_shape *x,
                     const mc_value *scale, const mc_value *zp, qlayout *l)
{
	char a[256], b[256];
	const mc_shape *s = &scale->shape;
	memset(l, 0, sizeof *l);
	if (zp && !mc_shape_eq(&zp->shape, s) && !(is_single(s) && is_single(&zp->shape)))
		return mc_node_error(n, "zero point shape %s differs from scale shape %s",
		                     mc_shape_str(&zp->shape, a, sizeof a),
		                     mc_shape_str(s, b, sizeof b));
	if (s->rank == 0 || (p->block_size == 0 && s->rank == 1 && s->dims[0] == 1))
		return 0;
	if (x->rank == 0 || mc_norm_axis(n, p->axis, x->rank, &l->axis))
		return x->rank == 0 ? mc_node_error(n, "a scalar input needs a scalar scale") : -1;
	if (p->block_size == 0) {
		if (s->rank != 1 || s->dims[0] != x->dims[l->axis])
			return mc_node_error(n, "scale shape %s fits neither per-tensor nor per-axis "
			                     "quantization of %s along axis %d",
			                     mc_shape_str(s, a, sizeof a), mc_shape_str(x, b, sizeof b),
			                     l->axis);
		if (n->opset < 13)
			return mc_node_error(n, "per-axis scales need opset 13 or newer");
		l->mode = QL_AXIS;
		return 0;
	}
	bool ok = s->rank == x->rank;
	for (int d = 0; ok && d < x->rank; d++) {
		/* Ceiling division that cannot overflow (block_size up to INT64_MAX). */
		int64_t want = d == l->axis ? x->dims[d] / p->block_size + (x->dims[d] % p->block_size != 0)
		                            : x->dims[d];
		ok = s->dims[d] == want;
	}
	if (!ok)
		return mc_node_error(n, "scale shape %s does not match blocked quantization of %s "
		                     "along axis %d with block_size %lld",
		                     mc_shape_str(s, a, sizeof a), mc_shape_str(x, b, sizeof b),
		                     l->axis, (long long)p->block_size);
	l->mode = QL_BLOCKED;
	l->block = p->block_size;
	return 0;
}

/* Index into scale / zero point for element i of x. */
static size_t qparam_index(const qlayout *l, const mc_shape *x, const mc_shape *s, size_t i)
{
	if (l->mode == QL_TENSOR)
		return 0;
	if (l->mode == QL_AXIS) {
		size_t inner = 1;
		for (int d = l->axis + 1; d < x->rank; d++)
			inner *= (size_t)x->dims[d];
		return (i / inner) % (size_t)x->dims[l->axis];
	}
	size_t idx = 0, stride = 1;
	for (int d = x->rank - 1; d >= 0; d--) {
		size_t c = i % (size_t)x->dims[d];
		i /= (size_t)x->dims[d];
		if (d == l->axis)
			c /= (size_t)l->block;
		idx += c * stride;
		stride *= (size_t)s->dims[d];
	}
	return idx;
}

static bool is_scale_type(mc_dtype t)
{
	return is_wide_float(t) || t == MC_INT32;
}

static int quantize_infer(mc_infer_ctx *c)
{
	if (MC_NEED_INPUTS(c, 0, 1))
		return -1;
	const mc_node *n = c->node;
	const qdq_params *p = n->params;
	const mc_value *x = c->in[0], *scale = c->in[1], *zp = c->n_in > 2 ? c->in[2] : NULL;
	qlayout l;
	if (!is_wide_float(x->dtype) && x->dtype != MC_INT32)
		return mc_node_error(n, "input x has type %s; expected float32, float16, bfloat16, "
		                     "double or int32", mc_dtype_name(x->dtype));
	if (!is_scale_type(scale->dtype))
		return mc_node_error(n, "scale has type %s; expected float32, float16, bfloat16, "
		                     "double or int32", mc_dtype_name(scale->dtype));
	mc_dtype out = p->output_dtype ? (mc_dtype)p->output_dtype : MC_UINT8;
	if (zp) {
		if (p->output_dtype && zp->dtype != out)
			return mc_node_error(n, "output_dtype %s differs from the zero point's type %s",
			                     mc_dtype_name(out), mc_dtype_name(zp->dtype));
		out = zp->dtype;
	}
	if (!is_quant_type(out))
		return mc_node_error(n, "quantizing to %s is not supported (integers of 2 to 16 bits, "
		                     "the float8 types and float4e2m1 are)", mc_dtype_name(out));
	if (check_quant_opset(n, out) || mc_qlayout_infer(n, p, &x->shape, scale, zp, &l))
		return -1;
	mc_set_out(c, 0, out, &x->shape);
	return 0;
}

/* y[i] = saturate(round_half_even(q) + zp) for an integer type. */
static void quantize_to_int(mc_tensor *y, size_t i, double q, int64_t zp)
{
	int64_t lo, hi;
	mc_quant_range(y->dtype, &lo, &hi);
	/* NaN quantizes to the zero point (ONNX leaves it undefined). */
	if (isnan(q))
		q = 0;
	mc_set_i(y, i, saturate_round(nearbyint(q) + (double)zp, lo, hi, zp));
}

/* y[i] = the float8 / float4e2m1 code nearest q + zp: no integer rounding.
 * The reference adds the zero point in float32 (double when the division
 * was), then converts once. Written as a code because mc_set_f always
 * saturates, and `saturate` 0 asks for inf / NaN out of range. */
static void quantize_to_code(mc_tensor *y, size_t i, mc_dtype prec, double q, double zp,
                             bool saturate)
{
	double v = prec == MC_DOUBLE ? q + zp : (double)(float)(q + zp);
	((uint8_t *)y->data)[i] = mc_double_to_small_float(y->dtype, v, saturate);
}

static int quantize_eval(mc_eval_ctx *c)
{
	if (!c->out[0])
		return 0;
	const qdq_params *p = c->node->params;
	const mc_tensor *x = c->in[0], *scale = c->in[1], *zp = c->n_in > 2 ? c->in[2] : NULL;
	mc_tensor *y = c->out[0];
	qlayout l;
	mc_value sv = {.shape = scale->shape}, zv = {.shape = zp ? zp->shape : scale->shape};
	if (mc_qlayout_infer(c->node, p, &x->shape, &sv, zp ? &zv : NULL, &l))
		return -1;
	mc_dtype prec = p->precision ? (mc_dtype)p->precision
	                             : mc_quant_promote(x->dtype, scale->dtype);
	for (size_t i = 0; i < x->numel; i++) {
		size_t k = qparam_index(&l, &x->shape, &scale->shape, i);
		double q = div_at(prec, mc_get_f(x, i), mc_get_f(scale, k));
		if (is_quant_float(y->dtype))
			quantize_to_code(y, i, prec, q, zp ? mc_get_f(zp, k) : 0, p->saturate);
		else
			quantize_to_int(y, i, q, zp ? mc_get_i(zp, k) : 0);
	}
	return 0;
}

static int dequantize_infer(mc_infer_ctx *c)
{
	if (MC_NEED_INPUTS(c, 0, 1))
		return -1;
	const mc_node *n = c->node;
	const qdq_params *p = n->params;
	const mc_value *x = c->in[0], *scale = c->in[1], *zp = c->n_in > 2 ? c->in[2] : NULL;
	qlayout l;
	if (!is_quant_type(x->dtype) && x->dtype != MC_INT32)
		return mc_node_error(n, "dequantizing %s is not supported (int32, integers of 2 to 16 "
		                     "bits, the float8 types and float4e2m1 are)",
		                     mc_dtype_name(x->dtype));
	if (check_quant_opset(n, x->dtype))
		return -1;
	if (zp && zp->dtype != x->dtype)
		return mc_node_error(n, "zero point type %s differs from input type %s",
		                     mc_dtype_name(zp->dtype), mc_dtype_name(x->dtype));
	if (!is_wide_float(scale->dtype))
		return mc_node_error(n, "scale has type %s; expected float32, float16, bfloat16 or "
		                     "double", mc_dtype_name(scale->dtype));
	if (mc_qlayout_infer(n, p, &x->shape, scale, zp, &l))
		return -1;
	mc_dtype out = p->output_dtype ? (mc_dtype)p->output_dtype : scale->dtype;
	mc_set_out(c, 0, out, &x->shape);
	return 0;
}

static int dequantize_eval(mc_eval_ctx *c)
{
	if (!c->out[0])
		return 0;
	const qdq_params *p = c->node->params;
	const mc_tensor *x = c->in[0], *scale = c->in[1], *zp = c->n_in > 2 ? c->in[2] : NULL;
	qlayout l;
	mc_value sv = {.shape = scale->shape}, zv = {.shape = zp ? zp->shape : scale->shape};
	if (mc_qlayout_infer(c->node, p, &x->shape, &sv, zp ? &zv : NULL, &l))
		return -1;
	bool codes = mc_dtype_is_small_float(x->dtype);
	for (size_t i = 0; i < x->numel; i++) {
		size_t k = qparam_index(&l, &x->shape, &scale->shape, i);
		/* (x - zp) is exact in double for every supported x type; float8
		 * and float4e2m1 codes are read as their values, not as integers */
		double centered = codes ? mc_get_f(x, i) - (zp ? mc_get_f(zp, k) : 0)
		                        : (double)(mc_get_i(x, i) - (zp ? mc_get_i(zp, k) : 0));
		mc_set_f(c->out[0], i, centered * mc_get_f(scale, k));
	}
	return 0;
}

/* ---- DynamicQuantizeLinear: uint8 with a scale covering [min(x,0), max(x,0)] ---- */

static int dynq_infer(mc_infer_ctx *c)
{
	if (MC_NEED_INPUTS(c, 0))
		return -1;
	const mc_value *x = c->in[0];
	if (!mc_dtype_is_float(x->dtype))
		return mc_node_error(c->node, "input has type %s; expected a float type",
		                     mc_dtype_name(x->dtype));
	mc_shape scalar = {0};
	mc_set_out(c, 0, MC_UINT8, &x->shape);
	mc_set_out(c, 1, MC_FLOAT, &scalar);
	mc_set_out(c, 2, MC_UINT8, &scalar);
	return 0;
}

/* Follows the ONNX reference step by step in float32, so that ties round
 * the same way. */
static int dynq_eval(mc_eval_ctx *c)
{
	const mc_tensor *x = c->in[0];
	float maxx = 0, minx = 0;
	for (size_t i = 0; i < x->numel; i++) {
		float v = (float)mc_get_f(x, i);
		if (v > maxx)
			maxx = v;
		if (v < minx)
			minx = v;
	}
	/* the range always holds 0: empty only when x is all zeros; scale 1 then */
	float scale = maxx == minx ? 1.0f : (maxx - minx) / 255.0f;
	float zp_f = 0.0f - minx / scale;
	zp_f = zp_f < 0 ? 0 : zp_f > 255 ? 255 : zp_f;
	int64_t zp = saturate_round(zp_f, 0, 255, 0);
	for (size_t i = 0; i < x->numel; i++) {
		float q = (float)mc_get_f(x, i) / scale;
		double v = isnan(q) ? (double)zp : nearbyint(q) + (double)zp;
		if (c->out[0])
			mc_set_i(c->out[0], i, saturate_round(v, 0, 255, zp));
	}
	if (c->out[1])
		mc_set_f(c->out[1], 0, scale);
	if (c->out[2])
		mc_set_i(c->out[2], 0, zp);
	return 0;
}

/* ---- integer matrix products ---- */

int mc_mm_geom_get(const mc_node *n, const mc_shape *a, const mc_shape *b, mm_geom *g)
{
	char sa[256], sb[256];
	if (a->rank == 0 || b->rank == 0)
		return mc_node_error(n, "matrix product operands must not be scalars");
	g->a = *a;
	g->b = *b;
	if (a->rank == 1)
		g->a = (mc_shape){2, {1, a->dims[0]}};
	if (b->rank == 1)
		g->b = (mc_shape){2, {b->dims[0], 1}};
	g->m = g->a.dims[g->a.rank - 2];
	g->k = g->a.dims[g->a.rank - 1];
	g->n = g->b.dims[g->b.rank - 1];
	mc_shape ab = {g->a.rank - 2, {0}}, bb = {g->b.rank - 2, {0}};
	memcpy(ab.dims, g->a.dims, sizeof(int64_t) * (size_t)ab.rank);
	memcpy(bb.dims, g->b.dims, sizeof(int64_t) * (size_t)bb.rank);
	if (g->b.dims[g->b.rank - 2] != g->k || !mc_broadcast(&ab, &bb, &g->batch))
		return mc_node_error(n, "cannot multiply %s by %s", mc_shape_str(a, sa, sizeof sa),
		                     mc_shape_str(b, sb, sizeof sb));
	g->out = g->batch;
	if (a->rank > 1)
		g->out.dims[g->out.rank++] = g->m;
	if (b->rank > 1)
		g->out.dims[g->out.rank++] = g->n;
	return 0;
}

/* Offsets (in matrices) of each operand for batch index bi. */
static void mm_batch_offsets(const mm_geom *g, size_t bi, size_t *ao, size_t *bo)
{
	mc_shape ab = {g->a.rank - 2, {0}}, bb = {g->b.rank - 2, {0}};
	memcpy(ab.dims, g->a.dims, sizeof(int64_t) * (size_t)ab.rank);
	memcpy(bb.dims, g->b.dims, sizeof(int64_t) * (size_t)bb.rank);
	int64_t sa[MC_MAX_RANK], sb[MC_MAX_RANK];
	mc_broadcast_strides(&ab, &g->batch, sa);
	mc_broadcast_strides(&bb, &g->batch, sb);
	*ao = mc_bcast_index(bi, &g->batch, sa);
	*bo = mc_bcast_index(bi, &g->batch, sb);
}

/* A quantization parameter of an operand shaped `target`: numpy
 * broadcasting, except that a 1-D parameter with one value per row
 * (second-to-last dim) applies per row when per_row is set. */
static bool param_fits(const mc_shape *p, const mc_shape *target, bool per_row)
{
	mc_shape o;
	if (per_row && target->rank >= 2 && p->rank == 1 && p->dims[0] == target->dims[target->rank - 2])
		return true;
	return mc_broadcast(p, target, &o) && mc_shape_eq(&o, target);
}

void mc_qparam_strides(const mc_shape *p, const mc_shape *target, bool per_row,
                       int64_t st[MC_MAX_RANK])
{
	mc_shape view = *p;
	if (per_row && target->rank >= 2 && p->rank == 1 && p->dims[0] > 1 &&
	    p->dims[0] == target->dims[target->rank - 2])
		view = (mc_shape){2, {p->dims[0], 1}};
	mc_broadcast_strides(&view, target, st);
}

/* Operand minus its zero point, as int64 (zp may be NULL). */
static int64_t *centered(const mc_tensor *x, const mc_tensor *zp, bool per_row)
{
	int64_t *v = mc_xmalloc((x->numel ? x->numel : 1) * sizeof *v);
	int64_t st[MC_MAX_RANK];
	if (zp)
		mc_qparam_strides(&zp->shape, &x->shape, per_row, st);
	for (size_t i = 0; i < x->numel; i++)
		v[i] = mc_get_i(x, i) - (zp ? mc_get_i(zp, mc_bcast_index(i, &x->shape, st)) : 0);
	return v;
}

/* acc[batch, m, n] = sum_k a[.., m, k] * b[.., k, n], in int64: 8-bit
 * operands cannot overflow it for any K a tensor can have. */
int64_t *mc_mm_int64(const mm_geom *g, const int64_t *a, const int64_t *b)
{
	size_t nb = mc_numel(&g->batch), m = (size_t)g->m, k = (size_t)g->k, nn = (size_t)g->n;
	size_t total = nb * m * nn;
	int64_t *acc = mc_xcalloc(total ? total : 1, sizeof *acc);
	for (size_t bi = 0; bi < nb; bi++) {
		size_t ao, bo;
		mm_batch_offsets(g, bi, &ao, &bo);
		const int64_t *am = a + ao * m * k, *bm = b + bo * k * nn;
		int64_t *cm = acc + bi * m * nn;
		for (size_t i = 0; i < m; i++)
			for (size_t j = 0; j < nn; j++) {
				int64_t s = 0;
				for (size_t q = 0; q < k; q++)
					s += am[i * k + q] * bm[q * nn + j];
				cm[i * nn + j] = s;
			}
	}
	return acc;
}

static int check_zp(const mc_node *n, const char *what, const mc_value *x, const mc_value *zp,
                    bool per_row)
{
	char a[256];
	if (!zp)
		return 0;
	if (zp->dtype != x->dtype)
		return mc_node_error(n, "%s zero point has type %s, its input %s", what,
		                     mc_dtype_name(zp->dtype), mc_dtype_name(x->dtype));
	if (!param_fits(&zp->shape, &x->shape, per_row))
		return mc_node_error(n, "%s zero point shape %s does not fit its input", what,
		                     mc_shape_str(&zp->shape, a, sizeof a));
	return 0;
}

static int check_8bit(const mc_node *n, const char *what, const mc_value *v)
{
	if (!is_8bit(v->dtype))
		return mc_node_error(n, "%s has type %s; expected int8 or uint8", what,
		                     mc_dtype_name(v->dtype));
	return 0;
}

static int check_scale(const mc_node *n, const char *what, const mc_value *s,
                       const mc_shape *target, bool per_row)
{
	char a[256];
	if (!mc_dtype_is_float(s->dtype))
		return mc_node_error(n, "%s scale has type %s; expected a float type", what,
		                     mc_dtype_name(s->dtype));
	if (!param_fits(&s->shape, target, per_row))
		return mc_node_error(n, "%s scale shape %s does not fit its tensor", what,
		                     mc_shape_str(&s->shape, a, sizeof a));
	return 0;
}

static int qlinearmatmul_infer(mc_infer_ctx *c)
{
	if (MC_NEED_INPUTS(c, QM_A, QM_A_SCALE, QM_B, QM_B_SCALE, QM_Y_SCALE))
		return -1;
	const mc_node *n = c->node;
	const mc_value *const *in = c->in;
	const mc_value *a = in[QM_A], *b = in[QM_B], *yzp = in[QM_Y_ZP];
	mm_geom g;
	if (check_8bit(n, "a", a) || check_8bit(n, "b", b) || mc_mm_geom_get(n, &a->shape, &b->shape, &g))
		return -1;
	if (check_zp(n, "a", a, in[QM_A_ZP], true) || check_zp(n, "b", b, in[QM_B_ZP], false) ||
	    check_scale(n, "a", in[QM_A_SCALE], &a->shape, true) ||
	    check_scale(n, "b", in[QM_B_SCALE], &b->shape, false) ||
	    check_scale(n, "y", in[QM_Y_SCALE], &g.out, false))
		return -1;
	mc_dtype out = yzp ? yzp->dtype : a->dtype;
	char s[256];
	if (!is_8bit(out))
		return mc_node_error(n, "y zero point has type %s; expected int8 or uint8",
		                     mc_dtype_name(out));
	if (yzp && !param_fits(&yzp->shape, &g.out, false))
		return mc_node_error(n, "y zero point shape %s does not fit the output",
		                     mc_shape_str(&yzp->shape, s, sizeof s));
	mc_set_out(c, 0, out, &g.out);
	return 0;
}

/* Parameter value for element `i` of a tensor shaped `target`. */
static double param_at(const mc_tensor *p, const mc_shape *target, bool per_row, size_t i)
{
	int64_t st[MC_MAX_RANK];
	mc_qparam_strides(&p->shape, target, per_row, st);
	return mc_get_f(p, mc_bcast_index(i, target, st));
}

static int qlinearmatmul_eval(mc_eval_ctx *c)
{
	if (!c->out[0])
		return 0;
	const mc_tensor *const *in = c->in;
	const mc_tensor *a = in[QM_A], *b = in[QM_B], *yzp = in[QM_Y_ZP];
	mc_tensor *y = c->out[0];
	mm_geom g;
	if (mc_mm_geom_get(c->node, &a->shape, &b->shape, &g))
		return -1;
	int64_t *av = centered(a, in[QM_A_ZP], true), *bv = centered(b, in[QM_B_ZP], false);
	int64_t *acc = mc_mm_int64(&g, av, bv);
	/* the scale factor is computed at the scales' precision, as the reference */
	mc_dtype prec = mc_quant_promote(mc_quant_promote(in[QM_A_SCALE]->dtype,
	                                                  in[QM_B_SCALE]->dtype),
	                                 in[QM_Y_SCALE]->dtype);
	int64_t lo, hi;
	mc_quant_range(y->dtype, &lo, &hi);
	size_t m = (size_t)g.m, k = (size_t)g.k, nn = (size_t)g.n;
	for (size_t i = 0; i < y->numel; i++) {
		size_t bi = i / (m * nn), row = i / nn % m, col = i % nn, ao, bo;
		mm_batch_offsets(&g, bi, &ao, &bo);
		double as = param_at(in[QM_A_SCALE], &g.a, true, (ao * m + row) * k);
		double bs = param_at(in[QM_B_SCALE], &g.b, false, bo * k * nn + col);
		double ys = param_at(in[QM_Y_SCALE], &g.out, false, i);
		double factor = div_at(prec, round_to(prec, as * bs), ys);
		double z = yzp ? param_at(yzp, &g.out, false, i) : 0;
		mc_set_i(y, i, saturate_round((double)acc[i] * factor + z, lo, hi, (int64_t)z));
	}
	free(av);
	free(bv);
	free(acc);
	return 0;
}

/* ---- integer convolutions ---- */

/* Conv geometry from attributes and the shapes of x [N, C, D...] and
 * w [M, C/group, K...], as the ONNX Conv spec defines it. */
int mc_conv_geom_get(const mc_node *n, const mc_shape *x, const mc_shape *w, conv_geom *g)
{
	char sx[256], sw[256];
	memset(g, 0, sizeof *g);
	if (x->rank < 3 || w->rank != x->rank)
		return mc_node_error(n, "input %s and weight %s must have the same rank, at least 3",
		                     mc_shape_str(x, sx, sizeof sx), mc_shape_str(w, sw, sizeof sw));
	g->nsp = x->rank - 2;
	g->batch = x->dims[0];
	g->in_ch = x->dims[1];
	g->out_ch = w->dims[0];
	if (mc_attr_int(n, "group", 1, &g->group))
		return -1;
	if (g->group < 1 || g->in_ch % g->group || g->out_ch % g->group ||
	    w->dims[1] * g->group != g->in_ch)
		return mc_node_error(n, "group %lld does not fit input %s and weight %s",
		                     (long long)g->group, mc_shape_str(x, sx, sizeof sx),
		                     mc_shape_str(w, sw, sizeof sw));
	int64_t pads[2 * MC_MAX_RANK], kshape[MC_MAX_RANK];
	if (mc_attr_ints_fixed(n, "strides", g->nsp, 1, 1, g->stride) ||
	    mc_attr_ints_fixed(n, "dilations", g->nsp, 1, 1, g->dil) ||
	    mc_attr_ints_fixed(n, "pads", 2 * g->nsp, 0, 0, pads))
		return -1;
	if (mc_attr_find(n, "kernel_shape")) {
		if (mc_attr_ints_fixed(n, "kernel_shape", g->nsp, 1, 1, kshape))
			return -1;
		for (int d = 0; d < g->nsp; d++)
			if (kshape[d] != w->dims[d + 2])
				return mc_node_error(n, "kernel_shape does not match weight %s",
				                     mc_shape_str(w, sw, sizeof sw));
	}
	const char *auto_pad;
	if (mc_attr_string(n, "auto_pad", "NOTSET", &auto_pad))
		return -1;
	bool same_upper = strcmp(auto_pad, "SAME_UPPER") == 0;
	bool same_lower = strcmp(auto_pad, "SAME_LOWER") == 0;
	bool valid = strcmp(auto_pad, "VALID") == 0;
	if (!same_upper && !same_lower && !valid && strcmp(auto_pad, "NOTSET") != 0)
		return mc_node_error(n, "auto_pad '%s' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID",
		                     auto_pad);
	for (int d = 0; d < g->nsp; d++)
		if (g->stride[d] > ((int64_t)1 << 40) || g->dil[d] > ((int64_t)1 << 40))
			return mc_node_error(n, "strides and dilations must be at most 2^40");
	for (int d = 0; d < g->nsp; d++) {
		int64_t in = x->dims[d + 2], k = w->dims[d + 2], s = g->stride[d];
		g->in[d] = in;
		g->kern[d] = k;
		if (k < 1)
			return mc_node_error(n, "weight %s has an empty kernel", mc_shape_str(w, sw, sizeof sw));
		if (in > ((int64_t)1 << 40) || k > ((int64_t)1 << 40))
			return mc_node_error(n, "input %s is too large", mc_shape_str(x, sx, sizeof sx));
		int64_t span = (k - 1) * g->dil[d] + 1; /* both factors < 2^40: no overflow */
		int64_t begin = pads[d], end = pads[d + g->nsp];
		if (same_upper || same_lower) {
			int64_t out = (in + s - 1) / s;
			int64_t total = (out - 1) * s + span - in;
			total = total < 0 ? 0 : total;
			begin = same_upper ? total / 2 : total - total / 2;
			end = total - begin;
		} else if (valid) {
			begin = end = 0;
		}
		int64_t room = in + begin + end - span;
		if (room < 0)
			return mc_node_error(n, "kernel span %lld exceeds padded input size %lld on "
			                     "spatial axis %d", (long long)span,
			                     (long long)(in + begin + end), d);
		g->pad[d] = begin;
		g->out[d] = room / s + 1;
	}
	return 0;
}

mc_shape mc_conv_out_shape(const conv_geom *g)
{
	mc_shape s = {g->nsp + 2, {g->batch, g->out_ch}};
	for (int d = 0; d < g->nsp; d++)
		s.dims[d + 2] = g->out[d];
	return s;
}

/* acc[n, m, out...] = sum over the group's channels and the kernel window of
 * x * w (both already centered), plus bias[m] (may be NULL). */
int64_t *mc_conv_int64(const conv_geom *g, const int64_t *x, const int64_t *w,
                           const int64_t *bias)
{
	mc_shape os = mc_conv_out_shape(g);
	size_t out_sp = 1, in_sp = 1, k_sp = 1;
	for (int d = 0; d < g->nsp; d++) {
		out_sp *= (size_t)g->out[d];
		in_sp *= (size_t)g->in[d];
		k_sp *= (size_t)g->kern[d];
	}
	size_t total = mc_numel(&os);
	int64_t *acc = mc_xcalloc(total ? total : 1, sizeof *acc);
	size_t cpg = (size_t)(g->in_ch / g->group), mpg = (size_t)(g->out_ch / g->group);
	for (size_t i = 0; i < total; i++) {
		size_t op = i % out_sp, m = i / out_sp % (size_t)g->out_ch, b = i / out_sp / (size_t)g->out_ch;
		size_t grp = m / mpg;
		int64_t s = bias ? bias[m] : 0;
		for (size_t kp = 0; kp < k_sp; kp++) {
			/* input position of this kernel tap; skip taps in the padding */
			size_t in_off = 0, o = op, k = kp;
			bool inside = true;
			int64_t pos[MC_MAX_RANK];
			for (int d = g->nsp - 1; d >= 0; d--) {
				int64_t od = (int64_t)(o % (size_t)g->out[d]), kd = (int64_t)(k % (size_t)g->kern[d]);
				o /= (size_t)g->out[d];
				k /= (size_t)g->kern[d];
				pos[d] = od * g->stride[d] - g->pad[d] + kd * g->dil[d];
				inside = inside && pos[d] >= 0 && pos[d] < g->in[d];
			}
			if (!inside)
				continue;
			for (int d = 0; d < g->nsp; d++)
				in_off = in_off * (size_t)g->in[d] + (size_t)pos[d];
			for (size_t c = 0; c < cpg; c++) {
				size_t ic = grp * cpg + c;
				int64_t xv = x[(b * (size_t)g->in_ch + ic) * in_sp + in_off];
				int64_t wv = w[(m * cpg + c) * k_sp + kp];
				s += xv * wv;
			}
		}
		acc[i] = s;
	}
	return acc;
}

/* A per-output-channel parameter: scalar, one value, or 1-D of M values. */
static bool per_channel_fits(const mc_shape *p, int64_t m)
{
	return p->rank == 0 || (p->rank == 1 && (p->dims[0] == 1 || p->dims[0] == m));
}

static double per_channel(const mc_tensor *p, size_t m)
{
	return mc_get_f(p, p->numel == 1 ? 0 : m);
}

/* Weight minus its per-channel zero point, as int64. */
static int64_t *centered_weight(const mc_tensor *w, const mc_tensor *zp)
{
	int64_t *v = mc_xmalloc((w->numel ? w->numel : 1) * sizeof *v);
	size_t per_m = w->shape.dims[0] ? w->numel / (size_t)w->shape.dims[0] : 1;
	for (size_t i = 0; i < w->numel; i++)
		v[i] = mc_get_i(w, i) - (zp ? (int64_t)per_channel(zp, i / per_m) : 0);
	return v;
}

static int check_conv_zp(const mc_node *n, const char *what, const mc_value *v,
                         const mc_value *zp, int64_t channels)
{
	char s[256];
	if (!zp)
		return 0;
	if (zp->dtype != v->dtype)
		return mc_node_error(n, "%s zero point has type %s, its input %s", what,
		                     mc_dtype_name(zp->dtype), mc_dtype_name(v->dtype));
	if (!per_channel_fits(&zp->shape, channels))
		return mc_node_error(n, "%s zero point shape %s must be a scalar%s", what,
		                     mc_shape_str(&zp->shape, s, sizeof s),
		                     channels > 1 ? " or one value per output channel" : "");
	return 0;
}

static int qlinearconv_infer(mc_infer_ctx *c)
{
	if (MC_NEED_INPUTS(c, QC_X, QC_X_SCALE, QC_W, QC_W_SCALE, QC_Y_SCALE))
		return -1;
	const mc_node *n = c->node;
	const mc_value *const *in = c->in;
	const mc_value *x = in[QC_X], *w = in[QC_W], *yzp = in[QC_Y_ZP];
	const mc_value *bias = c->n_in > QC_B ? in[QC_B] : NULL;
	conv_geom g;
	char s[256];
	if (check_8bit(n, "x", x) || check_8bit(n, "w", w) ||
	    mc_conv_geom_get(n, &x->shape, &w->shape, &g))
		return -1;
	if (check_conv_zp(n, "x", x, in[QC_X_ZP], 1) ||
	    check_conv_zp(n, "w", w, in[QC_W_ZP], g.out_ch))
		return -1;
	static const struct { int idx; const char *what; bool per_m; } scales[] = {
		{QC_X_SCALE, "x", false}, {QC_W_SCALE, "w", true}, {QC_Y_SCALE, "y", false},
	};
	for (int k = 0; k < 3; k++) {
		const mc_value *sc = in[scales[k].idx];
		if (!mc_dtype_is_float(sc->dtype))
			return mc_node_error(n, "%s scale has type %s; expected a float type",
			                     scales[k].what, mc_dtype_name(sc->dtype));
		if (!per_channel_fits(&sc->shape, scales[k].per_m ? g.out_ch : 1))
			return mc_node_error(n, "%s scale shape %s is not %s", scales[k].what,
			                     mc_shape_str(&sc->shape, s, sizeof s),
			                     scales[k].per_m ? "a scalar or one value per output channel"
			                                     : "a scalar");
	}
	mc_dtype out = yzp ? yzp->dtype : x->dtype;
	if (yzp && (!is_8bit(yzp->dtype) || !per_channel_fits(&yzp->shape, 1)))
		return mc_node_error(n, "y zero point must be an int8 or uint8 scalar");
	if (bias && (bias->dtype != MC_INT32 || bias->shape.rank != 1 ||
	             bias->shape.dims[0] != g.out_ch))
		return mc_node_error(n, "bias must be int32 with %lld values", (long long)g.out_ch);
	mc_shape os = mc_conv_out_shape(&g);
	mc_set_out(c, 0, out, &os);
	return 0;
}

static int qlinearconv_eval(mc_eval_ctx *c)
{
	if (!c->out[0])
		return 0;
	const mc_tensor *const *in = c->in;
	const mc_tensor *x = in[QC_X], *w = in[QC_W], *yzp = in[QC_Y_ZP];
	const mc_tensor *bias = c->n_in > QC_B ? in[QC_B] : NULL;
	mc_tensor *y = c->out[0];
	conv_geom g;
	if (mc_conv_geom_get(c->node, &x->shape, &w->shape, &g))
		return -1;
	int64_t *xv = centered(x, in[QC_X_ZP], false), *wv = centered_weight(w, in[QC_W_ZP]);
	int64_t *bv = NULL;
	if (bias) {
		bv = mc_xmalloc((bias->numel ? bias->numel : 1) * sizeof *bv);
		for (size_t i = 0; i < bias->numel; i++)
			bv[i] = mc_get_i(bias, i);
	}
	int64_t *acc = mc_conv_int64(&g, xv, wv, bv);
	mc_dtype prec = mc_quant_promote(mc_quant_promote(in[QC_X_SCALE]->dtype,
	                                                  in[QC_W_SCALE]->dtype),
	                                 in[QC_Y_SCALE]->dtype);
	int64_t lo, hi;
	mc_quant_range(y->dtype, &lo, &hi);
	size_t out_sp = 1;
	for (int d = 0; d < g.nsp; d++)
		out_sp *= (size_t)g.out[d];
	double xs = mc_get_f(in[QC_X_SCALE], 0), ys = mc_get_f(in[QC_Y_SCALE], 0);
	double z = yzp ? mc_get_f(yzp, 0) : 0;
	for (size_t i = 0; i < y->numel; i++) {
		size_t m = i / out_sp % (size_t)g.out_ch;
		double ws = per_channel(in[QC_W_SCALE], m);
		double factor = div_at(prec, round_to(prec, xs * ws), ys);
		mc_set_i(y, i, saturate_round((double)acc[i] * factor + z, lo, hi, (int64_t)z));
	}
	free(xv);
	free(wv);
	free(bv);
	free(acc);
	return 0;
}

/* ---- registry ---- */

static const mc_op op_quantize_linear = {
	.name = "QuantizeLinear", .min_opset = 10, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
	.parse = quantize_parse, .infer = quantize_infer, .eval = quantize_eval,
};

static const mc_op op_dequantize_linear = {
	.name = "DequantizeLinear", .min_opset = 10, .max_opset = MC_MAX_OPSET,
	.min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
	.parse = dequantize_parse, .infer = dequantize_infer, .eval = dequantize_eval,
};

static const mc_op op_dynamic_quantize_linear = {
	.name = "DynamicQuantizeLinear", .min_opset = 11, .max_opset = MC_MAX_OPSET,
	.min_inputs = 1, .max_inputs = 1, .min_outputs = 3, .max_outputs = 3,
	.infer = dynq_infer, .eval = dynq_eval,
};

static const mc_op op_qlinear_matmul = {
	.name = "QLinearMatMul", .min_opset = 10, .max_opset = MC_MAX_OPSET,
	.min_inputs = 8, .max_inputs = 8, .min_outputs = 1, .max_outputs = 1,
	.infer = qlinearmatmul_infer, .eval = qlinearmatmul_eval,
};

static const mc_op op_qlinear_conv = {
	.name = "QLinearConv", .min_opset = 10, .max_opset = MC_MAX_OPSET,
	.min_inputs = 8, .max_inputs = 9, .min_outputs = 1, .max_outputs = 1,
	.infer = qlinearconv_infer, .eval = qlinearconv_eval,
};

const mc_op *const mc_ops_quant[] = {
	&op_quantize_linear,
	&op_dequantize_linear,
	&op_dynamic_quantize_linear,
	&op_qlinear_matmul,
	&op_qlinear_conv,
	NULL,
};
