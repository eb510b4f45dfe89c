/* run_opts.c - the options of `stalelab run`: --help, the two passes over
 * argv, each flag applied as a one-field run object, --config and --replay
 * read into the run object. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_run_impl.h"
#include "backend.h"
#include "cli.h"
#include "config_json.h"
#include "dataset.h"
#include "sl.h"

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
	"  -m, --model SPEC      logreg | mlp:784-256-128-10 | lenet5 | resnet20 |\n"
	"                        resnet:N (N = 6n+2) | gpt:L4-H4-E128-T64 (layers,\n"
	"                        heads, width, context; a text --dataset)\n"
	"                        (default mlp:784-256-128-10);\n"
	"                        a graph of nodes: \"model\" in --config (docs/formats.md)\n"
	"  -d, --dataset SPEC    fashion-mnist | idx:DIR | cifar10:DIR |\n"
	"                        synthetic:N | blobs:C,PER,DIM,K[,SIGMA] (the\n"
	"                        asynchronous local-SGD toy's mixture; default\n"
	"                        fashion-mnist); text for a\n"
	"                        model with a context: text:FILE | text:webster |\n"
	"                        synthetic-text:N (docs/formats.md, \"Text\")\n"
	"      --augment NAME    the training batches' augmentation: crop-flip (pad\n"
	"                        4 pixels, a random crop, a flip with probability\n"
	"                        1/2; the same views for a seed) | none | auto\n"
	"                        (default: crop-flip on cifar10:DIR, else none);\n"
	"                        the test set is never augmented\n"
	"      --data-split SPEC the training set among the workers: iid (default:\n"
	"                        all of it for each) | shards:K (by label, K\n"
	"                        shards each) | dirichlet:ALPHA (label skew, smaller\n"
	"                        is more) | contiguous (worker i the i-th range);\n"
	"                        seeded (docs/architecture.md, \"Non-IID data\")\n"
	"      --device NAME     auto | cpu | ref | cuda (auto: cuda where a GPU answers, else cpu;\n"
	"                        ref: the portable reference path, slow)\n"
	"      --rule NAME       update rule (default asgd)\n"
	"  -p, --param KEY=VALUE a rule parameter (\"rule_params\" in the run\n"
	"                        object, docs/rules.md), e.g. -p H=20 -p\n"
	"                        outer_lr=0.7 -p compress=topk; repeatable\n"
	"  -w, --workers N       workers (default 1)\n"
	"      --lr X            learning rate (default 0.05)\n"
	"      --momentum X      momentum (default 0)\n"
	"      --weight-decay X  weight decay (default 0; adamw: decoupled, weights only)\n"
	"      --optimizer NAME  sgd | momentum | nesterov | adam | adamw (default sgd)\n"
	"      --clip X          clip each update's gradient to global norm X (default 0: off)\n"
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
	"The first stop reached ends the run. Without a stop option, and no\n"
	"\"stop\" in the --config file, a run stops after 3 epochs; a run object\n"
	"whose stop fields are all 0 (no limit) runs until it is interrupted.\n"
	"\n"
	"Resuming: --resume continues the checkpoint's run with its run object\n"
	"and every change it had. On the command line, the stop options (counted\n"
	"from the start of the original run, like v and epoch in the log) replace\n"
	"the checkpoint's stop; --rule, --param, --workers, --lr, --momentum,\n"
	"--weight-decay, --batch (at most the starting batch) and --eval-every\n"
	"are applied as changes at the checkpoint's version (logged, origin\n"
	"\"resume\"); --threads, --log, --log-format and --quiet apply as usual.\n"
	"--model, --dataset, --augment, --data-split, --device, --clock and --seed\n"
"cannot differ\n"
	"from the checkpoint's; --config and --replay cannot be combined with\n"
	"--resume. A daemon's checkpoint has no stop: give one. --checkpoint-every\n"
	"is not stored: give it again to go on checkpointing.\n"
	"\n"
	"A resumed run with --log FILE, FILE being the interrupted run's log,\n"
	"continues it: the partial last line a kill left, the records past the\n"
	"checkpoint's version and the end record are cut off, a run object with\n"
	"\"resumed\": true is appended, then the resumed run's records, so FILE\n"
	"holds the whole run once (see docs/formats.md).\n"
	"\n"
	"Exit status: 0 done, 1 runtime failure, 2 bad usage or bad config,\n"
	"3 the run diverged (a non-finite loss or gradient; try a smaller --lr),\n"
	"130 interrupted by SIGINT (Ctrl-C), 143 by SIGTERM: the end record says\n"
	"\"stop\": \"interrupted\" (a second signal quits at once, with no end record).\n";

enum { O_CKEVERY = 250, O_CKDIR = 251, O_CKKEEP = 252, O_RUNSEL = 253, O_LOGFMT = 254, O_CLOCK = 255, O_DEVICE = 256, O_RULE, O_LR, O_MOM,
       O_WD, O_OPTIM, O_CLIP, O_STEPS, O_SECONDS, O_TARGET, O_EVAL, O_AUGMENT,
       O_SPLIT, O_PARAM };

static const char run_optstring[] = ":c:r:R:m:d:w:b:s:e:t:l:p:qh";

static const struct option run_opts[] = {
	{"config", required_argument, NULL, 'c'},
	{"replay", required_argument, NULL, 'r'},
	{"run", required_argument, NULL, O_RUNSEL},
	{"resume", required_argument, NULL, 'R'},
	{"clock", required_argument, NULL, O_CLOCK},
	{"model", required_argument, NULL, 'm'},
	{"dataset", required_argument, NULL, 'd'},
	{"augment", required_argument, NULL, O_AUGMENT},
	{"data-split", required_argument, NULL, O_SPLIT},
	{"device", required_argument, NULL, O_DEVICE},
	{"rule", required_argument, NULL, O_RULE},
	{"param", required_argument, NULL, 'p'},
	{"workers", required_argument, NULL, 'w'},
	{"lr", required_argument, NULL, O_LR},
	{"momentum", required_argument, NULL, O_MOM},
	{"weight-decay", required_argument, NULL, O_WD},
	{"optimizer", required_argument, NULL, O_OPTIM},
	{"clip", required_argument, NULL, O_CLIP},
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

/* -p KEY=VALUE: {"rule_params": {KEY: VALUE}}, VALUE read as JSON when it
 * is a number, true or false, else as a string (compress=topk) */
static int
param_flag(run_config *cfg, const char *arg, char *err)
{
	const char *eq = strchr(arg, '=');
	char key[64];
	if (!eq || eq == arg || !eq[1])
		return sl_fail(err, SL_EINVAL, "--param: expected KEY=VALUE (a rule parameter, "
			       "e.g. H=20), got \"%s\"", arg);
	if ((size_t)(eq - arg) >= sizeof(key))
		return sl_fail(err, SL_EINVAL, "--param: the key of \"%s\" is too long", arg);
	memcpy(key, arg, (size_t)(eq - arg));
	key[eq - arg] = '\0';
	json_t *v = json_loads(eq + 1, JSON_DECODE_ANY, NULL);
	if (!json_is_number(v) && !json_is_boolean(v)) {
		json_decref(v);
		v = json_string(eq + 1);
	}
	json_t *o = json_pack("{s:{s:o}}", "rule_params", key, v);
	char e2[SL_ERR_LEN];
	int rc = o ? config_apply_json(o, cfg, e2) : sl_fail(e2, SL_ENOMEM, "out of memory");
	json_decref(o);
	if (rc < 0)
		return sl_fail(err, SL_EINVAL, "--param: %s", e2);
	return 0;
}

/* a stop option: a limit, so more than 0 (in the run object 0 means "no
 * limit", which on the command line is leaving the option out) */
static int
stop_flag(run_config *cfg, const char *flag, const char *sub, const char *arg, int kind,
	  char *err)
{
	double d;
	if (cli_double(arg, &d) == 0 && d == 0)
		return sl_fail(err, SL_EINVAL, "--%s: must be %s (0 would be no limit: leave "
			       "the option out; with no stop option a run stops after 3 epochs)",
			       flag, kind == 'i' ? ">= 1" : "> 0");
	return apply_flag(cfg, flag, "stop", sub, arg, kind, err);
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

int
runcli_usage_error(const char *msg, char *err)
{
	fprintf(stderr, "stalelab run: %s\n", msg ? msg : err);
	return 2;
}

/* runcli_parse without releasing *conf on the way out */
static int
parse(int argc, char **argv, runcli_opts *o, run_config *cfg, json_t **conf, char *err)
{
	int opt;
	/* pass 1: --help, usage errors, the --config files in order and the
	 * sources of a run (--replay, --resume), so flags override them */
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, run_optstring, run_opts, NULL)) != -1) {
		unsigned long long u;
		switch (opt) {
		case 'h':
			fputs(run_usage, stdout);
			return 0;
		case '?': case ':':
			return cli_bad_option("run", opt, argv, run_opts);
		case 'c':
			o->have_config = 1;
			if (load_config_file(optarg, cfg, conf, err) < 0)
				return runcli_usage_error(NULL, err);
			break;
		case 'r': o->replay_path = optarg; break;
		case 'R': o->resume_path = optarg; break;
		case 'q': o->quiet = 1; break;
		case O_CKDIR: o->ckpt_dir = optarg; break;
		case O_CKEVERY:
			if (cli_opt_u64("checkpoint-every", optarg, 1, CLI_NO_MAX, &u, err) < 0)
				return runcli_usage_error(NULL, err);
			o->ckpt_every = u;
			break;
		case O_CKKEEP:
			if (cli_opt_u64("checkpoint-keep", optarg, 1, 1000, &u, err) < 0)
				return runcli_usage_error(NULL, err);
			o->ckpt_keep = (int)u;
			break;
		case O_RUNSEL:
			if (cli_u64(optarg, &u) < 0 || u < 1 || u > 1000000) {
				snprintf(err, SL_ERR_LEN, "--run: expected a run number (1, 2, ...), got \"%s\"", optarg);
				return runcli_usage_error(NULL, err);
			}
			o->want_run = (int)u;
			break;
		}
	}
	if (optind < argc) {
		snprintf(err, SL_ERR_LEN, "unexpected argument '%s' (try --help)", argv[optind]);
		return runcli_usage_error(NULL, err);
	}
	if (o->resume_path && (o->replay_path || o->have_config))
		return runcli_usage_error("--resume: cannot be combined with --config or --replay "
					  "(the checkpoint holds its run object)", NULL);
	if (o->want_run && !o->replay_path)
		return runcli_usage_error("--run: only with --replay", NULL);
	if (!o->ckpt_every != !o->ckpt_dir)
		return runcli_usage_error(o->ckpt_dir ? "--checkpoint-dir: give --checkpoint-every N too"
						      : "--checkpoint-every: give --checkpoint-dir DIR too",
					  NULL);
	if (o->replay_path &&
	    load_replay(o->replay_path, o->want_run, o->quiet, cfg, conf, err) < 0)
		return runcli_usage_error(NULL, err);
	return RUNCLI_GO;
}

int
runcli_parse(int argc, char **argv, runcli_opts *o, run_config *cfg, json_t **conf,
	     char *err)
{
	*o = (runcli_opts){.log_format = "jsonl", .ckpt_keep = 2};
	int rc = parse(argc, argv, o, cfg, conf, err);
	if (rc != RUNCLI_GO) {
		json_decref(*conf);
		*conf = NULL;
	}
	return rc;
}

int
runcli_apply(int argc, char **argv, runcli_opts *o, run_config *cfg, char *err)
{
	int opt, rc = 0;
	/* pass 2: every flag in order */
	optind = 1;
	while ((opt = getopt_long(argc, argv, run_optstring, run_opts, NULL)) != -1) {
		switch (opt) {
		case 'c': case 'r': case 'R': case O_RUNSEL: case O_CKEVERY: case O_CKDIR:
		case O_CKKEEP: break;
		case O_CLOCK: rc = apply_flag(cfg, "clock", "clock", NULL, optarg, 's', err); break;
		case 'm': rc = apply_flag(cfg, "model", "model", NULL, optarg, 's', err); break;
		case 'd': rc = apply_flag(cfg, "dataset", "dataset", NULL, optarg, 's', err); break;
		case O_AUGMENT: rc = apply_flag(cfg, "augment", "augment", NULL, optarg, 's', err); break;
		case O_SPLIT: rc = apply_flag(cfg, "data-split", "data_split", NULL, optarg, 's', err); break;
		case O_DEVICE: rc = apply_flag(cfg, "device", "device", NULL, optarg, 's', err); break;
		case O_RULE: rc = apply_flag(cfg, "rule", "rule", NULL, optarg, 's', err); break;
		case 'p': rc = param_flag(cfg, optarg, err); break;
		case 'w': rc = apply_flag(cfg, "workers", "workers", NULL, optarg, 'i', err); break;
		case O_LR: rc = apply_flag(cfg, "lr", "lr", NULL, optarg, 'f', err); break;
		case O_MOM: rc = apply_flag(cfg, "momentum", "momentum", NULL, optarg, 'f', err); break;
		case O_OPTIM: rc = apply_flag(cfg, "optimizer", "optimizer", NULL, optarg, 's', err); break;
		case O_CLIP: rc = apply_flag(cfg, "clip", "clip", NULL, optarg, 'f', err); break;
		case O_WD: rc = apply_flag(cfg, "weight-decay", "weight_decay", NULL, optarg, 'f', err); break;
		case 'b': rc = apply_flag(cfg, "batch", "batch", NULL, optarg, 'i', err); break;
		case 's': rc = apply_flag(cfg, "seed", "seed", NULL, optarg, 'i', err); break;
		case 'e': rc = stop_flag(cfg, "epochs", "epochs", optarg, 'f', err); break;
		case O_STEPS: rc = stop_flag(cfg, "steps", "steps", optarg, 'i', err); break;
		case O_SECONDS: rc = stop_flag(cfg, "seconds", "seconds", optarg, 'f', err); break;
		case O_TARGET: rc = stop_flag(cfg, "target-acc", "target_acc", optarg, 'f', err); break;
		case O_EVAL: rc = apply_flag(cfg, "eval-every", "eval_every", NULL, optarg, 'i', err); break;
		case 't': rc = apply_flag(cfg, "threads", "threads", NULL, optarg, 'i', err); break;
		case 'l': o->log_path = optarg; break;
		case O_LOGFMT:
			if (strcmp(optarg, "jsonl") && strcmp(optarg, "csv")) {
				snprintf(err, SL_ERR_LEN, "--log-format: expected jsonl or csv, got \"%s\"", optarg);
				rc = -SL_EINVAL;
			}
			o->log_format = optarg;
			break;
		case 'q': o->quiet = 1; break;
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}
