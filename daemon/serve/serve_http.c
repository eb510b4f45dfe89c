/* serve_http.c - the HTTP transport of `stalelab serve` over control.c:
 * libmicrohttpd (a thread per connection, so a Server-Sent Events stream
 * may block waiting for news), the token check, request bodies and their
 * limits, Server-Sent Events, the listening socket. Every answer comes
 * from control.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli.h"
#include "jsonout.h"
#include "serve_http.h"
#include "web.h"

#define BODY_MAX (1u << 20) /* request bodies: 1 MiB */
#define THREAD_STACK (256u << 10) /* per connection thread */

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
int
http_parse_listen(const char *spec, struct sockaddr_storage *sa, socklen_t *len)
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

int
http_is_loopback(const struct sockaddr_storage *sa)
{
	if (sa->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* "http://127.0.0.1:8470/" or "http://[::1]:8470/" of a bound socket */
void
http_socket_url(int fd, char *out, size_t cap)
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
int
http_listen_on(const char *spec, const struct sockaddr_storage *sa, socklen_t len,
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
unsigned long long
http_fd_room(unsigned long long want, int quiet)
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

int
http_start(server *s, int fd, int family, unsigned conn_max)
{
	/* poll, not select: a connection's descriptor may be over 1023 */
	s->mhd = MHD_start_daemon(MHD_USE_POLL_INTERNAL_THREAD |
					  MHD_USE_THREAD_PER_CONNECTION |
					  (family == AF_INET6 ? MHD_USE_IPv6 : 0),
				  0, NULL, NULL, on_request, s,
				  MHD_OPTION_LISTEN_SOCKET, fd,
				  MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
				  MHD_OPTION_CONNECTION_TIMEOUT, s->timeout,
				  MHD_OPTION_CONNECTION_LIMIT, conn_max,
				  MHD_OPTION_THREAD_STACK_SIZE, (size_t)THREAD_STACK,
				  MHD_OPTION_END);
	return s->mhd ? 0 : -1;
}

void
http_stop(server *s)
{
	MHD_stop_daemon(s->mhd); /* closes the listening socket too */
	s->mhd = NULL;
}
