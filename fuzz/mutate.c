/* A structure-aware mutator for the fuzz target: most byte-level mutations
 * of a model file break its protobuf framing and stop at import. This one
 * decodes the model, changes one field found through protobuf-c's
 * reflection (a dimension, an attribute, an op type, a name, a data type,
 * an opset; or drops or repeats an element of a list) and encodes it
 * again, so that shape inference, folding, lowering and planning see
 * models that are well-formed but wrong in one place. Half of the calls
 * (and every input that does not decode) fall back to libFuzzer's own
 * byte mutations. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "modelc.h"
#include "onnx/onnx.pb-c.h"

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

/* The recursion guard of the walk matches modelc's own nesting limit in
 * spirit: deeper than this, mutations are not worth the time. */
enum { MAX_DEPTH = 24, MAX_SITES = 4096, MAX_STRINGS = 512 };

typedef struct {
	ProtobufCMessage *msg;
	const ProtobufCFieldDescriptor *field;
} site;

typedef struct {
	uint64_t rng;
	site sites[MAX_SITES];
	int n_sites;
	const char *strings[MAX_STRINGS]; /* names already in the model */
	int n_strings;
} mutation;

static uint64_t next_random(mutation *m)
{
	m->rng ^= m->rng << 13;
	m->rng ^= m->rng >> 7;
	m->rng ^= m->rng << 17;
	return m->rng;
}

static size_t pick(mutation *m, size_t n)
{
	return n ? (size_t)(next_random(m) % n) : 0;
}

static void *member(ProtobufCMessage *msg, unsigned offset)
{
	return (char *)msg + offset;
}

static bool oneof_inactive(ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f)
{
	return (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
	       *(uint32_t *)member(msg, f->quantifier_offset) != f->id;
}

static void walk(mutation *m, ProtobufCMessage *msg, int depth)
{
	if (!msg || depth > MAX_DEPTH)
		return;
	const ProtobufCMessageDescriptor *d = msg->descriptor;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		if (oneof_inactive(msg, f))
			continue;
		if (m->n_sites < MAX_SITES)
			m->sites[m->n_sites++] = (site){msg, f};
		bool repeated = f->label == PROTOBUF_C_LABEL_REPEATED;
		size_t count = repeated ? *(size_t *)member(msg, f->quantifier_offset) : 1;
		void *field = member(msg, f->offset);
		if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
			ProtobufCMessage **items = repeated ? *(ProtobufCMessage ***)field : (ProtobufCMessage **)field;
			for (size_t k = 0; k < count && items; k++)
				walk(m, items[k], depth + 1);
		} else if (f->type == PROTOBUF_C_TYPE_STRING) {
			char **items = repeated ? *(char ***)field : (char **)field;
			for (size_t k = 0; k < count && items && m->n_strings < MAX_STRINGS; k++)
				if (items[k] && *items[k])
					m->strings[m->n_strings++] = items[k];
		}
	}
}

static int64_t interesting_int(mutation *m, int64_t old)
{
	static const int64_t values[] = {
		0, 1, -1, 2, 3, 4, 7, 8, 16, 64, 255, 256, 65535, 65536, INT32_MAX, (int64_t)INT32_MAX + 1,
		(int64_t)1 << 32, (int64_t)1 << 40, (int64_t)1 << 62, INT64_MAX, INT64_MIN, -2,
	};
	if (next_random(m) & 1) {
		/* Wrapping on purpose: the fuzzer wants the extremes too. */
		uint64_t delta = (uint64_t)(int64_t)((int)pick(m, 9) - 4);
		return (int64_t)((uint64_t)old + delta);
	}
	return values[pick(m, sizeof values / sizeof values[0])];
}

static double interesting_float(mutation *m)
{
	static const double values[] = {0, 1, -1, 0.5, 2, 1e-7, 1e30, -1e30, 3.4e38, 1e-45};
	switch (pick(m, 4)) {
	case 0: return NAN;
	case 1: return pick(m, 2) ? INFINITY : -INFINITY;
	default: return values[pick(m, sizeof values / sizeof values[0])];
	}
}

static const char *interesting_string(mutation *m)
{
	int n_ops = 0;
	const mc_op *const *ops = mc_registry_all(&n_ops);
	switch (pick(m, 3)) {
	case 0:
		if (m->n_strings)
			return m->strings[pick(m, (size_t)m->n_strings)];
		return "";
	case 1: return n_ops ? ops[pick(m, (size_t)n_ops)]->name : "";
	default: return pick(m, 2) ? "" : "x";
	}
}

/* Sets element k of a scalar field (k = 0 for a singular one). */
static void mutate_scalar(mutation *m, const ProtobufCFieldDescriptor *f, void *at)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_ENUM:
		*(int32_t *)at = (int32_t)(uint32_t)(uint64_t)interesting_int(m, *(int32_t *)at);
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		*(uint32_t *)at = (uint32_t)(uint64_t)interesting_int(m, *(uint32_t *)at);
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		*(int64_t *)at = interesting_int(m, *(int64_t *)at);
		break;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		*(uint64_t *)at = (uint64_t)interesting_int(m, (int64_t)*(uint64_t *)at);
		break;
	case PROTOBUF_C_TYPE_FLOAT: *(float *)at = (float)interesting_float(m); break;
	case PROTOBUF_C_TYPE_DOUBLE: *(double *)at = interesting_float(m); break;
	case PROTOBUF_C_TYPE_BOOL: *(protobuf_c_boolean *)at = !*(protobuf_c_boolean *)at; break;
	case PROTOBUF_C_TYPE_STRING: {
		char **s = at;
		char *copy = strdup(interesting_string(m));
		if (copy) {
			/* protobuf-c points absent strings at a shared default. */
			if (*s != f->default_value)
				free(*s);
			*s = copy;
		}
		break;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		ProtobufCBinaryData *b = at;
		if (b->len && pick(m, 2))
			b->len = pick(m, b->len); /* shorter than the shape needs */
		else if (b->len)
			b->data[pick(m, b->len)] ^= (uint8_t)(1u << pick(m, 8));
		break;
	}
	case PROTOBUF_C_TYPE_MESSAGE: break;
	}
}

static size_t element_size(const ProtobufCFieldDescriptor *f)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE: return 8;
	case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_MESSAGE: return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
	default: return 4;
	}
}

static void free_element(const ProtobufCFieldDescriptor *f, void *at)
{
	if (f->type == PROTOBUF_C_TYPE_MESSAGE)
		protobuf_c_message_free_unpacked(*(ProtobufCMessage **)at, NULL);
	else if (f->type == PROTOBUF_C_TYPE_STRING)
		free(*(char **)at);
	else if (f->type == PROTOBUF_C_TYPE_BYTES)
		free(((ProtobufCBinaryData *)at)->data);
}

/* A deep copy of one element of a repeated field, into dst. */
static bool copy_element(const ProtobufCFieldDescriptor *f, const void *src, void *dst)
{
	if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
		const ProtobufCMessage *msg = *(ProtobufCMessage *const *)src;
		size_t len = protobuf_c_message_get_packed_size(msg);
		uint8_t *buf = malloc(len ? len : 1);
		if (!buf)
			return false;
		protobuf_c_message_pack(msg, buf);
		ProtobufCMessage *copy = protobuf_c_message_unpack(f->descriptor, NULL, len, buf);
		free(buf);
		*(ProtobufCMessage **)dst = copy;
		return copy != NULL;
	}
	if (f->type == PROTOBUF_C_TYPE_STRING) {
		char *copy = strdup(*(char *const *)src);
		*(char **)dst = copy;
		return copy != NULL;
	}
	if (f->type == PROTOBUF_C_TYPE_BYTES) {
		const ProtobufCBinaryData *b = src;
		ProtobufCBinaryData *c = dst;
		c->len = b->len;
		c->data = malloc(b->len ? b->len : 1);
		if (c->data && b->len)
			memcpy(c->data, b->data, b->len);
		return c->data != NULL;
	}
	memcpy(dst, src, element_size(f));
	return true;
}

static void mutate_repeated(mutation *m, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f)
{
	size_t *count = member(msg, f->quantifier_offset);
	char **array = member(msg, f->offset);
	size_t size = element_size(f);
	if (*count == 0)
		return;
	size_t k = pick(m, *count);
	switch (pick(m, 3)) {
	case 0: /* drop element k */
		free_element(f, *array + k * size);
		memmove(*array + k * size, *array + (k + 1) * size, (*count - k - 1) * size);
		--*count;
		break;
	case 1: { /* repeat element k at the end */
		char *grown = realloc(*array, (*count + 1) * size);
		if (!grown)
			return;
		*array = grown;
		if (copy_element(f, grown + k * size, grown + *count * size))
			++*count;
		break;
	}
	default:
		if (f->type != PROTOBUF_C_TYPE_MESSAGE)
			mutate_scalar(m, f, *array + k * size);
		break;
	}
}

static void mutate_site(mutation *m, const site *s)
{
	const ProtobufCFieldDescriptor *f = s->field;
	if (f->label == PROTOBUF_C_LABEL_REPEATED) {
		mutate_repeated(m, s->msg, f);
		return;
	}
	if (f->type == PROTOBUF_C_TYPE_MESSAGE)
		return;
	/* A proto2 optional scalar counts only with its has_ flag set. */
	bool has_flag = f->label == PROTOBUF_C_LABEL_OPTIONAL && !(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
	                f->type != PROTOBUF_C_TYPE_STRING;
	if (has_flag)
		*(protobuf_c_boolean *)member(s->msg, f->quantifier_offset) = 1;
	mutate_scalar(m, f, member(s->msg, f->offset));
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
	if (seed & 1)
		return LLVMFuzzerMutate(data, size, max_size);
	Onnx__ModelProto *model = onnx__model_proto__unpack(NULL, size, data);
	if (!model)
		return LLVMFuzzerMutate(data, size, max_size);
	static mutation m; /* large: kept off the stack */
	m.rng = 0x9e3779b97f4a7c15ull ^ seed;
	m.n_sites = 0;
	m.n_strings = 0;
	walk(&m, &model->base, 0);
	int edits = 1 + (int)pick(&m, 3);
	for (int i = 0; i < edits && m.n_sites; i++) {
		mutate_site(&m, &m.sites[pick(&m, (size_t)m.n_sites)]);
		/* Sites may have moved (a dropped element): walk again. */
		m.n_sites = m.n_strings = 0;
		walk(&m, &model->base, 0);
	}
	size_t len = onnx__model_proto__get_packed_size(model);
	if (len <= max_size)
		onnx__model_proto__pack(model, data);
	onnx__model_proto__free_unpacked(model, NULL);
	return len <= max_size ? len : LLVMFuzzerMutate(data, size, max_size);
}
