/* sweep_plot.c - `stalelab plot DIR`: the figures of a sweep, through
 * gnuplot. The cells' logs are read back and grouped as --summary groups
 * them (every axis but the seed; seeds averaged); the data go to
 * DIR/figures (NAME.dat) beside a gnuplot script, plots.gp, which gnuplot turns
 * into an SVG and a PNG of each figure (the data and script stay, for a
 * machine without gnuplot or a figure redone by hand):
 *
 *   loss        train loss against updates, a line per group
 *   accuracy    test accuracy against epochs, a line per group
 *   staleness   the share of gradients at each staleness (the end record's
 *               histogram), a line per group, log scale
 *   slowdown    with --baseline K=V: updates to the target over the
 *               baseline's, against K, a line per group of the other keys */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "jsonout.h"
#include "sl.h"
#include "sweep.h"
#include "sweep_impl.h"

#define HIST_N 65

/* one point of a group's mean curve */
typedef struct point {
	double x, ysum;
	int n;
} point;

typedef struct curve {
	point *p;
	int n, cap;
} curve;

typedef struct pgroup {
	json_t *axes;    /* without the seed */
	char label[256];
	int cells;
	curve loss, acc; /* by version, by epoch */
	double hist[HIST_N];
	double reach_sum; /* updates_to_target summed, when every seed reached it */
	int reach_n;
} pgroup;

static int
curve_add(curve *c, double x, double y)
{
	if (!isfinite(x) || !isfinite(y))
		return 0;
	for (int i = 0; i < c->n; i++)
		if (c->p[i].x == x) {
			c->p[i].ysum += y;
			c->p[i].n++;
			return 0;
		}
	if (c->n == c->cap) {
		int cap = c->cap ? 2 * c->cap : 64;
		point *p = realloc(c->p, sizeof(point) * (size_t)cap);
		if (!p)
			return -1;
		c->p = p;
		c->cap = cap;
	}
	c->p[c->n++] = (point){x, y, 1};
	return 0;
}

static int
cmp_point(const void *a, const void *b)
{
	double x = ((const point *)a)->x, y = ((const point *)b)->x;
	return (x > y) - (x < y);
}

/* a group's label as a gnuplot string: no double quotes, no backslashes */
static void
label_of_axes(const json_t *axes, char *out, size_t cap)
{
	sweep_group_label(axes, out, cap);
	for (char *p = out; *p; p++)
		if (*p == '"' || *p == '\\')
			*p = '\'';
}

/* one cell's log into its group: the evaluation records' curves, the end
 * record's staleness histogram */
static int
read_log(const char *path, pgroup *g, char *err)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return sl_fail(err, SL_EIO, "%s: %s", path, strerror(errno));
	char *line = NULL;
	size_t cap = 0;
	int rc = 0;
	while (rc == 0 && getline(&line, &cap, f) > 0) {
		json_t *r = json_loads(line, 0, NULL);
		if (!json_is_object(r)) {
			json_decref(r);
			continue;
		}
		const char *ev = json_string_value(json_object_get(r, "event"));
		json_t *v = json_object_get(r, "v");
		if (!ev && json_is_integer(v) && json_object_get(r, "test_acc")) {
			if (curve_add(&g->loss, (double)json_integer_value(v),
				      json_number_value(json_object_get(r, "train_loss"))) < 0 ||
			    curve_add(&g->acc, json_number_value(json_object_get(r, "epoch")),
				      json_number_value(json_object_get(r, "test_acc"))) < 0)
				rc = sl_fail(err, SL_ENOMEM, "out of memory");
		} else if (ev && !strcmp(ev, "end")) {
			json_t *h = json_object_get(json_object_get(r, "staleness"), "hist");
			for (size_t i = 0; i < json_array_size(h) && i < HIST_N; i++)
				g->hist[i] += json_number_value(json_array_get(h, i));
		}
		json_decref(r);
	}
	free(line);
	fclose(f);
	return rc;
}

static int
write_text(const char *dir, const char *name, const char *text, char *err)
{
	char path[4400];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return sweep_write_file(path, text, strlen(text), err);
}

/* append printf-style text to b */
static void __attribute__((format(printf, 2, 3)))
bprintf(sl_buf *b, const char *fmt, ...)
{
	char tmp[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		sl_buf_put(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* a figure: its data blocks (index i = group i) are already in file; the
 * script plots each, in an SVG and a PNG */
static void
figure(sl_buf *gp, const char *name, const char *file, const char *xlabel, const char *ylabel,
       const char *extra, const char *const *titles, int n)
{
	static const char *const terms[][2] = {
		{"svg size 900,560 dynamic noenhanced font 'sans,11'", "svg"},
		{"pngcairo size 900,560 noenhanced font 'sans,10'", "png"},
	};
	for (int t = 0; t < 2; t++) {
		bprintf(gp, "set terminal %s\nset output '%s.%s'\n", terms[t][0], name, terms[t][1]);
		bprintf(gp, "set xlabel \"%s\"\nset ylabel \"%s\"\n%s", xlabel, ylabel, extra);
		bprintf(gp, "plot ");
		for (int i = 0; i < n; i++)
			bprintf(gp, "%s'%s' index %d with linespoints pt 7 ps 0.4 title \"%s\"",
				i ? ", \\\n     " : "", file, i, titles[i]);
		bprintf(gp, "\nunset logscale\n");
	}
}

int
sweep_plot(const char *dir, const char *baseline, char *err)
{
	json_t *spec = NULL, *results = json_array();
	sweep_grid g;
	memset(&g, 0, sizeof(g));
	char cells[4200], figs[4200];
	char *done = NULL;
	pgroup *gs = NULL;
	int ng = 0, rc = sweep_dir_grid(dir, &spec, &g, err);
	char bkey[128] = "";
	json_t *bval = NULL;
	if (rc == 0 && baseline)
		rc = sweep_baseline(baseline, g.axis, g.n_axes, bkey, sizeof(bkey), &bval, err);
	if (rc == 0) {
		snprintf(cells, sizeof(cells), "%s/cells", dir);
		snprintf(figs, sizeof(figs), "%s/figures", dir);
		done = calloc((size_t)g.n_cells + 1, 1);
		gs = calloc((size_t)g.n_cells + 1, sizeof(pgroup));
		if (!done || !gs)
			rc = sl_fail(err, SL_ENOMEM, "out of memory");
	}
	if (rc == 0)
		rc = sweep_load_results(cells, &g, done, results, err);
	if (rc == 0 && !json_array_size(results))
		rc = sl_fail(err, SL_EINVAL, "%s: no finished cell to plot", dir);
	if (rc == 0 && mkdir(figs, 0777) < 0 && errno != EEXIST)
		rc = sl_fail(err, SL_EIO, "%s: %s", figs, strerror(errno));
	/* the groups, in grid order */
	for (size_t i = 0; rc == 0 && i < json_array_size(results); i++) {
		json_t *res = json_array_get(results, i);
		json_t *a = json_deep_copy(json_object_get(res, "axes"));
		json_object_del(a, "seed");
		int gi = -1;
		for (int k = 0; k < ng && gi < 0; k++)
			if (json_equal(gs[k].axes, a))
				gi = k;
		if (gi < 0) {
			gi = ng++;
			gs[gi].axes = json_incref(a);
			label_of_axes(a, gs[gi].label, sizeof(gs[gi].label));
		}
		json_decref(a);
		pgroup *pg = &gs[gi];
		char log[4400];
		snprintf(log, sizeof(log), "%s/%s.jsonl", cells,
			 json_string_value(json_object_get(res, "cell")));
		rc = read_log(log, pg, err);
		json_t *u = json_object_get(json_object_get(res, "metrics"), "updates_to_target");
		pg->cells++;
		if (json_is_number(u)) {
			pg->reach_sum += json_number_value(u);
			pg->reach_n++;
		}
	}
	sl_buf loss = {0}, acc = {0}, st = {0}, slow = {0}, gp = {0};
	const char **titles = rc == 0 ? calloc((size_t)ng + 1, sizeof(char *)) : NULL;
	if (rc == 0 && !titles)
		rc = sl_fail(err, SL_ENOMEM, "out of memory");
	for (int i = 0; rc == 0 && i < ng; i++) {
		pgroup *pg = &gs[i];
		titles[i] = pg->label;
		qsort(pg->loss.p, (size_t)pg->loss.n, sizeof(point), cmp_point);
		qsort(pg->acc.p, (size_t)pg->acc.n, sizeof(point), cmp_point);
		bprintf(&loss, "# %s\n", pg->label);
		for (int k = 0; k < pg->loss.n; k++)
			bprintf(&loss, "%.17g %.17g\n", pg->loss.p[k].x, pg->loss.p[k].ysum / pg->loss.p[k].n);
		bprintf(&acc, "# %s\n", pg->label);
		for (int k = 0; k < pg->acc.n; k++)
			bprintf(&acc, "%.17g %.17g\n", pg->acc.p[k].x, pg->acc.p[k].ysum / pg->acc.p[k].n);
		double tot = 0;
		for (int k = 0; k < HIST_N; k++)
			tot += pg->hist[k];
		bprintf(&st, "# %s (staleness 64: 64 and more)\n", pg->label);
		for (int k = 0; k < HIST_N; k++)
			if (tot > 0 && pg->hist[k] > 0)
				bprintf(&st, "%d %.17g\n", k, pg->hist[k] / tot);
		bprintf(&loss, "\n\n");
		bprintf(&acc, "\n\n");
		bprintf(&st, "\n\n");
	}
	/* the slow-down against the baseline key: a line per group of the
	 * other keys, its points the baseline key's values */
	int n_slow = 0;
	char slow_titles[64][256];
	const char *slow_t[64];
	if (rc == 0 && bval) {
		char *used = calloc((size_t)ng + 1, 1);
		for (int i = 0; i < ng && n_slow < 64 && used; i++) {
			if (used[i])
				continue;
			/* group i's line: every group that differs from it in bkey only */
			json_t *rest = json_deep_copy(gs[i].axes);
			json_object_del(rest, bkey);
			const pgroup *base = NULL;
			curve line = {0};
			for (int k = 0; k < ng; k++) {
				json_t *rk = json_deep_copy(gs[k].axes);
				json_object_del(rk, bkey);
				if (json_equal(rk, rest)) {
					used[k] = 1;
					if (json_equal(json_object_get(gs[k].axes, bkey), bval))
						base = &gs[k];
				}
				json_decref(rk);
			}
			for (int k = 0; base && k < ng; k++) {
				json_t *rk = json_deep_copy(gs[k].axes);
				json_object_del(rk, bkey);
				json_t *x = json_object_get(gs[k].axes, bkey);
				/* a ratio of means only where every seed reached the target */
				if (json_equal(rk, rest) && json_is_number(x) && gs[k].reach_n == gs[k].cells &&
				    base->reach_n == base->cells && base->reach_sum > 0)
					curve_add(&line, json_number_value(x),
						  (gs[k].reach_sum / gs[k].reach_n) /
							  (base->reach_sum / base->reach_n));
				json_decref(rk);
			}
			if (line.n) {
				qsort(line.p, (size_t)line.n, sizeof(point), cmp_point);
				label_of_axes(rest, slow_titles[n_slow], sizeof(slow_titles[0]));
				slow_t[n_slow] = slow_titles[n_slow];
				bprintf(&slow, "# %s\n", slow_titles[n_slow]);
				for (int k = 0; k < line.n; k++)
					bprintf(&slow, "%.17g %.17g\n", line.p[k].x, line.p[k].ysum);
				bprintf(&slow, "\n\n");
				n_slow++;
			}
			free(line.p);
			json_decref(rest);
		}
		free(used);
	}
	if (rc == 0) {
		bprintf(&gp, "# the figures of the sweep in %s (stalelab plot); run: gnuplot plots.gp\n"
			"set key outside right top\nset grid\n", dir);
		figure(&gp, "loss", "loss.dat", "updates", "train loss (mean over seeds)", "", titles, ng);
		figure(&gp, "accuracy", "accuracy.dat", "epochs", "test accuracy (mean over seeds)", "",
		       titles, ng);
		figure(&gp, "staleness", "staleness.dat", "staleness (versions)", "share of the gradients",
		       "set logscale y\n", titles, ng);
		if (n_slow) {
			char yl[256], xl[160];
			snprintf(yl, sizeof(yl), "updates to the target over those at %s", baseline);
			for (char *q = yl; *q; q++)
				if (*q == '"' || *q == '\\')
					*q = '\'';
			snprintf(xl, sizeof(xl), "%s", bkey);
			figure(&gp, "slowdown", "slowdown.dat", xl, yl, "", slow_t, n_slow);
		}
		if (loss.oom || acc.oom || st.oom || slow.oom || gp.oom)
			rc = sl_fail(err, SL_ENOMEM, "out of memory");
	}
	if (rc == 0)
		rc = write_text(figs, "loss.dat", loss.p ? loss.p : "", err);
	if (rc == 0)
		rc = write_text(figs, "accuracy.dat", acc.p ? acc.p : "", err);
	if (rc == 0)
		rc = write_text(figs, "staleness.dat", st.p ? st.p : "", err);
	if (rc == 0 && n_slow)
		rc = write_text(figs, "slowdown.dat", slow.p, err);
	if (rc == 0)
		rc = write_text(figs, "plots.gp", gp.p, err);
	if (rc == 0)
		rc = cli_run_gnuplot(figs, "plots.gp", err);
	if (rc == 0)
		printf("%s/{loss,accuracy,staleness%s}.{svg,png}: %d group%s from %zu cell%s\n", figs,
		       n_slow ? ",slowdown" : "", ng, ng == 1 ? "" : "s", json_array_size(results),
		       json_array_size(results) == 1 ? "" : "s");
	if (rc == 0 && bval && !n_slow)
		printf("no slowdown figure: no group reached the target with every seed at %s\n",
		       baseline);
	free(loss.p);
	free(acc.p);
	free(st.p);
	free(slow.p);
	free(gp.p);
	free(titles);
	for (int i = 0; gs && i < ng; i++) {
		json_decref(gs[i].axes);
		free(gs[i].loss.p);
		free(gs[i].acc.p);
	}
	free(gs);
	free(done);
	json_decref(bval);
	json_decref(results);
	json_decref(spec);
	sweep_grid_free(&g);
	return rc;
}

static const char plot_usage[] =
	"Usage: stalelab plot DIR [--baseline KEY=VALUE]\n"
	"\n"
	"The figures of the sweep in DIR (stalelab sweep --out DIR), through\n"
	"gnuplot, as SVG and PNG in DIR/figures: loss against updates and test\n"
	"accuracy against epochs (a line per group: every key but the seed, the\n"
	"seeds averaged), the staleness histograms, and with --baseline the\n"
	"updates to the target over the baseline group's against KEY. The data\n"
	"(*.dat) and the script (plots.gp) stay beside them. See\n"
	"docs/experiments.md.\n"
	"\n"
	"      --baseline K=V   the slowdown figure: against K, over the group\n"
	"                       with K=V and the same other keys\n"
	"  -h, --help           this text\n"
	"\n"
	"Exit status: 0 figures written, 1 gnuplot missing or failing (the data\n"
	"and script are written), 2 bad usage or no sweep in DIR.\n";

int
cmd_plot(int argc, char **argv)
{
	const char *baseline = NULL, *dir = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			fputs(plot_usage, stdout);
			return 0;
		} else if (!strcmp(argv[i], "--baseline") && i + 1 < argc) {
			baseline = argv[++i];
		} else if (!strncmp(argv[i], "--baseline=", 11)) {
			baseline = argv[i] + 11;
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "stalelab plot: unknown option '%s'\nTry 'stalelab plot --help'.\n",
				argv[i]);
			return 2;
		} else if (dir) {
			fprintf(stderr, "stalelab plot: one directory at a time\n");
			return 2;
		} else {
			dir = argv[i];
		}
	}
	if (!dir) {
		fprintf(stderr, "stalelab plot: which sweep? (stalelab plot DIR)\nTry 'stalelab plot --help'.\n");
		return 2;
	}
	char err[SL_ERR_LEN];
	int rc = sweep_plot(dir, baseline, err);
	if (rc < 0) {
		fprintf(stderr, "stalelab plot: %s\n", err);
		return rc == -SL_EIO || rc == -SL_ENOMEM ? 1 : 2;
	}
	return 0;
}
