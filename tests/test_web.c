/* test_web.c - the embedded dashboard: GET / is the page only for clients
 * that accept HTML (curl keeps the text index), /ui/ assets have their
 * content types, unknown /ui/ paths are 404 and the API's paths are never
 * taken. */
#include "testutil.h"
#include "web.h"

START_TEST(accept_header)
{
	ck_assert_int_eq(web_accepts_html(NULL), 0);
	ck_assert_int_eq(web_accepts_html(""), 0);
	ck_assert_int_eq(web_accepts_html("*/*"), 0); /* curl */
	ck_assert_int_eq(web_accepts_html("application/json"), 0);
	ck_assert_int_eq(web_accepts_html(
		"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"), 1);
	ck_assert_int_eq(web_accepts_html("application/json, TEXT/HTML ; q=0.5"), 1);
	ck_assert_int_eq(web_accepts_html("text/*"), 1);
	ck_assert_int_eq(web_accepts_html("text/html;q=0"), 0);
	ck_assert_int_eq(web_accepts_html("text/html;level=1;q=0.0, */*"), 0);
	ck_assert_int_eq(web_accepts_html("text/htmlx, text/plain"), 0);
}
END_TEST

START_TEST(page_and_assets)
{
	web_reply w;
	ck_assert_int_eq(web_find("/", "*/*", &w), 0);
	ck_assert_int_eq(web_find("/", NULL, &w), 0);
	ck_assert_int_eq(web_find("/", "text/html", &w), 1);
	ck_assert_uint_eq(w.status, 200);
	ck_assert_str_eq(w.type, "text/html; charset=utf-8");
	ck_assert_ptr_nonnull(strstr((const char *)w.data, "<!doctype html>"));
	ck_assert_uint_eq(strlen((const char *)w.data), w.len); /* NUL after */

	ck_assert_int_eq(web_find("/ui/vendor/uPlot.iife.min.js", NULL, &w), 1);
	ck_assert_uint_eq(w.status, 200);
	ck_assert_str_eq(w.type, "text/javascript; charset=utf-8");
	ck_assert_uint_gt(w.len, 10000);
	ck_assert_int_eq(web_find("/ui/vendor/uPlot.min.css", NULL, &w), 1);
	ck_assert_str_eq(w.type, "text/css; charset=utf-8");
	ck_assert_int_eq(web_find("/ui/app.js", NULL, &w), 1);
	ck_assert_uint_eq(w.status, 200);

	ck_assert_int_eq(web_find("/ui/nope.js", "text/html", &w), 1);
	ck_assert_uint_eq(w.status, 404);
	ck_assert_int_eq(web_find("/ui/../index.html", NULL, &w), 1);
	ck_assert_uint_eq(w.status, 404);

	ck_assert_int_eq(web_find("/api/v1/status", "text/html", &w), 0);
	ck_assert_int_eq(web_find("/metrics", "text/html", &w), 0);
	ck_assert_int_eq(web_find("/index.html", "text/html", &w), 0);
	ck_assert_int_eq(web_find("/uix", "text/html", &w), 0);
}
END_TEST

static Suite *
web_suite(void)
{
	Suite *s = suite_create("web");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, accept_header);
	tcase_add_test(tc, page_and_assets);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(web_suite)
