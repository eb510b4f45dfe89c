/* sweep.c - `stalelab sweep`: a grid of runs, its cells side by side in
 * processes of their own (forked after the data is loaded, so they share
 * it), resumable, sharded over a cluster's launchers, merged, summarised.
 * The grid is sweep_grid.c's, one cell sweep_cell.c's, the tables
 * sweep_table.c's. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_run_impl.h"
#include "config_json.h"
#include "dataset.h"
#include "jsonout.h"
#include "sl.h"
#include "sweep.h"
#include "sweep_impl.h"

static const char usage[] =
	"Usage: stalelab sweep FILE --out DIR [OPTIONS]\n"
	"       stalelab sweep --summary DIR [--baseline KEY=VALUE] [--metric NAME]\n"
	"       stalelab sweep --merge DIR... --out DIR\n"
	"       stalelab sweep --list FILE\n"
	"\n"
	"Run a grid of runs on the virtual clock. FILE is a run object in which\n"
	"any key may hold a list (\"rule\": [\"ssgd\", \"asgd\"], nested keys too:\n"
	"\"delay\": {\"dist\": \"version\", \"s\": [0, 4]}); the grid is the product of\n"
	"the lists, plus \"variants\": {\"name\": {partial run object}, ...} each\n"
	"expanded on its own, times \"seeds\": N (seeds 1..N); \"target\": ACC sets\n"
	"the accuracy of the to-target columns. DIR gets results.csv (a row per\n"
	"cell) and cells/NAME.jsonl (each cell's log). A cell's row and log are\n"
	"the same bits whatever --jobs, shard or neighbours (but for train_s and\n"
	"samples_per_s). See docs/experiments.md.\n"
	"\n"
	"  -o, --out DIR        where results.csv and cells/ go (made if missing).\n"
	"                       Run again, a sweep skips its finished cells; a cell\n"
	"                       killed mid-way runs again\n"
	"  -j, --jobs N         cells side by side (default: the cores, %d here)\n"
	"      --shard I/N      run share I of N (0 <= I < N: the cells whose index\n"
	"                       is I modulo N); default from a Slurm job array\n"
	"                       (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN of\n"
	"                       SLURM_ARRAY_TASK_COUNT), else the launcher's rank\n"
	"                       and size (mpirun's OMPI_COMM_WORLD_RANK/SIZE,\n"
	"                       PMI_RANK/SIZE, srun's SLURM_PROCID/NTASKS)\n"
	"      --force          run FILE in a DIR started with another sweep file\n"
	"                       (refused otherwise, naming the keys that differ);\n"
	"                       cells whose run object is unchanged are kept\n"
	"      --list           print the cells (index, name, label) and stop\n"
	"      --summary DIR    aggregate DIR's results over seeds: mean and 95%%\n"
	"                       interval per group (also DIR/summary.csv)\n"
	"      --baseline K=V   with --summary: each group's --metric over the\n"
	"                       group with K=V and the same other keys\n"
	"      --metric NAME    the metric --baseline divides (default\n"
	"                       updates_to_target)\n"
	"      --merge          gather the shards' DIRs (the arguments) into --out\n"
	"      --plot           then the figures, as `stalelab plot DIR` makes them\n"
	"  -q, --quiet          no progress on stderr\n"
	"  -h, --help           this text\n"
	"\n"
	"A cell runs on the virtual clock with one compute thread unless its run\n"
	"object says otherwise, and for 3 epochs when it gives no stop.\n"
	"\n"
	"Exit status: 0 every cell of the share finished, 1 a cell failed (the\n"
	"others ran; run again to retry it), 2 bad usage or a bad sweep file,\n"
	"130 interrupted (finished cells are kept).\n";

/* ---- the grid, checked ------------------------------------------------------ */

/* a cell's defaults (the virtual clock, one thread, a stop) and its run
 * object checked as `stalelab run --config` would */
static int
prepare_cell(sweep_cell *c, char *err)
{
	json_t *clock = json_object_get(c->run, "clock");
	if (!clock)
		json_object_set_new(c->run, "clock", json_string("virtual"));
	else if (!json_is_string(clock) || strcmp(json_string_value(clock), "virtual"))
		return sl_fail(err, SL_EINVAL,
			       "clock: a sweep runs on the virtual clock (its rows must not "
			       "depend on the machine); drop \"clock\" or make it \"virtual\"");
	if (!json_object_get(c->run, "threads"))
		json_object_set_new(c->run, "threads", json_integer(1));
	run_config cfg;
	run_sched *sched;
	int n;
	int rc = sweep_cell_config(c->run, &cfg, &sched, &n, err);
	free(sched);
	if (rc == 0 && !runcli_has_stop(&cfg))
		json_object_set_new(c->run, "stop", json_pack("{s:i}", "epochs", 3));
	return rc;
}

static int
load_grid(const char *path, json_t **spec, sweep_grid *g, char *err)
{
	if (cli_read_json(path, spec, err) < 0)
		return -SL_EINVAL;
	if (sweep_expand(*spec, g, err) < 0)
		return -SL_EINVAL;
	for (int i = 0; i < g->n_cells; i++) {
		char e[SL_ERR_LEN];
		if (prepare_cell(&g->cell[i], e) < 0)
			return sl_fail(err, SL_EINVAL, "cell %d (%s): %s", i,
				       g->cell[i].label[0] ? g->cell[i].label : "the only one", e);
	}
	return 0;
}

/* ---- files ----------------------------------------------------------------- */

static int
mkdir_p(const char *path, char *err)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || !*p) {
			char c = *p;
			*p = 0;
			if (mkdir(buf, 0777) < 0 && errno != EEXIST)
				return sl_fail(err, SL_EIO, "%s: %s", buf, strerror(errno));
			*p = c;
			if (!c)
				break;
		}
	}
	struct stat st;
	if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return sl_fail(err, SL_EIO, "%s: not a directory", path);
	return 0;
}

static int
write_json(const char *path, const json_t *j, char *err)
{
	char *s = jsonout_dumps(j);
	if (!s)
		return sl_fail(err, SL_ENOMEM, "out of memory");
	size_t n = strlen(s);
	s[n] = 0;
	char *t = realloc(s, n + 2);
	if (t) {
		s = t;
		s[n++] = '\n';
		s[n] = 0;
	}
	int rc = sweep_write_file(path, s, n, err);
	free(s);
	return rc;
}

/* DIR/sweep.json: written the first time; then the same file, or --force */
static int
check_spec(const char *dir, const json_t *spec, int force, char *err)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/sweep.json", dir);
	json_error_t je;
	json_t *old = json_load_file(path, 0, &je);
	if (old) {
		char keys[400];
		int n = sweep_diff(old, spec, keys, sizeof(keys));
		json_decref(old);
		if (n == 0)
			return 0;
		if (!force)
			return sl_fail(err, SL_EINVAL,
				       "%s was started with another sweep file: %s differ%s (its "
				       "copy is %s); --force runs this one there (cells whose run "
				       "object is unchanged are kept), or give another --out",
				       dir, keys, n == 1 ? "s" : "", path);
	} else if (access(path, F_OK) == 0) {
		return sl_fail(err, SL_EINVAL, "%s: line %d: %s (not a sweep's copy of its file?)",
			       path, je.line, je.text);
	}
	return write_json(path, spec, err);
}

/* what a killed cell left: its temporary files */
static void
clean_cell(const char *cells, const sweep_cell *c)
{
	static const char *const ext[] = {".jsonl.tmp", ".json.tmp"};
	for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
		char p[4400];
		snprintf(p, sizeof(p), "%s/%s%s", cells, c->name, ext[i]);
		unlink(p);
	}
}

/* ---- the data sets, loaded once in the parent -------------------------------- */

typedef struct data_cache {
	char key[300];
	dataset_pair p;
} data_cache;

typedef struct sweeper {
	const char *dir;
	char cells[4200], csv[4200];
	sweep_grid g;
	char *done;          /* per cell: 1 finished (this run or before) */
	json_t *results;
	data_cache *data;
	int n_data;
	int jobs, shard, n_shards, quiet, bar;
	/* this run's progress */
	int total, before, ran, failed, running;
	double t0, busy_s, last_csv, last_beat;
	int first_fail;
} sweeper;

static const dataset_pair *
data_for(sweeper *s, const sweep_cell *c, char *err)
{
	const char *spec = json_string_value(json_object_get(c->run, "dataset"));
	json_t *sj = json_object_get(c->run, "seed");
	run_config d;
	config_defaults(&d);
	if (!spec)
		spec = d.dataset;
	uint64_t seed = json_is_integer(sj) ? (uint64_t)json_integer_value(sj) : d.seed;
	char key[300];
	/* only a synthetic set depends on the seed */
	if (!strncmp(spec, "synthetic", 9))
		snprintf(key, sizeof(key), "%s#%llu", spec, (unsigned long long)seed);
	else
		snprintf(key, sizeof(key), "%s", spec);
	for (int i = 0; i < s->n_data; i++)
		if (!strcmp(s->data[i].key, key))
			return &s->data[i].p;
	data_cache *nd = realloc(s->data, sizeof(*nd) * (size_t)(s->n_data + 1));
	if (!nd) {
		sl_fail(err, SL_ENOMEM, "out of memory");
		return NULL;
	}
	s->data = nd;
	data_cache *e = &s->data[s->n_data];
	snprintf(e->key, sizeof(e->key), "%s", key);
	if (ds_load(spec, seed, &e->p, err) < 0)
		return NULL;
	if (e->p.note[0] && !s->quiet)
		fprintf(stderr, "stalelab sweep: %s\n", e->p.note);
	s->n_data++;
	return &e->p;
}

/* ---- progress ---------------------------------------------------------------- */

static void
fmt_dur(char *out, size_t cap, double s)
{
	if (!isfinite(s) || s < 0) {
		snprintf(out, cap, "-");
		return;
	}
	long n = (long)(s + 0.5);
	if (n >= 3600)
		snprintf(out, cap, "%ldh%02ldm", n / 3600, n / 60 % 60);
	else if (n >= 60)
		snprintf(out, cap, "%ldm%02lds", n / 60, n % 60);
	else
		snprintf(out, cap, "%lds", n);
}

static void
progress(sweeper *s, int final)
{
	if (s->quiet)
		return;
	double now = sl_now();
	int done = s->before + s->ran, todo = s->total - done - s->failed - s->running;
	/* mean wall time of this run's cells, shared by the jobs */
	double per = s->ran ? s->busy_s / s->ran : NAN;
	double eta = (todo + 0.5 * s->running) * per / (s->jobs > 0 ? s->jobs : 1);
	char e[32];
	fmt_dur(e, sizeof(e), eta);
	if (s->bar) {
		int w = 24, fill = s->total ? (int)((double)done * w / s->total) : w;
		char bar[32];
		for (int i = 0; i < w; i++)
			bar[i] = i < fill ? '#' : '.';
		bar[w] = 0;
		fprintf(stderr, "\r\033[K[%s] %d/%d cells | %d running", bar, done, s->total,
			s->running);
		if (s->failed)
			fprintf(stderr, " | %d failed", s->failed);
		fprintf(stderr, " | ETA %s", final ? "0s" : e);
		if (final)
			fprintf(stderr, "\n");
	} else if (final || now - s->last_beat >= 10) {
		fprintf(stderr, "cells %d done | %d running | %d to go%s | ETA %s\n", done,
			s->running, todo, s->failed ? " | some failed" : "", final ? "0s" : e);
		s->last_beat = now;
	}
}

/* ---- running the cells ---------------------------------------------------------- */

typedef struct child {
	pid_t pid;
	int cell;
	double t0;
} child;

static pid_t
spawn(sweeper *s, int i, char *err)
{
	const sweep_cell *c = &s->g.cell[i];
	const dataset_pair *data = data_for(s, c, err);
	if (!data)
		return -1;
	clean_cell(s->cells, c);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		sl_fail(err, SL_EIO, "fork: %s", strerror(errno));
		return -1;
	}
	if (pid > 0)
		return pid;
	/* the cell: its signals back to the defaults, its errors in NAME.err */
	sigset_t none;
	sigemptyset(&none);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	sigprocmask(SIG_SETMASK, &none, NULL);
	char ep[4400];
	snprintf(ep, sizeof(ep), "%s/%s.err", s->cells, c->name);
	int fd = open(ep, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		dup2(fd, 2);
		close(fd);
	}
	char e[SL_ERR_LEN];
	int rc = sweep_run_cell(c, data, s->cells, s->g.target, e);
	if (rc < 0) {
		fprintf(stderr, "%s\n", e);
		_exit(1);
	}
	unlink(ep);
	_exit(0);
}

/* the last line of a failed cell's NAME.err */
static void
cell_error(const sweeper *s, const sweep_cell *c, char *out, size_t cap)
{
	char ep[4400];
	snprintf(ep, sizeof(ep), "%s/%s.err", s->cells, c->name);
	snprintf(out, cap, "no message (see %.900s)", ep);
	FILE *f = fopen(ep, "r");
	if (!f)
		return;
	char line[1024];
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (line[0])
			snprintf(out, cap, "%s", line);
	}
	fclose(f);
}

static void
finished(sweeper *s, child *ch, int status)
{
	const sweep_cell *c = &s->g.cell[ch->cell];
	s->running--;
	s->busy_s += sl_now() - ch->t0;
	char res[4400];
	snprintf(res, sizeof(res), "%s/%s.json", s->cells, c->name);
	json_error_t je;
	json_t *r = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? json_load_file(res, 0, &je) : NULL;
	if (r) {
		json_array_append_new(s->results, r);
		s->done[ch->cell] = 1;
		s->ran++;
	} else {
		char why[1024];
		if (WIFSIGNALED(status))
			snprintf(why, sizeof(why), "killed by signal %d", WTERMSIG(status));
		else
			cell_error(s, c, why, sizeof(why));
		if (s->bar)
			fprintf(stderr, "\r\033[K");
		fprintf(stderr, "stalelab sweep: cell %d (%s) failed: %s\n", c->index, c->label, why);
		s->failed++;
	}
	ch->pid = 0;
}

static int
write_csv(sweeper *s, char *err)
{
	s->last_csv = sl_now();
	return sweep_write_csv(s->csv, s->g.axis, s->g.n_axes, s->results, err);
}

/* 0 all done, 1 a cell failed, 130 interrupted */
static int
run_cells(sweeper *s, char *err)
{
	int *todo = malloc(sizeof(int) * (size_t)(s->g.n_cells ? s->g.n_cells : 1));
	child *ch = calloc((size_t)s->jobs, sizeof(child));
	if (!todo || !ch) {
		free(todo);
		free(ch);
		sl_fail(err, SL_ENOMEM, "out of memory");
		return 1;
	}
	int n_todo = 0;
	for (int i = 0; i < s->g.n_cells; i++) {
		if (!sweep_in_shard(i, s->shard, s->n_shards))
			continue;
		s->total++;
		if (s->done[i])
			s->before++;
		else
			todo[n_todo++] = i;
	}
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigset_t old;
	sigprocmask(SIG_BLOCK, &set, &old);
	int next = 0, stop = 0, code = 0;
	s->t0 = s->last_beat = sl_now();
	progress(s, 0);
	for (;;) {
		while (!stop && next < n_todo && s->running < s->jobs) {
			int slot = 0;
			while (ch[slot].pid)
				slot++;
			double t = sl_now();
			pid_t pid = spawn(s, todo[next], err);
			if (pid < 0) {
				if (s->bar)
					fprintf(stderr, "\r\033[K");
				fprintf(stderr, "stalelab sweep: cell %d (%s): %s\n", todo[next],
					s->g.cell[todo[next]].label, err);
				s->failed++;
				next++;
				continue;
			}
			ch[slot] = (child){.pid = pid, .cell = todo[next++], .t0 = t};
			s->running++;
		}
		if (!s->running)
			break;
		struct timespec ts = {0, 500000000};
		int sig = sigtimedwait(&set, NULL, &ts);
		if (sig == SIGINT || sig == SIGTERM) {
			if (!stop && !s->quiet)
				fprintf(stderr, "%sstalelab sweep: %s: stopping the %d running cell%s "
					"(finished cells are kept; run again to go on)\n",
					s->bar ? "\r\033[K" : "", sig == SIGINT ? "SIGINT" : "SIGTERM",
					s->running, s->running == 1 ? "" : "s");
			stop = 1;
			code = 130;
			for (int i = 0; i < s->jobs; i++)
				if (ch[i].pid)
					kill(ch[i].pid, SIGTERM);
		}
		int status;
		pid_t pid;
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
			for (int i = 0; i < s->jobs; i++)
				if (ch[i].pid == pid) {
					if (stop && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
						s->running--; /* interrupted: not a failure */
						ch[i].pid = 0;
					} else {
						finished(s, &ch[i], status);
					}
				}
		}
		if (sl_now() - s->last_csv >= 1.0 && write_csv(s, err) < 0)
			fprintf(stderr, "stalelab sweep: %s\n", err);
		progress(s, 0);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	free(todo);
	free(ch);
	if (write_csv(s, err) < 0) {
		fprintf(stderr, "stalelab sweep: %s\n", err);
		return 1;
	}
	progress(s, 1);
	if (code == 0 && s->failed)
		code = 1;
	return code;
}

/* ---- modes ----------------------------------------------------------------------- */

static int
parse_shard(const char *s, int *i, int *n)
{
	char extra;
	return sscanf(s, "%d/%d%c", i, n, &extra) == 2 && *n >= 1 && *i >= 0 && *i < *n ? 0 : -1;
}

/* a launcher's rank and size (mpirun, srun -n): I/N from the first pair
 * set; 0 when none is, -1 when one is not a share */
static int
rank_from_env(int *i, int *n, char *err)
{
	static const char *const pairs[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
					       {"PMI_RANK", "PMI_SIZE"},
					       {"SLURM_PROCID", "SLURM_NTASKS"}};
	for (size_t k = 0; k < sizeof(pairs) / sizeof(pairs[0]); k++) {
		const char *r = getenv(pairs[k][0]), *z = getenv(pairs[k][1]);
		if (!r || !z)
			continue;
		unsigned long long a, b;
		if (cli_u64(r, &a) < 0 || cli_u64(z, &b) < 0 || b < 1 || a >= b)
			return sl_fail(err, SL_EINVAL, "%s=%s, %s=%s: not a share (give --shard I/N)",
				       pairs[k][0], r, pairs[k][1], z);
		*i = (int)a;
		*n = (int)b;
		return 1;
	}
	return 0;
}

static int
shard_from_env(int *i, int *n, char *err)
{
	const char *id = getenv("SLURM_ARRAY_TASK_ID"), *cnt = getenv("SLURM_ARRAY_TASK_COUNT");
	if (!id || !cnt)
		return rank_from_env(i, n, err);
	const char *mn = getenv("SLURM_ARRAY_TASK_MIN");
	unsigned long long a, b, m = 0;
	if (cli_u64(id, &a) < 0 || cli_u64(cnt, &b) < 0 || (mn && cli_u64(mn, &m) < 0) || b < 1 ||
	    a < m || a - m >= b)
		return sl_fail(err, SL_EINVAL,
			       "SLURM_ARRAY_TASK_ID=%s, SLURM_ARRAY_TASK_MIN=%s, "
			       "SLURM_ARRAY_TASK_COUNT=%s: not a share (give --shard I/N)",
			       id, mn ? mn : "(unset)", cnt);
	*i = (int)(a - m);
	*n = (int)b;
	return 1;
}

static int
mode_list(const char *file)
{
	char err[SL_ERR_LEN];
	json_t *spec = NULL;
	sweep_grid g;
	memset(&g, 0, sizeof(g));
	if (load_grid(file, &spec, &g, err) < 0) {
		fprintf(stderr, "stalelab sweep: %s\n", err);
		json_decref(spec);
		sweep_grid_free(&g);
		return 2;
	}
	for (int i = 0; i < g.n_cells; i++)
		printf("%d\t%s\t%s\n", i, g.cell[i].name, g.cell[i].label);
	printf("%d cell%s, %d ax%s:", g.n_cells, g.n_cells == 1 ? "" : "s", g.n_axes,
	       g.n_axes == 1 ? "is" : "es");
	for (int i = 0; i < g.n_axes; i++)
		printf(" %s", g.axis[i].key);
	printf("\n");
	json_decref(spec);
	sweep_grid_free(&g);
	return 0;
}

/* a DIR's grid, from its own copy of the sweep file */
int
sweep_dir_grid(const char *dir, json_t **spec, sweep_grid *g, char *err)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/sweep.json", dir);
	if (access(path, R_OK) < 0)
		return sl_fail(err, SL_EINVAL, "%s: no sweep here (no %s)", dir, path);
	return load_grid(path, spec, g, err);
}

static int
mode_summary(const char *dir, const char *baseline, const char *metric)
{
	char err[SL_ERR_LEN], cells[4200], csv[4200];
	json_t *spec = NULL;
	sweep_grid g;
	memset(&g, 0, sizeof(g));
	int code = 2;
	json_t *results = json_array();
	char *done = NULL;
	if (sweep_dir_grid(dir, &spec, &g, err) < 0)
		goto out;
	snprintf(cells, sizeof(cells), "%s/cells", dir);
	snprintf(csv, sizeof(csv), "%s/summary.csv", dir);
	done = calloc((size_t)g.n_cells + 1, 1);
	if (!done || sweep_load_results(cells, &g, done, results, err) < 0)
		goto out;
	if (!json_array_size(results)) {
		sl_fail(err, SL_EINVAL, "%s: no finished cell yet", dir);
		goto out;
	}
	if (sweep_summary(results, g.axis, g.n_axes, baseline, metric, csv, stdout, err) < 0)
		goto out;
	printf("%zu of %d cells finished; %s\n", json_array_size(results), g.n_cells, csv);
	code = 0;
out:
	if (code)
		fprintf(stderr, "stalelab sweep: %s\n", err);
	free(done);
	json_decref(results);
	json_decref(spec);
	sweep_grid_free(&g);
	return code;
}

static int
copy_file(const char *from, const char *to, char *err)
{
	FILE *f = fopen(from, "rb");
	if (!f)
		return sl_fail(err, SL_EIO, "%s: %s", from, strerror(errno));
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	for (size_t k; buf && (k = fread(buf + n, 1, cap - n, f)) > 0;) {
		n += k;
		if (n == cap) {
			char *nb = realloc(buf, cap *= 2);
			if (!nb) {
				free(buf);
				buf = NULL;
			}
			buf = nb;
		}
	}
	fclose(f);
	if (!buf)
		return sl_fail(err, SL_ENOMEM, "out of memory");
	int rc = sweep_write_file(to, buf, n, err);
	free(buf);
	return rc;
}

static int
mode_merge(char **dirs, int n_dirs, const char *out)
{
	char err[SL_ERR_LEN];
	json_t *spec = NULL;
	sweep_grid g;
	memset(&g, 0, sizeof(g));
	int code = 2, have = 0;
	json_t *results = json_array();
	char *done = NULL, *any = NULL, ocells[4200], csv[4200];
	if (sweep_dir_grid(dirs[0], &spec, &g, err) < 0)
		goto out;
	done = calloc((size_t)g.n_cells + 1, 1);
	any = calloc((size_t)g.n_cells + 1, 1);
	if (!done || !any) {
		sl_fail(err, SL_ENOMEM, "out of memory");
		goto out;
	}
	snprintf(ocells, sizeof(ocells), "%s/cells", out);
	if (mkdir_p(ocells, err) < 0 || check_spec(out, spec, 0, err) < 0)
		goto out;
	for (int d = 0; d < n_dirs; d++) {
		json_t *other = NULL;
		sweep_grid og;
		memset(&og, 0, sizeof(og));
		if (d > 0) {
			char keys[400];
			int rc = sweep_dir_grid(dirs[d], &other, &og, err);
			sweep_grid_free(&og);
			if (rc < 0)
				goto out;
			int n = sweep_diff(spec, other, keys, sizeof(keys));
			json_decref(other);
			if (n) {
				sl_fail(err, SL_EINVAL, "%s and %s ran other sweep files: %s differ%s",
					dirs[0], dirs[d], keys, n == 1 ? "s" : "");
				goto out;
			}
		}
		char cells[4200];
		snprintf(cells, sizeof(cells), "%s/cells", dirs[d]);
		memset(done, 0, (size_t)g.n_cells);
		json_t *r = json_array();
		sweep_load_results(cells, &g, done, r, err);
		json_decref(r);
		for (int i = 0; i < g.n_cells; i++) {
			if (!done[i] || any[i])
				continue;
			const char *nm = g.cell[i].name;
			char a[4400], b[4400];
			snprintf(a, sizeof(a), "%s/%s.jsonl", cells, nm);
			snprintf(b, sizeof(b), "%s/%s.jsonl", ocells, nm);
			int same = !strcmp(cells, ocells);
			if (!same && copy_file(a, b, err) < 0)
				goto out;
			snprintf(a, sizeof(a), "%s/%s.json", cells, nm);
			snprintf(b, sizeof(b), "%s/%s.json", ocells, nm);
			if (!same && copy_file(a, b, err) < 0)
				goto out;
			any[i] = 1;
			have++;
		}
	}
	memset(done, 0, (size_t)g.n_cells);
	if (sweep_load_results(ocells, &g, done, results, err) < 0)
		goto out;
	snprintf(csv, sizeof(csv), "%s/results.csv", out);
	if (sweep_write_csv(csv, g.axis, g.n_axes, results, err) < 0) {
		code = 1;
		goto out;
	}
	printf("merged %d of %d cells from %d director%s into %s", have, g.n_cells, n_dirs,
	       n_dirs == 1 ? "y" : "ies", csv);
	if (have < g.n_cells)
		printf(" (%d not run by any shard yet)", g.n_cells - have);
	printf("\n");
	code = 0;
out:
	if (code)
		fprintf(stderr, "stalelab sweep: %s\n", err);
	free(done);
	free(any);
	json_decref(results);
	json_decref(spec);
	sweep_grid_free(&g);
	return code;
}

static int
mode_run(const char *file, const char *dir, int jobs, int shard, int n_shards, int force,
	 int quiet)
{
	char err[SL_ERR_LEN];
	sweeper s;
	memset(&s, 0, sizeof(s));
	s.dir = dir;
	s.jobs = jobs;
	s.shard = shard;
	s.n_shards = n_shards;
	s.quiet = quiet;
	s.bar = !quiet && isatty(2);
	s.results = json_array();
	json_t *spec = NULL;
	int code = 2;
	if (load_grid(file, &spec, &s.g, err) < 0)
		goto out;
	snprintf(s.cells, sizeof(s.cells), "%s/cells", dir);
	snprintf(s.csv, sizeof(s.csv), "%s/results.csv", dir);
	if (mkdir_p(s.cells, err) < 0 || check_spec(dir, spec, force, err) < 0)
		goto out;
	s.done = calloc((size_t)s.g.n_cells + 1, 1);
	if (!s.done) {
		sl_fail(err, SL_ENOMEM, "out of memory");
		code = 1;
		goto out;
	}
	sweep_load_results(s.cells, &s.g, s.done, s.results, err);
	if (!quiet) {
		int mine = 0, fin = 0;
		for (int i = 0; i < s.g.n_cells; i++)
			if (sweep_in_shard(i, shard, n_shards)) {
				mine++;
				fin += s.done[i];
			}
		fprintf(stderr, "stalelab sweep: %d cell%s", s.g.n_cells, s.g.n_cells == 1 ? "" : "s");
		if (n_shards > 1)
			fprintf(stderr, ", shard %d/%d: %d of them", shard, n_shards, mine);
		fprintf(stderr, ", %d finished before, %d to run, %d at a time, into %s\n", fin,
			mine - fin, jobs, dir);
	}
	code = run_cells(&s, err);
	if (!quiet)
		fprintf(stderr, "stalelab sweep: %d cell%s run in %.1f s, %d failed; %s\n", s.ran,
			s.ran == 1 ? "" : "s", sl_now() - s.t0, s.failed, s.csv);
	err[0] = 0;
out:
	if (code == 2)
		fprintf(stderr, "stalelab sweep: %s\n", err);
	for (int i = 0; i < s.n_data; i++)
		ds_pair_free(&s.data[i].p);
	free(s.data);
	free(s.done);
	json_decref(s.results);
	json_decref(spec);
	sweep_grid_free(&s.g);
	return code;
}

int
cmd_sweep(int argc, char **argv)
{
	static const struct option opts[] = {
		{"out", required_argument, NULL, 'o'},
		{"jobs", required_argument, NULL, 'j'},
		{"shard", required_argument, NULL, 'S'},
		{"force", no_argument, NULL, 'F'},
		{"list", no_argument, NULL, 'L'},
		{"summary", required_argument, NULL, 's'},
		{"baseline", required_argument, NULL, 'b'},
		{"metric", required_argument, NULL, 'm'},
		{"merge", no_argument, NULL, 'M'},
		{"plot", no_argument, NULL, 'P'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *out = NULL, *summary = NULL, *baseline = NULL, *metric = NULL, *shard_s = NULL;
	int jobs = cli_ncpu(), force = 0, list = 0, merge = 0, quiet = 0, plot = 0, opt;
	unsigned long long u;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":o:j:qh", opts, NULL)) != -1) {
		switch (opt) {
		case 'o': out = optarg; break;
		case 'j':
			if (cli_u64(optarg, &u) < 0 || u < 1 || u > 256) {
				fprintf(stderr, "stalelab sweep: --jobs: expected 1 to 256, got '%s'\n", optarg);
				return 2;
			}
			jobs = (int)u;
			break;
		case 'S': shard_s = optarg; break;
		case 'F': force = 1; break;
		case 'L': list = 1; break;
		case 's': summary = optarg; break;
		case 'b': baseline = optarg; break;
		case 'm': metric = optarg; break;
		case 'M': merge = 1; break;
		case 'P': plot = 1; break;
		case 'q': quiet = 1; break;
		case 'h': printf(usage, cli_ncpu()); return 0;
		default: return cli_bad_option("sweep", opt, argv);
		}
	}
	int npos = argc - optind;
	char **pos = argv + optind;
	if ((baseline || metric) && !summary)
		return fprintf(stderr, "stalelab sweep: --baseline and --metric go with --summary DIR\n"), 2;
	if (summary) {
		if (npos || merge || list || out)
			return fprintf(stderr, "stalelab sweep: --summary DIR takes no other argument\n"), 2;
		return mode_summary(summary, baseline, metric);
	}
	if (merge) {
		if (!npos || !out)
			return fprintf(stderr, "stalelab sweep: --merge DIR... --out DIR: the shards' "
					       "directories, and where they go\n"), 2;
		return mode_merge(pos, npos, out);
	}
	if (npos != 1)
		return fprintf(stderr, "stalelab sweep: %s\nTry 'stalelab sweep --help'.\n",
			       npos ? "one sweep file at a time" : "which sweep file? (stalelab sweep FILE --out DIR)"), 2;
	if (list)
		return mode_list(pos[0]);
	if (!out)
		return fprintf(stderr, "stalelab sweep: --out DIR: where results.csv and cells/ go\n"), 2;
	int shard = 0, n_shards = 1;
	char err[SL_ERR_LEN];
	if (shard_s) {
		if (parse_shard(shard_s, &shard, &n_shards) < 0)
			return fprintf(stderr, "stalelab sweep: --shard: expected I/N with 0 <= I < N, "
					       "got '%s'\n", shard_s), 2;
	} else if (shard_from_env(&shard, &n_shards, err) < 0) {
		return fprintf(stderr, "stalelab sweep: %s\n", err), 2;
	}
	int code = mode_run(pos[0], out, jobs, shard, n_shards, force, quiet);
	if (code == 0 && plot && sweep_plot(out, NULL, err) < 0) {
		fprintf(stderr, "stalelab sweep: --plot: %s\n", err);
		code = 1;
	}
	return code;
}
