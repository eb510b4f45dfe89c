/* test_remote.c - the engine's seam for remote workers (run_join_remote):
 * a worker whose gradients come from elsewhere goes through the same step
 * code as a local one. Here "elsewhere" is a fake in the test process with
 * a model of its own. Pinned: a run whose only running worker is remote
 * ends with the same weights, bit for bit, as the same run with a local
 * worker, with the batches augmented too (the remote draws the views from
 * the key each step hands it: the run's seed, the batch's epoch); a remote worker lost mid-run leaves it (asgd goes on, an ssgd
 * round waiting for it completes without it), its step dropped and
 * counted, its owner told; refusals (virtual clock, hogwild, a run that
 * ended); the snapshot marks it remote with its host. */
#include <pthread.h>

#include "backend.h"
#include "ledger.h"
#include "model.h"
#include "optim.h"
#include "ps.h"
#include "run_util.h"
#include "wstep.h"

typedef struct fake {
	model *m;
	backend *be;
	int calls, fail_at; /* fail_at > 0: lost (or left) at that call */
	int fail_rc;        /* RUN_REMOTE_LOST or RUN_REMOTE_LEFT */
	int left;
	size_t off_seen;
	aug_key keys[256];  /* the views' key of each call (the first 256) */
	pthread_mutex_t mu;
	/* local steps (RULE_PHASES): its own weights and optimiser, as the
	 * worker process keeps them, and what went each way */
	float *w;
	optim *opt;
	ps_layer layers[MODEL_MAX_NODES];
	int nl;
	int grads_up, weights_down, models_up, resets, frags_up;
	size_t floats_up, floats_down;
} fake;

/* a local step as the worker process takes it (daemon/worker/cmd_worker.c) */
static void
fake_local(fake *f, const float *weights, size_t n, const wbatch *b, int depth, size_t off,
	   float *model_up, double *loss, const run_remote_local *l)
{
	if (l->weights) {
		memcpy(f->w, weights, sizeof(float) * n);
		f->weights_down++;
	}
	if (l->reset && f->opt)
		optim_reset(f->opt);
	f->resets += l->reset;
	for (int i = 0; !l->weights && i < l->n_down; i++) { /* fragments taken */
		optim_mix(f->be, f->w + l->down[i].off, weights + l->down[i].off,
			  l->down[i].len, l->mix);
		f->floats_down += l->down[i].len;
	}
	*loss = wstep(f->m, &data.train, f->w, b, depth);
	opt_cfg oc = {.kind = l->opt, .beta1 = l->beta1, .beta2 = l->beta2, .eps = l->eps,
		      .clip = l->clip};
	ck_assert_int_eq(optim_local_step(&f->opt, f->be, f->w, f->m->grads, off, n, f->layers,
					  f->nl, &oc, l->lr, l->mu, l->wd), 0);
	if (l->exchange && l->n_up) { /* a fragment */
		for (int i = 0; i < l->n_up; i++) {
			memcpy(model_up + l->up[i].off, f->w + l->up[i].off,
			       sizeof(float) * l->up[i].len);
			f->floats_up += l->up[i].len;
		}
		f->frags_up++;
	} else if (l->exchange) {
		memcpy(model_up, f->w, sizeof(float) * n);
		f->models_up++;
	}
}

static int
fake_compute(void *ctx, const float *weights, size_t n, uint64_t v_read, const wbatch *b,
	     int depth, size_t off, float *grads, double *loss, const run_remote_local *l)
{
	(void)v_read;
	fake *f = ctx;
	pthread_mutex_lock(&f->mu);
	int call = ++f->calls;
	pthread_mutex_unlock(&f->mu);
	if (f->fail_at && call >= f->fail_at)
		return f->fail_rc;
	if (call <= 256)
		f->keys[call - 1] = b->aug;
	f->off_seen = off;
	if (l) {
		fake_local(f, weights, n, b, depth, off, grads, loss, l);
		return 0;
	}
	*loss = wstep(f->m, &data.train, weights, b, depth); /* a remote worker's step */
	memcpy(grads + off, f->m->grads + off, sizeof(float) * (n - off));
	f->grads_up++;
	return 0;
}

static void
fake_left(void *ctx)
{
	fake *f = ctx;
	pthread_mutex_lock(&f->mu);
	f->left++;
	pthread_mutex_unlock(&f->mu);
}

static const run_remote_ops fake_ops = {.compute = fake_compute, .left = fake_left};

static void
fake_init(fake *f, const run_config *c, int fail_at)
{
	char err[SL_ERR_LEN];
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->mu, NULL);
	f->fail_at = fail_at;
	f->fail_rc = RUN_REMOTE_LOST;
	ck_assert_int_eq(backend_open("cpu", 1, &f->be, err), 0);
	const dataset *tr = &data.train;
	ck_assert_msg(model_new(c->model, tr->c, tr->h, tr->w, tr->classes, c->batch, c->seed,
				f->be, &f->m, err) == 0, "%s", err);
	f->w = calloc(f->m->n_params, sizeof(float));
	f->nl = ps_model_layers(f->m, f->layers, MODEL_MAX_NODES);
}

static void
fake_free(fake *f)
{
	if (f->opt) {
		optim_free(f->opt);
		free(f->opt);
	}
	free(f->w);
	model_free(f->m);
	backend_free(f->be);
	pthread_mutex_destroy(&f->mu);
}

static run_config
wall(const char *rule, int workers)
{
	run_config c = base(rule, workers);
	snprintf(c.clock, sizeof(c.clock), "wall");
	c.threads = 1;
	c.stop_steps = 120;
	return c;
}

/* the run's local worker paused from the start: a remote one does the work */
static void
remote_only(run_config *c)
{
	c->n_overrides = 1;
	c->overrides[0] = (worker_override){.id = 0, .has_paused = 1, .paused = 1};
}

static uint64_t
weights_hash(run *r)
{
	static float w[16 * 1024];
	size_t n = run_weights(r, w, sizeof(w) / sizeof(w[0]));
	uint64_t h = 1469598103934665603ull;
	const unsigned char *p = (const unsigned char *)w;
	for (size_t i = 0; i < n * sizeof(float); i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

/* the run to its end with a remote worker joined before run_exec */
static run_snapshot *
with_remote(const run_config *c, fake *f, uint64_t *hash, int *id)
{
	run *r;
	char err[SL_ERR_LEN] = "";
	ck_assert_msg(run_new(c, &data, NULL, 0, NULL, &r, err) == 0, "%s", err);
	ck_assert_msg(run_join_remote(r, &fake_ops, f, "fake-host", id, err) == 0, "%s", err);
	ck_assert_int_eq(run_exec(r), 0);
	run_snapshot *s = run_snapshot_get(r);
	if (hash)
		*hash = weights_hash(r);
	run_free(r);
	return s;
}

START_TEST(remote_computes_as_a_local_worker)
{
	/* every rule but hogwild (refused: shared weights) */
	const char *rules[] = {"asgd", "ssgd", "dcasgd", "ssp", "sasgd", "softsync", "odsgd",
			       "localsgd", "easgd", "diloco", "async-diloco", "async-gated",
			       "streaming-diloco", "sparta", "demo"};
	for (int k = 0; k < (int)(sizeof(rules) / sizeof(rules[0])); k++) {
		/* one local worker */
		run_config c = wall(rules[k], 1);
		run *r;
		char err[SL_ERR_LEN] = "";
		ck_assert_int_eq(run_new(&c, &data, NULL, 0, NULL, &r, err), 0);
		ck_assert_int_eq(run_exec(r), 0);
		uint64_t local = weights_hash(r);
		run_snapshot *s0 = run_snapshot_get(r);
		uint64_t iters = s0->workers[0].iterations; /* local rules: H a round */
		ck_assert_uint_ge(iters, 120);
		run_snapshot_put(s0);
		run_free(r);
		/* the same run, its local worker paused from the start and a
		 * remote one doing the work */
		remote_only(&c);
		fake f;
		fake_init(&f, &c, 0);
		uint64_t remote;
		int id = -1;
		run_snapshot *s = with_remote(&c, &f, &remote, &id);
		ck_assert_int_eq(id, 1);
		ck_assert_str_eq(s->stop_reason, "steps");
		ck_assert_msg((uint64_t)f.calls == iters, "%s: %d computes, %llu local", rules[k],
			      f.calls, (unsigned long long)iters);
		ck_assert_int_eq(f.left, 1);
		ck_assert_msg(remote == local, "%s: remote %016llx, local %016llx", rules[k],
			      (unsigned long long)remote, (unsigned long long)local);
		ck_assert_uint_eq(s->remote_joined, 1);
		ck_assert_uint_eq(s->remote_lost, 0);
		int seen = 0;
		for (int i = 0; i < s->n_workers; i++)
			if (s->workers[i].remote) {
				seen++;
				ck_assert_str_eq(s->workers[i].host, "fake-host");
				ck_assert_uint_eq(s->workers[i].iterations, iters);
			}
		ck_assert_int_eq(seen, 1);
		run_snapshot_put(s);
		fake_free(&f);
	}
}
END_TEST

START_TEST(the_remote_draws_the_local_views)
{
	/* crop-flip: 200 steps of 16 of 2400 samples, 150 a epoch */
	run_config c = wall("asgd", 1);
	c.augment = AUG_CROP_FLIP;
	c.stop_steps = 200;
	c.seed = 5;
	uint64_t h[2];
	run *r;
	char err[SL_ERR_LEN] = "";
	ck_assert_int_eq(run_new(&c, &data, NULL, 0, NULL, &r, err), 0);
	ck_assert_int_eq(run_exec(r), 0);
	h[0] = weights_hash(r);
	run_free(r);
	remote_only(&c);
	fake f;
	fake_init(&f, &c, 0);
	int id;
	run_snapshot_put(with_remote(&c, &f, &h[1], &id));
	ck_assert_int_eq(f.calls, 200);
	for (int i = 0; i < 200; i++) {
		const aug_key *k = &f.keys[i];
		ck_assert_int_eq(k->kind, AUG_CROP_FLIP);
		ck_assert_int_eq(k->pad, AUG_PAD);
		ck_assert_uint_eq(k->seed, 5);
		ck_assert_msg(k->epoch == (i < 150 ? 0u : 1u), "step %d: epoch %u", i, k->epoch);
	}
	ck_assert_msg(h[0] == h[1], "remote %016llx, local %016llx", (unsigned long long)h[1],
		      (unsigned long long)h[0]);
	/* and views they were: the run without them ends elsewhere */
	c.augment = AUG_NONE;
	fake_free(&f);
	fake_init(&f, &c, 0);
	run_snapshot_put(with_remote(&c, &f, &h[1], &id));
	ck_assert_uint_ne(h[0], h[1]);
	ck_assert_int_eq(f.keys[0].kind, AUG_NONE);
	fake_free(&f);
}
END_TEST

START_TEST(a_device_server_stages_the_wire)
{
	/* the daemon's backend in device memory (refdev, which faults on any
	 * direct host access): the weights a remote worker receives are
	 * downloaded first and its gradient uploaded after, and the run is
	 * the one on ref, bit for bit */
	uint64_t h[2];
	const char *dev[] = {"ref", "refdev"};
	for (int k = 0; k < 2; k++) {
		run_config c = wall("asgd", 1);
		snprintf(c.device, sizeof(c.device), "%s", dev[k]);
		c.stop_steps = 40;
		remote_only(&c);
		fake f;
		fake_init(&f, &c, 0);
		int id = -1;
		run_snapshot *s = with_remote(&c, &f, &h[k], &id);
		ck_assert_str_eq(s->device, dev[k]);
		ck_assert_str_eq(s->stop_reason, "steps");
		ck_assert_int_eq(f.calls, 40);
		run_snapshot_put(s);
		fake_free(&f);
	}
	ck_assert_uint_eq(h[0], h[1]);
}
END_TEST

START_TEST(partial_backprop_reaches_the_remote)
{
	run_config c = wall("asgd", 1);
	remote_only(&c);
	fake f;
	fake_init(&f, &c, 0);
	/* a depth for the remote, by a command like any worker's */
	run *r;
	char err[SL_ERR_LEN] = "";
	ck_assert_int_eq(run_new(&c, &data, NULL, 0, NULL, &r, err), 0);
	int id;
	ck_assert_int_eq(run_join_remote(r, &fake_ops, &f, "h", &id, err), 0);
	run_cmd cmd = {.worker = id, .fields = CMD_SPB, .spb_depth = 1};
	ck_assert_msg(run_command(r, &cmd, err) == 0, "%s", err);
	ck_assert_int_eq(run_exec(r), 0);
	run_snapshot *s = run_snapshot_get(r);
	/* mlp:784-16-10: the top layer starts at 784*16+16 */
	ck_assert_uint_eq(f.off_seen, 784 * 16 + 16);
	ck_assert_uint_eq(s->v, 120);
	run_snapshot_put(s);
	run_free(r);
	fake_free(&f);
}
END_TEST

START_TEST(a_lost_remote_leaves_the_run)
{
	const char *rules[] = {"asgd", "ssgd", "ssp", "asgd"};
	for (int k = 0; k < 4; k++) {
		run_config c = wall(rules[k], 2);
		c.delay.dist = DELAY_CONST;
		c.delay.mean_ms = 1;
		fake f;
		fake_init(&f, &c, 6); /* lost at its sixth step */
		if (k == 3)
			f.fail_rc = RUN_REMOTE_LEFT; /* ... or leaves, saying so */
		int id;
		run_snapshot *s = with_remote(&c, &f, NULL, &id);
		ck_assert_msg(!strcmp(s->stop_reason, "steps"), "%s: %s", rules[k], s->stop_reason);
		ck_assert_uint_eq(s->v, 120);
		ck_assert_uint_eq(s->remote_lost, k < 3);
		ck_assert_uint_eq(s->remote_left, k == 3);
		ck_assert_uint_eq(s->remote_dropped, 1);
		ck_assert_int_eq(f.left, 1);
		ck_assert_int_eq(s->n_workers, 2); /* the two local ones */
		ck_assert_int_eq(s->cfg.workers, 2);
		for (int i = 0; i < s->n_workers; i++)
			ck_assert(!s->workers[i].remote);
		run_snapshot_put(s);
		fake_free(&f);
	}
}
END_TEST

static void *
exec_main(void *p)
{
	run_exec(p);
	return NULL;
}

/* has the run's worker taken a step? */
static int
stepped(run *r)
{
	run_snapshot *s = run_snapshot_get(r);
	int done = s->n_workers > 0 && s->workers[0].iterations > 0;
	run_snapshot_put(s);
	return done;
}

START_TEST(refusals)
{
	char err[SL_ERR_LEN] = "";
	int id;
	fake f;
	run_config c = base("asgd", 1); /* virtual */
	fake_init(&f, &c, 0);
	run *r;
	ck_assert_int_eq(run_new(&c, &data, NULL, 0, NULL, &r, err), 0);
	ck_assert_int_eq(run_join_remote(r, &fake_ops, &f, "h", &id, err), -SL_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "need the wall clock"));
	run_free(r);
	c = wall("hogwild", 1);
	ck_assert_int_eq(run_new(&c, &data, NULL, 0, NULL, &r, err), 0);
	ck_assert_int_eq(run_join_remote(r, &fake_ops, &f, "h", &id, err), -SL_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "hogwild steps weights shared"));
	run_free(r);
	c = wall("asgd", 1);
	c.stop_steps = 10;
	ck_assert_int_eq(run_new(&c, &data, NULL, 0, NULL, &r, err), 0);
	ck_assert_int_eq(run_exec(r), 0);
	ck_assert_int_eq(run_join_remote(r, &fake_ops, &f, "h", &id, err), -SL_ESTATE);
	ck_assert_ptr_nonnull(strstr(err, "the run has ended"));
	run_free(r);
	/* streaming-diloco's fragment rounds, once begun, take no newcomer
	 * (it would join them out of step); before the first step, they do
	 * (remote_computes_as_a_local_worker) */
	c = wall("streaming-diloco", 1);
	c.stop_steps = 0;
	c.stop_seconds = 60;
	ck_assert_int_eq(run_new(&c, &data, NULL, 0, NULL, &r, err), 0);
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, exec_main, r), 0);
	for (int i = 0; i < 2000 && !stepped(r); i++)
		usleep(5000);
	ck_assert(stepped(r));
	ck_assert_int_eq(run_join_remote(r, &fake_ops, &f, "h", &id, err), -SL_EINVAL);
	ck_assert_msg(strstr(err, "streaming-diloco's fragment rounds need the workers it began "
				  "with"), "%s", err);
	run_stop(r);
	pthread_join(th, NULL);
	run_free(r);
	ck_assert_int_eq(f.calls, 0);
	fake_free(&f);
}
END_TEST

/* The ledger of remote pushes goes into the checkpoint and comes back in a
 * new generation: what was applied stays applied (a resend is a
 * duplicate), the counters carry on, and the next number is above any the
 * saving daemon could have issued after it saved. */
START_TEST(the_ledger_survives_a_checkpoint)
{
	char err[SL_ERR_LEN] = "";
	run_config c = wall("asgd", 1);
	c.stop_steps = 10;
	run *r;
	ck_assert_int_eq(run_new(&c, &data, NULL, 0, NULL, &r, err), 0);
	run_snapshot *s = run_snapshot_get(r);
	ck_assert_uint_eq(s->remote_applied, 0); /* no ledger yet */
	run_snapshot_put(s);
	ck_assert_int_eq(run_remote_hello(r, 3, 77), 0);
	ck_assert_int_eq(run_remote_hello(r, LEDGER_MAX, 77), -1);
	ck_assert_uint_eq(run_remote_issue(r, 3), 1);
	ck_assert_int_eq(run_remote_push(r, 3, 77, 1), LEDGER_APPLY);
	ck_assert_int_eq(run_remote_push(r, 3, 77, 1), LEDGER_DUPLICATE);
	ck_assert_uint_eq(run_remote_issue(r, 3), 2);
	ck_assert_int_eq(run_remote_push(r, 3, 77, 2), LEDGER_APPLY);
	ck_assert_uint_eq(run_remote_issue(r, 3), 3); /* in flight when it saved */
	run_remote_stale(r);
	uint8_t *buf;
	size_t len;
	ck_assert_msg(run_checkpoint(r, &buf, &len, err) == 0, "%s", err);
	run_free(r);

	ck_assert_int_eq(run_new(&c, &data, NULL, 0, NULL, &r, err), 0);
	ck_assert_msg(run_restore(r, buf, len, err) == 0, "%s", err);
	s = run_snapshot_get(r);
	ck_assert_uint_eq(s->remote_applied, 2);
	ck_assert_uint_eq(s->remote_duplicates, 1);
	ck_assert_uint_eq(s->remote_stale, 1);
	ck_assert_uint_eq(s->remote_generation, 1);
	run_snapshot_put(s);
	ck_assert_int_eq(run_remote_push(r, 3, 77, 2), LEDGER_DUPLICATE);
	ck_assert_int_eq(run_remote_push(r, 3, 77, 3), LEDGER_ABANDONED); /* the old daemon's */
	ck_assert_int_eq(run_remote_push(r, 3, 78, 3), LEDGER_OLD_INCARNATION);
	ck_assert_int_eq(run_remote_hello(r, 3, 77), 0); /* it reconnects */
	uint64_t next = run_remote_issue(r, 3);
	ck_assert_uint_eq(next, ((uint64_t)1 << 32) + 1);
	ck_assert_int_eq(run_remote_push(r, 3, 77, next), LEDGER_APPLY);
	/* and again: the generation goes on rising */
	uint8_t *buf2;
	size_t len2;
	ck_assert_msg(run_checkpoint(r, &buf2, &len2, err) == 0, "%s", err);
	run_free(r);
	ck_assert_int_eq(run_new(&c, &data, NULL, 0, NULL, &r, err), 0);
	ck_assert_msg(run_restore(r, buf2, len2, err) == 0, "%s", err);
	ck_assert_uint_eq(run_remote_issue(r, 3), ((uint64_t)2 << 32) + 1);
	s = run_snapshot_get(r);
	ck_assert_uint_eq(s->remote_applied, 3);
	ck_assert_uint_eq(s->remote_generation, 2);
	run_snapshot_put(s);
	run_free(r);
	free(buf);
	free(buf2);
}
END_TEST

/* the run with one local worker, and again with a remote one doing the
 * work: the weights' hashes, the remote's counts in *f (freed by the
 * caller) */
static void
local_and_remote(run_config c, fake *f, uint64_t *local, uint64_t *remote)
{
	run *r;
	char err[SL_ERR_LEN] = "";
	ck_assert_msg(run_new(&c, &data, NULL, 0, NULL, &r, err) == 0, "%s", err);
	ck_assert_int_eq(run_exec(r), 0);
	*local = weights_hash(r);
	run_free(r);
	remote_only(&c);
	fake_init(f, &c, 0);
	int id;
	run_snapshot_put(with_remote(&c, f, remote, &id));
}

/* Under a rule with phases a remote worker takes its local steps on its
 * own weights, with the run's optimiser and its own state: the weights go
 * down once a phase, the model comes up once, no gradient moves, and the
 * run is the local one's bit for bit (AdamW inner, Nesterov outer); under
 * streaming-diloco a fragment goes each way instead, the weights down
 * once. */
START_TEST(a_phase_moves_the_model_not_gradients)
{
	static const struct {
		const char *rule;
		int reset;
	} cases[] = {{"diloco", 0}, {"diloco", 1}, {"async-diloco", 1}, {"localsgd", 0},
		     {"easgd", 0}};
	for (int k = 0; k < (int)(sizeof(cases) / sizeof(cases[0])); k++) {
		run_config c = wall(cases[k].rule, 1);
		c.rp.H = 4;
		c.rp.period = 4;
		c.rp.inner_reset = cases[k].reset;
		c.opt.kind = OPT_ADAMW;
		c.opt.clip = 0.5;
		c.weight_decay = 0.1;
		c.lr = 0.002;
		fake f;
		uint64_t local, remote;
		local_and_remote(c, &f, &local, &remote);
		ck_assert_msg(remote == local, "%s: remote %016llx, local %016llx", cases[k].rule,
			      (unsigned long long)remote, (unsigned long long)local);
		/* 120 updates: 120 phases of 4 local steps */
		ck_assert_int_eq(f.calls, 480);
		ck_assert_msg(f.weights_down == 120 && f.models_up == 120 && f.grads_up == 0,
			      "%s: %d weights down, %d models up, %d gradients up", cases[k].rule,
			      f.weights_down, f.models_up, f.grads_up);
		/* told to start its optimiser afresh at every phase's start */
		ck_assert_int_eq(f.resets, cases[k].reset ? 120 : 0);
		fake_free(&f);
	}
	/* streaming-diloco: the whole model goes down once; each fragment
	 * comes up at its sync point and the global one goes down tau steps
	 * on, mixed into the worker's own; mlp:784-16-10's two layers as two
	 * fragments, H = 6, overlap 1, mix 0.5 */
	{
		run_config c = wall("streaming-diloco", 1);
		c.rp.H = 6;
		c.rp.fragments = 2;
		c.rp.overlap = 1;
		c.rp.mix = 0.5;
		c.opt.kind = OPT_ADAMW;
		c.lr = 0.002;
		fake f;
		uint64_t local, remote;
		local_and_remote(c, &f, &local, &remote);
		ck_assert_msg(remote == local, "streaming-diloco: remote %016llx, local %016llx",
			      (unsigned long long)remote, (unsigned long long)local);
		size_t n = f.m->n_params;
		ck_assert_int_eq(f.weights_down, 1);
		ck_assert_int_eq(f.models_up + f.grads_up, 0);
		/* 120 updates, one a fragment's round: fragment 0 (the first
		 * layer) syncs at step 3 of 6, fragment 1 (the second) at 6, so
		 * 60 of each came up, and their global ones went down but for
		 * the last, fragment 1's (the run stops before its reply is
		 * taken) */
		ck_assert_int_eq(f.frags_up, 120);
		ck_assert_uint_eq(f.floats_up, 60 * n);
		ck_assert_uint_eq(f.floats_down, 60 * n - f.layers[1].len);
		fake_free(&f);
	}
	/* a rule without phases: a gradient a step, the weights with each */
	run_config c = wall("asgd", 1);
	fake f;
	uint64_t local, remote;
	local_and_remote(c, &f, &local, &remote);
	ck_assert_uint_eq(remote, local);
	ck_assert_int_eq(f.grads_up, 120);
	ck_assert_int_eq(f.weights_down + f.models_up, 0);
	fake_free(&f);
}
END_TEST

static Suite *
remote_suite(void)
{
	const run_case cases[] = {
		{"seam", NULL, {remote_computes_as_a_local_worker, the_remote_draws_the_local_views,
				partial_backprop_reaches_the_remote, a_device_server_stages_the_wire,
				a_lost_remote_leaves_the_run,
				refusals, the_ledger_survives_a_checkpoint, NULL}},
		{"phases", NULL, {a_phase_moves_the_model_not_gradients, NULL}},
	};
	return run_suite_of("remote", cases, sizeof(cases) / sizeof(cases[0]));
}

SL_TEST_MAIN(remote_suite)
