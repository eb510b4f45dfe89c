/* dataset_util.h - for the Check suites of the data sets (test_dataset*.c,
 * test_augment_runs.c): IDX, gzip and CIFAR-10 inputs built in memory,
 * files in a temporary directory, and assertions. */
#ifndef SL_DATASET_UTIL_H
#define SL_DATASET_UTIL_H

#include <dirent.h>
#include <stdint.h>
#include <unistd.h>
#include <zlib.h>

#include "dataset.h"
#include "testutil.h"

static inline void
put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* IDX image file claiming n x rows x cols, holding `have` pixel bytes
 * (pixel i = (i * 37 + 11) & 0xff so 0 and 255 both occur). */
static inline uint8_t *
idx_images(uint32_t n, uint32_t rows, uint32_t cols, size_t have,
	   size_t *len)
{
	*len = 16 + have;
	uint8_t *b = malloc(*len);
	ck_assert_ptr_nonnull(b);
	b[0] = 0;
	b[1] = 0;
	b[2] = 0x08;
	b[3] = 3;
	put_be32(b + 4, n);
	put_be32(b + 8, rows);
	put_be32(b + 12, cols);
	for (size_t i = 0; i < have; i++)
		b[16 + i] = (uint8_t)((i * 37 + 11) & 0xff);
	return b;
}

static inline uint8_t *
idx_labels(uint32_t n, const uint8_t *labels, size_t have, size_t *len)
{
	*len = 8 + have;
	uint8_t *b = malloc(*len);
	ck_assert_ptr_nonnull(b);
	b[0] = 0;
	b[1] = 0;
	b[2] = 0x08;
	b[3] = 1;
	put_be32(b + 4, n);
	if (have)
		memcpy(b + 8, labels, have);
	return b;
}

/* A gzip member of src (deflate with the gzip wrapper). */
static inline uint8_t *
gz_bytes(const void *src, size_t len, size_t *out_len)
{
	z_stream zs;
	memset(&zs, 0, sizeof zs);
	ck_assert_int_eq(deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 8,
				      Z_DEFAULT_STRATEGY),
			 Z_OK);
	size_t cap = deflateBound(&zs, (uLong)len) + 32;
	uint8_t *out = malloc(cap);
	ck_assert_ptr_nonnull(out);
	zs.next_in = (Bytef *)(uintptr_t)src;
	zs.avail_in = (uInt)len;
	zs.next_out = out;
	zs.avail_out = (uInt)cap;
	ck_assert_int_eq(deflate(&zs, Z_FINISH), Z_STREAM_END);
	*out_len = cap - zs.avail_out;
	deflateEnd(&zs);
	return out;
}

static inline int
is_zeroed(const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

#define ASSERT_HAS(err, s) \
	ck_assert_msg(strstr((err), (s)) != NULL, "\"%s\" not in \"%s\"", (s), (err))

/* CIFAR-10 records: n of them, labels from label0 on (mod 10). */
static inline uint8_t *
cifar_records(int n, uint8_t label0)
{
	uint8_t *b = malloc((size_t)n * 3073);
	for (int r = 0; r < n; r++) {
		uint8_t *rec = b + (size_t)r * 3073;
		rec[0] = (uint8_t)((label0 + r) % 10);
		for (int p = 0; p < 3072; p++)
			rec[1 + p] = (uint8_t)(p * 3 + r);
	}
	return b;
}

/* Write a whole file dir/name. */
static inline void
write_in(const char *dir, const char *name, const void *data, size_t len)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	sl_test_write(path, data, len);
}

/* Remove a flat temp dir made by sl_test_tmpdir. */
static inline void
rm_dir(const char *dir)
{
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	struct dirent *e;
	char path[1024];
	while ((e = readdir(d)) != NULL) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		ck_assert_int_eq(unlink(path), 0);
	}
	closedir(d);
	ck_assert_int_eq(rmdir(dir), 0);
}

#endif
