/* bus_fuzz.c - libFuzzer harness for the bus's messages (daemon/serve/busmsg.c,
 * docs/bus.md): any bytes as a REP request. bus_req_parse answers 0 or an
 * error status (400, 413) with a message that names a field; a parsed
 * request has a known method, an absolute path, a body that is JSON text;
 * its reply and error messages are always built and read back as the JSON
 * they were built from; its id is remembered and found again. The same
 * bytes as a --bus URL: bus_sibling never overruns.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 -D_GNU_SOURCE \
 *     -Iengine -Idaemon tests/fuzz/bus_fuzz.c daemon/serve/busmsg.c \
 *     daemon/formats/jsonout.c -o build/bus_fuzz -ljansson
 *   build/bus_fuzz -max_total_time=60 tests/fuzz/corpus/bus  (a copy of it) */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "busmsg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define EXPECT(cond, ...)                                                   \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "bus_fuzz: expected %s: ", #cond);  \
			fprintf(stderr, __VA_ARGS__);                       \
			fputc('\n', stderr);                                \
			abort();                                            \
		}                                                           \
	} while (0)

static const char *const named[] = {"request: ", "id: ", "method: ", "path: ",
	"query: ", "token: ", "body: ", NULL};

/* err starts with a known field, or an unknown field's name, then ": " */
static int
names_field(const char *err)
{
	for (int i = 0; named[i]; i++)
		if (!strncmp(err, named[i], strlen(named[i])))
			return 1;
	return strstr(err, ": unknown field") != NULL;
}

static json_t *
load(const char *t, size_t n)
{
	json_t *j = json_loadb(t, n, JSON_REJECT_DUPLICATES, NULL);
	EXPECT(j && json_is_object(j), "a built message does not read back: %.*s", (int)n, t);
	return j;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	bus_req q;
	char err[SL_ERR_LEN] = "";
	size_t n = 0;
	int st = bus_req_parse(data, size, &q, err, sizeof(err));
	EXPECT(st == 0 || st == 400 || st == 413 || st == 500, "status %d", st);
	EXPECT(!q.id || json_is_string(q.id) || json_is_integer(q.id), "an id of another type");
	if (st) {
		EXPECT(names_field(err), "an error that names no field: %s", err);
		char *e = bus_error_build(q.id, st, "bad_request", err, &n);
		EXPECT(e, "no error reply for: %s", err);
		json_t *j = load(e, n);
		const char *msg = json_string_value(json_object_get(
			json_object_get(json_object_get(j, "body"), "error"), "message"));
		EXPECT(msg && !strcmp(msg, err), "the message changed: %s", err);
		json_decref(j);
		free(e);
	} else {
		int known = 0;
		for (const char *const *m = (const char *const[]){"GET", "HEAD", "POST", "PUT",
			     "PATCH", "DELETE", "OPTIONS", NULL}; *m; m++)
			known |= !strcmp(q.method, *m);
		EXPECT(known, "method %s", q.method);
		EXPECT(q.path[0] == '/' && !strchr(q.path, '?'), "path %s", q.path);
		if (q.body) {
			EXPECT(q.body_len == strlen(q.body), "body length");
			json_t *b = json_loadb(q.body, q.body_len, JSON_DECODE_ANY, NULL);
			EXPECT(b, "body is not JSON: %s", q.body);
			EXPECT(json_equal(b, json_object_get(q.root, "body")), "body changed: %s",
			       q.body);
			json_decref(b);
		}
		/* control's answer, as the bus sends it: the request itself as
		 * the body, or the query as text */
		ctl_reply r;
		memset(&r, 0, sizeof(r));
		r.status = 200;
		if (q.query) {
			r.text = strdup(q.query);
			r.type = "text/plain";
		} else {
			r.json = json_incref(q.root);
		}
		snprintf(r.allow, sizeof(r.allow), "GET, HEAD");
		char *t = bus_reply_build(q.id, &r, !strcmp(q.method, "HEAD"), &n);
		EXPECT(t, "no reply");
		json_t *j = load(t, n);
		EXPECT(json_integer_value(json_object_get(j, "status")) == 200, "status");
		EXPECT(q.id ? json_equal(json_object_get(j, "id"), q.id) : !json_object_get(j, "id"),
		       "the id is not echoed as it came");
		if (!strcmp(q.method, "HEAD"))
			EXPECT(json_is_null(json_object_get(j, "body")), "a HEAD reply with a body");
		else if (q.query)
			EXPECT(!strcmp(json_string_value(json_object_get(j, "text")), q.query), "text");
		else
			EXPECT(json_equal(json_object_get(j, "body"), q.root), "body");
		/* remembered under its id, found again */
		bus_seen s;
		memset(&s, 0, sizeof(s));
		bus_seen_add(&s, q.id, data, size, t, n);
		size_t m = 0;
		const char *again = bus_seen_find(&s, q.id, data, size, &m);
		EXPECT(q.id ? again && m == n && !memcmp(again, t, n) : again == NULL, "seen");
		bus_seen_free(&s);
		json_decref(j);
		free(t);
		free(r.text);
		json_decref(r.json);
	}
	bus_req_free(&q);

	/* the bytes as a URL */
	char url[300], out[64], e2[SL_ERR_LEN];
	size_t k = size < sizeof(url) - 1 ? size : sizeof(url) - 1;
	memcpy(url, data, k);
	url[k] = 0;
	if (bus_sibling(url, out, sizeof(out), e2, sizeof(e2)) == 0)
		EXPECT(!strncmp(out, "tcp://", 6) || !strncmp(out, "ipc://", 6), "sibling %s", out);
	(void)bus_url_local(url);
	return 0;
}
