/* delay.h - injected delays: per-worker distributions drawn from the
 * worker's own RNG stream, plus transfer time at a given bandwidth. */
#ifndef SL_DELAY_H
#define SL_DELAY_H

#include "config.h"
#include "rng.h"

/* One draw of the delay in milliseconds (>= 0). DELAY_NONE and
 * DELAY_VERSION give 0 (version delays act on staleness, not time).
 * const: mean; uniform: mean +- spread*mean; exp: mean; lognormal: mean
 * with shape sigma (mu = ln mean - sigma^2/2); pareto: mean with shape
 * alpha (scale = mean (alpha-1)/alpha). */
double delay_draw_ms(const delay_cfg *d, rng *r);

/* Version staleness for DELAY_VERSION: uniform in {0..s}; 0 otherwise. */
int delay_draw_version(const delay_cfg *d, rng *r);

/* Milliseconds to send `bytes` at d->bandwidth_mbps (0 when unlimited). */
double delay_transfer_ms(const delay_cfg *d, double bytes);

#endif
