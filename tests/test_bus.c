/* test_bus.c - the bus's messages without sockets (busmsg.c: request
 * parsing, reply building, the ids answered lately, the sibling URL), the
 * shared token compare, and bus_start's errors on real sockets. */
#include <jansson.h>
#include <time.h>

#include "bus.h"
#include "busmsg.h"
#include "control.h"
#include "testutil.h"

/* parse text; the status it gives */
static int
parse(const char *text, bus_req *q, char *err)
{
	return bus_req_parse(text, strlen(text), q, err, SL_ERR_LEN);
}

START_TEST(parse_full_request)
{
	bus_req q;
	char err[SL_ERR_LEN] = "";
	int st = parse("{\"id\":\"tui-1-7\",\"method\":\"PATCH\",\"path\":\"/api/v1/run\","
		       "\"query\":\"since=5\",\"body\":{\"lr\":0.01},\"token\":\"s3cret\"}", &q, err);
	ck_assert_msg(st == 0, "%d %s", st, err);
	ck_assert_str_eq(json_string_value(q.id), "tui-1-7");
	ck_assert_str_eq(q.method, "PATCH");
	ck_assert_str_eq(q.path, "/api/v1/run");
	ck_assert_str_eq(q.query, "since=5");
	ck_assert_str_eq(q.token, "s3cret");
	ck_assert_str_eq(q.body, "{\"lr\":0.01}"); /* the shortest form, as HTTP would carry */
	ck_assert_uint_eq(q.body_len, strlen(q.body));
	bus_req_free(&q);

	/* the least: method and path; an integer id; body null is no body */
	st = parse("{\"method\":\"GET\",\"path\":\"/\",\"id\":42,\"body\":null}", &q, err);
	ck_assert_msg(st == 0, "%s", err);
	ck_assert_int_eq(json_integer_value(q.id), 42);
	ck_assert_ptr_null(q.body);
	ck_assert_ptr_null(q.query);
	ck_assert_ptr_null(q.token);
	bus_req_free(&q);

	/* a body of another JSON type goes as its JSON text */
	st = parse("{\"method\":\"POST\",\"path\":\"/api/v1/checkpoint\",\"body\":\"x\"}", &q, err);
	ck_assert_msg(st == 0, "%s", err);
	ck_assert_str_eq(q.body, "\"x\"");
	bus_req_free(&q);
}
END_TEST

/* every error names its field, and echoes a valid id */
START_TEST(parse_errors_name_the_field)
{
	static const struct {
		const char *text;
		const char *prefix; /* the message starts with it */
		int echo;           /* the id (7) is echoed */
	} cases[] = {
		{"nope", "request: not JSON", 0},
		{"", "request: not JSON", 0},
		{"[1,2]", "request: expected a JSON object", 0},
		{"\"GET\"", "request: expected a JSON object", 0},
		{"{\"method\":\"GET\",\"method\":\"PUT\",\"path\":\"/\"}", "request: not JSON", 0},
		{"{\"id\":1.5,\"method\":\"GET\",\"path\":\"/\"}", "id: expected a string or an integer", 0},
		{"{\"id\":[7],\"method\":\"GET\",\"path\":\"/\"}", "id: expected a string or an integer", 0},
		{"{\"id\":true,\"method\":\"GET\",\"path\":\"/\"}", "id: expected a string or an integer", 0},
		{"{\"id\":7,\"path\":\"/\"}", "method: missing", 1},
		{"{\"id\":7,\"method\":5,\"path\":\"/\"}", "method: expected a string", 1},
		{"{\"id\":7,\"method\":\"FETCH\",\"path\":\"/\"}", "method: expected one of", 1},
		{"{\"id\":7,\"method\":\"get\",\"path\":\"/\"}", "method: expected one of", 1},
		{"{\"id\":7,\"method\":\"GET\"}", "path: missing", 1},
		{"{\"id\":7,\"method\":\"GET\",\"path\":null}", "path: expected a string", 1},
		{"{\"id\":7,\"method\":\"GET\",\"path\":\"api/v1/status\"}", "path: expected an absolute path", 1},
		{"{\"id\":7,\"method\":\"GET\",\"path\":\"/api/v1/runs?series=1\"}", "path: give the query", 1},
		{"{\"id\":7,\"method\":\"GET\",\"path\":\"/\",\"query\":5}", "query: expected a string", 1},
		{"{\"id\":7,\"method\":\"GET\",\"path\":\"/\",\"token\":{}}", "token: expected a string", 1},
		{"{\"id\":7,\"method\":\"GET\",\"path\":\"/\",\"Body\":{}}", "Body: unknown field", 1},
		{"{\"id\":7,\"method\":\"GET\",\"path\":\"/\",\"x\\u0000\":1}", "request: not JSON", 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bus_req q;
		char err[SL_ERR_LEN] = "";
		int st = parse(cases[i].text, &q, err);
		ck_assert_msg(st == 400, "%s: %d, want 400", cases[i].text, st);
		ck_assert_msg(!strncmp(err, cases[i].prefix, strlen(cases[i].prefix)),
			      "%s: \"%s\", want \"%s...\"", cases[i].text, err, cases[i].prefix);
		ck_assert_msg(cases[i].echo ? json_integer_value(q.id) == 7 : q.id == NULL,
			      "%s: the id", cases[i].text);
		bus_req_free(&q);
	}
	/* a NUL byte inside the message (not JSON text) */
	bus_req q;
	char err[SL_ERR_LEN];
	ck_assert_int_eq(bus_req_parse("{\"method\":\"GET\"\0}", 17, &q, err, sizeof(err)), 400);
	ck_assert_msg(!strncmp(err, "request: not JSON", 17), "%s", err);
	bus_req_free(&q);
	/* a string id over BUS_ID_MAX bytes */
	char big[BUS_ID_MAX + 100];
	snprintf(big, sizeof(big), "{\"id\":\"%0*d\",\"method\":\"GET\",\"path\":\"/\"}",
		 BUS_ID_MAX + 1, 0);
	ck_assert_int_eq(parse(big, &q, err), 400);
	ck_assert_msg(!strncmp(err, "id: longer than", 15), "%s", err);
	bus_req_free(&q);
	/* jansson's error quotes the input, here not UTF-8: the message is
	 * made UTF-8, so the error reply is still JSON (the fuzzer found it) */
	static const char bad_utf8[] = "{\"i\\\\\\\\\\\xca\xa3\xa3\x9b\xa3\xa3\xf5\xff";
	ck_assert_int_eq(bus_req_parse(bad_utf8, sizeof(bad_utf8) - 1, &q, err, sizeof(err)), 400);
	ck_assert_msg(!strncmp(err, "request: not JSON", 17), "%s", err);
	json_t *m = json_string(err);
	ck_assert_msg(m != NULL, "not UTF-8: %s", err);
	json_decref(m);
	bus_req_free(&q);
	/* a long unknown field name is cut, on a character boundary */
	char longkey[400];
	snprintf(longkey, sizeof(longkey), "{\"%s\":1}",
		 "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		 "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		 "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		 "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9x");
	ck_assert_int_eq(parse(longkey, &q, err), 400);
	size_t n = 0;
	char *out = bus_error_build(q.id, 400, "bad_request", err, &n);
	ck_assert_ptr_nonnull(out); /* the message is still UTF-8 */
	free(out);
	bus_req_free(&q);
}
END_TEST

/* the 1 MiB limit: exactly 1 MiB parses, one byte more is 413 */
START_TEST(parse_size_limit)
{
	static const char req[] = "{\"method\":\"GET\",\"path\":\"/api/v1/status\"}";
	char *buf = malloc(BUS_MSG_MAX + 1);
	ck_assert_ptr_nonnull(buf);
	memset(buf, ' ', BUS_MSG_MAX + 1);
	memcpy(buf, req, strlen(req));
	bus_req q;
	char err[SL_ERR_LEN];
	ck_assert_int_eq(bus_req_parse(buf, BUS_MSG_MAX, &q, err, sizeof(err)), 0);
	bus_req_free(&q);
	ck_assert_int_eq(bus_req_parse(buf, BUS_MSG_MAX + 1, &q, err, sizeof(err)), 413);
	ck_assert_msg(strstr(err, "request: 1048577 bytes, over the limit of 1 MiB"), "%s", err);
	bus_req_free(&q);
	free(buf);
}
END_TEST

static json_t *
load(const char *text, size_t len)
{
	json_error_t je;
	json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	ck_assert_msg(j != NULL, "%.*s: %s", (int)len, text, je.text);
	return j;
}

START_TEST(reply_build)
{
	ctl_reply r;
	memset(&r, 0, sizeof(r));
	r.status = 201;
	r.json = json_pack("{s:i}", "run", 2);
	snprintf(r.location, sizeof(r.location), "/api/v1/runs/2");
	json_t *id = json_string("tui-9");
	size_t n = 0;
	char *t = bus_reply_build(id, &r, 0, &n);
	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(n, strlen(t));
	ck_assert_str_eq(t, "{\"id\":\"tui-9\",\"status\":201,\"body\":{\"run\":2},"
			    "\"location\":\"/api/v1/runs/2\"}");
	free(t);
	/* HEAD: no body; no id: none echoed */
	t = bus_reply_build(NULL, &r, 1, &n);
	ck_assert_str_eq(t, "{\"status\":201,\"body\":null,\"location\":\"/api/v1/runs/2\"}");
	free(t);
	ctl_reply_free(&r);

	/* a text answer, with its type and the Allow header */
	r.status = 200;
	r.text = strdup("# HELP x\nx 1\n");
	r.type = "text/plain; version=0.0.4";
	snprintf(r.allow, sizeof(r.allow), "GET, HEAD");
	t = bus_reply_build(id, &r, 0, &n);
	json_t *j = load(t, n);
	ck_assert_str_eq(json_string_value(json_object_get(j, "type")), "text/plain; version=0.0.4");
	ck_assert_str_eq(json_string_value(json_object_get(j, "text")), "# HELP x\nx 1\n");
	ck_assert_str_eq(json_string_value(json_object_get(j, "allow")), "GET, HEAD");
	ck_assert_ptr_null(json_object_get(j, "body"));
	json_decref(j);
	free(t);
	ctl_reply_free(&r);

	/* no body at all (204) */
	r.status = 204;
	t = bus_reply_build(id, &r, 0, &n);
	ck_assert_str_eq(t, "{\"id\":\"tui-9\",\"status\":204,\"body\":null}");
	free(t);

	/* an error */
	t = bus_error_build(id, 413, "too_large", "request: over 1 MiB", &n);
	j = load(t, n);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "status")), 413);
	ck_assert_str_eq(json_string_value(json_object_get(j, "id")), "tui-9");
	ck_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(json_object_get(j, "body"), "error"), "code")),
			 "too_large");
	json_decref(j);
	free(t);
	json_decref(id);
}
END_TEST

START_TEST(seen_ids)
{
	bus_seen s;
	memset(&s, 0, sizeof(s));
	size_t n = 0;
	json_t *ids[BUS_SEEN_N + 1];
	char reply[32];
	for (int i = 0; i <= BUS_SEEN_N; i++) {
		ids[i] = json_sprintf("req-%d", i);
		snprintf(reply, sizeof(reply), "{\"n\":%d}", i);
		ck_assert_ptr_null(bus_seen_find(&s, ids[i], "m", 1, &n));
		bus_seen_add(&s, ids[i], "m", 1, reply, strlen(reply));
	}
	/* the last 64 are there with their replies; the first is gone */
	ck_assert_ptr_null(bus_seen_find(&s, ids[0], "m", 1, &n));
	for (int i = 1; i <= BUS_SEEN_N; i++) {
		snprintf(reply, sizeof(reply), "{\"n\":%d}", i);
		const char *r = bus_seen_find(&s, ids[i], "m", 1, &n);
		ck_assert_msg(r && !strcmp(r, reply), "req-%d: %s", i, r ? r : "(none)");
		ck_assert_uint_eq(n, strlen(reply));
	}
	/* integer 7 and string "7" are different ids; no id is never seen */
	json_t *i7 = json_integer(7), *s7 = json_string("7");
	bus_seen_add(&s, i7, "m", 1, "int", 3);
	ck_assert_ptr_null(bus_seen_find(&s, s7, "m", 1, &n));
	ck_assert_str_eq(bus_seen_find(&s, i7, "m", 1, &n), "int");
	/* the same id on another request (a client counting from 1 again) is
	 * not a resend: it gets its own answer */
	ck_assert_ptr_null(bus_seen_find(&s, i7, "M", 1, &n));
	ck_assert_ptr_null(bus_seen_find(&s, i7, "mm", 2, &n));
	/* a reply over BUS_SEEN_MAX is not kept (and takes no slot) */
	char *big = malloc(BUS_SEEN_MAX + 1);
	ck_assert_ptr_nonnull(big);
	memset(big, 'x', BUS_SEEN_MAX + 1);
	json_t *b = json_string("big");
	bus_seen_add(&s, b, "m", 1, big, BUS_SEEN_MAX + 1);
	ck_assert_ptr_null(bus_seen_find(&s, b, "m", 1, &n));
	bus_seen_add(&s, b, "m", 1, big, BUS_SEEN_MAX);
	ck_assert_ptr_nonnull(bus_seen_find(&s, b, "m", 1, &n));
	ck_assert_uint_eq(n, BUS_SEEN_MAX);
	json_decref(b);
	free(big);
	bus_seen_add(&s, NULL, "m", 1, "none", 4);
	ck_assert_ptr_null(bus_seen_find(&s, NULL, "m", 1, &n));
	ck_assert_str_eq(bus_seen_find(&s, i7, "m", 1, &n), "int"); /* no slot taken */
	json_decref(i7);
	json_decref(s7);
	for (int i = 0; i <= BUS_SEEN_N; i++)
		json_decref(ids[i]);
	bus_seen_free(&s);
}
END_TEST

START_TEST(sibling_urls)
{
	static const struct {
		const char *pub, *rep; /* rep NULL: an error */
	} cases[] = {
		{"tcp://127.0.0.1:8471", "tcp://127.0.0.1:8472"},
		{"tcp://*:9", "tcp://*:10"},
		{"tcp://[::1]:65534", "tcp://[::1]:65535"},
		{"ipc:///tmp/sl.bus", "ipc:///tmp/sl.bus.rep"},
		{"tcp://127.0.0.1:0", NULL},
		{"tcp://127.0.0.1:65535", NULL},
		{"tcp://127.0.0.1:70000", NULL},
		{"tcp://127.0.0.1:", NULL},
		{"tcp://127.0.0.1:84x", NULL},
		{"tcp://127.0.0.1", NULL},
		{"tcp://:8471", NULL},
		{"ipc://", NULL},
		{"inproc://x", NULL},
		{"8471", NULL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char out[64] = "", err[SL_ERR_LEN] = "";
		int rc = bus_sibling(cases[i].pub, out, sizeof(out), err, sizeof(err));
		if (cases[i].rep) {
			ck_assert_msg(rc == 0, "%s: %s", cases[i].pub, err);
			ck_assert_str_eq(out, cases[i].rep);
		} else {
			ck_assert_msg(rc < 0, "%s: %s, want an error", cases[i].pub, out);
			ck_assert_msg(!strncmp(err, cases[i].pub, strlen(cases[i].pub)),
				      "%s: the error names the URL: %s", cases[i].pub, err);
		}
	}
	ck_assert_int_eq(bus_url_local("tcp://127.0.0.1:8471"), 1);
	ck_assert_int_eq(bus_url_local("tcp://[::1]:8471"), 1);
	ck_assert_int_eq(bus_url_local("ipc:///tmp/x"), 1);
	ck_assert_int_eq(bus_url_local("tcp://*:8471"), 0);
	ck_assert_int_eq(bus_url_local("tcp://0.0.0.0:8471"), 0);
	ck_assert_int_eq(bus_url_local("tcp://10.0.0.1:8471"), 0);
}
END_TEST

START_TEST(token_compare)
{
	ck_assert_int_eq(ctl_token_ok(NULL, NULL), 1); /* no token: all may */
	ck_assert_int_eq(ctl_token_ok(NULL, "x"), 1);
	ck_assert_int_eq(ctl_token_ok("s3cret", NULL), 0);
	ck_assert_int_eq(ctl_token_ok("s3cret", "s3cret"), 1);
	ck_assert_int_eq(ctl_token_ok("s3cret", "s3cre"), 0);
	ck_assert_int_eq(ctl_token_ok("s3cret", "s3crets"), 0);
	ck_assert_int_eq(ctl_token_ok("s3cret", "S3cret"), 0);
	ck_assert_int_eq(ctl_token_ok("s3cret", ""), 0);
}
END_TEST

/* bus_start on real sockets: errors name the flag; stop is prompt */
START_TEST(start_errors)
{
	ctl c;
	ctl_init(&c);
	char err[SL_ERR_LEN] = "", url[64], rep[64];
	bus *a = NULL, *b = NULL;
	int rc = -1;
	/* a free port pair (tests run in parallel elsewhere: try a few) */
	srand((unsigned)time(NULL) ^ (unsigned)getpid());
	for (int i = 0; i < 20 && rc < 0; i++) {
		snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", 20000 + rand() % 30000);
		rc = bus_start(&a, &c, url, NULL, NULL, 4, err);
	}
	ck_assert_msg(rc == 0, "%s", err);
	ck_assert_int_eq(bus_sibling(url, rep, sizeof(rep), err, sizeof(err)), 0);
	ck_assert_str_eq(bus_rep_url(a), rep);

	/* the same URL again: in use, and --bus named */
	ck_assert_int_eq(bus_start(&b, &c, url, NULL, NULL, 4, err), -SL_ESTATE);
	ck_assert_ptr_null(b);
	ck_assert_msg(!strncmp(err, "--bus tcp://", 12) && strstr(err, "address in use"), "%s", err);
	/* a free PUB URL but the taken REP one: --bus-rep named */
	char pub2[300], dir[256];
	sl_test_tmpdir(dir, sizeof(dir));
	snprintf(pub2, sizeof(pub2), "ipc://%s/bus", dir);
	ck_assert_int_eq(bus_start(&b, &c, pub2, rep, NULL, 4, err), -SL_ESTATE);
	ck_assert_msg(!strncmp(err, "--bus-rep tcp://", 16), "%s", err);
	/* port 0 and other transports without --bus-rep: bad URLs */
	ck_assert_int_eq(bus_start(&b, &c, "tcp://127.0.0.1:0", NULL, NULL, 4, err), -SL_EINVAL);
	ck_assert_msg(strstr(err, "--bus tcp://127.0.0.1:0: port 0"), "%s", err);
	ck_assert_int_eq(bus_start(&b, &c, pub2, NULL, NULL, 0, err), -SL_EINVAL);
	ck_assert_msg(!strncmp(err, "--bus-hz: expected a number in [0.1, 50]", 40), "%s", err);
	ck_assert_int_eq(bus_start(&b, &c, "udp://x:1", NULL, NULL, 4, err), -SL_EINVAL);
	ck_assert_msg(!strncmp(err, "--bus udp://x:1", 15), "%s", err);
	ck_assert_int_eq(bus_start(&b, &c, "tcp://no-such-interface:40001", "tcp://127.0.0.1:0",
				   NULL, 4, err), -SL_EINVAL);
	ck_assert_msg(strstr(err, "--bus tcp://no-such-interface:40001: no such address or interface"),
		      "%s", err);

	/* ipc: the sibling is PATH.rep */
	ck_assert_int_eq(bus_start(&b, &c, pub2, NULL, NULL, 50, err), 0);
	char want[320];
	snprintf(want, sizeof(want), "%s.rep", pub2);
	ck_assert_str_eq(bus_rep_url(b), want);

	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	bus_stop(a);
	bus_stop(b);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	/* 0.2 s each unloaded (the threads' poll); a hang would be the case's
	 * 30 s timeout: 6 s is generous for a loaded machine and still prompt */
	ck_assert_msg(s < 6, "stop took %.2f s", s);
	ctl_free(&c);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *
bus_suite(void)
{
	Suite *s = suite_create("bus");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, parse_full_request);
	tcase_add_test(tc, parse_errors_name_the_field);
	tcase_add_test(tc, parse_size_limit);
	tcase_add_test(tc, reply_build);
	tcase_add_test(tc, seen_ids);
	tcase_add_test(tc, sibling_urls);
	tcase_add_test(tc, token_compare);
	tcase_add_test(tc, start_errors);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(bus_suite)
