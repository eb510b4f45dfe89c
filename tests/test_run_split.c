/* test_run_split.c - a run under a data split ("data_split"): each
 * worker's sampler over one epoch of its part draws exactly its part, the
 * split made again when the worker count changes (deterministic, told to
 * the split callback), the stop limit counted over every worker, and a
 * resumed run going on bit for bit, before and after a change of the
 * worker count. The sampler is reached through run_impl.h (white box). */
#include "run_impl.h"
#include "run_util.h"

typedef struct told {
	int n;
	uint64_t splits[8];
	int parts[8];
} told;

static void
on_split(void *ud, double t, uint64_t v, const run_split *s)
{
	(void)t;
	(void)v;
	told *k = ud;
	if (k->n < 8) {
		k->splits[k->n] = s->splits;
		k->parts[k->n++] = s->n_parts;
	}
}

static run *
made(const char *split, int workers, told *k)
{
	run_config c = base("asgd", workers);
	snprintf(c.data_split, sizeof(c.data_split), "%s", split);
	run_callbacks cb = {.split = on_split, .ud = k};
	run *r;
	char err[SL_ERR_LEN] = "";
	ck_assert_msg(run_new(&c, &data, NULL, 0, &cb, &r, err) == 0, "%s", err);
	return r;
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* one epoch of worker j's part, in batches of 16 (the last one short):
 * sorted, the part itself; the next batch is of its second epoch */
static void
one_epoch(run *r, int j)
{
	worker w = {.rw = {.id = j}};
	uint32_t m = r->part_off[j + 1] - r->part_off[j], got = 0, idx[16];
	uint32_t *seen = malloc(sizeof(uint32_t) * m);
	int n;
	while (got < m) {
		n = split_take(r, &w, 16, idx);
		ck_assert_int_eq(n, (int)SL_MIN(16u, m - got));
		ck_assert_uint_eq(w.sp_epochs, 1);
		memcpy(seen + got, idx, sizeof(uint32_t) * (size_t)n);
		got += (uint32_t)n;
	}
	qsort(seen, m, sizeof(uint32_t), cmp_u32);
	ck_assert_mem_eq(seen, r->part + r->part_off[j], sizeof(uint32_t) * m);
	ck_assert_int_eq(split_take(r, &w, 16, idx), 16);
	ck_assert_uint_eq(w.sp_epochs, 2);
	free(seen);
	free(w.sp_perm);
}

START_TEST(epoch_is_the_part)
{
	static const char *const splits[] = {"dirichlet:0.3", "shards:2", "contiguous"};
	for (int s = 0; s < 3; s++) {
		told k = {0};
		run *r = made(splits[s], 3, &k);
		ck_assert_int_eq(r->split_n, 3);
		ck_assert_uint_eq(r->part_off[3], data.train.n);
		for (int j = 0; j < 3; j++)
			one_epoch(r, j);
		run_free(r);
	}
}
END_TEST

/* 3 workers, then 2, then 3: a new split each time, split number 2 and 3
 * (the streams of splits 1 and 2, so the third differs from the first),
 * every worker's sampler restarting; the same again from the same seed */
START_TEST(resplit)
{
	uint32_t *first = malloc(sizeof(uint32_t) * data.train.n);
	uint32_t *third = malloc(sizeof(uint32_t) * data.train.n);
	for (int pass = 0; pass < 2; pass++) {
		told k = {0};
		run *r = made("dirichlet:0.5", 3, &k);
		ck_assert_uint_eq(r->split_gen, 1);
		if (!pass)
			memcpy(first, r->part, sizeof(uint32_t) * data.train.n);
		ck_assert_mem_eq(first, r->part, sizeof(uint32_t) * data.train.n);
		run_lock(r);
		ck_assert_int_eq(k.n, 0);
		split_run_refresh(r); /* as the run starts: the first split told */
		ck_assert_int_eq(k.n, 1);
		r->cfg.workers = 2;
		split_run_refresh(r);
		ck_assert_int_eq(r->split_n, 2);
		split_run_refresh(r); /* the same count: nothing */
		r->cfg.workers = 3;
		split_run_refresh(r);
		run_unlock(r);
		ck_assert_uint_eq(r->split_gen, 3);
		ck_assert_int_eq(k.n, 3);
		ck_assert(k.splits[0] == 1 && k.splits[1] == 2 && k.splits[2] == 3);
		ck_assert(k.parts[0] == 3 && k.parts[1] == 2 && k.parts[2] == 3);
		if (!pass) {
			memcpy(third, r->part, sizeof(uint32_t) * data.train.n);
			ck_assert(memcmp(first, third, sizeof(uint32_t) * data.train.n));
		}
		ck_assert_mem_eq(third, r->part, sizeof(uint32_t) * data.train.n);
		for (int j = 0; j < 3; j++)
			one_epoch(r, j);
		run_free(r);
	}
	free(first);
	free(third);
}
END_TEST

/* a worker count the split cannot take is refused naming data_split:
 * shards:100 over 30 workers needs 3000 samples, the set has 2400 */
START_TEST(count_refused)
{
	told k = {0};
	run *r = made("shards:100", 3, &k);
	char err[SL_ERR_LEN] = "";
	run_cmd c = {.worker = -1, .fields = CMD_WORKERS, .workers = 30};
	ck_assert_int_eq(run_command(r, &c, err), -SL_EINVAL);
	ck_assert_msg(strstr(err, "data_split: 30 workers need 3000 training samples"), "%s", err);
	c.workers = 24;
	ck_assert_msg(run_command(r, &c, err) == 0, "%s", err);
	run_free(r);
}
END_TEST

/* the stop's epochs count every worker's samples: one epoch is the set's
 * size, whatever the parts' sizes; each worker's part in /status */
START_TEST(stop_counts_all)
{
	run_config c = base("asgd", 3);
	snprintf(c.data_split, sizeof(c.data_split), "dirichlet:0.1");
	c.stop_steps = 0;
	c.stop_epochs = 1;
	rec rr = {0};
	run_snapshot *s = go(&c, NULL, 0, &rr);
	ck_assert_uint_eq(s->samples, data.train.n);
	ck_assert_int_eq(s->n_workers, 3);
	ck_assert_int_eq(s->n_classes, 10);
	uint32_t parts = 0;
	for (int i = 0; i < 3; i++) {
		uint32_t sum = 0;
		for (int k = 0; k < 10; k++)
			sum += s->classes[i * 10 + k];
		ck_assert_uint_eq(sum, s->workers[i].part);
		parts += s->workers[i].part;
	}
	ck_assert_uint_eq(parts, data.train.n);
	run_snapshot_put(s);
}
END_TEST

/* a resumed non-iid run goes on bit for bit: a checkpoint in the first
 * split, and one after the worker count went from 3 to 2 */
START_TEST(resume_exact)
{
	run_config c = base("asgd", 3);
	snprintf(c.data_split, sizeof(c.data_split), "dirichlet:0.5");
	ckrec *a;
	resume_matches(&c, 70, &a);
	free(a->buf);
	free(a);
	run_sched shrink = {.by_version = 1, .v = 40,
			    .cmd = {.worker = -1, .fields = CMD_WORKERS, .workers = 2}};
	snprintf(c.data_split, sizeof(c.data_split), "shards:3");
	resume_matches_after(&c, &shrink, 1, 110, &a);
	free(a->buf);
	free(a);
}
END_TEST

static Suite *
run_split_suite(void)
{
	const run_case cases[] = {
		{"sampler", NULL, {epoch_is_the_part, resplit, count_refused, NULL}},
		{"runs", "slow", {stop_counts_all, resume_exact, NULL}},
	};
	return run_suite_of("run_split", cases, sizeof(cases) / sizeof(cases[0]));
}

SL_TEST_MAIN(run_split_suite)
