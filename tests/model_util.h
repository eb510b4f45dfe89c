/* model_util.h - what the model tests (test_model.c, test_model_graph.c)
 * share: nodes, random batches, the finite-difference gradient check, a
 * model from nodes, partial depths against the full backward, and the
 * backends the loop tests run on (DEVICES). */
#ifndef SL_TEST_MODEL_UTIL_H
#define SL_TEST_MODEL_UTIL_H

#include <math.h>

#include "backend.h"
#include "model.h"
#include "testutil.h"

/* A node reading the one before it. */
static inline node_desc
L(const char *op, int units, int ks, int stride, int pad)
{
	return (node_desc){.op = op, .units = units, .k = ks, .stride = stride,
			   .pad = pad};
}

/* Random inputs in [0,1) and labels, loaded into m. */
static inline void
load_random(model *m, int batch, uint64_t seed)
{
	rng r;
	rng_seed(&r, seed, 7);
	float *x = malloc(sizeof(float) * (size_t)batch * m->in_dim);
	uint8_t *y = malloc((size_t)batch);
	uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)batch);
	for (long i = 0; i < (long)batch * m->in_dim; i++)
		x[i] = (float)rng_uniform(&r);
	for (int b = 0; b < batch; b++) {
		y[b] = (uint8_t)rng_below(&r, (uint64_t)m->classes);
		idx[b] = (uint32_t)b;
	}
	model_load_batch(m, x, y, idx, batch);
	free(x);
	free(y);
	free(idx);
}

/* Compare analytic gradients with central differences on up to `probe`
 * parameters (all if probe <= 0); returns the worst normalised error. */
static inline double
grad_check(model *m, int batch, int probe, uint64_t seed)
{
	model_step(m, NULL, batch, 0);
	float *g = malloc(sizeof(float) * m->n_params);
	memcpy(g, m->grads, sizeof(float) * m->n_params);
	rng r;
	rng_seed(&r, seed, 9);
	size_t n = m->n_params;
	int count = probe > 0 && (size_t)probe < n ? probe : (int)n;
	double worst = 0.0;
	int kinks = 0;
	const double l0 = model_forward(m, NULL, batch, NULL);
	for (int t = 0; t < count; t++) {
		size_t i = count == (int)n ? (size_t)t : (size_t)rng_below(&r, n);
		float orig = m->params[i];
		const float eps = 1e-3f;
		double f[5]; /* loss at orig + (j - 2) eps */
		for (int j = 0; j < 5; j++) {
			m->params[i] = orig + (float)(j - 2) * eps;
			f[j] = j == 2 ? l0 : model_forward(m, NULL, batch, NULL);
		}
		m->params[i] = orig;
		/* A relu or max-pool switch inside [-2 eps, 2 eps] makes the loss
		 * non-smooth there; the one-sided slopes then disagree. Such
		 * probes say nothing about the gradient: count and skip them. */
		double fwd = (f[3] - f[2]) / eps, bwd = (f[2] - f[1]) / eps;
		double fwd2 = (f[4] - f[3]) / eps, bwd2 = (f[1] - f[0]) / eps;
		double tol = 0.01 * (fabs(fwd) + fabs(bwd)) + 1e-3;
		if (fabs(fwd - bwd) > tol || fabs(fwd2 - fwd) > tol ||
		    fabs(bwd2 - bwd) > tol) {
			kinks++;
			continue;
		}
		/* fourth-order central difference */
		double num = (8.0 * (f[3] - f[1]) - (f[4] - f[0])) / (12.0 * eps);
		/* float32 forward passes: slopes below ~1e-4 are noise */
		double err = fabs(num - g[i]) / (5e-3 + fabs(num) + fabs(g[i]));
		if (err > worst)
			worst = err;
		ck_assert_msg(err < 2e-2,
			      "param %zu: analytic %.6g numeric %.6g (err %.3g)", i,
			      (double)g[i], num, err);
	}
	ck_assert_msg(kinks <= count / 10, "%d of %d probes hit a kink", kinks,
		      count);
	free(g);
	return worst;
}

static inline model *
mk_model(const node_desc *d, int n, shape in, int classes, int batch, backend *be)
{
	model *m;
	char err[SL_ERR_LEN];
	int rc = model_new_nodes(d, n, in, classes, batch, 3, be, &m, err);
	ck_assert_msg(rc == 0, "model_new_nodes: %s", err);
	return m;
}

/* m's backward to depth k, for k = 1 .. depths, against the full one on
 * the batch loaded: the tail's gradients as the full one computes them,
 * none below it, and no more FLOPs than the full step. */
static inline void
check_partial_depths(model *m, int batch, int depths)
{
	model_step(m, NULL, batch, 0);
	float *full = malloc(sizeof(float) * m->n_params);
	memcpy(full, m->grads, sizeof(float) * m->n_params);
	for (int k = 1; k <= depths; k++) {
		memset(m->grads, 0, sizeof(float) * m->n_params);
		model_step(m, NULL, batch, k);
		size_t off = model_tail_offset(m, k);
		for (size_t i = off; i < m->n_params; i++)
			ck_assert_msg(m->grads[i] == full[i], "depth %d param %zu", k, i);
		for (size_t i = 0; i < off; i++)
			ck_assert_msg(m->grads[i] == 0.0f, "depth %d wrote param %zu", k, i);
		ck_assert(model_step_flops(m, k) <= model_step_flops(m, 0));
	}
	free(full);
}

static const char *const DEVICES[] = {"cpu", "ref"};
#define N_DEVICES 2

static inline backend *
dev(int i, int threads)
{
	backend *be;
	char err[SL_ERR_LEN];
	ck_assert_msg(backend_open(DEVICES[i], threads, &be, err) == 0, "%s", err);
	ck_assert_str_eq(backend_name(be), DEVICES[i]);
	return be;
}

static inline backend *
cpu(int threads)
{
	return dev(0, threads);
}

#endif
