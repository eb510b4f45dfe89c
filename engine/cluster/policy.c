/* policy.c - the scheduling policies of `stalelab cluster`: each turns the
 * cluster's state into a plan, the jobs that run from now (alone or two to
 * a set of GPUs) and each one's partial-backprop schedule. sim.c applies
 * the plan: a running job left out is preempted, a new one starts. */
#include <stdlib.h>
#include <string.h>

#include "cluster_impl.h"

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

static double
mem(const sim *s, int j, int k)
{
	return s->models[s->jobs[j].model].sched[k].mem_gb;
}

static double
mult(const sim *s, int j, int k)
{
	return s->models[s->jobs[j].model].sched[k].iter_mult;
}

/* the schedule j runs alone: full, or (spb_best, jigsaw) the one with the
 * most goodput, the earliest of equals */
static int
alone_sched(const sim *s, int j)
{
	if (!s->c->spb_best && s->c->policy != CL_JIGSAW)
		return 0;
	const cl_model *m = &s->models[s->jobs[j].model];
	int best = 0;
	for (int k = 1; k < m->n_sched; k++)
		if (goodput_alone(s, j, k) > goodput_alone(s, j, best))
			best = k;
	return best;
}

/* the best schedules for a and b together, within one GPU's memory: their
 * summed goodput, or 0 when no pair fits. ka, kb receive the choice. */
static double
pair_best(const sim *s, int a, int b, int any_sched, int *ka, int *kb)
{
	const int na = any_sched ? s->models[s->jobs[a].model].n_sched : 1;
	const int nb = any_sched ? s->models[s->jobs[b].model].n_sched : 1;
	double best = 0;
	for (int i = 0; i < na; i++)
		for (int k = 0; k < nb; k++) {
			if (mem(s, a, i) + mem(s, b, k) > s->c->gpu_mem_gb)
				continue;
			double cyc = pair_cycle(s, a, i, b, k);
			double gp = (1.0 / mult(s, a, i) + 1.0 / mult(s, b, k)) / cyc;
			if (gp > best) {
				best = gp;
				*ka = i;
				*kb = k;
			}
		}
	return best;
}

static void
plan_add(sim *s, int j, int k)
{
	cl_group *g = &s->plan[s->n_plan++];
	g->n = 1;
	g->job[0] = j;
	g->sched[0] = k;
	g->job[1] = g->sched[1] = -1;
	s->plan_free -= s->jobs[j].gpus;
}

/* the running jobs as they are, packed pairs together */
static void
plan_keep_running(sim *s)
{
	for (size_t i = 0; i < s->n_active; i++) {
		int j = s->active[i];
		const jstate *x = &s->js[j];
		if (x->st != JS_RUNNING || (x->partner >= 0 && x->partner < j))
			continue; /* a pair is entered once, by its lower index */
		plan_add(s, j, x->sched);
		if (x->partner >= 0) {
			cl_group *g = &s->plan[s->n_plan - 1];
			g->n = 2;
			g->job[1] = x->partner;
			g->sched[1] = s->js[x->partner].sched;
		}
	}
}

/* jigsaw: each group's schedules re-chosen for the most goodput */
static double
rechoose(sim *s, cl_group *g)
{
	if (g->n == 1) {
		g->sched[0] = alone_sched(s, g->job[0]);
		return goodput_alone(s, g->job[0], g->sched[0]);
	}
	int ka = 0, kb = 0;
	double gp = pair_best(s, g->job[0], g->job[1], 1, &ka, &kb);
	if (gp > 0) {
		g->sched[0] = ka;
		g->sched[1] = kb;
	}
	return gp;
}

/* gandiva, jigsaw: pack waiting job j onto a lone running job with as
 * many GPUs, where it gains the most; 1 when packed */
static int
pack(sim *s, int j)
{
	const int jig = s->c->policy == CL_JIGSAW;
	int at = -1, ka = 0, kb = 0;
	double gain = 0;
	for (int i = 0; i < s->n_plan; i++) {
		cl_group *g = &s->plan[i];
		int a = g->job[0];
		if (g->n != 1 || s->jobs[a].gpus != s->jobs[j].gpus)
			continue;
		int x = g->sched[0], y = alone_sched(s, j);
		double by;
		if (jig) { /* summed goodput: packed, against a alone */
			double gp = pair_best(s, a, j, 1, &x, &y);
			if (gp <= 0)
				continue;
			by = gp - goodput_alone(s, a, g->sched[0]);
		} else { /* Gandiva: the pair's speed over each alone, above 1 */
			if (mem(s, a, x) + mem(s, j, y) > s->c->gpu_mem_gb)
				continue;
			double cyc = pair_cycle(s, a, x, j, y);
			by = (sched_time(s, a, x) + sched_time(s, j, y)) / cyc - 1.0;
		}
		if (by > gain + 1e-12) {
			gain = by;
			at = i;
			ka = x;
			kb = y;
		}
	}
	if (at < 0)
		return 0;
	cl_group *g = &s->plan[at];
	g->n = 2;
	g->sched[0] = ka;
	g->job[1] = j;
	g->sched[1] = kb;
	return 1;
}

/* fifo, gandiva, jigsaw: the running jobs stay; waiting ones start in
 * arrival order while they fit (or pack), and the first that cannot
 * blocks the rest */
static void
in_order(sim *s)
{
	plan_keep_running(s);
	if (s->c->policy == CL_JIGSAW)
		for (int i = 0; i < s->n_plan; i++)
			rechoose(s, &s->plan[i]);
	for (size_t i = 0; i < s->n_active; i++) {
		int j = s->active[i];
		if (s->js[j].st != JS_WAITING)
			continue;
		if (s->jobs[j].gpus <= s->plan_free)
			plan_add(s, j, alone_sched(s, j));
		else if (s->c->policy == CL_FIFO || !pack(s, j))
			break;
	}
}

/* ---- the preemptive ones: a fresh plan from every active job ----------- */

struct cl_keyed {
	double k1, k2;
	double arrival;
	long id;
	int j;
};
typedef struct cl_keyed keyed;

size_t
policy_scratch_size(void)
{
	return sizeof(keyed);
}

static int
cmp_keyed(const void *pa, const void *pb)
{
	const keyed *a = pa, *b = pb;
	if (a->k1 != b->k1)
		return a->k1 < b->k1 ? -1 : 1;
	if (a->k2 != b->k2)
		return a->k2 < b->k2 ? -1 : 1;
	if (a->arrival != b->arrival)
		return a->arrival < b->arrival ? -1 : 1;
	return (a->id > b->id) - (a->id < b->id);
}

static int
queue_of(const sim *s, double attained)
{
	int q = 0;
	while (q < s->c->n_thresholds && attained >= s->c->thresholds[q] - 1e-9)
		q++;
	return q;
}

static void
by_key(sim *s, keyed *ks)
{
	size_t n = 0;
	for (size_t i = 0; i < s->n_active; i++) {
		int j = s->active[i];
		const jstate *x = &s->js[j];
		keyed *k = &ks[n++];
		k->j = j;
		k->arrival = s->jobs[j].arrival;
		k->id = s->jobs[j].id;
		if (s->c->policy == CL_SRTF) { /* its remaining time alone, at full */
			k->k1 = x->remaining * sched_time(s, j, 0) * mult(s, j, 0);
			k->k2 = 0;
		} else { /* las: the queue, then arrival order within it */
			k->k1 = queue_of(s, x->attained);
			k->k2 = 0;
		}
	}
	qsort(ks, n, sizeof(*ks), cmp_keyed);
	for (size_t i = 0; i < n; i++) {
		int j = ks[i].j;
		if (s->jobs[j].gpus <= s->plan_free)
			plan_add(s, j, alone_sched(s, j));
		else if (s->c->policy == CL_SRTF)
			break; /* strict: it waits and blocks the longer ones */
		/* las backfills: the next that fits runs */
	}
}

void
policy_decide(sim *s)
{
	s->n_plan = 0;
	s->plan_free = s->c->gpus;
	switch (s->c->policy) {
	case CL_SRTF:
	case CL_LAS:
		by_key(s, s->keys);
		break;
	default:
		in_order(s);
	}
}
