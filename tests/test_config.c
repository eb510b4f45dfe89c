/* test_config.c - the run object parser: defaults, every field kind,
 * strictness (unknown fields, wrong types, ranges, syntax with line and
 * column), the JSON round trip, and the compact number printer. */
#include <jansson.h>
#include <math.h>

#include "config_json.h"
#include "jsonout.h"
#include "testutil.h"

static int
parse(const char *text, run_config *c, char *err)
{
	config_defaults(c);
	return config_parse(text, strlen(text), c, err);
}

START_TEST(defaults_valid)
{
	run_config c;
	char err[SL_ERR_LEN];
	config_defaults(&c);
	ck_assert_int_eq(config_validate(&c, err), 0);
	ck_assert_str_eq(c.model, "mlp:784-256-128-10");
	ck_assert_str_eq(c.dataset, "fashion-mnist");
	ck_assert_str_eq(c.rule, "asgd");
	ck_assert_double_eq(c.lr, 0.05);
	ck_assert_int_eq(c.batch, 64);
	ck_assert_int_eq(c.workers, 1);
	ck_assert_int_eq(c.eval_every, 200);
}
END_TEST

START_TEST(full_object)
{
	const char *text =
		"{\"model\": \"lenet5\", \"dataset\": \"synthetic:100\", \"device\": \"cpu\","
		" \"rule\": \"dcasgd\", \"rule_params\": {\"s\": 4, \"lambda\": 0.5, \"H\": 16,"
		" \"local_opt\": \"cadcasgd\"}, \"lr\": 0.1, \"momentum\": 0.9, \"batch\": 32,"
		" \"workers\": 8, \"delay\": {\"dist\": \"lognormal\", \"mean_ms\": 20, \"sigma\": 0.5,"
		" \"where\": \"server\"}, \"worker_overrides\": [{\"id\": 3, \"delay\": {\"dist\":"
		" \"const\", \"mean_ms\": 200}, \"spb_depth\": 2, \"speed\": 0.5, \"paused\": true}],"
		" \"clock\": \"virtual\", \"seed\": 42, \"stop\": {\"epochs\": 2.5, \"steps\": 1000,"
		" \"target_acc\": 0.9}, \"eval_every\": 50, \"schedule\": [{\"at\": {\"v\": 10},"
		" \"set\": {\"rule\": \"asgd\"}}]}";
	run_config c;
	char err[SL_ERR_LEN] = "";
	ck_assert_msg(parse(text, &c, err) == 0, "%s", err);
	ck_assert_str_eq(c.model, "lenet5");
	ck_assert_str_eq(c.rule, "dcasgd");
	ck_assert_double_eq(c.rp.s, 4);
	ck_assert_double_eq(c.rp.lambda, 0.5);
	ck_assert_str_eq(c.rp.local_opt, "cadcasgd");
	ck_assert_double_eq(c.rp.local_lr, 0.1); /* untouched default */
	ck_assert_double_eq(c.momentum, 0.9);
	ck_assert_int_eq(c.workers, 8);
	ck_assert_int_eq(c.delay.dist, DELAY_LOGNORMAL);
	ck_assert_double_eq(c.delay.sigma, 0.5);
	ck_assert_int_eq(c.delay.at_server, 1);
	ck_assert_int_eq(c.n_overrides, 1);
	ck_assert_int_eq(c.overrides[0].id, 3);
	ck_assert_int_eq(c.overrides[0].delay.dist, DELAY_CONST);
	ck_assert_double_eq(c.overrides[0].delay.mean_ms, 200);
	ck_assert_int_eq(c.overrides[0].spb_depth, 2);
	ck_assert(c.overrides[0].has_speed && c.overrides[0].speed == 0.5);
	ck_assert(c.overrides[0].has_paused && c.overrides[0].paused);
	ck_assert_str_eq(c.clock, "virtual");
	ck_assert_uint_eq(c.seed, 42);
	ck_assert_double_eq(c.stop_epochs, 2.5);
	ck_assert_uint_eq(c.stop_steps, 1000);
	ck_assert_double_eq(c.stop_target_acc, 0.9);
	ck_assert_int_eq(c.n_schedule, 1);
}
END_TEST

/* each bad input must fail naming `want` */
static const struct {
	const char *text, *want;
} bad[] = {
	{"{\"bacth\": 64}", "bacth: unknown field"},
	{"{\"batch\": \"64\"}", "batch: expected an integer, got a string"},
	{"{\"batch\": 64.5}", "batch: expected an integer"},
	{"{\"batch\": 0}", "batch: 0 is out of range"},
	{"{\"workers\": 257}", "workers: 257 is out of range"},
	{"{\"lr\": 0}", "lr: 0 is out of range"},
	{"{\"lr\": -0.1}", "lr: "},
	{"{\"lr\": \"fast\"}", "lr: expected a number, got a string"},
	{"{\"momentum\": 1}", "momentum: "},
	{"{\"rule\": \"adam\"}", "rule: unknown \"adam\""},
	{"{\"device\": \"tpu\"}", "device: unknown \"tpu\""},
	{"{\"clock\": \"fast\"}", "clock: unknown \"fast\""},
	{"{\"model\": \"\"}", "model: must be 1..127 characters"},
	{"{\"seed\": -1}", "seed: expected a non-negative integer"},
	{"{\"stop\": {\"epoch\": 3}}", "stop.epoch: unknown field"},
	{"{\"stop\": {\"epochs\": -1}}", "stop.epochs: -1 is out of range"},
	{"{\"stop\": {\"target_acc\": 1.5}}", "stop.target_acc: 1.5 is out of range"},
	{"{\"stop\": 3}", "stop: expected an object, got an integer"},
	{"{\"delay\": {\"dist\": \"gauss\"}}", "delay.dist: unknown \"gauss\""},
	{"{\"delay\": {\"dist\": \"exp\", \"mean\": 20}}", "delay.mean: unknown field"},
	{"{\"delay\": {\"dist\": \"exp\", \"mean_ms\": -5}}", "delay.mean_ms: -5 is out of range"},
	{"{\"delay\": {\"dist\": \"pareto\", \"mean_ms\": 5, \"alpha\": 1}}", "delay.alpha: 1 is out of range"},
	{"{\"delay\": {\"dist\": \"exp\", \"where\": \"cloud\"}}", "delay.where: expected \"worker\" or \"server\""},
	{"{\"delay\": {\"mean_ms\": 5}}", "delay.dist: missing"},
	{"{\"rule_params\": {\"H\": 0}}", "rule_params.H: 0 is out of range"},
	{"{\"rule_params\": {\"tau\": 3}}", "rule_params.tau: unknown field"},
	{"{\"worker_overrides\": [{\"delay\": {}}]}", "worker_overrides[0].id: expected an integer"},
	{"{\"worker_overrides\": [{\"id\": 1, \"speed\": 0}]}", "worker_overrides[0].speed: expected a number in (0, 100]"},
	{"{\"worker_overrides\": [{\"id\": 1, \"spb\": 2}]}", "worker_overrides[0].spb: unknown field"},
	{"{\"worker_overrides\": [{\"id\": 1, \"delay\": {\"dist\": \"const\", \"mean_ms\": \"x\"}}]}",
	 "worker_overrides[0].delay.mean_ms: expected a number"},
	{"{\"schedule\": [{\"at\": {\"x\": 1}, \"set\": {}}]}", "schedule[0].at: expected"},
	{"{\"schedule\": [{\"at\": {\"v\": 1}}]}", "schedule[0].set: expected an object"},
	{"[1, 2]", "run: expected a JSON object"},
	{"{\"lr\": 0.1,}", "line 1, column"},
	{"{\n\"lr\": 0.1\n\"batch\": 3}", "line 3"},
	{"{\"lr\": 0.1, \"lr\": 0.2}", "duplicate"},
	{"", "line 1"},
};

START_TEST(rejects_bad)
{
	run_config c, before;
	char err[SL_ERR_LEN] = "";
	config_defaults(&before);
	int rc = parse(bad[_i].text, &c, err);
	ck_assert_msg(rc == -SL_EINVAL, "accepted: %s", bad[_i].text);
	ck_assert_msg(strstr(err, bad[_i].want) != NULL, "input %s: message \"%s\" lacks \"%s\"",
		      bad[_i].text, err, bad[_i].want);
	/* nothing half-applied */
	ck_assert_mem_eq(&c, &before, sizeof(c));
}
END_TEST

START_TEST(round_trip)
{
	const char *text =
		"{\"model\": \"mlp:784-64-10\", \"lr\": 0.1, \"momentum\": 0.9,"
		" \"delay\": {\"dist\": \"pareto\", \"mean_ms\": 20, \"alpha\": 2},"
		" \"worker_overrides\": [{\"id\": 0, \"spb_depth\": 1}],"
		" \"stop\": {\"epochs\": 3}, \"seed\": 9}";
	run_config a, b;
	char err[SL_ERR_LEN] = "";
	ck_assert_msg(parse(text, &a, err) == 0, "%s", err);
	json_t *j = config_to_json(&a);
	char *s = jsonout_dumps(j);
	ck_assert_msg(parse(s, &b, err) == 0, "%s: %s", s, err);
	ck_assert_mem_eq(&a, &b, sizeof(a));
	ck_assert_ptr_nonnull(strstr(s, "\"lr\":0.1,"));
	free(s);
	json_decref(j);
}
END_TEST

START_TEST(number_printing)
{
	char buf[40];
	const double vals[] = {0.05, 0.1, 1.0 / 3, 1e-300, 123456789.125, -2.5,
			       0.8595, 6.02214076e23};
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		jsonout_number(buf, vals[i]);
		ck_assert_msg(strtod(buf, NULL) == vals[i], "%s", buf);
	}
	jsonout_number(buf, 0.05);
	ck_assert_str_eq(buf, "0.05");
	jsonout_number(buf, 3.0);
	ck_assert_str_eq(buf, "3.0");
	jsonout_number(buf, NAN);
	ck_assert_str_eq(buf, "null");
	json_t *o = json_pack("{s:s,s:[i,f],s:b,s:n}", "k\"ey", "a\nb\x01", "v", 7,
			      0.25, "t", 1, "z");
	char *s = jsonout_dumps(o);
	ck_assert_str_eq(s, "{\"k\\\"ey\":\"a\\nb\\u0001\",\"v\":[7,0.25],\"t\":true,\"z\":null}");
	free(s);
	json_decref(o);
}
END_TEST

static Suite *
config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("parse");
	tcase_add_test(tc, defaults_valid);
	tcase_add_test(tc, full_object);
	tcase_add_loop_test(tc, rejects_bad, 0, (int)(sizeof(bad) / sizeof(bad[0])));
	tcase_add_test(tc, round_trip);
	tcase_add_test(tc, number_printing);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(config_suite)
