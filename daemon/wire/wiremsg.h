/* wiremsg.h - a wire frame (engine/wire/wire.h) in a nanomsg buffer, as
 * both sides of a remote worker's link send it: the daemon's endpoint
 * (daemon/serve/remote.c) and the worker process (daemon/worker/). */
#ifndef SL_WIREMSG_H
#define SL_WIREMSG_H

#include <stddef.h>

#include "wire.h"

/* A message in a nanomsg buffer (nn_allocmsg: nn_send it with NN_MSG):
 * header h (its payload_len set here, send_ns now) and the payload a then
 * b; NULL when out of memory. */
void *wiremsg_new(const wire_hdr *h, const void *a, size_t na, const void *b, size_t nb);

#endif
