/* optim.c - the learning-rate schedule (docs/rules.md, "Optimisers"). The
 * optimiser's arithmetic is the backend's (sgd, opt_step); its state and
 * its steps per layer are the server's (ps.c). */
#include <math.h>

#include "ps_config.h"

double
lr_sched_factor(const lr_sched *s, uint64_t v)
{
	/* v updates are applied: this is update number v (from 0), as
	 * nanoGPT's get_lr(it) */
	double it = (double)v, warm = s->warmup, fl = s->floor;
	if (it < warm)
		return (it + 1) / (warm + 1);
	switch (s->kind) {
	case SCHED_COSINE:
	case SCHED_LINEAR: {
		double span = s->decay_updates - warm;
		if (it >= s->decay_updates || span <= 0)
			return fl;
		double r = (it - warm) / span;
		double c = s->kind == SCHED_COSINE ? 0.5 * (1 + cos(M_PI * r)) : 1 - r;
		return fl + c * (1 - fl);
	}
	case SCHED_STEP: {
		double cuts = s->step_every > 0 ? floor((it - warm) / s->step_every) : 0;
		double f = pow(s->gamma, cuts);
		return f > fl ? f : fl;
	}
	default:
		return 1;
	}
}
