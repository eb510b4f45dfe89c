/* dcasgd.c - delay-compensated ASGD (Zheng et al., ICML 2017): the server
 * keeps the weights each worker read (its backup) and corrects a gradient
 * computed on them for the drift since: g' = g + lambda g*g*(w - backup).
 * Adaptive variant: lambda = lambda0 / sqrt(ms + eps), with ms a running
 * mean of g*g per worker (m its decay). lambda = 0 is asgd exactly. */
#include "ps.h"
#include "rules.h"

#define DC_EPS 1e-7f

static int
server_push(ps *p, const ps_grad *g, int round_size, ps_result *res)
{
	(void)round_size;
	const rule_params *rp = ps_params(p);
	/* the weights the gradient was computed on: carried with it (held
	 * at the server), else the worker's last read */
	const float *bak = g->bak ? g->bak : ps_backup(p, g->worker);
	const float *grad = g->g;
	if (bak) {
		backend *be = ps_backend(p);
		size_t n = ps_size(p);
		float *ms = NULL;
		if (rp->adaptive) {
			ms = ps_worker_state(p, g->worker);
			if (ms)
				ms += g->off;
		}
		float *tmp = ps_scratch(p);
		be->ops->dc_grad(be, n - g->off, g->g + g->off,
				 ps_weights(p) + g->off, bak + g->off, ms,
				 (float)rp->lambda, (float)rp->m, DC_EPS,
				 tmp + g->off);
		grad = tmp;
	}
	/* never pulled: no reference, a plain step */
	ps_step(p, grad, g->off, ps_lr(p));
	res->applied = 1;
	return 0;
}

const rule_class rule_dcasgd = {
	.name = "dcasgd",
	.doc = "delay-compensated ASGD (constant or adaptive lambda)",
	.flags = RULE_BACKUP,
	.params = (const char *const[]){"lambda", "adaptive", "m", RULE_PUSH_PARAMS, NULL},
	.server_push = server_push,
};
