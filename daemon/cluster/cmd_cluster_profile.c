/* cmd_cluster_profile.c - `stalelab cluster profile`: a model's schedules
 * for the cluster simulator, measured by the engine (docs/cluster.md,
 * "Profiles from the engine"). For full backprop and each partial depth d
 * (the top d parameterised layers backpropagated, the engine's spb_depth,
 * on every worker of the job): every depth a run takes on the model (each
 * of a sequential one, the block boundaries of a residual one:
 * config_spb_depths), or those of --depths:
 *   compute_s  one worker's step at that depth, timed on the device;
 *   comm_s     its push (the gradient from the depth's layer on) and pull
 *              (the whole model) at --bw-gbps;
 *   mem_gb     the backend memory the engine allocates for the model at
 *              the batch (the same at every depth: the engine keeps every
 *              layer's buffers);
 *   iter_mult  the updates the job needs to reach --target-acc at that
 *              depth over full backprop's: asgd runs on the virtual clock,
 *              medians over seeds. A depth that misses the target within
 *              --max-epochs on any seed is left out, with a comment.
 * The CSV goes to stdout, its origin in '#' lines, with each layer's
 * measured forward and backward time, bytes and FLOPs. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "cli.h"
#include "cmd_cluster.h"
#include "dataset.h"
#include "model.h"
#include "run.h"
#include "sl.h"

#define MAX_SEEDS 9

static const char profile_usage[] =
	"Usage: stalelab cluster profile --model SPEC [OPTIONS] > PROFILES.csv\n"
	"\n"
	"Measure a model's backprop schedules for `stalelab cluster`: full backprop\n"
	"and each partial depth (the top d parameterised layers, every worker),\n"
	"one worker's step time on the device, the bytes of its push and pull, the\n"
	"memory the engine allocates, and the updates to a target accuracy against\n"
	"full backprop's (asgd on the virtual clock, the median over seeds).\n"
	"The depths are those a run's spb_depth takes on the model: every depth of\n"
	"a sequential one (logreg, mlp, lenet5), the block boundaries of a residual\n"
	"one (resnet:8: 1, 5, 9, 13, 14; stalelab run prints them).\n"
	"\n"
	"  -m, --model SPEC       logreg | mlp:784-256-128-10 | lenet5 | resnet20 | ...\n"
	"  -d, --dataset SPEC     the data (default fashion-mnist)\n"
	"      --device NAME      where the steps are timed (default cpu)\n"
	"  -b, --batch N          per worker (default 64)\n"
	"      --bw-gbps X        the network, Gbit/s (default 10)\n"
	"      --target-acc X     test accuracy to reach (default 0.8)\n"
	"  -w, --workers N        workers of the convergence runs (default 4)\n"
	"      --seeds N          convergence runs per depth (default 3)\n"
	"      --max-epochs X     a depth that misses the target by then is left\n"
	"                         out (default 10)\n"
	"      --eval-every N     updates between the runs' evaluations: the\n"
	"                         multipliers' resolution (default 50)\n"
	"  -S, --seconds X        timing per depth (default 2)\n"
	"      --depths LIST      these depths only, comma-separated (0,5,9); full\n"
	"                         backprop (0) is always measured: the baseline\n"
	"  -h, --help             this text\n"
	"\n"
	"Each depth runs --seeds trainings of up to --max-epochs: a ResNet on the\n"
	"full data set takes hours. On small data it takes minutes, e.g.\n"
	"  stalelab cluster profile -m resnet:8 -d synthetic:2000 --seeds 1 \\\n"
	"      --max-epochs 2 --eval-every 8 -S 0.5 > resnet8.csv\n";

/* one worker's steps at depth on m: median samples/s over ~seconds */
static double
step_rate(model *m, const dataset *tr, int depth, double seconds)
{
	enum { WIN = 32 };
	double sps[WIN];
	int nw = 0, B = m->batch_cap;
	uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)B);
	if (!idx)
		return 0;
	for (int i = 0; i < B; i++)
		idx[i] = (uint32_t)((size_t)i * 7919 % tr->n);
	for (int i = 0; i < 5; i++) { /* warm-up */
		model_load_batch(m, tr->x, tr->y, idx, B);
		model_step(m, NULL, B, depth);
	}
	double t_end = sl_now() + seconds;
	while (nw < WIN && (nw < 3 || sl_now() < t_end)) {
		double t0 = sl_now(), t;
		long n = 0;
		do {
			model_load_batch(m, tr->x, tr->y, idx, B);
			model_step(m, NULL, B, depth);
			m->be->ops->sync(m->be);
			n += B;
		} while ((t = sl_now()) - t0 < seconds / 8);
		sps[nw++] = n / (t - t0);
	}
	free(idx);
	for (int i = 1; i < nw; i++) /* sort: few values */
		for (int k = i; k > 0 && sps[k] < sps[k - 1]; k--) {
			double x = sps[k];
			sps[k] = sps[k - 1];
			sps[k - 1] = x;
		}
	return sps[nw / 2];
}

typedef struct conv_opts {
	const char *model, *dataset;
	int batch, workers, seeds, eval_every;
	double target, max_epochs;
} conv_opts;

/* updates to the target at depth (0: full), or 0 when missed */
static uint64_t
updates_to_target(const conv_opts *o, const dataset_pair *d, int depth, uint64_t seed,
		  char *err)
{
	run_config c;
	config_defaults(&c);
	snprintf(c.model, sizeof(c.model), "%s", o->model);
	snprintf(c.dataset, sizeof(c.dataset), "%s", o->dataset);
	snprintf(c.device, sizeof(c.device), "cpu");
	snprintf(c.clock, sizeof(c.clock), "virtual");
	c.workers = o->workers;
	c.batch = o->batch;
	c.seed = seed;
	c.stop_target_acc = o->target;
	c.stop_epochs = o->max_epochs;
	c.eval_every = o->eval_every;
	if (depth > 0) {
		c.n_overrides = o->workers;
		for (int k = 0; k < o->workers; k++)
			c.overrides[k] = (worker_override){.id = k, .has_spb = 1, .spb_depth = depth};
	}
	run *r;
	if (run_new(&c, d, NULL, 0, NULL, &r, err) < 0)
		return 0;
	run_exec(r);
	run_snapshot *s = run_snapshot_get(r);
	uint64_t v = s->stop_reason && !strcmp(s->stop_reason, "target_acc") ? s->v : 0;
	run_snapshot_put(s);
	run_free(r);
	return v;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* '#' lines: each layer's forward and backward time per batch at full
 * backprop on the device (the engine's own per-layer profile, ~seconds),
 * its parameter bytes, output activation bytes and FLOPs per batch; the
 * schedules' costs are measured whole below, these say where they go */
static void
print_layer_profile(model *m, const dataset *tr, double seconds)
{
	int B = m->batch_cap;
	uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)B);
	node_info info[MODEL_MAX_NODES];
	int nl = model_node_info(m, info, MODEL_MAX_NODES);
	if (!idx || nl != m->n_nodes) {
		free(idx);
		return;
	}
	for (int i = 0; i < B; i++)
		idx[i] = (uint32_t)((size_t)i * 7919 % tr->n);
	model_load_batch(m, tr->x, tr->y, idx, B);
	for (int i = 0; i < 5; i++) /* warm-up */
		model_step(m, NULL, B, 0);
	memset(m->prof_fwd, 0, sizeof(m->prof_fwd));
	memset(m->prof_bwd, 0, sizeof(m->prof_bwd));
	m->prof_loss = 0;
	m->profile = 1;
	long steps = 0;
	double t_end = sl_now() + seconds;
	while (steps < 3 || sl_now() < t_end) {
		model_step(m, NULL, B, 0);
		steps++;
	}
	m->profile = 0;
	free(idx);
	printf("# layers at batch %d, per batch (the engine's per-layer profile at full backprop, "
	       "%ld steps; a topD schedule runs the backward of the layers above its D-th "
	       "parameterised one from the top, and that one without its input gradient):\n",
	       B, steps);
	for (int i = 0; i < nl; i++) {
		const node_info *l = &info[i];
		printf("#   %d %-7s forward %9.1f us  backward %9.1f us  params %10zu B  "
		       "activations %10zu B  FLOP fwd %.4g bwd %.4g\n", i, l->name,
		       m->prof_fwd[i] / steps * 1e6, m->prof_bwd[i] / steps * 1e6,
		       l->n_params * 4, l->act_floats * 4 * (size_t)B, l->flops_fwd * B,
		       (l->flops_bwd_w + (i ? l->flops_bwd_x : 0)) * B);
	}
	printf("#     loss    %9.1f us\n", m->prof_loss / steps * 1e6);
}

typedef struct profile_opts {
	conv_opts conv;
	const char *device;
	const char *depths; /* --depths as given; NULL: the model's */
	double bw, secs;
} profile_opts;

/* the command line into *p: -1 to go on, else the exit status (--help 0,
 * a bad option 2) */
static int
profile_opts_parse(int argc, char **argv, profile_opts *p)
{
	enum { O_DEVICE = 256, O_BW, O_TARGET, O_SEEDS, O_MAXEP, O_DEPTHS, O_EVAL };
	static const struct option opts[] = {
		{"model", required_argument, NULL, 'm'},   {"dataset", required_argument, NULL, 'd'},
		{"device", required_argument, NULL, O_DEVICE}, {"batch", required_argument, NULL, 'b'},
		{"bw-gbps", required_argument, NULL, O_BW}, {"target-acc", required_argument, NULL, O_TARGET},
		{"workers", required_argument, NULL, 'w'}, {"seeds", required_argument, NULL, O_SEEDS},
		{"max-epochs", required_argument, NULL, O_MAXEP}, {"seconds", required_argument, NULL, 'S'},
		{"depths", required_argument, NULL, O_DEPTHS}, {"eval-every", required_argument, NULL, O_EVAL},
		{"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
	};
	conv_opts *o = &p->conv;
	*p = (profile_opts){.conv = {.dataset = "fashion-mnist", .batch = 64, .workers = 4,
				     .seeds = 3, .eval_every = 50, .target = 0.8, .max_epochs = 10},
			    .device = "cpu", .bw = 10, .secs = 2};
	const cli_range positive = {.lo = 0, .lo_open = 1, .hi = INFINITY};
	unsigned long long u;
	char err[SL_ERR_LEN];
	int opt, rc = 0;
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":m:d:b:w:S:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'm': o->model = optarg; break;
		case 'd': o->dataset = optarg; break;
		case O_DEVICE: p->device = optarg; break;
		case O_DEPTHS: p->depths = optarg; break;
		case 'b':
		case 'w':
		case O_SEEDS:
			rc = cli_opt_u64(opt == 'b' ? "batch" : opt == 'w' ? "workers" : "seeds", optarg, 1,
					 opt == O_SEEDS ? MAX_SEEDS : 4096, &u, err);
			if (rc == 0)
				*(opt == 'b' ? &o->batch : opt == 'w' ? &o->workers : &o->seeds) = (int)u;
			break;
		case O_EVAL:
			if ((rc = cli_opt_u64("eval-every", optarg, 1, 1000000, &u, err)) == 0)
				o->eval_every = (int)u;
			break;
		case O_BW: rc = cli_opt_double("bw-gbps", optarg, positive, &p->bw, err); break;
		case O_TARGET:
			rc = cli_opt_double("target-acc", optarg,
					    (cli_range){.lo = 0, .lo_open = 1, .hi = 1}, &o->target, err);
			break;
		case O_MAXEP: rc = cli_opt_double("max-epochs", optarg, positive, &o->max_epochs, err); break;
		case 'S': rc = cli_opt_double("seconds", optarg, positive, &p->secs, err); break;
		case 'h': fputs(profile_usage, stdout); return 0;
		default: return cli_bad_option("cluster profile", opt, argv, opts);
		}
		if (rc < 0)
			return cli_usage_error("cluster profile", err);
	}
	if (!o->model || optind < argc) {
		fprintf(stderr, "stalelab cluster profile: %s\n",
			o->model ? "unexpected argument" : "needs --model (stalelab cluster profile --help)");
		return 2;
	}
	return -1;
}

/* --depths "0,5,9" into depths[0..max), ascending, full backprop (0) first
 * and once; each a depth m's runs take (below its layers, within
 * spb_depth's range, at a block boundary). Their count, or -SL_EINVAL with
 * err naming --depths. */
static int
parse_depths(const char *s, const model *m, int *depths, int max, char *err)
{
	char buf[512], *save = NULL;
	int n = 1, top = SL_MIN(m->n_param_layers - 1, CFG_SPB_MAX);
	snprintf(buf, sizeof(buf), "%s", s);
	depths[0] = 0;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		unsigned long long u;
		if (cli_u64(t, &u) < 0 || u > (unsigned long long)top)
			return sl_fail(err, SL_EINVAL, "--depths: expected depths from 0 (full backprop) "
				       "to %d, comma-separated (0,5,9), got \"%s\"", top, t);
		if (config_spb_at_boundary("--depths", (int)u, m->spec, err) < 0)
			return -SL_EINVAL;
		int k = n;
		while (k > 0 && depths[k - 1] > (int)u)
			k--;
		if ((k && depths[k - 1] == (int)u) || n == max)
			continue; /* given twice */
		memmove(depths + k + 1, depths + k, sizeof(int) * (size_t)(n - k));
		depths[k] = (int)u;
		n++;
	}
	return n;
}

/* the '#' lines of where and how it was measured */
static void
print_profile_head(const profile_opts *p, const model *m, const dataset_pair *d,
		   backend *be, const int *depths, int nd)
{
	const conv_opts *o = &p->conv;
	char about[256] = "", list[160], day[32];
	if (be->ops->describe)
		be->ops->describe(be, about, sizeof(about));
	time_t now = time(NULL);
	strftime(day, sizeof(day), "%Y-%m-%d", gmtime(&now));
	printf("# stalelab %s cluster profile --model %s, %s, %s\n", SL_VERSION, m->spec, day,
	       d->name);
	printf("# schedules: full and topD for D = %s (%s)\n",
	       nd > 1 ? model_depths_str(depths + 1, nd - 1, list, sizeof(list)) : "none",
	       p->depths ? "--depths" : "the depths a run's spb_depth takes on this model: every one "
	       "of a sequential model, the block boundaries of a residual one");
	printf("# compute_s: one worker's step at batch %d on %s (%s), the median of timed "
	       "windows\n", o->batch, backend_name(be), about);
	printf("# comm_s: its push (the gradient from the depth's layer on) and pull (the whole "
	       "model) at %g Gbit/s\n", p->bw);
	printf("# mem_gb: the backend memory the engine allocates for the model at batch %d "
	       "(every depth keeps every layer's buffers)\n", o->batch);
	printf("# iter_mult: updates to test accuracy %g over full backprop's; asgd, %d workers "
	       "at the depth, virtual clock, batch %d, medians of %d seed%s, evaluated every %d "
	       "updates\n", o->target, o->workers, o->batch, o->seeds, o->seeds == 1 ? "" : "s",
	       o->eval_every);
}

/* one depth's row: its convergence runs, then its step timed (the row, or
 * a '#' line saying why it is left out). 0; 1 when full backprop misses
 * the target (nothing to compare with), 2 when a run cannot start; err
 * says which */
static int
profile_depth(const profile_opts *p, const dataset_pair *d, model *m, int depth,
	      double *full_med, char *err)
{
	const conv_opts *o = &p->conv;
	uint64_t v[MAX_SEEDS];
	int missed = 0;
	double t0 = sl_now();
	for (int s = 0; s < o->seeds; s++) {
		err[0] = 0;
		v[s] = updates_to_target(o, d, depth, (uint64_t)s + 1, err);
		if (err[0])
			return 2;
		missed += v[s] == 0;
	}
	char name[32];
	snprintf(name, sizeof(name), depth ? "top%d" : "full", depth);
	if (missed) {
		printf("# %s: missed test accuracy %g within %g epochs on %d of %d seeds: left "
		       "out\n", name, o->target, o->max_epochs, missed, o->seeds);
		fflush(stdout);
		if (!depth) {
			sl_fail(err, SL_EINVAL, "full backprop does not reach --target-acc %g within "
				"--max-epochs %g", o->target, o->max_epochs);
			return 1;
		}
		return 0;
	}
	qsort(v, (size_t)o->seeds, sizeof(uint64_t), cmp_u64);
	double med = (double)v[o->seeds / 2];
	if (!depth)
		*full_med = med;
	double sps = step_rate(m, &d->train, depth, p->secs);
	double push = 4.0 * (double)(m->n_params - model_tail_offset(m, depth));
	double pull = 4.0 * (double)m->n_params;
	printf("%s,%s,%.6g,%.6g,%.6g,%.4f\n", m->spec, name, sps > 0 ? o->batch / sps : 0,
	       (push + pull) * 8 / (p->bw * 1e9), (double)m->mem_bytes / 1e9,
	       depth ? med / *full_med : 1.0);
	fflush(stdout);
	fprintf(stderr, "stalelab cluster profile: %s: %.0f updates to %g (the median of %d), "
		"%.1f s\n", name, med, o->target, o->seeds, sl_now() - t0);
	return 0;
}

int
cmd_cluster_profile(int argc, char **argv)
{
	profile_opts p;
	int code = profile_opts_parse(argc, argv, &p);
	if (code >= 0)
		return code;
	double t0 = sl_now();
	char err[SL_ERR_LEN];
	dataset_pair d;
	if (model_data_load(p.conv.model, p.conv.dataset, 1, &d, err) < 0) {
		fprintf(stderr, "stalelab cluster profile: %s\n", err);
		return 2;
	}
	backend *be = NULL;
	model *m = NULL;
	int depths[CFG_SPB_MAX + 1], nd = -1;
	code = 0;
	if (backend_open(p.device, cli_ncpu(), &be, err) == 0 &&
	    model_new(p.conv.model, d.train.c, d.train.h, d.train.w, d.train.classes,
		      p.conv.batch, 1, be, &m, err) == 0)
		nd = p.depths ? parse_depths(p.depths, m, depths, CFG_SPB_MAX + 1, err)
			      : config_spb_depths(m->spec, depths, CFG_SPB_MAX + 1);
	if (nd < 1) {
		fprintf(stderr, "stalelab cluster profile: %s\n", err);
		code = 2;
		goto out;
	}
	print_profile_head(&p, m, &d, be, depths, nd);
	print_layer_profile(m, &d.train, p.secs / 2);
	printf("model,schedule,compute_s,comm_s,mem_gb,iter_mult\n");
	fflush(stdout);
	double full_med = 0;
	for (int i = 0; i < nd && !code; i++)
		if ((code = profile_depth(&p, &d, m, depths[i], &full_med, err)))
			fprintf(stderr, "stalelab cluster profile: %s\n", err);
	if (!code)
		fprintf(stderr, "stalelab cluster profile: %d depths of %s in %.0f s\n", nd,
			m->spec, sl_now() - t0);
out:
	model_free(m);
	backend_free(be);
	ds_pair_free(&d);
	return code;
}
