/* test_parity_runs.c - whole runs on each backend against ref: one
 * training step per model gives ref's loss to 1e-4, and a short
 * virtual-clock run per rule the same staleness counts; a GPT's step (loss
 * and every gradient) and a short GPT run on each backend against ref's.
 * refdev must give ref's bits; cuda is skipped, saying why, where no GPU
 * answers. The ops one by one are in test_parity.c. */
#include <math.h>

#include "backend.h"
#include "model.h"
#include "parity_util.h"
#include "rule.h"
#include "run_util.h"

/* ---- whole runs ----------------------------------------------------------- */

/* n floats of backend memory against ref's: the normalised squared error
 * at most bound (the same bits on refdev) */
static void
near(backend *be, const float *x, backend *ref, const float *y, size_t n, double bound,
     const char *spec, const char *what)
{
	if (!n)
		return;
	float *a = get(be, x, n), *r = get(ref, y, n);
	double num = 0.0, den = 0.0;
	for (size_t i = 0; i < n; i++) {
		double e = (double)a[i] - r[i];
		num += e * e;
		den += (double)r[i] * r[i];
	}
	if (!strcmp(backend_name(be), "refdev"))
		bound = 0;
	ck_assert_msg(num <= bound * (den > 0 ? den : 1), "%s on %s: %s nmse %.3g > %.1g", spec,
		      backend_name(be), what, den > 0 ? num / den : num, bound);
	free(a);
	free(r);
}

/* the backend dev and ref: 1, or 0 where dev is cuda and no GPU answers
 * (the skip of `what` said) */
static int
open_two(const char *dev, const char *what, backend **be, backend **ref)
{
	char why[SL_ERR_LEN];
	*be = !strcmp(dev, "cuda") ? open_cuda(why) : NULL;
	if (!strcmp(dev, "cuda") && !*be) {
		printf("parity: cuda's %s skipped: %s\n", what, why);
		return 0;
	}
	if (!*be)
		ck_assert(backend_open(dev, 2, be, why) == 0);
	ck_assert(backend_open("ref", 1, ref, why) == 0);
	return 1;
}

START_TEST(one_step_per_model)
{
	/* a training step's loss on each model, ref's to 1e-4 */
	static const char *const devs[] = {"refdev", "cpu", "cuda"};
	static const char *const models[] = {"mlp:784-256-128-10", "lenet5", "logreg", "resnet:8"};
	const int n_models = (int)(sizeof(models) / sizeof(models[0]));
	for (int d = 0; d < 3; d++) {
		char why[SL_ERR_LEN];
		backend *be, *ref;
		if (!open_two(devs[d], "training steps", &be, &ref))
			continue;
		for (int k = 0; k < n_models; k++) {
			model *a, *b;
			const dataset *tr = &data.train;
			ck_assert(model_new(models[k], tr->c, tr->h, tr->w, tr->classes, 16, 7, be, &a,
					    why) == 0);
			ck_assert(model_new(models[k], tr->c, tr->h, tr->w, tr->classes, 16, 7, ref, &b,
					    why) == 0);
			uint32_t idx[16];
			for (int i = 0; i < 16; i++)
				idx[i] = (uint32_t)(i * 37 % tr->n);
			model_load_batch(a, tr->x, tr->y, idx, 16);
			model_load_batch(b, tr->x, tr->y, idx, 16);
			double la = model_step(a, NULL, 16, 0), lb = model_step(b, NULL, 16, 0);
			ck_assert_msg(fabs(la - lb) <= 1e-4 * fmax(1.0, fabs(lb)),
				      "%s on %s: loss %.9g, ref %.9g", models[k], devs[d], la, lb);
			if (!strcmp(devs[d], "refdev"))
				ck_assert(la == lb);
			/* every gradient, the running statistics the step moved,
			 * then an evaluation-mode forward on them */
			near(be, a->grads, ref, b->grads, a->n_params, 1e-7, models[k], "gradient");
			near(be, a->state, ref, b->state, a->n_state, 1e-7, models[k], "state");
			la = model_forward(a, NULL, 16, NULL);
			lb = model_forward(b, NULL, 16, NULL);
			ck_assert_msg(fabs(la - lb) <= 1e-4 * fmax(1.0, fabs(lb)),
				      "%s on %s: eval loss %.9g, ref %.9g", models[k], devs[d], la, lb);
			model_free(a);
			model_free(b);
		}
		backend_free(be);
		backend_free(ref);
	}
}
END_TEST

START_TEST(staleness_counts_per_rule)
{
	/* the virtual clock's schedule does not depend on the device: every
	 * rule counts the same staleness on it as on ref */
	char why[SL_ERR_LEN];
	backend *probe = open_cuda(why);
	if (!probe) {
		printf("parity: cuda's runs skipped: %s\n", why);
		return;
	}
	backend_free(probe);
	for (int k = 0; rule_table[k]; k++) {
		if (rule_table[k]->flags & RULE_SHARED)
			continue; /* hogwild: host memory only */
		run_config c = base(rule_table[k]->name, 4);
		c.stop_steps = 60;
		c.eval_every = 30;
		c.delay.dist = DELAY_EXP;
		c.delay.mean_ms = 3;
		run_snapshot *s[2];
		const char *devs[] = {"ref", "cuda"};
		for (int d = 0; d < 2; d++) {
			snprintf(c.device, sizeof(c.device), "%s", devs[d]);
			rec ev = {0};
			s[d] = go(&c, NULL, 0, &ev);
		}
		ck_assert_str_eq(s[1]->device, "cuda");
		ck_assert_msg(!memcmp(&s[0]->stale, &s[1]->stale, sizeof(stale_hist)),
			      "%s: staleness differs on cuda", c.rule);
		ck_assert_uint_eq(s[0]->v, s[1]->v);
		ck_assert_msg(fabs(s[0]->last_loss - s[1]->last_loss) <= 1e-3 * fmax(1, s[0]->last_loss),
			      "%s: loss %g on cuda, %g on ref", c.rule, s[1]->last_loss,
			      s[0]->last_loss);
		run_snapshot_put(s[0]);
		run_snapshot_put(s[1]);
	}
	/* a residual net with batch norm under adam and a cosine schedule,
	 * its evaluations on recomputed statistics: the same course on cuda as
	 * on cpu (cpu's ops are held to ref's above; ref itself would take a
	 * minute here) */
	run_config c = base("asgd", 3);
	snprintf(c.model, sizeof(c.model), "resnet:8");
	c.opt.kind = OPT_ADAM;
	c.opt.clip = 1.0;
	c.opt.sched.kind = SCHED_COSINE;
	c.opt.sched.decay_updates = 40;
	c.lr = 1e-3;
	c.stop_steps = 40;
	c.eval_every = 20;
	c.delay.dist = DELAY_EXP;
	c.delay.mean_ms = 3;
	run_snapshot *s[2];
	rec ev[2];
	memset(ev, 0, sizeof(ev));
	const char *devs[] = {"cpu", "cuda"};
	for (int d = 0; d < 2; d++) {
		snprintf(c.device, sizeof(c.device), "%s", devs[d]);
		s[d] = go(&c, NULL, 0, &ev[d]);
	}
	ck_assert_msg(!memcmp(&s[0]->stale, &s[1]->stale, sizeof(stale_hist)),
		      "resnet: staleness differs on cuda");
	ck_assert_int_eq(ev[0].n, ev[1].n);
	for (int i = 0; i < ev[0].n; i++) {
		ck_assert_msg(fabs(ev[0].ev[i].test_acc - ev[1].ev[i].test_acc) <= 0.02,
			      "resnet eval %d: accuracy %g on cuda, %g on cpu", i,
			      ev[1].ev[i].test_acc, ev[0].ev[i].test_acc);
		ck_assert_msg(fabs(ev[0].ev[i].train_loss - ev[1].ev[i].train_loss) <=
				      1e-2 * fmax(1, ev[0].ev[i].train_loss),
			      "resnet eval %d: loss %g on cuda, %g on cpu", i,
			      ev[1].ev[i].train_loss, ev[0].ev[i].train_loss);
	}
	run_snapshot_put(s[0]);
	run_snapshot_put(s[1]);
}
END_TEST

/* ---- a language model ------------------------------------------------------ */

#define GPT_SPEC "gpt:L2-H2-E8-T7"
#define GPT_TEXT "synthetic-text:4000"

static void
gpt_text(dataset_pair *text)
{
	char err[SL_ERR_LEN];
	ck_assert_msg(model_data_load(GPT_SPEC, GPT_TEXT, 3, text, err) == 0, "%s", err);
}

START_TEST(gpt_step_per_device)
{
	/* a GPT's training step (two blocks of two heads of width 4, a
	 * context of 7, the tied head) on each backend: ref's loss to 1e-5,
	 * every gradient (the table's: the head's share and the embedding's
	 * scatter of the batch's repeated tokens), then an evaluation */
	static const char *const devs[] = {"refdev", "cpu", "cuda"};
	dataset_pair text;
	gpt_text(&text);
	const dataset *tr = &text.train;
	enum { B = 6 };
	for (int d = 0; d < 3; d++) {
		char why[SL_ERR_LEN];
		backend *be, *ref;
		if (!open_two(devs[d], "GPT step", &be, &ref))
			continue;
		model *a, *b;
		ck_assert_msg(model_new(GPT_SPEC, tr->c, tr->h, tr->w, tr->classes, B, 7, be, &a,
					why) == 0, "%s on %s: %s", GPT_SPEC, devs[d], why);
		ck_assert(model_new(GPT_SPEC, tr->c, tr->h, tr->w, tr->classes, B, 7, ref, &b,
				    why) == 0);
		ck_assert_int_eq(a->targets, 7);
		/* the initial weights times 5 in both: sharper attention and
		 * larger activations than at init, so that every op's part of
		 * the gradient counts (at sd 0.02 the softmax is near uniform
		 * and q's and k's gradients are a small share of their layer's) */
		float *w = get(ref, b->params, b->n_params);
		for (size_t i = 0; i < b->n_params; i++)
			w[i] *= 5.0f;
		be->ops->upload(be, a->params, w, sizeof(float) * a->n_params);
		ref->ops->upload(ref, b->params, w, sizeof(float) * b->n_params);
		free(w);
		uint32_t idx[B];
		for (int i = 0; i < B; i++)
			idx[i] = (uint32_t)(i * 37 % tr->n);
		model_load_batch(a, tr->x, tr->y, idx, B);
		model_load_batch(b, tr->x, tr->y, idx, B);
		double la = model_step(a, NULL, B, 0), lb = model_step(b, NULL, B, 0);
		ck_assert_msg(fabs(la - lb) <= 1e-5 * fmax(1.0, fabs(lb)),
			      "%s on %s: loss %.9g, ref %.9g", GPT_SPEC, devs[d], la, lb);
		if (!strcmp(devs[d], "refdev"))
			ck_assert(la == lb);
		/* each node's gradient on its own, so that one op's error is
		 * not lost in the table's larger gradient */
		node_info info[MODEL_MAX_NODES];
		const int nn = model_node_info(a, info, MODEL_MAX_NODES);
		for (int i = 0; i < nn; i++) {
			char what[64];
			snprintf(what, sizeof(what), "gradient of node %d (%s)", i, info[i].name);
			near(be, a->grads + info[i].p_off, ref, b->grads + info[i].p_off,
			     info[i].n_params, 1e-8, GPT_SPEC, what);
		}
		int ca = -1, cb = -2;
		la = model_forward(a, NULL, B, &ca);
		lb = model_forward(b, NULL, B, &cb);
		ck_assert_msg(fabs(la - lb) <= 1e-5 * fmax(1.0, fabs(lb)),
			      "%s on %s: eval loss %.9g, ref %.9g", GPT_SPEC, devs[d], la, lb);
		ck_assert_int_eq(ca, cb);
		model_free(a);
		model_free(b);
		backend_free(be);
		backend_free(ref);
	}
	ds_pair_free(&text);
}
END_TEST

START_TEST(gpt_run_per_device)
{
	/* a short virtual-clock run of the GPT (3 asgd workers with delays,
	 * Adam with clipping, two evaluations) against ref's: refdev's the
	 * same bits, cuda's the same staleness counts and ref's losses to
	 * 1e-3 */
	dataset_pair text;
	gpt_text(&text);
	run_config c = base("asgd", 3);
	snprintf(c.model, sizeof(c.model), "%s", GPT_SPEC);
	snprintf(c.dataset, sizeof(c.dataset), "%s", GPT_TEXT);
	c.batch = 8;
	c.opt.kind = OPT_ADAM;
	c.opt.clip = 1.0;
	c.lr = 3e-3;
	c.stop_steps = 30;
	c.eval_every = 15;
	c.delay.dist = DELAY_EXP;
	c.delay.mean_ms = 3;
	const char *devs[] = {"ref", "refdev", "cuda"};
	run_snapshot *s[3] = {NULL, NULL, NULL};
	rec ev[3];
	memset(ev, 0, sizeof(ev));
	for (int d = 0; d < 3; d++) {
		char err[SL_ERR_LEN] = "";
		if (!strcmp(devs[d], "cuda")) {
			backend *probe = open_cuda(err);
			if (!probe) {
				printf("parity: cuda's GPT run skipped: %s\n", err);
				break;
			}
			backend_free(probe);
		}
		snprintf(c.device, sizeof(c.device), "%s", devs[d]);
		run *r;
		run_callbacks cb = {.eval = on_eval, .change = on_change, .ud = &ev[d]};
		ck_assert_msg(run_new(&c, &text, NULL, 0, &cb, &r, err) == 0, "%s", err);
		ck_assert_int_eq(run_exec(r), 0);
		s[d] = run_snapshot_get(r);
		run_free(r);
		ck_assert_str_eq(s[d]->device, devs[d]);
		ck_assert_uint_eq(s[d]->v, s[0]->v);
		ck_assert_msg(!memcmp(&s[0]->stale, &s[d]->stale, sizeof(stale_hist)),
			      "%s: staleness differs on %s", GPT_SPEC, devs[d]);
		ck_assert_int_eq(ev[d].n, ev[0].n);
		ck_assert_int_ge(ev[0].n, 2);
		for (int i = 0; i < ev[0].n; i++) {
			const run_eval *x = &ev[0].ev[i], *y = &ev[d].ev[i];
			if (!strcmp(devs[d], "refdev")) {
				ck_assert_msg(!memcmp(&x->train_loss, &y->train_loss, sizeof(double)) &&
						      x->test_loss == y->test_loss,
					      "%s eval %d: refdev differs from ref", GPT_SPEC, i);
				continue;
			}
			ck_assert_msg(fabs(x->train_loss - y->train_loss) <= 1e-3 * fmax(1, x->train_loss),
				      "%s eval %d: train loss %g on %s, %g on ref", GPT_SPEC, i,
				      y->train_loss, devs[d], x->train_loss);
			ck_assert_msg(fabs(x->test_loss - y->test_loss) <= 1e-3 * fmax(1, x->test_loss),
				      "%s eval %d: test loss %g on %s, %g on ref", GPT_SPEC, i,
				      y->test_loss, devs[d], x->test_loss);
		}
	}
	for (int d = 0; d < 3; d++)
		if (s[d])
			run_snapshot_put(s[d]);
	ds_pair_free(&text);
}
END_TEST

static Suite *
parity_runs_suite(void)
{
	const run_case cases[] = {
		{"runs", NULL, {one_step_per_model, staleness_counts_per_rule, NULL}},
		{"gpt", NULL, {gpt_step_per_device, gpt_run_per_device, NULL}},
	};
	return run_suite_of("parity_runs", cases, sizeof(cases) / sizeof(cases[0]));
}

SL_TEST_MAIN(parity_runs_suite)
