/* rng.h - small deterministic random streams (xoshiro256** seeded by
 * splitmix64). Every stream is a value owned by its user: a run, a worker,
 * a delay model. No global state. */
#ifndef SL_RNG_H
#define SL_RNG_H

#include <stdint.h>

typedef struct rng {
	uint64_t s[4];
} rng;

/* Seed a stream from (seed, stream id): distinct ids give independent
 * streams for the same run seed. */
void rng_seed(rng *r, uint64_t seed, uint64_t stream);
uint64_t rng_next(rng *r);
/* Uniform in [0, 1) with 53 bits. */
double rng_uniform(rng *r);
/* Uniform integer in [0, n), n > 0, without modulo bias. */
uint64_t rng_below(rng *r, uint64_t n);
/* Standard normal (Box-Muller, no cached second value: state stays one
 * struct of four words so checkpoints are trivial). */
double rng_normal(rng *r);
/* Fisher-Yates shuffle of idx[0..n). */
void rng_shuffle(rng *r, uint32_t *idx, uint32_t n);

#endif
