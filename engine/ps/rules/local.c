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

void
rule_inner_reset(rule_worker *w)
{
	if (w->opt)
		optim_reset(w->opt);
	w->opt_resets++;
}

int
rule_local_step(rule_run *e, rule_worker *w, const float *g)
{
	if (w->remote_stepped) /* a remote worker took it on its own weights */
		return 0;
	float lr, mu, wd;
	ps_opt(e->ps, &lr, &mu, &wd);
	int nl;
	const ps_layer *layers = ps_layers(e->ps, &nl);
	if (optim_local_step(&w->opt, w->be, w->m->params, g, w->grad_off, ps_size(e->ps),
			     layers, nl, ps_optim(e->ps), lr, mu, wd) < 0) {
		e->ops->fail(e, -SL_ENOMEM, "out of memory for a worker's optimiser state");
		return -1;
	}
	return 0;
}

/* localsgd's and diloco's delivery: a local step with the run's
 * optimiser; after H of them the model goes to the server's round and the
 * worker waits for the round's result. The staleness is the local steps
 * since the last exchange. */
uint64_t
rule_local_deliver_model(rule_run *e, rule_worker *w)
{
	uint64_t tau = (uint64_t)w->local_steps;
	if (rule_local_step(e, w, w->m->grads) < 0)
		return tau;
	if (++w->local_steps >= (int)e->rp->H) {
		if (e->ops->check_model(e, w) < 0)
			return tau;
		w->local_steps = 0;
		w->waiting = 1;
		w->wait_v = ps_version(e->ps);
		w->have = UINT64_MAX; /* take the average when released */
		/* compressed: its difference from the server's weights, the
		 * round's start, which the server holds */
		if (e->ops->compress(e, w, w->m->params, 0, ps_weights(e->ps)) < 0)
			return tau;
		rule_local_send_model(e, w);
	}
	return tau;
}

void
rule_local_send_model(rule_run *e, rule_worker *w)
{
	ps_grad m = {.kind = PS_MODEL, .worker = w->id, .seq = w->seq, .v_read = w->v_read,
		     .batch = w->batch_n, .g = w->m->params};
	ps_result res;
	int rc = ps_push(e->ps, &m, e->ops->n_running(e), &res);
	if (rc < 0)
		e->ops->push_failed(e, w->id, "a model", rc);
	else if (res.applied)
		e->ops->version_changed(e);
}

/* the step that completes H local steps sends the model */
int
rule_local_exchanges(const rule_run *e, const rule_worker *w)
{
	return w->local_steps + 1 >= (int)e->rp->H;
}

int
rule_local_phase_h(const rule_run *e, const rule_worker *w)
{
	(void)w;
	return (int)e->rp->H;
}
