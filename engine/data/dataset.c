/* dataset.c - data sets by spec: "fashion-mnist", "idx:<dir>",
 * "cifar10:<dir>", "synthetic:<n>", "text:<file>", "synthetic-text:<n>"
 * turned into file names, the files read and handed to the parsers
 * (dataset_parse.c, dataset_synth.c, dataset_text.c); ds_free.
 * On failure every function frees what it allocated and leaves its output
 * zeroed. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "dataset_impl.h"

/* Largest file (after decompression) the loaders accept. */
#define DS_MAX_FILE ((size_t)1 << 30)

/* The synthetic splits' streams (the cluster means have their own,
 * dataset_synth.c) and shape. */
#define SYN_TRAIN_STREAM 1
#define SYN_TEST_STREAM 2
#define SYN_DIM 784
#define SYN_CLASSES 10
#define SYN_MAX_N 10000000u

/* synthetic-text:<n>'s largest n, and the text that stands in for
 * text:webster when dict-gcide is not installed. */
#define SYN_TEXT_MAX_N ((uint32_t)DS_TEXT_MAX_BYTES)
#define SYN_TEXT_FALLBACK 1000000u

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
	    (rc = find_file(lpath, sizeof lpath, dir, lab_names, 2, err)))
		return rc;
	const char *const src[2] = {ipath, lpath};
	if (ds_cache_load(src, 2, out))
		return check_labels(out, lpath, train, err);
	if ((rc = ds_read_file(ipath, DS_MAX_FILE, &img, &ilen, err)) ||
	    (rc = ds_read_file(lpath, DS_MAX_FILE, &lab, &llen, err)))
		goto done;
	rc = ds_parse_idx_named(img, ilen, ipath, lab, llen, lpath, out, err);
	if (!rc)
		rc = check_labels(out, lpath, train, err);
	if (!rc)
		ds_cache_store(src, 2, out);
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
		pnames[i] = paths[i];
	}
	if (!rc && ds_cache_load(pnames, nfiles, out))
		return 0;
	for (int i = 0; i < nfiles && !rc; i++)
		rc = ds_read_file(paths[i], DS_MAX_FILE, &bufs[i], &lens[i], err);
	if (!rc)
		rc = ds_parse_cifar_named((const uint8_t *const *)bufs, lens,
					  nfiles, pnames, dir, out, err);
	if (!rc)
		ds_cache_store(pnames, nfiles, out);
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

/* Strict decimal in 1..max: digits only, no sign, no spaces. kind names
 * the spec ("synthetic") and what its count counts in messages. */
static int
parse_count(const char *s, const char *kind, const char *what, uint32_t max,
	    uint32_t *n, char *err)
{
	uint64_t v = 0;
	if (!*s)
		return sl_fail(err, SL_EINVAL, "dataset: %s:<n> needs %s", kind,
			       what);
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return sl_fail(err, SL_EINVAL,
				       "dataset: %s:\"%s\" is not a "
				       "number (expected 1..%lu)",
				       kind, s, (unsigned long)max);
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > max)
			break;
	}
	if (v == 0 || v > max)
		return sl_fail(err, SL_EINVAL,
			       "dataset: %s:%s out of range "
			       "(expected 1..%lu)",
			       kind, s, (unsigned long)max);
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

int
ds_spec_is_text(const char *spec)
{
	return spec && (strncmp(spec, "text:", 5) == 0 ||
			strncmp(spec, "synthetic-text:", 15) == 0);
}

static int
load_synthetic_text(uint32_t n, int ctx, uint64_t seed, dataset_pair *out,
		    char *err)
{
	uint8_t *text = NULL;
	char what[64];
	snprintf(what, sizeof what, "synthetic-text:%lu", (unsigned long)n);
	int rc = ds_synthetic_text(n, seed, &text, err);
	if (!rc)
		rc = ds_text(text, n, ctx, seed, what, out, err);
	free(text);
	copy_str(out->name, sizeof out->name, what);
	return rc;
}

/* "text:<file>", "text:webster", "synthetic-text:<n>" for contexts of
 * ctx bytes. */
static int
load_text(const char *spec, int ctx, uint64_t seed, dataset_pair *out,
	  char *err)
{
	int rc;
	if (ctx < 1 || ctx > DS_TEXT_MAX_CTX)
		return sl_fail(err, SL_EINVAL,
			       "dataset: %s is text: it needs the model's context "
			       "length (1..%d, the T of a gpt:...-T64 model), got %d",
			       spec, DS_TEXT_MAX_CTX, ctx);
	if (strncmp(spec, "synthetic-text:", 15) == 0) {
		uint32_t n = 0;
		if ((rc = parse_count(spec + 15, "synthetic-text", "a byte count",
				      SYN_TEXT_MAX_N, &n, err)))
			return rc;
		return load_synthetic_text(n, ctx, seed, out, err);
	}
	const char *path = spec + 5;
	if (!*path)
		return sl_fail(err, SL_EINVAL,
			       "dataset: text:<file> needs a file (or text:webster)");
	if (strcmp(path, "webster") == 0) {
		if (!file_exists(DS_WEBSTER_PATH)) {
			rc = load_synthetic_text(SYN_TEXT_FALLBACK, ctx, seed, out, err);
			snprintf(out->note, sizeof out->note,
				 "webster not found at %s (install dict-gcide); "
				 "using synthetic-text:%lu",
				 DS_WEBSTER_PATH, (unsigned long)SYN_TEXT_FALLBACK);
			return rc;
		}
		path = DS_WEBSTER_PATH;
	}
	uint8_t *buf = NULL;
	size_t len = 0;
	if ((rc = ds_read_file(path, DS_TEXT_MAX_BYTES, &buf, &len, err)))
		return rc;
	rc = ds_text(buf, len, ctx, seed, path, out, err);
	free(buf);
	copy_str(out->name, sizeof out->name, spec);
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
	return ds_load_ctx(spec, 0, seed, out, err);
}

/* "blobs:C,PER,DIM,K[,SIGMA]": every number given, in range, nothing
 * after it (ds_blobs checks what the numbers must satisfy together) */
static int
load_blobs(const char *spec, uint64_t seed, dataset_pair *out, char *err)
{
	const char *s = spec + 6;
	long v[4];
	double sigma = 0.5;
	static const char *const name[4] = {"centres", "per", "dim", "classes"};
	static const long max[4] = {4096, 10000000, 1 << 20, 255};
	char *end;
	for (int i = 0; i < 4; i++) {
		errno = 0;
		v[i] = (*s >= '0' && *s <= '9') ? strtol(s, &end, 10) : -1;
		if (v[i] < 1 || v[i] > max[i] || errno || (*end != ',' && *end))
			return sl_fail(err, SL_EINVAL,
				       "dataset: %s: %s is not a number in 1..%ld "
				       "(blobs:<centres>,<per>,<dim>,<classes>[,<sigma>], "
				       "e.g. blobs:32,4000,512,4)", spec, name[i], max[i]);
		s = end + (*end == ',');
		if (i < 3 && *end == '\0')
			return sl_fail(err, SL_EINVAL,
				       "dataset: %s: %s is missing "
				       "(blobs:<centres>,<per>,<dim>,<classes>[,<sigma>])",
				       spec, name[i + 1]);
	}
	if (end[0] == ',') {
		errno = 0;
		sigma = strtod(s, &end);
		if (s == end || *end || errno || !(sigma >= 0 && sigma <= 1e6))
			return sl_fail(err, SL_EINVAL,
				       "dataset: %s: sigma is not a number in 0..1e6",
				       spec);
	}
	int rc = ds_blobs((int)v[0], (uint32_t)v[1], (int)v[2], (int)v[3], sigma,
			  seed, out, err);
	copy_str(out->name, sizeof out->name, spec);
	return rc;
}

int
ds_load_ctx(const char *spec, int ctx, uint64_t seed, dataset_pair *out,
	    char *err)
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
		if ((rc = parse_count(spec + 10, "synthetic", "a sample count",
				      SYN_MAX_N, &n, err)))
			return rc;
		rc = load_synthetic(n, seed, out, err);
	} else if (strncmp(spec, "blobs:", 6) == 0) {
		rc = load_blobs(spec, seed, out, err);
	} else if (ds_spec_is_text(spec)) {
		rc = load_text(spec, ctx, seed, out, err);
	} else {
		return sl_fail(err, SL_EINVAL,
			       "dataset: unknown \"%s\" (expected fashion-mnist, "
			       "idx:<dir>, cifar10:<dir>, synthetic:<n>, "
			       "blobs:<centres>,<per>,<dim>,<classes>[,<sigma>], "
			       "text:<file>, synthetic-text:<n>)",
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
	if (d->map) {
		munmap(d->map, d->map_len);
	} else {
		sl_free_aligned(d->x);
		free(d->y);
	}
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
