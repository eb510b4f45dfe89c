/* attention.c - causal multi-head self-attention on the output of one
 * fused QKV projection: the input is [B][T][3E] (q, k, v side by side),
 * the output [B][T][E], heads = n->heads of D = E / heads columns each:
 * y_t = sum over j <= t of softmax_j(q_t . k_j / sqrt(D)) v_j, per head,
 * the heads' outputs side by side (the output projection is the linear
 * node after it). No parameters. The forward keeps the probabilities, H T
 * T floats per sample, in the node's scratch for the backward. */
#include "ops.h"
#include "sl.h"

static int
attn_setup(node *n, char *err)
{
	shape in = n->in[0];
	const int t = shape_positions(in);
	if (!t)
		return sl_fail(err, SL_EINVAL,
			       "model: attention reads a sequence's rows, not a %dx%dx%d%s", in.c,
			       in.h, in.w, in.cb ? " feature map" : " shape");
	if (in.c % 3)
		return sl_fail(err, SL_EINVAL,
			       "model: attention reads q, k and v side by side: %d columns is no "
			       "multiple of 3", in.c);
	const int e = in.c / 3;
	if (n->heads < 1 || e % n->heads)
		return sl_fail(err, SL_EINVAL,
			       "model: attention with %d heads over width %d: heads must divide it",
			       n->heads, e);
	n->out = (shape){e, t, 1, 0};
	const double tt = (double)t * t;
	n->flops_fwd = 4.0 * tt * e + 5.0 * n->heads * tt;
	n->flops_bwd_x = 8.0 * tt * e + 4.0 * n->heads * tt;
	return 0;
}

static size_t
attn_scratch(const node *n)
{
	return sizeof(float) * (size_t)n->heads * n->out.h * n->out.h;
}

static void
attn_forward(node *n, backend *be, const float *p, const float *const *x, float *y,
	     int batch)
{
	(void)p;
	be->ops->attn_fwd(be, x[0], y, n->scratch, batch, n->out.h, n->heads,
			  n->out.c / n->heads);
}

static void
attn_backward(node *n, backend *be, const float *p, const float *const *x, const float *y,
	      float *dy, float *const *dx, float *g, int batch)
{
	(void)p, (void)y, (void)g;
	if (dx[0])
		be->ops->attn_bwd(be, x[0], n->scratch, dy, dx[0], batch, n->out.h, n->heads,
				  n->out.c / n->heads);
}

const op_class op_attention = {
	.name = "attention",
	.n_in = 1,
	.setup = attn_setup,
	.scratch_bytes = attn_scratch,
	.forward = attn_forward,
	.backward = attn_backward,
	.check = op_check_seq,
};
