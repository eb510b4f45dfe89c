/* report.c - evaluation, stop conditions, the series of evaluation
 * records, progress and refcounted snapshots for readers. */
#include "run_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- evaluation, stop, snapshots ------------------------------------- */

#define SERIES_MAX 16384 /* evaluation records kept per run */
#define GOOD_LOSS_X 4.0  /* a good checkpoint's test loss: at most 4x the lowest */

static void
series_add(run *r, const run_eval *e)
{
	if (r->n_series == SERIES_MAX) {
		/* a long run: thin the older half to every other record, so the
		 * whole curve stays, at half the resolution where it is oldest */
		int half = SERIES_MAX / 2, k = 0;
		for (int i = 0; i < half; i += 2)
			r->series[k++] = r->series[i];
		memmove(r->series + k, r->series + half,
			sizeof(run_eval) * (size_t)(SERIES_MAX - half));
		r->n_series = k + SERIES_MAX - half;
	}
	if (r->n_series == r->cap_series) {
		int cap = r->cap_series ? 2 * r->cap_series : 64;
		run_eval *s = realloc(r->series, sizeof(run_eval) * (size_t)cap);
		if (!s)
			return;
		r->series = s;
		r->cap_series = cap;
	}
	r->series[r->n_series++] = *e;
}

void
report_fill(run *r, run_eval *e)
{
	memset(e, 0, sizeof(*e));
	e->t = run_now(r);
	e->v = ps_version(r->ps);
	e->samples = r->samples;
	e->epoch = (double)r->samples / r->data->train.n;
	e->train_s = run_train_seconds(r);
	e->samples_per_s = e->train_s > 0 ? r->samples / e->train_s : 0;
	e->updates_per_s = e->train_s > 0 ? r->updates / e->train_s : 0;
	e->stale = r->hist;
	e->age = r->age;
	e->best_acc = r->best_acc;
	e->test_acc = r->last_acc;
	e->test_loss = r->last_test_loss;
	e->lm = r->data->vocab_n > 0;
	memcpy(e->sample, r->last_sample, sizeof(e->sample));
	e->train_loss = r->last_train_loss;
	e->coherence = r->coh_n ? r->coh_sum / r->coh_n : NAN;
	e->coherence_n = r->coh_n;
	e->coherence_all = r->coh_all_n ? r->coh_all / r->coh_all_n : NAN;
	e->coherence_all_n = r->coh_all_n;
	const lr_sched *ls = &r->cfg.opt.sched;
	e->lr = ls->kind != SCHED_CONSTANT || ls->warmup > 0
			? r->cfg.lr * lr_sched_factor(ls, ps_version(r->ps)) : NAN;
}

/* between two batches of an evaluation (lock not held): the changes
 * queued meanwhile are applied and a checkpoint asked for is taken, so a
 * PATCH does not wait for the whole test set. The schedule's entries wait
 * for the loop (where they always fire: the logs stay as they were). The
 * weights being evaluated are the eval model's own copy: nothing a change
 * does reaches them. */
static void
eval_between(void *p)
{
	run *r = p;
	pthread_mutex_lock(&r->mu);
	cmd_drain_queue(r);
	ckpt_serve(r);
	pthread_mutex_unlock(&r->mu);
}

/* a language model's short sample at the evaluated weights (evm's
 * params) into out: the start byte (a newline, or the vocabulary's first)
 * and RUN_SAMPLE bytes drawn at temperature 1 from the stream (seed, 0x5a)
 * (the same draws at every evaluation: the text changes with the
 * weights alone); "" for an image model or when out of memory */
static void
eval_sample(run *r, char *out)
{
	const dataset_pair *d = r->data;
	int ids[RUN_SAMPLE + 1], start = 0;
	out[0] = 0;
	if (d->vocab_n <= 0)
		return;
	for (int k = 0; k < d->vocab_n; k++)
		if (d->vocab[k] == '\n')
			start = k;
	rng g;
	rng_seed(&g, r->cfg.seed, 0x5a);
	ids[0] = start;
	out[0] = (char)d->vocab[start];
	for (int i = 1; i <= RUN_SAMPLE; i++) {
		if ((ids[i] = model_sample_next(r->evm, ids, (size_t)i, 1.0, &g)) < 0) {
			out[0] = 0;
			return;
		}
		out[i] = (char)d->vocab[ids[i]];
	}
	out[RUN_SAMPLE + 1] = 0;
}

/* batch norm's statistics for an evaluation: this many training samples */
#define EVAL_BN_SAMPLES 2000

/* evaluate the server's weights (lock held on entry and exit, dropped
 * while evaluating; on the wall clock workers are gated meanwhile) */
void
report_evaluate(run *r)
{
	double t_start = sl_now();
	if (!r->virt) {
		r->eval_gate = 1;
		while (r->n_computing > 0)
			pthread_cond_wait(&r->cv, &r->mu);
		t_start = sl_now();
	}
	r->be_eval->ops->copy(r->be_eval, r->evm->params, ps_weights(r->ps),
			      sizeof(float) * r->n_params);
	/* the state these weights belong to, while nothing computes: kept
	 * as the last good checkpoint if they evaluate to a finite loss */
	int cand = r->keep_good && !r->diverged && !r->fail_rc;
	if (cand) {
		double t0 = sl_now();
		r->cand.n = 0;
		r->cand.oom = 0;
		ckpt_save_state(r, &r->cand);
		r->good_s += sl_now() - t0;
	}
	uint64_t cand_v = ps_version(r->ps);
	run_eval e;
	r->last_train_loss = r->loss_n ? r->loss_sum / r->loss_n : NAN;
	r->loss_sum = 0;
	r->loss_n = 0;
	/* the lock is dropped while evaluating on both clocks: the eval
	 * model is the loop's own, the wall clock's workers are gated, and on
	 * the virtual clock nothing else steps; callers of run_lock get in */
	pthread_mutex_unlock(&r->mu);
	double loss, acc;
	/* batch norm: the server's weights have no running statistics of
	 * their own in an asynchronous run (each worker's replica moves its
	 * own from its batches); they are recomputed at these weights on the
	 * first EVAL_BN_SAMPLES training samples, SWA's update_bn, the same
	 * for every rule (docs/rules.md, "Batch normalization") */
	if (model_state_floats(r->evm))
		model_recompute_state(r->evm, NULL, &r->data->train,
				      (EVAL_BN_SAMPLES + r->evm->batch_cap - 1) / r->evm->batch_cap);
	model_evaluate_with(r->evm, NULL, &r->data->test, &loss, &acc, eval_between, r);
	char sample[RUN_SAMPLE + 2];
	eval_sample(r, sample);
	pthread_mutex_lock(&r->mu);
	memcpy(r->last_sample, sample, sizeof(sample));
	if (!r->virt) {
		r->eval_gate = 0;
		pthread_cond_broadcast(&r->cv);
	}
	r->eval_s += sl_now() - t_start;
	r->last_acc = acc;
	r->last_test_loss = loss;
	/* good: a finite test loss, at most GOOD_LOSS_X times the lowest so
	 * far (weights a blow-up has already thrown far, but not yet to
	 * infinity, are no place to resume from) */
	int good = isfinite(loss) && (!r->low_loss || loss <= GOOD_LOSS_X * r->low_loss);
	if (isfinite(loss) && loss > 0 && (!r->low_loss || loss < r->low_loss))
		r->low_loss = loss;
	if (cand && good && !r->cand.oom)
		report_keep_good(r, cand_v);
	if (acc > r->best_acc)
		r->best_acc = acc;
	report_fill(r, &e);
	r->coh_sum = 0; /* the next record's coherence starts here */
	r->coh_n = 0;
	series_add(r, &e);
	if (r->cb.eval)
		r->cb.eval(r->cb.ud, &e);
}

int
report_stop_met(run *r)
{
	const run_config *c = &r->cfg;
	const double n = r->data->train.n;
	if (r->fail_rc) {
		r->stop_reason = "failed";
		return 1;
	}
	if (r->diverged) {
		r->stop_reason = "diverged";
		return 1;
	}
	if (atomic_load(&r->stop_req)) {
		r->stop_reason = "stopped";
		return 1;
	}
	if (c->stop_steps && ps_version(r->ps) >= c->stop_steps) {
		r->stop_reason = "steps";
		return 1;
	}
	if (c->stop_epochs > 0 && r->samples >= c->stop_epochs * n - 0.5) {
		r->stop_reason = "epochs";
		return 1;
	}
	double t = r->virt ? run_now(r) : run_train_seconds(r);
	if (c->stop_seconds > 0 && t >= c->stop_seconds) {
		r->stop_reason = "seconds";
		return 1;
	}
	if (c->stop_target_acc > 0 && r->best_acc >= c->stop_target_acc) {
		r->stop_reason = "target_acc";
		return 1;
	}
	return 0;
}

/* evaluation due after progress? (every eval_every updates, each epoch;
 * one evaluation when both fall on the same update) */
int
report_eval_due(run *r)
{
	int due = 0;
	uint64_t epochs = r->samples / r->data->train.n;
	if (epochs > r->epochs_done) {
		r->epochs_done = epochs;
		due = 1;
	}
	if (r->cfg.eval_every > 0 && ps_version(r->ps) >= r->next_eval_v) {
		uint64_t e = (uint64_t)r->cfg.eval_every;
		r->next_eval_v = (ps_version(r->ps) / e + 1) * e;
		due = 1;
	}
	return due;
}

static run_snapshot *
build_snapshot(run *r)
{
	run_snapshot *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->workers = calloc((size_t)(r->n_slots ? r->n_slots : 1), sizeof(worker_snap));
	if (!s->workers) {
		free(s);
		return NULL;
	}
	s->refs = 1;
	s->state = r->state;
	s->cfg = r->cfg;
	s->device = backend_name(r->be_eval);
	snprintf(s->device_note, sizeof(s->device_note), "%s", r->device_note);
	s->device_about[0] = 0;
	if (r->be_eval->ops->describe)
		r->be_eval->ops->describe(r->be_eval, s->device_about, sizeof(s->device_about));
	s->t = run_now(r);
	s->train_s = run_train_seconds(r);
	s->v = ps_version(r->ps);
	s->samples = r->samples;
	s->epoch = (double)r->samples / r->data->train.n;
	s->samples_per_s = s->train_s > 0 ? r->samples / s->train_s : 0;
	s->updates_per_s = s->train_s > 0 ? r->updates / s->train_s : 0;
	s->rate_window_s = WINDOW_S;
	s->samples_per_s_now = rate_now(&r->rate_samples, run_now(r), (double)r->samples, WINDOW_S);
	s->updates_per_s_now = rate_now(&r->rate_updates, run_now(r), (double)r->updates, WINDOW_S);
	s->samples_per_s_end = r->samples_per_s_end;
	s->last_loss = r->loss_n ? r->loss_sum / r->loss_n : r->last_train_loss;
	s->test_acc = r->last_acc;
	s->test_loss = r->last_test_loss;
	s->lm = r->data->vocab_n > 0;
	s->best_acc = r->best_acc;
	/* in double, as the run object's lr (ps_lr is the float the update uses) */
	s->lr_now = r->cfg.lr * lr_sched_factor(&r->cfg.opt.sched, ps_version(r->ps));
	s->model = (model_summary){.nodes = r->evm->n_nodes,
				   .param_layers = r->evm->n_param_layers,
				   .params = r->n_params, .step_flops = r->full_flops,
				   .n_spb_depths = r->n_spb_depths};
	memcpy(s->model.spb_depths, r->spb_depths, sizeof(int) * (size_t)SL_MAX(r->n_spb_depths, 0));
	for (int i = 0; i < r->evm->n_nodes; i++) {
		s->model.fwd_flops += r->evm->nodes[i].flops_fwd;
		s->model.act_floats += (double)r->evm->nodes[i].act_floats;
	}
	s->stale = r->hist;
	s->stale_unit = rule_stale_unit(r->rule);
	s->age = r->age;
	s->stop_reason = r->stop_reason;
	if (r->fail_rc)
		snprintf(s->error, sizeof(s->error), "%s", r->err);
	s->clock_gap_max = r->clock_gap_max;
	s->diverged = r->diverged;
	s->div = r->div;
	double tnow = run_now(r);
	for (int i = 0; i < r->win_n; i++) {
		int j = (r->win_pos - 1 - i + WINDOW_N) % WINDOW_N;
		if (tnow - r->win_t[j] > WINDOW_S)
			break;
		stale_add(&s->window, r->win_tau[j]);
	}
	double full_bwd = model_bwd_flops(r->evm, 0);
	for (int i = 0; i < r->n_slots; i++) {
		const worker *w = r->w[i];
		if (!w->active)
			continue;
		worker_snap *ws = &s->workers[s->n_workers++];
		ws->id = w->rw.id;
		ws->state = w->paused ? "paused"
			    : w->st == W_DELAY ? "delayed"
			    : (w->st == W_WAIT_BEGIN || w->st == W_WAIT_PUSH) ? "waiting"
			    : "running";
		ws->delay = w->delay;
		ws->link = w->link;
		ws->spb_depth = w->spb_depth;
		ws->speed = w->speed;
		ws->step_ms = w->step_ms;
		ws->iterations = w->iterations;
		ws->samples = w->samples;
		ws->staleness_mean = stale_mean(&w->hist);
		ws->h = r->rule->phase_h ? r->rule->phase_h(&r->rr, &w->rw) : 0;
		double up = (r->virt ? tnow : s->train_s) - w->t_joined;
		ws->samples_per_s = up > 0 ? w->samples / up : 0;
		ws->samples_per_s_now = rate_now(&w->rate_samples, tnow, (double)w->samples, WINDOW_S);
		ws->bytes_sent = w->bytes_sent;
		ws->bytes_recv = w->bytes_recv;
		ws->comm_s = w->comm_s;
		ws->flops = w->flops;
		/* every step's forward is the full one, so flops + flops_saved
		 * is the full step's FLOPs times the samples computed, and the
		 * backward is that share of it less what partial backprop saved
		 * (exact through depth changes and a checkpoint's resume; FLOP
		 * counts are whole, the rounding of the division is not) */
		ws->flops_bwd = round((w->flops + w->flops_saved) * (full_bwd / r->full_flops) - w->flops_saved);
		ws->flops_saved = w->flops_saved;
		ws->stale = w->hist;
		ws->age = w->age;
		ws->remote = w->remote != NULL;
		snprintf(ws->host, sizeof(ws->host), "%s", w->host);
		ws->rtt_ms = w->remote ? w->rtt_ms : 0;
		ws->device = w->rw.be ? backend_name(w->rw.be) : s->device;
		ws->mem_bytes = w->rw.m ? (double)w->rw.m->mem_bytes : 0;
		const float *extra[] = {w->rw.ms, w->rw.wprev, w->rw.tmp};
		for (int k = 0; k < 3; k++)
			ws->mem_bytes += extra[k] ? 4.0 * r->n_params : 0;
	}
	s->remote_joined = r->remote_joined;
	s->remote_lost = r->remote_lost;
	s->remote_left = r->remote_left;
	s->remote_dropped = r->remote_dropped;
	if (r->led) {
		s->remote_applied = r->led->applied;
		s->remote_duplicates = r->led->duplicates;
		s->remote_abandoned = r->led->abandoned;
		s->remote_stale = r->led->old_epoch + r->led->old_incarnation;
		s->remote_generation = r->led->generation;
	}
	split_snap(r, s);
	return s;
}

void
report_publish(run *r)
{
	run_snapshot *s = build_snapshot(r);
	if (!s)
		return;
	pthread_mutex_lock(&r->smu);
	run_snapshot *old = r->snap;
	r->snap = s;
	pthread_mutex_unlock(&r->smu);
	run_snapshot_put(old);
	r->last_snap = sl_now();
}

run_snapshot *
run_snapshot_get(run *r)
{
	pthread_mutex_lock(&r->smu);
	run_snapshot *s = r->snap;
	__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&r->smu);
	return s;
}

void
run_snapshot_put(run_snapshot *s)
{
	if (s && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		free(s->workers);
		free(s->classes);
		free(s);
	}
}

size_t
run_weights(run *r, float *out, size_t max)
{
	if (max < r->n_params)
		return 0;
	run_lock(r);
	r->be_ps->ops->download(r->be_ps, out, ps_weights(r->ps),
				sizeof(float) * r->n_params);
	run_unlock(r);
	return r->n_params;
}

/* the candidate becomes the last good checkpoint (its memory is reused
 * by the next candidate) */
void
report_keep_good(run *r, uint64_t v)
{
	blob b = r->good;
	r->good = r->cand;
	r->cand = b;
	r->good_v = v;
	r->n_good++;
}

void
run_keep_good(run *r, int on)
{
	run_lock(r);
	r->keep_good = on;
	run_unlock(r);
}

int
run_good_checkpoint(run *r, uint8_t **buf, size_t *len, uint64_t *v, char *err)
{
	if (buf) {
		*buf = NULL;
		*len = 0;
	}
	run_lock(r);
	int rc = 0;
	if (!r->n_good)
		rc = sl_fail(err, SL_ESTATE, "no good checkpoint: no finite evaluation was kept");
	else if (buf && !(*buf = malloc(r->good.n)))
		rc = sl_fail(err, SL_ENOMEM, "out of memory");
	if (rc == 0) {
		if (buf) {
			memcpy(*buf, r->good.p, r->good.n);
			*len = r->good.n;
		}
		*v = r->good_v;
	}
	run_unlock(r);
	return rc;
}

int
run_series(run *r, uint64_t since, run_eval *out, int max)
{
	int n = 0;
	run_lock(r);
	for (int i = 0; i < r->n_series && n < max; i++)
		if (r->series[i].v > since || (since == 0 && i == 0))
			out[n++] = r->series[i];
	run_unlock(r);
	return n;
}

void
report_progress(run *r)
{
	if (!r->cb.progress || sl_now() - r->last_progress < PROGRESS_EVERY_S)
		return;
	r->last_progress = sl_now();
	run_eval e;
	report_fill(r, &e);
	e.train_loss = r->loss_n ? r->loss_sum / r->loss_n : r->last_train_loss;
	r->cb.progress(r->cb.ud, &e);
}
