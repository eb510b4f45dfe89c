/* ledger.h - the server's record of remote workers' pushes, so that nothing
 * is applied twice (docs/remote.md). nanomsg's REQ sockets resend a request
 * after a reconnect or a timeout, and a worker reconnects after a link cut
 * or a daemon restart, so the same push can arrive more than once, or a
 * push of a step the server gave up can arrive late.
 *
 * The server numbers the steps: every WEIGHTS answer carries the next
 * sequence number of that worker id, and the push must echo it. Per worker
 * id the ledger keeps the incarnation (the worker process) last seen, the
 * last number issued and the last applied. Numbers are never issued twice
 * for an id: not across reconnects, not across the worker's restarts, and
 * not across the daemon's restarts from a checkpoint, because a restored
 * ledger starts a new generation (the number's high 32 bits) above
 * anything the daemon that wrote it could have issued after it saved.
 * The ledger is saved in every checkpoint. Pure bookkeeping: no I/O, no
 * locks (the caller holds the run's). */
#ifndef SL_LEDGER_H
#define SL_LEDGER_H

#include <stdint.h>

#define LEDGER_MAX 4096 /* worker ids */

typedef enum ledger_verdict {
	LEDGER_APPLY = 0,       /* the push of the step in flight: apply it */
	LEDGER_DUPLICATE,       /* applied before: answer ACK again, apply nothing */
	LEDGER_ABANDONED,       /* of a step the server gave up (a lost worker's): drop */
	LEDGER_OLD_INCARNATION, /* not from the process that said hello last: drop */
	LEDGER_BAD_ID,          /* id out of range */
} ledger_verdict;

typedef struct ledger_entry {
	uint32_t incarnation;
	uint8_t known;
	uint64_t issued;  /* the last seq issued (0: none) */
	uint64_t applied; /* the last seq applied (0: none) */
} ledger_entry;

typedef struct ledger {
	uint32_t generation; /* restores from a checkpoint so far */
	ledger_entry w[LEDGER_MAX];
	/* counters, for /status, /metrics and the log */
	uint64_t applied, duplicates, abandoned, old_incarnation, old_epoch, restarts;
} ledger;

void ledger_init(ledger *l);

/* A worker said hello from process `incarnation`. A known id's new
 * incarnation is counted as a restart; pushes from any other incarnation
 * are dropped from now on. -1 for an id out of range. */
int ledger_join(ledger *l, uint32_t worker, uint32_t incarnation);

/* The sequence number of the worker's next step (0 for an id out of range). */
uint64_t ledger_issue(ledger *l, uint32_t worker);

/* What to do with a push; LEDGER_APPLY marks it applied. */
ledger_verdict ledger_push(ledger *l, uint32_t worker, uint32_t incarnation, uint64_t seq);

/* A push made for an earlier daemon (or run): dropped, counted. */
void ledger_old_epoch(ledger *l);

/* The ledger was read from a checkpoint: a new generation, so that no
 * number the saving daemon issued after it saved comes again. */
void ledger_restored(ledger *l);

const char *ledger_verdict_name(ledger_verdict v);

#endif
