/* test_dct.c - DeMo's arithmetic (engine/ps/dct.c, engine/ps/rules/demo.c)
 * on tiny cases worked by hand: the chunk side of a dimension, the
 * orthonormal DCT-II against a 4-point one computed by hand, the
 * separable 2-D block, the top-k per chunk, a worker's error feedback,
 * the server's step (the mean over each coefficient's senders, the sign,
 * the decay), signSGD as the case k = the chunk, beta = 0, and the bytes a
 * push costs. Values that go through an irrational basis are compared to
 * 1e-6; what the sign decides is compared exactly. */
#include <math.h>
#include <stdlib.h>

#include "dct.h"
#include "ps.h"
#include "rules.h"
#include "testutil.h"

static void
near(const float *got, const double *want, size_t n, double tol)
{
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(fabs((double)got[i] - want[i]) <= tol, "[%zu]: %.9g, expected %.9g",
			      i, (double)got[i], want[i]);
}

static void
eq(const float *got, const float *want, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(got[i] == want[i], "[%zu]: %.9g, expected %.9g", i, (double)got[i],
			      (double)want[i]);
}

START_TEST(chunk_side_is_the_largest_divisor)
{
	/* DeMo's _get_smaller_split: the largest divisor of n not above the
	 * target; n itself when it is not above */
	ck_assert_uint_eq(dct_side(784, 64), 56);
	ck_assert_uint_eq(dct_side(10, 64), 10);
	ck_assert_uint_eq(dct_side(128, 64), 64);
	ck_assert_uint_eq(dct_side(64, 64), 64);
	ck_assert_uint_eq(dct_side(97, 64), 1); /* a prime above the target */
	ck_assert_uint_eq(dct_side(65, 64), 13);
	ck_assert_uint_eq(dct_side(256, 64), 64);
	ck_assert_uint_eq(dct_side(120, 64), 60);
	ck_assert_uint_eq(dct_side(1, 64), 1);
	ck_assert_uint_eq(dct_side(784, 1), 1);
	ck_assert_uint_eq(dct_side(12, 5), 4);
}
END_TEST

START_TEST(basis_is_orthonormal_dct2)
{
	/* the 4-point basis by hand: row 0 is 1/2; row k is sqrt(1/2)
	 * cos(pi (2j + 1) k / 8) */
	float b[16];
	dct_basis(4, b);
	const double c1 = 0.65328148243818826, c3 = 0.27059805007309849;
	near(b, (const double[]){0.5, 0.5, 0.5, 0.5, c1, c3, -c3, -c1, 0.5, -0.5, -0.5, 0.5,
				 c3, -c1, c1, -c3},
	     16, 1e-7);
	/* DCT-II of (1, 2, 3, 4): (5, -(3 c1 + c3), 0, c1 - 3 c3) */
	float x[4] = {1, 2, 3, 4}, y[4], z[4];
	ck_assert_int_eq(dct_encode(x, 1, 4, 64, y), 0);
	near(y, (const double[]){5, -2.2304424973876635, 0, -0.1585126677811084}, 4, 1e-6);
	ck_assert_int_eq(dct_decode(y, 1, 4, 64, z), 0);
	near(z, (const double[]){1, 2, 3, 4}, 4, 1e-6);
	/* the rows of each side's basis orthonormal */
	const size_t sides[] = {1, 2, 4, 7, 10, 56, 64};
	for (size_t s = 0; s < sizeof(sides) / sizeof(sides[0]); s++) {
		size_t c = sides[s];
		float *B = malloc(sizeof(float) * c * c);
		dct_basis(c, B);
		for (size_t i = 0; i < c; i++)
			for (size_t k = 0; k < c; k++) {
				double d = 0;
				for (size_t j = 0; j < c; j++)
					d += (double)B[i * c + j] * B[k * c + j];
				ck_assert_msg(fabs(d - (i == k)) < 1e-6, "side %zu: <%zu, %zu> = %g", c,
					      i, k, d);
			}
		free(B);
	}
}
END_TEST

START_TEST(round_trip_and_separable_blocks)
{
	/* a 120 x 10 matrix cut for 64: blocks of 60 x 10; IDCT(DCT(x)) = x */
	enum { R = 120, C = 10 };
	float *x = malloc(sizeof(float) * R * C), *y = malloc(sizeof(float) * R * C),
	      *z = malloc(sizeof(float) * R * C);
	for (int i = 0; i < R * C; i++)
		x[i] = (float)sin(0.37 * i) * (1 + i % 7);
	ck_assert_int_eq(dct_encode(x, R, C, 64, y), 0);
	ck_assert_int_eq(dct_decode(y, R, C, 64, z), 0);
	for (int i = 0; i < R * C; i++)
		ck_assert_msg(fabsf(x[i] - z[i]) < 1e-5f, "[%d]: %g against %g", i, (double)z[i],
			      (double)x[i]);
	/* orthonormal: the energy of each block is kept */
	double ex = 0, ey = 0;
	for (int i = 0; i < 60 * C; i++) {
		ex += (double)x[i] * x[i];
		ey += (double)y[i] * y[i];
	}
	ck_assert_double_eq_tol(ex, ey, 1e-6 * ex);
	free(x);
	free(y);
	free(z);

	/* a 4 x 4 block of the outer product a b^T: its coefficients are
	 * DCT(a) DCT(b)^T, coefficient (k, l) where element (k, l) sits */
	const float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, -1, 2};
	float o[16], oy[16], da[4], db[4];
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++)
			o[i * 4 + j] = a[i] * b[j];
	ck_assert_int_eq(dct_encode(o, 4, 4, 64, oy), 0);
	ck_assert_int_eq(dct_encode(a, 1, 4, 64, da), 0);
	ck_assert_int_eq(dct_encode(b, 1, 4, 64, db), 0);
	for (int k = 0; k < 4; k++)
		for (int l = 0; l < 4; l++)
			ck_assert_msg(fabs((double)oy[k * 4 + l] - (double)da[k] * db[l]) < 1e-5,
				      "(%d, %d): %g", k, l, (double)oy[k * 4 + l]);

	/* an 8 x 6 matrix cut for 4 (blocks 4 x 3), nonzero in block (1, 0)
	 * only: its coefficients are that block's alone, in its place */
	float m[48] = {0}, my[48], blk[12], by[12];
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 3; j++)
			blk[i * 3 + j] = m[(4 + i) * 6 + j] = (float)(1 + i * 3 + j);
	ck_assert_int_eq(dct_encode(m, 8, 6, 4, my), 0);
	ck_assert_int_eq(dct_encode(blk, 4, 3, 4, by), 0);
	for (int i = 0; i < 8; i++)
		for (int j = 0; j < 6; j++) {
			float want = i >= 4 && j < 3 ? by[(i - 4) * 3 + j] : 0.0f;
			ck_assert_msg(my[i * 6 + j] == want, "(%d, %d): %g, expected %g", i, j,
				      (double)my[i * 6 + j], (double)want);
		}
}
END_TEST

START_TEST(topk_per_chunk)
{
	/* two chunks of 4 (a vector of 8 cut for 4), k = 2 each: the two
	 * largest magnitudes of each, the lower index first among equals */
	float y[8] = {3, -3, 1, 3, 0.5f, -2, 2, 0.25f}, kept[8];
	ck_assert_int_eq(dct_topk(y, 1, 8, 4, 2, kept), 0);
	eq(y, (const float[]){3, -3, 0, 0, 0, -2, 2, 0}, 8);
	eq(kept, (const float[]){1, 1, 0, 0, 0, 1, 1, 0}, 8);
	/* k is at least 1 and at most the chunk; an all-zero chunk still
	 * sends its k (zero) coefficients, as torch.topk picks them */
	float z[4] = {0, 0, 0, 0}, kz[4];
	ck_assert_int_eq(dct_topk(z, 1, 4, 4, 2, kz), 0);
	eq(kz, (const float[]){1, 1, 0, 0}, 4);
	ck_assert_int_eq(dct_topk(z, 1, 4, 4, 99, kz), 0);
	eq(kz, (const float[]){1, 1, 1, 1}, 4);
	/* a matrix's block is its chunk: 4 x 2 cut for 2 is two 2 x 2
	 * blocks (rows 0-1, 2-3), k = 1 each */
	float m[8] = {1, 5, 2, 1, -7, 0, 0, 6}, km[8];
	ck_assert_int_eq(dct_topk(m, 4, 2, 2, 1, km), 0);
	eq(m, (const float[]){0, 5, 0, 0, -7, 0, 0, 0}, 8);
	ck_assert_uint_eq(dct_kept(4, 2, 2, 1), 2);
	ck_assert_uint_eq(dct_kept(10, 784, 64, 32), 14 * 32);
	ck_assert_uint_eq(dct_kept(1, 10, 64, 32), 10);
}
END_TEST

static ps_layer
vec(size_t off, size_t len)
{
	return ps_layer_make(off, len, len, 0, 0);
}

START_TEST(worker_error_feedback)
{
	/* one layer, a vector of 8 cut for 4, k = 2; delta = 0, lr 1:
	 * delta = g = (1, 2, 3, 4 | 0, 0, 0, 8). Chunk 1's DCT (5, -2.2304,
	 * 0, -0.1585) sends its first two; chunk 2's (4, -5.2263, 4,
	 * -2.1648) its second and, of the equal 4s, the first. delta keeps
	 * what was not sent: IDCT of the rest, chunk 1's -0.1585 (row 3 of
	 * the basis), chunk 2's 4 and -2.1648 (rows 2 and 3) */
	ps_layer L = vec(0, 8);
	rule_params rp = {.demo_decay = 0.5, .demo_topk = 2, .demo_chunk = 4};
	float g[8] = {1, 2, 3, 4, 0, 0, 0, 8}, d[8] = {0}, coef[8], kept[8];
	ck_assert_int_eq(demo_encode(&L, 1, 0, &rp, 1.0f, g, d, coef, kept), 0);
	eq(kept, (const float[]){1, 1, 0, 0, 1, 1, 0, 0}, 8);
	near(coef, (const double[]){5, -2.2304425, 0, 0, 4, -5.2262519, 0, 0}, 8, 1e-6);
	const double c1 = 0.65328148243818826, c3 = 0.27059805007309849;
	const double r3 = -0.1585126677811084, s2 = 4, s3 = -2.164784400584789;
	near(d, (const double[]){r3 * c3, -r3 * c1, r3 * c1, -r3 * c3,
				 0.5 * s2 + s3 * c3, -0.5 * s2 - s3 * c1, -0.5 * s2 + s3 * c1,
				 0.5 * s2 - s3 * c3},
	     8, 1e-6);
	/* the next step decays what was kept: delta = 0.5 delta + lr g */
	float d2[8];
	for (int i = 0; i < 8; i++)
		d2[i] = d[i];
	float zero[8] = {0};
	ck_assert_int_eq(demo_encode(&L, 1, 0, &rp, 1.0f, zero, d2, coef, kept), 0);
	float h[8], hy[8], hk[8], hs[8];
	for (int i = 0; i < 8; i++)
		h[i] = 0.5f * d[i];
	dct_encode(h, 1, 8, 4, hy);
	dct_topk(hy, 1, 8, 4, 2, hk);
	eq(kept, hk, 8);
	eq(coef, hy, 8);
	dct_decode(hy, 1, 8, 4, hs);
	for (int i = 0; i < 8; i++)
		ck_assert(d2[i] == h[i] - hs[i]);
	/* a layer below off is left alone (partial backprop sent the top) */
	ps_layer two[2] = {vec(0, 4), vec(4, 4)};
	float d3[8] = {0}, k3[8] = {9, 9, 9, 9, 9, 9, 9, 9};
	ck_assert_int_eq(demo_encode(two, 2, 4, &rp, 1.0f, g, d3, coef, k3), 0);
	eq(d3, (const float[]){0, 0, 0, 0}, 4);
	eq(k3, (const float[]){9, 9, 9, 9}, 4);
}
END_TEST

/* the server, two workers, a layer of 4 cut for 4 and one of 2 */
static ps *
server(backend **be, const float *w0, float lr, float wd)
{
	char err[SL_ERR_LEN];
	ck_assert_int_eq(backend_open("cpu", 1, be, err), 0);
	ps_layer layers[2] = {vec(0, 4), vec(4, 2)};
	ps *p;
	ck_assert_int_eq(ps_new(*be, 6, w0, layers, 2, 4, &p), 0);
	rule_params rp = {.demo_decay = 0.999, .demo_topk = 2, .demo_chunk = 4};
	ps_set_rule(p, rule_find("demo"), &rp);
	ps_set_opt(p, lr, 0.9f, wd); /* its momentum plays no part */
	return p;
}

static int
push(ps *p, int worker, const float *coef, const float *kept)
{
	ps_grad g = {.worker = worker, .g = coef, .kept = kept, .batch = 1};
	ps_result res;
	ck_assert_int_eq(ps_push(p, &g, 2, &res), 0);
	return res.applied;
}

START_TEST(server_mean_over_senders_and_sign)
{
	/* round 1. Layer 1: coefficient 0 sent by both (1 and 1: mean 1),
	 * coefficient 1 by worker 0 only (1.2: not halved). Q = IDCT(1, 1.2,
	 * 0, 0) = (1.28, 0.82, 0.18, -0.28): signs (+, +, +, -). Halving the
	 * lone one gives Q_3 = 0.5 - 0.6 c1 > 0, summing the shared one Q_3 =
	 * 1 - 1.2 c1 > 0: both would step w_3 the other way. Layer 2: worker
	 * 0 sends 1, worker 1 -1 for coefficient 0 (mean 0), nobody
	 * coefficient 1: Q = 0, sign 0, the weights only decayed. lr 0.5,
	 * wd 0.5: w = 0.75 w - 0.5 sign(Q). */
	backend *be;
	const float w0[6] = {4, 4, 4, 4, 4, 8};
	ps *p = server(&be, w0, 0.5f, 0.5f);
	ck_assert_int_eq(push(p, 0, (const float[]){1, 1.2f, 0, 0, 1, 0},
			      (const float[]){1, 1, 0, 0, 1, 0}), 0);
	ck_assert_int_eq(push(p, 1, (const float[]){1, 0, 0, 0, -1, 0},
			      (const float[]){1, 0, 0, 0, 1, 0}), 1);
	ck_assert_uint_eq(ps_version(p), 1);
	eq(ps_weights(p), (const float[]){2.5f, 2.5f, 2.5f, 3.5f, 3, 6}, 6);
	/* round 2, the round's sums and senders started afresh: layer 1,
	 * worker 1 alone sends coefficient 0 (-1) and worker 0 alone
	 * coefficient 2 (0.5): Q = IDCT(-1, 0, 0.5, 0) = (-0.25, -0.75,
	 * -0.75, -0.25); layer 2, worker 0 sends (0, 2), worker 1 (0, 2):
	 * Q = 2 (cos(pi/4), cos(3 pi/4)) = (1.41, -1.41) */
	ck_assert_int_eq(push(p, 0, (const float[]){0, 0, 0.5f, 0, 0, 2},
			      (const float[]){0, 0, 1, 0, 0, 1}), 0);
	ck_assert_int_eq(push(p, 1, (const float[]){-1, 0, 0, 0, 0, 2},
			      (const float[]){1, 0, 0, 0, 0, 1}), 1);
	eq(ps_weights(p), (const float[]){2.375f, 2.375f, 2.375f, 3.125f, 1.75f, 5}, 6);
	ps_free(p);
	backend_free(be);
}
END_TEST

START_TEST(server_skips_unsent_layers)
{
	/* partial backprop: both workers send layer 2 only; layer 1 keeps
	 * its weights (no decay either), as ssgd leaves a layer nobody sent */
	backend *be;
	const float w0[6] = {4, 4, 4, 4, 4, 8};
	ps *p = server(&be, w0, 0.5f, 0.5f);
	float c[6] = {0, 0, 0, 0, 2, 0}, k[6] = {0, 0, 0, 0, 1, 1};
	ps_grad g = {.worker = 0, .g = c, .kept = k, .off = 4, .batch = 1};
	ps_result res;
	ck_assert_int_eq(ps_push(p, &g, 2, &res), 0);
	g.worker = 1;
	ck_assert_int_eq(ps_push(p, &g, 2, &res), 0);
	ck_assert_int_eq(res.applied, 1);
	eq(ps_weights(p), (const float[]){4, 4, 4, 4, 2.5f, 5.5f}, 6);
	ps_free(p);
	backend_free(be);
}
END_TEST

START_TEST(sign_sgd_when_all_is_sent)
{
	/* k = the chunk and beta = 0: one worker's step is w - lr sign(g),
	 * exactly (the DCT's rounding is far below the gradient's values),
	 * on a 4 x 8 matrix cut for 4 (blocks 4 x 4, k 16) and its bias, and
	 * delta is left at (about) zero. With wd, w (1 - lr wd) first. */
	ps_layer L = ps_layer_make(0, 36, 32, 32, 8);
	ck_assert_uint_eq(L.rows, 4);
	ck_assert_uint_eq(L.cols, 8);
	rule_params rp = {.demo_decay = 0, .demo_topk = 16, .demo_chunk = 4};
	float g[36], w[36], want[36], d[36] = {0}, coef[36], kept[36];
	for (int i = 0; i < 36; i++) {
		g[i] = (float)((i % 2 ? 1 : -1) * (0.1 + 0.05 * (i % 5)));
		w[i] = (float)i / 8;
		want[i] = w[i] * 0.9375f - 0.125f * (g[i] > 0 ? 1 : -1);
	}
	ck_assert_int_eq(demo_encode(&L, 1, 0, &rp, 0.125f, g, d, coef, kept), 0);
	for (int i = 0; i < 36; i++) {
		ck_assert(kept[i] == 1);
		ck_assert(fabsf(d[i]) < 1e-7f);
	}
	int one = 1;
	ck_assert_int_eq(demo_apply(&L, 1, &one, &rp, 0.125f, 0.5f, coef, kept, w), 0);
	eq(w, want, 36);
}
END_TEST

START_TEST(bytes_of_a_push)
{
	/* logreg on 784 features: a [10][784] matrix cut in 10 x 56 blocks
	 * (14 of them, 32 kept each) and a bias of 10 (one chunk, all 10
	 * kept): 458 coefficients of 12 bytes; from off 7840 the bias alone */
	ps_layer L = ps_layer_make(0, 7850, 7840, 7840, 784);
	rule_params rp = {.demo_topk = 32, .demo_chunk = 64};
	ck_assert_double_eq(demo_push_bytes(&L, 1, 0, &rp), 12.0 * (14 * 32 + 10));
	ps_layer two[2] = {vec(0, 7840), vec(7840, 10)};
	ck_assert_double_eq(demo_push_bytes(two, 2, 7840, &rp), 12.0 * 10);
	/* a norm's gains and biases are two vectors: 2 x 16 cut for 64, k 8 */
	ps_layer N = ps_layer_make(0, 32, 0, 16, 0);
	rp.demo_topk = 8;
	ck_assert_double_eq(demo_push_bytes(&N, 1, 0, &rp), 12.0 * 16);
	rp.demo_topk = 32;
	ck_assert_double_eq(demo_push_bytes(&N, 1, 0, &rp), 12.0 * 32);
}
END_TEST

static Suite *
dct_suite(void)
{
	Suite *s = suite_create("dct");
	TCase *tc = tcase_create("demo");
	tcase_add_test(tc, chunk_side_is_the_largest_divisor);
	tcase_add_test(tc, basis_is_orthonormal_dct2);
	tcase_add_test(tc, round_trip_and_separable_blocks);
	tcase_add_test(tc, topk_per_chunk);
	tcase_add_test(tc, worker_error_feedback);
	tcase_add_test(tc, server_mean_over_senders_and_sign);
	tcase_add_test(tc, server_skips_unsent_layers);
	tcase_add_test(tc, sign_sgd_when_all_is_sent);
	tcase_add_test(tc, bytes_of_a_push);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(dct_suite)
