/* lmhead.c - a language model's head tied to its token embedding: each
 * row of E features to V logits by the embed node's token table (n->tie),
 * logits = x wte^T, no bias and no parameters of its own. Its backward
 * writes dwte = dy^T x into the embed node's gradient slice, where that
 * node's backward (which runs after, it being below) adds the embedding's
 * scatter; with a partial backward that stops above the embedding, that
 * share is computed but sent with no layer (the embedding is outside the
 * tail). The output is [B][T][V], one row of logits per position. */
#include "ops.h"
#include "sl.h"

static int
head_setup(node *n, char *err)
{
	shape in = n->in[0];
	if (!n->tie || n->tie->op != &op_embed)
		return sl_fail(err, SL_EINVAL,
			       "model: lmhead needs tie: the embed node whose token table it uses");
	if (in.cb || in.c != n->tie->units)
		return sl_fail(err, SL_EINVAL,
			       "model: lmhead reads rows of %d features (its embed's width), not "
			       "a %dx%dx%d%s", n->tie->units, in.c, in.h, in.w,
			       in.cb ? " feature map" : "");
	const int v = n->tie->vocab;
	const double rows = (double)in.h * in.w;
	n->out = (shape){v, in.h, in.w, 0};
	n->flops_fwd = 2.0 * in.c * v * rows;
	n->flops_bwd_w = 2.0 * in.c * v * rows;
	n->flops_bwd_x = 2.0 * in.c * v * rows;
	return 0;
}

static void
head_forward(node *n, backend *be, const float *p, const float *const *x, float *y,
	     int batch)
{
	const shape in = n->in[0];
	be->ops->linear_fwd(be, x[0], p + n->tie->p_off, NULL, y, batch * in.h * in.w, in.c,
			    n->out.c, 0);
}

static void
head_backward(node *n, backend *be, const float *p, const float *const *x, const float *y,
	      float *dy, float *const *dx, float *g, int batch)
{
	const shape in = n->in[0];
	be->ops->linear_bwd(be, x[0], p + n->tie->p_off, y, dy, dx[0], g + n->tie->p_off,
			    NULL, batch * in.h * in.w, in.c, n->out.c, 0);
}

const op_class op_lmhead = {
	.name = "lmhead",
	.n_in = 1,
	.setup = head_setup,
	.forward = head_forward,
	.backward = head_backward,
	.check = op_check_seq,
};
