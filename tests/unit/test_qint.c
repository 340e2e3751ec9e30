/* int8: the integer ops of quantized regions (libcore/ops/qint.h) and the
 * quantize pass (freezing/quantize.c).
 *
 *  - mc_qi_multiplier / mc_qi_multiplier2: a real factor as a 31-bit
 *    multiplier and a shift, and the refusals;
 *  - mc_qi_rshift: round half to even, against nearbyint in double;
 *  - QDQ models built here: the pass makes the integer op (no float op
 *    left), the compiled code matches the interpreter bit for bit (verify,
 *    rtol 0, atol 0), and the integer reference stays within one output
 *    quantum of the float QDQ graph it replaces;
 *  - --quantized-io: the header's dtype, scale and zero point, and the code
 *    run on int8 inputs over the whole range;
 *  - a scale of 0, -1, NaN or inf is an error naming the node. */
#include <criterion/criterion.h>
#include <fenv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile_helpers.h"
#include "../../freezing/freezing.h"
#include "../../libcore/ops/qint.h"

TestSuite(qint, .init = diag_capture);

/* ---- mc_qi_multiplier ---- */

static double approx(int32_t mult, int32_t shift)
{
	return ldexp((double)mult, -shift);
}

static void check_multiplier(double real)
{
	int32_t m = -1, s = -1;
	cr_assert(mc_qi_multiplier(real, &m, &s), "refused %.17g", real);
	cr_assert(s >= 1 && s <= 62, "%.17g: shift %d", real, s);
	if (s < 62)
		cr_assert(m >= (1 << 30),
		          "%.17g: multiplier %d not in [2^30, 2^31) (shift %d)", real, m, s);
	else
		cr_assert(m >= 0, "%.17g: multiplier %d", real, m);
	double err = fabs(approx(m, s) - real);
	/* within 2^-30 relative; a tiny factor (shift 62) within half a unit */
	cr_assert(err <= ldexp(real, -30) || (s == 62 && err <= ldexp(1, -63)),
	          "%.17g: %d * 2^-%d = %.17g", real, m, s, approx(m, s));
}

Test(qint, multiplier_decades)
{
	for (int e = -9; e <= 9; e++)
		for (int k = 1; k <= 9; k += 4) /* 1e, 5e, 9e (below 2^30) */
			if (k * pow(10, e) < ldexp(1, 30))
				check_multiplier(k * pow(10, e));
	const double more[] = {0.5, 1, 2, 0.25, 0.75, ldexp(1, 29), ldexp(1, 29) * 1.5,
	                       nextafter(1, 0), nextafter(0.5, 0), nextafter(1, 2), 0.0078125,
	                       1.0 / 3, 0.1, 0.003921568627, 1e-12, 1e-15, 1e-18};
	for (size_t i = 0; i < sizeof more / sizeof *more; i++)
		check_multiplier(more[i]);
	/* exact powers of two: multiplier 2^30 */
	int32_t m, s;
	cr_assert(mc_qi_multiplier(0.5, &m, &s));
	cr_assert_eq(m, 1 << 30);
	cr_assert_eq(s, 31);
	cr_assert(mc_qi_multiplier(1, &m, &s));
	cr_assert_eq(m, 1 << 30);
	cr_assert_eq(s, 30);
	cr_assert(mc_qi_multiplier(ldexp(1, 29), &m, &s));
	cr_assert_eq(m, 1 << 30);
	cr_assert_eq(s, 1);
	/* a factor below 2^-32 keeps shift 62 and fewer multiplier bits */
	cr_assert(mc_qi_multiplier(1e-12, &m, &s));
	cr_assert_eq(s, 62);
	cr_assert(m > 0 && m < (1 << 30), "%d", m);
}

Test(qint, multiplier_refusals)
{
	const double bad[] = {0, -0.0, -1, -1e-9, NAN, -NAN, INFINITY, -INFINITY, ldexp(1, 30),
	                      ldexp(1, 30) * 2, 5e9, 1e10, 1e300};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		int32_t m = 7, s = 7;
		cr_assert_not(mc_qi_multiplier(bad[i], &m, &s), "accepted %g", bad[i]);
		int32_t ma, mb, sh;
		cr_assert_not(mc_qi_multiplier2(bad[i], 0.5, &ma, &mb, &sh), "multiplier2 accepted a %g", bad[i]);
		cr_assert_not(mc_qi_multiplier2(0.5, bad[i], &ma, &mb, &sh), "multiplier2 accepted b %g", bad[i]);
	}
}

/* The header promises a multiplier for every finite positive real below
 * 2^30: the largest double below 2^30 too. */
Test(qint, multiplier_just_below_2p30)
{
	int32_t m, s;
	double r = nextafter(ldexp(1, 30), 0);
	cr_expect(mc_qi_multiplier(r, &m, &s), "refused %.17g, below 2^30", r);
	r = ldexp(1, 30) - 1;
	cr_assert(mc_qi_multiplier(r, &m, &s), "refused %.17g", r);
	cr_assert_eq(s, 1);
}

Test(qint, multiplier2_pairs)
{
	const double v[] = {1e-7, 3e-4, 0.01, 0.37, 0.5, 1, 1.7, 2, 3.14159, 100, 12345.678};
	size_t n = sizeof v / sizeof *v;
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++) {
			double a = v[i], b = v[j], big = a > b ? a : b;
			int32_t ma = -1, mb = -1, sh = -1;
			cr_assert(mc_qi_multiplier2(a, b, &ma, &mb, &sh), "refused %g, %g", a, b);
			cr_assert(sh >= 1 && sh <= 62);
			int32_t mbig = a >= b ? ma : mb, m1, s1;
			/* the larger factor gets the shift mc_qi_multiplier gives it */
			cr_assert(mc_qi_multiplier(big, &m1, &s1));
			cr_assert_eq(sh, s1, "%g, %g: shift %d, %d alone", a, b, sh, s1);
			cr_assert_eq(mbig, m1, "%g, %g", a, b);
			cr_assert(ma >= 0 && mb >= 0);
			/* each multiplier is its factor at that shift, rounded */
			cr_assert_leq(fabs((double)ma - ldexp(a, sh)), 0.5, "%g, %g: a %d", a, b, ma);
			cr_assert_leq(fabs((double)mb - ldexp(b, sh)), 0.5, "%g, %g: b %d", a, b, mb);
		}
}

/* ---- mc_qi_rshift ---- */

Test(qint, rshift_ties_to_even)
{
	static const struct { int64_t v, s, want; } c[] = {
		{3, 1, 2}, {5, 1, 2}, {-3, 1, -2}, {-5, 1, -2}, {1, 1, 0}, {-1, 1, 0},
		{7, 2, 2}, {-7, 2, -2}, {6, 2, 2}, {-6, 2, -2}, {2, 2, 0}, {-2, 2, 0},
		{10, 2, 2}, {-10, 2, -2}, {14, 2, 4}, {-14, 2, -4}, {9, 2, 2}, {-9, 2, -2},
		{11, 2, 3}, {-11, 2, -3}, {0, 5, 0}, {48, 5, 2}, {-48, 5, -2}, {16, 5, 0},
		{-16, 5, 0}, {17, 5, 1}, {-17, 5, -1},
		{((int64_t)3 << 39), 40, 2}, {-((int64_t)3 << 39), 40, -2},
		{((int64_t)5 << 39), 40, 2}, {-((int64_t)5 << 39), 40, -2},
		{((int64_t)1 << 61) + ((int64_t)1 << 60), 61, 2},
	};
	for (size_t i = 0; i < sizeof c / sizeof *c; i++)
		cr_assert_eq(mc_qi_rshift(c[i].v, c[i].s), c[i].want, "%lld >> %lld: %lld, want %lld",
		             (long long)c[i].v, (long long)c[i].s,
		             (long long)mc_qi_rshift(c[i].v, c[i].s), (long long)c[i].want);
}

static uint64_t lcg64(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s;
}

Test(qint, rshift_matches_nearbyint)
{
	uint64_t seed = 12345;
	cr_assert_eq(fegetround(), FE_TONEAREST);
	for (int64_t s = 1; s <= 40; s++) {
		for (int i = 0; i < 4000; i++) {
			uint64_t r = lcg64(&seed);
			int bits = 1 + (int)((r >> 58) % 40); /* magnitudes of every size below 2^40 */
			int64_t v = (int64_t)((r >> 8) & (((uint64_t)1 << bits) - 1));
			if (i % 4 == 1) /* a tie: odd or even quotient */
				v = ((v >> s) << s) | ((int64_t)1 << (s - 1));
			if (i & 2)
				v = -v;
			int64_t want = (int64_t)nearbyint(ldexp((double)v, (int)-s));
			cr_assert_eq(mc_qi_rshift(v, s), want, "%lld >> %lld: %lld, nearbyint %lld",
			             (long long)v, (long long)s, (long long)mc_qi_rshift(v, s),
			             (long long)want);
		}
	}
}

Test(qint, scale_is_product_then_rshift)
{
	/* 100 * 0.75 = 75; 3 * 0.5 = 1.5 -> 2; 5 * 0.5 = 2.5 -> 2; -5 * 0.5 -> -2 */
	int32_t m, s;
	cr_assert(mc_qi_multiplier(0.75, &m, &s));
	cr_assert_eq(mc_qi_scale(100, m, s), 75);
	cr_assert(mc_qi_multiplier(0.5, &m, &s));
	cr_assert_eq(mc_qi_scale(3, m, s), 2);
	cr_assert_eq(mc_qi_scale(5, m, s), 2);
	cr_assert_eq(mc_qi_scale(-5, m, s), -2);
	cr_assert_eq(mc_qi_scale(-7, m, s), -4);
	/* |acc| up to 2^31 with a 31-bit multiplier does not overflow */
	cr_assert(mc_qi_multiplier(nextafter(1, 0), &m, &s));
	cr_assert_eq(mc_qi_scale(INT32_MAX, m, s), INT32_MAX);
	cr_assert_eq(mc_qi_scale(INT32_MIN, m, s), INT32_MIN);
}

/* ---- building QDQ models ---- */

static uint32_t lcg_state;

static int32_t lcg_int(int32_t lo, int32_t hi)
{
	lcg_state = lcg_state * 1664525u + 1013904223u;
	return lo + (int32_t)((lcg_state >> 8) % (uint32_t)(hi - lo + 1));
}

static void count_dims(const char *dims, size_t *n)
{
	*n = 1;
	for (const char *p = dims; *p;) {
		char *end;
		long d = strtol(p, &end, 10);
		*n *= (size_t)d;
		p = *end == ',' ? end + 1 : end;
	}
}

/* An int8 (or uint8) initializer of values in [lo, hi] from the LCG. */
static void init_q(mb *b, Onnx__GraphProto *g, const char *name, int dtype, const char *dims,
                   int lo, int hi)
{
	size_t n;
	count_dims(dims, &n);
	int64_t *v = malloc(n * sizeof *v);
	for (size_t i = 0; i < n; i++)
		v[i] = lcg_int(lo, hi);
	mb_init_ints(b, g, name, dtype, dims, v, n);
	free(v);
}

static void init_scalar_f(mb *b, Onnx__GraphProto *g, const char *name, float v)
{
	mb_init_floats(b, g, name, "", &v, 1);
}

static void init_scalar_q(mb *b, Onnx__GraphProto *g, const char *name, int dtype, int64_t v)
{
	mb_init_ints(b, g, name, dtype, "", &v, 1);
}

/* x -> Q -> DQ -> name: a quantized activation (scale, zero point named
 * name_s, name_z). */
static void qdq_input(mb *b, Onnx__GraphProto *g, const char *x, const char *shape,
                      const char *name, int dtype, float scale, int64_t zp)
{
	char s[64], z[64], q[64], in[256];
	snprintf(s, sizeof s, "%s_s", name);
	snprintf(z, sizeof z, "%s_z", name);
	snprintf(q, sizeof q, "%s_q", name);
	mb_input(b, g, x, MC_FLOAT, shape);
	init_scalar_f(b, g, s, scale);
	init_scalar_q(b, g, z, dtype, zp);
	snprintf(in, sizeof in, "%s,%s,%s", x, s, z);
	mb_node(b, g, "QuantizeLinear", "q_in", in, q);
	snprintf(in, sizeof in, "%s,%s,%s", q, s, z);
	mb_node(b, g, "DequantizeLinear", "dq_in", in, name);
}

/* v -> Q -> DQ -> y, the graph's output. */
static void qdq_output(mb *b, Onnx__GraphProto *g, const char *v, int dtype, float scale,
                       int64_t zp, const char *y)
{
	char in[256];
	init_scalar_f(b, g, "y_s", scale);
	init_scalar_q(b, g, "y_z", dtype, zp);
	snprintf(in, sizeof in, "%s,y_s,y_z", v);
	mb_node(b, g, "QuantizeLinear", "q_out", in, "y_q");
	mb_node(b, g, "DequantizeLinear", "dq_out", "y_q,y_s,y_z", y);
	mb_output(b, g, y);
}

/* Nonzero: every channel's weight scale, for a test that needs exact
 * factors (reset by it). */
static float every_weight_scale;

/* Per-channel int8 weights W [dims] (channels along axis) dequantized into
 * "w"; scales ws[c] = 0.004 .. 0.02 (or every_weight_scale); weight zero
 * points 0. */
static void weights(mb *b, Onnx__GraphProto *g, const char *dims, int64_t channels, int axis,
                    float *ws)
{
	init_q(b, g, "W", MC_INT8, dims, -127, 127);
	char cd[32];
	snprintf(cd, sizeof cd, "%lld", (long long)channels);
	for (int64_t c = 0; c < channels; c++)
		ws[c] = every_weight_scale ? every_weight_scale : 0.004f + 0.016f * (float)lcg_int(0, 1000) / 1000.0f;
	mb_init_floats(b, g, "W_s", cd, ws, (size_t)channels);
	int64_t *z = calloc((size_t)channels, sizeof *z);
	mb_init_ints(b, g, "W_z", MC_INT8, cd, z, (size_t)channels);
	free(z);
	Onnx__NodeProto *n = mb_node(b, g, "DequantizeLinear", "dq_w", "W,W_s,W_z", "w");
	mb_attr_int(b, n, "axis", axis);
}

/* An int32 bias B [channels] at scale sx * ws[c], dequantized into "bias". */
static void bias(mb *b, Onnx__GraphProto *g, int64_t channels, float sx, const float *ws)
{
	char cd[32];
	snprintf(cd, sizeof cd, "%lld", (long long)channels);
	init_q(b, g, "B", MC_INT32, cd, -3000, 3000);
	float *bs = malloc((size_t)channels * sizeof *bs);
	for (int64_t c = 0; c < channels; c++)
		bs[c] = sx * ws[c];
	mb_init_floats(b, g, "B_s", cd, bs, (size_t)channels);
	free(bs);
	Onnx__NodeProto *n = mb_node(b, g, "DequantizeLinear", "dq_b", "B,B_s", "bias");
	mb_attr_int(b, n, "axis", 0);
}

/* ---- checking ---- */

/* b's graph after import, inference and the quantize pass. */
static mc_graph *quantized(mb *b)
{
	mc_graph *g = mb_import(b, ".", NULL);
	cr_assert_not_null(g, "%s", diag_all());
	cr_assert_eq(mc_infer_graph(g), 0, "%s", diag_all());
	cr_assert_gt(mc_pass_quantize(g, NULL), 0, "the quantize pass changed nothing: %s", diag_all());
	return g;
}

static int count_op(const mc_graph *g, mc_opid id)
{
	int k = 0;
	for (int i = 0; i < g->n_nodes; i++)
		k += g->nodes[i].id == id;
	return k;
}

/* The first node of op id. */
static const mc_node *node_of(const mc_graph *g, mc_opid id)
{
	for (int i = 0; i < g->n_nodes; i++)
		if (g->nodes[i].id == id)
			return &g->nodes[i];
	cr_assert_fail("no %s node", mc_op_name(id));
	return NULL;
}

/* After the pass: `count` nodes of `want` and none of the float ops listed
 * (MC_OP_NONE ends the list); the only DQ/Q left are those at the graph's
 * input and output (at most one QiQuantize in, one DQ out per output). */
static void expect_ops(mb *b, mc_opid want, int count, const mc_opid *gone)
{
	mc_graph *g = quantized(b);
	char *dump;
	size_t len;
	FILE *f = open_memstream(&dump, &len);
	mc_graph_dump(g, f);
	fclose(f);
	cr_expect_eq(count_op(g, want), count, "%d %s nodes, want %d:\n%s", count_op(g, want),
	             mc_op_name(want), count, dump);
	for (int k = 0; gone && gone[k] != MC_OP_NONE; k++)
		cr_expect_eq(count_op(g, gone[k]), 0, "a %s node is left:\n%s", mc_op_name(gone[k]), dump);
	cr_expect_eq(count_op(g, MC_OP_QuantizeLinear), 0, "a QuantizeLinear is left:\n%s", dump);
	cr_expect_leq(count_op(g, MC_OP_DequantizeLinear), g->n_outputs, "DQ nodes left:\n%s", dump);
	free(dump);
	mc_graph_free(g);
}

/* mc_verify of b's model with rtol 0, atol 0: the compiled code and the
 * interpreter (running the integer ops) agree bit for bit. Random float
 * inputs uniform in [-scale, scale]. b stays. */
/* A new temporary directory holding b's model as model.onnx (its path in
 * path[n]); the caller removes it. */
static char *written_model(mb *b, char *path, size_t n)
{
	char *dir = make_temp_dir();
	snprintf(path, n, "%s/model.onnx", dir);
	cr_assert_eq(mb_write(b, path), 0);
	return dir;
}

/* The compile options of these tests' models: named t; isa, target as
 * --isa and --target (NULL: the defaults). */
static mc_compile_opts model_opts(bool quantized_io, const char *isa, const char *target)
{
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.quantized_io = quantized_io;
	o.isa = isa;
	o.target = target ? target : "c";
	return o;
}

static int verify_exact_on(mb *b, double scale, bool quantized_io, const char *isa, const char *target)
{
	/* x86 vector ISAs build for this machine (the caller checked it has them) */
	bool x86 = isa && (!strcmp(isa, "avx2") || !strcmp(isa, "avx512"));
	char path[4200];
	char *dir = written_model(b, path, sizeof path);
	mc_compile_opts o = model_opts(quantized_io, isa, target);
	mc_verify_opts v;
	mc_verify_opts_init(&v);
	v.rtol = 0;
	v.atol = 0;
	v.scale = scale;
	v.seed = 7;
	v.keep = getenv("QINT_KEEP") != NULL; /* debugging: leave the compiled model */
	v.cflags = x86 ? "-std=c99 -O1 -march=native -Wall -Wextra -Werror" : "-std=c99 -O1 -Wall -Wextra -Werror";
	int rc = mc_verify(path, &o, &v);
	rm_tree(dir);
	free(dir);
	return rc;
}

static int verify_exact(mb *b, double scale, bool quantized_io)
{
	return verify_exact_on(b, scale, quantized_io, NULL, NULL);
}

/* Bit-exact on the generic ISA and on --isa cortex-m, whose integer
 * kernels (aot/kern_qdual.c) pair 16-bit products: the C target's
 * portable modelc_smlad here and, where modelc has LLVM, the llvm
 * target's expansion of the same IR; and on the x86 vector ISAs this
 * machine runs, whose integer kernels (aot/kern_qvec.c) compute on i32
 * vectors. */
#if defined(__SANITIZE_ADDRESS__)
/* Only generates the code of b for isa and target (NULL: c): modelc's
 * side of a build, for CI's sanitized pass. */
static int generate_on(mb *b, bool quantized_io, const char *isa, const char *target)
{
	char path[4200], out[4200];
	char *dir = written_model(b, path, sizeof path);
	snprintf(out, sizeof out, "%s/out", dir);
	mc_compile_opts o = model_opts(quantized_io, isa, target);
	o.no_stack_usage = true;
	int rc = mc_compile(path, out, &o);
	rm_tree(dir);
	free(dir);
	return rc;
}
#endif

static mc_tensor **random_inputs(const mc_graph *g, double scale);
static void free_tensors(mc_tensor **t, int n);

/* The reference outputs of the model at path with --quantized-io, on int8
 * (uint8) inputs over the whole range from the LCG at 99; its graph and
 * inputs in *g, *in (the caller frees all three). */
static mc_tensor **quantized_io_reference(const char *path, mc_graph **g, mc_tensor ***in)
{
	*g = mc_import_file(path, NULL);
	cr_assert_not_null(*g, "%s", diag_all());
	cr_assert_eq(mc_infer_graph(*g), 0);
	cr_assert_eq(mc_quantize_reference(*g, true), 0);
	lcg_state = 99;
	*in = random_inputs(*g, 2.0);
	mc_tensor **want = calloc((size_t)(*g)->n_outputs + 1, sizeof *want);
	cr_assert_eq(mc_interp_run(*g, *in, want, NULL), 0, "%s", diag_all());
	return want;
}

#if !defined(__SANITIZE_ADDRESS__)
/* b's model with --isa cortex-m --quantized-io --io-in-arena, built for the Cortex-M4
 * and run on the emulated board (qemu-system-arm -M mps2-an386), against
 * the reference on int8 inputs over the whole range, bit for bit: the
 * runtime's hand-scheduled micro-kernels (modelc_rt.h, DOT2_TILES), which
 * the host builds do not run. 0: equal (or no board here). */
static int board_exact(mb *b)
{
	if (!have_board())
		return 0;
	char path[4200], out[4300];
	char *dir = written_model(b, path, sizeof path);
	snprintf(out, sizeof out, "%s/out", dir);
	mc_compile_opts o = model_opts(true, "cortex-m", NULL);
	o.no_stack_usage = true;
	/* the input in the arena, copied there: a one-row matrix product's
	 * pairs then lie over it (the runtime's S8_PAIRS in place) */
	o.io_in_arena = true;
	cr_assert_eq(mc_compile(path, out, &o), 0, "%s", diag_all());
	mc_graph *g;
	mc_tensor **in, **want = quantized_io_reference(path, &g, &in);
	mc_tensor **got = calloc((size_t)g->n_outputs + 1, sizeof *got);
	for (int k = 0; k < g->n_outputs; k++)
		got[k] = mc_tensor_new(want[k]->dtype, &want[k]->shape);
	int rc = run_compiled(out, in, g->n_inputs, g->n_outputs, true, got);
	for (int k = 0; k < g->n_outputs && rc == 0; k++) {
		size_t bad = 0;
		for (size_t i = 0; i < want[k]->nbytes; i++)
			bad += ((const unsigned char *)got[k]->data)[i] != ((const unsigned char *)want[k]->data)[i];
		if (bad)
			rc = -1;
		cr_expect_eq(bad, 0, "output %d: %zu of %zu bytes differ on the board", k, bad, want[k]->nbytes);
	}
	free_tensors(got, g->n_outputs);
	free_tensors(in, g->n_inputs);
	free_tensors(want, g->n_outputs);
	mc_graph_free(g);
	if (rc == 0 || !getenv("QINT_KEEP"))
		rm_tree(dir);
	free(dir);
	return rc;
}
#endif

static void verify_exact_isas(mb *b, double scale, bool quantized_io)
{
	cr_expect_eq(verify_exact(b, scale, quantized_io), 0, "%s", diag_all());
#if defined(__SANITIZE_ADDRESS__)
	/* CI's sanitized pass: modelc generates the cortex-m code (C and llvm)
	 * under the sanitizers; building and running it tests the generated
	 * code, which the first pass did */
	cr_expect_eq(generate_on(b, quantized_io, "cortex-m", NULL), 0, "cortex-m: %s", diag_all());
	if (mc_llvm_available())
		cr_expect_eq(generate_on(b, quantized_io, "cortex-m", "llvm"), 0, "llvm cortex-m: %s", diag_all());
#else
	cr_expect_eq(verify_exact_on(b, scale, quantized_io, "cortex-m", NULL), 0, "cortex-m: %s", diag_all());
	if (mc_llvm_available())
		cr_expect_eq(verify_exact_on(b, scale, quantized_io, "cortex-m", "llvm"), 0, "llvm cortex-m: %s",
		             diag_all());
	cr_expect_eq(board_exact(b), 0, "cortex-m on the board: %s", diag_all());
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__SANITIZE_ADDRESS__)
	/* (not in CI's sanitized pass: these test the generated vector code,
	 * which the first pass did; modelc's own memory use is the generic and
	 * cortex-m builds' above) 8 lanes (DOT2 pairs) through the C target, 16 (DOT4 quads where the
	 * machine has VNNI) through llvm's, or 8 again where it has no AVX-512:
	 * both widths and both groupings, two builds (CI's time) */
	if (__builtin_cpu_supports("avx2"))
		cr_expect_eq(verify_exact_on(b, scale, quantized_io, "avx2", NULL), 0, "avx2: %s", diag_all());
	const char *wide = !__builtin_cpu_supports("avx512vl") ? "avx2"
	                   : __builtin_cpu_supports("avx512vnni") ? "avx512-vnni" : "avx512";
	if (mc_llvm_available() && __builtin_cpu_supports("avx2"))
		cr_expect_eq(verify_exact_on(b, scale, quantized_io, wide, "llvm"), 0, "llvm %s: %s", wide, diag_all());
#endif
}

/* Float inputs uniform in [-scale, scale] from the LCG. */
static mc_tensor **random_inputs(const mc_graph *g, double scale)
{
	mc_tensor **in = calloc((size_t)g->n_inputs + 1, sizeof *in);
	for (int i = 0; i < g->n_inputs; i++) {
		const mc_value *v = &g->values[g->inputs[i]];
		in[i] = mc_tensor_new(v->dtype, &v->shape);
		cr_assert_not_null(in[i]);
		for (size_t k = 0; k < in[i]->numel; k++) {
			if (mc_dtype_is_float(v->dtype))
				mc_set_f(in[i], k, scale * (double)lcg_int(-1000000, 1000000) / 1e6);
			else if (v->dtype == MC_INT8)
				mc_set_i(in[i], k, lcg_int(-128, 127));
			else
				mc_set_i(in[i], k, lcg_int(0, 255));
		}
	}
	return in;
}

static void free_tensors(mc_tensor **t, int n)
{
	for (int i = 0; i < n; i++)
		mc_tensor_free(t[i]);
	free(t);
}

/* The integer reference (mc_quantize_reference) against the float QDQ
 * graph it replaces, on the same inputs: within `quanta` output scales
 * (the float graph rounds its own way: a sum landing near a half may go
 * either side). Also that the outputs are not constant (the scales make
 * the values cover the range). b stays. */
static void close_to_float(mb *b, double scale, double out_scale, double quanta)
{
	mc_graph *fg = mb_import(b, ".", NULL), *ig = mb_import(b, ".", NULL);
	cr_assert(fg && ig, "%s", diag_all());
	cr_assert_eq(mc_infer_graph(fg), 0, "%s", diag_all());
	cr_assert_eq(mc_infer_graph(ig), 0, "%s", diag_all());
	cr_assert_eq(mc_quantize_reference(ig, false), 0, "%s", diag_all());
	mc_tensor **in = random_inputs(fg, scale);
	mc_tensor **fo = calloc((size_t)fg->n_outputs + 1, sizeof *fo);
	mc_tensor **io = calloc((size_t)fg->n_outputs + 1, sizeof *io);
	cr_assert_eq(mc_interp_run(fg, in, fo, NULL), 0, "%s", diag_all());
	cr_assert_eq(mc_interp_run(ig, in, io, NULL), 0, "%s", diag_all());
	for (int k = 0; k < fg->n_outputs; k++) {
		double err = 0, lo = INFINITY, hi = -INFINITY;
		size_t worst = 0;
		for (size_t i = 0; i < fo[k]->numel; i++) {
			double a = mc_get_f(fo[k], i), c = mc_get_f(io[k], i);
			if (fabs(a - c) > err)
				err = fabs(a - c), worst = i;
			lo = fmin(lo, a);
			hi = fmax(hi, a);
		}
		cr_expect_leq(err, quanta * out_scale * (1 + 1e-6),
		              "output %d: integer %g, float %g at %zu (%g quanta)", k,
		              mc_get_f(io[k], worst), mc_get_f(fo[k], worst), worst, err / out_scale);
		cr_expect_gt(hi - lo, 8 * out_scale, "output %d covers only [%g, %g]", k, lo, hi);
		/* many different values: not mostly clamped */
		size_t distinct = 0;
		for (size_t i = 0; i < fo[k]->numel; i++) {
			size_t j = 0;
			while (j < i && mc_get_f(fo[k], j) != mc_get_f(fo[k], i))
				j++;
			distinct += j == i;
		}
		size_t want = fo[k]->numel / 4 < 16 ? fo[k]->numel / 4 : 16;
		cr_expect_geq(distinct, want, "output %d: %zu different values in %zu", k, distinct,
		              fo[k]->numel);
	}
	free_tensors(in, fg->n_inputs);
	free_tensors(fo, fg->n_outputs);
	free_tensors(io, ig->n_outputs);
	mc_graph_free(fg);
	mc_graph_free(ig);
}

/* All three checks; frees b. */
static void check_model(mb *b, double in_scale, double out_scale, mc_opid want, int count,
                        const mc_opid *gone)
{
	expect_ops(b, want, count, gone);
	close_to_float(b, in_scale, out_scale, 1);
	if (want == MC_OP_QiConv || want == MC_OP_QiMatMul) /* the ops with kernels of their own */
		verify_exact_isas(b, in_scale, false);
	else
		cr_expect_eq(verify_exact(b, in_scale, false), 0, "%s", diag_all());
	mb_free(b);
}

static const mc_opid no_conv[] = {MC_OP_Conv, MC_OP_Relu, MC_OP_NONE};

/* ---- (a) Conv: per-channel int8 weights, int32 bias, Relu ---- */

/* x [1, cin, (h,) w] float -> Q/DQ (sx, dtype, zp) -> Conv(w [cout, cin/group,
 * k...], bias) -> Relu -> Q/DQ (sy). */
static mb *conv_model(const char *xshape, const char *wdims, int64_t cout, int64_t group,
                      int64_t pads, int64_t stride, int dtype, int64_t xzp, int64_t yzp,
                      float sx, float sy, bool relu)
{
	lcg_state = 2024;
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	qdq_input(b, g, "x", xshape, "xd", dtype, sx, xzp);
	float ws[256];
	weights(b, g, wdims, cout, 0, ws);
	bias(b, g, cout, sx, ws);
	Onnx__NodeProto *c = mb_node(b, g, "Conv", "conv", "xd,w,bias", relu ? "c" : "r");
	int nsp = 0;
	for (const char *p = xshape; *p; p++)
		nsp += *p == ',';
	nsp -= 1;
	int64_t pv[6] = {pads, pads, pads, pads, pads, pads}, sv[3] = {stride, stride, stride};
	mb_attr_ints(b, c, "pads", pv, (size_t)(2 * nsp));
	mb_attr_ints(b, c, "strides", sv, (size_t)nsp);
	mb_attr_int(b, c, "group", group);
	if (relu)
		mb_node(b, g, "Relu", "relu", "c", "r");
	qdq_output(b, g, "r", dtype, sy, yzp, "y");
	return b;
}

Test(qint, conv_per_channel_relu)
{
	mb *b = conv_model("1,3,7,7", "4,3,3,3", 4, 1, 1, 1, MC_INT8, 0, -128, 2.0f / 127, 0.05f, true);
	check_model(b, 2.0, 0.05, MC_OP_QiConv, 1, no_conv);
}

Test(qint, conv_stride2_no_relu)
{
	mb *b = conv_model("1,4,8,8", "6,4,3,3", 6, 1, 1, 2, MC_INT8, 3, -5, 2.0f / 127, 0.06f, false);
	check_model(b, 2.0, 0.06, MC_OP_QiConv, 1, no_conv);
}

Test(qint, conv_depthwise)
{
	mb *b = conv_model("1,5,6,6", "5,1,3,3", 5, 5, 1, 1, MC_INT8, 0, -128, 2.0f / 127, 0.02f, true);
	check_model(b, 2.0, 0.02, MC_OP_QiConv, 1, no_conv);
}

Test(qint, conv_1d)
{
	mb *b = conv_model("1,3,16", "4,3,5", 4, 1, 2, 1, MC_INT8, 0, -128, 2.0f / 127, 0.05f, true);
	check_model(b, 2.0, 0.05, MC_OP_QiConv, 1, no_conv);
}

/* Shapes for --isa cortex-m's paired kernels (aot/kern_qdual.c), which
 * check_model also verifies: channel pairs with an odd pixel count; an
 * odd channel count padded to even (a long reduction); one channel paired
 * along its taps (a first layer); uint8 with its zero point in the pairs
 * and in the padding. */
Test(qint, conv_pointwise_even_channels_odd_pixels)
{
	mb *b = conv_model("1,8,5,5", "12,8,1,1", 12, 1, 0, 1, MC_INT8, 0, -128, 2.0f / 127, 0.05f, true);
	check_model(b, 2.0, 0.05, MC_OP_QiConv, 1, no_conv);
}

/* 80 output channels: the 2 x 3 micro-kernel in chunks (20 tiles a call,
 * at most 192 sums), 7 pixels (a ragged block) */
Test(qint, conv_pointwise_channel_chunks)
{
	mb *b = conv_model("1,12,1,7", "80,12,1,1", 80, 1, 0, 1, MC_INT8, 3, -20, 2.0f / 127, 0.05f, true);
	check_model(b, 2.0, 0.05, MC_OP_QiConv, 1, no_conv);
}

Test(qint, conv_odd_channels_padded_pair)
{
	mb *b = conv_model("1,9,6,6", "6,9,3,3", 6, 1, 1, 1, MC_INT8, 2, -3, 2.0f / 127, 0.1f, false);
	check_model(b, 2.0, 0.1, MC_OP_QiConv, 1, no_conv);
}

Test(qint, conv_one_channel_stride2_taps_paired)
{
	mb *b = conv_model("1,1,9,7", "8,1,5,5", 8, 1, 2, 2, MC_INT8, -3, -128, 2.0f / 127, 0.02f, true);
	check_model(b, 2.0, 0.02, MC_OP_QiConv, 1, no_conv);
}

Test(qint, conv_uint8_even_channels_padding)
{
	mb *b = conv_model("1,4,6,6", "4,4,3,3", 4, 1, 1, 1, MC_UINT8, 100, 40, 2.0f / 255, 0.04f, false);
	check_model(b, 2.0, 0.04, MC_OP_QiConv, 1, no_conv);
}

/* Factors in [1/4, 1): shifts of 31 (products doubled before the split
 * requantisation, aot/kern_qconv.c) beside 32 and more; small inputs keep
 * the sums unsaturated. */
Test(qint, conv_factors_near_one)
{
	mb *b = conv_model("1,2,6,6", "6,2,1,1", 6, 1, 0, 1, MC_INT8, 0, 0, 2.0f / 127, 0.00032f, false);
	check_model(b, 0.05, 0.00032, MC_OP_QiConv, 1, no_conv);
}

/* Factors in [1/2, 2): shifts of 30 and below beside 31 and more, which
 * the split requantisation takes after scaling each sum by 2^(32 - s)
 * (aot/kern_qconv.c). */
Test(qint, conv_factors_above_one)
{
	mb *b = conv_model("1,3,6,6", "8,3,1,1", 8, 1, 0, 1, MC_INT8, 0, 0, 2.0f / 127, 0.00016f, false);
	check_model(b, 0.016, 0.00016, MC_OP_QiConv, 1, no_conv);
}

/* Factors that are powers of two (2^-7 * 2^-6 / 2^-8 = 2^-5: multiplier
 * 2^30, shift 35): sums land on the rounding's ties (a sum 16 modulo 32:
 * about one output in 32 here, small inputs keep them unsaturated), which
 * round to even. RQ32's half-up form (aot/kern_qconv.c) must not be taken
 * here: where its proof that no tie occurs were wrong, the cortex-m
 * builds would round those sums up. */
Test(qint, conv_power_of_two_factors_tie)
{
	every_weight_scale = 1.0f / 128;
	mb *b = conv_model("1,4,16,16", "6,4,3,3", 6, 1, 1, 1, MC_INT8, 0, 0, 1.0f / 64, 1.0f / 256, false);
	every_weight_scale = 0;
	check_model(b, 0.1, 1.0 / 256, MC_OP_QiConv, 1, no_conv);
}

/* Rows wide enough for the i32 vector kernels (aot/kern_qvec.c) of
 * --isa avx2 and avx512 (8 and 16 lanes): pairs built a vector at a time
 * with a last vector that overlaps, ragged blocks of pixels, a pointwise
 * convolution whose pixels are no multiple of the lanes; depthwise with
 * the flattened plane (stride 1) and along rows (stride 2, uint8). */
Test(qint, conv_wide_rows_vectors)
{
	mb *b = conv_model("1,6,11,37", "8,6,3,3", 8, 1, 1, 1, MC_INT8, 4, -9, 2.0f / 127, 0.08f, false);
	check_model(b, 2.0, 0.08, MC_OP_QiConv, 1, no_conv);
}

/* Stride 2 on wide rows: every other input column a vector at a time
 * (each load reads one byte past its last element, kept inside the row):
 * channel pairs, and three channels paired along the window (a first
 * layer). */
Test(qint, conv_wide_stride2)
{
	mb *b = conv_model("1,4,9,40", "6,4,3,3", 6, 1, 1, 2, MC_INT8, -6, 2, 2.0f / 127, 0.06f, false);
	check_model(b, 2.0, 0.06, MC_OP_QiConv, 1, no_conv);
}

Test(qint, conv_wide_stride2_first_layer)
{
	mb *b = conv_model("1,3,10,39", "8,3,3,3", 8, 1, 1, 2, MC_INT8, 1, -128, 2.0f / 127, 0.05f, true);
	check_model(b, 2.0, 0.05, MC_OP_QiConv, 1, no_conv);
}

Test(qint, conv_pointwise_ragged_pixels)
{
	mb *b = conv_model("1,6,3,23", "10,6,1,1", 10, 1, 0, 1, MC_INT8, -2, 5, 2.0f / 127, 0.04f, true);
	check_model(b, 2.0, 0.04, MC_OP_QiConv, 1, no_conv);
}

Test(qint, conv_depthwise_wide_flat)
{
	mb *b = conv_model("1,3,9,21", "3,1,3,3", 3, 3, 1, 1, MC_INT8, 6, -128, 2.0f / 127, 0.03f, true);
	check_model(b, 2.0, 0.03, MC_OP_QiConv, 1, no_conv);
}

Test(qint, conv_depthwise_wide_stride2_uint8)
{
	mb *b = conv_model("1,3,12,41", "3,1,3,3", 3, 3, 1, 2, MC_UINT8, 90, 20, 2.0f / 255, 0.03f, false);
	check_model(b, 2.0, 0.03, MC_OP_QiConv, 1, no_conv);
}

/* Depthwise on --isa cortex-m's paired plane (aot/kern_qdual.c): stride 2
 * with a 5x5 window (odd taps paired with 0), and an even window. */
Test(qint, conv_depthwise_stride2_5x5)
{
	mb *b = conv_model("1,6,9,8", "6,1,5,5", 6, 6, 2, 2, MC_INT8, 5, -128, 2.0f / 127, 0.03f, true);
	check_model(b, 2.0, 0.03, MC_OP_QiConv, 1, no_conv);
}

/* A window of more weight pairs than the paired kernel keeps in
 * registers (9x9: 45): the plain lowering, still exact. */
Test(qint, conv_depthwise_big_window)
{
	mb *b = conv_model("1,2,10,10", "2,1,9,9", 2, 2, 4, 1, MC_INT8, 1, -128, 2.0f / 127, 0.1f, true);
	check_model(b, 2.0, 0.1, MC_OP_QiConv, 1, no_conv);
}

Test(qint, conv_depthwise_even_window)
{
	mb *b = conv_model("1,4,7,6", "4,1,4,4", 4, 4, 1, 1, MC_INT8, -7, 3, 2.0f / 127, 0.05f, false);
	check_model(b, 2.0, 0.05, MC_OP_QiConv, 1, no_conv);
}

/* ---- (b) uint8 activations with nonzero zero points (padding reads the
 * zero point) ---- */

Test(qint, conv_uint8_zero_points)
{
	/* x in [-2, 2] at zp 100: clamps below -0.79 too */
	mb *b = conv_model("1,3,6,6", "4,3,3,3", 4, 1, 1, 1, MC_UINT8, 100, 40, 2.0f / 255, 0.04f, false);
	check_model(b, 2.0, 0.04, MC_OP_QiConv, 1, no_conv);
}

Test(qint, conv_uint8_depthwise_relu)
{
	mb *b = conv_model("1,4,5,5", "4,1,3,3", 4, 4, 1, 1, MC_UINT8, 128, 0, 2.0f / 127, 0.02f, true);
	check_model(b, 2.0, 0.02, MC_OP_QiConv, 1, no_conv);
}

/* ---- (c) Gemm and MatMul ---- */

Test(qint, gemm_transb_per_channel)
{
	lcg_state = 77;
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	float sx = 2.0f / 127, sy = 0.08f, ws[8];
	qdq_input(b, g, "x", "3,16", "xd", MC_INT8, sx, 0);
	weights(b, g, "5,16", 5, 0, ws);
	bias(b, g, 5, sx, ws);
	Onnx__NodeProto *n = mb_node(b, g, "Gemm", "gemm", "xd,w,bias", "m");
	mb_attr_int(b, n, "transB", 1);
	qdq_output(b, g, "m", MC_INT8, sy, 2, "y");
	const mc_opid gone[] = {MC_OP_Gemm, MC_OP_MatMul, MC_OP_NONE};
	check_model(b, 2.0, sy, MC_OP_QiMatMul, 1, gone);
}

/* x [rows, K] (dtype, scale sx, zero point x_zp) times int8 B [K, n]
 * per column, an int32 bias, an optional Relu, quantized at (sy, y_zp):
 * the QDQ Gemm of the tests below, checked by check_model. */
static mb *gemm_model(uint32_t seed, const char *xshape, int64_t k, int64_t n, int dtype, float sx,
                      int64_t x_zp, float sy, int64_t y_zp, bool relu)
{
	lcg_state = seed;
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	float ws[256];
	cr_assert_leq(n, 256);
	char wdims[64];
	snprintf(wdims, sizeof wdims, "%lld,%lld", (long long)k, (long long)n);
	qdq_input(b, g, "x", xshape, "xd", dtype, sx, x_zp);
	weights(b, g, wdims, n, 1, ws); /* B [K, N]: channels along axis 1 */
	bias(b, g, n, sx, ws);
	mb_node(b, g, "Gemm", "gemm", "xd,w,bias", "m");
	if (relu)
		mb_node(b, g, "Relu", "relu", "m", "r");
	qdq_output(b, g, relu ? "r" : "m", dtype, sy, y_zp, "y");
	return b;
}

static void check_gemm(uint32_t seed, const char *xshape, int64_t k, int64_t n, int dtype, float sx,
                       int64_t x_zp, float sy, int64_t y_zp, bool relu)
{
	mb *b = gemm_model(seed, xshape, k, n, dtype, sx, x_zp, sy, y_zp, relu);
	const mc_opid gone[] = {MC_OP_Gemm, relu ? MC_OP_Relu : MC_OP_NONE, MC_OP_NONE};
	check_model(b, 2.0, sy, MC_OP_QiMatMul, 1, gone);
}

Test(qint, gemm_uint8_relu)
{
	check_gemm(78, "4,12", 12, 7, MC_UINT8, 2.0f / 255, 128, 0.03f, 0, true);
}

/* An even output count, an odd K and a zero point: the paired kernel's
 * rows (aot/kern_qdual.c, --isa cortex-m). */
Test(qint, gemm_uint8_odd_k_paired)
{
	check_gemm(79, "3,15", 15, 6, MC_UINT8, 2.0f / 255, 120, 0.05f, 128, false);
}

/* One row (a fully connected layer): 4 channels a tile, two pairs a step
 * and the odd pair after (K 13: 7 pairs). */
Test(qint, gemm_one_row_paired)
{
	check_gemm(80, "1,13", 13, 8, MC_INT8, 2.0f / 127, -3, 0.05f, 5, false);
}

/* One row of K = 36 int8 (a multiple of 4: the Cortex-M pairs of x come
 * from word loads, k paired (k, k + 2), S8_PAIRS) into 200 channels: the
 * 4 x 1 micro-kernel over five chunks of 10 tiles (at most 64 sums a
 * call), k padded from 18 pairs to 24 */
Test(qint, gemm_one_row_word_pairs_chunks)
{
	check_gemm(81, "1,36", 36, 200, MC_INT8, 2.0f / 127, 7, 0.06f, -128, true);
}

/* The offset and the "in place of buffer N" of line `what` of a plan dump
 * (95-plan.txt); -1 for none. */
static long plan_line(const char *plan, const char *what, long *offset)
{
	const char *at = strstr(plan, what);
	cr_assert_not_null(at, "no '%s' in the plan:\n%s", what, plan);
	if (*at == '\n')
		at++;
	while (at > plan && at[-1] != '\n')
		at--;
	long index, bytes;
	cr_assert_eq(sscanf(at, "%ld %ld %ld", &index, offset, &bytes), 3);
	const char *end = strchr(at, '\n'), *over = strstr(at, "in place of buffer ");
	return over && over < end ? strtol(over + 19, NULL, 10) : -1;
}

/* The same one row, quantized in the arena where it dies at the matrix
 * product: its word pairs, twice its bytes, lie over it (S8_PAIRS, or on
 * the llvm target the plain loop, from the last word down); the buffer it
 * quantizes into, per line of the plan. */
static void pairs_over_the_row(const char *target)
{
	char path[4200], out[4300];
	mb *b = gemm_model(81, "1,36", 36, 200, MC_INT8, 2.0f / 127, 7, 0.06f, -128, true);
	char *dir = written_model(b, path, sizeof path);
	mb_free(b);
	snprintf(out, sizeof out, "%s/out", dir);
	mc_compile_opts o = model_opts(false, "cortex-m", target);
	o.no_stack_usage = true;
	o.dump_after = "plan";
	cr_assert_eq(mc_compile(path, out, &o), 0, "%s", diag_all());
	char debug[4400];
	snprintf(debug, sizeof debug, "%s/debug", out);
	char *plan = read_file_in(debug, "95-plan.txt", NULL);
	cr_assert_not_null(plan);
	long scratch_at, row_at, row;
	/* kernel 1 is the matrix product; its first scratch is the pairs */
	row = plan_line(plan, "scratch of k1_", &scratch_at);
	cr_assert_geq(row, 0, "the pairs are not laid over the row:\n%s", plan);
	char line[32];
	snprintf(line, sizeof line, "\n%ld ", row);
	plan_line(plan, line, &row_at);
	cr_assert_eq(scratch_at, row_at, "pairs at %ld, the row at %ld:\n%s", scratch_at, row_at, plan);
	free(plan);
	rm_tree(dir);
	free(dir);
}

Test(qint, gemm_one_row_pairs_lie_over_the_row)
{
	pairs_over_the_row(NULL);
	if (mc_llvm_available())
		pairs_over_the_row("llvm");
}

Test(qint, matmul_batched_per_tensor)
{
	lcg_state = 79;
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	float sx = 2.0f / 127, sy = 0.04f;
	qdq_input(b, g, "x", "2,3,4", "xd", MC_INT8, sx, -3);
	init_q(b, g, "W", MC_INT8, "4,5", -127, 127);
	init_scalar_f(b, g, "W_s", 0.011f);
	init_scalar_q(b, g, "W_z", MC_INT8, 0);
	mb_node(b, g, "DequantizeLinear", "dq_w", "W,W_s,W_z", "w");
	mb_node(b, g, "MatMul", "mm", "xd,w", "m");
	qdq_output(b, g, "m", MC_INT8, sy, 1, "y");
	const mc_opid gone[] = {MC_OP_MatMul, MC_OP_NONE};
	check_model(b, 2.0, sy, MC_OP_QiMatMul, 1, gone);
}

/* Both operands computed (quantized activations): b per tensor. */
Test(qint, matmul_two_activations)
{
	lcg_state = 80;
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	qdq_input(b, g, "x", "3,6", "xd", MC_INT8, 2.0f / 127, 0);
	init_scalar_f(b, g, "b_s", 1.5f / 127);
	init_scalar_q(b, g, "b_z", MC_INT8, 4);
	mb_input(b, g, "bx", MC_FLOAT, "6,4");
	mb_node(b, g, "QuantizeLinear", "q_b", "bx,b_s,b_z", "bq");
	mb_node(b, g, "DequantizeLinear", "dq_b", "bq,b_s,b_z", "bd");
	mb_node(b, g, "MatMul", "mm", "xd,bd", "m");
	qdq_output(b, g, "m", MC_INT8, 0.05f, 0, "y");
	const mc_opid gone[] = {MC_OP_MatMul, MC_OP_NONE};
	check_model(b, 2.0, 0.05, MC_OP_QiMatMul, 1, gone);
}

/* ---- (d) Add and Mul of two quantized branches ---- */

static mb *binary_model(const char *op, const char *sa, const char *sb, float a_s, int64_t a_z,
                        float b_s, int64_t b_z, float y_s, int64_t y_z, int dtype, bool relu)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	init_scalar_f(b, g, "a_s", a_s);
	init_scalar_q(b, g, "a_z", dtype, a_z);
	init_scalar_f(b, g, "b_s", b_s);
	init_scalar_q(b, g, "b_z", dtype, b_z);
	mb_input(b, g, "a", MC_FLOAT, sa);
	mb_input(b, g, "b", MC_FLOAT, sb);
	mb_node(b, g, "QuantizeLinear", "q_a", "a,a_s,a_z", "aq");
	mb_node(b, g, "DequantizeLinear", "dq_a", "aq,a_s,a_z", "ad");
	mb_node(b, g, "QuantizeLinear", "q_b", "b,b_s,b_z", "bq");
	mb_node(b, g, "DequantizeLinear", "dq_b", "bq,b_s,b_z", "bd");
	mb_node(b, g, op, "op", "ad,bd", relu ? "s" : "r");
	if (relu)
		mb_node(b, g, "Relu", "relu", "s", "r");
	qdq_output(b, g, "r", dtype, y_s, y_z, "y");
	return b;
}

Test(qint, add_different_scales)
{
	mb *b = binary_model("Add", "2,3,8", "2,3,8", 2.0f / 127, 0, 0.9f / 127, -7, 3.0f / 127, 3,
	                     MC_INT8, false);
	const mc_opid gone[] = {MC_OP_Add, MC_OP_NONE};
	check_model(b, 2.0, 3.0 / 127, MC_OP_QiAdd, 1, gone);
}

Test(qint, add_broadcast_uint8_relu)
{
	mb *b = binary_model("Add", "2,3,8", "3,1", 4.0f / 255, 128, 3.0f / 255, 100, 3.5f / 255, 0,
	                     MC_UINT8, true);
	const mc_opid gone[] = {MC_OP_Add, MC_OP_Relu, MC_OP_NONE};
	check_model(b, 2.0, 3.5 / 255, MC_OP_QiAdd, 1, gone);
}

Test(qint, mul_different_scales)
{
	mb *b = binary_model("Mul", "4,9", "4,9", 2.0f / 127, 0, 1.7f / 127, 5, 3.5f / 127, -2,
	                     MC_INT8, false);
	const mc_opid gone[] = {MC_OP_Mul, MC_OP_NONE};
	check_model(b, 2.0, 3.5 / 127, MC_OP_QiMul, 1, gone);
}

/* ---- (e) a unary op as a table ---- */

Test(qint, sigmoid_lut)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	qdq_input(b, g, "x", "2,50", "xd", MC_INT8, 6.0f / 127, 0);
	mb_node(b, g, "Sigmoid", "sig", "xd", "s");
	qdq_output(b, g, "s", MC_INT8, 1.0f / 256, -128, "y");
	const mc_opid gone[] = {MC_OP_Sigmoid, MC_OP_NONE};
	check_model(b, 6.0, 1.0 / 256, MC_OP_QiLut, 1, gone);
}

Test(qint, tanh_lut_uint8)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	qdq_input(b, g, "x", "64", "xd", MC_UINT8, 4.0f / 255, 128);
	mb_node(b, g, "Tanh", "tanh", "xd", "s");
	qdq_output(b, g, "s", MC_UINT8, 2.0f / 255, 128, "y");
	const mc_opid gone[] = {MC_OP_Tanh, MC_OP_NONE};
	check_model(b, 2.0, 2.0 / 255, MC_OP_QiLut, 1, gone);
}

/* ---- (f) average pools ---- */

Test(qint, averagepool_2x2_stride2)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	qdq_input(b, g, "x", "1,3,6,8", "xd", MC_INT8, 2.0f / 127, 5);
	Onnx__NodeProto *n = mb_node(b, g, "AveragePool", "pool", "xd", "p");
	mb_attr_ints(b, n, "kernel_shape", (const int64_t[]){2, 2}, 2);
	mb_attr_ints(b, n, "strides", (const int64_t[]){2, 2}, 2);
	qdq_output(b, g, "p", MC_INT8, 1.3f / 127, -1, "y");
	const mc_opid gone[] = {MC_OP_AveragePool, MC_OP_NONE};
	check_model(b, 2.0, 1.3 / 127, MC_OP_QiAvgPool, 1, gone);
}

Test(qint, global_averagepool)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	/* 25 values a window: not a power of two */
	qdq_input(b, g, "x", "2,6,5,5", "xd", MC_UINT8, 2.0f / 255, 128);
	mb_node(b, g, "GlobalAveragePool", "gap", "xd", "p");
	qdq_output(b, g, "p", MC_UINT8, 0.3f / 255, 128, "y");
	const mc_opid gone[] = {MC_OP_GlobalAveragePool, MC_OP_NONE};
	check_model(b, 2.0, 0.3 / 255, MC_OP_QiAvgPool, 1, gone);
}

/* ---- (g) data movers on the integers ---- */

/* a [1,2,4,4] -> MaxPool 2x2 -> Reshape [1,8]; b [8,1] -> Transpose [1,8];
 * Concat -> [1,16], all at one scale; then Q at another scale (QiRequant). */
static mb *movers_model(float y_s, int64_t y_z)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	float s = 2.0f / 127;
	init_scalar_f(b, g, "s", s);
	init_scalar_q(b, g, "z", MC_INT8, 3);
	mb_input(b, g, "a", MC_FLOAT, "1,2,4,4");
	mb_input(b, g, "b", MC_FLOAT, "8,1");
	mb_node(b, g, "QuantizeLinear", "q_a", "a,s,z", "aq");
	mb_node(b, g, "DequantizeLinear", "dq_a", "aq,s,z", "ad");
	mb_node(b, g, "QuantizeLinear", "q_b", "b,s,z", "bq");
	mb_node(b, g, "DequantizeLinear", "dq_b", "bq,s,z", "bd");
	Onnx__NodeProto *n = mb_node(b, g, "MaxPool", "maxpool", "ad", "m");
	mb_attr_ints(b, n, "kernel_shape", (const int64_t[]){2, 2}, 2);
	mb_attr_ints(b, n, "strides", (const int64_t[]){2, 2}, 2);
	mb_init_ints(b, g, "shape", MC_INT64, "2", (const int64_t[]){1, 8}, 2);
	mb_node(b, g, "Reshape", "reshape", "m,shape", "r");
	n = mb_node(b, g, "Transpose", "transpose", "bd", "t");
	mb_attr_ints(b, n, "perm", (const int64_t[]){1, 0}, 2);
	n = mb_node(b, g, "Concat", "concat", "r,t", "c");
	mb_attr_int(b, n, "axis", 1);
	qdq_output(b, g, "c", MC_INT8, y_s, y_z, "y");
	return b;
}

static const mc_value *input_of(const mc_graph *g, mc_opid id, int k)
{
	return &g->values[node_of(g, id)->inputs[k]];
}

Test(qint, movers_on_int8)
{
	mb *b = movers_model(1.0f / 127, -4);
	mc_graph *g = quantized(b);
	const mc_opid movers[] = {MC_OP_MaxPool, MC_OP_Reshape, MC_OP_Transpose, MC_OP_Concat};
	for (int k = 0; k < 4; k++) {
		cr_expect_eq(count_op(g, movers[k]), 1, "%s", mc_op_name(movers[k]));
		const mc_value *in = input_of(g, movers[k], 0);
		const mc_value *out = &g->values[node_of(g, movers[k])->outputs[0]];
		cr_expect_eq(in->dtype, MC_INT8, "%s reads %s", mc_op_name(movers[k]),
		             mc_dtype_name(in->dtype));
		cr_expect_eq(out->dtype, MC_INT8, "%s writes %s", mc_op_name(movers[k]),
		             mc_dtype_name(out->dtype));
	}
	cr_expect_eq(count_op(g, MC_OP_QiRequant), 1);
	cr_expect_eq(count_op(g, MC_OP_QuantizeLinear), 0);
	cr_expect_eq(count_op(g, MC_OP_DequantizeLinear), 1);
	mc_graph_free(g);
	close_to_float(b, 2.0, 1.0 / 127, 1);
	cr_expect_eq(verify_exact(b, 2.0, false), 0, "%s", diag_all());
	mb_free(b);
}

/* The same with the output at the movers' scale: no requantisation. */
Test(qint, movers_same_scale_no_requant)
{
	mb *b = movers_model(2.0f / 127, 3);
	mc_graph *g = quantized(b);
	cr_expect_eq(count_op(g, MC_OP_QiRequant), 0);
	cr_expect_eq(count_op(g, MC_OP_QuantizeLinear), 0);
	cr_expect_eq(input_of(g, MC_OP_Concat, 0)->dtype, MC_INT8);
	mc_graph_free(g);
	close_to_float(b, 2.0, 2.0 / 127, 0);
	cr_expect_eq(verify_exact(b, 2.0, false), 0, "%s", diag_all());
	mb_free(b);
}

/* ---- (h) Q(DQ(q)) at another scale ---- */

static mb *requant_model(int from, float s1, int64_t z1, int to, float s2, int64_t z2)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	qdq_input(b, g, "x", "3,40", "xd", from, s1, z1);
	qdq_output(b, g, "xd", to, s2, z2, "y");
	return b;
}

Test(qint, requant_int8)
{
	mb *b = requant_model(MC_INT8, 2.0f / 127, 0, MC_INT8, 0.7f / 127, 9);
	const mc_opid gone[] = {MC_OP_NONE};
	expect_ops(b, MC_OP_QiRequant, 1, gone);
	close_to_float(b, 2.0, 0.7 / 127, 1);
	cr_expect_eq(verify_exact(b, 2.0, false), 0, "%s", diag_all());
	mb_free(b);
}

Test(qint, requant_uint8_to_int8)
{
	mb *b = requant_model(MC_UINT8, 2.0f / 255, 128, MC_INT8, 3.1f / 127, -20);
	const mc_opid gone[] = {MC_OP_NONE};
	expect_ops(b, MC_OP_QiRequant, 1, gone);
	close_to_float(b, 2.0, 3.1 / 127, 1);
	cr_expect_eq(verify_exact(b, 2.0, false), 0, "%s", diag_all());
	mb_free(b);
}

/* The first Q of a float input is QiQuantize, a multiplication by 1/scale:
 * against QuantizeLinear's division, off by one at most. */
Test(qint, quantize_of_float_input)
{
	mb *b = requant_model(MC_INT8, 0.013f, -3, MC_INT8, 0.013f, -3);
	mc_graph *g = quantized(b);
	cr_expect_eq(count_op(g, MC_OP_QiQuantize), 1);
	cr_expect_eq(count_op(g, MC_OP_QiRequant), 0);
	cr_expect_eq(count_op(g, MC_OP_QuantizeLinear), 0);
	mc_graph_free(g);
	close_to_float(b, 2.0, 0.013, 1);
	cr_expect_eq(verify_exact(b, 2.0, false), 0, "%s", diag_all());
	mb_free(b);
}

/* ---- --quantized-io ---- */

/* mc_compile with --quantized-io into a temporary directory: t.h's text. */
static char *compile_qio(mb *b, char **dir_out)
{
	char path[4200], out[4200];
	char *dir = written_model(b, path, sizeof path);
	snprintf(out, sizeof out, "%s/out", dir);
	mc_compile_opts o = model_opts(true, NULL, NULL);
	o.harness = true;
	cr_assert_eq(mc_compile(path, out, &o), 0, "%s", diag_all());
	char *h = read_file_in(out, "t.h", NULL);
	cr_assert_not_null(h);
	*dir_out = dir;
	return h;
}

static void expect_define(const char *h, const char *line)
{
	cr_expect_not_null(strstr(h, line), "no '%s' in the header:\n%s", line, h);
}

/* The compiled code on int8 inputs over the whole range, against the
 * reference with --quantized-io: bit for bit. */
static void run_qio_exact(mb *b, const char *dir)
{
	char path[4200], out[4200];
	snprintf(path, sizeof path, "%s/model.onnx", dir);
	snprintf(out, sizeof out, "%s/out", dir);
	(void)b;
	mc_graph *g;
	mc_tensor **in, **want = quantized_io_reference(path, &g, &in);
	mc_tensor **got = calloc((size_t)g->n_outputs + 1, sizeof *got);
	int st;
	cr_assert_eq(mc_run_harness(out, "t", "cc", "-std=c99 -O1 -Wall -Wextra -Werror", g, in, got,
	                            &st), 0, "%s", diag_all());
	for (int k = 0; k < g->n_outputs; k++) {
		cr_assert_eq(want[k]->nbytes, got[k]->nbytes);
		for (size_t i = 0; i < want[k]->numel; i++)
			cr_expect_eq(mc_get_i(got[k], i), mc_get_i(want[k], i), "output %d [%zu]", k, i);
		cr_expect_eq(memcmp(want[k]->data, got[k]->data, want[k]->nbytes), 0);
	}
	free_tensors(in, g->n_inputs);
	free_tensors(want, g->n_outputs);
	free_tensors(got, g->n_outputs);
	mc_graph_free(g);
}

Test(qint, quantized_io_conv_header_and_exact)
{
	mb *b = conv_model("1,3,7,7", "4,3,3,3", 4, 1, 1, 1, MC_INT8, -2, -128, 2.0f / 127, 0.05f, true);
	char *dir;
	char *h = compile_qio(b, &dir);
	expect_define(h, "#define T_INPUT_0_DTYPE MODELC_INT8\n");
	expect_define(h, "#define T_OUTPUT_0_DTYPE MODELC_INT8\n");
	char line[128];
	snprintf(line, sizeof line, "#define T_INPUT_0_SCALE %.9gf\n", (double)(2.0f / 127));
	expect_define(h, line);
	expect_define(h, "#define T_INPUT_0_ZERO_POINT -2\n");
	snprintf(line, sizeof line, "#define T_OUTPUT_0_SCALE %.9gf\n", (double)0.05f);
	expect_define(h, line);
	expect_define(h, "#define T_OUTPUT_0_ZERO_POINT -128\n");
	free(h);
	/* the graph's input and output are the integers */
	mc_graph *g = mb_import(b, ".", NULL);
	cr_assert_eq(mc_infer_graph(g), 0);
	cr_assert_eq(mc_quantize_reference(g, true), 0);
	cr_expect_eq(g->values[g->inputs[0]].dtype, MC_INT8);
	cr_expect_eq(g->values[g->outputs[0]].dtype, MC_INT8);
	cr_expect_eq(count_op(g, MC_OP_QiQuantize), 0);
	cr_expect_eq(count_op(g, MC_OP_DequantizeLinear), 0);
	cr_expect_eq(count_op(g, MC_OP_QiConv), 1);
	mc_graph_free(g);
	run_qio_exact(b, dir);
	rm_tree(dir);
	free(dir);
	cr_expect_eq(verify_exact(b, 2.0, true), 0, "%s", diag_all());
	mb_free(b);
}

Test(qint, quantized_io_uint8)
{
	mb *b = conv_model("1,3,6,6", "4,3,3,3", 4, 1, 1, 1, MC_UINT8, 100, 40, 2.0f / 255, 0.04f, false);
	char *dir;
	char *h = compile_qio(b, &dir);
	expect_define(h, "#define T_INPUT_0_DTYPE MODELC_UINT8\n");
	expect_define(h, "#define T_INPUT_0_ZERO_POINT 100\n");
	expect_define(h, "#define T_OUTPUT_0_ZERO_POINT 40\n");
	free(h);
	run_qio_exact(b, dir);
	rm_tree(dir);
	free(dir);
	cr_expect_eq(verify_exact(b, 2.0, true), 0, "%s", diag_all());
	mb_free(b);
}

/* ---- scales that cannot be ---- */

static const float bad_scales[] = {0.0f, -1.0f, NAN, INFINITY};

/* x -> Q(scale) -> DQ(scale) -> y, the bad scale on Q or on DQ (separate
 * initializers); or a DQ of int8 weights with the bad scale. */
static mb *bad_scale_model(float bad, int where)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "2,4");
	init_scalar_f(b, g, "good", 0.02f);
	init_scalar_f(b, g, "bad", bad);
	init_scalar_q(b, g, "z", MC_INT8, 0);
	mb_node(b, g, "QuantizeLinear", "the_q", where == 0 ? "x,bad,z" : "x,good,z", "xq");
	mb_node(b, g, "DequantizeLinear", "the_dq", where == 1 ? "xq,bad,z" : "xq,good,z", "xd");
	if (where == 2) {
		lcg_state = 5;
		init_q(b, g, "W", MC_INT8, "4,3", -127, 127);
		float ws[3] = {0.01f, bad, 0.01f};
		mb_init_floats(b, g, "W_s", "3", ws, 3);
		Onnx__NodeProto *n = mb_node(b, g, "DequantizeLinear", "the_wdq", "W,W_s", "w");
		mb_attr_int(b, n, "axis", 1);
		mb_node(b, g, "MatMul", "mm", "xd,w", "m");
		qdq_output(b, g, "m", MC_INT8, 0.05f, 0, "y");
	} else {
		mb_output(b, g, "xd");
	}
	return b;
}

Test(qint, bad_scale_is_an_error_naming_the_node)
{
	const char *names[] = {"'the_q' (QuantizeLinear", "'the_dq' (DequantizeLinear",
	                       "'the_wdq' (DequantizeLinear"};
	for (int where = 0; where < 3; where++)
		for (size_t k = 0; k < sizeof bad_scales / sizeof *bad_scales; k++) {
			mb *b = bad_scale_model(bad_scales[k], where);
			char path[4200], out[4200];
			char *dir = written_model(b, path, sizeof path);
			snprintf(out, sizeof out, "%s/out", dir);
			mc_compile_opts o = model_opts(false, NULL, NULL);
			diag_capture();
			cr_expect_eq(mc_compile(path, out, &o), -1, "scale %g on %s compiled", bad_scales[k],
			             names[where]);
			cr_expect_geq(diag_count(), 1);
			bool named = false;
			for (int i = 0; i < diag_count(); i++)
				named |= strstr(diag_line(i), names[where]) && strstr(diag_line(i), "scale");
			cr_expect(named, "scale %g on %s: %s", bad_scales[k], names[where], diag_all());
			/* the same through mc_freeze */
			mc_graph *g = mb_import(b, ".", NULL);
			cr_assert_not_null(g);
			diag_capture();
			int rc = mc_infer_graph(g);
			if (!rc) {
				mc_freeze_opts fo = {0};
				rc = mc_freeze(g, &fo);
			}
			cr_expect_eq(rc, -1, "scale %g on %s froze", bad_scales[k], names[where]);
			cr_expect_eq(diag_count_with("scale"), 1, "%s", diag_all());
			cr_expect_eq(diag_count_with(names[where]), 1, "%s", diag_all());
			mc_graph_free(g);
			rm_tree(dir);
			free(dir);
			mb_free(b);
		}
}

/* ---- ties: power-of-two scale ratios put many sums exactly on a half,
 * where the compiled code must round to even as the reference does ---- */

Test(qint, requant_ties_to_even)
{
	/* s2 = 2 s1: every odd q - zp is a tie */
	mb *b = requant_model(MC_INT8, 0.02f, 1, MC_INT8, 0.04f, 0);
	mc_graph *g = quantized(b);
	const mc_node *n = node_of(g, MC_OP_QiRequant);
	cr_expect_eq(((const qi_params *)n->params)->mult, 1 << 30);
	cr_expect_eq(((const qi_params *)n->params)->shift, 31);
	mc_graph_free(g);
	/* the float graph's (q - zp) * 0.02f / 0.04f lands either side of the
	 * half: one quantum; the integers have the exact tie */
	close_to_float(b, 2.0, 0.04, 1);
	cr_expect_eq(verify_exact(b, 2.0, false), 0, "%s", diag_all());
	mb_free(b);
}

Test(qint, averagepool_ties_to_even)
{
	/* one scale in and out, a 2x2 window: sums / 4, a quarter of them ties */
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	qdq_input(b, g, "x", "1,2,8,8", "xd", MC_INT8, 0.02f, 0);
	Onnx__NodeProto *n = mb_node(b, g, "AveragePool", "pool", "xd", "p");
	mb_attr_ints(b, n, "kernel_shape", (const int64_t[]){2, 2}, 2);
	mb_attr_ints(b, n, "strides", (const int64_t[]){2, 2}, 2);
	qdq_output(b, g, "p", MC_INT8, 0.02f, 0, "y");
	const mc_opid gone[] = {MC_OP_AveragePool, MC_OP_NONE};
	check_model(b, 2.5, 0.02, MC_OP_QiAvgPool, 1, gone);
}

/* ---- more shapes of Conv ---- */

/* Depthwise with a channel multiplier: group 3, 6 output channels. */
Test(qint, conv_grouped_channel_multiplier)
{
	mb *b = conv_model("1,3,6,6", "6,1,3,3", 6, 3, 0, 1, MC_INT8, 1, -128, 2.0f / 127, 0.02f, true);
	check_model(b, 2.0, 0.02, MC_OP_QiConv, 1, no_conv);
}

/* Conv -> Clip(0, 6) (ReLU6) -> Q: the clamp folds into the integer op. */
Test(qint, conv_clip_relu6)
{
	lcg_state = 31;
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	float sx = 2.0f / 127, ws[8];
	qdq_input(b, g, "x", "1,3,6,6", "xd", MC_INT8, sx, 0);
	weights(b, g, "4,3,3,3", 4, 0, ws);
	bias(b, g, 4, sx, ws);
	Onnx__NodeProto *c = mb_node(b, g, "Conv", "conv", "xd,w,bias", "c");
	mb_attr_ints(b, c, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
	init_scalar_f(b, g, "lo", 0.0f);
	init_scalar_f(b, g, "hi", 6.0f);
	mb_node(b, g, "Clip", "relu6", "c,lo,hi", "r");
	/* 6 / 0.03 = 200 > 127: the output range clamps first; 0.06 puts 6 at 100 */
	qdq_output(b, g, "r", MC_INT8, 0.06f, -20, "y");
	const mc_opid gone[] = {MC_OP_Conv, MC_OP_Clip, MC_OP_NONE};
	check_model(b, 2.0, 0.06, MC_OP_QiConv, 1, gone);
}
