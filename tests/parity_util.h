/* parity_util.h - what the parity suites (test_parity.c, the ops;
 * test_parity_runs.c, whole runs) share: the cuda backend where its plugin
 * can run here, and backend memory copied back to the host. */
#ifndef SL_PARITY_UTIL_H
#define SL_PARITY_UTIL_H

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "testutil.h"

/* cuda where its plugin can run here; why says why not */
static inline backend *
open_cuda(char *why)
{
	char path[4200], exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0 && !getenv("STALELAB_CUDA_PLUGIN")) {
		exe[n] = 0;
		char *s = strrchr(exe, '/');
		if (s)
			*s = 0; /* BUILD/tests */
		if ((s = strrchr(exe, '/')))
			*s = 0; /* BUILD */
		snprintf(path, sizeof(path), "%s/stalelab-cuda.so", exe);
		if (access(path, R_OK) == 0)
			setenv("STALELAB_CUDA_PLUGIN", path, 1);
	}
	backend *be = NULL;
	if (backend_open("cuda", 1, &be, why) < 0)
		return NULL;
	return be;
}

/* backend memory back on the host (malloc'd) */
static inline float *
get(backend *be, const void *d, size_t n)
{
	float *h = malloc(sizeof(float) * (n ? n : 1));
	ck_assert_ptr_nonnull(h);
	be->ops->download(be, h, d, sizeof(float) * n);
	return h;
}

#endif
