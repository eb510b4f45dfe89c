/* step.c - one worker step, the same for both clocks: may it begin,
 * take a batch, pull (the version it reads), compute, and deliver the
 * gradient (push through the rule, or hold it at the server), with the
 * staleness of every applied gradient recorded. */
#include "run_impl.h"
#include "wstep.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int step_take(run *r, worker *w, int want, uint32_t *idx);
static void step_note_begin(run *r, const worker *w);
static void step_pull(run *r, worker *w);
static void step_record_stale(run *r, worker *w, uint64_t tau, double t_read);
static void step_count_delivery(run *r, worker *w);

int
step_round_size(const run *r)
{
	return rule_round_size(r->rule, run_n_running(r), &r->cfg.rp);
}

static void
window_add(run *r, uint64_t tau)
{
	r->win_tau[r->win_pos] = tau;
	r->win_t[r->win_pos] = run_now(r);
	r->win_pos = (r->win_pos + 1) % WINDOW_N;
	if (r->win_n < WINDOW_N)
		r->win_n++;
}

static void
step_record_stale(run *r, worker *w, uint64_t tau, double t_read)
{
	double now = run_now(r), ms = (now - t_read) * 1e3;
	rate_mark(&r->rate_updates, now, (double)r->updates);
	rate_mark(&r->rate_samples, now, (double)r->samples);
	rate_mark(&w->rate_samples, now, (double)w->samples);
	stale_add(&r->hist, tau);
	stale_add(&w->hist, tau);
	age_add(&r->age, ms);
	age_add(&w->age, ms);
	window_add(r, tau);
}

/* a worker starts an iteration: track the widest clock gap (SSP) */
static void
step_note_begin(run *r, const worker *w)
{
	uint64_t mc = run_min_clock(r);
	if (mc != UINT64_MAX && w->rw.clock > mc && w->rw.clock - mc > r->clock_gap_max)
		r->clock_gap_max = w->rw.clock - mc;
}

/* take up to want sample indices for w (from the shared permutation, or
 * under a split from its part); 0 when the stop limit is reached: the
 * limit counts every worker's samples */
static int
step_take(run *r, worker *w, int want, uint32_t *idx)
{
	const uint32_t n = r->data->train.n;
	int got = 0;
	if (r->take_limit && r->taken >= r->take_limit)
		return 0;
	if (r->take_limit && r->taken + (uint64_t)want > r->take_limit)
		want = (int)(r->take_limit - r->taken);
	if (r->split.kind != SPLIT_IID) {
		split_run_refresh(r);
		got = split_take(r, w, want, idx);
		r->taken += (uint64_t)got;
		return got;
	}
	if (r->pos >= n) {
		for (uint32_t i = 0; i < n; i++)
			r->perm[i] = i;
		rng_seed(&r->shuf, r->cfg.seed, 1000 + r->shuffles);
		rng_shuffle(&r->shuf, r->perm, n);
		r->shuffles++;
		r->pos = 0;
	}
	/* a batch never straddles an epoch: the last one may be short */
	while (got < want && r->pos < n)
		idx[got++] = r->perm[r->pos++];
	r->taken += (uint64_t)got;
	return got;
}

/* may the worker start an iteration now? */
int
step_can_begin(const run *r, const worker *w)
{
	if (!w->active || w->paused || r->paused || r->stopping)
		return 0;
	if (w->rw.waiting && ps_version(r->ps) <= w->rw.wait_v)
		return 0;
	if (r->rule->may_begin && !r->rule->may_begin(&r->rr, &w->rw))
		return 0;
	if (r->take_limit && r->taken >= r->take_limit)
		return 0;
	/* a worker far ahead of its held gradients waits (bounded memory) */
	if (w->n_held >= HELD_MAX)
		return 0;
	return 1;
}

int
step_can_push(const run *r, const worker *w)
{
	return !r->rule->may_push || r->rule->may_push(&r->rr, &w->rw);
}

/* Is the worker's gradient held at the server ("where": "server") while
 * the worker moves on? Only where the rule lets a worker move on before
 * its gradient lands. ssgd and odsgd wait for their round (odsgd's local
 * step needs the gradient too) and local rules exchange models, so there
 * a server-held delay is a delay of the arrival like a worker-side one:
 * it never changes the rule's semantics. */
int
step_held_at_server(const run *r, const worker *w)
{
	return w->delay.at_server && !(r->rule->flags & (RULE_LOCAL | RULE_WAIT));
}

/* version-delay history: keep a copy of the weights at each version */
void
step_vhist_record(run *r)
{
	if (!r->vh_depth)
		return;
	uint64_t v = ps_version(r->ps);
	int slot = (int)(v % (uint64_t)r->vh_depth);
	r->be_ps->ops->copy(r->be_ps, r->vh[slot], ps_weights(r->ps),
			    sizeof(float) * r->n_params);
	r->vh_v[slot] = v;
}

/* A remote worker's step under a rule with phases (RULE_PHASES; lock
 * held, after the rule's pull): the local step it takes on its own
 * weights, with the optimiser and learning rate of the step's start. The
 * weights go down when its phase starts from the worker's weights here
 * (fresh from the server, or as the last exchange left them), the model
 * comes back from the step that exchanges. */
static void
step_remote_local(run *r, worker *w, int fresh)
{
	run_remote_local *l = &w->rloc;
	w->rw.remote_stepped = 0;
	if (!(r->rule->flags & RULE_PHASES)) {
		l->on = 0;
		w->remote_held = 0;
		return;
	}
	if (fresh)
		w->remote_held = 0;
	const opt_cfg *oc = ps_optim(r->ps);
	*l = (run_remote_local){.on = 1, .weights = !w->remote_held,
				.exchange = r->rule->exchanges(&r->rr, &w->rw),
				.reset = w->remote_resets != w->rw.opt_resets,
				.opt = oc->kind, .beta1 = oc->beta1, .beta2 = oc->beta2,
				.eps = oc->eps, .clip = oc->clip};
	ps_opt(r->ps, &l->lr, &l->mu, &l->wd);
	w->remote_resets = w->rw.opt_resets;
	if (!r->rule->remote_up && !r->rule->remote_down)
		return;
	if (!w->rranges && !(w->rranges = malloc(sizeof(run_remote_range) * 2 * MODEL_MAX_NODES))) {
		run_fail(r, -SL_ENOMEM, "out of memory for a remote worker's fragments");
		return;
	}
	ps_range rg[MODEL_MAX_NODES];
	run_remote_range *up = w->rranges, *down = w->rranges + MODEL_MAX_NODES;
	if (l->exchange && r->rule->remote_up) {
		l->n_up = r->rule->remote_up(&r->rr, &w->rw, rg, MODEL_MAX_NODES);
		for (int i = 0; i < l->n_up; i++)
			up[i] = (run_remote_range){rg[i].off, rg[i].len};
		l->up = up;
	}
	if (r->rule->remote_down) {
		l->n_down = r->rule->remote_down(&r->rr, &w->rw, rg, MODEL_MAX_NODES, &l->mix);
		for (int i = 0; i < l->n_down; i++)
			down[i] = (run_remote_range){rg[i].off, rg[i].len};
		l->down = down;
	}
}

/* fetch the weights this iteration computes on (lock held) */
static void
step_pull(run *r, worker *w)
{
	backend *be = w->rw.be;
	w->t_read = run_now(r);
	/* the depth is fixed for this step: a change lands on the next one */
	w->depth = w->spb_depth;
	/* so is the team's width (the worker's own thread, between steps) */
	if (w->want_threads && w->want_threads != w->cur_threads &&
	    be->ops->set_threads) {
		be->ops->set_threads(be, w->want_threads);
		w->cur_threads = w->want_threads;
	}
	w->rw.grad_off = model_tail_offset(w->rw.m, w->depth);
	w->cw = w->rw.m->params;
	int fresh = w->rw.have == UINT64_MAX;
	if (r->rule->pull)
		r->rule->pull(&r->rr, &w->rw);
	else
		step_pull_server(r, w);
	if (w->remote)
		step_remote_local(r, w, fresh);
}

static void
pull_server(run *r, worker *w, int in_place)
{
	int lag = delay_draw_version(&w->delay, &w->rng_delay);
	uint64_t v = ps_version(r->ps);
	if (lag > 0 && r->vh_depth) {
		uint64_t target = (uint64_t)lag > v ? 0 : v - (uint64_t)lag;
		int slot = (int)(target % (uint64_t)r->vh_depth);
		if (r->vh_v[slot] == target && lag < r->vh_depth) {
			/* a stale read: the weights of version `target`, which
			 * DC-ASGD's compensation must also see */
			ps_pull_old(r->ps, w->rw.id, r->vh[slot], target,
				    w->rw.m->params, &w->rw.have);
			w->rw.v_read = target;
			return;
		}
	}
	if (in_place) {
		/* read the server's weights where they are: no copy */
		w->pinned = w->cw = ps_pin(r->ps, w->rw.id, &w->rw.v_read);
		return;
	}
	ps_pull(r->ps, w->rw.id, w->rw.m->params, &w->rw.have);
	w->rw.v_read = w->rw.have;
}

void
step_pull_server(run *r, worker *w)
{
	/* in place where the worker computes in the server's memory: both
	 * in host memory (in-process CPU workers), or on one backend */
	pull_server(r, w, w->rw.be == r->be_ps || (w->rw.be->ops->host_memory &&
						r->be_ps->ops->host_memory));
}

/* the same into the worker's own weights, a copy (rules that go on from
 * them, as odsgd after its warm-up) */
static void
step_pull_copy(run *r, worker *w)
{
	pull_server(r, w, 0);
}

int
step_computed(run *r, worker *w)
{
	if (w->pinned) {
		ps_unpin(r->ps, w->pinned);
		w->pinned = NULL;
	}
	if (ps_failed(r->ps))
		return run_fail(r, -SL_ENOMEM, "out of memory for the server's copy on write");
	return 0;
}

/* a step computed: its FLOPs (forward + backward) and the backward a
 * partial one did not spend; returns the first */
static double
step_count_flops(run *r, worker *w)
{
	double f = model_step_flops(w->rw.m, w->depth) * w->rw.batch_n;
	w->flops += f;
	w->flops_saved += r->full_flops * w->rw.batch_n - f;
	return f;
}

/* forward + backward on the loaded batch; returns compute FLOPs */
double
step_compute(run *r, worker *w)
{
	const float *p = (r->rule->flags & RULE_SHARED) ? ps_weights(r->ps) : w->cw;
	wbatch b = step_batch(r, w);
	w->loss = wstep(w->rw.m, &r->data->train, p, &b, w->depth);
	return step_count_flops(r, w);
}

int
step_compute_remote(run *r, worker *w)
{
	double loss = NAN;
	/* the wire carries host memory: a device backend's weights go down
	 * first and the gradient comes back up */
	backend *be = w->rw.be;
	const float *cw = w->cw;
	float *g = w->rw.m->grads;
	size_t n = r->n_params, off = w->rw.grad_off;
	const run_remote_local *l = w->rloc.on ? &w->rloc : NULL;
	if (!be->ops->host_memory) {
		if (!w->remote_io && !(w->remote_io = malloc(sizeof(float) * 2 * n)))
			return run_fail(r, -SL_ENOMEM, "out of memory for a remote worker's copies");
		if (!l || l->weights || l->n_down) /* what goes down with the step */
			be->ops->download(be, w->remote_io, cw, sizeof(float) * n);
		cw = w->remote_io;
		g = w->remote_io + n;
	}
	wbatch b = step_batch(r, w);
	int rc = w->remote->compute(w->remote_ctx, cw, n, w->rw.v_read, &b, w->depth, off, g,
				    &loss, l);
	if (rc < 0)
		return rc;
	if (l) {
		/* its local step is taken; the model it reached comes back
		 * with the exchange, into the worker's weights (or the
		 * fragment it sends: the worker keeps the weights then) */
		w->rw.remote_stepped = 1;
		w->remote_held = !(l->exchange && !l->n_up);
		if (l->exchange && !l->n_up)
			be->ops->upload(be, w->rw.m->params, g, sizeof(float) * n);
		for (int i = 0; l->exchange && i < l->n_up; i++)
			be->ops->upload(be, w->rw.m->params + l->up[i].off, g + l->up[i].off,
					sizeof(float) * l->up[i].len);
	} else if (g != w->rw.m->grads) {
		be->ops->upload(be, w->rw.m->grads + off, g + off, sizeof(float) * (n - off));
	}
	w->loss = loss;
	step_count_flops(r, w);
	return 0;
}

/* Is what the step sends finite? Checked once per step, after the
 * compute, for every rule: the batch loss (a NaN or infinite loss means
 * the forward overflowed) and the gradient from the worker's layer offset
 * on (partial backprop sends only that tail). One pass over the floats
 * the message carries, on the worker's own backend. */
const char *
step_nonfinite(const run *r, const worker *w)
{
	if (!isfinite(w->loss))
		return "loss";
	if (w->rw.remote_stepped) /* no gradient came: its model is checked at
				   * the exchange (check_model) */
		return NULL;
	if (!w->rw.be->ops->all_finite(w->rw.be, w->rw.m->grads + w->rw.grad_off,
				    r->n_params - w->rw.grad_off))
		return "gradient";
	return NULL;
}

int
step_check(run *r, worker *w, const char *what)
{
	if (r->diverged)
		return -1; /* the run is stopping: nothing more is applied */
	if (!what)
		return 0;
	run_diverge(r, w, what);
	return -1;
}

/* localsgd and easgd send the worker's weights, not its gradient: a local
 * step may overflow them even from a finite gradient. Before a model
 * leaves a worker: 0 if finite, else the run diverges and -1. */
static int
step_check_model(run *r, worker *w)
{
	if (r->diverged)
		return -1;
	if (w->rw.be->ops->all_finite(w->rw.be, w->rw.m->params, r->n_params))
		return 0;
	run_diverge(r, w, "model");
	return -1;
}

void
step_version_changed(run *r)
{
	step_vhist_record(r);
	r->updates++;
}

/* a gradient delivered: the counters every push path shares */
static void
step_count_delivery(run *r, worker *w)
{
	w->rw.seq++;
	w->bytes_sent += w->push_bytes;
	r->loss_sum += w->loss;
	r->loss_n++;
	r->samples += (uint64_t)w->rw.batch_n;
	w->samples += (uint64_t)w->rw.batch_n;
	w->iterations++;
}

int
step_push_failed(run *r, int wid, const char *what, int rc)
{
	char why[SL_ERR_LEN];
	snprintf(why, sizeof(why), "the server could not take %s of worker %d: %s", what,
		 wid, sl_strerror(rc));
	return run_fail(r, rc, why);
}

/* the default delivery: the gradient message; under RULE_WAIT the worker
 * waits for the round. Returns its staleness. */
static uint64_t
step_push_grad(run *r, worker *w)
{
	uint64_t v0 = ps_version(r->ps);
	if (step_compress(r, w, w->rw.m->grads, w->rw.grad_off, NULL) < 0)
		return 0;
	ps_grad g = {.worker = w->rw.id, .seq = w->rw.seq, .v_read = w->rw.v_read,
		     .off = w->rw.grad_off, .batch = w->rw.batch_n, .g = w->rw.m->grads};
	ps_result res;
	ps_lend(r->ps, w->rw.be); /* the worker's team applies it (lock held) */
	int rc = ps_push(r->ps, &g, step_round_size(r), &res);
	ps_lend(r->ps, NULL);
	if (rc < 0) {
		step_push_failed(r, w->rw.id, "a gradient", rc);
		return 0;
	}
	if ((r->rule->flags & RULE_WAIT) && !res.applied) {
		/* wait for the round */
		w->rw.waiting = 1;
		w->rw.wait_v = v0;
	}
	if (res.applied)
		step_version_changed(r);
	return res.tau;
}

/* gradient coherence (virtual clock): the gradient about to be applied
 * against a fresh one of the same batch at the weights it meets, computed
 * on the eval model (the loop's own: nothing else uses it meanwhile) */
static void
step_coherence(run *r, worker *w)
{
	model *m = r->evm;
	if (!w->rw.be->ops->host_memory || !m->be->ops->host_memory || w->rw.batch_n > m->batch_cap)
		return;
	wbatch wb = step_batch(r, w);
	wstep_load(m, &r->data->train, &wb); /* the views the worker trained on */
	model_step(m, ps_weights(r->ps), w->rw.batch_n, w->depth);
	const float *a = w->rw.m->grads, *b = m->grads;
	double ab = 0, aa = 0, bb = 0;
	for (size_t i = w->rw.grad_off; i < r->n_params; i++) {
		ab += (double)a[i] * b[i];
		aa += (double)a[i] * a[i];
		bb += (double)b[i] * b[i];
	}
	if (!(aa > 0 && bb > 0) || !isfinite(ab))
		return;
	double c = ab / sqrt(aa * bb);
	r->coh_sum += c;
	r->coh_n++;
	r->coh_all += c;
	r->coh_all_n++;
}

/* deliver the worker's gradient through the rule (lock held; can_push
 * true) and account for it */
void
step_deliver(run *r, worker *w)
{
	if (r->diverged)
		return;
	if (r->virt && r->cfg.coherence_every > 0 && !(r->rule->flags & RULE_LOCAL) &&
	    ps_version(r->ps) % (uint64_t)r->cfg.coherence_every == 0)
		step_coherence(r, w);
	step_count_delivery(r, w);
	int record = !(r->rule->flags & RULE_STALE_AT_EXCHANGE) ||
		     (r->rule->exchanges && r->rule->exchanges(&r->rr, &w->rw));
	uint64_t tau = r->rule->deliver ? r->rule->deliver(&r->rr, &w->rw)
					: step_push_grad(r, w);
	if (r->fail_rc)
		return; /* the push failed: the run stops, saying why */
	w->rw.clock++;
	if (record)
		step_record_stale(r, w, tau, w->t_read);
}

/* hold a gradient at the server until it is old enough; a failed
 * allocation fails the run (a dropped gradient would go unnoticed) */
int
step_hold(run *r, worker *w, double due)
{
	if (r->n_held == r->cap_held) {
		int cap = r->cap_held ? 2 * r->cap_held : 16;
		held *h = realloc(r->held, sizeof(held) * (size_t)cap);
		if (!h)
			return run_fail(r, -SL_ENOMEM,
					"out of memory holding a gradient at the server");
		r->held = h;
		r->cap_held = cap;
	}
	size_t off = w->rw.grad_off;
	int rc = step_compress(r, w, w->rw.m->grads, off, NULL);
	if (rc < 0)
		return rc;
	held *h = &r->held[r->n_held];
	/* DC-ASGD compensates with the weights this gradient was computed
	 * on: the worker's backup now, before its next pull replaces it */
	const float *bak = (r->rule->flags & RULE_BACKUP) ? ps_backup(r->ps, w->rw.id) : NULL;
	h->g = malloc(sizeof(float) * r->n_params);
	h->bak = bak ? malloc(sizeof(float) * r->n_params) : NULL;
	if (!h->g || (bak && !h->bak)) {
		free(h->g);
		free(h->bak);
		return run_fail(r, -SL_ENOMEM,
				"out of memory holding a gradient at the server");
	}
	w->rw.be->ops->download(w->rw.be, h->g + off, w->rw.m->grads + off,
			     sizeof(float) * (r->n_params - off));
	if (bak)
		r->be_ps->ops->download(r->be_ps, h->bak, bak,
					sizeof(float) * r->n_params);
	h->due = due;
	h->t_read = w->t_read;
	h->worker = w->rw.id;
	h->v_read = w->rw.v_read;
	h->seq = ++w->rw.seq;
	h->off = off;
	h->batch = w->rw.batch_n;
	h->loss = w->loss;
	r->n_held++;
	w->n_held++;
	w->rw.clock++;
	w->iterations++;
	w->samples += (uint64_t)w->rw.batch_n;
	w->bytes_sent += w->push_bytes;
	rate_mark(&w->rate_samples, run_now(r), (double)w->samples);
	return 0;
}

/* apply held gradients that are due (all of them when force), in the
 * order they were held, never past a stop counted in updates. A push the
 * server cannot take (its staging memory) fails the run and keeps the
 * gradient held, where the checkpoint taken at the stop finds it: it is
 * applied once, on resume. Returns the number applied, or the error. */
int
step_release_held(run *r, int force)
{
	int applied = 0;
	/* after a divergence the weights stay as they were when it was caught */
	for (int i = 0; i < r->n_held && run_steps_left(r) && !r->diverged;) {
		held *h = &r->held[i];
		if (!force && h->due > run_now(r)) {
			i++;
			continue;
		}
		ps_grad g = {.worker = h->worker, .seq = h->seq, .v_read = h->v_read,
			     .off = h->off, .batch = h->batch, .g = h->g,
			     .bak = h->bak, .host = 1};
		ps_result res;
		int rc = ps_push(r->ps, &g, step_round_size(r), &res);
		if (rc < 0)
			return step_push_failed(r, h->worker, "a held gradient", rc);
		r->samples += (uint64_t)h->batch;
		r->loss_sum += h->loss;
		r->loss_n++;
		step_record_stale(r, r->w[h->worker], res.tau, h->t_read);
		r->w[h->worker]->n_held--;
		if (res.applied)
			step_version_changed(r);
		free(h->g);
		free(h->bak);
		/* keep the order: two gradients due at once land oldest first */
		memmove(&r->held[i], &r->held[i + 1],
			sizeof(held) * (size_t)(r->n_held - i - 1));
		r->n_held--;
		applied++;
	}
	return applied;
}

/* delay before the push, in seconds: injected delay, transfer time, and
 * on the wall clock the straggler's extra compute (compute_s at speed 1;
 * with step_ms set, what its step_ms at its speed leaves after
 * compute_s); the virtual clock prices compute itself */
static double
step_delay_s(worker *w, double compute_s, double bytes, int virt)
{
	double ms = delay_draw_ms(&w->delay, &w->rng_delay) +
		    delay_transfer_ms(&w->delay, bytes);
	double s = w->speed > 0 ? w->speed : 1;
	double extra = virt ? 0
		       : w->step_ms > 0 ? w->step_ms * 1e-3 / s - compute_s
		       : compute_s * (1.0 / s - 1.0);
	return ms * 1e-3 + (extra > 0 ? extra : 0);
}

/* the step's delivery delay in seconds (compute_s: its measured compute
 * time on the wall clock, 0 on the virtual clock). The wall clock sleeps
 * the link's time here too (its pull's and its push's: the time from the
 * read to the apply is the same, wherever the sleep falls); the virtual
 * clock places them itself (clock_virtual.c). */
double
step_delay(run *r, worker *w, double compute_s)
{
	double bytes = step_push_size(r, r->n_params - w->rw.grad_off);
	double d = step_delay_s(w, compute_s, bytes, r->virt);
	if (!r->virt) {
		double link = step_link_s(w, w->pull_bytes) + step_link_s(w, w->push_bytes);
		w->comm_s += link;
		d += link;
	}
	return d;
}

double
step_link_s(const worker *w, double bytes)
{
	if (!(bytes > 0))
		return 0;
	double s = w->link.latency_ms * 1e-3;
	if (w->link.bandwidth_mbps > 0)
		s += bytes * 8.0 / (w->link.bandwidth_mbps * 1e6);
	return s;
}

/* what the step being begun moves over its link: the weights it pulls
 * (the whole model, which a remote worker receives whatever it reads in
 * place here; a local rule only for its first step and after an exchange)
 * and what its delivery pushes (the gradient from its layer offset; a
 * local rule its model, on the steps that exchange); a rule that moves
 * something else says so (its step_bytes: sparta's masked coordinates) */
static void
step_note_bytes(run *r, worker *w, int fresh)
{
	double all = (double)r->n_params * sizeof(float);
	if (r->rule->step_bytes) {
		r->rule->step_bytes(&r->rr, &w->rw, fresh, &w->pull_bytes, &w->push_bytes);
		w->rw.reply = 0;
	} else if (r->rule->flags & RULE_LOCAL) {
		double reply = w->rw.reply_floats ? (double)w->rw.reply_floats * sizeof(float) : all;
		w->pull_bytes = fresh ? all : w->rw.reply ? reply : 0;
		/* a reply that came while the worker computed (RULE_FRAGMENTS) */
		w->pull_bg = !fresh && w->rw.reply && (r->rule->flags & RULE_FRAGMENTS);
		w->push_bytes = !(r->rule->exchanges && r->rule->exchanges(&r->rr, &w->rw)) ? 0
				: r->rule->exchange_bytes ? r->rule->exchange_bytes(&r->rr, &w->rw)
				: step_push_size(r, r->n_params);
		w->rw.reply = 0;
		w->rw.reply_floats = 0;
	} else {
		w->pull_bytes = all;
		w->push_bytes = step_push_size(r, r->n_params - w->rw.grad_off);
	}
	w->bytes_recv += w->pull_bytes;
}

int
step_begin(run *r, worker *w)
{
	if (!step_can_begin(r, w))
		return 0;
	int b = r->cfg.batch < w->idx_cap ? r->cfg.batch : w->idx_cap;
	w->rw.batch_n = step_take(r, w, b, w->idx);
	if (!w->rw.batch_n)
		return -1;
	/* a batch is of one epoch (of the set, or under a split of its part) */
	w->idx_epoch = (uint32_t)(r->split.kind != SPLIT_IID ? w->sp_epochs - 1 : r->shuffles - 1);
	step_note_begin(r, w);
	int fresh = w->rw.have == UINT64_MAX;
	step_pull(r, w);
	step_note_bytes(r, w, fresh);
	return 1;
}

wbatch
step_batch(const run *r, const worker *w)
{
	return (wbatch){.idx = w->idx, .n = w->rw.batch_n,
			.aug = {.kind = r->aug, .pad = AUG_PAD, .seed = r->cfg.seed,
				.epoch = w->idx_epoch}};
}

/* ---- what the rules' worker hooks may ask (engine/ps/rule.h) ----------- */

/* the run and the worker behind the views a hook is handed: members of
 * theirs (run.rr, worker.rw) */
static run *
run_of(rule_run *e)
{
	return (run *)((char *)e - offsetof(run, rr));
}

static const run *
run_of_c(const rule_run *e)
{
	return (const run *)((const char *)e - offsetof(run, rr));
}

static worker *
worker_of(rule_worker *w)
{
	return (worker *)((char *)w - offsetof(worker, rw));
}

static int
op_n_running(const rule_run *e)
{
	return run_n_running(run_of_c(e));
}

static uint64_t
op_min_clock(const rule_run *e)
{
	return run_min_clock(run_of_c(e));
}

static int
op_round_size(const rule_run *e)
{
	return step_round_size(run_of_c(e));
}

static uint64_t
op_updates_left(const rule_run *e)
{
	const run *r = run_of_c(e);
	if (!r->cfg.stop_steps)
		return UINT64_MAX;
	uint64_t v = ps_version(r->ps);
	return v < r->cfg.stop_steps ? r->cfg.stop_steps - v : 0;
}

static void
op_pull_copy(rule_run *e, rule_worker *w)
{
	step_pull_copy(run_of(e), worker_of(w));
}

static uint64_t
op_push_grad(rule_run *e, rule_worker *w)
{
	return step_push_grad(run_of(e), worker_of(w));
}

static int
op_check_model(rule_run *e, rule_worker *w)
{
	return step_check_model(run_of(e), worker_of(w));
}

static int
op_compress(rule_run *e, rule_worker *w, float *buf, size_t off, const float *anchor)
{
	return step_compress(run_of(e), worker_of(w), buf, off, anchor) < 0 ? -1 : 0;
}

static int
op_compress_range(rule_run *e, rule_worker *w, float *buf, size_t off, size_t len,
		  const float *anchor)
{
	return step_compress_range(run_of(e), worker_of(w), buf, off, len, anchor) < 0 ? -1 : 0;
}

static double
op_push_bytes(const rule_run *e, size_t n)
{
	return step_push_size(run_of_c(e), n);
}

static void
op_version_changed(rule_run *e)
{
	step_version_changed(run_of(e));
}

static int
op_push_failed(rule_run *e, int wid, const char *what, int rc)
{
	return step_push_failed(run_of(e), wid, what, rc);
}

static int
op_fail(rule_run *e, int code, const char *why)
{
	return run_fail(run_of(e), code, why);
}

static double
worker_speed(const run *r, const worker *w)
{
	double up = run_now(r) - w->t_joined;
	return up > 0 ? (double)w->iterations / up : 0;
}

static double
op_speed(const rule_run *e, const rule_worker *w)
{
	return worker_speed(run_of_c(e), (const worker *)((const char *)w - offsetof(worker, rw)));
}

static double
op_max_speed(const rule_run *e)
{
	const run *r = run_of_c(e);
	double most = 0;
	for (int i = 0; i < r->n_slots; i++) {
		const worker *w = r->w[i];
		if (w && w->active && !w->paused) {
			double s = worker_speed(r, w);
			most = s > most ? s : most;
		}
	}
	return most;
}

static double
op_now(const rule_run *e)
{
	return run_now(run_of_c(e));
}

static int
op_exchange_due(const rule_run *e, const rule_worker *rw, double by)
{
	const run *r = run_of_c(e);
	if (!r->virt)
		return run_now(r) < by;
	for (int i = 0; i < r->n_ev; i++) {
		const vevent *ev = &r->ev[i];
		if (ev->kind == EV_START || ev->worker == rw->id || ev->t > by)
			continue;
		const worker *o = r->w[ev->worker];
		if (o->active && (!r->rule->exchanges || r->rule->exchanges(&r->rr, &o->rw)))
			return 1;
	}
	return 0;
}

static void
op_unlock(rule_run *e)
{
	pthread_mutex_unlock(&run_of(e)->mu);
}

static void
op_lock(rule_run *e)
{
	pthread_mutex_lock(&run_of(e)->mu);
}

const rule_ops step_rule_ops = {
	.n_running = op_n_running,
	.min_clock = op_min_clock,
	.round_size = op_round_size,
	.updates_left = op_updates_left,
	.pull_copy = op_pull_copy,
	.push_grad = op_push_grad,
	.check_model = op_check_model,
	.compress = op_compress,
	.compress_range = op_compress_range,
	.push_bytes = op_push_bytes,
	.version_changed = op_version_changed,
	.push_failed = op_push_failed,
	.fail = op_fail,
	.speed = op_speed,
	.max_speed = op_max_speed,
	.now = op_now,
	.exchange_due = op_exchange_due,
	.unlock = op_unlock,
	.lock = op_lock,
};
