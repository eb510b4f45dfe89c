/* test_run_divergence.c - a step whose loss, gradient or model is not
 * finite is caught at its version and nothing of it is applied, under
 * every rule and on both clocks; the last good checkpoint resumes. */
#include <math.h>

#include "rng.h"
#include "rule.h"
#include "run_util.h"

typedef struct divrec {
	rec r;
	int n_div;
	run_divergence div;
} divrec;

static void
on_div(void *ud, const run_divergence *d)
{
	divrec *x = ud;
	if (!x->n_div++)
		x->div = *d;
}

static void
on_div_eval(void *ud, const run_eval *e)
{
	on_eval(&((divrec *)ud)->r, e);
}

/* run cfg to the end collecting the divergence; the final snapshot, and
 * whether the server's weights are all finite then */
static run_snapshot *
go_div(const run_config *c, const run_sched *s, int ns, divrec *out, int *finite)
{
	run *r;
	char err[SL_ERR_LEN] = "";
	run_callbacks cb = {.eval = on_div_eval, .diverged = on_div, .ud = out};
	ck_assert_msg(run_new(c, &data, s, ns, &cb, &r, err) == 0, "%s", err);
	ck_assert_int_eq(run_exec(r), 0);
	run_snapshot *snap = run_snapshot_get(r);
	size_t n = 800 * 1000;
	float *w = malloc(sizeof(float) * n);
	size_t got = run_weights(r, w, n);
	ck_assert_uint_gt(got, 0);
	*finite = 1;
	for (size_t i = 0; i < got; i++)
		*finite &= isfinite(w[i]) != 0;
	free(w);
	run_free(r);
	return snap;
}

/* the sample the sampler hands out at position pos of the first epoch */
static uint32_t
sample_at(const run_config *c, uint32_t pos)
{
	uint32_t n = data.train.n, *perm = malloc(sizeof(uint32_t) * n);
	for (uint32_t i = 0; i < n; i++)
		perm[i] = i;
	rng g;
	rng_seed(&g, c->seed, 1000);
	rng_shuffle(&g, perm, n);
	uint32_t p = perm[pos];
	free(perm);
	return p;
}

/* poison pixel 300 of the sample the sampler hands out at batch `batch`
 * (item 5) of the first epoch; returns the pixel, *keep its value */
static float *
poison(const run_config *c, uint32_t batch, float value, float *keep)
{
	uint32_t p = sample_at(c, batch * (uint32_t)c->batch + 5);
	float *px = &data.train.x[(size_t)p * (size_t)data.train.dim + 300];
	*keep = *px;
	*px = value;
	return px;
}

START_TEST(divergence_caught_at_the_poisoned_step)
{
	/* one worker, one poisoned pixel in the sample of batch 37: the step
	 * that takes it is caught (its loss, gradient or model, whichever the
	 * model and rule make non-finite first), on both clocks, at version
	 * 37, computed on 37, and nothing of it is applied: the run stops
	 * there with every weight finite and no NaN in the series */
	const struct {
		const char *model, *rule, *clock, *what;
		float poison;
		double lr; /* from v 37 on */
	} k[] = {
		/* the hidden layer's ReLU turns the NaN into 0: the loss stays
		 * finite, the first layer's gradient (0 * NaN) does not */
		{"mlp:784-16-10", "asgd", "virtual", "gradient", NAN, 0.01f},
		{"mlp:784-16-10", "asgd", "wall", "gradient", NAN, 0.01f},
		/* no hidden layer: the logits and the loss are NaN */
		{"logreg", "asgd", "virtual", "loss", NAN, 0.01f},
		{"logreg", "ssgd", "wall", "loss", INFINITY, 0.01f},
		/* a finite pixel near FLT_MAX: the loss and gradient are
		 * finite, the local step at lr 100 (from v 37 on) overflows
		 * the model */
		{"logreg", "localsgd", "virtual", "model", 3e38f, 100},
		{"logreg", "easgd", "wall", "model", 3e38f, 100},
	};
	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		run_config c = base(k[i].rule, 1);
		snprintf(c.model, sizeof(c.model), "%s", k[i].model);
		snprintf(c.clock, sizeof(c.clock), "%s", k[i].clock);
		c.eval_every = 10;
		c.rp.H = 1;
		c.rp.period = 1;
		run_sched sc = {.by_version = 1, .v = 37,
				.cmd = {.worker = -1, .fields = CMD_LR, .lr = k[i].lr}};
		float keep, *px = poison(&c, 37, k[i].poison, &keep);
		divrec *d = calloc(1, sizeof(*d));
		int finite;
		run_snapshot *s = go_div(&c, &sc, 1, d, &finite);
		*px = keep;
		ck_assert_msg(d->n_div == 1, "%s %s: %d divergences", k[i].rule, k[i].clock,
			      d->n_div);
		ck_assert_msg(!strcmp(d->div.what, k[i].what), "%s %s: caught the %s",
			      k[i].rule, k[i].clock, d->div.what);
		ck_assert_int_eq(d->div.worker, 0);
		ck_assert_uint_eq(d->div.v, 37);
		ck_assert_uint_eq(d->div.v_read, 37);
		ck_assert_uint_eq(s->v, 37);
		ck_assert_int_eq(s->state, RUN_DIVERGED);
		ck_assert_str_eq(s->stop_reason, "diverged");
		ck_assert(s->diverged && s->div.v == 37);
		ck_assert_msg(finite, "%s %s: the server's weights hold a NaN", k[i].rule,
			      k[i].clock);
		ck_assert_int_gt(d->r.n, 1);
		for (int e = 0; e < d->r.n; e++)
			ck_assert_msg(isfinite(d->r.ev[e].train_loss) && isfinite(d->r.ev[e].test_loss),
				      "record %d (v %llu): a loss is not finite", e,
				      (unsigned long long)d->r.ev[e].v);
		ck_assert_str_eq(d->r.ev[d->r.n - 1].stop_reason, "diverged");
		run_snapshot_put(s);
		free(d);
	}
}
END_TEST

START_TEST(divergence_under_every_rule)
{
	/* every rule, 3 workers with delays, one of them sending only the
	 * top layer (partial backprop), a NaN pixel in batches 40 to 47: the
	 * run stops at the first non-finite message, with finite weights, at
	 * the version it was caught (a worker with partial backprop sends a
	 * finite top layer for such a sample: the NaN stays below it; it is
	 * the fastest worker, so on the wall clock it may take one poisoned
	 * sample after another, but not all of them) */
	for (int i = 0; rule_table[i]; i++) {
		const rule_class *rc = rule_table[i];
		run_config c = base(rc->name, 3);
		c.rp.warmup = 10;
		c.rp.H = 2;
		c.rp.period = 2;
		c.delay.dist = DELAY_EXP;
		c.delay.mean_ms = 2;
		c.stop_steps = 1000;
		c.n_overrides = 1;
		c.overrides[0] = (worker_override){.id = 2, .has_spb = 1, .spb_depth = 1};
		if (rc->flags & RULE_SHARED)
			snprintf(c.clock, sizeof(c.clock), "wall");
		float keep[8], *px[8];
		for (int b = 0; b < 8; b++)
			px[b] = poison(&c, 40 + (uint32_t)b, NAN, &keep[b]);
		divrec *d = calloc(1, sizeof(*d));
		int finite;
		run_snapshot *s = go_div(&c, NULL, 0, d, &finite);
		for (int b = 7; b >= 0; b--)
			*px[b] = keep[b];
		ck_assert_msg(d->n_div == 1 && !strcmp(s->stop_reason, "diverged"),
			      "%s: stopped by %s", rc->name, s->stop_reason);
		ck_assert_msg(finite, "%s: the server's weights hold a NaN", rc->name);
		ck_assert_int_ge(d->div.worker, 0);
		ck_assert_int_lt(d->div.worker, 3);
		ck_assert_uint_le(d->div.v_read, d->div.v);
		ck_assert_msg(s->v == d->div.v, "%s: caught at v %llu, ended at %llu",
			      rc->name, (unsigned long long)d->div.v, (unsigned long long)s->v);
		run_snapshot_put(s);
		free(d);
	}
}
END_TEST

START_TEST(divergence_keeps_the_last_good_checkpoint)
{
	/* with run_keep_good, each evaluation with a finite test loss leaves
	 * a checkpoint; after a divergence it resumes, at its version, with a
	 * smaller lr, to the stop, all finite */
	run_config c = base("asgd", 2);
	c.eval_every = 20;
	c.stop_steps = 300;
	float keep, *px = poison(&c, 70, NAN, &keep);
	divrec *d = calloc(1, sizeof(*d));
	run *r;
	char err[SL_ERR_LEN] = "";
	run_callbacks cb = {.eval = on_div_eval, .diverged = on_div, .ud = d};
	ck_assert_int_eq(run_new(&c, &data, NULL, 0, &cb, &r, err), 0);
	uint8_t *buf;
	size_t len;
	uint64_t v;
	ck_assert_int_eq(run_good_checkpoint(r, &buf, &len, &v, err), -SL_ESTATE);
	run_keep_good(r, 1);
	ck_assert_int_eq(run_exec(r), 0);
	*px = keep;
	ck_assert_int_eq(d->n_div, 1);
	ck_assert_int_eq(run_good_checkpoint(r, &buf, &len, &v, err), 0);
	/* the newest evaluation before the divergence */
	uint64_t want = 0;
	for (int e = 0; e < d->r.n; e++)
		if (!d->r.ev[e].final && d->r.ev[e].v < d->div.v)
			want = d->r.ev[e].v;
	ck_assert_uint_eq(v, want);
	ck_assert_uint_eq(v, 60);
	run_free(r);
	run_config c2;
	ck_assert_int_eq(run_checkpoint_config(buf, len, &c2, err), 0);
	c2.stop_steps = 300;
	ck_assert_msg(run_open(&c2, &data, NULL, 0, NULL, buf, len, &r, err) == 0, "%s", err);
	free(buf);
	run_cmd lr = {.worker = -1, .fields = CMD_LR, .lr = 0.005};
	ck_assert_int_eq(run_command(r, &lr, err), 0);
	/* a resumed run's first good checkpoint is where it starts */
	run_keep_good(r, 1);
	ck_assert_int_eq(run_good_checkpoint(r, NULL, NULL, &v, err), -SL_ESTATE);
	ck_assert_int_eq(run_exec(r), 0);
	ck_assert_int_eq(run_good_checkpoint(r, NULL, NULL, &v, err), 0);
	ck_assert_uint_eq(v, 300);
	run_snapshot *s = run_snapshot_get(r);
	ck_assert_str_eq(s->stop_reason, "steps");
	ck_assert_uint_eq(s->v, 300);
	ck_assert_double_eq(s->cfg.lr, 0.005);
	ck_assert(isfinite(s->last_loss));
	run_snapshot_put(s);
	run_free(r);
	free(d);
}
END_TEST

static Suite *
run_divergence_suite(void)
{
	const run_case cases[] = {
		{"divergence", NULL, {divergence_caught_at_the_poisoned_step,
				      divergence_under_every_rule,
				      divergence_keeps_the_last_good_checkpoint, NULL}},
	};
	return run_suite_of("run_divergence", cases, sizeof(cases) / sizeof(cases[0]));
}

SL_TEST_MAIN(run_divergence_suite)
