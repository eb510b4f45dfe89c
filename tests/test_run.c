/* test_run.c - the asynchronous engine: exact staleness on scripted
 * schedules, SSP's bound, version delays, server-held gradients, partial
 * backprop accounting, worker count changes, rule switches, commands
 * checked, a wall-clock run with real threads, and the series' memory.
 * test_run_rules.c: each rule pinned, virtual-clock determinism, exact
 * resumes; test_run_divergence.c: non-finite steps caught. */
#include <math.h>

#include "run_util.h"

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

/* step_ms sets a worker's step time on the virtual clock in place of its
 * FLOPs: at 125 and 250 ms (exact in binary), one second holds 8 and 4
 * arrivals, and the twelfth update lands at t = 1 exactly; speed 0.5
 * doubles the slow one's step (8 + 2 updates by t = 1). A change of
 * step_ms mid-run (CMD_STEP_MS) takes effect at the worker's next step. */
START_TEST(step_ms_sets_the_virtual_step)
{
	for (int half = 0; half < 2; half++) {
		run_config c = base("asgd", 2);
		c.eval_every = 0;
		c.stop_steps = half ? 10 : 12;
		c.n_overrides = 2;
		c.overrides[0] = (worker_override){.id = 0, .has_step_ms = 1, .step_ms = 125};
		c.overrides[1] = (worker_override){.id = 1, .has_step_ms = 1, .step_ms = 250,
						   .has_speed = half, .speed = 0.5};
		rec *r = calloc(1, sizeof(*r));
		run_snapshot *s = go(&c, NULL, 0, r);
		ck_assert_msg(s->t == 1.0, "t %.17g", s->t);
		ck_assert_uint_eq(s->workers[0].stale.n, 8);
		ck_assert_uint_eq(s->workers[1].stale.n, half ? 2 : 4);
		ck_assert(s->workers[1].step_ms == 250);
		run_snapshot_put(s);
		free(r);
	}
	/* worker 1 from 250 to 500 ms at update 6 (t = 0.5: w0 4, w1 2): its
	 * step begun at 0.5 lands at 1.0, so 8 + 3 updates by t = 1 */
	run_config c = base("asgd", 2);
	c.eval_every = 0;
	c.stop_steps = 11;
	c.n_overrides = 2;
	c.overrides[0] = (worker_override){.id = 0, .has_step_ms = 1, .step_ms = 125};
	c.overrides[1] = (worker_override){.id = 1, .has_step_ms = 1, .step_ms = 250};
	run_sched ch = {.by_version = 1, .v = 6,
			.cmd = {.worker = 1, .fields = CMD_STEP_MS, .step_ms = 500}};
	rec *r = calloc(1, sizeof(*r));
	run_snapshot *s = go(&c, &ch, 1, r);
	ck_assert_msg(s->t == 1.0, "t %.17g", s->t);
	ck_assert_uint_eq(s->workers[1].stale.n, 3);
	ck_assert(s->workers[1].step_ms == 500);
	run_snapshot_put(s);
	free(r);
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

START_TEST(ssp_bound_holds_from_the_switch)
{
	/* asgd for 200 updates with worker 0 at a tenth of the others' speed
	 * (about 7 iterations to their 64), then ssp with s = 2: its clocks
	 * count from the switch, so the fast workers go on, at most 2 ahead
	 * of the straggler. Counted from the start of the run, they were held
	 * until the straggler caught up: every one of the next ~55 updates
	 * was its. */
	run_config c = base("asgd", 4);
	c.eval_every = 0;
	c.stop_steps = 200;
	c.n_overrides = 1;
	c.overrides[0] = (worker_override){.id = 0, .has_speed = 1, .speed = 0.1};
	run_sched sw = {.by_version = 1, .v = 200,
			.cmd = {.worker = -1, .fields = CMD_RULE | CMD_RULE_PARAMS}};
	snprintf(sw.cmd.rule, sizeof(sw.cmd.rule), "ssp");
	sw.cmd.rp = c.rp;
	sw.cmd.rp.s = 2;
	rec *r = calloc(1, sizeof(*r));
	run_snapshot *before = go(&c, NULL, 0, r);
	ck_assert_msg(before->workers[1].iterations > 5 * before->workers[0].iterations,
		      "no imbalance: %llu against %llu",
		      (unsigned long long)before->workers[1].iterations,
		      (unsigned long long)before->workers[0].iterations);
	c.stop_steps = 260;
	run_snapshot *after = go(&c, &sw, 1, r);
	ck_assert_str_eq(after->cfg.rule, "ssp");
	uint64_t slow = after->workers[0].iterations - before->workers[0].iterations;
	for (int i = 1; i < 4; i++) {
		uint64_t fast = after->workers[i].iterations - before->workers[i].iterations;
		/* not stalled: each fast worker took part in the 60 updates */
		ck_assert_msg(fast >= 5, "worker %d did %llu of the 60 updates after the switch "
			      "(the straggler %llu)", i, (unsigned long long)fast,
			      (unsigned long long)slow);
		/* and bounded: at most s + 1 ahead of the straggler's count (its
		 * step in flight at the switch lands after it) */
		ck_assert_msg(fast <= slow + 2 + 1, "worker %d: %llu iterations after the switch, "
			      "the straggler %llu", i, (unsigned long long)fast,
			      (unsigned long long)slow);
	}
	ck_assert_uint_le(after->clock_gap_max, 2);
	run_snapshot_put(before);
	run_snapshot_put(after);
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
	/* flops counts the forward and the backward, flops_bwd the backward;
	 * a sample's forward is 2*(784*16 + 16*10); its backward the same plus
	 * the hidden layer's input gradient, 2*16*10, or at depth 1 only the
	 * top layer's weight gradient, 2*16*10 */
	double fwd = 2.0 * (784 * 16 + 16 * 10);
	ck_assert(fabs(full->flops_bwd / (full->flops - full->flops_bwd) - (fwd + 320) / fwd) < 1e-12);
	ck_assert(fabs(part->flops_bwd / (part->flops - part->flops_bwd) - 320 / fwd) < 1e-12);
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

START_TEST(ssp_joiner_starts_at_the_slowest_clock)
{
	/* a worker added mid-run starts at the slowest running worker's
	 * clock: had it started at 0, ssp would hold every other worker
	 * until it caught up (it then did the next ~75 steps alone) */
	run_config c = base("ssp", 2);
	c.rp.s = 2;
	c.eval_every = 0;
	run_sched s = {.by_version = 1, .v = 150,
		       .cmd = {.worker = -1, .fields = CMD_WORKERS, .workers = 3}};
	rec *r = calloc(1, sizeof(*r));
	run_snapshot *snap = go(&c, &s, 1, r);
	ck_assert_int_eq(snap->n_workers, 3);
	/* 150 steps shared by three: about 50 each */
	ck_assert_msg(snap->workers[2].iterations < 65 && snap->workers[0].iterations > 110,
		      "worker 2 did %llu of the last 150 steps, worker 0 %llu in all",
		      (unsigned long long)snap->workers[2].iterations,
		      (unsigned long long)snap->workers[0].iterations);
	ck_assert_uint_le(snap->clock_gap_max, 2);
	run_snapshot_put(snap);
	/* the same for a worker paused from v 50 to v 150 (worker 0 alone
	 * meanwhile): it resumes at worker 0's clock, not 100 behind it */
	c.workers = 2;
	run_sched p[2] = {{.by_version = 1, .v = 50,
			   .cmd = {.worker = 1, .fields = CMD_PAUSED, .paused = 1}},
			  {.by_version = 1, .v = 150,
			   .cmd = {.worker = 1, .fields = CMD_PAUSED, .paused = 0}}};
	snap = go(&c, p, 2, r);
	ck_assert_msg(snap->workers[1].iterations < 120,
		      "worker 1 did %llu steps (about 25 before its pause and 75 of "
		      "the last 150; 150 when it catches up alone)",
		      (unsigned long long)snap->workers[1].iterations);
	run_snapshot_put(snap);
	free(r);
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
		/* the rate as training stopped (stalelab bench's steady figure),
		 * taken before the final evaluation */
		ck_assert_msg(s->samples_per_s_end > 0, "%s: %g", rules[k], s->samples_per_s_end);
		run_snapshot_put(s);
		free(r);
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

START_TEST(an_epoch_end_on_an_eval_every_update_evaluates_once)
{
	/* 120 samples in batches of 4: an epoch is 30 updates, and eval_every
	 * 30 falls on each epoch's end. One evaluation each time, not a
	 * second one an update later (each costs a pass over the test set) */
	run_config c = base("asgd", 1);
	snprintf(c.model, sizeof(c.model), "logreg");
	snprintf(c.clock, sizeof(c.clock), "virtual");
	c.batch = 4;
	c.eval_every = 30;
	c.stop_steps = 90;
	run *r;
	char err[SL_ERR_LEN] = "";
	dataset_pair tiny;
	ck_assert_msg(ds_load("synthetic:120", 3, &tiny, err) == 0, "%s", err);
	ck_assert_msg(run_new(&c, &tiny, NULL, 0, NULL, &r, err) == 0, "%s", err);
	ck_assert_int_eq(run_exec(r), 0);
	run_eval ev[16];
	int n = run_series(r, 0, ev, 16);
	int at = 0;
	for (int i = 0; i < n; i++) {
		ck_assert_msg(ev[i].v % 30 == 0, "an evaluation at v %llu",
			      (unsigned long long)ev[i].v);
		if (ev[i].v > 0)
			at++;
	}
	ck_assert_int_eq(at, 3);
	run_free(r);
	ds_pair_free(&tiny);
}
END_TEST

static Suite *
run_suite(void)
{
	const run_case cases[] = {
		{"staleness", NULL, {ssgd_is_never_stale, asgd_equal_speed_settles_at_n_minus_1,
				     ssp_keeps_its_bound, ssp_joiner_starts_at_the_slowest_clock,
				     ssp_bound_holds_from_the_switch,
				     version_delay_is_uniform,
				     server_held_gradients_age, NULL}},
		{"step_time", NULL, {step_ms_sets_the_virtual_step, NULL}},
		{"server_delays", NULL, {server_delays_keep_sync_rules,
					 dcasgd_compensates_version_staleness,
					 steps_stop_exactly,
					 an_epoch_end_on_an_eval_every_update_evaluates_once, NULL}},
		{"changes", NULL, {partial_backprop_accounting, workers_grow_and_shrink,
				   workers_come_back, rule_switch_mid_run,
				   commands_are_checked, NULL}},
		{"wall", NULL, {wall_clock_threads, NULL}},
		{"long", "slow", {series_memory_is_bounded, NULL}},
	};
	return run_suite_of("run", cases, sizeof(cases) / sizeof(cases[0]));
}

SL_TEST_MAIN(run_suite)
