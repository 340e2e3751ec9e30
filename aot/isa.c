/* Target instruction sets for --isa: the facts kernel generators choose
 * vector widths and register tiles from. */
#include <string.h>
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

#include "kir.h"

static const mc_isa isas[] = {
	{ MC_ISA_GENERIC, "generic", 1, 16, false, 0, false, false, false },
	{ MC_ISA_AVX2, "avx2", 8, 16, false, 0, false, false, false },
	{ MC_ISA_AVX512, "avx512", 16, 32, false, 0, false, false, false },
	{ MC_ISA_NEON, "neon", 4, 32, false, 0, false, false, false },
	{ MC_ISA_CORTEX_M, "cortex-m", 1, 32, false, 0, false, false, false },
	{ MC_ISA_AVX512, "avx512-vnni", 16, 32, false, 0, false, true, false },
	/* Armv8.2's dot product (sdot: Cortex-A55/A75 on, Jetson's A78AE, Neoverse) */
	{ MC_ISA_NEON, "neon-dotprod", 4, 32, false, 0, false, true, true },
};

/* The widest ISA this machine runs: what -march=native builds for. */
static const mc_isa *native(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl"))
		return __builtin_cpu_supports("avx512vnni") ? &isas[5] : &isas[2];
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return &isas[1];
#elif defined(__aarch64__) && defined(__linux__)
	return getauxval(AT_HWCAP) & HWCAP_ASIMDDP ? &isas[6] : &isas[3];
#elif defined(__aarch64__)
	return &isas[3];
#endif
	return &isas[0];
}

#ifndef MMA_K_HALF /* (-D: for tuning runs) */
#define MMA_K_HALF 64
#endif

const mc_isa *mc_isa_cuda(bool mma, bool half)
{
	/* half operands take twice the k of TF32 in the same shared memory:
	 * half the steps, each waiting on its loads once */
	static const mc_isa cuda = { MC_ISA_CUDA, "cuda", 1, 0, false, 0, false, false, false };
	static const mc_isa cuda_tf32 = { MC_ISA_CUDA, "cuda", 1, 0, true, 32, true, false, false };
	static const mc_isa cuda_f16 = { MC_ISA_CUDA, "cuda", 1, 0, true, MMA_K_HALF, false, false, false };
	return !mma ? &cuda : half ? &cuda_f16 : &cuda_tf32;
}

const mc_isa *mc_isa_find(const char *name)
{
	if (!name)
		return &isas[0];
	if (strcmp(name, "native") == 0)
		return native();
	for (size_t i = 0; i < sizeof isas / sizeof *isas; i++)
		if (strcmp(isas[i].name, name) == 0)
			return &isas[i];
	return NULL;
}

bool mc_isa_has_lanes(const mc_isa *isa, int lanes)
{
	if (lanes == 1)
		return true;
	switch (isa->kind) {
	case MC_ISA_AVX512: return lanes == 16 || lanes == 8 || lanes == 4;
	case MC_ISA_AVX2: return lanes == 8 || lanes == 4;
	case MC_ISA_NEON: return lanes == 4;
	default: return false;
	}
}

int mc_isa_lanes_upto(const mc_isa *isa, int64_t n)
{
	for (int l = isa->max_lanes; l > 1; l /= 2)
		if (l <= n && mc_isa_has_lanes(isa, l))
			return l;
	return 1;
}
