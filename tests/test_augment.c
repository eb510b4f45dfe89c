/* test_augment.c - the batches' augmentation (engine/data/augment.c and
 * the worker's load, engine/worker/wstep.c): the crop and flip's arithmetic
 * on a hand-made 3x4 image, the views' range, the same views for a seed
 * (and others for another seed or epoch), whatever the sample's place in
 * its batch; "none" loads a batch as it was loaded before augmentation
 * existed; "auto" picks crop-flip on CIFAR files only; flat data is
 * refused. Whole runs: test_augment_runs.c. */
#include "augment.h"
#include "backend.h"
#include "model.h"
#include "testutil.h"
#include "wstep.h"

/* a 2-channel 3x4 image: channel 0 holds 1..12 row by row, channel 1
 * the same plus 100 */
static void
image_3x4(float *x)
{
	for (int ch = 0; ch < 2; ch++)
		for (int k = 0; k < 12; k++)
			x[ch * 12 + k] = (float)(k + 1 + 100 * ch);
}

/* dst (2 x 3x4) is want in channel 0 and want + 100 (0 stays 0) in 1 */
static void
expect_view(const float *dst, const float want[12], const char *what)
{
	for (int ch = 0; ch < 2; ch++)
		for (int k = 0; k < 12; k++) {
			float w = want[k] == 0 ? 0 : want[k] + 100 * ch;
			ck_assert_msg(dst[ch * 12 + k] == w, "%s: channel %d pixel (%d, %d) is %g, want %g",
				      what, ch, k / 4, k % 4, dst[ch * 12 + k], w);
		}
}

START_TEST(crop_and_flip_on_a_3x4_image)
{
	float src[24], dst[24];
	image_3x4(src);
	/* the source, row by row:  1  2  3  4 /  5  6  7  8 /  9 10 11 12 */
	static const struct {
		int pad, dy, dx, flip;
		float want[12];
		const char *what;
	} cases[] = {
		{1, 1, 1, 0, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, "the centre crop"},
		/* the crop's corner at the padded image's corner: everything
		 * moves one down and one right, zeros come in on top and left */
		{1, 0, 0, 0, {0, 0, 0, 0, 0, 1, 2, 3, 0, 5, 6, 7}, "corner (0, 0)"},
		{1, 2, 1, 0, {5, 6, 7, 8, 9, 10, 11, 12, 0, 0, 0, 0}, "one row lower"},
		{1, 1, 2, 0, {2, 3, 4, 0, 6, 7, 8, 0, 10, 11, 12, 0}, "one column right"},
		{1, 1, 1, 1, {4, 3, 2, 1, 8, 7, 6, 5, 12, 11, 10, 9}, "the flip alone"},
		/* crop first, then flip: the crop one column right, mirrored */
		{1, 1, 2, 1, {0, 4, 3, 2, 0, 8, 7, 6, 0, 12, 11, 10}, "right, flipped"},
		{1, 2, 0, 1, {7, 6, 5, 0, 11, 10, 9, 0, 0, 0, 0, 0}, "down-left, flipped"},
		{2, 4, 4, 0, {11, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "pad 2, far corner"},
		{4, 0, 0, 0, {0}, "pad 4, corner: all padding"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		aug_view v = {.dy = cases[i].dy, .dx = cases[i].dx, .flip = cases[i].flip};
		memset(dst, 0xff, sizeof(dst));
		aug_apply(src, dst, 2, 3, 4, cases[i].pad, &v);
		expect_view(dst, cases[i].want, cases[i].what);
	}
}
END_TEST

START_TEST(views_cover_their_range)
{
	/* pad 4: corners 0..8 each way, every one drawn; flips about half */
	int seen_y[9] = {0}, seen_x[9] = {0}, flips = 0, n = 4000;
	aug_key k = {.kind = AUG_CROP_FLIP, .pad = AUG_PAD, .seed = 1, .epoch = 0};
	for (int s = 0; s < n; s++) {
		aug_view v;
		aug_draw(&k, (uint32_t)s, &v);
		ck_assert(v.dy >= 0 && v.dy <= 8 && v.dx >= 0 && v.dx <= 8);
		ck_assert(v.flip == 0 || v.flip == 1);
		seen_y[v.dy]++;
		seen_x[v.dx]++;
		flips += v.flip;
	}
	for (int i = 0; i < 9; i++)
		ck_assert_msg(seen_y[i] > n / 9 / 2 && seen_x[i] > n / 9 / 2,
			      "corner %d drawn %d and %d times in %d", i, seen_y[i], seen_x[i], n);
	ck_assert_msg(flips > n * 45 / 100 && flips < n * 55 / 100, "%d flips in %d", flips, n);
}
END_TEST

/* a data set of n random 3x8x8 images (not from a file: the views only
 * read x, its shape and labels) */
static dataset
images(uint32_t n)
{
	dataset d = {.n = n, .c = 3, .h = 8, .w = 8, .dim = 192, .classes = 10};
	d.x = malloc(sizeof(float) * n * 192);
	d.y = malloc(n);
	for (uint32_t i = 0; i < n * 192; i++)
		d.x[i] = (float)((i * 2654435761u) >> 8 & 0xffff) / 65536.0f;
	for (uint32_t i = 0; i < n; i++)
		d.y[i] = (uint8_t)(i % 10);
	return d;
}

static void
images_free(dataset *d)
{
	free(d->x);
	free(d->y);
}

START_TEST(same_seed_same_bits)
{
	dataset d = images(16);
	uint32_t idx[6] = {3, 0, 15, 7, 7, 9}, rev[6] = {9, 7, 7, 15, 0, 3};
	size_t sz = sizeof(float) * 6 * 192;
	float *a = malloc(sz), *b = malloc(sz), *c = malloc(sz);
	aug_key k = {.kind = AUG_CROP_FLIP, .pad = AUG_PAD, .seed = 42, .epoch = 3};
	aug_gather(&d, idx, 6, &k, a);
	aug_gather(&d, idx, 6, &k, b);
	ck_assert_msg(!memcmp(a, b, sz), "the same key gave other views");
	/* a sample's view is its own, wherever it sits in the batch */
	aug_gather(&d, rev, 6, &k, c);
	for (int i = 0; i < 6; i++)
		ck_assert_msg(!memcmp(a + i * 192, c + (5 - i) * 192, 192 * sizeof(float)),
			      "sample %u's view moved with its place", idx[i]);
	/* another seed, another epoch: other views (of 6 samples, some differ) */
	aug_key k2 = k;
	k2.seed = 43;
	aug_gather(&d, idx, 6, &k2, b);
	ck_assert_msg(memcmp(a, b, sz), "seed 43 drew seed 42's views");
	k2 = k;
	k2.epoch = 4;
	aug_gather(&d, idx, 6, &k2, b);
	ck_assert_msg(memcmp(a, b, sz), "epoch 4 drew epoch 3's views");
	/* and the views are views: not the samples as they are */
	for (int i = 0; i < 6; i++)
		memcpy(b + i * 192, d.x + idx[i] * 192, 192 * sizeof(float));
	ck_assert(memcmp(a, b, sz));
	free(a);
	free(b);
	free(c);
	images_free(&d);
}
END_TEST

/* an MLP over d's images with room for batch samples */
static model *
mlp_for(const dataset *d, int batch, backend **be)
{
	char err[SL_ERR_LEN] = "";
	model *m;
	ck_assert_msg(backend_open("cpu", 1, be, err) == 0, "%s", err);
	ck_assert_msg(model_new("mlp:192-8-10", d->c, d->h, d->w, d->classes, batch, 1, *be, &m,
				err) == 0, "%s", err);
	return m;
}

START_TEST(none_loads_as_before)
{
	/* AUG_NONE is model_load_batch itself: the same input bytes, the
	 * same labels; crop-flip loads the views aug_gather draws */
	dataset d = images(16);
	backend *be;
	model *m = mlp_for(&d, 6, &be);
	uint32_t idx[6] = {3, 0, 15, 7, 7, 9};
	size_t sz = sizeof(float) * 6 * 192;
	float *plain = malloc(sz), *views = malloc(sz);
	model_load_batch(m, d.x, d.y, idx, 6);
	memcpy(plain, m->act[0], sz);
	memset(m->act[0], 0, sz);
	wbatch b = {.idx = idx, .n = 6, .aug = {.kind = AUG_NONE, .pad = AUG_PAD, .seed = 42}};
	wstep_load(m, &d, &b);
	ck_assert_msg(!memcmp(plain, m->act[0], sz), "none changed the batch");
	b.aug.kind = AUG_CROP_FLIP;
	wstep_load(m, &d, &b);
	aug_gather(&d, idx, 6, &b.aug, views);
	ck_assert_msg(!memcmp(views, m->act[0], sz), "crop-flip loaded other views");
	for (int i = 0; i < 6; i++)
		ck_assert_uint_eq(m->labels[i], d.y[idx[i]]);
	ck_assert(memcmp(plain, views, sz));
	free(plain);
	free(views);
	model_free(m);
	backend_free(be);
	images_free(&d);
}
END_TEST

START_TEST(auto_and_refusals)
{
	ck_assert_int_eq(aug_resolve(AUG_AUTO, "cifar10:/data/cifar-10-batches-bin"), AUG_CROP_FLIP);
	ck_assert_int_eq(aug_resolve(AUG_AUTO, "fashion-mnist"), AUG_NONE);
	ck_assert_int_eq(aug_resolve(AUG_AUTO, "synthetic:600"), AUG_NONE);
	ck_assert_int_eq(aug_resolve(AUG_AUTO, "idx:/data"), AUG_NONE);
	ck_assert_int_eq(aug_resolve(AUG_NONE, "cifar10:/x"), AUG_NONE);
	ck_assert_int_eq(aug_resolve(AUG_CROP_FLIP, "synthetic:600"), AUG_CROP_FLIP);
	ck_assert_str_eq(aug_kind_name(AUG_CROP_FLIP), "crop-flip");
	ck_assert_ptr_null(aug_kind_name(AUG_KINDS));
	char err[SL_ERR_LEN] = "";
	dataset flat = {.c = 1, .h = 1, .w = 1000, .dim = 1000};
	ck_assert_int_eq(aug_check(AUG_CROP_FLIP, &flat, "synthetic:600", err), -SL_EINVAL);
	ck_assert_msg(strstr(err, "augment: crop-flip") && strstr(err, "synthetic:600 are 1x1x1000"),
		      "%s", err);
	ck_assert_int_eq(aug_check(AUG_NONE, &flat, "synthetic:600", err), 0);
	dataset img = {.c = 1, .h = 28, .w = 28, .dim = 784};
	ck_assert_int_eq(aug_check(AUG_CROP_FLIP, &img, "synthetic:600", err), 0);
}
END_TEST

static Suite *
augment_suite(void)
{
	Suite *s = suite_create("augment");
	TCase *tc = tcase_create("views");
	tcase_add_test(tc, crop_and_flip_on_a_3x4_image);
	tcase_add_test(tc, views_cover_their_range);
	tcase_add_test(tc, same_seed_same_bits);
	tcase_add_test(tc, none_loads_as_before);
	tcase_add_test(tc, auto_and_refusals);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(augment_suite)
