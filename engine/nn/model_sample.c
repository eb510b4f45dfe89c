/* model_sample.c - one byte of text from a language model: the last T
 * tokens forward, the logits at the last position over a temperature, a
 * softmax, one draw. What stalelab sample prints, and the short sample a
 * run shows at each evaluation of a language model. */
#include <math.h>
#include <stdlib.h>

#include "model.h"

int
model_sample_next(model *m, const int *ids, size_t n, double temp, rng *g)
{
	const int T = m->input.w, V = m->classes;
	size_t k = n > (size_t)T ? n - (size_t)T : 0, len = n - k;
	float *x = calloc((size_t)T, sizeof(float));
	uint8_t *y = calloc((size_t)T, 1);
	float *logits = malloc(sizeof(float) * (size_t)V);
	double *p = malloc(sizeof(double) * (size_t)V);
	int next = -1;
	if (x && y && logits && p && len > 0) {
		/* causal attention: positions past the context's end change
		 * nothing before it, so a short context sits at 0..len-1 */
		for (size_t t = 0; t < len; t++)
			x[t] = (float)ids[k + t];
		uint32_t idx = 0;
		model_load_batch(m, x, y, &idx, 1);
		model_forward(m, NULL, 1, NULL);
		m->be->ops->download(m->be, logits, m->act[m->n_nodes] + (len - 1) * (size_t)V,
				     sizeof(float) * (size_t)V);
		double mx = -INFINITY, sum = 0;
		for (int v = 0; v < V; v++)
			mx = fmax(mx, logits[v] / temp);
		for (int v = 0; v < V; v++)
			sum += p[v] = exp(logits[v] / temp - mx);
		double u = rng_uniform(g) * sum;
		next = V - 1;
		for (int v = 0; v < V; v++)
			if ((u -= p[v]) < 0) {
				next = v;
				break;
			}
	}
	free(x);
	free(y);
	free(logits);
	free(p);
	return next;
}
