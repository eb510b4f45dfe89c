/* serve_http.h - the HTTP transport of `stalelab serve` (serve_http.c):
 * libmicrohttpd over control.c, Server-Sent Events, the token check, the
 * limits and the listening socket. serve.c (the command) drives it. */
#ifndef SL_SERVE_HTTP_H
#define SL_SERVE_HTTP_H

#include <stddef.h>
#include <sys/socket.h>

#include "control.h"

/* HTTP limits (docs/reliability.md, "Slow and hostile clients"): the
 * defaults of --http-max-connections and --http-timeout */
#define CONN_MAX 1024       /* connections at once; beyond: closed at accept */
#define IDLE_TIMEOUT 30     /* seconds a connection may send and read nothing */

struct MHD_Daemon;

typedef struct server {
	ctl ctl;
	const char *token;
	struct MHD_Daemon *mhd;
	unsigned timeout;   /* --http-timeout: idle seconds (0: none) */
	double keepalive;   /* seconds between SSE comments on a quiet stream */
} server;

/* "127.0.0.1:8470", "[::1]:8470", "localhost:8470", ":8470" or "8470" (the
 * last two: loopback) -> address; 0 or -1 */
int http_parse_listen(const char *spec, struct sockaddr_storage *sa, socklen_t *len);

int http_is_loopback(const struct sockaddr_storage *sa);

/* "http://127.0.0.1:8470/" or "http://[::1]:8470/" of a bound socket */
void http_socket_url(int fd, char *out, size_t cap);

/* a listening socket on spec, or -1 with err naming --listen */
int http_listen_on(const char *spec, const struct sockaddr_storage *sa, socklen_t len,
		   char *err);

/* the connection limit that the descriptor limit leaves room for (raising
 * the soft RLIMIT_NOFILE when it can; fewer, said on stderr, when not) */
unsigned long long http_fd_room(unsigned long long want, int quiet);

/* serve s's HTTP API on the listening socket fd (of address family
 * family), conn_max connections at once, s->timeout idle seconds: 0, or
 * -1 with errno (libmicrohttpd's) */
int http_start(server *s, int fd, int family, unsigned conn_max);

/* stop serving (the listening socket closes too) */
void http_stop(server *s);

#endif
