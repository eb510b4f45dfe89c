/* test_backend.c - the backend registry (names, auto, refusals) and the
 * reference backend against the cpu backend op by op on random inputs;
 * the reference backend's bits pinned on a fixed step. */
#include <dlfcn.h>
#include <math.h>
#include <unistd.h>

#include "backend.h"
#include "model.h"
#include "rng.h"
#include "testutil.h"

static backend *
open_be(const char *device, int threads)
{
	backend *be;
	char err[SL_ERR_LEN];
	int rc = backend_open(device, threads, &be, err);
	ck_assert_msg(rc == 0, "backend_open(%s): %s", device, err);
	ck_assert_str_eq(backend_name(be), device);
	return be;
}

/* the host backends every build has */
static const char *
rc_at(int i)
{
	static const char *const names[] = {"cpu", "ref", NULL};
	return names[i];
}

/* ---- registry ---------------------------------------------------------- */

START_TEST(registry_names)
{
	char err[SL_ERR_LEN];
	backend *be = (backend *)1;
	/* unknown: EINVAL, naming the field and listing every name */
	ck_assert_int_eq(backend_open("tpu", 1, &be, err), -SL_EINVAL);
	ck_assert_ptr_null(be);
	ck_assert_str_eq(err, "device: unknown \"tpu\" (expected auto, cuda, cpu, ref)");
	ck_assert_int_eq(backend_check_name("tpu", err), -SL_EINVAL);
	ck_assert_int_eq(backend_check_name("CPU", err), -SL_EINVAL);
	ck_assert_int_eq(backend_check_name("", err), -SL_EINVAL);
	const char *ok[] = {"auto", "cpu", "ref", "cuda"};
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(backend_check_name(ok[i], err), 0);
	/* cuda is a known name; where it cannot run, the refusal says why */
	int rc = backend_open("cuda", 1, &be, err);
	if (rc == 0) {
		backend_free(be);
	} else {
		ck_assert_int_eq(rc, -SL_EUNSUP);
		ck_assert_ptr_null(be);
		ck_assert_msg(!strncmp(err, "device: cuda: ", 14), "%s", err);
	}
	ck_assert_int_eq(backend_open("cpu", 0, &be, err), -SL_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "threads"));
}
END_TEST

/* the suite's build directory's plugin: BUILD/tests/test_backend ->
 * BUILD/stalelab-cuda.so */
static int
built_plugin(char *path, size_t len)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return 0;
	exe[n] = 0;
	for (int up = 0; up < 2; up++) {
		char *s = strrchr(exe, '/');
		if (!s)
			return 0;
		*s = 0;
	}
	snprintf(path, len, "%.4000s/stalelab-cuda.so", exe);
	return access(path, R_OK) == 0;
}

START_TEST(cuda_plugin_says_why_not)
{
	const backend_class *cuda = backend_class_at(0);
	ck_assert_str_eq(cuda->name, "cuda");
	char why[SL_ERR_LEN], path[4096];
	/* nothing at the path given */
	setenv("STALELAB_CUDA_PLUGIN", "/nonexistent/stalelab-cuda.so", 1);
	ck_assert_int_eq(cuda->probe(why), 0);
	ck_assert_str_eq(why, "device: cuda: no plugin at /nonexistent/stalelab-cuda.so "
			      "(STALELAB_CUDA_PLUGIN)");
	/* not a shared object: the loader's own words, naming the file */
	char bad[] = "/tmp/sl-plugin-XXXXXX";
	int fd = mkstemp(bad);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "not an ELF file\n", 16), 16);
	close(fd);
	setenv("STALELAB_CUDA_PLUGIN", bad, 1);
	ck_assert_int_eq(cuda->probe(why), 0);
	ck_assert_msg(!strncmp(why, "device: cuda: ", 14) && strstr(why, bad), "%s", why);
	unlink(bad);
	/* a shared object that is not a plugin (libm, found through cos) */
	Dl_info di;
	double (*volatile c)(double) = cos;
	ck_assert(dladdr(*(void **)&c, &di) && di.dli_fname);
	setenv("STALELAB_CUDA_PLUGIN", di.dli_fname, 1);
	ck_assert_int_eq(cuda->probe(why), 0);
	ck_assert_msg(strstr(why, "has no sl_plugin_init"), "%s", why);
	/* the plugin built here: where no NVIDIA driver is installed (no
	 * kernel driver, no libcuda), its own check says so, in words */
	if (!built_plugin(path, sizeof(path))) {
		printf("cuda_plugin_says_why_not: skipped the plugin's own check: %s was not "
		       "built (no nvcc on this machine)\n", path);
		unsetenv("STALELAB_CUDA_PLUGIN");
		return;
	}
	setenv("STALELAB_CUDA_PLUGIN", path, 1);
	void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	int driverless = !drv && access("/proc/driver/nvidia/version", F_OK) != 0;
	if (drv)
		dlclose(drv);
	int n = cuda->probe(why);
	if (driverless) {
		ck_assert_int_eq(n, 0);
		ck_assert_msg(!strncmp(why, "device: cuda: no NVIDIA driver (the plugin's CUDA runtime is ", 61),
			      "%s", why);
		backend *be = (backend *)1;
		char err[SL_ERR_LEN];
		ck_assert_int_eq(backend_open("cuda", 1, &be, err), -SL_EUNSUP);
		ck_assert_ptr_null(be);
		ck_assert_str_eq(err, why);
	} else if (!n) {
		ck_assert_msg(!strncmp(why, "device: cuda: ", 14), "%s", why);
	}
	unsetenv("STALELAB_CUDA_PLUGIN");
}
END_TEST

START_TEST(registry_auto_and_classes)
{
	/* auto passes cuda over where it cannot run, saying why, and never
	 * picks ref */
	backend *be = open_be("cpu", 1);
	backend_free(be);
	char err[SL_ERR_LEN], why[SL_ERR_LEN];
	const int cuda_here = backend_class_at(0)->probe(why);
	ck_assert_int_eq(backend_open("auto", 2, &be, err), 0);
	if (cuda_here) {
		ck_assert_str_eq(backend_name(be), "cuda");
		ck_assert_str_eq(err, "");
	} else {
		ck_assert_str_eq(backend_name(be), "cpu");
		char want[2 * SL_ERR_LEN];
		snprintf(want, sizeof(want), "device auto: %s; using cpu", why + 8);
		ck_assert_str_eq(err, want);
	}
	backend_free(be);
	/* every class: named once, described, opens iff its probe says so,
	 * and the opened backend carries the class's name */
	int n = 0, seen_ref = 0;
	for (const backend_class *c; (c = backend_class_at(n)); n++) {
		ck_assert_ptr_nonnull(c->about);
		ck_assert_int_eq(backend_check_name(c->name, err), 0);
		for (int j = 0; j < n; j++)
			ck_assert_str_ne(backend_class_at(j)->name, c->name);
		why[0] = 0;
		int avail = c->probe(why);
		int rc = backend_open(c->name, 1, &be, err);
		if (avail) {
			ck_assert_msg(rc == 0, "%s: %s", c->name, err);
			ck_assert_str_eq(backend_name(be), c->name);
			/* host memory: alloc is zeroed and plainly writable;
			 * refdev's (a stand-in device) only through upload and
			 * download */
			const int device = c->hidden || !strcmp(c->name, "cuda");
			ck_assert_int_eq(be->ops->host_memory, !device);
			float *p = be->ops->alloc(be, 64), h[16];
			be->ops->download(be, h, p, sizeof(h));
			ck_assert(h[0] == 0.0f && h[15] == 0.0f);
			if (!device)
				p[3] = 1.5f;
			be->ops->free(be, p);
			backend_free(be);
		} else {
			ck_assert_int_eq(rc, -SL_EUNSUP);
			ck_assert_str_eq(err, why);
			ck_assert_ptr_nonnull(strstr(why, "device: "));
		}
		if (!strcmp(c->name, "ref")) {
			seen_ref++;
			ck_assert_int_eq(c->auto_pick, 0);
		}
	}
	ck_assert_int_eq(n, 4);
	ck_assert_int_eq(seen_ref, 1);
	ck_assert_ptr_null(backend_class_at(-1));
}
END_TEST

/* ---- ref against cpu --------------------------------------------------- */

typedef struct pair {
	backend *cpu, *ref;
	rng r;
} pair;

static pair
mk_pair(uint64_t seed)
{
	pair p = {.cpu = open_be("cpu", 2), .ref = open_be("ref", 1)};
	rng_seed(&p.r, seed, 11);
	return p;
}

static void
free_pair(pair *p)
{
	backend_free(p->cpu);
	backend_free(p->ref);
}

/* n floats uniform in [-1, 1) */
static float *
rnd(pair *p, size_t n)
{
	float *v = malloc(sizeof(float) * (n ? n : 1));
	ck_assert_ptr_nonnull(v);
	for (size_t i = 0; i < n; i++)
		v[i] = (float)(2.0 * rng_uniform(&p->r) - 1.0);
	return v;
}

static float *
fdup(const float *v, size_t n)
{
	float *d = malloc(sizeof(float) * (n ? n : 1));
	ck_assert_ptr_nonnull(d);
	memcpy(d, v, sizeof(float) * n);
	return d;
}

/* max |a - b| <= tol * max(|b|, floor) over the array: relative to the
 * array's scale, so a sum that cancels to near zero is not held to 1e-5
 * of itself */
static void
near(const char *what, const float *a, const float *b, size_t n, double tol)
{
	double scale = 1e-3, worst = 0.0;
	size_t at = 0;
	for (size_t i = 0; i < n; i++)
		scale = fmax(scale, fabs((double)b[i]));
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - (double)b[i]);
		if (!(d <= worst)) {
			worst = d;
			at = i;
		}
	}
	ck_assert_msg(worst <= tol * scale, "%s[%zu]: ref %.9g cpu %.9g (scale %g)",
		      what, at, (double)a[at], (double)b[at], scale);
}

#define TOL 1e-5

START_TEST(ref_gemm)
{
	pair p = mk_pair(1);
	/* every transpose pair, alpha and beta, leading dimensions wider than
	 * the matrices, odd sizes */
	const int m = 13, n = 37, k = 301, pad = 3;
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++) {
			int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad,
			    ldc = n + pad;
			float *a = rnd(&p, (size_t)(ta ? k : m) * lda);
			float *b = rnd(&p, (size_t)(tb ? n : k) * ldb);
			float *c1 = rnd(&p, (size_t)m * ldc), *c2 = fdup(c1, (size_t)m * ldc);
			float alpha = 0.75f, beta = ta ? 0.0f : -0.5f;
			if (!beta) /* beta 0 must not read C: NaN there stays unread */
				for (size_t i = 0; i < (size_t)m * ldc; i++)
					c1[i] = c2[i] = NAN;
			p.ref->ops->gemm(p.ref, ta, tb, m, n, k, alpha, a, lda, b, ldb,
					 beta, c1, ldc);
			p.cpu->ops->gemm(p.cpu, ta, tb, m, n, k, alpha, a, lda, b, ldb,
					 beta, c2, ldc);
			for (int i = 0; i < m; i++) {
				near("gemm", c1 + (size_t)i * ldc, c2 + (size_t)i * ldc, (size_t)n, TOL);
				for (int j = n; j < ldc; j++) /* padding untouched */
					ck_assert(memcmp(&c1[(size_t)i * ldc + j],
							 &c2[(size_t)i * ldc + j], 4) == 0);
			}
			free(a);
			free(b);
			free(c1);
			free(c2);
		}
	free_pair(&p);
}
END_TEST

START_TEST(ref_linear)
{
	pair p = mk_pair(2);
	const int batch = 17, in = 200, out = 33;
	for (int relu = 0; relu < 2; relu++) {
		float *x = rnd(&p, (size_t)batch * in), *w = rnd(&p, (size_t)out * in);
		float *b = rnd(&p, (size_t)out);
		float *y1 = rnd(&p, (size_t)batch * out), *y2 = fdup(y1, (size_t)batch * out);
		p.ref->ops->linear_fwd(p.ref, x, w, b, y1, batch, in, out, relu);
		p.cpu->ops->linear_fwd(p.cpu, x, w, b, y2, batch, in, out, relu);
		near("linear_fwd", y1, y2, (size_t)batch * out, TOL);
		/* backward on the cpu's y, so both mask the same units */
		float *dy1 = rnd(&p, (size_t)batch * out), *dy2 = fdup(dy1, (size_t)batch * out);
		float *dx1 = rnd(&p, (size_t)batch * in), *dx2 = rnd(&p, (size_t)batch * in);
		float *dw1 = rnd(&p, (size_t)out * in), *dw2 = rnd(&p, (size_t)out * in);
		float *db1 = rnd(&p, (size_t)out), *db2 = rnd(&p, (size_t)out);
		p.ref->ops->linear_bwd(p.ref, x, w, y2, dy1, relu ? NULL : dx1, dw1,
				       db1, batch, in, out, relu);
		p.cpu->ops->linear_bwd(p.cpu, x, w, y2, dy2, relu ? NULL : dx2, dw2,
				       db2, batch, in, out, relu);
		ck_assert_mem_eq(dy1, dy2, sizeof(float) * batch * out); /* masked alike */
		near("linear_bwd dw", dw1, dw2, (size_t)out * in, TOL);
		near("linear_bwd db", db1, db2, (size_t)out, TOL);
		if (!relu)
			near("linear_bwd dx", dx1, dx2, (size_t)batch * in, TOL);
		free(x), free(w), free(b), free(y1), free(y2), free(dy1), free(dy2);
		free(dx1), free(dx2), free(dw1), free(dw2), free(db1), free(db2);
	}
	free_pair(&p);
}
END_TEST

static conv_geom
geom(int cin, int h, int w, int cout, int k, int stride, int pad)
{
	conv_geom g = {.cin = cin, .h = h, .w = w, .cout = cout, .k = k,
		       .stride = stride, .pad = pad};
	g.ho = conv_out_dim(h, k, stride, pad);
	g.wo = conv_out_dim(w, k, stride, pad);
	return g;
}

START_TEST(ref_conv)
{
	pair p = mk_pair(3);
	/* LeNet's conv1 (cin 1, k5 pad 2) and conv2, stride 2 with padding,
	 * a non-square image, a kernel wider than the weight gradient's
	 * block of taps (k 9), pad above k - 1; each at batches that take
	 * the scalar, SSE, AVX2 and AVX-512 kernels, with and without a last
	 * vector that overlaps the one before it */
	const conv_geom gs[] = {geom(1, 28, 28, 6, 5, 1, 2), geom(6, 14, 14, 16, 5, 1, 0),
				geom(2, 9, 8, 3, 3, 2, 1), geom(3, 7, 11, 4, 3, 1, 1),
				geom(2, 11, 10, 5, 9, 1, 3), geom(1, 6, 7, 3, 2, 3, 2),
				/* 3x3, stride 1, pad 1, 8 channels or more: Winograd */
				geom(9, 7, 6, 10, 3, 1, 1)};
	const int batches[] = {3, 5, 13, 16, 37, 64}, ng = 7;
	for (int t = 0; t < ng * 6; t++) {
		const conv_geom *g = &gs[t % ng];
		const int batch = batches[t / ng];
		const size_t nx = (size_t)g->cin * batch * g->h * g->w;
		const size_t ny = (size_t)g->cout * batch * g->ho * g->wo;
		const size_t nw = (size_t)g->cout * g->cin * g->k * g->k;
		for (int relu = 0; relu < 2; relu++) {
			float *x = rnd(&p, nx), *w = rnd(&p, nw), *b = rnd(&p, (size_t)g->cout);
			float *y1 = rnd(&p, ny), *y2 = rnd(&p, ny);
			p.ref->ops->conv_fwd(p.ref, g, x, w, b, y1, batch, relu);
			p.cpu->ops->conv_fwd(p.cpu, g, x, w, b, y2, batch, relu);
			near("conv_fwd", y1, y2, ny, TOL);
			float *dy1 = rnd(&p, ny), *dy2 = fdup(dy1, ny);
			float *dx1 = rnd(&p, nx), *dx2 = rnd(&p, nx);
			float *dw1 = rnd(&p, nw), *dw2 = rnd(&p, nw);
			float *db1 = rnd(&p, (size_t)g->cout), *db2 = rnd(&p, (size_t)g->cout);
			/* the first layer has no dx */
			int want_dx = t % ng != 0;
			p.ref->ops->conv_bwd(p.ref, g, x, w, y2, dy1, want_dx ? dx1 : NULL,
					     dw1, db1, batch, relu);
			p.cpu->ops->conv_bwd(p.cpu, g, x, w, y2, dy2, want_dx ? dx2 : NULL,
					     dw2, db2, batch, relu);
			ck_assert_mem_eq(dy1, dy2, sizeof(float) * ny);
			near("conv_bwd dw", dw1, dw2, nw, TOL);
			near("conv_bwd db", db1, db2, (size_t)g->cout, TOL);
			if (want_dx)
				near("conv_bwd dx", dx1, dx2, nx, TOL);
			free(x), free(w), free(b), free(y1), free(y2), free(dy1), free(dy2);
			free(dx1), free(dx2), free(dw1), free(dw2), free(db1), free(db2);
		}
	}
	free_pair(&p);
}
END_TEST

/* Every output of a convolution is computed by one thread in one order:
 * the bits do not depend on the thread count (the direct kernels split by
 * rows, Winograd's by tiles, the weight gradient by channel blocks) */
START_TEST(cpu_conv_thread_free)
{
	backend *b1 = open_be("cpu", 1), *b3 = open_be("cpu", 3);
	pair p = mk_pair(9);
	const conv_geom gs[] = {geom(16, 9, 11, 16, 3, 1, 1), geom(6, 14, 14, 16, 5, 1, 0),
				geom(8, 9, 9, 12, 3, 2, 1)};
	for (int s = 0; s < 3; s++) {
		const conv_geom *g = &gs[s];
		const int batch = 37;
		const size_t nx = (size_t)g->cin * batch * g->h * g->w;
		const size_t ny = (size_t)g->cout * batch * g->ho * g->wo;
		const size_t nw = (size_t)g->cout * g->cin * g->k * g->k;
		float *x = rnd(&p, nx), *w = rnd(&p, nw), *b = rnd(&p, (size_t)g->cout);
		float *y[2], *dy[2], *dx[2], *dw[2], *db[2];
		float *dy0 = rnd(&p, ny);
		backend *be[2] = {b1, b3};
		for (int i = 0; i < 2; i++) {
			y[i] = rnd(&p, ny), dy[i] = fdup(dy0, ny), dx[i] = rnd(&p, nx);
			dw[i] = rnd(&p, nw), db[i] = rnd(&p, (size_t)g->cout);
			be[i]->ops->conv_fwd(be[i], g, x, w, b, y[i], batch, 1);
			be[i]->ops->conv_bwd(be[i], g, x, w, y[i], dy[i], dx[i], dw[i], db[i],
					     batch, 1);
		}
		ck_assert_mem_eq(y[0], y[1], sizeof(float) * ny);
		ck_assert_mem_eq(dx[0], dx[1], sizeof(float) * nx);
		ck_assert_mem_eq(dw[0], dw[1], sizeof(float) * nw);
		ck_assert_mem_eq(db[0], db[1], sizeof(float) * g->cout);
		for (int i = 0; i < 2; i++)
			free(y[i]), free(dy[i]), free(dx[i]), free(dw[i]), free(db[i]);
		free(x), free(w), free(b), free(dy0);
	}
	free_pair(&p);
	backend_free(b1);
	backend_free(b3);
}
END_TEST

START_TEST(ref_pool_relu_layout)
{
	/* no arithmetic beyond comparisons and copies: equal to the bit */
	pair p = mk_pair(4);
	/* windows that tile the image, windows that leave a last row and
	 * column uncovered, overlapping windows with padding */
	const conv_geom gs[] = {geom(3, 8, 10, 0, 2, 2, 0), geom(2, 7, 9, 0, 2, 2, 0),
				geom(2, 7, 7, 0, 3, 2, 1)};
	const int batch = 19;
	for (int t = 0; t < 3; t++) {
		const conv_geom *g = &gs[t];
		size_t nx = (size_t)g->cin * batch * g->h * g->w;
		size_t ny = (size_t)g->cin * batch * g->ho * g->wo;
		float *x = rnd(&p, nx);
		/* [C][H][W][B]: image 2's pixels (0,0) and (0,1) tie; the first
		 * in row order wins in both, and its offset is 0 */
		x[2] = x[batch + 2] = 5.0f;
		float *y1 = rnd(&p, ny), *y2 = rnd(&p, ny);
		int32_t *a1 = malloc(sizeof(int32_t) * ny), *a2 = malloc(sizeof(int32_t) * ny);
		p.ref->ops->maxpool_fwd(p.ref, g, x, y1, a1, batch);
		p.cpu->ops->maxpool_fwd(p.cpu, g, x, y2, a2, batch);
		ck_assert_mem_eq(y1, y2, sizeof(float) * ny);
		ck_assert_mem_eq(a1, a2, sizeof(int32_t) * ny);
		if (t == 0)
			ck_assert_int_eq(a1[2], 0);
		float *dy = rnd(&p, ny), *dx1 = rnd(&p, nx), *dx2 = rnd(&p, nx);
		p.ref->ops->maxpool_bwd(p.ref, g, dy, a1, dx1, batch);
		p.cpu->ops->maxpool_bwd(p.cpu, g, dy, a2, dx2, batch);
		ck_assert_mem_eq(dx1, dx2, sizeof(float) * nx);
		free(x), free(y1), free(y2), free(a1), free(a2), free(dy), free(dx1), free(dx2);
	}
	const size_t n = 999;
	float *x = rnd(&p, n), *dy = rnd(&p, n);
	float *r1 = rnd(&p, n), *r2 = rnd(&p, n), *d1 = rnd(&p, n), *d2 = rnd(&p, n);
	p.ref->ops->relu_fwd(p.ref, x, r1, n);
	p.cpu->ops->relu_fwd(p.cpu, x, r2, n);
	ck_assert_mem_eq(r1, r2, sizeof(float) * n);
	p.ref->ops->relu_bwd(p.ref, r1, dy, d1, n);
	p.cpu->ops->relu_bwd(p.cpu, r1, dy, d2, n);
	ck_assert_mem_eq(d1, d2, sizeof(float) * n);
	/* [C][P][B] -> [B][C][P] and back: 3 x 9 x 37 = 999 */
	p.ref->ops->cpb_to_bcp(p.ref, x, r1, 3, 37, 9);
	p.cpu->ops->cpb_to_bcp(p.cpu, x, r2, 3, 37, 9);
	ck_assert_mem_eq(r1, r2, sizeof(float) * n);
	ck_assert(r1[9] == x[9 * 37]);          /* sample 0, channel 1, pixel 0 */
	ck_assert(r1[27 + 10] == x[10 * 37 + 1]); /* sample 1, channel 1, pixel 1 */
	p.ref->ops->bcp_to_cpb(p.ref, r1, d1, 3, 37, 9);
	ck_assert_mem_eq(d1, x, sizeof(float) * n);
	free(x), free(dy), free(r1), free(r2), free(d1), free(d2);
	free_pair(&p);
}
END_TEST

START_TEST(ref_softmax)
{
	pair p = mk_pair(5);
	const int batch = 40, classes = 10;
	float *z = rnd(&p, (size_t)batch * classes);
	uint8_t y[40];
	for (int r = 0; r < batch; r++) {
		y[r] = (uint8_t)rng_below(&p.r, classes);
		/* rows with spreads from 1 to ~1000: exp over a wide range,
		 * down to underflow */
		float spread = (float)pow(10.0, r % 4);
		for (int j = 0; j < classes; j++)
			z[r * classes + j] *= spread;
	}
	float d1[400], d2[400];
	int h1, h2;
	double l1 = p.ref->ops->softmax_xent(p.ref, z, y, d1, batch, classes, &h1);
	double l2 = p.cpu->ops->softmax_xent(p.cpu, z, y, d2, batch, classes, &h2);
	ck_assert_int_eq(h1, h2);
	ck_assert_msg(fabs(l1 - l2) <= 1e-13 * fabs(l2), "loss %.17g vs %.17g", l1, l2);
	near("softmax dlogits", d1, d2, (size_t)batch * classes, 1e-6);
	/* our exp and log against libm on the loss of each row alone */
	for (int r = 0; r < batch; r++) {
		const float *zr = z + r * classes;
		double mx = zr[0], s = 0.0;
		for (int j = 1; j < classes; j++)
			mx = fmax(mx, zr[j]);
		for (int j = 0; j < classes; j++)
			s += exp((double)(float)(zr[j] - (float)mx));
		double want = log(s) + mx - zr[y[r]];
		double got = p.ref->ops->softmax_xent(p.ref, zr, &y[r], NULL, 1, classes, NULL);
		double scale = fabs(log(s)) + fabs(mx) + fabs(zr[y[r]]);
		ck_assert_msg(fabs(got - want) <= 1e-15 * scale,
			      "row %d: %.17g vs %.17g", r, got, want);
	}
	free(z);
	free_pair(&p);
}
END_TEST

START_TEST(ref_updates)
{
	pair p = mk_pair(6);
	const size_t n = 70001; /* above the cpu's threading threshold */
	float *w1 = rnd(&p, n), *w2 = fdup(w1, n), *g = rnd(&p, n);
	float *m1 = rnd(&p, n), *m2 = fdup(m1, n);
	p.ref->ops->sgd(p.ref, w1, g, m1, n, 0.1f, 0.9f, 1e-4f);
	p.cpu->ops->sgd(p.cpu, w2, g, m2, n, 0.1f, 0.9f, 1e-4f);
	near("sgd w (momentum)", w1, w2, n, TOL);
	near("sgd m", m1, m2, n, TOL);
	p.ref->ops->sgd(p.ref, w1, g, NULL, n, 0.05f, 0.0f, 0.0f);
	p.cpu->ops->sgd(p.cpu, w2, g, NULL, n, 0.05f, 0.0f, 0.0f);
	near("sgd w", w1, w2, n, TOL);
	float *bak = rnd(&p, n), *o1 = rnd(&p, n), *o2 = rnd(&p, n);
	float *ms1 = rnd(&p, n);
	for (size_t i = 0; i < n; i++)
		ms1[i] = fabsf(ms1[i]);
	float *ms2 = fdup(ms1, n);
	p.ref->ops->dc_grad(p.ref, n, g, w1, bak, NULL, 0.04f, 0, 0, o1);
	p.cpu->ops->dc_grad(p.cpu, n, g, w1, bak, NULL, 0.04f, 0, 0, o2);
	near("dc_grad", o1, o2, n, TOL);
	p.ref->ops->dc_grad(p.ref, n, g, w1, bak, ms1, 2.0f, 0.95f, 1e-7f, o1);
	p.cpu->ops->dc_grad(p.cpu, n, g, w1, bak, ms2, 2.0f, 0.95f, 1e-7f, o2);
	near("dc_grad adaptive", o1, o2, n, TOL);
	near("dc_grad ms", ms1, ms2, n, TOL);
	p.ref->ops->axpy(p.ref, n, -0.3f, g, w1);
	p.cpu->ops->axpy(p.cpu, n, -0.3f, g, w2);
	near("axpy", w1, w2, n, TOL);
	p.ref->ops->scal(p.ref, n, 1.7f, w1);
	p.cpu->ops->scal(p.cpu, n, 1.7f, w2);
	near("scal", w1, w2, n, TOL);
	/* memory ops */
	p.ref->ops->copy(p.ref, o1, w1, sizeof(float) * n);
	ck_assert_mem_eq(o1, w1, sizeof(float) * n);
	p.ref->ops->zero(p.ref, o1, sizeof(float) * 3);
	ck_assert(o1[0] == 0.0f && o1[2] == 0.0f && o1[3] == w1[3]);
	free(w1), free(w2), free(g), free(m1), free(m2), free(bak), free(o1), free(o2);
	free(ms1), free(ms2);
	free_pair(&p);
}
END_TEST

/* ---- ref: the same bits, pinned ----------------------------------------
 * One LeNet-5 and one MLP step on the ref backend with parameters and data
 * drawn from the integer generator (not model_new's normal draws, which go
 * through libm): an FNV-1a hash of the loss and every gradient bit. The
 * constants were recorded on this x86-64 build; a change to any ref op's
 * arithmetic, or a machine or compiler that rounds differently, changes
 * them. */

static uint64_t
fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

static uint64_t
ref_step_hash(const char *spec, int threads)
{
	backend *be = open_be("ref", threads);
	model *m;
	char err[SL_ERR_LEN];
	const int batch = 8;
	ck_assert_int_eq(model_new(spec, 1, 28, 28, 10, batch, 1, be, &m, err), 0);
	rng r;
	rng_seed(&r, 99, 1);
	for (size_t i = 0; i < m->n_params; i++)
		m->params[i] = (float)(0.2 * (2.0 * rng_uniform(&r) - 1.0));
	float *x = malloc(sizeof(float) * batch * 784);
	uint8_t y[8];
	uint32_t idx[8];
	for (int i = 0; i < batch * 784; i++)
		x[i] = (float)rng_uniform(&r);
	for (int b = 0; b < batch; b++) {
		y[b] = (uint8_t)rng_below(&r, 10);
		idx[b] = (uint32_t)b;
	}
	model_load_batch(m, x, y, idx, batch);
	double loss = model_step(m, NULL, batch, 0);
	uint64_t h = fnv(0xcbf29ce484222325ULL, &loss, sizeof(loss));
	h = fnv(h, m->grads, sizeof(float) * m->n_params);
	free(x);
	model_free(m);
	backend_free(be);
	return h;
}

START_TEST(ref_bits_pinned)
{
	uint64_t lenet = ref_step_hash("lenet5", 1), mlp = ref_step_hash("mlp:784-64-10", 1);
	/* the thread count is accepted and changes nothing */
	ck_assert_uint_eq(ref_step_hash("lenet5", 4), lenet);
	ck_assert_msg(lenet == 0x0045b7495ec84487ULL, "lenet5 step hash 0x%016llx", (unsigned long long)lenet);
	ck_assert_msg(mlp == 0x87509998a781d86bULL, "mlp step hash 0x%016llx", (unsigned long long)mlp);
}
END_TEST

START_TEST(all_finite_finds_every_nonfinite)
{
	/* every class, at every position of every length around the 16-float
	 * blocks: one NaN, +inf or -inf is found; the largest, smallest,
	 * subnormal and negative-zero floats are finite (no false alarm) */
	const float bad[] = {NAN, -NAN, INFINITY, -INFINITY};
	const float good[] = {0.0f, -0.0f, 1.0f, -3.5f, 3.4028235e38f, -3.4028235e38f,
			      1.4e-45f, -1.17549435e-38f};
	float x[70];
	/* one thread, and three (the cpu backend splits the check by 16-float
	 * blocks between them) */
	for (int c = 0; rc_at(c / 2); c++) {
		backend *be = open_be(rc_at(c / 2), c % 2 ? 3 : 1);
		ck_assert_ptr_nonnull(be->ops->all_finite);
		for (size_t n = 0; n <= 70; n++) {
			for (size_t i = 0; i < n; i++)
				x[i] = good[i % (sizeof(good) / sizeof(good[0]))];
			ck_assert_msg(be->ops->all_finite(be, x, n), "%s: n %zu", rc_at(c / 2), n);
			for (size_t i = 0; i < n; i++) {
				for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
					float keep = x[i];
					x[i] = bad[b];
					ck_assert_msg(!be->ops->all_finite(be, x, n),
						      "%s: n %zu, %g at %zu missed", rc_at(c / 2), n,
						      (double)bad[b], i);
					x[i] = keep;
				}
			}
		}
		backend_free(be);
	}
}
END_TEST

START_TEST(gather_both_layouts)
{
	/* the batch's input from scattered images, [B][dim] and [dim][B],
	 * against the definition: batches around the 16-image blocks, a dim
	 * that is not a multiple of the 16-value split, 1 and 3 threads */
	enum { N = 50, DIM = 37 };
	float *x = malloc(sizeof(float) * N * DIM), *y = malloc(sizeof(float) * (N * DIM + 1));
	uint32_t idx[N];
	ck_assert(x && y);
	for (int i = 0; i < N * DIM; i++)
		x[i] = (float)i;
	for (int c = 0; rc_at(c / 2); c++) {
		backend *be = open_be(rc_at(c / 2), c % 2 ? 3 : 1);
		const int batches[] = {1, 15, 16, 17, 33, N};
		for (int bi = 0; bi < 6; bi++) {
			int B = batches[bi];
			for (int b = 0; b < B; b++)
				idx[b] = (uint32_t)((b * 7 + 3) % N); /* a permutation */
			for (int inner = 0; inner < 2; inner++) {
				for (int i = 0; i <= N * DIM; i++)
					y[i] = -1.0f;
				backend_gather(be, y, x, idx, B, DIM, inner);
				for (int b = 0; b < B; b++)
					for (int j = 0; j < DIM; j++) {
						float got = inner ? y[j * B + b] : y[b * DIM + j];
						ck_assert_msg(got == x[idx[b] * DIM + j],
							      "%s: batch %d inner %d: image %d value %d",
							      rc_at(c / 2), B, inner, b, j);
					}
				ck_assert_msg(y[B * DIM] == -1.0f, "%s: wrote past the batch",
					      rc_at(c / 2));
			}
		}
		backend_free(be);
	}
	free(x);
	free(y);
}
END_TEST

static Suite *
backend_suite(void)
{
	Suite *s = suite_create("backend");
	TCase *tc = tcase_create("registry");
	/* the plugin's dlopen maps cuBLAS (hundreds of MB): from a cold page
	 * cache on a busy machine that took over Check's default 4 s */
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, registry_names);
	tcase_add_test(tc, registry_auto_and_classes);
	tcase_add_test(tc, cuda_plugin_says_why_not);
	suite_add_tcase(s, tc);
	TCase *rf = tcase_create("ref");
	tcase_set_timeout(rf, 60);
	tcase_add_test(rf, ref_gemm);
	tcase_add_test(rf, ref_linear);
	tcase_add_test(rf, ref_conv);
	tcase_add_test(rf, cpu_conv_thread_free);
	tcase_add_test(rf, ref_pool_relu_layout);
	tcase_add_test(rf, ref_softmax);
	tcase_add_test(rf, ref_updates);
	tcase_add_test(rf, ref_bits_pinned);
	tcase_add_test(rf, all_finite_finds_every_nonfinite);
	tcase_add_test(rf, gather_both_layouts);
	suite_add_tcase(s, rf);
	return s;
}

SL_TEST_MAIN(backend_suite)
