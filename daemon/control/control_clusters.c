/* control_clusters.c - finished cluster simulations on disk, for the
 * dashboard's Cluster view (`stalelab serve --clusters DIR`):
 *
 *   GET /api/v1/clusters                  the simulations: name, jobs, GPUs,
 *                                         policies
 *   GET /api/v1/clusters/NAME             one: its cluster.json, summary.csv
 *                                         as rows, and per policy the GPUs
 *                                         in use over time, the JCTs'
 *                                         distribution and the schedules
 *                                         the jobs finished under
 *   GET /api/v1/clusters/NAME/files/F     one of its CSV or SVG files
 *
 * (rows of control.c's route table, with a row for the paths below
 * /api/v1/clusters/ that name none of them).
 *
 * DIR is one `stalelab cluster --out` directory (it holds cluster.json) or
 * a directory of them. Names are looked up among the directory's entries
 * (control_files.c). Long timelines and many jobs are reduced here, so a
 * 100,000-job simulation reaches the browser as a few thousand points:
 * the timeline into time-weighted means over equal spans (its integral,
 * the GPU-seconds in use, kept), the JCTs into quantiles (the largest
 * kept). Reads only; no lock. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "control_impl.h"
#include "sl.h"

#define TIMELINE_RAW 2000  /* timelines up to this many points go as they are */
#define TIMELINE_SPANS 1000 /* longer ones: means over this many spans */
#define JCT_POINTS 1000    /* the JCTs' distribution: at most this many points */
#define SCHED_MAX 64       /* schedules counted per policy */

static json_t *sim_entry(const char *name, const char *path);
static void get_one(ctl *c, const char *name, ctl_reply *o);

static ctl_shelf
shelf(const ctl *c)
{
	return (ctl_shelf){.root = c->clusters_dir, .marker = "cluster.json",
			   .fallback = "cluster", .what = "cluster simulations",
			   .flag = "clusters",
			   .how = "a `stalelab cluster --out` directory, or a directory of them",
			   .none_code = "no_clusters",
			   .one = "cluster simulation", .miss_code = "no_cluster", .list_key = "simulations",
			   .endpoint = "/api/v1/clusters",
			   .paths = "/api/v1/clusters/NAME or /api/v1/clusters/NAME/files/FILE",
			   .entry = sim_entry, .get_one = get_one};
}

static int
sim_path(const ctl *c, const char *name, char *path, size_t cap, ctl_reply *o)
{
	ctl_shelf sh = shelf(c);
	return ctl_shelf_find(&sh, name, path, cap, o);
}

/* ---- the CSVs `stalelab cluster --out` writes ------------------------------- */

/* one field of a CSV line at *p into buf (quotes honoured); the
 * character that ended it: ',', '\n' or 0 */
static char
field(const char **p, char *buf, size_t cap)
{
	const char *s = *p;
	size_t n = 0;
	int q = 0;
	for (; *s; s++) {
		if (q) {
			if (*s == '"' && s[1] == '"')
				s++;
			else if (*s == '"') {
				q = 0;
				continue;
			}
		} else if (*s == '"' && n == 0) {
			q = 1;
			continue;
		} else if (*s == ',' || *s == '\n') {
			break;
		} else if (*s == '\r') {
			continue;
		}
		if (n + 1 < cap)
			buf[n++] = *s;
	}
	buf[n] = 0;
	char end = *s;
	*p = *s ? s + 1 : s;
	return end;
}

/* the header line of text: want[k] the index of the column names[k] (-1:
 * none); returns where the rows start */
static const char *
header(const char *text, const char *const *names, int n, int *want)
{
	char buf[64];
	const char *p = text;
	for (int k = 0; k < n; k++)
		want[k] = -1;
	for (int i = 0;; i++) {
		char e = field(&p, buf, sizeof(buf));
		for (int k = 0; k < n; k++)
			if (want[k] < 0 && !strcmp(buf, names[k]))
				want[k] = i;
		if (e != ',')
			return p;
	}
}

/* the fields at the indices want[0..n) of the line at *p, into out (text);
 * 0, or -1 at the end of the text */
static int
row(const char **p, const int *want, int n, char out[][64])
{
	if (!**p)
		return -1;
	for (int k = 0; k < n; k++)
		out[k][0] = 0;
	char buf[64];
	for (int i = 0;; i++) {
		char e = field(p, buf, sizeof(buf));
		for (int k = 0; k < n; k++)
			if (want[k] == i)
				memcpy(out[k], buf, sizeof(buf));
		if (e != ',')
			return 0;
	}
}

static int
read_csv(const char *dir, const char *base, const char *policy, char **text)
{
	char p[4400];
	if (snprintf(p, sizeof(p), "%s/%s_%s.csv", dir, base, policy) >= (int)sizeof(p))
		return -1;
	*text = ctl_slurp(p, CTL_FILE_MAX, NULL);
	return *text ? 0 : -1;
}

/* timeline_POLICY.csv (t,free_gpus,running,queued at each decision) as
 * {"t", "in_use", "running", "queued", "points", "spans"}: as it is up to
 * TIMELINE_RAW points, else the time-weighted mean of each of
 * TIMELINE_SPANS equal spans from the first time to the last (t: the
 * span's start), so the area under in_use, the GPU-seconds in use, stays
 * what it was */
static json_t *
timeline(const char *dir, const char *policy, int gpus)
{
	char *text;
	if (read_csv(dir, "timeline", policy, &text) < 0)
		return json_null();
	static const char *const cols[4] = {"t", "free_gpus", "running", "queued"};
	int want[4];
	const char *p = header(text, cols, 4, want);
	size_t n = 0, cap = 0;
	double *v = NULL; /* t, in_use, running, queued per point */
	char f[4][64];
	while (want[0] >= 0 && want[1] >= 0 && row(&p, want, 4, f) == 0) {
		if (!f[0][0])
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 1024;
			double *nv = realloc(v, cap * 4 * sizeof(*v));
			if (!nv)
				break;
			v = nv;
		}
		v[4 * n] = strtod(f[0], NULL);
		v[4 * n + 1] = gpus - strtod(f[1], NULL);
		v[4 * n + 2] = strtod(f[2], NULL);
		v[4 * n + 3] = strtod(f[3], NULL);
		n++;
	}
	free(text);
	json_t *a[4] = {json_array(), json_array(), json_array(), json_array()};
	size_t spans = 0;
	if (n <= TIMELINE_RAW || !(v[4 * (n - 1)] > v[0])) {
		for (size_t i = 0; i < n; i++)
			for (int k = 0; k < 4; k++)
				json_array_append_new(a[k], json_real(v[4 * i + k]));
	} else {
		spans = TIMELINE_SPANS;
		double t0 = v[0], t1 = v[4 * (n - 1)], w = (t1 - t0) / (double)spans;
		size_t i = 0; /* the point whose state holds at the span's start */
		for (size_t s = 0; s < spans; s++) {
			double a0 = t0 + w * (double)s, a1 = s + 1 == spans ? t1 : a0 + w;
			double sum[3] = {0, 0, 0};
			while (i + 1 < n && v[4 * (i + 1)] <= a0)
				i++;
			for (size_t j = i; j < n && v[4 * j] < a1; j++) {
				double lo = fmax(v[4 * j], a0);
				double hi = j + 1 < n ? fmin(v[4 * (j + 1)], a1) : a1;
				for (int k = 0; k < 3; k++)
					sum[k] += (hi - lo) * v[4 * j + 1 + k];
			}
			json_array_append_new(a[0], json_real(a0));
			for (int k = 0; k < 3; k++)
				json_array_append_new(a[k + 1], json_real(a1 > a0 ? sum[k] / (a1 - a0) : 0));
		}
		/* the last point: the state after the last decision */
		json_array_append_new(a[0], json_real(t1));
		for (int k = 0; k < 3; k++)
			json_array_append_new(a[k + 1], json_real(v[4 * (n - 1) + 1 + k]));
	}
	free(v);
	return json_pack("{s:o,s:o,s:o,s:o,s:I,s:I}", "t", a[0], "in_use", a[1], "running", a[2],
			 "queued", a[3], "points", (json_int_t)n, "spans", (json_int_t)spans);
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* jobs_POLICY.csv as {"jct": {"s": [...], "share": [...]}, "schedules":
 * {name: jobs}, "jobs": n}: the JCTs' distribution, every job up to
 * JCT_POINTS, else JCT_POINTS quantiles (the largest among them); share
 * is the fraction of jobs done within s */
static json_t *
jobs(const char *dir, const char *policy)
{
	char *text;
	if (read_csv(dir, "jobs", policy, &text) < 0)
		return json_null();
	static const char *const cols[2] = {"jct_s", "schedule"};
	int want[2];
	const char *p = header(text, cols, 2, want);
	size_t n = 0, cap = 0;
	double *jct = NULL;
	char f[2][64], names[SCHED_MAX][64];
	json_int_t counts[SCHED_MAX];
	int ns = 0;
	while (want[0] >= 0 && row(&p, want, 2, f) == 0) {
		if (!f[0][0])
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 1024;
			double *nj = realloc(jct, cap * sizeof(*jct));
			if (!nj)
				break;
			jct = nj;
		}
		jct[n++] = strtod(f[0], NULL);
		int k = 0;
		while (k < ns && strcmp(names[k], f[1]))
			k++;
		if (k == ns && ns < SCHED_MAX) {
			memcpy(names[ns], f[1], sizeof(names[ns]));
			counts[ns++] = 0;
		}
		if (k < ns)
			counts[k]++;
	}
	free(text);
	if (n)
		qsort(jct, n, sizeof(*jct), cmp_double);
	json_t *s = json_array(), *share = json_array(), *sc = json_object();
	size_t m = n <= JCT_POINTS ? n : JCT_POINTS;
	for (size_t k = 1; k <= m; k++) {
		size_t i = (k * n + m - 1) / m - 1; /* ceil(k n / m) - 1 */
		json_array_append_new(s, json_real(jct[i]));
		json_array_append_new(share, json_real((double)(i + 1) / (double)n));
	}
	for (int k = 0; k < ns; k++)
		json_object_set_new(sc, names[k][0] ? names[k] : "?", json_integer(counts[k]));
	free(jct);
	return json_pack("{s:{s:o,s:o},s:o,s:I}", "jct", "s", s, "share", share, "schedules", sc,
			 "jobs", (json_int_t)n);
}

/* ---- the endpoints ------------------------------------------------------------ */

static int
is_shown(const char *dir, const char *name)
{
	size_t n = strlen(name);
	return n > 4 && (!strcmp(name + n - 4, ".csv") || !strcmp(name + n - 4, ".svg")) &&
	       ctl_has_file(dir, name);
}

/* one entry of the list: name, jobs, GPUs, policies, when, files */
static json_t *
sim_entry(const char *name, const char *path)
{
	char p[4200];
	struct stat st;
	snprintf(p, sizeof(p), "%s/cluster.json", path);
	json_error_t je;
	json_t *spec = json_load_file(p, 0, &je);
	double modified = stat(p, &st) == 0 ? (double)st.st_mtime : 0;
	json_t *files = ctl_list_dir(path, is_shown);
	json_t *e = json_pack("{s:s,s:f,s:O?,s:O?,s:O?,s:o}", "name", name, "modified", modified,
			      "jobs", spec ? json_object_get(spec, "jobs") : NULL,
			      "gpus", spec ? json_object_get(spec, "gpus") : NULL,
			      "policies", spec ? json_object_get(spec, "policies") : NULL,
			      "files", files ? files : json_array());
	json_decref(spec);
	return e;
}

static void
get_one(ctl *c, const char *name, ctl_reply *o)
{
	char path[4096], p[4200];
	if (sim_path(c, name, path, sizeof(path), o) < 0)
		return;
	snprintf(p, sizeof(p), "%s/cluster.json", path);
	json_error_t je;
	json_t *spec = json_load_file(p, 0, &je);
	if (!spec) {
		char msg[400];
		snprintf(msg, sizeof(msg), "%.200s: line %d, column %d: %.150s", p, je.line, je.column,
			 je.text);
		reply_error(o, 500, "bad_cluster", msg);
		return;
	}
	int gpus = (int)json_integer_value(json_object_get(spec, "gpus"));
	json_t *r = sim_entry(name, path), *summary = ctl_csv_json(path, "summary.csv");
	json_t *series = json_object(), *rows = json_object_get(summary, "rows"), *rw;
	size_t i;
	json_array_foreach(rows, i, rw) {
		const char *pol = json_string_value(json_array_get(rw, 0));
		if (!pol || !ctl_name_ok(pol))
			continue;
		json_t *x = jobs(path, pol);
		if (json_is_object(x))
			json_object_set_new(x, "timeline", timeline(path, pol, gpus));
		json_object_set_new(series, pol, x);
	}
	json_object_set_new(r, "spec", spec);
	json_object_set_new(r, "summary", summary);
	json_object_set_new(r, "series", series);
	reply_json(o, 200, r);
}

/* GET /api/v1/clusters/{name}/files/{file*} */
void
ctl_clusters_file(ctl *c, const ctl_args *a, ctl_reply *o)
{
	char path[4096], p[4400];
	const char *name = a->name, *file = a->rest;
	if (sim_path(c, name, path, sizeof(path), o) < 0)
		return;
	char *text = NULL;
	if (ctl_name_ok(file) && is_shown(path, file) &&
	    snprintf(p, sizeof(p), "%s/%s", path, file) < (int)sizeof(p))
		text = ctl_slurp(p, CTL_FILE_MAX, NULL);
	if (!text) {
		char msg[320];
		snprintf(msg, sizeof(msg), "simulation %.100s has no file \"%.100s\" (its entry "
			 "lists its CSV and SVG files)", name, file);
		reply_error(o, 404, "no_file", msg);
		return;
	}
	size_t n = strlen(file);
	o->status = 200;
	o->type = !strcmp(file + n - 4, ".svg") ? "image/svg+xml" : "text/csv; charset=utf-8";
	o->text = text;
}

void
ctl_clusters_get(ctl *c, const ctl_args *a, ctl_reply *o)
{
	ctl_shelf sh = shelf(c);
	ctl_shelf_get(&sh, c, a, o);
}
