/* test_dataset_synth.c - the synthetic mixture: deterministic per seed and
 * stream, its arguments checked, and separable through ds_load. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>

#include "dataset_util.h"

START_TEST(synthetic_deterministic)
{
	char err[SL_ERR_LEN] = "";
	dataset a, b, c, s;
	ck_assert_int_eq(ds_synthetic(500, 50, 7, 42, 1, &a, err), 0);
	ck_assert_int_eq(ds_synthetic(500, 50, 7, 42, 1, &b, err), 0);
	ck_assert_int_eq(ds_synthetic(500, 50, 7, 43, 1, &c, err), 0);
	ck_assert_int_eq(ds_synthetic(500, 50, 7, 42, 2, &s, err), 0);
	ck_assert_uint_eq(a.n, 500);
	ck_assert_int_eq(a.dim, 50);
	ck_assert_int_eq(a.c * a.h * a.w, 50);
	ck_assert_int_eq(a.classes, 7);
	ck_assert_int_eq(a.ylen, 1);
	ck_assert_mem_eq(a.x, b.x, 500 * 50 * sizeof(float));
	ck_assert_mem_eq(a.y, b.y, 500);
	ck_assert(memcmp(a.x, c.x, 500 * 50 * sizeof(float)) != 0);
	ck_assert(memcmp(a.x, s.x, 500 * 50 * sizeof(float)) != 0);

	int count[7] = {0};
	for (int i = 0; i < 500; i++) {
		ck_assert_uint_lt(a.y[i], 7);
		count[a.y[i]]++;
	}
	for (int k = 0; k < 7; k++) /* balanced: 500/7 = 71 or 72 */
		ck_assert_int_ge(count[k], 71);
	for (int i = 0; i < 500 * 50; i++)
		ck_assert(a.x[i] >= 0.0f && a.x[i] <= 1.0f);

	/* same seed, other stream: same cluster means. Per-class average of
	 * stream 1 and stream 2 agree to within noise (0.1/sqrt(70)). */
	double maxdiff = 0;
	for (int k = 0; k < 7; k++)
		for (int j = 0; j < 50; j++) {
			double ma = 0, ms = 0;
			int na = 0, ns = 0;
			for (int i = 0; i < 500; i++) {
				if (a.y[i] == k) {
					ma += a.x[i * 50 + j];
					na++;
				}
				if (s.y[i] == k) {
					ms += s.x[i * 50 + j];
					ns++;
				}
			}
			double dd = fabs(ma / na - ms / ns);
			maxdiff = dd > maxdiff ? dd : maxdiff;
		}
	ck_assert_double_lt(maxdiff, 0.08);

	/* square dims get an image shape */
	dataset q;
	ck_assert_int_eq(ds_synthetic(3, 784, 2, 1, 1, &q, err), 0);
	ck_assert_int_eq(q.h, 28);
	ck_assert_int_eq(q.w, 28);
	ds_free(&q);
	ds_free(&a);
	ds_free(&b);
	ds_free(&c);
	ds_free(&s);
}
END_TEST

START_TEST(synthetic_validation)
{
	char err[SL_ERR_LEN] = "";
	dataset d;
	memset(&d, 1, sizeof d);
	ck_assert_int_eq(ds_synthetic(0, 10, 3, 1, 1, &d, err), -SL_EINVAL);
	ASSERT_HAS(err, "n must be");
	ck_assert(is_zeroed(&d, sizeof d));
	ck_assert_int_eq(ds_synthetic(10, 0, 3, 1, 1, &d, err), -SL_EINVAL);
	ASSERT_HAS(err, "dim");
	ck_assert_int_eq(ds_synthetic(10, -4, 3, 1, 1, &d, err), -SL_EINVAL);
	ASSERT_HAS(err, "dim");
	ck_assert_int_eq(ds_synthetic(10, 4, 1, 1, 1, &d, err), -SL_EINVAL);
	ASSERT_HAS(err, "classes");
	ck_assert_int_eq(ds_synthetic(10, 4, 256, 1, 1, &d, err), -SL_EINVAL);
	ASSERT_HAS(err, "classes");
	ck_assert_int_eq(ds_synthetic(10, 4, 255, 1, 1, &d, err), 0);
	ck_assert_int_eq(d.classes, 255);
	ds_free(&d);
	ck_assert_int_eq(ds_synthetic(1, 1, 2, 1, 1, &d, err), 0);
	ds_free(&d);
}
END_TEST

/* Plain SGD softmax regression on train, accuracy on test. */
static double
softmax_accuracy(const dataset *tr, const dataset *te, int epochs)
{
	int d = tr->dim, k = tr->classes;
	float *w = calloc((size_t)d * (size_t)k, sizeof *w);
	float *b = calloc((size_t)k, sizeof *b), *z = calloc((size_t)k, sizeof *z);
	ck_assert_ptr_nonnull(w);
	for (int e = 0; e < epochs; e++)
		for (uint32_t i = 0; i < tr->n; i++) {
			const float *x = tr->x + (size_t)i * (size_t)d;
			float mx = -1e30f, sum = 0;
			for (int j = 0; j < k; j++) {
				float s = b[j];
				for (int t = 0; t < d; t++)
					s += w[(size_t)j * d + t] * x[t];
				z[j] = s;
				mx = s > mx ? s : mx;
			}
			for (int j = 0; j < k; j++)
				sum += (z[j] = expf(z[j] - mx));
			for (int j = 0; j < k; j++) {
				float g = z[j] / sum - (j == tr->y[i]);
				b[j] -= 0.01f * g;
				for (int t = 0; t < d; t++)
					w[(size_t)j * d + t] -= 0.01f * g * x[t];
			}
		}
	uint32_t ok = 0;
	for (uint32_t i = 0; i < te->n; i++) {
		const float *x = te->x + (size_t)i * (size_t)d;
		int best = 0;
		float bs = -1e30f;
		for (int j = 0; j < k; j++) {
			float s = b[j];
			for (int t = 0; t < d; t++)
				s += w[(size_t)j * d + t] * x[t];
			if (s > bs) {
				bs = s;
				best = j;
			}
		}
		ok += best == te->y[i];
	}
	free(w);
	free(b);
	free(z);
	return (double)ok / te->n;
}

START_TEST(synthetic_separable_via_load)
{
	char err[SL_ERR_LEN] = "";
	dataset_pair p;
	ck_assert_int_eq(ds_load("synthetic:600", 7, &p, err), 0);
	ck_assert_str_eq(p.name, "synthetic:600");
	ck_assert_str_eq(p.note, "");
	ck_assert_uint_eq(p.train.n, 600);
	ck_assert_uint_eq(p.test.n, 100);
	ck_assert_int_eq(p.train.dim, 784);
	ck_assert_int_eq(p.test.dim, 784);
	ck_assert_int_eq(p.train.h, 28);
	ck_assert_int_eq(p.train.classes, 10);
	ck_assert_int_eq(p.test.classes, 10);
	/* different samples ... */
	ck_assert(memcmp(p.train.x, p.test.x, 100 * 784 * sizeof(float)) != 0);
	/* ... from the same mixture: a linear model trained on one split
	 * classifies the other */
	double acc = softmax_accuracy(&p.train, &p.test, 2);
	ck_assert_msg(acc > 0.9, "test accuracy %.3f", acc);
	ds_pair_free(&p);
	ck_assert(is_zeroed(&p, sizeof p));
	ds_pair_free(&p);
	ds_pair_free(NULL);

	ck_assert_int_eq(ds_load("synthetic:5", 7, &p, err), 0);
	ck_assert_uint_eq(p.train.n, 5);
	ck_assert_uint_eq(p.test.n, 1);
	ds_pair_free(&p);
}
END_TEST

/* blobs: the toy's generator, by construction. sigma 0 puts every
 * sample on its centre: unit rows, label centre / (centres / classes);
 * the eval split is rows of train; the same bits for a seed. */
START_TEST(blobs_construction)
{
	char err[SL_ERR_LEN] = "";
	dataset_pair p, q, o;
	ck_assert_int_eq(ds_load("blobs:8,3,5,4,0", 3, &p, err), 0);
	ck_assert_str_eq(p.name, "blobs:8,3,5,4,0");
	ck_assert_uint_eq(p.train.n, 24);
	ck_assert_uint_eq(p.test.n, 24); /* min(10000, n) */
	ck_assert_int_eq(p.train.dim, 5);
	ck_assert_int_eq(p.train.h, 1);
	ck_assert_int_eq(p.train.w, 5);
	ck_assert_int_eq(p.train.classes, 4);
	for (uint32_t i = 0; i < 24; i++) {
		const float *x = p.train.x + i * 5;
		double ss = 0;
		for (int k = 0; k < 5; k++)
			ss += (double)x[k] * x[k];
		ck_assert_msg(fabs(ss - 1) < 1e-6, "row %u: |x|^2 %.9f", i, ss);
		/* centre i / 3, two centres a class */
		ck_assert_int_eq(p.train.y[i], (int)(i / 3) / 2);
		if (i % 3)
			ck_assert(!memcmp(x, x - 5, 5 * sizeof(float)));
		else if (i)
			ck_assert(memcmp(x, x - 5, 5 * sizeof(float)));
	}
	/* the eval split is a permutation of train here (m = n) */
	int seen[24] = {0};
	for (uint32_t i = 0; i < p.test.n; i++) {
		int hit = -1;
		for (uint32_t j = 0; j < 24 && hit < 0; j++)
			if (!seen[j] && !memcmp(p.test.x + i * 5, p.train.x + j * 5, 20) &&
			    p.test.y[i] == p.train.y[j])
				hit = (int)j;
		ck_assert_msg(hit >= 0, "eval row %u is no unseen train row", i);
		seen[hit] = 1;
	}
	ds_pair_free(&p);

	/* sigma 0.5 (the default): the same bits for a seed, others for another;
	 * each cluster's mean lies within 4 sd of its (unit) centre per coordinate */
	ck_assert_int_eq(ds_load("blobs:4,400,16,2", 9, &p, err), 0);
	ck_assert_int_eq(ds_load("blobs:4,400,16,2,0.5", 9, &q, err), 0);
	ck_assert_int_eq(ds_load("blobs:4,400,16,2", 10, &o, err), 0);
	ck_assert(!memcmp(p.train.x, q.train.x, 1600 * 16 * sizeof(float)));
	ck_assert(memcmp(p.train.x, o.train.x, 1600 * 16 * sizeof(float)));
	double sd = 0;
	for (uint32_t i = 0; i < 400; i++)
		for (int k = 0; k < 16; k++) {
			double d = p.train.x[i * 16 + k] - p.train.x[(i ^ 1) * 16 + k];
			sd += d * d;
		}
	sd = sqrt(sd / (400.0 * 16 * 2)); /* the difference of two has var 2 sigma^2 */
	ck_assert_msg(fabs(sd - 0.5) < 0.03, "sample sd %.4f, expected 0.5", sd);
	ck_assert_uint_eq(p.test.n, 1600);
	ds_pair_free(&p);
	ds_pair_free(&q);
	ds_pair_free(&o);

	static const char *const bad[][2] = {
		{"blobs:3,10,5,2", "multiple of classes"},
		{"blobs:32,x,512,4", "per is not a number"},
		{"blobs:32,10,512", "classes is missing"},
		{"blobs:32,10,512,4,", "sigma"},
		{"blobs:32,10,512,4,-1", "sigma"},
		{"blobs:32,10,512,4,0.5x", "sigma"},
		{"blobs:0,10,512,4", "centres is not a number"},
		{"blobs:4,10,512,1", "classes"},
		{"blobs:4096,10000000,1048576,4", "too large"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = 0;
		ck_assert_int_eq(ds_load(bad[i][0], 1, &p, err), -SL_EINVAL);
		ck_assert_msg(strstr(err, bad[i][1]) && strstr(err, "dataset: "),
			      "%s: %s", bad[i][0], err);
		ck_assert(is_zeroed(&p, sizeof p));
	}
}
END_TEST

static Suite *
dataset_synth_suite(void)
{
	Suite *s = suite_create("dataset_synth");
	TCase *tc = tcase_create("synthetic");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, synthetic_deterministic);
	tcase_add_test(tc, synthetic_validation);
	tcase_add_test(tc, synthetic_separable_via_load);
	tcase_add_test(tc, blobs_construction);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(dataset_synth_suite)
