/* train.c - the sequential SGD loop. */
#include "train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int
should_stop(const train_opts *o, const train_eval *e, uint32_t n_train,
	    const char **why)
{
	if (o->stop_steps && e->v >= o->stop_steps) {
		*why = "steps";
		return 1;
	}
	if (o->stop_epochs > 0 && e->samples >= o->stop_epochs * n_train - 0.5) {
		*why = "epochs";
		return 1;
	}
	if (o->stop_seconds > 0 && e->train_s >= o->stop_seconds) {
		*why = "seconds";
		return 1;
	}
	if (o->target_acc > 0 && e->best_acc >= o->target_acc) {
		*why = "target_acc";
		return 1;
	}
	return 0;
}

int
train_run(model *m, const dataset_pair *d, const train_opts *o,
	  const train_cb *cb, train_eval *result, char *err)
{
	const dataset *tr = &d->train;
	backend *be = m->be;
	if (o->batch < 1 || o->batch > m->batch_cap)
		return sl_fail(err, SL_EINVAL, "batch: %d outside 1..%d",
			       o->batch, m->batch_cap);
	if (!(o->lr > 0))
		return sl_fail(err, SL_EINVAL, "lr: must be > 0");
	if (tr->dim != m->in_dim || tr->n == 0)
		return sl_fail(err, SL_EINVAL,
			       "dataset: %d features per sample, model expects %d",
			       tr->dim, m->in_dim);
	if (!(o->stop_epochs > 0) && !o->stop_steps && !(o->stop_seconds > 0) &&
	    !(o->target_acc > 0))
		return sl_fail(err, SL_EINVAL,
			       "stop: a headless run needs epochs, steps, seconds or target_acc");

	uint32_t *perm = malloc(sizeof(uint32_t) * tr->n);
	float *mom = NULL;
	if (!perm)
		return sl_fail(err, SL_ENOMEM, "out of memory");
	if (o->momentum > 0) {
		mom = be->ops->alloc(be, sizeof(float) * m->n_params);
		if (!mom) {
			free(perm);
			return sl_fail(err, SL_ENOMEM, "out of memory");
		}
	}

	train_eval e;
	memset(&e, 0, sizeof(e));
	rng shuf;
	rng_seed(&shuf, o->seed, 1);
	const double t0 = sl_now();
	double loss_sum = 0.0;
	long loss_n = 0;
	uint64_t epoch = 0;
	uint32_t pos = tr->n; /* forces a shuffle first */
	const char *why = NULL;
	int stop = 0;

	while (!stop) {
		if (pos >= tr->n) {
			for (uint32_t i = 0; i < tr->n; i++)
				perm[i] = i;
			rng_seed(&shuf, o->seed, 1000 + epoch);
			rng_shuffle(&shuf, perm, tr->n);
			pos = 0;
			epoch++;
		}
		int b = (int)SL_MIN((uint32_t)o->batch, tr->n - pos);
		double ts = sl_now();
		model_load_batch(m, tr->x, tr->y, perm + pos, b);
		loss_sum += model_step(m, NULL, b, 0);
		loss_n++;
		be->ops->sgd(be, m->params, m->grads, mom, m->n_params, o->lr,
			     o->momentum, o->weight_decay);
		be->ops->sync(be);
		e.train_s += sl_now() - ts;
		pos += (uint32_t)b;
		e.v++;
		e.samples += (uint64_t)b;
		stale_add(&e.stale, 0); /* sequential: every gradient is fresh */
		e.epoch = (double)e.samples / tr->n;
		e.samples_per_s = e.train_s > 0 ? e.samples / e.train_s : 0;
		e.t = sl_now() - t0;
		if (cb && cb->step)
			cb->step(cb->ud, &e);
		int epoch_end = pos >= tr->n;
		stop = should_stop(o, &e, tr->n, &why);
		if (stop || epoch_end ||
		    (o->eval_every > 0 && e.v % (uint64_t)o->eval_every == 0)) {
			e.train_loss = loss_n ? loss_sum / loss_n : NAN;
			loss_sum = 0.0;
			loss_n = 0;
			model_evaluate(m, NULL, &d->test, &e.test_loss, &e.test_acc);
			if (e.test_acc > e.best_acc)
				e.best_acc = e.test_acc;
			e.t = sl_now() - t0;
			if (!stop)
				stop = should_stop(o, &e, tr->n, &why);
			if (cb && cb->eval)
				cb->eval(cb->ud, &e);
		}
	}
	e.final = 1;
	e.stop_reason = why;
	e.t = sl_now() - t0;
	if (cb && cb->eval)
		cb->eval(cb->ud, &e);
	if (result)
		*result = e;
	be->ops->free(be, mom);
	free(perm);
	return 0;
}
