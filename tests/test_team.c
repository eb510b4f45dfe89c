/* test_team.c - the fork-join team: every part of every call runs exactly
 * once, in any interleaving, including when members are slow to wake; solo
 * mode runs inline. */
#include <sched.h>
#include <stdatomic.h>

#include "sl.h"
#include "team.h"
#include "testutil.h"

typedef struct hits {
	atomic_int count[8];
	int nparts;
	int slow; /* every other call, part 1 yields first */
} hits;

static void
count_part(void *p, int part, int n)
{
	hits *h = p;
	h->nparts = n;
	if (h->slow && part == 1)
		sched_yield();
	atomic_fetch_add(&h->count[part], 1);
}

/* Each team size makes 20,000 calls, or as many as 2 s allow past the
 * first 1,000: a slow call yields the core, and with a busy loop on each
 * core (a loaded CI machine) a yield costs a scheduler slice. 20,000 calls
 * a size took 16.6 s on 2 idle cores, and ran past the 60 s timeout with
 * a busy loop on each. */
START_TEST(every_part_once)
{
	for (int nt = 1; nt <= 4; nt++) {
		team *t;
		ck_assert_int_eq(team_new(nt, &t), 0);
		ck_assert_int_eq(team_size(t), nt);
		const double t0 = sl_now();
		for (int call = 0; call < 20000; call++) {
			if (call >= 1000 && sl_now() - t0 > 2.0)
				break;
			hits h = {.slow = call & 1};
			team_run(t, count_part, &h);
			ck_assert_int_eq(h.nparts, nt);
			for (int p = 0; p < nt; p++)
				ck_assert_msg(atomic_load(&h.count[p]) == 1,
					      "team %d call %d part %d ran %d times", nt, call,
					      p, atomic_load(&h.count[p]));
		}
		team_free(t);
	}
}
END_TEST

START_TEST(solo_runs_inline)
{
	team *t;
	ck_assert_int_eq(team_new(3, &t), 0);
	team_set_active(t, 1);
	ck_assert_int_eq(team_size(t), 1);
	hits h = {0};
	team_run(t, count_part, &h);
	ck_assert_int_eq(h.nparts, 1);
	ck_assert_int_eq(atomic_load(&h.count[0]), 1);
	team_set_active(t, 3);
	ck_assert_int_eq(team_size(t), 3);
	hits g = {0};
	team_run(t, count_part, &g);
	ck_assert_int_eq(atomic_load(&g.count[2]), 1);
	team_free(t);
	ck_assert_int_eq(team_new(0, &t), -SL_EINVAL);
}
END_TEST

START_TEST(split_covers_range)
{
	for (long n = 0; n < 50; n++)
		for (int nt = 1; nt <= 5; nt++) {
			long next = 0;
			for (int tid = 0; tid < nt; tid++) {
				long lo, hi;
				team_split(n, tid, nt, &lo, &hi);
				ck_assert_int_eq(lo, next);
				ck_assert(hi >= lo && hi - lo <= n / nt + 1);
				next = hi;
			}
			ck_assert_int_eq(next, n);
		}
}
END_TEST

static Suite *
team_suite(void)
{
	Suite *s = suite_create("team");
	TCase *tc = tcase_create("team");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, every_part_once);
	tcase_add_test(tc, solo_runs_inline);
	tcase_add_test(tc, split_covers_range);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(team_suite)
