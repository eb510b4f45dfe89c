/* trace.h - the cluster simulator's inputs as text (trace.c): the models'
 * schedule profiles and a trace of jobs, both CSV with a header naming the
 * columns (docs/cluster.md, "Files"), and a seeded synthetic trace. The
 * parsers are pure: bytes in, a table or an error naming the file's line
 * and the field out. */
#ifndef SL_CLUSTER_TRACE_H
#define SL_CLUSTER_TRACE_H

#include <stdio.h>

#include "cluster.h"

/* profiles.csv: model,schedule,compute_s,comm_s,mem_gb,iter_mult (each
 * model with a "full" row, iter_mult 1, which becomes its schedule 0).
 * *out malloc'd. */
int cl_profiles_parse(const char *text, size_t len, const char *file, cl_model **out,
		      int *n_out, char *err);

/* jobs.csv: job_id,arrival_s,num_gpus,model[,batch_size],iters_full (or
 * duration_s: iterations at full backprop's speed). The models are the
 * profiles'; a job wanting more than max_gpus (0: no limit) is an error
 * naming its line. *out malloc'd. */
int cl_jobs_parse(const char *text, size_t len, const char *file, const cl_model *models,
		  int n_models, int max_gpus, cl_job **out, size_t *n_out, char *err);

typedef struct cl_synth {
	long n;               /* jobs */
	double jobs_per_hour; /* Poisson arrivals */
	int max_gpus;         /* the cluster's: no job wants more */
	double batch;         /* samples per iteration (0: 64) */
	unsigned long long seed;
} cl_synth;

/* n jobs (Gavel's durations and GPU counts), each of a model drawn
 * uniformly; the same seed gives the same trace. *out malloc'd. */
int cl_jobs_synth(const cl_synth *p, const cl_model *models, int n_models, cl_job **out,
		  char *err);
/* jobs as jobs.csv */
int cl_jobs_write(FILE *f, const cl_job *jobs, size_t n, const cl_model *models);

#endif
