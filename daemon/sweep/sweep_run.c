/* sweep_run.c - running a sweep's cells: each in a process of its own,
 * forked after its data set is loaded (so the cells share it), --jobs at
 * a time; the progress (a bar, or a heartbeat line), a failed cell
 * reported while the others go on, results.csv rewritten as they finish,
 * SIGINT and SIGTERM stopping the running cells and keeping the finished
 * ones. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "dataset.h"
#include "model.h"
#include "sl.h"
#include "sweep.h"
#include "sweep_impl.h"

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
	json_t *mj = json_object_get(c->run, "model");
	const char *mspec = json_is_object(mj) ? "{graph}" : json_string_value(mj);
	if (!mspec)
		mspec = d.model;
	int ctx = model_spec_context(mspec);
	char key[300];
	/* a synthetic set (blobs too) depends on the seed, a text set on the seed and the
	 * model's context (its contexts are drawn at seeded offsets) */
	if (!strncmp(spec, "synthetic", 9) || !strncmp(spec, "blobs:", 6) ||
	    ds_spec_is_text(spec))
		snprintf(key, sizeof(key), "%s#%llu#%d", spec, (unsigned long long)seed, ctx);
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
	if (model_data_load(mspec, spec, seed, &e->p, err) < 0)
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
	int done = s->before + s->ran, left = s->total - done - s->failed - s->running;
	/* mean wall time of this run's cells, shared by the jobs */
	double per = s->ran ? s->busy_s / s->ran : NAN;
	double eta = (left + 0.5 * s->running) * per / (s->jobs > 0 ? s->jobs : 1);
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
			s->running, left, s->failed ? " | some failed" : "", final ? "0s" : e);
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

/* 0 all done, 1 a cell failed, 130 or 143 interrupted (SIGINT, SIGTERM) */
static int
run_cells(sweeper *s, char *err)
{
	int *queue = malloc(sizeof(int) * (size_t)(s->g.n_cells ? s->g.n_cells : 1));
	child *ch = calloc((size_t)s->jobs, sizeof(child));
	if (!queue || !ch) {
		free(queue);
		free(ch);
		sl_fail(err, SL_ENOMEM, "out of memory");
		return 1;
	}
	int n_queued = 0;
	for (int i = 0; i < s->g.n_cells; i++) {
		if (!sweep_in_shard(i, s->shard, s->n_shards))
			continue;
		s->total++;
		if (s->done[i])
			s->before++;
		else
			queue[n_queued++] = i;
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
		while (!stop && next < n_queued && s->running < s->jobs) {
			int slot = 0;
			while (ch[slot].pid)
				slot++;
			double t = sl_now();
			pid_t pid = spawn(s, queue[next], err);
			if (pid < 0) {
				if (s->bar)
					fprintf(stderr, "\r\033[K");
				fprintf(stderr, "stalelab sweep: cell %d (%s): %s\n", queue[next],
					s->g.cell[queue[next]].label, err);
				s->failed++;
				next++;
				continue;
			}
			ch[slot] = (child){.pid = pid, .cell = queue[next++], .t0 = t};
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
			if (!stop)
				code = 128 + sig; /* 130 SIGINT, 143 SIGTERM */
			stop = 1;
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
	free(queue);
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

int
sweep_run(const char *file, const char *dir, int jobs, int shard, int n_shards, int force,
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
	if (sweep_load_grid(file, &spec, &s.g, err) < 0)
		goto out;
	snprintf(s.cells, sizeof(s.cells), "%s/cells", dir);
	snprintf(s.csv, sizeof(s.csv), "%s/results.csv", dir);
	if (cli_mkdir_p(s.cells, err) < 0 || sweep_check_spec(dir, spec, force, err) < 0)
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
