/* The public compile API (aot/compile.c): options, the pipeline from a
 * model file to an output directory, the emitters each target registers
 * (aot/target.h), the run function's stack bound (aot/stack.c), the test
 * driver (aot/harness.c) and modelc verify (aot/verify.c). */
#ifndef MODELC_COMPILE_H
#define MODELC_COMPILE_H

#include "program.h"

/* ---- the compile pipeline (aot/compile.c) ---- */
typedef struct mc_compile_opts {
	const char *name;           /* prefix of every generated identifier/file */
	const char *target;         /* "c", "cuda" or "llvm" */
	const char *cuda_arch;      /* --cuda-arch sm_87,sm_90: the archs build.ninja's nvcc builds for */
	const char *dtype;          /* --dtype fp32|fp16 (cuda): fp16 stores activations and weights as
	                             * float16, computing in float32; NULL: fp32 */
	bool tf32;                  /* --tf32 (cuda, fp32): convolutions multiply in TF32 on tensor
	                             * cores (10-bit mantissa, float32 sums), as PyTorch's cuDNN does */
	const char *isa;            /* --isa: mc_isa_find's names; NULL: "generic" (llvm: from the triple) */
	const char *triple;         /* --triple (llvm): the target; NULL: this machine's */
	const char *cpu;            /* --cpu (llvm): LLVM's CPU name, or "native"; NULL: generic */
	const char *features;       /* --features (llvm): LLVM's +feat,-feat list; NULL: the CPU's */
	bool emit_llvm;             /* --emit-llvm (llvm): also write NAME.ll, the optimised IR */
	const char *opt;            /* --opt O3|Os|Oz (llvm): LLVM's pipeline; NULL: O3 (Os, Oz: smaller
	                             * code for microcontrollers' flash) */
	const char *layout;         /* --layout auto|nchw|nhwc; NULL: "auto" */
	const char *optimize;       /* --optimize speed|size|memory; NULL: "speed" (memory: the
	                             * lowerings trade time for arena bytes) */
	const char *pools[MC_MAX_POOLS]; /* --pool NAME[:BYTES], fastest first (mc_pool_specs) */
	int n_pools;
	int threads;                /* --threads N: parallel loops through the caller's
	                             * parallel_for (NAME_run_threads); 0 or 1: none */
	long long threads_min_work; /* --threads-min-work N: loops of fewer statement runs (the
	                             * kernel IR's) stay on the calling thread; < 0:
	                             * MC_SPLIT_MIN_WORK (aot/kir.h) */
	const char *blas;           /* --blas openblas|none; NULL: none (large float products
	                             * call cblas_sgemm: the c target) */
	long long blas_min_macs;    /* --blas-min-macs N: the products the BLAS takes, from N
	                             * multiply-adds; < 0: MC_BLAS_MIN_ROWS... (aot/kir.h) */
	bool io_in_arena;           /* --io-in-arena: inputs and outputs get places in the arena
	                             * (TFLM's model), so that their bytes are reused */
	const char *weights_section; /* --weights-section: the weights' linker section; NULL: .rodata */
	const char *code_section;    /* --code-section: the kernels' and run functions'; NULL: .text */
	bool quantized_io;          /* --quantized-io: int8 inputs/outputs at a Q or DQ (mc_quantized_io) */
	bool no_quantize;           /* --no-quantize: QDQ regions run as float, weights dequantized */
	bool sizes_vary;            /* set by --dim NAME=LO..HI (aot/dynamic.c): mc_kb.sizes_vary */
	mc_import_opts import;
	const char **bind_names;    /* --bind NAME=FILE|VALUE */
	const char **bind_values;
	int n_binds;
	size_t fold_limit;          /* bytes a folded constant may have */
	int unroll_limit;           /* --unroll-limit: nodes an unrolled Scan or Loop may make (0: 4096) */
	const char *dump_after;     /* pass name or "all"; NULL: no dumps */
	const char *dump_dir;       /* where dumps go (default OUT/debug) */
	bool stats;                 /* per-pass metrics on stderr */
	bool harness;               /* also write NAME_main.c, a test driver */
	bool report;                /* --report: also write NAME_report.html (aot/report.c) */
	const char *report_profile; /* --report-profile FILE: per-kernel times for it (KERNEL US lines,
	                             * bench/profile --times) */
	bool no_fuse;               /* each node its own kernel (debugging) */
	bool no_stack_usage;        /* skip measuring NAME_run's stack (aot/stack.c) */
	const char *stack_cc;       /* compiler (and flags) that measures it; "cc" */
	const char *argv_line;      /* for NAME.json (reproducing the build) */
} mc_compile_opts;

void mc_compile_opts_init(mc_compile_opts *o);
/* --pool NAME[:BYTES] parsed: a C identifier and a capacity (K and M
 * suffixes: 1024 and 1048576; 0 for none, the last pool's right). The
 * count (0 without --pool), or -1 after reporting. */
typedef struct {
	char name[MC_POOL_NAME];
	size_t bytes;
} mc_pool_spec;
int mc_pool_specs(const mc_compile_opts *o, mc_pool_spec *specs);
/* model -> output directory. 0 on success; -1 after reporting. */
int mc_compile(const char *model_path, const char *out_dir, const mc_compile_opts *o);

/* The stages of mc_compile_graph: freezing and the program for target
 * (mc_target_resolve), then its output directory (sha: the model's
 * digest, "" if none). 0, or -1 after reporting. */
int mc_freeze_and_build(mc_graph *g, const mc_compile_opts *o, const mc_target_config *target,
                        mc_program *p);
int mc_emit_program(const mc_program *p, const mc_target_config *target, const mc_compile_opts *o,
                    const char *model_abs, const char *sha, const char *out_dir);
/* --dump-after without --dump-dir: OUT/debug, kept in dump_dir (n bytes). */
void mc_default_dump_dir(mc_compile_opts *o, const char *out_dir, char *dump_dir, size_t n);
/* --dim NAME=LO..HI (aot/dynamic.c): model -> one output directory
 * serving every size of that dimension; the pin is o->import.dim_pins[pin]. */
int mc_compile_dynamic(const char *model_path, const char *model_abs, const char *out_dir,
                       const mc_compile_opts *o, int pin);

/* Applies o's --bind options to an imported graph (before inference). */
int mc_apply_binds(mc_graph *g, const mc_compile_opts *o);
/* The pipeline from an inferred graph (after import, --bind and
 * inference): freezing, program, emission. model_abs (may be NULL) names the
 * model file for NAME.json and NAME.ninja; NAME.json's sha256 is g->sha256,
 * the digest mc_import_file took of the bytes it imported. */
int mc_compile_graph(mc_graph *g, const char *model_abs, const char *out_dir,
                     const mc_compile_opts *o);
/* NAME in capitals into buf (n bytes), the prefix of the generated macros
 * (NAME_ARENA_BYTES); buf. */
const char *mc_name_upper(const char *name, char *buf, size_t n);
/* NAME_main.c: a test driver for the compiled model (stdio and malloc, so
 * never part of the library): NAME_main OUTDIR IN0.bin IN1.bin ... reads raw
 * inputs, runs, writes OUTDIR/output_K.bin; exit status = run status. */
int mc_emit_harness(const mc_program *p, const mc_compile_opts *o, const char *dir);

/* ---- stack usage of the run function (aot/stack.c) ----
 * NAME.c is compiled with -fstack-usage (and, with gcc >= 10,
 * -fcallgraph-info=su); the worst case of NAME_run is its own frame plus the
 * deepest chain of functions it calls. A frame counts the bytes a function
 * moves the stack pointer by, the return address its caller pushed included. */
typedef enum {
	MC_FRAME_STATIC,     /* a fixed frame */
	MC_FRAME_BOUNDED,    /* variable, at most `bytes` ("dynamic,bounded") */
	MC_FRAME_DYNAMIC,    /* variable without a bound (alloca, VLA) */
	MC_FRAME_EXTERNAL,   /* defined elsewhere (libm's expf, memcpy): not counted */
	MC_FRAME_INDIRECT,   /* a call through a pointer: callee unknown */
} mc_frame_kind;

typedef struct {
	char *key;           /* .ci node title (static ones carry the file name) */
	char *name;          /* the function's name */
	mc_frame_kind kind;
	size_t bytes;
	int n_callees, cap_callees;
	int *callees;        /* indices in the graph, one per call edge */
} mc_stack_fn;

typedef struct {
	int n_fns, cap_fns;
	mc_stack_fn *fns;
	bool has_calls;      /* from a .ci: the call edges are known */
} mc_stack_graph;

/* Add a compiler's .su (one line per function: file:line[:col]:name, bytes,
 * qualifiers) or .ci (gcc's VCG call graph) text to g. 0, or -1 with the
 * reason in why. */
int mc_stack_parse_su(mc_stack_graph *g, const char *text, char *why, size_t n);
int mc_stack_parse_ci(mc_stack_graph *g, const char *text, char *why, size_t n);
void mc_stack_graph_free(mc_stack_graph *g);

typedef struct {
	bool bounded;
	size_t bytes;        /* bounded: the worst case */
	char why[256];       /* unbounded, or no such root: why */
	int n_excludes;
	char **excludes;     /* external callees reachable from the root, sorted */
} mc_stack_bound;

/* The worst-case stack depth of root. With call edges: its frame plus the
 * deepest path through its callees (recursion, an indirect call or a dynamic
 * frame on the way: unbounded; external callees listed, not counted).
 * Without (a .su alone): the sum of every frame, a bound because generated
 * code never recurses. 0, or -1 when root is not in g (why says so). */
int mc_stack_worst(const mc_stack_graph *g, const char *root, mc_stack_bound *b);
void mc_stack_bound_free(mc_stack_bound *b);

/* ---- what an ELF object puts in flash and RAM (aot/objsize.c) ---- */
typedef struct {
	size_t text_bytes;   /* code: the executable sections */
	size_t rodata_bytes; /* read-only data: flash */
	size_t data_bytes;   /* initialised writable data: flash and RAM (generated code has none) */
	size_t bss_bytes;    /* zeroed writable data: RAM (generated code has none) */
} mc_object_sizes;
/* The allocated sections of the ELF object at path, summed by kind. 0, or
 * -1 with the reason in why. */
int mc_object_sizes_of(const char *path, mc_object_sizes *s, char *why, size_t n);

typedef struct {
	bool measured;       /* false: note says why (no compiler, it failed, ...) */
	char note[512];
	mc_stack_bound bound; /* bound.bytes includes red_zone */
	const char *method;  /* "callgraph" or "su-only" */
	char compiler[64];   /* "gcc 12.2.0", "clang 14.0.6" */
	char target[64];     /* the compiler's -dumpmachine */
	char flags[512];     /* flags of the measuring compile */
	size_t red_zone;     /* bytes below the stack pointer a leaf may use (x86-64 SysV: 128) */
	double ms;           /* time taken */
	/* the measuring compile's object (sized false: it could not be read) */
	bool sized;
	mc_object_sizes object;
} mc_stack_usage;

/* Measures NAME_run's stack from dir/NAME.c with cc ("gcc", or words such
 * as "arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb"). Its temporary files
 * (dir/NAME.stack-tmp.*) are removed. Never fails: u->note says why when
 * nothing was measured. */
void mc_stack_measure(const char *dir, const char *name, const char *cc, mc_stack_usage *u);
/* The same for NAME_<run> (run: "run", "run_counted", ...). */
void mc_stack_measure_run(const char *dir, const char *name, const char *run, const char *cc,
                          mc_stack_usage *u);
void mc_stack_usage_free(mc_stack_usage *u);

/* ---- the flash figure of NAME.json (aot/compile.c) ---- */
typedef struct {
	bool sized;          /* false: why says why not */
	size_t total_bytes, code_bytes, const_bytes, static_ram_bytes;
	char from[700];      /* what was measured */
	char why[512];
} mc_flash;

/* ---- modelc compile --report (aot/report.c) ----
 * DIR/NAME_report.html, one self-contained page (inline CSS and SVG, no
 * script): the totals of NAME.json (stack and flash as measured for it),
 * the kernels in run order with their ONNX nodes and the tensors between
 * them, a table of each kernel's MACs, bytes and (o->report_profile) time,
 * and the memory plan over the steps, one timeline per pool. Text only,
 * the same for the same program and options. 0, or -1 after reporting. */
int mc_write_report(const mc_program *p, const mc_compile_opts *o, const mc_stack_usage *stack,
                    const mc_flash *flash, const char *dir);

/* modelc verify (aot/verify.c). */
typedef struct {
	uint64_t seed;              /* random inputs: floats uniform in [-scale, scale] */
	double scale;
	double rtol, atol;          /* pass: max|err| <= atol + rtol * max|ref| */
	const char *cc, *cflags;    /* the host compiler that builds the code */
	bool keep;                  /* leave the temporary directory */
	/* --input NAME=FILE (n_inputs pairs; every graph input, then): these
	 * inputs instead of random ones */
	int n_inputs;
	const char *const *input_names, *const *input_files;
	/* --reference DIR: each output compared with DIR/FILE.bin or FILE.npy
	 * (FILE as mc_output_file_name names it), another runtime's answer for
	 * those inputs, instead of the interpreter's */
	const char *reference;
	bool atol_given;            /* --reference: integer outputs within atol, not exact */
} mc_verify_opts;
void mc_verify_opts_init(mc_verify_opts *v);
/* 0: every output within tolerance; 1: beyond it (or, with a reference,
 * another count of a counted output); -1: error (reported), such as a
 * reference file missing or of another size, dtype or shape. */
int mc_verify(const char *model, const mc_compile_opts *o, const mc_verify_opts *v);

/* Builds DIR's NAME.c, NAME_weights.c and the harness NAME_main.c with
 * `cc cflags` (log in DIR/cc.log), runs it on `in` (g's inputs; log in
 * DIR/run.log) and reads `out` typed as g's outputs. 0 on success; else,
 * reported: MC_HARNESS_BUILD, MC_HARNESS_RUN (exit_status: the driver's
 * exit status, 128 + signal number when killed), or -1. */
enum { MC_HARNESS_BUILD = 1, MC_HARNESS_RUN = 2 };
int mc_run_harness(const char *dir, const char *name, const char *cc, const char *cflags,
                   const mc_graph *g, mc_tensor *const *in, mc_tensor **out, int *exit_status);
/* The same; one_unit: the C target's three sources built as one
 * translation unit (DIR/NAME_unity.c includes them): one compiler run
 * instead of three, for a test suite that builds thousands of small
 * models (tests/conformance); their contract as separate files is
 * checked elsewhere. */
int mc_run_harness_ex(const char *dir, const char *name, const char *cc, const char *cflags, bool one_unit,
                      const mc_graph *g, mc_tensor *const *in, mc_tensor **out, int *exit_status);


/* ---- output files ---- */

/* Text embedded at build time (scripts/embed-text). */
extern const char mc_model_ninja_in[];   /* aot/model.ninja.in */
extern const char mc_model_cuda_ninja_in[]; /* aot/model_cuda.ninja.in */
extern const char mc_model_llvm_ninja_in[]; /* aot/model_llvm.ninja.in */
extern const char mc_runtime_min_h[];    /* runtime-min/modelc_rt.h */

/* The C target: writes NAME.h, NAME.c, NAME_weights.c and the runtime-min
 * files into dir (targets/c/emit_c.c, with the C-family printer of
 * targets/common). */
int mc_emit_c(const mc_program *p, const mc_compile_opts *o, const char *dir);
/* The CUDA target: NAME.h, NAME.cu, NAME_weights.c and the runtime-min
 * files (targets/cuda/emit_cuda.c). */
int mc_emit_cuda(const mc_program *p, const mc_compile_opts *o, const char *dir);
#define MC_CUDA_ARCH_DEFAULT "sm_87,sm_90"
/* The LLVM target: NAME.h, NAME.o, libNAME.a, the runtime-min files and,
 * with --emit-llvm, NAME.ll (targets/llvm/emit_llvm.c). Built only where
 * configure found LLVM: mc_llvm_available says whether this modelc has it. */
int mc_emit_llvm(const mc_program *p, const mc_compile_opts *o, const char *dir);
bool mc_llvm_available(void);
/* The --isa the llvm target's kernels are generated for when none is
 * given: from o's triple, CPU and features; NULL: generic. */
const char *mc_llvm_default_isa(const mc_compile_opts *o);
/* whether every arch of a --cuda-arch list (NULL: the default) is sm_MIN or newer */
bool mc_cuda_archs_at_least(const char *list, int min);
/* The same three files as text, written nowhere (the fuzzer, tests). */
typedef struct {
	mc_strbuf header, source, weights;
} mc_c_sources;
int mc_emit_c_sources(const mc_program *p, const mc_compile_opts *o, mc_c_sources *out);
void mc_c_sources_free(mc_c_sources *s);

#endif
