/* test_parity.c - every backend op against the ref backend, in the manner
 * of ggml's test-backend-ops: the same inputs uploaded to both, the op run
 * on each, the outputs downloaded and compared by normalised error,
 * nmse = sum (a - r)^2 / sum r^2, after a NaN and infinity check. Bounds:
 * 1e-7 for elementwise and update ops, 1e-10 for batch normalization (its
 * statistics are double sums), 5e-4 for GEMM, dense layers and
 * convolutions (ggml's test_mul_mat figure), 0 for ops that give ref's
 * bits everywhere (pooling, the shortcut, layouts). Shapes: the MLP's and
 * LeNet-5's, and odd ones (sizes that are no multiple of a vector or a
 * block, strides and padding).
 *
 * The pairs: refdev against ref must be exact (the same arithmetic behind
 * device-style memory: this pins the harness and the upload and download
 * paths); cpu against ref within the bounds; cuda against ref within the
 * bounds where a GPU is here, else the case says it was skipped and why.
 * The sequence ops (the transformer's) on odd shapes (T 7, head width 5,
 * a token repeated in the batch, the embedding's backward added onto the
 * tied head's share) and the GPT's own: 0 for the embedding's forward
 * (float adds), EW for its backward, layer norm and GELU, MM for
 * attention and the projections. Whole runs on each backend are in
 * test_parity_runs.c. */
#include <math.h>

#include "backend.h"
#include "model.h"
#include "rng.h"
#include "rule.h"
#include "parity_util.h"
#include "run_util.h"

#define EW 1e-7   /* elementwise and update ops */
#define MM 5e-4   /* gemm, dense, convolution */
#define BN 1e-10  /* batch normalization: double statistics (cpu: 4e-15) */

typedef struct pair {
	backend *d, *r; /* the backend under test, ref */
	int exact;      /* refdev: the same bits */
	rng g;
} pair;


static int
pair_open(pair *p, const char *dev, uint64_t seed)
{
	char why[SL_ERR_LEN];
	memset(p, 0, sizeof(*p));
	rng_seed(&p->g, seed, 5);
	p->exact = !strcmp(dev, "refdev");
	if (!strcmp(dev, "cuda")) {
		if (!(p->d = open_cuda(why))) {
			printf("parity: cuda skipped: %s\n", why);
			return 0;
		}
	} else {
		ck_assert_msg(backend_open(dev, 2, &p->d, why) == 0, "%s", why);
	}
	ck_assert(backend_open("ref", 1, &p->r, why) == 0);
	return 1;
}

static void
pair_close(pair *p)
{
	backend_free(p->d);
	backend_free(p->r);
}

static float *
rnd(pair *p, size_t n)
{
	float *v = malloc(sizeof(float) * (n ? n : 1));
	ck_assert_ptr_nonnull(v);
	for (size_t i = 0; i < n; i++)
		v[i] = (float)(2.0 * rng_uniform(&p->g) - 1.0);
	return v;
}

/* a host array in backend memory */
static void *
put(backend *be, const void *h, size_t bytes)
{
	void *d = be->ops->alloc(be, bytes ? bytes : 4);
	ck_assert_ptr_nonnull(d);
	if (h && bytes)
		be->ops->upload(be, d, h, bytes);
	return d;
}


static void
cmp(pair *p, const char *what, const float *dd, const float *rd, size_t n, double bound)
{
	float *a = get(p->d, dd, n), *r = get(p->r, rd, n);
	if (p->exact) {
		ck_assert_msg(!memcmp(a, r, sizeof(float) * n), "%s: %s differs from ref",
			      what, backend_name(p->d));
	} else {
		double num = 0.0, den = 0.0;
		for (size_t i = 0; i < n; i++) {
			ck_assert_msg(isfinite(a[i]) == isfinite(r[i]),
				      "%s[%zu]: %s %g, ref %g", what, i, backend_name(p->d),
				      (double)a[i], (double)r[i]);
			if (!isfinite(r[i]))
				continue;
			double e = (double)a[i] - r[i];
			num += e * e;
			den += (double)r[i] * r[i];
		}
		double nmse = den > 0 ? num / den : num;
		ck_assert_msg(nmse <= bound, "%s: nmse %.3g > %.1g (%s against ref)", what, nmse,
			      bound, backend_name(p->d));
	}
	free(a);
	free(r);
}

/* the same host input in both backends */
typedef struct both {
	float *d, *r;
} both;

static both
in2(pair *p, const float *h, size_t n)
{
	return (both){put(p->d, h, sizeof(float) * n), put(p->r, h, sizeof(float) * n)};
}

static both
rnd2(pair *p, size_t n)
{
	float *h = rnd(p, n);
	both b = in2(p, h, n);
	free(h);
	return b;
}

static void
free2(pair *p, both *b)
{
	p->d->ops->free(p->d, b->d);
	p->r->ops->free(p->r, b->r);
}

/* ---- the ops ------------------------------------------------------------ */

static void
gemms(pair *p)
{
	const int shapes[][3] = {{64, 256, 784}, {7, 13, 5}, {33, 1, 17}, {1, 40, 3}};
	for (int s = 0; s < 4; s++)
		for (int t = 0; t < 4; t++) {
			const int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
			const int ta = t & 1, tb = t >> 1;
			both a = rnd2(p, (size_t)m * k), b = rnd2(p, (size_t)k * n);
			both c = rnd2(p, (size_t)m * n);
			const float alpha = s & 1 ? 0.5f : 1.0f, beta = t == 3 ? 0.75f : 0.0f;
			p->d->ops->gemm(p->d, ta, tb, m, n, k, alpha, a.d, ta ? m : k, b.d,
					tb ? k : n, beta, c.d, n);
			p->r->ops->gemm(p->r, ta, tb, m, n, k, alpha, a.r, ta ? m : k, b.r,
					tb ? k : n, beta, c.r, n);
			char what[64];
			snprintf(what, sizeof(what), "gemm %dx%dx%d ta %d tb %d", m, n, k, ta, tb);
			cmp(p, what, c.d, c.r, (size_t)m * n, MM);
			free2(p, &a);
			free2(p, &b);
			free2(p, &c);
		}
}

static void
dense(pair *p)
{
	const int shapes[][4] = {{64, 784, 256, 1}, {5, 7, 3, 0}, {64, 84, 10, 0}, {3, 33, 17, 1}};
	for (int s = 0; s < 4; s++) {
		const int B = shapes[s][0], in = shapes[s][1], out = shapes[s][2], relu = shapes[s][3];
		both x = rnd2(p, (size_t)B * in), w = rnd2(p, (size_t)out * in), b = rnd2(p, out);
		both y = rnd2(p, (size_t)B * out), dy = rnd2(p, (size_t)B * out);
		both dx = rnd2(p, (size_t)B * in), dw = rnd2(p, (size_t)out * in), db = rnd2(p, out);
		p->d->ops->linear_fwd(p->d, x.d, w.d, b.d, y.d, B, in, out, relu);
		p->r->ops->linear_fwd(p->r, x.r, w.r, b.r, y.r, B, in, out, relu);
		cmp(p, "linear_fwd", y.d, y.r, (size_t)B * out, MM);
		p->d->ops->linear_bwd(p->d, x.d, w.d, y.d, dy.d, dx.d, dw.d, db.d, B, in, out, relu);
		p->r->ops->linear_bwd(p->r, x.r, w.r, y.r, dy.r, dx.r, dw.r, db.r, B, in, out, relu);
		cmp(p, "linear_bwd dy (masked)", dy.d, dy.r, (size_t)B * out, EW);
		cmp(p, "linear_bwd dw", dw.d, dw.r, (size_t)out * in, MM);
		cmp(p, "linear_bwd db", db.d, db.r, out, MM);
		cmp(p, "linear_bwd dx", dx.d, dx.r, (size_t)B * in, MM);
		both *all[] = {&x, &w, &b, &y, &dy, &dx, &dw, &db};
		for (int i = 0; i < 8; i++)
			free2(p, all[i]);
	}
}

static conv_geom
geom(int cin, int h, int w, int cout, int k, int stride, int pad)
{
	conv_geom g = {cin, h, w, cout, k, stride, pad, 0, 0};
	g.ho = conv_out_dim(h, k, stride, pad);
	g.wo = conv_out_dim(w, k, stride, pad);
	return g;
}

static void
convs(pair *p)
{
	const conv_geom gs[] = {geom(1, 28, 28, 6, 5, 1, 2), geom(6, 14, 14, 16, 5, 1, 0),
				geom(3, 9, 7, 4, 3, 2, 1), geom(2, 5, 6, 3, 3, 1, 4),
				geom(16, 28, 28, 32, 3, 2, 1),
				/* the input gradient by phases: even k, a stride of k,
				 * of 3 with a pad of 2, with no pad */
				geom(2, 8, 9, 3, 4, 2, 1), geom(2, 9, 9, 3, 3, 3, 0),
				geom(3, 11, 10, 5, 5, 3, 2), geom(2, 7, 7, 2, 2, 2, 0),
				/* 3x3, stride 1, pad 1: read unpadded (a residual
				 * net's first stage; odd sizes; one row; columns
				 * that make one block, read padded) */
				geom(16, 32, 32, 16, 3, 1, 1), geom(5, 7, 9, 6, 3, 1, 1),
				geom(3, 1, 6, 2, 3, 1, 1), geom(2, 5, 3, 3, 3, 1, 1),
				/* the same with 8 channels or more: by Winograd
				 * (odd sizes and channel counts, one row, one
				 * column, the third stage's 7x7) */
				geom(9, 7, 9, 13, 3, 1, 1), geom(8, 1, 5, 8, 3, 1, 1),
				geom(12, 6, 1, 10, 3, 1, 1), geom(64, 7, 7, 64, 3, 1, 1)};
	/* batches: the AVX-512, SSE and scalar kernels; then, for the
	 * Winograd shapes, a batch of vectors that overlap and one that the
	 * kernel splits into groups of vectors */
	const int batches[] = {64, 5, 3, 40, 100};
	const int ns = (int)(sizeof(gs) / sizeof(gs[0]));
	for (int s = 0; s < ns; s++)
		for (int bi = 0; bi < (s >= ns - 4 ? 5 : 3); bi++) {
			const conv_geom *g = &gs[s];
			const int B = batches[bi];
			const size_t nx = (size_t)g->cin * g->h * g->w * B;
			const size_t ny = (size_t)g->cout * g->ho * g->wo * B;
			const size_t nw = (size_t)g->cout * g->cin * g->k * g->k;
			both x = rnd2(p, nx), w = rnd2(p, nw), b = rnd2(p, g->cout), y = rnd2(p, ny);
			both dy = rnd2(p, ny), dx = rnd2(p, nx), dw = rnd2(p, nw), db = rnd2(p, g->cout);
			const int relu = s != 3;
			p->d->ops->conv_fwd(p->d, g, x.d, w.d, b.d, y.d, B, relu);
			p->r->ops->conv_fwd(p->r, g, x.r, w.r, b.r, y.r, B, relu);
			char what[64];
			snprintf(what, sizeof(what), "conv %d fwd, batch %d", s, B);
			cmp(p, what, y.d, y.r, ny, MM);
			p->d->ops->conv_bwd(p->d, g, x.d, w.d, y.d, dy.d, dx.d, dw.d, db.d, B, relu);
			p->r->ops->conv_bwd(p->r, g, x.r, w.r, y.r, dy.r, dx.r, dw.r, db.r, B, relu);
			snprintf(what, sizeof(what), "conv %d dw, batch %d", s, B);
			cmp(p, what, dw.d, dw.r, nw, MM);
			snprintf(what, sizeof(what), "conv %d db, batch %d", s, B);
			cmp(p, what, db.d, db.r, g->cout, MM);
			snprintf(what, sizeof(what), "conv %d dx, batch %d", s, B);
			cmp(p, what, dx.d, dx.r, nx, MM);
			both *all[] = {&x, &w, &b, &y, &dy, &dx, &dw, &db};
			for (int i = 0; i < 8; i++)
				free2(p, all[i]);
		}
}

static void
pools(pair *p)
{
	/* LeNet's two, an overlapping window with padding, one past the edge */
	const conv_geom gs[] = {geom(6, 28, 28, 0, 2, 2, 0), geom(16, 10, 10, 0, 2, 2, 0),
				geom(3, 7, 9, 0, 3, 2, 1), geom(2, 5, 5, 0, 2, 3, 1)};
	for (int s = 0; s < 4; s++) {
		const conv_geom *g = &gs[s];
		const int B = s & 1 ? 5 : 64;
		const size_t nx = (size_t)g->cin * g->h * g->w * B, ny = (size_t)g->cin * g->ho * g->wo * B;
		float *hx = rnd(p, nx);
		for (size_t i = 0; i < nx; i += 7)
			hx[i] = hx[i / 2]; /* ties */
		both x = in2(p, hx, nx), y = rnd2(p, ny), dy = rnd2(p, ny), dx = rnd2(p, nx);
		int32_t *ad = put(p->d, NULL, sizeof(int32_t) * ny), *ar = put(p->r, NULL, sizeof(int32_t) * ny);
		p->d->ops->maxpool_fwd(p->d, g, x.d, y.d, ad, B);
		p->r->ops->maxpool_fwd(p->r, g, x.r, y.r, ar, B);
		cmp(p, "maxpool_fwd", y.d, y.r, ny, 0);
		int32_t *ha = malloc(sizeof(int32_t) * ny), *hr = malloc(sizeof(int32_t) * ny);
		p->d->ops->download(p->d, ha, ad, sizeof(int32_t) * ny);
		p->r->ops->download(p->r, hr, ar, sizeof(int32_t) * ny);
		ck_assert_msg(!memcmp(ha, hr, sizeof(int32_t) * ny), "maxpool %d: argmax differs", s);
		p->d->ops->maxpool_bwd(p->d, g, dy.d, ad, dx.d, B);
		p->r->ops->maxpool_bwd(p->r, g, dy.r, ar, dx.r, B);
		cmp(p, "maxpool_bwd", dx.d, dx.r, nx, EW);
		free(ha);
		free(hr);
		free(hx);
		p->d->ops->free(p->d, ad);
		p->r->ops->free(p->r, ar);
		both *all[] = {&x, &y, &dy, &dx};
		for (int i = 0; i < 4; i++)
			free2(p, all[i]);
	}
}

static void
elementwise(pair *p)
{
	const size_t sizes[] = {235146, 37, 1};
	for (int s = 0; s < 3; s++) {
		const size_t n = sizes[s];
		both x = rnd2(p, n), y = rnd2(p, n), dx = rnd2(p, n), w = rnd2(p, n);
		both m = rnd2(p, n), ms = rnd2(p, n), out = rnd2(p, n);
		p->d->ops->relu_fwd(p->d, x.d, y.d, n);
		p->r->ops->relu_fwd(p->r, x.r, y.r, n);
		cmp(p, "relu_fwd", y.d, y.r, n, 0);
		p->d->ops->relu_bwd(p->d, y.d, x.d, dx.d, n);
		p->r->ops->relu_bwd(p->r, y.r, x.r, dx.r, n);
		cmp(p, "relu_bwd", dx.d, dx.r, n, 0);
		/* mean squares must be positive */
		float *hms = rnd(p, n);
		for (size_t i = 0; i < n; i++)
			hms[i] = fabsf(hms[i]) + 0.01f;
		free2(p, &ms);
		ms = in2(p, hms, n);
		free(hms);
		for (int v = 0; v < 4; v++) {
			float mu = v & 1 ? 0.9f : 0.0f, wd = v & 2 ? 1e-3f : 0.0f;
			p->d->ops->sgd(p->d, w.d, x.d, v & 1 ? m.d : NULL, n, 0.05f, mu, wd);
			p->r->ops->sgd(p->r, w.r, x.r, v & 1 ? m.r : NULL, n, 0.05f, mu, wd);
			cmp(p, "sgd w", w.d, w.r, n, EW);
			cmp(p, "sgd m", m.d, m.r, n, EW);
		}
		for (int v = 0; v < 2; v++) {
			p->d->ops->dc_grad(p->d, n, x.d, w.d, y.d, v ? ms.d : NULL, 0.5f, 0.95f, 1e-7f, out.d);
			p->r->ops->dc_grad(p->r, n, x.r, w.r, y.r, v ? ms.r : NULL, 0.5f, 0.95f, 1e-7f, out.r);
			cmp(p, "dc_grad", out.d, out.r, n, EW);
			cmp(p, "dc_grad ms", ms.d, ms.r, n, EW);
		}
		/* the optimiser: nesterov, then adam (v: positive second moments) */
		opt_step ns = {.lr = 0.05f, .mu = 0.9f, .wd = 1e-3f, .shrink = 1};
		p->d->ops->opt_step(p->d, w.d, x.d, m.d, NULL, n, &ns);
		p->r->ops->opt_step(p->r, w.r, x.r, m.r, NULL, n, &ns);
		cmp(p, "opt_step nesterov w", w.d, w.r, n, EW);
		cmp(p, "opt_step nesterov m", m.d, m.r, n, EW);
		for (int v = 0; v < 2; v++) {
			opt_step as = {.adam = 1, .b1 = 0.9f, .b2 = 0.999f, .c1 = 0.1f, .c2 = 0.001f,
				       .eps = 1e-8f, .step_size = 0.01f / 0.19f,
				       .bc2_sqrt = 0.04471018f, .wd = v ? 0 : 1e-2f,
				       .shrink = v ? 0.999f : 1};
			p->d->ops->opt_step(p->d, w.d, x.d, m.d, ms.d, n, &as);
			p->r->ops->opt_step(p->r, w.r, x.r, m.r, ms.r, n, &as);
			cmp(p, v ? "opt_step adamw w" : "opt_step adam w", w.d, w.r, n, EW);
			cmp(p, "opt_step adam m", m.d, m.r, n, EW);
			cmp(p, "opt_step adam v", ms.d, ms.r, n, EW);
		}
		/* clipping's sum of squares: exact on refdev, to double rounding
		 * in another order elsewhere */
		double sd = p->d->ops->sumsq(p->d, x.d, n), sr = p->r->ops->sumsq(p->r, x.r, n);
		if (p->exact)
			ck_assert_msg(sd == sr, "sumsq %.17g, ref %.17g", sd, sr);
		else
			ck_assert_msg(fabs(sd - sr) <= 1e-12 * sr + 1e-300, "sumsq %.17g, ref %.17g", sd, sr);
		p->d->ops->axpy(p->d, n, -0.3f, x.d, w.d);
		p->r->ops->axpy(p->r, n, -0.3f, x.r, w.r);
		cmp(p, "axpy", w.d, w.r, n, EW);
		p->d->ops->scal(p->d, n, 1.0f / 3.0f, w.d);
		p->r->ops->scal(p->r, n, 1.0f / 3.0f, w.r);
		cmp(p, "scal", w.d, w.r, n, EW);
		both *all[] = {&x, &y, &dx, &w, &m, &ms, &out};
		for (int i = 0; i < 7; i++)
			free2(p, all[i]);
	}
}

/* a residual block's end the unfused way (ref's, and any backend without
 * residual_fwd/bwd): copy, shortcut_fwd, relu_fwd; relu_bwd, copy,
 * shortcut_bwd */
static void
res_unfused(backend *be, const float *a, const float *x, float *y, float *dy, float *da,
	    float *dx, const int *g, int relu)
{
	const int cin = g[0], cout = g[1], h = g[2], w = g[3], st = g[4], B = g[5];
	const size_t ny = (size_t)cout * shortcut_out_dim(h, st) * shortcut_out_dim(w, st) * B;
	be->ops->copy(be, y, a, sizeof(float) * ny);
	be->ops->shortcut_fwd(be, x, y, cin, h, w, cout, st, B, 1);
	if (relu) {
		be->ops->relu_fwd(be, y, y, ny);
		be->ops->relu_bwd(be, y, dy, dy, ny);
	}
	if (da)
		be->ops->copy(be, da, dy, sizeof(float) * ny);
	if (dx)
		be->ops->shortcut_bwd(be, dy, dx, cin, h, w, cout, st, B, 0);
}

/* the fused residual ops where a backend has them: ref's bits exactly */
static void
residual_ops(pair *p, const int (*sc)[6], int n)
{
	if (!p->d->ops->residual_fwd)
		return;
	for (int s = 0; s < n; s++)
		for (int v = 0; v < 3; v++) { /* relu; no relu; relu with no dx */
			const int *g = sc[s], relu = v != 1;
			const int cin = g[0], cout = g[1], h = g[2], w = g[3], st = g[4], B = g[5];
			const size_t nx = (size_t)cin * h * w * B,
				     ny = (size_t)cout * shortcut_out_dim(h, st) * shortcut_out_dim(w, st) * B;
			both a = rnd2(p, ny), x = rnd2(p, nx), y = rnd2(p, ny), dy = rnd2(p, ny);
			both da = rnd2(p, ny), dx = rnd2(p, nx);
			p->d->ops->residual_fwd(p->d, a.d, x.d, y.d, cin, h, w, cout, st, B, relu);
			p->d->ops->residual_bwd(p->d, y.d, dy.d, da.d, v == 2 ? NULL : dx.d, cin, h, w,
						cout, st, B, relu);
			res_unfused(p->r, a.r, x.r, y.r, dy.r, da.r, v == 2 ? NULL : dx.r, g, relu);
			cmp(p, "residual_fwd", y.d, y.r, ny, 0);
			cmp(p, "residual_bwd da", da.d, da.r, ny, 0);
			if (v != 2)
				cmp(p, "residual_bwd dx", dx.d, dx.r, nx, 0);
			both *all[] = {&a, &x, &y, &dy, &da, &dx};
			for (int i = 0; i < 6; i++)
				free2(p, all[i]);
		}
}

/* ResNet's ops: batch normalization (training and eval, with and without
 * its relu), global average pooling and the option-A shortcut, on the
 * first stage's shape (16 x 32 x 32), the last's (64 x 8 x 8) and odd
 * ones. Pooling and the shortcut are ref's bits on every backend. */
static void
resnet_ops(pair *p)
{
	/* C H W B; the last shape's channels lie far from zero (a mean 10^6
	 * times their spread), where a variance from raw sums of squares
	 * would cancel */
	const int shapes[][4] = {{16, 32, 32, 16}, {64, 8, 8, 5}, {3, 5, 7, 3}, {8, 6, 6, 7}};
	for (int s = 0; s < 4; s++)
		for (int v = 0; v < 4; v++) {
			const int C = shapes[s][0], P = shapes[s][1] * shapes[s][2], B = shapes[s][3];
			const int training = v & 1, relu = v >> 1;
			const size_t n = (size_t)C * P * B;
			float *hx = rnd(p, n), *hv = rnd(p, C);
			for (size_t i = 0; i < n; i++)
				hx[i] = s == 3 ? 10000.0f + 0.01f * hx[i]
					       : 2.0f * hx[i] + 0.5f; /* not centred, not unit */
			for (int c = 0; c < C; c++)
				hv[c] = fabsf(hv[c]) + 0.1f;
			both x = in2(p, hx, n), rv = in2(p, hv, C), gamma = rnd2(p, C),
			     beta = rnd2(p, C), rm = rnd2(p, C), y = rnd2(p, n), mean = rnd2(p, C),
			     invstd = rnd2(p, C), dy = rnd2(p, n), dx = rnd2(p, n), dg = rnd2(p, C),
			     db = rnd2(p, C);
			p->d->ops->bn_fwd(p->d, x.d, gamma.d, beta.d, y.d, mean.d, invstd.d, rm.d, rv.d,
					  C, P, B, training, 0.1f, 1e-5f, relu);
			p->r->ops->bn_fwd(p->r, x.r, gamma.r, beta.r, y.r, mean.r, invstd.r, rm.r, rv.r,
					  C, P, B, training, 0.1f, 1e-5f, relu);
			char what[96];
#define BN_CMP(name, buf, len)                                                              \
	do {                                                                               \
		snprintf(what, sizeof(what), "bn %d %s relu %d: %s", s,                    \
			 training ? "training" : "eval", relu, name);                      \
		cmp(p, what, buf.d, buf.r, len, BN);                                       \
	} while (0)
			BN_CMP("y", y, n);
			BN_CMP("mean", mean, C);
			BN_CMP("invstd", invstd, C);
			BN_CMP("run_mean", rm, C);
			BN_CMP("run_var", rv, C);
			p->d->ops->bn_bwd(p->d, x.d, gamma.d, mean.d, invstd.d, y.d, dy.d, dx.d, dg.d,
					  db.d, C, P, B, training, relu);
			p->r->ops->bn_bwd(p->r, x.r, gamma.r, mean.r, invstd.r, y.r, dy.r, dx.r, dg.r,
					  db.r, C, P, B, training, relu);
			BN_CMP("dy (masked)", dy, n);
			BN_CMP("dx", dx, n);
			BN_CMP("dgamma", dg, C);
			BN_CMP("dbeta", db, C);
#undef BN_CMP
			both *all[] = {&x, &rv, &gamma, &beta, &rm, &y, &mean, &invstd, &dy, &dx, &dg, &db};
			for (int i = 0; i < 12; i++)
				free2(p, all[i]);
			free(hx);
			free(hv);
		}
	for (int s = 0; s < 3; s++) {
		const int C = shapes[s][0], P = shapes[s][1] * shapes[s][2], B = shapes[s][3];
		const size_t n = (size_t)C * P * B;
		both x = rnd2(p, n), y = rnd2(p, (size_t)B * C), dx = rnd2(p, n);
		p->d->ops->avgpool_fwd(p->d, x.d, y.d, C, P, B);
		p->r->ops->avgpool_fwd(p->r, x.r, y.r, C, P, B);
		cmp(p, "avgpool_fwd", y.d, y.r, (size_t)B * C, 0);
		p->d->ops->avgpool_bwd(p->d, y.d, dx.d, C, P, B);
		p->r->ops->avgpool_bwd(p->r, y.r, dx.r, C, P, B);
		cmp(p, "avgpool_bwd", dx.d, dx.r, n, 0);
		free2(p, &x);
		free2(p, &y);
		free2(p, &dx);
	}
	/* cin cout h w stride batch: stage 1 -> 2, odd, an odd pad split, identity */
	const int sc[][6] = {{16, 32, 32, 32, 2, 16}, {3, 7, 5, 7, 2, 3}, {3, 6, 5, 7, 2, 3},
			     {16, 16, 8, 8, 1, 5}};
	for (int s = 0; s < 4; s++)
		for (int acc = 0; acc < 2; acc++) {
			const int cin = sc[s][0], cout = sc[s][1], h = sc[s][2], w = sc[s][3];
			const int st = sc[s][4], B = sc[s][5];
			const size_t nx = (size_t)cin * h * w * B,
				     ny = (size_t)cout * shortcut_out_dim(h, st) * shortcut_out_dim(w, st) * B;
			both x = rnd2(p, nx), y = rnd2(p, ny), dx = rnd2(p, nx);
			p->d->ops->shortcut_fwd(p->d, x.d, y.d, cin, h, w, cout, st, B, acc);
			p->r->ops->shortcut_fwd(p->r, x.r, y.r, cin, h, w, cout, st, B, acc);
			cmp(p, acc ? "shortcut_fwd acc" : "shortcut_fwd", y.d, y.r, ny, 0);
			p->d->ops->shortcut_bwd(p->d, y.d, dx.d, cin, h, w, cout, st, B, acc);
			p->r->ops->shortcut_bwd(p->r, y.r, dx.r, cin, h, w, cout, st, B, acc);
			cmp(p, acc ? "shortcut_bwd acc" : "shortcut_bwd", dx.d, dx.r, nx, 0);
			free2(p, &x);
			free2(p, &y);
			free2(p, &dx);
		}
	residual_ops(p, sc, 4);
}

static void
layouts_and_loss(pair *p)
{
	const int cbp[][3] = {{16, 64, 25}, {3, 5, 7}};
	for (int s = 0; s < 2; s++) {
		const int c = cbp[s][0], b = cbp[s][1], q = cbp[s][2];
		const size_t n = (size_t)c * b * q;
		both x = rnd2(p, n), y = rnd2(p, n), z = rnd2(p, n);
		p->d->ops->cpb_to_bcp(p->d, x.d, y.d, c, b, q);
		p->r->ops->cpb_to_bcp(p->r, x.r, y.r, c, b, q);
		cmp(p, "cpb_to_bcp", y.d, y.r, n, 0);
		p->d->ops->bcp_to_cpb(p->d, y.d, z.d, c, b, q);
		p->r->ops->bcp_to_cpb(p->r, y.r, z.r, c, b, q);
		cmp(p, "bcp_to_cpb", z.d, z.r, n, 0);
		cmp(p, "the flatten's round trip", z.d, x.r, n, 0);
		free2(p, &x);
		free2(p, &y);
		free2(p, &z);
	}
	const int bk[][2] = {{64, 10}, {5, 3}, {500, 10}};
	for (int s = 0; s < 3; s++) {
		const int B = bk[s][0], K = bk[s][1];
		float *hz = rnd(p, (size_t)B * K);
		for (int i = 0; i < B * K; i++)
			hz[i] *= 4.0f;
		uint8_t *lab = malloc((size_t)B);
		for (int i = 0; i < B; i++)
			lab[i] = (uint8_t)rng_below(&p->g, (uint64_t)K);
		both z = in2(p, hz, (size_t)B * K), d = rnd2(p, (size_t)B * K);
		int cd = -1, cr = -2;
		double ld = p->d->ops->softmax_xent(p->d, z.d, lab, d.d, B, K, &cd);
		double lr = p->r->ops->softmax_xent(p->r, z.r, lab, d.r, B, K, &cr);
		ck_assert_int_eq(cd, cr);
		ck_assert_msg(p->exact ? ld == lr : fabs(ld - lr) <= 1e-6 * fabs(lr),
			      "softmax_xent loss %.17g, ref %.17g", ld, lr);
		cmp(p, "softmax_xent dlogits", d.d, d.r, (size_t)B * K, EW);
		free(hz);
		free(lab);
		free2(p, &z);
		free2(p, &d);
	}
}

static void
finite_checks(pair *p)
{
	const size_t n = 100003;
	float *h = rnd(p, n);
	float *dd = put(p->d, h, sizeof(float) * n);
	ck_assert(p->d->ops->all_finite(p->d, dd, n));
	const size_t at[] = {0, 15, 16, 50001, n - 1};
	const float bad[] = {NAN, INFINITY, -INFINITY};
	for (int i = 0; i < 5; i++)
		for (int k = 0; k < 3; k++) {
			p->d->ops->upload(p->d, dd + at[i], &bad[k], sizeof(float));
			ck_assert_msg(!p->d->ops->all_finite(p->d, dd, n), "%g at %zu missed",
				      (double)bad[k], at[i]);
			ck_assert(p->d->ops->all_finite(p->d, dd, at[i]));
			p->d->ops->upload(p->d, dd + at[i], &h[at[i]], sizeof(float));
		}
	ck_assert(p->d->ops->all_finite(p->d, dd, 0));
	p->d->ops->free(p->d, dd);
	free(h);
}

/* ---- the sequence ops (the transformer) ----------------------------------- */

/* B T token ids below v, some repeated within and across samples */
static float *
token_ids(pair *p, int n, int v)
{
	float *ids = malloc(sizeof(float) * (size_t)n);
	ck_assert_ptr_nonnull(ids);
	for (int i = 0; i < n; i++)
		ids[i] = (float)rng_below(&p->g, (uint64_t)v);
	for (int i = 3; i < n; i += 5)
		ids[i] = ids[1]; /* one token at many positions */
	return ids;
}

/* the embedding: odd shapes (T 7, width 5), then the GPT's; the backward
 * written and added onto the tied head's share (acc) */
static void
seq_embed(pair *p)
{
	const int shapes[][4] = {{3, 7, 5, 11}, {12, 64, 128, 65}, {1, 1, 3, 2}}; /* B T E V */
	for (int s = 0; s < 3; s++)
		for (int acc = 0; acc < 2; acc++) {
			const int B = shapes[s][0], T = shapes[s][1], E = shapes[s][2], V = shapes[s][3];
			const size_t rows = (size_t)B * T;
			float *hid = token_ids(p, (int)rows, V);
			both ids = in2(p, hid, rows), wte = rnd2(p, (size_t)V * E),
			     wpe = rnd2(p, (size_t)T * E), y = rnd2(p, rows * E), dy = rnd2(p, rows * E),
			     dwte = rnd2(p, (size_t)V * E), dwpe = rnd2(p, (size_t)T * E);
			p->d->ops->embed_fwd(p->d, ids.d, wte.d, wpe.d, y.d, B, T, E, V);
			p->r->ops->embed_fwd(p->r, ids.r, wte.r, wpe.r, y.r, B, T, E, V);
			char what[96];
			snprintf(what, sizeof(what), "embed_fwd %dx%dx%d", B, T, E);
			cmp(p, what, y.d, y.r, rows * E, 0); /* float adds: ref's bits */
			p->d->ops->embed_bwd(p->d, ids.d, dy.d, dwte.d, dwpe.d, B, T, E, V, acc);
			p->r->ops->embed_bwd(p->r, ids.r, dy.r, dwte.r, dwpe.r, B, T, E, V, acc);
			snprintf(what, sizeof(what), "embed_bwd %dx%dx%d acc %d: dwte", B, T, E, acc);
			cmp(p, what, dwte.d, dwte.r, (size_t)V * E, EW);
			snprintf(what, sizeof(what), "embed_bwd %dx%dx%d acc %d: dwpe", B, T, E, acc);
			cmp(p, what, dwpe.d, dwpe.r, (size_t)T * E, EW);
			both *all[] = {&ids, &wte, &wpe, &y, &dy, &dwte, &dwpe};
			for (int i = 0; i < 7; i++)
				free2(p, all[i]);
			free(hid);
		}
}

/* layer norm: rows of 5 (fewer than a warp), the GPT's 128, and 1000 (a
 * warp's many passes, a partial last one), rows past one block of the
 * column sums; the backward with and without dx */
static void
seq_layernorm(pair *p)
{
	const int shapes[][2] = {{21, 5}, {768, 128}, {7, 1000}, {300, 33}}; /* rows n */
	for (int s = 0; s < 4; s++) {
		const int R = shapes[s][0], n = shapes[s][1];
		const size_t len = (size_t)R * n;
		float *hx = rnd(p, len);
		for (size_t i = 0; i < len; i++)
			hx[i] = 3.0f * hx[i] + 0.7f; /* not centred, not unit */
		both x = in2(p, hx, len), g = rnd2(p, n), b = rnd2(p, n), y = rnd2(p, len),
		     mean = rnd2(p, R), rstd = rnd2(p, R), dy = rnd2(p, len), dx = rnd2(p, len),
		     dg = rnd2(p, n), db = rnd2(p, n);
		p->d->ops->layernorm_fwd(p->d, x.d, g.d, b.d, y.d, mean.d, rstd.d, R, n, 1e-5f);
		p->r->ops->layernorm_fwd(p->r, x.r, g.r, b.r, y.r, mean.r, rstd.r, R, n, 1e-5f);
		char what[96];
#define LN_CMP(name, buf, cnt)                                                    \
	do {                                                                     \
		snprintf(what, sizeof(what), "layernorm %dx%d: %s", R, n, name); \
		cmp(p, what, buf.d, buf.r, cnt, EW);                             \
	} while (0)
		LN_CMP("y", y, len);
		LN_CMP("mean", mean, R);
		LN_CMP("rstd", rstd, R);
		for (int with_dx = 0; with_dx < 2; with_dx++) {
			p->d->ops->layernorm_bwd(p->d, x.d, g.d, mean.d, rstd.d, dy.d,
						 with_dx ? dx.d : NULL, dg.d, db.d, R, n);
			p->r->ops->layernorm_bwd(p->r, x.r, g.r, mean.r, rstd.r, dy.r,
						 with_dx ? dx.r : NULL, dg.r, db.r, R, n);
			LN_CMP("dg", dg, n);
			LN_CMP("db", db, n);
		}
		LN_CMP("dx", dx, len);
#undef LN_CMP
		both *all[] = {&x, &g, &b, &y, &mean, &rstd, &dy, &dx, &dg, &db};
		for (int i = 0; i < 10; i++)
			free2(p, all[i]);
		free(hx);
	}
}

/* GELU over [-8, 8], its tails and zero */
static void
seq_gelu(pair *p)
{
	const size_t n = 100003;
	float *hx = rnd(p, n);
	const float tails[] = {-30.0f, -9.5f, 0.0f, -0.0f, 1e-4f, -1e-4f, 9.5f, 30.0f};
	for (size_t i = 0; i < n; i++)
		hx[i] = i < 8 ? tails[i] : 8.0f * hx[i];
	both x = in2(p, hx, n), y = rnd2(p, n), dy = rnd2(p, n), dx = rnd2(p, n);
	p->d->ops->gelu_fwd(p->d, x.d, y.d, n);
	p->r->ops->gelu_fwd(p->r, x.r, y.r, n);
	cmp(p, "gelu_fwd", y.d, y.r, n, EW);
	p->d->ops->gelu_bwd(p->d, x.d, dy.d, dx.d, n);
	p->r->ops->gelu_bwd(p->r, x.r, dy.r, dx.r, n);
	cmp(p, "gelu_bwd", dx.d, dx.r, n, EW);
	both *all[] = {&x, &y, &dy, &dx};
	for (int i = 0; i < 4; i++)
		free2(p, all[i]);
	free(hx);
}

/* causal attention: odd shapes (T 7, head width 5), T 1, more positions
 * than a warp's lanes, the GPT's (T 64, 4 heads of 32) */
static void
seq_attention(pair *p)
{
	const int shapes[][4] = {{3, 7, 2, 5}, {1, 1, 1, 3}, {2, 37, 3, 8}, {2, 64, 4, 32}};
	for (int s = 0; s < 4; s++) {
		const int B = shapes[s][0], T = shapes[s][1], H = shapes[s][2], D = shapes[s][3];
		const size_t nq = (size_t)B * T * 3 * H * D, ny = (size_t)B * T * H * D,
			     na = (size_t)B * H * T * T;
		float *hq = rnd(p, nq);
		for (size_t i = 0; i < nq; i++)
			hq[i] *= 2.0f; /* scores of a few units: a softmax far from uniform */
		both qkv = in2(p, hq, nq), y = rnd2(p, ny), att = rnd2(p, na), dy = rnd2(p, ny),
		     dqkv = rnd2(p, nq);
		p->d->ops->attn_fwd(p->d, qkv.d, y.d, att.d, B, T, H, D);
		p->r->ops->attn_fwd(p->r, qkv.r, y.r, att.r, B, T, H, D);
		char what[96];
		snprintf(what, sizeof(what), "attn_fwd B %d T %d H %d D %d: y", B, T, H, D);
		cmp(p, what, y.d, y.r, ny, MM);
		snprintf(what, sizeof(what), "attn_fwd B %d T %d H %d D %d: att", B, T, H, D);
		cmp(p, what, att.d, att.r, na, MM);
		p->d->ops->attn_bwd(p->d, qkv.d, att.d, dy.d, dqkv.d, B, T, H, D);
		p->r->ops->attn_bwd(p->r, qkv.r, att.r, dy.r, dqkv.r, B, T, H, D);
		snprintf(what, sizeof(what), "attn_bwd B %d T %d H %d D %d: dqkv", B, T, H, D);
		cmp(p, what, dqkv.d, dqkv.r, nq, MM);
		both *all[] = {&qkv, &y, &att, &dy, &dqkv};
		for (int i = 0; i < 5; i++)
			free2(p, all[i]);
		free(hq);
	}
}

/* a position-wise projection over B T rows, and the tied LM head's: no
 * bias (b and db NULL) */
static void
seq_linear(pair *p)
{
	const int shapes[][4] = {{21, 8, 11, 0}, {21, 8, 24, 1}, {768, 128, 65, 0}}; /* rows in out bias */
	for (int s = 0; s < 3; s++) {
		const int R = shapes[s][0], in = shapes[s][1], out = shapes[s][2], bias = shapes[s][3];
		both x = rnd2(p, (size_t)R * in), w = rnd2(p, (size_t)out * in), b = rnd2(p, out);
		both y = rnd2(p, (size_t)R * out), dy = rnd2(p, (size_t)R * out);
		both dx = rnd2(p, (size_t)R * in), dw = rnd2(p, (size_t)out * in), db = rnd2(p, out);
		p->d->ops->linear_fwd(p->d, x.d, w.d, bias ? b.d : NULL, y.d, R, in, out, 0);
		p->r->ops->linear_fwd(p->r, x.r, w.r, bias ? b.r : NULL, y.r, R, in, out, 0);
		char what[96];
		snprintf(what, sizeof(what), "linear %dx%dx%d bias %d: y", R, in, out, bias);
		cmp(p, what, y.d, y.r, (size_t)R * out, MM);
		p->d->ops->linear_bwd(p->d, x.d, w.d, y.d, dy.d, dx.d, dw.d, bias ? db.d : NULL, R,
				      in, out, 0);
		p->r->ops->linear_bwd(p->r, x.r, w.r, y.r, dy.r, dx.r, dw.r, bias ? db.r : NULL, R,
				      in, out, 0);
		snprintf(what, sizeof(what), "linear %dx%dx%d bias %d: dw", R, in, out, bias);
		cmp(p, what, dw.d, dw.r, (size_t)out * in, MM);
		snprintf(what, sizeof(what), "linear %dx%dx%d bias %d: dx", R, in, out, bias);
		cmp(p, what, dx.d, dx.r, (size_t)R * in, MM);
		/* without a bias db is not touched: the random values stay */
		snprintf(what, sizeof(what), "linear %dx%dx%d bias %d: db", R, in, out, bias);
		cmp(p, what, db.d, db.r, out, bias ? MM : 0);
		both *all[] = {&x, &w, &b, &y, &dy, &dx, &dw, &db};
		for (int i = 0; i < 8; i++)
			free2(p, all[i]);
	}
}

static void
seq_ops(pair *p)
{
	const backend_ops *o = p->d->ops;
	ck_assert_msg(o->embed_fwd && o->embed_bwd && o->layernorm_fwd && o->layernorm_bwd &&
			      o->gelu_fwd && o->gelu_bwd && o->attn_fwd && o->attn_bwd,
		      "%s lacks a sequence op", backend_name(p->d));
	seq_embed(p);
	seq_layernorm(p);
	seq_gelu(p);
	seq_attention(p);
	seq_linear(p);
}

static void
every_op(const char *dev)
{
	pair p;
	if (!pair_open(&p, dev, 42))
		return;
	gemms(&p);
	dense(&p);
	convs(&p);
	pools(&p);
	elementwise(&p);
	resnet_ops(&p);
	layouts_and_loss(&p);
	finite_checks(&p);
	seq_ops(&p);
	pair_close(&p);
}

START_TEST(refdev_ops_exact)
{
	every_op("refdev");
}
END_TEST

START_TEST(cpu_ops_near_ref)
{
	every_op("cpu");
}
END_TEST

START_TEST(cuda_ops_near_ref)
{
	every_op("cuda");
}
END_TEST

static Suite *
parity_suite(void)
{
	const run_case cases[] = {
		{"ops", NULL, {refdev_ops_exact, cpu_ops_near_ref, cuda_ops_near_ref, NULL}},
	};
	return run_suite_of("parity", cases, sizeof(cases) / sizeof(cases[0]));
}

SL_TEST_MAIN(parity_suite)
