/* localsgd.c - local SGD (model averaging): each worker takes H plain SGD
 * steps on its own weights, then sends them; when every running worker's
 * model is in, the server's weights become their mean and the workers
 * start again from it. The staleness recorded is the number of local
 * steps since the last average. */
#include "run_impl.h"
#include "rules.h"

void
rule_pull_model(run *r, worker *w)
{
	step_pull_local(r, w);
	w->v_read = ps_version(r->ps);
}

static uint64_t
deliver(run *r, worker *w)
{
	step_local_sgd(r, w, w->m->grads, (float)r->cfg.lr);
	uint64_t tau = (uint64_t)w->local_steps;
	if (++w->local_steps >= (int)r->cfg.rp.H) {
		if (step_check_model(r, w) < 0)
			return tau;
		w->local_steps = 0;
		w->waiting = 1;
		w->wait_v = ps_version(r->ps);
		w->have = UINT64_MAX; /* take the average when released */
		ps_grad m = {.kind = PS_MODEL, .worker = w->id, .seq = w->seq,
			     .v_read = w->v_read, .batch = w->batch_n, .g = w->m->params};
		ps_result res;
		int rc = ps_push(r->ps, &m, run_n_running(r), &res);
		if (rc < 0)
			step_push_failed(r, w->id, "a model", rc);
		else if (res.applied)
			step_version_changed(r);
	}
	return tau;
}

/* the step that completes H local steps sends the model */
static int
exchanges(const run *r, const worker *w)
{
	return w->local_steps + 1 >= (int)r->cfg.rp.H;
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
