/* dataset.h - training and test sets in memory: IDX (plain or gzip),
 * CIFAR-10 binary batches, a seeded synthetic Gaussian mixture, the
 * Fashion-MNIST files of Debian's dataset-fashion-mnist package, and text
 * (any file of bytes, or a seeded synthetic one) cut into contexts for a
 * language model.
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

/* The default text corpus, "text:webster": GCIDE (Webster's 1913 and
 * more) as Debian's dict-gcide package ships it (dictzip, i.e. gzip). */
#define DS_WEBSTER_PATH "/usr/share/dictd/gcide.dict.dz"

/* Text: held-out contexts evaluated (fewer when the held-out tail has
 * fewer distinct start offsets), the longest context, the largest text. */
#define DS_TEXT_EVAL 256
#define DS_TEXT_MAX_CTX 65536
#define DS_TEXT_MAX_BYTES ((size_t)256 << 20)

/* One split: n samples of dim floats and ylen targets each.
 *
 * Images (ylen 1): c*h*w floats in [0,1], sample-major
 * (x[i*dim + (ch*h + row)*w + col]) and n labels in [0, classes).
 *
 * Text (ylen T, the context length): sample i is a context of T + 1
 * bytes of the text; c = h = 1, w = dim = T; x[i*T + t] holds the token
 * id (an index into the pair's vocab, as a float) of byte t, and
 * y[i*T + t] the token id of byte t + 1, the next-token target of
 * position t. classes = the vocabulary's size. */
typedef struct dataset {
	uint32_t n;
	int c, h, w;
	int dim; /* c*h*w */
	int classes;
	int ylen;   /* targets per sample: 1 for images, T for text */
	float *x;   /* n*dim, 64-byte aligned (sl_calloc_aligned) */
	uint8_t *y; /* n*ylen: for text, y[i*ylen + t] is the token after
		    * x[i*dim + t] (x holds T token ids, floats holding integers
		    * < classes) */
	/* Set when x and y lie in a mapped cache file (dataset_cache.c):
	 * ds_free unmaps it. NULL for a split built in memory. */
	void *map;
	size_t map_len;
} dataset;

/* Targets per sample; a dataset built by hand with ylen 0 has one. */
static inline int
ds_ylen(const dataset *d)
{
	return d->ylen > 1 ? d->ylen : 1;
}

/* A train/test pair as named by a run's "dataset" string. */
typedef struct dataset_pair {
	dataset train, test;
	char name[64];      /* canonical name, e.g. "fashion-mnist" */
	char note[SL_ERR_LEN]; /* non-empty when a fallback was taken */
	/* Text only (ctx 0 and vocab_n 0 for images): the context length T
	 * and the vocabulary, the bytes that occur anywhere in the text
	 * (training part and held-out tail), in increasing order: token id k
	 * is the byte vocab[k]. A run keeps it with its data; a checkpoint
	 * needs it to turn sampled ids back into bytes. */
	int ctx;
	int vocab_n;          /* 1..256 */
	uint8_t vocab[256];
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

/* The asynchronous local-SGD toy's mixture (Liu et al. 2024, their
 * notebook; ../docs/formats.md "blobs"): `centres` unit-length centres
 * (standard normal rows, normalised) in dim dimensions; for centre i in
 * order, `per` samples sigma * N(0, I) + centre_i labelled i / (centres /
 * classes), so centres must be a multiple of classes. train holds them
 * all in that order; test is min(DS_BLOBS_EVAL, n) of them drawn without
 * replacement (the notebook evaluates on a sample of its training set).
 * Features are not squashed; shape 1 x 1 x dim. Deterministic for a
 * seed. */
#define DS_BLOBS_EVAL 10000u
int ds_blobs(int centres, uint32_t per, int dim, int classes, double sigma,
	     uint64_t seed, dataset_pair *out, char *err);

/* A text already in memory, cut into contexts of ctx + 1 bytes (a pure
 * function: no I/O). The vocabulary is the bytes that occur in all of it.
 * The last tenth (len / 10 bytes, rounded down) is held out: train is
 * floor((len - len/10) / ctx) contexts starting at offsets drawn from
 * (seed, a stream of their own) in the first part, each ending inside
 * it, stored in increasing order of offset; test is
 * min(DS_TEXT_EVAL, tail - ctx) contexts at evenly spaced offsets of the
 * tail, the same for every seed. Both parts must hold one context:
 * len >= 10 * (ctx + 1). what names the text in messages. out->name is
 * left empty; on failure out is zeroed. */
int ds_text(const uint8_t *buf, size_t len, int ctx, uint64_t seed,
	    const char *what, dataset_pair *out, char *err);

/* The seeded synthetic text: n bytes of an order-2 Markov chain over 16
 * symbols (space and a..o): for each pair of previous symbols, 4
 * successors drawn from the seed with probabilities 1/2, 1/4, 1/8, 1/8,
 * so a model that knows the chain needs 1.75 bits per byte. *out is
 * malloc'd (caller frees). Deterministic for a seed. */
int ds_synthetic_text(size_t n, uint64_t seed, uint8_t **out, char *err);

/* Read a whole file (gunzipped if it is gzip) into memory. */
int ds_read_file(const char *path, size_t max_out, uint8_t **out,
		 size_t *out_len, char *err);

/* Load by spec: "fashion-mnist" (DS_FASHION_DIR, falls back to
 * synthetic:60000 with a note when the package is missing),
 * "idx:<dir>" (train-images-idx3-ubyte[.gz] and friends, t10k-* for test),
 * "cifar10:<dir>" (data_batch_1..5.bin, test_batch.bin),
 * "synthetic:<n>" (n train samples of 784 dims, n/6 test, 10 classes),
 * "blobs:<centres>,<per>,<dim>,<classes>[,<sigma>]" (ds_blobs).
 * Returns 0 or a negative code with a message naming the file.
 * A text spec needs a context length: it is refused here (use
 * ds_load_ctx). */
int ds_load(const char *spec, uint64_t seed, dataset_pair *out, char *err);

/* ds_load with the model's context length ctx (its T), which text specs
 * need and image specs ignore (pass 0 for them):
 * "text:<file>" (any file, plain or gzip, read as bytes; see ds_text),
 * "text:webster" (DS_WEBSTER_PATH; falls back to synthetic-text:1000000
 * with a note when dict-gcide is not installed; a file named webster is
 * text:./webster), "synthetic-text:<n>" (ds_synthetic_text's n bytes, cut
 * as ds_text cuts a file). */
int ds_load_ctx(const char *spec, int ctx, uint64_t seed, dataset_pair *out,
		char *err);

/* Whether spec names a text data set (one that needs a context). */
int ds_spec_is_text(const char *spec);

void ds_free(dataset *d);
void ds_pair_free(dataset_pair *p);

#endif
