/* async_diloco.c - asynchronous DiLoCo (asynchronous local SGD; Liu et al.
 * 2024, arXiv 2401.09135): each worker takes H steps of the run's
 * optimiser (its own state, as diloco's) from the server's weights, which
 * it keeps as its anchor, then sends the pseudo-gradient Delta = anchor -
 * its weights and starts again from the server's weights of that moment,
 * without waiting for anyone. The server applies each arrival at once
 * through the outer optimiser (ps_outer_arrival): Nesterov per arrival
 * (the paper's naive "Async DiLoCo"), or Delayed Nesterov with dn_period
 * N > 1; the arrival weighted by its staleness tau in outer versions when
 * weighting is "poly" (1 / sqrt(1 + tau), the paper's Poly). Only the
 * arrivals record a staleness: tau, the outer updates since the anchor.
 * With dylu (Dynamic Local Updates, the paper's Eq. 6) a worker's H for
 * the phase it starts is floor(its speed / the fastest's x H), at least
 * 1, from the iterations per second each has run so far, so a slow
 * worker's pseudo-gradient comes back sooner and less stale. With
 * grace_ms (the notebook's max_wait_time, the paper's tau_grace) the
 * arrivals that land within it of the one that opened a window are
 * applied as they come, and their workers wait to start again together,
 * from the weights after the last of them, when no other exchange is
 * due within the window (on the wall clock, when the window ends). With
 * one worker it is diloco with one worker (to rounding). */
#include <math.h>
#include <string.h>

#include "model.h"
#include "optim.h"
#include "ps.h"
#include "rules.h"

/* the first step and each one after an exchange: the server's weights,
 * kept as the anchor, their version the v_read of the arrival to come */
static void
pull(rule_run *e, rule_worker *w)
{
	if (w->have != UINT64_MAX)
		return;
	backend *be = w->be;
	size_t n = ps_size(e->ps);
	if (!w->wprev && !(w->wprev = be->ops->alloc(be, sizeof(float) * n))) {
		e->ops->fail(e, -SL_ENOMEM, "out of memory for a worker's anchor weights");
		return;
	}
	ps_pull(e->ps, w->id, w->m->params, &w->have);
	w->v_read = w->have;
	be->ops->copy(be, w->wprev, w->m->params, sizeof(float) * n);
	if (e->rp->inner_reset)
		rule_inner_reset(w);
	w->h = 0;
	if (e->rp->dylu) {
		double s = e->ops->speed(e, w), most = e->ops->max_speed(e);
		if (s > 0 && most > 0)
			w->h = (int)fmax(1.0, floor(s / most * e->rp->H));
	}
}

/* A worker starting a phase waits while the grace window it landed in
 * is open: until no other worker's exchange is due within it. */
static int
may_begin(const rule_run *e, const rule_worker *w)
{
	const double g = e->rp->grace_ms * 1e-3;
	if (g <= 0 || w->have != UINT64_MAX || e->window_t0 < 0)
		return 1;
	const double end = e->window_t0 + g;
	return e->ops->now(e) > end || !e->ops->exchange_due(e, w, end);
}

/* this phase's H: dylu's, or the rule's */
static int
phase_h(const rule_run *e, const rule_worker *w)
{
	return w->h > 0 ? w->h : (int)e->rp->H;
}

static int
exchanges(const rule_run *e, const rule_worker *w)
{
	return w->local_steps + 1 >= phase_h(e, w);
}

static uint64_t
deliver(rule_run *e, rule_worker *w)
{
	if (rule_local_step(e, w, w->m->grads) < 0 || ++w->local_steps < phase_h(e, w))
		return 0;
	if (e->ops->check_model(e, w) < 0)
		return 0;
	w->local_steps = 0;
	/* Delta = anchor - x, in the gradient's buffer */
	backend *be = w->be;
	size_t n = ps_size(e->ps);
	float *d = w->m->grads;
	be->ops->copy(be, d, w->wprev, sizeof(float) * n);
	be->ops->axpy(be, n, -1.0f, w->m->params, d);
	w->have = UINT64_MAX; /* the next step starts from the server's */
	if (e->ops->compress(e, w, d, 0, NULL) < 0) /* the pseudo-gradient as it is */
		return 0;
	ps_grad g = {.worker = w->id, .seq = w->seq, .v_read = w->v_read,
		     .batch = w->batch_n, .g = d};
	ps_result res;
	int rc = ps_push(e->ps, &g, 1, &res);
	if (rc < 0) {
		e->ops->push_failed(e, w->id, "a pseudo-gradient", rc);
		return 0;
	}
	if (res.applied)
		e->ops->version_changed(e);
	/* an arrival after the window (or with none yet) opens one */
	double now = e->ops->now(e);
	if (e->rp->grace_ms > 0 && (e->window_t0 < 0 || now > e->window_t0 + e->rp->grace_ms * 1e-3))
		e->window_t0 = now;
	return res.tau;
}

static int
server_push(ps *p, const ps_grad *g, int round_size, ps_result *res)
{
	(void)round_size;
	const rule_params *rp = ps_params(p);
	float wt = strcmp(rp->weighting, "poly") ? 1.0f
						 : (float)(1.0 / sqrt(1.0 + (double)res->tau));
	int rc = ps_outer_arrival(p, g->g, wt);
	if (rc < 0)
		return rc;
	res->applied = 1;
	return 0;
}

const rule_class rule_async_diloco = {
	.name = "async-diloco",
	.doc = "asynchronous DiLoCo: H inner steps, then the pseudo-gradient applied on "
	       "arrival by the outer Nesterov (or Delayed Nesterov), optionally weighted "
	       "by its staleness",
	.flags = RULE_LOCAL | RULE_STALE_AT_EXCHANGE | RULE_PHASES,
	.params = (const char *const[]){"H", "outer_lr", "outer_momentum", "dn_period",
					"weighting", "dylu", "grace_ms", "outer_opt", "inner_reset", RULE_PUSH_PARAMS,
					NULL},
	.server_push = server_push,
	.may_begin = may_begin,
	.pull = pull,
	.deliver = deliver,
	.exchanges = exchanges,
	.phase_h = phase_h,
	.stale_unit = "outer versions",
};
