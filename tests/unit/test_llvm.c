/* The llvm target (targets/llvm): the ar writer, and models compiled to
 * libNAME.a, linked to the test driver and checked against the reference
 * (mc_verify). Where modelc was built without LLVM, the target must say so. */
#define _GNU_SOURCE /* memmem */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../aot/aot.h"
#include "../../targets/llvm/archive.h"
#include "compile_helpers.h"
#include "model_builder.h"

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

Test(llvm_archive, index_names_and_members)
{
	const char *syms_a[] = { "m_run", "m_inputs" }, *syms_b[] = { "other" };
	mc_ar_member m[2] = {
		{ "m.o", "abc", 3, syms_a, 2 },
		{ "a_member_name_longer_than_15.o", "wxyz", 4, syms_b, 1 },
	};
	unsigned char *ar;
	size_t len;
	cr_assert_eq(mc_ar_build(m, 2, &ar, &len), 0);
	cr_assert_eq(memcmp(ar, "!<arch>\n", 8), 0);
	/* the index: "/" header, 3 symbols, offsets of the headers that define them */
	cr_assert_eq(memcmp(ar + 8, "/               ", 16), 0);
	const unsigned char *idx = ar + 8 + 60;
	cr_assert_eq(be32(idx), 3);
	uint32_t off_a = be32(idx + 4), off_a2 = be32(idx + 8), off_b = be32(idx + 12);
	cr_assert_eq(off_a, off_a2);
	cr_assert_str_eq((const char *)idx + 16, "m_run");
	cr_assert_eq(memcmp(ar + off_a, "m.o/", 4), 0);
	cr_assert_eq(memcmp(ar + off_a + 60, "abc", 3), 0);
	cr_assert_eq(ar[off_a + 63], '\n', "odd members are padded to an even length");
	cr_assert_eq(memcmp(ar + off_b, "/0 ", 3), 0, "long names point into the // table");
	cr_assert_eq(memcmp(ar + off_b + 60, "wxyz", 4), 0);
	cr_assert_eq(off_b + 60 + 4, len);
	/* the // table holds the long name */
	cr_assert_not_null(memmem(ar, len, "a_member_name_longer_than_15.o/\n", 32));
	/* deterministic: the same bytes again */
	unsigned char *again;
	size_t len2;
	cr_assert_eq(mc_ar_build(m, 2, &again, &len2), 0);
	cr_assert(len == len2 && memcmp(ar, again, len) == 0);
	free(again);
	free(ar);
	mc_ar_member bad = { "dir/x.o", "a", 1, NULL, 0 };
	cr_assert_eq(mc_ar_build(&bad, 1, &ar, &len), -1);
}

/* y = Relu(x) * 2 - x: a pointwise chain fused into one kernel */
static mb *chain_model(void)
{
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "3,37");
	float two = 2.0f;
	mb_init_floats(b, g, "two", "", &two, 1);
	mb_node(b, g, "Relu", "r", "x", "r");
	mb_node(b, g, "Mul", "m", "r,two", "m");
	mb_node(b, g, "Sub", "s", "m,x", "y");
	mb_output(b, g, "y");
	return b;
}

/* A 3x3 convolution with bias and Relu, then a Gemm: the register-tiled
 * kernels, vector code where the ISA has it. */
static mb *conv_model(void)
{
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "1,5,9,11");
	float w[7 * 5 * 3 * 3], bias[7], fc[7 * 9 * 11 * 4];
	for (size_t i = 0; i < sizeof w / sizeof *w; i++)
		w[i] = (float)((int)(i * 37 % 19) - 9) / 16.0f;
	for (size_t i = 0; i < 7; i++)
		bias[i] = (float)i / 8.0f - 0.4f;
	for (size_t i = 0; i < sizeof fc / sizeof *fc; i++)
		fc[i] = (float)((int)(i * 13 % 23) - 11) / 64.0f;
	mb_init_floats(b, g, "w", "7,5,3,3", w, sizeof w / sizeof *w);
	mb_init_floats(b, g, "b", "7", bias, 7);
	mb_init_floats(b, g, "fc", "693,4", fc, sizeof fc / sizeof *fc);
	Onnx__NodeProto *c = mb_node(b, g, "Conv", "c", "x,w,b", "c");
	mb_attr_ints(b, c, "pads", (const int64_t[]){ 1, 1, 1, 1 }, 4);
	mb_node(b, g, "Relu", "r", "c", "r");
	Onnx__NodeProto *f = mb_node(b, g, "Flatten", "f", "r", "f");
	mb_attr_int(b, f, "axis", 1);
	mb_node(b, g, "MatMul", "mm", "f,fc", "y");
	mb_output(b, g, "y");
	return b;
}

/* Integer edges the llvm target must lower as the C target does: division
 * and Mod of negatives (truncating; Mod takes the divisor's sign), by -1,
 * shifts past the width give 0. (Division by zero the reference refuses,
 * so the conformance run is what checks the rest.) */
static mb *int_model(void)
{
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "a", ONNX__TENSOR_PROTO__DATA_TYPE__INT32, "6");
	int64_t d[] = { 5, -1, 3, -7, 1, 2 }, sh[] = { 33, 40, 1, 0, 31, 32 };
	mb_init_ints(b, g, "d", ONNX__TENSOR_PROTO__DATA_TYPE__INT32, "6", d, 6);
	mb_init_ints(b, g, "sh64", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "6", sh, 6);
	mb_attr_int(b, mb_node(b, g, "Cast", "csh", "sh64", "sh"), "to", ONNX__TENSOR_PROTO__DATA_TYPE__UINT32);
	mb_node(b, g, "Div", "div", "a,d", "q");
	mb_node(b, g, "Mod", "mod", "a,d", "r");
	mb_node(b, g, "Add", "add", "q,r", "y");
	mb_attr_int(b, mb_node(b, g, "Cast", "cu", "y", "yu"), "to", ONNX__TENSOR_PROTO__DATA_TYPE__UINT32);
	mb_attr_string(b, mb_node(b, g, "BitShift", "shl", "yu,sh", "l"), "direction", "LEFT");
	mb_attr_string(b, mb_node(b, g, "BitShift", "shr", "yu,sh", "z"), "direction", "RIGHT");
	mb_output(b, g, "y");
	mb_output(b, g, "l");
	mb_output(b, g, "z");
	return b;
}

static int verify_llvm_opt(mb *b, const char *cpu, const char *opt)
{
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.target = "llvm";
	o.cpu = cpu;
	o.opt = opt;
	return verify_model_with(b, &o);
}

static int verify_llvm(mb *b, const char *cpu)
{
	return verify_llvm_opt(b, cpu, NULL);
}

Test(llvm_target, runs_like_the_reference)
{
	if (!mc_llvm_available())
		cr_skip_test("modelc was built without LLVM");
	cr_assert_eq(verify_llvm(chain_model(), NULL), 0);
	cr_assert_eq(verify_llvm(conv_model(), NULL), 0);
	cr_assert_eq(verify_llvm(conv_model(), "native"), 0, "vector kernels for this machine's CPU");
	cr_assert_eq(verify_llvm(int_model(), NULL), 0);
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t le16(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

/* A QDQ 3x3 convolution with per-channel int8 weights, an int32 bias and
 * Relu on int8 (or uint8) activations, float input and output: on --isa
 * avx2 and avx512 its integer kernels (aot/kern_qvec.c) compute on i32
 * vectors (8-bit vector loads and stores, DOT2, RQ32, MIN/MAX, SHL).
 * ties: scales of powers of two and small weights, the output's factor
 * 2^-4 exactly: a sixteenth of the results are ties that RQ32 rounds to
 * even. */
static mb *qconv_model(bool u8, bool ties)
{
	mb *b = mb_new(17);
	Onnx__GraphProto *g = mb_main(b);
	int dt = u8 ? ONNX__TENSOR_PROTO__DATA_TYPE__UINT8 : ONNX__TENSOR_PROTO__DATA_TYPE__INT8;
	float xs = ties ? 1.0f / 64 : u8 ? 2.0f / 255 : 2.0f / 127, ys = ties ? 1.0f / 512 : 0.05f, ws[16], bs[16];
	int64_t xz = u8 ? 128 : 0, yz = u8 ? 0 : -128, w[16 * 16 * 9], bias[16], wz[16] = { 0 };
	mb_input(b, g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "1,16,6,7");
	mb_init_floats(b, g, "xs", "", &xs, 1);
	mb_init_ints(b, g, "xz", dt, "", &xz, 1);
	mb_init_floats(b, g, "ys", "", &ys, 1);
	mb_init_ints(b, g, "yz", dt, "", &yz, 1);
	for (size_t i = 0; i < sizeof w / sizeof *w; i++)
		w[i] = ties ? (int64_t)(i * 37 % 5) - 2 : (int64_t)(i * 37 % 255) - 127;
	for (int c = 0; c < 16; c++) {
		ws[c] = ties ? 1.0f / 128 : 0.0005f + 0.0002f * (float)c; /* outputs mostly inside y's range */
		bs[c] = xs * ws[c];
		bias[c] = (c * 389 % 2001) - 1000;
	}
	mb_init_ints(b, g, "W", ONNX__TENSOR_PROTO__DATA_TYPE__INT8, "16,16,3,3", w, sizeof w / sizeof *w);
	mb_init_floats(b, g, "W_s", "16", ws, 16);
	mb_init_ints(b, g, "W_z", ONNX__TENSOR_PROTO__DATA_TYPE__INT8, "16", wz, 16);
	mb_init_ints(b, g, "B", ONNX__TENSOR_PROTO__DATA_TYPE__INT32, "16", bias, 16);
	mb_init_floats(b, g, "B_s", "16", bs, 16);
	mb_node(b, g, "QuantizeLinear", "qx", "x,xs,xz", "xq");
	mb_node(b, g, "DequantizeLinear", "dqx", "xq,xs,xz", "xd");
	mb_attr_int(b, mb_node(b, g, "DequantizeLinear", "dqw", "W,W_s,W_z", "w"), "axis", 0);
	mb_attr_int(b, mb_node(b, g, "DequantizeLinear", "dqb", "B,B_s", "b"), "axis", 0);
	Onnx__NodeProto *c = mb_node(b, g, "Conv", "c", "xd,w,b", "c");
	mb_attr_ints(b, c, "pads", (const int64_t[]){ 1, 1, 1, 1 }, 4);
	mb_node(b, g, "Relu", "r", "c", "r");
	mb_node(b, g, "QuantizeLinear", "qy", "r,ys,yz", "yq");
	mb_node(b, g, "DequantizeLinear", "dqy", "yq,ys,yz", "y");
	mb_output(b, g, "y");
	return b;
}

/* i32 vectors (--isa avx2, avx512): the llvm target's plain IR vectors
 * compute what the reference does, to the bit (one quantisation step of the
 * output is far above verify's tolerance), with and without --cpu native
 * (where LLVM may select pmaddwd or VNNI for DOT2). */
Test(llvm_target, integer_vectors_run_like_the_reference)
{
	if (!mc_llvm_available())
		cr_skip_test("modelc was built without LLVM");
	static const char *const isas[] = { "avx2", "avx512" };
	static const char *const cpus[] = { NULL, "native" };
	bool ran = false;
	for (int i = 0; i < 2; i++) {
		if (!host_runs_isa(isas[i]))
			continue;
		for (int m = 0; m < 3; m++)
			for (int c = 0; c < 2; c++) {
				mc_compile_opts o;
				mc_compile_opts_init(&o);
				o.name = "t";
				o.target = "llvm";
				o.isa = isas[i];
				o.cpu = cpus[c];
				cr_expect_eq(verify_model_with(qconv_model(m == 1, m == 2), &o), 0, "%s%s%s: %s", isas[i],
				             m == 1 ? " uint8" : m == 2 ? " ties" : "", c ? " native" : "", diag_all());
			}
		ran = true;
	}
	if (!ran)
		cr_skip_test("this machine runs neither avx2 nor avx512");
	/* the kernels are vector code: <N x i32> in the IR */
	char *dir = make_temp_dir();
	char path[512], out[512];
	snprintf(path, sizeof path, "%s/model.onnx", dir);
	snprintf(out, sizeof out, "%s/gen", dir);
	mb *b = qconv_model(false, false);
	cr_assert_eq(mb_write(b, path), 0);
	mb_free(b);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.target = "llvm";
	o.isa = "avx2";
	o.emit_llvm = true;
	cr_assert_eq(mc_compile(path, out, &o), 0, "%s", diag_all());
	size_t len;
	char *ll = read_file_in(out, "t.ll", &len);
	cr_assert_not_null(ll);
	cr_expect_not_null(strstr(ll, "<8 x i32>"), "no i32 vectors in t.ll");
	free(ll);
	rm_tree(dir);
	free(dir);
}

/* Bytes of the .text sections of the 32-bit little-endian ELF object dir/file. */
static size_t elf32_text_bytes(const char *dir, const char *file)
{
	size_t len;
	unsigned char *f = (unsigned char *)read_file_in(dir, file, &len);
	cr_assert_not_null(f, "%s/%s", dir, file);
	cr_assert(len > 52 && !memcmp(f, "\177ELF", 4) && f[4] == 1 && f[5] == 1, "not ELF32 LE");
	size_t shoff = le32(f + 0x20), shentsize = le16(f + 0x2e), shnum = le16(f + 0x30);
	size_t names = le32(f + shoff + le16(f + 0x32) * shentsize + 0x10);
	size_t text = 0;
	for (size_t i = 0; i < shnum; i++) {
		const unsigned char *sh = f + shoff + i * shentsize;
		if (!strncmp((const char *)f + names + le32(sh), ".text", 5))
			text += le32(sh + 0x14);
	}
	free(f);
	return text;
}

/* --opt: Os and Oz run like the reference and make less code than O3 for
 * a Cortex-M4 (where the tiles' loops unroll most). */
Test(llvm_target, size_levels_make_less_code)
{
	if (!mc_llvm_available())
		cr_skip_test("modelc was built without LLVM");
	cr_assert_eq(verify_llvm_opt(conv_model(), NULL, "Os"), 0);
	cr_assert_eq(verify_llvm_opt(conv_model(), NULL, "Oz"), 0);
	char *dir = make_temp_dir();
	char path[512], out[512];
	snprintf(path, sizeof path, "%s/model.onnx", dir);
	mb *b = conv_model();
	cr_assert_eq(mb_write(b, path), 0);
	mb_free(b);
	const char *levels[] = {"O3", "Os", "Oz"};
	size_t text[3];
	for (int i = 0; i < 3; i++) {
		mc_compile_opts o;
		mc_compile_opts_init(&o);
		o.name = "t";
		o.target = "llvm";
		o.triple = "thumbv7em-none-eabihf";
		o.cpu = "cortex-m4";
		o.opt = levels[i];
		snprintf(out, sizeof out, "%s/%s", dir, levels[i]);
		cr_assert_eq(mc_compile(path, out, &o), 0, "%s", diag_all());
		text[i] = elf32_text_bytes(out, "t.o");
	}
	cr_assert_gt(text[0], 0);
	cr_assert_lt(text[1], text[0], "Os %zu bytes, O3 %zu", text[1], text[0]);
	cr_assert_leq(text[2], text[1], "Oz %zu bytes, Os %zu", text[2], text[1]);
	rm_tree(dir);
	free(dir);
}

Test(llvm_target, writes_a_library_and_no_sources)
{
	if (!mc_llvm_available())
		cr_skip_test("modelc was built without LLVM");
	char *dir = make_temp_dir();
	char path[512], out[512], f[600];
	snprintf(path, sizeof path, "%s/model.onnx", dir);
	snprintf(out, sizeof out, "%s/gen", dir);
	mb *b = chain_model();
	cr_assert_eq(mb_write(b, path), 0);
	mb_free(b);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.target = "llvm";
	o.triple = "aarch64-linux-gnu";
	o.emit_llvm = true;
	cr_assert_eq(mc_compile(path, out, &o), 0);
	const char *want[] = { "t.h", "t.o", "libt.a", "t.ll", "modelc_rt.h", "t.json", "build.ninja" };
	struct stat st;
	for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
		snprintf(f, sizeof f, "%s/%s", out, want[i]);
		cr_assert_eq(stat(f, &st), 0, "%s is missing", want[i]);
	}
	snprintf(f, sizeof f, "%s/t.c", out);
	cr_assert_neq(stat(f, &st), 0, "no C sources");
	/* the object is an aarch64 ELF file: e_machine 183 */
	snprintf(f, sizeof f, "%s/t.o", out);
	FILE *fp = fopen(f, "rb");
	unsigned char h[20];
	cr_assert_eq(fread(h, 1, 20, fp), 20);
	fclose(fp);
	cr_assert_eq(memcmp(h, "\177ELF", 4), 0);
	cr_assert_eq(h[18] | h[19] << 8, 183);
	rm_tree(dir);
	free(dir);
}

Test(llvm_target, bad_options_are_errors)
{
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.cpu = "native";
	diag_capture();
	cr_assert_eq(mc_compile("/nonexistent.onnx", "/tmp/x", &o), -1);
	cr_assert_eq(diag_count_with("--cpu needs --target llvm"), 1, "%s", diag_all());
	o.cpu = NULL;
	o.opt = "Os";
	diag_capture();
	cr_assert_eq(mc_compile("/nonexistent.onnx", "/tmp/x", &o), -1);
	cr_assert_eq(diag_count_with("--opt needs --target llvm (the C and cuda targets are optimised "
	                             "by the flags of the compiler that builds them)"), 1, "%s", diag_all());
	o.opt = NULL;
	o.cpu = "native";
	if (!mc_llvm_available()) {
		o.cpu = NULL;
		o.target = "llvm";
		diag_capture();
		cr_assert_eq(mc_compile("/nonexistent.onnx", "/tmp/x", &o), -1);
		cr_assert_eq(diag_count_with("not in this build"), 1, "%s", diag_all());
		return;
	}
	char *dir = make_temp_dir();
	char path[512], out[512];
	snprintf(path, sizeof path, "%s/model.onnx", dir);
	snprintf(out, sizeof out, "%s/gen", dir);
	mb *b = chain_model();
	cr_assert_eq(mb_write(b, path), 0);
	mb_free(b);
	o.cpu = NULL;
	o.target = "llvm";
	o.opt = "O2";
	diag_capture();
	cr_assert_eq(mc_compile(path, out, &o), -1);
	cr_assert_eq(diag_count_with("unknown --opt 'O2' (known: O3, Os, Oz)"), 1, "%s", diag_all());
	o.opt = NULL;
	o.triple = "nosucharch-unknown-none";
	diag_capture();
	cr_assert_eq(mc_compile(path, out, &o), -1);
	cr_assert_eq(diag_count_with("--triple 'nosucharch-unknown-none'"), 1, "%s", diag_all());
	struct stat st;
	cr_assert_neq(stat(out, &st), 0, "nothing written after the error");
	rm_tree(dir);
	free(dir);
}
