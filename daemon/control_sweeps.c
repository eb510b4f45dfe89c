/* control_sweeps.c - finished sweeps on disk, for the dashboard's Sweeps
 * view (`stalelab serve --sweeps DIR`):
 *
 *   GET /api/v1/sweeps                       the sweeps: name, cells, figures
 *   GET /api/v1/sweeps/NAME                  one: its sweep file, results.csv
 *                                            (and summary.csv) as rows
 *   GET /api/v1/sweeps/NAME/figures/F.svg    a figure of `stalelab plot`
 *
 * DIR is one sweep's directory (it holds sweep.json) or a directory of
 * them. Only names listed in DIR are served: a NAME or F is looked up
 * among the directory's entries, never joined onto a path as given. Reads
 * only; no lock (the run's state is not touched). */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "control_impl.h"
#include "sl.h"

#define SWEEPS_MAX 1000            /* sweeps listed */
#define SWEEP_FILE_MAX (64 << 20)  /* the largest results.csv read */

/* a name we serve: [A-Za-z0-9._=-], 1..200, not starting with '.' */
static int
name_ok(const char *s)
{
	size_t n = strlen(s);
	if (!n || n > 200 || s[0] == '.')
		return 0;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-' ||
		      *p == '='))
			return 0;
	return 1;
}

static int
has_file(const char *dir, const char *name)
{
	char p[4096];
	struct stat st;
	if (snprintf(p, sizeof(p), "%s/%s", dir, name) >= (int)sizeof(p))
		return 0;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* the sorted names in dir passing keep (NULL: none readable) */
static json_t *
list_dir(const char *dir, int (*keep)(const char *dir, const char *name))
{
	DIR *d = opendir(dir);
	if (!d)
		return NULL;
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < SWEEPS_MAX) {
		if (!name_ok(e->d_name) || !keep(dir, e->d_name))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			char **nn = realloc(names, cap * sizeof(*names));
			if (!nn)
				break;
			names = nn;
		}
		if (!(names[n] = strdup(e->d_name)))
			break;
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_str);
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++) {
		json_array_append_new(arr, json_string(names[i]));
		free(names[i]);
	}
	free(names);
	return arr;
}

static int
is_sweep(const char *dir, const char *name)
{
	char p[4096];
	if (snprintf(p, sizeof(p), "%s/%s", dir, name) >= (int)sizeof(p))
		return 0;
	return has_file(p, "sweep.json");
}

static int
is_svg(const char *dir, const char *name)
{
	size_t n = strlen(name);
	return n > 4 && !strcmp(name + n - 4, ".svg") && has_file(dir, name);
}

/* the path of the sweep called name in --sweeps, or -1 (404 set) */
static int
sweep_path(const ctl *c, const char *name, char *path, size_t cap, ctl_reply *o)
{
	const char *root = c->sweeps_dir;
	const char *base = strrchr(root, '/') ? strrchr(root, '/') + 1 : root;
	if (has_file(root, "sweep.json") && name_ok(name) && !strcmp(name, base[0] ? base : "sweep")) {
		snprintf(path, cap, "%s", root);
		return 0;
	}
	if (name_ok(name) && is_sweep(root, name) &&
	    snprintf(path, cap, "%s/%s", root, name) < (int)cap)
		return 0;
	char msg[320];
	snprintf(msg, sizeof(msg), "no sweep \"%.200s\" in %s (GET /api/v1/sweeps lists them)",
		 name, root);
	reply_error(o, 404, "no_sweep", msg);
	return -1;
}

/* a whole file, NUL-terminated; NULL on error (errno) or over max */
static char *
slurp(const char *path, size_t max, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	while (buf) {
		if (n + 1 >= cap) {
			if (cap > max) {
				free(buf);
				buf = NULL;
				errno = EFBIG;
				break;
			}
			char *nb = realloc(buf, cap *= 2);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
		}
		size_t got = fread(buf + n, 1, cap - 1 - n, f);
		if (!got)
			break;
		n += got;
	}
	fclose(f);
	if (buf) {
		buf[n] = 0;
		if (len)
			*len = n;
	}
	return buf;
}

/* RFC 4180 text -> [[field, ...], ...] (quoted fields, "" inside them,
 * \r\n or \n line ends); the header is the first row */
json_t *
ctl_csv_rows(const char *s)
{
	json_t *rows = json_array(), *row = json_array();
	size_t cap = 256, n = 0;
	char *f = malloc(cap);
	int quoted = 0, any = 0;
	for (const char *p = s; f; p++) {
		char ch = *p;
		if (quoted && ch) {
			if (ch == '"' && p[1] == '"') {
				ch = '"';
				p++;
			} else if (ch == '"') {
				quoted = 0;
				continue;
			}
		} else if (ch == '"' && n == 0) {
			quoted = any = 1;
			continue;
		} else if (ch == ',' || ch == '\n' || ch == '\r' || !ch) {
			if (ch == '\r' && p[1] == '\n')
				continue;
			if (ch == ',' || n || any || json_array_size(row)) {
				f[n] = 0;
				json_array_append_new(row, json_string(f));
			}
			n = 0;
			any = 0;
			if (ch != ',' && json_array_size(row)) {
				json_array_append_new(rows, row);
				row = json_array();
			}
			if (!ch)
				break;
			continue;
		}
		if (n + 2 > cap) {
			char *nf = realloc(f, cap *= 2);
			if (!nf) {
				free(f);
				f = NULL;
				break;
			}
			f = nf;
		}
		f[n++] = ch;
		any = 1;
	}
	json_decref(row);
	free(f);
	return rows;
}

/* {"columns": [...], "rows": [[...], ...]} of DIR/NAME, or null */
static json_t *
csv_json(const char *dir, const char *name)
{
	char p[4200];
	if (snprintf(p, sizeof(p), "%s/%s", dir, name) >= (int)sizeof(p))
		return json_null();
	char *text = slurp(p, SWEEP_FILE_MAX, NULL);
	if (!text)
		return json_null();
	json_t *rows = ctl_csv_rows(text);
	free(text);
	json_t *head = json_array_size(rows) ? json_incref(json_array_get(rows, 0)) : json_array();
	if (json_array_size(rows))
		json_array_remove(rows, 0);
	return json_pack("{s:o,s:o}", "columns", head, "rows", rows);
}

static json_t *
figures_of(const char *path)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/figures", path);
	json_t *f = list_dir(p, is_svg);
	return f ? f : json_array();
}

/* one entry of the list: name, cells done, figures */
static json_t *
sweep_entry(const char *name, const char *path)
{
	char p[4200];
	struct stat st;
	snprintf(p, sizeof(p), "%s/results.csv", path);
	json_int_t cells = 0;
	double modified = 0;
	char *text = stat(p, &st) == 0 ? slurp(p, SWEEP_FILE_MAX, NULL) : NULL;
	if (text) {
		for (const char *q = text; (q = strchr(q, '\n')); q++)
			cells++;
		cells = cells > 0 ? cells - 1 : 0; /* the header */
		modified = (double)st.st_mtime;
		free(text);
	}
	return json_pack("{s:s,s:I,s:f,s:o}", "name", name, "cells", cells, "modified", modified,
			 "figures", figures_of(path));
}

static void
get_list(ctl *c, ctl_reply *o)
{
	const char *root = c->sweeps_dir;
	json_t *arr = json_array();
	if (has_file(root, "sweep.json")) {
		const char *base = strrchr(root, '/') ? strrchr(root, '/') + 1 : root;
		json_array_append_new(arr, sweep_entry(base[0] ? base : "sweep", root));
	} else {
		json_t *names = list_dir(root, is_sweep);
		if (!names) {
			char msg[320];
			snprintf(msg, sizeof(msg), "--sweeps %s: %s", root, strerror(errno));
			json_decref(arr);
			reply_error(o, 500, "sweeps_dir", msg);
			return;
		}
		size_t i;
		json_t *n;
		json_array_foreach(names, i, n) {
			char p[4096];
			snprintf(p, sizeof(p), "%s/%s", root, json_string_value(n));
			json_array_append_new(arr, sweep_entry(json_string_value(n), p));
		}
		json_decref(names);
	}
	reply_json(o, 200, json_pack("{s:s,s:o}", "dir", root, "sweeps", arr));
}

static void
get_one(ctl *c, const char *name, ctl_reply *o)
{
	char path[4096], p[4200];
	if (sweep_path(c, name, path, sizeof(path), o) < 0)
		return;
	snprintf(p, sizeof(p), "%s/sweep.json", path);
	json_error_t je;
	json_t *spec = json_load_file(p, 0, &je);
	json_t *r = sweep_entry(name, path);
	json_object_set_new(r, "spec", spec ? spec : json_null());
	json_object_set_new(r, "results", csv_json(path, "results.csv"));
	json_object_set_new(r, "summary", csv_json(path, "summary.csv"));
	reply_json(o, 200, r);
}

static void
get_figure(ctl *c, const char *name, const char *file, ctl_reply *o)
{
	char path[4096], dir[4200], p[4500];
	if (sweep_path(c, name, path, sizeof(path), o) < 0)
		return;
	snprintf(dir, sizeof(dir), "%s/figures", path);
	json_t *figs = figures_of(path);
	int found = 0;
	size_t i;
	json_t *f;
	json_array_foreach(figs, i, f) found |= !strcmp(json_string_value(f), file);
	json_decref(figs);
	char *text = NULL;
	if (found && snprintf(p, sizeof(p), "%s/%s", dir, file) < (int)sizeof(p))
		text = slurp(p, SWEEP_FILE_MAX, NULL);
	if (!text) {
		char msg[320];
		snprintf(msg, sizeof(msg), "sweep %.100s has no figure \"%.100s\" (stalelab plot "
			 "DIR draws them; the sweep's entry lists them)", name, file);
		reply_error(o, 404, "no_figure", msg);
		return;
	}
	o->status = 200;
	o->type = "image/svg+xml";
	o->text = text;
}

void
ctl_get_sweeps(ctl *c, const char *method, const char *rest, ctl_reply *o)
{
	if (!strcmp(method, "OPTIONS")) {
		snprintf(o->allow, sizeof(o->allow), "GET, HEAD, OPTIONS");
		o->status = 204;
		return;
	}
	if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
		snprintf(o->allow, sizeof(o->allow), "GET, HEAD");
		reply_error(o, 405, "method", "method not allowed here (allowed: GET, HEAD)");
		return;
	}
	if (!c->sweeps_dir) {
		reply_error(o, 404, "no_sweeps", "this daemon serves no sweeps: start it with "
			    "`stalelab serve --sweeps DIR` (a sweep's --out, or a directory of them)");
		return;
	}
	if (!*rest || !strcmp(rest, "/")) {
		get_list(c, o);
		return;
	}
	if (*rest != '/') {
		reply_error(o, 404, "not_found", "no such endpoint (GET / lists them)");
		return;
	}
	char name[256];
	const char *slash = strchr(rest + 1, '/');
	size_t n = slash ? (size_t)(slash - rest - 1) : strlen(rest + 1);
	if (n >= sizeof(name))
		n = sizeof(name) - 1;
	memcpy(name, rest + 1, n);
	name[n] = 0;
	if (!slash) {
		get_one(c, name, o);
	} else if (!strncmp(slash, "/figures/", 9) && name_ok(slash + 9)) {
		get_figure(c, name, slash + 9, o);
	} else {
		reply_error(o, 404, "not_found", "no such endpoint: /api/v1/sweeps/NAME or "
			    "/api/v1/sweeps/NAME/figures/FILE.svg");
	}
}
