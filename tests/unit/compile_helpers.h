/* Test support for the compiler: compile a built model, build the C, run
 * it and compare with the reference; or look at the program's kernels. */
#ifndef COMPILE_HELPERS_H
#define COMPILE_HELPERS_H

#include "../../aot/aot.h"
#include "model_builder.h"

/* mc_verify on b's model (rtol 1e-4, atol 1e-5, -O1 -Werror); frees b.
 * 0 when every output is within tolerance. fold_limit 0: the default. */
int verify_model(mb *b, size_t fold_limit);
/* The same with o's compile options (target, ISA...). */
int verify_model_with(mb *b, const mc_compile_opts *o);
/* The same, the generated C built with cflags. */
int verify_model_cflags(mb *b, const mc_compile_opts *o, const char *cflags);
/* verify_model_cflags for isa, the C built -O1 -march=native for this
 * machine; 0 (and b freed) where this machine does not run isa. */
int verify_model_isa(mb *b, const char *isa);
/* The same with o's options (o->isa the ISA). */
int verify_model_isa_with(mb *b, const mc_compile_opts *o);
/* Imports, infers and builds the program of b's model (b stays). */
mc_graph *program_of(mb *b, mc_program *p);
/* The same with o's compile options (ISA, --threads...). */
mc_graph *program_with(mb *b, const mc_compile_opts *o, mc_program *p);
/* A kernel's scratch buffers: its own arena areas (not graph values, not
 * packed constants). */
int scratch_buffers(const mc_kernel *k);
/* True if this machine runs code built for isa with -march=native (tests
 * skip the vector ISAs it lacks: a CI machine may have no AVX-512). */
bool host_runs_isa(const char *isa);
/* Whether arm-none-eabi-gcc and qemu-system-arm are here (CI installs
 * both); said once where they are not. */
bool have_board(void);
/* Runs the model compiled as `t` into dir once on inputs in (n_in of
 * them): built -O2 for the Cortex-M4 and run on the emulated board
 * (qemu-system-arm -M mps2-an386) where board, else built and run on this
 * machine. Each output's bytes go into outs[k] (allocated by the caller,
 * the output's size). 0, or -1 after a failed expectation. */
int run_compiled(const char *dir, mc_tensor **in, int n_in, int n_out, bool board, mc_tensor **outs);
/* b's model written as dir/file; frees b; the path (malloc'd). */
char *save_model(mb *b, const char *dir, const char *file);
/* The number after "key": in dir/file (NAME.json), e.g. arena_bytes. */
size_t json_number(const char *dir, const char *file, const char *key);
/* mc_kernel_dump as a malloc'd string. */
char *kernel_text(const mc_kernel *k);

#endif
