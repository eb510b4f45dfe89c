/* sl.h - stalelab common definitions: error codes, error buffers, asserts.
 *
 * Convention: functions return int, 0 on success or a negative -SL_E* code on
 * failure. Where a reason helps the user, the caller passes a char buffer of
 * SL_ERR_LEN bytes (or NULL) that receives a one-line message naming the bad
 * field, file or value. Library code never exits. */
#ifndef SL_H
#define SL_H

#include <stddef.h>
#include <stdint.h>

#define SL_VERSION "0.1.0"
#define SL_ERR_LEN 256

enum {
	SL_OK = 0,
	SL_ENOMEM = 1,  /* allocation failed */
	SL_EINVAL = 2,  /* bad argument or configuration value */
	SL_EIO = 3,     /* file could not be opened, read or written */
	SL_EFORMAT = 4, /* malformed input data (bad magic, sizes, ...) */
	SL_ESTATE = 5,  /* operation not allowed in the current state */
	SL_EUNSUP = 6,  /* valid request this build cannot honour */
};

/* Human-readable text for a (positive or negative) SL_E* code. */
const char *sl_strerror(int rc);

/* printf-style message into err (SL_ERR_LEN bytes); err may be NULL.
 * Returns -code so callers can write `return sl_fail(err, SL_EINVAL, ...)`. */
int sl_fail(char *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Invariant checks for our own bugs, never for input. */
void sl_assert_fail(const char *expr, const char *file, int line)
	__attribute__((noreturn));
#define SL_ASSERT(x) ((x) ? (void)0 : sl_assert_fail(#x, __FILE__, __LINE__))

/* On a function whose failure loses data (a gradient, a record, a
 * checkpoint): a caller that drops its result does not compile. A (void)
 * cast does not silence it; handle the result. */
#define SL_MUST_USE __attribute__((warn_unused_result))

/* Hot loops are compiled three times, for AVX-512 (x86-64-v4), AVX2+FMA
 * (x86-64-v3) and plain x86-64, and the loader picks the best the CPU has;
 * the plain clone is the portable path. (Sanitizer builds use one copy.)
 * SL_FORCE_ISA=4, 3 or 1 builds one of them alone, whatever the CPU has
 * beyond it: tests/integration/isa.sh and bench/isa.sh check and time
 * each clone on one machine. */
#if defined(SL_FORCE_ISA) && SL_FORCE_ISA == 4
#define SIMD_CLONES __attribute__((target("arch=x86-64-v4")))
#elif defined(SL_FORCE_ISA) && SL_FORCE_ISA == 3
#define SIMD_CLONES __attribute__((target("arch=x86-64-v3")))
#elif defined(SL_FORCE_ISA)
#define SIMD_CLONES
#elif defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
	!defined(__SANITIZE_ADDRESS__)
#define SIMD_CLONES \
	__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SIMD_CLONES
#endif

#define SL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define SL_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Allocation helpers: 64-byte aligned, zeroed; NULL on failure. */
void *sl_calloc_aligned(size_t n, size_t size);
void sl_free_aligned(void *p);

/* Monotonic time in seconds. */
double sl_now(void);

/* The CLOCK_REALTIME instant `seconds` from now, for
 * pthread_cond_timedwait. */
struct timespec;
void sl_deadline(double seconds, struct timespec *ts);

#endif
