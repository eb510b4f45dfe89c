/* delay.c - delay distributions. */
#include "delay.h"

#include <math.h>

double
delay_draw_ms(const delay_cfg *d, rng *r)
{
	double m = d->mean_ms, u;
	switch (d->dist) {
	case DELAY_CONST:
		return m;
	case DELAY_UNIFORM:
		return m + d->spread * m * (2.0 * rng_uniform(r) - 1.0);
	case DELAY_EXP:
		u = rng_uniform(r);
		return -m * log1p(-u);
	case DELAY_LOGNORMAL: {
		if (m <= 0)
			return 0;
		double s = d->sigma, mu = log(m) - 0.5 * s * s;
		return exp(mu + s * rng_normal(r));
	}
	case DELAY_PARETO: {
		double a = d->alpha, xm = m * (a - 1.0) / a;
		u = rng_uniform(r);
		return xm / pow(1.0 - u, 1.0 / a);
	}
	case DELAY_NONE:
	case DELAY_VERSION:
		break;
	}
	return 0.0;
}

int
delay_draw_version(const delay_cfg *d, rng *r)
{
	if (d->dist != DELAY_VERSION || d->s <= 0)
		return 0;
	return (int)rng_below(r, (uint64_t)d->s + 1);
}

double
delay_transfer_ms(const delay_cfg *d, double bytes)
{
	if (!(d->bandwidth_mbps > 0))
		return 0.0;
	return bytes * 8.0 / (d->bandwidth_mbps * 1e6) * 1e3;
}
