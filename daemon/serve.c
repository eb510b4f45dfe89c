/* serve.c - `stalelab serve`: the long-running daemon. One run at a time
 * trains on its own thread; libmicrohttpd serves the HTTP API (a thread per
 * connection, so a Server-Sent Events stream may block waiting for news);
 * the main thread waits for SIGINT/SIGTERM and shuts down cleanly.
 *
 * This file is the HTTP transport only: sockets, the token check, request
 * bodies, Server-Sent Events. Every answer comes from control.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bus.h"
#include "busmsg.h"
#include "ckpt.h"
#include "cli.h"
#include "config_json.h"
#include "control.h"
#include "jsonout.h"
#include "web.h"

#define BODY_MAX (1u << 20) /* request bodies: 1 MiB */
/* HTTP limits (docs/reliability.md, "Slow and hostile clients") */
#define CONN_MAX 1024       /* connections at once; beyond: closed at accept */
#define IDLE_TIMEOUT 30     /* seconds a connection may send and read nothing */
#define THREAD_STACK (256u << 10) /* per connection thread */

static const char serve_usage[] =
	"Usage: stalelab serve [OPTIONS]\n"
	"\n"
	"Run the daemon in the foreground: train the default run (or --config)\n"
	"and serve the HTTP API, live events and Prometheus metrics, and the\n"
	"same on the nanomsg bus (for `stalelab tui`), until SIGINT or SIGTERM;\n"
	"a browser at the address gets the dashboard.\n"
	"See docs/api.md, docs/bus.md and docs/dashboard.md.\n"
	"\n"
	"  -L, --listen ADDR:PORT  HTTP address (default 127.0.0.1:8470): also\n"
	"                          PORT or :PORT (loopback), [::1]:PORT (IPv6),\n"
	"                          0.0.0.0:PORT or [::]:PORT (every interface);\n"
	"                          port 0 picks a free one, printed on stderr\n"
	"  -c, --config FILE       run object to start with; its missing fields\n"
	"                          take the defaults of docs/formats.md (without\n"
	"                          it: Fashion-MNIST MLP, 4 workers, asgd, mixed\n"
	"                          delays, no stop)\n"
	"  -T, --token TOKEN       require 'Authorization: Bearer TOKEN' on every\n"
	"                          call that changes something (visible in ps:\n"
	"                          prefer the next two)\n"
	"      --token-file FILE   the token is the first line of FILE\n"
	"                          (else $STALELAB_TOKEN, when set)\n"
	"      --http-max-connections N\n"
	"                          HTTP connections at once (default 1024); more\n"
	"                          are closed as soon as they are accepted\n"
	"      --http-timeout S    close a connection that sends and reads\n"
	"                          nothing for S seconds (default 30, 0: never;\n"
	"                          an event stream that is read lives on)\n"
	"  -l, --log FILE          JSON-Lines log of the runs (appended)\n"
	"      --log-format F      jsonl (default) or csv\n"
	"      --device NAME       auto | cpu | ref | cuda (auto: cuda if built, else cpu)\n"
	"      --resume FILE       start from a checkpoint instead of a run object\n"
	"      --checkpoint-on-exit FILE\n"
	"                          write a checkpoint on SIGINT/SIGTERM\n"
	"      --checkpoint-dir DIR  the only directory a request may name: where\n"
	"                          POST /api/v1/checkpoint writes and\n"
	"                          {\"resume\": path} reads (default: the current\n"
	"                          directory)\n"
	"      --bus URL           the nanomsg bus: events and snapshots on a PUB\n"
	"                          socket at URL, commands on a REP socket at its\n"
	"                          sibling (tcp://H:P -> tcp://H:P+1, ipc://F ->\n"
	"                          ipc://F.rep); default tcp://127.0.0.1:8471 (when\n"
	"                          that is taken, the daemon warns and goes on\n"
	"                          without a bus); none: no bus. See docs/bus.md\n"
	"      --bus-rep URL       the command socket's URL instead of the sibling\n"
	"      --bus-hz HZ         bus snapshots a second (default 4; 0.1 to 50)\n"
	"      --demo [FILE]       an unattended demonstration: scenes with\n"
	"                          captions (built in, or {\"run\": ..., \"scenes\": [...]})\n"
	"  -v, --verbose           a line per evaluation on stderr too\n"
	"  -q, --quiet             nothing on stderr but the address and errors\n"
	"                          (default: a line per run start, end, resume,\n"
	"                          change and demo caption; a summary at exit)\n"
	"  -h, --help              this text\n"
	"\n"
	"Exit status: 0 after a clean shutdown, 1 runtime failure, 2 bad usage.\n";

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

/* ---- HTTP: the transport over control.c ---------------------------------- */

typedef struct server {
	ctl ctl;
	const char *token;
	struct MHD_Daemon *mhd;
	unsigned timeout;   /* --http-timeout: idle seconds (0: none) */
	double keepalive;   /* seconds between SSE comments on a quiet stream */
} server;

typedef struct req {
	char *body;
	size_t len;
} req;

static int
authorized(server *s, struct MHD_Connection *c)
{
	if (!s->token)
		return 1;
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						    MHD_HTTP_HEADER_AUTHORIZATION);
	if (!h || strncasecmp(h, "Bearer ", 7)) /* the scheme is case-insensitive */
		return 0;
	return ctl_token_ok(s->token, h + 7);
}

/* queue a reply of len bytes of type (copied), with its headers */
static enum MHD_Result
send_full(struct MHD_Connection *c, unsigned status, const char *type,
	  const char *data, size_t len, const char *allow, const char *location)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		len, (void *)(data ? data : ""), MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	/* every reply says what it is, even an empty one */
	MHD_add_response_header(r, "Content-Type", type ? type : "application/json");
	MHD_add_response_header(r, "Cache-Control", "no-store");
	if (allow && *allow)
		MHD_add_response_header(r, "Allow", allow);
	if (location && *location)
		MHD_add_response_header(r, "Location", location);
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* a static or borrowed body (the dashboard's assets go out this way) */
static enum MHD_Result
send_text(struct MHD_Connection *c, unsigned status, const char *type,
	  const char *text, size_t len)
{
	return send_full(c, status, type, text, len, NULL, NULL);
}

/* JSON text with a newline after it, or NULL */
static char *
json_text(const json_t *j, size_t *len)
{
	char *t = jsonout_dumps(j);
	char *full = t ? realloc(t, strlen(t) + 2) : NULL;
	if (!full) {
		free(t);
		return NULL;
	}
	*len = strlen(full);
	full[(*len)++] = '\n';
	full[*len] = 0;
	return full;
}

/* send a control reply: JSON or text, and its headers */
static enum MHD_Result
send_reply(struct MHD_Connection *c, const ctl_reply *o)
{
	size_t n = 0;
	char *txt = o->json ? json_text(o->json, &n) : NULL;
	if (o->json && !txt)
		return MHD_NO;
	enum MHD_Result ret = send_full(c, (unsigned)o->status,
					o->json ? "application/json" : o->type,
					txt ? txt : o->text, txt ? n : o->text ? strlen(o->text) : 0,
					o->allow, o->location);
	free(txt);
	return ret;
}

static enum MHD_Result
send_error(struct MHD_Connection *c, unsigned status, const char *code, const char *msg)
{
	size_t n = 0;
	json_t *j = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
	char *txt = json_text(j, &n);
	json_decref(j);
	enum MHD_Result ret = txt ? send_text(c, status, "application/json", txt, n) : MHD_NO;
	free(txt);
	return ret;
}

/* ---- SSE ----------------------------------------------------------------- */

typedef struct sse {
	server *s;
	double period;    /* seconds between snapshots */
	double next_snap; /* sl_now() time of the next snapshot */
	double next_beat; /* sl_now() time of a comment if nothing else went */
	uint64_t seq;     /* events delivered */
	char *buf;        /* pending output */
	size_t len, off;
	uint64_t id;
} sse;

static void
sse_put(void *ud, const char *name, const char *data)
{
	sse *e = ud;
	size_t need = (name ? strlen(name) : 0) + strlen(data) + 64;
	char *b = realloc(e->buf, e->len + need);
	if (!b)
		return;
	e->buf = b;
	if (!name) /* a comment: clients ignore it, the connection sees traffic */
		e->len += (size_t)snprintf(e->buf + e->len, need, ": %s\n\n", data);
	else
		e->len += (size_t)snprintf(e->buf + e->len, need, "id: %llu\nevent: %s\ndata: %s\n\n",
					   (unsigned long long)++e->id, name, data);
}

static ssize_t
sse_read(void *cls, uint64_t pos, char *out, size_t max)
{
	(void)pos;
	sse *e = cls;
	while (e->off >= e->len) {
		e->len = e->off = 0;
		/* events first, in order; then a snapshot when one is due */
		double until = e->next_snap < e->next_beat ? e->next_snap : e->next_beat;
		if (events_wait(&e->s->ctl.ev, &e->seq, until, sse_put, e))
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (sl_now() >= e->next_snap) {
			e->next_snap = sl_now() + e->period;
			json_t *o = ctl_snapshot(&e->s->ctl);
			if (o) {
				char *txt = jsonout_dumps(o);
				if (txt)
					sse_put(e, "snapshot", txt);
				free(txt);
				json_decref(o);
			}
		}
		/* a quiet stream (slow hz, no run) still writes within the idle
		 * timeout, so that a client who reads is never cut off */
		if (e->off >= e->len && sl_now() >= e->next_beat)
			sse_put(e, NULL, "keepalive");
	}
	e->next_beat = sl_now() + e->s->keepalive;
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
	e->next_beat = sl_now() + s->keepalive;
	e->seq = events_now(&s->ctl.ev); /* only what happens from now on */
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

/* ---- dispatch ------------------------------------------------------------ */

/* the query string again ("a=1&b=2"), for control */
typedef struct qbuf {
	char s[512];
	size_t n;
} qbuf;

static enum MHD_Result
add_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	qbuf *q = cls;
	if (q->n < sizeof(q->s))
		q->n += (size_t)snprintf(q->s + q->n, sizeof(q->s) - q->n, "%s%s%s%s",
					 q->n ? "&" : "", key, value ? "=" : "",
					 value ? value : "");
	return MHD_YES;
}

/* a body is JSON text: refuse what clearly is not (415) */
static int
json_type_ok(const char *type)
{
	static const char *const ok[] = {"application/json", "text/plain",
		"application/x-www-form-urlencoded", NULL};
	if (!type || !*type)
		return 1;
	size_t n = strcspn(type, ";");
	while (n && type[n - 1] == ' ')
		n--;
	for (int i = 0; ok[i]; i++)
		if (strlen(ok[i]) == n && !strncasecmp(type, ok[i], n))
			return 1;
	return n > 5 && !strncasecmp(type + n - 5, "+json", 5);
}

static enum MHD_Result
dispatch(server *s, struct MHD_Connection *c, const char *url,
	 const char *method, req *q)
{
	int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
	/* static content first: the dashboard (GET / from a browser, /ui/...);
	 * then streams, the transport's: Server-Sent Events; everything else
	 * is control's */
	web_reply w;
	if (get && web_find(url, MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							     MHD_HTTP_HEADER_ACCEPT), &w))
		return send_text(c, w.status, w.type, (const char *)w.data, w.len);
	if (get && !strcmp(url, "/api/v1/events"))
		return handle_events(s, c);
	if (q->len) {
		const char *type = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							       MHD_HTTP_HEADER_CONTENT_TYPE);
		if (!json_type_ok(type)) {
			char msg[160];
			snprintf(msg, sizeof(msg), "Content-Type %.80s: the body must be JSON (application/json)",
				 type);
			return send_error(c, 415, "unsupported_media_type", msg);
		}
	}
	qbuf qs = {.n = 0};
	qs.s[0] = 0;
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, add_arg, &qs);
	ctl_reply o;
	ctl_handle(&s->ctl, method, url, qs.s, q->body, q->len, authorized(s, c), &o);
	enum MHD_Result ret = send_reply(c, &o);
	ctl_reply_free(&o);
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
		/* a body announced over the limit is refused before it is sent
		 * (the connection closes after the answer) */
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							     MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > BODY_MAX)
			return send_error(c, 413, "too_large", "request body over 1 MiB");
		return MHD_YES;
	}
	if (*upload_size) {
		/* a chunked body that goes past the limit: the connection is
		 * closed at once rather than read to an end that may never come */
		if (q->len + *upload_size > BODY_MAX)
			return send_error(c, 413, "too_large", "request body over 1 MiB");
		char *b = realloc(q->body, q->len + *upload_size + 1);
		if (!b)
			return MHD_NO;
		q->body = b;
		memcpy(q->body + q->len, upload, *upload_size);
		q->len += *upload_size;
		q->body[q->len] = 0;
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

/* ---- listening ------------------------------------------------------------ */

/* "127.0.0.1:8470", "[::1]:8470", "localhost:8470", ":8470" or "8470" (the
 * last two: loopback) -> address; 0 or -1 */
static int
parse_listen(const char *spec, struct sockaddr_storage *sa, socklen_t *len)
{
	char host[64] = "127.0.0.1";
	const char *port = spec;
	if (spec[0] == '[') {
		const char *end = strchr(spec, ']');
		if (!end || end[1] != ':' || (size_t)(end - spec - 1) >= sizeof(host))
			return -1;
		memcpy(host, spec + 1, (size_t)(end - spec - 1));
		host[end - spec - 1] = 0;
		port = end + 2;
	} else if (strchr(spec, ':')) {
		const char *colon = strrchr(spec, ':');
		if ((size_t)(colon - spec) >= sizeof(host) || memchr(spec, ':', (size_t)(colon - spec)))
			return -1; /* IPv6 needs its brackets */
		if (colon > spec) {
			memcpy(host, spec, (size_t)(colon - spec));
			host[colon - spec] = 0;
		}
		port = colon + 1;
	}
	unsigned long long p;
	if (cli_u64(port, &p) < 0 || p > 65535)
		return -1;
	if (!strcmp(host, "localhost"))
		snprintf(host, sizeof(host), "127.0.0.1");
	memset(sa, 0, sizeof(*sa));
	struct sockaddr_in *a4 = (struct sockaddr_in *)sa;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)sa;
	if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)p);
		*len = sizeof(*a4);
	} else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)p);
		*len = sizeof(*a6);
	} else {
		return -1;
	}
	return 0;
}

static int
is_loopback(const struct sockaddr_storage *sa)
{
	if (sa->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* "http://127.0.0.1:8470/" or "http://[::1]:8470/" of a bound socket */
static void
socket_url(int fd, char *out, size_t cap)
{
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	char addr[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	getsockname(fd, (struct sockaddr *)&sa, &len);
	if (sa.ss_family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&sa;
		inet_ntop(AF_INET6, &a->sin6_addr, addr, sizeof(addr));
		port = ntohs(a->sin6_port);
		snprintf(out, cap, "http://[%s]:%u/", addr, port);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&sa;
		inet_ntop(AF_INET, &a->sin_addr, addr, sizeof(addr));
		port = ntohs(a->sin_port);
		snprintf(out, cap, "http://%s:%u/", addr, port);
	}
}

/* a listening socket on spec, or -1 with err naming --listen */
static int
listen_on(const char *spec, const struct sockaddr_storage *sa, socklen_t len,
	  char *err)
{
	int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	if (fd < 0) {
		sl_fail(err, SL_EIO, "--listen %s: cannot listen: %s", spec, strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (sa->ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)sa, len) < 0 || listen(fd, 1024) < 0) {
		int e = errno;
		close(fd);
		sl_fail(err, SL_EIO, "--listen %s: cannot listen: %s%s", spec, strerror(e),
			e == EADDRINUSE ? " (another daemon? choose another port: --listen 127.0.0.1:PORT)" : "");
		return -1;
	}
	return fd;
}

/* the connection limit that the descriptor limit leaves room for: the soft
 * RLIMIT_NOFILE is raised (up to the hard one) to want plus a margin for
 * the log, the data and the listening socket; if even that is too low,
 * fewer connections, said on stderr */
static unsigned long long
fd_room(unsigned long long want, int quiet)
{
	const rlim_t margin = 64;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return want;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want + margin) {
		rlim_t need = want + margin;
		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want + margin) {
		unsigned long long n = rl.rlim_cur > 2 * margin ? rl.rlim_cur - margin : margin;
		if (!quiet)
			fprintf(stderr, "stalelab serve: %llu HTTP connections at most (the "
				"descriptor limit is %llu; raise it with ulimit -n)\n", n,
				(unsigned long long)rl.rlim_cur);
		return n;
	}
	return want;
}

/* the token from --token, --token-file or $STALELAB_TOKEN (in that order);
 * NULL with err set on a bad one, NULL with err "" when there is none */
static char *
read_token(const char *arg, const char *file, char *err)
{
	char buf[512];
	const char *t = arg, *from = "--token";
	err[0] = 0;
	if (!t && file) {
		FILE *f = fopen(file, "r");
		if (!f) {
			sl_fail(err, SL_EIO, "--token-file %s: %s", file, strerror(errno));
			return NULL;
		}
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = 0;
		buf[strcspn(buf, "\r\n")] = 0; /* the first line */
		t = buf;
		from = "--token-file";
	}
	if (!t && (t = getenv("STALELAB_TOKEN")))
		from = "STALELAB_TOKEN";
	if (!t)
		return NULL;
	if (!*t) {
		sl_fail(err, SL_EINVAL, "%s: the token must not be empty", from);
		return NULL;
	}
	char *dup = strdup(t);
	if (!dup)
		sl_fail(err, SL_ENOMEM, "out of memory");
	return dup;
}

int
cmd_serve(int argc, char **argv)
{
	/* Threads come and go in a daemon (workers added and removed, a
	 * thread per HTTP connection) and glibc gives new threads new malloc
	 * arenas, up to eight per core, so RSS climbed with every worker
	 * change of the soak (bench/soak.sh). Two arenas keep it flat; a
	 * training step allocates only for a gradient the server holds back
	 * or a copy-on-write of the weights. MALLOC_ARENA_MAX still wins. */
	if (!getenv("MALLOC_ARENA_MAX"))
		mallopt(M_ARENA_MAX, 2);
	enum { O_TOKEN_FILE = 256, O_BUS, O_BUS_REP, O_BUS_HZ, O_HTTP_MAX, O_HTTP_TIMEOUT };
	static const struct option opts[] = {
		{"listen", required_argument, NULL, 'L'},
		{"config", required_argument, NULL, 'c'},
		{"token", required_argument, NULL, 'T'},
		{"token-file", required_argument, NULL, O_TOKEN_FILE},
		{"bus", required_argument, NULL, O_BUS},
		{"bus-rep", required_argument, NULL, O_BUS_REP},
		{"bus-hz", required_argument, NULL, O_BUS_HZ},
		{"http-max-connections", required_argument, NULL, O_HTTP_MAX},
		{"http-timeout", required_argument, NULL, O_HTTP_TIMEOUT},
		{"log", required_argument, NULL, 'l'},
		{"device", required_argument, NULL, 'D'},
		{"checkpoint-on-exit", required_argument, NULL, 'X'},
		{"checkpoint-dir", required_argument, NULL, 'K'},
		{"resume", required_argument, NULL, 'R'},
		{"log-format", required_argument, NULL, 'F'},
		{"demo", no_argument, NULL, 'M'},
		{"verbose", no_argument, NULL, 'v'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *listen_spec = "127.0.0.1:8470", *config_path = NULL,
		   *log_path = NULL, *device = NULL, *resume_path = NULL,
		   *log_format = "jsonl", *token_arg = NULL, *token_file = NULL,
		   *ckpt_on_exit = NULL, *demo_path = NULL,
		   *bus_url = NULL, *bus_rep = NULL, *bus_hz_arg = NULL;
	int opt, code = 2, want_demo = 0, quiet = 0, verbose = 0, fd = -1;
	double bus_hz = 4;
	bus *bs = NULL;
	unsigned long long conn_max = CONN_MAX, timeout = IDLE_TIMEOUT;
	char err[SL_ERR_LEN];
	run_sched *sched = NULL;
	int n_sched = 0;
	uint8_t *ckpt = NULL;
	size_t ckpt_len = 0;
	json_t *conf = NULL;
	server *s = calloc(1, sizeof(*s));
	if (!s)
		return 1;
	ctl_init(&s->ctl);
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":L:c:T:l:D:X:K:R:F:Mvqh", opts, NULL)) != -1) {
		switch (opt) {
		case 'L': listen_spec = optarg; break;
		case 'c': config_path = optarg; break;
		case 'T': token_arg = optarg; break;
		case O_TOKEN_FILE: token_file = optarg; break;
		case O_BUS: bus_url = optarg; break;
		case O_BUS_REP: bus_rep = optarg; break;
		case O_BUS_HZ: bus_hz_arg = optarg; break;
		case O_HTTP_MAX:
			if (cli_u64(optarg, &conn_max) < 0 || conn_max < 1 || conn_max > 100000) {
				fprintf(stderr, "stalelab serve: --http-max-connections: expected "
					"1 to 100000, got \"%s\"\n", optarg);
				goto out;
			}
			break;
		case O_HTTP_TIMEOUT:
			if (cli_u64(optarg, &timeout) < 0 || timeout > 86400) {
				fprintf(stderr, "stalelab serve: --http-timeout: expected seconds "
					"0 to 86400 (0: none), got \"%s\"\n", optarg);
				goto out;
			}
			break;
		case 'l': log_path = optarg; break;
		case 'D': device = optarg; break;
		case 'X': ckpt_on_exit = optarg; break;
		case 'K': s->ctl.ckpt_dir = optarg; break;
		case 'R': resume_path = optarg; break;
		case 'F': log_format = optarg; break;
		case 'M': want_demo = 1; break;
		case 'v': verbose = 1; break;
		case 'q': quiet = 1; break;
		case 'h': fputs(serve_usage, stdout); code = 0; goto out;
		default: code = cli_bad_option("serve", opt, argv); goto out;
		}
	}
	s->ctl.term = quiet ? NULL : stderr;
	s->ctl.verbose = verbose && !quiet;
	if (want_demo && optind < argc)
		demo_path = argv[optind++]; /* --demo FILE */
	if (optind < argc) {
		fprintf(stderr, "stalelab serve: unexpected argument '%s'\n", argv[optind]);
		goto out;
	}
	if (want_demo && (config_path || resume_path)) {
		fprintf(stderr, "stalelab serve: --demo runs its own scenes; drop --config/--resume\n");
		goto out;
	}
	if (bus_hz_arg && (cli_double(bus_hz_arg, &bus_hz) < 0 || !(bus_hz >= 0.1 && bus_hz <= 50))) {
		fprintf(stderr, "stalelab serve: --bus-hz: expected a number in [0.1, 50], got \"%s\"\n",
			bus_hz_arg);
		goto out;
	}
	int bus_default = !bus_url, bus_on = !bus_url || strcmp(bus_url, "none");
	if (!bus_url)
		bus_url = "tcp://127.0.0.1:8471";
	if (!bus_on && (bus_rep || bus_hz_arg)) {
		fprintf(stderr, "stalelab serve: %s: there is no bus with --bus none\n",
			bus_rep ? "--bus-rep" : "--bus-hz");
		goto out;
	}
	if (bus_on && !bus_rep) {
		char sib[512];
		if (bus_sibling(bus_url, sib, sizeof(sib), err, sizeof(err)) < 0) {
			fprintf(stderr, "stalelab serve: --bus %s\n", err);
			goto out;
		}
	}
	if (token_arg && token_file) {
		fprintf(stderr, "stalelab serve: --token and --token-file: give one\n");
		goto out;
	}
	s->token = read_token(token_arg, token_file, err);
	if (!s->token && err[0]) {
		fprintf(stderr, "stalelab serve: %s\n", err);
		goto out;
	}
	if (want_demo) {
		int drc;
		if (demo_path) {
			json_t *dj;
			if (cli_read_json(demo_path, &dj, err) < 0) {
				fprintf(stderr, "stalelab serve: %s\n", err);
				goto out;
			}
			drc = demo_parse(dj, &s->ctl.demo, err);
			json_decref(dj);
		} else {
			drc = demo_builtin(&s->ctl.demo, err);
		}
		if (drc < 0) {
			fprintf(stderr, "stalelab serve: %s%s%s\n", demo_path ? demo_path : "",
				demo_path ? ": " : "", err);
			goto out;
		}
	}
	struct sockaddr_storage sa;
	socklen_t sa_len;
	if (parse_listen(listen_spec, &sa, &sa_len) < 0) {
		fprintf(stderr, "stalelab serve: --listen: expected [ADDRESS]:PORT, PORT or "
			"[IPv6]:PORT, got \"%s\"\n", listen_spec);
		goto out;
	}
	run_config cfg;
	serve_defaults(&cfg);
	if (config_path) {
		if (cli_read_json(config_path, &conf, err) < 0) {
			fprintf(stderr, "stalelab serve: %s\n", err);
			goto out;
		}
		config_defaults(&cfg);
		runlog_strip(conf); /* a log's first record is a run object too */
		if (config_apply_json(conf, &cfg, err) < 0 ||
		    sched_from_json(json_object_get(conf, "schedule"), &cfg, &sched,
				    &n_sched, err) < 0) {
			fprintf(stderr, "stalelab serve: %s: %s\n", config_path, err);
			goto out;
		}
	}
	if (device) {
		json_t *d = json_pack("{s:s}", "device", device);
		int rc = config_apply_json(d, &cfg, err);
		json_decref(d);
		if (rc < 0) {
			fprintf(stderr, "stalelab serve: --device: %s\n", err);
			goto out;
		}
	}
	if (!is_loopback(&sa) && !s->token)
		fprintf(stderr, "stalelab serve: warning: listening on %s without a token: "
			"anyone who can reach it can change or stop the run\n", listen_spec);
	if (bus_on && !s->token && (!bus_url_local(bus_url) || (bus_rep && !bus_url_local(bus_rep))))
		fprintf(stderr, "stalelab serve: warning: the bus on %s without a token: "
			"anyone who can reach it can change or stop the run\n",
			bus_url_local(bus_url) ? bus_rep : bus_url);
	if (log_path) {
		if (runlog_open(&s->ctl.log, log_path, log_format, 1, err) < 0) {
			fprintf(stderr, "stalelab serve: %s\n", err);
			code = 1; /* as `stalelab run`: a runtime failure */
			goto out;
		}
		s->ctl.have_log = 1;
	}
	/* signals go to the main thread only (sigwait below) */
	sigset_t set;
	cli_block_signals(&set, 0);
	signal(SIGPIPE, SIG_IGN); /* a client gone away is a write error */

	if (resume_path && ckpt_read(resume_path, &ckpt, &ckpt_len, &cfg, err) < 0) {
		fprintf(stderr, "stalelab serve: %s\n", err);
		goto out;
	}
	code = 1; /* from here on, failures are the machine's */
	conn_max = fd_room(conn_max, quiet);
	s->timeout = (unsigned)timeout;
	s->keepalive = timeout ? (timeout / 3.0 < 15 ? timeout / 3.0 : 15) : 15;
	if ((fd = listen_on(listen_spec, &sa, sa_len, err)) < 0) {
		fprintf(stderr, "stalelab serve: %s\n", err);
		goto out;
	}
	/* poll, not select: a connection's descriptor may be over 1023 */
	s->mhd = MHD_start_daemon(MHD_USE_POLL_INTERNAL_THREAD |
					  MHD_USE_THREAD_PER_CONNECTION |
					  (sa.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
				  0, NULL, NULL, on_request, s,
				  MHD_OPTION_LISTEN_SOCKET, fd,
				  MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
				  MHD_OPTION_CONNECTION_TIMEOUT, s->timeout,
				  MHD_OPTION_CONNECTION_LIMIT, (unsigned)conn_max,
				  MHD_OPTION_THREAD_STACK_SIZE, (size_t)THREAD_STACK,
				  MHD_OPTION_END);
	if (!s->mhd) {
		fprintf(stderr, "stalelab serve: --listen %s: cannot start the HTTP server: %s\n",
			listen_spec, strerror(errno));
		goto out;
	}
	char bus_line[1200] = "";
	int rc;
	if (bus_on) {
		rc = bus_start(&bs, &s->ctl, bus_url, bus_rep, s->token, bus_hz, err);
		if (rc == -SL_ESTATE && bus_default) {
			/* the default port taken (another daemon): go on without */
			snprintf(bus_line, sizeof(bus_line), "stalelab serve: warning: no bus: %s\n", err);
		} else if (rc < 0) {
			fprintf(stderr, "stalelab serve: %s\n", err);
			code = rc == -SL_EINVAL ? 2 : 1;
			goto out;
		} else {
			snprintf(bus_line, sizeof(bus_line), "stalelab serve: bus on %s (commands on %s)\n",
				 bus_url, bus_rep_url(bs));
		}
	}
	rc = want_demo ? ctl_demo_start(&s->ctl, err)
			   : ctl_start(&s->ctl, &cfg, ckpt ? NULL : sched, ckpt ? 0 : n_sched,
				       ckpt, ckpt_len, err);
	if (rc < 0) {
		fprintf(stderr, "stalelab serve: %s\n", err);
		code = 2;
		goto out;
	}
	char url[96];
	socket_url(fd, url, sizeof(url));
	/* one write: scripts read the address as soon as the line is there */
	char line[2048];
	snprintf(line, sizeof(line), "stalelab serve: listening on %s (rule %s, %d workers, %s)\n%s",
		 url, want_demo ? s->ctl.demo.base.rule : cfg.rule,
		 want_demo ? s->ctl.demo.base.workers : cfg.workers,
		 want_demo ? s->ctl.demo.base.model : cfg.model, bus_line);
	fputs(line, stderr);
	int sig = 0;
	sigwait(&set, &sig);
	/* while stopping, more of them are ignored: `make run` passes its own
	 * SIGINT or SIGTERM on top of the terminal's, and a signal that lands
	 * on a thread that does not block it (OpenBLAS makes its threads
	 * before main runs) would end the process before the end record */
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	fprintf(stderr, "stalelab serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
	code = 0;
	if (!quiet)
		ctl_summary(&s->ctl, stderr);
	if (ckpt_on_exit) {
		size_t bytes = 0;
		uint64_t v = 0;
		rc = ctl_checkpoint(&s->ctl, ckpt_on_exit, &bytes, &v, err);
		if (rc == 0)
			fprintf(stderr, "stalelab serve: checkpoint at v %llu in %s (%zu bytes)\n",
				(unsigned long long)v, ckpt_on_exit, bytes);
		else if (rc != -SL_ESTATE) {
			fprintf(stderr, "stalelab serve: checkpoint on exit failed: %s\n", err);
			code = 1;
		}
	}
out:
	bus_stop(bs);
	events_close(&s->ctl.ev);
	if (s->mhd)
		MHD_stop_daemon(s->mhd); /* closes the listening socket too */
	else if (fd >= 0)
		close(fd);
	ctl_free(&s->ctl);
	if (s->ctl.have_log)
		runlog_close(&s->ctl.log);
	json_decref(conf);
	free(sched);
	free(ckpt);
	free((char *)s->token);
	free(s);
	return code;
}
