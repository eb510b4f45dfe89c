/* dataset.h - training and test sets in memory: IDX (plain or gzip),
 * CIFAR-10 binary batches, a seeded synthetic Gaussian mixture, and the
 * Fashion-MNIST files of Debian's dataset-fashion-mnist package.
 *
 * Parsers are pure functions over byte buffers (no I/O, no globals), so a
 * fuzzing harness is ten lines; the *_load functions do the file reading. A
 * malformed or truncated input is rejected with a message naming the file (or
 * "<buffer>") and what is wrong; nothing is read out of bounds. */
#ifndef SL_DATASET_H
#define SL_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "sl.h"

#define DS_FASHION_DIR "/usr/share/datasets/fashion-mnist"

/* One split: n samples of c*h*w floats in [0,1], sample-major
 * (x[i*dim + (ch*h + row)*w + col]) and n labels in [0, classes). */
typedef struct dataset {
	uint32_t n;
	int c, h, w;
	int dim; /* c*h*w */
	int classes;
	float *x;   /* n*dim, 64-byte aligned (sl_calloc_aligned) */
	uint8_t *y; /* n * targets */
	/* labels per sample: 0 or 1 for a label per sample (images); T for
	 * a text set whose sample is T token ids in x (floats holding
	 * integers < classes) and T next-token targets in y (y[i T + t]) */
	int targets;
} dataset;

/* A train/test pair as named by a run's "dataset" string. */
typedef struct dataset_pair {
	dataset train, test;
	char name[64];      /* canonical name, e.g. "fashion-mnist" */
	char note[SL_ERR_LEN]; /* non-empty when a fallback was taken */
} dataset_pair;

/* Decompress buf if it starts with the gzip magic, else copy it.
 * *out is malloc'd (caller frees). what names the input in messages.
 * Limit: max_out bytes of output (guards against gzip bombs). */
int ds_gunzip(const uint8_t *buf, size_t len, size_t max_out, uint8_t **out,
	      size_t *out_len, const char *what, char *err);

/* Parse an IDX image file (magic 0x00000803, dims n x rows x cols, unsigned
 * bytes) and an IDX label file (0x00000801, n) already in memory (plain,
 * not gzip) into out. Counts must agree and each file must hold exactly
 * the bytes its header announces. classes = 10 when every label is <= 9
 * (MNIST-style sets, even a split that misses a class), else max label + 1. */
int ds_parse_idx(const uint8_t *img, size_t img_len, const uint8_t *lab,
		 size_t lab_len, dataset *out, const char *what, char *err);

/* Parse CIFAR-10 binary batches: records of 1 label byte + 3072 pixel bytes
 * (3x32x32, channel-major). nbufs buffers are concatenated. Labels must be
 * < 10; each buffer's length must be a whole number of records (> 0). */
int ds_parse_cifar(const uint8_t *const *bufs, const size_t *lens, int nbufs,
		   dataset *out, const char *what, char *err);

/* A separable mixture: `classes` Gaussian clusters in dim dimensions with
 * means drawn from the seed, samples squashed into [0,1]. Deterministic. */
int ds_synthetic(uint32_t n, int dim, int classes, uint64_t seed,
		 uint64_t stream, dataset *out, char *err);

/* Read a whole file (gunzipped if it is gzip) into memory. */
int ds_read_file(const char *path, size_t max_out, uint8_t **out,
		 size_t *out_len, char *err);

/* Load by spec: "fashion-mnist" (DS_FASHION_DIR, falls back to
 * synthetic:60000 with a note when the package is missing),
 * "idx:<dir>" (train-images-idx3-ubyte[.gz] and friends, t10k-* for test),
 * "cifar10:<dir>" (data_batch_1..5.bin, test_batch.bin),
 * "synthetic:<n>" (n train samples of 784 dims, n/6 test, 10 classes).
 * Returns 0 or a negative code with a message naming the file. */
int ds_load(const char *spec, uint64_t seed, dataset_pair *out, char *err);

void ds_free(dataset *d);
void ds_pair_free(dataset_pair *p);

#endif
