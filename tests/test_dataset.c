/* test_dataset.c - the parsers over bytes in memory: gzip, IDX and
 * CIFAR-10 (test_dataset_synth.c: the mixture; test_dataset_load.c: files
 * and ds_load). */
#define _POSIX_C_SOURCE 200809L
#include "dataset_util.h"

/* Standard small IDX pair: 3 images of 2x3, labels 0 9 3. */
static const uint8_t LABELS3[3] = {0, 9, 3};

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
	ck_assert_int_eq(d.ylen, 1); /* one label a sample */
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
	ck_assert_int_eq(d.ylen, 1); /* one label a sample */
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
	return s;
}

SL_TEST_MAIN(dataset_suite)
