/* backend_ref_seq.c - the reference backend's sequence ops (backend.h:
 * the transformer's embedding, layer norm, GELU and causal attention) as
 * plain C loops on one thread, under the rules of backend_ref.c: sums in
 * double in ascending order, exp our own (ref_exp), compiled with
 * -ffp-contract=off, so the same bits on any x86-64 CPU. */
#include <math.h>

#include "backend_ref_impl.h"

void
ref_embed_fwd(backend *be, const float *ids, const float *wte, const float *wpe,
	      float *y, int batch, int t, int e, int vocab)
{
	(void)be;
	for (int b = 0; b < batch; b++)
		for (int p = 0; p < t; p++) {
			const size_t r = (size_t)b * t + p;
			const int id = (int)ids[r];
			SL_ASSERT(id >= 0 && id < vocab); /* model_check_data */
			const float *we = wte + (size_t)id * e, *pe = wpe + (size_t)p * e;
			float *yr = y + r * e;
			for (int j = 0; j < e; j++)
				yr[j] = we[j] + pe[j];
		}
}

void
ref_embed_bwd(backend *be, const float *ids, const float *dy, float *dwte,
	      float *dwpe, int batch, int t, int e, int vocab, int acc)
{
	(void)be;
	for (int p = 0; p < t; p++)
		for (int j = 0; j < e; j++) {
			double s = 0.0;
			for (int b = 0; b < batch; b++)
				s += (double)dy[((size_t)b * t + p) * e + j];
			dwpe[(size_t)p * e + j] = (float)s;
		}
	/* each table entry: its own sum (the head's share first when acc)
	 * over the positions that hold its token, in (b, t) order */
	const size_t rows = (size_t)batch * t;
	double *sum = ref_acc_row(be, (size_t)e);
	for (int v = 0; v < vocab; v++) {
		float *dw = dwte + (size_t)v * e;
		for (int j = 0; j < e; j++)
			sum[j] = acc ? (double)dw[j] : 0.0;
		for (size_t r = 0; r < rows; r++) {
			if ((int)ids[r] != v)
				continue;
			const float *d = dy + r * e;
			for (int j = 0; j < e; j++)
				sum[j] += (double)d[j];
		}
		for (int j = 0; j < e; j++)
			dw[j] = (float)sum[j];
	}
}

void
ref_layernorm_fwd(backend *be, const float *x, const float *g, const float *b,
		  float *y, float *mean, float *rstd, int rows, int n, float eps)
{
	(void)be;
	for (int r = 0; r < rows; r++) {
		const float *xr = x + (size_t)r * n;
		float *yr = y + (size_t)r * n;
		double s = 0.0, v = 0.0;
		for (int j = 0; j < n; j++)
			s += (double)xr[j];
		const double m = s / n;
		for (int j = 0; j < n; j++) {
			const double d = (double)xr[j] - m;
			v += d * d;
		}
		const double rs = 1.0 / sqrt(v / n + (double)eps);
		mean[r] = (float)m;
		rstd[r] = (float)rs;
		for (int j = 0; j < n; j++)
			yr[j] = (float)(((double)xr[j] - m) * rs * (double)g[j] + (double)b[j]);
	}
}

void
ref_layernorm_bwd(backend *be, const float *x, const float *g, const float *mean,
		  const float *rstd, const float *dy, float *dx, float *dg, float *db,
		  int rows, int n)
{
	(void)be;
	for (int j = 0; j < n; j++) {
		double sg = 0.0, sb = 0.0;
		for (int r = 0; r < rows; r++) {
			const size_t i = (size_t)r * n + j;
			const double xh = ((double)x[i] - mean[r]) * rstd[r];
			sg += (double)dy[i] * xh;
			sb += (double)dy[i];
		}
		dg[j] = (float)sg;
		db[j] = (float)sb;
	}
	if (!dx)
		return;
	for (int r = 0; r < rows; r++) {
		const float *xr = x + (size_t)r * n, *dyr = dy + (size_t)r * n;
		const double m = mean[r], rs = rstd[r];
		double a = 0.0, c = 0.0; /* sums of dy g and dy g xh */
		for (int j = 0; j < n; j++) {
			const double d = (double)dyr[j] * g[j];
			a += d;
			c += d * (((double)xr[j] - m) * rs);
		}
		a /= n;
		c /= n;
		float *dxr = dx + (size_t)r * n;
		for (int j = 0; j < n; j++) {
			const double xh = ((double)xr[j] - m) * rs;
			dxr[j] = (float)(rs * ((double)dyr[j] * g[j] - a - xh * c));
		}
	}
}

#define GELU_K 0.79788456080286535588 /* sqrt(2 / pi) */
#define GELU_C 0.044715

/* tanh(u) from our exp: 1 - 2 / (e^{2u} + 1), exact in its limits */
static double
ref_tanh(double u)
{
	return 1.0 - 2.0 / (ref_exp(2.0 * u) + 1.0);
}

void
ref_gelu_fwd(backend *be, const float *x, float *y, size_t n)
{
	(void)be;
	for (size_t i = 0; i < n; i++) {
		const double v = x[i];
		y[i] = (float)(0.5 * v * (1.0 + ref_tanh(GELU_K * (v + GELU_C * v * v * v))));
	}
}

void
ref_gelu_bwd(backend *be, const float *x, const float *dy, float *dx, size_t n)
{
	(void)be;
	for (size_t i = 0; i < n; i++) {
		const double v = x[i];
		const double th = ref_tanh(GELU_K * (v + GELU_C * v * v * v));
		const double d = 0.5 * (1.0 + th) +
				 0.5 * v * (1.0 - th * th) * GELU_K * (1.0 + 3.0 * GELU_C * v * v);
		dx[i] = (float)((double)dy[i] * d);
	}
}

/* Each (sample, head): the row t of scores over j <= t, its softmax
 * (max subtracted, double), then y_t. */
void
ref_attn_fwd(backend *be, const float *qkv, float *y, float *att, int batch,
	     int t, int heads, int hd)
{
	const int e = heads * hd, e3 = 3 * e;
	const double scale = 1.0 / sqrt((double)hd);
	double *s = ref_acc_row(be, (size_t)t);
	for (int b = 0; b < batch; b++)
		for (int h = 0; h < heads; h++) {
			const float *base = qkv + (size_t)b * t * e3 + (size_t)h * hd;
			float *a = att + ((size_t)b * heads + h) * t * t;
			for (int i = 0; i < t; i++) {
				const float *q = base + (size_t)i * e3;
				double mx = -INFINITY;
				for (int j = 0; j <= i; j++) {
					const float *k = base + (size_t)j * e3 + e;
					double d = 0.0;
					for (int c = 0; c < hd; c++)
						d += (double)q[c] * (double)k[c];
					s[j] = d * scale;
					mx = s[j] > mx ? s[j] : mx;
				}
				double z = 0.0;
				for (int j = 0; j <= i; j++) {
					s[j] = ref_exp(s[j] - mx);
					z += s[j];
				}
				float *ar = a + (size_t)i * t;
				for (int j = 0; j < t; j++)
					ar[j] = j <= i ? (float)(s[j] / z) : 0.0f;
				float *yr = y + ((size_t)b * t + i) * e + (size_t)h * hd;
				for (int c = 0; c < hd; c++) {
					double acc = 0.0;
					for (int j = 0; j <= i; j++)
						acc += (double)ar[j] * (double)base[(size_t)j * e3 + 2 * e + c];
					yr[c] = (float)acc;
				}
			}
		}
}

void
ref_attn_bwd(backend *be, const float *qkv, const float *att, const float *dy,
	     float *dqkv, int batch, int t, int heads, int hd)
{
	const int e = heads * hd, e3 = 3 * e;
	const double scale = 1.0 / sqrt((double)hd);
	double *dz = ref_acc_row(be, (size_t)t * t); /* one (sample, head) */
	for (int b = 0; b < batch; b++)
		for (int h = 0; h < heads; h++) {
			const size_t off = (size_t)b * t * e3 + (size_t)h * hd;
			const float *base = qkv + off;
			float *dbase = dqkv + off;
			const float *a = att + ((size_t)b * heads + h) * t * t;
			const float *dyb = dy + (size_t)b * t * e + (size_t)h * hd;
			for (int i = 0; i < t; i++) {
				const float *dyr = dyb + (size_t)i * e;
				double r = 0.0;
				for (int j = 0; j <= i; j++) {
					const float *v = base + (size_t)j * e3 + 2 * e;
					double d = 0.0;
					for (int c = 0; c < hd; c++)
						d += (double)dyr[c] * (double)v[c];
					dz[(size_t)i * t + j] = d;
					r += (double)a[(size_t)i * t + j] * d;
				}
				for (int j = 0; j < t; j++)
					dz[(size_t)i * t + j] = j <= i ? (double)a[(size_t)i * t + j] *
										 (dz[(size_t)i * t + j] - r)
								       : 0.0;
			}
			for (int i = 0; i < t; i++)
				for (int c = 0; c < hd; c++) {
					double dq = 0.0, dk = 0.0, dv = 0.0;
					for (int j = 0; j <= i; j++) /* keys j <= i */
						dq += dz[(size_t)i * t + j] *
						      (double)base[(size_t)j * e3 + e + c];
					for (int j = i; j < t; j++) { /* queries j >= i */
						dk += dz[(size_t)j * t + i] * (double)base[(size_t)j * e3 + c];
						dv += (double)a[(size_t)j * t + i] *
						      (double)dyb[(size_t)j * e + c];
					}
					float *dr = dbase + (size_t)i * e3;
					dr[c] = (float)(dq * scale);
					dr[e + c] = (float)(dk * scale);
					dr[2 * e + c] = (float)dv;
				}
		}
}
