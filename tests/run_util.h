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

/* run cfg to the end and return the server's weights (caller frees) */
static inline float *
final_weights(const run_config *c, size_t *n)
{
	run *r;
	char err[SL_ERR_LEN] = "";
	ck_assert_msg(run_new(c, &data, NULL, 0, NULL, &r, err) == 0, "%s", err);
	ck_assert_int_eq(run_exec(r), 0);
	float *w = malloc(sizeof(float) * 20000);
	*n = run_weights(r, w, 20000);
	ck_assert_uint_gt(*n, 0);
	run_free(r);
	return w;
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

static inline void
on_eval_ck(void *ud, const run_eval *e)
{
	on_eval(&((ckrec *)ud)->r, e);
}

/* Run c straight through (A), checkpointing at version `at`, then resume a
 * new run from that checkpoint (B): B's records must be A's from the
 * checkpoint on, bit for bit (the training loss and the gradient
 * coherence too, NaN or not). Returns A's records (caller frees); the
 * checkpoint stays in *ck (caller frees ck->buf). The schedule's entries
 * before[0..nb), at versions below `at`, come first (changes applied
 * before the checkpoint). */
static inline ckrec *
resume_matches_sched(const run_config *c, const run_sched *before, int nb, run_sched at,
		     ckrec **ck)
{
	run_sched s[8];
	ck_assert_int_lt(nb, 8);
	if (nb)
		memcpy(s, before, sizeof(run_sched) * (size_t)nb);
	s[nb] = at;
	ckrec *a = calloc(1, sizeof(*a));
	run *r;
	char err[SL_ERR_LEN] = "";
	run_callbacks cb = {.eval = on_eval_ck, .checkpoint = on_ckpt, .ud = a};
	ck_assert_msg(run_new(c, &data, s, nb + 1, &cb, &r, err) == 0, "%s", err);
	ck_assert_int_eq(run_exec(r), 0);
	run_free(r);
	ck_assert_ptr_nonnull(a->buf);

	run_config c2;
	ck_assert_msg(run_checkpoint_config(a->buf, a->len, &c2, err) == 0, "%s", err);
	ck_assert_str_eq(c2.rule, c->rule);
	ck_assert_int_eq(c2.augment, c->augment);
	ckrec *b = calloc(1, sizeof(*b));
	cb.ud = b;
	ck_assert_msg(run_new(&c2, &data, NULL, 0, &cb, &r, err) == 0, "%s", err);
	ck_assert_msg(run_restore(r, a->buf, a->len, err) == 0, "%s", err);
	ck_assert_int_eq(run_exec(r), 0);
	run_free(r);
	/* B's records are A's from the checkpoint on */
	int off = a->r.n - b->r.n;
	ck_assert_int_gt(b->r.n, 2);
	ck_assert_int_ge(off, 1);
	for (int i = 0; i < b->r.n; i++) {
		const run_eval *x = &a->r.ev[off + i], *y = &b->r.ev[i];
		ck_assert_msg(x->v == y->v && x->samples == y->samples &&
				      x->t == y->t && x->test_acc == y->test_acc &&
				      x->test_loss == y->test_loss &&
				      x->best_acc == y->best_acc &&
				      !memcmp(&x->train_loss, &y->train_loss, sizeof(double)) &&
				      !memcmp(&x->coherence, &y->coherence, sizeof(double)),
			      "%s: record %d (v %llu vs %llu) differs", c->rule, i,
			      (unsigned long long)x->v, (unsigned long long)y->v);
		ck_assert_mem_eq(&x->stale, &y->stale, sizeof(x->stale));
	}
	free(b->buf);
	free(b);
	*ck = a;
	return a;
}

static inline ckrec *
resume_matches_after(const run_config *c, const run_sched *before, int nb, uint64_t at,
		     ckrec **ck)
{
	run_sched s = {.by_version = 1, .v = at, .cmd = {.worker = -1, .fields = CMD_CHECKPOINT}};
	return resume_matches_sched(c, before, nb, s, ck);
}

/* the same with the checkpoint taken at run time t (run seconds) */
static inline ckrec *
resume_matches_at(const run_config *c, double t, ckrec **ck)
{
	run_sched s = {.by_version = 0, .t = t, .cmd = {.worker = -1, .fields = CMD_CHECKPOINT}};
	return resume_matches_sched(c, NULL, 0, s, ck);
}

static inline ckrec *
resume_matches(const run_config *c, uint64_t at, ckrec **ck)
{
	return resume_matches_after(c, NULL, 0, at, ck);
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
