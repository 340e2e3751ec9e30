/* Helpers op implementations share (libcore/ops_util.c, declared in
 * libcore/ops/ops.h): broadcast indexing, list attributes, optional and
 * required inputs, working memory. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "op_harness.h"
#include "ops/ops.h"

TestSuite(ops_util, .init = capture_diags);

/* A [2, 1, 3] tensor read as [2, 4, 3]: the middle dim repeats. */
Test(ops_util, bcast_index_follows_broadcast_strides)
{
	mc_shape src = shape(3, (int64_t[]){2, 1, 3}), target = shape(3, (int64_t[]){2, 4, 3});
	int64_t st[MC_MAX_RANK];
	mc_broadcast_strides(&src, &target, st);
	/* target element (1, 2, 1) is 1*12 + 2*3 + 1 = 19; source (1, 0, 1) is 4 */
	cr_assert_eq(mc_bcast_index(19, &target, st), 4);
	cr_assert_eq(mc_bcast_index(0, &target, st), 0);
	cr_assert_eq(mc_bcast_index(23, &target, st), 5);
}

Test(ops_util, attr_ints_fixed_defaults_counts_and_ranges)
{
	mc_attr strides = attr_ints("strides", (int64_t[]){2, 3}, 2);
	mc_node n = {.name = (char *)"n", .op_type = (char *)"Col2Im", .domain = (char *)"",
	             .opset = 18, .n_attrs = 0, .attrs = &strides};
	int64_t out[4];
	cr_assert_eq(mc_attr_ints_fixed(&n, "strides", 2, 1, 1, out), 0);
	cr_assert(out[0] == 1 && out[1] == 1);

	n.n_attrs = 1;
	cr_assert_eq(mc_attr_ints_fixed(&n, "strides", 2, 1, 1, out), 0);
	cr_assert(out[0] == 2 && out[1] == 3);
	cr_assert_eq(mc_attr_ints_fixed(&n, "strides", 3, 1, 1, out), -1);
	expect_error("has 2 values, expected 3");
	cr_assert_eq(mc_attr_ints_fixed(&n, "strides", 2, 1, 3, out), -1);
	expect_error("value 2 is out of range");
}

Test(ops_util, optional_and_required_inputs)
{
	mc_node n = {.name = (char *)"n", .op_type = (char *)"X", .domain = (char *)""};
	mc_value a = {.name = (char *)"a"};
	const mc_value *in[2] = {&a, NULL};
	mc_infer_ctx c = {.node = &n, .n_in = 2, .in = in};
	cr_assert_eq(mc_opt_in(&c, 0), &a);
	cr_assert_null(mc_opt_in(&c, 1));
	cr_assert_null(mc_opt_in(&c, 5)); /* trailing omitted input */
	cr_assert_eq(MC_NEED_INPUTS(&c, 0), 0);
	cr_assert_eq(MC_NEED_INPUTS(&c, 0, 1), -1);
	expect_error("input 1 is required");
	cr_assert_eq(MC_NEED_INPUTS(&c, 3), -1);
	expect_error("input 3 is required");
}

Test(ops_util, alloc_array_reports_overflow)
{
	mc_node n = {.name = (char *)"n", .op_type = (char *)"X", .domain = (char *)""};
	double *v = mc_alloc_array(&n, 3, sizeof *v);
	cr_assert_not_null(v);
	cr_assert(v[0] == 0 && v[2] == 0);
	free(v);
	cr_assert_null(mc_alloc_array(&n, SIZE_MAX / 2, 8));
	expect_error("cannot allocate a working array");
	void *p = mc_params_new(&n, 16);
	cr_assert_not_null(p);
	cr_assert_eq(n.params, p);
	cr_assert_eq(((unsigned char *)p)[15], 0);
	p = mc_params_new(&n, 8); /* the old params are freed, not leaked */
	cr_assert_eq(n.params, p);
	free(n.params);
}
