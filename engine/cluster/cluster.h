/* cluster.h - `stalelab cluster`: an exact, event-driven simulator of a GPU
 * cluster that runs a trace of training jobs under a scheduling policy,
 * JigSaw-style partial backpropagation among them (docs/cluster.md).
 *
 * A job wants g GPUs for N iterations of its model. A model has one or more
 * partial-backprop schedules (the first is "full"): each gives the time of
 * one iteration's compute and communication on the slowest worker, the
 * memory one of its GPUs needs, and the iteration multiplier p, the
 * iterations it takes to reach the same target as full backprop, over
 * full's. Progress is counted in full-equivalent iterations: one iteration
 * under schedule s adds 1/p_s, and a job is done at N.
 *
 * Two jobs with the same g may share their GPUs (packing), iterations
 * interleaved: one cycle = max(cA + cB, cA + kA, cB + kB), one iteration of
 * each per cycle, when their memory fits one GPU. Placement within the
 * cluster does not change speed (as in Tiresias' simulator).
 *
 * Events: arrivals, completions and (las) a job's attained service
 * crossing a queue threshold; at equal times completions come first, then
 * arrivals, then thresholds, and the policy decides once for all of them.
 * Every order ends with (arrival, id), so a trace gives the same result on
 * every run. Pure computation: no I/O, no global state. */
#ifndef SL_CLUSTER_H
#define SL_CLUSTER_H

#include <stddef.h>

#define CL_MAX_SCHED 8
#define CL_MAX_THRESHOLDS 8

typedef struct cl_sched {
	char name[32];     /* "full", "half", "top2", ... */
	double compute_s;  /* one iteration's compute, the slowest worker */
	double comm_s;     /* its push and pull (the GPU waits) */
	double mem_gb;     /* one GPU's memory */
	double iter_mult;  /* p: iterations to the target over full's */
} cl_sched;

typedef struct cl_model {
	char name[64];
	int n_sched;
	cl_sched sched[CL_MAX_SCHED]; /* [0] is full backprop, p = 1 */
} cl_model;

typedef struct cl_job {
	/* input */
	long id;
	double arrival;    /* seconds */
	int gpus;
	int model;         /* index into the models */
	double iters;      /* N, full-backprop iterations */
	double batch;      /* samples per iteration (the efficiency's unit) */
	/* output */
	double first_start, finish; /* -1 until it happens */
	int preemptions;
	double alloc_gpu_s;   /* GPU-seconds allocated */
	double compute_gpu_s; /* ... of which computing */
	int last_sched;       /* the schedule it finished under */
} cl_job;

/* the policies: an index into their table (policy.c; a row each, in
 * its own file) */
typedef enum cl_policy {
	CL_FIFO,    /* arrival order, non-preemptive, the head blocks */
	CL_SRTF,    /* shortest remaining time first, preemptive */
	CL_LAS,     /* Tiresias' discretised 2D-LAS: attained GPU-seconds */
	CL_GANDIVA, /* fifo, and packing a blocked head onto a running job */
	CL_JIGSAW,  /* gandiva's packing, each job's schedule chosen for goodput */
	CL_N_POLICIES,
} cl_policy;

typedef struct cl_config {
	int gpus;
	double gpu_mem_gb;
	cl_policy policy;
	/* fifo, srtf, las, gandiva: run each job under its best schedule alone
	 * (the most goodput) instead of full backprop (jigsaw always does) */
	int spb_best;
	double restart_s;  /* a preempted job's restart: GPUs held, no progress */
	int n_thresholds;  /* las: queue thresholds in attained GPU-seconds */
	double thresholds[CL_MAX_THRESHOLDS];
	/* las, srtf: check every decision against a full ranking of every
	 * job (slow, O(jobs log jobs) a decision; for testing the
	 * simulator); cl_verifies says where it applies */
	int verify;
} cl_config;

/* does c.verify check c's decisions? las always; srtf when it decides
 * incrementally (no spb_best, no restart time); the others never */
int cl_verifies(const cl_config *c);

typedef struct cl_summary {
	int jobs;
	double avg_jct, p50_jct, p95_jct, max_jct;
	double makespan;       /* last finish - first arrival */
	double util_alloc;     /* GPU-seconds allocated / (G makespan); > 1 packed */
	double util_compute;   /* GPU-seconds computing / (G makespan) */
	double samples_per_gpu_h; /* useful samples (N batch) / (G makespan h) */
	double avg_queue_delay;
	long preemptions;
	long events;           /* decision points */
} cl_summary;

/* Called at every decision point (a timeline of the cluster). */
typedef void (*cl_tick_fn)(void *ud, double t, int free_gpus, int running, int queued);

const char *cl_policy_name(cl_policy p);
/* the policy named s, or -1 */
int cl_policy_find(const char *s);

/* Check the inputs: every job's model exists and has a full schedule,
 * wants 1..G GPUs, arrives at a finite time >= 0 and runs N > 0
 * iterations; each schedule's times are >= 0 and sum > 0, its memory fits
 * a GPU, its p > 0. 0, or -SL_EINVAL with err naming the job or model and
 * the field. */
int cl_check(const cl_config *c, const cl_model *models, int n_models,
	     const cl_job *jobs, size_t n_jobs, char *err);

/* Run the trace (jobs in any order; their outputs are filled in) and sum
 * it up. 0, or -SL_EINVAL (cl_check's message), -SL_ENOMEM. */
int cl_simulate(const cl_config *c, const cl_model *models, int n_models,
		cl_job *jobs, size_t n_jobs, cl_summary *out, cl_tick_fn tick,
		void *ud, char *err);

#endif
