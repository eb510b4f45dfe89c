/* test_stats.c - the staleness and age histograms, exactly: every bucket
 * edge, the overflow bucket, the exact mean and max beside the buckets,
 * quantiles by bucket. */
#include "stats.h"
#include "testutil.h"

START_TEST(stale_buckets_and_overflow)
{
	stale_hist h = {0};
	for (uint64_t tau = 0; tau < 63; tau++)
		stale_add(&h, tau);
	for (int k = 0; k < 63; k++)
		ck_assert_uint_eq(h.b[k], 1);
	/* 63 is the last exact bucket; 64 and beyond share the overflow */
	stale_add(&h, 63);
	ck_assert_uint_eq(h.b[63], 1);
	ck_assert_uint_eq(h.b[64], 0);
	stale_add(&h, 64);
	stale_add(&h, 1000);
	ck_assert_uint_eq(h.b[63], 1);
	ck_assert_uint_eq(h.b[64], 2);
	ck_assert_uint_eq(h.n, 66);
	ck_assert_uint_eq(h.max, 1000);
	/* the mean is exact, not by bucket: (0 + ... + 63 + 64 + 1000) / 66 */
	ck_assert_double_eq(stale_mean(&h), (63.0 * 64 / 2 + 64 + 1000) / 66);
}
END_TEST

START_TEST(stale_quantiles)
{
	stale_hist h = {0};
	ck_assert_double_eq(stale_quantile(&h, 0.5), 0);
	for (int i = 0; i < 90; i++)
		stale_add(&h, 2);
	for (int i = 0; i < 9; i++)
		stale_add(&h, 7);
	stale_add(&h, 500);
	ck_assert_double_eq(stale_quantile(&h, 0.5), 2);
	ck_assert_double_eq(stale_quantile(&h, 0.90), 2);  /* 90th of 100 */
	ck_assert_double_eq(stale_quantile(&h, 0.91), 7);
	ck_assert_double_eq(stale_quantile(&h, 0.99), 7);
	ck_assert_double_eq(stale_quantile(&h, 1.0), 64); /* overflow reads 64 */
	ck_assert_double_eq(stale_quantile(&h, 0), 2);
}
END_TEST

START_TEST(age_power_of_two_buckets)
{
	age_hist h = {0};
	age_add(&h, 0);      /* [0,1) */
	age_add(&h, 0.999);  /* [0,1) */
	age_add(&h, 1);      /* [1,2) */
	age_add(&h, 3.5);    /* [2,4) */
	age_add(&h, 4);      /* [4,8) */
	age_add(&h, -5);     /* a clock step back reads as 0 */
	age_add(&h, 1e12);   /* far past the last edge: the last bucket */
	ck_assert_uint_eq(h.b[0], 3);
	ck_assert_uint_eq(h.b[1], 1);
	ck_assert_uint_eq(h.b[2], 1);
	ck_assert_uint_eq(h.b[3], 1);
	ck_assert_uint_eq(h.b[AGE_BUCKETS - 1], 1);
	ck_assert_uint_eq(h.n, 7);
	ck_assert_double_eq(h.max_ms, 1e12);
	ck_assert_double_eq(age_mean(&h), (0.999 + 1 + 3.5 + 4 + 1e12) / 7);
	/* quantile: the bucket's upper edge, capped by the max */
	ck_assert_double_eq(age_quantile(&h, 3.0 / 7), 1);
	ck_assert_double_eq(age_quantile(&h, 5.0 / 7), 4);
	age_hist one = {0};
	age_add(&one, 2.5);
	ck_assert_double_eq(age_quantile(&one, 0.5), 2.5);
}
END_TEST

START_TEST(rate_window_reads_now_not_the_run)
{
	/* 100/s for 60 s, then a stall: the rate over the last 5 s reads 100
	 * while it runs and falls to 0 within a window of the stall, where
	 * the run's average (100 * 60 / t) would still read 92 at t = 65 */
	rate_win rw;
	rate_reset(&rw, 0, 0);
	double x = 0;
	for (int i = 1; i <= 240; i++) /* a mark every 0.25 s */
		rate_mark(&rw, i * 0.25, x += 25);
	ck_assert_double_eq_tol(rate_now(&rw, 60, x, 5), 100, 1e-9);
	/* the stall: x stops at 6000; against the mark at 57.5 */
	ck_assert_double_eq_tol(rate_now(&rw, 62.5, x, 5), 50, 1e-9);
	ck_assert_double_eq_tol(rate_now(&rw, 66, x, 5), 0, 1e-12);
	/* a counter that moved after its last kept mark, then stopped: 0 once
	 * a whole window has passed since it last moved */
	rate_mark(&rw, 60.1, x += 7); /* not kept: 0.1 s after the last */
	ck_assert_int_eq(rw.n, 64);
	ck_assert(rate_now(&rw, 65, x, 5) > 0);
	ck_assert_double_eq_tol(rate_now(&rw, 65.2, x, 5), 0, 1e-12);
	/* a change of pace shows within the window: 10/s from t = 66 on */
	for (int i = 1; i <= 100; i++)
		rate_mark(&rw, 66 + i * 0.1, x += 1);
	ck_assert_double_eq_tol(rate_now(&rw, 76, x, 5), 10, 1e-6);
	/* marked with an unchanged x (another worker's push): not a move */
	rate_mark(&rw, 79, x);
	ck_assert_double_eq_tol(rate_now(&rw, 81.2, x, 5), 0, 1e-12);
	/* younger than the window: against the oldest mark */
	rate_reset(&rw, 10, 50);
	rate_mark(&rw, 11, 70);
	ck_assert_double_eq_tol(rate_now(&rw, 12, 90, 5), 20, 1e-12);
	/* marks closer than RATE_EVERY_S apart are not kept: 64 marks span
	 * 16 s, more than any window read */
	rate_reset(&rw, 0, 0);
	for (int i = 1; i <= 1000; i++)
		rate_mark(&rw, i * 0.01, i);
	ck_assert_int_eq(rw.n, 41); /* 0, 0.25, ..., 10 */
	ck_assert_double_eq_tol(rw.t[1], RATE_EVERY_S, 1e-9);
}
END_TEST

static Suite *
stats_suite(void)
{
	Suite *s = suite_create("stats");
	TCase *tc = tcase_create("hist");
	tcase_add_test(tc, stale_buckets_and_overflow);
	tcase_add_test(tc, stale_quantiles);
	tcase_add_test(tc, age_power_of_two_buckets);
	tcase_add_test(tc, rate_window_reads_now_not_the_run);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(stats_suite)
