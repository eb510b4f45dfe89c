/* workers.c - a run's workers: create and free them, their settings
 * (the run's, then their own overrides), join and leave mid-run. */
#include "run_impl.h"
#include "optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- workers ------------------------------------------------------------ */

static void
worker_free(worker *w)
{
	if (!w)
		return;
	backend *be = w->rw.be;
	if (w->rw.m) {
		be->ops->free(be, w->rw.ms);
		be->ops->free(be, w->rw.wprev);
		free(w->rw.delta);
		be->ops->free(be, w->rw.tmp);
		be->ops->free(be, w->rw.wire);
	}
	free(w->ef_res);
	if (w->rw.opt) {
		optim_free(w->rw.opt);
		free(w->rw.opt);
	}
	model_free(w->rw.m);
	free(w->remote_io);
	free(w->rranges);
	free(w->sp_perm);
	free(w->idx);
	free(w);
}

/* make the worker's settings those of cfg (override for its id, if any) */
void
worker_settings(run *r, worker *w)
{
	w->delay = r->cfg.delay;
	w->link = r->cfg.link;
	w->spb_depth = 0;
	w->speed = 1.0;
	w->step_ms = 0;
	w->paused = 0;
	for (int i = 0; i < r->cfg.n_overrides; i++) {
		const worker_override *o = &r->cfg.overrides[i];
		if (o->id != w->rw.id)
			continue;
		if (o->has_delay)
			w->delay = o->delay;
		if (o->has_spb)
			w->spb_depth = o->spb_depth;
		if (o->has_speed)
			w->speed = o->speed;
		if (o->has_step_ms)
			w->step_ms = o->step_ms;
		if (o->has_paused)
			w->paused = o->paused;
		if (o->has_link)
			w->link = o->link;
	}
}

int
worker_new(run *r, int id, worker **out)
{
	*out = NULL;
	worker *w = calloc(1, sizeof(*w));
	if (!w)
		return sl_fail(r->err, SL_ENOMEM, "out of memory");
	w->rw.id = id;
	w->rw.have = UINT64_MAX;
	w->rw.last_round = -1;
	rng_seed(&w->rng_delay, r->cfg.seed, 100 + (uint64_t)id);
	if (r->virt) {
		w->rw.be = r->be_eval;
	} else {
		/* as wide as the machine (or threads); narrowed to one thread
		 * while other workers share the cores (fit_threads) */
		int t = r->cfg.threads ? r->cfg.threads : r->ncpu;
		int rc = backend_open(backend_name(r->be_eval), t, &w->rw.be, r->err);
		if (rc < 0) {
			free(w);
			return rc;
		}
	}
	const dataset *tr = &r->data->train;
	int rc = model_new(r->cfg.model, tr->c, tr->h, tr->w, tr->classes,
			   r->cfg.batch, r->cfg.seed, w->rw.be, &w->rw.m, r->err);
	w->idx_cap = r->cfg.batch;
	w->idx = calloc((size_t)w->idx_cap, sizeof(uint32_t)); /* saved by checkpoints */
	if (rc < 0 || !w->idx) {
		if (!r->virt)
			backend_free(w->rw.be);
		free(w->idx);
		model_free(w->rw.m);
		free(w);
		return rc < 0 ? rc : sl_fail(r->err, SL_ENOMEM, "out of memory");
	}
	worker_settings(r, w);
	w->t_joined = run_now(r);
	rate_reset(&w->rate_samples, w->t_joined, (double)w->samples);
	*out = w;
	return 0;
}

void
worker_destroy(run *r, worker *w)
{
	backend *be = w->rw.be;
	worker_free(w);
	if (!r->virt)
		backend_free(be);
}

/* slot i joins the run (lock held; the slot exists) */
static void
slot_activate(run *r, int i)
{
	worker *w = r->w[i];
	if (w->active)
		return;
	/* it joins at the slowest running clock (taken before it counts as
	 * running: its own clock is 0 or stale) */
	uint64_t mc = run_min_clock(r);
	w->rw.clock = mc == UINT64_MAX ? 0 : mc;
	w->active = 1;
	w->st = W_IDLE;
	w->t_joined = run_now(r);
	rate_reset(&w->rate_samples, w->t_joined, (double)w->samples);
	w->rw.have = UINT64_MAX;
	w->rw.waiting = 0;
	if (r->virt) {
		if (!w->pending)
			virt_schedule(r, run_now(r), i, EV_START);
	} else {
		if (wall_start_thread(r, w) < 0)
			run_fail(r, -SL_ENOMEM, "workers: cannot start a thread");
	}
}

/* set the worker count (lock held) */
void
workers_set(run *r, int n)
{
	for (int i = 0; i < n; i++) {
		if (i >= r->n_slots) {
			worker *w;
			int rc = worker_new(r, i, &w);
			if (rc < 0) {
				/* the run cannot have the workers it was asked for */
				char why[2 * SL_ERR_LEN];
				snprintf(why, sizeof(why), "workers: cannot add worker %d: %s",
					 i, r->err);
				r->err[0] = 0;
				run_fail(r, rc, why);
				break;
			}
			r->w[i] = w;
			r->n_slots = i + 1;
		}
		worker *w = r->w[i];
		if (!w->active && w->remote_slot)
			continue; /* kept for remote workers (run_join_remote) */
		slot_activate(r, i);
	}
	for (int i = n; i < r->n_slots; i++)
		r->w[i]->active = 0; /* leaves after its current iteration */
	r->cfg.workers = n;
	split_run_refresh(r);
	wall_fit_threads(r);
	/* a sync round may be complete with fewer workers */
	if (ps_flush_round(r->ps, step_round_size(r)))
		step_version_changed(r);
}

/* ---- remote workers ------------------------------------------------------ */

void
workers_lose_remote(run *r, worker *w, int left)
{
	w->active = 0;
	w->st = W_IDLE;
	if (left)
		r->remote_left++;
	else
		r->remote_lost++;
	r->remote_dropped++; /* the step it was computing */
	if (r->cb.remote)
		r->cb.remote(r->cb.ud, run_now(r), ps_version(r->ps), w->rw.id, left ? "left" : "lost",
			     w->host);
	if (w->rw.id == r->cfg.workers - 1) /* the last slot: the count goes down */
		r->cfg.workers--;
	split_run_refresh(r);
	wall_fit_threads(r);
	/* a sync round waiting for it goes on without it */
	if (ps_flush_round(r->ps, step_round_size(r)))
		step_version_changed(r);
	pthread_cond_broadcast(&r->cv);
}

int
run_fragments_fixed(const run *r)
{
	if (!(r->rule->flags & RULE_FRAGMENTS))
		return 0;
	for (int i = 0; i < r->n_slots; i++)
		if (r->w[i] && r->w[i]->active && r->w[i]->rw.have != UINT64_MAX)
			return 1;
	return 0;
}

int
run_join_remote(run *r, const run_remote_ops *ops, void *ctx, const char *host, int *id,
		char *err)
{
	run_lock(r);
	int rc = 0, n = r->cfg.workers;
	/* a slot a remote worker left (its thread gone) is taken again, so
	 * that joins and losses leave no holes a local worker would fill */
	for (int i = 0; i < n && i < r->n_slots; i++)
		if (!r->w[i]->active && r->w[i]->remote_slot && r->w[i]->remote_left &&
		    (!r->w[i]->thread_live || r->w[i]->exited)) {
			n = i;
			break;
		}
	if (r->virt)
		rc = sl_fail(err, SL_EINVAL, "remote workers need the wall clock (the virtual "
			     "clock simulates its workers)");
	else if (r->rule->flags & RULE_SHARED)
		rc = sl_fail(err, SL_EINVAL, "%s steps weights shared in the server's memory: "
			     "no remote workers", r->rule->name);
	else if (r->stopping || r->state == RUN_FINISHED || r->state == RUN_FAILED ||
		 r->state == RUN_DIVERGED)
		rc = sl_fail(err, SL_ESTATE, "the run has ended");
	else if (run_fragments_fixed(r))
		rc = sl_fail(err, SL_EINVAL, "%s's fragment rounds need the workers it began "
			     "with: a remote worker joins before the run's first step, or under "
			     "another rule", r->rule->name);
	else if (n >= CFG_MAX_WORKERS)
		rc = sl_fail(err, SL_EINVAL, "the run has %d workers, the most it may have",
			     CFG_MAX_WORKERS);
	else if (n >= r->cfg.workers)
		rc = split_run_fits(r, n + 1, err);
	if (rc == 0 && n >= r->n_slots) {
		for (int i = r->n_slots; rc == 0 && i <= n; i++) {
			worker *w;
			if ((rc = worker_new(r, i, &w)) < 0) {
				sl_fail(err, rc < 0 ? -rc : SL_ENOMEM, "%s", r->err);
				r->err[0] = 0;
				break;
			}
			r->w[i] = w;
			r->n_slots = i + 1;
		}
	}
	if (rc == 0) {
		worker *w = r->w[n];
		w->remote = ops;
		w->remote_ctx = ctx;
		w->remote_left = 0;
		w->remote_slot = 1;
		w->rw.remote = 1;
		snprintf(w->host, sizeof(w->host), "%s", host ? host : "");
		w->rtt_ms = 0;
		r->remote_joined++;
		if (n >= r->cfg.workers)
			r->cfg.workers = n + 1;
		split_run_refresh(r);
		slot_activate(r, n);
		wall_fit_threads(r);
		*id = n;
		if (r->cb.remote)
			r->cb.remote(r->cb.ud, run_now(r), ps_version(r->ps), n, "joined", w->host);
	}
	run_unlock(r);
	return rc;
}

/* ---- the ledger of remote pushes ------------------------------------------ */

/* the run's ledger, made at the first call (lock held) */
static ledger *
run_ledger(run *r)
{
	if (!r->led && (r->led = malloc(sizeof(*r->led))))
		ledger_init(r->led);
	return r->led;
}

int
run_remote_hello(run *r, uint32_t wid, uint32_t incarnation)
{
	run_lock(r);
	ledger *l = run_ledger(r);
	int rc = l ? ledger_join(l, wid, incarnation) : -1;
	run_unlock(r);
	return rc;
}

uint64_t
run_remote_issue(run *r, uint32_t wid)
{
	pthread_mutex_lock(&r->mu); /* each step: no run_lock broadcast */
	ledger *l = run_ledger(r);
	uint64_t s = l ? ledger_issue(l, wid) : 0;
	pthread_mutex_unlock(&r->mu);
	return s;
}

int
run_remote_push(run *r, uint32_t wid, uint32_t incarnation, uint64_t seq)
{
	pthread_mutex_lock(&r->mu); /* each step: no run_lock broadcast */
	ledger *l = run_ledger(r);
	int v = l ? (int)ledger_push(l, wid, incarnation, seq) : -1;
	pthread_mutex_unlock(&r->mu);
	return v;
}

void
run_remote_stale(run *r)
{
	run_lock(r);
	ledger *l = run_ledger(r);
	if (l)
		ledger_old_epoch(l);
	run_unlock(r);
}

void
run_remote_rtt(run *r, int id, double rtt_ms)
{
	pthread_mutex_lock(&r->mu);
	if (id >= 0 && id < r->n_slots && r->w[id]->remote && rtt_ms >= 0)
		r->w[id]->rtt_ms = rtt_ms;
	pthread_mutex_unlock(&r->mu);
}
