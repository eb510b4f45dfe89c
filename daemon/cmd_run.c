/* cmd_run.c - `stalelab run`: a headless training run. Defaults, then the
 * --config file, then flags (each flag is applied as a one-field run object,
 * so flags and files share one parser and one set of error messages). */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "api.h"
#include "ckpt.h"
#include "config_json.h"
#include "backend.h"
#include "dataset.h"
#include "model.h"
#include "jsonout.h"
#include "runlog.h"
#include "run.h"

static const char run_usage[] =
	"Usage: stalelab run [OPTIONS]\n"
	"\n"
	"Train headless. Writes the JSON-Lines log (the run object, one record\n"
	"per evaluation and change, an end record) to --log or stdout, shows\n"
	"progress on stderr, prints a summary and exits 0 when the stop condition\n"
	"is met. Options override the --config file, which overrides the defaults.\n"
	"A step whose loss or gradient is NaN or infinite is never applied: the run\n"
	"stops there (a \"diverged\" record naming the worker and version, then the\n"
	"end record with \"stop\": \"diverged\") and exits 3.\n"
	"\n"
	"  -c, --config FILE     run object (JSON, see docs/formats.md; the first\n"
	"                        line of a log reads back as one)\n"
	"  -r, --replay LOG      re-run a logged run (its run object and changes)\n"
	"                        on the virtual clock; LOG is a JSON-Lines log of\n"
	"                        `stalelab run` or `stalelab serve` (CSV cannot)\n"
	"      --run N           with --replay: the Nth run of the log, counted\n"
	"                        from 1 (a daemon's log holds several; default:\n"
	"                        the last)\n"
	"  -R, --resume CKPT     go on from a checkpoint, or from the newest one in\n"
	"                        a --checkpoint-dir; see \"Resuming\" below\n"
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
	"      --seconds X       stop after X seconds of training (virtual\n"
	"                        seconds on the virtual clock)\n"
	"      --target-acc X    stop when test accuracy reaches X\n"
	"      --eval-every N    updates between evaluations (default 200;\n"
	"                        0 = epoch ends only)\n"
	"  -t, --threads N       compute threads per worker (default: all cores\n"
	"                        for a lone worker, one each when several run)\n"
	"  -l, --log FILE        the log (- = stdout). Default: stdout, except\n"
	"                        when stdout is the terminal the progress bar is\n"
	"                        on: then a new file stalelab-run-DATE-TIME.jsonl\n"
	"                        in the current directory (its name is printed)\n"
	"      --log-format F    jsonl (default) or csv (one flat row per record)\n"
	"      --checkpoint-every N  write a checkpoint every N updates into\n"
	"                        --checkpoint-dir (each crash-safe: temporary file,\n"
	"                        fsync, rename), keeping the newest --checkpoint-keep\n"
	"      --checkpoint-dir DIR  where they go, as DIR/stalelab-vV.ckpt (made\n"
	"                        if missing; a new run wants none there yet)\n"
	"      --checkpoint-keep K   how many to keep (default 2)\n"
	"  -q, --quiet           no progress on stderr\n"
	"  -h, --help            this text\n"
	"\n"
	"Without a stop option a run stops after 3 epochs; the first stop\n"
	"reached ends the run.\n"
	"\n"
	"Resuming: --resume continues the checkpoint's run with its run object\n"
	"and every change it had. On the command line, the stop options (counted\n"
	"from the start of the original run, like v and epoch in the log) replace\n"
	"the checkpoint's stop; --rule, --workers, --lr, --momentum,\n"
	"--weight-decay, --batch (at most the starting batch) and --eval-every\n"
	"are applied as changes at the checkpoint's version (logged, origin\n"
	"\"resume\"); --threads, --log, --log-format and --quiet apply as usual.\n"
	"--model, --dataset, --device, --clock and --seed cannot differ from the\n"
	"checkpoint's; --config and --replay cannot be combined with --resume.\n"
	"A daemon's checkpoint has no stop: give one. --checkpoint-every is not\n"
	"stored: give it again to go on checkpointing.\n"
	"\n"
	"A resumed run with --log FILE, FILE being the interrupted run's log,\n"
	"continues it: the partial last line a kill left, the records past the\n"
	"checkpoint's version and the end record are cut off, a run object with\n"
	"\"resumed\": true is appended, then the resumed run's records, so FILE\n"
	"holds the whole run once (see docs/formats.md).\n"
	"\n"
	"Exit status: 0 done, 1 runtime failure, 2 bad usage or bad config,\n"
	"3 the run diverged (a non-finite loss or gradient; try a smaller --lr).\n";

enum { O_CKEVERY = 250, O_CKDIR = 251, O_CKKEEP = 252, O_RUNSEL = 253, O_LOGFMT = 254, O_CLOCK = 255, O_DEVICE = 256, O_RULE, O_LR, O_MOM,
       O_WD, O_STEPS, O_SECONDS, O_TARGET, O_EVAL };

static const char run_optstring[] = ":c:r:R:m:d:w:b:s:e:t:l:qh";

static const struct option run_opts[] = {
	{"config", required_argument, NULL, 'c'},
	{"replay", required_argument, NULL, 'r'},
	{"run", required_argument, NULL, O_RUNSEL},
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
	{"checkpoint-every", required_argument, NULL, O_CKEVERY},
	{"checkpoint-dir", required_argument, NULL, O_CKDIR},
	{"checkpoint-keep", required_argument, NULL, O_CKKEEP},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

/* Progress and logging state shared with the training callbacks. */
typedef struct run_ctx {
	runlog log;
	int bar;          /* a progress bar on stderr (a terminal, not quiet) */
	int quiet;
	int virt;
	double stop_epochs, stop_seconds, stop_target;
	uint64_t stop_steps;
	double t0;        /* sl_now() at the start of training */
	double frac0;     /* progress at the start (a resumed run); -1: unset */
	int log_failed;
	const char *ckpt_dir; /* --checkpoint-dir */
	int ckpt_keep;
	json_t *end;      /* the end record, written once the weights are hashed */
} run_ctx;

static int
is_diverged(const run_eval *e)
{
	return e->final && e->stop_reason && !strcmp(e->stop_reason, "diverged");
}

/* a loss as text: NaN and infinity are the divergence they are */
static const char *
fmt_loss(char *buf, size_t cap, double x)
{
	if (isfinite(x))
		snprintf(buf, cap, "%.4f", x);
	else
		snprintf(buf, cap, "%s (diverged)", isnan(x) ? "nan" : "inf");
	return buf;
}

/* "m:ss" or "h:mm:ss" */
static void
fmt_clock(char *buf, size_t cap, double s)
{
	unsigned n = s > 0 && s < 360000 ? (unsigned)(s + 0.5) : 0;
	if (n >= 3600)
		snprintf(buf, cap, "%u:%02u:%02u", n / 3600, n / 60 % 60, n % 60);
	else
		snprintf(buf, cap, "%u:%02u", n / 60, n % 60);
}

/* The share of the stop reached (the first stop reached ends the run, so
 * the largest share), -1 when only target_acc (or nothing) is set; what
 * says how far, in the unit of that stop. */
static double
stop_frac(const run_ctx *c, const run_eval *e, char *what, size_t cap)
{
	double f = -1, g;
	snprintf(what, cap, "epoch %.2f  v %llu", e->epoch, (unsigned long long)e->v);
	if (c->stop_epochs > 0 && (g = e->epoch / c->stop_epochs) > f) {
		f = g;
		snprintf(what, cap, "epoch %.2f/%g", e->epoch, c->stop_epochs);
	}
	if (c->stop_steps && (g = (double)e->v / (double)c->stop_steps) > f) {
		f = g;
		snprintf(what, cap, "v %llu/%llu", (unsigned long long)e->v,
			 (unsigned long long)c->stop_steps);
	}
	/* the seconds stop counts run time on the virtual clock, training
	 * time (evaluation excluded) on the wall clock */
	double t = c->virt ? e->t : e->train_s;
	if (c->stop_seconds > 0 && (g = t / c->stop_seconds) > f) {
		f = g;
		snprintf(what, cap, "%.1f/%g %ss", t, c->stop_seconds, c->virt ? "virtual " : "");
	}
	return f > 1 ? 1 : f;
}

static int
term_cols(void)
{
	struct winsize ws;
	if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
		return ws.ws_col;
	return 80;
}

/* One line of progress, redrawn in place: how far, a bar that fills its
 * last cell when the stop is reached, the ETA, the latest loss, accuracy
 * and speed (each once there is a measurement). */
static void
draw_bar(run_ctx *c, const run_eval *e)
{
	char what[64], tail[160], loss[32], eta[48], clk[24];
	double f = stop_frac(c, e, what, sizeof(what));
	if (e->final && e->stop_reason && strcmp(e->stop_reason, "stopped") &&
	    !is_diverged(e))
		f = 1; /* the stop was reached (epochs compare to rounding) */
	double el = sl_now() - c->t0;
	eta[0] = 0;
	if (f >= 0) {
		if (c->frac0 < 0)
			c->frac0 = f;
		if (e->final) {
			fmt_clock(clk, sizeof(clk), el);
			snprintf(eta, sizeof(eta), "  in %s", clk);
		} else if (f - c->frac0 >= 0.01 && el > 0.1) {
			fmt_clock(clk, sizeof(clk), el * (1 - f) / (f - c->frac0));
			snprintf(eta, sizeof(eta), "  ETA %s", clk);
		} else {
			snprintf(eta, sizeof(eta), "  ETA -:--");
		}
	}
	int n = 0;
	tail[0] = 0;
	if (e->samples == 0) {
		n = snprintf(tail, sizeof(tail), "  starting");
	} else {
		n = snprintf(tail, sizeof(tail), "  loss %s",
			     fmt_loss(loss, sizeof(loss), e->train_loss));
		if (e->test_acc > 0 && n < (int)sizeof(tail))
			n += snprintf(tail + n, sizeof(tail) - (size_t)n, "  acc %.4f", e->test_acc);
		if (e->samples_per_s > 0 && n < (int)sizeof(tail))
			n += snprintf(tail + n, sizeof(tail) - (size_t)n, "  %.0f samples/s",
				      e->samples_per_s);
	}
	if (c->stop_target > 0 && n < (int)sizeof(tail))
		n += snprintf(tail + n, sizeof(tail) - (size_t)n, "  best %.4f/%g", e->best_acc,
			      c->stop_target);
	if (is_diverged(e) && n < (int)sizeof(tail))
		snprintf(tail + n, sizeof(tail) - (size_t)n, "  DIVERGED");
	char line[512], bar[64];
	bar[0] = 0;
	if (f >= 0) {
		/* the bar takes what the terminal has left, up to 30 cells */
		int rest = (int)strlen(what) + 8 + (int)strlen(eta) + (int)strlen(tail);
		int w = term_cols() - 1 - rest - 2;
		w = w > 30 ? 30 : w;
		if (w >= 5) {
			int fill = (int)(f * w + 1e-9);
			bar[0] = ' ';
			bar[1] = '[';
			for (int i = 0; i < w; i++)
				bar[2 + i] = i < fill ? '#' : '.';
			bar[2 + w] = ']';
			bar[3 + w] = 0;
		}
		snprintf(line, sizeof(line), "%s%s %3d%%%s%s", what, bar, (int)(f * 100 + 1e-9),
			 eta, tail);
	} else {
		snprintf(line, sizeof(line), "%s%s", what, tail);
	}
	int cols = term_cols();
	if ((int)strlen(line) > cols - 1)
		line[cols - 1] = 0;
	fprintf(stderr, "\r\033[K%s%s", line, e->final ? "\n" : "");
}

static void
on_eval(void *ud, const run_eval *e)
{
	run_ctx *c = ud;
	json_t *r = api_log_record(e);
	if (e->final) {
		/* held back: the weights' hash joins it after run_exec */
		json_decref(c->end);
		c->end = r;
	} else {
		if (runlog_write(&c->log, r) < 0)
			c->log_failed = 1;
		json_decref(r);
	}
	if (c->quiet)
		return;
	if (e->final) {
		if (c->bar)
			draw_bar(c, e);
		return;
	}
	char tl[32], vl[32];
	fprintf(stderr,
		"%sepoch %.2f  v %llu  train_loss %s  test_loss %s  test_acc %.4f  "
		"staleness %.2f  %.0f samples/s\n",
		c->bar ? "\r\033[K" : "", e->epoch, (unsigned long long)e->v,
		fmt_loss(tl, sizeof(tl), e->train_loss), fmt_loss(vl, sizeof(vl), e->test_loss),
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
	char err[SL_ERR_LEN] = "out of memory", path[4200];
	uint64_t v = 0;
	int rc = -1;
	snprintf(path, sizeof(path), "%s", cmd->path);
	if (buf && !cmd->path[0]) {
		/* --checkpoint-every: named by its version in --checkpoint-dir */
		rc = run_checkpoint_version(buf, len, &v, err);
		if (rc == 0) {
			ckpt_dir_path(c->ckpt_dir, v, path, sizeof(path));
			rc = ckpt_dir_put(c->ckpt_dir, buf, len, v, c->ckpt_keep, err);
		}
	} else if (buf) {
		rc = ckpt_write_buf(cmd->path, buf, len, err);
	}
	if (rc < 0) {
		fprintf(stderr, "%sstalelab run: checkpoint %s failed: %s\n",
			c->bar ? "\r\033[K" : "", path, err);
		c->log_failed = 1;
	} else if (!c->quiet && cmd->path[0]) {
		fprintf(stderr, "%sstalelab run: checkpoint in %s (%zu bytes)\n",
			c->bar ? "\r\033[K" : "", path, len);
	}
}

/* FNV-1a (64 bits) of the server's weights as float32 bytes, as 16 hex
 * digits: the end record's "weights" */
static int
weights_hash(run *r, char *out, size_t cap)
{
	for (size_t max = (size_t)1 << 16; max <= (size_t)1 << 30; max *= 2) {
		float *w = malloc(sizeof(float) * max);
		if (!w)
			return -1;
		size_t n = run_weights(r, w, max);
		if (n) {
			uint64_t h = 0xcbf29ce484222325ULL;
			const unsigned char *p = (const unsigned char *)w;
			for (size_t i = 0; i < n * sizeof(float); i++)
				h = (h ^ p[i]) * 0x100000001b3ULL;
			free(w);
			snprintf(out, cap, "%016llx", (unsigned long long)h);
			return 0;
		}
		free(w);
	}
	return -1;
}

static void
on_diverged(void *ud, const run_divergence *d)
{
	run_ctx *c = ud;
	json_t *r = api_diverged_record(d);
	if (runlog_write(&c->log, r) < 0)
		c->log_failed = 1;
	json_decref(r);
	if (c->quiet)
		return;
	char loss[32];
	if (isfinite(d->loss))
		snprintf(loss, sizeof(loss), "%.4g", d->loss);
	else
		snprintf(loss, sizeof(loss), "%s", isnan(d->loss) ? "nan" : d->loss > 0 ? "inf" : "-inf");
	fprintf(stderr,
		"%sstalelab run: diverged at v %llu: worker %d's %s is not finite (batch loss "
		"%s, computed on v %llu); nothing of it was applied, stopping\n",
		c->bar ? "\r\033[K" : "", (unsigned long long)d->v, d->worker, d->what, loss,
		(unsigned long long)d->v_read);
}

static void
on_progress(void *ud, const run_eval *e)
{
	run_ctx *c = ud;
	if (c->bar)
		draw_bar(c, e);
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

static int
load_config_file(const char *path, run_config *cfg, json_t **keep, char *err)
{
	json_t *obj;
	int rc = cli_read_json(path, &obj, err);
	if (rc < 0)
		return rc;
	if (json_is_object(obj))
		runlog_strip(obj); /* a log's first record is a run object too */
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

/* A logged run as a config plus a schedule (runlog_replay). */
static int
load_replay(const char *path, int want, int quiet, run_config *cfg, json_t **keep,
	    char *err)
{
	uint8_t *buf;
	size_t len;
	char e2[SL_ERR_LEN];
	if (ds_read_file(path, (size_t)1 << 32, &buf, &len, e2) < 0)
		return sl_fail(err, SL_EINVAL, "--replay: %s", e2);
	json_t *conf;
	runlog_replay_info info;
	int rc = runlog_replay((const char *)buf, len, want, &conf, &info, e2);
	free(buf);
	if (rc < 0)
		return sl_fail(err, SL_EINVAL, "%s: %s", path, e2);
	if (config_apply_json(conf, cfg, e2) < 0) {
		json_decref(conf);
		return sl_fail(err, SL_EINVAL, "%s: run %d: %s", path, info.run, e2);
	}
	/* the cpu backend's figures depend on the kernels the CPU picks; the
	 * ref backend's do not */
	const char *kernel, *blas_config, *isa;
	backend_cpu_blas(&kernel, &blas_config, &isa);
	int cpu = strcmp(info.device, "ref") != 0;
	if (cpu && info.kernel[0] && kernel && strcmp(info.kernel, kernel))
		fprintf(stderr,
			"stalelab run: warning: %s was written with the OpenBLAS kernel %s, "
			"this process uses %s: the figures may differ in their last digits "
			"(OPENBLAS_CORETYPE=%s picks that kernel; see docs/formats.md)\n",
			path, info.kernel, kernel, info.kernel);
	if (cpu && info.isa[0] && strcmp(info.isa, isa))
		fprintf(stderr,
			"stalelab run: warning: %s was written by kernels built for %s, this "
			"CPU runs those for %s: the figures may differ in their last digits "
			"(--device ref is the same everywhere; see docs/formats.md)\n",
			path, info.isa, isa);
	if (!quiet) {
		fprintf(stderr, "stalelab run: replaying run %d of %d in %s (%d change%s)",
			info.run, info.runs, path, info.changes, info.changes == 1 ? "" : "s");
		if (info.stop_from[0])
			fprintf(stderr, ", to v %llu where it %s", info.stop_v,
				!strcmp(info.stop_from, "end") ? "ended" : "was cut off");
		if (info.skipped)
			fprintf(stderr, "; %d unreadable line%s skipped", info.skipped,
				info.skipped == 1 ? "" : "s");
		fputs("\n", stderr);
	}
	json_decref(*keep);
	*keep = conf;
	return 0;
}

/* The fields a resumed run cannot change, then the changes it can take:
 * those differing between the checkpoint's run object (ck) and the one
 * the flags made (cfg) go in as one change. 0, 1 (a change in *cmd), or
 * -SL_EINVAL with err naming the flag. */
static int
resume_changes(const run_config *ck, const run_config *cfg, run_cmd *cmd, char *err)
{
	static const struct {
		const char *flag;
		size_t off;
	} fixed[] = {
		{"model", offsetof(run_config, model)},
		{"dataset", offsetof(run_config, dataset)},
		{"device", offsetof(run_config, device)},
		{"clock", offsetof(run_config, clock)},
	};
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		const char *a = (const char *)ck + fixed[i].off, *b = (const char *)cfg + fixed[i].off;
		if (strcmp(a, b))
			return sl_fail(err, SL_EINVAL,
				       "--%s: %s differs from the checkpoint's %s; a resumed run "
				       "keeps its model, dataset, device, clock and seed",
				       fixed[i].flag, b, a);
	}
	if (ck->seed != cfg->seed)
		return sl_fail(err, SL_EINVAL,
			       "--seed: %llu differs from the checkpoint's %llu; a resumed run "
			       "keeps its model, dataset, device, clock and seed",
			       (unsigned long long)cfg->seed, (unsigned long long)ck->seed);
	json_t *set = json_object();
	if (strcmp(ck->rule, cfg->rule))
		json_object_set_new(set, "rule", json_string(cfg->rule));
	if (ck->workers != cfg->workers)
		json_object_set_new(set, "workers", json_integer(cfg->workers));
	if (ck->lr != cfg->lr)
		json_object_set_new(set, "lr", json_real(cfg->lr));
	if (ck->momentum != cfg->momentum)
		json_object_set_new(set, "momentum", json_real(cfg->momentum));
	if (ck->weight_decay != cfg->weight_decay)
		json_object_set_new(set, "weight_decay", json_real(cfg->weight_decay));
	if (ck->batch != cfg->batch)
		json_object_set_new(set, "batch", json_integer(cfg->batch));
	if (ck->eval_every != cfg->eval_every)
		json_object_set_new(set, "eval_every", json_integer(cfg->eval_every));
	int rc = 0;
	if (json_object_size(set)) {
		char e2[SL_ERR_LEN];
		rc = cmd_from_json(set, -1, ck, "", cmd, e2) < 0
			     ? sl_fail(err, SL_EINVAL, "--resume: %s", e2) : 1;
		snprintf(cmd->origin, sizeof(cmd->origin), "resume");
	}
	json_decref(set);
	return rc;
}

/* Where the log goes: --log, else stdout, except when stdout is the
 * terminal the progress bar is drawn on; then a new file in the current
 * directory, never an existing one. */
static const char *
pick_log(const char *given, int bar, const char *format, char *buf, size_t cap)
{
	struct stat a, b;
	if (given || !bar || !isatty(1) || fstat(1, &a) < 0 || fstat(2, &b) < 0 ||
	    a.st_rdev != b.st_rdev)
		return given;
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	localtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	for (int i = 1; i < 100; i++) {
		if (i == 1)
			snprintf(buf, cap, "stalelab-run-%s.%s", stamp, format);
		else
			snprintf(buf, cap, "stalelab-run-%s-%d.%s", stamp, i, format);
		if (access(buf, F_OK) < 0)
			return buf;
	}
	return given;
}

/* --checkpoint-dir: made if missing; holding no checkpoint past the
 * version the run starts at (a new run: none at all), which would be
 * another run's, or the newest (what --resume DIR picks) would not be this
 * run's */
static int
check_ckpt_dir(const char *dir, uint64_t start_v, int resumed, int keep, char *err)
{
	char e2[SL_ERR_LEN];
	uint64_t *vs;
	int n;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return sl_fail(err, SL_EINVAL, "--checkpoint-dir: cannot make %s: %s", dir,
			       strerror(errno));
	if (ckpt_dir_list(dir, &vs, &n, e2) < 0)
		return sl_fail(err, SL_EINVAL, "--checkpoint-dir: %s", e2);
	uint64_t top = n ? vs[n - 1] : 0;
	free(vs);
	if (n && (!resumed || top > start_v))
		return sl_fail(err, SL_EINVAL,
			       "--checkpoint-dir: %s holds a checkpoint at v %llu %s; resume "
			       "from it (--resume %s) or pick another directory",
			       dir, (unsigned long long)top,
			       resumed ? "past this one's (another run's)" : "of an earlier run",
			       dir);
	ckpt_dir_prune(dir, keep); /* what a kill left */
	return 0;
}

static int
usage_error(const char *msg, char *err)
{
	fprintf(stderr, "stalelab run: %s\n", msg ? msg : err);
	return 2;
}

int
cmd_run(int argc, char **argv)
{
	run_config cfg, ck;
	json_t *conf = NULL;
	uint8_t *ckpt = NULL;
	size_t ckpt_len = 0;
	char err[SL_ERR_LEN] = "", auto_log[96], newest[4200];
	const char *log_path = NULL, *log_format = "jsonl", *replay_path = NULL,
		   *resume_path = NULL, *ckpt_dir = NULL;
	int quiet = 0, opt, rc = 0, want_run = 0, have_config = 0, ckpt_keep = 2;
	uint64_t ckpt_every = 0, start_v = 0;
	config_defaults(&cfg);

	/* pass 1: --help, usage errors, the --config files in order and the
	 * sources of a run (--replay, --resume), so flags override them */
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, run_optstring, run_opts, NULL)) != -1) {
		unsigned long long u;
		switch (opt) {
		case 'h':
			fputs(run_usage, stdout);
			json_decref(conf);
			return 0;
		case '?': case ':':
			json_decref(conf);
			return cli_bad_option("run", opt, argv);
		case 'c':
			have_config = 1;
			if (load_config_file(optarg, &cfg, &conf, err) < 0) {
				json_decref(conf);
				return usage_error(NULL, err);
			}
			break;
		case 'r': replay_path = optarg; break;
		case 'R': resume_path = optarg; break;
		case 'q': quiet = 1; break;
		case O_CKDIR: ckpt_dir = optarg; break;
		case O_CKEVERY: case O_CKKEEP:
			if (cli_u64(optarg, &u) < 0 || u < 1 ||
			    u > (opt == O_CKKEEP ? 1000 : (unsigned long long)INT64_MAX)) {
				json_decref(conf);
				snprintf(err, sizeof(err), "--checkpoint-%s: expected %s, got \"%s\"",
					 opt == O_CKKEEP ? "keep" : "every",
					 opt == O_CKKEEP ? "a count in [1, 1000]" : "a number of updates (1 or more)",
					 optarg);
				return usage_error(NULL, err);
			}
			if (opt == O_CKKEEP)
				ckpt_keep = (int)u;
			else
				ckpt_every = u;
			break;
		case O_RUNSEL:
			if (cli_u64(optarg, &u) < 0 || u < 1 || u > 1000000) {
				json_decref(conf);
				snprintf(err, sizeof(err), "--run: expected a run number (1, 2, ...), got \"%s\"", optarg);
				return usage_error(NULL, err);
			}
			want_run = (int)u;
			break;
		}
	}
	if (optind < argc) {
		json_decref(conf);
		snprintf(err, sizeof(err), "unexpected argument '%s' (try --help)", argv[optind]);
		return usage_error(NULL, err);
	}
	if (resume_path && (replay_path || have_config)) {
		json_decref(conf);
		return usage_error("--resume: cannot be combined with --config or --replay "
				   "(the checkpoint holds its run object)", NULL);
	}
	if (want_run && !replay_path) {
		json_decref(conf);
		return usage_error("--run: only with --replay", NULL);
	}
	if (!ckpt_every != !ckpt_dir) {
		json_decref(conf);
		return usage_error(ckpt_dir ? "--checkpoint-dir: give --checkpoint-every N too"
					    : "--checkpoint-every: give --checkpoint-dir DIR too",
				   NULL);
	}
	if (replay_path && load_replay(replay_path, want_run, quiet, &cfg, &conf, err) < 0) {
		json_decref(conf);
		return usage_error(NULL, err);
	}
	if (resume_path) {
		struct stat st;
		if (stat(resume_path, &st) == 0 && S_ISDIR(st.st_mode)) {
			if (ckpt_dir_newest(resume_path, newest, sizeof(newest), err) < 0) {
				fprintf(stderr, "stalelab run: --resume: %s\n", err);
				return 2;
			}
			resume_path = newest;
		}
		if (ckpt_read(resume_path, &ckpt, &ckpt_len, &cfg, err) < 0 ||
		    run_checkpoint_version(ckpt, ckpt_len, &start_v, err) < 0) {
			free(ckpt);
			return usage_error(NULL, err);
		}
		ck = cfg;
		/* the stop is the command line's alone */
		cfg.stop_epochs = cfg.stop_seconds = cfg.stop_target_acc = 0;
		cfg.stop_steps = 0;
	}
	/* pass 2: every flag in order */
	optind = 1;
	while ((opt = getopt_long(argc, argv, run_optstring, run_opts, NULL)) != -1) {
		switch (opt) {
		case 'c': case 'r': case 'R': case O_RUNSEL: case O_CKEVERY: case O_CKDIR:
		case O_CKKEEP: break;
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
				snprintf(err, sizeof(err), "--log-format: expected jsonl or csv, got \"%s\"", optarg);
				rc = -SL_EINVAL;
			}
			log_format = optarg;
			break;
		case 'q': quiet = 1; break;
		}
		if (rc < 0) {
			free(ckpt);
			json_decref(conf);
			return usage_error(NULL, err);
		}
	}
	int has_stop = cfg.stop_epochs > 0 || cfg.stop_steps || cfg.stop_seconds > 0 ||
		       cfg.stop_target_acc > 0;
	run_cmd resume_cmd;
	int n_resume = 0;
	if (ckpt) {
		run_config want = cfg;
		n_resume = resume_changes(&ck, &want, &resume_cmd, err);
		if (n_resume >= 0 && !has_stop && !(ck.stop_epochs > 0 || ck.stop_steps ||
						    ck.stop_seconds > 0 || ck.stop_target_acc > 0))
			n_resume = sl_fail(err, SL_EINVAL,
					   "--resume: %s has no stop (a daemon's checkpoint): give "
					   "--epochs, --steps, --seconds or --target-acc", resume_path);
		if (n_resume < 0) {
			free(ckpt);
			return usage_error(NULL, err);
		}
		/* the run is the checkpoint's; the stop the flags' or else its own */
		cfg = ck;
		cfg.threads = want.threads;
		if (has_stop) {
			cfg.stop_epochs = want.stop_epochs;
			cfg.stop_steps = want.stop_steps;
			cfg.stop_seconds = want.stop_seconds;
			cfg.stop_target_acc = want.stop_target_acc;
		}
	} else if (!has_stop) {
		cfg.stop_epochs = 3;
	}
	run_sched *sched = NULL;
	int n_sched = 0;
	if (conf && sched_from_json(json_object_get(conf, "schedule"), &cfg, &sched,
				    &n_sched, err) < 0) {
		json_decref(conf);
		return usage_error(NULL, err);
	}
	json_decref(conf);
	conf = NULL;
	if (ckpt_dir && check_ckpt_dir(ckpt_dir, start_v, !!resume_path, ckpt_keep, err) < 0) {
		free(sched);
		free(ckpt);
		return usage_error(NULL, err);
	}

	run_ctx ctx = {.quiet = quiet, .bar = !quiet && isatty(2),
		       .ckpt_dir = ckpt_dir, .ckpt_keep = ckpt_keep,
		       .virt = !strcmp(cfg.clock, "virtual"),
		       .stop_epochs = cfg.stop_epochs, .stop_steps = cfg.stop_steps,
		       .stop_seconds = cfg.stop_seconds, .stop_target = cfg.stop_target_acc,
		       .frac0 = -1};
	log_path = pick_log(log_path, ctx.bar, log_format, auto_log, sizeof(auto_log));
	dataset_pair data;
	run *r = NULL;
	int code = 1;
	if (ds_load(cfg.dataset, cfg.seed, &data, err) < 0) {
		free(sched);
		free(ckpt);
		return usage_error(NULL, err);
	}
	if (data.note[0] && !quiet)
		fprintf(stderr, "stalelab run: %s\n", data.note);
	run_callbacks cb = {.eval = on_eval, .change = on_change,
			    .progress = on_progress, .checkpoint = on_checkpoint,
			    .diverged = on_diverged, .ud = &ctx};
	/* block them before our threads exist: the main thread sigwaits */
	sigset_t sigs;
	cli_block_signals(&sigs, 1);
	int rc2 = run_open(&cfg, &data, sched, n_sched, &cb, ckpt, ckpt_len, &r, err);
	free(sched);
	free(ckpt);
	ckpt = NULL;
	if (rc2 == 0 && n_resume > 0)
		rc2 = run_command(r, &resume_cmd, err);
	if (rc2 == 0 && ckpt_every)
		run_checkpoint_every(r, ckpt_every);
	if (rc2 < 0) {
		fprintf(stderr, "stalelab run: %s%s\n", resume_path ? "--resume: " : "", err);
		code = rc2 == -SL_ENOMEM ? 1 : 2;
		goto out;
	}
	/* a resumed run continues its log, cut back to the checkpoint */
	int cont = resume_path && log_path && strcmp(log_path, "-");
	long cut = 0;
	if (cont && (cont = runlog_continue(log_path, start_v, &ck, &cut, err)) < 0) {
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
			"past the checkpoint cut off)\n", log_path, (unsigned long long)start_v,
			cut, cut == 1 ? "" : "s");
	run_snapshot *s0 = run_snapshot_get(r);
	const char *device = s0->device; /* static: outlives the snapshot */
	json_t *first = runlog_run_object(&s0->cfg, device);
	if (resume_path)
		json_object_set_new(first, "resumed", json_true());
	runlog_write(&ctx.log, first);
	json_decref(first);
	if (!quiet) {
		fprintf(stderr,
			"stalelab run: %s on %s (%u train, %u test), rule %s, %d worker%s, %s clock, %s backend\n",
			cfg.model, data.name, data.train.n, data.test.n, s0->cfg.rule,
			s0->cfg.workers, s0->cfg.workers == 1 ? "" : "s", cfg.clock, device);
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
	int exec_rc;
	ctx.t0 = sl_now();
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
	if (ctx.end) {
		char h[24];
		if (weights_hash(r, h, sizeof(h)) == 0)
			json_object_set_new(ctx.end, "weights", json_string(h));
		if (runlog_write(&ctx.log, ctx.end) < 0)
			ctx.log_failed = 1;
	}
	if (exec_rc < 0) {
		run_snapshot *f = run_snapshot_get(r);
		fprintf(stderr, "stalelab run: the run failed at version %llu: %s\n",
			(unsigned long long)f->v, f->error[0] ? f->error : "unknown error");
		run_snapshot_put(f);
		goto out;
	}
	run_snapshot *s = run_snapshot_get(r);
	int diverged = s->state == RUN_DIVERGED;
	char head[48];
	if (diverged)
		snprintf(head, sizeof(head), "DIVERGED (try a smaller --lr)");
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
	code = diverged ? 3 : 0;
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
