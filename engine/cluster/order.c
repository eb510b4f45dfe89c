/* order.c - the policies in arrival order: fifo, and what the packers
 * (gandiva.c, jigsaw.c) add to it. The running jobs stay; a job whose
 * partner finished runs alone; the waiting ones start in arrival order
 * while they fit, and the first that cannot blocks the rest, unless a
 * packer packs it onto a lone running job with as many GPUs.
 *
 * Each group is decided and applied at once, touching only the groups
 * that change. The packing index holds the lone running jobs by (GPUs,
 * schedule), each class a heap by the order the groups started (stamp),
 * so the first of a class in start order is found without walking the
 * running jobs. */
#include <stdlib.h>

#include "cluster_impl.h"
#include "heap.h"

/* ---- the packing index ------------------------------------------------------ */

static int
lone_before(const lone_ent *a, const lone_ent *b)
{
	return a->stamp < b->stamp;
}

SL_HEAP(loneheap, lone_ent, lone_before)

int
order_pack_init(sim *s)
{
	if (policy_gpu_classes(s) < 0)
		return -1;
	int nm = 0;
	for (size_t i = 0; i < s->n_jobs; i++)
		if (s->jobs[i].model + 1 > nm)
			nm = s->jobs[i].model + 1;
	s->sbase = malloc(sizeof(int) * (size_t)(nm ? nm : 1));
	if (!s->sbase)
		return -1;
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
order_pack_free(sim *s)
{
	if (s->cls)
		for (int i = 0; i < s->n_gvals * s->n_sall; i++)
			free(s->cls[i].v);
	free(s->cls);
	free(s->reps);
	free(s->sbase);
}

/* running job j, alone from now, joins its class */
static void
lone_enter(sim *s, int j)
{
	if (!s->cls)
		return;
	jstate *x = &s->js[j];
	int cl = x->gcls * s->n_sall + s->sbase[s->jobs[j].model] + x->sched;
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

/* pack waiting job j onto a lone running job with as many GPUs, where it
 * gains the most, the first in start order among equals (each class's
 * first stands for it: its members gain the same); 1 when packed */
static int
pack(sim *s, int j, pack_gain_fn gain_of)
{
	int base = s->js[j].gcls * s->n_sall, nr = 0;
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
		int a = s->reps[r].j, x = 0, y = 0;
		double by = gain_of(s, a, j, &x, &y);
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

/* ---- the decision ------------------------------------------------------------ */

int
order_decide(sim *s, pack_gain_fn gain)
{
	s->n_back = 0;
	for (size_t i = 0; i < s->n_again; i++) {
		int j = s->again[i];
		jstate *x = &s->js[j];
		if (x->st != JS_RUNNING || x->partner >= 0 || !x->alone_again)
			continue;
		cl_group g = {1, {j, -1}, {s->pol->best_alone ? alone_sched(s, j) : x->sched, -1}};
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
		} else if (!gain || !pack(s, j, gain)) {
			put_back(s, &e);
			break;
		}
	}
	put_back_all(s);
	return 0;
}

/* ---- fifo: arrival order, non-preemptive, the head blocks --------------------- */

static int
fifo_decide(sim *s)
{
	return order_decide(s, NULL);
}

const cl_policy_ops cl_fifo = {
	.name = "fifo",
	.decide = fifo_decide,
};
