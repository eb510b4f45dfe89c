/* conv2d.c - a 2-D convolution on [C][H][W][B] maps: n->units output
 * channels, a k x k kernel, stride and zero padding, a relu fused on the
 * output when n->relu; weights [cout][cin][k][k], then bias. With
 * n->no_bias (a conv before a batch norm, whose beta is the bias) there is
 * no bias parameter: the backend's conv is handed a bias of zeros (adding
 * 0.0f changes no sum) and writes its bias gradient to a dump, both in the
 * node's scratch (units floats each; the scratch is zeroed memory). */
#include "ops.h"
#include "sl.h"

static int
conv_setup(node *n, char *err)
{
	shape in = n->in[0];
	if (!in.cb)
		return sl_fail(err, SL_EINVAL,
			       "model: conv layer needs a feature-map input, not a dense layer's");
	if (n->k < 1 || n->stride < 1 || n->pad < 0 || n->units < 1)
		return sl_fail(err, SL_EINVAL, "model: conv2d needs units >= 1, k >= 1, stride >= 1 "
			       "and pad >= 0 (units %d, k %d, stride %d, pad %d)", n->units, n->k,
			       n->stride, n->pad);
	int ho = conv_out_dim(in.h, n->k, n->stride, n->pad);
	int wo = conv_out_dim(in.w, n->k, n->stride, n->pad);
	if (ho < 1 || wo < 1)
		return sl_fail(err, SL_EINVAL,
			       "model: conv %dx%d on a %dx%d input leaves nothing",
			       n->k, n->k, in.h, in.w);
	n->geom = (conv_geom){.cin = in.c, .h = in.h, .w = in.w,
			      .cout = n->units, .k = n->k, .stride = n->stride,
			      .pad = n->pad, .ho = ho, .wo = wo};
	n->out = (shape){n->units, ho, wo, 1};
	size_t K = (size_t)in.c * n->k * n->k;
	n->n_weights = K * n->units;
	n->w_cols = K;
	n->n_params = n->n_weights + (n->no_bias ? 0 : (size_t)n->units);
	double mac = (double)K * n->units * ho * wo;
	n->flops_fwd = 2.0 * mac;
	n->flops_bwd_w = 2.0 * mac;
	n->flops_bwd_x = 2.0 * mac;
	return 0;
}

static void
conv_init(const node *n, float *p, rng *r)
{
	int k2 = n->k * n->k;
	op_init_weights(n, p + n->p_off, n->in[0].c * k2, n->units * k2, r);
}

/* bytes per sample: with no bias, zeros and the bias gradient's dump */
static size_t
conv_scratch(const node *n)
{
	return n->no_bias ? 2 * sizeof(float) * (size_t)n->units : 0;
}

static void
conv_forward(node *n, backend *be, const float *p, const float *const *x,
	     float *y, int batch)
{
	const float *w = p + n->p_off;
	const float *b = n->no_bias ? (const float *)n->scratch : w + n->n_weights;
	be->ops->conv_fwd(be, &n->geom, x[0], w, b, y, batch, n->relu);
}

static void
conv_backward(node *n, backend *be, const float *p, const float *const *x,
	      const float *y, float *dy, float *const *dx, float *g, int batch)
{
	const float *w = p + n->p_off;
	float *gw = g + n->p_off;
	float *gb = n->no_bias ? (float *)n->scratch + n->units : gw + n->n_weights;
	be->ops->conv_bwd(be, &n->geom, x[0], w, y, dy, dx[0], gw, gb, batch,
			  n->relu);
}

const op_class op_conv2d = {
	.name = "conv2d",
	.n_in = 1,
	.setup = conv_setup,
	.init = conv_init,
	.scratch_bytes = conv_scratch,
	.forward = conv_forward,
	.backward = conv_backward,
};
