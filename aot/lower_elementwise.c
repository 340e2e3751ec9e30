/* Lowerings of pointwise ops: each gives one element's value from its
 * arguments; aot/lower.c supplies loops, broadcasting and fusion. */
#include "aot.h"

static mc_kexpr *pw_add(mc_lower_ctx *c, mc_kexpr *const *a)
{
	return mc_k_add(c->kb, a[0], a[1]);
}

static mc_kexpr *pw_relu(mc_lower_ctx *c, mc_kexpr *const *a)
{
	mc_kb *kb = c->kb;
	return mc_k_bin(kb, MC_KB_MAX, a[0], mc_k_const_as(kb, a[0]->type, 0));
}

static const mc_lowering l_add = { "Add", NULL, pw_add, 0 };
static const mc_lowering l_relu = { "Relu", NULL, pw_relu, 0 };

const mc_lowering *const mc_lower_elementwise[] = {
	&l_add,
	&l_relu,
	NULL,
};
