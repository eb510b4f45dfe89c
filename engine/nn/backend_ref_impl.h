/* backend_ref_impl.h - what the reference backend's files share: its
 * context, its exp, and the ops each file contributes to the table in
 * backend_ref.c. Private to backend_ref*.c. */
#ifndef SL_BACKEND_REF_IMPL_H
#define SL_BACKEND_REF_IMPL_H

#include <stddef.h>

#include "backend_impl.h"
#include "sl.h"

typedef struct ref_ctx {
	double *acc; /* one row of gemm sums */
	size_t acc_cap;
} ref_ctx;

/* A scratch row of at least n doubles, grown as needed; the backend owns
 * it (one per backend, so one op's sums at a time). */
double *ref_acc_row(backend *be, size_t n);
/* e^x from +, -, *, / and the exact ldexp: the same bits on every CPU */
double ref_exp(double x);

/* backend_ref_seq.c: the sequence ops (backend.h) */
void ref_embed_fwd(backend *be, const float *ids, const float *wte, const float *wpe,
		   float *y, int batch, int t, int e, int vocab);
void ref_embed_bwd(backend *be, const float *ids, const float *dy, float *dwte,
		   float *dwpe, int batch, int t, int e, int vocab, int acc);
void ref_layernorm_fwd(backend *be, const float *x, const float *g, const float *b,
		       float *y, float *mean, float *rstd, int rows, int n, float eps);
void ref_layernorm_bwd(backend *be, const float *x, const float *g, const float *mean,
		       const float *rstd, const float *dy, float *dx, float *dg,
		       float *db, int rows, int n);
void ref_gelu_fwd(backend *be, const float *x, float *y, size_t n);
void ref_gelu_bwd(backend *be, const float *x, const float *dy, float *dx, size_t n);
void ref_attn_fwd(backend *be, const float *qkv, float *y, float *att, int batch,
		  int t, int heads, int hd);
void ref_attn_bwd(backend *be, const float *qkv, const float *att, const float *dy,
		  float *dqkv, int batch, int t, int heads, int hd);

#endif
