/* linear.c - a position-wise dense layer: each row of in.c features (a
 * sequence's positions, [B][T][in]) to units outputs, y = x w^T + b with
 * the same w [units][in] and b for every position (the transformer's QKV,
 * output and MLP projections). Weights normal with sd n->init_std (0.02 by
 * default; nanoGPT's residual projections 0.02 / sqrt(2 L)), bias 0. The
 * backend's dense ops over B T rows. */
#include "ops.h"
#include "sl.h"

static int
linear_setup(node *n, char *err)
{
	shape in = n->in[0];
	if (in.cb)
		return sl_fail(err, SL_EINVAL,
			       "model: linear reads rows, not a %dx%dx%d feature map", in.c, in.h,
			       in.w);
	if (n->units < 1)
		return sl_fail(err, SL_EINVAL, "model: linear layer with %d units", n->units);
	const double rows = (double)in.h * in.w;
	n->out = (shape){n->units, in.h, in.w, 0};
	n->n_weights = (size_t)in.c * n->units;
	n->w_cols = (size_t)in.c;
	n->n_params = n->n_weights + (size_t)n->units;
	n->flops_fwd = 2.0 * in.c * n->units * rows;
	n->flops_bwd_w = 2.0 * in.c * n->units * rows;
	n->flops_bwd_x = 2.0 * in.c * n->units * rows;
	return 0;
}

static void
linear_init(const node *n, float *p, rng *r)
{
	float *w = p + n->p_off;
	op_init_normal(w, n->n_weights, n->init_std > 0 ? n->init_std : 0.02, r);
	for (size_t i = n->n_weights; i < n->n_params; i++)
		w[i] = 0.0f;
}

static void
linear_forward(node *n, backend *be, const float *p, const float *const *x, float *y,
	       int batch)
{
	const float *w = p + n->p_off;
	const shape in = n->in[0];
	be->ops->linear_fwd(be, x[0], w, w + n->n_weights, y, batch * in.h * in.w, in.c,
			    n->units, 0);
}

static void
linear_backward(node *n, backend *be, const float *p, const float *const *x,
		const float *y, float *dy, float *const *dx, float *g, int batch)
{
	const float *w = p + n->p_off;
	float *gw = g + n->p_off;
	const shape in = n->in[0];
	be->ops->linear_bwd(be, x[0], w, y, dy, dx[0], gw, gw + n->n_weights,
			    batch * in.h * in.w, in.c, n->units, 0);
}

const op_class op_linear = {
	.name = "linear",
	.n_in = 1,
	.setup = linear_setup,
	.init = linear_init,
	.forward = linear_forward,
	.backward = linear_backward,
};
