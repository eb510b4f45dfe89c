/* test_split.c - the data splits of "data_split" (engine/data/split.h) on
 * tiny labelled sets: the exact parts of shards and contiguous, the
 * dirichlet split's invariants, its skew against alpha, its seeding, and
 * the refusals that name the field. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>

#include "split.h"
#include "testutil.h"

/* n samples of `classes` labels, sample i of class i % classes */
static dataset
labelled(uint32_t n, int classes, uint8_t *y)
{
	for (uint32_t i = 0; i < n; i++)
		y[i] = (uint8_t)(i % (uint32_t)classes);
	return (dataset){.n = n, .c = 1, .h = 1, .w = 1, .dim = 1, .classes = classes,
			 .ylen = 1, .y = y};
}

static void
make(const char *spec, const dataset *d, int parts, uint64_t seed, uint64_t gen,
     uint32_t *idx, uint32_t *off)
{
	char err[SL_ERR_LEN] = "";
	split_spec sp;
	ck_assert_int_eq(split_parse(spec, &sp, err), 0);
	ck_assert_msg(split_make(&sp, d, parts, seed, gen, idx, off, err) == 0, "%s", err);
}

/* every index exactly once, parts ascending */
static void
check_partition(const uint32_t *idx, const uint32_t *off, int parts, uint32_t n)
{
	uint8_t *seen = calloc(n, 1);
	ck_assert_uint_eq(off[0], 0);
	ck_assert_uint_eq(off[parts], n);
	for (int j = 0; j < parts; j++)
		for (uint32_t t = off[j]; t < off[j + 1]; t++) {
			ck_assert_uint_lt(idx[t], n);
			ck_assert(!seen[idx[t]]);
			seen[idx[t]] = 1;
			if (t > off[j])
				ck_assert_uint_lt(idx[t - 1], idx[t]);
		}
	free(seen);
}

/* 20 samples of 4 classes (class c: c, c+4, ..., c+16), 2 workers, K 2:
 * four shards of 5, each one class; seed 1 deals classes {1, 3} to worker
 * 0 and {0, 2} to worker 1 */
START_TEST(shards_exact)
{
	uint8_t y[20];
	dataset d = labelled(20, 4, y);
	uint32_t idx[20], off[3];
	make("shards:2", &d, 2, 1, 0, idx, off);
	check_partition(idx, off, 2, 20);
	static const uint32_t want[20] = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19,
					  0, 2, 4, 6, 8, 10, 12, 14, 16, 18};
	ck_assert_uint_eq(off[1], 10);
	ck_assert_mem_eq(idx, want, sizeof(want));
	/* K 1, 4 workers: each worker one class */
	uint32_t off4[5], h[4];
	make("shards:1", &d, 4, 1, 0, idx, off4);
	check_partition(idx, off4, 4, 20);
	for (int j = 0; j < 4; j++) {
		split_hist(&d, idx + off4[j], off4[j + 1] - off4[j], h);
		ck_assert_uint_eq(h[0] + h[1] + h[2] + h[3], 5);
		ck_assert(h[0] == 5 || h[1] == 5 || h[2] == 5 || h[3] == 5);
	}
}
END_TEST

/* 20 samples, 3 workers: [0, 6), [6, 13), [13, 20) (j n / N rounded down) */
START_TEST(contiguous_exact)
{
	uint8_t y[20];
	dataset d = labelled(20, 4, y);
	uint32_t idx[20], off[4];
	make("contiguous", &d, 3, 7, 0, idx, off);
	check_partition(idx, off, 3, 20);
	ck_assert_uint_eq(off[1], 6);
	ck_assert_uint_eq(off[2], 13);
	for (uint32_t i = 0; i < 20; i++)
		ck_assert_uint_eq(idx[i], i);
}
END_TEST

/* the mean over parts of the largest class's share of the part: 1/classes
 * for parts of the set's mix, 1 for one class a part */
static double
top_share(const dataset *d, const uint32_t *idx, const uint32_t *off, int parts)
{
	double s = 0;
	uint32_t h[16];
	for (int j = 0; j < parts; j++) {
		uint32_t n = off[j + 1] - off[j], top = 0;
		split_hist(d, idx + off[j], n, h);
		for (int k = 0; k < d->classes; k++)
			top = h[k] > top ? h[k] : top;
		s += (double)top / n;
	}
	return s / parts;
}

/* 400 samples, 4 classes, 3 workers: a partition, every part >= 10; the
 * same bits for a seed, others for another seed or split number; alpha
 * 0.1 more skewed than alpha 100 (top share, averaged over 20 seeds) */
START_TEST(dirichlet_invariants)
{
	uint8_t y[400];
	dataset d = labelled(400, 4, y);
	uint32_t a[400], b[400], c[400], g[400], off[4], offb[4], offc[4], offg[4];
	double low = 0, high = 0;
	make("dirichlet:0.5", &d, 3, 11, 0, a, off);
	make("dirichlet:0.5", &d, 3, 11, 0, b, offb);
	make("dirichlet:0.5", &d, 3, 12, 0, c, offc);
	make("dirichlet:0.5", &d, 3, 11, 1, g, offg);
	check_partition(a, off, 3, 400);
	ck_assert_mem_eq(a, b, sizeof(a));
	ck_assert_mem_eq(off, offb, sizeof(off));
	ck_assert(memcmp(a, c, sizeof(a)) || memcmp(off, offc, sizeof(off)));
	ck_assert(memcmp(a, g, sizeof(a)) || memcmp(off, offg, sizeof(off)));
	for (uint64_t seed = 1; seed <= 20; seed++) {
		make("dirichlet:0.1", &d, 3, seed, 0, a, off);
		check_partition(a, off, 3, 400);
		for (int j = 0; j < 3; j++)
			ck_assert_uint_ge(off[j + 1] - off[j], SPLIT_MIN_PART);
		low += top_share(&d, a, off, 3) / 20;
		make("dirichlet:100", &d, 3, seed, 0, a, off);
		check_partition(a, off, 3, 400);
		high += top_share(&d, a, off, 3) / 20;
	}
	ck_assert_msg(low > 0.6 && high < 0.35, "top share: alpha 0.1 %.3f, alpha 100 %.3f",
		      low, high);
}
END_TEST

/* the balancing: no part passes n / N by more than one class's samples */
START_TEST(dirichlet_balanced)
{
	uint8_t y[400];
	dataset d = labelled(400, 4, y);
	uint32_t a[400], off[4];
	for (uint64_t seed = 1; seed <= 20; seed++) {
		make("dirichlet:0.1", &d, 3, seed, 0, a, off);
		for (int j = 0; j < 3; j++)
			ck_assert_uint_le(off[j + 1] - off[j], 400 / 3 + 100);
	}
}
END_TEST

/* Gamma(a) draws: mean a, variance a (a = 0.3, 2.5) */
START_TEST(gamma_moments)
{
	static const double as[] = {0.3, 2.5};
	for (int i = 0; i < 2; i++) {
		rng g;
		rng_seed(&g, 5, 77);
		double s = 0, s2 = 0, n = 200000;
		for (int t = 0; t < (int)n; t++) {
			double x = split_gamma(&g, as[i]);
			ck_assert(x >= 0);
			s += x;
			s2 += x * x;
		}
		double m = s / n, v = s2 / n - m * m;
		ck_assert_msg(fabs(m - as[i]) < 0.02 * as[i] + 0.005, "mean %g for %g", m, as[i]);
		ck_assert_msg(fabs(v - as[i]) < 0.05 * as[i] + 0.01, "var %g for %g", v, as[i]);
	}
}
END_TEST

static void
refused(const char *spec, const dataset *d, int parts, const char *want)
{
	char err[SL_ERR_LEN] = "";
	split_spec sp;
	uint32_t idx[64], off[65];
	int rc = split_parse(spec, &sp, err);
	if (rc == 0)
		rc = split_make(&sp, d, parts, 1, 0, idx, off, err);
	ck_assert_int_eq(rc, -SL_EINVAL);
	ck_assert_msg(strstr(err, "data_split") && strstr(err, want), "%s: %s", spec, err);
}

START_TEST(refusals)
{
	uint8_t y[20];
	dataset d = labelled(20, 4, y), text = d;
	text.ylen = 4;
	text.n = 5;
	refused("banana", &d, 2, "unknown \"banana\"");
	refused("shards:0", &d, 2, "[1, 65536]");
	refused("shards:x", &d, 2, "[1, 65536]");
	refused("dirichlet:-1", &d, 2, "alpha must be");
	refused("dirichlet:nan", &d, 2, "alpha must be");
	refused("dirichlet:", &d, 2, "alpha must be");
	refused("shards:11", &d, 2, "need 22 training samples");
	refused("dirichlet:0.5", &d, 3, "need 30 training samples");
	refused("shards:1", &text, 2, "has none (text)");
	refused("dirichlet:1", &text, 2, "has none (text)");
	refused("contiguous", &text, 6, "need 6");
	char err[SL_ERR_LEN];
	split_spec sp;
	uint32_t idx[5], off[3];
	ck_assert_int_eq(split_parse("contiguous", &sp, err), 0);
	ck_assert_int_eq(split_make(&sp, &text, 2, 1, 0, idx, off, err), 0);
	ck_assert_uint_eq(off[1], 2);
}
END_TEST

static Suite *
split_suite(void)
{
	Suite *s = suite_create("split");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, shards_exact);
	tcase_add_test(tc, contiguous_exact);
	tcase_add_test(tc, dirichlet_invariants);
	tcase_add_test(tc, dirichlet_balanced);
	tcase_add_test(tc, gamma_moments);
	tcase_add_test(tc, refusals);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(split_suite)
