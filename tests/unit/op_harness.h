/* Test support for the op unit tests (test_ops_*.c): one registry entry run
 * by hand on tensors (parse, infer, allocate the outputs, eval), tensor and
 * attribute builders, the last diagnostic captured, and the checks the op
 * tests share. Assertions here fail the calling test (Criterion). */
#ifndef OP_HARNESS_H
#define OP_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "modelc.h"

/* Inputs or outputs of one node run by the harness, at most. */
#define OH_MAX_IO 10
/* Attributes of a test_node, at most. */
#define OH_MAX_ATTRS 8

/* ---- diagnostics ---- */
/* The last diagnostic line captured; "" when none since capture_diags. */
extern char last_error[1024];
/* Forgets last_error and captures every later diagnostic into it (also a
 * TestSuite .init, for tests that check messages of other calls). */
void capture_diags(void);

/* ---- shapes and tensors ---- */
mc_shape shape(int rank, const int64_t *dims);
/* A tensor of dtype t filled from vals through mc_set_f; zeros when vals
 * is NULL. dims may be NULL for a scalar. */
mc_tensor *tensor(mc_dtype t, int rank, const int64_t *dims, const double *vals);
void free_all(mc_tensor **t, int n);

#define S0(t, v) tensor(t, 0, NULL, (double[]){v})
#define T1(t, a, ...) tensor(t, 1, (int64_t[]){a}, (double[]){__VA_ARGS__})
#define T2(t, a, b, ...) tensor(t, 2, (int64_t[]){a, b}, (double[]){__VA_ARGS__})
#define T3(t, a, b, c, ...) tensor(t, 3, (int64_t[]){a, b, c}, (double[]){__VA_ARGS__})
#define T4(t, a, b, c, d, ...) tensor(t, 4, (int64_t[]){a, b, c, d}, (double[]){__VA_ARGS__})

/* ---- attributes: they point at the caller's name, string and arrays ---- */
mc_attr attr_int(const char *name, int64_t v);
mc_attr attr_float(const char *name, double v);
mc_attr attr_string(const char *name, const char *v);
mc_attr attr_ints(const char *name, const int64_t *v, size_t n);
mc_attr attr_floats(const char *name, const float *v, size_t n);
mc_attr attr_strings(const char *name, const char *const *v, size_t n);

/* ---- running one node ---- */
typedef struct {
	const char *op;
	int opset;
	mc_attr *attrs;
	int n_attrs;
	unsigned runtime_inputs; /* bit k: input k is not known at compile time */
} op_call;

/* runtime_inputs where only the inputs of bit mask are compile-time constants. */
#define KONST_ONLY(mask) (~(unsigned)(mask))

/* Runs one node named "t" through the registry: parse, infer (inputs in[k]
 * NULL are omitted; the others are constants unless marked runtime), then
 * eval into freshly allocated outputs. 0 on success, out[k] then a new
 * tensor for each output (the caller frees); otherwise every out[k] is NULL
 * and the message in last_error. */
int run_op(const op_call *call, mc_tensor *const *in, int n_in, mc_tensor **out, int n_out);
/* Runs call with n_out outputs and returns output `which` (the others are
 * freed), or NULL after an error. Frees the inputs. */
mc_tensor *run_out(const op_call *call, mc_tensor **in, int n_in, int n_out, int which);
/* run_out of a node with one output. */
mc_tensor *run_one(const op_call *call, mc_tensor **in, int n_in);

/* A node named "n" whose attributes are added one by one; call.attrs points
 * at attrs. */
typedef struct {
	op_call call;
	mc_attr attrs[OH_MAX_ATTRS];
} test_node;

void node_init(test_node *t, const char *op, int opset);
void node_attr(test_node *t, mc_attr a);
/* run_op of the node, its inputs not known at compile time (as a model's
 * runtime inputs). */
int run_node(test_node *t, mc_tensor *const *in, int n_in, int n_out, mc_tensor **out);
/* The same with every input known at compile time. */
int run_node_konst(test_node *t, mc_tensor *const *in, int n_in, int n_out, mc_tensor **out);
/* run_node with output k omitted where want[k] is false. */
int run_node_want(test_node *t, mc_tensor *const *in, int n_in, const bool *want, int n_out,
                  mc_tensor **out);

/* ---- checks ---- */
void expect_shape(const mc_tensor *t, int rank, const int64_t *dims);
/* n elements within tol of want (an infinite want must be met exactly). */
void expect_values(const mc_tensor *t, const double *want, size_t n, double tol);
/* n elements equal to want, read as int64. */
void expect_ints(const mc_tensor *t, const int64_t *want, size_t n);
/* last_error holds needle and names the test_node ('n'). */
void expect_error(const char *needle);

#define EXPECT_INTS(t, ...) expect_ints((t), (int64_t[]){__VA_ARGS__}, \
	sizeof (int64_t[]){__VA_ARGS__} / sizeof(int64_t))
#define EXPECT_FLOATS(t, ...) expect_values((t), (double[]){__VA_ARGS__}, \
	sizeof (double[]){__VA_ARGS__} / sizeof(double), 1e-6)

#endif
