/* team.c - fork-join team with work claiming.
 *
 * A call splits into n parts (n = team size). The caller and the members
 * claim parts from one atomic word that holds (generation, next part), so
 * each part runs exactly once, by whoever gets to it first. When a member
 * is slow to wake or was descheduled (another process on the core), the
 * caller simply runs its parts too, and waits only for parts a member has
 * actually started: the team degrades to one thread's speed, never below.
 * Idle members spin briefly for the next call, then sleep. */
#include "team.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "sl.h"

/* How long an idle member spins before sleeping: longer than the gap
 * between one worker's steps (its push, the server's update, the next
 * batch), so the members are awake when the next step starts. At 200 us
 * they had gone to sleep, and a futex wake began most steps: asgd with one
 * worker on the MLP measured 96.5k samples/s then, 106k with 2 ms. */
#define TEAM_SPIN_S 2e-3

struct team {
	int n;
	int solo;          /* team_set_active(t, 1): run inline */
	pthread_t *th;
	team_fn fn;        /* valid while the current generation has parts */
	void *arg;
	atomic_uint_fast64_t claim; /* generation << 32 | next part */
	atomic_int pending;         /* parts of this generation not finished */
	atomic_int sleepers;
	atomic_int stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

struct member {
	team *t;
	int tid;
};

static inline void
cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* claim and run parts of generation gen until none is left */
static void
work(team *t, uint64_t gen)
{
	for (;;) {
		uint64_t c = atomic_load_explicit(&t->claim, memory_order_acquire);
		if ((c >> 32) != gen || (int)(c & 0xffffffffu) >= t->n)
			return;
		if (!atomic_compare_exchange_weak_explicit(
			    &t->claim, &c, c + 1, memory_order_acq_rel,
			    memory_order_relaxed))
			continue;
		/* fn and arg stay put until every part of gen is done */
		t->fn(t->arg, (int)(c & 0xffffffffu), t->n);
		atomic_fetch_sub_explicit(&t->pending, 1, memory_order_release);
	}
}

static void *
member_main(void *p)
{
	struct member m = *(struct member *)p;
	free(p);
	team *t = m.t;
	uint64_t seen = 0;
	for (;;) {
		uint64_t g;
		double t0 = 0;
		int spins = 0;
		while ((g = atomic_load(&t->claim) >> 32) == seen) {
			if (atomic_load(&t->stop))
				return NULL;
			if (++spins & 255) {
				cpu_relax();
				continue;
			}
			double now = sl_now();
			if (t0 == 0)
				t0 = now;
			if (now - t0 < TEAM_SPIN_S)
				continue;
			pthread_mutex_lock(&t->mu);
			atomic_fetch_add(&t->sleepers, 1);
			while (atomic_load(&t->claim) >> 32 == seen && !atomic_load(&t->stop))
				pthread_cond_wait(&t->cv, &t->mu);
			atomic_fetch_sub(&t->sleepers, 1);
			pthread_mutex_unlock(&t->mu);
		}
		seen = g;
		work(t, g);
	}
}

static void
wake(team *t)
{
	if (atomic_load(&t->sleepers)) {
		pthread_mutex_lock(&t->mu);
		pthread_cond_broadcast(&t->cv);
		pthread_mutex_unlock(&t->mu);
	}
}

int
team_new(int nthreads, team **out)
{
	*out = NULL;
	if (nthreads < 1 || nthreads > 256)
		return -SL_EINVAL;
	team *t = calloc(1, sizeof(*t));
	if (!t)
		return -SL_ENOMEM;
	t->n = nthreads;
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cv, NULL);
	if (nthreads > 1) {
		t->th = calloc((size_t)nthreads, sizeof(*t->th));
		if (!t->th) {
			team_free(t);
			return -SL_ENOMEM;
		}
		for (int i = 1; i < nthreads; i++) {
			struct member *m = malloc(sizeof(*m));
			if (m) {
				m->t = t;
				m->tid = i;
			}
			if (!m || pthread_create(&t->th[i], NULL, member_main, m)) {
				free(m);
				t->n = i; /* members 1..i-1 exist */
				team_free(t);
				return -SL_ENOMEM;
			}
		}
	}
	*out = t;
	return 0;
}

void
team_run(team *t, team_fn fn, void *arg)
{
	if (t->n == 1 || t->solo) {
		fn(arg, 0, 1);
		return;
	}
	uint64_t gen = (atomic_load(&t->claim) >> 32) + 1;
	t->fn = fn;
	t->arg = arg;
	atomic_store_explicit(&t->pending, t->n, memory_order_relaxed);
	atomic_store_explicit(&t->claim, gen << 32, memory_order_seq_cst);
	wake(t);
	work(t, gen);
	/* only parts a member has started remain: spin briefly, then yield */
	for (int spins = 0;
	     atomic_load_explicit(&t->pending, memory_order_acquire); spins++) {
		if (spins < 2000)
			cpu_relax();
		else
			sched_yield();
	}
}

void
team_set_active(team *t, int n)
{
	t->solo = n == 1;
}

int
team_size(const team *t)
{
	return t->solo ? 1 : t->n;
}

void
team_free(team *t)
{
	if (!t)
		return;
	if (t->th) {
		atomic_store(&t->stop, 1);
		pthread_mutex_lock(&t->mu);
		pthread_cond_broadcast(&t->cv);
		pthread_mutex_unlock(&t->mu);
		for (int i = 1; i < t->n; i++)
			pthread_join(t->th[i], NULL);
		free(t->th);
	}
	pthread_mutex_destroy(&t->mu);
	pthread_cond_destroy(&t->cv);
	free(t);
}
