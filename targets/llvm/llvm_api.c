/* The loader of LLVM's C API (llvm_api.h). configure passes the library
 * as MC_LLVM_SONAME, tried first on the normal search path (so that
 * LD_LIBRARY_PATH and the system's own copy win), and MC_LLVM_PATH, the
 * file llvm-config names, for where its directory is not on that path.
 * Without LLVM this file is empty: emit_llvm.c's stub needs none of it. */
#ifdef MC_HAVE_LLVM

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "llvm_api.h"

#if !defined(MC_LLVM_SONAME) || !defined(MC_LLVM_PATH)
#error "configure passes libLLVM's soname and file as MC_LLVM_SONAME and MC_LLVM_PATH"
#endif

mc_llvm_api mc_llvm;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char why[1024]; /* empty once loaded */
/* Never closed: LLVM keeps state (its targets, options) for the process,
 * and the sanitizers symbolise its frames at exit only while it is mapped. */
static void *lib;

/* Target.h's LLVMInitializeAllTargetInfos() and the like are static inline
 * functions that call each target's LLVMInitializeX86TargetInfo and so on:
 * link-time references. Call those the library has, by name, instead. */
static void init(const char *target, const char *part)
{
	char name[128];
	snprintf(name, sizeof name, "LLVMInitialize%s%s", target, part);
	void (*f)(void) = (void (*)(void))dlsym(lib, name);
	if (f)
		f();
}

/* Every target LLVM was built with, in the order of the inline functions:
 * all target infos, then the targets, their MC layers, the asm printers
 * (a target without one is skipped). Each .def undefines its macro. */
static void init_targets(void)
{
#define LLVM_TARGET(t) init(#t, "TargetInfo");
#include <llvm/Config/Targets.def>
#define LLVM_TARGET(t) init(#t, "Target");
#include <llvm/Config/Targets.def>
#define LLVM_TARGET(t) init(#t, "TargetMC");
#include <llvm/Config/Targets.def>
#define LLVM_ASM_PRINTER(t) init(#t, "AsmPrinter");
#include <llvm/Config/AsmPrinters.def>
}

static void load(void)
{
	const char *from = MC_LLVM_SONAME;
	lib = dlopen(from, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		from = MC_LLVM_PATH;
		lib = dlopen(from, RTLD_NOW | RTLD_LOCAL);
	}
	if (!lib) {
		const char *err = dlerror();
		snprintf(why, sizeof why, "cannot load LLVM: %s (also tried %s on the library search path)",
		         err ? err : MC_LLVM_PATH, MC_LLVM_SONAME);
		return;
	}
	const char *missing = NULL;
#define X(name)                                                                 \
	if (!(mc_llvm.name = (__typeof__(mc_llvm.name))dlsym(lib, #name)) && !missing) \
		missing = #name;
#include "llvm_functions.def"
#undef X
	if (missing) {
		snprintf(why, sizeof why, "%s has no %s (another version of LLVM than modelc was built with?)",
		         from, missing);
		memset(&mc_llvm, 0, sizeof mc_llvm);
		return;
	}
	init_targets();
}

const char *mc_llvm_load(void)
{
	pthread_once(&once, load);
	return why[0] ? why : NULL;
}

#endif
