/* wbatch.h - a batch as the run hands it to a worker, local or remote:
 * sample indices into the training set and the key of their views
 * (augment.h). Plain data: the run's API (run.h) names it without
 * bringing in the worker's model. */
#ifndef SL_WBATCH_H
#define SL_WBATCH_H

#include <stdint.h>

#include "augment.h"

typedef struct wbatch {
	const uint32_t *idx;
	int n;
	aug_key aug; /* aug.kind AUG_NONE: the samples as they are */
} wbatch;

#endif
