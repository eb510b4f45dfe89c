/* sweep_cell.c - one cell of a sweep, run in a process of its own (sweep.c
 * forks it): its run object trained on the virtual clock, its log and then
 * its result written to temporary files and renamed into place, so a cell
 * killed mid-way leaves nothing that counts and runs again. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "progress.h"
#include "config_json.h"
#include "dataset.h"
#include "jsonout.h"
#include "sl.h"
#include "sweep.h"
#include "sweep_impl.h"

/* the callbacks' context: daemon/progress/'s (first: its callbacks take it),
 * and what the result needs */
typedef struct cell_ctx {
	run_ctx rc;
	double target;
	int hit;
	uint64_t v_target;
	double t_target, ep_target;
	run_eval last;
	int have_last;
} cell_ctx;

static void
cell_on_eval(void *ud, const run_eval *e)
{
	cell_ctx *c = ud;
	if (c->target > 0 && !c->hit && e->test_acc >= c->target) {
		c->hit = 1;
		c->v_target = e->v;
		c->t_target = e->t;
		c->ep_target = e->epoch;
	}
	if (e->final) {
		c->last = *e;
		c->have_last = 1;
	}
	progress_on_eval(&c->rc, e);
}

static json_t *
num_or_null(int have, double x)
{
	return have && isfinite(x) ? jsonout_real(x) : json_null();
}

/* the result's metrics (the columns of results.csv) */
static json_t *
cell_metrics(const cell_ctx *c, const run_snapshot *s)
{
	const run_eval *e = &c->last;
	double bytes = 0, recv = 0, comm = 0, flops = 0, bwd = 0, saved = 0;
	for (int i = 0; i < s->n_workers; i++) {
		bytes += s->workers[i].bytes_sent;
		recv += s->workers[i].bytes_recv;
		comm += s->workers[i].comm_s;
		flops += s->workers[i].flops;
		bwd += s->workers[i].flops_bwd;
		saved += s->workers[i].flops_saved;
	}
	json_t *m = json_object();
	json_object_set_new(m, "final_acc", num_or_null(1, e->test_acc));
	json_object_set_new(m, "best_acc", num_or_null(1, e->best_acc));
	json_object_set_new(m, "test_loss", num_or_null(1, e->test_loss));
	json_object_set_new(m, "updates", json_integer((json_int_t)e->v));
	json_object_set_new(m, "samples", json_integer((json_int_t)e->samples));
	json_object_set_new(m, "epochs", jsonout_real(e->epoch));
	json_object_set_new(m, "virtual_s", jsonout_real(e->t));
	json_object_set_new(m, "updates_to_target",
			    c->hit ? json_integer((json_int_t)c->v_target) : json_null());
	json_object_set_new(m, "virtual_s_to_target", num_or_null(c->hit, c->t_target));
	json_object_set_new(m, "epochs_to_target", num_or_null(c->hit, c->ep_target));
	json_object_set_new(m, "stale_mean", jsonout_real(stale_mean(&e->stale)));
	json_object_set_new(m, "stale_p50", jsonout_real(stale_quantile(&e->stale, 0.5)));
	json_object_set_new(m, "stale_p99", jsonout_real(stale_quantile(&e->stale, 0.99)));
	json_object_set_new(m, "stale_max", json_integer((json_int_t)e->stale.max));
	json_object_set_new(m, "bytes_sent", jsonout_real(bytes));
	json_object_set_new(m, "bytes_recv", jsonout_real(recv));
	json_object_set_new(m, "comm_s", jsonout_real(comm));
	json_object_set_new(m, "coherence", num_or_null(e->coherence_all_n > 0, e->coherence_all));
	json_object_set_new(m, "step_flops", jsonout_real(flops));
	json_object_set_new(m, "bwd_flops", jsonout_real(bwd));
	json_object_set_new(m, "bwd_flops_saved", jsonout_real(saved));
	json_object_set_new(m, "stop", json_string(e->stop_reason ? e->stop_reason : "stopped"));
	json_object_set_new(m, "diverged", json_integer(s->state == RUN_DIVERGED));
	/* this machine's, not the cell's: they differ from run to run */
	json_object_set_new(m, "train_s", jsonout_real(e->train_s));
	json_object_set_new(m, "samples_per_s", jsonout_real(e->samples_per_s));
	/* a language model's test_loss is per token: as perplexity and bits per byte */
	json_object_set_new(m, "test_ppl", num_or_null(e->lm, exp(e->test_loss)));
	json_object_set_new(m, "test_bpb", num_or_null(e->lm, e->test_loss / M_LN2));
	return m;
}

/* write text to path through path.tmp and a rename */
int
sweep_write_file(const char *path, const char *text, size_t len, char *err)
{
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f)
		return sl_fail(err, SL_EIO, "%s: %s", tmp, strerror(errno));
	int ok = fwrite(text, 1, len, f) == len;
	ok = fflush(f) == 0 && ok;
	ok = fsync(fileno(f)) == 0 && ok;
	ok = fclose(f) == 0 && ok;
	if (!ok || rename(tmp, path) < 0) {
		unlink(tmp);
		return sl_fail(err, SL_EIO, "%s: cannot write: %s", path, strerror(errno));
	}
	return 0;
}

int
sweep_cell_config(const json_t *obj, run_config *cfg, run_sched **sched, int *n_sched, char *err)
{
	*sched = NULL;
	*n_sched = 0;
	char *text = json_dumps(obj, JSON_COMPACT);
	if (!text)
		return sl_fail(err, SL_ENOMEM, "out of memory");
	config_defaults(cfg);
	int rc = config_parse(text, strlen(text), cfg, err);
	free(text);
	if (rc == 0)
		rc = sched_from_json(json_object_get(obj, "schedule"), cfg, sched, n_sched, err);
	return rc;
}

int
sweep_run_cell(const sweep_cell *cell, const dataset_pair *data, const char *cells_dir,
	       double target, char *err)
{
	run_config cfg;
	run_sched *sched;
	int n_sched;
	int rc = sweep_cell_config(cell->run, &cfg, &sched, &n_sched, err);
	if (rc < 0)
		return rc;
	char log_path[4200], res_path[4200], log_tmp[4300];
	snprintf(log_path, sizeof(log_path), "%s/%s.jsonl", cells_dir, cell->name);
	snprintf(res_path, sizeof(res_path), "%s/%s.json", cells_dir, cell->name);
	snprintf(log_tmp, sizeof(log_tmp), "%s.tmp", log_path);
	cell_ctx c;
	memset(&c, 0, sizeof(c));
	c.rc.quiet = 1;
	c.rc.virt = 1;
	c.rc.frac0 = -1;
	c.target = target;
	if ((rc = runlog_open(&c.rc.log, log_tmp, "jsonl", 0, err)) < 0) {
		free(sched);
		return rc;
	}
	run_callbacks cb = {.eval = cell_on_eval, .change = progress_on_change,
			    .diverged = progress_on_diverged, .ud = &c};
	run *r = NULL;
	rc = run_open(&cfg, data, sched, n_sched, &cb, NULL, 0, &r, err);
	free(sched);
	if (rc < 0) {
		runlog_close(&c.rc.log);
		unlink(log_tmp);
		return rc;
	}
	run_snapshot *s0 = run_snapshot_get(r);
	json_t *first = runlog_run_object(&s0->cfg, s0->device);
	json_object_set_new(first, "cell", json_string(cell->label));
	run_snapshot_put(s0);
	if (runlog_write(&c.rc.log, first) < 0)
		c.rc.log_failed = 1;
	json_decref(first);
	int exec_rc = run_exec(r);
	if (c.rc.end) {
		char h[24];
		if (progress_weights_hash(r, h, sizeof(h)) == 0)
			json_object_set_new(c.rc.end, "weights", json_string(h));
		if (runlog_write(&c.rc.log, c.rc.end) < 0)
			c.rc.log_failed = 1;
	}
	json_decref(c.rc.end);
	c.rc.end = NULL;
	int failed = c.rc.log_failed || fflush(c.rc.log.f) != 0 || fsync(fileno(c.rc.log.f)) != 0;
	runlog_close(&c.rc.log);
	run_snapshot *s = run_snapshot_get(r);
	if (exec_rc < 0) {
		rc = sl_fail(err, SL_EIO, "the run failed at version %llu: %s",
			     (unsigned long long)s->v, s->error[0] ? s->error : "unknown error");
	} else if (failed || !c.have_last) {
		rc = sl_fail(err, SL_EIO, "%s: writing the log failed", log_tmp);
	} else if (rename(log_tmp, log_path) < 0) {
		rc = sl_fail(err, SL_EIO, "%s: %s", log_path, strerror(errno));
	} else {
		json_t *res = json_pack("{s:s,s:i,s:s,s:O,s:O,s:o}", "cell", cell->name,
					"index", cell->index, "label", cell->label, "axes",
					cell->axes, "run", cell->run, "metrics", cell_metrics(&c, s));
		char *out = jsonout_dumps(res);
		json_decref(res);
		rc = out ? sweep_write_file(res_path, out, strlen(out), err)
			 : sl_fail(err, SL_ENOMEM, "out of memory");
		free(out);
	}
	run_snapshot_put(s);
	run_free(r);
	if (rc < 0)
		unlink(log_tmp);
	return rc;
}
