/* test_sweep.c - a sweep file into its cells (daemon/sweep/sweep_grid.c): lists
 * as axes (nested keys too), variants, seeds, names, the limits and the
 * errors naming the key; what differs between two files; the shards. */
#include <jansson.h>
#include <string.h>

#include "sl.h"
#include "sweep.h"
#include "testutil.h"

static json_t *
parse(const char *text)
{
	json_error_t je;
	json_t *j = json_loads(text, 0, &je);
	ck_assert_msg(j != NULL, "%s: %s", text, je.text);
	return j;
}

static void
expand_ok(const char *text, sweep_grid *g)
{
	char err[SL_ERR_LEN] = "";
	json_t *j = parse(text);
	ck_assert_msg(sweep_expand(j, g, err) == 0, "%s: %s", text, err);
	json_decref(j);
}

static void
expand_bad(const char *text, const char *want)
{
	char err[SL_ERR_LEN] = "";
	sweep_grid g;
	json_t *j = parse(text);
	ck_assert_msg(sweep_expand(j, &g, err) < 0, "%s: expanded", text);
	ck_assert_msg(strstr(err, want) != NULL, "%s: '%s' does not say '%s'", text, err, want);
	ck_assert_int_eq(g.n_cells, 0);
	json_decref(j);
}

static long long
geti(const json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

START_TEST(product_in_order)
{
	sweep_grid g;
	expand_ok("{\"model\": \"logreg\", \"rule\": [\"ssgd\", \"asgd\"], \"workers\": [1, 2, 4],"
		  " \"delay\": {\"dist\": \"version\", \"s\": [0, 8]}}", &g);
	ck_assert_int_eq(g.n_cells, 12);
	ck_assert_int_eq(g.n_axes, 3);
	ck_assert_str_eq(g.axis[0].key, "rule");
	ck_assert_str_eq(g.axis[1].key, "workers");
	ck_assert_str_eq(g.axis[2].key, "delay.s");
	/* the last axis turns fastest */
	ck_assert_str_eq(g.cell[0].label, "rule=ssgd,workers=1,delay.s=0");
	ck_assert_str_eq(g.cell[1].label, "rule=ssgd,workers=1,delay.s=8");
	ck_assert_str_eq(g.cell[2].label, "rule=ssgd,workers=2,delay.s=0");
	ck_assert_str_eq(g.cell[11].label, "rule=asgd,workers=4,delay.s=8");
	for (int i = 0; i < g.n_cells; i++)
		ck_assert_int_eq(g.cell[i].index, i);
	/* each cell's run object has one value per axis, the rest as written */
	json_t *r = g.cell[7].run; /* asgd, 1, 8 */
	ck_assert_str_eq(json_string_value(json_object_get(r, "rule")), "asgd");
	ck_assert_int_eq(geti(r, "workers"), 1);
	ck_assert_int_eq(geti(json_object_get(r, "delay"), "s"), 8);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "delay"), "dist")),
			 "version");
	ck_assert_str_eq(json_string_value(json_object_get(r, "model")), "logreg");
	ck_assert_str_eq(g.cell[7].name, "rule=asgd_workers=1_delay.s=8");
	sweep_grid_free(&g);
}
END_TEST

START_TEST(variants_and_seeds)
{
	sweep_grid g;
	/* a variant merges over the rest (nested objects key by key) and may
	 * bring its own lists; seeds multiply every cell */
	expand_ok("{\"lr\": [0.1, 0.2], \"delay\": {\"dist\": \"const\", \"mean_ms\": 5}, \"seeds\": 3,"
		  " \"target\": 0.8,"
		  " \"variants\": {\"plain\": {}, \"momentum\": {\"momentum\": [0.5, 0.9],"
		  " \"delay\": {\"mean_ms\": 7}}}}", &g);
	ck_assert_int_eq(g.n_cells, (2 + 2 * 2) * 3);
	ck_assert_int_eq(g.seeds, 3);
	ck_assert(g.target == 0.8);
	ck_assert_int_eq(g.n_axes, 4);
	ck_assert_str_eq(g.axis[0].key, "variant");
	ck_assert_str_eq(g.axis[1].key, "lr");
	ck_assert_str_eq(g.axis[2].key, "momentum");
	ck_assert_str_eq(g.axis[3].key, "seed");
	ck_assert_str_eq(g.cell[0].label, "variant=plain,lr=0.1,seed=1");
	ck_assert_int_eq(geti(g.cell[2].run, "seed"), 3);
	ck_assert_str_eq(g.cell[6].label, "variant=momentum,lr=0.1,momentum=0.5,seed=1");
	json_t *d = json_object_get(g.cell[6].run, "delay");
	ck_assert_str_eq(json_string_value(json_object_get(d, "dist")), "const");
	ck_assert_int_eq(geti(d, "mean_ms"), 7);
	/* the sweep's own keys are not in the run objects */
	ck_assert_ptr_null(json_object_get(g.cell[0].run, "seeds"));
	ck_assert_ptr_null(json_object_get(g.cell[0].run, "variants"));
	ck_assert_ptr_null(json_object_get(g.cell[0].run, "target"));
	/* a plain cell has no momentum axis value */
	ck_assert_ptr_null(json_object_get(g.cell[0].axes, "momentum"));
	sweep_grid_free(&g);
	/* no list: one cell */
	expand_ok("{\"rule\": \"asgd\"}", &g);
	ck_assert_int_eq(g.n_cells, 1);
	ck_assert_int_eq(g.n_axes, 0);
	ck_assert_str_eq(g.cell[0].name, "base");
	sweep_grid_free(&g);
}
END_TEST

START_TEST(lists_that_are_values)
{
	sweep_grid g;
	/* a schedule is a list by nature; objects may be an axis's values */
	expand_ok("{\"schedule\": [{\"at\": {\"v\": 10}, \"set\": {\"lr\": 0.1}}],"
		  " \"delay\": [{\"dist\": \"const\", \"mean_ms\": 1}, {\"dist\": \"exp\", \"mean_ms\": 2}]}", &g);
	ck_assert_int_eq(g.n_cells, 2);
	ck_assert_int_eq(g.n_axes, 1);
	ck_assert_str_eq(g.axis[0].key, "delay");
	ck_assert_uint_eq(json_array_size(json_object_get(g.cell[1].run, "schedule")), 1);
	ck_assert_str_eq(g.cell[1].label, "delay={\"dist\":\"exp\",\"mean_ms\":2}");
	/* '{', '"', ':' are not safe in a file name: replaced, and a hash of
	 * the label keeps the names apart */
	ck_assert_ptr_null(strpbrk(g.cell[1].name, "{}\":/ "));
	ck_assert_str_ne(g.cell[0].name, g.cell[1].name);
	sweep_grid_free(&g);
}
END_TEST

START_TEST(errors_name_the_key)
{
	expand_bad("{\"workers\": []}", "workers: an empty list");
	expand_bad("{\"delay\": {\"s\": []}}", "delay.s: an empty list");
	expand_bad("{\"workers\": [[1, 2]]}", "workers[0]: a list inside a list");
	expand_bad("{\"delay\": [{\"mean_ms\": [1, 2]}]}", "delay[0].mean_ms: a list inside a list");
	expand_bad("{\"seeds\": 0}", "seeds: expected a count");
	expand_bad("{\"seeds\": [1, 2]}", "seeds: expected a count");
	expand_bad("{\"seeds\": 2, \"seed\": [1, 2]}", "seed: a list beside \"seeds\"");
	expand_bad("{\"target\": 1.5}", "target: expected a test accuracy");
	expand_bad("{\"variants\": {}}", "variants: expected an object");
	expand_bad("{\"variants\": {\"a\": 3}}", "variants.a: expected a partial run object");
	expand_bad("[1, 2]", "a sweep file is a JSON object");
	/* found by tests/fuzz/sweep_fuzz.c: a variant's "seeds" went into its
	 * cells' run objects */
	expand_bad("{\"variants\": {\"m\": {\"seeds\": 4}}}",
		   "variants.m.seeds: the sweep's own keys (seeds, variants, target) go at the top");
	/* the size is checked before anything is built, and says where it
	 * comes from */
	expand_bad("{\"a\": [1,2,3,4,5,6,7,8,9,10,11], \"b\": [1,2,3,4,5,6,7,8,9,10],"
		   " \"c\": [1,2,3,4,5,6,7,8,9,10], \"d\": [1,2,3,4,5,6,7,8,9,10],"
		   " \"e\": [1,2,3,4,5,6,7,8,9,10]}",
		   "the grid has 110000 cells (a 11 x b 10 x c 10 x d 10 x e 10): more than 100000");
	/* two names the same once made safe for a file: apart by the hash */
	sweep_grid g;
	expand_ok("{\"variants\": {\"a b\": {\"lr\": 0.1}, \"a_b\": {\"lr\": 0.2}}}", &g);
	ck_assert_int_eq(g.n_cells, 2);
	ck_assert_str_eq(g.cell[1].name, "variant=a_b");
	ck_assert_str_ne(g.cell[0].name, g.cell[1].name);
	sweep_grid_free(&g);
}
END_TEST

START_TEST(names_and_shards)
{
	char n[SWEEP_NAME_MAX];
	sweep_cell_name("rule=asgd,workers=4", n, sizeof(n));
	ck_assert_str_eq(n, "rule=asgd_workers=4");
	/* long: cut, with the hash of the whole label; two long labels that
	 * share their start differ */
	char a[400], b[400], na[SWEEP_NAME_MAX], nb[SWEEP_NAME_MAX];
	memset(a, 'x', sizeof(a));
	a[sizeof(a) - 1] = 0;
	memcpy(b, a, sizeof(a));
	b[sizeof(b) - 2] = 'y';
	sweep_cell_name(a, na, sizeof(na));
	sweep_cell_name(b, nb, sizeof(nb));
	ck_assert_uint_lt(strlen(na), sizeof(na));
	ck_assert_str_ne(na, nb);
	ck_assert_int_eq(strncmp(na, nb, 60), 0);
	/* shards: every cell in exactly one */
	for (int i = 0; i < 50; i++) {
		int k = 0;
		for (int s = 0; s < 7; s++)
			k += sweep_in_shard(i, s, 7);
		ck_assert_int_eq(k, 1);
		ck_assert(sweep_in_shard(i, 0, 1));
	}
	ck_assert(sweep_in_shard(9, 2, 7));
	ck_assert(!sweep_in_shard(9, 3, 7));
}
END_TEST

START_TEST(what_differs)
{
	char out[256];
	json_t *a = parse("{\"rule\": [\"ssgd\"], \"delay\": {\"s\": [0, 1], \"dist\": \"version\"}, \"lr\": 0.1}");
	json_t *b = parse("{\"rule\": [\"ssgd\"], \"delay\": {\"s\": [0, 2], \"dist\": \"version\"}, \"seeds\": 2}");
	ck_assert_int_eq(sweep_diff(a, b, out, sizeof(out)), 3);
	ck_assert_str_eq(out, "delay.s, lr, seeds");
	ck_assert_int_eq(sweep_diff(a, a, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "");
	json_decref(a);
	json_decref(b);
}
END_TEST

static Suite *
sweep_suite(void)
{
	Suite *s = suite_create("sweep");
	TCase *tc = tcase_create("grid");
	tcase_add_test(tc, product_in_order);
	tcase_add_test(tc, variants_and_seeds);
	tcase_add_test(tc, lists_that_are_values);
	tcase_add_test(tc, errors_name_the_key);
	tcase_add_test(tc, names_and_shards);
	tcase_add_test(tc, what_differs);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(sweep_suite)
