/* add.c - the sum of two nodes' outputs of one shape and layout, y = a + b
 * (a residual connection): two maps of the same channels and size, or two
 * rows of the same length; the backward hands dy to both inputs. */
#include "ops.h"
#include "sl.h"

static int
add_setup(node *n, char *err)
{
	shape a = n->in[0], b = n->in[1];
	/* maps: the same channels and size; rows: the same length */
	int same = a.cb == b.cb &&
		   (a.cb ? a.c == b.c && a.h == b.h && a.w == b.w
			 : shape_size(a) == shape_size(b));
	if (!same)
		return sl_fail(err, SL_EINVAL,
			       "model: add of a %dx%dx%d%s and a %dx%dx%d%s output: the shapes differ",
			       a.c, a.h, a.w, a.cb ? " map" : "", b.c, b.h, b.w,
			       b.cb ? " map" : "");
	/* rows of one shape (a sequence's [B][T][E]) keep it */
	int rows_alike = !a.cb && a.c == b.c && a.h == b.h && a.w == b.w;
	n->out = a.cb || rows_alike ? a : (shape){(int)shape_size(a), 1, 1, 0};
	n->flops_fwd = (double)shape_size(a);
	return 0;
}

static void
add_forward(node *n, backend *be, const float *p, const float *const *x,
	    float *y, int batch)
{
	(void)p;
	size_t len = shape_size(n->out) * (size_t)batch;
	be->ops->copy(be, y, x[0], sizeof(float) * len);
	be->ops->axpy(be, len, 1.0f, x[1], y);
}

static void
add_backward(node *n, backend *be, const float *p, const float *const *x,
	     const float *y, float *dy, float *const *dx, float *g, int batch)
{
	(void)p, (void)x, (void)y, (void)g;
	size_t bytes = sizeof(float) * shape_size(n->out) * (size_t)batch;
	for (int i = 0; i < 2; i++)
		if (dx[i])
			be->ops->copy(be, dx[i], dy, bytes);
}

const op_class op_add = {
	.name = "add",
	.n_in = 2,
	.setup = add_setup,
	.forward = add_forward,
	.backward = add_backward,
};
