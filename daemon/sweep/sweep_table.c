/* sweep_table.c - a sweep's results: the metrics of a cell, results.csv,
 * the finished cells read back, the summary over seeds. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonout.h"
#include "sl.h"
#include "sweep.h"
#include "sweep_impl.h"

const sweep_metric sweep_metrics[] = {
	{"final_acc", 0, "test accuracy at the end"},
	{"best_acc", 0, "best test accuracy of the run's evaluations"},
	{"test_loss", 0, "test loss at the end"},
	{"updates", 0, "server updates applied (the version)"},
	{"samples", 0, "training samples processed"},
	{"epochs", 0, "samples over the training set's size"},
	{"virtual_s", 0, "virtual seconds at the end"},
	{"updates_to_target", 0, "the version of the first evaluation at the target accuracy (empty: never)"},
	{"virtual_s_to_target", 0, "its virtual time"},
	{"epochs_to_target", 0, "its epoch"},
	{"stale_mean", 0, "mean staleness (versions) of the applied gradients"},
	{"stale_p50", 0, "median staleness"},
	{"stale_p99", 0, "99th percentile of staleness"},
	{"stale_max", 0, "largest staleness"},
	{"bytes_sent", 0, "bytes the workers sent (gradients or models)"},
	{"bytes_recv", 0, "bytes the workers pulled from the server"},
	{"comm_s", 0, "virtual seconds the workers' messages spent on their links"},
	{"coherence", 0, "mean gradient coherence over the run (with coherence_every; empty: off)"},
	{"step_flops", 0, "FLOPs the workers computed: forward and backward"},
	{"bwd_flops", 0, "backward FLOPs the workers computed (of step_flops)"},
	{"bwd_flops_saved", 0, "backward FLOPs partial backprop did not spend"},
	{"stop", 0, "why the run ended (epochs, steps, target_acc, diverged, ...)"},
	{"diverged", 0, "1 when the run diverged"},
	{"train_s", 1, "wall seconds of training on this machine"},
	{"samples_per_s", 1, "samples over train_s on this machine"},
	{"test_ppl", 0, "a language model's held-out perplexity at the end, exp(test_loss) (empty: an image model)"},
	{"test_bpb", 0, "a language model's held-out bits per byte at the end, test_loss / ln 2 (empty: an image model)"},
};
const int sweep_n_metrics = (int)(sizeof(sweep_metrics) / sizeof(sweep_metrics[0]));

/* ---- CSV ----------------------------------------------------------------- */

static void
sb_str(sl_buf *b, const char *s)
{
	sl_buf_put(b, s, strlen(s));
}

/* one CSV field, quoted when it must be (RFC 4180) */
static void
sb_field(sl_buf *b, const char *s)
{
	if (!strpbrk(s, ",\"\r\n")) {
		sb_str(b, s);
		return;
	}
	sl_buf_put(b, "\"", 1);
	for (const char *p = s; *p; p++) {
		if (*p == '"')
			sl_buf_put(b, "\"", 1);
		sl_buf_put(b, p, 1);
	}
	sl_buf_put(b, "\"", 1);
}

/* a value as a CSV field: strings bare, null empty, numbers exact */
static void
sb_value(sl_buf *b, const json_t *v)
{
	if (!v || json_is_null(v))
		return;
	if (json_is_string(v)) {
		sb_field(b, json_string_value(v));
		return;
	}
	char *s = jsonout_dumps(v); /* the shortest form that reads back the same */
	if (!s) {
		b->oom = 1;
		return;
	}
	sb_field(b, s);
	free(s);
}

static int
cmp_index(const void *a, const void *b)
{
	json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "index"));
	json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "index"));
	return x < y ? -1 : x > y;
}

/* the results in index order (borrowed references; free the array) */
static json_t **
sorted(const json_t *results, size_t *n)
{
	*n = json_array_size(results);
	json_t **r = malloc(sizeof(json_t *) * (*n ? *n : 1));
	if (!r)
		return NULL;
	for (size_t i = 0; i < *n; i++)
		r[i] = json_array_get(results, i);
	qsort(r, *n, sizeof(json_t *), cmp_index);
	return r;
}

int
sweep_write_csv(const char *path, const sweep_axis *axes, int n_axes, const json_t *results,
		char *err)
{
	sl_buf b = {0};
	sb_str(&b, "cell");
	for (int i = 0; i < n_axes; i++) {
		sb_str(&b, ",");
		sb_field(&b, axes[i].key);
	}
	for (int i = 0; i < sweep_n_metrics; i++) {
		sb_str(&b, ",");
		sb_str(&b, sweep_metrics[i].key);
	}
	sb_str(&b, "\r\n");
	size_t n;
	json_t **r = sorted(results, &n);
	if (!r) {
		free(b.p);
		return sl_fail(err, SL_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		json_t *ax = json_object_get(r[i], "axes"), *m = json_object_get(r[i], "metrics");
		sb_field(&b, json_string_value(json_object_get(r[i], "cell")));
		for (int j = 0; j < n_axes; j++) {
			sb_str(&b, ",");
			sb_value(&b, json_object_get(ax, axes[j].key));
		}
		for (int j = 0; j < sweep_n_metrics; j++) {
			sb_str(&b, ",");
			sb_value(&b, json_object_get(m, sweep_metrics[j].key));
		}
		sb_str(&b, "\r\n");
	}
	free(r);
	int rc = b.oom ? sl_fail(err, SL_ENOMEM, "out of memory")
		       : sweep_write_file(path, b.p, b.n, err);
	free(b.p);
	return rc;
}

/* ---- the finished cells -------------------------------------------------- */

int
sweep_load_results(const char *cells_dir, const sweep_grid *g, char *done, json_t *results,
		   char *err)
{
	(void)err;
	for (int i = 0; i < g->n_cells; i++) {
		const sweep_cell *c = &g->cell[i];
		char path[4200], log[4200];
		snprintf(path, sizeof(path), "%s/%s.json", cells_dir, c->name);
		snprintf(log, sizeof(log), "%s/%s.jsonl", cells_dir, c->name);
		json_error_t je;
		json_t *res = json_load_file(path, 0, &je);
		FILE *lf = res ? fopen(log, "r") : NULL;
		/* a result counts with its log, for this very run object */
		if (res && lf && json_equal(json_object_get(res, "run"), c->run) &&
		    json_is_object(json_object_get(res, "metrics"))) {
			/* the index and axes of this grid (a --force'd file may
			 * have moved the cell) */
			json_object_set_new(res, "index", json_integer(c->index));
			json_object_set(res, "axes", c->axes);
			json_array_append(results, res);
			done[i] = 1;
		}
		if (lf)
			fclose(lf);
		json_decref(res);
	}
	return 0;
}

/* ---- the summary ---------------------------------------------------------- */

int
sweep_baseline(const char *baseline, const sweep_axis *axes, int n_axes, char *key, size_t cap,
	       json_t **val, char *err)
{
	*val = NULL;
	const char *eq = strchr(baseline, '=');
	if (!eq || eq == baseline || (size_t)(eq - baseline) >= cap)
		return sl_fail(err, SL_EINVAL, "--baseline: expected KEY=VALUE (e.g. delay.s=0), got '%s'",
			       baseline);
	memcpy(key, baseline, (size_t)(eq - baseline));
	key[eq - baseline] = 0;
	int found = 0;
	for (int i = 0; i < n_axes; i++)
		found |= !strcmp(axes[i].key, key);
	if (!found || !strcmp(key, "seed"))
		return sl_fail(err, SL_EINVAL, "--baseline: %s is not an axis of this sweep", key);
	*val = json_loads(eq + 1, JSON_DECODE_ANY, NULL);
	if (!*val)
		*val = json_string(eq + 1); /* a string axis value, bare */
	return 0;
}

void
sweep_group_label(const json_t *axes, char *out, size_t cap)
{
	size_t len = 0;
	const char *k;
	json_t *v;
	out[0] = 0;
	json_object_foreach((json_t *)axes, k, v) {
		char *t = json_is_string(v) ? strdup(json_string_value(v)) : jsonout_dumps(v);
		len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s%s=%s", len ? "," : "",
					k, t ? t : "");
		free(t);
		if (len >= cap)
			len = cap - 1;
	}
	if (!len)
		snprintf(out, cap, "(all)");
}

/* Student's t, two-sided 95%, for n - 1 degrees of freedom (1..30), then
 * the normal's 1.96 */
static double
t95(int df)
{
	static const double t[] = {0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
				   2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110,
				   2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
				   2.052, 2.048, 2.045, 2.042};
	return df < 1 ? NAN : df <= 30 ? t[df] : 1.96;
}

typedef struct group {
	json_t *axes;   /* the group's axes (seed dropped) */
	json_t **rows;  /* borrowed */
	int n, cap;
} group;

/* mean and 95% half-interval of metric k over the group's rows that have
 * it (numbers only); n: how many */
static void
stat(const group *gr, const char *k, double *mean, double *ci, int *n)
{
	double s = 0, ss = 0;
	int c = 0;
	for (int i = 0; i < gr->n; i++) {
		json_t *v = json_object_get(json_object_get(gr->rows[i], "metrics"), k);
		if (!json_is_number(v))
			continue;
		double x = json_number_value(v);
		s += x;
		ss += x * x;
		c++;
	}
	*n = c;
	*mean = c ? s / c : NAN;
	double var = c > 1 ? (ss - s * s / c) / (c - 1) : NAN;
	*ci = c > 1 ? t95(c - 1) * sqrt(var > 0 ? var : 0) / sqrt(c) : NAN;
}

/* the group whose axes are g's with key set to val */
static const group *
find_baseline(const group *gs, int ng, const json_t *axes, const char *key, const json_t *val)
{
	for (int i = 0; i < ng; i++) {
		const json_t *a = gs[i].axes;
		if (!json_equal(json_object_get(a, key), (json_t *)val))
			continue;
		int same = 1;
		const char *k;
		json_t *v;
		json_object_foreach((json_t *)axes, k, v) {
			if (!strcmp(k, key))
				continue;
			if (!json_equal(v, json_object_get(a, k))) {
				same = 0;
				break;
			}
		}
		if (same)
			return &gs[i];
	}
	return NULL;
}

/* ",x" in the shortest form, "," when not finite */
static void
csv_num(sl_buf *b, double x)
{
	char num[40] = ",";
	if (isfinite(x))
		jsonout_number(num + 1, x);
	sb_str(b, num);
}

static void
fmt_num(char *out, size_t cap, double x)
{
	if (!isfinite(x))
		snprintf(out, cap, "-");
	else if (fabs(x) >= 1e6 || (fabs(x) < 1e-3 && x != 0))
		snprintf(out, cap, "%.3g", x);
	else if (fabs(x) >= 100)
		snprintf(out, cap, "%.0f", x);
	else
		snprintf(out, cap, "%.4g", x);
}

/* the metrics the table shows, mean ± interval (summary.csv has all) */
static const char *const shown[] = {"final_acc", "best_acc", "updates_to_target",
				    "virtual_s_to_target", "stale_mean"};
#define N_SHOWN (sizeof(shown) / sizeof(shown[0]))

/* the rows (in index order) grouped by their axes but the seed, in the
 * order first met, the rows borrowed; *ng groups; NULL out of memory */
static group *
group_rows(json_t **rows, size_t n, int *ng)
{
	group *gs = calloc(n ? n : 1, sizeof(group));
	if (!gs)
		return NULL;
	*ng = 0;
	for (size_t i = 0; i < n; i++) {
		json_t *a = json_deep_copy(json_object_get(rows[i], "axes"));
		json_object_del(a, "seed");
		int gi = -1;
		for (int j = 0; j < *ng && gi < 0; j++)
			if (json_equal(gs[j].axes, a))
				gi = j;
		if (gi < 0) {
			gi = (*ng)++;
			gs[gi].axes = json_incref(a);
		}
		group *g = &gs[gi];
		if (g->n == g->cap) {
			g->cap = g->cap ? 2 * g->cap : 4;
			json_t **nr = realloc(g->rows, sizeof(json_t *) * (size_t)g->cap);
			if (!nr)
				abort();
			g->rows = nr;
		}
		g->rows[g->n++] = rows[i];
		json_decref(a);
	}
	return gs;
}

/* summary.csv's header: the group, its axes, n, each metric's mean,
 * interval and count, and with a baseline (ratio_of: its metric) the
 * ratio */
static void
csv_header(sl_buf *csv, const sweep_axis *axes, int n_axes, const char *ratio_of)
{
	sb_str(csv, "group");
	for (int i = 0; i < n_axes; i++)
		if (strcmp(axes[i].key, "seed")) {
			sb_str(csv, ",");
			sb_field(csv, axes[i].key);
		}
	sb_str(csv, ",n");
	for (int i = 0; i < sweep_n_metrics; i++) {
		if (!strcmp(sweep_metrics[i].key, "stop"))
			continue;
		char h[200];
		snprintf(h, sizeof(h), ",%s_mean,%s_ci95,%s_n", sweep_metrics[i].key,
			 sweep_metrics[i].key, sweep_metrics[i].key);
		sb_str(csv, h);
	}
	if (ratio_of) {
		char h[200];
		snprintf(h, sizeof(h), ",%s_over_baseline", ratio_of);
		sb_str(csv, h);
	}
	sb_str(csv, "\r\n");
}

/* one group's row of summary.csv */
static void
csv_row(sl_buf *csv, const group *g, const char *name, const sweep_axis *axes, int n_axes,
	int has_ratio, double ratio)
{
	sb_field(csv, name);
	for (int i = 0; i < n_axes; i++)
		if (strcmp(axes[i].key, "seed")) {
			sb_str(csv, ",");
			sb_value(csv, json_object_get(g->axes, axes[i].key));
		}
	char num[64];
	snprintf(num, sizeof(num), ",%d", g->n);
	sb_str(csv, num);
	for (int i = 0; i < sweep_n_metrics; i++) {
		if (!strcmp(sweep_metrics[i].key, "stop"))
			continue;
		double m, ci;
		int c;
		stat(g, sweep_metrics[i].key, &m, &ci, &c);
		csv_num(csv, m);
		csv_num(csv, ci);
		snprintf(num, sizeof(num), ",%d", c);
		sb_str(csv, num);
	}
	if (has_ratio)
		csv_num(csv, ratio);
	sb_str(csv, "\r\n");
}

/* the table's cells of one group: mean ± interval of each shown metric,
 * "(c/n)" when not every seed has it */
static void
print_shown(FILE *out, const group *g)
{
	for (size_t k = 0; k < N_SHOWN; k++) {
		double m, ci;
		int c;
		stat(g, shown[k], &m, &ci, &c);
		char a[32], b[32], cell[96];
		fmt_num(a, sizeof(a), m);
		fmt_num(b, sizeof(b), ci);
		int len = c > 1 && isfinite(ci) ? snprintf(cell, sizeof(cell), "%s ± %s", a, b)
						: snprintf(cell, sizeof(cell), "%s", a);
		if (c && c < g->n) /* not every seed has it (the target not reached) */
			snprintf(cell + len, sizeof(cell) - (size_t)len, " (%d/%d)", c, g->n);
		fprintf(out, " %22s", cell);
	}
}

/* g's metric over its baseline group's (the one with key=val and g's
 * other axes), said in the table's last column; NAN when there is none */
static double
print_ratio(FILE *out, const group *gs, int ng, const group *g, const char *metric,
	    const char *key, const json_t *val)
{
	double ratio = NAN;
	const group *b = find_baseline(gs, ng, g->axes, key, val);
	int c = 0, cb = 0;
	if (b) {
		double m, mb, ci;
		stat(g, metric, &m, &ci, &c);
		stat(b, metric, &mb, &ci, &cb);
		/* a ratio of means only over groups where every seed has
		 * the metric: else it compares different seeds */
		if (c == g->n && cb == b->n && mb != 0)
			ratio = m / mb;
	}
	char r[32];
	fmt_num(r, sizeof(r), ratio);
	fprintf(out, "  %s", !b ? "(no baseline)"
			    : isfinite(ratio) ? r
			    : c < g->n || cb < b->n ? "- (not every seed has it)" : "-");
	return ratio;
}

typedef char group_name[256];

/* the groups' names (calloc'd; NULL out of memory), *width the longest's
 * length, at least the header's */
static group_name *
group_names(const group *gs, int ng, int *width)
{
	group_name *names = calloc((size_t)(ng ? ng : 1), sizeof(*names));
	*width = 5;
	for (int gi = 0; names && gi < ng; gi++) {
		sweep_group_label(gs[gi].axes, names[gi], sizeof(names[gi]));
		if ((int)strlen(names[gi]) > *width)
			*width = (int)strlen(names[gi]);
	}
	return names;
}

int
sweep_summary(const json_t *results, const sweep_axis *axes, int n_axes, const char *baseline,
	      const char *metric, const char *csv_path, FILE *out, char *err)
{
	char bkey[128] = "";
	json_t *bval = NULL;
	if (baseline && sweep_baseline(baseline, axes, n_axes, bkey, sizeof(bkey), &bval, err) < 0)
		return -SL_EINVAL;
	int mfound = !metric;
	for (int i = 0; metric && i < sweep_n_metrics; i++)
		mfound |= !strcmp(sweep_metrics[i].key, metric);
	if (!mfound) {
		json_decref(bval);
		return sl_fail(err, SL_EINVAL, "--metric: no metric '%s' (results.csv's columns)", metric);
	}
	if (!metric)
		metric = "updates_to_target";
	size_t n;
	int ng = 0;
	json_t **rows = sorted(results, &n);
	group *gs = rows ? group_rows(rows, n, &ng) : NULL;
	if (!gs) {
		free(rows);
		json_decref(bval);
		return sl_fail(err, SL_ENOMEM, "out of memory");
	}
	/* the table: the group's axes, n, then mean ± interval of the main
	 * metrics, and the metric over its baseline; summary.csv beside it */
	sl_buf csv = {0};
	csv_header(&csv, axes, n_axes, bval ? metric : NULL);
	int width;
	group_name *names = group_names(gs, ng, &width);
	fprintf(out, "%-*s %3s", width, "group", "n");
	for (size_t k = 0; k < N_SHOWN; k++)
		fprintf(out, " %22s", shown[k]);
	if (bval)
		fprintf(out, "  %s over %s", metric, baseline);
	fprintf(out, "\n");
	for (int gi = 0; names && gi < ng; gi++) {
		const group *g = &gs[gi];
		fprintf(out, "%-*s %3d", width, names[gi], g->n);
		print_shown(out, g);
		double ratio = bval ? print_ratio(out, gs, ng, g, metric, bkey, bval) : NAN;
		fprintf(out, "\n");
		csv_row(&csv, g, names[gi], axes, n_axes, !!bval, ratio);
	}
	int rc = 0;
	if (!names || csv.oom)
		rc = sl_fail(err, SL_ENOMEM, "out of memory");
	else if (csv_path)
		rc = sweep_write_file(csv_path, csv.p, csv.n, err);
	free(names);
	free(csv.p);
	for (int i = 0; i < ng; i++) {
		json_decref(gs[i].axes);
		free(gs[i].rows);
	}
	free(gs);
	free(rows);
	json_decref(bval);
	return rc;
}
