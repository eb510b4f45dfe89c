/* sasgd.c - staleness-aware ASGD (Zhang, Gupta, Lian, Liu, IJCAI 2016):
 * the learning rate of a gradient tau versions stale is lr / tau. */
#include "ps.h"
#include "rules.h"

static int
server_push(ps *p, const ps_grad *g, int round_size, ps_result *res)
{
	(void)round_size;
	float lr = ps_lr(p);
	if (res->tau > 0)
		lr /= (float)res->tau;
	ps_step(p, g->g, g->off, lr);
	res->applied = 1;
	return 0;
}

const rule_class rule_sasgd = {
	.name = "sasgd",
	.doc = "staleness-aware ASGD: learning rate divided by the staleness",
	.params = (const char *const[]){RULE_PUSH_PARAMS, NULL},
	.server_push = server_push,
};
