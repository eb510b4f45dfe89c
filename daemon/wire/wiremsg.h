/* wiremsg.h - a wire frame (engine/wire/wire.h) in a nanomsg buffer, as
 * both sides of a remote worker's link send it: the daemon's endpoint
 * (daemon/serve/remote.c) and the worker process (daemon/worker/). */
#ifndef SL_WIREMSG_H
#define SL_WIREMSG_H

#include <stddef.h>

#include "augment.h"
#include "wire.h"

/* A message in a nanomsg buffer (nn_allocmsg: nn_send it with NN_MSG):
 * header h (its payload_len set here, send_ns now) and the payload a then
 * b; NULL when out of memory. */
void *wiremsg_new(const wire_hdr *h, const void *a, size_t na, const void *b, size_t nb);
/* ... with a third part c (a local step's settings, weights, batch) */
void *wiremsg_new3(const wire_hdr *h, const void *a, size_t na, const void *b, size_t nb,
		   const void *c, size_t nc);

/* A WEIGHTS header's augmentation bytes from its batch's key (kind
 * AUG_NONE: all zero), and back: the key of a WEIGHTS received, with the
 * run's seed (which the worker has from the welcome's run object). The
 * wire (engine/wire) carries the bytes; what they mean is the data's. */
void wiremsg_put_aug(wire_hdr *h, const aug_key *k);
void wiremsg_get_aug(const wire_hdr *h, uint64_t seed, aug_key *k);

#endif
