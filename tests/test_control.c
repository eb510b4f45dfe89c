/* test_control.c - the daemon's control driven directly, without a socket:
 * (method, path, query, body, authorized) in, (status, JSON, headers) out,
 * as the HTTP transport and the bus see it. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_json.h"
#include "control.h"
#include "control_impl.h"
#include "testutil.h"

/* a small wall-clock run that goes on until the ctl is freed */
static void
start_small(ctl *c)
{
	run_config cfg;
	char err[SL_ERR_LEN] = "";
	config_defaults(&cfg);
	snprintf(cfg.model, sizeof(cfg.model), "mlp:784-8-10");
	snprintf(cfg.dataset, sizeof(cfg.dataset), "synthetic:600");
	cfg.workers = 2;
	cfg.batch = 16;
	cfg.eval_every = 50;
	ck_assert_msg(ctl_start(c, &cfg, NULL, 0, NULL, 0, err) == 0, "%s", err);
}

/* one request; the reply's status is checked, its JSON returned (owned by
 * *o, free with ctl_reply_free) */
static json_t *
call(ctl *c, const char *method, const char *path, const char *query,
     const char *body, int want, ctl_reply *o)
{
	ctl_handle(c, method, path, query, body, body ? strlen(body) : 0, 1, o);
	ck_assert_msg(o->status == want, "%s %s: %d, want %d (%s)", method, path,
		      o->status, want,
		      o->json ? json_string_value(json_object_get(
					json_object_get(o->json, "error"), "message"))
			      : "-");
	return o->json;
}

static const char *
error_message(json_t *j)
{
	return json_string_value(json_object_get(json_object_get(j, "error"), "message"));
}

START_TEST(get_patch_and_errors)
{
	ctl c;
	ctl_reply o;
	ctl_init(&c);
	start_small(&c);

	json_t *j = call(&c, "GET", "/api/v1/status", NULL, NULL, 200, &o);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "run")), 1);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "config"), "model")),
			 "mlp:784-8-10");
	ck_assert_ptr_null(json_object_get(j, "demo")); /* no demo running */
	ctl_reply_free(&o);

	/* a PATCH answers the change as logged, once applied: t and v */
	j = call(&c, "PATCH", "/api/v1/run", NULL, "{\"lr\": 0.02}", 202, &o);
	ck_assert(json_is_true(json_object_get(j, "applied")));
	json_t *ch = json_object_get(j, "change");
	ck_assert_double_eq(json_real_value(json_object_get(json_object_get(ch, "set"), "lr")), 0.02);
	ck_assert_ptr_nonnull(json_object_get(ch, "t"));
	ck_assert(json_is_integer(json_object_get(ch, "v")));
	ck_assert_str_eq(json_string_value(json_object_get(ch, "origin")), "api");
	ctl_reply_free(&o);
	/* an applied change is in the very next read: the run publishes its
	 * snapshot before it says the change is applied */
	j = call(&c, "GET", "/api/v1/run", NULL, NULL, 200, &o);
	ck_assert_double_eq(json_real_value(json_object_get(json_object_get(j, "config"), "lr")), 0.02);
	ctl_reply_free(&o);
	j = call(&c, "PATCH", "/api/v1/workers/1", NULL, "{\"delay\": {\"dist\": \"const\", \"mean_ms\": 7}}",
		 202, &o);
	ck_assert(json_is_true(json_object_get(j, "applied")));
	ctl_reply_free(&o);
	j = call(&c, "GET", "/api/v1/workers/1", NULL, NULL, 200, &o);
	ck_assert_double_eq(json_number_value(json_object_get(json_object_get(j, "delay"), "mean_ms")), 7);
	ctl_reply_free(&o);

	/* a bad body: 400 naming the field and its range */
	j = call(&c, "PATCH", "/api/v1/run", NULL, "{\"lr\": -1}", 400, &o);
	ck_assert_str_eq(error_message(j), "lr: must be in (0, 100], got -1");
	ctl_reply_free(&o);
	j = call(&c, "PATCH", "/api/v1/workers/1", NULL, "{\"spb_depth\": 3}", 400, &o);
	ck_assert_str_eq(error_message(j),
			 "spb_depth: must be in [0, 2] (the model's parameterised layers), got 3");
	ctl_reply_free(&o);
	j = call(&c, "PATCH", "/api/v1/run", NULL, "{\"lr\": ", 400, &o);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
			 "bad_json");
	ctl_reply_free(&o);
	j = call(&c, "GET", "/api/v1/metrics", "since=abc", NULL, 400, &o);
	ck_assert_ptr_nonnull(strstr(error_message(j), "since"));
	ctl_reply_free(&o);

	/* 404: no such endpoint, no such worker */
	call(&c, "GET", "/api/v1/nothing", NULL, NULL, 404, &o);
	ctl_reply_free(&o);
	j = call(&c, "PATCH", "/api/v1/workers/7", NULL, "{\"paused\": true}", 404, &o);
	ck_assert_str_eq(error_message(j), "worker 7: the run has 2 workers");
	ctl_reply_free(&o);
	call(&c, "GET", "/api/v1/workers/2", NULL, NULL, 404, &o);
	ctl_reply_free(&o);

	/* 405 with Allow */
	call(&c, "DELETE", "/api/v1/run", NULL, NULL, 405, &o);
	ck_assert_str_eq(o.allow, "GET, HEAD, POST, PATCH");
	ctl_reply_free(&o);
	call(&c, "PATCH", "/api/v1/workers", NULL, "{}", 405, &o);
	ck_assert_str_eq(o.allow, "GET, HEAD, PUT");
	ctl_reply_free(&o);

	/* 401 for a change without the token, reads need none */
	ctl_handle(&c, "PATCH", "/api/v1/run", NULL, "{\"lr\": 0.1}", 11, 0, &o);
	ck_assert_int_eq(o.status, 401);
	ctl_reply_free(&o);
	ctl_handle(&c, "HEAD", "/api/v1/workers", NULL, NULL, 0, 0, &o);
	ck_assert_int_eq(o.status, 200);
	ck_assert_int_eq(json_integer_value(json_object_get(o.json, "count")), 2);
	ctl_reply_free(&o);

	/* text answers say their type */
	call(&c, "GET", "/metrics", NULL, NULL, 200, &o);
	ck_assert_ptr_nonnull(strstr(o.text, "stalelab_updates_total"));
	ck_assert_ptr_nonnull(strstr(o.type, "text/plain"));
	ctl_reply_free(&o);
	ctl_free(&c);
}
END_TEST

START_TEST(no_run_conflicts)
{
	ctl c;
	ctl_reply o;
	ctl_init(&c);
	json_t *j = call(&c, "PATCH", "/api/v1/run", NULL, "{\"lr\": 0.02}", 409, &o);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
			 "no_run");
	ctl_reply_free(&o);
	call(&c, "GET", "/api/v1/status", NULL, NULL, 409, &o);
	ctl_reply_free(&o);
	call(&c, "POST", "/api/v1/checkpoint", NULL, "{}", 409, &o);
	ctl_reply_free(&o);
	/* the schema and the (empty) list of runs need no run */
	j = call(&c, "GET", "/api/v1/schema", NULL, NULL, 200, &o);
	ck_assert_int_eq(json_array_size(json_object_get(j, "rules")), 16);
	ctl_reply_free(&o);
	j = call(&c, "GET", "/api/v1/runs", NULL, NULL, 200, &o);
	ck_assert_int_eq(json_array_size(json_object_get(j, "runs")), 0);
	ctl_reply_free(&o);
	ctl_free(&c);
}
END_TEST

START_TEST(runs_and_location)
{
	ctl c;
	ctl_reply o;
	ctl_init(&c);
	start_small(&c);
	json_t *j = call(&c, "POST", "/api/v1/run", NULL,
			 "{\"model\": \"logreg\", \"dataset\": \"synthetic:600\", \"clock\": \"virtual\","
			 " \"stop\": {\"steps\": 60}, \"eval_every\": 20}",
			 201, &o);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "run")), 2);
	ck_assert_str_eq(o.location, "/api/v1/runs/2");
	ctl_reply_free(&o);
	call(&c, "POST", "/api/v1/run", NULL, "{\"workers\": 2, \"worker_overrides\": [{\"id\": 2}]}",
	     400, &o);
	ck_assert_str_eq(error_message(o.json),
			 "worker_overrides[0].id: no worker 2 (the run has 2 workers: ids 0..1)");
	ctl_reply_free(&o);
	/* summaries by default, series on request or for one run */
	j = call(&c, "GET", "/api/v1/runs", NULL, NULL, 200, &o);
	ck_assert_int_eq(json_array_size(json_object_get(j, "runs")), 2);
	ck_assert_ptr_null(json_object_get(json_array_get(json_object_get(j, "runs"), 0), "series"));
	ctl_reply_free(&o);
	j = call(&c, "GET", "/api/v1/runs", "series=1", NULL, 200, &o);
	ck_assert_ptr_nonnull(json_object_get(json_array_get(json_object_get(j, "runs"), 0), "series"));
	ctl_reply_free(&o);
	j = call(&c, "GET", "/api/v1/runs/1", NULL, NULL, 200, &o);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "run")), 1);
	ck_assert(json_is_array(json_object_get(j, "series")));
	ctl_reply_free(&o);
	call(&c, "GET", "/api/v1/runs/5", NULL, NULL, 404, &o);
	ctl_reply_free(&o);
	ctl_free(&c);
}
END_TEST

/* a run shrunk below a worker with an override still checkpoints and
 * resumes: the override waits for the worker to come back */
START_TEST(shrink_checkpoint_resume)
{
	ctl c;
	ctl_reply o;
	char dir[256], body[512];
	sl_test_tmpdir(dir, sizeof(dir));
	ctl_init(&c);
	c.ckpt_dir = dir; /* requests name files inside it */
	call(&c, "POST", "/api/v1/run", NULL,
	     "{\"model\": \"mlp:784-8-10\", \"dataset\": \"synthetic:600\", \"workers\": 3,"
	     " \"batch\": 16, \"worker_overrides\": [{\"id\": 2, \"speed\": 0.5}]}",
	     201, &o);
	ctl_reply_free(&o);
	json_t *j = call(&c, "PUT", "/api/v1/workers", NULL, "{\"count\": 2}", 202, &o);
	ck_assert(json_is_true(json_object_get(j, "applied")));
	ctl_reply_free(&o);
	snprintf(body, sizeof(body), "{\"path\": \"%s/s.ckpt\"}", dir);
	call(&c, "POST", "/api/v1/checkpoint", NULL, body, 400, &o); /* absolute */
	ctl_reply_free(&o);
	call(&c, "POST", "/api/v1/checkpoint", NULL, "{\"path\": \"s.ckpt\"}", 201, &o);
	ctl_reply_free(&o);
	snprintf(body, sizeof(body), "{\"resume\": \"%s/s.ckpt\"}", dir);
	call(&c, "POST", "/api/v1/run", NULL, body, 400, &o);
	ctl_reply_free(&o);
	j = call(&c, "POST", "/api/v1/run", NULL, "{\"resume\": \"s.ckpt\"}", 201, &o);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "config"), "workers")), 2);
	/* the echo holds no override for a worker the run does not have */
	ck_assert_int_eq(json_array_size(json_object_get(json_object_get(j, "config"),
							 "worker_overrides")), 0);
	ctl_reply_free(&o);
	ctl_free(&c);
	snprintf(body, sizeof(body), "%s/s.ckpt", dir);
	unlink(body);
	rmdir(dir);
}
END_TEST

/* the token: exact matches only, whatever the length of the guess */
START_TEST(token_compare)
{
	ck_assert(ctl_token_ok(NULL, NULL));
	ck_assert(ctl_token_ok(NULL, "anything"));
	ck_assert(!ctl_token_ok("s3cret", NULL));
	ck_assert(ctl_token_ok("s3cret", "s3cret"));
	static const char *const miss[] = {"", "s", "s3cre", "s3cret1", "s3crex", "S3cret",
					   "xs3cret", "s3cret\n", "s3cret s3cret"};
	for (size_t i = 0; i < sizeof(miss) / sizeof(miss[0]); i++)
		ck_assert_msg(!ctl_token_ok("s3cret", miss[i]), "'%s' accepted", miss[i]);
	ck_assert(ctl_token_ok("a", "a"));
	ck_assert(!ctl_token_ok("a", "aa"));
	ck_assert(!ctl_token_ok("aa", "a"));
}
END_TEST

typedef struct got {
	int n;
	int first, last;
	char name[16];
} got;

static void
put(void *ud, const char *name, const char *data)
{
	got *g = ud;
	int k = atoi(data + 5); /* {"k":N} */
	if (!g->n)
		g->first = k;
	g->last = k;
	g->n++;
	snprintf(g->name, sizeof(g->name), "%s", name);
}

/* the event ring: in order, a reader that fell behind skips what was
 * overwritten, a wait times out, closing wakes for good */
START_TEST(event_ring)
{
	events h;
	events_init(&h);
	uint64_t seq = events_now(&h);
	got g = {0};
	double t0 = sl_now();
	ck_assert_int_eq(events_wait(&h, &seq, t0 + 0.05, put, &g), 0);
	ck_assert_int_eq(g.n, 0);
	ck_assert(sl_now() - t0 >= 0.04);
	for (int i = 0; i < EVENTS_N + 44; i++) {
		json_t *j = json_pack("{s:i}", "k", i);
		events_publish(&h, i % 2 ? "eval" : "change", j);
		json_decref(j);
	}
	ck_assert_int_eq(events_wait(&h, &seq, sl_now() + 5, put, &g), 0);
	ck_assert_int_eq(g.n, EVENTS_N);
	ck_assert_int_eq(g.first, 44);
	ck_assert_int_eq(g.last, EVENTS_N + 43);
	ck_assert_str_eq(g.name, "eval");
	ck_assert_uint_eq(seq, EVENTS_N + 44);
	events_close(&h);
	ck_assert_int_eq(events_wait(&h, &seq, sl_now() + 5, put, &g), 1);
	ck_assert_int_eq(events_sleep(&h, 5), 1);
	events_free(&h);
}
END_TEST

/* The snapshot that first says "running" (what the bus, SSE and the TUI
 * publish) already lists the run's workers: it is published once the
 * clock has set them, not before (a loaded CI drew a running run with
 * none for a tenth of a second). */
START_TEST(first_running_snapshot_has_workers)
{
	ctl c;
	ctl_init(&c);
	start_small(&c);
	double end = sl_now() + 20;
	int seen = 0;
	while (!seen && sl_now() < end) {
		json_t *s = ctl_snapshot(&c);
		const char *st = json_string_value(json_object_get(s, "state"));
		if (st && !strcmp(st, "running")) {
			ck_assert_int_eq(json_array_size(json_object_get(s, "workers")), 2);
			seen = 1;
		}
		json_decref(s);
		if (!seen)
			usleep(500);
	}
	ck_assert_msg(seen, "no running snapshot within 20 s");
	ctl_free(&c);
}
END_TEST

/* A change that passed the "still running" check just before the run
 * ended is never applied: its PATCH is told so at once (409 "ended"),
 * not 202 "applied": false after 3 s and a promise it will be. The race
 * is played by hand: the run has ended, then the waiter comes. */
START_TEST(change_after_the_end_is_refused)
{
	ctl c;
	ctl_reply o;
	ctl_init(&c);
	start_small(&c);
	call(&c, "POST", "/api/v1/run", NULL,
	     "{\"model\": \"logreg\", \"dataset\": \"synthetic:600\", \"clock\": \"virtual\","
	     " \"stop\": {\"steps\": 60}, \"eval_every\": 20}", 201, &o);
	ctl_reply_free(&o);
	const char *st = NULL;
	for (double end = sl_now() + 30; sl_now() < end; usleep(10000)) {
		json_t *j = call(&c, "GET", "/api/v1/status", NULL, NULL, 200, &o);
		st = json_string_value(json_object_get(j, "state"));
		int done = st && !strcmp(st, "finished");
		ctl_reply_free(&o);
		if (done)
			break;
	}
	/* the plain path: a finished run refuses with 409 "finished" */
	json_t *j = call(&c, "PATCH", "/api/v1/run", NULL, "{\"lr\": 0.02}", 409, &o);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
			 "finished");
	ctl_reply_free(&o);
	/* the race: a waiter for a change to the run that has ended */
	run_cmd cmd = {.worker = -1, .fields = CMD_LR, .lr = 0.02};
	ctl_waiter w;
	pthread_mutex_lock(&c.mu);
	ctl_waiter_add(&c, &w, &cmd, 1);
	pthread_mutex_unlock(&c.mu);
	double t0 = sl_now();
	ctl_waiter_wait(&c, &w, 1);
	ck_assert_msg(w.ended && !w.done, "ended %d done %d", w.ended, w.done);
	ck_assert_msg(sl_now() - t0 < 1.0, "waited %.2f s for a run that has ended", sl_now() - t0);
	/* a recover's waiter is for the next run: not ended by this one */
	pthread_mutex_lock(&c.mu);
	ctl_waiter_add(&c, &w, &cmd, 0);
	pthread_mutex_unlock(&c.mu);
	ck_assert_int_eq(w.ended, 0);
	ctl_waiter_wait(&c, &w, 0);
	ctl_free(&c);
}
END_TEST

/* a worker's link and the server's time change mid-run like a delay, and
 * the status shows them; a bad one is refused by name */
START_TEST(link_and_server_mid_run)
{
	ctl c;
	ctl_reply o;
	ctl_init(&c);
	start_small(&c);
	json_t *j = call(&c, "PATCH", "/api/v1/workers/1", NULL,
			 "{\"link\": {\"latency_ms\": 5, \"bandwidth_mbps\": 100}}", 202, &o);
	ck_assert(json_is_true(json_object_get(j, "applied")));
	ctl_reply_free(&o);
	j = call(&c, "GET", "/api/v1/status", NULL, NULL, 200, &o);
	json_t *w = json_object_get(j, "workers");
	json_t *l1 = json_object_get(json_array_get(w, 1), "link");
	json_t *l0 = json_object_get(json_array_get(w, 0), "link");
	ck_assert_double_eq(json_number_value(json_object_get(l1, "latency_ms")), 5);
	ck_assert_double_eq(json_number_value(json_object_get(l1, "bandwidth_mbps")), 100);
	ck_assert_double_eq(json_number_value(json_object_get(l0, "latency_ms")), 0);
	ck_assert_ptr_nonnull(json_object_get(json_array_get(w, 1), "bytes_recv"));
	ctl_reply_free(&o);
	/* merged onto its current one */
	call(&c, "PATCH", "/api/v1/workers/1", NULL, "{\"link\": {\"latency_ms\": 7}}", 202, &o);
	ctl_reply_free(&o);
	j = call(&c, "GET", "/api/v1/status", NULL, NULL, 200, &o);
	l1 = json_object_get(json_array_get(json_object_get(j, "workers"), 1), "link");
	ck_assert_double_eq(json_number_value(json_object_get(l1, "latency_ms")), 7);
	ck_assert_double_eq(json_number_value(json_object_get(l1, "bandwidth_mbps")), 100);
	ctl_reply_free(&o);
	j = call(&c, "PATCH", "/api/v1/workers/1", NULL, "{\"link\": {\"latency_ms\": -1}}", 400, &o);
	ck_assert_msg(strstr(error_message(j), "link.latency_ms"), "%s", error_message(j));
	ctl_reply_free(&o);
	j = call(&c, "PATCH", "/api/v1/workers/1", NULL, "{\"link\": {\"latncy_ms\": 1}}", 400, &o);
	ck_assert_msg(strstr(error_message(j), "link.latncy_ms"), "%s", error_message(j));
	ctl_reply_free(&o);
	call(&c, "PATCH", "/api/v1/run", NULL, "{\"server_ms\": 0.25}", 202, &o);
	ctl_reply_free(&o);
	j = call(&c, "GET", "/api/v1/run", NULL, NULL, 200, &o);
	ck_assert_double_eq(json_number_value(json_object_get(json_object_get(j, "config"), "server_ms")),
			    0.25);
	ctl_reply_free(&o);
	ctl_free(&c);
}
END_TEST

/* GET /api/v1/status until its state is `state` (NULL: any) and its
 * version at least v, for 60 s at most; the last status (owned by *o) */
static json_t *
wait_status(ctl *c, const char *state, long long v, ctl_reply *o)
{
	json_t *j = NULL;
	for (double end = sl_now() + 60; sl_now() < end; usleep(10000)) {
		j = call(c, "GET", "/api/v1/status", NULL, NULL, 200, o);
		const char *st = json_string_value(json_object_get(j, "state"));
		long long jv = json_integer_value(json_object_get(j, "version"));
		if ((!state || (st && !strcmp(st, state))) && jv >= v)
			return j;
		if (st && strcmp(st, "running") && strcmp(st, "starting") &&
		    (!state || strcmp(st, state))) {
			ck_abort_msg("state %s at v %lld, waiting for %s at v %lld", st, jv,
				     state ? state : "any", v);
		}
		ctl_reply_free(o);
	}
	ck_abort_msg("no %s at v %lld within 60 s", state ? state : "state", v);
	return j;
}

static double
cfg_num(json_t *status, const char *key)
{
	return json_number_value(json_object_get(json_object_get(status, "config"), key));
}

/* the recovered run of the two tests below, past version v: not diverged,
 * the recover's lr 0.01, the diverged run's 3 workers, the momentum of the
 * schedule's entry still ahead at the divergence */
static void
recovered_past(ctl *c, long long v)
{
	ctl_reply o;
	json_t *j = wait_status(c, NULL, v, &o);
	ck_assert_str_ne(json_string_value(json_object_get(j, "state")), "diverged");
	ck_assert_double_eq(cfg_num(j, "lr"), 0.01);
	ck_assert_int_eq((long long)cfg_num(j, "workers"), 3);
	ck_assert_double_eq(cfg_num(j, "momentum"), 0.5);
	ctl_reply_free(&o);
}

/* A recover goes on with what the diverged run had reached and applies
 * each schedule entry once (issue 15): the entry at v 45 that made the run
 * diverge (lr 100, momentum 0.9, 3 workers) is not applied again after the
 * recover from the last good checkpoint, at v 40 (it was, at v 45, over
 * the recover's lr: the run diverged again), its 3 workers stay, and the
 * entry still ahead (v 70) applies when it comes. */
START_TEST(recover_applies_the_schedule_once)
{
	ctl c;
	ctl_reply o;
	ctl_init(&c);
	call(&c, "POST", "/api/v1/run", NULL,
	     "{\"model\": \"mlp:784-256-128-10\", \"dataset\": \"synthetic:2000\", \"clock\": \"virtual\","
	     " \"workers\": 2, \"batch\": 16, \"lr\": 0.01, \"eval_every\": 10,"
	     " \"schedule\": [{\"at\": {\"v\": 45}, \"set\": {\"lr\": 100, \"momentum\": 0.9, \"workers\": 3}},"
	     "              {\"at\": {\"v\": 70}, \"set\": {\"momentum\": 0.5}}]}",
	     201, &o);
	ctl_reply_free(&o);
	json_t *j = wait_status(&c, "diverged", 0, &o);
	long long gv = json_integer_value(json_object_get(json_object_get(j, "recover"), "from_v"));
	ck_assert_int_eq(gv, 40); /* the last good evaluation, before the entry */
	ck_assert_int_eq((long long)cfg_num(j, "workers"), 3);
	ctl_reply_free(&o);
	j = call(&c, "POST", "/api/v1/run/recover", NULL, "{\"lr\": 0.01}", 201, &o);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "version")), gv);
	ck_assert_int_eq((long long)cfg_num(j, "workers"), 3); /* the diverged run's */
	ck_assert_double_eq(cfg_num(j, "lr"), 0.01);
	ctl_reply_free(&o);
	/* past v 45 at lr 0.01 (the schedule's lr 100 is not applied again),
	 * and past v 70, whose entry applies once */
	recovered_past(&c, 90);
	ctl_free(&c);
}
END_TEST

/* The same from the start (no good evaluation before the divergence): the
 * schedule's entries still ahead apply (they were all dropped), those the
 * diverged run applied do not apply again. */
START_TEST(recover_from_start_keeps_the_schedule_ahead)
{
	ctl c;
	ctl_reply o;
	ctl_init(&c);
	call(&c, "POST", "/api/v1/run", NULL,
	     "{\"model\": \"mlp:784-256-128-10\", \"dataset\": \"synthetic:2000\", \"clock\": \"virtual\","
	     " \"workers\": 2, \"batch\": 16, \"lr\": 0.01, \"eval_every\": 1000,"
	     " \"schedule\": [{\"at\": {\"v\": 10}, \"set\": {\"lr\": 100, \"momentum\": 0.9, \"workers\": 3}},"
	     "              {\"at\": {\"v\": 60}, \"set\": {\"momentum\": 0.5}}]}",
	     201, &o);
	ctl_reply_free(&o);
	json_t *j = wait_status(&c, "diverged", 0, &o);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "recover"), "from")),
			 "start");
	ck_assert_int_lt(json_integer_value(json_object_get(j, "version")), 60);
	ctl_reply_free(&o);
	call(&c, "POST", "/api/v1/run/recover", NULL, "{\"lr\": 0.01}", 201, &o);
	ctl_reply_free(&o);
	recovered_past(&c, 70);
	ctl_free(&c);
}
END_TEST

/* a file of the simulation's directory, written whole */
static void
sim_file(const char *dir, const char *name, const char *text)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	sl_test_write(p, text, strlen(text));
}

static double
num_at(json_t *a, size_t i)
{
	return json_number_value(json_array_get(a, i));
}

/* GET /api/v1/clusters/NAME reduces a long timeline to 1000 equal spans'
 * time-weighted means (the area under in_use, the GPU-seconds, kept) and
 * many jobs to 1000 JCT quantiles (ceil(k n / 1000)-th smallest), counts
 * the schedules, and sends a short timeline as it is; names and files not
 * in the directory are refused. Pinned on hand-computed values. */
START_TEST(cluster_series_reduced)
{
	char root[512], d[600], small[600];
	sl_test_tmpdir(root, sizeof(root));
	snprintf(d, sizeof(d), "%s/sim", root);
	snprintf(small, sizeof(small), "%s/small", root);
	ck_assert_int_eq(mkdir(d, 0755), 0);
	ck_assert_int_eq(mkdir(small, 0755), 0);
	const char *summary = "policy,jobs,avg_jct_s\nfifo,1500,1\n";
	for (int k = 0; k < 2; k++) {
		const char *dir = k ? small : d;
		sim_file(dir, "cluster.json", "{\"jobs\": 1500, \"gpus\": 10, \"policies\": [\"fifo\"]}");
		sim_file(dir, "summary.csv", summary);
	}
	/* 2501 decisions a second apart: in use 10 - i % 7 over [i, i + 1),
	 * then none from t = 2500 */
	size_t cap = 64 << 10, n = 0;
	char *t = malloc(cap);
	double area = 0;
	n += (size_t)snprintf(t + n, cap - n, "t,free_gpus,running,queued\n");
	for (int i = 0; i <= 2500; i++) {
		int fr = i < 2500 ? i % 7 : 10;
		n += (size_t)snprintf(t + n, cap - n, "%d.000000,%d,%d,%d\n", i, fr, 10 - fr, i % 3);
		if (i < 2500)
			area += 10 - fr;
	}
	sim_file(d, "timeline_fifo.csv", t);
	/* 1500 jobs whose JCTs are 1500 down to 1, schedules full and top2 in turn */
	n = (size_t)snprintf(t, cap, "job_id,jct_s,schedule\n");
	for (int i = 0; i < 1500; i++)
		n += (size_t)snprintf(t + n, cap - n, "%d,%d.000000,%s\n", i, 1500 - i,
				      i % 2 ? "top2" : "full");
	sim_file(d, "jobs_fifo.csv", t);
	free(t);
	sim_file(small, "timeline_fifo.csv", "t,free_gpus,running,queued\n0,4,2,0\n5.5,10,0,0\n");
	sim_file(small, "jobs_fifo.csv", "job_id,jct_s,schedule\n1,5.5,full\n2,5.5,full\n");

	ctl c;
	ctl_reply o;
	ctl_init(&c);
	json_t *j = call(&c, "GET", "/api/v1/clusters", NULL, NULL, 404, &o);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
			 "no_clusters");
	ctl_reply_free(&o);
	c.clusters_dir = root;
	j = call(&c, "GET", "/api/v1/clusters", NULL, NULL, 200, &o);
	json_t *sims = json_object_get(j, "simulations");
	ck_assert_int_eq((int)json_array_size(sims), 2);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(sims, 0), "name")), "sim");
	ctl_reply_free(&o);

	j = call(&c, "GET", "/api/v1/clusters/sim", NULL, NULL, 200, &o);
	json_t *fifo = json_object_get(json_object_get(j, "series"), "fifo");
	json_t *tl = json_object_get(fifo, "timeline");
	json_t *ts = json_object_get(tl, "t"), *use = json_object_get(tl, "in_use");
	ck_assert_int_eq((int)json_integer_value(json_object_get(tl, "points")), 2501);
	ck_assert_int_eq((int)json_integer_value(json_object_get(tl, "spans")), 1000);
	ck_assert_int_eq((int)json_array_size(ts), 1001);
	double kept = 0;
	for (size_t i = 0; i + 1 < json_array_size(ts); i++)
		kept += (num_at(ts, i + 1) - num_at(ts, i)) * num_at(use, i);
	ck_assert_double_eq_tol(kept, area, 1e-9 * area);
	/* span 0 is [0, 2.5): 10, 9, then half a second of 8 */
	ck_assert_double_eq_tol(num_at(use, 0), (10 + 9 + 0.5 * 8) / 2.5, 1e-12);
	ck_assert_double_eq_tol(num_at(ts, 1), 2.5, 1e-12);
	/* span 1 is [2.5, 5): half of 8, then 7 and 6 */
	ck_assert_double_eq_tol(num_at(use, 1), (0.5 * 8 + 7 + 6) / 2.5, 1e-12);
	ck_assert_double_eq_tol(num_at(ts, 1000), 2500, 1e-12);
	ck_assert_double_eq(num_at(use, 1000), 0);
	/* queued: (0 + 1 + 0.5 * 2) / 2.5 over span 0 */
	ck_assert_double_eq_tol(num_at(json_object_get(tl, "queued"), 0), 2 / 2.5, 1e-12);

	json_t *jct = json_object_get(fifo, "jct");
	json_t *s = json_object_get(jct, "s"), *share = json_object_get(jct, "share");
	ck_assert_int_eq((int)json_array_size(s), 1000);
	ck_assert_double_eq(num_at(s, 0), 2);        /* ceil(1500 / 1000) = the 2nd */
	ck_assert_double_eq(num_at(share, 0), 2.0 / 1500);
	ck_assert_double_eq(num_at(s, 499), 750);    /* ceil(500 x 1.5) = the 750th */
	ck_assert_double_eq(num_at(share, 499), 0.5);
	ck_assert_double_eq(num_at(s, 999), 1500);
	ck_assert_double_eq(num_at(share, 999), 1);
	json_t *sc = json_object_get(fifo, "schedules");
	ck_assert_int_eq((int)json_integer_value(json_object_get(sc, "full")), 750);
	ck_assert_int_eq((int)json_integer_value(json_object_get(sc, "top2")), 750);
	ck_assert_int_eq((int)json_integer_value(json_object_get(fifo, "jobs")), 1500);
	ctl_reply_free(&o);

	j = call(&c, "GET", "/api/v1/clusters/small", NULL, NULL, 200, &o);
	fifo = json_object_get(json_object_get(j, "series"), "fifo");
	tl = json_object_get(fifo, "timeline");
	ck_assert_int_eq((int)json_integer_value(json_object_get(tl, "spans")), 0);
	ck_assert_double_eq(num_at(json_object_get(tl, "t"), 1), 5.5);
	ck_assert_double_eq(num_at(json_object_get(tl, "in_use"), 0), 6);
	ck_assert_double_eq(num_at(json_object_get(json_object_get(fifo, "jct"), "share"), 0), 0.5);
	ctl_reply_free(&o);

	call(&c, "GET", "/api/v1/clusters/nope", NULL, NULL, 404, &o);
	ctl_reply_free(&o);
	call(&c, "GET", "/api/v1/clusters/sim/files/..%2Fsmall%2Fsummary.csv", NULL, NULL, 404, &o);
	ctl_reply_free(&o);
	call(&c, "GET", "/api/v1/clusters/sim/files/cluster.json", NULL, NULL, 404, &o);
	ctl_reply_free(&o);
	ctl_handle(&c, "GET", "/api/v1/clusters/sim/files/summary.csv", NULL, NULL, 0, 1, &o);
	ck_assert_int_eq(o.status, 200);
	ck_assert_str_eq(o.text, summary);
	ctl_reply_free(&o);
	call(&c, "DELETE", "/api/v1/clusters/sim", NULL, NULL, 405, &o);
	ctl_reply_free(&o);
	ctl_free(&c);
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* ---- the route table -------------------------------------------------------- */

static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"};

/* a path the pattern fits: {id} 1, {word} x, {word*} a/b */
static void
sample_path(const char *pattern, char *out, size_t cap)
{
	size_t n = 0;
	for (const char *p = pattern; *p && n + 4 < cap;) {
		if (*p != '{') {
			out[n++] = *p++;
			continue;
		}
		const char *end = strchr(p, '}');
		const char *v = !strncmp(p, "{id}", 4) ? "1" : end[-1] == '*' ? "a/b" : "x";
		n += (size_t)snprintf(out + n, cap - n, "%s", v);
		p = end + 1;
	}
	out[n] = 0;
}

/* may method be used on pattern, by the table? (HEAD where GET may) */
static int
table_allows(const ctl_route *rt, size_t n, const char *pattern, const char *method)
{
	const char *m = strcmp(method, "HEAD") ? method : "GET";
	for (size_t i = 0; i < n; i++)
		if (!strcmp(rt[i].path, pattern) && !strcmp(rt[i].method, m))
			return 1;
	return 0;
}

/* the table's rows are well formed: a method we serve, a pattern of
 * literal text and closed parameters ({word*} last), a line for the
 * index exactly when it is an endpoint, no (method, pattern) twice */
static void
check_row(const ctl_route *rt, size_t i)
{
	const ctl_route *r = &rt[i];
	ck_assert_msg(!strcmp(r->method, "GET") || !strcmp(r->method, "POST") ||
			      !strcmp(r->method, "PUT") || !strcmp(r->method, "PATCH"),
		      "%s %s: not a method the table serves", r->method, r->path);
	ck_assert_msg(r->path[0] == '/', "%s: a pattern starts with /", r->path);
	for (const char *p = strchr(r->path, '{'); p; p = strchr(p, '{')) {
		size_t k = strcspn(p, "}/");
		ck_assert_msg(p[k] == '}' && k > 1, "%s: a parameter is {word}", r->path);
		ck_assert_msg(p[k - 1] != '*' || !p[k + 1], "%s: {word*} comes last", r->path);
		p += k;
	}
	int miss = (r->flags & RT_MISS) != 0;
	ck_assert_msg(miss == !r->doc, "%s %s: an endpoint has a line for the index, an RT_MISS "
		      "row none", r->method, r->path);
	ck_assert_msg(!miss || !strcmp(r->path + strlen(r->path) - 2, "*}"),
		      "%s: an RT_MISS row takes the rest of a subtree ({word*})", r->path);
	for (size_t j = 0; j < i; j++)
		ck_assert_msg(strcmp(rt[j].path, r->path) || strcmp(rt[j].method, r->method),
			      "%s %s: two rows", r->method, r->path);
}

/* a whole text file, NUL-terminated (malloc'd) */
static char *
read_text(const char *path)
{
	size_t n;
	uint8_t *b = sl_test_read(path, &n);
	char *t = realloc(b, n + 1);
	ck_assert_ptr_nonnull(t);
	t[n] = 0;
	return t;
}

/* the index's lines, a wrapped line's continuation joined to it by one
 * space (malloc'd, '\n' between lines) */
static char *
index_unwrapped(const char *text)
{
	char *out = malloc(strlen(text) + 1), *q = out;
	for (const char *p = text; *p;) {
		size_t n = strcspn(p, "\n");
		if (*p == ' ' && q > out) { /* a continuation */
			q[-1] = ' ';
			p += strspn(p, " ");
			n = strcspn(p, "\n");
		}
		memcpy(q, p, n);
		q += n;
		*q++ = '\n';
		p += n + (p[n] == '\n');
	}
	*q = 0;
	return out;
}

/* the start of the line after p's */
static const char *
next_line(const char *p)
{
	p += strcspn(p, "\n");
	return *p ? p + 1 : p;
}

/* the line of the index for method and path: its text after both, or NULL */
static const char *
index_line(const char *index, const char *method, const char *path, char *line, size_t cap)
{
	for (const char *p = index; *p; p = next_line(p)) {
		char m[16], u[160];
		int at = 0;
		if (sscanf(p, "%15s %159s %n", m, u, &at) == 2 && at && !strcmp(m, method) &&
		    !strcmp(u, path)) {
			size_t n = strcspn(p + at, "\n");
			snprintf(line, cap, "%.*s", (int)n, p + at);
			return line;
		}
	}
	return NULL;
}

/* GET / and docs/api.md list exactly the table's endpoints; every row
 * answers a method none of its pattern's rows takes with 405 and the
 * pattern's methods in Allow (OPTIONS: 204 with them and OPTIONS), a GET
 * that needs a run a 409 without one, a change a 401 without the token */
START_TEST(route_table)
{
	size_t n;
	const ctl_route *rt = ctl_routes(&n);
	ctl c;
	ctl_reply o;
	ctl_init(&c); /* no run, no --sweeps, no --clusters */
	ctl_handle(&c, "GET", "/", NULL, NULL, 0, 1, &o);
	ck_assert_int_eq(o.status, 200);
	char *index = index_unwrapped(o.text);
	ctl_reply_free(&o);
	char *doc = read_text("docs/api.md");
	int endpoints = 0, *documented = calloc(n, sizeof(int));

	for (size_t i = 0; i < n; i++) {
		const ctl_route *r = &rt[i];
		char path[160], shown[160], want[64], line[400];
		check_row(rt, i);
		sample_path(r->path, path, sizeof(path));
		ctl_route_shown(r->path, shown, sizeof(shown));
		if (r->doc) {
			endpoints++;
			ck_assert_msg(index_line(index, r->method, shown, line, sizeof(line)),
				      "GET / does not list %s %s", r->method, shown);
			ck_assert_msg(!strcmp(line, r->doc), "GET / says %s %s: \"%s\", the table "
				      "\"%s\"", r->method, shown, line, r->doc);
		}
		/* Allow: the methods of the pattern's rows, in the table's order */
		size_t k = 0;
		want[0] = 0;
		for (size_t m = 0; m < sizeof(methods) / sizeof(*methods); m++)
			if (table_allows(rt, n, r->path, methods[m]))
				k += (size_t)snprintf(want + k, sizeof(want) - k, "%s%s",
						      k ? ", " : "", methods[m]);
		for (size_t m = 0; m < sizeof(methods) / sizeof(*methods); m++) {
			if (table_allows(rt, n, r->path, methods[m]))
				continue;
			ctl_handle(&c, methods[m], path, NULL, "{}", 2, 1, &o);
			ck_assert_msg(o.status == 405 && !strcmp(o.allow, want),
				      "%s %s (%s): %d, Allow \"%s\"; want 405, Allow \"%s\"",
				      methods[m], path, r->path, o.status, o.allow, want);
			ctl_reply_free(&o);
		}
		ctl_handle(&c, "OPTIONS", path, NULL, NULL, 0, 1, &o);
		snprintf(line, sizeof(line), "%s, OPTIONS", want);
		ck_assert_int_eq(o.status, 204);
		ck_assert_str_eq(o.allow, line);
		ctl_reply_free(&o);
		/* the row's own method */
		if (strcmp(r->method, "GET")) {
			ctl_handle(&c, r->method, path, NULL, "{}", 2, 0, &o);
			ck_assert_msg(o.status == 401, "%s %s without the token: %d", r->method,
				      path, o.status);
		} else {
			ctl_handle(&c, "GET", path, NULL, NULL, 0, 1, &o);
			ck_assert_msg((o.status == 409) == !!(r->flags & RT_RUN),
				      "GET %s with no run: %d (%s)", path, o.status,
				      r->flags & RT_RUN ? "needs a run" : "needs none");
		}
		ctl_reply_free(&o);
	}
	/* the index lists nothing else */
	int lines = 0;
	for (const char *p = index; *p; p = next_line(p))
		lines += p[0] >= 'A' && p[0] <= 'Z' && strncmp(p, "See ", 4);
	ck_assert_int_eq(lines, endpoints);

	/* docs/api.md: a heading "## METHOD /path" (a query may follow the
	 * path) per endpoint, and none other */
	char shown[160];
	for (const char *p = doc; *p; p = next_line(p)) {
		char m[16], u[160];
		if (strncmp(p, "## ", 3) || sscanf(p + 3, "%15[A-Z] %159[^ \n?]", m, u) != 2 ||
		    u[0] != '/')
			continue;
		size_t i = 0;
		for (; i < n; i++) {
			ctl_route_shown(rt[i].path, shown, sizeof(shown));
			if (rt[i].doc && !strcmp(rt[i].method, m) && !strcmp(shown, u))
				break;
		}
		ck_assert_msg(i < n, "docs/api.md: \"## %s %s\" is no route of the table", m, u);
		documented[i] = 1;
	}
	for (size_t i = 0; i < n; i++) {
		ctl_route_shown(rt[i].path, shown, sizeof(shown));
		ck_assert_msg(documented[i] || !rt[i].doc, "docs/api.md has no \"## %s %s\"",
			      rt[i].method, shown);
	}
	free(documented);
	free(doc);
	free(index);
	ctl_free(&c);
}
END_TEST

static Suite *
control_suite(void)
{
	Suite *s = suite_create("control");
	TCase *tc = tcase_create("handle");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, get_patch_and_errors);
	tcase_add_test(tc, no_run_conflicts);
	tcase_add_test(tc, runs_and_location);
	tcase_add_test(tc, shrink_checkpoint_resume);
	tcase_add_test(tc, event_ring);
	tcase_add_test(tc, token_compare);
	tcase_add_test(tc, first_running_snapshot_has_workers);
	tcase_add_test(tc, change_after_the_end_is_refused);
	tcase_add_test(tc, link_and_server_mid_run);
	tcase_add_test(tc, recover_applies_the_schedule_once);
	tcase_add_test(tc, recover_from_start_keeps_the_schedule_ahead);
	tcase_add_test(tc, cluster_series_reduced);
	tcase_add_test(tc, route_table);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(control_suite)
