/* test_ckpt.c - checkpoints, on the file written by format 2 (committed
 * under tests/fixtures/ckpt/): it loads and finishes its run where the
 * uninterrupted run did; loading then saving gives the same fields;
 * missing or mistyped fields are refused with a message naming what is
 * wrong; unknown fields are skipped and optional ones defaulted.
 * test_ckpt_files.c: cut and damaged files, resumes, live checkpoints, the
 * files on disk. */
#include "run.h"
#include "sl.h"
#include "runrec.h"
#include "testutil.h"
#include "tlv.h"

#define FIXTURE "tests/fixtures/ckpt/v2-dcasgd.ckpt"

/* a run restored from buf (with its own data set); NULL and err on a
 * refused file */
typedef struct loaded {
	run *r;
	dataset_pair data;
	int have_data;
} loaded;

static int
load(const uint8_t *buf, size_t len, rec *out, loaded *l, char *err)
{
	memset(l, 0, sizeof(*l));
	run_config cfg;
	int rc = run_checkpoint_config(buf, len, &cfg, err);
	if (rc < 0)
		return rc;
	ck_assert_msg(ds_load(cfg.dataset, cfg.seed, &l->data, err) == 0, "%s", err);
	l->have_data = 1;
	run_callbacks cb = {.eval = on_eval, .change = on_change, .ud = out};
	ck_assert_msg(run_new(&cfg, &l->data, NULL, 0, &cb, &l->r, err) == 0, "%s", err);
	rc = run_restore(l->r, buf, len, err);
	return rc;
}

static void
unload(loaded *l)
{
	run_free(l->r);
	if (l->have_data)
		ds_pair_free(&l->data);
}

/* ---- the fixture --------------------------------------------------------- */

/* The uninterrupted run (tests/fixtures/ckpt/v2-dcasgd.json: dcasgd, a
 * run-wide version delay, worker 1 held at the server, worker 2 paused
 * until v 90, lr changed at v 110, stop at v 150; the reference backend,
 * so the figures are the same bit for bit on any x86-64 machine) recorded
 * these after its checkpoint at v 60. */
static const struct {
	uint64_t v, samples;
	double t, test_loss, train_loss;
} expect[] = {
	{76, 600, 0x1.b12173e3bf91ep-12, 0x1.2743a9a1d6fcdp+1, 0x1.2b7d9053f3b7cp+1},
	{90, 712, 0x1.fc32dab78adfcp-12, 0x1.28533ebb191fcp+1, 0x1.2764364f89c7bp+1},
	{114, 900, 0x1.28feccb0399c6p-11, 0x1.2701e1b83dd01p+1, 0x1.2cb28f6cb8d9bp+1},
	{120, 948, 0x1.33b8248556a78p-11, 0x1.26fd598338958p+1, 0x1.27a997d333c2dp+1},
	{150, 1188, 0x1.6956dbaee7df2p-11, 0x1.26f5b0d529a42p+1, 0x1.26bfa1bd4f461p+1},
};

START_TEST(fixture_loads_and_finishes)
{
	size_t len;
	uint8_t *buf = sl_test_read(FIXTURE, &len);
	char err[SL_ERR_LEN] = "";
	ck_assert_msg(run_checkpoint_check(buf, len, 0, err) == 0, "%s", err);
	uint64_t v;
	ck_assert_int_eq(run_checkpoint_version(buf, len, &v, err), 0);
	ck_assert_uint_eq(v, 60);

	rec *rc = calloc(1, sizeof(*rc));
	loaded l;
	ck_assert_msg(load(buf, len, rc, &l, err) == 0, "%s", err);
	run_snapshot *s = run_snapshot_get(l.r);
	ck_assert_str_eq(s->cfg.rule, "dcasgd");
	ck_assert_uint_eq(s->v, 60);
	ck_assert_int_eq(s->n_workers, 3);
	ck_assert_str_eq(s->workers[2].state, "paused");
	ck_assert_uint_eq(s->workers[1].delay.at_server, 1);
	run_snapshot_put(s);
	ck_assert_int_eq(run_exec(l.r), 0);
	s = run_snapshot_get(l.r);
	ck_assert_str_eq(s->stop_reason, "steps");
	run_snapshot_put(s);
	unload(&l);

	/* the rest of the schedule came back with it */
	ck_assert_int_eq(rc->n_change, 2);
	ck_assert_uint_eq(rc->change_v[0], 90);
	ck_assert_uint_eq(rc->change_fields[0], CMD_PAUSED);
	ck_assert_uint_eq(rc->change_v[1], 110);
	ck_assert_uint_eq(rc->change_fields[1], CMD_LR);
	/* every record after the checkpoint is the uninterrupted run's */
	int n = (int)(sizeof(expect) / sizeof(expect[0]));
	ck_assert_int_eq(rc->n, n + 1); /* and the final record */
	for (int i = 0; i < n; i++) {
		const run_eval *e = &rc->ev[i];
		ck_assert_msg(e->v == expect[i].v && e->samples == expect[i].samples &&
				      e->t == expect[i].t,
			      "record %d: v %llu samples %llu t %a", i, (unsigned long long)e->v,
			      (unsigned long long)e->samples, e->t);
		ck_assert_msg(e->test_loss == expect[i].test_loss &&
				      e->train_loss == expect[i].train_loss,
			      "record %d (v %llu): test_loss %a train_loss %a", i,
			      (unsigned long long)e->v, e->test_loss, e->train_loss);
	}
	const run_eval *end = &rc->ev[n];
	ck_assert(end->final);
	ck_assert_uint_eq(end->v, 150);
	ck_assert_uint_eq(end->samples, 1188);
	ck_assert_uint_eq(end->stale.n, 150);
	ck_assert_uint_eq(end->stale.max, 18);
	ck_assert_double_eq(end->stale.sum, 1031);
	ck_assert_uint_eq(end->stale.b[3], 19);
	free(rc);
	free(buf);
}
END_TEST

/* ---- rewriting a file with one change (the fields stay tagged) ----------- */

enum { E_NONE, E_DROP, E_RETYPE, E_SHORTEN, E_STRING, E_ADD_AFTER };

typedef struct edit {
	const char *path;
	int op;
	const char *str; /* E_STRING: the new value; E_ADD_AFTER: unused */
	int type;        /* E_RETYPE, E_ADD_AFTER: the type */
	int hits;
} edit;

static void
path_of(char *out, const char *parent, int in_list, int item, const tlv_rec *r)
{
	if (in_list)
		snprintf(out, TLV_PATH, "%s[%d]", parent, item);
	else if (*parent)
		snprintf(out, TLV_PATH, "%s.%.*s", parent, (int)r->name_len, r->name);
	else
		snprintf(out, TLV_PATH, "%.*s", (int)r->name_len, r->name);
}

static void
raw(tlv_w *w, const char *name, int type, const void *v, size_t len)
{
	void *p = tlv_reserve(w, name, type, len);
	if (len)
		memcpy(p, v, len);
}

static void
copy_tree(tlv_w *w, const tlv_sec *s, int in_list, edit *e)
{
	size_t off = 0;
	int item = 0;
	tlv_rec r;
	while (tlv_next(s, &off, &r)) {
		char path[TLV_PATH], name[256];
		path_of(path, s->path, in_list, item++, &r);
		snprintf(name, sizeof(name), "%.*s", (int)r.name_len, r.name);
		int hit = e && !strcmp(path, e->path);
		e->hits += hit;
		if (hit && e->op == E_DROP)
			continue;
		int type = hit && e->op == E_RETYPE ? e->type : r.type;
		if (hit && e->op == E_STRING) {
			tlv_str(w, name, e->str);
		} else if (r.type == TLV_SEC || r.type == TLV_LIST) {
			tlv_sec sub = {r.v, r.len, ""};
			snprintf(sub.path, sizeof(sub.path), "%s", path);
			tlv_open(w, name, type);
			copy_tree(w, &sub, r.type == TLV_LIST, e);
			tlv_close(w);
		} else {
			raw(w, name, type, r.v, hit && e->op == E_SHORTEN ? r.len - 4 : r.len);
		}
		if (hit && e->op == E_ADD_AFTER) {
			uint64_t x = 7;
			raw(w, "from_the_future", e->type, &x, sizeof(x));
		}
	}
}

/* buf rewritten with edit e; *len the new length */
static uint8_t *
rewrite(const uint8_t *buf, size_t len, edit *e, size_t *out_len)
{
	tlv_sec root;
	char err[SL_ERR_LEN];
	ck_assert_msg(tlv_read(buf, len, 2, 0, &root, NULL, err) == 0, "%s", err);
	blob b = {0};
	tlv_w w;
	uint32_t fmt, minr;
	memcpy(&fmt, buf + 8, 4);
	memcpy(&minr, buf + 12, 4);
	tlv_begin(&w, &b, fmt, minr);
	copy_tree(&w, &root, 0, e);
	tlv_end(&w);
	ck_assert(!b.oom);
	ck_assert_msg(e->op == E_NONE || e->hits == 1, "%s: %d hits", e->path, e->hits);
	*out_len = b.n;
	return b.p;
}

/* the optional fields written since the fixture was: the communication
 * model's (a link, the server's time, the bytes pulled), the optimiser's,
 * the augmentation's (the run object's, a batch's epoch), diloco's rule
 * parameters, a worker's step_ms, the data split's (the run object's, the split
 * made, each worker's place in its part), streaming-diloco's (its rule
 * parameters, a worker's fragment in flight and its link's), demo's rule
 * parameters */
static int
added_field(const tlv_rec *y)
{
	static const char *const names[] = {"link", "server_ms", "server_free", "bytes_recv",
					    "comm_s", "pull_bytes", "push_bytes", "reply",
					    "has_link", "coherence_every", "coh_sum", "coh_n", "coh_all",
					    "coh_all_n", "coherence", "coherence_n", "coherence_all",
					    "coherence_all_n", "remote_slot", "optimizer", "clip",
					    "augment", "batch_epoch", "outer_lr", "outer_momentum", "dn_period",
					    "weighting", "dylu", "local_h", "outer_opt", "step_ms",
					    "has_step_ms", "inner_reset", "compress", "compress_ratio",
					    "ef", "data_split", "split_n", "split_gen", "part_n", "part_pos",
					    "part_epochs", "fragments", "overlap", "mix", "frag",
					    "frag_left", "xfer_end", "sparta_p", "demo_decay",
					    "demo_topk", "demo_chunk", "grace_ms", "window_t0", NULL};
	for (int i = 0; names[i]; i++)
		if (y->name_len == strlen(names[i]) && !memcmp(y->name, names[i], y->name_len))
			return 1;
	return 0;
}

/* the first path where two files' fields differ (skip: paths to ignore;
 * fields only b has that added_field names are passed over) */
static int
tree_diff(const tlv_sec *a, const tlv_sec *b, int in_list, const char *const *skip,
	  char *where)
{
	size_t oa = 0, ob = 0;
	int item = 0;
	tlv_rec x, y;
	for (;;) {
		int ha = tlv_next(a, &oa, &x), hb = tlv_next(b, &ob, &y);
		/* a field this writer adds that the older file lacks (an
		 * optional one: the file loads without it) */
		while (hb && (!ha || x.name_len != y.name_len || memcmp(x.name, y.name, x.name_len)) &&
		       added_field(&y))
			hb = tlv_next(b, &ob, &y);
		if (!ha || !hb) {
			if (ha != hb)
				snprintf(where, TLV_PATH, "%.100s (one has more fields)", a->path);
			return ha != hb;
		}
		char path[TLV_PATH];
		path_of(path, a->path, in_list, item++, &x);
		int skipped = 0;
		for (int i = 0; skip[i]; i++)
			skipped |= !strcmp(path, skip[i]);
		int nested = x.type == TLV_SEC || x.type == TLV_LIST; /* compared inside */
		if (x.name_len != y.name_len || memcmp(x.name, y.name, x.name_len) ||
		    x.type != y.type || (!nested && x.len != y.len)) {
			snprintf(where, TLV_PATH, "%s", path);
			return 1;
		}
		if (skipped)
			continue;
		if (x.type == TLV_SEC || x.type == TLV_LIST) {
			tlv_sec sa = {x.v, x.len, ""}, sb = {y.v, y.len, ""};
			snprintf(sa.path, sizeof(sa.path), "%s", path);
			if (tree_diff(&sa, &sb, x.type == TLV_LIST, skip, where))
				return 1;
		} else if (memcmp(x.v, y.v, x.len)) {
			snprintf(where, TLV_PATH, "%s", path);
			return 1;
		}
	}
}

START_TEST(fixture_round_trips)
{
	/* load then save at once: every field comes back the same (the wall
	 * time and the writer's version excepted) */
	size_t len, len2;
	uint8_t *buf = sl_test_read(FIXTURE, &len), *buf2;
	char err[SL_ERR_LEN] = "", where[TLV_PATH] = "";
	rec *rc = calloc(1, sizeof(*rc));
	loaded l;
	ck_assert_msg(load(buf, len, rc, &l, err) == 0, "%s", err);
	ck_assert_msg(run_checkpoint(l.r, &buf2, &len2, err) == 0, "%s", err);
	unload(&l);
	tlv_sec a, b;
	ck_assert_int_eq(tlv_read(buf, len, 2, 0, &a, NULL, err), 0);
	ck_assert_int_eq(tlv_read(buf2, len2, 2, 0, &b, NULL, err), 0);
	static const char *const skip[] = {"meta.writer", "run.wall_s", NULL};
	ck_assert_msg(!tree_diff(&a, &b, 0, skip, where), "differs at %s", where);
	/* and the comparison sees a change */
	edit e = {.path = "workers[1].seq", .op = E_RETYPE, .type = TLV_I64};
	size_t len3;
	uint8_t *buf3 = rewrite(buf, len, &e, &len3);
	tlv_sec c;
	ck_assert_int_eq(tlv_read(buf3, len3, 2, 0, &c, NULL, err), 0);
	ck_assert(tree_diff(&a, &c, 0, skip, where));
	ck_assert_str_eq(where, "workers[1].seq");
	free(buf);
	free(buf2);
	free(buf3);
	free(rc);
}
END_TEST

/* ---- refused files ------------------------------------------------------ */

/* check buf after edit e: -SL_EFORMAT with `want` in the message */
static void
refused(const uint8_t *buf, size_t len, edit e, const char *want)
{
	size_t n;
	char err[SL_ERR_LEN] = "";
	uint8_t *b = rewrite(buf, len, &e, &n);
	ck_assert_int_eq(run_checkpoint_check(b, n, 0, err), -SL_EFORMAT);
	ck_assert_msg(strstr(err, want) != NULL, "%s: got \"%s\", expected \"%s\"", e.path,
		      err, want);
	free(b);
}

START_TEST(bad_fields_are_named)
{
	size_t len;
	uint8_t *buf = sl_test_read(FIXTURE, &len);
	refused(buf, len, (edit){.path = "workers[2].rng", .op = E_DROP},
		"checkpoint: missing \"workers[2].rng\"");
	refused(buf, len, (edit){.path = "server.weights", .op = E_DROP},
		"checkpoint: missing \"server.weights\"");
	refused(buf, len, (edit){.path = "config.model", .op = E_DROP},
		"checkpoint: missing \"config.model\"");
	refused(buf, len, (edit){.path = "held[0].grad", .op = E_DROP},
		"checkpoint: missing \"held[0].grad\"");
	refused(buf, len, (edit){.path = "run.samples", .op = E_RETYPE, .type = TLV_F64},
		"\"run.samples\" has type f64, expected u64");
	refused(buf, len, (edit){.path = "server.weights", .op = E_SHORTEN},
		"\"server.weights\" has 3189 elements, expected 3190");
	refused(buf, len, (edit){.path = "run.perm", .op = E_SHORTEN},
		"\"run.perm\" has 299 elements, expected 300");
	refused(buf, len, (edit){.path = "workers[0].state", .op = E_STRING, .str = "flying"},
		"\"workers[0].state\" = \"flying\" is unknown");
	refused(buf, len, (edit){.path = "run.rule", .op = E_STRING, .str = "adam"},
		"\"run.rule\" = \"adam\" is unknown");
	refused(buf, len, (edit){.path = "config.rule", .op = E_STRING, .str = "adam"},
		"checkpoint: config: rule");
	refused(buf, len,
		(edit){.path = "schedule[0].change.fields", .op = E_STRING, .str = "lr,teleport"},
		"\"schedule[0].change.fields\" names an unknown \"teleport\"");
	refused(buf, len, (edit){.path = "workers[1].id", .op = E_RETYPE, .type = TLV_U64},
		"\"workers[1].id\" has type u64, expected i64");
	refused(buf, len, (edit){.path = "events", .op = E_RETYPE, .type = TLV_SEC},
		"\"events\" has type section, expected list");
	free(buf);
}
END_TEST


START_TEST(unknown_fields_are_skipped)
{
	/* what a newer writer adds (a field, a record of a type this reader
	 * does not know, a newer format number that keeps the oldest reader
	 * at 2) loads, and loading then saving drops only that */
	size_t len, n;
	uint8_t *buf = sl_test_read(FIXTURE, &len);
	edit adds[] = {{.path = "workers[0].seq", .op = E_ADD_AFTER, .type = TLV_U64},
		       {.path = "meta", .op = E_ADD_AFTER, .type = 42},
		       {.path = "server.v", .op = E_ADD_AFTER, .type = TLV_F32S}};
	char err[SL_ERR_LEN] = "", where[TLV_PATH];
	for (size_t i = 0; i < sizeof(adds) / sizeof(adds[0]); i++) {
		uint8_t *b = rewrite(buf, len, &adds[i], &n);
		uint32_t fmt = 3;
		memcpy(b + 8, &fmt, 4); /* checksum covers the body only */
		ck_assert_uint_gt(n, len);
		rec *rc = calloc(1, sizeof(*rc));
		loaded l;
		ck_assert_msg(load(b, n, rc, &l, err) == 0, "%s: %s", adds[i].path, err);
		uint8_t *b2;
		size_t n2;
		ck_assert_msg(run_checkpoint(l.r, &b2, &n2, err) == 0, "%s", err);
		unload(&l);
		tlv_sec x, y;
		ck_assert_int_eq(tlv_read(buf, len, 2, 0, &x, NULL, err), 0);
		ck_assert_int_eq(tlv_read(b2, n2, 2, 0, &y, NULL, err), 0);
		static const char *const skip[] = {"meta.writer", "run.wall_s", NULL};
		ck_assert_msg(!tree_diff(&x, &y, 0, skip, where), "%s: differs at %s",
			      adds[i].path, where);
		free(b2);
		free(b);
		free(rc);
	}
	free(buf);
}
END_TEST

START_TEST(optional_fields_default)
{
	size_t len, n;
	uint8_t *buf = sl_test_read(FIXTURE, &len);
	char err[SL_ERR_LEN] = "";
	rec *rc = calloc(1, sizeof(*rc));
	loaded l;
	/* as written: worker 1 has sent bytes, the series has records */
	ck_assert_msg(load(buf, len, rc, &l, err) == 0, "%s", err);
	run_snapshot *s = run_snapshot_get(l.r);
	ck_assert(s->workers[1].bytes_sent > 0);
	run_snapshot_put(s);
	run_eval ev[8];
	ck_assert_int_gt(run_series(l.r, 0, ev, 8), 0);
	unload(&l);

	edit e = {.path = "workers[1].bytes_sent", .op = E_DROP};
	uint8_t *b = rewrite(buf, len, &e, &n);
	ck_assert_msg(load(b, n, rc, &l, err) == 0, "%s", err);
	s = run_snapshot_get(l.r);
	ck_assert(s->workers[1].bytes_sent == 0);
	ck_assert(s->workers[0].bytes_sent > 0);
	run_snapshot_put(s);
	unload(&l);
	free(b);

	edit e2 = {.path = "series", .op = E_DROP};
	b = rewrite(buf, len, &e2, &n);
	ck_assert_msg(load(b, n, rc, &l, err) == 0, "%s", err);
	ck_assert_int_eq(run_series(l.r, 0, ev, 8), 0);
	unload(&l);
	free(b);

	/* a required one is not defaulted */
	edit e3 = {.path = "workers", .op = E_DROP};
	b = rewrite(buf, len, &e3, &n);
	ck_assert_int_eq(load(b, n, rc, &l, err), -SL_EFORMAT);
	ck_assert_str_eq(err, "checkpoint: missing \"workers\"");
	s = run_snapshot_get(l.r);
	ck_assert_uint_eq(s->v, 0); /* a refused file leaves the run untouched */
	ck_assert_int_eq(s->n_workers, 0);
	run_snapshot_put(s);
	unload(&l);
	free(b);
	free(rc);
	free(buf);
}
END_TEST

static Suite *
ckpt_suite(void)
{
	Suite *s = suite_create("ckpt");
	TCase *tc = tcase_create("fixture");
	tcase_set_timeout(tc, 60);
	/* whole runs on the reference backend: tens of minutes under memcheck
	 * at -O0 (make valgrind leaves "slow" out; make test and make asan
	 * run them) */
	tcase_set_tags(tc, "slow");
	tcase_add_test(tc, fixture_loads_and_finishes);
	tcase_add_test(tc, fixture_round_trips);
	tcase_add_test(tc, unknown_fields_are_skipped);
	tcase_add_test(tc, optional_fields_default);
	suite_add_tcase(s, tc);
	tc = tcase_create("refused");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, bad_fields_are_named);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(ckpt_suite)
