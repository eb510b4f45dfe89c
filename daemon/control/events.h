/* events.h - the daemon's event ring: change, eval, run, end, caption and
 * checkpoint events as JSON texts with sequence numbers, published by the
 * run's callbacks and read by any number of streams (SSE now, the bus
 * later). A slow reader never holds up the publisher: the ring keeps the
 * last EVENTS_N events and a reader that fell behind skips what was
 * overwritten. */
#ifndef SL_EVENTS_H
#define SL_EVENTS_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#define EVENTS_N 256

typedef struct events {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t seq; /* number of events ever published */
	char *ev[EVENTS_N];
	char name[EVENTS_N][16];
	int closing;
} events;

void events_init(events *h);
void events_free(events *h);

/* Publish data (not consumed) as event `name`. */
void events_publish(events *h, const char *name, const json_t *data);

/* The sequence number a new reader starts from (only what comes next). */
uint64_t events_now(events *h);

/* Wait until an event after *seq is there, the monotonic time `until`
 * (sl_now()) has passed, or the ring closes; then hand each pending event
 * to put(ud, name, data) in order and advance *seq. Returns 1 once closing,
 * else 0. */
int events_wait(events *h, uint64_t *seq, double until,
		void (*put)(void *ud, const char *name, const char *data),
		void *ud);

/* Sleep up to seconds unless the ring closes; 1 if closing. */
int events_sleep(events *h, double seconds);

/* Wake every waiter for good (shutdown). */
void events_close(events *h);

#endif
