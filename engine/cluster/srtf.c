/* srtf.c - shortest remaining time first, decided incrementally.
 *
 * srtf ranks every job, running or waiting, by its remaining time alone
 * at full backprop (then arrival, then id), and runs the longest prefix of
 * that order that fits the cluster: the first job that does not fit waits,
 * and every job after it waits too (strict). Ranking every running job at
 * every event costs O(running); at 300,000 jobs on 30,000 GPUs that was a
 * minute and a half. Here the same plan is found in time that grows with
 * what changes, where the running jobs' keys all fall at one second a
 * second (full backprop, no restart pause: without --spb best and
 * --restart-s; otherwise it ranks everything, below):
 *
 *  - A running job's key at time t is c - t, c fixed while it runs, so the
 *    running jobs keep their order. They sit in a treap by (c, arrival,
 *    id) holding each subtree's GPUs. A waiting job of key k compares at
 *    time t as c = k + t.
 *  - The GPUs of the running jobs ahead of a key are a descent; so is the
 *    first running job that no longer fits once waiting jobs are taken
 *    ahead of it; the running jobs from a cut on leave by one split.
 *
 * So a decision visits the waiting jobs it starts and the one that stops
 * it, and the running jobs it preempts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_impl.h"

/* does srtf decide incrementally under c (no --spb best, no restarts)?
 * Then --verify checks its decisions. */
static int
srtf_fast(const cl_config *c)
{
	return !c->spb_best && !(c->restart_s > 0);
}

/* a job's key: its remaining time alone at full backprop */
static double
srtf_key(const sim *s, int j)
{
	return s->js[j].remaining * sched_time(s, j, 0) * sched_mult(s, j, 0);
}

static int
srtf_init(sim *s)
{
	if (!srtf_fast(s->c)) {
		s->run_in_order = 1; /* by_key keeps it so */
		return 0;
	}
	size_t n = s->n_jobs ? s->n_jobs : 1;
	s->take = malloc(sizeof(int) * n); /* a decision's starts, preemptions */
	s->pre = malloc(sizeof(int) * n);
	s->tn = malloc(sizeof(*s->tn) * n);
	s->wkey = malloc(sizeof(double) * n);
	s->troot = -1;
	if (!s->take || !s->pre || !s->tn || !s->wkey)
		return -1;
	for (size_t j = 0; j < s->n_jobs; j++) { /* a fixed priority per job */
		uint64_t z = (uint64_t)j + 0x9e3779b97f4a7c15u;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
		s->tn[j] = (tnode){.l = -1, .r = -1, .prio = (unsigned)(z ^ (z >> 31))};
	}
	return 0;
}

static void
srtf_free(sim *s)
{
	free(s->tn);
	free(s->wkey);
}

/* ---- the treap ---------------------------------------------------------- */

/* does running job a come before key (c, arrival, id)? */
static int
node_before(const sim *s, int a, double c, double arrival, long id)
{
	if (s->tn[a].c != c)
		return s->tn[a].c < c;
	if (s->jobs[a].arrival != arrival)
		return s->jobs[a].arrival < arrival;
	return s->jobs[a].id < id;
}

static void
pull(sim *s, int x)
{
	tnode *t = &s->tn[x];
	t->sum = s->jobs[x].gpus + (t->l >= 0 ? s->tn[t->l].sum : 0) + (t->r >= 0 ? s->tn[t->r].sum : 0);
}

/* split t into the nodes before key (*l) and the rest (*r) */
static void
split(sim *s, int t, double c, double arrival, long id, int *l, int *r)
{
	if (t < 0) {
		*l = *r = -1;
		return;
	}
	if (node_before(s, t, c, arrival, id)) {
		split(s, s->tn[t].r, c, arrival, id, &s->tn[t].r, r);
		*l = t;
	} else {
		split(s, s->tn[t].l, c, arrival, id, l, &s->tn[t].l);
		*r = t;
	}
	pull(s, t);
}

/* a then b, every key of a before every key of b */
static int
merge(sim *s, int a, int b)
{
	if (a < 0)
		return b;
	if (b < 0)
		return a;
	if (s->tn[a].prio > s->tn[b].prio) {
		s->tn[a].r = merge(s, s->tn[a].r, b);
		pull(s, a);
		return a;
	}
	s->tn[b].l = merge(s, a, s->tn[b].l);
	pull(s, b);
	return b;
}

static void
tree_insert(sim *s, int j)
{
	int l, r;
	split(s, s->troot, s->tn[j].c, s->jobs[j].arrival, s->jobs[j].id, &l, &r);
	s->tn[j].l = s->tn[j].r = -1;
	pull(s, j);
	s->troot = merge(s, merge(s, l, j), r);
}

/* remove j: the nodes before it, then the ones after it */
static int
erase_at(sim *s, int t, int j)
{
	if (t == j)
		return merge(s, s->tn[t].l, s->tn[t].r);
	if (node_before(s, j, s->tn[t].c, s->jobs[t].arrival, s->jobs[t].id))
		s->tn[t].l = erase_at(s, s->tn[t].l, j);
	else
		s->tn[t].r = erase_at(s, s->tn[t].r, j);
	pull(s, t);
	return t;
}

/* the running GPUs before key (c, arrival, id) */
static int
sum_before(const sim *s, double c, double arrival, long id)
{
	int t = s->troot, sum = 0;
	while (t >= 0) {
		const tnode *x = &s->tn[t];
		if (node_before(s, t, c, arrival, id)) {
			sum += s->jobs[t].gpus + (x->l >= 0 ? s->tn[x->l].sum : 0);
			t = x->r;
		} else {
			t = x->l;
		}
	}
	return sum;
}

/* the first running job whose GPUs up to it, itself included, exceed
 * room; -1 when none */
static int
first_over(const sim *s, int room)
{
	int t = s->troot;
	while (t >= 0) {
		const tnode *x = &s->tn[t];
		int left = x->l >= 0 ? s->tn[x->l].sum : 0;
		if (left > room) {
			t = x->l;
		} else if (left + s->jobs[t].gpus > room) {
			return t;
		} else {
			room -= left + s->jobs[t].gpus;
			t = x->r;
		}
	}
	return -1;
}

/* every node of t, in order, onto s->pre */
static void
collect(sim *s, int t)
{
	if (t < 0)
		return;
	collect(s, s->tn[t].l);
	s->pre[s->n_pre++] = t;
	collect(s, s->tn[t].r);
}

/* running job j: started (its key now), stopped; no-ops unless fast */
static void
srtf_enter(sim *s, int j)
{
	if (!s->tn)
		return;
	s->tn[j].c = srtf_key(s, j) + s->t;
	tree_insert(s, j);
	s->run_gpus += s->jobs[j].gpus;
}

static void
srtf_leave(sim *s, int j)
{
	if (!s->tn)
		return;
	s->troot = erase_at(s, s->troot, j);
	s->run_gpus -= s->jobs[j].gpus;
}

/* ---- the decision ----------------------------------------------------------- */

/* cl_config.verify: the plain prefix over every job in key order (the
 * same keys: c for a running job, k + t for a waiting one) against this
 * decision; the first job they disagree on stops the simulation */
typedef struct vkey {
	double c, arrival;
	long id;
	int j;
} vkey;

static int
cmp_vkey(const void *pa, const void *pb)
{
	const vkey *a = pa, *b = pb;
	if (a->c != b->c)
		return a->c < b->c ? -1 : 1;
	if (a->arrival != b->arrival)
		return a->arrival < b->arrival ? -1 : 1;
	return (a->id > b->id) - (a->id < b->id);
}

static void
verify(sim *s, const double *wkey)
{
	vkey *v = malloc(sizeof(vkey) * (s->n_jobs ? s->n_jobs : 1));
	if (!v) {
		s->failed = 1;
		return;
	}
	size_t n = 0;
	for (size_t j = 0; j < s->n_jobs; j++) {
		const jstate *x = &s->js[j];
		if (x->st == JS_RUNNING)
			v[n++] = (vkey){s->tn[j].c, s->jobs[j].arrival, s->jobs[j].id, (int)j};
		else if (x->st == JS_WAITING || x->planned) /* planned: taken now */
			v[n++] = (vkey){wkey[j] + s->t, s->jobs[j].arrival, s->jobs[j].id, (int)j};
	}
	qsort(v, n, sizeof(vkey), cmp_vkey);
	int room = s->c->gpus, open = 1;
	for (size_t i = 0; i < n; i++) {
		int j = v[i].j, g = s->jobs[j].gpus;
		open = open && g <= room;
		if (open)
			room -= g;
		int runs = s->js[j].st == JS_RUNNING || s->js[j].planned;
		for (size_t k = 0; k < s->n_pre; k++)
			runs &= s->pre[k] != j;
		if (runs != open) {
			s->failed = 2;
			s->bad_job = j;
			break;
		}
	}
	free(v);
}

/* the running jobs from key (c, arrival, id) on leave the tree for
 * s->pre: the order stops there */
static void
cut(sim *s, double c, double arrival, long id)
{
	int rest;
	size_t from = s->n_pre;
	split(s, s->troot, c, arrival, id, &s->troot, &rest);
	collect(s, rest);
	for (size_t i = from; i < s->n_pre; i++)
		s->run_gpus -= s->jobs[s->pre[i]].gpus;
}

static void
cut_at(sim *s, int r)
{
	cut(s, s->tn[r].c, s->jobs[r].arrival, s->jobs[r].id);
}

static void
fast_decide(sim *s)
{
	const int total = s->c->gpus;
	int extra = 0, have; /* the GPUs of the waiting jobs taken */
	wq_ent e;
	s->n_take = s->n_pre = 0;
	while ((have = wait_next(s, &e))) {
		double c = e.k1 + s->t;
		/* a running job before e squeezed out by the ones taken: the
		 * order stops there */
		if (s->run_gpus + extra > total) {
			int r = first_over(s, total - extra);
			if (r >= 0 && node_before(s, r, c, e.arrival, e.id)) {
				cut_at(s, r);
				break;
			}
		}
		if (sum_before(s, c, e.arrival, e.id) + extra + s->jobs[e.j].gpus > total) {
			/* e does not fit: it and everything after it waits */
			cut(s, c, e.arrival, e.id);
			break;
		}
		extra += s->jobs[e.j].gpus;
		s->take[s->n_take++] = e.j;
		s->js[e.j].planned = 1;
		s->wkey[e.j] = e.k1;
	}
	if (!have && s->run_gpus + extra > total) /* nothing waits: the tail */
		cut_at(s, first_over(s, total - extra));
	if (have)
		heap_push(s, e);
	if (s->c->verify) {
		/* the waiting jobs' keys, for the check */
		for (size_t i = 0; i < s->n_heap; i++) {
			const wq_ent *w = &s->heap[i];
			if (s->js[w->j].st == JS_WAITING && s->js[w->j].gen == w->gen)
				s->wkey[w->j] = w->k1;
		}
		verify(s, s->wkey);
	}
	for (size_t i = 0; i < s->n_take; i++)
		s->js[s->take[i]].planned = 0;
	preempt_and_start(s); /* the taken enter the tree at their keys */
}

/* ---- ranking everything: with --spb best or restarts -------------------------- */

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
		wq_ent r = {srtf_key(s, s->run[i]), s->jobs[s->run[i]].arrival,
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

static int
srtf_decide(sim *s)
{
	if (s->tn) {
		fast_decide(s);
		return 0;
	}
	s->n_back = 0;
	if (by_key_fast(s)) {
		put_back_all(s);
		return 0;
	}
	put_back_all(s);
	/* every running job's key as of now */
	for (size_t i = 0; i < s->n_run; i++)
		settle(s, s->run[i]);
	s->n_plan = 0;
	s->plan_free = s->c->gpus;
	for (size_t i = 0; i < s->n_run; i++)
		s->js[s->run[i]].planned = 0;
	by_key(s);
	put_back_all(s);
	return 1;
}

const cl_policy_ops cl_srtf = {
	.name = "srtf",
	.verifies = srtf_fast,
	.init = srtf_init,
	.free = srtf_free,
	.key = srtf_key,
	.decide = srtf_decide,
	.started = srtf_enter,
	.finished = srtf_leave,
};
