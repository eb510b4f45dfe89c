/* trace.c - the cluster simulator's inputs as text (docs/cluster.md,
 * "Files"): a trace of jobs and the models' schedule profiles, both CSV
 * with a header row naming the columns (in any order; '#' lines are
 * comments, kept by the caller as the file's origin), and a seeded
 * synthetic trace. Pure functions over bytes: errors name the file's line
 * and the field. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "sl.h"
#include "trace.h"

#define MAX_COLS 16
#define MAX_LINE 4096

/* one line's fields, split at commas, blanks around each trimmed */
typedef struct row {
	int n;
	char *f[MAX_COLS];
	char buf[MAX_LINE];
} row;

/* the next line of text[*pos..len) into r; 0 at the end, 1 a line, -1 too
 * long or too many fields (err says which) */
static int
next_row(const char *text, size_t len, size_t *pos, row *r, const char *file, int lineno,
	 char *err)
{
	if (*pos >= len)
		return 0;
	size_t e = *pos;
	while (e < len && text[e] != '\n')
		e++;
	size_t n = e - *pos;
	if (n && text[*pos + n - 1] == '\r')
		n--;
	if (n >= MAX_LINE)
		return sl_fail(err, SL_EFORMAT, "%s:%d: line longer than %d bytes", file, lineno,
			       MAX_LINE - 1);
	memcpy(r->buf, text + *pos, n);
	r->buf[n] = 0;
	*pos = e + 1;
	r->n = 0;
	for (char *p = r->buf;;) {
		if (r->n == MAX_COLS)
			return sl_fail(err, SL_EFORMAT, "%s:%d: more than %d fields", file, lineno,
				       MAX_COLS);
		char *c = strchr(p, ',');
		if (c)
			*c = 0;
		while (isspace((unsigned char)*p))
			p++;
		char *t = p + strlen(p);
		while (t > p && isspace((unsigned char)t[-1]))
			*--t = 0;
		r->f[r->n++] = p;
		if (!c)
			break;
		p = c + 1;
	}
	return 1;
}

static int
blank_or_comment(const row *r)
{
	return (r->n == 1 && !r->f[0][0]) || r->f[0][0] == '#';
}

/* column indices of the names in want (-1: absent) from a header row; the
 * first n_required must be there */
static int
header(const row *r, const char *const *want, int n_want, int n_required, int *col,
       const char *file, int lineno, char *err)
{
	for (int k = 0; k < n_want; k++)
		col[k] = -1;
	for (int i = 0; i < r->n; i++) {
		for (int k = 0; k < n_want; k++)
			if (!strcmp(r->f[i], want[k])) {
				if (col[k] >= 0)
					return sl_fail(err, SL_EFORMAT, "%s: the header names \"%s\" twice",
						       file, want[k]);
				col[k] = i;
			}
	}
	for (int k = 0; k < n_required; k++)
		if (col[k] < 0)
			return sl_fail(err, SL_EFORMAT, "%s:%d: missing column \"%s\"", file, lineno,
				       want[k]);
	return 0;
}

/* field k of r as a number; err names the line and the column */
static int
number(const row *r, int col, const char *name, double *out, const char *file, int lineno,
       char *err)
{
	const char *s = col >= 0 && col < r->n ? r->f[col] : "";
	if (!*s)
		return sl_fail(err, SL_EFORMAT, "%s:%d: %s: missing", file, lineno, name);
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (*end || errno || !isfinite(v))
		return sl_fail(err, SL_EFORMAT, "%s:%d: %s: expected a number, got \"%.40s\"", file,
			       lineno, name, s);
	*out = v;
	return 0;
}

/* ---- models' schedules ------------------------------------------------- */

enum { P_MODEL, P_SCHED, P_COMPUTE, P_COMM, P_MEM, P_MULT, P_N };
static const char *const pcols[P_N] = {"model", "schedule", "compute_s", "comm_s", "mem_gb",
				       "iter_mult"};

int
cl_profiles_parse(const char *text, size_t len, const char *file, cl_model **out, int *n_out,
		  char *err)
{
	*out = NULL;
	*n_out = 0;
	row *r = malloc(sizeof(row));
	cl_model *ms = NULL;
	int n = 0, rc = 0, lineno = 0, col[P_N], have_header = 0;
	size_t pos = 0;
	if (!r)
		return sl_fail(err, SL_ENOMEM, "out of memory");
	while ((rc = next_row(text, len, &pos, r, file, ++lineno, err)) == 1) {
		if (blank_or_comment(r))
			continue;
		if (!have_header) {
			if ((rc = header(r, pcols, P_N, P_N, col, file, lineno, err)) < 0)
				break;
			have_header = 1;
			continue;
		}
		const char *mname = col[P_MODEL] < r->n ? r->f[col[P_MODEL]] : "";
		const char *sname = col[P_SCHED] < r->n ? r->f[col[P_SCHED]] : "";
		if (!*mname || strlen(mname) >= sizeof(ms[0].name)) {
			rc = sl_fail(err, SL_EFORMAT, "%s:%d: model: expected a name of 1 to %zu characters",
				     file, lineno, sizeof(ms[0].name) - 1);
			break;
		}
		if (!*sname || strlen(sname) >= sizeof(ms[0].sched[0].name)) {
			rc = sl_fail(err, SL_EFORMAT,
				     "%s:%d: schedule: expected a name of 1 to %zu characters", file,
				     lineno, sizeof(ms[0].sched[0].name) - 1);
			break;
		}
		cl_sched s;
		snprintf(s.name, sizeof(s.name), "%s", sname);
		if ((rc = number(r, col[P_COMPUTE], "compute_s", &s.compute_s, file, lineno, err)) < 0 ||
		    (rc = number(r, col[P_COMM], "comm_s", &s.comm_s, file, lineno, err)) < 0 ||
		    (rc = number(r, col[P_MEM], "mem_gb", &s.mem_gb, file, lineno, err)) < 0 ||
		    (rc = number(r, col[P_MULT], "iter_mult", &s.iter_mult, file, lineno, err)) < 0)
			break;
		if (s.compute_s < 0 || s.comm_s < 0 || !(s.compute_s + s.comm_s > 0)) {
			rc = sl_fail(err, SL_EFORMAT,
				     "%s:%d: compute_s, comm_s: must be >= 0 with a positive sum", file,
				     lineno);
			break;
		}
		if (s.mem_gb < 0 || !(s.iter_mult > 0)) {
			rc = sl_fail(err, SL_EFORMAT, "%s:%d: %s: must be %s", file, lineno,
				     s.mem_gb < 0 ? "mem_gb" : "iter_mult",
				     s.mem_gb < 0 ? ">= 0" : "positive");
			break;
		}
		int m = 0;
		while (m < n && strcmp(ms[m].name, mname))
			m++;
		if (m == n) {
			cl_model *g = realloc(ms, sizeof(cl_model) * (size_t)(n + 1));
			if (!g) {
				rc = sl_fail(err, SL_ENOMEM, "out of memory");
				break;
			}
			ms = g;
			memset(&ms[n], 0, sizeof(ms[n]));
			snprintf(ms[n].name, sizeof(ms[n].name), "%s", mname);
			n++;
		}
		cl_model *x = &ms[m];
		for (int k = 0; k < x->n_sched; k++)
			if (!strcmp(x->sched[k].name, sname)) {
				rc = sl_fail(err, SL_EFORMAT, "%s:%d: model %s: schedule \"%s\" given twice",
					     file, lineno, mname, sname);
				goto out;
			}
		if (x->n_sched == CL_MAX_SCHED) {
			rc = sl_fail(err, SL_EFORMAT, "%s:%d: model %s: more than %d schedules", file,
				     lineno, mname, CL_MAX_SCHED);
			break;
		}
		/* full backprop first: the reference of every multiplier */
		if (!strcmp(sname, "full")) {
			if (s.iter_mult != 1.0) {
				rc = sl_fail(err, SL_EFORMAT, "%s:%d: iter_mult: full backprop's is 1",
					     file, lineno);
				break;
			}
			memmove(&x->sched[1], &x->sched[0], sizeof(cl_sched) * (size_t)x->n_sched);
			x->sched[0] = s;
		} else {
			x->sched[x->n_sched] = s;
		}
		x->n_sched++;
	}
	if (rc == 0 && !have_header)
		rc = sl_fail(err, SL_EFORMAT, "%s: no header row", file);
	for (int m = 0; rc == 0 && m < n; m++)
		if (strcmp(ms[m].sched[0].name, "full"))
			rc = sl_fail(err, SL_EFORMAT, "%s: model %s has no \"full\" schedule", file,
				     ms[m].name);
out:
	free(r);
	if (rc < 0) {
		free(ms);
		return rc;
	}
	*out = ms;
	*n_out = n;
	return 0;
}

/* ---- jobs ------------------------------------------------------------- */

enum { J_ID, J_ARRIVAL, J_GPUS, J_MODEL, J_BATCH, J_ITERS, J_DURATION, J_N };
static const char *const jcols[J_N] = {"job_id", "arrival_s", "num_gpus", "model",
				       "batch_size", "iters_full", "duration_s"};

/* a job's id and the line it is on, to find an id given twice */
typedef struct id_line {
	long id;
	int line;
} id_line;

static int
cmp_id_line(const void *pa, const void *pb)
{
	const id_line *a = pa, *b = pb;
	if (a->id != b->id)
		return a->id < b->id ? -1 : 1;
	return (a->line > b->line) - (a->line < b->line);
}

/* every job_id once: the second line of the lowest id given twice */
static int
unique_ids(const cl_job *js, const int *lines, size_t n, const char *file, char *err)
{
	id_line *v = malloc(sizeof(id_line) * (n ? n : 1));
	if (!v)
		return sl_fail(err, SL_ENOMEM, "out of memory for the trace");
	for (size_t i = 0; i < n; i++)
		v[i] = (id_line){js[i].id, lines[i]};
	qsort(v, n, sizeof(id_line), cmp_id_line);
	int rc = 0;
	for (size_t i = 1; i < n && !rc; i++)
		if (v[i].id == v[i - 1].id)
			rc = sl_fail(err, SL_EFORMAT, "%s:%d: job_id: %ld again (first on line %d)", file,
				     v[i].line, v[i].id, v[i - 1].line);
	free(v);
	return rc;
}

int
cl_jobs_parse(const char *text, size_t len, const char *file, const cl_model *models,
	      int n_models, int max_gpus, cl_job **out, size_t *n_out, char *err)
{
	*out = NULL;
	*n_out = 0;
	row *r = malloc(sizeof(row));
	cl_job *js = NULL;
	int *lines = NULL; /* each job's line */
	size_t n = 0, cap = 0;
	int rc = 0, lineno = 0, col[J_N], have_header = 0;
	size_t pos = 0;
	if (!r)
		return sl_fail(err, SL_ENOMEM, "out of memory");
	while ((rc = next_row(text, len, &pos, r, file, ++lineno, err)) == 1) {
		if (blank_or_comment(r))
			continue;
		if (!have_header) {
			if ((rc = header(r, jcols, J_N, J_MODEL + 1, col, file, lineno, err)) < 0)
				break;
			if (col[J_ITERS] < 0 && col[J_DURATION] < 0) {
				rc = sl_fail(err, SL_EFORMAT,
					     "%s:%d: missing column \"iters_full\" (or \"duration_s\")", file,
					     lineno);
				break;
			}
			have_header = 1;
			continue;
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 256;
			cl_job *g = realloc(js, sizeof(cl_job) * cap);
			if (g)
				js = g;
			int *l = g ? realloc(lines, sizeof(int) * cap) : NULL;
			if (!l) {
				rc = sl_fail(err, SL_ENOMEM, "out of memory for the trace");
				break;
			}
			lines = l;
		}
		lines[n] = lineno;
		cl_job *j = &js[n];
		memset(j, 0, sizeof(*j));
		double id, gpus;
		if ((rc = number(r, col[J_ID], "job_id", &id, file, lineno, err)) < 0 ||
		    (rc = number(r, col[J_ARRIVAL], "arrival_s", &j->arrival, file, lineno, err)) < 0 ||
		    (rc = number(r, col[J_GPUS], "num_gpus", &gpus, file, lineno, err)) < 0)
			break;
		if (id != floor(id) || fabs(id) > 9e15) {
			rc = sl_fail(err, SL_EFORMAT, "%s:%d: job_id: expected an integer", file, lineno);
			break;
		}
		if (j->arrival < 0) {
			rc = sl_fail(err, SL_EFORMAT, "%s:%d: arrival_s: must be >= 0", file, lineno);
			break;
		}
		if (gpus != floor(gpus) || gpus < 1 || gpus > 1e6) {
			rc = sl_fail(err, SL_EFORMAT, "%s:%d: num_gpus: expected a whole number >= 1",
				     file, lineno);
			break;
		}
		if (max_gpus > 0 && gpus > max_gpus) {
			rc = sl_fail(err, SL_EFORMAT, "%s:%d: num_gpus: %.0f, more than the cluster's %d",
				     file, lineno, gpus, max_gpus);
			break;
		}
		j->id = (long)id;
		j->gpus = (int)gpus;
		const char *mname = col[J_MODEL] < r->n ? r->f[col[J_MODEL]] : "";
		j->model = -1;
		for (int m = 0; m < n_models; m++)
			if (!strcmp(models[m].name, mname))
				j->model = m;
		if (j->model < 0) {
			rc = sl_fail(err, SL_EFORMAT, "%s:%d: model: \"%.40s\" is not in the profiles",
				     file, lineno, mname);
			break;
		}
		j->batch = 64;
		if (col[J_BATCH] >= 0 && col[J_BATCH] < r->n && r->f[col[J_BATCH]][0] &&
		    ((rc = number(r, col[J_BATCH], "batch_size", &j->batch, file, lineno, err)) < 0 ||
		     !(j->batch > 0))) {
			if (rc == 0)
				rc = sl_fail(err, SL_EFORMAT, "%s:%d: batch_size: must be positive", file,
					     lineno);
			break;
		}
		/* iterations, or a duration at full backprop's speed */
		const int has_iters = col[J_ITERS] >= 0 && col[J_ITERS] < r->n && r->f[col[J_ITERS]][0];
		if (has_iters) {
			if ((rc = number(r, col[J_ITERS], "iters_full", &j->iters, file, lineno, err)) < 0)
				break;
		} else if (col[J_DURATION] < 0) {
			rc = sl_fail(err, SL_EFORMAT, "%s:%d: iters_full: missing", file, lineno);
			break;
		} else {
			double d;
			if ((rc = number(r, col[J_DURATION], "duration_s", &d, file, lineno, err)) < 0)
				break;
			const cl_sched *f = &models[j->model].sched[0];
			j->iters = round(d / (f->compute_s + f->comm_s));
			if (d > 0 && j->iters < 1)
				j->iters = 1;
		}
		if (!(j->iters > 0)) {
			rc = sl_fail(err, SL_EFORMAT, "%s:%d: %s: must be positive", file, lineno,
				     has_iters ? "iters_full" : "duration_s");
			break;
		}
		n++;
	}
	if (rc == 0 && !have_header)
		rc = sl_fail(err, SL_EFORMAT, "%s: no header row", file);
	if (rc == 0)
		rc = unique_ids(js, lines, n, file, err);
	free(r);
	free(lines);
	if (rc < 0) {
		free(js);
		return rc;
	}
	*out = js;
	*n_out = n;
	return 0;
}

/* ---- a synthetic trace ------------------------------------------------ */

int
cl_jobs_synth(const cl_synth *p, const cl_model *models, int n_models, cl_job **out,
	      char *err)
{
	*out = NULL;
	if (p->n < 1 || p->n > 10000000)
		return sl_fail(err, SL_EINVAL, "jobs: expected 1 to 10000000");
	if (!(p->jobs_per_hour > 0) || !isfinite(p->jobs_per_hour))
		return sl_fail(err, SL_EINVAL, "rate: expected jobs per hour > 0");
	if (n_models < 1)
		return sl_fail(err, SL_EINVAL, "models: none to draw from");
	if (p->max_gpus < 1)
		return sl_fail(err, SL_EINVAL, "gpus: must be at least 1");
	cl_job *js = calloc((size_t)p->n, sizeof(cl_job));
	if (!js)
		return sl_fail(err, SL_ENOMEM, "out of memory for %ld jobs", p->n);
	rng r;
	rng_seed(&r, p->seed, 20);
	double t = 0;
	for (long i = 0; i < p->n; i++) {
		cl_job *j = &js[i];
		/* Poisson arrivals; Gavel's durations (80%: 60 10^U(1.5, 3) s,
		 * 20%: 60 10^U(3, 4) s); 1, 2, 4, 8 GPUs at 70, 10, 15, 5% */
		t += -log(1.0 - rng_uniform(&r)) * 3600.0 / p->jobs_per_hour;
		double u = rng_uniform(&r), e = rng_uniform(&r);
		double dur = 60.0 * pow(10.0, u < 0.8 ? 1.5 + 1.5 * e : 3.0 + e);
		double g = rng_uniform(&r);
		int gpus = g < 0.70 ? 1 : g < 0.80 ? 2 : g < 0.95 ? 4 : 8;
		j->id = i + 1;
		j->arrival = round(t * 1000.0) / 1000.0; /* the CSV's millisecond */
		j->gpus = gpus < p->max_gpus ? gpus : p->max_gpus;
		j->model = (int)rng_below(&r, (uint64_t)n_models);
		const cl_sched *f = &models[j->model].sched[0];
		j->iters = fmax(1.0, round(dur / (f->compute_s + f->comm_s)));
		j->batch = p->batch > 0 ? p->batch : 64;
	}
	*out = js;
	return 0;
}

int
cl_jobs_write(FILE *f, const cl_job *jobs, size_t n, const cl_model *models)
{
	fprintf(f, "job_id,arrival_s,num_gpus,model,batch_size,iters_full\n");
	for (size_t i = 0; i < n; i++) {
		const cl_job *j = &jobs[i];
		fprintf(f, "%ld,%.3f,%d,%s,%.0f,%.0f\n", j->id, j->arrival, j->gpus,
			models[j->model].name, j->batch, j->iters);
	}
	return ferror(f) ? -SL_EIO : 0;
}
