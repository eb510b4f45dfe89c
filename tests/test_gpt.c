/* test_gpt.c - the transformer's ops (backend.h's sequence ops: embed,
 * layer norm, GELU, causal attention; the tied head and the loss over every
 * position) and the gpt:L-H-E-T model.
 *
 * Ops: every input and parameter gradient on ref against a fourth-order
 * central difference of L = sum w y (w fixed and random, so dy = w), on
 * odd shapes (T = 7, head width 5, E = 10, rows of 13: no multiple of a
 * vector); each forward against a plain double-precision transcription of
 * its formula here (the scale 1/sqrt(D), the causal mask, eps and the
 * biased variance, the tanh GELU); the mask by perturbing later positions;
 * the embedding's scatter-add with tokens repeated in the batch and with a
 * tied head's share added first. Parity: refdev gives ref's bits, cpu is
 * within a normalised error of ref (on the odd shapes and on the
 * configuration's own, T = 64, D = 32), and cpu gives the same bits on one
 * thread and two.
 *
 * Model: gpt specs' sizes and init (std 0.02, residual projections 0.02 /
 * sqrt(2 L)), bad specs refused naming the field, a backend without the
 * ops refused naming the op, the per-position loss against its formula,
 * the whole step's gradient (the tied table's two shares included) against
 * central differences on ref, and a tiny gpt learning a toy sequence task
 * through model_step on ref and cpu. */
#include <math.h>
#include <signal.h>

#include "backend.h"
#include "dataset.h"
#include "model.h"
#include "rng.h"
#include "run.h"
#include "runrec.h"
#include "sl.h"
#include "testutil.h"

static backend *
open_be(const char *name, int threads)
{
	backend *be;
	char err[SL_ERR_LEN];
	ck_assert_msg(backend_open(name, threads, &be, err) == 0, "%s", err);
	return be;
}

/* n values in [lo, hi), multiples of 2^-12 */
static float *
vals(rng *g, size_t n, double lo, double hi)
{
	float *v = malloc(sizeof(float) * (n ? n : 1));
	ck_assert_ptr_nonnull(v);
	for (size_t i = 0; i < n; i++)
		v[i] = (float)(round((lo + (hi - lo) * rng_uniform(g)) * 4096.0) / 4096.0);
	return v;
}

static float *
zeros(size_t n)
{
	float *v = calloc(n ? n : 1, sizeof(float));
	ck_assert_ptr_nonnull(v);
	return v;
}

/* host -> new backend memory; backend memory -> host */
static float *
up(backend *be, const float *h, size_t n)
{
	float *d = be->ops->alloc(be, sizeof(float) * (n ? n : 1));
	ck_assert_ptr_nonnull(d);
	if (h && n)
		be->ops->upload(be, d, h, sizeof(float) * n);
	return d;
}

static void
down(backend *be, float *h, float *d, size_t n)
{
	if (h)
		be->ops->download(be, h, d, sizeof(float) * n);
	be->ops->free(be, d);
}

static double
dot(const float *w, const float *y, size_t n)
{
	double s = 0.0;
	for (size_t i = 0; i < n; i++)
		s += (double)w[i] * (double)y[i];
	return s;
}

/* ---- the ops on any backend, host arrays in and out ------------------- */

typedef struct emb_io {
	int b, t, e, v, acc;
	float *ids, *wte, *wpe, *dy, *dwte0; /* inputs (dwte0: before, for acc) */
	float *y, *dwte, *dwpe;              /* outputs */
} emb_io;

static void
run_embed(backend *be, emb_io *c, int bwd)
{
	const size_t rows = (size_t)c->b * c->t, ny = rows * c->e;
	const size_t nte = (size_t)c->v * c->e, npe = (size_t)c->t * c->e;
	float *ids = up(be, c->ids, rows), *wte = up(be, c->wte, nte), *wpe = up(be, c->wpe, npe);
	float *y = up(be, NULL, ny);
	be->ops->embed_fwd(be, ids, wte, wpe, y, c->b, c->t, c->e, c->v);
	if (bwd) {
		float *dy = up(be, c->dy, ny), *dwte = up(be, c->dwte0, nte),
		      *dwpe = up(be, NULL, npe);
		be->ops->embed_bwd(be, ids, dy, dwte, dwpe, c->b, c->t, c->e, c->v, c->acc);
		down(be, NULL, dy, ny);
		down(be, c->dwte, dwte, nte);
		down(be, c->dwpe, dwpe, npe);
	}
	down(be, c->y, y, ny);
	down(be, NULL, ids, rows);
	down(be, NULL, wte, nte);
	down(be, NULL, wpe, npe);
}

typedef struct ln_io {
	int rows, n;
	float *x, *g, *b, *dy;
	float *y, *mean, *rstd, *dx, *dg, *db;
} ln_io;

static void
run_ln(backend *be, ln_io *c, int bwd)
{
	const size_t nx = (size_t)c->rows * c->n, r = (size_t)c->rows, n = (size_t)c->n;
	float *x = up(be, c->x, nx), *g = up(be, c->g, n), *b = up(be, c->b, n);
	float *y = up(be, NULL, nx), *mean = up(be, NULL, r), *rstd = up(be, NULL, r);
	be->ops->layernorm_fwd(be, x, g, b, y, mean, rstd, c->rows, c->n, 1e-5f);
	if (bwd) {
		float *dy = up(be, c->dy, nx), *dx = up(be, NULL, nx), *dg = up(be, NULL, n),
		      *db = up(be, NULL, n);
		be->ops->layernorm_bwd(be, x, g, mean, rstd, dy, dx, dg, db, c->rows, c->n);
		down(be, NULL, dy, nx);
		down(be, c->dx, dx, nx);
		down(be, c->dg, dg, n);
		down(be, c->db, db, n);
	}
	down(be, c->y, y, nx);
	down(be, c->mean, mean, r);
	down(be, c->rstd, rstd, r);
	down(be, NULL, x, nx);
	down(be, NULL, g, n);
	down(be, NULL, b, n);
}

typedef struct gelu_io {
	size_t n;
	float *x, *dy, *y, *dx;
} gelu_io;

static void
run_gelu(backend *be, gelu_io *c, int bwd)
{
	float *x = up(be, c->x, c->n), *y = up(be, NULL, c->n);
	be->ops->gelu_fwd(be, x, y, c->n);
	if (bwd) {
		float *dy = up(be, c->dy, c->n), *dx = up(be, NULL, c->n);
		be->ops->gelu_bwd(be, x, dy, dx, c->n);
		down(be, NULL, dy, c->n);
		down(be, c->dx, dx, c->n);
	}
	down(be, c->y, y, c->n);
	down(be, NULL, x, c->n);
}

typedef struct attn_io {
	int b, t, h, d;
	float *qkv, *dy;
	float *y, *att, *dqkv;
} attn_io;

static size_t
attn_nqkv(const attn_io *c)
{
	return (size_t)c->b * c->t * 3 * c->h * c->d;
}

static size_t
attn_ny(const attn_io *c)
{
	return (size_t)c->b * c->t * c->h * c->d;
}

static size_t
attn_natt(const attn_io *c)
{
	return (size_t)c->b * c->h * c->t * c->t;
}

static void
run_attn(backend *be, attn_io *c, int bwd)
{
	const size_t nq = attn_nqkv(c), ny = attn_ny(c), na = attn_natt(c);
	float *qkv = up(be, c->qkv, nq), *y = up(be, NULL, ny), *att = up(be, NULL, na);
	be->ops->attn_fwd(be, qkv, y, att, c->b, c->t, c->h, c->d);
	if (bwd) {
		float *dy = up(be, c->dy, ny), *dqkv = up(be, NULL, nq);
		be->ops->attn_bwd(be, qkv, att, dy, dqkv, c->b, c->t, c->h, c->d);
		down(be, NULL, dy, ny);
		down(be, c->dqkv, dqkv, nq);
	}
	down(be, c->y, y, ny);
	down(be, c->att, att, na);
	down(be, NULL, qkv, nq);
}

/* ---- finite differences ----------------------------------------------- */

#define FD_H 0.0078125 /* 2^-7: inputs multiples of 2^-12 stay exact */

typedef double (*loss_fn)(void *ctx);

/* ana[0, n) against fourth-order central differences of f in v[0, n),
 * index by index; fails at the first probe past the bound. The worst
 * relative error. */
static double
fd_check(const char *what, float *v, size_t n, const float *ana, loss_fn f, void *ctx)
{
	double scale = 1e-3, worst = 0.0;
	for (size_t i = 0; i < n; i++)
		scale = fmax(scale, fabs(ana[i]));
	for (size_t i = 0; i < n; i++) {
		const float orig = v[i];
		const double step[4] = {-2 * FD_H, -FD_H, FD_H, 2 * FD_H};
		double fk[4];
		for (int k = 0; k < 4; k++) {
			v[i] = (float)(orig + step[k]);
			fk[k] = f(ctx);
		}
		v[i] = orig;
		const double num = (8.0 * (fk[2] - fk[1]) - (fk[3] - fk[0])) / (12.0 * FD_H);
		const double err = fabs(num - ana[i]) / (0.02 * scale + fabs(num) + fabs(ana[i]));
		ck_assert_msg(err <= 2e-3, "%s[%zu]: analytic %.7g, central difference %.7g", what,
			      i, (double)ana[i], num);
		worst = fmax(worst, err);
	}
	return worst;
}

typedef struct fd_ctx {
	backend *be;
	void *io;
	const float *w; /* the loss's weights over the output */
} fd_ctx;

static double
emb_loss(void *p)
{
	fd_ctx *f = p;
	emb_io *c = f->io;
	run_embed(f->be, c, 0);
	return dot(f->w, c->y, (size_t)c->b * c->t * c->e);
}

static double
ln_loss(void *p)
{
	fd_ctx *f = p;
	ln_io *c = f->io;
	run_ln(f->be, c, 0);
	return dot(f->w, c->y, (size_t)c->rows * c->n);
}

static double
gelu_loss(void *p)
{
	fd_ctx *f = p;
	gelu_io *c = f->io;
	run_gelu(f->be, c, 0);
	return dot(f->w, c->y, c->n);
}

static double
attn_loss(void *p)
{
	fd_ctx *f = p;
	attn_io *c = f->io;
	run_attn(f->be, c, 0);
	return dot(f->w, c->y, attn_ny(c));
}

/* ---- embedding -------------------------------------------------------- */

static void
emb_make(emb_io *c, int b, int t, int e, int v, uint64_t seed)
{
	rng g;
	rng_seed(&g, seed, 1);
	*c = (emb_io){.b = b, .t = t, .e = e, .v = v};
	const size_t rows = (size_t)b * t;
	c->ids = zeros(rows);
	/* tokens 0 .. v - 2 only: the last row of the table is never hit */
	for (size_t r = 0; r < rows; r++)
		c->ids[r] = (float)rng_below(&g, (uint64_t)(v - 1));
	c->wte = vals(&g, (size_t)v * e, -1, 1);
	c->wpe = vals(&g, (size_t)t * e, -1, 1);
	c->dy = vals(&g, rows * e, -1, 1);
	c->dwte0 = vals(&g, (size_t)v * e, -1, 1);
	c->y = zeros(rows * e);
	c->dwte = zeros((size_t)v * e);
	c->dwpe = zeros((size_t)t * e);
}

static void
emb_free(emb_io *c)
{
	float *all[] = {c->ids, c->wte, c->wpe, c->dy, c->dwte0, c->y, c->dwte, c->dwpe};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		free(all[i]);
}

START_TEST(embed_forward_and_gradients)
{
	backend *be = open_be("ref", 1);
	emb_io c;
	emb_make(&c, 3, 7, 5, 6, 11);
	/* a token repeated within one sample and across samples */
	c.ids[0] = c.ids[3] = c.ids[8] = 2.0f;
	run_embed(be, &c, 1);
	for (int r = 0; r < c.b * c.t; r++)
		for (int j = 0; j < c.e; j++) {
			int id = (int)c.ids[r], p = r % c.t;
			ck_assert_float_eq(c.y[r * c.e + j], c.wte[id * c.e + j] + c.wpe[p * c.e + j]);
		}
	/* the scatter-add in double, by hand */
	for (int v = 0; v < c.v; v++)
		for (int j = 0; j < c.e; j++) {
			double s = 0.0;
			for (int r = 0; r < c.b * c.t; r++)
				if ((int)c.ids[r] == v)
					s += c.dy[r * c.e + j];
			ck_assert_float_eq(c.dwte[v * c.e + j], (float)s);
		}
	for (int j = 0; j < c.e; j++) /* token 5 never occurs */
		ck_assert_float_eq(c.dwte[5 * c.e + j], 0.0f);
	fd_ctx f = {be, &c, c.dy};
	float *dwte = zeros((size_t)c.v * c.e), *dwpe = zeros((size_t)c.t * c.e);
	memcpy(dwte, c.dwte, sizeof(float) * c.v * c.e);
	memcpy(dwpe, c.dwpe, sizeof(float) * c.t * c.e);
	double e1 = fd_check("embed dwte", c.wte, (size_t)c.v * c.e, dwte, emb_loss, &f);
	double e2 = fd_check("embed dwpe", c.wpe, (size_t)c.t * c.e, dwpe, emb_loss, &f);
	printf("gpt: embed: worst relative errors dwte %.2g, dwpe %.2g\n", e1, e2);
	/* with acc (a tied head wrote first): added onto what was there */
	c.acc = 1;
	run_embed(be, &c, 1);
	for (int i = 0; i < c.v * c.e; i++)
		ck_assert_msg(fabs(c.dwte[i] - (c.dwte0[i] + dwte[i])) <= 1e-6,
			      "acc: dwte[%d] %g, expected %g + %g", i, (double)c.dwte[i],
			      (double)c.dwte0[i], (double)dwte[i]);
	free(dwte);
	free(dwpe);
	emb_free(&c);
	backend_free(be);
}
END_TEST

/* an id past the table is our bug (the run checks the data first): the
 * op aborts instead of reading outside wte (_i: ref, cpu) */
START_TEST(embed_id_past_the_table_aborts)
{
	backend *be = open_be(_i ? "cpu" : "ref", 1);
	emb_io c;
	emb_make(&c, 1, 7, 5, 6, 16);
	c.ids[4] = 6.0f;
	run_embed(be, &c, 0);
	emb_free(&c); /* not reached */
	backend_free(be);
}
END_TEST

/* ---- layer norm ------------------------------------------------------- */

static void
ln_make(ln_io *c, int rows, int n, uint64_t seed)
{
	rng g;
	rng_seed(&g, seed, 2);
	*c = (ln_io){.rows = rows, .n = n};
	const size_t nx = (size_t)rows * n;
	c->x = vals(&g, nx, -1.5, 2.0);
	c->g = vals(&g, (size_t)n, 0.5, 1.5);
	c->b = vals(&g, (size_t)n, -0.5, 0.5);
	c->dy = vals(&g, nx, -1, 1);
	c->y = zeros(nx);
	c->dx = zeros(nx);
	c->mean = zeros((size_t)rows);
	c->rstd = zeros((size_t)rows);
	c->dg = zeros((size_t)n);
	c->db = zeros((size_t)n);
}

static void
ln_free(ln_io *c)
{
	float *all[] = {c->x, c->g, c->b, c->dy, c->y, c->dx, c->mean, c->rstd, c->dg, c->db};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		free(all[i]);
}

START_TEST(layernorm_forward_and_gradients)
{
	backend *be = open_be("ref", 1);
	ln_io c;
	ln_make(&c, 21, 13, 12);
	run_ln(be, &c, 1);
	for (int r = 0; r < c.rows; r++) { /* torch.nn.LayerNorm's formula */
		const float *x = c.x + (size_t)r * c.n;
		double m = 0.0, v = 0.0;
		for (int j = 0; j < c.n; j++)
			m += x[j];
		m /= c.n;
		for (int j = 0; j < c.n; j++)
			v += (x[j] - m) * (x[j] - m);
		v /= c.n; /* biased */
		for (int j = 0; j < c.n; j++) {
			double want = (x[j] - m) / sqrt(v + 1e-5) * c.g[j] + c.b[j];
			ck_assert_msg(fabs(c.y[r * c.n + j] - want) <= 1e-6 * (1 + fabs(want)),
				      "y[%d][%d] %.9g, want %.9g", r, j, (double)c.y[r * c.n + j], want);
		}
	}
	float *dx = zeros((size_t)c.rows * c.n), *dg = zeros((size_t)c.n),
	      *db = zeros((size_t)c.n);
	memcpy(dx, c.dx, sizeof(float) * c.rows * c.n);
	memcpy(dg, c.dg, sizeof(float) * c.n);
	memcpy(db, c.db, sizeof(float) * c.n);
	fd_ctx f = {be, &c, c.dy};
	double e1 = fd_check("layernorm dx", c.x, (size_t)c.rows * c.n, dx, ln_loss, &f);
	double e2 = fd_check("layernorm dg", c.g, (size_t)c.n, dg, ln_loss, &f);
	double e3 = fd_check("layernorm db", c.b, (size_t)c.n, db, ln_loss, &f);
	printf("gpt: layernorm: worst relative errors dx %.2g, dg %.2g, db %.2g\n", e1, e2, e3);
	free(dx);
	free(dg);
	free(db);
	ln_free(&c);
	backend_free(be);
}
END_TEST

/* ---- GELU ------------------------------------------------------------- */

START_TEST(gelu_forward_and_gradient)
{
	backend *be = open_be("ref", 1);
	rng g;
	rng_seed(&g, 13, 3);
	gelu_io c = {.n = 101};
	c.x = vals(&g, c.n, -4, 4);
	c.dy = vals(&g, c.n, -1, 1);
	c.y = zeros(c.n);
	c.dx = zeros(c.n);
	c.x[0] = 0.0f;
	run_gelu(be, &c, 1);
	double far = 0.0;
	for (size_t i = 0; i < c.n; i++) {
		const double x = c.x[i];
		const double want = 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
		ck_assert_msg(fabs(c.y[i] - want) <= 1e-6 * (1 + fabs(want)), "gelu(%g) %.9g, want %.9g",
			      x, (double)c.y[i], want);
		/* the tanh form against the exact erf form (nanoGPT's) */
		far = fmax(far, fabs(c.y[i] - 0.5 * x * (1 + erf(x / sqrt(2.0)))));
	}
	ck_assert_float_eq(c.y[0], 0.0f);
	ck_assert_msg(far < 1e-3 && far > 0, "tanh form %g from the erf form", far);
	float *dx = zeros(c.n);
	memcpy(dx, c.dx, sizeof(float) * c.n);
	fd_ctx f = {be, &c, c.dy};
	double e = fd_check("gelu dx", c.x, c.n, dx, gelu_loss, &f);
	printf("gpt: gelu (tanh): worst relative error dx %.2g; %.2g from the erf form\n", e, far);
	free(dx);
	free(c.x);
	free(c.dy);
	free(c.y);
	free(c.dx);
	backend_free(be);
}
END_TEST

/* ---- attention -------------------------------------------------------- */

static void
attn_make(attn_io *c, int b, int t, int h, int d, uint64_t seed)
{
	rng g;
	rng_seed(&g, seed, 4);
	*c = (attn_io){.b = b, .t = t, .h = h, .d = d};
	c->qkv = vals(&g, attn_nqkv(c), -1.5, 1.5);
	c->dy = vals(&g, attn_ny(c), -1, 1);
	c->y = zeros(attn_ny(c));
	c->att = zeros(attn_natt(c));
	c->dqkv = zeros(attn_nqkv(c));
}

static void
attn_free(attn_io *c)
{
	free(c->qkv);
	free(c->dy);
	free(c->y);
	free(c->att);
	free(c->dqkv);
}

/* the definition in double: y[b][t][h D + c] */
static double
attn_naive(const attn_io *c, int b, int t, int h, int col)
{
	const int e = c->h * c->d, e3 = 3 * e;
	const float *base = c->qkv + (size_t)b * c->t * e3 + (size_t)h * c->d;
	double s[512], mx = -INFINITY, z = 0.0, y = 0.0;
	for (int j = 0; j <= t; j++) {
		double dd = 0.0;
		for (int k = 0; k < c->d; k++)
			dd += (double)base[t * e3 + k] * base[j * e3 + e + k];
		s[j] = dd / sqrt((double)c->d);
		mx = fmax(mx, s[j]);
	}
	for (int j = 0; j <= t; j++)
		z += exp(s[j] - mx);
	for (int j = 0; j <= t; j++)
		y += exp(s[j] - mx) / z * base[j * e3 + 2 * e + col];
	return y;
}

START_TEST(attention_forward_and_gradients)
{
	backend *be = open_be("ref", 1);
	attn_io c;
	attn_make(&c, 2, 7, 2, 5, 14);
	run_attn(be, &c, 1);
	const int e = c.h * c.d;
	for (int b = 0; b < c.b; b++)
		for (int t = 0; t < c.t; t++)
			for (int h = 0; h < c.h; h++)
				for (int k = 0; k < c.d; k++) {
					double want = attn_naive(&c, b, t, h, k);
					float got = c.y[((size_t)b * c.t + t) * e + h * c.d + k];
					ck_assert_msg(fabs(got - want) <= 1e-6 * (1 + fabs(want)),
						      "y[%d][%d][head %d][%d] %.9g, want %.9g", b, t, h,
						      k, (double)got, want);
				}
	/* the probabilities: rows sum to 1, nothing above the diagonal */
	for (size_t r = 0; r < (size_t)c.b * c.h * c.t; r++) {
		const int i = (int)(r % c.t);
		double s = 0.0;
		for (int j = 0; j < c.t; j++) {
			s += c.att[r * c.t + j];
			if (j > i)
				ck_assert_float_eq(c.att[r * c.t + j], 0.0f);
		}
		ck_assert_msg(fabs(s - 1.0) < 1e-6, "row %zu sums to %.9g", r, s);
	}
	float *dq = zeros(attn_nqkv(&c));
	memcpy(dq, c.dqkv, sizeof(float) * attn_nqkv(&c));
	fd_ctx f = {be, &c, c.dy};
	double w = fd_check("attention dqkv", c.qkv, attn_nqkv(&c), dq, attn_loss, &f);
	printf("gpt: attention: worst relative error dqkv %.2g (q, k and v)\n", w);
	free(dq);
	attn_free(&c);
	backend_free(be);
}
END_TEST

/* position t's output reads positions <= t only: a change at position p
 * leaves every earlier output's bits as they were */
START_TEST(attention_is_causal)
{
	const char *devs[] = {"ref", "cpu"};
	for (int dv = 0; dv < 2; dv++) {
		backend *be = open_be(devs[dv], 2);
		attn_io c;
		attn_make(&c, 2, 7, 2, 5, 15);
		run_attn(be, &c, 0);
		const int e = c.h * c.d, p = 4;
		float *y0 = zeros(attn_ny(&c));
		memcpy(y0, c.y, sizeof(float) * attn_ny(&c));
		for (int k = 0; k < 3 * e; k++) /* q, k and v of sample 1, position p */
			c.qkv[((size_t)1 * c.t + p) * 3 * e + k] += 0.5f;
		run_attn(be, &c, 0);
		for (int t = 0; t < c.t; t++) {
			const float *a = y0 + ((size_t)1 * c.t + t) * e, *b = c.y + ((size_t)1 * c.t + t) * e;
			int same = !memcmp(a, b, sizeof(float) * e);
			ck_assert_msg(same == (t < p), "%s: position %d %s after a change at %d",
				      devs[dv], t, same ? "unchanged" : "changed", p);
		}
		ck_assert(!memcmp(y0, c.y, sizeof(float) * c.t * e)); /* sample 0 */
		free(y0);
		attn_free(&c);
		backend_free(be);
	}
}
END_TEST

/* ---- parity: cpu and refdev against ref ------------------------------- */

/* normalised squared error of a against r (n floats) */
static double
nmse(const float *a, const float *r, size_t n)
{
	double num = 0.0, den = 0.0;
	for (size_t i = 0; i < n; i++) {
		ck_assert(isfinite(a[i]) && isfinite(r[i]));
		num += ((double)a[i] - r[i]) * ((double)a[i] - r[i]);
		den += (double)r[i] * r[i];
	}
	return den > 0 ? num / den : num;
}

static void
near(const char *dev, const char *what, const float *a, const float *r, size_t n, double bound)
{
	if (!strcmp(dev, "refdev") || bound == 0) {
		ck_assert_msg(!memcmp(a, r, sizeof(float) * n), "%s: %s differs from ref", what, dev);
		return;
	}
	double e = nmse(a, r, n);
	ck_assert_msg(e <= bound, "%s on %s: nmse %.3g > %.1g", what, dev, e, bound);
}

/* one shape of every op on dev against ref; when other is set, the same
 * on other too, bit for bit (cpu on 1 and 2 threads) */
static void
parity_shape(const char *dev, backend *be, backend *other, backend *ref, int b, int t, int h,
	     int d, int v, uint64_t seed)
{
	const int e = h * d;
	char what[96];
	backend *bes[3] = {be, ref, other};
	emb_io ec[3];
	ln_io lc[3];
	gelu_io gc[3];
	attn_io ac[3];
	rng g;
	rng_seed(&g, seed, 6);
	for (int k = 0; k < 3; k++) {
		emb_make(&ec[k], b, t, e, v, seed);
		ec[k].acc = 1;
		ln_make(&lc[k], b * t, e, seed);
		attn_make(&ac[k], b, t, h, d, seed);
		rng_seed(&g, seed, 6);
		gc[k] = (gelu_io){.n = (size_t)b * t * 4 * e};
		gc[k].x = vals(&g, gc[k].n, -4, 4);
		/* the tails (e^{-2u} past float's range either way) and 0 */
		const float tails[] = {-30.0f, -9.5f, 0.0f, 1e-4f, -1e-4f, 9.5f, 30.0f};
		memcpy(gc[k].x, tails, sizeof(tails));
		gc[k].dy = vals(&g, gc[k].n, -1, 1);
		gc[k].y = zeros(gc[k].n);
		gc[k].dx = zeros(gc[k].n);
		if (!bes[k])
			continue;
		run_embed(bes[k], &ec[k], 1);
		run_ln(bes[k], &lc[k], 1);
		run_gelu(bes[k], &gc[k], 1);
		run_attn(bes[k], &ac[k], 1);
	}
	const size_t rows = (size_t)b * t;
	/* dev against ref; cpu on 1 thread against cpu on 2, bit for bit */
	for (int k = 0; k < 3; k += 2) {
		if (!bes[k])
			continue;
		const int r = k ? 0 : 1;
		const char *dn = k ? "cpu on 1 thread against 2" : dev;
		double ew = k ? 0 : 1e-12, ln = k ? 0 : 1e-11, at = k ? 0 : 1e-9;
		snprintf(what, sizeof(what), "B %d T %d H %d D %d V %d", b, t, h, d, v);
		/* the embedding's forward: one float add everywhere */
		near(dn, "embed y", ec[k].y, ec[r].y, rows * e, 0);
		near(dn, "embed dwte", ec[k].dwte, ec[r].dwte, (size_t)v * e, ew);
		near(dn, "embed dwpe", ec[k].dwpe, ec[r].dwpe, (size_t)t * e, ew);
		near(dn, "layernorm y", lc[k].y, lc[r].y, rows * e, ln);
		near(dn, "layernorm dx", lc[k].dx, lc[r].dx, rows * e, ln);
		near(dn, "layernorm dg", lc[k].dg, lc[r].dg, (size_t)e, ln);
		near(dn, "layernorm db", lc[k].db, lc[r].db, (size_t)e, ln);
		near(dn, "gelu y", gc[k].y, gc[r].y, gc[k].n, ew);
		near(dn, "gelu dx", gc[k].dx, gc[r].dx, gc[k].n, ew);
		near(dn, "attention y", ac[k].y, ac[r].y, attn_ny(&ac[k]), at);
		near(dn, "attention att", ac[k].att, ac[r].att, attn_natt(&ac[k]), at);
		near(dn, "attention dqkv", ac[k].dqkv, ac[r].dqkv, attn_nqkv(&ac[k]), at);
		if (!k) {
			printf("gpt: %s against ref, %s: nmse attention y %.2g dqkv %.2g, layernorm dx "
			       "%.2g, gelu dx %.2g, embed dwte %.2g\n", dev, what,
			       nmse(ac[0].y, ac[1].y, attn_ny(&ac[0])),
			       nmse(ac[0].dqkv, ac[1].dqkv, attn_nqkv(&ac[0])),
			       nmse(lc[0].dx, lc[1].dx, rows * e), nmse(gc[0].dx, gc[1].dx, gc[0].n),
			       nmse(ec[0].dwte, ec[1].dwte, (size_t)v * e));
		}
	}
	for (int k = 0; k < 3; k++) {
		emb_free(&ec[k]);
		ln_free(&lc[k]);
		attn_free(&ac[k]);
		free(gc[k].x);
		free(gc[k].dy);
		free(gc[k].y);
		free(gc[k].dx);
	}
}

START_TEST(ops_parity)
{
	backend *ref = open_be("ref", 1);
	const char *devs[] = {"refdev", "cpu"};
	for (int dv = 0; dv < 2; dv++) {
		int cpu = dv == 1;
		backend *be = open_be(devs[dv], 2), *one = cpu ? open_be("cpu", 1) : NULL;
		parity_shape(devs[dv], be, one, ref, 3, 7, 2, 5, 9, 21);
		/* the configuration's own: T 64, D 32 (big enough for the team) */
		parity_shape(devs[dv], be, one, ref, 4, 64, 4, 32, 65, 22);
		backend_free(be);
		backend_free(one);
	}
	backend_free(ref);
}
END_TEST

/* ---- the model -------------------------------------------------------- */

/* V = 5 tokens; T = 7 */
#define TV 5
#define TT 7

/* a batch of sequences for the toy task: random tokens, each position's
 * target the token one before it (the first: token 0), so the model must
 * attend to the previous position */
static void
toy_batch(rng *g, float *x, uint8_t *y, int batch)
{
	for (int b = 0; b < batch; b++)
		for (int t = 0; t < TT; t++) {
			x[b * TT + t] = (float)rng_below(g, TV);
			y[b * TT + t] = t ? (uint8_t)x[b * TT + t - 1] : 0;
		}
}

static void
load_toy(model *m, rng *g, int batch)
{
	float x[64 * TT];
	uint8_t y[64 * TT];
	uint32_t idx[64];
	ck_assert_int_le(batch, 64);
	toy_batch(g, x, y, batch);
	for (int b = 0; b < batch; b++)
		idx[b] = (uint32_t)b;
	model_load_batch(m, x, y, idx, batch);
}

static model *
gpt_on(backend *be, const char *spec, int batch)
{
	model *m;
	char err[SL_ERR_LEN];
	ck_assert_msg(model_new(spec, 1, 1, TT, TV, batch, 5, be, &m, err) == 0, "%s", err);
	return m;
}

START_TEST(gpt_sizes_and_init)
{
	backend *be = open_be("ref", 1);
	model *m;
	char err[SL_ERR_LEN];
	/* the configuration: 65 tokens (Shakespeare's), T 64 */
	ck_assert_msg(model_new("gpt:L4-H4-E128-T64", 1, 1, 64, 65, 2, 1, be, &m, err) == 0, "%s",
		      err);
	const size_t E = 128, T = 64, V = 65, L = 4;
	const size_t block = 2 * E + (3 * E * E + 3 * E) + (E * E + E) + 2 * E + (4 * E * E + 4 * E) +
			     (4 * E * E + E);
	ck_assert_uint_eq(m->n_params, V * E + T * E + L * block + 2 * E);
	ck_assert_int_eq(m->n_nodes, 1 + 10 * 4 + 2);
	ck_assert_int_eq(m->targets, 64);
	ck_assert_str_eq(m->nodes[m->n_nodes - 1].op->name, "lmhead");
	ck_assert_int_eq(m->nodes[0].tied, 1);
	/* the tied table is the head's, at the top of the buffer; the
	 * embedding holds the position table */
	const node *head = &m->nodes[m->n_nodes - 1];
	ck_assert_uint_eq(head->n_params, V * E);
	ck_assert_uint_eq(head->p_off, m->n_params - V * E);
	ck_assert_uint_eq(m->nodes[0].n_params, T * E);
	ck_assert_ptr_eq(m->nodes[0].tie, head);
	/* the init: sd 0.02, the residual projections 0.02 / sqrt(8) */
	for (int i = 0; i < m->n_nodes; i++) {
		const node *nd = &m->nodes[i];
		if (strcmp(nd->op->name, "linear") && strcmp(nd->op->name, "embed") &&
		    strcmp(nd->op->name, "lmhead"))
			continue;
		double s = 0.0, s2 = 0.0;
		const float *w = m->params + nd->p_off;
		for (size_t k = 0; k < nd->n_weights; k++) {
			s += w[k];
			s2 += (double)w[k] * w[k];
		}
		double sd = sqrt(s2 / nd->n_weights - (s / nd->n_weights) * (s / nd->n_weights));
		int resid = nd->units == (int)E && !strcmp(nd->op->name, "linear");
		double want = resid ? 0.02 / sqrt(8.0) : 0.02;
		ck_assert_msg(fabs(sd - want) < 0.05 * want, "node %d (%s): sd %g, want %g", i,
			      nd->op->name, sd, want);
		for (size_t k = nd->n_weights; k < nd->n_params; k++)
			ck_assert_float_eq(w[k], 0.0f);
	}
	ck_assert_int_eq(model_spec_param_layers("gpt:L4-H4-E128-T64"), 1 + 4 * 6 + 1 + 1);
	model_free(m);
	/* the memory docs/architecture.md states, at batch 12: parameters
	 * and gradient, the input twice, 18 E T floats a block + E T + E T +
	 * V T of activations twice, H T^2 probabilities a block and 2 T per
	 * layer norm, and the two gradient-sum buffers (4 E T each) */
	const size_t B = 12, H = 4;
	ck_assert(model_new("gpt:L4-H4-E128-T64", 1, 1, 64, 65, (int)B, 1, be, &m, err) == 0);
	size_t fl = 2 * m->n_params + 2 * B * T + 2 * B * (L * 18 * E * T + 2 * E * T + V * T) +
		    B * (L * H * T * T + (2 * L + 1) * 2 * T) + 2 * B * 4 * E * T;
	ck_assert_uint_eq(m->mem_bytes, sizeof(float) * fl);
	printf("gpt: L4-H4-E128-T64, V 65, batch 12: %zu parameters, %.1f MB of buffers\n",
	       m->n_params, m->mem_bytes / 1e6);
	model_free(m);
	backend_free(be);
}
END_TEST

START_TEST(gpt_bad_specs_refused)
{
	backend *be = open_be("ref", 1);
	static const struct {
		const char *spec;
		int t;
		const char *want;
	} bad[] = {
		{"gpt:L0-H4-E128-T64", 64, "L (layers) must be 1 to 50"},
		{"gpt:L4-H0-E128-T64", 64, "H (heads) must be 1 to"},
		{"gpt:L4-H3-E128-T64", 64, "E (width) 128 is not a multiple of H (heads) 3"},
		{"gpt:L4-H4-E128-T0", 64, "T (context) must be 1 to"},
		{"gpt:L4-H4-E128", 64, "expected '-' after E128"},
		{"gpt:L4-E128-H4-T64", 64, "expected H<heads> at \"E128-H4-T64\""},
		{"gpt:L4-H4-E128-T64x", 64, "expected the end after T64"},
		{"gpt:", 64, "expected L<layers>"},
		{"gpt:L4-H4-E128-T64", 32, "T (context) 64 but the dataset's samples hold 32 values"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		model *m = (model *)1;
		char err[SL_ERR_LEN] = "";
		ck_assert_int_eq(model_new(bad[i].spec, 1, 1, bad[i].t, 65, 2, 1, be, &m, err),
				 -SL_EINVAL);
		ck_assert_ptr_null(m);
		ck_assert_msg(strstr(err, bad[i].want), "%s: error \"%s\", expected \"%s\"",
			      bad[i].spec, err, bad[i].want);
	}
	ck_assert_int_eq(model_spec_param_layers("gpt:L4-H3-E128-T64"), -1);
	/* a backend without the sequence ops (cuda's table, for now) */
	backend_ops o = *be->ops;
	o.name = "nosuch";
	o.attn_fwd = NULL;
	backend fake = {&o, be->ctx};
	model *m = (model *)1;
	char err[SL_ERR_LEN] = "";
	ck_assert_int_eq(model_new("gpt:L1-H2-E8-T7", 1, 1, 7, 5, 2, 1, &fake, &m, err),
			 -SL_EUNSUP);
	ck_assert_ptr_null(m);
	ck_assert_msg(strstr(err, "model.nodes[0] (embed): the nosuch backend has no embed op"),
		      "%s", err);
	backend_free(be);
}
END_TEST

START_TEST(targets_per_sample)
{
	backend *be = open_be("ref", 1);
	model *g = gpt_on(be, "gpt:L1-H2-E8-T7", 4), *mlp;
	char err[SL_ERR_LEN];
	ck_assert(model_new("logreg", 1, 1, TT, TV, 4, 1, be, &mlp, err) == 0);
	dataset text = {.n = 4, .c = 1, .h = 1, .w = TT, .dim = TT, .classes = TV, .ylen = TT};
	dataset images = text;
	images.ylen = 0;
	float x[4 * TT];
	for (int i = 0; i < 4 * TT; i++)
		x[i] = (float)(i % TV);
	text.x = images.x = x;
	ck_assert_int_eq(model_check_data(g, &text, "train", err), 0);
	ck_assert_int_eq(model_check_data(mlp, &images, "train", err), 0);
	ck_assert_int_eq(model_check_data(g, &images, "test", err), -SL_EINVAL);
	ck_assert_msg(strstr(err, "predicts 7 labels per sample but the test set's samples carry 1"),
		      "%s", err);
	ck_assert_int_eq(model_check_data(mlp, &text, "train", err), -SL_EINVAL);
	/* ids: integers below the vocabulary */
	const float bad[] = {5.0f, -1.0f, 2.5f, NAN};
	for (int k = 0; k < 4; k++) {
		x[2 * TT + 3] = bad[k];
		ck_assert_int_eq(model_check_data(g, &text, "train", err), -SL_EINVAL);
		ck_assert_msg(strstr(err, "train set sample 2, position 3 holds") &&
				      strstr(err, "not a token id in 0..4"),
			      "%s", err);
	}
	x[2 * TT + 3] = 4.0f;
	ck_assert_int_eq(model_check_data(g, &text, "train", err), 0);
	ck_assert_int_eq(mlp->targets, 1);
	/* the loss: the mean over every position of every sample of the
	 * cross-entropy of that position's logits and its own target */
	rng r;
	rng_seed(&r, 3, 3);
	load_toy(g, &r, 4);
	int hits = -1;
	double loss = model_forward(g, NULL, 4, &hits);
	const float *z = g->act[g->n_nodes];
	double want = 0.0;
	int want_hits = 0;
	for (int row = 0; row < 4 * TT; row++) {
		const float *zr = z + row * TV;
		double mx = zr[0], s = 0.0;
		int am = 0;
		for (int k = 1; k < TV; k++)
			if (zr[k] > mx) {
				mx = zr[k];
				am = k;
			}
		for (int k = 0; k < TV; k++)
			s += exp(zr[k] - mx);
		want += log(s) + mx - zr[g->labels[row]];
		want_hits += am == g->labels[row];
	}
	want /= 4 * TT;
	ck_assert_msg(fabs(loss - want) < 1e-9, "loss %.12g, want %.12g", loss, want);
	ck_assert_int_eq(hits, want_hits);
	model_free(g);
	model_free(mlp);
	backend_free(be);
}
END_TEST

/* the whole step's gradient on ref against central differences of the
 * loss in every parameter */
START_TEST(gpt_step_gradient)
{
	backend *be = open_be("ref", 1);
	model *m = gpt_on(be, "gpt:L1-H2-E8-T7", 3);
	/* larger weights than the init's, so every path carries gradient */
	rng r;
	rng_seed(&r, 4, 4);
	for (size_t i = 0; i < m->n_params; i++)
		m->params[i] += (float)(0.3 * rng_normal(&r));
	load_toy(m, &r, 3);
	model_step(m, NULL, 3, 0);
	float *g = zeros(m->n_params);
	memcpy(g, m->grads, sizeof(float) * m->n_params);
	double worst = 0.0;
	const float eps = 1e-2f;
	double scale = 1e-3;
	for (size_t i = 0; i < m->n_params; i++)
		scale = fmax(scale, fabs(g[i]));
	for (size_t i = 0; i < m->n_params; i++) {
		const float orig = m->params[i];
		double f[4];
		const float step[4] = {-2 * eps, -eps, eps, 2 * eps};
		for (int k = 0; k < 4; k++) {
			m->params[i] = orig + step[k];
			f[k] = model_forward(m, NULL, 3, NULL);
		}
		m->params[i] = orig;
		double num = (8.0 * (f[2] - f[1]) - (f[3] - f[0])) / (12.0 * eps);
		double err = fabs(num - g[i]) / (0.01 * scale + fabs(num) + fabs(g[i]));
		ck_assert_msg(err < 1e-2, "param %zu: analytic %.7g, central difference %.7g", i,
			      (double)g[i], num);
		worst = fmax(worst, err);
	}
	printf("gpt: L1-H2-E8-T7 step on ref: %zu parameters, worst relative error %.2g\n",
	       m->n_params, worst);
	free(g);
	model_free(m);
	backend_free(be);
}
END_TEST

/* cpu's step against ref's: the loss and every gradient */
START_TEST(gpt_step_parity)
{
	backend *ref = open_be("ref", 1), *cpu = open_be("cpu", 2), *rd = open_be("refdev", 1);
	model *a = gpt_on(ref, "gpt:L2-H2-E10-T7", 6), *b = gpt_on(cpu, "gpt:L2-H2-E10-T7", 6),
	      *c = gpt_on(rd, "gpt:L2-H2-E10-T7", 6);
	rng r1, r2, r3;
	rng_seed(&r1, 8, 8);
	rng_seed(&r2, 8, 8);
	rng_seed(&r3, 8, 8);
	load_toy(a, &r1, 6);
	load_toy(b, &r2, 6);
	load_toy(c, &r3, 6);
	double la = model_step(a, NULL, 6, 0), lb = model_step(b, NULL, 6, 0),
	       lc = model_step(c, NULL, 6, 0);
	ck_assert_msg(fabs(la - lb) < 1e-6 * la, "loss cpu %.9g, ref %.9g", lb, la);
	ck_assert(la == lc);
	float *gc = zeros(c->n_params);
	rd->ops->download(rd, gc, c->grads, sizeof(float) * c->n_params);
	ck_assert(!memcmp(gc, a->grads, sizeof(float) * a->n_params));
	double e = nmse(b->grads, a->grads, a->n_params);
	printf("gpt: L2-H2-E10-T7 step: cpu's loss %.9g, ref's %.9g; gradient nmse %.2g\n", lb, la,
	       e);
	ck_assert_msg(e < 1e-9, "gradient nmse %.3g", e);
	free(gc);
	model_free(a);
	model_free(b);
	model_free(c);
	backend_free(ref);
	backend_free(cpu);
	backend_free(rd);
}
END_TEST

/* a partial backward at each cut depth gives the full step's gradient
 * of the tail, bit for bit, but for the tied table (the head's, at the
 * top): there every partial depth gives the head's share alone, and the
 * full step adds the embedding's scatter of its output gradient */
START_TEST(gpt_partial_depths)
{
	backend *be = open_be("ref", 1);
	model *m = gpt_on(be, "gpt:L2-H2-E8-T7", 3);
	rng r;
	rng_seed(&r, 6, 6);
	load_toy(m, &r, 3);
	int depths[64], nd = model_cut_depths(m, depths, 64);
	char buf[256];
	ck_assert_int_eq(m->n_param_layers, 1 + 2 * 6 + 1 + 1);
	ck_assert_int_eq(model_spec_cut_depths("gpt:L2-H2-E8-T7", depths, 64), nd);
	printf("gpt: L2-H2-E8-T7 cut depths %s (of %d layers)\n", model_depths_str(depths, nd, buf, sizeof(buf)),
	       m->n_param_layers);
	/* the head alone, the final layer norm and the head, then each
	 * residual half-block from its layer norm (MLP: ln2, fc, proj2;
	 * attention: ln1, qkv, proj): 1, then 2 + 3 k */
	ck_assert_int_eq(nd, 6);
	ck_assert_int_eq(depths[0], 1);
	for (int k = 1; k < nd; k++)
		ck_assert_int_eq(depths[k], 2 + 3 * (k - 1));
	const node *head = &m->nodes[m->n_nodes - 1];
	const size_t tab = head->p_off, V = (size_t)head->tie->vocab, E = (size_t)head->tie->units;
	ck_assert_uint_eq(tab + V * E, m->n_params);
	double l0 = model_step(m, NULL, 3, 0);
	float *g = zeros(m->n_params);
	memcpy(g, m->grads, sizeof(float) * m->n_params);
	/* the embedding's share: its output gradient scattered by token */
	double *scat = calloc(V * E, sizeof(double));
	float x[3 * 7], dy[3 * 7 * 8];
	be->ops->download(be, x, m->act[0], sizeof(x));
	be->ops->download(be, dy, m->dact[1], sizeof(dy));
	for (int bt = 0; bt < 3 * 7; bt++)
		for (size_t e = 0; e < E; e++)
			scat[(size_t)x[bt] * E + e] += dy[bt * E + e];
	float *share = zeros(V * E);
	for (int k = 0; k < nd; k++) {
		size_t tail = model_tail_offset(m, depths[k]);
		ck_assert(tail > 0);
		ck_assert(model_step(m, NULL, 3, depths[k]) == l0);
		ck_assert_msg(!memcmp(g + tail, m->grads + tail, sizeof(float) * (tab - tail)),
			      "depth %d: the tail's gradient differs", depths[k]);
		if (k == 0)
			memcpy(share, m->grads + tab, sizeof(float) * V * E);
		ck_assert_msg(!memcmp(share, m->grads + tab, sizeof(float) * V * E),
			      "depth %d: the table's gradient is not the head's share", depths[k]);
	}
	double most = 0.0, diff = 0.0;
	for (size_t i = 0; i < V * E; i++) {
		most = fmax(most, fabs(scat[i]));
		diff = fmax(diff, fabs(g[tab + i] - share[i] - scat[i]));
	}
	ck_assert(most > 1e-4); /* the scatter is not nothing */
	ck_assert_msg(diff < 1e-5 * fmax(most, 1.0), "full - head share vs scatter: %g", diff);
	free(share);
	free(scat);
	free(g);
	model_free(m);
	backend_free(be);
}
END_TEST

/* the same network as a graph spec (what the run object's {"nodes":
 * [...]} becomes): the same nodes and parameters, and with the builtin's
 * parameters the same loss and gradient, bit for bit */
START_TEST(gpt_as_a_graph)
{
	static const char graph[] =
		"graph:embed(units=8,vocab=5);layernorm();linear(units=24);attention(heads=2);"
		"linear(units=8);add(in=0+4);layernorm();linear(units=32);gelu();linear(units=8);"
		"add(in=5+9);layernorm();lmhead(tie=1)";
	backend *be = open_be("ref", 1);
	model *a = gpt_on(be, "gpt:L1-H2-E8-T7", 3), *b = gpt_on(be, graph, 3);
	ck_assert_int_eq(a->n_nodes, b->n_nodes);
	ck_assert_uint_eq(a->n_params, b->n_params);
	ck_assert_int_eq(b->targets, TT);
	memcpy(b->params, a->params, sizeof(float) * a->n_params);
	rng r1, r2;
	rng_seed(&r1, 12, 12);
	rng_seed(&r2, 12, 12);
	load_toy(a, &r1, 3);
	load_toy(b, &r2, 3);
	ck_assert(model_step(a, NULL, 3, 0) == model_step(b, NULL, 3, 0));
	ck_assert(!memcmp(a->grads, b->grads, sizeof(float) * a->n_params));
	/* attributes missing: refused by node and op */
	static const struct {
		const char *spec, *want;
	} bad[] = {
		{"graph:embed(units=8);lmhead(tie=1)", "model.nodes[0] (embed): embed with vocab 0"},
		{"graph:embed(units=8,vocab=5);lmhead()", "model.nodes[1] (lmhead): lmhead needs tie"},
		{"graph:embed(units=8,vocab=5);lmhead(tie=2)",
		 "model.nodes[1] (lmhead): tie names node 1, which is no earlier embed node"},
		{"graph:embed(units=9,vocab=5);linear(units=27);attention();lmhead(tie=1)",
		 "model.nodes[2] (attention): attention with 0 heads over width 9"},
		{"graph:embed(units=8,vocab=5);attention(heads=2);lmhead(tie=1)",
		 "model.nodes[1] (attention): attention reads q, k and v side by side: 8 columns"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		model *m = (model *)1;
		char err[SL_ERR_LEN] = "";
		ck_assert_int_eq(model_new(bad[i].spec, 1, 1, TT, TV, 2, 1, be, &m, err), -SL_EINVAL);
		ck_assert_ptr_null(m);
		ck_assert_msg(strstr(err, bad[i].want), "%s: \"%s\", expected \"%s\"", bad[i].spec,
			      err, bad[i].want);
	}
	model_free(a);
	model_free(b);
	backend_free(be);
}
END_TEST

/* a tiny gpt learns to repeat the token before: the loss over fresh
 * batches falls from ln 5 to a fraction of it */
START_TEST(gpt_learns_toy_task)
{
	const char *devs[] = {"ref", "cpu"};
	for (int dv = 0; dv < 2; dv++) {
		backend *be = open_be(devs[dv], 2);
		model *m = gpt_on(be, "gpt:L1-H2-E16-T7", 16);
		rng r;
		rng_seed(&r, 9, 9);
		float *mom = be->ops->alloc(be, sizeof(float) * m->n_params);
		double first = 0.0, last = 0.0;
		const int steps = 300;
		for (int s = 0; s < steps; s++) {
			load_toy(m, &r, 16);
			double l = model_step(m, NULL, 16, 0);
			if (s < 10)
				first += l / 10;
			if (s >= steps - 10)
				last += l / 10;
			be->ops->sgd(be, m->params, m->grads, mom, m->n_params, 0.1f, 0.9f, 0.0f);
		}
		printf("gpt: L1-H2-E16-T7 on %s, %d steps of 16 sequences: loss %.3f -> %.3f\n",
		       devs[dv], steps, first, last);
		ck_assert_msg(first > 1.4 && last < 0.5 * first, "%s: loss %g -> %g", devs[dv], first,
			      last);
		be->ops->free(be, mom);
		model_free(m);
		backend_free(be);
	}
}
END_TEST

/* the toy task as a text set: n samples of TT ids, TT targets each */
static void
toy_set(dataset *d, uint32_t n, uint64_t seed)
{
	rng g;
	rng_seed(&g, seed, 10);
	*d = (dataset){.n = n, .c = 1, .h = 1, .w = TT, .dim = TT, .classes = TV, .ylen = TT};
	d->x = sl_calloc_aligned((size_t)n * TT, sizeof(float));
	d->y = malloc((size_t)n * TT);
	ck_assert(d->x && d->y);
	toy_batch(&g, d->x, d->y, (int)n);
}

/* gpt:L1-H2-E16-T7 with asgd on the virtual clock, on the toy text set
 * (pair: n training samples, n / 8 held out) and the given device */
static void
toy_run(run_config *c, dataset_pair *pair, uint32_t n, const char *device)
{
	*pair = (dataset_pair){0};
	toy_set(&pair->train, n, 1);
	toy_set(&pair->test, n / 8, 2);
	snprintf(pair->name, sizeof(pair->name), "toy");
	config_defaults(c);
	snprintf(c->model, sizeof(c->model), "gpt:L1-H2-E16-T7");
	snprintf(c->dataset, sizeof(c->dataset), "synthetic:%u", (unsigned)n);
	snprintf(c->rule, sizeof(c->rule), "asgd");
	snprintf(c->clock, sizeof(c->clock), "virtual");
	snprintf(c->device, sizeof(c->device), "%s", device);
}

/* adamw's decoupled decay through a run: two runs that differ only in
 * weight_decay move the matrices and tables apart (the embedding's
 * position table, the projections, the head's token table) and leave the
 * biases and the layer norms' gains and shifts the same bits after one
 * update, whose gradient both runs share (nanoGPT's
 * groups: only parameters of 2 or more dimensions decay) */
START_TEST(gpt_adamw_decays_matrices_not_gains)
{
	dataset_pair pair;
	float *w[2];
	size_t n = 0;
	for (int k = 0; k < 2; k++) {
		run_config c;
		toy_run(&c, &pair, 256, "ref");
		c.opt.kind = OPT_ADAMW;
		c.lr = 0.01;
		c.weight_decay = k ? 0.5 : 0.0;
		c.batch = 4;
		c.eval_every = 0;
		c.stop_steps = 1; /* one update: the same gradient in both */
		run *r;
		char err[SL_ERR_LEN] = "";
		ck_assert_msg(run_new(&c, &pair, NULL, 0, NULL, &r, err) == 0, "%s", err);
		ck_assert_int_eq(run_exec(r), 0);
		w[k] = zeros(200000);
		n = run_weights(r, w[k], 200000);
		run_free(r);
		ds_pair_free(&pair);
	}
	backend *be = open_be("ref", 1);
	model *m = gpt_on(be, "gpt:L1-H2-E16-T7", 1);
	ck_assert_uint_eq(n, m->n_params);
	int decayed = 0, kept = 0;
	for (int i = 0; i < m->n_nodes; i++) {
		const node *nd = &m->nodes[i];
		if (!nd->n_params)
			continue;
		int norm = !strcmp(nd->op->name, "layernorm");
		const float *a = w[0] + nd->p_off, *b = w[1] + nd->p_off;
		ck_assert_msg(!memcmp(a + nd->n_weights, b + nd->n_weights,
				      sizeof(float) * (nd->n_params - nd->n_weights)),
			      "node %d (%s): a bias decayed", i, nd->op->name);
		int same = !memcmp(a, b, sizeof(float) * nd->n_weights);
		ck_assert_msg(same == norm, "node %d (%s): weights %s", i, nd->op->name,
			      same ? "not decayed" : "decayed");
		decayed += !same;
		kept += same;
	}
	ck_assert_int_eq(decayed, 1 + 4 + 1); /* embed, 4 linears, the head */
	ck_assert_int_eq(kept, 3);            /* ln1, ln2, the final norm */
	model_free(m);
	backend_free(be);
	free(w[0]);
	free(w[1]);
}
END_TEST

/* a whole run (the server, 3 asgd workers on the virtual clock,
 * evaluations) on a text-shaped set: the held-out loss per position falls
 * and next-token accuracy rises; a model with one label a sample is
 * refused */
START_TEST(gpt_run_on_a_text_set)
{
	dataset_pair pair;
	run_config c;
	toy_run(&c, &pair, 1024, "cpu");
	c.workers = 3;
	c.batch = 16;
	c.lr = 0.2;
	c.eval_every = 300;
	c.stop_steps = 1500;
	rec ev = {0};
	run *r;
	char err[SL_ERR_LEN] = "";
	run_callbacks cb = {.eval = on_eval, .ud = &ev};
	ck_assert_msg(run_new(&c, &pair, NULL, 0, &cb, &r, err) == 0, "%s", err);
	ck_assert_int_eq(run_exec(r), 0);
	run_free(r);
	ck_assert_int_ge(ev.n, 3);
	const run_eval *a = &ev.ev[0], *z = &ev.ev[ev.n - 1];
	printf("gpt: a run of gpt:L1-H2-E16-T7, 3 asgd workers: held-out loss %.3f -> %.3f, "
	       "next-token accuracy %.3f -> %.3f (v %llu)\n", a->test_loss, z->test_loss,
	       a->test_acc, z->test_acc, (unsigned long long)z->v);
	ck_assert_msg(z->test_loss < 0.5 * log(TV) && z->test_acc > 0.6, "loss %g, accuracy %g",
		      z->test_loss, z->test_acc);
	ck_assert(z->test_loss < a->test_loss);
	for (int i = 0; i < ev.n; i++) /* a fraction of the positions */
		ck_assert(ev.ev[i].test_acc >= 0 && ev.ev[i].test_acc <= 1);
	/* one label a sample: refused by name */
	snprintf(c.model, sizeof(c.model), "mlp:7-16-5");
	ck_assert_int_eq(run_new(&c, &pair, NULL, 0, &cb, &r, err), -SL_EINVAL);
	ck_assert_msg(strstr(err, "mlp:7-16-5 predicts 1 label per sample but the train set's "
				  "samples carry 7"), "%s", err);
	ds_pair_free(&pair);
}
END_TEST

static Suite *
gpt_suite(void)
{
	Suite *s = suite_create("gpt");
	TCase *ops = tcase_create("ops");
	tcase_set_timeout(ops, 120);
	tcase_add_test(ops, embed_forward_and_gradients);
	/* an abort ends the case's own process: only when cases fork (not
	 * under make valgrind's CK_FORK=no) */
	const char *fork_mode = getenv("CK_FORK");
	if (!fork_mode || strcmp(fork_mode, "no"))
		tcase_add_loop_test_raise_signal(ops, embed_id_past_the_table_aborts, SIGABRT, 0,
						 2);
	tcase_add_test(ops, layernorm_forward_and_gradients);
	tcase_add_test(ops, gelu_forward_and_gradient);
	tcase_add_test(ops, attention_forward_and_gradients);
	tcase_add_test(ops, attention_is_causal);
	tcase_add_test(ops, ops_parity);
	suite_add_tcase(s, ops);
	TCase *mod = tcase_create("model");
	tcase_set_timeout(mod, 300);
	tcase_add_test(mod, gpt_sizes_and_init);
	tcase_add_test(mod, gpt_bad_specs_refused);
	tcase_add_test(mod, targets_per_sample);
	tcase_add_test(mod, gpt_step_gradient);
	tcase_add_test(mod, gpt_step_parity);
	tcase_add_test(mod, gpt_partial_depths);
	tcase_add_test(mod, gpt_as_a_graph);
	suite_add_tcase(s, mod);
	/* training: hundreds of steps (make valgrind leaves "slow" out; make
	 * test and make asan run them) */
	TCase *train = tcase_create("training");
	tcase_set_tags(train, "slow");
	tcase_set_timeout(train, 300);
	tcase_add_test(train, gpt_learns_toy_task);
	tcase_add_test(train, gpt_run_on_a_text_set);
	tcase_add_test(train, gpt_adamw_decays_matrices_not_gains);
	suite_add_tcase(s, train);
	return s;
}

SL_TEST_MAIN(gpt_suite)
