/* remote.h - the daemon's side of remote workers (`stalelab serve
 * --workers-listen URL`, docs/remote.md): a raw nanomsg REP socket that
 * worker processes (`stalelab worker`) connect to with REQ, the wire
 * messages of engine/wire/wire.h. A worker says hello and joins the
 * current run (run_join_remote); from then on the run's thread for it
 * hands each step's weights and batch to the worker and waits for its
 * gradient. A worker that does not answer within the timeout is lost: it
 * leaves the run, which goes on. Only this file and bus.c, the frames'
 * buffers (daemon/wire/) and the worker side (daemon/worker/) include
 * nanomsg's headers. */
#ifndef SL_REMOTE_H
#define SL_REMOTE_H

#include <stddef.h>

#include "control.h"
#include "wire.h"

typedef struct remote remote;

/* Bind url and start the receiving thread. token: the daemon's (NULL:
 * none), checked in every hello; timeout_s: how long a step may wait for
 * its worker before the worker is lost; push_log: a file (NULL: none) to
 * which a line is appended for every push applied (docs/formats.md);
 * max_mib: the receive limit, MiB (a run whose model needs more is refused
 * at the hello). */
int remote_start(remote **out, ctl *c, const char *url, const char *token, double timeout_s,
		 const char *push_log, int max_mib, char *err);
/* Stop receiving: every remote worker is let go (a run step waiting for
 * one returns), the thread ends, the socket closes. Before the run is
 * freed; NULL is fine. */
void remote_stop(remote *rs);
/* Free it all: after remote_stop and after the runs that used it. */
void remote_free(remote *rs);

#endif
