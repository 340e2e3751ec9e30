/* libFuzzer target: bytes through everything modelc does to a model file,
 * import, shape inference, freezing, fusion, lowering, memory planning
 * and C emission, into memory. External data is refused (no model
 * directory), so the target touches no file. Any crash, leak or sanitizer
 * report is a bug; errors are the expected outcome for most inputs. */
#include <stddef.h>
#include <stdint.h>

#include "aot.h"
#include "freezing.h"
#include "modelc.h"

static void discard(const char *line, void *user)
{
	(void)line;
	(void)user;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	mc_set_diag_sink(discard, NULL);
	return 0;
}

static void compile_graph(mc_graph *g)
{
	mc_compile_opts o;
	mc_compile_opts_init(&o);
	o.name = "fuzz";
	/* A smaller fold cap than the default keeps one input's time and
	 * memory bounded; the folding code paths are the same. */
	o.fold_limit = 1 << 20;
	mc_freeze_opts fo = {.fold_limit = o.fold_limit};
	if (mc_freeze(g, &fo))
		return;
	mc_program p = {0};
	mc_target_config t;
	if (!mc_target_resolve(&o, &t) && !mc_build_program(g, &t, &o, &p)) {
		mc_c_sources src;
		if (!mc_emit_c_sources(&p, &o, &src))
			mc_c_sources_free(&src);
	}
	mc_program_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	mc_import_opts io = {0};
	mc_graph *g = mc_import_buffer(data, size, NULL, &io);
	if (!g)
		return 0;
	if (!mc_infer_graph(g))
		compile_graph(g);
	mc_graph_free(g);
	return 0;
}
