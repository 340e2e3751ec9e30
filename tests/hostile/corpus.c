/* The hostile model corpus (see corpus.h). Models are built with the
 * protobuf-c generated API through tests/unit/model_builder.h; the cases
 * with 100k nodes or attributes fill the generated structs' arrays
 * themselves (the builder copies an array at each append), and only the
 * nesting bomb writes protobuf framing itself (too deep for the generated
 * packer's recursion), taking every field number from the generated
 * descriptors. */
#include "corpus.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../unit/model_builder.h"

#define STR_(x) #x
#define STR(x) STR_(x)

/* ---- small file helpers ---- */
static int write_model(mb *b, const char *path)
{
	int rc = mb_write(b, path);
	mb_free(b);
	return rc;
}

/* Writes `data` to `name` in the directory that holds `path`, or in its
 * parent when up is true. */
static int write_companion(const char *path, bool up, const char *name, const void *data,
                           size_t len)
{
	char dir[4096], file[4200];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else
		*slash = 0;
	snprintf(file, sizeof file, "%s%s/%s", dir, up ? "/.." : "", name);
	return write_file(file, data, len);
}

/* A small valid model: cond -> If -> y, branches of float initializers. */
static mb *small_valid_model(void)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "cond", MC_BOOL, "");
	mb_if_consts(b, mb_main(b), "pick", "cond", "y", "2,2", (const float[]){1, 2, 3, 4},
	             (const float[]){5, 6, 7, 8}, 4);
	mb_output(b, mb_main(b), "y");
	return b;
}

/* ---- damaged files ---- */
static int w_empty(const char *path) { return write_file(path, "", 0); }

static int write_truncated(const char *path, bool half)
{
	mb *b = small_valid_model();
	size_t len;
	uint8_t *buf = mb_pack(b, &len);
	/* Cutting anywhere inside the last field leaves it incomplete. */
	int rc = write_file(path, buf, half ? len / 2 : len - 1);
	free(buf);
	mb_free(b);
	return rc;
}

static int w_truncated_half(const char *path) { return write_truncated(path, true); }
static int w_truncated_last_byte(const char *path) { return write_truncated(path, false); }

static int write_random(const char *path, size_t len, uint64_t seed)
{
	uint8_t *buf = malloc(len);
	uint64_t x = seed;
	for (size_t i = 0; i < len; i++) { /* xorshift64: the same bytes on every host */
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (uint8_t)(x >> 24);
	}
	int rc = write_file(path, buf, len);
	free(buf);
	return rc;
}

static int w_random_4k(const char *path) { return write_random(path, 4096, 0x9e3779b97f4a7c15ull); }
static int w_random_17(const char *path) { return write_random(path, 17, 42); }

static int w_text(const char *path)
{
	const char *t = "ir_version: 8\ngraph { name: \"this is text format, not a model\" }\n";
	return write_file(path, t, strlen(t));
}

/* ---- absurd sizes ---- */
static int w_dim_2p62_initializer(const char *path)
{
	mb *b = mb_new(13);
	mb_initializer(b, mb_main(b), mb_tensor(b, "W", MC_FLOAT, "4611686018427387904"));
	mb_output(b, mb_main(b), "W");
	return write_model(b, path);
}

static int w_dim_2p62_input(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "1,4611686018427387904");
	mb_output(b, mb_main(b), "x");
	return write_model(b, path);
}

static int w_dims_overflow_initializer(const char *path)
{
	mb *b = mb_new(13);
	mb_initializer(b, mb_main(b),
	               mb_tensor(b, "W", MC_FLOAT, "4294967296,4294967296,4294967296"));
	mb_output(b, mb_main(b), "W");
	return write_model(b, path);
}

/* 2^37 floats (512 GiB) declared, 4 bytes given: must be refused by
 * comparing sizes, before any allocation of the declared size. */
static int w_huge_initializer_no_data(const char *path)
{
	mb *b = mb_new(13);
	Onnx__TensorProto *t = mb_tensor(b, "W", MC_FLOAT, "137438953472");
	mb_raw(b, t, (const float[]){1}, 4);
	mb_initializer(b, mb_main(b), t);
	mb_output(b, mb_main(b), "W");
	return write_model(b, path);
}

static int w_rank9_input(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "1,1,1,1,1,1,1,1,1");
	mb_output(b, mb_main(b), "x");
	return write_model(b, path);
}

static int w_negative_dim_initializer(const char *path)
{
	mb *b = mb_new(13);
	mb_initializer(b, mb_main(b), mb_tensor(b, "W", MC_FLOAT, "-1"));
	mb_output(b, mb_main(b), "W");
	return write_model(b, path);
}

static int w_count_mismatch_int64(const char *path)
{
	mb *b = mb_new(13);
	mb_init_ints(b, mb_main(b), "I", MC_INT64, "3,3", (const int64_t[]){1, 2, 3}, 3);
	mb_output(b, mb_main(b), "I");
	return write_model(b, path);
}

/* int4: two elements a byte in the file; 5 elements need 3 bytes. */
static int w_raw_size_int4(const char *path)
{
	mb *b = mb_new(21);
	Onnx__TensorProto *t = mb_tensor(b, "Q", MC_INT4, "5");
	mb_raw(b, t, (const uint8_t[]){0x12, 0x34, 0x56, 0x78}, 4);
	mb_initializer(b, mb_main(b), t);
	mb_output(b, mb_main(b), "Q");
	return write_model(b, path);
}

static int w_count_mismatch(const char *path)
{
	mb *b = mb_new(13);
	Onnx__TensorProto *t = mb_tensor(b, "W", MC_FLOAT, "1000000");
	mb_float_data(b, t, (const float[]){1}, 1);
	mb_initializer(b, mb_main(b), t);
	mb_output(b, mb_main(b), "W");
	return write_model(b, path);
}

/* ---- external data ---- */
static const float ext16[4] = {1, 2, 3, 4};

static int write_external(const char *path, const char *location, const char *offset,
                          const char *length)
{
	mb *b = mb_new(13);
	Onnx__TensorProto *t = mb_tensor(b, "W", MC_FLOAT, "4");
	mb_external(b, t, "location", location);
	if (offset)
		mb_external(b, t, "offset", offset);
	if (length)
		mb_external(b, t, "length", length);
	mb_initializer(b, mb_main(b), t);
	mb_output(b, mb_main(b), "W");
	return write_model(b, path);
}

/* 2^37 floats declared, a 16-byte file: refused by sizes, before any
 * allocation of the declared size. */
static int w_external_huge_dims(const char *path)
{
	if (write_companion(path, false, "w.bin", ext16, sizeof ext16))
		return -1;
	mb *b = mb_new(13);
	Onnx__TensorProto *t = mb_tensor(b, "W", MC_FLOAT, "137438953472");
	mb_external(b, t, "location", "w.bin");
	mb_initializer(b, mb_main(b), t);
	mb_output(b, mb_main(b), "W");
	return write_model(b, path);
}

static int w_external_dotdot(const char *path)
{
	/* the file exists: the refusal must not depend on that */
	if (write_companion(path, true, "secret.bin", ext16, sizeof ext16))
		return -1;
	return write_external(path, "../secret.bin", NULL, NULL);
}

static int w_external_absolute(const char *path)
{
	return write_external(path, "/etc/passwd", NULL, NULL);
}

static int w_external_dir_itself(const char *path)
{
	return write_external(path, ".", NULL, NULL);
}

static int w_external_offset_overflow(const char *path)
{
	if (write_companion(path, false, "w.bin", ext16, sizeof ext16))
		return -1;
	return write_external(path, "w.bin", "18446744073709551616", NULL);
}

static int w_external_huge_length(const char *path)
{
	if (write_companion(path, false, "w.bin", ext16, sizeof ext16))
		return -1;
	return write_external(path, "w.bin", "0", "9223372036854775807");
}

/* ---- structure ---- */
static int w_opset_huge(const char *path)
{
	mb *b = mb_new(1000000000000);
	mb_output(b, mb_main(b), "x");
	return write_model(b, path);
}

static int w_ir_version_negative(const char *path)
{
	mb *b = mb_new(13);
	mb_model(b)->ir_version = -1;
	return write_model(b, path);
}

static int write_missing_input(const char *path, const char *node_name)
{
	mb *b = mb_new(13);
	mb_if_consts(b, mb_main(b), node_name, "nope", "y", "1", (const float[]){1},
	             (const float[]){2}, 1);
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

static int w_long_node_name(const char *path)
{
	char name[5001];
	memset(name, 'A', 5000);
	name[5000] = 0;
	return write_missing_input(path, name);
}

static int w_forged_error_line(const char *path)
{
	return write_missing_input(path, "a\nmodelc: error: forged");
}

static int w_sparse_initializer(const char *path)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	static Onnx__SparseTensorProto sp = ONNX__SPARSE_TENSOR_PROTO__INIT;
	static Onnx__SparseTensorProto *list[1] = {&sp};
	g->n_sparse_initializer = 1;
	g->sparse_initializer = list;
	mb_output(b, g, "x");
	return write_model(b, path);
}

static int w_segment(const char *path)
{
	mb *b = mb_new(13);
	Onnx__TensorProto *t = mb_tensor(b, "W", MC_FLOAT, "1");
	mb_raw(b, t, (const float[]){1}, 4);
	static Onnx__TensorProto__Segment seg = ONNX__TENSOR_PROTO__SEGMENT__INIT;
	t->segment = &seg;
	mb_initializer(b, mb_main(b), t);
	mb_output(b, mb_main(b), "W");
	return write_model(b, path);
}

static int w_functions(const char *path)
{
	mb *b = mb_new(13);
	static Onnx__FunctionProto fn = ONNX__FUNCTION_PROTO__INIT;
	static Onnx__FunctionProto *list[1] = {&fn};
	fn.name = "f";
	fn.domain = "local";
	mb_model(b)->n_functions = 1;
	mb_model(b)->functions = list;
	return write_model(b, path);
}

static int w_string_initializer(const char *path)
{
	mb *b = mb_new(13);
	mb_initializer(b, mb_main(b), mb_tensor(b, "S", MC_STRING, "1"));
	mb_output(b, mb_main(b), "S");
	return write_model(b, path);
}

static int w_dtype_999(const char *path)
{
	mb *b = mb_new(13);
	mb_initializer(b, mb_main(b), mb_tensor(b, "W", 999, "1"));
	mb_output(b, mb_main(b), "W");
	return write_model(b, path);
}

static int w_input_sequence(const char *path)
{
	mb *b = mb_new(13);
	Onnx__ValueInfoProto *vi = mb_input(b, mb_main(b), "seq", MC_FLOAT, "1");
	static Onnx__TypeProto__Sequence seq = ONNX__TYPE_PROTO__SEQUENCE__INIT;
	vi->type->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
	vi->type->sequence_type = &seq;
	mb_output(b, mb_main(b), "seq");
	return write_model(b, path);
}

static int w_cycle(const char *path)
{
	mb *b = mb_new(13);
	mb_if_consts(b, mb_main(b), "i1", "c2", "c1", "", (const float[]){1}, (const float[]){0}, 1);
	mb_if_consts(b, mb_main(b), "i2", "c1", "c2", "", (const float[]){1}, (const float[]){0}, 1);
	mb_output(b, mb_main(b), "c1");
	return write_model(b, path);
}

static int w_duplicate_output(const char *path)
{
	mb *b = mb_new(13);
	mb_const_bool(b, mb_main(b), "c", true);
	mb_const_bool(b, mb_main(b), "c", false);
	mb_output(b, mb_main(b), "c");
	return write_model(b, path);
}

static int w_if_no_branches(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "cond", MC_BOOL, "");
	mb_node(b, mb_main(b), "If", "pick", "cond", "y");
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

static int w_if_branch_output_count(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "cond", MC_BOOL, "");
	Onnx__GraphProto *t = mb_graph(b, "t"), *e = mb_graph(b, "e");
	mb_init_floats(b, t, "a", "1", (const float[]){1}, 1);
	mb_output(b, t, "a");
	mb_output(b, t, "a");
	mb_init_floats(b, e, "c", "1", (const float[]){1}, 1);
	mb_output(b, e, "c");
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "If", "pick", "cond", "y");
	mb_attr_graph(b, n, "then_branch", t);
	mb_attr_graph(b, n, "else_branch", e);
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

static int w_if_float_condition(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "cond", MC_FLOAT, "");
	mb_if_consts(b, mb_main(b), "pick", "cond", "y", "1", (const float[]){1},
	             (const float[]){2}, 1);
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

static int w_if_branches_disagree(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "cond", MC_BOOL, "");
	Onnx__GraphProto *t = mb_graph(b, "t"), *e = mb_graph(b, "e");
	mb_init_floats(b, t, "a", "3", (const float[]){1, 2, 3}, 3);
	mb_output(b, t, "a");
	mb_init_floats(b, e, "c", "1,3", (const float[]){1, 2, 3}, 3);
	mb_output(b, e, "c");
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "If", "pick", "cond", "y");
	mb_attr_graph(b, n, "then_branch", t);
	mb_attr_graph(b, n, "else_branch", e);
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

static int w_nested_if_40(const char *path)
{
	mb *b = mb_new(13);
	mb_const_bool(b, mb_main(b), "c", true);
	Onnx__GraphProto *g = mb_main(b);
	for (int depth = 0; depth < MC_MAX_GRAPH_DEPTH + 8; depth++) {
		Onnx__GraphProto *t = mb_graph(b, "deep"), *e = mb_graph(b, "deep_else");
		mb_init_floats(b, e, "e", "1", (const float[]){0}, 1);
		mb_output(b, e, "e");
		mb_output(b, t, "y");
		Onnx__NodeProto *n = mb_node(b, g, "If", "nest", "c", "y");
		mb_attr_graph(b, n, "then_branch", t);
		mb_attr_graph(b, n, "else_branch", e);
		if (depth == 0)
			mb_output(b, g, "y");
		g = t;
	}
	return write_model(b, path);
}

/* ---- the nesting bomb ----
 * Graph -> node If -> attribute then_branch -> Graph -> ... `levels` deep
 * (about 40 bytes a level). A parser that recurses once per message level
 * without a limit runs out of stack long before the importer's own depth
 * check sees the graph: protobuf-c 1.4 does, from about 5000 levels on an
 * 8 MiB stack. */
#define BOMB_LEVELS 100000

static int field_id(const ProtobufCMessageDescriptor *d, const char *name)
{
	const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, name);
	if (!f)
		abort();
	return (int)f->id;
}

static size_t varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* A length-delimited field's key (wire type 2) and length. */
static uint8_t *put_len_key(uint8_t *p, int field, size_t len)
{
	p = put_varint(p, (uint64_t)field << 3 | 2);
	return put_varint(p, len);
}

static size_t len_key_size(int field, size_t len)
{
	return varint_len((uint64_t)field << 3 | 2) + varint_len(len);
}

static int write_nesting(const char *path, int levels)
{
	/* The fixed parts of each level, packed by the generated code. */
	/* No inputs: the importer reaches the subgraph before any name lookup. */
	Onnx__NodeProto node = ONNX__NODE_PROTO__INIT;
	char *out[1] = {"y"};
	node.op_type = "If";
	node.n_output = 1;
	node.output = out;
	Onnx__AttributeProto attr = ONNX__ATTRIBUTE_PROTO__INIT;
	attr.name = "then_branch";
	attr.has_type = 1;
	attr.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
	uint8_t node_head[64], attr_head[64];
	size_t node_len = onnx__node_proto__pack(&node, node_head);
	size_t attr_len = onnx__attribute_proto__pack(&attr, attr_head);
	int f_node = field_id(&onnx__graph_proto__descriptor, "node");
	int f_attr = field_id(&onnx__node_proto__descriptor, "attribute");
	int f_g = field_id(&onnx__attribute_proto__descriptor, "g");
	int f_graph = field_id(&onnx__model_proto__descriptor, "graph");

	/* Sizes from the innermost (empty) graph outwards. */
	size_t *graph_size = malloc(((size_t)levels + 1) * sizeof *graph_size);
	size_t *node_size = malloc((size_t)levels * sizeof *node_size);
	size_t *attr_size = malloc((size_t)levels * sizeof *attr_size);
	graph_size[levels] = 0;
	for (int l = levels - 1; l >= 0; l--) {
		attr_size[l] = attr_len + len_key_size(f_g, graph_size[l + 1]) + graph_size[l + 1];
		node_size[l] = node_len + len_key_size(f_attr, attr_size[l]) + attr_size[l];
		graph_size[l] = len_key_size(f_node, node_size[l]) + node_size[l];
	}

	mb *b = mb_new(13);
	mb_model(b)->graph = NULL; /* appended by hand below */
	size_t head_len;
	uint8_t *head = mb_pack(b, &head_len);
	mb_free(b);
	size_t total = head_len + len_key_size(f_graph, graph_size[0]) + graph_size[0];
	uint8_t *buf = malloc(total), *p = buf;
	memcpy(p, head, head_len);
	p += head_len;
	p = put_len_key(p, f_graph, graph_size[0]);
	for (int l = 0; l < levels; l++) {
		p = put_len_key(p, f_node, node_size[l]);
		memcpy(p, node_head, node_len);
		p += node_len;
		p = put_len_key(p, f_attr, attr_size[l]);
		memcpy(p, attr_head, attr_len);
		p += attr_len;
		p = put_len_key(p, f_g, graph_size[l + 1]);
	}
	int rc = (size_t)(p - buf) == total ? write_file(path, buf, total) : -1;
	free(head);
	free(buf);
	free(graph_size);
	free(node_size);
	free(attr_size);
	return rc;
}

static int w_nesting_1000(const char *path) { return write_nesting(path, 1000); }
static int w_nesting_bomb(const char *path) { return write_nesting(path, BOMB_LEVELS); }

/* ---- valid protobuf, not a model ---- */
static int write_message(const ProtobufCMessage *m, const char *path)
{
	size_t len = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = malloc(len ? len : 1);
	protobuf_c_message_pack(m, buf);
	int rc = write_file(path, buf, len);
	free(buf);
	return rc;
}

static int w_tensorproto_as_model(const char *path)
{
	mb *b = mb_new(13);
	Onnx__TensorProto *t = mb_tensor(b, "W", MC_FLOAT, "2,3");
	mb_raw(b, t, (const float[]){1, 2, 3, 4, 5, 6}, 24);
	int rc = write_message(&t->base, path);
	mb_free(b);
	return rc;
}

static int w_graphproto_as_model(const char *path)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "1,4");
	mb_node(b, g, "Relu", "r", "x", "y");
	mb_output(b, g, "y");
	int rc = write_message(&g->base, path);
	mb_free(b);
	return rc;
}

static int w_nodeproto_as_model(const char *path)
{
	mb *b = mb_new(13);
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "Relu", "r", "x", "y");
	int rc = write_message(&n->base, path);
	mb_free(b);
	return rc;
}

static int w_model_no_graph(const char *path)
{
	mb *b = mb_new(13);
	mb_model(b)->graph = NULL;
	return write_model(b, path);
}

/* ---- one-node models ---- */
/* x (float, `shape`) -> op -> y, the node named "n". */
static mb *one_node(const char *op, const char *shape, Onnx__NodeProto **node)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", MC_FLOAT, shape);
	*node = mb_node(b, mb_main(b), op, "n", "x", "y");
	mb_output(b, mb_main(b), "y");
	return b;
}

/* x (`xshape`) -> Conv(x, W) -> y, the node named "conv", W of shape
 * `wshape` holding wcount zeros. */
static mb *conv_model(const char *xshape, const char *wshape, size_t wcount,
                      Onnx__NodeProto **node)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", MC_FLOAT, xshape);
	float *w = calloc(wcount ? wcount : 1, sizeof *w);
	mb_init_floats(b, mb_main(b), "W", wshape, w, wcount);
	free(w);
	*node = mb_node(b, mb_main(b), "Conv", "conv", "x,W", "y");
	mb_output(b, mb_main(b), "y");
	return b;
}

/* ---- zero and negative dimensions ---- */
static int w_conv_kernel_zero(const char *path)
{
	Onnx__NodeProto *n;
	return write_model(conv_model("1,1,4,4", "1,1,0,3", 0, &n), path);
}

static int w_conv_input_spatial_zero(const char *path)
{
	Onnx__NodeProto *n;
	return write_model(conv_model("1,1,0,4", "1,1,3,3", 9, &n), path);
}

static int w_conv_strides_zero(const char *path)
{
	Onnx__NodeProto *n;
	mb *b = conv_model("1,1,4,4", "1,1,3,3", 9, &n);
	mb_attr_ints(b, n, "strides", (const int64_t[]){0, 0}, 2);
	return write_model(b, path);
}

static int w_conv_dilations_zero(const char *path)
{
	Onnx__NodeProto *n;
	mb *b = conv_model("1,1,4,4", "1,1,3,3", 9, &n);
	mb_attr_ints(b, n, "dilations", (const int64_t[]){1, 0}, 2);
	return write_model(b, path);
}

static int w_conv_group_zero(const char *path)
{
	Onnx__NodeProto *n;
	mb *b = conv_model("1,1,4,4", "1,1,3,3", 9, &n);
	mb_attr_int(b, n, "group", 0);
	return write_model(b, path);
}

static int w_conv_pads_huge(const char *path)
{
	Onnx__NodeProto *n;
	mb *b = conv_model("1,1,4,4", "1,1,3,3", 9, &n);
	mb_attr_ints(b, n, "pads",
	             (const int64_t[]){INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX}, 4);
	return write_model(b, path);
}

static int w_maxpool_kernel_zero(const char *path)
{
	Onnx__NodeProto *n;
	mb *b = one_node("MaxPool", "1,1,4,4", &n);
	mb_attr_ints(b, n, "kernel_shape", (const int64_t[]){0, 2}, 2);
	return write_model(b, path);
}

static int w_avgpool_strides_zero(const char *path)
{
	Onnx__NodeProto *n;
	mb *b = one_node("AveragePool", "1,1,4,4", &n);
	mb_attr_ints(b, n, "kernel_shape", (const int64_t[]){2, 2}, 2);
	mb_attr_ints(b, n, "strides", (const int64_t[]){0, 0}, 2);
	return write_model(b, path);
}

static int w_negative_dim_input(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "1,-3");
	mb_output(b, mb_main(b), "x");
	return write_model(b, path);
}

/* A zero dim makes the element count 0, but the other dims' product
 * (every stride) still overflows int64. */
static int w_zero_dim_hides_overflow(const char *path)
{
	mb *b = mb_new(13);
	mb_initializer(b, mb_main(b), mb_tensor(b, "W", MC_FLOAT,
	                                        "0,4611686018427387904,4611686018427387904"));
	mb_node(b, mb_main(b), "Relu", "r", "W", "y");
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

static int w_zero_dim_hides_overflow_input(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "0,4611686018427387904,4611686018427387904");
	mb_node(b, mb_main(b), "Relu", "r", "x", "y");
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

/* 2^61 doubles: the element count fits in int64, the bytes (2^64) not. */
static int w_double_2p61(const char *path)
{
	mb *b = mb_new(13);
	mb_initializer(b, mb_main(b), mb_tensor(b, "D", MC_DOUBLE, "2305843009213693952"));
	mb_output(b, mb_main(b), "D");
	return write_model(b, path);
}

/* ---- external data: symbolic links, offsets, odd files ---- */
static int write_symlink(const char *path, const char *name, const char *target)
{
	char link[4200];
	snprintf(link, sizeof link, "%s", path);
	char *slash = strrchr(link, '/');
	snprintf(slash ? slash + 1 : link, sizeof link - (size_t)(slash ? slash + 1 - link : 0),
	         "%s", name);
	unlink(link);
	return symlink(target, link);
}

static int w_external_symlink_up(const char *path)
{
	if (write_companion(path, true, "secret.bin", ext16, sizeof ext16) ||
	    write_symlink(path, "up.bin", "../secret.bin"))
		return -1;
	return write_external(path, "up.bin", NULL, NULL);
}

static int w_external_symlink_absolute(const char *path)
{
	if (write_symlink(path, "passwd.bin", "/etc/passwd"))
		return -1;
	return write_external(path, "passwd.bin", NULL, NULL);
}

static int w_external_symlink_dir(const char *path)
{
	if (write_companion(path, true, "secret.bin", ext16, sizeof ext16) ||
	    write_symlink(path, "updir", ".."))
		return -1;
	return write_external(path, "updir/secret.bin", NULL, NULL);
}

static int w_external_past_end(const char *path)
{
	if (write_companion(path, false, "w.bin", ext16, sizeof ext16))
		return -1;
	return write_external(path, "w.bin", "8", "16");
}

static int w_external_offset_int64_max(const char *path)
{
	if (write_companion(path, false, "w.bin", ext16, sizeof ext16))
		return -1;
	return write_external(path, "w.bin", "9223372036854775807", NULL);
}

static int w_external_offset_negative(const char *path)
{
	if (write_companion(path, false, "w.bin", ext16, sizeof ext16))
		return -1;
	return write_external(path, "w.bin", "-16", NULL);
}

static int w_external_missing_file(const char *path)
{
	return write_external(path, "missing.bin", NULL, NULL);
}

static int w_external_backslash(const char *path)
{
	return write_external(path, "..\\secret.bin", NULL, NULL);
}

static int w_external_no_location(const char *path)
{
	mb *b = mb_new(13);
	Onnx__TensorProto *t = mb_tensor(b, "W", MC_FLOAT, "4");
	mb_external(b, t, "offset", "0");
	mb_initializer(b, mb_main(b), t);
	mb_output(b, mb_main(b), "W");
	return write_model(b, path);
}

static int w_external_fifo(const char *path)
{
	char fifo[4200];
	snprintf(fifo, sizeof fifo, "%s.fifo", path);
	unlink(fifo);
	if (mkfifo(fifo, 0600))
		return -1;
	const char *base = strrchr(fifo, '/');
	return write_external(path, base ? base + 1 : fifo, NULL, NULL);
}

/* ---- names ---- */
static int w_duplicate_node_output(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "4");
	mb_node(b, mb_main(b), "Relu", "first", "x", "y");
	mb_node(b, mb_main(b), "Neg", "second", "x", "y");
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

static int w_node_output_is_input(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "4");
	mb_node(b, mb_main(b), "Relu", "r", "x", "x");
	mb_output(b, mb_main(b), "x");
	return write_model(b, path);
}

static int w_node_output_is_initializer(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "4");
	mb_init_floats(b, mb_main(b), "W", "4", (const float[]){1, 2, 3, 4}, 4);
	mb_node(b, mb_main(b), "Relu", "r", "x", "W");
	mb_output(b, mb_main(b), "W");
	return write_model(b, path);
}

static int w_duplicate_initializer(const char *path)
{
	mb *b = mb_new(13);
	mb_init_floats(b, mb_main(b), "W", "1", (const float[]){1}, 1);
	mb_init_floats(b, mb_main(b), "W", "1", (const float[]){2}, 1);
	mb_output(b, mb_main(b), "W");
	return write_model(b, path);
}

static int w_duplicate_input(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "4");
	mb_input(b, mb_main(b), "x", MC_FLOAT, "4");
	mb_output(b, mb_main(b), "x");
	return write_model(b, path);
}

static int w_node_input_unproduced(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "4");
	mb_node(b, mb_main(b), "Add", "add", "x,ghost", "y");
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

static int w_graph_output_unproduced(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "4");
	mb_node(b, mb_main(b), "Relu", "r", "x", "y");
	mb_output(b, mb_main(b), "y");
	mb_output(b, mb_main(b), "z");
	return write_model(b, path);
}

static int w_branch_output_unproduced(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "cond", MC_BOOL, "");
	Onnx__GraphProto *t = mb_graph(b, "then"), *e = mb_graph(b, "else");
	mb_init_floats(b, t, "a", "1", (const float[]){1}, 1);
	mb_output(b, t, "a");
	mb_output(b, e, "nowhere");
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "If", "pick", "cond", "y");
	mb_attr_graph(b, n, "then_branch", t);
	mb_attr_graph(b, n, "else_branch", e);
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

static int w_self_loop(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "4");
	mb_node(b, mb_main(b), "Add", "self", "x,y", "y");
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

/* ---- attributes ---- */
static int w_conv_strides_float(const char *path)
{
	Onnx__NodeProto *n;
	mb *b = conv_model("1,1,4,4", "1,1,3,3", 9, &n);
	mb_attr_float(b, n, "strides", 2.0f);
	return write_model(b, path);
}

static int w_softmax_axis_string(const char *path)
{
	Onnx__NodeProto *n;
	mb *b = one_node("Softmax", "2,4", &n);
	mb_attr_string(b, n, "axis", "1");
	return write_model(b, path);
}

static int w_conv_pads_string(const char *path)
{
	Onnx__NodeProto *n;
	mb *b = conv_model("1,1,4,4", "1,1,3,3", 9, &n);
	mb_attr_string(b, n, "auto_pad", "SAME_SIDEWAYS");
	return write_model(b, path);
}

static int w_attr_type_undefined(const char *path)
{
	Onnx__NodeProto *n;
	mb *b = one_node("Softmax", "2,4", &n);
	mb_attr_int(b, n, "axis", 1);
	n->attribute[0]->type = 0;
	return write_model(b, path);
}

static int w_attr_duplicate(const char *path)
{
	Onnx__NodeProto *n;
	mb *b = one_node("Softmax", "2,4", &n);
	mb_attr_int(b, n, "axis", 1);
	mb_attr_int(b, n, "axis", 0);
	return write_model(b, path);
}

static int w_if_branch_is_int(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "cond", MC_BOOL, "");
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "If", "pick", "cond", "y");
	mb_attr_int(b, n, "then_branch", 1);
	mb_attr_int(b, n, "else_branch", 0);
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

static int w_loop_body_is_string(const char *path)
{
	mb *b = mb_new(13);
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "Loop", "loop", ",", "");
	mb_attr_string(b, n, "body", "while (1);");
	return write_model(b, path);
}

/* ---- opsets and domains ---- */
static int w_scan_opset7(const char *path)
{
	mb *b = mb_new(7);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "4");
	mb_node(b, mb_main(b), "Scan", "scan", "x", "y");
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

static int w_gelu_before_opset20(const char *path)
{
	Onnx__NodeProto *n;
	return write_model(one_node("Gelu", "4", &n), path);
}

static int w_unknown_op(const char *path)
{
	Onnx__NodeProto *n;
	return write_model(one_node("FrobnicateTensor", "4", &n), path);
}

static int w_custom_domain(const char *path)
{
	Onnx__NodeProto *n;
	mb *b = one_node("Relu", "4", &n);
	mb_opset_import(b, "com.example", 1);
	mb_node_domain(b, n, "com.example");
	return write_model(b, path);
}

static int w_ml_domain(const char *path)
{
	Onnx__NodeProto *n;
	mb *b = one_node("Normalizer", "1,4", &n);
	mb_opset_import(b, "ai.onnx.ml", 3);
	mb_node_domain(b, n, "ai.onnx.ml");
	return write_model(b, path);
}

static int w_opset_zero(const char *path)
{
	mb *b = mb_new(0);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "4");
	mb_output(b, mb_main(b), "x");
	return write_model(b, path);
}

static int w_only_custom_opset(const char *path)
{
	mb *b = mb_new(13);
	mb_model(b)->opset_import[0]->domain = "com.example";
	mb_input(b, mb_main(b), "x", MC_FLOAT, "4");
	mb_output(b, mb_main(b), "x");
	return write_model(b, path);
}

/* ---- shapes that cannot be ---- */
static int write_reshape(const char *path, const int64_t *shape, size_t n, const char *xshape)
{
	mb *b = mb_new(13);
	char dims[32];
	snprintf(dims, sizeof dims, "%zu", n);
	mb_input(b, mb_main(b), "x", MC_FLOAT, xshape);
	mb_init_ints(b, mb_main(b), "shape", MC_INT64, dims, shape, n);
	mb_node(b, mb_main(b), "Reshape", "reshape", "x,shape", "y");
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

static int w_reshape_product(const char *path)
{
	return write_reshape(path, (const int64_t[]){5, 5}, 2, "2,12");
}

static int w_reshape_two_minus_one(const char *path)
{
	return write_reshape(path, (const int64_t[]){-1, -1}, 2, "2,12");
}

static int w_reshape_minus_one_indivisible(const char *path)
{
	return write_reshape(path, (const int64_t[]){-1, 5}, 2, "2,12");
}

static int w_reshape_minus_two(const char *path)
{
	return write_reshape(path, (const int64_t[]){-2, 12}, 2, "2,12");
}

static int w_reshape_zero_past_rank(const char *path)
{
	return write_reshape(path, (const int64_t[]){24, 1, 0}, 3, "2,12");
}

/* With allowzero a 0 is a zero-size dim, and -1 next to it is any size. */
static int w_reshape_minus_one_and_zero(const char *path)
{
	mb *b = mb_new(14);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "0,4");
	mb_init_ints(b, mb_main(b), "shape", MC_INT64, "2", (const int64_t[]){-1, 0}, 2);
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "Reshape", "reshape", "x,shape", "y");
	mb_attr_int(b, n, "allowzero", 1);
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

static int w_reshape_overflow(const char *path)
{
	return write_reshape(path, (const int64_t[]){4294967296, 4294967296, 4294967296}, 3, "2,12");
}

/* Gather on constants: folded while compiling. */
static int write_gather_const(const char *path, int64_t index)
{
	mb *b = mb_new(13);
	mb_init_floats(b, mb_main(b), "data", "3", (const float[]){1, 2, 3}, 3);
	mb_init_ints(b, mb_main(b), "idx", MC_INT64, "1", (const int64_t[]){index}, 1);
	mb_node(b, mb_main(b), "Gather", "gather", "data,idx", "y");
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

/* Indices made by ConstantOfShape, 2.4 MB: too large for inference to
 * fold, folded by the freezing passes, which `modelc compile` runs. */
static int w_gather_folded_oob(const char *path)
{
	mb *b = mb_new(13);
	mb_init_floats(b, mb_main(b), "data", "3", (const float[]){1, 2, 3}, 3);
	mb_init_ints(b, mb_main(b), "count", MC_INT64, "1", (const int64_t[]){300000}, 1);
	Onnx__NodeProto *fill = mb_node(b, mb_main(b), "ConstantOfShape", "fill", "count", "idx");
	Onnx__TensorProto *five = mb_tensor(b, "five", MC_INT64, "1");
	mb_int64_data(b, five, (const int64_t[]){5}, 1);
	mb_attr_tensor(b, fill, "value", five);
	mb_node(b, mb_main(b), "Gather", "gather", "data,idx", "y");
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

/* Twelve live tensors of 2^61 bytes each: the arena overflows 64 bits. */
static int w_arena_overflow(const char *path)
{
	static const char *ops[] = {"Softmax", "LogSoftmax", "Hardmax"};
	static const int64_t axes[] = {0, 1, -1, -2};
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "1073741824,536870912");
	char inputs[256] = "";
	for (int i = 0; i < 12; i++) {
		char name[16];
		snprintf(name, sizeof name, "y%d", i);
		Onnx__NodeProto *n = mb_node(b, mb_main(b), ops[i % 3], name, "x", name);
		mb_attr_int(b, n, "axis", axes[i / 3]);
		snprintf(inputs + strlen(inputs), sizeof inputs - strlen(inputs), "%s%s", i ? "," : "",
		         name);
	}
	mb_node(b, mb_main(b), "Sum", "sum", inputs, "z");
	mb_output(b, mb_main(b), "z");
	return write_model(b, path);
}

static int w_gather_const_oob(const char *path) { return write_gather_const(path, 5); }
static int w_gather_const_negative(const char *path) { return write_gather_const(path, -4); }
static int w_gather_const_int64_min(const char *path)
{
	return write_gather_const(path, INT64_MIN);
}

/* The shape subgraph Shape -> Gather -> Reshape, with the Gather out of
 * range: found while folding the shape. */
static int w_shape_gather_oob(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "2,3");
	mb_node(b, mb_main(b), "Shape", "shape", "x", "s");
	mb_init_ints(b, mb_main(b), "idx", MC_INT64, "1", (const int64_t[]){2}, 1);
	mb_node(b, mb_main(b), "Gather", "pick_dim", "s,idx", "d");
	mb_node(b, mb_main(b), "Reshape", "reshape", "x,d", "y");
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

static int write_tile(const char *path, int64_t repeat)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "4,4");
	mb_init_ints(b, mb_main(b), "rep", MC_INT64, "2", (const int64_t[]){repeat, repeat}, 2);
	mb_node(b, mb_main(b), "Tile", "tile", "x,rep", "y");
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

static int w_tile_overflow(const char *path) { return write_tile(path, INT64_MAX / 2); }

static int w_expand_overflow(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "1");
	mb_init_ints(b, mb_main(b), "shape", MC_INT64, "3",
	             (const int64_t[]){4294967296, 4294967296, 4294967296}, 3);
	mb_node(b, mb_main(b), "Expand", "expand", "x,shape", "y");
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

static int w_constant_of_shape_huge(const char *path)
{
	mb *b = mb_new(13);
	mb_init_ints(b, mb_main(b), "shape", MC_INT64, "2",
	             (const int64_t[]){4611686018427387904, 4611686018427387904}, 2);
	mb_node(b, mb_main(b), "ConstantOfShape", "fill", "shape", "y");
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

static int w_range_huge(const char *path)
{
	mb *b = mb_new(13);
	Onnx__TensorProto *start = mb_tensor(b, "start", MC_INT64, "");
	mb_int64_data(b, start, (const int64_t[]){INT64_MIN}, 1);
	mb_initializer(b, mb_main(b), start);
	Onnx__TensorProto *limit = mb_tensor(b, "limit", MC_INT64, "");
	mb_int64_data(b, limit, (const int64_t[]){INT64_MAX}, 1);
	mb_initializer(b, mb_main(b), limit);
	Onnx__TensorProto *delta = mb_tensor(b, "delta", MC_INT64, "");
	mb_int64_data(b, delta, (const int64_t[]){1}, 1);
	mb_initializer(b, mb_main(b), delta);
	mb_node(b, mb_main(b), "Range", "range", "start,limit,delta", "y");
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

static int w_pad_huge(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "4");
	mb_init_ints(b, mb_main(b), "pads", MC_INT64, "2",
	             (const int64_t[]){INT64_MAX, INT64_MAX}, 2);
	mb_node(b, mb_main(b), "Pad", "pad", "x,pads", "y");
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

/* 16 x 2^59: the concatenated axis overflows int64, the inputs are empty. */
static int w_concat_overflow(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "0,576460752303423488");
	mb_node(b, mb_main(b), "Concat", "cat", "x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x", "y");
	mb_attr_int(b, mb_main(b)->node[0], "axis", 1);
	mb_output(b, mb_main(b), "y");
	return write_model(b, path);
}

/* ---- counts: nodes, attributes, dims ---- */
/* A graph `name` of `count` Relu nodes in a chain from "x", its arrays
 * filled here (the builder's appends copy the array each time); freed
 * with free_chain_graph before the builder. */
static Onnx__GraphProto *relu_chain_graph(mb *b, const char *name, int count,
                                          Onnx__NodeProto **nodes, char ***io)
{
	Onnx__GraphProto *g = mb_graph(b, name);
	Onnx__NodeProto **list = calloc((size_t)count, sizeof *list);
	*nodes = calloc((size_t)count, sizeof **nodes);
	*io = calloc(2 * (size_t)count, sizeof **io);
	for (int i = 0; i < count; i++) {
		char in[32], out[32];
		snprintf(in, sizeof in, i ? "%s_%d" : "x", name, i);
		snprintf(out, sizeof out, "%s_%d", name, i + 1);
		(*nodes)[i] = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
		(*nodes)[i].op_type = "Relu";
		(*io)[2 * i] = strdup(in);
		(*io)[2 * i + 1] = strdup(out);
		(*nodes)[i].n_input = (*nodes)[i].n_output = 1;
		(*nodes)[i].input = &(*io)[2 * i];
		(*nodes)[i].output = &(*io)[2 * i + 1];
		list[i] = &(*nodes)[i];
	}
	g->n_node = (size_t)count;
	g->node = list;
	char last[32];
	snprintf(last, sizeof last, "%s_%d", name, count);
	mb_output(b, g, last);
	return g;
}

static void free_chain_graph(Onnx__GraphProto *g, Onnx__NodeProto *nodes, char **io)
{
	for (size_t i = 0; i < 2 * g->n_node; i++)
		free(io[i]);
	free(io);
	free(nodes);
	free(g->node);
	g->n_node = 0;
	g->node = NULL;
}

/* x -> Relu -> Relu -> ...: one node over the limit, in the main graph. */
static int w_node_chain_over_limit(const char *path)
{
	mb *b = mb_new(13);
	Onnx__NodeProto *nodes;
	char **io;
	Onnx__GraphProto *g = relu_chain_graph(b, "main", MC_MAX_NODES + 1, &nodes, &io);
	mb_input(b, g, "x", MC_FLOAT, "4");
	mb_model(b)->graph = g;
	int rc = mb_write(b, path);
	free_chain_graph(g, nodes, io);
	mb_free(b);
	return rc;
}

/* Within the limit in each graph, over it together: the main graph and
 * two If branches of half the limit each. */
static int w_nodes_over_limit_in_branches(const char *path)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "4");
	mb_input(b, g, "cond", MC_BOOL, "");
	Onnx__NodeProto *tn, *en;
	char **tio, **eio;
	int half = MC_MAX_NODES / 2;
	Onnx__GraphProto *t = relu_chain_graph(b, "then", half, &tn, &tio);
	Onnx__GraphProto *e = relu_chain_graph(b, "else", half, &en, &eio);
	Onnx__NodeProto *n = mb_node(b, g, "If", "pick", "cond", "y");
	mb_attr_graph(b, n, "then_branch", t);
	mb_attr_graph(b, n, "else_branch", e);
	mb_output(b, g, "y");
	int rc = mb_write(b, path);
	free_chain_graph(t, tn, tio);
	free_chain_graph(e, en, eio);
	mb_free(b);
	return rc;
}

#define MANY 100000

static int w_attr_ints_100k(const char *path)
{
	Onnx__NodeProto *n;
	mb *b = conv_model("1,1,4,4", "1,1,3,3", 9, &n);
	int64_t *v = calloc(MANY, sizeof *v);
	mb_attr_ints(b, n, "pads", v, MANY);
	free(v);
	return write_model(b, path);
}

static int w_attrs_100k(const char *path)
{
	Onnx__NodeProto *n;
	mb *b = one_node("Relu", "4", &n);
	Onnx__AttributeProto *attrs = calloc(MANY, sizeof *attrs);
	Onnx__AttributeProto **list = calloc(MANY, sizeof *list);
	char (*names)[16] = calloc(MANY, sizeof *names);
	for (int i = 0; i < MANY; i++) {
		attrs[i] = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
		snprintf(names[i], sizeof names[i], "a%d", i);
		attrs[i].name = names[i];
		attrs[i].has_type = 1;
		attrs[i].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
		attrs[i].has_i = 1;
		list[i] = &attrs[i];
	}
	n->n_attribute = MANY;
	n->attribute = list;
	int rc = mb_write(b, path);
	n->n_attribute = 0;
	n->attribute = NULL;
	mb_free(b);
	free(attrs);
	free(list);
	free(names);
	return rc;
}

static int w_transpose_perm_100k(const char *path)
{
	Onnx__NodeProto *n;
	mb *b = one_node("Transpose", "2,3", &n);
	int64_t *v = calloc(MANY, sizeof *v);
	for (int i = 0; i < MANY; i++)
		v[i] = i;
	mb_attr_ints(b, n, "perm", v, MANY);
	free(v);
	return write_model(b, path);
}

static int w_tensor_dims_100k(const char *path)
{
	mb *b = mb_new(13);
	Onnx__TensorProto *t = mb_tensor(b, "W", MC_FLOAT, "1");
	int64_t *dims = calloc(MANY, sizeof *dims);
	for (int i = 0; i < MANY; i++)
		dims[i] = 1;
	t->dims = dims;
	t->n_dims = MANY;
	mb_raw(b, t, (const float[]){1}, 4);
	mb_initializer(b, mb_main(b), t);
	mb_output(b, mb_main(b), "W");
	int rc = mb_write(b, path);
	t->n_dims = 0;
	t->dims = NULL;
	free(dims);
	mb_free(b);
	return rc;
}

static int w_node_inputs_5000(const char *path)
{
	mb *b = mb_new(13);
	mb_input(b, mb_main(b), "x", MC_FLOAT, "1");
	Onnx__NodeProto *n = mb_node(b, mb_main(b), "Sum", "sum", "x", "y");
	char **in = calloc(5000, sizeof *in);
	for (int i = 0; i < 5000; i++)
		in[i] = "x";
	n->input = in;
	n->n_input = 5000;
	mb_output(b, mb_main(b), "y");
	int rc = mb_write(b, path);
	n->n_input = 0;
	n->input = NULL;
	free(in);
	mb_free(b);
	return rc;
}

/* ---- loop bombs ---- */
/* Loop(M, true, v) whose body passes v through: with M constant and v
 * constant, evaluation would happen while compiling. `inner` nests a
 * second such loop inside the body. */
static Onnx__GraphProto *pass_through_body(mb *b, const char *tag, int64_t inner_trip)
{
	char name[64];
	snprintf(name, sizeof name, "body_%s", tag);
	Onnx__GraphProto *body = mb_graph(b, name);
	char i_name[64], c_name[64], v_name[64], c_out[64], v_out[64];
	snprintf(i_name, sizeof i_name, "i_%s", tag);
	snprintf(c_name, sizeof c_name, "c_%s", tag);
	snprintf(v_name, sizeof v_name, "v_%s", tag);
	snprintf(c_out, sizeof c_out, "c_out_%s", tag);
	snprintf(v_out, sizeof v_out, "v_out_%s", tag);
	mb_input(b, body, i_name, MC_INT64, "");
	mb_input(b, body, c_name, MC_BOOL, "");
	mb_input(b, body, v_name, MC_FLOAT, "1");
	mb_node(b, body, "Identity", NULL, c_name, c_out);
	if (inner_trip) {
		char m_name[64];
		snprintf(m_name, sizeof m_name, "m_%s", tag);
		Onnx__TensorProto *m = mb_tensor(b, m_name, MC_INT64, "");
		mb_int64_data(b, m, (const int64_t[]){inner_trip}, 1);
		mb_initializer(b, body, m);
		char inputs[256];
		snprintf(inputs, sizeof inputs, "%s,%s,%s", m_name, c_name, v_name);
		Onnx__NodeProto *loop = mb_node(b, body, "Loop", "inner", inputs, v_out);
		mb_attr_graph(b, loop, "body", pass_through_body(b, "inner", 0));
	} else {
		mb_node(b, body, "Identity", NULL, v_name, v_out);
	}
	mb_output(b, body, c_out);
	mb_output(b, body, v_out);
	return body;
}

static int write_loop(const char *path, int64_t trip, int64_t inner_trip)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	Onnx__TensorProto *m = mb_tensor(b, "M", MC_INT64, "");
	mb_int64_data(b, m, (const int64_t[]){trip}, 1);
	mb_initializer(b, g, m);
	mb_const_bool(b, g, "go", true);
	mb_init_floats(b, g, "v0", "1", (const float[]){1}, 1);
	Onnx__NodeProto *loop = mb_node(b, g, "Loop", "outer", "M,go,v0", "v");
	mb_attr_graph(b, loop, "body", pass_through_body(b, "outer", inner_trip));
	mb_output(b, g, "v");
	return write_model(b, path);
}

/* Scan over a constant of 2^21 empty slices: no data in the file, but
 * folding would run the body 2^21 times. Inference leaves such work to
 * the freezing passes, which refuse it (compile only). */
static int w_scan_bomb(const char *path)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_initializer(b, g, mb_tensor(b, "seq", MC_FLOAT, "2097152,0"));
	mb_init_floats(b, g, "s0", "1", (const float[]){0}, 1);
	Onnx__GraphProto *body = mb_graph(b, "scan_body");
	mb_input(b, body, "s_in", MC_FLOAT, "1");
	mb_input(b, body, "x_in", MC_FLOAT, "0");
	mb_node(b, body, "Identity", NULL, "s_in", "s_out");
	mb_output(b, body, "s_out");
	Onnx__NodeProto *scan = mb_node(b, g, "Scan", "scan", "s0,seq", "s");
	mb_attr_graph(b, scan, "body", body);
	mb_attr_int(b, scan, "num_scan_inputs", 1);
	mb_output(b, g, "s");
	return write_model(b, path);
}

static int w_loop_trip_huge(const char *path) { return write_loop(path, INT64_MAX, 0); }
static int w_loop_nested_bomb(const char *path) { return write_loop(path, 1000000, 1000000); }

#define MALFORMED "not a valid ONNX model: the protobuf data is truncated or malformed"
/* MC_MAX_PB_DEPTH of import.c */
#define NESTED "not a valid ONNX model: messages are nested more than 144 deep"
#define FOREIGN(field)                                                                         \
	"not an ONNX model: the file holds a protobuf message of another type (its field " field  \
	" does not fit a ModelProto)"
/* WIN_LIMIT of libcore/ops/nn.c */
#define OUT_OF_WINDOW(min) "is out of range [" min ", 2147483648)"
/* FOLD_MAX_ITERS of libcore/ops/loop.c */
#define FOLD_REFUSED                                                                           \
	"its inputs are all compile-time constants but it runs more than 1048576 iterations "   \
	"(nested loops included); refusing to evaluate it while compiling"

/* ---- quantization scales ----
 * QuantizeLinear and DequantizeLinear with a constant scale that is not a
 * finite positive number: the quantize pass (freezing/quantize.c) refuses
 * the model, naming the node (modelc inspect runs the pass on QDQ models
 * and refuses them too). */
static int write_bad_scale(const char *path, bool on_q, float scale)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "2,4");
	mb_init_floats(b, g, "good", "", (const float[]){0.02f}, 1);
	mb_init_floats(b, g, "bad", "", &scale, 1);
	mb_init_ints(b, g, "zp", MC_INT8, "", (const int64_t[]){0}, 1);
	mb_node(b, g, "QuantizeLinear", "q", on_q ? "x,bad,zp" : "x,good,zp", "xq");
	mb_node(b, g, "DequantizeLinear", "dq", on_q ? "xq,good,zp" : "xq,bad,zp", "y");
	mb_output(b, g, "y");
	return write_model(b, path);
}

static int w_quantize_scale_zero(const char *path) { return write_bad_scale(path, true, 0.0f); }
static int w_quantize_scale_nan(const char *path) { return write_bad_scale(path, true, NAN); }
static int w_dequantize_scale_negative(const char *path)
{
	return write_bad_scale(path, false, -1.0f);
}

/* Per-channel int8 weights of a MatMul, one channel's scale infinite. */
static int w_dequantize_weight_scale_inf(const char *path)
{
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "x", MC_FLOAT, "2,4");
	mb_init_floats(b, g, "s", "", (const float[]){0.02f}, 1);
	mb_init_ints(b, g, "W", MC_INT8, "4,3", (const int64_t[]){1, -2, 3, 4, -5, 6, 7, 8, -9, 10, 11, -12}, 12);
	mb_init_floats(b, g, "ws", "3", (const float[]){0.01f, INFINITY, 0.01f}, 3);
	mb_node(b, g, "QuantizeLinear", "q", "x,s", "xq");
	mb_node(b, g, "DequantizeLinear", "dq", "xq,s", "xd");
	Onnx__NodeProto *n = mb_node(b, g, "DequantizeLinear", "dq_w", "W,ws", "w");
	mb_attr_int(b, n, "axis", 1);
	mb_node(b, g, "MatMul", "mm", "xd,w", "m");
	mb_node(b, g, "QuantizeLinear", "q_out", "m,s", "mq");
	mb_node(b, g, "DequantizeLinear", "dq_out", "mq,s", "y");
	mb_output(b, g, "y");
	return write_model(b, path);
}

const hostile_case hostile_cases[] = {
	/* damaged files */
	{"empty.onnx", "the model file is empty", EXACT, w_empty},
	{"truncated_half.onnx", MALFORMED, EXACT, w_truncated_half},
	{"truncated_last_byte.onnx", MALFORMED, EXACT, w_truncated_last_byte},
	{"random_4k.onnx", MALFORMED, EXACT, w_random_4k},
	{"random_17.onnx", MALFORMED, EXACT, w_random_17},
	{"text_format.onnx", MALFORMED, EXACT, w_text},

	/* absurd sizes */
	{"dim_2p62_initializer.onnx",
	 "tensor 'W': shape 4611686018427387904 is too large", EXACT, w_dim_2p62_initializer},
	{"dim_2p62_input.onnx",
	 "input 'x': shape 1x4611686018427387904 is too large", EXACT, w_dim_2p62_input},
	{"dims_overflow_initializer.onnx",
	 "tensor 'W': shape 4294967296x4294967296x4294967296 is too large",
	 EXACT, w_dims_overflow_initializer},
	{"huge_initializer_no_data.onnx",
	 "tensor 'W': raw_data has 4 bytes but its shape needs 549755813888",
	 EXACT, w_huge_initializer_no_data},
	{"rank9_input.onnx",
	 "input 'x': rank 9 exceeds the supported maximum " STR(MC_MAX_RANK), EXACT, w_rank9_input},
	{"negative_dim_initializer.onnx",
	 "tensor 'W': dimension 0 is negative (-1)", EXACT, w_negative_dim_initializer},
	{"count_mismatch_int64.onnx",
	 "tensor 'I': int64_data holds 3 values but its shape needs 9",
	 EXACT, w_count_mismatch_int64},
	{"raw_size_int4.onnx",
	 "tensor 'Q': raw_data has 4 bytes but its shape needs 3", EXACT, w_raw_size_int4},
	{"count_mismatch.onnx",
	 "tensor 'W': float_data holds 1 values but its shape needs 1000000",
	 EXACT, w_count_mismatch},

	/* external data */
	{"external_huge_dims.onnx",
	 "tensor 'W': external data offset 0 + 549755813888 bytes is past the end of 'w.bin' "
	 "(16 bytes)", EXACT, w_external_huge_dims},
	{"external_dotdot.onnx",
	 "tensor 'W': external data location '../secret.bin' leaves the model's directory",
	 EXACT, w_external_dotdot},
	{"external_absolute.onnx",
	 "tensor 'W': external data location '/etc/passwd' leaves the model's directory",
	 EXACT, w_external_absolute},
	{"external_dir_itself.onnx",
	 "tensor 'W': external data location '.' is not a file", EXACT, w_external_dir_itself},
	{"external_offset_overflow.onnx",
	 "tensor 'W': external data offset '18446744073709551616' is not a non-negative integer",
	 EXACT, w_external_offset_overflow},
	{"external_huge_length.onnx",
	 "tensor 'W': external data length 9223372036854775807 does not match its shape (16 bytes)",
	 EXACT, w_external_huge_length},

	/* structure */
	{"opset_huge.onnx",
	 "the model imports opset 1000000000000 of the default domain; modelc knows opsets up to "
	 STR(MC_MAX_OPSET), EXACT, w_opset_huge},
	{"ir_version_negative.onnx",
	 "unsupported ONNX IR version -1", EXACT, w_ir_version_negative},
	{"long_node_name.onnx",
	 "AAAA: input 'nope' is not produced by any node, initializer or graph input",
	 PART, w_long_node_name},
	{"forged_error_line.onnx",
	 "node 'a modelc: error: forged' (If, opset 13): input 'nope' is not produced by any "
	 "node, initializer or graph input", EXACT, w_forged_error_line},
	{"sparse_initializer.onnx",
	 "graph 'main': sparse initializers are not supported", EXACT, w_sparse_initializer},
	{"segment.onnx", "tensor 'W': segmented tensors are not supported", EXACT, w_segment},
	{"functions.onnx",
	 "model-local functions are not supported (1 defined)", EXACT, w_functions},
	{"string_initializer.onnx",
	 "tensor 'S': data type 8 (string) is not supported", EXACT, w_string_initializer},
	{"dtype_999.onnx", "tensor 'W': data type 999 (?) is not supported", EXACT, w_dtype_999},
	{"input_sequence.onnx",
	 "input 'seq': non-tensor inputs (sequence, optional, map) are not supported",
	 EXACT, w_input_sequence},
	{"cycle.onnx",
	 "node 'i1' (If, opset 13): the graph has a cycle through this node", EXACT, w_cycle},
	{"duplicate_output.onnx",
	 "node 'c' (Constant, opset 13): output 'c' is already defined elsewhere in the graph",
	 EXACT, w_duplicate_output},
	{"if_no_branches.onnx",
	 "node 'pick' (If, opset 13): needs graph attributes then_branch and else_branch",
	 EXACT, w_if_no_branches},
	{"if_branch_output_count.onnx",
	 "node 'pick' (If, opset 13): has 1 outputs but its branches produce 2 and 1",
	 EXACT, w_if_branch_output_count},
	{"if_float_condition.onnx",
	 "node 'pick' (If, opset 13): condition must be a single bool, got float32 with 1 elements",
	 EXACT, w_if_float_condition},
	{"if_branches_disagree.onnx",
	 "node 'pick' (If, opset 13): output 0 is float32 3 in then_branch but float32 1x3 in "
	 "else_branch; static shapes need both to agree, or a condition known at compile time "
	 "(--bind)", EXACT, w_if_branches_disagree},
	{"nested_if_40.onnx",
	 "graph 'deep': subgraphs are nested more than " STR(MC_MAX_GRAPH_DEPTH) " deep",
	 EXACT, w_nested_if_40},
	{"nesting_1000.onnx", NESTED, EXACT, w_nesting_1000},
	{"nesting_bomb.onnx", NESTED, EXACT, w_nesting_bomb},

	/* valid protobuf, not a model */
	{"tensorproto_as_model.onnx", FOREIGN("2"), EXACT, w_tensorproto_as_model},
	{"graphproto_as_model.onnx", FOREIGN("1"), EXACT, w_graphproto_as_model},
	{"nodeproto_as_model.onnx", FOREIGN("1"), EXACT, w_nodeproto_as_model},
	{"model_no_graph.onnx", "not an ONNX model: the graph is missing", EXACT, w_model_no_graph},

	/* zero and negative dimensions */
	{"conv_kernel_zero.onnx",
	 "node 'conv' (Conv, opset 13): kernel dim 0 is 0; expected 1 to 2147483647",
	 EXACT, w_conv_kernel_zero},
	{"conv_input_spatial_zero.onnx",
	 "node 'conv' (Conv, opset 13): spatial dim 0 of the input is 0; expected 1 to 2147483647",
	 EXACT, w_conv_input_spatial_zero},
	{"conv_strides_zero.onnx",
	 "node 'conv' (Conv, opset 13): attribute 'strides' value 0 " OUT_OF_WINDOW("1"),
	 EXACT, w_conv_strides_zero},
	{"conv_dilations_zero.onnx",
	 "node 'conv' (Conv, opset 13): attribute 'dilations' value 0 " OUT_OF_WINDOW("1"),
	 EXACT, w_conv_dilations_zero},
	{"conv_group_zero.onnx",
	 "node 'conv' (Conv, opset 13): attribute 'group' is 0; expected a positive count",
	 EXACT, w_conv_group_zero},
	{"conv_pads_huge.onnx",
	 "node 'conv' (Conv, opset 13): attribute 'pads' value 9223372036854775807 "
	 OUT_OF_WINDOW("0"), EXACT, w_conv_pads_huge},
	{"maxpool_kernel_zero.onnx",
	 "node 'n' (MaxPool, opset 13): attribute 'kernel_shape' value 0 " OUT_OF_WINDOW("1"),
	 EXACT, w_maxpool_kernel_zero},
	{"avgpool_strides_zero.onnx",
	 "node 'n' (AveragePool, opset 13): attribute 'strides' value 0 " OUT_OF_WINDOW("1"),
	 EXACT, w_avgpool_strides_zero},
	{"negative_dim_input.onnx",
	 "input 'x': dimension 1 is negative (-3)", EXACT, w_negative_dim_input},
	{"zero_dim_hides_overflow.onnx",
	 "tensor 'W': shape 0x4611686018427387904x4611686018427387904 is too large",
	 EXACT, w_zero_dim_hides_overflow},
	{"zero_dim_hides_overflow_input.onnx",
	 "input 'x': shape 0x4611686018427387904x4611686018427387904 is too large",
	 EXACT, w_zero_dim_hides_overflow_input},
	{"double_2p61.onnx",
	 "tensor 'D': shape 2305843009213693952 is too large", EXACT, w_double_2p61},

	/* more external data */
	{"external_symlink_up.onnx",
	 "tensor 'W': external data location 'up.bin' leaves the model's directory (through a "
	 "symbolic link)", EXACT, w_external_symlink_up},
	{"external_symlink_absolute.onnx",
	 "tensor 'W': external data location 'passwd.bin' leaves the model's directory (through "
	 "a symbolic link)", EXACT, w_external_symlink_absolute},
	{"external_symlink_dir.onnx",
	 "tensor 'W': external data location 'updir/secret.bin' leaves the model's directory "
	 "(through a symbolic link)", EXACT, w_external_symlink_dir},
	{"external_past_end.onnx",
	 "tensor 'W': external data offset 8 + 16 bytes is past the end of 'w.bin' (16 bytes)",
	 EXACT, w_external_past_end},
	{"external_offset_int64_max.onnx",
	 "tensor 'W': external data offset 9223372036854775807 + 16 bytes is past the end of "
	 "'w.bin' (16 bytes)", EXACT, w_external_offset_int64_max},
	{"external_offset_negative.onnx",
	 "tensor 'W': external data offset '-16' is not a non-negative integer",
	 EXACT, w_external_offset_negative},
	{"external_missing_file.onnx",
	 "tensor 'W': cannot open external data '{dir}/missing.bin': No such file or directory",
	 EXACT, w_external_missing_file},
	{"external_backslash.onnx",
	 "tensor 'W': external data location '..\\secret.bin' leaves the model's directory",
	 EXACT, w_external_backslash},
	{"external_no_location.onnx",
	 "tensor 'W': external data has no location", EXACT, w_external_no_location},
	{"external_fifo.onnx",
	 "tensor 'W': cannot read external data '{dir}/external_fifo.onnx.fifo': not a regular "
	 "file", EXACT, w_external_fifo},

	/* names */
	{"duplicate_node_output.onnx",
	 "node 'second' (Neg, opset 13): output 'y' is already defined elsewhere in the graph",
	 EXACT, w_duplicate_node_output},
	{"node_output_is_input.onnx",
	 "node 'r' (Relu, opset 13): output 'x' is already defined elsewhere in the graph",
	 EXACT, w_node_output_is_input},
	{"node_output_is_initializer.onnx",
	 "node 'r' (Relu, opset 13): output 'W' is already defined elsewhere in the graph",
	 EXACT, w_node_output_is_initializer},
	{"duplicate_initializer.onnx",
	 "initializer 'W' is defined twice", EXACT, w_duplicate_initializer},
	{"duplicate_input.onnx", "graph input 'x' is declared twice", EXACT, w_duplicate_input},
	{"node_input_unproduced.onnx",
	 "node 'add' (Add, opset 13): input 'ghost' is not produced by any node, initializer or "
	 "graph input", EXACT, w_node_input_unproduced},
	{"graph_output_unproduced.onnx",
	 "graph output 'z' is never produced", EXACT, w_graph_output_unproduced},
	{"branch_output_unproduced.onnx",
	 "graph output 'nowhere' is never produced", EXACT, w_branch_output_unproduced},
	{"self_loop.onnx", "node 'self' (Add, opset 13): the graph has a cycle through this node",
	 EXACT, w_self_loop},

	/* attributes */
	{"conv_strides_float.onnx",
	 "node 'conv' (Conv, opset 13): attribute 'strides' has type float, expected ints",
	 EXACT, w_conv_strides_float},
	{"softmax_axis_string.onnx",
	 "node 'n' (Softmax, opset 13): attribute 'axis' has type string, expected int",
	 EXACT, w_softmax_axis_string},
	{"conv_pads_string.onnx",
	 "node 'conv' (Conv, opset 13): attribute 'auto_pad' is 'SAME_SIDEWAYS'; expected "
	 "NOTSET, SAME_UPPER, SAME_LOWER or VALID", EXACT, w_conv_pads_string},
	{"attr_type_undefined.onnx",
	 "node 'n' (Softmax, opset 13): attribute 'axis' has type undefined, expected int",
	 EXACT, w_attr_type_undefined},
	{"attr_duplicate.onnx",
	 "node 'n' (Softmax, opset 13): attribute 'axis' is given twice", EXACT, w_attr_duplicate},
	{"if_branch_is_int.onnx",
	 "node 'pick' (If, opset 13): attribute 'then_branch' has type int, expected graph",
	 EXACT, w_if_branch_is_int},
	{"loop_body_is_string.onnx",
	 "node 'loop' (Loop, opset 13): attribute 'body' has type string, expected graph",
	 EXACT, w_loop_body_is_string},

	/* opsets and domains */
	{"scan_opset7.onnx",
	 "node 'scan' (Scan, opset 7): unsupported op version (no implementation covers opset 7)",
	 EXACT, w_scan_opset7},
	{"gelu_before_opset20.onnx",
	 "node 'n' (Gelu, opset 13): unsupported op version (no implementation covers opset 13)",
	 EXACT, w_gelu_before_opset20},
	{"unknown_op.onnx",
	 "node 'n' (FrobnicateTensor, opset 13): unsupported op", EXACT, w_unknown_op},
	{"custom_domain.onnx",
	 "node 'n' (com.example:Relu): operator domain 'com.example' is not supported (only the "
	 "default ONNX domain is)", EXACT, w_custom_domain},
	{"ml_domain.onnx",
	 "node 'n' (ai.onnx.ml:Normalizer): operator domain 'ai.onnx.ml' is not supported (only "
	 "the default ONNX domain is)", EXACT, w_ml_domain},
	{"opset_zero.onnx",
	 "the model's default-domain opset version is missing or invalid", EXACT, w_opset_zero},
	{"only_custom_opset.onnx",
	 "the model imports only the operator domain 'com.example', which is not supported "
	 "(only the default ONNX domain is)", EXACT, w_only_custom_opset},

	/* shapes that cannot be */
	{"reshape_product.onnx",
	 "node 'reshape' (Reshape, opset 13): cannot reshape 2x12 (24 elements) to 5x5",
	 EXACT, w_reshape_product},
	{"reshape_two_minus_one.onnx",
	 "node 'reshape' (Reshape, opset 13): shape has more than one -1",
	 EXACT, w_reshape_two_minus_one},
	{"reshape_minus_one_indivisible.onnx",
	 "node 'reshape' (Reshape, opset 13): cannot reshape 2x12 (24 elements) with -1 and the "
	 "other dims multiplying to 5", EXACT, w_reshape_minus_one_indivisible},
	{"reshape_minus_two.onnx",
	 "node 'reshape' (Reshape, opset 13): shape entry 0 is -2; dims must be >= -1",
	 EXACT, w_reshape_minus_two},
	{"reshape_zero_past_rank.onnx",
	 "node 'reshape' (Reshape, opset 13): shape entry 2 is 0 (copy the input dim) but the "
	 "input has rank 2", EXACT, w_reshape_zero_past_rank},
	{"reshape_minus_one_and_zero.onnx",
	 "node 'reshape' (Reshape, opset 14): cannot infer the -1 dim next to a zero-size dim",
	 EXACT, w_reshape_minus_one_and_zero},
	{"reshape_overflow.onnx",
	 "node 'reshape' (Reshape, opset 13): shape is too large", EXACT, w_reshape_overflow},
	{"gather_const_oob.onnx",
	 "node 'gather' (Gather, opset 13): index 5 (at position 0 of the indices) is out of "
	 "range [-3, 3) for axis 0 of size 3", EXACT, w_gather_const_oob},
	{"gather_const_negative.onnx",
	 "node 'gather' (Gather, opset 13): index -4 (at position 0 of the indices) is out of "
	 "range [-3, 3) for axis 0 of size 3", EXACT, w_gather_const_negative},
	{"gather_const_int64_min.onnx",
	 "node 'gather' (Gather, opset 13): index -9223372036854775808 (at position 0 of the "
	 "indices) is out of range [-3, 3) for axis 0 of size 3", EXACT, w_gather_const_int64_min},
	{"shape_gather_oob.onnx",
	 "node 'pick_dim' (Gather, opset 13): index 2 (at position 0 of the indices) is out of "
	 "range [-2, 2) for axis 0 of size 2", EXACT, w_shape_gather_oob},
	{"gather_folded_oob.onnx",
	 "node 'gather' (Gather, opset 13): index 5 (at position 0 of the indices) is out of "
	 "range [-3, 3) for axis 0 of size 3", EXACT | COMPILE_ONLY,
	 w_gather_folded_oob},
	{"arena_overflow.onnx",
	 "memory plan: the arena would exceed 18446744073709551615 bytes", EXACT | COMPILE_ONLY,
	 w_arena_overflow},
	{"tile_overflow.onnx",
	 "node 'tile' (Tile, opset 13): output dim 0 is too large", EXACT, w_tile_overflow},
	{"expand_overflow.onnx",
	 "node 'expand' (Expand, opset 13): output shape 4294967296x4294967296x4294967296 is "
	 "too large or invalid", EXACT, w_expand_overflow},
	{"constant_of_shape_huge.onnx", "node 'fill' (ConstantOfShape, opset 13): output shape "
	 "4611686018427387904x4611686018427387904 is too large or invalid",
	 EXACT, w_constant_of_shape_huge},
	{"range_huge.onnx",
	 "node 'range' (Range, opset 13): the range is too large", EXACT, w_range_huge},
	{"pad_huge.onnx",
	 "node 'pad' (Pad, opset 13): pads 9223372036854775807, 9223372036854775807 are too large",
	 EXACT, w_pad_huge},
	{"concat_overflow.onnx",
	 "node 'cat' (Concat, opset 13): the concatenated axis is too long", EXACT,
	 w_concat_overflow},

	/* counts: nodes, attributes, dims */
	{"node_chain_over_limit.onnx",
	 "graph 'main' has 100001 nodes; at most " STR(MC_MAX_NODES) " are supported", EXACT,
	 w_node_chain_over_limit},
	{"nodes_over_limit_in_branches.onnx",
	 "graph 'else' has 50000 nodes, which makes 100001 in the model; at most "
	 STR(MC_MAX_NODES) " are supported (all graphs together)", EXACT,
	 w_nodes_over_limit_in_branches},
	{"attr_ints_100k.onnx",
	 "node 'conv' (Conv, opset 13): attribute 'pads' has 100000 values, at most 12 allowed",
	 EXACT, w_attr_ints_100k},
	{"attrs_100k.onnx",
	 "node 'n' (Relu, opset 13): has 100000 attributes; at most " STR(MC_MAX_NODE_ATTRS)
	 " are supported", EXACT, w_attrs_100k},
	{"transpose_perm_100k.onnx",
	 "node 'n' (Transpose, opset 13): attribute 'perm' has 100000 entries, at most 8 allowed",
	 EXACT, w_transpose_perm_100k},
	{"tensor_dims_100k.onnx",
	 "tensor 'W': rank 100000 exceeds the supported maximum " STR(MC_MAX_RANK),
	 EXACT, w_tensor_dims_100k},
	{"node_inputs_5000.onnx",
	 "node 'sum' (Sum): 5000 inputs and 1 outputs; at most " STR(MC_MAX_NODE_IO)
	 " each are supported", EXACT, w_node_inputs_5000},

	/* loop bombs */
	{"scan_bomb.onnx", "node 'scan' (Scan, opset 13): " FOLD_REFUSED, EXACT | COMPILE_ONLY, w_scan_bomb},
	{"loop_trip_huge.onnx",
	 "node 'outer' (Loop, opset 13): " FOLD_REFUSED, EXACT, w_loop_trip_huge},
	{"loop_nested_bomb.onnx",
	 "node 'outer' (Loop, opset 13): " FOLD_REFUSED, EXACT, w_loop_nested_bomb},
	/* quantization scales */
	{"quantize_scale_zero.onnx",
	 "node 'q' (QuantizeLinear, opset 13): scale 0 at index 0 is not a finite positive number",
	 EXACT, w_quantize_scale_zero},
	{"quantize_scale_nan.onnx",
	 "node 'q' (QuantizeLinear, opset 13): scale nan at index 0 is not a finite positive number",
	 EXACT, w_quantize_scale_nan},
	{"dequantize_scale_negative.onnx",
	 "node 'dq' (DequantizeLinear, opset 13): scale -1 at index 0 is not a finite positive "
	 "number", EXACT, w_dequantize_scale_negative},
	{"dequantize_weight_scale_inf.onnx",
	 "node 'dq_w' (DequantizeLinear, opset 13): scale inf at index 1 is not a finite positive "
	 "number", EXACT, w_dequantize_weight_scale_inf},
};

const int hostile_n_cases = (int)(sizeof hostile_cases / sizeof *hostile_cases);
