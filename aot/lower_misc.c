/* Lowerings of the misc family (see aot/aot.h: mc_lowering). */
#include "aot.h"

const mc_lowering *const mc_lower_misc[] = {
	NULL,
};
