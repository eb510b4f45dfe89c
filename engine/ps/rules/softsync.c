/* softsync.c - n-softsync (Zhang, Gupta, Lian, Liu, IJCAI 2016): the server
 * averages every max(1, N/n) gradients, in arrival order; workers never
 * wait. n = 1 is a round of N (but without the barrier), n = N is asgd. */
#include "rules.h"

static int
round_size(int n_running, const rule_params *rp)
{
	return (int)((double)n_running / rp->n);
}

const rule_class rule_softsync = {
	.name = "softsync",
	.doc = "n-softsync: average every N/n gradients, no barrier",
	.flags = RULE_ROUND,
	.params = (const char *const[]){"n", RULE_PUSH_PARAMS, NULL},
	.server_push = rule_server_round,
	.round_size = round_size,
};
