/* bus.c - the bus on nanomsg: a PUB thread (events and snapshots) and a REP
 * thread (commands), over busmsg.c's messages and control.c's answers. */
#include "bus.h"

#include <errno.h>
#include <nanomsg/nn.h>
#include <nanomsg/pubsub.h>
#include <nanomsg/reqrep.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "busmsg.h"
#include "jsonout.h"
#include "sl.h"

#define BUS_POLL_MS 200     /* how long a thread waits before it looks at stop */
#define BUS_SNDTIMEO_MS 1000

struct bus {
	ctl *c;
	const char *token;
	double period;
	int pub, rep;         /* nanomsg sockets */
	char rep_url[512];
	pthread_t pub_th, rep_th;
	int pub_live, rep_live;
	atomic_int stop;
	bus_seen seen;        /* the REP thread's */
};

/* ---- PUB ------------------------------------------------------------------ */

/* messages collected under the ring's lock, sent after it */
typedef struct outbox {
	char **msg;
	size_t *len;
	size_t n, cap;
} outbox;

static void
outbox_put(void *ud, const char *name, const char *data)
{
	outbox *o = ud;
	if (o->n == o->cap) {
		size_t cap = o->cap ? 2 * o->cap : 16;
		char **m = realloc(o->msg, cap * sizeof(*m));
		if (m)
			o->msg = m;
		size_t *l = m ? realloc(o->len, cap * sizeof(*l)) : NULL;
		if (!l)
			return; /* best effort, like PUB itself */
		o->len = l;
		o->cap = cap;
	}
	size_t a = strlen(name), b = strlen(data);
	char *t = malloc(a + b + 2);
	if (!t)
		return;
	memcpy(t, name, a);
	t[a] = ' ';
	memcpy(t + a + 1, data, b + 1);
	o->msg[o->n] = t;
	o->len[o->n++] = a + 1 + b;
}

static void
outbox_send(bus *b, outbox *o)
{
	for (size_t i = 0; i < o->n; i++) {
		/* PUB never blocks: a subscriber that cannot keep up loses this */
		nn_send(b->pub, o->msg[i], o->len[i], NN_DONTWAIT);
		free(o->msg[i]);
	}
	o->n = 0;
}

static void
publish_snapshot(bus *b, outbox *o)
{
	json_t *s = ctl_snapshot(b->c);
	if (!s)
		s = json_pack("{s:s}", "state", "idle");
	char *txt = s ? jsonout_dumps(s) : NULL;
	json_decref(s);
	if (txt)
		outbox_put(o, "snapshot", txt);
	free(txt);
	outbox_send(b, o);
}

static void *
pub_main(void *arg)
{
	bus *b = arg;
	outbox o = {0};
	uint64_t seq = events_now(&b->c->ev);
	double next = sl_now();
	while (!atomic_load(&b->stop)) {
		double until = sl_now() + BUS_POLL_MS / 1000.0;
		if (next < until)
			until = next;
		int closing = events_wait(&b->c->ev, &seq, until, outbox_put, &o);
		outbox_send(b, &o);
		if (closing)
			break;
		double now = sl_now();
		if (now >= next) {
			publish_snapshot(b, &o);
			next += b->period;
			if (next < now) /* fell behind (a stopped process): no burst */
				next = now + b->period;
		}
	}
	free(o.msg);
	free(o.len);
	return NULL;
}

/* ---- REP ------------------------------------------------------------------ */

/* the reply to one message: from the ids answered lately, or control's */
static char *
answer(bus *b, const void *msg, size_t n, size_t *len)
{
	bus_req q;
	char err[SL_ERR_LEN];
	int st = bus_req_parse(msg, n, &q, err, sizeof(err));
	const char *prev = bus_seen_find(&b->seen, q.id, msg, n, len);
	if (prev) { /* REQ sent it again: the same answer, not applied twice */
		char *copy = malloc(*len + 1);
		if (copy)
			memcpy(copy, prev, *len + 1);
		bus_req_free(&q);
		return copy;
	}
	char *out;
	if (st) {
		out = bus_error_build(q.id, st, st == 413 ? "too_large" : st == 400 ? "bad_request"
										  : "internal",
				      err, len);
	} else {
		ctl_reply r;
		ctl_handle(b->c, q.method, q.path, q.query, q.body, q.body_len,
			   ctl_token_ok(b->token, q.token), &r);
		out = bus_reply_build(q.id, &r, !strcmp(q.method, "HEAD"), len);
		ctl_reply_free(&r);
	}
	if (out)
		bus_seen_add(&b->seen, q.id, msg, n, out, *len);
	bus_req_free(&q);
	return out;
}

static void *
rep_main(void *arg)
{
	static const char oom[] =
		"{\"status\":500,\"body\":{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}}";
	bus *b = arg;
	while (!atomic_load(&b->stop)) {
		void *msg = NULL;
		int n = nn_recv(b->rep, &msg, NN_MSG, 0);
		if (n < 0) {
			if (errno == EBADF || errno == ETERM)
				break;
			continue; /* ETIMEDOUT: look at stop again */
		}
		size_t len = 0;
		char *out = answer(b, msg, (size_t)n, &len);
		nn_freemsg(msg);
		/* every message gets an answer: REP waits for one before the next */
		if (nn_send(b->rep, out ? out : oom, out ? len : sizeof(oom) - 1, 0) < 0 &&
		    errno != ETIMEDOUT && errno != EAGAIN)
			fprintf(stderr, "stalelab serve: bus: reply not sent: %s\n", nn_strerror(errno));
		free(out);
	}
	return NULL;
}

/* ---- start and stop ------------------------------------------------------- */

static int
sock(int proto, char *err)
{
	int s = nn_socket(AF_SP, proto), ms = BUS_SNDTIMEO_MS, v4only = 0;
	if (s < 0)
		return sl_fail(err, SL_EIO, "bus: cannot make a socket: %s", nn_strerror(errno));
	nn_setsockopt(s, NN_SOL_SOCKET, NN_SNDTIMEO, &ms, sizeof(ms));
	nn_setsockopt(s, NN_SOL_SOCKET, NN_IPV4ONLY, &v4only, sizeof(v4only));
	return s;
}

/* bind s at url; err names flag (and what the socket is for) */
static int
bind_at(int s, const char *url, const char *flag, const char *what, char *err)
{
	if (nn_bind(s, url) >= 0)
		return 0;
	int e = errno;
	if (e == EADDRINUSE)
		return sl_fail(err, SL_ESTATE, "%s %s: cannot bind the %s: address in use "
			       "(another daemon? choose another port, or --bus none)", flag, url, what);
	if (e == EINVAL || e == EPROTONOSUPPORT || e == ENAMETOOLONG)
		return sl_fail(err, SL_EINVAL, "%s %s: expected tcp://ADDRESS:PORT or ipc://PATH "
			       "(%s)", flag, url, nn_strerror(e));
	if (e == ENODEV)
		return sl_fail(err, SL_EINVAL, "%s %s: no such address or interface here (nanomsg "
			       "binds to an address or an interface name: 127.0.0.1, not localhost)",
			       flag, url);
	return sl_fail(err, SL_EIO, "%s %s: cannot bind the %s: %s", flag, url, what,
		       nn_strerror(e));
}

int
bus_start(bus **out, ctl *c, const char *pub_url, const char *rep_url,
	  const char *token, double hz, char *err)
{
	*out = NULL;
	if (!(hz >= 0.1 && hz <= 50))
		return sl_fail(err, SL_EINVAL, "--bus-hz: expected a number in [0.1, 50], got %g", hz);
	bus *b = calloc(1, sizeof(*b));
	if (!b)
		return sl_fail(err, SL_ENOMEM, "out of memory");
	b->c = c;
	b->token = token;
	b->period = 1.0 / hz;
	b->pub = b->rep = -1;
	atomic_init(&b->stop, 0);
	char e2[SL_ERR_LEN];
	int rc = 0;
	if (rep_url)
		snprintf(b->rep_url, sizeof(b->rep_url), "%s", rep_url);
	else if (bus_sibling(pub_url, b->rep_url, sizeof(b->rep_url), e2, sizeof(e2)) < 0)
		rc = sl_fail(err, SL_EINVAL, "--bus %s", e2);
	int ms = BUS_POLL_MS, max = BUS_RCV_MAX;
	if (!rc && (b->pub = sock(NN_PUB, err)) < 0)
		rc = b->pub;
	if (!rc && (b->rep = sock(NN_REP, err)) < 0)
		rc = b->rep;
	if (!rc) {
		/* over 1 MiB, the daemon still sees a message, to answer 413 */
		nn_setsockopt(b->rep, NN_SOL_SOCKET, NN_RCVMAXSIZE, &max, sizeof(max));
		/* receive with a timeout, so that stop is prompt */
		nn_setsockopt(b->rep, NN_SOL_SOCKET, NN_RCVTIMEO, &ms, sizeof(ms));
		rc = bind_at(b->pub, pub_url, "--bus", "event socket", err);
	}
	if (!rc)
		rc = bind_at(b->rep, b->rep_url, rep_url ? "--bus-rep" : "--bus",
			     "command socket", err);
	if (!rc && pthread_create(&b->pub_th, NULL, pub_main, b) != 0)
		rc = sl_fail(err, SL_EIO, "bus: cannot start a thread");
	b->pub_live = !rc;
	if (!rc && pthread_create(&b->rep_th, NULL, rep_main, b) != 0)
		rc = sl_fail(err, SL_EIO, "bus: cannot start a thread");
	b->rep_live = !rc;
	if (rc < 0) {
		bus_stop(b);
		return rc;
	}
	*out = b;
	return 0;
}

const char *
bus_rep_url(const bus *b)
{
	return b->rep_url;
}

void
bus_stop(bus *b)
{
	if (!b)
		return;
	atomic_store(&b->stop, 1);
	if (b->pub_live)
		pthread_join(b->pub_th, NULL);
	if (b->rep_live)
		pthread_join(b->rep_th, NULL);
	if (b->pub >= 0)
		nn_close(b->pub);
	if (b->rep >= 0)
		nn_close(b->rep);
	bus_seen_free(&b->seen);
	free(b);
}
