/* tlv.h - tagged records: the checkpoint file format (docs/formats.md).
 *
 * A file is a 28-byte header (magic, format, oldest reader format, body
 * length, CRC-32 of the body) and a body of records. A record is
 *
 *   u8 name length, name (ASCII [A-Za-z0-9_], may be empty in a list),
 *   u8 type, u64 value length, value
 *
 * all integers little-endian. A section's value is itself records; a list's
 * value is unnamed sections. Readers look records up by name, so fields may
 * come in any order, unknown names and unknown types are skipped, and an
 * absent field is either filled with its default or refused by name.
 *
 * The reader is pure: bytes in, a validated view or an error naming what is
 * wrong out; no I/O, no allocation, no global state. Nothing it returns
 * points outside the bytes it was given. */
#ifndef SL_TLV_H
#define SL_TLV_H

#include <stddef.h>
#include <stdint.h>

#include "blob.h"

#define TLV_MAGIC "SLCKPT\r\n"
#define TLV_HEADER 28
#define TLV_DEPTH 8  /* sections nest at most this deep */
#define TLV_PATH 160 /* longest path kept for messages */

typedef enum tlv_type {
	TLV_U64 = 1,  /* 8 bytes */
	TLV_I64 = 2,  /* 8 bytes, two's complement */
	TLV_F64 = 3,  /* 8 bytes, IEEE 754 binary64 */
	TLV_STR = 4,  /* bytes, no terminator, no NUL inside */
	TLV_U32S = 5, /* arrays: the length is a multiple of the element */
	TLV_U64S = 6,
	TLV_F32S = 7,
	TLV_F64S = 8,
	TLV_SEC = 9,  /* records */
	TLV_LIST = 10 /* unnamed sections */
} tlv_type;

const char *tlv_type_name(int type);

/* ---- writer ---- */

typedef struct tlv_w {
	blob *b;
	size_t start;               /* header offset in b */
	size_t open[TLV_DEPTH + 1]; /* offsets of open sections' lengths */
	int depth;
} tlv_w;

/* Start a file (header written at the end). format: this writer's
 * format; min_reader: the oldest reader format that can load the file. */
void tlv_begin(tlv_w *w, blob *b, uint32_t format, uint32_t min_reader);
/* Close the file: body length and checksum into the header. */
void tlv_end(tlv_w *w);

void tlv_u64(tlv_w *w, const char *name, uint64_t v);
void tlv_i64(tlv_w *w, const char *name, int64_t v);
void tlv_f64(tlv_w *w, const char *name, double v);
void tlv_str(tlv_w *w, const char *name, const char *s);
/* n elements of an array type from host memory */
void tlv_array(tlv_w *w, const char *name, int type, const void *p, size_t n);
/* Room for an array of `bytes` bytes, to be filled at once by the caller
 * (a device download straight into the file); NULL when out of memory. */
void *tlv_reserve(tlv_w *w, const char *name, int type, size_t bytes);
/* Sections and lists: open, write records (a list: unnamed sections),
 * close. */
void tlv_open(tlv_w *w, const char *name, int type);
void tlv_close(tlv_w *w);

/* ---- reader ---- */

/* A validated section (or list): its records' bytes and its path. */
typedef struct tlv_sec {
	const uint8_t *p;
	size_t n;
	char path[TLV_PATH];
} tlv_sec;

typedef struct tlv_rec {
	const char *name;
	size_t name_len;
	int type;
	const uint8_t *v;
	size_t len;
} tlv_rec;

/* Check the header, the checksum (unless skip_crc) and the framing of
 * every record at every depth; *root is the body. reader_format: the
 * newest format this reader knows. 0 or -SL_EFORMAT with err set. */
int tlv_read(const uint8_t *buf, size_t len, uint32_t reader_format, int skip_crc,
	     tlv_sec *root, uint32_t *format, char *err);

/* The record after *off in s (start with *off = 0): 1, or 0 at the end. */
int tlv_next(const tlv_sec *s, size_t *off, tlv_rec *out);

/* Look fields up by name. Each returns 1 when found (and of the right
 * type and size), 0 when absent and optional (out untouched), or
 * -SL_EFORMAT with err naming the field ("checkpoint: missing
 * \"workers[2].rng\""). */
int tlv_get_u64(const tlv_sec *s, const char *name, int req, uint64_t *out, char *err);
int tlv_get_i64(const tlv_sec *s, const char *name, int req, int64_t *out, char *err);
int tlv_get_f64(const tlv_sec *s, const char *name, int req, double *out, char *err);
/* A string into out (cap bytes with its NUL) */
int tlv_get_str(const tlv_sec *s, const char *name, int req, char *out, size_t cap,
		char *err);
/* An array of `type` with exactly n elements (n == SIZE_MAX: any count,
 * returned in *n_out); *p points into the file (not aligned). */
int tlv_get_array(const tlv_sec *s, const char *name, int req, int type, size_t n,
		  const void **p, size_t *n_out, char *err);
/* A section or a list; its path is s's path and name. */
int tlv_get_sec(const tlv_sec *s, const char *name, int req, int type, tlv_sec *out,
		char *err);
/* The next item of a list (start with *off = 0, *i = 0): 1, or 0 at the
 * end; the item's path is "list[i]". */
int tlv_item(const tlv_sec *list, size_t *off, int *i, tlv_sec *out);
size_t tlv_count(const tlv_sec *list);

/* "checkpoint: \"path.name\" msg" into err; returns -SL_EFORMAT. */
int tlv_bad(char *err, const tlv_sec *s, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
