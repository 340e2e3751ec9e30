/* Tensor files: raw little-endian and .npy, written atomically. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "modelc.h"

static unsigned char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		mc_error("cannot open '%s': %s", path, strerror(errno));
		return NULL;
	}
	size_t cap = 1 << 16, n = 0;
	unsigned char *buf = mc_xmalloc(cap);
	for (;;) {
		size_t r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (n < cap)
			break;
		unsigned char *grown = NULL;
		if (!mc_mul_size(cap, 2, &cap) || !(grown = realloc(buf, cap))) {
			mc_error("'%s' is too large to read", path);
			fclose(f);
			free(buf);
			return NULL;
		}
		buf = grown;
	}
	if (ferror(f)) {
		mc_error("reading '%s' failed", path);
		fclose(f);
		free(buf);
		return NULL;
	}
	fclose(f);
	*len = n;
	return buf;
}

static const char *npy_descr(mc_dtype t)
{
	switch (t) {
	case MC_FLOAT: return "<f4";
	case MC_DOUBLE: return "<f8";
	case MC_FLOAT16: return "<f2";
	case MC_INT8: return "|i1";
	case MC_UINT8: return "|u1";
	case MC_INT16: return "<i2";
	case MC_UINT16: return "<u2";
	case MC_INT32: return "<i4";
	case MC_UINT32: return "<u4";
	case MC_INT64: return "<i8";
	case MC_UINT64: return "<u8";
	case MC_BOOL: return "|b1";
	default: return NULL;
	}
}

/* Minimal .npy v1-3 header reader: 'descr', 'fortran_order', 'shape'.
 * The shape must be *shape, but on axis (-1: none) any extent up to
 * shape's; *shape gets the file's. */
static int parse_npy(const char *path, const unsigned char *buf, size_t len, mc_dtype want,
                     mc_shape *shape, int axis, size_t *data_off)
{
	if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0) {
		mc_error("'%s' is not a .npy file", path);
		return -1;
	}
	size_t hlen, hoff;
	if (buf[6] < 1 || buf[6] > 3) {
		mc_error("'%s': unsupported .npy version %d", path, buf[6]);
		return -1;
	}
	if (buf[6] == 1) {
		hlen = buf[8] | (size_t)buf[9] << 8;
		hoff = 10;
	} else {
		if (len < 12) {
			mc_error("'%s': truncated .npy header", path);
			return -1;
		}
		hlen = buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
		hoff = 12;
	}
	if (hlen > len - hoff) {
		mc_error("'%s': truncated .npy header", path);
		return -1;
	}
	char *h = mc_xmalloc(hlen + 1);
	memcpy(h, buf + hoff, hlen);
	h[hlen] = 0;
	int rc = -1;
	const char *want_descr = npy_descr(want);
	char *d = strstr(h, "'descr'"), *fo = strstr(h, "'fortran_order'"), *sh = strstr(h, "'shape'");
	if (!d || !fo || !sh || !want_descr) {
		mc_error("'%s': unsupported .npy header", path);
		goto out;
	}
	d = strchr(d + 7, '\'');
	if (!d || strncmp(d + 1, want_descr, 3) != 0 || d[4] != '\'') {
		int n = d ? (int)strcspn(d + 1, "'") : 0;
		mc_error("'%s': .npy dtype is '%.*s', not %s (%s)", path, n < 16 ? n : 16, d ? d + 1 : "",
		         mc_dtype_name(want), want_descr);
		goto out;
	}
	fo = strchr(fo + 15, ':');
	while (fo && (*++fo == ' '))
		;
	if (!fo || strncmp(fo, "False", 5) != 0) {
		mc_error("'%s': only C-ordered .npy files are supported", path);
		goto out;
	}
	char *p = strchr(sh, '(');
	mc_shape got = {0};
	if (!p) {
		mc_error("'%s': malformed .npy shape", path);
		goto out;
	}
	p++;
	while (*p && *p != ')') {
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == ')')
			break;
		char *end;
		errno = 0;
		long long v = strtoll(p, &end, 10);
		if (errno || end == p || v < 0 || got.rank == MC_MAX_RANK) {
			mc_error("'%s': malformed .npy shape", path);
			goto out;
		}
		got.dims[got.rank++] = v;
		p = end;
	}
	bool fits = got.rank == shape->rank;
	for (int i = 0; fits && i < got.rank; i++)
		fits = i == axis ? got.dims[i] <= shape->dims[i] : got.dims[i] == shape->dims[i];
	if (!fits) {
		char a[256], b[256];
		if (axis >= 0)
			mc_error("'%s': .npy shape %s does not match the expected %s (axis %d at most)", path,
			         mc_shape_str(&got, a, sizeof a), mc_shape_str(shape, b, sizeof b), axis);
		else
			mc_error("'%s': .npy shape %s does not match the expected %s", path,
			         mc_shape_str(&got, a, sizeof a), mc_shape_str(shape, b, sizeof b));
		goto out;
	}
	*shape = got;
	*data_off = hoff + hlen;
	rc = 0;
out:
	free(h);
	return rc;
}

/* A raw file of a counted shape: the extent on axis that its size
 * gives, from 0 to s's (the entries a counted output's run filled). */
static int raw_count(const char *path, size_t len, mc_dtype t, mc_shape *s, int axis)
{
	size_t per = mc_dtype_size(t); /* bytes of one entry on axis */
	for (int d = 0; d < s->rank; d++)
		if (d != axis)
			per *= (size_t)s->dims[d];
	size_t n = per ? len / per : 0;
	if ((per && len % per) || (!per && len) || n > (size_t)s->dims[axis]) {
		char b[256];
		mc_error("'%s' holds %zu bytes of data: no count of %s %s entries on axis %d (at most %lld)",
		         path, len, mc_dtype_name(t), mc_shape_str(s, b, sizeof b), axis,
		         (long long)s->dims[axis]);
		return -1;
	}
	s->dims[axis] = (int64_t)n;
	return 0;
}

mc_tensor *mc_tensor_read_counted(const char *path, mc_dtype t, const mc_shape *s, int axis)
{
	size_t len, off = 0;
	unsigned char *buf = slurp(path, &len);
	if (!buf)
		return NULL;
	mc_tensor *x = NULL;
	mc_shape shape = *s;
	size_t pl = strlen(path);
	bool npy = pl > 4 && strcmp(path + pl - 4, ".npy") == 0;
	if (npy ? parse_npy(path, buf, len, t, &shape, axis, &off) : axis >= 0 && raw_count(path, len, t, &shape, axis))
		goto out;
	if (!(x = mc_tensor_new(t, &shape))) {
		mc_error("'%s': cannot allocate the tensor", path);
	} else if (len - off != x->nbytes) {
		char b[256];
		mc_error("'%s' holds %zu bytes of data; %s %s needs %zu", path, len - off,
		         mc_dtype_name(t), mc_shape_str(&shape, b, sizeof b), x->nbytes);
		mc_tensor_free(x);
		x = NULL;
	} else {
		memcpy(x->data, buf + off, x->nbytes);
	}
out:
	free(buf);
	return x;
}

mc_tensor *mc_tensor_read_file(const char *path, mc_dtype t, const mc_shape *s)
{
	return mc_tensor_read_counted(path, t, s, -1);
}

int mc_read_inputs(const mc_graph *g, int n, const char *const *names, const char *const *files,
                   mc_tensor **in)
{
	for (int k = 0; k < n; k++) {
		int v = mc_graph_find(g, names[k]), slot = -1;
		for (int i = 0; i < g->n_inputs; i++)
			if (g->inputs[i] == v)
				slot = i;
		if (slot < 0) {
			mc_error("--input names '%s', which is not a graph input", names[k]);
			return -1;
		}
		if (in[slot]) {
			mc_error("--input '%s' is given twice", names[k]);
			return -1;
		}
		if (!(in[slot] = mc_tensor_read_file(files[k], g->values[v].dtype, &g->values[v].shape)))
			return -1;
	}
	/* every missing one in one message: the user adds them all at once */
	char missing[2048] = "";
	size_t len = 0;
	int n_missing = 0;
	for (int i = 0; i < g->n_inputs; i++)
		if (!in[i] && len < sizeof missing) {
			char b[256];
			const mc_value *v = &g->values[g->inputs[i]];
			len += (size_t)snprintf(missing + len, sizeof missing - len, "%s'%s' (%s %s)",
			                        n_missing++ ? ", " : "", v->name, mc_dtype_name(v->dtype),
			                        mc_shape_str(&v->shape, b, sizeof b));
		}
	if (n_missing) {
		mc_error("no --input for graph input%s %s", n_missing > 1 ? "s" : "", missing);
		return -1;
	}
	return 0;
}

int mc_tensor_write_raw(const char *path, const mc_tensor *t)
{
	char tmp[4096];
	if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp) {
		mc_error("path '%s' is too long", path);
		return -1;
	}
	FILE *f = fopen(tmp, "wb");
	if (!f) {
		mc_error("cannot create '%s': %s", tmp, strerror(errno));
		return -1;
	}
	bool ok = fwrite(t->data, 1, t->nbytes, f) == t->nbytes;
	ok &= fflush(f) == 0;
	int err = errno;
	ok &= fclose(f) == 0;
	if (!ok || rename(tmp, path) != 0) {
		mc_error("cannot write '%s': %s", path, strerror(ok ? errno : err));
		unlink(tmp);
		return -1;
	}
	return 0;
}

void mc_output_file_name(const char *value_name, char *buf, size_t n)
{
	size_t i = 0;
	for (const char *p = value_name; *p && i + 5 < n; p++) {
		char ch = *p;
		bool keep = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		            (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-';
		buf[i++] = keep ? ch : '_';
	}
	snprintf(buf + i, n - i, ".bin");
}

bool mc_parse_shape(const char *text, mc_shape *out)
{
	mc_shape s = {0};
	if (strcmp(text, "scalar") == 0) {
		*out = s;
		return true;
	}
	const char *p = text;
	for (;;) {
		char *end;
		if (*p < '0' || *p > '9' || s.rank == MC_MAX_RANK)
			return false;
		errno = 0;
		long long v = strtoll(p, &end, 10);
		if (errno || v < 0)
			return false;
		s.dims[s.rank++] = v;
		if (*end == 0)
			break;
		if (*end != 'x' && *end != ',')
			return false;
		p = end + 1;
	}
	size_t numel;
	if (!mc_shape_numel(&s, &numel))
		return false;
	*out = s;
	return true;
}

/* mkdir -p: every missing directory of the path. */
int mc_mkdir_p(const char *dir, const char *what)
{
	char path[4096];
	if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
		mc_error("cannot create %s '%s': path too long", what, dir);
		return -1;
	}
	for (char *s = path + 1; ; s++) {
		if (*s != '/' && *s != 0)
			continue;
		char keep = *s;
		*s = 0;
		struct stat st;
		if (mkdir(path, 0777) && errno != EEXIST) {
			mc_error("cannot create %s '%s': %s", what, dir, strerror(errno));
			return -1;
		}
		if (stat(path, &st) || !S_ISDIR(st.st_mode)) {
			mc_error("cannot create %s '%s': '%s' is not a directory", what, dir, path);
			return -1;
		}
		*s = keep;
		if (!keep)
			break;
	}
	return 0;
}
