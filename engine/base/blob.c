/* blob.c - serialisation buffers. */
#include "blob.h"

#include <stdlib.h>
#include <string.h>

void *
blob_reserve(blob *b, size_t len)
{
	if (b->oom)
		return NULL;
	if (b->n + len > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->n + len)
			cap *= 2;
		uint8_t *q = realloc(b->p, cap);
		if (!q) {
			b->oom = 1;
			return NULL;
		}
		b->p = q;
		b->cap = cap;
	}
	void *p = b->p + b->n;
	b->n += len;
	return p;
}

void
blob_put(blob *b, const void *data, size_t len)
{
	if (!len)
		return;
	void *p = blob_reserve(b, len);
	if (p)
		memcpy(p, data, len);
}

void
blob_u64(blob *b, uint64_t v)
{
	blob_put(b, &v, sizeof(v));
}

void
blob_f64(blob *b, double v)
{
	blob_put(b, &v, sizeof(v));
}

void
blob_free(blob *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

int
cur_get(cursor *c, void *out, size_t len)
{
	if (c->bad || len > c->n - c->off) {
		c->bad = 1;
		memset(out, 0, len);
		return -1;
	}
	memcpy(out, c->p + c->off, len);
	c->off += len;
	return 0;
}

uint64_t
cur_u64(cursor *c)
{
	uint64_t v;
	cur_get(c, &v, sizeof(v));
	return v;
}

double
cur_f64(cursor *c)
{
	double v;
	cur_get(c, &v, sizeof(v));
	return v;
}

const void *
cur_view(cursor *c, size_t len)
{
	if (c->bad || len > c->n - c->off) {
		c->bad = 1;
		return NULL;
	}
	const void *p = c->p + c->off;
	c->off += len;
	return p;
}
