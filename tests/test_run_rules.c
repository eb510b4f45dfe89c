/* test_run_rules.c - the update rules in whole runs: each rule reduces
 * to its special cases, every row of the rule table learns and resumes,
 * odsgd's local step; on the virtual clock runs are deterministic, cost no
 * real time for their delays, and resume from a checkpoint bit for bit. */
#include <math.h>

#include "rule.h"
#include "rules.h"
#include "run_util.h"

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
	/* softsync with n = the workers: a round of one gradient, asgd (Zhang
	 * et al.'s lambda-softsync is Downpour); n = 1, a round of all three,
	 * is not */
	b = a;
	snprintf(b.rule, sizeof(b.rule), "softsync");
	b.rp.n = 3;
	wb = final_weights(&b, &n2);
	ck_assert_mem_eq(wa, wb, sizeof(float) * n1);
	free(wb);
	b.rp.n = 1;
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
	/* diloco with outer_lr 1 and no outer momentum puts W at the mean
	 * of the models each round: localsgd (to rounding, W - (W - mean)),
	 * and with H = 1 ssgd */
	b = a;
	snprintf(b.rule, sizeof(b.rule), "diloco");
	b.rp.H = 1;
	b.rp.outer_lr = 1;
	b.rp.outer_momentum = 0;
	wb = final_weights(&b, &n2);
	ck_assert_msg(max_rel_diff(wa, wb, n1) < 1e-4, "diloco H=1 vs ssgd: %g",
		      max_rel_diff(wa, wb, n1));
	free(wb);
	{
		run_config l = a, d;
		snprintf(l.rule, sizeof(l.rule), "localsgd");
		l.rp.H = 4;
		d = l;
		snprintf(d.rule, sizeof(d.rule), "diloco");
		d.rp.outer_lr = 1;
		d.rp.outer_momentum = 0;
		float *wl = final_weights(&l, &n2), *wd = final_weights(&d, &n2);
		ck_assert_msg(max_rel_diff(wl, wd, n1) < 1e-4, "diloco (1, 0) vs localsgd: %g",
			      max_rel_diff(wl, wd, n1));
		/* async-diloco with one worker is diloco with one worker: the
		 * same inner steps, one outer Nesterov step per H of them */
		run_config s = l, as;
		snprintf(s.rule, sizeof(s.rule), "diloco");
		s.workers = 1;
		s.rp.outer_lr = 0.7;
		s.rp.outer_momentum = 0.9;
		as = s;
		snprintf(as.rule, sizeof(as.rule), "async-diloco");
		float *ws = final_weights(&s, &n2), *was = final_weights(&as, &n2);
		ck_assert_msg(max_rel_diff(ws, was, n1) < 1e-4, "async-diloco vs diloco, 1 worker: %g",
			      max_rel_diff(ws, was, n1));
		free(ws);
		free(was);
		/* async-gated with a gate no arrival reaches is async-diloco,
		 * bit for bit (3 workers); with s 0 it drops the stale ones */
		as.workers = 3;
		run_config g = as;
		snprintf(g.rule, sizeof(g.rule), "async-gated");
		g.rp.s = 1e6;
		was = final_weights(&as, &n2);
		float *wg = final_weights(&g, &n2);
		ck_assert_mem_eq(was, wg, sizeof(float) * n1);
		free(wg);
		g.rp.s = 0;
		wg = final_weights(&g, &n2);
		ck_assert(max_rel_diff(was, wg, n1) > 1e-4);
		free(wg);
		free(was);
		/* the paper's outer step moves elsewhere */
		d.rp.outer_lr = 0.7;
		d.rp.outer_momentum = 0.9;
		free(wd);
		wd = final_weights(&d, &n2);
		ck_assert(max_rel_diff(wl, wd, n1) > 1e-3);
		free(wl);
		free(wd);
	}
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

/* async-diloco's staleness is the outer updates since a worker's anchor,
 * recorded once per arrival (a local step records none): with 3 equal
 * workers on the virtual clock every arrival is one update, and most
 * find the other two's arrivals applied since their anchor. And Liu et
 * al.'s finding: one Nesterov step per arrival (the naive form) fails
 * where Delayed Nesterov over the 3 workers' arrivals learns (the paper's
 * outer lr 0.7 and momentum 0.9, H 4, 180 arrivals) */
START_TEST(async_diloco_staleness_per_arrival)
{
	double acc[2];
	for (int dn = 1; dn <= 3; dn += 2) {
		run_config c = base("async-diloco", 3);
		c.rp.H = 4;
		c.rp.dn_period = dn;
		c.stop_steps = 180;
		c.eval_every = 0;
		run *r;
		char err[SL_ERR_LEN] = "";
		ck_assert_msg(run_new(&c, &data, NULL, 0, NULL, &r, err) == 0, "%s", err);
		ck_assert_int_eq(run_exec(r), 0);
		run_snapshot *s = run_snapshot_get(r);
		ck_assert_uint_eq(s->v, 180);
		ck_assert_uint_eq(s->stale.n, 180);
		ck_assert_uint_eq(s->stale.max, 2);
		ck_assert(s->stale.sum / (double)s->stale.n > 1.5);
		acc[dn / 2] = s->test_acc;
		run_snapshot_put(s);
		run_free(r);
	}
	printf("async-diloco, 3 workers, 180 arrivals: naive Nesterov acc %.3f, Delayed "
	       "Nesterov (N 3) %.3f\n", acc[0], acc[1]);
	ck_assert(acc[0] < 0.5);
	ck_assert(acc[1] > 0.9);
}
END_TEST

/* Dynamic Local Updates: a worker at a quarter of the others' speed runs
 * H / 4 inner steps a phase once its speed is known (floor(0.25 x 8) = 2),
 * so it sends about 4 times as often as without dylu (the first phase,
 * its speed unknown, is H long) and its pseudo-gradients
 * come back less stale; the fast ones keep H. A checkpoint in the middle
 * resumes to the same records (each worker's phase H is in it). */
/* inner_reset: every phase's inner optimiser is a fresh one. With Adam,
 * one worker, H = 1 and the outer step W = x (outer_opt sgd at outer_lr
 * 1), each round is Adam's first step from zero state, lr g / (|g| +
 * eps) after bias correction: every weight moves by 0 or by lr (to the
 * outer step's float rounding). Without the reset the moments carry
 * across rounds and the steps are other than lr. */
static double
share_at_lr(const char *rule, int reset, double lr, double *most)
{
	size_t n2, n3;
	run_config c = base(rule, 1);
	snprintf(c.model, sizeof(c.model), "logreg");
	c.rp.H = 1;
	c.rp.outer_lr = 1;
	snprintf(c.rp.outer_opt, sizeof(c.rp.outer_opt), "sgd");
	c.rp.inner_reset = reset;
	c.opt.kind = OPT_ADAM;
	c.lr = lr;
	c.eval_every = 0;
	c.stop_steps = 4;
	float *w4 = final_weights(&c, &n2);
	c.stop_steps = 5;
	float *w5 = final_weights(&c, &n3);
	size_t at = 0, moved = 0;
	*most = 0;
	for (size_t i = 0; i < n2; i++) {
		double d = fabs((double)w5[i] - w4[i]);
		*most = d > *most ? d : *most;
		moved += d > 0;
		at += fabs(d - lr) < 1e-3 * lr;
	}
	free(w4);
	free(w5);
	ck_assert_uint_gt(moved, n2 / 2);
	return (double)at / (double)moved;
}

START_TEST(diloco_inner_reset)
{
	const double lr = 1.0 / 128;
	const char *rules[] = {"diloco", "async-diloco"};
	for (int k = 0; k < 2; k++) {
		double most[2];
		double with = share_at_lr(rules[k], 1, lr, &most[1]);
		double without = share_at_lr(rules[k], 0, lr, &most[0]);
		printf("%s, Adam inner, H 1: %.3f of the weights that moved moved by lr with "
		       "inner_reset (largest %.6g), %.3f without (largest %.6g); lr %g\n",
		       rules[k], with, most[1], without, most[0], lr);
		ck_assert(with > 0.99);
		ck_assert(most[1] < lr * (1 + 1e-4));
		ck_assert(without < 0.5);
	}
}
END_TEST

START_TEST(async_diloco_dylu)
{
	double stale[2];
	uint64_t sent[2];
	for (int dylu = 0; dylu < 2; dylu++) {
		run_config c = base("async-diloco", 3);
		c.rp.H = 8;
		c.rp.dn_period = 3;
		c.rp.dylu = dylu;
		c.stop_steps = 120;
		c.eval_every = 30;
		c.n_overrides = 1;
		c.overrides[0] = (worker_override){.id = 2, .has_speed = 1, .speed = 0.25};
		ckrec *a;
		resume_matches(&c, 60, &a);
		run *r;
		char err[SL_ERR_LEN] = "";
		ck_assert_msg(run_new(&c, &data, NULL, 0, NULL, &r, err) == 0, "%s", err);
		ck_assert_int_eq(run_exec(r), 0);
		run_snapshot *s = run_snapshot_get(r);
		const worker_snap *slow = &s->workers[2];
		stale[dylu] = slow->stale.n ? slow->stale.sum / (double)slow->stale.n : 0;
		sent[dylu] = slow->stale.n;
		/* the slow worker's inner steps per arrival */
		if (dylu)
			ck_assert_uint_le(slow->iterations, 2 * slow->stale.n + 8);
		else
			ck_assert_uint_ge(slow->iterations, 8 * slow->stale.n);
		/* the live views' H: this phase's, floor(about 0.25 x 8) for
		 * the slow one with dylu (1 or 2: its speed is measured), the
		 * fast ones' floor(about 1 x 8); H itself without */
		if (dylu)
			ck_assert_msg(slow->h == 1 || slow->h == 2, "slow worker's h %d", slow->h);
		else
			ck_assert_int_eq(slow->h, 8);
		for (int i = 0; i < 2; i++)
			ck_assert_int_ge(s->workers[i].h, dylu ? 6 : 8);
		ck_assert_str_eq(s->stale_unit, "outer versions");
		run_snapshot_put(s);
		run_free(r);
		free(a->buf);
		free(a);
	}
	printf("async-diloco, a quarter-speed worker, H 8: %llu arrivals of staleness %.2f "
	       "without dylu, %llu of %.2f with\n", (unsigned long long)sent[0], stale[0],
	       (unsigned long long)sent[1], stale[1]);
	ck_assert_uint_gt(2 * sent[1], 5 * sent[0]); /* 4x but for the first phase */
	ck_assert(stale[1] < stale[0]);
}
END_TEST

/* what the live views show of a rule: each worker's H (the local steps
 * of its phase: H, or easgd's period; 0 for a rule without phases) and
 * what the staleness counts */
/* Dynamic Local Updates at the asynchronous local-SGD toy's step times
 * (0.58, 0.75, 1.51 and 3.33 s, set with step_ms), H 20: once every
 * worker has finished a phase, its H is floor(0.58 / s_k x 20), Eq. 6 of
 * Liu et al.: 20, 15, 7 and 3 (docs/results.md, section 9) */
START_TEST(dylu_at_the_toys_step_times)
{
	run_config c = base("async-diloco", 4);
	c.rp.H = 20;
	c.rp.dylu = 1;
	c.eval_every = 0;
	c.stop_steps = 30;
	const double ms[4] = {580, 750, 1510, 3330};
	c.n_overrides = 4;
	for (int k = 0; k < 4; k++)
		c.overrides[k] = (worker_override){.id = k, .has_step_ms = 1, .step_ms = ms[k]};
	rec *r = calloc(1, sizeof(*r));
	run_snapshot *s = go(&c, NULL, 0, r);
	const int want[4] = {20, 15, 7, 3};
	for (int k = 0; k < 4; k++)
		ck_assert_msg(s->workers[k].h == want[k], "worker %d: H %d, want %d", k,
			      s->workers[k].h, want[k]);
	run_snapshot_put(s);
	free(r);
}
END_TEST

/* The grace window (grace_ms, the asynchronous local-SGD notebook's
 * max_wait_time), worked by hand: three workers at 100, 110 and 300 ms a
 * step, H 2, a window of 50 ms. Worker 0's pseudo-gradient lands at 0.2 s
 * and opens [0.2, 0.25]; worker 1's is due at 0.22, so worker 0 waits, and
 * both start again at 0.22 from version 2. Then 0.42 (w0) and 0.44 (w1),
 * together again from version 4; worker 2 lands at 0.6 (staleness 4) and
 * waits for worker 0's exchange at 0.64, the last inside its window
 * (worker 1's next is at 0.66). The updates land at 0.2, 0.22, 0.42, 0.44,
 * 0.6 and 0.64 s with staleness 0, 1, 0, 1, 4 and 1; without the window
 * worker 0 starts again at once and its third lands at 0.6. A window of
 * 120 ms gives the same: worker 2's step that lands at 0.3, inside
 * [0.2, 0.32], is not its exchange, and is not waited for. A checkpoint
 * taken while worker 2 waits resumes to the same records. */
START_TEST(async_diloco_grace_window)
{
	const double grace[3] = {0, 50, 120};
	const double want_t[3][6] = {{0.2, 0.22, 0.4, 0.44, 0.6, 0.6},
				     {0.2, 0.22, 0.42, 0.44, 0.6, 0.64},
				     {0.2, 0.22, 0.42, 0.44, 0.6, 0.64}};
	for (int g = 0; g < 3; g++) {
		run_config c = base("async-diloco", 3);
		c.rp.H = 2;
		c.rp.grace_ms = grace[g];
		c.eval_every = 1;
		c.stop_steps = 6;
		const double ms[3] = {100, 110, 300};
		c.n_overrides = 3;
		for (int k = 0; k < 3; k++)
			c.overrides[k] = (worker_override){.id = k, .has_step_ms = 1, .step_ms = ms[k]};
		rec *r = calloc(1, sizeof(*r));
		run_snapshot *s = go(&c, NULL, 0, r);
		printf("async-diloco, grace %g ms: updates at", c.rp.grace_ms);
		int k = 0;
		for (int i = 0; i < r->n; i++) {
			if (r->ev[i].v == 0 || (i > 0 && r->ev[i].v == r->ev[i - 1].v))
				continue;
			printf(" %.3f", r->ev[i].t);
			ck_assert_int_lt(k, 6);
			ck_assert_msg(fabs(r->ev[i].t - want_t[g][k]) < 1e-9,
				      "grace %g: update %d at %.6f s, want %.6f", grace[g], k + 1,
				      r->ev[i].t, want_t[g][k]);
			k++;
		}
		printf(" s; staleness %llu in all, at most %llu\n",
		       (unsigned long long)s->stale.sum, (unsigned long long)s->stale.max);
		ck_assert_int_eq(k, 6);
		ck_assert_uint_eq(s->v, 6);
		if (g) { /* 0 + 1 + 0 + 1 + 4 + 1 */
			ck_assert_uint_eq(s->stale.sum, 7);
			ck_assert_uint_eq(s->stale.max, 4);
			ck_assert_uint_eq(s->workers[2].stale.sum, 4);
		}
		if (g == 1) { /* checkpointed once 0.595 s has passed: at 0.6, worker 2 waiting */
			ckrec *a;
			c.stop_steps = 16;
			resume_matches_at(&c, 0.595, &a);
			free(a->buf);
			free(a);
		}
		run_snapshot_put(s);
		free(r);
	}
}
END_TEST

START_TEST(phase_h_and_staleness_unit)
{
	static const struct {
		const char *rule;
		int h;
		const char *unit;
	} want[] = {{"asgd", 0, "versions"},        {"odsgd", 0, "versions"},
		    {"localsgd", 4, "local steps"}, {"easgd", 5, "local steps"},
		    {"diloco", 4, "local steps"},   {"async-diloco", 4, "outer versions"},
		    {"async-gated", 4, "outer versions"}, {"streaming-diloco", 4, "local steps"}};
	for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		run_config c = base(want[k].rule, 2);
		c.rp.H = 4;
		c.rp.period = 5;
		c.stop_steps = 12;
		c.eval_every = 0;
		rec *r = calloc(1, sizeof(*r));
		run_snapshot *s = go(&c, NULL, 0, r);
		ck_assert_str_eq(s->stale_unit, want[k].unit);
		ck_assert_int_eq(s->n_workers, 2);
		for (int i = 0; i < s->n_workers; i++)
			ck_assert_msg(s->workers[i].h == want[k].h, "%s: worker %d's h %d, not %d",
				      want[k].rule, i, s->workers[i].h, want[k].h);
		run_snapshot_put(s);
		free(r);
	}
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

START_TEST(checkpoint_resumes_exactly)
{
	/* run A straight through, taking a checkpoint at v = 140; run B from
	 * that checkpoint: every later record equals A's, bit for bit */
	const char *rules[] = {"dcasgd", "ssgd", "odsgd", "localsgd", "sparta"};
	for (int k = 0; k < 5; k++) {
		run_config c = base(rules[k], 3);
		c.momentum = 0.5;
		c.rp.sparta_p = 0.05;
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

/* the run to its end: its records into out, its weights into w (n of
 * them; caller frees), its snapshot returned (caller puts it) */
static run_snapshot *
go_weights(const run_config *c, rec *out, float **w, size_t *n)
{
	run *r;
	char err[SL_ERR_LEN] = "";
	run_callbacks cb = {.eval = on_eval, .ud = out};
	ck_assert_msg(run_new(c, &data, NULL, 0, &cb, &r, err) == 0, "%s", err);
	ck_assert_int_eq(run_exec(r), 0);
	*w = malloc(sizeof(float) * 20000);
	*n = run_weights(r, *w, 20000);
	ck_assert_uint_gt(*n, 0);
	run_snapshot *s = run_snapshot_get(r);
	run_free(r);
	return s;
}

/* sparta with p 1 is localsgd with H 1, bit for bit (the weights, the
 * records, the bytes and the link's time); with p 0.05 each worker's
 * bytes are 4 |M| of each round up, and 4 |M| of each round it took down
 * (after the whole model on its first pull), and its link's time is
 * those bytes at its bandwidth */
START_TEST(sparta_is_localsgd_at_p1_and_charges_its_mask)
{
	run_config a = base("localsgd", 3);
	a.rp.H = 1;
	a.stop_steps = 60;
	a.eval_every = 20;
	a.link = (link_cfg){.latency_ms = 0, .bandwidth_mbps = 100};
	run_config b = a;
	snprintf(b.rule, sizeof(b.rule), "sparta");
	b.rp.sparta_p = 1;
	rec *ra = calloc(1, sizeof(*ra)), *rb = calloc(1, sizeof(*rb));
	float *wa, *wb;
	size_t na, nb;
	run_snapshot *sa = go_weights(&a, ra, &wa, &na), *sb = go_weights(&b, rb, &wb, &nb);
	ck_assert_uint_eq(na, nb);
	ck_assert_mem_eq(wa, wb, sizeof(float) * na);
	ck_assert(same_records(ra, rb));
	ck_assert(sa->t == sb->t);
	for (int i = 0; i < 3; i++) {
		ck_assert(sa->workers[i].bytes_sent == sb->workers[i].bytes_sent);
		ck_assert(sa->workers[i].bytes_recv == sb->workers[i].bytes_recv);
		ck_assert(sa->workers[i].comm_s == sb->workers[i].comm_s);
		ck_assert(sb->workers[i].bytes_sent == 4.0 * (double)na * 60);
	}
	/* p < 1 is another run */
	b.rp.sparta_p = 0.5;
	float *wc;
	size_t nc;
	memset(rb, 0, sizeof(*rb));
	run_snapshot_put(go_weights(&b, rb, &wc, &nc));
	ck_assert(memcmp(wa, wc, sizeof(float) * na) != 0);
	free(wc);
	run_snapshot_put(sa);
	run_snapshot_put(sb);

	/* p 0.05, two workers, 30 rounds */
	b.workers = 2;
	b.rp.sparta_p = 0.05;
	b.stop_steps = 30;
	b.eval_every = 0;
	memset(rb, 0, sizeof(*rb));
	sb = go_weights(&b, rb, &wc, &nc);
	double up = 0, m[31];
	for (uint64_t v = 0; v <= 30; v++) {
		m[v] = 4.0 * (double)rule_sparta_mask(b.seed, v, 0.05, nc, NULL);
		ck_assert(m[v] > 0 && m[v] < 4.0 * (double)nc * 0.1);
		up += v < 30 ? m[v] : 0;
	}
	for (int i = 0; i < 2; i++) {
		const worker_snap *w = &sb->workers[i];
		ck_assert_uint_eq(w->iterations, 30);
		ck_assert_msg(w->bytes_sent == up, "worker %d sent %g, want %g", i, w->bytes_sent, up);
		/* the whole model, then the rounds before the last; the worker
		 * that completed the last round began its next step at once
		 * and took that round's too */
		double down = 4.0 * (double)nc + up - m[29];
		ck_assert_msg(w->bytes_recv == down || w->bytes_recv == down + m[29],
			      "worker %d received %g, want %g", i, w->bytes_recv, down);
		double began = w->bytes_recv == down ? 0 : m[30]; /* its push in flight */
		double link = (w->bytes_sent + began + w->bytes_recv) * 8 / 100e6;
		ck_assert_msg(fabs(w->comm_s - link) < 1e-12, "worker %d: %g s on its link, want %g",
			      i, w->comm_s, link);
	}
	free(wc);
	run_snapshot_put(sb);
	free(wa);
	free(wb);
	free(ra);
	free(rb);
}
END_TEST

START_TEST(every_rule_in_the_table)
{
	/* each row of the rule table: the parameters it lists are rule_params
	 * keys, a short run learns, and (on the virtual clock) a checkpoint
	 * resumes to the same records bit for bit */
	static const char *const keys[] = {"s", "lambda", "H", "n", "local_lr", "m",
					   "beta", "period", "warmup", "adaptive",
					   "local_opt", "outer_lr", "outer_momentum", "dn_period",
					   "weighting", "dylu", "grace_ms", "outer_opt", "inner_reset", "compress",
					   "compress_ratio", "ef", "fragments", "overlap", "mix", "sparta_p", "demo_decay",
					   "demo_topk", "demo_chunk", NULL};
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
		if (rc->flags & RULE_STALE_AT_EXCHANGE) { /* an update per arrival: */
			c.stop_steps *= 3;                /* a round's worth each */
			c.rp.dn_period = 3; /* the naive form fails here (below) */
		}
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

/* streaming-diloco with one fragment, no overlap and mix 0 is diloco, bit
 * for bit (the same arithmetic: the whole model one range), over several
 * rounds of two workers, with Adam inside and Nesterov outside; with
 * overlap 1 or mix 0.5 it is not */
START_TEST(streaming_diloco_is_diloco_with_one_fragment)
{
	size_t n1, n2;
	run_config a = base("diloco", 2);
	a.rp.H = 4;
	a.rp.outer_lr = 0.7;
	a.rp.outer_momentum = 0.9;
	a.opt.kind = OPT_ADAM;
	a.lr = 0.002;
	a.stop_steps = 12; /* 12 rounds, 48 local steps each */
	a.eval_every = 0;
	float *wa = final_weights(&a, &n1);
	run_config b = a;
	snprintf(b.rule, sizeof(b.rule), "streaming-diloco");
	b.rp.fragments = 1;
	b.rp.overlap = 0;
	b.rp.mix = 0;
	float *wb = final_weights(&b, &n2);
	ck_assert_uint_eq(n1, n2);
	ck_assert_mem_eq(wa, wb, sizeof(float) * n1);
	free(wb);
	b.rp.overlap = 1;
	wb = final_weights(&b, &n2);
	ck_assert(memcmp(wa, wb, sizeof(float) * n1) != 0);
	free(wb);
	b.rp.overlap = 0;
	b.rp.mix = 0.5;
	wb = final_weights(&b, &n2);
	ck_assert(memcmp(wa, wb, sizeof(float) * n1) != 0);
	free(wb);
	free(wa);
}
END_TEST

/* the fragments of a run's model: its units (a residual block is one:
 * resnet:8 has the stem's conv, its bn, three blocks and the head), at
 * most as many fragments as units; each sync sends its fragment's bytes
 * (mlp:784-16-10: fragment 0 the first layer's 12,560 floats, fragment 1
 * the head's 170), fragment 0 first */
START_TEST(streaming_diloco_fragments_and_bytes)
{
	run_config c = base("streaming-diloco", 2);
	run *r;
	char err[SL_ERR_LEN] = "";
	snprintf(c.model, sizeof(c.model), "resnet:8");
	c.rp.H = 14;
	c.rp.fragments = 7;
	ck_assert_int_eq(run_new(&c, &data, NULL, 0, NULL, &r, err), -SL_EINVAL);
	ck_assert_msg(strstr(err, "rule_params.fragments: 7, but the model has 6 units"), "%s",
		      err);
	c.rp.fragments = 6;
	ck_assert_msg(run_new(&c, &data, NULL, 0, NULL, &r, err) == 0, "%s", err);
	run_free(r);
	c = base("streaming-diloco", 2);
	c.rp.H = 4;
	c.rp.fragments = 2;
	c.rp.overlap = 2; /* floor(4 / 2) = 2: too long */
	ck_assert_int_eq(run_new(&c, &data, NULL, 0, NULL, &r, err), -SL_EINVAL);
	ck_assert_msg(strstr(err, "rule_params.overlap: 2, but it must be below floor(H / "
				  "fragments) = 2"), "%s", err);
	c.rp.overlap = 1;
	for (uint64_t u = 1; u <= 5; u++) {
		c.stop_steps = u; /* u fragment rounds: (u + 1) / 2 of fragment 0 */
		c.eval_every = 0;
		rec *rr = calloc(1, sizeof(*rr));
		run_snapshot *s = go(&c, NULL, 0, rr);
		double want = 4.0 * (double)((u + 1) / 2 * 12560 + u / 2 * 170);
		for (int i = 0; i < s->n_workers; i++)
			ck_assert_msg(s->workers[i].bytes_sent == want,
				      "%llu rounds: worker %d sent %.0f bytes, not %.0f",
				      (unsigned long long)u, i, s->workers[i].bytes_sent, want);
		run_snapshot_put(s);
		free(rr);
	}
	/* int4 (the paper's 4-bit quantisation): a fragment's block-wise
	 * bytes, range by range */
	snprintf(c.rp.compress, sizeof(c.rp.compress), "int4");
	c.stop_steps = 2;
	rec *rr = calloc(1, sizeof(*rr));
	run_snapshot *s = go(&c, NULL, 0, rr);
	ck_assert(s->workers[0].bytes_sent < 4.0 * (12560 + 170) / 7);
	ck_assert(s->workers[0].bytes_sent > 0.5 * (12560 + 170) );
	run_snapshot_put(s);
	free(rr);
}
END_TEST

/* On the virtual clock an exchange travels while the worker computes:
 * two workers of 10 ms a step, a 5 ms link each way, H 4 and 2 fragments
 * (a sync every 2 steps). With overlap 0 each sync holds the worker for
 * the push and the reply (10 ms), with overlap 1 the step computed
 * meanwhile hides them. The first step waits for the whole model (5 ms);
 * the 8th round completes after 16 steps: 5 + 160 + 7 x 10 = 235 ms
 * against 5 + 160 = 165 ms. */
START_TEST(streaming_diloco_overlap_hides_the_link)
{
	double end[2];
	for (int tau = 0; tau < 2; tau++) {
		run_config c = base("streaming-diloco", 2);
		c.rp.H = 4;
		c.rp.fragments = 2;
		c.rp.overlap = tau;
		c.link.latency_ms = 5;
		c.n_overrides = 2;
		for (int i = 0; i < 2; i++)
			c.overrides[i] = (worker_override){.id = i, .has_step_ms = 1, .step_ms = 10};
		c.stop_steps = 8;
		c.eval_every = 0;
		rec *r = calloc(1, sizeof(*r));
		run_snapshot *s = go(&c, NULL, 0, r);
		ck_assert_uint_eq(s->v, 8);
		end[tau] = s->t;
		run_snapshot_put(s);
		free(r);
	}
	ck_assert_msg(fabs(end[0] - 0.235) < 1e-9 && fabs(end[1] - 0.165) < 1e-9,
		      "overlap 0: %.9f s, overlap 1: %.9f s", end[0], end[1]);
}
END_TEST

/* a checkpoint resumes bit for bit wherever it falls: in the middle of a
 * fragment's round (some workers' models in, at the server), inside the
 * overlap (a reply due), with the anchors, the inner optimisers and
 * int4's residuals; three workers, one at half speed */
START_TEST(streaming_diloco_resumes_exactly)
{
	run_config c = base("streaming-diloco", 3);
	snprintf(c.model, sizeof(c.model), "mlp:784-16-16-10");
	c.rp.H = 6;
	c.rp.fragments = 3;
	c.rp.overlap = 1;
	c.rp.mix = 0.5;
	c.opt.kind = OPT_ADAM;
	c.lr = 0.002;
	snprintf(c.rp.compress, sizeof(c.rp.compress), "int4");
	c.rp.ef = 1;
	c.link.latency_ms = 1;
	c.n_overrides = 1;
	c.overrides[0] = (worker_override){.id = 2, .has_speed = 1, .speed = 0.5};
	c.stop_steps = 40;
	c.eval_every = 5;
	rec *r = calloc(1, sizeof(*r));
	run_snapshot *s = go(&c, NULL, 0, r);
	double end = s->t;
	run_snapshot_put(s);
	free(r);
	for (int k = 1; k <= 4; k++) {
		ckrec *a;
		resume_matches_at(&c, end * k / 5 + 1e-4 * k, &a);
		free(a->buf);
		free(a);
	}
}
END_TEST

/* a worker that leaves in the middle of a fragment's round does not stall
 * it: the round goes on with the models that are in (ps_flush_round);
 * three workers, the slow one leaving at several moments */
START_TEST(streaming_diloco_goes_on_without_a_leaver)
{
	for (int k = 1; k <= 4; k++) {
		run_config c = base("streaming-diloco", 3);
		c.rp.H = 4;
		c.rp.fragments = 2;
		c.n_overrides = 1;
		c.overrides[0] = (worker_override){.id = 2, .has_speed = 1, .speed = 0.3};
		c.stop_steps = 16;
		c.eval_every = 0;
		run_sched leave = {.t = 0.0007 * k,
				   .cmd = {.worker = -1, .fields = CMD_WORKERS, .workers = 2}};
		rec *r = calloc(1, sizeof(*r));
		run_snapshot *s = go(&c, &leave, 1, r);
		ck_assert_uint_eq(s->v, 16);
		ck_assert_int_eq(s->cfg.workers, 2);
		run_snapshot_put(s);
		free(r);
	}
}
END_TEST

static Suite *
run_rules_suite(void)
{
	const run_case cases[] = {
		{"rules", NULL, {rules_reduce_to_their_special_cases, every_rule_in_the_table,
				 odsgd_local_step_is_pinned, async_diloco_staleness_per_arrival,
				 async_diloco_dylu, diloco_inner_reset, phase_h_and_staleness_unit, NULL}},
		{"grace", NULL, {async_diloco_grace_window, NULL}},
		{"sparta", NULL, {sparta_is_localsgd_at_p1_and_charges_its_mask, NULL}},
		{"toy", NULL, {dylu_at_the_toys_step_times, NULL}},
		{"streaming", NULL, {streaming_diloco_is_diloco_with_one_fragment,
				     streaming_diloco_fragments_and_bytes,
				     streaming_diloco_overlap_hides_the_link,
				     streaming_diloco_resumes_exactly,
				     streaming_diloco_goes_on_without_a_leaver, NULL}},
		{"determinism", "slow", {virtual_clock_is_deterministic,
					 virtual_delays_cost_no_time,
					 checkpoint_resumes_exactly, NULL}},
	};
	return run_suite_of("run_rules", cases, sizeof(cases) / sizeof(cases[0]));
}

SL_TEST_MAIN(run_rules_suite)
