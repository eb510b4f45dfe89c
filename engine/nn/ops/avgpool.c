/* avgpool.c - global average pooling: a [C][H][W][B] map to [B][C] rows
 * (the dense head's layout), y[b][c] = the mean of channel c's H W values
 * of sample b; the backward spreads dy[b][c] / (H W) over them. */
#include "ops.h"
#include "sl.h"

static int
avgpool_setup(node *n, char *err)
{
	shape in = n->in[0];
	if (!in.cb)
		return sl_fail(err, SL_EINVAL,
			       "model: avgpool needs a feature-map input, not a dense layer's");
	n->out = (shape){in.c, 1, 1, 0};
	n->flops_fwd = (double)shape_size(in) + in.c;
	n->flops_bwd_x = (double)shape_size(in) + in.c;
	return 0;
}

static void
avgpool_forward(node *n, backend *be, const float *p, const float *const *x,
		float *y, int batch)
{
	(void)p;
	shape in = n->in[0];
	be->ops->avgpool_fwd(be, x[0], y, in.c, in.h * in.w, batch);
}

static void
avgpool_backward(node *n, backend *be, const float *p, const float *const *x,
		 const float *y, float *dy, float *const *dx, float *g, int batch)
{
	(void)p, (void)x, (void)y, (void)g;
	shape in = n->in[0];
	if (dx[0])
		be->ops->avgpool_bwd(be, dy, dx[0], in.c, in.h * in.w, batch);
}

const op_class op_avgpool = {
	.name = "avgpool",
	.n_in = 1,
	.setup = avgpool_setup,
	.forward = avgpool_forward,
	.backward = avgpool_backward,
};
