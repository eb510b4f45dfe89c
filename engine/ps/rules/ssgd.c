/* ssgd.c - bulk-synchronous SGD: a barrier each round; the server averages
 * the round's N gradients (per layer, over the workers that sent it) and
 * takes one step. Every gradient is applied at staleness 0.
 * Dean et al., NIPS 2012 (the synchronous baseline). */
#include "ps.h"
#include "rules.h"

int
rule_server_round(ps *p, const ps_grad *g, int round_size, ps_result *res)
{
	res->applied = ps_round_add(p, g, round_size);
	res->round_count = ps_round_pending(p);
	return 0;
}

const rule_class rule_ssgd = {
	.name = "ssgd",
	.doc = "synchronous SGD: a barrier each round, the average of N gradients",
	.flags = RULE_ROUND | RULE_WAIT,
	.params = (const char *const[]){RULE_PUSH_PARAMS, NULL},
	.server_push = rule_server_round,
};
