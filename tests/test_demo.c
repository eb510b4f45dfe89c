/* test_demo.c - the demo file parser (demo_parse): the built-in demo, a
 * scene that grows the run before a later scene names a new worker, and
 * every kind of bad file refused with the field named and nothing left
 * allocated (the Check fork plus ASan/valgrind see a leak). */
#include <jansson.h>

#include "demo.h"
#include "testutil.h"

static int
parse(const char *text, demo *d, char *err)
{
	json_error_t je;
	json_t *j = json_loads(text, 0, &je);
	ck_assert_msg(j != NULL, "test input is not JSON: %s", je.text);
	int rc = demo_parse(j, d, err);
	json_decref(j);
	return rc;
}

START_TEST(builtin)
{
	demo d;
	char err[SL_ERR_LEN] = "";
	ck_assert_msg(demo_builtin(&d, err) == 0, "%s", err);
	ck_assert_int_ge(d.n, 2);
	ck_assert_int_eq(d.base.workers, 4);
	demo_free(&d);
}
END_TEST

START_TEST(grows_then_names_worker)
{
	demo d;
	char err[SL_ERR_LEN] = "";
	int rc = parse("{\"run\": {\"workers\": 2}, \"scenes\": ["
		       "{\"seconds\": 5, \"caption\": \"grow\", \"set\": {\"workers\": 6}},"
		       "{\"seconds\": 5, \"caption\": \"w5\", \"workers\": [{\"id\": 5, \"set\": {\"paused\": true}}]}]}",
		       &d, err);
	ck_assert_msg(rc == 0, "%s", err);
	ck_assert_int_eq(d.n, 2);
	ck_assert_double_eq(d.scene[1].seconds, 5);
	ck_assert_str_eq(d.scene[1].caption, "w5");
	ck_assert_ptr_nonnull(d.scene[1].workers);
	demo_free(&d);
}
END_TEST

static const struct {
	const char *text, *want;
} bad[] = {
	{"[]", "demo: expected an object"},
	{"{\"scene\": []}", "demo.scene: unknown field (expected run, scenes)"},
	{"{\"scenes\": []}", "demo.scenes: expected a non-empty array"},
	{"{\"run\": {\"lr\": 0}, \"scenes\": [{\"seconds\": 1, \"caption\": \"\"}]}", "demo.run.lr: must be in"},
	{"{\"scenes\": [3]}", "demo.scenes[0]: expected an object"},
	{"{\"scenes\": [{\"seconds\": 0.5, \"caption\": \"x\"}]}", "demo.scenes[0].seconds: expected a number in [1, 86400]"},
	{"{\"scenes\": [{\"seconds\": 1}]}", "demo.scenes[0].caption: expected a string"},
	{"{\"scenes\": [{\"seconds\": 1, \"caption\": \"x\", \"sets\": {}}]}", "demo.scenes[0].sets: unknown field"},
	{"{\"scenes\": [{\"seconds\": 1, \"caption\": \"x\"}, {\"seconds\": 1, \"caption\": \"y\", \"set\": {\"rule\": \"adam\"}}]}",
	 "demo.scenes[1].set.rule: unknown \"adam\""},
	{"{\"scenes\": [{\"seconds\": 1, \"caption\": \"x\", \"workers\": {}}]}", "demo.scenes[0].workers: expected an array"},
	{"{\"scenes\": [{\"seconds\": 1, \"caption\": \"x\", \"workers\": [{\"id\": 4, \"set\": {\"paused\": true}}]}]}",
	 "demo.scenes[0].workers[0].id: expected a worker id below 4"},
	/* before: an entry that is not an object was refused for its id, a
	 * misspelt key next to a good one was accepted */
	{"{\"scenes\": [{\"seconds\": 1, \"caption\": \"x\", \"workers\": [7]}]}",
	 "demo.scenes[0].workers[0]: expected an object"},
	{"{\"scenes\": [{\"seconds\": 1, \"caption\": \"x\", \"workers\": [{\"id\": 1, \"set\": {\"paused\": true}, \"speed\": 2}]}]}",
	 "demo.scenes[0].workers[0].speed: unknown field (expected id, set)"},
};

START_TEST(rejects_bad)
{
	demo d;
	char err[SL_ERR_LEN] = "";
	int rc = parse(bad[_i].text, &d, err);
	ck_assert_msg(rc == -SL_EINVAL, "accepted: %s", bad[_i].text);
	ck_assert_msg(strstr(err, bad[_i].want) != NULL, "input %s: message \"%s\" lacks \"%s\"",
		      bad[_i].text, err, bad[_i].want);
	ck_assert_int_eq(d.n, 0);
}
END_TEST

static Suite *
demo_suite(void)
{
	Suite *s = suite_create("demo");
	TCase *tc = tcase_create("parse");
	tcase_add_test(tc, builtin);
	tcase_add_test(tc, grows_then_names_worker);
	tcase_add_loop_test(tc, rejects_bad, 0, (int)(sizeof(bad) / sizeof(bad[0])));
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(demo_suite)
