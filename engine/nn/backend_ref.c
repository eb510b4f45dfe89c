/* backend_ref.c - the reference backend ("device": "ref"): every op of
 * backend.h as plain C loops on one thread. No BLAS, no SIMD clones, no
 * runtime kernel choice, and no libm call whose result could depend on the
 * CPU: exp and log are our own polynomials on doubles (frexp and ldexp,
 * which are exact, are the only libm calls; sqrtf and sqrt are correctly rounded
 * by IEEE 754). The Makefile compiles this file with -ffp-contract=off, so
 * no multiply-add is fused: the same inputs give the same bits on any
 * x86-64 CPU. Sums run in double in a fixed order (ascending index), then
 * round to float once. It is the path for tests and recorded fixtures, not
 * for speed. The sequence ops (the transformer's) are backend_ref_seq.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ref_impl.h"

double *
ref_acc_row(backend *be, size_t n)
{
	ref_ctx *c = be->ctx;
	if (c->acc_cap < n) {
		free(c->acc);
		c->acc = malloc(sizeof(double) * n);
		SL_ASSERT(c->acc != NULL);
		c->acc_cap = n;
	}
	return c->acc;
}

/* ---- exp and log -------------------------------------------------------
 * libm's exp and log are not correctly rounded and glibc picks an FMA or
 * a plain variant by CPU, so they may differ in the last bit from machine
 * to machine. These use only +, -, *, / (IEEE-exact to the bit) and the
 * exact frexp/ldexp; both are within a few ulp of the true value. */

#define LN2_HI 6.93147180369123816490e-01 /* low 32 bits zero: k*LN2_HI exact */
#define LN2_LO 1.90821492927058770002e-10
#define INV_LN2 1.44269504088896338700e+00

double
ref_exp(double x)
{
	if (x != x)
		return x;
	if (x > 709.782712893384)
		return INFINITY;
	if (x < -745.1332191019412)
		return 0.0;
	/* x = k ln2 + r, |r| <= ln2/2 */
	double t = x * INV_LN2;
	double kd = t >= 0 ? (double)(long)(t + 0.5) : -(double)(long)(0.5 - t);
	double r = (x - kd * LN2_HI) - kd * LN2_LO;
	/* e^r by its Taylor series to r^14/14! (< 2^-56 for |r| <= 0.35) */
	double p = 1.0;
	for (int n = 14; n >= 1; n--)
		p = 1.0 + p * r / n;
	return ldexp(p, (int)kd);
}

static double
ref_log(double x)
{
	if (x != x || x < 0)
		return NAN;
	if (x == 0)
		return -INFINITY;
	if (x == INFINITY)
		return x;
	int e;
	double m = frexp(x, &e); /* x = m 2^e, m in [0.5, 1) */
	if (m < 0.70710678118654752440) {
		m *= 2.0;
		e--;
	}
	/* log m = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...), |s| <= 0.172 */
	double s = (m - 1.0) / (m + 1.0), s2 = s * s;
	double p = 0.0;
	for (int n = 12; n >= 1; n--)
		p = s2 * (1.0 / (2 * n + 1) + p);
	double logm = 2.0 * s + 2.0 * s * p;
	return (double)e * LN2_HI + ((double)e * LN2_LO + logm);
}

static void
ref_set_threads(backend *be, int n)
{
	(void)be;
	(void)n; /* always one thread */
}

/* ---- gemm ------------------------------------------------------------ */

/* C = alpha op(A) op(B) + beta C. Each C[i][j] is the double sum of
 * A[i][kk] B[kk][j] over kk = 0, 1, ..., k-1 in that order (the loop form
 * below only changes the memory order, never the order of the adds), then
 * alpha and beta, rounded to float once. beta == 0 never reads C. */
static void
ref_gemm(backend *be, int ta, int tb, int m, int n, int k, float alpha,
	 const float *a, int lda, const float *b, int ldb, float beta, float *c,
	 int ldc)
{
	const size_t ai = ta ? 1 : (size_t)lda, ak = ta ? (size_t)lda : 1;
	double *acc = ref_acc_row(be, (size_t)(n > 0 ? n : 1));
	for (int i = 0; i < m; i++) {
		const float *arow = a + (size_t)i * ai;
		if (tb) { /* rows of B^T are contiguous in kk: dot products */
			for (int j = 0; j < n; j++) {
				const float *brow = b + (size_t)j * ldb;
				double s = 0.0;
				for (int kk = 0; kk < k; kk++)
					s += (double)arow[kk * ak] * (double)brow[kk];
				acc[j] = s;
			}
		} else { /* rows of B are contiguous in j: a row of sums */
			for (int j = 0; j < n; j++)
				acc[j] = 0.0;
			for (int kk = 0; kk < k; kk++) {
				const double av = arow[kk * ak];
				const float *brow = b + (size_t)kk * ldb;
				for (int j = 0; j < n; j++)
					acc[j] += av * (double)brow[j];
			}
		}
		float *crow = c + (size_t)i * ldc;
		for (int j = 0; j < n; j++) {
			double v = (double)alpha * acc[j];
			if (beta != 0.0f)
				v += (double)beta * (double)crow[j];
			crow[j] = (float)v;
		}
	}
}

/* ---- dense ----------------------------------------------------------- */

/* y = relu?(y + b) row by row, in float as the cpu backend does */
static void
add_bias(float *y, const float *b, size_t rows, size_t cols, int relu)
{
	if (!b)
		return; /* no bias (the tied LM head; never with relu) */
	for (size_t r = 0; r < rows; r++) {
		float *row = y + r * cols;
		for (size_t j = 0; j < cols; j++) {
			float v = row[j] + b[j];
			row[j] = relu && !(v > 0.0f) ? 0.0f : v;
		}
	}
}

/* dy = dy where y > 0, else 0 */
static void
relu_mask(float *dy, const float *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

static void
ref_linear_fwd(backend *be, const float *x, const float *w, const float *b,
	       float *y, int batch, int in, int out, int relu)
{
	ref_gemm(be, 0, 1, batch, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
	add_bias(y, b, (size_t)batch, (size_t)out, relu);
}

static void
ref_linear_bwd(backend *be, const float *x, const float *w, const float *y,
	       float *dy, float *dx, float *dw, float *db, int batch, int in,
	       int out, int relu)
{
	if (relu)
		relu_mask(dy, y, (size_t)batch * out);
	ref_gemm(be, 1, 0, out, in, batch, 1.0f, dy, out, x, in, 0.0f, dw, in);
	for (int j = 0; db && j < out; j++) {
		double s = 0.0;
		for (int r = 0; r < batch; r++)
			s += dy[(size_t)r * out + j];
		db[j] = (float)s;
	}
	if (dx)
		ref_gemm(be, 0, 0, batch, in, out, 1.0f, dy, out, w, in, 0.0f, dx,
			 in);
}

/* ---- convolution ----------------------------------------------------- */

/* Weights are w[co][(ci k + ki) k + kj]; activations [C][H][W][B] (the
 * batch innermost). Each sum runs in the order it did when activations
 * were [C][B][H][W], so the bits are those of every earlier release. */
#define AT(c, h, w, H, W, B, b) ((((size_t)(c) * (H) + (h)) * (W) + (w)) * (B) + (b))

static void
ref_conv_fwd(backend *be, const conv_geom *g, const float *x, const float *w,
	     const float *b, float *y, int batch, int relu)
{
	(void)be;
	const int H = g->h, W = g->w, k = g->k, s = g->stride, pad = g->pad;
	const int ho = g->ho, wo = g->wo, K = g->cin * k * k;
	for (int co = 0; co < g->cout; co++)
		for (int bi = 0; bi < batch; bi++)
			for (int oh = 0; oh < ho; oh++)
				for (int ow = 0; ow < wo; ow++) {
					double acc = 0.0;
					for (int ci = 0; ci < g->cin; ci++) {
						const float *wk = w + (size_t)co * K + (size_t)ci * k * k;
						for (int ki = 0; ki < k; ki++) {
							int ih = oh * s - pad + ki;
							if (ih < 0 || ih >= H)
								continue;
							for (int kj = 0; kj < k; kj++) {
								int iw = ow * s - pad + kj;
								if (iw < 0 || iw >= W)
									continue;
								acc += (double)wk[ki * k + kj] *
								       (double)x[AT(ci, ih, iw, H, W, batch, bi)];
							}
						}
					}
					float v = (float)acc + b[co];
					y[AT(co, oh, ow, ho, wo, batch, bi)] =
						relu && !(v > 0.0f) ? 0.0f : v;
				}
}

/* Output index o along one axis that input index i meets through kernel
 * tap t, or -1: i = o s - pad + t. */
static int
conv_src(int i, int t, int s, int pad, int n_out)
{
	int num = i + pad - t;
	if (num < 0 || num % s)
		return -1;
	return num / s < n_out ? num / s : -1;
}

static void
ref_conv_bwd(backend *be, const conv_geom *g, const float *x, const float *w,
	     const float *y, float *dy, float *dx, float *dw, float *db,
	     int batch, int relu)
{
	(void)be;
	const int H = g->h, W = g->w, k = g->k, s = g->stride, pad = g->pad;
	const int ho = g->ho, wo = g->wo, K = g->cin * k * k;
	const size_t P = (size_t)ho * wo;
	if (relu)
		relu_mask(dy, y, (size_t)g->cout * batch * P);
	for (int co = 0; co < g->cout; co++) {
		double sb = 0.0;
		for (int bi = 0; bi < batch; bi++)
			for (size_t j = 0; j < P; j++)
				sb += dy[((size_t)co * P + j) * batch + bi];
		db[co] = (float)sb;
		for (int ci = 0; ci < g->cin; ci++)
			for (int ki = 0; ki < k; ki++)
				for (int kj = 0; kj < k; kj++) {
					double acc = 0.0;
					for (int bi = 0; bi < batch; bi++) {
						for (int oh = 0; oh < ho; oh++) {
							int ih = oh * s - pad + ki;
							if (ih < 0 || ih >= H)
								continue;
							for (int ow = 0; ow < wo; ow++) {
								int iw = ow * s - pad + kj;
								if (iw < 0 || iw >= W)
									continue;
								acc += (double)dy[AT(co, oh, ow, ho, wo, batch, bi)] *
								       (double)x[AT(ci, ih, iw, H, W, batch, bi)];
							}
						}
					}
					dw[(size_t)co * K + (size_t)(ci * k + ki) * k + kj] = (float)acc;
				}
	}
	if (!dx)
		return;
	for (int ci = 0; ci < g->cin; ci++)
		for (int bi = 0; bi < batch; bi++)
			for (int ih = 0; ih < H; ih++)
				for (int iw = 0; iw < W; iw++) {
					double acc = 0.0;
					for (int co = 0; co < g->cout; co++) {
						const float *wk = w + (size_t)co * K + (size_t)ci * k * k;
						for (int ki = 0; ki < k; ki++) {
							int oh = conv_src(ih, ki, s, pad, ho);
							if (oh < 0)
								continue;
							for (int kj = 0; kj < k; kj++) {
								int ow = conv_src(iw, kj, s, pad, wo);
								if (ow < 0)
									continue;
								acc += (double)wk[ki * k + kj] *
								       (double)dy[AT(co, oh, ow, ho, wo, batch, bi)];
							}
						}
					}
					dx[AT(ci, ih, iw, H, W, batch, bi)] = (float)acc;
				}
}

/* ---- batch normalization, global pooling, the shortcut ---------------- */

/* Channel ch's n values are x[ch n, (ch + 1) n): the mean's sum, then the
 * squared deviations' sum from it, both in double in ascending index. */
static void
ref_bn_fwd(backend *be, const float *x, const float *gamma, const float *beta,
	   float *y, float *mean, float *invstd, float *run_mean,
	   float *run_var, int c, int p, int batch, int training,
	   float momentum, float eps, int relu)
{
	(void)be;
	const size_t n = (size_t)p * batch;
	for (int ch = 0; ch < c; ch++) {
		const float *xc = x + (size_t)ch * n;
		float *yc = y + (size_t)ch * n;
		float mu, r;
		if (training) {
			double s = 0.0, v = 0.0;
			for (size_t i = 0; i < n; i++)
				s += (double)xc[i];
			const double m = s / (double)n;
			for (size_t i = 0; i < n; i++) {
				const double d = (double)xc[i] - m;
				v += d * d;
			}
			const double var = v / (double)n, mo = (double)momentum;
			const double unb = n > 1 ? var * (double)n / (double)(n - 1) : var;
			mu = (float)m;
			r = (float)(1.0 / sqrt(var + (double)eps));
			run_mean[ch] = (float)((1.0 - mo) * (double)run_mean[ch] + mo * m);
			run_var[ch] = (float)((1.0 - mo) * (double)run_var[ch] + mo * unb);
		} else {
			mu = run_mean[ch];
			r = (float)(1.0 / sqrt((double)run_var[ch] + (double)eps));
		}
		if (mean)
			mean[ch] = mu;
		if (invstd)
			invstd[ch] = r;
		const float g = gamma[ch], bt = beta[ch];
		for (size_t i = 0; i < n; i++) {
			const float xh = (xc[i] - mu) * r;
			const float v = g * xh + bt;
			yc[i] = relu && !(v > 0.0f) ? 0.0f : v;
		}
	}
}

static void
ref_bn_bwd(backend *be, const float *x, const float *gamma, const float *mean,
	   const float *invstd, const float *y, float *dy, float *dx,
	   float *dgamma, float *dbeta, int c, int p, int batch, int training,
	   int relu)
{
	(void)be;
	const size_t n = (size_t)p * batch;
	if (relu)
		relu_mask(dy, y, (size_t)c * n);
	for (int ch = 0; ch < c; ch++) {
		const float *xc = x + (size_t)ch * n, *dyc = dy + (size_t)ch * n;
		const double mu = mean[ch], r = invstd[ch];
		double sdy = 0.0, sdyx = 0.0;
		for (size_t i = 0; i < n; i++) {
			const double xh = ((double)xc[i] - mu) * r;
			sdy += (double)dyc[i];
			sdyx += (double)dyc[i] * xh;
		}
		dbeta[ch] = (float)sdy;
		dgamma[ch] = (float)sdyx;
		if (!dx)
			continue;
		float *dxc = dx + (size_t)ch * n;
		if (!training) {
			const float k = gamma[ch] * invstd[ch];
			for (size_t i = 0; i < n; i++)
				dxc[i] = dyc[i] * k;
			continue;
		}
		const double k = (double)gamma[ch] * r, a = sdy / (double)n,
			     bb = sdyx / (double)n;
		for (size_t i = 0; i < n; i++) {
			const double xh = ((double)xc[i] - mu) * r;
			dxc[i] = (float)(k * (((double)dyc[i] - a) - xh * bb));
		}
	}
}

static void
ref_avgpool_fwd(backend *be, const float *x, float *y, int c, int p, int batch)
{
	(void)be;
	host_avgpool_fwd(x, y, c, p, batch, 0, c);
}

static void
ref_avgpool_bwd(backend *be, const float *dy, float *dx, int c, int p, int batch)
{
	(void)be;
	host_avgpool_bwd(dy, dx, c, p, batch, 0, c);
}

static void
ref_shortcut_fwd(backend *be, const float *x, float *y, int cin, int h, int w,
		 int cout, int stride, int batch, int acc)
{
	(void)be;
	host_shortcut_fwd(x, y, cin, h, w, cout, stride, batch, acc, 0, cout);
}

static void
ref_shortcut_bwd(backend *be, const float *dy, float *dx, int cin, int h, int w,
		 int cout, int stride, int batch, int acc)
{
	(void)be;
	host_shortcut_bwd(dy, dx, cin, h, w, cout, stride, batch, acc, 0, cin);
}

/* ---- loss and updates ------------------------------------------------ */

static double
ref_softmax_xent(backend *be, const float *logits, const uint8_t *labels,
		 float *dlogits, int batch, int classes, int *correct)
{
	(void)be;
	return host_softmax_xent(logits, labels, dlogits, batch, classes,
				 correct, ref_exp, ref_log);
}

static void
ref_sgd(backend *be, float *w, const float *g, float *m, size_t n, float lr,
	float mu, float wd)
{
	(void)be;
	for (size_t i = 0; i < n; i++) {
		float gi = g[i] + wd * w[i];
		if (m) {
			m[i] = mu * m[i] + gi;
			w[i] -= lr * m[i];
		} else {
			w[i] -= lr * gi;
		}
	}
}

static void
ref_dc_grad(backend *be, size_t n, const float *g, const float *w,
	    const float *bak, float *ms, float lambda, float m, float eps,
	    float *out)
{
	(void)be;
	for (size_t i = 0; i < n; i++) {
		float g2 = g[i] * g[i];
		float lam = lambda;
		if (ms) {
			ms[i] = m * ms[i] + (1.0f - m) * g2;
			lam = lambda / sqrtf(ms[i] + eps);
		}
		out[i] = g[i] + lam * g2 * (w[i] - bak[i]);
	}
}

static void
ref_axpy(backend *be, size_t n, float a, const float *x, float *y)
{
	(void)be;
	for (size_t i = 0; i < n; i++)
		y[i] += a * x[i];
}

static void
ref_scal(backend *be, size_t n, float a, float *y)
{
	(void)be;
	for (size_t i = 0; i < n; i++)
		y[i] *= a;
}

/* ---- table and lifetime ---------------------------------------------- */

static void
ref_destroy(backend *be)
{
	ref_ctx *c = be->ctx;
	free(c->acc);
	free(c);
	free(be);
}

static void
ref_maxpool_fwd(backend *be, const conv_geom *g, const float *x, float *y,
		int32_t *arg, int batch)
{
	(void)be;
	host_maxpool_fwd(g, x, y, arg, batch, 0, g->cin);
}

static void
ref_maxpool_bwd(backend *be, const conv_geom *g, const float *dy,
		const int32_t *arg, float *dx, int batch)
{
	(void)be;
	host_maxpool_bwd(g, dy, arg, dx, batch, 0, g->cin);
}

const backend_ops backend_ref_ops = {
	.name = "ref",
	HOST_MEMORY_OPS,
	.destroy = ref_destroy,
	.set_threads = ref_set_threads,
	.gemm = ref_gemm,
	.linear_fwd = ref_linear_fwd,
	.linear_bwd = ref_linear_bwd,
	.conv_fwd = ref_conv_fwd,
	.conv_bwd = ref_conv_bwd,
	.maxpool_fwd = ref_maxpool_fwd,
	.maxpool_bwd = ref_maxpool_bwd,
	.relu_fwd = host_relu_fwd,
	.relu_bwd = host_relu_bwd,
	.cpb_to_bcp = host_cpb_to_bcp,
	.bcp_to_cpb = host_bcp_to_cpb,
	.bn_fwd = ref_bn_fwd,
	.bn_bwd = ref_bn_bwd,
	.avgpool_fwd = ref_avgpool_fwd,
	.avgpool_bwd = ref_avgpool_bwd,
	.shortcut_fwd = ref_shortcut_fwd,
	.shortcut_bwd = ref_shortcut_bwd,
	.embed_fwd = ref_embed_fwd,
	.embed_bwd = ref_embed_bwd,
	.layernorm_fwd = ref_layernorm_fwd,
	.layernorm_bwd = ref_layernorm_bwd,
	.gelu_fwd = ref_gelu_fwd,
	.gelu_bwd = ref_gelu_bwd,
	.attn_fwd = ref_attn_fwd,
	.attn_bwd = ref_attn_bwd,
	.softmax_xent = ref_softmax_xent,
	.sgd = ref_sgd,
	.opt_step = host_opt_step,
	.sumsq = host_sumsq,
	.dc_grad = ref_dc_grad,
	.axpy = ref_axpy,
	.scal = ref_scal,
	.all_finite = host_all_finite,
};

/* nthreads is accepted and ignored: the reference path is one thread. */
static int
ref_open(int nthreads, backend **out)
{
	(void)nthreads;
	*out = NULL;
	backend *be = calloc(1, sizeof(*be));
	ref_ctx *c = calloc(1, sizeof(*c));
	if (!be || !c) {
		free(be);
		free(c);
		return -SL_ENOMEM;
	}
	be->ops = &backend_ref_ops;
	be->ctx = c;
	*out = be;
	return 0;
}

static int
ref_probe(char *why)
{
	(void)why;
	return 1;
}

const backend_class backend_ref_class = {
	.name = "ref",
	.about = "plain C loops on one thread, the same bits on every x86-64 "
		 "(tests and fixtures; slow)",
	.probe = ref_probe,
	.open = ref_open,
	.auto_pick = 0,
};
