/* The kernel IR verifier (aot/kcheck.c) and the memory plan validator
 * (aot/plan_check.c): kernels built with the builder, the way lowerings
 * write them, pass; broken ones (an index past the end, a vector running
 * over, mismatched operands, a break outside a loop, ...) fail with a
 * reason that names the kernel. The same for plans. */
#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>

#include "../../aot/aot.h"
#include "op_harness.h"

TestSuite(kcheck, .init = capture_diags);

typedef struct {
	mc_kpool *pool;
	mc_kernel k;
	mc_kb kb;
	char why[512];
} fixture;

static void begin(fixture *f)
{
	memset(f, 0, sizeof *f);
	f->pool = mc_kpool_new();
	f->k.name = "k0_test";
	mc_kb_begin(&f->kb, f->pool, &f->k);
	f->kb.isa = mc_isa_find("avx2");
}

static void end(fixture *f)
{
	free(f->k.bufs);
	free(f->k.vars);
	mc_kpool_free(f->pool);
}

static void expect_ok(fixture *f)
{
	cr_expect_eq(mc_kernel_check(&f->k, f->why, sizeof f->why), 0, "rejected: %s", f->why);
}

/* fails, and says `what` about kernel k0_test */
static void expect_bad(fixture *f, const char *what)
{
	cr_expect_eq(mc_kernel_check(&f->k, f->why, sizeof f->why), -1, "accepted a broken kernel");
	cr_expect(strstr(f->why, "kernel k0_test: ") == f->why, "reason: %s", f->why);
	cr_expect(strstr(f->why, what) != NULL, "reason '%s' lacks '%s'", f->why, what);
}

/* for i in [0, n): out[i + shift] = in[i] * 2 */
static void copy_kernel(fixture *f, int64_t n, size_t count, int64_t shift)
{
	int in = mc_kb_buf(&f->kb, 0, MC_FLOAT, count, false);
	int out = mc_kb_buf(&f->kb, 1, MC_FLOAT, count, true);
	mc_kexpr *i = mc_kb_fori(&f->kb, n, MC_KF_PARALLEL);
	mc_kexpr *x = mc_k_mul(&f->kb, mc_k_load(&f->kb, in, i), mc_k_float(&f->kb, MC_KT_F32, 2));
	mc_kb_store(&f->kb, out, mc_k_addi(&f->kb, i, shift), x);
	mc_kb_end(&f->kb);
}

Test(kcheck, loop_inside_buffer_passes)
{
	fixture f;
	begin(&f);
	copy_kernel(&f, 8, 8, 0);
	expect_ok(&f);
	end(&f);
}

Test(kcheck, store_past_the_end_fails)
{
	fixture f;
	begin(&f);
	copy_kernel(&f, 10, 8, 0); /* loop to 10 over a buffer of 8 */
	expect_bad(&f, "a load from b0 at [0, 9] outside its 8 elements");
	end(&f);
}

Test(kcheck, shifted_store_fails)
{
	fixture f;
	begin(&f);
	copy_kernel(&f, 8, 8, 1);
	expect_bad(&f, "a store into b1 at [1, 8] outside its 8 elements");
	end(&f);
}

Test(kcheck, negative_index_fails)
{
	fixture f;
	begin(&f);
	copy_kernel(&f, 8, 8, -1);
	expect_bad(&f, "a store into b1 at [-1, 6]");
	end(&f);
}

/* for i in [0, n/8): out[8i .. 8i+7] = in[8i + off .. ] as 8-lane vectors */
static void vector_kernel(fixture *f, int64_t n, int64_t off)
{
	int in = mc_kb_buf(&f->kb, 0, MC_FLOAT, (size_t)n, false);
	int out = mc_kb_buf(&f->kb, 1, MC_FLOAT, (size_t)n, true);
	mc_kexpr *i = mc_kb_fori(&f->kb, n / 8, MC_KF_VECTOR);
	mc_kexpr *at = mc_kb_let(&f->kb, mc_k_muli(&f->kb, i, 8));
	mc_kexpr *v = mc_k_vload(&f->kb, in, mc_k_addi(&f->kb, at, off), 8);
	mc_kb_store(&f->kb, out, at, mc_k_add(&f->kb, v, mc_k_float(&f->kb, MC_KT_F32, 1)));
	mc_kb_end(&f->kb);
}

Test(kcheck, vector_loop_passes)
{
	fixture f;
	begin(&f);
	vector_kernel(&f, 32, 0);
	expect_ok(&f);
	end(&f);
}

Test(kcheck, vector_load_past_the_end_fails)
{
	fixture f;
	begin(&f);
	vector_kernel(&f, 32, 1); /* the last vector reads element 32 */
	expect_bad(&f, "a load from b0 at [1, 25] (plus the vector's lanes) outside its 32 elements");
	end(&f);
}

/* GEMV_F32 (the Cortex-M float row products) on each of `steps` rows of
 * x, 10 long: two blocks, 160 weights, no bias */
static void gemv_kernel(fixture *f, int64_t steps, size_t x_count, size_t w_count)
{
	int x = mc_kb_buf(&f->kb, 0, MC_FLOAT, x_count, false);
	int w = mc_kb_buf(&f->kb, 1, MC_FLOAT, w_count, false);
	int out = mc_kb_buf(&f->kb, 2, MC_FLOAT, 2 * MC_GEMV_BLOCK, true);
	mc_kexpr *s = mc_kb_fori(&f->kb, steps, 0);
	mc_ktemplate t = { .kind = MC_TMPL_GEMV_F32, .x = x, .x_at = mc_k_muli(&f->kb, s, 10), .wt = w,
	                   .bias = -1, .out = out, .kp = 10, .tiles = 2 };
	mc_kb_template(&f->kb, &t);
	mc_kb_end(&f->kb);
}

Test(kcheck, gemv_template_inside_its_buffers_passes)
{
	fixture f;
	begin(&f);
	gemv_kernel(&f, 3, 30, 20 * MC_GEMV_BLOCK);
	expect_ok(&f);
	end(&f);
}

Test(kcheck, gemv_template_past_its_input_fails)
{
	fixture f;
	begin(&f);
	gemv_kernel(&f, 3, 29, 20 * MC_GEMV_BLOCK);
	expect_bad(&f, "template input b0 at [0, 20]");
	end(&f);
}

Test(kcheck, gemv_template_with_short_weights_fails)
{
	fixture f;
	begin(&f);
	gemv_kernel(&f, 3, 30, 20 * MC_GEMV_BLOCK - 1);
	expect_bad(&f, "template weight b1: 159");
	end(&f);
}

/* The padded window of a convolution: for o in [0, 8), k in [max(0, 1 - o),
 * min(3, 9 - o)): x[o - 1 + k], x of 8 elements. Intervals give [-1, 8],
 * a loose range (the loop's bounds tie k to o): not reported. */
Test(kcheck, window_bounds_through_min_max_pass)
{
	fixture f;
	begin(&f);
	mc_kb *kb = &f.kb;
	int x = mc_kb_buf(kb, 0, MC_FLOAT, 8, false), y = mc_kb_buf(kb, 1, MC_FLOAT, 8, true);
	mc_kexpr *o = mc_kb_fori(kb, 8, MC_KF_PARALLEL);
	mc_kexpr *ih = mc_kb_let(kb, mc_k_addi(kb, o, -1));
	mc_kexpr *lo = mc_kb_let(kb, mc_k_bin(kb, MC_KB_MAX, mc_k_index(kb, 0), mc_k_sub(kb, mc_k_index(kb, 0), ih)));
	mc_kexpr *hi = mc_kb_let(kb, mc_k_bin(kb, MC_KB_MIN, mc_k_index(kb, 3), mc_k_sub(kb, mc_k_index(kb, 8), ih)));
	mc_kexpr *acc = mc_kb_local(kb, mc_k_float(kb, MC_KT_F32, 0));
	mc_kexpr *k = mc_kb_for(kb, lo, hi, MC_KF_REDUCE);
	mc_kb_assign(kb, acc, mc_k_add(kb, acc, mc_k_load(kb, x, mc_k_add(kb, ih, k))));
	mc_kb_end(kb);
	mc_kb_store(kb, y, o, acc);
	mc_kb_end(kb);
	expect_ok(&f);
	end(&f);
}

/* The same window guarded by an IF instead: 0 <= o - 1 + k < 8. */
static void guarded_window(fixture *f, int64_t limit)
{
	mc_kb *kb = &f->kb;
	int x = mc_kb_buf(kb, 0, MC_FLOAT, 8, false), y = mc_kb_buf(kb, 1, MC_FLOAT, 8, true);
	mc_kexpr *o = mc_kb_fori(kb, 8, MC_KF_PARALLEL);
	mc_kexpr *acc = mc_kb_local(kb, mc_k_float(kb, MC_KT_F32, 0));
	mc_kexpr *k = mc_kb_fori(kb, 3, MC_KF_REDUCE);
	mc_kexpr *ih = mc_kb_let(kb, mc_k_add(kb, mc_k_addi(kb, o, -1), k));
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_AND, mc_k_bin(kb, MC_KB_GE, ih, mc_k_index(kb, 0)),
	                      mc_k_bin(kb, MC_KB_LT, ih, mc_k_index(kb, limit))));
	mc_kb_assign(kb, acc, mc_k_add(kb, acc, mc_k_load(kb, x, ih)));
	mc_kb_end_n(kb, 2);
	mc_kb_store(kb, y, o, acc);
	mc_kb_end(kb);
}

Test(kcheck, guard_by_if_passes)
{
	fixture f;
	begin(&f);
	guarded_window(&f, 8);
	expect_ok(&f);
	end(&f);
}

/* A guard one too wide lets element 8 through, but whether a guarded
 * access reaches the end of its range is not known: not reported (no false
 * positives from guards the analysis cannot follow). */
Test(kcheck, guarded_access_is_not_reported)
{
	fixture f;
	begin(&f);
	guarded_window(&f, 9);
	expect_ok(&f);
	end(&f);
}

/* An index read from data is not bounded by the analysis: skipped. */
Test(kcheck, data_dependent_index_is_skipped)
{
	fixture f;
	begin(&f);
	mc_kb *kb = &f.kb;
	int idx = mc_kb_buf(kb, 0, MC_INT64, 4, false), x = mc_kb_buf(kb, 1, MC_FLOAT, 8, false);
	int y = mc_kb_buf(kb, 2, MC_FLOAT, 4, true);
	mc_kexpr *i = mc_kb_fori(kb, 4, MC_KF_PARALLEL);
	mc_kexpr *j = mc_kb_let(kb, mc_k_cast(kb, MC_KT_INDEX, mc_k_load(kb, idx, i)));
	mc_kb_if(kb, mc_k_bin(kb, MC_KB_GE, j, mc_k_index(kb, 8)));
	mc_kb_fail(kb, MC_STATUS_BAD_INDEX);
	mc_kb_end(kb);
	mc_kb_store(kb, y, i, mc_k_load(kb, x, j));
	mc_kb_end(kb);
	expect_ok(&f);
	end(&f);
}

/* A clamp makes a loaded index bounded, and provably inside when the
 * clamp is right; one past is not reported (the loaded data may never
 * reach it). */
Test(kcheck, clamped_index_is_skipped)
{
	fixture f;
	begin(&f);
	mc_kb *kb = &f.kb;
	int idx = mc_kb_buf(kb, 0, MC_INT64, 4, false), x = mc_kb_buf(kb, 1, MC_FLOAT, 8, false);
	int y = mc_kb_buf(kb, 2, MC_FLOAT, 4, true);
	mc_kexpr *i = mc_kb_fori(kb, 4, MC_KF_PARALLEL);
	mc_kexpr *j = mc_k_cast(kb, MC_KT_INDEX, mc_k_load(kb, idx, i));
	j = mc_k_bin(kb, MC_KB_MAX, mc_k_bin(kb, MC_KB_MIN, j, mc_k_index(kb, 8)), mc_k_index(kb, 0));
	mc_kb_store(kb, y, i, mc_k_load(kb, x, j)); /* 8: one past */
	mc_kb_end(kb);
	expect_ok(&f);
	end(&f);
}

/* Code that never runs is not checked: an empty loop. */
Test(kcheck, empty_loop_is_not_checked)
{
	fixture f;
	begin(&f);
	copy_kernel(&f, 0, 0, 5);
	expect_ok(&f);
	end(&f);
}

Test(kcheck, mismatched_operands_fail)
{
	fixture f;
	begin(&f);
	mc_kb *kb = &f.kb;
	int y = mc_kb_buf(kb, 0, MC_FLOAT, 1, true);
	/* the builder would convert; a bad pass could build it directly */
	mc_kexpr *add = mc_k_add(kb, mc_k_float(kb, MC_KT_F32, 1), mc_k_float(kb, MC_KT_F32, 2));
	add->b = mc_k_int(kb, MC_KT_I32, 2);
	mc_kb_store(kb, y, mc_k_index(kb, 0), add);
	expect_bad(&f, "binary operation 0 on f32 and i32");
	end(&f);
}

/* The builder itself refuses two computed operands of different types
 * (MC_ASSERT); a constant still takes the other side's type. */
Test(kcheck, builder_asserts_on_mixed_operands, .signal = SIGABRT)
{
	fixture f;
	begin(&f);
	mc_kb *kb = &f.kb;
	int x = mc_kb_buf(kb, 0, MC_FLOAT, 1, false), n = mc_kb_buf(kb, 1, MC_INT32, 1, false);
	mc_kexpr *i = mc_k_index(kb, 0);
	mc_kexpr *c = mc_k_add(kb, mc_k_load(kb, x, i), mc_k_int(kb, MC_KT_I32, 1));
	cr_assert_eq(c->b->type, MC_KT_F32); /* the constant converted */
	mc_k_add(kb, mc_k_load(kb, x, i), mc_k_load(kb, n, i));
	end(&f);
}

Test(kcheck, compare_must_give_bool)
{
	fixture f;
	begin(&f);
	mc_kb *kb = &f.kb;
	int y = mc_kb_buf(kb, 0, MC_BOOL, 1, true);
	mc_kexpr *lt = mc_k_bin(kb, MC_KB_LT, mc_k_int(kb, MC_KT_I32, 1), mc_k_int(kb, MC_KT_I32, 2));
	mc_kb_store(kb, y, mc_k_index(kb, 0), lt);
	expect_ok(&f);
	lt->type = MC_KT_I32;
	expect_bad(&f, "binary operation 15 on i32 gives i32");
	end(&f);
}

Test(kcheck, select_condition_must_be_bool)
{
	fixture f;
	begin(&f);
	mc_kb *kb = &f.kb;
	int y = mc_kb_buf(kb, 0, MC_FLOAT, 1, true);
	mc_kexpr *sel = mc_k_select(kb, mc_k_int(kb, MC_KT_BOOL, 1), mc_k_float(kb, MC_KT_F32, 1),
	                            mc_k_float(kb, MC_KT_F32, 2));
	mc_kb_store(kb, y, mc_k_index(kb, 0), sel);
	expect_ok(&f);
	sel->a = mc_k_int(kb, MC_KT_I32, 1);
	expect_bad(&f, "select on a i32 condition");
	end(&f);
}

Test(kcheck, vector_lanes_must_agree)
{
	fixture f;
	begin(&f);
	mc_kb *kb = &f.kb;
	int x = mc_kb_buf(kb, 0, MC_FLOAT, 16, false), y = mc_kb_buf(kb, 1, MC_FLOAT, 16, true);
	mc_kexpr *v = mc_k_add(kb, mc_k_vload(kb, x, mc_k_index(kb, 0), 8), mc_k_vload(kb, x, mc_k_index(kb, 8), 8));
	mc_kb_store(kb, y, mc_k_index(kb, 0), v);
	expect_ok(&f);
	v->b = mc_k_vload(kb, x, mc_k_index(kb, 0), 4);
	expect_bad(&f, "vector operand 1 of a 8-lane operation: f32 x 4");
	end(&f);
}

Test(kcheck, break_outside_loop_fails)
{
	fixture f;
	begin(&f);
	mc_kb_break(&f.kb);
	expect_bad(&f, "break outside a loop");
	end(&f);
}

Test(kcheck, break_inside_loop_passes)
{
	fixture f;
	begin(&f);
	mc_kexpr *i = mc_kb_fori(&f.kb, 4, 0);
	mc_kb_if(&f.kb, mc_k_bin(&f.kb, MC_KB_EQ, i, mc_k_index(&f.kb, 2)));
	mc_kb_break(&f.kb);
	mc_kb_end_n(&f.kb, 2);
	expect_ok(&f);
	end(&f);
}

Test(kcheck, parallel_reduction_fails)
{
	fixture f;
	begin(&f);
	mc_kb_fori(&f.kb, 4, MC_KF_PARALLEL | MC_KF_REDUCE);
	mc_kb_end(&f.kb);
	expect_bad(&f, "marked both parallel and a reduction");
	end(&f);
}

Test(kcheck, store_into_read_only_buffer_fails)
{
	fixture f;
	begin(&f);
	int x = mc_kb_buf(&f.kb, 0, MC_FLOAT, 4, false);
	mc_kb_store(&f.kb, x, mc_k_index(&f.kb, 0), mc_k_float(&f.kb, MC_KT_F32, 1));
	expect_bad(&f, "not marked written");
	end(&f);
}

Test(kcheck, local_read_before_declaration_fails)
{
	fixture f;
	begin(&f);
	mc_kb *kb = &f.kb;
	int y = mc_kb_buf(kb, 0, MC_FLOAT, 1, true);
	mc_kb_fori(kb, 4, 0);
	mc_kexpr *v = mc_kb_local(kb, mc_k_float(kb, MC_KT_F32, 0));
	mc_kb_end(kb);
	mc_kb_store(kb, y, mc_k_index(kb, 0), v); /* out of its loop's scope */
	expect_bad(&f, "is read where it is not declared");
	end(&f);
}

Test(kcheck, assignment_to_immutable_fails)
{
	fixture f;
	begin(&f);
	mc_kb *kb = &f.kb;
	int x = mc_kb_buf(kb, 0, MC_FLOAT, 1, false);
	mc_kexpr *v = mc_kb_let(kb, mc_k_load(kb, x, mc_k_index(kb, 0)));
	mc_kb_assign(kb, v, mc_k_float(kb, MC_KT_F32, 1));
	expect_bad(&f, "assigned but not mutable");
	end(&f);
}

Test(kcheck, program_check_reports_internal_error)
{
	fixture f;
	begin(&f);
	mc_kb_break(&f.kb);
	mc_kernel *ks[1] = { &f.k };
	mc_program p = { .n_kernels = 1, .kernels = ks };
	cr_expect_eq(mc_program_check(&p), -1);
	cr_expect(strstr(last_error, "internal error") && strstr(last_error, "k0_test"), "%s", last_error);
	end(&f);
}

/* ---- memory plans ---- */
#define REQ(bytes_, first_, last_) ((mc_mem_req){(bytes_), (first_), (last_), -1, false})

static int plan_check(const mc_mem_req *r, int n, size_t *offsets, size_t arena, size_t lb, char *why)
{
	mc_mem_plan p = { .arena_bytes = arena, .lower_bound = lb, .offsets = offsets };
	return mc_plan_check(r, n, 64, &p, why, 256);
}

Test(kcheck, plan_valid_passes)
{
	char why[256];
	mc_mem_req r[] = { REQ(100, 0, 1), REQ(64, 1, 2), REQ(128, 2, 3) };
	size_t off[] = { 0, 128, 0 };
	cr_expect_eq(plan_check(r, 3, off, 192, 192, why), 0, "%s", why);
}

Test(kcheck, plan_overlap_of_live_buffers_fails)
{
	char why[256];
	mc_mem_req r[] = { REQ(100, 0, 1), REQ(64, 1, 2) };
	size_t off[] = { 0, 64 };
	cr_expect_eq(plan_check(r, 2, off, 192, 192, why), -1);
	cr_expect(strstr(why, "buffers 0 [0, 100) and 1 [64, 128), both live at step 1, overlap"), "%s", why);
}

Test(kcheck, plan_inplace_sharing_passes)
{
	char why[256];
	mc_mem_req r[] = { REQ(128, 0, 1), { 128, 1, 2, 0, false } };
	size_t off[] = { 0, 0 };
	cr_expect_eq(plan_check(r, 2, off, 128, 128, why), 0, "%s", why);
	r[1].bytes = 192; /* larger than its source: not in place */
	cr_expect_eq(plan_check(r, 2, off, 192, 128, why), -1);
}

Test(kcheck, plan_misaligned_offset_fails)
{
	char why[256];
	mc_mem_req r[] = { REQ(100, 0, 1), REQ(64, 1, 2) };
	size_t off[] = { 0, 136 };
	cr_expect_eq(plan_check(r, 2, off, 256, 192, why), -1);
	cr_expect(strstr(why, "buffer 1 at offset 136 is not aligned to 64"), "%s", why);
}

Test(kcheck, plan_buffer_past_arena_end_fails)
{
	char why[256];
	mc_mem_req r[] = { REQ(100, 0, 1), REQ(64, 1, 2) };
	size_t off[] = { 0, 128 };
	cr_expect_eq(plan_check(r, 2, off, 160, 160, why), -1);
	cr_expect(strstr(why, "buffer 1 at [128, +64) ends past the arena's 160 bytes"), "%s", why);
}

Test(kcheck, plan_lower_bound_above_arena_fails)
{
	char why[256];
	mc_mem_req r[] = { REQ(64, 0, 1) };
	size_t off[] = { 0 };
	cr_expect_eq(plan_check(r, 1, off, 64, 128, why), -1);
	cr_expect(strstr(why, "lower bound 128 above the arena's 64 bytes"), "%s", why);
}
