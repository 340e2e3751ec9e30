/* Internal channels-last ops: NhwcConv, NhwcMaxPool, NhwcAveragePool.
 *
 * The layout pass (freezing/layout.c) rewrites Conv / MaxPool / AveragePool
 * into these so that the fast kernels read channels contiguously. They are
 * flagged MC_OP_INTERNAL: mc_registry_find never returns them (a model
 * cannot name them), mc_registry_find_internal does.
 *
 * Attributes are exactly those of the ONNX op; the data input and output
 * are [N, D1.., C] instead of [N, C, D1..]; Conv's weight stays OIHW
 * [M, C/group, k...] and its bias [M]. The semantics stay in one place:
 * parse, infer and eval call the ONNX op's own entries (libcore/ops/nn.c)
 * on channels-first views of the same shapes and tensors. */
#include <string.h>

#include "ops.h"

/* The ONNX op an internal op stands for, at the node's opset. */
static const mc_op *base_op(const mc_node *n)
{
	const char *name = n->op_type;
	if (!strncmp(name, "Nhwc", 4))
		name += 4;
	const mc_op *op = mc_registry_find(name, n->opset, NULL);
	if (!op)
		mc_node_error(n, "%s has no entry at opset %d", name, n->opset);
	return op;
}

/* The node as the ONNX op sees it: its op_type (some checks depend on it,
 * MaxPool's dtypes) and entry; attributes and params are shared. */
static mc_node base_view(const mc_node *n, const mc_op *op)
{
	mc_node v = *n;
	v.op_type = (char *)op->name;
	v.id = mc_opid_of(op->name);
	v.op = op;
	return v;
}

/* Channels-last dim order to channels-first (perm of a Transpose taking
 * [N, D.., C] to [N, C, D..]) and back. */
static void perm_to_nchw(int rank, int *perm)
{
	perm[0] = 0;
	perm[1] = rank - 1;
	for (int i = 2; i < rank; i++)
		perm[i] = i - 1;
}

static void perm_to_nhwc(int rank, int *perm)
{
	perm[0] = 0;
	for (int i = 1; i < rank - 1; i++)
		perm[i] = i + 1;
	perm[rank - 1] = 1;
}

static mc_shape permuted_shape(const mc_shape *s, const int *perm)
{
	mc_shape r = {.rank = s->rank};
	for (int i = 0; i < s->rank; i++)
		r.dims[i] = s->dims[perm[i]];
	return r;
}

/* out[i] = in[perm-index of i], element bytes copied as they are. */
static void permute_data(const mc_tensor *in, const int *perm, mc_tensor *out)
{
	int rank = in->shape.rank;
	size_t esz = mc_dtype_size(in->dtype);
	int64_t st[MC_MAX_RANK], pos[MC_MAX_RANK] = {0};
	mc_strides(&in->shape, st);
	const char *src = in->data;
	char *dst = out->data;
	for (size_t k = 0; k < out->numel; k++) {
		int64_t off = 0;
		for (int i = 0; i < rank; i++)
			off += pos[i] * st[perm[i]];
		memcpy(dst + k * esz, src + (size_t)off * esz, esz);
		for (int i = rank - 1; i >= 0; i--) {
			if (++pos[i] < out->shape.dims[i])
				break;
			pos[i] = 0;
		}
	}
}

static mc_tensor *permuted_tensor(const mc_node *n, const mc_tensor *t, const int *perm)
{
	mc_shape s = permuted_shape(&t->shape, perm);
	mc_tensor *r = mc_tensor_new(t->dtype, &s);
	if (!r) {
		mc_node_error(n, "out of memory");
		return NULL;
	}
	permute_data(t, perm, r);
	return r;
}

static int nhwc_parse(mc_node *n)
{
	const mc_op *op = base_op(n);
	if (!op)
		return -1;
	mc_node v = base_view(n, op);
	int rc = op->parse ? op->parse(&v) : 0;
	n->params = v.params; /* parse stored them in the view */
	return rc;
}

static int check_rank(const mc_node *n, const mc_shape *s)
{
	char buf[256];
	if (s->rank < 3)
		return mc_node_error(n, "input has shape %s; expected N x spatial dims x C (rank 3 "
		                     "or more)", mc_shape_str(s, buf, sizeof buf));
	return 0;
}

/* The ONNX op's inference on the channels-first view of input 0; output 0
 * gets its shape back in channels-last order. */
static int nhwc_infer(mc_infer_ctx *c)
{
	const mc_op *op = base_op(c->node);
	if (!op || check_rank(c->node, &c->in[0]->shape))
		return -1;
	int rank = c->in[0]->shape.rank, to_nchw[MC_MAX_RANK], to_nhwc[MC_MAX_RANK];
	perm_to_nchw(rank, to_nchw);
	perm_to_nhwc(rank, to_nhwc);
	mc_value x = *c->in[0], y = {0};
	x.shape = permuted_shape(&c->in[0]->shape, to_nchw);
	x.konst = NULL;
	const mc_value *in[3] = {&x, NULL, NULL};
	for (int i = 1; i < c->n_in && i < 3; i++)
		in[i] = c->in[i];
	mc_value *out[1] = {&y};
	mc_node v = base_view(c->node, op);
	mc_infer_ctx bc = {.node = &v, .graph = c->graph, .n_in = c->n_in, .n_out = 1,
	                   .in = in, .out = out};
	if (op->infer(&bc))
		return -1;
	mc_shape ys = permuted_shape(&y.shape, to_nhwc);
	mc_set_out(c, 0, y.dtype, &ys);
	return 0;
}

/* The ONNX op's evaluation on input 0 transposed to channels-first; the
 * result transposed back into output 0. */
static int nhwc_eval(mc_eval_ctx *c)
{
	const mc_op *op = base_op(c->node);
	if (!op)
		return -1;
	if (!c->out[0])
		return 0;
	int rank = c->in[0]->shape.rank, to_nchw[MC_MAX_RANK], to_nhwc[MC_MAX_RANK];
	perm_to_nchw(rank, to_nchw);
	perm_to_nhwc(rank, to_nhwc);
	mc_tensor *x = permuted_tensor(c->node, c->in[0], to_nchw);
	mc_shape ys = permuted_shape(&c->out[0]->shape, to_nchw);
	mc_tensor *y = x ? mc_tensor_new(c->out[0]->dtype, &ys) : NULL;
	if (x && !y)
		mc_node_error(c->node, "out of memory");
	int rc = -1;
	if (x && y) {
		const mc_tensor *in[3] = {x, NULL, NULL};
		for (int i = 1; i < c->n_in && i < 3; i++)
			in[i] = c->in[i];
		mc_tensor *out[1] = {y};
		mc_node v = base_view(c->node, op);
		mc_eval_ctx bc = {.node = &v, .graph = c->graph, .n_in = c->n_in, .n_out = 1,
		                  .in = in, .out = out, .env = c->env};
		rc = op->eval(&bc);
		if (!rc)
			permute_data(y, to_nhwc, c->out[0]);
	}
	mc_tensor_free(x);
	mc_tensor_free(y);
	return rc;
}

#define NHWC_OP(var, opname, min_in, max_in)                                                 \
	static const mc_op var = {                                                         \
		.name = opname, .min_opset = 1, .max_opset = MC_MAX_OPSET,                 \
		.min_inputs = min_in, .max_inputs = max_in, .min_outputs = 1, .max_outputs = 1,    \
		.parse = nhwc_parse, .infer = nhwc_infer, .eval = nhwc_eval,               \
		.flags = MC_OP_INTERNAL,                                                   \
	}

NHWC_OP(op_nhwc_conv, "NhwcConv", 2, 3);
NHWC_OP(op_nhwc_maxpool, "NhwcMaxPool", 1, 1);
NHWC_OP(op_nhwc_avgpool, "NhwcAveragePool", 1, 1);

const mc_op *const mc_ops_nhwc[] = {
	&op_nhwc_conv, &op_nhwc_maxpool, &op_nhwc_avgpool,
	NULL,
};
