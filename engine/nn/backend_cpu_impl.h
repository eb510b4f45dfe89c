/* backend_cpu_impl.h - what the CPU backend's files share: the context
 * (the thread team and its scratch buffers), the SIMD clones attribute and
 * the ops each file contributes to the table in backend_cpu.c. Private to
 * backend_cpu*.c. */
#ifndef SL_BACKEND_CPU_IMPL_H
#define SL_BACKEND_CPU_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "backend_impl.h"
#include "sl.h"
#include "team.h"

#define CPU_MAX_THREADS 64

/* SIMD_CLONES: sl.h */

typedef struct cpu_ctx {
	team *team;
	int nt;
	/* convolution: padded input, dilated dy, flipped w, Winograd's
	 * transformed kernel and its per-thread scratch */
	float *buf[5];
	size_t buf_cap[5];
	float *seq;    /* attention's backward: T x T per thread */
	size_t seq_cap;
} cpu_ctx;

static inline cpu_ctx *
CTX(backend *be)
{
	return (cpu_ctx *)be->ctx;
}

/* Grow a scratch buffer; called by the thread that calls team_run,
 * before it. Allocation happens in the first step only (sizes do not
 * change after). */
static inline float *
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

/* backend_cpu.c: OpenBLAS's sgemm on the calling thread (row-major, as
 * backend.h's gemm), for the other files (only backend_cpu.c includes
 * cblas.h) */
void cpu_sgemm(int ta, int tb, int m, int n, int k, float alpha, const float *a,
	       int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* backend_cpu_seq.c: the sequence ops (backend.h), on the team */
void cpu_embed_fwd(backend *be, const float *ids, const float *wte, const float *wpe,
		   float *y, int batch, int t, int e, int vocab);
void cpu_embed_bwd(backend *be, const float *ids, const float *dy, float *dwte,
		   float *dwpe, int batch, int t, int e, int vocab, int acc);
void cpu_layernorm_fwd(backend *be, const float *x, const float *g, const float *b,
		       float *y, float *mean, float *rstd, int rows, int n, float eps);
void cpu_layernorm_bwd(backend *be, const float *x, const float *g, const float *mean,
		       const float *rstd, const float *dy, float *dx, float *dg,
		       float *db, int rows, int n);
void cpu_gelu_fwd(backend *be, const float *x, float *y, size_t n);
void cpu_gelu_bwd(backend *be, const float *x, const float *dy, float *dx, size_t n);
void cpu_attn_fwd(backend *be, const float *qkv, float *y, float *att, int batch,
		  int t, int heads, int hd);
void cpu_attn_bwd(backend *be, const float *qkv, const float *att, const float *dy,
		  float *dqkv, int batch, int t, int heads, int hd);

/* backend_cpu_conv.c: convolution and max pooling */
void cpu_conv_fwd(backend *be, const conv_geom *g, const float *x,
		  const float *w, const float *b, float *y, int batch, int relu);
void cpu_conv_bwd(backend *be, const conv_geom *g, const float *x,
		  const float *w, const float *y, float *dy, float *dx,
		  float *dw, float *db, int batch, int relu);
void cpu_maxpool_fwd(backend *be, const conv_geom *g, const float *x,
		     float *y, int32_t *arg, int batch);
void cpu_maxpool_bwd(backend *be, const conv_geom *g, const float *dy,
		     const int32_t *arg, float *dx, int batch);
/* the flatten layer's transposes (backend.h), on the team */
void cpu_gather(backend *be, float *dst, const float *x, const uint32_t *idx,
		int batch, int dim, int inner);
void cpu_cpb_to_bcp(backend *be, const float *x, float *y, int c, int b,
		    int p);
void cpu_bcp_to_cpb(backend *be, const float *x, float *y, int c, int b,
		    int p);
/* backend_cpu_norm.c: batch normalization, global average pooling, the
 * option-A shortcut */
void cpu_bn_fwd(backend *be, const float *x, const float *gamma,
		const float *beta, float *y, float *mean, float *invstd,
		float *run_mean, float *run_var, int c, int p, int batch,
		int training, float momentum, float eps, int relu);
void cpu_bn_bwd(backend *be, const float *x, const float *gamma,
		const float *mean, const float *invstd, const float *y,
		float *dy, float *dx, float *dgamma, float *dbeta, int c, int p,
		int batch, int training, int relu);
void cpu_avgpool_fwd(backend *be, const float *x, float *y, int c, int p,
		     int batch);
void cpu_avgpool_bwd(backend *be, const float *dy, float *dx, int c, int p,
		     int batch);
void cpu_shortcut_fwd(backend *be, const float *x, float *y, int cin, int h,
		      int w, int cout, int stride, int batch, int acc);
void cpu_shortcut_bwd(backend *be, const float *dy, float *dx, int cin, int h,
		      int w, int cout, int stride, int batch, int acc);
void cpu_residual_fwd(backend *be, const float *a, const float *x, float *y, int cin, int h,
		      int w, int cout, int stride, int batch, int relu);
void cpu_residual_bwd(backend *be, const float *y, const float *dy, float *da, float *dx,
		      int cin, int h, int w, int cout, int stride, int batch, int relu);
void cpu_relu_fwd(backend *be, const float *x, float *y, size_t n);
void cpu_relu_bwd(backend *be, const float *y, const float *dy, float *dx, size_t n);

#endif
