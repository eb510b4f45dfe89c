/* augment.h - the standard augmentation of CIFAR training (He et al.
 * 2016, section 4.2): pad each image with `pad` pixels of zeros on every
 * side, take a random crop of the image's own size from it, and flip that
 * crop left to right with probability 1/2.
 *
 * A sample's view is drawn from a counter-based stream keyed by the run's
 * seed, the epoch its batch was taken in and the sample's index in the
 * training set: nothing else. The sampler hands each sample out once per
 * epoch, so the key names each draw of the run; which worker draws it,
 * when, on which clock, in which process (a remote worker recomputes the
 * same view from the same key) or after a resume, changes nothing. Pure
 * functions, no state.
 *
 *   view (dy, dx, flip), dy and dx in [0, 2 pad], of a c x h x w image:
 *   out[ch][i][j] = src[ch][i + dy - pad][jj + dx - pad], jj = flip ? w-1-j : j
 *   (0 where that falls outside src: the padding) */
#ifndef SL_AUGMENT_H
#define SL_AUGMENT_H

#include <stdint.h>

#include "dataset.h"

/* The run object's "augment" values, in this order (the index is what a
 * checkpoint and the wire carry: none is 0). */
typedef enum aug_kind {
	AUG_NONE,
	AUG_CROP_FLIP,
	AUG_AUTO, /* crop-flip on cifar10:<dir> data, none on any other */
	AUG_KINDS
} aug_kind;

#define AUG_PAD 4 /* crop-flip's padding, in pixels */

/* What a batch's views depend on besides its sample indices. */
typedef struct aug_key {
	int kind;       /* AUG_NONE or AUG_CROP_FLIP (resolved) */
	int pad;
	uint64_t seed;  /* the run's */
	uint32_t epoch; /* the epoch the batch was taken in (from 0) */
} aug_key;

typedef struct aug_view {
	int dy, dx; /* the crop's corner in the padded image */
	int flip;
} aug_view;

/* The name of kind i ("none", "crop-flip", "auto"), or NULL past them. */
const char *aug_kind_name(int i);

/* The kind a run trains with: AUG_AUTO becomes crop-flip when the data
 * set spec is cifar10:<dir>, else none; the others stay. */
int aug_resolve(int kind, const char *data_spec);

/* 0 when a resolved kind applies to d's samples; else -SL_EINVAL, err
 * naming the field: crop-flip needs images (h and w of 2 or more), and
 * data_spec is named when they are flat vectors. */
int aug_check(int kind, const dataset *d, const char *data_spec, char *err);

/* The view of sample `sample` under k (kind crop-flip). */
void aug_draw(const aug_key *k, uint32_t sample, aug_view *v);

/* One c x h x w image src into dst (not overlapping) as the view says. */
void aug_apply(const float *src, float *dst, int c, int h, int w, int pad, const aug_view *v);

/* The samples idx[0..n) of d, each in its view under k (crop-flip), into
 * out: n * d->dim floats, sample-major like d->x. */
void aug_gather(const dataset *d, const uint32_t *idx, int n, const aug_key *k, float *out);

#endif
