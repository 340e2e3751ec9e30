/* Refills a skeleton ONNX model (scripts/make-bench-models.py): every
 * tensor whose doc_string is "modelc-fill normal MEAN STD" gets seeded
 * normal values with that mean and standard deviation as its raw data, so
 * that a network of tens of MB is committed as its graph and shapes.
 *
 * usage: inflate SKELETON.onnx OUT.onnx
 *
 * The values depend only on the tensor's name and its fill rule: a
 * splitmix64 stream seeded with the FNV-1a hash of the name, Box-Muller
 * pairs, rounded to float32. The output is written to OUT.tmp.PID and
 * renamed, so a failed or killed run leaves no half-written model. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "onnx/onnx.pb-c.h"

#define FILL_TAG "modelc-fill normal "
#define MAX_BYTES ((size_t)1 << 31)

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in (0, 1]. */
static double unit(uint64_t *state)
{
	return (double)((splitmix64(state) >> 11) + 1) * 0x1p-53;
}

/* Fills t when its doc_string asks for it: 0, or -1 with a message. */
static int fill(Onnx__TensorProto *t)
{
	if (!t->doc_string || strncmp(t->doc_string, FILL_TAG, strlen(FILL_TAG)) != 0)
		return 0;
	const char *name = t->name ? t->name : "";
	double mean, std;
	char extra;
	if (sscanf(t->doc_string + strlen(FILL_TAG), "%lf %lf %c", &mean, &std, &extra) != 2 ||
	    !isfinite(mean) || !isfinite(std) || std < 0) {
		fprintf(stderr, "inflate: tensor '%s': bad fill rule '%s'\n", name, t->doc_string);
		return -1;
	}
	if (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
		fprintf(stderr, "inflate: tensor '%s': fill rule on a tensor that is not float\n", name);
		return -1;
	}
	size_t n = 1;
	for (size_t i = 0; i < t->n_dims; i++) {
		if (t->dims[i] < 0 || (t->dims[i] > 0 && n > MAX_BYTES / 4 / (size_t)t->dims[i])) {
			fprintf(stderr, "inflate: tensor '%s': shape too large\n", name);
			return -1;
		}
		n *= (size_t)t->dims[i];
	}
	uint8_t *raw = malloc(n * 4 + 1);
	if (!raw) {
		fprintf(stderr, "inflate: tensor '%s': out of memory\n", name);
		return -1;
	}
	uint64_t state = fnv1a(name);
	for (size_t i = 0; i < n; i += 2) {
		double r = sqrt(-2.0 * log(unit(&state))), a = 2.0 * M_PI * unit(&state);
		float v[2] = { (float)(mean + std * r * cos(a)), (float)(mean + std * r * sin(a)) };
		for (size_t j = 0; j < 2 && i + j < n; j++) {
			uint32_t bits;
			memcpy(&bits, &v[j], 4);
			for (int b = 0; b < 4; b++) /* ONNX raw data is little-endian */
				raw[(i + j) * 4 + b] = (uint8_t)(bits >> (8 * b));
		}
	}
	/* the unpacked message's buffers belong to protobuf-c's allocator;
	 * the replaced ones are leaked until exit, which is a moment away */
	t->raw_data.data = raw;
	t->raw_data.len = n * 4;
	t->has_raw_data = 1;
	t->n_float_data = 0;
	t->doc_string = NULL;
	return 0;
}

static int fill_graph(Onnx__GraphProto *g);

static int fill_attribute(Onnx__AttributeProto *a)
{
	int rc = 0;
	if (a->t)
		rc |= fill(a->t);
	for (size_t i = 0; i < a->n_tensors; i++)
		rc |= fill(a->tensors[i]);
	if (a->g)
		rc |= fill_graph(a->g);
	for (size_t i = 0; i < a->n_graphs; i++)
		rc |= fill_graph(a->graphs[i]);
	return rc;
}

static int fill_graph(Onnx__GraphProto *g)
{
	int rc = 0;
	for (size_t i = 0; i < g->n_initializer; i++)
		rc |= fill(g->initializer[i]);
	for (size_t i = 0; i < g->n_node; i++)
		for (size_t j = 0; j < g->node[i]->n_attribute; j++)
			rc |= fill_attribute(g->node[i]->attribute[j]);
	return rc;
}

static uint8_t *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "inflate: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	size_t cap = 1 << 16, n = 0;
	uint8_t *buf = malloc(cap);
	size_t got;
	while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n == cap) {
			uint8_t *bigger = cap < MAX_BYTES ? realloc(buf, cap * 2) : NULL;
			if (!bigger)
				free(buf);
			buf = bigger;
			cap *= 2;
		}
	}
	int bad = !buf || ferror(f);
	fclose(f);
	if (bad) {
		fprintf(stderr, "inflate: %s: cannot read it whole\n", path);
		free(buf);
		return NULL;
	}
	*len = n;
	return buf;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: inflate SKELETON.onnx OUT.onnx\n");
		return 2;
	}
	size_t len;
	uint8_t *bytes = read_all(argv[1], &len);
	if (!bytes)
		return 1;
	Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, bytes);
	if (!m || !m->graph) {
		fprintf(stderr, "inflate: %s: not an ONNX model\n", argv[1]);
		return 1;
	}
	if (fill_graph(m->graph))
		return 1;
	size_t out_len = onnx__model_proto__get_packed_size(m);
	uint8_t *out = malloc(out_len);
	if (!out) {
		fprintf(stderr, "inflate: out of memory\n");
		return 1;
	}
	onnx__model_proto__pack(m, out);
	char tmp[4096];
	if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", argv[2], (long)getpid()) >= (int)sizeof tmp) {
		fprintf(stderr, "inflate: output path too long\n");
		return 1;
	}
	FILE *f = fopen(tmp, "wb");
	int ok = f && fwrite(out, 1, out_len, f) == out_len;
	ok = f && fclose(f) == 0 && ok;
	if (!ok || rename(tmp, argv[2]) != 0) {
		fprintf(stderr, "inflate: %s: %s\n", argv[2], strerror(errno));
		remove(tmp);
		return 1;
	}
	return 0;
}
