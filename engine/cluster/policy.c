/* policy.c - the scheduling policies of `stalelab cluster`: each turns the
 * cluster's state into a plan, the jobs that run from now (alone or two to
 * a set of GPUs) and each one's partial-backprop schedule. sim.c applies
 * the plan: a running job left out is preempted, a new one starts. */
#include <stdlib.h>
#include <string.h>

#include "cluster_impl.h"
#include "heap.h"

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
int
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
	s->js[j].planned = 1;
}

/* ---- the waiting heap --------------------------------------------------- */

/* the policy's key of job j as it is now: srtf its remaining time alone at
 * full backprop, las its queue, fifo and the packers none (arrival order) */
static double
key_of(const sim *s, int j)
{
	if (s->c->policy == CL_SRTF)
		return s->js[j].remaining * sched_time(s, j, 0) * mult(s, j, 0);
	if (s->c->policy == CL_LAS)
		return las_queue(s, s->js[j].attained);
	return 0;
}

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
	wq_ent e = {key_of(s, j), s->jobs[j].arrival, s->jobs[j].id, j, x->gen};
	if (s->c->policy == CL_LAS)
		las_wait_push(s, e);
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

/* looked at and not started: back in once the plan is made */
static void
put_back(sim *s, const wq_ent *e)
{
	s->back[s->n_back++] = *e;
}

/* ---- the decisions ----------------------------------------------------- */

/* ---- fifo, gandiva, jigsaw: the packing index ---------------------------- */

static int
lone_before(const lone_ent *a, const lone_ent *b)
{
	return a->stamp < b->stamp;
}

SL_HEAP(loneheap, lone_ent, lone_before)

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
policy_init(sim *s)
{
	const int las = s->c->policy == CL_LAS;
	if (las || srtf_fast(s->c)) { /* a decision's preemptions and starts */
		size_t n = s->n_jobs ? s->n_jobs : 1;
		s->take = malloc(sizeof(int) * n);
		s->pre = malloc(sizeof(int) * n);
		if (!s->take || !s->pre)
			return -1;
	}
	if (s->c->policy == CL_SRTF)
		return srtf_init(s);
	if (s->c->policy != CL_GANDIVA && s->c->policy != CL_JIGSAW && !las)
		return 0; /* fifo never packs */
	size_t n = s->n_jobs ? s->n_jobs : 1;
	int nm = 0;
	for (size_t i = 0; i < s->n_jobs; i++)
		if (s->jobs[i].model + 1 > nm)
			nm = s->jobs[i].model + 1;
	s->gvals = malloc(sizeof(int) * n);
	s->sbase = malloc(sizeof(int) * (size_t)(nm ? nm : 1));
	if (!s->gvals || !s->sbase)
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
	if (las)
		return las_init(s);
	s->n_sall = 0;
	for (int m = 0; m < nm; m++) {
		s->sbase[m] = s->n_sall;
		s->n_sall += s->models[m].n_sched;
	}
	s->cls = calloc((size_t)(s->n_gvals ? s->n_gvals : 1) * (size_t)(s->n_sall ? s->n_sall : 1),
			sizeof(lone_heap));
	s->reps = malloc(sizeof(lone_ent) * (size_t)(s->n_sall ? s->n_sall : 1));
	return s->cls && s->reps ? 0 : -1;
}

void
policy_free(sim *s)
{
	if (s->cls)
		for (int i = 0; i < s->n_gvals * s->n_sall; i++)
			free(s->cls[i].v);
	free(s->cls);
	free(s->reps);
	free(s->gvals);
	free(s->sbase);
	las_free(s);
	srtf_free(s);
	free(s->take);
	free(s->pre);
}

/* running job j, alone from now, joins its class */
static void
lone_enter(sim *s, int j)
{
	if (!s->cls)
		return;
	jstate *x = &s->js[j];
	int cl = gval_at(s, s->jobs[j].gpus) * s->n_sall + s->sbase[s->jobs[j].model] + x->sched;
	x->lone_cls = cl;
	x->lone_ver++;
	lone_heap *h = &s->cls[cl];
	if (loneheap_push(&h->v, &h->n, &h->cap, (lone_ent){x->stamp, j, x->lone_ver}) < 0)
		s->failed = 1;
}

static int
lone_live(const sim *s, const lone_ent *e, int cl)
{
	const jstate *x = &s->js[e->j];
	return x->st == JS_RUNNING && x->partner < 0 && x->lone_cls == cl && x->lone_ver == e->ver;
}

/* gandiva, jigsaw: pack waiting job j onto a lone running job with as
 * many GPUs, where it gains the most, the first in start order among
 * equals (each class's first stands for it: its members gain the same);
 * 1 when packed */
static int
pack(sim *s, int j)
{
	const int jig = s->c->policy == CL_JIGSAW;
	int base = gval_at(s, s->jobs[j].gpus) * s->n_sall, nr = 0;
	for (int k = 0; k < s->n_sall; k++) {
		lone_heap *h = &s->cls[base + k];
		while (h->n && !lone_live(s, &h->v[0], base + k))
			loneheap_pop(h->v, &h->n);
		if (h->n) { /* in stamp order among the classes' firsts */
			int at = nr++;
			while (at && s->reps[at - 1].stamp > h->v[0].stamp) {
				s->reps[at] = s->reps[at - 1];
				at--;
			}
			s->reps[at] = h->v[0];
		}
	}
	int host = -1, ka = 0, kb = 0;
	double gain = 0;
	for (int r = 0; r < nr; r++) {
		int a = s->reps[r].j;
		int x = s->js[a].sched, y = alone_sched(s, j);
		double by;
		if (jig) { /* summed goodput: packed, against a alone */
			double gp = pair_best(s, a, j, 1, &x, &y);
			if (gp <= 0)
				continue;
			by = gp - goodput_alone(s, a, s->js[a].sched);
		} else { /* Gandiva: the pair's speed over each alone, above 1 */
			if (mem(s, a, x) + mem(s, j, y) > s->c->gpu_mem_gb)
				continue;
			double cyc = pair_cycle(s, a, x, j, y);
			by = (sched_time(s, a, x) + sched_time(s, j, y)) / cyc - 1.0;
		}
		if (by > gain + 1e-12) {
			gain = by;
			host = a;
			ka = x;
			kb = y;
		}
	}
	if (host < 0)
		return 0;
	s->js[host].lone_cls = -1;
	s->js[j].stamp = s->js[host].stamp;
	cl_group g = {2, {host, j}, {ka, kb}};
	group_apply(s, &g);
	run_add(s, j);
	return 1;
}

/* fifo, gandiva, jigsaw: the running jobs stay; a job whose partner
 * finished runs alone (jigsaw: under its best schedule alone); waiting
 * ones start in arrival order while they fit (or pack), and the first
 * that cannot blocks the rest */
static void
in_order(sim *s)
{
	for (size_t i = 0; i < s->n_again; i++) {
		int j = s->again[i];
		jstate *x = &s->js[j];
		if (x->st != JS_RUNNING || x->partner >= 0 || !x->alone_again)
			continue;
		cl_group g = {1, {j, -1}, {s->c->policy == CL_JIGSAW ? alone_sched(s, j) : x->sched, -1}};
		group_apply(s, &g);
		lone_enter(s, j);
	}
	s->n_again = 0;
	wq_ent e;
	while (wait_next(s, &e)) {
		int j = e.j;
		if (s->jobs[j].gpus <= s->free_gpus) {
			cl_group g = {1, {j, -1}, {alone_sched(s, j), -1}};
			s->js[j].stamp = s->next_stamp++;
			group_apply(s, &g);
			run_add(s, j);
			s->free_gpus -= s->jobs[j].gpus;
			lone_enter(s, j);
		} else if (!s->cls || !pack(s, j)) {
			put_back(s, &e);
			break;
		}
	}
}

/* srtf: a fresh plan in key order from the running jobs (sorted now:
 * their keys move as they run) and the waiting ones (the heap), merged,
 * up to the first that does not fit: it waits and blocks the longer
 * ones */
static void
by_key(sim *s)
{
	s->has_bound = 0;
	/* the running jobs' keys, sorted by insertion: nearly in order already */
	size_t nr = s->n_run;
	for (size_t i = 0; i < nr; i++) {
		wq_ent r = {key_of(s, s->run[i]), s->jobs[s->run[i]].arrival,
			    s->jobs[s->run[i]].id, s->run[i], 0};
		size_t k = i;
		while (k && wq_before(&r, &s->back[k - 1])) {
			s->back[k] = s->back[k - 1];
			k--;
		}
		s->back[k] = r;
	}
	/* the sorted running jobs sit at the top of back[], above room for
	 * the waiting one looked at */
	wq_ent *run = s->back + s->n_jobs;
	memcpy(run, s->back, sizeof(wq_ent) * nr);
	size_t i = 0;
	wq_ent e;
	int have = wait_next(s, &e);
	while ((i < nr || have) && s->plan_free > 0) {
		int from_run = i < nr && (!have || !wq_before(&e, &run[i]));
		const wq_ent *x = from_run ? &run[i] : &e;
		if (s->jobs[x->j].gpus > s->plan_free)
			break;
		plan_add(s, x->j, alone_sched(s, x->j));
		s->bound = *x; /* the last running, in key order */
		s->has_bound = 1;
		if (from_run)
			i++;
		else
			have = wait_next(s, &e);
	}
	if (have)
		put_back(s, &e);
}

/* srtf: the plan when every waiting job ahead of the bound fits in the
 * free GPUs. The full ranking would keep every running job (with those
 * waiting ones, they need no more than the cluster), start the ones
 * ahead, then go on through the waiting jobs in key order as in_order
 * does, up to the first that does not fit. 1 when done so; 0 (nothing
 * changed): rank everything. */
static int
by_key_fast(sim *s)
{
	size_t n_ahead = 0;
	int need = 0, have;
	wq_ent e;
	for (;;) {
		have = wait_next(s, &e);
		if (!have || !s->has_bound || !wq_before(&e, &s->bound))
			break;
		put_back(s, &e); /* back[] holds them for now */
		n_ahead++;
		need += s->jobs[e.j].gpus;
		if (need > s->free_gpus)
			return 0; /* the caller puts back[] back */
	}
	/* the ones ahead start; then the rest in key order while they fit */
	for (size_t i = 0; i < n_ahead; i++) {
		int j = s->back[i].j;
		cl_group g = {1, {j, -1}, {alone_sched(s, j), -1}};
		group_apply(s, &g);
		run_add(s, j);
		s->free_gpus -= s->jobs[j].gpus;
	}
	s->n_back = 0;
	while (have && s->jobs[e.j].gpus <= s->free_gpus) {
		cl_group g = {1, {e.j, -1}, {alone_sched(s, e.j), -1}};
		group_apply(s, &g);
		run_add(s, e.j);
		s->free_gpus -= s->jobs[e.j].gpus;
		if (!s->has_bound || wq_before(&s->bound, &e))
			s->bound = e;
		s->has_bound = 1;
		have = wait_next(s, &e);
	}
	if (have)
		put_back(s, &e);
	return 1;
}

int
policy_decide(sim *s)
{
	s->n_back = 0;
	if (s->c->policy == CL_LAS) {
		las_decide(s);
		return 0;
	}
	if (s->tn) {
		srtf_decide(s);
		return 0;
	}
	if (s->c->policy != CL_SRTF) {
		in_order(s);
		for (size_t i = 0; i < s->n_back; i++)
			heap_push(s, s->back[i]);
		return 0;
	}
	if (by_key_fast(s)) {
		for (size_t i = 0; i < s->n_back; i++)
			heap_push(s, s->back[i]);
		return 0;
	}
	for (size_t i = 0; i < s->n_back; i++)
		heap_push(s, s->back[i]);
	s->n_back = 0;
	/* every running job's key as of now */
	for (size_t i = 0; i < s->n_run; i++)
		settle(s, s->run[i]);
	s->n_plan = 0;
	s->plan_free = s->c->gpus;
	for (size_t i = 0; i < s->n_run; i++)
		s->js[s->run[i]].planned = 0;
	by_key(s);
	for (size_t i = 0; i < s->n_back; i++)
		heap_push(s, s->back[i]);
	return 1;
}
