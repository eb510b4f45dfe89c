/* test_ledger.c - the server's ledger of remote pushes (engine/ps/ledger.c):
 * in order, a resend of an applied push, a resend of the held one, a gap, a
 * push for an earlier daemon epoch, a worker process restarted (and a late
 * push from its old process), a reconnect of the same process, ids out of
 * range; and the counters, exactly. */
#include "ledger.h"
#include "testutil.h"

static ledger L; /* 100 KB: not on the stack */

START_TEST(in_order_and_duplicates)
{
	ledger_init(&L, 5);
	ck_assert_int_eq(ledger_join(&L, 2, 77), 0);
	for (uint64_t s = 1; s <= 3; s++) {
		ck_assert_int_eq(ledger_check(&L, 2, 77, s, 5), LEDGER_APPLY);
		ledger_applied(&L, 2, s, 0);
	}
	/* REQ resent seq 3 after a reconnect: acked again, applied never */
	ck_assert_int_eq(ledger_check(&L, 2, 77, 3, 5), LEDGER_DUPLICATE);
	ck_assert_int_eq(ledger_check(&L, 2, 77, 1, 5), LEDGER_DUPLICATE);
	ck_assert_uint_eq(L.duplicates, 2);
	ck_assert_uint_eq(L.gaps, 0);
	ck_assert_uint_eq(L.w[2].last, 3);
}
END_TEST

START_TEST(held_then_released)
{
	ledger_init(&L, 1);
	ledger_join(&L, 0, 1);
	ck_assert_int_eq(ledger_check(&L, 0, 1, 1, 1), LEDGER_APPLY);
	ledger_applied(&L, 0, 1, 1); /* held at the barrier */
	ck_assert_uint_eq(L.w[0].held, 1);
	ck_assert_int_eq(ledger_check(&L, 0, 1, 1, 1), LEDGER_HELD_AGAIN);
	ck_assert_uint_eq(L.held_again, 1);
	ledger_applied(&L, 0, 1, 0); /* the round completes */
	ck_assert_uint_eq(L.w[0].held, 0);
	ck_assert_uint_eq(L.w[0].last, 1);
	ck_assert_int_eq(ledger_check(&L, 0, 1, 1, 1), LEDGER_DUPLICATE);
	ck_assert_int_eq(ledger_check(&L, 0, 1, 2, 1), LEDGER_APPLY);
}
END_TEST

START_TEST(gaps_epochs_incarnations)
{
	ledger_init(&L, 3);
	ledger_join(&L, 9, 100);
	ledger_applied(&L, 9, 1, 0);
	/* seqs 2..4 lost on the way: applied, the gap counted */
	ck_assert_int_eq(ledger_check(&L, 9, 100, 5, 3), LEDGER_APPLY);
	ck_assert_uint_eq(L.gaps, 3);
	ledger_applied(&L, 9, 5, 0);
	/* computed before the daemon's restart (epoch 2) */
	ck_assert_int_eq(ledger_check(&L, 9, 100, 6, 2), LEDGER_OLD_EPOCH);
	ck_assert_uint_eq(L.old_epoch, 1);
	/* the worker process restarted: a new incarnation starts afresh */
	ck_assert_int_eq(ledger_join(&L, 9, 101), 0);
	ck_assert_uint_eq(L.restarts, 1);
	ck_assert_int_eq(ledger_check(&L, 9, 101, 1, 3), LEDGER_APPLY);
	ledger_applied(&L, 9, 1, 0);
	/* a late push of the old process is dropped */
	ck_assert_int_eq(ledger_check(&L, 9, 100, 6, 3), LEDGER_OLD_INCARNATION);
	ck_assert_uint_eq(L.old_incarnation, 1);
	/* the same process reconnecting keeps its sequence */
	ck_assert_int_eq(ledger_join(&L, 9, 101), 0);
	ck_assert_uint_eq(L.restarts, 1);
	ck_assert_int_eq(ledger_check(&L, 9, 101, 1, 3), LEDGER_DUPLICATE);
	/* a push from an id that never said hello */
	ck_assert_int_eq(ledger_check(&L, 10, 1, 1, 3), LEDGER_OLD_INCARNATION);
	ck_assert_int_eq(ledger_check(&L, LEDGER_MAX, 1, 1, 3), LEDGER_BAD_ID);
	ck_assert_int_eq(ledger_join(&L, LEDGER_MAX, 1), -1);
	ck_assert_str_eq(ledger_verdict_name(LEDGER_HELD_AGAIN), "held again");
}
END_TEST

static Suite *
ledger_suite(void)
{
	Suite *s = suite_create("ledger");
	TCase *tc = tcase_create("pushes");
	tcase_add_test(tc, in_order_and_duplicates);
	tcase_add_test(tc, held_then_released);
	tcase_add_test(tc, gaps_epochs_incarnations);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(ledger_suite)
