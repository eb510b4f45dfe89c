/* sl.c - error strings, message buffers, assert, aligned allocation, time. */
#define _POSIX_C_SOURCE 200809L
#include "sl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *
sl_strerror(int rc)
{
	static const char *const msg[] = {
		[SL_OK] = "success",
		[SL_ENOMEM] = "out of memory",
		[SL_EINVAL] = "invalid argument",
		[SL_EIO] = "input/output error",
		[SL_EFORMAT] = "malformed data",
		[SL_ESTATE] = "not allowed in the current state",
		[SL_EUNSUP] = "not supported by this build",
	};
	if (rc < 0)
		rc = -rc;
	if ((size_t)rc >= sizeof(msg) / sizeof(msg[0]) || !msg[rc])
		return "unknown error";
	return msg[rc];
}

int
sl_fail(char *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, SL_ERR_LEN, fmt, ap);
		va_end(ap);
	}
	return -code;
}

void
sl_assert_fail(const char *expr, const char *file, int line)
{
	fprintf(stderr, "stalelab: assertion failed: %s (%s:%d)\n", expr, file,
		line);
	abort();
}

void *
sl_calloc_aligned(size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	size_t bytes = n * size;
	size_t rounded = (bytes + 63) & ~(size_t)63;
	if (rounded == 0)
		rounded = 64;
	void *p = aligned_alloc(64, rounded);
	if (p)
		memset(p, 0, rounded);
	return p;
}

void
sl_free_aligned(void *p)
{
	free(p);
}

double
sl_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void
sl_deadline(double seconds, struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
	double t = (double)ts->tv_sec + (double)ts->tv_nsec * 1e-9 + seconds;
	ts->tv_sec = (time_t)t;
	ts->tv_nsec = (long)((t - (double)ts->tv_sec) * 1e9);
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}
