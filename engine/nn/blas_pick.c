/* blas_pick.c - the best OpenBLAS kernel the CPU supports (see blas_pick.h). */
#include "blas_pick.h"

#include <stddef.h>
#include <strings.h>

void
blas_cpu_now(blas_cpu *f)
{
	__builtin_cpu_init();
	f->avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
		    __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
		    __builtin_cpu_supports("avx512vl");
	f->avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	f->avx = __builtin_cpu_supports("avx");
}

const char *
blas_best_core(const blas_cpu *f)
{
	return f->avx512 ? "SkylakeX" : f->avx2 ? "Haswell" : f->avx ? "Sandybridge" : NULL;
}

int
blas_core_rank(const char *name)
{
	static const struct {
		const char *name;
		int rank;
	} t[] = {
		{"SkylakeX", 4}, {"Cooperlake", 4}, {"SapphireRapids", 4},
		{"Haswell", 3}, {"Zen", 3}, {"Excavator", 3},
		{"Sandybridge", 2}, {"Bulldozer", 2}, {"Piledriver", 2}, {"Steamroller", 2},
		{"Prescott", 1}, {"Core2", 1}, {"Penryn", 1}, {"Dunnington", 1},
		{"Nehalem", 1}, {"Atom", 1}, {"Opteron", 1}, {"Opteron_SSE3", 1}, {"Barcelona", 1},
		{"Bobcat", 1}, {"Katmai", 1}, {"Coppermine", 1}, {"Northwood", 1},
		{"Banias", 1},
	};
	if (!name)
		return 0;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcasecmp(name, t[i].name))
			return t[i].rank;
	return 0;
}

const char *
blas_decide(const char *env, const char *marker, const char *lib, const blas_cpu *f,
	    blas_why *why)
{
	*why = BLAS_LIBRARY;
	if (env && *env) {
		/* ours (the marker names it: a child of a process that picked
		 * it), else the user's: respected either way */
		*why = marker && !strcasecmp(marker, env) ? BLAS_PICKED : BLAS_ENV;
		return NULL;
	}
	if (marker && !strcasecmp(marker, "fallback")) {
		*why = BLAS_FALLBACK;
		return NULL;
	}
	const char *best = blas_best_core(f);
	int lr = blas_core_rank(lib);
	/* an unknown name is a kernel newer than this table: the library's */
	if (!best || lr == 0 || lr >= blas_core_rank(best))
		return NULL;
	return best;
}

const char *
blas_why_name(blas_why w)
{
	static const char *const n[] = {"library", "environment", "picked", "fallback"};
	return (unsigned)w < sizeof(n) / sizeof(n[0]) ? n[w] : "?";
}
