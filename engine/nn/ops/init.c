/* init.c - what the parameterised ops share: their initial weights. */
#include <math.h>
#include <string.h>

#include "ops.h"
#include "sl.h"

void
op_init_weights(const node *n, float *w, int fan_in, int fan_out, rng *r)
{
	if (n->he_init) {
		double sd = sqrt(2.0 / fan_in);
		for (size_t i = 0; i < n->n_weights; i++)
			w[i] = (float)(sd * rng_normal(r));
	} else {
		double a = sqrt(6.0 / (fan_in + fan_out));
		for (size_t i = 0; i < n->n_weights; i++)
			w[i] = (float)(a * (2.0 * rng_uniform(r) - 1.0));
	}
	memset(w + n->n_weights, 0, sizeof(float) * (n->n_params - n->n_weights));
}

void
op_init_normal(float *w, size_t n, double std, rng *r)
{
	for (size_t i = 0; i < n; i++)
		w[i] = (float)(std * rng_normal(r));
}

int
op_check_seq(const node *n, const backend *be, char *err)
{
	const backend_ops *o = be->ops;
	if (o->embed_fwd && o->embed_bwd && o->layernorm_fwd && o->layernorm_bwd &&
	    o->gelu_fwd && o->gelu_bwd && o->attn_fwd && o->attn_bwd)
		return 0;
	return sl_fail(err, SL_EUNSUP,
		       "model: the %s backend has no %s op (the transformer's ops run on "
		       "ref, cpu and cuda)", o->name, n->op->name);
}
