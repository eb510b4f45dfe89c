/* test_dataset_load.c - files and ds_load: plain and gzip reads, IDX and
 * CIFAR-10 directories, errors naming the file, bad specs, Fashion-MNIST. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <sys/stat.h>

#include "dataset_util.h"

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
			      "synthetic:<n>, blobs:<centres>,<per>,<dim>,<classes>[,<sigma>], "
			      "text:<file>, synthetic-text:<n>)");
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
dataset_load_suite(void)
{
	Suite *s = suite_create("dataset_load");
	TCase *tc = tcase_create("load");
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

SL_TEST_MAIN(dataset_load_suite)
