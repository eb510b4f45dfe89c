/* ssp.c - stale synchronous parallel (Ho et al., NIPS 2013): gradients are
 * applied on arrival, but a worker may not begin a step more than s clocks
 * (its pushed iterations) ahead of the slowest running worker. The clocks
 * count from the moment ssp took effect or s last changed (RULE_CLOCKS). */
#include "rules.h"

static int
may_begin(const rule_run *e, const rule_worker *w)
{
	uint64_t mc = e->ops->min_clock(e);
	return mc == UINT64_MAX || w->clock <= mc + (uint64_t)e->rp->s;
}

const rule_class rule_ssp = {
	.name = "ssp",
	.doc = "stale synchronous parallel: at most s clocks ahead of the slowest",
	.flags = RULE_CLOCKS,
	.params = (const char *const[]){"s", RULE_PUSH_PARAMS, NULL},
	.may_begin = may_begin,
};
