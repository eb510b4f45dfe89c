/* sweep_dir.c - a sweep's directory: the sweep file read and its cells
 * checked (their defaults: the virtual clock, one thread, a stop), the
 * directory made, its copy of the sweep file kept and compared, files
 * copied for --merge. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "progress.h"
#include "jsonout.h"
#include "sl.h"
#include "sweep.h"
#include "sweep_impl.h"

/* ---- the grid, checked ------------------------------------------------------ */

/* a cell's defaults (the virtual clock, one thread, a stop) and its run
 * object checked as `stalelab run --config` would */
static int
prepare_cell(sweep_cell *c, char *err)
{
	json_t *clock = json_object_get(c->run, "clock");
	if (!clock)
		json_object_set_new(c->run, "clock", json_string("virtual"));
	else if (!json_is_string(clock) || strcmp(json_string_value(clock), "virtual"))
		return sl_fail(err, SL_EINVAL,
			       "clock: a sweep runs on the virtual clock (its rows must not "
			       "depend on the machine); drop \"clock\" or make it \"virtual\"");
	if (!json_object_get(c->run, "threads"))
		json_object_set_new(c->run, "threads", json_integer(1));
	run_config cfg;
	run_sched *sched;
	int n;
	int rc = sweep_cell_config(c->run, &cfg, &sched, &n, err);
	free(sched);
	if (rc == 0 && !progress_has_stop(&cfg))
		json_object_set_new(c->run, "stop", json_pack("{s:i}", "epochs", 3));
	return rc;
}

int
sweep_load_grid(const char *path, json_t **spec, sweep_grid *g, char *err)
{
	if (cli_read_json(path, spec, err) < 0)
		return -SL_EINVAL;
	if (sweep_expand(*spec, g, err) < 0)
		return -SL_EINVAL;
	for (int i = 0; i < g->n_cells; i++) {
		char e[SL_ERR_LEN];
		if (prepare_cell(&g->cell[i], e) < 0)
			return sl_fail(err, SL_EINVAL, "cell %d (%s): %s", i,
				       g->cell[i].label[0] ? g->cell[i].label : "the only one", e);
	}
	return 0;
}

/* ---- files ----------------------------------------------------------------- */

static int
write_json(const char *path, const json_t *j, char *err)
{
	char *s = jsonout_dumps(j);
	if (!s)
		return sl_fail(err, SL_ENOMEM, "out of memory");
	size_t n = strlen(s);
	s[n] = 0;
	char *t = realloc(s, n + 2);
	if (t) {
		s = t;
		s[n++] = '\n';
		s[n] = 0;
	}
	int rc = sweep_write_file(path, s, n, err);
	free(s);
	return rc;
}

/* DIR/sweep.json: written the first time; then the same file, or --force */
int
sweep_check_spec(const char *dir, const json_t *spec, int force, char *err)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/sweep.json", dir);
	json_error_t je;
	json_t *old = json_load_file(path, 0, &je);
	if (old) {
		char keys[400];
		int n = sweep_diff(old, spec, keys, sizeof(keys));
		json_decref(old);
		if (n == 0)
			return 0;
		if (!force)
			return sl_fail(err, SL_EINVAL,
				       "%s was started with another sweep file: %s differ%s (its "
				       "copy is %s); --force runs this one there (cells whose run "
				       "object is unchanged are kept), or give another --out",
				       dir, keys, n == 1 ? "s" : "", path);
	} else if (access(path, F_OK) == 0) {
		return sl_fail(err, SL_EINVAL, "%s: line %d: %s (not a sweep's copy of its file?)",
			       path, je.line, je.text);
	}
	return write_json(path, spec, err);
}

/* a DIR's grid, from its own copy of the sweep file */
int
sweep_dir_grid(const char *dir, json_t **spec, sweep_grid *g, char *err)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/sweep.json", dir);
	if (access(path, R_OK) < 0)
		return sl_fail(err, SL_EINVAL, "%s: no sweep here (no %s)", dir, path);
	return sweep_load_grid(path, spec, g, err);
}

int
sweep_copy_file(const char *from, const char *to, char *err)
{
	FILE *f = fopen(from, "rb");
	if (!f)
		return sl_fail(err, SL_EIO, "%s: %s", from, strerror(errno));
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	for (size_t k; buf && (k = fread(buf + n, 1, cap - n, f)) > 0;) {
		n += k;
		if (n == cap) {
			char *nb = realloc(buf, cap *= 2);
			if (!nb) {
				free(buf);
				buf = NULL;
			}
			buf = nb;
		}
	}
	fclose(f);
	if (!buf)
		return sl_fail(err, SL_ENOMEM, "out of memory");
	int rc = sweep_write_file(to, buf, n, err);
	free(buf);
	return rc;
}
