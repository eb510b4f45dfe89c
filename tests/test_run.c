/* test_run.c - the asynchronous engine: exact staleness on scripted
 * schedules, SSP's bound, version delays, server-held gradients, partial
 * backprop accounting, worker count changes, rule switches, virtual-clock
 * determinism, and a wall-clock run with real threads. */
#include <math.h>

#include "rng.h"
#include "rule.h"
#include "run.h"
#include "runrec.h"
#include "testutil.h"

static dataset_pair data;

static void
setup(void)
{
	char err[SL_ERR_LEN];
	ck_assert_msg(ds_load("synthetic:2400", 3, &data, err) == 0, "%s", err);
}

static void
teardown(void)
{
	ds_pair_free(&data);
}

static run_config
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
static run_snapshot *
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

START_TEST(ssgd_is_never_stale)
{
	run_config c = base("ssgd", 4);
	c.delay.dist = DELAY_EXP;
	c.delay.mean_ms = 30;
	rec *r = calloc(1, sizeof(*r));
	run_snapshot *s = go(&c, NULL, 0, r);
	ck_assert_uint_eq(s->v, 300);
	ck_assert_uint_eq(s->stale.n, 4 * 300);
	ck_assert_uint_eq(s->stale.b[0], s->stale.n);
	ck_assert_uint_eq(s->stale.max, 0);
	ck_assert_str_eq(s->stop_reason, "steps");
	run_snapshot_put(s);
	free(r);
}
END_TEST

START_TEST(asgd_equal_speed_settles_at_n_minus_1)
{
	for (int n = 2; n <= 8; n *= 2) {
		run_config c = base("asgd", n);
		rec *r = calloc(1, sizeof(*r));
		run_snapshot *s = go(&c, NULL, 0, r);
		/* first round: 0, 1, ..., n-1; then exactly n-1 forever */
		for (int k = 0; k < n - 1; k++)
			ck_assert_msg(s->stale.b[k] == 1, "n %d: %llu gradients with staleness %d",
				      n, (unsigned long long)s->stale.b[k], k);
		ck_assert_uint_eq(s->stale.b[n - 1], s->stale.n - (uint64_t)(n - 1));
		ck_assert_uint_eq(s->stale.max, (uint64_t)n - 1);
		/* worker k's first gradient is k stale, the rest n-1 */
		for (int w = 0; w < s->n_workers; w++) {
			double it = (double)s->workers[w].iterations;
			double want = (w + (it - 1) * (n - 1)) / it;
			ck_assert_msg(fabs(s->workers[w].staleness_mean - want) < 1e-9,
				      "n %d worker %d: mean %g, want %g", n, w,
				      s->workers[w].staleness_mean, want);
		}
		run_snapshot_put(s);
		free(r);
	}
}
END_TEST

START_TEST(ssp_keeps_its_bound)
{
	/* one straggler at a quarter speed: without the bound the others run
	 * far ahead; with s = 2 nobody gets more than 2 clocks ahead */
	run_config c = base("ssp", 4);
	c.rp.s = 2;
	c.n_overrides = 1;
	c.overrides[0] = (worker_override){.id = 0, .has_speed = 1, .speed = 0.25};
	rec *r = calloc(1, sizeof(*r));
	run_snapshot *s = go(&c, NULL, 0, r);
	ck_assert_uint_eq(s->clock_gap_max, 2);
	/* the straggler did about a quarter of the others' work or more */
	ck_assert(s->workers[0].iterations * 4 >= s->workers[1].iterations);
	run_snapshot_put(s);
	/* the same with asgd: the gap grows far beyond 2 */
	snprintf(c.rule, sizeof(c.rule), "asgd");
	s = go(&c, NULL, 0, r);
	ck_assert(s->clock_gap_max > 10);
	run_snapshot_put(s);
	free(r);
}
END_TEST

START_TEST(version_delay_is_uniform)
{
	run_config c = base("asgd", 1);
	c.delay.dist = DELAY_VERSION;
	c.delay.s = 5;
	c.stop_steps = 3000;
	c.eval_every = 0;
	rec *r = calloc(1, sizeof(*r));
	run_snapshot *s = go(&c, NULL, 0, r);
	ck_assert_uint_le(s->stale.max, 5);
	for (int k = 0; k <= 5; k++)
		ck_assert_msg(s->stale.b[k] > 400 && s->stale.b[k] < 600,
			      "staleness %d drawn %llu times of 3000", k,
			      (unsigned long long)s->stale.b[k]);
	ck_assert(fabs(stale_mean(&s->stale) - 2.5) < 0.15);
	run_snapshot_put(s);
	/* the same from a worker's own override, given from the start */
	c.delay.dist = DELAY_NONE;
	c.n_overrides = 1;
	c.overrides[0] = (worker_override){.id = 0, .has_delay = 1,
					   .delay = {.dist = DELAY_VERSION, .s = 5}};
	s = go(&c, NULL, 0, r);
	ck_assert_uint_le(s->stale.max, 5);
	ck_assert_msg(fabs(stale_mean(&s->stale) - 2.5) < 0.15, "override: mean %g",
		      stale_mean(&s->stale));
	run_snapshot_put(s);
	free(r);
}
END_TEST

START_TEST(server_held_gradients_age)
{
	/* one worker, gradients held 2 ms at the server (a step costs about
	 * 0.12 ms simulated): the worker keeps computing on weights that do
	 * not yet include its last ~16 pushes */
	run_config c = base("asgd", 1);
	c.delay.dist = DELAY_CONST;
	c.delay.mean_ms = 2;
	c.delay.at_server = 1;
	c.eval_every = 0;
	rec *r = calloc(1, sizeof(*r));
	run_snapshot *s = go(&c, NULL, 0, r);
	ck_assert_msg(stale_mean(&s->stale) > 10 && stale_mean(&s->stale) < 25,
		      "mean staleness %g", stale_mean(&s->stale));
	/* const delays: between the ramp-up and the final release, every
	 * gradient is equally old */
	uint64_t mode = 0;
	for (int k = 0; k < STALE_BUCKETS; k++)
		if (s->stale.b[k] > mode)
			mode = s->stale.b[k];
	ck_assert_msg(mode * 10 >= s->stale.n * 8, "mode %llu of %llu",
		      (unsigned long long)mode, (unsigned long long)s->stale.n);
	/* the run stops at exactly 300 updates; what was still held then
	 * (at most 32) is never applied */
	ck_assert_uint_eq(s->v, 300);
	ck_assert_uint_eq(s->stale.n, s->v);
	ck_assert_uint_ge(s->workers[0].iterations, s->v);
	ck_assert_uint_le(s->workers[0].iterations, s->v + 32);
	run_snapshot_put(s);
	/* held 20 ms (~166 steps): a worker never has more than 32 waiting,
	 * so it pauses and the staleness settles near 32 (the final release
	 * of what is still held adds a tail) */
	c.delay.mean_ms = 20;
	s = go(&c, NULL, 0, r);
	double p50 = stale_quantile(&s->stale, 0.5);
	ck_assert_msg(p50 >= 28 && p50 <= 34, "p50 %g", p50);
	ck_assert_uint_eq(s->stale.n, s->v);
	run_snapshot_put(s);
	free(r);
}
END_TEST

/* the eval records of two runs are the same, bit for bit */
static int
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

START_TEST(server_delays_keep_sync_rules)
{
	/* a server-held delay delays the arrival and never changes the rule:
	 * ssgd stays at staleness 0 and odsgd at most 1, on both clocks, and
	 * on the virtual clock the run is the same as with the delay on the
	 * worker's side, bit for bit */
	const char *rules[] = {"ssgd", "odsgd"};
	const uint64_t bound[] = {0, 1};
	for (int k = 0; k < 2; k++) {
		for (int clk = 0; clk < 2; clk++) {
			run_config c = base(rules[k], 4);
			c.delay.dist = DELAY_CONST;
			c.delay.mean_ms = clk ? 3 : 20;
			c.delay.at_server = 1;
			c.rp.warmup = 20;
			c.rp.local_lr = 0.01;
			if (clk) {
				snprintf(c.clock, sizeof(c.clock), "wall");
				c.stop_steps = 60;
			}
			rec *a = calloc(1, sizeof(*a));
			run_snapshot *s = go(&c, NULL, 0, a);
			ck_assert_msg(s->stale.max <= bound[k], "%s on the %s clock: staleness up to %llu",
				      rules[k], c.clock, (unsigned long long)s->stale.max);
			ck_assert_uint_eq(s->v, c.stop_steps);
			run_snapshot_put(s);
			if (!clk) {
				rec *b = calloc(1, sizeof(*b));
				c.delay.at_server = 0;
				run_snapshot_put(go(&c, NULL, 0, b));
				ck_assert_msg(same_records(a, b), "%s: server-held != worker-side", rules[k]);
				free(b);
			}
			free(a);
		}
	}
	/* an asynchronous rule does move on while its gradient is held */
	run_config c = base("asgd", 2);
	c.delay.dist = DELAY_CONST;
	c.delay.mean_ms = 2;
	c.delay.at_server = 1;
	rec *a = calloc(1, sizeof(*a));
	run_snapshot *s = go(&c, NULL, 0, a);
	ck_assert_msg(stale_mean(&s->stale) > 5, "asgd held: mean %g", stale_mean(&s->stale));
	run_snapshot_put(s);
	free(a);
}
END_TEST

START_TEST(dcasgd_compensates_version_staleness)
{
	/* one worker, staleness drawn in versions: the gradient is computed
	 * on old weights and DC-ASGD corrects it (so its run differs from
	 * asgd's), while with lambda 0 it is asgd exactly */
	run_config c = base("asgd", 1);
	c.delay.dist = DELAY_VERSION;
	c.delay.s = 16;
	c.eval_every = 100;
	rec *a = calloc(1, sizeof(*a)), *d = calloc(1, sizeof(*d)), *z = calloc(1, sizeof(*z));
	run_snapshot_put(go(&c, NULL, 0, a));
	snprintf(c.rule, sizeof(c.rule), "dcasgd");
	c.rp.lambda = 2;
	run_snapshot_put(go(&c, NULL, 0, d));
	c.rp.lambda = 0;
	run_snapshot_put(go(&c, NULL, 0, z));
	ck_assert_msg(!same_records(a, d), "dcasgd equals asgd under version staleness");
	ck_assert(same_records(a, z));
	free(a);
	free(d);
	free(z);
}
END_TEST

START_TEST(steps_stop_exactly)
{
	/* --steps N ends at version N, whatever is in flight: held gradients
	 * (wall and virtual), hogwild's unlocked steps, sync rounds */
	const struct {
		const char *rule, *clock;
		int at_server;
	} k[] = {{"asgd", "wall", 1}, {"asgd", "virtual", 1}, {"dcasgd", "wall", 1},
		 {"hogwild", "wall", 0}, {"ssgd", "wall", 1}, {"softsync", "virtual", 1}};
	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		run_config c = base(k[i].rule, 3);
		snprintf(c.clock, sizeof(c.clock), "%s", k[i].clock);
		c.delay.dist = DELAY_CONST;
		c.delay.mean_ms = 5;
		c.delay.at_server = k[i].at_server;
		c.rp.n = 3;
		c.stop_steps = 40;
		c.eval_every = 0;
		rec *r = calloc(1, sizeof(*r));
		run_snapshot *s = go(&c, NULL, 0, r);
		ck_assert_msg(s->v == 40, "%s on %s: ended at version %llu", k[i].rule,
			      k[i].clock, (unsigned long long)s->v);
		ck_assert_str_eq(s->stop_reason, "steps");
		run_snapshot_put(s);
		free(r);
	}
}
END_TEST

START_TEST(partial_backprop_accounting)
{
	run_config c = base("asgd", 2);
	c.n_overrides = 1;
	c.overrides[0] = (worker_override){.id = 1, .has_spb = 1, .spb_depth = 1};
	rec *r = calloc(1, sizeof(*r));
	run_snapshot *s = go(&c, NULL, 0, r);
	const worker_snap *full = &s->workers[0], *part = &s->workers[1];
	ck_assert_int_eq(part->spb_depth, 1);
	/* the top layer of mlp:784-16-10 is 16*10 + 10 parameters */
	ck_assert(fabs(part->bytes_sent / part->iterations - 170 * 4) < 1e-9);
	ck_assert(fabs(full->bytes_sent / full->iterations -
		       (784 * 16 + 16 + 170) * 4) < 1e-9);
	ck_assert(full->flops_saved == 0 && part->flops_saved > 0);
	run_snapshot_put(s);
	free(r);
}
END_TEST

START_TEST(workers_grow_and_shrink)
{
	run_config c = base("asgd", 2);
	c.stop_steps = 0;
	c.stop_epochs = 2;
	c.eval_every = 0;
	run_sched s[2] = {0};
	s[0].by_version = 1;
	s[0].v = 60;
	s[0].cmd = (run_cmd){.worker = -1, .fields = CMD_WORKERS, .workers = 6};
	s[1].by_version = 1;
	s[1].v = 200;
	s[1].cmd = (run_cmd){.worker = -1, .fields = CMD_WORKERS, .workers = 3};
	rec *r = calloc(1, sizeof(*r));
	run_snapshot *snap = go(&c, s, 2, r);
	ck_assert_int_eq(r->n_change, 2);
	ck_assert_uint_eq(r->change_v[0], 60);
	ck_assert_uint_eq(r->change_v[1], 200);
	ck_assert_int_eq(snap->n_workers, 3);
	ck_assert_int_eq(snap->cfg.workers, 3);
	/* the epoch count survives the re-split: exactly 2 epochs of samples */
	ck_assert_uint_eq(snap->samples, 2 * 2400);
	ck_assert(snap->stale.max >= 5); /* six workers were stale by five */
	run_snapshot_put(snap);
	free(r);
}
END_TEST

START_TEST(workers_come_back)
{
	/* 2 -> 4 -> 1 -> 3 on both clocks: a worker that left can rejoin */
	for (int wall = 0; wall <= 1; wall++) {
		run_config c = base("asgd", 2);
		if (wall) {
			/* 1 ms per step so the changes land at their versions */
			snprintf(c.clock, sizeof(c.clock), "wall");
			c.delay.dist = DELAY_CONST;
			c.delay.mean_ms = 1;
		}
		/* on the wall clock a long last stint, so a loaded machine
		 * still schedules the rejoined worker's thread */
		c.stop_steps = wall ? 600 : 200;
		c.eval_every = 0;
		const int counts[] = {4, 1, 3};
		run_sched s[3] = {0};
		for (int i = 0; i < 3; i++) {
			s[i].by_version = 1;
			s[i].v = 30 * (uint64_t)(i + 1);
			s[i].cmd = (run_cmd){.worker = -1, .fields = CMD_WORKERS,
					     .workers = counts[i]};
		}
		rec *r = calloc(1, sizeof(*r));
		run_snapshot *snap = go(&c, s, 3, r);
		ck_assert_int_eq(r->n_change, 3);
		ck_assert_int_eq(snap->n_workers, 3);
		ck_assert_uint_eq(snap->v, c.stop_steps);
		/* worker 2 worked in two stints */
		ck_assert_uint_gt(snap->workers[2].iterations, 0);
		/* one worker alone from v 60 to 90: fresh gradients there, once
		 * the three that were in flight have landed */
		if (!wall)
			ck_assert_uint_ge(snap->stale.b[0], 30 - 3);
		run_snapshot_put(snap);
		free(r);
	}
}
END_TEST

START_TEST(rule_switch_mid_run)
{
	run_config c = base("asgd", 4);
	c.eval_every = 0;
	run_sched s = {0};
	s.by_version = 1;
	s.v = 100;
	s.cmd = (run_cmd){.worker = -1, .fields = CMD_RULE};
	snprintf(s.cmd.rule, sizeof(s.cmd.rule), "ssgd");
	rec *r = calloc(1, sizeof(*r));
	run_snapshot *snap = go(&c, &s, 1, r);
	ck_assert_str_eq(snap->cfg.rule, "ssgd");
	ck_assert_uint_eq(r->change_v[0], 100);
	/* 100 asgd updates (staleness 0, 1, 2, then 3), then 200 ssgd
	 * rounds of 4 gradients: the 3 in flight at the switch were read at
	 * v = 97, 98, 99 and land in the first round (v = 100) 3, 2 and 1
	 * stale; all the others are fresh */
	ck_assert_uint_eq(snap->stale.n, 100 + 4 * 200);
	ck_assert_uint_eq(snap->stale.b[0], 1 + 4 * 200 - 3);
	ck_assert_uint_eq(snap->stale.b[1], 2);
	ck_assert_uint_eq(snap->stale.b[2], 2);
	ck_assert_uint_eq(snap->stale.b[3], 100 - 3 + 1);
	run_snapshot_put(snap);
	free(r);
}
END_TEST

START_TEST(virtual_clock_is_deterministic)
{
	const char *rules[] = {"asgd", "dcasgd", "odsgd", "localsgd", "easgd", "softsync"};
	for (int k = 0; k < 6; k++) {
		run_config c = base(rules[k], 3);
		c.delay.dist = DELAY_LOGNORMAL;
		c.delay.mean_ms = 5;
		c.delay.sigma = 1;
		c.rp.warmup = 20;
		rec *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
		run_snapshot *s1 = go(&c, NULL, 0, a), *s2 = go(&c, NULL, 0, b);
		ck_assert_int_eq(a->n, b->n);
		ck_assert_int_gt(a->n, 3);
		for (int i = 0; i < a->n; i++) {
			const run_eval *x = &a->ev[i], *y = &b->ev[i];
			ck_assert_msg(x->v == y->v && x->samples == y->samples &&
					      x->t == y->t && x->test_acc == y->test_acc &&
					      x->test_loss == y->test_loss &&
					      (x->train_loss == y->train_loss ||
					       (isnan(x->train_loss) && isnan(y->train_loss))),
				      "%s record %d differs", rules[k], i);
			ck_assert_mem_eq(&x->stale, &y->stale, sizeof(x->stale));
		}
		ck_assert(a->ev[a->n - 1].test_acc > 0.5);
		run_snapshot_put(s1);
		run_snapshot_put(s2);
		free(a);
		free(b);
	}
}
END_TEST

START_TEST(virtual_delays_cost_no_time)
{
	/* 8 workers with 100 ms mean delays: simulated hours, real seconds */
	run_config c = base("asgd", 8);
	c.delay.dist = DELAY_EXP;
	c.delay.mean_ms = 100;
	c.eval_every = 0;
	rec *r = calloc(1, sizeof(*r));
	double t0 = sl_now();
	run_snapshot *s = go(&c, NULL, 0, r);
	double wall_s = sl_now() - t0;
	ck_assert(s->t > 3.0);     /* simulated seconds */
	ck_assert(wall_s < s->t);  /* nobody slept */
	ck_assert(stale_mean(&s->stale) > 5);
	run_snapshot_put(s);
	free(r);
}
END_TEST

START_TEST(wall_clock_threads)
{
	const char *rules[] = {"asgd", "ssgd", "ssp", "hogwild", "odsgd"};
	for (int k = 0; k < 5; k++) {
		run_config c = base(rules[k], 3);
		snprintf(c.clock, sizeof(c.clock), "wall");
		c.delay.dist = DELAY_UNIFORM;
		c.delay.mean_ms = 2;
		c.delay.spread = 1;
		c.stop_steps = 150;
		c.rp.warmup = 10;
		rec *r = calloc(1, sizeof(*r));
		run_snapshot *s = go(&c, NULL, 0, r);
		ck_assert_str_eq(s->stop_reason, "steps");
		ck_assert_uint_ge(s->v, 150);
		ck_assert_int_eq(s->n_workers, 3);
		if (!strcmp(rules[k], "ssgd"))
			ck_assert_uint_eq(s->stale.max, 0);
		else if (!strcmp(rules[k], "asgd"))
			ck_assert(stale_mean(&s->stale) > 0.5);
		ck_assert_msg(s->test_acc > 0.5, "%s: acc %g", rules[k], s->test_acc);
		run_snapshot_put(s);
		free(r);
	}
}
END_TEST

typedef struct ckrec {
	rec r;
	uint8_t *buf;
	size_t len;
} ckrec;

static void
on_ckpt(void *ud, const run_cmd *c, const uint8_t *buf, size_t len)
{
	ckrec *k = ud;
	ck_assert(c->fields & CMD_CHECKPOINT);
	ck_assert_ptr_nonnull(buf);
	free(k->buf);
	k->buf = malloc(len);
	memcpy(k->buf, buf, len);
	k->len = len;
}

static void
on_eval_ck(void *ud, const run_eval *e)
{
	on_eval(&((ckrec *)ud)->r, e);
}

/* Run c straight through (A), checkpointing at version `at`, then resume a
 * new run from that checkpoint (B): B's records must be A's from the
 * checkpoint on, bit for bit. Returns A's records (caller frees); the
 * checkpoint stays in *ck (caller frees ck->buf). */
static ckrec *
resume_matches(const run_config *c, uint64_t at, ckrec **ck)
{
	run_sched s = {.by_version = 1, .v = at,
		       .cmd = {.worker = -1, .fields = CMD_CHECKPOINT}};
	ckrec *a = calloc(1, sizeof(*a));
	run *r;
	char err[SL_ERR_LEN] = "";
	run_callbacks cb = {.eval = on_eval_ck, .checkpoint = on_ckpt, .ud = a};
	ck_assert_msg(run_new(c, &data, &s, 1, &cb, &r, err) == 0, "%s", err);
	ck_assert_int_eq(run_exec(r), 0);
	run_free(r);
	ck_assert_ptr_nonnull(a->buf);

	run_config c2;
	ck_assert_msg(run_checkpoint_config(a->buf, a->len, &c2, err) == 0, "%s", err);
	ck_assert_str_eq(c2.rule, c->rule);
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
				      x->best_acc == y->best_acc,
			      "%s: record %d (v %llu vs %llu) differs", c->rule, i,
			      (unsigned long long)x->v, (unsigned long long)y->v);
		ck_assert_mem_eq(&x->stale, &y->stale, sizeof(x->stale));
	}
	free(b->buf);
	free(b);
	*ck = a;
	return a;
}

START_TEST(checkpoint_resumes_exactly)
{
	/* run A straight through, taking a checkpoint at v = 140; run B from
	 * that checkpoint: every later record equals A's, bit for bit */
	const char *rules[] = {"dcasgd", "ssgd", "odsgd", "localsgd"};
	for (int k = 0; k < 4; k++) {
		run_config c = base(rules[k], 3);
		c.momentum = 0.5;
		c.delay.dist = DELAY_EXP;
		c.delay.mean_ms = 3;
		c.rp.warmup = 20;
		c.eval_every = 40;
		c.n_overrides = 1;
		c.overrides[0] = (worker_override){.id = 2, .has_delay = 1,
			.delay = {.dist = DELAY_CONST, .mean_ms = 2, .at_server = 1}};
		ckrec *a;
		resume_matches(&c, 140, &a);
		run_config c2;
		run *r;
		char err[SL_ERR_LEN] = "";
		ck_assert_msg(run_checkpoint_config(a->buf, a->len, &c2, err) == 0, "%s", err);
		/* damaged checkpoints are refused, never read out of bounds */
		size_t cuts[] = {0, 7, 8, 100, a->len / 3, a->len / 2, a->len - 9, a->len - 1};
		for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
			ck_assert_int_eq(run_new(&c2, &data, NULL, 0, NULL, &r, err), 0);
			ck_assert_int_eq(run_restore(r, a->buf, cuts[i], err), -SL_EFORMAT);
			run_free(r);
		}
		a->buf[0] ^= 1;
		ck_assert_int_eq(run_checkpoint_config(a->buf, a->len, &c2, err), -SL_EFORMAT);
		ck_assert_ptr_nonnull(strstr(err, "not a stalelab checkpoint"));
		free(a->buf);
		free(a);
	}
}
END_TEST

START_TEST(odsgd_local_step_is_pinned)
{
	/* one worker after its warm-up, local_lr = lr: the local step
	 * x = W(R) - (local_lr / 1) g is exactly the server's next step, so
	 * the worker computes on W(R+1) as ssgd does: the same run, bit for
	 * bit, with each gradient pushed one version late (staleness 1). A
	 * local step of twice (or half) that size makes another run. */
	run_config c = base("ssgd", 1);
	rec *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	run_snapshot_put(go(&c, NULL, 0, a));
	snprintf(c.rule, sizeof(c.rule), "odsgd");
	c.rp.warmup = 0;
	c.rp.local_lr = c.lr;
	run_snapshot *s = go(&c, NULL, 0, b);
	ck_assert_msg(same_records(a, b), "odsgd's local step is not W - local_lr/N g");
	ck_assert_uint_eq(s->stale.max, 1);
	ck_assert_uint_eq(s->stale.b[0], 1);
	ck_assert_uint_eq(s->stale.b[1], s->stale.n - 1);
	run_snapshot_put(s);
	c.rp.local_lr = 2 * c.lr;
	memset(b, 0, sizeof(*b));
	run_snapshot_put(go(&c, NULL, 0, b));
	ck_assert(!same_records(a, b));
	free(a);
	free(b);
}
END_TEST

START_TEST(every_rule_in_the_table)
{
	/* each row of the rule table: the parameters it lists are rule_params
	 * keys, a short run learns, and (on the virtual clock) a checkpoint
	 * resumes to the same records bit for bit */
	static const char *const keys[] = {"s", "lambda", "H", "n", "local_lr", "m",
					   "beta", "period", "warmup", "adaptive",
					   "local_opt", NULL};
	for (int i = 0; rule_table[i]; i++) {
		const rule_class *rc = rule_table[i];
		ck_assert_ptr_nonnull(rc->doc);
		ck_assert_ptr_nonnull(rc->params);
		for (int k = 0; rc->params[k]; k++) {
			int known = 0;
			for (int j = 0; keys[j]; j++)
				known |= !strcmp(keys[j], rc->params[k]);
			ck_assert_msg(known, "%s lists unknown parameter %s", rc->name,
				      rc->params[k]);
		}
		run_config c = base(rc->name, 3);
		c.delay.dist = DELAY_EXP;
		c.delay.mean_ms = 2;
		c.rp.warmup = 10;
		c.rp.H = 4;
		c.rp.period = 4;
		c.stop_steps = rc->flags & RULE_LOCAL ? 60 : 240;
		c.eval_every = c.stop_steps / 4;
		if (rc->flags & RULE_SHARED) {
			snprintf(c.clock, sizeof(c.clock), "wall");
			rec *r = calloc(1, sizeof(*r));
			run_snapshot *s = go(&c, NULL, 0, r);
			ck_assert_msg(s->test_acc > 0.5, "%s: acc %g", rc->name, s->test_acc);
			run_snapshot_put(s);
			free(r);
			continue;
		}
		ckrec *a;
		resume_matches(&c, c.stop_steps / 2, &a);
		double acc = a->r.ev[a->r.n - 1].test_acc;
		ck_assert_msg(acc > 0.5, "%s: acc %g after %llu updates", rc->name, acc,
			      (unsigned long long)c.stop_steps);
		free(a->buf);
		free(a);
	}
}
END_TEST

START_TEST(series_memory_is_bounded)
{
	/* 40,000 evaluations: the series keeps at most 16,384, spanning the
	 * whole run, in order */
	run_config c = base("asgd", 1);
	snprintf(c.model, sizeof(c.model), "logreg");
	c.batch = 4;
	c.eval_every = 1;
	c.stop_steps = 40000;
	run *r;
	char err[SL_ERR_LEN] = "";
	/* a tiny test set: 40,000 evaluations of the suite's would take
	 * minutes on a loaded machine, and the series is what is pinned */
	dataset_pair tiny;
	ck_assert_msg(ds_load("synthetic:120", 3, &tiny, err) == 0, "%s", err);
	ck_assert_msg(run_new(&c, &tiny, NULL, 0, NULL, &r, err) == 0, "%s", err);
	ck_assert_int_eq(run_exec(r), 0);
	run_eval *ev = malloc(sizeof(run_eval) * 40000);
	int n = run_series(r, 0, ev, 40000);
	ck_assert_int_le(n, 16384);
	ck_assert_int_gt(n, 8192);
	ck_assert_uint_le(ev[0].v, 2);
	ck_assert_uint_eq(ev[n - 1].v, 40000);
	for (int i = 1; i < n; i++)
		ck_assert_uint_gt(ev[i].v, ev[i - 1].v);
	/* the latest 8,192 are all there */
	ck_assert_uint_eq(ev[n - 8192].v, 40000 - 8191);
	free(ev);
	run_free(r);
	ds_pair_free(&tiny);
}
END_TEST

/* run cfg to the end and return the server's weights (caller frees) */
static float *
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

static double
max_rel_diff(const float *a, const float *b, size_t n)
{
	double worst = 0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]) / (1e-3 + fabs((double)a[i]));
		if (d > worst)
			worst = d;
	}
	return worst;
}

START_TEST(rules_reduce_to_their_special_cases)
{
	/* each rule's worker-side arithmetic pinned by a case where it must
	 * equal a simpler rule: bit for bit where the arithmetic is the same,
	 * to rounding where only the order of operations differs */
	size_t n1, n2;
	run_config a = base("asgd", 3), b;
	snprintf(a.model, sizeof(a.model), "logreg");
	a.delay.dist = DELAY_EXP;
	a.delay.mean_ms = 2;
	a.stop_steps = 120;
	a.eval_every = 0;
	float *wa = final_weights(&a, &n1), *wb;

	/* dcasgd with lambda 0 is asgd */
	b = a;
	snprintf(b.rule, sizeof(b.rule), "dcasgd");
	b.rp.lambda = 0;
	wb = final_weights(&b, &n2);
	ck_assert_mem_eq(wa, wb, sizeof(float) * n1);
	free(wb);
	/* dcasgd with lambda > 0 is not */
	b.rp.lambda = 2;
	wb = final_weights(&b, &n2);
	ck_assert(memcmp(wa, wb, sizeof(float) * n1) != 0);
	free(wb);
	free(wa);

	/* with one worker nothing is stale: sasgd and ssp are asgd */
	a.workers = 1;
	wa = final_weights(&a, &n1);
	const char *same[] = {"sasgd", "ssp", "ssgd"};
	for (int k = 0; k < 3; k++) {
		b = a;
		snprintf(b.rule, sizeof(b.rule), "%s", same[k]);
		wb = final_weights(&b, &n2);
		ck_assert_msg(!memcmp(wa, wb, sizeof(float) * n1), "%s differs", same[k]);
		free(wb);
	}
	free(wa);

	/* 3 workers: odsgd before its warm-up ends is ssgd; local SGD with
	 * H = 1 averages W - lr g_k, which is ssgd's W - lr mean(g) */
	a = base("ssgd", 3);
	snprintf(a.model, sizeof(a.model), "logreg");
	a.stop_steps = 60;
	a.eval_every = 0;
	wa = final_weights(&a, &n1);
	b = a;
	snprintf(b.rule, sizeof(b.rule), "odsgd");
	b.rp.warmup = 1000;
	wb = final_weights(&b, &n2);
	ck_assert_mem_eq(wa, wb, sizeof(float) * n1);
	free(wb);
	b = a;
	snprintf(b.rule, sizeof(b.rule), "localsgd");
	b.rp.H = 1;
	wb = final_weights(&b, &n2);
	ck_assert_msg(max_rel_diff(wa, wb, n1) < 1e-4, "localsgd H=1 vs ssgd: %g",
		      max_rel_diff(wa, wb, n1));
	free(wb);
	/* odsgd after its warm-up makes a different, one-step-delayed run */
	b = a;
	snprintf(b.rule, sizeof(b.rule), "odsgd");
	b.rp.warmup = 5;
	wb = final_weights(&b, &n2);
	ck_assert(max_rel_diff(wa, wb, n1) > 1e-4);
	free(wb);
	free(wa);
}
END_TEST

START_TEST(commands_are_checked)
{
	run_config c = base("asgd", 2);
	run *r;
	char err[SL_ERR_LEN] = "";
	ck_assert_int_eq(run_new(&c, &data, NULL, 0, NULL, &r, err), 0);
	run_cmd bad = {.worker = 5, .fields = CMD_SPB, .spb_depth = 1};
	ck_assert_int_eq(run_command(r, &bad, err), -SL_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "no worker 5"));
	run_cmd rule = {.worker = -1, .fields = CMD_RULE};
	snprintf(rule.rule, sizeof(rule.rule), "adam");
	ck_assert_int_eq(run_command(r, &rule, err), -SL_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "rule"));
	run_cmd lr = {.worker = -1, .fields = CMD_LR, .lr = -1};
	ck_assert_int_eq(run_command(r, &lr, err), -SL_EINVAL);
	run_cmd ok = {.worker = -1, .fields = CMD_LR, .lr = 0.2};
	ck_assert_int_eq(run_command(r, &ok, err), 0);
	ck_assert_int_eq(run_exec(r), 0);
	run_snapshot *s = run_snapshot_get(r);
	ck_assert_double_eq(s->cfg.lr, 0.2);
	run_snapshot_put(s);
	run_free(r);
}
END_TEST

/* ---- divergence ---------------------------------------------------------- */

typedef struct divrec {
	rec r;
	int n_div;
	run_divergence div;
} divrec;

static void
on_div(void *ud, const run_divergence *d)
{
	divrec *x = ud;
	if (!x->n_div++)
		x->div = *d;
}

static void
on_div_eval(void *ud, const run_eval *e)
{
	on_eval(&((divrec *)ud)->r, e);
}

/* run cfg to the end collecting the divergence; the final snapshot, and
 * whether the server's weights are all finite then */
static run_snapshot *
go_div(const run_config *c, const run_sched *s, int ns, divrec *out, int *finite)
{
	run *r;
	char err[SL_ERR_LEN] = "";
	run_callbacks cb = {.eval = on_div_eval, .diverged = on_div, .ud = out};
	ck_assert_msg(run_new(c, &data, s, ns, &cb, &r, err) == 0, "%s", err);
	ck_assert_int_eq(run_exec(r), 0);
	run_snapshot *snap = run_snapshot_get(r);
	size_t n = 800 * 1000;
	float *w = malloc(sizeof(float) * n);
	size_t got = run_weights(r, w, n);
	ck_assert_uint_gt(got, 0);
	*finite = 1;
	for (size_t i = 0; i < got; i++)
		*finite &= isfinite(w[i]) != 0;
	free(w);
	run_free(r);
	return snap;
}

/* the sample the sampler hands out at position pos of the first epoch */
static uint32_t
sample_at(const run_config *c, uint32_t pos)
{
	uint32_t n = data.train.n, *perm = malloc(sizeof(uint32_t) * n);
	for (uint32_t i = 0; i < n; i++)
		perm[i] = i;
	rng g;
	rng_seed(&g, c->seed, 1000);
	rng_shuffle(&g, perm, n);
	uint32_t p = perm[pos];
	free(perm);
	return p;
}

/* poison pixel 300 of the sample the sampler hands out at batch `batch`
 * (item 5) of the first epoch; returns the pixel, *keep its value */
static float *
poison(const run_config *c, uint32_t batch, float value, float *keep)
{
	uint32_t p = sample_at(c, batch * (uint32_t)c->batch + 5);
	float *px = &data.train.x[(size_t)p * (size_t)data.train.dim + 300];
	*keep = *px;
	*px = value;
	return px;
}

START_TEST(divergence_caught_at_the_poisoned_step)
{
	/* one worker, one poisoned pixel in the sample of batch 37: the step
	 * that takes it is caught (its loss, gradient or model, whichever the
	 * model and rule make non-finite first), on both clocks, at version
	 * 37, computed on 37, and nothing of it is applied: the run stops
	 * there with every weight finite and no NaN in the series */
	const struct {
		const char *model, *rule, *clock, *what;
		float poison;
		double lr; /* from v 37 on */
	} k[] = {
		/* the hidden layer's ReLU turns the NaN into 0: the loss stays
		 * finite, the first layer's gradient (0 * NaN) does not */
		{"mlp:784-16-10", "asgd", "virtual", "gradient", NAN, 0.01f},
		{"mlp:784-16-10", "asgd", "wall", "gradient", NAN, 0.01f},
		/* no hidden layer: the logits and the loss are NaN */
		{"logreg", "asgd", "virtual", "loss", NAN, 0.01f},
		{"logreg", "ssgd", "wall", "loss", INFINITY, 0.01f},
		/* a finite pixel near FLT_MAX: the loss and gradient are
		 * finite, the local step at lr 100 (from v 37 on) overflows
		 * the model */
		{"logreg", "localsgd", "virtual", "model", 3e38f, 100},
		{"logreg", "easgd", "wall", "model", 3e38f, 100},
	};
	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		run_config c = base(k[i].rule, 1);
		snprintf(c.model, sizeof(c.model), "%s", k[i].model);
		snprintf(c.clock, sizeof(c.clock), "%s", k[i].clock);
		c.eval_every = 10;
		c.rp.H = 1;
		c.rp.period = 1;
		run_sched sc = {.by_version = 1, .v = 37,
				.cmd = {.worker = -1, .fields = CMD_LR, .lr = k[i].lr}};
		float keep, *px = poison(&c, 37, k[i].poison, &keep);
		divrec *d = calloc(1, sizeof(*d));
		int finite;
		run_snapshot *s = go_div(&c, &sc, 1, d, &finite);
		*px = keep;
		ck_assert_msg(d->n_div == 1, "%s %s: %d divergences", k[i].rule, k[i].clock,
			      d->n_div);
		ck_assert_msg(!strcmp(d->div.what, k[i].what), "%s %s: caught the %s",
			      k[i].rule, k[i].clock, d->div.what);
		ck_assert_int_eq(d->div.worker, 0);
		ck_assert_uint_eq(d->div.v, 37);
		ck_assert_uint_eq(d->div.v_read, 37);
		ck_assert_uint_eq(s->v, 37);
		ck_assert_int_eq(s->state, RUN_DIVERGED);
		ck_assert_str_eq(s->stop_reason, "diverged");
		ck_assert(s->diverged && s->div.v == 37);
		ck_assert_msg(finite, "%s %s: the server's weights hold a NaN", k[i].rule,
			      k[i].clock);
		ck_assert_int_gt(d->r.n, 1);
		for (int e = 0; e < d->r.n; e++)
			ck_assert_msg(isfinite(d->r.ev[e].train_loss) && isfinite(d->r.ev[e].test_loss),
				      "record %d (v %llu): a loss is not finite", e,
				      (unsigned long long)d->r.ev[e].v);
		ck_assert_str_eq(d->r.ev[d->r.n - 1].stop_reason, "diverged");
		run_snapshot_put(s);
		free(d);
	}
}
END_TEST

START_TEST(divergence_under_every_rule)
{
	/* every rule, 3 workers with delays, one of them sending only the
	 * top layer (partial backprop), a NaN pixel in batches 40 to 47: the
	 * run stops at the first non-finite message, with finite weights, at
	 * the version it was caught (a worker with partial backprop sends a
	 * finite top layer for such a sample: the NaN stays below it; it is
	 * the fastest worker, so on the wall clock it may take one poisoned
	 * sample after another, but not all of them) */
	for (int i = 0; rule_table[i]; i++) {
		const rule_class *rc = rule_table[i];
		run_config c = base(rc->name, 3);
		c.rp.warmup = 10;
		c.rp.H = 2;
		c.rp.period = 2;
		c.delay.dist = DELAY_EXP;
		c.delay.mean_ms = 2;
		c.stop_steps = 1000;
		c.n_overrides = 1;
		c.overrides[0] = (worker_override){.id = 2, .has_spb = 1, .spb_depth = 1};
		if (rc->flags & RULE_SHARED)
			snprintf(c.clock, sizeof(c.clock), "wall");
		float keep[8], *px[8];
		for (int b = 0; b < 8; b++)
			px[b] = poison(&c, 40 + (uint32_t)b, NAN, &keep[b]);
		divrec *d = calloc(1, sizeof(*d));
		int finite;
		run_snapshot *s = go_div(&c, NULL, 0, d, &finite);
		for (int b = 7; b >= 0; b--)
			*px[b] = keep[b];
		ck_assert_msg(d->n_div == 1 && !strcmp(s->stop_reason, "diverged"),
			      "%s: stopped by %s", rc->name, s->stop_reason);
		ck_assert_msg(finite, "%s: the server's weights hold a NaN", rc->name);
		ck_assert_int_ge(d->div.worker, 0);
		ck_assert_int_lt(d->div.worker, 3);
		ck_assert_uint_le(d->div.v_read, d->div.v);
		ck_assert_msg(s->v == d->div.v, "%s: caught at v %llu, ended at %llu",
			      rc->name, (unsigned long long)d->div.v, (unsigned long long)s->v);
		run_snapshot_put(s);
		free(d);
	}
}
END_TEST

START_TEST(divergence_keeps_the_last_good_checkpoint)
{
	/* with run_keep_good, each evaluation with a finite test loss leaves
	 * a checkpoint; after a divergence it resumes, at its version, with a
	 * smaller lr, to the stop, all finite */
	run_config c = base("asgd", 2);
	c.eval_every = 20;
	c.stop_steps = 300;
	float keep, *px = poison(&c, 70, NAN, &keep);
	divrec *d = calloc(1, sizeof(*d));
	run *r;
	char err[SL_ERR_LEN] = "";
	run_callbacks cb = {.eval = on_div_eval, .diverged = on_div, .ud = d};
	ck_assert_int_eq(run_new(&c, &data, NULL, 0, &cb, &r, err), 0);
	uint8_t *buf;
	size_t len;
	uint64_t v;
	ck_assert_int_eq(run_good_checkpoint(r, &buf, &len, &v, err), -SL_ESTATE);
	run_keep_good(r, 1);
	ck_assert_int_eq(run_exec(r), 0);
	*px = keep;
	ck_assert_int_eq(d->n_div, 1);
	ck_assert_int_eq(run_good_checkpoint(r, &buf, &len, &v, err), 0);
	/* the newest evaluation before the divergence */
	uint64_t want = 0;
	for (int e = 0; e < d->r.n; e++)
		if (!d->r.ev[e].final && d->r.ev[e].v < d->div.v)
			want = d->r.ev[e].v;
	ck_assert_uint_eq(v, want);
	ck_assert_uint_eq(v, 60);
	run_free(r);
	run_config c2;
	ck_assert_int_eq(run_checkpoint_config(buf, len, &c2, err), 0);
	c2.stop_steps = 300;
	ck_assert_msg(run_open(&c2, &data, NULL, 0, NULL, buf, len, &r, err) == 0, "%s", err);
	free(buf);
	run_cmd lr = {.worker = -1, .fields = CMD_LR, .lr = 0.005};
	ck_assert_int_eq(run_command(r, &lr, err), 0);
	/* a resumed run's first good checkpoint is where it starts */
	run_keep_good(r, 1);
	ck_assert_int_eq(run_good_checkpoint(r, NULL, NULL, &v, err), -SL_ESTATE);
	ck_assert_int_eq(run_exec(r), 0);
	ck_assert_int_eq(run_good_checkpoint(r, NULL, NULL, &v, err), 0);
	ck_assert_uint_eq(v, 300);
	run_snapshot *s = run_snapshot_get(r);
	ck_assert_str_eq(s->stop_reason, "steps");
	ck_assert_uint_eq(s->v, 300);
	ck_assert_double_eq(s->cfg.lr, 0.005);
	ck_assert(isfinite(s->last_loss));
	run_snapshot_put(s);
	run_free(r);
	free(d);
}
END_TEST

static Suite *
run_suite(void)
{
	Suite *s = suite_create("run");
	/* cases by topic; the long ones are tagged "slow" (make valgrind
	 * leaves them out: under memcheck they take tens of minutes) */
	const struct {
		const char *name, *tags;
		const TTest *tests[8];
	} cases[] = {
		{"staleness", NULL, {ssgd_is_never_stale, asgd_equal_speed_settles_at_n_minus_1,
				     ssp_keeps_its_bound, version_delay_is_uniform,
				     server_held_gradients_age, NULL}},
		{"server_delays", NULL, {server_delays_keep_sync_rules,
					 dcasgd_compensates_version_staleness,
					 steps_stop_exactly, NULL}},
		{"changes", NULL, {partial_backprop_accounting, workers_grow_and_shrink,
				   workers_come_back, rule_switch_mid_run,
				   commands_are_checked, NULL}},
		{"rules", NULL, {rules_reduce_to_their_special_cases, every_rule_in_the_table,
				 odsgd_local_step_is_pinned, NULL}},
		{"determinism", "slow", {virtual_clock_is_deterministic,
					 virtual_delays_cost_no_time,
					 checkpoint_resumes_exactly, NULL}},
		{"wall", NULL, {wall_clock_threads, NULL}},
		{"divergence", NULL, {divergence_caught_at_the_poisoned_step,
				      divergence_under_every_rule,
				      divergence_keeps_the_last_good_checkpoint, NULL}},
		{"long", "slow", {series_memory_is_bounded, NULL}},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
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

SL_TEST_MAIN(run_suite)
