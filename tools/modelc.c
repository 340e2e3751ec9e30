/* modelc: the command-line tool. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../libcore/modelc.h"
#include "../aot/aot.h"
#include "../freezing/freezing.h"

static void usage(FILE *f)
{
	fputs("usage: modelc inspect MODEL [SHAPE OPTIONS]\n"
	      "       modelc run MODEL --input NAME=FILE... --output-dir DIR [SHAPE OPTIONS]\n"
	      "       modelc compile MODEL -o DIR [--name NAME] [COMPILE OPTIONS] [SHAPE OPTIONS]\n"
	      "       modelc verify MODEL [--seed N] [--scale X] [--rtol R] [--atol A] [--cc CC]\n"
	      "                     [--cflags FLAGS] [--keep] [--input NAME=FILE... [--reference DIR]]\n"
	      "                     [COMPILE OPTIONS] [SHAPE OPTIONS]\n"
	      "       modelc --version\n"
	      "\n"
	      "verify compiles into a temporary directory, builds with the host compiler\n"
	      "(default cc, -std=c99 -O2 -Wall -Wextra -Werror), runs on seeded random inputs\n"
	      "(floats uniform in [-scale, scale], default 1; integers in 0..3) and compares\n"
	      "every output with the reference interpreter: it prints max|ref|, max|err| and\n"
	      "the relative RMSE, and exits 1 if max|err| > atol + rtol * max|ref|\n"
	      "(defaults: rtol 1e-4, atol 1e-6). --input NAME=FILE (every input): these inputs\n"
	      "instead; --reference DIR: each output compared with DIR/FILE.bin or FILE.npy (FILE\n"
	      "as run names outputs), another runtime's answer for those inputs, integer and\n"
	      "bool outputs exactly unless --atol; a reference file missing or of another size,\n"
	      "dtype or shape is an error (exit 2).\n"
	      "\n"
	      "compile writes C sources into DIR: NAME.h, NAME.c, NAME_weights.c, modelc_rt.h,\n"
	      "NAME.json, NAME.ninja and build.ninja (`ninja -C DIR` builds libNAME.a).\n"
	      "compile options:\n"
	      "  --name NAME               prefix of every generated identifier and file (default: model)\n"
	      "  --bind NAME=VALUE         freeze input NAME to a constant: a tensor file, or\n"
	      "                            comma-separated numbers (--bind sample_rate=16000)\n"
	      "  --fold-limit BYTES        largest constant folding may create (default 4194304)\n"
	      "  --unroll-limit NODES      most nodes an unrolled Scan or Loop may make (default 4096)\n"
	      "  --dump-after PASS|all     into DIR/debug: the graph after a freezing pass, what a\n"
	      "                            program stage left (schedule lower storage liveness plan\n"
	      "                            order pools place steps; plan: the memory plan; order: the\n"
	      "                            plan for the memory-aware kernel order), or the kernels\n"
	      "  --stats                   per-pass time and node counts, arena and weight bytes\n"
	      "  --no-fuse                 one kernel per node (debugging)\n"
	      "  --target c|cuda|llvm      c (default): C99 sources; cuda: NAME.cu for NVIDIA GPUs\n"
	      "                            (NAME_cuda_init/run, one device allocation, CUDA graphs);\n"
	      "                            llvm: NAME.o and libNAME.a through LLVM, no C compiler\n"
	      "  --triple T                llvm: the target (default this machine's), e.g.\n"
	      "                            aarch64-linux-gnu, thumbv7em-none-eabihf\n"
	      "  --cpu CPU                 llvm: LLVM's CPU name (cortex-m4, skylake, ...) or native\n"
	      "  --features F              llvm: LLVM's feature list, e.g. +avx2,+fma\n"
	      "  --emit-llvm               llvm: also write NAME.ll, the optimised IR\n"
	      "  --opt O3|Os|Oz            llvm: optimise for speed (O3, default) or size (Os, Oz:\n"
	      "                            no unrolling; Oz also no loop vectorising)\n"
	      "  --cuda-arch LIST          GPU archs build.ninja's nvcc builds for (default sm_87,sm_90)\n"
	      "  --dtype fp32|fp16         cuda: fp16 stores weights and activations as float16 and\n"
	      "                            computes in float32 (inputs and outputs stay float32);\n"
	      "                            convolutions multiply in half on tensor cores (sm_80+)\n"
	      "  --tf32                    cuda, fp32: convolutions multiply in TF32 on tensor cores\n"
	      "                            (10-bit mantissa, float32 sums; PyTorch's cuDNN default)\n"
	      "  --isa ISA                 generic (portable C99, default), avx2, avx512,\n"
	      "                            avx512-vnni (integer kernels on VNNI), neon, neon-dotprod\n"
	      "                            (integer kernels on sdot), cortex-m, or native (the widest\n"
	      "                            this machine runs)\n"
	      "  --layout auto|nchw|nhwc|depthwise  activation layout inside the model (default auto:\n"
	      "                            chosen from its convolutions; cuda's but in fp16:\n"
	      "                            depthwise, only the depthwise convolutions the model\n"
	      "                            transposes to channels-last next); inputs and outputs keep\n"
	      "                            the model's own layout\n"
	      "  --optimize speed|size|memory  speed (default): the fastest kernels; size: the least\n"
	      "                            flash (no Winograd: its weights are 16/9 the size); memory:\n"
	      "                            the least arena (no Winograd scratch; a convolution whose\n"
	      "                            input dies writes its output over it, through a ring of rows)\n"
	      "  --pool NAME[:BYTES]       split the arena into pools, one per memory, fastest first\n"
	      "                            (repeat it; every pool but the last has a size, K or M\n"
	      "                            suffixes): the buffers the most kernels touch go first;\n"
	      "                            NAME_run_pools takes one pointer per pool\n"
	      "  --threads N               the C target's parallel loops run through a parallel_for\n"
	      "                            the caller passes to NAME_run_threads (runtime-min's\n"
	      "                            modelc_threads_pthread.c has one for POSIX threads);\n"
	      "                            outputs bit-identical to one thread's\n"
	      "  --threads-min-work N      --threads: a loop splits from N statement runs of the\n"
	      "                            kernel IR (default 16384: a few microseconds, what a\n"
	      "                            hand-over to the workers costs); 1: every loop\n"
	      "  --blas openblas           the C target's large float MatMul, Gemm and 1x1\n"
	      "                            convolutions call cblas_sgemm (OpenBLAS; link\n"
	      "                            -lopenblas): products of\n"
	      "                            64 rows, 128 columns and depth 128 or more with vectors of\n"
	      "                            8 lanes or fewer (AVX2), where it is faster than the\n"
	      "                            generated tiles; none: never (default)\n"
	      "  --blas-min-macs N         --blas: the products it takes instead, from N\n"
	      "                            multiply-adds (bench/blas/run measures where it pays)\n"
	      "  --io-in-arena             the inputs and outputs live in the arena (as in TFLM), at\n"
	      "                            NAME_INPUT_i_OFFSET and NAME_OUTPUT_i_OFFSET, so that their\n"
	      "                            bytes are reused once read; NAME_run copies from and to the\n"
	      "                            pointers it is given, none where they are NULL\n"
	      "  --weights-section S       the linker section of the weights (default .rodata)\n"
	      "  --code-section S          the linker section of the kernels and run functions\n"
	      "  --no-quantize             run a quantized (QDQ) model in float, its weights dequantized\n"
	      "                            at compile time (no integer kernels)\n"
	      "  --quantized-io            an input read only by a QuantizeLinear, or an output written\n"
	      "                            by a DequantizeLinear, is passed as its int8/uint8 integers\n"
	      "                            (the header gives NAME_INPUT_i_SCALE and _ZERO_POINT)\n"
	      "  --harness                 also write NAME_main.c, a test driver (not part of the library)\n"
	      "  --report                  also write NAME_report.html: totals, the kernels and their ops,\n"
	      "                            bytes and MACs per kernel, the memory plan (one HTML file)\n"
	      "  --report-profile FILE     --report with each kernel's time: FILE's \"KERNEL US\" lines\n"
	      "                            (bench/profile --times FILE writes them)\n"
	      "  --stack-cc CC             the compiler (and flags) that measures NAME_run's stack usage\n"
	      "                            for NAME.json, e.g. \"arm-none-eabi-gcc -mcpu=cortex-m4\" (default cc)\n"
	      "  --no-stack-usage          do not measure it (NAME.json: \"stack\": null)\n"
	      "\n"
	      "shape options fix dimensions the model leaves symbolic:\n"
	      "  --input-shape NAME=DIMS   the whole shape of input NAME\n"
	      "  --dim PARAM=N             every input dimension named PARAM (dim_param)\n"
	      "  --dim PARAM=LO..HI        compile: one library for every size in [LO, HI] (C target;\n"
	      "                            NAME_run_dims takes the size, NAME_DIM_0_MIN/MAX bound it)\n"
	      "\n"
	      "DIMS is like 1x3x224x224, or scalar (rank 0). Input files are raw little-endian\n"
	      "tensors of the input's dtype and shape, or .npy files. run writes one raw file\n"
	      "per output, named after it (characters outside [A-Za-z0-9_.-] become '_') plus\n"
	      ".bin.\n",
	      f);
}

typedef struct {
	const char *model;
	mc_input_pin pins[64];
	int n_pins;
	mc_dim_pin dim_pins[64];
	int n_dim_pins;
	const char *input_names[64];
	const char *input_files[64];
	int n_inputs;
	const char *output_dir;
	mc_compile_opts compile;
	const char *bind_names[64];
	const char *bind_values[64];
	char argv_line[8192];   /* options that shape the output, for NAME.ninja */
	mc_verify_opts verify;
} cli;

/* A value with spaces (--stack-cc "gcc -m32") is single-quoted, since
 * NAME.ninja hands the line to the shell. */
static void note_option(cli *c, const char *opt, const char *val)
{
	size_t n = strlen(c->argv_line);
	bool quote = val && val[strcspn(val, " \t'\"\\;&|<>()*?#~`")];
	snprintf(c->argv_line + n, sizeof c->argv_line - n, "%s%s%s", n ? " " : "", opt,
	         val ? (quote ? " '" : " ") : "");
	for (; val && *val; val++) {
		n = strlen(c->argv_line);
		snprintf(c->argv_line + n, sizeof c->argv_line - n, *val == '\'' ? "'\\''" : "%c", *val);
	}
	if (quote) {
		n = strlen(c->argv_line);
		snprintf(c->argv_line + n, sizeof c->argv_line - n, "'");
	}
}

static int split_eq(const char *arg, const char *opt, char **name, const char **rest)
{
	const char *eq = strrchr(arg, '=');
	if (!eq || eq == arg) {
		mc_error("%s expects NAME=VALUE, got '%s'", opt, arg);
		return -1;
	}
	*name = mc_xmalloc((size_t)(eq - arg) + 1);
	memcpy(*name, arg, (size_t)(eq - arg));
	(*name)[eq - arg] = 0;
	*rest = eq + 1;
	return 0;
}

/* Option opt's value val as a whole number of WHAT from 1 to max, noted
 * for NAME.json; -1 after reporting. */
static int count_arg(cli *c, const char *opt, const char *val, const char *what, long max, int *out)
{
	char *end;
	long x = strtol(val, &end, 10);
	if (end == val || *end || x < 1 || x > max) {
		mc_error("%s: '%s' is not a %s count from 1 to %ld", opt, val, what, max);
		return -1;
	}
	*out = (int)x;
	note_option(c, opt, val);
	return 0;
}

static int parse_compile_arg(cli *c, int argc, char **argv, int *i)
{
	const char *a = argv[*i];
	bool has_val = *i + 1 < argc;
	mc_compile_opts *o = &c->compile;
	if ((strcmp(a, "-o") == 0 || strcmp(a, "--output-dir") == 0) && has_val) {
		c->output_dir = argv[++*i];
	} else if (strcmp(a, "--name") == 0 && has_val) {
		o->name = argv[++*i];
	} else if (strcmp(a, "--bind") == 0 && has_val) {
		char *name;
		const char *value;
		if (o->n_binds == 64) {
			mc_error("too many --bind options");
			return -1;
		}
		if (split_eq(argv[++*i], "--bind", &name, &value))
			return -1;
		c->bind_names[o->n_binds] = name;
		c->bind_values[o->n_binds++] = value;
		note_option(c, "--bind", argv[*i]);
	} else if (strcmp(a, "--fold-limit") == 0 && has_val) {
		char *end;
		long long x = strtoll(argv[++*i], &end, 10);
		if (end == argv[*i] || *end || x < 0) {
			mc_error("--fold-limit: '%s' is not a byte count", argv[*i]);
			return -1;
		}
		o->fold_limit = (size_t)x;
		note_option(c, "--fold-limit", argv[*i]);
	} else if (strcmp(a, "--unroll-limit") == 0 && has_val) {
		if (count_arg(c, a, argv[++*i], "node", 1000000, &o->unroll_limit))
			return -1;
	} else if (strcmp(a, "--threads") == 0 && has_val) {
		if (count_arg(c, a, argv[++*i], "worker", 1024, &o->threads))
			return -1;
	} else if (strcmp(a, "--dump-after") == 0 && has_val) {
		o->dump_after = argv[++*i];
	} else if (strcmp(a, "--stats") == 0) {
		o->stats = true;
	} else if (strcmp(a, "--no-fuse") == 0) {
		o->no_fuse = true;
		note_option(c, a, NULL);
	} else if (strcmp(a, "--threads-min-work") == 0 && has_val) {
		int n;
		if (count_arg(c, a, argv[++*i], "statement run", 2000000000, &n))
			return -1;
		o->threads_min_work = n;
	} else if (strcmp(a, "--blas-min-macs") == 0 && has_val) {
		int n;
		if (count_arg(c, a, argv[++*i], "multiply-add", 2000000000, &n))
			return -1;
		o->blas_min_macs = n;
	} else if (strcmp(a, "--blas") == 0 && has_val) {
		o->blas = argv[++*i];
		note_option(c, a, argv[*i]);
	} else if (strcmp(a, "--isa") == 0 && has_val) {
		o->isa = argv[++*i];
		note_option(c, a, argv[*i]);
	} else if (strcmp(a, "--target") == 0 && has_val) {
		o->target = argv[++*i];
		note_option(c, a, argv[*i]);
	} else if (strcmp(a, "--dtype") == 0 && has_val) {
		o->dtype = argv[++*i];
		note_option(c, a, argv[*i]);
	} else if (strcmp(a, "--tf32") == 0) {
		o->tf32 = true;
		note_option(c, a, NULL);
	} else if (strcmp(a, "--triple") == 0 && has_val) {
		o->triple = argv[++*i];
		note_option(c, a, argv[*i]);
	} else if (strcmp(a, "--cpu") == 0 && has_val) {
		o->cpu = argv[++*i];
		note_option(c, a, argv[*i]);
	} else if (strcmp(a, "--features") == 0 && has_val) {
		o->features = argv[++*i];
		note_option(c, a, argv[*i]);
	} else if (strcmp(a, "--emit-llvm") == 0) {
		o->emit_llvm = true;
		note_option(c, a, NULL);
	} else if (strcmp(a, "--opt") == 0 && has_val) {
		o->opt = argv[++*i];
		note_option(c, a, argv[*i]);
	} else if (strcmp(a, "--cuda-arch") == 0 && has_val) {
		o->cuda_arch = argv[++*i];
		note_option(c, a, argv[*i]);
	} else if (strcmp(a, "--no-quantize") == 0) {
		o->no_quantize = true;
		note_option(c, a, NULL);
	} else if (strcmp(a, "--quantized-io") == 0) {
		o->quantized_io = true;
		note_option(c, a, NULL);
	} else if (strcmp(a, "--layout") == 0 && has_val) {
		o->layout = argv[++*i];
		note_option(c, a, argv[*i]);
	} else if (strcmp(a, "--optimize") == 0 && has_val) {
		o->optimize = argv[++*i];
		note_option(c, a, argv[*i]);
	} else if (strcmp(a, "--pool") == 0 && has_val) {
		if (o->n_pools == MC_MAX_POOLS) {
			mc_error("--pool: at most %d pools", MC_MAX_POOLS);
			return -1;
		}
		o->pools[o->n_pools++] = argv[++*i];
		note_option(c, a, argv[*i]);
	} else if (strcmp(a, "--io-in-arena") == 0) {
		o->io_in_arena = true;
		note_option(c, a, NULL);
	} else if (strcmp(a, "--weights-section") == 0 && has_val) {
		o->weights_section = argv[++*i];
		note_option(c, a, argv[*i]);
	} else if (strcmp(a, "--code-section") == 0 && has_val) {
		o->code_section = argv[++*i];
		note_option(c, a, argv[*i]);
	} else if (strcmp(a, "--no-stack-usage") == 0) {
		o->no_stack_usage = true;
		note_option(c, a, NULL);
	} else if (strcmp(a, "--stack-cc") == 0 && has_val) {
		o->stack_cc = argv[++*i];
		note_option(c, a, argv[*i]);
	} else if (strcmp(a, "--seed") == 0 && has_val) {
		c->verify.seed = strtoull(argv[++*i], NULL, 10);
	} else if (strcmp(a, "--scale") == 0 && has_val) {
		c->verify.scale = strtod(argv[++*i], NULL);
	} else if (strcmp(a, "--rtol") == 0 && has_val) {
		c->verify.rtol = strtod(argv[++*i], NULL);
	} else if (strcmp(a, "--atol") == 0 && has_val) {
		c->verify.atol = strtod(argv[++*i], NULL);
		c->verify.atol_given = true;
	} else if (strcmp(a, "--reference") == 0 && has_val) {
		c->verify.reference = argv[++*i];
	} else if (strcmp(a, "--cc") == 0 && has_val) {
		c->verify.cc = argv[++*i];
	} else if (strcmp(a, "--cflags") == 0 && has_val) {
		c->verify.cflags = argv[++*i];
	} else if (strcmp(a, "--keep") == 0) {
		c->verify.keep = true;
	} else if (strcmp(a, "--harness") == 0) {
		o->harness = true;
		note_option(c, a, NULL);
	} else if (strcmp(a, "--report") == 0) {
		o->report = true;
		note_option(c, a, NULL);
	} else if (strcmp(a, "--report-profile") == 0 && has_val) {
		o->report = true;
		o->report_profile = argv[++*i];
		note_option(c, a, argv[*i]);
	} else {
		return 1;
	}
	return 0;
}

static int parse_args(int argc, char **argv, cli *c, int want_io)
{
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		bool has_val = i + 1 < argc;
		if (want_io == 2) {
			int r = parse_compile_arg(c, argc, argv, &i);
			if (r < 0)
				return -1;
			if (r == 0)
				continue;
		}
		if (strcmp(a, "--input-shape") == 0 && has_val) {
			char *name;
			const char *dims;
			if (c->n_pins == 64) {
				mc_error("too many --input-shape options");
				return -1;
			}
			if (split_eq(argv[++i], "--input-shape", &name, &dims))
				return -1;
			if (!mc_parse_shape(dims, &c->pins[c->n_pins].shape)) {
				mc_error("--input-shape %s: '%s' is not a shape like 1x3x224x224 (or scalar, "
				         "for rank 0)", name, dims);
				free(name);
				return -1;
			}
			c->pins[c->n_pins++].name = name;
			note_option(c, "--input-shape", argv[i]);
		} else if (strcmp(a, "--dim") == 0 && has_val) {
			char *name, *end;
			const char *value;
			if (c->n_dim_pins == 64) {
				mc_error("too many --dim options");
				return -1;
			}
			if (split_eq(argv[++i], "--dim", &name, &value))
				return -1;
			errno = 0; /* past int64: out of range, not clamped */
			long long x = strtoll(value, &end, 10), hi = 0;
			bool range = errno == ERANGE;
			if (end != value && strncmp(end, "..", 2) == 0) { /* LO..HI: dynamic */
				const char *h = end + 2;
				hi = strtoll(h, &end, 10);
				range = range || errno == ERANGE;
				if (end == h || *end || hi <= x || range) {
					mc_error("--dim %s: '%s' is not a range LO..HI of non-negative integers, LO < HI",
					         name, value);
					free(name);
					return -1;
				}
			}
			if (end == value || *end || x < 0 || range) {
				mc_error("--dim %s: '%s' is not a non-negative integer", name, value);
				free(name);
				return -1;
			}
			c->dim_pins[c->n_dim_pins++] = (mc_dim_pin){name, x, hi};
			note_option(c, "--dim", argv[i]);
		} else if (want_io && strcmp(a, "--input") == 0 && has_val) {
			char *name;
			const char *file;
			if (c->n_inputs == 64) {
				mc_error("too many --input options");
				return -1;
			}
			if (split_eq(argv[++i], "--input", &name, &file))
				return -1;
			c->input_names[c->n_inputs] = name;
			c->input_files[c->n_inputs++] = file;
		} else if (want_io && strcmp(a, "--output-dir") == 0 && has_val) {
			c->output_dir = argv[++i];
		} else if (a[0] == '-' && a[1]) {
			mc_error("unknown option '%s' (or it needs a value)", a);
			return -1;
		} else if (!c->model) {
			c->model = a;
		} else {
			mc_error("unexpected argument '%s'", a);
			return -1;
		}
	}
	if (!c->model) {
		mc_error("no model file given");
		return -1;
	}
	return 0;
}

static void free_cli(cli *c)
{
	for (int i = 0; i < c->n_pins; i++)
		free((char *)c->pins[i].name);
	for (int i = 0; i < c->n_inputs; i++)
		free((char *)c->input_names[i]);
	for (int i = 0; i < c->n_dim_pins; i++)
		free((char *)c->dim_pins[i].param);
	for (int i = 0; i < c->compile.n_binds; i++)
		free((char *)c->bind_names[i]);
}

/* ---- inspect ---- */
typedef struct {
	const char *op;
	int count;
} op_count;

static int cmp_count(const void *a, const void *b)
{
	const op_count *x = a, *y = b;
	if (x->count != y->count)
		return y->count - x->count;
	return strcmp(x->op, y->op);
}

/* Counts nodes by the op_type the file gives: a display of what the model
 * names, ops outside the table (other domains, unknown ones) included, so
 * it groups by name rather than by op id. */
static void histogram(const mc_graph *g, op_count *h, int *n, int cap)
{
	for (int i = 0; i < g->n_nodes; i++) {
		const mc_node *nd = &g->nodes[i];
		int k;
		for (k = 0; k < *n; k++)
			if (strcmp(h[k].op, nd->op_type) == 0)
				break;
		if (k == *n && *n < cap)
			h[(*n)++] = (op_count){nd->op_type, 0};
		if (k < *n)
			h[k].count++;
		for (int a = 0; a < nd->n_attrs; a++)
			if (nd->attrs[a].g)
				histogram(nd->attrs[a].g, h, n, cap);
	}
}

static void count_params(const mc_graph *g, size_t *params, size_t *bytes)
{
	for (int v = 0; v < g->n_values; v++)
		if (g->values[v].kind == MC_VAL_CONST && g->values[v].konst) {
			*params += g->values[v].konst->numel;
			*bytes += g->values[v].konst->nbytes;
		}
	for (int i = 0; i < g->n_nodes; i++)
		for (int a = 0; a < g->nodes[i].n_attrs; a++)
			if (g->nodes[i].attrs[a].g)
				count_params(g->nodes[i].attrs[a].g, params, bytes);
}

static void print_value(const mc_value *v)
{
	char buf[256] = "";
	size_t off = 0;
	bool symbolic = false;
	for (int d = 0; d < v->shape.rank; d++)
		symbolic |= v->shape.dims[d] < 0;
	/* 1x3x224x224 when fixed; [batch,3,224,224] while some dim is symbolic */
	for (int d = 0; d < v->shape.rank && off < sizeof buf; d++) {
		const char *sep = d ? (symbolic ? "," : "x") : (symbolic ? "[" : "");
		if (v->shape.dims[d] >= 0)
			off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%lld", sep,
			                        (long long)v->shape.dims[d]);
		else
			off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", sep,
			                        v->dim_param[d] ? v->dim_param[d] : "?");
	}
	if (symbolic && off < sizeof buf)
		snprintf(buf + off, sizeof buf - off, "]");
	printf("  %-32s %-8s %s", v->name, mc_dtype_name(v->dtype), v->shape.rank ? buf : "scalar");
	if (v->counted) /* NonMaxSuppression's and what follows: the bound, the count at run time */
		printf("  (axis %d: up to %lld, a count made at run time)", v->count_axis,
		       (long long)v->shape.dims[v->count_axis]);
	printf("\n");
}

/* Quantized models: what the quantize pass makes integer, what stays float.
 * -1 when the pass refuses the model (a scale that is not a finite positive
 * number, reported): inspect then fails as compile would. */
static int print_quantized(mc_graph *g)
{
	int qdq = 0;
	for (int i = 0; i < g->n_nodes; i++)
		qdq += g->nodes[i].id == MC_OP_QuantizeLinear || g->nodes[i].id == MC_OP_DequantizeLinear;
	if (!qdq)
		return 0;
	if (mc_pass_quantize(g, NULL) < 0)
		return -1;
	int integer = 0;
	for (int i = 0; i < g->n_nodes; i++)
		integer += !strncmp(g->nodes[i].op_type, "Qi", 2) && mc_op_has(g->nodes[i].id, MC_OF_INTERNAL);
	printf("quantized: %d integer ops\n", integer);
	int islands = mc_quant_islands(g, stdout, "  ");
	printf("float islands: %d\n", islands);
	return 0;
}

/* --dim NAME=LO..HI serves compile alone: the others run one size. */
static int one_size_only(const cli *c, const char *cmd)
{
	for (int i = 0; i < c->n_dim_pins; i++)
		if (c->dim_pins[i].hi > c->dim_pins[i].value) {
			mc_error("--dim %s=%lld..%lld: %s takes one size (--dim %s=N); a range is for compile",
			         c->dim_pins[i].param, (long long)c->dim_pins[i].value, (long long)c->dim_pins[i].hi, cmd,
			         c->dim_pins[i].param);
			return -1;
		}
	return 0;
}

static int cmd_inspect(cli *c)
{
	if (one_size_only(c, "inspect"))
		return 2;
	mc_import_opts opts = {.pins = c->pins, .n_pins = c->n_pins, .dim_pins = c->dim_pins,
	                       .n_dim_pins = c->n_dim_pins, .allow_unsupported = true};
	mc_graph *g = mc_import_file(c->model, &opts);
	if (!g)
		return 1;
	printf("model: %s (opset %d)\n", c->model, g->opset);
	size_t params = 0, bytes = 0;
	count_params(g, &params, &bytes);
	int unsupported = mc_report_unsupported(g);
	bool pinned = true;
	for (int i = 0; i < g->n_inputs; i++)
		pinned &= g->values[g->inputs[i]].typed;
	bool inferred = pinned && !unsupported && mc_infer_graph(g) == 0;
	printf("inputs:\n");
	for (int i = 0; i < g->n_inputs; i++)
		print_value(&g->values[g->inputs[i]]);
	printf("outputs:\n");
	for (int i = 0; i < g->n_outputs; i++)
		if (inferred)
			print_value(&g->values[g->outputs[i]]);
		else
			printf("  %s\n", g->values[g->outputs[i]].name);
	op_count h[512];
	int nh = 0, total = 0;
	histogram(g, h, &nh, 512);
	qsort(h, (size_t)nh, sizeof *h, cmp_count);
	for (int i = 0; i < nh; i++)
		total += h[i].count;
	printf("ops: %d nodes, %d distinct\n", total, nh);
	for (int i = 0; i < nh; i++)
		printf("  %-24s %d\n", h[i].op, h[i].count);
	printf("parameters: %zu (%zu bytes)\n", params, bytes);
	bool refused = inferred && print_quantized(g) < 0;
	if (inferred)
		printf("MACs (convolutions, Gemm, MatMul, recurrent layers): %.0f (%.2f M)\n", mc_graph_macs(g),
		       mc_graph_macs(g) / 1e6);
	else if (!pinned)
		printf("MACs: unknown until every input dimension is pinned with --input-shape\n");
	int rc = 0;
	if (unsupported) {
		/* The importer has already named each node on stderr. */
		printf("unsupported: %d node%s (listed above on stderr)\n", unsupported,
		       unsupported == 1 ? "" : "s");
		rc = 1;
	} else if ((pinned && !inferred) || refused) {
		rc = 1;
	}
	mc_graph_free(g);
	return rc;
}

/* ---- compile ---- */
/* The compile options with the shape pins and binds of the command line. */
static mc_compile_opts *compile_opts(cli *c)
{
	mc_compile_opts *o = &c->compile;
	o->import = (mc_import_opts){.pins = c->pins, .n_pins = c->n_pins, .dim_pins = c->dim_pins,
	                             .n_dim_pins = c->n_dim_pins};
	o->bind_names = c->bind_names;
	o->bind_values = c->bind_values;
	o->argv_line = c->argv_line;
	return o;
}

static int cmd_compile(cli *c)
{
	if (!c->model || !c->output_dir) {
		mc_error("compile needs MODEL and -o DIR");
		return 2;
	}
	return mc_compile(c->model, c->output_dir, compile_opts(c)) ? 1 : 0;
}

static int cmd_verify(cli *c)
{
	if (one_size_only(c, "verify"))
		return 2;
	if (!c->model) {
		mc_error("verify needs MODEL");
		return 2;
	}
	c->verify.n_inputs = c->n_inputs;
	c->verify.input_names = c->input_names;
	c->verify.input_files = c->input_files;
	int r = mc_verify(c->model, compile_opts(c), &c->verify);
	return r < 0 ? 2 : r;
}

/* ---- run ---- */
static int cmd_run(cli *c)
{
	if (one_size_only(c, "run"))
		return 2;
	if (!c->output_dir) {
		mc_error("run needs --output-dir DIR");
		return 2;
	}
	mc_import_opts opts = {.pins = c->pins, .n_pins = c->n_pins, .dim_pins = c->dim_pins,
	                       .n_dim_pins = c->n_dim_pins};
	mc_graph *g = mc_import_file(c->model, &opts);
	if (!g)
		return 1;
	int rc = 1;
	mc_tensor **in = mc_xcalloc((size_t)g->n_inputs, sizeof *in);
	mc_tensor **out = mc_xcalloc((size_t)g->n_outputs, sizeof *out);
	if (mc_infer_graph(g) || mc_quantize_reference(g, false))
		goto done;
	if (mc_read_inputs(g, c->n_inputs, c->input_names, c->input_files, in))
		goto done;
	if (mkdir(c->output_dir, 0777) != 0 && errno != EEXIST) {
		mc_error("cannot create '%s': %s", c->output_dir, strerror(errno));
		goto done;
	}
	if (mc_interp_run(g, in, out, NULL))
		goto done;
	rc = 0;
	for (int i = 0; i < g->n_outputs && !rc; i++) {
		char file[512], path[4096];
		mc_output_file_name(g->values[g->outputs[i]].name, file, sizeof file);
		snprintf(path, sizeof path, "%s/%s", c->output_dir, file);
		if (mc_tensor_write_raw(path, out[i]))
			rc = 1;
	}
done:
	for (int i = 0; i < g->n_inputs; i++)
		mc_tensor_free(in[i]);
	for (int i = 0; i < g->n_outputs; i++)
		mc_tensor_free(out[i]);
	free(in);
	free(out);
	mc_graph_free(g);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	mc_progress_begin();
	const char *cmd = argv[1];
	if (strcmp(cmd, "--version") == 0) {
		printf("modelc %s\ntargets:", MC_VERSION);
		for (int i = 0; mc_targets[i]; i++)
			if (!mc_targets[i]->available || mc_targets[i]->available())
				printf(" %s", mc_targets[i]->name);
		printf("\n");
		return 0;
	}
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
		usage(stdout);
		return 0;
	}
	/* `modelc compile --help` (any command): the usage, every option in it */
	for (int i = 2; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return 0;
		}
	/* A file-size limit (ulimit -f) then makes a write fail with EFBIG, which
	 * is reported like a full disk, instead of killing modelc half-way. */
	signal(SIGXFSZ, SIG_IGN);
	cli c = {0};
	mc_compile_opts_init(&c.compile);
	mc_verify_opts_init(&c.verify);
	int rc;
	if (strcmp(cmd, "inspect") == 0)
		rc = parse_args(argc, argv, &c, false) ? 2 : cmd_inspect(&c);
	else if (strcmp(cmd, "compile") == 0)
		rc = parse_args(argc, argv, &c, 2) ? 2 : cmd_compile(&c);
	else if (strcmp(cmd, "verify") == 0)
		rc = parse_args(argc, argv, &c, 2) ? 2 : cmd_verify(&c);
	else if (strcmp(cmd, "run") == 0)
		rc = parse_args(argc, argv, &c, true) ? 2 : cmd_run(&c);
	else {
		mc_error("unknown command '%s'", cmd);
		usage(stderr);
		rc = 2;
	}
	free_cli(&c);
	/* What inspect and run print must not be lost silently (a full disk, a
	 * closed pipe). */
	if (fflush(stdout) != 0 || ferror(stdout)) {
		mc_error("cannot write standard output: %s", strerror(errno));
		rc = rc ? rc : 1;
	}
	return rc;
}
