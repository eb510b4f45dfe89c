/* diloco.c - DiLoCo (Douillard et al. 2023): each worker takes H steps of
 * the run's optimiser (the inner one: AdamW in the paper, its state the
 * worker's own, kept across rounds and in checkpoints) on its own weights,
 * from the server's; then it sends the model it reached. When every
 * running worker's model is in, the server takes the pseudo-gradient
 * Delta = w - mean(models) and applies the outer optimiser, Nesterov
 * momentum (outer_lr, default 0.7; outer_momentum, default 0.9: the
 * paper's), and the workers start again from the result. Synchronous per
 * round, as localsgd is, which it equals with outer_lr 1 and
 * outer_momentum 0 (to rounding). The staleness recorded is the local
 * steps since the last round. outer_opt picks the outer optimiser
 * (ps_outer_step); inner_reset starts each round's inner optimiser
 * afresh. */
#include "optim.h"
#include "rules.h"

/* a round starts from the server's weights; with inner_reset its inner
 * optimiser starts afresh too */
static void
pull(rule_run *e, rule_worker *w)
{
	if (w->have == UINT64_MAX && e->rp->inner_reset)
		rule_inner_reset(w);
	rule_pull_model(e, w);
}

const rule_class rule_diloco = {
	.name = "diloco",
	.doc = "DiLoCo: H inner steps, then an outer Nesterov step on the averaged "
	       "pseudo-gradient",
	.flags = RULE_LOCAL | RULE_OUTER | RULE_PHASES,
	.params = (const char *const[]){"H", "outer_lr", "outer_momentum", "outer_opt",
					"inner_reset", RULE_PUSH_PARAMS, NULL},
	.pull = pull,
	.deliver = rule_local_deliver_model,
	.exchanges = rule_local_exchanges,
	.phase_h = rule_local_phase_h,
	.stale_unit = "local steps",
};
