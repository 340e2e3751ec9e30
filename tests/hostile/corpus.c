/* The hostile model corpus (see corpus.h). Models are built with the
 * protobuf-c generated API through tests/unit/model_builder.h; only the
 * nesting bomb writes protobuf framing itself (too deep for the generated
 * packer's recursion), taking every field number from the generated
 * descriptors. */
#include "corpus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#define MALFORMED "not a valid ONNX model: the protobuf data is truncated or malformed"

const hostile_case hostile_cases[] = {
	{"empty.onnx", "the model file is empty", true, w_empty},
	{"truncated_half.onnx", MALFORMED, true, w_truncated_half},
	{"truncated_last_byte.onnx", MALFORMED, true, w_truncated_last_byte},
	{"random_4k.onnx", MALFORMED, true, w_random_4k},
	{"random_17.onnx", MALFORMED, true, w_random_17},
	{"text_format.onnx", MALFORMED, true, w_text},
	{"dim_2p62_initializer.onnx", "tensor 'W': shape 4611686018427387904 is too large", true,
	 w_dim_2p62_initializer},
	{"dim_2p62_input.onnx", "input 'x': shape 1x4611686018427387904 is too large", true,
	 w_dim_2p62_input},
	{"dims_overflow_initializer.onnx",
	 "tensor 'W': shape 4294967296x4294967296x4294967296 is too large", true,
	 w_dims_overflow_initializer},
	{"huge_initializer_no_data.onnx",
	 "tensor 'W': raw_data has 4 bytes but its shape needs 549755813888", true,
	 w_huge_initializer_no_data},
	{"rank9_input.onnx", "input 'x': rank 9 exceeds the supported maximum 8", true,
	 w_rank9_input},
	{"negative_dim_initializer.onnx", "tensor 'W': dimension 0 is negative (-1)", true,
	 w_negative_dim_initializer},
	{"count_mismatch.onnx", "tensor 'W': float_data holds 1 values but its shape needs 1000000",
	 true, w_count_mismatch},
	{"external_dotdot.onnx",
	 "tensor 'W': external data location '../secret.bin' leaves the model's directory", true,
	 w_external_dotdot},
	{"external_absolute.onnx",
	 "tensor 'W': external data location '/etc/passwd' leaves the model's directory", true,
	 w_external_absolute},
	{"external_dir_itself.onnx", "tensor 'W': external data location '.' is not a file", false,
	 w_external_dir_itself},
	{"external_offset_overflow.onnx",
	 "tensor 'W': external data offset '18446744073709551616' is not a non-negative integer",
	 true, w_external_offset_overflow},
	{"external_huge_length.onnx",
	 "tensor 'W': external data length 9223372036854775807 does not match its shape "
	 "(16 bytes)", true, w_external_huge_length},
	{"external_huge_dims.onnx",
	 "tensor 'W': external data offset 0 + 549755813888 bytes is past the end of 'w.bin' "
	 "(16 bytes)", true, w_external_huge_dims},
	{"opset_huge.onnx",
	 "the model imports opset 1000000000000 of the default domain; modelc knows opsets up "
	 "to " STR(MC_MAX_OPSET), true, w_opset_huge},
	{"ir_version_negative.onnx", "unsupported ONNX IR version -1", true, w_ir_version_negative},
	{"long_node_name.onnx", "node 'AAAAAAAAAAAAAAAAAAAA", false, w_long_node_name},
	{"forged_error_line.onnx",
	 "node 'a modelc: error: forged' (If, opset 13): input 'nope' is not produced by any "
	 "node, initializer or graph input", true, w_forged_error_line},
	{"sparse_initializer.onnx", "graph 'main': sparse initializers are not supported", true,
	 w_sparse_initializer},
	{"segment.onnx", "tensor 'W': segmented tensors are not supported", true, w_segment},
	{"functions.onnx", "model-local functions are not supported (1 defined)", true,
	 w_functions},
	{"string_initializer.onnx", "tensor 'S': data type 8 (string) is not supported", true,
	 w_string_initializer},
	{"dtype_999.onnx", "tensor 'W': data type 999 (?) is not supported", true, w_dtype_999},
	{"input_sequence.onnx",
	 "input 'seq': non-tensor inputs (sequence, optional, map) are not supported", true,
	 w_input_sequence},
	{"cycle.onnx", "node 'i1' (If, opset 13): the graph has a cycle through this node", true,
	 w_cycle},
	{"duplicate_output.onnx",
	 "node 'c' (Constant, opset 13): output 'c' is already defined elsewhere in the graph", true,
	 w_duplicate_output},
	{"if_no_branches.onnx",
	 "node 'pick' (If, opset 13): needs graph attributes then_branch and else_branch", true,
	 w_if_no_branches},
	{"if_branch_output_count.onnx",
	 "node 'pick' (If, opset 13): has 1 outputs but its branches produce 2 and 1", true,
	 w_if_branch_output_count},
	{"if_float_condition.onnx",
	 "node 'pick' (If, opset 13): condition must be a single bool, got float32 with 1 "
	 "elements", true, w_if_float_condition},
	{"if_branches_disagree.onnx",
	 "node 'pick' (If, opset 13): output 0 is float32 3 in then_branch but float32 1x3 in "
	 "else_branch", false, w_if_branches_disagree},
	{"nested_if_40.onnx",
	 "graph 'deep': subgraphs are nested more than " STR(MC_MAX_GRAPH_DEPTH) " deep", true,
	 w_nested_if_40},
	{"nesting_1000.onnx", "nested more than", false, w_nesting_1000},
	/* The wording is left to the fix: protobuf-c must not see this file. */
	{"nesting_bomb.onnx", "nested more than", false,
	 w_nesting_bomb},
};

const int hostile_n_cases = (int)(sizeof hostile_cases / sizeof *hostile_cases);
