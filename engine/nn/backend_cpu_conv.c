/* backend_cpu_conv.c - the CPU backend's convolution and max pooling.
 * Convolution splits the batch across the team's threads: small first
 * layers run a direct kernel on padded tiles, the rest im2col in
 * cache-sized chunks into one sgemm per chunk, recomputed in the backward
 * pass instead of stored. Pooling keeps its argmax for the backward pass. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu_impl.h"

/* ---- convolution ------------------------------------------------------ */

/* The output columns [lo, hi) whose input column ow*stride - pad + kj
 * falls inside the image (0 <= it < W); the others read padding. */
static inline void
ow_range(const conv_geom *g, int kj, int *lo, int *hi)
{
	int s = g->stride, off = kj - g->pad;
	*lo = 0;
	*hi = g->wo;
	while (*lo < g->wo && *lo * s + off < 0)
		(*lo)++;
	while (*hi > *lo && (*hi - 1) * s + off >= g->w)
		(*hi)--;
}

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
				int ow_lo, ow_hi;
				ow_range(g, kj, &ow_lo, &ow_hi);
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
				int ow_lo, ow_hi;
				ow_range(g, kj, &ow_lo, &ow_hi);
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

void
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

void
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
				/* the reference's order (the first of equal maxima, a
				 * NaN kept where it comes first) as selects, not
				 * branches: random data mispredicts half of them */
				const int32_t base = 2 * oh * W;
				for (int ow = 0; ow < wo; ow++) {
					int c = 2 * ow;
					float m = r0[c], v;
					int32_t off = 0;
					int t;
					v = r0[c + 1];
					t = v > m;
					m = t ? v : m;
					off = t ? 1 : off;
					v = r1[c];
					t = v > m;
					m = t ? v : m;
					off = t ? W : off;
					v = r1[c + 1];
					t = v > m;
					m = t ? v : m;
					off = t ? W + 1 : off;
					y[oh * wo + ow] = m;
					ag[oh * wo + ow] = base + c + off;
				}
			}
		}
		return;
	}
	host_maxpool_planes(g, a->x, a->y, a->arg, p0, p1);
}

void
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

void
cpu_maxpool_bwd(backend *be, const conv_geom *g, const float *dy,
		const int32_t *arg, float *dx, int batch)
{
	struct pool_args a = {.g = g, .dy = dy, .carg = arg, .dx = dx,
			      .batch = batch};
	team_run(CTX(be)->team, maxpool_bwd_part, &a);
}

