/* test_run_compress.c - compression of what a rule pushes, in whole runs
 * on the virtual clock (docs/rules.md, "Compression"): with every value
 * kept and no error feedback each rule is itself bit for bit; the bytes a
 * worker sends and the time its link takes are the compressed message's;
 * error feedback's residual survives a checkpoint, is kept by a change of
 * the ratio and zeroed by a change of the compressor; hogwild, which
 * pushes nothing, refuses it by name. */
#include <math.h>

#include "compress.h"
#include "rule.h"
#include "run_impl.h"
#include "run_util.h"

static void
set_compress(run_config *c, const char *kind, double ratio, int ef)
{
	snprintf(c->rp.compress, sizeof(c->rp.compress), "%s", kind);
	c->rp.compress_ratio = ratio;
	c->rp.ef = ef;
}

/* run c to the end: the server's weights (caller frees), their count */
static float *
weights_of(const run_config *c, size_t *n)
{
	run *r;
	char err[SL_ERR_LEN] = "";
	ck_assert_msg(run_new(c, &data, NULL, 0, NULL, &r, err) == 0, "%s", err);
	ck_assert_int_eq(run_exec(r), 0);
	float *w = malloc(sizeof(float) * 20000);
	*n = run_weights(r, w, 20000);
	ck_assert_uint_gt(*n, 0);
	run_free(r);
	return w;
}

static run_config
small(const char *rule, int workers)
{
	run_config c = base(rule, workers);
	snprintf(c.model, sizeof(c.model), "logreg");
	c.delay.dist = DELAY_EXP;
	c.delay.mean_ms = 2;
	c.eval_every = 0;
	c.rp.H = 4;
	c.rp.period = 4;
	c.rp.warmup = 10;
	c.stop_steps = 40;
	return c;
}

START_TEST(ratio_one_is_the_rule)
{
	/* top-k and random-k with k = n, error feedback off: every rule that
	 * pushes through the compressors (asgd and diloco among them; not
	 * hogwild, nor demo, whose message is its own) is the rule without
	 * compression, bit for bit; a ratio below 1 is not */
	for (int i = 0; rule_table[i]; i++) {
		const rule_class *rc = rule_table[i];
		int listed = 0; /* hogwild pushes nothing, sparta its own sparse message */
		for (int k = 0; rc->params[k]; k++)
			listed |= !strcmp(rc->params[k], "compress");
		if (!listed)
			continue;
		run_config a = small(rc->name, 3), b = a;
		size_t n1, n2;
		float *wa = weights_of(&a, &n1);
		const char *kinds[] = {"topk", "randk"};
		for (int k = 0; k < 2; k++) {
			set_compress(&b, kinds[k], 1, 0);
			float *wb = weights_of(&b, &n2);
			ck_assert_msg(n1 == n2 && !memcmp(wa, wb, sizeof(float) * n1),
				      "%s with %s ratio 1 differs", rc->name, kinds[k]);
			free(wb);
		}
		set_compress(&b, "topk", 0.5, 0);
		float *wb = weights_of(&b, &n2);
		ck_assert_msg(memcmp(wa, wb, sizeof(float) * n1), "%s: topk 0.5 changed nothing",
			      rc->name);
		free(wb);
		free(wa);
	}
}
END_TEST

START_TEST(a_model_sends_its_difference)
{
	/* one worker, H 1, plain sgd: localsgd's model after a step is x = W -
	 * lr g, so the difference it sends, x - W, is -lr g, and top-k keeps
	 * the coordinates asgd's top-k of g keeps: the two runs agree (to the
	 * rounding of x - W against lr g, which can reorder near-ties: 8e-4 at
	 * most here; a model compressed as itself, not as its difference,
	 * keeps its largest weights and lands 0.09 away) */
	run_config a = small("asgd", 1), b;
	a.delay.dist = DELAY_NONE;
	a.stop_steps = 30;
	set_compress(&a, "topk", 0.1, 0);
	b = a;
	snprintf(b.rule, sizeof(b.rule), "localsgd");
	b.rp.H = 1;
	size_t n1, n2;
	float *wa = weights_of(&a, &n1), *wb = weights_of(&b, &n2);
	double worst = 0;
	for (size_t i = 0; i < n1; i++)
		worst = fmax(worst, fabs((double)wa[i] - wb[i]));
	ck_assert_msg(worst < 5e-3, "localsgd vs asgd under topk: %g", worst);
	free(wa);
	free(wb);
}
END_TEST

/* one worker's bytes sent and seconds on its link */
static void
comm_of(const run_config *c, double *bytes, double *comm)
{
	rec *r = calloc(1, sizeof(*r));
	run_snapshot *s = go(c, NULL, 0, r);
	*bytes = s->workers[0].bytes_sent;
	*comm = s->workers[0].comm_s;
	run_snapshot_put(s);
	free(r);
}

/* logreg (P = 7850), no delay, 10 updates over a 1 ms, 100 Mb/s link */
static run_config
linked(const char *rule, int workers)
{
	run_config c = small(rule, workers);
	c.delay.dist = DELAY_NONE;
	c.stop_steps = 10;
	c.link = (link_cfg){.latency_ms = 1, .bandwidth_mbps = 100};
	return c;
}

START_TEST(bytes_are_the_message)
{
	/* asgd, one worker, logreg (P = 7850), 10 pushes over a 1 ms,
	 * 100 Mb/s link: top-k 0.1 sends k = 785 values of 8 bytes, 6,280 a
	 * push, and each push takes (4 x 7850 - 6280) x 8 / 1e8 s less on
	 * the link than the dense gradient: 11 of them, the 11th step's in
	 * flight at the stop (its link time spent, its push never applied) */
	run_config c = linked("asgd", 1);
	double b0, t0, b1, t1;
	comm_of(&c, &b0, &t0);
	ck_assert_double_eq(b0, 10 * 4 * 7850.0);
	set_compress(&c, "topk", 0.1, 1);
	comm_of(&c, &b1, &t1);
	ck_assert_double_eq(b1, 10 * 8 * 785.0);
	ck_assert_double_eq_tol(t0 - t1, 11 * (4 * 7850.0 - 6280) * 8 / 1e8, 1e-12);
	set_compress(&c, "randk", 0.1, 0);
	comm_of(&c, &b1, &t1);
	ck_assert_double_eq(b1, 10 * 4 * 785.0);
	/* diloco, 2 workers, H 4, 3 rounds: each sends its model 3 times,
	 * int8: 7850 bytes and 31 scales of 4 (blocks of 256) */
	c = small("diloco", 2);
	c.stop_steps = 3;
	set_compress(&c, "int8", 1, 0);
	comm_of(&c, &b1, &t1);
	ck_assert_double_eq(b1, 3 * (7850.0 + 4 * 31));
	set_compress(&c, "int4", 1, 1);
	comm_of(&c, &b1, &t1);
	ck_assert_double_eq(b1, 3 * (3925.0 + 4 * 31));
}
END_TEST

START_TEST(demo_bytes_are_its_coefficients)
{
	/* demo, two workers, logreg (a [10][784] matrix and a bias of 10),
	 * 10 rounds: each push sends 14 blocks of 10 x 56 at 32 coefficients
	 * and the bias's 10, 458 of 12 bytes (an int64 index, an fp32
	 * value): 5,496 bytes against the dense gradient's 31,400; on a 1 ms,
	 * 100 Mb/s link each push takes that much less time than ssgd's */
	run_config c = linked("ssgd", 2);
	double b0, t0, b1, t1;
	comm_of(&c, &b0, &t0);
	ck_assert_double_eq(b0, 10 * 4 * 7850.0);
	snprintf(c.rule, sizeof(c.rule), "demo");
	comm_of(&c, &b1, &t1);
	ck_assert_double_eq(b1, 10 * 12.0 * 458);
	ck_assert_msg(fabs((t0 - t1) - 11 * (4 * 7850.0 - 12.0 * 458) * 8 / 1e8) < 1e-12,
		      "link seconds: ssgd %.9g, demo %.9g", t0, t1);
	/* chunk 1: every float its own chunk, all sent: 3 times dense */
	c.rp.demo_chunk = 1;
	comm_of(&c, &b1, &t1);
	ck_assert_double_eq(b1, 10 * 12.0 * 7850);
}
END_TEST

START_TEST(ef_resumes_from_a_checkpoint)
{
	/* the residual is in the checkpoint: a run resumed goes on as the
	 * whole one, bit for bit (a gradient rule with a server-held delay,
	 * a model rule, an elastic one) */
	const char *rules[] = {"asgd", "diloco", "easgd"};
	const char *kinds[] = {"topk", "int4", "randk"};
	for (int k = 0; k < 3; k++) {
		run_config c = base(rules[k], 3);
		c.delay.dist = DELAY_EXP;
		c.delay.mean_ms = 3;
		c.rp.H = 4;
		c.rp.period = 4;
		c.eval_every = k ? 10 : 40;
		c.stop_steps = k ? 60 : 300;
		set_compress(&c, kinds[k], 0.05, 1);
		c.n_overrides = 1;
		c.overrides[0] = (worker_override){.id = 2, .has_delay = 1,
			.delay = {.dist = DELAY_CONST, .mean_ms = 2, .at_server = 1}};
		ckrec *a;
		resume_matches(&c, c.stop_steps / 2 + 1, &a);
		ck_assert_ptr_nonnull(memmem(a->buf, a->len, "ef_residual", 11));
		free(a->buf);
		free(a);
	}
}
END_TEST

/* at each change: are the workers' residuals there? */
typedef struct watch {
	rec r;
	run *run;
	int kept[REC_CHANGES];
} watch;

static void
on_change_watch(void *ud, double t, uint64_t v, const run_cmd *c)
{
	watch *w = ud;
	int i = w->r.n_change;
	on_change(&w->r, t, v, c);
	if (i < REC_CHANGES) {
		w->kept[i] = 0;
		for (int k = 0; k < w->run->n_slots; k++)
			w->kept[i] += w->run->w[k]->ef_res != NULL;
	}
}

START_TEST(a_change_keeps_or_zeroes_the_residual)
{
	/* topk 0.1 with ef, 2 workers: at v 40 the ratio goes to 0.2 (both
	 * residuals kept), at v 80 compress to int8 (both zeroed), at v 120
	 * ef off and on again through two changes (zeroed) */
	run_config c = small("asgd", 2);
	c.stop_steps = 160;
	set_compress(&c, "topk", 0.1, 1);
	run_sched s[3];
	for (int i = 0; i < 3; i++) {
		s[i] = (run_sched){.by_version = 1, .v = 40 * (uint64_t)(i + 1),
				   .cmd = {.worker = -1, .fields = CMD_RULE_PARAMS, .rp = c.rp}};
	}
	s[0].cmd.rp.compress_ratio = 0.2;
	s[1].cmd.rp = s[0].cmd.rp;
	snprintf(s[1].cmd.rp.compress, sizeof(s[1].cmd.rp.compress), "int8");
	s[2].cmd.rp = s[1].cmd.rp;
	s[2].cmd.rp.ef = 0;
	watch *w = calloc(1, sizeof(*w));
	run_callbacks cb = {.change = on_change_watch, .ud = w};
	char err[SL_ERR_LEN] = "";
	ck_assert_msg(run_new(&c, &data, s, 3, &cb, &w->run, err) == 0, "%s", err);
	ck_assert_int_eq(run_exec(w->run), 0);
	ck_assert_int_eq(w->r.n_change, 3);
	ck_assert_int_eq(w->kept[0], 2);
	ck_assert_int_eq(w->kept[1], 0);
	ck_assert_int_eq(w->kept[2], 0);
	/* ef off: no residual made since */
	ck_assert_ptr_null(w->run->w[0]->ef_res);
	run_free(w->run);
	free(w);
}
END_TEST

/* hogwild pushes nothing, sparta's push is the values at its mask (sparse
 * already): compression is refused by name, at the start and in a switch
 * to the rule mid-run */
START_TEST(rules_that_refuse_it)
{
	static const struct {
		const char *rule, *clock, *why;
	} refuse[] = {{"hogwild", "wall", "rule_params.compress: hogwild pushes nothing"},
		      {"sparta", "virtual", "rule_params.compress: sparta's push is sparse already"},
		      {"demo", "virtual", "rule_params.compress: demo sends a message of its own"}};
	for (size_t k = 0; k < sizeof(refuse) / sizeof(refuse[0]); k++) {
		run_config c = small(refuse[k].rule, 2);
		snprintf(c.clock, sizeof(c.clock), "%s", refuse[k].clock);
		set_compress(&c, "topk", 0.1, 0);
		run *r;
		char err[SL_ERR_LEN] = "";
		ck_assert_int_eq(run_new(&c, &data, NULL, 0, NULL, &r, err), -SL_EINVAL);
		ck_assert_msg(strstr(err, refuse[k].why), "%s", err);
		snprintf(c.rule, sizeof(c.rule), "asgd");
		ck_assert_msg(run_new(&c, &data, NULL, 0, NULL, &r, err) == 0, "%s", err);
		run_cmd cmd = {.worker = -1, .fields = CMD_RULE};
		snprintf(cmd.rule, sizeof(cmd.rule), "%s", refuse[k].rule);
		ck_assert_int_eq(run_command(r, &cmd, err), -SL_EINVAL);
		ck_assert_msg(strstr(err, refuse[k].why), "%s", err);
		run_free(r);
	}
}
END_TEST

static Suite *
run_compress_suite(void)
{
	const run_case cases[] = {
		{"compress", NULL, {ratio_one_is_the_rule, bytes_are_the_message,
				    a_model_sends_its_difference,
				    a_change_keeps_or_zeroes_the_residual, rules_that_refuse_it,
				    demo_bytes_are_its_coefficients, NULL}},
		{"resume", "slow", {ef_resumes_from_a_checkpoint, NULL}},
	};
	return run_suite_of("run_compress", cases, sizeof(cases) / sizeof(cases[0]));
}

SL_TEST_MAIN(run_compress_suite)
