/* The cuda target's output (targets/cuda/emit_cuda.c): the files, the grid
 * mapping of parallel loops, If guards, the API, determinism and the
 * options. Running it needs a GPU (tests/cuda/check device); where nvcc
 * is installed, the sources are built here with warnings as errors. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../aot/aot.h"
#include "model_builder.h"

static char *read_text(const char *dir, const char *file)
{
	char *s = read_file_in(dir, file, NULL);
	cr_assert(s, "no %s/%s", dir, file);
	return s;
}

static int count(const char *s, const char *needle)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Writes b's model as dir/file (and frees b); the path, malloc'd. */
static char *write_model(mb *b, const char *dir, const char *file)
{
	char *path = malloc(strlen(dir) + strlen(file) + 2);
	sprintf(path, "%s/%s", dir, file);
	cr_assert_eq(mb_write(b, path), 0);
	mb_free(b);
	return path;
}

/* Compile options of the cuda target for a model named name. */
static mc_compile_opts cuda_opts(const char *name)
{
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = name;
	o.target = "cuda";
	return o;
}

/* y = Relu(Conv(x, w) + b) * s: one conv kernel with an epilogue and a
 * pointwise kernel, both with parallel loop nests. */
static char *conv_model_hw(const char *dir, int hw)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	char shape[64];
	snprintf(shape, sizeof shape, "1,2,%d,%d", hw, hw);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, shape);
	float w[4 * 2 * 3 * 3], bias[4] = { 0.1f, -0.2f, 0.3f, 0 }, s = 2;
	for (int i = 0; i < (int)(sizeof w / sizeof *w); i++)
		w[i] = (float)((i * 7) % 5 - 2) / 4;
	mb_init_floats(b, g, "w", "4,2,3,3", w, sizeof w / sizeof *w);
	mb_init_floats(b, g, "b", "4", bias, 4);
	mb_init_floats(b, g, "s", "", &s, 1);
	Onnx__NodeProto *n = mb_node(b, g, "Conv", "conv", "x,w,b", "c");
	int64_t pads[4] = { 1, 1, 1, 1 };
	mb_attr_ints(b, n, "pads", pads, 4);
	mb_node(b, g, "Relu", "relu", "c", "r");
	mb_node(b, g, "Softmax", "softmax", "r", "sm");
	mb_node(b, g, "Mul", "mul", "sm,s", "y");
	mb_output(b, g, "y");
	return write_model(b, dir, "conv.onnx");
}

static char *conv_model(const char *dir)
{
	return conv_model_hw(dir, 5);
}

/* y = If(cond, x + 1, x * 3) */
static char *if_model(const char *dir)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "4");
	mb_input(b, g, "cond", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, "");
	float one = 1, three = 3;
	Onnx__GraphProto *tg = mb_graph(b, "then"), *eg = mb_graph(b, "else");
	mb_init_floats(b, tg, "one", "", &one, 1);
	mb_node(b, tg, "Add", "then_add", "x,one", "t_out");
	mb_output(b, tg, "t_out");
	mb_init_floats(b, eg, "three", "", &three, 1);
	mb_node(b, eg, "Mul", "else_mul", "x,three", "e_out");
	mb_output(b, eg, "e_out");
	Onnx__NodeProto *n = mb_node(b, g, "If", "if", "cond", "y");
	mb_attr_graph(b, n, "then_branch", tg);
	mb_attr_graph(b, n, "else_branch", eg);
	mb_output(b, g, "y");
	return write_model(b, dir, "if.onnx");
}

static bool have_nvcc(char *nvcc, size_t n)
{
	const char *candidates[] = { "/usr/local/cuda/bin/nvcc", "nvcc" };
	for (size_t i = 0; i < 2; i++) {
		char cmd[256];
		snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", candidates[i]);
		if (system(cmd) == 0) {
			snprintf(nvcc, n, "%s", candidates[i]);
			return true;
		}
	}
	return false;
}

/* nvcc, with warnings as errors, compiles NAME.cu and the driver. */
static void nvcc_builds(const char *dir, const char *name)
{
	char nvcc[256], cmd[8192];
	if (!have_nvcc(nvcc, sizeof nvcc))
		return; /* the text checks stand alone; CI's tests/cuda/check says SKIP loudly */
#if defined(__SANITIZE_ADDRESS__)
	/* CI's sanitized pass checks modelc, not nvcc: the first pass built these */
	(void)cmd;
	(void)dir;
	(void)name;
	return;
#endif
	snprintf(cmd, sizeof cmd,
	         "cd '%s' && %s -O1 -std=c++17 -Werror all-warnings -Xcompiler -Wall,-Wextra -arch=sm_90 "
	         "-c %s.cu -o k.o >nvcc.log 2>&1 && cc -std=c99 -Wall -Wextra -Werror -c %s_weights.c -o w.o "
	         ">>nvcc.log 2>&1",
	         dir, nvcc, name, name);
	cr_assert_eq(system(cmd), 0, "nvcc failed: %s", cmd);
}

Test(cuda, emits_grid_kernels_and_the_api)
{
	char *tmp = make_temp_dir(), out[4096];
	char *model = conv_model(tmp);
	snprintf(out, sizeof out, "%s/out", tmp);
	mc_compile_opts o = cuda_opts("cnet");
	o.harness = true;
	cr_assert_eq(mc_compile(model, out, &o), 0);
	char *cu = read_text(out, "cnet.cu"), *h = read_text(out, "cnet.h"), *nj = read_text(out, "build.ninja");
	char *w = read_text(out, "cnet_weights.c"), *js = read_text(out, "cnet.json");
	cr_assert(count(cu, "__global__") >= 2, "kernels: %d", count(cu, "__global__"));
	/* the conv's nest over 4 x 5 x 5 outputs is one flat index of 100 threads */
	cr_assert(strstr(cu, "t < 100u;"), "conv not collapsed onto the grid:\n%s", cu);
	cr_assert(strstr(cu, "blockIdx.x * blockDim.x + threadIdx.x"));
	cr_assert(strstr(cu, "__restrict__"));
	cr_assert_null(strstr(cu, " restrict "), "C99 restrict in CUDA C++");
	cr_assert(strstr(cu, "cudaStreamBeginCapture") && strstr(cu, "cudaGraphLaunch"));
	cr_assert(strstr(cu, "cnet_launch_all"));
	/* every __global__ function is launched once, through the one launcher */
	int kernels = count(cu, "__global__");
	cr_assert_eq(count(cu, ", dev, NULL, s, "), kernels, "%s", cu);
	/* programmatic dependent launch: every kernel first waits for the one
	 * before it (sm_90 code only); every launch but the first may overlap */
	cr_assert_eq(count(cu, "(unsigned char *const dev, int, int)\n{\n\tMODELC_CUDA_WAIT_FOR_PREVIOUS();\n"), kernels, "%s", cu);
	cr_assert(strstr(cu, "__CUDA_ARCH__ >= 900") && strstr(cu, "griddepcontrol.wait;"), "%s", cu);
	cr_assert(strstr(cu, "cudaLaunchAttributeProgrammaticStreamSerialization"), "%s", cu);
	cr_assert_eq(count(cu, ", dev, NULL, s, 0)) != cudaSuccess)"), 1, "%s", cu);
	cr_assert_eq(count(cu, ", dev, NULL, s, pdl)) != cudaSuccess)"), kernels - 1, "%s", cu);
	cr_assert(strstr(cu, "m->pdl = fa.ptxVersion >= 90;") && strstr(h, "#define CNET_CUDA_NO_PDL 2u"), "%s", cu);
	cr_assert(strstr(h, "#define CNET_NUM_LAUNCHES ") && strstr(cu, "cnet_launch_names["));
	cr_assert(strstr(h, "#define CNET_DEVICE_BYTES ") && strstr(h, "#define CNET_INPUT_0_OFFSET "));
	cr_assert(strstr(h, "int cnet_cuda_init(cnet_cuda *m, void *device, cudaStream_t stream, unsigned flags);"));
	cr_assert(strstr(h, "int cnet_cuda_run(cnet_cuda *m);"));
	cr_assert(strstr(nj, "-gencode arch=compute_87,code=sm_87") && strstr(nj, "code=compute_90"));
	cr_assert(strstr(w, "#include \"modelc_rt.h\""), "weights must build without CUDA headers");
	cr_assert(strstr(js, "\"target\": \"cuda\""));
	char main_c[4096];
	snprintf(main_c, sizeof main_c, "%s/cnet_main.c", out);
	cr_assert_eq(access(main_c, R_OK), 0);
	nvcc_builds(out, "cnet");
	free(cu), free(h), free(nj), free(w), free(js);
	rm_tree(tmp);
	free(model);
	free(tmp);
}

Test(cuda, if_branches_become_guards_read_on_the_device)
{
	char *tmp = make_temp_dir(), out[4096];
	char *model = if_model(tmp);
	snprintf(out, sizeof out, "%s/out", tmp);
	mc_compile_opts o = cuda_opts("ifm");
	cr_assert_eq(mc_compile(model, out, &o), 0);
	char *cu = read_text(out, "ifm.cu");
	/* every kernel is inside a branch and returns early unless it is taken:
	 * no host decision, so the sequence stays one graph */
	cr_assert_eq(count(cu, "an If branch not taken"), count(cu, "__global__"), "%s", cu);
	cr_assert(strstr(cu, "] != 0)) /* an If") && strstr(cu, "] == 0)) /* an If"), "%s", cu);
	nvcc_builds(out, "ifm");
	free(cu);
	rm_tree(tmp);
	free(model);
	free(tmp);
}

Test(cuda, output_is_deterministic)
{
	char *tmp = make_temp_dir(), a[4096], b[4096];
	char *model = conv_model(tmp);
	snprintf(a, sizeof a, "%s/a", tmp);
	snprintf(b, sizeof b, "%s/b", tmp);
	mc_compile_opts o = cuda_opts("cnet");
	cr_assert_eq(mc_compile(model, a, &o), 0);
	cr_assert_eq(mc_compile(model, b, &o), 0);
	const char *files[] = { "cnet.cu", "cnet.h", "cnet_weights.c", "cnet.json" };
	for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
		char *x = read_text(a, files[i]), *y = read_text(b, files[i]);
		cr_assert_str_eq(x, y, "%s differs", files[i]);
		free(x), free(y);
	}
	rm_tree(tmp);
	free(model);
	free(tmp);
}

Test(cuda, options_are_checked)
{
	char *tmp = make_temp_dir(), out[4096];
	char *model = conv_model(tmp);
	snprintf(out, sizeof out, "%s/out", tmp);
	mc_compile_opts o = cuda_opts("cnet");
	diag_capture();
	o.isa = "avx2";
	cr_assert_eq(mc_compile(model, out, &o), -1);
	cr_assert_eq(diag_count_with("--isa chooses CPU vector code"), 1, "%s", diag_all());
	o.isa = NULL;
	o.cuda_arch = "sm90";
	cr_assert_eq(mc_compile(model, out, &o), -1);
	cr_assert_eq(diag_count_with("--cuda-arch 'sm90'"), 1, "%s", diag_all());
	o.cuda_arch = "sm_80,sm_90a";
	cr_assert_eq(mc_compile(model, out, &o), 0, "%s", diag_all());
	char *nj = read_text(out, "build.ninja");
	cr_assert(strstr(nj, "arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a"), "%s", nj);
	free(nj);
	o.target = "c";
	cr_assert_eq(mc_compile(model, out, &o), -1);
	cr_assert_eq(diag_count_with("--cuda-arch needs --target cuda"), 1, "%s", diag_all());
	/* --tf32: fp32 convolutions on tensor cores; needs sm_80+ and fp32 */
	o.target = "cuda";
	o.tf32 = true;
	o.cuda_arch = "sm_75,sm_90";
	cr_assert_eq(mc_compile(model, out, &o), -1);
	cr_assert_eq(diag_count_with("--tf32 needs tensor cores of sm_80 or newer, and --cuda-arch 'sm_75,sm_90'"), 1,
	             "%s", diag_all());
	o.cuda_arch = NULL;
	o.dtype = "fp16";
	cr_assert_eq(mc_compile(model, out, &o), -1);
	cr_assert_eq(diag_count_with("--tf32 needs --target cuda and --dtype fp32"), 1, "%s", diag_all());
	o.dtype = NULL;
	o.target = "c";
	cr_assert_eq(mc_compile(model, out, &o), -1);
	cr_assert_eq(diag_count_with("--tf32 needs --target cuda and --dtype fp32"), 2, "%s", diag_all());
	o.tf32 = false;
	o.target = "rocm";
	o.cuda_arch = NULL;
	cr_assert_eq(mc_compile(model, out, &o), -1);
	cr_assert_eq(diag_count_with("unknown target 'rocm' (known: c, cuda, llvm)"), 1, "%s", diag_all());
	rm_tree(tmp);
	free(model);
	free(tmp);
}

/* y = x W with x 1x256: ten outputs, each a 256-long sum. */
static char *gemv_model(const char *dir)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "1,256");
	static float w[256 * 10];
	for (int i = 0; i < 256 * 10; i++)
		w[i] = (float)(i % 7) / 8 - 0.25f;
	mb_init_floats(b, g, "w", "256,10", w, 256 * 10);
	mb_node(b, g, "MatMul", "mm", "x,w", "y");
	mb_output(b, g, "y");
	return write_model(b, dir, "gemv.onnx");
}

Test(cuda, long_reductions_over_few_outputs_split_over_a_warp)
{
	char *tmp = make_temp_dir(), out[4096];
	char *model = gemv_model(tmp);
	snprintf(out, sizeof out, "%s/out", tmp);
	mc_compile_opts o = cuda_opts("gv");
	cr_assert_eq(mc_compile(model, out, &o), 0);
	char *cu = read_text(out, "gv.cu");
	/* a warp per output: lanes stride the 256 products, then shuffles add the
	 * partial sums; the start value is added once, after them */
	cr_assert(strstr(cu, ">> 5; t < 10u;"), "%s", cu);
	cr_assert(strstr(cu, "(gv_idx)lane;") && strstr(cu, "+= 32) { /* split over"), "%s", cu);
	cr_assert_eq(count(cu, "__shfl_xor_sync(0xffffffffu, "), 1, "%s", cu);
	cr_assert(strstr(cu, "dim3(2, 1, 1), 256, dev, NULL, s, "), "10 warps: 320 threads in blocks of 256\n%s", cu);
	nvcc_builds(out, "gv");
	free(cu);
	rm_tree(tmp);
	free(model);
	free(tmp);
}

/* The same with an integer sum (a quantized model's matrix products and
 * convolutions): exact in any order, so split over the lanes alike. */
Test(cuda, integer_reductions_split_over_a_warp_too)
{
	char *tmp = make_temp_dir(), out[4096];
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__INT32, "1,256");
	static int64_t w[256 * 10];
	for (int i = 0; i < 256 * 10; i++)
		w[i] = i % 7 - 3;
	mb_init_ints(b, g, "w", MC_INT32, "256,10", w, 256 * 10);
	mb_node(b, g, "MatMul", "mm", "x,w", "y");
	mb_output(b, g, "y");
	char *model = write_model(b, tmp, "igemv.onnx");
	snprintf(out, sizeof out, "%s/out", tmp);
	mc_compile_opts o = cuda_opts("ig");
	cr_assert_eq(mc_compile(model, out, &o), 0);
	char *cu = read_text(out, "ig.cu");
	cr_assert(strstr(cu, "(ig_idx)lane;") && strstr(cu, "+= 32) { /* split over"), "%s", cu);
	cr_assert(strstr(cu, "const int32_t u = __shfl_xor_sync(0xffffffffu, "), "%s", cu);
	nvcc_builds(out, "ig");
	free(cu);
	rm_tree(tmp);
	free(model);
	free(tmp);
}

Test(cuda, tf32_convolutions_use_tensor_cores)
{
	char *tmp = make_temp_dir(), out[4096];
	char *model = conv_model_hw(tmp, 8); /* 64 pixels: the conv template */
	snprintf(out, sizeof out, "%s/out", tmp);
	mc_compile_opts o = cuda_opts("t");
	cr_assert_eq(mc_compile(model, out, &o), 0);
	char *cu = read_text(out, "t.cu");
	/* fp32 by default: float FMAs, no tensor cores */
	cr_assert(strstr(cu, "fmaf(") && !strstr(cu, "mma.sync"), "%s", cu);
	free(cu);
	o.tf32 = true;
	cr_assert_eq(mc_compile(model, out, &o), 0);
	cu = read_text(out, "t.cu");
	/* operands rounded to TF32 on their way to shared memory, float sums */
	cr_assert(strstr(cu, "k0 += 32) {") && strstr(cu, "unsigned As[2][64][36];"), "%s", cu);
	/* the weights were rounded to TF32 when generated; the activations are
	 * rounded as they load */
	cr_assert(strstr(cu, "u[i] = __float_as_uint(ra[h][i]);") && !strstr(cu, "\"f\"(ra[h][i])") &&
	          strstr(cu, "\"=r\"(u[i]) : \"f\"(rb[h][i])"), "%s", cu);
	cr_assert(strstr(cu, "cvt.rna.tf32.f32") && strstr(cu, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
	          "%s", cu);
	cr_assert_null(strstr(cu, "fmaf("), "%s", cu);
	nvcc_builds(out, "t");
	free(cu);
	rm_tree(tmp);
	free(model);
	free(tmp);
}

Test(cuda, fp16_stores_weights_and_activations_as_half)
{
	char *tmp = make_temp_dir(), out[4096];
	char *model = conv_model_hw(tmp, 8); /* 64 pixels: the conv template */
	snprintf(out, sizeof out, "%s/out", tmp);
	mc_compile_opts o = cuda_opts("h");
	o.dtype = "fp16";
	cr_assert_eq(mc_compile(model, out, &o), 0);
	char *cu = read_text(out, "h.cu"), *w = read_text(out, "h_weights.c"), *js = read_text(out, "h.json");
	/* the conv's weights (packed), bias and activations are float16; the
	 * graph's input and output stay float32; arithmetic stays float */
	cr_assert(strstr(w, "const uint16_t h_w"), "%s", w);
	cr_assert_null(strstr(w, "const float h_w"), "%s", w);
	cr_assert(strstr(cu, "const uint16_t *__restrict__ const wt"), "%s", cu);
	cr_assert(strstr(cu, "modelc_f16_to_f32(") && strstr(cu, "modelc_f32_to_f16("), "%s", cu);
	cr_assert(strstr(js, "\"dtype\": \"fp16\""));
	/* the conv on tensor cores (the default archs are sm_80 or newer): half
	 * fragments, float sums; its input is the graph's float input, rounded
	 * to half as it loads */
	cr_assert(strstr(cu, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"), "%s", cu);
	/* 64 k a step in shared memory (half the steps of TF32's 32) */
	cr_assert(strstr(cu, "k0 += 64) {") && strstr(cu, "unsigned As[2][64][36];"), "%s", cu);
	cr_assert(strstr(cu, "modelc_f32_to_f16(xn["), "%s", cu);
	cr_assert_null(strstr(cu, "fmaf("), "%s", cu);
	nvcc_builds(out, "h");
	free(cu), free(w), free(js);
	/* fp16 is the cuda target's; unknown dtypes are refused */
	diag_capture();
	o.target = "c";
	cr_assert_eq(mc_compile(model, out, &o), -1);
	cr_assert_eq(diag_count_with("--dtype fp16 needs --target cuda"), 1, "%s", diag_all());
	o.target = "cuda";
	o.dtype = "bf8";
	cr_assert_eq(mc_compile(model, out, &o), -1);
	cr_assert_eq(diag_count_with("unknown --dtype 'bf8'"), 1, "%s", diag_all());
	rm_tree(tmp);
	free(model);
	free(tmp);
}

/* Device offsets of the buffers declared as TYPE[COUNT] (written ones
 * unless `reads`), in order of appearance; their number. */
static int offsets_of(const char *cu, const char *decl, bool reads, size_t *off, int max)
{
	int n = 0;
	for (const char *s = cu; (s = strstr(s, "*)(dev + ")) && n < max; s++) {
		const char *line = s;
		while (line > cu && line[-1] != '\n')
			line--;
		const char *end = strchr(s, '\n');
		bool is_const = strncmp(line, "\tconst ", 7) == 0;
		const char *d = strstr(line, decl);
		if (!d || (end && d > end) || is_const != reads)
			continue;
		off[n++] = strtoull(s + strlen("*)(dev + "), NULL, 10);
	}
	return n;
}

/* Concat without a copy, in half precision: each producer stores its slab
 * at its place in the half-precision output (the plan's offsets are in
 * float32 bytes; half storage halves them), and the Concat has no kernel. */
Test(cuda, concat_slabs_in_half_precision)
{
	char *tmp = make_temp_dir(), out[4096];
	mb *b = mb_new(19);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "1,16");
	mb_node(b, g, "Relu", "ra", "x", "a");
	mb_node(b, g, "Neg", "nb", "x", "bb");
	mb_attr_int(b, mb_node(b, g, "Concat", "c1", "a,bb", "ab"), "axis", 1);
	mb_attr_int(b, mb_node(b, g, "Concat", "c2", "ab,x", "y"), "axis", 1);
	mb_output(b, g, "y");
	char *model = write_model(b, tmp, "cat.onnx");
	snprintf(out, sizeof out, "%s/out", tmp);
	const char *dtypes[] = { "fp32", "fp16" }, *slab[] = { "float32[16]", "float16[16]" },
	           *whole[] = { "float32[32]", "float16[32]" };
	for (int d = 0; d < 2; d++) {
		mc_compile_opts o = cuda_opts("cat");
		o.dtype = dtypes[d];
		cr_assert_eq(mc_compile(model, out, &o), 0);
		char *cu = read_text(out, "cat.cu");
		size_t stores[4], loads[4];
		cr_assert_eq(offsets_of(cu, slab[d], false, stores, 4), 2, "%s", cu);
		cr_assert_eq(offsets_of(cu, whole[d], true, loads, 4), 1, "%s", cu);
		cr_assert_eq(stores[1], stores[0] + (d ? 32 : 64), "%s: slabs at %zu and %zu\n%s", dtypes[d], stores[0],
		             stores[1], cu);
		cr_assert_eq(loads[0], stores[0], "%s", cu);
		cr_assert_null(strstr(cu, "Concat 'c1'"), "%s", cu);
		cr_assert_eq(count(cu, "__global__"), 4, "Relu, Neg, the output's Concat (a launch per input)\n%s", cu);
		nvcc_builds(out, "cat");
		free(cu);
	}
	rm_tree(tmp);
	free(model);
	free(tmp);
}

/* Attention-shaped products: q = x Wq (a constant B, packed), s = q x^T
 * and y = Softmax(s) x (batched, both operands computed), and a Gemm
 * (transB, bias) over a long reduction of few tiles. */
static char *products_model(const char *dir)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "1,2,48,32");
	mb_input(b, g, "z", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "48,256");
	static float wq[32 * 32], wg[16 * 256], cg[16];
	for (int i = 0; i < 32 * 32; i++)
		wq[i] = (float)((i * 7) % 11 - 5) / 16;
	for (int i = 0; i < 16 * 256; i++)
		wg[i] = (float)((i * 5) % 13 - 6) / 32;
	for (int i = 0; i < 16; i++)
		cg[i] = (float)i / 8;
	mb_init_floats(b, g, "wq", "32,32", wq, 32 * 32);
	mb_init_floats(b, g, "wg", "16,256", wg, 16 * 256);
	mb_init_floats(b, g, "cg", "16", cg, 16);
	mb_node(b, g, "MatMul", "q", "x,wq", "q");
	Onnx__NodeProto *t = mb_node(b, g, "Transpose", "t", "x", "xt");
	mb_attr_ints(b, t, "perm", (int64_t[]){ 0, 1, 3, 2 }, 4);
	mb_node(b, g, "MatMul", "s", "q,xt", "s");
	mb_node(b, g, "Softmax", "p", "s", "p");
	mb_node(b, g, "MatMul", "y", "p,x", "y");
	Onnx__NodeProto *gm = mb_node(b, g, "Gemm", "gemm", "z,wg,cg", "gz");
	mb_attr_int(b, gm, "transB", 1);
	mb_output(b, g, "y");
	mb_output(b, g, "gz");
	return write_model(b, dir, "products.onnx");
}

Test(cuda, matrix_products_use_tensor_cores)
{
	char *tmp = make_temp_dir(), out[4096];
	char *model = products_model(tmp);
	snprintf(out, sizeof out, "%s/out", tmp);
	mc_compile_opts o = cuda_opts("p");
	cr_assert_eq(mc_compile(model, out, &o), 0);
	char *cu = read_text(out, "p.cu");
	/* fp32: no tensor cores, no product template */
	cr_assert_eq(count(cu, "a matrix product"), 0, "%s", cu);
	free(cu);
	for (int half = 0; half < 2; half++) {
		o.tf32 = !half;
		o.dtype = half ? "fp16" : NULL;
		cr_assert_eq(mc_compile(model, out, &o), 0);
		cu = read_text(out, "p.cu");
		/* the three MatMuls and the Gemm, each one launch */
		cr_assert_eq(count(cu, "a matrix product"), 4, "%s", cu);
		cr_assert(strstr(cu, half ? "m16n8k16.row.col.f32.f16.f16.f32" : "m16n8k8.row.col.f32.tf32.tf32.f32"),
		          "%s", cu);
		/* the batched ones step over both operands' matrices */
		cr_assert(strstr(cu, "const auto *__restrict__ const an = a + (size_t)n * 1536;"), "%s", cu);
		/* the Gemm's K of 256 over one tile is split, a second launch adding
		 * the splits' partial sums */
		cr_assert(strstr(cu, "1 of M 48 x K 256 by K x P 16, in 4 splits of 64") ||
		          strstr(cu, "1 of M 48 x K 256 by K x P 16, in 8 splits of 32"), "%s", cu);
		cr_assert(strstr(cu, "float *__restrict__ const part = b"), "%s", cu);
		/* the packed constant B rows are k-contiguous: 16-byte loads */
		cr_assert(strstr(cu, half ? "rb[h] = *(const uint4 *)&bn[px * 32 + kx];"
		                          : "*(const float4 *)&bn[px * 32 + kx]"), "%s", cu);
		nvcc_builds(out, "p");
		free(cu);
	}
	rm_tree(tmp);
	free(model);
	free(tmp);
}

/* A LayerNormalization's rows a warp each: the sums split over the lanes,
 * and so are the stores after them (not every lane storing the row). */
Test(cuda, layernorm_rows_share_their_stores_among_lanes)
{
	char *tmp = make_temp_dir(), out[4096];
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "16,256");
	static float one[256];
	for (int i = 0; i < 256; i++)
		one[i] = 1;
	mb_init_floats(b, g, "gamma", "256", one, 256);
	mb_node(b, g, "LayerNormalization", "ln", "x,gamma", "y");
	mb_output(b, g, "y");
	char *model = write_model(b, tmp, "ln.onnx");
	snprintf(out, sizeof out, "%s/out", tmp);
	mc_compile_opts o = cuda_opts("l");
	cr_assert_eq(mc_compile(model, out, &o), 0);
	char *cu = read_text(out, "l.cu");
	cr_assert_eq(count(cu, "/* split over the warp's lanes */"), 2, "%s", cu);
	cr_assert_eq(count(cu, "/* shared among the warp's lanes */"), 1, "%s", cu);
	cr_assert(strstr(cu, "__syncwarp();"), "%s", cu);
	nvcc_builds(out, "l");
	free(cu);
	rm_tree(tmp);
	free(model);
	free(tmp);
}

#define MODELC_CUDA_SPLITS
#include "../../runtime-min/modelc_rt.h"

/* The K splits follow the device: the sources (one library) hold each
 * split template's plan, init asks modelc_cuda_splits again with the
 * device's multiprocessor count (or the flags'), the launches' grids and
 * the kernels read the result, and the sum after a template adds only the
 * slices the device wrote. For a Jetson Orin's 16 SMs and an H100's 132,
 * from the same sources: each plan's splits cover K in whole steps, at
 * most the planned slices, and a 3x3 convolution of 13 tiles splits 9
 * ways on 132 SMs but fewer on 16. */
Test(cuda, one_library_fits_16_and_132_sms)
{
	char *tmp = make_temp_dir(), out[4096], out2[4096];
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "1,64,28,28");
	static float w[64 * 64 * 9];
	for (int i = 0; i < 64 * 64 * 9; i++)
		w[i] = (float)((i * 7) % 9 - 4) / 64;
	mb_init_floats(b, g, "w", "64,64,3,3", w, 64 * 64 * 9);
	Onnx__NodeProto *n = mb_node(b, g, "Conv", "conv", "x,w", "y");
	mb_attr_ints(b, n, "pads", (int64_t[]){ 1, 1, 1, 1 }, 4);
	mb_output(b, g, "y");
	char *model = write_model(b, tmp, "c33.onnx");
	char *products = products_model(tmp);
	snprintf(out, sizeof out, "%s/out", tmp);
	snprintf(out2, sizeof out2, "%s/out2", tmp);
	mc_compile_opts o = cuda_opts("s");
	o.dtype = "fp16";
	for (int which = 0; which < 2; which++) {
		const char *m = which ? products : model;
		cr_assert_eq(mc_compile(m, out, &o), 0);
		cr_assert_eq(mc_compile(m, out2, &o), 0);
		char *cu = read_text(out, "s.cu"), *cu2 = read_text(out2, "s.cu");
		cr_assert_str_eq(cu, cu2, "one set of sources");
		cr_assert(strstr(cu, "cudaDeviceGetAttribute(&m->sms, cudaDevAttrMultiProcessorCount, gpu)"), "%s", cu);
		cr_assert(strstr(cu, "m->sms = (int)(flags >> 8);"), "%s", cu);
		/* the template's kernel takes the device's count, its split length
		 * computed as the host's */
		cr_assert(strstr(cu, "(unsigned char *const dev, const int splits, const int ksplit)"), "%s", cu);
		cr_assert(strstr(cu, "const int SPLITS = splits, KSPLIT = ksplit; /* at most "), "%s", cu);
		cr_assert(strstr(cu, " * splits[0]), 256, dev, splits + 0, s"), "%s", cu);
		cr_assert(strstr(cu, "m->splits[2 * i + 1] = (int)len;"), "%s", cu);
		/* the sum takes it too and skips the slices past it */
		cr_assert(strstr(cu, "((s_idx)splits)"), "%s", cu);
		cr_assert(strstr(cu, "(1 < v"), "%s", cu);
		const char *p = strstr(cu, "_split_plans[");
		cr_assert(p, "%s", cu);
		p = strstr(p, "= {\n");
		cr_assert(p, "%s", cu);
		p += 4; /* the table's first row */
		int plans = 0, differ = 0;
		long long tiles, k, most;
		int step, mma;
		while (sscanf(p, "\t{%lld, %lld, %d, %d, %lld},", &tiles, &k, &step, &mma, &most) == 5) {
			int got[2];
			for (int d = 0; d < 2; d++) {
				int64_t len;
				int sms = d ? 132 : 16, s = modelc_cuda_splits(tiles, k, step, mma, sms, most, &len);
				cr_assert(s >= 1 && s <= most && len % step == 0 && s * len >= k && (s - 1) * len < k &&
				          len == modelc_cuda_split_len(k, s, step),
				          "%d SMs: %d splits of %lld over %lld (at most %lld)", sms, s, (long long)len, k, most);
				got[d] = s;
			}
			cr_assert_eq(got[1], most, "the plan is 132 SMs'");
			differ += got[0] != got[1];
			plans++;
			p = strchr(p, '\n') + 1;
		}
		cr_assert(plans >= 1, "%s", cu);
		if (!which) /* the convolution: 13 tiles */
			cr_assert_eq(differ, 1, "16 SMs split it otherwise");
		nvcc_builds(out, "s");
		free(cu);
		free(cu2);
	}
	rm_tree(tmp);
	free(model);
	free(products);
	free(tmp);
}

/* On tensor cores, convolutions run channels-last: a 3x3 convolution's
 * im2col loads 8 channels of a tap at once, a 1x1's rows of channels; the
 * max pool between them runs a thread per output element, and the spatial
 * mean a warp per channel (one loop over the pixels, split over lanes).
 * --layout nchw keeps them channels-first. */
Test(cuda, tensor_core_convolutions_run_channels_last)
{
	char *tmp = make_temp_dir(), out[4096];
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "1,16,16,16");
	static float w1[32 * 16 * 9], w2[32 * 32];
	for (int i = 0; i < 32 * 16 * 9; i++)
		w1[i] = (float)((i * 7) % 9 - 4) / 64;
	for (int i = 0; i < 32 * 32; i++)
		w2[i] = (float)((i * 5) % 11 - 5) / 64;
	mb_init_floats(b, g, "w1", "32,16,3,3", w1, 32 * 16 * 9);
	mb_init_floats(b, g, "w2", "32,32,1,1", w2, 32 * 32);
	Onnx__NodeProto *n = mb_node(b, g, "Conv", "conv1", "x,w1", "c1");
	mb_attr_ints(b, n, "pads", (int64_t[]){ 1, 1, 1, 1 }, 4);
	mb_node(b, g, "Relu", "relu", "c1", "r1");
	n = mb_node(b, g, "MaxPool", "pool", "r1", "p1");
	mb_attr_ints(b, n, "kernel_shape", (int64_t[]){ 2, 2 }, 2);
	mb_attr_ints(b, n, "strides", (int64_t[]){ 2, 2 }, 2);
	mb_node(b, g, "Conv", "conv2", "p1,w2", "c2");
	mb_node(b, g, "GlobalAveragePool", "gap", "c2", "y");
	mb_output(b, g, "y");
	char *model = write_model(b, tmp, "cl.onnx");
	snprintf(out, sizeof out, "%s/out", tmp);
	mc_compile_opts o = cuda_opts("cl");
	o.dtype = "fp16";
	cr_assert_eq(mc_compile(model, out, &o), 0);
	char *cu = read_text(out, "cl.cu");
	cr_assert(strstr(cu, "k1_conv1: NhwcConv 'conv1'") && strstr(cu, "k3_conv2: NhwcConv 'conv2'"), "%s", cu);
	cr_assert(strstr(cu, "*(const uint4 *)&xn[(ih * W + iw) * CIN + kx % CIN]"), "%s", cu);
	cr_assert(strstr(cu, "CIN = 16"), "%s", cu);
	/* the 1x1: row px of 32 channels */
	cr_assert(strstr(cu, "*(const uint4 *)&xn[px * 32 + kx]"), "%s", cu);
	/* 8 x 8 x 32 outputs, a thread each */
	cr_assert(strstr(cu, "\"cl_k2_pool <<<8, 256>>>\""), "%s", cu);
	cr_assert(strstr(cu, "\"cl_k4_gap <<<4, 256>>> (warps)\""), "%s", cu);
	nvcc_builds(out, "cl");
	free(cu);
	o.layout = "nchw";
	cr_assert_eq(mc_compile(model, out, &o), 0);
	cu = read_text(out, "cl.cu");
	cr_assert(!strstr(cu, "NhwcConv") && !strstr(cu, "CIN + kx % CIN]"), "%s", cu);
	free(cu);
	rm_tree(tmp);
	free(model);
	free(tmp);
}

/* A MatMul whose product Split along its last axis gives Attention's Q,
 * K and V (a packed projection); Q also read by a Relu where asked. */
static char *packed_attention_model(const char *tmp, const char *file, bool q_also_relu)
{
	mb *b = mb_new(23);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "2,40,32");
	static float w[32 * 192];
	for (int i = 0; i < 32 * 192; i++)
		w[i] = (float)((i * 5) % 11 - 5) / 32;
	mb_init_floats(b, g, "w", "32,192", w, 32 * 192);
	mb_node(b, g, "MatMul", "qkv", "x,w", "packed");
	Onnx__NodeProto *n = mb_node(b, g, "Split", "split", "packed", "q,k,v");
	mb_attr_int(b, n, "axis", 2);
	mb_attr_int(b, n, "num_outputs", 3);
	n = mb_node(b, g, "Attention", "attn", "q,k,v", "y");
	mb_attr_int(b, n, "q_num_heads", 4);
	mb_attr_int(b, n, "kv_num_heads", 4);
	mb_output(b, g, "y");
	if (q_also_relu) {
		mb_node(b, g, "Relu", "relu", "q", "z");
		mb_output(b, g, "z");
	}
	return write_model(b, tmp, file);
}

/* Q, K and V as the parts of a packed projection are read in place: no
 * Split kernel, each operand at its columns of the product's rows. A
 * Split read otherwise stays. */
Test(cuda, attention_reads_a_packed_projection_in_place)
{
	char *tmp = make_temp_dir(), out[4096];
	char *model = packed_attention_model(tmp, "packed.onnx", false);
	snprintf(out, sizeof out, "%s/out", tmp);
	mc_compile_opts o = cuda_opts("pk");
	cr_assert_eq(mc_compile(model, out, &o), 0);
	char *cu = read_text(out, "pk.cu");
	cr_assert(!strstr(cu, "_split("), "no Split kernel:\n%s", cu);
	cr_assert(strstr(cu, "const float *__restrict__ const k = b") && strstr(cu, " + 64;\n"), "%s", cu);
	cr_assert(strstr(cu, " + 128;\n"), "V from column 128:\n%s", cu);
	cr_assert(strstr(cu, "(size_t)s * 192"), "rows as wide as the product's:\n%s", cu);
	nvcc_builds(out, "pk");
	free(cu);
	free(model);
	/* Q also read by a Relu: the Split is stored */
	model = packed_attention_model(tmp, "packed2.onnx", true);
	cr_assert_eq(mc_compile(model, out, &o), 0);
	cu = read_text(out, "pk.cu");
	cr_assert(strstr(cu, "_split("), "a Split kernel:\n%s", cu);
	cr_assert(!strstr(cu, " + 128;\n"), "%s", cu);
	free(cu);
	rm_tree(tmp);
	free(model);
	free(tmp);
}

/* ONNX Attention (3-D, grouped heads, a float mask) runs as one template
 * launch: four warps a query row (70 keys: 3 chunks of 32), two rows a
 * block, the softmax online, the result through the fused nest over Y;
 * in fp32
 * (float4 rows of K) and fp16 (8 halves a load). */
Test(cuda, attention_runs_as_one_kernel)
{
	char *tmp = make_temp_dir(), out[4096];
	mb *b = mb_new(23);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "q", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "2,40,64");
	mb_input(b, g, "k", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "2,70,32");
	mb_input(b, g, "v", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "2,70,48");
	mb_input(b, g, "mask", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "40,70");
	mb_node(b, g, "Relu", "krelu", "k", "k2"); /* computed: half in fp16, as the graph's inputs are not */
	Onnx__NodeProto *n = mb_node(b, g, "Attention", "attn", "q,k2,v,mask", "y");
	mb_attr_int(b, n, "q_num_heads", 4);
	mb_attr_int(b, n, "kv_num_heads", 2);
	mb_node(b, g, "Relu", "relu", "y", "z");
	mb_output(b, g, "z");
	char *model = write_model(b, tmp, "attn.onnx");
	snprintf(out, sizeof out, "%s/out", tmp);
	mc_compile_opts o = cuda_opts("at");
	for (int half = 0; half < 2; half++) {
		o.dtype = half ? "fp16" : NULL;
		cr_assert_eq(mc_compile(model, out, &o), 0);
		char *cu = read_text(out, "at.cu");
		cr_assert(strstr(cu, "/* attention: 2 x 4 heads (2 of K and V) of 40 queries over 70 keys, 16 / 24 wide, "
		                     "a mask added */"), "%s", cu);
		cr_assert_eq(count(cu, "__global__"), 2, "K's Relu, then one launch (the Relu after fused):\n%s", cu);
		cr_assert(strstr(cu, "dim3(160, 1, 1)") && strstr(cu, "WARPS = 4, ROWS = 2, ALL_ROWS = 320 }"),
		          "320 query rows, two a block\n%s", cu);
		cr_assert(strstr(cu, "GROUP = 2"), "%s", cu);
		cr_assert(strstr(cu, half ? "const uint4 w = *(const uint4 *)&kr[d];" : "const float4 w = *(const float4 *)&kr[d];"),
		          "%s", cu);
		/* the mask [40, 70] broadcast over batches and heads */
		cr_assert(strstr(cu, "mask[(size_t)n * 0 + (size_t)h * 0 + (size_t)s * 70 + (size_t)t * 1]"), "%s", cu);
		nvcc_builds(out, "at");
		free(cu);
	}
	rm_tree(tmp);
	free(model);
	free(tmp);
}

/* A 7x7 depthwise convolution channels-last (fp16, after a dense 1x1 that
 * puts the image channels-last): a thread per channel and run of 4
 * outputs along a row, each input of a window row loaded once for the
 * run. 62 columns: the last run's outputs 2 and 3 lie past the row and
 * are not stored. With 4 times fewer channels the runs would leave too
 * few threads: a thread per output. */
static char *depthwise_7x7_model(const char *tmp, int ch)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "1,16,64,62");
	static float w1[64 * 16], w2[64 * 49], b2[64];
	for (int i = 0; i < 64 * 16; i++)
		w1[i] = (float)((i * 7) % 9 - 4) / 64;
	for (int i = 0; i < 64 * 49; i++)
		w2[i] = (float)((i * 5) % 11 - 5) / 64;
	for (int i = 0; i < 64; i++)
		b2[i] = (float)(i % 5) / 8;
	char dims[32];
	snprintf(dims, sizeof dims, "%d,16,1,1", ch);
	mb_init_floats(b, g, "w1", dims, w1, ch * 16);
	snprintf(dims, sizeof dims, "%d,1,7,7", ch);
	mb_init_floats(b, g, "w2", dims, w2, ch * 49);
	snprintf(dims, sizeof dims, "%d", ch);
	mb_init_floats(b, g, "b2", dims, b2, ch);
	mb_node(b, g, "Conv", "pw", "x,w1", "c1");
	Onnx__NodeProto *n = mb_node(b, g, "Conv", "dw", "c1,w2,b2", "y");
	mb_attr_ints(b, n, "pads", (int64_t[]){ 3, 3, 3, 3 }, 4);
	mb_attr_int(b, n, "group", ch);
	mb_output(b, g, "y");
	return write_model(b, tmp, "dw.onnx");
}

Test(cuda, depthwise_convolutions_run_along_rows)
{
	char *tmp = make_temp_dir(), out[4096];
	snprintf(out, sizeof out, "%s/out", tmp);
	mc_compile_opts o = cuda_opts("dw");
	o.dtype = "fp16";
	char *model = depthwise_7x7_model(tmp, 64);
	cr_assert_eq(mc_compile(model, out, &o), 0);
	char *cu = read_text(out, "dw.cu");
	cr_assert(strstr(cu, "k2_dw: NhwcConv 'dw'"), "%s", cu);
	/* 64 rows x 16 runs x 64 channels: a quarter of the outputs' threads */
	cr_assert(strstr(cu, "\"dw_k2_dw <<<256, 256>>>\""), "%s", cu);
	const char *k = strstr(cu, "k2_dw(");
	cr_assert(k && strstr(k, "t < 65536u;"), "%s", cu);
	/* a run's 4 outputs, the last two checked against the row's end */
	const char *guard = strstr(k, "if (v44 < 62) {");
	cr_assert(guard && strstr(guard + 1, "if (v46 < 62) {") && strstr(k, "(v1 * 4) + 3;"), "%s", k);
	/* the bias loaded once, each output's sum starting from it */
	cr_assert(strstr(k, "float v7 = v6;\n\t\tfloat v8 = v6;\n\t\tfloat v9 = v6;\n\t\tfloat v10 = v6;"), "%s", k);
	/* input column 10 of the run's window feeds only its last output, through the last tap */
	cr_assert(strstr(k, "v10 = v10 + (v39 * v20);\n\t\t}"), "%s", k);
	nvcc_builds(out, "dw");
	free(cu);
	free(model);
	/* 16 channels: runs of 4 (or 2) would leave fewer than 32768 threads */
	model = depthwise_7x7_model(tmp, 16);
	cr_assert_eq(mc_compile(model, out, &o), 0);
	cu = read_text(out, "dw.cu");
	k = strstr(cu, "k2_dw(");
	cr_assert(k && strstr(k, "t < 63488u;") && !strstr(k, " < 62) {"), "%s", cu);
	free(cu);
	free(model);
	rm_tree(tmp);
	free(tmp);
}

/* A channels-last global mean of a large image with few channels: the
 * slices' sums in float32 scratch, then each channel's slices in order
 * (two launches, a thread per channel and slice first); of a small image,
 * one launch (a warp per channel). */
Test(cuda, long_reductions_split_over_slices)
{
	char *tmp = make_temp_dir(), out[4096];
	snprintf(out, sizeof out, "%s/out", tmp);
	for (int big = 0; big < 2; big++) {
		mb *b = mb_new(13);
		Onnx__GraphProto *g = mb_main(b);
		mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, big ? "1,40,40,8" : "1,16,16,8");
		Onnx__NodeProto *n = mb_node(b, g, "ReduceMean", "gap", "x", "y");
		mb_attr_ints(b, n, "axes", (int64_t[]){ 1, 2 }, 2);
		mb_output(b, g, "y");
		char *model = write_model(b, tmp, "gap.onnx");
		mc_compile_opts o = cuda_opts("gap");
		cr_assert_eq(mc_compile(model, out, &o), 0);
		char *cu = read_text(out, "gap.cu");
		if (big) {
			/* 1600 rows: 100 slices of 16, a thread each per channel */
			cr_assert(strstr(cu, "\"gap_k0_gap_p0 <<<4, 256>>>\""), "%s", cu);
			cr_assert(strstr(cu, "\"gap_k0_gap_p1 <<<1, 256>>> (warps)\""), "%s", cu);
			cr_assert(strstr(cu, "float32[800], scratch"), "%s", cu);
			cr_assert(strstr(cu, "< 16; "), "%s", cu);
			cr_assert(strstr(cu, "/ 1600.0f"), "%s", cu);
		} else {
			cr_assert(strstr(cu, "\"gap_k0_gap <<<1, 256>>> (warps)\"") && !strstr(cu, "scratch"), "%s", cu);
		}
		nvcc_builds(out, "gap");
		free(cu);
		free(model);
	}
	rm_tree(tmp);
	free(tmp);
}
