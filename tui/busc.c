/* busc.c - the TUI's nanomsg client (see busc.h). */
#include "busc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nanomsg/nn.h>
#include <nanomsg/pubsub.h>
#include <nanomsg/reqrep.h>

struct busc {
	int sub, req;
	char rep_url[512];
};

/* url is tcp://HOST:PORT (PORT in [1, maxport]) or ipc://PATH: 0 with
 * *port set (0 for ipc), or -1 with err naming flag */
static int
url_check(const char *flag, const char *url, long maxport, long *port, char *err, size_t errcap)
{
	*port = 0;
	if (!strncmp(url, "ipc://", 6) && url[6])
		return 0;
	if (strncmp(url, "tcp://", 6)) {
		snprintf(err, errcap, "%s: expected tcp://HOST:PORT or ipc://PATH, got '%s'", flag, url);
		return -1;
	}
	const char *colon = strrchr(url + 6, ':');
	char *end;
	*port = colon ? strtol(colon + 1, &end, 10) : 0;
	if (!colon || colon == url + 6 || !colon[1] || *end || *port < 1 || *port > maxport) {
		snprintf(err, errcap, "%s: expected tcp://HOST:PORT with a port in [1, %ld], got '%s'",
			 flag, maxport, url);
		return -1;
	}
	return 0;
}

int
busc_sibling(const char *url, char *out, size_t cap, char *err, size_t errcap)
{
	long port;
	if (url_check("--connect", url, 65534, &port, err, errcap) < 0)
		return -1;
	int n = port ? snprintf(out, cap, "%.*s:%ld", (int)(strrchr(url, ':') - url), url, port + 1)
		     : snprintf(out, cap, "%s.rep", url);
	if (n < 0 || (size_t)n >= cap) {
		snprintf(err, errcap, "--connect: URL too long");
		return -1;
	}
	return 0;
}

int
busc_rep_url(const char *url, const char *rep, char *out, size_t cap, char *err, size_t errcap)
{
	long port;
	if (!rep)
		return busc_sibling(url, out, cap, err, errcap);
	if (url_check("--connect", url, 65535, &port, err, errcap) < 0 ||
	    url_check("--rep", rep, 65535, &port, err, errcap) < 0)
		return -1;
	if (strlen(rep) >= cap) {
		snprintf(err, errcap, "--rep: URL too long");
		return -1;
	}
	memcpy(out, rep, strlen(rep) + 1);
	return 0;
}

/* nanomsg connects IPv4 only by default (tcp://[::1]:P is EINVAL): let a
 * socket for an IPv6 address use it. Only then: with the option off, a
 * connection to an IPv4 address that is refused (a daemon gone) trips an
 * assertion in nanomsg 1.1.5 and aborts. */
static void
ipv6_on(int s, const char *url)
{
	int v4only = 0;
	if (!strncmp(url, "tcp://[", 7))
		nn_setsockopt(s, NN_SOL_SOCKET, NN_IPV4ONLY, &v4only, sizeof(v4only));
}

/* a REQ socket that never re-sends by itself (busc_cancel is our re-send
 * policy) and takes large replies */
static int
req_open(busc *b)
{
	int s = nn_socket(AF_SP, NN_REQ);
	if (s < 0)
		return -1;
	int ivl = 3600 * 1000, max = -1;
	ipv6_on(s, b->rep_url);
	nn_setsockopt(s, NN_REQ, NN_REQ_RESEND_IVL, &ivl, sizeof(ivl));
	nn_setsockopt(s, NN_SOL_SOCKET, NN_RCVMAXSIZE, &max, sizeof(max));
	if (nn_connect(s, b->rep_url) < 0) {
		nn_close(s);
		return -1;
	}
	b->req = s;
	return 0;
}

busc *
busc_open(const char *url, const char *rep, char *err, size_t errcap)
{
	busc *b = calloc(1, sizeof(*b));
	if (!b) {
		snprintf(err, errcap, "out of memory");
		return NULL;
	}
	b->sub = b->req = -1;
	if (busc_rep_url(url, rep, b->rep_url, sizeof(b->rep_url), err, errcap) < 0)
		goto fail;
	b->sub = nn_socket(AF_SP, NN_SUB);
	int max = -1, ivl = 200, ivl_max = 1000;
	if (b->sub < 0)
		goto nn_fail;
	ipv6_on(b->sub, url);
	nn_setsockopt(b->sub, NN_SUB, NN_SUB_SUBSCRIBE, "", 0);
	nn_setsockopt(b->sub, NN_SOL_SOCKET, NN_RCVMAXSIZE, &max, sizeof(max));
	nn_setsockopt(b->sub, NN_SOL_SOCKET, NN_RECONNECT_IVL, &ivl, sizeof(ivl));
	nn_setsockopt(b->sub, NN_SOL_SOCKET, NN_RECONNECT_IVL_MAX, &ivl_max, sizeof(ivl_max));
	if (nn_connect(b->sub, url) < 0 || req_open(b) < 0)
		goto nn_fail;
	return b;
nn_fail:
	snprintf(err, errcap, "--connect %s: %s", url, nn_strerror(nn_errno()));
fail:
	busc_close(b);
	return NULL;
}

void
busc_close(busc *b)
{
	if (!b)
		return;
	if (b->sub >= 0)
		nn_close(b->sub);
	if (b->req >= 0)
		nn_close(b->req);
	free(b);
}

/* one message from s without waiting, copied NUL terminated */
static int
recv_now(int s, char **msg)
{
	void *buf = NULL;
	int n = nn_recv(s, &buf, NN_MSG, NN_DONTWAIT);
	if (n < 0)
		return 0;
	*msg = malloc((size_t)n + 1);
	if (*msg) {
		memcpy(*msg, buf, (size_t)n);
		(*msg)[n] = 0;
	}
	nn_freemsg(buf);
	return *msg != NULL;
}

int
busc_recv(busc *b, char **msg)
{
	return recv_now(b->sub, msg);
}

int
busc_send(busc *b, const char *text)
{
	if (b->req < 0 && req_open(b) < 0)
		return -1;
	return nn_send(b->req, text, strlen(text), NN_DONTWAIT) < 0 ? -1 : 0;
}

int
busc_reply(busc *b, char **msg)
{
	return b->req >= 0 && recv_now(b->req, msg);
}

int
busc_cancel(busc *b)
{
	if (b->req >= 0)
		nn_close(b->req);
	b->req = -1;
	return req_open(b);
}

void
busc_free(char *msg)
{
	free(msg);
}
