/* wstep.c - a worker's step (see wstep.h). */
#include "wstep.h"

double
wstep(model *m, const dataset *train, const float *weights, const uint32_t *idx, int batch,
      int depth)
{
	model_load_batch(m, train->x, train->y, idx, batch);
	return model_step(m, weights, batch, depth);
}
