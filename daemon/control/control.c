/* control.c - the routes and dispatch of the daemon's API, with no HTTP in
 * it (see control.h): the route table (a row per method and path: its
 * handler, what it needs, its line in the index), ctl_handle, the index,
 * the GET views and the changes (PATCH, PUT); runs and checkpoints are
 * control_runs.c's, finished sweeps and simulations control_sweeps.c's and
 * control_clusters.c's. */
#include "control.h"

#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "cli.h"
#include "config_json.h"
#include "control_impl.h"
#include "jsonout.h"

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

/* ---- the GET views ------------------------------------------------------ */

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
get_metrics(ctl *c, const ctl_args *a, ctl_reply *o)
{
	char q[32];
	unsigned long long since = 0;
	if (query_get(a->query, "since", q, sizeof(q)) && cli_u64(q, &since) < 0) {
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
	reply_json(o, 200, json_pack("{s:I,s:I,s:o}", "version", (json_int_t)a->snap->v,
				     "since", (json_int_t)since, "series", arr));
}

/* GET /api/v1/runs (summaries; series=1: with series), /api/v1/runs/{id} */
static void
get_runs(ctl *c, const ctl_args *a, ctl_reply *o)
{
	char q[8] = "";
	int id = a->id;
	int series = id >= 0;
	if (id < 0 && query_get(a->query, "series", q, sizeof(q))) {
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
get_changes(ctl *c, const ctl_args *a, ctl_reply *o)
{
	int id = a->id;
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

static char *index_text(void);

static void
get_index(ctl *c, const ctl_args *a, ctl_reply *o)
{
	(void)c;
	(void)a;
	char *text = index_text();
	if (text)
		reply_text(o, 200, "text/plain; charset=utf-8", text);
	else
		reply_error(o, 500, "internal", "out of memory");
}

static void
get_schema(ctl *c, const ctl_args *a, ctl_reply *o)
{
	(void)c;
	(void)a;
	reply_json(o, 200, config_schema_json());
}

static void
get_status(ctl *c, const ctl_args *a, ctl_reply *o)
{
	reply_json(o, 200, ctl_status_json(c, a->snap));
}

/* over a request/reply transport: one snapshot (HTTP streams them) */
static void
get_events(ctl *c, const ctl_args *a, ctl_reply *o)
{
	json_t *s = ctl_status_json(c, a->snap);
	json_object_set_new(s, "staleness", api_staleness_json(a->snap));
	reply_json(o, 200, s);
}

static void
get_staleness(ctl *c, const ctl_args *a, ctl_reply *o)
{
	(void)c;
	reply_json(o, 200, api_staleness_json(a->snap));
}

static void
get_prometheus(ctl *c, const ctl_args *a, ctl_reply *o)
{
	(void)c;
	reply_text(o, 200, "text/plain; version=0.0.4; charset=utf-8", api_prometheus(a->snap));
}

static void
get_run(ctl *c, const ctl_args *a, ctl_reply *o)
{
	reply_json(o, 200, json_pack("{s:i,s:s,s:o}", "run", c->run_id, "state",
				     run_state_name(a->snap->state), "config",
				     config_to_json(&a->snap->cfg)));
}

static void
get_workers(ctl *c, const ctl_args *a, ctl_reply *o)
{
	(void)c;
	const run_snapshot *snap = a->snap;
	json_t *ws = json_array();
	for (int i = 0; i < snap->n_workers; i++)
		json_array_append_new(ws, api_worker_json(snap, i));
	reply_json(o, 200, json_pack("{s:i,s:o}", "count", snap->cfg.workers, "workers", ws));
}

static void
get_worker(ctl *c, const ctl_args *a, ctl_reply *o)
{
	(void)c;
	const run_snapshot *snap = a->snap;
	if (a->id < snap->n_workers && a->id < snap->cfg.workers) {
		reply_json(o, 200, api_worker_json(snap, a->id));
	} else {
		char msg[96];
		snprintf(msg, sizeof(msg), "worker %d: the run has %d workers", a->id,
			 snap->cfg.workers);
		reply_error(o, 404, "no_worker", msg);
	}
}

/* ---- the changes ---------------------------------------------------------- */

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

/* PATCH /api/v1/run */
static void
patch_run(ctl *c, const ctl_args *a, ctl_reply *o)
{
	command(c, a->body, -1, o);
}

/* PATCH /api/v1/workers/{id} */
static void
patch_worker(ctl *c, const ctl_args *a, ctl_reply *o)
{
	command(c, a->body, a->id, o);
}

/* PUT /api/v1/workers {"count": N} */
static void
put_workers(ctl *c, const ctl_args *a, ctl_reply *o)
{
	char err[SL_ERR_LEN];
	json_t *set = ctl_workers_body(a->body, err);
	if (set)
		command(c, set, -1, o);
	else
		reply_error(o, 400, "bad_field", err);
	json_decref(set);
}

/* ---- the routes ------------------------------------------------------------ */

/* Every endpoint, in the index's order (control_impl.h says what a row
 * holds; docs/api.md has a heading per row but the RT_MISS ones). */
static const ctl_route routes[] = {
	{"GET", "/", 0, get_index, "this list (a browser gets the dashboard)"},
	{"GET", "/api/v1/status", RT_RUN, get_status,
	 "run config, state, version, workers, demo scene"},
	{"GET", "/api/v1/metrics", RT_RUN, get_metrics, "evaluation series (?since=V)"},
	{"GET", "/api/v1/staleness", RT_RUN, get_staleness,
	 "histograms overall, sliding, per worker"},
	{"GET", "/api/v1/events", RT_RUN, get_events, "Server-Sent Events (?hz=4)"},
	{"GET", "/api/v1/runs", RT_LOCK, get_runs, "this and earlier runs (?series=1: with series)"},
	{"GET", "/api/v1/runs/{id}", RT_LOCK, get_runs, "one run with its series and changes"},
	{"GET", "/api/v1/runs/{id}/changes", RT_LOCK, get_changes, "every change of a run, as logged"},
	{"GET", "/api/v1/schema", 0, get_schema, "every config field and rule parameter"},
	{"GET", "/api/v1/run", RT_RUN, get_run, "the current run object"},
	{"POST", "/api/v1/run", 0, ctl_post_run,
	 "start a run: a run object, or {\"resume\": checkpoint}"},
	{"PATCH", "/api/v1/run", RT_RUN, patch_run,
	 "change rule, rule_params, lr, batch, paused, stop"},
	{"GET", "/api/v1/workers", RT_RUN, get_workers, "the worker count and table"},
	{"PUT", "/api/v1/workers", RT_RUN, put_workers, "{\"count\": N}"},
	{"GET", "/api/v1/workers/{id}", RT_RUN, get_worker, "one worker"},
	{"PATCH", "/api/v1/workers/{id}", RT_RUN, patch_worker,
	 "{\"delay\": {...}, \"spb_depth\": k, \"paused\": b}"},
	{"POST", "/api/v1/run/recover", RT_RUN | RT_EMPTY, ctl_post_recover,
	 "{\"lr\": x} (optional): resume a diverged run from its last good checkpoint, "
	 "smaller lr"},
	{"POST", "/api/v1/checkpoint", RT_RUN | RT_EMPTY, ctl_post_checkpoint,
	 "{\"path\": file} (optional): write a checkpoint"},
	{"GET", "/api/v1/sweeps", 0, ctl_sweeps_get, "finished sweeps (serve --sweeps DIR)"},
	{"GET", "/api/v1/sweeps/{name}", 0, ctl_sweeps_get,
	 "one: its sweep file, results and summary"},
	{"GET", "/api/v1/sweeps/{name}/figures/{file*}", 0, ctl_sweeps_figure,
	 "a figure of stalelab plot (SVG)"},
	{"GET", "/api/v1/sweeps/{path*}", RT_MISS, ctl_sweeps_get, NULL},
	{"GET", "/api/v1/clusters", 0, ctl_clusters_get,
	 "finished cluster simulations (serve --clusters DIR)"},
	{"GET", "/api/v1/clusters/{name}", 0, ctl_clusters_get,
	 "one: its inputs, summary and series per policy"},
	{"GET", "/api/v1/clusters/{name}/files/{file*}", 0, ctl_clusters_file,
	 "one of its CSV or SVG files"},
	{"GET", "/api/v1/clusters/{path*}", RT_MISS, ctl_clusters_get, NULL},
	{"GET", "/metrics", RT_RUN, get_prometheus, "Prometheus text format"},
};

#define N_ROUTES (sizeof(routes) / sizeof(routes[0]))

const ctl_route *
ctl_routes(size_t *n)
{
	*n = N_ROUTES;
	return routes;
}

void
ctl_route_shown(const char *pattern, char *out, size_t cap)
{
	size_t n = 0;
	for (const char *p = pattern; *p && n + 1 < cap; p++)
		if (!(p[0] == '*' && p[1] == '}'))
			out[n++] = *p;
	out[n] = 0;
}

/* the index's columns: the method, the path, its line (wrapped at WIDTH) */
#define COL_PATH 6
#define COL_DOC 32
#define WIDTH 84

static void
put_str(sl_buf *b, const char *s)
{
	sl_buf_put(b, s, strlen(s));
}

static void
put_spaces(sl_buf *b, size_t n)
{
	static const char sp[] = "                                ";
	while (n) {
		size_t k = n < sizeof(sp) - 1 ? n : sizeof(sp) - 1;
		sl_buf_put(b, sp, k);
		n -= k;
	}
}

/* GET / for curl: a line per route, from the table (malloc'd; NULL: out
 * of memory) */
static char *
index_text(void)
{
	sl_buf b = {0};
	put_str(&b, "stalelab " SL_VERSION " - asynchronous data-parallel training test-bed\n\n");
	for (size_t i = 0; i < N_ROUTES; i++) {
		const ctl_route *r = &routes[i];
		if (r->flags & RT_MISS)
			continue;
		char path[128];
		ctl_route_shown(r->path, path, sizeof(path));
		put_str(&b, r->method);
		put_spaces(&b, COL_PATH - strlen(r->method));
		put_str(&b, path);
		size_t col = COL_PATH + strlen(path);
		size_t pad = col < COL_DOC ? COL_DOC - col : 3;
		put_spaces(&b, pad);
		col += pad;
		/* the line's words, wrapped under its first */
		for (const char *w = r->doc; *w;) {
			size_t n = strcspn(w, " ");
			if (w != r->doc && col + 1 + n > WIDTH) {
				put_str(&b, "\n");
				put_spaces(&b, COL_DOC);
				col = COL_DOC;
			} else if (w != r->doc) {
				put_str(&b, " ");
				col++;
			}
			sl_buf_put(&b, w, n);
			col += n;
			w += n;
			w += strspn(w, " ");
		}
		put_str(&b, "\n");
	}
	put_str(&b, "\nSee docs/api.md.\n");
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	return b.p;
}

/* the segment at s (n bytes) as an {id}: 0..999999 */
static int
id_of(const char *s, size_t n, int *id)
{
	char num[16];
	unsigned long long v;
	if (n == 0 || n >= sizeof(num))
		return -1;
	memcpy(num, s, n);
	num[n] = 0;
	if (cli_u64(num, &v) < 0 || v >= 1000000)
		return -1;
	*id = (int)v;
	return 0;
}

/* does path fit the pattern? its parameters into a */
static int
match(const char *pattern, const char *path, ctl_args *a)
{
	a->id = -1;
	a->name[0] = 0;
	a->rest = "";
	for (const char *p = pattern; *p;) {
		if (*p != '{') {
			if (*p++ != *path++)
				return 0;
			continue;
		}
		const char *end = strchr(p, '}');
		size_t seg = strcspn(path, "/");
		if (end[-1] == '*') {
			a->rest = path;
			seg = strlen(path);
		} else if (end - p == 3 && !strncmp(p, "{id", 3)) {
			if (id_of(path, seg, &a->id) < 0)
				return 0;
		} else {
			size_t n = seg < sizeof(a->name) ? seg : sizeof(a->name) - 1;
			memcpy(a->name, path, n);
			a->name[n] = 0;
		}
		path += seg;
		p = end + 1;
	}
	return !*path;
}

/* the methods of the rows of pattern, as an Allow header */
static void
allow_of(const char *pattern, char *out, size_t cap)
{
	size_t n = 0;
	out[0] = 0;
	for (size_t i = 0; i < N_ROUTES && n < cap; i++)
		if (!strcmp(routes[i].path, pattern))
			n += (size_t)snprintf(out + n, cap - n, "%s%s%s", n ? ", " : "",
					      routes[i].method,
					      !strcmp(routes[i].method, "GET") ? ", HEAD" : "");
}

/* the row of pattern for method (HEAD: the GET row), or NULL */
static const ctl_route *
row_for(const char *pattern, const char *method)
{
	const char *m = strcmp(method, "HEAD") ? method : "GET";
	for (size_t i = 0; i < N_ROUTES; i++)
		if (!strcmp(routes[i].path, pattern) && !strcmp(routes[i].method, m))
			return &routes[i];
	return NULL;
}

/* a GET: with c->mu and the run's snapshot as the row says */
static void
call_get(ctl *c, const ctl_route *r, ctl_args *a, ctl_reply *o)
{
	if (!(r->flags & (RT_RUN | RT_LOCK))) {
		r->fn(c, a, o);
		return;
	}
	pthread_mutex_lock(&c->mu);
	if (r->flags & RT_RUN)
		a->snap = need_run(c, o);
	if (a->snap || !(r->flags & RT_RUN))
		r->fn(c, a, o);
	if (a->snap)
		run_snapshot_put(a->snap);
	pthread_mutex_unlock(&c->mu);
}

void
ctl_handle(ctl *c, const char *method, const char *path, const char *query,
	   const char *body, size_t len, int authorized, ctl_reply *o)
{
	memset(o, 0, sizeof(*o));
	ctl_args a = {.method = method, .query = query};
	const ctl_route *hit = NULL;
	for (size_t i = 0; i < N_ROUTES && !hit; i++)
		if (match(routes[i].path, path, &a))
			hit = &routes[i];
	if (!hit) {
		reply_error(o, 404, "not_found", "no such endpoint (GET / lists them)");
		return;
	}
	/* room left for ", OPTIONS" (the longest, "GET, HEAD, POST, PATCH",
	 * is far from it) */
	char allow[sizeof(o->allow) - sizeof(", OPTIONS") + 1];
	allow_of(hit->path, allow, sizeof(allow));
	if (!strcmp(method, "OPTIONS")) {
		snprintf(o->allow, sizeof(o->allow), "%s, OPTIONS", allow);
		o->status = 204;
		return;
	}
	const ctl_route *r = row_for(hit->path, method);
	if (!r) {
		char msg[96];
		snprintf(msg, sizeof(msg), "method not allowed here (allowed: %s)", allow);
		snprintf(o->allow, sizeof(o->allow), "%s", allow);
		reply_error(o, 405, "method", msg);
		return;
	}
	a.route = r;
	if (!strcmp(r->method, "GET")) {
		call_get(c, r, &a, o);
		return;
	}
	if (!authorized) {
		reply_error(o, 401, "unauthorized",
			    "this daemon needs 'Authorization: Bearer TOKEN' for changes");
		return;
	}
	char err[SL_ERR_LEN];
	/* every field optional (RT_EMPTY): no body is {} (`curl -X POST
	 * .../checkpoint` writes one) */
	a.body = (r->flags & RT_EMPTY) && !len ? json_object() : ctl_body_parse(body, len, err);
	if (!a.body) {
		reply_error(o, 400, "bad_json", err);
		return;
	}
	r->fn(c, &a, o);
	json_decref(a.body);
}
