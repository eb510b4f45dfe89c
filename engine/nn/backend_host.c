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

/* [C][P][B] <-> [B][C][P]: a transpose of the (C P) x B matrix, in tiles
 * of 16 x 16 so both sides are read and written a cache line at a time. */
#define TT 16
void
host_transpose(const float *x, float *y, size_t rows, size_t cols,
	       size_t lo, size_t hi)
{
	for (size_t r0 = lo; r0 < hi; r0 += TT)
		for (size_t c0 = 0; c0 < cols; c0 += TT) {
			size_t r1 = r0 + TT < hi ? r0 + TT : hi;
			size_t c1 = c0 + TT < cols ? c0 + TT : cols;
			for (size_t r = r0; r < r1; r++)
				for (size_t c = c0; c < c1; c++)
					y[c * rows + r] = x[r * cols + c];
		}
}

/* The part [lo, hi) of a batch gather (backend.h, gather): images lo..hi
 * for [B][dim]; for [dim][B], input values lo..hi of every image, 16
 * images at a time so each image's cache line is read once and each
 * output line written whole. */
void
host_gather(float *dst, const float *x, const uint32_t *idx, int batch,
	    int dim, int inner, int lo, int hi)
{
	if (!inner) {
		for (int b = lo; b < hi; b++)
			memcpy(dst + (size_t)b * dim, x + (size_t)idx[b] * dim,
			       sizeof(float) * (size_t)dim);
		return;
	}
	for (int b0 = 0; b0 < batch; b0 += 16) {
		const int nb = batch - b0 < 16 ? batch - b0 : 16;
		const float *src[16];
		for (int b = 0; b < nb; b++)
			src[b] = x + (size_t)idx[b0 + b] * dim;
		for (int j = lo; j < hi; j++) {
			float *d = dst + (size_t)j * batch + b0;
			for (int b = 0; b < nb; b++)
				d[b] = src[b][j];
		}
	}
}

void
host_cpb_to_bcp(backend *be, const float *x, float *y, int c, int b, int p)
{
	(void)be;
	host_transpose(x, y, (size_t)c * p, (size_t)b, 0, (size_t)c * p);
}

void
host_bcp_to_cpb(backend *be, const float *x, float *y, int c, int b, int p)
{
	(void)be;
	host_transpose(x, y, (size_t)b, (size_t)c * p, 0, (size_t)b);
}

/* Max pooling on [C][H][W][B], the batch innermost: every output takes the
 * first maximum of its window in row order (strictly greater replaces, so
 * a NaN that comes first stays), lane by lane. */
void
host_maxpool_fwd(const conv_geom *g, const float *x, float *y, int32_t *arg,
		 int batch, int c0, int c1)
{
	const int H = g->h, W = g->w, k = g->k, s = g->stride, pad = g->pad;
	const int ho = g->ho, wo = g->wo, B = batch;
	for (int c = c0; c < c1; c++)
		for (int oh = 0; oh < ho; oh++)
			for (int ow = 0; ow < wo; ow++) {
				size_t o = (((size_t)c * ho + oh) * wo + ow) * B;
				float *yo = y + o;
				int32_t *ao = arg + o;
				int first = 1;
				for (int ki = 0; ki < k; ki++) {
					int ih = oh * s - pad + ki;
					if (ih < 0 || ih >= H)
						continue;
					for (int kj = 0; kj < k; kj++) {
						int iw = ow * s - pad + kj;
						if (iw < 0 || iw >= W)
							continue;
						const int32_t pos = ih * W + iw;
						const float *xv = x + ((size_t)c * H * W + pos) * B;
						if (first) {
							for (int b = 0; b < B; b++) {
								yo[b] = xv[b];
								ao[b] = pos;
							}
							first = 0;
							continue;
						}
						for (int b = 0; b < B; b++) {
							int t = xv[b] > yo[b];
							yo[b] = t ? xv[b] : yo[b];
							ao[b] = t ? pos : ao[b];
						}
					}
				}
				if (first) /* a window of padding alone */
					for (int b = 0; b < B; b++) {
						yo[b] = -INFINITY;
						ao[b] = -1;
					}
			}
}

void
host_maxpool_bwd(const conv_geom *g, const float *dy, const int32_t *arg,
		 float *dx, int batch, int c0, int c1)
{
	const size_t in = (size_t)g->h * g->w, out = (size_t)g->ho * g->wo;
	const size_t B = (size_t)batch;
	for (int c = c0; c < c1; c++) {
		float *d = dx + (size_t)c * in * B;
		const float *dyc = dy + (size_t)c * out * B;
		const int32_t *ac = arg + (size_t)c * out * B;
		memset(d, 0, sizeof(float) * in * B);
		for (size_t j = 0; j < out; j++)
			for (size_t b = 0; b < B; b++) {
				int32_t a = ac[j * B + b];
				if (a >= 0)
					d[(size_t)a * B + b] += dyc[j * B + b];
			}
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

/* ---- the optimiser ------------------------------------------------------- */

void
host_opt_step(backend *be, float *w, const float *g, float *m, float *v,
	      size_t n, const opt_step *s)
{
	(void)be;
	const float wd = s->wd;
	if (!s->adam) {
		const float lr = s->lr, mu = s->mu;
		for (size_t i = 0; i < n; i++) {
			float gi = g[i] + wd * w[i];
			m[i] = mu * m[i] + gi;
			w[i] -= lr * (gi + mu * m[i]);
		}
		return;
	}
	const float b1 = s->b1, c1 = s->c1, b2 = s->b2, c2 = s->c2;
	const float shrink = s->shrink, eps = s->eps, ss = s->step_size,
		    bc2 = s->bc2_sqrt;
	for (size_t i = 0; i < n; i++) {
		float wi = w[i] * shrink;
		float gi = g[i] + wd * wi;
		m[i] = b1 * m[i] + c1 * gi;
		v[i] = b2 * v[i] + c2 * (gi * gi);
		float denom = sqrtf(v[i]) / bc2 + eps;
		w[i] = wi - ss * (m[i] / denom);
	}
}

double
host_sumsq(backend *be, const float *x, size_t n)
{
	(void)be;
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)x[i] * (double)x[i];
	return s;
}

/* ---- global average pooling and the option-A shortcut ------------------- */

#define AVG_CHUNK 64 /* images summed side by side (the sums stay per image) */

void
host_avgpool_fwd(const float *x, float *y, int c, int p, int batch, int c0,
		 int c1)
{
	double acc[AVG_CHUNK];
	for (int ch = c0; ch < c1; ch++) {
		const float *xc = x + (size_t)ch * p * batch;
		for (int b0 = 0; b0 < batch; b0 += AVG_CHUNK) {
			const int nb = SL_MIN(AVG_CHUNK, batch - b0);
			for (int b = 0; b < nb; b++)
				acc[b] = 0.0;
			for (int q = 0; q < p; q++) {
				const float *row = xc + (size_t)q * batch + b0;
				for (int b = 0; b < nb; b++)
					acc[b] += (double)row[b];
			}
			for (int b = 0; b < nb; b++)
				y[(size_t)(b0 + b) * c + ch] = (float)(acc[b] / p);
		}
	}
}

void
host_avgpool_bwd(const float *dy, float *dx, int c, int p, int batch, int c0,
		 int c1)
{
	const float fp = (float)p;
	for (int ch = c0; ch < c1; ch++)
		for (int q = 0; q < p; q++) {
			float *row = dx + ((size_t)ch * p + q) * batch;
			for (int b = 0; b < batch; b++)
				row[b] = dy[(size_t)b * c + ch] / fp;
		}
}

void
host_shortcut_fwd(const float *x, float *y, int cin, int h, int w, int cout,
		  int s, int batch, int acc, int co0, int co1)
{
	const int ho = shortcut_out_dim(h, s), wo = shortcut_out_dim(w, s);
	const int pad = (cout - cin) / 2;
	const size_t B = (size_t)batch;
	for (int co = co0; co < co1; co++) {
		float *yc = y + (size_t)co * ho * wo * B;
		const int ci = co - pad;
		if (ci < 0 || ci >= cin) {
			if (!acc)
				memset(yc, 0, sizeof(float) * ho * wo * B);
			continue;
		}
		for (int oh = 0; oh < ho; oh++)
			for (int ow = 0; ow < wo; ow++) {
				const float *src = x + (((size_t)ci * h + (size_t)oh * s) * w +
							(size_t)ow * s) * B;
				float *dst = yc + ((size_t)oh * wo + ow) * B;
				if (acc)
					for (size_t b = 0; b < B; b++)
						dst[b] += src[b];
				else
					memcpy(dst, src, sizeof(float) * B);
			}
	}
}

void
host_shortcut_bwd(const float *dy, float *dx, int cin, int h, int w, int cout,
		  int s, int batch, int acc, int ci0, int ci1)
{
	const int ho = shortcut_out_dim(h, s), wo = shortcut_out_dim(w, s);
	const int pad = (cout - cin) / 2;
	const size_t B = (size_t)batch;
	for (int ci = ci0; ci < ci1; ci++)
		for (int ih = 0; ih < h; ih++)
			for (int iw = 0; iw < w; iw++) {
				float *dst = dx + (((size_t)ci * h + ih) * w + iw) * B;
				if (ih % s || iw % s) {
					if (!acc)
						memset(dst, 0, sizeof(float) * B);
					continue;
				}
				const float *src = dy + (((size_t)(ci + pad) * ho + ih / s) * wo +
							 iw / s) * B;
				if (acc)
					for (size_t b = 0; b < B; b++)
						dst[b] += src[b];
				else
					memcpy(dst, src, sizeof(float) * B);
			}
}
