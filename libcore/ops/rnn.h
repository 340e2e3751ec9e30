/* Recurrent layers' parsed attributes (node->params of RNN, GRU, LSTM),
 * shared by the reference implementation (rnn.c) and the lowering
 * (aot/lower_misc.c). */
#ifndef MODELC_OPS_RNN_H
#define MODELC_OPS_RNN_H

#include "../modelc.h"

typedef enum { KIND_RNN, KIND_GRU, KIND_LSTM } rnn_kind;

typedef enum {
	ACT_SIGMOID, ACT_TANH, ACT_RELU, ACT_LEAKY_RELU, ACT_THRESHOLDED_RELU,
	ACT_SCALED_TANH, ACT_HARD_SIGMOID, ACT_ELU, ACT_SOFTSIGN, ACT_SOFTPLUS,
	ACT_AFFINE, ACT_COUNT
} act_fn;

typedef struct {
	act_fn fn;
	double alpha, beta;
} rnn_act;

typedef struct {
	rnn_kind kind;
	int num_dirs;
	bool reverse;             /* direction "reverse" (single direction) */
	int64_t hidden_size;      /* 0 when the attribute is absent: taken from R */
	bool has_clip;
	double clip;
	int layout;               /* 0: [seq, batch, ...]; 1: [batch, seq, ...] */
	bool input_forget;        /* LSTM: forget gate = 1 - input gate */
	bool linear_before_reset; /* GRU: apply R_h before the reset gate */
	rnn_act act[2][3];        /* per direction: f, g, h (as many as the op uses) */
} rnn_params;

#endif
