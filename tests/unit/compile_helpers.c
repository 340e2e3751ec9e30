/* Test support for the compiler (see compile_helpers.h). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile_helpers.h"

bool host_runs_isa(const char *isa)
{
	const mc_isa *want = mc_isa_find(isa), *host = mc_isa_find("native");
	switch (want->kind) {
	case MC_ISA_GENERIC: case MC_ISA_CORTEX_M: return true;
	case MC_ISA_AVX2: return host->kind == MC_ISA_AVX2 || host->kind == MC_ISA_AVX512;
	default: return want->kind == host->kind;
	}
}

int verify_model_isa(mb *b, const char *isa)
{
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.isa = isa;
	return verify_model_isa_with(b, &o);
}

int verify_model_isa_with(mb *b, const mc_compile_opts *o)
{
	if (!host_runs_isa(o->isa)) {
		mb_free(b);
		return 0;
	}
	return verify_model_cflags(b, o, "-std=c99 -O1 -march=native -Wall -Wextra -Werror");
}

int verify_model(mb *b, size_t fold_limit)
{
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	if (fold_limit)
		o.fold_limit = fold_limit;
	return verify_model_with(b, &o);
}

int verify_model_with(mb *b, const mc_compile_opts *o)
{
	return verify_model_cflags(b, o, "-std=c99 -O1 -Wall -Wextra -Werror");
}

int verify_model_cflags(mb *b, const mc_compile_opts *o, const char *cflags)
{
	char *dir = make_temp_dir();
	char path[512];
	snprintf(path, sizeof path, "%s/model.onnx", dir);
	cr_assert_eq(mb_write(b, path), 0);
	mc_verify_opts v;
	mc_verify_opts_init(&v);
	v.rtol = 1e-4;
	v.atol = 1e-5;
	v.cflags = cflags;
	int rc = mc_verify(path, o, &v);
	rm_tree(dir);
	free(dir);
	mb_free(b);
	return rc;
}

mc_graph *program_of(mb *b, mc_program *p)
{
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	return program_with(b, &o, p);
}

mc_graph *program_with(mb *b, const mc_compile_opts *o, mc_program *p)
{
	mc_graph *g = mb_import(b, ".", NULL);
	cr_assert_not_null(g);
	cr_assert_eq(mc_infer_graph(g), 0);
	mc_target_config t;
	cr_assert_eq(mc_target_resolve(o, &t), 0);
	cr_assert_eq(mc_build_program(g, &t, o, p), 0);
	return g;
}

int scratch_buffers(const mc_kernel *k)
{
	int n = 0;
	for (int i = 0; i < k->n_bufs; i++)
		n += k->bufs[i].value < 0 && !k->bufs[i].packed;
	return n;
}

char *kernel_text(const mc_kernel *k)
{
	char *text;
	size_t len;
	FILE *f = open_memstream(&text, &len);
	cr_assert_not_null(f);
	mc_kernel_dump(k, f);
	fclose(f);
	return text;
}

bool have_board(void)
{
	static int have = -1;
	if (have < 0) {
		have = system("command -v arm-none-eabi-gcc >/dev/null 2>&1 && "
		              "command -v qemu-system-arm >/dev/null 2>&1") == 0;
		if (!have)
			fprintf(stderr, "SKIP the Cortex-M4 board runs: no arm-none-eabi-gcc or qemu-system-arm\n");
	}
	return have;
}

/* Writes into dir/main.c a program that runs the model t once on these
 * inputs and prints each output's bytes in hex: "out K=HEX". */
static void write_run_main(const char *dir, mc_tensor **in, int n_in, int n_out)
{
	char path[4300];
	snprintf(path, sizeof path, "%s/main.c", dir);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fprintf(f, "#include <stdio.h>\n#include \"t.h\"\n"
	           "static unsigned char arena[T_ARENA_BYTES + 1] __attribute__((aligned(T_ARENA_ALIGN)));\n");
	for (int k = 0; k < n_in; k++) {
		fprintf(f, "static const unsigned char in%d[] __attribute__((aligned(16))) = {", k);
		for (size_t i = 0; i < in[k]->nbytes; i++)
			fprintf(f, "%s%u", i ? "," : "", ((const unsigned char *)in[k]->data)[i]);
		fprintf(f, "};\n");
	}
	for (int k = 0; k < n_out; k++)
		fprintf(f, "static unsigned char out%d[T_OUTPUT_%d_BYTES] __attribute__((aligned(16)));\n", k, k);
	fprintf(f, "int main(void)\n{\n\tconst void *in[] = {");
	for (int k = 0; k < n_in; k++)
		fprintf(f, "%sin%d", k ? ", " : "", k);
	fprintf(f, "};\n\tvoid *out[] = {");
	for (int k = 0; k < n_out; k++)
		fprintf(f, "%sout%d", k ? ", " : "", k);
	fprintf(f, "};\n\tprintf(\"status=%%d\\n\", t_run(arena, in, out));\n");
	for (int k = 0; k < n_out; k++)
		fprintf(f, "\tprintf(\"out %d=\");\n\tfor (unsigned i = 0; i < sizeof out%d; i++)\n"
		           "\t\tprintf(\"%%02x\", out%d[i]);\n\tprintf(\"\\n\");\n", k, k, k);
	fprintf(f, "\tprintf(\"done\\n\");\n\treturn 0;\n}\n");
	cr_assert_eq(fclose(f), 0);
}

int run_compiled(const char *dir, mc_tensor **in, int n_in, int n_out, bool board, mc_tensor **outs)
{
	char cmd[16384];
	const char *m4 = MODELC_SOURCE_DIR "/firmware-examples/cortex-m4";
	write_run_main(dir, in, n_in, n_out);
	if (board)
		snprintf(cmd, sizeof cmd,
		         "cd '%s' && arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 -std=c99 "
		         "-O2 -Wall -Wextra -Werror -I. main.c t.c t_weights.c '%s/startup.c' -T '%s/link.ld' -nostartfiles "
		         "--specs=nano.specs --specs=rdimon.specs -Wl,--gc-sections -lm -o app.elf >build.log 2>&1 && "
		         "timeout 120 qemu-system-arm -M mps2-an386 -nographic -monitor none -serial none -semihosting "
		         "-kernel app.elf >run.log 2>&1",
		         dir, m4, m4);
	else
		snprintf(cmd, sizeof cmd,
		         "cd '%s' && cc -std=c99 -O2 -Wall -Wextra -Werror -I. main.c t.c t_weights.c -lm -o host.bin "
		         ">build.log 2>&1 && ./host.bin >run.log 2>&1",
		         dir);
	int rc = system(cmd) == 0 ? 0 : -1;
	char *log = read_file_in(dir, "run.log", NULL);
	cr_expect_eq(rc, 0, "the %s build or run failed in %s:\n%s", board ? "board" : "host", dir, log ? log : "");
	if (rc == 0 && (!log || !strstr(log, "status=0\n")))
		rc = -1;
	for (int k = 0; k < n_out && rc == 0; k++) {
		char key[32];
		snprintf(key, sizeof key, "out %d=", k);
		const char *hex = strstr(log, key);
		if (!hex) {
			rc = -1;
			break;
		}
		hex += strlen(key);
		unsigned char *d = outs[k]->data;
		for (size_t i = 0; i < outs[k]->nbytes && rc == 0; i++) {
			unsigned v;
			if (sscanf(hex + 2 * i, "%2x", &v) != 1)
				rc = -1;
			d[i] = (unsigned char)v;
		}
	}
	cr_expect_eq(rc, 0, "no status=0 or outputs from the %s run:\n%s", board ? "board" : "host", log ? log : "");
	free(log);
	return rc;
}

char *save_model(mb *b, const char *dir, const char *file)
{
	size_t n = strlen(dir) + strlen(file) + 2;
	char *path = malloc(n);
	cr_assert_not_null(path);
	snprintf(path, n, "%s/%s", dir, file);
	cr_assert_eq(mb_write(b, path), 0, "cannot write %s", path);
	mb_free(b);
	return path;
}

size_t json_number(const char *dir, const char *file, const char *key)
{
	char *json = read_file_in(dir, file, NULL);
	cr_assert_not_null(json, "cannot read %s/%s", dir, file);
	char pat[128];
	snprintf(pat, sizeof pat, "\"%s\": ", key);
	const char *at = strstr(json, pat);
	cr_assert_not_null(at, "%s has no %s:\n%s", file, key, json);
	size_t v = (size_t)strtoull(at + strlen(pat), NULL, 10);
	free(json);
	return v;
}
