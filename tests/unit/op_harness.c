/* Test support for the op unit tests: see op_harness.h. No tests here. */
#include "op_harness.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- diagnostics ---- */

char last_error[1024];

static void capture(const char *line, void *user)
{
	(void)user;
	snprintf(last_error, sizeof last_error, "%s", line);
}

void capture_diags(void)
{
	last_error[0] = 0;
	mc_set_diag_sink(capture, NULL);
}

/* ---- shapes and tensors ---- */

mc_shape shape(int rank, const int64_t *dims)
{
	mc_shape s = {.rank = rank};
	for (int d = 0; d < rank; d++)
		s.dims[d] = dims[d];
	return s;
}

mc_tensor *tensor(mc_dtype t, int rank, const int64_t *dims, const double *vals)
{
	mc_shape s = shape(rank, dims);
	mc_tensor *x = mc_tensor_new(t, &s);
	cr_assert_not_null(x);
	for (size_t i = 0; vals && i < x->numel; i++)
		mc_set_f(x, i, vals[i]);
	return x;
}

void free_all(mc_tensor **t, int n)
{
	for (int k = 0; k < n; k++)
		mc_tensor_free(t[k]);
}

/* ---- attributes ---- */

mc_attr attr_int(const char *name, int64_t v)
{
	return (mc_attr){.name = (char *)name, .type = MC_ATTR_INT, .i = v};
}

mc_attr attr_float(const char *name, double v)
{
	return (mc_attr){.name = (char *)name, .type = MC_ATTR_FLOAT, .f = v};
}

mc_attr attr_string(const char *name, const char *v)
{
	return (mc_attr){.name = (char *)name, .type = MC_ATTR_STRING, .s = (char *)v};
}

mc_attr attr_ints(const char *name, const int64_t *v, size_t n)
{
	return (mc_attr){.name = (char *)name, .type = MC_ATTR_INTS, .ints = (int64_t *)v,
	                 .n = n};
}

mc_attr attr_floats(const char *name, const float *v, size_t n)
{
	return (mc_attr){.name = (char *)name, .type = MC_ATTR_FLOATS, .floats = (float *)v,
	                 .n = n};
}

mc_attr attr_strings(const char *name, const char *const *v, size_t n)
{
	return (mc_attr){.name = (char *)name, .type = MC_ATTR_STRINGS, .strings = (char **)v,
	                 .n = n};
}

/* ---- running one node ---- */

/* run_op of a node with the given name; want[k] false: output k omitted
 * (want NULL: every output present). */
static int run_named(const op_call *call, const char *name, const bool *want,
                     mc_tensor *const *in, int n_in, mc_tensor **out, int n_out)
{
	cr_assert(n_in <= OH_MAX_IO && n_out <= OH_MAX_IO, "%d inputs, %d outputs: at most %d",
	          n_in, n_out, OH_MAX_IO);
	const mc_op *op = mc_registry_find(call->op, call->opset, NULL);
	cr_assert_not_null(op, "%s opset %d is not registered", call->op, call->opset);
	int inputs[OH_MAX_IO], outputs[OH_MAX_IO];
	mc_value vin[OH_MAX_IO], vout[OH_MAX_IO];
	const mc_value *pin[OH_MAX_IO];
	mc_value *pout[OH_MAX_IO];
	memset(vin, 0, sizeof vin);
	memset(vout, 0, sizeof vout);
	for (int k = 0; k < n_in; k++) {
		inputs[k] = in[k] ? k : -1;
		pin[k] = NULL;
		if (!in[k])
			continue;
		bool konst = !((call->runtime_inputs >> k) & 1);
		vin[k] = (mc_value){.name = (char *)"in", .kind = konst ? MC_VAL_CONST : MC_VAL_INPUT,
		                    .dtype = in[k]->dtype, .shape = in[k]->shape, .typed = true,
		                    .konst = konst ? in[k] : NULL};
		pin[k] = &vin[k];
	}
	for (int k = 0; k < n_out; k++) {
		bool present = !want || want[k];
		outputs[k] = present ? OH_MAX_IO + k : -1;
		vout[k].name = (char *)"out";
		pout[k] = present ? &vout[k] : NULL;
		out[k] = NULL;
	}
	mc_node n = {.name = (char *)name, .op_type = (char *)call->op,
	             .domain = (char *)"", .opset = call->opset, .op = op, .n_inputs = n_in,
	             .n_outputs = n_out, .inputs = inputs, .outputs = outputs,
	             .n_attrs = call->n_attrs, .attrs = call->attrs};
	capture_diags();
	int rc = op->parse ? op->parse(&n) : 0;
	mc_infer_ctx ic = {.node = &n, .n_in = n_in, .n_out = n_out, .in = pin, .out = pout};
	if (!rc)
		rc = op->infer(&ic);
	for (int k = 0; !rc && k < n_out; k++) {
		if (!pout[k])
			continue;
		cr_assert(vout[k].typed, "output %d not typed", k);
		out[k] = mc_tensor_new(vout[k].dtype, &vout[k].shape);
		cr_assert_not_null(out[k]);
	}
	mc_eval_ctx ec = {.node = &n, .n_in = n_in, .n_out = n_out,
	                  .in = (const mc_tensor *const *)in, .out = out};
	if (!rc)
		rc = op->eval(&ec);
	free(n.params);
	if (rc)
		for (int k = 0; k < n_out; k++) {
			mc_tensor_free(out[k]);
			out[k] = NULL;
		}
	return rc;
}

int run_op(const op_call *call, mc_tensor *const *in, int n_in, mc_tensor **out, int n_out)
{
	return run_named(call, "t", NULL, in, n_in, out, n_out);
}

mc_tensor *run_out(const op_call *call, mc_tensor **in, int n_in, int n_out, int which)
{
	mc_tensor *out[OH_MAX_IO];
	cr_assert(which >= 0 && which < n_out, "output %d of %d", which, n_out);
	int rc = run_op(call, in, n_in, out, n_out);
	free_all(in, n_in);
	if (rc)
		return NULL;
	for (int k = 0; k < n_out; k++)
		if (k != which)
			mc_tensor_free(out[k]);
	return out[which];
}

mc_tensor *run_one(const op_call *call, mc_tensor **in, int n_in)
{
	return run_out(call, in, n_in, 1, 0);
}

void node_init(test_node *t, const char *op, int opset)
{
	memset(t, 0, sizeof *t);
	t->call = (op_call){.op = op, .opset = opset, .attrs = t->attrs, .runtime_inputs = ~0u};
}

void node_attr(test_node *t, mc_attr a)
{
	cr_assert_lt(t->call.n_attrs, OH_MAX_ATTRS);
	t->attrs[t->call.n_attrs++] = a;
}

int run_node(test_node *t, mc_tensor *const *in, int n_in, int n_out, mc_tensor **out)
{
	return run_named(&t->call, "n", NULL, in, n_in, out, n_out);
}

int run_node_konst(test_node *t, mc_tensor *const *in, int n_in, int n_out, mc_tensor **out)
{
	op_call call = t->call;
	call.runtime_inputs = 0;
	return run_named(&call, "n", NULL, in, n_in, out, n_out);
}

int run_node_want(test_node *t, mc_tensor *const *in, int n_in, const bool *want, int n_out,
                  mc_tensor **out)
{
	return run_named(&t->call, "n", want, in, n_in, out, n_out);
}

/* ---- checks ---- */

void expect_shape(const mc_tensor *t, int rank, const int64_t *dims)
{
	cr_assert_eq(t->shape.rank, rank, "rank %d, expected %d", t->shape.rank, rank);
	for (int d = 0; d < rank; d++)
		cr_assert_eq(t->shape.dims[d], dims[d], "dim %d is %lld, expected %lld", d,
		             (long long)t->shape.dims[d], (long long)dims[d]);
}

void expect_values(const mc_tensor *t, const double *want, size_t n, double tol)
{
	cr_assert_eq(t->numel, n, "got %zu elements, expected %zu", t->numel, n);
	for (size_t i = 0; i < n; i++) {
		double got = mc_get_f(t, i);
		if (isinf(want[i]))
			cr_assert(got == want[i], "element %zu: got %g, expected %g", i, got, want[i]);
		else
			cr_assert(fabs(got - want[i]) <= tol, "element %zu: got %.9g, expected %.9g", i,
			          got, want[i]);
	}
}

void expect_ints(const mc_tensor *t, const int64_t *want, size_t n)
{
	cr_assert_eq(t->numel, n, "got %zu elements, expected %zu", t->numel, n);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(mc_get_i(t, i), want[i], "element %zu: got %lld, expected %lld", i,
		             (long long)mc_get_i(t, i), (long long)want[i]);
}

void expect_error(const char *needle)
{
	cr_assert(strstr(last_error, needle), "message '%s' lacks '%s'", last_error, needle);
	cr_assert(strstr(last_error, "node 'n'"), "message '%s' does not name the node",
	          last_error);
}
