/* test_config.c - the run object parser: defaults, every field kind,
 * strictness (unknown fields, wrong types, ranges, syntax with line and
 * column), the nearest name suggested for a typo (engine/base/suggest.h),
 * the JSON round trip, and the compact number printer. */
#include <jansson.h>
#include <math.h>

#include "config_json.h"
#include "fields.h"
#include "graph_json.h"
#include "model.h"
#include "jsonout.h"
#include "suggest.h"
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

START_TEST(cmd_bits_named_by_their_fields)
{
	/* each CMD_* bit is named by the key of the field it changes: the
	 * names a checkpoint writes for its queued changes, which must stay
	 * these (a checkpoint of an earlier build reads back by them) */
	static const struct { unsigned bit; const char *key; } want[] = {
		{CMD_RULE, "rule"}, {CMD_RULE_PARAMS, "rule_params"}, {CMD_LR, "lr"},
		{CMD_MOMENTUM, "momentum"}, {CMD_BATCH, "batch"}, {CMD_WORKERS, "workers"},
		{CMD_PAUSED, "paused"}, {CMD_STOP, "stop"}, {CMD_DELAY, "delay"},
		{CMD_SPB, "spb_depth"}, {CMD_SPEED, "speed"}, {CMD_WEIGHT_DECAY, "weight_decay"},
		{CMD_EVAL_EVERY, "eval_every"}, {CMD_CHECKPOINT, "checkpoint"},
		{CMD_LINK, "link"}, {CMD_SERVER_MS, "server_ms"},
		{CMD_OPTIMIZER, "optimizer"}, {CMD_CLIP, "clip"}, {CMD_STEP_MS, "step_ms"},
	};
	unsigned all = 0;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const char *k = fields_cmd_key(want[i].bit);
		ck_assert_msg(k && !strcmp(k, want[i].key), "bit %#x: %s, want %s", want[i].bit,
			      k ? k : "(none)", want[i].key);
		all |= want[i].bit;
	}
	ck_assert_uint_eq(all, 0x7ffffu); /* every bit of the 19 a checkpoint names */
	ck_assert_ptr_null(fields_cmd_key(1u << 19));
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
	{"{\"bacth\": 64}", "bacth: unknown field (did you mean 'batch'?)"},
	{"{\"batch\": \"64\"}", "batch: expected an integer, got a string"},
	{"{\"batch\": 64.5}", "batch: must be an integer in [1, 65536], got 64.5"},
	{"{\"batch\": 0}", "batch: must be an integer in [1, 65536], got 0"},
	{"{\"workers\": 257}", "workers: must be an integer in [0, 256], got 257"},
	{"{\"lr\": 0}", "lr: must be in (0, 100], got 0"},
	{"{\"lr\": -0.1}", "lr: "},
	{"{\"lr\": \"fast\"}", "lr: expected a number, got a string"},
	{"{\"momentum\": 1}", "momentum: must be in [0, 1), got 1"},
	{"{\"lr\": 100.5}", "lr: must be in (0, 100], got 100.5"},
	{"{\"rule\": \"adam\"}", "rule: unknown \"adam\""},
	{"{\"device\": \"tpu\"}", "device: unknown \"tpu\""},
	{"{\"clock\": \"fast\"}", "clock: unknown \"fast\""},
	{"{\"model\": \"\"}", "model: must be 1..4095 characters"},
	{"{\"seed\": -1}", "seed: must be an integer >= 0, got -1"},
	/* found by tests/fuzz/config_fuzz.c: a real too large for a u64 field
	 * was converted anyway (undefined behaviour) */
	{"{\"stop\": {\"steps\": 7.7e32}}", "stop.steps: must be an integer below 2^63, got 7.7e+32"},
	{"{\"seed\": 18446744073709551616.0}", "seed: must be an integer below 2^63"},
	{"{\"seed\": 15555555555555555555.035}", "seed: must be an integer below 2^63, got 1.555555556e+19"},
	{"{\"stop\": {\"epoch\": 3}}", "stop.epoch: unknown field (did you mean 'stop.epochs'?)"},
	{"{\"stop\": {\"epochs\": -1}}", "stop.epochs: must be in [0, 1000000000], got -1"},
	{"{\"stop\": {\"target_acc\": 1.5}}", "stop.target_acc: must be in [0, 1], got 1.5"},
	{"{\"stop\": 3}", "stop: expected an object, got an integer"},
	{"{\"delay\": {\"dist\": \"gauss\"}}", "delay.dist: unknown \"gauss\""},
	{"{\"delay\": {\"dist\": \"exp\", \"mean\": 20}}", "delay.mean: unknown field"},
	{"{\"delay\": {\"dist\": \"exp\", \"mean_ms\": -5}}", "delay.mean_ms: must be in [0, 3600000], got -5"},
	{"{\"delay\": {\"dist\": \"pareto\", \"mean_ms\": 5, \"alpha\": 1}}", "delay.alpha: must be in (1, 100], got 1"},
	{"{\"delay\": {\"dist\": \"exp\", \"where\": \"cloud\"}}", "delay.where: unknown \"cloud\" (expected worker, server)"},
	{"{\"delay\": {\"mean_ms\": 5}}", "delay.dist: missing"},
	{"{\"rule_params\": {\"H\": 0}}", "rule_params.H: must be an integer in [1, 1000000], got 0"},
	{"{\"rule_params\": {\"tau\": 3}}", "rule_params.tau: unknown field"},
	{"{\"worker_overrides\": [{\"delay\": {}}]}", "worker_overrides[0].id: missing"},
	{"{\"worker_overrides\": [{\"id\": 1, \"speed\": 0}]}", "worker_overrides[0].speed: must be in (0, 100], got 0"},
	{"{\"worker_overrides\": [{\"id\": 1, \"spb\": 2}]}", "worker_overrides[0].spb: unknown field"},
	{"{\"worker_overrides\": [{\"id\": 1, \"delay\": {\"dist\": \"const\", \"mean_ms\": \"x\"}}]}",
	 "worker_overrides[0].delay.mean_ms: expected a number"},
	{"{\"rule_params\": {\"s\": 2.5}}", "rule_params.s: must be an integer in [0, 1000000], got 2.5"},
	{"{\"rule_params\": {\"local_opt\": \"adam\"}}", "rule_params.local_opt: unknown \"adam\" (expected sgd, cadcasgd)"},
	/* compression (docs/rules.md, "Compression") */
	{"{\"rule_params\": {\"compress\": \"zip\"}}",
	 "rule_params.compress: unknown \"zip\" (expected none, topk, randk, int8, int4)"},
	{"{\"rule_params\": {\"compress\": \"topk\", \"compress_ratio\": 0}}",
	 "rule_params.compress_ratio: must be in (0, 1], got 0"},
	{"{\"rule_params\": {\"compress\": \"randk\", \"compress_ratio\": 1.5}}",
	 "rule_params.compress_ratio: must be in (0, 1], got 1.5"},
	{"{\"rule_params\": {\"ef\": 1}}", "rule_params.ef: expected true or false, got an integer"},
	{"{\"rule_params\": {\"sparta_p\": 1.5}}", "rule_params.sparta_p: must be in [0, 1], got 1.5"},
	{"{\"rule_params\": {\"sparta_p\": -0.1}}", "rule_params.sparta_p: must be in [0, 1], got -0.1"},
	{"{\"delay\": {\"dist\": \"version\", \"s\": 65}}", "delay.s: must be an integer in [0, 64], got 65"},
	/* accepted before, meaningless: a worker the run does not have, a
	 * depth the model does not have */
	{"{\"workers\": 4, \"worker_overrides\": [{\"id\": 4, \"speed\": 0.5}]}",
	 "worker_overrides[0].id: no worker 4 (the run has 4 workers: ids 0..3)"},
	{"{\"model\": \"mlp:784-64-10\", \"workers\": 2, \"worker_overrides\": [{\"id\": 1, \"spb_depth\": 3}]}",
	 "worker_overrides[0].spb_depth: must be in [0, 2] (\"mlp:784-64-10\" has 2 parameterised layers), got 3"},
	{"{\"model\": \"lenet5\", \"workers\": 2, \"worker_overrides\": [{\"id\": 1, \"spb_depth\": 6}]}",
	 "worker_overrides[0].spb_depth: must be in [0, 5]"},
	/* a residual net's depths end at a block boundary */
	{"{\"model\": \"resnet20\", \"workers\": 2, \"worker_overrides\": [{\"id\": 1, \"spb_depth\": 3}]}",
	 "worker_overrides[0].spb_depth: 3 ends inside a block of resnet20: expected 0 (full backprop) "
	 "or a block boundary: 1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 38 (the nearest: 1 and 5)"},
	{"{\"schedule\": [{\"at\": {\"x\": 1}, \"set\": {}}]}", "schedule[0].at: expected"},
	{"{\"schedule\": [{\"at\": {\"v\": 1}}]}", "schedule[0].set: expected an object"},
	/* silently accepted before (seen while writing tests/fuzz/schedule_fuzz.c) */
	{"{\"schedule\": [{\"at\": {\"v\": 1}, \"wroker\": 2, \"set\": {\"lr\": 0.1}}]}",
	 "schedule[0].wroker: unknown field (expected at, worker, set; did you mean "
	 "'schedule[0].worker'?)"},
	{"{\"schedule\": [{\"at\": {\"v\": 1, \"t\": 2}, \"set\": {\"lr\": 0.1}}]}",
	 "schedule[0].at: expected {\"v\": N} or {\"t\": seconds}"},
	{"{\"schedule\": [{\"at\": {\"t\": 2, \"when\": 3}, \"set\": {\"lr\": 0.1}}]}",
	 "schedule[0].at: expected"},
	{"[1, 2]", "run: expected a JSON object"},
	{"{\"lr\": 0.1,}", "line 1, column"},
	{"{\n\"lr\": 0.1\n\"batch\": 3}", "line 3"},
	{"{\"lr\": 0.1, \"lr\": 0.2}", "duplicate"},
	{"", "line 1"},
	/* a graph's float attribute: a number in (0, 1], named by node */
	{"{\"model\": {\"nodes\": [{\"op\": \"linear\", \"units\": 4, \"init_std\": 0}]}}",
	 "model.nodes[0].init_std: must be a number in (0, 1], got 0"},
	{"{\"model\": {\"nodes\": [{\"op\": \"dense\", \"units\": 4}, {\"op\": \"linear\", "
	 "\"units\": 4, \"init_std\": 1.5}]}}",
	 "model.nodes[1].init_std: must be a number in (0, 1], got 1.5"},
	{"{\"model\": {\"nodes\": [{\"op\": \"linear\", \"units\": 4, \"init_std\": \"0.01\"}]}}",
	 "model.nodes[0].init_std: must be a number in (0, 1], got \"0.01\""},
	{"{\"model\": {\"nodes\": [{\"op\": \"linear\", \"units\": 4, \"init_std\": true}]}}",
	 "model.nodes[0].init_std: must be a number in (0, 1], got a boolean"},
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

/* text parsed into a, written as JSON and parsed again: the same config;
 * the JSON (to free) */
static char *
json_round_trip(const char *text, run_config *a)
{
	run_config b;
	char err[SL_ERR_LEN] = "";
	ck_assert_msg(parse(text, a, err) == 0, "%s", err);
	json_t *j = config_to_json(a);
	char *s = jsonout_dumps(j);
	json_decref(j);
	ck_assert_msg(parse(s, &b, err) == 0, "%s: %s", s, err);
	ck_assert_mem_eq(a, &b, sizeof(b));
	return s;
}

START_TEST(round_trip)
{
	const char *text =
		"{\"model\": \"mlp:784-64-10\", \"lr\": 0.1, \"momentum\": 0.9,"
		" \"delay\": {\"dist\": \"pareto\", \"mean_ms\": 20, \"alpha\": 2},"
		" \"worker_overrides\": [{\"id\": 0, \"spb_depth\": 1}],"
		" \"stop\": {\"epochs\": 3}, \"seed\": 9}";
	run_config a;
	char *s = json_round_trip(text, &a);
	ck_assert_ptr_nonnull(strstr(s, "\"lr\":0.1,"));
	free(s);
}
END_TEST

/* a graph's init_std: into the spec as the shortest decimal of its float,
 * out as the same JSON number, the default (0.02) given as left out, and
 * a second parse of the JSON the same config */
START_TEST(graph_init_std_round_trip)
{
	const char *text =
		"{\"model\": {\"nodes\": [{\"op\": \"embed\", \"units\": 8, \"vocab\": 5},"
		" {\"op\": \"linear\", \"units\": 8, \"init_std\": 0.01},"
		" {\"op\": \"linear\", \"units\": 8, \"init_std\": 0.02},"
		" {\"op\": \"linear\", \"units\": 8, \"init_std\": 0.0070710678118654752},"
		" {\"op\": \"linear\", \"units\": 8, \"init_std\": 1},"
		" {\"op\": \"lmhead\", \"tie\": 1}]}}";
	run_config a;
	char *s = json_round_trip(text, &a);
	ck_assert_str_eq(a.model, "graph:embed(units=8,vocab=5);linear(units=8,init_std=0.01);"
			 "linear(units=8);linear(units=8,init_std=0.0070710676);"
			 "linear(units=8,init_std=1);lmhead(tie=1)");
	ck_assert_msg(strstr(s, "{\"op\":\"linear\",\"units\":8,\"init_std\":0.01},"
			     "{\"op\":\"linear\",\"units\":8},"
			     "{\"op\":\"linear\",\"units\":8,\"init_std\":0.0070710676},"
			     "{\"op\":\"linear\",\"units\":8,\"init_std\":1.0}"), "%s", s);
	free(s);
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

/* ranges print as they are, and the ends are open or closed as written */
START_TEST(field_ranges)
{
	char buf[64];
	const field_desc *lr = fields_find(&fields_run, "lr");
	const field_desc *mom = fields_find(&fields_run, "momentum");
	const field_desc *seed = fields_find(&fields_run, "seed");
	ck_assert_ptr_nonnull(lr);
	field_range_str(lr, buf, sizeof(buf));
	ck_assert_str_eq(buf, "(0, 100]");
	field_range_str(mom, buf, sizeof(buf));
	ck_assert_str_eq(buf, "[0, 1)");
	field_range_str(seed, buf, sizeof(buf));
	ck_assert_str_eq(buf, ">= 0");
	ck_assert(!field_in_range(lr, 0));
	ck_assert(field_in_range(lr, 1e-9));
	ck_assert(field_in_range(lr, 100));
	ck_assert(!field_in_range(lr, 100.00001));
	ck_assert(field_in_range(mom, 0));
	ck_assert(!field_in_range(mom, 1));
	ck_assert(!field_in_range(lr, NAN));
	ck_assert(!field_in_range(fields_find(&fields_run, "batch"), 2.5));
	/* defaults come from the table and pass its own checks */
	run_config c;
	char err[SL_ERR_LEN];
	config_defaults(&c);
	ck_assert_double_eq(c.lr, lr->def);
	ck_assert_double_eq(c.rp.warmup, 200);
	ck_assert_str_eq(c.rp.local_opt, "sgd");
	ck_assert_int_eq(fields_validate(&fields_run, &c, "", err), 0);
	c.rp.m = 1;
	ck_assert_int_eq(fields_validate(&fields_run, &c, "", err), -SL_EINVAL);
	ck_assert_str_eq(err, "rule_params.m: must be in [0, 1), got 1");
	/* an enum's stored value may be anything (a damaged checkpoint) */
	config_defaults(&c);
	c.delay.dist = (delay_dist)1000000;
	ck_assert_int_eq(fields_validate(&fields_run, &c, "", err), -SL_EINVAL);
	ck_assert_str_eq(err, "delay.dist: unknown value 1000000");
	ck_assert_str_eq(delay_dist_name((delay_dist)1000000), "?");
	ck_assert_str_eq(delay_dist_name(DELAY_PARETO), "pareto");
}
END_TEST

/* every rule's parameters are described rule_params fields, and every
 * rule_params field is read by some rule */
START_TEST(rule_params_described)
{
	int n = 0;
	for (int k = 0; rule_table[k]; k++, n++) {
		const rule_class *r = rule_table[k];
		ck_assert_ptr_eq(rule_find(r->name), r);
		for (int i = 0; r->params && r->params[i]; i++)
			ck_assert_msg(fields_find(&fields_rule_params, r->params[i]),
				      "%s: no rule_params.%s", r->name, r->params[i]);
	}
	ck_assert_int_eq(n, 16);
	for (int i = 0; i < fields_rule_params.n; i++) {
		const char *key = fields_rule_params.f[i].key;
		int used = 0;
		for (int k = 0; rule_table[k]; k++)
			for (int j = 0; rule_table[k]->params && rule_table[k]->params[j]; j++)
				used |= !strcmp(rule_table[k]->params[j], key);
		ck_assert_msg(used, "rule_params.%s: no rule reads it", key);
	}
	/* the rule field's values are the classes' names */
	const field_desc *rf = fields_find(&fields_run, "rule");
	for (int k = 0; rule_table[k]; k++)
		ck_assert_str_eq(field_choice(rf, k), rule_table[k]->name);
	ck_assert_ptr_null(field_choice(rf, n));
	ck_assert_int_eq(fields_model_layers("mlp:784-256-128-10"), 3);
	ck_assert_int_eq(fields_model_layers("logreg"), 1);
	ck_assert_int_eq(fields_model_layers("lenet5"), 5);
	ck_assert_int_eq(fields_model_layers("resnet"), -1);
}
END_TEST

static run_config
cur4(void)
{
	run_config cur;
	config_defaults(&cur);
	cur.workers = 4;
	return cur;
}

static int
change(const char *text, int worker, run_cmd *c, char *err)
{
	run_config cur = cur4();
	json_error_t je;
	json_t *j = json_loads(text, 0, &je);
	ck_assert_msg(j != NULL, "%s", je.text);
	int rc = cmd_from_json(j, worker, &cur, "", c, err);
	json_decref(j);
	return rc;
}

/* PATCH bodies: the same table, mutability enforced, echo round-trips */
START_TEST(changes)
{
	run_cmd c, d;
	run_config cur = cur4();
	char err[SL_ERR_LEN] = "";
	ck_assert_int_eq(change("{\"lr\": 0.02, \"rule\": \"ssp\", \"rule_params\": {\"s\": 5}}", -1, &c, err), 0);
	ck_assert_uint_eq(c.fields, CMD_LR | CMD_RULE | CMD_RULE_PARAMS);
	ck_assert_double_eq(c.lr, 0.02);
	ck_assert_double_eq(c.rp.s, 5);
	ck_assert_double_eq(c.rp.lambda, 0.04); /* merged onto the current */
	json_t *j = cmd_to_json(&c);
	ck_assert_int_eq(cmd_from_json(json_object_get(j, "set"), -1, &cur, "", &d, err), 0);
	json_decref(j);
	ck_assert_mem_eq(&c, &d, sizeof(c));

	ck_assert_int_eq(change("{\"lr\": 111}", -1, &c, err), -SL_EINVAL);
	ck_assert_str_eq(err, "lr: must be in (0, 100], got 111");
	ck_assert_int_eq(change("{\"clock\": \"virtual\"}", -1, &c, err), -SL_EINVAL);
	ck_assert_str_eq(err, "clock: cannot change mid-run (POST /api/v1/run starts a new run)");
	ck_assert_int_eq(change("{\"stop\": false}", -1, &c, err), -SL_EINVAL);
	ck_assert_str_eq(err, "stop: expected true, got false");
	ck_assert_int_eq(change("{\"spb_depth\": 1}", -1, &c, err), -SL_EINVAL);
	ck_assert_str_eq(err, "spb_depth: unknown field");
	ck_assert_int_eq(change("{\"paused\": true, \"stop\": true}", -1, &c, err), 0);
	ck_assert_uint_eq(c.fields, CMD_PAUSED | CMD_STOP);

	ck_assert_int_eq(change("{\"spb_depth\": 2, \"delay\": {\"dist\": \"const\", \"mean_ms\": 5}}", 1, &c, err), 0);
	ck_assert_uint_eq(c.fields, CMD_SPB | CMD_DELAY);
	ck_assert_int_eq(c.spb_depth, 2);
	ck_assert_int_eq(c.delay.dist, DELAY_CONST);
	j = cmd_to_json(&c);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "worker")), 1);
	ck_assert_int_eq(cmd_from_json(json_object_get(j, "set"), 1, &cur, "", &d, err), 0);
	json_decref(j);
	ck_assert_mem_eq(&c, &d, sizeof(c));
	ck_assert_int_eq(change("{\"lr\": 0.1}", 1, &c, err), -SL_EINVAL);
	ck_assert_str_eq(err, "lr: unknown field for a worker (delay, spb_depth, speed, step_ms, paused, link)");
	ck_assert_int_eq(change("{\"speed\": 0}", 1, &c, err), -SL_EINVAL);
	ck_assert_str_eq(err, "speed: must be in (0, 100], got 0");
	/* the engine's own check uses the same table */
	c.fields = CMD_SPEED;
	c.speed = 0;
	ck_assert_int_eq(fields_check_cmd(&c, err), -SL_EINVAL);
	ck_assert_str_eq(err, "speed: must be in (0, 100], got 0");
}
END_TEST

static json_t *
schema_field(json_t *arr, const char *key)
{
	size_t i;
	json_t *f;
	json_array_foreach(arr, i, f)
		if (!strcmp(json_string_value(json_object_get(f, "key")), key))
			return f;
	return NULL;
}

/* GET /api/v1/schema's body, in the shape of SCHEMA.md */
START_TEST(schema)
{
	json_t *s = config_schema_json();
	json_t *fs = json_object_get(s, "fields");
	ck_assert_int_eq(json_array_size(fs), fields_run.n);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(fs, 0), "key")), "model");
	json_t *lr = schema_field(fs, "lr");
	char *t = jsonout_dumps(lr);
	ck_assert_str_eq(t, "{\"key\":\"lr\",\"type\":\"number\",\"min\":0,\"min_open\":true,"
			    "\"max\":100,\"default\":0.05,\"mutable\":true,\"doc\":\"learning rate\"}");
	free(t);
	ck_assert(json_is_false(json_object_get(schema_field(fs, "clock"), "mutable")));
	json_t *rule = schema_field(fs, "rule");
	ck_assert_int_eq(json_array_size(json_object_get(rule, "enum")), 16);
	json_t *batch = schema_field(fs, "batch");
	ck_assert_str_eq(json_string_value(json_object_get(batch, "type")), "integer");
	ck_assert_int_eq(json_integer_value(json_object_get(batch, "default")), 64);
	json_t *delay = schema_field(fs, "delay");
	json_t *sigma = schema_field(json_object_get(delay, "fields"), "sigma");
	ck_assert_str_eq(json_string_value(json_array_get(
				 json_object_get(json_object_get(sigma, "when"), "dist"), 0)),
			 "lognormal");
	ck_assert(json_is_true(json_object_get(sigma, "mutable"))); /* as its delay */
	json_t *stop = schema_field(fs, "stop");
	ck_assert(json_is_false(json_object_get(schema_field(json_object_get(stop, "fields"), "epochs"),
						"mutable")));
	ck_assert_ptr_null(json_object_get(schema_field(fs, "momentum"), "min_open"));
	/* the model: its named specs and the graph form, whose example parses */
	json_t *mf = schema_field(fs, "model");
	json_t *specs = json_object_get(mf, "specs");
	ck_assert_int_eq(json_array_size(specs), 6);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(specs, 5), "spec")),
			 "gpt:L4-H4-E128-T64");
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(specs, 4), "spec")),
			 "resnet:<N>");
	json_t *arg = json_object_get(json_array_get(specs, 4), "arg");
	ck_assert_int_eq(json_integer_value(json_object_get(arg, "max")), 200);
	ck_assert_int_eq(json_integer_value(json_object_get(arg, "step")), 6);
	json_t *graph = json_object_get(mf, "graph");
	ck_assert_int_eq(json_array_size(json_object_get(graph, "ops")), 15);
	json_t *istd = schema_field(json_object_get(graph, "attrs"), "init_std");
	ck_assert_str_eq(json_string_value(json_object_get(istd, "type")), "number");
	ck_assert(json_is_true(json_object_get(istd, "min_open")));
	ck_assert(json_real_value(json_object_get(istd, "min")) == 0);
	ck_assert(json_real_value(json_object_get(istd, "max")) == 1);
	ck_assert(json_real_value(json_object_get(istd, "default")) == 0.02);
	char spec[4096], err[SL_ERR_LEN];
	ck_assert_int_eq(graph_json_parse(json_object_get(graph, "example"), spec, sizeof(spec), err), 0);
	ck_assert_int_eq(model_spec_param_layers(spec), 4);
	json_t *w = json_object_get(s, "worker_fields");
	ck_assert_int_eq(json_array_size(w), 6);
	ck_assert_str_eq(json_string_value(json_object_get(schema_field(w, "paused"), "type")),
			 "boolean");
	ck_assert_str_eq(json_string_value(json_object_get(schema_field(w, "link"), "type")),
			 "object");
	json_t *rules = json_object_get(s, "rules");
	ck_assert_int_eq(json_array_size(rules), 16);
	size_t i;
	json_t *r;
	json_array_foreach(rules, i, r) {
		if (strcmp(json_string_value(json_object_get(r, "name")), "odsgd"))
			continue;
		ck_assert(json_is_true(json_object_get(r, "sync")));
		json_t *params = json_object_get(r, "params");
		ck_assert_int_eq(json_array_size(params), 8); /* its 5 and compression's 3 */
		json_t *cp = schema_field(params, "compress");
		ck_assert_str_eq(json_string_value(json_object_get(cp, "default")), "none");
		ck_assert_int_eq(json_array_size(json_object_get(cp, "enum")), 5);
		json_t *lo = schema_field(params, "local_opt");
		ck_assert_str_eq(json_string_value(json_object_get(lo, "default")), "sgd");
		ck_assert_ptr_null(json_object_get(lo, "mutable"));
	}
	json_decref(s);
}
END_TEST

/* the distance, the threshold, and the search on their own */
START_TEST(suggest_nearest)
{
	static const struct {
		const char *a, *b;
		int d;
	} dist[] = {
		{"batch", "batch", 0}, {"bacth", "batch", 1}, /* a swap is one edit */
		{"srve", "serve", 1}, {"epoch", "epochs", 1}, {"lrr", "lr", 1},
		{"kitten", "sitting", 3}, {"", "abc", 3}, {"abc", "", 3},
		{"abcdef", "badcfe", 3}, {"ca", "abc", 3}, /* not 2: each byte edited once */
		{"local-lr", "local_lr", 1},
	};
	for (size_t i = 0; i < sizeof(dist) / sizeof(dist[0]); i++) {
		ck_assert_msg(suggest_distance(dist[i].a, dist[i].b) == dist[i].d,
			      "%s ~ %s: %d, want %d", dist[i].a, dist[i].b,
			      suggest_distance(dist[i].a, dist[i].b), dist[i].d);
		ck_assert_int_eq(suggest_distance(dist[i].b, dist[i].a), dist[i].d);
	}
	char long_word[SUGGEST_MAX + 2];
	memset(long_word, 'a', sizeof(long_word) - 1);
	long_word[SUGGEST_MAX + 1] = 0;
	ck_assert_int_eq(suggest_distance(long_word, "a"), -1);
	long_word[SUGGEST_MAX] = 0;
	ck_assert_int_eq(suggest_distance(long_word, "a"), SUGGEST_MAX - 1);

	/* max(1, len / 3) */
	ck_assert_int_eq(suggest_limit(0), 1);
	ck_assert_int_eq(suggest_limit(5), 1);
	ck_assert_int_eq(suggest_limit(6), 2);
	ck_assert_int_eq(suggest_limit(11), 3);

	static const char *const names[] = {"serve", "run", "bench", "tui", "sweep",
		"plot", "worker", "cluster", "s", "n", "ab", "ba", NULL};
	static const struct {
		const char *word, *want; /* want NULL: nothing suggested */
	} near[] = {
		{"srve", "serve"}, {"bnech", "bench"}, {"swep", "sweep"}, {"clustr", "cluster"},
		{"runn", "run"},
		{"wrkr", NULL},        /* 2 edits for 4 bytes: too far */
		{"wokrre", "worker"},  /* 2 for 6: near enough */
		{"frobnicate", NULL}, {"xyzzy", NULL}, {"", NULL},
		{"x", NULL},           /* 1 from "s", but every byte changed */
		{"aa", "ab"},          /* ties: the first in table order */
		{"sweeps", "sweep"},
	};
	for (size_t i = 0; i < sizeof(near) / sizeof(near[0]); i++) {
		suggest sg;
		suggest_start(&sg, near[i].word);
		for (int k = 0; names[k]; k++)
			suggest_offer(&sg, names[k]);
		ck_assert_msg(near[i].want ? sg.best && !strcmp(sg.best, near[i].want) : !sg.best,
			      "%s: got %s, want %s", near[i].word, sg.best ? sg.best : "nothing",
			      near[i].want ? near[i].want : "nothing");
	}

	char note[64];
	ck_assert_str_eq(suggest_note(note, sizeof(note), NULL, NULL, NULL), "");
	ck_assert_str_eq(suggest_note(note, sizeof(note), "expected a, b", NULL, NULL),
			 " (expected a, b)");
	ck_assert_str_eq(suggest_note(note, sizeof(note), NULL, "--", "lr"), " (did you mean '--lr'?)");
	ck_assert_str_eq(suggest_note(note, sizeof(note), "expected a, b", "", "b"),
			 " (expected a, b; did you mean 'b'?)");
}
END_TEST

/* every unknown name in a run object: the nearest at its level, whole
 * messages pinned; nothing for garbage */
START_TEST(suggest_in_messages)
{
	static const struct {
		const char *text, *want;
	} cases[] = {
		{"{\"bacth\": 64}", "bacth: unknown field (did you mean 'batch'?)"},
		{"{\"wrokers\": 2}", "wrokers: unknown field (did you mean 'workers'?)"},
		{"{\"learning_rate\": 0.1}", "learning_rate: unknown field"},
		{"{\"stop\": {\"epoch\": 3}}", "stop.epoch: unknown field (did you mean 'stop.epochs'?)"},
		{"{\"stop\": {\"when\": 3}}", "stop.when: unknown field"},
		{"{\"rule_params\": {\"lamda\": 3}}",
		 "rule_params.lamda: unknown field (did you mean 'rule_params.lambda'?)"},
		{"{\"rule_params\": {\"x\": 3}}", "rule_params.x: unknown field"},
		{"{\"delay\": {\"dist\": \"const\", \"mean_sm\": 3}}",
		 "delay.mean_sm: unknown field (did you mean 'delay.mean_ms'?)"},
		{"{\"link\": {\"latency\": 3}}", "link.latency: unknown field"},
		{"{\"worker_overrides\": [{\"id\": 1, \"sped\": 2}]}",
		 "worker_overrides[0].sped: unknown field for a worker (delay, spb_depth, speed, "
		 "step_ms, paused, link; did you mean 'worker_overrides[0].speed'?)"},
		{"{\"schedule\": [{\"at\": {\"v\": 1}, \"sett\": {\"lr\": 0.1}}]}",
		 "schedule[0].sett: unknown field (expected at, worker, set; did you mean "
		 "'schedule[0].set'?)"},
		{"{\"schedule\": [{\"at\": {\"v\": 1}, \"set\": {\"lrr\": 0.1}}]}",
		 "schedule[0].set.lrr: unknown field (did you mean 'schedule[0].set.lr'?)"},
		{"{\"rule\": \"sspp\"}", "rule: unknown \"sspp\" (expected ssgd, asgd, softsync, ssp, "
		 "sasgd, dcasgd, odsgd, localsgd, easgd, hogwild, diloco, async-diloco, async-gated, "
		 "streaming-diloco, sparta, demo; did you mean 'ssp'?)"},
		{"{\"rule\": \"adam\"}", "rule: unknown \"adam\" (expected ssgd, asgd, softsync, ssp, "
		 "sasgd, dcasgd, odsgd, localsgd, easgd, hogwild, diloco, async-diloco, async-gated, "
		 "streaming-diloco, sparta, demo)"},
		{"{\"clock\": \"virtul\"}",
		 "clock: unknown \"virtul\" (expected wall, virtual; did you mean 'virtual'?)"},
		{"{\"delay\": {\"dist\": \"lognorm\", \"mean_ms\": 3}}",
		 "delay.dist: unknown \"lognorm\" (expected none, const, uniform, exp, lognormal, "
		 "pareto, version; did you mean 'lognormal'?)"},
		{"{\"delay\": {\"dist\": \"exp\", \"where\": \"sever\"}}",
		 "delay.where: unknown \"sever\" (expected worker, server; did you mean 'server'?)"},
		{"{\"device\": \"cpuu\"}", "did you mean 'cpu'?)"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		run_config c;
		char err[SL_ERR_LEN] = "";
		ck_assert_int_eq(parse(cases[i].text, &c, err), -SL_EINVAL);
		const char *want = cases[i].want;
		size_t lw = strlen(want), le = strlen(err);
		/* whole messages, but for the device's choices (as built) */
		ck_assert_msg(strncmp(want, "did", 3) ? !strcmp(err, want)
						     : le >= lw && !strcmp(err + le - lw, want),
			      "%s: \"%s\", want \"%s\"", cases[i].text, err, want);
	}

	/* PATCH bodies: the controls and the run's fields; a worker's */
	run_cmd cmd;
	char err[SL_ERR_LEN] = "";
	ck_assert_int_eq(change("{\"lrr\": 0.1}", -1, &cmd, err), -SL_EINVAL);
	ck_assert_str_eq(err, "lrr: unknown field (did you mean 'lr'?)");
	ck_assert_int_eq(change("{\"pasued\": true}", -1, &cmd, err), -SL_EINVAL);
	ck_assert_str_eq(err, "pasued: unknown field (did you mean 'paused'?)");
	ck_assert_int_eq(change("{\"sped\": 0.5}", 1, &cmd, err), -SL_EINVAL);
	ck_assert_str_eq(err, "sped: unknown field for a worker (delay, spb_depth, speed, step_ms, paused, "
			      "link; did you mean 'speed'?)");
	ck_assert_int_eq(change("{\"rule\": \"asgdd\"}", -1, &cmd, err), -SL_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "sparta, demo; did you mean 'asgd'?)"));
}
END_TEST

static Suite *
config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("parse");
	tcase_add_test(tc, defaults_valid);
	tcase_add_test(tc, cmd_bits_named_by_their_fields);
	tcase_add_test(tc, full_object);
	tcase_add_loop_test(tc, rejects_bad, 0, (int)(sizeof(bad) / sizeof(bad[0])));
	tcase_add_test(tc, round_trip);
	tcase_add_test(tc, graph_init_std_round_trip);
	tcase_add_test(tc, number_printing);
	tcase_add_test(tc, field_ranges);
	tcase_add_test(tc, rule_params_described);
	tcase_add_test(tc, changes);
	tcase_add_test(tc, suggest_nearest);
	tcase_add_test(tc, suggest_in_messages);
	tcase_add_test(tc, schema);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(config_suite)
