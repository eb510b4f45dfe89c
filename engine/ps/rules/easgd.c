/* easgd.c - elastic averaging SGD (Zhang, Choromanska, LeCun, NIPS 2015):
 * each worker trains its own weights x; every `period` steps it exchanges
 * with the centre: diff = alpha (x - centre), the centre moves by +diff
 * and x by -diff, with alpha = beta / N. Under compression (rule_params
 * compress) x is sent as its difference from the centre, compressed, and
 * the worker keeps its own x (docs/rules.md, "Compression"). */
#include <string.h>

#include "model.h"
#include "ps.h"
#include "rules.h"

/* what the exchange sends: x, or under compression its difference from
 * the centre as the server holds it, compressed (rule_ops.compress) into
 * a copy, since the worker keeps its own x; NULL when the run failed */
static const float *
sent(rule_run *e, rule_worker *w)
{
	const char *c = e->rp->compress;
	if (!c[0] || !strcmp(c, "none"))
		return w->m->params;
	backend *be = w->be;
	size_t n = ps_size(e->ps);
	if (!w->wire && !(w->wire = be->ops->alloc(be, sizeof(float) * n))) {
		e->ops->fail(e, -SL_ENOMEM, "out of memory for a compressed exchange");
		return NULL;
	}
	be->ops->copy(be, w->wire, w->m->params, sizeof(float) * n);
	return e->ops->compress(e, w, w->wire, 0, ps_weights(e->ps)) < 0 ? NULL : w->wire;
}

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
		const float *x = sent(e, w);
		if (!x)
			return tau;
		int n = e->ops->n_running(e);
		ps_grad m = {.kind = PS_ELASTIC, .worker = w->id, .seq = w->seq,
			     .v_read = w->v_read, .batch = w->batch_n, .g = x,
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
	.flags = RULE_LOCAL | RULE_PHASES,
	.params = (const char *const[]){"beta", "period", RULE_PUSH_PARAMS, NULL},
	.pull = rule_pull_model,
	.deliver = deliver,
	.exchanges = exchanges,
	.phase_h = phase_h,
	.stale_unit = "local steps",
};
