/* test_device.c - the engine's paths for a backend whose memory the host
 * cannot touch (a GPU), run on any machine through refdev: the ref
 * backend's arithmetic behind addresses that fault on any direct host
 * access (engine/nn/backend_refdev.c). Every rule, on the virtual clock,
 * must run on refdev to the same bits as on ref (weights, records,
 * staleness counts): staging, uploads, downloads and held gradients all
 * go through the backend table, or the case crashes. */
#include "rule.h"
#include "run_impl.h" /* the server's backend, its held gradients */
#include "run_util.h"

typedef struct outcome {
	float *w;
	size_t n;
	rec ev;
	run_snapshot *snap;
} outcome;

static outcome
run_on(const run_config *c0, const char *device)
{
	run_config c = *c0;
	snprintf(c.device, sizeof(c.device), "%s", device);
	outcome o = {0};
	run *r;
	char err[SL_ERR_LEN] = "";
	run_callbacks cb = {.eval = on_eval, .change = on_change, .ud = &o.ev};
	ck_assert_msg(run_new(&c, &data, NULL, 0, &cb, &r, err) == 0, "%s on %s: %s",
		      c.rule, device, err);
	ck_assert_int_eq(run_exec(r), 0);
	o.w = malloc(sizeof(float) * 200000);
	ck_assert_ptr_nonnull(o.w);
	o.n = run_weights(r, o.w, 200000);
	ck_assert_uint_gt(o.n, 0);
	o.snap = run_snapshot_get(r);
	run_free(r);
	return o;
}

static void
outcome_free(outcome *o)
{
	free(o->w);
	run_snapshot_put(o->snap);
}

/* the same run on ref and on refdev: the same bits everywhere */
static void
same_on_both(const run_config *c, const char *what)
{
	outcome a = run_on(c, "ref"), b = run_on(c, "refdev");
	ck_assert_str_eq(a.snap->device, "ref");
	ck_assert_str_eq(b.snap->device, "refdev");
	ck_assert_uint_eq(a.n, b.n);
	ck_assert_msg(!memcmp(a.w, b.w, sizeof(float) * a.n), "%s: weights differ", what);
	ck_assert_msg(same_records(&a.ev, &b.ev), "%s: records differ", what);
	ck_assert_uint_eq(a.snap->v, b.snap->v);
	ck_assert_uint_gt(a.snap->stale.n, 0);
	ck_assert_msg(!memcmp(&a.snap->stale, &b.snap->stale, sizeof(stale_hist)),
		      "%s: staleness counts differ", what);
	ck_assert_int_eq(a.snap->n_workers, b.snap->n_workers);
	for (int i = 0; i < a.snap->n_workers; i++)
		ck_assert_msg(!memcmp(&a.snap->workers[i].stale, &b.snap->workers[i].stale,
				      sizeof(stale_hist)),
			      "%s: worker %d's staleness counts differ", what, i);
	outcome_free(&a);
	outcome_free(&b);
}

START_TEST(every_rule_same_bits_as_ref)
{
	for (int k = 0; rule_table[k]; k++) {
		const rule_class *rc = rule_table[k];
		run_config c = base(rc->name, 3);
		c.stop_steps = 40;
		c.eval_every = 20;
		c.delay.dist = DELAY_EXP;
		c.delay.mean_ms = 3;
		if (rc->flags & RULE_SHARED) {
			/* shared weights need host memory: refused, by name */
			run *r;
			char err[SL_ERR_LEN] = "";
			snprintf(c.device, sizeof(c.device), "refdev");
			snprintf(c.clock, sizeof(c.clock), "wall");
			ck_assert_int_lt(run_new(&c, &data, NULL, 0, NULL, &r, err), 0);
			ck_assert_msg(strstr(err, rc->name) && strstr(err, "refdev"), "%s", err);
			continue;
		}
		same_on_both(&c, rc->name);
	}
}
END_TEST

START_TEST(held_and_stale_reads_same_bits)
{
	/* gradients held at the server (a delay "where": "server"), reads of
	 * older versions (a version delay), momentum and partial backprop:
	 * the paths that keep copies of weights and gradients */
	const char *rules[] = {"asgd", "dcasgd", "sasgd"};
	for (int k = 0; k < 3; k++) {
		run_config c = base(rules[k], 3);
		c.stop_steps = 40;
		c.eval_every = 0;
		c.momentum = 0.9;
		c.delay.dist = DELAY_EXP;
		c.delay.mean_ms = 4;
		c.delay.at_server = 1;
		same_on_both(&c, rules[k]);
		c.delay = (delay_cfg){.dist = DELAY_VERSION, .s = 3};
		same_on_both(&c, rules[k]);
	}
	/* structured partial backprop: worker 1 sends only the top layer */
	run_config c = base("asgd", 2);
	snprintf(c.model, sizeof(c.model), "mlp:784-16-12-10");
	c.stop_steps = 30;
	c.eval_every = 0;
	c.n_overrides = 1;
	c.overrides[0] = (worker_override){.id = 1, .has_spb = 1, .spb_depth = 1};
	same_on_both(&c, "partial backprop depth 1");
}
END_TEST

START_TEST(conv_model_same_bits_as_ref)
{
	/* LeNet-5's layers (conv, pooling, the flatten) through staging */
	run_config c = base("asgd", 2);
	snprintf(c.model, sizeof(c.model), "lenet5");
	c.batch = 4;
	c.stop_steps = 6;
	c.eval_every = 0;
	same_on_both(&c, "lenet5");
}
END_TEST

START_TEST(checkpoint_resumes_to_the_same_bits)
{
	/* a refdev run checkpointed half-way (momentum, DC-ASGD's backups,
	 * gradients held at the server: every buffer a checkpoint carries)
	 * and resumed ends where the same run on ref, uninterrupted, does */
	run_config c = base("dcasgd", 3);
	c.stop_steps = 40;
	c.eval_every = 0;
	c.momentum = 0.9;
	c.rp.lambda = 0.5;
	c.delay.dist = DELAY_EXP;
	c.delay.mean_ms = 4;
	c.delay.at_server = 1;
	outcome whole = run_on(&c, "ref");
	snprintf(c.device, sizeof(c.device), "refdev");
	c.stop_steps = 20;
	run *r;
	char err[SL_ERR_LEN] = "";
	ck_assert_msg(run_new(&c, &data, NULL, 0, NULL, &r, err) == 0, "%s", err);
	ck_assert_int_eq(run_exec(r), 0);
	uint8_t *buf;
	size_t len;
	ck_assert_msg(run_checkpoint(r, &buf, &len, err) == 0, "%s", err);
	run_free(r);
	c.stop_steps = 40;
	ck_assert_msg(run_new(&c, &data, NULL, 0, NULL, &r, err) == 0, "%s", err);
	ck_assert_msg(run_restore(r, buf, len, err) == 0, "%s", err);
	ck_assert_int_eq(run_exec(r), 0);
	float *w = malloc(sizeof(float) * whole.n);
	ck_assert_uint_eq(run_weights(r, w, whole.n), whole.n);
	ck_assert_msg(!memcmp(w, whole.w, sizeof(float) * whole.n),
		      "resumed on refdev, not the uninterrupted run's weights");
	run_free(r);
	free(w);
	free(buf);
	outcome_free(&whole);
}
END_TEST

START_TEST(a_held_gradient_the_server_cannot_stage_is_kept)
{
	/* gradients held at a device server arrive in host memory and are
	 * staged into the server's; when that allocation fails the run stops
	 * naming the cause, and the gradient stays held: the checkpoint taken
	 * at the stop carries it and the resumed run applies it once, ending
	 * where the run that never failed ends, bit for bit */
	run_config c = base("asgd", 2);
	c.stop_steps = 40;
	c.eval_every = 0;
	c.delay.dist = DELAY_CONST;
	c.delay.mean_ms = 3;
	c.delay.at_server = 1;
	outcome whole = run_on(&c, "refdev");
	snprintf(c.device, sizeof(c.device), "refdev");
	run *r;
	char err[SL_ERR_LEN] = "";
	ck_assert_msg(run_new(&c, &data, NULL, 0, NULL, &r, err) == 0, "%s", err);
	ck_assert_int_eq(backend_refdev_fail_alloc(r->be_ps, 0), 0); /* the next one */
	ck_assert_int_eq(run_exec(r), -SL_ENOMEM);
	run_snapshot *s = run_snapshot_get(r);
	ck_assert_int_eq(s->state, RUN_FAILED);
	ck_assert_msg(strstr(s->error, "could not take a held gradient of worker") &&
			      strstr(s->error, "out of memory"),
		      "%s", s->error);
	const uint64_t v_failed = s->v;
	run_snapshot_put(s);
	ck_assert_int_ge(r->n_held, 1);
	int per_worker = 0;
	for (int i = 0; i < r->n_slots; i++)
		per_worker += r->w[i]->n_held;
	ck_assert_int_eq(per_worker, r->n_held);
	uint8_t *buf;
	size_t len;
	ck_assert_msg(run_checkpoint(r, &buf, &len, err) == 0, "%s", err);
	run_free(r);
	ck_assert_uint_lt(v_failed, 40);
	ck_assert_msg(run_new(&c, &data, NULL, 0, NULL, &r, err) == 0, "%s", err);
	ck_assert_msg(run_restore(r, buf, len, err) == 0, "%s", err);
	ck_assert_int_ge(r->n_held, 1); /* kept, not applied at the failure */
	ck_assert_int_eq(run_exec(r), 0);
	float *w = malloc(sizeof(float) * whole.n);
	ck_assert_uint_eq(run_weights(r, w, whole.n), whole.n);
	run_snapshot *e = run_snapshot_get(r);
	ck_assert_uint_eq(e->v, whole.snap->v);
	/* every gradient applied once: as many staleness records as the
	 * uninterrupted run's, the same weights */
	ck_assert_uint_eq(e->stale.n, whole.snap->stale.n);
	ck_assert_msg(!memcmp(w, whole.w, sizeof(float) * whole.n),
		      "resumed after the failed staging, not the uninterrupted run's weights");
	run_snapshot_put(e);
	run_free(r);
	free(w);
	free(buf);
	outcome_free(&whole);
}
END_TEST

static Suite *
device_suite(void)
{
	const run_case cases[] = {
		{"rules", NULL, {every_rule_same_bits_as_ref, NULL}},
		{"copies", NULL, {held_and_stale_reads_same_bits,
				  checkpoint_resumes_to_the_same_bits,
				  a_held_gradient_the_server_cannot_stage_is_kept, NULL}},
		{"conv", "slow", {conv_model_same_bits_as_ref, NULL}},
	};
	return run_suite_of("device", cases, sizeof(cases) / sizeof(cases[0]));
}

SL_TEST_MAIN(device_suite)
