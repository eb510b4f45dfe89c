/* failmalloc.c - an LD_PRELOAD shim for tests of the error paths: malloc
 * of exactly FAILMALLOC_SIZE bytes fails once FAILMALLOC_AFTER such calls
 * have succeeded. Every other call goes to the C library's malloc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>

void *malloc(size_t n);

static atomic_long seen;

void *
malloc(size_t n)
{
	static void *(*real)(size_t);
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "malloc");
	const char *size = getenv("FAILMALLOC_SIZE");
	if (size && (size_t)strtoull(size, NULL, 10) == n) {
		const char *after = getenv("FAILMALLOC_AFTER");
		long k = after ? strtol(after, NULL, 10) : 0;
		if (atomic_fetch_add(&seen, 1) >= k)
			return NULL;
	}
	return real(n);
}
