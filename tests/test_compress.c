/* test_compress.c - the compressors of a push (engine/ps/compress.c) on
 * tiny vectors computed by hand: the exact values the server decodes, the
 * bytes, and error feedback's residual over two pushes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compress.h"
#include "testutil.h"

static void
eq(const float *got, const float *want, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(got[i] == want[i], "[%zu]: %.9g, expected %.9g", i, (double)got[i],
			      (double)want[i]);
}

START_TEST(names_and_k)
{
	ck_assert_int_eq(compress_kind("none"), CMP_NONE);
	ck_assert_int_eq(compress_kind("topk"), CMP_TOPK);
	ck_assert_int_eq(compress_kind("int4"), CMP_INT4);
	ck_assert_int_eq(compress_kind("zip"), -1);
	/* k = ceil(ratio n): 0.07 of 100 is 7 (not the 8 of the ceiling of
	 * 0.07 x 100 = 7.000000000000001 in doubles), 0.25 of 10 is 3, at
	 * least 1, at most n */
	ck_assert_uint_eq(compress_k(0.07, 100), 7);
	ck_assert_uint_eq(compress_k(0.3, 10), 3);
	ck_assert_uint_eq(compress_k(0.25, 10), 3);
	ck_assert_uint_eq(compress_k(1e-6, 10), 1);
	ck_assert_uint_eq(compress_k(1, 10), 10);
}
END_TEST

/* top-k of 8 at ratio 0.3: k 3, the |4|, the |-3| and, of the tie |2| =
 * |-2|, the lower index; 8 bytes each */
START_TEST(topk_keeps_the_largest)
{
	float p[] = {0.5f, -3, 1, 2, -2, 0.25f, 4, -1};
	unsigned char kept[8];
	ck_assert_int_eq(compress_apply(CMP_TOPK, 0.3, CMP_BLOCK, 0, 0, p, 8, kept), 0);
	eq(p, (const float[]){0, -3, 0, 2, 0, 0, 4, 0}, 8);
	const unsigned char want[] = {0, 1, 0, 1, 0, 0, 1, 0};
	ck_assert(!memcmp(kept, want, 8));
	ck_assert_double_eq(compress_bytes(CMP_TOPK, 0.3, 8, CMP_BLOCK), 24);
	/* ratio 1 keeps everything, bit for bit */
	float q[] = {0.1f, -0.2f, 0.3f};
	ck_assert_int_eq(compress_apply(CMP_TOPK, 1, CMP_BLOCK, 0, 0, q, 3, NULL), 0);
	eq(q, (const float[]){0.1f, -0.2f, 0.3f}, 3);
	ck_assert_double_eq(compress_bytes(CMP_NONE, 1, 8, CMP_BLOCK), 32);
}
END_TEST

/* random-k: k = 4 of 8 kept as they are, the rest 0, the same mask for
 * the same (seed, stream) (a server draws it too), 4 bytes each */
static int
desc(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* the k-th largest, counting equal values, against a sort: both the
 * min-heap (k <= 64 and 16 k <= n: DeMo's 32 of a chunk) and the
 * quickselect, on values with many ties */
START_TEST(kth_largest_against_a_sort)
{
	uint64_t st = 7;
	const size_t ns[] = {1, 5, 16, 100, 1024, 3584};
	for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++) {
		size_t n = ns[a];
		float *v = malloc(sizeof(float) * n), *w = malloc(sizeof(float) * n),
		      *sorted = malloc(sizeof(float) * n);
		for (size_t i = 0; i < n; i++) {
			st = st * 6364136223846793005ull + 1442695040888963407ull;
			v[i] = (float)((st >> 33) % 97) * 0.25f; /* ties */
		}
		memcpy(sorted, v, sizeof(float) * n);
		qsort(sorted, n, sizeof(float), desc);
		for (size_t k = 1; k <= n; k = k < 40 ? k + 1 : k * 3) {
			memcpy(w, v, sizeof(float) * n);
			float got = compress_kth_largest(w, n, k);
			ck_assert_msg(got == sorted[k - 1], "n %zu, k %zu: %g, want %g", n, k,
				      (double)got, (double)sorted[k - 1]);
		}
		free(v);
		free(w);
		free(sorted);
	}
}
END_TEST

START_TEST(randk_from_a_shared_seed)
{
	const float x[] = {1, 2, 3, 4, 5, 6, 7, 8};
	float a[8], b[8], c[8];
	unsigned char ka[8], kb[8], kc[8];
	memcpy(a, x, sizeof(a));
	memcpy(b, x, sizeof(b));
	memcpy(c, x, sizeof(c));
	ck_assert_int_eq(compress_apply(CMP_RANDK, 0.5, CMP_BLOCK, 7, 1, a, 8, ka), 0);
	ck_assert_int_eq(compress_apply(CMP_RANDK, 0.5, CMP_BLOCK, 7, 1, b, 8, kb), 0);
	ck_assert_int_eq(compress_apply(CMP_RANDK, 0.5, CMP_BLOCK, 7, 2, c, 8, kc), 0);
	int n = 0;
	for (int i = 0; i < 8; i++) {
		n += ka[i];
		ck_assert(a[i] == (ka[i] ? x[i] : 0));
	}
	ck_assert_int_eq(n, 4);
	ck_assert(!memcmp(ka, kb, 8));
	eq(a, b, 8);
	ck_assert(memcmp(ka, kc, 8)); /* another push, another mask */
	ck_assert_double_eq(compress_bytes(CMP_RANDK, 0.5, 8, CMP_BLOCK), 16);
}
END_TEST

/* int8 in blocks of 4: scale max|x| / 127, 1 in the first block (max
 * 127), 0.5 in the second (max 63.5), a block of zeros stays zero;
 * rounding halves away from zero (30.5 -> 31, 0.25 / 0.5 -> 1) */
START_TEST(int8_blockwise)
{
	float p[] = {127, -50.4f, 30.5f, 0.49f, 63.5f, -1.2f, 0.25f, 10.3f, 0, 0};
	ck_assert_int_eq(compress_apply(CMP_INT8, 1, 4, 0, 0, p, 10, NULL), 0);
	eq(p, (const float[]){127, -50, 31, 0, 63.5f, -1, 0.5f, 10.5f, 0, 0}, 10);
	/* n bytes and an fp32 scale per block: 10 + 4 x 3 */
	ck_assert_double_eq(compress_bytes(CMP_INT8, 1, 10, 4), 22);
}
END_TEST

/* 4-bit E3M0 in blocks of 4: magnitudes 0 and M 2^-6 .. M (M the block's
 * max|x|), the nearest, a tie to the larger: -3 of M 8 is 3/8, halfway
 * between 1/4 and 1/2, so -4; 0.1 is nearer 8/64 than 0; 2^-7 M, halfway
 * between 0 and 2^-6 M, goes up */
START_TEST(int4_e3m0)
{
	float p[] = {8, -3, 0.1f, 1, 0.2f, -0.0625f, 0, 0.03f, 64, 0.5f};
	ck_assert_int_eq(compress_apply(CMP_INT4, 1, 4, 0, 0, p, 10, NULL), 0);
	eq(p, (const float[]){8, -4, 0.125f, 1, 0.2f, -(0.2f / 4), 0, 0.2f / 8, 64, 1}, 10);
	/* n / 2 bytes (rounded up) and an fp32 scale per block */
	ck_assert_double_eq(compress_bytes(CMP_INT4, 1, 10, 4), 5 + 12);
	ck_assert_double_eq(compress_bytes(CMP_INT4, 1, 7, 4), 4 + 8);
}
END_TEST

/* error feedback, top-1 of 4: push 1, g = (1, -3, 2, 0.5): -3 sent, e =
 * (1, 0, 2, 0.5); push 2, g = (0.5, 1, -1, 0.25): p = g + e = (1.5, 1,
 * 1, 0.75), 1.5 sent, e = (0, 1, 1, 0.75) */
START_TEST(ef_residual_two_pushes)
{
	float e[4] = {0};
	float g1[] = {1, -3, 2, 0.5f};
	ck_assert_int_eq(compress_ef(CMP_TOPK, 0.25, CMP_BLOCK, 0, 0, g1, e, 4, NULL), 0);
	eq(g1, (const float[]){0, -3, 0, 0}, 4);
	eq(e, (const float[]){1, 0, 2, 0.5f}, 4);
	float g2[] = {0.5f, 1, -1, 0.25f};
	ck_assert_int_eq(compress_ef(CMP_TOPK, 0.25, CMP_BLOCK, 0, 0, g2, e, 4, NULL), 0);
	eq(g2, (const float[]){1.5f, 0, 0, 0}, 4);
	eq(e, (const float[]){0, 1, 1, 0.75f}, 4);
	/* int8 with feedback: the rounding error is kept, e = p - D(C(p)):
	 * (127, 0.75) at scale 1 sends (127, 1), e = (0, -0.25) */
	float f[2] = {0}, q[] = {127, 0.75f};
	ck_assert_int_eq(compress_ef(CMP_INT8, 1, 4, 0, 0, q, f, 2, NULL), 0);
	eq(q, (const float[]){127, 1}, 2);
	eq(f, (const float[]){0, -0.25f}, 2);
}
END_TEST

static Suite *
compress_suite(void)
{
	Suite *s = suite_create("compress");
	TCase *tc = tcase_create("compressors");
	tcase_add_test(tc, names_and_k);
	tcase_add_test(tc, topk_keeps_the_largest);
	tcase_add_test(tc, kth_largest_against_a_sort);
	tcase_add_test(tc, randk_from_a_shared_seed);
	tcase_add_test(tc, int8_blockwise);
	tcase_add_test(tc, int4_e3m0);
	tcase_add_test(tc, ef_residual_two_pushes);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(compress_suite)
