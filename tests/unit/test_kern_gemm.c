/* The fast Gemm/MatMul kernel (aot/kern_gemm.c, aot/kern_tile.c): small
 * models with odd shapes (N = 1, 3, 17, 24, 28, 42, 257; GEMV rows; batched
 * MatMul; fused epilogues) compiled for generic, avx2 and avx512, built
 * with -march=native, run and compared with the reference interpreter; and
 * checks that the fast kernel is the one used. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../aot/aot.h"
#include "compile_helpers.h"
#include "model_builder.h"

static const char *const isas[] = { "generic", "avx2", "avx512" };

/* Deterministic values in [-1, 1). */
static void fill(float *v, size_t n, unsigned seed)
{
	uint32_t s = seed * 2654435761u + 12345u;
	for (size_t i = 0; i < n; i++) {
		s = s * 1664525u + 1013904223u;
		v[i] = (float)((double)(s >> 8) / 16777216.0 * 2.0 - 1.0);
	}
}

static void init_random(mb *b, const char *name, const char *dims, size_t n, unsigned seed)
{
	float *v = malloc((n ? n : 1) * sizeof *v);
	fill(v, n, seed);
	mb_init_floats(b, mb_main(b), name, dims, v, n);
	free(v);
}

static int verify_isa(mb *b, const char *isa)
{
	return verify_model_isa(b, isa);
}

/* The program of b's model for isa (b stays). */
static mc_graph *program_isa(mb *b, const char *isa, mc_program *p)
{
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.isa = isa;
	return program_with(b, &o, p);
}

static char *dims2(int64_t a, int64_t b)
{
	static char buf[4][32];
	static int next;
	char *s = buf[next++ % 4];
	snprintf(s, sizeof buf[0], "%lld,%lld", (long long)a, (long long)b);
	return s;
}

/* A Gemm per case: N = 1, 3, 17, 24, 257, 42, 28 with and without transB,
 * alpha/beta, C as [1], none, [1,N], scalar, [N], [M,N] (not handled: the
 * plain lowering), a fused Relu and a fused residual Add. */
static mb *gemm_model(int64_t m, int64_t k)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "a", MC_FLOAT, dims2(m, k));
	mb_input(b, g, "r", MC_FLOAT, dims2(m, 28));
	init_random(b, "w1", dims2(1, k), (size_t)k, 1);
	init_random(b, "c1", "1", 1, 2);
	Onnx__NodeProto *n = mb_node(b, g, "Gemm", "g1", "a,w1,c1", "y1");
	mb_attr_int(b, n, "transB", 1);
	init_random(b, "w2", dims2(k, 3), (size_t)k * 3, 3);
	mb_node(b, g, "Gemm", "g2", "a,w2", "y2");
	init_random(b, "w3", dims2(17, k), (size_t)k * 17, 4);
	init_random(b, "c3", "1,17", 17, 5);
	n = mb_node(b, g, "Gemm", "g3", "a,w3,c3", "y3");
	mb_attr_int(b, n, "transB", 1);
	mb_attr_float(b, n, "alpha", 0.5f);
	mb_attr_float(b, n, "beta", -2.0f);
	mb_node(b, g, "Relu", "relu3", "y3", "y3r");
	init_random(b, "w4", dims2(k, 24), (size_t)k * 24, 6);
	init_random(b, "c4", "", 1, 7);
	mb_node(b, g, "Gemm", "g4", "a,w4,c4", "y4");
	init_random(b, "w5", dims2(257, k), (size_t)k * 257, 8);
	init_random(b, "c5", "257", 257, 9);
	n = mb_node(b, g, "Gemm", "g5", "a,w5,c5", "y5");
	mb_attr_int(b, n, "transB", 1);
	init_random(b, "w6", dims2(k, 42), (size_t)k * 42, 10);
	init_random(b, "c6", dims2(m, 42), (size_t)m * 42, 11);
	mb_node(b, g, "Gemm", "g6", "a,w6,c6", "y6");
	init_random(b, "w7", dims2(k, 28), (size_t)k * 28, 12);
	mb_node(b, g, "Gemm", "g7", "a,w7", "y7");
	mb_node(b, g, "Add", "res7", "y7,r", "y7a");
	const char *outs[] = { "y1", "y2", "y3r", "y4", "y5", "y6", "y7a" };
	for (size_t i = 0; i < sizeof outs / sizeof *outs; i++)
		mb_output(b, g, outs[i]);
	return b;
}

static void check_gemm(int64_t m, int64_t k)
{
	for (size_t i = 0; i < sizeof isas / sizeof *isas; i++)
		cr_expect_eq(verify_isa(gemm_model(m, k), isas[i]), 0, "M %lld K %lld --isa %s",
		             (long long)m, (long long)k, isas[i]);
}

Test(kern_gemm, gemv_long_k)
{
	check_gemm(1, 1536);
}

Test(kern_gemm, few_rows_short_k)
{
	check_gemm(3, 5);
}

Test(kern_gemm, rows_past_a_tile)
{
	check_gemm(13, 37);
}

Test(kern_gemm, k_one)
{
	check_gemm(7, 1);
}

/* Rows in several cache chunks (K 600: 13 rows a chunk), and their rest. */
Test(kern_gemm, rows_in_chunks)
{
	check_gemm(31, 600);
}

/* A big B (over KT_BIG_B_BYTES packed, aot/kern.h): 40 rows (four tiles
 * of 9 and a rest) in K blocks (aot/kern_gemm.c: k_block_of), the partial sums
 * in scratch, 300 columns (main panels and a tail), a residual Add and a
 * Relu fused after the last block. */
Test(kern_gemm, big_b_in_k_blocks)
{
	for (size_t i = 0; i < sizeof isas / sizeof *isas + 1; i++) {
		mb *b = mb_new(13);
		Onnx__GraphProto *g = mb_main(b);
		mb_input(b, g, "a", MC_FLOAT, "40,512");
		mb_input(b, g, "r", MC_FLOAT, "40,300");
		init_random(b, "w", "512,300", 512 * 300, 1);
		init_random(b, "c", "300", 300, 2);
		mb_node(b, g, "Gemm", "gemm", "a,w,c", "y");
		mb_node(b, g, "Add", "res", "y,r", "s");
		mb_node(b, g, "Relu", "relu", "s", "o");
		mb_output(b, g, "o");
		if (i < sizeof isas / sizeof *isas) {
			cr_expect_eq(verify_isa(b, isas[i]), 0, "--isa %s", isas[i]);
			continue;
		}
		/* avx512: the blocked kernel, its one scratch the partial sums */
		mc_program p;
		mc_graph *gr = program_isa(b, "avx512", &p);
		cr_assert_eq(p.n_kernels, 1);
		int scratch = scratch_buffers(p.kernels[0]);
		char *text = kernel_text(p.kernels[0]);
		cr_expect_eq(scratch, 1, "one scratch buffer, the partial sums:\n%s", text);
		free(text);
		mc_program_free(&p);
		mc_graph_free(gr);
		mb_free(b);
	}
}

/* MatMul: melspectrogram's [1,1,5,257] x [257,32]; batched A with a fused
 * Relu; a 1-D A; a runtime B (the plain lowering). */
static mb *matmul_model(void)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "a", MC_FLOAT, "1,1,5,257");
	mb_input(b, g, "a2", MC_FLOAT, "2,3,7,9");
	mb_input(b, g, "v", MC_FLOAT, "9");
	mb_input(b, g, "rb", MC_FLOAT, "9,5");
	init_random(b, "w", "257,32", 257 * 32, 1);
	init_random(b, "w2", "9,17", 9 * 17, 2);
	mb_node(b, g, "MatMul", "mm", "a,w", "y");
	mb_node(b, g, "MatMul", "mm2", "a2,w2", "y2");
	mb_node(b, g, "Relu", "relu2", "y2", "y2r");
	mb_node(b, g, "MatMul", "mv", "v,w2", "z");
	mb_node(b, g, "MatMul", "mr", "a2,rb", "u");
	mb_output(b, g, "y");
	mb_output(b, g, "y2r");
	mb_output(b, g, "z");
	mb_output(b, g, "u");
	return b;
}

Test(kern_gemm, matmul_batched_vector_and_runtime_b)
{
	for (size_t i = 0; i < sizeof isas / sizeof *isas; i++)
		cr_expect_eq(verify_isa(matmul_model(), isas[i]), 0, "--isa %s", isas[i]);
}

/* The fast kernel runs: the weights are packed (a program weight the model
 * does not have) and, on avx512, the kernel is made of vectors. */
Test(kern_gemm, packs_b_and_vectorises)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "a", MC_FLOAT, "1,64");
	init_random(b, "w", "64,32", 64 * 32, 1);
	mb_node(b, g, "MatMul", "mm", "a,w", "y");
	mb_output(b, g, "y");
	mc_program p;
	mc_graph *gr = program_isa(b, "avx512", &p);
	cr_assert_eq(p.n_kernels, 1);
	char *text = kernel_text(p.kernels[0]);
	cr_expect_not_null(strstr(text, "x16"), "16-lane vectors:\n%s", text);
	bool packed = false;
	for (int i = 0; i < p.kernels[0]->n_bufs; i++)
		packed = packed || p.kernels[0]->bufs[i].packed != NULL;
	cr_expect(packed, "B is packed:\n%s", text);
	free(text);
	mc_program_free(&p);
	mc_graph_free(gr);
	mb_free(b);
}

/* --blas openblas: products of 64 rows, 128 columns and depth 128 call
 * cblas_sgemm; the model runs against the interpreter (rtol 1e-4). Needs
 * OpenBLAS (scripts/install-deps installs libopenblas-dev); without it the
 * test says so and is skipped. */
static bool have_openblas(void)
{
	static int have = -1;
	if (have < 0) {
		have = system("printf 'void cblas_sgemm(void);int main(void){cblas_sgemm();return 0;}' | "
		              "cc -x c - -o /dev/null -lopenblas >/dev/null 2>&1") == 0;
		if (!have)
			fprintf(stderr, "SKIP --blas openblas tests: no OpenBLAS to link (libopenblas-dev)\n");
	}
	return have;
}

/* b (input x) compiled with --blas openblas: the calls in its source
 * (before b runs against the interpreter, which verify takes). */
static int blas_calls(mb *b, int64_t min_macs)
{
	char *dir = make_temp_dir();
	char path[512];
	snprintf(path, sizeof path, "%s/m.onnx", dir);
	cr_assert_eq(mb_write(b, path), 0);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.blas = "openblas";
	o.blas_min_macs = min_macs;
	cr_assert_eq(mc_compile(path, dir, &o), 0);
	char *src = read_file_in(dir, "t.c", NULL);
	int calls = 0;
	for (const char *s = src; (s = strstr(s, "cblas_sgemm(")); s++)
		calls++;
	cr_assert_eq(!!strstr(src, "#include <cblas.h>"), calls > 0);
	free(src);
	rm_tree(dir);
	free(dir);
	o.harness = false;
	cr_assert_eq(verify_model_with(b, &o), 0, "%s", diag_all());
	return calls;
}

/* 8 rows by a constant 128 x 128: fewer rows than MC_BLAS_MIN_ROWS. */
static mb *eight_rows(void)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "8,128");
	init_random(b, "w", "128,128", 128 * 128, 7);
	mb_node(b, mb_main(b), "MatMul", "mm", "x,w", "y");
	mb_output(b, mb_main(b), "y");
	return b;
}

Test(kern_gemm, blas_matmul_gemm_and_batches)
{
	if (!have_openblas())
		return;
	/* a batch of rows by a constant, a bias and a Relu fused after it */
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "2,64,128");
	init_random(b, "w", "128,160", 128 * 160, 1);
	init_random(b, "c", "160", 160, 2);
	mb_node(b, mb_main(b), "MatMul", "mm", "x,w", "p");
	mb_node(b, mb_main(b), "Add", "add", "p,c", "q");
	mb_node(b, mb_main(b), "Relu", "relu", "q", "y");
	mb_output(b, mb_main(b), "y");
	cr_assert_eq(blas_calls(b, -1), 1);
	/* Gemm: B transposed, alpha, beta times a bias by column */
	b = mb_new(13);
	mb_input(b, mb_main(b), "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "64,128");
	init_random(b, "w", "192,128", 192 * 128, 3);
	init_random(b, "c", "192", 192, 4);
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "Gemm", "gemm", "x,w,c", "y");
	mb_attr_int(b, n, "transB", 1);
	mb_attr_float(b, n, "alpha", 0.5f);
	mb_attr_float(b, n, "beta", 2.0f);
	mb_output(b, mb_main(b), "y");
	cr_assert_eq(blas_calls(b, -1), 1);
	/* Gemm: A transposed, a full C */
	b = mb_new(13);
	mb_input(b, mb_main(b), "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "128,64");
	init_random(b, "w", "128,128", 128 * 128, 5);
	init_random(b, "c", "64,128", 64 * 128, 6);
	n = mb_node(b, mb_main(b), "Gemm", "gemm", "x,w,c", "y");
	mb_attr_int(b, n, "transA", 1);
	mb_output(b, mb_main(b), "y");
	cr_assert_eq(blas_calls(b, -1), 1);
	/* two inputs, a batch of products: straight into the output */
	b = mb_new(13);
	mb_input(b, mb_main(b), "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "3,64,128");
	mb_input(b, mb_main(b), "z", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "3,128,128");
	mb_node(b, mb_main(b), "MatMul", "mm", "x,z", "y");
	mb_output(b, mb_main(b), "y");
	cr_assert_eq(blas_calls(b, -1), 1);
	/* too few rows for the default rule; every product with a floor of 1 */
	cr_assert_eq(blas_calls(eight_rows(), -1), 0);
	cr_assert_eq(blas_calls(eight_rows(), 1), 1);
}

/* --blas openblas: a channels-last 1x1 convolution of stride 1 is one
 * product of the pixels by the weight; the bias and a Relu after it. A
 * 3x3 one and a 1x1 of stride 2 stay with the tiles. */
Test(kern_gemm, blas_pointwise_convolutions)
{
	if (!have_openblas())
		return;
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "1,128,8,10");
	init_random(b, "w1", "160,128,1,1", 160 * 128, 1);
	init_random(b, "b1", "160", 160, 2);
	init_random(b, "w2", "128,160,3,3", 128 * 160 * 9, 3);
	init_random(b, "w3", "144,128,1,1", 144 * 128, 4);
	init_random(b, "w4", "160,144,1,1", 160 * 144, 5);
	mb_node(b, mb_main(b), "Conv", "c1", "x,w1,b1", "p");
	mb_node(b, mb_main(b), "Relu", "r1", "p", "q");
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "Conv", "c2", "q,w2", "s");
	mb_attr_ints(b, n, "pads", (int64_t[]){ 1, 1, 1, 1 }, 4);
	mb_node(b, mb_main(b), "Conv", "c3", "s,w3", "t");
	n = mb_node(b, mb_main(b), "Conv", "c4", "t,w4", "y");
	mb_attr_ints(b, n, "strides", (int64_t[]){ 2, 2 }, 2);
	mb_output(b, mb_main(b), "y");
	cr_assert_eq(blas_calls(b, -1), 2);
}
