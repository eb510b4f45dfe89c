/* async_gated.c - asynchronous local SGD with an age-gated outer step:
 * async-diloco whose server drops a pseudo-gradient that arrives more than
 * s outer versions stale (the hard threshold Liu et al. 2024 tried, at
 * tau > 10; ../docs/new-rule.md builds this file step by step). The
 * workers do what async-diloco's do (H inner steps from an anchor, then
 * Delta = anchor - weights), so their hooks are async-diloco's; only the
 * server's arithmetic is new. A dropped arrival leaves the weights and
 * the version as they were; its staleness is still recorded, so the
 * histogram's tail beyond s is what the gate dropped. */
#include "ps.h"
#include "rules.h"

/* the server: too old, dropped; else async-diloco's outer step (its
 * weighting, Delayed Nesterov and outer optimiser included) */
static int
server_push(ps *p, const ps_grad *g, int round_size, ps_result *res)
{
	if (res->tau > (uint64_t)ps_params(p)->s) {
		res->applied = 0;
		return 0;
	}
	return rule_async_diloco.server_push(p, g, round_size, res);
}

/* the workers: async-diloco's own hooks */
static void
pull(rule_run *e, rule_worker *w)
{
	rule_async_diloco.pull(e, w);
}

static uint64_t
deliver(rule_run *e, rule_worker *w)
{
	return rule_async_diloco.deliver(e, w);
}

static int
exchanges(const rule_run *e, const rule_worker *w)
{
	return rule_async_diloco.exchanges(e, w);
}

static int
phase_h(const rule_run *e, const rule_worker *w)
{
	return rule_async_diloco.phase_h(e, w);
}

const rule_class rule_async_gated = {
	.name = "async-gated",
	.doc = "asynchronous local SGD with an age gate: async-diloco, its pseudo-gradients "
	       "more than s outer versions stale dropped",
	.flags = RULE_LOCAL | RULE_STALE_AT_EXCHANGE,
	.params = (const char *const[]){"H", "s", "outer_lr", "outer_momentum", "outer_opt",
					"dn_period", "weighting", "dylu", "inner_reset",
					RULE_PUSH_PARAMS, NULL},
	.server_push = server_push,
	.pull = pull,
	.deliver = deliver,
	.exchanges = exchanges,
	.phase_h = phase_h,
	.stale_unit = "outer versions",
};
