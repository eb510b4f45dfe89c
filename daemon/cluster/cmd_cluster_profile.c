/* cmd_cluster_profile.c - `stalelab cluster profile`: a model's schedules
 * for the cluster simulator, measured by the engine (docs/cluster.md,
 * "Profiles from the engine"). For full backprop and each partial depth d
 * (the top d parameterised layers backpropagated, the engine's spb_depth,
 * on every worker of the job):
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
	"  -S, --seconds X        timing per depth (default 2)\n"
	"  -h, --help             this text\n";

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
	int batch, workers, seeds;
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
	c.eval_every = 50;
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

int
cmd_cluster_profile(int argc, char **argv)
{
	enum { O_DEVICE = 256, O_BW, O_TARGET, O_SEEDS, O_MAXEP };
	static const struct option opts[] = {
		{"model", required_argument, NULL, 'm'},   {"dataset", required_argument, NULL, 'd'},
		{"device", required_argument, NULL, O_DEVICE}, {"batch", required_argument, NULL, 'b'},
		{"bw-gbps", required_argument, NULL, O_BW}, {"target-acc", required_argument, NULL, O_TARGET},
		{"workers", required_argument, NULL, 'w'}, {"seeds", required_argument, NULL, O_SEEDS},
		{"max-epochs", required_argument, NULL, O_MAXEP}, {"seconds", required_argument, NULL, 'S'},
		{"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
	};
	conv_opts o = {.dataset = "fashion-mnist", .batch = 64, .workers = 4, .seeds = 3,
		       .target = 0.8, .max_epochs = 10};
	const char *device = "cpu";
	double bw = 10, secs = 2;
	const cli_range positive = {.lo = 0, .lo_open = 1, .hi = INFINITY};
	unsigned long long u;
	char err[SL_ERR_LEN];
	int opt, rc = 0;
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":m:d:b:w:S:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'm': o.model = optarg; break;
		case 'd': o.dataset = optarg; break;
		case O_DEVICE: device = optarg; break;
		case 'b':
		case 'w':
		case O_SEEDS:
			rc = cli_opt_u64(opt == 'b' ? "batch" : opt == 'w' ? "workers" : "seeds", optarg, 1,
					 opt == O_SEEDS ? MAX_SEEDS : 4096, &u, err);
			if (rc == 0)
				*(opt == 'b' ? &o.batch : opt == 'w' ? &o.workers : &o.seeds) = (int)u;
			break;
		case O_BW: rc = cli_opt_double("bw-gbps", optarg, positive, &bw, err); break;
		case O_TARGET:
			rc = cli_opt_double("target-acc", optarg,
					    (cli_range){.lo = 0, .lo_open = 1, .hi = 1}, &o.target, err);
			break;
		case O_MAXEP: rc = cli_opt_double("max-epochs", optarg, positive, &o.max_epochs, err); break;
		case 'S': rc = cli_opt_double("seconds", optarg, positive, &secs, err); break;
		case 'h': fputs(profile_usage, stdout); return 0;
		default: return cli_bad_option("cluster profile", opt, argv, opts);
		}
		if (rc < 0)
			return cli_usage_error("cluster profile", err);
	}
	if (!o.model || optind < argc) {
		fprintf(stderr, "stalelab cluster profile: %s\n",
			o.model ? "unexpected argument" : "needs --model (stalelab cluster profile --help)");
		return 2;
	}
	dataset_pair d;
	if (ds_load(o.dataset, 1, &d, err) < 0) {
		fprintf(stderr, "stalelab cluster profile: %s\n", err);
		return 2;
	}
	backend *be = NULL;
	model *m = NULL;
	int code = 0;
	if (backend_open(device, cli_ncpu(), &be, err) < 0 ||
	    model_new(o.model, d.train.c, d.train.h, d.train.w, d.train.classes, o.batch, 1, be, &m,
		      err) < 0) {
		fprintf(stderr, "stalelab cluster profile: %s\n", err);
		code = 2;
		goto out;
	}
	char about[256] = "";
	if (be->ops->describe)
		be->ops->describe(be, about, sizeof(about));
	time_t now = time(NULL);
	char day[32];
	strftime(day, sizeof(day), "%Y-%m-%d", gmtime(&now));
	printf("# stalelab %s cluster profile --model %s, %s, %s\n", SL_VERSION, m->spec, day,
	       d.name);
	printf("# compute_s: one worker's step at batch %d on %s (%s), the median of timed "
	       "windows\n", o.batch, backend_name(be), about);
	printf("# comm_s: its push (the gradient from the depth's layer on) and pull (the whole "
	       "model) at %g Gbit/s\n", bw);
	printf("# mem_gb: the backend memory the engine allocates for the model at batch %d "
	       "(every depth keeps every layer's buffers)\n", o.batch);
	printf("# iter_mult: updates to test accuracy %g over full backprop's; asgd, %d workers "
	       "at the depth, virtual clock, batch %d, medians of %d seeds, evaluated every 50 "
	       "updates\n", o.target, o.workers, o.batch, o.seeds);
	print_layer_profile(m, &d.train, secs / 2);
	printf("model,schedule,compute_s,comm_s,mem_gb,iter_mult\n");
	fflush(stdout);
	double full_med = 0;
	for (int depth = 0; depth < m->n_param_layers; depth++) {
		uint64_t v[MAX_SEEDS];
		int missed = 0;
		for (int s = 0; s < o.seeds; s++) {
			err[0] = 0;
			v[s] = updates_to_target(&o, &d, depth, (uint64_t)s + 1, err);
			if (err[0]) {
				fprintf(stderr, "stalelab cluster profile: %s\n", err);
				code = 2;
				goto out;
			}
			missed += v[s] == 0;
		}
		char name[32];
		if (depth)
			snprintf(name, sizeof(name), "top%d", depth);
		else
			snprintf(name, sizeof(name), "full");
		if (missed) {
			printf("# %s: missed test accuracy %g within %g epochs on %d of %d seeds: left "
			       "out\n", name, o.target, o.max_epochs, missed, o.seeds);
			if (!depth) {
				fprintf(stderr, "stalelab cluster profile: full backprop does not reach "
						"--target-acc %g within --max-epochs %g\n", o.target,
					o.max_epochs);
				code = 1;
				goto out;
			}
			continue;
		}
		qsort(v, (size_t)o.seeds, sizeof(uint64_t), cmp_u64);
		double med = (double)v[o.seeds / 2];
		if (!depth)
			full_med = med;
		double sps = step_rate(m, &d.train, depth, secs);
		double push = 4.0 * (double)(m->n_params - model_tail_offset(m, depth));
		double pull = 4.0 * (double)m->n_params;
		printf("%s,%s,%.6g,%.6g,%.6g,%.4f\n", m->spec, name, sps > 0 ? o.batch / sps : 0,
		       (push + pull) * 8 / (bw * 1e9), (double)m->mem_bytes / 1e9,
		       depth ? med / full_med : 1.0);
		fflush(stdout);
	}
out:
	model_free(m);
	backend_free(be);
	ds_pair_free(&d);
	return code;
}
