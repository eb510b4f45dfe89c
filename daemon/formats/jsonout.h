/* jsonout.h - compact JSON output with the shortest decimal form of each
 * number that reads back to the same double (0.05, not jansson's
 * 0.050000000000000003), for logs and API bodies people read. */
#ifndef SL_JSONOUT_H
#define SL_JSONOUT_H

#include <jansson.h>
#include <stddef.h>

/* Newly malloc'd NUL-terminated text (caller frees), or NULL. */
char *jsonout_dumps(const json_t *v);

/* json_real(d), or json_null() when d is NaN or infinite (jansson rejects
 * those). */
json_t *jsonout_real(double d);

/* Shortest round-trip form of d into buf (>= 32 bytes); non-finite
 * numbers become null (JSON has no NaN). */
void jsonout_number(char *buf, double d);

/* A growing string (p NUL-terminated, NULL while empty); oom is set once
 * memory ran out, and later puts do nothing. */
typedef struct sl_buf {
	char *p;
	size_t n, cap;
	int oom;
} sl_buf;
void sl_buf_put(sl_buf *b, const char *s, size_t n);

#endif
