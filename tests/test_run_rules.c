/* test_run_rules.c - the update rules in whole runs: each rule reduces
 * to its special cases, every row of the rule table learns and resumes,
 * odsgd's local step, sparta; on the virtual clock runs are deterministic,
 * cost no real time for their delays, and resume from a checkpoint bit for
 * bit. The DiLoCo family's own cases are in test_run_diloco.c. */
#include <math.h>

#include "rule.h"
#include "rules.h"
#include "run_util.h"


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

static Suite *
run_rules_suite(void)
{
	const run_case cases[] = {
		{"rules", NULL, {rules_reduce_to_their_special_cases, every_rule_in_the_table,
				 odsgd_local_step_is_pinned, phase_h_and_staleness_unit, NULL}},
		{"sparta", NULL, {sparta_is_localsgd_at_p1_and_charges_its_mask, NULL}},
		{"determinism", "slow", {virtual_clock_is_deterministic,
					 virtual_delays_cost_no_time,
					 checkpoint_resumes_exactly, NULL}},
	};
	return run_suite_of("run_rules", cases, sizeof(cases) / sizeof(cases[0]));
}

SL_TEST_MAIN(run_rules_suite)
