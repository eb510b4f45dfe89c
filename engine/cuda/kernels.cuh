/* kernels.cuh - the cuda backend's own kernels (everything but GEMM, which
 * is cuBLAS's). Each mirrors its op in engine/nn/backend_ref.c on the same
 * layouts: dense [B][features], convolution and pooling [C][H][W][B] with
 * the batch innermost, so the threads of a warp take consecutive images of
 * one pixel and every load is coalesced; the transformer's sequences
 * [B][T][E], a row per position (one warp per row where a row is
 * reduced: layer norm, attention's softmax). Elementwise and update
 * arithmetic uses the _rn intrinsics, which the compiler never fuses into
 * a multiply-add, so those ops give ref's bits exactly (GELU excepted:
 * float, with expf, near ref's double but not its bits); a convolution is
 * cuBLAS's GEMM over a column buffer (so its sums run in cuBLAS's order),
 * reductions run in double. Included once, by backend_cuda.cu. */
#ifndef SL_CUDA_KERNELS_CUH
#define SL_CUDA_KERNELS_CUH

#include <assert.h>
#include <math.h>
#include <stdint.h>

#define TPB 256 /* threads per block */

/* a grid-stride loop over [0, n) */
#define FOR_N(i, n)                                                          \
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
	     i += (size_t)gridDim.x * blockDim.x)

static unsigned
grid_for(size_t n)
{
	size_t b = (n + TPB - 1) / TPB;
	return (unsigned)(b < 1 ? 1 : b > 8192 ? 8192 : b);
}

/* ---- elementwise -------------------------------------------------------- */

/* y = act(y + b) row by row; b NULL: no bias (the tied LM head) */
__global__ void
k_bias_act(float *y, const float *b, size_t rows, int cols, int relu)
{
	FOR_N(i, rows * (size_t)cols) {
		float v = b ? __fadd_rn(y[i], b[i % (size_t)cols]) : y[i];
		y[i] = relu && !(v > 0.0f) ? 0.0f : v;
	}
}

__global__ void
k_relu_mask(float *dy, const float *y, size_t n)
{
	FOR_N(i, n)
		dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void
k_relu_fwd(const float *x, float *y, size_t n)
{
	FOR_N(i, n)
		y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void
k_relu_bwd(const float *y, const float *dy, float *dx, size_t n)
{
	FOR_N(i, n)
		dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

/* y (cols x rows) = x (rows x cols) transposed */
__global__ void
k_transpose(const float *x, float *y, size_t rows, size_t cols)
{
	FOR_N(i, rows * cols) {
		size_t r = i / cols, c = i % cols;
		y[c * rows + r] = x[i];
	}
}

/* ---- reductions (in double, one block per output) --------------------- */

/* the block's sum, valid in thread 0; blockDim.x a multiple of 32 */
__device__ double
block_sum(double v)
{
	__shared__ double part[32];
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_down_sync(0xffffffffu, v, o);
	const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
	if (lane == 0)
		part[wid] = v;
	__syncthreads();
	v = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.0;
	if (wid == 0)
		for (int o = 16; o > 0; o >>= 1)
			v += __shfl_down_sync(0xffffffffu, v, o);
	return v;
}

/* Column sums over rows (a dense or linear layer's db, layer norm's dg and
 * db), in two passes. k_col_part: block (x, y) takes the 32 columns from
 * 32 x and the `chunk` rows from y chunk, COL_LANES rows at a time (the
 * threads of a warp on consecutive columns, so every load is coalesced),
 * and writes part[y][0][j] = the sum of dy[r][j] xh[r][j] (when x is
 * given: layer norm's xh = (x - mean[r]) rstd[r], as ref forms it) and
 * part[y][1][j] = the sum of dy[r][j], in double; k_col_fin adds the
 * chunks in order and rounds once. Not ref's order (a chain over the
 * rows): the double sums may differ from ref's in their last bits. */
#define COL_CHUNK 128 /* rows per block, at least */
#define COL_LANES 8   /* rows at a time (blockDim.y) */

__global__ void
k_col_part(const float *dy, const float *x, const float *mean, const float *rstd,
	   double *part, int rows, int n, int chunk)
{
	__shared__ double sh[2][COL_LANES][33];
	const int tx = threadIdx.x, ty = threadIdx.y, j = blockIdx.x * 32 + tx;
	const int r0 = blockIdx.y * chunk, r1 = min(rows, r0 + chunk);
	double sg = 0.0, sb = 0.0;
	if (j < n)
		for (int r = r0 + ty; r < r1; r += COL_LANES) {
			const size_t i = (size_t)r * n + j;
			const double d = (double)dy[i];
			sb = __dadd_rn(sb, d);
			if (x)
				sg = __dadd_rn(sg, __dmul_rn(d, __dmul_rn(__dsub_rn((double)x[i],
										    (double)mean[r]),
									  (double)rstd[r])));
		}
	sh[0][ty][tx] = sg;
	sh[1][ty][tx] = sb;
	__syncthreads();
	if (ty || j >= n)
		return;
	for (int k = 1; k < COL_LANES; k++) {
		sg = __dadd_rn(sg, sh[0][k][tx]);
		sb = __dadd_rn(sb, sh[1][k][tx]);
	}
	part[(size_t)blockIdx.y * 2 * n + j] = sg;
	part[((size_t)blockIdx.y * 2 + 1) * n + j] = sb;
}

/* db[j] = the chunks' sums of dy, dg[j] (unless NULL) of dy xh */
__global__ void
k_col_fin(const double *part, int chunks, int n, float *dg, float *db)
{
	FOR_N(j, (size_t)n) {
		double sg = 0.0, sb = 0.0;
		for (int c = 0; c < chunks; c++) {
			sg = __dadd_rn(sg, part[(size_t)c * 2 * n + j]);
			sb = __dadd_rn(sb, part[((size_t)c * 2 + 1) * n + j]);
		}
		if (dg)
			dg[j] = (float)sg;
		db[j] = (float)sb;
	}
}

/* out[c] = sum of x[c len, (c + 1) len) (a convolution's db) */
__global__ void
k_seg_sums(const float *x, float *out, size_t len)
{
	const float *p = x + (size_t)blockIdx.x * len;
	double s = 0.0;
	for (size_t i = threadIdx.x; i < len; i += blockDim.x)
		s += p[i];
	s = block_sum(s);
	if (threadIdx.x == 0)
		out[blockIdx.x] = (float)s;
}

/* ---- convolution on [C][H][W][B] --------------------------------------- */

#define AT(c, h, w, H, W, B, b) ((((size_t)(c) * (H) + (h)) * (W) + (w)) * (B) + (b))

/* the inverse of AT for a plane of H x W: flat index -> (c, h, w, b) */
struct pix {
	int c, h, w, b;
};

__device__ pix
pix_of(size_t i, int H, int W, int B)
{
	pix p;
	p.b = (int)(i % B);
	size_t t = i / B;
	p.w = (int)(t % W);
	t /= W;
	p.h = (int)(t % H);
	p.c = (int)(t / H);
	return p;
}

/* A convolution is one GEMM on this layout (backend_cuda.cu): the column
 * matrix col[(ci, ki, kj)][(oh, ow, b)] holds the input each tap meets
 * (zero in the padding), K = cin k k rows by N = ho wo B columns, so that
 * y[co][(oh, ow, b)] = sum over K of w[co][K] col[K][(oh, ow, b)]. A band
 * of nr output rows from oh0 is a contiguous range of columns: the kernels
 * below fill or read the columns of one band (nr = ho: all of them). */
__global__ void
k_im2col(conv_geom g, const float *x, float *col, int B, int oh0, int nr)
{
	const int k = g.k, s = g.stride, pad = g.pad;
	const size_t nb = (size_t)nr * g.wo * B;
	FOR_N(i, (size_t)g.cin * k * k * nb) {
		const size_t r = i / nb, j = i % nb;
		const int kj = (int)(r % k), ki = (int)(r / k % k), ci = (int)(r / ((size_t)k * k));
		const int b = (int)(j % B);
		const size_t p = j / B;
		const int ow = (int)(p % g.wo), oh = oh0 + (int)(p / g.wo);
		const int ih = oh * s - pad + ki, iw = ow * s - pad + kj;
		col[i] = ih >= 0 && ih < g.h && iw >= 0 && iw < g.w ? x[AT(ci, ih, iw, g.h, g.w, B, b)]
								    : 0.0f;
	}
}

/* y[c][i] += bias[c] over planes of `per` values, then the relu */
__global__ void
k_bias_chan(float *y, const float *bias, size_t per, size_t n, int relu)
{
	FOR_N(i, n) {
		const float v = __fadd_rn(y[i], bias[i / per]);
		y[i] = relu && !(v > 0.0f) ? 0.0f : v;
	}
}

/* output index along one axis that input index i meets through tap t, or
 * -1: i = o s - pad + t */
__device__ int
conv_src(int i, int t, int s, int pad, int n_out)
{
	const int num = i + pad - t;
	if (num < 0 || num % s)
		return -1;
	return num / s < n_out ? num / s : -1;
}

/* The input gradient from the column gradient dcol (K x nb, one band):
 * one thread per input (ci, ih, iw, b) of rows [ih0, ih0 + nih), the sum
 * of the columns of the band that met it, written (acc 0) or added
 * (acc 1: bands that share input rows run in turn) */
__global__ void
k_col2im(conv_geom g, const float *dcol, float *dx, int B, int oh0, int nr, int ih0, int nih,
	 int acc)
{
	const int k = g.k, s = g.stride, pad = g.pad;
	const size_t nb = (size_t)nr * g.wo * B;
	FOR_N(i, (size_t)g.cin * nih * g.w * B) {
		const pix q = pix_of(i, nih, g.w, B);
		const int ci = q.c, ih = ih0 + q.h, iw = q.w, b = q.b;
		float sum = 0.0f;
		for (int ki = 0; ki < k; ki++) {
			const int oh = conv_src(ih, ki, s, pad, g.ho);
			if (oh < oh0 || oh >= oh0 + nr)
				continue; /* also oh = -1: no output row */
			for (int kj = 0; kj < k; kj++) {
				const int ow = conv_src(iw, kj, s, pad, g.wo);
				if (ow < 0)
					continue;
				sum += dcol[(((size_t)ci * k + ki) * k + kj) * nb +
					    ((size_t)(oh - oh0) * g.wo + ow) * B + b];
			}
		}
		float *d = &dx[AT(ci, ih, iw, g.h, g.w, B, b)];
		*d = acc ? *d + sum : sum;
	}
}

/* ---- max pooling on [C][H][W][B] ---------------------------------------- */

/* one thread per output: the first maximum in row order (strictly greater
 * replaces), arg its offset ih W + iw in the plane; -inf and -1 for a
 * window of padding alone */
__global__ void
k_pool_fwd(conv_geom g, const float *x, float *y, int32_t *arg, int B)
{
	const int k = g.k, s = g.stride, pad = g.pad;
	FOR_N(o, (size_t)g.cin * g.ho * g.wo * B) {
		const pix q = pix_of(o, g.ho, g.wo, B);
		const int c = q.c, oh = q.h, ow = q.w, b = q.b;
		float best = -INFINITY;
		int32_t at = -1;
		for (int ki = 0; ki < k; ki++) {
			const int ih = oh * s - pad + ki;
			if (ih < 0 || ih >= g.h)
				continue;
			for (int kj = 0; kj < k; kj++) {
				const int iw = ow * s - pad + kj;
				if (iw < 0 || iw >= g.w)
					continue;
				const float v = x[AT(c, ih, iw, g.h, g.w, B, b)];
				if (at < 0 || v > best) {
					best = v;
					at = ih * g.w + iw;
				}
			}
		}
		y[o] = best;
		arg[o] = at;
	}
}

/* one thread per input: the sum of dy over the outputs whose maximum it
 * was, in ascending output order (ref's order), so no atomics */
__global__ void
k_pool_bwd(conv_geom g, const float *dy, const int32_t *arg, float *dx, int B)
{
	const int k = g.k, s = g.stride, pad = g.pad;
	FOR_N(i, (size_t)g.cin * g.h * g.w * B) {
		const pix q = pix_of(i, g.h, g.w, B);
		const int c = q.c, ih = q.h, iw = q.w, b = q.b;
		const int32_t pos = ih * g.w + iw;
		/* the windows that hold (ih, iw): o s - pad <= i <= o s - pad + k - 1 */
		const int nh = ih + pad - k + 1, nw = iw + pad - k + 1;
		const int oh0 = nh <= 0 ? 0 : (nh + s - 1) / s, oh1 = min(g.ho - 1, (ih + pad) / s);
		const int ow0 = nw <= 0 ? 0 : (nw + s - 1) / s, ow1 = min(g.wo - 1, (iw + pad) / s);
		float acc = 0.0f;
		for (int oh = oh0; oh <= oh1; oh++)
			for (int ow = ow0; ow <= ow1; ow++) {
				const size_t o = AT(c, oh, ow, g.ho, g.wo, B, b);
				if (arg[o] == pos)
					acc += dy[o];
			}
		dx[i] = acc;
	}
}

/* ---- batch normalization on [C][P][B] (one block per channel) ----------
 * A channel's n = P B values are contiguous. The statistics are double
 * sums over the block's tree (not ref's single chain, so the mean and
 * invstd may differ from ref's in the last bits); everything after them is
 * ref's expression in ref's order, unfused. */

__global__ void
k_bn_fwd(const float *x, const float *gamma, const float *beta, float *y,
	 float *mean, float *invstd, float *run_mean, float *run_var, size_t n,
	 int training, float momentum, float eps, int relu)
{
	__shared__ double sh_m;
	__shared__ float sh_mu, sh_r;
	const int ch = blockIdx.x;
	const float *xc = x + (size_t)ch * n;
	float *yc = y + (size_t)ch * n;
	if (training) {
		double s = 0.0;
		for (size_t i = threadIdx.x; i < n; i += blockDim.x)
			s = __dadd_rn(s, (double)xc[i]);
		s = block_sum(s);
		if (threadIdx.x == 0)
			sh_m = __ddiv_rn(s, (double)n);
		__syncthreads(); /* also orders block_sum's two uses */
		const double m = sh_m;
		double v = 0.0;
		for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
			const double d = __dsub_rn((double)xc[i], m);
			v = __dadd_rn(v, __dmul_rn(d, d));
		}
		v = block_sum(v);
		if (threadIdx.x == 0) {
			const double var = __ddiv_rn(v, (double)n), mo = (double)momentum;
			const double unb = n > 1 ? __ddiv_rn(__dmul_rn(var, (double)n), (double)(n - 1))
						 : var;
			sh_mu = (float)m;
			sh_r = (float)__ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(var, (double)eps)));
			run_mean[ch] = (float)__dadd_rn(__dmul_rn(__dsub_rn(1.0, mo), (double)run_mean[ch]),
							__dmul_rn(mo, m));
			run_var[ch] = (float)__dadd_rn(__dmul_rn(__dsub_rn(1.0, mo), (double)run_var[ch]),
						       __dmul_rn(mo, unb));
		}
	} else if (threadIdx.x == 0) {
		sh_mu = run_mean[ch];
		sh_r = (float)__ddiv_rn(1.0, __dsqrt_rn(__dadd_rn((double)run_var[ch], (double)eps)));
	}
	__syncthreads();
	const float mu = sh_mu, r = sh_r, g = gamma[ch], bt = beta[ch];
	if (threadIdx.x == 0) {
		if (mean)
			mean[ch] = mu;
		if (invstd)
			invstd[ch] = r;
	}
	for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
		const float v = __fadd_rn(__fmul_rn(g, __fmul_rn(__fsub_rn(xc[i], mu), r)), bt);
		yc[i] = relu && !(v > 0.0f) ? 0.0f : v;
	}
}

__global__ void
k_bn_bwd(const float *x, const float *gamma, const float *mean,
	 const float *invstd, const float *y, float *dy, float *dx,
	 float *dgamma, float *dbeta, size_t n, int training, int relu)
{
	__shared__ double sh_a, sh_b;
	const int ch = blockIdx.x;
	const float *xc = x + (size_t)ch * n;
	float *dyc = dy + (size_t)ch * n;
	const double mu = mean[ch], r = invstd[ch];
	double s1 = 0.0, s2 = 0.0;
	for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
		float d = dyc[i];
		if (relu && !(y[(size_t)ch * n + i] > 0.0f))
			dyc[i] = d = 0.0f;
		const double xh = __dmul_rn(__dsub_rn((double)xc[i], mu), r);
		s1 = __dadd_rn(s1, (double)d);
		s2 = __dadd_rn(s2, __dmul_rn((double)d, xh));
	}
	s1 = block_sum(s1);
	if (threadIdx.x == 0)
		sh_a = s1;
	__syncthreads(); /* orders block_sum's two uses */
	s2 = block_sum(s2);
	if (threadIdx.x == 0) {
		sh_b = s2;
		dbeta[ch] = (float)sh_a;
		dgamma[ch] = (float)s2;
	}
	__syncthreads();
	if (!dx)
		return;
	float *dxc = dx + (size_t)ch * n;
	if (!training) {
		const float k = __fmul_rn(gamma[ch], invstd[ch]);
		for (size_t i = threadIdx.x; i < n; i += blockDim.x)
			dxc[i] = __fmul_rn(dyc[i], k);
		return;
	}
	const double k = __dmul_rn((double)gamma[ch], r), a = __ddiv_rn(sh_a, (double)n),
		     b = __ddiv_rn(sh_b, (double)n);
	for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
		const double xh = __dmul_rn(__dsub_rn((double)xc[i], mu), r);
		dxc[i] = (float)__dmul_rn(k, __dsub_rn(__dsub_rn((double)dyc[i], a), __dmul_rn(xh, b)));
	}
}

/* ---- global average pooling [C][P][B] -> [B][C] ------------------------ */

/* one thread per (c, b), b fastest so the loads coalesce: ref's double sum
 * in ascending p, the same bits */
__global__ void
k_avgpool_fwd(const float *x, float *y, int c, int p, int B)
{
	FOR_N(o, (size_t)c * B) {
		const int ch = (int)(o / B), b = (int)(o % B);
		double s = 0.0;
		for (int q = 0; q < p; q++)
			s = __dadd_rn(s, (double)x[((size_t)ch * p + q) * B + b]);
		y[(size_t)b * c + ch] = (float)__ddiv_rn(s, (double)p);
	}
}

__global__ void
k_avgpool_bwd(const float *dy, float *dx, int c, int p, int B)
{
	FOR_N(i, (size_t)c * p * B) {
		const int b = (int)(i % B), ch = (int)(i / ((size_t)p * B));
		dx[i] = __fdiv_rn(dy[(size_t)b * c + ch], (float)p);
	}
}

/* ---- the option-A shortcut (one thread per output, per input) ---------- */

__global__ void
k_shortcut_fwd(const float *x, float *y, int cin, int h, int w, int cout, int s,
	       int B, int acc)
{
	const int ho = (h + s - 1) / s, wo = (w + s - 1) / s, pad = (cout - cin) / 2;
	FOR_N(o, (size_t)cout * ho * wo * B) {
		const pix q = pix_of(o, ho, wo, B);
		const int ci = q.c - pad;
		if (ci < 0 || ci >= cin) {
			if (!acc)
				y[o] = 0.0f;
			continue;
		}
		const float v = x[AT(ci, q.h * s, q.w * s, h, w, B, q.b)];
		y[o] = acc ? __fadd_rn(y[o], v) : v;
	}
}

__global__ void
k_shortcut_bwd(const float *dy, float *dx, int cin, int h, int w, int cout, int s,
	       int B, int acc)
{
	const int ho = (h + s - 1) / s, wo = (w + s - 1) / s, pad = (cout - cin) / 2;
	FOR_N(i, (size_t)cin * h * w * B) {
		const pix q = pix_of(i, h, w, B);
		if (q.h % s || q.w % s) {
			if (!acc)
				dx[i] = 0.0f;
			continue;
		}
		const float v = dy[AT(q.c + pad, q.h / s, q.w / s, ho, wo, B, q.b)];
		dx[i] = acc ? __fadd_rn(dx[i], v) : v;
	}
}

/* ---- the sequence ops on [B][T][E] rows (the transformer) -------------- */

#define WARPS (TPB / 32) /* rows per block of the one-warp-per-row kernels */

/* the sum and the maximum over a warp's 32 lanes, in every lane */
template <typename T>
__device__ T
warp_sum(T v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ float
warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/* a grid-stride loop over rows [0, n), one warp each: every lane of a warp
 * takes the same rows, so the warp's shuffles meet */
#define FOR_ROWS(r, n)                                                          \
	for (size_t r = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < (n); \
	     r += ((size_t)gridDim.x * blockDim.x) >> 5)

/* y[r] = wte[id] + wpe[r % T] (float adds: ref's bits), id = ids[r]; an id
 * outside [0, V) is our bug (model_check_data), as ref asserts */
__global__ void
k_embed_fwd(const float *ids, const float *wte, const float *wpe, float *y, size_t rows,
	    int t, int e, int vocab)
{
	FOR_N(i, rows * (size_t)e) {
		const size_t r = i / e;
		const int j = (int)(i % e), p = (int)(r % t), id = (int)ids[r];
		assert(id >= 0 && id < vocab);
		y[i] = __fadd_rn(wte[(size_t)id * e + j], wpe[(size_t)p * e + j]);
	}
}

/* dwpe[p][j] = the sum over b of dy[b][p][j]: ref's double sum in
 * ascending b, so ref's bits */
__global__ void
k_embed_bwd_wpe(const float *dy, float *dwpe, int batch, int t, int e)
{
	const size_t te = (size_t)t * e;
	FOR_N(i, te) {
		double s = 0.0;
		for (int b = 0; b < batch; b++)
			s = __dadd_rn(s, (double)dy[(size_t)b * te + i]);
		dwpe[i] = (float)s;
	}
}

/* dwte[v][j] = its own value (acc: the tied head's share) or 0, plus
 * dy[r][j] for the rows r of token v in ascending order: order[start[v]]
 * to order[start[v + 1] - 1] (the host's stable bucket sort of the ids).
 * A thread per entry and no atomics: ref's double sum in ref's order, so
 * ref's bits, the same on every run (a float atomicAdd scatter would make
 * them depend on the threads' order). */
__global__ void
k_embed_bwd_wte(const float *dy, float *dwte, const int *start, const int *order, int vocab,
		int e, int acc)
{
	FOR_N(i, (size_t)vocab * e) {
		const int v = (int)(i / e), j = (int)(i % e);
		double s = acc ? (double)dwte[i] : 0.0;
		for (int k = start[v]; k < start[v + 1]; k++)
			s = __dadd_rn(s, (double)dy[(size_t)order[k] * e + j]);
		dwte[i] = (float)s;
	}
}

/* Layer norm, one warp per row of n: ref's expressions in double, never
 * fused; the row's sums run over the lanes and a shuffle tree (not ref's
 * chain), so mean and rstd may differ from ref's in their last bits. */
__global__ void
k_ln_fwd(const float *x, const float *g, const float *b, float *y, float *mean, float *rstd,
	 size_t rows, int n, float eps)
{
	const int lane = threadIdx.x & 31;
	FOR_ROWS(r, rows) {
		const float *xr = x + r * n;
		float *yr = y + r * n;
		double s = 0.0, v = 0.0;
		for (int j = lane; j < n; j += 32)
			s = __dadd_rn(s, (double)xr[j]);
		const double m = __ddiv_rn(warp_sum(s), (double)n);
		for (int j = lane; j < n; j += 32) {
			const double d = __dsub_rn((double)xr[j], m);
			v = __dadd_rn(v, __dmul_rn(d, d));
		}
		const double var = __ddiv_rn(warp_sum(v), (double)n);
		const double rs = __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(var, (double)eps)));
		if (lane == 0) {
			mean[r] = (float)m;
			rstd[r] = (float)rs;
		}
		for (int j = lane; j < n; j += 32)
			yr[j] = (float)__dadd_rn(__dmul_rn(__dmul_rn(__dsub_rn((double)xr[j], m), rs),
							   (double)g[j]),
						 (double)b[j]);
	}
}

/* dx = rstd (dy g - mean(dy g) - xh mean(dy g xh)) per row, one warp each */
__global__ void
k_ln_bwd_x(const float *x, const float *g, const float *mean, const float *rstd,
	   const float *dy, float *dx, size_t rows, int n)
{
	const int lane = threadIdx.x & 31;
	FOR_ROWS(r, rows) {
		const float *xr = x + r * n, *dyr = dy + r * n;
		float *dxr = dx + r * n;
		const double m = mean[r], rs = rstd[r];
		double a = 0.0, c = 0.0; /* sums of dy g and dy g xh */
		for (int j = lane; j < n; j += 32) {
			const double d = __dmul_rn((double)dyr[j], (double)g[j]);
			a = __dadd_rn(a, d);
			c = __dadd_rn(c, __dmul_rn(d, __dmul_rn(__dsub_rn((double)xr[j], m), rs)));
		}
		a = __ddiv_rn(warp_sum(a), (double)n);
		c = __ddiv_rn(warp_sum(c), (double)n);
		for (int j = lane; j < n; j += 32) {
			const double xh = __dmul_rn(__dsub_rn((double)xr[j], m), rs);
			const double d = __dmul_rn((double)dyr[j], (double)g[j]);
			dxr[j] = (float)__dmul_rn(rs, __dsub_rn(__dsub_rn(d, a), __dmul_rn(xh, c)));
		}
	}
}

/* GELU, the tanh form, in float (as the cpu backend; ref's double is
 * within an ulp or two): with s = (1 + tanh(u)) / 2 = 1 / (1 + e^{-2u}),
 * u = sqrt(2 / pi) (x + 0.044715 x^3), which has no cancellation near
 * u = 0 and saturates cleanly (e^{-2u} = inf gives s = 0),
 * y = x s and dy/dx = s + 2 x s (1 - s) sqrt(2 / pi) (1 + 3 0.044715 x^2) */
#define GELU_K 0.79788456080286535588f /* sqrt(2 / pi) */
#define GELU_C 0.044715f

__device__ float
gelu_s(float v)
{
	const float u = GELU_K * (v + GELU_C * v * v * v);
	return 1.0f / (1.0f + expf(-2.0f * u));
}

__global__ void
k_gelu_fwd(const float *x, float *y, size_t n)
{
	FOR_N(i, n)
		y[i] = x[i] * gelu_s(x[i]);
}

__global__ void
k_gelu_bwd(const float *x, const float *dy, float *dx, size_t n)
{
	FOR_N(i, n) {
		const float v = x[i], s = gelu_s(v);
		const float d = s + 2.0f * v * s * (1.0f - s) * GELU_K * (1.0f + 3.0f * GELU_C * v * v);
		dx[i] = dy[i] * d;
	}
}

/* An operand of a GEMM batched over (sample, head) pairs: pair k = b H + h
 * has its matrix at p + b sb + h sh, rows ld floats apart (attention's
 * q, k and v are the columns h D of each qkv row, its probabilities one
 * T x T block per pair). */
struct pair_op {
	const float *p;
	size_t sb, sh;
	int ld;
};

/* the pointer arrays of one batched GEMM: a's n, then b's, then c's */
__global__ void
k_pair_ptrs(pair_op a, pair_op b, pair_op c, float **out, int heads, int n)
{
	FOR_N(i, (size_t)n) {
		const size_t s = i / heads, h = i % heads;
		out[i] = const_cast<float *>(a.p + s * a.sb + h * a.sh);
		out[n + i] = const_cast<float *>(b.p + s * b.sb + h * b.sh);
		out[2 * n + i] = const_cast<float *>(c.p + s * c.sb + h * c.sh);
	}
}

/* Each row i (of T) of one pair's scaled scores S, in place: the softmax
 * over j <= i (the maximum subtracted; float, expf), zeros after. One warp
 * per row of the B H T rows. */
__global__ void
k_attn_softmax(float *att, size_t rows, int t)
{
	const int lane = threadIdx.x & 31;
	FOR_ROWS(r, rows) {
		float *a = att + r * t;
		const int i = (int)(r % t);
		float mx = -INFINITY, z = 0.0f;
		for (int j = lane; j <= i; j += 32)
			mx = fmaxf(mx, a[j]);
		mx = warp_max(mx);
		for (int j = lane; j <= i; j += 32)
			z += expf(a[j] - mx);
		z = warp_sum(z);
		for (int j = lane; j < t; j += 32)
			a[j] = j <= i ? expf(a[j] - mx) / z : 0.0f;
	}
}

/* The softmax's backward on each row, in place: d holds datt on entry and
 * leaves with dz = att (datt - sum over j <= i of att datt) for j <= i,
 * zeros after. One warp per row. */
__global__ void
k_attn_softmax_bwd(const float *att, float *d, size_t rows, int t)
{
	const int lane = threadIdx.x & 31;
	FOR_ROWS(r, rows) {
		const float *a = att + r * t;
		float *dr = d + r * t;
		const int i = (int)(r % t);
		float s = 0.0f;
		for (int j = lane; j <= i; j += 32)
			s += a[j] * dr[j];
		s = warp_sum(s);
		for (int j = lane; j < t; j += 32)
			dr[j] = j <= i ? a[j] * (dr[j] - s) : 0.0f;
	}
}

/* ---- softmax cross-entropy: one thread per row ------------------------- */

__global__ void
k_softmax_xent(const float *logits, const uint8_t *labels, float *dlogits,
	       double *row_loss, int *row_hit, int batch, int classes)
{
	FOR_N(r, (size_t)batch) {
		const float *z = logits + r * classes;
		float mx = z[0];
		int am = 0;
		for (int j = 1; j < classes; j++)
			if (z[j] > mx) {
				mx = z[j];
				am = j;
			}
		const int y = labels[r];
		row_hit[r] = am == y;
		double sum = 0.0;
		for (int j = 0; j < classes; j++)
			sum += exp((double)(z[j] - mx));
		const double lse = log(sum) + mx;
		row_loss[r] = lse - z[y];
		if (dlogits) {
			float *d = dlogits + r * classes;
			for (int j = 0; j < classes; j++)
				d[j] = (float)(exp((double)z[j] - lse) / batch);
			d[y] -= 1.0f / (float)batch;
		}
	}
}

/* ---- the rules' arithmetic (ref's expressions, never fused) ---------- */

__global__ void
k_sgd(float *w, const float *g, float *m, size_t n, float lr, float mu, float wd)
{
	FOR_N(i, n) {
		const float gi = __fadd_rn(g[i], __fmul_rn(wd, w[i]));
		if (m) {
			m[i] = __fadd_rn(__fmul_rn(mu, m[i]), gi);
			w[i] = __fsub_rn(w[i], __fmul_rn(lr, m[i]));
		} else {
			w[i] = __fsub_rn(w[i], __fmul_rn(lr, gi));
		}
	}
}

__global__ void
k_dc_grad(size_t n, const float *g, const float *w, const float *bak, float *ms,
	  float lambda, float m, float eps, float *out)
{
	FOR_N(i, n) {
		const float g2 = __fmul_rn(g[i], g[i]);
		float lam = lambda;
		if (ms) {
			ms[i] = __fadd_rn(__fmul_rn(m, ms[i]), __fmul_rn(__fsub_rn(1.0f, m), g2));
			lam = __fdiv_rn(lambda, __fsqrt_rn(__fadd_rn(ms[i], eps)));
		}
		out[i] = __fadd_rn(g[i], __fmul_rn(__fmul_rn(lam, g2), __fsub_rn(w[i], bak[i])));
	}
}

__global__ void
k_axpy(size_t n, float a, const float *x, float *y)
{
	FOR_N(i, n)
		y[i] = __fadd_rn(y[i], __fmul_rn(a, x[i]));
}

__global__ void
k_scal(size_t n, float a, float *y)
{
	FOR_N(i, n)
		y[i] = __fmul_rn(y[i], a);
}

/* *bad = 1 when one of x is NaN or infinite (exponent bits all ones) */
__global__ void
k_nonfinite(const float *x, size_t n, int *bad)
{
	FOR_N(i, n)
		if ((__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u)
			*bad = 1;
}

/* ---- the optimiser (ref's expressions in ref's order, never fused) ----- */

__global__ void
k_opt_step(float *w, const float *g, float *m, float *v, size_t n, opt_step s)
{
	FOR_N(i, n) {
		if (!s.adam) {
			const float gi = __fadd_rn(g[i], __fmul_rn(s.wd, w[i]));
			m[i] = __fadd_rn(__fmul_rn(s.mu, m[i]), gi);
			w[i] = __fsub_rn(w[i], __fmul_rn(s.lr, __fadd_rn(gi, __fmul_rn(s.mu, m[i]))));
			continue;
		}
		const float wi = __fmul_rn(w[i], s.shrink);
		const float gi = __fadd_rn(g[i], __fmul_rn(s.wd, wi));
		m[i] = __fadd_rn(__fmul_rn(s.b1, m[i]), __fmul_rn(s.c1, gi));
		v[i] = __fadd_rn(__fmul_rn(s.b2, v[i]), __fmul_rn(s.c2, __fmul_rn(gi, gi)));
		const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v[i]), s.bc2_sqrt), s.eps);
		w[i] = __fsub_rn(wi, __fmul_rn(s.step_size, __fdiv_rn(m[i], denom)));
	}
}

/* each block's sum of x^2 in double into part[blockIdx.x] (a fixed grid
 * and a fixed tree: the same bits on every call) */
__global__ void
k_sumsq(const float *x, size_t n, double *part)
{
	__shared__ double sh[TPB];
	double acc = 0;
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (size_t)blockDim.x * gridDim.x)
		acc += (double)x[i] * (double)x[i];
	sh[threadIdx.x] = acc;
	__syncthreads();
	for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
		if (threadIdx.x < k)
			sh[threadIdx.x] += sh[threadIdx.x + k];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		part[blockIdx.x] = sh[0];
}

#endif
