/* test_ps.c - the parameter server's arithmetic for each rule, pinned on
 * tiny cases computed by hand. */
#include <math.h>

#include "model.h"
#include "ps.h"
#include "rule.h"
#include "rules.h"
#include "testutil.h"

static backend *
cpu(void)
{
	backend *be;
	ck_assert_int_eq(backend_cpu_new(1, &be), 0);
	return be;
}

/* two layers: [0,2) and [2,3) */
static ps *
mk(backend *be, const float *w0, const char *rule, const rule_params *rp,
   float lr, float mu)
{
	ps_layer layers[] = {{.off = 0, .len = 2, .wlen = 2}, {.off = 2, .len = 1, .wlen = 1}};
	ps *p;
	ck_assert_int_eq(ps_new(be, 3, w0, layers, 2, 4, &p), 0);
	rule_params def = {0};
	ps_set_rule(p, rule_find(rule), rp ? rp : &def);
	ps_set_opt(p, lr, mu, 0);
	return p;
}

#define W(p, i) (ps_weights(p)[i])

START_TEST(asgd_applies_on_arrival)
{
	backend *be = cpu();
	float w0[] = {1, 2, 3}, g[] = {0.5f, -1, 2};
	ps *p = mk(be, w0, "asgd", NULL, 0.1f, 0);
	float local[3];
	uint64_t have = 99;
	ck_assert_int_eq(ps_pull(p, 0, local, &have), 1);
	ck_assert_uint_eq(have, 0);
	ck_assert_int_eq(ps_pull(p, 0, local, &have), 0); /* version unchanged: no copy */
	ps_result r;
	ps_grad pg = {.worker = 0, .v_read = 0, .g = g, .batch = 1};
	ck_assert_int_eq(ps_push(p, &pg, 1, &r), 0);
	ck_assert(r.applied);
	ck_assert_uint_eq(r.tau, 0);
	ck_assert_uint_eq(ps_version(p), 1);
	ck_assert_float_eq_tol(W(p, 0), 0.95f, 1e-7);
	ck_assert_float_eq_tol(W(p, 1), 2.1f, 1e-7);
	ck_assert_float_eq_tol(W(p, 2), 2.8f, 1e-6);
	/* a gradient read at v 0 applied at v 1 is one version stale */
	ck_assert_int_eq(ps_push(p, &pg, 1, &r), 0);
	ck_assert_uint_eq(r.tau, 1);
	ck_assert_uint_eq(ps_version(p), 2);
	ck_assert_float_eq_tol(W(p, 0), 0.9f, 1e-6);
	ps_free(p);
	backend_free(be);
}
END_TEST

START_TEST(sasgd_divides_by_staleness)
{
	backend *be = cpu();
	float w0[] = {0, 0, 0}, g[] = {1, 1, 1};
	ps *p = mk(be, w0, "sasgd", NULL, 0.3f, 0);
	ps_grad fresh = {.worker = 0, .v_read = 0, .g = g};
	ps_result r;
	ck_assert_int_eq(ps_push(p, &fresh, 1, &r), 0); /* tau 0: full lr: w = -0.3 */
	ck_assert_int_eq(ps_push(p, &fresh, 1, &r), 0); /* tau 1: lr/1: w = -0.6 */
	ck_assert_int_eq(ps_push(p, &fresh, 1, &r), 0); /* tau 2: lr/2: w = -0.75 */
	ck_assert_uint_eq(r.tau, 2);
	ck_assert_int_eq(ps_push(p, &fresh, 1, &r), 0); /* tau 3: lr/3: w = -0.85 */
	ck_assert_float_eq_tol(W(p, 0), -0.85f, 1e-6);
	ps_free(p);
	backend_free(be);
}
END_TEST

START_TEST(ssgd_averages_a_round)
{
	backend *be = cpu();
	float w0[] = {1, 1, 1}, g1[] = {1, 2, 3}, g2[] = {3, 2, 1};
	ps *p = mk(be, w0, "ssgd", NULL, 0.5f, 0);
	ps_result r;
	ps_grad a = {.worker = 0, .v_read = 0, .g = g1};
	ps_grad b = {.worker = 1, .v_read = 0, .g = g2};
	ck_assert_int_eq(ps_push(p, &a, 2, &r), 0);
	ck_assert(!r.applied);
	ck_assert_int_eq(r.round_count, 1);
	ck_assert_uint_eq(ps_version(p), 0);
	ck_assert_float_eq(W(p, 0), 1.0f); /* nothing applied yet */
	ck_assert_int_eq(ps_push(p, &b, 2, &r), 0);
	ck_assert(r.applied);
	ck_assert_uint_eq(r.tau, 0);
	ck_assert_uint_eq(ps_version(p), 1);
	/* mean gradient (2, 2, 2), lr 0.5 */
	for (int i = 0; i < 3; i++)
		ck_assert_float_eq_tol(W(p, i), 0.0f, 1e-7);
	ps_free(p);
	backend_free(be);
}
END_TEST

START_TEST(ssgd_partial_layers_average_over_senders)
{
	/* worker 0 sends everything, worker 1 only the top layer ([2,3)):
	 * layer 0 is averaged over 1 sender, layer 1 over 2 */
	backend *be = cpu();
	float w0[] = {0, 0, 0}, g1[] = {2, 4, 6}, g2[] = {100, 100, 2};
	ps *p = mk(be, w0, "ssgd", NULL, 1.0f, 0);
	ps_result r;
	ps_grad a = {.worker = 0, .g = g1, .off = 0};
	ps_grad b = {.worker = 1, .g = g2, .off = 2};
	ck_assert_int_eq(ps_push(p, &a, 2, &r), 0);
	ck_assert_int_eq(ps_push(p, &b, 2, &r), 0);
	ck_assert(r.applied);
	ck_assert_float_eq_tol(W(p, 0), -2.0f, 1e-7);
	ck_assert_float_eq_tol(W(p, 1), -4.0f, 1e-7);
	ck_assert_float_eq_tol(W(p, 2), -4.0f, 1e-7);
	/* a round where nobody sends layer 0 leaves it alone */
	ck_assert_int_eq(ps_push(p, &b, 1, &r), 0);
	ck_assert_float_eq_tol(W(p, 0), -2.0f, 1e-7);
	ck_assert_float_eq_tol(W(p, 2), -6.0f, 1e-7);
	ps_free(p);
	backend_free(be);
}
END_TEST

START_TEST(softsync_and_flush)
{
	backend *be = cpu();
	float w0[] = {0, 0, 0}, g[] = {1, 1, 1}, h[] = {3, 3, 3};
	ps *p = mk(be, w0, "softsync", NULL, 1.0f, 0);
	ps_result r;
	ps_grad a = {.worker = 0, .g = g}, b = {.worker = 2, .g = h};
	ck_assert_int_eq(ps_push(p, &a, 3, &r), 0);
	ck_assert_int_eq(ps_push(p, &b, 3, &r), 0);
	ck_assert(!r.applied);
	ck_assert_int_eq(ps_flush_round(p, 3), 0); /* 2 < 3: keeps waiting */
	ck_assert_int_eq(ps_flush_round(p, 2), 1); /* a worker left */
	ck_assert_float_eq_tol(W(p, 1), -2.0f, 1e-7);
	ck_assert_uint_eq(ps_version(p), 1);
	/* a gradient read before that round is one version stale */
	ck_assert_int_eq(ps_push(p, &a, 1, &r), 0);
	ck_assert_uint_eq(r.tau, 1);
	ck_assert(r.applied);
	ps_free(p);
	backend_free(be);
}
END_TEST

START_TEST(dcasgd_constant_lambda)
{
	backend *be = cpu();
	float w0[] = {1, 1, 1}, g0[] = {0.5f, 0.5f, 0.5f}, g1[] = {1, 1, 1};
	rule_params rp = {.lambda = 0.04};
	ps *p = mk(be, w0, "dcasgd", &rp, 0.1f, 0);
	float local[3];
	uint64_t h0 = 99, h1 = 99;
	ps_pull(p, 0, local, &h0); /* backup_0 = 1 */
	ps_pull(p, 1, local, &h1);
	ps_result r;
	ps_grad b = {.worker = 1, .v_read = 0, .g = g1};
	ck_assert_int_eq(ps_push(p, &b, 1, &r), 0); /* w - backup_1 = 0: plain step, w = 0.9 */
	ck_assert_float_eq_tol(W(p, 0), 0.9f, 1e-7);
	ps_grad a = {.worker = 0, .v_read = 0, .g = g0};
	ck_assert_int_eq(ps_push(p, &a, 1, &r), 0);
	/* g' = 0.5 + 0.04 * 0.25 * (0.9 - 1) = 0.499; w = 0.9 - 0.0499 */
	ck_assert_float_eq_tol(W(p, 0), 0.9f - 0.0499f, 1e-6);
	ck_assert_uint_eq(r.tau, 1);
	ps_free(p);
	backend_free(be);
}
END_TEST

START_TEST(dcasgd_compensates_from_the_weights_read)
{
	/* a stale read (version delay) hands worker 0 the weights of an older
	 * version; DC-ASGD's compensation must use those, not the current */
	backend *be = cpu();
	float w0[] = {1, 1, 1}, old[] = {1.5f, 1.5f, 1.5f}, g[] = {0.5f, 0.5f, 0.5f};
	rule_params rp = {.lambda = 0.04};
	ps *p = mk(be, w0, "dcasgd", &rp, 0.1f, 0);
	float local[3];
	uint64_t have = 99;
	ps_pull_old(p, 0, old, 7, local, &have);
	ck_assert_uint_eq(have, 7);
	ck_assert_float_eq(local[0], 1.5f);
	ck_assert_float_eq(ps_backup(p, 0)[2], 1.5f);
	ps_result r;
	ps_grad a = {.worker = 0, .v_read = 0, .g = g};
	ck_assert_int_eq(ps_push(p, &a, 1, &r), 0);
	/* g' = 0.5 + 0.04 * 0.25 * (1 - 1.5) = 0.495; w = 1 - 0.0495 */
	ck_assert_float_eq_tol(W(p, 0), 1.0f - 0.0495f, 1e-7);
	/* a gradient that carries its own weights (held at the server while
	 * its worker pulled again) is compensated from those: here the
	 * worker's backup is the current w, the carried one 0.5 */
	float w1 = W(p, 0), carried[] = {0.5f, 0.5f, 0.5f};
	ps_pull(p, 0, local, &have);
	ps_grad c = {.worker = 0, .v_read = 1, .g = g, .bak = carried};
	ck_assert_int_eq(ps_push(p, &c, 1, &r), 0);
	double gp = 0.5 + 0.04 * 0.25 * (w1 - 0.5);
	ck_assert_float_eq_tol(W(p, 0), (float)(w1 - 0.1 * gp), 1e-7);
	ps_free(p);
	backend_free(be);
}
END_TEST

START_TEST(dcasgd_adaptive_lambda)
{
	backend *be = cpu();
	float w0[] = {1, 1, 1}, g[] = {0.5f, 0.5f, 0.5f}, g1[] = {1, 1, 1};
	rule_params rp = {.lambda = 2, .m = 0.5, .adaptive = 1};
	ps *p = mk(be, w0, "dcasgd", &rp, 0.1f, 0);
	float local[3];
	uint64_t h0 = 99, h1 = 99;
	ps_pull(p, 0, local, &h0);
	ps_pull(p, 1, local, &h1);
	ps_result r;
	ps_grad b = {.worker = 1, .g = g1};
	ck_assert_int_eq(ps_push(p, &b, 1, &r), 0); /* w = 0.9 (no drift yet for worker 1) */
	ps_grad a = {.worker = 0, .g = g};
	ck_assert_int_eq(ps_push(p, &a, 1, &r), 0);
	/* ms = 0.5 * 0 + 0.5 * 0.25 = 0.125; lam = 2 / sqrt(0.125 + 1e-7);
	 * g' = 0.5 + lam * 0.25 * (0.9 - 1) */
	double lam = 2.0 / sqrt(0.125 + 1e-7);
	double gp = 0.5 + lam * 0.25 * (0.9 - 1.0);
	ck_assert_float_eq_tol(W(p, 0), (float)(0.9 - 0.1 * gp), 1e-6);
	ps_free(p);
	backend_free(be);
}
END_TEST

START_TEST(momentum_at_server)
{
	backend *be = cpu();
	float w0[] = {0, 0, 0}, g[] = {1, 1, 1};
	ps *p = mk(be, w0, "asgd", NULL, 0.1f, 0.9f);
	ps_result r;
	ps_grad a = {.worker = 0, .g = g};
	ck_assert_int_eq(ps_push(p, &a, 1, &r), 0); /* m = 1, w = -0.1 */
	ck_assert_int_eq(ps_push(p, &a, 1, &r), 0); /* m = 1.9, w = -0.29 */
	ck_assert_float_eq_tol(W(p, 2), -0.29f, 1e-6);
	ps_free(p);
	backend_free(be);
}
END_TEST

START_TEST(elastic_and_average)
{
	backend *be = cpu();
	float w0[] = {0, 0, 0};
	ps *p = mk(be, w0, "easgd", NULL, 0.1f, 0);
	float x[] = {1, 2, 4};
	float d[3];
	/* d = 0.25 (x - centre); centre += d */
	ps_grad el = {.kind = PS_ELASTIC, .g = x, .alpha = 0.25f, .reply = d};
	ck_assert_int_eq(ps_push(p, &el, 1, NULL), 0);
	ck_assert_float_eq_tol(d[2], 1.0f, 1e-7);
	ck_assert_float_eq_tol(d[1], 0.5f, 1e-7);
	ck_assert_float_eq(x[2], 4.0f); /* the worker's own to change */
	ck_assert_float_eq_tol(W(p, 2), 1.0f, 1e-7);
	ck_assert_uint_eq(ps_version(p), 1);
	float y[] = {3, 3, 3}, z[] = {1, 1, 1};
	ps_grad my = {.kind = PS_MODEL, .g = y}, mz = {.kind = PS_MODEL, .worker = 1, .g = z};
	ps_result r;
	ck_assert_int_eq(ps_push(p, &my, 2, &r), 0);
	ck_assert_int_eq(r.applied, 0);
	ck_assert_int_eq(ps_push(p, &mz, 2, &r), 0);
	ck_assert_int_eq(r.applied, 1);
	/* malformed messages are refused */
	ps_grad bad = {.kind = PS_ELASTIC, .g = x, .alpha = 0.25f}; /* no reply */
	ck_assert_int_eq(ps_push(p, &bad, 1, NULL), -SL_EINVAL);
	ps_grad off = {.kind = PS_MODEL, .g = y, .off = 1};
	ck_assert_int_eq(ps_push(p, &off, 1, NULL), -SL_EINVAL);
	ps_grad who = {.g = y, .worker = 4};
	ck_assert_int_eq(ps_push(p, &who, 1, NULL), -SL_EINVAL);
	ck_assert_float_eq_tol(W(p, 0), 2.0f, 1e-7);
	ck_assert_uint_eq(ps_version(p), 2);
	ps_free(p);
	backend_free(be);
}
END_TEST

/* diloco's outer step, by hand in dyadic numbers (exact in float): two
 * rounds of two models, eta 0.5, mu 0.5. Round 1: mean (0.5, 2, 4), Delta
 * = W - mean = (0.5, 0, 0), b = Delta, W -= 0.5 (Delta + 0.5 b) = (0.625,
 * 2, 4). Round 2: mean (0.125, 2.5, 4), Delta (0.5, -0.5, 0), b = 0.5 b +
 * Delta = (0.75, -0.5, 0), W -= 0.5 (0.875, -0.75, 0) = (0.1875, 2.375, 4).
 * With mu 0 and eta 1 the round puts W at the mean, as localsgd. */
/* one round of two models (workers 0 and 1); then W must be want */
static void
diloco_round(ps *p, const float *a, const float *b, const float want[3])
{
	ps_grad ma = {.kind = PS_MODEL, .g = a}, mb = {.kind = PS_MODEL, .worker = 1, .g = b};
	ps_result r;
	float w0 = W(p, 0);
	ck_assert_int_eq(ps_push(p, &ma, 2, &r), 0);
	ck_assert_int_eq(r.applied, 0);
	ck_assert_float_eq(W(p, 0), w0); /* nothing until the round is in */
	ck_assert_int_eq(ps_push(p, &mb, 2, &r), 0);
	ck_assert_int_eq(r.applied, 1);
	for (int i = 0; i < 3; i++)
		ck_assert_float_eq(W(p, i), want[i]);
}

START_TEST(diloco_outer_nesterov)
{
	backend *be = cpu();
	float w0[] = {1, 2, 4};
	rule_params rp = {.H = 2, .outer_lr = 0.5, .outer_momentum = 0.5};
	ps *p = mk(be, w0, "diloco", &rp, 0.1f, 0);
	const float a1[] = {0.5f, 1.5f, 3}, b1[] = {0.5f, 2.5f, 5};
	const float a2[] = {0.125f, 2, 4}, b2[] = {0.125f, 3, 4};
	diloco_round(p, a1, b1, (const float[]){0.625f, 2, 4});
	ck_assert_uint_eq(ps_version(p), 1);
	diloco_round(p, a2, b2, (const float[]){0.1875f, 2.375f, 4});
	ps_free(p);
	/* mu 0, eta 1: the mean */
	rp = (rule_params){.H = 2, .outer_lr = 1, .outer_momentum = 0};
	p = mk(be, w0, "diloco", &rp, 0.1f, 0);
	diloco_round(p, a1, b1, (const float[]){0.5f, 2, 4});
	ps_free(p);
	backend_free(be);
}
END_TEST

/* async-diloco's arrivals by hand (dyadic: exact in float), eta 0.5,
 * mu 0.5. Naive (N = 1): each arrival is a Nesterov step, b = mu b + d,
 * W -= eta (d + mu b): from W (1, 2, 4), d1 (1, 0, 0): b (1, 0, 0), W
 * (0.25, 2, 4); d2 (0.5, 1, 0): b (1, 1, 0), W (-0.25, 1.25, 4). Poly
 * weighting: the arrival's weight 1/sqrt(1 + tau), tau = 3 gives 0.5.
 * Delayed Nesterov N = 2: arrival 1 W -= eta d1 / 2 = (0.75, 2, 4);
 * arrival 2 also takes b = (d1 + d2) / 2 = (0.75, 0.5, 0), W -= eta (d2 /
 * 2 + mu b) = (0.4375, 1.625, 4). */
START_TEST(async_diloco_arrivals)
{
	backend *be = cpu();
	float w0[] = {1, 2, 4};
	rule_params rp = {.outer_lr = 0.5, .outer_momentum = 0.5, .dn_period = 1};
	snprintf(rp.weighting, sizeof(rp.weighting), "none");
	float d1[] = {1, 0, 0}, d2[] = {0.5f, 1, 0};
	ps_grad a = {.g = d1}, b = {.worker = 1, .g = d2};
	ps_result r;
	for (int dn = 1; dn <= 2; dn++) {
		rp.dn_period = dn;
		ps *p = mk(be, w0, "async-diloco", &rp, 0.1f, 0);
		ck_assert_int_eq(ps_push(p, &a, 1, &r), 0);
		ck_assert_int_eq(r.applied, 1);
		ck_assert_uint_eq(ps_version(p), 1);
		ck_assert_float_eq(W(p, 0), dn == 1 ? 0.25f : 0.75f);
		ck_assert_int_eq(ps_push(p, &b, 1, &r), 0);
		const float want[2][3] = {{-0.25f, 1.25f, 4}, {0.4375f, 1.625f, 4}};
		for (int i = 0; i < 3; i++)
			ck_assert_float_eq(W(p, i), want[dn - 1][i]);
		ck_assert_uint_eq(ps_version(p), 2);
		ps_free(p);
	}
	/* poly: an arrival 3 versions stale counts half: b = 0.5 d1, W -= 0.5
	 * (0.5 d1 + 0.25 d1) */
	rp.dn_period = 1;
	snprintf(rp.weighting, sizeof(rp.weighting), "poly");
	ps *p = mk(be, w0, "async-diloco", &rp, 0.1f, 0);
	float g0[] = {0, 0, 0};
	ps_grad z = {.worker = 2, .g = g0};
	for (int k = 0; k < 3; k++)
		ck_assert_int_eq(ps_push(p, &z, 1, &r), 0);
	ck_assert_int_eq(ps_push(p, &a, 1, &r), 0); /* read at v 0, applied at 3 */
	ck_assert_uint_eq(r.tau, 3);
	ck_assert_float_eq(W(p, 0), 0.625f);
	ps_free(p);
	/* outer_opt momentum (heavy ball, torch's b = mu b + d, W -= eta b):
	 * d1: b (1, 0, 0), W (0.5, 2, 4); d2: W -= 0.5 (d2 + 0.5 (1, 0, 0)),
	 * W (0, 1.5, 4), b (1, 1, 0). outer_opt sgd (mu ignored): W -= 0.5 d
	 * each, (0.5, 2, 4) then (0.25, 1.5, 4) */
	snprintf(rp.weighting, sizeof(rp.weighting), "none");
	const char *kinds[] = {"momentum", "sgd"};
	const float want[2][3] = {{0, 1.5f, 4}, {0.25f, 1.5f, 4}};
	for (int k = 0; k < 2; k++) {
		snprintf(rp.outer_opt, sizeof(rp.outer_opt), "%s", kinds[k]);
		p = mk(be, w0, "async-diloco", &rp, 0.1f, 0);
		ck_assert_int_eq(ps_push(p, &a, 1, &r), 0);
		ck_assert_float_eq(W(p, 0), 0.5f);
		ck_assert_int_eq(ps_push(p, &b, 1, &r), 0);
		for (int i = 0; i < 3; i++)
			ck_assert_msg(W(p, i) == want[k][i], "%s: W[%d] %g, want %g", kinds[k],
				      i, W(p, i), want[k][i]);
		ps_free(p);
	}
	backend_free(be);
}
END_TEST

/* async-gated: async-diloco's arrival, unless it is more than s outer
 * versions stale, when it is dropped (the weights and the version stay).
 * s 1, eta 0.5, mu 0 (plain outer SGD): two zero arrivals take v to 2; d1
 * read at v 0 (tau 2) is dropped; d1 read at v 1 (tau 1) is applied, W
 * -= 0.5 d1 = (0.5, 2, 4), v 3. */
START_TEST(async_gated_drops_the_old)
{
	backend *be = cpu();
	float w0[] = {1, 2, 4}, d1[] = {1, 0, 0}, z[] = {0, 0, 0};
	rule_params rp = {.s = 1, .outer_lr = 0.5, .outer_momentum = 0, .dn_period = 1};
	snprintf(rp.weighting, sizeof(rp.weighting), "none");
	ps *p = mk(be, w0, "async-gated", &rp, 0.1f, 0);
	ps_result r;
	ps_grad zero = {.worker = 2, .g = z};
	for (int k = 0; k < 2; k++) {
		zero.v_read = (uint64_t)k;
		ck_assert_int_eq(ps_push(p, &zero, 1, &r), 0);
		ck_assert_int_eq(r.applied, 1);
	}
	ps_grad old = {.g = d1, .v_read = 0}, fresh = {.worker = 1, .g = d1, .v_read = 1};
	ck_assert_int_eq(ps_push(p, &old, 1, &r), 0);
	ck_assert_uint_eq(r.tau, 2);
	ck_assert_int_eq(r.applied, 0);
	ck_assert_uint_eq(ps_version(p), 2);
	ck_assert(W(p, 0) == 1 && W(p, 1) == 2 && W(p, 2) == 4);
	ck_assert_int_eq(ps_push(p, &fresh, 1, &r), 0);
	ck_assert_uint_eq(r.tau, 1);
	ck_assert_int_eq(r.applied, 1);
	ck_assert_uint_eq(ps_version(p), 3);
	ck_assert(W(p, 0) == 0.5f && W(p, 1) == 2 && W(p, 2) == 4);
	ps_free(p);
	backend_free(be);
}
END_TEST

/* ---- sparta: its worker hooks driven by hand, two workers, no run ---- */

static int
sp_running(const rule_run *e)
{
	(void)e;
	return 2;
}

static int
sp_check(rule_run *e, rule_worker *w)
{
	(void)e;
	(void)w;
	return 0;
}

static void
sp_changed(rule_run *e)
{
	(void)e;
}

static int
sp_push_failed(rule_run *e, int wid, const char *what, int rc)
{
	(void)e;
	ck_abort_msg("worker %d could not push %s: %d", wid, what, rc);
	return rc;
}

static int
sp_fail(rule_run *e, int code, const char *why)
{
	(void)e;
	ck_abort_msg("%s", why);
	return code;
}

static const rule_ops sp_ops = {.n_running = sp_running, .check_model = sp_check,
				.version_changed = sp_changed, .push_failed = sp_push_failed,
				.fail = sp_fail};

/* two workers on 6 weights, one layer, sgd at lr 0.5, each with its own
 * gradient every step */
typedef struct sp_case {
	backend *be;
	ps *p;
	rule_params rp;
	rule_run e;
	model m[2];
	rule_worker w[2];
	float x[2][6], g[2][6];
} sp_case;

static sp_case *
sp_new(double frac)
{
	static const float w0[6] = {1, 2, 3, 4, 5, 6};
	static const float g[2][6] = {{2, 0, 4, -2, 2, 6}, {-2, 4, 0, 2, -6, 2}};
	sp_case *c = calloc(1, sizeof(*c));
	ck_assert_ptr_nonnull(c);
	c->be = cpu();
	ps_layer layer = {.off = 0, .len = 6, .wlen = 6};
	ck_assert_int_eq(ps_new(c->be, 6, w0, &layer, 1, 4, &c->p), 0);
	c->rp.sparta_p = frac;
	ps_set_rule(c->p, rule_find("sparta"), &c->rp);
	ps_set_opt(c->p, 0.5f, 0, 0);
	c->e = (rule_run){.ps = c->p, .rp = &c->rp, .ops = &sp_ops, .seed = 2};
	memcpy(c->g, g, sizeof(g));
	for (int k = 0; k < 2; k++) {
		c->m[k].params = c->x[k];
		c->m[k].grads = c->g[k];
		c->w[k] = (rule_worker){.id = k, .m = &c->m[k], .be = c->be, .have = UINT64_MAX,
					.last_round = -1};
	}
	return c;
}

static void
sp_free(sp_case *c)
{
	ps_free(c->p);
	backend_free(c->be);
	free(c);
}

/* both workers pull (the last round's mean at its mask), step and send */
static void
sp_step(sp_case *c)
{
	for (int k = 0; k < 2; k++)
		rule_sparta.pull(&c->e, &c->w[k]);
	for (int k = 0; k < 2; k++) {
		ck_assert_uint_eq(rule_sparta.deliver(&c->e, &c->w[k]), 0);
		ck_assert_int_eq(c->w[k].waiting, 1);
	}
}

static void
sp_take(sp_case *c)
{
	for (int k = 0; k < 2; k++)
		rule_sparta.pull(&c->e, &c->w[k]);
}

#define SP_EQ(have, ...)                                                     \
	do {                                                                 \
		const float want_[6] = {__VA_ARGS__};                        \
		for (int i_ = 0; i_ < 6; i_++)                               \
			ck_assert_msg((have)[i_] == want_[i_], "%s[%d] = %g, want %g", \
				      #have, i_, (double)(have)[i_], (double)want_[i_]); \
	} while (0)

/* sparta, pinned by hand: seed 2, p 0.5 masks (0, 1, 4) in round 0 and
 * (2, 4, 5) in round 1 (the mask is the seed's and the round's, the same
 * for everyone). W0 = (1..6), lr 0.5, g0 = (2, 0, 4, -2, 2, 6), g1 = (-2,
 * 4, 0, 2, -6, 2). Round 0: x0 = W0 - g0/2 = (0, 2, 1, 5, 4, 3), x1 = (2,
 * 0, 3, 3, 8, 5); W = their mean (1, 1, 2, 4, 6, 4); each takes W at
 * (0, 1, 4): x0 = (1, 1, 1, 5, 6, 3), x1 = (1, 1, 3, 3, 6, 5). Round 1:
 * x0 = (0, 1, -1, 6, 5, 0), x1 = (2, -1, 3, 2, 9, 4); W = (1, 0, 1, 4, 7,
 * 2); at (2, 4, 5): x0 = (0, 1, 1, 6, 7, 2), x1 = (2, -1, 1, 2, 7, 2). The
 * bytes: 4 |M| each way (12), the whole model (24) on the first pull. */
START_TEST(sparta_averages_the_masked)
{
	unsigned char m[6];
	ck_assert_uint_eq(rule_sparta_mask(2, 0, 0.5, 6, m), 3);
	ck_assert(m[0] && m[1] && !m[2] && !m[3] && m[4] && !m[5]);
	ck_assert_uint_eq(rule_sparta_mask(2, 1, 0.5, 6, m), 3);
	ck_assert(!m[0] && !m[1] && m[2] && !m[3] && m[4] && m[5]);
	sp_case *c = sp_new(0.5);
	double down, up;
	rule_sparta.pull(&c->e, &c->w[0]);
	rule_sparta.step_bytes(&c->e, &c->w[0], 1, &down, &up);
	ck_assert(down == 24 && up == 12);
	c->w[0].have = UINT64_MAX;
	sp_step(c);
	ck_assert_uint_eq(ps_version(c->p), 1);
	SP_EQ(ps_weights(c->p), 1, 1, 2, 4, 6, 4);
	SP_EQ(c->x[0], 0, 2, 1, 5, 4, 3);
	SP_EQ(c->x[1], 2, 0, 3, 3, 8, 5);
	sp_take(c);
	SP_EQ(c->x[0], 1, 1, 1, 5, 6, 3);
	SP_EQ(c->x[1], 1, 1, 3, 3, 6, 5);
	rule_sparta.step_bytes(&c->e, &c->w[1], 0, &down, &up);
	ck_assert(down == 12 && up == 12);
	for (int k = 0; k < 2; k++) {
		ck_assert_uint_eq(c->w[k].took, 3);
		ck_assert_uint_eq(c->w[k].v_read, 1);
		c->w[k].waiting = 0;
	}
	for (int k = 0; k < 2; k++)
		ck_assert_uint_eq(rule_sparta.deliver(&c->e, &c->w[k]), 0);
	ck_assert_uint_eq(ps_version(c->p), 2);
	SP_EQ(ps_weights(c->p), 1, 0, 1, 4, 7, 2);
	sp_take(c);
	SP_EQ(c->x[0], 0, 1, 1, 6, 7, 2);
	SP_EQ(c->x[1], 2, -1, 1, 2, 7, 2);
	/* a worker that missed a round (paused) takes the whole mean */
	c->w[1].have = 0;
	rule_sparta.pull(&c->e, &c->w[1]);
	ck_assert_uint_eq(c->w[1].took, 6);
	SP_EQ(c->x[1], 1, 0, 1, 4, 7, 2);
	sp_free(c);
}
END_TEST

/* p 0: no coordinate moves at a round, each worker trains alone (its
 * weights W0 - k g/2 after k steps), the server holds their mean; p 1:
 * every worker takes the whole mean (localsgd's H 1) */
START_TEST(sparta_p0_alone_p1_everything)
{
	sp_case *c = sp_new(0);
	for (int k = 1; k <= 3; k++) {
		sp_step(c);
		sp_take(c);
		for (int i = 0; i < 6; i++) {
			ck_assert(c->x[0][i] == (float)(i + 1) - (float)k * c->g[0][i] / 2);
			ck_assert(c->x[1][i] == (float)(i + 1) - (float)k * c->g[1][i] / 2);
			ck_assert(ps_weights(c->p)[i] == (c->x[0][i] + c->x[1][i]) / 2);
		}
		ck_assert_uint_eq(c->w[0].took + c->w[1].took, 0);
		ck_assert_uint_eq(ps_version(c->p), (uint64_t)k);
	}
	double down, up;
	rule_sparta.step_bytes(&c->e, &c->w[0], 0, &down, &up);
	ck_assert(down == 0 && up == 0);
	sp_free(c);
	c = sp_new(1);
	for (int k = 1; k <= 3; k++) {
		sp_step(c);
		sp_take(c);
		ck_assert_mem_eq(c->x[0], ps_weights(c->p), sizeof(c->x[0]));
		ck_assert_mem_eq(c->x[1], ps_weights(c->p), sizeof(c->x[1]));
		ck_assert_uint_eq(c->w[0].took, 6);
	}
	/* SGD on the gradients' mean (0, 2, 2, 0, -2, 4): W0 - 3/2 of it */
	SP_EQ(ps_weights(c->p), 1, -1, 0, 4, 8, 0);
	sp_free(c);
}
END_TEST

/* the mask: the seed's and the round's, p of the coordinates */
START_TEST(sparta_mask_is_shared_and_p_sized)
{
	size_t n = 1000000;
	unsigned char *a = malloc(n), *b = malloc(n);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	size_t k = rule_sparta_mask(7, 12, 0.005, n, a);
	/* Binomial(1e6, 0.005): mean 5000, sd 70.5 */
	ck_assert_msg(k > 4650 && k < 5350, "|M| %zu", k);
	ck_assert_uint_eq(rule_sparta_mask(7, 12, 0.005, n, b), k);
	ck_assert_mem_eq(a, b, n);
	ck_assert_uint_eq(rule_sparta_mask(7, 12, 0.005, n, NULL), k);
	rule_sparta_mask(7, 13, 0.005, n, b);
	ck_assert(memcmp(a, b, n) != 0);
	rule_sparta_mask(8, 12, 0.005, n, b);
	ck_assert(memcmp(a, b, n) != 0);
	ck_assert_uint_eq(rule_sparta_mask(7, 12, 0, n, NULL), 0);
	ck_assert_uint_eq(rule_sparta_mask(7, 12, 1, n, NULL), n);
	free(a);
	free(b);
}
END_TEST

START_TEST(pinned_reads_copy_on_write)
{
	backend *be = cpu();
	float w0[] = {1, 2, 3}, g[] = {1, 1, 1};
	ps *p = mk(be, w0, "asgd", NULL, 0.5f, 0);
	uint64_t v;
	/* a read in place: the server's own buffer, no copy */
	const float *a = ps_pin(p, 0, &v);
	ck_assert_ptr_eq(a, ps_weights(p));
	ck_assert_uint_eq(v, 0);
	/* a second reader of the same version shares it */
	const float *b = ps_pin(p, 1, &v);
	ck_assert_ptr_eq(a, b);
	/* a write while pinned goes to a copy: the readers' buffer stays */
	ps_grad pg = {.worker = 2, .g = g};
	ck_assert_int_eq(ps_push(p, &pg, 1, NULL), 0);
	ck_assert_ptr_ne(ps_weights(p), a);
	ck_assert_float_eq(a[0], 1.0f);
	ck_assert_float_eq(W(p, 0), 0.5f);
	ck_assert_float_eq(W(p, 2), 2.5f);
	/* unpinned: nothing moves while nobody reads */
	const float *cur = ps_weights(p);
	ck_assert_int_eq(ps_push(p, &pg, 1, NULL), 0);
	ck_assert_ptr_eq(ps_weights(p), cur);
	ck_assert_float_eq(W(p, 0), 0.0f);
	ps_unpin(p, a);
	ck_assert_float_eq(b[1], 2.0f); /* still read by worker 1 */
	ps_unpin(p, b);
	/* the retired buffer is reused for the next copy on write */
	const float *c = ps_pin(p, 0, &v);
	ck_assert_uint_eq(v, 2);
	ck_assert_int_eq(ps_push(p, &pg, 1, NULL), 0);
	ck_assert_ptr_eq(ps_weights(p), a);
	ck_assert_float_eq(c[0], 0.0f);
	ck_assert_float_eq(W(p, 0), -0.5f);
	ps_unpin(p, c);
	ck_assert(!ps_failed(p));
	ps_free(p);
	backend_free(be);
}
END_TEST

/* a device whose memory is not the host's: the reference backend's ops,
 * with its uploads and downloads counted */
typedef struct counted {
	backend dev;
	backend_ops ops;
	backend *host;
} counted;

static int n_up, n_down;

static void
up(backend *be, void *dst, const void *src, size_t bytes)
{
	n_up++;
	counted *c = (counted *)be;
	c->host->ops->upload(c->host, dst, src, bytes);
}

static void
down(backend *be, void *dst, const void *src, size_t bytes)
{
	n_down++;
	counted *c = (counted *)be;
	c->host->ops->download(c->host, dst, src, bytes);
}

START_TEST(host_payloads_are_staged)
{
	/* the same messages to a host-memory server and to a device server:
	 * the same weights; the device server uploads each host payload (and
	 * downloads an elastic reply) once, an in-place payload never */
	char err[SL_ERR_LEN];
	counted *c = calloc(1, sizeof(*c));
	ck_assert_int_eq(backend_open("ref", 1, &c->host, err), 0);
	c->ops = *c->host->ops;
	c->ops.host_memory = 0;
	c->ops.upload = up;
	c->ops.download = down;
	c->dev.ops = &c->ops;
	c->dev.ctx = c->host->ctx;
	float w0[] = {1, 2, 3}, g[] = {0.5f, -1, 2}, x[] = {3, 3, 3};
	ps *h = mk(c->host, w0, "asgd", NULL, 0.1f, 0);
	n_up = n_down = 0;
	ps *d = mk(&c->dev, w0, "asgd", NULL, 0.1f, 0);
	ck_assert_int_eq(n_up, 1); /* the initial weights */
	ps_grad m = {.worker = 1, .g = g, .off = 1, .host = 1};
	ck_assert_int_eq(ps_push(h, &m, 1, NULL), 0);
	ck_assert_int_eq(ps_push(d, &m, 1, NULL), 0);
	ck_assert_int_eq(n_up, 2);
	float dh[3], dd[3];
	ps_grad e = {.kind = PS_ELASTIC, .g = x, .alpha = 0.5f, .host = 1};
	e.reply = dh;
	ck_assert_int_eq(ps_push(h, &e, 1, NULL), 0);
	e.reply = dd;
	ck_assert_int_eq(ps_push(d, &e, 1, NULL), 0);
	ck_assert_int_eq(n_up, 3);
	ck_assert_int_eq(n_down, 1);
	for (int i = 0; i < 3; i++) {
		ck_assert_float_eq(ps_weights(h)[i], ps_weights(d)[i]);
		ck_assert_float_eq(dh[i], dd[i]);
	}
	/* 1, 2 - 0.1 * -1 = 2.1, 3 - 0.2 = 2.8; then halfway to 3 */
	ck_assert_float_eq_tol(ps_weights(d)[1], 2.55f, 1e-6);
	/* a payload already in the server's memory is read in place */
	ps_grad in = {.worker = 1, .g = ps_scratch(d)};
	memset(ps_scratch(d), 0, sizeof(float) * 3);
	ck_assert_int_eq(ps_push(d, &in, 1, NULL), 0);
	ck_assert_int_eq(n_up, 3);
	ps_free(h);
	ps_free(d);
	backend_free(c->host);
	free(c);
}
END_TEST

START_TEST(rule_table_lookup)
{
	ck_assert_int_eq(rule_count(), 16);
	for (int i = 0; rule_table[i]; i++) {
		ck_assert_ptr_eq(rule_find(rule_table[i]->name), rule_table[i]);
		ck_assert_int_eq(rule_index(rule_table[i]), i);
	}
	ck_assert_ptr_null(rule_find("adam"));
	ck_assert(rule_find("ssgd")->flags & RULE_ROUND);
	ck_assert(!(rule_find("asgd")->flags & RULE_ROUND));
	char buf[256];
	ck_assert_str_eq(rule_names(buf, sizeof(buf)),
			 "ssgd, asgd, softsync, ssp, sasgd, dcasgd, odsgd, localsgd, easgd, hogwild, diloco, async-diloco, async-gated, "
			 "streaming-diloco, sparta, demo");
}
END_TEST

START_TEST(lent_team_applies_the_same_bits)
{
	/* ps_lend: a worker's 3-thread team applies the update (asgd with
	 * momentum, and ssgd's averaged round) with the same bits as the
	 * server's one thread, on a model big enough to be split */
	enum { N = 200003 };
	backend *be = cpu(), *team;
	ck_assert_int_eq(backend_cpu_new(3, &team), 0);
	float *w0 = malloc(sizeof(float) * N), *g = malloc(sizeof(float) * N);
	ck_assert(w0 && g);
	for (int i = 0; i < N; i++) {
		w0[i] = (float)((i * 37) % 101) / 7.0f;
		g[i] = (float)((i * 11) % 17) / 3.0f - 2.5f;
	}
	const char *rules[] = {"asgd", "ssgd"};
	for (int k = 0; k < 2; k++) {
		ps_layer layers[] = {{.off = 0, .len = 1000, .wlen = 1000},
				     {.off = 1000, .len = N - 1000, .wlen = N - 1000}};
		ps *a, *b;
		ck_assert_int_eq(ps_new(be, N, w0, layers, 2, 4, &a), 0);
		ck_assert_int_eq(ps_new(be, N, w0, layers, 2, 4, &b), 0);
		rule_params def = {0};
		ps_set_rule(a, rule_find(rules[k]), &def);
		ps_set_rule(b, rule_find(rules[k]), &def);
		ps_set_opt(a, 0.01f, 0.9f, 0);
		ps_set_opt(b, 0.01f, 0.9f, 0);
		for (int s = 0; s < 4; s++) {
			ps_grad pg = {.worker = s % 2, .v_read = ps_version(a), .g = g, .batch = 1};
			ck_assert_int_eq(ps_push(a, &pg, 2, NULL), 0);
			ps_lend(b, team);
			ck_assert_int_eq(ps_push(b, &pg, 2, NULL), 0);
			ps_lend(b, NULL);
		}
		ck_assert_uint_eq(ps_version(a), k ? 2 : 4);
		ck_assert_uint_eq(ps_version(b), ps_version(a));
		ck_assert_msg(memcmp(ps_weights(a), ps_weights(b), sizeof(float) * N) == 0,
			      "%s: the lent team's update differs", rules[k]);
		ck_assert(ps_weights(a)[N - 1] != w0[N - 1]);
		ps_free(a);
		ps_free(b);
	}
	free(w0);
	free(g);
	backend_free(team);
	backend_free(be);
}
END_TEST

/* streaming-diloco's fragments: the units in the strided pattern (unit u
 * in fragment u mod P), as ranges of the flat buffer, adjacent layers
 * merged; a residual block (units spanning several layers) stays whole */
START_TEST(streaming_fragments_are_strided)
{
	backend *be = cpu();
	/* five layers of 3, 1, 2, 4, 1 floats */
	ps_layer layers[] = {{.off = 0, .len = 3, .wlen = 3}, {.off = 3, .len = 1, .wlen = 1},
			     {.off = 4, .len = 2, .wlen = 2}, {.off = 6, .len = 4, .wlen = 4},
			     {.off = 10, .len = 1, .wlen = 1}};
	float w0[11] = {0};
	ps *p;
	ck_assert_int_eq(ps_new(be, 11, w0, layers, 5, 2, &p), 0);
	ps_range r[5];
	size_t f;
	ck_assert_int_eq(ps_units(p), 5); /* every layer a unit of its own */
	/* P = 2: layers 0, 2, 4 and 1, 3 */
	ck_assert_int_eq(ps_fragment_ranges(p, 0, 2, r, &f), 3);
	ck_assert_uint_eq(f, 6);
	ck_assert(r[0].off == 0 && r[0].len == 3 && r[1].off == 4 && r[1].len == 2 &&
		  r[2].off == 10 && r[2].len == 1);
	ck_assert_int_eq(ps_fragment_ranges(p, 1, 2, r, &f), 2);
	ck_assert_uint_eq(f, 5);
	ck_assert(r[0].off == 3 && r[0].len == 1 && r[1].off == 6 && r[1].len == 4);
	/* P = 3: layers 0, 3 / 1, 4 / 2 */
	ck_assert_int_eq(ps_fragment_ranges(p, 0, 3, r, &f), 2);
	ck_assert(r[0].off == 0 && r[1].off == 6 && f == 7);
	ck_assert_int_eq(ps_fragment_ranges(p, 1, 3, r, &f), 2);
	ck_assert(r[0].off == 3 && r[1].off == 10 && f == 2);
	ck_assert_int_eq(ps_fragment_ranges(p, 2, 3, r, &f), 1);
	ck_assert(r[0].off == 4 && r[0].len == 2);
	/* P = 1: the whole buffer, one range */
	ck_assert_int_eq(ps_fragment_ranges(p, 0, 1, r, &f), 1);
	ck_assert(r[0].off == 0 && r[0].len == 11 && f == 11);
	/* a block of layers 1-2 and one of 3-4: three units */
	int units[] = {0, 1, 1, 2, 2};
	ps_set_units(p, units);
	ck_assert_int_eq(ps_units(p), 3);
	ck_assert_int_eq(ps_fragment_ranges(p, 0, 2, r, &f), 2); /* units 0, 2 */
	ck_assert(r[0].off == 0 && r[0].len == 3 && r[1].off == 6 && r[1].len == 5);
	ck_assert_int_eq(ps_fragment_ranges(p, 1, 2, r, &f), 1); /* unit 1 */
	ck_assert(r[0].off == 3 && r[0].len == 3 && f == 3);
	/* a fragment out of range is refused */
	ps_grad g = {.kind = PS_GRADIENT, .g = w0, .part = 2};
	rule_params rp = {.fragments = 2, .outer_lr = 1, .H = 4};
	snprintf(rp.outer_opt, sizeof(rp.outer_opt), "sgd");
	ps_set_rule(p, rule_find("streaming-diloco"), &rp);
	ps_result res;
	ck_assert_int_eq(ps_push(p, &g, 1, &res), -SL_EINVAL);
	ps_free(p);
	backend_free(be);
}
END_TEST

/* the run as streaming-diloco's worker hooks see it, for the hand-worked
 * case below: two running workers, nothing compressed, each push's bytes
 * its floats' */
static int sd_versions;

static int
sd_n_running(const rule_run *e)
{
	(void)e;
	return 2;
}

static int
sd_check_model(rule_run *e, rule_worker *w)
{
	(void)e;
	(void)w;
	return 0;
}

static int
sd_compress_range(rule_run *e, rule_worker *w, float *buf, size_t off, size_t len,
		  const float *anchor)
{
	(void)e, (void)w, (void)buf, (void)off, (void)len, (void)anchor;
	return 0;
}

static double
sd_push_bytes(const rule_run *e, size_t n)
{
	(void)e;
	return 4.0 * (double)n;
}

static void
sd_version_changed(rule_run *e)
{
	(void)e;
	sd_versions++;
}

static int
sd_fail(rule_run *e, int code, const char *why)
{
	(void)e;
	ck_abort_msg("the run failed: %s", why);
	return code;
}

static int
sd_push_failed(rule_run *e, int wid, const char *what, int rc)
{
	(void)e;
	ck_abort_msg("worker %d: %s refused", wid, what);
	return rc;
}

/* one step of worker w with the constant gradient gv: the begin (may it,
 * and the pull), then the delivery; returns the staleness recorded */
static uint64_t
sd_step(rule_run *e, rule_worker *w, float gv)
{
	ck_assert_msg(!(w->waiting && ps_version(e->ps) <= w->wait_v),
		      "worker %d waits for a round nobody completes", w->id);
	rule_streaming_diloco.pull(e, w);
	for (size_t i = 0; i < ps_size(e->ps); i++)
		w->m->grads[i] = gv;
	return rule_streaming_diloco.deliver(e, w);
}

#define SD_EQ(x, a, b) (x[0] == (a) && x[1] == (a) && x[2] == (a) && x[3] == (b) && x[4] == (b))

/* streaming-diloco on a case worked by hand, numbers exact in float:
 * five floats, fragment 0 = layer 0 (floats 0-2), fragment 1 = layer 1
 * (floats 3-4); P 2, H 4: fragment 0 syncs after local step 2 (and 6,
 * 10, ...), fragment 1 after step 4 (8, ...); tau 1, mix 0.5; inner plain
 * SGD at lr 0.5; outer sgd at outer_lr 0.5, so W_p <- W_p - 0.5 (W_p -
 * mean); W starts at 0. Worker 0's gradient is 1 everywhere, worker 1's
 * 3: a step moves them by -0.5 and -1.5. */
START_TEST(streaming_diloco_by_hand)
{
	backend *be = cpu();
	ps_layer layers[] = {{.off = 0, .len = 3, .wlen = 3}, {.off = 3, .len = 2, .wlen = 2}};
	float w0[5] = {0};
	ps *p;
	ck_assert_int_eq(ps_new(be, 5, w0, layers, 2, 2, &p), 0);
	rule_params rp = {.H = 4, .fragments = 2, .overlap = 1, .mix = 0.5, .outer_lr = 0.5,
			  .outer_momentum = 0.9};
	snprintf(rp.outer_opt, sizeof(rp.outer_opt), "sgd");
	snprintf(rp.compress, sizeof(rp.compress), "none");
	ps_set_rule(p, &rule_streaming_diloco, &rp);
	ps_set_opt(p, 0.5f, 0, 0);
	rule_ops ops = {.n_running = sd_n_running, .check_model = sd_check_model,
			.compress_range = sd_compress_range, .push_bytes = sd_push_bytes,
			.version_changed = sd_version_changed, .fail = sd_fail,
			.push_failed = sd_push_failed};
	rule_run e = {.ps = p, .rp = &rp, .ops = &ops};
	model m[2];
	float par[2][5], gr[2][5];
	rule_worker w[2];
	for (int k = 0; k < 2; k++) {
		m[k] = (model){.params = par[k], .grads = gr[k], .be = be};
		w[k] = (rule_worker){.id = k, .m = &m[k], .be = be, .have = UINT64_MAX,
				     .batch_n = 1};
	}
	const float *W = ps_weights(p);
	sd_versions = 0;
	/* steps 1-2 (count 0 -> 2): fragment 0 syncs after the second; the
	 * staleness is the steps since the last sync point, 0 then 1 */
	for (int k = 0; k < 2; k++) {
		ck_assert(!rule_streaming_diloco.exchanges(&e, &w[k]));
		ck_assert_uint_eq(sd_step(&e, &w[k], k ? 3.0f : 1.0f), 0);
	}
	ck_assert(rule_streaming_diloco.exchanges(&e, &w[0]));
	ck_assert(rule_streaming_diloco.exchange_bytes(&e, &w[0]) == 12); /* fragment 0's */
	ck_assert_uint_eq(sd_step(&e, &w[0], 1), 1);
	ck_assert_uint_eq(ps_version(p), 0); /* worker 1's fragment still to come */
	ck_assert_int_eq(w[0].frag, 0);
	ck_assert_uint_eq(sd_step(&e, &w[1], 3), 1);
	/* the models -1 and -3 at fragment 0, mean -2, Delta = 0 - (-2) = 2,
	 * W_0 = 0 - 0.5 x 2 = -1; fragment 1 untouched */
	ck_assert_uint_eq(ps_version(p), 1);
	ck_assert_int_eq(sd_versions, 1);
	ck_assert(SD_EQ(W, -1.0f, 0.0f));
	/* step 3: computed on the local weights (tau 1): -1.5 and -4.5 */
	ck_assert_uint_eq(sd_step(&e, &w[0], 1), 0);
	ck_assert_uint_eq(sd_step(&e, &w[1], 3), 0);
	ck_assert(SD_EQ(par[0], -1.5f, -1.5f) && SD_EQ(par[1], -4.5f, -4.5f));
	ck_assert(w[0].waiting && w[1].waiting); /* the reply is due */
	/* step 4 begins with the reply: theta_0 = -1 + 0.5 (theta_0 + 1):
	 * -1.25 and -2.75, fragment 1 as it was; its step takes them to
	 * -1.75 / -2 and -4.25 / -6, and fragment 1 syncs: mean -4, W_1 =
	 * 0 - 0.5 x 4 = -2 */
	ck_assert(rule_streaming_diloco.exchange_bytes(&e, &w[0]) == 8); /* fragment 1's */
	ck_assert_uint_eq(sd_step(&e, &w[0], 1), 1);
	ck_assert_float_eq(w[0].wprev[0], -1.0f); /* the anchor: the global fragment */
	ck_assert(SD_EQ(par[0], -1.75f, -2.0f));
	ck_assert_uint_eq(sd_step(&e, &w[1], 3), 1);
	ck_assert(SD_EQ(par[1], -4.25f, -6.0f));
	ck_assert_uint_eq(ps_version(p), 2);
	ck_assert(SD_EQ(W, -1.0f, -2.0f));
	ck_assert_int_eq(w[1].frag, 1);
	/* step 5 (count 0 -> 1): local */
	ck_assert_uint_eq(sd_step(&e, &w[0], 1), 0);
	ck_assert_uint_eq(sd_step(&e, &w[1], 3), 0);
	ck_assert(SD_EQ(par[0], -2.25f, -2.5f) && SD_EQ(par[1], -5.75f, -7.5f));
	/* step 6 takes fragment 1 with mix 0.25 (the local weights' share):
	 * -2 + 0.25 (-2.5 + 2) = -2.125 and -2 + 0.25 (-7.5 + 2) = -3.375;
	 * the step: -2.75 / -2.625 and -7.25 / -4.875; fragment 0 syncs
	 * again: mean -5, W_0 = -1 - 0.5 (-1 + 5) = -3 */
	rp.mix = 0.25;
	ck_assert_uint_eq(sd_step(&e, &w[0], 1), 1);
	ck_assert_uint_eq(sd_step(&e, &w[1], 3), 1);
	ck_assert(SD_EQ(par[0], -2.75f, -2.625f) && SD_EQ(par[1], -7.25f, -4.875f));
	ck_assert_float_eq(w[1].wprev[3], -2.0f);
	ck_assert_uint_eq(ps_version(p), 3);
	ck_assert(SD_EQ(W, -3.0f, -2.0f));
	for (int k = 0; k < 2; k++) {
		be->ops->free(be, w[k].wprev);
		be->ops->free(be, w[k].tmp);
	}
	ps_free(p);
	backend_free(be);
}
END_TEST

static Suite *
ps_suite(void)
{
	Suite *s = suite_create("ps");
	TCase *tc = tcase_create("rules");
	tcase_add_test(tc, asgd_applies_on_arrival);
	tcase_add_test(tc, sasgd_divides_by_staleness);
	tcase_add_test(tc, ssgd_averages_a_round);
	tcase_add_test(tc, ssgd_partial_layers_average_over_senders);
	tcase_add_test(tc, softsync_and_flush);
	tcase_add_test(tc, dcasgd_constant_lambda);
	tcase_add_test(tc, dcasgd_adaptive_lambda);
	tcase_add_test(tc, dcasgd_compensates_from_the_weights_read);
	tcase_add_test(tc, momentum_at_server);
	tcase_add_test(tc, elastic_and_average);
	tcase_add_test(tc, rule_table_lookup);
	tcase_add_test(tc, diloco_outer_nesterov);
	tcase_add_test(tc, async_gated_drops_the_old);
	tcase_add_test(tc, async_diloco_arrivals);
	tcase_add_test(tc, streaming_fragments_are_strided);
	tcase_add_test(tc, streaming_diloco_by_hand);
	tcase_add_test(tc, sparta_averages_the_masked);
	tcase_add_test(tc, sparta_p0_alone_p1_everything);
	tcase_add_test(tc, sparta_mask_is_shared_and_p_sized);
	tcase_add_test(tc, pinned_reads_copy_on_write);
	tcase_add_test(tc, host_payloads_are_staged);
	tcase_add_test(tc, lent_team_applies_the_same_bits);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(ps_suite)
