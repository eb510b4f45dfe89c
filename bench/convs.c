/* convs.c - the cpu backend's convolutions alone, on ResNet-20's shapes
 * (Fashion-MNIST's 28x28: the stem, the three stages' 3x3 layers and the
 * two stride-2 ones), as a step runs them: the input rewritten before the
 * forward (a producer just wrote it), then the backward with the input
 * gradient, then the weight gradient alone.
 *
 *   build/bench/convs [THREADS [BATCH [REPS]]]      (2, 64, 15)
 *
 * One line per shape, the best of REPS in microseconds and GFLOP/s per
 * thread, and one JSON line each. `make bench-compare` runs it from both
 * trees, interleaved. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "sl.h"

typedef struct shape {
	const char *name;
	int cin, hw, cout, stride;
} shape;

static const shape SHAPES[] = {
	{"stem 1->16, 28x28", 1, 28, 16, 1},
	{"stage 1, 16 ch 28x28", 16, 28, 16, 1},
	{"stage 2, 32 ch 14x14", 32, 14, 32, 1},
	{"stage 3, 64 ch 7x7", 64, 7, 64, 1},
	{"stride 2, 16->32", 16, 28, 32, 2},
	{"stride 2, 32->64", 32, 14, 64, 2},
};

static float *
fill(size_t n, unsigned *seed)
{
	float *p = sl_calloc_aligned(n, sizeof(float));
	SL_ASSERT(p != NULL);
	for (size_t i = 0; i < n; i++) {
		*seed = *seed * 1103515245u + 12345u;
		p[i] = (float)((*seed >> 8) & 0xffff) / 65536.0f - 0.5f;
	}
	return p;
}

int
main(int argc, char **argv)
{
	const int nt = argc > 1 ? atoi(argv[1]) : 2, B = argc > 2 ? atoi(argv[2]) : 64;
	const int reps = argc > 3 ? atoi(argv[3]) : 15;
	if (nt < 1 || B < 1 || reps < 1) {
		fprintf(stderr, "usage: convs [THREADS [BATCH [REPS]]]\n");
		return 2;
	}
	backend *be;
	char err[SL_ERR_LEN];
	if (backend_open("cpu", nt, &be, err) < 0) {
		fprintf(stderr, "convs: %s\n", err);
		return 1;
	}
	unsigned seed = 1;
	for (size_t s = 0; s < sizeof(SHAPES) / sizeof(SHAPES[0]); s++) {
		const shape *sh = &SHAPES[s];
		conv_geom g = {.cin = sh->cin, .h = sh->hw, .w = sh->hw, .cout = sh->cout,
			       .k = 3, .stride = sh->stride, .pad = 1};
		g.ho = (g.h + 2 - 3) / g.stride + 1;
		g.wo = (g.w + 2 - 3) / g.stride + 1;
		const size_t nx = (size_t)g.cin * g.h * g.w * B;
		const size_t ny = (size_t)g.cout * g.ho * g.wo * B;
		const size_t nw = (size_t)g.cout * g.cin * 9;
		float *x = fill(nx, &seed), *w = fill(nw, &seed), *b = fill(g.cout, &seed);
		float *y = fill(ny, &seed), *dy = fill(ny, &seed), *dx = fill(nx, &seed);
		float *dw = fill(nw, &seed), *db = fill(g.cout, &seed);
		double best[3] = {1e30, 1e30, 1e30}; /* forward, backward, dw alone */
		for (int r = 0; r < reps; r++) {
			for (size_t i = 0; i < nx; i++)
				x[i] *= 1.0001f;
			double t0 = sl_now();
			be->ops->conv_fwd(be, &g, x, w, b, y, B, 0);
			double t1 = sl_now();
			for (size_t i = 0; i < ny; i++)
				dy[i] = y[i] * 0.01f;
			double t2 = sl_now();
			be->ops->conv_bwd(be, &g, x, w, y, dy, dx, dw, db, B, 0);
			double t3 = sl_now();
			for (size_t i = 0; i < ny; i++)
				dy[i] = y[i] * 0.01f;
			double t4 = sl_now();
			be->ops->conv_bwd(be, &g, x, w, y, dy, NULL, dw, db, B, 0);
			double t5 = sl_now();
			best[0] = SL_MIN(best[0], t1 - t0);
			best[1] = SL_MIN(best[1], t3 - t2);
			best[2] = SL_MIN(best[2], t5 - t4);
		}
		const double flop = 2.0 * (double)ny * g.cin * 9; /* one pass */
		printf("%-22s forward %8.1f us %6.1f GFLOP/s a thread   backward %8.1f us %6.1f"
		       "   dw alone %8.1f us\n",
		       sh->name, best[0] * 1e6, flop / best[0] / 1e9 / nt, best[1] * 1e6,
		       2 * flop / best[1] / 1e9 / nt, best[2] * 1e6);
		printf("{\"bench\":\"convs\",\"shape\":\"%s\",\"threads\":%d,\"batch\":%d,"
		       "\"fwd_us\":%.1f,\"bwd_us\":%.1f,\"dw_us\":%.1f}\n",
		       sh->name, nt, B, best[0] * 1e6, best[1] * 1e6, best[2] * 1e6);
		float *all[] = {x, w, b, y, dy, dx, dw, db};
		for (int i = 0; i < 8; i++)
			sl_free_aligned(all[i]);
	}
	backend_free(be);
	return 0;
}
