/* cmd_run.c - `stalelab run`: a headless training run. Defaults, then the
 * --config file, then flags (each flag is applied as a one-field run object,
 * so flags and files share one parser and one set of error messages). The
 * options are run_opts.c's, --resume and the checkpoints run_resume.c's,
 * the log records and the progress daemon/progress/'s. */
#include <pthread.h>
#include <signal.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd_run_impl.h"
#include "api.h"
#include "cli.h"
#include "graph_spec.h"
#include "cmd_run.h"
#include "config_json.h"
#include "dataset.h"
#include "jsonout.h"
#include "model.h"
#include "runlog.h"
#include "run.h"
#include "sl.h"

/* SIGINT/SIGTERM stop the run cleanly (end record, summary, exit 0). The
 * main thread waits for them in sigwait while the run trains on its own
 * thread: a thread in sigwait is where Linux delivers a process signal
 * first, even when other threads (OpenBLAS's pool, made before main) do not
 * block it. The run thread wakes the main thread with SIGUSR1 when done. */
typedef struct runner {
	run *r;
	pthread_t main_th;
	int rc;
} runner;

static void *
runner_main(void *p)
{
	runner *x = p;
	x->rc = run_exec(x->r);
	pthread_kill(x->main_th, SIGUSR1);
	return NULL;
}

/* One `stalelab run`, from its options to its exit code: what each step
 * hands on to the next. */
typedef struct run_job {
	run_config cfg;
	runcli_opts o;
	runcli_resume rs;
	run_sched *sched; /* the run object's schedule, until the run is open */
	int n_sched;
	run_ctx ctx;          /* the callbacks' state: the log, the progress */
	const char *log_path; /* --log's, auto_log, or NULL (stdout) */
	char auto_log[96];
	dataset_pair data;
	run *r;
	sigset_t sigs;   /* blocked; the main thread sigwaits them */
	int interrupted; /* the signal that stopped the run (0: none) */
	char err[SL_ERR_LEN];
} run_job;

/* The stop: a resumed run's is the checkpoint's merged with the flags';
 * a new run with none given stops after 3 epochs; one whose stop fields
 * are all 0 has none, and says so. 0, or the exit code. */
static int
job_stop(run_job *j, json_t *conf)
{
	if (j->rs.buf) {
		if (runcli_resume_merge(&j->rs, &j->cfg, j->err) < 0)
			return runcli_usage_error(NULL, j->err);
	} else if (!progress_has_stop(&j->cfg) &&
		   !(conf && json_object_size(json_object_get(conf, "stop")) > 0)) {
		j->cfg.stop_epochs = 3; /* no stop given (an empty "stop" gives none) */
	} else if (!progress_has_stop(&j->cfg) && !j->o.quiet) {
		fprintf(stderr, "stalelab run: no stop (the run object's stop fields are 0, no "
			"limit): it runs until interrupted (Ctrl-C)\n");
	}
	return 0;
}

/* The command line into j: the options, the --config files and flags into
 * j->cfg, the checkpoint --resume names, the stop, the schedule, the
 * checked --checkpoint-dir. RUNCLI_GO, or the exit code (said). */
static int
job_options(run_job *j, int argc, char **argv)
{
	json_t *conf = NULL;
	int rc = runcli_parse(argc, argv, &j->o, &j->cfg, &conf, j->err);
	if (rc != RUNCLI_GO)
		return rc;
	if (j->o.resume_path && runcli_resume_read(j->o.resume_path, &j->rs, &j->cfg, j->err) < 0)
		rc = 2;
	else if (runcli_apply(argc, argv, &j->o, &j->cfg, j->err) < 0)
		rc = runcli_usage_error(NULL, j->err);
	else
		rc = job_stop(j, conf);
	if (rc == 0 && conf && sched_from_json(json_object_get(conf, "schedule"), &j->cfg,
					       &j->sched, &j->n_sched, j->err) < 0)
		rc = runcli_usage_error(NULL, j->err);
	if (rc == 0 && j->o.ckpt_dir && runcli_check_ckpt_dir(j->o.ckpt_dir, j->rs.start_v,
							      !!j->rs.path, j->o.ckpt_keep, j->err) < 0)
		rc = runcli_usage_error(NULL, j->err);
	json_decref(conf);
	return rc == 0 ? RUNCLI_GO : rc;
}

/* The progress's state and where the log goes, then the data set (a run
 * with no workers refused first). RUNCLI_GO, or the exit code (said). */
static int
job_data(run_job *j)
{
	const run_config *cfg = &j->cfg;
	int quiet = j->o.quiet;
	j->ctx = (run_ctx){.quiet = quiet, .bar = !quiet && isatty(2),
			   .ckpt_dir = j->o.ckpt_dir, .ckpt_keep = j->o.ckpt_keep,
			   .virt = !strcmp(cfg->clock, "virtual"),
			   .stop_epochs = cfg->stop_epochs, .stop_steps = cfg->stop_steps,
			   .stop_seconds = cfg->stop_seconds, .stop_target = cfg->stop_target_acc,
			   .frac0 = -1};
	j->log_path = progress_pick_log(j->o.log_path, j->ctx.bar, j->o.log_format, j->auto_log,
					sizeof(j->auto_log));
	if (cfg->workers == 0) {
		snprintf(j->err, SL_ERR_LEN, "workers: 0 (remote workers only) is for stalelab "
			 "serve, which takes remote workers; stalelab run has none: give 1 or more");
		return runcli_usage_error(NULL, j->err);
	}
	if (model_data_load(cfg->model, cfg->dataset, cfg->seed, &j->data, j->err) < 0)
		return runcli_usage_error(NULL, j->err);
	if (j->data.note[0] && !quiet)
		fprintf(stderr, "stalelab run: %s\n", j->data.note);
	return RUNCLI_GO;
}

/* The log opened: a resumed run's continues its JSON-Lines log, cut back
 * to the checkpoint. RUNCLI_GO, or the exit code (said). */
static int
job_log(run_job *j)
{
	const char *log_path = j->log_path, *log_format = j->o.log_format;
	int cont = j->rs.path && log_path && strcmp(log_path, "-");
	long cut = 0;
	if (cont && (cont = runlog_continue(log_path, j->rs.start_v, &j->rs.ck, &cut, j->err)) < 0) {
		fprintf(stderr, "stalelab run: %s\n", j->err);
		return 2;
	}
	if (cont && strcmp(log_format, "jsonl")) {
		fprintf(stderr, "stalelab run: --log-format csv: a resumed run continues a "
			"JSON-Lines log only (%s is one); give another file\n", log_path);
		return 2;
	}
	if (runlog_open(&j->ctx.log, log_path, log_format, cont, j->err) < 0) {
		fprintf(stderr, "stalelab run: %s\n", j->err);
		return 1;
	}
	if (cont && !j->o.quiet)
		fprintf(stderr, "stalelab run: continuing the log %s from v %llu (%ld line%s "
			"past the checkpoint cut off)\n", log_path,
			(unsigned long long)j->rs.start_v, cut, cut == 1 ? "" : "s");
	return RUNCLI_GO;
}

/* The run made (from the checkpoint when resumed, with the flags' change
 * at its version), the signals blocked for job_train, then the log.
 * RUNCLI_GO, or the exit code (said). */
static int
job_open(run_job *j)
{
	run_callbacks cb = {.eval = progress_on_eval, .change = progress_on_change,
			    .progress = progress_on_progress, .checkpoint = runcli_on_checkpoint,
			    .diverged = progress_on_diverged, .split = progress_on_split,
			    .ud = &j->ctx};
	/* block them before our threads exist: the main thread sigwaits */
	cli_block_signals(&j->sigs, 1);
	int rc = run_open(&j->cfg, &j->data, j->sched, j->n_sched, &cb, j->rs.buf, j->rs.len,
			  &j->r, j->err);
	free(j->sched);
	j->sched = NULL;
	free(j->rs.buf);
	j->rs.buf = NULL;
	if (rc == 0 && j->rs.n_cmd > 0)
		rc = run_command(j->r, &j->rs.cmd, j->err);
	if (rc == 0 && j->o.ckpt_every)
		run_checkpoint_every(j->r, j->o.ckpt_every);
	if (rc < 0) {
		fprintf(stderr, "stalelab run: %s%s\n", j->rs.path ? "--resume: " : "", j->err);
		return rc == -SL_ENOMEM ? 1 : 2;
	}
	return job_log(j);
}

/* The log's first record, the run object (a resumed run's with where it
 * resumes: the checkpoint's t and v), and unless quiet what runs, on
 * what, and where the log goes. */
/* a model with blocks: the depths spb_depth takes */
static void
print_blocks(const model_summary *ms)
{
	char list[160];
	if (ms->n_spb_depths >= SL_MIN(ms->param_layers, CFG_SPB_MAX + 1))
		return; /* every depth: a sequential model */
	fprintf(stderr, "stalelab run: model: spb_depth ends at a block boundary: 0 (full "
		"backprop), %s\n", model_depths_str(ms->spb_depths + 1, ms->n_spb_depths - 1, list,
						     sizeof(list)));
}

static void
job_announce(run_job *j)
{
	const run_config *cfg = &j->cfg;
	const char *resume_path = j->rs.path;
	run_snapshot *s0 = run_snapshot_get(j->r);
	const char *device = s0->device; /* static: outlives the snapshot */
	json_t *first = runlog_run_object(&s0->cfg, device);
	if (resume_path) {
		json_object_set_new(first, "resumed", json_true());
		json_object_set_new(first, "t", jsonout_real(s0->t));
		json_object_set_new(first, "v", json_integer((json_int_t)s0->v));
	}
	if (runlog_write(&j->ctx.log, first) < 0)
		j->ctx.log_failed = 1;
	json_decref(first);
	if (!j->o.quiet) {
		char label[64];
		fprintf(stderr,
			"stalelab run: %s on %s (%u train, %u test), rule %s, %d worker%s, %s clock, %s backend\n",
			graph_spec_label(cfg->model, label, sizeof(label)), j->data.name, j->data.train.n, j->data.test.n, s0->cfg.rule,
			s0->cfg.workers, s0->cfg.workers == 1 ? "" : "s", cfg->clock, device);
		const model_summary *ms = &s0->model;
		fprintf(stderr,
			"stalelab run: model: %d nodes, %zu parameters in %d layers, %.3g MFLOPs per "
			"sample forward, %.3g a training step, %.0f activation floats per sample\n",
			ms->nodes, ms->params, ms->param_layers, ms->fwd_flops * 1e-6,
			ms->step_flops * 1e-6, ms->act_floats);
		print_blocks(ms);
		if (s0->device_note[0])
			fprintf(stderr, "stalelab run: %s\n", s0->device_note);
		if (resume_path)
			fprintf(stderr, "stalelab run: resuming %s at v %llu, epoch %.2f%s\n",
				resume_path, (unsigned long long)s0->v, s0->epoch,
				(cfg->stop_steps && s0->v >= cfg->stop_steps) ||
						(cfg->stop_epochs > 0 && s0->epoch >= cfg->stop_epochs)
					? " (already past the stop: it ends at once)" : "");
		if (j->log_path == j->auto_log)
			fprintf(stderr, "stalelab run: the log goes to %s (stdout is this "
				"terminal; --log FILE or a pipe choose otherwise)\n", j->auto_log);
	}
	run_snapshot_put(s0);
}

/* The training, on a thread of its own while this one waits for SIGINT
 * and SIGTERM: the first stops the run (j->interrupted), a second exits
 * at once. run_exec's result. */
static int
job_train(run_job *j)
{
	runner rn = {.r = j->r, .main_th = pthread_self(), .rc = -1};
	pthread_t rt;
	j->ctx.t0 = sl_now();
	if (pthread_create(&rt, NULL, runner_main, &rn) != 0)
		return run_exec(j->r);
	for (;;) {
		int sig = 0;
		sigwait(&j->sigs, &sig);
		if (sig == SIGUSR1)
			break;
		if (j->interrupted) /* asked twice: give up at once */
			_exit(128 + sig);
		j->interrupted = sig;
		if (!j->o.quiet)
			fprintf(stderr, "\nstalelab run: %s, stopping (again to quit now)\n",
				sig == SIGINT ? "SIGINT" : "SIGTERM");
		run_stop(j->r);
	}
	pthread_join(rt, NULL);
	return rn.rc;
}

/* After the training: the end record (its stop "interrupted" when a
 * signal stopped it, the weights' hash), the summary line, the exit code:
 * 0 done, 3 diverged, 128 + the signal, 1 the run or the log failed. */
static int
job_finish(run_job *j, int exec_rc)
{
	run_snapshot *s = run_snapshot_get(j->r);
	int interrupted = j->interrupted;
	/* a signal that came after the run met its own stop did not stop it */
	if (interrupted && !(s->stop_reason && !strcmp(s->stop_reason, "stopped")))
		interrupted = 0;
	if (interrupted && j->ctx.end)
		json_object_set_new(j->ctx.end, "stop", json_string("interrupted"));
	if (j->ctx.end) {
		char h[24];
		if (progress_weights_hash(j->r, h, sizeof(h)) == 0)
			json_object_set_new(j->ctx.end, "weights", json_string(h));
		if (runlog_write(&j->ctx.log, j->ctx.end) < 0)
			j->ctx.log_failed = 1;
	}
	if (exec_rc < 0) {
		fprintf(stderr, "stalelab run: the run failed at version %llu: %s\n",
			(unsigned long long)s->v, s->error[0] ? s->error : "unknown error");
		run_snapshot_put(s);
		return 1;
	}
	int diverged = s->state == RUN_DIVERGED;
	char head[48];
	if (diverged)
		snprintf(head, sizeof(head), "DIVERGED (try a smaller --lr)");
	else if (interrupted)
		snprintf(head, sizeof(head), "interrupted (%s)",
			 interrupted == SIGINT ? "SIGINT" : "SIGTERM");
	else
		snprintf(head, sizeof(head), "done (%s)", s->stop_reason ? s->stop_reason : "stopped");
	char acc[128];
	if (s->lm) /* a language model: perplexity and bits per byte, next-token accuracy */
		snprintf(acc, sizeof(acc), "test_ppl %.4g, test_bpb %.4f, next_token_acc %.4f (best %.4f)",
			 api_ppl(s->test_loss), api_bpb(s->test_loss), s->test_acc, s->best_acc);
	else
		snprintf(acc, sizeof(acc), "test_acc %.4f (best %.4f)", s->test_acc, s->best_acc);
	if (!j->o.quiet)
		fprintf(stderr,
			"%s: %.2f epochs, %llu updates, %s, "
			"staleness mean %.2f max %llu, %.0f samples/s over %.2f s of training; log %s\n",
			head, s->epoch,
			(unsigned long long)s->v, acc, stale_mean(&s->stale), (unsigned long long)s->stale.max,
			s->samples_per_s, s->train_s, j->ctx.log.path);
	run_snapshot_put(s);
	if (j->ctx.log_failed) {
		fprintf(stderr, "stalelab run: writing the log to %s failed\n", j->ctx.log.path);
		return 1;
	}
	return diverged ? 3 : interrupted ? 128 + interrupted : 0;
}

int
cmd_run(int argc, char **argv)
{
	run_job j = {.r = NULL}; /* the rest 0: no checkpoint, no schedule yet */
	config_defaults(&j.cfg);
	int code = job_options(&j, argc, argv);
	if (code == RUNCLI_GO)
		code = job_data(&j);
	if (code != RUNCLI_GO) {
		free(j.sched);
		free(j.rs.buf);
		return code;
	}
	code = job_open(&j);
	if (code == RUNCLI_GO) {
		job_announce(&j);
		code = job_finish(&j, job_train(&j));
	}
	json_decref(j.ctx.end);
	runlog_close(&j.ctx.log);
	run_free(j.r);
	ds_pair_free(&j.data);
	return code;
}
