/* tensorio.c: raw and .npy tensor files, atomic writes, output names. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model_builder.h"
#include "modelc.h"

static char *dir;

static void setup(void)
{
	dir = make_temp_dir();
	diag_capture();
}

static void teardown(void)
{
	rm_tree(dir);
	free(dir);
}

TestSuite(tensorio, .init = setup, .fini = teardown);

static const char *path_in(const char *name)
{
	static char buf[4096];
	snprintf(buf, sizeof buf, "%s/%s", dir, name);
	return buf;
}

/* A .npy v1 file: magic, version, little-endian header length, header
 * padded with spaces to a multiple of 64 and ended by a newline, data. */
static void write_npy(const char *name, const char *header_dict, const void *data, size_t len,
                      int version)
{
	char header[512];
	size_t pre = version == 1 ? 10 : 12;
	size_t hl = strlen(header_dict);
	size_t total = (pre + hl + 1 + 63) / 64 * 64;
	memcpy(header, header_dict, hl);
	memset(header + hl, ' ', total - pre - hl - 1);
	header[total - pre - 1] = '\n';
	size_t hlen = total - pre;
	unsigned char *buf = malloc(total + len);
	memcpy(buf, "\x93NUMPY", 6);
	buf[6] = (unsigned char)version;
	buf[7] = 0;
	buf[8] = (unsigned char)(hlen & 0xff);
	buf[9] = (unsigned char)(hlen >> 8);
	if (version != 1) {
		buf[10] = (unsigned char)(hlen >> 16);
		buf[11] = (unsigned char)(hlen >> 24);
	}
	memcpy(buf + pre, header, hlen);
	memcpy(buf + total, data, len);
	cr_assert_eq(write_file(path_in(name), buf, total + len), 0);
	free(buf);
}

static const mc_shape shape23 = {.rank = 2, .dims = {2, 3}};

Test(tensorio, raw_read)
{
	const float v[6] = {1, 2, 3, 4, 5, -6.5f};
	cr_assert_eq(write_file(path_in("x.bin"), v, sizeof v), 0);
	mc_tensor *t = mc_tensor_read_file(path_in("x.bin"), MC_FLOAT, &shape23);
	cr_assert_not_null(t, "%s", diag_all());
	cr_assert_eq(t->dtype, MC_FLOAT);
	cr_assert(mc_shape_eq(&t->shape, &shape23));
	cr_assert_eq(memcmp(t->data, v, sizeof v), 0);
	mc_tensor_free(t);
	cr_assert_eq(diag_count(), 0);
}

Test(tensorio, raw_read_size_mismatch)
{
	const float v[5] = {1, 2, 3, 4, 5};
	cr_assert_eq(write_file(path_in("x.bin"), v, sizeof v), 0);
	cr_assert_null(mc_tensor_read_file(path_in("x.bin"), MC_FLOAT, &shape23));
	cr_assert_eq(diag_count(), 1, "%s", diag_all());
	char want[4200];
	snprintf(want, sizeof want,
	         "modelc: error: '%s' holds 20 bytes of data; float32 2x3 needs 24",
	         path_in("x.bin"));
	cr_assert_str_eq(diag_line(0), want);
}

Test(tensorio, raw_read_too_long_and_missing)
{
	const int64_t v[7] = {0};
	cr_assert_eq(write_file(path_in("x.bin"), v, sizeof v), 0);
	mc_shape s = {.rank = 1, .dims = {6}};
	cr_assert_null(mc_tensor_read_file(path_in("x.bin"), MC_INT64, &s));
	cr_assert_eq(diag_count_with("holds 56 bytes of data; int64 6 needs 48"), 1, "%s",
	             diag_all());
	cr_assert_null(mc_tensor_read_file(path_in("absent.bin"), MC_INT64, &s));
	cr_assert_eq(diag_count_with("cannot open"), 1, "%s", diag_all());
	cr_assert_eq(diag_count_with("No such file"), 1, "%s", diag_all());
}

Test(tensorio, npy_v1_read)
{
	const float v[6] = {0.5f, 1, 2, 3, 4, 5};
	write_npy("x.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", v,
	          sizeof v, 1);
	mc_tensor *t = mc_tensor_read_file(path_in("x.npy"), MC_FLOAT, &shape23);
	cr_assert_not_null(t, "%s", diag_all());
	cr_assert_eq(memcmp(t->data, v, sizeof v), 0);
	mc_tensor_free(t);
}

Test(tensorio, npy_v2_and_scalar_and_1d)
{
	const int64_t v[3] = {7, -8, 9};
	write_npy("v.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", v,
	          sizeof v, 2);
	mc_shape s1 = {.rank = 1, .dims = {3}};
	mc_tensor *t = mc_tensor_read_file(path_in("v.npy"), MC_INT64, &s1);
	cr_assert_not_null(t, "%s", diag_all());
	cr_assert_eq(((int64_t *)t->data)[1], -8);
	mc_tensor_free(t);

	const uint8_t b = 1;
	write_npy("s.npy", "{'descr': '|b1', 'fortran_order': False, 'shape': (), }", &b, 1, 1);
	mc_shape scalar = {0};
	t = mc_tensor_read_file(path_in("s.npy"), MC_BOOL, &scalar);
	cr_assert_not_null(t, "%s", diag_all());
	cr_assert_eq(mc_get_i(t, 0), 1);
	mc_tensor_free(t);
}

Test(tensorio, npy_dtype_mismatch)
{
	const double v[6] = {0};
	write_npy("x.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", v,
	          sizeof v, 1);
	cr_assert_null(mc_tensor_read_file(path_in("x.npy"), MC_FLOAT, &shape23));
	char want[4200];
	snprintf(want, sizeof want, "modelc: error: '%s': .npy dtype is '<f8', not float32 (<f4)",
	         path_in("x.npy"));
	cr_assert_eq(diag_count(), 1, "%s", diag_all());
	cr_assert_str_eq(diag_line(0), want);
}

Test(tensorio, npy_big_endian_refused)
{
	const float v[6] = {0};
	write_npy("x.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", v,
	          sizeof v, 1);
	cr_assert_null(mc_tensor_read_file(path_in("x.npy"), MC_FLOAT, &shape23));
	cr_assert_eq(diag_count_with(".npy dtype is '>f4', not float32"), 1, "%s", diag_all());
}

Test(tensorio, npy_shape_mismatch)
{
	const float v[6] = {0};
	write_npy("x.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", v,
	          sizeof v, 1);
	cr_assert_null(mc_tensor_read_file(path_in("x.npy"), MC_FLOAT, &shape23));
	char want[4200];
	snprintf(want, sizeof want,
	         "modelc: error: '%s': .npy shape 3x2 does not match the expected 2x3",
	         path_in("x.npy"));
	cr_assert_eq(diag_count(), 1, "%s", diag_all());
	cr_assert_str_eq(diag_line(0), want);
}

Test(tensorio, npy_fortran_order_refused)
{
	const float v[6] = {0};
	write_npy("x.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", v,
	          sizeof v, 1);
	cr_assert_null(mc_tensor_read_file(path_in("x.npy"), MC_FLOAT, &shape23));
	char want[4200];
	snprintf(want, sizeof want, "modelc: error: '%s': only C-ordered .npy files are supported",
	         path_in("x.npy"));
	cr_assert_eq(diag_count(), 1, "%s", diag_all());
	cr_assert_str_eq(diag_line(0), want);
}

Test(tensorio, npy_data_size_mismatch)
{
	const float v[5] = {0};
	write_npy("x.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", v,
	          sizeof v, 1);
	cr_assert_null(mc_tensor_read_file(path_in("x.npy"), MC_FLOAT, &shape23));
	cr_assert_eq(diag_count_with("holds 20 bytes of data; float32 2x3 needs 24"), 1, "%s",
	             diag_all());
}

/* A counted tensor ([2, K], K at most 3 on axis 1): the count from the
 * raw file's size or the .npy header; past the bound, or bytes that are
 * no whole count, refused. */
Test(tensorio, counted_read)
{
	const int32_t v[4] = {1, 2, 3, 4};
	cr_assert_eq(write_file(path_in("c.bin"), v, sizeof v), 0);
	mc_shape bound = {.rank = 2, .dims = {2, 3}};
	mc_tensor *t = mc_tensor_read_counted(path_in("c.bin"), MC_INT32, &bound, 1);
	cr_assert_not_null(t, "%s", diag_all());
	cr_expect(t->shape.rank == 2 && t->shape.dims[0] == 2 && t->shape.dims[1] == 2);
	cr_expect_eq(mc_get_i(t, 3), 4);
	mc_tensor_free(t);
	write_npy("c.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2), }", v, sizeof v, 1);
	t = mc_tensor_read_counted(path_in("c.npy"), MC_INT32, &bound, 1);
	cr_assert_not_null(t, "%s", diag_all());
	cr_expect_eq(t->shape.dims[1], 2);
	mc_tensor_free(t);
	cr_expect_null(mc_tensor_read_counted(path_in("c.bin"), MC_INT32, &bound, 0));
	cr_expect_eq(diag_count_with("holds 16 bytes of data: no count of int32 2x3 entries on axis 0"), 1, "%s",
	             diag_all());
	write_npy("d.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 4), }", v, 0, 1);
	cr_expect_null(mc_tensor_read_counted(path_in("d.npy"), MC_INT32, &bound, 1));
	cr_expect_eq(diag_count_with(".npy shape 2x4 does not match the expected 2x3 (axis 1 at most)"), 1, "%s",
	             diag_all());
}

Test(tensorio, npy_malformed_headers)
{
	/* not .npy at all */
	cr_assert_eq(write_file(path_in("a.npy"), "hello world, no magic", 21), 0);
	mc_tensor *t = mc_tensor_read_file(path_in("a.npy"), MC_FLOAT, &shape23);
	cr_assert_null(t);
	cr_assert_eq(diag_count_with("is not a .npy file"), 1, "%s", diag_all());
	/* header length past the end of the file */
	unsigned char trunc[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0xff, 0x7f, '{', '}'};
	cr_assert_eq(write_file(path_in("b.npy"), trunc, sizeof trunc), 0);
	cr_assert_null(mc_tensor_read_file(path_in("b.npy"), MC_FLOAT, &shape23));
	cr_assert_eq(diag_count_with("truncated .npy header"), 1, "%s", diag_all());
	/* v2 header too short to hold its 4-byte length */
	unsigned char short2[11] = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0, 0, 0};
	cr_assert_eq(write_file(path_in("c.npy"), short2, sizeof short2), 0);
	cr_assert_null(mc_tensor_read_file(path_in("c.npy"), MC_FLOAT, &shape23));
	cr_assert_eq(diag_count_with("truncated .npy header"), 2, "%s", diag_all());
	/* no shape key */
	write_npy("d.npy", "{'descr': '<f4', 'fortran_order': False, }", "", 0, 1);
	cr_assert_null(mc_tensor_read_file(path_in("d.npy"), MC_FLOAT, &shape23));
	cr_assert_eq(diag_count_with("unsupported .npy header"), 1, "%s", diag_all());
	/* shape with junk */
	write_npy("e.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", "", 0, 1);
	cr_assert_null(mc_tensor_read_file(path_in("e.npy"), MC_FLOAT, &shape23));
	cr_assert_eq(diag_count_with("malformed .npy shape"), 1, "%s", diag_all());
	/* unterminated shape tuple */
	write_npy("f.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3", "", 0, 1);
	cr_assert_null(mc_tensor_read_file(path_in("f.npy"), MC_FLOAT, &shape23));
	cr_assert_eq(diag_count_with("malformed .npy shape"), 2, "%s", diag_all());
	cr_assert_eq(diag_count(), 6, "one line per refused file:\n%s", diag_all());
}

static int count_entries(const char *d)
{
	DIR *dd = opendir(d);
	cr_assert_not_null(dd);
	int n = 0;
	for (struct dirent *e; (e = readdir(dd));)
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(dd);
	return n;
}

Test(tensorio, write_raw_is_atomic_and_leaves_no_tmp)
{
	mc_shape s = {.rank = 1, .dims = {4}};
	mc_tensor *t = mc_tensor_new(MC_INT32, &s);
	for (size_t i = 0; i < 4; i++)
		mc_set_i(t, i, (int64_t)i * 10 - 5);
	cr_assert_eq(write_file(path_in("out.bin"), "old contents, longer than new", 29), 0);
	cr_assert_eq(mc_tensor_write_raw(path_in("out.bin"), t), 0, "%s", diag_all());
	cr_assert_eq(count_entries(dir), 1, "only out.bin must remain");
	mc_tensor *back = mc_tensor_read_file(path_in("out.bin"), MC_INT32, &s);
	cr_assert_not_null(back, "%s", diag_all());
	cr_assert_eq(memcmp(back->data, t->data, t->nbytes), 0);
	mc_tensor_free(back);
	mc_tensor_free(t);
}

Test(tensorio, write_raw_failure_leaves_nothing)
{
	mc_shape s = {.rank = 1, .dims = {2}};
	mc_tensor *t = mc_tensor_new(MC_FLOAT, &s);
	/* the target is a directory: rename fails after the temporary is written */
	char target[4200];
	snprintf(target, sizeof target, "%s/adir", dir);
	cr_assert_eq(mkdir(target, 0777), 0);
	cr_assert_eq(write_file(path_in("adir/keep"), "x", 1), 0);
	cr_assert_eq(mc_tensor_write_raw(target, t), -1);
	cr_assert_eq(diag_count(), 1, "%s", diag_all());
	cr_assert_eq(count_entries(dir), 1, "the temporary must be removed");
	/* a directory that does not exist */
	cr_assert_eq(mc_tensor_write_raw(path_in("nodir/out.bin"), t), -1);
	cr_assert_eq(diag_count_with("cannot create"), 1, "%s", diag_all());
	mc_tensor_free(t);
}

Test(tensorio, output_file_name_sanitising)
{
	char buf[256];
	mc_output_file_name("Identity:0", buf, sizeof buf);
	cr_assert_str_eq(buf, "Identity_0.bin");
	mc_output_file_name("../../etc/passwd", buf, sizeof buf);
	cr_assert_str_eq(buf, ".._.._etc_passwd.bin");
	mc_output_file_name("a b/c\\d", buf, sizeof buf);
	cr_assert_str_eq(buf, "a_b_c_d.bin");
	mc_output_file_name("keep-Me_1.2", buf, sizeof buf);
	cr_assert_str_eq(buf, "keep-Me_1.2.bin");
	mc_output_file_name("caf\xc3\xa9", buf, sizeof buf);
	cr_assert_str_eq(buf, "caf__.bin", "every byte of a UTF-8 sequence becomes '_'");
	/* a long name is cut so that ".bin" still fits */
	char small[10];
	mc_output_file_name("abcdefghijkl", small, sizeof small);
	cr_assert_str_eq(small, "abcde.bin");
}
