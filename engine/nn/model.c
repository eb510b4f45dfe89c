/* model.c - models as graphs of nodes over a flat parameter buffer: the
 * node list built from descriptions (inputs checked, shapes inferred by
 * each op, parameters laid out), forward and backward with partial depth,
 * evaluation, and per-node cost accounting. Spec strings are expanded in
 * model_spec.c, the data a model reads is loaded in model_data.c; the ops
 * themselves are engine/nn/ops/ (op.h). */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "model_impl.h"

/* ---- construction ----------------------------------------------------- */

/* Node i's op and inputs from its description, checked: a known op, as
 * many inputs as it reads, each the model's input or an earlier node. */
static int
link_node(model *m, const node_desc *d, int i, node *nd, char *err)
{
	nd->op = op_find(d->op);
	if (!nd->op) {
		char names[256];
		size_t len = 0;
		names[0] = 0;
		for (int k = 0; op_table[k] && len < sizeof names; k++)
			len += (size_t)snprintf(names + len, sizeof names - len, "%s%s",
						k ? ", " : "", op_table[k]->name);
		return sl_fail(err, SL_EINVAL, "model: node %d: unknown op \"%s\" (expected %s)",
			       i, d->op ? d->op : "", names);
	}
	if (d->n_in == 0 && nd->op->n_in == 1) {
		nd->n_in = 1;
		nd->inputs[0] = i - 1;
	} else if (d->n_in != nd->op->n_in) {
		return sl_fail(err, SL_EINVAL, "model: node %d (%s) reads %d inputs, not %d",
			       i, nd->op->name, nd->op->n_in, d->n_in);
	} else {
		nd->n_in = d->n_in;
		for (int k = 0; k < d->n_in; k++)
			nd->inputs[k] = d->inputs[k];
	}
	for (int k = 0; k < nd->n_in; k++) {
		int j = nd->inputs[k];
		if (j < -1 || j >= i)
			return sl_fail(err, SL_EINVAL,
				       "model: node %d (%s) reads node %d: a node reads only earlier "
				       "nodes or the model's input (-1)", i, nd->op->name, j);
		nd->in[k] = j < 0 ? m->input : m->nodes[j].out;
		if (j >= 0)
			m->nodes[j].n_out++;
	}
	return 0;
}

static int
build(model *m, const node_desc *desc, int n, char *err)
{
	size_t off = 0;
	if (n < 1)
		return sl_fail(err, SL_EINVAL, "model: no nodes");
	if (n > MODEL_MAX_NODES)
		return sl_fail(err, SL_EINVAL, "model: %d nodes, at most %d", n,
			       MODEL_MAX_NODES);
	const op_class *relu_op = op_find("relu");
	/* ties first: a tied table is its head's parameter (the top of the
	 * model, so every partial backward trains it), the embed reads it */
	int head_of[MODEL_MAX_NODES];
	for (int i = 0; i < n; i++)
		head_of[i] = -1;
	for (int i = 0; i < n; i++) {
		if (!desc[i].tie)
			continue;
		int j = desc[i].tie - 1;
		if (j < 0 || j >= i || !desc[j].op || strcmp(desc[j].op, "embed"))
			return sl_fail(err, SL_EINVAL,
				       "model.nodes[%d] (%s): tie names node %d, which is no "
				       "earlier embed node", i, desc[i].op ? desc[i].op : "?", j);
		if (head_of[j] >= 0)
			return sl_fail(err, SL_EINVAL,
				       "model.nodes[%d] (%s): tie names node %d, whose table "
				       "node %d already reads", i, desc[i].op ? desc[i].op : "?", j,
				       head_of[j]);
		head_of[j] = i;
	}
	for (int i = 0; i < n; i++) {
		node *nd = &m->nodes[i];
		const node_desc *d = &desc[i];
		*nd = (node){.units = d->units, .k = d->k, .stride = d->stride,
			     .pad = d->pad, .relu = d->relu, .no_bias = d->no_bias,
			     .heads = d->heads, .vocab = d->vocab, .init_std = d->init_std};
		int rc = link_node(m, d, i, nd, err);
		if (rc < 0)
			return rc;
		if (d->tie) /* a head holding an earlier embed node's table */
			nd->tie = &m->nodes[d->tie - 1];
		if (head_of[i] >= 0) { /* an embed whose table a later head holds */
			nd->tie = &m->nodes[head_of[i]];
			nd->tied = 1;
		}
		m->n_nodes = i + 1;
		/* He init where a relu follows: fused, or a relu node reads it */
		nd->he_init = nd->relu || d->he;
		if (nd->op == relu_op && nd->inputs[0] >= 0)
			m->nodes[nd->inputs[0]].he_init = 1;
		if ((rc = nd->op->setup(nd, err)) < 0) {
			/* say which node: "model.nodes[3] (conv2d): ..." */
			char why[SL_ERR_LEN];
			snprintf(why, sizeof(why), "%s", !strncmp(err, "model: ", 7) ? err + 7 : err);
			return sl_fail(err, -rc, "model.nodes[%d] (%s): %s", i, nd->op->name, why);
		}
		nd->p_off = off;
		nd->s_off = m->n_state;
		nd->act_floats = shape_size(nd->out);
		off += nd->n_params;
		m->n_state += nd->n_state;
	}
	for (int i = 0; i < n - 1; i++)
		if (!m->nodes[i].n_out)
			return sl_fail(err, SL_EINVAL,
				       "model: node %d (%s): nothing reads its output (only the last "
				       "node's is the model's)", i, m->nodes[i].op->name);
	/* the output: a row of class scores per sample, or per position of
	 * a sequence ({classes, T, 1}: T targets per sample) */
	shape last = m->nodes[n - 1].out;
	m->targets = !last.cb && last.c == m->classes && last.w == 1 ? last.h : 1;
	if (shape_size(last) != (size_t)m->classes * m->targets || last.cb)
		return sl_fail(err, SL_EINVAL,
			       "model: output has %zu values per sample, expected %d classes (the "
			       "last node, nodes[%d] (%s), gives the model's output%s)",
			       shape_size(last), m->classes, n - 1, m->nodes[n - 1].op->name,
			       last.cb ? " and it is a feature map: end with flatten and dense" : "");
	m->n_params = off;
	for (int i = 0; i < m->n_nodes; i++)
		m->n_param_layers += m->nodes[i].n_params > 0;
	return 0;
}

/* backend memory for the model, counted in m->mem_bytes */
static void *
balloc(model *m, size_t bytes)
{
	m->mem_bytes += bytes;
	return m->be->ops->alloc(m->be, bytes);
}

static int
alloc_buffers(model *m, char *err)
{
	size_t B = (size_t)m->batch_cap, most = 0;
	int shared = 0;
	m->params = balloc(m, sizeof(float) * SL_MAX(m->n_params, 1));
	m->grads = balloc(m, sizeof(float) * SL_MAX(m->n_params, 1));
	m->act[0] = balloc(m, sizeof(float) * B * m->in_dim);
	m->dact[0] = balloc(m, sizeof(float) * B * m->in_dim);
	m->labels = malloc(B * (size_t)m->targets);
	if (m->n_state) {
		if (!(m->state = balloc(m, sizeof(float) * m->n_state)))
			return sl_fail(err, SL_ENOMEM, "model: out of memory");
		for (int i = 0; i < m->n_nodes; i++)
			if (m->nodes[i].n_state)
				m->nodes[i].state = m->state + m->nodes[i].s_off;
	}
	if (!m->params || !m->grads || !m->act[0] || !m->dact[0] || !m->labels)
		return sl_fail(err, SL_ENOMEM, "model: out of memory");
	for (int i = 0; i < m->n_nodes; i++) {
		node *nd = &m->nodes[i];
		size_t sz = B * nd->act_floats;
		m->act[i + 1] = balloc(m, sizeof(float) * sz);
		m->dact[i + 1] = balloc(m, sizeof(float) * sz);
		if (!m->act[i + 1] || !m->dact[i + 1])
			return sl_fail(err, SL_ENOMEM, "model: out of memory");
		if (nd->op->scratch_bytes && nd->op->scratch_bytes(nd)) {
			nd->scratch = balloc(m, nd->op->scratch_bytes(nd) * B);
			if (!nd->scratch)
				return sl_fail(err, SL_ENOMEM, "model: out of memory");
		}
		shared |= nd->n_out > 1;
		most = SL_MAX(most, nd->act_floats);
	}
	/* a sum of input gradients: one buffer per input of a node (both of
	 * an add may read outputs that others read too) */
	for (int k = 0; shared && k < OP_MAX_IN; k++)
		if (!(m->dsum[k] = balloc(m, sizeof(float) * B * most)))
			return sl_fail(err, SL_ENOMEM, "model: out of memory");
	return 0;
}

static int
model_create(const node_desc *desc, int n, shape input, int classes,
	     int batch_cap, uint64_t seed, backend *be, const char *spec,
	     model **out, char *err)
{
	*out = NULL;
	if (batch_cap < 1)
		return sl_fail(err, SL_EINVAL, "batch: must be at least 1");
	if (classes < 2)
		return sl_fail(err, SL_EINVAL, "model: needs at least 2 classes");
	model *m = calloc(1, sizeof(*m));
	if (!m)
		return sl_fail(err, SL_ENOMEM, "model: out of memory");
	snprintf(m->spec, sizeof(m->spec), "%s", spec);
	m->be = be;
	m->input = input;
	m->in_dim = (int)shape_size(input);
	m->classes = classes;
	m->batch_cap = batch_cap;
	int rc = build(m, desc, n, err);
	for (int i = 0; rc == 0 && i < m->n_nodes; i++) {
		const node *nd = &m->nodes[i];
		if (nd->op->check && (rc = nd->op->check(nd, be, err)) < 0) {
			char why[SL_ERR_LEN];
			snprintf(why, sizeof(why), "%s", !strncmp(err, "model: ", 7) ? err + 7 : err);
			sl_fail(err, -rc, "model.nodes[%d] (%s): %s", i, nd->op->name, why);
		}
	}
	if (rc == 0)
		rc = alloc_buffers(m, err);
	if (rc < 0) {
		model_free(m);
		return rc;
	}
	model_init_params(m, seed);
	model_reset_state(m);
	*out = m;
	return 0;
}

int
model_new(const char *spec, int c, int h, int w, int classes, int batch_cap,
	  uint64_t seed, backend *be, model **out, char *err)
{
	node_desc desc[MODEL_MAX_NODES];
	int n;
	shape input = {c, h, w, 0};
	*out = NULL;
	int rc = model_spec_nodes(spec, c * h * w, classes, desc, &n, &input, err);
	if (rc < 0)
		return rc;
	if (!strcmp(spec, "lenet5") && (h != 28 || w != 28) && (h != 32 || w != 32))
		return sl_fail(err, SL_EINVAL,
			       "model: lenet5 needs 28x28 or 32x32 images, the dataset has %dx%d",
			       h, w);
	if (!strcmp(spec, "lenet5") && h == 32) {
		/* 32x32 inputs (CIFAR): no padding on conv1 gives 5x5 maps too */
		desc[0].pad = 0;
	}
	return model_create(desc, n, input, classes, batch_cap, seed, be, spec,
			    out, err);
}

int
model_new_nodes(const node_desc *desc, int n, shape input, int classes,
		int batch_cap, uint64_t seed, backend *be, model **out,
		char *err)
{
	return model_create(desc, n, input, classes, batch_cap, seed, be,
			    "custom", out, err);
}

int
model_check_data(const model *m, const dataset *d, const char *what, char *err)
{
	int dt = ds_ylen(d);
	if (dt != m->targets)
		return sl_fail(err, SL_EINVAL,
			       "model: %s predicts %d label%s per sample but the %s set's samples "
			       "carry %d", m->spec, m->targets, m->targets == 1 ? "" : "s", what, dt);
	/* an embedding reads its input as row indices of its table */
	const node *e = &m->nodes[0];
	if (strcmp(e->op->name, "embed") || e->inputs[0] != -1)
		return 0;
	for (size_t i = 0; i < (size_t)d->n * (size_t)d->dim; i++) {
		float v = d->x[i];
		if (!(v >= 0.0f && v < (float)e->vocab && v == (float)(int)v))
			return sl_fail(err, SL_EINVAL,
				       "model: %s set sample %zu, position %zu holds %g, not a token "
				       "id in 0..%d (the model's vocabulary: the set's classes)",
				       what, i / (size_t)d->dim, i % (size_t)d->dim, (double)v,
				       e->vocab - 1);
	}
	return 0;
}

void
model_free(model *m)
{
	if (!m)
		return;
	backend *be = m->be;
	be->ops->free(be, m->params);
	be->ops->free(be, m->grads);
	be->ops->free(be, m->state);
	for (int i = 0; i <= m->n_nodes; i++) {
		be->ops->free(be, m->act[i]);
		be->ops->free(be, m->dact[i]);
	}
	for (int i = 0; i < m->n_nodes; i++)
		be->ops->free(be, m->nodes[i].scratch);
	for (int k = 0; k < OP_MAX_IN; k++)
		be->ops->free(be, m->dsum[k]);
	free(m->labels);
	free(m);
}

void
model_init_params(model *m, uint64_t seed)
{
	rng r;
	rng_seed(&r, seed, 0);
	float *host = calloc(SL_MAX(m->n_params, 1), sizeof(float));
	SL_ASSERT(host != NULL);
	for (int i = 0; i < m->n_nodes; i++) {
		const node *nd = &m->nodes[i];
		if (nd->op->init)
			nd->op->init(nd, host, &r);
	}
	m->be->ops->upload(m->be, m->params, host, sizeof(float) * m->n_params);
	free(host);
}

/* ---- running ---------------------------------------------------------- */

void
model_load_batch(model *m, const float *x, const uint8_t *y,
		 const uint32_t *idx, int batch)
{
	SL_ASSERT(batch >= 1 && batch <= m->batch_cap);
	const int dim = m->in_dim;
	/* Gather straight into the input buffer when it is host memory (cpu,
	 * ref); a device backend gets a staging copy uploaded. */
	float *dst = m->act[0];
	int host = m->be->ops->host_memory;
	float *stage = host ? dst : malloc(sizeof(float) * (size_t)batch * dim);
	SL_ASSERT(stage != NULL);
	/* a conv model's input is [C][H][W][B], the batch innermost */
	backend_gather(m->be, stage, x, idx, batch, dim, m->input.cb);
	const size_t t = (size_t)m->targets; /* labels per sample */
	for (int b = 0; b < batch; b++)
		memcpy(m->labels + (size_t)b * t, y + (size_t)idx[b] * t, t);
	if (!host) {
		m->be->ops->upload(m->be, dst, stage, sizeof(float) * (size_t)batch * dim);
		free(stage);
	}
}

/* batch norm's momentum in a step (torch's default) */
#define BN_MOMENTUM 0.1f

/* The nodes' forward in the mode given (training: the running statistics
 * move by `momentum`). */
static void
run_nodes(model *m, const float *p, int batch, int training, float momentum)
{
	backend *be = m->be;
	double t = m->profile ? sl_now() : 0;
	for (int i = 0; i < m->n_nodes; i++) {
		node *nd = &m->nodes[i];
		nd->training = training;
		nd->momentum = momentum;
		const float *x[OP_MAX_IN];
		for (int k = 0; k < nd->n_in; k++)
			x[k] = m->act[nd->inputs[k] + 1];
		nd->op->forward(nd, be, p, x, m->act[i + 1], batch);
		if (m->profile) {
			be->ops->sync(be);
			double t1 = sl_now();
			m->prof_fwd[i] += t1 - t;
			t = t1;
		}
	}
}

static double
forward(model *m, const float *p, int batch, int *correct, int want_grad,
	int training)
{
	backend *be = m->be;
	run_nodes(m, p, batch, training, BN_MOMENTUM);
	double t = m->profile ? sl_now() : 0;
	/* one row of logits per target: the mean over the batch's B T */
	double loss = be->ops->softmax_xent(be, m->act[m->n_nodes], m->labels,
					    want_grad ? m->dact[m->n_nodes] : NULL,
					    batch * m->targets, m->classes, correct);
	if (m->profile)
		m->prof_loss += sl_now() - t;
	return loss;
}

double
model_forward(model *m, const float *params, int batch, int *correct)
{
	return forward(m, params ? params : m->params, batch, correct, 0, 0);
}

double
model_forward_mode(model *m, const float *params, int batch, int *correct,
		   int training)
{
	return forward(m, params ? params : m->params, batch, correct, 0,
		       training != 0);
}

size_t
model_state_floats(const model *m)
{
	return m->n_state;
}

void
model_reset_state(model *m)
{
	if (!m->n_state)
		return;
	float *host = calloc(m->n_state, sizeof(float));
	SL_ASSERT(host != NULL);
	/* each node's state: means (0), then variances (1), half each */
	for (int i = 0; i < m->n_nodes; i++) {
		const node *nd = &m->nodes[i];
		for (size_t k = nd->n_state / 2; k < nd->n_state; k++)
			host[nd->s_off + k] = 1.0f;
	}
	m->be->ops->upload(m->be, m->state, host, sizeof(float) * m->n_state);
	free(host);
}

void
model_recompute_state(model *m, const float *params, const dataset *d,
		      int nbatches)
{
	if (!m->n_state)
		return;
	const float *p = params ? params : m->params;
	model_reset_state(m);
	uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)m->batch_cap);
	SL_ASSERT(idx != NULL);
	uint32_t s = 0;
	for (int k = 0; k < nbatches && s < d->n; k++) {
		int b = (int)SL_MIN((uint32_t)m->batch_cap, d->n - s);
		for (int i = 0; i < b; i++)
			idx[i] = s + (uint32_t)i;
		s += (uint32_t)b;
		model_load_batch(m, d->x, d->y, idx, b);
		/* momentum 1 / (k + 1): the running statistic after batch k is
		 * the mean of batches 0..k (the first replaces the start) */
		run_nodes(m, p, b, 1, (float)(1.0 / (k + 1)));
	}
	free(idx);
}

/* Index of the lowest node that must run backward for `depth`: the
 * depth-th parameterised one from the top. */
static int
stop_node(const model *m, int depth)
{
	if (depth <= 0 || depth >= m->n_param_layers)
		depth = m->n_param_layers;
	int seen = 0;
	for (int i = m->n_nodes - 1; i >= 0; i--) {
		if (m->nodes[i].n_params && ++seen == depth)
			return i;
	}
	return 0;
}

/* Node i's backward. Its input j gets a gradient when j runs backward too
 * (j >= lo): the first of j's readers to run (the last in order) writes
 * dact[j + 1], the others write dsum and add it there. */
static void
backward_node(model *m, const float *p, int i, int lo, uint8_t *written,
	      int batch)
{
	node *nd = &m->nodes[i];
	const float *x[OP_MAX_IN];
	float *dx[OP_MAX_IN];
	int add[OP_MAX_IN] = {0};
	for (int k = 0; k < nd->n_in; k++) {
		int j = nd->inputs[k];
		x[k] = m->act[j + 1];
		dx[k] = NULL;
		if (j < lo)
			continue;
		if (!written[j]) {
			dx[k] = m->dact[j + 1];
			written[j] = 1;
		} else {
			dx[k] = m->dsum[k];
			add[k] = 1;
		}
	}
	nd->op->backward(nd, m->be, p, x, m->act[i + 1], m->dact[i + 1], dx,
			 m->grads, batch);
	for (int k = 0; k < nd->n_in; k++)
		if (add[k])
			m->be->ops->axpy(m->be, shape_size(nd->in[k]) * (size_t)batch,
					 1.0f, dx[k], m->dact[nd->inputs[k] + 1]);
}

double
model_step(model *m, const float *params, int batch, int depth)
{
	const float *p = params ? params : m->params;
	double loss = forward(m, p, batch, NULL, 1, 1);
	int lo = stop_node(m, depth);
	uint8_t written[MODEL_MAX_NODES] = {0};
	for (int i = m->n_nodes - 1; i >= lo; i--) {
		double t = m->profile ? sl_now() : 0;
		backward_node(m, p, i, lo, written, batch);
		if (m->profile) {
			m->be->ops->sync(m->be);
			m->prof_bwd[i] += sl_now() - t;
		}
	}
	return loss;
}

size_t
model_tail_offset(const model *m, int depth)
{
	return m->nodes[stop_node(m, depth)].p_off;
}

/* FLOPs of node nd's input gradients when the backward stops at lo: only
 * those toward a node at or above lo are computed. */
static double
dx_flops(const node *nd, int lo)
{
	double f = 0.0;
	for (int k = 0; k < nd->n_in; k++) {
		double part = k == 1 ? nd->flops_bwd_x1 : nd->flops_bwd_x - nd->flops_bwd_x1;
		if (nd->inputs[k] >= lo)
			f += part;
	}
	return f;
}

double
model_bwd_flops(const model *m, int depth)
{
	int lo = stop_node(m, depth);
	double f = 0.0;
	for (int i = lo; i < m->n_nodes; i++) {
		const node *nd = &m->nodes[i];
		f += nd->flops_bwd_w + dx_flops(nd, lo);
	}
	return f;
}

double
model_step_flops(const model *m, int depth)
{
	double f = model_bwd_flops(m, depth);
	for (int i = 0; i < m->n_nodes; i++)
		f += m->nodes[i].flops_fwd;
	return f;
}

int
model_node_info(const model *m, node_info *info, int max)
{
	int pi = 0, n = SL_MIN(max, m->n_nodes);
	for (int i = 0; i < n; i++) {
		const node *nd = &m->nodes[i];
		info[i] = (node_info){
			.name = nd->op->name,
			.param_index = nd->n_params ? pi++ : -1,
			.n_params = nd->n_params,
			.p_off = nd->p_off,
			.n_weights = nd->n_weights,
			.w_cols = nd->w_cols,
			.n_decay = nd->op->no_decay ? 0 : nd->n_weights,
			.act_floats = nd->act_floats,
			.flops_fwd = nd->flops_fwd,
			.flops_bwd_w = nd->flops_bwd_w,
			.flops_bwd_x = nd->flops_bwd_x,
		};
	}
	return n;
}

void
model_evaluate(model *m, const float *params, const dataset *d, double *loss,
	       double *acc)
{
	model_evaluate_with(m, params, d, loss, acc, NULL, NULL);
}

void
model_evaluate_with(model *m, const float *params, const dataset *d, double *loss,
		    double *acc, void (*between)(void *), void *ud)
{
	double lsum = 0.0;
	long hits = 0;
	uint32_t *idx = malloc(sizeof(uint32_t) * m->batch_cap);
	SL_ASSERT(idx != NULL);
	for (uint32_t s = 0; s < d->n; s += (uint32_t)m->batch_cap) {
		if (s && between)
			between(ud);
		int b = (int)SL_MIN((uint32_t)m->batch_cap, d->n - s);
		for (int i = 0; i < b; i++)
			idx[i] = s + (uint32_t)i;
		model_load_batch(m, d->x, d->y, idx, b);
		int c = 0;
		lsum += model_forward(m, params, b, &c) * b;
		hits += c;
	}
	free(idx);
	*loss = d->n ? lsum / d->n : 0.0;
	*acc = d->n ? (double)hits / ((double)d->n * m->targets) : 0.0;
}
