/* cluster_impl.h - the simulator's state, shared by sim.c (events, time,
 * accounting), policy.c (the table of policies, the waiting queue) and the
 * policies, a file each: order.c (fifo, and the packing both packers
 * share), gandiva.c, jigsaw.c, srtf.c, las.c; included nowhere else.
 *
 * A policy is a row of operations (cl_policy_ops): sim.c calls it through
 * the table and never by name. A new policy is a file that defines its
 * row, that row in policy.c's table, and its name in cluster.h's enum
 * (the table's index).
 *
 * Under fifo, gandiva and jigsaw an event costs time in the groups it
 * changes (a completion, the partner left alone, the jobs that start or
 * pack) and in the waiting jobs the policy looks at; under las and srtf
 * in the jobs that start or are preempted (las.c, srtf.c), except srtf
 * with --spb best or restarts, which re-ranks every running job (at most
 * two a GPU) as well. Never in all the jobs
 * that wait: those sit in a heap ordered by the policy's key (arrival for
 * fifo, gandiva and jigsaw; remaining time for srtf; queue, then arrival,
 * for las, a heap per GPU count). A waiting job's key does not change
 * while it waits, so the heap stays valid; a job that leaves the queue
 * leaves a stale entry behind, told apart by its generation and dropped
 * when it comes up. */
#ifndef SL_CLUSTER_IMPL_H
#define SL_CLUSTER_IMPL_H

#include "cluster.h"

enum { JS_PENDING, JS_WAITING, JS_RUNNING, JS_DONE };

/* a job's running state */
typedef struct jstate {
	/* what settling and ranking read, together */
	int st;
	int partner;        /* the job sharing its GPUs, or -1 */
	int sched;
	int ran;            /* has run before (a start after it is a restart) */
	double remaining;   /* full-equivalent iterations */
	double rate;        /* full-equivalent iterations per second (after warm) */
	double comp_frac;   /* the fraction of its GPU time spent computing */
	double warm_until;  /* a restart: no progress before */
	double attained;    /* GPU-seconds run (las) */
	double t_set;       /* its progress and accounts are up to this time */
	unsigned gen;       /* its current entry in the waiting heap */
	int planned;        /* in the plan being made */
	int alone_again;    /* its partner finished: its rate is now its own
			     * (and jigsaw re-chooses its schedule) */
	unsigned ver;       /* its current entries in the event heap */
	size_t run_at;      /* its index in the running list */
	long stamp;         /* fifo, gandiva, jigsaw: its group's place in the
			     * order groups started (a joiner takes its host's) */
	int lone_cls;       /* the packing index's class it is in, -1: none */
	unsigned lone_ver;  /* its current entry there */
	int gcls;           /* gandiva, jigsaw, las: its GPU count's index
			     * among the trace's */
	int rank;           /* its place in (arrival, id) order */
	int fq;             /* las: the queue it is counted in while it
			     * runs, -1: none */
} jstate;

/* one entry of a plan: a job alone, or two sharing their GPUs */
typedef struct cl_group {
	int n, job[2], sched[2];
} cl_group;

/* a running job's next completion (kind 0) or las threshold (kind 1 + its
 * index) */
typedef struct ev {
	double t;
	int kind;
	long id;
	int j;
	unsigned ver;
} ev;

/* an entry of the waiting heap: the job, its key when it was queued */
typedef struct wq_ent {
	double k1, arrival;
	long id;
	int j;
	unsigned gen;
} wq_ent;

/* an entry of the packing index: a running job alone, by its group's stamp */
typedef struct lone_ent {
	long stamp;
	int j;
	unsigned ver;
} lone_ent;

/* srtf.c: a running job's node in the treap of running jobs */
typedef struct tnode {
	double c;           /* its key plus the time: fixed while it runs */
	int l, r, sum;      /* children, and the subtree's GPUs */
	unsigned prio;
} tnode;

typedef struct wq_heap {
	wq_ent *v;
	size_t n, cap;
} wq_heap;

/* waiting entries in key order: the key, then arrival, then id */
static inline int
wq_before(const wq_ent *a, const wq_ent *b)
{
	if (a->k1 != b->k1)
		return a->k1 < b->k1;
	if (a->arrival != b->arrival)
		return a->arrival < b->arrival;
	return a->id < b->id;
}

typedef struct lone_heap {
	lone_ent *v;
	size_t n, cap;
} lone_heap;

struct sim;

/* A scheduling policy: what sim.c asks of it. A NULL hook has nothing to
 * do, or means the default it names. */
typedef struct cl_policy_ops {
	const char *name;
	/* its running jobs' attained service crossing a queue threshold
	 * (cl_config.thresholds) is an event, and crossed is called (las) */
	int thresholds;
	/* a job alone runs under its schedule of most goodput, --spb best
	 * or not (jigsaw) */
	int best_alone;
	/* does cl_config.verify check its decisions under c? NULL: never */
	int (*verifies)(const cl_config *c);
	/* its state, once the jobs are in (arrival, id) order; 0, or -1 out
	 * of memory (free is called all the same) */
	int (*init)(struct sim *s);
	void (*free)(struct sim *s);
	/* job j's key in the waiting queue, as it is now (ties: arrival,
	 * then id); NULL: 0, arrival order */
	double (*key)(const struct sim *s, int j);
	/* queue entry e; NULL: the one heap (s->heap) */
	void (*wait_push)(struct sim *s, wq_ent e);
	/* the decision at each decision point: start, pack and preempt jobs,
	 * applying each change (group_apply, preempt_and_start), or fill
	 * s->plan for apply_plan and return 1; a job it preempts has left
	 * its own structures by then */
	int (*decide)(struct sim *s);
	/* running job j: started (from waiting), finished, its key risen (a
	 * threshold crossed, j settled) */
	void (*started)(struct sim *s, int j);
	void (*finished)(struct sim *s, int j);
	void (*crossed)(struct sim *s, int j);
} cl_policy_ops;

/* the rows, a file each */
extern const cl_policy_ops cl_fifo, cl_srtf, cl_las, cl_gandiva, cl_jigsaw;

typedef struct sim {
	const cl_config *c;
	const cl_policy_ops *pol; /* c->policy's row */
	const cl_model *models;
	cl_job *jobs;
	size_t n_jobs;
	jstate *js;
	int *run;           /* the running jobs (srtf, las: in key order) */
	size_t n_run;
	wq_ent *heap;       /* the waiting jobs, by the policy's key */
	size_t n_heap, cap_heap;
	size_t n_waiting;   /* live entries */
	wq_ent *back;       /* looked at, not started: back in after the plan */
	size_t n_back;
	ev *evh;            /* the running jobs' events, soonest first */
	size_t n_ev, cap_ev;
	int failed;         /* 1: out of memory growing a heap; 2: verify
			     * found a decision that is not the ranking's */
	int run_in_order;   /* the policy keeps run[] in its key order (srtf
			     * ranking everything): a job that finishes leaves
			     * it in place, and one whose partner finished
			     * waits for no re-decision (s->again) */
	int free_gpus;
	double t;
	/* the plan being made (srtf ranking everything; apply_plan) */
	cl_group *plan;
	int n_plan;
	int plan_free;
	/* fifo, gandiva, jigsaw decide and apply one group at a time, and
	 * touch only the groups that change: the jobs whose partner finished
	 * (again), the ones that start, the lone ones they pack onto. The
	 * packing index holds the lone running jobs by (GPUs, schedule), each
	 * class a heap by stamp, so the first of a class in start order is
	 * found without walking the running jobs. */
	int *again;
	size_t n_again;
	long next_stamp;
	int *gvals, n_gvals;  /* the trace's distinct GPU counts, sorted */
	int *sbase, n_sall;   /* model m's schedules are sbase[m] ... */
	lone_heap *cls;       /* [gpu value][schedule]; NULL: no packing */
	lone_ent *reps;       /* n_sall: the classes' first, in pack() */
	/* srtf, las: a key (with its ties) no running job's comes after; an
	 * event whose waiting jobs ahead of it fit in the free GPUs changes
	 * nothing but starts (srtf.c, by_key_fast) */
	wq_ent bound;
	int has_bound;
	/* las (las.c): a key is a position, queue * n_jobs + arrival rank;
	 * the running jobs' GPUs by position in a Fenwick tree, the waiting
	 * jobs in a heap per GPU count (its class, gcls) */
	const int *order;     /* rank -> job */
	size_t n_pos;
	int *fen;
	int run_gpus;
	wq_heap *wqs;
	unsigned char *dead;  /* per class: done for this decision */
	int *take, *pre;      /* this decision's starts, preemptions */
	size_t n_take, n_pre;
	size_t *chk;          /* cl_config.verify's keys */
	/* srtf (srtf.c), when its keys all fall at one a second */
	tnode *tn;            /* per job */
	int troot;
	double *wkey;         /* verify: each waiting job's key */
	int bad_job;          /* failed == 2: the job verify disagreed on */
} sim;

/* ---- policy.c ------------------------------------------------------------- */

/* c->policy's row */
const cl_policy_ops *policy_ops(const cl_config *c);
/* the policy's state (its init); 0, or -1 out of memory */
int policy_init(sim *s);
void policy_free(sim *s);
/* the trace's distinct GPU counts (s->gvals) and each job's index among
 * them (gcls), for las and the packers; 0, or -1 out of memory */
int policy_gpu_classes(sim *s);
/* the schedule job j runs alone under */
int alone_sched(const sim *s, int j);

/* the waiting heap: push an entry; the first live one, taken off (0:
 * none); one looked at and not started, held in s->back; those put back
 * in the heap (s->n_back 0 after) */
void heap_push(sim *s, wq_ent e);
int wait_next(sim *s, wq_ent *e);
void put_back(sim *s, const wq_ent *e);
void put_back_all(sim *s);
/* queue waiting job j under the policy's key (arrival, a preemption) */
void wait_push(sim *s, int j);

/* ---- order.c: in arrival order (fifo; gandiva and jigsaw pack) ------------ */

/* the gain of packing waiting job j onto lone running job a, with the
 * pair's schedules (*ka for a, *kb for j); <= 0: not packed */
typedef double (*pack_gain_fn)(const sim *s, int a, int j, int *ka, int *kb);
/* fifo's decision, packing a blocked head by gain when it is not NULL */
int order_decide(sim *s, pack_gain_fn gain);
/* the packing index (gandiva, jigsaw); 0, or -1 out of memory */
int order_pack_init(sim *s);
void order_pack_free(sim *s);

/* group g's jobs run from now as g says: started, settled and given new
 * rates and events where anything changed (sim.c) */
void group_apply(sim *s, const cl_group *g);
/* las, srtf: s->pre's jobs are preempted (settled, queued again at their
 * keys as of now; they have left the policy's structures), then
 * s->take's start alone (sim.c) */
void preempt_and_start(sim *s);
/* j joins / leaves the running list (sim.c) */
void run_add(sim *s, int j);
void run_remove(sim *s, int j);
/* has attained service a reached threshold th? (relative: service in
 * GPU-seconds grows large, and a sum of steps lands within rounding) */
static inline int
cl_crossed(double a, double th)
{
	return a >= th * (1 - 1e-12) - 1e-9;
}

/* bring running job j's progress and accounts up to s->t (sim.c) */
void settle(sim *s, int j);

/* the seconds of one iteration of job j's schedule k alone */
double sched_time(const sim *s, int j, int k);
/* full-equivalent iterations per second of j alone under k */
double goodput_alone(const sim *s, int j, int k);
/* the cycle of a pair of jobs under schedules ka, kb */
double pair_cycle(const sim *s, int a, int ka, int b, int kb);
/* the memory of one GPU and the iteration multiplier of j's schedule k */
double sched_mem(const sim *s, int j, int k);
double sched_mult(const sim *s, int j, int k);

#endif
