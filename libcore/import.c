/* ONNX import: protobuf-c messages -> graph IR.
 * Every size read from the file is checked before use; every problem is
 * one line naming the tensor, value or node it concerns. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "modelc.h"
#include "onnx/onnx.pb-c.h"

/* ---- name index: open addressing over value indices ---- */
typedef struct {
	int *slots; /* value index + 1; 0 = empty */
	size_t cap;
} name_index;

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211ull;
	return h;
}

static void index_put(name_index *ix, const mc_graph *g, int v);

static void index_grow(name_index *ix, const mc_graph *g)
{
	int *old = ix->slots;
	size_t oldcap = ix->cap;
	ix->cap = oldcap ? oldcap * 2 : 256;
	ix->slots = mc_xcalloc(ix->cap, sizeof *ix->slots);
	for (size_t i = 0; i < oldcap; i++)
		if (old[i])
			index_put(ix, g, old[i] - 1);
	free(old);
}

static void index_put(name_index *ix, const mc_graph *g, int v)
{
	if ((size_t)g->n_values * 2 >= ix->cap)
		index_grow(ix, g);
	size_t m = ix->cap - 1, i = hash_str(g->values[v].name) & m;
	while (ix->slots[i])
		i = (i + 1) & m;
	ix->slots[i] = v + 1;
}

static int index_get(const name_index *ix, const mc_graph *g, const char *name)
{
	if (!ix->cap)
		return -1;
	size_t m = ix->cap - 1, i = hash_str(name) & m;
	while (ix->slots[i]) {
		int v = ix->slots[i] - 1;
		if (strcmp(g->values[v].name, name) == 0)
			return v;
		i = (i + 1) & m;
	}
	return -1;
}

/* Counts over the whole model, subgraphs included. */
typedef struct {
	int unsupported; /* nodes whose op is not supported */
	long nodes;
} import_totals;

/* Import state for one graph scope. */
typedef struct scope {
	mc_graph *g;
	name_index ix;
	struct scope *parent;
	const mc_import_opts *opts;
	int opset;
	const char *model_dir; /* NULL: external data not allowed */
	import_totals *totals; /* shared by every scope of the model */
} scope;

static int add_named(scope *s, const char *name, mc_value_kind kind)
{
	int v = mc_graph_add_value(s->g, name, kind);
	index_put(&s->ix, s->g, v);
	return v;
}

/* The hidden last output of an op whose output 0's extent may depend on
 * the data (MC_OP_COUNTED): "<output 0>/count", made unique, at index
 * max_outputs. */
static void add_count_output(scope *s, mc_node *n, int node)
{
	const char *base = s->g->values[n->outputs[0]].name;
	char name[512];
	snprintf(name, sizeof name, "%s/count", base);
	for (int k = 1; index_get(&s->ix, s->g, name) >= 0; k++)
		snprintf(name, sizeof name, "%s/count_%d", base, k);
	int v = add_named(s, name, MC_VAL_NODE);
	s->g->values[v].producer = node;
	/* at the place past the op's own outputs, the omitted ones before it
	 * (a TopK without indices) left omitted */
	int at = n->op->max_outputs;
	n->outputs = realloc(n->outputs, (size_t)(at + 1) * sizeof *n->outputs);
	if (!n->outputs) {
		mc_error("out of memory");
		exit(3);
	}
	for (int k = n->n_outputs; k < at; k++)
		n->outputs[k] = -1;
	n->outputs[at] = v;
	n->n_outputs = at + 1;
}

/* Every --dim must name a symbolic dimension of an input (a misspelt one
 * would leave the dimension unpinned, or pin nothing): else an error
 * listing the ones the model has. */
static int check_dim_pins(const mc_graph *g, const mc_import_opts *opts)
{
	for (int k = 0; opts && k < opts->n_dim_pins; k++) {
		const char *want = opts->dim_pins[k].param;
		bool found = false;
		char names[512] = "";
		size_t len = 0;
		for (int i = 0; i < g->n_inputs && !found; i++) {
			const mc_value *v = &g->values[g->inputs[i]];
			for (int d = 0; d < v->shape.rank && !found; d++) {
				const char *p = v->dim_param[d];
				if (!p)
					continue;
				found = strcmp(p, want) == 0;
				/* each name once, in the order the inputs give them */
				char quoted[140];
				snprintf(quoted, sizeof quoted, "'%s'", p);
				if (!strstr(names, quoted) && len + strlen(quoted) + 3 < sizeof names)
					len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", len ? ", " : "", quoted);
			}
		}
		if (!found) {
			mc_error("--dim %s: no input has a dimension named '%s' (%s%s)", want, want,
			         len ? "the model's symbolic dimensions: " : "the model has no symbolic dimension",
			         names);
			return -1;
		}
	}
	return 0;
}

/* ---- tensors ---- */
static int check_dtype(const char *what, const char *name, int32_t dt)
{
	if (!mc_dtype_supported((mc_dtype)dt)) {
		mc_error("%s '%s': data type %d (%s) is not supported", what, name, dt,
		         mc_dtype_name((mc_dtype)dt));
		return -1;
	}
	return 0;
}

static bool path_has_dotdot(const char *p)
{
	const char *c = p;
	while (*c) {
		const char *e = strchr(c, '/');
		size_t len = e ? (size_t)(e - c) : strlen(c);
		if (len == 2 && c[0] == '.' && c[1] == '.')
			return true;
		if (!e)
			break;
		c = e + 1;
	}
	return false;
}

static mc_tensor *read_external(const Onnx__TensorProto *tp, const char *name,
                                const char *model_dir, mc_dtype dt, const mc_shape *shape,
                                size_t nbytes)
{
	mc_tensor *t = NULL;
	const char *location = NULL;
	int64_t offset = 0, length = -1;
	for (size_t i = 0; i < tp->n_external_data; i++) {
		const Onnx__StringStringEntryProto *e = tp->external_data[i];
		const char *k = e->key ? e->key : "", *v = e->value ? e->value : "";
		char *end;
		if (strcmp(k, "location") == 0) {
			location = v;
		} else if (strcmp(k, "offset") == 0 || strcmp(k, "length") == 0) {
			errno = 0;
			long long x = strtoll(v, &end, 10);
			if (errno || *end || end == v || x < 0) {
				mc_error("tensor '%s': external data %s '%s' is not a non-negative integer",
				         name, k, v);
				return NULL;
			}
			*(k[0] == 'o' ? &offset : &length) = x;
		}
	}
	if (!location || !*location) {
		mc_error("tensor '%s': external data has no location", name);
		return NULL;
	}
	if (!model_dir) {
		mc_error("tensor '%s': external data is not allowed here", name);
		return NULL;
	}
	if (location[0] == '/' || path_has_dotdot(location) || strchr(location, '\\')) {
		mc_error("tensor '%s': external data location '%s' leaves the model's directory",
		         name, location);
		return NULL;
	}
	char path[PATH_MAX], real[PATH_MAX], realdir[PATH_MAX];
	if ((size_t)snprintf(path, sizeof path, "%s/%s", model_dir, location) >= sizeof path) {
		mc_error("tensor '%s': external data path is too long", name);
		return NULL;
	}
	if (!realpath(path, real)) {
		mc_error("tensor '%s': cannot open external data '%s': %s", name, path,
		         strerror(errno));
		return NULL;
	}
	if (!realpath(model_dir, realdir)) {
		mc_error("cannot resolve model directory '%s': %s", model_dir, strerror(errno));
		return NULL;
	}
	size_t dl = strlen(realdir);
	if (strcmp(real, realdir) == 0) {
		mc_error("tensor '%s': external data location '%s' is not a file", name, location);
		return NULL;
	}
	if (strncmp(real, realdir, dl) != 0 || (real[dl] != '/' && dl != 1)) {
		mc_error("tensor '%s': external data location '%s' leaves the model's directory "
		         "(through a symbolic link)", name, location);
		return NULL;
	}
	if (length >= 0 && (uint64_t)length != nbytes) {
		mc_error("tensor '%s': external data length %lld does not match its shape "
		         "(%zu bytes)", name, (long long)length, nbytes);
		return NULL;
	}
	int fd = open(real, O_RDONLY | O_NONBLOCK); /* a FIFO must not block */
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		mc_error("tensor '%s': cannot read external data '%s': %s", name, path,
		         fd < 0 ? strerror(errno) : "not a regular file");
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	uint64_t end_off;
	if (__builtin_add_overflow((uint64_t)offset, (uint64_t)nbytes, &end_off) ||
	    end_off > (uint64_t)st.st_size) {
		mc_error("tensor '%s': external data offset %lld + %zu bytes is past the end of "
		         "'%s' (%lld bytes)", name, (long long)offset, nbytes, location,
		         (long long)st.st_size);
		close(fd);
		return NULL;
	}
	t = mc_tensor_new(dt, shape);
	if (!t) {
		mc_error("tensor '%s': cannot allocate %zu bytes", name, nbytes);
		close(fd);
		return NULL;
	}
	size_t done = 0;
	while (done < nbytes) {
		ssize_t r = pread(fd, (char *)t->data + done, nbytes - done,
		                  (off_t)(offset + (int64_t)done));
		if (r <= 0) {
			mc_error("tensor '%s': reading external data '%s' failed: %s", name, location,
			         r < 0 ? strerror(errno) : "unexpected end of file");
			close(fd);
			mc_tensor_free(t);
			return NULL;
		}
		done += (size_t)r;
	}
	close(fd);
	return t;
}

/* The typed field that holds a tensor's values, and its count. */
static size_t typed_count(const Onnx__TensorProto *tp, mc_dtype dt, const char **field)
{
	switch (dt) {
	case MC_FLOAT: *field = "float_data"; return tp->n_float_data;
	case MC_INT64: *field = "int64_data"; return tp->n_int64_data;
	case MC_DOUBLE: *field = "double_data"; return tp->n_double_data;
	case MC_UINT32: case MC_UINT64: *field = "uint64_data"; return tp->n_uint64_data;
	default: *field = "int32_data"; return tp->n_int32_data;
	}
}

static int count_mismatch(const char *name, const char *field, size_t have, size_t want)
{
	mc_error("tensor '%s': %s holds %zu values but its shape needs %zu", name, field, have,
	         want);
	return -1;
}

/* Sub-byte types (4-bit, 2-bit) are packed in files, two or four elements
 * per byte, lowest bits first; in memory each element takes a byte. */
static bool is_packed(mc_dtype dt)
{
	return mc_dtype_packed_bits(dt) < 8;
}

static size_t packed_size(mc_dtype dt, size_t numel)
{
	size_t per_byte = 8 / (size_t)mc_dtype_packed_bits(dt);
	return numel / per_byte + (numel % per_byte != 0);
}

/* Unpacks t->numel elements: int4/int2 sign-extended, the others (uint4,
 * uint2, float4e2m1 codes) zero-extended. Padding bits are ignored. */
static void unpack_elements(mc_tensor *t, const uint8_t *packed)
{
	int bits = mc_dtype_packed_bits(t->dtype), per_byte = 8 / bits;
	unsigned mask = (1u << bits) - 1, sign = 1u << (bits - 1);
	bool sign_extend = t->dtype == MC_INT4 || t->dtype == MC_INT2;
	uint8_t *out = t->data;
	for (size_t i = 0; i < t->numel; i++) {
		unsigned code = (packed[i / per_byte] >> (i % per_byte * bits)) & mask;
		out[i] = sign_extend ? (uint8_t)((int)(code ^ sign) - (int)sign) : (uint8_t)code;
	}
}

/* External data of a packed type: read the packed bytes, then unpack. */
static mc_tensor *read_external_packed(const Onnx__TensorProto *tp, const char *name,
                                       const char *model_dir, mc_dtype dt,
                                       const mc_shape *shape, size_t file_bytes)
{
	mc_shape bytes = {.rank = 1, .dims = {(int64_t)file_bytes}};
	mc_tensor *buf = read_external(tp, name, model_dir, MC_UINT8, &bytes, file_bytes);
	if (!buf)
		return NULL;
	mc_tensor *t = mc_tensor_new(dt, shape);
	if (t)
		unpack_elements(t, buf->data);
	else
		mc_error("tensor '%s': cannot allocate its %zu elements", name, buf->numel);
	mc_tensor_free(buf);
	return t;
}

/* Converts a TensorProto; `name` is used in messages. */
static mc_tensor *load_tensor(const Onnx__TensorProto *tp, const char *name,
                              const char *model_dir)
{
	mc_shape s = {.rank = (int)tp->n_dims};
	if (tp->n_dims > MC_MAX_RANK) {
		mc_error("tensor '%s': rank %zu exceeds the supported maximum %d", name, tp->n_dims,
		         MC_MAX_RANK);
		return NULL;
	}
	for (size_t i = 0; i < tp->n_dims; i++) {
		if (tp->dims[i] < 0) {
			mc_error("tensor '%s': dimension %zu is negative (%lld)", name, i,
			         (long long)tp->dims[i]);
			return NULL;
		}
		s.dims[i] = tp->dims[i];
	}
	if (!tp->has_data_type || check_dtype("tensor", name, tp->data_type))
		return tp->has_data_type ? NULL : (mc_error("tensor '%s' has no data type", name), NULL);
	mc_dtype dt = (mc_dtype)tp->data_type;
	size_t numel, nbytes;
	if (!mc_shape_numel(&s, &numel) || !mc_mul_size(numel, mc_dtype_size(dt), &nbytes)) {
		char buf[256];
		mc_error("tensor '%s': shape %s is too large", name, mc_shape_str(&s, buf, sizeof buf));
		return NULL;
	}
	if (tp->segment) {
		mc_error("tensor '%s': segmented tensors are not supported", name);
		return NULL;
	}
	bool external = (tp->has_data_location &&
	                 tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) ||
	                tp->n_external_data;
	/* Packed types hold fewer bytes in the file (and int32_data entries,
	 * one packed byte each) than in memory. */
	bool packed = is_packed(dt);
	size_t file_bytes = packed ? packed_size(dt, numel) : nbytes;
	/* Sizes first: a few bytes of model must not make us allocate the
	 * declared size before its data is known to be there. */
	if (!external && tp->has_raw_data && tp->raw_data.len != file_bytes) {
		mc_error("tensor '%s': raw_data has %zu bytes but its shape needs %zu", name,
		         tp->raw_data.len, file_bytes);
		return NULL;
	}
	if (!external && !tp->has_raw_data && numel) {
		const char *field;
		size_t have = typed_count(tp, dt, &field);
		if (packed && have != file_bytes) {
			mc_error("tensor '%s': %s holds %zu packed bytes but its shape needs %zu", name,
			         field, have, file_bytes);
			return NULL;
		}
		if (!packed && have != numel) {
			count_mismatch(name, field, have, numel);
			return NULL;
		}
	}
	mc_tensor *t = external ? NULL : mc_tensor_new(dt, &s);
	if (!external && !t) {
		mc_error("tensor '%s': cannot allocate %zu bytes", name, nbytes);
		return NULL;
	}
	int rc = 0;
	if (external) {
		t = packed ? read_external_packed(tp, name, model_dir, dt, &s, file_bytes)
		           : read_external(tp, name, model_dir, dt, &s, nbytes);
		rc = t ? 0 : -1;
	} else if (tp->has_raw_data) {
		if (packed)
			unpack_elements(t, tp->raw_data.data);
		else if (nbytes)
			memcpy(t->data, tp->raw_data.data, nbytes);
	} else if (numel == 0) {
		/* no data field at all: fine for empty tensors */
	} else {
		/* typed-field counts were checked above */
		switch (dt) {
		case MC_FLOAT:
			memcpy(t->data, tp->float_data, nbytes);
			break;
		case MC_INT64:
			memcpy(t->data, tp->int64_data, nbytes);
			break;
		case MC_DOUBLE:
			memcpy(t->data, tp->double_data, nbytes);
			break;
		case MC_UINT32: case MC_UINT64:
			for (size_t i = 0; i < numel; i++)
				mc_set_i(t, i, (int64_t)tp->uint64_data[i]);
			break;
		case MC_FLOAT16: case MC_BFLOAT16:
			/* int32_data holds the 16-bit patterns */
			for (size_t i = 0; i < numel; i++)
				((uint16_t *)t->data)[i] = (uint16_t)tp->int32_data[i];
			break;
		case MC_FLOAT8E4M3FN: case MC_FLOAT8E4M3FNUZ: case MC_FLOAT8E5M2:
		case MC_FLOAT8E5M2FNUZ: case MC_FLOAT8E8M0:
			/* int32_data holds the 8-bit patterns */
			for (size_t i = 0; i < numel; i++)
				((uint8_t *)t->data)[i] = (uint8_t)tp->int32_data[i];
			break;
		case MC_UINT4: case MC_INT4: case MC_FLOAT4E2M1: case MC_UINT2: case MC_INT2: {
			/* each int32_data entry holds one packed byte */
			uint8_t *bytes = malloc(file_bytes);
			if (!bytes) {
				mc_error("tensor '%s': cannot allocate %zu bytes", name, file_bytes);
				rc = -1;
				break;
			}
			for (size_t i = 0; i < file_bytes; i++)
				bytes[i] = (uint8_t)tp->int32_data[i];
			unpack_elements(t, bytes);
			free(bytes);
			break;
		}
		default:
			for (size_t i = 0; i < numel; i++)
				mc_set_i(t, i, tp->int32_data[i]);
			break;
		}
	}
	if (rc) {
		mc_tensor_free(t);
		return NULL;
	}
	return t;
}

/* ---- value types ---- */
static int load_value_type(scope *s, const Onnx__ValueInfoProto *vi, mc_value *v)
{
	const Onnx__TypeProto *tp = vi->type;
	/* A Loop/Scan body may leave its inputs untyped: the node types them. */
	if (!tp && s->parent)
		return 0;
	if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) {
		mc_error("input '%s': non-tensor inputs (sequence, optional, map) are not supported", v->name);
		return -1;
	}
	const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
	if (!tt->has_elem_type || check_dtype("input", v->name, tt->elem_type))
		return tt->has_elem_type ? -1 : (mc_error("input '%s' has no element type", v->name), -1);
	v->dtype = (mc_dtype)tt->elem_type;
	const mc_input_pin *pin = NULL;
	for (int i = 0; s->opts && i < s->opts->n_pins; i++)
		if (strcmp(s->opts->pins[i].name, v->name) == 0)
			pin = &s->opts->pins[i];
	if (!tt->shape) {
		if (!pin) {
			mc_error("input '%s': its rank is unknown; give its shape with "
			         "--input-shape '%s=...'", v->name, v->name);
			return -1;
		}
		v->shape = pin->shape;
		v->typed = true;
		return 0;
	}
	if (tt->shape->n_dim > MC_MAX_RANK) {
		mc_error("input '%s': rank %zu exceeds the supported maximum %d", v->name,
		         tt->shape->n_dim, MC_MAX_RANK);
		return -1;
	}
	v->shape.rank = (int)tt->shape->n_dim;
	if (pin && pin->shape.rank != v->shape.rank) {
		mc_error("input '%s': --input-shape gives rank %d but the model declares rank %d%s%s%s",
		         v->name, pin->shape.rank, v->shape.rank,
		         v->shape.rank ? "" : " (a scalar: --input-shape '", v->shape.rank ? "" : v->name,
		         v->shape.rank ? "" : "=scalar')");
		return -1;
	}
	bool known = true;
	for (int d = 0; d < v->shape.rank; d++) {
		const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
		bool has = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
		int64_t declared = has ? dim->dim_value : -1;
		if (!has && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM) {
			v->dim_param[d] = mc_xstrdup(dim->dim_param);
			for (int k = 0; k < s->opts->n_dim_pins; k++)
				if (strcmp(s->opts->dim_pins[k].param, dim->dim_param) == 0) {
					declared = s->opts->dim_pins[k].value;
					has = true;
				}
		}
		/* after the --dim pins: they are API input too */
		if (has && declared < 0) {
			mc_error("input '%s': dimension %d is negative (%lld)", v->name, d,
			         (long long)declared);
			return -1;
		}
		if (pin) {
			if (has && pin->shape.dims[d] != declared) {
				mc_error("input '%s': --input-shape gives %lld for dimension %d, the model "
				         "declares %lld", v->name, (long long)pin->shape.dims[d], d,
				         (long long)declared);
				return -1;
			}
			v->shape.dims[d] = pin->shape.dims[d];
		} else {
			v->shape.dims[d] = declared;
			known &= has;
		}
	}
	size_t numel;
	if (known && !mc_shape_numel(&v->shape, &numel)) {
		char buf[256];
		mc_error("input '%s': shape %s is too large", v->name,
		         mc_shape_str(&v->shape, buf, sizeof buf));
		return -1;
	}
	v->typed = known;
	return 0;
}

/* ---- graphs ---- */
static mc_graph *load_graph(const Onnx__GraphProto *gp, scope *parent, int depth,
                            const mc_import_opts *opts, int opset, const char *model_dir,
                            import_totals *totals);

/* Finds a name in this scope, else captures it from an enclosing one. */
static int resolve(scope *s, const char *name)
{
	int v = index_get(&s->ix, s->g, name);
	if (v >= 0 || !s->parent)
		return v;
	int outer = resolve(s->parent, name);
	if (outer < 0)
		return -1;
	v = add_named(s, name, MC_VAL_CAPTURED);
	s->g->values[v].outer = outer;
	return v;
}

static int load_attr(scope *s, const mc_node *n, const Onnx__AttributeProto *ap, mc_attr *a)
{
	char where[512];
	mc_node_where(n, where, sizeof where);
	a->name = mc_xstrdup(ap->name);
	if (ap->ref_attr_name && *ap->ref_attr_name) {
		mc_error("%s: attribute '%s' refers to a function attribute, which is not supported",
		         where, a->name);
		return -1;
	}
	a->type = (mc_attr_type)ap->type;
	switch (ap->type) {
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: a->f = ap->f; break;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: a->i = ap->i; break;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
		a->s = mc_xmalloc(ap->s.len + 1);
		if (ap->s.len)
			memcpy(a->s, ap->s.data, ap->s.len);
		a->s[ap->s.len] = 0;
		break;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
		if (!ap->t) {
			mc_error("%s: attribute '%s' holds no tensor", where, a->name);
			return -1;
		}
		a->t = load_tensor(ap->t, a->name, s->model_dir);
		if (!a->t)
			return -1;
		break;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
		if (!ap->g) {
			mc_error("%s: attribute '%s' holds no graph", where, a->name);
			return -1;
		}
		a->g = load_graph(ap->g, s, s->g->depth + 1, s->opts, s->opset, s->model_dir,
		                  s->totals);
		if (!a->g)
			return -1;
		break;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
		a->n = ap->n_floats;
		a->floats = mc_xcalloc(a->n, sizeof *a->floats);
		if (a->n)
			memcpy(a->floats, ap->floats, a->n * sizeof *a->floats);
		break;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
		a->n = ap->n_ints;
		a->ints = mc_xcalloc(a->n, sizeof *a->ints);
		if (a->n)
			memcpy(a->ints, ap->ints, a->n * sizeof *a->ints);
		break;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
		a->n = ap->n_strings;
		a->strings = mc_xcalloc(a->n, sizeof *a->strings);
		for (size_t i = 0; i < a->n; i++) {
			a->strings[i] = mc_xmalloc(ap->strings[i].len + 1);
			if (ap->strings[i].len)
				memcpy(a->strings[i], ap->strings[i].data, ap->strings[i].len);
			a->strings[i][ap->strings[i].len] = 0;
		}
		break;
	default:
		/* Unsupported kinds are kept, typed, so that an op that does not read
		 * them still works; an op that does gets a type error. */
		a->type = MC_ATTR_UNDEFINED;
		break;
	}
	return 0;
}

/* Constant nodes become constant values at import. */
static int load_constant(scope *s, const Onnx__NodeProto *np, const mc_node *n, int out)
{
	char where[512];
	mc_node_where(n, where, sizeof where);
	if (np->n_attribute != 1) {
		mc_error("%s: needs exactly one value attribute, has %zu", where, np->n_attribute);
		return -1;
	}
	const Onnx__AttributeProto *ap = np->attribute[0];
	const char *an = ap->name ? ap->name : "";
	mc_tensor *t = NULL;
	mc_shape s1 = {.rank = 1}, s0 = {.rank = 0};
	if (strcmp(an, "value") == 0 && ap->t) {
		t = load_tensor(ap->t, s->g->values[out].name, s->model_dir);
		if (!t)
			return -1;
	} else if (strcmp(an, "value_float") == 0) {
		if ((t = mc_tensor_new(MC_FLOAT, &s0)))
			((float *)t->data)[0] = ap->f;
	} else if (strcmp(an, "value_int") == 0) {
		if ((t = mc_tensor_new(MC_INT64, &s0)))
			((int64_t *)t->data)[0] = ap->i;
	} else if (strcmp(an, "value_floats") == 0) {
		s1.dims[0] = (int64_t)ap->n_floats;
		if ((t = mc_tensor_new(MC_FLOAT, &s1)) && ap->n_floats)
			memcpy(t->data, ap->floats, t->nbytes);
	} else if (strcmp(an, "value_ints") == 0) {
		s1.dims[0] = (int64_t)ap->n_ints;
		if ((t = mc_tensor_new(MC_INT64, &s1)) && ap->n_ints)
			memcpy(t->data, ap->ints, t->nbytes);
	} else {
		mc_error("%s: value attribute '%s' is not supported", where, an);
		return -1;
	}
	if (!t) {
		mc_error("%s: cannot allocate its value", where);
		return -1;
	}
	mc_value *v = &s->g->values[out];
	v->kind = MC_VAL_CONST;
	v->konst = t;
	v->dtype = t->dtype;
	v->shape = t->shape;
	v->typed = true;
	return 0;
}

static void report_unsupported(const mc_node *n, bool known_name)
{
	char where[512];
	mc_node_where(n, where, sizeof where);
	if (n->domain[0])
		mc_error("%s: operator domain '%s' is not supported (only the default ONNX domain "
		         "is)", where, n->domain);
	else if (known_name)
		mc_error("%s: unsupported op version (no implementation covers opset %d)", where,
		         n->opset);
	else
		mc_error("%s: unsupported op", where);
}

static bool is_default_domain(const char *d)
{
	return !d || !*d || strcmp(d, "ai.onnx") == 0;
}

/* Kahn's algorithm; stable (file order among ready nodes). */
static int topo_sort(mc_graph *g)
{
	int n = g->n_nodes;
	int *indeg = mc_xcalloc((size_t)n, sizeof *indeg);
	int *order = mc_xmalloc((size_t)n * sizeof *order);
	/* consumers in CSR form */
	int *cnt = mc_xcalloc((size_t)n + 1, sizeof *cnt);
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < n; i++) {
			mc_node *nd = &g->nodes[i];
			for (int k = 0; k < nd->n_inputs + nd->n_implicit; k++) {
				int v = k < nd->n_inputs ? nd->inputs[k] : nd->implicit[k - nd->n_inputs];
				if (v < 0 || g->values[v].producer < 0)
					continue;
				if (pass == 0)
					cnt[g->values[v].producer + 1]++;
				indeg[i] += pass == 0;
			}
		}
	for (int i = 0; i < n; i++)
		cnt[i + 1] += cnt[i];
	int *fill = mc_xmalloc(((size_t)n + 1) * sizeof *fill);
	memcpy(fill, cnt, ((size_t)n + 1) * sizeof *fill);
	int *cons = mc_xmalloc(((size_t)cnt[n] + 1) * sizeof *cons);
	for (int i = 0; i < n; i++) {
		mc_node *nd = &g->nodes[i];
		for (int k = 0; k < nd->n_inputs + nd->n_implicit; k++) {
			int v = k < nd->n_inputs ? nd->inputs[k] : nd->implicit[k - nd->n_inputs];
			if (v >= 0 && g->values[v].producer >= 0)
				cons[fill[g->values[v].producer]++] = i;
		}
	}
	/* A min-heap would give file order exactly; a FIFO is close and enough. */
	int head = 0, tail = 0;
	for (int i = 0; i < n; i++)
		if (!indeg[i])
			order[tail++] = i;
	while (head < tail) {
		int i = order[head++];
		for (int c = cnt[i]; c < cnt[i + 1]; c++)
			if (--indeg[cons[c]] == 0)
				order[tail++] = cons[c];
	}
	int rc = 0;
	if (tail != n) {
		for (int i = 0; i < n; i++)
			if (indeg[i]) {
				char where[512];
				mc_error("%s: the graph has a cycle through this node",
				         mc_node_where(&g->nodes[i], where, sizeof where));
				break;
			}
		rc = -1;
	} else {
		mc_node *sorted = mc_xmalloc((size_t)n * sizeof *sorted);
		int *newidx = mc_xmalloc((size_t)n * sizeof *newidx);
		for (int i = 0; i < n; i++) {
			sorted[i] = g->nodes[order[i]];
			newidx[order[i]] = i;
		}
		for (int v = 0; v < g->n_values; v++)
			if (g->values[v].producer >= 0)
				g->values[v].producer = newidx[g->values[v].producer];
		free(g->nodes);
		g->nodes = sorted;
		g->cap_nodes = n;
		free(newidx);
	}
	free(indeg);
	free(order);
	free(cnt);
	free(fill);
	free(cons);
	return rc;
}

/* Collects the parent-scope values read by a subgraph (transitively). */
static void add_implicit(mc_node *n, const mc_graph *sub)
{
	for (int v = 0; v < sub->n_values; v++) {
		if (sub->values[v].kind != MC_VAL_CAPTURED)
			continue;
		int o = sub->values[v].outer;
		bool seen = false;
		for (int k = 0; k < n->n_implicit; k++)
			seen |= n->implicit[k] == o;
		if (!seen) {
			n->implicit = realloc(n->implicit, (size_t)(n->n_implicit + 1) * sizeof(int));
			if (!n->implicit) {
				mc_error("out of memory");
				exit(3);
			}
			n->implicit[n->n_implicit++] = o;
		}
	}
}

static mc_graph *load_graph(const Onnx__GraphProto *gp, scope *parent, int depth,
                            const mc_import_opts *opts, int opset, const char *model_dir,
                            import_totals *totals)
{
	if (depth > MC_MAX_GRAPH_DEPTH) {
		mc_error("graph '%s': subgraphs are nested more than %d deep", gp->name ? gp->name : "",
		         MC_MAX_GRAPH_DEPTH);
		return NULL;
	}
	mc_graph *g = mc_xcalloc(1, sizeof *g);
	g->name = mc_xstrdup(gp->name);
	g->parent = parent ? parent->g : NULL;
	g->depth = depth;
	g->opset = opset;
	scope s = {.g = g, .parent = parent, .opts = opts, .opset = opset, .model_dir = model_dir,
	           .totals = totals};
	int rc = 0;

	for (size_t i = 0; i < gp->n_initializer && !rc; i++) {
		const Onnx__TensorProto *tp = gp->initializer[i];
		const char *name = tp->name ? tp->name : "";
		if (index_get(&s.ix, g, name) >= 0) {
			mc_error("initializer '%s' is defined twice", name);
			rc = -1;
			break;
		}
		mc_tensor *t = load_tensor(tp, name, model_dir);
		if (!t) {
			rc = -1;
			break;
		}
		int vi = add_named(&s, name, MC_VAL_CONST); /* may move g->values */
		mc_value *v = &g->values[vi];
		v->konst = t;
		v->dtype = t->dtype;
		v->shape = t->shape;
		v->typed = true;
	}
	if (gp->n_sparse_initializer && !rc) {
		mc_error("graph '%s': sparse initializers are not supported", g->name);
		rc = -1;
	}
	g->inputs = mc_xcalloc(gp->n_input, sizeof *g->inputs);
	for (size_t i = 0; i < gp->n_input && !rc; i++) {
		const Onnx__ValueInfoProto *vi = gp->input[i];
		const char *name = vi->name ? vi->name : "";
		int existing = index_get(&s.ix, g, name);
		if (existing >= 0) {
			if (g->values[existing].kind == MC_VAL_CONST)
				continue; /* an input with a default: frozen as a constant */
			mc_error("graph input '%s' is declared twice", name);
			rc = -1;
			break;
		}
		int v = add_named(&s, name, MC_VAL_INPUT);
		rc = load_value_type(&s, vi, &g->values[v]);
		g->inputs[g->n_inputs++] = v;
	}
	if (!rc && !parent)
		rc = check_dim_pins(g, opts);

	/* Pass 1: every node output becomes a value, so that nodes may appear
	 * in any order in the file. */
	size_t nn = gp->n_node;
	if (!rc && nn > (size_t)(MC_MAX_NODES - totals->nodes)) {
		if (totals->nodes)
			mc_error("graph '%s' has %zu nodes, which makes %zu in the model; at most %d "
			         "are supported (all graphs together)", g->name, nn,
			         nn + (size_t)totals->nodes, MC_MAX_NODES);
		else
			mc_error("graph '%s' has %zu nodes; at most %d are supported", g->name, nn,
			         MC_MAX_NODES);
		rc = -1;
	}
	if (rc)
		nn = 0;
	totals->nodes += (long)nn;
	g->nodes = mc_xcalloc(nn, sizeof *g->nodes);
	g->cap_nodes = (int)nn;
	for (size_t i = 0; i < nn && !rc; i++) {
		const Onnx__NodeProto *np = gp->node[i];
		mc_node *n = &g->nodes[g->n_nodes++];
		n->name = mc_xstrdup(np->name);
		n->op_type = mc_xstrdup(np->op_type);
		if (!n->op_type[0]) {
			/* An empty op_type also marks a Constant turned into a value. */
			mc_error("node '%s': op_type is empty", np->name ? np->name : "");
			rc = -1;
			break;
		}
		n->domain = mc_xstrdup(is_default_domain(np->domain) ? "" : np->domain);
		n->id = n->domain[0] ? MC_OP_NONE : mc_opid_of(n->op_type);
		n->opset = opset;
		if (np->n_input > MC_MAX_NODE_IO || np->n_output > MC_MAX_NODE_IO) {
			mc_error("node '%s' (%s): %zu inputs and %zu outputs; at most %d each are "
			         "supported", np->name ? np->name : "", np->op_type ? np->op_type : "",
			         np->n_input, np->n_output, MC_MAX_NODE_IO);
			rc = -1;
			break;
		}
		n->n_inputs = (int)np->n_input;
		n->n_outputs = (int)np->n_output;
		n->inputs = mc_xcalloc(np->n_input, sizeof(int));
		n->outputs = mc_xcalloc(np->n_output, sizeof(int));
		for (size_t k = 0; k < np->n_output; k++) {
			const char *on = np->output[k] ? np->output[k] : "";
			if (!*on) {
				n->outputs[k] = -1;
				continue;
			}
			if (index_get(&s.ix, g, on) >= 0) {
				char where[512];
				mc_error("%s: output '%s' is already defined elsewhere in the graph",
				         mc_node_where(n, where, sizeof where), on);
				rc = -1;
				break;
			}
			int v = add_named(&s, on, MC_VAL_NODE);
			g->values[v].producer = (int)i;
			n->outputs[k] = v;
		}
	}

	/* Pass 2: attributes (subgraphs see every value of this scope), inputs,
	 * op resolution. */
	for (int i = 0; i < g->n_nodes && !rc; i++) {
		const Onnx__NodeProto *np = gp->node[i];
		mc_node *n = &g->nodes[i];
		char where[512];
		mc_node_where(n, where, sizeof where);
		for (size_t k = 0; k < np->n_input; k++) {
			const char *in = np->input[k] ? np->input[k] : "";
			if (!*in) {
				n->inputs[k] = -1;
				continue;
			}
			n->inputs[k] = resolve(&s, in);
			if (n->inputs[k] < 0) {
				mc_error("%s: input '%s' is not produced by any node, initializer or graph "
				         "input", where, in);
				rc = -1;
				break;
			}
		}
		if (rc)
			break;
		if (!n->domain[0] && strcmp(n->op_type, "Constant") == 0 && n->n_outputs == 1 &&
		    n->outputs[0] >= 0) {
			rc = load_constant(&s, np, n, n->outputs[0]);
			g->values[n->outputs[0]].producer = -1;
			n->op_type[0] = 0; /* marked for removal below */
			continue;
		}
		if (np->n_attribute > MC_MAX_NODE_ATTRS) {
			mc_error("%s: has %zu attributes; at most %d are supported", where,
			         np->n_attribute, MC_MAX_NODE_ATTRS);
			rc = -1;
			break;
		}
		n->n_attrs = (int)np->n_attribute;
		n->attrs = mc_xcalloc(np->n_attribute, sizeof *n->attrs);
		for (int k = 0; k < n->n_attrs && !rc; k++) {
			rc = load_attr(&s, n, np->attribute[k], &n->attrs[k]);
			if (!rc && n->attrs[k].g)
				add_implicit(n, n->attrs[k].g);
			for (int j = 0; j < k && !rc; j++)
				if (!strcmp(n->attrs[j].name, n->attrs[k].name)) {
					mc_error("%s: attribute '%s' is given twice", where, n->attrs[k].name);
					rc = -1;
				}
		}
		if (rc)
			break;
		bool known = false;
		n->op = n->domain[0] ? NULL : mc_registry_find(n->op_type, n->opset, &known);
		if (!n->op) {
			report_unsupported(n, known);
			totals->unsupported++;
			continue;
		}
		if (n->n_inputs < n->op->min_inputs || n->n_inputs > n->op->max_inputs ||
		    n->n_outputs < n->op->min_outputs || n->n_outputs > n->op->max_outputs) {
			mc_error("%s: has %d inputs and %d outputs; the op takes %d to %d inputs and %d "
			         "to %d outputs", where, n->n_inputs, n->n_outputs, n->op->min_inputs,
			         n->op->max_inputs, n->op->min_outputs, n->op->max_outputs);
			rc = -1;
			break;
		}
		int required = n->op->flags & MC_OP_VARIADIC ? n->n_inputs : n->op->min_inputs;
		for (int k = 0; k < required && !rc; k++)
			if (n->inputs[k] < 0) {
				mc_error("%s: required input %d is missing (empty name)", where, k);
				rc = -1;
			}
		for (int k = 0; k < n->op->min_outputs && !rc; k++)
			if (n->outputs[k] < 0) {
				mc_error("%s: required output %d is missing (empty name)", where, k);
				rc = -1;
			}
		if (!rc && n->op->parse)
			rc = n->op->parse(n);
		if (!rc && (n->op->flags & MC_OP_COUNTED) && n->outputs[0] >= 0)
			add_count_output(&s, n, i);
	}

	/* Drop the Constant nodes turned into values, renumbering producers. */
	if (!rc) {
		int kept = 0;
		int *newidx = mc_xmalloc(((size_t)g->n_nodes + 1) * sizeof *newidx);
		for (int i = 0; i < g->n_nodes; i++) {
			mc_node *n = &g->nodes[i];
			if (n->op_type[0] == 0) {
				mc_node_free(n);
				newidx[i] = -1;
				continue;
			}
			newidx[i] = kept;
			g->nodes[kept++] = *n;
		}
		g->n_nodes = kept;
		for (int v = 0; v < g->n_values; v++)
			if (g->values[v].producer >= 0)
				g->values[v].producer = newidx[g->values[v].producer];
		free(newidx);
		rc = topo_sort(g);
	}

	g->outputs = mc_xcalloc(gp->n_output, sizeof *g->outputs);
	for (size_t i = 0; i < gp->n_output && !rc; i++) {
		const char *name = gp->output[i]->name ? gp->output[i]->name : "";
		int v = resolve(&s, name);
		if (v < 0) {
			mc_error("graph output '%s' is never produced", name);
			rc = -1;
			break;
		}
		g->outputs[g->n_outputs++] = v;
	}
	free(s.ix.slots);
	if (rc) {
		/* Constant-marked nodes have op_type "" but are intact: free normally. */
		mc_graph_free(g);
		return NULL;
	}
	return g;
}

static int model_opset(const Onnx__ModelProto *m, int *out)
{
	int found = 0;
	for (size_t i = 0; i < m->n_opset_import; i++) {
		const Onnx__OperatorSetIdProto *o = m->opset_import[i];
		if (!is_default_domain(o->domain))
			continue; /* other domains are refused where a node uses one */
		if (!o->has_version || o->version < 1) {
			mc_error("the model's default-domain opset version is missing or invalid");
			return -1;
		}
		if (o->version > MC_MAX_OPSET) {
			mc_error("the model imports opset %lld of the default domain; modelc knows "
			         "opsets up to %d", (long long)o->version, MC_MAX_OPSET);
			return -1;
		}
		*out = (int)o->version;
		found = 1;
	}
	if (!found) {
		if (m->n_opset_import) {
			const char *d = m->opset_import[0]->domain;
			mc_error("the model imports only the operator domain '%s', which is not "
			         "supported (only the default ONNX domain is)", d ? d : "");
		} else {
			mc_error("the model imports no opset");
		}
		return -1;
	}
	return 0;
}

/* protobuf-c unpacks nested messages recursively, with no depth limit: a
 * small file nesting messages a few thousand deep overflows the stack.
 * Walk the wire format first with the generated descriptors and refuse
 * deep nesting. Malformed data is left to the real parser to report. */
#define MC_MAX_PB_DEPTH (4 * MC_MAX_GRAPH_DEPTH + 16)

static bool pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;
	for (int shift = 0; shift < 64 && *p < end; shift += 7) {
		uint8_t b = *(*p)++;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return true;
		}
	}
	return false;
}

/* Reads one field: its key, and for a length-delimited field (wire type
 * 2) where its payload lies. False on malformed data. */
static bool pb_field(const uint8_t **p, const uint8_t *end, uint64_t *key,
                     const uint8_t **payload, uint64_t *len)
{
	uint64_t v;
	*len = 0;
	if (!pb_varint(p, end, key))
		return false;
	switch (*key & 7) {
	case 0:
		return pb_varint(p, end, &v);
	case 1:
		if (end - *p < 8)
			return false;
		*p += 8;
		return true;
	case 5:
		if (end - *p < 4)
			return false;
		*p += 4;
		return true;
	case 2:
		if (!pb_varint(p, end, len) || *len > (uint64_t)(end - *p))
			return false;
		*payload = *p;
		*p += *len;
		return true;
	default:
		return false;
	}
}

static const ProtobufCFieldDescriptor *pb_field_desc(const ProtobufCMessageDescriptor *d,
                                                     uint64_t key)
{
	return (key >> 3) <= 0x1fffffff
		? protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3))
		: NULL;
}

static bool pb_too_deep(const ProtobufCMessageDescriptor *d, const uint8_t *p,
                        const uint8_t *end, int depth)
{
	if (depth > MC_MAX_PB_DEPTH)
		return true;
	while (p < end) {
		uint64_t key, len;
		const uint8_t *payload;
		if (!pb_field(&p, end, &key, &payload, &len))
			return false;
		const ProtobufCFieldDescriptor *f = (key & 7) == 2 ? pb_field_desc(d, key) : NULL;
		if (f && f->type == PROTOBUF_C_TYPE_MESSAGE &&
		    pb_too_deep(f->descriptor, payload, payload + len, depth + 1))
			return true;
	}
	return false;
}

/* The wire type a field is written with (repeated numbers may also come
 * packed, as wire type 2). */
static uint64_t pb_wire_type(const ProtobufCFieldDescriptor *f)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_SFIXED64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
		return 1;
	case PROTOBUF_C_TYPE_SFIXED32: case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_FLOAT:
		return 5;
	case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_BYTES: case PROTOBUF_C_TYPE_MESSAGE:
		return 2;
	default:
		return 0;
	}
}

/* For data the parser refused: when it is a well-formed protobuf message
 * all through its top level, the number of its first field that a
 * message of type d cannot hold (a message of another type given as the
 * model); else 0 (damaged data). */
static unsigned pb_foreign_field(const ProtobufCMessageDescriptor *d, const uint8_t *p,
                                 const uint8_t *end)
{
	unsigned foreign = 0;
	while (p < end) {
		uint64_t key, len;
		const uint8_t *payload;
		if (!pb_field(&p, end, &key, &payload, &len) || (key >> 3) == 0)
			return 0;
		const ProtobufCFieldDescriptor *f = pb_field_desc(d, key);
		uint64_t want = f ? pb_wire_type(f) : key & 7;
		bool packed = f && f->label == PROTOBUF_C_LABEL_REPEATED && want != 2 &&
		              (key & 7) == 2;
		if (!foreign && (key & 7) != want && !packed)
			foreign = (unsigned)(key >> 3);
	}
	return foreign;
}

mc_graph *mc_import_buffer(const uint8_t *buf, size_t len, const char *model_dir,
                           const mc_import_opts *opts)
{
	static const mc_import_opts none;
	if (!opts)
		opts = &none;
	if (len == 0) {
		mc_error("the model file is empty");
		return NULL;
	}
	if (pb_too_deep(&onnx__model_proto__descriptor, buf, buf + len, 0)) {
		mc_error("not a valid ONNX model: messages are nested more than %d deep",
		         MC_MAX_PB_DEPTH);
		return NULL;
	}
	Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, buf);
	unsigned foreign = m ? 0 : pb_foreign_field(&onnx__model_proto__descriptor, buf, buf + len);
	if (foreign) {
		mc_error("not an ONNX model: the file holds a protobuf message of another type (its "
		         "field %u does not fit a ModelProto)", foreign);
		return NULL;
	}
	if (!m) {
		mc_error("not a valid ONNX model: the protobuf data is truncated or malformed");
		return NULL;
	}
	mc_graph *g = NULL;
	int opset = 0;
	if (!m->has_ir_version || !m->graph) {
		mc_error("not an ONNX model: %s is missing",
		         !m->has_ir_version ? "ir_version" : "the graph");
	} else if (m->ir_version < 3 || m->ir_version > 13) {
		mc_error("unsupported ONNX IR version %lld", (long long)m->ir_version);
	} else if (m->n_functions) {
		mc_error("model-local functions are not supported (%zu defined)", m->n_functions);
	} else if (!model_opset(m, &opset)) {
		import_totals totals = {0};
		g = load_graph(m->graph, NULL, 0, opts, opset, model_dir, &totals);
		if (g && totals.unsupported && !opts->allow_unsupported) {
			/* Each node was named; a count adds to that only for several. */
			if (totals.unsupported > 1)
				mc_error("%d nodes use unsupported ops", totals.unsupported);
			mc_graph_free(g);
			g = NULL;
		}
		if (g) {
			g->model_dir = mc_xstrdup(model_dir ? model_dir : ".");
			for (int i = 0; i < opts->n_pins; i++)
				if (mc_graph_find(g, opts->pins[i].name) < 0 ||
				    g->values[mc_graph_find(g, opts->pins[i].name)].kind != MC_VAL_INPUT) {
					mc_error("--input-shape names '%s', which is not a graph input",
					         opts->pins[i].name);
					mc_graph_free(g);
					g = NULL;
					break;
				}
		}
	}
	onnx__model_proto__free_unpacked(m, NULL);
	return g;
}

static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return mc_xstrdup(".");
	if (slash == path)
		return mc_xstrdup("/");
	char *d = mc_xmalloc((size_t)(slash - path) + 1);
	memcpy(d, path, (size_t)(slash - path));
	d[slash - path] = 0;
	return d;
}

/* Maps a whole file read-only; files up to SIZE_MAX are fine on 64-bit. */
/* The whole file in memory, read rather than mapped: a file truncated or
 * replaced while modelc reads it gives an error, not a fault, and what is
 * fingerprinted is what was compiled. */
static uint8_t *read_file(const char *path, size_t *len, const char *what)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK); /* a FIFO must not block */
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		mc_error("cannot open %s '%s': %s", what, path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		mc_error("%s '%s' is not a regular file", what, path);
		close(fd);
		return NULL;
	}
	size_t size = (size_t)st.st_size, got = 0;
	uint8_t *buf = malloc(size + 1);
	if (!buf) {
		mc_error("%s '%s': %zu bytes do not fit in memory", what, path, size);
		close(fd);
		return NULL;
	}
	while (got < size) {
		ssize_t n = read(fd, buf + got, size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			mc_error("cannot read %s '%s': %s", what, path,
			         n < 0 ? strerror(errno) : "the file shrank while it was read");
			close(fd);
			free(buf);
			return NULL;
		}
		got += (size_t)n;
	}
	close(fd);
	*len = size;
	return buf;
}

mc_graph *mc_import_file(const char *path, const mc_import_opts *opts)
{
	size_t len;
	uint8_t *buf = read_file(path, &len, "model");
	if (!buf)
		return NULL;
	char *dir = dir_of(path);
	mc_graph *g = mc_import_buffer(buf, len, dir, opts);
	if (g)
		mc_sha256_hex(buf, len, g->sha256);
	free(dir);
	free(buf);
	return g;
}

mc_tensor *mc_tensor_from_pb(const uint8_t *buf, size_t len)
{
	Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, buf);
	if (!tp) {
		mc_error("not a valid TensorProto");
		return NULL;
	}
	mc_tensor *t = load_tensor(tp, tp->name && *tp->name ? tp->name : "(unnamed)", NULL);
	onnx__tensor_proto__free_unpacked(tp, NULL);
	return t;
}

mc_tensor *mc_tensor_from_pb_file(const char *path)
{
	size_t len;
	uint8_t *buf = read_file(path, &len, "tensor file");
	if (!buf)
		return NULL;
	mc_tensor *t = mc_tensor_from_pb(buf, len);
	free(buf);
	return t;
}
