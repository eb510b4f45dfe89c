/* clock_virtual.c - the virtual clock: a discrete-event queue. A
 * step's simulated cost is its FLOPs at a nominal speed; nobody sleeps,
 * and the same run object and seed give the same log bit for bit. */
#include "run_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- virtual clock ---------------------------------------------------------- */

static int
ev_less(const vevent *a, const vevent *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

void
virt_schedule(run *r, double t, int wid, int kind)
{
	if (r->n_ev == r->cap_ev) {
		int cap = r->cap_ev ? 2 * r->cap_ev : 64;
		vevent *e = realloc(r->ev, sizeof(vevent) * (size_t)cap);
		SL_ASSERT(e != NULL);
		r->ev = e;
		r->cap_ev = cap;
	}
	if (kind != EV_HELD)
		r->w[wid]->pending = 1;
	int i = r->n_ev++;
	vevent e = {t, r->ev_seq++, wid, kind};
	while (i > 0 && ev_less(&e, &r->ev[(i - 1) / 2])) {
		r->ev[i] = r->ev[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	r->ev[i] = e;
}

static vevent
ev_pop(run *r)
{
	vevent top = r->ev[0], last = r->ev[--r->n_ev];
	int i = 0;
	for (;;) {
		int c = 2 * i + 1;
		if (c >= r->n_ev)
			break;
		if (c + 1 < r->n_ev && ev_less(&r->ev[c + 1], &r->ev[c]))
			c++;
		if (!ev_less(&r->ev[c], &last))
			break;
		r->ev[i] = r->ev[c];
		i = c;
	}
	if (r->n_ev)
		r->ev[i] = last;
	return top;
}

/* reschedule blocked workers whose condition now holds, in id order */
static void
wake_blocked(run *r)
{
	for (int i = 0; i < r->n_slots; i++) {
		worker *w = r->w[i];
		if (!w->active)
			continue;
		if (w->st == W_WAIT_BEGIN && step_can_begin(r, w)) {
			w->st = W_IDLE;
			virt_schedule(r, r->vtime, i, EV_START);
		} else if (w->st == W_WAIT_PUSH && step_can_push(r, w)) {
			w->st = W_IDLE;
			virt_schedule(r, r->vtime, i, EV_ARRIVE);
		}
	}
}

static void
v_start(run *r, worker *w)
{
	if (!w->active)
		return;
	if (step_begin(r, w) <= 0) {
		w->st = W_WAIT_BEGIN;
		return;
	}
	double f = step_compute(r, w);
	if (step_computed(r, w) < 0 || step_check(r, w, step_nonfinite(r, w)) < 0) {
		w->st = W_IDLE;
		return;
	}
	/* simulated time: FLOPs at a nominal speed, or the worker's step_ms
	 * where set, scaled by the worker's speed; never a measured time
	 * (that would break determinism) */
	double at1 = w->step_ms > 0 ? w->step_ms * 1e-3 : f / NOMINAL_FLOPS;
	double cost = at1 / (w->speed > 0 ? w->speed : 1);
	double d = step_delay(r, w, 0);
	/* the link: the weights come (answered now, at the pull), then the
	 * compute, the injected delay, the push on its way; a rule that
	 * overlaps them computes while its messages travel */
	double pull = step_link_s(w, w->pull_bytes), push = step_link_s(w, w->push_bytes);
	int at_server = step_held_at_server(r, w);
	int overlap = r->rule->overlaps && r->rule->overlaps(&r->rr, &w->rw);
	double work = cost + (at_server ? 0 : d), t;
	/* summed in this order: with a free link the arrival is the same
	 * double as before the link existed (the fixtures hold bit for bit) */
	if (r->rule->flags & RULE_FRAGMENTS) {
		/* the exchanges travel behind the compute: a reply is taken
		 * once it has come (its link time after the push's, from the
		 * push's send); a push lands its link time after the step
		 * that sends it */
		double start = r->vtime;
		if (w->pull_bg && w->xfer_end + pull > start)
			start = w->xfer_end + pull;
		t = start + (w->pull_bg ? 0 : pull) + cost;
		if (!at_server)
			t += d;
		if (w->push_bytes > 0)
			w->xfer_end = t + push;
	} else if (overlap && pull + push > work) {
		t = r->vtime + (pull + push);
	} else {
		t = r->vtime + (overlap ? 0 : pull) + cost;
		if (!at_server)
			t += d;
		if (!overlap)
			t += push;
	}
	w->comm_s += pull + push;
	w->st = W_DELAY;
	w->due = at_server ? d : 0; /* held this long at the server after arriving */
	virt_schedule(r, t, w->rw.id, EV_ARRIVE);
}

/* the server serves one push at a time, server_ms each, in the order
 * they arrive; the gradient is applied when served, and the worker's next
 * pull (sent behind its push) is answered then */
static void
v_serve(run *r, worker *w)
{
	double s = r->cfg.server_ms * 1e-3;
	if (s > 0 && w->push_bytes > 0) {
		double start = r->server_free > r->vtime ? r->server_free : r->vtime;
		r->server_free = start + s;
		w->st = W_DELAY; /* in the server's queue (not W_WAIT_PUSH: that
				  * is waiting for the rule, which wake_blocked
				  * would send again) */
		virt_schedule(r, r->server_free, w->rw.id, EV_APPLY);
		return;
	}
	step_deliver(r, w);
	/* pull again at once: between a worker's push and its next pull no
	 * other event slips in (so N equal-speed workers settle at N-1) */
	w->st = W_IDLE;
	v_start(r, w);
}

static void
v_apply(run *r, worker *w)
{
	step_deliver(r, w);
	w->st = W_IDLE;
	v_start(r, w);
}

static void
v_arrive(run *r, worker *w)
{
	if (w->due > 0) {
		double due = w->due;
		w->due = 0;
		if (!step_held_at_server(r, w)) {
			/* the rule changed while it travelled: the rest of its
			 * delay delays the arrival */
			virt_schedule(r, r->vtime + due, w->rw.id, EV_ARRIVE);
			return;
		}
		if (step_hold(r, w, r->vtime + due) < 0)
			return;
		virt_schedule(r, r->vtime + due, w->rw.id, EV_HELD);
	} else if (!step_can_push(r, w)) {
		w->st = W_WAIT_PUSH;
		return;
	} else {
		v_serve(r, w);
		return;
	}
	w->st = W_IDLE;
	v_start(r, w);
}

int
virt_exec(run *r)
{
	workers_set(r, r->cfg.workers);
	report_publish(r);
	for (;;) {
		/* between two events, whatever the clock says: callers of
		 * run_lock get the lock (ckpt_serve yields it), the commands
		 * queued meanwhile are applied, the stop flag is read */
		cmd_drain(r);
		ckpt_serve(r);
		cmd_drain(r);
		if (report_stop_met(r))
			break;
		if (r->n_ev == 0) {
			if (r->n_held) {
				if (step_release_held(r, 1) < 0)
					break; /* the run failed, saying why */
			} else if (ps_flush_round(r->ps, 1)) {
				step_version_changed(r);
			} else if (r->take_limit && r->taken >= r->take_limit) {
				break; /* data spent */
			} else {
				/* everyone paused: wait for a command */
				report_publish(r);
				if (atomic_load(&r->stop_req))
					break;
				run_timed_wait(r, 0.05);
				wake_blocked(r);
				continue;
			}
			wake_blocked(r);
			if (report_eval_due(r))
				report_evaluate(r);
			continue;
		}
		vevent e = ev_pop(r);
		if (e.t > r->vtime)
			r->vtime = e.t;
		worker *w = r->w[e.worker];
		if (e.kind != EV_HELD)
			w->pending = 0;
		if (e.kind == EV_START)
			v_start(r, w);
		else if (e.kind == EV_ARRIVE)
			v_arrive(r, w);
		else if (e.kind == EV_APPLY)
			v_apply(r, w);
		else if (step_release_held(r, 0) < 0)
			break;
		wake_blocked(r);
		if (report_eval_due(r))
			report_evaluate(r);
		if (sl_now() - r->last_snap >= SNAP_EVERY_S)
			report_publish(r);
		report_progress(r);
	}
	return 0;
}
