/* control.c - runs and every answer of the daemon's API, with no HTTP in
 * it (see control.h). */
#include "control.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "api.h"
#include "ckpt.h"
#include "cli.h"
#include "config_json.h"
#include "jsonout.h"

#define PAST_MAX 32      /* earlier runs kept (oldest dropped first) */
#define APPLY_WAIT_S 3.0 /* how long a PATCH waits to answer with t and v */

struct ctl_waiter {
	char *key;      /* the change record (without t, v) as text */
	int done;
	double t;
	uint64_t v;
	ctl_waiter *next;
};

const char ctl_index_text[] =
	"stalelab " SL_VERSION " - asynchronous data-parallel training test-bed\n"
	"\n"
	"GET   /api/v1/status            run config, state, version, workers, demo scene\n"
	"GET   /api/v1/metrics?since=V   evaluation series\n"
	"GET   /api/v1/staleness         histograms overall, sliding, per worker\n"
	"GET   /api/v1/events?hz=4       Server-Sent Events\n"
	"GET   /api/v1/runs              this and earlier runs (?series=1: with series)\n"
	"GET   /api/v1/runs/{id}         one run with its series\n"
	"GET   /api/v1/schema            every config field and rule parameter\n"
	"GET   /api/v1/run               the current run object\n"
	"POST  /api/v1/run               start a new run from a run object, or\n"
	"                                {\"resume\": path} from a checkpoint\n"
	"PATCH /api/v1/run               change rule, rule_params, lr, batch, paused, stop\n"
	"GET   /api/v1/workers           the worker count and table\n"
	"PUT   /api/v1/workers           {\"count\": N}\n"
	"GET   /api/v1/workers/{id}      one worker\n"
	"PATCH /api/v1/workers/{id}      {\"delay\": {...}, \"spb_depth\": k, \"paused\": b}\n"
	"POST  /api/v1/run/recover       {\"lr\": x} (optional): resume a diverged run\n"
	"                                from its last good checkpoint, smaller lr\n"
	"POST  /api/v1/checkpoint        {\"path\": file} (optional): write a checkpoint\n"
	"GET   /metrics                  Prometheus text format\n"
	"\n"
	"See docs/api.md.\n";

/* ---- replies ------------------------------------------------------------ */

void
ctl_reply_free(ctl_reply *r)
{
	json_decref(r->json);
	free(r->text);
	memset(r, 0, sizeof(*r));
}

static void
reply_json(ctl_reply *o, int status, json_t *j)
{
	o->status = status;
	o->json = j;
}

static void
reply_error(ctl_reply *o, int status, const char *code, const char *msg)
{
	reply_json(o, status, json_pack("{s:{s:s,s:s}}", "error", "code", code,
					"message", msg));
}

static void
reply_text(ctl_reply *o, int status, const char *type, char *text)
{
	o->status = status;
	o->type = type;
	o->text = text;
}

/* ---- terminal and log ------------------------------------------------------ */

static void
say(ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
say(ctl *c, const char *fmt, ...)
{
	if (!c->term)
		return;
	char line[1024];
	int n = snprintf(line, sizeof(line), "stalelab serve: ");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	strcat(line, "\n");
	fputs(line, c->term); /* one write: whole lines, never interleaved */
}

static void
log_record(ctl *c, json_t *rec)
{
	if (!c->have_log)
		return;
	pthread_mutex_lock(&c->log_mu);
	runlog_write(&c->log, rec);
	pthread_mutex_unlock(&c->log_mu);
}

/* log and publish a record of the current run */
static void
record(ctl *c, const char *name, json_t *rec)
{
	log_record(c, rec);
	events_publish(&c->ev, name, rec);
}

/* ---- the run's callbacks --------------------------------------------------- */

static void
on_eval(void *ud, const run_eval *e)
{
	ctl *c = ud;
	json_t *r = api_log_record(e);
	json_object_set_new(r, "run", json_integer(c->run_id));
	record(c, e->final ? "end" : "eval", r);
	json_decref(r);
	if (e->final)
		say(c, "run %d ended (%s) at v %llu, epoch %.2f: test_acc %.4f, best %.4f, staleness mean %.2f",
		    c->run_id, e->stop_reason ? e->stop_reason : "stopped",
		    (unsigned long long)e->v, e->epoch, e->test_acc, e->best_acc,
		    stale_mean(&e->stale));
	else if (c->verbose)
		say(c, "v %llu epoch %.2f test_acc %.4f staleness %.2f %.0f samples/s",
		    (unsigned long long)e->v, e->epoch, e->test_acc,
		    stale_mean(&e->stale), e->samples_per_s);
}

/* the change record without t and v, as text: what a waiting PATCH and
 * the applied change have in common */
static char *
change_key(const run_cmd *cmd)
{
	json_t *j = cmd_to_json(cmd);
	char *k = jsonout_dumps(j);
	json_decref(j);
	return k;
}

static void
on_change(void *ud, double t, uint64_t v, const run_cmd *cmd)
{
	ctl *c = ud;
	json_t *r = api_change_record(t, v, cmd);
	json_object_set_new(r, "run", json_integer(c->run_id));
	record(c, "change", r);
	if (c->term) {
		char *set = jsonout_dumps(json_object_get(r, "set"));
		json_t *w = json_object_get(r, "worker");
		char who[32] = "";
		if (w)
			snprintf(who, sizeof(who), " worker %d", (int)json_integer_value(w));
		say(c, "run %d at v %llu:%s set %s (%s)", c->run_id, (unsigned long long)v,
		    who, set ? set : "?", cmd->origin[0] ? cmd->origin : "?");
		free(set);
	}
	json_decref(r);
	pthread_mutex_lock(&c->wait_mu);
	if (c->waiters) {
		char *key = change_key(cmd);
		for (ctl_waiter *w = c->waiters; key && w; w = w->next) {
			if (!w->done && !strcmp(w->key, key)) {
				w->done = 1;
				w->t = t;
				w->v = v;
				pthread_cond_broadcast(&c->wait_cv);
				break;
			}
		}
		free(key);
	}
	pthread_mutex_unlock(&c->wait_mu);
}

static void
on_diverged(void *ud, const run_divergence *d)
{
	ctl *c = ud;
	json_t *r = api_diverged_record(d);
	json_object_set_new(r, "run", json_integer(c->run_id));
	record(c, "diverged", r);
	json_decref(r);
	say(c, "run %d diverged at v %llu: worker %d's %s is not finite (computed on v %llu); "
	    "nothing of it was applied. The run waits: POST /api/v1/run/recover resumes it "
	    "from its last good checkpoint with a smaller lr",
	    c->run_id, (unsigned long long)d->v, d->worker, d->what,
	    (unsigned long long)d->v_read);
}

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
static int
ckpt_target(const ctl *c, const char *field, const char *name, char *out,
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
	if (ckpt_target(c, "checkpoint", cmd->path, path, sizeof(path), err) == 0 && buf &&
	    ckpt_write_buf(path, buf, len, err) == 0) {
		json_t *ev = json_pack("{s:s,s:s,s:I,s:i}", "event", "checkpoint", "path",
				       path, "bytes", (json_int_t)len, "run", c->run_id);
		record(c, "checkpoint", ev);
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
	events_init(&c->ev);
	c->started = sl_now();
}

static void *
run_thread(void *p)
{
	run_exec(p);
	return NULL;
}

/* the current run's summary, with its evaluation series when series is
 * set (c->mu held) */
static json_t *
run_summary(ctl *c, int series)
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
	json_array_append_new(c->past, run_summary(c, 1));
	if (json_array_size(c->past) > PAST_MAX)
		json_array_remove(c->past, 0);
	run_free(c->r);
	c->r = NULL;
}

/* Start a run (c->mu held): cfg with its schedule, or from a checkpoint;
 * change (may be NULL) is queued before it starts, so it applies at its
 * first version (logged); note (may be NULL, borrowed) goes into the run
 * record as "recovered". */
static int
start_locked(ctl *c, const run_config *cfg, const run_sched *sched, int n_sched,
	     const uint8_t *ckpt, size_t ckpt_len, const run_cmd *change, json_t *note,
	     char *err)
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
	int new_data = !dp || strcmp(c->data_spec, cfg->dataset) ||
		       c->data_seed != cfg->seed;
	if (new_data) {
		dp = malloc(sizeof(*dp));
		if (!dp)
			return sl_fail(err, SL_ENOMEM, "out of memory");
		if ((rc = ds_load(cfg->dataset, cfg->seed, dp, err)) < 0) {
			free(dp);
			return rc;
		}
		if (dp->note[0])
			fprintf(stderr, "stalelab serve: %s\n", dp->note);
	}
	run_callbacks cb = {.eval = on_eval, .change = on_change,
			    .checkpoint = on_checkpoint, .diverged = on_diverged, .ud = c};
	run *r = NULL;
	rc = run_open(cfg, dp, sched, n_sched, &cb, ckpt, ckpt_len, &r, err);
	if (rc == 0 && change && (rc = run_command(r, change, err)) < 0) {
		run_free(r);
		r = NULL;
	}
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
	}
	/* a divergence pauses the run: it resumes from the last good
	 * checkpoint, kept at each finite evaluation */
	run_keep_good(r, 1);
	c->r = r;
	c->run_id++;
	c->runs_started++;
	run_snapshot *s0 = run_snapshot_get(r);
	json_t *first = runlog_run_object(cfg, s0->device);
	run_snapshot_put(s0);
	json_object_set_new(first, "run", json_integer(c->run_id));
	if (ckpt)
		json_object_set_new(first, "resumed", json_true());
	if (note)
		json_object_set_new(first, "recovered", json_incref(note));
	record(c, "run", first);
	json_decref(first);
	if (pthread_create(&c->th, NULL, run_thread, c->r)) {
		run_free(c->r);
		c->r = NULL;
		return sl_fail(err, SL_ENOMEM, "cannot start the run thread");
	}
	c->th_live = 1;
	if (ckpt) {
		run_snapshot *snap = run_snapshot_get(c->r);
		say(c, "run %d resumed from a checkpoint at v %llu, epoch %.2f: rule %s, %d workers, %s",
		    c->run_id, (unsigned long long)snap->v, snap->epoch, cfg->rule,
		    cfg->workers, cfg->model);
		run_snapshot_put(snap);
	} else {
		say(c, "run %d started: rule %s, %d workers, %s on %s, %s clock", c->run_id,
		    cfg->rule, cfg->workers, cfg->model, cfg->dataset, cfg->clock);
	}
	return 0;
}

int
ctl_start(ctl *c, const run_config *cfg, const run_sched *sched, int n_sched,
	  const uint8_t *ckpt, size_t ckpt_len, char *err)
{
	pthread_mutex_lock(&c->mu);
	int rc = start_locked(c, cfg, sched, n_sched, ckpt, ckpt_len, NULL, NULL, err);
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

/* ---- the demo ---------------------------------------------------------- */

/* apply one scene's changes to the current run (c->mu held) */
static void
demo_apply(ctl *c, const demo_scene *sc, char *err)
{
	run_snapshot *snap = run_snapshot_get(c->r);
	run_config cur = snap->cfg;
	run_snapshot_put(snap);
	run_cmd cmd;
	if (sc->set && cmd_from_json(sc->set, -1, &cur, "set", &cmd, err) == 0) {
		snprintf(cmd.origin, sizeof(cmd.origin), "demo");
		run_command(c->r, &cmd, err);
		if (cmd.fields & CMD_WORKERS)
			cur.workers = cmd.workers;
	}
	size_t k;
	json_t *w;
	json_array_foreach(sc->workers, k, w) {
		int id = (int)json_integer_value(json_object_get(w, "id"));
		if (cmd_from_json(json_object_get(w, "set"), id, &cur, "set", &cmd, err) == 0) {
			snprintf(cmd.origin, sizeof(cmd.origin), "demo");
			run_command(c->r, &cmd, err);
		}
	}
}

static void *
demo_main(void *p)
{
	ctl *c = p;
	char err[SL_ERR_LEN];
	for (int loop = 0;; loop++) {
		if (ctl_start(c, &c->demo.base, NULL, 0, NULL, 0, err) < 0) {
			fprintf(stderr, "stalelab serve: demo: %s\n", err);
			return NULL;
		}
		for (int i = 0; i < c->demo.n; i++) {
			const demo_scene *sc = &c->demo.scene[i];
			pthread_mutex_lock(&c->mu);
			if (!c->r) {
				pthread_mutex_unlock(&c->mu);
				return NULL;
			}
			c->demo_scene = i;
			c->demo_loop = loop;
			demo_apply(c, sc, err);
			run_snapshot *snap = run_snapshot_get(c->r);
			json_t *ev = json_pack("{s:s,s:s,s:i,s:i,s:f,s:I,s:i}", "event", "caption",
					       "caption", sc->caption, "scene", i, "loop", loop,
					       "t", snap->t, "v", (json_int_t)snap->v, "run", c->run_id);
			run_snapshot_put(snap);
			pthread_mutex_unlock(&c->mu);
			record(c, "caption", ev);
			json_decref(ev);
			say(c, "demo scene %d/%d: %s", i + 1, c->demo.n, sc->caption);
			if (events_sleep(&c->ev, sc->seconds))
				return NULL;
		}
	}
}

int
ctl_demo_start(ctl *c, char *err)
{
	c->demo_on = 1;
	if (pthread_create(&c->demo_th, NULL, demo_main, c))
		return sl_fail(err, SL_ENOMEM, "cannot start the demo");
	c->demo_live = 1;
	return 0;
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

/* ---- views -------------------------------------------------------------- */

/* the demo's current scene (c->mu held), or NULL */
static json_t *
demo_json(ctl *c)
{
	if (!c->demo_on || !c->demo.n)
		return NULL;
	const demo_scene *sc = &c->demo.scene[c->demo_scene];
	return json_pack("{s:i,s:i,s:i,s:s,s:f}", "scene", c->demo_scene, "scenes",
			 c->demo.n, "loop", c->demo_loop, "caption", sc->caption,
			 "seconds", sc->seconds);
}

/* /api/v1/status of the current run (c->mu held) */
static json_t *
status_json(ctl *c, const run_snapshot *snap)
{
	json_t *o = api_status_json(snap);
	json_object_set_new(o, "run", json_integer(c->run_id));
	if (snap->state == RUN_DIVERGED) {
		/* what POST /api/v1/run/recover would do */
		char err[SL_ERR_LEN];
		uint64_t gv = 0;
		int have = run_good_checkpoint(c->r, NULL, NULL, &gv, err) == 0;
		json_object_set_new(o, "recover",
				    json_pack("{s:I,s:o}", "from_v", (json_int_t)gv, "lr",
					      jsonout_real(snap->cfg.lr / 2)));
		if (!have)
			json_object_set_new(json_object_get(o, "recover"), "from", json_string("start"));
	}
	json_t *d = demo_json(c);
	if (d) {
		json_object_set_new(o, "demo", d);
		/* the caption alone too, as the dashboard reads it */
		json_object_set_new(o, "caption", json_incref(json_object_get(d, "caption")));
	}
	return o;
}

int
ctl_token_ok(const char *token, const char *given)
{
	if (!token)
		return 1;
	if (!given)
		return 0;
	/* the time depends on the token's length only: every byte of it is
	 * compared whatever was given (no early exit on a short, long or
	 * wrong guess) */
	size_t a = strlen(given), b = strlen(token);
	size_t diff = a ^ b;
	for (size_t i = 0; i < b; i++)
		diff |= (unsigned char)(token[i] ^ given[i < a ? i : 0]);
	return diff == 0;
}

json_t *
ctl_snapshot(ctl *c)
{
	json_t *o = NULL;
	pthread_mutex_lock(&c->mu);
	if (c->r) {
		run_snapshot *snap = run_snapshot_get(c->r);
		o = status_json(c, snap);
		json_object_set_new(o, "staleness", api_staleness_json(snap));
		run_snapshot_put(snap);
	}
	pthread_mutex_unlock(&c->mu);
	return o;
}

/* value of key in a query string "a=1&b=2" into out; 1 if present */
static int
query_get(const char *q, const char *key, char *out, size_t cap)
{
	size_t kl = strlen(key);
	while (q && *q) {
		const char *end = strchr(q, '&');
		size_t n = end ? (size_t)(end - q) : strlen(q);
		if (n >= kl && !strncmp(q, key, kl) && (n == kl || q[kl] == '=')) {
			size_t vl = n > kl ? n - kl - 1 : 0;
			if (vl >= cap)
				vl = cap - 1;
			memcpy(out, q + kl + (n > kl), vl);
			out[vl] = 0;
			return 1;
		}
		q = end ? end + 1 : NULL;
	}
	return 0;
}

/* ---- handlers ------------------------------------------------------------ */

typedef enum { R_INDEX, R_STATUS, R_METRICS, R_STALENESS, R_EVENTS, R_RUN,
	       R_WORKERS, R_WORKER, R_PROM, R_CKPT, R_RUNS, R_RUN_ONE, R_SCHEMA,
	       R_RECOVER, R_NONE } route;

static const struct {
	const char *path; /* a trailing '/' takes an id */
	route r;
	const char *allow;
} routes[] = {
	{"/", R_INDEX, "GET, HEAD"},
	{"/api/v1/status", R_STATUS, "GET, HEAD"},
	{"/api/v1/metrics", R_METRICS, "GET, HEAD"},
	{"/api/v1/staleness", R_STALENESS, "GET, HEAD"},
	{"/api/v1/events", R_EVENTS, "GET, HEAD"},
	{"/api/v1/run", R_RUN, "GET, HEAD, POST, PATCH"},
	{"/api/v1/workers", R_WORKERS, "GET, HEAD, PUT"},
	{"/api/v1/workers/", R_WORKER, "GET, HEAD, PATCH"},
	{"/metrics", R_PROM, "GET, HEAD"},
	{"/api/v1/checkpoint", R_CKPT, "POST"},
	{"/api/v1/runs", R_RUNS, "GET, HEAD"},
	{"/api/v1/runs/", R_RUN_ONE, "GET, HEAD"},
	{"/api/v1/schema", R_SCHEMA, "GET, HEAD"},
	{"/api/v1/run/recover", R_RECOVER, "POST"},
};

static int
match(const char *path, int *id, const char **allow)
{
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		const char *p = routes[i].path;
		size_t n = strlen(p);
		unsigned long long v;
		*allow = routes[i].allow;
		if (p[n - 1] != '/' || n == 1) {
			if (!strcmp(path, p))
				return routes[i].r;
		} else if (!strncmp(path, p, n) && cli_u64(path + n, &v) == 0 && v < 1000000) {
			*id = (int)v;
			return routes[i].r;
		}
	}
	*allow = "";
	return R_NONE;
}

/* is method one of the comma-separated list allow? */
static int
allowed(const char *allow, const char *method)
{
	size_t n = strlen(method);
	for (const char *p = allow; (p = strstr(p, method)); p += n)
		if ((p == allow || p[-1] == ' ') && (p[n] == ',' || !p[n]))
			return 1;
	return 0;
}

/* the current run's snapshot, or a 409 (c->mu held) */
static run_snapshot *
need_run(ctl *c, ctl_reply *o)
{
	if (c->r)
		return run_snapshot_get(c->r);
	reply_error(o, 409, "no_run", "no run is active");
	return NULL;
}

/* take c->mu and the current run's snapshot; with no run, a 409 and the
 * lock released (NULL) */
static run_snapshot *
lock_run(ctl *c, ctl_reply *o)
{
	pthread_mutex_lock(&c->mu);
	run_snapshot *snap = need_run(c, o);
	if (!snap)
		pthread_mutex_unlock(&c->mu);
	return snap;
}

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

static void
get_metrics(ctl *c, const char *query, const run_snapshot *snap, ctl_reply *o)
{
	char q[32];
	unsigned long long since = 0;
	if (query_get(query, "since", q, sizeof(q)) && cli_u64(q, &since) < 0) {
		reply_error(o, 400, "bad_field", "since: expected a version (integer >= 0)");
		return;
	}
	int cap = 4096;
	run_eval *ev = malloc(sizeof(run_eval) * (size_t)cap);
	int n = ev ? run_series(c->r, since, ev, cap) : 0;
	json_t *arr = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(arr, api_eval_json(&ev[i]));
	free(ev);
	reply_json(o, 200, json_pack("{s:I,s:I,s:o}", "version", (json_int_t)snap->v,
				     "since", (json_int_t)since, "series", arr));
}

/* GET /api/v1/runs (summaries; series=1: with series), /api/v1/runs/{id} */
static void
get_runs(ctl *c, int id, const char *query, ctl_reply *o)
{
	char q[8] = "";
	int series = id >= 0;
	if (id < 0 && query_get(query, "series", q, sizeof(q))) {
		if (strcmp(q, "0") && strcmp(q, "1")) {
			reply_error(o, 400, "bad_field", "series: expected 0 or 1");
			return;
		}
		series = q[0] == '1';
	}
	json_t *arr = json_array();
	size_t i;
	json_t *e;
	json_array_foreach(c->past, i, e) {
		if (id >= 0 && json_integer_value(json_object_get(e, "run")) != id)
			continue;
		json_t *cp = json_deep_copy(e);
		if (!series)
			json_object_del(cp, "series");
		json_array_append_new(arr, cp);
	}
	if (c->r && (id < 0 || id == c->run_id))
		json_array_append_new(arr, run_summary(c, series));
	if (id < 0) {
		reply_json(o, 200, json_pack("{s:o}", "runs", arr));
	} else if (json_array_size(arr)) {
		reply_json(o, 200, json_incref(json_array_get(arr, 0)));
		json_decref(arr);
	} else {
		char msg[96];
		snprintf(msg, sizeof(msg), "run %d: not among this daemon's last %d runs", id,
			 PAST_MAX + 1);
		json_decref(arr);
		reply_error(o, 404, "no_run", msg);
	}
}

/* GET handlers that read the current run (c->mu held) */
static void
handle_get(ctl *c, route rt, int id, const char *query, ctl_reply *o)
{
	if (rt == R_INDEX) {
		reply_text(o, 200, "text/plain; charset=utf-8", strdup(ctl_index_text));
		return;
	}
	if (rt == R_SCHEMA) {
		reply_json(o, 200, config_schema_json());
		return;
	}
	if (rt == R_RUNS || rt == R_RUN_ONE) {
		get_runs(c, rt == R_RUN_ONE ? id : -1, query, o);
		return;
	}
	run_snapshot *snap = need_run(c, o);
	if (!snap)
		return;
	switch (rt) {
	case R_STATUS:
		reply_json(o, 200, status_json(c, snap));
		break;
	case R_EVENTS: { /* over a request/reply transport: one snapshot */
		json_t *s = status_json(c, snap);
		json_object_set_new(s, "staleness", api_staleness_json(snap));
		reply_json(o, 200, s);
		break;
	}
	case R_STALENESS:
		reply_json(o, 200, api_staleness_json(snap));
		break;
	case R_PROM:
		reply_text(o, 200, "text/plain; version=0.0.4; charset=utf-8",
			   api_prometheus(snap));
		break;
	case R_METRICS:
		get_metrics(c, query, snap, o);
		break;
	case R_RUN:
		reply_json(o, 200, json_pack("{s:i,s:s,s:o}", "run", c->run_id, "state",
					     run_state_name(snap->state), "config",
					     config_to_json(&snap->cfg)));
		break;
	case R_WORKERS: {
		json_t *ws = json_array();
		for (int i = 0; i < snap->n_workers; i++)
			json_array_append_new(ws, api_worker_json(&snap->workers[i]));
		reply_json(o, 200, json_pack("{s:i,s:o}", "count", snap->cfg.workers,
					     "workers", ws));
		break;
	}
	case R_WORKER:
		if (id < snap->n_workers && id < snap->cfg.workers) {
			reply_json(o, 200, api_worker_json(&snap->workers[id]));
		} else {
			char msg[96];
			snprintf(msg, sizeof(msg), "worker %d: the run has %d workers", id,
				 snap->cfg.workers);
			reply_error(o, 404, "no_worker", msg);
		}
		break;
	default:
		reply_error(o, 500, "internal", "no handler");
		break;
	}
	run_snapshot_put(snap);
}

/* wait for a change to be applied (on_change marks it done): register
 * before it is queued, then wait (up to APPLY_WAIT_S, when it was queued)
 * and unregister */
static void
waiter_add(ctl *c, ctl_waiter *w, const run_cmd *cmd)
{
	memset(w, 0, sizeof(*w));
	w->key = change_key(cmd);
	pthread_mutex_lock(&c->wait_mu);
	w->next = c->waiters;
	c->waiters = w;
	pthread_mutex_unlock(&c->wait_mu);
}

static void
waiter_wait(ctl *c, ctl_waiter *w, int queued)
{
	pthread_mutex_lock(&c->wait_mu);
	struct timespec ts;
	sl_deadline(APPLY_WAIT_S, &ts);
	while (queued && w->key && !w->done &&
	       pthread_cond_timedwait(&c->wait_cv, &c->wait_mu, &ts) != ETIMEDOUT)
		;
	ctl_waiter **pp = &c->waiters;
	while (*pp != w)
		pp = &(*pp)->next;
	*pp = w->next;
	pthread_mutex_unlock(&c->wait_mu);
	free(w->key);
	w->key = NULL;
}

/* queue a change to the current run and answer with it as logged, once
 * applied (t and v); 409 when there is no run or it has finished */
static void
command(ctl *c, json_t *set, int worker, ctl_reply *o)
{
	char err[SL_ERR_LEN];
	run_snapshot *snap = lock_run(c, o);
	if (!snap)
		return;
	run_config cur = snap->cfg;
	int finished = snap->state == RUN_FINISHED || snap->state == RUN_FAILED;
	int diverged = snap->state == RUN_DIVERGED;
	run_snapshot_put(snap);
	int run_id = c->run_id;
	run_cmd cmd;
	if (diverged) {
		reply_error(o, 409, "diverged",
			    "the run diverged; POST /api/v1/run/recover resumes it from its last "
			    "good checkpoint with a smaller lr");
	} else if (finished) {
		reply_error(o, 409, "finished", "the run has finished; POST /api/v1/run starts a new one");
	} else if (worker >= cur.workers) {
		snprintf(err, sizeof(err), "worker %d: the run has %d workers", worker,
			 cur.workers);
		reply_error(o, 404, "no_worker", err);
	} else if (cmd_from_json(set, worker, &cur, "", &cmd, err) < 0) {
		reply_error(o, 400, "bad_field", err);
	} else if (cmd.fields & CMD_CHECKPOINT) {
		char path[4096];
		if (ckpt_target(c, "checkpoint", cmd.path, path, sizeof(path), err) < 0)
			reply_error(o, 400, "bad_field", err);
	}
	if (o->status) {
		pthread_mutex_unlock(&c->mu);
		return;
	}
	snprintf(cmd.origin, sizeof(cmd.origin), "api");
	ctl_waiter w;
	waiter_add(c, &w, &cmd);
	int rc = run_command(c->r, &cmd, err);
	pthread_mutex_unlock(&c->mu);
	waiter_wait(c, &w, rc == 0);
	if (rc < 0) {
		reply_error(o, 400, "bad_field", err);
		return;
	}
	json_t *ch = w.done ? api_change_record(w.t, w.v, &cmd) : cmd_to_json(&cmd);
	json_object_set_new(ch, "run", json_integer(run_id));
	json_t *r = json_pack("{s:b,s:b}", "accepted", 1, "applied", w.done);
	json_object_set_new(r, "change", ch);
	reply_json(o, 202, r);
}

/* ---- request bodies (pure: no run, no lock, no I/O) ------------------- */

json_t *
ctl_body_parse(const char *body, size_t len, char *err)
{
	json_error_t je;
	json_t *j = json_loadb(body ? body : "", body ? len : 0, JSON_REJECT_DUPLICATES, &je);
	if (j && json_is_object(j))
		return j;
	if (j)
		snprintf(err, SL_ERR_LEN, "body: expected a JSON object");
	else
		snprintf(err, SL_ERR_LEN, "body: line %d, column %d: %s", je.line, je.column,
			 je.text);
	json_decref(j);
	return NULL;
}

json_t *
ctl_workers_body(json_t *body, char *err)
{
	json_t *n = json_object_get(body, "count");
	if (json_object_size(body) != 1 || !n) {
		snprintf(err, SL_ERR_LEN, "%s",
			 json_object_size(body) && !n ? "body: only \"count\" may be set here"
						      : "count: missing");
		return NULL;
	}
	return json_pack("{s:O}", "workers", n);
}

int
ctl_checkpoint_body(json_t *body, const char **path, char *err)
{
	json_t *p = json_object_get(body, "path");
	*path = NULL;
	if (json_object_size(body) > (p ? 1u : 0u))
		return sl_fail(err, SL_EINVAL, "body: only \"path\" may be set here");
	if (p && (!json_is_string(p) || !*json_string_value(p) ||
		  strlen(json_string_value(p)) >= CTL_PATH_MAX - 64))
		return sl_fail(err, SL_EINVAL, "path: expected a file name");
	*path = p ? json_string_value(p) : NULL;
	return 0;
}

int
ctl_run_body(json_t *body, run_config *cfg, run_sched **sched, int *n_sched,
	     const char **resume, char *err)
{
	json_t *res = json_object_get(body, "resume");
	*sched = NULL;
	*n_sched = 0;
	*resume = NULL;
	if (res) {
		if (!json_is_string(res) || json_object_size(body) != 1)
			return sl_fail(err, SL_EINVAL,
				       "resume: expected {\"resume\": \"path\"} alone");
		*resume = json_string_value(res);
		return 0;
	}
	config_defaults(cfg);
	runlog_strip(body); /* a log's first record is a run object too */
	int rc = config_apply_json(body, cfg, err);
	if (rc == 0)
		rc = sched_from_json(json_object_get(body, "schedule"), cfg, sched, n_sched,
				     err);
	return rc;
}

/* ---- mutating calls ------------------------------------------------------ */

static void
post_run(ctl *c, json_t *body, ctl_reply *o)
{
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
	rc = start_locked(c, &cfg, sched, n_sched, ckpt, ckpt_len, NULL, NULL, err);
	free(sched);
	free(ckpt);
	if (rc < 0) {
		pthread_mutex_unlock(&c->mu);
		reply_error(o, rc == -SL_ENOMEM ? 500 : 400,
			    rc == -SL_ENOMEM ? "internal" : "bad_field", err);
		return;
	}
	run_snapshot *snap = run_snapshot_get(c->r);
	reply_json(o, 201, status_json(c, snap));
	run_snapshot_put(snap);
	snprintf(o->location, sizeof(o->location), "/api/v1/runs/%d", c->run_id);
	pthread_mutex_unlock(&c->mu);
}

/* POST /api/v1/run/recover {"lr": x}: a diverged run goes on from its
 * last good checkpoint (or, with none, from the start) as a new run, with
 * lr (default: half the current) as a change logged at its first version */
static void
post_recover(ctl *c, json_t *body, ctl_reply *o)
{
	char err[SL_ERR_LEN];
	json_t *lr = body_only(body, "lr", o);
	if (o->status)
		return;
	run_snapshot *snap = lock_run(c, o);
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
	int rc = run_good_checkpoint(c->r, &buf, &len, &gv, err);
	int from_ckpt = rc == 0;
	if (rc == -SL_ESTATE)
		rc = 0; /* diverged before a finite evaluation: from the start */
	else if (rc == 0)
		rc = run_checkpoint_config(buf, len, &cfg, err);
	json_t *note = json_pack("{s:i,s:I,s:I,s:s}", "run", c->run_id, "diverged_v",
				 (json_int_t)div_v, "from_v", (json_int_t)gv, "from",
				 from_ckpt ? "checkpoint" : "start");
	/* answer once the new lr is in (its change record), as PATCH does */
	ctl_waiter w;
	waiter_add(c, &w, &cmd);
	if (rc == 0)
		rc = start_locked(c, &cfg, NULL, 0, buf, len, &cmd, note, err);
	free(buf);
	int run_id = c->run_id;
	pthread_mutex_unlock(&c->mu);
	waiter_wait(c, &w, rc == 0);
	if (rc < 0) {
		json_decref(note);
		reply_error(o, rc == -SL_ENOMEM ? 500 : 400,
			    rc == -SL_ENOMEM ? "internal" : "bad_field", err);
		return;
	}
	say(c, "run %d recovers run %lld from v %llu (%s) with lr %g", run_id,
	    (long long)json_integer_value(json_object_get(note, "run")),
	    (unsigned long long)gv, from_ckpt ? "its last good checkpoint" : "the start", cmd.lr);
	json_object_set_new(note, "lr", jsonout_real(cmd.lr));
	json_object_set_new(note, "applied", json_boolean(w.done));
	pthread_mutex_lock(&c->mu);
	json_t *st_json = NULL;
	if (c->r && c->run_id == run_id) {
		snap = run_snapshot_get(c->r);
		st_json = status_json(c, snap);
		run_snapshot_put(snap);
	} else { /* another run started meanwhile */
		st_json = json_pack("{s:i}", "run", run_id);
	}
	json_object_set_new(st_json, "recovered", note);
	reply_json(o, 201, st_json);
	snprintf(o->location, sizeof(o->location), "/api/v1/runs/%d", run_id);
	pthread_mutex_unlock(&c->mu);
}

static void
post_checkpoint(ctl *c, json_t *body, ctl_reply *o)
{
	char err[SL_ERR_LEN], path[CTL_PATH_MAX];
	const char *p;
	if (ctl_checkpoint_body(body, &p, err) < 0) {
		reply_error(o, 400, "bad_field", err);
		return;
	}
	run_snapshot *snap = lock_run(c, o);
	if (!snap)
		return;
	run_snapshot_put(snap);
	int rc = p ? ckpt_target(c, "path", p, path, sizeof(path), err) : 0;
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

void
ctl_handle(ctl *c, const char *method, const char *path, const char *query,
	   const char *body, size_t len, int authorized, ctl_reply *o)
{
	memset(o, 0, sizeof(*o));
	int id = -1;
	const char *allow;
	route rt = match(path, &id, &allow);
	if (rt == R_NONE) {
		reply_error(o, 404, "not_found", "no such endpoint (GET / lists them)");
		return;
	}
	int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
	if (!strcmp(method, "OPTIONS")) {
		snprintf(o->allow, sizeof(o->allow), "%s, OPTIONS", allow);
		o->status = 204;
		return;
	}
	if (!allowed(allow, method)) {
		char msg[96];
		snprintf(msg, sizeof(msg), "method not allowed here (allowed: %s)", allow);
		snprintf(o->allow, sizeof(o->allow), "%s", allow);
		reply_error(o, 405, "method", msg);
		return;
	}
	if (get) {
		pthread_mutex_lock(&c->mu);
		handle_get(c, rt, id, query, o);
		pthread_mutex_unlock(&c->mu);
		return;
	}
	if (!authorized) {
		reply_error(o, 401, "unauthorized",
			    "this daemon needs 'Authorization: Bearer TOKEN' for changes");
		return;
	}
	char err[SL_ERR_LEN];
	/* recover and checkpoint take an empty body as {} (every field is
	 * optional: `curl -X POST .../checkpoint` writes one) */
	json_t *j = (rt == R_RECOVER || rt == R_CKPT) && !len ? json_object()
							       : ctl_body_parse(body, len, err);
	if (!j) {
		reply_error(o, 400, "bad_json", err);
		return;
	}
	if (rt == R_CKPT) {
		post_checkpoint(c, j, o);
	} else if (rt == R_RECOVER) {
		post_recover(c, j, o);
	} else if (rt == R_RUN && !strcmp(method, "POST")) {
		post_run(c, j, o);
	} else if (rt == R_WORKERS) {
		json_t *set = ctl_workers_body(j, err);
		if (set)
			command(c, set, -1, o);
		else
			reply_error(o, 400, "bad_field", err);
		json_decref(set);
	} else {
		command(c, j, rt == R_WORKER ? id : -1, o);
	}
	json_decref(j);
}
