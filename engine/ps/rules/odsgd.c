/* odsgd.c - one-step-delay SGD (Xu, Dong, Xu, Liao, arXiv 2005.06728),
 * reconstructed from the authors' MXNet code. The server is synchronous:
 * it averages each round of N gradients. A worker does not wait for the
 * round: after its warm-up (ssgd for its first `warmup` iterations) it
 * takes a local step from the newest global weights W(R) with its own
 * gradient, local_lr / N times it (the code's gradient rescaling), pushes
 * the gradient into round R, and computes its next gradient on the local
 * weights while the round completes. It pushes once per round, so its
 * gradients are at most one version stale. local_opt "cadcasgd"
 * compensates the local step for the drift of the last global step seen,
 * W - W_prev, as DC-ASGD does at the server. */
#include <string.h>

#include "model.h"
#include "ps.h"
#include "rules.h"

#define DC_EPS 1e-7f

/* after its warm-up, a worker keeps local weights */
static int
local(const rule_run *e, const rule_worker *w)
{
	return w->clock >= (uint64_t)e->rp->warmup;
}

static void
pull(rule_run *e, rule_worker *w)
{
	if (!local(e, w)) {
		/* warm-up: ssgd, into its own weights, where the local
		 * steps go on from */
		e->ops->pull_copy(e, w);
		return;
	}
	rule_pull_local(e, w);
}

/* once per round: the previous round must be complete */
static int
may_push(const rule_run *e, const rule_worker *w)
{
	return !local(e, w) || w->last_round < 0 ||
	       (uint64_t)w->last_round < ps_version(e->ps);
}

/* the local step: x = W(R) - llr g, or its compensated form */
static void
local_step(rule_run *e, rule_worker *w, float llr)
{
	backend *be = w->be;
	size_t n = ps_size(e->ps), off = w->grad_off;
	float *x = w->m->params;
	int cad = !strcmp(e->rp->local_opt, "cadcasgd");
	/* the newest global weights, W(R), which round R will advance */
	uint64_t fresh = UINT64_MAX;
	ps_pull(e->ps, w->id, x, &fresh);
	if (cad && !w->ms) {
		/* wprev and tmp may be there already: async-diloco's anchor,
		 * a rule ago */
		w->ms = be->ops->alloc(be, sizeof(float) * n);
		if (!w->wprev)
			w->wprev = be->ops->alloc(be, sizeof(float) * n);
		if (!w->tmp)
			w->tmp = be->ops->alloc(be, sizeof(float) * n);
		if (w->wprev)
			be->ops->copy(be, w->wprev, x, sizeof(float) * n);
	}
	if (cad && w->ms && w->wprev && w->tmp) {
		/* CADCASGD: the drift is the last global step seen, W - W_prev */
		be->ops->dc_grad(be, n - off, w->m->grads + off, x + off,
				 w->wprev + off, w->ms + off, (float)e->rp->lambda,
				 (float)e->rp->m, DC_EPS, w->tmp + off);
		be->ops->copy(be, w->wprev, x, sizeof(float) * n);
		rule_local_sgd(e, w, w->tmp, llr);
	} else {
		rule_local_sgd(e, w, w->m->grads, llr);
	}
}

static uint64_t
deliver(rule_run *e, rule_worker *w)
{
	if (!local(e, w))
		return e->ops->push_grad(e, w); /* warm-up: ssgd */
	uint64_t R = ps_version(e->ps);
	int n = e->ops->n_running(e);
	local_step(e, w, (float)(e->rp->local_lr / (n < 1 ? 1 : n)));
	/* push after the local step: the round may complete now and move
	 * W on to W(R+1); compressed, the local step having taken the
	 * whole gradient (it stays at the worker) */
	if (e->ops->compress(e, w, w->m->grads, w->grad_off, NULL) < 0)
		return 0;
	ps_grad g = {.worker = w->id, .seq = w->seq, .v_read = w->v_read,
		     .off = w->grad_off, .batch = w->batch_n, .g = w->m->grads};
	ps_result res;
	int rc = ps_push(e->ps, &g, e->ops->round_size(e), &res);
	if (rc < 0) {
		e->ops->push_failed(e, w->id, "a gradient", rc);
		return 0;
	}
	w->have = R; /* the global part of the local weights */
	w->v_read = R;
	w->last_round = (int64_t)R;
	if (res.applied)
		e->ops->version_changed(e);
	return res.tau;
}

/* after its warm-up a worker computes on while its push and the next
 * global weights travel: communication overlaps computation */
static int
overlaps(const rule_run *e, const rule_worker *w)
{
	return local(e, w);
}

const rule_class rule_odsgd = {
	.name = "odsgd",
	.doc = "one-step-delay SGD: synchronous server, compensating local step",
	.flags = RULE_ROUND | RULE_WAIT,
	.params = (const char *const[]){"local_lr", "warmup", "local_opt", "lambda",
					"m", RULE_PUSH_PARAMS, NULL},
	.server_push = rule_server_round,
	.pull = pull,
	.may_push = may_push,
	.deliver = deliver,
	.overlaps = overlaps,
};
