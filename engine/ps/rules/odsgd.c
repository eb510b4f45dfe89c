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

#include "run_impl.h"
#include "rules.h"

#define DC_EPS 1e-7f

/* after its warm-up, a worker keeps local weights */
static int
local(const run *r, const worker *w)
{
	return w->clock >= (uint64_t)r->cfg.rp.warmup;
}

static void
pull(run *r, worker *w)
{
	if (!local(r, w)) {
		/* warm-up: ssgd, into its own weights, where the local
		 * steps go on from */
		step_pull_copy(r, w);
		return;
	}
	step_pull_local(r, w);
}

/* once per round: the previous round must be complete */
static int
may_push(const run *r, const worker *w)
{
	return !local(r, w) || w->last_round < 0 ||
	       (uint64_t)w->last_round < ps_version(r->ps);
}

/* the local step: x = W(R) - llr g, or its compensated form */
static void
local_step(run *r, worker *w, float llr)
{
	backend *be = w->be;
	size_t n = r->n_params, off = w->grad_off;
	float *x = w->m->params;
	int cad = !strcmp(r->cfg.rp.local_opt, "cadcasgd");
	/* the newest global weights, W(R), which round R will advance */
	uint64_t fresh = UINT64_MAX;
	ps_pull(r->ps, w->id, x, &fresh);
	if (cad && !w->ms) {
		w->ms = be->ops->alloc(be, sizeof(float) * n);
		w->wprev = be->ops->alloc(be, sizeof(float) * n);
		w->tmp = be->ops->alloc(be, sizeof(float) * n);
		if (w->wprev)
			be->ops->copy(be, w->wprev, x, sizeof(float) * n);
	}
	if (cad && w->ms && w->wprev && w->tmp) {
		/* CADCASGD: the drift is the last global step seen, W - W_prev */
		be->ops->dc_grad(be, n - off, w->m->grads + off, x + off,
				 w->wprev + off, w->ms + off, (float)r->cfg.rp.lambda,
				 (float)r->cfg.rp.m, DC_EPS, w->tmp + off);
		be->ops->copy(be, w->wprev, x, sizeof(float) * n);
		step_local_sgd(r, w, w->tmp, llr);
	} else {
		step_local_sgd(r, w, w->m->grads, llr);
	}
}

static uint64_t
deliver(run *r, worker *w)
{
	if (!local(r, w))
		return step_push_grad(r, w); /* warm-up: ssgd */
	uint64_t R = ps_version(r->ps);
	int n = run_n_running(r);
	local_step(r, w, (float)(r->cfg.rp.local_lr / (n < 1 ? 1 : n)));
	/* push after the local step: the round may complete now and move
	 * W on to W(R+1) */
	ps_grad g = {.worker = w->id, .seq = w->seq, .v_read = w->v_read,
		     .off = w->grad_off, .batch = w->batch_n, .g = w->m->grads};
	ps_result res;
	int rc = ps_push(r->ps, &g, step_round_size(r), &res);
	if (rc < 0) {
		step_push_failed(r, w->id, "a gradient", rc);
		return 0;
	}
	w->have = R; /* the global part of the local weights */
	w->v_read = R;
	w->last_round = (int64_t)R;
	if (res.applied)
		step_version_changed(r);
	return res.tau;
}

/* after its warm-up a worker computes on while its push and the next
 * global weights travel: communication overlaps computation */
static int
overlaps(const run *r, const worker *w)
{
	return local(r, w);
}

const rule_class rule_odsgd = {
	.name = "odsgd",
	.doc = "one-step-delay SGD: synchronous server, compensating local step",
	.flags = RULE_ROUND | RULE_WAIT,
	.params = (const char *const[]){"local_lr", "warmup", "local_opt", "lambda",
					"m", NULL},
	.server_push = rule_server_round,
	.pull = pull,
	.may_push = may_push,
	.deliver = deliver,
	.overlaps = overlaps,
};
