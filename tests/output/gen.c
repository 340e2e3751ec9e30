/* Writes the models of tests/output/check into DIR:
 *   a.onnx, b.onnx  two versions of one model (a small MLP with enough
 *                   weights that modelc takes a noticeable time): b has
 *                   other weights, another activation and more outputs,
 *                   so most generated files differ between them;
 *   tiny.onnx       a model whose whole output is a few kilobytes.
 * usage: gen DIR [HIDDEN]  (HIDDEN: width of the hidden layers, default 384) */
#include <stdio.h>
#include <stdlib.h>

#include "../unit/model_builder.h"

/* Deterministic weights in [-0.1, 0.1): the same file on every run. */
static float next_weight(uint32_t *state)
{
	*state = *state * 1664525u + 1013904223u;
	return ((float)(*state >> 8) / 16777216.0f - 0.5f) * 0.2f;
}

static void add_gemm(mb *b, const char *in, const char *out, const char *w_name, int rows,
                     int cols, uint32_t *seed)
{
	size_t n = (size_t)rows * (size_t)cols;
	float *w = malloc(n * sizeof *w);
	if (!w)
		abort();
	for (size_t i = 0; i < n; i++)
		w[i] = next_weight(seed);
	char dims[64], inputs[256];
	snprintf(dims, sizeof dims, "%d,%d", rows, cols);
	mb_init_floats(b, mb_main(b), w_name, dims, w, n);
	free(w);
	snprintf(inputs, sizeof inputs, "%s,%s", in, w_name);
	mb_node(b, mb_main(b), "Gemm", NULL, inputs, out);
}

/* x[1,IN] -> Gemm -> act -> Gemm -> act -> Gemm -> y[1,outputs] */
static int write_mlp(const char *path, int in, int hidden, int outputs, const char *act,
                     uint32_t seed)
{
	mb *b = mb_new(13);
	char shape[32];
	snprintf(shape, sizeof shape, "1,%d", in);
	mb_input(b, mb_main(b), "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, shape);
	add_gemm(b, "x", "h1", "w1", in, hidden, &seed);
	mb_node(b, mb_main(b), act, NULL, "h1", "a1");
	add_gemm(b, "a1", "h2", "w2", hidden, hidden, &seed);
	mb_node(b, mb_main(b), act, NULL, "h2", "a2");
	add_gemm(b, "a2", "y", "w3", hidden, outputs, &seed);
	mb_output(b, mb_main(b), "y");
	int rc = mb_write(b, path);
	mb_free(b);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: %s DIR [HIDDEN]\n", argv[0]);
		return 2;
	}
	int hidden = argc == 3 ? atoi(argv[2]) : 384;
	if (hidden < 1 || hidden > 4096) {
		fprintf(stderr, "gen: HIDDEN must be 1..4096\n");
		return 2;
	}
	char path[4096];
	snprintf(path, sizeof path, "%s/a.onnx", argv[1]);
	if (write_mlp(path, 256, hidden, 10, "Relu", 1))
		return 1;
	snprintf(path, sizeof path, "%s/b.onnx", argv[1]);
	if (write_mlp(path, 256, hidden, 12, "Tanh", 2))
		return 1;
	snprintf(path, sizeof path, "%s/tiny.onnx", argv[1]);
	if (write_mlp(path, 4, 4, 2, "Relu", 3))
		return 1;
	return 0;
}
