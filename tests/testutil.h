/* testutil.h - shared helpers for the Check suites: one main per suite
 * binary, a temp-dir helper, whole-file writes and reads. */
#ifndef SL_TESTUTIL_H
#define SL_TESTUTIL_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Each tests/test_<module>.c ends with SL_TEST_MAIN(<module>_suite). */
#define SL_TEST_MAIN(suite_fn)                                              \
	int main(void)                                                      \
	{                                                                   \
		SRunner *sr = srunner_create(suite_fn());                   \
		srunner_run_all(sr, CK_NORMAL);                             \
		int failed = srunner_ntests_failed(sr);                     \
		srunner_free(sr);                                           \
		return failed ? EXIT_FAILURE : EXIT_SUCCESS;                \
	}

/* A fresh directory under $TMPDIR (or /tmp); path written into buf. */
static inline void
sl_test_tmpdir(char *buf, size_t len)
{
	const char *base = getenv("TMPDIR");
	snprintf(buf, len, "%s/sltest.XXXXXX", base ? base : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(buf));
}

static inline void
sl_test_write(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	ck_assert_msg(f != NULL, "cannot create %s", path);
	ck_assert_uint_eq(fwrite(data, 1, len, f), len);
	fclose(f);
}

/* The whole file at path (malloc'd, *len its size); fails the case when
 * it cannot be opened. */
static inline uint8_t *
sl_test_read(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "cannot open %s (run the tests from the repository root)",
		      path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc((size_t)n);
	ck_assert_uint_eq(fread(b, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return b;
}

#endif
