/* wstep.h - a worker's step: what every worker computes, in-process
 * (engine/run/step.c) or in a remote worker process (daemon/worker/cmd_worker.c),
 * with nothing of the run loop, the clocks or the server: the batch's
 * samples from the training set (in the views the augmentation draws for
 * them), then forward and backward on the weights it was given, to the
 * partial-backprop depth. */
#ifndef SL_WSTEP_H
#define SL_WSTEP_H

#include <stdint.h>

#include "dataset.h"
#include "model.h"
#include "wbatch.h"

/* The batch b of train into m's input, augmented as b->aug says (with
 * AUG_NONE exactly model_load_batch). */
void wstep_load(model *m, const dataset *train, const wbatch *b);

/* The batch b into m, forward and backward on weights (m's layout) to
 * depth (0: every layer): the gradient in m->grads from
 * model_tail_offset(m, depth) on. Returns the batch loss. */
double wstep(model *m, const dataset *train, const float *weights, const wbatch *b, int depth);

#endif
