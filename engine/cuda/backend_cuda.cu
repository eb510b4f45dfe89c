/* backend_cuda.cu - the cuda backend, built as the plugin stalelab-cuda.so
 * (engine/nn/backend_plugin.h): every op of backend.h on an NVIDIA GPU.
 * GEMM is cuBLAS's (FP32: the default math mode, no TF32); everything else
 * is our own kernels (kernels.cuh). Each backend (a worker, the server, the
 * evaluator) has its own stream and cuBLAS handle, so workers run
 * concurrently; an op that returns a value (the loss, the finite check)
 * or crosses to the host or to another backend's memory (upload,
 * download, copy) waits for its stream first, and the server syncs after
 * each update (engine/ps/ps.c), which is what orders the streams.
 *
 * The plugin links the CUDA runtime statically and cuBLAS as a shared
 * library, and never the driver library: it loads on a machine without a
 * driver, where score() says so in words before anything else is touched.
 * A failed CUDA call inside an op is a bug or a lost device, not bad
 * input: it is reported with its place and the process aborts (as llm.c
 * does), since the op has no way to return the error. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_plugin.h"
#include "kernels.cuh"

/* from engine/base/sl.h, which is C only */
#define SL_ENOMEM 1
#define SL_EUNSUP 6

static void
die(const char *file, int line, const char *what, const char *why)
{
	fprintf(stderr, "stalelab: cuda: %s:%d: %s: %s\n", file, line, what, why);
	abort();
}

#define CK(x)                                                                \
	do {                                                                 \
		cudaError_t e_ = (x);                                        \
		if (e_ != cudaSuccess)                                       \
			die(__FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
	} while (0)
#define CKB(x)                                                               \
	do {                                                                 \
		cublasStatus_t s_ = (x);                                     \
		if (s_ != CUBLAS_STATUS_SUCCESS)                             \
			die(__FILE__, __LINE__, #x, cublasGetStatusString(s_)); \
	} while (0)
/* after a launch: a bad configuration shows here, a fault at the next sync */
#define LAUNCHED() CK(cudaGetLastError())

typedef struct cuda_ctx {
	cudaStream_t st;
	cublasHandle_t blas;
	/* softmax_xent: the labels (host memory in backend.h) and each row's
	 * loss and hit, summed on the host in row order as ref does */
	uint8_t *labels;
	double *row_loss;
	int *row_hit;
	int rows_cap;
	int *flag; /* all_finite */
	double *part; /* sumsq: one partial sum per block */
	double *h_loss;
	int *h_hit;
	/* convolution: the column buffer (col_n floats, grown on demand) and
	 * the most floats one band may take (STALELAB_CUDA_CONV_FLOATS, else
	 * CONV_FLOATS) */
	float *col;
	size_t col_n, col_cap;
	/* column sums' partials (double, COL_CHUNK rows each), attention's
	 * softmax gradient (B H T T floats) and its batched GEMMs' pointer
	 * arrays, the embedding's token buckets (start, then order: device
	 * and host) and the ids read back; each grown on demand */
	double *cpart;
	size_t cpart_n;
	float *dz;
	size_t dz_n;
	float **ptrs;
	size_t ptrs_n;
	int *bucket, *h_bucket;
	size_t bucket_n, h_bucket_n;
	float *h_ids;
	size_t h_ids_n;
} cuda_ctx;

#define CONV_FLOATS ((size_t)16 << 20) /* 64 MiB of columns per backend */

#define CTX(be) ((cuda_ctx *)(be)->ctx)
#define ST(be) (CTX(be)->st)

/* ---- memory ------------------------------------------------------------ */

static void *
cu_alloc(backend *be, size_t bytes)
{
	void *p = NULL;
	if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
		cudaGetLastError(); /* out of memory: the caller says so */
		return NULL;
	}
	CK(cudaMemsetAsync(p, 0, bytes, ST(be)));
	CK(cudaStreamSynchronize(ST(be)));
	return p;
}

static void
cu_free(backend *be, void *p)
{
	if (!p)
		return;
	CK(cudaStreamSynchronize(ST(be)));
	CK(cudaFree(p));
}

static void
cu_upload(backend *be, void *dst, const void *src, size_t bytes)
{
	CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ST(be)));
	CK(cudaStreamSynchronize(ST(be)));
}

static void
cu_download(backend *be, void *dst, const void *src, size_t bytes)
{
	CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ST(be)));
	CK(cudaStreamSynchronize(ST(be)));
}

/* the ranges never overlap (backend.h's copy is between distinct buffers) */
static void
cu_copy(backend *be, void *dst, const void *src, size_t bytes)
{
	if (dst == src || !bytes)
		return;
	CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ST(be)));
	CK(cudaStreamSynchronize(ST(be)));
}

static void
cu_zero(backend *be, void *dst, size_t bytes)
{
	CK(cudaMemsetAsync(dst, 0, bytes, ST(be)));
}

static void
cu_sync(backend *be)
{
	CK(cudaStreamSynchronize(ST(be)));
}

static void
cu_set_threads(backend *be, int n)
{
	(void)be;
	(void)n; /* the device's threads are the kernels' */
}

/* ---- scratch --------------------------------------------------------------- */

/* *buf with room for n elements: grown (the stream drained first, as
 * cudaFree of a buffer in use must not be); no memory left on the device
 * is fatal inside an op (die) */
template <typename T>
static T *
room(backend *be, T **buf, size_t *have, size_t n)
{
	if (n > *have) {
		CK(cudaStreamSynchronize(ST(be)));
		CK(cudaFree(*buf));
		*buf = NULL;
		*have = 0;
		CK(cudaMalloc(buf, sizeof(T) * n));
		*have = n;
	}
	return *buf;
}

/* the same in host memory (its contents are not kept) */
template <typename T>
static T *
host_room(T **buf, size_t *have, size_t n)
{
	if (n > *have) {
		free(*buf);
		*have = 0;
		if (!(*buf = (T *)malloc(sizeof(T) * n)))
			die(__FILE__, __LINE__, "malloc", "out of host memory");
		*have = n;
	}
	return *buf;
}

/* db[j] = the sum of column j of dy [rows x n]; with x (layer norm) also
 * dg[j] = the sum of dy xh, xh = (x - mean[r]) rstd[r] (k_col_part) */
static void
col_sums(backend *be, const float *dy, const float *x, const float *mean, const float *rstd,
	 float *dg, float *db, int rows, int n)
{
	cuda_ctx *c = CTX(be);
	if (n <= 0)
		return;
	/* COL_CHUNK rows a block, more where the grid's y would pass 65535 */
	const int chunk = rows / 65535 + 1 > COL_CHUNK ? rows / 65535 + 1 : COL_CHUNK;
	const int chunks = rows > 0 ? (rows + chunk - 1) / chunk : 0;
	if (chunks) {
		double *part = room(be, &c->cpart, &c->cpart_n, (size_t)chunks * 2 * n);
		k_col_part<<<dim3((n + 31) / 32, chunks), dim3(32, COL_LANES), 0, c->st>>>(
			dy, x, mean, rstd, part, rows, n, chunk);
		LAUNCHED();
	}
	k_col_fin<<<grid_for((size_t)n), TPB, 0, c->st>>>(c->cpart, chunks, n, dg, db);
	LAUNCHED();
}

/* ---- gemm and dense ------------------------------------------------------ */

/* Row-major C = alpha op(A) op(B) + beta C is column-major
 * C^T = alpha op(B)^T op(A)^T + beta C^T: the same buffers, the operands
 * swapped, m and n swapped. */
static void
cu_gemm(backend *be, int ta, int tb, int m, int n, int k, float alpha,
	const float *a, int lda, const float *b, int ldb, float beta, float *c,
	int ldc)
{
	if (m <= 0 || n <= 0)
		return; /* nothing to write (and cuBLAS refuses ldc 0) */
	CKB(cublasSgemm(CTX(be)->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
			ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a,
			lda, &beta, c, ldc));
}

static void
cu_linear_fwd(backend *be, const float *x, const float *w, const float *b,
	      float *y, int batch, int in, int out, int relu)
{
	cu_gemm(be, 0, 1, batch, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
	if (!b && !relu)
		return; /* the tied LM head: no bias */
	size_t n = (size_t)batch * out;
	k_bias_act<<<grid_for(n), TPB, 0, ST(be)>>>(y, b, (size_t)batch, out, relu);
	LAUNCHED();
}

static void
cu_linear_bwd(backend *be, const float *x, const float *w, const float *y,
	      float *dy, float *dx, float *dw, float *db, int batch, int in,
	      int out, int relu)
{
	size_t n = (size_t)batch * out;
	if (relu) {
		k_relu_mask<<<grid_for(n), TPB, 0, ST(be)>>>(dy, y, n);
		LAUNCHED();
	}
	cu_gemm(be, 1, 0, out, in, batch, 1.0f, dy, out, x, in, 0.0f, dw, in);
	if (db) /* NULL: no bias (the tied LM head) */
		col_sums(be, dy, NULL, NULL, NULL, NULL, db, batch, out);
	if (dx)
		cu_gemm(be, 0, 0, batch, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}

/* ---- convolution and pooling ---------------------------------------------- */

/* the column buffer for n floats (room: grown on demand) */
static float *
col_buf(backend *be, size_t n)
{
	return room(be, &CTX(be)->col, &CTX(be)->col_n, n);
}

/* output rows per band: as many as fit the column cap, at least one */
static int
band_rows(backend *be, const conv_geom *g, int batch)
{
	const size_t per = (size_t)g->cin * g->k * g->k * g->wo * batch;
	size_t r = per ? CTX(be)->col_cap / per : (size_t)g->ho;
	return r < 1 ? 1 : r > (size_t)g->ho ? g->ho : (int)r;
}

/* y (cout x N, N = ho wo B) = w (cout x K) col (K x N), K = cin k k, band by
 * band; then the bias and the relu */
static void
cu_conv_fwd(backend *be, const conv_geom *g, const float *x, const float *w,
	    const float *b, float *y, int batch, int relu)
{
	const int K = g->cin * g->k * g->k, N = g->ho * g->wo * batch;
	if (N <= 0 || g->cout <= 0)
		return;
	const int rows = band_rows(be, g, batch);
	float *col = col_buf(be, (size_t)K * rows * g->wo * batch);
	for (int oh0 = 0; oh0 < g->ho; oh0 += rows) {
		const int nr = g->ho - oh0 < rows ? g->ho - oh0 : rows, nb = nr * g->wo * batch;
		const size_t off = (size_t)oh0 * g->wo * batch;
		k_im2col<<<grid_for((size_t)K * nb), TPB, 0, ST(be)>>>(*g, x, col, batch, oh0, nr);
		LAUNCHED();
		cu_gemm(be, 0, 0, g->cout, nb, K, 1.0f, w, K, col, nb, 0.0f, y + off, N);
	}
	const size_t n = (size_t)g->cout * N;
	k_bias_chan<<<grid_for(n), TPB, 0, ST(be)>>>(y, b, (size_t)N, n, relu);
	LAUNCHED();
}

/* dw (cout x K) = dy (cout x N) col^T, summed over the bands; the column
 * gradient w^T dy of each band (in the same buffer, once dw has read it)
 * back onto the inputs it came from */
static void
cu_conv_bwd(backend *be, const conv_geom *g, const float *x, const float *w,
	    const float *y, float *dy, float *dx, float *dw, float *db,
	    int batch, int relu)
{
	const int K = g->cin * g->k * g->k, N = g->ho * g->wo * batch;
	const size_t n = (size_t)g->cout * N;
	if (relu) {
		k_relu_mask<<<grid_for(n), TPB, 0, ST(be)>>>(dy, y, n);
		LAUNCHED();
	}
	if (g->cout <= 0)
		return;
	k_seg_sums<<<g->cout, 1024, 0, ST(be)>>>(dy, db, (size_t)N);
	LAUNCHED();
	if (N <= 0) { /* no outputs: no gradient reaches anything */
		CK(cudaMemsetAsync(dw, 0, sizeof(float) * g->cout * K, ST(be)));
		if (dx)
			CK(cudaMemsetAsync(dx, 0, sizeof(float) * g->cin * g->h * g->w * batch,
					   ST(be)));
		return;
	}
	const int rows = band_rows(be, g, batch), one = rows >= g->ho;
	float *col = col_buf(be, (size_t)K * rows * g->wo * batch);
	if (dx && !one)
		CK(cudaMemsetAsync(dx, 0, sizeof(float) * g->cin * g->h * g->w * batch, ST(be)));
	for (int oh0 = 0; oh0 < g->ho; oh0 += rows) {
		const int nr = g->ho - oh0 < rows ? g->ho - oh0 : rows, nb = nr * g->wo * batch;
		const size_t off = (size_t)oh0 * g->wo * batch;
		k_im2col<<<grid_for((size_t)K * nb), TPB, 0, ST(be)>>>(*g, x, col, batch, oh0, nr);
		LAUNCHED();
		cu_gemm(be, 0, 1, g->cout, K, nb, 1.0f, dy + off, N, col, nb, oh0 ? 1.0f : 0.0f, dw,
			K);
		if (!dx)
			continue;
		cu_gemm(be, 1, 0, K, nb, g->cout, 1.0f, w, K, dy + off, N, 0.0f, col, nb);
		/* the input rows this band's taps reach (all of them for one band) */
		int ih0 = oh0 * g->stride - g->pad, ih1 = (oh0 + nr - 1) * g->stride - g->pad + g->k;
		if (one || ih0 < 0)
			ih0 = 0;
		if (one || ih1 > g->h)
			ih1 = g->h;
		if (ih1 <= ih0)
			continue;
		const size_t ni = (size_t)g->cin * (ih1 - ih0) * g->w * batch;
		k_col2im<<<grid_for(ni), TPB, 0, ST(be)>>>(*g, col, dx, batch, oh0, nr, ih0,
							    ih1 - ih0, !one);
		LAUNCHED();
	}
}

static void
cu_maxpool_fwd(backend *be, const conv_geom *g, const float *x, float *y,
	       int32_t *arg, int batch)
{
	size_t n = (size_t)g->cin * g->ho * g->wo * batch;
	k_pool_fwd<<<grid_for(n), TPB, 0, ST(be)>>>(*g, x, y, arg, batch);
	LAUNCHED();
}

static void
cu_maxpool_bwd(backend *be, const conv_geom *g, const float *dy,
	       const int32_t *arg, float *dx, int batch)
{
	size_t n = (size_t)g->cin * g->h * g->w * batch;
	k_pool_bwd<<<grid_for(n), TPB, 0, ST(be)>>>(*g, dy, arg, dx, batch);
	LAUNCHED();
}

static void
cu_relu_fwd(backend *be, const float *x, float *y, size_t n)
{
	k_relu_fwd<<<grid_for(n), TPB, 0, ST(be)>>>(x, y, n);
	LAUNCHED();
}

static void
cu_relu_bwd(backend *be, const float *y, const float *dy, float *dx, size_t n)
{
	k_relu_bwd<<<grid_for(n), TPB, 0, ST(be)>>>(y, dy, dx, n);
	LAUNCHED();
}

static void
transpose(backend *be, const float *x, float *y, size_t rows, size_t cols)
{
	k_transpose<<<grid_for(rows * cols), TPB, 0, ST(be)>>>(x, y, rows, cols);
	LAUNCHED();
}

static void
cu_cpb_to_bcp(backend *be, const float *x, float *y, int c, int b, int p)
{
	transpose(be, x, y, (size_t)c * p, (size_t)b);
}

static void
cu_bcp_to_cpb(backend *be, const float *x, float *y, int c, int b, int p)
{
	transpose(be, x, y, (size_t)b, (size_t)c * p);
}

/* ---- batch normalization, global pooling, the shortcut ------------------ */

static void
cu_bn_fwd(backend *be, const float *x, const float *gamma, const float *beta,
	  float *y, float *mean, float *invstd, float *run_mean, float *run_var,
	  int c, int p, int batch, int training, float momentum, float eps,
	  int relu)
{
	if (c <= 0)
		return;
	k_bn_fwd<<<c, 1024, 0, ST(be)>>>(x, gamma, beta, y, mean, invstd, run_mean, run_var,
					 (size_t)p * batch, training, momentum, eps, relu);
	LAUNCHED();
}

static void
cu_bn_bwd(backend *be, const float *x, const float *gamma, const float *mean,
	  const float *invstd, const float *y, float *dy, float *dx,
	  float *dgamma, float *dbeta, int c, int p, int batch, int training,
	  int relu)
{
	if (c <= 0)
		return;
	k_bn_bwd<<<c, 1024, 0, ST(be)>>>(x, gamma, mean, invstd, y, dy, dx, dgamma, dbeta,
					 (size_t)p * batch, training, relu);
	LAUNCHED();
}

static void
cu_avgpool_fwd(backend *be, const float *x, float *y, int c, int p, int batch)
{
	k_avgpool_fwd<<<grid_for((size_t)c * batch), TPB, 0, ST(be)>>>(x, y, c, p, batch);
	LAUNCHED();
}

static void
cu_avgpool_bwd(backend *be, const float *dy, float *dx, int c, int p, int batch)
{
	k_avgpool_bwd<<<grid_for((size_t)c * p * batch), TPB, 0, ST(be)>>>(dy, dx, c, p, batch);
	LAUNCHED();
}

static void
cu_shortcut_fwd(backend *be, const float *x, float *y, int cin, int h, int w,
		int cout, int stride, int batch, int acc)
{
	const size_t n = (size_t)cout * ((h + stride - 1) / stride) * ((w + stride - 1) / stride) *
			 batch;
	k_shortcut_fwd<<<grid_for(n), TPB, 0, ST(be)>>>(x, y, cin, h, w, cout, stride, batch, acc);
	LAUNCHED();
}

static void
cu_shortcut_bwd(backend *be, const float *dy, float *dx, int cin, int h, int w,
		int cout, int stride, int batch, int acc)
{
	const size_t n = (size_t)cin * h * w * batch;
	k_shortcut_bwd<<<grid_for(n), TPB, 0, ST(be)>>>(dy, dx, cin, h, w, cout, stride, batch,
							 acc);
	LAUNCHED();
}

/* ---- the sequence ops (the transformer) ----------------------------------- */

/* blocks for one warp per row */
static unsigned
grid_rows(size_t rows)
{
	return grid_for(rows * 32);
}

static void
cu_embed_fwd(backend *be, const float *ids, const float *wte, const float *wpe, float *y,
	     int batch, int t, int e, int vocab)
{
	const size_t rows = (size_t)batch * t;
	k_embed_fwd<<<grid_for(rows * e), TPB, 0, ST(be)>>>(ids, wte, wpe, y, rows, t, e, vocab);
	LAUNCHED();
}

/* dwpe on the device; dwte from each token's positions in ascending order:
 * the ids are read back (B T floats) and bucket-sorted here, stably, so
 * that k_embed_bwd_wte adds in ref's order with no atomics (ref's bits,
 * run after run) */
static void
cu_embed_bwd(backend *be, const float *ids, const float *dy, float *dwte, float *dwpe,
	     int batch, int t, int e, int vocab, int acc)
{
	cuda_ctx *c = CTX(be);
	const size_t rows = (size_t)batch * t, nb = (size_t)vocab + 1 + rows;
	k_embed_bwd_wpe<<<grid_for((size_t)t * e), TPB, 0, c->st>>>(dy, dwpe, batch, t, e);
	LAUNCHED();
	float *hid = host_room(&c->h_ids, &c->h_ids_n, rows ? rows : 1);
	/* start[V + 1], order[rows], then a cursor per token */
	int *start = host_room(&c->h_bucket, &c->h_bucket_n, nb + vocab);
	int *order = start + vocab + 1, *next = order + rows;
	CK(cudaMemcpyAsync(hid, ids, sizeof(float) * rows, cudaMemcpyDeviceToHost, c->st));
	CK(cudaStreamSynchronize(c->st));
	memset(start, 0, sizeof(int) * ((size_t)vocab + 1));
	for (size_t r = 0; r < rows; r++) {
		if (!(hid[r] >= 0.0f && hid[r] < (float)vocab)) /* model_check_data */
			die(__FILE__, __LINE__, "embed_bwd", "a token id outside the vocabulary");
		start[(int)hid[r] + 1]++;
	}
	for (int v = 0; v < vocab; v++)
		start[v + 1] += start[v];
	memcpy(next, start, sizeof(int) * (size_t)vocab);
	for (size_t r = 0; r < rows; r++)
		order[next[(int)hid[r]]++] = (int)r;
	int *dev = room(be, &c->bucket, &c->bucket_n, nb);
	/* from pageable memory: staged before the call returns, so the host
	 * buffer is free for the next call at once */
	CK(cudaMemcpyAsync(dev, start, sizeof(int) * nb, cudaMemcpyHostToDevice, c->st));
	k_embed_bwd_wte<<<grid_for((size_t)vocab * e), TPB, 0, c->st>>>(dy, dwte, dev,
									  dev + vocab + 1, vocab, e,
									  acc);
	LAUNCHED();
}

static void
cu_layernorm_fwd(backend *be, const float *x, const float *g, const float *b, float *y,
		 float *mean, float *rstd, int rows, int n, float eps)
{
	if (rows <= 0 || n <= 0)
		return;
	k_ln_fwd<<<grid_rows((size_t)rows), TPB, 0, ST(be)>>>(x, g, b, y, mean, rstd,
							       (size_t)rows, n, eps);
	LAUNCHED();
}

static void
cu_layernorm_bwd(backend *be, const float *x, const float *g, const float *mean,
		 const float *rstd, const float *dy, float *dx, float *dg, float *db, int rows,
		 int n)
{
	col_sums(be, dy, x, mean, rstd, dg, db, rows, n);
	if (!dx || rows <= 0 || n <= 0)
		return;
	k_ln_bwd_x<<<grid_rows((size_t)rows), TPB, 0, ST(be)>>>(x, g, mean, rstd, dy, dx,
								 (size_t)rows, n);
	LAUNCHED();
}

static void
cu_gelu_fwd(backend *be, const float *x, float *y, size_t n)
{
	k_gelu_fwd<<<grid_for(n), TPB, 0, ST(be)>>>(x, y, n);
	LAUNCHED();
}

static void
cu_gelu_bwd(backend *be, const float *x, const float *dy, float *dx, size_t n)
{
	k_gelu_bwd<<<grid_for(n), TPB, 0, ST(be)>>>(x, dy, dx, n);
	LAUNCHED();
}

/* C = alpha op(A) op(B) for each (sample, head) pair, in row-major terms
 * as cu_gemm (the operands swapped for cuBLAS's column-major), one
 * cublasSgemmBatched over the pairs' pointers (k_pair_ptrs): the pairs'
 * matrices are strided in two levels (sample, head), which one stride
 * cannot say, and the pointers let the products read q, k, v straight
 * from the fused qkv rows and write each head's columns in place */
static void
pair_gemm(backend *be, int ta, int tb, int m, int n, int k, float alpha, pair_op a, pair_op b,
	  pair_op c, int batch, int heads)
{
	cuda_ctx *cx = CTX(be);
	const int cnt = batch * heads;
	const float beta = 0.0f;
	if (cnt <= 0 || m <= 0 || n <= 0)
		return;
	float **p = room(be, &cx->ptrs, &cx->ptrs_n, 3 * (size_t)cnt);
	k_pair_ptrs<<<grid_for((size_t)cnt), TPB, 0, cx->st>>>(a, b, c, p, heads, cnt);
	LAUNCHED();
	CKB(cublasSgemmBatched(cx->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
			       ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, p + cnt, b.ld, p,
			       a.ld, &beta, p + 2 * (size_t)cnt, c.ld, cnt));
}

/* q, k and v (o[0], o[1], o[2]) of each pair: the columns h D of the
 * fused rows of qkv, or of its gradient */
static void
qkv_ops(const float *qkv, int t, int heads, int hd, pair_op o[3])
{
	const int e = heads * hd;
	for (int i = 0; i < 3; i++)
		o[i] = pair_op{qkv + (size_t)i * e, (size_t)t * 3 * e, (size_t)hd, 3 * e};
}

/* Causal attention as the cpu backend does it, all pairs at once: S =
 * Q K^T / sqrt(D) into att (a T x T block per pair, the whole square:
 * the masked half is overwritten), each row's masked softmax in place,
 * then Y = att V into the heads' columns of y. */
static void
cu_attn_fwd(backend *be, const float *qkv, float *y, float *att, int batch, int t, int heads,
	    int hd)
{
	const size_t tt = (size_t)t * t, rows = (size_t)batch * heads * t;
	if (!rows || hd <= 0)
		return;
	const float scale = (float)(1.0 / sqrt((double)hd));
	pair_op in[3];
	qkv_ops(qkv, t, heads, hd, in);
	const pair_op a = {att, heads * tt, tt, t}, yo = {y, (size_t)t * heads * hd, (size_t)hd,
							   heads * hd};
	pair_gemm(be, 0, 1, t, t, hd, scale, in[0], in[1], a, batch, heads);
	k_attn_softmax<<<grid_rows(rows), TPB, 0, ST(be)>>>(att, rows, t);
	LAUNCHED();
	pair_gemm(be, 0, 0, t, hd, t, 1.0f, a, in[2], yo, batch, heads);
}

/* datt = dY V^T into the scratch dz, dz = att (datt - rowsum(att datt)) in
 * place, then dQ = dz K / sqrt(D), dK = dz^T Q / sqrt(D), dV = att^T dY,
 * each into its columns of dqkv (all of them written) */
static void
cu_attn_bwd(backend *be, const float *qkv, const float *att, const float *dy, float *dqkv,
	    int batch, int t, int heads, int hd)
{
	cuda_ctx *c = CTX(be);
	const size_t tt = (size_t)t * t, rows = (size_t)batch * heads * t;
	if (!rows || hd <= 0)
		return;
	const float scale = (float)(1.0 / sqrt((double)hd));
	float *dz = room(be, &c->dz, &c->dz_n, rows * t);
	pair_op in[3], d[3];
	qkv_ops(qkv, t, heads, hd, in);
	qkv_ops(dqkv, t, heads, hd, d);
	const pair_op a = {att, heads * tt, tt, t}, z = {dz, heads * tt, tt, t},
		      dyo = {dy, (size_t)t * heads * hd, (size_t)hd, heads * hd};
	pair_gemm(be, 0, 1, t, t, hd, 1.0f, dyo, in[2], z, batch, heads);
	k_attn_softmax_bwd<<<grid_rows(rows), TPB, 0, c->st>>>(att, dz, rows, t);
	LAUNCHED();
	pair_gemm(be, 0, 0, t, hd, t, scale, z, in[1], d[0], batch, heads);
	pair_gemm(be, 1, 0, t, hd, t, scale, z, in[0], d[1], batch, heads);
	pair_gemm(be, 1, 0, t, hd, t, 1.0f, a, dyo, d[2], batch, heads);
}

/* ---- loss --------------------------------------------------------------- */

/* room for `rows` rows of softmax results, on the device and the host */
static int
rows_room(cuda_ctx *c, int rows)
{
	if (rows <= c->rows_cap)
		return 0;
	cudaFree(c->labels);
	cudaFree(c->row_loss);
	cudaFree(c->row_hit);
	free(c->h_loss);
	free(c->h_hit);
	c->labels = NULL;
	c->row_loss = NULL;
	c->row_hit = NULL;
	c->h_loss = NULL;
	c->h_hit = NULL;
	c->rows_cap = 0;
	c->h_loss = (double *)malloc(sizeof(double) * rows);
	c->h_hit = (int *)malloc(sizeof(int) * rows);
	if (cudaMalloc(&c->labels, rows) != cudaSuccess ||
	    cudaMalloc(&c->row_loss, sizeof(double) * rows) != cudaSuccess ||
	    cudaMalloc(&c->row_hit, sizeof(int) * rows) != cudaSuccess || !c->h_loss ||
	    !c->h_hit)
		return -1;
	c->rows_cap = rows;
	return 0;
}

static double
cu_softmax_xent(backend *be, const float *logits, const uint8_t *labels,
		float *dlogits, int batch, int classes, int *correct)
{
	cuda_ctx *c = CTX(be);
	if (rows_room(c, batch) < 0)
		die(__FILE__, __LINE__, "softmax_xent", "out of memory for the loss's rows");
	CK(cudaMemcpyAsync(c->labels, labels, (size_t)batch, cudaMemcpyHostToDevice, c->st));
	k_softmax_xent<<<grid_for((size_t)batch), TPB, 0, c->st>>>(logits, c->labels, dlogits,
								   c->row_loss, c->row_hit,
								   batch, classes);
	LAUNCHED();
	CK(cudaMemcpyAsync(c->h_loss, c->row_loss, sizeof(double) * batch,
			   cudaMemcpyDeviceToHost, c->st));
	CK(cudaMemcpyAsync(c->h_hit, c->row_hit, sizeof(int) * batch, cudaMemcpyDeviceToHost,
			   c->st));
	CK(cudaStreamSynchronize(c->st));
	double loss = 0.0;
	int hits = 0;
	for (int r = 0; r < batch; r++) {
		loss += c->h_loss[r];
		hits += c->h_hit[r];
	}
	if (correct)
		*correct = hits;
	return batch ? loss / batch : 0.0;
}

/* ---- updates ------------------------------------------------------------ */

static void
cu_sgd(backend *be, float *w, const float *g, float *m, size_t n, float lr,
       float mu, float wd)
{
	k_sgd<<<grid_for(n), TPB, 0, ST(be)>>>(w, g, m, n, lr, mu, wd);
	LAUNCHED();
}

static void
cu_dc_grad(backend *be, size_t n, const float *g, const float *w,
	   const float *bak, float *ms, float lambda, float m, float eps,
	   float *out)
{
	k_dc_grad<<<grid_for(n), TPB, 0, ST(be)>>>(n, g, w, bak, ms, lambda, m, eps, out);
	LAUNCHED();
}

static void
cu_axpy(backend *be, size_t n, float a, const float *x, float *y)
{
	k_axpy<<<grid_for(n), TPB, 0, ST(be)>>>(n, a, x, y);
	LAUNCHED();
}

static void
cu_scal(backend *be, size_t n, float a, float *y)
{
	k_scal<<<grid_for(n), TPB, 0, ST(be)>>>(n, a, y);
	LAUNCHED();
}

static void
cu_opt_step(backend *be, float *w, const float *g, float *m, float *v, size_t n,
	    const opt_step *s)
{
	k_opt_step<<<grid_for(n), TPB, 0, ST(be)>>>(w, g, m, v, n, *s);
	LAUNCHED();
}

#define SUMSQ_BLOCKS 64

static double
cu_sumsq(backend *be, const float *x, size_t n)
{
	cuda_ctx *c = CTX(be);
	double part[SUMSQ_BLOCKS], s = 0;
	if (!n)
		return 0;
	k_sumsq<<<SUMSQ_BLOCKS, TPB, 0, c->st>>>(x, n, c->part);
	LAUNCHED();
	CK(cudaMemcpyAsync(part, c->part, sizeof(part), cudaMemcpyDeviceToHost, c->st));
	CK(cudaStreamSynchronize(c->st));
	for (int i = 0; i < SUMSQ_BLOCKS; i++)
		s += part[i];
	return s;
}

static int
cu_all_finite(backend *be, const float *x, size_t n)
{
	cuda_ctx *c = CTX(be);
	int bad = 0;
	CK(cudaMemsetAsync(c->flag, 0, sizeof(int), c->st));
	if (n) {
		k_nonfinite<<<grid_for(n), TPB, 0, c->st>>>(x, n, c->flag);
		LAUNCHED();
	}
	CK(cudaMemcpyAsync(&bad, c->flag, sizeof(int), cudaMemcpyDeviceToHost, c->st));
	CK(cudaStreamSynchronize(c->st));
	return !bad;
}

/* ---- what it is ------------------------------------------------------------ */

/* FP32 lanes per multiprocessor by compute capability (CUDA C Programming
 * Guide, "Arithmetic Instructions"): 64 on 6.0, 7.x and 8.0, 128 on 8.6,
 * 8.9, 9.0 and later */
static int
fp32_lanes(int major, int minor)
{
	if (major >= 9 || (major == 8 && minor >= 6))
		return 128;
	return 64;
}

static double
cu_peak_gflops(backend *be)
{
	(void)be;
	int dev = 0, sms = 0, khz = 0, major = 0, minor = 0;
	if (cudaGetDevice(&dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
		return 0;
	return (double)sms * fp32_lanes(major, minor) * 2.0 * khz * 1e-6;
}

static void
cu_describe(backend *be, char *buf, size_t len)
{
	(void)be;
	cudaDeviceProp p;
	size_t free_b = 0, total_b = 0;
	int dev = 0;
	if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess ||
	    cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
		cudaGetLastError();
		snprintf(buf, len, "cuda: device %d (no properties)", dev);
		return;
	}
	snprintf(buf, len, "%s (sm_%d%d, %d SMs), %.2f of %.1f GiB in use", p.name, p.major,
		 p.minor, p.multiProcessorCount, (double)(total_b - free_b) / (1 << 30),
		 (double)total_b / (1 << 30));
}

/* ---- lifetime ------------------------------------------------------------ */

static void
cu_destroy(backend *be)
{
	cuda_ctx *c = CTX(be);
	cudaStreamSynchronize(c->st);
	cublasDestroy(c->blas);
	cudaFree(c->labels);
	cudaFree(c->row_loss);
	cudaFree(c->row_hit);
	cudaFree(c->flag);
	cudaFree(c->part);
	cudaFree(c->col);
	cudaFree(c->cpart);
	cudaFree(c->dz);
	cudaFree(c->ptrs);
	cudaFree(c->bucket);
	cudaStreamDestroy(c->st);
	free(c->h_loss);
	free(c->h_hit);
	free(c->h_bucket);
	free(c->h_ids);
	free(c);
	free(be);
}

static backend_ops
make_ops(void)
{
	backend_ops o;
	memset(&o, 0, sizeof(o));
	o.name = "cuda";
	o.host_memory = 0;
	o.destroy = cu_destroy;
	o.set_threads = cu_set_threads;
	o.alloc = cu_alloc;
	o.free = cu_free;
	o.upload = cu_upload;
	o.download = cu_download;
	o.copy = cu_copy;
	o.zero = cu_zero;
	o.sync = cu_sync;
	o.gemm = cu_gemm;
	o.linear_fwd = cu_linear_fwd;
	o.linear_bwd = cu_linear_bwd;
	o.conv_fwd = cu_conv_fwd;
	o.conv_bwd = cu_conv_bwd;
	o.maxpool_fwd = cu_maxpool_fwd;
	o.maxpool_bwd = cu_maxpool_bwd;
	o.relu_fwd = cu_relu_fwd;
	o.relu_bwd = cu_relu_bwd;
	o.cpb_to_bcp = cu_cpb_to_bcp;
	o.bcp_to_cpb = cu_bcp_to_cpb;
	o.bn_fwd = cu_bn_fwd;
	o.bn_bwd = cu_bn_bwd;
	o.avgpool_fwd = cu_avgpool_fwd;
	o.avgpool_bwd = cu_avgpool_bwd;
	o.shortcut_fwd = cu_shortcut_fwd;
	o.shortcut_bwd = cu_shortcut_bwd;
	o.embed_fwd = cu_embed_fwd;
	o.embed_bwd = cu_embed_bwd;
	o.layernorm_fwd = cu_layernorm_fwd;
	o.layernorm_bwd = cu_layernorm_bwd;
	o.gelu_fwd = cu_gelu_fwd;
	o.gelu_bwd = cu_gelu_bwd;
	o.attn_fwd = cu_attn_fwd;
	o.attn_bwd = cu_attn_bwd;
	o.gather = NULL; /* the model gathers on the host and uploads */
	o.softmax_xent = cu_softmax_xent;
	o.sgd = cu_sgd;
	o.opt_step = cu_opt_step;
	o.sumsq = cu_sumsq;
	o.dc_grad = cu_dc_grad;
	o.axpy = cu_axpy;
	o.scal = cu_scal;
	o.all_finite = cu_all_finite;
	o.describe = cu_describe;
	o.peak_gflops = cu_peak_gflops;
	return o;
}

static const backend_ops cuda_ops = make_ops();

static int
cu_open(int nthreads, backend **out)
{
	(void)nthreads;
	*out = NULL;
	backend *be = (backend *)calloc(1, sizeof(*be));
	cuda_ctx *c = (cuda_ctx *)calloc(1, sizeof(*c));
	cudaError_t e = cudaSuccess;
	cublasStatus_t bs = CUBLAS_STATUS_SUCCESS;
	int rc = -SL_ENOMEM;
	/* the column cap: tests set it small so that layers run in bands */
	const char *cap = getenv("STALELAB_CUDA_CONV_FLOATS");
	if (!be || !c)
		goto fail;
	c->col_cap = cap && strtoull(cap, NULL, 10) > 0 ? (size_t)strtoull(cap, NULL, 10)
							 : CONV_FLOATS;
	if ((e = cudaSetDevice(0)) != cudaSuccess ||
	    (e = cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking)) != cudaSuccess)
		goto fail;
	if ((bs = cublasCreate(&c->blas)) != CUBLAS_STATUS_SUCCESS) {
		c->blas = NULL;
		goto fail;
	}
	/* FP32 as written: no TF32 tensor-core shortcut */
	if ((bs = cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS ||
	    (bs = cublasSetStream(c->blas, c->st)) != CUBLAS_STATUS_SUCCESS ||
	    (e = cudaMalloc(&c->flag, sizeof(int))) != cudaSuccess ||
	    (e = cudaMalloc(&c->part, sizeof(double) * SUMSQ_BLOCKS)) != cudaSuccess)
		goto fail;
	be->ops = &cuda_ops;
	be->ctx = c;
	*out = be;
	return 0;
fail:
	/* out of memory only when it was; else the device cannot be used */
	if ((e != cudaSuccess && e != cudaErrorMemoryAllocation) ||
	    (bs != CUBLAS_STATUS_SUCCESS && bs != CUBLAS_STATUS_ALLOC_FAILED))
		rc = -SL_EUNSUP;
	cudaGetLastError();
	if (c) {
		if (c->blas)
			cublasDestroy(c->blas);
		if (c->st)
			cudaStreamDestroy(c->st);
		cudaFree(c->flag);
		cudaFree(c->part);
	}
	free(c);
	free(be);
	return rc;
}

/* ---- can it run here? ----------------------------------------------------- */

static int
cu_score(char *why, size_t len)
{
	int drv = 0, rt = 0, n = 0;
	cudaRuntimeGetVersion(&rt);
	/* 0 when no driver is installed: asked first, since the device
	 * count says "insufficient driver" both for none and for an old one */
	if (cudaDriverGetVersion(&drv) != cudaSuccess || drv == 0) {
		snprintf(why, len, "no NVIDIA driver (the plugin's CUDA runtime is %d.%d)",
			 rt / 1000, rt % 1000 / 10);
		return 0;
	}
	cudaError_t e = cudaGetDeviceCount(&n);
	cudaGetLastError();
	if (e == cudaErrorInsufficientDriver) {
		snprintf(why, len,
			 "the NVIDIA driver (CUDA %d.%d) is older than the plugin's runtime (CUDA %d.%d)",
			 drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
		return 0;
	}
	if (e == cudaErrorNoDevice || (e == cudaSuccess && n <= 0)) {
		snprintf(why, len, "no CUDA device visible (CUDA_VISIBLE_DEVICES?)");
		return 0;
	}
	if (e != cudaSuccess) {
		snprintf(why, len, "%s", cudaGetErrorString(e));
		return 0;
	}
	/* the plugin carries code for compute capability 7.5 and later (the
	 * Makefile's -gencode); an older device would fail at its first
	 * kernel, so device 0, which open takes, must be one of those */
	int major = 0, minor = 0;
	if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess ||
	    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess) {
		cudaGetLastError();
		snprintf(why, len, "cannot read device 0's compute capability");
		return 0;
	}
	if (major * 10 + minor < 75) {
		snprintf(why, len, "device 0 has compute capability %d.%d; the plugin needs 7.5 or later",
			 major, minor);
		return 0;
	}
	return n;
}

static const sl_plugin cuda_plugin = {
	SL_PLUGIN_API, sizeof(backend_ops), "cuda", cu_score, cu_open,
};

extern "C" __attribute__((visibility("default"))) const sl_plugin *
sl_plugin_init(void)
{
	return &cuda_plugin;
}
