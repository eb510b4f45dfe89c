/* serve.c - `stalelab serve`: the long-running daemon. One run at a time
 * trains on its own thread; libmicrohttpd serves the HTTP API (a thread per
 * connection, so a Server-Sent Events stream may block waiting for news);
 * the main thread waits for SIGINT/SIGTERM and shuts down cleanly. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "ckpt.h"
#include "demo.h"
#include "cli.h"
#include "config_json.h"
#include "jsonout.h"
#include "runlog.h"
#include "web.h"

#define BODY_MAX (1u << 20) /* request bodies: 1 MiB */
#define HUB_N 256           /* change/eval events kept for SSE clients */

static const char serve_usage[] =
	"Usage: stalelab serve [OPTIONS]\n"
	"\n"
	"Run the daemon in the foreground: train the default run (or --config)\n"
	"and serve the HTTP API, live events and Prometheus metrics until\n"
	"SIGINT or SIGTERM; a browser at the address gets the dashboard.\n"
	"See docs/api.md and docs/dashboard.md.\n"
	"\n"
	"  -L, --listen ADDR:PORT  HTTP address (default 127.0.0.1:8470; port 0\n"
	"                          picks a free one, printed on stderr)\n"
	"  -c, --config FILE       run object to start with; its missing fields\n"
	"                          take the defaults of docs/formats.md (without\n"
	"                          it: Fashion-MNIST MLP, 4 workers, asgd, mixed\n"
	"                          delays, no stop)\n"
	"  -T, --token TOKEN       require 'Authorization: Bearer TOKEN' on every\n"
	"                          call that changes something\n"
	"  -l, --log FILE          JSON-Lines log of the runs (appended)\n"
	"      --log-format F      jsonl (default) or csv\n"
	"      --device NAME       auto | cpu | ref | cuda (auto: cuda if built, else cpu)\n"
	"      --resume FILE       start from a checkpoint instead of a run object\n"
	"      --checkpoint-on-exit FILE\n"
	"                          write a checkpoint on SIGINT/SIGTERM\n"
	"      --checkpoint-dir DIR  where POST /api/v1/checkpoint writes without\n"
	"                          a path (default: the current directory)\n"
	"      --demo [FILE]       an unattended demonstration: scenes with\n"
	"                          captions (built in, or {\"run\": ..., \"scenes\": [...]})\n"
	"  -q, --quiet             no per-evaluation lines on stderr\n"
	"  -h, --help              this text\n"
	"\n"
	"Exit status: 0 after a clean shutdown, 1 runtime failure, 2 bad usage.\n";

/* events for SSE clients: a ring of JSON texts with sequence numbers */
typedef struct hub {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t seq; /* number of events ever published */
	char *ev[HUB_N];
	char name[HUB_N][16];
	int closing;
} hub;

typedef struct server {
	pthread_mutex_t mu; /* the current run, its data and thread */
	run *r;
	dataset_pair *data; /* read-only while runs use it */
	char data_spec[256];
	uint64_t data_seed;
	pthread_t th;
	int th_live;
	int run_id;
	runlog log;
	int have_log;
	pthread_mutex_t log_mu;
	const char *token;
	const char *ckpt_dir;
	const char *ckpt_on_exit;
	int quiet;
	hub hub;
	struct MHD_Daemon *mhd;
	demo demo;
	pthread_t demo_th;
	int demo_live;
	json_t *past; /* earlier runs: summaries and series, for comparisons */
	const char *caption; /* the demo scene showing (in demo), for snapshots */
} server;

#define PAST_MAX 32 /* earlier runs kept (oldest dropped first) */

/* ---- events ---------------------------------------------------------- */

static void
hub_publish(hub *h, const char *name, json_t *data)
{
	char *txt = jsonout_dumps(data);
	if (!txt)
		return;
	pthread_mutex_lock(&h->mu);
	int slot = (int)(h->seq % HUB_N);
	free(h->ev[slot]);
	h->ev[slot] = txt;
	snprintf(h->name[slot], sizeof(h->name[slot]), "%s", name);
	h->seq++;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

static void
log_record(server *s, json_t *rec)
{
	if (!s->have_log)
		return;
	pthread_mutex_lock(&s->log_mu);
	runlog_write(&s->log, rec);
	pthread_mutex_unlock(&s->log_mu);
}

static void
on_eval(void *ud, const run_eval *e)
{
	server *s = ud;
	json_t *r = api_log_record(e);
	json_object_set_new(r, "run", json_integer(s->run_id));
	log_record(s, r);
	hub_publish(&s->hub, e->final ? "end" : "eval", r);
	if (!s->quiet && !e->final)
		fprintf(stderr, "stalelab serve: v %llu epoch %.2f test_acc %.4f staleness %.2f %.0f samples/s\n",
			(unsigned long long)e->v, e->epoch, e->test_acc,
			stale_mean(&e->stale), e->samples_per_s);
	json_decref(r);
}

static void
on_change(void *ud, double t, uint64_t v, const run_cmd *c)
{
	server *s = ud;
	json_t *r = api_change_record(t, v, c);
	json_object_set_new(r, "run", json_integer(s->run_id));
	log_record(s, r);
	hub_publish(&s->hub, "change", r);
	json_decref(r);
}

/* where a checkpoint named by a client goes: relative names inside
 * --checkpoint-dir, no ".." components */
static int
ckpt_path(const server *s, const char *name, char *out, size_t cap, char *err)
{
	size_t n = strlen(name);
	if (!n || !strcmp(name, "..") || !strncmp(name, "../", 3) ||
	    strstr(name, "/../") || (n >= 3 && !strcmp(name + n - 3, "/..")))
		return sl_fail(err, SL_EINVAL, "path: a file name without '..' components");
	if (name[0] == '/')
		snprintf(out, cap, "%s", name);
	else
		snprintf(out, cap, "%s/%s", s->ckpt_dir ? s->ckpt_dir : ".", name);
	return 0;
}

static void
on_checkpoint(void *ud, const run_cmd *c, const uint8_t *buf, size_t len)
{
	server *s = ud;
	char err[SL_ERR_LEN] = "out of memory", path[4096];
	if (ckpt_path(s, c->path, path, sizeof(path), err) == 0 && buf &&
	    ckpt_write_buf(path, buf, len, err) == 0) {
		json_t *ev = json_pack("{s:s,s:s,s:I,s:i}", "event", "checkpoint", "path",
				       path, "bytes", (json_int_t)len, "run", s->run_id);
		log_record(s, ev);
		hub_publish(&s->hub, "checkpoint", ev);
		json_decref(ev);
	} else {
		fprintf(stderr, "stalelab serve: checkpoint %s failed: %s\n", c->path, err);
	}
}

/* ---- runs -------------------------------------------------------------- */

static void *
run_thread(void *p)
{
	run *r = p;
	run_exec(r);
	return NULL;
}

/* a run's summary, with its evaluation series when series is set */
static json_t *
run_summary(server *s, int id, int series)
{
	run_snapshot *snap = run_snapshot_get(s->r);
	json_t *o = json_object();
	json_object_set_new(o, "run", json_integer(id));
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
		int n = ev ? run_series(s->r, 0, ev, cap) : 0;
		json_t *arr = json_array();
		for (int i = 0; i < n; i++)
			json_array_append_new(arr, api_eval_json(&ev[i]));
		free(ev);
		json_object_set_new(o, "series", arr);
	}
	return o;
}

/* stop and reap the current run, keeping its summary (s->mu held) */
static void
stop_current(server *s)
{
	if (!s->r)
		return;
	run_stop(s->r);
	if (s->th_live)
		pthread_join(s->th, NULL);
	s->th_live = 0;
	if (!s->past)
		s->past = json_array();
	json_array_append_new(s->past, run_summary(s, s->run_id, 1));
	if (json_array_size(s->past) > PAST_MAX)
		json_array_remove(s->past, 0);
	run_free(s->r);
	s->r = NULL;
}

/* start cfg (+ schedule) as the current run (s->mu held). The new run is
 * built first: if that fails (bad model, missing data) the current run goes
 * on untouched. err names a bad field. */
static int
start_run(server *s, const run_config *cfg, const run_sched *sched, int n_sched,
	  const uint8_t *ckpt, size_t ckpt_len, char *err)
{
	int rc;
	dataset_pair *dp = s->data;
	int new_data = !dp || strcmp(s->data_spec, cfg->dataset) ||
		       s->data_seed != cfg->seed;
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
			    .checkpoint = on_checkpoint, .ud = s};
	run *r = NULL;
	if ((rc = run_new(cfg, dp, sched, n_sched, &cb, &r, err)) < 0 ||
	    (ckpt && (rc = run_restore(r, ckpt, ckpt_len, err)) < 0)) {
		if (rc < 0 && ckpt && r)
			run_free(r);
		if (new_data) {
			ds_pair_free(dp);
			free(dp);
		}
		return rc;
	}
	stop_current(s); /* the old run no longer reads its data */
	if (new_data) {
		if (s->data) {
			ds_pair_free(s->data);
			free(s->data);
		}
		s->data = dp;
		snprintf(s->data_spec, sizeof(s->data_spec), "%s", cfg->dataset);
		s->data_seed = cfg->seed;
	}
	s->r = r;
	s->run_id++;
	json_t *first = config_to_json(cfg);
	run_snapshot *s0 = run_snapshot_get(r);
	json_object_set_new(first, "device", json_string(s0->device));
	run_snapshot_put(s0);
	json_object_set_new(first, "t", json_real(0));
	json_object_set_new(first, "v", json_integer(0));
	json_object_set_new(first, "run", json_integer(s->run_id));
	if (ckpt)
		json_object_set_new(first, "resumed", json_true());
	log_record(s, first);
	hub_publish(&s->hub, "run", first);
	json_decref(first);
	if (pthread_create(&s->th, NULL, run_thread, s->r)) {
		run_free(s->r);
		s->r = NULL;
		return sl_fail(err, SL_ENOMEM, "cannot start the run thread");
	}
	s->th_live = 1;
	return 0;
}

/* wait up to seconds unless the daemon is closing; 1 if closing */
static int
hub_sleep(hub *h, double seconds)
{
	struct timespec ts;
	sl_deadline(seconds, &ts);
	pthread_mutex_lock(&h->mu);
	while (!h->closing &&
	       pthread_cond_timedwait(&h->cv, &h->mu, &ts) != ETIMEDOUT)
		;
	int closing = h->closing;
	pthread_mutex_unlock(&h->mu);
	return closing;
}

/* apply one scene's changes to the current run (s->mu held) */
static void
demo_apply(server *s, const demo_scene *sc, char *err)
{
	run_snapshot *snap = run_snapshot_get(s->r);
	run_config cur = snap->cfg;
	run_snapshot_put(snap);
	run_cmd c;
	if (sc->set && cmd_from_json(sc->set, -1, &cur, "set", &c, err) == 0) {
		snprintf(c.origin, sizeof(c.origin), "demo");
		run_command(s->r, &c, err);
		if (c.fields & CMD_WORKERS)
			cur.workers = c.workers;
	}
	size_t k;
	json_t *w;
	json_array_foreach(sc->workers, k, w) {
		int id = (int)json_integer_value(json_object_get(w, "id"));
		if (cmd_from_json(json_object_get(w, "set"), id, &cur, "set", &c, err) == 0) {
			snprintf(c.origin, sizeof(c.origin), "demo");
			run_command(s->r, &c, err);
		}
	}
}

static void *
demo_main(void *p)
{
	server *s = p;
	char err[SL_ERR_LEN];
	for (int loop = 0;; loop++) {
		pthread_mutex_lock(&s->mu);
		int rc = start_run(s, &s->demo.base, NULL, 0, NULL, 0, err);
		pthread_mutex_unlock(&s->mu);
		if (rc < 0) {
			fprintf(stderr, "stalelab serve: demo: %s\n", err);
			return NULL;
		}
		for (int i = 0; i < s->demo.n; i++) {
			const demo_scene *sc = &s->demo.scene[i];
			pthread_mutex_lock(&s->mu);
			if (!s->r) {
				pthread_mutex_unlock(&s->mu);
				return NULL;
			}
			demo_apply(s, sc, err);
			s->caption = sc->caption;
			run_snapshot *snap = run_snapshot_get(s->r);
			json_t *ev = json_pack("{s:s,s:s,s:i,s:i,s:f,s:I,s:i}", "event", "caption",
					       "caption", sc->caption, "scene", i, "loop", loop,
					       "t", snap->t, "v", (json_int_t)snap->v, "run", s->run_id);
			run_snapshot_put(snap);
			pthread_mutex_unlock(&s->mu);
			log_record(s, ev);
			hub_publish(&s->hub, "caption", ev);
			json_decref(ev);
			if (!s->quiet)
				fprintf(stderr, "stalelab serve: demo: %s\n", sc->caption);
			if (hub_sleep(&s->hub, sc->seconds))
				return NULL;
		}
	}
}

/* The default run of `stalelab serve`: something worth watching. */
static void
serve_defaults(run_config *c)
{
	config_defaults(c);
	c->workers = 4;
	c->delay = (delay_cfg){.dist = DELAY_EXP, .mean_ms = 10};
	c->n_overrides = 2;
	c->overrides[0] = (worker_override){
		.id = 2, .has_delay = 1,
		.delay = {.dist = DELAY_LOGNORMAL, .mean_ms = 20, .sigma = 1}};
	c->overrides[1] = (worker_override){
		.id = 3, .has_delay = 1,
		.delay = {.dist = DELAY_CONST, .mean_ms = 60}};
}

/* ---- HTTP plumbing ------------------------------------------------------ */

typedef struct req {
	char *body;
	size_t len;
	int too_big;
} req;

static enum MHD_Result
send_text(struct MHD_Connection *c, unsigned status, const char *type,
	  const char *text, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		len, (void *)text, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result
send_json(struct MHD_Connection *c, unsigned status, json_t *j)
{
	char *txt = jsonout_dumps(j);
	json_decref(j);
	if (!txt)
		return MHD_NO;
	size_t n = strlen(txt);
	char *full = realloc(txt, n + 2);
	if (!full) {
		free(txt);
		return MHD_NO;
	}
	full[n] = '\n';
	full[n + 1] = 0;
	enum MHD_Result ret = send_text(c, status, "application/json", full, n + 1);
	free(full);
	return ret;
}

static enum MHD_Result
send_error(struct MHD_Connection *c, unsigned status, const char *code,
	   const char *msg)
{
	return send_json(c, status,
			 json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg));
}

static int
authorized(server *s, struct MHD_Connection *c)
{
	if (!s->token)
		return 1;
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						    MHD_HTTP_HEADER_AUTHORIZATION);
	if (!h || strncmp(h, "Bearer ", 7))
		return 0;
	const char *t = h + 7;
	size_t a = strlen(t), b = strlen(s->token);
	unsigned diff = (unsigned)(a != b);
	for (size_t i = 0; i < a && i < b; i++)
		diff |= (unsigned)(t[i] ^ s->token[i]);
	return diff == 0;
}

/* parse the request body as a JSON object; on failure the error response
 * has been queued and *ret is set */
static json_t *
body_json(struct MHD_Connection *c, const req *q, enum MHD_Result *ret)
{
	json_error_t je;
	json_t *j = json_loadb(q->body ? q->body : "", q->len, JSON_REJECT_DUPLICATES, &je);
	if (!j) {
		char msg[300];
		snprintf(msg, sizeof(msg), "body: line %d, column %d: %s", je.line,
			 je.column, je.text);
		*ret = send_error(c, 400, "bad_json", msg);
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		*ret = send_error(c, 400, "bad_json", "body: expected a JSON object");
		return NULL;
	}
	return j;
}

/* ---- SSE ----------------------------------------------------------------- */

typedef struct sse {
	server *s;
	double period;    /* seconds between snapshots */
	double next_snap; /* sl_now() time of the next snapshot */
	uint64_t seq;     /* hub events delivered */
	char *buf;        /* pending output */
	size_t len, off;
	uint64_t id;
} sse;

static void
sse_put(sse *e, const char *name, const char *data)
{
	size_t need = strlen(name) + strlen(data) + 64;
	char *b = realloc(e->buf, e->len + need);
	if (!b)
		return;
	e->buf = b;
	e->len += (size_t)snprintf(e->buf + e->len, need, "id: %llu\nevent: %s\ndata: %s\n\n",
				   (unsigned long long)++e->id, name, data);
}

static json_t *
snapshot_event(server *s)
{
	json_t *o = NULL;
	pthread_mutex_lock(&s->mu);
	if (s->r) {
		run_snapshot *snap = run_snapshot_get(s->r);
		o = api_status_json(snap);
		json_object_set_new(o, "staleness", api_staleness_json(snap));
		json_object_set_new(o, "run", json_integer(s->run_id));
		if (s->caption)
			json_object_set_new(o, "caption", json_string(s->caption));
		run_snapshot_put(snap);
	}
	pthread_mutex_unlock(&s->mu);
	return o;
}

static ssize_t
sse_read(void *cls, uint64_t pos, char *out, size_t max)
{
	(void)pos;
	sse *e = cls;
	server *s = e->s;
	while (e->off >= e->len) {
		e->len = e->off = 0;
		hub *h = &s->hub;
		pthread_mutex_lock(&h->mu);
		for (;;) {
			if (h->closing) {
				pthread_mutex_unlock(&h->mu);
				return MHD_CONTENT_READER_END_OF_STREAM;
			}
			if (h->seq > e->seq || sl_now() >= e->next_snap)
				break;
			struct timespec ts;
			sl_deadline(e->next_snap - sl_now(), &ts);
			pthread_cond_timedwait(&h->cv, &h->mu, &ts);
		}
		/* events first, in order; a client that fell behind the ring
		 * skips what was overwritten */
		if (h->seq - e->seq > HUB_N)
			e->seq = h->seq - HUB_N;
		while (e->seq < h->seq) {
			int slot = (int)(e->seq % HUB_N);
			sse_put(e, h->name[slot], h->ev[slot]);
			e->seq++;
		}
		pthread_mutex_unlock(&h->mu);
		if (sl_now() >= e->next_snap) {
			e->next_snap = sl_now() + e->period;
			json_t *o = snapshot_event(s);
			if (o) {
				char *txt = jsonout_dumps(o);
				if (txt)
					sse_put(e, "snapshot", txt);
				free(txt);
				json_decref(o);
			}
		}
	}
	size_t n = e->len - e->off;
	if (n > max)
		n = max;
	memcpy(out, e->buf + e->off, n);
	e->off += n;
	return (ssize_t)n;
}

static void
sse_free(void *cls)
{
	sse *e = cls;
	free(e->buf);
	free(e);
}

static enum MHD_Result
handle_events(server *s, struct MHD_Connection *c)
{
	double hz = 4;
	const char *q = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "hz");
	if (q && (cli_double(q, &hz) < 0 || !(hz >= 0.1 && hz <= 50)))
		return send_error(c, 400, "bad_field", "hz: expected a number in [0.1, 50]");
	sse *e = calloc(1, sizeof(*e));
	if (!e)
		return MHD_NO;
	e->s = s;
	e->period = 1.0 / hz;
	e->next_snap = 0; /* a snapshot at once */
	pthread_mutex_lock(&s->hub.mu);
	e->seq = s->hub.seq; /* only what happens from now on */
	pthread_mutex_unlock(&s->hub.mu);
	struct MHD_Response *r = MHD_create_response_from_callback(
		MHD_SIZE_UNKNOWN, 16384, sse_read, e, sse_free);
	if (!r) {
		sse_free(e);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "text/event-stream");
	MHD_add_response_header(r, "Cache-Control", "no-store");
	enum MHD_Result ret = MHD_queue_response(c, 200, r);
	MHD_destroy_response(r);
	return ret;
}

/* ---- handlers -------------------------------------------------------------- */

static const char index_text[] =
	"stalelab " SL_VERSION " - asynchronous data-parallel training test-bed\n"
	"\n"
	"GET   /api/v1/status            run config, state, version, workers\n"
	"GET   /api/v1/metrics?since=V   evaluation series\n"
	"GET   /api/v1/staleness         histograms overall, sliding, per worker\n"
	"GET   /api/v1/events?hz=4       Server-Sent Events\n"
	"GET   /api/v1/runs              this and earlier runs, with their series\n"
	"POST  /api/v1/run               start a new run from a run object, or\n"
	"                                {\"resume\": path} from a checkpoint\n"
	"PATCH /api/v1/run               change rule, rule_params, lr, batch, paused, stop\n"
	"PUT   /api/v1/workers           {\"count\": N}\n"
	"PATCH /api/v1/workers/{id}      {\"delay\": {...}, \"spb_depth\": k, \"paused\": b}\n"
	"POST  /api/v1/checkpoint        {\"path\": file} (optional): write a checkpoint\n"
	"GET   /metrics                  Prometheus text format\n"
	"\n"
	"See docs/api.md.\n";

/* queue a change to the current run: 409 when there is none running */
static enum MHD_Result
command(server *s, struct MHD_Connection *c, json_t *set, int worker,
	const char *path)
{
	enum MHD_Result ret;
	char err[SL_ERR_LEN];
	pthread_mutex_lock(&s->mu);
	if (!s->r) {
		pthread_mutex_unlock(&s->mu);
		return send_error(c, 409, "no_run", "no run is active");
	}
	run_snapshot *snap = run_snapshot_get(s->r);
	run_config cur = snap->cfg;
	int finished = snap->state == RUN_FINISHED || snap->state == RUN_FAILED;
	run_snapshot_put(snap);
	if (finished) {
		pthread_mutex_unlock(&s->mu);
		return send_error(c, 409, "finished", "the run has finished; POST /api/v1/run starts a new one");
	}
	if (worker >= cur.workers) {
		pthread_mutex_unlock(&s->mu);
		snprintf(err, sizeof(err), "worker %d: the run has %d workers", worker,
			 cur.workers);
		return send_error(c, 404, "no_worker", err);
	}
	run_cmd cmd;
	if (cmd_from_json(set, worker, &cur, path, &cmd, err) < 0) {
		pthread_mutex_unlock(&s->mu);
		return send_error(c, 400, "bad_field", err);
	}
	snprintf(cmd.origin, sizeof(cmd.origin), "api");
	int rc = run_command(s->r, &cmd, err);
	pthread_mutex_unlock(&s->mu);
	if (rc < 0)
		return send_error(c, 400, "bad_field", err);
	json_t *o = json_pack("{s:b}", "accepted", 1);
	json_object_set_new(o, "change", cmd_to_json(&cmd));
	ret = send_json(c, 202, o);
	return ret;
}

static enum MHD_Result
handle_get(server *s, struct MHD_Connection *c, const char *url)
{
	if (!strcmp(url, "/"))
		return send_text(c, 200, "text/plain; charset=utf-8", index_text,
				 sizeof(index_text) - 1);
	pthread_mutex_lock(&s->mu);
	run_snapshot *snap = s->r ? run_snapshot_get(s->r) : NULL;
	pthread_mutex_unlock(&s->mu);
	if (!snap)
		return send_error(c, 409, "no_run", "no run is active");
	enum MHD_Result ret;
	if (!strcmp(url, "/api/v1/status")) {
		json_t *o = api_status_json(snap);
		json_object_set_new(o, "run", json_integer(s->run_id));
		ret = send_json(c, 200, o);
	} else if (!strcmp(url, "/api/v1/staleness")) {
		ret = send_json(c, 200, api_staleness_json(snap));
	} else if (!strcmp(url, "/metrics")) {
		char *txt = api_prometheus(snap);
		ret = txt ? send_text(c, 200, "text/plain; version=0.0.4; charset=utf-8",
				      txt, strlen(txt))
			  : MHD_NO;
		free(txt);
	} else {
		/* /api/v1/metrics?since=V */
		unsigned long long since = 0;
		const char *q = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "since");
		if (q && cli_u64(q, &since) < 0) {
			run_snapshot_put(snap);
			return send_error(c, 400, "bad_field", "since: expected a version (integer >= 0)");
		}
		int cap = 4096;
		run_eval *ev = malloc(sizeof(run_eval) * (size_t)cap);
		int n = 0;
		pthread_mutex_lock(&s->mu);
		if (ev && s->r)
			n = run_series(s->r, since, ev, cap);
		pthread_mutex_unlock(&s->mu);
		json_t *arr = json_array();
		for (int i = 0; i < n; i++)
			json_array_append_new(arr, api_eval_json(&ev[i]));
		free(ev);
		ret = send_json(c, 200, json_pack("{s:I,s:I,s:o}", "version", (json_int_t)snap->v,
						  "since", (json_int_t)since, "series", arr));
	}
	run_snapshot_put(snap);
	return ret;
}

/* GET /api/v1/runs: earlier runs (with their series) and the current one */
static enum MHD_Result
handle_runs(server *s, struct MHD_Connection *c)
{
	pthread_mutex_lock(&s->mu);
	json_t *arr = s->past ? json_deep_copy(s->past) : json_array();
	if (s->r)
		json_array_append_new(arr, run_summary(s, s->run_id, 1));
	pthread_mutex_unlock(&s->mu);
	return send_json(c, 200, json_pack("{s:o}", "runs", arr));
}

static enum MHD_Result
handle_post_run(server *s, struct MHD_Connection *c, json_t *body)
{
	char err[SL_ERR_LEN];
	run_config cfg;
	run_sched *sched = NULL;
	int n_sched = 0, rc;
	uint8_t *ckpt = NULL;
	size_t ckpt_len = 0;
	json_t *resume = json_object_get(body, "resume");
	if (resume) {
		if (!json_is_string(resume) || json_object_size(body) != 1)
			return send_error(c, 400, "bad_field",
					  "resume: expected {\"resume\": \"path\"} alone");
		if (ckpt_read(json_string_value(resume), &ckpt, &ckpt_len, &cfg, err) < 0)
			return send_error(c, 400, "bad_field", err);
	} else {
		config_defaults(&cfg);
		if (config_apply_json(body, &cfg, err) < 0)
			return send_error(c, 400, "bad_field", err);
		if (sched_from_json(json_object_get(body, "schedule"), &cfg, &sched,
				    &n_sched, err) < 0)
			return send_error(c, 400, "bad_field", err);
	}
	pthread_mutex_lock(&s->mu);
	rc = start_run(s, &cfg, sched, n_sched, ckpt, ckpt_len, err);
	run_snapshot *snap = rc == 0 ? run_snapshot_get(s->r) : NULL;
	pthread_mutex_unlock(&s->mu);
	free(sched);
	free(ckpt);
	if (rc < 0)
		return send_error(c, rc == -SL_ENOMEM ? 500 : 400,
				  rc == -SL_ENOMEM ? "internal" : "bad_field", err);
	json_t *o = api_status_json(snap);
	json_object_set_new(o, "run", json_integer(s->run_id));
	run_snapshot_put(snap);
	return send_json(c, 201, o);
}

static enum MHD_Result
handle_checkpoint(server *s, struct MHD_Connection *c, json_t *body)
{
	char err[SL_ERR_LEN], path[4096];
	json_t *p = json_object_get(body, "path");
	if (json_object_size(body) > (p ? 1u : 0u))
		return send_error(c, 400, "bad_field", "body: only \"path\" may be set here");
	if (p && (!json_is_string(p) || !*json_string_value(p) ||
		  strlen(json_string_value(p)) >= sizeof(path) - 64))
		return send_error(c, 400, "bad_field", "path: expected a file name");
	pthread_mutex_lock(&s->mu);
	if (!s->r) {
		pthread_mutex_unlock(&s->mu);
		return send_error(c, 409, "no_run", "no run is active");
	}
	if (p && ckpt_path(s, json_string_value(p), path, sizeof(path), err) < 0) {
		pthread_mutex_unlock(&s->mu);
		return send_error(c, 400, "bad_field", err);
	}
	/* the version named (reply, default file name) is the one saved */
	uint8_t *buf;
	size_t bytes = 0;
	uint64_t v = 0;
	int rc = ckpt_take(s->r, &buf, &bytes, &v, err);
	if (rc == 0) {
		if (!p)
			snprintf(path, sizeof(path), "%s/stalelab-run%d-v%llu.ckpt",
				 s->ckpt_dir ? s->ckpt_dir : ".", s->run_id,
				 (unsigned long long)v);
		rc = ckpt_write_buf(path, buf, bytes, err);
		free(buf);
	}
	pthread_mutex_unlock(&s->mu);
	if (rc < 0)
		return send_error(c, rc == -SL_EIO ? 400 : 500,
				  rc == -SL_EIO ? "bad_field" : "internal", err);
	return send_json(c, 201, json_pack("{s:s,s:I,s:I}", "path", path, "version",
					   (json_int_t)v, "bytes", (json_int_t)bytes));
}

typedef enum { R_INDEX, R_STATUS, R_METRICS, R_STALENESS, R_EVENTS, R_RUN,
	       R_WORKERS, R_WORKER, R_PROM, R_CKPT, R_RUNS, R_SCHEMA, R_NONE } route;

static route
match(const char *url, int *id)
{
	static const struct {
		const char *path;
		route r;
	} table[] = {
		{"/", R_INDEX}, {"/api/v1/status", R_STATUS},
		{"/api/v1/metrics", R_METRICS}, {"/api/v1/staleness", R_STALENESS},
		{"/api/v1/events", R_EVENTS}, {"/api/v1/run", R_RUN},
		{"/api/v1/workers", R_WORKERS}, {"/metrics", R_PROM},
		{"/api/v1/checkpoint", R_CKPT}, {"/api/v1/runs", R_RUNS},
		{"/api/v1/schema", R_SCHEMA},
	};
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (!strcmp(url, table[i].path))
			return table[i].r;
	const char *pre = "/api/v1/workers/";
	if (!strncmp(url, pre, strlen(pre))) {
		unsigned long long v;
		if (cli_u64(url + strlen(pre), &v) == 0 && v < 1000000) {
			*id = (int)v;
			return R_WORKER;
		}
	}
	return R_NONE;
}

static enum MHD_Result
not_allowed(struct MHD_Connection *c, const char *allow)
{
	char msg[96];
	snprintf(msg, sizeof(msg), "method not allowed here (allowed: %s)", allow);
	json_t *j = json_pack("{s:{s:s,s:s}}", "error", "code", "method", "message", msg);
	char *txt = jsonout_dumps(j);
	json_decref(j);
	if (!txt)
		return MHD_NO;
	struct MHD_Response *r = MHD_create_response_from_buffer(
		strlen(txt), txt, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(r, "Content-Type", "application/json");
	MHD_add_response_header(r, "Allow", allow);
	enum MHD_Result ret = MHD_queue_response(c, 405, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result
dispatch(server *s, struct MHD_Connection *c, const char *url,
	 const char *method, req *q)
{
	int id = -1;
	route rt = match(url, &id);
	int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
	web_reply w; /* the dashboard: GET / from a browser, /ui/... */
	if (get && web_find(url, MHD_lookup_connection_value(c, MHD_HEADER_KIND,
			    MHD_HTTP_HEADER_ACCEPT), &w))
		return send_text(c, w.status, w.type, (const char *)w.data, w.len);
	if (rt == R_NONE)
		return send_error(c, 404, "not_found", "no such endpoint (GET / lists them)");
	switch (rt) {
	case R_INDEX: case R_STATUS: case R_METRICS: case R_STALENESS: case R_PROM:
		return get ? handle_get(s, c, url) : not_allowed(c, "GET");
	case R_EVENTS:
		return get ? handle_events(s, c) : not_allowed(c, "GET");
	case R_RUNS:
		return get ? handle_runs(s, c) : not_allowed(c, "GET");
	case R_SCHEMA:
		return get ? send_json(c, 200, config_schema_json()) : not_allowed(c, "GET");
	default:
		break;
	}
	const char *allow = rt == R_RUN ? "POST, PATCH" : rt == R_WORKERS ? "PUT"
			    : rt == R_CKPT ? "POST" : "PATCH";
	int ok = (rt == R_RUN && (!strcmp(method, "POST") || !strcmp(method, "PATCH"))) ||
		 (rt == R_CKPT && !strcmp(method, "POST")) ||
		 (rt == R_WORKERS && !strcmp(method, "PUT")) ||
		 (rt == R_WORKER && !strcmp(method, "PATCH"));
	if (!ok)
		return not_allowed(c, allow);
	if (!authorized(s, c))
		return send_error(c, 401, "unauthorized",
				  "this daemon needs 'Authorization: Bearer TOKEN' for changes");
	if (q->too_big)
		return send_error(c, 413, "too_large", "request body over 1 MiB");
	enum MHD_Result ret = MHD_NO;
	json_t *body = body_json(c, q, &ret);
	if (!body)
		return ret;
	if (rt == R_CKPT) {
		ret = handle_checkpoint(s, c, body);
	} else if (rt == R_RUN && !strcmp(method, "POST")) {
		ret = handle_post_run(s, c, body);
	} else if (rt == R_RUN) {
		ret = command(s, c, body, -1, "");
	} else if (rt == R_WORKERS) {
		json_t *n = json_object_get(body, "count");
		if (json_object_size(body) != 1 || !n) {
			ret = send_error(c, 400, "bad_field",
					 json_object_size(body) && !n ? "body: only \"count\" may be set here"
								       : "count: missing");
		} else {
			json_t *set = json_pack("{s:O}", "workers", n);
			ret = command(s, c, set, -1, "");
			json_decref(set);
		}
	} else {
		ret = command(s, c, body, id, "");
	}
	json_decref(body);
	return ret;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url,
	   const char *method, const char *version, const char *upload,
	   size_t *upload_size, void **con_cls)
{
	(void)version;
	server *s = cls;
	req *q = *con_cls;
	if (!q) {
		q = calloc(1, sizeof(*q));
		if (!q)
			return MHD_NO;
		*con_cls = q;
		return MHD_YES;
	}
	if (*upload_size) {
		if (!q->too_big && q->len + *upload_size <= BODY_MAX) {
			char *b = realloc(q->body, q->len + *upload_size + 1);
			if (!b)
				return MHD_NO;
			q->body = b;
			memcpy(q->body + q->len, upload, *upload_size);
			q->len += *upload_size;
			q->body[q->len] = 0;
		} else {
			q->too_big = 1;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	return dispatch(s, c, url, method, q);
}

static void
on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
	     enum MHD_RequestTerminationCode toe)
{
	(void)cls, (void)c, (void)toe;
	req *q = *con_cls;
	if (q) {
		free(q->body);
		free(q);
		*con_cls = NULL;
	}
}

/* "127.0.0.1:8470" -> sockaddr; 0 or -1 */
static int
parse_listen(const char *spec, struct sockaddr_in *sa)
{
	char host[64];
	const char *colon = strrchr(spec, ':');
	if (!colon || (size_t)(colon - spec) >= sizeof(host))
		return -1;
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = 0;
	unsigned long long port;
	if (cli_u64(colon + 1, &port) < 0 || port > 65535)
		return -1;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	if (!strcmp(host, "localhost"))
		snprintf(host, sizeof(host), "127.0.0.1");
	if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		return -1;
	return 0;
}

int
cmd_serve(int argc, char **argv)
{
	static const struct option opts[] = {
		{"listen", required_argument, NULL, 'L'},
		{"config", required_argument, NULL, 'c'},
		{"token", required_argument, NULL, 'T'},
		{"log", required_argument, NULL, 'l'},
		{"device", required_argument, NULL, 'D'},
		{"checkpoint-on-exit", required_argument, NULL, 'X'},
		{"checkpoint-dir", required_argument, NULL, 'K'},
		{"resume", required_argument, NULL, 'R'},
		{"log-format", required_argument, NULL, 'F'},
		{"demo", no_argument, NULL, 'M'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *listen_spec = "127.0.0.1:8470", *config_path = NULL,
		   *log_path = NULL, *device = NULL, *resume_path = NULL,
		   *log_format = "jsonl";
	server *s = calloc(1, sizeof(*s));
	int opt, code = 1, want_demo = 0;
	const char *demo_path = NULL;
	char err[SL_ERR_LEN];
	if (!s)
		return 1;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "L:c:T:l:D:X:K:R:F:Mqh", opts, NULL)) != -1) {
		switch (opt) {
		case 'L': listen_spec = optarg; break;
		case 'c': config_path = optarg; break;
		case 'T': s->token = optarg; break;
		case 'l': log_path = optarg; break;
		case 'D': device = optarg; break;
		case 'X': s->ckpt_on_exit = optarg; break;
		case 'K': s->ckpt_dir = optarg; break;
		case 'R': resume_path = optarg; break;
		case 'F': log_format = optarg; break;
		case 'M': want_demo = 1; break;
		case 'q': s->quiet = 1; break;
		case 'h': fputs(serve_usage, stdout); free(s); return 0;
		default: fprintf(stderr, "Try 'stalelab serve --help'.\n"); free(s); return 2;
		}
	}
	if (want_demo && optind < argc)
		demo_path = argv[optind++]; /* --demo FILE */
	if (optind < argc) {
		fprintf(stderr, "stalelab serve: unexpected argument '%s'\n", argv[optind]);
		free(s);
		return 2;
	}
	if (want_demo && (config_path || resume_path)) {
		fprintf(stderr, "stalelab serve: --demo runs its own scenes; drop --config/--resume\n");
		free(s);
		return 2;
	}
	if (want_demo) {
		int drc;
		if (demo_path) {
			json_error_t je;
			json_t *dj = json_load_file(demo_path, JSON_REJECT_DUPLICATES, &je);
			if (!dj) {
				fprintf(stderr, "stalelab serve: %s: line %d, column %d: %s\n",
					demo_path, je.line, je.column, je.text);
				free(s);
				return 2;
			}
			drc = demo_parse(dj, &s->demo, err);
			json_decref(dj);
		} else {
			drc = demo_builtin(&s->demo, err);
		}
		if (drc < 0) {
			fprintf(stderr, "stalelab serve: %s%s%s\n", demo_path ? demo_path : "",
				demo_path ? ": " : "", err);
			free(s);
			return 2;
		}
	}
	struct sockaddr_in sa;
	if (parse_listen(listen_spec, &sa) < 0) {
		fprintf(stderr, "stalelab serve: --listen: expected IPv4-ADDRESS:PORT, got \"%s\"\n",
			listen_spec);
		free(s);
		return 2;
	}
	if (s->token && !*s->token) {
		fprintf(stderr, "stalelab serve: --token: must not be empty\n");
		free(s);
		return 2;
	}
	run_config cfg;
	serve_defaults(&cfg);
	json_t *conf = NULL;
	if (config_path) {
		json_error_t je;
		conf = json_load_file(config_path, JSON_REJECT_DUPLICATES, &je);
		if (!conf) {
			fprintf(stderr, "stalelab serve: %s: line %d, column %d: %s\n",
				config_path, je.line, je.column, je.text);
			free(s);
			return 2;
		}
		config_defaults(&cfg);
		if (config_apply_json(conf, &cfg, err) < 0) {
			fprintf(stderr, "stalelab serve: %s: %s\n", config_path, err);
			json_decref(conf);
			free(s);
			return 2;
		}
	}
	if (device) {
		json_t *d = json_pack("{s:s}", "device", device);
		int rc = config_apply_json(d, &cfg, err);
		json_decref(d);
		if (rc < 0) {
			fprintf(stderr, "stalelab serve: --device: %s\n", err);
			json_decref(conf);
			free(s);
			return 2;
		}
	}
	run_sched *sched = NULL;
	int n_sched = 0;
	if (conf && sched_from_json(json_object_get(conf, "schedule"), &cfg, &sched,
				    &n_sched, err) < 0) {
		fprintf(stderr, "stalelab serve: %s: %s\n", config_path, err);
		json_decref(conf);
		free(s);
		return 2;
	}
	json_decref(conf);
	if (sa.sin_addr.s_addr != htonl(INADDR_LOOPBACK) && !s->token)
		fprintf(stderr, "stalelab serve: warning: listening on %s without --token: "
			"anyone who can reach it can change or stop the run\n", listen_spec);

	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->log_mu, NULL);
	pthread_mutex_init(&s->hub.mu, NULL);
	pthread_cond_init(&s->hub.cv, NULL);
	if (log_path) {
		if (runlog_open(&s->log, log_path, log_format, 1, err) < 0) {
			fprintf(stderr, "stalelab serve: %s\n", err);
			free(sched);
			code = 2;
			goto out;
		}
		s->have_log = 1;
	}
	/* signals go to the main thread only (sigwait below) */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	uint8_t *ckpt = NULL;
	size_t ckpt_len = 0;
	if (resume_path && ckpt_read(resume_path, &ckpt, &ckpt_len, &cfg, err) < 0) {
		fprintf(stderr, "stalelab serve: %s\n", err);
		free(sched);
		code = 2;
		goto out;
	}
	s->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD |
					  MHD_USE_THREAD_PER_CONNECTION,
				  0, NULL, NULL, on_request, s,
				  MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
				  MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
				  MHD_OPTION_END);
	if (!s->mhd) {
		fprintf(stderr, "stalelab serve: cannot listen on %s: %s\n", listen_spec,
			strerror(errno));
		free(sched);
		free(ckpt);
		goto out;
	}
	int rc = 0;
	if (want_demo) {
		if (pthread_create(&s->demo_th, NULL, demo_main, s) == 0)
			s->demo_live = 1;
		else
			rc = sl_fail(err, SL_ENOMEM, "cannot start the demo");
	} else {
		pthread_mutex_lock(&s->mu);
		rc = start_run(s, &cfg, ckpt ? NULL : sched, ckpt ? 0 : n_sched, ckpt,
			       ckpt_len, err);
		pthread_mutex_unlock(&s->mu);
	}
	free(sched);
	free(ckpt);
	if (rc < 0) {
		fprintf(stderr, "stalelab serve: %s\n", err);
		code = 2;
		goto out;
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
	char addr[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &sa.sin_addr, addr, sizeof(addr));
	fprintf(stderr, "stalelab serve: listening on http://%s:%u/ (rule %s, %d workers, %s)\n",
		addr, info ? info->port : ntohs(sa.sin_port), cfg.rule, cfg.workers, cfg.model);
	int sig = 0;
	sigwait(&set, &sig);
	fprintf(stderr, "stalelab serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
	code = 0;
	if (s->ckpt_on_exit) {
		size_t bytes = 0;
		uint64_t v = 0;
		pthread_mutex_lock(&s->mu);
		if (s->r && ckpt_write(s->r, s->ckpt_on_exit, &bytes, &v, err) == 0)
			fprintf(stderr, "stalelab serve: checkpoint at v %llu in %s (%zu bytes)\n",
				(unsigned long long)v, s->ckpt_on_exit, bytes);
		else if (s->r) {
			fprintf(stderr, "stalelab serve: checkpoint on exit failed: %s\n", err);
			code = 1;
		}
		pthread_mutex_unlock(&s->mu);
	}
out:
	pthread_mutex_lock(&s->hub.mu);
	s->hub.closing = 1;
	pthread_cond_broadcast(&s->hub.cv);
	pthread_mutex_unlock(&s->hub.mu);
	if (s->demo_live)
		pthread_join(s->demo_th, NULL);
	demo_free(&s->demo);
	if (s->mhd)
		MHD_stop_daemon(s->mhd);
	pthread_mutex_lock(&s->mu);
	stop_current(s);
	pthread_mutex_unlock(&s->mu);
	if (s->have_log)
		runlog_close(&s->log);
	if (s->data) {
		ds_pair_free(s->data);
		free(s->data);
	}
	for (int i = 0; i < HUB_N; i++)
		free(s->hub.ev[i]);
	json_decref(s->past);
	pthread_mutex_destroy(&s->mu);
	pthread_mutex_destroy(&s->log_mu);
	pthread_mutex_destroy(&s->hub.mu);
	pthread_cond_destroy(&s->hub.cv);
	free(s);
	return code;
}
