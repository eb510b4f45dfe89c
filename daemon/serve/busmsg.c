/* busmsg.c - the bus's messages: request parsing, reply building, the ids
 * answered lately. No sockets here (daemon/serve/bus.c has them). */
#include "busmsg.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonout.h"

static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "PATCH",
	"DELETE", "OPTIONS", NULL};
static const char *const fields[] = {"id", "method", "path", "query", "body",
	"token", NULL};

/* bytes of the valid UTF-8 character at s (n bytes left), or 0 */
static size_t
utf8_char(const unsigned char *s, size_t n)
{
	unsigned c = s[0], cp;
	size_t k;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		k = 2, cp = c & 0x1F;
	else if (c >= 0xE0 && c <= 0xEF)
		k = 3, cp = c & 0x0F;
	else if (c >= 0xF0 && c <= 0xF4)
		k = 4, cp = c & 0x07;
	else
		return 0;
	if (n < k)
		return 0;
	for (size_t i = 1; i < k; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3F);
	}
	if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
	    (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return k;
}

/* printf into err and return status. The message quotes the request
 * (jansson's errors do too), so what is not UTF-8 in it, or a character
 * cut at the end, becomes '?': the reply must be JSON text. */
static int fail(char *err, size_t cap, int status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int
fail(char *err, size_t cap, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, cap, fmt, ap);
	va_end(ap);
	unsigned char *p = (unsigned char *)err;
	for (size_t n = strlen(err), k; n; p += k, n -= k)
		if (!(k = utf8_char(p, n)))
			*p = '?', k = 1;
	return status;
}

/* the string field key of o: 0 (absent: *out NULL) or -1 */
static int
opt_string(const json_t *o, const char *key, const char **out)
{
	const json_t *v = json_object_get(o, key);
	*out = v ? json_string_value(v) : NULL;
	return v && !json_is_string(v) ? -1 : 0;
}

int
bus_req_parse(const void *msg, size_t len, bus_req *q, char *err, size_t cap)
{
	memset(q, 0, sizeof(*q));
	if (len > BUS_MSG_MAX)
		return fail(err, cap, 413, "request: %zu bytes, over the limit of 1 MiB (%u bytes)",
			    len, BUS_MSG_MAX);
	json_error_t je;
	q->root = json_loadb(msg, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
	if (!q->root)
		return fail(err, cap, 400, "request: not JSON: line %d, column %d: %s",
			    je.line, je.column, je.text);
	if (!json_is_object(q->root))
		return fail(err, cap, 400, "request: expected a JSON object");
	/* the id first, so that every later error can echo it */
	const json_t *id = json_object_get(q->root, "id");
	if (id && !json_is_string(id) && !json_is_integer(id))
		return fail(err, cap, 400, "id: expected a string or an integer");
	if (id && json_is_string(id) && json_string_length(id) > BUS_ID_MAX)
		return fail(err, cap, 400, "id: longer than %d bytes", BUS_ID_MAX);
	q->id = id;
	const char *key;
	json_t *v;
	json_object_foreach(q->root, key, v) {
		int known = 0;
		for (int i = 0; fields[i]; i++)
			known |= !strcmp(key, fields[i]);
		if (!known)
			return fail(err, cap, 400, "%.64s: unknown field (expected id, method, "
				    "path, query, body, token)", key);
	}
	if (!json_object_get(q->root, "method"))
		return fail(err, cap, 400, "method: missing");
	if (opt_string(q->root, "method", &q->method) < 0)
		return fail(err, cap, 400, "method: expected a string");
	int known = 0;
	for (int i = 0; methods[i]; i++)
		known |= !strcmp(q->method, methods[i]);
	if (!known)
		return fail(err, cap, 400, "method: expected one of GET, HEAD, POST, PUT, "
			    "PATCH, DELETE, OPTIONS, got \"%.32s\"", q->method);
	if (!json_object_get(q->root, "path"))
		return fail(err, cap, 400, "path: missing");
	if (opt_string(q->root, "path", &q->path) < 0)
		return fail(err, cap, 400, "path: expected a string");
	if (q->path[0] != '/')
		return fail(err, cap, 400, "path: expected an absolute path such as /api/v1/status");
	if (strchr(q->path, '?'))
		return fail(err, cap, 400, "path: give the query string in \"query\", not after '?'");
	if (opt_string(q->root, "query", &q->query) < 0)
		return fail(err, cap, 400, "query: expected a string such as \"since=5\"");
	if (opt_string(q->root, "token", &q->token) < 0)
		return fail(err, cap, 400, "token: expected a string");
	const json_t *body = json_object_get(q->root, "body");
	if (body && !json_is_null(body)) {
		q->body = jsonout_dumps(body);
		if (!q->body)
			return fail(err, cap, 500, "body: out of memory");
		q->body_len = strlen(q->body);
	}
	return 0;
}

void
bus_req_free(bus_req *q)
{
	json_decref(q->root);
	free(q->body);
	memset(q, 0, sizeof(*q));
}

/* o as compact JSON bytes (consumed) */
static char *
dump(json_t *o, size_t *len)
{
	char *t = o ? jsonout_dumps(o) : NULL;
	json_decref(o);
	*len = t ? strlen(t) : 0;
	return t;
}

char *
bus_reply_build(const json_t *id, const ctl_reply *r, int no_body, size_t *len)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	if (id)
		json_object_set_new(o, "id", json_copy((json_t *)id));
	json_object_set_new(o, "status", json_integer(r->status));
	if (r->text && !no_body) {
		json_t *t = json_string(r->text);
		if (!t) { /* control's texts are UTF-8; never send what is not */
			json_decref(o);
			return bus_error_build(id, 500, "internal", "reply: text is not UTF-8", len);
		}
		json_object_set_new(o, "type", json_string(r->type ? r->type : "text/plain"));
		json_object_set_new(o, "text", t);
	} else {
		json_object_set_new(o, "body", r->json && !no_body ? json_incref(r->json)
								   : json_null());
	}
	if (r->allow[0])
		json_object_set_new(o, "allow", json_string(r->allow));
	if (r->location[0])
		json_object_set_new(o, "location", json_string(r->location));
	return dump(o, len);
}

char *
bus_error_build(const json_t *id, int status, const char *code,
		const char *msg, size_t *len)
{
	json_t *o = json_pack("{s:i,s:{s:{s:s,s:s}}}", "status", status, "body",
			      "error", "code", code, "message", msg);
	if (o && id)
		json_object_set_new(o, "id", json_copy((json_t *)id));
	return dump(o, len);
}

/* the key of a request in s->key: the FNV-1a hash and length of its
 * bytes, then "s" + string id or "i" + integer id; NULL without an id.
 * REQ sends a request again byte for byte: another request that reuses
 * an id (a client counting from 1 again) is another request. */
static char *
seen_key(const json_t *id, const void *msg, size_t msg_len)
{
	uint64_t h = 14695981039346656037ull;
	for (size_t i = 0; i < msg_len; i++)
		h = (h ^ ((const unsigned char *)msg)[i]) * 1099511628211ull;
	char head[48];
	int hn = snprintf(head, sizeof(head), "%016llx %zu ", (unsigned long long)h, msg_len);
	char *k = NULL;
	if (json_is_string(id)) {
		size_t n = json_string_length(id);
		if ((k = malloc((size_t)hn + n + 2))) {
			memcpy(k, head, (size_t)hn);
			k[hn] = 's';
			memcpy(k + hn + 1, json_string_value(id), n);
			k[(size_t)hn + n + 1] = 0;
		}
	} else if (json_is_integer(id)) {
		if ((k = malloc((size_t)hn + 32)))
			snprintf(k, (size_t)hn + 32, "%si%lld", head, (long long)json_integer_value(id));
	}
	return k;
}

const char *
bus_seen_find(const bus_seen *s, const json_t *id, const void *msg, size_t msg_len,
	      size_t *len)
{
	char *k = seen_key(id, msg, msg_len);
	const char *found = NULL;
	for (int i = 0; k && i < BUS_SEEN_N && !found; i++)
		if (s->key[i] && !strcmp(s->key[i], k)) {
			found = s->reply[i];
			*len = s->len[i];
		}
	free(k);
	return found;
}

void
bus_seen_add(bus_seen *s, const json_t *id, const void *msg, size_t msg_len,
	     const char *reply, size_t len)
{
	if (len > BUS_SEEN_MAX)
		return;
	char *k = seen_key(id, msg, msg_len), *r = k ? malloc(len + 1) : NULL;
	if (!r) {
		free(k);
		return;
	}
	memcpy(r, reply, len);
	r[len] = 0;
	unsigned slot = s->next++ % BUS_SEEN_N;
	free(s->key[slot]);
	free(s->reply[slot]);
	s->key[slot] = k;
	s->reply[slot] = r;
	s->len[slot] = len;
}

void
bus_seen_free(bus_seen *s)
{
	for (int i = 0; i < BUS_SEEN_N; i++) {
		free(s->key[i]);
		free(s->reply[i]);
	}
	memset(s, 0, sizeof(*s));
}

int
bus_sibling(const char *pub, char *out, size_t cap, char *err, size_t errcap)
{
	if (!strncmp(pub, "ipc://", 6) && pub[6]) {
		if ((size_t)snprintf(out, cap, "%s.rep", pub) >= cap)
			return fail(err, errcap, -1, "%s: the path is too long", pub);
		return 0;
	}
	if (strncmp(pub, "tcp://", 6))
		return fail(err, errcap, -1, "%s: expected tcp://HOST:PORT or ipc://PATH "
			    "(or give --bus-rep)", pub);
	const char *colon = strrchr(pub + 6, ':');
	unsigned long long port = 0;
	size_t digits = colon ? strspn(colon + 1, "0123456789") : 0;
	if (digits && digits <= 5 && !colon[1 + digits])
		port = strtoull(colon + 1, NULL, 10);
	if (!colon || colon == pub + 6 || !digits || colon[1 + digits] || port > 65535)
		return fail(err, errcap, -1, "%s: expected tcp://HOST:PORT", pub);
	if (port == 0 || port == 65535)
		return fail(err, errcap, -1, "%s: port %llu: the command socket takes the next "
			    "port, so the bus needs a fixed port from 1 to 65534", pub, port);
	if ((size_t)snprintf(out, cap, "%.*s:%llu", (int)(colon - pub), pub, port + 1) >= cap)
		return fail(err, errcap, -1, "%s: too long", pub);
	return 0;
}

int
bus_url_local(const char *url)
{
	static const char *const local[] = {"ipc://", "inproc://", "tcp://127.",
		"tcp://localhost:", "tcp://[::1]:", "tcp://lo:", "ws://127.",
		"ws://localhost:", "ws://[::1]:", "ws://lo:", NULL};
	for (int i = 0; local[i]; i++)
		if (!strncmp(url, local[i], strlen(local[i])))
			return 1;
	return 0;
}
