/* augment.c - padded random crops and flips (see augment.h). */
#include "augment.h"

#include <string.h>

#include "rng.h"

/* the views' streams: the top bit set, then the epoch and the sample,
 * apart from every other stream of a run (small ids: 0, 100 + worker,
 * 1000 + shuffle) */
#define AUG_STREAM (1ull << 63)

const char *
aug_kind_name(int i)
{
	static const char *const n[] = {"none", "crop-flip", "auto"};
	return i >= 0 && i < AUG_KINDS ? n[i] : NULL;
}

int
aug_resolve(int kind, const char *data_spec)
{
	if (kind != AUG_AUTO)
		return kind;
	return strncmp(data_spec, "cifar10:", 8) == 0 ? AUG_CROP_FLIP : AUG_NONE;
}

int
aug_check(int kind, const dataset *d, const char *data_spec, char *err)
{
	if (kind != AUG_CROP_FLIP || (d->h >= 2 && d->w >= 2))
		return 0;
	return sl_fail(err, SL_EINVAL, "augment: crop-flip crops and flips images; the samples "
		       "of %s are %dx%dx%d, not images: use \"augment\": \"none\"",
		       data_spec, d->c, d->h, d->w);
}

void
aug_draw(const aug_key *k, uint32_t sample, aug_view *v)
{
	rng r;
	rng_seed(&r, k->seed, AUG_STREAM | (uint64_t)k->epoch << 32 | sample);
	uint64_t span = 2 * (uint64_t)k->pad + 1;
	v->dy = (int)rng_below(&r, span);
	v->dx = (int)rng_below(&r, span);
	v->flip = (int)(rng_next(&r) >> 63);
}

void
aug_apply(const float *src, float *dst, int c, int h, int w, int pad, const aug_view *v)
{
	for (int ch = 0; ch < c; ch++) {
		const float *s = src + (size_t)ch * h * w;
		float *o = dst + (size_t)ch * h * w;
		for (int i = 0; i < h; i++) {
			int si = i + v->dy - pad;
			for (int j = 0; j < w; j++) {
				int sj = (v->flip ? w - 1 - j : j) + v->dx - pad;
				int in = si >= 0 && si < h && sj >= 0 && sj < w;
				o[(size_t)i * w + j] = in ? s[(size_t)si * w + sj] : 0.0f;
			}
		}
	}
}

void
aug_gather(const dataset *d, const uint32_t *idx, int n, const aug_key *k, float *out)
{
	size_t dim = (size_t)d->dim;
	for (int b = 0; b < n; b++) {
		aug_view v;
		aug_draw(k, idx[b], &v);
		aug_apply(d->x + (size_t)idx[b] * dim, out + (size_t)b * dim, d->c, d->h, d->w,
			  k->pad, &v);
	}
}
