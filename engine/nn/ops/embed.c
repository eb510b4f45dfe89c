/* embed.c - the token and learned position embedding of a language model:
 * the input holds T token ids per sample (floats holding integers in [0,
 * V), V = n->vocab), the output is [B][T][E] (E = n->units, shape {E, T,
 * 1}): y[b][t] = wte[id] + wpe[t]. Parameters: the token table wte [V][E],
 * then the position table wpe [T][E], both weights (no bias), normal with
 * sd 0.02 as nanoGPT's; when a tied LM head holds wte (n->tied, n->tie the
 * head), only wpe. The backward is a scatter-add into wte (a token
 * repeated in the batch adds each of its positions' gradients) and a sum
 * over the batch into wpe; the ids get no gradient. Tied, the head's
 * backward has written its share of wte's gradient first and this one adds
 * to it; a partial backward that stops above the embedding leaves the
 * table with the head's share alone. */
#include "ops.h"
#include "sl.h"

#define EMBED_MAX_VOCAB 65536

static int
embed_setup(node *n, char *err)
{
	shape in = n->in[0];
	if (in.cb)
		return sl_fail(err, SL_EINVAL,
			       "model: embed reads token ids, not a %dx%dx%d feature map", in.c,
			       in.h, in.w);
	if (n->units < 1)
		return sl_fail(err, SL_EINVAL, "model: embed with width (units) %d", n->units);
	if (n->vocab < 2 || n->vocab > EMBED_MAX_VOCAB)
		return sl_fail(err, SL_EINVAL, "model: embed with vocab %d (2 to %d)", n->vocab,
			       EMBED_MAX_VOCAB);
	const int t = (int)shape_size(in), e = n->units;
	n->out = (shape){e, t, 1, 0};
	n->n_weights = (size_t)(n->tied ? t : n->vocab + t) * e;
	n->w_cols = (size_t)e;
	n->n_params = n->n_weights;
	n->flops_fwd = (double)t * e;
	n->flops_bwd_w = 2.0 * t * e;
	return 0;
}

static void
embed_init(const node *n, float *p, rng *r)
{
	op_init_normal(p + n->p_off, n->n_params, 0.02, r);
}

static void
embed_forward(node *n, backend *be, const float *p, const float *const *x, float *y,
	      int batch)
{
	const int e = n->units;
	const float *wte = p + (n->tied ? n->tie->p_off : n->p_off);
	const float *wpe = n->tied ? p + n->p_off : wte + (size_t)n->vocab * e;
	be->ops->embed_fwd(be, x[0], wte, wpe, y, batch, n->out.h, e, n->vocab);
}

static void
embed_backward(node *n, backend *be, const float *p, const float *const *x,
	       const float *y, float *dy, float *const *dx, float *g, int batch)
{
	(void)p, (void)y;
	const int e = n->units, t = n->out.h;
	float *dwte = g + (n->tied ? n->tie->p_off : n->p_off);
	float *dwpe = n->tied ? g + n->p_off : dwte + (size_t)n->vocab * e;
	be->ops->embed_bwd(be, x[0], dy, dwte, dwpe, batch, t, e, n->vocab, n->tied);
	if (dx[0]) /* ids are not differentiable */
		be->ops->zero(be, dx[0], sizeof(float) * (size_t)t * batch);
}

const op_class op_embed = {
	.name = "embed",
	.n_in = 1,
	.setup = embed_setup,
	.init = embed_init,
	.forward = embed_forward,
	.backward = embed_backward,
	.check = op_check_seq,
};
