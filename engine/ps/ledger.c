/* ledger.c - nothing applied twice (see ledger.h). */
#include "ledger.h"

#include <string.h>

void
ledger_init(ledger *l, uint32_t epoch)
{
	memset(l, 0, sizeof(*l));
	l->epoch = epoch;
}

int
ledger_join(ledger *l, uint32_t worker, uint32_t incarnation)
{
	if (worker >= LEDGER_MAX)
		return -1;
	ledger_entry *e = &l->w[worker];
	if (e->known && e->incarnation == incarnation)
		return 0; /* a reconnect of the same process: its sequence goes on */
	if (e->known)
		l->restarts++;
	*e = (ledger_entry){.incarnation = incarnation, .known = 1};
	return 0;
}

ledger_verdict
ledger_check(ledger *l, uint32_t worker, uint32_t incarnation, uint64_t seq, uint32_t epoch)
{
	if (worker >= LEDGER_MAX)
		return LEDGER_BAD_ID;
	if (epoch != l->epoch) {
		l->old_epoch++;
		return LEDGER_OLD_EPOCH;
	}
	ledger_entry *e = &l->w[worker];
	if (!e->known || e->incarnation != incarnation) {
		l->old_incarnation++;
		return LEDGER_OLD_INCARNATION;
	}
	if (seq <= e->last) {
		l->duplicates++;
		return LEDGER_DUPLICATE;
	}
	if (e->held && seq == e->held) {
		l->held_again++;
		return LEDGER_HELD_AGAIN;
	}
	if (seq > e->last + 1)
		l->gaps += seq - e->last - 1;
	return LEDGER_APPLY;
}

void
ledger_applied(ledger *l, uint32_t worker, uint64_t seq, int held)
{
	if (worker >= LEDGER_MAX)
		return;
	ledger_entry *e = &l->w[worker];
	if (held) {
		e->held = seq;
		return;
	}
	if (seq > e->last)
		e->last = seq;
	if (e->held && e->held <= e->last)
		e->held = 0;
}

const char *
ledger_verdict_name(ledger_verdict v)
{
	static const char *const n[] = {"apply", "duplicate", "held again", "old epoch",
					"old incarnation", "bad id"};
	return (unsigned)v < sizeof(n) / sizeof(n[0]) ? n[v] : "?";
}
