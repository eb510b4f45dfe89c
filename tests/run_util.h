/* run_util.h - for the Check suites of whole runs (test_run.c,
 * test_run_rules.c, test_run_divergence.c): the data set their cases
 * share, a base configuration, a run to its end, the comparison of two
 * runs' records, and the suite built from a table of cases. Each suite
 * binary is one file, so `data` is that binary's own. */
#ifndef SL_RUN_UTIL_H
#define SL_RUN_UTIL_H

#include "run.h"
#include "runrec.h"
#include "testutil.h"

/* loaded by each case's fixture (setup), freed by teardown */
static dataset_pair data;

static inline void
setup(void)
{
	char err[SL_ERR_LEN];
	ck_assert_msg(ds_load("synthetic:2400", 3, &data, err) == 0, "%s", err);
}

static inline void
teardown(void)
{
	ds_pair_free(&data);
}

static inline run_config
base(const char *rule, int workers)
{
	run_config c;
	config_defaults(&c);
	snprintf(c.model, sizeof(c.model), "mlp:784-16-10");
	snprintf(c.dataset, sizeof(c.dataset), "synthetic:2400");
	snprintf(c.rule, sizeof(c.rule), "%s", rule);
	snprintf(c.clock, sizeof(c.clock), "virtual");
	c.workers = workers;
	c.batch = 16;
	c.lr = 0.01;
	c.eval_every = 50;
	c.stop_steps = 300;
	return c;
}

/* run cfg to the end; returns the final snapshot (caller puts it) */
static inline run_snapshot *
go(const run_config *c, const run_sched *s, int ns, rec *out)
{
	run *r;
	char err[SL_ERR_LEN] = "";
	run_callbacks cb = {.eval = on_eval, .change = on_change, .ud = out};
	ck_assert_msg(run_new(c, &data, s, ns, &cb, &r, err) == 0, "%s", err);
	ck_assert_int_eq(run_exec(r), 0);
	run_snapshot *snap = run_snapshot_get(r);
	run_free(r);
	return snap;
}

/* the eval records of two runs are the same, bit for bit */
static inline int
same_records(const rec *a, const rec *b)
{
	if (a->n != b->n)
		return 0;
	for (int i = 0; i < a->n; i++)
		if (a->ev[i].v != b->ev[i].v || a->ev[i].samples != b->ev[i].samples ||
		    memcmp(&a->ev[i].test_acc, &b->ev[i].test_acc, sizeof(double)) ||
		    memcmp(&a->ev[i].train_loss, &b->ev[i].train_loss, sizeof(double)))
			return 0;
	return 1;
}

/* a case (a group of tests) of a suite; the long ones are tagged "slow"
 * (make valgrind leaves them out: under memcheck they take tens of
 * minutes) */
typedef struct run_case {
	const char *name, *tags;
	const TTest *tests[8];
} run_case;

static inline Suite *
run_suite_of(const char *name, const run_case *cases, size_t n)
{
	Suite *s = suite_create(name);
	for (size_t i = 0; i < n; i++) {
		TCase *tc = tcase_create(cases[i].name);
		tcase_add_unchecked_fixture(tc, setup, teardown);
		tcase_set_timeout(tc, 120);
		if (cases[i].tags)
			tcase_set_tags(tc, cases[i].tags);
		for (int k = 0; cases[i].tests[k]; k++)
			tcase_add_test(tc, cases[i].tests[k]);
		suite_add_tcase(s, tc);
	}
	return s;
}

#endif
