/* easgd.c - elastic averaging SGD (Zhang, Choromanska, LeCun, NIPS 2015):
 * each worker trains its own weights x; every `period` steps it exchanges
 * with the centre: diff = alpha (x - centre), the centre moves by +diff
 * and x by -diff, with alpha = beta / N. */
#include "run_impl.h"
#include "rules.h"

static uint64_t
deliver(run *r, worker *w)
{
	backend *be = w->be;
	step_local_sgd(r, w, w->m->grads, (float)r->cfg.lr);
	uint64_t tau = (uint64_t)w->local_steps;
	if (++w->local_steps >= (int)r->cfg.rp.period) {
		if (step_check_model(r, w) < 0)
			return tau;
		w->local_steps = 0;
		if (!w->tmp)
			w->tmp = be->ops->alloc(be, sizeof(float) * r->n_params);
		if (!w->tmp) {
			run_fail(r, -SL_ENOMEM, "out of memory for an elastic exchange");
			return tau;
		}
		int n = run_n_running(r);
		ps_grad m = {.kind = PS_ELASTIC, .worker = w->id, .seq = w->seq,
			     .v_read = w->v_read, .batch = w->batch_n, .g = w->m->params,
			     .alpha = (float)(r->cfg.rp.beta / (n < 1 ? 1 : n)),
			     .reply = w->tmp};
		int rc = ps_push(r->ps, &m, 1, NULL);
		if (rc < 0) {
			step_push_failed(r, w->id, "an elastic exchange", rc);
			return tau;
		}
		be->ops->axpy(be, r->n_params, -1.0f, w->tmp, w->m->params);
		w->reply = 1; /* the elastic difference came back: its bytes */
		step_version_changed(r);
	}
	return tau;
}

static int
exchanges(const run *r, const worker *w)
{
	return w->local_steps + 1 >= (int)r->cfg.rp.period;
}

const rule_class rule_easgd = {
	.name = "easgd",
	.doc = "elastic averaging: every period steps, x and the centre pulled together",
	.flags = RULE_LOCAL,
	.params = (const char *const[]){"beta", "period", NULL},
	.pull = rule_pull_model,
	.deliver = deliver,
	.exchanges = exchanges,
};
