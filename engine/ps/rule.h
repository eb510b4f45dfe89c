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
 * Server hooks see the parameter server only through ps.h. Worker hooks
 * see a worker and the run only through the two views below, which the
 * run fills in (engine/run/): the worker's step in flight and the rule's
 * own state (rule_worker), the server, the rule's parameters and what a
 * hook may ask of the run (rule_run, rule_ops). They talk to the server
 * only through the message calls of ps.h (pull, push, average, elastic),
 * so a remote worker or a GPU worker can do the same. */
#ifndef SL_RULE_H
#define SL_RULE_H

#include <stddef.h>
#include <stdint.h>

#include "ps_config.h"

struct backend;
struct model;
struct optim;
struct ps;
struct ps_grad;
struct ps_range;
struct ps_result;

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
	/* the models' average is an outer step (diloco): the server takes
	 * Delta = w - mean as a pseudo-gradient and applies its outer
	 * Nesterov step (rule_params outer_lr, outer_momentum) */
	RULE_OUTER = 1 << 6,
	/* the staleness recorded is that of the exchanges alone (an
	 * outer update's, in versions): a local step records none */
	RULE_STALE_AT_EXCHANGE = 1 << 7,
	/* workers exchange fragments of their models in the background
	 * (streaming-diloco): on the virtual clock the link time of an
	 * exchange's push runs from its send while the worker computes on,
	 * and the step that takes the reply starts once the reply has come
	 * (its own link time after the push's); a change of the rule's
	 * parameters restarts the workers from the server's weights, as a
	 * change of rule does; workers neither join nor are added mid-run */
	RULE_FRAGMENTS = 1 << 8,
	/* a phase's local steps touch the worker's weights and optimiser
	 * alone, and the step that ends it sends the whole model (localsgd,
	 * diloco, async-diloco, easgd) or a fragment (streaming-diloco: its
	 * remote_up, remote_down): a remote worker runs the phase on its own
	 * weights, and the wire carries the weights down when the phase
	 * starts and the model up when it ends, not a gradient a step
	 * (docs/remote.md) */
	RULE_PHASES = 1 << 9,
};

/* A worker as its rule's worker hooks see it: the step in flight and the
 * rule's own state. The run keeps one in each of its workers (worker.rw,
 * engine/run/run_impl.h); the rest of a worker is the run's. */
typedef struct rule_worker {
	int id;
	struct model *m;  /* replica: m->params holds the weights it computes on */
	struct backend *be;
	uint64_t have;    /* version held in m->params (UINT64_MAX: none) */
	uint64_t v_read;  /* version the current gradient is computed on */
	uint64_t clock;   /* iterations pushed (the SSP clock) */
	uint64_t seq;
	int waiting;      /* in a sync round or an average */
	uint64_t wait_v;  /* ... released when the version passes this */
	int64_t last_round; /* odsgd: round last pushed into (-1 none) */
	int batch_n;
	size_t grad_off;  /* the start of the gradient tail it sends (set at a pull) */
	int local_steps;  /* localsgd / easgd: steps since the last exchange */
	int h;            /* async-diloco with dylu: this local phase's H (0: the
			   * rule's) */
	float *ms, *wprev, *tmp; /* odsgd cadcasgd local optimiser state */
	float *wire;        /* easgd under compression: the model as sent (scratch) */
	int reply;          /* local rules: an exchange's reply came with the
			     * last step: the next one receives it */
	size_t reply_floats; /* ... of so many floats (0: the whole model;
			      * streaming-diloco's fragment), read at once */
	int frag;           /* streaming-diloco: the fragment whose round is
			     * pending (-1: none) */
	int frag_left;      /* ... local steps to compute before its reply is
			     * taken (the overlap) */
	struct optim *opt;  /* localsgd, easgd: the worker's optimiser state
			     * (engine/ps/optim.h; NULL until needed) */
	size_t took;        /* sparta: the floats its last pull took (the
			     * masked coordinates, or the whole model) */
	float *delta;       /* demo: the decoupled momentum (n floats, host
			     * memory; NULL: zero), in checkpoints */
	int remote_stepped; /* RULE_PHASES: a remote worker took this step's
			     * local update on its own weights (m->params
			     * hold them when the step exchanged, else the
			     * phase's start) */
	uint32_t opt_resets; /* inner_reset: the inner optimiser's fresh starts
			      * (rule_inner_reset), for a remote worker's */
	int remote;         /* a remote worker's: under RULE_PHASES its weights
			     * are the worker process's, m->params hold what
			     * came back of them (remote_up) */
	int took_part;      /* streaming-diloco, a remote worker's: 1 + the
			     * fragment a reply wrote into m->params (the
			     * global one: it goes down with the next step,
			     * mixed into the worker's own), 0 none */
} rule_worker;

typedef struct rule_run rule_run;

/* What a worker hook may ask of the run: the run fills the table in
 * (engine/run/step.c). Each is called, as the hooks are, with the run's
 * lock held. */
typedef struct rule_ops {
	/* the workers running (active, not paused) */
	int (*n_running)(const rule_run *e);
	/* the slowest running worker's clock (UINT64_MAX: none running) */
	uint64_t (*min_clock)(const rule_run *e);
	/* a round's size for the running workers (rule_round_size) */
	int (*round_size)(const rule_run *e);
	/* the updates left before a stop counted in updates (a stop stops
	 * at exactly that update); UINT64_MAX: no such stop */
	uint64_t (*updates_left)(const rule_run *e);
	/* The default pull into the worker's own weights, a copy: the
	 * server's, or under a version delay those of an older version
	 * (w->v_read is the version read); for rules that go on from them,
	 * as odsgd after its warm-up. */
	void (*pull_copy)(rule_run *e, rule_worker *w);
	/* The default delivery: the gradient message; under RULE_WAIT the
	 * worker waits for the round. Returns its staleness. */
	uint64_t (*push_grad)(rule_run *e, rule_worker *w);
	/* Before a model leaves a worker (localsgd, easgd): 0 if finite,
	 * else the run diverges and -1. */
	int (*check_model)(rule_run *e, rule_worker *w);
	/* Compress what the worker pushes (rule_params compress, ef;
	 * docs/rules.md, "Compression"), in place: buf's floats from off on
	 * (the worker's memory) become what the server decodes. anchor NULL:
	 * buf is a gradient or a pseudo-gradient, compressed as it is; else
	 * buf is a model, sent as its difference from anchor (the server's
	 * weights, which the server holds). Nothing under compress "none".
	 * 0, or -1 when the run failed (its memory). */
	int (*compress)(rule_run *e, rule_worker *w, float *buf, size_t off,
			const float *anchor);
	/* The same on buf's floats [off, off + len) alone (a fragment's
	 * slice; the residual of error feedback is per coordinate). */
	int (*compress_range)(rule_run *e, rule_worker *w, float *buf, size_t off, size_t len,
			      const float *anchor);
	/* the bytes a push of n floats sends, compressed as the run says */
	double (*push_bytes)(const rule_run *e, size_t n);
	/* the server's version advanced (an update applied) */
	void (*version_changed)(rule_run *e);
	/* fail the run: the server could not take `what` (a gradient, a
	 * model) from worker wid (ps_push's rc); returns rc */
	int (*push_failed)(rule_run *e, int wid, const char *what, int rc);
	/* the run cannot go on (code a negative SL_E*, why the reason);
	 * returns code */
	int (*fail)(rule_run *e, int code, const char *why);
	/* the worker's iterations per second of run time since it joined
	 * (virtual seconds on the virtual clock; 0 before its first), and
	 * the most of any running worker's (async-diloco's dylu) */
	double (*speed)(const rule_run *e, const rule_worker *w);
	double (*max_speed)(const rule_run *e);
	/* the run's time in seconds (virtual seconds on the virtual clock) */
	double (*now)(const rule_run *e);
	/* Is a step of a running worker other than w in flight that
	 * exchanges (the rule's `exchanges`) and lands by run time `by`? The
	 * virtual clock knows when each step lands; the wall clock, which
	 * cannot, answers 1 while its time is before `by` (async-diloco's
	 * grace window) */
	int (*exchange_due)(const rule_run *e, const rule_worker *w, double by);
	/* drop the run's lock, and take it again (hogwild's step) */
	void (*unlock)(rule_run *e);
	void (*lock)(rule_run *e);
} rule_ops;

/* The run as a worker hook sees it (the run keeps one: run.rr). The
 * optimiser's settings (learning rate, momentum, weight decay) are the
 * server's: ps_lr, ps_opt. */
struct rule_run {
	struct ps *ps;          /* the server: the hooks' messages (ps.h) */
	const rule_params *rp;  /* the rule's parameters, the run's current ones */
	const rule_ops *ops;
	uint64_t seed;          /* the run's seed (sparta draws its masks from it) */
	/* hogwild steps between their check and their count (the lock
	 * dropped meanwhile): a stop in updates counts them */
	int inflight;
	/* async-diloco's grace window: the run time of the arrival that
	 * opened the last one (-1: none yet), in checkpoints */
	double window_t0;
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
	int (*may_begin)(const rule_run *e, const rule_worker *w);
	int (*may_push)(const rule_run *e, const rule_worker *w);
	/* after the common part of a pull (time, depth, team width): read
	 * the weights the step computes on, set w->v_read */
	void (*pull)(rule_run *e, rule_worker *w);
	/* deliver the computed gradient (w->m->grads from w->grad_off);
	 * returns the staleness to record */
	uint64_t (*deliver)(rule_run *e, rule_worker *w);
	/* does the step being begun send a message (its model, for the
	 * local rules: on the steps that exchange)? NULL: every step pushes
	 * its gradient */
	int (*exchanges)(const rule_run *e, const rule_worker *w);
	/* does the step overlap its communication with its compute (the
	 * worker goes on without waiting for its pull: odsgd's local
	 * phase)? NULL: no */
	int (*overlaps)(const rule_run *e, const rule_worker *w);
	/* the local steps of the worker's current phase, its H (localsgd,
	 * diloco: rule_params H; async-diloco: dylu's for this phase; easgd:
	 * period), for the live views; NULL: the rule has no phases */
	int (*phase_h)(const rule_run *e, const rule_worker *w);
	/* the bytes the step being begun sends, when it exchanges (for the
	 * link and bytes_sent); NULL: the whole model's, compressed. What
	 * the reply brings back is rule_worker.reply_floats. */
	double (*exchange_bytes)(const rule_run *e, const rule_worker *w);
	/* the bytes the step being begun moves over its link, called after
	 * its pull (fresh: the worker had no weights before it): *pull what
	 * came down, *push what its delivery will send. NULL: the default,
	 * the whole model down (a local rule: on its first step and after an
	 * exchange) and the gradient up (a local rule: its model, on the
	 * steps that exchange), compressed as rule_params say. sparta: the
	 * masked coordinates, 4 bytes each way. */
	void (*step_bytes)(const rule_run *e, const rule_worker *w, int fresh, double *pull,
			   double *push);
	/* RULE_PHASES, a remote worker's step being begun (after its
	 * pull): the ranges of its weights the step brings back when it
	 * exchanges, into out (cap of them; 0: the whole model); and the
	 * ranges a reply wrote into w->m->params since its last step, which go
	 * down with it, mixed into the worker's own at *mix (optim_mix; 0:
	 * none). NULL: the whole model up, nothing down but a phase's start. */
	int (*remote_up)(const rule_run *e, const rule_worker *w, struct ps_range *out, int cap);
	int (*remote_down)(rule_run *e, rule_worker *w, struct ps_range *out, int cap,
			   float *mix);
	/* what the staleness it records counts, in words (NULL: "versions"):
	 * "local steps", "outer versions" */
	const char *stale_unit;

	/* RULE_ROUND: apply the pending round to the weights (the round's
	 * sum in ps_round_sum, its senders per layer in layer_count and, when
	 * its messages were sparse, per float in ps_round_senders); the
	 * server advances the version after. 0, or a negative SL_E* (the
	 * server then reports ps_failed). NULL: one optimiser step on each
	 * layer's average over its senders (ssgd's). */
	int (*server_round)(struct ps *p, const int *layer_count);
	/* the bytes a push of the layers from float off on costs (the
	 * virtual clock's link, bytes_sent); NULL: the gradient's floats,
	 * compressed under rule_params compress (compress.h) */
	double (*push_bytes)(const ps_layer *layers, int n_layers, size_t off,
			     const rule_params *rp);
} rule_class;

/* The rule_params keys of compression, which every rule that pushes
 * lists last (docs/rules.md, "Compression"; hogwild pushes nothing) */
#define RULE_PUSH_PARAMS "compress", "compress_ratio", "ef"

/* The table, in the order of docs/rules.md, NULL-terminated. */
extern const rule_class *const rule_table[];

/* The class named name, or NULL. */
const rule_class *rule_find(const char *name);

/* Number of rules; "ssgd, asgd, ..." into buf (for messages). */
int rule_count(void);
const char *rule_names(char *buf, size_t cap);

/* Position in the table (stable within one binary), -1 if not there. */
int rule_index(const rule_class *rc);

/* What rc's staleness counts: its stale_unit, or "versions". */
const char *rule_stale_unit(const rule_class *rc);

/* A round's size for n running workers (the class's hook or n, >= 1). */
int rule_round_size(const rule_class *rc, int n_running, const rule_params *rp);

#endif
