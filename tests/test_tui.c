/* test_tui.c - the TUI's model and the arithmetic of its pictures
 * (tui/view.c) and its bus URLs (tui/busc.c): no terminal needed. */
#include <math.h>
#include <unistd.h>

#include "busc.h"
#include "view.h"
#include "testutil.h"

START_TEST(bars_scale_to_the_tallest)
{
	double c[4] = {10, 5, 0, 0.01};
	int e[4], per;
	ck_assert_int_eq(tui_bars(c, 4, 10, 2, e, &per), 4);
	ck_assert_int_eq(per, 1);
	ck_assert_int_eq(e[0], 16); /* the tallest fills both rows */
	ck_assert_int_eq(e[1], 8);
	ck_assert_int_eq(e[2], 0);
	ck_assert_int_eq(e[3], 1); /* a non-empty bucket is never invisible */
}
END_TEST

START_TEST(bars_group_buckets_when_narrow)
{
	double c[65] = {0};
	int e[65], per;
	c[0] = 4;
	c[1] = 4;
	c[64] = 2;
	int cols = tui_bars(c, 65, 20, 1, e, &per);
	ck_assert_int_eq(per, 4);           /* ceil(65 / 20) buckets a column */
	ck_assert_int_eq(cols, 17);         /* ceil(65 / 4) */
	ck_assert_int_eq(e[0], 8);          /* buckets 0..3: 8, the tallest */
	ck_assert_int_eq(e[16], 2);         /* bucket 64 alone: 2/8 of it */
	ck_assert_int_eq(tui_bars(c, 65, 0, 1, e, &per), 0);
	double z[3] = {0, 0, 0};
	ck_assert_int_eq(tui_bars(z, 3, 3, 2, e, &per), 3);
	ck_assert_int_eq(e[0] + e[1] + e[2], 0);
}
END_TEST

START_TEST(spark_levels)
{
	ck_assert_int_eq(tui_spark_level(0, 0, 1), 1);
	ck_assert_int_eq(tui_spark_level(1, 0, 1), 8);
	ck_assert_int_eq(tui_spark_level(0.5, 0, 1), 5);
	ck_assert_int_eq(tui_spark_level(2, 0, 1), 8);  /* clamped */
	ck_assert_int_eq(tui_spark_level(3, 3, 3), 4);  /* flat: the middle */
	ck_assert_int_eq(tui_spark_level(NAN, 0, 1), 1);
}
END_TEST

START_TEST(delay_ladder)
{
	ck_assert(tui_delay_step(0, 1) == 1);
	ck_assert(tui_delay_step(2, 1) == 5);
	ck_assert(tui_delay_step(5, 1) == 10);
	ck_assert(tui_delay_step(12, 1) == 20);
	ck_assert(tui_delay_step(500, 1) == 1000);
	ck_assert(tui_delay_step(5, -1) == 2);
	ck_assert(tui_delay_step(12, -1) == 10);
	ck_assert(tui_delay_step(1, -1) == 0);
	ck_assert(tui_delay_step(0.5, -1) == 0);
}
END_TEST

static void
delay_is(const char *json, int with_where, const char *want)
{
	json_t *d = json_loads(json, 0, NULL);
	char out[64];
	tui_delay_text(d, with_where, out, sizeof(out));
	ck_assert_str_eq(out, want);
	json_decref(d);
}

START_TEST(delay_texts)
{
	delay_is("{\"dist\":\"exp\",\"mean_ms\":10.0}", 1, "exp 10 ms");
	delay_is("{\"dist\":\"const\",\"mean_ms\":2.5,\"where\":\"server\"}", 1, "const 2.5 ms at server");
	delay_is("{\"dist\":\"const\",\"mean_ms\":60,\"where\":\"server\"}", 0, "const 60 ms");
	delay_is("{\"dist\":\"version\",\"s\":3}", 1, "version s=3");
	delay_is("{\"dist\":\"none\"}", 1, "none");
	delay_is("null", 1, "none");
	delay_is("{\"mean_ms\":500}", 1, "500 ms"); /* a change may carry one field */
}
END_TEST

static void
label_is(const char *json, json_t *schema, const char *rule, const char *want)
{
	json_t *c = json_loads(json, 0, NULL);
	char out[160];
	tui_change_label(c, schema, rule, out, sizeof(out));
	ck_assert_str_eq(out, want);
	json_decref(c);
}

START_TEST(byte_texts)
{
	/* the worker table's memory column: at most 5 characters */
	const struct {
		double b;
		const char *want;
	} cases[] = {{0, "0"}, {999, "999"}, {1000, "1.0K"}, {846416, "846K"},
		     {9949999, "9.9M"}, {9950000, "10M"}, {999499999, "999M"},
		     {999500000, "1.0G"}, {3.4e12, "3.4T"}, {5e15, "5000T"}, {-1, "-"},
		     {NAN, "-"}};
	char out[16];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tui_bytes_text(cases[i].b, out, sizeof(out));
		ck_assert_msg(!strcmp(out, cases[i].want), "%.0f: \"%s\", want \"%s\"", cases[i].b,
			      out, cases[i].want);
	}
}
END_TEST

START_TEST(change_labels)
{
	json_t *schema = json_loads("{\"rules\":[{\"name\":\"ssp\",\"params\":[{\"key\":\"s\",\"default\":3}]},"
				    "{\"name\":\"asgd\",\"params\":[]}]}", 0, NULL);
	label_is("{\"event\":\"set\",\"set\":{\"lr\":0.02}}", NULL, NULL, "lr 0.02");
	label_is("{\"event\":\"set\",\"worker\":2,\"set\":{\"delay\":{\"dist\":\"const\",\"mean_ms\":500}}}",
		 NULL, NULL, "w2 delay const 500 ms");
	/* with a rule: only the parameters it reads, where not the default */
	label_is("{\"set\":{\"rule\":\"ssp\",\"rule_params\":{\"s\":2,\"lambda\":0.04}}}", schema, NULL,
		 "rule ssp (s=2)");
	label_is("{\"set\":{\"rule\":\"ssp\",\"rule_params\":{\"s\":3}}}", schema, NULL, "rule ssp");
	label_is("{\"set\":{\"rule\":\"asgd\",\"rule_params\":{\"s\":2}}}", schema, NULL, "rule asgd");
	/* parameters alone: those the run's rule reads, defaults too */
	label_is("{\"set\":{\"rule_params\":{\"s\":3,\"lambda\":0.1}}}", schema, "ssp", "params s=3");
	label_is("{\"set\":{\"rule_params\":{\"s\":2,\"lambda\":0.1}}}", NULL, "ssp", "params s=2, lambda=0.1");
	label_is("{\"set\":{\"lr\":0.1,\"paused\":true}}", NULL, NULL, "lr 0.1, paused true");
	label_is("{\"event\":\"stop\"}", NULL, NULL, "stop");
	json_decref(schema);
}
END_TEST

static char snap_buf[256];

static const char *
snap(int run, int v)
{
	snprintf(snap_buf, sizeof(snap_buf), "snapshot {\"state\":\"running\",\"run\":%d,\"version\":%d}", run, v);
	return snap_buf;
}

START_TEST(messages)
{
	tui_model m;
	tui_model_init(&m);
	ck_assert_int_eq(tui_model_message(&m, "snapshot"), -1);
	ck_assert_int_eq(tui_model_message(&m, "snapshot [1]"), -1);
	ck_assert_int_eq(tui_model_message(&m, "snapshot {"), -1);
	ck_assert_int_eq(tui_model_message(&m, " {}"), -1);
	ck_assert_int_eq(tui_model_message(&m, snap(1, 10)), 2);  /* the first: fetch the series */
	ck_assert_int_eq(tui_model_message(&m, snap(1, 20)), 1);
	ck_assert_int_eq(tui_model_message(&m, "eval {\"run\":1,\"v\":100,\"test_acc\":0.5,\"train_loss\":1.5}"), 0);
	ck_assert_int_eq(tui_model_message(&m, "eval {\"run\":1,\"v\":100,\"test_acc\":0.6}"), 0); /* repeated v */
	ck_assert_int_eq(tui_model_message(&m, "eval {\"run\":7,\"v\":300,\"test_acc\":0.6}"), 0); /* another run */
	ck_assert_int_eq(tui_model_message(&m, "eval {\"run\":1,\"v\":200,\"test_acc\":0.7}"), 0);
	ck_assert_int_eq(m.ns, 2);
	ck_assert(m.sacc[1] == 0.7 && isnan(m.sloss[1]) && m.sloss[0] == 1.5);
	ck_assert_int_eq(tui_model_message(&m, "change {\"run\":1,\"v\":150,\"origin\":\"api\",\"set\":{\"lr\":0.5}}"), 0);
	ck_assert_int_eq(m.nmarks, 1);
	ck_assert(m.marks[0] == 150);
	ck_assert_str_eq(tui_model_log_line(&m, 0), "v 150 api: lr 0.5");
	ck_assert_int_eq(tui_model_message(&m, "checkpoint {\"run\":1,\"v\":160,\"path\":\"/x.ckpt\"}"), 0);
	ck_assert_str_eq(tui_model_log_line(&m, 0), "v 160 checkpoint /x.ckpt");
	ck_assert_str_eq(tui_model_log_line(&m, 1), "v 150 api: lr 0.5");
	ck_assert_ptr_null(tui_model_log_line(&m, 2));
	ck_assert_int_eq(tui_model_message(&m, "diverged {\"run\":1,\"v\":170,\"worker\":3,"
						"\"v_read\":168,\"what\":\"gradient\",\"loss\":1.5}"), 0);
	ck_assert_str_eq(tui_model_log_line(&m, 0),
			 "v 170 diverged: worker 3's gradient is not finite (read v 168); "
			 "l recovers with an lr");
	/* a restarted daemon: run 1 again, its version back down */
	ck_assert_int_eq(tui_model_message(&m, snap(1, 5)), 2);
	ck_assert_int_eq(m.ns, 0);
	ck_assert_int_eq(m.nmarks, 0);
	ck_assert_int_eq(tui_model_message(&m, snap(2, 6)), 2); /* a new run */
	ck_assert_int_eq(m.run, 2);
	/* idle: no run in it */
	ck_assert_int_eq(tui_model_message(&m, "snapshot {\"state\":\"idle\"}"), 2);
	ck_assert_int_eq(m.run, -1);
	tui_model_free(&m);
}
END_TEST

START_TEST(late_changes)
{
	/* a TUI that connects after five changes gets them from the run's
	 * list: each logged and marked once, those the bus also brought
	 * (the one at v 40) not twice */
	tui_model m;
	tui_model_init(&m);
	ck_assert_int_eq(tui_model_message(&m, snap(1, 10)), 2);
	ck_assert_int_eq(tui_model_message(&m, "change {\"run\":1,\"t\":4.5,\"v\":40,"
						"\"origin\":\"api\",\"set\":{\"lr\":0.5}}"), 0);
	json_t *list = json_loads("[{\"t\":1,\"v\":10,\"origin\":\"api\",\"set\":{\"lr\":0.1}},"
				  "{\"t\":2,\"v\":20,\"origin\":\"api\",\"set\":{\"lr\":0.2}},"
				  "{\"t\":3,\"v\":20,\"origin\":\"api\",\"set\":{\"lr\":0.3}},"
				  "{\"t\":4,\"v\":30,\"origin\":\"schedule\",\"set\":{\"lr\":0.4}},"
				  "{\"t\":4.5,\"v\":40,\"origin\":\"api\",\"set\":{\"lr\":0.5}}]", 0, NULL);
	ck_assert_ptr_nonnull(list);
	tui_model_changes(&m, list);
	ck_assert_int_eq(m.nmarks, 5);
	ck_assert_str_eq(tui_model_log_line(&m, 0), "v 30 schedule: lr 0.4");
	ck_assert_str_eq(tui_model_log_line(&m, 1), "v 20 api: lr 0.3");
	ck_assert_str_eq(tui_model_log_line(&m, 4), "v 40 api: lr 0.5");
	ck_assert_ptr_null(tui_model_log_line(&m, 5));
	/* fetched again (a reconnect): nothing new */
	tui_model_changes(&m, list);
	ck_assert_int_eq(m.nmarks, 5);
	ck_assert_ptr_null(tui_model_log_line(&m, 5));
	json_decref(list);
	tui_model_free(&m);
}
END_TEST

START_TEST(log_ring)
{
	tui_model m;
	tui_model_init(&m);
	for (int i = 0; i < TUI_LOG_N + 5; i++)
		tui_model_log(&m, "line %d", i);
	ck_assert_int_eq(m.nlog, TUI_LOG_N);
	char want[32];
	snprintf(want, sizeof(want), "line %d", TUI_LOG_N + 4);
	ck_assert_str_eq(tui_model_log_line(&m, 0), want);
	ck_assert_str_eq(tui_model_log_line(&m, TUI_LOG_N - 1), "line 5");
	tui_model_free(&m);
}
END_TEST

static void
sibling_is(const char *url, const char *want)
{
	char out[128], err[160];
	int rc = busc_sibling(url, out, sizeof(out), err, sizeof(err));
	if (want) {
		ck_assert_msg(rc == 0, "%s: %s", url, err);
		ck_assert_str_eq(out, want);
	} else {
		ck_assert_int_eq(rc, -1);
		ck_assert_msg(strstr(err, "--connect") != NULL, "%s", err);
	}
}

START_TEST(sibling_urls)
{
	sibling_is("tcp://127.0.0.1:8471", "tcp://127.0.0.1:8472");
	sibling_is("tcp://[::1]:9000", "tcp://[::1]:9001");
	sibling_is("tcp://host.example:1", "tcp://host.example:2");
	sibling_is("ipc:///tmp/sl.bus", "ipc:///tmp/sl.bus.rep");
	sibling_is("tcp://127.0.0.1:65535", NULL);
	sibling_is("tcp://127.0.0.1:0", NULL);
	sibling_is("tcp://127.0.0.1", NULL);
	sibling_is("tcp://:8471", NULL);
	sibling_is("tcp://h:84x", NULL);
	sibling_is("http://127.0.0.1:8471", NULL);
	sibling_is("ipc://", NULL);
}
END_TEST

/* --rep: the daemon's REP URL when it was not the sibling (serve
 * --bus-rep); both URLs checked, each error naming its flag */
START_TEST(rep_urls)
{
	char out[128], err[160];
	ck_assert_int_eq(busc_rep_url("tcp://127.0.0.1:8471", "tcp://127.0.0.1:9999", out,
				      sizeof(out), err, sizeof(err)), 0);
	ck_assert_str_eq(out, "tcp://127.0.0.1:9999");
	ck_assert_int_eq(busc_rep_url("tcp://127.0.0.1:65535", "ipc:///tmp/x", out, sizeof(out),
				      err, sizeof(err)), 0);
	ck_assert_str_eq(out, "ipc:///tmp/x");
	ck_assert_int_eq(busc_rep_url("tcp://127.0.0.1:8471", NULL, out, sizeof(out), err,
				      sizeof(err)), 0);
	ck_assert_str_eq(out, "tcp://127.0.0.1:8472");
	ck_assert_int_eq(busc_rep_url("tcp://127.0.0.1:8471", "tcp://127.0.0.1:0", out,
				      sizeof(out), err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "--rep: expected tcp://HOST:PORT with a port") != NULL, "%s", err);
	ck_assert_int_eq(busc_rep_url("tcp://127.0.0.1:8471", "http://x", out, sizeof(out), err,
				      sizeof(err)), -1);
	ck_assert_msg(strstr(err, "--rep: expected tcp://HOST:PORT or ipc://PATH") != NULL, "%s", err);
	ck_assert_int_eq(busc_rep_url("udp://x", "tcp://127.0.0.1:1", out, sizeof(out), err,
				      sizeof(err)), -1);
	ck_assert_msg(strstr(err, "--connect") != NULL, "%s", err);
}
END_TEST

START_TEST(connects_to_ipv6)
{
	/* nanomsg connects in the background: opening needs no daemon, but
	 * an IPv6 address needs NN_IPV4ONLY off (it was EINVAL); an IPv4 one
	 * must keep it on (off, a refused connection aborts in nanomsg 1.1.5:
	 * the 0.3 s let it be refused, and retried) */
	char err[160] = "";
	const char *urls[] = {"tcp://[::1]:9", "tcp://127.0.0.1:9"};
	for (int i = 0; i < 2; i++) {
		busc *b = busc_open(urls[i], NULL, err, sizeof(err));
		ck_assert_msg(b != NULL, "%s: %s", urls[i], err);
		usleep(300 * 1000);
		busc_close(b);
	}
}
END_TEST

static Suite *
tui_suite(void)
{
	Suite *s = suite_create("tui");
	TCase *tc = tcase_create("model");
	tcase_add_test(tc, bars_scale_to_the_tallest);
	tcase_add_test(tc, bars_group_buckets_when_narrow);
	tcase_add_test(tc, spark_levels);
	tcase_add_test(tc, delay_ladder);
	tcase_add_test(tc, delay_texts);
	tcase_add_test(tc, change_labels);
	tcase_add_test(tc, byte_texts);
	tcase_add_test(tc, messages);
	tcase_add_test(tc, late_changes);
	tcase_add_test(tc, log_ring);
	tcase_add_test(tc, sibling_urls);
	tcase_add_test(tc, rep_urls);
	tcase_add_test(tc, connects_to_ipv6);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(tui_suite)
