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
	tcase_add_test(tc, pinned_reads_copy_on_write);
	tcase_add_test(tc, host_payloads_are_staged);
	tcase_add_test(tc, lent_team_applies_the_same_bits);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(ps_suite)
