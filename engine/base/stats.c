/* stats.c - staleness histogram arithmetic. */
#include "stats.h"

void
stale_add(stale_hist *h, uint64_t tau)
{
	h->b[tau < STALE_BUCKETS - 1 ? tau : STALE_BUCKETS - 1]++;
	h->n++;
	h->sum += (double)tau;
	if (tau > h->max)
		h->max = tau;
}

double
stale_quantile(const stale_hist *h, double q)
{
	if (!h->n)
		return 0.0;
	/* smallest bucket whose cumulative count reaches ceil(q n) */
	uint64_t want = (uint64_t)(q * (double)h->n);
	if ((double)want < q * (double)h->n)
		want++;
	if (want < 1)
		want = 1;
	uint64_t c = 0;
	for (int i = 0; i < STALE_BUCKETS; i++) {
		c += h->b[i];
		if (c >= want)
			return (double)i;
	}
	return (double)(STALE_BUCKETS - 1);
}

double
stale_mean(const stale_hist *h)
{
	return h->n ? h->sum / (double)h->n : 0.0;
}

void
age_add(age_hist *h, double ms)
{
	if (!(ms >= 0))
		ms = 0;
	int k = 0;
	for (double edge = 1.0; k < AGE_BUCKETS - 1 && ms >= edge; edge *= 2)
		k++;
	h->b[k]++;
	h->n++;
	h->sum_ms += ms;
	if (ms > h->max_ms)
		h->max_ms = ms;
}

double
age_mean(const age_hist *h)
{
	return h->n ? h->sum_ms / (double)h->n : 0.0;
}

double
age_quantile(const age_hist *h, double q)
{
	if (!h->n)
		return 0.0;
	double want = q * (double)h->n;
	uint64_t c = 0;
	double edge = 1.0;
	for (int k = 0; k < AGE_BUCKETS; k++, edge *= 2) {
		c += h->b[k];
		if ((double)c >= want)
			return edge < h->max_ms ? edge : h->max_ms;
	}
	return h->max_ms;
}

void
rate_reset(rate_win *rw, double t, double x)
{
	rw->pos = rw->n = 0;
	rate_mark(rw, t, x);
}

void
rate_mark(rate_win *rw, double t, double x)
{
	if (!rw->n || x != rw->x_last) {
		rw->t_last = t;
		rw->x_last = x;
	}
	if (rw->n) {
		int last = (rw->pos - 1 + RATE_N) % RATE_N;
		if (t - rw->t[last] < RATE_EVERY_S)
			return;
	}
	rw->t[rw->pos] = t;
	rw->x[rw->pos] = x;
	rw->pos = (rw->pos + 1) % RATE_N;
	if (rw->n < RATE_N)
		rw->n++;
}

double
rate_now(const rate_win *rw, double t, double x, double window)
{
	if (!rw->n || t - rw->t_last >= window)
		return 0;
	/* newest first: stop at the first mark at least `window` old */
	int j = rw->pos;
	for (int i = 0; i < rw->n; i++) {
		j = (rw->pos - 1 - i + RATE_N) % RATE_N;
		if (t - rw->t[j] >= window)
			break;
	}
	double dt = t - rw->t[j];
	return dt > 0 ? (x - rw->x[j]) / dt : 0;
}
