/* test_resnet.c - the CIFAR ResNet (resnet20, resnet:N) and what it is made
 * of: finite differences of a resnet:8's gradients in training mode (batch
 * statistics as functions of the input), parameter counts, batch norm's
 * evaluation mode and running statistics by hand, model_recompute_state
 * against the batches' own statistics, partial backprop at every depth
 * (bit for bit the full backward's tail, nothing below it written, its
 * FLOPs), cpu against ref, a few SGD steps lowering the loss, and the
 * specs refused. */
#include <math.h>

#include "backend.h"
#include "dataset.h"
#include "model.h"
#include "run.h"
#include "testutil.h"

static backend *
open_be(const char *name, int threads)
{
	backend *be;
	char err[SL_ERR_LEN];
	ck_assert_msg(backend_open(name, threads, &be, err) == 0, "%s", err);
	return be;
}

static model *
resnet(const char *spec, int c, int h, int w, int classes, int batch,
       uint64_t seed, backend *be)
{
	model *m;
	char err[SL_ERR_LEN];
	int rc = model_new(spec, c, h, w, classes, batch, seed, be, &m, err);
	ck_assert_msg(rc == 0, "%s: %s", spec, err);
	return m;
}

/* Inputs in [-1, 1) and labels from (seed), loaded into m. */
static void
load_random(model *m, int batch, uint64_t seed)
{
	rng r;
	rng_seed(&r, seed, 7);
	float *x = malloc(sizeof(float) * (size_t)batch * m->in_dim);
	uint8_t *y = malloc((size_t)batch);
	uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)batch);
	for (long i = 0; i < (long)batch * m->in_dim; i++)
		x[i] = (float)(2.0 * rng_uniform(&r) - 1.0);
	for (int b = 0; b < batch; b++) {
		y[b] = (uint8_t)(b % m->classes);
		idx[b] = (uint32_t)b;
	}
	model_load_batch(m, x, y, idx, batch);
	free(x);
	free(y);
	free(idx);
}

/* Training-mode loss (batch statistics) at the current parameters. */
static double
train_loss(model *m, int batch)
{
	return model_forward_mode(m, NULL, batch, NULL, 1);
}

/* ---- finite differences ----------------------------------------------- */

/* The training-mode loss's slope along v (params [lo, hi) moved by
 * q eps v, q = -2..2; fourth-order central difference) into *num; 0, or
 * -1 when a relu switches inside the probe (the one-sided slopes
 * disagree: the loss is not smooth there). */
static int
fd_slope(model *m, int B, size_t lo, size_t hi, const float *v, double l0,
	 double *num)
{
	const float eps = 1e-3f;
	size_t len = hi - lo;
	float *orig = malloc(sizeof(float) * len);
	memcpy(orig, m->params + lo, sizeof(float) * len);
	double f[5];
	for (int q = 0; q < 5; q++) {
		for (size_t k = 0; k < len; k++)
			m->params[lo + k] = orig[k] + (float)(q - 2) * eps * v[k];
		f[q] = q == 2 ? l0 : train_loss(m, B);
	}
	memcpy(m->params + lo, orig, sizeof(float) * len);
	free(orig);
	double fw = (f[3] - f[2]) / eps, bw = (f[2] - f[1]) / eps;
	double fw2 = (f[4] - f[3]) / eps, bw2 = (f[1] - f[0]) / eps;
	/* one-sided slopes carry the loss's float noise (~1e-6 / eps) */
	double tol = 0.01 * (fabs(fw) + fabs(bw)) + 4e-3;
	if (fabs(fw - bw) > tol || fabs(fw2 - fw) > tol || fabs(bw2 - bw) > tol)
		return -1;
	*num = (8.0 * (f[3] - f[1]) - (f[4] - f[0])) / (12.0 * eps);
	return 0;
}

START_TEST(fd_resnet8)
{
	/* every parameter of a resnet:8 on 3 x 8 x 8, 3 classes, batch 3
	 * (stage 3 runs on 2 x 2 maps), against finite differences of the
	 * training-mode loss: per parameterised node, the slope along a
	 * random direction (+-1, normed) over all its weights, and one over all its
	 * biases / betas (each parameter's gradient counts), then `per`
	 * single weights and biases. A float32 forward's loss is noisy at
	 * ~1e-6, so single slopes are good to a few 1e-4 (their error is
	 * measured against 2e-2 + |slope|), and a probe of 2e-3 flips a few
	 * of the many relus whose input the bn put near 0: kinks too small
	 * for the one-sided slopes to show, a systematic error of ~1-2%, so
	 * the tolerance is 5% (a wrong gradient is off by far more: see the
	 * commit's mutations). A wrong input gradient of any
	 * op shows in the parameters below it (the stem conv's take every
	 * op's dx on their way down, the shortcut's included). */
	backend *be = open_be("ref", 1);
	const int B = 3, per = 6;
	model *m = resnet("resnet:8", 3, 8, 8, 3, B, 11, be);
	ck_assert_int_eq(m->n_nodes, 19);
	ck_assert_int_eq(m->n_param_layers, 15);
	/* perturb gamma and beta off 1 and 0 so their gradients are generic */
	rng r;
	rng_seed(&r, 5, 3);
	for (int i = 0; i < m->n_nodes; i++) {
		const node *nd = &m->nodes[i];
		if (strcmp(nd->op->name, "batchnorm"))
			continue;
		for (size_t k = 0; k < nd->n_params; k++)
			m->params[nd->p_off + k] += (float)(0.4 * rng_uniform(&r) - 0.2);
	}
	load_random(m, B, 12);
	model_step(m, NULL, B, 0);
	float *g = malloc(sizeof(float) * m->n_params);
	memcpy(g, m->grads, sizeof(float) * m->n_params);
	float *v = malloc(sizeof(float) * m->n_params);
	const float one = 1.0f;
	const double l0 = train_loss(m, B);
	int probes = 0, kinks = 0, dirs = 0, nodes = 0;
	for (int i = 0; i < m->n_nodes; i++) {
		const node *nd = &m->nodes[i];
		if (!nd->n_params)
			continue;
		nodes++;
		for (int part = 0; part < 2; part++) {
			size_t lo = nd->p_off + (part ? nd->n_weights : 0);
			size_t hi = nd->p_off + (part ? nd->n_params : nd->n_weights);
			if (lo == hi)
				continue;
			double an = 0, num;
			float unit = (float)(1.0 / sqrt((double)(hi - lo)));
			for (size_t j = lo; j < hi; j++) {
				v[j - lo] = rng_below(&r, 2) ? unit : -unit;
				an += (double)v[j - lo] * g[j];
			}
			if (fd_slope(m, B, lo, hi, v, l0, &num) == 0) {
				dirs++;
				ck_assert_msg(fabs(num - an) < 5e-2 * (1e-2 + fabs(num) + fabs(an)),
					      "node %d (%s) %s along +-1: analytic %.6g numeric %.6g",
					      i, nd->op->name, part ? "bias" : "weights", an, num);
			}
			for (int t = 0; t < per; t++) {
				size_t j = lo + (size_t)rng_below(&r, hi - lo);
				probes++;
				if (fd_slope(m, B, j, j + 1, &one, l0, &num) < 0) {
					kinks++;
					continue;
				}
				double err = fabs(num - g[j]) / (2e-2 + fabs(num) + fabs(g[j]));
				ck_assert_msg(err < 5e-2,
					      "node %d (%s) param %zu: analytic %.6g numeric %.6g",
					      i, nd->op->name, j - nd->p_off, (double)g[j], num);
			}
		}
	}
	ck_assert_int_eq(nodes, 15);
	ck_assert_msg(dirs >= 15, "only %d of 29 directions were smooth", dirs);
	ck_assert_msg(kinks <= probes / 5, "%d of %d probes hit a kink", kinks, probes);
	/* the gradients are not all tiny (a check of zeros passes anything) */
	double gn = 0;
	for (size_t j = 0; j < m->n_params; j++)
		gn += (double)g[j] * g[j];
	ck_assert(gn > 1e-4);
	free(v);
	free(g);
	model_free(m);
	backend_free(be);
}
END_TEST

/* ---- shapes and counts ------------------------------------------------- */

START_TEST(param_counts)
{
	backend *be = open_be("cpu", 1);
	/* per resnet:(6n + 2) on 3 input channels, 10 classes (no conv
	 * biases; bn: gamma and beta per channel):
	 *   stem   conv 3*9*16 = 432, bn 32                     464
	 *   stage1 per block 2 * 16*16*9 + 2 * 32               4,672
	 *   stage2 first 16*32*9 + 32*32*9 + 2 * 64             13,952
	 *          others 2 * 32*32*9 + 2 * 64                  18,560
	 *   stage3 first 32*64*9 + 64*64*9 + 2 * 128            55,552
	 *          others 2 * 64*64*9 + 2 * 128                 73,984
	 *   head   64*10 + 10                                   650
	 * n = 3: 464 + 3*4672 + 13952 + 2*18560 + 55552 + 2*73984 + 650
	 *      = 269,722 (He et al.'s "0.27M"; MODELS.md section 1) */
	static const struct {
		const char *spec;
		size_t params, state;
		int nodes, layers;
	} want[] = {
		{"resnet20", 269722, 2 * 688, 49, 39},
		{"resnet:20", 269722, 2 * 688, 49, 39},
		/* n = 1: 464 + 4672 + 13952 + 55552 + 650 */
		{"resnet:8", 75290, 2 * (16 + 2 * 16 + 2 * 32 + 2 * 64), 19, 15},
		/* n = 5: 464 + 5*4672 + 13952 + 4*18560 + 55552 + 4*73984 + 650
		 * (He et al.: 0.46M) */
		{"resnet:32", 464154, 2 * (16 + 10 * 16 + 10 * 32 + 10 * 64), 79, 63},
	};
	for (size_t s = 0; s < sizeof want / sizeof want[0]; s++) {
		model *m = resnet(want[s].spec, 3, 32, 32, 10, 2, 1, be);
		ck_assert_msg(m->n_params == want[s].params, "%s: %zu parameters",
			      want[s].spec, m->n_params);
		ck_assert_uint_eq(model_state_floats(m), want[s].state);
		ck_assert_int_eq(m->n_nodes, want[s].nodes);
		ck_assert_int_eq(m->n_param_layers, want[s].layers);
		ck_assert_int_eq(model_spec_param_layers(want[s].spec), want[s].layers);
		/* 32 -> 16 -> 8: the pooled map is 64 x 8 x 8 */
		const node *pool = &m->nodes[m->n_nodes - 2];
		ck_assert_str_eq(pool->op->name, "avgpool");
		ck_assert(pool->in[0].c == 64 && pool->in[0].h == 8 && pool->in[0].w == 8);
		model_free(m);
	}
	/* 28 x 28 x 1 (Fashion-MNIST): 28 -> 14 -> 7; only the stem's
	 * conv differs: 1*9*16 instead of 3*9*16 */
	model *m = resnet("resnet20", 1, 28, 28, 10, 2, 1, be);
	ck_assert_uint_eq(m->n_params, 269722 - 2 * 9 * 16);
	const node *pool = &m->nodes[m->n_nodes - 2];
	ck_assert(pool->in[0].c == 64 && pool->in[0].h == 7 && pool->in[0].w == 7);
	/* the layout of a block: conv, bn + relu, conv, bn, shortcut + relu
	 * reading the bn and the block's input */
	static const char *const ops[] = {"conv2d", "batchnorm", "conv2d", "batchnorm",
					  "conv2d", "batchnorm", "shortcut"};
	for (int i = 0; i < 7; i++)
		ck_assert_str_eq(m->nodes[i].op->name, ops[i]);
	ck_assert(m->nodes[1].relu && m->nodes[3].relu && !m->nodes[5].relu &&
		  m->nodes[6].relu);
	ck_assert(m->nodes[0].no_bias && m->nodes[0].he_init);
	ck_assert(m->nodes[6].inputs[0] == 5 && m->nodes[6].inputs[1] == 1);
	/* stage 2's first block: stride 2 in its first conv and its shortcut */
	const node *sc = &m->nodes[1 + 3 * 5 + 5];
	ck_assert_str_eq(sc->op->name, "shortcut");
	ck_assert_int_eq(sc->stride, 2);
	ck_assert_int_eq(m->nodes[1 + 3 * 5 + 1].stride, 2);
	ck_assert(sc->in[1].c == 16 && sc->in[1].h == 28 && sc->out.c == 32 &&
		  sc->out.h == 14);
	model_free(m);
	backend_free(be);
}
END_TEST

START_TEST(kaiming_init)
{
	/* conv weights ~ N(0, 2 / fan_in): stage 3's 64 x 64 x 3 x 3 convs
	 * have sd sqrt(2 / 576) = 0.0589; bn gamma 1, beta 0; the same seed
	 * gives the same bits, another seed others */
	backend *be = open_be("cpu", 1);
	model *a = resnet("resnet20", 3, 32, 32, 10, 2, 42, be);
	model *b = resnet("resnet20", 3, 32, 32, 10, 2, 42, be);
	model *c = resnet("resnet20", 3, 32, 32, 10, 2, 43, be);
	ck_assert_mem_eq(a->params, b->params, sizeof(float) * a->n_params);
	ck_assert(memcmp(a->params, c->params, sizeof(float) * a->n_params) != 0);
	const node *cv = &a->nodes[a->n_nodes - 5]; /* the last block's conv 2 */
	ck_assert_str_eq(cv->op->name, "conv2d");
	ck_assert_uint_eq(cv->n_weights, 64 * 64 * 9);
	double ss = 0;
	for (size_t i = 0; i < cv->n_weights; i++)
		ss += (double)a->params[cv->p_off + i] * a->params[cv->p_off + i];
	double sd = sqrt(ss / (double)cv->n_weights);
	ck_assert_msg(fabs(sd - sqrt(2.0 / 576)) < 0.002, "sd %g", sd);
	const node *bn = &a->nodes[a->n_nodes - 4];
	for (size_t i = 0; i < 64; i++) {
		ck_assert_float_eq(a->params[bn->p_off + i], 1.0f);
		ck_assert_float_eq(a->params[bn->p_off + 64 + i], 0.0f);
		ck_assert_float_eq(a->state[bn->s_off + i], 0.0f);
		ck_assert_float_eq(a->state[bn->s_off + 64 + i], 1.0f);
	}
	model_free(a);
	model_free(b);
	model_free(c);
	backend_free(be);
}
END_TEST

/* ---- batch norm's modes and state ------------------------------------- */

/* bn (2 channels of 2 x 2) -> avgpool -> dense 3: a graph to read the bn's
 * output and state by hand */
static model *
bn_model(backend *be, int batch)
{
	node_desc d[] = {{.op = "batchnorm"}, {.op = "avgpool"},
			 {.op = "dense", .units = 3}};
	model *m;
	char err[SL_ERR_LEN];
	int rc = model_new_nodes(d, 3, (shape){2, 2, 2, 1}, 3, batch, 1, be, &m, err);
	ck_assert_msg(rc == 0, "%s", err);
	ck_assert_uint_eq(model_state_floats(m), 4);
	return m;
}

START_TEST(eval_uses_running_stats)
{
	backend *be = open_be("ref", 1);
	const int B = 5, P = 4, N = P * B;
	model *m = bn_model(be, B);
	load_random(m, B, 3);
	float gamma[2] = {1.5f, -0.5f}, beta[2] = {0.25f, 2.0f};
	float rm[2] = {0.3f, -0.2f}, rv[2] = {4.0f, 0.25f};
	memcpy(m->params, gamma, sizeof gamma);
	memcpy(m->params + 2, beta, sizeof beta);
	memcpy(m->state, rm, sizeof rm);
	memcpy(m->state + 2, rv, sizeof rv);
	const float *x = m->act[0], *y = m->act[1];
	/* evaluation: the running statistics, unchanged */
	model_forward(m, NULL, B, NULL);
	for (int c = 0; c < 2; c++)
		for (int i = 0; i < N; i++) {
			double want = gamma[c] * (x[c * N + i] - rm[c]) /
					      sqrt(rv[c] + 1e-5) + beta[c];
			ck_assert_msg(fabs(y[c * N + i] - want) < 1e-5,
				      "eval c %d i %d: %g, want %g", c, i,
				      (double)y[c * N + i], want);
		}
	ck_assert(m->state[0] == rm[0] && m->state[1] == rm[1] &&
		  m->state[2] == rv[0] && m->state[3] == rv[1]);
	/* training: the batch's statistics; the running ones move by 0.1
	 * toward the mean and the unbiased variance */
	model_step(m, NULL, B, 0);
	for (int c = 0; c < 2; c++) {
		double mu = 0, var = 0;
		for (int i = 0; i < N; i++)
			mu += x[c * N + i];
		mu /= N;
		for (int i = 0; i < N; i++)
			var += (x[c * N + i] - mu) * (x[c * N + i] - mu);
		var /= N;
		for (int i = 0; i < N; i++) {
			double want = gamma[c] * (x[c * N + i] - mu) / sqrt(var + 1e-5) +
				      beta[c];
			ck_assert(fabs(y[c * N + i] - want) < 1e-5);
		}
		ck_assert_double_eq_tol(m->state[c], 0.9 * rm[c] + 0.1 * mu, 1e-6);
		ck_assert_double_eq_tol(m->state[2 + c],
					0.9 * rv[c] + 0.1 * var * N / (N - 1), 1e-6);
	}
	model_free(m);
	backend_free(be);
}
END_TEST

/* A small set for the state's tests: n samples of 2 x 2 x 2, channel 1
 * shifted and scaled so the two channels' statistics differ. */
static dataset
tiny_set(uint32_t n, uint64_t seed)
{
	dataset d = {.n = n, .c = 2, .h = 2, .w = 2, .dim = 8, .classes = 3};
	d.x = malloc(sizeof(float) * n * 8);
	d.y = malloc(n);
	rng r;
	rng_seed(&r, seed, 1);
	for (uint32_t s = 0; s < n; s++) {
		for (int k = 0; k < 8; k++)
			d.x[s * 8 + k] = (float)(k < 4 ? rng_normal(&r)
						       : 3.0 + 2.0 * rng_normal(&r) + 0.1 * s);
		d.y[s] = (uint8_t)(s % 3);
	}
	return d;
}

START_TEST(recompute_is_batch_average)
{
	/* batches of 4 from sample 0 of 14 samples: 4, 4, 4, 2; nbatches 3
	 * stops before the short one, 9 takes all four. Each running
	 * statistic must end as the plain average of the batches' means
	 * and unbiased variances (whatever it was before), bit for bit the
	 * same on a repeat. */
	backend *be = open_be("ref", 1);
	dataset d = tiny_set(14, 9);
	model *m = bn_model(be, 4);
	for (int nb = 3; nb <= 9; nb += 6) {
		load_random(m, 4, 1);
		model_step(m, NULL, 4, 0); /* state off its start */
		model_recompute_state(m, NULL, &d, nb);
		int batches = nb == 3 ? 3 : 4;
		for (int c = 0; c < 2; c++) {
			double msum = 0, vsum = 0;
			for (int k = 0; k < batches; k++) {
				int b0 = 4 * k, bn = SL_MIN(4, 14 - b0), n = 4 * bn;
				double mu = 0, v = 0;
				for (int s = b0; s < b0 + bn; s++)
					for (int p = 0; p < 4; p++)
						mu += d.x[s * 8 + c * 4 + p];
				mu /= n;
				for (int s = b0; s < b0 + bn; s++)
					for (int p = 0; p < 4; p++) {
						double e = d.x[s * 8 + c * 4 + p] - mu;
						v += e * e;
					}
				msum += mu;
				vsum += v / (n - 1);
			}
			double wm = msum / batches, wv = vsum / batches;
			ck_assert_msg(fabs(m->state[c] - wm) < 1e-5 * (1 + fabs(wm)),
				      "nb %d c %d mean %g, want %g", nb, c,
				      (double)m->state[c], wm);
			ck_assert_msg(fabs(m->state[2 + c] - wv) < 1e-5 * (1 + fabs(wv)),
				      "nb %d c %d var %g, want %g", nb, c,
				      (double)m->state[2 + c], wv);
		}
		float again[4];
		memcpy(again, m->state, sizeof again);
		model_step(m, NULL, 4, 0);
		model_recompute_state(m, NULL, &d, nb);
		ck_assert_mem_eq(again, m->state, sizeof again);
	}
	model_free(m);
	free(d.x);
	free(d.y);
	backend_free(be);
}
END_TEST

START_TEST(resnet_state_modes)
{
	/* a resnet's model_forward leaves the state alone; model_step and
	 * model_forward_mode(training) move it; model_recompute_state at
	 * other parameters gives other statistics, the same ones twice */
	backend *be = open_be("cpu", 2);
	model *m = resnet("resnet:8", 3, 8, 8, 3, 4, 2, be);
	size_t ns = model_state_floats(m);
	float *s0 = malloc(sizeof(float) * ns), *s1 = malloc(sizeof(float) * ns);
	memcpy(s0, m->state, sizeof(float) * ns);
	load_random(m, 4, 3);
	model_forward(m, NULL, 4, NULL);
	ck_assert_mem_eq(s0, m->state, sizeof(float) * ns);
	model_step(m, NULL, 4, 0);
	ck_assert(memcmp(s0, m->state, sizeof(float) * ns) != 0);
	memcpy(s1, m->state, sizeof(float) * ns);
	model_forward_mode(m, NULL, 4, NULL, 1);
	ck_assert(memcmp(s1, m->state, sizeof(float) * ns) != 0);
	dataset d = {.n = 10, .c = 3, .h = 8, .w = 8, .dim = 192, .classes = 3};
	d.x = malloc(sizeof(float) * 10 * 192);
	d.y = calloc(10, 1);
	for (int i = 0; i < 10 * 192; i++)
		d.x[i] = (float)((i * 37) % 101) / 101.0f;
	model_recompute_state(m, NULL, &d, 3);
	memcpy(s1, m->state, sizeof(float) * ns);
	model_recompute_state(m, NULL, &d, 3);
	ck_assert_mem_eq(s1, m->state, sizeof(float) * ns);
	float *p = malloc(sizeof(float) * m->n_params);
	memcpy(p, m->params, sizeof(float) * m->n_params);
	p[0] += 0.5f; /* the stem's first weight */
	model_recompute_state(m, p, &d, 3);
	ck_assert(memcmp(s1, m->state, sizeof(float) * ns) != 0);
	free(p);
	free(d.x);
	free(d.y);
	free(s0);
	free(s1);
	model_free(m);
	backend_free(be);
}
END_TEST

/* ---- partial depth ---------------------------------------------------- */

/* model_step at every depth 1..n_param_layers - 1 on m (ref backend,
 * loaded): the tail of the top `depth` layers bit for bit the full
 * backward's, every parameter below it untouched (poisoned with a NaN
 * pattern before the step, so a write of any value shows). */
static void
depths_match_full(model *m, int batch)
{
	model_step(m, NULL, batch, 0);
	size_t n = m->n_params;
	float *full = malloc(sizeof(float) * n);
	memcpy(full, m->grads, sizeof(float) * n);
	const uint32_t poison = 0x7fc0dead;
	for (int k = 1; k < m->n_param_layers; k++) {
		for (size_t i = 0; i < n; i++)
			memcpy(&m->grads[i], &poison, sizeof poison);
		model_step(m, NULL, batch, k);
		size_t off = model_tail_offset(m, k);
		ck_assert_msg(off > 0 && off < n, "depth %d: tail at %zu of %zu", k, off, n);
		ck_assert_msg(!memcmp(m->grads + off, full + off, sizeof(float) * (n - off)),
			      "depth %d: the tail differs from full backprop's", k);
		for (size_t i = 0; i < off; i++)
			ck_assert_msg(!memcmp(&m->grads[i], &poison, sizeof poison),
				      "depth %d wrote param %zu below its tail", k, i);
	}
	free(full);
}

START_TEST(partial_depth_exact)
{
	/* a suffix of the nodes is closed under "reads": every reader of a
	 * node at or above the stop runs backward too, in the full
	 * backward's order, so each tail layer's gradient is summed from the
	 * same terms in the same order. A depth inside a block (its shortcut
	 * hands nothing to the block's input, below the stop) is as exact as
	 * one at a block boundary. resnet:8 at every depth, resnet20 (3 x 8 x
	 * 8) at every depth too. */
	static const char *const specs[] = {"resnet:8", "resnet20"};
	backend *be = open_be("ref", 1);
	for (int s = 0; s < 2; s++) {
		model *m = resnet(specs[s], 3, 8, 8, 3, 4 - s, 21 + 2 * (uint64_t)s, be);
		load_random(m, 4 - s, 22 + 2 * (uint64_t)s);
		depths_match_full(m, 4 - s);
		model_free(m);
	}
	backend_free(be);
}
END_TEST

START_TEST(block_depths)
{
	/* resnet:(6n + 2)'s cut depths: the head (1), each of its 3n blocks
	 * from its first conv (1 + 4 b), and the stem's bn (its conv's
	 * output alone crosses); a depth inside a block has the block's
	 * input crossing beside the branch. Built and from the spec alike. */
	backend *be = open_be("ref", 1);
	static const struct {
		const char *spec;
		int layers, blocks;
	} want[] = {{"resnet:8", 15, 3}, {"resnet20", 39, 9}, {"resnet:32", 63, 15}};
	for (int s = 0; s < 3; s++) {
		model *m = resnet(want[s].spec, 3, 8, 8, 3, 1, 1, be);
		int got[64], spec_got[64], k = model_cut_depths(m, got, 64);
		ck_assert_int_eq(k, want[s].blocks + 2);
		ck_assert_int_eq(model_spec_cut_depths(want[s].spec, spec_got, 64), k);
		ck_assert_mem_eq(got, spec_got, sizeof(int) * (size_t)k);
		for (int b = 0; b <= want[s].blocks; b++)
			ck_assert_int_eq(got[b], 1 + 4 * b);
		ck_assert_int_eq(got[k - 1], want[s].layers - 1);
		/* a cut's stop node: a block's first conv, the head, the stem bn */
		for (int i = 0; i < k; i++) {
			size_t off = model_tail_offset(m, got[i]);
			int at = 0;
			while (m->nodes[at].p_off != off || !m->nodes[at].n_params)
				at++;
			const char *op = m->nodes[at].op->name;
			ck_assert_msg(!strcmp(op, i == 0 ? "dense" : i == k - 1 ? "batchnorm" : "conv2d") &&
					      (i == 0 || i == k - 1 || !strcmp(m->nodes[at - 1].op->name, "shortcut") ||
					       at == 2),
				      "%s: depth %d stops at node %d (%s)", want[s].spec, got[i], at, op);
		}
		model_free(m);
	}
	char buf[64];
	int d[16], k = model_spec_cut_depths("resnet20", d, 16);
	ck_assert_str_eq(model_depths_str(d, k, buf, sizeof buf),
			 "1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 38");
	backend_free(be);
}
END_TEST

START_TEST(spb_depth_at_blocks)
{
	/* a run of resnet:8 takes spb_depth at its block boundaries (and 0,
	 * and 15, full backprop too): in the run object, in its schedule
	 * and as a change mid-run, each refused naming the field, the model
	 * and the depths; the snapshot's model_summary lists them. A
	 * sequential model takes every depth. */
	char err[SL_ERR_LEN];
	static const int ok[] = {0, 1, 5, 9, 13, 14, 15};
	for (int i = 0; i < 7; i++)
		ck_assert_msg(config_spb_fits("spb_depth", ok[i], "resnet:8", err) == 0, "%s", err);
	ck_assert_int_eq(config_spb_fits("worker_overrides[1].spb_depth", 3, "resnet:8", err),
			 -SL_EINVAL);
	ck_assert_str_eq(err, "worker_overrides[1].spb_depth: 3 ends inside a block of resnet:8: "
			      "expected 0 (full backprop) or a block boundary: 1, 5, 9, 13, 14 (the "
			      "nearest: 1 and 5)");
	ck_assert_int_eq(config_spb_fits("spb_depth", 16, "resnet:8", err), -SL_EINVAL);
	ck_assert_str_eq(err, "spb_depth: must be in [0, 15] (\"resnet:8\" has 15 parameterised "
			      "layers), got 16");
	for (int k = 0; k <= 3; k++)
		ck_assert_int_eq(config_spb_fits("spb_depth", k, "mlp:784-256-128-10", err), 0);
	dataset_pair d;
	ck_assert_msg(ds_load("synthetic:64", 1, &d, err) == 0, "%s", err);
	run_config c;
	config_defaults(&c);
	c.stop_steps = 3; /* 2 workers of batch 8, virtual clock, one thread */
	c.threads = 1;
	snprintf(c.model, sizeof(c.model), "resnet:8");
	c.workers = 2;
	snprintf(c.clock, sizeof(c.clock), "virtual");
	c.batch = 8;
	run_sched s = {.by_version = 1, .v = 1,
		       .cmd = {.worker = 1, .fields = CMD_SPB, .spb_depth = 6}};
	run *r;
	ck_assert_int_eq(run_new(&c, &d, &s, 1, NULL, &r, err), -SL_EINVAL);
	ck_assert_str_eq(err, "schedule[0].set.spb_depth: 6 ends inside a block of resnet:8: "
			      "expected 0 (full backprop) or a block boundary: 1, 5, 9, 13, 14 (the "
			      "nearest: 5 and 9)");
	s.cmd.spb_depth = 9;
	ck_assert_msg(run_new(&c, &d, &s, 1, NULL, &r, err) == 0, "%s", err);
	run_cmd mid = {.worker = 0, .fields = CMD_SPB, .spb_depth = 12};
	ck_assert_int_eq(run_command(r, &mid, err), -SL_EINVAL);
	ck_assert_str_eq(err, "spb_depth: 12 ends inside a block of resnet:8: expected 0 (full "
			      "backprop) or a block boundary: 1, 5, 9, 13, 14 (the nearest: 9 and 13)");
	mid.spb_depth = 13;
	ck_assert_msg(run_command(r, &mid, err) == 0, "%s", err);
	ck_assert_int_eq(run_exec(r), 0);
	run_snapshot *snap = run_snapshot_get(r);
	static const int depths[] = {0, 1, 5, 9, 13, 14};
	ck_assert_int_eq(snap->model.n_spb_depths, 6);
	ck_assert_mem_eq(snap->model.spb_depths, depths, sizeof(depths));
	ck_assert(snap->workers[0].spb_depth == 13 && snap->workers[1].spb_depth == 9);
	run_snapshot_put(snap);
	run_free(r);
	ds_pair_free(&d);
}
END_TEST

START_TEST(partial_depth_flops)
{
	model *m = resnet("resnet:8", 3, 8, 8, 3, 2, 21, open_be("ref", 1));
	/* resnet:8's nodes: 0 conv, 1 bn (the stem); blocks at 2-6, 7-11,
	 * 12-16 (conv, bn, conv, bn, shortcut); 17 avgpool, 18 dense. Depth
	 * d's step costs the forward, every weight gradient from its stop
	 * up, and each input gradient toward a node at or above the stop. */
	const node *nd = m->nodes;
	double fwd = 0;
	for (int i = 0; i < m->n_nodes; i++)
		fwd += nd[i].flops_fwd;
	/* depth 1: the dense layer's weights; its input's gradient is not
	 * needed */
	ck_assert_double_eq_tol(model_step_flops(m, 1), fwd + nd[18].flops_bwd_w, 1e-6);
	/* depth 2 stops at the last bn (15): the shortcut hands the bn its
	 * gradient (a copy, no FLOPs) and the block's input (11) none */
	ck_assert_double_eq_tol(model_step_flops(m, 2) - model_step_flops(m, 1),
				nd[15].flops_bwd_w + nd[17].flops_bwd_x + nd[18].flops_bwd_x,
				1e-6);
	/* depth 5 (the last block, from its first conv) to depth 6 (into the
	 * block below, its second bn): that bn's weights, the last block's
	 * first conv's input gradient, and the shortcut's to the block's
	 * input */
	ck_assert_double_eq_tol(model_step_flops(m, 6) - model_step_flops(m, 5),
				nd[10].flops_bwd_w + nd[12].flops_bwd_x + nd[16].flops_bwd_x,
				1e-6);
	/* full backprop over depth 14 (from the stem's bn): the stem conv's
	 * weights and the bn's input gradient; never the model's input's */
	ck_assert_double_eq_tol(model_step_flops(m, 0) - model_step_flops(m, 14),
				nd[0].flops_bwd_w + nd[1].flops_bwd_x, 1e-6);
	for (int k = 1; k < m->n_param_layers; k++)
		ck_assert_msg(model_step_flops(m, k) < model_step_flops(m, k + 1),
			      "depth %d costs no less than %d", k + 1, k);
	ck_assert_double_eq(model_step_flops(m, 0), model_step_flops(m, 15));
	backend *be = m->be;
	model_free(m);
	backend_free(be);
}
END_TEST

/* ---- cpu against ref; learning ---------------------------------------- */

START_TEST(cpu_matches_ref)
{
	/* one training step of resnet:8 on 3 x 12 x 12, batch 8, 4 classes:
	 * the loss, every gradient and the running statistics of cpu (2
	 * threads) within float tolerance of ref's */
	backend *bc = open_be("cpu", 2), *br = open_be("ref", 1);
	model *mc = resnet("resnet:8", 3, 12, 12, 4, 8, 7, bc);
	model *mr = resnet("resnet:8", 3, 12, 12, 4, 8, 7, br);
	ck_assert_mem_eq(mc->params, mr->params, sizeof(float) * mc->n_params);
	load_random(mc, 8, 8);
	load_random(mr, 8, 8);
	double lc = model_step(mc, NULL, 8, 0), lr = model_step(mr, NULL, 8, 0);
	ck_assert_msg(fabs(lc - lr) < 1e-5, "loss cpu %.9g ref %.9g", lc, lr);
	double gmax = 0;
	for (size_t i = 0; i < mr->n_params; i++)
		gmax = fmax(gmax, fabs(mr->grads[i]));
	for (size_t i = 0; i < mr->n_params; i++)
		ck_assert_msg(fabs(mc->grads[i] - mr->grads[i]) <=
				      1e-4 * gmax + 1e-3 * fabs(mr->grads[i]),
			      "param %zu: cpu %g ref %g", i, (double)mc->grads[i],
			      (double)mr->grads[i]);
	for (size_t i = 0; i < model_state_floats(mr); i++)
		ck_assert_msg(fabs(mc->state[i] - mr->state[i]) <=
				      1e-5 * (1 + fabs(mr->state[i])),
			      "state %zu: cpu %g ref %g", i, (double)mc->state[i],
			      (double)mr->state[i]);
	int cc, cr;
	double ec = model_forward(mc, NULL, 8, &cc), er = model_forward(mr, NULL, 8, &cr);
	ck_assert_msg(fabs(ec - er) < 1e-5, "eval loss cpu %.9g ref %.9g", ec, er);
	model_free(mc);
	model_free(mr);
	backend_free(bc);
	backend_free(br);
}
END_TEST

START_TEST(sgd_lowers_loss)
{
	/* 48 images of 3 x 8 x 8, the class the brightest channel's: 40
	 * steps of SGD (lr 0.05, momentum 0.9) on batches of 16 lower the
	 * training-mode loss of the whole set; after model_recompute_state
	 * the evaluation-mode accuracy is well above chance */
	backend *be = open_be("cpu", 2);
	const uint32_t n = 48;
	dataset d = {.n = n, .c = 3, .h = 8, .w = 8, .dim = 192, .classes = 3};
	d.x = malloc(sizeof(float) * n * 192);
	d.y = malloc(n);
	rng r;
	rng_seed(&r, 17, 1);
	for (uint32_t s = 0; s < n; s++) {
		d.y[s] = (uint8_t)(s % 3);
		for (int k = 0; k < 192; k++)
			d.x[s * 192 + k] = (float)(rng_normal(&r) +
						   (k / 64 == d.y[s] ? 0.7 : 0.0));
	}
	model *m = resnet("resnet:8", 3, 8, 8, 3, 48, 4, be);
	uint32_t idx[48];
	for (uint32_t i = 0; i < n; i++)
		idx[i] = i;
	model_load_batch(m, d.x, d.y, idx, 48);
	double l0 = train_loss(m, 48);
	float *mom = calloc(m->n_params, sizeof(float));
	for (int step = 0; step < 40; step++) {
		model_load_batch(m, d.x, d.y, idx + 16 * (step % 3), 16);
		model_step(m, NULL, 16, 0);
		be->ops->sgd(be, m->params, m->grads, mom, m->n_params, 0.05f, 0.9f, 0);
	}
	model_load_batch(m, d.x, d.y, idx, 48);
	double l1 = train_loss(m, 48);
	ck_assert_msg(l1 < 0.5 * l0, "loss %g -> %g", l0, l1);
	model_recompute_state(m, NULL, &d, 3);
	double loss, acc;
	model_evaluate(m, NULL, &d, &loss, &acc);
	ck_assert_msg(acc > 0.8, "accuracy %g, loss %g", acc, loss);
	free(mom);
	free(d.x);
	free(d.y);
	model_free(m);
	backend_free(be);
}
END_TEST

/* ---- specs refused ----------------------------------------------------- */

START_TEST(spec_refusals)
{
	backend *be = open_be("cpu", 1);
	static const char *const bad[] = {"resnet:21", "resnet:abc", "resnet:2",
					  "resnet:", "resnet:20x", "resnet:-4",
					  "resnet:206"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		model *m = (model *)1;
		char err[SL_ERR_LEN] = "";
		ck_assert_int_eq(model_new(bad[i], 3, 32, 32, 10, 2, 1, be, &m, err),
				 -SL_EINVAL);
		ck_assert_ptr_null(m);
		char quoted[64];
		snprintf(quoted, sizeof quoted, "\"%s\"", bad[i]);
		ck_assert_msg(strstr(err, quoted) && strstr(err, "resnet:N with N = 6n + 2") &&
				      strstr(err, "resnet:8, resnet:14, resnet:20"),
			      "%s: \"%s\"", bad[i], err);
		ck_assert_int_eq(model_spec_param_layers(bad[i]), -1);
	}
	/* the deepest the node table holds, and the unknown name's list */
	model *m;
	char err[SL_ERR_LEN];
	ck_assert_int_eq(model_spec_param_layers("resnet:200"), 12 * 33 + 3);
	ck_assert_int_eq(model_new("resnet", 3, 32, 32, 10, 2, 1, be, &m, err), -SL_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "resnet20, resnet:N"));
	backend_free(be);
}
END_TEST

static Suite *
resnet_suite(void)
{
	Suite *s = suite_create("resnet");
	TCase *tc = tcase_create("resnet");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, fd_resnet8);
	tcase_add_test(tc, param_counts);
	tcase_add_test(tc, kaiming_init);
	tcase_add_test(tc, eval_uses_running_stats);
	tcase_add_test(tc, recompute_is_batch_average);
	tcase_add_test(tc, resnet_state_modes);
	tcase_add_test(tc, partial_depth_exact);
	tcase_add_test(tc, partial_depth_flops);
	tcase_add_test(tc, block_depths);
	tcase_add_test(tc, spb_depth_at_blocks);
	tcase_add_test(tc, cpu_matches_ref);
	tcase_add_test(tc, sgd_lowers_loss);
	tcase_add_test(tc, spec_refusals);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(resnet_suite)
