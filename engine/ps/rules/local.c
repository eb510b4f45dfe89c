/* local.c - the worker side the rules that train local weights share
 * (localsgd, easgd, odsgd after its warm-up): the pull into a worker's
 * own weights and the plain SGD step on them. */
#include <stdlib.h>

#include "model.h"
#include "optim.h"
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

int
rule_local_step(rule_run *e, rule_worker *w, const float *g)
{
	const opt_cfg *oc = ps_optim(e->ps);
	float lr, mu, wd;
	ps_opt(e->ps, &lr, &mu, &wd);
	if (oc->kind == OPT_SGD && !(oc->clip > 0)) {
		rule_local_sgd(e, w, g, lr);
		return 0;
	}
	if (oc->kind == OPT_SGD)
		mu = wd = 0; /* the plain step, clipped */
	int nl;
	const ps_layer *layers = ps_layers(e->ps, &nl);
	if (!w->opt && (w->opt = calloc(1, sizeof(*w->opt))) &&
	    optim_init(w->opt, w->be, ps_size(e->ps), layers, nl) < 0) {
		free(w->opt);
		w->opt = NULL;
	}
	if (!w->opt || optim_set(w->opt, oc, mu) < 0) {
		e->ops->fail(e, -SL_ENOMEM, "out of memory for a worker's optimiser state");
		return -1;
	}
	optim_step(w->opt, w->be, w->m->params, g, w->grad_off, oc, lr, mu, wd);
	return 0;
}
