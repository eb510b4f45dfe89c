/* local.c - the worker side the rules that train local weights share
 * (localsgd, easgd, odsgd after its warm-up): the pull into a worker's
 * own weights and the plain SGD step on them. */
#include "model.h"
#include "ps.h"
#include "rules.h"

void
rule_pull_local(rule_run *e, rule_worker *w)
{
	/* local weights; the first step (or the first after a rule
	 * switch) starts from the server's */
	if (w->have == UINT64_MAX)
		ps_pull(e->ps, w->id, w->m->params, &w->have);
}

void
rule_pull_model(rule_run *e, rule_worker *w)
{
	rule_pull_local(e, w);
	w->v_read = ps_version(e->ps);
}

void
rule_local_sgd(const rule_run *e, rule_worker *w, const float *g, float lr)
{
	backend *be = w->be;
	size_t off = w->grad_off;
	be->ops->sgd(be, w->m->params + off, g + off, NULL, ps_size(e->ps) - off,
		     lr, 0, 0);
}
