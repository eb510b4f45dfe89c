/* wstep.c - a worker's step (see wstep.h). */
#include "wstep.h"

#include <stdlib.h>

/* the augmented samples go in as a batch of their own: x holds them in
 * order, so the indices are 0..n-1 */
static void
load_augmented(model *m, const dataset *train, const wbatch *b)
{
	size_t n = (size_t)b->n;
	float *x = malloc(sizeof(float) * (size_t)train->dim * n);
	uint32_t *seq = malloc(sizeof(uint32_t) * n);
	uint8_t *y = malloc(n);
	SL_ASSERT(x != NULL && seq != NULL && y != NULL);
	aug_gather(train, b->idx, b->n, &b->aug, x);
	for (size_t i = 0; i < n; i++) {
		seq[i] = (uint32_t)i;
		y[i] = train->y[b->idx[i]];
	}
	model_load_batch(m, x, y, seq, b->n);
	free(y);
	free(seq);
	free(x);
}

void
wstep_load(model *m, const dataset *train, const wbatch *b)
{
	if (b->aug.kind == AUG_CROP_FLIP)
		load_augmented(m, train, b);
	else
		model_load_batch(m, train->x, train->y, b->idx, b->n);
}

double
wstep(model *m, const dataset *train, const float *weights, const wbatch *b, int depth)
{
	wstep_load(m, train, b);
	return model_step(m, weights, b->n, depth);
}
