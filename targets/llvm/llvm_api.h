/* LLVM's C API, loaded when the llvm target runs: modelc does not link
 * libLLVM, whose loading would cost every run (--version, the C target,
 * each unit test) tens of milliseconds; llvm_api.c dlopen's it on the
 * first use and fills mc_llvm with the functions of llvm_functions.def.
 * emit_llvm.c includes this after the LLVM-C headers, then the generated
 * llvm_functions.h, whose `#define LLVMBuildAdd (mc_llvm.LLVMBuildAdd)`
 * lines turn its calls into calls through these pointers. */
#ifndef MODELC_LLVM_API_H
#define MODELC_LLVM_API_H

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

/* One pointer per function, of the type the LLVM-C headers declare. */
typedef struct {
#define X(name) __typeof__(name) *name;
#include "llvm_functions.def"
#undef X
} mc_llvm_api;

extern mc_llvm_api mc_llvm;

/* Loads libLLVM, fills mc_llvm and initialises every target LLVM was
 * built with; the work is done once per process, the answer kept. NULL
 * when mc_llvm is ready, else why not, as one line (the library tried and
 * dlerror's text), for the caller to report. */
const char *mc_llvm_load(void);

#endif
