/* Test support for the compiler (see compile_helpers.h). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

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
	if (!host_runs_isa(isa)) {
		mb_free(b);
		return 0;
	}
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	o.isa = isa;
	return verify_model_cflags(b, &o, "-std=c99 -O1 -march=native -Wall -Wextra -Werror");
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
	mc_graph *g = mb_import(b, ".", NULL);
	cr_assert_not_null(g);
	cr_assert_eq(mc_infer_graph(g), 0);
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "t";
	mc_target_config t;
	cr_assert_eq(mc_target_resolve(&o, &t), 0);
	cr_assert_eq(mc_build_program(g, &t, &o, p), 0);
	return g;
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
