/* shortcut.c - a residual block's sum with the CIFAR ResNet's "option A"
 * shortcut (He et al. 2016, section 4.2): y = act(a + S(x)) where a (input
 * 0, the block's second batch norm) is a [Cout][Ho][Wo][B] map and S takes
 * x (input 1, the block's input, [Cin][H][W][B]) to a's shape: every
 * n->stride-th row and column (x[:, :, ::s, ::s]), the (Cout - Cin) / 2
 * new channels before and the rest after zero (backend shortcut_fwd). A
 * relu is fused on the sum when n->relu (the block's last relu). The
 * backward: da = dy (masked by the relu), dx = S^T dy. A backend with
 * residual_fwd/bwd (cpu) does each in one pass over the maps, to the same
 * bits. */
#include "ops.h"
#include "sl.h"

static int
shortcut_setup(node *n, char *err)
{
	shape a = n->in[0], x = n->in[1];
	int s = n->stride ? n->stride : 1;
	if (!a.cb || !x.cb)
		return sl_fail(err, SL_EINVAL,
			       "model: shortcut needs two feature-map inputs");
	if (s != 1 && s != 2)
		return sl_fail(err, SL_EINVAL,
			       "model: shortcut stride %d (1 or 2)", n->stride);
	if (a.c < x.c || a.h != shortcut_out_dim(x.h, s) ||
	    a.w != shortcut_out_dim(x.w, s))
		return sl_fail(err, SL_EINVAL,
			       "model: shortcut of a %dx%dx%d map onto a %dx%dx%d one with stride %d: "
			       "the shapes do not fit",
			       x.c, x.h, x.w, a.c, a.h, a.w, s);
	n->stride = s;
	n->out = a;
	n->flops_fwd = 2.0 * (double)shape_size(a);
	/* dx to a is a copy; the FLOPs are S^T dy, input 1's */
	n->flops_bwd_x = 2.0 * (double)shape_size(a);
	n->flops_bwd_x1 = n->flops_bwd_x;
	return 0;
}

static void
shortcut_forward(node *n, backend *be, const float *p, const float *const *x,
		 float *y, int batch)
{
	(void)p;
	shape in = n->in[1];
	size_t len = shape_size(n->out) * (size_t)batch;
	if (be->ops->residual_fwd) { /* one pass, the same bits */
		be->ops->residual_fwd(be, x[0], x[1], y, in.c, in.h, in.w, n->out.c, n->stride,
				      batch, n->relu);
		return;
	}
	be->ops->copy(be, y, x[0], sizeof(float) * len);
	be->ops->shortcut_fwd(be, x[1], y, in.c, in.h, in.w, n->out.c,
			      n->stride, batch, 1);
	if (n->relu)
		be->ops->relu_fwd(be, y, y, len);
}

static void
shortcut_backward(node *n, backend *be, const float *p, const float *const *x,
		  const float *y, float *dy, float *const *dx, float *g, int batch)
{
	(void)p, (void)x, (void)g;
	shape in = n->in[1];
	size_t len = shape_size(n->out) * (size_t)batch;
	if (be->ops->residual_bwd) {
		be->ops->residual_bwd(be, y, dy, dx[0], dx[1], in.c, in.h, in.w, n->out.c,
				      n->stride, batch, n->relu);
		return;
	}
	if (n->relu)
		be->ops->relu_bwd(be, y, dy, dy, len);
	if (dx[0])
		be->ops->copy(be, dx[0], dy, sizeof(float) * len);
	if (dx[1])
		be->ops->shortcut_bwd(be, dy, dx[1], in.c, in.h, in.w, n->out.c,
				      n->stride, batch, 0);
}

const op_class op_shortcut = {
	.name = "shortcut",
	.n_in = 2,
	.setup = shortcut_setup,
	.forward = shortcut_forward,
	.backward = shortcut_backward,
};
