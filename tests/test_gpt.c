/* test_gpt.c - the gpt:L-H-E-T model (its ops are test_gpt_ops.c): gpt
 * specs' sizes and init (std 0.02, residual projections 0.02 / sqrt(2 L)),
 * bad specs refused naming the field, a backend without the ops refused
 * naming the op, the per-position loss against its formula, the whole
 * step's gradient (the tied table's two shares included) against central
 * differences on ref, the same network given as a graph (init_std on its
 * residual projections: the builtin's initial bits), and a tiny gpt
 * learning a toy sequence task through model_step on ref and cpu. */
#include <math.h>

#include "backend.h"
#include "dataset.h"
#include "gpt_util.h"
#include "graph_spec.h"
#include "model.h"
#include "rng.h"
#include "run.h"
#include "runrec.h"
#include "sl.h"
#include "testutil.h"

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
	/* a backend without the sequence ops (a backend table without the sequence ops) */
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
		/* init_std out of (0, 1] or no number: refused by node and field */
		{"graph:embed(units=8,vocab=5);linear(units=8,init_std=0);lmhead(tie=1)",
		 "model.nodes[1].init_std: must be a number in (0, 1], got \"0\""},
		{"graph:embed(units=8,vocab=5);linear(units=8,init_std=1.5);lmhead(tie=1)",
		 "model.nodes[1].init_std: must be a number in (0, 1], got \"1.5\""},
		{"graph:embed(units=8,vocab=5);linear(units=8,init_std=-0.1);lmhead(tie=1)",
		 "model.nodes[1].init_std: must be a number in (0, 1], got \"-0.1\""},
		{"graph:embed(units=8,vocab=5);linear(units=8,init_std=nan);lmhead(tie=1)",
		 "model.nodes[1].init_std: must be a number in (0, 1], got \"nan\""},
		{"graph:embed(units=8,vocab=5);linear(units=8,init_std=1e-60);lmhead(tie=1)",
		 "model.nodes[1].init_std: must be a number in (0, 1], got \"1e-60\""},
		{"graph:embed(units=8,vocab=5);linear(units=8,init_std=0.1x);lmhead(tie=1)",
		 "model.nodes[1].init_std: must be a number in (0, 1], got \"0.1x\""},
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
	/* two blocks, the residual projections' init sd given (init_std:
	 * 0.02 / sqrt(2 L) = 0.01): the builtin's initial parameters, bit for
	 * bit, for the same seed; without it, other weights */
	static const char block2[] =
		"graph:embed(units=8,vocab=5);"
		"layernorm();linear(units=24);attention(heads=2);linear(units=8,init_std=0.01);"
		"add(in=0+4);layernorm();linear(units=32);gelu();linear(units=8,init_std=0.01);"
		"add(in=5+9);"
		"layernorm();linear(units=24);attention(heads=2);linear(units=8,init_std=0.01);"
		"add(in=10+14);layernorm();linear(units=32);gelu();linear(units=8,init_std=0.01);"
		"add(in=15+19);layernorm();lmhead(tie=1)";
	a = gpt_on(be, "gpt:L2-H2-E8-T7", 3);
	b = gpt_on(be, block2, 3);
	ck_assert_int_eq(a->n_nodes, b->n_nodes);
	ck_assert_uint_eq(a->n_params, b->n_params);
	ck_assert(!memcmp(a->params, b->params, sizeof(float) * a->n_params));
	for (int i = 0; i < a->n_nodes; i++)
		ck_assert_msg(a->nodes[i].init_std == b->nodes[i].init_std, "node %d", i);
	ck_assert(a->nodes[4].init_std == 0.01f && b->nodes[9].init_std == 0.01f);
	model_free(b);
	char plain[sizeof(block2)];
	char *w = plain;
	for (const char *p = block2; *p; p++) /* block2 without its init_std */
		if (!strncmp(p, ",init_std=0.01", 14))
			p += 13;
		else
			*w++ = *p;
	*w = 0;
	b = gpt_on(be, plain, 3);
	ck_assert_uint_eq(a->n_params, b->n_params);
	ck_assert(memcmp(a->params, b->params, sizeof(float) * a->n_params));
	model_free(b);
	/* the spec round trip keeps it: parsed nodes appended back give the
	 * same string, and the default (0.02) given is as left out */
	node_desc d[MODEL_MAX_NODES];
	int n;
	char err[SL_ERR_LEN], again[sizeof(block2)] = GRAPH_PREFIX;
	ck_assert_msg(graph_spec_parse(block2, d, MODEL_MAX_NODES, &n, err) == 0, "%s", err);
	ck_assert_int_eq(n, 23);
	ck_assert(d[4].init_std == 0.01f && d[19].init_std == 0.01f && d[2].init_std == 0);
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(graph_spec_append(again, sizeof(again), &d[i]), 0);
	ck_assert_str_eq(again, block2);
	ck_assert_int_eq(graph_spec_parse("graph:linear(units=8,init_std=0.02)", d,
					  MODEL_MAX_NODES, &n, err), 0);
	ck_assert(d[0].init_std == 0);
	model_free(a);
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
