/* The targets' descriptors, and the options resolved against them once,
 * before freezing (aot/compile.c). */
#include <string.h>

#include "compile.h"

const mc_target mc_target_c = {
	.name = "c",
	.emit = mc_emit_c,
	.ninja_in = mc_model_ninja_in,
	.cpu_isa = true,
	.mcu_templates = true,
	.measures_stack = true,
	.verify = true,
};

/* the CUDA kernels are the plain lowerings, a thread per output element,
 * and templates for convolutions. In float32 (TF32 too) the templates
 * read channels first, so a depthwise convolution goes channels-last only
 * where the model itself does next (ConvNeXt's blocks: their transposes
 * vanish, freezing/layout.c's "depthwise"); in half on tensor cores
 * (fp16) the layout is "auto", chosen as the CPUs' is (mc_target_resolve) */
const mc_target mc_target_cuda = {
	.name = "cuda",
	.emit = mc_emit_cuda,
	.ninja_in = mc_model_cuda_ninja_in,
	.layout = "depthwise",
	.gpu = true,
	.fp16 = true,
	.tf32 = true,
	.conv_template = true,
	.grid = true,
};

/* the llvm target's kernels are tiled for the CPU it builds for */
const mc_target mc_target_llvm = {
	.name = "llvm",
	.emit = mc_emit_llvm,
	.available = mc_llvm_available,
	.ninja_in = mc_model_llvm_ninja_in,
	.default_isa = mc_llvm_default_isa,
	.cpu_isa = true,
	.object = true,
	.verify = true,
};

const mc_target *const mc_targets[] = { &mc_target_c, &mc_target_cuda, &mc_target_llvm, NULL };

const mc_target *mc_target_named(const char *name)
{
	if (!name)
		return &mc_target_c;
	for (int i = 0; mc_targets[i]; i++)
		if (!strcmp(mc_targets[i]->name, name))
			return mc_targets[i];
	mc_error("unknown target '%s' (known: c, cuda, llvm)", name);
	return NULL;
}

/* A GPU's ISA: convolutions on tensor cores with half operands (fp16) or
 * TF32 ones (--tf32), where every arch has them. */
static const mc_isa *gpu_isa(const mc_compile_opts *o, bool half)
{
	bool mma = (half || o->tf32) && mc_cuda_archs_at_least(o->cuda_arch, 80);
	return mc_isa_cuda(mma, half);
}

int mc_target_resolve(const mc_compile_opts *o, mc_target_config *t)
{
	const mc_target *d = mc_target_named(o->target);
	if (!d)
		return -1;
	bool half = d->fp16 && o->dtype && !strcmp(o->dtype, "fp16");
	mc_dtype stored = half ? MC_FLOAT16 : MC_FLOAT;
	*t = (mc_target_config){ .desc = d, .layout = o->layout ? o->layout : d->layout,
	                         .activations = stored, .weights = stored, .io = MC_FLOAT };
	const char *isa = o->isa || !d->default_isa ? o->isa : d->default_isa(o);
	t->isa = d->gpu ? gpu_isa(o, half) : mc_isa_find(isa);
	if (!t->isa) {
		mc_error("unknown --isa '%s'", isa);
		return -1;
	}
	/* half on tensor cores: convolutions channels-last where they do the
	 * work (a load brings 8 channels of a tap, where channels-first took 8
	 * loads); TF32's are yet to be measured so */
	if (!o->layout && d->gpu && half && t->isa->mma)
		t->layout = "auto";
	return 0;
}
