/* command.c - control: changes checked (run_command), queued, and
 * applied between steps; the schedule's timed changes; each reported
 * through the change callback so a log replays the run. */
#include "run_impl.h"
#include "fields.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- commands ------------------------------------------------------------ */

static int
check_cmd(const run *r, const run_cmd *c, char *err)
{
	if (fields_check_cmd(c, err) < 0) /* the ranges of engine/run/fields.c */
		return -SL_EINVAL;
	if (c->worker >= 0 && (c->worker >= r->cfg.workers))
		return sl_fail(err, SL_EINVAL, "worker: no worker %d (the run has %d)",
			       c->worker, r->cfg.workers);
	if ((c->fields & CMD_WORKERS) && c->workers == 0 && r->virt)
		return sl_fail(err, SL_EINVAL, "workers: 0 (remote workers only) needs the wall "
			       "clock; the virtual clock simulates its workers: give 1 or more");
	if ((c->fields & CMD_WORKERS) && split_run_fits(r, c->workers, err) < 0)
		return -SL_EINVAL;
	if (c->fields & CMD_RULE) {
		const rule_class *rc = rule_find(c->rule);
		char names[256];
		if (!rc)
			return sl_fail(err, SL_EINVAL, "rule: unknown \"%s\" (expected %s)",
				       c->rule, rule_names(names, sizeof(names)));
		if ((rc->flags & RULE_SHARED) && !r->be_ps->ops->host_memory)
			return sl_fail(err, SL_EINVAL,
				       "rule: %s needs workers that share the server's memory "
				       "(device %s does not)", rc->name, backend_name(r->be_ps));
		if ((rc->flags & RULE_SHARED) && r->virt)
			return sl_fail(err, SL_EINVAL,
				       "rule: %s needs threads sharing memory (the wall clock)",
				       rc->name);
	}
	if (c->fields & (CMD_RULE | CMD_OPTIMIZER | CMD_CLIP | CMD_MOMENTUM)) {
		/* the optimiser as it would be after the change */
		opt_cfg o = r->cfg.opt;
		if (c->fields & CMD_OPTIMIZER)
			o.kind = c->optimizer;
		if (c->fields & CMD_CLIP)
			o.clip = c->clip;
		int rc = config_optim_fits((c->fields & CMD_RULE) ? c->rule : r->cfg.rule, &o,
					   (c->fields & CMD_MOMENTUM) ? c->momentum
								       : r->cfg.momentum, err);
		if (rc < 0)
			return rc;
	}
	if ((c->fields & (CMD_RULE | CMD_RULE_PARAMS)) &&
	    config_compress_fits((c->fields & CMD_RULE) ? c->rule : r->cfg.rule,
				 (c->fields & CMD_RULE_PARAMS) ? &c->rp : &r->cfg.rp, err) < 0)
		return -SL_EINVAL;
	if ((c->fields & (CMD_RULE | CMD_RULE_PARAMS)) &&
	    config_fragments_fit((c->fields & CMD_RULE) ? c->rule : r->cfg.rule,
				 (c->fields & CMD_RULE_PARAMS) ? &c->rp : &r->cfg.rp,
				 ps_units(r->ps), err) < 0)
		return -SL_EINVAL;
	if ((c->fields & CMD_WORKERS) && c->workers > r->cfg.workers && run_fragments_fixed(r))
		return sl_fail(err, SL_EINVAL, "workers: %s's fragment rounds need the workers it "
			       "began with (a worker added mid-run would join them out of step): "
			       "add workers under another rule, then switch", r->rule->name);
	if ((c->fields & CMD_BATCH) && c->batch > r->cfg.batch)
		return sl_fail(err, SL_EINVAL,
			       "batch: must be in [1, %d] (the run's starting batch), got %d",
			       r->cfg.batch, c->batch);
	if ((c->fields & CMD_SPB) && c->spb_depth > r->evm->n_param_layers)
		return sl_fail(err, SL_EINVAL,
			       "spb_depth: must be in [0, %d] (the model's parameterised layers), got %d",
			       r->evm->n_param_layers, c->spb_depth);
	if ((c->fields & CMD_SPB) && config_spb_at_boundary("spb_depth", c->spb_depth, r->cfg.model, err) < 0)
		return -SL_EINVAL;
	if ((c->fields & CMD_DELAY) && c->delay.dist == DELAY_VERSION &&
	    c->delay.s >= VHIST_MAX)
		return sl_fail(err, SL_EINVAL, "delay.s: at most %d", VHIST_MAX - 1);
	return 0;
}

int
run_command(run *r, const run_cmd *c, char *err)
{
	int rc = check_cmd(r, c, err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&r->qmu);
	if (r->n_q == r->cap_q) {
		int cap = r->cap_q ? 2 * r->cap_q : 16;
		run_cmd *q = realloc(r->q, sizeof(run_cmd) * (size_t)cap);
		if (!q) {
			pthread_mutex_unlock(&r->qmu);
			return sl_fail(err, SL_ENOMEM, "out of memory");
		}
		r->q = q;
		r->cap_q = cap;
	}
	r->q[r->n_q++] = *c;
	pthread_mutex_unlock(&r->qmu);
	run_lock(r); /* wakes a loop waiting for a command */
	run_unlock(r);
	return 0;
}

/* serialise the run and hand it to cb.checkpoint (lock held) */
static void
cmd_hand_checkpoint(run *r, const run_cmd *c)
{
	blob b = {0};
	ckpt_save_state(r, &b);
	if (r->cb.checkpoint)
		r->cb.checkpoint(r->cb.ud, c, b.oom ? NULL : b.p, b.oom ? 0 : b.n);
	blob_free(&b);
}

/* a rule that bounds the clocks takes effect (or its parameters change):
 * every worker's clock starts from 0, and the widest gap is measured anew */
static void
restart_clocks(run *r)
{
	if (!(r->rule->flags & RULE_CLOCKS))
		return;
	for (int i = 0; i < r->n_slots; i++)
		r->w[i]->rw.clock = 0;
	r->clock_gap_max = 0;
}

static void
cmd_apply_rule(run *r, const char *name, const rule_params *rp)
{
	const rule_class *rc = rule_find(name);
	if (!rc)
		return;
	char before[sizeof(r->cfg.rule)];
	rule_params rp_before = r->cfg.rp;
	snprintf(before, sizeof(before), "%s", r->cfg.rule);
	snprintf(r->cfg.rule, sizeof(r->cfg.rule), "%s", name);
	if (rp)
		r->cfg.rp = *rp;
	r->rule = rc;
	ps_set_rule(r->ps, r->rule, &r->cfg.rp);
	r->rr.window_t0 = -1; /* the workers start afresh, none held */
	for (int i = 0; i < r->n_slots; i++) {
		worker *w = r->w[i];
		if (strcmp(before, name)) { /* demo's momentum starts at zero */
			free(w->rw.delta);
			w->rw.delta = NULL;
		}
		w->rw.waiting = 0;
		w->rw.have = UINT64_MAX; /* re-read the server's weights */
		w->rw.last_round = -1;
		w->rw.local_steps = 0;
	}
	restart_clocks(r);
	step_compress_changed(r, before, &rp_before);
}

static void
override_set(run *r, const run_cmd *c)
{
	worker_override *o = NULL;
	for (int i = 0; i < r->cfg.n_overrides; i++)
		if (r->cfg.overrides[i].id == c->worker)
			o = &r->cfg.overrides[i];
	if (!o && r->cfg.n_overrides < CFG_MAX_OVERRIDES) {
		o = &r->cfg.overrides[r->cfg.n_overrides++];
		memset(o, 0, sizeof(*o));
		o->id = c->worker;
	}
	if (!o)
		return;
	if (c->fields & CMD_DELAY) {
		o->has_delay = 1;
		o->delay = c->delay;
	}
	if (c->fields & CMD_SPB) {
		o->has_spb = 1;
		o->spb_depth = c->spb_depth;
	}
	if (c->fields & CMD_SPEED) {
		o->has_speed = 1;
		o->speed = c->speed;
	}
	if (c->fields & CMD_STEP_MS) {
		o->has_step_ms = 1;
		o->step_ms = c->step_ms;
	}
	if (c->fields & CMD_PAUSED) {
		o->has_paused = 1;
		o->paused = c->paused;
	}
	if (c->fields & CMD_LINK) {
		o->has_link = 1;
		o->link = c->link;
	}
}

static int
need_vhist(const run *r)
{
	int d = 0;
	for (int i = 0; i < r->n_slots; i++)
		if (r->w[i]->delay.dist == DELAY_VERSION && r->w[i]->delay.s + 1 > d)
			d = r->w[i]->delay.s + 1;
	if (r->cfg.delay.dist == DELAY_VERSION && r->cfg.delay.s + 1 > d)
		d = r->cfg.delay.s + 1;
	/* workers not made yet (at the start) have their overrides */
	for (int i = 0; i < r->cfg.n_overrides; i++) {
		const worker_override *o = &r->cfg.overrides[i];
		if (o->has_delay && o->delay.dist == DELAY_VERSION && o->delay.s + 1 > d)
			d = o->delay.s + 1;
	}
	return d > VHIST_MAX ? VHIST_MAX : d;
}

void
cmd_ensure_vhist(run *r)
{
	int d = need_vhist(r);
	for (int i = r->vh_depth; i < d; i++) {
		r->vh[i] = r->be_ps->ops->alloc(r->be_ps, sizeof(float) * r->n_params);
		if (!r->vh[i]) {
			d = i;
			break;
		}
		r->vh_v[i] = UINT64_MAX;
	}
	if (d > r->vh_depth) {
		r->vh_depth = d;
		for (int i = 0; i < d; i++)
			r->vh_v[i] = UINT64_MAX;
		step_vhist_record(r);
	}
}

/* apply one change (lock held) and report it */
static void
cmd_apply(run *r, const run_cmd *c)
{
	if (c->worker >= 0) {
		if (c->worker >= r->n_slots)
			return;
		worker *w = r->w[c->worker];
		if (c->fields & CMD_DELAY)
			w->delay = c->delay;
		if (c->fields & CMD_SPB)
			w->spb_depth = c->spb_depth;
		if (c->fields & CMD_SPEED)
			w->speed = c->speed;
		if (c->fields & CMD_STEP_MS)
			w->step_ms = c->step_ms;
		if (c->fields & CMD_LINK)
			w->link = c->link;
		if (c->fields & CMD_PAUSED) {
			/* resumed, it rejoins at the slowest running clock, as
			 * an added worker does (else ssp holds the others
			 * until it has caught up alone) */
			uint64_t mc = run_min_clock(r);
			if (w->paused && !c->paused && mc != UINT64_MAX && w->rw.clock < mc)
				w->rw.clock = mc;
			w->paused = c->paused;
			if (ps_flush_round(r->ps, step_round_size(r)))
				step_version_changed(r);
			wall_fit_threads(r);
		}
		override_set(r, c);
	} else {
		if (c->fields & CMD_RULE)
			cmd_apply_rule(r, c->rule, (c->fields & CMD_RULE_PARAMS) ? &c->rp : NULL);
		else if ((c->fields & CMD_RULE_PARAMS) && (r->rule->flags & RULE_FRAGMENTS)) {
			/* the schedule and the rounds follow the parameters:
			 * the workers restart from the server's weights */
			char name[sizeof(r->cfg.rule)];
			snprintf(name, sizeof(name), "%s", r->cfg.rule);
			cmd_apply_rule(r, name, &c->rp);
		} else if (c->fields & CMD_RULE_PARAMS) {
			rule_params before = r->cfg.rp;
			r->cfg.rp = c->rp;
			ps_set_rule(r->ps, r->rule, &r->cfg.rp);
			restart_clocks(r);
			step_compress_changed(r, r->cfg.rule, &before);
		}
		if (c->fields & (CMD_LR | CMD_MOMENTUM | CMD_WEIGHT_DECAY)) {
			if (c->fields & CMD_LR)
				r->cfg.lr = c->lr;
			if (c->fields & CMD_MOMENTUM)
				r->cfg.momentum = c->momentum;
			if (c->fields & CMD_WEIGHT_DECAY)
				r->cfg.weight_decay = c->weight_decay;
			ps_set_opt(r->ps, (float)r->cfg.lr, (float)r->cfg.momentum,
				   (float)r->cfg.weight_decay);
		}
		if (c->fields & (CMD_OPTIMIZER | CMD_CLIP | CMD_MOMENTUM)) {
			if (c->fields & CMD_OPTIMIZER)
				r->cfg.opt.kind = c->optimizer;
			if (c->fields & CMD_CLIP)
				r->cfg.opt.clip = c->clip;
			if (ps_set_optim(r->ps, &r->cfg.opt) < 0)
				run_fail(r, -SL_ENOMEM, "out of memory for the optimiser's state");
		}
		if (c->fields & CMD_BATCH)
			r->cfg.batch = c->batch;
		if (c->fields & CMD_EVAL_EVERY)
			r->cfg.eval_every = c->eval_every;
		if (c->fields & CMD_DELAY) {
			r->cfg.delay = c->delay;
			for (int i = 0; i < r->n_slots; i++)
				r->w[i]->delay = c->delay;
			r->cfg.n_overrides = 0;
		}
		if (c->fields & CMD_LINK) {
			r->cfg.link = c->link;
			for (int i = 0; i < r->n_slots; i++)
				r->w[i]->link = c->link;
			for (int i = 0; i < r->cfg.n_overrides; i++)
				r->cfg.overrides[i].has_link = 0;
		}
		if (c->fields & CMD_SERVER_MS)
			r->cfg.server_ms = c->server_ms;
		if (c->fields & CMD_PAUSED) {
			r->paused = c->paused;
			r->state = c->paused ? RUN_PAUSED : RUN_RUNNING;
		}
		if (c->fields & CMD_WORKERS)
			workers_set(r, c->workers);
		if (c->fields & CMD_STOP)
			atomic_store(&r->stop_req, 1);
	}
	if (c->fields & CMD_DELAY)
		cmd_ensure_vhist(r);
	if (c->fields & CMD_CHECKPOINT)
		cmd_hand_checkpoint(r, c);
	if (c->fields & ~(unsigned)CMD_CHECKPOINT) {
		/* the snapshot first: whoever the change callback wakes (a
		 * PATCH answering "applied") reads it at once */
		report_publish(r);
		if (r->cb.change)
			r->cb.change(r->cb.ud, run_now(r), ps_version(r->ps), c);
	}
	pthread_cond_broadcast(&r->cv);
}

/* due schedule entries (lock held) */
int
cmd_drain_schedule(run *r)
{
	int n = 0;
	while (r->sched_pos < r->n_sched) {
		const run_sched *s = &r->sched[r->sched_pos];
		if (s->by_version ? ps_version(r->ps) < s->v : run_now(r) < s->t)
			break;
		r->sched_pos++; /* counted first: a checkpoint taken by this
				 * entry must not fire it again on resume */
		cmd_apply(r, &s->cmd);
		n++;
	}
	if (r->ckpt_every) {
		/* after the version's entries, so the checkpoint holds them */
		uint64_t v = ps_version(r->ps);
		if (r->ckpt_next && v >= r->ckpt_next) {
			run_cmd c = {.worker = -1, .fields = CMD_CHECKPOINT, .origin = "every"};
			cmd_hand_checkpoint(r, &c);
		}
		if (!r->ckpt_next || v >= r->ckpt_next)
			r->ckpt_next = (v / r->ckpt_every + 1) * r->ckpt_every;
	}
	return n;
}

void
run_checkpoint_every(run *r, uint64_t every)
{
	run_lock(r);
	r->ckpt_every = every;
	r->ckpt_next = 0; /* the first drain counts from the version it finds */
	run_unlock(r);
}

/* due schedule entries, then queued commands (lock held) */
int
cmd_drain(run *r)
{
	int n = cmd_drain_schedule(r);
	return n + cmd_drain_queue(r);
}

/* queued commands (lock held) */
int
cmd_drain_queue(run *r)
{
	pthread_mutex_lock(&r->qmu);
	int nq = r->n_q;
	run_cmd *q = nq ? malloc(sizeof(run_cmd) * (size_t)nq) : NULL;
	if (q) {
		memcpy(q, r->q, sizeof(run_cmd) * (size_t)nq);
		r->n_q = 0;
	} else {
		nq = 0; /* out of memory: the queue waits for the next round */
	}
	pthread_mutex_unlock(&r->qmu);
	for (int i = 0; i < nq; i++)
		cmd_apply(r, &q[i]);
	free(q);
	return nq;
}

/* ---- a recover's settings ------------------------------------------------- */

int
run_adopt_settings(run *r, const run_config *to, int sched_done, char *err)
{
	run_lock(r);
	int rc = 0;
	if (r->exec_live)
		rc = sl_fail(err, SL_ESTATE, "settings: the run has started");
	else if (to->batch > r->cfg.batch)
		rc = sl_fail(err, SL_EINVAL, "batch: must be in [1, %d] (the run's starting batch), got %d",
			     r->cfg.batch, to->batch);
	else if (!rule_find(to->rule))
		rc = sl_fail(err, SL_EINVAL, "rule: unknown \"%s\"", to->rule);
	if (rc < 0) {
		run_unlock(r);
		return rc;
	}
	if (strcmp(to->rule, r->cfg.rule) || memcmp(&to->rp, &r->cfg.rp, sizeof(to->rp)))
		cmd_apply_rule(r, to->rule, &to->rp);
	r->cfg.lr = to->lr;
	r->cfg.momentum = to->momentum;
	r->cfg.weight_decay = to->weight_decay;
	ps_set_opt(r->ps, (float)r->cfg.lr, (float)r->cfg.momentum, (float)r->cfg.weight_decay);
	r->cfg.opt = to->opt;
	if (ps_set_optim(r->ps, &r->cfg.opt) < 0) {
		run_unlock(r);
		return sl_fail(err, SL_ENOMEM, "out of memory for the optimiser's state");
	}
	r->cfg.batch = to->batch;
	r->cfg.eval_every = to->eval_every;
	r->cfg.delay = to->delay;
	r->cfg.link = to->link;
	r->cfg.server_ms = to->server_ms;
	r->cfg.n_overrides = to->n_overrides;
	memcpy(r->cfg.overrides, to->overrides, sizeof(to->overrides));
	/* the restored workers take them now; the count applies when the
	 * clock starts (workers_set) */
	r->cfg.workers = to->workers;
	for (int i = 0; i < r->n_slots; i++)
		worker_settings(r, r->w[i]);
	cmd_ensure_vhist(r);
	if (sched_done > r->sched_pos)
		r->sched_pos = sched_done < r->n_sched ? sched_done : r->n_sched;
	report_publish(r);
	run_unlock(r);
	return 0;
}

int
run_schedule_copy(run *r, run_sched **out, int *n, int *done, char *err)
{
	run_lock(r);
	*out = NULL;
	*n = r->n_sched;
	*done = r->sched_pos;
	if (r->n_sched && !(*out = malloc(sizeof(run_sched) * (size_t)r->n_sched))) {
		run_unlock(r);
		return sl_fail(err, SL_ENOMEM, "out of memory");
	}
	if (r->n_sched)
		memcpy(*out, r->sched, sizeof(run_sched) * (size_t)r->n_sched);
	run_unlock(r);
	return 0;
}
