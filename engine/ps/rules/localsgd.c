/* localsgd.c - local SGD (model averaging): each worker takes H plain SGD
 * steps on its own weights, then sends them; when every running worker's
 * model is in, the server's weights become their mean and the workers
 * start again from it. The staleness recorded is the number of local
 * steps since the last average. */
#include "model.h"
#include "ps.h"
#include "rules.h"

static uint64_t
deliver(rule_run *e, rule_worker *w)
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
		ps_grad m = {.kind = PS_MODEL, .worker = w->id, .seq = w->seq,
			     .v_read = w->v_read, .batch = w->batch_n, .g = w->m->params};
		ps_result res;
		int rc = ps_push(e->ps, &m, e->ops->n_running(e), &res);
		if (rc < 0)
			e->ops->push_failed(e, w->id, "a model", rc);
		else if (res.applied)
			e->ops->version_changed(e);
	}
	return tau;
}

/* the step that completes H local steps sends the model */
static int
exchanges(const rule_run *e, const rule_worker *w)
{
	return w->local_steps + 1 >= (int)e->rp->H;
}

const rule_class rule_localsgd = {
	.name = "localsgd",
	.doc = "local SGD: H local steps, then the models' average",
	.flags = RULE_LOCAL,
	.params = (const char *const[]){"H", NULL},
	.pull = rule_pull_model,
	.deliver = deliver,
	.exchanges = exchanges,
};
