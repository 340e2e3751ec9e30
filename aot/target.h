/* Targets: one const descriptor per target (c, cuda, llvm), in the manner
 * of QBE's Target. The compile options are resolved once, before freezing,
 * into an mc_target_config; passes, lowerings and emitters ask it what the
 * target has instead of testing its name. */
#ifndef MODELC_TARGET_H
#define MODELC_TARGET_H

#include <stdbool.h>

#include "../libcore/modelc.h"

typedef struct mc_isa mc_isa;
typedef struct mc_program mc_program;
typedef struct mc_compile_opts mc_compile_opts;

typedef struct mc_target {
	const char *name;           /* as --target spells it */
	/* writes the program's files into dir; 0, or -1 after reporting */
	int (*emit)(const mc_program *p, const mc_compile_opts *o, const char *dir);
	bool (*available)(void);    /* NULL: always in this build */
	const char *ninja_in;       /* NAME.ninja's template */
	const char *layout;         /* layout when --layout gives none; NULL: freezing chooses */
	/* the ISA its kernels are tiled for when --isa gives none; NULL: generic */
	const char *(*default_isa)(const mc_compile_opts *o);
	bool cpu_isa;               /* kernels tiled for a CPU's vectors: takes --isa */
	bool gpu;                   /* an NVIDIA GPU: --cuda-arch, nvcc in build.ninja, the
	                             * NAME_cuda_* API; its ISA is mc_isa_cuda */
	bool fp16;                  /* --dtype fp16: activations and weights stored as float16 */
	bool tf32;                  /* --tf32: fp32 convolutions on tensor cores */
	bool conv_template;         /* dense 2-D convolutions lower to MC_TMPL_CONV2D_SPLITK */
	bool mcu_templates;         /* --isa cortex-m's integer tiles and float row products
	                             * lower to the runtime's micro-kernels (DOT2_TILES, GEMV_F32) */
	bool grid;                  /* parallel loop nests become a grid, a thread per
	                             * iteration: CPU register tiles would serialise them */
	bool object;                /* writes NAME.o itself (LLVM): --triple, --cpu,
	                             * --features, --opt, --emit-llvm */
	bool measures_stack;        /* a C compiler measures NAME_run's stack (NAME.json) */
	bool verify;                /* modelc verify builds and runs it on this machine */
} mc_target;

extern const mc_target mc_target_c, mc_target_cuda, mc_target_llvm;
extern const mc_target *const mc_targets[]; /* every target, NULL-terminated */

/* The target a --target names (NULL: c); NULL after reporting an unknown one. */
const mc_target *mc_target_named(const char *name);

/* A target with the options resolved: what lowering, planning and emission
 * ask. */
typedef struct mc_target_config {
	const mc_target *desc;
	const mc_isa *isa;          /* the kernels' ISA: --isa, the target's default, or cuda's
	                             * (tensor cores and their operands: mma, mma_tf32) */
	const char *layout;         /* --layout, else the target's; NULL: freezing chooses */
	mc_dtype activations;       /* storage of float activations in the arena */
	mc_dtype weights;           /* storage of float weights */
	mc_dtype io;                /* storage of float graph inputs and outputs */
} mc_target_config;

/* o's target, ISA, layout and storage types (o checked already). 0, or -1
 * after reporting. */
int mc_target_resolve(const mc_compile_opts *o, mc_target_config *t);

#endif
