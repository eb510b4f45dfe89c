/* dataset_gzip.c - gzip decompression via zlib (several members, padding,
 * a limit against bombs) and whole-file reads, gunzipped when gzip. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "dataset_impl.h"

static int
is_gzip(const uint8_t *buf, size_t len)
{
	return len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b;
}

static int
too_large(char *err, const char *what, size_t max_out)
{
	return sl_fail(err, SL_EFORMAT, "%s: larger than %zu bytes", what,
		       max_out);
}

/* ---- gzip ---------------------------------------------------------------- */

/* First guess at the output size: the gzip trailer's ISIZE (length mod
 * 2^32 of the last member), bounded by deflate's best ratio (~1032:1) so a
 * lying trailer cannot make us reserve a huge buffer up front. */
/* double *buf's capacity, to limit at most (the caller checks that it is
 * below): 0, or -SL_ENOMEM with err naming what */
static int
grow(uint8_t **buf, size_t *cap, size_t limit, const char *what, char *err)
{
	size_t ncap = *cap > limit / 2 ? limit : *cap * 2;
	uint8_t *p = realloc(*buf, ncap);
	if (!p)
		return sl_fail(err, SL_ENOMEM, "%s: out of memory for %zu bytes", what, ncap);
	*buf = p;
	*cap = ncap;
	return 0;
}

static size_t
gunzip_size_hint(const uint8_t *buf, size_t len, size_t limit)
{
	size_t hint = 4096;
	if (len >= 18) {
		const uint8_t *t = buf + len - 4;
		size_t isize = (size_t)t[0] | (size_t)t[1] << 8 |
			       (size_t)t[2] << 16 | (size_t)t[3] << 24;
		size_t ratio_cap = len > SIZE_MAX / 1032 ? SIZE_MAX : len * 1032;
		isize = SL_MIN(isize, ratio_cap);
		if (isize < SIZE_MAX)
			isize++; /* room to see the end without growing */
		hint = SL_MAX(hint, isize);
	}
	return SL_MIN(hint, limit);
}

static int
all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static int
inflate_all(const uint8_t *buf, size_t len, size_t max_out, uint8_t **out,
	    size_t *out_len, const char *what, char *err)
{
	/* Output may grow to max_out + 1 bytes: reaching that proves the data
	 * is too large without ever holding more than the limit plus one. */
	size_t limit = max_out < SIZE_MAX ? max_out + 1 : SIZE_MAX;
	size_t cap = gunzip_size_hint(buf, len, limit);
	size_t have = 0, fed = 0; /* bytes written, bytes handed to zlib */
	int rc = 0;
	z_stream zs;

	memset(&zs, 0, sizeof zs);
	uint8_t *dst = malloc(cap ? cap : 1);
	if (!dst)
		return sl_fail(err, SL_ENOMEM, "%s: out of memory for %zu bytes",
			       what, cap);
	if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
		free(dst);
		return sl_fail(err, SL_ENOMEM, "%s: cannot initialise zlib",
			       what);
	}
	for (;;) {
		if (have == cap) {
			if (cap >= limit) { /* only when limit == SIZE_MAX */
				rc = sl_fail(err, SL_ENOMEM,
					     "%s: out of memory", what);
				break;
			}
			if ((rc = grow(&dst, &cap, limit, what, err)) < 0)
				break;
		}
		if (zs.avail_in == 0 && fed < len) {
			size_t chunk = SL_MIN(len - fed, (size_t)UINT_MAX);
			zs.next_in = (Bytef *)(uintptr_t)(buf + fed);
			zs.avail_in = (uInt)chunk;
			fed += chunk;
		}
		size_t room = SL_MIN(cap - have, (size_t)UINT_MAX);
		zs.next_out = dst + have;
		zs.avail_out = (uInt)room;
		int zr = inflate(&zs, Z_NO_FLUSH);
		have += room - zs.avail_out;
		if (have > max_out) {
			rc = too_large(err, what, max_out);
			break;
		}

		if (zr == Z_STREAM_END) {
			size_t next = fed - zs.avail_in; /* first unused byte */
			if (next == len)
				break;
			if (is_gzip(buf + next, len - next)) {
				/* another member (as written by cat a.gz b.gz) */
				if (inflateReset(&zs) != Z_OK) {
					rc = sl_fail(err, SL_EFORMAT,
						     "%s: cannot restart zlib",
						     what);
					break;
				}
				continue;
			}
			if (all_zero(buf + next, len - next))
				break; /* zero padding, as tape tools write */
			rc = sl_fail(err, SL_EFORMAT,
				     "%s: %zu bytes of garbage after gzip data "
				     "at offset %zu",
				     what, len - next, next);
			break;
		}
		if (zr == Z_MEM_ERROR) {
			rc = sl_fail(err, SL_ENOMEM, "%s: zlib out of memory",
				     what);
			break;
		}
		if (zr != Z_OK && zr != Z_BUF_ERROR) {
			rc = sl_fail(err, SL_EFORMAT, "%s: corrupt gzip data (%s)",
				     what, zs.msg ? zs.msg : "bad stream");
			break;
		}
		/* No stream end, output room left and every input byte eaten:
		 * the input stops in the middle of the stream. */
		if (zs.avail_out > 0 && zs.avail_in == 0 && fed == len) {
			rc = sl_fail(err, SL_EFORMAT,
				     "%s: truncated gzip data (%zu bytes "
				     "compressed, ends after %zu bytes of output)",
				     what, len, have);
			break;
		}
	}
	inflateEnd(&zs);
	if (rc) {
		free(dst);
		return rc;
	}
	uint8_t *shrunk = realloc(dst, have ? have : 1);
	*out = shrunk ? shrunk : dst;
	*out_len = have;
	return 0;
}

int
ds_gunzip(const uint8_t *buf, size_t len, size_t max_out, uint8_t **out,
	  size_t *out_len, const char *what, char *err)
{
	what = ds_name_or_buffer(what);
	if (!out || !out_len || (!buf && len))
		return sl_fail(err, SL_EINVAL, "%s: gunzip: NULL argument",
			       what);
	*out = NULL;
	*out_len = 0;
	if (is_gzip(buf, len))
		return inflate_all(buf, len, max_out, out, out_len, what, err);
	if (len > max_out)
		return too_large(err, what, max_out);
	uint8_t *copy = malloc(len ? len : 1);
	if (!copy)
		return sl_fail(err, SL_ENOMEM, "%s: out of memory for %zu bytes",
			       what, len);
	if (len)
		memcpy(copy, buf, len);
	*out = copy;
	*out_len = len;
	return 0;
}

/* ---- files --------------------------------------------------------------- */

int
ds_read_file(const char *path, size_t max_out, uint8_t **out,
	     size_t *out_len, char *err)
{
	if (!path || !out || !out_len)
		return sl_fail(err, SL_EINVAL, "read_file: NULL argument");
	*out = NULL;
	*out_len = 0;

	/* A gzip file can be a little larger than its content (stored
	 * blocks), so allow some slack on the raw size. */
	size_t raw_limit = max_out;
	size_t slack = max_out / 64 + 4096;
	raw_limit = raw_limit > SIZE_MAX - slack ? SIZE_MAX : raw_limit + slack;

	FILE *f = fopen(path, "rb");
	if (!f)
		return sl_fail(err, SL_EIO, "%s: %s", path, strerror(errno));
	/* Size the buffer from fstat for regular files (+1 to see EOF
	 * without growing); pipes and the like grow from 64 KiB. */
	size_t cap = 65536;
	struct stat st;
	if (fstat(fileno(f), &st) == 0) {
		if (S_ISDIR(st.st_mode)) {
			fclose(f);
			return sl_fail(err, SL_EIO, "%s: %s", path,
				       strerror(EISDIR));
		}
		if (S_ISREG(st.st_mode) && st.st_size >= 0) {
			if ((uint64_t)st.st_size > (uint64_t)raw_limit) {
				fclose(f);
				return too_large(err, path, max_out);
			}
			cap = (size_t)st.st_size + 1;
		}
	}
	cap = SL_MIN(SL_MAX(cap, (size_t)4096), raw_limit);
	uint8_t *buf = malloc(cap ? cap : 1);
	size_t have = 0;
	int rc = 0;
	if (!buf)
		rc = sl_fail(err, SL_ENOMEM, "%s: out of memory for %zu bytes",
			     path, cap);
	while (!rc) {
		if (have == cap) {
			if (cap >= raw_limit) {
				int ch = fgetc(f);
				if (ch == EOF && !ferror(f))
					break;
				rc = ch == EOF ? sl_fail(err, SL_EIO, "%s: %s",
							 path, strerror(errno))
					       : too_large(err, path, max_out);
				break;
			}
			if ((rc = grow(&buf, &cap, raw_limit, path, err)) < 0)
				break;
		}
		size_t want = cap - have;
		size_t got = fread(buf + have, 1, want, f);
		have += got;
		if (got < want) {
			if (ferror(f))
				rc = sl_fail(err, SL_EIO, "%s: %s", path,
					     strerror(errno));
			break;
		}
	}
	fclose(f);
	if (rc) {
		free(buf);
		return rc;
	}
	if (is_gzip(buf, have)) {
		rc = ds_gunzip(buf, have, max_out, out, out_len, path, err);
		free(buf);
		return rc;
	}
	if (have > max_out) {
		free(buf);
		return too_large(err, path, max_out);
	}
	uint8_t *shrunk = realloc(buf, have ? have : 1);
	*out = shrunk ? shrunk : buf;
	*out_len = have;
	return 0;
}
