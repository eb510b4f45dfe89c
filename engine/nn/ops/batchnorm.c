/* batchnorm.c - batch normalization on [C][H][W][B] maps, per channel:
 * y = act(gamma (x - mean) / sqrt(var + eps) + beta), a relu fused on the
 * output when n->relu. Parameters gamma (init 1), then beta (init 0), C
 * each. State (not trained): the running mean (init 0), then the running
 * variance (init 1), C each. As torch.nn.BatchNorm2d: eps 1e-5; in
 * training mode the batch's statistics normalise (the backward takes them
 * as functions of x) and the running ones move by n->momentum (0.1 in a
 * step); in evaluation mode the running statistics normalise. The forward
 * keeps the mean and 1/sqrt(var + eps) it used in the node's scratch for
 * the backward (2 C floats). */
#include "ops.h"
#include "sl.h"

#define BN_EPS 1e-5f

static int
bn_setup(node *n, char *err)
{
	shape in = n->in[0];
	if (!in.cb)
		return sl_fail(err, SL_EINVAL,
			       "model: batchnorm needs a feature-map input, not a dense layer's");
	n->out = in;
	n->n_weights = (size_t)in.c;     /* gamma */
	n->n_params = 2 * (size_t)in.c;  /* then beta */
	n->n_state = 2 * (size_t)in.c;   /* running mean, running var */
	double cp = (double)shape_size(in);
	n->flops_fwd = 8.0 * cp;
	n->flops_bwd_w = 5.0 * cp;
	n->flops_bwd_x = 5.0 * cp;
	return 0;
}

static void
bn_init(const node *n, float *p, rng *r)
{
	(void)r;
	float *gamma = p + n->p_off;
	for (size_t i = 0; i < n->n_weights; i++)
		gamma[i] = 1.0f;
	for (size_t i = n->n_weights; i < n->n_params; i++)
		gamma[i] = 0.0f;
}

/* per sample; at least 2 C floats in all */
static size_t
bn_scratch(const node *n)
{
	return 2 * sizeof(float) * (size_t)n->in[0].c;
}

static void
bn_forward(node *n, backend *be, const float *p, const float *const *x,
	   float *y, int batch)
{
	int c = n->in[0].c, hw = n->in[0].h * n->in[0].w;
	const float *gamma = p + n->p_off;
	float *mean = n->scratch, *invstd = mean + c;
	be->ops->bn_fwd(be, x[0], gamma, gamma + c, y, mean, invstd, n->state,
			n->state + c, c, hw, batch, n->training, n->momentum,
			BN_EPS, n->relu);
}

static void
bn_backward(node *n, backend *be, const float *p, const float *const *x,
	    const float *y, float *dy, float *const *dx, float *g, int batch)
{
	int c = n->in[0].c, hw = n->in[0].h * n->in[0].w;
	const float *gamma = p + n->p_off;
	const float *mean = n->scratch, *invstd = mean + c;
	float *dgamma = g + n->p_off;
	be->ops->bn_bwd(be, x[0], gamma, mean, invstd, y, dy, dx[0], dgamma,
			dgamma + c, c, hw, batch, n->training, n->relu);
}

const op_class op_batchnorm = {
	.name = "batchnorm",
	.no_decay = 1,
	.n_in = 1,
	.setup = bn_setup,
	.init = bn_init,
	.scratch_bytes = bn_scratch,
	.forward = bn_forward,
	.backward = bn_backward,
};
