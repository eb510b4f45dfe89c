/* test_ledger.c - the server's ledger of remote pushes (engine/ps/ledger.c):
 * numbers issued in order and never twice, a resend of an applied push, a
 * push of a step given up, a worker process restarted (and a late push
 * from its old process), a reconnect of the same process, a restore from a
 * checkpoint (a new generation above anything issued before), ids out of
 * range; and the counters, exactly. */
#include <stdlib.h>

#include "ledger.h"
#include "testutil.h"

static ledger *
fresh(void)
{
	ledger *l = malloc(sizeof(*l)); /* 100 KB: not on the stack */
	ck_assert_ptr_nonnull(l);
	ledger_init(l);
	return l;
}

START_TEST(in_order_and_duplicates)
{
	ledger *l = fresh();
	ck_assert_int_eq(ledger_join(l, 2, 77), 0);
	for (uint64_t s = 1; s <= 3; s++) {
		ck_assert_uint_eq(ledger_issue(l, 2), s);
		ck_assert_int_eq(ledger_push(l, 2, 77, s), LEDGER_APPLY);
	}
	/* REQ resends of pushes already applied */
	ck_assert_int_eq(ledger_push(l, 2, 77, 3), LEDGER_DUPLICATE);
	ck_assert_int_eq(ledger_push(l, 2, 77, 1), LEDGER_DUPLICATE);
	ck_assert_uint_eq(l->applied, 3);
	ck_assert_uint_eq(l->duplicates, 2);
	/* another worker's numbers are its own */
	ck_assert_int_eq(ledger_join(l, 5, 9), 0);
	ck_assert_uint_eq(ledger_issue(l, 5), 1);
	ck_assert_uint_eq(ledger_issue(l, 2), 4);
	free(l);
}
END_TEST

START_TEST(abandoned_steps_and_incarnations)
{
	ledger *l = fresh();
	ledger_join(l, 0, 10);
	ck_assert_uint_eq(ledger_issue(l, 0), 1);
	ck_assert_int_eq(ledger_push(l, 0, 10, 1), LEDGER_APPLY);
	/* step 2 issued, the worker lost; it reconnects (same process) and is
	 * given step 3: its late push of step 2 is dropped, never applied as
	 * step 3's */
	ck_assert_uint_eq(ledger_issue(l, 0), 2);
	ck_assert_int_eq(ledger_join(l, 0, 10), 0);
	ck_assert_uint_eq(l->restarts, 0);
	ck_assert_uint_eq(ledger_issue(l, 0), 3);
	ck_assert_int_eq(ledger_push(l, 0, 10, 2), LEDGER_ABANDONED);
	ck_assert_int_eq(ledger_push(l, 0, 10, 4), LEDGER_ABANDONED); /* never issued */
	ck_assert_int_eq(ledger_push(l, 0, 10, 0), LEDGER_ABANDONED);
	ck_assert_int_eq(ledger_push(l, 0, 10, 3), LEDGER_APPLY);
	/* the process restarted: a new incarnation, the numbers go on */
	ck_assert_int_eq(ledger_join(l, 0, 11), 0);
	ck_assert_uint_eq(l->restarts, 1);
	ck_assert_uint_eq(ledger_issue(l, 0), 4);
	ck_assert_int_eq(ledger_push(l, 0, 10, 4), LEDGER_OLD_INCARNATION);
	ck_assert_int_eq(ledger_push(l, 0, 11, 4), LEDGER_APPLY);
	/* an id never seen, and ids out of range */
	ck_assert_int_eq(ledger_push(l, 7, 1, 1), LEDGER_OLD_INCARNATION);
	ck_assert_int_eq(ledger_push(l, LEDGER_MAX, 1, 1), LEDGER_BAD_ID);
	ck_assert_int_eq(ledger_join(l, LEDGER_MAX, 1), -1);
	ck_assert_uint_eq(ledger_issue(l, LEDGER_MAX), 0);
	ledger_old_epoch(l);
	ck_assert_uint_eq(l->applied, 3);
	ck_assert_uint_eq(l->abandoned, 3);
	ck_assert_uint_eq(l->old_incarnation, 2);
	ck_assert_uint_eq(l->old_epoch, 1);
	ck_assert_str_eq(ledger_verdict_name(LEDGER_ABANDONED), "abandoned");
	free(l);
}
END_TEST

START_TEST(a_restore_starts_a_generation)
{
	ledger *l = fresh();
	ledger_join(l, 1, 5);
	ledger_issue(l, 1);
	ck_assert_int_eq(ledger_push(l, 1, 5, 1), LEDGER_APPLY);
	ck_assert_uint_eq(ledger_issue(l, 1), 2); /* in flight when it saved */
	ledger saved = *l;            /* what a checkpoint holds */
	ledger_issue(l, 1);           /* the old daemon went on: 3, 4 */
	ledger_push(l, 1, 5, ledger_issue(l, 1));
	*l = saved;
	ledger_restored(l);           /* the new daemon */
	ck_assert_uint_eq(l->generation, 1);
	uint64_t s = ledger_issue(l, 1);
	ck_assert_uint_eq(s, ((uint64_t)1 << 32) + 1);
	ck_assert_int_eq(ledger_push(l, 1, 5, 1), LEDGER_DUPLICATE); /* saved as applied */
	ck_assert_int_eq(ledger_push(l, 1, 5, 2), LEDGER_ABANDONED);  /* in flight at the save */
	ck_assert_int_eq(ledger_push(l, 1, 5, 3), LEDGER_ABANDONED);  /* the old daemon's */
	ck_assert_int_eq(ledger_push(l, 1, 5, s), LEDGER_APPLY);
	/* an id first seen after the restore starts in the generation too */
	ledger_join(l, 9, 1);
	ck_assert_uint_eq(ledger_issue(l, 9), ((uint64_t)1 << 32) + 1);
	free(l);
}
END_TEST

static Suite *
ledger_suite(void)
{
	Suite *s = suite_create("ledger");
	TCase *tc = tcase_create("pushes");
	tcase_add_test(tc, in_order_and_duplicates);
	tcase_add_test(tc, abandoned_steps_and_incarnations);
	tcase_add_test(tc, a_restore_starts_a_generation);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(ledger_suite)
