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

static Suite *
stats_suite(void)
{
	Suite *s = suite_create("stats");
	TCase *tc = tcase_create("hist");
	tcase_add_test(tc, stale_buckets_and_overflow);
	tcase_add_test(tc, stale_quantiles);
	tcase_add_test(tc, age_power_of_two_buckets);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(stats_suite)
