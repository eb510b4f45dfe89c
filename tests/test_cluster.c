/* test_cluster.c - the cluster simulator pinned on traces computed by hand
 * (T1-T4 of the design notes, docs/cluster.md "Hand-computed cases"), for
 * every policy, and on cases of our own: restarts, a full cluster, bad
 * input named by job and field, and the same result on every run. */
#include <math.h>
#include <string.h>

#include "cluster.h"
#include "sl.h"
#include "testutil.h"
#include "trace.h"

#define EPS 1e-9

/* a model whose full backprop takes c + k seconds an iteration */
static cl_model
model1(double c, double k, double mem)
{
	cl_model m = {.name = "m", .n_sched = 1};
	m.sched[0] = (cl_sched){"full", c, k, mem, 1.0};
	return m;
}

static cl_config
cfg(cl_policy p)
{
	cl_config c = {.gpus = 2, .gpu_mem_gb = 16, .policy = p};
	return c;
}

static cl_job
job(long id, double a, int g, double n)
{
	return (cl_job){.id = id, .arrival = a, .gpus = g, .model = 0, .iters = n, .batch = 64};
}

static cl_summary
run(const cl_config *c, const cl_model *m, int nm, cl_job *j, size_t n)
{
	cl_summary s;
	char err[SL_ERR_LEN] = "";
	ck_assert_msg(cl_simulate(c, m, nm, j, n, &s, NULL, NULL, err) == 0, "%s", err);
	return s;
}

static void
near(double got, double want, const char *what)
{
	ck_assert_msg(fabs(got - want) <= 1e-6 * fmax(1, fabs(want)), "%s: %.9g, want %.9g", what,
		      got, want);
}

/* the finishing times of n jobs and the summary's figures */
static void
expect(cl_policy p, const cl_job *j, size_t n, const double *finish, const cl_summary *s,
       double avg, double makespan, double util)
{
	char what[64];
	for (size_t i = 0; i < n; i++) {
		snprintf(what, sizeof(what), "%s: J%ld's finish", cl_policy_name(p), j[i].id);
		near(j[i].finish, finish[i], what);
	}
	snprintf(what, sizeof(what), "%s: average JCT", cl_policy_name(p));
	near(s->avg_jct, avg, what);
	snprintf(what, sizeof(what), "%s: makespan", cl_policy_name(p));
	near(s->makespan, makespan, what);
	if (util >= 0) {
		snprintf(what, sizeof(what), "%s: allocation", cl_policy_name(p));
		near(s->util_alloc, util, what);
	}
}

/* Among lone running jobs that gain the same, a job packs onto the one
 * that started first. G 2 of 32 GB; one model, 2 s compute and 1 s
 * communication (3 s alone; a pair's cycle 4 s, so gandiva packs: 6 / 4 >
 * 1). J1 (0, 1 GPU, 10 iterations) and J2 (0, 1, 100) start at 0 in that
 * order; J3 (1, 1, 10) finds no free GPU and packs onto J1: J1 has 29/3
 * iterations left at 1 and runs them at 4 s each, done at 1 + 116/3; J3 has
 * 29/3 done by then and its last third alone takes 1 s. J2 runs alone to
 * 300. Packed onto J2 instead, J1 would be done at 30. */
START_TEST(pack_onto_the_first_started)
{
	cl_model m = model1(2, 1, 10);
	for (int p = CL_GANDIVA; p <= CL_JIGSAW; p++) {
		cl_config c = {.gpus = 2, .gpu_mem_gb = 32, .policy = (cl_policy)p};
		cl_job j[3] = {job(1, 0, 1, 10), job(2, 0, 1, 100), job(3, 1, 1, 10)};
		cl_summary s = run(&c, &m, 1, j, 3);
		const double finish[3] = {1 + 116.0 / 3, 300, 2 + 116.0 / 3};
		expect((cl_policy)p, j, 3, finish, &s, (1 + 116.0 / 3 + 300 + 1 + 116.0 / 3) / 3,
		       300, -1);
	}
}
END_TEST

START_TEST(t1_three_jobs_every_policy)
{
	/* G 2; T 1 s; J1 (0, 2 GPUs, 10), J2 (1, 1, 2), J3 (2, 1, 4); las
	 * threshold 4 GPU-s. fifo: J1 0-10, J2 10-12, J3 10-14. srtf: J2
	 * preempts J1 at 1 (it needs both GPUs; J2 needs one and is
	 * shorter): J2 1-3, J3 2-6, J1 6-15. las: J1 reaches 4 GPU-s at 2,
	 * J2 and J3 (queue 0) take over: J2 2-4, J3 2-6, J1 6-14. gandiva
	 * and jigsaw: nothing to pack (J2 wants 1 GPU, J1 holds 2): fifo. */
	cl_model m = model1(1, 0, 1);
	const struct {
		cl_policy p;
		double fin[3], avg, mk, util;
		int preempt;
	} want[] = {
		{CL_FIFO, {10, 12, 14}, 11.0, 14, 26.0 / 28, 0},
		{CL_SRTF, {15, 3, 6}, 7.0, 15, 26.0 / 30, 1},
		{CL_LAS, {14, 4, 6}, 7.0, 14, 26.0 / 28, 1},
		{CL_GANDIVA, {10, 12, 14}, 11.0, 14, 26.0 / 28, 0},
		{CL_JIGSAW, {10, 12, 14}, 11.0, 14, 26.0 / 28, 0},
	};
	for (size_t w = 0; w < sizeof(want) / sizeof(want[0]); w++) {
		cl_config c = cfg(want[w].p);
		c.n_thresholds = 1;
		c.thresholds[0] = 4;
		cl_job j[3] = {job(1, 0, 2, 10), job(2, 1, 1, 2), job(3, 2, 1, 4)};
		cl_summary s = run(&c, &m, 1, j, 3);
		expect(want[w].p, j, 3, want[w].fin, &s, want[w].avg, want[w].mk, want[w].util);
		ck_assert_int_eq(s.preemptions, want[w].preempt);
		ck_assert_int_eq(j[0].preemptions, want[w].preempt);
	}
}
END_TEST

START_TEST(t2_demotion_and_ties)
{
	/* J1, J2 (0, 2 GPUs, 10), T 1 s; las threshold 8 GPU-s: J1 0-4, J2
	 * 4-8, both in queue 1, arrival order: J1 8-14, J2 14-20. Every
	 * other policy: J1 0-10, J2 10-20 (gandiva would pack only if the
	 * pair ran faster than one after the other: 2 / 2 = 1, not > 1). */
	cl_model m = model1(1, 0, 1);
	for (int p = 0; p < CL_N_POLICIES; p++) {
		cl_config c = cfg((cl_policy)p);
		c.n_thresholds = 1;
		c.thresholds[0] = 8;
		cl_job j[2] = {job(2, 0, 2, 10), job(1, 0, 2, 10)}; /* ids break the tie */
		cl_summary s = run(&c, &m, 1, j, 2);
		if (p == CL_LAS) {
			double fin[] = {20, 14};
			expect(p, j, 2, fin, &s, 17, 20, 1.0);
			ck_assert_int_eq(s.preemptions, 2);
		} else {
			double fin[] = {20, 10};
			expect(p, j, 2, fin, &s, 15, 20, 1.0);
			ck_assert_int_eq(s.preemptions, 0);
		}
	}
}
END_TEST

/* T3's model: full c 1, k 1, 10 GB, p 1 (T 2); half c 0.7, k 0.5, 7 GB,
 * p 1.2 (T 1.2) */
static cl_model
t3_model(double mem_full, int with_half)
{
	cl_model m = {.name = "spb", .n_sched = with_half ? 2 : 1};
	m.sched[0] = (cl_sched){"full", 1.0, 1.0, mem_full, 1.0};
	m.sched[1] = (cl_sched){"half", 0.7, 0.5, 7, 1.2};
	return m;
}

START_TEST(t3_partial_backprop)
{
	/* J1, J2 (0, 2 GPUs, N 10). fifo: 0-20, 20-40 (compute 0.5). gandiva:
	 * 10 + 10 GB > 16, no packing: fifo. fifo with spb best: half alone,
	 * 10 x 1.2 x 1.2 = 14.4 each: 14.4, 28.8. jigsaw: J1 alone picks half
	 * (0.694 > 0.5 iterations/s), J2 packs half+half (14 GB): cycle
	 * max(1.4, 1.2, 1.2) = 1.4, both done at 10 x 1.2 x 1.4 = 16.8,
	 * compute 1.0. srtf and las (no threshold reached) run as fifo. */
	cl_model m = t3_model(10, 1);
	for (int p = 0; p < CL_N_POLICIES; p++) {
		cl_config c = cfg((cl_policy)p);
		c.n_thresholds = 1;
		c.thresholds[0] = 1000;
		cl_job j[2] = {job(1, 0, 2, 10), job(2, 0, 2, 10)};
		cl_summary s = run(&c, &m, 1, j, 2);
		if (p == CL_JIGSAW) {
			double fin[] = {16.8, 16.8};
			expect(p, j, 2, fin, &s, 16.8, 16.8, 2.0);
			near(s.util_compute, 1.0, "jigsaw: compute");
			ck_assert_str_eq(m.sched[j[0].last_sched].name, "half");
			ck_assert_str_eq(m.sched[j[1].last_sched].name, "half");
		} else {
			double fin[] = {20, 40};
			expect(p, j, 2, fin, &s, 30, 40, 1.0);
			near(s.util_compute, 0.5, "compute");
		}
		/* each job under its best schedule alone (spb best): fifo's
		 * order at 14.4 s a job; gandiva then packs the two halves
		 * (7 + 7 GB; (1.2 + 1.2) / 1.4 > 1), jigsaw's pair */
		if (p != CL_JIGSAW) {
			c.spb_best = 1;
			cl_job k[2] = {job(1, 0, 2, 10), job(2, 0, 2, 10)};
			s = run(&c, &m, 1, k, 2);
			double fin[] = {14.4, 28.8}, pair[] = {16.8, 16.8};
			if (p == CL_GANDIVA)
				expect(p, k, 2, pair, &s, 16.8, 16.8, 2.0);
			else
				expect(p, k, 2, fin, &s, 21.6, 28.8, 1.0);
		}
	}
	/* the efficiency against fifo: makespans 40 / 16.8 = 2.38 */
	cl_config a = cfg(CL_FIFO), b = cfg(CL_JIGSAW);
	cl_job ja[2] = {job(1, 0, 2, 10), job(2, 0, 2, 10)}, jb[2] = {job(1, 0, 2, 10), job(2, 0, 2, 10)};
	cl_summary sa = run(&a, &m, 1, ja, 2), sb = run(&b, &m, 1, jb, 2);
	near(sb.samples_per_gpu_h / sa.samples_per_gpu_h, 40 / 16.8, "efficiency ratio");
	near(sa.samples_per_gpu_h, 2 * 10 * 64 / (2 * 40 / 3600.0), "fifo's samples per GPU-hour");
}
END_TEST

START_TEST(t4_packing_without_partial_backprop)
{
	/* T3 with full at 6 GB and no half: gandiva and jigsaw pack
	 * full+full, cycle max(2, 2, 2) = 2, both done at 20; the others as
	 * fifo, 20 and 40 */
	cl_model m = t3_model(6, 0);
	for (int p = 0; p < CL_N_POLICIES; p++) {
		cl_config c = cfg((cl_policy)p);
		cl_job j[2] = {job(1, 0, 2, 10), job(2, 0, 2, 10)};
		cl_summary s = run(&c, &m, 1, j, 2);
		if (p == CL_GANDIVA || p == CL_JIGSAW) {
			double fin[] = {20, 20};
			expect(p, j, 2, fin, &s, 20, 20, 2.0);
		} else {
			double fin[] = {20, 40};
			expect(p, j, 2, fin, &s, 30, 40, 1.0);
		}
	}
}
END_TEST

START_TEST(strict_order_and_backfill)
{
	/* G 2, T 1 s, all at 0: J1 (1 GPU, 1), J2 (2, 5), J3 (1, 20). srtf
	 * (keys 1, 5, 20) runs J1; J2 does not fit and blocks J3 (strict):
	 * J1 0-1, J2 1-6, J3 6-26. las (one queue, arrival order) backfills
	 * J3 beside J1, then J2 preempts it at 1: J3 resumes at 6 with 19
	 * left: 25. fifo: the head J2 blocks J3: as srtf. gandiva and
	 * jigsaw: J2 has no 2-GPU job to pack onto: as fifo. */
	cl_model m = model1(1, 0, 1);
	for (int p = 0; p < CL_N_POLICIES; p++) {
		cl_config c = cfg((cl_policy)p);
		cl_job j[3] = {job(1, 0, 1, 1), job(2, 0, 2, 5), job(3, 0, 1, 20)};
		cl_summary s = run(&c, &m, 1, j, 3);
		double strict[] = {1, 6, 26}, backfill[] = {1, 6, 25};
		if (p == CL_LAS) {
			expect(p, j, 3, backfill, &s, 32.0 / 3, 25, -1);
			ck_assert_int_eq(j[2].preemptions, 1);
		} else {
			expect(p, j, 3, strict, &s, 11, 26, -1);
		}
	}
}
END_TEST

START_TEST(restarts_cost_time_and_pairs_split)
{
	/* T1 under srtf with a 0.5 s restart: J1 is preempted at 1 and
	 * resumes at 6, then holds its GPUs 0.5 s before it goes on: 15.5 */
	cl_model m = model1(1, 0, 1);
	cl_config c = cfg(CL_SRTF);
	c.restart_s = 0.5;
	cl_job j[3] = {job(1, 0, 2, 10), job(2, 1, 1, 2), job(3, 2, 1, 4)};
	cl_summary s = run(&c, &m, 1, j, 3);
	near(j[0].finish, 15.5, "J1 after its restart");
	near(j[0].alloc_gpu_s, 2 * (1 + 9.5), "J1's allocated GPU-seconds");
	near(j[0].compute_gpu_s, 2 * 10, "J1's computing GPU-seconds");
	near(s.makespan, 15.5, "makespan");
	/* a packed pair where one ends first: the other goes on alone at its
	 * own speed. T4's model; J2 has 5 iterations: both at 1 per 2 s
	 * until 10, then J1 alone, 5 more at 1 per 2 s: 20 */
	cl_model m4 = t3_model(6, 0);
	c = cfg(CL_GANDIVA);
	cl_job k[2] = {job(1, 0, 2, 10), job(2, 0, 2, 5)};
	run(&c, &m4, 1, k, 2);
	near(k[1].finish, 10, "J2, packed");
	near(k[0].finish, 20, "J1, alone after J2");
	/* ... and where the pair is slower than one alone: T3's halves under
	 * jigsaw, J2 with 5 iterations: both at 1 per 1.4 x 1.2 s, J2 done at
	 * 8.4; J1's last 5 alone at 1.2 x 1.2 s each: 8.4 + 7.2 = 15.6 */
	cl_model m3 = t3_model(10, 1);
	c = cfg(CL_JIGSAW);
	cl_job h[2] = {job(1, 0, 2, 10), job(2, 0, 2, 5)};
	run(&c, &m3, 1, h, 2);
	near(h[1].finish, 8.4, "J2, packed");
	near(h[0].finish, 15.6, "J1, alone after J2, at its own speed");
}
END_TEST

START_TEST(bad_input_names_the_job_and_field)
{
	cl_model m = model1(1, 0, 1);
	cl_config c = cfg(CL_FIFO);
	char err[SL_ERR_LEN];
	cl_summary s;
	cl_job j = job(7, 0, 3, 10);
	ck_assert_int_eq(cl_simulate(&c, &m, 1, &j, 1, &s, NULL, NULL, err), -SL_EINVAL);
	ck_assert_str_eq(err, "job 7: wants 3 GPUs, the cluster has 2");
	j = job(8, -1, 1, 10);
	ck_assert_int_eq(cl_simulate(&c, &m, 1, &j, 1, &s, NULL, NULL, err), -SL_EINVAL);
	ck_assert_str_eq(err, "job 8: arrival must be a time >= 0");
	j = job(9, 0, 1, 0);
	ck_assert_int_eq(cl_simulate(&c, &m, 1, &j, 1, &s, NULL, NULL, err), -SL_EINVAL);
	ck_assert_str_eq(err, "job 9: iterations must be positive");
	j = job(10, 0, 1, 5);
	j.model = 1;
	ck_assert_int_eq(cl_simulate(&c, &m, 1, &j, 1, &s, NULL, NULL, err), -SL_EINVAL);
	ck_assert_str_eq(err, "job 10: no such model");
	cl_model big = model1(1, 0, 17);
	j = job(11, 0, 1, 5);
	ck_assert_int_eq(cl_simulate(&c, &big, 1, &j, 1, &s, NULL, NULL, err), -SL_EINVAL);
	ck_assert_str_eq(err, "model m, schedule full: mem_gb 17 does not fit a GPU's 16");
	ck_assert_int_eq(cl_policy_find("jigsaw"), CL_JIGSAW);
	ck_assert_int_eq(cl_policy_find("JigSaw"), -1);
}
END_TEST

/* a seeded trace of n jobs on G GPUs, for the cases below */
static void
trace(cl_job *j, size_t n, int gpus, unsigned seed)
{
	unsigned x = seed;
	double t = 0;
	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		t += (x >> 16) % 100 / 10.0;
		x = x * 1103515245u + 12345u;
		int g = 1 << ((x >> 16) % 3);
		x = x * 1103515245u + 12345u;
		j[i] = job((long)i + 1, t, g > gpus ? gpus : g, 5 + (x >> 16) % 200);
	}
}

START_TEST(deterministic_and_conserving)
{
	/* 300 jobs on 8 GPUs, every policy, twice: the same finishes to the
	 * bit; every job finishes after it arrives, with at least its
	 * iterations' time alone; allocation never exceeds the cluster's
	 * GPUs outside packing */
	enum { N = 300 };
	cl_model m = t3_model(6, 1);
	static cl_job a[N], b[N];
	for (int p = 0; p < CL_N_POLICIES; p++) {
		cl_config c = cfg((cl_policy)p);
		c.gpus = 8;
		c.n_thresholds = 2;
		c.thresholds[0] = 50;
		c.thresholds[1] = 500;
		trace(a, N, 8, 42);
		trace(b, N, 8, 42);
		cl_summary sa = run(&c, &m, 1, a, N), sb = run(&c, &m, 1, b, N);
		ck_assert(memcmp(&sa, &sb, sizeof(sa)) == 0);
		ck_assert_int_eq(sa.jobs, N);
		for (int i = 0; i < N; i++) {
			ck_assert_msg(memcmp(&a[i].finish, &b[i].finish, sizeof(double)) == 0,
				      "%s: job %d differs between runs", cl_policy_name(p), i);
			ck_assert(a[i].first_start >= a[i].arrival - EPS);
			/* the fastest a job goes is alone under half: 1.2 s an
			 * iteration, 1.2 of them a full one (a pair is slower) */
			double best = a[i].iters * 1.2 * 1.2;
			ck_assert_msg(a[i].finish - a[i].arrival >= best - 1e-6,
				      "%s: job %d ran faster than it can", cl_policy_name(p), i);
		}
		if (p != CL_GANDIVA && p != CL_JIGSAW)
			ck_assert(sa.util_alloc <= 1.0 + 1e-9);
		ck_assert(sa.util_compute <= sa.util_alloc + 1e-9);
		ck_assert(sa.p50_jct <= sa.p95_jct && sa.p95_jct <= sa.max_jct);
	}
}
END_TEST

/* las: a job the ranking squeezes out gives way, and a smaller one behind
 * it that still fits keeps running. G 4, one threshold at 10 GPU-seconds,
 * 1 s an iteration. J1 (0, 2 GPUs, 100 iterations) and J2 (0, 1, 100)
 * start at 0 and reach queue 1 at 5 and 10. J3 (12, 3, 3) arrives in
 * queue 0, first in key order, and takes 3 GPUs; the one left does not
 * hold J1 (2, next in order: same queue and arrival, lower id), which is
 * preempted with 88 to go; J2 (1) still fits and runs on to 100. J3 is
 * done at 15 (9 GPU-seconds, still queue 0) and J1 resumes: 15 + 88. */
START_TEST(las_preempts_the_first_that_does_not_fit)
{
	cl_model m = model1(1, 0, 1);
	cl_config c = cfg(CL_LAS);
	c.gpus = 4;
	c.n_thresholds = 1;
	c.thresholds[0] = 10;
	c.verify = 1;
	cl_job j[3] = {job(1, 0, 2, 100), job(2, 0, 1, 100), job(3, 12, 3, 3)};
	cl_summary s = run(&c, &m, 1, j, 3);
	double finish[] = {103, 100, 15};
	expect(CL_LAS, j, 3, finish, &s, (103 + 100 + 3) / 3.0, 103, -1);
	ck_assert_int_eq(j[0].preemptions, 1);
	ck_assert_int_eq(j[1].preemptions, 0);
	ck_assert_int_eq(j[2].preemptions, 0);
}
END_TEST

/* a seeded trace for the checks below: GPU counts of every size up to
 * G, half the jobs arriving with the one before, ids falling with
 * arrival (ties ordered by id) */
static void
mixed_trace(cl_job *j, int n, int gpus, unsigned seed)
{
	unsigned x = seed;
	double t = 0;
	for (int i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		if ((x >> 16) % 2)
			t += (x >> 16) % 40;
		x = x * 1103515245u + 12345u;
		int g = 1 + (int)((x >> 16) % (unsigned)gpus);
		x = x * 1103515245u + 12345u;
		j[i] = job(n - i, t, g, 5 + (x >> 16) % 300);
	}
}

/* srtf decides incrementally (srtf.c) when every running key falls at one
 * a second; cl_config.verify checks every decision against the plain
 * strict prefix over every job in key order */
START_TEST(srtf_matches_a_full_ranking)
{
	enum { N = 400 };
	static cl_job j[N];
	cl_model m = t3_model(6, 1);
	const int sizes[] = {4, 9, 16, 40};
	for (int gi = 0; gi < 4; gi++)
		for (unsigned seed = 1; seed <= 3; seed++) {
			cl_config c = cfg(CL_SRTF);
			c.gpus = sizes[gi];
			c.verify = 1;
			mixed_trace(j, N, c.gpus, seed * 7919 + (unsigned)gi);
			cl_summary s;
			char err[SL_ERR_LEN] = "";
			int rc = cl_simulate(&c, &m, 1, j, N, &s, NULL, NULL, err);
			ck_assert_msg(rc == 0, "G %d, seed %u: %s", c.gpus, seed, err);
			ck_assert_int_eq(s.jobs, N);
			ck_assert(s.util_alloc <= 1.0 + 1e-9);
		}
}
END_TEST

/* las decides incrementally (las.c); cl_config.verify checks every
 * decision against the plain greedy over every job in key order. Seeded
 * traces with GPU counts of every size up to the cluster's, arrivals
 * shared by several jobs, one to four thresholds, restarts or none. */
START_TEST(las_matches_a_full_ranking)
{
	enum { N = 400 };
	static cl_job j[N];
	cl_model m = t3_model(6, 1);
	const int sizes[] = {4, 9, 16};
	const double th[][4] = {{50}, {20, 200, 2000, 20000}, {1e9}};
	const int nth[] = {1, 4, 1};
	for (int gi = 0; gi < 3; gi++)
		for (int ti = 0; ti < 3; ti++)
			for (int seed = 1; seed <= 2; seed++) {
				cl_config c = cfg(CL_LAS);
				c.gpus = sizes[gi];
				c.n_thresholds = nth[ti];
				memcpy(c.thresholds, th[ti], sizeof(th[ti]));
				c.restart_s = seed == 2 ? 7 : 0;
				c.spb_best = seed == 2;
				c.verify = 1;
				mixed_trace(j, N, c.gpus, (unsigned)(seed * 7919 + gi * 31 + ti));
				cl_summary s;
				char err[SL_ERR_LEN] = "";
				int rc = cl_simulate(&c, &m, 1, j, N, &s, NULL, NULL, err);
				ck_assert_msg(rc == 0, "G %d, thresholds %d, seed %d: %s", c.gpus,
					      c.n_thresholds, seed, err);
				ck_assert_int_eq(s.jobs, N);
				ck_assert(s.util_alloc <= 1.0 + 1e-9);
			}
}
END_TEST

/* ---- the files ------------------------------------------------------------ */

static const char profiles_csv[] =
	"# origin: a comment line\n"
	"model,schedule,compute_s,comm_s,mem_gb,iter_mult\n"
	"spb,half,0.7,0.5,7,1.2\n"
	"spb,full,1.0,1.0,10,1\n"
	"\n"
	"small, full ,0.25,0,1,1\r\n";

START_TEST(profiles_parse)
{
	cl_model *m;
	int n;
	char err[SL_ERR_LEN];
	ck_assert_int_eq(cl_profiles_parse(profiles_csv, strlen(profiles_csv), "p.csv", &m, &n, err), 0);
	ck_assert_int_eq(n, 2);
	/* full moves first, whatever the file's order */
	ck_assert_str_eq(m[0].name, "spb");
	ck_assert_int_eq(m[0].n_sched, 2);
	ck_assert_str_eq(m[0].sched[0].name, "full");
	ck_assert_str_eq(m[0].sched[1].name, "half");
	ck_assert(m[0].sched[1].iter_mult == 1.2 && m[0].sched[1].mem_gb == 7);
	ck_assert_str_eq(m[1].name, "small");
	ck_assert(m[1].sched[0].compute_s == 0.25);
	free(m);
	const struct {
		const char *text, *want;
	} bad[] = {
		{"model,schedule,compute_s,comm_s,mem_gb\n", "p.csv:1: missing column \"iter_mult\""},
		{"model,schedule,compute_s,comm_s,mem_gb,iter_mult\nx,half,1,0,1,2\n",
		 "p.csv: model x has no \"full\" schedule"},
		{"model,schedule,compute_s,comm_s,mem_gb,iter_mult\nx,full,1,0,1,1\nx,full,1,0,1,1\n",
		 "p.csv:3: model x: schedule \"full\" given twice"},
		{"model,schedule,compute_s,comm_s,mem_gb,iter_mult\nx,full,1s,0,1,1\n",
		 "p.csv:2: compute_s: expected a number, got \"1s\""},
		{"model,schedule,compute_s,comm_s,mem_gb,iter_mult\nx,full,1,0,1,1.5\n",
		 "p.csv:2: iter_mult: full backprop's is 1"},
		{"model,schedule,compute_s,comm_s,mem_gb,iter_mult\nx,full,0,0,1,1\n",
		 "p.csv:2: compute_s, comm_s: must be >= 0 with a positive sum"},
		{"model,schedule,compute_s,comm_s,mem_gb,iter_mult\nx,full,1,0,1\n",
		 "p.csv:2: iter_mult: missing"},
		{"# nothing\n", "p.csv: no header row"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_lt(cl_profiles_parse(bad[i].text, strlen(bad[i].text), "p.csv", &m, &n, err), 0);
		ck_assert_str_eq(err, bad[i].want);
	}
}
END_TEST

START_TEST(jobs_parse)
{
	cl_model *m;
	int nm;
	char err[SL_ERR_LEN];
	ck_assert_int_eq(cl_profiles_parse(profiles_csv, strlen(profiles_csv), "p.csv", &m, &nm, err), 0);
	/* columns in any order; a duration becomes iterations at full speed */
	const char *t = "model,num_gpus,arrival_s,job_id,duration_s,iters_full,extra\n"
			"spb,2,0.5,7,,12,x\n"
			"small,1,3,8,10.1,,\n";
	cl_job *j;
	size_t n;
	ck_assert_msg(cl_jobs_parse(t, strlen(t), "j.csv", m, nm, 4, &j, &n, err) == 0, "%s", err);
	ck_assert_uint_eq(n, 2);
	ck_assert(j[0].id == 7 && j[0].gpus == 2 && j[0].arrival == 0.5 && j[0].iters == 12 &&
		  j[0].model == 0 && j[0].batch == 64);
	ck_assert(j[1].model == 1 && j[1].iters == 40); /* 10.1 s / 0.25 s */
	free(j);
	const struct {
		const char *text, *want;
	} bad[] = {
		{"job_id,arrival_s,model,iters_full\n", "j.csv:1: missing column \"num_gpus\""},
		{"job_id,arrival_s,num_gpus,model\n",
		 "j.csv:1: missing column \"iters_full\" (or \"duration_s\")"},
		{"job_id,arrival_s,num_gpus,model,iters_full\n1,0,1,spb,10\n2,-1,1,spb,10\n",
		 "j.csv:3: arrival_s: must be >= 0"},
		{"job_id,arrival_s,num_gpus,model,iters_full\n1,0,5,spb,10\n",
		 "j.csv:2: num_gpus: 5, more than the cluster's 4"},
		{"job_id,arrival_s,num_gpus,model,iters_full\n1,0,1.5,spb,10\n",
		 "j.csv:2: num_gpus: expected a whole number >= 1"},
		{"job_id,arrival_s,num_gpus,model,iters_full\n1,0,1,resnet,10\n",
		 "j.csv:2: model: \"resnet\" is not in the profiles"},
		{"job_id,arrival_s,num_gpus,model,iters_full\n1,0,1,spb,0\n",
		 "j.csv:2: iters_full: must be positive"},
		{"job_id,arrival_s,num_gpus,model,iters_full\n1,0,1,spb\n", "j.csv:2: iters_full: missing"},
		{"job_id,job_id,arrival_s,num_gpus,model,iters_full\n", "j.csv: the header names \"job_id\" twice"},
		{"job_id,arrival_s,num_gpus,model,iters_full\n3,0,1,spb,5\n1,0,1,spb,5\n3,2,1,spb,5\n"
		 "1,4,1,spb,5\n",
		 "j.csv:5: job_id: 1 again (first on line 3)"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_lt(cl_jobs_parse(bad[i].text, strlen(bad[i].text), "j.csv", m, nm, 4, &j,
					       &n, err), 0);
		ck_assert_str_eq(err, bad[i].want);
	}
	free(m);
}
END_TEST

START_TEST(synthetic_trace)
{
	/* the same seed, the same trace; Gavel's mix of GPU counts; arrivals
	 * at the rate asked; a written trace reads back the same */
	cl_model *m;
	int nm;
	char err[SL_ERR_LEN];
	ck_assert_int_eq(cl_profiles_parse(profiles_csv, strlen(profiles_csv), "p.csv", &m, &nm, err), 0);
	cl_synth p = {.n = 20000, .jobs_per_hour = 60, .max_gpus = 64, .seed = 9};
	cl_job *a, *b;
	ck_assert_int_eq(cl_jobs_synth(&p, m, nm, &a, err), 0);
	ck_assert_int_eq(cl_jobs_synth(&p, m, nm, &b, err), 0);
	ck_assert(memcmp(a, b, sizeof(cl_job) * (size_t)p.n) == 0);
	long g[9] = {0};
	for (long i = 0; i < p.n; i++) {
		ck_assert(a[i].gpus == 1 || a[i].gpus == 2 || a[i].gpus == 4 || a[i].gpus == 8);
		g[a[i].gpus]++;
		ck_assert(i == 0 || a[i].arrival >= a[i - 1].arrival);
	}
	ck_assert(labs(g[1] - 14000) < 400 && labs(g[2] - 2000) < 250 && labs(g[4] - 3000) < 300);
	double hours = a[p.n - 1].arrival / 3600;
	ck_assert_msg(fabs(p.n / hours - 60) < 2, "%.2f jobs per hour", p.n / hours);
	char *text;
	size_t len;
	FILE *f = open_memstream(&text, &len);
	ck_assert_int_eq(cl_jobs_write(f, a, (size_t)p.n, m), 0);
	fclose(f);
	cl_job *c;
	size_t n;
	ck_assert_msg(cl_jobs_parse(text, len, "w.csv", m, nm, 0, &c, &n, err) == 0, "%s", err);
	ck_assert_uint_eq(n, (size_t)p.n);
	for (long i = 0; i < p.n; i++)
		ck_assert(c[i].id == a[i].id && c[i].gpus == a[i].gpus && c[i].model == a[i].model &&
			  c[i].iters == a[i].iters && fabs(c[i].arrival - a[i].arrival) < 1e-9);
	free(text);
	free(a);
	free(b);
	free(c);
	free(m);
}
END_TEST

START_TEST(large_times_end)
{
	/* Gavel-like durations (up to 10^6 s) at 1.9 ms an iteration: service
	 * in the 10^8 GPU-seconds and progress in the 10^9 iterations, where a
	 * sum of steps lands within rounding of a threshold or the end; every
	 * policy must still end, every job done (the case's timeout guards) */
	cl_model m = model1(0.0004, 0.0015, 1);
	cl_synth p = {.n = 400, .jobs_per_hour = 3, .max_gpus = 16, .seed = 4};
	cl_job *j;
	char err[SL_ERR_LEN];
	ck_assert_int_eq(cl_jobs_synth(&p, &m, 1, &j, err), 0);
	for (int pol = 0; pol < CL_N_POLICIES; pol++) {
		cl_config c = cfg((cl_policy)pol);
		c.gpus = 16;
		c.gpu_mem_gb = 80;
		c.n_thresholds = 2;
		c.thresholds[0] = 3600;
		c.thresholds[1] = 57600;
		cl_summary s = run(&c, &m, 1, j, (size_t)p.n);
		ck_assert_int_eq(s.jobs, (int)p.n);
		for (long i = 0; i < p.n; i++)
			ck_assert_msg(j[i].finish >= j[i].arrival, "%s: job %ld never finished",
				      cl_policy_name(pol), j[i].id);
	}
	free(j);
}
END_TEST

static Suite *
cluster_suite(void)
{
	Suite *s = suite_create("cluster");
	TCase *tc = tcase_create("hand");
	tcase_add_test(tc, t1_three_jobs_every_policy);
	tcase_add_test(tc, pack_onto_the_first_started);
	tcase_add_test(tc, t2_demotion_and_ties);
	tcase_add_test(tc, t3_partial_backprop);
	tcase_add_test(tc, t4_packing_without_partial_backprop);
	tcase_add_test(tc, strict_order_and_backfill);
	tcase_add_test(tc, las_preempts_the_first_that_does_not_fit);
	tcase_add_test(tc, las_matches_a_full_ranking);
	tcase_add_test(tc, srtf_matches_a_full_ranking);
	tcase_add_test(tc, restarts_cost_time_and_pairs_split);
	tcase_add_test(tc, bad_input_names_the_job_and_field);
	tcase_add_test(tc, deterministic_and_conserving);
	tcase_add_test(tc, large_times_end);
	tcase_add_test(tc, profiles_parse);
	tcase_add_test(tc, jobs_parse);
	tcase_add_test(tc, synthetic_trace);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(cluster_suite)
