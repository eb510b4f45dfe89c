/* cluster_impl.h - the simulator's state, shared by sim.c (events, time,
 * accounting) and policy.c (the decisions); included nowhere else. */
#ifndef SL_CLUSTER_IMPL_H
#define SL_CLUSTER_IMPL_H

#include "cluster.h"

enum { JS_PENDING, JS_WAITING, JS_RUNNING, JS_DONE };

/* a job's running state */
typedef struct jstate {
	int st;
	int partner;        /* the job sharing its GPUs, or -1 */
	int sched;
	double remaining;   /* full-equivalent iterations */
	double rate;        /* full-equivalent iterations per second (after warm) */
	double comp_frac;   /* the fraction of its GPU time spent computing */
	double warm_until;  /* a restart: no progress before */
	double attained;    /* GPU-seconds run (las) */
	int ran;            /* has run before (a start after it is a restart) */
} jstate;

/* one entry of a plan: a job alone, or two sharing their GPUs */
typedef struct cl_group {
	int n, job[2], sched[2];
} cl_group;

typedef struct sim {
	const cl_config *c;
	const cl_model *models;
	cl_job *jobs;
	size_t n_jobs;
	jstate *js;
	int *active;        /* arrived, not done, in (arrival, id) order */
	size_t n_active;
	int free_gpus;
	double t;
	struct cl_keyed *keys; /* n_jobs of policy_scratch_size() */
	/* the plan being made (policy.c) */
	cl_group *plan;
	int n_plan;
	int plan_free;
} sim;

/* ---- policy.c ------------------------------------------------------------- */

/* Fill s->plan (every job that runs from now, and its schedule) from the
 * current state. */
void policy_decide(sim *s);
/* the bytes per job of sim.keys */
size_t policy_scratch_size(void);

/* the seconds of one iteration of job j's schedule k alone */
double sched_time(const sim *s, int j, int k);
/* full-equivalent iterations per second of j alone under k */
double goodput_alone(const sim *s, int j, int k);
/* the cycle of a pair of jobs under schedules ka, kb */
double pair_cycle(const sim *s, int a, int ka, int b, int kb);

#endif
