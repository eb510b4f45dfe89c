/* model.c - layers (dense, conv2d, maxpool, relu, flatten) as small vtables
 * over a flat parameter buffer, models from spec strings, forward/backward
 * with partial depth, evaluation, and per-layer cost accounting. */
#include "model.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"

static size_t
shape_size(shape s)
{
	return (size_t)s.c * s.h * s.w;
}

/* ---- dense ------------------------------------------------------------ */

static int
dense_setup(layer *l, char *err)
{
	int in = (int)shape_size(l->in);
	if (l->in.cb)
		return sl_fail(err, SL_EINVAL,
			       "model: dense layer after a %dx%dx%d feature map needs a flatten",
			       l->in.c, l->in.h, l->in.w);
	if (l->units < 1)
		return sl_fail(err, SL_EINVAL, "model: dense layer with %d units",
			       l->units);
	l->out = (shape){l->units, 1, 1, 0};
	l->n_weights = (size_t)in * l->units;
	l->n_params = l->n_weights + (size_t)l->units;
	l->flops_fwd = 2.0 * in * l->units;
	l->flops_bwd_w = 2.0 * in * l->units;
	l->flops_bwd_x = 2.0 * in * l->units;
	return 0;
}

static void
init_weights(layer *l, float *w, int fan_in, int fan_out, rng *r)
{
	if (l->he_init) {
		double sd = sqrt(2.0 / fan_in);
		for (size_t i = 0; i < l->n_weights; i++)
			w[i] = (float)(sd * rng_normal(r));
	} else {
		double a = sqrt(6.0 / (fan_in + fan_out));
		for (size_t i = 0; i < l->n_weights; i++)
			w[i] = (float)(a * (2.0 * rng_uniform(r) - 1.0));
	}
	memset(w + l->n_weights, 0, sizeof(float) * (l->n_params - l->n_weights));
}

static void
dense_init(layer *l, float *p, rng *r)
{
	init_weights(l, p + l->p_off, (int)shape_size(l->in), l->units, r);
}

static void
dense_forward(layer *l, backend *be, const float *p, const float *x,
	      float *y, int batch)
{
	const float *w = p + l->p_off;
	be->ops->linear_fwd(be, x, w, w + l->n_weights, y, batch,
			    (int)shape_size(l->in), l->units, l->relu);
}

static void
dense_backward(layer *l, backend *be, const float *p, const float *x,
	       const float *y, float *dy, float *dx, float *g, int batch)
{
	const float *w = p + l->p_off;
	float *gw = g + l->p_off;
	be->ops->linear_bwd(be, x, w, y, dy, dx, gw, gw + l->n_weights, batch,
			    (int)shape_size(l->in), l->units, l->relu);
}

static const layer_ops dense_ops = {"dense", dense_setup, dense_init,
				    dense_forward, dense_backward};

/* ---- conv2d ----------------------------------------------------------- */

static int
conv_setup(layer *l, char *err)
{
	if (!l->in.cb)
		return sl_fail(err, SL_EINVAL,
			       "model: conv layer needs a feature-map input, not a dense layer's");
	if (l->k < 1 || l->stride < 1 || l->pad < 0 || l->units < 1)
		return sl_fail(err, SL_EINVAL, "model: bad conv parameters");
	int ho = conv_out_dim(l->in.h, l->k, l->stride, l->pad);
	int wo = conv_out_dim(l->in.w, l->k, l->stride, l->pad);
	if (ho < 1 || wo < 1)
		return sl_fail(err, SL_EINVAL,
			       "model: conv %dx%d on a %dx%d input leaves nothing",
			       l->k, l->k, l->in.h, l->in.w);
	l->geom = (conv_geom){.cin = l->in.c, .h = l->in.h, .w = l->in.w,
			      .cout = l->units, .k = l->k, .stride = l->stride,
			      .pad = l->pad, .ho = ho, .wo = wo};
	l->out = (shape){l->units, ho, wo, 1};
	size_t K = (size_t)l->in.c * l->k * l->k;
	l->n_weights = K * l->units;
	l->n_params = l->n_weights + (size_t)l->units;
	double mac = (double)K * l->units * ho * wo;
	l->flops_fwd = 2.0 * mac;
	l->flops_bwd_w = 2.0 * mac;
	l->flops_bwd_x = 2.0 * mac;
	return 0;
}

static void
conv_init(layer *l, float *p, rng *r)
{
	int k2 = l->k * l->k;
	init_weights(l, p + l->p_off, l->in.c * k2, l->units * k2, r);
}

static void
conv_forward(layer *l, backend *be, const float *p, const float *x,
	     float *y, int batch)
{
	const float *w = p + l->p_off;
	be->ops->conv_fwd(be, &l->geom, x, w, w + l->n_weights, y, batch,
			  l->relu);
}

static void
conv_backward(layer *l, backend *be, const float *p, const float *x,
	      const float *y, float *dy, float *dx, float *g, int batch)
{
	const float *w = p + l->p_off;
	float *gw = g + l->p_off;
	be->ops->conv_bwd(be, &l->geom, x, w, y, dy, dx, gw, gw + l->n_weights,
			  batch, l->relu);
}

static const layer_ops conv_ops = {"conv2d", conv_setup, conv_init,
				   conv_forward, conv_backward};

/* ---- maxpool ---------------------------------------------------------- */

static int
pool_setup(layer *l, char *err)
{
	if (!l->in.cb)
		return sl_fail(err, SL_EINVAL,
			       "model: maxpool needs a feature-map input, not a dense layer's");
	if (l->k < 1 || l->stride < 1 || l->pad < 0 || l->pad >= l->k)
		return sl_fail(err, SL_EINVAL, "model: bad maxpool parameters");
	int ho = conv_out_dim(l->in.h, l->k, l->stride, l->pad);
	int wo = conv_out_dim(l->in.w, l->k, l->stride, l->pad);
	if (ho < 1 || wo < 1)
		return sl_fail(err, SL_EINVAL,
			       "model: maxpool %d on a %dx%d input leaves nothing",
			       l->k, l->in.h, l->in.w);
	l->geom = (conv_geom){.cin = l->in.c, .h = l->in.h, .w = l->in.w,
			      .cout = l->in.c, .k = l->k, .stride = l->stride,
			      .pad = l->pad, .ho = ho, .wo = wo};
	l->out = (shape){l->in.c, ho, wo, 1};
	l->flops_fwd = (double)l->in.c * ho * wo * l->k * l->k;
	l->flops_bwd_x = (double)shape_size(l->in);
	return 0;
}

static void
pool_forward(layer *l, backend *be, const float *p, const float *x, float *y,
	     int batch)
{
	(void)p;
	be->ops->maxpool_fwd(be, &l->geom, x, y, l->arg, batch);
}

static void
pool_backward(layer *l, backend *be, const float *p, const float *x,
	      const float *y, float *dy, float *dx, float *g, int batch)
{
	(void)p, (void)x, (void)y, (void)g;
	if (dx)
		be->ops->maxpool_bwd(be, &l->geom, dy, l->arg, dx, batch);
}

static const layer_ops pool_ops = {"maxpool", pool_setup, NULL, pool_forward,
				   pool_backward};

/* ---- relu (standalone; fused into dense/conv when it follows them) ----- */

static int
relu_setup(layer *l, char *err)
{
	(void)err;
	l->out = l->in;
	l->flops_fwd = (double)shape_size(l->in);
	l->flops_bwd_x = (double)shape_size(l->in);
	return 0;
}

static void
relu_forward(layer *l, backend *be, const float *p, const float *x, float *y,
	     int batch)
{
	(void)p;
	be->ops->relu_fwd(be, x, y, shape_size(l->in) * (size_t)batch);
}

static void
relu_backward(layer *l, backend *be, const float *p, const float *x,
	      const float *y, float *dy, float *dx, float *g, int batch)
{
	(void)p, (void)x, (void)g;
	if (dx)
		be->ops->relu_bwd(be, y, dy, dx,
				  shape_size(l->in) * (size_t)batch);
}

static const layer_ops relu_ops = {"relu", relu_setup, NULL, relu_forward,
				   relu_backward};

/* ---- flatten ---------------------------------------------------------- */

static int
flatten_setup(layer *l, char *err)
{
	(void)err;
	l->out = (shape){(int)shape_size(l->in), 1, 1, 0};
	return 0;
}

static void
flatten_forward(layer *l, backend *be, const float *p, const float *x,
		float *y, int batch)
{
	(void)p;
	if (l->in.cb)
		be->ops->cpb_to_bcp(be, x, y, l->in.c, batch, l->in.h * l->in.w);
	else
		be->ops->copy(be, y, x, sizeof(float) * shape_size(l->in) * batch);
}

static void
flatten_backward(layer *l, backend *be, const float *p, const float *x,
		 const float *y, float *dy, float *dx, float *g, int batch)
{
	(void)p, (void)x, (void)y, (void)g;
	if (!dx)
		return;
	if (l->in.cb)
		be->ops->bcp_to_cpb(be, dy, dx, l->in.c, batch, l->in.h * l->in.w);
	else
		be->ops->copy(be, dx, dy, sizeof(float) * shape_size(l->in) * batch);
}

static const layer_ops flatten_ops = {"flatten", flatten_setup, NULL,
				      flatten_forward, flatten_backward};

static const layer_ops *const kind_ops[] = {
	[LAYER_DENSE] = &dense_ops,
	[LAYER_CONV] = &conv_ops,
	[LAYER_MAXPOOL] = &pool_ops,
	[LAYER_RELU] = &relu_ops,
	[LAYER_FLATTEN] = &flatten_ops,
};

/* ---- spec parsing ----------------------------------------------------- */

/* Parse "mlp:784-256-128-10" into sizes; 0 or error. */
static int
parse_mlp(const char *s, int *sizes, int *n, char *err)
{
	*n = 0;
	const char *p = s;
	for (;;) {
		if (!isdigit((unsigned char)*p))
			return sl_fail(err, SL_EINVAL,
				       "model: \"mlp:%s\": expected layer sizes like mlp:784-256-128-10",
				       s);
		long v = 0;
		while (isdigit((unsigned char)*p)) {
			v = v * 10 + (*p++ - '0');
			if (v > 1000000)
				return sl_fail(err, SL_EINVAL,
					       "model: layer size too large in \"mlp:%s\"", s);
		}
		if (v < 1)
			return sl_fail(err, SL_EINVAL,
				       "model: layer size 0 in \"mlp:%s\"", s);
		if (*n >= MODEL_MAX_LAYERS / 2)
			return sl_fail(err, SL_EINVAL,
				       "model: too many layers in \"mlp:%s\"", s);
		sizes[(*n)++] = (int)v;
		if (*p == 0)
			break;
		if (*p++ != '-')
			return sl_fail(err, SL_EINVAL,
				       "model: \"mlp:%s\": expected '-' between sizes", s);
	}
	if (*n < 2)
		return sl_fail(err, SL_EINVAL,
			       "model: \"mlp:%s\" needs at least an input and an output size", s);
	return 0;
}

static layer
mk(layer_kind kind, int units, int k, int stride, int pad)
{
	return (layer){.kind = kind, .units = units, .k = k, .stride = stride,
		       .pad = pad};
}

/* Expand a spec into layer descriptions (relus explicit). */
static int
spec_layers(const char *spec, int in_dim, int classes, layer *d, int *n,
	    shape *input, char *err)
{
	*n = 0;
	if (!strcmp(spec, "logreg")) {
		input->cb = 0;
		d[(*n)++] = mk(LAYER_DENSE, classes, 0, 0, 0);
		return 0;
	}
	if (!strncmp(spec, "mlp:", 4)) {
		int sizes[MODEL_MAX_LAYERS], ns, rc;
		if ((rc = parse_mlp(spec + 4, sizes, &ns, err)) < 0)
			return rc;
		if (sizes[0] != in_dim)
			return sl_fail(err, SL_EINVAL,
				       "model: \"%s\" takes %d inputs but the dataset has %d features",
				       spec, sizes[0], in_dim);
		if (sizes[ns - 1] != classes)
			return sl_fail(err, SL_EINVAL,
				       "model: \"%s\" has %d outputs but the dataset has %d classes",
				       spec, sizes[ns - 1], classes);
		input->cb = 0;
		for (int i = 1; i < ns; i++) {
			d[(*n)++] = mk(LAYER_DENSE, sizes[i], 0, 0, 0);
			if (i < ns - 1)
				d[(*n)++] = mk(LAYER_RELU, 0, 0, 0, 0);
		}
		return 0;
	}
	if (!strcmp(spec, "lenet5")) {
		input->cb = 1;
		d[(*n)++] = mk(LAYER_CONV, 6, 5, 1, 2);
		d[(*n)++] = mk(LAYER_RELU, 0, 0, 0, 0);
		d[(*n)++] = mk(LAYER_MAXPOOL, 0, 2, 2, 0);
		d[(*n)++] = mk(LAYER_CONV, 16, 5, 1, 0);
		d[(*n)++] = mk(LAYER_RELU, 0, 0, 0, 0);
		d[(*n)++] = mk(LAYER_MAXPOOL, 0, 2, 2, 0);
		d[(*n)++] = mk(LAYER_FLATTEN, 0, 0, 0, 0);
		d[(*n)++] = mk(LAYER_DENSE, 120, 0, 0, 0);
		d[(*n)++] = mk(LAYER_RELU, 0, 0, 0, 0);
		d[(*n)++] = mk(LAYER_DENSE, 84, 0, 0, 0);
		d[(*n)++] = mk(LAYER_RELU, 0, 0, 0, 0);
		d[(*n)++] = mk(LAYER_DENSE, classes, 0, 0, 0);
		return 0;
	}
	return sl_fail(err, SL_EINVAL,
		       "model: unknown \"%s\" (expected logreg, mlp:<in>-<hidden>...-<out>, lenet5)",
		       spec);
}

int
model_spec_param_layers(const char *spec)
{
	layer d[MODEL_MAX_LAYERS];
	int sizes[MODEL_MAX_LAYERS], ns = 0, n = 0, in = 1, classes = 2, np = 0;
	shape input = {1, 1, 1, 0};
	char err[SL_ERR_LEN];
	if (!strncmp(spec, "mlp:", 4)) {
		if (parse_mlp(spec + 4, sizes, &ns, err) < 0)
			return -1;
		in = sizes[0];
		classes = sizes[ns - 1];
	}
	if (spec_layers(spec, in, classes, d, &n, &input, err) < 0)
		return -1;
	for (int i = 0; i < n; i++)
		np += d[i].kind == LAYER_DENSE || d[i].kind == LAYER_CONV;
	return np;
}

/* ---- construction ----------------------------------------------------- */

static int
build(model *m, const layer *desc, int n, int fuse, char *err)
{
	shape cur = m->input;
	size_t off = 0;
	for (int i = 0; i < n; i++) {
		layer l = desc[i];
		/* fuse relu into a preceding dense/conv */
		if (fuse && l.kind == LAYER_RELU && m->n_layers > 0) {
			layer *prev = &m->layers[m->n_layers - 1];
			if ((prev->kind == LAYER_DENSE || prev->kind == LAYER_CONV) &&
			    !prev->relu) {
				prev->relu = 1;
				prev->he_init = 1;
				continue;
			}
		}
		if (m->n_layers >= MODEL_MAX_LAYERS)
			return sl_fail(err, SL_EINVAL, "model: too many layers");
		l.ops = kind_ops[l.kind];
		l.in = cur;
		if (l.kind == LAYER_DENSE || l.kind == LAYER_CONV)
			l.he_init = i + 1 < n && desc[i + 1].kind == LAYER_RELU;
		int rc = l.ops->setup(&l, err);
		if (rc < 0)
			return rc;
		l.p_off = off;
		off += l.n_params;
		cur = l.out;
		m->layers[m->n_layers++] = l;
	}
	if (shape_size(cur) != (size_t)m->classes || cur.cb)
		return sl_fail(err, SL_EINVAL,
			       "model: output has %zu values per sample, expected %d classes",
			       shape_size(cur), m->classes);
	m->n_params = off;
	for (int i = 0; i < m->n_layers; i++)
		m->n_param_layers += m->layers[i].n_params > 0;
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
	size_t B = (size_t)m->batch_cap;
	m->params = balloc(m, sizeof(float) * SL_MAX(m->n_params, 1));
	m->grads = balloc(m, sizeof(float) * SL_MAX(m->n_params, 1));
	m->act[0] = balloc(m, sizeof(float) * B * m->in_dim);
	m->dact[0] = balloc(m, sizeof(float) * B * m->in_dim);
	m->labels = malloc(B);
	if (!m->params || !m->grads || !m->act[0] || !m->dact[0] || !m->labels)
		return sl_fail(err, SL_ENOMEM, "model: out of memory");
	for (int i = 0; i < m->n_layers; i++) {
		layer *l = &m->layers[i];
		size_t sz = B * shape_size(l->out);
		m->act[i + 1] = balloc(m, sizeof(float) * sz);
		m->dact[i + 1] = balloc(m, sizeof(float) * sz);
		if (!m->act[i + 1] || !m->dact[i + 1])
			return sl_fail(err, SL_ENOMEM, "model: out of memory");
		if (l->kind == LAYER_MAXPOOL) {
			l->arg = balloc(m, sizeof(int32_t) * sz);
			if (!l->arg)
				return sl_fail(err, SL_ENOMEM, "model: out of memory");
		}
	}
	return 0;
}

static int
model_create(const layer *desc, int n, int fuse, shape input, int classes,
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
	int rc = build(m, desc, n, fuse, err);
	if (rc == 0)
		rc = alloc_buffers(m, err);
	if (rc < 0) {
		model_free(m);
		return rc;
	}
	model_init_params(m, seed);
	*out = m;
	return 0;
}

int
model_new(const char *spec, int c, int h, int w, int classes, int batch_cap,
	  uint64_t seed, backend *be, model **out, char *err)
{
	layer desc[MODEL_MAX_LAYERS];
	int n;
	shape input = {c, h, w, 0};
	*out = NULL;
	int rc = spec_layers(spec, c * h * w, classes, desc, &n, &input, err);
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
	return model_create(desc, n, 1, input, classes, batch_cap, seed, be,
			    spec, out, err);
}

int
model_new_layers(const layer *desc, int n, shape input, int classes,
		 int batch_cap, uint64_t seed, backend *be, model **out,
		 char *err)
{
	return model_create(desc, n, 0, input, classes, batch_cap, seed, be,
			    "custom", out, err);
}

void
model_free(model *m)
{
	if (!m)
		return;
	backend *be = m->be;
	be->ops->free(be, m->params);
	be->ops->free(be, m->grads);
	for (int i = 0; i <= m->n_layers; i++) {
		be->ops->free(be, m->act[i]);
		be->ops->free(be, m->dact[i]);
	}
	for (int i = 0; i < m->n_layers; i++)
		be->ops->free(be, m->layers[i].arg);
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
	for (int i = 0; i < m->n_layers; i++) {
		layer *l = &m->layers[i];
		if (l->ops->init)
			l->ops->init(l, host, &r);
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
	for (int b = 0; b < batch; b++)
		m->labels[b] = y[idx[b]];
	if (!host) {
		m->be->ops->upload(m->be, dst, stage, sizeof(float) * (size_t)batch * dim);
		free(stage);
	}
}

static double
forward(model *m, const float *p, int batch, int *correct, int want_grad)
{
	backend *be = m->be;
	double t = m->profile ? sl_now() : 0;
	for (int i = 0; i < m->n_layers; i++) {
		layer *l = &m->layers[i];
		l->ops->forward(l, be, p, m->act[i], m->act[i + 1], batch);
		if (m->profile) {
			be->ops->sync(be);
			double t1 = sl_now();
			m->prof_fwd[i] += t1 - t;
			t = t1;
		}
	}
	double loss = be->ops->softmax_xent(be, m->act[m->n_layers], m->labels,
					    want_grad ? m->dact[m->n_layers] : NULL,
					    batch, m->classes, correct);
	if (m->profile)
		m->prof_loss += sl_now() - t;
	return loss;
}

double
model_forward(model *m, const float *params, int batch, int *correct)
{
	return forward(m, params ? params : m->params, batch, correct, 0);
}

/* Index of the lowest layer that must run backward for `depth`. */
static int
stop_layer(const model *m, int depth)
{
	if (depth <= 0 || depth >= m->n_param_layers)
		depth = m->n_param_layers;
	int seen = 0;
	for (int i = m->n_layers - 1; i >= 0; i--) {
		if (m->layers[i].n_params && ++seen == depth)
			return i;
	}
	return 0;
}

double
model_step(model *m, const float *params, int batch, int depth)
{
	const float *p = params ? params : m->params;
	double loss = forward(m, p, batch, NULL, 1);
	int lo = stop_layer(m, depth);
	for (int i = m->n_layers - 1; i >= lo; i--) {
		layer *l = &m->layers[i];
		float *dx = i > lo ? m->dact[i] : NULL;
		double t = m->profile ? sl_now() : 0;
		l->ops->backward(l, m->be, p, m->act[i], m->act[i + 1],
				 m->dact[i + 1], dx, m->grads, batch);
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
	return m->layers[stop_layer(m, depth)].p_off;
}

double
model_step_flops(const model *m, int depth)
{
	int lo = stop_layer(m, depth);
	double f = 0.0;
	for (int i = 0; i < m->n_layers; i++) {
		const layer *l = &m->layers[i];
		f += l->flops_fwd;
		if (i >= lo)
			f += l->flops_bwd_w;
		if (i > lo)
			f += l->flops_bwd_x;
	}
	return f;
}

int
model_layer_info(const model *m, layer_info *info, int max)
{
	int pi = 0, n = SL_MIN(max, m->n_layers);
	for (int i = 0; i < n; i++) {
		const layer *l = &m->layers[i];
		info[i] = (layer_info){
			.name = l->ops->name,
			.param_index = l->n_params ? pi++ : -1,
			.n_params = l->n_params,
			.p_off = l->p_off,
			.n_weights = l->n_weights,
			.act_floats = shape_size(l->out),
			.flops_fwd = l->flops_fwd,
			.flops_bwd_w = l->flops_bwd_w,
			.flops_bwd_x = l->flops_bwd_x,
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
	*acc = d->n ? (double)hits / d->n : 0.0;
}
