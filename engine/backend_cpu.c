/* backend_cpu.c - the CPU backend: OpenBLAS sgemm (single-threaded) under
 * our own fork-join team, so both cores stay busy for the whole step and not
 * only inside BLAS. Ops split their work by output columns (dense) or by
 * batch images (convolution, pooling) so threads never write the same data;
 * convolution im2col runs in cache-sized chunks and is recomputed in the
 * backward pass instead of stored. The only file that includes cblas.h. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"
#include "sl.h"
#include "team.h"

#define CPU_MAX_THREADS 64

/* Hot loops are compiled three times, for AVX-512 (x86-64-v4), AVX2+FMA
 * (x86-64-v3) and plain x86-64, and the loader picks the best the CPU has;
 * the plain clone is the portable path. (Sanitizer builds use one copy.) */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
	!defined(__SANITIZE_ADDRESS__)
#define SIMD_CLONES \
	__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SIMD_CLONES
#endif
#define COL_CHUNK_FLOATS 65536 /* im2col chunk: ~256 KiB, stays in L2 */

typedef struct cpu_ctx {
	team *team;
	int nt;
	float *scratch[CPU_MAX_THREADS]; /* per-thread im2col buffers */
	size_t scratch_cap[CPU_MAX_THREADS];
	float *part[CPU_MAX_THREADS]; /* per-thread partial dw|db (conv) */
	size_t part_cap[CPU_MAX_THREADS];
} cpu_ctx;

static cpu_ctx *
CTX(backend *be)
{
	return (cpu_ctx *)be->ctx;
}

/* Grow a per-thread buffer; only called by its own thread. Allocation
 * happens in the first step only (sizes do not change after). */
static float *
grow(float **buf, size_t *cap, size_t n)
{
	if (*cap < n) {
		sl_free_aligned(*buf);
		*buf = sl_calloc_aligned(n, sizeof(float));
		SL_ASSERT(*buf != NULL);
		*cap = n;
	}
	return *buf;
}

/* ---- gemm ------------------------------------------------------------ */

static void
cpu_gemm(backend *be, int ta, int tb, int m, int n, int k, float alpha,
	 const float *a, int lda, const float *b, int ldb, float beta, float *c,
	 int ldc)
{
	(void)be;
	cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
		    tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
		    ldb, beta, c, ldc);
}

/* Below this many multiply-adds an op runs on one thread. */
#define PAR_MIN_WORK 40000L

/* Split [0, n) in units of 16 (a cache line of floats). */
static void
split16(int n, int tid, int nt, int *lo, int *hi)
{
	long units = (n + 15) / 16, a, b;
	team_split(units, tid, nt, &a, &b);
	*lo = (int)SL_MIN(a * 16, n);
	*hi = (int)SL_MIN(b * 16, n);
}

/* ---- dense ----------------------------------------------------------- */

struct lin_args {
	const float *x, *w, *b, *y;
	float *yout, *dy, *dx, *dw, *db;
	int batch, in, out, relu, par;
};

SIMD_CLONES static void
linear_fwd_part(void *p, int tid, int nt)
{
	struct lin_args *a = p;
	int lo = 0, hi = a->out;
	if (!a->par) {
		if (tid)
			return;
	} else {
		split16(a->out, tid, nt, &lo, &hi);
	}
	int cols = hi - lo;
	if (cols <= 0)
		return;
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, a->batch, cols,
		    a->in, 1.0f, a->x, a->in, a->w + (size_t)lo * a->in, a->in,
		    0.0f, a->yout + lo, a->out);
	for (int r = 0; r < a->batch; r++) {
		float *y = a->yout + (size_t)r * a->out + lo;
		const float *b = a->b + lo;
		if (a->relu) {
			for (int j = 0; j < cols; j++) {
				float v = y[j] + b[j];
				y[j] = v > 0.0f ? v : 0.0f;
			}
		} else {
			for (int j = 0; j < cols; j++)
				y[j] += b[j];
		}
	}
}

static void
cpu_linear_fwd(backend *be, const float *x, const float *w, const float *b,
	       float *y, int batch, int in, int out, int relu)
{
	struct lin_args a = {.x = x, .w = w, .b = b, .yout = y, .batch = batch,
			     .in = in, .out = out, .relu = relu};
	a.par = (long)batch * in * out >= PAR_MIN_WORK;
	team_run(CTX(be)->team, linear_fwd_part, &a);
}

SIMD_CLONES static void
linear_bwd_w_part(void *p, int tid, int nt)
{
	struct lin_args *a = p;
	int lo = 0, hi = a->out;
	if (!a->par) {
		if (tid)
			return;
	} else {
		split16(a->out, tid, nt, &lo, &hi);
	}
	int cols = hi - lo;
	if (cols <= 0)
		return;
	if (a->relu) {
		for (int r = 0; r < a->batch; r++) {
			float *dy = a->dy + (size_t)r * a->out;
			const float *y = a->y + (size_t)r * a->out;
			for (int j = lo; j < hi; j++)
				dy[j] = y[j] > 0.0f ? dy[j] : 0.0f;
		}
	}
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, a->in,
		    a->batch, 1.0f, a->dy + lo, a->out, a->x, a->in, 0.0f,
		    a->dw + (size_t)lo * a->in, a->in);
	for (int j = lo; j < hi; j++)
		a->db[j] = 0.0f;
	for (int r = 0; r < a->batch; r++) {
		const float *dy = a->dy + (size_t)r * a->out;
		for (int j = lo; j < hi; j++)
			a->db[j] += dy[j];
	}
}

static void
linear_bwd_x_part(void *p, int tid, int nt)
{
	struct lin_args *a = p;
	int lo = 0, hi = a->in;
	if (!a->par) {
		if (tid)
			return;
	} else {
		split16(a->in, tid, nt, &lo, &hi);
	}
	if (hi <= lo)
		return;
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, a->batch,
		    hi - lo, a->out, 1.0f, a->dy, a->out, a->w + lo, a->in,
		    0.0f, a->dx + lo, a->in);
}

static void
cpu_linear_bwd(backend *be, const float *x, const float *w, const float *y,
	       float *dy, float *dx, float *dw, float *db, int batch, int in,
	       int out, int relu)
{
	struct lin_args a = {.x = x, .w = w, .y = y, .dy = dy, .dx = dx,
			     .dw = dw, .db = db, .batch = batch, .in = in,
			     .out = out, .relu = relu};
	a.par = (long)batch * in * out >= PAR_MIN_WORK;
	team_run(CTX(be)->team, linear_bwd_w_part, &a);
	if (dx)
		team_run(CTX(be)->team, linear_bwd_x_part, &a);
}

/* ---- convolution ------------------------------------------------------ */

/* im2col for images [b0, b0+nb) of x ([C][B][H][W]) into col[K][nb*P]. */
SIMD_CLONES static void
im2col(const conv_geom *g, const float *x, int batch, int b0, int nb,
       float *col)
{
	const int H = g->h, W = g->w, k = g->k, s = g->stride, pad = g->pad;
	const int ho = g->ho, wo = g->wo, P = ho * wo;
	const size_t ld = (size_t)nb * P;
	const size_t plane = (size_t)H * W, cstride = (size_t)batch * plane;
	for (int ci = 0; ci < g->cin; ci++) {
		for (int ki = 0; ki < k; ki++) {
			for (int kj = 0; kj < k; kj++) {
				float *row = col + (size_t)((ci * k + ki) * k + kj) * ld;
				/* valid ow: 0 <= ow*s - pad + kj < W */
				int ow_lo = 0, ow_hi = wo;
				while (ow_lo < wo && ow_lo * s - pad + kj < 0)
					ow_lo++;
				while (ow_hi > ow_lo && (ow_hi - 1) * s - pad + kj >= W)
					ow_hi--;
				for (int bi = 0; bi < nb; bi++) {
					const float *img = x + ci * cstride + (size_t)(b0 + bi) * plane;
					float *dst = row + (size_t)bi * P;
					for (int oh = 0; oh < ho; oh++) {
						int ih = oh * s - pad + ki;
						float *d = dst + oh * wo;
						if (ih < 0 || ih >= H) {
							for (int ow = 0; ow < wo; ow++)
								d[ow] = 0.0f;
							continue;
						}
						const float *src = img + (size_t)ih * W - pad + kj;
						for (int ow = 0; ow < ow_lo; ow++)
							d[ow] = 0.0f;
						if (s == 1) {
							for (int ow = ow_lo; ow < ow_hi; ow++)
								d[ow] = src[ow];
						} else {
							for (int ow = ow_lo; ow < ow_hi; ow++)
								d[ow] = src[ow * s];
						}
						for (int ow = ow_hi; ow < wo; ow++)
							d[ow] = 0.0f;
					}
				}
			}
		}
	}
}

/* col2im: accumulate col[K][nb*P] into dx images [b0, b0+nb) (zeroed
 * first by the caller). */
SIMD_CLONES static void
col2im(const conv_geom *g, const float *col, int batch, int b0, int nb,
       float *dx)
{
	const int H = g->h, W = g->w, k = g->k, s = g->stride, pad = g->pad;
	const int ho = g->ho, wo = g->wo, P = ho * wo;
	const size_t ld = (size_t)nb * P;
	const size_t plane = (size_t)H * W, cstride = (size_t)batch * plane;
	for (int ci = 0; ci < g->cin; ci++) {
		for (int ki = 0; ki < k; ki++) {
			for (int kj = 0; kj < k; kj++) {
				const float *row = col + (size_t)((ci * k + ki) * k + kj) * ld;
				int ow_lo = 0, ow_hi = wo;
				while (ow_lo < wo && ow_lo * s - pad + kj < 0)
					ow_lo++;
				while (ow_hi > ow_lo && (ow_hi - 1) * s - pad + kj >= W)
					ow_hi--;
				for (int bi = 0; bi < nb; bi++) {
					float *img = dx + ci * cstride + (size_t)(b0 + bi) * plane;
					const float *src = row + (size_t)bi * P;
					for (int oh = 0; oh < ho; oh++) {
						int ih = oh * s - pad + ki;
						if (ih < 0 || ih >= H)
							continue;
						float *d = img + (size_t)ih * W - pad + kj;
						const float *c = src + oh * wo;
						for (int ow = ow_lo; ow < ow_hi; ow++)
							d[ow * s] += c[ow];
					}
				}
			}
		}
	}
}

struct conv_args {
	backend *be;
	const conv_geom *g;
	const float *x, *w, *b, *y;
	float *yout, *dy, *dx, *dw, *db;
	int batch, relu;
};

static int
conv_chunk(const conv_geom *g)
{
	long per = (long)g->cin * g->k * g->k * g->ho * g->wo;
	long c = COL_CHUNK_FLOATS / (per > 0 ? per : 1);
	return (int)SL_MAX(1, c);
}

/* Direct convolution for one input channel and small kernels (LeNet's
 * conv1: K = 25, Cout = 6 is too thin for a GEMM). Stride 1, output rows up
 * to DW wide. Each image is first copied into a zero-padded tile so the
 * inner loops have constant trip counts and no bounds: the compiler turns
 * them into straight vector code at -O2, and the target clones pick AVX2 or
 * AVX-512 where the CPU has them (the default clone is plain x86-64). */
#define DW 32  /* output row width handled by the direct kernels */
#define DPW 48 /* padded tile row: DW + k - 1 <= DPW */
#define DPH 64 /* padded tile rows */


static int
conv_is_direct(const conv_geom *g)
{
	return g->cin == 1 && g->stride == 1 && g->k <= 7 && g->cout <= 16 &&
	       g->wo <= DW && g->w + g->pad <= DPW &&
	       g->ho + g->k - 1 <= DPH;
}

/* tile[r][c] = image[r - pad][c - pad], zero outside */
static void
pad_tile(const conv_geom *g, const float *img, float tile[DPH][DPW])
{
	const int H = g->h, W = g->w, pad = g->pad;
	const int rows = g->ho + g->k - 1;
	for (int r = 0; r < rows; r++) {
		int ih = r - pad;
		float *t = tile[r];
		memset(t, 0, sizeof(float) * DPW);
		if (ih >= 0 && ih < H)
			memcpy(t + pad, img + (size_t)ih * W, sizeof(float) * W);
	}
}

SIMD_CLONES static void
conv_direct_fwd(const conv_geom *g, const float *x, const float *w,
		const float *b, float *y, int batch, int b0, int b1, int relu)
{
	const int k = g->k, ho = g->ho, wo = g->wo, P = ho * wo;
	float tile[DPH][DPW];
	float acc[DW];
	for (int bi = b0; bi < b1; bi++) {
		pad_tile(g, x + (size_t)bi * g->h * g->w, tile);
		for (int co = 0; co < g->cout; co++) {
			const float *wk = w + (size_t)co * k * k;
			float *out = y + ((size_t)co * batch + bi) * P;
			for (int oh = 0; oh < ho; oh++) {
				for (int i = 0; i < DW; i++)
					acc[i] = b[co];
				for (int ki = 0; ki < k; ki++) {
					const float *row = tile[oh + ki];
					for (int kj = 0; kj < k; kj++) {
						const float wv = wk[ki * k + kj];
						const float *src = row + kj;
						for (int i = 0; i < DW; i++)
							acc[i] += wv * src[i];
					}
				}
				if (relu)
					for (int i = 0; i < DW; i++)
						acc[i] = acc[i] > 0.0f ? acc[i] : 0.0f;
				memcpy(out + oh * wo, acc, sizeof(float) * wo);
			}
		}
	}
}

SIMD_CLONES static void
conv_fwd_part(void *p, int tid, int nt)
{
	struct conv_args *a = p;
	const conv_geom *g = a->g;
	long b0, b1;
	team_split(a->batch, tid, nt, &b0, &b1);
	if (b1 <= b0)
		return;
	if (conv_is_direct(g)) {
		conv_direct_fwd(g, a->x, a->w, a->b, a->yout, a->batch, (int)b0,
				(int)b1, a->relu);
		return;
	}
	cpu_ctx *c = CTX(a->be);
	const int K = g->cin * g->k * g->k, P = g->ho * g->wo;
	const int chunk = conv_chunk(g);
	float *col = grow(&c->scratch[tid], &c->scratch_cap[tid],
			  (size_t)K * P * chunk);
	const size_t ldy = (size_t)a->batch * P;
	for (long bs = b0; bs < b1; bs += chunk) {
		int nb = (int)SL_MIN(chunk, b1 - bs);
		im2col(g, a->x, a->batch, (int)bs, nb, col);
		float *y = a->yout + (size_t)bs * P;
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->cout,
			    nb * P, K, 1.0f, a->w, K, col, nb * P, 0.0f, y,
			    (int)ldy);
		for (int co = 0; co < g->cout; co++) {
			float *r = y + co * ldy, bv = a->b[co];
			int n = nb * P;
			if (a->relu) {
				for (int j = 0; j < n; j++) {
					float v = r[j] + bv;
					r[j] = v > 0.0f ? v : 0.0f;
				}
			} else {
				for (int j = 0; j < n; j++)
					r[j] += bv;
			}
		}
	}
}

static void
cpu_conv_fwd(backend *be, const conv_geom *g, const float *x, const float *w,
	     const float *b, float *y, int batch, int relu)
{
	struct conv_args a = {.be = be, .g = g, .x = x, .w = w, .b = b,
			      .yout = y, .batch = batch, .relu = relu};
	team_run(CTX(be)->team, conv_fwd_part, &a);
}

/* Direct weight gradient for the direct path (no dx: first layer):
 * dw[co][ki][kj] = sum dy[co][oh][ow] tile[oh + ki][ow + kj], accumulated
 * per tap as DW-wide vectors and reduced once per call. */
SIMD_CLONES static void
conv_direct_bwd_w(const conv_geom *g, const float *x, const float *dy,
		  float *dw, float *db, int batch, int b0, int b1)
{
	const int k = g->k, ho = g->ho, wo = g->wo, P = ho * wo, kk = k * k;
	const int cout = g->cout;
	float tile[DPH][DPW];
	float dd[DW];
	float accw[16][49][DW]; /* cout <= 16, k <= 7 (conv_is_direct) */
	float bsum[16] = {0};
	for (int co = 0; co < cout; co++)
		memset(accw[co], 0, sizeof(float) * (size_t)kk * DW);
	for (int bi = b0; bi < b1; bi++) {
		pad_tile(g, x + (size_t)bi * g->h * g->w, tile);
		for (int co = 0; co < cout; co++) {
			const float *d = dy + ((size_t)co * batch + bi) * P;
			for (int oh = 0; oh < ho; oh++) {
				for (int i = 0; i < DW; i++)
					dd[i] = i < wo ? d[oh * wo + i] : 0.0f;
				for (int i = 0; i < DW; i++)
					bsum[co] += dd[i];
				for (int ki = 0; ki < k; ki++) {
					const float *row = tile[oh + ki];
					for (int kj = 0; kj < k; kj++) {
						float *a = accw[co][ki * k + kj];
						const float *src = row + kj;
						for (int i = 0; i < DW; i++)
							a[i] += dd[i] * src[i];
					}
				}
			}
		}
	}
	for (int co = 0; co < cout; co++) {
		db[co] += bsum[co];
		for (int t = 0; t < kk; t++) {
			float sacc = 0.0f;
			for (int i = 0; i < DW; i++)
				sacc += accw[co][t][i];
			dw[(size_t)co * kk + t] += sacc;
		}
	}
}

SIMD_CLONES static void
conv_bwd_part(void *p, int tid, int nt)
{
	struct conv_args *a = p;
	const conv_geom *g = a->g;
	cpu_ctx *c = CTX(a->be);
	const int K = g->cin * g->k * g->k, P = g->ho * g->wo;
	const size_t ldy = (size_t)a->batch * P;
	float *part = grow(&c->part[tid], &c->part_cap[tid],
			   (size_t)g->cout * (K + 1));
	float *pdw = part, *pdb = part + (size_t)g->cout * K;
	memset(part, 0, sizeof(float) * (size_t)g->cout * (K + 1));
	long b0, b1;
	team_split(a->batch, tid, nt, &b0, &b1);
	if (b1 <= b0)
		return;
	if (a->relu) {
		for (int co = 0; co < g->cout; co++) {
			float *d = a->dy + co * ldy + (size_t)b0 * P;
			const float *y = a->y + co * ldy + (size_t)b0 * P;
			size_t n = (size_t)(b1 - b0) * P;
			for (size_t j = 0; j < n; j++)
				d[j] = y[j] > 0.0f ? d[j] : 0.0f;
		}
	}
	if (conv_is_direct(g) && !a->dx) {
		conv_direct_bwd_w(g, a->x, a->dy, pdw, pdb, a->batch, (int)b0,
				  (int)b1);
		return;
	}
	const int chunk = conv_chunk(g);
	float *col = grow(&c->scratch[tid], &c->scratch_cap[tid],
			  (size_t)K * P * chunk);
	for (long bs = b0; bs < b1; bs += chunk) {
		int nb = (int)SL_MIN(chunk, b1 - bs);
		const float *dy = a->dy + (size_t)bs * P;
		im2col(g, a->x, a->batch, (int)bs, nb, col);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g->cout, K,
			    nb * P, 1.0f, dy, (int)ldy, col, nb * P, 1.0f, pdw,
			    K);
		for (int co = 0; co < g->cout; co++) {
			const float *r = dy + co * ldy;
			float s = 0.0f;
			for (int j = 0; j < nb * P; j++)
				s += r[j];
			pdb[co] += s;
		}
		if (a->dx) {
			/* col is free again: reuse it for dcol = w^T dy */
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K,
				    nb * P, g->cout, 1.0f, a->w, K, dy, (int)ldy,
				    0.0f, col, nb * P);
			size_t plane = (size_t)g->h * g->w;
			for (int ci = 0; ci < g->cin; ci++)
				memset(a->dx + ((size_t)ci * a->batch + bs) * plane,
				       0, sizeof(float) * nb * plane);
			col2im(g, col, a->batch, (int)bs, nb, a->dx);
		}
	}
}

static void
cpu_conv_bwd(backend *be, const conv_geom *g, const float *x, const float *w,
	     const float *y, float *dy, float *dx, float *dw, float *db,
	     int batch, int relu)
{
	cpu_ctx *c = CTX(be);
	struct conv_args a = {.be = be, .g = g, .x = x, .w = w, .y = y,
			      .dy = dy, .dx = dx, .dw = dw, .db = db,
			      .batch = batch, .relu = relu};
	team_run(c->team, conv_bwd_part, &a);
	const int K = g->cin * g->k * g->k;
	const size_t n = (size_t)g->cout * K;
	memcpy(dw, c->part[0], sizeof(float) * n);
	memcpy(db, c->part[0] + n, sizeof(float) * g->cout);
	for (int t = 1; t < team_size(c->team); t++) {
		const float *pp = c->part[t];
		for (size_t i = 0; i < n; i++)
			dw[i] += pp[i];
		for (int co = 0; co < g->cout; co++)
			db[co] += pp[n + co];
	}
}

/* ---- pooling, relu, layout ------------------------------------------- */

struct pool_args {
	const conv_geom *g;
	const float *x, *dy;
	float *y, *dx;
	const int32_t *carg;
	int32_t *arg;
	int batch;
};

SIMD_CLONES static void
maxpool_fwd_part(void *p, int tid, int nt)
{
	struct pool_args *a = p;
	const conv_geom *g = a->g;
	const int H = g->h, W = g->w, k = g->k, s = g->stride, pad = g->pad;
	const int ho = g->ho, wo = g->wo;
	long p0, p1;
	team_split((long)g->cin * a->batch, tid, nt, &p0, &p1);
	if (k == 2 && s == 2 && pad == 0) {
		/* the common case: 2x2 windows, stride 2, no padding */
		for (long pl = p0; pl < p1; pl++) {
			const float *x = a->x + (size_t)pl * H * W;
			float *y = a->y + (size_t)pl * ho * wo;
			int32_t *ag = a->arg + (size_t)pl * ho * wo;
			for (int oh = 0; oh < ho; oh++) {
				const float *r0 = x + (size_t)(2 * oh) * W;
				const float *r1 = r0 + W;
				for (int ow = 0; ow < wo; ow++) {
					int c = 2 * ow;
					float m = r0[c];
					int32_t bi = 2 * oh * W + c;
					if (r0[c + 1] > m) {
						m = r0[c + 1];
						bi = 2 * oh * W + c + 1;
					}
					if (r1[c] > m) {
						m = r1[c];
						bi = (2 * oh + 1) * W + c;
					}
					if (r1[c + 1] > m) {
						m = r1[c + 1];
						bi = (2 * oh + 1) * W + c + 1;
					}
					y[oh * wo + ow] = m;
					ag[oh * wo + ow] = bi;
				}
			}
		}
		return;
	}
	host_maxpool_planes(g, a->x, a->y, a->arg, p0, p1);
}

static void
cpu_maxpool_fwd(backend *be, const conv_geom *g, const float *x, float *y,
		int32_t *arg, int batch)
{
	struct pool_args a = {.g = g, .x = x, .y = y, .arg = arg,
			      .batch = batch};
	team_run(CTX(be)->team, maxpool_fwd_part, &a);
}

static void
maxpool_bwd_part(void *p, int tid, int nt)
{
	struct pool_args *a = p;
	long p0, p1;
	team_split((long)a->g->cin * a->batch, tid, nt, &p0, &p1);
	host_maxpool_bwd_planes(a->g, a->dy, a->carg, a->dx, p0, p1);
}

static void
cpu_maxpool_bwd(backend *be, const conv_geom *g, const float *dy,
		const int32_t *arg, float *dx, int batch)
{
	struct pool_args a = {.g = g, .dy = dy, .carg = arg, .dx = dx,
			      .batch = batch};
	team_run(CTX(be)->team, maxpool_bwd_part, &a);
}

/* ---- loss and updates ------------------------------------------------- */

static double
cpu_softmax_xent(backend *be, const float *logits, const uint8_t *labels,
		 float *dlogits, int batch, int classes, int *correct)
{
	(void)be;
	return host_softmax_xent(logits, labels, dlogits, batch, classes,
				 correct, exp, log);
}

struct sgd_args {
	float *w, *m;
	const float *g;
	size_t n;
	float lr, mu, wd;
};

SIMD_CLONES static void
sgd_part(void *p, int tid, int nt)
{
	struct sgd_args *a = p;
	long lo, hi;
	team_split((long)((a->n + 15) / 16), tid, nt, &lo, &hi);
	size_t i0 = SL_MIN((size_t)lo * 16, a->n), i1 = SL_MIN((size_t)hi * 16, a->n);
	float *w = a->w, *m = a->m;
	const float *g = a->g;
	const float lr = a->lr, mu = a->mu, wd = a->wd;
	if (m) {
		for (size_t i = i0; i < i1; i++) {
			float gi = g[i] + wd * w[i];
			m[i] = mu * m[i] + gi;
			w[i] -= lr * m[i];
		}
	} else if (wd != 0.0f) {
		for (size_t i = i0; i < i1; i++)
			w[i] -= lr * (g[i] + wd * w[i]);
	} else {
		for (size_t i = i0; i < i1; i++)
			w[i] -= lr * g[i];
	}
}

static void
cpu_sgd(backend *be, float *w, const float *g, float *m, size_t n, float lr,
	float mu, float wd)
{
	struct sgd_args a = {.w = w, .g = g, .m = m, .n = n, .lr = lr,
			     .mu = mu, .wd = wd};
	if (n < 65536)
		sgd_part(&a, 0, 1);
	else
		team_run(CTX(be)->team, sgd_part, &a);
}

SIMD_CLONES static void
cpu_dc_grad(backend *be, size_t n, const float *g, const float *w,
	    const float *bak, float *ms, float lambda, float m, float eps,
	    float *out)
{
	(void)be;
	if (ms) {
		for (size_t i = 0; i < n; i++) {
			float g2 = g[i] * g[i];
			ms[i] = m * ms[i] + (1.0f - m) * g2;
			out[i] = g[i] + lambda / sqrtf(ms[i] + eps) * g2 * (w[i] - bak[i]);
		}
	} else {
		for (size_t i = 0; i < n; i++)
			out[i] = g[i] + lambda * g[i] * g[i] * (w[i] - bak[i]);
	}
}

SIMD_CLONES static void
cpu_axpy(backend *be, size_t n, float a, const float *x, float *y)
{
	(void)be;
	for (size_t i = 0; i < n; i++)
		y[i] += a * x[i];
}

SIMD_CLONES static void
cpu_scal(backend *be, size_t n, float a, float *y)
{
	(void)be;
	for (size_t i = 0; i < n; i++)
		y[i] *= a;
}

/* ---- table and lifetime ----------------------------------------------- */

static void cpu_destroy(backend *be);

static void
cpu_set_threads(backend *be, int n)
{
	team_set_active(CTX(be)->team, n);
}

static const backend_ops cpu_ops = {
	.name = "cpu",
	.host_memory = 1,
	.destroy = cpu_destroy,
	.set_threads = cpu_set_threads,
	.alloc = host_alloc,
	.free = host_free,
	.upload = host_copy,
	.download = host_copy,
	.copy = host_copy,
	.zero = host_zero,
	.sync = host_sync,
	.gemm = cpu_gemm,
	.linear_fwd = cpu_linear_fwd,
	.linear_bwd = cpu_linear_bwd,
	.conv_fwd = cpu_conv_fwd,
	.conv_bwd = cpu_conv_bwd,
	.maxpool_fwd = cpu_maxpool_fwd,
	.maxpool_bwd = cpu_maxpool_bwd,
	.relu_fwd = host_relu_fwd,
	.relu_bwd = host_relu_bwd,
	.cbp_to_bcp = host_cbp_to_bcp,
	.bcp_to_cbp = host_bcp_to_cbp,
	.softmax_xent = cpu_softmax_xent,
	.sgd = cpu_sgd,
	.dc_grad = cpu_dc_grad,
	.axpy = cpu_axpy,
	.scal = cpu_scal,
};

int
backend_cpu_new(int nthreads, backend **out)
{
	*out = NULL;
	if (nthreads < 1 || nthreads > CPU_MAX_THREADS)
		return -SL_EINVAL;
	/* Our team provides the parallelism; BLAS runs in the calling thread.
	 * (openblas_set_num_threads is process-wide; 1 is the only setting
	 * that is right for every backend instance at once.) */
	openblas_set_num_threads(1);
	backend *be = calloc(1, sizeof(*be));
	cpu_ctx *c = calloc(1, sizeof(*c));
	if (!be || !c)
		goto fail;
	c->nt = nthreads;
	if (team_new(nthreads, &c->team) < 0)
		goto fail;
	be->ops = &cpu_ops;
	be->ctx = c;
	*out = be;
	return 0;
fail:
	free(be);
	free(c);
	return -SL_ENOMEM;
}

static void
cpu_destroy(backend *be)
{
	cpu_ctx *c = CTX(be);
	team_free(c->team);
	for (int t = 0; t < CPU_MAX_THREADS; t++) {
		sl_free_aligned(c->scratch[t]);
		sl_free_aligned(c->part[t]);
	}
	free(c);
	free(be);
}

static int
cpu_probe(char *why)
{
	(void)why;
	return 1;
}

const backend_class backend_cpu_class = {
	.name = "cpu",
	.about = "OpenBLAS and SIMD kernels chosen for this CPU, multithreaded (the fast path)",
	.probe = cpu_probe,
	.open = backend_cpu_new,
	.auto_pick = 1,
};

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double
backend_cpu_sgemm_gflops(int m, int n, int k, int blas_threads, double seconds)
{
	float *a = sl_calloc_aligned((size_t)m * k, sizeof(float));
	float *b = sl_calloc_aligned((size_t)k * n, sizeof(float));
	float *c = sl_calloc_aligned((size_t)m * n, sizeof(float));
	double gf = 0.0;
	if (!a || !b || !c)
		goto out;
	for (size_t i = 0; i < (size_t)m * k; i++)
		a[i] = (float)(i % 7) * 0.1f;
	for (size_t i = 0; i < (size_t)k * n; i++)
		b[i] = (float)(i % 5) * 0.1f;
	openblas_set_num_threads(blas_threads);
	enum { MAXS = 101 };
	double samples[MAXS];
	int ns = 0;
	double flop = 2.0 * m * n * k, t_end = sl_now() + seconds;
	/* each sample: enough calls for ~1 ms */
	int reps = (int)SL_MAX(1, 1e6 / flop * 50);
	while (ns < MAXS && (ns < 5 || sl_now() < t_end)) {
		double t0 = sl_now();
		for (int r = 0; r < reps; r++)
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n,
				    k, 1.0f, a, k, b, n, 0.0f, c, n);
		double dt = sl_now() - t0;
		samples[ns++] = flop * reps / dt * 1e-9;
	}
	openblas_set_num_threads(1);
	qsort(samples, (size_t)ns, sizeof(double), cmp_double);
	gf = samples[ns / 2];
out:
	sl_free_aligned(a);
	sl_free_aligned(b);
	sl_free_aligned(c);
	return gf;
}

void
backend_cpu_blas(const char **kernel, const char **config, const char **isa)
{
	*kernel = openblas_get_corename();
	*config = openblas_get_config();
	/* the clone of our kernels the loader picks (target_clones above) */
	__builtin_cpu_init();
	*isa = __builtin_cpu_supports("x86-64-v4") ? "x86-64-v4"
	       : __builtin_cpu_supports("x86-64-v3") ? "x86-64-v3" : "x86-64";
}
