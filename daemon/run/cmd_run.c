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
#include "cli.h"
#include "cmd_run.h"
#include "config_json.h"
#include "dataset.h"
#include "jsonout.h"
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

int
cmd_run(int argc, char **argv)
{
	run_config cfg;
	runcli_opts o;
	runcli_resume rs = {.path = NULL, .buf = NULL, .start_v = 0, .n_cmd = 0};
	json_t *conf = NULL;
	char err[SL_ERR_LEN] = "", auto_log[96];
	config_defaults(&cfg);

	int rc = runcli_parse(argc, argv, &o, &cfg, &conf, err);
	if (rc != RUNCLI_GO)
		return rc;
	if (o.resume_path && runcli_resume_read(o.resume_path, &rs, &cfg, err) < 0)
		return 2;
	if (runcli_apply(argc, argv, &o, &cfg, err) < 0) {
		free(rs.buf);
		json_decref(conf);
		return runcli_usage_error(NULL, err);
	}
	if (rs.buf) {
		if (runcli_resume_merge(&rs, &cfg, err) < 0) {
			free(rs.buf);
			return runcli_usage_error(NULL, err);
		}
	} else if (!progress_has_stop(&cfg) &&
		   !(conf && json_object_size(json_object_get(conf, "stop")) > 0)) {
		cfg.stop_epochs = 3; /* no stop given (an empty "stop" gives none) */
	} else if (!progress_has_stop(&cfg) && !o.quiet) {
		fprintf(stderr, "stalelab run: no stop (the run object's stop fields are 0, no "
			"limit): it runs until interrupted (Ctrl-C)\n");
	}
	const char *log_path = o.log_path, *log_format = o.log_format, *resume_path = rs.path;
	int quiet = o.quiet;
	run_sched *sched = NULL;
	int n_sched = 0;
	if (conf && sched_from_json(json_object_get(conf, "schedule"), &cfg, &sched,
				    &n_sched, err) < 0) {
		json_decref(conf);
		return runcli_usage_error(NULL, err);
	}
	json_decref(conf);
	conf = NULL;
	if (o.ckpt_dir &&
	    runcli_check_ckpt_dir(o.ckpt_dir, rs.start_v, !!resume_path, o.ckpt_keep, err) < 0) {
		free(sched);
		free(rs.buf);
		return runcli_usage_error(NULL, err);
	}

	run_ctx ctx = {.quiet = quiet, .bar = !quiet && isatty(2),
		       .ckpt_dir = o.ckpt_dir, .ckpt_keep = o.ckpt_keep,
		       .virt = !strcmp(cfg.clock, "virtual"),
		       .stop_epochs = cfg.stop_epochs, .stop_steps = cfg.stop_steps,
		       .stop_seconds = cfg.stop_seconds, .stop_target = cfg.stop_target_acc,
		       .frac0 = -1};
	log_path = progress_pick_log(log_path, ctx.bar, log_format, auto_log, sizeof(auto_log));
	dataset_pair data;
	run *r = NULL;
	int code = 1;
	if (cfg.workers == 0) {
		free(sched);
		free(rs.buf);
		snprintf(err, SL_ERR_LEN, "workers: 0 (remote workers only) is for stalelab serve, "
			 "which takes remote workers; stalelab run has none: give 1 or more");
		return runcli_usage_error(NULL, err);
	}
	if (ds_load(cfg.dataset, cfg.seed, &data, err) < 0) {
		free(sched);
		free(rs.buf);
		return runcli_usage_error(NULL, err);
	}
	if (data.note[0] && !quiet)
		fprintf(stderr, "stalelab run: %s\n", data.note);
	run_callbacks cb = {.eval = progress_on_eval, .change = progress_on_change,
			    .progress = progress_on_progress, .checkpoint = runcli_on_checkpoint,
			    .diverged = progress_on_diverged, .ud = &ctx};
	/* block them before our threads exist: the main thread sigwaits */
	sigset_t sigs;
	cli_block_signals(&sigs, 1);
	int rc2 = run_open(&cfg, &data, sched, n_sched, &cb, rs.buf, rs.len, &r, err);
	free(sched);
	free(rs.buf);
	rs.buf = NULL;
	if (rc2 == 0 && rs.n_cmd > 0)
		rc2 = run_command(r, &rs.cmd, err);
	if (rc2 == 0 && o.ckpt_every)
		run_checkpoint_every(r, o.ckpt_every);
	if (rc2 < 0) {
		fprintf(stderr, "stalelab run: %s%s\n", resume_path ? "--resume: " : "", err);
		code = rc2 == -SL_ENOMEM ? 1 : 2;
		goto out;
	}
	/* a resumed run continues its log, cut back to the checkpoint */
	int cont = resume_path && log_path && strcmp(log_path, "-");
	long cut = 0;
	if (cont && (cont = runlog_continue(log_path, rs.start_v, &rs.ck, &cut, err)) < 0) {
		fprintf(stderr, "stalelab run: %s\n", err);
		code = 2;
		goto out;
	}
	if (cont && strcmp(log_format, "jsonl")) {
		fprintf(stderr, "stalelab run: --log-format csv: a resumed run continues a "
			"JSON-Lines log only (%s is one); give another file\n", log_path);
		code = 2;
		goto out;
	}
	if (runlog_open(&ctx.log, log_path, log_format, cont, err) < 0) {
		fprintf(stderr, "stalelab run: %s\n", err);
		goto out;
	}
	if (cont && !quiet)
		fprintf(stderr, "stalelab run: continuing the log %s from v %llu (%ld line%s "
			"past the checkpoint cut off)\n", log_path, (unsigned long long)rs.start_v,
			cut, cut == 1 ? "" : "s");
	run_snapshot *s0 = run_snapshot_get(r);
	const char *device = s0->device; /* static: outlives the snapshot */
	json_t *first = runlog_run_object(&s0->cfg, device);
	if (resume_path) { /* where it resumes: the checkpoint's t and v */
		json_object_set_new(first, "resumed", json_true());
		json_object_set_new(first, "t", jsonout_real(s0->t));
		json_object_set_new(first, "v", json_integer((json_int_t)s0->v));
	}
	if (runlog_write(&ctx.log, first) < 0)
		ctx.log_failed = 1;
	json_decref(first);
	if (!quiet) {
		fprintf(stderr,
			"stalelab run: %s on %s (%u train, %u test), rule %s, %d worker%s, %s clock, %s backend\n",
			cfg.model, data.name, data.train.n, data.test.n, s0->cfg.rule,
			s0->cfg.workers, s0->cfg.workers == 1 ? "" : "s", cfg.clock, device);
		if (s0->device_note[0])
			fprintf(stderr, "stalelab run: %s\n", s0->device_note);
		if (resume_path)
			fprintf(stderr, "stalelab run: resuming %s at v %llu, epoch %.2f%s\n",
				resume_path, (unsigned long long)s0->v, s0->epoch,
				(cfg.stop_steps && s0->v >= cfg.stop_steps) ||
						(cfg.stop_epochs > 0 && s0->epoch >= cfg.stop_epochs)
					? " (already past the stop: it ends at once)" : "");
		if (log_path == auto_log)
			fprintf(stderr, "stalelab run: the log goes to %s (stdout is this "
				"terminal; --log FILE or a pipe choose otherwise)\n", auto_log);
	}
	run_snapshot_put(s0);
	runner rn = {.r = r, .main_th = pthread_self(), .rc = -1};
	pthread_t rt;
	int exec_rc, interrupted = 0; /* the signal that stopped it */
	ctx.t0 = sl_now();
	if (pthread_create(&rt, NULL, runner_main, &rn) == 0) {
		for (;;) {
			int sig = 0;
			sigwait(&sigs, &sig);
			if (sig == SIGUSR1)
				break;
			if (interrupted) /* asked twice: give up at once */
				_exit(128 + sig);
			interrupted = sig;
			if (!quiet)
				fprintf(stderr, "\nstalelab run: %s, stopping (again to quit now)\n",
					sig == SIGINT ? "SIGINT" : "SIGTERM");
			run_stop(r);
		}
		pthread_join(rt, NULL);
		exec_rc = rn.rc;
	} else {
		exec_rc = run_exec(r);
	}
	run_snapshot *s = run_snapshot_get(r);
	/* a signal that came after the run met its own stop did not stop it */
	if (interrupted && !(s->stop_reason && !strcmp(s->stop_reason, "stopped")))
		interrupted = 0;
	if (interrupted && ctx.end)
		json_object_set_new(ctx.end, "stop", json_string("interrupted"));
	if (ctx.end) {
		char h[24];
		if (progress_weights_hash(r, h, sizeof(h)) == 0)
			json_object_set_new(ctx.end, "weights", json_string(h));
		if (runlog_write(&ctx.log, ctx.end) < 0)
			ctx.log_failed = 1;
	}
	if (exec_rc < 0) {
		fprintf(stderr, "stalelab run: the run failed at version %llu: %s\n",
			(unsigned long long)s->v, s->error[0] ? s->error : "unknown error");
		run_snapshot_put(s);
		goto out;
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
	if (!quiet)
		fprintf(stderr,
			"%s: %.2f epochs, %llu updates, test_acc %.4f (best %.4f), "
			"staleness mean %.2f max %llu, %.0f samples/s over %.2f s of training; log %s\n",
			head, s->epoch,
			(unsigned long long)s->v, s->test_acc, s->best_acc, stale_mean(&s->stale), (unsigned long long)s->stale.max,
			s->samples_per_s, s->train_s, ctx.log.path);
	run_snapshot_put(s);
	code = diverged ? 3 : interrupted ? 128 + interrupted : 0;
	if (ctx.log_failed) {
		fprintf(stderr, "stalelab run: writing the log to %s failed\n",
			ctx.log.path);
		code = 1;
	}
out:
	json_decref(ctx.end);
	runlog_close(&ctx.log);
	run_free(r);
	ds_pair_free(&data);
	return code;
}
