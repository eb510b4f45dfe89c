/* gelu.c - the GELU activation, elementwise, in its tanh form (GPT-2's
 * and llm.c's, torch's nn.GELU(approximate="tanh"); nanoGPT's default is
 * the exact erf form, within 1e-3 of this one): y = x (1 + tanh(sqrt(2 /
 * pi) (x + 0.044715 x^3))) / 2. The backward reads the input x. */
#include "ops.h"
#include "sl.h"

static int
gelu_setup(node *n, char *err)
{
	(void)err;
	n->out = n->in[0];
	n->flops_fwd = 10.0 * (double)shape_size(n->in[0]);
	n->flops_bwd_x = 16.0 * (double)shape_size(n->in[0]);
	return 0;
}

static void
gelu_forward(node *n, backend *be, const float *p, const float *const *x, float *y,
	     int batch)
{
	(void)p;
	be->ops->gelu_fwd(be, x[0], y, shape_size(n->out) * (size_t)batch);
}

static void
gelu_backward(node *n, backend *be, const float *p, const float *const *x, const float *y,
	      float *dy, float *const *dx, float *g, int batch)
{
	(void)p, (void)y, (void)g;
	if (dx[0])
		be->ops->gelu_bwd(be, x[0], dy, dx[0], shape_size(n->out) * (size_t)batch);
}

const op_class op_gelu = {
	.name = "gelu",
	.n_in = 1,
	.setup = gelu_setup,
	.forward = gelu_forward,
	.backward = gelu_backward,
	.check = op_check_seq,
};
