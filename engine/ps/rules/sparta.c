/* sparta.c - SPARTA, sparse parameter averaging (EXO Gym's sparta.py):
 * after every local step each worker averages a random fraction p of its
 * parameters with the other workers'. The mask M ~ Bernoulli(p) per
 * coordinate (sparta_p, default 0.005) is the same at every worker,
 * drawn from the run's seed and the round (the server's version when the
 * round began), so no mask is sent; then x_k[M] = mean_j x_j[M]. The
 * parameters are averaged, not the gradients, and nothing else is kept.
 *
 * On our server it is a synchronous round per step, localsgd with H = 1
 * whose exchange is only the masked coordinates: each worker takes one
 * step of the run's optimiser on its own weights (its state its own, as
 * diloco's inner optimiser), sends its model and waits for the round;
 * when every running worker's is in, the server's weights become the
 * models' mean, and each worker takes them at M (at every coordinate
 * with p = 1: localsgd's H = 1, bit for bit). The wire is charged 4 |M|
 * bytes up and 4 |M| down per worker and step (step_bytes): the rest of
 * the model the server reads is an observer's view, in this process, so
 * that the weights it evaluates and checkpoints are the replicas' mean,
 * EXO Gym's "global" model (its trainer's result), not the initial
 * weights at the coordinates no mask has drawn yet. The staleness is 0:
 * every step is a round. */
#include <stdlib.h>

#include "model.h"
#include "ps.h"
#include "rng.h"
#include "rules.h"

/* the stream of round `round`'s mask under the run's seed (apart from
 * the other streams of a run: shuffles, delays, random-k) */
static void
mask_stream(rng *g, uint64_t seed, uint64_t round)
{
	rng_seed(g, seed, (1ull << 62) | round);
}

/* is the next coordinate in the mask? */
static inline int
drawn(rng *g, double p)
{
	return rng_uniform(g) < p;
}

size_t
rule_sparta_mask(uint64_t seed, uint64_t round, double p, size_t n, unsigned char *mask)
{
	rng g;
	size_t k = 0;
	mask_stream(&g, seed, round);
	for (size_t i = 0; i < n; i++) {
		int in = drawn(&g, p);
		if (mask)
			mask[i] = (unsigned char)in;
		k += (size_t)in;
	}
	return k;
}

/* x[M] = w[M] for round `round`'s mask (host memory); returns |M| */
static size_t
take_masked(uint64_t seed, uint64_t round, double p, float *x, const float *w, size_t n)
{
	rng g;
	size_t k = 0;
	mask_stream(&g, seed, round);
	for (size_t i = 0; i < n; i++)
		if (drawn(&g, p)) {
			x[i] = w[i];
			k++;
		}
	return k;
}

/* the worker's weights at round `round`'s mask become the server's (the
 * round's mean); 0, or -1 when the run failed (its memory) */
static int
take_round(rule_run *e, rule_worker *w, uint64_t round)
{
	ps *p = e->ps;
	backend *be = w->be, *bs = ps_backend(p);
	size_t n = ps_size(p);
	double frac = e->rp->sparta_p;
	if (frac >= 1) { /* every coordinate: the server's weights, a copy */
		uint64_t have = UINT64_MAX;
		ps_pull(p, w->id, w->m->params, &have);
		w->took = n;
		return 0;
	}
	if (!(frac > 0)) {
		w->took = 0;
		return 0;
	}
	if (be->ops->host_memory && bs->ops->host_memory) {
		w->took = take_masked(e->seed, round, frac, w->m->params, ps_weights(p), n);
		return 0;
	}
	/* a device's memory: both come down, the worker's goes back up */
	float *x = malloc(sizeof(float) * 2 * n), *s = x + n;
	if (!x) {
		e->ops->fail(e, -SL_ENOMEM, "out of memory for sparta's masked average");
		return -1;
	}
	be->ops->download(be, x, w->m->params, sizeof(float) * n);
	bs->ops->download(bs, s, ps_weights(p), sizeof(float) * n);
	w->took = take_masked(e->seed, round, frac, x, s, n);
	be->ops->upload(be, w->m->params, x, sizeof(float) * n);
	free(x);
	return 0;
}

/* The first step (or the first after a rule switch, a join, or a round
 * missed while paused): the server's weights, all of them. After a round
 * the worker was in (have, the version its weights were taken at, is the
 * round's start and the server is one version on): the round's mean at
 * its mask. */
static void
pull(rule_run *e, rule_worker *w)
{
	uint64_t v = ps_version(e->ps);
	if (w->have != UINT64_MAX && w->have + 1 == v) {
		if (take_round(e, w, w->have) < 0)
			return;
		w->have = v;
	} else if (w->have != v) {
		w->have = UINT64_MAX;
		rule_pull_local(e, w);
		w->took = ps_size(e->ps);
	} else {
		w->took = 0;
	}
	w->v_read = v;
}

/* a step of the run's optimiser on the worker's own weights, then its
 * model to the round, and a wait for the round's result */
static uint64_t
deliver(rule_run *e, rule_worker *w)
{
	if (rule_local_step(e, w, w->m->grads) < 0 || e->ops->check_model(e, w) < 0)
		return 0;
	w->waiting = 1;
	w->wait_v = ps_version(e->ps);
	rule_local_send_model(e, w);
	return 0;
}

/* every step exchanges */
static int
exchanges(const rule_run *e, const rule_worker *w)
{
	(void)e;
	(void)w;
	return 1;
}

/* down: what the pull took (4 |M| of the round before, the whole model
 * on a first step); up: the values at this round's mask, 4 |M| */
static void
step_bytes(const rule_run *e, const rule_worker *w, int fresh, double *pull_b, double *push_b)
{
	(void)fresh;
	size_t n = ps_size(e->ps);
	double frac = e->rp->sparta_p;
	size_t k = frac >= 1 ? n
		   : frac > 0 ? rule_sparta_mask(e->seed, ps_version(e->ps), frac, n, NULL)
			      : 0;
	*pull_b = (double)w->took * sizeof(float);
	*push_b = (double)k * sizeof(float);
}

const rule_class rule_sparta = {
	.name = "sparta",
	.doc = "SPARTA: after each local step the workers average a random fraction sparta_p "
	       "of their parameters (one mask for all, from the seed and the round)",
	.flags = RULE_LOCAL,
	.params = (const char *const[]){"sparta_p", NULL},
	.pull = pull,
	.deliver = deliver,
	.exchanges = exchanges,
	.step_bytes = step_bytes,
	.stale_unit = "local steps",
};
