/* cmd_run.c - `stalelab run`: a headless training run. Defaults, then the
 * --config file, then flags (each flag is applied as a one-field run object,
 * so flags and files share one parser and one set of error messages). */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "api.h"
#include "ckpt.h"
#include "config_json.h"
#include "dataset.h"
#include "model.h"
#include "jsonout.h"
#include "runlog.h"
#include "run.h"

static const char run_usage[] =
	"Usage: stalelab run [OPTIONS]\n"
	"\n"
	"Train headless. Writes the JSON-Lines log (the run object, one record\n"
	"per evaluation, an end record) to --log or stdout, shows progress on\n"
	"stderr, prints a summary and exits 0 when the stop condition is met.\n"
	"Options override the --config file, which overrides the defaults.\n"
	"\n"
	"  -c, --config FILE     run object (JSON, see docs/formats.md)\n"
	"  -r, --replay LOG      re-run a logged run (its run object and changes)\n"
	"                        on the virtual clock\n"
	"  -R, --resume CKPT     go on from a checkpoint (flags may extend its\n"
	"                        stop); schedule entries {\"set\": {\"checkpoint\":\n"
	"                        \"FILE\"}} write checkpoints\n"
	"      --clock NAME      wall (threads, real sleeps) | virtual\n"
	"                        (deterministic discrete events)\n"
	"  -m, --model SPEC      logreg | mlp:784-256-128-10 | lenet5\n"
	"                        (default mlp:784-256-128-10)\n"
	"  -d, --dataset SPEC    fashion-mnist | idx:DIR | cifar10:DIR |\n"
	"                        synthetic:N (default fashion-mnist)\n"
	"      --device NAME     auto | cpu | ref | cuda (auto: cuda if built, else cpu;\n"
	"                        ref: the portable reference path, slow)\n"
	"      --rule NAME       update rule (default asgd)\n"
	"  -w, --workers N       workers (default 1)\n"
	"      --lr X            learning rate (default 0.05)\n"
	"      --momentum X      momentum (default 0)\n"
	"      --weight-decay X  L2 weight decay (default 0)\n"
	"  -b, --batch N         minibatch per worker (default 64)\n"
	"  -s, --seed N          seed of everything random (default 1)\n"
	"  -e, --epochs X        stop after X epochs\n"
	"      --steps N         stop after N updates\n"
	"      --seconds X       stop after X seconds of training (simulated\n"
	"                        seconds on the virtual clock)\n"
	"      --target-acc X    stop when test accuracy reaches X\n"
	"      --eval-every N    updates between evaluations (default 200;\n"
	"                        0 = epoch ends only)\n"
	"  -t, --threads N       compute threads per worker (default: all cores\n"
	"                        for a lone worker, one each when several run)\n"
	"  -l, --log FILE        JSON-Lines log (default stdout; - = stdout)\n"
	"      --log-format F    jsonl (default) or csv (one flat row per record)\n"
	"  -q, --quiet           no progress on stderr\n"
	"  -h, --help            this text\n"
	"\n"
	"Without a stop option a run stops after 3 epochs.\n"
	"Exit status: 0 done, 1 runtime failure, 2 bad usage or bad config.\n";

enum { O_LOGFMT = 254, O_CLOCK = 255, O_DEVICE = 256, O_RULE, O_LR, O_MOM, O_WD, O_STEPS, O_SECONDS,
       O_TARGET, O_EVAL };

static const struct option run_opts[] = {
	{"config", required_argument, NULL, 'c'},
	{"replay", required_argument, NULL, 'r'},
	{"resume", required_argument, NULL, 'R'},
	{"clock", required_argument, NULL, O_CLOCK},
	{"model", required_argument, NULL, 'm'},
	{"dataset", required_argument, NULL, 'd'},
	{"device", required_argument, NULL, O_DEVICE},
	{"rule", required_argument, NULL, O_RULE},
	{"workers", required_argument, NULL, 'w'},
	{"lr", required_argument, NULL, O_LR},
	{"momentum", required_argument, NULL, O_MOM},
	{"weight-decay", required_argument, NULL, O_WD},
	{"batch", required_argument, NULL, 'b'},
	{"seed", required_argument, NULL, 's'},
	{"epochs", required_argument, NULL, 'e'},
	{"steps", required_argument, NULL, O_STEPS},
	{"seconds", required_argument, NULL, O_SECONDS},
	{"target-acc", required_argument, NULL, O_TARGET},
	{"eval-every", required_argument, NULL, O_EVAL},
	{"threads", required_argument, NULL, 't'},
	{"log", required_argument, NULL, 'l'},
	{"quiet", no_argument, NULL, 'q'},
	{"log-format", required_argument, NULL, O_LOGFMT},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

/* Progress and logging state shared with the training callbacks. */
typedef struct run_ctx {
	runlog log;
	int tty, quiet;
	double stop_epochs;
	int log_failed;
	uint32_t n_train;
} run_ctx;

static void
on_eval(void *ud, const run_eval *e)
{
	run_ctx *c = ud;
	json_t *r = api_log_record(e);
	if (runlog_write(&c->log, r) < 0)
		c->log_failed = 1;
	json_decref(r);
	if (c->quiet || e->final)
		return;
	if (c->tty)
		fprintf(stderr, "\r\033[K");
	fprintf(stderr,
		"epoch %.2f  v %llu  train_loss %.4f  test_loss %.4f  test_acc %.4f  "
		"staleness %.2f  %.0f samples/s\n",
		e->epoch, (unsigned long long)e->v, e->train_loss, e->test_loss,
		e->test_acc, stale_mean(&e->stale), e->samples_per_s);
}

static void
on_change(void *ud, double t, uint64_t v, const run_cmd *cmd)
{
	run_ctx *c = ud;
	json_t *r = api_change_record(t, v, cmd);
	if (runlog_write(&c->log, r) < 0)
		c->log_failed = 1;
	json_decref(r);
}

static void
on_checkpoint(void *ud, const run_cmd *cmd, const uint8_t *buf, size_t len)
{
	run_ctx *c = ud;
	char err[SL_ERR_LEN];
	if (!buf || ckpt_write_buf(cmd->path, buf, len, err) < 0) {
		fprintf(stderr, "stalelab run: checkpoint %s failed: %s\n", cmd->path,
			buf ? err : "out of memory");
		c->log_failed = 1;
	} else if (!c->quiet) {
		fprintf(stderr, "%sstalelab run: checkpoint in %s (%zu bytes)\n",
			c->tty ? "\r\033[K" : "", cmd->path, len);
	}
}

static void
on_progress(void *ud, const run_eval *e)
{
	run_ctx *c = ud;
	if (c->quiet || !c->tty)
		return;
	char bar[31];
	double frac = c->stop_epochs > 0 ? e->epoch / c->stop_epochs : 0;
	if (frac > 1)
		frac = 1;
	int fill = (int)(frac * 30);
	for (int i = 0; i < 30; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[30] = 0;
	if (c->stop_epochs > 0)
		fprintf(stderr, "\r\033[Kepoch %.2f/%g [%s] %3.0f%%  loss %.4f  %.0f samples/s",
			e->epoch, c->stop_epochs, bar, frac * 100, e->train_loss,
			e->samples_per_s);
	else
		fprintf(stderr, "\r\033[Kepoch %.2f  v %llu  loss %.4f  %.0f samples/s",
			e->epoch, (unsigned long long)e->v, e->train_loss,
			e->samples_per_s);
}

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

/* Apply one flag as {"key": value} or {"stop": {"key": value}}. */
static int
apply_flag(run_config *cfg, const char *flag, const char *key,
	   const char *sub, const char *arg, int kind, char *err)
{
	json_t *v;
	if (kind == 's') {
		v = json_string(arg);
	} else if (kind == 'i') {
		unsigned long long u;
		if (cli_u64(arg, &u) < 0 || u > (unsigned long long)INT64_MAX)
			return sl_fail(err, SL_EINVAL, "--%s: expected a non-negative integer, got \"%s\"",
				       flag, arg);
		v = json_integer((json_int_t)u);
	} else {
		double d;
		if (cli_double(arg, &d) < 0 || !isfinite(d))
			return sl_fail(err, SL_EINVAL, "--%s: expected a number, got \"%s\"",
				       flag, arg);
		v = json_real(d);
	}
	json_t *o = sub ? json_pack("{s:{s:o}}", key, sub, v)
			: json_pack("{s:o}", key, v);
	char e2[SL_ERR_LEN];
	int rc = config_apply_json(o, cfg, e2);
	json_decref(o);
	if (rc < 0)
		return sl_fail(err, SL_EINVAL, "--%s: %s", flag, e2);
	return 0;
}

/* Read a JSON file (at most 16 MiB) into a jansson value. */
static int
read_json_file(const char *path, json_t **out, char *err)
{
	json_error_t je;
	*out = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!*out) {
		if (je.line < 1)
			return sl_fail(err, SL_EINVAL, "cannot read %s: %s", path, je.text);
		return sl_fail(err, SL_EINVAL, "%s: line %d, column %d: %s", path,
			       je.line, je.column, je.text);
	}
	return 0;
}

static int
load_config_file(const char *path, run_config *cfg, json_t **keep, char *err)
{
	json_t *obj;
	int rc = read_json_file(path, &obj, err);
	if (rc < 0)
		return rc;
	char e2[SL_ERR_LEN];
	rc = config_apply_json(obj, cfg, e2);
	if (rc < 0) {
		json_decref(obj);
		return sl_fail(err, SL_EINVAL, "%s: %s", path, e2);
	}
	json_decref(*keep);
	*keep = obj;
	return 0;
}

/* A logged run as a config plus a schedule: the first record is the run
 * object (its log-only keys dropped), each change record becomes a
 * schedule entry at its version. */
static int
load_replay(const char *path, run_config *cfg, json_t **keep, char *err)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return sl_fail(err, SL_EINVAL, "--replay: cannot open %s", path);
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int lineno = 0, rc = 0;
	json_t *conf = NULL, *sched = json_array();
	while ((len = getline(&line, &cap, f)) > 0) {
		lineno++;
		json_error_t je;
		json_t *rec = json_loadb(line, (size_t)len, 0, &je);
		if (!rec) {
			/* a killed run may end in a partial line: stop there */
			if (lineno == 1)
				rc = sl_fail(err, SL_EINVAL, "%s:1: %s", path, je.text);
			break;
		}
		if (lineno == 1) {
			json_object_del(rec, "t");
			json_object_del(rec, "v");
			json_object_del(rec, "schedule");
			conf = rec;
			continue;
		}
		json_t *ev = json_object_get(rec, "event");
		if (json_is_string(ev) && !strcmp(json_string_value(ev), "set")) {
			json_t *e = json_pack("{s:{s:O},s:O}", "at", "v",
					      json_object_get(rec, "v"), "set",
					      json_object_get(rec, "set"));
			json_t *w = json_object_get(rec, "worker");
			if (w)
				json_object_set(e, "worker", w);
			json_array_append_new(sched, e);
		}
		json_decref(rec);
	}
	free(line);
	fclose(f);
	if (rc == 0 && !conf)
		rc = sl_fail(err, SL_EINVAL, "--replay: %s is empty", path);
	if (rc == 0) {
		json_object_set(conf, "schedule", sched);
		json_object_set_new(conf, "clock", json_string("virtual"));
		char e2[SL_ERR_LEN];
		if (config_apply_json(conf, cfg, e2) < 0)
			rc = sl_fail(err, SL_EINVAL, "%s: %s", path, e2);
	}
	json_decref(sched);
	if (rc == 0) {
		json_decref(*keep);
		*keep = conf;
	} else {
		json_decref(conf);
	}
	return rc;
}

int
cmd_run(int argc, char **argv)
{
	run_config cfg;
	json_t *conf = NULL;
	uint8_t *ckpt = NULL;
	size_t ckpt_len = 0;
	char err[SL_ERR_LEN] = "";
	const char *log_path = NULL, *log_format = "jsonl";
	int quiet = 0, opt, rc = 0;
	config_defaults(&cfg);

	/* pass 1: --help and --config first, so flags override the file */
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "c:r:R:m:d:w:b:s:e:t:l:qh", run_opts,
				  NULL)) != -1) {
		if (opt == 'h') {
			fputs(run_usage, stdout);
			free(ckpt);
			json_decref(conf);
			return 0;
		}
		if (opt == 'R') {
			free(ckpt);
			if (ckpt_read(optarg, &ckpt, &ckpt_len, &cfg, err) < 0) {
				fprintf(stderr, "stalelab run: %s\n", err);
				json_decref(conf);
				free(ckpt);
				return 2;
			}
			continue;
		}
		if ((opt == 'c' && load_config_file(optarg, &cfg, &conf, err) < 0) ||
		    (opt == 'r' && load_replay(optarg, &cfg, &conf, err) < 0)) {
			fprintf(stderr, "stalelab run: %s\n", err);
			json_decref(conf);
			free(ckpt);
			return 2;
		}
	}
	/* pass 2: every flag in order */
	optind = 1;
	opterr = 1;
	while ((opt = getopt_long(argc, argv, "c:r:R:m:d:w:b:s:e:t:l:qh", run_opts,
				  NULL)) != -1) {
		switch (opt) {
		case 'c': case 'r': case 'R': break;
		case O_CLOCK: rc = apply_flag(&cfg, "clock", "clock", NULL, optarg, 's', err); break;
		case 'm': rc = apply_flag(&cfg, "model", "model", NULL, optarg, 's', err); break;
		case 'd': rc = apply_flag(&cfg, "dataset", "dataset", NULL, optarg, 's', err); break;
		case O_DEVICE: rc = apply_flag(&cfg, "device", "device", NULL, optarg, 's', err); break;
		case O_RULE: rc = apply_flag(&cfg, "rule", "rule", NULL, optarg, 's', err); break;
		case 'w': rc = apply_flag(&cfg, "workers", "workers", NULL, optarg, 'i', err); break;
		case O_LR: rc = apply_flag(&cfg, "lr", "lr", NULL, optarg, 'f', err); break;
		case O_MOM: rc = apply_flag(&cfg, "momentum", "momentum", NULL, optarg, 'f', err); break;
		case O_WD: rc = apply_flag(&cfg, "weight-decay", "weight_decay", NULL, optarg, 'f', err); break;
		case 'b': rc = apply_flag(&cfg, "batch", "batch", NULL, optarg, 'i', err); break;
		case 's': rc = apply_flag(&cfg, "seed", "seed", NULL, optarg, 'i', err); break;
		case 'e': rc = apply_flag(&cfg, "epochs", "stop", "epochs", optarg, 'f', err); break;
		case O_STEPS: rc = apply_flag(&cfg, "steps", "stop", "steps", optarg, 'i', err); break;
		case O_SECONDS: rc = apply_flag(&cfg, "seconds", "stop", "seconds", optarg, 'f', err); break;
		case O_TARGET: rc = apply_flag(&cfg, "target-acc", "stop", "target_acc", optarg, 'f', err); break;
		case O_EVAL: rc = apply_flag(&cfg, "eval-every", "eval_every", NULL, optarg, 'i', err); break;
		case 't': rc = apply_flag(&cfg, "threads", "threads", NULL, optarg, 'i', err); break;
		case 'l': log_path = optarg; break;
		case O_LOGFMT:
			if (strcmp(optarg, "jsonl") && strcmp(optarg, "csv")) {
				fprintf(stderr, "stalelab run: --log-format: expected jsonl or csv\n");
				free(ckpt);
				json_decref(conf);
				return 2;
			}
			log_format = optarg;
			break;
		case 'q': quiet = 1; break;
		default:
			fprintf(stderr, "Try 'stalelab run --help'.\n");
			free(ckpt);
			json_decref(conf);
			return 2;
		}
		if (rc < 0) {
			fprintf(stderr, "stalelab run: %s\n", err);
			free(ckpt);
			json_decref(conf);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "stalelab run: unexpected argument '%s' (try --help)\n",
			argv[optind]);
		free(ckpt);
		json_decref(conf);
		return 2;
	}
	if (!(cfg.stop_epochs > 0) && !cfg.stop_steps && !(cfg.stop_seconds > 0) &&
	    !(cfg.stop_target_acc > 0))
		cfg.stop_epochs = 3;
	run_sched *sched = NULL;
	int n_sched = 0;
	if (conf && sched_from_json(json_object_get(conf, "schedule"), &cfg, &sched,
				    &n_sched, err) < 0) {
		fprintf(stderr, "stalelab run: %s\n", err);
		json_decref(conf);
		free(ckpt);
		return 2;
	}
	json_decref(conf);
	conf = NULL;

	run_ctx ctx = {.quiet = quiet, .tty = isatty(2), .stop_epochs = cfg.stop_epochs};
	dataset_pair data;
	run *r = NULL;
	int code = 1;
	if (ds_load(cfg.dataset, cfg.seed, &data, err) < 0) {
		fprintf(stderr, "stalelab run: %s\n", err);
		free(sched);
		free(ckpt);
		json_decref(conf);
		return 2;
	}
	if (data.note[0] && !quiet)
		fprintf(stderr, "stalelab run: %s\n", data.note);
	run_callbacks cb = {.eval = on_eval, .change = on_change,
			    .progress = on_progress, .checkpoint = on_checkpoint,
			    .ud = &ctx};
	/* block them before our threads exist: the main thread sigwaits */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	int rc2 = run_new(&cfg, &data, sched, n_sched, &cb, &r, err);
	free(sched);
	if (rc2 == 0 && ckpt)
		rc2 = run_restore(r, ckpt, ckpt_len, err);
	free(ckpt);
	ckpt = NULL;
	if (rc2 < 0) {
		fprintf(stderr, "stalelab run: %s\n", err);
		code = rc2 == -SL_ENOMEM ? 1 : 2;
		goto out;
	}
	if (runlog_open(&ctx.log, log_path, log_format, 0, err) < 0) {
		fprintf(stderr, "stalelab run: %s\n", err);
		goto out;
	}
	run_snapshot *s0 = run_snapshot_get(r);
	const char *device = s0->device; /* static: outlives the snapshot */
	run_snapshot_put(s0);
	json_t *first = config_to_json(&cfg);
	json_object_set_new(first, "device", json_string(device));
	json_object_set_new(first, "t", json_real(0));
	json_object_set_new(first, "v", json_integer(0));
	runlog_write(&ctx.log, first);
	json_decref(first);
	if (!quiet)
		fprintf(stderr,
			"stalelab run: %s on %s (%u train, %u test), rule %s, %d worker%s, %s clock, %s backend\n",
			cfg.model, data.name, data.train.n, data.test.n, cfg.rule,
			cfg.workers, cfg.workers == 1 ? "" : "s", cfg.clock, device);
	runner rn = {.r = r, .main_th = pthread_self(), .rc = -1};
	pthread_t rt;
	int exec_rc;
	if (pthread_create(&rt, NULL, runner_main, &rn) == 0) {
		for (int stopping = 0;;) {
			int sig = 0;
			sigwait(&sigs, &sig);
			if (sig == SIGUSR1)
				break;
			if (stopping) /* asked twice: give up at once */
				_exit(130);
			stopping = 1;
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
	if (exec_rc < 0) {
		run_snapshot *f = run_snapshot_get(r);
		fprintf(stderr, "stalelab run: the run failed at version %llu: %s\n",
			(unsigned long long)f->v, f->error[0] ? f->error : "unknown error");
		run_snapshot_put(f);
		goto out;
	}
	run_snapshot *s = run_snapshot_get(r);
	if (!quiet)
		fprintf(stderr,
			"done (%s): %.2f epochs, %llu updates, test_acc %.4f (best %.4f), "
			"staleness mean %.2f max %llu, %.0f samples/s over %.2f s of training; log %s\n",
			s->stop_reason ? s->stop_reason : "stopped", s->epoch,
			(unsigned long long)s->v, s->test_acc, s->best_acc, stale_mean(&s->stale), (unsigned long long)s->stale.max,
			s->samples_per_s, s->train_s, ctx.log.path);
	run_snapshot_put(s);
	code = 0;
	if (ctx.log_failed) {
		fprintf(stderr, "stalelab run: writing the log to %s failed\n",
			ctx.log.path);
		code = 1;
	}
out:
	runlog_close(&ctx.log);
	run_free(r);
	ds_pair_free(&data);
	return code;
}
