/* cluster_impl.h - the simulator's state, shared by sim.c (events, time,
 * accounting), policy.c (the decisions, the waiting queue), las.c and
 * srtf.c (those two policies' incremental rankings); included nowhere
 * else.
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

typedef struct sim {
	const cl_config *c;
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
	int free_gpus;
	double t;
	/* the plan being made (policy.c; srtf and las) */
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
	 * nothing but starts (policy.c, by_key_fast) */
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

/* srtf, las: fill s->plan (every job that runs from now, and its
 * schedule) from the current state, for apply_plan; fifo, gandiva,
 * jigsaw: start and pack jobs, applying each group as it is decided. */
int policy_decide(sim *s); /* 1: s->plan made, for apply_plan */
/* the packing index (gandiva, jigsaw); 0, or -1 out of memory */
int policy_init(sim *s);
void policy_free(sim *s);
/* the schedule job j runs alone under */
int alone_sched(const sim *s, int j);

/* ---- las.c ----------------------------------------------------------------- */

int las_init(sim *s);  /* after the classes (policy_init); 0, or -1 */
void las_free(sim *s);
/* the queue of a job that has attained a GPU-seconds */
int las_queue(const sim *s, double attained);
/* decide and apply: the waiting jobs that start, the running that wait */
void las_decide(sim *s);
void las_wait_push(sim *s, wq_ent e);
/* running job j: started (from waiting), stopped (done, preempted), its
 * key risen (a threshold crossed, j settled); no-ops but under las */
void las_enter(sim *s, int j);
void las_leave(sim *s, int j);
void las_crossed(sim *s, int j);

/* ---- srtf.c ---------------------------------------------------------------- */

/* does srtf decide incrementally under c (no --spb best, no restarts)? */
int srtf_fast(const cl_config *c);
int srtf_init(sim *s); /* 0, or -1 out of memory */
void srtf_free(sim *s);
void srtf_decide(sim *s);
/* running job j: started (its key now), stopped; no-ops unless fast */
void srtf_enter(sim *s, int j);
void srtf_leave(sim *s, int j);

/* the waiting heap (policy.c): push an entry; the first live one, taken
 * off (0: none) */
void heap_push(sim *s, wq_ent e);
int wait_next(sim *s, wq_ent *e);

/* group g's jobs run from now as g says: started, settled and given new
 * rates and events where anything changed (sim.c) */
void group_apply(sim *s, const cl_group *g);
/* las, srtf: s->pre's jobs are preempted (settled, queued again at their
 * keys as of now), then s->take's start alone (sim.c) */
void preempt_and_start(sim *s);
/* j joins / leaves the running list (sim.c) */
void run_add(sim *s, int j);
void run_remove(sim *s, int j);
/* queue waiting job j under the policy's key (arrival, a preemption) */
void wait_push(sim *s, int j);
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

#endif
