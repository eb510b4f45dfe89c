/* test_dataset_load.c - files and ds_load: plain and gzip reads, IDX and
 * CIFAR-10 directories, errors naming the file, bad specs, Fashion-MNIST. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

/* data_batch_1..5.bin in dir, two records each (labels 3, 4); returns
 * the records (the caller frees) */
static uint8_t *
write_cifar_batches(const char *dir)
{
	uint8_t *rec = cifar_records(2, 3);
	char name[64];
	for (int i = 1; i <= 5; i++) {
		snprintf(name, sizeof name, "data_batch_%d.bin", i);
		write_in(dir, name, rec, 2 * 3073);
	}
	return rec;
}

START_TEST(load_cifar_dir)
{
	char dir[512], spec[600], err[SL_ERR_LEN] = "";
	dataset_pair p;
	sl_test_tmpdir(dir, sizeof dir);
	snprintf(spec, sizeof spec, "cifar10:%s", dir);
	uint8_t *rec = write_cifar_batches(dir);
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

/* ---- the cache of decoded splits ----------------------------------------- */

static void
age_files(const char *dir, time_t ago)
{
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	struct dirent *e;
	char path[1024];
	struct timespec t[2] = {{time(NULL) - ago, 0}, {time(NULL) - ago, 0}};
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		ck_assert_int_eq(utimensat(AT_FDCWD, path, t, 0), 0);
	}
	closedir(d);
}

static int
count_files(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* the cache file of the largest split (the train split, here) */
static void
biggest_file(const char *dir, char *path, size_t cap)
{
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	struct dirent *e;
	off_t best = -1;
	char p[1024];
	while ((e = readdir(d)) != NULL) {
		struct stat st;
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		if (e->d_name[0] != '.' && stat(p, &st) == 0 && st.st_size > best) {
			best = st.st_size;
			snprintf(path, cap, "%s", p);
		}
	}
	closedir(d);
	ck_assert(best > 0);
}

static void
same_split(const dataset *a, const dataset *b)
{
	ck_assert_uint_eq(a->n, b->n);
	ck_assert_int_eq(a->c, b->c);
	ck_assert_int_eq(a->h, b->h);
	ck_assert_int_eq(a->w, b->w);
	ck_assert_int_eq(a->dim, b->dim);
	ck_assert_int_eq(a->classes, b->classes);
	ck_assert_int_eq(ds_ylen(a), ds_ylen(b));
	ck_assert_mem_eq(a->x, b->x, (size_t)a->n * (size_t)a->dim * sizeof(float));
	ck_assert_mem_eq(a->y, b->y, (size_t)a->n * (size_t)ds_ylen(a));
}

/* spec decoded (not from the cache), then mapped from it; label 1 is y1 */
static void
decoded_then_mapped(const char *spec, unsigned y1)
{
	char err[SL_ERR_LEN] = "";
	dataset_pair q;
	for (int pass = 0; pass < 2; pass++) {
		ck_assert_int_eq(ds_load(spec, 1, &q, err), 0);
		ck_assert_msg((q.train.map != NULL) == pass, "pass %d: map %p", pass,
			      q.train.map);
		ck_assert_uint_eq(q.train.y[1], y1);
		ds_pair_free(&q);
	}
}

START_TEST(cache_maps_the_same_bits)
{
	char dir[512], cache[512], spec[600], big[1024], err[SL_ERR_LEN] = "";
	dataset_pair p, q;
	sl_test_tmpdir(dir, sizeof dir);
	sl_test_tmpdir(cache, sizeof cache);
	ck_assert_int_eq(setenv("STALELAB_CACHE", cache, 1), 0);
	write_idx_set(dir, "train", 0, 40);
	write_idx_set(dir, "t10k", 0, 7);
	snprintf(spec, sizeof spec, "idx:%s", dir);

	/* files just written are not cached: a rewrite could keep their time */
	ck_assert_int_eq(ds_load(spec, 1, &p, err), 0);
	ck_assert_ptr_null(p.train.map);
	ck_assert_int_eq(count_files(cache), 0);
	ds_pair_free(&p);

	/* settled files: decoded once and stored, then mapped, bit for bit */
	age_files(dir, 3600);
	ck_assert_int_eq(ds_load(spec, 1, &p, err), 0);
	ck_assert_ptr_null(p.train.map);
	ck_assert_int_eq(count_files(cache), 2);
	ck_assert_int_eq(ds_load(spec, 1, &q, err), 0);
	ck_assert_ptr_nonnull(q.train.map);
	ck_assert_ptr_nonnull(q.test.map);
	ck_assert_uint_eq((uintptr_t)q.train.x % 64, 0);
	same_split(&p.train, &q.train);
	same_split(&p.test, &q.test);
	ck_assert_str_eq(p.name, q.name);

	/* a write to the mapped floats is the process's own */
	float x0 = q.train.x[0];
	q.train.x[0] = 7.0f;
	q.train.y[0] = 9;
	ds_pair_free(&q);
	ck_assert(is_zeroed(&q, sizeof q));
	ck_assert_int_eq(ds_load(spec, 1, &q, err), 0);
	ck_assert_ptr_nonnull(q.train.map);
	ck_assert_float_eq(q.train.x[0], x0);
	same_split(&p.train, &q.train);
	ds_pair_free(&q);

	/* the labels rewritten at the same size: another key, decoded again */
	uint8_t lab[40];
	for (int i = 0; i < 40; i++)
		lab[i] = (uint8_t)((i * 3) % 10);
	size_t ll;
	uint8_t *labs = idx_labels(40, lab, 40, &ll);
	write_in(dir, "train-labels-idx1-ubyte", labs, ll);
	free(labs);
	age_files(dir, 60);
	decoded_then_mapped(spec, 3);
	ck_assert_int_eq(count_files(cache), 2); /* the new ones replaced the old */

	/* the same files under another spelling: the same cache file */
	char spec2[700];
	snprintf(spec2, sizeof spec2, "idx:%s/./", dir);
	ck_assert_int_eq(ds_load(spec2, 1, &q, err), 0);
	ck_assert_ptr_nonnull(q.train.map);
	ck_assert_uint_eq(q.train.y[1], 3);
	ds_pair_free(&q);
	ck_assert_int_eq(count_files(cache), 2);

	/* a truncated cache file is ignored and written again */
	rm_dir(cache);
	decoded_then_mapped(spec, 3);
	biggest_file(cache, big, sizeof big);
	ck_assert_int_eq(truncate(big, 5000), 0);
	decoded_then_mapped(spec, 3);

	/* a label out of range in the cache file: not ours, ignored */
	FILE *f = fopen(big, "r+b");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fseek(f, 4096 + 5, SEEK_SET), 0);
	ck_assert_int_eq(fputc(200, f), 200);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(ds_load(spec, 1, &q, err), 0);
	ck_assert_ptr_null(q.train.map);
	ck_assert_uint_eq(q.train.y[5], 5);
	ds_pair_free(&q);

	/* a header that lies about its size: ignored */
	f = fopen(big, "r+b");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fseek(f, 16, SEEK_SET), 0); /* n */
	ck_assert_int_eq(fputc(41, f), 41);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(ds_load(spec, 1, &q, err), 0);
	ck_assert_ptr_null(q.train.map);
	ck_assert_uint_eq(q.train.n, 40);
	ds_pair_free(&q);
	ds_pair_free(&p);

	/* off: nothing read, nothing written */
	rm_dir(cache);
	ck_assert_int_eq(setenv("STALELAB_CACHE", "off", 1), 0);
	ck_assert_int_eq(ds_load(spec, 1, &q, err), 0);
	ck_assert_ptr_null(q.train.map);
	ck_assert_int_eq(count_files(cache), 0);
	ds_pair_free(&q);
	rm_dir(dir);
}
END_TEST

START_TEST(cache_cifar_and_unwritable)
{
	char dir[512], cache[600], spec[600], err[SL_ERR_LEN] = "";
	dataset_pair p, q;
	sl_test_tmpdir(dir, sizeof dir);
	snprintf(spec, sizeof spec, "cifar10:%s", dir);
	uint8_t *rec = write_cifar_batches(dir);
	write_in(dir, "test_batch.bin", rec, 3073);
	free(rec);
	age_files(dir, 3600);

	/* a cache directory that cannot be made: loads as before */
	snprintf(cache, sizeof cache, "%s/test_batch.bin/sub", dir);
	ck_assert_int_eq(setenv("STALELAB_CACHE", cache, 1), 0);
	ck_assert_int_eq(ds_load(spec, 1, &p, err), 0);
	ck_assert_ptr_null(p.train.map);

	snprintf(cache, sizeof cache, "%s/cache/a/b", dir);
	ck_assert_int_eq(setenv("STALELAB_CACHE", cache, 1), 0);
	ck_assert_int_eq(ds_load(spec, 1, &q, err), 0);
	ck_assert_ptr_null(q.train.map);
	ds_pair_free(&q);
	ck_assert_int_eq(count_files(cache), 2);
	ck_assert_int_eq(ds_load(spec, 1, &q, err), 0);
	ck_assert_ptr_nonnull(q.train.map);
	ck_assert_ptr_nonnull(q.test.map);
	same_split(&p.train, &q.train);
	same_split(&p.test, &q.test);
	ds_pair_free(&q);
	ds_pair_free(&p);
	char sub[700];
	rm_dir(cache);
	snprintf(sub, sizeof sub, "%s/cache/a", dir);
	ck_assert_int_eq(rmdir(sub), 0);
	snprintf(sub, sizeof sub, "%s/cache", dir);
	ck_assert_int_eq(rmdir(sub), 0);
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
	tcase_add_test(tc, cache_maps_the_same_bits);
	tcase_add_test(tc, cache_cifar_and_unwritable);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(dataset_load_suite)
