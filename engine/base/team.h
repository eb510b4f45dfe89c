/* team.h - a small fork-join thread team for one worker's step.
 *
 * team_run(t, fn, arg) calls fn(arg, tid, n) on every member (the caller is
 * tid 0) and returns when all are done. Members spin briefly between calls
 * (a training step issues dozens of sub-millisecond calls) and then sleep, so
 * an idle team costs nothing. A team of one runs fn inline with no threads.
 * Owned by a worker or a backend context; never global. */
#ifndef SL_TEAM_H
#define SL_TEAM_H

typedef void (*team_fn)(void *arg, int tid, int nthreads);
typedef struct team team;

/* nthreads >= 1. Returns 0 or -SL_ENOMEM / -SL_EINVAL. */
int team_new(int nthreads, team **out);
void team_run(team *t, team_fn fn, void *arg);
/* Threads team_run uses: 1 (run inline; the members sleep) or the whole
 * team (any other value). For a worker that shares the machine with
 * others. */
void team_set_active(team *t, int n);
int team_size(const team *t);
void team_free(team *t);

/* Split [0, n) into nt near-equal parts; part tid is [*lo, *hi). */
static inline void
team_split(long n, int tid, int nt, long *lo, long *hi)
{
	long q = n / nt, r = n % nt;
	*lo = tid * q + (tid < r ? tid : r);
	*hi = *lo + q + (tid < r ? 1 : 0);
}

#endif
