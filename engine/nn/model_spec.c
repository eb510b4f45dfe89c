/* model_spec.c - models from spec strings: the builtin specs parsed
 * (logreg, mlp, lenet5, resnet, gpt) and expanded into node descriptions,
 * graph specs handed to graph_spec.c, the builtin table, and the cut
 * depths (block boundaries) of a model, built or only described. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph_spec.h"
#include "model.h"
#include "model_impl.h"

/* sizes an mlp spec may list */
#define MLP_MAX_SIZES 16

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
		if (*n >= MLP_MAX_SIZES)
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

/* Append a node reading the one before it. */
static void
seq(node_desc *d, int *n, const char *op, int units, int k, int stride, int pad)
{
	d[(*n)++] = (node_desc){.op = op, .units = units, .k = k,
				.stride = stride, .pad = pad};
}

static void relu(node_desc *d, int n);

/* The deepest resnet:N: 15 n + 4 nodes for N = 6 n + 2 */
#define RESNET_MAX_N ((MODEL_MAX_NODES - 4) / 15)

/* "resnet20" or "resnet:N" with N = 6 n + 2, n >= 1; its depth N. */
static int
parse_resnet(const char *spec, int *depth, char *err)
{
	if (!strcmp(spec, "resnet20")) {
		*depth = 20;
		return 0;
	}
	const char *p = spec + 7;
	long v = 0;
	while (isdigit((unsigned char)*p) && v < 100000)
		v = v * 10 + (*p++ - '0');
	if (p == spec + 7 || *p || v < 8 || (v - 2) % 6 || (v - 2) / 6 > RESNET_MAX_N)
		return sl_fail(err, SL_EINVAL,
			       "model: \"%s\": expected resnet:N with N = 6n + 2 "
			       "(resnet:8, resnet:14, resnet:20, resnet:32, ..., resnet:%d)",
			       spec, 6 * RESNET_MAX_N + 2);
	*depth = (int)v;
	return 0;
}

/* the deepest gpt: 10 nodes a block, 3 more */
#define GPT_MAX_L ((MODEL_MAX_NODES - 3) / 10)
#define GPT_MAX_E 4096
#define GPT_MAX_T 4096

/* "gpt:L4-H4-E128-T64": the four fields in that order, each a letter and
 * a positive integer in range, E a multiple of H. */
int
model_parse_gpt(const char *spec, gpt_dims *g, char *err)
{
	static const struct {
		char key;
		const char *what;
		int max;
	} f[4] = {{'L', "layers", GPT_MAX_L}, {'H', "heads", 256}, {'E', "width", GPT_MAX_E},
		  {'T', "context", GPT_MAX_T}};
	int v[4];
	const char *p = spec + 4;
	for (int i = 0; i < 4; i++) {
		if (*p != f[i].key || !isdigit((unsigned char)p[1]))
			return sl_fail(err, SL_EINVAL,
				       "model: \"%s\": expected %c<%s> at \"%s\" (gpt:L<layers>-"
				       "H<heads>-E<width>-T<context>, e.g. gpt:L4-H4-E128-T64)",
				       spec, f[i].key, f[i].what, p);
		long x = 0;
		for (p++; isdigit((unsigned char)*p); p++)
			if ((x = x * 10 + (*p - '0')) > 1000000)
				break;
		if (x < 1 || x > f[i].max)
			return sl_fail(err, SL_EINVAL,
				       "model: \"%s\": %c (%s) must be 1 to %d", spec, f[i].key,
				       f[i].what, f[i].max);
		v[i] = (int)x;
		if (*p != (i < 3 ? '-' : 0))
			return sl_fail(err, SL_EINVAL,
				       "model: \"%s\": expected %s after %c%d (gpt:L<layers>-"
				       "H<heads>-E<width>-T<context>)",
				       spec, i < 3 ? "'-'" : "the end", f[i].key, v[i]);
		if (i < 3)
			p++;
	}
	*g = (gpt_dims){v[0], v[1], v[2], v[3]};
	if (g->e % g->h)
		return sl_fail(err, SL_EINVAL,
			       "model: \"%s\": E (width) %d is not a multiple of H (heads) %d",
			       spec, g->e, g->h);
	return 0;
}

const model_builtin model_builtins[] = {
	{"logreg", NULL, 0, 0, 0, "one dense layer: the features to the classes"},
	{"mlp:784-256-128-10", NULL, 0, 0, 0,
	 "mlp:<in>-<hidden>...-<out>: dense layers, relu between (in: the data's "
	 "features, out: its classes)"},
	{"lenet5", NULL, 0, 0, 0,
	 "conv 5x5x6 pad 2, maxpool 2, conv 5x5x16, maxpool 2, dense 120-84 "
	 "(28x28 or 32x32 images)"},
	{"resnet20", NULL, 0, 0, 0,
	 "the CIFAR ResNet-20 of He et al. 2016: batch norm, 3 stages of 3 residual "
	 "blocks"},
	{"resnet:<N>", "N", 8, 6 * RESNET_MAX_N + 2, 6,
	 "the CIFAR ResNet of depth N = 6n + 2: 3 stages of n residual blocks"},
	{"gpt:L4-H4-E128-T64", NULL, 0, 0, 0,
	 "gpt:L<layers>-H<heads>-E<width>-T<context>: a GPT (nanoGPT's) on token ids, "
	 "T per sample (a text set): pre-norm blocks of causal attention and a 4x "
	 "GELU MLP, the head tied to the token embedding"},
	{NULL, NULL, 0, 0, 0, NULL},
};

/* A conv 3x3, pad 1, no bias, He init, as a resnet has them. */
static void
resnet_conv(node_desc *d, int *n, int units, int stride)
{
	seq(d, n, "conv2d", units, 3, stride, 1);
	d[*n - 1].no_bias = 1;
	d[*n - 1].he = 1;
}

/* The CIFAR ResNet-(6 nb + 2) (model.h): stem, 3 stages of nb blocks,
 * average pooling, the dense head. A block reading node `in` (its input):
 * conv, bn + relu, conv, bn, shortcut (bn, in) + relu. */
static void
resnet_nodes(node_desc *d, int *n, int nb, int classes)
{
	resnet_conv(d, n, 16, 1);
	seq(d, n, "batchnorm", 0, 0, 0, 0);
	relu(d, *n);
	for (int stage = 0; stage < 3; stage++) {
		int units = 16 << stage;
		for (int b = 0; b < nb; b++) {
			int stride = stage > 0 && b == 0 ? 2 : 1;
			int in = *n - 1;
			resnet_conv(d, n, units, stride);
			seq(d, n, "batchnorm", 0, 0, 0, 0);
			relu(d, *n);
			resnet_conv(d, n, units, 1);
			seq(d, n, "batchnorm", 0, 0, 0, 0);
			int bn = *n - 1;
			d[(*n)++] = (node_desc){.op = "shortcut", .n_in = 2,
						.inputs = {bn, in},
						.stride = stride, .relu = 1};
		}
	}
	seq(d, n, "avgpool", 0, 0, 0, 0);
	seq(d, n, "dense", classes, 0, 0, 0);
}

/* A node reading node `in` (-1: the model's input). */
static int
node_on(node_desc *d, int *n, const char *op, int in)
{
	d[*n] = (node_desc){.op = op, .n_in = 1, .inputs = {in}};
	return (*n)++;
}

/* nanoGPT (model.h): the embeddings; per block x += proj(attn(qkv(ln1
 * x))), x += proj2(gelu(fc(ln2 x))); the final layer norm; the head tied
 * to the token table. Residual projections' init sd 0.02 / sqrt(2 L). */
static void
gpt_nodes(node_desc *d, int *n, const gpt_dims *g, int vocab)
{
	const float resid_sd = (float)(0.02 / sqrt(2.0 * g->l));
	int x = node_on(d, n, "embed", -1);
	d[x].units = g->e;
	d[x].vocab = vocab;
	for (int l = 0; l < g->l; l++) {
		node_on(d, n, "layernorm", x);
		seq(d, n, "linear", 3 * g->e, 0, 0, 0);
		seq(d, n, "attention", 0, 0, 0, 0);
		d[*n - 1].heads = g->h;
		seq(d, n, "linear", g->e, 0, 0, 0);
		d[*n - 1].init_std = resid_sd;
		d[*n] = (node_desc){.op = "add", .n_in = 2, .inputs = {x, *n - 1}};
		x = (*n)++;
		node_on(d, n, "layernorm", x);
		seq(d, n, "linear", 4 * g->e, 0, 0, 0);
		seq(d, n, "gelu", 0, 0, 0, 0);
		seq(d, n, "linear", g->e, 0, 0, 0);
		d[*n - 1].init_std = resid_sd;
		d[*n] = (node_desc){.op = "add", .n_in = 2, .inputs = {x, *n - 1}};
		x = (*n)++;
	}
	node_on(d, n, "layernorm", x);
	seq(d, n, "lmhead", 0, 0, 0, 0);
	d[*n - 1].tie = 1; /* node 0, the embedding */
}

/* A relu after the node before: fused into it (a spec's dense and conv
 * layers are always followed by their relu directly). */
static void
relu(node_desc *d, int n)
{
	d[n - 1].relu = 1;
}

int
model_spec_nodes(const char *spec, int in_dim, int classes, node_desc *d, int *n,
	   shape *input, char *err)
{
	*n = 0;
	if (graph_spec_is(spec)) {
		/* a model given node by node: maps in unless it starts dense
		 * (rows) or embed (token ids) */
		int rc = graph_spec_parse(spec, d, MODEL_MAX_NODES, n, err);
		if (rc == 0)
			input->cb = strcmp(d[0].op, "dense") && strcmp(d[0].op, "embed");
		return rc;
	}
	if (!strcmp(spec, "logreg")) {
		input->cb = 0;
		seq(d, n, "dense", classes, 0, 0, 0);
		return 0;
	}
	if (!strncmp(spec, "mlp:", 4)) {
		int sizes[MLP_MAX_SIZES], ns, rc;
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
			seq(d, n, "dense", sizes[i], 0, 0, 0);
			if (i < ns - 1)
				relu(d, *n);
		}
		return 0;
	}
	if (!strcmp(spec, "lenet5")) {
		input->cb = 1;
		seq(d, n, "conv2d", 6, 5, 1, 2);
		relu(d, *n);
		seq(d, n, "maxpool", 0, 2, 2, 0);
		seq(d, n, "conv2d", 16, 5, 1, 0);
		relu(d, *n);
		seq(d, n, "maxpool", 0, 2, 2, 0);
		seq(d, n, "flatten", 0, 0, 0, 0);
		seq(d, n, "dense", 120, 0, 0, 0);
		relu(d, *n);
		seq(d, n, "dense", 84, 0, 0, 0);
		relu(d, *n);
		seq(d, n, "dense", classes, 0, 0, 0);
		return 0;
	}
	if (!strcmp(spec, "resnet20") || !strncmp(spec, "resnet:", 7)) {
		int depth = 0, rc;
		if ((rc = parse_resnet(spec, &depth, err)) < 0)
			return rc;
		input->cb = 1;
		resnet_nodes(d, n, (depth - 2) / 6, classes);
		return 0;
	}
	if (!strncmp(spec, "gpt:", 4)) {
		gpt_dims g;
		int rc;
		if ((rc = model_parse_gpt(spec, &g, err)) < 0)
			return rc;
		if (in_dim != g.t)
			return sl_fail(err, SL_EINVAL,
				       "model: \"%s\": T (context) %d but the dataset's samples hold "
				       "%d values (a sample is T token ids: a text set's)",
				       spec, g.t, in_dim);
		input->cb = 0;
		gpt_nodes(d, n, &g, classes);
		return 0;
	}
	return sl_fail(err, SL_EINVAL,
		       "model: unknown \"%s\" (expected logreg, mlp:<in>-<hidden>...-<out>, lenet5, "
		       "resnet20, resnet:N, gpt:L<layers>-H<heads>-E<width>-T<context>, or "
		       "{\"nodes\": [...]})",
		       spec);
}

/* ---- block boundaries ------------------------------------------------- */

/* What the cut depths read of a model, built or only described: node i
 * reads in[i][0..n_in[i]) (-1: the model's input) and has parameters when
 * params[i]. */
typedef struct wiring {
	int n;
	int n_in[MODEL_MAX_NODES];
	int in[MODEL_MAX_NODES][OP_MAX_IN];
	uint8_t params[MODEL_MAX_NODES];
} wiring;

/* The wiring of a spec's nodes (n_in 0: the node before), or -1 when the
 * spec is not one model_new takes. */
static int
spec_wiring(const char *spec, wiring *g)
{
	node_desc d[MODEL_MAX_NODES];
	int sizes[MLP_MAX_SIZES], ns = 0, in = 1, classes = 2;
	shape input = {1, 1, 1, 0};
	char err[SL_ERR_LEN];
	if (!strncmp(spec, "mlp:", 4)) {
		if (parse_mlp(spec + 4, sizes, &ns, err) < 0)
			return -1;
		in = sizes[0];
		classes = sizes[ns - 1];
	}
	gpt_dims gd;
	if (!strncmp(spec, "gpt:", 4)) {
		if (model_parse_gpt(spec, &gd, err) < 0)
			return -1;
		in = gd.t;
	}
	if (model_spec_nodes(spec, in, classes, d, &g->n, &input, err) < 0)
		return -1;
	for (int i = 0; i < g->n; i++) {
		const op_class *op = op_find(d[i].op);
		g->params[i] = op && op->init;
		g->n_in[i] = d[i].n_in ? SL_MIN(d[i].n_in, OP_MAX_IN) : 1;
		for (int k = 0; k < g->n_in[i]; k++)
			g->in[i][k] = d[i].n_in ? d[i].inputs[k] : i - 1;
	}
	return 0;
}

static void
model_wiring(const model *m, wiring *g)
{
	g->n = m->n_nodes;
	for (int i = 0; i < m->n_nodes; i++) {
		const node *nd = &m->nodes[i];
		g->params[i] = nd->n_params > 0;
		g->n_in[i] = nd->n_in;
		for (int k = 0; k < nd->n_in; k++)
			g->in[i][k] = nd->inputs[k];
	}
}

/* Does exactly one tensor cross the boundary before node b: does every
 * edge from the input or a node before b to b or a node after it leave
 * from the same output? */
static int
one_tensor_crosses(const wiring *g, int b)
{
	int from = -2; /* none yet */
	for (int i = b; i < g->n; i++)
		for (int k = 0; k < g->n_in[i]; k++) {
			int j = g->in[i][k];
			if (j >= b || j == from)
				continue;
			if (from != -2)
				return 0;
			from = j;
		}
	return from != -2;
}

/* g's cut depths (model.h) into depths[0..max); their count. Depth d is a
 * cut when a boundary between the d-th parameterised node from the top
 * (included) and the (d + 1)-th (excluded) is crossed by one tensor. */
static int
wiring_cuts(const wiring *g, int *depths, int max)
{
	int top[MODEL_MAX_NODES], L = 0, n = 0;
	for (int i = g->n - 1; i >= 0; i--)
		if (g->params[i])
			top[L++] = i; /* top[d - 1]: the d-th from the top */
	for (int d = 1; d < L; d++) {
		int cut = 0;
		for (int b = top[d - 1]; b > top[d] && !cut; b--)
			cut = one_tensor_crosses(g, b);
		if (cut && n++ < max)
			depths[n - 1] = d;
	}
	return n;
}

int
model_cut_depths(const model *m, int *depths, int max)
{
	wiring g;
	model_wiring(m, &g);
	return wiring_cuts(&g, depths, max);
}

int
model_spec_cut_depths(const char *spec, int *depths, int max)
{
	wiring g;
	if (spec_wiring(spec, &g) < 0)
		return -1;
	return wiring_cuts(&g, depths, max);
}

int
model_spec_param_layers(const char *spec)
{
	wiring g;
	int np = 0;
	if (spec_wiring(spec, &g) < 0)
		return -1;
	for (int i = 0; i < g.n; i++)
		np += g.params[i];
	return np;
}

/* "1, 5, 9" into buf; runs of 5 or more at one step as "1, 5, ..., 37"
 * when the whole list does not fit */
static size_t
depths_put(const int *d, int n, int shorten, char *buf, size_t cap)
{
	size_t len = 0;
	buf[0] = 0;
	for (int i = 0; i < n && len < cap; i++) {
		int run = i;
		while (shorten && run + 1 < n && d[run + 1] - d[run] == d[i + 1] - d[i])
			run++;
		if (run - i >= 4) {
			len += (size_t)snprintf(buf + len, cap - len, "%s%d, %d, ..., %d",
						i ? ", " : "", d[i], d[i + 1], d[run]);
			i = run;
		} else {
			len += (size_t)snprintf(buf + len, cap - len, "%s%d", i ? ", " : "", d[i]);
		}
	}
	return len;
}

const char *
model_depths_str(const int *depths, int n, char *buf, size_t cap)
{
	if (cap && depths_put(depths, n, 0, buf, cap) >= cap)
		depths_put(depths, n, 1, buf, cap);
	return buf;
}

