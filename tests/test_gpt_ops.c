/* test_gpt_ops.c - the transformer's ops (backend.h's sequence ops:
 * embed, layer norm, GELU, causal attention). The gpt:L-H-E-T model is
 * test_gpt.c.
 *
 * Every input and parameter gradient on ref against a fourth-order
 * central difference of L = sum w y (w fixed and random, so dy = w), on
 * odd shapes (T = 7, head width 5, E = 10, rows of 13: no multiple of a
 * vector); each forward against a plain double-precision transcription of
 * its formula here (the scale 1/sqrt(D), the causal mask, eps and the
 * biased variance, the tanh GELU); the mask by perturbing later positions;
 * the embedding's scatter-add with tokens repeated in the batch and with a
 * tied head's share added first. Parity: refdev gives ref's bits, cpu is
 * within a normalised error of ref (on the odd shapes and on the
 * configuration's own, T = 64, D = 32), and cpu gives the same bits on one
 * thread and two. */
#include <math.h>
#include <signal.h>

#include "backend.h"
#include "gpt_util.h"
#include "rng.h"
#include "sl.h"
#include "testutil.h"

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

static Suite *
gpt_ops_suite(void)
{
	Suite *s = suite_create("gpt_ops");
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
	return s;
}

SL_TEST_MAIN(gpt_ops_suite)
