/* remote.c - the daemon's side of remote workers (see remote.h).
 *
 * One raw REP socket. Its thread receives every message, checks it
 * (wire_parse), answers hellos and heartbeats itself, and parks a worker's
 * PULL or PUSH with that worker (struct rw) together with its routing
 * header. The run's thread for the worker (rw_compute, the engine's
 * remote compute) takes them in turn: it answers the PULL with the step's
 * weights and batch, waits for the PUSH of that step, copies the gradient
 * and answers ACK. Raw REP lets an answer wait (a held push, a step not
 * begun yet) without blocking the socket for the other workers. */
#include <errno.h>
#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>
#include <nanomsg/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "config_json.h"
#include "ledger.h"
#include "model.h"
#include "remote.h"
#include "wiremsg.h"
#include "run.h"
#include "sl.h"
#include "wire.h"

#define POLL_MS 100

typedef struct rw {
	remote *rs;
	uint32_t wid, incarnation;
	uint64_t run_id;
	run *r;                /* the run it joined (alive while it computes) */
	int run_worker;        /* its id in the run */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int gone;              /* lost, let go, cancelled or said bye */
	int bye;               /* ... it said bye */
	double last_heard;     /* sl_now() of its last message (heartbeats too) */
	/* the request waiting for its answer */
	int parked;
	wire_hdr h;
	void *body, *control;  /* nanomsg's: the message and its routing header */
	void *owed;            /* the routing header of the last push applied: its
			        * answer is the next step's weights (w->mu) */
	uint64_t owed_seq;
	struct rw *next;       /* every one made, freed at remote_stop */
} rw;

struct remote {
	ctl *c;
	const char *token;
	double timeout;
	int sock;
	pthread_t th;
	int live;
	atomic_int stop;
	pthread_mutex_t mu;    /* by_id, all, next_id and the model */
	rw *by_id[LEDGER_MAX];
	rw *all;
	uint32_t next_id, epoch;
	int model_run;         /* the run whose model wm describes */
	wire_model wm;
	FILE *push_log;        /* --push-log (NULL: none) */
	size_t max_msg;        /* the socket's receive limit */
	pthread_mutex_t log_mu;
};

/* ---- sending ---------------------------------------------------------------- */

/* a message header of one NN_MSG part and an NN_MSG routing header */
static void
msghdr_of(struct nn_msghdr *mh, struct nn_iovec *iov, void **body, void **control)
{
	iov->iov_base = body;
	iov->iov_len = NN_MSG;
	memset(mh, 0, sizeof(*mh));
	mh->msg_iov = iov;
	mh->msg_iovlen = 1;
	mh->msg_control = control;
	mh->msg_controllen = NN_MSG;
}

/* answer the request whose routing header is control (consumed), the
 * payload in up to three parts (a local step's WEIGHTS has three) */
static void
reply3(remote *rs, void *control, const wire_hdr *h, const void *a, size_t na, const void *b,
       size_t nb, const void *c, size_t nc)
{
	void *msg = wiremsg_new3(h, a, na, b, nb, c, nc);
	if (!msg) {
		nn_freemsg(control);
		return;
	}
	struct nn_iovec iov;
	struct nn_msghdr mh;
	msghdr_of(&mh, &iov, &msg, &control);
	if (nn_sendmsg(rs->sock, &mh, 0) < 0) {
		nn_freemsg(msg);
		nn_freemsg(control);
	}
}

static void
reply(remote *rs, void *control, const wire_hdr *h, const void *a, size_t na, const void *b,
      size_t nb)
{
	reply3(rs, control, h, a, na, b, nb, NULL, 0);
}

static void
reply_doc(remote *rs, void *control, const wire_hdr *h, json_t *doc)
{
	char *text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	reply(rs, control, h, text, text ? strlen(text) : 0, NULL, 0);
	free(text);
}

static void
refuse(remote *rs, void *control, uint32_t wid, const char *why)
{
	wire_hdr h = {.kind = WIRE_REFUSE, .worker_id = wid, .ps_epoch = rs->epoch};
	reply_doc(rs, control, &h, json_pack("{s:s}", "reason", why));
}

/* ---- one remote worker: the engine's side ------------------------------------ */

/* a line for the push applied: the daemon's epoch, the worker id, its
 * incarnation, the step's number and the version it read. Written
 * through at once, so a killed daemon's lines are all there. */
static void
push_log(remote *rs, const rw *w, uint64_t seq, uint64_t v_read)
{
	if (!rs->push_log)
		return;
	pthread_mutex_lock(&rs->log_mu);
	fprintf(rs->push_log, "%u\t%u\t%u\t%llu\t%llu\n", rs->epoch, w->wid, w->incarnation,
		(unsigned long long)seq, (unsigned long long)v_read);
	fflush(rs->push_log);
	pthread_mutex_unlock(&rs->log_mu);
}

static void
rw_gone(rw *w)
{
	pthread_mutex_lock(&w->mu);
	w->gone = 1;
	void *owed = w->owed;
	w->owed = NULL;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	if (owed) /* the worker waits for its next weights: none come */
		refuse(w->rs, owed, w->wid, "the run let this worker go: say hello again");
}

/* wait for a parked request (w->mu held); 0, or -1 when lost or let go.
 * A worker is lost when it has sent nothing, not even a heartbeat, for the
 * timeout: one that heartbeats while it computes is slow, never lost. */
static int
wait_parked(rw *w)
{
	while (!w->parked && !w->gone) {
		if (sl_now() - w->last_heard > w->rs->timeout) {
			w->gone = 1;
			break;
		}
		struct timespec dl;
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_nsec += 100 * 1000000L; /* look at the clock ten times a second */
		if (dl.tv_nsec >= 1000000000L) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&w->cv, &w->mu, &dl);
	}
	if (w->gone)
		return w->bye ? RUN_REMOTE_LEFT : RUN_REMOTE_LOST;
	return 0;
}

static void
unpark(rw *w, wire_hdr *h, void **body, void **control)
{
	*h = w->h;
	*body = w->body;
	*control = w->control;
	w->parked = 0;
	w->body = w->control = NULL;
}

/* a step's WEIGHTS: its settings when it is a local step, the weights
 * (but on a local step that goes on from the worker's own), the batch */
typedef struct step_msg {
	wire_hdr h;
	uint8_t *local;        /* a local step's settings, its ranges (malloc) */
	size_t nlocal;
	const float *w;
	size_t nw;
	const uint32_t *idx;
	size_t nidx;
} step_msg;

static void
send_step(remote *rs, void *control, const step_msg *m)
{
	reply3(rs, control, &m->h, m->local, m->nlocal, m->w, m->nw, m->idx, m->nidx);
}

/* A local step's settings into m (m->local, malloc'd; NULL when out of
 * memory), its flags into *flags, and what its push must carry: the flags
 * and the floats after its loss (*push_flags, *up_floats) */
static void
local_settings(step_msg *m, const run_remote_local *loc, const float *weights, size_t n,
	       uint16_t *flags, uint16_t *push_flags, uint64_t *up_floats)
{
	int nd = loc->weights ? 0 : loc->n_down; /* the whole model has them */
	int nu = loc->exchange ? loc->n_up : 0;
	uint64_t down = 0;
	for (int i = 0; i < nd; i++)
		down += loc->down[i].len;
	size_t nr = (size_t)(nu + nd);
	m->nlocal = WIRE_LOCAL_LEN + (nr ? WIRE_RANGES_HDR + 8 * nr + 4 * down : 0);
	m->local = malloc(m->nlocal);
	uint64_t *ro = malloc(sizeof(uint64_t) * (nr ? 2 * nr : 1));
	if (!m->local || !ro) {
		free(m->local);
		free(ro);
		m->local = NULL;
		return;
	}
	wire_local wl = {.opt = (uint8_t)loc->opt,
			 .lflags = (uint8_t)((loc->exchange ? WIRE_L_EXCHANGE : 0) |
					     (loc->reset ? WIRE_L_RESET : 0)),
			 .lr = loc->lr, .mu = loc->mu, .wd = loc->wd, .beta1 = loc->beta1,
			 .beta2 = loc->beta2, .eps = loc->eps, .clip = loc->clip};
	wire_local_put(m->local, &wl);
	*flags = WIRE_F_LOCAL | (loc->weights ? WIRE_F_MODEL : 0) | (nr ? WIRE_F_RANGES : 0);
	*up_floats = loc->exchange && !nu ? n : 0;
	*push_flags = WIRE_F_LOCAL | (loc->exchange ? (nu ? WIRE_F_RANGES : WIRE_F_MODEL) : 0);
	if (nr) {
		uint64_t *rl = ro + nr;
		for (int i = 0; i < nu; i++) {
			ro[i] = loc->up[i].off;
			rl[i] = loc->up[i].len;
			*up_floats += rl[i];
		}
		for (int i = 0; i < nd; i++) {
			ro[nu + i] = loc->down[i].off;
			rl[nu + i] = loc->down[i].len;
		}
		uint8_t *p = m->local + WIRE_LOCAL_LEN;
		p += wire_ranges_put(p, (uint32_t)nu, (uint32_t)nd, loc->mix, ro, rl);
		for (int i = 0; i < nd; i++) { /* the values that come down */
			memcpy(p, weights + loc->down[i].off, sizeof(float) * loc->down[i].len);
			p += sizeof(float) * loc->down[i].len;
		}
	}
	free(ro);
}

/* the floats of ranges rg, one after another at p, into x at their places */
static void
ranges_in(float *x, const uint8_t *p, const run_remote_range *rg, int n)
{
	for (int i = 0; i < n; i++) {
		memcpy(x + rg[i].off, p, sizeof(float) * rg[i].len);
		p += sizeof(float) * rg[i].len;
	}
}

static int
rw_compute(void *ctx, const float *weights, size_t n, uint64_t v_read, const wbatch *b,
	   int depth, size_t off, float *grads, double *loss, const run_remote_local *loc)
{
	rw *w = ctx;
	remote *rs = w->rs;
	int L = rs->wm.n_layers, batch = b->n;
	const uint32_t *idx = b->idx;
	wire_hdr out = {.kind = WIRE_WEIGHTS, .worker_id = w->wid, .incarnation = w->incarnation,
			.run_id = w->run_id, .ps_epoch = rs->epoch, .version_read = v_read,
			.model_fp = rs->wm.model_fp,
			.layer_lo = (uint16_t)(depth > 0 && depth < L ? L - depth : 0),
			.layer_hi = (uint16_t)L};
	/* the batch's views: the worker draws them from this key and the
	 * run's seed, as a local worker would */
	wiremsg_put_aug(&out, &b->aug);
	step_msg sm = {.w = weights, .nw = 4 * n, .idx = idx, .nidx = 4 * (size_t)batch};
	/* what its push must be: its flags and length */
	uint16_t want_flags = 0;
	uint64_t want_len = WIRE_PUSH_LOSS + 4 * (n - off);
	if (loc) {
		uint64_t up = 0;
		local_settings(&sm, loc, weights, n, &out.flags, &want_flags, &up);
		if (!sm.local)
			return RUN_REMOTE_LOST; /* out of memory: let it go */
		if (!loc->weights)
			sm.nw = 0;
		want_len = WIRE_PUSH_LOSS + 4 * up;
	}
	/* numbered by the run's ledger: never the number of another step */
	if (!(out.seq = run_remote_issue(w->r, w->wid))) {
		free(sm.local);
		return RUN_REMOTE_LOST;
	}
	pthread_mutex_lock(&w->mu);
	int sent = 0, rc = -1;
	if (w->owed) { /* the last push's answer: this step's weights (docs/remote.md) */
		void *owed = w->owed;
		w->owed = NULL;
		pthread_mutex_unlock(&w->mu);
		sm.h = out;
		send_step(rs, owed, &sm);
		sent = 1;
		pthread_mutex_lock(&w->mu);
	}
	for (;;) {
		if ((rc = wait_parked(w)) < 0)
			break;
		rc = -1;
		wire_hdr h;
		void *body, *control;
		unpark(w, &h, &body, &control);
		pthread_mutex_unlock(&w->mu);
		wire_hdr ack = {.kind = WIRE_ACK, .worker_id = w->wid, .seq = h.seq,
				.run_id = w->run_id, .ps_epoch = rs->epoch,
				.model_fp = rs->wm.model_fp};
		if (h.kind == WIRE_PULL) { /* the step's weights (again, for a resent pull) */
			sm.h = out;
			send_step(rs, control, &sm);
			sent = 1;
		} else if (h.seq == out.seq && !(sent && h.layer_lo == out.layer_lo &&
					       (h.flags & (WIRE_F_LOCAL | WIRE_F_MODEL |
							   WIRE_F_RANGES)) == want_flags &&
					       h.payload_len == want_len)) {
			refuse(rs, control, w->wid, loc ? "push of another local step than the one "
			       "asked for" : "push of other layers than the weights asked for");
		} else {
			int v = run_remote_push(w->r, w->wid, w->incarnation, h.seq);
			if (v == LEDGER_APPLY) {
				const uint8_t *p = (const uint8_t *)body + WIRE_HEADER;
				memcpy(loss, p, sizeof(double));
				if (!loc)
					memcpy(grads + off, p + WIRE_PUSH_LOSS, sizeof(float) * (n - off));
				else if (loc->exchange && !loc->n_up) /* the model its phase reached */
					memcpy(grads, p + WIRE_PUSH_LOSS, sizeof(float) * n);
				else if (loc->exchange) /* the fragment it sends */
					ranges_in(grads, p + WIRE_PUSH_LOSS, loc->up, loc->n_up);
				push_log(rs, w, h.seq, v_read);
				rc = 0;
			} else if (v == LEDGER_DUPLICATE && h.seq == w->owed_seq && sent) {
				/* a resend of the last push (its answer lost): the
				 * weights that answered it, again */
				sm.h = out;
				send_step(rs, control, &sm);
			} else if (v == LEDGER_DUPLICATE) { /* applied already */
				reply(rs, control, &ack, NULL, 0, NULL, 0);
			} else {
				refuse(rs, control, w->wid, "push of a step given up (the worker "
				       "was lost, or reconnected): pull again");
			}
		}
		nn_freemsg(body);
		pthread_mutex_lock(&w->mu);
		if (rc == 0) {
			/* answered by the next step's weights, sent behind the
			 * push (or refused, when the worker goes first) */
			if (w->gone) {
				pthread_mutex_unlock(&w->mu);
				refuse(rs, control, w->wid, "the run let this worker go: say hello "
				       "again");
				free(sm.local);
				return 0;
			}
			w->owed = control;
			w->owed_seq = h.seq;
			break;
		}
	}
	pthread_mutex_unlock(&w->mu);
	free(sm.local);
	return rc;
}

/* The run let it go. Only w->mu is taken: the receiving thread may hold
 * rs->mu and the run's lock (a hello joining the run), waiting for this
 * worker's thread to end; a gone worker left in by_id counts as absent. */
static void
rw_left(void *ctx)
{
	rw_gone(ctx);
}

static void
rw_cancel(void *ctx)
{
	rw_gone(ctx);
}

static const run_remote_ops rw_ops = {.compute = rw_compute, .left = rw_left,
				      .cancel = rw_cancel};

/* ---- receiving --------------------------------------------------------------- */

/* the current run's model as the wire checks it (rs->mu held, c->mu held) */
static int
model_of(remote *rs, const run_config *cfg, int run_id, char *err)
{
	if (rs->model_run == run_id)
		return 0;
	backend *be;
	model *m;
	const dataset *tr = &rs->c->data->train;
	int rc = backend_open("ref", 1, &be, err);
	if (rc < 0)
		return rc;
	rc = model_new(cfg->model, tr->c, tr->h, tr->w, tr->classes, 1, 1, be, &m, err);
	if (rc == 0) {
		wire_model wm = {.n_params = m->n_params, .n_layers = m->n_param_layers,
				 .run_id = (uint64_t)run_id};
		for (int d = 1; d <= m->n_param_layers && d <= WIRE_LAYERS_MAX; d++)
			wm.layer_off[m->n_param_layers - d] = model_tail_offset(m, d);
		wm.layer_off[0] = 0;
		wm.layer_off[m->n_param_layers] = m->n_params;
		wm.model_fp = wire_fingerprint(cfg->model, cfg->dataset, &wm);
		rs->wm = wm;
		rs->model_run = run_id;
		model_free(m);
	}
	backend_free(be);
	return rc;
}

/* a host name as the worker gave it, kept to [A-Za-z0-9._-] (it goes into
 * labels, tables and terminals) */
static void
host_clean(char *out, size_t cap, const char *in)
{
	size_t n = 0;
	for (; in && *in && n + 1 < cap; in++)
		out[n++] = (*in >= 'a' && *in <= 'z') || (*in >= 'A' && *in <= 'Z') ||
			   (*in >= '0' && *in <= '9') || *in == '.' || *in == '-' || *in == '_'
			   ? *in : '_';
	out[n] = 0;
}

static void
hello(remote *rs, const wire_hdr *h, const uint8_t *p, void *control)
{
	json_error_t je;
	json_t *doc = json_loadb((const char *)p, h->payload_len, 0, &je);
	const char *token = NULL, *host = "";
	json_int_t want = -1;
	if (!doc || json_unpack_ex(doc, &je, 0, "{s?s,s?s,s?I}", "token", &token, "host", &host,
				   "worker_id", &want) < 0) {
		char why[256];
		snprintf(why, sizeof(why), "hello: %s", je.text);
		json_decref(doc);
		refuse(rs, control, WIRE_ANY_ID, why);
		return;
	}
	if (!ctl_token_ok(rs->token, token)) {
		json_decref(doc);
		refuse(rs, control, WIRE_ANY_ID, rs->token && token ? "wrong token" :
			       "this daemon needs a token (--token-file)");
		return;
	}
	char err[SL_ERR_LEN] = "";
	ctl *c = rs->c;
	pthread_mutex_lock(&c->mu);
	pthread_mutex_lock(&rs->mu);
	rw *w = NULL;
	int rc = 0;
	uint32_t wid = want >= 0 && want < LEDGER_MAX ? (uint32_t)want : WIRE_ANY_ID;
	if (!c->r) {
		rc = sl_fail(err, SL_ESTATE, "no run is active (POST /api/v1/run starts one)");
	} else {
		run_snapshot *snap = run_snapshot_get(c->r);
		rc = model_of(rs, &snap->cfg, c->run_id, err);
		if (rc == 0 && wire_max_message(&rs->wm) > rs->max_msg)
			rc = sl_fail(err, SL_EINVAL, "the run's model (%s, %llu parameters) needs "
				     "messages of %zu bytes, over the daemon's receive limit of %zu "
				     "(serve --workers-max-mib)", snap->cfg.model,
				     (unsigned long long)rs->wm.n_params, wire_max_message(&rs->wm),
				     rs->max_msg);
		json_t *cfg = rc == 0 ? config_to_json(&snap->cfg) : NULL;
		run_snapshot_put(snap);
		if (rc == 0 && wid != WIRE_ANY_ID && rs->by_id[wid] && !rs->by_id[wid]->gone &&
		    rs->by_id[wid]->incarnation != h->incarnation)
			rc = sl_fail(err, SL_ESTATE, "worker id %u is taken by a running worker", wid);
		if (rc == 0 && wid == WIRE_ANY_ID) {
			while (rs->next_id < LEDGER_MAX && rs->by_id[rs->next_id])
				rs->next_id++;
			if (rs->next_id >= LEDGER_MAX)
				rc = sl_fail(err, SL_ESTATE, "no worker id left");
			wid = rs->next_id++;
		}
		if (rc == 0 && !(w = calloc(1, sizeof(*w))))
			rc = sl_fail(err, SL_ENOMEM, "out of memory");
		if (rc == 0) {
			w->rs = rs;
			w->wid = wid;
			w->incarnation = h->incarnation;
			w->run_id = (uint64_t)c->run_id;
			w->last_heard = sl_now();
			pthread_mutex_init(&w->mu, NULL);
			pthread_cond_init(&w->cv, NULL);
			w->r = c->r;
			w->next = rs->all;
			rs->all = w;
			char clean[64];
			host_clean(clean, sizeof(clean), host);
			if (run_remote_hello(c->r, wid, h->incarnation) < 0)
				rc = sl_fail(err, SL_ENOMEM, "out of memory");
			else
				rc = run_join_remote(c->r, &rw_ops, w, clean, &w->run_worker, err);
			if (rc < 0)
				w->gone = 1;
		}
		if (rc == 0) {
			if (rs->by_id[wid])
				rw_gone(rs->by_id[wid]); /* the same worker again: the old one goes */
			rs->by_id[wid] = w;
			wire_hdr o = {.kind = WIRE_WELCOME, .worker_id = wid,
				      .incarnation = h->incarnation, .run_id = w->run_id,
				      .ps_epoch = rs->epoch, .model_fp = rs->wm.model_fp};
			char fp[24];
			snprintf(fp, sizeof(fp), "%016llx", (unsigned long long)rs->wm.model_fp);
			reply_doc(rs, control, &o, json_pack(
				"{s:i,s:i,s:O,s:s,s:I,s:s,s:f}", "worker_id", (int)wid, "run_worker",
				w->run_worker, "run", cfg, "dataset", c->data_spec, "data_seed",
				(json_int_t)c->data_seed, "model_fp", fp, "timeout_s", rs->timeout));
			control = NULL;
		}
		json_decref(cfg);
	}
	pthread_mutex_unlock(&rs->mu);
	pthread_mutex_unlock(&c->mu);
	json_decref(doc);
	if (control)
		refuse(rs, control, wid, err);
}

/* a push for another daemon, run or process, or from a worker the run
 * let go: dropped, and counted in the current run's ledger */
static void
stale_push(remote *rs)
{
	ctl *c = rs->c;
	pthread_mutex_lock(&c->mu);
	if (c->r)
		run_remote_stale(c->r);
	pthread_mutex_unlock(&c->mu);
}

/* a heartbeat's {"rtt_ms": x}: into the run, while it is the current one */
static void
heartbeat_rtt(remote *rs, run *r, int run_worker, const uint8_t *p, size_t len)
{
	json_t *d = json_loadb((const char *)p, len, 0, NULL);
	json_t *v = d ? json_object_get(d, "rtt_ms") : NULL;
	if (json_is_number(v)) {
		ctl *c = rs->c;
		pthread_mutex_lock(&c->mu);
		if (c->r == r)
			run_remote_rtt(r, run_worker, json_number_value(v));
		pthread_mutex_unlock(&c->mu);
	}
	json_decref(d);
}

/* one received message (body and control are ours: freed or parked) */
static void
handle(remote *rs, void *body, size_t len, void *control)
{
	wire_hdr h;
	const uint8_t *p;
	char err[SL_ERR_LEN] = "";
	pthread_mutex_lock(&rs->mu);
	wire_model wm = rs->wm;
	int have = rs->model_run > 0;
	pthread_mutex_unlock(&rs->mu);
	if (wire_parse(body, len, have ? &wm : NULL, &h, &p, err) < 0) {
		refuse(rs, control, WIRE_ANY_ID, err);
		nn_freemsg(body);
		return;
	}
	if (h.kind == WIRE_HELLO) {
		hello(rs, &h, p, control);
		nn_freemsg(body);
		return;
	}
	pthread_mutex_lock(&rs->mu);
	rw *w = h.worker_id < LEDGER_MAX ? rs->by_id[h.worker_id] : NULL;
	const char *why = !w || w->gone ? "not a worker of this run: say hello again"
			  : w->incarnation != h.incarnation ? "another process has this worker id"
			  : w->run_id != h.run_id || h.ps_epoch != rs->epoch ?
				    "the run changed: say hello again"
			  : NULL;
	if (why) {
		pthread_mutex_unlock(&rs->mu);
		if (h.kind == WIRE_PUSH)
			stale_push(rs);
		refuse(rs, control, h.worker_id, why);
		nn_freemsg(body);
		return;
	}
	pthread_mutex_lock(&w->mu);
	w->last_heard = sl_now();
	pthread_mutex_unlock(&w->mu);
	if (h.kind == WIRE_PULL || h.kind == WIRE_PUSH) {
		pthread_mutex_lock(&w->mu);
		if (w->parked) { /* a resend replaces what waited: answer the newest */
			nn_freemsg(w->body);
			nn_freemsg(w->control);
		}
		w->h = h;
		w->body = body;
		w->control = control;
		w->parked = 1;
		pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mu);
		pthread_mutex_unlock(&rs->mu);
		return;
	}
	wire_hdr o = {.kind = h.kind == WIRE_BYE ? WIRE_BYE : WIRE_CTRL, .worker_id = h.worker_id,
		      .run_id = w->run_id, .ps_epoch = rs->epoch, .model_fp = wm.model_fp};
	if (h.kind == WIRE_BYE) {
		pthread_mutex_lock(&w->mu);
		w->bye = 1;
		pthread_mutex_unlock(&w->mu);
		rw_gone(w);
	}
	run *r = w->r;
	int run_worker = w->run_worker;
	pthread_mutex_unlock(&rs->mu);
	if (h.kind == WIRE_HB && h.payload_len) /* the round trip it measured */
		heartbeat_rtt(rs, r, run_worker, p, h.payload_len);
	reply_doc(rs, control, &o, json_object());
	nn_freemsg(body);
}

static void *
rx_main(void *p)
{
	remote *rs = p;
	while (!atomic_load(&rs->stop)) {
		void *body = NULL, *control = NULL;
		struct nn_iovec iov;
		struct nn_msghdr mh;
		msghdr_of(&mh, &iov, &body, &control);
		int n = nn_recvmsg(rs->sock, &mh, 0);
		if (n < 0)
			continue; /* the poll's timeout, or the socket closing */
		if (!control) { /* not from a REQ: nowhere to answer */
			nn_freemsg(body);
			continue;
		}
		handle(rs, body, (size_t)n, control);
	}
	return NULL;
}

/* ---- start and stop ----------------------------------------------------------- */

int
remote_start(remote **out, ctl *c, const char *url, const char *token, double timeout_s,
	     const char *push_log_path, int max_mib, char *err)
{
	*out = NULL;
	remote *rs = calloc(1, sizeof(*rs));
	if (!rs)
		return sl_fail(err, SL_ENOMEM, "out of memory");
	rs->c = c;
	rs->token = token;
	rs->timeout = timeout_s;
	rs->epoch = (uint32_t)time(NULL);
	if (push_log_path && !(rs->push_log = fopen(push_log_path, "a"))) {
		int e = errno;
		free(rs);
		return sl_fail(err, SL_EINVAL, "--push-log %s: %s", push_log_path, strerror(e));
	}
	pthread_mutex_init(&rs->mu, NULL);
	pthread_mutex_init(&rs->log_mu, NULL);
	atomic_init(&rs->stop, 0);
	rs->sock = nn_socket(AF_SP_RAW, NN_REP);
	if (rs->sock < 0) {
		int e = errno;
		remote_free(rs);
		return sl_fail(err, SL_EIO, "--workers-listen: cannot make a socket: %s",
			       nn_strerror(e));
	}
	/* the largest message a worker sends is a push of the whole model:
	 * bound it (never unlimited); a run whose model needs more is refused
	 * at the hello, with the limit */
	rs->max_msg = (size_t)max_mib << 20;
	int max = max_mib << 20, ms = POLL_MS, sndms = 5000, nodelay = 1, v4only = 0;
	int buf = 4 << 20;
	nn_setsockopt(rs->sock, NN_SOL_SOCKET, NN_RCVMAXSIZE, &max, sizeof(max));
	nn_setsockopt(rs->sock, NN_SOL_SOCKET, NN_RCVTIMEO, &ms, sizeof(ms));
	nn_setsockopt(rs->sock, NN_SOL_SOCKET, NN_SNDTIMEO, &sndms, sizeof(sndms));
	nn_setsockopt(rs->sock, NN_SOL_SOCKET, NN_SNDBUF, &buf, sizeof(buf));
	nn_setsockopt(rs->sock, NN_SOL_SOCKET, NN_RCVBUF, &buf, sizeof(buf));
	nn_setsockopt(rs->sock, NN_SOL_SOCKET, NN_IPV4ONLY, &v4only, sizeof(v4only));
	nn_setsockopt(rs->sock, NN_TCP, NN_TCP_NODELAY, &nodelay, sizeof(nodelay));
	if (nn_bind(rs->sock, url) < 0) {
		int e = errno;
		nn_close(rs->sock);
		remote_free(rs);
		if (e == EADDRINUSE)
			return sl_fail(err, SL_ESTATE, "--workers-listen %s: address in use "
				       "(another daemon? choose another port, or none)", url);
		return sl_fail(err, SL_EINVAL, "--workers-listen %s: %s (expected tcp://ADDRESS:PORT "
			       "or ipc://PATH, or none)", url, nn_strerror(e));
	}
	if (pthread_create(&rs->th, NULL, rx_main, rs) != 0) {
		nn_close(rs->sock);
		remote_free(rs);
		return sl_fail(err, SL_EIO, "--workers-listen: cannot start a thread");
	}
	rs->live = 1;
	*out = rs;
	return 0;
}

void
remote_stop(remote *rs)
{
	if (!rs)
		return;
	atomic_store(&rs->stop, 1);
	pthread_mutex_lock(&rs->mu);
	for (rw *w = rs->all; w; w = w->next)
		rw_gone(w);
	pthread_mutex_unlock(&rs->mu);
	if (rs->live)
		pthread_join(rs->th, NULL);
	rs->live = 0;
	nn_close(rs->sock);
}

void
remote_free(remote *rs)
{
	if (!rs)
		return;
	for (rw *w = rs->all, *next; w; w = next) {
		next = w->next;
		if (w->parked) {
			nn_freemsg(w->body);
			nn_freemsg(w->control);
		}
		if (w->owed)
			nn_freemsg(w->owed);
		pthread_mutex_destroy(&w->mu);
		pthread_cond_destroy(&w->cv);
		free(w);
	}
	if (rs->push_log)
		fclose(rs->push_log);
	pthread_mutex_destroy(&rs->log_mu);
	pthread_mutex_destroy(&rs->mu);
	free(rs);
}
