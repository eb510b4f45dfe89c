/* jsonout.c - compact JSON writer over jansson values. */
#include "jsonout.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
sl_buf_put(sl_buf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + n + 1)
			cap *= 2;
		char *q = realloc(b->p, cap);
		if (!q) {
			b->oom = 1;
			return;
		}
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}

static void
puts_(sl_buf *b, const char *s)
{
	sl_buf_put(b, s, strlen(s));
}

void
jsonout_number(char *buf, double d)
{
	if (!isfinite(d)) {
		strcpy(buf, "null");
		return;
	}
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, 32, "%.*g", prec, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	/* keep it a JSON real: 1 -> 1.0 */
	if (!strpbrk(buf, ".eEn"))
		strcat(buf, ".0");
}

static void
put_string(sl_buf *b, const char *s, size_t len)
{
	sl_buf_put(b, "\"", 1);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[8];
		switch (c) {
		case '"': puts_(b, "\\\""); break;
		case '\\': puts_(b, "\\\\"); break;
		case '\n': puts_(b, "\\n"); break;
		case '\r': puts_(b, "\\r"); break;
		case '\t': puts_(b, "\\t"); break;
		default:
			if (c < 0x20) {
				snprintf(esc, sizeof(esc), "\\u%04x", c);
				puts_(b, esc);
			} else {
				sl_buf_put(b, (const char *)&s[i], 1);
			}
		}
	}
	sl_buf_put(b, "\"", 1);
}

static void
dump(sl_buf *b, const json_t *v)
{
	char num[40];
	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		const char *k;
		json_t *x;
		int first = 1;
		sl_buf_put(b, "{", 1);
		json_object_foreach((json_t *)v, k, x) {
			if (!first)
				sl_buf_put(b, ",", 1);
			first = 0;
			put_string(b, k, strlen(k));
			sl_buf_put(b, ":", 1);
			dump(b, x);
		}
		sl_buf_put(b, "}", 1);
		break;
	}
	case JSON_ARRAY: {
		size_t i;
		json_t *x;
		sl_buf_put(b, "[", 1);
		json_array_foreach((json_t *)v, i, x) {
			if (i)
				sl_buf_put(b, ",", 1);
			dump(b, x);
		}
		sl_buf_put(b, "]", 1);
		break;
	}
	case JSON_STRING:
		put_string(b, json_string_value(v), json_string_length(v));
		break;
	case JSON_INTEGER:
		snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
		puts_(b, num);
		break;
	case JSON_REAL:
		jsonout_number(num, json_real_value(v));
		puts_(b, num);
		break;
	case JSON_TRUE: puts_(b, "true"); break;
	case JSON_FALSE: puts_(b, "false"); break;
	case JSON_NULL: puts_(b, "null"); break;
	}
}

char *
jsonout_dumps(const json_t *v)
{
	sl_buf b = {0};
	dump(&b, v);
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	return b.p;
}

json_t *
jsonout_real(double d)
{
	return isfinite(d) ? json_real(d) : json_null();
}
