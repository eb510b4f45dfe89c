/* rule.h - update rules as a table of classes, in the manner of htop's
 * meter classes: a rule is one file under engine/ps/rules/ that defines a
 * const rule_class, and one row in the table (engine/ps/rules/table.c).
 *
 * A class says what the rule is (name, flags, the rule_params keys it
 * reads) and supplies hooks: the server's arithmetic for one gradient, and
 * the worker-side decisions of a step (round size, may it begin, may it
 * push, what it pulls, how it delivers). A NULL hook means the default:
 * apply on arrival, a round of every running worker, begin and push when
 * the run lets it, pull the server's weights, push the gradient.
 *
 * Server hooks see the parameter server only through ps.h; worker hooks
 * run inside the engine (engine/run/run_impl.h) and talk to the server only
 * through the message calls of ps.h (pull, push, average, elastic), so a
 * remote worker or a GPU worker can do the same. */
#ifndef SL_RULE_H
#define SL_RULE_H

#include <stddef.h>
#include <stdint.h>

#include "ps_config.h"

struct ps;
struct ps_grad;
struct ps_result;
struct run;
struct worker;

enum {
	/* the server applies one averaged step per round of gradients */
	RULE_ROUND = 1 << 0,
	/* a worker waits for its gradient's round before its next step, so
	 * a server-held delay is a delay of the arrival (ssgd, odsgd) */
	RULE_WAIT = 1 << 1,
	/* workers train local weights and exchange models */
	RULE_LOCAL = 1 << 2,
	/* workers step the server's weights in shared memory: threads of
	 * this process on the wall clock only (hogwild) */
	RULE_SHARED = 1 << 3,
	/* the server keeps the weights each worker read (DC-ASGD's backup) */
	RULE_BACKUP = 1 << 4,
	/* it bounds the workers' clocks (ssp): they count from the moment it
	 * takes effect, and again from each change of its parameters, so the
	 * bound holds from then on instead of holding the fast workers until
	 * a straggler has caught up on the iterations of the rule before */
	RULE_CLOCKS = 1 << 5,
};

typedef struct rule_class {
	const char *name;
	const char *doc;     /* one line, for --help and the schema */
	unsigned flags;
	/* the rule_params keys this rule reads, NULL-terminated */
	const char *const *params;

	/* server: apply (or add to the round) one gradient; res->tau is set
	 * by the caller. NULL: one optimiser step on arrival. */
	int (*server_push)(struct ps *p, const struct ps_grad *g, int round_size,
			   struct ps_result *res);

	/* worker side (run lock held); NULL: the default */
	int (*round_size)(int n_running, const rule_params *rp);
	int (*may_begin)(const struct run *r, const struct worker *w);
	int (*may_push)(const struct run *r, const struct worker *w);
	/* after the common part of a pull (time, depth, team width): read
	 * the weights the step computes on, set w->v_read */
	void (*pull)(struct run *r, struct worker *w);
	/* deliver the computed gradient (w->m->grads from w->grad_off);
	 * returns the staleness to record */
	uint64_t (*deliver)(struct run *r, struct worker *w);
	/* does the step being begun send a message (its model, for the
	 * local rules: on the steps that exchange)? NULL: every step pushes
	 * its gradient */
	int (*exchanges)(const struct run *r, const struct worker *w);
	/* does the step overlap its communication with its compute (the
	 * worker goes on without waiting for its pull: odsgd's local
	 * phase)? NULL: no */
	int (*overlaps)(const struct run *r, const struct worker *w);
} rule_class;

/* The table, in the order of docs/rules.md, NULL-terminated. */
extern const rule_class *const rule_table[];

/* The class named name, or NULL. */
const rule_class *rule_find(const char *name);

/* Number of rules; "ssgd, asgd, ..." into buf (for messages). */
int rule_count(void);
const char *rule_names(char *buf, size_t cap);

/* Position in the table (stable within one binary), -1 if not there. */
int rule_index(const rule_class *rc);

/* A round's size for n running workers (the class's hook or n, >= 1). */
int rule_round_size(const rule_class *rc, int n_running, const rule_params *rp);

#endif
