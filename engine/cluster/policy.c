/* policy.c - the scheduling policies of `stalelab cluster` as a table: a
 * row of operations per policy (cluster_impl.h's cl_policy_ops), defined
 * in the policy's own file; what they share: the waiting heap, the
 * schedules' arithmetic, the trace's GPU counts. Each decision starts,
 * packs and preempts jobs (or, srtf ranking everything, makes a plan that
 * sim.c applies: a running job left out is preempted, a new one starts). */
#include <stdlib.h>
#include <string.h>

#include "cluster_impl.h"
#include "heap.h"

/* in cl_policy's order (cluster.h) */
static const cl_policy_ops *const policies[] = {
	[CL_FIFO] = &cl_fifo,
	[CL_SRTF] = &cl_srtf,
	[CL_LAS] = &cl_las,
	[CL_GANDIVA] = &cl_gandiva,
	[CL_JIGSAW] = &cl_jigsaw,
};
_Static_assert(sizeof(policies) / sizeof(policies[0]) == CL_N_POLICIES,
	       "a row per policy of cluster.h");

const cl_policy_ops *
policy_ops(const cl_config *c)
{
	return c->policy >= 0 && c->policy < CL_N_POLICIES ? policies[c->policy] : NULL;
}

const char *
cl_policy_name(cl_policy p)
{
	return p >= 0 && p < CL_N_POLICIES ? policies[p]->name : "?";
}

int
cl_policy_find(const char *s)
{
	for (int i = 0; i < CL_N_POLICIES; i++)
		if (!strcmp(s, policies[i]->name))
			return i;
	return -1;
}

int
cl_verifies(const cl_config *c)
{
	const cl_policy_ops *p = policy_ops(c);
	return p && p->verifies && p->verifies(c);
}

double
sched_time(const sim *s, int j, int k)
{
	const cl_sched *x = &s->models[s->jobs[j].model].sched[k];
	return x->compute_s + x->comm_s;
}

double
goodput_alone(const sim *s, int j, int k)
{
	const cl_sched *x = &s->models[s->jobs[j].model].sched[k];
	return 1.0 / (sched_time(s, j, k) * x->iter_mult);
}

double
pair_cycle(const sim *s, int a, int ka, int b, int kb)
{
	const cl_sched *x = &s->models[s->jobs[a].model].sched[ka];
	const cl_sched *y = &s->models[s->jobs[b].model].sched[kb];
	double cyc = x->compute_s + y->compute_s;
	if (x->compute_s + x->comm_s > cyc)
		cyc = x->compute_s + x->comm_s;
	if (y->compute_s + y->comm_s > cyc)
		cyc = y->compute_s + y->comm_s;
	return cyc;
}

double
sched_mem(const sim *s, int j, int k)
{
	return s->models[s->jobs[j].model].sched[k].mem_gb;
}

double
sched_mult(const sim *s, int j, int k)
{
	return s->models[s->jobs[j].model].sched[k].iter_mult;
}

/* the schedule j runs alone: full, or (spb_best, jigsaw) the one with the
 * most goodput, the earliest of equals */
int
alone_sched(const sim *s, int j)
{
	if (!s->c->spb_best && !s->pol->best_alone)
		return 0;
	const cl_model *m = &s->models[s->jobs[j].model];
	int best = 0;
	for (int k = 1; k < m->n_sched; k++)
		if (goodput_alone(s, j, k) > goodput_alone(s, j, best))
			best = k;
	return best;
}

/* ---- the waiting heap --------------------------------------------------- */

SL_HEAP(wqheap, wq_ent, wq_before)

void
heap_push(sim *s, wq_ent e)
{
	if (wqheap_push(&s->heap, &s->n_heap, &s->cap_heap, e) < 0)
		s->failed = 1;
}

static wq_ent
heap_pop(sim *s)
{
	return wqheap_pop(s->heap, &s->n_heap);
}

void
wait_push(sim *s, int j)
{
	jstate *x = &s->js[j];
	x->st = JS_WAITING;
	x->planned = 0;
	x->gen++;
	s->n_waiting++;
	wq_ent e = {s->pol->key ? s->pol->key(s, j) : 0, s->jobs[j].arrival, s->jobs[j].id, j,
		    x->gen};
	if (s->pol->wait_push)
		s->pol->wait_push(s, e);
	else
		heap_push(s, e);
}

/* the first waiting job in key order, taken off the heap (the caller
 * starts it or puts it back); 0 when none waits */
int
wait_next(sim *s, wq_ent *e)
{
	while (s->n_heap) {
		*e = heap_pop(s);
		const jstate *x = &s->js[e->j];
		if (x->st == JS_WAITING && x->gen == e->gen)
			return 1; /* else stale: the job left the queue */
	}
	return 0;
}

/* looked at and not started: back in once the decision is made */
void
put_back(sim *s, const wq_ent *e)
{
	s->back[s->n_back++] = *e;
}

void
put_back_all(sim *s)
{
	for (size_t i = 0; i < s->n_back; i++)
		heap_push(s, s->back[i]);
	s->n_back = 0;
}

/* ---- the policy's state ------------------------------------------------ */

static int
cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* the index of GPU count g among the trace's (it is one of them) */
static int
gval_at(const sim *s, int g)
{
	int lo = 0, hi = s->n_gvals - 1;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (s->gvals[mid] < g)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int
policy_gpu_classes(sim *s)
{
	size_t n = s->n_jobs ? s->n_jobs : 1;
	s->gvals = malloc(sizeof(int) * n);
	if (!s->gvals)
		return -1;
	for (size_t i = 0; i < s->n_jobs; i++)
		s->gvals[i] = s->jobs[i].gpus;
	qsort(s->gvals, s->n_jobs, sizeof(int), cmp_int);
	s->n_gvals = 0;
	for (size_t i = 0; i < s->n_jobs; i++)
		if (!s->n_gvals || s->gvals[s->n_gvals - 1] != s->gvals[i])
			s->gvals[s->n_gvals++] = s->gvals[i];
	for (size_t i = 0; i < s->n_jobs; i++)
		s->js[i].gcls = gval_at(s, s->jobs[i].gpus);
	return 0;
}

int
policy_init(sim *s)
{
	return s->pol->init ? s->pol->init(s) : 0;
}

void
policy_free(sim *s)
{
	if (s->pol->free)
		s->pol->free(s);
	free(s->gvals);
	free(s->take);
	free(s->pre);
}
