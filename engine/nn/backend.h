/* backend.h - the numeric backend: a const table of operations plus a
 * context, opened by name through the registry (backend_open) once per
 * worker. Backends: cpu (OpenBLAS and SIMD kernels, engine/nn/backend_cpu.c),
 * ref (plain C loops, the same bits on every x86-64, engine/nn/backend_ref.c),
 * cuda (a plugin, engine/cuda/, loaded at run time). Layers, models and update rules call
 * be->ops->X(be, ...) and never a BLAS or CUDA function directly, so a CUDA
 * backend (a dlopen'ed plugin) drops in behind the same table.
 *
 * All tensors are float32, row-major, in backend memory (alloc/upload). Two
 * activation layouts exist: dense layers use [B][features]; convolution and
 * pooling use [C][H][W][B], the batch innermost, so a vector register holds
 * one pixel of consecutive images and a direct convolution needs no
 * im2col. */
#ifndef SL_BACKEND_H
#define SL_BACKEND_H

#include <stddef.h>
#include <stdint.h>

typedef struct backend backend;

/* Geometry of one convolution or pooling (per sample). */
typedef struct conv_geom {
	int cin, h, w;    /* input channels and size */
	int cout;         /* output channels (conv) */
	int k, stride, pad;
	int ho, wo;       /* output size */
} conv_geom;

/* One optimiser step of the ops->opt_step op (the server's update, engine/ps/
 * optim.c). The constants are worked out on the host, in double, and
 * passed as floats. */
typedef struct opt_step {
	int adam;        /* 0: Nesterov momentum; 1: Adam */
	float lr;        /* nesterov */
	float mu;        /* nesterov: momentum */
	float wd;        /* L2 decay folded into the gradient: g' = g + wd w */
	float shrink;    /* adamw's decoupled decay: w *= shrink first (1: none) */
	float b1, b2, eps;
	float c1, c2;    /* 1 - b1 and 1 - b2, worked out in double (as torch) */
	float step_size; /* adam: lr / (1 - b1^t) */
	float bc2_sqrt;  /* adam: sqrt(1 - b2^t) */
} opt_step;

typedef struct backend_ops {
	const char *name; /* the device name: "cpu", "ref", ... */
	/* 1 when alloc returns host memory that the CPU may read and write
	 * directly (upload/download are plain copies); 0 for device memory. */
	int host_memory;
	void (*destroy)(backend *);
	/* Compute threads to use from now on (the CPU backend: 1, or all it
	 * was made with); called between steps. */
	void (*set_threads)(backend *, int n);

	/* Memory: zeroed allocation, host<->backend copies, backend copies. */
	void *(*alloc)(backend *, size_t bytes);
	void (*free)(backend *, void *p);
	void (*upload)(backend *, void *dst, const void *src, size_t bytes);
	void (*download)(backend *, void *dst, const void *src, size_t bytes);
	void (*copy)(backend *, void *dst, const void *src, size_t bytes);
	void (*zero)(backend *, void *dst, size_t bytes);
	void (*sync)(backend *);

	/* C[MxN] = alpha op(A) op(B) + beta C. */
	void (*gemm)(backend *, int trans_a, int trans_b, int m, int n, int k,
		     float alpha, const float *a, int lda, const float *b,
		     int ldb, float beta, float *c, int ldc);

	/* Dense: y[B x out] = act(x[B x in] . w[out x in]^T + b). b may be
	 * NULL (no bias: the tied LM head) on a backend that has the sequence
	 * ops below (layernorm_fwd set): ref, cpu and cuda. */
	void (*linear_fwd)(backend *, const float *x, const float *w,
			   const float *b, float *y, int batch, int in, int out,
			   int relu);
	/* Dense backward. dy is masked in place by relu'(y) when relu is set.
	 * dw = dy^T x, db = column sums of dy (both overwritten; db NULL for
	 * no bias, as b above); dx = dy w unless dx is NULL. */
	void (*linear_bwd)(backend *, const float *x, const float *w,
			   const float *y, float *dy, float *dx, float *dw,
			   float *db, int batch, int in, int out, int relu);

	/* Convolution on [C][H][W][B]: y = act(conv(x, w) + b). */
	void (*conv_fwd)(backend *, const conv_geom *, const float *x,
			 const float *w, const float *b, float *y, int batch,
			 int relu);
	/* dy masked in place by relu'(y) if relu; dw, db overwritten; dx
	 * unless NULL. */
	void (*conv_bwd)(backend *, const conv_geom *, const float *x,
			 const float *w, const float *y, float *dy, float *dx,
			 float *dw, float *db, int batch, int relu);

	/* Max pooling on [C][H][W][B] (geom.cin channels, cout unused).
	 * arg receives the argmax offset ih W + iw of each output within its
	 * image's plane (-1 for a window of padding alone). */
	void (*maxpool_fwd)(backend *, const conv_geom *, const float *x,
			    float *y, int32_t *arg, int batch);
	void (*maxpool_bwd)(backend *, const conv_geom *, const float *dy,
			    const int32_t *arg, float *dx, int batch);

	/* Standalone relu: y = max(x, 0); dx = dy * (y > 0). */
	void (*relu_fwd)(backend *, const float *x, float *y, size_t n);
	void (*relu_bwd)(backend *, const float *y, const float *dy, float *dx,
			 size_t n);

	/* [C][P][B] <-> [B][C*P] (flatten between conv and dense parts). */
	void (*cpb_to_bcp)(backend *, const float *x, float *y, int c, int b,
			   int p);
	void (*bcp_to_cpb)(backend *, const float *x, float *y, int c, int b,
			   int p);

	/* Batch normalization on [C][P][B] (P = H W): channel c's n = P B
	 * values are the contiguous run x[c n, (c + 1) n), normalised over
	 * (H, W, B) with per-channel gamma, beta:
	 *   y = act(gamma xh + beta),  xh = (x - mean) invstd  (float, unfused).
	 * training: mean and biased var of the n values (double, two passes,
	 * each sum in ascending index order on ref), written to mean[c] and
	 * invstd[c] = 1 / sqrt(var + eps) (double, rounded once) for the
	 * backward; then, as torch.nn.BatchNorm2d,
	 *   run_mean = (1 - momentum) run_mean + momentum mean,
	 *   run_var  = (1 - momentum) run_var + momentum var n / (n - 1)
	 * (double, rounded once; n > 1, as torch requires).
	 * eval (training 0): the running statistics normalise, unchanged;
	 * mean[c] = run_mean[c] and invstd[c] = 1 / sqrt(run_var[c] + eps) are
	 * written all the same, so bn_bwd needs no other input.
	 * relu: the activation is fused (ResNet's conv -> bn -> relu; the
	 * block's second bn adds the shortcut first and uses relu_fwd).
	 * FLOPs per sample: training 8 C P (1 for the mean's sum, 3 for the
	 * variance's, 4 for y), eval 4 C P (+ C P compares with relu). */
	void (*bn_fwd)(backend *, const float *x, const float *gamma,
		       const float *beta, float *y, float *mean, float *invstd,
		       float *run_mean, float *run_var, int c, int p, int batch,
		       int training, float momentum, float eps, int relu);
	/* Its backward from the mean and invstd bn_fwd saved. dy is masked in
	 * place by relu'(y) when relu is set (y is read only then). Per
	 * channel, with xh = (x - mean) invstd in double and N = P B:
	 *   dbeta = sum dy,  dgamma = sum dy xh  (double, ascending index;
	 *   both overwritten);
	 * training: dx = gamma invstd (dy - dbeta / N - xh dgamma / N)
	 *   (= invstd/N (N dy gamma - sum dy gamma - xh sum dy gamma xh),
	 *   the batch statistics taken as functions of x; double on ref);
	 * eval: dx = dy (gamma invstd) (float).
	 * dx unless NULL. FLOPs per sample: training 10 C P (5 for the sums:
	 * xh, dy xh and two adds; 5 for dx), eval 6 C P. */
	void (*bn_bwd)(backend *, const float *x, const float *gamma,
		       const float *mean, const float *invstd, const float *y,
		       float *dy, float *dx, float *dgamma, float *dbeta, int c,
		       int p, int batch, int training, int relu);
	/* Global average pooling [C][P][B] -> [B][C] (the dense layout):
	 * y[b][c] = (sum over p of x[c][p][b], double, ascending p) / P,
	 * rounded once. Backward: dx[c][p][b] = dy[b][c] / P (float,
	 * overwritten). FLOPs per sample: C P (+ C divides) each way. */
	void (*avgpool_fwd)(backend *, const float *x, float *y, int c, int p,
			    int batch);
	void (*avgpool_bwd)(backend *, const float *dy, float *dx, int c, int p,
			    int batch);
	/* The CIFAR ResNet's "option A" shortcut: x [Cin][H][W][B] to y
	 * [Cout][Ho][Wo][B], Ho = ceil(H / s), Wo = ceil(W / s), s in {1, 2},
	 * Cout >= Cin: y[pad + ci][oh][ow] = x[ci][oh s][ow s] (the even rows
	 * and columns when s = 2, as x[:, :, ::2, ::2]), the pad = (Cout -
	 * Cin) / 2 channels before and the Cout - Cin - pad after zero. With
	 * acc set, y += that instead of y = (a residual block adds its
	 * shortcut onto the second bn's output in place; y + 1.0 x rounds as
	 * a + b, which is why there is no add op: axpy(1) is the sum, and its
	 * backward passes dy to both branches). Backward: dx[ci][ih][iw] =
	 * dy[pad + ci][ih / s][iw / s] where s divides ih and iw, else 0,
	 * added to dx with acc (the block's input also feeds its first conv).
	 * FLOPs per sample: Cout Ho Wo adds with acc, none without. */
	void (*shortcut_fwd)(backend *, const float *x, float *y, int cin, int h,
			     int w, int cout, int stride, int batch, int acc);
	void (*shortcut_bwd)(backend *, const float *dy, float *dx, int cin,
			     int h, int w, int cout, int stride, int batch,
			     int acc);
	/* Optional (NULL: the shortcut node runs copy, shortcut_fwd and
	 * relu_fwd in turn, whose bits these must give): a residual block's
	 * end in one pass. Forward: y = a + S(x) on the channels x reaches,
	 * y = a on the zero-padded ones, then y = (y > 0 ? y : 0) when relu.
	 * Backward: d = (y > 0 ? dy : 0) when relu, else dy; da = d (when da);
	 * dx = S^T d, written (when dx). a, y, dy, da are [Cout][Ho][Wo][B],
	 * x and dx [Cin][H][W][B]. */
	void (*residual_fwd)(backend *, const float *a, const float *x, float *y,
			     int cin, int h, int w, int cout, int stride, int batch,
			     int relu);
	void (*residual_bwd)(backend *, const float *y, const float *dy, float *da,
			     float *dx, int cin, int h, int w, int cout, int stride,
			     int batch, int relu);

	/* ---- the sequence ops (the transformer, engine/nn/ops/embed.c,
	 * layernorm.c, gelu.c, attention.c). Optional: NULL on a backend
	 * without them, where a model using them is refused by name
	 * (model_new); ref, refdev, cpu and cuda have them all. A sequence
	 * activation is [B][T][E] row-major: one row of E features per
	 * position. ref computes in double and rounds once, with its own exp;
	 * cpu in float on the team (sgemm for attention's products); cuda as
	 * engine/cuda/kernels.cuh says (cuBLAS for attention's products, the
	 * embedding's backward with ref's bits, layer norm in double). */
	/* Token and position embedding: y[b][t] = wte[id] + wpe[t] (float),
	 * id = (int)ids[b T + t], a float holding an integer in [0, V) (the
	 * dataset's token ids; V = vocab, the model's classes: the run checks
	 * the data, model_check_data, so an id outside is our bug and ref and
	 * cpu assert). wte [V][E], wpe [T][E]. FLOPs per sample: T E. */
	void (*embed_fwd)(backend *, const float *ids, const float *wte,
			  const float *wpe, float *y, int batch, int t, int e,
			  int vocab);
	/* Its backward: dwpe[t] = sum over b of dy[b][t] (written); dwte[v] =
	 * the sum of dy[b][t] over the positions whose id is v, ascending (b,
	 * t) (a scatter-add: repeated tokens add up), added onto dwte when acc
	 * (a tied LM head wrote its share first), else written (rows no token
	 * hits: 0). */
	void (*embed_bwd)(backend *, const float *ids, const float *dy,
			  float *dwte, float *dwpe, int batch, int t, int e,
			  int vocab, int acc);
	/* Layer norm over each of `rows` rows of n: mean and biased variance
	 * of the row (double sums), rstd = 1 / sqrt(var + eps), y = (x -
	 * mean) rstd g + b; mean[r] and rstd[r] kept for the backward. */
	void (*layernorm_fwd)(backend *, const float *x, const float *g,
			      const float *b, float *y, float *mean, float *rstd,
			      int rows, int n, float eps);
	/* With xh = (x - mean) rstd: dg = sum over rows of dy xh, db = sum of
	 * dy (written); dx = rstd (dy g - mean(dy g) - xh mean(dy g xh)) per
	 * row, unless dx is NULL. */
	void (*layernorm_bwd)(backend *, const float *x, const float *g,
			      const float *mean, const float *rstd,
			      const float *dy, float *dx, float *dg, float *db,
			      int rows, int n);
	/* GELU, the tanh form (GPT-2's, llm.c's; torch's approximate="tanh"):
	 * y = x (1 + tanh(u)) / 2, u = sqrt(2 / pi) (x + 0.044715 x^3);
	 * dx = dy (dy/dx of that), from x. */
	void (*gelu_fwd)(backend *, const float *x, float *y, size_t n);
	void (*gelu_bwd)(backend *, const float *x, const float *dy, float *dx,
			 size_t n);
	/* Causal multi-head self-attention on one fused projection: qkv
	 * [B][T][3E] (q the first E columns, k the next, v the last; head h
	 * the D = E / H columns from h D of each), y [B][T][E] (heads side by
	 * side). att [B][H][T][T] receives the probabilities
	 * softmax_j(q_t . k_j / sqrt(D)) over j <= t (j > t: 0), kept for
	 * the backward; y_t = sum_j att[t][j] v_j. */
	void (*attn_fwd)(backend *, const float *qkv, float *y, float *att,
			 int batch, int t, int heads, int hd);
	/* Its backward from att: dv_j = sum_t att[t][j] dy_t; datt[t][j] =
	 * dy_t . v_j; dz = att (datt - sum_j att datt) (the softmax's
	 * Jacobian); dq_t = sum_j dz[t][j] k_j / sqrt(D), dk_j = sum_t
	 * dz[t][j] q_t / sqrt(D). dqkv [B][T][3E] written whole. */
	void (*attn_bwd)(backend *, const float *qkv, const float *att,
			 const float *dy, float *dqkv, int batch, int t,
			 int heads, int hd);

	/* The batch's input, gathered from the dataset's images x[i * dim]
	 * for i = idx[0..batch) into host memory dst: [B][dim], or with
	 * inner set [dim][B] (the batch innermost, for conv models). A
	 * host-side op (dst is the model's input or a staging copy), so NULL
	 * is allowed: the model gathers on its own thread. */
	void (*gather)(backend *, float *dst, const float *x,
		       const uint32_t *idx, int batch, int dim, int inner);

	/* Softmax cross-entropy over logits[B x K] with labels. Returns the
	 * mean loss; dlogits (may be NULL) = (softmax - onehot) / B; *correct
	 * (may be NULL) = number of argmax hits. (A language model calls it
	 * with B T rows, a label each: the mean over every position.) */
	double (*softmax_xent)(backend *, const float *logits,
			       const uint8_t *labels, float *dlogits,
			       int batch, int classes, int *correct);

	/* SGD with momentum and weight decay over n parameters:
	 * g' = g + wd w; m = mu m + g' (if m); w -= lr (m or g'). */
	void (*sgd)(backend *, float *w, const float *g, float *m, size_t n,
		    float lr, float mu, float wd);
	/* Nesterov or Adam over n parameters (s->adam):
	 *   nesterov: g' = g + wd w; m = mu m + g'; w -= lr (g' + mu m)
	 *   adam:     w *= shrink; g' = g + wd w;
	 *             m = b1 m + c1 g'; v = b2 v + c2 g' g';
	 *             w -= step_size m / (sqrt(v) / bc2_sqrt + eps)
	 * (v unused by nesterov). Elementwise, in this order, unfused. */
	void (*opt_step)(backend *, float *w, const float *g, float *m, float *v,
			 size_t n, const opt_step *s);
	/* The sum of x[i]^2 over n floats, accumulated in double in index
	 * order (clipping's global norm). */
	double (*sumsq)(backend *, const float *x, size_t n);
	/* Delay-compensated gradient (DC-ASGD): out = g + lam g*g*(w - bak),
	 * with lam = lambda0 / sqrt(ms + eps) per element when ms is non-NULL,
	 * after ms = m ms + (1 - m) g*g (adaptive variant). */
	void (*dc_grad)(backend *, size_t n, const float *g, const float *w,
			const float *bak, float *ms, float lambda, float m,
			float eps, float *out);
	/* y += a x */
	void (*axpy)(backend *, size_t n, float a, const float *x, float *y);
	/* y = a y */
	void (*scal)(backend *, size_t n, float a, float *y);
	/* 1 when every one of x[0..n) is finite, 0 when one is NaN or
	 * infinite (the divergence check of every step: one pass, no
	 * arithmetic on the values, so it never raises a false alarm). */
	int (*all_finite)(backend *, const float *x, size_t n);

	/* Optional (NULL: none). One line naming what runs the ops: a GPU's
	 * name, its memory in use and in all. */
	void (*describe)(backend *, char *buf, size_t len);
	/* The device's FP32 peak in GFLOP/s, computed from what it reports
	 * (units x lanes x 2 x clock), for the bench's "fraction of peak". */
	double (*peak_gflops)(backend *);
} backend_ops;

struct backend {
	const backend_ops *ops;
	void *ctx; /* the implementation's private state */
};

/* ---- the registry (engine/nn/backend.c) ----------------------------------
 * Every backend is a class: a name (the "device" of a run config), a probe
 * that says whether this binary can open it on this machine, and an open.
 * Code outside engine/nn/backend*.c opens backends only through backend_open
 * and tells them apart only by their ops (name, host_memory). */
typedef struct backend_class {
	const char *name;  /* "cpu", "ref", "cuda" */
	const char *about; /* one line for --help and the docs */
	/* 1 when it can be opened here; else 0 and why (SL_ERR_LEN) says why
	 * not, naming the "device" field */
	int (*probe)(char *why);
	/* open with nthreads (>= 1) compute threads; 0 or -SL_E* */
	int (*open)(int nthreads, backend **out);
	int auto_pick; /* a candidate of "auto" (in table order) */
	int hidden;    /* opened by name but not listed (refdev: for tests) */
} backend_class;

/* Open the backend named by a run's "device": a class name, or "auto" (the
 * first available class marked auto_pick: cuda, else cpu). Returns 0, or
 * -SL_EINVAL for an unknown name, -SL_EUNSUP for one this binary or machine
 * cannot open, -SL_ENOMEM; err names the device field. On success with
 * "auto", err (when not NULL) is "" or the line that says why a class was
 * passed over ("device auto: cuda: no NVIDIA driver (...); using cpu"). */
int backend_open(const char *device, int nthreads, backend **out, char *err);
/* Is device a name backend_open knows ("auto" or a class)? 0, or
 * -SL_EINVAL with a message listing the names. Says nothing of whether the
 * class is available here (config validation, not a probe). */
int backend_check_name(const char *device, char *err);
/* The i-th class of the table (i from 0), NULL past the end. */
const backend_class *backend_class_at(int i);
/* The device name of an opened backend (its class's name). */
const char *backend_name(const backend *be);
/* refdev only, for tests of what a failed device allocation does: the
 * allocation after `after` more that succeed returns NULL (once); after < 0
 * clears the plan. -SL_EINVAL for another backend. */
int backend_refdev_fail_alloc(backend *be, long after);
/* ops->gather where the backend has one, else the same on this thread */
void backend_gather(backend *be, float *dst, const float *x,
		    const uint32_t *idx, int batch, int dim, int inner);
void backend_free(backend *be);

/* The cpu backend directly (bench and tests that measure it): OpenBLAS
 * with a team of nthreads (>= 1) for each op. 0 or a negative SL_E* code. */
int backend_cpu_new(int nthreads, backend **out);

/* Reference figure for benchmarks: OpenBLAS's own sgemm (row-major,
 * C = A[m x k] B[k x n]) with blas_threads threads, GFLOP/s as the median
 * of repeated timings over about `seconds`. */
double backend_cpu_sgemm_gflops(int m, int n, int k, int blas_threads,
				double seconds);

/* The OpenBLAS kernel this process uses ("Haswell", "SkylakeX", ...; chosen
 * by the CPU, or by OPENBLAS_CORETYPE), the build's configuration text, and
 * the instruction-set level of our own kernels' clone ("x86-64-v4", "-v3",
 * "x86-64"). cpu results are bit for bit the same only with the same
 * kernel and level. */
void backend_cpu_blas(const char **kernel, const char **config, const char **isa);

/* Why this process runs that kernel (blas_pick.h): "library", "environment",
 * "picked" or "fallback"; *library: the library's own choice when we picked
 * another ("" when unknown or not picked). */
const char *backend_cpu_blas_why(const char **library);

/* The kernel's sgemm against plain C arithmetic in double precision, on odd
 * shapes, plain and transposed (one thread; a millisecond): 0, or -1 with
 * err saying which case and by how much it is wrong. */
int backend_cpu_blas_check(char *err);

/* Output size of the option-A shortcut along one axis: ceil(in / stride). */
static inline int
shortcut_out_dim(int in, int stride)
{
	return (in + stride - 1) / stride;
}

/* Output size of a convolution/pooling dimension. */
static inline int
conv_out_dim(int in, int k, int stride, int pad)
{
	return (in + 2 * pad - k) / stride + 1;
}

#endif
