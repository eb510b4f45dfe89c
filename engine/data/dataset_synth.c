/* dataset_synth.c - the seeded synthetic Gaussian mixture (ds_synthetic). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dataset_impl.h"
#include "rng.h"

/* Samples of the synthetic mixture use the caller's stream id; the cluster
 * means come from this reserved stream so every split drawn from one seed
 * shares them. */
#define SYN_MEAN_STREAM UINT64_C(0x6d65616e73000000)

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
	out->ylen = 1;
	out->x = x;
	out->y = y;
	return 0;
}

/* ---- blobs: the asynchronous local-SGD toy's mixture -------------------- */

#define BLOBS_CENTRE_STREAM UINT64_C(0x626c6f6273430000)
#define BLOBS_SAMPLE_STREAM UINT64_C(0x626c6f6273530000)
#define BLOBS_EVAL_STREAM UINT64_C(0x626c6f6273450000)

static int
blobs_alloc(dataset *d, uint32_t n, int dim, int classes)
{
	d->x = sl_calloc_aligned(n, (size_t)dim * sizeof(float));
	d->y = malloc(n);
	d->n = n;
	d->c = 1;
	d->h = 1;
	d->w = dim;
	d->dim = dim;
	d->classes = classes;
	d->ylen = 1;
	return d->x && d->y ? 0 : -1;
}

/* the eval sample: a seeded partial Fisher-Yates over the training set,
 * its first m indices in the order drawn */
static int
blobs_eval(const dataset *tr, uint32_t m, uint64_t seed, dataset *te)
{
	uint32_t *ix = malloc((size_t)tr->n * sizeof *ix);
	if (!ix)
		return -1;
	for (uint32_t i = 0; i < tr->n; i++)
		ix[i] = i;
	rng r;
	rng_seed(&r, seed, BLOBS_EVAL_STREAM);
	for (uint32_t i = 0; i < m; i++) {
		uint32_t j = i + (uint32_t)rng_below(&r, tr->n - i);
		uint32_t t = ix[i];
		ix[i] = ix[j];
		ix[j] = t;
	}
	size_t dim = (size_t)tr->dim;
	for (uint32_t i = 0; i < m; i++) {
		memcpy(te->x + i * dim, tr->x + ix[i] * dim, dim * sizeof(float));
		te->y[i] = tr->y[ix[i]];
	}
	free(ix);
	return 0;
}

int
ds_blobs(int centres, uint32_t per, int dim, int classes, double sigma,
	 uint64_t seed, dataset_pair *out, char *err)
{
	memset(out, 0, sizeof *out);
	if (classes < 2 || classes > 255 || centres < classes || centres % classes)
		return sl_fail(err, SL_EINVAL,
			       "dataset: blobs: centres (%d) must be a multiple of classes (%d), "
			       "classes in 2..255", centres, classes);
	if (dim <= 0 || per == 0 || !(sigma >= 0 && sigma <= 1e6))
		return sl_fail(err, SL_EINVAL,
			       "dataset: blobs: dim and per must be positive, sigma in 0..1e6");
	if ((uint64_t)centres * per > UINT32_MAX ||
	    (uint64_t)centres * per * (uint64_t)dim > ((uint64_t)1 << 32))
		return sl_fail(err, SL_EINVAL,
			       "dataset: blobs: %d x %lu samples of %d floats is too large "
			       "(at most 2^32 floats)", centres, (unsigned long)per, dim);
	uint32_t n = (uint32_t)centres * per, m = SL_MIN(n, DS_BLOBS_EVAL);
	float *mu = malloc((size_t)centres * (size_t)dim * sizeof *mu);
	if (!mu || blobs_alloc(&out->train, n, dim, classes) ||
	    blobs_alloc(&out->test, m, dim, classes)) {
		free(mu);
		ds_pair_free(out);
		return sl_fail(err, SL_ENOMEM, "blobs: out of memory for %lu x %d",
			       (unsigned long)n, dim);
	}
	rng r;
	rng_seed(&r, seed, BLOBS_CENTRE_STREAM);
	for (int c = 0; c < centres; c++) {
		float *row = mu + (size_t)c * (size_t)dim;
		double ss = 0;
		for (int k = 0; k < dim; k++) {
			double v = rng_normal(&r);
			row[k] = (float)v;
			ss += v * v;
		}
		double inv = ss > 0 ? 1 / sqrt(ss) : 0;
		for (int k = 0; k < dim; k++)
			row[k] = (float)(row[k] * inv);
	}
	rng_seed(&r, seed, BLOBS_SAMPLE_STREAM);
	int per_class = centres / classes;
	for (uint32_t i = 0; i < n; i++) {
		int c = (int)(i / per);
		const float *row = mu + (size_t)c * (size_t)dim;
		float *dst = out->train.x + (size_t)i * (size_t)dim;
		for (int k = 0; k < dim; k++)
			dst[k] = (float)(sigma * rng_normal(&r) + row[k]);
		out->train.y[i] = (uint8_t)(c / per_class);
	}
	free(mu);
	if (blobs_eval(&out->train, m, seed, &out->test)) {
		ds_pair_free(out);
		return sl_fail(err, SL_ENOMEM, "blobs: out of memory");
	}
	return 0;
}
