/* sweep_plot.c - `stalelab plot DIR`: the figures of a sweep, through
 * gnuplot. The cells' logs are read back and grouped as --summary groups
 * them (every axis but the seed); the data go to DIR/figures (NAME.dat)
 * beside a gnuplot script, plots.gp, which gnuplot turns into an SVG and a
 * PNG of each figure (the data and script stay, for a machine without
 * gnuplot or a figure redone by hand):
 *
 *   loss        train loss against updates, a line per group: the mean
 *               over the seeds, a band from their least to their greatest
 *   accuracy    test accuracy against epochs, the same; the target a line
 *   staleness   the share of gradients at each staleness (the end records'
 *               histograms pooled; error bars: the range of each seed's
 *               share), a line per group, log scale
 *   slowdown    with --baseline K=V: updates to the target over the
 *               baseline group's (a ratio of means; error bars: the range
 *               of each seed's ratio to the same seed of the baseline);
 *               against K, a line per group of the other keys, when every
 *               value of K is a number, else a bar per group, clustered by
 *               the other keys; the groups left out (a seed short of the
 *               target) named in a note on the figure
 *
 * Every figure has a title (what it shows, the sweep, its groups, seeds
 * and target); a series of one point is drawn as a mark, every figure is
 * padded so that no point sits on its frame, and the line types are
 * cli_gnuplot_palette()'s (colour-blind-safe). When there is one seed
 * a group, the data have no spread columns and the figures no bands. */
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
#define NOTE_WIDTH 110 /* characters a line of a figure's note */

/* one point of a group's curve: the sum of its seeds' values (the mean
 * is ysum / n), their least and greatest */
typedef struct point {
	double x, ysum, ymin, ymax;
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
	double hist[HIST_N];               /* the cells' histograms summed */
	double smin[HIST_N], smax[HIST_N]; /* the range of a cell's share */
	int n_hist;                        /* cells with a histogram */
	json_t *reach; /* seed -> updates_to_target (null: never reached) */
} pgroup;

/* how a figure draws its series */
typedef enum fig_style {
	LINES_BAND, /* lines; the seeds' range a band around each */
	LINES_BARS, /* lines; the seeds' range as error bars */
	BOXES,      /* a bar per row; the seeds' range as error bars */
} fig_style;

/* one series of a figure: a block of its data file */
typedef struct series {
	char title[256];
	int index;  /* the block */
	int lt;     /* the line type (cli_gnuplot_palette) */
	int points; /* 1: drawn as a mark */
} series;

/* a figure: its data file's blocks drawn by the script, in an SVG and a
 * PNG */
typedef struct figspec {
	const char *name, *file, *xlabel, *ylabel;
	char title[1024]; /* gnuplot's "\n" between its lines */
	int height;       /* pixels */
	fig_style style;
	int spread;        /* the blocks have columns 3 and 4: the seeds' range */
	const char *extra; /* set commands before the plot */
	const char *more;  /* clauses after the series ("" none) */
	const series *s;
	int n;
} figspec;

static int
curve_add(curve *c, double x, double y)
{
	if (!isfinite(x) || !isfinite(y))
		return 0;
	for (int i = 0; i < c->n; i++)
		if (c->p[i].x == x) {
			point *q = &c->p[i];
			q->ysum += y;
			q->ymin = fmin(q->ymin, y);
			q->ymax = fmax(q->ymax, y);
			q->n++;
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
	c->p[c->n++] = (point){x, y, y, y, 1};
	return 0;
}

static int
cmp_point(const void *a, const void *b)
{
	double x = ((const point *)a)->x, y = ((const point *)b)->x;
	return (x > y) - (x < y);
}

/* text fit for a gnuplot string: no double quotes, no backslashes */
static void
gp_safe(char *s)
{
	for (char *p = s; *p; p++)
		if (*p == '"' || *p == '\\')
			*p = '\'';
}

/* a group's label as a gnuplot string */
static void
label_of_axes(const json_t *axes, char *out, size_t cap)
{
	sweep_group_label(axes, out, cap);
	gp_safe(out);
}

/* a cell's staleness histogram into its group: the counts summed, the
 * range of each staleness's share over the cells */
static void
add_hist(pgroup *g, const double *h)
{
	double tot = 0;
	for (int k = 0; k < HIST_N; k++)
		tot += h[k];
	if (!(tot > 0))
		return;
	for (int k = 0; k < HIST_N; k++) {
		double share = h[k] / tot;
		g->hist[k] += h[k];
		g->smin[k] = g->n_hist ? fmin(g->smin[k], share) : share;
		g->smax[k] = g->n_hist ? fmax(g->smax[k], share) : share;
	}
	g->n_hist++;
}

/* a group's staleness histogram as a curve: the pooled share at each
 * staleness that occurred, the range of the cells' shares; *least: the
 * least positive value of them, if less; 0, or -1 out of memory */
static int
stale_curve(const pgroup *g, curve *c, double *least)
{
	double tot = 0;
	for (int k = 0; k < HIST_N; k++)
		tot += g->hist[k];
	for (int k = 0; k < HIST_N; k++) {
		if (!(tot > 0 && g->hist[k] > 0))
			continue;
		if (curve_add(c, k, g->hist[k] / tot) < 0)
			return -1;
		c->p[c->n - 1].ymin = g->smin[k];
		c->p[c->n - 1].ymax = g->smax[k];
		*least = fmin(*least, g->hist[k] / tot);
		*least = g->smin[k] > 0 ? fmin(*least, g->smin[k]) : *least;
	}
	return 0;
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
	double h[HIST_N] = {0};
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
			json_t *hs = json_object_get(json_object_get(r, "staleness"), "hist");
			for (size_t i = 0; i < json_array_size(hs) && i < HIST_N; i++)
				h[i] += json_number_value(json_array_get(hs, i));
		}
		json_decref(r);
	}
	free(line);
	fclose(f);
	add_hist(g, h);
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
	va_list ap, again;
	va_start(ap, fmt);
	va_copy(again, ap);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	if (n >= (int)sizeof(tmp)) {
		char *big = malloc((size_t)n + 1);
		if (big) {
			vsnprintf(big, (size_t)n + 1, fmt, again);
			sl_buf_put(b, big, (size_t)n);
		} else {
			b->oom = 1;
		}
		free(big);
	} else if (n > 0) {
		sl_buf_put(b, tmp, (size_t)n);
	}
	va_end(again);
	va_end(ap);
}

/* a curve as a data block: "x mean" per point, and with spread the least
 * and greatest of the seeds (below floor: floor, the foot of a log
 * scale) */
static void
put_curve(sl_buf *b, const char *title, const curve *c, int spread, double floor)
{
	bprintf(b, "# %s\n", title);
	for (int k = 0; k < c->n; k++) {
		const point *q = &c->p[k];
		double m = q->ysum / q->n;
		if (spread)
			bprintf(b, "%.17g %.17g %.17g %.17g\n", q->x, m, fmax(fmin(q->ymin, m), floor),
				fmax(q->ymax, m));
		else
			bprintf(b, "%.17g %.17g\n", q->x, m);
	}
	bprintf(b, "\n\n");
}

/* the plot clauses of one series */
static void
series_clauses(sl_buf *gp, const figspec *f, const series *s)
{
	const char *rng = f->spread ? ":3:4" : "";
	if (f->style == BOXES) {
		bprintf(gp, "'%s' index %d using 1:2 with boxes lt %d title \"%s\"", f->file, s->index,
			s->lt, s->title);
		if (f->spread)
			bprintf(gp, ", \\\n     '%s' index %d using 1:2:3:4 with yerrorbars "
				    "lc rgb '#000000' lw 1.5 pt 7 ps 0.5 notitle", f->file, s->index);
	} else if (s->points == 1) {
		bprintf(gp, "'%s' index %d using 1:2%s with %s lt %d ps 1.4 title \"%s\"", f->file,
			s->index, rng, f->spread ? "yerrorbars" : "points", s->lt, s->title);
	} else if (f->spread && f->style == LINES_BARS) {
		bprintf(gp, "'%s' index %d using 1:2:3:4 with yerrorlines lt %d ps 0.6 title \"%s\"",
			f->file, s->index, s->lt, s->title);
	} else {
		if (f->spread)
			bprintf(gp, "'%s' index %d using 1:3:4 with filledcurves fs transparent solid 0.2 "
				    "noborder lt %d notitle, \\\n     ", f->file, s->index, s->lt);
		bprintf(gp, "'%s' index %d using 1:2 with linespoints lt %d ps 0.6 title \"%s\"",
			f->file, s->index, s->lt, s->title);
	}
}

static void
figure(sl_buf *gp, const figspec *f)
{
	static const char *const terms[][3] = {
		{"svg", "dynamic noenhanced font 'sans,11'", "svg"},
		{"pngcairo", "noenhanced font 'sans,10'", "png"},
	};
	for (int t = 0; t < 2; t++) {
		bprintf(gp, "set terminal %s size 900,%d %s\nset output '%s.%s'\nreset\n", terms[t][0],
			f->height, terms[t][1], f->name, terms[t][2]);
		bprintf(gp, "set title \"%s\"\nset key outside right top\nset grid\n"
			    "set offsets graph 0.02, graph 0.02, graph 0.05, graph 0.05\n", f->title);
		bprintf(gp, "set xlabel \"%s\"\nset ylabel \"%s\"\n%s", f->xlabel, f->ylabel, f->extra);
		bprintf(gp, "plot ");
		for (int i = 0; i < f->n; i++) {
			if (i)
				bprintf(gp, ", \\\n     ");
			series_clauses(gp, f, &f->s[i]);
		}
		bprintf(gp, "%s\n", f->more);
	}
}

/* a group whose seeds all reached the target: 1 and the mean of their
 * updates to it in *mean; else 0 and how many did in *reached */
static int
all_reached(const pgroup *g, double *mean, int *reached)
{
	const char *k;
	json_t *u;
	double sum = 0;
	int n = 0;
	json_object_foreach(g->reach, k, u) {
		if (json_is_number(u)) {
			sum += json_number_value(u);
			n++;
		}
	}
	*reached = n;
	*mean = n ? sum / n : 0;
	return g->cells > 0 && n == g->cells && sum > 0;
}

/* the range of each seed's updates to the target over its baseline
 * seed's, the ratio of the means r within it */
static void
seed_range(const pgroup *g, const pgroup *base, double r, double *lo, double *hi)
{
	const char *k;
	json_t *u;
	*lo = *hi = r;
	json_object_foreach(g->reach, k, u) {
		json_t *b = json_object_get(base->reach, k);
		if (json_is_number(u) && json_is_number(b) && json_number_value(b) > 0) {
			double x = json_number_value(u) / json_number_value(b);
			*lo = fmin(*lo, x);
			*hi = fmax(*hi, x);
		}
	}
}

/* the index of v in the array a, appended when absent; -1 out of memory */
static int
index_of(json_t *a, json_t *v)
{
	for (size_t i = 0; i < json_array_size(a); i++)
		if (json_equal(json_array_get(a, i), v))
			return (int)i;
	return json_array_append(a, v) < 0 ? -1 : (int)json_array_size(a) - 1;
}

/* a value as text: strings bare */
static void
value_text(const json_t *v, char *out, size_t cap)
{
	char *t = json_is_string(v) ? strdup(json_string_value(v)) : jsonout_dumps(v);
	snprintf(out, cap, "%s", t ? t : "?");
	free(t);
	gp_safe(out);
}

/* words into a note: lines of at most NOTE_WIDTH characters, gnuplot's
 * "\n" between them; the count of lines in *lines */
static void
note_put(sl_buf *b, const char *word, int *col, int *lines)
{
	size_t n = strlen(word);
	if (*col > 0 && *col + 1 + (int)n > NOTE_WIDTH) {
		bprintf(b, "\\n");
		*col = 0;
		(*lines)++;
	} else if (*col > 0) {
		bprintf(b, " ");
		(*col)++;
	}
	bprintf(b, "%s", word);
	*col += (int)n;
}

/* the slow-down figure's data (dat), series (s, *n, *bars when drawn as
 * bars) and settings (extra, with a note naming the groups left out;
 * *note_lines its lines): against a numeric key a line per group of the
 * other keys, its points the key's values; against another a bar per
 * group, clustered by the other keys. 0 (*n = 0 and why said when there
 * is no figure), or -SL_EINVAL with err naming a bad --baseline. */
static int
slowdown(const pgroup *gs, int ng, const char *bkey, const json_t *bval, const char *baseline,
	 double target, sl_buf *dat, series *s, int *n, int *bars, sl_buf *extra,
	 int *note_lines, char *why, size_t why_cap, char *err)
{
	json_t *vals = json_array(), *rests = json_array();
	int *vi = calloc((size_t)ng + 1, sizeof(int)), *ri = calloc((size_t)ng + 1, sizeof(int));
	const pgroup **base = calloc((size_t)ng + 1, sizeof(pgroup *));
	int rc = 0, numeric = 1, any_base = 0, max_seeds = 0, none = 0;
	char bv[128];
	value_text(bval, bv, sizeof(bv));
	*n = 0;
	if (!vals || !rests || !vi || !ri || !base)
		rc = sl_fail(err, SL_ENOMEM, "out of memory");
	for (int k = 0; rc == 0 && k < ng; k++) {
		json_t *v = json_object_get(gs[k].axes, bkey), *rest = json_deep_copy(gs[k].axes);
		json_object_del(rest, bkey);
		vi[k] = index_of(vals, v);
		ri[k] = index_of(rests, rest);
		if (!rest || vi[k] < 0 || ri[k] < 0) {
			rc = sl_fail(err, SL_ENOMEM, "out of memory");
			json_decref(rest);
			break;
		}
		numeric &= json_is_number(v);
		max_seeds = gs[k].cells > max_seeds ? gs[k].cells : max_seeds;
		if (json_equal(v, bval))
			base[ri[k]] = &gs[k];
		json_decref(rest);
	}
	int has_base = 0;
	for (size_t i = 0; rc == 0 && i < json_array_size(vals); i++)
		has_base |= json_equal(json_array_get(vals, i), bval);
	if (rc == 0 && !has_base) {
		sl_buf list = {0};
		for (size_t i = 0; i < json_array_size(vals); i++) {
			char t[128];
			value_text(json_array_get(vals, i), t, sizeof(t));
			bprintf(&list, "%s%s", i ? ", " : "", t);
		}
		rc = sl_fail(err, SL_EINVAL, "--baseline: %s has no value %s in this sweep (it has %s)",
			     bkey, strchr(baseline, '=') + 1, list.p ? list.p : "");
		free(list.p);
	}
	if (rc == 0 && !(target > 0)) {
		snprintf(why, why_cap, "the sweep has no \"target\" (the test accuracy whose updates "
			 "to reach it the figure compares; add \"target\": ACC to the sweep file)");
		none = 1;
	}
	double m, mb;
	int got;
	for (int r = 0; rc == 0 && r < (int)json_array_size(rests); r++)
		any_base |= base[r] && all_reached(base[r], &mb, &got);
	if (rc == 0 && !none && !any_base) {
		snprintf(why, why_cap, "no group with %s=%s reached the target %g with every seed", bkey,
			 bv, target);
		none = 1;
	}
	/* the note: every group left out, and why */
	sl_buf note = {0};
	int col = 0, nl = 1, left = 0;
	for (int k = 0; rc == 0 && !none && k < ng; k++) {
		const pgroup *b = base[ri[k]];
		char word[400];
		if (!all_reached(&gs[k], &m, &got))
			snprintf(word, sizeof(word), "%s (%d of %d seeds),", gs[k].label, got, gs[k].cells);
		else if (!b || !all_reached(b, &mb, &got))
			snprintf(word, sizeof(word), "%s (its %s=%s did not),", gs[k].label, bkey, bv);
		else
			continue;
		if (!left++)
			note_put(&note, "Left out, not reached by every seed:", &col, &nl);
		note_put(&note, word, &col, &nl);
	}
	if (note.p)
		note.p[note.n - 1] = 0; /* the last comma */
	/* the series: a block per line (numeric) or per value of the key */
	int lines = numeric ? (int)json_array_size(rests) : (int)json_array_size(vals);
	int clusters = 0;
	int *cl = calloc(json_array_size(rests) + 1, sizeof(int));
	if (rc == 0 && !cl)
		rc = sl_fail(err, SL_ENOMEM, "out of memory");
	for (int r = 0; rc == 0 && r < (int)json_array_size(rests); r++)
		cl[r] = base[r] && all_reached(base[r], &mb, &got) ? clusters++ : -1;
	int nv = (int)json_array_size(vals);
	double w = 0.8 / nv, xr[2] = {INFINITY, -INFINITY}, yr[2] = {INFINITY, -INFINITY};
	for (int L = 0; rc == 0 && !none && L < lines && *n < 64; L++) {
		curve line = {0};
		for (int k = 0; k < ng; k++) {
			const pgroup *b = base[ri[k]];
			if ((numeric ? ri[k] : vi[k]) != L || !b || !all_reached(&gs[k], &m, &got) ||
			    !all_reached(b, &mb, &got))
				continue;
			double x = numeric ? json_number_value(json_object_get(gs[k].axes, bkey))
					   : cl[ri[k]] + (vi[k] - (nv - 1) / 2.0) * w;
			double lo, hi;
			seed_range(&gs[k], b, m / mb, &lo, &hi);
			if (curve_add(&line, x, m / mb) < 0) {
				rc = sl_fail(err, SL_ENOMEM, "out of memory");
				break;
			}
			line.p[line.n - 1].ymin = lo;
			line.p[line.n - 1].ymax = hi;
			xr[0] = fmin(xr[0], x);
			xr[1] = fmax(xr[1], x);
			yr[0] = fmin(yr[0], lo);
			yr[1] = fmax(yr[1], hi);
		}
		if (rc == 0 && line.n) {
			series *q = &s[*n];
			if (numeric) {
				json_t *rest = json_array_get(rests, (size_t)L);
				label_of_axes(rest, q->title, sizeof(q->title));
			} else {
				char v[200];
				value_text(json_array_get(vals, (size_t)L), v, sizeof(v));
				snprintf(q->title, sizeof(q->title), "%s=%s", bkey, v);
				gp_safe(q->title);
			}
			qsort(line.p, (size_t)line.n, sizeof(point), cmp_point);
			q->index = (*n)++;
			q->lt = L + 1;
			q->points = line.n;
			put_curve(dat, q->title, &line, max_seeds > 1, -INFINITY);
		}
		free(line.p);
	}
	*bars = !numeric;
	/* every point at one x, or one y: a range around it (gnuplot's own
	 * choice says so on the terminal) */
	if (rc == 0 && *n && numeric && xr[0] == xr[1])
		bprintf(extra, "set xrange [%.17g:%.17g]\n", xr[0] - 1, xr[0] + 1);
	if (rc == 0 && *n && numeric && yr[0] == yr[1])
		bprintf(extra, "set yrange [%.17g:%.17g]\n", yr[0] - fmax(fabs(yr[0]) / 2, 0.5),
			yr[0] + fmax(fabs(yr[0]) / 2, 0.5));
	if (rc == 0 && *n && !numeric) {
		bprintf(extra, "set xtics (");
		for (int r = 0, c = 0; r < (int)json_array_size(rests); r++) {
			if (cl[r] < 0)
				continue;
			char t[256];
			label_of_axes(json_array_get(rests, (size_t)r), t, sizeof(t));
			bprintf(extra, "%s\"%s\" %d", c++ ? ", " : "", t, cl[r]);
		}
		bprintf(extra, ") rotate by -20 left\nset xrange [-0.6:%g]\nset yrange [0:*]\n"
			       "set boxwidth %g absolute\nset style fill solid 0.8 border lc rgb '#333333'\n",
			clusters - 0.4, w * 0.95);
	}
	if (rc == 0 && *n && note.p) {
		bprintf(extra, "set label 1 \"%s\" at character 1, character %d left front font ',9'\n"
			       "set bmargin %d\n", note.p, nl, 4 + nl + (numeric ? 0 : 3));
		*note_lines = nl;
	} else if (rc == 0 && *n && !numeric) {
		bprintf(extra, "set bmargin 7\n");
	}
	if (note.oom || extra->oom || dat->oom)
		rc = sl_fail(err, SL_ENOMEM, "out of memory");
	free(note.p);
	free(cl);
	free(vi);
	free(ri);
	free(base);
	json_decref(vals);
	json_decref(rests);
	return rc;
}

/* "DIR: 6 groups, 2 seeds each, target 0.7": the sweep's title line */
static void
sweep_line(const char *dir, const pgroup *gs, int ng, double target, char *out, size_t cap)
{
	char name[256];
	size_t len = strlen(dir);
	while (len > 1 && dir[len - 1] == '/')
		len--;
	size_t b = len;
	while (b > 0 && dir[b - 1] != '/')
		b--;
	snprintf(name, sizeof(name), "%.*s", (int)(len - b), dir + b);
	int lo = 0, hi = 0;
	for (int i = 0; i < ng; i++) {
		lo = i == 0 || gs[i].cells < lo ? gs[i].cells : lo;
		hi = gs[i].cells > hi ? gs[i].cells : hi;
	}
	char seeds[64], tg[64] = "";
	if (lo == hi)
		snprintf(seeds, sizeof(seeds), "%d seed%s each", hi, hi == 1 ? "" : "s");
	else
		snprintf(seeds, sizeof(seeds), "%d to %d seeds", lo, hi);
	if (target > 0)
		snprintf(tg, sizeof(tg), ", target %g", target);
	snprintf(out, cap, "%s: %d group%s, %s%s", name, ng, ng == 1 ? "" : "s", seeds, tg);
	gp_safe(out);
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
	/* the groups, in grid order */
	for (size_t i = 0; rc == 0 && i < json_array_size(results); i++) {
		json_t *res = json_array_get(results, i);
		json_t *a = json_deep_copy(json_object_get(res, "axes"));
		json_t *seed = json_object_get(a, "seed");
		char sk[32] = "";
		if (json_is_integer(seed))
			snprintf(sk, sizeof(sk), "%lld", (long long)json_integer_value(seed));
		json_object_del(a, "seed");
		int gi = -1;
		for (int k = 0; k < ng && gi < 0; k++)
			if (json_equal(gs[k].axes, a))
				gi = k;
		if (gi < 0) {
			gi = ng++;
			gs[gi].axes = json_incref(a);
			gs[gi].reach = json_object();
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
		if (!pg->reach || json_object_set_new(pg->reach, sk, json_is_number(u) ? json_incref(u)
										       : json_null()) < 0)
			rc = sl_fail(err, SL_ENOMEM, "out of memory");
	}
	int spread = 0;
	for (int i = 0; i < ng; i++)
		spread |= gs[i].cells > 1;
	sl_buf loss = {0}, acc = {0}, st = {0}, slow = {0}, slow_extra = {0}, gp = {0};
	series *ser = rc == 0 ? calloc((size_t)ng + 64, sizeof(series)) : NULL;
	curve *stc = rc == 0 ? calloc((size_t)ng + 1, sizeof(curve)) : NULL;
	if (rc == 0 && (!ser || !stc))
		rc = sl_fail(err, SL_ENOMEM, "out of memory");
	/* the staleness curves, and the foot of their log scale: below every
	 * share drawn, the seeds' least share when it is 0 */
	double least = 1;
	for (int i = 0; rc == 0 && i < ng; i++)
		if (stale_curve(&gs[i], &stc[i], &least) < 0)
			rc = sl_fail(err, SL_ENOMEM, "out of memory");
	double foot = least / 2;
	for (int i = 0; rc == 0 && i < ng; i++) {
		pgroup *pg = &gs[i];
		ser[i] = (series){.index = i, .lt = i + 1};
		snprintf(ser[i].title, sizeof(ser[i].title), "%s", pg->label);
		qsort(pg->loss.p, (size_t)pg->loss.n, sizeof(point), cmp_point);
		qsort(pg->acc.p, (size_t)pg->acc.n, sizeof(point), cmp_point);
		put_curve(&loss, pg->label, &pg->loss, spread, -INFINITY);
		put_curve(&acc, pg->label, &pg->acc, spread, -INFINITY);
		char t[300];
		snprintf(t, sizeof(t), "%s (staleness 64: 64 and more)", pg->label);
		put_curve(&st, t, &stc[i], spread, foot);
	}
	char line1[400], why[400] = "";
	sweep_line(dir, gs, ng, g.target, line1, sizeof(line1));
	series *sser = ser ? ser + ng : NULL;
	int n_slow = 0, note_lines = 0, bars = 0;
	if (rc == 0 && bval)
		rc = slowdown(gs, ng, bkey, bval, baseline, g.target, &slow, sser, &n_slow, &bars,
			      &slow_extra, &note_lines, why, sizeof(why), err);
	if (rc == 0 && mkdir(figs, 0777) < 0 && errno != EEXIST)
		rc = sl_fail(err, SL_EIO, "%s: %s", figs, strerror(errno));
	if (rc == 0) {
		const char *band = spread ? "; line: the mean over the seeds, band: their least to "
					    "greatest" : "";
		const char *ebars = spread ? "; error bars: the seeds' least to greatest" : "";
		char more[200] = "", stx[200] = "set logscale y\n";
		if (g.target > 0)
			snprintf(more, sizeof(more), ", \\\n     %g with lines lt 7 lw 1.5 dt 3 "
				 "title \"target %g\"", g.target, g.target);
		if (spread)
			snprintf(stx, sizeof(stx), "set logscale y\nset yrange [%.17g:*]\n", foot);
		snprintf(stx + strlen(stx), sizeof(stx) - strlen(stx), "set xrange [-1:*]\n");
		bprintf(&gp, "# the figures of the sweep in %s (stalelab plot); run: gnuplot plots.gp\n"
			"%s", dir, cli_gnuplot_palette());
		figspec f = {"loss", "loss.dat", "updates", "train loss", "", 560, LINES_BAND, spread,
			     "", "", ser, ng};
		snprintf(f.title, sizeof(f.title), "Train loss against updates\\n%s%s", line1, band);
		for (int i = 0; i < ng; i++)
			ser[i].points = gs[i].loss.n;
		figure(&gp, &f);
		f = (figspec){"accuracy", "accuracy.dat", "epochs", "test accuracy", "", 560,
			      LINES_BAND, spread, "", more, ser, ng};
		snprintf(f.title, sizeof(f.title), "Test accuracy against epochs\\n%s%s", line1, band);
		for (int i = 0; i < ng; i++)
			ser[i].points = gs[i].acc.n;
		figure(&gp, &f);
		f = (figspec){"staleness", "staleness.dat", "staleness (versions; 64: 64 and more)",
			      "share of the applied gradients", "", 560, LINES_BARS, spread, stx, "",
			      ser, ng};
		snprintf(f.title, sizeof(f.title), "Staleness of the applied gradients (the seeds' "
			 "histograms pooled)\\n%s%s%s", line1, ebars,
			 spread ? " (at the foot: a seed had none)" : "");
		for (int i = 0; i < ng; i++)
			ser[i].points = stc[i].n;
		figure(&gp, &f);
		if (n_slow) {
			char yl[400], bv[128], xl[400], k[128];
			value_text(bval, bv, sizeof(bv));
			snprintf(k, sizeof(k), "%s", bkey);
			gp_safe(k);
			snprintf(xl, sizeof(xl), "%s", k);
			/* bars: clustered by the other keys */
			for (int i = 0, c = 0, len = 0; bars && i < g.n_axes && len < (int)sizeof(xl); i++)
				if (strcmp(g.axis[i].key, bkey) && strcmp(g.axis[i].key, "seed"))
					len += snprintf(xl + len, sizeof(xl) - (size_t)len, "%s%s",
							c++ ? ", " : "", g.axis[i].key);
			gp_safe(xl);
			snprintf(yl, sizeof(yl), "updates to the target over those at %s=%s", k, bv);
			f = (figspec){"slowdown", "slowdown.dat", xl, yl, "", 560 + 14 * note_lines,
				      bars ? BOXES : LINES_BARS, spread,
				      slow_extra.p ? slow_extra.p : "",
				      ", \\\n     1 with lines lc rgb '#888888' lw 1 dt 2 notitle", sser,
				      n_slow};
			snprintf(f.title, sizeof(f.title), "Updates to reach the target %g, over those at "
				 "%s=%s\\n%s; %s%s", g.target, k, bv, line1,
				 bars ? "a bar per group" : "a line per group of the other keys",
				 spread ? "\\nerror bars: each seed's ratio to the same seed at the "
					  "baseline, least to greatest" : "");
			figure(&gp, &f);
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
		printf("no slowdown figure: %s\n", why[0] ? why : "no group to draw");
	free(loss.p);
	free(acc.p);
	free(st.p);
	free(slow.p);
	free(slow_extra.p);
	free(gp.p);
	free(ser);
	for (int i = 0; stc && i < ng; i++)
		free(stc[i].p);
	free(stc);
	for (int i = 0; gs && i < ng; i++) {
		json_decref(gs[i].axes);
		json_decref(gs[i].reach);
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
	"accuracy against epochs (a line per group: every key but the seed; the\n"
	"seeds' mean, and a band from their least to their greatest), the\n"
	"staleness histograms, and with --baseline the updates to the target\n"
	"over the baseline group's against KEY (a line per group of the other\n"
	"keys when KEY is numeric, else a bar per group; the groups a seed left\n"
	"short of the target named on the figure). Each figure has a title with\n"
	"the sweep's target. The data (*.dat) and the script (plots.gp) stay\n"
	"beside them. See docs/experiments.md.\n"
	"\n"
	"      --baseline K=V   the slowdown figure: against K, over the group\n"
	"                       with K=V and the same other keys (a V that K\n"
	"                       does not take: exit 2)\n"
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
