/* relu.c - a standalone relu, y = max(x, 0) (a model spec fuses a relu
 * that follows a dense or conv layer into it instead). */
#include "ops.h"

static int
relu_setup(node *n, char *err)
{
	(void)err;
	n->out = n->in[0];
	n->flops_fwd = (double)shape_size(n->in[0]);
	n->flops_bwd_x = (double)shape_size(n->in[0]);
	return 0;
}

static void
relu_forward(node *n, backend *be, const float *p, const float *const *x,
	     float *y, int batch)
{
	(void)p;
	be->ops->relu_fwd(be, x[0], y, shape_size(n->in[0]) * (size_t)batch);
}

static void
relu_backward(node *n, backend *be, const float *p, const float *const *x,
	      const float *y, float *dy, float *const *dx, float *g, int batch)
{
	(void)p, (void)x, (void)g;
	if (dx[0])
		be->ops->relu_bwd(be, y, dy, dx[0],
				  shape_size(n->in[0]) * (size_t)batch);
}

const op_class op_relu = {
	.name = "relu",
	.n_in = 1,
	.setup = relu_setup,
	.forward = relu_forward,
	.backward = relu_backward,
};
