/* dense.c - a fully connected layer: y[B x out] = x[B x in] . w^T + b, a
 * relu fused on the output when n->relu; weights [out][in], then bias. */
#include "ops.h"
#include "sl.h"

static int
dense_setup(node *n, char *err)
{
	int in = (int)shape_size(n->in[0]);
	if (n->in[0].cb)
		return sl_fail(err, SL_EINVAL,
			       "model: dense layer after a %dx%dx%d feature map needs a flatten",
			       n->in[0].c, n->in[0].h, n->in[0].w);
	if (n->units < 1)
		return sl_fail(err, SL_EINVAL, "model: dense layer with %d units",
			       n->units);
	n->out = (shape){n->units, 1, 1, 0};
	n->n_weights = (size_t)in * n->units;
	n->w_cols = (size_t)in;
	n->n_params = n->n_weights + (size_t)n->units;
	n->flops_fwd = 2.0 * in * n->units;
	n->flops_bwd_w = 2.0 * in * n->units;
	n->flops_bwd_x = 2.0 * in * n->units;
	return 0;
}

static void
dense_init(const node *n, float *p, rng *r)
{
	op_init_weights(n, p + n->p_off, (int)shape_size(n->in[0]), n->units, r);
}

static void
dense_forward(node *n, backend *be, const float *p, const float *const *x,
	      float *y, int batch)
{
	const float *w = p + n->p_off;
	be->ops->linear_fwd(be, x[0], w, w + n->n_weights, y, batch,
			    (int)shape_size(n->in[0]), n->units, n->relu);
}

static void
dense_backward(node *n, backend *be, const float *p, const float *const *x,
	       const float *y, float *dy, float *const *dx, float *g, int batch)
{
	const float *w = p + n->p_off;
	float *gw = g + n->p_off;
	be->ops->linear_bwd(be, x[0], w, y, dy, dx[0], gw, gw + n->n_weights,
			    batch, (int)shape_size(n->in[0]), n->units, n->relu);
}

const op_class op_dense = {
	.name = "dense",
	.n_in = 1,
	.setup = dense_setup,
	.init = dense_init,
	.forward = dense_forward,
	.backward = dense_backward,
};
