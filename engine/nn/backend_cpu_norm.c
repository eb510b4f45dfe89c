/* backend_cpu_norm.c - the CPU backend's batch normalization, global
 * average pooling and option-A shortcut on [C][P][B] (backend.h). Work is
 * split by channel over the team, and each channel is computed by one
 * thread in one order, so results do not depend on the thread count. A
 * channel's statistics are sums in double over eight interleaved lanes
 * (lane j takes the indices = j mod 8, the lanes then added in order), which
 * the vectorizer turns into vector adds without reassociating anything;
 * the elementwise parts run in float. The variance is summed in the mean's
 * pass, about the channel's first value. Results differ from ref's (one
 * double chain per sum) in the last bits only. Pooling and the shortcut
 * share ref's host loops (the same bits). */
#include <math.h>
#include <string.h>

#include "backend_cpu_impl.h"

#define LANES 8

/* The mean and the (biased) variance of x[0, n) in one pass: sums in
 * double over LANES lanes of d = x - x[0] and of d^2. Shifted by a value
 * of the data, the second sum does not cancel the way a raw sum of
 * squares does when the mean is large against the spread (test_parity's
 * last batch-norm shape, a mean 10^6 times its spread, fails unshifted). */
static inline void
lane_moments(const float *x, size_t n, double *mean, double *var)
{
	double a1[LANES] = {0}, a2[LANES] = {0}, s1 = 0.0, s2 = 0.0;
	const double k = (double)x[0];
	size_t i = 0;
	for (; i + LANES <= n; i += LANES)
		for (int j = 0; j < LANES; j++) {
			const double d = (double)x[i + j] - k;
			a1[j] += d;
			a2[j] += d * d;
		}
	for (int j = 0; j < LANES; j++) {
		s1 += a1[j];
		s2 += a2[j];
	}
	for (; i < n; i++) {
		const double d = (double)x[i] - k;
		s1 += d;
		s2 += d * d;
	}
	const double m1 = s1 / (double)n;
	*mean = k + m1;
	*var = SL_MAX(0.0, s2 / (double)n - m1 * m1);
}

struct bn_args {
	const float *x, *gamma, *beta, *mean_in, *invstd_in, *y;
	float *yout, *mean, *invstd, *run_mean, *run_var, *dy, *dx, *dgamma,
		*dbeta;
	int c, p, batch, training, relu;
	float momentum, eps;
};

SIMD_CLONES static void
bn_fwd_part(void *arg, int tid, int nt)
{
	struct bn_args *a = arg;
	const size_t n = (size_t)a->p * a->batch;
	long c0, c1;
	team_split(a->c, tid, nt, &c0, &c1);
	for (long ch = c0; ch < c1; ch++) {
		const float *xc = a->x + (size_t)ch * n;
		float *yc = a->yout + (size_t)ch * n;
		float mu, r;
		if (a->training) {
			double m, var;
			lane_moments(xc, n, &m, &var);
			const double mo = (double)a->momentum;
			const double unb = n > 1 ? var * (double)n / (double)(n - 1) : var;
			mu = (float)m;
			r = (float)(1.0 / sqrt(var + (double)a->eps));
			a->run_mean[ch] = (float)((1.0 - mo) * (double)a->run_mean[ch] + mo * m);
			a->run_var[ch] = (float)((1.0 - mo) * (double)a->run_var[ch] + mo * unb);
		} else {
			mu = a->run_mean[ch];
			r = (float)(1.0 / sqrt((double)a->run_var[ch] + (double)a->eps));
		}
		if (a->mean)
			a->mean[ch] = mu;
		if (a->invstd)
			a->invstd[ch] = r;
		const float g = a->gamma[ch], bt = a->beta[ch];
		if (a->relu) {
			for (size_t i = 0; i < n; i++) {
				const float v = g * ((xc[i] - mu) * r) + bt;
				yc[i] = v > 0.0f ? v : 0.0f;
			}
		} else {
			for (size_t i = 0; i < n; i++)
				yc[i] = g * ((xc[i] - mu) * r) + bt;
		}
	}
}

void
cpu_bn_fwd(backend *be, const float *x, const float *gamma, const float *beta,
	   float *y, float *mean, float *invstd, float *run_mean,
	   float *run_var, int c, int p, int batch, int training,
	   float momentum, float eps, int relu)
{
	struct bn_args a = {.x = x, .gamma = gamma, .beta = beta, .yout = y,
			    .mean = mean, .invstd = invstd, .run_mean = run_mean,
			    .run_var = run_var, .c = c, .p = p, .batch = batch,
			    .training = training, .relu = relu,
			    .momentum = momentum, .eps = eps};
	team_run(CTX(be)->team, bn_fwd_part, &a);
}

SIMD_CLONES static void
bn_bwd_part(void *arg, int tid, int nt)
{
	struct bn_args *a = arg;
	const size_t n = (size_t)a->p * a->batch;
	long c0, c1;
	team_split(a->c, tid, nt, &c0, &c1);
	for (long ch = c0; ch < c1; ch++) {
		const float *xc = a->x + (size_t)ch * n;
		float *dyc = a->dy + (size_t)ch * n;
		if (a->relu) {
			const float *yc = a->y + (size_t)ch * n;
			for (size_t i = 0; i < n; i++)
				dyc[i] = yc[i] > 0.0f ? dyc[i] : 0.0f;
		}
		const float mu = a->mean_in[ch], r = a->invstd_in[ch];
		double s1[LANES] = {0}, s2[LANES] = {0}, sdy = 0.0, sdyx = 0.0;
		size_t i = 0;
		for (; i + LANES <= n; i += LANES)
			for (int j = 0; j < LANES; j++) {
				const float xh = (xc[i + j] - mu) * r;
				s1[j] += (double)dyc[i + j];
				s2[j] += (double)dyc[i + j] * (double)xh;
			}
		for (int j = 0; j < LANES; j++) {
			sdy += s1[j];
			sdyx += s2[j];
		}
		for (; i < n; i++) {
			const float xh = (xc[i] - mu) * r;
			sdy += (double)dyc[i];
			sdyx += (double)dyc[i] * (double)xh;
		}
		a->dbeta[ch] = (float)sdy;
		a->dgamma[ch] = (float)sdyx;
		if (!a->dx)
			continue;
		float *dxc = a->dx + (size_t)ch * n;
		if (!a->training) {
			const float k = a->gamma[ch] * r;
			for (size_t q = 0; q < n; q++)
				dxc[q] = dyc[q] * k;
			continue;
		}
		const float k = a->gamma[ch] * r, m1 = (float)(sdy / (double)n),
			    m2 = (float)(sdyx / (double)n);
		for (size_t q = 0; q < n; q++) {
			const float xh = (xc[q] - mu) * r;
			dxc[q] = k * ((dyc[q] - m1) - xh * m2);
		}
	}
}

void
cpu_bn_bwd(backend *be, const float *x, const float *gamma, const float *mean,
	   const float *invstd, const float *y, float *dy, float *dx,
	   float *dgamma, float *dbeta, int c, int p, int batch, int training,
	   int relu)
{
	struct bn_args a = {.x = x, .gamma = gamma, .mean_in = mean,
			    .invstd_in = invstd, .y = y, .dy = dy, .dx = dx,
			    .dgamma = dgamma, .dbeta = dbeta, .c = c, .p = p,
			    .batch = batch, .training = training, .relu = relu};
	team_run(CTX(be)->team, bn_bwd_part, &a);
}

/* ---- pooling and the shortcut: ref's host loops, split by channel ------- */

struct chan_args {
	const float *in;
	float *out;
	int c, p, batch;             /* pooling */
	int cin, h, w, cout, s, acc; /* the shortcut */
	int op;                      /* 0, 1: pool fwd, bwd; 2, 3: shortcut */
};

static void
chan_part(void *arg, int tid, int nt)
{
	struct chan_args *a = arg;
	long c0, c1;
	team_split(a->op == 2 ? a->cout : a->op == 3 ? a->cin : a->c, tid, nt, &c0, &c1);
	if (c0 >= c1)
		return;
	switch (a->op) {
	case 0:
		host_avgpool_fwd(a->in, a->out, a->c, a->p, a->batch, (int)c0, (int)c1);
		break;
	case 1:
		host_avgpool_bwd(a->in, a->out, a->c, a->p, a->batch, (int)c0, (int)c1);
		break;
	case 2:
		host_shortcut_fwd(a->in, a->out, a->cin, a->h, a->w, a->cout, a->s, a->batch,
				  a->acc, (int)c0, (int)c1);
		break;
	default:
		host_shortcut_bwd(a->in, a->out, a->cin, a->h, a->w, a->cout, a->s, a->batch,
				  a->acc, (int)c0, (int)c1);
	}
}

void
cpu_avgpool_fwd(backend *be, const float *x, float *y, int c, int p, int batch)
{
	struct chan_args a = {.in = x, .out = y, .c = c, .p = p, .batch = batch, .op = 0};
	team_run(CTX(be)->team, chan_part, &a);
}

void
cpu_avgpool_bwd(backend *be, const float *dy, float *dx, int c, int p, int batch)
{
	struct chan_args a = {.in = dy, .out = dx, .c = c, .p = p, .batch = batch, .op = 1};
	team_run(CTX(be)->team, chan_part, &a);
}

void
cpu_shortcut_fwd(backend *be, const float *x, float *y, int cin, int h, int w,
		 int cout, int stride, int batch, int acc)
{
	struct chan_args a = {.in = x, .out = y, .batch = batch, .cin = cin, .h = h,
			      .w = w, .cout = cout, .s = stride, .acc = acc, .op = 2};
	team_run(CTX(be)->team, chan_part, &a);
}

void
cpu_shortcut_bwd(backend *be, const float *dy, float *dx, int cin, int h, int w,
		 int cout, int stride, int batch, int acc)
{
	struct chan_args a = {.in = dy, .out = dx, .batch = batch, .cin = cin, .h = h,
			      .w = w, .cout = cout, .s = stride, .acc = acc, .op = 3};
	team_run(CTX(be)->team, chan_part, &a);
}

/* ---- a residual block's end in one pass (backend.h residual_fwd/bwd) ----
 * Split by output channel; each vector of B images is one expression, the
 * one copy + shortcut_fwd + relu_fwd give (a + s rounds once; a padded
 * channel is a itself), so the bits are ref's for any thread count. */

struct res_args {
	const float *a, *x, *y, *dy;
	float *out, *da, *dx;
	int cin, h, w, cout, s, batch, relu;
};

static inline float
relu_if(float v, int relu)
{
	return relu && !(v > 0.0f) ? 0.0f : v;
}

SIMD_CLONES static void
res_fwd_part(void *arg, int tid, int nt)
{
	const struct res_args *r = arg;
	const int ho = shortcut_out_dim(r->h, r->s), wo = shortcut_out_dim(r->w, r->s);
	const int pad = (r->cout - r->cin) / 2, relu = r->relu;
	const size_t B = (size_t)r->batch, plane = (size_t)ho * wo * B;
	long c0, c1;
	team_split(r->cout, tid, nt, &c0, &c1);
	for (long co = c0; co < c1; co++) {
		const float *a = r->a + (size_t)co * plane;
		float *y = r->out + (size_t)co * plane;
		const long ci = co - pad;
		if (ci < 0 || ci >= r->cin) {
			for (size_t i = 0; i < plane; i++)
				y[i] = relu_if(a[i], relu);
			continue;
		}
		for (int oh = 0; oh < ho; oh++)
			for (int ow = 0; ow < wo; ow++) {
				const size_t o = ((size_t)oh * wo + ow) * B;
				const float *x = r->x + (((size_t)ci * r->h + (size_t)oh * r->s) * r->w +
							 (size_t)ow * r->s) * B;
				for (size_t b = 0; b < B; b++)
					y[o + b] = relu_if(a[o + b] + x[b], relu);
			}
	}
}

/* one row of B images of the masked gradient: into da and, when dx, dx */
static inline void
res_bwd_row(const float *y, const float *dy, float *da, float *dx, size_t B, int relu)
{
	for (size_t b = 0; b < B; b++) {
		const float d = relu && !(y[b] > 0.0f) ? 0.0f : dy[b];
		if (da)
			da[b] = d;
		if (dx)
			dx[b] = d;
	}
}

SIMD_CLONES static void
res_bwd_part(void *arg, int tid, int nt)
{
	const struct res_args *r = arg;
	const int s = r->s, ho = shortcut_out_dim(r->h, s), wo = shortcut_out_dim(r->w, s);
	const int pad = (r->cout - r->cin) / 2;
	const size_t B = (size_t)r->batch, plane = (size_t)ho * wo * B;
	long c0, c1;
	team_split(r->cout, tid, nt, &c0, &c1);
	for (long co = c0; co < c1; co++) {
		const size_t off = (size_t)co * plane;
		float *da = r->da ? r->da + off : NULL;
		const long ci = co - pad;
		if (ci < 0 || ci >= r->cin || !r->dx) {
			if (da)
				res_bwd_row(r->y + off, r->dy + off, da, NULL, plane, r->relu);
			continue;
		}
		for (int ih = 0; ih < r->h; ih++)
			for (int iw = 0; iw < r->w; iw++) {
				float *dx = r->dx + (((size_t)ci * r->h + ih) * r->w + iw) * B;
				if (ih % s || iw % s) {
					memset(dx, 0, sizeof(float) * B);
					continue;
				}
				const size_t o = off + ((size_t)(ih / s) * wo + iw / s) * B;
				res_bwd_row(r->y + o, r->dy + o, da ? r->da + o : NULL, dx, B, r->relu);
			}
	}
}

void
cpu_residual_fwd(backend *be, const float *a, const float *x, float *y, int cin, int h,
		 int w, int cout, int stride, int batch, int relu)
{
	struct res_args r = {.a = a, .x = x, .out = y, .cin = cin, .h = h, .w = w,
			     .cout = cout, .s = stride, .batch = batch, .relu = relu};
	team_run(CTX(be)->team, res_fwd_part, &r);
}

void
cpu_residual_bwd(backend *be, const float *y, const float *dy, float *da, float *dx,
		 int cin, int h, int w, int cout, int stride, int batch, int relu)
{
	struct res_args r = {.y = y, .dy = dy, .da = da, .dx = dx, .cin = cin, .h = h,
			     .w = w, .cout = cout, .s = stride, .batch = batch, .relu = relu};
	team_run(CTX(be)->team, res_bwd_part, &r);
}

/* ---- relu: branch-free vectors, split over the team when large -------- */

struct relu_args {
	const float *x, *y, *dy;
	float *out;
	size_t n;
};

#define RELU_TEAM 65536 /* below this many floats one thread does it */

SIMD_CLONES static void
relu_fwd_part(void *arg, int tid, int nt)
{
	const struct relu_args *r = arg;
	long lo, hi;
	team_split((long)((r->n + 15) / 16), tid, nt, &lo, &hi);
	const size_t i0 = SL_MIN((size_t)lo * 16, r->n), i1 = SL_MIN((size_t)hi * 16, r->n);
	for (size_t i = i0; i < i1; i++)
		r->out[i] = r->x[i] > 0.0f ? r->x[i] : 0.0f;
}

SIMD_CLONES static void
relu_bwd_part(void *arg, int tid, int nt)
{
	const struct relu_args *r = arg;
	long lo, hi;
	team_split((long)((r->n + 15) / 16), tid, nt, &lo, &hi);
	const size_t i0 = SL_MIN((size_t)lo * 16, r->n), i1 = SL_MIN((size_t)hi * 16, r->n);
	for (size_t i = i0; i < i1; i++)
		r->out[i] = r->y[i] > 0.0f ? r->dy[i] : 0.0f;
}

void
cpu_relu_fwd(backend *be, const float *x, float *y, size_t n)
{
	struct relu_args r = {.x = x, .out = y, .n = n};
	if (n < RELU_TEAM)
		relu_fwd_part(&r, 0, 1);
	else
		team_run(CTX(be)->team, relu_fwd_part, &r);
}

void
cpu_relu_bwd(backend *be, const float *y, const float *dy, float *dx, size_t n)
{
	struct relu_args r = {.y = y, .dy = dy, .out = dx, .n = n};
	if (n < RELU_TEAM)
		relu_bwd_part(&r, 0, 1);
	else
		team_run(CTX(be)->team, relu_bwd_part, &r);
}
