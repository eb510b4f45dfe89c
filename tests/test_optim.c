/* test_optim.c - the server's optimisers (nesterov, adam, adamw), gradient
 * clipping and the learning-rate schedule, pinned on tiny cases computed by
 * hand, on the ref backend (and the cpu one: the same bits); a change of
 * optimiser mid-run and a checkpoint of the optimiser's state. */
#include <jansson.h>
#include <math.h>

#include "ps.h"
#include "rule.h"
#include "testutil.h"
#include "blob.h"
#include "tlv.h"

static backend *
open_be(const char *name)
{
	backend *be;
	char err[SL_ERR_LEN];
	ck_assert_int_eq(backend_open(name, 1, &be, err), 0);
	return be;
}

/* two layers: [0,2) a weight and a bias, [2,3) a weight */
static ps *
mk(backend *be, const float *w0, const char *rule, float lr, float mu, float wd,
   int kind)
{
	ps_layer layers[] = {{.off = 0, .len = 2, .wlen = 1}, {.off = 2, .len = 1, .wlen = 1}};
	ps *p;
	ck_assert_int_eq(ps_new(be, 3, w0, layers, 2, 4, &p), 0);
	rule_params rp = {0};
	ps_set_rule(p, rule_find(rule), &rp);
	ps_set_opt(p, lr, mu, wd);
	opt_cfg o = {.kind = kind, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
		     .sched = {.floor = 0.1, .gamma = 0.1}};
	ck_assert_int_eq(ps_set_optim(p, &o), 0);
	return p;
}

static void
push(ps *p, const float *g, int worker, int round)
{
	ps_result r;
	ps_grad pg = {.worker = worker, .v_read = ps_version(p), .g = g, .batch = 1};
	ck_assert_int_eq(ps_push(p, &pg, round, &r), 0);
}

#define W(p, i) (ps_weights(p)[i])

/* Nesterov, mu 0.9, lr 0.1, a constant gradient of 1:
 * m = 1, w = 1 - 0.1 (1 + 0.9) = 0.81; m = 1.9, w = 0.81 - 0.1 (1 + 1.71) = 0.539 */
START_TEST(nesterov_by_hand)
{
	backend *be = open_be("ref");
	float w0[] = {1, 1, 1}, g[] = {1, 1, 1};
	ps *p = mk(be, w0, "asgd", 0.1f, 0.9f, 0, OPT_NESTEROV);
	push(p, g, 0, 1);
	ck_assert_float_eq_tol(W(p, 0), 0.81f, 1e-6);
	push(p, g, 0, 1);
	ck_assert_float_eq_tol(W(p, 0), 0.539f, 1e-6);
	ck_assert_float_eq_tol(W(p, 2), 0.539f, 1e-6);
	ps_free(p);
	backend_free(be);
}
END_TEST

/* AdamW, lr 0.1, wd 0.1, a constant gradient: the bias-corrected moments
 * are g and g^2, so each step moves by lr sign(g) (eps aside), after the
 * weights (not the bias) shrink by 1 - lr wd = 0.99:
 *   w0 (weight) 1 -> 0.99 - 0.1 = 0.89 -> 0.89 x 0.99 - 0.1 = 0.7811
 *   w1 (bias)  -2 -> -1.9 -> -1.8 (no decay)
 *   w2 (weight) 0.5 -> 0.395 -> 0.29105 */
START_TEST(adamw_by_hand)
{
	backend *be = open_be("ref");
	float w0[] = {1, -2, 0.5f}, g[] = {0.5f, -1, 2};
	ps *p = mk(be, w0, "asgd", 0.1f, 0, 0.1f, OPT_ADAMW);
	push(p, g, 0, 1);
	ck_assert_float_eq_tol(W(p, 0), 0.89f, 1e-6);
	ck_assert_float_eq_tol(W(p, 1), -1.9f, 1e-6);
	ck_assert_float_eq_tol(W(p, 2), 0.395f, 1e-6);
	push(p, g, 0, 1);
	ck_assert_float_eq_tol(W(p, 0), 0.7811f, 1e-6);
	ck_assert_float_eq_tol(W(p, 1), -1.8f, 1e-6);
	ck_assert_float_eq_tol(W(p, 2), 0.29105f, 1e-6);
	ps_free(p);
	backend_free(be);
}
END_TEST

/* Adam as torch.optim.Adam documents it, in double, for two different
 * gradients: weight decay as L2 on every parameter, bias-corrected
 * moments, eps outside the square root. */
static void
adam_double(double *w, const double *g, double *m, double *v, int n, int t, double lr,
	    double wd)
{
	for (int i = 0; i < n; i++) {
		double gi = g[i] + wd * w[i];
		m[i] = 0.9 * m[i] + 0.1 * gi;
		v[i] = 0.999 * v[i] + 0.001 * gi * gi;
		double mh = m[i] / (1 - pow(0.9, t)), vh = v[i] / (1 - pow(0.999, t));
		w[i] -= lr * mh / (sqrt(vh) + 1e-8);
	}
}

START_TEST(adam_follows_the_documented_update)
{
	const char *bes[] = {"ref", "cpu"};
	for (int k = 0; k < 2; k++) {
		backend *be = open_be(bes[k]);
		float w0[] = {1, -2, 0.5f}, g1[] = {0.5f, -1, 2}, g2[] = {-0.25f, 3, 0.125f};
		ps *p = mk(be, w0, "asgd", 0.01f, 0, 0.05f, OPT_ADAM);
		double w[] = {1, -2, 0.5}, m[3] = {0}, v[3] = {0};
		double d1[] = {0.5, -1, 2}, d2[] = {-0.25, 3, 0.125};
		push(p, g1, 0, 1);
		adam_double(w, d1, m, v, 3, 1, 0.01, 0.05);
		/* the first step: lr sign(g + wd w) exactly, eps aside */
		ck_assert_float_eq_tol(W(p, 0), 0.99f, 1e-6);
		push(p, g2, 0, 1);
		adam_double(w, d2, m, v, 3, 2, 0.01, 0.05);
		for (int i = 0; i < 3; i++)
			ck_assert_msg(fabs(W(p, i) - w[i]) < 2e-6, "%s w[%d] %.9g, expected %.9g",
				      bes[k], i, W(p, i), w[i]);
		ps_free(p);
		backend_free(be);
	}
}
END_TEST

/* ref and cpu take the same bits for every optimiser */
START_TEST(ref_and_cpu_agree_bit_for_bit)
{
	for (int kind = OPT_SGD; kind < OPT_N; kind++) {
		float w0[] = {1, -2, 0.5f}, g1[] = {0.5f, -1, 2}, g2[] = {-0.25f, 3, 0.125f};
		backend *a = open_be("ref"), *b = open_be("cpu");
		float mu = kind == OPT_SGD ? 0 : 0.9f;
		ps *p = mk(a, w0, "asgd", 0.01f, mu, 0.05f, kind);
		ps *q = mk(b, w0, "asgd", 0.01f, mu, 0.05f, kind);
		for (int s = 0; s < 3; s++) {
			push(p, s % 2 ? g2 : g1, 0, 1);
			push(q, s % 2 ? g2 : g1, 0, 1);
		}
		ck_assert_mem_eq(ps_weights(p), ps_weights(q), sizeof(float) * 3);
		ps_free(p);
		ps_free(q);
		backend_free(a);
		backend_free(b);
	}
}
END_TEST

/* clipping: g = (3, 4, 0) has norm 5; clip 1 scales it by 1 / (5 + 1e-6);
 * a gradient inside the norm is untouched */
START_TEST(clip_scales_to_the_global_norm)
{
	backend *be = open_be("ref");
	float w0[] = {0, 0, 0}, g[] = {3, 4, 0}, small[] = {0.3f, 0.4f, 0};
	ps *p = mk(be, w0, "asgd", 1, 0, 0, OPT_SGD);
	opt_cfg o = *ps_optim(p);
	o.clip = 1;
	ck_assert_int_eq(ps_set_optim(p, &o), 0);
	push(p, g, 0, 1);
	ck_assert_float_eq_tol(W(p, 0), -0.6f, 1e-6);
	ck_assert_float_eq_tol(W(p, 1), -0.8f, 1e-6);
	push(p, small, 0, 1);
	ck_assert_float_eq_tol(W(p, 0), -0.9f, 1e-6);
	ck_assert_float_eq_tol(W(p, 1), -1.2f, 1e-6);
	ps_free(p);
	backend_free(be);
}
END_TEST

/* a round (ssgd) clips the average, then steps with the optimiser: two
 * gradients (6, 8, 0) and (0, 0, 0) average to (3, 4, 0), clipped to norm 1 */
START_TEST(a_round_clips_its_average)
{
	backend *be = open_be("ref");
	float w0[] = {0, 0, 0}, g[] = {6, 8, 0}, z[] = {0, 0, 0};
	ps *p = mk(be, w0, "ssgd", 1, 0, 0, OPT_SGD);
	opt_cfg o = *ps_optim(p);
	o.clip = 1;
	ck_assert_int_eq(ps_set_optim(p, &o), 0);
	push(p, g, 0, 2);
	ck_assert_uint_eq(ps_version(p), 0);
	push(p, z, 1, 2);
	ck_assert_uint_eq(ps_version(p), 1);
	ck_assert_float_eq_tol(W(p, 0), -0.6f, 1e-6);
	ck_assert_float_eq_tol(W(p, 1), -0.8f, 1e-6);
	ps_free(p);
	backend_free(be);
}
END_TEST

START_TEST(schedule_by_hand)
{
	lr_sched cos = {.kind = SCHED_COSINE, .warmup = 10, .decay_updates = 110, .floor = 0.1};
	ck_assert_double_eq_tol(lr_sched_factor(&cos, 0), 1.0 / 11, 1e-15);
	ck_assert_double_eq_tol(lr_sched_factor(&cos, 9), 10.0 / 11, 1e-15);
	ck_assert_double_eq_tol(lr_sched_factor(&cos, 10), 1, 1e-15);
	ck_assert_double_eq_tol(lr_sched_factor(&cos, 60), 0.55, 1e-15);
	ck_assert_double_eq_tol(lr_sched_factor(&cos, 110), 0.1, 1e-15);
	ck_assert_double_eq_tol(lr_sched_factor(&cos, 5000), 0.1, 1e-15);
	lr_sched lin = cos;
	lin.kind = SCHED_LINEAR;
	ck_assert_double_eq_tol(lr_sched_factor(&lin, 35), 0.775, 1e-15);
	ck_assert_double_eq_tol(lr_sched_factor(&lin, 60), 0.55, 1e-15);
	lr_sched st = {.kind = SCHED_STEP, .step_every = 20, .gamma = 0.5, .floor = 0.1};
	ck_assert_double_eq(lr_sched_factor(&st, 19), 1);
	ck_assert_double_eq(lr_sched_factor(&st, 20), 0.5);
	ck_assert_double_eq(lr_sched_factor(&st, 40), 0.25);
	ck_assert_double_eq(lr_sched_factor(&st, 100), 0.1);
	lr_sched none = {.kind = SCHED_CONSTANT};
	ck_assert_double_eq(lr_sched_factor(&none, 0), 1);
	lr_sched warm = {.kind = SCHED_CONSTANT, .warmup = 3};
	ck_assert_double_eq(lr_sched_factor(&warm, 1), 0.5);
	ck_assert_double_eq(lr_sched_factor(&warm, 3), 1);
}
END_TEST

/* the server steps at the scheduled lr of its version: warm-up 1, so
 * update 0 runs at lr/2 and update 1 at lr; ps_lr says the next one's */
START_TEST(server_steps_at_the_scheduled_lr)
{
	backend *be = open_be("ref");
	float w0[] = {0, 0, 0}, g[] = {1, 1, 1};
	ps *p = mk(be, w0, "asgd", 0.2f, 0, 0, OPT_SGD);
	opt_cfg o = *ps_optim(p);
	o.sched = (lr_sched){.kind = SCHED_CONSTANT, .warmup = 1};
	ck_assert_int_eq(ps_set_optim(p, &o), 0);
	ck_assert_float_eq(ps_lr(p), 0.1f);
	push(p, g, 0, 1);
	ck_assert_float_eq_tol(W(p, 0), -0.1f, 1e-7);
	ck_assert_float_eq(ps_lr(p), 0.2f);
	push(p, g, 0, 1);
	ck_assert_float_eq_tol(W(p, 0), -0.3f, 1e-7);
	/* a new lr (a PATCH) moves the whole curve */
	ps_set_opt(p, 0.4f, 0, 0);
	ck_assert_float_eq(ps_lr(p), 0.4f);
	ps_free(p);
	backend_free(be);
}
END_TEST

/* Switching within a family keeps the state (adam -> adamw: the moments
 * and the step count go on); across families it starts from zero, so the
 * next adam step is a fresh one: lr sign(g). */
START_TEST(a_change_of_family_zeroes_the_state)
{
	backend *be = open_be("ref");
	float w0[] = {0, 0, 0}, g1[] = {1, 1, 1}, g2[] = {-1, -1, -1};
	for (int across = 0; across < 2; across++) {
		ps *p = mk(be, w0, "asgd", 0.1f, 0, 0, OPT_ADAM);
		push(p, g1, 0, 1);
		ck_assert_float_eq_tol(W(p, 0), -0.1f, 1e-6);
		opt_cfg o = *ps_optim(p);
		if (across) {
			o.kind = OPT_SGD;
			ck_assert_int_eq(ps_set_optim(p, &o), 0);
		}
		o.kind = OPT_ADAMW; /* wd 0: adam's arithmetic */
		ck_assert_int_eq(ps_set_optim(p, &o), 0);
		push(p, g2, 0, 1);
		if (across) {
			/* fresh: m = -0.1, v = 0.001, t = 1: a step of +0.1 */
			ck_assert_float_eq_tol(W(p, 0), 0.0f, 1e-6);
		} else {
			/* kept: m = 0.09 - 0.1 = -0.01, mh = -0.01 / 0.19;
			 * v = 0.000999 + 0.001, vh = 0.001999 / 0.001999 = 1 */
			double mh = -0.01 / 0.19;
			ck_assert_float_eq_tol(W(p, 0), (float)(-0.1 - 0.1 * mh), 1e-6);
		}
		ps_free(p);
	}
	backend_free(be);
}
END_TEST

/* a checkpoint keeps the moments and the step counts: a restored server
 * takes the next step to the same bits */
START_TEST(checkpoint_keeps_the_moments)
{
	backend *be = open_be("ref");
	float w0[] = {1, -2, 0.5f}, g1[] = {0.5f, -1, 2}, g2[] = {-0.25f, 3, 0.125f};
	ps *p = mk(be, w0, "asgd", 0.01f, 0, 0.05f, OPT_ADAMW);
	push(p, g1, 0, 1);
	push(p, g2, 0, 1);
	blob b = {0};
	tlv_w w;
	tlv_begin(&w, &b, 1, 1);
	tlv_open(&w, "server", TLV_SEC);
	ps_save(p, &w);
	tlv_close(&w);
	tlv_end(&w);
	ck_assert(!b.oom);
	tlv_sec root, s;
	uint32_t fmt;
	char err[SL_ERR_LEN];
	ck_assert_int_eq(tlv_read(b.p, b.n, 1, 0, &root, &fmt, err), 0);
	ck_assert_int_eq(tlv_get_sec(&root, "server", 1, TLV_SEC, &s, err), 1);
	float z[] = {0, 0, 0};
	ps *q = mk(be, z, "asgd", 0.01f, 0, 0.05f, OPT_ADAMW);
	ck_assert_int_eq(ps_restore(q, &s, 3, err), 0);
	push(p, g1, 0, 1);
	push(q, g1, 0, 1);
	ck_assert_mem_eq(ps_weights(p), ps_weights(q), sizeof(float) * 3);
	blob_free(&b);
	ps_free(p);
	ps_free(q);
	backend_free(be);
}
END_TEST

/* torch.optim on the same case (bench/peers/torch_optim.py wrote
 * tests/fixtures/optim/torch.json): five steps of fixed gradients, each
 * optimiser within 1e-6 of torch's float32 weights after every step */
START_TEST(matches_torch_optim)
{
	json_error_t je;
	json_t *doc = json_load_file("tests/fixtures/optim/torch.json", 0, &je);
	ck_assert_msg(doc != NULL, "tests/fixtures/optim/torch.json: %s", je.text);
	struct {
		const char *key;
		int kind;
		float lr, mu, wd, clip;
	} cases[] = {
		{"adamw", OPT_ADAMW, 0.01f, 0, 0.1f, 0},
		{"adam", OPT_ADAM, 0.01f, 0, 0.05f, 0},
		{"nesterov", OPT_NESTEROV, 0.01f, 0.9f, 0.05f, 0},
		{"clip", OPT_SGD, 0.1f, 0, 0, 1},
	};
	json_t *grads = json_object_get(doc, "grads");
	ck_assert_uint_eq(json_array_size(grads), 5);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		backend *be = open_be("ref");
		float w0[] = {1, -2, 0.5f};
		ps *p = mk(be, w0, "asgd", cases[c].lr, cases[c].mu, cases[c].wd, cases[c].kind);
		opt_cfg o = *ps_optim(p);
		o.clip = cases[c].clip;
		ck_assert_int_eq(ps_set_optim(p, &o), 0);
		json_t *want = json_object_get(doc, cases[c].key);
		ck_assert_uint_eq(json_array_size(want), 5);
		for (size_t t = 0; t < 5; t++) {
			float g[3];
			for (size_t i = 0; i < 3; i++)
				g[i] = (float)json_number_value(
					json_array_get(json_array_get(grads, t), i));
			push(p, g, 0, 1);
			for (size_t i = 0; i < 3; i++) {
				double x = json_number_value(
					json_array_get(json_array_get(want, t), i));
				ck_assert_msg(fabs(W(p, i) - x) < 1e-6,
					      "%s step %zu w[%zu]: %.9g, torch %.9g", cases[c].key,
					      t + 1, i, W(p, i), x);
			}
		}
		ps_free(p);
		backend_free(be);
	}
	json_decref(doc);
}
END_TEST

static Suite *
optim_suite(void)
{
	Suite *s = suite_create("optim");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, nesterov_by_hand);
	tcase_add_test(tc, adamw_by_hand);
	tcase_add_test(tc, adam_follows_the_documented_update);
	tcase_add_test(tc, ref_and_cpu_agree_bit_for_bit);
	tcase_add_test(tc, clip_scales_to_the_global_norm);
	tcase_add_test(tc, a_round_clips_its_average);
	tcase_add_test(tc, schedule_by_hand);
	tcase_add_test(tc, server_steps_at_the_scheduled_lr);
	tcase_add_test(tc, a_change_of_family_zeroes_the_state);
	tcase_add_test(tc, checkpoint_keeps_the_moments);
	tcase_add_test(tc, matches_torch_optim);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(optim_suite)
