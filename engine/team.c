/* team.c - fork-join team: generation counter, spin-then-sleep helpers. */
#include "team.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "sl.h"

#define TEAM_SPIN_S 200e-6 /* how long an idle member spins before sleeping */

struct team {
	int n;
	pthread_t *th;
	team_fn fn;
	void *arg;
	atomic_uint gen;
	atomic_int pending;
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

static void *
member_main(void *p)
{
	struct member m = *(struct member *)p;
	free(p);
	team *t = m.t;
	unsigned seen = 0;
	for (;;) {
		unsigned g;
		double t0 = 0;
		int spins = 0;
		while ((g = atomic_load(&t->gen)) == seen) {
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
			while (atomic_load(&t->gen) == seen)
				pthread_cond_wait(&t->cv, &t->mu);
			atomic_fetch_sub(&t->sleepers, 1);
			pthread_mutex_unlock(&t->mu);
		}
		seen = g;
		if (atomic_load(&t->stop))
			return NULL;
		t->fn(t->arg, m.tid, t->n);
		atomic_fetch_sub_explicit(&t->pending, 1, memory_order_release);
	}
}

static void
kick(team *t)
{
	atomic_fetch_add(&t->gen, 1);
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
		if (!t->th)
			goto fail;
		for (int i = 1; i < nthreads; i++) {
			struct member *m = malloc(sizeof(*m));
			if (!m)
				goto fail_threads;
			m->t = t;
			m->tid = i;
			if (pthread_create(&t->th[i], NULL, member_main, m)) {
				free(m);
				goto fail_threads;
			}
			continue;
		fail_threads:
			t->n = i; /* members 1..i-1 exist */
			team_free(t);
			return -SL_ENOMEM;
		}
	}
	*out = t;
	return 0;
fail:
	team_free(t);
	return -SL_ENOMEM;
}

void
team_run(team *t, team_fn fn, void *arg)
{
	if (t->n == 1) {
		fn(arg, 0, 1);
		return;
	}
	t->fn = fn;
	t->arg = arg;
	atomic_store_explicit(&t->pending, t->n - 1, memory_order_relaxed);
	kick(t);
	fn(arg, 0, t->n);
	while (atomic_load_explicit(&t->pending, memory_order_acquire))
		cpu_relax();
}

int
team_size(const team *t)
{
	return t->n;
}

void
team_free(team *t)
{
	if (!t)
		return;
	if (t->th) {
		atomic_store(&t->stop, 1);
		kick(t);
		for (int i = 1; i < t->n; i++)
			pthread_join(t->th[i], NULL);
		free(t->th);
	}
	pthread_mutex_destroy(&t->mu);
	pthread_cond_destroy(&t->cv);
	free(t);
}
