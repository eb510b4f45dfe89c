/* bus.h - the daemon's nanomsg face (docs/bus.md): a PUB socket that
 * publishes what SSE streams (the events ring in order, and a snapshot
 * every period, always: the heartbeat), and a REP socket that takes the
 * HTTP API's commands as JSON and answers through ctl_handle. Two threads;
 * this module is the only one in the daemon with nanomsg's headers. */
#ifndef SL_BUS_H
#define SL_BUS_H

#include "control.h"

typedef struct bus bus;

/* Bind PUB at pub_url and REP at rep_url (NULL: pub_url's sibling, see
 * bus_sibling) and start publishing hz snapshots a second and answering.
 * token (NULL: none; borrowed) guards changes, as HTTP's does. 0 with *out
 * set, or <0 with err (SL_ERR_LEN) naming the flag: -SL_ESTATE when an
 * address is taken (another daemon?), -SL_EINVAL for a bad URL, -SL_EIO or
 * -SL_ENOMEM else. */
int bus_start(bus **out, ctl *c, const char *pub_url, const char *rep_url,
	      const char *token, double hz, char *err);

/* The REP socket's URL. */
const char *bus_rep_url(const bus *b);

/* Stop both threads (within a fraction of a second), close the sockets,
 * free b. NULL is fine. */
void bus_stop(bus *b);

#endif
