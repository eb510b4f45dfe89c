/* test_comm.c - the virtual clock's communication model on tiny cases
 * computed by hand, one per rule family: a step pulls the model over its
 * worker's link (latency + bytes over bandwidth), computes, pushes its
 * message (the gradient; a local rule's model on the steps that exchange);
 * the server serves one push at a time, server_ms each; odsgd overlaps its
 * messages with its compute. A free link and server give today's times
 * (the fixtures, tests/integration/fixtures.sh, hold bit for bit). */
#include <math.h>

#include "run_util.h"

#define L_MS 10.0      /* one-way latency */
#define BW_MBPS 80.0   /* 10 MB/s */

/* the model's bytes (a pull, or a whole gradient or model push) and one
 * step's compute at the nominal 10 GFLOP/s, read from the run */
typedef struct facts {
	double bytes, compute_s, t;
	uint64_t v, iterations;
	double sent, recv;
} facts;

static facts
run_once(const run_config *c)
{
	rec r = {0};
	run_snapshot *s = go(c, NULL, 0, &r);
	facts f = {0};
	f.t = s->t;
	f.v = s->v;
	for (int i = 0; i < s->n_workers; i++) {
		f.iterations += s->workers[i].iterations;
		f.sent += s->workers[i].bytes_sent;
		f.recv += s->workers[i].bytes_recv;
	}
	/* mlp:784-16-10: 784*16 + 16 + 16*10 + 10 parameters */
	f.bytes = (784.0 * 16 + 16 + 16 * 10 + 10) * 4;
	run_snapshot_put(s);
	return f;
}

/* the run, and a step's compute from the same run with a free link and
 * server on one worker (whose updates then come one a compute) */
static facts
run_it(const run_config *c)
{
	run_config one = *c;
	one.link = (link_cfg){0};
	one.server_ms = 0;
	one.workers = 1;
	snprintf(one.rule, sizeof(one.rule), "asgd");
	facts f0 = run_once(&one);
	facts f = run_once(c);
	f.compute_s = f0.t / (double)f0.v;
	return f;
}

static double
xfer(double bytes)
{
	return L_MS * 1e-3 + bytes * 8 / (BW_MBPS * 1e6);
}

static void
near(double got, double want, const char *what)
{
	ck_assert_msg(fabs(got - want) <= 1e-9 * fabs(want) + 1e-15, "%s: %.17g, want %.17g", what,
		      got, want);
}

/* asgd, one worker: each step is pull, compute, push, one after the other */
START_TEST(async_one_worker)
{
	run_config c = base("asgd", 1);
	c.stop_steps = 20;
	c.eval_every = 0;
	c.link = (link_cfg){.latency_ms = L_MS, .bandwidth_mbps = BW_MBPS};
	facts f = run_it(&c);
	ck_assert_uint_eq(f.v, 20);
	near(f.t, 20 * (xfer(f.bytes) + f.compute_s + xfer(f.bytes)), "t after 20 steps");
	near(f.sent, 20 * f.bytes, "bytes sent");
	/* and the 21st step's pull: begun when the 20th update stopped the run */
	near(f.recv, 21 * f.bytes, "bytes received");
}
END_TEST

/* asgd, two workers of equal speed, a free link, a server slower than the
 * compute: it is the bottleneck, one update every server_ms after the
 * first gradient arrives */
START_TEST(async_server_queue)
{
	run_config c = base("asgd", 2);
	c.stop_steps = 30;
	c.eval_every = 0;
	facts f0 = run_it(&c);
	/* the free server: the two workers' steps side by side, 2 updates a compute */
	near(f0.t, 15 * f0.compute_s, "t, free server");
	c.server_ms = 50 * f0.compute_s * 1e3; /* 50 computes */
	facts f = run_it(&c);
	ck_assert_uint_eq(f.v, 30);
	near(f.t, f.compute_s + 30 * c.server_ms * 1e-3, "t after 30 updates");
}
END_TEST

/* ssgd, two workers: a round is both pulls, computes and pushes, side by
 * side; the next starts when it completes */
START_TEST(round_rule)
{
	run_config c = base("ssgd", 2);
	c.stop_steps = 10;
	c.eval_every = 0;
	c.link = (link_cfg){.latency_ms = L_MS, .bandwidth_mbps = BW_MBPS};
	facts f = run_it(&c);
	ck_assert_uint_eq(f.v, 10);
	near(f.t, 10 * (xfer(f.bytes) + f.compute_s + xfer(f.bytes)), "t after 10 rounds");
	near(f.sent, 2 * 10 * f.bytes, "bytes sent");
}
END_TEST

/* localsgd and diloco, H = 4, one worker: local steps move nothing; the
 * 4th sends the model, and the average (diloco: the outer step's result)
 * comes back with the next step's pull (the first pulls the server's
 * model) */
START_TEST(local_rule)
{
	static const char *const rules[] = {"localsgd", "diloco"};
	for (int k = 0; k < 2; k++) {
		run_config c = base(rules[k], 1);
		c.rp.H = 4;
		c.rp.outer_lr = 0.7;
		c.rp.outer_momentum = 0.9;
		c.stop_steps = 2; /* two rounds: 8 steps */
		c.eval_every = 0;
		c.link = (link_cfg){.latency_ms = L_MS, .bandwidth_mbps = BW_MBPS};
		facts f = run_it(&c);
		ck_assert_uint_eq(f.v, 2);
		ck_assert_uint_eq(f.iterations, 8);
		near(f.t, 8 * f.compute_s + 4 * xfer(f.bytes), "t after 8 steps");
		near(f.sent, 2 * f.bytes, "bytes sent: two models");
		/* the first pull, the two rounds' results (the second with the
		 * 9th step, begun when the run stopped) */
		near(f.recv, 3 * f.bytes, "bytes received");
	}
}
END_TEST

/* odsgd after its warm-up overlaps: a step takes the longer of its compute
 * and its messages; in the warm-up (ssgd) it waits for them */
START_TEST(overlap_rule)
{
	run_config c = base("odsgd", 1);
	c.rp.warmup = 0;
	c.stop_steps = 12;
	c.eval_every = 0;
	c.link = (link_cfg){.latency_ms = L_MS, .bandwidth_mbps = BW_MBPS};
	facts f = run_it(&c);
	ck_assert_uint_eq(f.v, 12);
	double comm = xfer(f.bytes) + xfer(f.bytes);
	near(f.t, 12 * (comm > f.compute_s ? comm : f.compute_s), "t, overlapped");
	c.rp.warmup = 1000; /* all warm-up: ssgd, no overlap */
	facts g = run_it(&c);
	near(g.t, 12 * (comm + g.compute_s), "t, warm-up");
}
END_TEST

/* gradient coherence: one worker reading the newest weights applies the
 * very gradient a fresh one would be (cosine 1); stale reads lower it; a
 * sample every K updates, the records' means since the previous one */
START_TEST(coherence)
{
	run_config c = base("asgd", 1);
	c.stop_steps = 100;
	c.eval_every = 50;
	c.coherence_every = 10;
	rec r = {0};
	run_snapshot *s = go(&c, NULL, 0, &r);
	run_snapshot_put(s);
	ck_assert_int_ge(r.n, 2);
	ck_assert_int_eq(r.ev[0].v, 50);
	ck_assert_int_eq(r.ev[0].coherence_n, 5); /* versions 0, 10, 20, 30, 40 */
	ck_assert_msg(fabs(r.ev[0].coherence - 1) < 1e-9, "fresh weights: %.17g", r.ev[0].coherence);
	const run_eval *end = &r.ev[r.n - 1];
	ck_assert(end->final);
	ck_assert_int_eq(end->coherence_all_n, 10);
	/* stale reads: gradients of older weights, a cosine below 1 */
	c.delay = (delay_cfg){.dist = DELAY_VERSION, .s = 8};
	rec r2 = {0};
	s = go(&c, NULL, 0, &r2);
	run_snapshot_put(s);
	const run_eval *e2 = &r2.ev[r2.n - 1];
	ck_assert_int_eq(e2->coherence_all_n, 10);
	ck_assert_msg(e2->coherence_all < 0.999 && e2->coherence_all > -1,
		      "stale reads: %.17g", e2->coherence_all);
	/* off by default; the wall clock refuses it, by name */
	c = base("asgd", 1);
	rec r3 = {0};
	s = go(&c, NULL, 0, &r3);
	run_snapshot_put(s);
	ck_assert_int_eq(r3.ev[r3.n - 1].coherence_all_n, 0);
	c.coherence_every = 10;
	snprintf(c.clock, sizeof(c.clock), "wall");
	run *x;
	char err[SL_ERR_LEN] = "";
	ck_assert_int_lt(run_new(&c, &data, NULL, 0, NULL, &x, err), 0);
	ck_assert_msg(strstr(err, "coherence_every: on the virtual clock only"), "%s", err);
}
END_TEST

static Suite *
comm_suite(void)
{
	const run_case cases[] = {
		{"model", NULL, {async_one_worker, async_server_queue, round_rule, local_rule,
				 overlap_rule, coherence, NULL}},
	};
	return run_suite_of("comm", cases, sizeof(cases) / sizeof(cases[0]));
}

SL_TEST_MAIN(comm_suite)
