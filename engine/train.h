/* train.h - one worker, plain SGD (optional momentum and weight decay):
 * the sequential baseline every asynchronous rule is measured against.
 * Shuffles each epoch from the seed, keeps the last partial batch, evaluates
 * on the test set every eval_every updates and at each epoch end, and
 * reports through a callback so the caller decides how to log. Training
 * time excludes evaluation. */
#ifndef SL_TRAIN_H
#define SL_TRAIN_H

#include <stdint.h>

#include "dataset.h"
#include "model.h"
#include "stats.h"

typedef struct train_opts {
	float lr, momentum, weight_decay;
	int batch;
	uint64_t seed;
	int eval_every;        /* updates between evaluations; 0: epoch ends */
	/* stop when any limit that is set (> 0) is reached */
	double stop_epochs;
	uint64_t stop_steps;
	double stop_seconds;   /* training seconds */
	double target_acc;
} train_opts;

/* One evaluation (or the final summary). */
typedef struct train_eval {
	uint64_t v;            /* updates applied */
	double t;              /* seconds since start (wall) */
	double train_s;        /* training seconds so far, evaluation excluded */
	double epoch;          /* samples / train set size */
	uint64_t samples;
	double train_loss;     /* mean batch loss since the previous record */
	double test_loss, test_acc, best_acc;
	double samples_per_s;  /* samples / train_s */
	stale_hist stale;      /* cumulative staleness of applied updates */
	int final;             /* 1 for the end record */
	const char *stop_reason;
} train_eval;

typedef struct train_cb {
	/* each evaluation (final = 0) and the end (final = 1) */
	void (*eval)(void *ud, const train_eval *ev);
	/* after every update, for progress display; may be NULL */
	void (*step)(void *ud, const train_eval *ev);
	void *ud;
} train_cb;

/* Train m on d until a stop condition holds. Returns 0, or a negative code
 * with err set (bad options). */
int train_run(model *m, const dataset_pair *d, const train_opts *o,
	      const train_cb *cb, train_eval *result, char *err);

#endif
