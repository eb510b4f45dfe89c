/* sweep.h - `stalelab sweep`: a grid of runs on the virtual clock.
 *
 * The sweep file is a run object in which any key may hold a list (an
 * axis), nested keys too ("delay": {"mean_ms": [0, 10]} is the axis
 * delay.mean_ms), plus three keys of its own: "seeds": N (every cell N
 * times, seeds 1..N), "variants": {"name": {partial run object}, ...}
 * (named combinations a product cannot express, each merged over the rest
 * and expanded on its own) and "target": accuracy (for the to-target
 * columns). The grid is built by the pure functions here (sweep_grid.c);
 * sweep.c runs its cells (sweep_cell.c one cell), resumes, aggregates and
 * merges (sweep_table.c). docs/experiments.md is the user's guide. */
#ifndef SL_SWEEP_H
#define SL_SWEEP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SWEEP_MAX_CELLS 100000
#define SWEEP_MAX_AXES 32
#define SWEEP_NAME_MAX 96

/* one axis: a key path ("delay.mean_ms", "variant", "seed") */
typedef struct sweep_axis {
	char key[128];
} sweep_axis;

typedef struct sweep_cell {
	int index;               /* in grid order: the shard and merge order */
	json_t *run;             /* the cell's run object (owned) */
	char name[SWEEP_NAME_MAX]; /* file name: short, collision-free */
	char *label;             /* "rule=asgd,workers=4,seed=1" (owned) */
	json_t *axes;            /* {"rule": "asgd", "workers": 4, ...} (owned) */
} sweep_cell;

typedef struct sweep_grid {
	sweep_axis axis[SWEEP_MAX_AXES]; /* the varied keys, in column order */
	int n_axes;
	sweep_cell *cell;
	int n_cells;
	double target;           /* accuracy for the to-target columns; 0: none */
	int seeds;               /* 0: the run objects' own seeds */
} sweep_grid;

/* Expand a sweep file's object into its cells (pure: no I/O). Each cell's
 * run object is the file's with one value per axis (and the variant
 * merged in, and its seed). Errors name the key: an empty list, a list
 * inside a list, a bad "seeds", "variants" or "target", a grid of more
 * than SWEEP_MAX_CELLS cells. The run objects are not checked here (the
 * caller parses each: an unknown key is named with its cell). */
int sweep_expand(const json_t *spec, sweep_grid *g, char *err);
/* The same with another limit on the cells (the fuzz harness's). */
int sweep_expand_max(const json_t *spec, int max_cells, sweep_grid *g, char *err);
void sweep_grid_free(sweep_grid *g);

/* The key paths where a and b differ, comma-separated into out ("" when
 * equal; at most cap bytes, "..." when cut). Returns how many. */
int sweep_diff(const json_t *a, const json_t *b, char *out, size_t cap);

/* A cell's file name from its label: the label's characters that are
 * safe in a file name ([A-Za-z0-9._=-], ',' as '_'), cut to fit, with a
 * hash of the whole label when cut or when unsafe characters were
 * replaced. */
void sweep_cell_name(const char *label, char *out, size_t cap);

/* The share of cells of shard i of n (0 <= i < n): the cells whose index
 * is i modulo n. */
int sweep_in_shard(int index, int shard, int n_shards);

/* ---- the metrics of a finished cell (sweep_table.c) ---- */

/* The columns of results.csv after the cell and its axes, in order. The
 * ones marked machine measure this machine, the rest are the same bits
 * on every run of the cell. */
typedef struct sweep_metric {
	const char *key;
	int machine;
	const char *doc;
} sweep_metric;
extern const sweep_metric sweep_metrics[];
extern const int sweep_n_metrics;

/* results.csv from the cells' result objects (an array of {"cell",
 * "index", "axes", "metrics"}), in index order, into path by rename. */
int sweep_write_csv(const char *path, const sweep_axis *axes, int n_axes,
		    const json_t *results, char *err);

/* The summary of results: rows grouped over seeds (mean and the 95%
 * interval of each metric), and each group's `metric` over the baseline
 * group's (the group with the baseline's key=value and the group's other
 * keys) when baseline is given ("delay.s=0"). Printed to out; written as
 * CSV to csv_path when not NULL. */
int sweep_summary(const json_t *results, const sweep_axis *axes, int n_axes,
		  const char *baseline, const char *metric, const char *csv_path,
		  FILE *out, char *err);

/* stalelab sweep; stalelab plot (sweep_plot.c) */
int cmd_sweep(int argc, char **argv);
int cmd_plot(int argc, char **argv);

#endif
