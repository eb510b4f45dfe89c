/* backend_cpu.c - the CPU backend: OpenBLAS sgemm (single-threaded) under
 * our own fork-join team, so both cores stay busy for the whole step and not
 * only inside BLAS. Dense ops split their work by output columns so threads
 * never write the same data. Convolution and pooling (direct kernels, no
 * BLAS) live in backend_cpu_conv.c; this is the only file that includes
 * cblas.h. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu_impl.h"
#include "blas_pick.h"

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

void
cpu_sgemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
	  const float *b, int ldb, float beta, float *c, int ldc)
{
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

/* This thread's share [lo, hi) of [0, n): all of it for thread 0 when the
 * op runs on one thread (par 0), nothing for the others. The share's
 * width, 0 or less when there is nothing to do. */
static int
share16(int n, int par, int tid, int nt, int *lo, int *hi)
{
	*lo = 0;
	*hi = n;
	if (!par)
		return tid ? 0 : n;
	split16(n, tid, nt, lo, hi);
	return *hi - *lo;
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
	int lo, hi, cols = share16(a->out, a->par, tid, nt, &lo, &hi);
	if (cols <= 0)
		return;
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, a->batch, cols,
		    a->in, 1.0f, a->x, a->in, a->w + (size_t)lo * a->in, a->in,
		    0.0f, a->yout + lo, a->out);
	for (int r = 0; a->b && r < a->batch; r++) { /* b NULL: no bias */
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
	int lo, hi, cols = share16(a->out, a->par, tid, nt, &lo, &hi);
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
	if (!a->db)
		return; /* no bias */
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
	int lo, hi;
	if (share16(a->in, a->par, tid, nt, &lo, &hi) <= 0)
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

/* ---- loss and updates ------------------------------------------------- */

static double
cpu_softmax_xent(backend *be, const float *logits, const uint8_t *labels,
		 float *dlogits, int batch, int classes, int *correct)
{
	(void)be;
	return host_softmax_xent(logits, labels, dlogits, batch, classes,
				 correct, exp, log);
}

/* all_finite over the team: each thread checks a 16-aligned share */
struct finite_args {
	const float *x;
	size_t n;
	int ok[CPU_MAX_THREADS];
};

static void
finite_part(void *p, int tid, int nt)
{
	struct finite_args *a = p;
	long lo, hi;
	team_split((long)((a->n + 15) / 16), tid, nt, &lo, &hi);
	size_t i0 = (size_t)lo * 16, i1 = SL_MIN((size_t)hi * 16, a->n);
	a->ok[tid] = i1 <= i0 || host_all_finite(NULL, a->x + i0, i1 - i0);
}

static int
cpu_all_finite(backend *be, const float *x, size_t n)
{
	struct finite_args a = {.x = x, .n = n};
	team_run(CTX(be)->team, finite_part, &a);
	int ok = 1;
	for (int t = 0; t < team_size(CTX(be)->team); t++)
		ok &= a.ok[t];
	return ok;
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

/* y += a x, or y *= a (x NULL), elementwise: on the team from 64 K
 * floats (a residual net's gradient sums are maps of a few MB), each
 * element the same whatever the split */
struct axpy_args {
	size_t n;
	float a;
	const float *x;
	float *y;
};

SIMD_CLONES static void
axpy_part(void *p, int tid, int nt)
{
	struct axpy_args *a = p;
	long lo, hi;
	team_split((long)((a->n + 15) / 16), tid, nt, &lo, &hi);
	size_t i0 = SL_MIN((size_t)lo * 16, a->n), i1 = SL_MIN((size_t)hi * 16, a->n);
	const float f = a->a, *x = a->x;
	float *y = a->y;
	if (x)
		for (size_t i = i0; i < i1; i++)
			y[i] += f * x[i];
	else
		for (size_t i = i0; i < i1; i++)
			y[i] *= f;
}

static void
axpy_run(backend *be, struct axpy_args *a)
{
	if (a->n < 65536)
		axpy_part(a, 0, 1);
	else
		team_run(CTX(be)->team, axpy_part, a);
}

static void
cpu_axpy(backend *be, size_t n, float a, const float *x, float *y)
{
	axpy_run(be, &(struct axpy_args){.n = n, .a = a, .x = x, .y = y});
}

static void
cpu_scal(backend *be, size_t n, float a, float *y)
{
	axpy_run(be, &(struct axpy_args){.n = n, .a = a, .y = y});
}

/* ---- table and lifetime ----------------------------------------------- */

static void cpu_destroy(backend *be);

static void
cpu_describe(backend *be, char *buf, size_t len)
{
	const char *kernel, *config, *isa;
	backend_cpu_blas(&kernel, &config, &isa);
	snprintf(buf, len, "OpenBLAS %s, our kernels %s, %d thread%s", kernel ? kernel : "?",
		 isa, team_size(CTX(be)->team), team_size(CTX(be)->team) == 1 ? "" : "s");
}

static void
cpu_set_threads(backend *be, int n)
{
	team_set_active(CTX(be)->team, n);
}

static const backend_ops cpu_ops = {
	.name = "cpu",
	HOST_MEMORY_OPS,
	.destroy = cpu_destroy,
	.set_threads = cpu_set_threads,
	.gemm = cpu_gemm,
	.linear_fwd = cpu_linear_fwd,
	.linear_bwd = cpu_linear_bwd,
	.conv_fwd = cpu_conv_fwd,
	.conv_bwd = cpu_conv_bwd,
	.maxpool_fwd = cpu_maxpool_fwd,
	.maxpool_bwd = cpu_maxpool_bwd,
	.relu_fwd = cpu_relu_fwd,
	.relu_bwd = cpu_relu_bwd,
	.cpb_to_bcp = cpu_cpb_to_bcp,
	.bcp_to_cpb = cpu_bcp_to_cpb,
	.bn_fwd = cpu_bn_fwd,
	.bn_bwd = cpu_bn_bwd,
	.avgpool_fwd = cpu_avgpool_fwd,
	.avgpool_bwd = cpu_avgpool_bwd,
	.shortcut_fwd = cpu_shortcut_fwd,
	.shortcut_bwd = cpu_shortcut_bwd,
	.residual_fwd = cpu_residual_fwd,
	.residual_bwd = cpu_residual_bwd,
	.embed_fwd = cpu_embed_fwd,
	.embed_bwd = cpu_embed_bwd,
	.layernorm_fwd = cpu_layernorm_fwd,
	.layernorm_bwd = cpu_layernorm_bwd,
	.gelu_fwd = cpu_gelu_fwd,
	.gelu_bwd = cpu_gelu_bwd,
	.attn_fwd = cpu_attn_fwd,
	.attn_bwd = cpu_attn_bwd,
	.gather = cpu_gather,
	.softmax_xent = cpu_softmax_xent,
	.sgd = cpu_sgd,
	.opt_step = host_opt_step,
	.sumsq = host_sumsq,
	.dc_grad = cpu_dc_grad,
	.axpy = cpu_axpy,
	.scal = cpu_scal,
	.all_finite = cpu_all_finite,
	.describe = cpu_describe,
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
	for (size_t t = 0; t < sizeof(c->buf) / sizeof(c->buf[0]); t++)
		sl_free_aligned(c->buf[t]);
	sl_free_aligned(c->seq);
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
#if defined(SL_FORCE_ISA) /* one clone, built alone */
	*isa = SL_FORCE_ISA == 4 ? "x86-64-v4 (forced)" : SL_FORCE_ISA == 3 ? "x86-64-v3 (forced)"
								  : "x86-64 (forced)";
#else
	__builtin_cpu_init();
	*isa = __builtin_cpu_supports("x86-64-v4") ? "x86-64-v4"
	       : __builtin_cpu_supports("x86-64-v3") ? "x86-64-v3" : "x86-64";
#endif
}

const char *
backend_cpu_blas_why(const char **library)
{
	blas_cpu f;
	blas_cpu_now(&f);
	blas_why why;
	blas_decide(getenv("OPENBLAS_CORETYPE"), getenv("STALELAB_BLAS"), openblas_get_corename(),
		    &f, &why);
	const char *lib = getenv("STALELAB_BLAS_LIBRARY");
	*library = why == BLAS_PICKED && lib ? lib : "";
	return blas_why_name(why);
}

int
backend_cpu_blas_check(char *err)
{
	enum { M = 67, N = 131, K = 97 };
	float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
	float *c = malloc(sizeof(float) * M * N);
	int rc = 0;
	if (!a || !b || !c) {
		rc = sl_fail(err, SL_ENOMEM, "the BLAS check: out of memory");
		goto out;
	}
	uint32_t s = 12345;
	for (int i = 0; i < M * K; i++)
		a[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
	for (int i = 0; i < K * N; i++)
		b[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
	openblas_set_num_threads(1);
	/* C[M x N] = op(A) op(B) with k = K, as the layers use them: A B,
	 * A^T B (A stored K x M) and A B^T (B stored N x K) */
	static const struct {
		CBLAS_TRANSPOSE ta, tb;
		const char *name;
	} cases[] = {{CblasNoTrans, CblasNoTrans, "A B"},
		     {CblasTrans, CblasNoTrans, "A^T B"},
		     {CblasNoTrans, CblasTrans, "A B^T"}};
	for (size_t t = 0; t < sizeof(cases) / sizeof(cases[0]) && rc == 0; t++) {
		int m = M, n = N, k = K;
		int lda = cases[t].ta == CblasTrans ? M : K, ldb = cases[t].tb == CblasTrans ? K : N;
		cblas_sgemm(CblasRowMajor, cases[t].ta, cases[t].tb, m, n, k, 1.0f, a, lda, b, ldb,
			    0.0f, c, n);
		double worst = 0;
		for (int i = 0; i < m; i++)
			for (int j = 0; j < n; j++) {
				double ref = 0, mag = 0;
				for (int p = 0; p < k; p++) {
					double x = cases[t].ta == CblasTrans ? a[p * lda + i]
									     : a[i * lda + p];
					double y = cases[t].tb == CblasTrans ? b[j * ldb + p]
									     : b[p * ldb + j];
					ref += x * y;
					mag += fabs(x * y);
				}
				double e = fabs(c[i * n + j] - ref) / (mag > 0 ? mag : 1);
				if (e > worst)
					worst = e;
			}
		if (worst > 1e-5)
			rc = sl_fail(err, SL_EIO, "the BLAS check: %s with the %s kernel is wrong by "
				     "%.3g (relative), past 1e-5", cases[t].name,
				     openblas_get_corename(), worst);
	}
out:
	free(a);
	free(b);
	free(c);
	return rc;
}
