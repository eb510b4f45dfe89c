/* clock_wall.c - the wall clock: one thread per worker that really
 * computes and sleeps its delay; the control loop (run_exec's thread)
 * applies commands, releases held gradients and evaluates. */
#include "run_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *worker_main(void *p);
static void wall_after_push(run *r);

struct wargs {
	run *r;
	worker *w;
};

int
wall_start_thread(run *r, worker *w)
{
	if (r->virt || !r->exec_live)
		return 0; /* before run_exec: wall_exec starts it */
	if (w->thread_live) {
		if (!w->exited)
			return 0; /* still in its loop: it sees active again */
		/* it left (it released the lock for good): reap it */
		pthread_join(w->th, NULL);
		w->thread_live = 0;
	}
	w->exited = 0;
	struct wargs *a = malloc(sizeof(*a));
	if (!a)
		return -SL_ENOMEM;
	a->r = r;
	a->w = w;
	if (pthread_create(&w->th, NULL, worker_main, a)) {
		free(a);
		return -SL_ENOMEM;
	}
	w->thread_live = 1;
	return 0;
}

/* wall clock: a lone running worker uses its whole team, several use one
 * thread each (lock held; takes effect at each worker's next step) */
void
wall_fit_threads(run *r)
{
	if (r->virt || r->cfg.threads)
		return;
	int n = run_n_running(r);
	for (int i = 0; i < r->n_slots; i++)
		r->w[i]->want_threads = n <= 1 ? r->ncpu : 1;
}

static void *
worker_main(void *p)
{
	struct wargs a = *(struct wargs *)p;
	free(p);
	run *r = a.r;
	worker *w = a.w;
	const run_remote_ops *gone = NULL; /* a remote worker lost: told after */
	void *gone_ctx = NULL;
	pthread_mutex_lock(&r->mu);
	while (!r->stopping && w->active) {
		run_yield(r); /* callers of run_lock first */
		int begun = r->eval_gate ? 0 : step_begin(r, w);
		if (begun <= 0) {
			w->st = W_WAIT_BEGIN;
			if (begun < 0) /* the control loop may stop the run now */
				pthread_cond_broadcast(&r->cv);
			run_timed_wait(r, 0.05);
			continue;
		}
		r->n_computing++;
		w->st = W_COMPUTE;
		pthread_mutex_unlock(&r->mu);
		double t0 = sl_now();
		int lost = w->remote ? step_compute_remote(r, w) : (step_compute(r, w), 0);
		double dt = sl_now() - t0;
		/* the divergence check, outside the lock: workers scan in parallel */
		const char *bad = lost ? NULL : step_nonfinite(r, w);
		pthread_mutex_lock(&r->mu);
		r->n_computing--;
		pthread_cond_broadcast(&r->cv);
		if (lost) {
			gone = w->remote;
			gone_ctx = w->remote_ctx;
			w->remote_left = 1;
			step_computed(r, w);
			if (!r->stopping) /* cancelled by the run's stop: not a loss */
				workers_lose_remote(r, w, lost == RUN_REMOTE_LEFT);
			break;
		}
		if (step_computed(r, w) < 0 || step_check(r, w, bad) < 0)
			break;
		double d = step_delay(r, w, dt);
		if (step_held_at_server(r, w)) {
			if (step_hold(r, w, run_now(r) + d) < 0)
				break;
			w->st = W_IDLE;
			continue;
		}
		if (d > 0) {
			w->st = W_DELAY;
			double until = sl_now() + d;
			while (!r->stopping && sl_now() < until)
				run_timed_wait(r, until - sl_now());
		}
		while (!r->stopping && !step_can_push(r, w)) {
			w->st = W_WAIT_PUSH;
			run_timed_wait(r, 0.05);
		}
		if (r->stopping)
			break;
		step_deliver(r, w);
		w->st = W_IDLE;
		wall_after_push(r);
		pthread_cond_broadcast(&r->cv);
	}
	w->st = W_IDLE;
	w->exited = 1;
	if (!gone && w->remote && !w->remote_left) { /* it left, or the run ended */
		gone = w->remote;
		gone_ctx = w->remote_ctx;
	}
	if (gone)
		w->remote_left = 1; /* kept for the final snapshot; the slot is free */
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	if (gone && gone->left)
		gone->left(gone_ctx);
	return NULL;
}

/* every active worker between iterations and nothing in flight (lock held) */
static int
all_idle(const run *r)
{
	if (r->n_computing || r->n_held)
		return 0;
	for (int i = 0; i < r->n_slots; i++) {
		const worker *w = r->w[i];
		if (w->active && w->st != W_IDLE && w->st != W_WAIT_BEGIN)
			return 0;
	}
	return 1;
}

/* after a push on the wall clock: evaluation or stop due? (lock held) */
static void
wall_after_push(run *r)
{
	cmd_drain_schedule(r); /* entries due at this version, now */
	if (report_stop_met(r)) {
		r->stopping = 1;
		pthread_cond_broadcast(&r->cv);
	} else if (!r->eval_gate && report_eval_due(r)) {
		r->eval_gate = 2; /* 2: requested, the control thread evaluates */
		pthread_cond_broadcast(&r->cv);
	}
}

int
wall_exec(run *r)
{
	workers_set(r, r->cfg.workers);
	for (int i = 0; i < r->n_slots; i++) /* workers of a checkpoint */
		if (r->w[i]->active)
			if (wall_start_thread(r, r->w[i]) < 0)
				run_fail(r, -SL_ENOMEM, "workers: cannot start a thread");
	report_publish(r);
	for (;;) {
		cmd_drain(r);
		ckpt_serve(r);
		if (r->n_held && step_release_held(r, 0) > 0)
			wall_after_push(r);
		if (r->eval_gate == 2 || (!r->eval_gate && report_eval_due(r)))
			report_evaluate(r);
		if (r->stopping || report_stop_met(r))
			break;
		if (r->take_limit && r->taken >= r->take_limit && all_idle(r)) {
			/* the data is spent: apply what is pending, then stop */
			if (ps_flush_round(r->ps, 1))
				step_version_changed(r);
			if (report_stop_met(r))
				break;
		}
		if (sl_now() - r->last_snap >= SNAP_EVERY_S)
			report_publish(r);
		report_progress(r);
		run_timed_wait(r, r->n_held ? 0.002 : 0.01);
	}
	r->stopping = 1;
	pthread_cond_broadcast(&r->cv);
	for (int i = 0; i < r->n_slots; i++) /* remote computes in flight return now */
		if (r->w[i]->remote && !r->w[i]->remote_left && r->w[i]->remote->cancel)
			r->w[i]->remote->cancel(r->w[i]->remote_ctx);
	for (int i = 0; i < r->n_slots; i++) {
		worker *w = r->w[i];
		if (!w->thread_live)
			continue;
		pthread_mutex_unlock(&r->mu);
		pthread_join(w->th, NULL);
		pthread_mutex_lock(&r->mu);
		w->thread_live = 0;
	}
	return 0;
}
