/* maxpool.c - max pooling on [C][H][W][B] maps: a k x k window, stride and
 * padding (pad < k); the forward keeps each output's argmax (scratch) for
 * the backward. */
#include "ops.h"
#include "sl.h"

static int
pool_setup(node *n, char *err)
{
	shape in = n->in[0];
	if (!in.cb)
		return sl_fail(err, SL_EINVAL,
			       "model: maxpool needs a feature-map input, not a dense layer's");
	if (n->k < 1 || n->stride < 1 || n->pad < 0 || n->pad >= n->k)
		return sl_fail(err, SL_EINVAL, "model: bad maxpool parameters");
	int ho = conv_out_dim(in.h, n->k, n->stride, n->pad);
	int wo = conv_out_dim(in.w, n->k, n->stride, n->pad);
	if (ho < 1 || wo < 1)
		return sl_fail(err, SL_EINVAL,
			       "model: maxpool %d on a %dx%d input leaves nothing",
			       n->k, in.h, in.w);
	n->geom = (conv_geom){.cin = in.c, .h = in.h, .w = in.w,
			      .cout = in.c, .k = n->k, .stride = n->stride,
			      .pad = n->pad, .ho = ho, .wo = wo};
	n->out = (shape){in.c, ho, wo, 1};
	n->flops_fwd = (double)in.c * ho * wo * n->k * n->k;
	n->flops_bwd_x = (double)shape_size(in);
	return 0;
}

static size_t
pool_scratch(const node *n)
{
	return sizeof(int32_t) * shape_size(n->out);
}

static void
pool_forward(node *n, backend *be, const float *p, const float *const *x,
	     float *y, int batch)
{
	(void)p;
	be->ops->maxpool_fwd(be, &n->geom, x[0], y, n->scratch, batch);
}

static void
pool_backward(node *n, backend *be, const float *p, const float *const *x,
	      const float *y, float *dy, float *const *dx, float *g, int batch)
{
	(void)p, (void)x, (void)y, (void)g;
	if (dx[0])
		be->ops->maxpool_bwd(be, &n->geom, dy, n->scratch, dx[0], batch);
}

const op_class op_maxpool = {
	.name = "maxpool",
	.n_in = 1,
	.setup = pool_setup,
	.scratch_bytes = pool_scratch,
	.forward = pool_forward,
	.backward = pool_backward,
};
