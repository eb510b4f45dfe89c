/* web.h - the browser dashboard (web/), embedded into the binary at build
 * time by tools/embed_web.py, so an installed stalelab needs no files beside
 * it. The HTTP layer asks web_find() first for every GET; what it declines
 * is the API's. */
#ifndef SL_WEB_H
#define SL_WEB_H

#include <stddef.h>

typedef struct web_asset {
	const char *path; /* URL path: "/" for the page, "/ui/..." for the rest */
	const char *type; /* Content-Type */
	const unsigned char *data;
	size_t len;
} web_asset;

/* the generated table (build/gen/web_assets.c) */
extern const web_asset web_assets[];
extern const size_t web_n_assets;

typedef struct web_reply {
	unsigned status; /* 200, or 404 for an unknown path under /ui/ */
	const char *type;
	const unsigned char *data; /* static: never freed */
	size_t len;
} web_reply;

/* 1 when a GET of url is the dashboard's (reply in *out), 0 when it is not
 * ("not mine": the API answers it). "/" is the dashboard only for clients
 * that accept text/html (a browser); curl and scripts keep the plain-text
 * index. accept may be NULL. */
int web_find(const char *url, const char *accept, web_reply *out);

/* 1 when the Accept header value names text/html (or text/ *) with a
 * non-zero quality; a bare wildcard does not count. */
int web_accepts_html(const char *accept);

#endif
