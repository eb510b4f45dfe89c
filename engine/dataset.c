/* dataset.c - IDX / CIFAR-10 / synthetic data sets, gzip via zlib.
 *
 * The parsers only look at the byte buffers they are given and check every
 * length before reading; the loaders turn a spec string into file names,
 * read the files and hand the bytes to the parsers. On failure every
 * function frees what it allocated and leaves its output zeroed. */
#define _POSIX_C_SOURCE 200809L
#include "dataset.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "rng.h"

/* Largest file (after decompression) the loaders accept. */
#define DS_MAX_FILE ((size_t)1 << 30)

#define CIFAR_PIXELS 3072
#define CIFAR_RECORD (1 + CIFAR_PIXELS)

/* Samples of the synthetic mixture use the caller's stream id; the cluster
 * means come from this reserved stream so every split drawn from one seed
 * shares them. */
#define SYN_MEAN_STREAM UINT64_C(0x6d65616e73000000)
#define SYN_TRAIN_STREAM 1
#define SYN_TEST_STREAM 2
#define SYN_DIM 784
#define SYN_CLASSES 10
#define SYN_MAX_N 10000000u

static const char *
name_or_buffer(const char *what)
{
	return what && *what ? what : "<buffer>";
}

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

static uint32_t
get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Bounded copy that always terminates dst (truncating if needed). */
static void
copy_str(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* ---- gzip ---------------------------------------------------------------- */

/* First guess at the output size: the gzip trailer's ISIZE (length mod
 * 2^32 of the last member), bounded by deflate's best ratio (~1032:1) so a
 * lying trailer cannot make us reserve a huge buffer up front. */
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
			size_t ncap = cap > limit / 2 ? limit : cap * 2;
			uint8_t *p = realloc(dst, ncap);
			if (!p) {
				rc = sl_fail(err, SL_ENOMEM,
					     "%s: out of memory for %zu bytes",
					     what, ncap);
				break;
			}
			dst = p;
			cap = ncap;
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
	what = name_or_buffer(what);
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

/* ---- IDX ----------------------------------------------------------------- */

/* Check an IDX header of unsigned bytes with `ndims` dimensions and that
 * the data after it is exactly the size the header announces: trailing
 * bytes are rejected like missing ones, since either means the file is not
 * what its header says. name is used verbatim in messages. */
static int
idx_header(const uint8_t *b, size_t len, int ndims, uint32_t *dims,
	   const char *name, char *err)
{
	if (!b || len < 4)
		return sl_fail(err, SL_EFORMAT,
			       "%s: %zu bytes is too short for an IDX header",
			       name, b ? len : 0);
	if (b[0] != 0 || b[1] != 0)
		return sl_fail(err, SL_EFORMAT,
			       "%s: bad magic %02x %02x %02x %02x "
			       "(expected 00 00 08 %02x, an IDX file)",
			       name, b[0], b[1], b[2], b[3], (unsigned)ndims);
	if (b[2] != 0x08)
		return sl_fail(err, SL_EFORMAT,
			       "%s: IDX element type 0x%02x unsupported "
			       "(expected 0x08, unsigned byte)",
			       name, b[2]);
	if (b[3] != ndims)
		return sl_fail(err, SL_EFORMAT,
			       "%s: IDX file has %u dimensions, expected %d",
			       name, b[3], ndims);
	size_t hdr = 4 + 4 * (size_t)ndims;
	if (len < hdr)
		return sl_fail(err, SL_EFORMAT,
			       "%s: IDX header truncated (%zu bytes, need %zu)",
			       name, len, hdr);

	uint64_t need = 1;
	char shape[64];
	size_t pos = 0;
	for (int i = 0; i < ndims; i++) {
		dims[i] = get_be32(b + 4 + 4 * (size_t)i);
		if (dims[i] == 0)
			return sl_fail(err, SL_EFORMAT,
				       "%s: IDX dimension %d of %d is zero",
				       name, i + 1, ndims);
		uint64_t lim = SL_MIN((uint64_t)SIZE_MAX, UINT64_C(1) << 62);
		if (need > lim / dims[i])
			return sl_fail(err, SL_EFORMAT,
				       "%s: IDX dimensions too large", name);
		need *= dims[i];
		int k = snprintf(shape + pos, sizeof shape - pos, "%s%lu",
				 i ? "x" : "", (unsigned long)dims[i]);
		if (k > 0)
			pos = SL_MIN(pos + (size_t)k, sizeof shape - 1);
	}
	size_t got = len - hdr;
	if ((uint64_t)got != need)
		return sl_fail(err, SL_EFORMAT,
			       "%s: header says %s (%llu bytes) but file holds "
			       "%zu bytes after header",
			       name, shape, (unsigned long long)need, got);
	return 0;
}

static int
parse_idx_named(const uint8_t *img, size_t img_len, const char *img_name,
		const uint8_t *lab, size_t lab_len, const char *lab_name,
		dataset *out, char *err)
{
	uint32_t idims[3] = {0}, ldims[1] = {0};
	int rc;

	if ((rc = idx_header(img, img_len, 3, idims, img_name, err)) ||
	    (rc = idx_header(lab, lab_len, 1, ldims, lab_name, err)))
		return rc;
	if (idims[0] != ldims[0])
		return sl_fail(err, SL_EFORMAT,
			       "%s has %lu images but %s has %lu labels",
			       img_name, (unsigned long)idims[0], lab_name,
			       (unsigned long)ldims[0]);
	if ((uint64_t)idims[1] * idims[2] > INT_MAX)
		return sl_fail(err, SL_EFORMAT, "%s: %lux%lu images too large",
			       img_name, (unsigned long)idims[1],
			       (unsigned long)idims[2]);

	uint32_t n = idims[0];
	size_t dim = (size_t)idims[1] * idims[2];
	const uint8_t *px = img + 16, *lb = lab + 8;
	float *x = sl_calloc_aligned(n, dim * sizeof(float));
	uint8_t *y = malloc(n);
	if (!x || !y) {
		sl_free_aligned(x);
		free(y);
		return sl_fail(err, SL_ENOMEM,
			       "%s: out of memory for %lu samples", img_name,
			       (unsigned long)n);
	}
	float scale[256];
	for (int v = 0; v < 256; v++)
		scale[v] = (float)v / 255.0f;
	size_t total = (size_t)n * dim;
	for (size_t i = 0; i < total; i++)
		x[i] = scale[px[i]];
	unsigned maxl = 0;
	for (uint32_t i = 0; i < n; i++) {
		y[i] = lb[i];
		maxl = SL_MAX(maxl, (unsigned)lb[i]);
	}
	out->n = n;
	out->c = 1;
	out->h = (int)idims[1];
	out->w = (int)idims[2];
	out->dim = (int)dim;
	/* (Fashion-)MNIST has ten classes; a small test split may miss the
	 * top ones, which must not shrink the output layer. */
	out->classes = maxl <= 9 ? 10 : (int)maxl + 1;
	out->x = x;
	out->y = y;
	return 0;
}

int
ds_parse_idx(const uint8_t *img, size_t img_len, const uint8_t *lab,
	     size_t lab_len, dataset *out, const char *what, char *err)
{
	char in[SL_ERR_LEN], ln[SL_ERR_LEN];

	what = name_or_buffer(what);
	if (!out)
		return sl_fail(err, SL_EINVAL, "%s: NULL output", what);
	memset(out, 0, sizeof *out);
	snprintf(in, sizeof in, "%s: images", what);
	snprintf(ln, sizeof ln, "%s: labels", what);
	return parse_idx_named(img, img_len, in, lab, lab_len, ln, out, err);
}

/* ---- CIFAR-10 ------------------------------------------------------------ */

/* names[i] (when names is non-NULL) names buffer i in messages; otherwise
 * it is "<what>: buffer i". */
static int
parse_cifar_named(const uint8_t *const *bufs, const size_t *lens, int nbufs,
		  const char *const *names, const char *what, dataset *out,
		  char *err)
{
	char buf_name[SL_ERR_LEN];
	size_t total = 0;

	if (!bufs || !lens || nbufs <= 0)
		return sl_fail(err, SL_EINVAL, "%s: no CIFAR-10 buffers", what);
	for (int b = 0; b < nbufs; b++) {
		const char *loc = buf_name;
		if (names)
			loc = names[b];
		else
			snprintf(buf_name, sizeof buf_name, "%s: buffer %d",
				 what, b);
		if (!bufs[b] || lens[b] == 0 || lens[b] % CIFAR_RECORD)
			return sl_fail(err, SL_EFORMAT,
				       "%s: %zu bytes is not a whole, non-zero "
				       "number of %d-byte CIFAR-10 records",
				       loc, bufs[b] ? lens[b] : 0,
				       CIFAR_RECORD);
		size_t recs = lens[b] / CIFAR_RECORD;
		for (size_t r = 0; r < recs; r++) {
			unsigned label = bufs[b][r * CIFAR_RECORD];
			if (label >= 10)
				return sl_fail(err, SL_EFORMAT,
					       "%s: record %zu: label %u is "
					       "not below 10",
					       loc, r, label);
		}
		total += recs;
		if (total > UINT32_MAX)
			return sl_fail(err, SL_EFORMAT,
				       "%s: more than %lu CIFAR-10 records",
				       what, (unsigned long)UINT32_MAX);
	}

	float *x = sl_calloc_aligned(total, CIFAR_PIXELS * sizeof(float));
	uint8_t *y = malloc(total);
	if (!x || !y) {
		sl_free_aligned(x);
		free(y);
		return sl_fail(err, SL_ENOMEM,
			       "%s: out of memory for %zu samples", what, total);
	}
	float scale[256];
	for (int v = 0; v < 256; v++)
		scale[v] = (float)v / 255.0f;
	size_t i = 0;
	for (int b = 0; b < nbufs; b++) {
		size_t recs = lens[b] / CIFAR_RECORD;
		for (size_t r = 0; r < recs; r++, i++) {
			const uint8_t *rec = bufs[b] + r * CIFAR_RECORD;
			float *dst = x + i * CIFAR_PIXELS;
			y[i] = rec[0];
			/* the file is channel-major already, as is x */
			for (int p = 0; p < CIFAR_PIXELS; p++)
				dst[p] = scale[rec[1 + p]];
		}
	}
	out->n = (uint32_t)total;
	out->c = 3;
	out->h = 32;
	out->w = 32;
	out->dim = CIFAR_PIXELS;
	out->classes = 10;
	out->x = x;
	out->y = y;
	return 0;
}

int
ds_parse_cifar(const uint8_t *const *bufs, const size_t *lens, int nbufs,
	       dataset *out, const char *what, char *err)
{
	what = name_or_buffer(what);
	if (!out)
		return sl_fail(err, SL_EINVAL, "%s: NULL output", what);
	memset(out, 0, sizeof *out);
	return parse_cifar_named(bufs, lens, nbufs, NULL, what, out, err);
}

/* ---- synthetic ----------------------------------------------------------- */

int
ds_synthetic(uint32_t n, int dim, int classes, uint64_t seed,
	     uint64_t stream, dataset *out, char *err)
{
	if (!out)
		return sl_fail(err, SL_EINVAL, "synthetic: NULL output");
	memset(out, 0, sizeof *out);
	if (n == 0)
		return sl_fail(err, SL_EINVAL,
			       "synthetic: n must be positive (got 0)");
	if (dim <= 0)
		return sl_fail(err, SL_EINVAL,
			       "synthetic: dim must be positive (got %d)", dim);
	if (classes < 2 || classes > 255)
		return sl_fail(err, SL_EINVAL,
			       "synthetic: classes must be in 2..255 (got %d)",
			       classes);

	if ((size_t)dim > SIZE_MAX / sizeof(float) / (size_t)classes)
		return sl_fail(err, SL_ENOMEM, "synthetic: dim %d too large",
			       dim);
	float *means = malloc((size_t)classes * (size_t)dim * sizeof *means);
	float *x = sl_calloc_aligned(n, (size_t)dim * sizeof(float));
	uint8_t *y = malloc(n);
	if (!means || !x || !y) {
		free(means);
		sl_free_aligned(x);
		free(y);
		return sl_fail(err, SL_ENOMEM,
			       "synthetic: out of memory for %lu x %d samples",
			       (unsigned long)n, dim);
	}

	/* Cluster means depend on the seed only, so train and test splits
	 * (different streams) come from the same mixture. Entries uniform in
	 * [0.2, 0.8] put two means ~sqrt(dim * 0.06) apart, far more than the
	 * 0.1 noise per coordinate: linearly separable for any sensible dim. */
	rng r;
	rng_seed(&r, seed, SYN_MEAN_STREAM);
	for (size_t i = 0; i < (size_t)classes * (size_t)dim; i++)
		means[i] = (float)(0.2 + 0.6 * rng_uniform(&r));

	/* Balanced labels (i mod classes) in a seeded random order. */
	rng_seed(&r, seed, stream);
	for (uint32_t i = 0; i < n; i++)
		y[i] = (uint8_t)(i % (uint32_t)classes);
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = (uint32_t)rng_below(&r, i);
		uint8_t t = y[i - 1];
		y[i - 1] = y[j];
		y[j] = t;
	}
	for (uint32_t i = 0; i < n; i++) {
		const float *m = means + (size_t)y[i] * (size_t)dim;
		float *dst = x + (size_t)i * (size_t)dim;
		for (int k = 0; k < dim; k++) {
			double v = m[k] + 0.1 * rng_normal(&r);
			dst[k] = (float)(v < 0.0 ? 0.0 : v > 1.0 ? 1.0 : v);
		}
	}
	free(means);

	/* Square dims get a square image shape (784 -> 1x28x28) so image
	 * models can stand in for MNIST; anything else is 1x1xdim. */
	int side = (int)lround(sqrt((double)dim));
	out->n = n;
	out->c = 1;
	if (side * side == dim) {
		out->h = side;
		out->w = side;
	} else {
		out->h = 1;
		out->w = dim;
	}
	out->dim = dim;
	out->classes = classes;
	out->x = x;
	out->y = y;
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
			size_t ncap = cap > raw_limit / 2 ? raw_limit : cap * 2;
			uint8_t *p = realloc(buf, ncap);
			if (!p) {
				rc = sl_fail(err, SL_ENOMEM,
					     "%s: out of memory for %zu bytes",
					     path, ncap);
				break;
			}
			buf = p;
			cap = ncap;
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

static int
file_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

static int
join_path(char *dst, size_t cap, const char *dir, const char *name,
	  const char *suffix, char *err)
{
	int k = snprintf(dst, cap, "%s/%s%s", dir, name, suffix);
	if (k < 0 || (size_t)k >= cap)
		return sl_fail(err, SL_EINVAL, "%s/%s%s: path too long", dir,
			       name, suffix);
	return 0;
}

/* Find dir/<name>[.gz] for any of the spellings in names[0..nnames) and
 * write the first that exists into path. */
static int
find_file(char *path, size_t cap, const char *dir, const char *const *names,
	  int nnames, char *err)
{
	static const char *const suffix[] = {"", ".gz"};
	int rc;
	for (int i = 0; i < nnames; i++)
		for (int s = 0; s < 2; s++) {
			if ((rc = join_path(path, cap, dir, names[i], suffix[s],
					    err)))
				return rc;
			if (file_exists(path))
				return 0;
		}
	return sl_fail(err, SL_EIO, "%s/%s[.gz]: %s", dir, names[0],
		       strerror(ENOENT));
}

/* One IDX split: image and label files, each under its usual spellings. */
/* Labels number the classes 0..N-1. A label above a gap that no training
 * sample fills, or beyond the training set's classes in the test split,
 * is out of range (a corrupt byte), not a class of its own. */
static int
check_labels(dataset *d, const char *path, const dataset *train, char *err)
{
	unsigned limit = 10;
	if (train) {
		limit = (unsigned)train->classes;
	} else if (d->classes > 10) {
		unsigned char seen[256] = {0};
		for (uint32_t i = 0; i < d->n; i++)
			seen[d->y[i]] = 1;
		while (limit < 256 && seen[limit])
			limit++;
	}
	if ((int)limit >= d->classes)
		return 0;
	for (uint32_t i = 0; i < d->n; i++) {
		unsigned y = d->y[i];
		if (y < limit)
			continue;
		ds_free(d);
		if (train)
			return sl_fail(err, SL_EFORMAT,
				       "%s: label %u of sample %lu is out of range: the training "
				       "set's labels are 0..%u", path, y, (unsigned long)i, limit - 1);
		return sl_fail(err, SL_EFORMAT,
			       "%s: label %u of sample %lu is out of range: no training sample "
			       "has label %u (labels number the classes 0..N-1)",
			       path, y, (unsigned long)i, limit);
	}
	return 0;
}

static int
load_idx_split(const char *dir, const char *const img_names[2],
	       const char *const lab_names[2], const dataset *train,
	       dataset *out, char *err)
{
	char ipath[4096], lpath[4096];
	uint8_t *img = NULL, *lab = NULL;
	size_t ilen = 0, llen = 0;
	int rc;

	if ((rc = find_file(ipath, sizeof ipath, dir, img_names, 2, err)) ||
	    (rc = find_file(lpath, sizeof lpath, dir, lab_names, 2, err)) ||
	    (rc = ds_read_file(ipath, DS_MAX_FILE, &img, &ilen, err)) ||
	    (rc = ds_read_file(lpath, DS_MAX_FILE, &lab, &llen, err)))
		goto done;
	rc = parse_idx_named(img, ilen, ipath, lab, llen, lpath, out, err);
	if (!rc)
		rc = check_labels(out, lpath, train, err);
done:
	free(img);
	free(lab);
	return rc;
}

static int
load_idx_dir(const char *dir, dataset_pair *out, char *err)
{
	static const char *const train_img[2] = {"train-images-idx3-ubyte",
						 "train-images.idx3-ubyte"};
	static const char *const train_lab[2] = {"train-labels-idx1-ubyte",
						 "train-labels.idx1-ubyte"};
	static const char *const test_img[2] = {"t10k-images-idx3-ubyte",
						"t10k-images.idx3-ubyte"};
	static const char *const test_lab[2] = {"t10k-labels-idx1-ubyte",
						"t10k-labels.idx1-ubyte"};
	int rc = load_idx_split(dir, train_img, train_lab, NULL, &out->train, err);
	if (!rc)
		rc = load_idx_split(dir, test_img, test_lab, &out->train, &out->test, err);
	return rc;
}

static int
load_cifar_split(const char *dir, const char *const *names, int nfiles,
		 dataset *out, char *err)
{
	char paths[5][4096];
	const char *pnames[5];
	uint8_t *bufs[5] = {0};
	size_t lens[5] = {0};
	int rc = 0;

	SL_ASSERT(nfiles >= 1 && nfiles <= 5);
	for (int i = 0; i < nfiles && !rc; i++) {
		rc = find_file(paths[i], sizeof paths[i], dir, &names[i], 1,
			       err);
		if (!rc)
			rc = ds_read_file(paths[i], DS_MAX_FILE, &bufs[i],
					  &lens[i], err);
		pnames[i] = paths[i];
	}
	if (!rc)
		rc = parse_cifar_named((const uint8_t *const *)bufs, lens,
				       nfiles, pnames, dir, out, err);
	for (int i = 0; i < nfiles; i++)
		free(bufs[i]);
	return rc;
}

static int
load_cifar_dir(const char *dir, dataset_pair *out, char *err)
{
	static const char *const train[5] = {
		"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
		"data_batch_4.bin", "data_batch_5.bin"};
	static const char *const test[1] = {"test_batch.bin"};
	int rc = load_cifar_split(dir, train, 5, &out->train, err);
	if (!rc)
		rc = load_cifar_split(dir, test, 1, &out->test, err);
	return rc;
}

/* Strict decimal in 1..SYN_MAX_N: digits only, no sign, no spaces. */
static int
parse_count(const char *s, uint32_t *n, char *err)
{
	uint64_t v = 0;
	if (!*s)
		return sl_fail(err, SL_EINVAL,
			       "dataset: synthetic:<n> needs a sample count");
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return sl_fail(err, SL_EINVAL,
				       "dataset: synthetic:\"%s\" is not a "
				       "number (expected 1..%u)",
				       s, SYN_MAX_N);
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > SYN_MAX_N)
			break;
	}
	if (v == 0 || v > SYN_MAX_N)
		return sl_fail(err, SL_EINVAL,
			       "dataset: synthetic:%s out of range "
			       "(expected 1..%u)",
			       s, SYN_MAX_N);
	*n = (uint32_t)v;
	return 0;
}

static int
load_synthetic(uint32_t n, uint64_t seed, dataset_pair *out, char *err)
{
	uint32_t nt = SL_MAX(n / 6, 1u);
	int rc = ds_synthetic(n, SYN_DIM, SYN_CLASSES, seed, SYN_TRAIN_STREAM,
			      &out->train, err);
	if (!rc)
		rc = ds_synthetic(nt, SYN_DIM, SYN_CLASSES, seed,
				  SYN_TEST_STREAM, &out->test, err);
	snprintf(out->name, sizeof out->name, "synthetic:%lu",
		 (unsigned long)n);
	return rc;
}

/* Train and test must describe the same inputs and label space. */
static int
check_pair(dataset_pair *p, char *err)
{
	dataset *a = &p->train, *b = &p->test;
	if (a->dim != b->dim || a->c != b->c || a->h != b->h || a->w != b->w)
		return sl_fail(err, SL_EFORMAT,
			       "dataset %s: train samples are %dx%dx%d but "
			       "test samples are %dx%dx%d",
			       p->name, a->c, a->h, a->w, b->c, b->h, b->w);
	int classes = SL_MAX(a->classes, b->classes);
	a->classes = classes;
	b->classes = classes;
	return 0;
}

int
ds_load(const char *spec, uint64_t seed, dataset_pair *out, char *err)
{
	int rc;

	if (!out)
		return sl_fail(err, SL_EINVAL, "dataset: NULL output");
	memset(out, 0, sizeof *out);
	if (!spec)
		return sl_fail(err, SL_EINVAL, "dataset: no spec given");

	if (strcmp(spec, "fashion-mnist") == 0) {
		if (file_exists(DS_FASHION_DIR "/train-images-idx3-ubyte.gz")) {
			copy_str(out->name, sizeof out->name, "fashion-mnist");
			rc = load_idx_dir(DS_FASHION_DIR, out, err);
		} else {
			uint32_t n = 60000;
			rc = load_synthetic(n, seed, out, err);
			snprintf(out->note, sizeof out->note,
				 "fashion-mnist not found in %s (install "
				 "dataset-fashion-mnist); using synthetic:%lu",
				 DS_FASHION_DIR, (unsigned long)n);
		}
	} else if (strncmp(spec, "idx:", 4) == 0) {
		if (!spec[4])
			return sl_fail(err, SL_EINVAL,
				       "dataset: idx:<dir> needs a directory");
		copy_str(out->name, sizeof out->name, spec);
		rc = load_idx_dir(spec + 4, out, err);
	} else if (strncmp(spec, "cifar10:", 8) == 0) {
		if (!spec[8])
			return sl_fail(err, SL_EINVAL,
				       "dataset: cifar10:<dir> needs a "
				       "directory");
		copy_str(out->name, sizeof out->name, spec);
		rc = load_cifar_dir(spec + 8, out, err);
	} else if (strncmp(spec, "synthetic:", 10) == 0) {
		uint32_t n = 0;
		if ((rc = parse_count(spec + 10, &n, err)))
			return rc;
		rc = load_synthetic(n, seed, out, err);
	} else {
		return sl_fail(err, SL_EINVAL,
			       "dataset: unknown \"%s\" (expected fashion-mnist, "
			       "idx:<dir>, cifar10:<dir>, synthetic:<n>)",
			       spec);
	}
	if (!rc)
		rc = check_pair(out, err);
	if (rc)
		ds_pair_free(out);
	return rc;
}

void
ds_free(dataset *d)
{
	if (!d)
		return;
	sl_free_aligned(d->x);
	free(d->y);
	memset(d, 0, sizeof *d);
}

void
ds_pair_free(dataset_pair *p)
{
	if (!p)
		return;
	ds_free(&p->train);
	ds_free(&p->test);
	memset(p, 0, sizeof *p);
}
