#include "ops.h"

const mc_op *const mc_ops_signal[] = {
	NULL,
};
