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

static Suite *
dataset_synth_suite(void)
{
	Suite *s = suite_create("dataset_synth");
	TCase *tc = tcase_create("synthetic");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, synthetic_deterministic);
	tcase_add_test(tc, synthetic_validation);
	tcase_add_test(tc, synthetic_separable_via_load);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(dataset_synth_suite)
