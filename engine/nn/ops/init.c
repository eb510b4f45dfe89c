/* init.c - what the parameterised ops share: their initial weights. */
#include <math.h>
#include <string.h>

#include "ops.h"

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
