/* backend_refdev.c - "refdev": the ref backend's arithmetic, bit for bit,
 * in memory the host must not touch. It stands in for a device backend
 * (cuda) in tests that run on any machine: alloc returns addresses moved
 * by REFDEV_SHIFT into the non-canonical half of the x86-64 address space,
 * so the engine may do pointer arithmetic on them (p + off) but any direct
 * read or write by host code (a memcpy where an upload or download
 * belongs) faults at once instead of passing silently. Every op moves its
 * pointer arguments back and calls the ref op. host_memory is 0, so the
 * engine stages, uploads and downloads exactly as it does for a GPU; a
 * run on refdev must give the same bits as the same run on ref.
 *
 * Not offered by "auto" and not listed to users (the class is hidden);
 * tests open it by name. */
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"
#include "sl.h"

/* x86-64 addresses are canonical only when bits 63..47 are all equal;
 * user space is below 2^47, so adding 2^62 gives an address whose every
 * access raises a general-protection fault (SIGSEGV) */
#define REFDEV_SHIFT ((uintptr_t)1 << 62)

static void *
hide(void *p)
{
	return p ? (void *)((uintptr_t)p + REFDEV_SHIFT) : NULL;
}

static void *
real(const void *p)
{
	if (!p)
		return NULL;
	SL_ASSERT((uintptr_t)p >= REFDEV_SHIFT); /* a host pointer given as device memory */
	return (void *)((uintptr_t)p - REFDEV_SHIFT);
}

#define R(p) ((float *)real(p))
#define INNER(be) ((backend *)(be)->ctx)
#define REF backend_ref_ops

/* the backend and its allocation fault plan (tests): ctx is ref's */
typedef struct refdev {
	backend be;
	long fail_in; /* allocations to let through before one fails; -1: none */
} refdev;

static void rd_destroy(backend *be);

static void *
rd_alloc(backend *be, size_t bytes)
{
	refdev *d = (refdev *)be;
	if (d->fail_in == 0) {
		d->fail_in = -1;
		return NULL;
	}
	if (d->fail_in > 0)
		d->fail_in--;
	return hide(host_alloc(INNER(be), bytes));
}

int
backend_refdev_fail_alloc(backend *be, long after)
{
	if (!be || be->ops->destroy != rd_destroy)
		return -SL_EINVAL;
	((refdev *)be)->fail_in = after < 0 ? -1 : after;
	return 0;
}

static void
rd_free(backend *be, void *p)
{
	host_free(INNER(be), real(p));
}

static void
rd_upload(backend *be, void *dst, const void *src, size_t bytes)
{
	(void)be;
	memcpy(real(dst), src, bytes);
}

static void
rd_download(backend *be, void *dst, const void *src, size_t bytes)
{
	(void)be;
	memcpy(dst, real(src), bytes);
}

static void
rd_copy(backend *be, void *dst, const void *src, size_t bytes)
{
	(void)be;
	memmove(real(dst), real(src), bytes);
}

static void
rd_zero(backend *be, void *dst, size_t bytes)
{
	(void)be;
	memset(real(dst), 0, bytes);
}

static void
rd_gemm(backend *be, int ta, int tb, int m, int n, int k, float alpha,
	const float *a, int lda, const float *b, int ldb, float beta, float *c,
	int ldc)
{
	REF.gemm(INNER(be), ta, tb, m, n, k, alpha, R(a), lda, R(b), ldb, beta,
		 R(c), ldc);
}

static void
rd_linear_fwd(backend *be, const float *x, const float *w, const float *b,
	      float *y, int batch, int in, int out, int relu)
{
	REF.linear_fwd(INNER(be), R(x), R(w), R(b), R(y), batch, in, out, relu);
}

static void
rd_linear_bwd(backend *be, const float *x, const float *w, const float *y,
	      float *dy, float *dx, float *dw, float *db, int batch, int in,
	      int out, int relu)
{
	REF.linear_bwd(INNER(be), R(x), R(w), R(y), R(dy), R(dx), R(dw), R(db),
		       batch, in, out, relu);
}

static void
rd_conv_fwd(backend *be, const conv_geom *g, const float *x, const float *w,
	    const float *b, float *y, int batch, int relu)
{
	REF.conv_fwd(INNER(be), g, R(x), R(w), R(b), R(y), batch, relu);
}

static void
rd_conv_bwd(backend *be, const conv_geom *g, const float *x, const float *w,
	    const float *y, float *dy, float *dx, float *dw, float *db,
	    int batch, int relu)
{
	REF.conv_bwd(INNER(be), g, R(x), R(w), R(y), R(dy), R(dx), R(dw), R(db),
		     batch, relu);
}

static void
rd_maxpool_fwd(backend *be, const conv_geom *g, const float *x, float *y,
	       int32_t *arg, int batch)
{
	REF.maxpool_fwd(INNER(be), g, R(x), R(y), real(arg), batch);
}

static void
rd_maxpool_bwd(backend *be, const conv_geom *g, const float *dy,
	       const int32_t *arg, float *dx, int batch)
{
	REF.maxpool_bwd(INNER(be), g, R(dy), real(arg), R(dx), batch);
}

static void
rd_relu_fwd(backend *be, const float *x, float *y, size_t n)
{
	REF.relu_fwd(INNER(be), R(x), R(y), n);
}

static void
rd_relu_bwd(backend *be, const float *y, const float *dy, float *dx, size_t n)
{
	REF.relu_bwd(INNER(be), R(y), R(dy), R(dx), n);
}

static void
rd_cpb_to_bcp(backend *be, const float *x, float *y, int c, int b, int p)
{
	REF.cpb_to_bcp(INNER(be), R(x), R(y), c, b, p);
}

static void
rd_bcp_to_cpb(backend *be, const float *x, float *y, int c, int b, int p)
{
	REF.bcp_to_cpb(INNER(be), R(x), R(y), c, b, p);
}

static void
rd_bn_fwd(backend *be, const float *x, const float *gamma, const float *beta,
	  float *y, float *mean, float *invstd, float *run_mean, float *run_var,
	  int c, int p, int batch, int training, float momentum, float eps,
	  int relu)
{
	REF.bn_fwd(INNER(be), R(x), R(gamma), R(beta), R(y), R(mean), R(invstd),
		   R(run_mean), R(run_var), c, p, batch, training, momentum, eps,
		   relu);
}

static void
rd_bn_bwd(backend *be, const float *x, const float *gamma, const float *mean,
	  const float *invstd, const float *y, float *dy, float *dx,
	  float *dgamma, float *dbeta, int c, int p, int batch, int training,
	  int relu)
{
	REF.bn_bwd(INNER(be), R(x), R(gamma), R(mean), R(invstd), R(y), R(dy),
		   R(dx), R(dgamma), R(dbeta), c, p, batch, training, relu);
}

static void
rd_avgpool_fwd(backend *be, const float *x, float *y, int c, int p, int batch)
{
	REF.avgpool_fwd(INNER(be), R(x), R(y), c, p, batch);
}

static void
rd_avgpool_bwd(backend *be, const float *dy, float *dx, int c, int p, int batch)
{
	REF.avgpool_bwd(INNER(be), R(dy), R(dx), c, p, batch);
}

static void
rd_shortcut_fwd(backend *be, const float *x, float *y, int cin, int h, int w,
		int cout, int stride, int batch, int acc)
{
	REF.shortcut_fwd(INNER(be), R(x), R(y), cin, h, w, cout, stride, batch, acc);
}

static void
rd_shortcut_bwd(backend *be, const float *dy, float *dx, int cin, int h, int w,
		int cout, int stride, int batch, int acc)
{
	REF.shortcut_bwd(INNER(be), R(dy), R(dx), cin, h, w, cout, stride, batch, acc);
}

static void
rd_embed_fwd(backend *be, const float *ids, const float *wte, const float *wpe,
	     float *y, int batch, int t, int e, int vocab)
{
	REF.embed_fwd(INNER(be), R(ids), R(wte), R(wpe), R(y), batch, t, e, vocab);
}

static void
rd_embed_bwd(backend *be, const float *ids, const float *dy, float *dwte,
	     float *dwpe, int batch, int t, int e, int vocab, int acc)
{
	REF.embed_bwd(INNER(be), R(ids), R(dy), R(dwte), R(dwpe), batch, t, e, vocab, acc);
}

static void
rd_layernorm_fwd(backend *be, const float *x, const float *g, const float *b,
		 float *y, float *mean, float *rstd, int rows, int n, float eps)
{
	REF.layernorm_fwd(INNER(be), R(x), R(g), R(b), R(y), R(mean), R(rstd), rows, n, eps);
}

static void
rd_layernorm_bwd(backend *be, const float *x, const float *g, const float *mean,
		 const float *rstd, const float *dy, float *dx, float *dg, float *db,
		 int rows, int n)
{
	REF.layernorm_bwd(INNER(be), R(x), R(g), R(mean), R(rstd), R(dy), R(dx), R(dg),
			  R(db), rows, n);
}

static void
rd_gelu_fwd(backend *be, const float *x, float *y, size_t n)
{
	REF.gelu_fwd(INNER(be), R(x), R(y), n);
}

static void
rd_gelu_bwd(backend *be, const float *x, const float *dy, float *dx, size_t n)
{
	REF.gelu_bwd(INNER(be), R(x), R(dy), R(dx), n);
}

static void
rd_attn_fwd(backend *be, const float *qkv, float *y, float *att, int batch, int t,
	    int heads, int hd)
{
	REF.attn_fwd(INNER(be), R(qkv), R(y), R(att), batch, t, heads, hd);
}

static void
rd_attn_bwd(backend *be, const float *qkv, const float *att, const float *dy,
	    float *dqkv, int batch, int t, int heads, int hd)
{
	REF.attn_bwd(INNER(be), R(qkv), R(att), R(dy), R(dqkv), batch, t, heads, hd);
}

/* the labels are host memory (backend.h) */
static double
rd_softmax_xent(backend *be, const float *logits, const uint8_t *labels,
		float *dlogits, int batch, int classes, int *correct)
{
	return REF.softmax_xent(INNER(be), R(logits), labels, R(dlogits), batch,
				classes, correct);
}

static void
rd_sgd(backend *be, float *w, const float *g, float *m, size_t n, float lr,
       float mu, float wd)
{
	REF.sgd(INNER(be), R(w), R(g), R(m), n, lr, mu, wd);
}

static void
rd_opt_step(backend *be, float *w, const float *g, float *m, float *v, size_t n,
	    const opt_step *s)
{
	REF.opt_step(INNER(be), R(w), R(g), R(m), R(v), n, s);
}

static double
rd_sumsq(backend *be, const float *x, size_t n)
{
	return REF.sumsq(INNER(be), R(x), n);
}

static void
rd_dc_grad(backend *be, size_t n, const float *g, const float *w,
	   const float *bak, float *ms, float lambda, float m, float eps,
	   float *out)
{
	REF.dc_grad(INNER(be), n, R(g), R(w), R(bak), R(ms), lambda, m, eps, R(out));
}

static void
rd_axpy(backend *be, size_t n, float a, const float *x, float *y)
{
	REF.axpy(INNER(be), n, a, R(x), R(y));
}

static void
rd_scal(backend *be, size_t n, float a, float *y)
{
	REF.scal(INNER(be), n, a, R(y));
}

static int
rd_all_finite(backend *be, const float *x, size_t n)
{
	return REF.all_finite(INNER(be), R(x), n);
}

static void
rd_destroy(backend *be)
{
	backend_free(INNER(be));
	free(be);
}

static void
rd_set_threads(backend *be, int n)
{
	(void)be;
	(void)n;
}

static const backend_ops refdev_ops = {
	.name = "refdev",
	.host_memory = 0,
	.destroy = rd_destroy,
	.set_threads = rd_set_threads,
	.alloc = rd_alloc,
	.free = rd_free,
	.upload = rd_upload,
	.download = rd_download,
	.copy = rd_copy,
	.zero = rd_zero,
	.sync = host_sync,
	.gemm = rd_gemm,
	.linear_fwd = rd_linear_fwd,
	.linear_bwd = rd_linear_bwd,
	.conv_fwd = rd_conv_fwd,
	.conv_bwd = rd_conv_bwd,
	.maxpool_fwd = rd_maxpool_fwd,
	.maxpool_bwd = rd_maxpool_bwd,
	.relu_fwd = rd_relu_fwd,
	.relu_bwd = rd_relu_bwd,
	.cpb_to_bcp = rd_cpb_to_bcp,
	.bcp_to_cpb = rd_bcp_to_cpb,
	.bn_fwd = rd_bn_fwd,
	.bn_bwd = rd_bn_bwd,
	.avgpool_fwd = rd_avgpool_fwd,
	.avgpool_bwd = rd_avgpool_bwd,
	.shortcut_fwd = rd_shortcut_fwd,
	.shortcut_bwd = rd_shortcut_bwd,
	.embed_fwd = rd_embed_fwd,
	.embed_bwd = rd_embed_bwd,
	.layernorm_fwd = rd_layernorm_fwd,
	.layernorm_bwd = rd_layernorm_bwd,
	.gelu_fwd = rd_gelu_fwd,
	.gelu_bwd = rd_gelu_bwd,
	.attn_fwd = rd_attn_fwd,
	.attn_bwd = rd_attn_bwd,
	.gather = NULL, /* the model stages on the host, as for a GPU */
	.softmax_xent = rd_softmax_xent,
	.sgd = rd_sgd,
	.opt_step = rd_opt_step,
	.sumsq = rd_sumsq,
	.dc_grad = rd_dc_grad,
	.axpy = rd_axpy,
	.scal = rd_scal,
	.all_finite = rd_all_finite,
};

static int
refdev_open(int nthreads, backend **out)
{
	*out = NULL;
	refdev *d = calloc(1, sizeof(*d));
	backend *inner = NULL;
	int rc = backend_ref_class.open(nthreads, &inner);
	if (!d || rc < 0) {
		free(d);
		backend_free(inner);
		return rc < 0 ? rc : -SL_ENOMEM;
	}
	d->be.ops = &refdev_ops;
	d->be.ctx = inner;
	d->fail_in = -1;
	*out = &d->be;
	return 0;
}

static int
refdev_probe(char *why)
{
	(void)why;
	return 1;
}

const backend_class backend_refdev_class = {
	.name = "refdev",
	.about = "ref's arithmetic in memory the host may not touch (tests of "
		 "the device paths)",
	.probe = refdev_probe,
	.open = refdev_open,
	.auto_pick = 0,
	.hidden = 1,
};
