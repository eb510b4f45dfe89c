/* lmhead.c - a language model's head tied to its token embedding: each
 * row of E features to V logits by the token table, logits = x wte^T, no
 * bias. The table is this node's parameter, [V][E] normal with sd 0.02
 * (it sits at the top of the flat buffer, so a partial backward of any
 * depth trains it); the embed node n->tie reads it for its lookup. The
 * backward writes dwte = dy^T x, and the embed's backward (which runs
 * after, it being below) adds its scatter when the backward reaches it.
 * The output is [B][T][V], one row of logits per position. */
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
	n->n_weights = (size_t)v * in.c;
	n->w_cols = (size_t)in.c;
	n->n_params = n->n_weights;
	n->flops_fwd = 2.0 * in.c * v * rows;
	n->flops_bwd_w = 2.0 * in.c * v * rows;
	n->flops_bwd_x = 2.0 * in.c * v * rows;
	return 0;
}

static void
head_init(const node *n, float *p, rng *r)
{
	op_init_normal(p + n->p_off, n->n_params, 0.02, r);
}

static void
head_forward(node *n, backend *be, const float *p, const float *const *x, float *y,
	     int batch)
{
	const shape in = n->in[0];
	be->ops->linear_fwd(be, x[0], p + n->p_off, NULL, y, batch * in.h * in.w, in.c,
			    n->out.c, 0);
}

static void
head_backward(node *n, backend *be, const float *p, const float *const *x, const float *y,
	      float *dy, float *const *dx, float *g, int batch)
{
	const shape in = n->in[0];
	be->ops->linear_bwd(be, x[0], p + n->p_off, y, dy, dx[0], g + n->p_off,
			    NULL, batch * in.h * in.w, in.c, n->out.c, 0);
}

const op_class op_lmhead = {
	.name = "lmhead",
	.n_in = 1,
	.setup = head_setup,
	.init = head_init,
	.forward = head_forward,
	.backward = head_backward,
	.check = op_check_seq,
};
