/* gpt_util.h - what the transformer's tests (test_gpt_ops.c, test_gpt.c)
 * share: a backend by name, zeroed arrays, the normalised error of one
 * array against another. */
#ifndef SL_TEST_GPT_UTIL_H
#define SL_TEST_GPT_UTIL_H

#include <math.h>
#include <stdlib.h>

#include "backend.h"
#include "sl.h"
#include "testutil.h"

static inline backend *
open_be(const char *name, int threads)
{
	backend *be;
	char err[SL_ERR_LEN];
	ck_assert_msg(backend_open(name, threads, &be, err) == 0, "%s", err);
	return be;
}

static inline float *
zeros(size_t n)
{
	float *v = calloc(n ? n : 1, sizeof(float));
	ck_assert_ptr_nonnull(v);
	return v;
}

/* normalised squared error of a against r (n floats) */
static inline double
nmse(const float *a, const float *r, size_t n)
{
	double num = 0.0, den = 0.0;
	for (size_t i = 0; i < n; i++) {
		ck_assert(isfinite(a[i]) && isfinite(r[i]));
		num += ((double)a[i] - r[i]) * ((double)a[i] - r[i]);
		den += (double)r[i] * r[i];
	}
	return den > 0 ? num / den : num;
}

#endif
