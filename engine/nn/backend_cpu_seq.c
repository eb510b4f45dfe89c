/* backend_cpu_seq.c - the cpu backend's sequence ops (backend.h: the
 * transformer's embedding, layer norm, GELU and causal attention), on the
 * thread team. Work is split so that no two threads write the same float
 * and every sum runs in one thread in a fixed order: rows (positions) for
 * the forward ops and layer norm's dx, columns for the sums over rows
 * (layer norm's dg and db, the embedding's tables), (sample, head) pairs
 * for attention. Attention's products (Q K^T, att V and the four of the
 * backward) are sgemm calls on one pair's T x D panels, strided in the
 * fused qkv rows; the mask and softmax are loops over each row's j <= t. */
#include <math.h>
#include <string.h>

#include "backend_cpu_impl.h"

/* Below this many floats touched an op runs on the calling thread. */
#define SEQ_PAR_MIN 16384L

static void
run(backend *be, team_fn fn, void *arg, long work)
{
	if (work < SEQ_PAR_MIN)
		fn(arg, 0, 1);
	else
		team_run(CTX(be)->team, fn, arg);
}

/* ---- embedding -------------------------------------------------------- */

struct emb_args {
	const float *ids, *wte, *wpe, *dy;
	float *y, *dwte, *dwpe;
	int batch, t, e, vocab, acc;
};

SIMD_CLONES static void
embed_fwd_part(void *p, int tid, int nt)
{
	struct emb_args *a = p;
	long lo, hi;
	team_split((long)a->batch * a->t, tid, nt, &lo, &hi);
	for (long r = lo; r < hi; r++) {
		const int id = (int)a->ids[r], pos = (int)(r % a->t);
		SL_ASSERT(id >= 0 && id < a->vocab); /* model_check_data */
		const float *we = a->wte + (size_t)id * a->e, *pe = a->wpe + (size_t)pos * a->e;
		float *y = a->y + (size_t)r * a->e;
		for (int j = 0; j < a->e; j++)
			y[j] = we[j] + pe[j];
	}
}

void
cpu_embed_fwd(backend *be, const float *ids, const float *wte, const float *wpe,
	      float *y, int batch, int t, int e, int vocab)
{
	struct emb_args a = {.ids = ids, .wte = wte, .wpe = wpe, .y = y, .batch = batch,
			     .t = t, .e = e, .vocab = vocab};
	run(be, embed_fwd_part, &a, (long)batch * t * e);
}

/* columns [lo, hi) of both tables: each thread adds its own columns */
SIMD_CLONES static void
embed_bwd_part(void *p, int tid, int nt)
{
	struct emb_args *a = p;
	long l, h;
	team_split(a->e, tid, nt, &l, &h);
	const int lo = (int)l, hi = (int)h, e = a->e;
	if (hi <= lo)
		return;
	for (int pos = 0; pos < a->t; pos++)
		memset(a->dwpe + (size_t)pos * e + lo, 0, sizeof(float) * (size_t)(hi - lo));
	if (!a->acc)
		for (int v = 0; v < a->vocab; v++)
			memset(a->dwte + (size_t)v * e + lo, 0, sizeof(float) * (size_t)(hi - lo));
	const size_t rows = (size_t)a->batch * a->t;
	for (size_t r = 0; r < rows; r++) {
		const float *dy = a->dy + r * e;
		float *dp = a->dwpe + (r % (size_t)a->t) * e;
		float *dw = a->dwte + (size_t)(int)a->ids[r] * e;
		for (int j = lo; j < hi; j++) {
			dp[j] += dy[j];
			dw[j] += dy[j];
		}
	}
}

void
cpu_embed_bwd(backend *be, const float *ids, const float *dy, float *dwte, float *dwpe,
	      int batch, int t, int e, int vocab, int acc)
{
	struct emb_args a = {.ids = ids, .dy = dy, .dwte = dwte, .dwpe = dwpe,
			     .batch = batch, .t = t, .e = e, .vocab = vocab, .acc = acc};
	run(be, embed_bwd_part, &a, (long)batch * t * e);
}

/* ---- layer norm ------------------------------------------------------- */

struct ln_args {
	const float *x, *g, *b, *dy, *mean, *rstd;
	float *y, *dx, *dg, *db, *mean_out, *rstd_out;
	int rows, n;
	float eps;
};

SIMD_CLONES static void
ln_fwd_part(void *p, int tid, int nt)
{
	struct ln_args *a = p;
	long lo, hi;
	const int n = a->n;
	team_split(a->rows, tid, nt, &lo, &hi);
	for (long r = lo; r < hi; r++) {
		const float *x = a->x + (size_t)r * n;
		float *y = a->y + (size_t)r * n;
		double s = 0.0, v = 0.0;
		for (int j = 0; j < n; j++)
			s += (double)x[j];
		const double md = s / n;
		for (int j = 0; j < n; j++) {
			const double d = (double)x[j] - md;
			v += d * d;
		}
		const float m = (float)md, rs = (float)(1.0 / sqrt(v / n + (double)a->eps));
		a->mean_out[r] = m;
		a->rstd_out[r] = rs;
		for (int j = 0; j < n; j++)
			y[j] = (x[j] - m) * rs * a->g[j] + a->b[j];
	}
}

void
cpu_layernorm_fwd(backend *be, const float *x, const float *g, const float *b, float *y,
		  float *mean, float *rstd, int rows, int n, float eps)
{
	struct ln_args a = {.x = x, .g = g, .b = b, .y = y, .mean_out = mean,
			    .rstd_out = rstd, .rows = rows, .n = n, .eps = eps};
	run(be, ln_fwd_part, &a, (long)rows * n);
}

/* dx, rows split */
SIMD_CLONES static void
ln_bwd_x_part(void *p, int tid, int nt)
{
	struct ln_args *a = p;
	long lo, hi;
	const int n = a->n;
	team_split(a->rows, tid, nt, &lo, &hi);
	for (long r = lo; r < hi; r++) {
		const float *x = a->x + (size_t)r * n, *dy = a->dy + (size_t)r * n;
		const float m = a->mean[r], rs = a->rstd[r];
		float s1 = 0.0f, s2 = 0.0f; /* sums of dy g and dy g xh */
		for (int j = 0; j < n; j++) {
			const float d = dy[j] * a->g[j];
			s1 += d;
			s2 += d * ((x[j] - m) * rs);
		}
		s1 /= (float)n;
		s2 /= (float)n;
		float *dx = a->dx + (size_t)r * n;
		for (int j = 0; j < n; j++)
			dx[j] = rs * (dy[j] * a->g[j] - s1 - (x[j] - m) * rs * s2);
	}
}

/* dg and db, columns split, the rows in order */
SIMD_CLONES static void
ln_bwd_w_part(void *p, int tid, int nt)
{
	struct ln_args *a = p;
	long l, h;
	team_split(a->n, tid, nt, &l, &h);
	const int lo = (int)l, hi = (int)h, n = a->n;
	for (int j = lo; j < hi; j++)
		a->dg[j] = a->db[j] = 0.0f;
	for (int r = 0; r < a->rows; r++) {
		const float *x = a->x + (size_t)r * n, *dy = a->dy + (size_t)r * n;
		const float m = a->mean[r], rs = a->rstd[r];
		for (int j = lo; j < hi; j++) {
			a->dg[j] += dy[j] * ((x[j] - m) * rs);
			a->db[j] += dy[j];
		}
	}
}

void
cpu_layernorm_bwd(backend *be, const float *x, const float *g, const float *mean,
		  const float *rstd, const float *dy, float *dx, float *dg, float *db,
		  int rows, int n)
{
	struct ln_args a = {.x = x, .g = g, .mean = mean, .rstd = rstd, .dy = dy,
			    .dx = dx, .dg = dg, .db = db, .rows = rows, .n = n};
	run(be, ln_bwd_w_part, &a, (long)rows * n);
	if (dx)
		run(be, ln_bwd_x_part, &a, (long)rows * n);
}

/* ---- GELU (tanh form) ------------------------------------------------- */

#define GELU_K 0.79788456080286535588f /* sqrt(2 / pi) */
#define GELU_C 0.044715f

/* e^x in float for the GELU: x = k ln2 + r (k rounded by the 1.5 2^23
 * trick, |r| <= ln2 / 2), e^r by its Taylor series to r^7/7! (relative
 * error < 2e-7), 2^k built in the exponent bits; x clamped to [-87, 88],
 * so no infinity or denormal scale. Plain arithmetic, so the loop around
 * it vectorizes (libm's tanhf and expf did not: the GELU took 41% of a
 * gpt:L4-H4-E128-T64 step). */
static inline float
gelu_exp(float x)
{
	x = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
	const float kf = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
	const float r = (x - kf * 0.693359375f) + kf * 2.12194440e-4f;
	float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 +
		  r * (1.0f / 120 + r * (1.0f / 720 + r * (1.0f / 5040)))))));
	union {
		int32_t i;
		float f;
	} sc = {.i = ((int32_t)kf + 127) << 23};
	return p * sc.f;
}

/* (1 + tanh(u)) / 2 = 1 / (1 + e^{-2u}): no cancellation near u = 0.
 * This is that denominator, 1 + e^{-2u} with u = k (v + c v^3), for
 * input v: the forward divides v by it, the backward takes its inverse. */
static inline float
gelu_den(float v)
{
	const float u = GELU_K * (v + GELU_C * v * v * v);
	return 1.0f + gelu_exp(-2.0f * u);
}

struct gelu_args {
	const float *x, *dy;
	float *y, *dx;
	size_t n;
};

SIMD_CLONES static void
gelu_fwd_part(void *p, int tid, int nt)
{
	struct gelu_args *a = p;
	long lo, hi;
	team_split((long)a->n, tid, nt, &lo, &hi);
	for (long i = lo; i < hi; i++)
		a->y[i] = a->x[i] / gelu_den(a->x[i]);
}

/* with s = 1 / (1 + e^{-2u}): 1 + tanh = 2 s, 1 - tanh^2 = 4 s (1 - s) */
SIMD_CLONES static void
gelu_bwd_part(void *p, int tid, int nt)
{
	struct gelu_args *a = p;
	long lo, hi;
	team_split((long)a->n, tid, nt, &lo, &hi);
	for (long i = lo; i < hi; i++) {
		const float v = a->x[i];
		const float sg = 1.0f / gelu_den(v);
		const float d = sg + 2.0f * v * sg * (1.0f - sg) * GELU_K *
					     (1.0f + 3.0f * GELU_C * v * v);
		a->dx[i] = a->dy[i] * d;
	}
}

void
cpu_gelu_fwd(backend *be, const float *x, float *y, size_t n)
{
	struct gelu_args a = {.x = x, .y = y, .n = n};
	run(be, gelu_fwd_part, &a, (long)n * 8);
}

void
cpu_gelu_bwd(backend *be, const float *x, const float *dy, float *dx, size_t n)
{
	struct gelu_args a = {.x = x, .dy = dy, .dx = dx, .n = n};
	run(be, gelu_bwd_part, &a, (long)n * 8);
}

/* ---- causal attention ------------------------------------------------- */

struct attn_args {
	const float *qkv, *att_in, *dy;
	float *y, *att, *dqkv, *scratch;
	int batch, t, heads, hd;
};

/* Row i of a pair's scores (scaled) in place: the softmax over j <= i,
 * zeros after. */
static void
softmax_causal_row(float *s, int i, int t)
{
	float mx = s[0];
	for (int j = 1; j <= i; j++)
		mx = s[j] > mx ? s[j] : mx;
	float z = 0.0f;
	for (int j = 0; j <= i; j++) {
		s[j] = expf(s[j] - mx);
		z += s[j];
	}
	const float inv = 1.0f / z;
	for (int j = 0; j <= i; j++)
		s[j] *= inv;
	for (int j = i + 1; j < t; j++)
		s[j] = 0.0f;
}

static void
attn_fwd_part(void *p, int tid, int nt)
{
	struct attn_args *a = p;
	const int t = a->t, hd = a->hd, e = a->heads * hd, e3 = 3 * e;
	const float scale = (float)(1.0 / sqrt((double)hd));
	long lo, hi;
	team_split((long)a->batch * a->heads, tid, nt, &lo, &hi);
	for (long ph = lo; ph < hi; ph++) {
		const int b = (int)(ph / a->heads), h = (int)(ph % a->heads);
		const float *q = a->qkv + (size_t)b * t * e3 + (size_t)h * hd;
		float *att = a->att + (size_t)ph * t * t;
		/* S = scale Q K^T, then each row's masked softmax */
		cpu_sgemm(0, 1, t, t, hd, scale, q, e3, q + e, e3, 0.0f, att, t);
		for (int i = 0; i < t; i++)
			softmax_causal_row(att + (size_t)i * t, i, t);
		/* Y = att V, into the head's columns */
		cpu_sgemm(0, 0, t, hd, t, 1.0f, att, t, q + 2 * e, e3, 0.0f,
			  a->y + (size_t)b * t * e + (size_t)h * hd, e);
	}
}

void
cpu_attn_fwd(backend *be, const float *qkv, float *y, float *att, int batch, int t,
	     int heads, int hd)
{
	struct attn_args a = {.qkv = qkv, .y = y, .att = att, .batch = batch, .t = t,
			      .heads = heads, .hd = hd};
	run(be, attn_fwd_part, &a, (long)batch * heads * t * t * (hd + 1));
}

static void
attn_bwd_part(void *p, int tid, int nt)
{
	struct attn_args *a = p;
	const int t = a->t, hd = a->hd, e = a->heads * hd, e3 = 3 * e;
	const float scale = (float)(1.0 / sqrt((double)hd));
	float *dz = a->scratch + (size_t)tid * t * t;
	long lo, hi;
	team_split((long)a->batch * a->heads, tid, nt, &lo, &hi);
	for (long ph = lo; ph < hi; ph++) {
		const int b = (int)(ph / a->heads), h = (int)(ph % a->heads);
		const size_t off = (size_t)b * t * e3 + (size_t)h * hd;
		const float *q = a->qkv + off, *k = q + e, *v = q + 2 * e;
		float *dq = a->dqkv + off, *dk = dq + e, *dv = dq + 2 * e;
		const float *att = a->att_in + (size_t)ph * t * t;
		const float *dy = a->dy + (size_t)b * t * e + (size_t)h * hd;
		/* datt = dY V^T; dz = att (datt - rowsum(att datt)) */
		cpu_sgemm(0, 1, t, t, hd, 1.0f, dy, e, v, e3, 0.0f, dz, t);
		for (int i = 0; i < t; i++) {
			float *d = dz + (size_t)i * t;
			const float *ar = att + (size_t)i * t;
			float r = 0.0f;
			for (int j = 0; j <= i; j++)
				r += ar[j] * d[j];
			for (int j = 0; j <= i; j++)
				d[j] = ar[j] * (d[j] - r);
			for (int j = i + 1; j < t; j++)
				d[j] = 0.0f;
		}
		cpu_sgemm(0, 0, t, hd, t, scale, dz, t, k, e3, 0.0f, dq, e3);
		cpu_sgemm(1, 0, t, hd, t, scale, dz, t, q, e3, 0.0f, dk, e3);
		cpu_sgemm(1, 0, t, hd, t, 1.0f, att, t, dy, e, 0.0f, dv, e3);
	}
}

void
cpu_attn_bwd(backend *be, const float *qkv, const float *att, const float *dy,
	     float *dqkv, int batch, int t, int heads, int hd)
{
	cpu_ctx *c = CTX(be);
	struct attn_args a = {.qkv = qkv, .att_in = att, .dy = dy, .dqkv = dqkv,
			      .batch = batch, .t = t, .heads = heads, .hd = hd};
	a.scratch = grow(&c->seq, &c->seq_cap, (size_t)c->nt * t * t);
	run(be, attn_bwd_part, &a, (long)batch * heads * t * t * (hd + 1));
}
