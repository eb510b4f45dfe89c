/* ops.h - the op classes of engine/nn/ops/, for the table and tests, and
 * what the ops share. An op's own file says what it computes. */
#ifndef SL_OPS_H
#define SL_OPS_H

#include "op.h"

extern const op_class op_dense, op_conv2d, op_maxpool, op_relu, op_flatten,
	op_add, op_batchnorm, op_avgpool, op_shortcut;

/* A parameterised node's weights (n->n_weights at w) from r: He normal
 * when n->he_init, else Xavier uniform; then zero biases up to
 * n->n_params. */
void op_init_weights(const node *n, float *w, int fan_in, int fan_out, rng *r);

#endif
