/* wiremsg.c - a wire frame in a nanomsg buffer (wiremsg.h). */
#include "wiremsg.h"

#include <nanomsg/nn.h>
#include <stdint.h>
#include <string.h>

#include "sl.h"

void *
wiremsg_new3(const wire_hdr *h, const void *a, size_t na, const void *b, size_t nb,
	     const void *c, size_t nc)
{
	wire_hdr o = *h;
	o.payload_len = (uint32_t)(na + nb + nc);
	o.send_ns = (uint64_t)(sl_now() * 1e9);
	uint8_t *buf = nn_allocmsg(WIRE_HEADER + na + nb + nc, 0);
	if (!buf)
		return NULL;
	if (na)
		memcpy(buf + WIRE_HEADER, a, na);
	if (nb)
		memcpy(buf + WIRE_HEADER + na, b, nb);
	if (nc)
		memcpy(buf + WIRE_HEADER + na + nb, c, nc);
	wire_encode(&o, buf + WIRE_HEADER, buf);
	return buf;
}

void *
wiremsg_new(const wire_hdr *h, const void *a, size_t na, const void *b, size_t nb)
{
	return wiremsg_new3(h, a, na, b, nb, NULL, 0);
}

void
wiremsg_put_aug(wire_hdr *h, const aug_key *k)
{
	int on = k->kind == AUG_CROP_FLIP;
	h->augment = (uint8_t)(on ? AUG_CROP_FLIP : AUG_NONE);
	h->aug_pad = (uint8_t)(on ? k->pad : 0);
	h->data_epoch = on ? k->epoch : 0;
}

void
wiremsg_get_aug(const wire_hdr *h, uint64_t seed, aug_key *k)
{
	*k = (aug_key){.kind = h->augment, .pad = h->aug_pad, .seed = seed,
		       .epoch = h->data_epoch};
}
