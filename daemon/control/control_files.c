/* control_files.c - the files on disk the daemon serves read-only
 * (finished sweeps, control_sweeps.c; finished cluster simulations,
 * control_clusters.c): names checked against a directory's own entries,
 * whole files read with a cap, CSV text as JSON rows. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "control_impl.h"

/* a name we serve: [A-Za-z0-9._=-], 1..200, not starting with '.' */
int
ctl_name_ok(const char *s)
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

int
ctl_has_file(const char *dir, const char *name)
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
json_t *
ctl_list_dir(const char *dir, int (*keep)(const char *dir, const char *name))
{
	DIR *d = opendir(dir);
	if (!d)
		return NULL;
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < CTL_LIST_MAX) {
		if (!ctl_name_ok(e->d_name) || (keep && !keep(dir, e->d_name)))
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
	if (n)
		qsort(names, n, sizeof(*names), cmp_str);
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++) {
		json_array_append_new(arr, json_string(names[i]));
		free(names[i]);
	}
	free(names);
	return arr;
}

/* a whole file, NUL-terminated; NULL on error (errno) or over max */
char *
ctl_slurp(const char *path, size_t max, size_t *len)
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
json_t *
ctl_csv_json(const char *dir, const char *name)
{
	char p[4200];
	if (snprintf(p, sizeof(p), "%s/%s", dir, name) >= (int)sizeof(p))
		return json_null();
	char *text = ctl_slurp(p, CTL_FILE_MAX, NULL);
	if (!text)
		return json_null();
	json_t *rows = ctl_csv_rows(text);
	free(text);
	json_t *head = json_array_size(rows) ? json_incref(json_array_get(rows, 0)) : json_array();
	if (json_array_size(rows))
		json_array_remove(rows, 0);
	return json_pack("{s:o,s:o}", "columns", head, "rows", rows);
}


/* ---- shelves: a directory of finished things, or one of them ---------------- */

static const char *
shelf_base(const ctl_shelf *s)
{
	const char *b = strrchr(s->root, '/') ? strrchr(s->root, '/') + 1 : s->root;
	return b[0] ? b : s->fallback;
}

int
ctl_shelf_is_one(const ctl_shelf *s)
{
	return ctl_has_file(s->root, s->marker);
}

int
ctl_shelf_path(const ctl_shelf *s, const char *name, char *path, size_t cap)
{
	if (!ctl_name_ok(name))
		return -1;
	if (ctl_shelf_is_one(s)) {
		if (strcmp(name, shelf_base(s)))
			return -1;
		return snprintf(path, cap, "%s", s->root) < (int)cap ? 0 : -1;
	}
	if (snprintf(path, cap, "%s/%s", s->root, name) >= (int)cap)
		return -1;
	return ctl_has_file(path, s->marker) ? 0 : -1;
}

/* no root: 404 none_code (1, o set) */
static int
shelf_none(const ctl_shelf *s, ctl_reply *o)
{
	if (s->root)
		return 0;
	char msg[300];
	snprintf(msg, sizeof(msg), "this daemon serves no %s: start it with `stalelab serve "
		 "--%s DIR` (%s)", s->what, s->flag, s->how);
	reply_error(o, 404, s->none_code, msg);
	return 1;
}

int
ctl_shelf_find(const ctl_shelf *s, const char *name, char *path, size_t cap, ctl_reply *o)
{
	if (shelf_none(s, o))
		return -1;
	if (ctl_shelf_path(s, name, path, cap) == 0)
		return 0;
	char msg[400];
	snprintf(msg, sizeof(msg), "no %s \"%.200s\" in %.100s (GET %s lists them)", s->one, name,
		 s->root, s->endpoint);
	reply_error(o, 404, s->miss_code, msg);
	return -1;
}

json_t *
ctl_shelf_list(const ctl_shelf *s)
{
	json_t *arr = json_array();
	if (ctl_shelf_is_one(s)) {
		json_array_append_new(arr, s->entry(shelf_base(s), s->root));
		return arr;
	}
	json_t *names = ctl_list_dir(s->root, NULL);
	if (!names) {
		json_decref(arr);
		return NULL;
	}
	size_t i;
	json_t *n;
	json_array_foreach(names, i, n) {
		char p[4096];
		if (snprintf(p, sizeof(p), "%s/%s", s->root, json_string_value(n)) < (int)sizeof(p) &&
		    ctl_has_file(p, s->marker))
			json_array_append_new(arr, s->entry(json_string_value(n), p));
	}
	json_decref(names);
	return arr;
}

void
ctl_shelf_miss(const ctl_shelf *s, ctl_reply *o)
{
	char msg[300];
	if (shelf_none(s, o))
		return;
	snprintf(msg, sizeof(msg), "no such endpoint: %s", s->paths);
	reply_error(o, 404, "not_found", msg);
}

void
ctl_shelf_get(const ctl_shelf *s, ctl *c, const ctl_args *a, ctl_reply *o)
{
	if (a->route->flags & RT_MISS) {
		ctl_shelf_miss(s, o);
		return;
	}
	if (a->name[0]) { /* an empty name is the listing's trailing '/' */
		s->get_one(c, a->name, o);
		return;
	}
	if (shelf_none(s, o))
		return;
	json_t *arr = ctl_shelf_list(s);
	if (!arr) {
		char msg[400], code[64];
		snprintf(msg, sizeof(msg), "--%s %.200s: %s", s->flag, s->root, strerror(errno));
		snprintf(code, sizeof(code), "%s_dir", s->flag);
		reply_error(o, 500, code, msg);
		return;
	}
	reply_json(o, 200, json_pack("{s:s,s:o}", "dir", s->root, s->list_key, arr));
}
