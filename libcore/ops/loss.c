#include "ops.h"

const mc_op *const mc_ops_loss[] = {
	NULL,
};
