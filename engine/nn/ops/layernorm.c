/* layernorm.c - layer normalization over each row's E = in.c features (a
 * sequence's positions, [B][T][E]; a dense layer's row when T = 1), as
 * torch.nn.LayerNorm(E) with eps 1e-5: y = (x - mean) / sqrt(var + eps) g
 * + b, mean and biased variance over the row. Parameters g (init 1), then
 * b (init 0), E each. The forward keeps each row's mean and 1 / sqrt(var +
 * eps) in the node's scratch for the backward (mean for the batch's rows,
 * then rstd). */
#include "ops.h"
#include "sl.h"

#define LN_EPS 1e-5f

static int
ln_setup(node *n, char *err)
{
	shape in = n->in[0];
	if (in.cb)
		return sl_fail(err, SL_EINVAL,
			       "model: layernorm normalises rows, not a %dx%dx%d feature map", in.c,
			       in.h, in.w);
	n->out = in;
	n->n_weights = (size_t)in.c;
	n->n_params = 2 * (size_t)in.c;
	double sz = (double)shape_size(in);
	n->flops_fwd = 8.0 * sz;
	n->flops_bwd_w = 4.0 * sz;
	n->flops_bwd_x = 8.0 * sz;
	return 0;
}

static void
ln_init(const node *n, float *p, rng *r)
{
	(void)r;
	float *g = p + n->p_off;
	for (size_t i = 0; i < n->n_weights; i++)
		g[i] = 1.0f;
	for (size_t i = n->n_weights; i < n->n_params; i++)
		g[i] = 0.0f;
}

/* per sample: a mean and an rstd per row */
static size_t
ln_scratch(const node *n)
{
	return 2 * sizeof(float) * (size_t)n->in[0].h * n->in[0].w;
}

static void
ln_forward(node *n, backend *be, const float *p, const float *const *x, float *y,
	   int batch)
{
	const int e = n->in[0].c, rows = n->in[0].h * n->in[0].w * batch;
	const float *g = p + n->p_off;
	float *mean = n->scratch, *rstd = mean + rows;
	be->ops->layernorm_fwd(be, x[0], g, g + e, y, mean, rstd, rows, e, LN_EPS);
}

static void
ln_backward(node *n, backend *be, const float *p, const float *const *x, const float *y,
	    float *dy, float *const *dx, float *gr, int batch)
{
	(void)y;
	const int e = n->in[0].c, rows = n->in[0].h * n->in[0].w * batch;
	const float *mean = n->scratch, *rstd = mean + rows;
	float *dg = gr + n->p_off;
	be->ops->layernorm_bwd(be, x[0], p + n->p_off, mean, rstd, dy, dx[0], dg, dg + e, rows,
			       e);
}

const op_class op_layernorm = {
	.name = "layernorm",
	.no_decay = 1,
	.n_in = 1,
	.setup = ln_setup,
	.init = ln_init,
	.scratch_bytes = ln_scratch,
	.forward = ln_forward,
	.backward = ln_backward,
	.check = op_check_seq,
};
