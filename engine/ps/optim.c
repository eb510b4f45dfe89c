/* optim.c - the optimiser's state and step, and the learning-rate
 * schedule (docs/rules.md, "Optimisers"). */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double
lr_sched_factor(const lr_sched *s, uint64_t v)
{
	/* v updates are applied: this is update number v (from 0), as
	 * nanoGPT's get_lr(it) */
	double it = (double)v, warm = s->warmup, fl = s->floor;
	if (it < warm)
		return (it + 1) / (warm + 1);
	switch (s->kind) {
	case SCHED_COSINE:
	case SCHED_LINEAR: {
		double span = s->decay_updates - warm;
		if (it >= s->decay_updates || span <= 0)
			return fl;
		double r = (it - warm) / span;
		double c = s->kind == SCHED_COSINE ? 0.5 * (1 + cos(M_PI * r)) : 1 - r;
		return fl + c * (1 - fl);
	}
	case SCHED_STEP: {
		double cuts = s->step_every > 0 ? floor((it - warm) / s->step_every) : 0;
		double f = pow(s->gamma, cuts);
		return f > fl ? f : fl;
	}
	default:
		return 1;
	}
}

/* ---- the optimiser --------------------------------------------------------- */

int
optim_init(optim *o, backend *be, size_t n, const ps_layer *layers, int n_layers)
{
	*o = (optim){.be = be, .n = n, .layers = layers, .n_layers = n_layers,
		     .kind = OPT_SGD};
	o->steps = calloc((size_t)(n_layers > 0 ? n_layers : 1), sizeof(uint64_t));
	return o->steps ? 0 : -SL_ENOMEM;
}

void
optim_free(optim *o)
{
	if (!o->be)
		return;
	o->be->ops->free(o->be, o->m);
	o->be->ops->free(o->be, o->v);
	o->be->ops->free(o->be, o->clipped);
	free(o->steps);
	memset(o, 0, sizeof(*o));
}

void
optim_reset(optim *o)
{
	if (o->m)
		o->be->ops->zero(o->be, o->m, sizeof(float) * o->n);
	if (o->v)
		o->be->ops->zero(o->be, o->v, sizeof(float) * o->n);
	if (o->steps)
		memset(o->steps, 0, sizeof(uint64_t) * (size_t)o->n_layers);
}

static int
adam_family(int kind)
{
	return kind == OPT_ADAM || kind == OPT_ADAMW;
}

static float *
zalloc(optim *o)
{
	return o->be->ops->alloc(o->be, sizeof(float) * (o->n ? o->n : 1)); /* zeroed */
}

int
optim_set(optim *o, const opt_cfg *oc, float mu)
{
	if (adam_family(o->kind) != adam_family(oc->kind)) {
		/* a new family starts from zero: a velocity is not a mean of
		 * gradients (docs/rules.md) */
		optim_reset(o);
	}
	o->kind = oc->kind;
	int need_m = oc->kind != OPT_SGD || mu > 0;
	if ((need_m && !o->m && !(o->m = zalloc(o))) ||
	    (adam_family(oc->kind) && !o->v && !(o->v = zalloc(o))) ||
	    (oc->clip > 0 && !o->clipped && !(o->clipped = zalloc(o))))
		return -SL_ENOMEM;
	return 0;
}

/* clipping: g on [off, n), or its copy scaled to the norm clip when it
 * is longer (torch's clip_grad_norm_: the factor clip / (norm + 1e-6)) */
static const float *
clip(optim *o, backend *ex, const float *g, size_t off, double c)
{
	if (!(c > 0) || !o->clipped || off >= o->n)
		return g;
	double norm = sqrt(ex->ops->sumsq(ex, g + off, o->n - off));
	if (!(norm > c))
		return g;
	ex->ops->copy(ex, o->clipped + off, g + off, sizeof(float) * (o->n - off));
	ex->ops->scal(ex, o->n - off, (float)(c / (norm + 1e-6)), o->clipped + off);
	return o->clipped;
}

/* one step of layer l: the sgd family, nesterov, adam or adamw */
static void
step_layer(optim *o, backend *be, int l, float *w, const float *g, const opt_cfg *oc,
	   float lr, float mu, float wd)
{
	const ps_layer *L = &o->layers[l];
	size_t off = L->off;
	if (oc->kind == OPT_SGD || oc->kind == OPT_MOMENTUM) {
		be->ops->sgd(be, w + off, g + off, o->m && mu > 0 ? o->m + off : NULL, L->len,
			     lr, mu, wd);
		return;
	}
	if (oc->kind == OPT_NESTEROV) {
		opt_step s = {.lr = lr, .mu = mu, .wd = wd, .shrink = 1};
		be->ops->opt_step(be, w + off, g + off, o->m + off, NULL, L->len, &s);
		return;
	}
	uint64_t t = ++o->steps[l];
	double b1 = oc->beta1, b2 = oc->beta2;
	opt_step s = {
		.adam = 1,
		.lr = lr,
		.b1 = (float)b1,
		.b2 = (float)b2,
		.c1 = (float)(1 - b1),
		.c2 = (float)(1 - b2),
		.eps = (float)oc->eps,
		.step_size = (float)(lr / (1 - pow(b1, (double)t))),
		.bc2_sqrt = (float)sqrt(1 - pow(b2, (double)t)),
		.shrink = 1,
	};
	if (oc->kind == OPT_ADAM) {
		s.wd = wd;
		be->ops->opt_step(be, w + off, g + off, o->m + off, o->v + off, L->len, &s);
		return;
	}
	/* adamw: decoupled decay of the weights, not of the biases */
	size_t wl = L->wlen < L->len ? L->wlen : L->len;
	s.shrink = (float)(1 - (double)lr * wd);
	if (wl)
		be->ops->opt_step(be, w + off, g + off, o->m + off, o->v + off, wl, &s);
	s.shrink = 1;
	if (L->len > wl)
		be->ops->opt_step(be, w + off + wl, g + off + wl, o->m + off + wl,
				  o->v + off + wl, L->len - wl, &s);
}

void
optim_step(optim *o, backend *ex, float *w, const float *g, size_t off, const opt_cfg *oc,
	   float lr, float mu, float wd)
{
	g = clip(o, ex, g, off, oc->clip);
	if (oc->kind == OPT_SGD || oc->kind == OPT_MOMENTUM) {
		/* one call over the range: the same bits as layer by layer */
		ex->ops->sgd(ex, w + off, g + off, o->m && mu > 0 ? o->m + off : NULL,
			     o->n - off, lr, mu, wd);
		return;
	}
	for (int l = 0; l < o->n_layers; l++)
		if (o->layers[l].off >= off)
			step_layer(o, ex, l, w, g, oc, lr, mu, wd);
}

int
optim_local_step(optim **o, backend *be, float *w, const float *g, size_t off, size_t n,
		 const ps_layer *layers, int n_layers, const opt_cfg *oc, float lr, float mu,
		 float wd)
{
	if (oc->kind == OPT_SGD && !(oc->clip > 0)) {
		if (off < n)
			be->ops->sgd(be, w + off, g + off, NULL, n - off, lr, 0, 0);
		return 0;
	}
	if (oc->kind == OPT_SGD)
		mu = wd = 0; /* the plain step, clipped */
	if (!*o) {
		if (!(*o = calloc(1, sizeof(**o))))
			return -SL_ENOMEM;
		if (optim_init(*o, be, n, layers, n_layers) < 0) {
			free(*o);
			*o = NULL;
			return -SL_ENOMEM;
		}
	}
	if (optim_set(*o, oc, mu) < 0)
		return -SL_ENOMEM;
	optim_step(*o, be, w, g, off, oc, lr, mu, wd);
	return 0;
}

void
optim_mix(backend *be, float *x, const float *g, size_t n, float a)
{
	if (!(a > 0)) {
		be->ops->copy(be, x, g, sizeof(float) * n);
	} else if (a < 1) {
		be->ops->axpy(be, n, -1.0f, g, x);
		be->ops->scal(be, n, a, x);
		be->ops->axpy(be, n, 1.0f, g, x);
	}
}

void
optim_step_layers(optim *o, backend *ex, float *w, const float *g, const int *sent,
		  const opt_cfg *oc, float lr, float mu, float wd)
{
	size_t off = o->n;
	for (int l = 0; l < o->n_layers; l++)
		if (sent[l] && o->layers[l].off < off)
			off = o->layers[l].off;
	/* the layers sent are [off, n): partial backprop sends a tail */
	g = clip(o, ex, g, off, oc->clip);
	for (int l = 0; l < o->n_layers; l++)
		if (sent[l])
			step_layer(o, ex, l, w, g, oc, lr, mu, wd);
}
