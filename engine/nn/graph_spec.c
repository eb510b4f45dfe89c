/* graph_spec.c - a model's nodes as one spec string (graph_spec.h). */
#include "graph_spec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl.h"
#include "suggest.h"

#define A(k, m, lo, hi, df, d) {k, offsetof(node_desc, m), lo, hi, df, d, 0, 0, 0, 0}
/* a float attribute in (lo, hi] */
#define F(k, m, lo, hi, df, d) {k, offsetof(node_desc, m), 0, 0, 0, d, 1, lo, hi, df}

const graph_attr graph_attrs[] = {
	A("units", units, 1, 1 << 20, 0, "dense: outputs; conv2d: output channels"),
	A("k", k, 1, 64, 0, "conv2d, maxpool: the window's size"),
	A("stride", stride, 1, 64, 1, "conv2d, maxpool: the step between windows"),
	A("pad", pad, 0, 64, 0, "conv2d, maxpool: zeros around the input"),
	A("relu", relu, 0, 1, 0, "dense, conv2d, batchnorm, shortcut: a relu fused on the output"),
	A("no_bias", no_bias, 0, 1, 0, "conv2d: no bias (a batch norm follows)"),
	A("he", he, 0, 1, 0, "conv2d, dense: He init though no relu follows (a batch norm does)"),
	A("heads", heads, 1, 256, 0, "attention: heads (each width / heads columns of q, k, v)"),
	A("vocab", vocab, 2, 65536, 0, "embed: the token table's rows (the data's classes)"),
	A("tie", tie, 1, 1 << 20, 0,
	  "lmhead: 1 + the index of the embed node whose token table it uses (tie=1: node 0)"),
	F("init_std", init_std, 0, 1, 0.02,
	  "linear: the weights' normal sd (a GPT's residual projections: 0.02 / sqrt(2 layers))"),
	{NULL, 0, 0, 0, 0, NULL, 0, 0, 0, 0},
};

int
graph_attr_set_float(const graph_attr *a, node_desc *d, double v)
{
	if (!(v > a->fmin && v <= a->fmax) || !((float)v > 0))
		return -1;
	float f = (float)v;
	*(float *)((char *)d + a->off) = f == (float)a->fdef ? 0.0f : f;
	return 0;
}

float
graph_attr_float(const graph_attr *a, const node_desc *d)
{
	return *(const float *)((const char *)d + a->off);
}

const char *
graph_float_str(float f, char *buf, size_t cap)
{
	for (int digits = 1; digits <= 9; digits++) {
		snprintf(buf, cap, "%.*g", digits, (double)f);
		if ((float)strtod(buf, NULL) == f)
			break;
	}
	return buf;
}

int
graph_spec_is(const char *spec)
{
	return !strncmp(spec, GRAPH_PREFIX, strlen(GRAPH_PREFIX));
}

/* the op named s (len bytes), or a message with the nearest name */
static const op_class *
find_op(const char *s, size_t len, int i, char *err)
{
	char name[32];
	if (len >= sizeof(name)) {
		sl_fail(err, SL_EINVAL, "model.nodes[%d].op: unknown \"%.*s\"", i, (int)len, s);
		return NULL;
	}
	memcpy(name, s, len);
	name[len] = 0;
	const op_class *o = op_find(name);
	if (o)
		return o;
	char list[256] = "expected ", note[SL_ERR_LEN];
	suggest near;
	suggest_start(&near, name);
	for (int k = 0; op_table[k]; k++) {
		size_t at = strlen(list);
		snprintf(list + at, sizeof(list) - at, "%s%s", k ? ", " : "", op_table[k]->name);
		suggest_offer(&near, op_table[k]->name);
	}
	sl_fail(err, SL_EINVAL, "model.nodes[%d].op: unknown \"%s\"%s", i, name,
		suggest_note(note, sizeof(note), list, NULL, near.best));
	return NULL;
}

/* the text s..end as a string in buf (cap bytes): 0, or -1 when it is
 * empty or does not fit */
static int
text_in(const char *s, const char *end, char *buf, size_t cap)
{
	size_t len = (size_t)(end - s);
	if (!len || len >= cap)
		return -1;
	memcpy(buf, s, len);
	buf[len] = 0;
	return 0;
}

/* an integer in [lo, hi] from s..end */
static int
int_in(const char *s, const char *end, long lo, long hi, long *out)
{
	char buf[24];
	if (text_in(s, end, buf, sizeof(buf)) < 0)
		return -1;
	char *e;
	errno = 0;
	long v = strtol(buf, &e, 10);
	if (*e || errno || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* a float attribute's value from s..end into d (graph_attr_set_float) */
static int
float_in(const char *s, const char *end, const graph_attr *a, node_desc *d)
{
	char buf[32];
	if (text_in(s, end, buf, sizeof(buf)) < 0)
		return -1;
	char *e;
	errno = 0;
	double v = strtod(buf, &e);
	if (*e || errno)
		return -1;
	return graph_attr_set_float(a, d, v);
}

/* "in=3+5" into d's inputs (node i) */
static int
parse_inputs(const char *s, const char *end, node_desc *d, int i, char *err)
{
	d->n_in = 0;
	while (s < end) {
		const char *plus = memchr(s, '+', (size_t)(end - s));
		const char *e = plus ? plus : end;
		long v;
		if (d->n_in == OP_MAX_IN)
			return sl_fail(err, SL_EINVAL, "model.nodes[%d].inputs: at most %d", i,
				       OP_MAX_IN);
		if (int_in(s, e, -1, i - 1, &v) < 0)
			return sl_fail(err, SL_EINVAL,
				       "model.nodes[%d].inputs[%d]: \"%.*s\" is not an earlier node "
				       "(-1, the model's input, to %d; nodes are in topological order, so "
				       "a node reads only nodes before it and no cycle can form)",
				       i, d->n_in, (int)(e - s), s, i - 1);
		d->inputs[d->n_in++] = (int)v;
		s = plus ? plus + 1 : end;
	}
	return 0;
}

/* one node "OP(key=value,...)" from s..end into d */
static int
parse_node(const char *s, const char *end, node_desc *d, int i, char *err)
{
	memset(d, 0, sizeof(*d));
	const char *open = memchr(s, '(', (size_t)(end - s));
	if (!open || end[-1] != ')')
		return sl_fail(err, SL_EINVAL, "model.nodes[%d]: \"%.*s\" is not OP(key=value,...)",
			       i, (int)(end - s), s);
	const op_class *o = find_op(s, (size_t)(open - s), i, err);
	if (!o)
		return -SL_EINVAL;
	d->op = o->name;
	const char *p = open + 1, *stop = end - 1;
	while (p < stop) {
		const char *comma = memchr(p, ',', (size_t)(stop - p));
		const char *e = comma ? comma : stop;
		const char *eq = memchr(p, '=', (size_t)(e - p));
		if (!eq)
			return sl_fail(err, SL_EINVAL, "model.nodes[%d]: \"%.*s\" is not key=value",
				       i, (int)(e - p), p);
		size_t klen = (size_t)(eq - p);
		int rc = 0;
		if (klen == 2 && !memcmp(p, "in", 2)) {
			rc = parse_inputs(eq + 1, e, d, i, err);
		} else {
			const graph_attr *a = graph_attrs;
			while (a->key && (strlen(a->key) != klen || memcmp(a->key, p, klen)))
				a++;
			long v;
			if (!a->key)
				return sl_fail(err, SL_EINVAL, "model.nodes[%d].%.*s: unknown attribute",
					       i, (int)klen, p);
			if (a->is_float) {
				if (float_in(eq + 1, e, a, d) < 0)
					return sl_fail(err, SL_EINVAL,
						       "model.nodes[%d].%s: must be a number in (%g, %g], "
						       "got \"%.*s\"", i, a->key, a->fmin, a->fmax,
						       (int)(e - eq - 1), eq + 1);
			} else if (int_in(eq + 1, e, a->min, a->max, &v) < 0)
				return sl_fail(err, SL_EINVAL,
					       "model.nodes[%d].%s: must be an integer in [%d, %d], "
					       "got \"%.*s\"", i, a->key, a->min, a->max,
					       (int)(e - eq - 1), eq + 1);
			else
				*(int *)((char *)d + a->off) = (int)v;
		}
		if (rc < 0)
			return rc;
		p = comma ? comma + 1 : stop;
	}
	/* left out: the default (a float's is 0 in d, read by the op as fdef) */
	for (const graph_attr *a = graph_attrs; a->key; a++)
		if (!a->is_float && !*(int *)((char *)d + a->off))
			*(int *)((char *)d + a->off) = a->def;
	int n_in = d->n_in ? d->n_in : 1;
	if (n_in != o->n_in)
		return sl_fail(err, SL_EINVAL,
			       "model.nodes[%d].inputs: %s reads %d input%s, %s %d", i, o->name,
			       o->n_in, o->n_in == 1 ? "" : "s",
			       d->n_in ? "given" : "given none (the node before: 1), so", n_in);
	return 0;
}

int
graph_spec_parse(const char *spec, node_desc *d, int max, int *n, char *err)
{
	*n = 0;
	if (!graph_spec_is(spec))
		return sl_fail(err, SL_EINVAL, "model: \"%s\" is not a graph", spec);
	const char *s = spec + strlen(GRAPH_PREFIX);
	if (!*s)
		return sl_fail(err, SL_EINVAL, "model.nodes: empty (a model needs one node or more)");
	while (*s) {
		const char *semi = strchr(s, ';');
		const char *e = semi ? semi : s + strlen(s);
		if (*n == max)
			return sl_fail(err, SL_EINVAL, "model.nodes: more than %d nodes", max);
		int rc = parse_node(s, e, &d[*n], *n, err);
		if (rc < 0)
			return rc;
		(*n)++;
		s = semi ? semi + 1 : e;
	}
	return 0;
}

int
graph_spec_append(char *buf, size_t cap, const node_desc *d)
{
	size_t len = strlen(buf);
	int w = snprintf(buf + len, cap - len, "%s%s(", len && buf[len - 1] != ':' ? ";" : "",
			 d->op);
	for (int k = 0; w >= 0 && (size_t)w < cap - len && k < d->n_in; k++)
		w += snprintf(buf + len + w, cap - len - (size_t)w, "%s%d", k ? "+" : "in=",
			      d->inputs[k]);
	for (const graph_attr *a = graph_attrs; w >= 0 && (size_t)w < cap - len && a->key; a++) {
		if (a->is_float) {
			float f = graph_attr_float(a, d);
			char num[32];
			if (f != 0 && f != (float)a->fdef)
				w += snprintf(buf + len + w, cap - len - (size_t)w, "%s%s=%s",
					      buf[len + w - 1] == '(' ? "" : ",", a->key,
					      graph_float_str(f, num, sizeof(num)));
			continue;
		}
		int v = *(const int *)((const char *)d + a->off);
		if (v && v != a->def)
			w += snprintf(buf + len + w, cap - len - (size_t)w, "%s%s=%d",
				      buf[len + w - 1] == '(' ? "" : ",", a->key, v);
	}
	if (w >= 0 && (size_t)w < cap - len)
		w += snprintf(buf + len + w, cap - len - (size_t)w, ")");
	if (w < 0 || (size_t)w >= cap - len) {
		buf[len] = 0;
		return -SL_EINVAL;
	}
	return 0;
}

const char *
graph_spec_label(const char *spec, char *buf, size_t cap)
{
	if (!graph_spec_is(spec))
		return spec;
	int n = 1;
	for (const char *p = spec; *p; p++)
		n += *p == ';';
	snprintf(buf, cap, "a graph of %d node%s", n, n == 1 ? "" : "s");
	return buf;
}
