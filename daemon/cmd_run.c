/* cmd_run.c - `stalelab run`: a headless training run. Defaults, then the
 * --config file, then flags (each flag is applied as a one-field run object,
 * so flags and files share one parser and one set of error messages). */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "config_json.h"
#include "dataset.h"
#include "model.h"
#include "runlog.h"
#include "train.h"

static const char run_usage[] =
	"Usage: stalelab run [OPTIONS]\n"
	"\n"
	"Train headless. Writes the JSON-Lines log (the run object, one record\n"
	"per evaluation, an end record) to --log or stdout, shows progress on\n"
	"stderr, prints a summary and exits 0 when the stop condition is met.\n"
	"Options override the --config file, which overrides the defaults.\n"
	"\n"
	"  -c, --config FILE     run object (JSON, see docs/formats.md)\n"
	"  -m, --model SPEC      logreg | mlp:784-256-128-10 | lenet5\n"
	"                        (default mlp:784-256-128-10)\n"
	"  -d, --dataset SPEC    fashion-mnist | idx:DIR | cifar10:DIR |\n"
	"                        synthetic:N (default fashion-mnist)\n"
	"      --device NAME     auto | cpu | cuda (default auto = cpu here)\n"
	"      --rule NAME       update rule (default asgd)\n"
	"  -w, --workers N       workers (default 1)\n"
	"      --lr X            learning rate (default 0.05)\n"
	"      --momentum X      momentum (default 0)\n"
	"      --weight-decay X  L2 weight decay (default 0)\n"
	"  -b, --batch N         minibatch per worker (default 64)\n"
	"  -s, --seed N          seed of everything random (default 1)\n"
	"  -e, --epochs X        stop after X epochs\n"
	"      --steps N         stop after N updates\n"
	"      --seconds X       stop after X seconds of training\n"
	"      --target-acc X    stop when test accuracy reaches X\n"
	"      --eval-every N    updates between evaluations (default 200;\n"
	"                        0 = epoch ends only)\n"
	"  -t, --threads N       compute threads (default: all cores)\n"
	"  -l, --log FILE        JSON-Lines log (default stdout; - = stdout)\n"
	"  -q, --quiet           no progress on stderr\n"
	"  -h, --help            this text\n"
	"\n"
	"Without a stop option a run stops after 3 epochs.\n"
	"Exit status: 0 done, 1 runtime failure, 2 bad usage or bad config.\n";

enum { O_DEVICE = 256, O_RULE, O_LR, O_MOM, O_WD, O_STEPS, O_SECONDS,
       O_TARGET, O_EVAL };

static const struct option run_opts[] = {
	{"config", required_argument, NULL, 'c'},
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
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

/* Progress and logging state shared with the training callbacks. */
typedef struct run_ctx {
	runlog log;
	int tty, quiet;
	double last_draw;
	double stop_epochs;
	int log_failed;
	uint32_t n_train;
} run_ctx;

static json_t *
stale_json(const stale_hist *h)
{
	json_t *hist = json_array();
	for (int i = 0; i < STALE_BUCKETS; i++)
		json_array_append_new(hist, json_integer((json_int_t)h->b[i]));
	return json_pack("{s:f,s:f,s:f,s:I,s:o}", "mean", stale_mean(h), "p50",
			 stale_quantile(h, 0.5), "p99", stale_quantile(h, 0.99),
			 "max", (json_int_t)h->max, "hist", hist);
}

static void
on_eval(void *ud, const train_eval *e)
{
	run_ctx *c = ud;
	json_t *r;
	if (e->final) {
		r = json_pack("{s:s,s:f,s:I,s:f,s:I,s:f,s:f,s:f,s:f,s:s}", "event",
			      "end", "t", e->t, "v", (json_int_t)e->v, "epoch",
			      e->epoch, "samples", (json_int_t)e->samples, "test_acc",
			      e->test_acc, "best_acc", e->best_acc, "train_s",
			      e->train_s, "samples_per_s", e->samples_per_s, "stop",
			      e->stop_reason ? e->stop_reason : "done");
	} else {
		r = json_pack("{s:f,s:I,s:f,s:I,s:f,s:f,s:f,s:f,s:f,s:o}", "t", e->t,
			      "v", (json_int_t)e->v, "epoch", e->epoch, "samples",
			      (json_int_t)e->samples, "train_loss", e->train_loss,
			      "test_loss", e->test_loss, "test_acc", e->test_acc,
			      "samples_per_s", e->samples_per_s, "train_s", e->train_s,
			      "staleness", stale_json(&e->stale));
	}
	if (runlog_write(&c->log, r) < 0)
		c->log_failed = 1;
	json_decref(r);
	if (c->quiet || e->final)
		return;
	if (c->tty) {
		fprintf(stderr, "\r\033[K");
		c->last_draw = 0;
	}
	fprintf(stderr,
		"epoch %.2f  v %llu  train_loss %.4f  test_loss %.4f  test_acc %.4f  %.0f samples/s\n",
		e->epoch, (unsigned long long)e->v, e->train_loss, e->test_loss,
		e->test_acc, e->samples_per_s);
}

static void
on_step(void *ud, const train_eval *e)
{
	run_ctx *c = ud;
	if (c->quiet || !c->tty || e->t - c->last_draw < 0.2)
		return;
	c->last_draw = e->t;
	char bar[31];
	double frac = c->stop_epochs > 0 ? e->epoch / c->stop_epochs : 0;
	if (frac > 1)
		frac = 1;
	int fill = (int)(frac * 30);
	for (int i = 0; i < 30; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[30] = 0;
	if (c->stop_epochs > 0)
		fprintf(stderr, "\r\033[Kepoch %.2f/%g [%s] %3.0f%%  %.0f samples/s",
			e->epoch, c->stop_epochs, bar, frac * 100, e->samples_per_s);
	else
		fprintf(stderr, "\r\033[Kepoch %.2f  v %llu  %.0f samples/s", e->epoch,
			(unsigned long long)e->v, e->samples_per_s);
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

static int
load_config_file(const char *path, run_config *cfg, char *err)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return sl_fail(err, SL_EINVAL, "--config: cannot open %s", path);
	char *buf = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		if (len + 4096 > cap) {
			cap = cap ? cap * 2 : 8192;
			if (cap > (16u << 20)) {
				free(buf);
				fclose(f);
				return sl_fail(err, SL_EINVAL, "%s: larger than 16 MiB", path);
			}
			char *nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				fclose(f);
				return sl_fail(err, SL_ENOMEM, "out of memory");
			}
			buf = nb;
		}
		size_t n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (n == 0)
			break;
	}
	fclose(f);
	char e2[SL_ERR_LEN];
	int rc = config_parse(buf, len, cfg, e2);
	free(buf);
	if (rc < 0)
		return sl_fail(err, SL_EINVAL, "%s: %s", path, e2);
	return 0;
}

/* What the sequential trainer can honour; everything else in the run
 * object needs the asynchronous engine. */
static int
check_supported(const run_config *c, char *err)
{
	if (c->workers != 1)
		return sl_fail(err, SL_EUNSUP,
			       "workers: %d requested, this build trains with 1 worker (no asynchronous engine yet)",
			       c->workers);
	if (strcmp(c->rule, "asgd") && strcmp(c->rule, "ssgd"))
		return sl_fail(err, SL_EUNSUP,
			       "rule: \"%s\" needs the asynchronous engine, not in this build (asgd and ssgd with 1 worker are plain SGD)",
			       c->rule);
	if (c->delay.dist != DELAY_NONE || c->n_overrides)
		return sl_fail(err, SL_EUNSUP,
			       "delay: injected delays need the asynchronous engine, not in this build");
	if (c->n_schedule)
		return sl_fail(err, SL_EUNSUP,
			       "schedule: timed changes need the asynchronous engine, not in this build");
	if (!strcmp(c->clock, "virtual"))
		return sl_fail(err, SL_EUNSUP,
			       "clock: \"virtual\" needs the asynchronous engine, not in this build");
	if (!strcmp(c->device, "cuda"))
		return sl_fail(err, SL_EUNSUP,
			       "device: cuda backend not built (use cpu or auto)");
	return 0;
}

int
cmd_run(int argc, char **argv)
{
	run_config cfg;
	char err[SL_ERR_LEN] = "";
	const char *log_path = NULL;
	int quiet = 0, opt, rc = 0;
	config_defaults(&cfg);

	/* pass 1: --help and --config first, so flags override the file */
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "c:m:d:w:b:s:e:t:l:qh", run_opts,
				  NULL)) != -1) {
		if (opt == 'h') {
			fputs(run_usage, stdout);
			return 0;
		}
		if (opt == 'c' && load_config_file(optarg, &cfg, err) < 0) {
			fprintf(stderr, "stalelab run: %s\n", err);
			return 2;
		}
	}
	/* pass 2: every flag in order */
	optind = 1;
	opterr = 1;
	while ((opt = getopt_long(argc, argv, "c:m:d:w:b:s:e:t:l:qh", run_opts,
				  NULL)) != -1) {
		switch (opt) {
		case 'c': break;
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
		case 'q': quiet = 1; break;
		default:
			fprintf(stderr, "Try 'stalelab run --help'.\n");
			return 2;
		}
		if (rc < 0) {
			fprintf(stderr, "stalelab run: %s\n", err);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "stalelab run: unexpected argument '%s' (try --help)\n",
			argv[optind]);
		return 2;
	}
	if (!(cfg.stop_epochs > 0) && !cfg.stop_steps && !(cfg.stop_seconds > 0) &&
	    !(cfg.stop_target_acc > 0))
		cfg.stop_epochs = 3;
	if (check_supported(&cfg, err) < 0) {
		fprintf(stderr, "stalelab run: %s\n", err);
		return 2;
	}

	run_ctx ctx = {.quiet = quiet, .tty = isatty(2), .stop_epochs = cfg.stop_epochs};
	dataset_pair data;
	backend *be = NULL;
	model *m = NULL;
	int code = 1;
	if (ds_load(cfg.dataset, cfg.seed, &data, err) < 0) {
		fprintf(stderr, "stalelab run: %s\n", err);
		return 2;
	}
	if (data.note[0] && !quiet)
		fprintf(stderr, "stalelab run: %s\n", data.note);
	ctx.n_train = data.train.n;
	int threads = cfg.threads ? cfg.threads : cli_ncpu();
	if (backend_cpu_new(threads, &be) < 0) {
		fprintf(stderr, "stalelab run: cannot start the cpu backend\n");
		goto out;
	}
	if (model_new(cfg.model, data.train.c, data.train.h, data.train.w,
		      data.train.classes, cfg.batch, cfg.seed, be, &m, err) < 0) {
		fprintf(stderr, "stalelab run: %s\n", err);
		code = 2;
		goto out;
	}
	if (runlog_open(&ctx.log, log_path, err) < 0) {
		fprintf(stderr, "stalelab run: %s\n", err);
		goto out;
	}
	json_t *first = config_to_json(&cfg);
	json_object_set_new(first, "t", json_real(0));
	json_object_set_new(first, "v", json_integer(0));
	runlog_write(&ctx.log, first);
	json_decref(first);
	if (!quiet)
		fprintf(stderr,
			"stalelab run: %s on %s (%u train, %u test), %zu parameters, %d thread%s\n",
			cfg.model, data.name, data.train.n, data.test.n, m->n_params,
			threads, threads == 1 ? "" : "s");

	train_opts to = {
		.lr = (float)cfg.lr, .momentum = (float)cfg.momentum,
		.weight_decay = (float)cfg.weight_decay, .batch = cfg.batch,
		.seed = cfg.seed, .eval_every = cfg.eval_every,
		.stop_epochs = cfg.stop_epochs, .stop_steps = cfg.stop_steps,
		.stop_seconds = cfg.stop_seconds, .target_acc = cfg.stop_target_acc,
	};
	train_cb cb = {on_eval, on_step, &ctx};
	train_eval res;
	if (train_run(m, &data, &to, &cb, &res, err) < 0) {
		fprintf(stderr, "stalelab run: %s\n", err);
		code = 2;
		goto out;
	}
	if (!quiet)
		fprintf(stderr,
			"done (%s): %.2f epochs, %llu updates, test_acc %.4f (best %.4f), "
			"%.0f samples/s over %.2f s of training; log %s\n",
			res.stop_reason ? res.stop_reason : "stop", res.epoch,
			(unsigned long long)res.v, res.test_acc, res.best_acc,
			res.samples_per_s, res.train_s, ctx.log.path);
	code = 0;
	if (ctx.log_failed) {
		fprintf(stderr, "stalelab run: writing the log to %s failed\n",
			ctx.log.path);
		code = 1;
	}
out:
	runlog_close(&ctx.log);
	model_free(m);
	backend_free(be);
	ds_pair_free(&data);
	return code;
}
