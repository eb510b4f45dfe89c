/* busmsg.h - the bus's messages as pure functions, no sockets (docs/bus.md):
 * a REP request's bytes -> a request, or an error naming the field; a
 * control reply -> the reply's bytes; the ids answered lately, so that a
 * request nanomsg's REQ sends again is answered again and not applied
 * twice. daemon/serve/bus.c puts these on nanomsg; tests/test_bus.c and
 * tests/fuzz/bus_fuzz.c drive them without one. */
#ifndef SL_BUSMSG_H
#define SL_BUSMSG_H

#include <jansson.h>
#include <stddef.h>

#include "control.h"

#define BUS_MSG_MAX (1u << 20)  /* a request over this: 413 */
#define BUS_RCV_MAX (16 << 20)  /* NN_RCVMAXSIZE: beyond it nanomsg drops */
#define BUS_ID_MAX 256          /* bytes of a string id */
#define BUS_SEEN_N 64           /* ids remembered for duplicates */
#define BUS_SEEN_MAX (256u << 10) /* longer replies (reads) are not kept */

typedef struct bus_req {
	json_t *root;       /* the parsed message; owns the strings below */
	const json_t *id;   /* string or integer, or NULL */
	const char *method; /* GET HEAD POST PUT PATCH DELETE OPTIONS */
	const char *path;   /* "/api/v1/run" */
	const char *query;  /* "since=5" or NULL */
	const char *token;  /* or NULL */
	char *body;         /* the body's JSON text (malloc'd), or NULL */
	size_t body_len;
} bus_req;

/* Parse one request message of len bytes (not NUL-terminated). 0, or the
 * status to answer (400, 413; 500 out of memory) with a message naming the
 * field in err (cap bytes). q->id is set whenever the message had a valid
 * one, errors included, for the reply to echo. Free q with bus_req_free
 * whatever the result. */
int bus_req_parse(const void *msg, size_t len, bus_req *q, char *err,
		  size_t cap);
void bus_req_free(bus_req *q);

/* The reply message to id (NULL: none) of control's answer r, as compact
 * JSON: {"id", "status", "body"} or {"id", "status", "type", "text"}, with
 * "allow" and "location" when set. no_body: HEAD's answer, body null.
 * malloc'd bytes and their length, or NULL out of memory. */
char *bus_reply_build(const json_t *id, const ctl_reply *r, int no_body,
		      size_t *len);

/* The reply of an error: status and {"error": {"code", "message"}}. */
char *bus_error_build(const json_t *id, int status, const char *code,
		      const char *msg, size_t *len);

/* The last BUS_SEEN_N requests answered (with an id) and their replies. */
typedef struct bus_seen {
	char *key[BUS_SEEN_N]; /* the request's hash and length, "s" + string id or "i" + integer */
	char *reply[BUS_SEEN_N];
	size_t len[BUS_SEEN_N];
	unsigned next;
} bus_seen;

/* The reply given before to the request msg (the same bytes) with this
 * id (borrowed; NULL when not seen or no id). */
const char *bus_seen_find(const bus_seen *s, const json_t *id, const void *msg,
			  size_t msg_len, size_t *len);
/* Remember reply (copied) as the answer to msg with id (nothing without an id, or
 * for a reply over BUS_SEEN_MAX bytes: a long read, asked again, is read
 * again; changes answer in a few hundred bytes); the oldest of BUS_SEEN_N
 * goes. */
void bus_seen_add(bus_seen *s, const json_t *id, const void *msg, size_t msg_len,
		  const char *reply, size_t len);
void bus_seen_free(bus_seen *s);

/* The REP socket's URL next to the PUB one: tcp://H:P -> tcp://H:(P+1),
 * ipc://PATH -> ipc://PATH.rep. 0, or -1 with err when there is none (port
 * 0 or 65535, another transport). */
int bus_sibling(const char *pub, char *out, size_t cap, char *err,
		size_t errcap);

/* Does url bind to this machine only (loopback, a file, in-process)? */
int bus_url_local(const char *url);

#endif
