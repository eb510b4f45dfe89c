/* web.c - serve the embedded dashboard (see web.h). */
#include "web.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define UI_PREFIX "/ui/"

static const char not_found[] = "no such dashboard file\n";

/* the quality of one media range's parameters ("; q=0.5"): 1 by default */
static double
range_quality(const char *p, const char *end)
{
	while (p < end) {
		while (p < end && (*p == ';' || *p == ' ' || *p == '\t'))
			p++;
		if (end - p > 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=')
			return strtod(p + 2, NULL);
		while (p < end && *p != ';')
			p++;
	}
	return 1;
}

int
web_accepts_html(const char *accept)
{
	if (!accept)
		return 0;
	const char *p = accept;
	while (*p) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		const char *end = strchr(p, ',');
		if (!end)
			end = p + strlen(p);
		const char *semi = memchr(p, ';', (size_t)(end - p));
		const char *type_end = semi ? semi : end;
		while (type_end > p && (type_end[-1] == ' ' || type_end[-1] == '\t'))
			type_end--;
		size_t n = (size_t)(type_end - p);
		int html = (n == 9 && !strncasecmp(p, "text/html", 9)) ||
			   (n == 6 && !strncasecmp(p, "text/*", 6));
		if (html && range_quality(semi ? semi : end, end) > 0)
			return 1;
		p = end;
	}
	return 0;
}

int
web_find(const char *url, const char *accept, web_reply *out)
{
	int page = !strcmp(url, "/");
	if (page && !web_accepts_html(accept))
		return 0;
	if (!page && strncmp(url, UI_PREFIX, strlen(UI_PREFIX)))
		return 0;
	for (size_t i = 0; i < web_n_assets; i++) {
		if (!strcmp(url, web_assets[i].path)) {
			*out = (web_reply){200, web_assets[i].type, web_assets[i].data,
					   web_assets[i].len};
			return 1;
		}
	}
	*out = (web_reply){404, "text/plain; charset=utf-8",
			   (const unsigned char *)not_found, sizeof(not_found) - 1};
	return 1;
}
