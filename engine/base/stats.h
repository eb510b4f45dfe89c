/* stats.h - staleness histograms: buckets 0..63 plus overflow, with the
 * exact count, sum and max kept beside them so the mean is exact. */
#ifndef SL_STATS_H
#define SL_STATS_H

#include <stdint.h>

#define STALE_BUCKETS 65 /* 0..63 and one overflow bucket */

typedef struct stale_hist {
	uint64_t b[STALE_BUCKETS];
	uint64_t n;
	double sum;
	uint64_t max;
} stale_hist;

void stale_add(stale_hist *h, uint64_t tau);

/* Time-staleness: age of a gradient (ms from the read of its weights to
 * its application) in power-of-two buckets: [0,1), [1,2), [2,4), ... */
#define AGE_BUCKETS 24
typedef struct age_hist {
	uint64_t b[AGE_BUCKETS];
	uint64_t n;
	double sum_ms, max_ms;
} age_hist;

void age_add(age_hist *h, double ms);
double age_mean(const age_hist *h);
/* upper edge of the bucket holding quantile q (ms) */
double age_quantile(const age_hist *h, double q);
/* Quantile q in [0,1] by bucket (the overflow bucket reads as 64). */
double stale_quantile(const stale_hist *h, double q);
double stale_mean(const stale_hist *h);

/* A current rate: a counter x marked against time t (run seconds) at most
 * every RATE_EVERY_S, the last RATE_N marks kept; the rate over the last
 * `window` seconds is read against the newest mark at least that old (the
 * oldest kept when none is). A counter that stops moving reads falling
 * to 0 as the window passes, where a run-long average hides a stall. */
#define RATE_N 64
#define RATE_EVERY_S 0.25
typedef struct rate_win {
	double t[RATE_N], x[RATE_N];
	int pos, n;
	double t_last, x_last; /* when x last moved (marked or not), to what */
} rate_win;

/* forget every mark, then mark (t, x) */
void rate_reset(rate_win *rw, double t, double x);
void rate_mark(rate_win *rw, double t, double x);
/* (x - x_m) / (t - t_m) against the mark described above; 0 with none,
 * and 0 once x has not moved for a whole window */
double rate_now(const rate_win *rw, double t, double x, double window);

#endif
