# The project's sources, for configure (the main build) and fuzz/run (the
# instrumented build): one list, so that both link the same pieces.
# POSIX sh; sourced from the repository root.
#   mc_src_dirs: directories whose *.c make up libmodelc
#   mc_embeds:   SYMBOL:FILE pairs of text files carried inside the binary
mc_src_dirs="libcore libcore/ops freezing aot targets/common targets/c targets/cuda targets/llvm"
mc_embeds="mc_model_ninja_in:aot/model.ninja.in mc_model_cuda_ninja_in:aot/model_cuda.ninja.in mc_model_llvm_ninja_in:aot/model_llvm.ninja.in mc_runtime_min_h:runtime-min/modelc_rt.h mc_threads_pthread_h:runtime-min/modelc_threads_pthread.h mc_threads_pthread_c:runtime-min/modelc_threads_pthread.c mc_ivec_x86_h:runtime-min/modelc_ivec_x86.h mc_ivec_neon_h:runtime-min/modelc_ivec_neon.h"
