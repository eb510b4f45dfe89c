/* control_sweeps.c - finished sweeps on disk, for the dashboard's Sweeps
 * view (`stalelab serve --sweeps DIR`):
 *
 *   GET /api/v1/sweeps                       the sweeps: name, cells, figures
 *   GET /api/v1/sweeps/NAME                  one: its sweep file, results.csv
 *                                            (and summary.csv) as rows
 *   GET /api/v1/sweeps/NAME/figures/F.svg    a figure of `stalelab plot`
 *
 * (rows of control.c's route table, with a row for the paths below
 * /api/v1/sweeps/ that name none of them).
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


static int
is_svg(const char *dir, const char *name)
{
	size_t n = strlen(name);
	return n > 4 && !strcmp(name + n - 4, ".svg") && ctl_has_file(dir, name);
}

static json_t *sweep_entry(const char *name, const char *path);
static void get_one(ctl *c, const char *name, ctl_reply *o);

static ctl_shelf
shelf(const ctl *c)
{
	return (ctl_shelf){.root = c->sweeps_dir, .marker = "sweep.json", .fallback = "sweep",
			   .what = "sweeps", .flag = "sweeps",
			   .how = "a sweep's --out, or a directory of them", .none_code = "no_sweeps",
			   .one = "sweep", .miss_code = "no_sweep", .list_key = "sweeps",
			   .endpoint = "/api/v1/sweeps",
			   .paths = "/api/v1/sweeps/NAME or /api/v1/sweeps/NAME/figures/FILE.svg",
			   .entry = sweep_entry, .get_one = get_one};
}

/* the path of the sweep called name in --sweeps, or -1 (404 set) */
static int
sweep_path(const ctl *c, const char *name, char *path, size_t cap, ctl_reply *o)
{
	ctl_shelf sh = shelf(c);
	return ctl_shelf_find(&sh, name, path, cap, o);
}

static json_t *
figures_of(const char *path)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/figures", path);
	json_t *f = ctl_list_dir(p, is_svg);
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
	char *text = stat(p, &st) == 0 ? ctl_slurp(p, CTL_FILE_MAX, NULL) : NULL;
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
	json_object_set_new(r, "results", ctl_csv_json(path, "results.csv"));
	json_object_set_new(r, "summary", ctl_csv_json(path, "summary.csv"));
	reply_json(o, 200, r);
}

/* GET /api/v1/sweeps/{name}/figures/{file*}: a file that is no name
 * is no endpoint (before the sweep is looked up) */
void
ctl_sweeps_figure(ctl *c, const ctl_args *a, ctl_reply *o)
{
	char path[4096], dir[4200], p[4500];
	const char *name = a->name, *file = a->rest;
	if (!ctl_name_ok(file)) {
		ctl_shelf sh = shelf(c);
		ctl_shelf_miss(&sh, o);
		return;
	}
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
		text = ctl_slurp(p, CTL_FILE_MAX, NULL);
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
ctl_sweeps_get(ctl *c, const ctl_args *a, ctl_reply *o)
{
	ctl_shelf sh = shelf(c);
	ctl_shelf_get(&sh, c, a, o);
}
