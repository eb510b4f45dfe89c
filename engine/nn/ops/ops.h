/* ops.h - the op classes of engine/nn/ops/, for the table and tests, and
 * what the ops share. An op's own file says what it computes. */
#ifndef SL_OPS_H
#define SL_OPS_H

#include "op.h"

extern const op_class op_dense, op_conv2d, op_maxpool, op_relu, op_flatten,
	op_add, op_batchnorm, op_avgpool, op_shortcut, op_embed, op_layernorm,
	op_linear, op_gelu, op_attention, op_lmhead;

/* A parameterised node's weights (n->n_weights at w) from r: He normal
 * when n->he_init, else Xavier uniform; then zero biases up to
 * n->n_params. */
void op_init_weights(const node *n, float *w, int fan_in, int fan_out, rng *r);

/* nanoGPT's init: n floats at w normal with sd std (0.02; residual
 * projections 0.02 / sqrt(2 L)). */
void op_init_normal(float *w, size_t n, double std, rng *r);

/* The sequence ops' check (op_class.check): 0 when be has the sequence
 * ops of backend.h, else -SL_EUNSUP naming the node's op and backend. */
int op_check_seq(const node *n, const backend *be, char *err);

/* A sequence activation's positions: T of shape {E, T, 1} (rows of E
 * features, [B][T][E]); 0 when s is no such shape (a map). */
static inline int
shape_positions(shape s)
{
	return s.cb || s.w != 1 ? 0 : s.h;
}

#endif
