/* ssp.c - stale synchronous parallel (Ho et al., NIPS 2013): gradients are
 * applied on arrival, but a worker may not begin a step more than s clocks
 * (its pushed iterations) ahead of the slowest running worker. The clocks
 * count from the moment ssp took effect or s last changed (RULE_CLOCKS). */
#include "run_impl.h"
#include "rules.h"

static int
may_begin(const run *r, const worker *w)
{
	uint64_t mc = run_min_clock(r);
	return mc == UINT64_MAX || w->clock <= mc + (uint64_t)r->cfg.rp.s;
}

const rule_class rule_ssp = {
	.name = "ssp",
	.doc = "stale synchronous parallel: at most s clocks ahead of the slowest",
	.flags = RULE_CLOCKS,
	.params = (const char *const[]){"s", NULL},
	.may_begin = may_begin,
};
