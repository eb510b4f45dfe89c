/* control.c - the routes and dispatch of the daemon's API, with no HTTP in
 * it (see control.h): the route table, ctl_handle, the GET views and the
 * changes (PATCH, PUT); runs and checkpoints are control_runs.c's. */
#include "control.h"

#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "cli.h"
#include "config_json.h"
#include "control_impl.h"
#include "jsonout.h"

const char ctl_index_text[] =
	"stalelab " SL_VERSION " - asynchronous data-parallel training test-bed\n"
	"\n"
	"GET   /api/v1/status            run config, state, version, workers, demo scene\n"
	"GET   /api/v1/metrics?since=V   evaluation series\n"
	"GET   /api/v1/staleness         histograms overall, sliding, per worker\n"
	"GET   /api/v1/events?hz=4       Server-Sent Events\n"
	"GET   /api/v1/runs              this and earlier runs (?series=1: with series)\n"
	"GET   /api/v1/runs/{id}         one run with its series and changes\n"
	"GET   /api/v1/runs/{id}/changes every change of a run, as logged\n"
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
	"GET   /api/v1/sweeps            finished sweeps (serve --sweeps DIR)\n"
	"GET   /api/v1/sweeps/{name}     one: its sweep file, results and summary\n"
	"GET   /api/v1/sweeps/{name}/figures/{file}.svg   a figure of stalelab plot\n"
	"GET   /api/v1/clusters          finished cluster simulations (serve --clusters DIR)\n"
	"GET   /api/v1/clusters/{name}   one: its inputs, summary and series per policy\n"
	"GET   /api/v1/clusters/{name}/files/{file}   one of its CSV or SVG files\n"
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
reply_text(ctl_reply *o, int status, const char *type, char *text)
{
	o->status = status;
	o->type = type;
	o->text = text;
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
json_t *
ctl_status_json(ctl *c, const run_snapshot *snap)
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
		o = ctl_status_json(c, snap);
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
	       R_WORKERS, R_WORKER, R_PROM, R_CKPT, R_RUNS, R_RUN_ONE, R_RUN_CHANGES, R_SCHEMA,
	       R_RECOVER, R_NONE } route;

static const struct {
	const char *path; /* a trailing '/' takes an id */
	route r;
	const char *allow;
	const char *suffix; /* after the id ("/changes"), or NULL */
} routes[] = {
	{"/", R_INDEX, "GET, HEAD", NULL},
	{"/api/v1/status", R_STATUS, "GET, HEAD", NULL},
	{"/api/v1/metrics", R_METRICS, "GET, HEAD", NULL},
	{"/api/v1/staleness", R_STALENESS, "GET, HEAD", NULL},
	{"/api/v1/events", R_EVENTS, "GET, HEAD", NULL},
	{"/api/v1/run", R_RUN, "GET, HEAD, POST, PATCH", NULL},
	{"/api/v1/workers", R_WORKERS, "GET, HEAD, PUT", NULL},
	{"/api/v1/workers/", R_WORKER, "GET, HEAD, PATCH", NULL},
	{"/metrics", R_PROM, "GET, HEAD", NULL},
	{"/api/v1/checkpoint", R_CKPT, "POST", NULL},
	{"/api/v1/runs", R_RUNS, "GET, HEAD", NULL},
	{"/api/v1/runs/", R_RUN_ONE, "GET, HEAD", NULL},
	{"/api/v1/runs/", R_RUN_CHANGES, "GET, HEAD", "/changes"},
	{"/api/v1/schema", R_SCHEMA, "GET, HEAD", NULL},
	{"/api/v1/run/recover", R_RECOVER, "POST", NULL},
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
			continue;
		}
		if (strncmp(path, p, n))
			continue;
		/* the id, then the suffix (if any) to the end */
		char num[16];
		const char *rest = path + n, *sfx = routes[i].suffix ? routes[i].suffix : "";
		size_t k = strcspn(rest, "/");
		if (k == 0 || k >= sizeof(num) || strcmp(rest + k, sfx))
			continue;
		memcpy(num, rest, k);
		num[k] = 0;
		if (cli_u64(num, &v) == 0 && v < 1000000) {
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
run_snapshot *
ctl_lock_run(ctl *c, ctl_reply *o)
{
	pthread_mutex_lock(&c->mu);
	run_snapshot *snap = need_run(c, o);
	if (!snap)
		pthread_mutex_unlock(&c->mu);
	return snap;
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
		if (!series) {
			json_object_del(cp, "series");
			json_object_del(cp, "changes");
		}
		json_array_append_new(arr, cp);
	}
	if (c->r && (id < 0 || id == c->run_id)) {
		json_t *cur = ctl_run_summary(c, series);
		if (!series)
			json_object_del(cur, "changes");
		json_array_append_new(arr, cur);
	}
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

/* GET /api/v1/runs/{id}/changes: the current run's live, an earlier
 * run's from its summary */
static void
get_changes(ctl *c, int id, ctl_reply *o)
{
	json_t *changes = NULL;
	if (c->r && id == c->run_id) {
		changes = ctl_changes_json(c);
	} else {
		size_t i;
		json_t *e;
		json_array_foreach(c->past, i, e)
			if (json_integer_value(json_object_get(e, "run")) == id)
				changes = json_deep_copy(json_object_get(e, "changes"));
	}
	if (!changes) {
		char msg[96];
		snprintf(msg, sizeof(msg), "run %d: not among this daemon's last %d runs", id,
			 PAST_MAX + 1);
		reply_error(o, 404, "no_run", msg);
		return;
	}
	reply_json(o, 200, json_pack("{s:i,s:o}", "run", id, "changes", changes));
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
	if (rt == R_RUN_CHANGES) {
		get_changes(c, id, o);
		return;
	}
	run_snapshot *snap = need_run(c, o);
	if (!snap)
		return;
	switch (rt) {
	case R_STATUS:
		reply_json(o, 200, ctl_status_json(c, snap));
		break;
	case R_EVENTS: { /* over a request/reply transport: one snapshot */
		json_t *s = ctl_status_json(c, snap);
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

/* queue a change to the current run and answer with it as logged, once
 * applied (t and v); 409 when there is no run or it has finished */
static void
command(ctl *c, json_t *set, int worker, ctl_reply *o)
{
	char err[SL_ERR_LEN];
	run_snapshot *snap = ctl_lock_run(c, o);
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
		if (ctl_ckpt_target(c, "checkpoint", cmd.path, path, sizeof(path), err) < 0)
			reply_error(o, 400, "bad_field", err);
	}
	if (o->status) {
		pthread_mutex_unlock(&c->mu);
		return;
	}
	snprintf(cmd.origin, sizeof(cmd.origin), "api");
	ctl_waiter w;
	ctl_waiter_add(c, &w, &cmd, 1);
	int rc = run_command(c->r, &cmd, err);
	pthread_mutex_unlock(&c->mu);
	ctl_waiter_wait(c, &w, rc == 0);
	if (rc < 0) {
		reply_error(o, 400, "bad_field", err);
		return;
	}
	if (!w.done && w.ended) { /* the run ended between the check and the change */
		reply_error(o, 409, "ended",
			    "the run ended before the change was applied: nothing changed (GET "
			    "/api/v1/status says how it ended)");
		return;
	}
	json_t *ch = w.done ? api_change_record(w.t, w.v, &cmd) : cmd_to_json(&cmd);
	json_object_set_new(ch, "run", json_integer(run_id));
	json_t *r = json_pack("{s:b,s:b}", "accepted", 1, "applied", w.done);
	json_object_set_new(r, "change", ch);
	reply_json(o, 202, r);
}

void
ctl_handle(ctl *c, const char *method, const char *path, const char *query,
	   const char *body, size_t len, int authorized, ctl_reply *o)
{
	memset(o, 0, sizeof(*o));
	if (!strncmp(path, "/api/v1/sweeps", 14) && (!path[14] || path[14] == '/')) {
		ctl_get_sweeps(c, method, path + 14, o);
		return;
	}
	if (!strncmp(path, "/api/v1/clusters", 16) && (!path[16] || path[16] == '/')) {
		ctl_get_clusters(c, method, path + 16, o);
		return;
	}
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
		ctl_post_checkpoint(c, j, o);
	} else if (rt == R_RECOVER) {
		ctl_post_recover(c, j, o);
	} else if (rt == R_RUN && !strcmp(method, "POST")) {
		ctl_post_run(c, j, o);
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
