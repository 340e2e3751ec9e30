/* Lowerings of the nn family (see aot/aot.h: mc_lowering). */
#include "aot.h"

const mc_lowering *const mc_lower_nn[] = {
	NULL,
};
