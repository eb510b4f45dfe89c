/* hogwild.c - Hogwild! (Niu, Recht, Re, Wright, NIPS 2011): workers compute
 * on the server's weights and step them in place, without a lock, with the
 * server's momentum buffer. A declared in-process capability (RULE_SHARED):
 * threads of this process on the wall clock only; refused on the virtual
 * clock and wherever a worker does not share the server's memory. A
 * gradient held at the server ("where": "server") is applied there as a
 * plain step (the default server hook). */
#include "run_impl.h"
#include "rules.h"

static void
pull(run *r, worker *w)
{
	w->v_read = ps_version(r->ps); /* computes on the shared weights */
}

/* a stop in updates counts the unlocked steps in flight */
static int
may_push(const run *r, const worker *w)
{
	(void)w;
	return !r->cfg.stop_steps ||
	       ps_version(r->ps) + (uint64_t)r->hog_inflight < r->cfg.stop_steps;
}

/* a step on the shared weights without the lock (others read and write
 * them too); the lock is dropped while it runs */
static uint64_t
deliver(run *r, worker *w)
{
	r->hog_inflight++;
	backend *be = r->be_ps;
	size_t o = w->grad_off;
	float *mom = ps_momentum(r->ps);
	float lr = (float)r->cfg.lr, mu = (float)r->cfg.momentum;
	float wd = (float)r->cfg.weight_decay;
	pthread_mutex_unlock(&r->mu);
	be->ops->sgd(be, (float *)ps_weights(r->ps) + o, w->m->grads + o,
		     mom ? mom + o : NULL, r->n_params - o, lr, mu, wd);
	pthread_mutex_lock(&r->mu);
	r->hog_inflight--;
	uint64_t tau = ps_version(r->ps) - w->v_read;
	ps_advance(r->ps);
	step_version_changed(r);
	return tau;
}

const rule_class rule_hogwild = {
	.name = "hogwild",
	.doc = "Hogwild!: lock-free steps on shared weights (threads only)",
	.flags = RULE_SHARED,
	.params = (const char *const[]){NULL},
	.pull = pull,
	.may_push = may_push,
	.deliver = deliver,
};
