/* Lowerings of the index family (see aot/aot.h: mc_lowering). */
#include "aot.h"

const mc_lowering *const mc_lower_index[] = {
	NULL,
};
