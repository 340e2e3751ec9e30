/* Test support: ONNX models built with the protobuf-c generated API, and
 * diagnostics captured through mc_set_diag_sink. */
#define _XOPEN_SOURCE 700
#include "model_builder.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct mb {
	void **allocs; /* everything this builder allocated */
	size_t n_allocs, cap_allocs;
	Onnx__ModelProto *model;
};

/* ---- pool ---- */
static void *pool_keep(mb *b, void *p)
{
	if (!p) {
		fputs("model_builder: out of memory\n", stderr);
		abort();
	}
	if (b->n_allocs == b->cap_allocs) {
		b->cap_allocs = b->cap_allocs ? 2 * b->cap_allocs : 64;
		b->allocs = realloc(b->allocs, b->cap_allocs * sizeof *b->allocs);
		if (!b->allocs)
			abort();
	}
	b->allocs[b->n_allocs++] = p;
	return p;
}

static void *pool_zalloc(mb *b, size_t n)
{
	return pool_keep(b, calloc(1, n ? n : 1));
}

static char *pool_strdup(mb *b, const char *s)
{
	return pool_keep(b, strdup(s));
}

static void *pool_memdup(mb *b, const void *p, size_t n)
{
	void *q = pool_zalloc(b, n);
	if (n)
		memcpy(q, p, n);
	return q;
}

/* Appends one element to a repeated field: a fresh array each time (the
 * old one stays in the pool; tests build small models). */
static void *pool_append(mb *b, void *arr, size_t *count, size_t elem, const void *item)
{
	char *fresh = pool_zalloc(b, (*count + 1) * elem);
	if (*count)
		memcpy(fresh, arr, *count * elem);
	memcpy(fresh + *count * elem, item, elem);
	++*count;
	return fresh;
}

#define APPEND(b, arr, count, item)                                                            \
	do {                                                                                   \
		__typeof__(*(arr)) item_ = (item);                                             \
		(arr) = pool_append((b), (arr), &(count), sizeof item_, &item_);              \
	} while (0)

/* ---- models and graphs ---- */
mb *mb_new(int64_t opset)
{
	mb *b = calloc(1, sizeof *b);
	if (!b)
		abort();
	Onnx__ModelProto *m = pool_zalloc(b, sizeof *m);
	*m = (Onnx__ModelProto)ONNX__MODEL_PROTO__INIT;
	m->has_ir_version = 1;
	m->ir_version = 8;
	m->producer_name = pool_strdup(b, "modelc-tests");
	m->graph = mb_graph(b, "main");
	b->model = m;
	mb_opset_import(b, "", opset);
	return b;
}

void mb_free(mb *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n_allocs; i++)
		free(b->allocs[i]);
	free(b->allocs);
	free(b);
}

Onnx__ModelProto *mb_model(mb *b) { return b->model; }
Onnx__GraphProto *mb_main(mb *b) { return b->model->graph; }

Onnx__GraphProto *mb_graph(mb *b, const char *name)
{
	Onnx__GraphProto *g = pool_zalloc(b, sizeof *g);
	*g = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
	g->name = pool_strdup(b, name);
	return g;
}

void mb_opset_import(mb *b, const char *domain, int64_t version)
{
	Onnx__OperatorSetIdProto *o = pool_zalloc(b, sizeof *o);
	*o = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
	o->domain = pool_strdup(b, domain);
	o->has_version = 1;
	o->version = version;
	APPEND(b, b->model->opset_import, b->model->n_opset_import, o);
}

/* ---- shapes ---- */
typedef struct {
	int rank;
	char *tok[MC_MAX_RANK + 8]; /* hostile tests go past MC_MAX_RANK */
} dim_list;

/* Splits "2,N,?" into tokens; "" is rank 0. */
static dim_list split_dims(mb *b, const char *spec)
{
	dim_list d = {0};
	if (!*spec)
		return d;
	char *copy = pool_strdup(b, spec);
	for (char *save = NULL, *t = strtok_r(copy, ",", &save); t;
	     t = strtok_r(NULL, ",", &save)) {
		if (d.rank == (int)(sizeof d.tok / sizeof *d.tok)) {
			fprintf(stderr, "model_builder: too many dims in '%s'\n", spec);
			abort();
		}
		d.tok[d.rank++] = t;
	}
	return d;
}

static bool parse_i64(const char *s, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end)
		return false;
	*out = v;
	return true;
}

Onnx__ValueInfoProto *mb_input(mb *b, Onnx__GraphProto *g, const char *name, int dtype,
                               const char *shape)
{
	Onnx__ValueInfoProto *vi = pool_zalloc(b, sizeof *vi);
	Onnx__TypeProto *tp = pool_zalloc(b, sizeof *tp);
	Onnx__TypeProto__Tensor *tt = pool_zalloc(b, sizeof *tt);
	*vi = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
	*tp = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
	*tt = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
	vi->name = pool_strdup(b, name);
	vi->type = tp;
	tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
	tp->tensor_type = tt;
	tt->has_elem_type = 1;
	tt->elem_type = dtype;
	if (shape) {
		Onnx__TensorShapeProto *sp = pool_zalloc(b, sizeof *sp);
		*sp = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
		dim_list d = split_dims(b, shape);
		for (int i = 0; i < d.rank; i++) {
			Onnx__TensorShapeProto__Dimension *dim = pool_zalloc(b, sizeof *dim);
			*dim = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
			int64_t v;
			if (parse_i64(d.tok[i], &v)) {
				dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
				dim->dim_value = v;
			} else if (strcmp(d.tok[i], "?") != 0) {
				dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
				dim->dim_param = pool_strdup(b, d.tok[i]);
			}
			APPEND(b, sp->dim, sp->n_dim, dim);
		}
		tt->shape = sp;
	}
	APPEND(b, g->input, g->n_input, vi);
	return vi;
}

void mb_output(mb *b, Onnx__GraphProto *g, const char *name)
{
	/* Outputs are declared without a type: the importer infers them. */
	Onnx__ValueInfoProto *vi = pool_zalloc(b, sizeof *vi);
	*vi = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
	vi->name = pool_strdup(b, name);
	APPEND(b, g->output, g->n_output, vi);
}

/* ---- tensors ---- */
Onnx__TensorProto *mb_tensor(mb *b, const char *name, int dtype, const char *dims)
{
	Onnx__TensorProto *t = pool_zalloc(b, sizeof *t);
	*t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
	t->name = pool_strdup(b, name);
	t->has_data_type = 1;
	t->data_type = dtype;
	dim_list d = split_dims(b, dims);
	for (int i = 0; i < d.rank; i++) {
		int64_t v;
		if (!parse_i64(d.tok[i], &v)) {
			fprintf(stderr, "model_builder: tensor dim '%s' is not a number\n", d.tok[i]);
			abort();
		}
		APPEND(b, t->dims, t->n_dims, v);
	}
	return t;
}

void mb_raw(mb *b, Onnx__TensorProto *t, const void *data, size_t len)
{
	t->has_raw_data = 1;
	t->raw_data.len = len;
	t->raw_data.data = pool_memdup(b, data, len);
}

void mb_float_data(mb *b, Onnx__TensorProto *t, const float *v, size_t n)
{
	t->n_float_data = n;
	t->float_data = pool_memdup(b, v, n * sizeof *v);
}

void mb_int64_data(mb *b, Onnx__TensorProto *t, const int64_t *v, size_t n)
{
	t->n_int64_data = n;
	t->int64_data = pool_memdup(b, v, n * sizeof *v);
}

void mb_int32_data(mb *b, Onnx__TensorProto *t, const int32_t *v, size_t n)
{
	t->n_int32_data = n;
	t->int32_data = pool_memdup(b, v, n * sizeof *v);
}

void mb_external(mb *b, Onnx__TensorProto *t, const char *key, const char *value)
{
	Onnx__StringStringEntryProto *e = pool_zalloc(b, sizeof *e);
	*e = (Onnx__StringStringEntryProto)ONNX__STRING_STRING_ENTRY_PROTO__INIT;
	e->key = pool_strdup(b, key);
	e->value = pool_strdup(b, value);
	APPEND(b, t->external_data, t->n_external_data, e);
	t->has_data_location = 1;
	t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
}

void mb_initializer(mb *b, Onnx__GraphProto *g, Onnx__TensorProto *t)
{
	APPEND(b, g->initializer, g->n_initializer, t);
}

Onnx__TensorProto *mb_init_ints(mb *b, Onnx__GraphProto *g, const char *name, int dtype,
                                const char *dims, const int64_t *v, size_t n)
{
	Onnx__TensorProto *t = mb_tensor(b, name, dtype, dims);
	if (dtype == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) {
		mb_int64_data(b, t, v, n);
	} else { /* the narrower ints travel in int32_data */
		int32_t *w = malloc((n ? n : 1) * sizeof *w);
		if (!w)
			abort();
		for (size_t i = 0; i < n; i++)
			w[i] = (int32_t)v[i];
		mb_int32_data(b, t, w, n);
		free(w);
	}
	mb_initializer(b, g, t);
	return t;
}

Onnx__TensorProto *mb_init_floats(mb *b, Onnx__GraphProto *g, const char *name,
                                  const char *dims, const float *v, size_t n)
{
	Onnx__TensorProto *t = mb_tensor(b, name, MC_FLOAT, dims);
	mb_raw(b, t, v, n * sizeof *v);
	mb_initializer(b, g, t);
	return t;
}

/* ---- nodes ---- */
static void add_names(mb *b, const char *list, char ***arr, size_t *count)
{
	if (!list)
		return;
	/* strtok would drop empty entries, which mean omitted optionals */
	const char *p = list;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		char *name = pool_zalloc(b, len + 1);
		memcpy(name, p, len);
		APPEND(b, *arr, *count, name);
		if (!comma)
			break;
		p = comma + 1;
	}
}

Onnx__NodeProto *mb_node(mb *b, Onnx__GraphProto *g, const char *op_type, const char *name,
                         const char *inputs, const char *outputs)
{
	Onnx__NodeProto *n = pool_zalloc(b, sizeof *n);
	*n = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
	n->op_type = pool_strdup(b, op_type);
	n->name = name ? pool_strdup(b, name) : NULL;
	if (inputs && *inputs)
		add_names(b, inputs, &n->input, &n->n_input);
	if (outputs && *outputs)
		add_names(b, outputs, &n->output, &n->n_output);
	APPEND(b, g->node, g->n_node, n);
	return n;
}

void mb_node_domain(mb *b, Onnx__NodeProto *n, const char *domain)
{
	n->domain = pool_strdup(b, domain);
}

static Onnx__AttributeProto *new_attr(mb *b, Onnx__NodeProto *n, const char *name,
                                      Onnx__AttributeProto__AttributeType type)
{
	Onnx__AttributeProto *a = pool_zalloc(b, sizeof *a);
	*a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
	a->name = pool_strdup(b, name);
	a->has_type = 1;
	a->type = type;
	APPEND(b, n->attribute, n->n_attribute, a);
	return a;
}

void mb_attr_graph(mb *b, Onnx__NodeProto *n, const char *name, Onnx__GraphProto *g)
{
	new_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = g;
}

void mb_attr_tensor(mb *b, Onnx__NodeProto *n, const char *name, Onnx__TensorProto *t)
{
	new_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t = t;
}

void mb_attr_int(mb *b, Onnx__NodeProto *n, const char *name, int64_t v)
{
	Onnx__AttributeProto *a = new_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
	a->has_i = 1;
	a->i = v;
}

void mb_attr_string(mb *b, Onnx__NodeProto *n, const char *name, const char *v)
{
	Onnx__AttributeProto *a = new_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
	a->has_s = 1;
	a->s.data = (uint8_t *)pool_strdup(b, v);
	a->s.len = strlen(v);
}

void mb_attr_float(mb *b, Onnx__NodeProto *n, const char *name, float v)
{
	Onnx__AttributeProto *a = new_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
	a->has_f = 1;
	a->f = v;
}

void mb_attr_ints(mb *b, Onnx__NodeProto *n, const char *name, const int64_t *v, size_t count)
{
	Onnx__AttributeProto *a = new_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
	a->n_ints = count;
	a->ints = pool_memdup(b, v, count * sizeof *v);
}

void mb_const_bool(mb *b, Onnx__GraphProto *g, const char *output, bool v)
{
	Onnx__TensorProto *t = mb_tensor(b, output, MC_BOOL, "");
	uint8_t byte = v;
	mb_raw(b, t, &byte, 1);
	Onnx__NodeProto *n = mb_node(b, g, "Constant", output, NULL, output);
	mb_attr_tensor(b, n, "value", t);
}

Onnx__NodeProto *mb_if_consts(mb *b, Onnx__GraphProto *g, const char *name, const char *cond,
                              const char *output, const char *dims, const float *then_v,
                              const float *else_v, size_t n)
{
	char tname[256], ename[256];
	snprintf(tname, sizeof tname, "%s_then", output);
	snprintf(ename, sizeof ename, "%s_else", output);
	Onnx__GraphProto *tg = mb_graph(b, "then"), *eg = mb_graph(b, "else");
	mb_init_floats(b, tg, tname, dims, then_v, n);
	mb_output(b, tg, tname);
	mb_init_floats(b, eg, ename, dims, else_v, n);
	mb_output(b, eg, ename);
	Onnx__NodeProto *node = mb_node(b, g, "If", name, cond, output);
	mb_attr_graph(b, node, "then_branch", tg);
	mb_attr_graph(b, node, "else_branch", eg);
	return node;
}

/* ---- serialising ---- */
uint8_t *mb_pack(mb *b, size_t *len)
{
	*len = onnx__model_proto__get_packed_size(b->model);
	uint8_t *buf = malloc(*len ? *len : 1);
	if (!buf)
		abort();
	size_t wrote = onnx__model_proto__pack(b->model, buf);
	if (wrote != *len)
		abort();
	return buf;
}

int write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	bool ok = fwrite(data, 1, len, f) == len;
	ok &= fclose(f) == 0;
	return ok ? 0 : -1;
}

char *read_file_in(const char *dir, const char *file, size_t *len)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return NULL;
	fseek(fp, 0, SEEK_END);
	long n = ftell(fp);
	fseek(fp, 0, SEEK_SET);
	char *d = n >= 0 ? malloc((size_t)n + 1) : NULL;
	if (!d || fread(d, 1, (size_t)n, fp) != (size_t)n) {
		free(d);
		fclose(fp);
		return NULL;
	}
	d[n] = 0;
	fclose(fp);
	if (len)
		*len = (size_t)n;
	return d;
}

int mb_write(mb *b, const char *path)
{
	size_t len;
	uint8_t *buf = mb_pack(b, &len);
	int rc = write_file(path, buf, len);
	free(buf);
	return rc;
}

mc_graph *mb_import(mb *b, const char *model_dir, const mc_import_opts *opts)
{
	size_t len;
	uint8_t *buf = mb_pack(b, &len);
	mc_graph *g = mc_import_buffer(buf, len, model_dir, opts);
	free(buf);
	return g;
}

char *make_temp_dir(void)
{
	const char *base = getenv("TMPDIR");
	char tmpl[4096];
	snprintf(tmpl, sizeof tmpl, "%s/modelc-test-XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(tmpl)) {
		perror("mkdtemp");
		abort();
	}
	return strdup(tmpl);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void rm_tree(const char *dir)
{
	/* FTW_PHYS: remove symbolic links themselves, never what they name */
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- diagnostics ---- */
#define DIAG_MAX 64
static char diag_lines[DIAG_MAX][1024];
static int diag_n;
static char diag_joined[DIAG_MAX * 1025 + 1];

static void diag_sink(const char *line, void *user)
{
	(void)user;
	if (diag_n < DIAG_MAX)
		snprintf(diag_lines[diag_n++], sizeof diag_lines[0], "%s", line);
}

void diag_capture(void)
{
	diag_n = 0;
	mc_set_diag_sink(diag_sink, NULL);
}

int diag_count(void) { return diag_n; }

const char *diag_line(int i) { return i >= 0 && i < diag_n ? diag_lines[i] : ""; }

int diag_count_with(const char *needle)
{
	int c = 0;
	for (int i = 0; i < diag_n; i++)
		c += strstr(diag_lines[i], needle) != NULL;
	return c;
}

const char *diag_all(void)
{
	size_t off = 0;
	diag_joined[0] = 0;
	for (int i = 0; i < diag_n; i++)
		off += (size_t)snprintf(diag_joined + off, sizeof diag_joined - off, "%s\n",
		                        diag_lines[i]);
	if (!diag_n)
		snprintf(diag_joined, sizeof diag_joined, "(no diagnostics)");
	return diag_joined;
}
