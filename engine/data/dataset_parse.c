/* dataset_parse.c - the IDX and CIFAR-10 parsers: pure functions over byte
 * buffers that check every length before reading; on failure the output is
 * left zeroed. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset_impl.h"

#define CIFAR_PIXELS 3072
#define CIFAR_RECORD (1 + CIFAR_PIXELS)

static uint32_t
get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
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

int
ds_parse_idx_named(const uint8_t *img, size_t img_len, const char *img_name,
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
	out->ylen = 1;
	out->x = x;
	out->y = y;
	return 0;
}

int
ds_parse_idx(const uint8_t *img, size_t img_len, const uint8_t *lab,
	     size_t lab_len, dataset *out, const char *what, char *err)
{
	char in[SL_ERR_LEN], ln[SL_ERR_LEN];

	what = ds_name_or_buffer(what);
	if (!out)
		return sl_fail(err, SL_EINVAL, "%s: NULL output", what);
	memset(out, 0, sizeof *out);
	snprintf(in, sizeof in, "%s: images", what);
	snprintf(ln, sizeof ln, "%s: labels", what);
	return ds_parse_idx_named(img, img_len, in, lab, lab_len, ln, out, err);
}

/* ---- CIFAR-10 ------------------------------------------------------------ */

/* names[i] (when names is non-NULL) names buffer i in messages; otherwise
 * it is "<what>: buffer i". */
int
ds_parse_cifar_named(const uint8_t *const *bufs, const size_t *lens, int nbufs,
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
	out->ylen = 1;
	out->x = x;
	out->y = y;
	return 0;
}

int
ds_parse_cifar(const uint8_t *const *bufs, const size_t *lens, int nbufs,
	       dataset *out, const char *what, char *err)
{
	what = ds_name_or_buffer(what);
	if (!out)
		return sl_fail(err, SL_EINVAL, "%s: NULL output", what);
	memset(out, 0, sizeof *out);
	return ds_parse_cifar_named(bufs, lens, nbufs, NULL, what, out, err);
}
