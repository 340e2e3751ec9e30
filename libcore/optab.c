/* The op table's rows (optab.h) as data, and the one name-to-id lookup. */
#include <string.h>

#include "modelc.h"

static const mc_opinfo rows[MC_OP__COUNT] = {
	[MC_OP_NONE] = { "", 0, MC_MACS_NONE },
#define MC_OP_ROW(name, facts, macs) [MC_OP_##name] = { #name, facts, macs },
	MC_OP_TABLE(MC_OP_ROW)
#undef MC_OP_ROW
};

const mc_opinfo *mc_opinfo_of(mc_opid id)
{
	return &rows[(unsigned)id < MC_OP__COUNT ? id : MC_OP_NONE];
}

mc_opid mc_opid_of(const char *op_type)
{
	for (int id = 1; id < MC_OP__COUNT; id++)
		if (!(rows[id].facts & MC_OF_INTERNAL) && strcmp(rows[id].name, op_type) == 0)
			return (mc_opid)id;
	return MC_OP_NONE;
}
