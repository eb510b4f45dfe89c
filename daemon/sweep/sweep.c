/* sweep.c - `stalelab sweep`: a grid of runs, its cells side by side in
 * processes of their own (forked after the data is loaded, so they share
 * it), resumable, sharded over a cluster's launchers, merged, summarised.
 * This file: the options and the modes (--list, --summary, --merge); the
 * run is sweep_run.c's, the directory sweep_dir.c's, the grid
 * sweep_grid.c's, one cell sweep_cell.c's, the tables sweep_table.c's, the
 * figures sweep_plot.c's. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "sl.h"
#include "sweep.h"
#include "sweep_impl.h"

static const char usage[] =
	"Usage: stalelab sweep FILE --out DIR [OPTIONS]\n"
	"       stalelab sweep --summary DIR [--baseline KEY=VALUE] [--metric NAME]\n"
	"       stalelab sweep --merge DIR... --out DIR\n"
	"       stalelab sweep --list FILE\n"
	"\n"
	"Run a grid of runs on the virtual clock. FILE is a run object in which\n"
	"any key may hold a list (\"rule\": [\"ssgd\", \"asgd\"], nested keys too:\n"
	"\"delay\": {\"dist\": \"version\", \"s\": [0, 4]}); the grid is the product of\n"
	"the lists, plus \"variants\": {\"name\": {partial run object}, ...} each\n"
	"expanded on its own, times \"seeds\": N (seeds 1..N); \"target\": ACC sets\n"
	"the accuracy of the to-target columns. DIR gets results.csv (a row per\n"
	"cell) and cells/NAME.jsonl (each cell's log). A cell's row and log are\n"
	"the same bits whatever --jobs, shard or neighbours (but for train_s and\n"
	"samples_per_s). See docs/experiments.md.\n"
	"\n"
	"  -o, --out DIR        where results.csv and cells/ go (made if missing).\n"
	"                       Run again, a sweep skips its finished cells; a cell\n"
	"                       killed mid-way runs again\n"
	"  -j, --jobs N         cells side by side (default: the cores, %d here)\n"
	"      --shard I/N      run share I of N (0 <= I < N: the cells whose index\n"
	"                       is I modulo N); default from a Slurm job array\n"
	"                       (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN of\n"
	"                       SLURM_ARRAY_TASK_COUNT), else the launcher's rank\n"
	"                       and size (mpirun's OMPI_COMM_WORLD_RANK/SIZE,\n"
	"                       PMI_RANK/SIZE, srun's SLURM_PROCID/NTASKS)\n"
	"      --force          run FILE in a DIR started with another sweep file\n"
	"                       (refused otherwise, naming the keys that differ);\n"
	"                       cells whose run object is unchanged are kept\n"
	"      --list           print the cells (index, name, label) and stop\n"
	"      --summary DIR    aggregate DIR's results over seeds: mean and 95%%\n"
	"                       interval per group (also DIR/summary.csv)\n"
	"      --baseline K=V   with --summary: each group's --metric over the\n"
	"                       group with K=V and the same other keys\n"
	"      --metric NAME    the metric --baseline divides (default\n"
	"                       updates_to_target)\n"
	"      --merge          gather the shards' DIRs (the arguments) into --out\n"
	"      --plot           then the figures, as `stalelab plot DIR` makes them\n"
	"  -q, --quiet          no progress on stderr\n"
	"  -h, --help           this text\n"
	"\n"
	"A cell runs on the virtual clock with one compute thread unless its run\n"
	"object says otherwise, and for 3 epochs when it gives no stop.\n"
	"\n"
	"Exit status: 0 every cell of the share finished, 1 a cell failed (the\n"
	"others ran; run again to retry it), 2 bad usage or a bad sweep file,\n"
	"130 interrupted by SIGINT, 143 by SIGTERM (finished cells are kept).\n";

/* ---- modes ----------------------------------------------------------------------- */

static int
parse_shard(const char *s, int *i, int *n)
{
	char extra;
	return sscanf(s, "%d/%d%c", i, n, &extra) == 2 && *n >= 1 && *i >= 0 && *i < *n ? 0 : -1;
}

/* a launcher's rank and size (mpirun, srun -n): I/N from the first pair
 * set; 0 when none is, -1 when one is not a share */
static int
rank_from_env(int *i, int *n, char *err)
{
	static const char *const pairs[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
					       {"PMI_RANK", "PMI_SIZE"},
					       {"SLURM_PROCID", "SLURM_NTASKS"}};
	for (size_t k = 0; k < sizeof(pairs) / sizeof(pairs[0]); k++) {
		const char *r = getenv(pairs[k][0]), *z = getenv(pairs[k][1]);
		if (!r || !z)
			continue;
		unsigned long long a, b;
		if (cli_u64(r, &a) < 0 || cli_u64(z, &b) < 0 || b < 1 || a >= b)
			return sl_fail(err, SL_EINVAL, "%s=%s, %s=%s: not a share (give --shard I/N)",
				       pairs[k][0], r, pairs[k][1], z);
		*i = (int)a;
		*n = (int)b;
		return 1;
	}
	return 0;
}

static int
shard_from_env(int *i, int *n, char *err)
{
	const char *id = getenv("SLURM_ARRAY_TASK_ID"), *cnt = getenv("SLURM_ARRAY_TASK_COUNT");
	if (!id || !cnt)
		return rank_from_env(i, n, err);
	const char *mn = getenv("SLURM_ARRAY_TASK_MIN");
	unsigned long long a, b, m = 0;
	if (cli_u64(id, &a) < 0 || cli_u64(cnt, &b) < 0 || (mn && cli_u64(mn, &m) < 0) || b < 1 ||
	    a < m || a - m >= b)
		return sl_fail(err, SL_EINVAL,
			       "SLURM_ARRAY_TASK_ID=%s, SLURM_ARRAY_TASK_MIN=%s, "
			       "SLURM_ARRAY_TASK_COUNT=%s: not a share (give --shard I/N)",
			       id, mn ? mn : "(unset)", cnt);
	*i = (int)(a - m);
	*n = (int)b;
	return 1;
}

static int
mode_list(const char *file)
{
	char err[SL_ERR_LEN];
	json_t *spec = NULL;
	sweep_grid g;
	memset(&g, 0, sizeof(g));
	if (sweep_load_grid(file, &spec, &g, err) < 0) {
		fprintf(stderr, "stalelab sweep: %s\n", err);
		json_decref(spec);
		sweep_grid_free(&g);
		return 2;
	}
	for (int i = 0; i < g.n_cells; i++)
		printf("%d\t%s\t%s\n", i, g.cell[i].name, g.cell[i].label);
	printf("%d cell%s, %d ax%s:", g.n_cells, g.n_cells == 1 ? "" : "s", g.n_axes,
	       g.n_axes == 1 ? "is" : "es");
	for (int i = 0; i < g.n_axes; i++)
		printf(" %s", g.axis[i].key);
	printf("\n");
	json_decref(spec);
	sweep_grid_free(&g);
	return 0;
}

static int
mode_summary(const char *dir, const char *baseline, const char *metric)
{
	char err[SL_ERR_LEN], cells[4200], csv[4200];
	json_t *spec = NULL;
	sweep_grid g;
	memset(&g, 0, sizeof(g));
	int code = 2;
	json_t *results = json_array();
	char *done = NULL;
	if (sweep_dir_grid(dir, &spec, &g, err) < 0)
		goto out;
	snprintf(cells, sizeof(cells), "%s/cells", dir);
	snprintf(csv, sizeof(csv), "%s/summary.csv", dir);
	done = calloc((size_t)g.n_cells + 1, 1);
	if (!done || sweep_load_results(cells, &g, done, results, err) < 0)
		goto out;
	if (!json_array_size(results)) {
		sl_fail(err, SL_EINVAL, "%s: no finished cell yet", dir);
		goto out;
	}
	if (sweep_summary(results, g.axis, g.n_axes, baseline, metric, csv, stdout, err) < 0)
		goto out;
	printf("%zu of %d cells finished; %s\n", json_array_size(results), g.n_cells, csv);
	code = 0;
out:
	if (code)
		fprintf(stderr, "stalelab sweep: %s\n", err);
	free(done);
	json_decref(results);
	json_decref(spec);
	sweep_grid_free(&g);
	return code;
}

static int
mode_merge(char **dirs, int n_dirs, const char *out)
{
	char err[SL_ERR_LEN];
	json_t *spec = NULL;
	sweep_grid g;
	memset(&g, 0, sizeof(g));
	int code = 2, have = 0;
	json_t *results = json_array();
	char *done = NULL, *any = NULL, ocells[4200], csv[4200];
	if (sweep_dir_grid(dirs[0], &spec, &g, err) < 0)
		goto out;
	done = calloc((size_t)g.n_cells + 1, 1);
	any = calloc((size_t)g.n_cells + 1, 1);
	if (!done || !any) {
		sl_fail(err, SL_ENOMEM, "out of memory");
		goto out;
	}
	snprintf(ocells, sizeof(ocells), "%s/cells", out);
	if (cli_mkdir_p(ocells, err) < 0 || sweep_check_spec(out, spec, 0, err) < 0)
		goto out;
	for (int d = 0; d < n_dirs; d++) {
		json_t *other = NULL;
		sweep_grid og;
		memset(&og, 0, sizeof(og));
		if (d > 0) {
			char keys[400];
			int rc = sweep_dir_grid(dirs[d], &other, &og, err);
			sweep_grid_free(&og);
			if (rc < 0)
				goto out;
			int n = sweep_diff(spec, other, keys, sizeof(keys));
			json_decref(other);
			if (n) {
				sl_fail(err, SL_EINVAL, "%s and %s ran other sweep files: %s differ%s",
					dirs[0], dirs[d], keys, n == 1 ? "s" : "");
				goto out;
			}
		}
		char cells[4200];
		snprintf(cells, sizeof(cells), "%s/cells", dirs[d]);
		memset(done, 0, (size_t)g.n_cells);
		json_t *r = json_array();
		sweep_load_results(cells, &g, done, r, err);
		json_decref(r);
		for (int i = 0; i < g.n_cells; i++) {
			if (!done[i] || any[i])
				continue;
			const char *nm = g.cell[i].name;
			char a[4400], b[4400];
			snprintf(a, sizeof(a), "%s/%s.jsonl", cells, nm);
			snprintf(b, sizeof(b), "%s/%s.jsonl", ocells, nm);
			int same = !strcmp(cells, ocells);
			if (!same && sweep_copy_file(a, b, err) < 0)
				goto out;
			snprintf(a, sizeof(a), "%s/%s.json", cells, nm);
			snprintf(b, sizeof(b), "%s/%s.json", ocells, nm);
			if (!same && sweep_copy_file(a, b, err) < 0)
				goto out;
			any[i] = 1;
			have++;
		}
	}
	memset(done, 0, (size_t)g.n_cells);
	if (sweep_load_results(ocells, &g, done, results, err) < 0)
		goto out;
	snprintf(csv, sizeof(csv), "%s/results.csv", out);
	if (sweep_write_csv(csv, g.axis, g.n_axes, results, err) < 0) {
		code = 1;
		goto out;
	}
	printf("merged %d of %d cells from %d director%s into %s", have, g.n_cells, n_dirs,
	       n_dirs == 1 ? "y" : "ies", csv);
	if (have < g.n_cells)
		printf(" (%d not run by any shard yet)", g.n_cells - have);
	printf("\n");
	code = 0;
out:
	if (code)
		fprintf(stderr, "stalelab sweep: %s\n", err);
	free(done);
	free(any);
	json_decref(results);
	json_decref(spec);
	sweep_grid_free(&g);
	return code;
}

int
cmd_sweep(int argc, char **argv)
{
	static const struct option opts[] = {
		{"out", required_argument, NULL, 'o'},
		{"jobs", required_argument, NULL, 'j'},
		{"shard", required_argument, NULL, 'S'},
		{"force", no_argument, NULL, 'F'},
		{"list", no_argument, NULL, 'L'},
		{"summary", required_argument, NULL, 's'},
		{"baseline", required_argument, NULL, 'b'},
		{"metric", required_argument, NULL, 'm'},
		{"merge", no_argument, NULL, 'M'},
		{"plot", no_argument, NULL, 'P'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *out = NULL, *summary = NULL, *baseline = NULL, *metric = NULL, *shard_s = NULL;
	int jobs = cli_ncpu(), force = 0, list = 0, merge = 0, quiet = 0, plot = 0, opt;
	unsigned long long u;
	char err[SL_ERR_LEN];
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":o:j:qh", opts, NULL)) != -1) {
		switch (opt) {
		case 'o': out = optarg; break;
		case 'j':
			if (cli_opt_u64("jobs", optarg, 1, 256, &u, err) < 0)
				return cli_usage_error("sweep", err);
			jobs = (int)u;
			break;
		case 'S': shard_s = optarg; break;
		case 'F': force = 1; break;
		case 'L': list = 1; break;
		case 's': summary = optarg; break;
		case 'b': baseline = optarg; break;
		case 'm': metric = optarg; break;
		case 'M': merge = 1; break;
		case 'P': plot = 1; break;
		case 'q': quiet = 1; break;
		case 'h': printf(usage, cli_ncpu()); return 0;
		default: return cli_bad_option("sweep", opt, argv, opts);
		}
	}
	int npos = argc - optind;
	char **pos = argv + optind;
	if ((baseline || metric) && !summary)
		return fprintf(stderr, "stalelab sweep: --baseline and --metric go with --summary DIR\n"), 2;
	if (summary) {
		if (npos || merge || list || out)
			return fprintf(stderr, "stalelab sweep: --summary DIR takes no other argument\n"), 2;
		return mode_summary(summary, baseline, metric);
	}
	if (merge) {
		if (!npos || !out)
			return fprintf(stderr, "stalelab sweep: --merge DIR... --out DIR: the shards' "
					       "directories, and where they go\n"), 2;
		return mode_merge(pos, npos, out);
	}
	if (npos != 1)
		return fprintf(stderr, "stalelab sweep: %s\nTry 'stalelab sweep --help'.\n",
			       npos ? "one sweep file at a time" : "which sweep file? (stalelab sweep FILE --out DIR)"), 2;
	if (list)
		return mode_list(pos[0]);
	if (!out)
		return fprintf(stderr, "stalelab sweep: --out DIR: where results.csv and cells/ go\n"), 2;
	int shard = 0, n_shards = 1;
	if (shard_s) {
		if (parse_shard(shard_s, &shard, &n_shards) < 0)
			return fprintf(stderr, "stalelab sweep: --shard: expected I/N with 0 <= I < N, "
					       "got \"%s\"\n", shard_s), 2;
	} else if (shard_from_env(&shard, &n_shards, err) < 0) {
		return fprintf(stderr, "stalelab sweep: %s\n", err), 2;
	}
	int code = sweep_run(pos[0], out, jobs, shard, n_shards, force, quiet);
	if (code == 0 && plot && sweep_plot(out, NULL, err) < 0) {
		fprintf(stderr, "stalelab sweep: --plot: %s\n", err);
		code = 1;
	}
	return code;
}
