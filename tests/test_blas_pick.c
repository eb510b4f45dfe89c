/* test_blas_pick.c - the choice of OpenBLAS kernel at start-up
 * (engine/nn/blas_pick.c), as a table of cases: the library's choice
 * below the CPU's best is replaced, a value in the environment is never
 * overridden (ours, named by the marker, is recognised in a child), a
 * fallback stays one, unknown names are left to the library; and the
 * start-up check of the kernel this process runs passes here. */
#include "backend.h"
#include "blas_pick.h"
#include "sl.h"
#include "testutil.h"

static const blas_cpu avx512 = {1, 1, 1}, avx2 = {0, 1, 1}, avx = {0, 0, 1}, sse = {0, 0, 0};

START_TEST(decisions)
{
	static const struct {
		const char *env, *marker, *lib;
		const blas_cpu *f;
		const char *pick;
		blas_why why;
	} t[] = {
		/* Debian 12's OpenBLAS on a Xeon it does not know */
		{NULL, NULL, "Prescott", &avx512, "SkylakeX", BLAS_LIBRARY},
		{NULL, NULL, "Prescott", &avx2, "Haswell", BLAS_LIBRARY},
		{NULL, NULL, "Nehalem", &avx, "Sandybridge", BLAS_LIBRARY},
		{NULL, NULL, "Haswell", &avx512, "SkylakeX", BLAS_LIBRARY},
		/* the library chose as well as we would, or better, or newer */
		{NULL, NULL, "SkylakeX", &avx512, NULL, BLAS_LIBRARY},
		{NULL, NULL, "Cooperlake", &avx512, NULL, BLAS_LIBRARY},
		{NULL, NULL, "Zen", &avx2, NULL, BLAS_LIBRARY},
		{NULL, NULL, "Haswell", &avx2, NULL, BLAS_LIBRARY},
		{NULL, NULL, "SomeFutureCore", &avx512, NULL, BLAS_LIBRARY},
		{NULL, NULL, NULL, &avx512, NULL, BLAS_LIBRARY},
		{NULL, NULL, "Prescott", &sse, NULL, BLAS_LIBRARY},
		/* set in the environment: respected */
		{"Haswell", NULL, "Haswell", &avx512, NULL, BLAS_ENV},
		{"Prescott", NULL, "Prescott", &avx512, NULL, BLAS_ENV},
		{"Haswell", "SkylakeX", "Haswell", &avx512, NULL, BLAS_ENV},
		/* ours, in the re-executed process and its children */
		{"SkylakeX", "SkylakeX", "SkylakeX", &avx512, NULL, BLAS_PICKED},
		{"skylakex", "SkylakeX", "SkylakeX", &avx512, NULL, BLAS_PICKED},
		/* ours failed the check: the library's own, never picked again */
		{NULL, "fallback", "Prescott", &avx512, NULL, BLAS_FALLBACK},
		{"", NULL, "Prescott", &avx512, "SkylakeX", BLAS_LIBRARY},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		blas_why why = (blas_why)-1;
		const char *pick = blas_decide(t[i].env, t[i].marker, t[i].lib, t[i].f, &why);
		ck_assert_msg(t[i].pick ? pick && !strcmp(pick, t[i].pick) : !pick,
			      "case %zu: picked %s, expected %s", i, pick ? pick : "nothing",
			      t[i].pick ? t[i].pick : "nothing");
		ck_assert_msg(why == t[i].why, "case %zu: why %s, expected %s", i,
			      blas_why_name(why), blas_why_name(t[i].why));
	}
	ck_assert_int_eq(blas_core_rank("skylakex"), 4);
	ck_assert_int_eq(blas_core_rank("HASWELL"), 3);
	ck_assert_int_eq(blas_core_rank("Sandybridge"), 2);
	ck_assert_int_eq(blas_core_rank("Prescott"), 1);
	ck_assert_int_eq(blas_core_rank("Zen5"), 0);
	ck_assert_str_eq(blas_why_name(BLAS_ENV), "environment");
}
END_TEST

START_TEST(the_running_kernel_passes_its_check)
{
	char err[SL_ERR_LEN] = "";
	ck_assert_msg(backend_cpu_blas_check(err) == 0, "%s", err);
	const char *lib = NULL, *why = backend_cpu_blas_why(&lib);
	ck_assert(!strcmp(why, "library") || !strcmp(why, "environment") ||
		  !strcmp(why, "picked") || !strcmp(why, "fallback"));
	ck_assert_ptr_nonnull(lib);
	/* this machine's features give a name the table knows, or none */
	blas_cpu f;
	blas_cpu_now(&f);
	const char *best = blas_best_core(&f);
	ck_assert(!best || blas_core_rank(best) >= 2);
}
END_TEST

static Suite *
blas_pick_suite(void)
{
	Suite *s = suite_create("blas_pick");
	TCase *tc = tcase_create("choice");
	tcase_add_test(tc, decisions);
	tcase_add_test(tc, the_running_kernel_passes_its_check);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(blas_pick_suite)
