/* run.c - a training run's lifetime (run_new, run_exec, run_stop,
 * run_free) and its time; the parts are listed in run_impl.h. */
#include "run_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *
run_state_name(run_state s)
{
	static const char *const n[] = {"starting", "running", "paused",
					"finished", "failed", "diverged"};
	return (unsigned)s < sizeof(n) / sizeof(n[0]) ? n[s] : "?";
}

double
run_wall(const run *r)
{
	return sl_now() - r->t0 + r->t_base;
}

/* run time: wall seconds, or virtual seconds */
double
run_now(const run *r)
{
	return r->virt ? r->vtime : run_wall(r);
}

double
run_train_seconds(const run *r)
{
	double t = run_wall(r) - r->eval_s;
	return t > 0 ? t : 0;
}

/* ---- helpers ----------------------------------------------------------- */

int
run_n_running(const run *r)
{
	int n = 0;
	for (int i = 0; i < r->n_slots; i++)
		n += r->w[i]->active && !r->w[i]->paused;
	return n;
}

uint64_t
run_min_clock(const run *r)
{
	uint64_t m = UINT64_MAX;
	for (int i = 0; i < r->n_slots; i++) {
		const worker *w = r->w[i];
		if (w->active && !w->paused && w->rw.clock < m)
			m = w->rw.clock;
	}
	return m;
}

/* may another update be applied? (a stop counted in updates stops at
 * exactly that update, whatever is in flight) */
int
run_steps_left(const run *r)
{
	return !r->cfg.stop_steps || ps_version(r->ps) < r->cfg.stop_steps;
}

/* The run cannot go on (lock held): say why in r->err, stop it; run_exec
 * returns the code and the state becomes "failed". Returns code. */
int
run_fail(run *r, int code, const char *why)
{
	if (!r->fail_rc) {
		r->fail_rc = code;
		snprintf(r->err, sizeof(r->err), "%s", why);
	}
	r->stopping = 1;
	pthread_cond_broadcast(&r->cv);
	return code;
}

void
run_diverge(run *r, const worker *w, const char *what)
{
	if (r->diverged || r->fail_rc)
		return;
	r->diverged = 1;
	r->div = (run_divergence){.t = run_now(r), .v = ps_version(r->ps),
				  .worker = w->rw.id, .v_read = w->rw.v_read,
				  .what = what, .loss = w->loss};
	if (r->cb.diverged)
		r->cb.diverged(r->cb.ud, &r->div);
	r->stopping = 1;
	pthread_cond_broadcast(&r->cv);
}

/* ---- wall clock ----------------------------------------------------------- */

void
run_timed_wait(run *r, double seconds)
{
	struct timespec ts;
	sl_deadline(seconds, &ts);
	pthread_cond_timedwait(&r->cv, &r->mu, &ts);
}

/* ---- the lock, handed to outside callers -------------------------------- */

void
run_lock(run *r)
{
	atomic_fetch_add(&r->lock_want, 1);
	pthread_mutex_lock(&r->mu);
	atomic_fetch_sub(&r->lock_want, 1);
}

void
run_unlock(run *r)
{
	pthread_cond_broadcast(&r->cv); /* a loop in run_yield goes on */
	pthread_mutex_unlock(&r->mu);
}

void
run_yield(run *r)
{
	/* the wait releases the lock to them; a broadcast (run_unlock) or
	 * the timeout brings the loop back to look again */
	while (atomic_load(&r->lock_want) > 0)
		run_timed_wait(r, 0.002);
}

/* the most memory an evaluation's activations (and their gradients) take */
#define EVAL_MEM (128.0 * 1024 * 1024)

/* ---- lifetime -------------------------------------------------------------- */

/* The schedule's spb_depth changes fit the model (the run object's
 * overrides are config_validate's). */
static int
sched_spb_fits(const run_config *cfg, const run_sched *sched, int n, char *err)
{
	for (int i = 0; i < n; i++) {
		char p[48];
		snprintf(p, sizeof(p), "schedule[%d].set.spb_depth", i);
		if ((sched[i].cmd.fields & CMD_SPB) &&
		    config_spb_fits(p, sched[i].cmd.spb_depth, cfg->model, err) < 0)
			return -SL_EINVAL;
	}
	return 0;
}

/* the model's units for streaming-diloco's fragments: its parameterised
 * layers, those between two cut depths (a residual block) one unit */
static void
set_units(run *r, int np)
{
	int cuts[MODEL_MAX_NODES], unit_of[MODEL_MAX_NODES] = {0};
	unsigned char starts[MODEL_MAX_NODES] = {0};
	int k = model_cut_depths(r->evm, cuts, MODEL_MAX_NODES);
	for (int i = 0; i < k && i < MODEL_MAX_NODES; i++)
		if (cuts[i] > 0 && cuts[i] < np)
			starts[np - cuts[i]] = 1; /* the top cuts[i] begin there */
	for (int l = 1; l < np; l++)
		unit_of[l] = unit_of[l - 1] + starts[l];
	ps_set_units(r->ps, unit_of);
}

int
run_new(const run_config *cfg, const dataset_pair *data, const run_sched *sched,
	int n_sched, const run_callbacks *cb, run **out, char *err)
{
	*out = NULL;
	int rc = config_validate(cfg, err);
	if (rc < 0 || (rc = config_optim_fits(cfg->rule, &cfg->opt, cfg->momentum, err)) < 0 ||
	    (rc = config_compress_fits(cfg->rule, &cfg->rp, err)) < 0 ||
	    (rc = config_fragments_fit(cfg->rule, &cfg->rp, -1, err)) < 0 ||
	    (rc = sched_spb_fits(cfg, sched, n_sched, err)) < 0)
		return rc;
	const rule_class *rule = rule_find(cfg->rule);
	if (!rule)
		return sl_fail(err, SL_EINVAL, "rule: unknown \"%s\"", cfg->rule);
	if ((rule->flags & RULE_SHARED) && !strcmp(cfg->clock, "virtual"))
		return sl_fail(err, SL_EINVAL,
			       "rule: %s needs threads sharing memory (clock \"wall\")",
			       rule->name);
	if (cfg->delay.dist == DELAY_VERSION && cfg->delay.s >= VHIST_MAX)
		return sl_fail(err, SL_EINVAL, "delay.s: at most %d", VHIST_MAX - 1);
	if (cfg->coherence_every > 0 && strcmp(cfg->clock, "virtual"))
		return sl_fail(err, SL_EINVAL,
			       "coherence_every: on the virtual clock only (the fresh gradient "
			       "needs the weights to stay still while it is computed)");
	int aug = aug_resolve(cfg->augment, cfg->dataset);
	if ((rc = aug_check(aug, &data->train, cfg->dataset, err)) < 0)
		return rc;
	run *r = calloc(1, sizeof(*r));
	if (!r)
		return sl_fail(err, SL_ENOMEM, "out of memory");
	r->cfg = *cfg;
	r->aug = aug;
	r->data = data;
	if (cb)
		r->cb = *cb;
	r->virt = !strcmp(cfg->clock, "virtual");
	long nc = sysconf(_SC_NPROCESSORS_ONLN);
	r->ncpu = nc < 1 ? 1 : nc > 64 ? 64 : (int)nc;
	pthread_mutex_init(&r->mu, NULL);
	pthread_mutex_init(&r->qmu, NULL);
	pthread_mutex_init(&r->smu, NULL);
	pthread_cond_init(&r->cv, NULL);
	r->t0 = sl_now();
	r->err[0] = 0;
	const dataset *tr = &data->train;
	int eval_batch = 500;
	/* the device as named ("auto" resolved once), then the same class
	 * for the server and every worker */
	rc = backend_open(cfg->device, cfg->threads ? cfg->threads : r->ncpu,
			  &r->be_eval, r->device_note);
	if (rc < 0)
		sl_fail(err, -rc, "%s", r->device_note);
	if (rc == 0)
		rc = backend_open(backend_name(r->be_eval), 1, &r->be_ps, err);
	if (rc < 0)
		goto fail;
	if ((rule->flags & RULE_SHARED) && !r->be_ps->ops->host_memory) {
		rc = sl_fail(err, SL_EINVAL,
			     "rule: %s needs workers that share the server's memory "
			     "(device %s does not)", rule->name, backend_name(r->be_ps));
		goto fail;
	}
	/* the evaluation's batch: 500, or as many (a multiple of 16, at
	 * least 16) as keep its activations and their gradients within
	 * EVAL_MEM: a ResNet-20's would take 1.4 GB at 500 */
	rc = model_new(cfg->model, tr->c, tr->h, tr->w, tr->classes, 1, cfg->seed,
		       r->be_eval, &r->evm, err);
	if (rc == 0)
		rc = model_check_data(r->evm, tr, "train", err);
	if (rc == 0)
		rc = model_check_data(r->evm, &data->test, "test", err);
	if (rc < 0)
		goto fail;
	double act = 0;
	for (int i = 0; i < r->evm->n_nodes; i++)
		act += (double)r->evm->nodes[i].act_floats;
	model_free(r->evm);
	r->evm = NULL;
	if (act * 2 * sizeof(float) * eval_batch > EVAL_MEM)
		eval_batch = SL_MAX(16, (int)(EVAL_MEM / (act * 2 * sizeof(float))) / 16 * 16);
	rc = model_new(cfg->model, tr->c, tr->h, tr->w, tr->classes, eval_batch,
		       cfg->seed, r->be_eval, &r->evm, err);
	if (rc < 0)
		goto fail;
	r->n_params = r->evm->n_params;
	r->full_flops = model_step_flops(r->evm, 0);
	r->n_spb_depths = config_spb_depths(cfg->model, r->spb_depths, CFG_SPB_MAX + 1);
	/* on the heap: a run may start on a connection thread's small stack */
	ps_layer *layers = malloc(sizeof(ps_layer) * MODEL_MAX_NODES);
	float *w0 = malloc(sizeof(float) * r->n_params);
	if (!layers || !w0) {
		free(layers);
		free(w0);
		rc = sl_fail(err, SL_ENOMEM, "out of memory");
		goto fail;
	}
	int np = ps_model_layers(r->evm, layers, MODEL_MAX_NODES);
	r->be_eval->ops->download(r->be_eval, w0, r->evm->params,
				  sizeof(float) * r->n_params);
	rc = ps_new(r->be_ps, r->n_params, w0, layers, np, CFG_MAX_WORKERS, &r->ps);
	free(layers);
	free(w0);
	if (rc < 0) {
		sl_fail(err, SL_ENOMEM, "out of memory");
		goto fail;
	}
	set_units(r, np);
	if ((rc = config_fragments_fit(cfg->rule, &cfg->rp, ps_units(r->ps), err)) < 0)
		goto fail;
	/* zeroed: a checkpoint taken before the first batch saves it as it is */
	r->perm = calloc(tr->n, sizeof(uint32_t));
	if (!r->perm) {
		rc = sl_fail(err, SL_ENOMEM, "out of memory");
		goto fail;
	}
	r->pos = tr->n; /* shuffle on first take */
	if ((rc = split_run_init(r, err)) < 0)
		goto fail;
	if (cfg->stop_epochs > 0)
		r->take_limit = (uint64_t)ceil(cfg->stop_epochs * tr->n - 0.5);
	r->rule = rule;
	r->rr = (rule_run){.ps = r->ps, .rp = &r->cfg.rp, .ops = &step_rule_ops,
			   .seed = r->cfg.seed, .window_t0 = -1};
	ps_set_rule(r->ps, r->rule, &cfg->rp);
	ps_set_opt(r->ps, (float)cfg->lr, (float)cfg->momentum,
		   (float)cfg->weight_decay);
	if (ps_set_optim(r->ps, &cfg->opt) < 0) {
		rc = sl_fail(err, SL_ENOMEM, "out of memory for the optimiser's state");
		goto fail;
	}
	if (cfg->eval_every > 0)
		r->next_eval_v = (uint64_t)cfg->eval_every;
	if (n_sched > 0) {
		r->sched = malloc(sizeof(run_sched) * (size_t)n_sched);
		if (!r->sched) {
			rc = sl_fail(err, SL_ENOMEM, "out of memory");
			goto fail;
		}
		memcpy(r->sched, sched, sizeof(run_sched) * (size_t)n_sched);
		r->n_sched = n_sched;
	}
	cmd_ensure_vhist(r);
	r->state = RUN_STARTING;
	report_publish(r);
	*out = r;
	return 0;
fail:
	run_free(r);
	return rc;
}

int
run_open(const run_config *cfg, const dataset_pair *data, const run_sched *sched,
	 int n_sched, const run_callbacks *cb, const uint8_t *ckpt, size_t ckpt_len,
	 run **out, char *err)
{
	int rc = run_new(cfg, data, sched, n_sched, cb, out, err);
	if (rc == 0 && ckpt && (rc = run_restore(*out, ckpt, ckpt_len, err)) < 0) {
		run_free(*out);
		*out = NULL;
	}
	return rc;
}

int
run_exec(run *r)
{
	pthread_mutex_lock(&r->mu);
	r->t0 = sl_now();
	r->exec_live = 1;
	r->state = r->paused ? RUN_PAUSED : RUN_RUNNING;
	if (r->keep_good && r->restored) {
		/* a resumed run starts from a good state: the checkpoint's */
		r->cand.n = 0;
		r->cand.oom = 0;
		ckpt_save_state(r, &r->cand);
		if (!r->cand.oom)
			report_keep_good(r, ps_version(r->ps));
	}
	/* the first snapshot of the running state comes from the clocks,
	 * once its workers are set: never "running" with none */
	rate_reset(&r->rate_updates, run_now(r), (double)r->updates);
	rate_reset(&r->rate_samples, run_now(r), (double)r->samples);
	for (int i = 0; i < r->n_slots; i++)
		rate_reset(&r->w[i]->rate_samples, run_now(r), (double)r->w[i]->samples);
	int rc = r->virt ? virt_exec(r) : wall_exec(r);
	r->samples_per_s_end = rate_now(&r->rate_samples, run_now(r), (double)r->samples, WINDOW_S);
	/* deliver what is in flight, close a partial round, final record
	 * (never past a stop in updates) */
	if (!r->fail_rc && !r->diverged && step_release_held(r, 1) >= 0) {
		if (run_steps_left(r) && ps_flush_round(r->ps, 1))
			step_version_changed(r);
	}
	if (r->fail_rc)
		rc = r->fail_rc;
	if (!r->n_series || r->series[r->n_series - 1].v != ps_version(r->ps) ||
	    r->series[r->n_series - 1].samples != r->samples)
		report_evaluate(r);
	report_stop_met(r);
	run_eval e;
	report_fill(r, &e);
	e.final = 1;
	e.stop_reason = r->stop_reason ? r->stop_reason : "stopped";
	e.error = r->fail_rc ? r->err : NULL;
	r->state = r->fail_rc ? RUN_FAILED : r->diverged ? RUN_DIVERGED : RUN_FINISHED;
	if (r->cb.eval)
		r->cb.eval(r->cb.ud, &e);
	ckpt_serve(r);
	r->exec_live = 0;
	pthread_cond_broadcast(&r->cv);
	report_publish(r);
	pthread_mutex_unlock(&r->mu);
	return rc;
}

void
run_stop(run *r)
{
	atomic_store(&r->stop_req, 1);
	run_lock(r);
	run_unlock(r);
}

void
run_free(run *r)
{
	if (!r)
		return;
	for (int i = 0; i < r->n_slots; i++)
		SL_ASSERT(!r->w[i]->thread_live);
	for (int i = 0; i < r->n_slots; i++)
		worker_destroy(r, r->w[i]);
	for (int i = 0; i < r->n_held; i++) {
		free(r->held[i].g);
		free(r->held[i].bak);
	}
	free(r->held);
	for (int i = 0; i < r->vh_depth; i++)
		r->be_ps->ops->free(r->be_ps, r->vh[i]);
	ps_free(r->ps);
	free(r->led);
	model_free(r->evm);
	backend_free(r->be_eval);
	backend_free(r->be_ps);
	run_snapshot_put(r->snap);
	free(r->series);
	free(r->q);
	free(r->sched);
	free(r->ev);
	free(r->perm);
	free(r->part);
	free(r->part_cls);
	blob_free(&r->good);
	blob_free(&r->cand);
	pthread_mutex_destroy(&r->mu);
	pthread_mutex_destroy(&r->qmu);
	pthread_mutex_destroy(&r->smu);
	pthread_cond_destroy(&r->cv);
	free(r);
}
