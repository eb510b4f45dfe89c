/* sweep_impl.h - what the files of `stalelab sweep` share (sweep.c,
 * sweep_cell.c, sweep_table.c); not for other files. */
#ifndef SL_SWEEP_IMPL_H
#define SL_SWEEP_IMPL_H

#include "config.h"
#include "dataset.h"
#include "run.h"
#include "sweep.h"

/* Run one cell (in its own process): its log to CELLS/NAME.jsonl and its
 * result to CELLS/NAME.json, each through a temporary file and a rename,
 * the log first. target: accuracy for the to-target metrics (0: none). */
int sweep_run_cell(const sweep_cell *cell, const dataset_pair *data, const char *cells_dir,
		   double target, char *err);

/* A cell's run object as `stalelab run --config` reads it: cfg and its
 * schedule (*sched: free it). 0, or -SL_EINVAL with err naming the field. */
int sweep_cell_config(const json_t *obj, run_config *cfg, run_sched **sched, int *n_sched,
		      char *err);

/* text to path through path.tmp, fsync and a rename */
int sweep_write_file(const char *path, const char *text, size_t len, char *err);

/* Read the finished cells' results in DIR/cells whose run objects are
 * the grid's (a result of another run object is not the cell's: it runs
 * again): done[i] = 1 and results gets the result. */
int sweep_load_results(const char *cells_dir, const sweep_grid *g, char *done,
		       json_t *results, char *err);

/* The grid of DIR's own copy of its sweep file (DIR/sweep.json), checked
 * as when it ran; -SL_EINVAL with err saying what is missing or wrong. */
int sweep_dir_grid(const char *dir, json_t **spec, sweep_grid *g, char *err);

/* sweep_table.c: --baseline KEY=VALUE checked against the axes (KEY into
 * key, VALUE parsed as JSON, else a bare string, into *val: release it);
 * a group's label from its axes ("rule=asgd,workers=4", "(all)" for none) */
int sweep_baseline(const char *baseline, const sweep_axis *axes, int n_axes, char *key, size_t cap,
		   json_t **val, char *err);
void sweep_group_label(const json_t *axes, char *out, size_t cap);

/* sweep_dir.c: the sweep file read and every cell checked and given its
 * defaults (the virtual clock, one thread, 3 epochs without a stop);
 * mkdir -p; DIR/sweep.json written the first time, then compared (a
 * changed file refused unless force, naming the keys); a file copied
 * through a rename */
int sweep_load_grid(const char *path, json_t **spec, sweep_grid *g, char *err);
int sweep_check_spec(const char *dir, const json_t *spec, int force, char *err);
int sweep_copy_file(const char *from, const char *to, char *err);

/* sweep_run.c: run FILE's cells of shard I/N into DIR; the exit code (0
 * all done, 1 a cell failed, 2 a bad file, 130 interrupted) */
int sweep_run(const char *file, const char *dir, int jobs, int shard, int n_shards, int force,
	      int quiet);

/* stalelab plot DIR (plot.c): the figures of a finished sweep */
int sweep_plot(const char *dir, const char *baseline, char *err);

#endif
