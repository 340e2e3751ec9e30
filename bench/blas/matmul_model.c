/* Writes OUT.onnx: Y = A x B, A an input [M, K], B a constant [K, N] of
 * seeded values (a layer's weights), for bench/blas/run.
 *
 *   matmul_model OUT.onnx M N K */
#include <stdio.h>
#include <stdlib.h>

#include "../../tests/unit/model_builder.h"

int main(int argc, char **argv)
{
	long m, n, k;
	if (argc != 5 || (m = atol(argv[2])) < 1 || (n = atol(argv[3])) < 1 || (k = atol(argv[4])) < 1)
		return fprintf(stderr, "usage: matmul_model OUT.onnx M N K\n"), 2;
	float *w = malloc(sizeof *w * (size_t)(k * n));
	if (!w)
		return 2;
	for (long i = 0; i < k * n; i++)
		w[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
	char a_dims[64], b_dims[64];
	snprintf(a_dims, sizeof a_dims, "%ld,%ld", m, k);
	snprintf(b_dims, sizeof b_dims, "%ld,%ld", k, n);
	mb *b = mb_new(13);
	Onnx__GraphProto *g = mb_main(b);
	mb_input(b, g, "a", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, a_dims);
	mb_init_floats(b, g, "b", b_dims, w, (size_t)(k * n));
	mb_node(b, g, "MatMul", "mm", "a,b", "y");
	mb_output(b, g, "y");
	int rc = mb_write(b, argv[1]);
	mb_free(b);
	free(w);
	return rc ? 1 : 0;
}
