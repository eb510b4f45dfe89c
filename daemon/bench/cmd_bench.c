/* cmd_bench.c - `stalelab bench`: training throughput of one worker (MLP
 * and LeNet-5 on Fashion-MNIST) and the GFLOP/s achieved, next to OpenBLAS's
 * own sgemm on the models' main GEMM shapes. Figures are medians over
 * repeated windows; the machine may be shared, so compare ratios. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd_bench.h"
#include "ps.h"
#include "run.h"

static const char bench_usage[] =
	"Usage: stalelab bench [OPTIONS]\n"
	"\n"
	"Throughput of the engine: samples/s of one worker training the MLP and\n"
	"LeNet-5 (plain SGD, lr 0.05, batch 64), GFLOP/s achieved, and OpenBLAS's\n"
	"own sgemm on the same shapes (a language model: tokens/s as well).\n"
	"Prints a table and one JSON line per figure.\n"
	"\n"
	"  -m, --model SPEC   only this model: any spec `stalelab run` takes (logreg,\n"
	"                     mlp:784-64-10, lenet5, resnet20, gpt:L4-H4-E128-T64 with\n"
	"                     -d text:webster; default: mlp:784-256-128-10 and lenet5,\n"
	"                     with --device also gpt:L4-H4-E128-T64 and\n"
	"                     gpt:L6-H6-E384-T256 on text:webster)\n"
	"  -t, --threads N    compute threads (default: all cores)\n"
	"  -S, --seconds X    measuring time per figure (default 4)\n"
	"  -d, --dataset SPEC data (default fashion-mnist)\n"
	"  -L, --layers       also time each layer's forward and backward pass (with\n"
	"                     --device: on the device, at each batch)\n"
	"  -A, --async        also: asgd throughput with 1, 2, 4 workers (wall\n"
	"                     clock, no delay) and the parameter server's apply\n"
	"                     rate alone\n"
	"  -P, --profile      only the parameter server's time per update on this\n"
	"                     machine, as the run object's \"server_ms\" for the\n"
	"                     virtual clock (docs/rules.md, \"Communication\")\n"
	"  -D, --device NAME  a device backend instead (cuda): samples/s per model\n"
	"                     and batch next to the cpu backend's in the same run,\n"
	"                     the fraction of the device's FP32 peak, the server's\n"
	"                     time per update, asgd with 1, 8 and 64 workers (a\n"
	"                     language model: tokens/s; the cpu's figure at the\n"
	"                     first batch only)\n"
	"  -b, --batch LIST   the batch: on the cpu the first of the list (default\n"
	"                     64); with --device each (default 64,256)\n"
	"  -h, --help         this text\n";

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Train for about `seconds`, in windows of ~0.25 s; median samples/s. */
double
bench_measure(model *m, const dataset *tr, double seconds)
{
	enum { WIN = 64 };
	double sps[WIN];
	int nw = 0, B = m->batch_cap;
	uint32_t *perm = malloc(sizeof(uint32_t) * tr->n);
	rng r;
	rng_seed(&r, 1, 1);
	for (uint32_t i = 0; i < tr->n; i++)
		perm[i] = i;
	rng_shuffle(&r, perm, tr->n);
	backend *be = m->be;
	uint32_t pos = 0;
	/* warm-up: buffers, caches, the team's first wake-up; 20 steps, or
	 * two where those take a quarter of the time (a large model on the
	 * cpu) */
	double t_warm = sl_now() + seconds / 4;
	for (int i = 0; i < 20 && (i < 2 || sl_now() < t_warm); i++) {
		model_load_batch(m, tr->x, tr->y, perm, B);
		model_step(m, NULL, B, 0);
	}
	double t_end = sl_now() + seconds;
	while (nw < WIN && (nw < 3 || sl_now() < t_end)) {
		double t0 = sl_now(), t;
		long samples = 0;
		do {
			if (pos + (uint32_t)B > tr->n)
				pos = 0;
			model_load_batch(m, tr->x, tr->y, perm + pos, B);
			model_step(m, NULL, B, 0);
			be->ops->sgd(be, m->params, m->grads, NULL, m->n_params, 0.05f,
				     0, 0);
			pos += (uint32_t)B;
			samples += B;
		} while ((t = sl_now()) - t0 < 0.25);
		sps[nw++] = samples / (t - t0);
	}
	free(perm);
	qsort(sps, (size_t)nw, sizeof(double), cmp_double);
	return sps[nw / 2];
}

double
bench_ps_rate(model *m, const char *device, double seconds, int quiet)
{
	backend *be;
	double ups = 0;
	char err[SL_ERR_LEN];
	if (backend_open(device, 1, &be, err) < 0)
		return 0;
	node_info info[MODEL_MAX_NODES];
	ps_layer layers[MODEL_MAX_NODES];
	int nl = model_node_info(m, info, MODEL_MAX_NODES), np = 0;
	for (int i = 0; i < nl; i++)
		if (info[i].n_params)
			layers[np++] = ps_layer_make(info[i].p_off, info[i].n_params,
						      info[i].n_decay, info[i].n_weights,
						      info[i].w_cols);
	float *w = calloc(m->n_params, sizeof(float));
	/* a gradient in the server's memory, as a worker's on its device */
	float *g = be->ops->alloc(be, sizeof(float) * m->n_params);
	ps *p = NULL;
	if (w && g && ps_new(be, m->n_params, w, layers, np, 4, &p) == 0) {
		rule_params rp = {0};
		ps_set_rule(p, rule_find("asgd"), &rp);
		ps_set_opt(p, 1e-6f, 0, 0);
		ps_grad pg = {.worker = 0, .g = g, .batch = 64};
		long n = 0;
		double t0 = sl_now(), t;
		int rc = 0;
		while (!rc && (t = sl_now()) - t0 < seconds / 4) {
			for (int k = 0; k < 100 && !rc; k++)
				rc = ps_push(p, &pg, 1, NULL);
			n += 100;
		}
		if (rc < 0) {
			fprintf(stderr, "bench: ps apply: %s\n", sl_strerror(rc));
			n = 0;
		}
		ups = n / (t - t0);
		if (!quiet) {
			printf("  ps apply (asgd, %zu floats): %.0f updates/s (%.1f GB/s of weights)\n",
			       m->n_params, ups, ups * m->n_params * 4 * 3 / 1e9);
			printf("{\"bench\":\"ps_apply\",\"model\":\"%s\",\"updates_per_s\":%.1f}\n",
			       m->spec, ups);
		}
	}
	ps_free(p);
	free(w);
	be->ops->free(be, g);
	backend_free(be);
	return ups;
}

void
bench_async_rate(const dataset_pair *d, const char *spec, const char *device, int batch,
		 int nw, double seconds)
{
	run_config c;
	config_defaults(&c);
	snprintf(c.model, sizeof(c.model), "%s", spec);
	snprintf(c.device, sizeof(c.device), "%s", device);
	c.batch = batch;
	c.workers = nw;
	c.eval_every = 0;
	c.stop_seconds = seconds;
	run *r;
	char err[SL_ERR_LEN];
	if (run_new(&c, d, NULL, 0, NULL, &r, err) < 0) {
		fprintf(stderr, "stalelab bench: %s\n", err);
		return;
	}
	run_exec(r);
	run_snapshot *s = run_snapshot_get(r);
	/* over the whole run, and over its last seconds of training (the
	 * rate window as it stopped, before the final evaluation): the
	 * steady rate, without the workers' start */
	printf("  asgd %d worker%s: %9.0f samples/s  %8.0f updates/s  staleness %.2f  "
	       "(the last %.0f s: %.0f samples/s)%s\n",
	       nw, nw == 1 ? " " : "s", s->samples_per_s, s->updates_per_s,
	       stale_mean(&s->stale), s->rate_window_s, s->samples_per_s_end,
	       s->v < 2 * (uint64_t)nw ? "  (under 2 updates per worker in the window: the "
					   "workers' start dominates; raise -S)" : "");
	printf("{\"bench\":\"async\",\"model\":\"%s\",\"device\":\"%s\",\"batch\":%d,"
	       "\"rule\":\"asgd\",\"workers\":%d,\"samples_per_s\":%.1f,"
	       "\"samples_per_s_steady\":%.1f,\"updates_per_s\":%.1f,"
	       "\"staleness_mean\":%.3f}\n",
	       spec, s->device, batch, nw, s->samples_per_s, s->samples_per_s_end,
	       s->updates_per_s, stale_mean(&s->stale));
	fflush(stdout);
	run_snapshot_put(s);
	run_free(r);
}

/* Per-layer time of one step, from a profiled run of ~seconds/2 (each
 * node's time with the device drained after it); with sgemm_refs (the cpu
 * backend) also each convolution pass per core against sgemm. */
void
bench_layers(model *m, double seconds, int team_threads, int sgemm_refs)
{
	memset(m->prof_fwd, 0, sizeof(m->prof_fwd));
	memset(m->prof_bwd, 0, sizeof(m->prof_bwd));
	m->prof_loss = 0;
	m->profile = 1;
	int B = m->batch_cap;
	long steps = 0;
	double t_end = sl_now() + seconds / 2;
	while (sl_now() < t_end) {
		model_step(m, NULL, B, 0);
		steps++;
	}
	m->profile = 0;
	double total = m->prof_loss;
	for (int i = 0; i < m->n_nodes; i++)
		total += m->prof_fwd[i] + m->prof_bwd[i];
	printf("  %-3s %-8s %11s %11s %7s  (us per batch of %d)\n", "#", "layer",
	       "forward", "backward", "share", B);
	for (int i = 0; i < m->n_nodes; i++) {
		const node *l = &m->nodes[i];
		printf("  %-3d %-8s %11.1f %11.1f %6.1f%%\n", i, l->op->name,
		       m->prof_fwd[i] / steps * 1e6, m->prof_bwd[i] / steps * 1e6,
		       100 * (m->prof_fwd[i] + m->prof_bwd[i]) / total);
	}
	printf("  %-3s %-8s %11.1f %11s %6.1f%%\n", "", "loss",
	       m->prof_loss / steps * 1e6, "", 100 * m->prof_loss / total);
	/* each convolution, projection and attention pass per core against
	 * sgemm on a 1024 square, one thread: how close the kernels come to
	 * the machine's GEMM (a convolution's FLOPs counted as the direct
	 * sum's, whatever the algorithm) */
	double sq = 0;
	int threads = team_threads;
	for (int i = 0; i < m->n_nodes; i++) {
		const node *l = &m->nodes[i];
		if (!sgemm_refs || (l->op != op_find("conv2d") && l->op != op_find("linear") &&
				    l->op != op_find("attention") && l->op != op_find("lmhead")))
			continue;
		if (sq == 0) {
			sq = backend_cpu_sgemm_gflops(1024, 1024, 1024, 1, seconds / 8);
			printf("  (a convolution's FLOPs as the direct sum counts them: a 3x3 layer "
			       "run by Winograd does fewer, and can pass sgemm's rate)\n");
		}
		if (!(sq > 0))
			break;
		double ff = l->flops_fwd * B, fb = (l->flops_bwd_w + (i ? l->flops_bwd_x : 0)) * B;
		double gf = ff / (m->prof_fwd[i] / steps) * 1e-9 / threads;
		double gb = fb / (m->prof_bwd[i] / steps) * 1e-9 / threads;
		printf("  %-3d %-8s per core: forward %6.1f GFLOP/s (%.2fx sgemm 1024), backward "
		       "%6.1f (%.2fx); sgemm 1024, 1 thread: %.1f\n", i, l->op->name, gf, gf / sq,
		       gb, gb / sq, sq);
		printf("{\"bench\":\"%s\",\"model\":\"%s\",\"layer\":%d,\"op\":\"%s\","
		       "\"fwd_gflops_per_core\":%.2f,\"bwd_gflops_per_core\":%.2f,"
		       "\"sgemm1024_gflops\":%.2f}\n",
		       l->op == op_find("conv2d") ? "conv_pass" : "op_pass", m->spec, i,
		       l->op->name, gf, gb, sq);
	}
	/* the divergence check every step makes: one pass over the gradient */
	backend *be = m->be;
	long n = 0, bad = 0;
	double t0 = sl_now(), t;
	while ((t = sl_now()) - t0 < seconds / 8 || n < 100) {
		bad += !be->ops->all_finite(be, m->grads, m->n_params);
		n++;
	}
	double us = (t - t0) / n * 1e6, step_us = total / steps * 1e6;
	printf("  %-3s %-8s %11.1f %11s %6.1f%%  (all_finite over %zu floats%s)\n", "",
	       "check", us, "", 100 * us / step_us, m->n_params, bad ? ", NOT FINITE" : "");
	printf("{\"bench\":\"finite_check\",\"model\":\"%s\",\"us\":%.2f,"
	       "\"step_us\":%.1f,\"share\":%.5f}\n", m->spec, us, step_us, us / step_us);
}

/* The model's main GEMM shape (m x n x k) at its batch B, for the
 * OpenBLAS reference: LeNet-5's first convolution as im2col does it, a
 * language model's largest projection (B T rows), else the dense layer
 * with the most FLOPs. */
static void
main_gemm(const model *m, int mnk[3])
{
	node_info info[MODEL_MAX_NODES];
	int nl = model_node_info(m, info, MODEL_MAX_NODES), B = m->batch_cap;
	mnk[0] = B;
	mnk[1] = 10;
	mnk[2] = m->in_dim;
	if (!strcmp(m->spec, "lenet5")) {
		mnk[0] = 16;
		mnk[1] = B * 100;
		mnk[2] = 150;
		return;
	}
	double best = -1;
	for (int i = 0; i < m->n_nodes; i++) {
		const node *l = &m->nodes[i];
		if (l->op != op_find("linear") || l->flops_fwd <= best || !l->units)
			continue;
		best = l->flops_fwd;
		mnk[0] = B * (int)(l->act_floats / (size_t)l->units);
		mnk[1] = l->units;
		mnk[2] = (int)((l->n_params - (size_t)l->units) / (size_t)l->units);
	}
	if (best > 0)
		return;
	for (int i = 0; i < nl; i++) {
		const node_info *l = &info[i];
		if (strcmp(l->name, "dense") || !l->act_floats || l->flops_fwd <= best)
			continue;
		best = l->flops_fwd;
		mnk[1] = (int)l->act_floats;
		mnk[2] = (int)((l->n_params - l->act_floats) / l->act_floats);
	}
}

/* The GEMM ceiling of a model of dense layers at batch B: OpenBLAS's sgemm
 * timed on each GEMM its step does (forward B x out x in, the weight
 * gradient out x in x B, the input gradient B x in x out but for the first
 * layer), in samples/s; 0 for a model with other layers. */
static double
gemm_ceiling(const model *m, int B, int threads, double secs)
{
	node_info info[MODEL_MAX_NODES];
	int nl = model_node_info(m, info, MODEL_MAX_NODES);
	double t = 0;
	int first = 1;
	for (int i = 0; i < nl; i++) {
		const node_info *l = &info[i];
		if (l->param_index < 0)
			continue; /* activations: no GEMM */
		if (strcmp(l->name, "dense") || !l->act_floats)
			return 0;
		int out = (int)l->act_floats, in = (int)((l->n_params - l->act_floats) / l->act_floats);
		int shapes[3][3] = {{B, out, in}, {out, in, B}, {B, in, out}};
		for (int s = 0; s < (first ? 2 : 3); s++) {
			double gf = backend_cpu_sgemm_gflops(shapes[s][0], shapes[s][1], shapes[s][2],
							     threads, secs);
			if (gf <= 0)
				return 0;
			t += 2.0 * shapes[s][0] * shapes[s][1] * shapes[s][2] / (gf * 1e9);
		}
		first = 0;
	}
	return t > 0 ? B / t : 0;
}

const dataset_pair *
bench_data_for(const char *spec, const char *dspec, const dataset_pair *d, dataset_pair *own,
	       char *err)
{
	const int ctx = model_spec_context(spec);
	memset(own, 0, sizeof(*own));
	if (ctx <= 0 || (d->train.ylen == ctx && d->train.dim == ctx))
		return d;
	if (model_data_load(spec, ds_spec_is_text(dspec) ? dspec : BENCH_TEXT, 1, own, err) < 0)
		return NULL;
	return own;
}

/* Every model of the list built once on its data's shapes, before
 * anything is printed: a spec the engine refuses is a usage error, and
 * usage errors come before any figure. 0, or a negative SL_E* code with
 * err saying why (-SL_EINVAL: the spec or the data's shapes). */
static int
check_models(const char *const *models, int n_models, const dataset_pair *d, const char *dspec,
	     char *err)
{
	backend *be;
	if (backend_cpu_new(1, &be) < 0)
		return sl_fail(err, SL_ENOMEM, "cannot start a compute thread");
	int rc = 0;
	for (int i = 0; i < n_models && rc == 0; i++) {
		model *m;
		dataset_pair own;
		const dataset_pair *md = bench_data_for(models[i], dspec, d, &own, err);
		if (!md) {
			rc = -SL_EINVAL;
			break;
		}
		/* batch 1: the shapes are checked, and a large model's buffers
		 * at a real batch would take gigabytes of this machine */
		rc = model_new(models[i], md->train.c, md->train.h, md->train.w, md->train.classes,
			       1, 1, be, &m, err);
		if (rc == 0)
			model_free(m);
		ds_pair_free(&own);
	}
	backend_free(be);
	return rc;
}

/* the command line */
typedef struct bench_opts {
	const char *only, *dspec, *device; /* --model, --dataset, --device */
	int batches[8], n_batches;         /* --batch (--device's) */
	int threads, layers, async, profile;
	double seconds;
} bench_opts;

#define BENCH_GO (-1)

/* --batch's list of sizes into o; 0, or -1 with the message printed */
static int
parse_batches(const char *arg, bench_opts *o)
{
	unsigned long long u;
	char *save = NULL, buf[128];
	o->n_batches = 0;
	snprintf(buf, sizeof(buf), "%s", arg);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (o->n_batches == 8 || cli_u64(t, &u) < 0 || u < 1 || u > 4096) {
			fprintf(stderr, "stalelab bench: --batch: expected up to 8 "
				"sizes in 1..4096, comma-separated, got \"%s\"\n", arg);
			return -1;
		}
		o->batches[o->n_batches++] = (int)u;
	}
	if (!o->n_batches) {
		fprintf(stderr, "stalelab bench: --batch: expected a size\n");
		return -1;
	}
	return 0;
}

/* argv into o: BENCH_GO, or the exit code (0 after --help, 2 bad usage,
 * the message printed) */
static int
bench_parse(int argc, char **argv, bench_opts *o)
{
	static const struct option opts[] = {
		{"model", required_argument, NULL, 'm'},
		{"threads", required_argument, NULL, 't'},
		{"seconds", required_argument, NULL, 'S'},
		{"dataset", required_argument, NULL, 'd'},
		{"layers", no_argument, NULL, 'L'},
		{"async", no_argument, NULL, 'A'},
		{"profile", no_argument, NULL, 'P'},
		{"device", required_argument, NULL, 'D'},
		{"batch", required_argument, NULL, 'b'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	*o = (bench_opts){.dspec = "fashion-mnist", .batches = {64, 256}, .n_batches = 2,
			  .threads = cli_ncpu(), .seconds = 4};
	unsigned long long u;
	char err[SL_ERR_LEN];
	int opt;
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":m:t:S:d:LAPD:b:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'm': o->only = optarg; break;
		case 'd': o->dspec = optarg; break;
		case 't':
			if (cli_opt_u64("threads", optarg, 1, 64, &u, err) < 0)
				return cli_usage_error("bench", err);
			o->threads = (int)u;
			break;
		case 'S':
			if (cli_opt_double("seconds", optarg, (cli_range){.lo = 0, .lo_open = 1, .hi = 600},
					   &o->seconds, err) < 0)
				return cli_usage_error("bench", err);
			break;
		case 'L': o->layers = 1; break;
		case 'A': o->async = 1; break;
		case 'P': o->profile = 1; break;
		case 'D': o->device = optarg; break;
		case 'b':
			if (parse_batches(optarg, o) < 0)
				return 2;
			break;
		case 'h': fputs(bench_usage, stdout); return 0;
		default: return cli_bad_option("bench", opt, argv, opts);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "stalelab bench: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	return BENCH_GO;
}

int
cmd_bench(int argc, char **argv)
{
	bench_opts o;
	int code = bench_parse(argc, argv, &o);
	if (code != BENCH_GO)
		return code;
	const char *only = o.only, *dspec = o.dspec, *device = o.device;
	const int threads = o.threads, layers = o.layers, async = o.async, profile = o.profile;
	const double seconds = o.seconds;
	char err[SL_ERR_LEN];
	dataset_pair d;
	if (model_data_load(only ? only : "", dspec, 1, &d, err) < 0) {
		fprintf(stderr, "stalelab bench: %s\n", err);
		return 2;
	}
	/* the default pair (on a device, and two language models on text),
	 * or the one model asked for (any spec the engine accepts; an unknown
	 * one is a usage error) */
	const int on_device = device && strcmp(device, "cpu");
	const char *models[4] = {"mlp:784-256-128-10", "lenet5", "gpt:L4-H4-E128-T64",
				 "gpt:L6-H6-E384-T256"};
	int n_models = on_device ? 4 : 2;
	if (only) {
		models[0] = only;
		n_models = 1;
	}
	code = check_models(models, n_models, &d, dspec, err);
	if (code < 0) {
		fprintf(stderr, "stalelab bench: %s\n", err);
		ds_pair_free(&d);
		return code == -SL_EINVAL ? 2 : 1;
	}
	if (on_device) {
		code = bench_device(device, &d, dspec, models, n_models, o.batches, o.n_batches,
				    threads, seconds, layers);
		ds_pair_free(&d);
		return code;
	}
	{ /* which kernels ran, and why (engine/nn/blas_pick.h) */
		const char *kernel, *config, *isa, *lib;
		backend_cpu_blas(&kernel, &config, &isa);
		const char *why = backend_cpu_blas_why(&lib);
		printf("OpenBLAS kernel %s (%s%s%s%s), our kernels' clone %s\n", kernel ? kernel : "?",
		       !strcmp(why, "picked") ? "picked by stalelab for this CPU" :
		       !strcmp(why, "environment") ? "set by OPENBLAS_CORETYPE" :
		       !strcmp(why, "fallback") ? "the library's own: ours failed its check" :
		       "the library's own choice", *lib ? "; the library chose " : "", lib,
		       "", isa);
		printf("{\"bench\":\"blas\",\"kernel\":\"%s\",\"why\":\"%s\",\"library\":\"%s\","
		       "\"isa\":\"%s\"}\n", kernel ? kernel : "", why, lib, isa);
	}
	for (int i = 0; i < n_models; i++) {
		backend *be;
		model *m;
		if (backend_cpu_new(threads, &be) < 0) {
			fprintf(stderr, "stalelab bench: cannot start %d compute threads\n", threads);
			code = 1;
			break;
		}
		const int B = o.batches[0];
		if (model_new(models[i], d.train.c, d.train.h, d.train.w,
			      d.train.classes, B, 1, be, &m, err) < 0) {
			fprintf(stderr, "stalelab bench: %s\n", err);
			backend_free(be);
			code = 2;
			break;
		}
		if (profile) {
			double ups = bench_ps_rate(m, "cpu", seconds, 1);
			if (ups > 0) {
				printf("%-20s the server applies an update in %.4f ms here: "
				       "\"server_ms\": %.4f\n", models[i], 1e3 / ups, 1e3 / ups);
				printf("{\"bench\":\"profile\",\"model\":\"%s\",\"server_ms\":%.6f,"
				       "\"updates_per_s\":%.1f}\n", m->spec, 1e3 / ups, ups);
			} else {
				code = 1;
			}
			model_free(m);
			backend_free(be);
			continue;
		}
		int mnk[3];
		main_gemm(m, mnk);
		double sps = bench_measure(m, &d.train, seconds);
		double gf = sps * model_step_flops(m, 0) * 1e-9;
		double ref = backend_cpu_sgemm_gflops(mnk[0], mnk[1], mnk[2], threads,
						      seconds / 2);
		printf("%-20s %2d thr  %9.0f samples/s  %6.1f GFLOP/s  "
		       "(OpenBLAS sgemm %dx%dx%d: %.1f GFLOP/s, ratio %.2f)\n",
		       models[i], threads, sps, gf, mnk[0], mnk[1], mnk[2], ref,
		       ref > 0 ? gf / ref : 0);
		if (m->targets > 1) /* a language model: a sample is T tokens */
			printf("%-20s batch %d x %d tokens: %.0f tokens/s\n", "", B, m->targets,
			       sps * m->targets);
		double ceil_sps = gemm_ceiling(m, B, threads, seconds / 8 > 0.1 ? seconds / 8 : 0.1);
		if (ceil_sps > 0)
			printf("%-20s GEMM ceiling on its own shapes (every GEMM of a step, as sgemm): "
			       "%.0f samples/s; the step reaches %.2f of it\n", "", ceil_sps,
			       sps / ceil_sps);
		printf("{\"bench\":\"train\",\"model\":\"%s\",\"threads\":%d,\"batch\":%d,"
		       "\"samples_per_s\":%.1f,\"tokens_per_s\":%.1f,\"gflops\":%.2f,"
		       "\"sgemm_gflops\":%.2f,\"step_mflop_per_sample\":%.4f,"
		       "\"gemm_ceiling_samples_per_s\":%.1f}\n",
		       m->spec, threads, B, sps, sps * m->targets, gf, ref,
		       model_step_flops(m, 0) * 1e-6, ceil_sps);
		if (layers)
			bench_layers(m, seconds, threads, 1);
		if (async) {
			bench_ps_rate(m, "cpu", seconds, 0);
			for (int nw = 1; nw <= 4; nw *= 2)
				bench_async_rate(&d, models[i], "cpu", B, nw, seconds);
		}
		fflush(stdout);
		model_free(m);
		backend_free(be);
	}
	ds_pair_free(&d);
	return code;
}
