/* ledger.h - the server's record of remote workers' pushes, so that nothing
 * is applied twice (docs/remote.md). nanomsg's REQ sockets resend a request
 * after a reconnect or a timeout, and a worker resends after a daemon
 * restart, so the same push can arrive more than once: every push carries
 * (worker, incarnation, seq) and the daemon's epoch, and the ledger decides.
 *
 * Per worker id: the incarnation last seen, the last sequence number
 * applied, and the one held (queued behind a barrier). A new incarnation
 * (the worker process restarted) starts its sequence afresh. A push made
 * for an earlier daemon epoch (computed before a restart from a
 * checkpoint) is dropped: its weights are gone. The ledger is saved in
 * every checkpoint, so a restored daemon still knows what it applied.
 * Pure bookkeeping: no I/O, no locks (the caller holds the run's). */
#ifndef SL_LEDGER_H
#define SL_LEDGER_H

#include <stdint.h>

#define LEDGER_MAX 4096 /* worker ids */

typedef enum ledger_verdict {
	LEDGER_APPLY = 0,     /* new: apply it (then ledger_applied) */
	LEDGER_DUPLICATE,     /* applied before: answer ACK again, apply nothing */
	LEDGER_HELD_AGAIN,    /* the push being held: keep the newest route, drop the payload */
	LEDGER_OLD_EPOCH,     /* computed for an earlier daemon: drop, the worker re-pulls */
	LEDGER_OLD_INCARNATION, /* not from the process that said hello last: drop */
	LEDGER_BAD_ID,        /* id out of range */
} ledger_verdict;

typedef struct ledger_entry {
	uint32_t incarnation;
	uint8_t known;
	uint64_t last;  /* the last seq applied (0: none) */
	uint64_t held;  /* the seq held at a barrier (0: none) */
} ledger_entry;

typedef struct ledger {
	uint32_t epoch;  /* this daemon's */
	ledger_entry w[LEDGER_MAX];
	/* counters, for /metrics and the log */
	uint64_t duplicates, held_again, old_epoch, old_incarnation, gaps, restarts;
} ledger;

void ledger_init(ledger *l, uint32_t epoch);

/* A worker said hello from process `incarnation`: a new incarnation of a
 * known id starts its sequence afresh (counted as a restart); pushes from
 * any other incarnation are dropped from now on. -1 for an id out of range. */
int ledger_join(ledger *l, uint32_t worker, uint32_t incarnation);

/* What to do with a push. A gap (seq more than one past the last) is
 * applied and counted: a push lost on the way is the worker's loss, not a
 * reason to stall. */
ledger_verdict ledger_check(ledger *l, uint32_t worker, uint32_t incarnation, uint64_t seq,
			    uint32_t epoch);
/* The push was applied (or held, with held = 1). */
void ledger_applied(ledger *l, uint32_t worker, uint64_t seq, int held);

const char *ledger_verdict_name(ledger_verdict v);

#endif
