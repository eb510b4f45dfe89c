/* control_runs.c - the daemon's runs and checkpoints: start, stop and
 * recover a run; the files a request names, confined to --checkpoint-dir;
 * POST /api/v1/run, /api/v1/run/recover and /api/v1/checkpoint. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api.h"
#include "ckpt.h"
#include "config_json.h"
#include "control_impl.h"
#include "jsonout.h"
#include "model.h"

/* ---- files a request names ---------------------------------------------------
 *
 * Whatever reaches the daemon (a checkpoint to write, one to resume, a
 * schedule's checkpoints) names a file inside the checkpoint directory: a
 * relative path without '..' components, and no symbolic link on the way
 * that leads out of the directory. Only the operator's own flags
 * (--resume, --checkpoint-on-exit) name any file. */

static const char *
ckpt_dir(const ctl *c)
{
	return c->ckpt_dir ? c->ckpt_dir : ".";
}

/* name as a path inside the checkpoint directory, into out: by its
 * letters only (field names the request's field in err) */
static int
ckpt_name(const ctl *c, const char *field, const char *name, char *out,
	  size_t cap, char *err)
{
	if (!*name)
		return sl_fail(err, SL_EINVAL, "%s: expected a file name", field);
	if (name[0] == '/')
		return sl_fail(err, SL_EINVAL, "%s: \"%.60s\" is an absolute path: name a file "
			       "inside the checkpoint directory (--checkpoint-dir)", field, name);
	for (const char *p = name; *p; p += strcspn(p, "/"), p += *p == '/') {
		if (p[0] == '.' && p[1] == '.' && (!p[2] || p[2] == '/'))
			return sl_fail(err, SL_EINVAL, "%s: \"%.60s\": '..' components are "
				       "not allowed", field, name);
	}
	if ((size_t)snprintf(out, cap, "%s/%s", ckpt_dir(c), name) >= cap)
		return sl_fail(err, SL_EINVAL, "%s: too long", field);
	return 0;
}

/* the file at path (or, when it does not exist yet, its directory) is
 * inside the checkpoint directory once symbolic links are followed */
static int
ckpt_inside(const ctl *c, const char *field, const char *path, char *err)
{
	char root[PATH_MAX], real[PATH_MAX], parent[PATH_MAX];
	struct stat st;
	if (!realpath(ckpt_dir(c), root))
		return sl_fail(err, SL_EIO, "%s: the checkpoint directory %.60s: %s", field,
			       ckpt_dir(c), strerror(errno));
	if (!realpath(path, real)) {
		if (errno != ENOENT || lstat(path, &st) == 0) /* a link to nowhere too */
			return sl_fail(err, SL_EINVAL, "%s: %.80s: %s", field, path,
				       errno == ENOENT ? "a symbolic link to nowhere" : strerror(errno));
		snprintf(parent, sizeof(parent), "%s", path);
		*strrchr(parent, '/') = 0; /* ckpt_name made path "dir/name" */
		if (!realpath(parent, real))
			return sl_fail(err, SL_EIO, "%s: %.80s: %s", field, parent, strerror(errno));
	}
	size_t n = strlen(root);
	if (strcmp(root, "/") && (strncmp(real, root, n) || (real[n] && real[n] != '/')))
		return sl_fail(err, SL_EINVAL, "%s: %.80s leads outside the checkpoint "
			       "directory (a symbolic link to %.60s)", field, path, real);
	return 0;
}

/* both: where a file a request names is, or an error naming field */
static int
ckpt_path(const ctl *c, const char *field, const char *name, char *out,
	  size_t cap, char *err)
{
	int rc = ckpt_name(c, field, name, out, cap, err);
	return rc < 0 ? rc : ckpt_inside(c, field, out, err);
}

/* the same for a file to write: nothing there, or a checkpoint */
int
ctl_ckpt_target(const ctl *c, const char *field, const char *name, char *out,
		size_t cap, char *err)
{
	int rc = ckpt_path(c, field, name, out, cap, err);
	return rc < 0 ? rc : ckpt_replaceable(out, field, err);
}

static void
on_checkpoint(void *ud, const run_cmd *cmd, const uint8_t *buf, size_t len)
{
	ctl *c = ud;
	char err[SL_ERR_LEN] = "out of memory", path[4096];
	if (ctl_ckpt_target(c, "checkpoint", cmd->path, path, sizeof(path), err) == 0 && buf &&
	    ckpt_write_buf(path, buf, len, err) == 0) {
		json_t *ev = json_pack("{s:s,s:s,s:I,s:i}", "event", "checkpoint", "path",
				       path, "bytes", (json_int_t)len, "run", c->run_id);
		ctl_record(c, "checkpoint", ev);
		json_decref(ev);
	} else {
		fprintf(stderr, "stalelab serve: checkpoint %s failed: %s\n", cmd->path, err);
	}
}

/* ---- runs -------------------------------------------------------------- */

void
ctl_init(ctl *c)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->log_mu, NULL);
	pthread_mutex_init(&c->wait_mu, NULL);
	pthread_cond_init(&c->wait_cv, NULL);
	pthread_mutex_init(&c->changes_mu, NULL);
	c->changes = json_array();
	events_init(&c->ev);
	c->started = sl_now();
}

static void *
run_thread(void *p)
{
	run_exec(p);
	return NULL;
}

/* a copy of the current run's changes */
json_t *
ctl_changes_json(ctl *c)
{
	pthread_mutex_lock(&c->changes_mu);
	json_t *a = json_deep_copy(c->changes);
	pthread_mutex_unlock(&c->changes_mu);
	return a ? a : json_array();
}

/* the current run's summary with its changes, and its evaluation series
 * when series is set (c->mu held) */
json_t *
ctl_run_summary(ctl *c, int series)
{
	run_snapshot *snap = run_snapshot_get(c->r);
	json_t *o = json_object();
	json_object_set_new(o, "run", json_integer(c->run_id));
	json_object_set_new(o, "state", json_string(run_state_name(snap->state)));
	json_object_set_new(o, "version", json_integer((json_int_t)snap->v));
	json_object_set_new(o, "epoch", jsonout_real(snap->epoch));
	json_object_set_new(o, "test_acc", jsonout_real(snap->test_acc));
	json_object_set_new(o, "best_acc", jsonout_real(snap->best_acc));
	json_object_set_new(o, "staleness_mean", jsonout_real(stale_mean(&snap->stale)));
	json_object_set_new(o, "config", config_to_json(&snap->cfg));
	run_snapshot_put(snap);
	json_object_set_new(o, "changes", ctl_changes_json(c));
	if (series) {
		int cap = 1 << 16;
		run_eval *ev = malloc(sizeof(run_eval) * (size_t)cap);
		int n = ev ? run_series(c->r, 0, ev, cap) : 0;
		json_t *arr = json_array();
		for (int i = 0; i < n; i++)
			json_array_append_new(arr, api_eval_json(&ev[i]));
		free(ev);
		json_object_set_new(o, "series", arr);
	}
	return o;
}

/* stop and reap the current run, keeping its summary (c->mu held) */
static void
stop_current(ctl *c)
{
	if (!c->r)
		return;
	run_stop(c->r);
	if (c->th_live)
		pthread_join(c->th, NULL);
	c->th_live = 0;
	if (!c->past)
		c->past = json_array();
	json_array_append_new(c->past, ctl_run_summary(c, 1));
	if (json_array_size(c->past) > PAST_MAX)
		json_array_remove(c->past, 0);
	run_free(c->r);
	c->r = NULL;
}

/* what a recover adds to a start: the diverged run's settings and how much
 * of its schedule it applied, the lr change, the "recovered" note */
typedef struct recover_args {
	const run_config *settings; /* taken in place of the checkpoint's */
	int sched_done;             /* schedule entries already applied */
	const run_cmd *change;      /* queued before the start: at its first version */
	json_t *note;               /* borrowed: the run record's "recovered" */
} recover_args;

/* Start a run (c->mu held): cfg with its schedule, or from a checkpoint;
 * rec (may be NULL) makes it a recover: rec->settings replace the
 * checkpoint's (and are the run object logged), the schedule goes on after
 * the entries the diverged run applied, rec->change applies at its first
 * version (logged), rec->note goes into the run record as "recovered". */
static int
start_locked(ctl *c, const run_config *cfg, const run_sched *sched, int n_sched,
	     const uint8_t *ckpt, size_t ckpt_len, const recover_args *rec, char *err)
{
	int rc;
	/* a schedule's checkpoints go into the checkpoint directory (checked
	 * again, links included, when each is written) */
	for (int i = 0; i < n_sched; i++) {
		char field[64], path[4096];
		snprintf(field, sizeof(field), "schedule[%d].set.checkpoint", i);
		if ((sched[i].cmd.fields & CMD_CHECKPOINT) &&
		    (rc = ckpt_name(c, field, sched[i].cmd.path, path, sizeof(path), err)) < 0)
			return rc;
	}
	dataset_pair *dp = c->data;
	int ctx = model_spec_context(cfg->model);
	int new_data = !dp || strcmp(c->data_spec, cfg->dataset) ||
		       c->data_seed != cfg->seed || c->data_ctx != ctx;
	if (new_data) {
		dp = malloc(sizeof(*dp));
		if (!dp)
			return sl_fail(err, SL_ENOMEM, "out of memory");
		if ((rc = model_data_load(cfg->model, cfg->dataset, cfg->seed, dp, err)) < 0) {
			free(dp);
			return rc;
		}
		if (dp->note[0])
			fprintf(stderr, "stalelab serve: %s\n", dp->note);
	}
	run_callbacks cb = {.eval = ctl_on_eval, .change = ctl_on_change,
			    .checkpoint = on_checkpoint, .diverged = ctl_on_diverged,
			    .remote = ctl_on_remote, .split = ctl_on_split, .ud = c};
	run *r = NULL;
	rc = run_open(cfg, dp, sched, n_sched, &cb, ckpt, ckpt_len, &r, err);
	if (rc == 0 && rec &&
	    ((rc = run_adopt_settings(r, rec->settings, rec->sched_done, err)) < 0 ||
	     (rc = run_command(r, rec->change, err)) < 0)) {
		run_free(r);
		r = NULL;
	}
	if (rec)
		cfg = rec->settings; /* what the run starts with */
	if (rc < 0) {
		if (new_data) {
			ds_pair_free(dp);
			free(dp);
		}
		return rc;
	}
	stop_current(c); /* the old run no longer reads its data */
	if (new_data) {
		if (c->data) {
			ds_pair_free(c->data);
			free(c->data);
		}
		c->data = dp;
		snprintf(c->data_spec, sizeof(c->data_spec), "%s", cfg->dataset);
		c->data_seed = cfg->seed;
		c->data_ctx = ctx;
	}
	/* a divergence pauses the run: it resumes from the last good
	 * checkpoint, kept at each finite evaluation */
	run_keep_good(r, 1);
	c->r = r;
	c->run_id++;
	pthread_mutex_lock(&c->changes_mu); /* before its thread applies any */
	json_decref(c->changes);
	c->changes = json_array();
	c->changes_dropped = 0;
	pthread_mutex_unlock(&c->changes_mu);
	c->runs_started++;
	run_snapshot *s0 = run_snapshot_get(r);
	json_t *first = runlog_run_object(cfg, s0->device);
	json_object_set_new(first, "run", json_integer(c->run_id));
	if (ckpt) { /* where it resumes: the checkpoint's t and v */
		json_object_set_new(first, "resumed", json_true());
		json_object_set_new(first, "t", jsonout_real(s0->t));
		json_object_set_new(first, "v", json_integer((json_int_t)s0->v));
	}
	run_snapshot_put(s0);
	if (rec)
		json_object_set_new(first, "recovered", json_incref(rec->note));
	ctl_record(c, "run", first);
	json_decref(first);
	if (pthread_create(&c->th, NULL, run_thread, c->r)) {
		run_free(c->r);
		c->r = NULL;
		return sl_fail(err, SL_ENOMEM, "cannot start the run thread");
	}
	c->th_live = 1;
	if (ckpt) {
		run_snapshot *snap = run_snapshot_get(c->r);
		ctl_say(c, "run %d resumed from a checkpoint at v %llu, epoch %.2f: rule %s, %d workers, %s",
		        c->run_id, (unsigned long long)snap->v, snap->epoch, cfg->rule,
		        cfg->workers, cfg->model);
		run_snapshot_put(snap);
	} else {
		ctl_say(c, "run %d started: rule %s, %d workers, %s on %s, %s clock", c->run_id,
		        cfg->rule, cfg->workers, cfg->model, cfg->dataset, cfg->clock);
	}
	/* why auto passed a device over: once for the daemon's life */
	run_snapshot *sn = run_snapshot_get(c->r);
	if (sn->device_note[0] && !c->said_device_note) {
		ctl_say(c, "%s", sn->device_note);
		c->said_device_note = 1;
	}
	run_snapshot_put(sn);
	return 0;
}

int
ctl_start(ctl *c, const run_config *cfg, const run_sched *sched, int n_sched,
	  const uint8_t *ckpt, size_t ckpt_len, char *err)
{
	pthread_mutex_lock(&c->mu);
	int rc = start_locked(c, cfg, sched, n_sched, ckpt, ckpt_len, NULL, err);
	pthread_mutex_unlock(&c->mu);
	return rc;
}

int
ctl_checkpoint(ctl *c, const char *path, size_t *bytes, uint64_t *v, char *err)
{
	pthread_mutex_lock(&c->mu);
	int rc = c->r ? ckpt_write(c->r, path, bytes, v, err)
		      : sl_fail(err, SL_ESTATE, "no run is active");
	pthread_mutex_unlock(&c->mu);
	return rc;
}

void
ctl_free(ctl *c)
{
	events_close(&c->ev);
	if (c->demo_live)
		pthread_join(c->demo_th, NULL);
	demo_free(&c->demo);
	pthread_mutex_lock(&c->mu);
	stop_current(c);
	pthread_mutex_unlock(&c->mu);
	if (c->data) {
		ds_pair_free(c->data);
		free(c->data);
	}
	json_decref(c->past);
	json_decref(c->changes);
	pthread_mutex_destroy(&c->changes_mu);
	events_free(&c->ev);
	pthread_mutex_destroy(&c->mu);
	pthread_mutex_destroy(&c->log_mu);
	pthread_mutex_destroy(&c->wait_mu);
	pthread_cond_destroy(&c->wait_cv);
}

void
ctl_summary(ctl *c, FILE *f)
{
	pthread_mutex_lock(&c->mu);
	fprintf(f, "stalelab serve: up %.1f s, %d run%s started\n", sl_now() - c->started,
		c->runs_started, c->runs_started == 1 ? "" : "s");
	if (c->r) {
		run_snapshot *s = run_snapshot_get(c->r);
		fprintf(f, "stalelab serve: run %d %s at v %llu, epoch %.2f, %llu samples: "
			"test_acc %.4f (best %.4f), staleness mean %.2f p99 %.0f, %s %d workers\n",
			c->run_id, run_state_name(s->state), (unsigned long long)s->v, s->epoch,
			(unsigned long long)s->samples, s->test_acc, s->best_acc,
			stale_mean(&s->stale), stale_quantile(&s->stale, 0.99), s->cfg.rule,
			s->cfg.workers);
		run_snapshot_put(s);
	}
	pthread_mutex_unlock(&c->mu);
}

/* ---- POST run, recover, checkpoint ---------------------------------------- */

/* a body that may hold `key` and nothing else: its value (NULL when it is
 * absent), or NULL and a 400 in o */
static json_t *
body_only(json_t *body, const char *key, ctl_reply *o)
{
	json_t *v = json_object_get(body, key);
	if (json_object_size(body) > (v ? 1u : 0u)) {
		char msg[64];
		snprintf(msg, sizeof(msg), "body: only \"%s\" may be set here", key);
		reply_error(o, 400, "bad_field", msg);
		return NULL;
	}
	return v;
}

void
ctl_post_run(ctl *c, const ctl_args *a, ctl_reply *o)
{
	json_t *body = a->body;
	char err[SL_ERR_LEN];
	run_config cfg;
	run_sched *sched = NULL;
	int n_sched = 0, rc;
	uint8_t *ckpt = NULL;
	size_t ckpt_len = 0;
	const char *resume;
	char path[CTL_PATH_MAX];
	if (ctl_run_body(body, &cfg, &sched, &n_sched, &resume, err) < 0 ||
	    (resume && (ckpt_path(c, "resume", resume, path, sizeof(path), err) < 0 ||
			ckpt_read(path, &ckpt, &ckpt_len, &cfg, err) < 0))) {
		reply_error(o, 400, "bad_field", err);
		return;
	}
	pthread_mutex_lock(&c->mu);
	rc = start_locked(c, &cfg, sched, n_sched, ckpt, ckpt_len, NULL, err);
	free(sched);
	free(ckpt);
	if (rc < 0) {
		pthread_mutex_unlock(&c->mu);
		reply_error(o, rc == -SL_ENOMEM ? 500 : 400,
			    rc == -SL_ENOMEM ? "internal" : "bad_field", err);
		return;
	}
	run_snapshot *snap = run_snapshot_get(c->r);
	reply_json(o, 201, ctl_status_json(c, snap));
	run_snapshot_put(snap);
	snprintf(o->location, sizeof(o->location), "/api/v1/runs/%d", c->run_id);
	pthread_mutex_unlock(&c->mu);
}

/* POST /api/v1/run/recover {"lr": x}: a diverged run goes on from its
 * last good checkpoint (or, with none, from the start) as a new run, with
 * lr (default: half the current) as a change logged at its first version */
void
ctl_post_recover(ctl *c, const ctl_args *a, ctl_reply *o)
{
	json_t *body = a->body;
	char err[SL_ERR_LEN];
	json_t *lr = body_only(body, "lr", o);
	if (o->status)
		return;
	run_snapshot *snap = ctl_lock_run(c, o);
	if (!snap)
		return;
	run_config cur = snap->cfg;
	run_state st = snap->state;
	uint64_t div_v = snap->div.v;
	run_snapshot_put(snap);
	run_cmd cmd;
	json_t *set = json_object();
	json_object_set_new(set, "lr", lr ? json_incref(lr) : json_real(cur.lr / 2));
	if (st != RUN_DIVERGED) {
		snprintf(err, sizeof(err), "the run has not diverged (it is %s): nothing to recover",
			 run_state_name(st));
		reply_error(o, 409, "not_diverged", err);
	} else if (cmd_from_json(set, -1, &cur, "", &cmd, err) < 0) {
		reply_error(o, 400, "bad_field", err);
	}
	json_decref(set);
	if (o->status) {
		pthread_mutex_unlock(&c->mu);
		return;
	}
	snprintf(cmd.origin, sizeof(cmd.origin), "recover");
	uint8_t *buf = NULL;
	size_t len = 0;
	uint64_t gv = 0;
	run_config cfg = cur;
	/* the recovered run goes on with what the diverged run had reached:
	 * its settings (every change, the schedule's and live ones, applied)
	 * and its place in the schedule (an entry it applied is never applied
	 * again; those still ahead come as they would have) */
	run_sched *sched = NULL;
	int n_sched = 0, sched_done = 0;
	int rc = run_schedule_copy(c->r, &sched, &n_sched, &sched_done, err);
	int from_ckpt = 0;
	if (rc == 0) {
		rc = run_good_checkpoint(c->r, &buf, &len, &gv, err);
		from_ckpt = rc == 0;
		if (rc == -SL_ESTATE)
			rc = 0; /* diverged before a finite evaluation: from the start */
		else if (rc == 0) /* the checkpoint's own run, then cur's settings */
			rc = run_checkpoint_config(buf, len, &cfg, err);
	}
	json_t *note = json_pack("{s:i,s:I,s:I,s:s}", "run", c->run_id, "diverged_v",
				 (json_int_t)div_v, "from_v", (json_int_t)gv, "from",
				 from_ckpt ? "checkpoint" : "start");
	/* answer once the new lr is in (its change record), as PATCH does */
	ctl_waiter w;
	ctl_waiter_add(c, &w, &cmd, 0);
	recover_args rec = {.settings = &cur, .sched_done = sched_done, .change = &cmd,
			    .note = note};
	if (rc == 0) /* from the start: the schedule is given again (a
		      * checkpoint holds its own) */
		rc = start_locked(c, &cfg, from_ckpt ? NULL : sched, from_ckpt ? 0 : n_sched,
				  buf, len, &rec, err);
	free(buf);
	free(sched);
	int run_id = c->run_id;
	pthread_mutex_unlock(&c->mu);
	ctl_waiter_wait(c, &w, rc == 0);
	if (rc < 0) {
		json_decref(note);
		reply_error(o, rc == -SL_ENOMEM ? 500 : 400,
			    rc == -SL_ENOMEM ? "internal" : "bad_field", err);
		return;
	}
	ctl_say(c, "run %d recovers run %lld from v %llu (%s) with lr %g", run_id,
	        (long long)json_integer_value(json_object_get(note, "run")),
	        (unsigned long long)gv, from_ckpt ? "its last good checkpoint" : "the start", cmd.lr);
	json_object_set_new(note, "lr", jsonout_real(cmd.lr));
	json_object_set_new(note, "applied", json_boolean(w.done));
	pthread_mutex_lock(&c->mu);
	json_t *st_json = NULL;
	if (c->r && c->run_id == run_id) {
		snap = run_snapshot_get(c->r);
		st_json = ctl_status_json(c, snap);
		run_snapshot_put(snap);
	} else { /* another run started meanwhile */
		st_json = json_pack("{s:i}", "run", run_id);
	}
	json_object_set_new(st_json, "recovered", note);
	reply_json(o, 201, st_json);
	snprintf(o->location, sizeof(o->location), "/api/v1/runs/%d", run_id);
	pthread_mutex_unlock(&c->mu);
}

void
ctl_post_checkpoint(ctl *c, const ctl_args *a, ctl_reply *o)
{
	json_t *body = a->body;
	char err[SL_ERR_LEN], path[CTL_PATH_MAX];
	const char *p;
	if (ctl_checkpoint_body(body, &p, err) < 0) {
		reply_error(o, 400, "bad_field", err);
		return;
	}
	run_snapshot *snap = ctl_lock_run(c, o);
	if (!snap)
		return;
	run_snapshot_put(snap);
	int rc = p ? ctl_ckpt_target(c, "path", p, path, sizeof(path), err) : 0;
	/* the version named (reply, default file name) is the one saved */
	uint8_t *buf = NULL;
	size_t bytes = 0;
	uint64_t v = 0;
	if (rc == 0)
		rc = ckpt_take(c->r, &buf, &bytes, &v, err);
	if (rc == 0) {
		if (!p) {
			snprintf(path, sizeof(path), "%s/stalelab-run%d-v%llu.ckpt",
				 ckpt_dir(c), c->run_id,
				 (unsigned long long)v);
			rc = ckpt_replaceable(path, "path", err);
		}
		if (rc == 0)
			rc = ckpt_write_buf(path, buf, bytes, err);
	}
	free(buf);
	pthread_mutex_unlock(&c->mu);
	if (rc == -SL_EINVAL || rc == -SL_EIO)
		reply_error(o, 400, "bad_field", err);
	else if (rc < 0)
		reply_error(o, 500, "internal", err);
	else
		reply_json(o, 201, json_pack("{s:s,s:I,s:I}", "path", path, "version",
					     (json_int_t)v, "bytes", (json_int_t)bytes));
}
