/* test_augment_runs.c - whole runs with the batches augmented ("augment":
 * "crop-flip"): a virtual-clock run gives the same records twice, other
 * records than without augmentation, and "auto" is none on synthetic data
 * and crop-flip on CIFAR files (written here, small); the evaluation and
 * batch norm's recomputed statistics never see a view; a checkpoint
 * resumes the views where they were; the coherence check recomputes the
 * gradient on the views the worker trained on; flat data is refused with
 * the field named. (test_augment.c: the views themselves.) */
#include "augment.h"
#include "dataset_util.h"
#include "run_util.h"

static run_config
aug_config(int kind, int workers)
{
	run_config c = base("asgd", workers);
	c.augment = kind;
	c.delay.dist = DELAY_EXP;
	c.delay.mean_ms = 1;
	return c;
}

START_TEST(virtual_runs_repeat_bit_for_bit)
{
	/* 300 batches of 16 of 2400 samples: two epochs, so the views'
	 * epoch key turns over once */
	rec *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b)), *n = calloc(1, sizeof(*n));
	run_config c = aug_config(AUG_CROP_FLIP, 3);
	run_snapshot_put(go(&c, NULL, 0, a));
	run_snapshot_put(go(&c, NULL, 0, b));
	ck_assert_int_ge(a->n, 6);
	ck_assert_msg(same_records(a, b), "two crop-flip runs of one seed differ");
	c.augment = AUG_NONE;
	run_snapshot_put(go(&c, NULL, 0, n));
	ck_assert_msg(!same_records(a, n), "crop-flip trained as none did");
	/* auto on synthetic data is none, bit for bit */
	c.augment = AUG_AUTO;
	memset(b, 0, sizeof(*b));
	run_snapshot_put(go(&c, NULL, 0, b));
	ck_assert_msg(same_records(n, b), "auto on synthetic data is not none");
	/* another seed draws other views: with none both seeds' runs would
	 * differ anyway, so the seed is kept for the data and the model and
	 * only the views' key is compared through the records */
	free(a);
	free(b);
	free(n);
}
END_TEST

START_TEST(evaluation_sees_no_view)
{
	/* lr 1e-30 leaves the weights as they are (every step's change is
	 * below a float's resolution): a run with views and one without
	 * evaluate the same weights, so the test losses agree bit for bit
	 * when the evaluation, and batch norm's statistics recomputed on
	 * training samples before it, read the samples as they are; the
	 * training losses, of views, do not. A small set: resnet:8's
	 * evaluations are the cost (ASan) */
	dataset_pair small;
	char err[SL_ERR_LEN] = "";
	ck_assert_msg(ds_load("synthetic:300", 3, &small, err) == 0, "%s", err);
	rec *got[2];
	for (int k = 0; k < 2; k++) {
		run_config c = aug_config(k ? AUG_NONE : AUG_CROP_FLIP, 2);
		snprintf(c.model, sizeof(c.model), "resnet:8");
		snprintf(c.dataset, sizeof(c.dataset), "synthetic:300");
		c.lr = 1e-30;
		c.stop_steps = 6;
		c.eval_every = 3;
		got[k] = calloc(1, sizeof(rec));
		run_callbacks cb = {.eval = on_eval, .ud = got[k]};
		run *r;
		ck_assert_msg(run_new(&c, &small, NULL, 0, &cb, &r, err) == 0, "%s", err);
		ck_assert_int_eq(run_exec(r), 0);
		run_free(r);
	}
	const rec *a = got[0], *n = got[1];
	ck_assert_int_eq(a->n, n->n);
	ck_assert_int_ge(a->n, 2);
	for (int i = 0; i < a->n; i++) {
		ck_assert_msg(!memcmp(&a->ev[i].test_loss, &n->ev[i].test_loss, sizeof(double)),
			      "v %llu: test loss %a with views, %a without",
			      (unsigned long long)a->ev[i].v, a->ev[i].test_loss, n->ev[i].test_loss);
		ck_assert_msg(a->ev[i].final || a->ev[i].train_loss != n->ev[i].train_loss,
			      "v %llu: the training loss did not see the views",
			      (unsigned long long)a->ev[i].v);
	}
	free(got[0]);
	free(got[1]);
	ds_pair_free(&small);
}
END_TEST

START_TEST(resume_goes_on_with_the_same_views)
{
	/* a checkpoint in the second epoch, three workers with batches in
	 * flight (some taken in the first); the coherence check recomputes
	 * their gradients after the resume, on the views of the epoch each
	 * was taken in */
	run_config c = aug_config(AUG_CROP_FLIP, 3);
	c.stop_steps = 260;
	c.eval_every = 20;
	c.coherence_every = 1;
	ckrec *a;
	resume_matches(&c, 170, &a);
	free(a->buf);
	free(a);
}
END_TEST

START_TEST(coherence_recomputes_on_the_views)
{
	/* one worker, no delay: each gradient is applied at the weights it
	 * was computed on, so the fresh one of the same batch is the same
	 * gradient (cosine 1 but for the order of float sums) only when it
	 * is computed on the same views */
	rec *a = calloc(1, sizeof(*a));
	run_config c = base("asgd", 1);
	c.augment = AUG_CROP_FLIP;
	c.coherence_every = 1;
	c.stop_steps = 40;
	c.eval_every = 20;
	run_snapshot_put(go(&c, NULL, 0, a));
	ck_assert_int_ge(a->n, 2);
	for (int i = 0; i < a->n; i++)
		ck_assert_msg(a->ev[i].final || (a->ev[i].coherence_n > 0 &&
						 a->ev[i].coherence > 0.999999),
			      "v %llu: coherence %.9f of %ld", (unsigned long long)a->ev[i].v,
			      a->ev[i].coherence, a->ev[i].coherence_n);
	free(a);
}
END_TEST

START_TEST(flat_data_is_refused)
{
	/* the same samples as flat vectors (1x1x784): no image to crop */
	dataset_pair flat = data;
	flat.train.h = flat.test.h = 1;
	flat.train.w = flat.test.w = 784;
	run_config c = base("asgd", 1);
	c.augment = AUG_CROP_FLIP;
	run *r = NULL;
	char err[SL_ERR_LEN] = "";
	ck_assert_int_eq(run_new(&c, &flat, NULL, 0, NULL, &r, err), -SL_EINVAL);
	ck_assert_ptr_null(r);
	ASSERT_HAS(err, "augment: crop-flip");
	ASSERT_HAS(err, "1x1x784");
	c.augment = AUG_AUTO; /* none, on synthetic data */
	ck_assert_msg(run_new(&c, &flat, NULL, 0, NULL, &r, err) == 0, "%s", err);
	run_free(r);
}
END_TEST

/* CIFAR-10 files of n records per training batch (and n in the test
 * batch) in dir, with pixels that vary across each image */
static void
write_cifar(const char *dir, int n)
{
	uint8_t *recs = cifar_records(n, 1);
	for (int r = 0; r < n; r++)
		for (int p = 0; p < 3072; p++)
			recs[(size_t)r * 3073 + 1 + p] = (uint8_t)((p * 7 + r * 31 + p / 32 * 13) & 0xff);
	char name[64];
	for (int i = 1; i <= 5; i++) {
		snprintf(name, sizeof(name), "data_batch_%d.bin", i);
		write_in(dir, name, recs, (size_t)n * 3073);
	}
	write_in(dir, "test_batch.bin", recs, (size_t)n * 3073);
	free(recs);
}

START_TEST(auto_is_crop_flip_on_cifar)
{
	char dir[200], spec[256], err[SL_ERR_LEN] = "";
	sl_test_tmpdir(dir, sizeof(dir));
	write_cifar(dir, 12);
	snprintf(spec, sizeof(spec), "cifar10:%s", dir);
	dataset_pair cifar;
	ck_assert_msg(ds_load(spec, 1, &cifar, err) == 0, "%s", err);
	rec *got[3];
	const int kinds[3] = {AUG_AUTO, AUG_CROP_FLIP, AUG_NONE};
	for (int k = 0; k < 3; k++) {
		run_config c = base("asgd", 2);
		snprintf(c.model, sizeof(c.model), "mlp:3072-8-10");
		snprintf(c.dataset, sizeof(c.dataset), "%s", spec);
		c.augment = kinds[k];
		c.stop_steps = 30;
		c.eval_every = 10;
		c.batch = 8;
		run *r;
		got[k] = calloc(1, sizeof(rec));
		run_callbacks cb = {.eval = on_eval, .ud = got[k]};
		ck_assert_msg(run_new(&c, &cifar, NULL, 0, &cb, &r, err) == 0, "%s", err);
		ck_assert_int_eq(run_exec(r), 0);
		run_free(r);
	}
	ck_assert_msg(same_records(got[0], got[1]), "auto on cifar10 is not crop-flip");
	ck_assert_msg(!same_records(got[0], got[2]), "auto on cifar10 trained as none");
	for (int k = 0; k < 3; k++)
		free(got[k]);
	ds_pair_free(&cifar);
	rm_dir(dir);
}
END_TEST

static Suite *
augment_runs_suite(void)
{
	const run_case cases[] = {
		{"determinism", NULL, {virtual_runs_repeat_bit_for_bit, auto_is_crop_flip_on_cifar,
				       NULL}},
		{"untouched", NULL, {evaluation_sees_no_view, flat_data_is_refused, NULL}},
		{"resume", "slow", {resume_goes_on_with_the_same_views,
				    coherence_recomputes_on_the_views, NULL}},
	};
	return run_suite_of("augment_runs", cases, sizeof(cases) / sizeof(cases[0]));
}

SL_TEST_MAIN(augment_runs_suite)
