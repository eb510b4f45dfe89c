/* split.h - a training set split among workers (the run object's
 * "data_split"; docs/architecture.md, "Non-IID data"): pure functions of
 * the labels, the worker count and a seeded stream, no I/O, no globals.
 *
 *   iid              no split: every worker draws from the whole set
 *   shards:K         the set sorted by label, cut into N*K near-equal
 *                    shards, K dealt to each worker (seeded)
 *   dirichlet:ALPHA  per class, a Dirichlet(ALPHA) share for each worker,
 *                    with the balancing and the retry until every part
 *                    holds SPLIT_MIN_PART samples (MODERN.md section 8)
 *   contiguous       worker j the j-th of N contiguous ranges of indices
 *
 * A split is the parts' indices concatenated: part j is
 * idx[off[j] .. off[j+1]), in increasing order of index. */
#ifndef SL_SPLIT_H
#define SL_SPLIT_H

#include <stdint.h>

#include "dataset.h"
#include "rng.h"
#include "sl.h"

#define SPLIT_MIN_PART 10   /* dirichlet: the fewest samples of a part */
#define SPLIT_TRIES 1000    /* dirichlet: draws before giving up */
#define SPLIT_SPEC_LEN 32   /* the field's longest value, with the NUL */
#define SPLIT_MAX_PARTS 256 /* the most workers a run has (PS_MAX_WORKERS) */

typedef enum split_kind {
	SPLIT_IID,
	SPLIT_SHARDS,
	SPLIT_DIRICHLET,
	SPLIT_CONTIGUOUS,
} split_kind;

typedef struct split_spec {
	split_kind kind;
	int k;        /* shards: shards per worker */
	double alpha; /* dirichlet: the concentration */
} split_spec;

/* Parse "iid", "shards:K" (K in [1, 65536]), "dirichlet:ALPHA" (ALPHA a
 * finite number > 0) or "contiguous". 0, or -SL_EINVAL with err naming
 * data_split and what it takes. */
int split_parse(const char *s, split_spec *out, char *err);

/* Whether a split of n_train samples (labelled: images) into n_parts
 * parts can be asked for: shards and dirichlet need labels; shards
 * needs n_parts * K samples, dirichlet n_parts * SPLIT_MIN_PART,
 * contiguous n_parts. 0, or -SL_EINVAL naming data_split. */
int split_fits(const split_spec *sp, uint32_t n_train, int labelled, int n_parts,
	       char *err);

/* The split of d's training samples into n_parts parts (n_parts >= 1;
 * sp not iid, n_parts <= SPLIT_MAX_PARTS) into idx[0..d->n) and off[0..n_parts], from the stream
 * (seed, gen): the same bits for the same arguments. 0, or -SL_EINVAL
 * (split_fits, or dirichlet found no split within SPLIT_TRIES draws) or
 * -SL_ENOMEM, with err naming data_split. */
int split_make(const split_spec *sp, const dataset *d, int n_parts, uint64_t seed,
	       uint64_t gen, uint32_t *idx, uint32_t *off, char *err);

/* Counts per class (counts[0..d->classes)) of the samples idx[0..n). */
void split_hist(const dataset *d, const uint32_t *idx, uint32_t n, uint32_t *counts);

/* A Gamma(a, 1) draw (a > 0; Marsaglia and Tsang, with the a < 1 boost). */
double split_gamma(rng *r, double a);

#endif
