/* backend_host.c - what the host-memory backends (cpu, ref) share: memory,
 * the ops that move or compare floats without arithmetic (relu, layout
 * changes, max pooling), and the softmax loss with the backend's own exp
 * and log. Compiled like backend_ref.c (no fused multiply-add), so nothing
 * here depends on the CPU. Declared in backend_impl.h. */
#include <math.h>
#include <string.h>

#include "backend_impl.h"
#include "sl.h"

void *
host_alloc(backend *be, size_t bytes)
{
	(void)be;
	return sl_calloc_aligned(bytes, 1);
}

void
host_free(backend *be, void *p)
{
	(void)be;
	sl_free_aligned(p);
}

void
host_copy(backend *be, void *dst, const void *src, size_t bytes)
{
	(void)be;
	if (dst != src && bytes)
		memmove(dst, src, bytes);
}

void
host_zero(backend *be, void *dst, size_t bytes)
{
	(void)be;
	memset(dst, 0, bytes);
}

void
host_sync(backend *be)
{
	(void)be;
}

/* A float is NaN or infinite when its exponent bits are all ones: then
 * (bits & 0x7f800000) + 0x00800000 sets bit 31, which no finite float's
 * does. OR-ed over 16 floats at a time in four 4-lane vectors (GCC's and
 * Clang's vector extension: SSE2 on any x86-64), the check is one
 * streaming pass with no branch per float. */
typedef uint32_t u32x4 __attribute__((vector_size(16)));

int
host_all_finite(backend *be, const float *x, size_t n)
{
	(void)be;
	const uint32_t EXP = 0x7f800000u, ONE = 0x00800000u;
	const u32x4 exp4 = {EXP, EXP, EXP, EXP}, one4 = {ONE, ONE, ONE, ONE};
	u32x4 a = {0}, b = {0}, c = {0}, d = {0}, v0, v1, v2, v3;
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		memcpy(&v0, x + i, sizeof(v0));
		memcpy(&v1, x + i + 4, sizeof(v1));
		memcpy(&v2, x + i + 8, sizeof(v2));
		memcpy(&v3, x + i + 12, sizeof(v3));
		a |= (v0 & exp4) + one4;
		b |= (v1 & exp4) + one4;
		c |= (v2 & exp4) + one4;
		d |= (v3 & exp4) + one4;
	}
	a |= b | c | d;
	uint32_t acc = a[0] | a[1] | a[2] | a[3];
	for (; i < n; i++) {
		uint32_t w;
		memcpy(&w, x + i, sizeof(w));
		acc |= (w & EXP) + ONE;
	}
	return !(acc & 0x80000000u);
}

void
host_relu_fwd(backend *be, const float *x, float *y, size_t n)
{
	(void)be;
	for (size_t i = 0; i < n; i++)
		y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void
host_relu_bwd(backend *be, const float *y, const float *dy, float *dx,
	      size_t n)
{
	(void)be;
	for (size_t i = 0; i < n; i++)
		dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

/* [C][B][P] <-> [B][C][P], p floats a block */
static void
transpose_cb(const float *x, float *y, int c, int b, int p, int to_bcp)
{
	for (int ci = 0; ci < c; ci++)
		for (int bi = 0; bi < b; bi++) {
			size_t cb = ((size_t)ci * b + bi) * p;
			size_t bc = ((size_t)bi * c + ci) * p;
			memcpy(y + (to_bcp ? bc : cb), x + (to_bcp ? cb : bc),
			       sizeof(float) * p);
		}
}

void
host_cbp_to_bcp(backend *be, const float *x, float *y, int c, int b, int p)
{
	(void)be;
	transpose_cb(x, y, c, b, p, 1);
}

void
host_bcp_to_cbp(backend *be, const float *x, float *y, int c, int b, int p)
{
	(void)be;
	transpose_cb(x, y, c, b, p, 0);
}

void
host_maxpool_planes(const conv_geom *g, const float *x, float *y,
		    int32_t *arg, long p0, long p1)
{
	const int H = g->h, W = g->w, k = g->k, s = g->stride, pad = g->pad;
	const int ho = g->ho, wo = g->wo;
	for (long pl = p0; pl < p1; pl++) {
		const float *xp = x + (size_t)pl * H * W;
		float *yp = y + (size_t)pl * ho * wo;
		int32_t *ap = arg + (size_t)pl * ho * wo;
		for (int oh = 0; oh < ho; oh++)
			for (int ow = 0; ow < wo; ow++) {
				float best = -INFINITY;
				int32_t bi = -1;
				for (int ki = 0; ki < k; ki++) {
					int ih = oh * s - pad + ki;
					if (ih < 0 || ih >= H)
						continue;
					for (int kj = 0; kj < k; kj++) {
						int iw = ow * s - pad + kj;
						if (iw < 0 || iw >= W)
							continue;
						float v = xp[ih * W + iw];
						if (bi < 0 || v > best) {
							best = v;
							bi = ih * W + iw;
						}
					}
				}
				yp[oh * wo + ow] = best;
				ap[oh * wo + ow] = bi;
			}
	}
}

void
host_maxpool_bwd_planes(const conv_geom *g, const float *dy,
			const int32_t *arg, float *dx, long p0, long p1)
{
	const size_t in = (size_t)g->h * g->w, out = (size_t)g->ho * g->wo;
	for (long pl = p0; pl < p1; pl++) {
		float *d = dx + (size_t)pl * in;
		const float *dyp = dy + (size_t)pl * out;
		const int32_t *ap = arg + (size_t)pl * out;
		memset(d, 0, sizeof(float) * in);
		for (size_t j = 0; j < out; j++)
			if (ap[j] >= 0)
				d[ap[j]] += dyp[j];
	}
}

double
host_softmax_xent(const float *logits, const uint8_t *labels, float *dlogits,
		  int batch, int classes, int *correct,
		  double (*exp_fn)(double), double (*log_fn)(double))
{
	double loss = 0.0;
	int hits = 0;
	for (int r = 0; r < batch; r++) {
		const float *z = logits + (size_t)r * classes;
		float mx = z[0];
		int am = 0;
		for (int j = 1; j < classes; j++)
			if (z[j] > mx) {
				mx = z[j];
				am = j;
			}
		hits += am == labels[r];
		double sum = 0.0;
		for (int j = 0; j < classes; j++)
			sum += exp_fn((double)(z[j] - mx));
		double lse = log_fn(sum) + mx;
		loss += lse - z[labels[r]];
		if (dlogits) {
			float *d = dlogits + (size_t)r * classes;
			for (int j = 0; j < classes; j++)
				d[j] = (float)(exp_fn((double)z[j] - lse) / batch);
			d[labels[r]] -= 1.0f / (float)batch;
		}
	}
	if (correct)
		*correct = hits;
	return batch ? loss / batch : 0.0;
}
