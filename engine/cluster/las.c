/* las.c - least attained service (Tiresias-style), decided incrementally.
 *
 * las ranks every job, running or waiting, by (queue, arrival, id), the
 * queue the number of thresholds its attained GPU-seconds have crossed,
 * and runs them greedily in that order: a job runs when the ones before it
 * leave it room, and is passed over when they do not (backfill). Ranking
 * every running job at every event costs O(running); at 100,000 jobs on
 * 10,000 GPUs that was most of a two-minute run. Here the same plan is
 * found in time that grows with what changes:
 *
 *  - A job's key is a position, queue * n_jobs + arrival rank. The running
 *    jobs' GPUs sit in one Fenwick tree over positions, so the GPUs ahead
 *    of any key are a prefix sum, the first running job the greedy cannot
 *    keep is a descent (the first whose running prefix exceeds what the
 *    waiting jobs taken leave), and the next running job after a key is
 *    one too. A running job's key changes only when it crosses a threshold
 *    (an event), where it moves in the tree.
 *  - The waiting jobs sit in one heap per GPU count. Along the greedy the
 *    room left only shrinks, so once a count's first job finds no room, no
 *    later job of that count will: the count is done for this decision.
 *
 * So a decision visits the waiting jobs it starts, one per GPU count it
 * passes over, and the running jobs from the first that must give way
 * (those it preempts, and fewer than that job's GPUs it keeps). */
#include <stdlib.h>
#include <string.h>

#include "cluster_impl.h"
#include "heap.h"

SL_HEAP(lasheap, wq_ent, wq_before)

/* the queue of a job that has attained a GPU-seconds */
static int
las_queue(const sim *s, double attained)
{
	int q = 0;
	while (q < s->c->n_thresholds && cl_crossed(attained, s->c->thresholds[q]))
		q++;
	return q;
}

/* a job's key: its queue, as of its service now */
static double
las_key(const sim *s, int j)
{
	return las_queue(s, s->js[j].attained);
}

static int
las_verifies(const cl_config *c)
{
	(void)c;
	return 1;
}

static int
las_init(sim *s)
{
	if (policy_gpu_classes(s) < 0)
		return -1;
	size_t n = s->n_jobs ? s->n_jobs : 1;
	s->take = malloc(sizeof(int) * n); /* a decision's starts, preemptions */
	s->pre = malloc(sizeof(int) * n);
	if (!s->take || !s->pre)
		return -1;
	s->n_pos = n * (size_t)(s->c->n_thresholds + 1);
	s->fen = calloc(s->n_pos, sizeof(int));
	s->wqs = calloc((size_t)(s->n_gvals ? s->n_gvals : 1), sizeof(*s->wqs));
	s->dead = malloc((size_t)(s->n_gvals ? s->n_gvals : 1));
	if (s->c->verify && !(s->chk = malloc(sizeof(size_t) * n)))
		return -1;
	return s->fen && s->wqs && s->dead ? 0 : -1;
}

static void
las_free(sim *s)
{
	if (s->wqs)
		for (int i = 0; i < s->n_gvals; i++)
			free(s->wqs[i].v);
	free(s->wqs);
	free(s->fen);
	free(s->dead);
	free(s->chk);
}

/* ---- the running jobs' GPUs by position ----------------------------------- */

static void
fen_add(sim *s, size_t pos, int d)
{
	for (size_t i = pos + 1; i <= s->n_pos; i += i & -i)
		s->fen[i - 1] += d;
}

/* the running GPUs at positions below pos */
static int
fen_sum(const sim *s, size_t pos)
{
	int t = 0;
	for (size_t i = pos; i > 0; i -= i & -i)
		t += s->fen[i - 1];
	return t;
}

/* the first position whose running GPUs up to it, itself included, exceed
 * t; n_pos when none */
static size_t
fen_find(const sim *s, int t)
{
	size_t p = 0, step = 1;
	while (step * 2 <= s->n_pos)
		step *= 2;
	for (; step; step /= 2)
		if (p + step <= s->n_pos && s->fen[p + step - 1] <= t) {
			p += step;
			t -= s->fen[p - 1];
		}
	return p;
}

/* the running job after position pos, n_pos when none */
static size_t
next_running(const sim *s, size_t pos)
{
	return fen_find(s, fen_sum(s, pos + 1));
}

static size_t
run_pos(const sim *s, int j)
{
	return (size_t)s->js[j].fq * s->n_jobs + (size_t)s->js[j].rank;
}

/* running job j: started (from waiting), stopped (done, preempted), its
 * key risen (a threshold crossed, j settled) */
static void
las_enter(sim *s, int j)
{
	jstate *x = &s->js[j];
	x->fq = las_queue(s, x->attained);
	fen_add(s, run_pos(s, j), s->jobs[j].gpus);
	s->run_gpus += s->jobs[j].gpus;
}

static void
las_leave(sim *s, int j)
{
	jstate *x = &s->js[j];
	if (x->fq < 0)
		return;
	fen_add(s, run_pos(s, j), -s->jobs[j].gpus);
	s->run_gpus -= s->jobs[j].gpus;
	x->fq = -1;
}

static void
las_crossed(sim *s, int j)
{
	las_leave(s, j);
	las_enter(s, j);
}

/* ---- the waiting jobs, a heap per GPU count -------------------------------- */

static void
las_wait_push(sim *s, wq_ent e)
{
	wq_heap *h = &s->wqs[s->js[e.j].gcls];
	if (lasheap_push(&h->v, &h->n, &h->cap, e) < 0)
		s->failed = 1;
}

/* the first waiting job in key order among the GPU counts still open,
 * NULL when none; *cls receives its count */
static const wq_ent *
first_open(sim *s, int *cls)
{
	const wq_ent *best = NULL;
	for (int c = 0; c < s->n_gvals; c++) {
		if (s->dead[c])
			continue;
		wq_heap *h = &s->wqs[c];
		while (h->n) { /* a stale entry: the job left the queue */
			const jstate *x = &s->js[h->v[0].j];
			if (x->st == JS_WAITING && x->gen == h->v[0].gen)
				break;
			lasheap_pop(h->v, &h->n);
		}
		if (h->n && (!best || wq_before(&h->v[0], best))) {
			best = &h->v[0];
			*cls = c;
		}
	}
	return best;
}

static size_t
wait_pos(const sim *s, const wq_ent *e)
{
	return (size_t)e->k1 * s->n_jobs + (size_t)s->js[e->j].rank;
}

/* ---- the decision ------------------------------------------------------------ */

/* from position r, the first running job the greedy cannot keep (room is
 * the room left before it), to the end: the running jobs it keeps while
 * room lasts, the waiting ones it takes, the rest preempted */
static void
give_way(sim *s, size_t r, int room)
{
	s->pre[s->n_pre++] = (int)s->order[r % s->n_jobs];
	size_t cur = r;
	while (room > 0) {
		size_t nx = next_running(s, cur);
		int c = 0;
		const wq_ent *e = first_open(s, &c);
		size_t ep = e ? wait_pos(s, e) : s->n_pos;
		if (nx == s->n_pos && !e)
			return;
		if (nx < ep) {
			int j = s->order[nx % s->n_jobs], g = s->jobs[j].gpus;
			if (g <= room)
				room -= g;
			else
				s->pre[s->n_pre++] = j;
			cur = nx;
		} else if (s->jobs[e->j].gpus <= room) {
			room -= s->jobs[e->j].gpus;
			s->take[s->n_take++] = e->j;
			lasheap_pop(s->wqs[c].v, &s->wqs[c].n);
		} else {
			s->dead[c] = 1;
		}
	}
	/* no room left: every running job after cur gives way */
	for (size_t nx = next_running(s, cur); nx < s->n_pos; nx = next_running(s, nx))
		s->pre[s->n_pre++] = s->order[nx % s->n_jobs];
}

/* cl_config.verify: this decision against the plain greedy over every
 * job in key order, the keys from each job's service as of now; the
 * first job they disagree on stops the simulation (s->failed) */
static int
cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	return (x > y) - (x < y);
}

static void
verify(sim *s)
{
	size_t n = 0, *v = s->chk;
	for (size_t j = 0; j < s->n_jobs; j++) {
		const jstate *x = &s->js[j];
		if (x->st != JS_RUNNING && x->st != JS_WAITING)
			continue;
		double a = x->attained;
		if (x->st == JS_RUNNING)
			a += s->jobs[j].gpus * (s->t - x->t_set);
		int q = las_queue(s, a);
		if (x->st == JS_RUNNING && q != x->fq) {
			s->failed = 2;
			s->bad_job = (int)j;
			return;
		}
		v[n++] = (size_t)q * s->n_jobs + (size_t)x->rank;
	}
	qsort(v, n, sizeof(size_t), cmp_size);
	int room = s->c->gpus;
	for (size_t i = 0; i < n && room > 0; i++) {
		int j = s->order[v[i] % s->n_jobs], g = s->jobs[j].gpus;
		int runs = s->js[j].st == JS_RUNNING, greedy = g <= room;
		for (size_t k = 0; k < s->n_pre; k++)
			runs &= s->pre[k] != j;
		for (size_t k = 0; k < s->n_take; k++)
			runs |= s->take[k] == j;
		if (greedy)
			room -= g;
		if (runs != greedy) {
			s->failed = 2;
			s->bad_job = j;
			return;
		}
	}
}

static int
las_decide(sim *s)
{
	const int total = s->c->gpus;
	int extra = 0; /* the GPUs of the waiting jobs taken */
	s->n_take = s->n_pre = 0;
	memset(s->dead, 0, (size_t)s->n_gvals);
	for (;;) {
		int c = 0;
		const wq_ent *e = first_open(s, &c);
		size_t ep = e ? wait_pos(s, e) : s->n_pos;
		/* every running job ahead of e is kept; is one before it
		 * squeezed out by the ones taken? */
		if (s->run_gpus + extra > total) {
			size_t r = fen_find(s, total - extra);
			if (r < ep) {
				give_way(s, r, total - extra - fen_sum(s, r));
				break;
			}
		}
		if (!e)
			break;
		int g = s->jobs[e->j].gpus;
		if (g <= total - extra - fen_sum(s, ep)) {
			extra += g;
			s->take[s->n_take++] = e->j;
			lasheap_pop(s->wqs[c].v, &s->wqs[c].n);
		} else {
			s->dead[c] = 1; /* no room, nor for any later of its count */
		}
	}
	if (s->c->verify)
		verify(s);
	for (size_t i = 0; i < s->n_pre; i++)
		las_leave(s, s->pre[i]); /* out of the tree before they wait */
	preempt_and_start(s);
	return 0;
}

const cl_policy_ops cl_las = {
	.name = "las",
	.thresholds = 1,
	.verifies = las_verifies,
	.init = las_init,
	.free = las_free,
	.key = las_key,
	.wait_push = las_wait_push,
	.decide = las_decide,
	.started = las_enter,
	.finished = las_leave,
	.crossed = las_crossed,
};
