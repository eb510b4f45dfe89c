/* optim.h - an optimiser's state over a flat buffer of parameterised
 * layers, and its step (docs/rules.md, "Optimisers"): the server's updates
 * (ps.c) and a worker's local steps (engine/ps/rules/local.c) use the
 * same. The arithmetic is the backend's (sgd, opt_step, sumsq); the state
 * lives in the backend's memory. Not thread-safe. */
#ifndef SL_OPTIM_H
#define SL_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "ps_config.h"
#include "sl.h"

typedef struct optim {
	backend *be;             /* where the state lives */
	size_t n;
	const ps_layer *layers;  /* not owned */
	int n_layers;
	int kind;                /* the opt_kind the state belongs to */
	float *m;                /* the velocity, or Adam's first moment */
	float *v;                /* Adam's second moment */
	float *clipped;          /* clipping: the scaled gradient */
	uint64_t *steps;         /* Adam: each layer's steps (bias correction) */
} optim;

/* State for n floats in layers (kept by the caller); nothing allocated
 * in be yet. 0 or -SL_ENOMEM. */
int optim_init(optim *o, backend *be, size_t n, const ps_layer *layers, int n_layers);
void optim_free(optim *o);
/* The state back to a fresh optimiser's: velocity and moments zero, no
 * steps taken (the buffers kept). */
void optim_reset(optim *o);

/* Take oc (with momentum mu): a change of family (sgd, momentum, nesterov
 * against adam, adamw) zeroes the state; the buffers it needs are
 * allocated. 0, or -SL_ENOMEM. */
SL_MUST_USE int optim_set(optim *o, const opt_cfg *oc, float mu);

/* One step of w on [off, n) with g (the whole buffer's indexing) at lr,
 * momentum mu, weight decay wd, run on ex (a backend of o's memory): g
 * clipped to oc->clip first, then the sgd family in one call, the others
 * layer by layer (the layers that start at off or later). */
void optim_step(optim *o, backend *ex, float *w, const float *g, size_t off,
		const opt_cfg *oc, float lr, float mu, float wd);

/* A worker's local step on its own weights w (n floats), from off on,
 * with the gradient g at lr: plain SGD with no state when oc is sgd and
 * does not clip (a local step takes neither momentum nor weight decay),
 * else oc's step (sgd when clipping: plain, clipped), its state in *o,
 * made over layers at the first call that needs it. The daemon's workers
 * (engine/ps/rules/local.c) and a remote worker process running its phase
 * (daemon/worker/cmd_worker.c) both step through it: the same bits. 0, or
 * -SL_ENOMEM. */
SL_MUST_USE int optim_local_step(optim **o, backend *be, float *w, const float *g, size_t off,
				 size_t n, const ps_layer *layers, int n_layers,
				 const opt_cfg *oc, float lr, float mu, float wd);

/* x = g + a (x - g) on n floats, as streaming-diloco takes a global
 * fragment g into a worker's weights x (torchft's lerp): a <= 0 copies g,
 * a >= 1 keeps x. The daemon (engine/ps/rules/streaming_diloco.c) and a
 * remote worker process (daemon/worker/cmd_worker.c) both mix through it:
 * the same bits. */
void optim_mix(backend *be, float *x, const float *g, size_t n, float a);

/* The same for the layers whose sent[l] is set (a synchronous round's
 * average: the layers nobody sent are not updated). */
void optim_step_layers(optim *o, backend *ex, float *w, const float *g,
		       const int *sent, const opt_cfg *oc, float lr, float mu, float wd);

#endif
