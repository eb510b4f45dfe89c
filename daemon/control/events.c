/* events.c - the event ring. */
#include "events.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jsonout.h"
#include "sl.h"

void
events_init(events *h)
{
	memset(h, 0, sizeof(*h));
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);
}

void
events_free(events *h)
{
	for (int i = 0; i < EVENTS_N; i++)
		free(h->ev[i]);
	pthread_mutex_destroy(&h->mu);
	pthread_cond_destroy(&h->cv);
}

void
events_publish(events *h, const char *name, const json_t *data)
{
	char *txt = jsonout_dumps(data);
	if (!txt)
		return;
	pthread_mutex_lock(&h->mu);
	int slot = (int)(h->seq % EVENTS_N);
	free(h->ev[slot]);
	h->ev[slot] = txt;
	snprintf(h->name[slot], sizeof(h->name[slot]), "%s", name);
	h->seq++;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

uint64_t
events_now(events *h)
{
	pthread_mutex_lock(&h->mu);
	uint64_t s = h->seq;
	pthread_mutex_unlock(&h->mu);
	return s;
}

int
events_wait(events *h, uint64_t *seq, double until,
	    void (*put)(void *ud, const char *name, const char *data), void *ud)
{
	pthread_mutex_lock(&h->mu);
	while (!h->closing && h->seq <= *seq && sl_now() < until) {
		struct timespec ts;
		sl_deadline(until - sl_now(), &ts);
		pthread_cond_timedwait(&h->cv, &h->mu, &ts);
	}
	if (h->closing) {
		pthread_mutex_unlock(&h->mu);
		return 1;
	}
	if (h->seq - *seq > EVENTS_N)
		*seq = h->seq - EVENTS_N;
	for (; *seq < h->seq; (*seq)++) {
		int slot = (int)(*seq % EVENTS_N);
		put(ud, h->name[slot], h->ev[slot]);
	}
	pthread_mutex_unlock(&h->mu);
	return 0;
}

int
events_sleep(events *h, double seconds)
{
	struct timespec ts;
	sl_deadline(seconds, &ts);
	pthread_mutex_lock(&h->mu);
	while (!h->closing &&
	       pthread_cond_timedwait(&h->cv, &h->mu, &ts) != ETIMEDOUT)
		;
	int closing = h->closing;
	pthread_mutex_unlock(&h->mu);
	return closing;
}

void
events_close(events *h)
{
	pthread_mutex_lock(&h->mu);
	h->closing = 1;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
}
