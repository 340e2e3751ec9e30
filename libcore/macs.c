/* Multiply-accumulate counts of one run, from the inferred shapes: the
 * work figure behind inspect, --stats, NAME.json's "macs" and bench/'s
 * GFLOP/s. Only the ops whose cost is a product of dimensions count
 * (convolutions, Gemm, MatMul and their integer, quantised and internal
 * forms, the recurrent layers' gate products: the op table's macs
 * column); the pointwise rest is memory-bound and left out, as GFLOP/s
 * figures do. */
#include <stdlib.h>
#include <string.h>

#include "modelc.h"
#include "ops/loop.h"

/* Elements of value v; 0 if v is absent or its shape is unknown. */
static double value_numel(const mc_graph *g, int v)
{
	if (v < 0 || v >= g->n_values || !g->values[v].typed)
		return 0;
	const mc_shape *s = &g->values[v].shape;
	double n = 1;
	for (int d = 0; d < s->rank; d++)
		n *= (double)(s->dims[d] < 0 ? 0 : s->dims[d]);
	return n;
}

static const mc_shape *value_shape(const mc_graph *g, int v)
{
	if (v < 0 || v >= g->n_values || !g->values[v].typed)
		return NULL;
	return &g->values[v].shape;
}

static int node_input(const mc_node *n, int i)
{
	return i < n->n_inputs ? n->inputs[i] : -1;
}

static int node_output(const mc_node *n, int i)
{
	return i < n->n_outputs ? n->outputs[i] : -1;
}

/* Conv-like: every output element sums over C/group x kernel taps, which is
 * the weight's elements per output channel (weight [M, C/group, k...] in
 * both layouts, NCHW and the internal channels-last NhwcConv). */
static double conv_macs(const mc_graph *g, const mc_node *n, int weight_input)
{
	const mc_shape *w = value_shape(g, node_input(n, weight_input));
	if (!w || w->rank < 1 || w->dims[0] <= 0)
		return 0;
	return value_numel(g, node_output(n, 0)) * (value_numel(g, node_input(n, weight_input)) / (double)w->dims[0]);
}

/* ConvTranspose scatters every input element into M/group x kernel taps
 * outputs: the weight's elements per input channel (weight [C, M/group, k...]). */
static double conv_transpose_macs(const mc_graph *g, const mc_node *n)
{
	const mc_shape *w = value_shape(g, node_input(n, 1));
	if (!w || w->rank < 1 || w->dims[0] <= 0)
		return 0;
	return value_numel(g, node_input(n, 0)) * (value_numel(g, node_input(n, 1)) / (double)w->dims[0]);
}

/* (Batched) MatMul: every output element is a dot product over A's last
 * dim (A's only dim when A is 1-D). */
static double matmul_macs(const mc_graph *g, const mc_node *n, int a_input)
{
	const mc_shape *a = value_shape(g, node_input(n, a_input));
	if (!a || a->rank < 1)
		return 0;
	return value_numel(g, node_output(n, 0)) * (double)a->dims[a->rank - 1];
}

/* Gemm: Y [M, N] over K, A's dim 1, or dim 0 when transA. */
static double gemm_macs(const mc_graph *g, const mc_node *n)
{
	const mc_shape *a = value_shape(g, node_input(n, 0));
	int64_t trans_a = 0;
	const mc_attr *at = mc_attr_find(n, "transA");
	if (at && at->type == MC_ATTR_INT)
		trans_a = at->i;
	if (!a || a->rank != 2)
		return 0;
	return value_numel(g, node_output(n, 0)) * (double)a->dims[trans_a ? 0 : 1];
}

/* RNN, GRU, LSTM: every step of every sequence multiplies x_t by each
 * direction's W and h by its R, gate rows x (input + hidden) in all. */
static double rnn_macs(const mc_graph *g, const mc_node *n)
{
	const mc_shape *x = value_shape(g, node_input(n, 0));
	if (!x || x->rank != 3 || x->dims[2] == 0)
		return 0;
	double steps = value_numel(g, node_input(n, 0)) / (double)x->dims[2];
	return steps * (value_numel(g, node_input(n, 1)) + value_numel(g, node_input(n, 2)));
}

static double graph_macs(const mc_graph *g);

/* An If not inlined yet: one of its branches runs; count the larger. */
static double if_macs(const mc_node *n)
{
	double most = 0;
	for (int i = 0; i < n->n_attrs; i++) {
		if (n->attrs[i].type != MC_ATTR_GRAPH || !n->attrs[i].g)
			continue;
		double m = graph_macs(n->attrs[i].g);
		if (m > most)
			most = m;
	}
	return most;
}

/* A Loop or Scan not unrolled yet: its body once per iteration, where
 * inference knows the count (else once). */
static double loop_macs(const mc_node *n)
{
	const mc_graph *body = mc_loop_body(n);
	double iters = 1;
	if (n->params && n->id == MC_OP_Loop && ((const loop_params *)n->params)->iters > 0)
		iters = (double)((const loop_params *)n->params)->iters;
	if (n->params && n->id == MC_OP_Scan) {
		const scan_params *p = n->params;
		iters = (double)(p->seq_len > 0 ? p->seq_len : 1) * (double)(p->batch > 0 ? p->batch : 1);
	}
	return body ? iters * graph_macs(body) : 0;
}

double mc_node_macs(const mc_graph *g, const mc_node *n)
{
	switch (mc_opinfo_of(n->id)->macs) {
	case MC_MACS_NONE: return 0;
	case MC_MACS_CONV: return conv_macs(g, n, 1);
	case MC_MACS_QCONV: return conv_macs(g, n, 3);
	case MC_MACS_CONV_T: return conv_transpose_macs(g, n);
	case MC_MACS_GEMM: return gemm_macs(g, n);
	case MC_MACS_MATMUL: return matmul_macs(g, n, 0);
	case MC_MACS_BRANCHES: return if_macs(n);
	case MC_MACS_BODY: return loop_macs(n);
	case MC_MACS_RNN: return rnn_macs(g, n);
	}
	return 0;
}

/* Nodes of inlined If branches carry a guard (1 + the condition's value):
 * per guard, only the then or the else nodes run, so the larger side
 * counts. */
static double graph_macs(const mc_graph *g)
{
	double total = 0;
	double *then_sum = mc_xcalloc((size_t)g->n_values + 1, sizeof(double));
	double *else_sum = mc_xcalloc((size_t)g->n_values + 1, sizeof(double));
	for (int i = 0; i < g->n_nodes; i++) {
		const mc_node *n = &g->nodes[i];
		double m = mc_node_macs(g, n);
		if (n->guard <= 0 || n->guard > g->n_values)
			total += m;
		else if (n->guard_else)
			else_sum[n->guard - 1] += m;
		else
			then_sum[n->guard - 1] += m;
	}
	for (int v = 0; v < g->n_values; v++)
		total += then_sum[v] > else_sum[v] ? then_sum[v] : else_sum[v];
	free(then_sum);
	free(else_sum);
	return total;
}

double mc_graph_macs(const mc_graph *g)
{
	return g ? graph_macs(g) : 0;
}
