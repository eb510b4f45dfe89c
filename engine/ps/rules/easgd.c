/* easgd.c - elastic averaging SGD (Zhang, Choromanska, LeCun, NIPS 2015):
 * each worker trains its own weights x; every `period` steps it exchanges
 * with the centre: diff = alpha (x - centre), the centre moves by +diff
 * and x by -diff, with alpha = beta / N. */
#include "model.h"
#include "ps.h"
#include "rules.h"

static uint64_t
deliver(rule_run *e, rule_worker *w)
{
	backend *be = w->be;
	uint64_t tau = (uint64_t)w->local_steps;
	if (rule_local_step(e, w, w->m->grads) < 0)
		return tau;
	if (++w->local_steps >= (int)e->rp->period) {
		if (e->ops->check_model(e, w) < 0)
			return tau;
		w->local_steps = 0;
		size_t n_params = ps_size(e->ps);
		if (!w->tmp)
			w->tmp = be->ops->alloc(be, sizeof(float) * n_params);
		if (!w->tmp) {
			e->ops->fail(e, -SL_ENOMEM, "out of memory for an elastic exchange");
			return tau;
		}
		int n = e->ops->n_running(e);
		ps_grad m = {.kind = PS_ELASTIC, .worker = w->id, .seq = w->seq,
			     .v_read = w->v_read, .batch = w->batch_n, .g = w->m->params,
			     .alpha = (float)(e->rp->beta / (n < 1 ? 1 : n)),
			     .reply = w->tmp};
		int rc = ps_push(e->ps, &m, 1, NULL);
		if (rc < 0) {
			e->ops->push_failed(e, w->id, "an elastic exchange", rc);
			return tau;
		}
		be->ops->axpy(be, n_params, -1.0f, w->tmp, w->m->params);
		w->reply = 1; /* the elastic difference came back: its bytes */
		e->ops->version_changed(e);
	}
	return tau;
}

static int
exchanges(const rule_run *e, const rule_worker *w)
{
	return w->local_steps + 1 >= (int)e->rp->period;
}

/* its phase: period local steps between exchanges */
static int
phase_h(const rule_run *e, const rule_worker *w)
{
	(void)w;
	return (int)e->rp->period;
}

const rule_class rule_easgd = {
	.name = "easgd",
	.doc = "elastic averaging: every period steps, x and the centre pulled together",
	.flags = RULE_LOCAL,
	.params = (const char *const[]){"beta", "period", NULL},
	.pull = rule_pull_model,
	.deliver = deliver,
	.exchanges = exchanges,
	.phase_h = phase_h,
	.stale_unit = "local steps",
};
