/* flatten.c - [C][H][W][B] -> [B][C*H*W], between the conv and the dense
 * part of a model (a plain copy of an input already [B][features]). */
#include "ops.h"

static int
flatten_setup(node *n, char *err)
{
	(void)err;
	n->out = (shape){(int)shape_size(n->in[0]), 1, 1, 0};
	return 0;
}

static void
flatten_forward(node *n, backend *be, const float *p, const float *const *x,
		float *y, int batch)
{
	(void)p;
	shape in = n->in[0];
	if (in.cb)
		be->ops->cpb_to_bcp(be, x[0], y, in.c, batch, in.h * in.w);
	else
		be->ops->copy(be, y, x[0], sizeof(float) * shape_size(in) * batch);
}

static void
flatten_backward(node *n, backend *be, const float *p, const float *const *x,
		 const float *y, float *dy, float *const *dx, float *g, int batch)
{
	(void)p, (void)x, (void)y, (void)g;
	shape in = n->in[0];
	if (!dx[0])
		return;
	if (in.cb)
		be->ops->bcp_to_cpb(be, dy, dx[0], in.c, batch, in.h * in.w);
	else
		be->ops->copy(be, dx[0], dy, sizeof(float) * shape_size(in) * batch);
}

const op_class op_flatten = {
	.name = "flatten",
	.n_in = 1,
	.setup = flatten_setup,
	.forward = flatten_forward,
	.backward = flatten_backward,
};
