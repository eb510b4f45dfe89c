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

/* the slow-down figure's groups laid out against the baseline's key */
typedef struct slow_layout {
	const pgroup *gs;
	int ng;
	const char *bkey;     /* the baseline's key ... */
	const json_t *bval;   /* ... and value */
	char bv[128];         /* the value as text */
	json_t *vals, *rests; /* the key's values; the other keys' values, in order met */
	int *vi, *ri;         /* a group's index in each */
	const pgroup **base;  /* per rest: its group at the baseline (NULL: none) */
	int *cl;              /* per rest: its cluster of bars (-1: its baseline fell short) */
	int numeric;          /* every value of the key a number: a line per rest */
	int max_seeds, clusters, nv;
	double w;             /* a bar's share of a cluster */
} slow_layout;

/* the groups indexed by the key's value and by the rest of their axes,
 * each rest's baseline group and cluster; 0 or -SL_ENOMEM */
static int
slow_index(slow_layout *L, char *err)
{
	int ng = L->ng;
	L->numeric = 1;
	L->vals = json_array();
	L->rests = json_array();
	L->vi = calloc((size_t)ng + 1, sizeof(int));
	L->ri = calloc((size_t)ng + 1, sizeof(int));
	L->base = calloc((size_t)ng + 1, sizeof(pgroup *));
	if (!L->vals || !L->rests || !L->vi || !L->ri || !L->base)
		return sl_fail(err, SL_ENOMEM, "out of memory");
	for (int k = 0; k < ng; k++) {
		const pgroup *g = &L->gs[k];
		json_t *v = json_object_get(g->axes, L->bkey), *rest;
		if (!v) /* a variant without that axis */
			return sl_fail(err, SL_EINVAL, "--baseline %s: the group %s has no %s "
				       "(a variant without that axis); give a key every group has",
				       L->bkey, g->label, L->bkey);
		rest = json_deep_copy(g->axes);
		json_object_del(rest, L->bkey);
		L->vi[k] = index_of(L->vals, v);
		L->ri[k] = index_of(L->rests, rest);
		int bad = !rest || L->vi[k] < 0 || L->ri[k] < 0;
		if (!bad) {
			L->numeric &= json_is_number(v);
			L->max_seeds = g->cells > L->max_seeds ? g->cells : L->max_seeds;
			if (json_equal(v, (json_t *)L->bval))
				L->base[L->ri[k]] = g;
		}
		json_decref(rest);
		if (bad)
			return sl_fail(err, SL_ENOMEM, "out of memory");
	}
	return 0;
}

/* --baseline's value one the key takes in this sweep: 0, else
 * -SL_EINVAL naming the values it does take */
static int
slow_check_value(const slow_layout *L, const char *baseline, char *err)
{
	for (size_t i = 0; i < json_array_size(L->vals); i++)
		if (json_equal(json_array_get(L->vals, i), (json_t *)L->bval))
			return 0;
	sl_buf list = {0};
	for (size_t i = 0; i < json_array_size(L->vals); i++) {
		char t[128];
		value_text(json_array_get(L->vals, i), t, sizeof(t));
		bprintf(&list, "%s%s", i ? ", " : "", t);
	}
	int rc = sl_fail(err, SL_EINVAL, "--baseline: %s has no value %s in this sweep (it has %s)",
			 L->bkey, strchr(baseline, '=') + 1, list.p ? list.p : "");
	free(list.p);
	return rc;
}

/* whether a rest's baseline group reached the target with every seed */
static int
base_reached(const slow_layout *L, int r)
{
	double mb;
	int got;
	return L->base[r] && all_reached(L->base[r], &mb, &got);
}

/* no figure to draw: 1 and why (no target, or no baseline group reached
 * it with every seed), else 0 */
static int
slow_none(const slow_layout *L, double target, char *why, size_t why_cap)
{
	if (!(target > 0)) {
		snprintf(why, why_cap, "the sweep has no \"target\" (the test accuracy whose updates "
			 "to reach it the figure compares; add \"target\": ACC to the sweep file)");
		return 1;
	}
	for (int r = 0; r < (int)json_array_size(L->rests); r++)
		if (base_reached(L, r))
			return 0;
	snprintf(why, why_cap, "no group with %s=%s reached the target %g with every seed", L->bkey,
		 L->bv, target);
	return 1;
}

/* the note: every group left out, and why (a seed short of the target,
 * or its baseline's); *nl its lines */
static void
slow_note(const slow_layout *L, sl_buf *note, int *nl)
{
	int col = 0, left = 0;
	for (int k = 0; k < L->ng; k++) {
		const pgroup *g = &L->gs[k], *b = L->base[L->ri[k]];
		char word[400];
		double m;
		int got;
		if (!all_reached(g, &m, &got))
			snprintf(word, sizeof(word), "%s (%d of %d seeds),", g->label, got, g->cells);
		else if (!b || !all_reached(b, &m, &got))
			snprintf(word, sizeof(word), "%s (its %s=%s did not),", g->label, L->bkey,
				 L->bv);
		else
			continue;
		if (!left++)
			note_put(note, "Left out, not reached by every seed:", &col, nl);
		note_put(note, word, &col, nl);
	}
	if (note->p)
		note->p[note->n - 1] = 0; /* the last comma */
}

/* the bars' clusters: a rest whose baseline reached the target gets the
 * next; 0 or -SL_ENOMEM */
static int
slow_clusters(slow_layout *L, char *err)
{
	L->cl = calloc(json_array_size(L->rests) + 1, sizeof(int));
	if (!L->cl)
		return sl_fail(err, SL_ENOMEM, "out of memory");
	for (int r = 0; r < (int)json_array_size(L->rests); r++)
		L->cl[r] = base_reached(L, r) ? L->clusters++ : -1;
	return 0;
}

/* series i's points: each group of it whose seeds and baseline's all
 * reached the target, at the key's value (a line) or at its bar in its
 * cluster, the ratio of means and the seeds' range; xr and yr widened
 * to them. 0 or -1 out of memory */
static int
slow_curve(const slow_layout *L, int i, curve *line, double xr[2], double yr[2])
{
	for (int k = 0; k < L->ng; k++) {
		const pgroup *g = &L->gs[k], *b = L->base[L->ri[k]];
		double m, mb;
		int got;
		if ((L->numeric ? L->ri[k] : L->vi[k]) != i || !b || !all_reached(g, &m, &got) ||
		    !all_reached(b, &mb, &got))
			continue;
		double x = L->numeric ? json_number_value(json_object_get(g->axes, L->bkey))
				      : L->cl[L->ri[k]] + (L->vi[k] - (L->nv - 1) / 2.0) * L->w;
		double lo, hi;
		seed_range(g, b, m / mb, &lo, &hi);
		if (curve_add(line, x, m / mb) < 0)
			return -1;
		line->p[line->n - 1].ymin = lo;
		line->p[line->n - 1].ymax = hi;
		xr[0] = fmin(xr[0], x);
		xr[1] = fmax(xr[1], x);
		yr[0] = fmin(yr[0], lo);
		yr[1] = fmax(yr[1], hi);
	}
	return 0;
}

/* the series, a block of dat each: a line per rest (numeric) or a bar
 * series per value of the key, at most 64; *n of them in s; xr and yr
 * the points' ranges. 0 or -SL_ENOMEM */
static int
slow_series(const slow_layout *L, sl_buf *dat, series *s, int *n, double xr[2], double yr[2],
	    char *err)
{
	int lines = (int)json_array_size(L->numeric ? L->rests : L->vals);
	for (int i = 0; i < lines && *n < 64; i++) {
		curve line = {0};
		if (slow_curve(L, i, &line, xr, yr) < 0) {
			free(line.p);
			return sl_fail(err, SL_ENOMEM, "out of memory");
		}
		if (line.n) {
			series *q = &s[*n];
			if (L->numeric) {
				label_of_axes(json_array_get(L->rests, (size_t)i), q->title,
					      sizeof(q->title));
			} else {
				char v[200];
				value_text(json_array_get(L->vals, (size_t)i), v, sizeof(v));
				snprintf(q->title, sizeof(q->title), "%s=%s", L->bkey, v);
				gp_safe(q->title);
			}
			qsort(line.p, (size_t)line.n, sizeof(point), cmp_point);
			q->index = (*n)++;
			q->lt = i + 1;
			q->points = line.n;
			put_curve(dat, q->title, &line, L->max_seeds > 1, -INFINITY);
		}
		free(line.p);
	}
	return 0;
}

/* the figure's settings: a range around the points when they share an x
 * or a y (gnuplot's own choice says so on the terminal); the bars'
 * ticks, one per cluster, and their look; the note at the foot */
static void
slow_settings(const slow_layout *L, sl_buf *extra, const sl_buf *note, int nl,
	      const double xr[2], const double yr[2], int *note_lines)
{
	if (L->numeric && xr[0] == xr[1])
		bprintf(extra, "set xrange [%.17g:%.17g]\n", xr[0] - 1, xr[0] + 1);
	if (L->numeric && yr[0] == yr[1])
		bprintf(extra, "set yrange [%.17g:%.17g]\n", yr[0] - fmax(fabs(yr[0]) / 2, 0.5),
			yr[0] + fmax(fabs(yr[0]) / 2, 0.5));
	if (!L->numeric) {
		bprintf(extra, "set xtics (");
		for (int r = 0, c = 0; r < (int)json_array_size(L->rests); r++) {
			if (L->cl[r] < 0)
				continue;
			char t[256];
			label_of_axes(json_array_get(L->rests, (size_t)r), t, sizeof(t));
			bprintf(extra, "%s\"%s\" %d", c++ ? ", " : "", t, L->cl[r]);
		}
		bprintf(extra, ") rotate by -20 left\nset xrange [-0.6:%g]\nset yrange [0:*]\n"
			       "set boxwidth %g absolute\nset style fill solid 0.8 border lc rgb '#333333'\n",
			L->clusters - 0.4, L->w * 0.95);
	}
	if (note->p) {
		bprintf(extra, "set label 1 \"%s\" at character 1, character %d left front font ',9'\n"
			       "set bmargin %d\n", note->p, nl, 4 + nl + (L->numeric ? 0 : 3));
		*note_lines = nl;
	} else if (!L->numeric) {
		bprintf(extra, "set bmargin 7\n");
	}
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
	slow_layout L = {.gs = gs, .ng = ng, .bkey = bkey, .bval = bval};
	value_text(bval, L.bv, sizeof(L.bv));
	*n = 0;
	int rc = slow_index(&L, err);
	if (rc == 0)
		rc = slow_check_value(&L, baseline, err);
	int none = rc == 0 && slow_none(&L, target, why, why_cap);
	sl_buf note = {0};
	int nl = 1;
	if (rc == 0 && !none)
		slow_note(&L, &note, &nl);
	if (rc == 0)
		rc = slow_clusters(&L, err);
	L.nv = (int)json_array_size(L.vals);
	L.w = 0.8 / L.nv;
	double xr[2] = {INFINITY, -INFINITY}, yr[2] = {INFINITY, -INFINITY};
	if (rc == 0 && !none)
		rc = slow_series(&L, dat, s, n, xr, yr, err);
	*bars = !L.numeric;
	if (rc == 0 && *n)
		slow_settings(&L, extra, &note, nl, xr, yr, note_lines);
	if (note.oom || extra->oom || dat->oom)
		rc = sl_fail(err, SL_ENOMEM, "out of memory");
	free(note.p);
	free(L.cl);
	free(L.vi);
	free(L.ri);
	free(L.base);
	json_decref(L.vals);
	json_decref(L.rests);
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

/* a sweep's figures in the making */
typedef struct plot_job {
	const char *dir, *baseline;
	json_t *spec, *results; /* the sweep file; the finished cells' results */
	sweep_grid g;
	char cells[4200], figs[4200]; /* DIR/cells, DIR/figures */
	char *done;
	pgroup *gs; /* the groups, in grid order */
	int ng;
	int spread; /* a group with more than one seed: bands and error bars */
	char bkey[128];
	json_t *bval; /* --baseline's key and value (NULL: none) */
	sl_buf loss, acc, st, slow, slow_extra, gp; /* the .dat files, the script */
	series *ser; /* a series per group, then the slow-down figure's */
	curve *stc;  /* the groups' staleness curves */
	double foot; /* the staleness figure's foot, below every share drawn */
	char line1[400], why[400]; /* the sweep's title line; why no slow-down figure */
	int n_slow, note_lines, bars;
} plot_job;

/* the sweep in p->dir: its grid, --baseline checked against its axes,
 * the finished cells' results (none: -SL_EINVAL) */
static int
plot_load(plot_job *p, char *err)
{
	p->results = json_array();
	int rc = sweep_dir_grid(p->dir, &p->spec, &p->g, err);
	if (rc == 0 && p->baseline)
		rc = sweep_baseline(p->baseline, p->g.axis, p->g.n_axes, p->bkey, sizeof(p->bkey),
				    &p->bval, err);
	if (rc == 0) {
		snprintf(p->cells, sizeof(p->cells), "%s/cells", p->dir);
		snprintf(p->figs, sizeof(p->figs), "%s/figures", p->dir);
		p->done = calloc((size_t)p->g.n_cells + 1, 1);
		p->gs = calloc((size_t)p->g.n_cells + 1, sizeof(pgroup));
		if (!p->done || !p->gs)
			rc = sl_fail(err, SL_ENOMEM, "out of memory");
	}
	if (rc == 0)
		rc = sweep_load_results(p->cells, &p->g, p->done, p->results, err);
	if (rc == 0 && !json_array_size(p->results))
		rc = sl_fail(err, SL_EINVAL, "%s: no finished cell to plot", p->dir);
	return rc;
}

/* the group of axes a (the seed taken out), added when new */
static pgroup *
plot_group(plot_job *p, json_t *a)
{
	for (int k = 0; k < p->ng; k++)
		if (json_equal(p->gs[k].axes, a))
			return &p->gs[k];
	pgroup *pg = &p->gs[p->ng++];
	pg->axes = json_incref(a);
	pg->reach = json_object();
	label_of_axes(a, pg->label, sizeof(pg->label));
	return pg;
}

/* each finished cell into its group: its log's curves and histogram,
 * its seed's updates to the target */
static int
plot_groups(plot_job *p, char *err)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < json_array_size(p->results); i++) {
		json_t *res = json_array_get(p->results, i);
		json_t *a = json_deep_copy(json_object_get(res, "axes"));
		json_t *seed = json_object_get(a, "seed");
		char sk[32] = "";
		if (json_is_integer(seed))
			snprintf(sk, sizeof(sk), "%lld", (long long)json_integer_value(seed));
		json_object_del(a, "seed");
		pgroup *pg = plot_group(p, a);
		json_decref(a);
		char log[4400];
		snprintf(log, sizeof(log), "%s/%s.jsonl", p->cells,
			 json_string_value(json_object_get(res, "cell")));
		rc = read_log(log, pg, err);
		json_t *u = json_object_get(json_object_get(res, "metrics"), "updates_to_target");
		pg->cells++;
		if (!pg->reach || json_object_set_new(pg->reach, sk, json_is_number(u) ? json_incref(u)
										       : json_null()) < 0)
			rc = sl_fail(err, SL_ENOMEM, "out of memory");
	}
	for (int i = 0; i < p->ng; i++)
		p->spread |= p->gs[i].cells > 1;
	return rc;
}

/* the data of the loss, accuracy and staleness figures, a block per
 * group, and their series */
static int
plot_data(plot_job *p, char *err)
{
	int ng = p->ng;
	p->ser = calloc((size_t)ng + 64, sizeof(series));
	p->stc = calloc((size_t)ng + 1, sizeof(curve));
	if (!p->ser || !p->stc)
		return sl_fail(err, SL_ENOMEM, "out of memory");
	/* the staleness curves, and the foot of their log scale: below every
	 * share drawn, the seeds' least share when it is 0 */
	double least = 1;
	for (int i = 0; i < ng; i++)
		if (stale_curve(&p->gs[i], &p->stc[i], &least) < 0)
			return sl_fail(err, SL_ENOMEM, "out of memory");
	p->foot = least / 2;
	for (int i = 0; i < ng; i++) {
		pgroup *pg = &p->gs[i];
		p->ser[i] = (series){.index = i, .lt = i + 1};
		snprintf(p->ser[i].title, sizeof(p->ser[i].title), "%s", pg->label);
		qsort(pg->loss.p, (size_t)pg->loss.n, sizeof(point), cmp_point);
		qsort(pg->acc.p, (size_t)pg->acc.n, sizeof(point), cmp_point);
		put_curve(&p->loss, pg->label, &pg->loss, p->spread, -INFINITY);
		put_curve(&p->acc, pg->label, &pg->acc, p->spread, -INFINITY);
		char t[300];
		snprintf(t, sizeof(t), "%s (staleness 64: 64 and more)", pg->label);
		put_curve(&p->st, t, &p->stc[i], p->spread, p->foot);
	}
	return 0;
}

/* the slow-down figure into the script: against the key (the other keys
 * with bars), its note's lines added to its height */
static void
script_slowdown(plot_job *p)
{
	char yl[400], bv[128], xl[400], k[128];
	value_text(p->bval, bv, sizeof(bv));
	snprintf(k, sizeof(k), "%s", p->bkey);
	gp_safe(k);
	snprintf(xl, sizeof(xl), "%s", k);
	/* bars: clustered by the other keys */
	for (int i = 0, c = 0, len = 0; p->bars && i < p->g.n_axes && len < (int)sizeof(xl); i++)
		if (strcmp(p->g.axis[i].key, p->bkey) && strcmp(p->g.axis[i].key, "seed"))
			len += snprintf(xl + len, sizeof(xl) - (size_t)len, "%s%s", c++ ? ", " : "",
					p->g.axis[i].key);
	gp_safe(xl);
	snprintf(yl, sizeof(yl), "updates to the target over those at %s=%s", k, bv);
	figspec f = {"slowdown", "slowdown.dat", xl, yl, "", 560 + 14 * p->note_lines,
		     p->bars ? BOXES : LINES_BARS, p->spread,
		     p->slow_extra.p ? p->slow_extra.p : "",
		     ", \\\n     1 with lines lc rgb '#888888' lw 1 dt 2 notitle", p->ser + p->ng,
		     p->n_slow};
	snprintf(f.title, sizeof(f.title), "Updates to reach the target %g, over those at "
		 "%s=%s\\n%s; %s%s", p->g.target, k, bv, p->line1,
		 p->bars ? "a bar per group" : "a line per group of the other keys",
		 p->spread ? "\\nerror bars: each seed's ratio to the same seed at the "
			     "baseline, least to greatest" : "");
	figure(&p->gp, &f);
}

/* plots.gp: the palette, then the loss, accuracy and staleness figures
 * and the slow-down figure when there is one */
static int
plot_script(plot_job *p, char *err)
{
	int ng = p->ng, spread = p->spread;
	double target = p->g.target;
	series *ser = p->ser;
	const char *band = spread ? "; line: the mean over the seeds, band: their least to "
				    "greatest" : "";
	const char *ebars = spread ? "; error bars: the seeds' least to greatest" : "";
	char more[200] = "", stx[200] = "set logscale y\n";
	if (target > 0)
		snprintf(more, sizeof(more), ", \\\n     %g with lines lt 7 lw 1.5 dt 3 "
			 "title \"target %g\"", target, target);
	if (spread)
		snprintf(stx, sizeof(stx), "set logscale y\nset yrange [%.17g:*]\n", p->foot);
	snprintf(stx + strlen(stx), sizeof(stx) - strlen(stx), "set xrange [-1:*]\n");
	bprintf(&p->gp, "# the figures of the sweep in %s (stalelab plot); run: gnuplot plots.gp\n"
		"%s", p->dir, cli_gnuplot_palette());
	figspec f = {"loss", "loss.dat", "updates", "train loss", "", 560, LINES_BAND, spread,
		     "", "", ser, ng};
	snprintf(f.title, sizeof(f.title), "Train loss against updates\\n%s%s", p->line1, band);
	for (int i = 0; i < ng; i++)
		ser[i].points = p->gs[i].loss.n;
	figure(&p->gp, &f);
	f = (figspec){"accuracy", "accuracy.dat", "epochs", "test accuracy", "", 560,
		      LINES_BAND, spread, "", more, ser, ng};
	snprintf(f.title, sizeof(f.title), "Test accuracy against epochs\\n%s%s", p->line1, band);
	for (int i = 0; i < ng; i++)
		ser[i].points = p->gs[i].acc.n;
	figure(&p->gp, &f);
	f = (figspec){"staleness", "staleness.dat", "staleness (versions; 64: 64 and more)",
		      "share of the applied gradients", "", 560, LINES_BARS, spread, stx, "",
		      ser, ng};
	snprintf(f.title, sizeof(f.title), "Staleness of the applied gradients (the seeds' "
		 "histograms pooled)\\n%s%s%s", p->line1, ebars,
		 spread ? " (at the foot: a seed had none)" : "");
	for (int i = 0; i < ng; i++)
		ser[i].points = p->stc[i].n;
	figure(&p->gp, &f);
	if (p->n_slow)
		script_slowdown(p);
	if (p->loss.oom || p->acc.oom || p->st.oom || p->slow.oom || p->gp.oom)
		return sl_fail(err, SL_ENOMEM, "out of memory");
	return 0;
}

/* the data and the script into DIR/figures, then gnuplot, then what it
 * drew on stdout (and why no slow-down figure, when asked for one) */
static int
plot_write(plot_job *p, char *err)
{
	const char *figs = p->figs;
	int rc = write_text(figs, "loss.dat", p->loss.p ? p->loss.p : "", err);
	if (rc == 0)
		rc = write_text(figs, "accuracy.dat", p->acc.p ? p->acc.p : "", err);
	if (rc == 0)
		rc = write_text(figs, "staleness.dat", p->st.p ? p->st.p : "", err);
	if (rc == 0 && p->n_slow)
		rc = write_text(figs, "slowdown.dat", p->slow.p, err);
	if (rc == 0)
		rc = write_text(figs, "plots.gp", p->gp.p, err);
	if (rc == 0)
		rc = cli_run_gnuplot(figs, "plots.gp", err);
	if (rc < 0)
		return rc;
	size_t n = json_array_size(p->results);
	printf("%s/{loss,accuracy,staleness%s}.{svg,png}: %d group%s from %zu cell%s\n", figs,
	       p->n_slow ? ",slowdown" : "", p->ng, p->ng == 1 ? "" : "s", n, n == 1 ? "" : "s");
	if (p->bval && !p->n_slow)
		printf("no slowdown figure: %s\n", p->why[0] ? p->why : "no group to draw");
	return 0;
}

static void
plot_free(plot_job *p)
{
	free(p->loss.p);
	free(p->acc.p);
	free(p->st.p);
	free(p->slow.p);
	free(p->slow_extra.p);
	free(p->gp.p);
	free(p->ser);
	for (int i = 0; p->stc && i < p->ng; i++)
		free(p->stc[i].p);
	free(p->stc);
	for (int i = 0; p->gs && i < p->ng; i++) {
		json_decref(p->gs[i].axes);
		json_decref(p->gs[i].reach);
		free(p->gs[i].loss.p);
		free(p->gs[i].acc.p);
	}
	free(p->gs);
	free(p->done);
	json_decref(p->bval);
	json_decref(p->results);
	json_decref(p->spec);
	sweep_grid_free(&p->g);
}

int
sweep_plot(const char *dir, const char *baseline, char *err)
{
	plot_job pj = {.dir = dir, .baseline = baseline}, *p = &pj;
	int rc = plot_load(p, err);
	if (rc == 0)
		rc = plot_groups(p, err);
	if (rc == 0)
		rc = plot_data(p, err);
	sweep_line(dir, p->gs, p->ng, p->g.target, p->line1, sizeof(p->line1));
	if (rc == 0 && p->bval)
		rc = slowdown(p->gs, p->ng, p->bkey, p->bval, baseline, p->g.target, &p->slow,
			      p->ser + p->ng, &p->n_slow, &p->bars, &p->slow_extra, &p->note_lines,
			      p->why, sizeof(p->why), err);
	if (rc == 0 && mkdir(p->figs, 0777) < 0 && errno != EEXIST)
		rc = sl_fail(err, SL_EIO, "%s: %s", p->figs, strerror(errno));
	if (rc == 0)
		rc = plot_script(p, err);
	if (rc == 0)
		rc = plot_write(p, err);
	plot_free(p);
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
