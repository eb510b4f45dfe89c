/* blas_pick.h - the best OpenBLAS kernel the CPU supports, out of the box.
 *
 * Debian 12's OpenBLAS (0.3.21, a DYNAMIC_ARCH build) does not know every
 * CPU it meets: on new Intel Xeons it falls back to its SSE3 kernel
 * ("Prescott"), a quarter of the machine. The library reads
 * OPENBLAS_CORETYPE when it is loaded, so the choice is made at the start
 * of main: when the library picked a kernel below the best this CPU's
 * features allow, the process sets OPENBLAS_CORETYPE and re-executes
 * itself (daemon/main.c). A value the user set is never overridden. The
 * marker STALELAB_BLAS names the kernel we picked, so a child process
 * (a sweep's cell) knows the variable is ours, and "fallback" after our
 * pick failed the start-up check (blas_check in backend_cpu.c). */
#ifndef SL_BLAS_PICK_H
#define SL_BLAS_PICK_H

typedef struct blas_cpu {
	int avx512; /* AVX-512 F, CD, BW, DQ and VL: OpenBLAS's SkylakeX kernels */
	int avx2;   /* AVX2 and FMA: Haswell's */
	int avx;    /* AVX: Sandybridge's */
} blas_cpu;

typedef enum blas_why {
	BLAS_LIBRARY = 0, /* the library's own choice (it chose as well as we would) */
	BLAS_ENV,         /* OPENBLAS_CORETYPE set in the environment: respected */
	BLAS_PICKED,      /* chosen by us: the library's choice was below the CPU's best */
	BLAS_FALLBACK,    /* ours failed the start-up check: the library's own again */
} blas_why;

/* this CPU's features */
void blas_cpu_now(blas_cpu *f);

/* the best OpenBLAS kernel for features f ("SkylakeX", "Haswell",
 * "Sandybridge"), NULL when none is worth naming */
const char *blas_best_core(const blas_cpu *f);

/* A kernel's rank by the instructions it uses (case insensitive): 4
 * AVX-512, 3 AVX2, 2 AVX, 1 older x86-64 ones, 0 unknown. */
int blas_core_rank(const char *name);

/* What to do at start-up. env: OPENBLAS_CORETYPE (NULL: unset), marker:
 * STALELAB_BLAS (NULL: unset), lib: the kernel the library runs. Returns
 * the kernel to set and re-execute with, or NULL to go on; *why says why
 * this process runs the kernel it runs. */
const char *blas_decide(const char *env, const char *marker, const char *lib,
			const blas_cpu *f, blas_why *why);

const char *blas_why_name(blas_why w); /* "library", "environment", "picked", "fallback" */

#endif
