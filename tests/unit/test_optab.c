/* libcore/optab.h: the op table agrees with the registry and the
 * lowerings, so that no fact is owned twice. */
#include <criterion/criterion.h>
#include <string.h>

#include "../../aot/aot.h"
#include "modelc.h"

/* The row of every registry entry: found by name (internal ops by their
 * own row, which mc_opid_of does not give a model). */
static mc_opid row_of(const mc_op *op)
{
	for (int id = 1; id < MC_OP__COUNT; id++)
		if (!strcmp(mc_op_name((mc_opid)id), op->name))
			return (mc_opid)id;
	return MC_OP_NONE;
}

Test(optab, every_registry_entry_has_a_row)
{
	int n;
	const mc_op *const *all = mc_registry_all(&n);
	cr_assert_gt(n, 100);
	for (int i = 0; i < n; i++) {
		mc_opid id = row_of(all[i]);
		cr_assert_neq(id, MC_OP_NONE, "%s has no row", all[i]->name);
		bool internal = (all[i]->flags & MC_OP_INTERNAL) != 0;
		cr_assert_eq(mc_op_has(id, MC_OF_INTERNAL), internal, "%s: internal differs", all[i]->name);
		cr_assert_eq(mc_opid_of(all[i]->name), internal ? MC_OP_NONE : id, "%s", all[i]->name);
		cr_assert_not_null(mc_registry_find_id(id, all[i]->min_opset), "%s-%d", all[i]->name, all[i]->min_opset);
	}
}

Test(optab, every_row_but_constant_has_a_registry_entry)
{
	for (int id = 1; id < MC_OP__COUNT; id++) {
		if (id == MC_OP_Constant) /* import turns it into a value */
			continue;
		bool found = false;
		for (int opset = 1; opset <= MC_MAX_OPSET && !found; opset++)
			found = mc_registry_find_id((mc_opid)id, opset) != NULL;
		cr_assert(found, "row %s has no registry entry", mc_op_name((mc_opid)id));
	}
	cr_assert_eq(mc_opid_of("NoSuchOp"), MC_OP_NONE);
	cr_assert_str_eq(mc_op_name(MC_OP_NONE), "");
	cr_assert_str_eq(mc_op_name(MC_OP__COUNT), "", "out of range is the empty row");
}

/* The pointwise column is what fusion and in-place reuse ask; the
 * lowering tables must agree: a pointwise form and no kernel of its own
 * exactly for PW rows. */
Test(optab, pointwise_column_matches_the_lowerings)
{
	int pw = 0;
	for (int id = 1; id < MC_OP__COUNT; id++) {
		const mc_lowering *l = mc_lowering_find((mc_opid)id);
		bool col = mc_op_has((mc_opid)id, MC_OF_PW);
		const char *name = mc_op_name((mc_opid)id);
		if (l)
			cr_assert_eq(l->op, id, "%s: lowering filed under another row", name);
		cr_assert_eq(col, l && l->pointwise && !l->lower, "%s: PW column and lowering differ", name);
		if (mc_op_has((mc_opid)id, MC_OF_VEC))
			cr_assert(col, "%s: a vector form needs a pointwise form", name);
		pw += col;
	}
	cr_assert_gt(pw, 50);
}

Test(optab, node_set_op_makes_internal_nodes)
{
	mc_node n = {0};
	cr_assert(mc_node_set_op(&n, MC_OP_NhwcConv, 13));
	cr_assert_str_eq(n.op_type, "NhwcConv");
	cr_assert_eq(n.id, MC_OP_NhwcConv);
	cr_assert_not_null(n.op);
	cr_assert(mc_node_set_op(&n, MC_OP_Relu, 13));
	cr_assert_str_eq(n.op_type, "Relu");
	cr_assert_not(mc_node_set_op(&n, MC_OP_Constant, 13), "Constant has no entry");
	cr_assert_null(n.op);
	free(n.op_type);
}
