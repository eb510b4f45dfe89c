/* ledger.c - nothing applied twice (see ledger.h). */
#include "ledger.h"

#include <string.h>

void
ledger_init(ledger *l)
{
	memset(l, 0, sizeof(*l));
}

int
ledger_join(ledger *l, uint32_t worker, uint32_t incarnation)
{
	if (worker >= LEDGER_MAX)
		return -1;
	ledger_entry *e = &l->w[worker];
	if (e->known && e->incarnation != incarnation)
		l->restarts++;
	e->known = 1;
	e->incarnation = incarnation; /* the numbers go on: never issued twice */
	return 0;
}

uint64_t
ledger_issue(ledger *l, uint32_t worker)
{
	if (worker >= LEDGER_MAX)
		return 0;
	ledger_entry *e = &l->w[worker];
	uint64_t floor = (uint64_t)l->generation << 32;
	if (e->issued < floor)
		e->issued = floor;
	return ++e->issued;
}

ledger_verdict
ledger_push(ledger *l, uint32_t worker, uint32_t incarnation, uint64_t seq)
{
	if (worker >= LEDGER_MAX)
		return LEDGER_BAD_ID;
	ledger_entry *e = &l->w[worker];
	if (!e->known || e->incarnation != incarnation) {
		l->old_incarnation++;
		return LEDGER_OLD_INCARNATION;
	}
	if (seq && seq <= e->applied) {
		l->duplicates++;
		return LEDGER_DUPLICATE;
	}
	if (!seq || seq != e->issued) {
		l->abandoned++;
		return LEDGER_ABANDONED;
	}
	e->applied = seq;
	l->applied++;
	return LEDGER_APPLY;
}

void
ledger_old_epoch(ledger *l)
{
	l->old_epoch++;
}

void
ledger_restored(ledger *l)
{
	l->generation++;
	/* the step each worker had in flight was the saving daemon's: its
	 * push is of a step given up */
	uint64_t floor = (uint64_t)l->generation << 32;
	for (int i = 0; i < LEDGER_MAX; i++)
		if (l->w[i].known && l->w[i].issued < floor)
			l->w[i].issued = floor;
}

const char *
ledger_verdict_name(ledger_verdict v)
{
	static const char *const n[] = {"apply", "duplicate", "abandoned", "old incarnation",
					"bad id"};
	return (unsigned)v < sizeof(n) / sizeof(n[0]) ? n[v] : "?";
}
