/* test_runlog.c - reading a run log back (runlog_replay): a daemon's log
 * with several runs, the records that are not the run's own, cut lines,
 * CSV and resumed runs refused, where the replay stops; a resumed run's
 * log continued (runlog_continue) and replayed. */
#include "testutil.h"

#include "config_json.h"
#include "runlog.h"

#define RUN1 "{\"model\":\"logreg\",\"device\":\"cpu\",\"workers\":2,\"stop\":{},\"t\":0,\"v\":0,\"run\":1," \
	     "\"blas\":{\"kernel\":\"Haswell\",\"config\":\"OpenBLAS\",\"isa\":\"x86-64-v3\"}}\n"
#define RUN2 "{\"model\":\"mlp:784-16-10\",\"t\":0,\"v\":0,\"run\":2}\n"

static json_t *
replay(const char *text, int want, runlog_replay_info *info, char *err)
{
	json_t *conf = NULL;
	int rc = runlog_replay(text, strlen(text), want, &conf, info, err);
	ck_assert_int_eq(rc == 0, conf != NULL);
	return conf;
}

START_TEST(daemon_log_runs)
{
	const char *log =
		RUN1
		"{\"t\":1,\"v\":50,\"epoch\":0.1,\"test_acc\":0.5,\"run\":1}\n"
		"{\"event\":\"set\",\"set\":{\"lr\":0.02},\"origin\":\"api\",\"t\":1,\"v\":60,\"run\":1}\n"
		"{\"event\":\"caption\",\"caption\":\"x\",\"scene\":0,\"loop\":0,\"t\":1,\"v\":61,\"run\":1}\n"
		"{\"event\":\"set\",\"worker\":1,\"set\":{\"spb_depth\":1},\"origin\":\"demo\",\"t\":1,\"v\":70,\"run\":1}\n"
		"{\"event\":\"set\",\"set\":{\"checkpoint\":\"a.ckpt\"},\"origin\":\"schedule\",\"t\":1,\"v\":80,\"run\":1}\n"
		"{\"event\":\"checkpoint\",\"path\":\"a.ckpt\",\"bytes\":9,\"run\":1}\n"
		"{\"event\":\"end\",\"t\":2,\"v\":90,\"stop\":\"stopped\",\"run\":1}\n"
		RUN2
		"{\"event\":\"set\",\"set\":{\"rule\":\"dcasgd\"},\"origin\":\"api\",\"t\":1,\"v\":5,\"run\":2}\n";
	char err[SL_ERR_LEN] = "";
	runlog_replay_info info;
	json_t *c = replay(log, 1, &info, err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_int_eq(info.runs, 2);
	ck_assert_int_eq(info.run, 1);
	ck_assert_int_eq(info.changes, 2); /* the checkpoint change is left out */
	ck_assert_str_eq(info.kernel, "Haswell");
	ck_assert_str_eq(info.isa, "x86-64-v3");
	ck_assert_str_eq(info.device, "cpu");
	ck_assert_str_eq(json_string_value(json_object_get(c, "model")), "logreg");
	ck_assert_str_eq(json_string_value(json_object_get(c, "clock")), "virtual");
	ck_assert_ptr_null(json_object_get(c, "run"));
	ck_assert_ptr_null(json_object_get(c, "blas"));
	ck_assert_ptr_null(json_object_get(c, "t"));
	json_t *s = json_object_get(c, "schedule");
	ck_assert_uint_eq(json_array_size(s), 2);
	json_t *e0 = json_array_get(s, 0), *e1 = json_array_get(s, 1);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(e0, "at"), "v")), 60);
	ck_assert_ptr_nonnull(json_object_get(json_object_get(e0, "set"), "lr"));
	ck_assert_int_eq(json_integer_value(json_object_get(e1, "worker")), 1);
	/* stopped by hand: the replay stops at the end record's version */
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(c, "stop"), "steps")), 90);
	ck_assert_str_eq(info.stop_from, "end");
	json_decref(c);

	c = replay(log, 0, &info, err); /* the last run by default */
	ck_assert_int_eq(info.run, 2);
	ck_assert_int_eq(info.changes, 1);
	ck_assert_str_eq(info.kernel, "");
	ck_assert_str_eq(json_string_value(json_object_get(c, "model")), "mlp:784-16-10");
	/* no end record: to its last record's version */
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(c, "stop"), "steps")), 5);
	ck_assert_str_eq(info.stop_from, "last");
	json_decref(c);

	ck_assert_ptr_null(replay(log, 3, &info, err));
	ck_assert_msg(strstr(err, "--run 3: the log holds 2 runs"), "%s", err);
}
END_TEST

START_TEST(own_stop_kept_cut_line_skipped)
{
	const char *log =
		"{\"model\":\"logreg\",\"stop\":{\"epochs\":2},\"t\":0,\"v\":0}\n"
		"{\"event\":\"set\",\"set\":{\"lr\":0.1},\"origin\":\"schedule\",\"t\":1,\"v\":10}\n"
		"{\"t\":1,\"v\":20,\"epo"
		"\n{\"event\":\"end\",\"t\":2,\"v\":94,\"stop\":\"epochs\"}\n";
	char err[SL_ERR_LEN] = "";
	runlog_replay_info info;
	json_t *c = replay(log, 0, &info, err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_int_eq(info.skipped, 1);
	ck_assert_int_eq(info.changes, 1);
	/* it stopped on its own epochs: the replay keeps that stop */
	json_t *stop = json_object_get(c, "stop");
	ck_assert_ptr_null(json_object_get(stop, "steps"));
	ck_assert(json_real_value(json_object_get(stop, "epochs")) == 2.0 ||
		  json_integer_value(json_object_get(stop, "epochs")) == 2);
	ck_assert_str_eq(info.stop_from, "");
	json_decref(c);
}
END_TEST

START_TEST(refused)
{
	char err[SL_ERR_LEN] = "";
	runlog_replay_info info;
	ck_assert_ptr_null(replay("kind,run,t,v\r\nrun,,0,0\r\n", 0, &info, err));
	ck_assert_msg(strstr(err, "CSV") && strstr(err, "JSON-Lines"), "%s", err);
	ck_assert_ptr_null(replay("not json\n", 0, &info, err));
	ck_assert_msg(!strncmp(err, "1: ", 3), "%s", err);
	ck_assert_ptr_null(replay("", 0, &info, err));
	ck_assert_ptr_null(replay("{\"t\":1,\"v\":2,\"test_acc\":0.5}\n", 0, &info, err));
	ck_assert_msg(strstr(err, "no run object"), "%s", err);
	ck_assert_ptr_null(replay("{\"model\":\"logreg\",\"resumed\":true,\"run\":4}\n", 0, &info, err));
	ck_assert_msg(strstr(err, "resumed from a checkpoint"), "%s", err);
	/* a run recovered from the start (no checkpoint) replays: its run
	 * object and the recover's lr at v 0 (it was "recovered: unknown field") */
	json_t *c = replay("{\"model\":\"logreg\",\"recovered\":{\"run\":1,\"diverged_v\":20,"
			   "\"from_v\":0,\"from\":\"start\"},\"t\":0,\"v\":0,\"run\":2}\n"
			   "{\"event\":\"set\",\"set\":{\"lr\":0.01},\"origin\":\"recover\",\"t\":0,"
			   "\"v\":0,\"run\":2}\n",
			   0, &info, err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_int_eq(info.changes, 1);
	run_config cfg;
	config_defaults(&cfg);
	ck_assert_msg(config_apply_json(c, &cfg, err) == 0, "%s", err);
	json_decref(c);
}
END_TEST

START_TEST(strip_log_keys)
{
	json_t *o = json_pack("{s:s,s:i,s:i,s:i,s:{},s:b,s:{},s:i}", "model", "logreg", "t", 0,
			      "v", 0, "run", 3, "blas", "resumed", 1, "recovered", "batch", 8);
	runlog_strip(o);
	ck_assert_uint_eq(json_object_size(o), 2);
	ck_assert_ptr_nonnull(json_object_get(o, "batch"));
	json_decref(o);
}
END_TEST

/* ---- continuing a log (a resumed run) ----------------------------------- */

#define CONT_RUN "{\"model\":\"logreg\",\"dataset\":\"synthetic:100\",\"seed\":1,\"clock\":\"virtual\",\"t\":0,\"v\":0}\n"

static char *
slurp_text(const char *path)
{
	FILE *f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	char *b = calloc(1, 1 << 16);
	size_t n = fread(b, 1, (1 << 16) - 1, f);
	b[n] = 0;
	fclose(f);
	return b;
}

static run_config
cont_config(unsigned long long seed)
{
	run_config c;
	config_defaults(&c);
	snprintf(c.model, sizeof(c.model), "logreg");
	snprintf(c.dataset, sizeof(c.dataset), "synthetic:100");
	snprintf(c.clock, sizeof(c.clock), "virtual");
	c.seed = seed;
	return c;
}

START_TEST(continue_cuts_back_to_the_checkpoint)
{
	char dir[256], path[300], err[SL_ERR_LEN] = "";
	sl_test_tmpdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/run.jsonl", dir);
	const char *log = CONT_RUN
		"{\"t\":1,\"v\":10,\"test_acc\":0.5}\n"
		"{\"event\":\"set\",\"set\":{\"lr\":0.02},\"origin\":\"schedule\",\"t\":1,\"v\":20}\n"
		"{\"t\":2,\"v\":20,\"test_acc\":0.6}\n"
		"{\"t\":3,\"v\":30,\"test_acc\":0.7}\n"
		"{\"event\":\"end\",\"t\":3,\"v\":30,\"stop\":\"steps\"}\n"
		"{\"t\":4,\"v\":4";
	sl_test_write(path, log, strlen(log));
	run_config c = cont_config(1);
	long cut = -1;
	ck_assert_int_eq(runlog_continue(path, 20, &c, &cut, err), 1);
	ck_assert_int_eq(cut, 3); /* v 30, the end, the partial line */
	char *got = slurp_text(path);
	const char *want = strstr(log, "{\"t\":3,");
	ck_assert_uint_eq(strlen(got), (size_t)(want - log));
	ck_assert(!strncmp(got, log, strlen(got)));
	free(got);
	/* at the end already: only the end record and the partial line go */
	sl_test_write(path, log, strlen(log));
	ck_assert_int_eq(runlog_continue(path, 30, &c, &cut, err), 1);
	ck_assert_int_eq(cut, 2);
	/* an end record at the checkpoint's version goes too (the resumed run
	 * writes its own), as does an unreadable line and all after it */
	const char *odd = CONT_RUN "{\"t\":1,\"v\":10}\nnot json\n{\"t\":1,\"v\":10}\n";
	sl_test_write(path, odd, strlen(odd));
	ck_assert_int_eq(runlog_continue(path, 20, &c, &cut, err), 1);
	ck_assert_int_eq(cut, 2);
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(continue_refuses_another_runs_log)
{
	char dir[256], path[300], err[SL_ERR_LEN] = "";
	sl_test_tmpdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/run.jsonl", dir);
	long cut;
	run_config c = cont_config(1), other = cont_config(7);
	/* no file, an empty one: a fresh log */
	ck_assert_int_eq(runlog_continue(path, 20, &c, &cut, err), 0);
	sl_test_write(path, "", 0);
	ck_assert_int_eq(runlog_continue(path, 20, &c, &cut, err), 0);
	const char *log = CONT_RUN "{\"t\":1,\"v\":10}\n";
	sl_test_write(path, log, strlen(log));
	ck_assert_int_eq(runlog_continue(path, 20, &other, &cut, err), -SL_EINVAL);
	ck_assert_msg(strstr(err, "another run's log") && strstr(err, "seed"), "%s", err);
	const char *csv = "kind,run,t,v\r\nrun,,0,0\r\n";
	sl_test_write(path, csv, strlen(csv));
	ck_assert_int_eq(runlog_continue(path, 20, &c, &cut, err), -SL_EINVAL);
	ck_assert_msg(strstr(err, "not a JSON-Lines run log"), "%s", err);
	/* the refused files are left as they were */
	char *got = slurp_text(path);
	ck_assert_str_eq(got, csv);
	free(got);
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(replay_of_a_continued_log)
{
	/* a run killed after v 30, resumed at 20 with --lr (a "resume"
	 * change), its log continued: one run, both changes, the end's stop */
	const char *log =
		"{\"model\":\"logreg\",\"workers\":2,\"stop\":{\"steps\":40},\"t\":0,\"v\":0}\n"
		"{\"event\":\"set\",\"set\":{\"lr\":0.02},\"origin\":\"schedule\",\"t\":1,\"v\":10}\n"
		"{\"t\":2,\"v\":20,\"test_acc\":0.6}\n"
		"{\"model\":\"logreg\",\"workers\":2,\"stop\":{\"steps\":40},\"t\":0,\"v\":0,\"resumed\":true}\n"
		"{\"event\":\"set\",\"set\":{\"lr\":0.01},\"origin\":\"resume\",\"t\":2,\"v\":20}\n"
		"{\"event\":\"end\",\"t\":4,\"v\":40,\"stop\":\"steps\"}\n";
	char err[SL_ERR_LEN] = "";
	runlog_replay_info info;
	json_t *c = replay(log, 0, &info, err);
	ck_assert_msg(c != NULL, "%s", err);
	ck_assert_int_eq(info.runs, 1);
	ck_assert_int_eq(info.changes, 2);
	json_t *sched = json_object_get(c, "schedule");
	ck_assert_uint_eq(json_array_size(sched), 2);
	json_t *v = json_object_get(json_object_get(json_array_get(sched, 1), "at"), "v");
	ck_assert_int_eq(json_integer_value(v), 20);
	json_decref(c);
}
END_TEST

static Suite *
runlog_suite(void)
{
	Suite *s = suite_create("runlog");
	TCase *tc = tcase_create("replay");
	tcase_add_test(tc, daemon_log_runs);
	tcase_add_test(tc, own_stop_kept_cut_line_skipped);
	tcase_add_test(tc, refused);
	tcase_add_test(tc, strip_log_keys);
	suite_add_tcase(s, tc);
	tc = tcase_create("continue");
	tcase_add_test(tc, continue_cuts_back_to_the_checkpoint);
	tcase_add_test(tc, continue_refuses_another_runs_log);
	tcase_add_test(tc, replay_of_a_continued_log);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(runlog_suite)
