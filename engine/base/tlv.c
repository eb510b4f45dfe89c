/* tlv.c - tagged records (see tlv.h). */
#include "tlv.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "sl.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tlv.c stores host integers and floats as little-endian bytes"
#endif

static const char *const type_names[] = {
	[TLV_U64] = "u64", [TLV_I64] = "i64", [TLV_F64] = "f64",
	[TLV_STR] = "string", [TLV_U32S] = "u32 array", [TLV_U64S] = "u64 array",
	[TLV_F32S] = "f32 array", [TLV_F64S] = "f64 array", [TLV_SEC] = "section",
	[TLV_LIST] = "list",
};

const char *
tlv_type_name(int type)
{
	return type >= TLV_U64 && type <= TLV_LIST ? type_names[type] : "unknown type";
}

/* bytes per element (fixed and array types), 0 for the rest */
static size_t
elem_size(int type)
{
	switch (type) {
	case TLV_U64: case TLV_I64: case TLV_F64: case TLV_U64S: case TLV_F64S:
		return 8;
	case TLV_U32S: case TLV_F32S:
		return 4;
	default:
		return 0;
	}
}

static uint32_t
crc(const uint8_t *p, size_t n)
{
	uLong c = crc32(0L, Z_NULL, 0);
	while (n) {
		uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
		c = crc32(c, p, k);
		p += k;
		n -= k;
	}
	return (uint32_t)c;
}

static uint32_t
rd32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static uint64_t
rd64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

/* ---- writer ---- */

static void
patch(blob *b, size_t at, const void *v, size_t n)
{
	if (!b->oom)
		memcpy(b->p + at, v, n);
}

void
tlv_begin(tlv_w *w, blob *b, uint32_t format, uint32_t min_reader)
{
	memset(w, 0, sizeof(*w));
	w->b = b;
	w->start = b->n;
	uint8_t h[TLV_HEADER] = {0};
	memcpy(h, TLV_MAGIC, 8);
	memcpy(h + 8, &format, 4);
	memcpy(h + 12, &min_reader, 4);
	blob_put(b, h, sizeof(h));
}

void
tlv_end(tlv_w *w)
{
	SL_ASSERT(w->depth == 0);
	blob *b = w->b;
	if (b->oom)
		return;
	size_t body = w->start + TLV_HEADER;
	uint64_t n = b->n - body;
	uint32_t c = crc(b->p + body, n);
	patch(b, w->start + 16, &n, 8);
	patch(b, w->start + 24, &c, 4);
}

/* a record's name, type and length; the value follows */
static void
head(tlv_w *w, const char *name, int type, uint64_t len)
{
	size_t nl = strlen(name);
	SL_ASSERT(nl < 256);
	uint8_t l = (uint8_t)nl, t = (uint8_t)type;
	blob_put(w->b, &l, 1);
	blob_put(w->b, name, nl);
	blob_put(w->b, &t, 1);
	blob_put(w->b, &len, 8);
}

void
tlv_u64(tlv_w *w, const char *name, uint64_t v)
{
	head(w, name, TLV_U64, 8);
	blob_put(w->b, &v, 8);
}

void
tlv_i64(tlv_w *w, const char *name, int64_t v)
{
	head(w, name, TLV_I64, 8);
	blob_put(w->b, &v, 8);
}

void
tlv_f64(tlv_w *w, const char *name, double v)
{
	head(w, name, TLV_F64, 8);
	blob_put(w->b, &v, 8);
}

void
tlv_str(tlv_w *w, const char *name, const char *s)
{
	size_t n = strlen(s);
	head(w, name, TLV_STR, n);
	blob_put(w->b, s, n);
}

void
tlv_array(tlv_w *w, const char *name, int type, const void *p, size_t n)
{
	head(w, name, type, n * elem_size(type));
	blob_put(w->b, p, n * elem_size(type));
}

void *
tlv_reserve(tlv_w *w, const char *name, int type, size_t bytes)
{
	head(w, name, type, bytes);
	return blob_reserve(w->b, bytes);
}

void
tlv_open(tlv_w *w, const char *name, int type)
{
	SL_ASSERT(w->depth < TLV_DEPTH);
	head(w, name, type, 0);
	w->open[w->depth++] = w->b->n - 8;
}

void
tlv_close(tlv_w *w)
{
	SL_ASSERT(w->depth > 0);
	size_t at = w->open[--w->depth];
	uint64_t len = w->b->n - (at + 8);
	patch(w->b, at, &len, 8);
}

/* ---- reader ---- */

/* path + "." + name (or suffix) into out (TLV_PATH bytes), cut to fit */
static void
append(char *out, const char *path, const char *sep, const char *name, size_t nl)
{
	size_t k = strlen(path), cap = TLV_PATH - 1;
	if (out != path)
		memmove(out, path, k < cap ? k : cap);
	k = k < cap ? k : cap;
	if (k && *sep && k < cap)
		out[k++] = *sep;
	size_t m = nl < cap - k ? nl : cap - k;
	memcpy(out + k, name, m);
	out[k + m] = 0;
}

static void
join(char *out, const char *path, const char *name, size_t nl)
{
	append(out, path, ".", name, nl);
}

static void
item_path(char *out, const char *path, int i)
{
	char ix[16];
	int n = snprintf(ix, sizeof(ix), "[%d]", i);
	append(out, path, "", ix, (size_t)n);
}

int
tlv_bad(char *err, const tlv_sec *s, const char *name, const char *fmt, ...)
{
	char path[TLV_PATH], msg[SL_ERR_LEN];
	join(path, s->path, name, strlen(name));
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return sl_fail(err, SL_EFORMAT, "checkpoint: \"%s\" %s", path, msg);
}

/* one record's framing at off in [p, p+n): 1 and *out, or 0 if it does
 * not fit */
static int
frame(const uint8_t *p, size_t n, size_t off, tlv_rec *out, size_t *next)
{
	if (n - off < 1)
		return 0;
	size_t nl = p[off];
	if (n - off - 1 < nl + 9)
		return 0;
	out->name = (const char *)p + off + 1;
	out->name_len = nl;
	out->type = p[off + 1 + nl];
	uint64_t len = rd64(p + off + 2 + nl);
	size_t at = off + 10 + nl;
	if (len > n - at)
		return 0;
	out->v = p + at;
	out->len = (size_t)len;
	*next = at + (size_t)len;
	return 1;
}

static int
check(const uint8_t *p, size_t n, int depth, int is_list, const char *path, char *err)
{
	size_t off = 0;
	int item = 0;
	tlv_rec r;
	char sub[TLV_PATH];
	while (off < n) {
		size_t next;
		if (!frame(p, n, off, &r, &next))
			return sl_fail(err, SL_EFORMAT,
				       "checkpoint corrupt: a record in \"%s\" runs past its end",
				       *path ? path : "(top)");
		for (size_t i = 0; i < r.name_len; i++) {
			char c = r.name[i];
			if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			      (c >= '0' && c <= '9') || c == '_'))
				return sl_fail(err, SL_EFORMAT,
					       "checkpoint corrupt: a tag in \"%s\" is not a name",
					       *path ? path : "(top)");
		}
		if (is_list)
			item_path(sub, path, item++);
		else
			join(sub, path, r.name, r.name_len);
		if (is_list && (r.type != TLV_SEC || r.name_len))
			return sl_fail(err, SL_EFORMAT,
				       "checkpoint corrupt: \"%s\" is not a list item", sub);
		size_t es = elem_size(r.type);
		if (es && (r.type <= TLV_F64 ? r.len != 8 : r.len % es))
			return sl_fail(err, SL_EFORMAT,
				       "checkpoint corrupt: \"%s\" (%s) has %zu bytes", sub,
				       tlv_type_name(r.type), r.len);
		if (r.type == TLV_SEC || r.type == TLV_LIST) {
			if (depth >= TLV_DEPTH)
				return sl_fail(err, SL_EFORMAT,
					       "checkpoint corrupt: \"%s\" nests too deep", sub);
			int rc = check(r.v, r.len, depth + 1, r.type == TLV_LIST, sub, err);
			if (rc < 0)
				return rc;
		}
		off = next; /* unknown types: skipped whole */
	}
	return 0;
}

int
tlv_read(const uint8_t *buf, size_t len, uint32_t reader_format, int skip_crc,
	 tlv_sec *root, uint32_t *format, char *err)
{
	if (len < 8 || memcmp(buf, TLV_MAGIC, 8)) {
		if (len >= 8 && !memcmp(buf, "SLCKPT01", 8))
			return sl_fail(err, SL_EFORMAT,
				       "checkpoint format 1 (stalelab before tagged "
				       "checkpoints) is no longer read");
		if (len < 8 && (!len || !memcmp(buf, TLV_MAGIC, len)))
			return sl_fail(err, SL_EFORMAT,
				       "checkpoint truncated in its header (%zu of %d bytes)",
				       len, TLV_HEADER);
		return sl_fail(err, SL_EFORMAT, "not a stalelab checkpoint (bad magic)");
	}
	if (len < TLV_HEADER)
		return sl_fail(err, SL_EFORMAT,
			       "checkpoint truncated in its header (%zu of %d bytes)", len,
			       TLV_HEADER);
	uint32_t fmt = rd32(buf + 8), min_reader = rd32(buf + 12);
	uint64_t body = rd64(buf + 16);
	if (format)
		*format = fmt;
	if (min_reader > reader_format)
		return sl_fail(err, SL_EFORMAT,
			       "checkpoint format %u needs a newer stalelab (this one reads "
			       "format %u and older)", fmt, reader_format);
	if (body > len - TLV_HEADER)
		return sl_fail(err, SL_EFORMAT, "checkpoint truncated: %zu of %llu bytes",
			       len, (unsigned long long)body + TLV_HEADER);
	if (body < len - TLV_HEADER)
		return sl_fail(err, SL_EFORMAT,
			       "checkpoint corrupt: %zu bytes after its end",
			       (size_t)(len - TLV_HEADER - body));
	const uint8_t *p = buf + TLV_HEADER;
	if (!skip_crc && crc(p, (size_t)body) != rd32(buf + 24))
		return sl_fail(err, SL_EFORMAT,
			       "checkpoint corrupt: checksum mismatch (the file was changed "
			       "or damaged)");
	int rc = check(p, (size_t)body, 0, 0, "", err);
	if (rc < 0)
		return rc;
	root->p = p;
	root->n = (size_t)body;
	root->path[0] = 0;
	return 0;
}

int
tlv_next(const tlv_sec *s, size_t *off, tlv_rec *out)
{
	size_t next;
	if (*off >= s->n || !frame(s->p, s->n, *off, out, &next))
		return 0;
	*off = next;
	return 1;
}

/* the first record named name: 1; 0 if absent and optional; else an
 * error. Checks the type. */
static int
find(const tlv_sec *s, const char *name, int req, int type, tlv_rec *out, char *err)
{
	size_t off = 0, nl = strlen(name);
	while (tlv_next(s, &off, out)) {
		if (out->name_len != nl || memcmp(out->name, name, nl))
			continue;
		if (out->type != type)
			return tlv_bad(err, s, name, "has type %s, expected %s",
				       tlv_type_name(out->type), tlv_type_name(type));
		return 1;
	}
	if (!req)
		return 0;
	char path[TLV_PATH];
	join(path, s->path, name, nl);
	return sl_fail(err, SL_EFORMAT, "checkpoint: missing \"%s\"", path);
}

int
tlv_get_u64(const tlv_sec *s, const char *name, int req, uint64_t *out, char *err)
{
	tlv_rec r;
	int rc = find(s, name, req, TLV_U64, &r, err);
	if (rc > 0)
		*out = rd64(r.v);
	return rc;
}

int
tlv_get_i64(const tlv_sec *s, const char *name, int req, int64_t *out, char *err)
{
	tlv_rec r;
	int rc = find(s, name, req, TLV_I64, &r, err);
	if (rc > 0)
		memcpy(out, r.v, 8);
	return rc;
}

int
tlv_get_f64(const tlv_sec *s, const char *name, int req, double *out, char *err)
{
	tlv_rec r;
	int rc = find(s, name, req, TLV_F64, &r, err);
	if (rc > 0)
		memcpy(out, r.v, 8);
	return rc;
}

int
tlv_get_str(const tlv_sec *s, const char *name, int req, char *out, size_t cap,
	    char *err)
{
	tlv_rec r;
	int rc = find(s, name, req, TLV_STR, &r, err);
	if (rc <= 0)
		return rc;
	if (r.len >= cap)
		return tlv_bad(err, s, name, "is %zu bytes long (at most %zu)", r.len,
			       cap - 1);
	if (memchr(r.v, 0, r.len))
		return tlv_bad(err, s, name, "holds a NUL byte");
	memcpy(out, r.v, r.len);
	out[r.len] = 0;
	return 1;
}

int
tlv_get_array(const tlv_sec *s, const char *name, int req, int type, size_t n,
	      const void **p, size_t *n_out, char *err)
{
	tlv_rec r;
	int rc = find(s, name, req, type, &r, err);
	if (rc <= 0)
		return rc;
	size_t k = r.len / elem_size(type);
	if (n != SIZE_MAX && k != n)
		return tlv_bad(err, s, name, "has %zu elements, expected %zu", k, n);
	*p = r.v;
	if (n_out)
		*n_out = k;
	return 1;
}

int
tlv_get_sec(const tlv_sec *s, const char *name, int req, int type, tlv_sec *out,
	    char *err)
{
	tlv_rec r;
	int rc = find(s, name, req, type, &r, err);
	if (rc <= 0)
		return rc;
	out->p = r.v;
	out->n = r.len;
	join(out->path, s->path, name, strlen(name));
	return 1;
}

int
tlv_item(const tlv_sec *list, size_t *off, int *i, tlv_sec *out)
{
	tlv_rec r;
	if (!tlv_next(list, off, &r))
		return 0;
	out->p = r.v;
	out->n = r.len;
	item_path(out->path, list->path, (*i)++);
	return 1;
}

size_t
tlv_count(const tlv_sec *list)
{
	size_t off = 0, k = 0;
	tlv_rec r;
	while (tlv_next(list, &off, &r))
		k++;
	return k;
}
