/* test_ps_local.c - the server side of the rules whose workers keep
 * local weights and exchange part of them (sparta's masked coordinates,
 * streaming-diloco's fragments), each driven by hand through its worker
 * hooks and a stand-in for the run, on tiny cases computed by hand.
 * test_ps.c has the other rules' arithmetic. */
#include <stdlib.h>
#include <string.h>

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
ps_local_suite(void)
{
	Suite *s = suite_create("ps_local");
	TCase *tc = tcase_create("rules");
	tcase_add_test(tc, streaming_fragments_are_strided);
	tcase_add_test(tc, streaming_diloco_by_hand);
	tcase_add_test(tc, sparta_averages_the_masked);
	tcase_add_test(tc, sparta_p0_alone_p1_everything);
	tcase_add_test(tc, sparta_mask_is_shared_and_p_sized);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(ps_local_suite)
