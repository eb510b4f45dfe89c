/* test_run_diloco.c - the DiLoCo family in whole runs: async-diloco's
 * staleness per arrival and Liu et al.'s finding (naive Nesterov fails,
 * Delayed Nesterov learns), the inner optimiser's reset, Dynamic Local
 * Updates, the grace window worked by hand; streaming-diloco against
 * diloco, its fragments, bytes, overlap, resume and a leaving worker. The
 * rules' special cases and the table's rows are in test_run_rules.c. */
#include <math.h>

#include "rule.h"
#include "rules.h"
#include "run_util.h"

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

/* The grace window on the wall clock, which cannot know when another
 * worker's step lands: a worker that arrived waits for the window's end.
 * The hand-worked case above (100, 110 and 300 ms a step, H 2, 50 ms):
 * worker 0 lands at 0.2 s and opens [0.2, 0.25], worker 1 lands inside it
 * at 0.22; both start again at 0.25 at the earliest, so their next
 * arrivals land no earlier than 0.45 and 0.47 s (without the window, 0.4
 * and 0.44). Lower bounds only: a loaded machine is late, never early. */
START_TEST(async_diloco_grace_window_wall)
{
	for (int g = 0; g < 2; g++) {
		run_config c = base("async-diloco", 3);
		snprintf(c.clock, sizeof(c.clock), "wall");
		c.threads = 1;
		c.rp.H = 2;
		c.rp.grace_ms = g ? 50 : 0;
		c.eval_every = 1;
		c.stop_steps = 4;
		const double ms[3] = {100, 110, 300};
		c.n_overrides = 3;
		for (int k = 0; k < 3; k++)
			c.overrides[k] = (worker_override){.id = k, .has_step_ms = 1, .step_ms = ms[k]};
		rec *r = calloc(1, sizeof(*r));
		run_snapshot_put(go(&c, NULL, 0, r));
		double t[4] = {0};
		int k = 0;
		for (int i = 0; i < r->n && k < 4; i++)
			if (r->ev[i].v == (uint64_t)k + 1)
				t[k++] = r->ev[i].t;
		printf("async-diloco on the wall clock, grace %g ms: updates at %.3f %.3f %.3f "
		       "%.3f s\n", c.rp.grace_ms, t[0], t[1], t[2], t[3]);
		ck_assert_int_eq(k, 4);
		ck_assert_double_ge(t[0], 0.2 - 1e-3);
		ck_assert_double_ge(t[1], 0.22 - 1e-3);
		if (g) { /* held to the window's end, 0.25 s */
			ck_assert_double_ge(t[2], 0.45 - 1e-3);
			ck_assert_double_ge(t[3], 0.47 - 1e-3);
		}
		free(r);
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
run_diloco_suite(void)
{
	const run_case cases[] = {
		{"async", NULL, {async_diloco_staleness_per_arrival, async_diloco_dylu,
				 diloco_inner_reset, NULL}},
		{"grace", NULL, {async_diloco_grace_window, async_diloco_grace_window_wall, NULL}},
		{"toy", NULL, {dylu_at_the_toys_step_times, NULL}},
		{"streaming", NULL, {streaming_diloco_is_diloco_with_one_fragment,
				     streaming_diloco_fragments_and_bytes,
				     streaming_diloco_overlap_hides_the_link,
				     streaming_diloco_resumes_exactly,
				     streaming_diloco_goes_on_without_a_leaver, NULL}},
	};
	return run_suite_of("run_diloco", cases, sizeof(cases) / sizeof(cases[0]));
}

SL_TEST_MAIN(run_diloco_suite)
