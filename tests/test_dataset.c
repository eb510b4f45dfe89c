/* test_dataset.c - gzip, IDX, CIFAR-10, synthetic mixture and ds_load. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <zlib.h>

#include "dataset.h"
#include "testutil.h"

/* ---- helpers ------------------------------------------------------------- */

static void
put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* IDX image file claiming n x rows x cols, holding `have` pixel bytes
 * (pixel i = (i * 37 + 11) & 0xff so 0 and 255 both occur). */
static uint8_t *
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

static uint8_t *
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
static uint8_t *
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

static void
write_in(const char *dir, const char *name, const void *data, size_t len)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	sl_test_write(path, data, len);
}

static void
write_gz_in(const char *dir, const char *name, const void *data, size_t len)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	gzFile g = gzopen(path, "wb");
	ck_assert_ptr_nonnull(g);
	ck_assert_int_eq(gzwrite(g, data, (unsigned)len), (int)len);
	ck_assert_int_eq(gzclose(g), Z_OK);
}

/* Remove a flat temp dir made by sl_test_tmpdir. */
static void
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

static int
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

/* Standard small IDX pair: 3 images of 2x3, labels 0 9 3. */
static const uint8_t LABELS3[3] = {0, 9, 3};

static void
write_idx_set(const char *dir, const char *prefix, int gz, uint32_t n)
{
	size_t il, ll;
	uint8_t lab[64];
	for (uint32_t i = 0; i < n; i++)
		lab[i] = (uint8_t)((i * 7) % 10);
	uint8_t *img = idx_images(n, 2, 3, (size_t)n * 6, &il);
	uint8_t *labs = idx_labels(n, lab, n, &ll);
	char iname[128], lname[128];
	snprintf(iname, sizeof iname, "%s-images-idx3-ubyte%s", prefix,
		 gz ? ".gz" : "");
	snprintf(lname, sizeof lname, "%s-labels-idx1-ubyte%s", prefix,
		 gz ? ".gz" : "");
	if (gz) {
		write_gz_in(dir, iname, img, il);
		write_gz_in(dir, lname, labs, ll);
	} else {
		write_in(dir, iname, img, il);
		write_in(dir, lname, labs, ll);
	}
	free(img);
	free(labs);
}

/* ---- gunzip -------------------------------------------------------------- */

START_TEST(gunzip_roundtrip_and_copy)
{
	char err[SL_ERR_LEN] = "";
	uint8_t src[5000];
	for (size_t i = 0; i < sizeof src; i++)
		src[i] = (uint8_t)(i % 251);
	size_t zl, ol;
	uint8_t *z = gz_bytes(src, sizeof src, &zl), *o;
	ck_assert_uint_lt(zl, sizeof src);
	ck_assert_int_eq(ds_gunzip(z, zl, 1 << 20, &o, &ol, "z", err), 0);
	ck_assert_uint_eq(ol, sizeof src);
	ck_assert_mem_eq(o, src, sizeof src);
	free(o);

	/* not gzip: copied verbatim */
	ck_assert_int_eq(ds_gunzip(src, 100, 100, &o, &ol, "plain", err), 0);
	ck_assert_uint_eq(ol, 100);
	ck_assert_ptr_ne(o, src);
	ck_assert_mem_eq(o, src, 100);
	free(o);

	/* empty input copies to an empty (but freeable) buffer */
	ck_assert_int_eq(ds_gunzip(src, 0, 10, &o, &ol, "empty", err), 0);
	ck_assert_uint_eq(ol, 0);
	free(o);

	/* exactly max_out bytes of output is fine */
	ck_assert_int_eq(ds_gunzip(z, zl, sizeof src, &o, &ol, "z", err), 0);
	ck_assert_uint_eq(ol, sizeof src);
	free(o);
	free(z);
}
END_TEST

START_TEST(gunzip_concatenated_members)
{
	char err[SL_ERR_LEN] = "";
	const char *a = "hello, ", *b = "world";
	size_t al, bl, ol;
	uint8_t *za = gz_bytes(a, strlen(a), &al);
	uint8_t *zb = gz_bytes(b, strlen(b), &bl);
	uint8_t *cat = malloc(al + bl + 8), *o;
	memcpy(cat, za, al);
	memcpy(cat + al, zb, bl);
	ck_assert_int_eq(ds_gunzip(cat, al + bl, 100, &o, &ol, "cat", err), 0);
	ck_assert_uint_eq(ol, 12);
	ck_assert_mem_eq(o, "hello, world", 12);
	free(o);

	/* zero padding after the last member is tolerated */
	memset(cat + al + bl, 0, 8);
	ck_assert_int_eq(ds_gunzip(cat, al + bl + 8, 100, &o, &ol, "pad", err),
			 0);
	ck_assert_uint_eq(ol, 12);
	free(o);

	/* other trailing bytes are not */
	cat[al + bl + 3] = 'x';
	ck_assert_int_eq(ds_gunzip(cat, al + bl + 8, 100, &o, &ol, "junk.gz",
				   err),
			 -SL_EFORMAT);
	ASSERT_HAS(err, "junk.gz");
	ASSERT_HAS(err, "garbage");
	ck_assert_ptr_null(o);
	free(za);
	free(zb);
	free(cat);
}
END_TEST

START_TEST(gunzip_truncated_corrupt_and_bomb)
{
	char err[SL_ERR_LEN] = "";
	uint8_t src[20000];
	for (size_t i = 0; i < sizeof src; i++)
		src[i] = (uint8_t)((i * 7919) >> 3);
	size_t zl, ol = 99;
	uint8_t *z = gz_bytes(src, sizeof src, &zl), *o = (uint8_t *)1;

	/* every proper prefix longer than the magic is truncated */
	size_t cuts[] = {2, 3, 10, zl / 2, zl - 8, zl - 1};
	for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
		err[0] = '\0';
		ck_assert_int_eq(ds_gunzip(z, cuts[k], 1 << 20, &o, &ol,
					   "cut.gz", err),
				 -SL_EFORMAT);
		ASSERT_HAS(err, "cut.gz");
		ck_assert_ptr_null(o);
		ck_assert_uint_eq(ol, 0);
	}
	uint8_t *bad = malloc(zl);
	memcpy(bad, z, zl);
	bad[zl - 6] ^= 0xff; /* CRC */
	ck_assert_int_eq(ds_gunzip(bad, zl, 1 << 20, &o, &ol, "crc.gz", err),
			 -SL_EFORMAT);
	ASSERT_HAS(err, "crc.gz");
	ASSERT_HAS(err, "corrupt");
	memcpy(bad, z, zl);
	bad[3] = 0xe0; /* reserved flag bits */
	ck_assert_int_eq(ds_gunzip(bad, zl, 1 << 20, &o, &ol, "hdr.gz", err),
			 -SL_EFORMAT);
	ASSERT_HAS(err, "hdr.gz");
	free(bad);

	/* output limit */
	ck_assert_int_eq(ds_gunzip(z, zl, sizeof src - 1, &o, &ol, "bomb.gz",
				   err),
			 -SL_EFORMAT);
	ASSERT_HAS(err, "bomb.gz");
	ASSERT_HAS(err, "larger than 19999 bytes");
	ck_assert_ptr_null(o);
	/* and for plain copies */
	ck_assert_int_eq(ds_gunzip(src, 50, 49, &o, &ol, "raw", err),
			 -SL_EFORMAT);
	ASSERT_HAS(err, "larger than 49 bytes");

	/* a highly compressible bomb with a tiny limit */
	uint8_t *zeros = calloc(1, 1 << 20);
	size_t bl;
	uint8_t *bomb = gz_bytes(zeros, 1 << 20, &bl);
	ck_assert_int_eq(ds_gunzip(bomb, bl, 4096, &o, &ol, "zeros.gz", err),
			 -SL_EFORMAT);
	ASSERT_HAS(err, "larger than 4096 bytes");
	free(bomb);
	free(zeros);
	free(z);
}
END_TEST

/* ---- IDX ----------------------------------------------------------------- */

START_TEST(idx_parse_good)
{
	char err[SL_ERR_LEN] = "";
	size_t il, ll;
	uint8_t *img = idx_images(3, 2, 3, 18, &il);
	uint8_t *lab = idx_labels(3, LABELS3, 3, &ll);
	img[16 + 4] = 0;
	img[16 + 13] = 255;
	dataset d;
	ck_assert_int_eq(ds_parse_idx(img, il, lab, ll, &d, "t", err), 0);
	ck_assert_uint_eq(d.n, 3);
	ck_assert_int_eq(d.c, 1);
	ck_assert_int_eq(d.h, 2);
	ck_assert_int_eq(d.w, 3);
	ck_assert_int_eq(d.dim, 6);
	ck_assert_int_eq(d.classes, 10);
	ck_assert_uint_eq((uintptr_t)d.x % 64, 0);
	int saw0 = 0, saw255 = 0;
	for (int i = 0; i < 18; i++) {
		uint8_t p = img[16 + i];
		ck_assert_float_eq(d.x[i], (float)p / 255.0f);
		saw0 |= d.x[i] == 0.0f;
		saw255 |= d.x[i] == 1.0f;
	}
	/* pixel i of sample 1 row 1 col 2 sits at x[1*6 + 1*3 + 2] */
	ck_assert_float_eq(d.x[11], (float)img[16 + 11] / 255.0f);
	ck_assert(saw0 && saw255);
	ck_assert_float_eq(d.x[4], 0.0f);
	ck_assert_float_eq(d.x[13], 1.0f);
	ck_assert_mem_eq(d.y, LABELS3, 3);
	ds_free(&d);
	ck_assert(is_zeroed(&d, sizeof d));
	ds_free(&d); /* idempotent */
	ds_free(NULL);
	free(img);
	free(lab);
}
END_TEST

START_TEST(idx_classes_rule)
{
	char err[SL_ERR_LEN] = "";
	size_t il, ll;
	uint8_t *img = idx_images(3, 1, 1, 3, &il);
	dataset d;
	const uint8_t zeros[3] = {0, 0, 0}, big[3] = {12, 0, 5};
	uint8_t *lab = idx_labels(3, zeros, 3, &ll);
	ck_assert_int_eq(ds_parse_idx(img, il, lab, ll, &d, "t", err), 0);
	ck_assert_int_eq(d.classes, 10); /* MNIST-style even if one class */
	ds_free(&d);
	free(lab);
	lab = idx_labels(3, big, 3, &ll);
	ck_assert_int_eq(ds_parse_idx(img, il, lab, ll, &d, "t", err), 0);
	ck_assert_int_eq(d.classes, 13);
	ck_assert_uint_eq(d.y[0], 12);
	ds_free(&d);
	free(lab);
	free(img);
}
END_TEST

/* Expect ds_parse_idx to fail with SL_EFORMAT, *out zeroed, and err
 * containing both needles (second may be NULL). */
static void
expect_idx_fail(const uint8_t *img, size_t il, const uint8_t *lab, size_t ll,
		const char *n1, const char *n2)
{
	char err[SL_ERR_LEN] = "";
	dataset d;
	memset(&d, 0xa5, sizeof d);
	ck_assert_int_eq(ds_parse_idx(img, il, lab, ll, &d, "mnist.bin", err),
			 -SL_EFORMAT);
	ck_assert_msg(is_zeroed(&d, sizeof d), "output not zeroed");
	ASSERT_HAS(err, "mnist.bin");
	if (n1)
		ASSERT_HAS(err, n1);
	if (n2)
		ASSERT_HAS(err, n2);
}

START_TEST(idx_truncated_and_lying)
{
	size_t il, ll;
	uint8_t *lab = idx_labels(3, LABELS3, 3, &ll);

	uint8_t *img = idx_images(3, 2, 3, 17, &il); /* one pixel short */
	expect_idx_fail(img, il, lab, ll, "images", "3x2x3 (18 bytes)");
	free(img);

	img = idx_images(60000, 28, 28, 1234, &il);
	uint8_t *lab6 = idx_labels(60000, NULL, 0, &ll);
	char err[SL_ERR_LEN] = "";
	dataset d;
	ck_assert_int_eq(ds_parse_idx(img, il, lab6, ll, &d, "f", err),
			 -SL_EFORMAT);
	ck_assert_str_eq(err, "f: images: header says 60000x28x28 (47040000 "
			      "bytes) but file holds 1234 bytes after header");
	free(img);
	free(lab6);

	/* trailing bytes are rejected too */
	img = idx_images(3, 2, 3, 19, &il);
	expect_idx_fail(img, il, lab, ll, "images", "19 bytes after header");
	free(img);

	/* truncated headers at every length below 16 */
	img = idx_images(3, 2, 3, 18, &il);
	for (size_t k = 0; k < 16; k++)
		expect_idx_fail(img, k, lab, ll, "images", NULL);
	/* labels too short / truncated */
	for (size_t k = 0; k < 11; k++)
		expect_idx_fail(img, il, lab, k, "labels", NULL);
	expect_idx_fail(img, il, NULL, 0, "labels", NULL);
	free(img);
	free(lab);
}
END_TEST

START_TEST(idx_bad_magic_ndims_zero_count)
{
	size_t il, ll;
	uint8_t *img = idx_images(3, 2, 3, 18, &il);
	uint8_t *lab = idx_labels(3, LABELS3, 3, &ll);

	img[0] = 0x1f; /* e.g. still gzip-compressed */
	expect_idx_fail(img, il, lab, ll, "magic", NULL);
	img[0] = 0;
	img[2] = 0x0d; /* float elements */
	expect_idx_fail(img, il, lab, ll, "element type 0x0d", NULL);
	img[2] = 0x08;

	img[3] = 1; /* labels file passed as images */
	expect_idx_fail(img, il, lab, ll, "images", "1 dimensions, expected 3");
	img[3] = 3;
	lab[3] = 3;
	expect_idx_fail(img, il, lab, ll, "labels", "3 dimensions, expected 1");
	lab[3] = 1;

	/* swapped files */
	expect_idx_fail(lab, ll, img, il, "images", NULL);

	put_be32(img + 8, 0);
	expect_idx_fail(img, 16, lab, ll, "images", "is zero");
	put_be32(img + 8, 2);
	put_be32(img + 4, 0);
	expect_idx_fail(img, 16, lab, ll, "images", "is zero");
	free(img);

	/* 4 images vs 3 labels: both counts named */
	img = idx_images(4, 2, 3, 24, &il);
	expect_idx_fail(img, il, lab, ll, "4 images", "3 labels");
	free(img);

	/* dimensions whose product overflows */
	img = idx_images(0xffffffffu, 0xffffffffu, 0xffffffffu, 0, &il);
	expect_idx_fail(img, il, lab, ll, "images", "too large");
	free(img);
	free(lab);
}
END_TEST

/* ---- CIFAR --------------------------------------------------------------- */

static uint8_t *
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

START_TEST(cifar_good)
{
	char err[SL_ERR_LEN] = "";
	uint8_t *a = cifar_records(2, 7), *b = cifar_records(1, 4);
	const uint8_t *bufs[2] = {a, b};
	size_t lens[2] = {2 * 3073, 3073};
	dataset d;
	ck_assert_int_eq(ds_parse_cifar(bufs, lens, 2, &d, "c", err), 0);
	ck_assert_uint_eq(d.n, 3);
	ck_assert_int_eq(d.c, 3);
	ck_assert_int_eq(d.h, 32);
	ck_assert_int_eq(d.w, 32);
	ck_assert_int_eq(d.dim, 3072);
	ck_assert_int_eq(d.classes, 10);
	ck_assert_uint_eq(d.y[0], 7);
	ck_assert_uint_eq(d.y[1], 8);
	ck_assert_uint_eq(d.y[2], 4);
	/* sample 1, channel 2 (blue), row 5, col 9 */
	int p = (2 * 32 + 5) * 32 + 9;
	ck_assert_float_eq(d.x[3072 + p], (float)(uint8_t)(p * 3 + 1) / 255.0f);
	ck_assert_float_eq(d.x[2 * 3072], 0.0f);
	ck_assert_float_eq(d.x[2 * 3072 + 85], 1.0f); /* 85*3 = 255 */
	ds_free(&d);
	free(a);
	free(b);
}
END_TEST

START_TEST(cifar_bad)
{
	char err[SL_ERR_LEN] = "";
	uint8_t *a = cifar_records(2, 0), *b = cifar_records(3, 0);
	const uint8_t *bufs[2] = {a, b};
	size_t lens[2] = {2 * 3073, 3 * 3073};
	dataset d;

	b[2 * 3073] = 10;
	memset(&d, 0x5a, sizeof d);
	ck_assert_int_eq(ds_parse_cifar(bufs, lens, 2, &d, "cif", err),
			 -SL_EFORMAT);
	ck_assert(is_zeroed(&d, sizeof d));
	ASSERT_HAS(err, "cif");
	ASSERT_HAS(err, "buffer 1");
	ASSERT_HAS(err, "record 2");
	ASSERT_HAS(err, "label 10");
	b[2 * 3073] = 0;

	lens[1] = 3 * 3073 - 1; /* partial last record */
	ck_assert_int_eq(ds_parse_cifar(bufs, lens, 2, &d, "cif", err),
			 -SL_EFORMAT);
	ASSERT_HAS(err, "buffer 1");
	ASSERT_HAS(err, "9218 bytes");
	lens[1] = 0;
	ck_assert_int_eq(ds_parse_cifar(bufs, lens, 2, &d, "cif", err),
			 -SL_EFORMAT);
	lens[1] = 3073;
	ck_assert_int_eq(ds_parse_cifar(bufs, lens, 0, &d, "cif", err),
			 -SL_EINVAL);
	ck_assert_int_eq(ds_parse_cifar(bufs, lens, 2, &d, "cif", err), 0);
	ck_assert_uint_eq(d.n, 3);
	ds_free(&d);
	free(a);
	free(b);
}
END_TEST

/* ---- synthetic ----------------------------------------------------------- */

START_TEST(synthetic_deterministic)
{
	char err[SL_ERR_LEN] = "";
	dataset a, b, c, s;
	ck_assert_int_eq(ds_synthetic(500, 50, 7, 42, 1, &a, err), 0);
	ck_assert_int_eq(ds_synthetic(500, 50, 7, 42, 1, &b, err), 0);
	ck_assert_int_eq(ds_synthetic(500, 50, 7, 43, 1, &c, err), 0);
	ck_assert_int_eq(ds_synthetic(500, 50, 7, 42, 2, &s, err), 0);
	ck_assert_uint_eq(a.n, 500);
	ck_assert_int_eq(a.dim, 50);
	ck_assert_int_eq(a.c * a.h * a.w, 50);
	ck_assert_int_eq(a.classes, 7);
	ck_assert_mem_eq(a.x, b.x, 500 * 50 * sizeof(float));
	ck_assert_mem_eq(a.y, b.y, 500);
	ck_assert(memcmp(a.x, c.x, 500 * 50 * sizeof(float)) != 0);
	ck_assert(memcmp(a.x, s.x, 500 * 50 * sizeof(float)) != 0);

	int count[7] = {0};
	for (int i = 0; i < 500; i++) {
		ck_assert_uint_lt(a.y[i], 7);
		count[a.y[i]]++;
	}
	for (int k = 0; k < 7; k++) /* balanced: 500/7 = 71 or 72 */
		ck_assert_int_ge(count[k], 71);
	for (int i = 0; i < 500 * 50; i++)
		ck_assert(a.x[i] >= 0.0f && a.x[i] <= 1.0f);

	/* same seed, other stream: same cluster means. Per-class average of
	 * stream 1 and stream 2 agree to within noise (0.1/sqrt(70)). */
	double maxdiff = 0;
	for (int k = 0; k < 7; k++)
		for (int j = 0; j < 50; j++) {
			double ma = 0, ms = 0;
			int na = 0, ns = 0;
			for (int i = 0; i < 500; i++) {
				if (a.y[i] == k) {
					ma += a.x[i * 50 + j];
					na++;
				}
				if (s.y[i] == k) {
					ms += s.x[i * 50 + j];
					ns++;
				}
			}
			double dd = fabs(ma / na - ms / ns);
			maxdiff = dd > maxdiff ? dd : maxdiff;
		}
	ck_assert_double_lt(maxdiff, 0.08);

	/* square dims get an image shape */
	dataset q;
	ck_assert_int_eq(ds_synthetic(3, 784, 2, 1, 1, &q, err), 0);
	ck_assert_int_eq(q.h, 28);
	ck_assert_int_eq(q.w, 28);
	ds_free(&q);
	ds_free(&a);
	ds_free(&b);
	ds_free(&c);
	ds_free(&s);
}
END_TEST

START_TEST(synthetic_validation)
{
	char err[SL_ERR_LEN] = "";
	dataset d;
	memset(&d, 1, sizeof d);
	ck_assert_int_eq(ds_synthetic(0, 10, 3, 1, 1, &d, err), -SL_EINVAL);
	ASSERT_HAS(err, "n must be");
	ck_assert(is_zeroed(&d, sizeof d));
	ck_assert_int_eq(ds_synthetic(10, 0, 3, 1, 1, &d, err), -SL_EINVAL);
	ASSERT_HAS(err, "dim");
	ck_assert_int_eq(ds_synthetic(10, -4, 3, 1, 1, &d, err), -SL_EINVAL);
	ASSERT_HAS(err, "dim");
	ck_assert_int_eq(ds_synthetic(10, 4, 1, 1, 1, &d, err), -SL_EINVAL);
	ASSERT_HAS(err, "classes");
	ck_assert_int_eq(ds_synthetic(10, 4, 256, 1, 1, &d, err), -SL_EINVAL);
	ASSERT_HAS(err, "classes");
	ck_assert_int_eq(ds_synthetic(10, 4, 255, 1, 1, &d, err), 0);
	ck_assert_int_eq(d.classes, 255);
	ds_free(&d);
	ck_assert_int_eq(ds_synthetic(1, 1, 2, 1, 1, &d, err), 0);
	ds_free(&d);
}
END_TEST

/* Plain SGD softmax regression on train, accuracy on test. */
static double
softmax_accuracy(const dataset *tr, const dataset *te, int epochs)
{
	int d = tr->dim, k = tr->classes;
	float *w = calloc((size_t)d * (size_t)k, sizeof *w);
	float *b = calloc((size_t)k, sizeof *b), *z = calloc((size_t)k, sizeof *z);
	ck_assert_ptr_nonnull(w);
	for (int e = 0; e < epochs; e++)
		for (uint32_t i = 0; i < tr->n; i++) {
			const float *x = tr->x + (size_t)i * (size_t)d;
			float mx = -1e30f, sum = 0;
			for (int j = 0; j < k; j++) {
				float s = b[j];
				for (int t = 0; t < d; t++)
					s += w[(size_t)j * d + t] * x[t];
				z[j] = s;
				mx = s > mx ? s : mx;
			}
			for (int j = 0; j < k; j++)
				sum += (z[j] = expf(z[j] - mx));
			for (int j = 0; j < k; j++) {
				float g = z[j] / sum - (j == tr->y[i]);
				b[j] -= 0.01f * g;
				for (int t = 0; t < d; t++)
					w[(size_t)j * d + t] -= 0.01f * g * x[t];
			}
		}
	uint32_t ok = 0;
	for (uint32_t i = 0; i < te->n; i++) {
		const float *x = te->x + (size_t)i * (size_t)d;
		int best = 0;
		float bs = -1e30f;
		for (int j = 0; j < k; j++) {
			float s = b[j];
			for (int t = 0; t < d; t++)
				s += w[(size_t)j * d + t] * x[t];
			if (s > bs) {
				bs = s;
				best = j;
			}
		}
		ok += best == te->y[i];
	}
	free(w);
	free(b);
	free(z);
	return (double)ok / te->n;
}

START_TEST(synthetic_separable_via_load)
{
	char err[SL_ERR_LEN] = "";
	dataset_pair p;
	ck_assert_int_eq(ds_load("synthetic:600", 7, &p, err), 0);
	ck_assert_str_eq(p.name, "synthetic:600");
	ck_assert_str_eq(p.note, "");
	ck_assert_uint_eq(p.train.n, 600);
	ck_assert_uint_eq(p.test.n, 100);
	ck_assert_int_eq(p.train.dim, 784);
	ck_assert_int_eq(p.test.dim, 784);
	ck_assert_int_eq(p.train.h, 28);
	ck_assert_int_eq(p.train.classes, 10);
	ck_assert_int_eq(p.test.classes, 10);
	/* different samples ... */
	ck_assert(memcmp(p.train.x, p.test.x, 100 * 784 * sizeof(float)) != 0);
	/* ... from the same mixture: a linear model trained on one split
	 * classifies the other */
	double acc = softmax_accuracy(&p.train, &p.test, 2);
	ck_assert_msg(acc > 0.9, "test accuracy %.3f", acc);
	ds_pair_free(&p);
	ck_assert(is_zeroed(&p, sizeof p));
	ds_pair_free(&p);
	ds_pair_free(NULL);

	ck_assert_int_eq(ds_load("synthetic:5", 7, &p, err), 0);
	ck_assert_uint_eq(p.train.n, 5);
	ck_assert_uint_eq(p.test.n, 1);
	ds_pair_free(&p);
}
END_TEST

/* ---- files and ds_load --------------------------------------------------- */

START_TEST(read_file_plain_gz_missing)
{
	char dir[512], path[1024], err[SL_ERR_LEN] = "";
	sl_test_tmpdir(dir, sizeof dir);
	const char *text = "some bytes\n";
	write_in(dir, "a.txt", text, strlen(text));
	write_gz_in(dir, "a.txt.gz", text, strlen(text));
	uint8_t *o;
	size_t ol;

	snprintf(path, sizeof path, "%s/a.txt", dir);
	ck_assert_int_eq(ds_read_file(path, 100, &o, &ol, err), 0);
	ck_assert_uint_eq(ol, strlen(text));
	ck_assert_mem_eq(o, text, ol);
	free(o);
	ck_assert_int_eq(ds_read_file(path, 5, &o, &ol, err), -SL_EFORMAT);
	ASSERT_HAS(err, path);
	ASSERT_HAS(err, "larger than 5 bytes");

	snprintf(path, sizeof path, "%s/a.txt.gz", dir);
	ck_assert_int_eq(ds_read_file(path, 100, &o, &ol, err), 0);
	ck_assert_uint_eq(ol, strlen(text));
	ck_assert_mem_eq(o, text, ol);
	free(o);

	snprintf(path, sizeof path, "%s/nope", dir);
	ck_assert_int_eq(ds_read_file(path, 100, &o, &ol, err), -SL_EIO);
	ASSERT_HAS(err, path);
	ASSERT_HAS(err, "No such file");
	ck_assert_ptr_null(o);

	ck_assert_int_eq(ds_read_file(dir, 100, &o, &ol, err), -SL_EIO);
	ASSERT_HAS(err, dir);
	rm_dir(dir);
}
END_TEST

static void
check_small_pair(const dataset_pair *p, uint32_t ntest)
{
	ck_assert_uint_eq(p->train.n, 5);
	ck_assert_uint_eq(p->test.n, ntest);
	ck_assert_int_eq(p->train.h, 2);
	ck_assert_int_eq(p->train.w, 3);
	ck_assert_int_eq(p->train.dim, 6);
	ck_assert_int_eq(p->test.dim, 6);
	ck_assert_int_eq(p->train.classes, 10);
	ck_assert_int_eq(p->test.classes, 10);
	for (uint32_t i = 0; i < 5; i++)
		ck_assert_uint_eq(p->train.y[i], (i * 7) % 10);
	for (int i = 0; i < 30; i++)
		ck_assert_float_eq(p->train.x[i],
				   (float)(uint8_t)((i * 37 + 11) & 0xff) /
					   255.0f);
}

START_TEST(load_idx_dir_plain_and_gz)
{
	char dir[512], spec[600], err[SL_ERR_LEN] = "";
	dataset_pair p;

	sl_test_tmpdir(dir, sizeof dir);
	write_idx_set(dir, "train", 0, 5);
	write_idx_set(dir, "t10k", 0, 2);
	snprintf(spec, sizeof spec, "idx:%s", dir);
	ck_assert_int_eq(ds_load(spec, 1, &p, err), 0);
	check_small_pair(&p, 2);
	ck_assert_str_eq(p.note, "");
	ck_assert_int_eq(strncmp(p.name, "idx:", 4), 0);
	ds_pair_free(&p);
	rm_dir(dir);

	sl_test_tmpdir(dir, sizeof dir);
	write_idx_set(dir, "train", 1, 5);
	write_idx_set(dir, "t10k", 1, 3);
	snprintf(spec, sizeof spec, "idx:%s", dir);
	ck_assert_int_eq(ds_load(spec, 1, &p, err), 0);
	check_small_pair(&p, 3);
	ds_pair_free(&p);

	/* the "train-images.idx3-ubyte" spelling works too */
	char a[1024], b[1024];
	snprintf(a, sizeof a, "%s/t10k-images-idx3-ubyte.gz", dir);
	snprintf(b, sizeof b, "%s/t10k-images.idx3-ubyte.gz", dir);
	ck_assert_int_eq(rename(a, b), 0);
	ck_assert_int_eq(ds_load(spec, 1, &p, err), 0);
	check_small_pair(&p, 3);
	ds_pair_free(&p);
	rm_dir(dir);
}
END_TEST

START_TEST(load_idx_errors_name_file)
{
	char dir[512], spec[600], err[SL_ERR_LEN] = "";
	dataset_pair p;

	sl_test_tmpdir(dir, sizeof dir);
	snprintf(spec, sizeof spec, "idx:%s", dir);
	/* empty dir */
	memset(&p, 0x33, sizeof p);
	ck_assert_int_eq(ds_load(spec, 1, &p, err), -SL_EIO);
	ck_assert(is_zeroed(&p, sizeof p));
	ASSERT_HAS(err, dir);
	ASSERT_HAS(err, "train-images-idx3-ubyte");

	/* train present, test labels missing: train is freed again */
	write_idx_set(dir, "train", 0, 5);
	write_idx_set(dir, "t10k", 0, 2);
	char path[1024];
	snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte", dir);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(ds_load(spec, 1, &p, err), -SL_EIO);
	ck_assert(is_zeroed(&p, sizeof p));
	ASSERT_HAS(err, "t10k-labels-idx1-ubyte");

	/* test labels with a different count */
	uint8_t lab[4] = {1, 2, 3, 4};
	size_t ll;
	uint8_t *lb = idx_labels(4, lab, 4, &ll);
	write_in(dir, "t10k-labels-idx1-ubyte", lb, ll);
	free(lb);
	ck_assert_int_eq(ds_load(spec, 1, &p, err), -SL_EFORMAT);
	ASSERT_HAS(err, "t10k-images-idx3-ubyte has 2 images");
	ASSERT_HAS(err, "t10k-labels-idx1-ubyte has 4 labels");

	/* truncated gzip images file */
	size_t il, zl;
	uint8_t *img = idx_images(2, 2, 3, 12, &il);
	uint8_t *z = gz_bytes(img, il, &zl);
	unlink(path);
	write_idx_set(dir, "t10k", 0, 2);
	snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte", dir);
	ck_assert_int_eq(unlink(path), 0);
	write_in(dir, "t10k-images-idx3-ubyte.gz", z, zl - 5);
	ck_assert_int_eq(ds_load(spec, 1, &p, err), -SL_EFORMAT);
	ASSERT_HAS(err, "t10k-images-idx3-ubyte.gz");
	ASSERT_HAS(err, "truncated");
	ck_assert(is_zeroed(&p, sizeof p));

	/* test images of another shape */
	free(img);
	free(z);
	img = idx_images(2, 3, 2, 12, &il);
	z = gz_bytes(img, il, &zl);
	write_in(dir, "t10k-images-idx3-ubyte.gz", z, zl);
	ck_assert_int_eq(ds_load(spec, 1, &p, err), -SL_EFORMAT);
	ASSERT_HAS(err, "1x2x3");
	ASSERT_HAS(err, "1x3x2");
	free(img);
	free(z);
	rm_dir(dir);

	ck_assert_int_eq(ds_load("idx:", 1, &p, err), -SL_EINVAL);
	ck_assert_int_eq(ds_load("idx:/nonexistent/stalelab", 1, &p, err),
			 -SL_EIO);
	ASSERT_HAS(err, "/nonexistent/stalelab");
}
END_TEST

START_TEST(load_cifar_dir)
{
	char dir[512], spec[600], err[SL_ERR_LEN] = "";
	dataset_pair p;
	sl_test_tmpdir(dir, sizeof dir);
	snprintf(spec, sizeof spec, "cifar10:%s", dir);
	uint8_t *rec = cifar_records(2, 3);
	char name[64];
	for (int i = 1; i <= 5; i++) {
		snprintf(name, sizeof name, "data_batch_%d.bin", i);
		write_in(dir, name, rec, 2 * 3073);
	}
	ck_assert_int_eq(ds_load(spec, 1, &p, err), -SL_EIO);
	ASSERT_HAS(err, "test_batch.bin");
	write_in(dir, "test_batch.bin", rec, 3073);
	ck_assert_int_eq(ds_load(spec, 1, &p, err), 0);
	ck_assert_uint_eq(p.train.n, 10);
	ck_assert_uint_eq(p.test.n, 1);
	ck_assert_int_eq(p.train.dim, 3072);
	ck_assert_uint_eq(p.train.y[9], 4);
	ds_pair_free(&p);

	rec[3073] = 200;
	write_in(dir, "data_batch_4.bin", rec, 2 * 3073);
	ck_assert_int_eq(ds_load(spec, 1, &p, err), -SL_EFORMAT);
	ASSERT_HAS(err, "data_batch_4.bin");
	ASSERT_HAS(err, "record 1");
	free(rec);
	rm_dir(dir);
}
END_TEST

START_TEST(load_bad_specs)
{
	char err[SL_ERR_LEN] = "";
	dataset_pair p;
	ck_assert_int_eq(ds_load("xyz", 1, &p, err), -SL_EINVAL);
	ck_assert_str_eq(err, "dataset: unknown \"xyz\" (expected "
			      "fashion-mnist, idx:<dir>, cifar10:<dir>, "
			      "synthetic:<n>)");
	const char *bad[] = {"synthetic:abc", "synthetic:0", "synthetic:",
			     "synthetic:-5", "synthetic:+5", "synthetic: 5",
			     "synthetic:5x", "synthetic:10000001",
			     "synthetic:99999999999999999999999", "Fashion-MNIST",
			     ""};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		memset(&p, 0x77, sizeof p);
		ck_assert_int_eq(ds_load(bad[i], 1, &p, err), -SL_EINVAL);
		ck_assert_msg(strncmp(err, "dataset: ", 9) == 0, "%s: %s",
			      bad[i], err);
		ck_assert(is_zeroed(&p, sizeof p));
	}
	ds_load("synthetic:abc", 1, &p, err);
	ASSERT_HAS(err, "abc");
	ck_assert_int_eq(ds_load(NULL, 1, &p, err), -SL_EINVAL);
	ck_assert_int_eq(ds_load("xyz", 1, &p, NULL), -SL_EINVAL);
}
END_TEST

START_TEST(load_fashion_mnist)
{
	char err[SL_ERR_LEN] = "";
	dataset_pair p;
	struct stat st;
	int present = stat(DS_FASHION_DIR "/train-images-idx3-ubyte.gz", &st) == 0;
	ck_assert_int_eq(ds_load("fashion-mnist", 1, &p, err), 0);
	ck_assert_uint_eq(p.train.n, 60000);
	ck_assert_uint_eq(p.test.n, 10000);
	ck_assert_int_eq(p.train.h, 28);
	ck_assert_int_eq(p.train.w, 28);
	ck_assert_int_eq(p.train.dim, 784);
	ck_assert_int_eq(p.train.classes, 10);
	ck_assert_int_eq(p.test.classes, 10);
	if (present) {
		ck_assert_str_eq(p.name, "fashion-mnist");
		ck_assert_str_eq(p.note, "");
		ck_assert_uint_eq(p.train.y[0], 9); /* ankle boot */
		ck_assert_uint_eq(p.test.y[0], 9);
		int seen[10] = {0};
		for (uint32_t i = 0; i < p.train.n; i++)
			seen[p.train.y[i]]++;
		for (int k = 0; k < 10; k++)
			ck_assert_int_eq(seen[k], 6000);
	} else {
		/* package absent: the synthetic stand-in, with a note */
		ck_assert_str_eq(p.name, "synthetic:60000");
		ASSERT_HAS(p.note, "dataset-fashion-mnist");
		ASSERT_HAS(p.note, "synthetic:60000");
	}
	ds_pair_free(&p);
}
END_TEST

static Suite *
dataset_suite(void)
{
	Suite *s = suite_create("dataset");
	TCase *tc = tcase_create("gunzip");
	tcase_add_test(tc, gunzip_roundtrip_and_copy);
	tcase_add_test(tc, gunzip_concatenated_members);
	tcase_add_test(tc, gunzip_truncated_corrupt_and_bomb);
	suite_add_tcase(s, tc);

	tc = tcase_create("idx");
	tcase_add_test(tc, idx_parse_good);
	tcase_add_test(tc, idx_classes_rule);
	tcase_add_test(tc, idx_truncated_and_lying);
	tcase_add_test(tc, idx_bad_magic_ndims_zero_count);
	suite_add_tcase(s, tc);

	tc = tcase_create("cifar");
	tcase_add_test(tc, cifar_good);
	tcase_add_test(tc, cifar_bad);
	suite_add_tcase(s, tc);

	tc = tcase_create("synthetic");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, synthetic_deterministic);
	tcase_add_test(tc, synthetic_validation);
	tcase_add_test(tc, synthetic_separable_via_load);
	suite_add_tcase(s, tc);

	tc = tcase_create("load");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, read_file_plain_gz_missing);
	tcase_add_test(tc, load_idx_dir_plain_and_gz);
	tcase_add_test(tc, load_idx_errors_name_file);
	tcase_add_test(tc, load_cifar_dir);
	tcase_add_test(tc, load_bad_specs);
	tcase_add_test(tc, load_fashion_mnist);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(dataset_suite)
