/* backend_impl.h - shared by the backends' own files and the registry
 * (engine/nn/backend*.c) and included nowhere else: the class each backend
 * file defines, which engine/nn/backend.c lists in its table. */
#ifndef SL_BACKEND_IMPL_H
#define SL_BACKEND_IMPL_H

#include "backend.h"

extern const backend_class backend_cpu_class; /* engine/nn/backend_cpu.c */
extern const backend_class backend_ref_class; /* engine/nn/backend_ref.c */
extern const backend_class backend_refdev_class; /* engine/nn/backend_refdev.c */
/* ref's table, which refdev calls with its pointers moved back */
extern const backend_ops backend_ref_ops;

/* engine/nn/backend_host.c: ops shared by the host-memory backends. Memory
 * (zeroed 64-byte aligned allocations, memmove copies, no-op sync): */
void *host_alloc(backend *be, size_t bytes);
void host_free(backend *be, void *p);
void host_copy(backend *be, void *dst, const void *src, size_t bytes);
void host_zero(backend *be, void *dst, size_t bytes);
void host_sync(backend *be);
/* those five in a backend_ops initializer */
#define HOST_MEMORY_OPS                                                      \
	.host_memory = 1, .alloc = host_alloc, .free = host_free,             \
	.upload = host_copy, .download = host_copy, .copy = host_copy,        \
	.zero = host_zero, .sync = host_sync
/* the all_finite op: the exponent bits of each float, 16 at a time */
int host_all_finite(backend *be, const float *x, size_t n);
/* the optimiser's step and clipping's sum of squares: no fused
 * multiply-add, so ref and cpu give the same bits */
void host_opt_step(backend *be, float *w, const float *g, float *m, float *v,
		   size_t n, const opt_step *s);
double host_sumsq(backend *be, const float *x, size_t n);
/* ops without arithmetic, the same bits on every CPU: */
void host_relu_fwd(backend *be, const float *x, float *y, size_t n);
void host_relu_bwd(backend *be, const float *y, const float *dy, float *dx,
		   size_t n);
/* y (cols x rows) = x (rows x cols) transposed, rows [lo, hi) of x only
 * (lo a multiple of 16, for callers that split the work) */
void host_transpose(const float *x, float *y, size_t rows, size_t cols,
		    size_t lo, size_t hi);
void host_gather(float *dst, const float *x, const uint32_t *idx, int batch,
		 int dim, int inner, int lo, int hi);
void host_cpb_to_bcp(backend *be, const float *x, float *y, int c, int b,
		     int p);
void host_bcp_to_cpb(backend *be, const float *x, float *y, int c, int b,
		     int p);
/* max pooling of channels [c0, c1) of [C][H][W][B] (any window, stride,
 * padding; the first of equal maxima in row order wins; arg holds the
 * offset ih W + iw of each output's maximum in its plane), and its
 * backward: dx channels zeroed, then dy added at each argmax */
void host_maxpool_fwd(const conv_geom *g, const float *x, float *y,
		      int32_t *arg, int batch, int c0, int c1);
void host_maxpool_bwd(const conv_geom *g, const float *dy, const int32_t *arg,
		      float *dx, int batch, int c0, int c1);
/* global average pooling of channels [c0, c1) and its backward (the ops
 * avgpool_fwd/bwd of backend.h: double sums in ascending p) */
void host_avgpool_fwd(const float *x, float *y, int c, int p, int batch, int c0,
		      int c1);
void host_avgpool_bwd(const float *dy, float *dx, int c, int p, int batch,
		      int c0, int c1);
/* the option-A shortcut (backend.h's shortcut_fwd/bwd), output channels
 * [co0, co1) forward, input channels [ci0, ci1) backward */
void host_shortcut_fwd(const float *x, float *y, int cin, int h, int w,
		       int cout, int s, int batch, int acc, int co0, int co1);
void host_shortcut_bwd(const float *dy, float *dx, int cin, int h, int w,
		       int cout, int s, int batch, int acc, int ci0, int ci1);
/* the softmax_xent op (backend.h), with exp and log supplied: sums and
 * the loss in double, exp_fn(z - max) summed in class order */
double host_softmax_xent(const float *logits, const uint8_t *labels,
			 float *dlogits, int batch, int classes, int *correct,
			 double (*exp_fn)(double), double (*log_fn)(double));

#endif
