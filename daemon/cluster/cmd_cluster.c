/* cmd_cluster.c - `stalelab cluster`: the cluster simulator from the
 * command line (engine/cluster/, docs/cluster.md). `cluster --trace F
 * --profiles P --gpus N --policy X|all` runs a trace and prints each
 * policy's summary, with its gain over fifo; --out DIR also writes
 * summary.csv, jobs_POLICY.csv and timeline_POLICY.csv, the figures, and
 * cluster.json (the inputs and their origin: what `stalelab serve
 * --clusters` shows in the dashboard). `cluster synth` writes a seeded
 * synthetic trace. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "cli.h"
#include "cmd_cluster.h"
#include "cluster.h"
#include "dataset.h"
#include "sl.h"
#include "trace.h"

/* an option's range: a real above 0 */
static const cli_range positive = {.lo = 0, .lo_open = 1, .hi = INFINITY};

static const char cluster_usage[] =
	"Usage: stalelab cluster --trace JOBS.csv --profiles PROFILES.csv --gpus N [OPTIONS]\n"
	"       stalelab cluster synth --profiles PROFILES.csv --jobs N --rate R --gpus N\n"
	"                              [--seed S] [--batch B] > JOBS.csv\n"
	"       stalelab cluster profile --model SPEC [OPTIONS] > PROFILES.csv\n"
	"                              (a model's schedules measured by the engine;\n"
	"                              cluster profile --help)\n"
	"\n"
	"Simulate a GPU cluster running a trace of training jobs under a scheduling\n"
	"policy, partial backpropagation (JigSaw-style) among the choices: exact\n"
	"events, the same result for the same inputs. Prints each policy's average,\n"
	"median and p95 job completion time, makespan, GPU allocation and compute\n"
	"utilisation, useful samples per GPU-hour, preemptions, and its gain over\n"
	"fifo (fifo's makespan over its own). docs/cluster.md has the model, the\n"
	"files' columns and the policies.\n"
	"\n"
	"  -t, --trace FILE       the jobs: job_id,arrival_s,num_gpus,model,\n"
	"                         [batch_size,]iters_full (or duration_s)\n"
	"  -p, --profiles FILE    each model's schedules: model,schedule,compute_s,\n"
	"                         comm_s,mem_gb,iter_mult (a \"full\" row each)\n"
	"  -g, --gpus N           the cluster's GPUs\n"
	"  -P, --policy NAME      fifo | srtf | las | gandiva | jigsaw | all\n"
	"                         (default all)\n"
	"  -m, --gpu-mem-gb X     one GPU's memory (default 80)\n"
	"      --spb best|off     best: every policy runs each job under its best\n"
	"                         schedule alone (jigsaw always chooses; default off)\n"
	"      --restart-s X      a preempted job's restart time (default 0)\n"
	"      --las-thresholds L las's queue thresholds, GPU-seconds, rising,\n"
	"                         comma-separated (default 3600,57600)\n"
	"      --verify           las, srtf: check every decision against a full\n"
	"                         ranking of every job (slow; a test of the\n"
	"                         simulator)\n"
	"  -o, --out DIR          also write summary.csv, jobs_POLICY.csv and\n"
	"                         timeline_POLICY.csv there, cluster.json (the\n"
	"                         inputs and their notes), and (gnuplot) the\n"
	"                         figures gpus.svg and jct.svg (and .png); made\n"
	"                         with its parents; `stalelab serve --clusters`\n"
	"                         shows it in the dashboard\n"
	"  -h, --help             this text\n"
	"\n"
	"synth: N jobs with Poisson arrivals at R jobs per hour, Gavel's durations\n"
	"(80%: 60 x 10^U(1.5,3) s, 20%: 60 x 10^U(3,4) s) and GPU counts (1, 2, 4, 8\n"
	"at 70, 10, 15, 5%, at most --gpus), each of a model of the profiles drawn\n"
	"uniformly, its iterations its duration at full backprop; jobs.csv on stdout.\n"
	"\n"
	"A public trace: tools/philly_jobs.py turns Philly's job log into jobs.csv\n"
	"(docs/cluster.md, \"The Philly trace\").\n";

/* a whole file, or NULL with err naming it */
static char *
slurp(const char *path, size_t *len, char *err)
{
	uint8_t *b = NULL;
	if (ds_read_file(path, (size_t)1 << 30, &b, len, err) < 0)
		return NULL;
	return (char *)b;
}

#define NOTES_MAX 64 /* comment lines kept from an input file */

/* the "# ..." lines of a file (its origin, as `cluster profile` and
 * `cluster synth` write it), without the "# " */
static json_t *
comments_of(const char *t, size_t len)
{
	json_t *a = json_array();
	for (size_t i = 0; i < len && json_array_size(a) < NOTES_MAX;) {
		size_t e = i;
		while (e < len && t[e] != '\n')
			e++;
		if (t[i] == '#') {
			size_t b = i + 1 + (i + 1 < e && t[i + 1] == ' ');
			size_t n = e - b > 0 && t[e - 1] == '\r' ? e - b - 1 : e - b;
			json_array_append_new(a, json_stringn(t + b, n < 500 ? n : 500));
		}
		i = e + 1;
	}
	return a;
}

/* the profiles in path; their comment lines into *notes when asked */
static int
load_profiles(const char *path, cl_model **ms, int *n, json_t **notes, char *err)
{
	size_t len;
	char *t = slurp(path, &len, err);
	if (!t)
		return -1;
	int rc = cl_profiles_parse(t, len, path, ms, n, err);
	if (notes)
		*notes = comments_of(t, len);
	free(t);
	return rc;
}

typedef struct tl {
	FILE *f;
} tl;

static void
on_tick(void *ud, double t, int free_gpus, int running, int queued)
{
	tl *x = ud;
	if (x->f)
		fprintf(x->f, "%.6f,%d,%d,%d\n", t, free_gpus, running, queued);
}

static FILE *
open_out(const char *dir, const char *name, const char *policy, char *path, size_t cap)
{
	snprintf(path, cap, "%s/%s%s%s.csv", dir, name, policy ? "_" : "", policy ? policy : "");
	return fopen(path, "w");
}

static int
synth(int argc, char **argv)
{
	static const struct option opts[] = {
		{"profiles", required_argument, NULL, 'p'}, {"jobs", required_argument, NULL, 'n'},
		{"rate", required_argument, NULL, 'r'},     {"gpus", required_argument, NULL, 'g'},
		{"seed", required_argument, NULL, 's'},     {"batch", required_argument, NULL, 'b'},
		{"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
	};
	const char *prof = NULL;
	cl_synth p = {.n = 0, .jobs_per_hour = 0, .max_gpus = 0, .seed = 1};
	unsigned long long u;
	char err[SL_ERR_LEN];
	int opt, rc = 0;
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":p:n:r:g:s:b:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'p': prof = optarg; break;
		case 'n':
			if ((rc = cli_opt_u64("jobs", optarg, 1, 10000000, &u, err)) == 0)
				p.n = (long)u;
			break;
		case 'r':
			rc = cli_opt_double("rate", optarg,
					    (cli_range){.lo = 0, .lo_open = 1, .hi = INFINITY,
							.what = "jobs per hour"},
					    &p.jobs_per_hour, err);
			break;
		case 'g':
			if ((rc = cli_opt_u64("gpus", optarg, 1, 1000000, &u, err)) == 0)
				p.max_gpus = (int)u;
			break;
		case 's': rc = cli_opt_u64("seed", optarg, 0, CLI_NO_MAX, &p.seed, err); break;
		case 'b': rc = cli_opt_double("batch", optarg, positive, &p.batch, err); break;
		case 'h': fputs(cluster_usage, stdout); return 0;
		default: return cli_bad_option("cluster synth", opt, argv, opts);
		}
		if (rc < 0)
			return cli_usage_error("cluster synth", err);
	}
	if (!prof || !p.n || !p.jobs_per_hour || !p.max_gpus) {
		fprintf(stderr, "stalelab cluster synth: needs --profiles, --jobs, --rate and --gpus\n");
		return 2;
	}
	cl_model *ms = NULL;
	int nm = 0;
	cl_job *js = NULL;
	if (load_profiles(prof, &ms, &nm, NULL, err) < 0 || cl_jobs_synth(&p, ms, nm, &js, err) < 0) {
		fprintf(stderr, "stalelab cluster synth: %s\n", err);
		free(ms);
		return 2;
	}
	printf("# stalelab cluster synth --jobs %ld --rate %g --gpus %d --seed %llu (profiles %s)\n",
	       p.n, p.jobs_per_hour, p.max_gpus, p.seed, prof);
	rc = cl_jobs_write(stdout, js, (size_t)p.n, ms);
	free(js);
	free(ms);
	return rc < 0 ? 1 : 0;
}

static int
parse_thresholds(const char *s, cl_config *c)
{
	char buf[256], *save = NULL;
	snprintf(buf, sizeof(buf), "%s", s);
	c->n_thresholds = 0;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		double d;
		if (c->n_thresholds == CL_MAX_THRESHOLDS || cli_double(t, &d) < 0 || !(d > 0) ||
		    (c->n_thresholds && d <= c->thresholds[c->n_thresholds - 1]))
			return -1;
		c->thresholds[c->n_thresholds++] = d;
	}
	return c->n_thresholds ? 0 : -1;
}

/* one policy over a copy of the trace; its summary line, files */
static int
simulate(const cl_config *c, const cl_model *ms, int nm, const cl_job *trace, size_t n,
	 const char *out, cl_summary *sum, char *err)
{
	cl_job *js = malloc(sizeof(cl_job) * (n ? n : 1));
	if (!js)
		return sl_fail(err, SL_ENOMEM, "out of memory for the trace");
	memcpy(js, trace, sizeof(cl_job) * n);
	char path[4200];
	tl t = {NULL};
	const char *pn = cl_policy_name(c->policy);
	if (out && !(t.f = open_out(out, "timeline", pn, path, sizeof(path)))) {
		free(js);
		return sl_fail(err, SL_EIO, "cannot write %s", path);
	}
	if (t.f)
		fprintf(t.f, "t,free_gpus,running,queued\n");
	int rc = cl_simulate(c, ms, nm, js, n, sum, on_tick, &t, err);
	if (t.f)
		fclose(t.f);
	if (rc == 0 && out) {
		FILE *f = open_out(out, "jobs", pn, path, sizeof(path));
		if (!f) {
			rc = sl_fail(err, SL_EIO, "cannot write %s", path);
		} else {
			fprintf(f, "job_id,arrival_s,num_gpus,model,first_start_s,finish_s,jct_s,"
				   "queue_delay_s,gpu_s,compute_gpu_s,preemptions,schedule\n");
			for (size_t i = 0; i < n; i++) {
				const cl_job *j = &js[i];
				fprintf(f, "%ld,%.6f,%d,%s,%.6f,%.6f,%.6f,%.6f,%.3f,%.3f,%d,%s\n", j->id,
					j->arrival, j->gpus, ms[j->model].name, j->first_start, j->finish,
					j->finish - j->arrival, j->first_start - j->arrival, j->alloc_gpu_s,
					j->compute_gpu_s, j->preemptions,
					ms[j->model].sched[j->last_sched].name);
			}
			if (fclose(f) != 0)
				rc = sl_fail(err, SL_EIO, "cannot write %s", path);
		}
	}
	free(js);
	return rc;
}

/* a file's name, without its directories, fit for a gnuplot string in
 * double quotes */
static void
base_name(const char *path, char *out, size_t cap)
{
	const char *b = strrchr(path, '/');
	snprintf(out, cap, "%s", b ? b + 1 : path);
	for (char *p = out; *p; p++)
		if (*p == '"' || *p == '\\')
			*p = '\'';
}

/* DIR/cluster.gp: the GPUs in use over time, a panel per policy simulated
 * (one x axis), and the JCTs' distribution, a line per policy in a dash
 * of its own; each policy in its colour of cli_gnuplot_palette() in both;
 * as SVG and PNG (gnuplot) */
static int
figures(const char *dir, const int *ran, const double *makespan, int gpus, size_t n,
	const char *trace, char *err)
{
	char path[4200], name[256], what[400];
	snprintf(path, sizeof(path), "%s/cluster.gp", dir);
	FILE *f = fopen(path, "w");
	if (!f)
		return sl_fail(err, SL_EIO, "cannot write %s", path);
	base_name(trace, name, sizeof(name));
	snprintf(what, sizeof(what), "%zu job%s on %d GPU%s (%s)", n, n == 1 ? "" : "s", gpus,
		 gpus == 1 ? "" : "s", name);
	int np = 0;
	double hours = 0;
	for (int p = 0; p < CL_N_POLICIES; p++)
		if (ran[p]) {
			np++;
			hours = makespan[p] / 3600 > hours ? makespan[p] / 3600 : hours;
		}
	fprintf(f, "# stalelab cluster's figures from the CSVs beside this file; run: gnuplot cluster.gp\n"
		   "%s", cli_gnuplot_palette());
	static const char *const fmt[2][3] = {{"svg", "dynamic font 'sans,11'", "svg"},
					       {"pngcairo", "font 'sans,10'", "png"}};
	int height = 140 + 120 * np < 400 ? 400 : 140 + 120 * np;
	for (int t = 0; t < 2; t++) {
		fprintf(f, "set terminal %s size 900,%d noenhanced %s\nset output 'gpus.%s'\nreset\n"
			   "set datafile separator ','\n", fmt[t][0], height, fmt[t][1], fmt[t][2]);
		/* the margins: 60 pixels under the panels, 75 over them */
		fprintf(f, "set multiplot layout %d,1 title \"GPUs in use over time, a panel per policy"
			   "\\n%s\" margins 0.08,0.72,%.3f,%.3f spacing 0,0.02\n", np, what,
			60.0 / height, 1 - 75.0 / height);
		fprintf(f, "set grid\nset key outside right top\nset ylabel 'GPUs'\n"
			   "set yrange [0:%g]\nset ytics 0,%d,%d\n", gpus * 1.15,
			   gpus >= 2 ? gpus / 2 : 1, gpus);
		if (hours > 0)
			fprintf(f, "set xrange [0:%g]\n", hours * 1.02);
		fprintf(f, "set format x ''\n");
		for (int p = 0, k = 0; p < CL_N_POLICIES; p++) {
			if (!ran[p])
				continue;
			if (++k == np)
				fprintf(f, "set format x '%%g'\nset xlabel 'hours since the start'\n");
			const char *pn = cl_policy_name(p);
			fprintf(f, "plot 'timeline_%s.csv' skip 1 using ($1/3600):(%d-$2) with steps "
				   "lt %d lw 1.5 title '%s, makespan %.0f h', \\\n"
				   "     %d with lines lc rgb '#888888' dt 2 lw 1 title 'all %d GPUs'\n",
				pn, gpus, p + 1, pn, makespan[p] / 3600, gpus, gpus);
		}
		fprintf(f, "unset multiplot\n");
		fprintf(f, "set terminal %s size 900,520 noenhanced %s\nset output 'jct.%s'\nreset\n"
			   "set datafile separator ','\n", fmt[t][0], fmt[t][1], fmt[t][2]);
		fprintf(f, "set title \"Job completion times: the share of the jobs done within a time"
			   "\\n%s\"\nset key outside right top\nset grid\n", what);
		fprintf(f, "set xlabel 'job completion time, hours (log scale)'\nset logscale x\n"
			   "set ylabel 'share of the %zu jobs'\nset yrange [-0.03:1.04]\nset ytics 0,0.2,1\n"
			   "set offsets graph 0.02, graph 0.02, 0, 0\nplot", n);
		for (int p = 0, k = 0; p < CL_N_POLICIES; p++)
			if (ran[p]) {
				fprintf(f, "%s 'jobs_%s.csv' skip 1 using ($7/3600):(1.0/%zu) smooth "
					   "cumulative lt %d dt %d title '%s'", k ? ", \\\n    " : "",
					cl_policy_name(p), n ? n : 1, p + 1, k + 1, cl_policy_name(p));
				k++;
			}
		fprintf(f, "\n");
	}
	if (fclose(f) != 0)
		return sl_fail(err, SL_EIO, "cannot write %s", path);
	return cli_run_gnuplot(dir, "cluster.gp", err);
}

/* DIR/cluster.json: what was simulated, from what (the inputs' own
 * comment lines say where they came from: the notes arrays), with which
 * options */
static int
write_spec(const char *dir, int argc, char **argv, const char *trace, json_t *trace_notes,
	   const char *prof, json_t *prof_notes, const cl_config *c, const int *ran,
	   const cl_model *ms, int nm, size_t n, char *err)
{
	char cmd[4096] = "stalelab", day[32] = "", path[4200];
	size_t k = strlen(cmd);
	for (int i = 0; i < argc && k < sizeof(cmd); i++)
		k += (size_t)snprintf(cmd + k, sizeof(cmd) - k, " %s", argv[i]);
	time_t now = time(NULL);
	struct tm tm;
	if (gmtime_r(&now, &tm))
		strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%SZ", &tm);
	json_t *pol = json_array(), *th = json_array(), *models = json_array();
	for (int p = 0; p < CL_N_POLICIES; p++)
		if (ran[p])
			json_array_append_new(pol, json_string(cl_policy_name(p)));
	for (int i = 0; i < c->n_thresholds; i++)
		json_array_append_new(th, json_real(c->thresholds[i]));
	for (int m = 0; m < nm; m++) {
		json_t *sc = json_array();
		for (int i = 0; i < ms[m].n_sched; i++) {
			const cl_sched *x = &ms[m].sched[i];
			json_array_append_new(sc, json_pack("{s:s,s:f,s:f,s:f,s:f}", "name", x->name,
							    "compute_s", x->compute_s, "comm_s",
							    x->comm_s, "mem_gb", x->mem_gb,
							    "iter_mult", x->iter_mult));
		}
		json_array_append_new(models, json_pack("{s:s,s:o}", "name", ms[m].name,
							"schedules", sc));
	}
	json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:O,s:s,s:O,s:I,s:i,s:f,s:o,s:s,s:f,s:o,s:o}",
			      "stalelab", SL_VERSION, "written", day, "command", cmd,
			      "trace", trace, "trace_notes", trace_notes,
			      "profiles", prof, "profiles_notes", prof_notes,
			      "jobs", (json_int_t)n, "gpus", c->gpus, "gpu_mem_gb", c->gpu_mem_gb,
			      "policies", pol, "spb", c->spb_best ? "best" : "off",
			      "restart_s", c->restart_s, "las_thresholds", th, "models", models);
	snprintf(path, sizeof(path), "%s/cluster.json", dir);
	int rc = j && json_dump_file(j, path, JSON_INDENT(1) | JSON_REAL_PRECISION(15)) == 0
		 ? 0 : sl_fail(err, SL_EIO, "cannot write %s", path);
	json_decref(j);
	return rc;
}

/* the command line of a simulation */
typedef struct cluster_opts {
	const char *trace, *prof, *out;
	int only; /* --policy's, -1: all */
	cl_config c;
} cluster_opts;

#define CLUSTER_GO (-1)

/* argv into o, checked: CLUSTER_GO, or the exit code (0 after --help, 2
 * bad usage, the message printed) */
static int
cluster_parse(int argc, char **argv, cluster_opts *o)
{
	static const struct option opts[] = {
		{"trace", required_argument, NULL, 't'},    {"profiles", required_argument, NULL, 'p'},
		{"gpus", required_argument, NULL, 'g'},     {"policy", required_argument, NULL, 'P'},
		{"gpu-mem-gb", required_argument, NULL, 'm'}, {"spb", required_argument, NULL, 'S'},
		{"restart-s", required_argument, NULL, 'R'}, {"las-thresholds", required_argument, NULL, 'T'},
		{"out", required_argument, NULL, 'o'},      {"help", no_argument, NULL, 'h'},
		{"verify", no_argument, NULL, 'V'},         {NULL, 0, NULL, 0},
	};
	*o = (cluster_opts){.only = -1,
			    .c = {.gpus = 0, .gpu_mem_gb = 80, .n_thresholds = 2,
				  .thresholds = {3600, 57600}}};
	cl_config *c = &o->c;
	int opt, rc = 0;
	unsigned long long u;
	char err[SL_ERR_LEN];
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":t:p:g:P:m:o:h", opts, NULL)) != -1) {
		switch (opt) {
		case 't': o->trace = optarg; break;
		case 'p': o->prof = optarg; break;
		case 'o': o->out = optarg; break;
		case 'g':
			if ((rc = cli_opt_u64("gpus", optarg, 1, 1000000, &u, err)) == 0)
				c->gpus = (int)u;
			break;
		case 'P':
			if (strcmp(optarg, "all") && (o->only = cl_policy_find(optarg)) < 0) {
				fprintf(stderr, "stalelab cluster: --policy: unknown \"%s\" (expected fifo, "
						"srtf, las, gandiva, jigsaw or all)\n", optarg);
				return 2;
			}
			break;
		case 'm': rc = cli_opt_double("gpu-mem-gb", optarg, positive, &c->gpu_mem_gb, err); break;
		case 'S':
			if (strcmp(optarg, "best") && strcmp(optarg, "off")) {
				fprintf(stderr, "stalelab cluster: --spb: expected best or off\n");
				return 2;
			}
			c->spb_best = !strcmp(optarg, "best");
			break;
		case 'R':
			rc = cli_opt_double("restart-s", optarg,
					    (cli_range){.lo = 0, .hi = INFINITY, .what = "seconds"},
					    &c->restart_s, err);
			break;
		case 'T':
			if (parse_thresholds(optarg, c) < 0) {
				fprintf(stderr, "stalelab cluster: --las-thresholds: expected up to %d "
						"rising GPU-second counts, comma-separated\n", CL_MAX_THRESHOLDS);
				return 2;
			}
			break;
		case 'V': c->verify = 1; break;
		case 'h': fputs(cluster_usage, stdout); return 0;
		default: return cli_bad_option("cluster", opt, argv, opts);
		}
		if (rc < 0)
			return cli_usage_error("cluster", err);
	}
	if (optind < argc) {
		fprintf(stderr, "stalelab cluster: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!o->trace || !o->prof || !c->gpus) {
		fprintf(stderr, "stalelab cluster: needs --trace, --profiles and --gpus "
				"(stalelab cluster --help)\n");
		return 2;
	}
	return CLUSTER_GO;
}

int
cmd_cluster(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "synth"))
		return synth(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "profile"))
		return cmd_cluster_profile(argc - 1, argv + 1);
	cluster_opts o;
	int rc = cluster_parse(argc, argv, &o);
	if (rc != CLUSTER_GO)
		return rc;
	cl_config c = o.c;
	const char *trace = o.trace, *prof = o.prof, *out = o.out;
	const int only = o.only;
	cl_config one = c;
	one.policy = only;
	if (c.verify && only >= 0 && !cl_verifies(&one))
		fprintf(stderr, "stalelab cluster: note: --verify checks las's decisions, and "
				"srtf's without --spb best or --restart-s; %s's here are not checked\n",
			cl_policy_name((cl_policy)only));
	char err[SL_ERR_LEN];
	cl_model *ms = NULL;
	int nm = 0, code = 0;
	cl_job *js = NULL;
	size_t n = 0, len;
	char *text = NULL;
	json_t *prof_notes = NULL;
	if (load_profiles(prof, &ms, &nm, &prof_notes, err) < 0 || !(text = slurp(trace, &len, err)) ||
	    cl_jobs_parse(text, len, trace, ms, nm, c.gpus, &js, &n, err) < 0 ||
	    cl_check(&c, ms, nm, js, n, err) < 0) {
		fprintf(stderr, "stalelab cluster: %s\n", err);
		code = 2;
		goto done;
	}
	if (out && cli_mkdir_p(out, err) < 0) {
		fprintf(stderr, "stalelab cluster: --out: %s\n", err);
		code = 1;
		goto done;
	}
	FILE *sf = NULL;
	char path[4200];
	if (out && !(sf = open_out(out, "summary", NULL, path, sizeof(path)))) {
		fprintf(stderr, "stalelab cluster: cannot write %s\n", path);
		code = 1;
		goto done;
	}
	if (sf)
		fprintf(sf, "policy,jobs,avg_jct_s,p50_jct_s,p95_jct_s,makespan_s,util_alloc,"
			    "util_compute,samples_per_gpu_h,preemptions,gain_vs_fifo\n");
	printf("%zu jobs on %d GPUs of %g GB (%s, %s)%s\n", n, c.gpus, c.gpu_mem_gb, trace, prof,
	       c.spb_best ? ", every job under its best schedule" : "");
	printf("%-8s %10s %10s %10s %11s %6s %6s %12s %7s %6s\n", "policy", "avg JCT s",
	       "p50 s", "p95 s", "makespan s", "alloc", "comp", "samples/GPUh", "preempt",
	       "gain");
	double fifo_mk = 0, mk[CL_N_POLICIES] = {0};
	int ran[CL_N_POLICIES] = {0};
	for (int p = 0; p < CL_N_POLICIES; p++) {
		/* fifo first: the baseline of every gain */
		if (only >= 0 && p != only && p != CL_FIFO)
			continue;
		c.policy = (cl_policy)p;
		cl_summary s;
		if (simulate(&c, ms, nm, js, n, out, &s, err) < 0) {
			fprintf(stderr, "stalelab cluster: %s\n", err);
			code = err[0] && strstr(err, "job ") ? 2 : 1;
			break;
		}
		if (p == CL_FIFO)
			fifo_mk = s.makespan;
		if (only >= 0 && p != only)
			continue;
		ran[p] = 1;
		mk[p] = s.makespan;
		double gain = s.makespan > 0 ? fifo_mk / s.makespan - 1 : 0;
		printf("%-8s %10.1f %10.1f %10.1f %11.1f %6.3f %6.3f %12.0f %7ld %+5.1f%%\n",
		       cl_policy_name(c.policy), s.avg_jct, s.p50_jct, s.p95_jct, s.makespan,
		       s.util_alloc, s.util_compute, s.samples_per_gpu_h, s.preemptions, 100 * gain);
		if (sf)
			fprintf(sf, "%s,%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.3f,%ld,%.6f\n",
				cl_policy_name(c.policy), s.jobs, s.avg_jct, s.p50_jct, s.p95_jct,
				s.makespan, s.util_alloc, s.util_compute, s.samples_per_gpu_h,
				s.preemptions, gain);
	}
	if (sf && fclose(sf) != 0) {
		fprintf(stderr, "stalelab cluster: cannot write %s\n", path);
		code = 1;
	}
	if (out && code == 0) {
		json_t *trace_notes = comments_of(text, len);
		if (write_spec(out, argc, argv, trace, trace_notes, prof, prof_notes, &c, ran, ms,
			       nm, n, err) < 0 || figures(out, ran, mk, c.gpus, n, trace, err) < 0) {
			fprintf(stderr, "stalelab cluster: %s\n", err);
			code = 1;
		}
		json_decref(trace_notes);
		if (code == 0) {
			printf("%s/{gpus,jct}.{svg,png}: the GPUs in use over time and the JCTs' "
			       "distribution\n", out);
		}
	}
done:
	json_decref(prof_notes);
	free(text);
	free(js);
	free(ms);
	return code;
}
