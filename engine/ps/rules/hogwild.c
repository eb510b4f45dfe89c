/* hogwild.c - Hogwild! (Niu, Recht, Re, Wright, NIPS 2011): workers compute
 * on the server's weights and step them in place, without a lock, with the
 * server's momentum buffer. A declared in-process capability (RULE_SHARED):
 * threads of this process on the wall clock only; refused on the virtual
 * clock and wherever a worker does not share the server's memory. A
 * gradient held at the server ("where": "server") is applied there as a
 * plain step (the default server hook). */
#include "model.h"
#include "ps.h"
#include "rules.h"

static void
pull(rule_run *e, rule_worker *w)
{
	w->v_read = ps_version(e->ps); /* computes on the shared weights */
}

/* a stop in updates counts the unlocked steps in flight */
static int
may_push(const rule_run *e, const rule_worker *w)
{
	(void)w;
	return e->ops->updates_left(e) > (uint64_t)e->inflight;
}

/* a step on the shared weights without the lock (others read and write
 * them too); the lock is dropped while it runs */
static uint64_t
deliver(rule_run *e, rule_worker *w)
{
	e->inflight++;
	backend *be = ps_backend(e->ps);
	size_t o = w->grad_off;
	float *mom = ps_momentum(e->ps);
	float lr, mu, wd;
	ps_opt(e->ps, &lr, &mu, &wd);
	e->ops->unlock(e);
	be->ops->sgd(be, (float *)ps_weights(e->ps) + o, w->m->grads + o,
		     mom ? mom + o : NULL, ps_size(e->ps) - o, lr, mu, wd);
	e->ops->lock(e);
	e->inflight--;
	uint64_t tau = ps_version(e->ps) - w->v_read;
	ps_advance(e->ps);
	e->ops->version_changed(e);
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
