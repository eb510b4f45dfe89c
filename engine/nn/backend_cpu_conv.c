/* backend_cpu_conv.c - the CPU backend's convolution and max pooling, on
 * activations stored [C][H][W][B] (the batch innermost). Convolutions are
 * direct: a vector register holds one pixel of consecutive images, so
 * every tap is one broadcast weight times one vector load, with no im2col
 * and no GEMM. A 3x3 kernel at stride 1 with a padding of 1 and 8
 * channels or more runs by Winograd's F(2x2, 3x3) instead (forward and
 * input gradient; the same layout, a tile's images in the vector's lanes).
 * The forward pass and the input gradient share one kernel
 * (the input gradient is the forward over the zero-padded, dilated output
 * gradient with the kernel flipped); the weight gradient has its own. Each
 * is compiled per ISA level with its own register blocking (conv_kern.h)
 * and picked at run time by the CPU and the batch. Every output is
 * computed by one thread in one order, so results do not depend on the
 * thread count. Pooling keeps its argmax for the backward pass. */
#include <stdlib.h>
#include <string.h>

#include "backend_cpu_impl.h"

/* ---- the kernels, once per ISA level ------------------------------------ */

/* Both jobs read x padded already; x is zero outside rows [nz_r0, nz_r1)
 * and columns [nz_c0, nz_c1), and the kernels skip the taps that only
 * meet those zeros. */
typedef struct cjob { /* y = act(x (*) w + bias) */
	const float *x, *w, *bias; /* bias may be NULL */
	float *y;
	int cin, hp, wp, cout, ho, wo, k, kw, s, B, relu; /* k rows x kw columns */
	int unpad; /* 3x3, stride 1, pad 1 read from x unpadded (hp, wp: its size) */
	int nz_r0, nz_r1, nz_c0, nz_c1;
	size_t ys_c, ys_r, ys_p; /* y's strides in floats: channel, row, pixel */
} cjob;

typedef struct wjob { /* dw = dy (*) x */
	const float *x, *dy;
	float *dw;
	int cin, hp, wp, cout, ho, wo, k, s, B;
	int nz_r0, nz_r1, nz_c0, nz_c1;
} wjob;

/* A 3x3 convolution at stride 1 with a padding of 1 by Winograd's
 * F(2x2, 3x3) (conv_kern.h): x read unpadded, [cin][h][w][B]; y the same
 * size, [cout][h][w][B]; u the kernel transformed, [16][cin][cout]. */
typedef struct gjob {
	const float *x, *u, *bias; /* bias may be NULL */
	float *y;
	int cin, cout, h, w, B, relu;
	int tw; /* tiles a row: ceil(w / 2) */
} gjob;

/* floats between two elements' slabs of V: a line more than the slab, so
 * that the 16 stores of a transformed patch do not share a cache set */
#define WINO_SLAB(cin, vs) ((size_t)(cin) * (vs) + 16)

typedef struct conv_kern {
	int vw;  /* floats per vector: batches of at least vw */
	int obf; /* the forward's most output columns a block */
	int cbw, rbw; /* the weight gradient's blocks of channels, tap rows */
	void (*fwd_rows)(const cjob *, int oh0, int oh1);
	void (*dw_items)(const wjob *, long i0, long i1);
	void (*wino_items)(const gjob *, float *scratch, long i0, long i1);
	void (*pool_fwd)(const conv_geom *, const float *x, float *y,
			 int32_t *arg, int B, int c0, int c1);
	void (*pool_bwd_tiled)(const conv_geom *, const float *dy,
			       const int32_t *arg, float *dx, int B, int c0,
			       int c1);
} conv_kern;

/* The window of pooling output (oh, ow), clipped to the image:
 * rows [*r0, *r1), columns [*c0, *c1). */
static inline void
pool_window(const conv_geom *g, int oh, int ow, int *r0, int *r1, int *c0,
	    int *c1)
{
	const int s = g->stride, pad = g->pad, k = g->k;
	*r0 = SL_MAX(oh * s - pad, 0);
	*r1 = SL_MIN(oh * s - pad + k, g->h);
	*c0 = SL_MAX(ow * s - pad, 0);
	*c1 = SL_MIN(ow * s - pad + k, g->w);
}

/* ceil(a / b) for b > 0 and any a */
static inline int
cdiv(int a, int b)
{
	return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

/* blocks of at most max that split n as evenly as possible */
static inline int
even_block(int n, int max)
{
	int nb = (n + max - 1) / max;
	return (n + nb - 1) / nb;
}

#if defined(SL_FORCE_ISA)
#define KERN_V4 (SL_FORCE_ISA == 4)
#define KERN_V3 (SL_FORCE_ISA == 3)
#elif defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
	!defined(__SANITIZE_ADDRESS__)
#define KERN_V4 1
#define KERN_V3 1
#else
#define KERN_V4 0
#define KERN_V3 0
#endif

#define KN(n) n##_s1
#define VW 1
#define KTARGET
#define CBF 2
#define OBF 4
#define CBW 2
#define RBW 1
#define KNW 7
#include "conv_kern.h"

#define KN(n) n##_sse
#define VW 4
#define KTARGET
#define CBF 4
#define OBF 3
#define CBW 2
#define RBW 1
#define KNW 7
#include "conv_kern.h"

#if KERN_V3
#define KN(n) n##_v3
#define VW 8
#define KTARGET __attribute__((target("arch=x86-64-v3")))
#define CBF 4
#define OBF 3
#define CBW 2
#define RBW 2
#define KNW 3
#include "conv_kern.h"
#endif

#if KERN_V4
#define KN(n) n##_v4
#define VW 16
#define KTARGET __attribute__((target("arch=x86-64-v4")))
#define CBF 6
#define OBF 4
#define CBW 3
#define RBW 3
#define KNW 3
#include "conv_kern.h"
#endif

/* The widest kernel the CPU runs whose vector a batch fills. A forced
 * build (SL_FORCE_ISA) takes its level without asking the CPU. */
static const conv_kern *
kern_for(int batch)
{
#if KERN_V4
#if !defined(SL_FORCE_ISA)
	__builtin_cpu_init();
	if (batch >= 16 && __builtin_cpu_supports("x86-64-v4"))
#else
	if (batch >= 16)
#endif
		return &kern_v4;
#endif
#if KERN_V3
#if !defined(SL_FORCE_ISA)
	__builtin_cpu_init();
	if (batch >= 8 && __builtin_cpu_supports("x86-64-v3"))
#else
	if (batch >= 8)
#endif
		return &kern_v3;
#endif
	return batch >= 4 ? &kern_sse : &kern_s1;
}

/* ---- convolution ------------------------------------------------------ */

/* xp[c][r][col][B] = x[c][r - pad][col - pad][B], zero outside, for
 * channels [c0, c1). */
static void
pad_channels(const float *x, float *xp, int h, int w, int pad, int B, int c0,
	     int c1)
{
	const int hp = h + 2 * pad, wp = w + 2 * pad;
	const size_t rowB = (size_t)wp * B;
	for (int c = c0; c < c1; c++) {
		float *d = xp + (size_t)c * hp * rowB;
		const float *sx = x + (size_t)c * h * w * B;
		memset(d, 0, sizeof(float) * pad * rowB);
		for (int r = 0; r < h; r++) {
			float *dr = d + (size_t)(r + pad) * rowB;
			memset(dr, 0, sizeof(float) * pad * B);
			memcpy(dr + (size_t)pad * B, sx + (size_t)r * w * B,
			       sizeof(float) * w * B);
			memset(dr + (size_t)(pad + w) * B, 0, sizeof(float) * pad * B);
		}
		memset(d + (size_t)(pad + h) * rowB, 0, sizeof(float) * pad * rowB);
	}
}

/* the most phases a strided input gradient is split into (stride^2) */
#define POLY_MAX 16

struct conv_args {
	const conv_geom *g;
	const conv_kern *kern;
	const float *x, *w, *y;
	float *xp, *dy, *dyd, *db, *dx; /* dx: the input gradient, or NULL */
	cjob cj;  /* the forward, or the input gradient */
	wjob wj;  /* the weight gradient */
	int batch, relu;
	/* a strided convolution's input gradient, by phases (poly_plan) */
	cjob ph[POLY_MAX];
	int nph, dpad; /* phases; dy's padding in its copy (dyd) */
	/* by Winograd (the forward, or the input gradient): the job, the
	 * kernel it transforms (w, or w flipped: the input gradient's) and
	 * each thread's scratch */
	int wino, wflip;
	gjob gj;
	const float *wsrc;
	float *u, *wscr;
	size_t wscr_n;
};

/* ---- Winograd's F(2x2, 3x3) ------------------------------------------- */

/* Does a convolution run by Winograd (wino_items)? A 3x3 kernel at stride
 * 1 with a padding of 1 and 8 channels or more on each side: with fewer,
 * the transforms cost more than the multiplies they save. Its input
 * gradient is the same shape of convolution over dy, so the answer holds
 * for both. */
static int
winograd(const conv_geom *g)
{
	return g->k == 3 && g->stride == 1 && g->pad == 1 && g->cin >= 8 &&
	       g->cout >= 8;
}

/* u[e][ci][co] = (G g G^T)[e] for ci in [c0, c1): g = w[co][ci] of w
 * [cout][cin][3][3], or (flip) the input gradient's kernel, w[ci][co]
 * turned by 180 degrees, of w [cin][cout][3][3]. The output channels are
 * the inner loop, so each of the 16 slabs is written in order. */
static void
wino_weights(const float *w, int cout, int cin, int flip, float *u, int c0,
	     int c1)
{
	const size_t es = (size_t)cin * cout;
	for (int ci = c0; ci < c1; ci++)
		for (int co = 0; co < cout; co++) {
			float g[9], t[4][3];
			const float *src = w + ((flip ? (size_t)ci * cout + co
						      : (size_t)co * cin + ci) * 9);
			for (int i = 0; i < 9; i++)
				g[i] = src[flip ? 8 - i : i];
			for (int c = 0; c < 3; c++) { /* G g */
				t[0][c] = g[c];
				t[1][c] = 0.5f * (g[c] + g[3 + c] + g[6 + c]);
				t[2][c] = 0.5f * (g[c] - g[3 + c] + g[6 + c]);
				t[3][c] = g[6 + c];
			}
			for (int r = 0; r < 4; r++) { /* (G g) G^T */
				float *ur = u + (size_t)(r * 4) * es + (size_t)ci * cout + co;
				ur[0] = t[r][0];
				ur[es] = 0.5f * (t[r][0] + t[r][1] + t[r][2]);
				ur[2 * es] = 0.5f * (t[r][0] - t[r][1] + t[r][2]);
				ur[3 * es] = t[r][2];
			}
		}
}

/* a job's items: tiles times groups of batch vectors */
static long
wino_count(const gjob *j, const conv_kern *kn)
{
	const int nv = (j->B + kn->vw - 1) / kn->vw, chs = even_block(nv, kn->obf);
	return (long)((j->h + 1) / 2) * j->tw * ((nv + chs - 1) / chs);
}

/* Set up a's Winograd job y = act(x (*) w + bias) of cout x cin kernels
 * on h x w maps: the transformed kernel's buffer and the scratch, sized
 * for the team (wino_w_part, wino_part fill and use them). */
static void
wino_plan(backend *be, struct conv_args *a, const float *w, int flip, int cout,
	  int cin, const float *x, const float *bias, float *y, int h, int wd,
	  int relu)
{
	cpu_ctx *c = CTX(be);
	const conv_kern *kn = a->kern;
	const int nv = (a->batch + kn->vw - 1) / kn->vw, chs = even_block(nv, kn->obf);
	a->wino = 1;
	a->wflip = flip;
	a->wsrc = w;
	a->gj = (gjob){.x = x, .bias = bias, .y = y, .cin = cin, .cout = cout,
		       .h = h, .w = wd, .B = a->batch, .relu = relu,
		       .tw = (wd + 1) / 2};
	a->u = grow(&c->buf[3], &c->buf_cap[3], (size_t)16 * cin * cout);
	a->gj.u = a->u;
	/* 16 slabs, each thread's share starting on a line */
	a->wscr_n = (16 * WINO_SLAB(cin, (size_t)chs * kn->vw) + 15) & ~(size_t)15;
	a->wscr = grow(&c->buf[4], &c->buf_cap[4], a->wscr_n * c->nt);
}

static void
wino_w_part(void *p, int tid, int nt)
{
	struct conv_args *a = p;
	long c0, c1;
	team_split(a->gj.cin, tid, nt, &c0, &c1);
	wino_weights(a->wsrc, a->gj.cout, a->gj.cin, a->wflip, a->u, (int)c0, (int)c1);
}

static void
wino_part(void *p, int tid, int nt)
{
	struct conv_args *a = p;
	long i0, i1;
	team_split(wino_count(&a->gj, a->kern), tid, nt, &i0, &i1);
	if (i1 > i0)
		a->kern->wino_items(&a->gj, a->wscr + (size_t)tid * a->wscr_n, i0, i1);
}

static void
pad_part(void *p, int tid, int nt)
{
	struct conv_args *a = p;
	const conv_geom *g = a->g;
	long c0, c1;
	team_split(g->cin, tid, nt, &c0, &c1);
	pad_channels(a->x, a->xp, g->h, g->w, g->pad, a->batch, (int)c0, (int)c1);
}

static void
fwd_part(void *p, int tid, int nt)
{
	struct conv_args *a = p;
	long r0, r1;
	team_split(a->cj.ho, tid, nt, &r0, &r1);
	if (r1 > r0)
		a->kern->fwd_rows(&a->cj, (int)r0, (int)r1);
}

/* the padded input (x itself without padding) */
static const float *
padded_input(backend *be, struct conv_args *a)
{
	const conv_geom *g = a->g;
	if (!g->pad)
		return a->x;
	cpu_ctx *c = CTX(be);
	size_t n = (size_t)g->cin * (g->h + 2 * g->pad) * (g->w + 2 * g->pad) * a->batch;
	a->xp = grow(&c->buf[0], &c->buf_cap[0], n);
	team_run(c->team, pad_part, a);
	return a->xp;
}

/* Does a convolution of n x m outputs read its input unpadded
 * (fwd_rows_u)? A 3x3 kernel at stride 1 with a padding of 1, whose
 * columns make two blocks or more. Its input gradient is the same shape
 * of convolution over dy, so the answer holds for both. */
static int
unpadded(const conv_geom *g, const conv_kern *kn)
{
	return g->k == 3 && g->stride == 1 && g->pad == 1 &&
	       even_block(g->wo, kn->obf) < g->wo;
}

void
cpu_conv_fwd(backend *be, const conv_geom *g, const float *x, const float *w,
	     const float *b, float *y, int batch, int relu)
{
	struct conv_args a = {.g = g, .kern = kern_for(batch), .x = x,
			      .batch = batch};
	if (winograd(g)) {
		wino_plan(be, &a, w, 0, g->cout, g->cin, x, b, y, g->h, g->w, relu);
		team_run(CTX(be)->team, wino_w_part, &a);
		team_run(CTX(be)->team, wino_part, &a);
		return;
	}
	if (unpadded(g, a.kern)) {
		a.cj = (cjob){.x = x, .w = w, .bias = b, .y = y, .cin = g->cin,
			      .hp = g->h, .wp = g->w, .cout = g->cout, .ho = g->ho,
			      .wo = g->wo, .k = 3, .kw = 3, .s = 1, .B = batch,
			      .relu = relu, .unpad = 1,
			      .ys_c = (size_t)g->ho * g->wo * batch,
			      .ys_r = (size_t)g->wo * batch, .ys_p = (size_t)batch};
		team_run(CTX(be)->team, fwd_part, &a);
		return;
	}
	a.cj = (cjob){.x = padded_input(be, &a), .w = w, .bias = b, .y = y,
		      .cin = g->cin, .hp = g->h + 2 * g->pad,
		      .wp = g->w + 2 * g->pad, .cout = g->cout, .ho = g->ho,
		      .wo = g->wo, .k = g->k, .kw = g->k, .s = g->stride, .B = batch,
		      .relu = relu, .nz_r0 = g->pad, .nz_r1 = g->pad + g->h,
		      .nz_c0 = g->pad, .nz_c1 = g->pad + g->w,
		      .ys_c = (size_t)g->ho * g->wo * batch,
		      .ys_r = (size_t)g->wo * batch, .ys_p = (size_t)batch};
	team_run(CTX(be)->team, fwd_part, &a);
}

/* dy masked by relu'(y) (when relu) and summed into db, in one pass */
SIMD_CLONES static float
mask_and_sum(float *d, const float *y, size_t n)
{
	float part[16] = {0}, sum = 0.0f;
	size_t i = 0;
	if (y) {
		for (; i + 16 <= n; i += 16)
			for (int l = 0; l < 16; l++) {
				float v = y[i + l] > 0.0f ? d[i + l] : 0.0f;
				d[i + l] = v;
				part[l] += v;
			}
		for (; i < n; i++) {
			d[i] = y[i] > 0.0f ? d[i] : 0.0f;
			sum += d[i];
		}
	} else {
		for (; i + 16 <= n; i += 16)
			for (int l = 0; l < 16; l++)
				part[l] += d[i + l];
		for (; i < n; i++)
			sum += d[i];
	}
	for (int l = 0; l < 16; l++)
		sum += part[l];
	return sum;
}

/* dyd[r][c] = dy[(r - q) / s][(c - q) / s] where that is a whole output
 * pixel, zero elsewhere: one channel of an hd x wd plane */
static void
dilate_channel(const conv_geom *g, const float *d, float *dd, int q, int B)
{
	const int k = g->k, s = g->stride, hd = g->h + k - 1, wd = g->w + k - 1;
	const size_t pix = sizeof(float) * B;
	if (s == 1 && q >= 0 && q + g->wo <= wd && q + g->ho <= hd) {
		/* the common case: a border of zeros around dy's rows */
		memset(dd, 0, pix * (size_t)q * wd);
		for (int oh = 0; oh < g->ho; oh++) {
			float *row = dd + (size_t)(oh + q) * wd * B;
			memset(row, 0, pix * q);
			memcpy(row + (size_t)q * B, d + (size_t)oh * g->wo * B, pix * g->wo);
			memset(row + (size_t)(q + g->wo) * B, 0, pix * (wd - q - g->wo));
		}
		memset(dd + (size_t)(q + g->ho) * wd * B, 0,
		       pix * (size_t)(hd - q - g->ho) * wd);
		return;
	}
	memset(dd, 0, pix * (size_t)hd * wd);
	for (int oh = 0; oh < g->ho; oh++) {
		int r = oh * s + q;
		if (r < 0 || r >= hd)
			continue;
		for (int ow = 0; ow < g->wo; ow++) {
			int col = ow * s + q;
			if (col >= 0 && col < wd)
				memcpy(dd + ((size_t)r * wd + col) * B,
				       d + ((size_t)oh * g->wo + ow) * B, pix);
		}
	}
}

/* The backward's first pass, per output channel: dy masked by relu'(y),
 * db, and the dilated, zero-padded copy of dy the input gradient reads
 * (q = k - 1 - pad; the input gradient is the forward over it); per input
 * channel, the padded input the weight gradient reads. */
static void
bwd_prep_part(void *p, int tid, int nt)
{
	struct conv_args *a = p;
	const conv_geom *g = a->g;
	const int B = a->batch;
	const size_t n = (size_t)g->ho * g->wo * B;
	const size_t nd = (size_t)(g->h + g->k - 1) * (g->w + g->k - 1) * B;
	long c0, c1;
	team_split(g->cout, tid, nt, &c0, &c1);
	for (long co = c0; co < c1; co++) {
		float *d = a->dy + co * n;
		a->db[co] = mask_and_sum(d, a->relu ? a->y + co * n : NULL, n);
		if (a->dyd && a->nph)
			pad_channels(a->dy, a->dyd, g->ho, g->wo, a->dpad, B, (int)co,
				     (int)co + 1);
		else if (a->dyd)
			dilate_channel(g, d, a->dyd + co * nd, g->k - 1 - g->pad, B);
	}
	if (g->pad) {
		team_split(g->cin, tid, nt, &c0, &c1);
		pad_channels(a->x, a->xp, g->h, g->w, g->pad, B, (int)c0, (int)c1);
	}
	if (a->wino) /* the input gradient's kernel, transformed */
		wino_w_part(p, tid, nt);
}

static void
dw_part(void *p, int tid, int nt)
{
	struct conv_args *a = p;
	const wjob *j = &a->wj;
	const int cbs = even_block(j->cout, a->kern->cbw);
	const int rbs = even_block(j->k, a->kern->rbw);
	long n = (long)((j->cout + cbs - 1) / cbs) * j->cin * ((j->k + rbs - 1) / rbs);
	long i0, i1;
	team_split(n, tid, nt, &i0, &i1);
	if (i1 > i0)
		a->kern->dw_items(j, i0, i1);
	if (a->dx && a->wino) /* and a share of the input gradient's tiles */
		wino_part(p, tid, nt);
	else if (a->dx && !a->nph) /* ... or rows */
		fwd_part(p, tid, nt);
	for (int q = 0; q < a->nph; q++) { /* ... of each phase's rows */
		long r0, r1;
		team_split(a->ph[q].ho, tid, nt, &r0, &r1);
		if (r1 > r0)
			a->kern->fwd_rows(&a->ph[q], (int)r0, (int)r1);
	}
}

/* A strided convolution's input gradient by phases: the pixels of dx
 * whose row is pr and column pc modulo the stride s take only the taps
 * kh = pr + pad (mod s), kw = pc + pad (mod s), each from one output
 * pixel, so each phase is a stride-1 convolution of dy (padded by dpad)
 * with its own ceil-sized slice of the flipped kernel, written into dx
 * at stride s. Against the forward over a dilated dy, no tap meets a
 * dilation's zero: s^2 times fewer multiplies. wt gets the phases'
 * kernels, [ci][co][a][b] each, one after another. Returns the phases
 * (0: do it the dilated way: a stride above k leaves pixels no tap
 * reaches). */
static int
poly_plan(struct conv_args *a, const conv_geom *g, const float *w, float *wt,
	  float *dx)
{
	const int s = g->stride, k = g->k, p = g->pad, B = a->batch;
	if (s < 2 || s > k || s * s > POLY_MAX)
		return 0;
	int n = 0, dpad = 0;
	size_t woff = 0;
	for (int pr = 0; pr < s && pr < g->h; pr++)
		for (int pc = 0; pc < s && pc < g->w; pc++) {
			const int mr = (pr + p) % s, mc = (pc + p) % s;
			const int ntr = (k - mr + s - 1) / s, ntc = (k - mc + s - 1) / s;
			const int offr = (pr + p) / s - (ntr - 1), offc = (pc + p) / s - (ntc - 1);
			const int nh = (g->h - pr + s - 1) / s, nw = (g->w - pc + s - 1) / s;
			dpad = SL_MAX(dpad, SL_MAX(-offr, -offc));
			dpad = SL_MAX(dpad, nh - 1 + offr + ntr - 1 - (g->ho - 1));
			dpad = SL_MAX(dpad, nw - 1 + offc + ntc - 1 - (g->wo - 1));
			float *ws = wt + woff;
			for (int ci = 0; ci < g->cin; ci++)
				for (int co = 0; co < g->cout; co++)
					for (int ta = 0; ta < ntr; ta++)
						for (int tb = 0; tb < ntc; tb++)
							*ws++ = w[(((size_t)co * g->cin + ci) * k +
								   mr + s * (ntr - 1 - ta)) * k +
								  mc + s * (ntc - 1 - tb)];
			a->ph[n++] = (cjob){.w = wt + woff, .y = dx + ((size_t)pr * g->w + pc) * B,
					    .cin = g->cout, .cout = g->cin, .ho = nh, .wo = nw,
					    .k = ntr, .kw = ntc, .s = 1, .B = B,
					    .nz_r0 = 0, .nz_r1 = 1 << 28, .nz_c0 = 0, .nz_c1 = 1 << 28,
					    .ys_c = (size_t)g->h * g->w * B,
					    .ys_r = (size_t)s * g->w * B, .ys_p = (size_t)s * B,
					    /* x: offsets into dyd, made pointers below */
					    .hp = offr, .wp = offc};
			woff += (size_t)g->cin * g->cout * ntr * ntc;
		}
	a->dpad = dpad;
	return n;
}

/* wt[ci][co][r][s] = w[co][ci][k-1-r][k-1-s]: the input gradient's kernel */
static void
flip_kernel(const conv_geom *g, const float *w, float *wt)
{
	const size_t kk = (size_t)g->k * g->k;
	for (int co = 0; co < g->cout; co++)
		for (int ci = 0; ci < g->cin; ci++)
			for (size_t t = 0; t < kk; t++)
				wt[((size_t)ci * g->cout + co) * kk + t] =
					w[((size_t)co * g->cin + ci) * kk + kk - 1 - t];
}

void
cpu_conv_bwd(backend *be, const conv_geom *g, const float *x, const float *w,
	     const float *y, float *dy, float *dx, float *dw, float *db,
	     int batch, int relu)
{
	cpu_ctx *c = CTX(be);
	const int k = g->k, pad = g->pad, B = batch;
	const int hp = g->h + 2 * pad, wp = g->w + 2 * pad;
	struct conv_args a = {.g = g, .kern = kern_for(batch), .x = x, .w = w,
			      .y = y, .dy = dy, .db = db, .batch = batch,
			      .relu = relu};
	if (pad)
		a.xp = grow(&c->buf[0], &c->buf_cap[0], (size_t)g->cin * hp * wp * B);
	const int hd = g->h + k - 1, wd = g->w + k - 1, q = k - 1 - pad;
	float *wt = NULL;
	const size_t kk = (size_t)k * k;
	if (dx)
		wt = grow(&c->buf[2], &c->buf_cap[2], kk * g->cin * g->cout);
	if (dx && (a.nph = poly_plan(&a, g, w, wt, dx))) {
		const int dh = g->ho + 2 * a.dpad, dw_ = g->wo + 2 * a.dpad;
		a.dyd = grow(&c->buf[1], &c->buf_cap[1], (size_t)g->cout * dh * dw_ * B);
		for (int i = 0; i < a.nph; i++) {
			cjob *j = &a.ph[i];
			j->x = a.dyd + ((size_t)(j->hp + a.dpad) * dw_ + j->wp + a.dpad) * B;
			j->hp = dh;
			j->wp = dw_;
		}
	} else if (dx && winograd(g)) {
		/* the input gradient by Winograd over dy (masked in place) */
		wino_plan(be, &a, w, 1, g->cin, g->cout, dy, NULL, dx, g->h, g->w, 0);
	} else if (dx && unpadded(g, a.kern)) {
		/* the input gradient reads dy (masked in place) unpadded */
		flip_kernel(g, w, wt);
		a.cj = (cjob){.x = dy, .w = wt, .y = dx, .cin = g->cout,
			      .hp = g->ho, .wp = g->wo, .cout = g->cin, .ho = g->h,
			      .wo = g->w, .k = 3, .kw = 3, .s = 1, .B = B, .unpad = 1,
			      .ys_c = (size_t)g->h * g->w * B, .ys_r = (size_t)g->w * B,
			      .ys_p = (size_t)B};
	} else if (dx) {
		a.dyd = grow(&c->buf[1], &c->buf_cap[1], (size_t)g->cout * hd * wd * B);
		flip_kernel(g, w, wt);
	}
	team_run(c->team, bwd_prep_part, &a);
	a.wj = (wjob){.x = pad ? a.xp : x, .dy = dy, .dw = dw, .cin = g->cin,
		      .hp = hp, .wp = wp, .cout = g->cout, .ho = g->ho,
		      .wo = g->wo, .k = k, .s = g->stride, .B = B,
		      .nz_r0 = pad, .nz_r1 = pad + g->h, .nz_c0 = pad,
		      .nz_c1 = pad + g->w};
	if (dx && a.dyd && !a.nph)
		a.cj = (cjob){.x = a.dyd, .w = wt, .bias = NULL, .y = dx,
			      .cin = g->cout, .hp = hd, .wp = wd, .cout = g->cin,
			      .ho = g->h, .wo = g->w, .k = k, .kw = k, .s = 1, .B = B,
			      .relu = 0, .nz_r0 = q,
			      .nz_r1 = q + (g->ho - 1) * g->stride + 1, .nz_c0 = q,
			      .nz_c1 = q + (g->wo - 1) * g->stride + 1,
			      .ys_c = (size_t)g->h * g->w * B, .ys_r = (size_t)g->w * B,
			      .ys_p = (size_t)B};
	a.dx = dx;
	team_run(c->team, dw_part, &a);
}

/* ---- pooling --------------------------------------------------------- */

struct pool_args {
	const conv_geom *g;
	const float *x, *dy;
	float *y, *dx;
	const int32_t *carg;
	int32_t *arg;
	const conv_kern *kern;
	int batch;
};

static void
maxpool_fwd_part(void *p, int tid, int nt)
{
	struct pool_args *a = p;
	long c0, c1;
	team_split(a->g->cin, tid, nt, &c0, &c1);
	a->kern->pool_fwd(a->g, a->x, a->y, a->arg, a->batch, (int)c0, (int)c1);
}

void
cpu_maxpool_fwd(backend *be, const conv_geom *g, const float *x, float *y,
		int32_t *arg, int batch)
{
	struct pool_args a = {.g = g, .x = x, .y = y, .arg = arg,
			      .kern = kern_for(batch), .batch = batch};
	team_run(CTX(be)->team, maxpool_fwd_part, &a);
}

static void
maxpool_bwd_part(void *p, int tid, int nt)
{
	struct pool_args *a = p;
	const conv_geom *g = a->g;
	long c0, c1;
	team_split(g->cin, tid, nt, &c0, &c1);
	if (g->k <= g->stride) /* windows that do not overlap */
		a->kern->pool_bwd_tiled(g, a->dy, a->carg, a->dx, a->batch,
					(int)c0, (int)c1);
	else
		host_maxpool_bwd(g, a->dy, a->carg, a->dx, a->batch, (int)c0,
				 (int)c1);
}

void
cpu_maxpool_bwd(backend *be, const conv_geom *g, const float *dy,
		const int32_t *arg, float *dx, int batch)
{
	struct pool_args a = {.g = g, .dy = dy, .carg = arg, .dx = dx,
			      .kern = kern_for(batch), .batch = batch};
	team_run(CTX(be)->team, maxpool_bwd_part, &a);
}

/* ---- the flatten transposes, split by 16-row tiles --------------------- */

struct tr_args {
	const float *x;
	float *y;
	size_t rows, cols;
};

static void
transpose_part(void *p, int tid, int nt)
{
	struct tr_args *a = p;
	long t0, t1;
	team_split((long)((a->rows + 15) / 16), tid, nt, &t0, &t1);
	size_t hi = SL_MIN((size_t)t1 * 16, a->rows);
	if ((size_t)t0 * 16 < hi)
		host_transpose(a->x, a->y, a->rows, a->cols, (size_t)t0 * 16, hi);
}

void
cpu_cpb_to_bcp(backend *be, const float *x, float *y, int c, int b, int p)
{
	struct tr_args a = {x, y, (size_t)c * p, (size_t)b};
	team_run(CTX(be)->team, transpose_part, &a);
}

void
cpu_bcp_to_cpb(backend *be, const float *x, float *y, int c, int b, int p)
{
	struct tr_args a = {x, y, (size_t)b, (size_t)c * p};
	team_run(CTX(be)->team, transpose_part, &a);
}

/* ---- the batch's input, split by images or by 16 input values -------- */

struct gather_args {
	float *dst;
	const float *x;
	const uint32_t *idx;
	int batch, dim, inner;
};

static void
gather_part(void *p, int tid, int nt)
{
	struct gather_args *a = p;
	int n = a->inner ? a->dim : a->batch, unit = a->inner ? 16 : 1;
	long u0, u1;
	team_split((long)((n + unit - 1) / unit), tid, nt, &u0, &u1);
	int lo = (int)SL_MIN(u0 * unit, (long)n), hi = (int)SL_MIN(u1 * unit, (long)n);
	if (lo < hi)
		host_gather(a->dst, a->x, a->idx, a->batch, a->dim, a->inner, lo, hi);
}

void
cpu_gather(backend *be, float *dst, const float *x, const uint32_t *idx,
	   int batch, int dim, int inner)
{
	struct gather_args a = {dst, x, idx, batch, dim, inner};
	team_run(CTX(be)->team, gather_part, &a);
}
