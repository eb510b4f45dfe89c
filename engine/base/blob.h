/* blob.h - a growable byte buffer to serialise into, and a bounds-checked
 * cursor to read back from (checkpoints). Reading never goes past the end:
 * a short or corrupt input makes every later read fail. */
#ifndef SL_BLOB_H
#define SL_BLOB_H

#include <stddef.h>
#include <stdint.h>

typedef struct blob {
	uint8_t *p;
	size_t n, cap;
	int oom;
} blob;

void blob_put(blob *b, const void *data, size_t len);
/* Room for len more bytes at the end, to be filled by the caller (NULL
 * when out of memory; then b->oom is set). */
void *blob_reserve(blob *b, size_t len);
void blob_u64(blob *b, uint64_t v);
void blob_f64(blob *b, double v);
void blob_free(blob *b);

typedef struct cursor {
	const uint8_t *p;
	size_t n, off;
	int bad; /* set once a read ran past the end */
} cursor;

/* Copy len bytes out (zeros once bad). Returns 0 or -1. */
int cur_get(cursor *c, void *out, size_t len);
uint64_t cur_u64(cursor *c);
double cur_f64(cursor *c);
/* Pointer to the next len bytes without copying (NULL once bad). */
const void *cur_view(cursor *c, size_t len);

#endif
