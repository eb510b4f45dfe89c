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
