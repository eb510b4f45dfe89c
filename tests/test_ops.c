/* test_ops.c - ResNet's backend ops on the ref backend (backend.h):
 * batch normalization (training and eval, with and without its fused relu),
 * global average pooling and the option-A shortcut. Every input and
 * parameter gradient against a fourth-order central difference of the
 * loss L = sum w y (w fixed and random, so dy = w), accumulated in double,
 * on odd shapes (C = 3, H = 5, W = 7, B = 3: P B = 105, no multiple of 16).
 * Inputs are multiples of 2^-12 and the step is 2^-5, so every perturbed
 * input is exact in float. Batch normalization's training-mode difference
 * recomputes the batch statistics at each perturbed x (they are functions
 * of x). The running statistics' update and the eval forward are pinned on
 * a case worked out by hand; the forward maps of pooling and the shortcut
 * on small cases written out index by index; cpu's batch normalization
 * gives the same bits on 1 and 2 threads. */
#include <math.h>

#include "backend.h"
#include "rng.h"
#include "sl.h"
#include "testutil.h"

#define FD_H 0.03125 /* 2^-5 */

static backend *
open_ref(void)
{
	backend *be;
	char err[SL_ERR_LEN];
	ck_assert_int_eq(backend_open("ref", 1, &be, err), 0);
	return be;
}

/* n values in [lo, hi), multiples of 2^-12 */
static float *
vals(rng *g, size_t n, double lo, double hi)
{
	float *v = malloc(sizeof(float) * (n ? n : 1));
	ck_assert_ptr_nonnull(v);
	for (size_t i = 0; i < n; i++)
		v[i] = (float)(round((lo + (hi - lo) * rng_uniform(g)) * 4096.0) / 4096.0);
	return v;
}

static double
dot(const float *w, const float *y, size_t n)
{
	double s = 0.0;
	for (size_t i = 0; i < n; i++)
		s += (double)w[i] * (double)y[i];
	return s;
}

/* the loss at the current inputs */
typedef double (*loss_fn)(void *ctx);

/* The analytic gradient ana[0, n) of f with respect to v[0, n) against
 * central differences, index by index: fails at the first probe past the
 * bound, naming what and where. Returns the worst relative error. */
static double
fd_check(const char *what, float *v, size_t n, const float *ana, loss_fn f,
	 void *ctx)
{
	/* the loss is a double sum of float outputs: its noise, over the
	 * step, is about 1e-5 of the gradient's scale, so an error counts
	 * relative to the larger of the two values and 5% of that scale */
	double scale = 1e-3, worst = 0.0;
	for (size_t i = 0; i < n; i++)
		scale = fmax(scale, fabs(ana[i]));
	for (size_t i = 0; i < n; i++) {
		const float orig = v[i];
		double fk[4];
		const double step[4] = {-2 * FD_H, -FD_H, FD_H, 2 * FD_H};
		for (int k = 0; k < 4; k++) {
			v[i] = (float)(orig + step[k]);
			fk[k] = f(ctx);
		}
		v[i] = orig;
		const double num = (8.0 * (fk[2] - fk[1]) - (fk[3] - fk[0])) / (12.0 * FD_H);
		const double err = fabs(num - ana[i]) / (0.05 * scale + fabs(num) + fabs(ana[i]));
		ck_assert_msg(err <= 1e-3, "%s[%zu]: analytic %.7g, central difference %.7g",
			      what, i, (double)ana[i], num);
		if (err > worst)
			worst = err;
	}
	return worst;
}

/* ---- batch normalization -------------------------------------------------- */

typedef struct bn_case {
	backend *be;
	int c, p, b, training, relu;
	float momentum, eps;
	float *x, *gamma, *beta, *rm0, *rv0; /* inputs, running stats before */
	float *y, *mean, *invstd, *rm, *rv;  /* outputs */
	float *w;                            /* the loss's weights: dy */
} bn_case;

static size_t
bn_n(const bn_case *t)
{
	return (size_t)t->c * t->p * t->b;
}

static void
bn_forward(bn_case *t)
{
	memcpy(t->rm, t->rm0, sizeof(float) * t->c);
	memcpy(t->rv, t->rv0, sizeof(float) * t->c);
	t->be->ops->bn_fwd(t->be, t->x, t->gamma, t->beta, t->y, t->mean, t->invstd, t->rm,
			   t->rv, t->c, t->p, t->b, t->training, t->momentum, t->eps, t->relu);
}

static double
bn_loss(void *ctx)
{
	bn_case *t = ctx;
	bn_forward(t);
	return dot(t->w, t->y, bn_n(t));
}

static void
bn_setup(bn_case *t, int c, int h, int w, int b, int training, uint64_t seed)
{
	rng g;
	rng_seed(&g, seed, 3);
	memset(t, 0, sizeof(*t));
	t->be = open_ref();
	t->c = c;
	t->p = h * w;
	t->b = b;
	t->training = training;
	t->momentum = 0.1f;
	t->eps = 1e-5f;
	const size_t n = bn_n(t);
	t->x = vals(&g, n, -1.0, 1.5);
	t->gamma = vals(&g, c, 0.5, 1.5);
	t->beta = vals(&g, c, -0.5, 0.5);
	t->rm0 = vals(&g, c, -0.3, 0.3);
	t->rv0 = vals(&g, c, 0.2, 0.8);
	t->w = vals(&g, n, -1.0, 1.0);
	t->y = calloc(n, sizeof(float));
	t->mean = calloc(c, sizeof(float));
	t->invstd = calloc(c, sizeof(float));
	t->rm = calloc(c, sizeof(float));
	t->rv = calloc(c, sizeof(float));
}

static void
bn_teardown(bn_case *t)
{
	float *all[] = {t->x, t->gamma, t->beta, t->rm0, t->rv0, t->w,
			t->y, t->mean, t->invstd, t->rm, t->rv};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		free(all[i]);
	backend_free(t->be);
}

/* bn_bwd at the current inputs: dx, dgamma, dbeta (malloc'd) */
static void
bn_grads(bn_case *t, float **dx, float **dg, float **db)
{
	const size_t n = bn_n(t);
	bn_forward(t);
	float *dy = malloc(sizeof(float) * n);
	memcpy(dy, t->w, sizeof(float) * n);
	*dx = calloc(n, sizeof(float));
	*dg = calloc(t->c, sizeof(float));
	*db = calloc(t->c, sizeof(float));
	t->be->ops->bn_bwd(t->be, t->x, t->gamma, t->mean, t->invstd, t->y, dy, *dx, *dg, *db,
			   t->c, t->p, t->b, t->training, t->relu);
	free(dy);
}

static void
bn_fd(int training)
{
	bn_case t;
	bn_setup(&t, 3, 5, 7, 3, training, 11 + training);
	float *dx, *dg, *db;
	bn_grads(&t, &dx, &dg, &db);
	double e1 = fd_check("bn dx", t.x, bn_n(&t), dx, bn_loss, &t);
	double e2 = fd_check("bn dgamma", t.gamma, t.c, dg, bn_loss, &t);
	double e3 = fd_check("bn dbeta", t.beta, t.c, db, bn_loss, &t);
	printf("ops: bn %s: worst relative errors dx %.2g, dgamma %.2g, dbeta %.2g\n",
	       training ? "training" : "eval", e1, e2, e3);
	if (training) { /* the batch statistics' terms matter: dx sums to 0 */
		for (int ch = 0; ch < t.c; ch++) {
			double s = 0.0;
			for (int i = 0; i < t.p * t.b; i++)
				s += dx[(size_t)ch * t.p * t.b + i];
			ck_assert_msg(fabs(s) < 1e-4, "channel %d: sum of dx %g", ch, s);
		}
	}
	free(dx);
	free(dg);
	free(db);
	bn_teardown(&t);
}

START_TEST(bn_training_gradients)
{
	bn_fd(1);
}
END_TEST

START_TEST(bn_eval_gradients)
{
	bn_fd(0);
}
END_TEST

/* The fused relu is relu after the plain op, forward and backward, to the
 * bit, and the backward masks dy in place. */
START_TEST(bn_relu_is_fused_exactly)
{
	for (int training = 0; training < 2; training++) {
		bn_case t;
		bn_setup(&t, 3, 5, 7, 3, training, 21);
		const size_t n = bn_n(&t);
		float *dx0, *dg0, *db0, *dx1, *dg1, *db1;
		float *y0 = malloc(sizeof(float) * n), *dy = malloc(sizeof(float) * n);
		bn_forward(&t);
		memcpy(y0, t.y, sizeof(float) * n);
		t.relu = 1;
		bn_forward(&t);
		int zeros = 0;
		for (size_t i = 0; i < n; i++) {
			ck_assert_float_eq(t.y[i], y0[i] > 0.0f ? y0[i] : 0.0f);
			zeros += t.y[i] == 0.0f;
		}
		ck_assert_int_gt(zeros, (int)n / 10); /* the mask is not empty */
		/* relu 0 with dy masked by hand = relu 1 */
		for (size_t i = 0; i < n; i++)
			t.w[i] = y0[i] > 0.0f ? t.w[i] : 0.0f;
		t.relu = 0;
		bn_grads(&t, &dx0, &dg0, &db0);
		rng g;
		rng_seed(&g, 21, 3);
		float *w1 = vals(&g, n, -1.0, 1.0);
		for (size_t i = 0; i < n; i++)
			if (y0[i] > 0.0f)
				w1[i] = t.w[i]; /* the masked places hold anything */
		memcpy(t.w, w1, sizeof(float) * n);
		t.relu = 1;
		bn_forward(&t);
		memcpy(dy, t.w, sizeof(float) * n);
		dx1 = calloc(n, sizeof(float));
		dg1 = calloc(t.c, sizeof(float));
		db1 = calloc(t.c, sizeof(float));
		t.be->ops->bn_bwd(t.be, t.x, t.gamma, t.mean, t.invstd, t.y, dy, dx1, dg1, db1, t.c,
				  t.p, t.b, t.training, 1);
		ck_assert(!memcmp(dx0, dx1, sizeof(float) * n));
		ck_assert(!memcmp(dg0, dg1, sizeof(float) * t.c));
		ck_assert(!memcmp(db0, db1, sizeof(float) * t.c));
		for (size_t i = 0; i < n; i++)
			ck_assert_float_eq(dy[i], y0[i] > 0.0f ? w1[i] : 0.0f);
		float *all[] = {dx0, dg0, db0, dx1, dg1, db1, y0, dy, w1};
		for (int i = 0; i < 9; i++)
			free(all[i]);
		bn_teardown(&t);
	}
}
END_TEST

/* Two channels of four values (C 2, P 2, B 2), momentum 0.1, eps 1e-5:
 *   channel 0: 1 2 3 4, mean 2.5, biased var 1.25, unbiased 5/3;
 *     run_mean 0 -> 0.25, run_var 1 -> 0.9 + 0.1 * 5/3 = 1.0666667
 *   channel 1: 0 0 2 -2, mean 0, biased var 2, unbiased 8/3;
 *     run_mean 1 -> 0.9, run_var 2 -> 1.8 + 0.1 * 8/3 = 2.0666667
 * and y = gamma (x - mean) / sqrt(var + eps) + beta with the biased var;
 * then eval normalises with the running statistics just written. */
START_TEST(bn_running_stats_by_hand)
{
	backend *be = open_ref();
	const float x[8] = {1, 2, 3, 4, 0, 0, 2, -2};
	const float gamma[2] = {2.0f, 0.5f}, beta[2] = {0.25f, -1.0f};
	float rm[2] = {0.0f, 1.0f}, rv[2] = {1.0f, 2.0f}, mean[2], invstd[2], y[8];
	be->ops->bn_fwd(be, x, gamma, beta, y, mean, invstd, rm, rv, 2, 2, 2, 1, 0.1f, 1e-5f, 0);
	const double want_rm[2] = {0.25, 0.9}, want_rv[2] = {0.9 + 0.1 * 5.0 / 3.0,
							      1.8 + 0.1 * 8.0 / 3.0};
	const double want_mu[2] = {2.5, 0.0}, want_var[2] = {1.25, 2.0};
	for (int c = 0; c < 2; c++) {
		ck_assert_msg(fabs(rm[c] - want_rm[c]) <= 1e-7, "run_mean[%d] %.9g, want %.9g", c,
			      (double)rm[c], want_rm[c]);
		ck_assert_msg(fabs(rv[c] - want_rv[c]) <= 2e-7 * want_rv[c],
			      "run_var[%d] %.9g, want %.9g", c, (double)rv[c], want_rv[c]);
		ck_assert(mean[c] == (float)want_mu[c]);
		const double r = 1.0 / sqrt(want_var[c] + 1e-5);
		ck_assert_msg(fabs(invstd[c] - r) <= 1e-7 * r, "invstd[%d] %.9g, want %.9g", c,
			      (double)invstd[c], r);
		for (int i = 0; i < 4; i++) {
			const double want = gamma[c] * (x[4 * c + i] - want_mu[c]) * r + beta[c];
			ck_assert_msg(fabs(y[4 * c + i] - want) <= 1e-6, "y[%d] %.9g, want %.9g",
				      4 * c + i, (double)y[4 * c + i], want);
		}
	}
	/* eval: the running statistics, unchanged, normalise */
	const float rm1[2] = {rm[0], rm[1]}, rv1[2] = {rv[0], rv[1]};
	be->ops->bn_fwd(be, x, gamma, beta, y, mean, invstd, rm, rv, 2, 2, 2, 0, 0.1f, 1e-5f, 0);
	ck_assert(!memcmp(rm, rm1, sizeof(rm)) && !memcmp(rv, rv1, sizeof(rv)));
	for (int c = 0; c < 2; c++) {
		const double r = 1.0 / sqrt(want_rv[c] + 1e-5);
		ck_assert(mean[c] == rm[c]);
		ck_assert_msg(fabs(invstd[c] - r) <= 1e-6 * r, "eval invstd[%d]", c);
		for (int i = 0; i < 4; i++) {
			const double want = gamma[c] * (x[4 * c + i] - want_rm[c]) * r + beta[c];
			ck_assert_msg(fabs(y[4 * c + i] - want) <= 2e-6, "eval y[%d] %.9g, want %.9g",
				      4 * c + i, (double)y[4 * c + i], want);
		}
	}
	backend_free(be);
}
END_TEST

/* ---- global average pooling ------------------------------------------------ */

typedef struct pool_case {
	backend *be;
	int c, p, b;
	float *x, *y, *w;
} pool_case;

static double
pool_loss(void *ctx)
{
	pool_case *t = ctx;
	t->be->ops->avgpool_fwd(t->be, t->x, t->y, t->c, t->p, t->b);
	return dot(t->w, t->y, (size_t)t->b * t->c);
}

START_TEST(avgpool_gradients_and_map)
{
	rng g;
	rng_seed(&g, 31, 3);
	pool_case t = {.be = open_ref(), .c = 3, .p = 35, .b = 3};
	const size_t nx = (size_t)t.c * t.p * t.b, ny = (size_t)t.b * t.c;
	t.x = vals(&g, nx, -1.0, 1.0);
	t.w = vals(&g, ny, -1.0, 1.0);
	t.y = calloc(ny, sizeof(float));
	/* y[b][c] is the mean of x[c][.][b] */
	pool_loss(&t);
	for (int b = 0; b < t.b; b++)
		for (int c = 0; c < t.c; c++) {
			double s = 0.0;
			for (int q = 0; q < t.p; q++)
				s += t.x[((size_t)c * t.p + q) * t.b + b];
			ck_assert_msg(fabs(t.y[b * t.c + c] - s / t.p) <= 1e-7, "y[%d][%d]", b, c);
		}
	float *dx = calloc(nx, sizeof(float));
	t.be->ops->avgpool_bwd(t.be, t.w, dx, t.c, t.p, t.b);
	double e = fd_check("avgpool dx", t.x, nx, dx, pool_loss, &t);
	printf("ops: avgpool: worst relative error dx %.2g\n", e);
	free(dx);
	free(t.x);
	free(t.w);
	free(t.y);
	backend_free(t.be);
}
END_TEST

/* ---- the option-A shortcut ------------------------------------------------- */

typedef struct sc_case {
	backend *be;
	int cin, h, w, cout, s, b;
	float *x, *y, *w8;
} sc_case;

static size_t
sc_ny(const sc_case *t)
{
	return (size_t)t->cout * shortcut_out_dim(t->h, t->s) * shortcut_out_dim(t->w, t->s) *
	       t->b;
}

static double
sc_loss(void *ctx)
{
	sc_case *t = ctx;
	t->be->ops->shortcut_fwd(t->be, t->x, t->y, t->cin, t->h, t->w, t->cout, t->s, t->b, 0);
	return dot(t->w8, t->y, sc_ny(t));
}

START_TEST(shortcut_gradients)
{
	/* 16 -> 32 at stride 2 shape-wise (3 -> 7 and 3 -> 6: an odd pad
	 * split), and the identity */
	const int cases[][3] = {{3, 7, 2}, {3, 6, 2}, {3, 3, 1}, {2, 4, 1}};
	for (int k = 0; k < 4; k++) {
		rng g;
		rng_seed(&g, 41 + k, 3);
		sc_case t = {.be = open_ref(), .cin = cases[k][0], .h = 5, .w = 7,
			     .cout = cases[k][1], .s = cases[k][2], .b = 3};
		const size_t nx = (size_t)t.cin * t.h * t.w * t.b, ny = sc_ny(&t);
		t.x = vals(&g, nx, -1.0, 1.0);
		t.w8 = vals(&g, ny, -1.0, 1.0);
		t.y = calloc(ny, sizeof(float));
		float *dx = vals(&g, nx, -1.0, 1.0), *dx0 = malloc(sizeof(float) * nx);
		memcpy(dx0, dx, sizeof(float) * nx);
		t.be->ops->shortcut_bwd(t.be, t.w8, dx, t.cin, t.h, t.w, t.cout, t.s, t.b, 0);
		char what[64];
		snprintf(what, sizeof(what), "shortcut %d->%d stride %d dx", t.cin, t.cout, t.s);
		fd_check(what, t.x, nx, dx, sc_loss, &t);
		/* acc adds the same onto what was there, bit for bit */
		float *dxa = malloc(sizeof(float) * nx);
		memcpy(dxa, dx0, sizeof(float) * nx);
		t.be->ops->shortcut_bwd(t.be, t.w8, dxa, t.cin, t.h, t.w, t.cout, t.s, t.b, 1);
		for (size_t i = 0; i < nx; i++)
			ck_assert_float_eq(dxa[i], dx0[i] + dx[i]);
		float *y0 = vals(&g, ny, -1.0, 1.0), *ya = malloc(sizeof(float) * ny);
		memcpy(ya, y0, sizeof(float) * ny);
		sc_loss(&t);
		t.be->ops->shortcut_fwd(t.be, t.x, ya, t.cin, t.h, t.w, t.cout, t.s, t.b, 1);
		for (size_t i = 0; i < ny; i++)
			ck_assert_float_eq(ya[i], y0[i] + t.y[i]);
		free(dx);
		free(dx0);
		free(dxa);
		free(y0);
		free(ya);
		free(t.x);
		free(t.w8);
		free(t.y);
		backend_free(t.be);
	}
}
END_TEST

/* 2 -> 4 channels, 3 x 3 -> 2 x 2 at stride 2, one image: x holds its own
 * index; y's channel 0 and 3 are zero (one pad channel on each side), and
 * channel 1 + ci holds x's (0,0) (0,2) (2,0) (2,2) of channel ci */
START_TEST(shortcut_map_by_hand)
{
	backend *be = open_ref();
	float x[18], y[16], dx[18];
	for (int i = 0; i < 18; i++)
		x[i] = (float)(i + 1);
	for (int i = 0; i < 16; i++)
		y[i] = -7.0f;
	be->ops->shortcut_fwd(be, x, y, 2, 3, 3, 4, 2, 1, 0);
	const float want[16] = {0, 0, 0, 0, 1, 3, 7, 9, 10, 12, 16, 18, 0, 0, 0, 0};
	for (int i = 0; i < 16; i++)
		ck_assert_msg(y[i] == want[i], "y[%d] %g, want %g", i, (double)y[i],
			      (double)want[i]);
	/* the backward sends channel 1 + ci's values back to the even pixels */
	be->ops->shortcut_bwd(be, want, dx, 2, 3, 3, 4, 2, 1, 0);
	for (int i = 0; i < 18; i++) {
		const int pix = i % 9, r = pix / 3, c = pix % 3;
		const float w = r % 2 == 0 && c % 2 == 0 ? x[i] : 0.0f;
		ck_assert_msg(dx[i] == w, "dx[%d] %g, want %g", i, (double)dx[i], (double)w);
	}
	backend_free(be);
}
END_TEST

/* cpu's batch normalization: each channel is one thread's, in one order,
 * so 1 and 2 threads give the same bits, and so does a second call */
START_TEST(cpu_bn_same_bits_for_any_thread_count)
{
	rng g;
	rng_seed(&g, 51, 3);
	const int C = 5, P = 9 * 9, B = 7;
	const size_t n = (size_t)C * P * B;
	float *x = vals(&g, n, -1.0, 2.0), *dy0 = vals(&g, n, -1.0, 1.0);
	float *gamma = vals(&g, C, 0.5, 1.5), *beta = vals(&g, C, -0.5, 0.5);
	float *out[3][6];
	for (int k = 0; k < 3; k++) {
		backend *be;
		char err[SL_ERR_LEN];
		ck_assert_int_eq(backend_open("cpu", k == 0 ? 1 : 2, &be, err), 0);
		float *y = calloc(n, 4), *mean = calloc(C, 4), *invstd = calloc(C, 4);
		float *rm = calloc(C, 4), *rv = calloc(C, 4), *dy = malloc(n * 4);
		float *dx = calloc(n, 4), *dg = calloc(C, 4), *db = calloc(C, 4);
		memcpy(dy, dy0, n * 4);
		be->ops->bn_fwd(be, x, gamma, beta, y, mean, invstd, rm, rv, C, P, B, 1, 0.1f, 1e-5f, 1);
		be->ops->bn_bwd(be, x, gamma, mean, invstd, y, dy, dx, dg, db, C, P, B, 1, 1);
		float *keep[6] = {y, rv, dx, dg, db, invstd};
		memcpy(out[k], keep, sizeof(keep));
		free(mean);
		free(rm);
		free(dy);
		backend_free(be);
	}
	const size_t len[6] = {n, C, n, C, C, C};
	for (int k = 1; k < 3; k++)
		for (int j = 0; j < 6; j++)
			ck_assert_msg(!memcmp(out[0][j], out[k][j], len[j] * 4),
				      "output %d of run %d (1 thread, 2, 2 again) differs from "
				      "run 0's", j, k);
	for (int k = 0; k < 3; k++)
		for (int j = 0; j < 6; j++)
			free(out[k][j]);
	free(x);
	free(dy0);
	free(gamma);
	free(beta);
}
END_TEST

static Suite *
ops_suite(void)
{
	Suite *s = suite_create("ops");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, bn_training_gradients);
	tcase_add_test(tc, bn_eval_gradients);
	tcase_add_test(tc, bn_relu_is_fused_exactly);
	tcase_add_test(tc, bn_running_stats_by_hand);
	tcase_add_test(tc, avgpool_gradients_and_map);
	tcase_add_test(tc, shortcut_gradients);
	tcase_add_test(tc, shortcut_map_by_hand);
	tcase_add_test(tc, cpu_bn_same_bits_for_any_thread_count);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(ops_suite)
