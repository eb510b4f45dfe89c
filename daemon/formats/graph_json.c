/* graph_json.c - a run object's model given node by node (graph_json.h). */
#include "graph_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_spec.h"
#include "model.h"
#include "sl.h"
#include "suggest.h"

/* a node's key that is no field: the nearest of op, inputs and the
 * attributes */
static int
unknown_key(int i, const char *key, char *err)
{
	char list[256] = "expected op, inputs", note[SL_ERR_LEN];
	suggest near;
	suggest_start(&near, key);
	suggest_offer(&near, "op");
	suggest_offer(&near, "inputs");
	for (const graph_attr *a = graph_attrs; a->key; a++) {
		size_t at = strlen(list);
		snprintf(list + at, sizeof(list) - at, ", %s", a->key);
		suggest_offer(&near, a->key);
	}
	return sl_fail(err, SL_EINVAL, "model.nodes[%d].%s: unknown field%s", i, key,
		       suggest_note(note, sizeof(note), list, NULL, near.best));
}

/* a float attribute's value refused: what it must be, what it was */
static int
bad_float(int i, const graph_attr *a, json_t *v, char *err)
{
	char got[64];
	if (json_is_number(v))
		snprintf(got, sizeof(got), "%.10g", json_number_value(v));
	else if (json_is_string(v))
		snprintf(got, sizeof(got), "\"%.40s\"", json_string_value(v));
	else
		snprintf(got, sizeof(got), "%s", json_is_boolean(v) ? "a boolean"
						 : json_is_null(v) ? "null" : "an object or array");
	return sl_fail(err, SL_EINVAL, "model.nodes[%d].%s: must be a number in (%g, %g], got %s",
		       i, a->key, a->fmin, a->fmax, got);
}

/* node i's JSON object into d (its op string kept in json) */
static int
node_from_json(json_t *o, int i, node_desc *d, char *err)
{
	memset(d, 0, sizeof(*d));
	if (!json_is_object(o))
		return sl_fail(err, SL_EINVAL, "model.nodes[%d]: expected an object "
			       "{\"op\": ..., \"inputs\": [...], ...}", i);
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v) {
		if (!strcmp(key, "op")) {
			if (!json_is_string(v))
				return sl_fail(err, SL_EINVAL, "model.nodes[%d].op: expected a string", i);
			d->op = json_string_value(v);
			continue;
		}
		if (!strcmp(key, "inputs")) {
			size_t k;
			json_t *x;
			if (!json_is_array(v) || json_array_size(v) > OP_MAX_IN)
				return sl_fail(err, SL_EINVAL, "model.nodes[%d].inputs: expected an "
					       "array of at most %d node indices (-1: the model's input)",
					       i, OP_MAX_IN);
			json_array_foreach(v, k, x) {
				if (!json_is_integer(x))
					return sl_fail(err, SL_EINVAL, "model.nodes[%d].inputs[%zu]: "
						       "expected a node index", i, k);
				json_int_t in = json_integer_value(x);
				d->inputs[k] = in < -2 ? -2 : in > MODEL_MAX_NODES ? MODEL_MAX_NODES : (int)in;
			}
			d->n_in = (int)json_array_size(v);
			continue;
		}
		const graph_attr *a = graph_attrs;
		while (a->key && strcmp(a->key, key))
			a++;
		if (!a->key)
			return unknown_key(i, key, err);
		if (a->is_float) {
			if (!json_is_number(v) || graph_attr_set_float(a, d, json_number_value(v)) < 0)
				return bad_float(i, a, v, err);
			continue;
		}
		json_int_t x = json_is_boolean(v) ? json_is_true(v) : json_integer_value(v);
		if ((!json_is_integer(v) && !(json_is_boolean(v) && a->max == 1)) || x < a->min ||
		    x > a->max)
			return sl_fail(err, SL_EINVAL, "model.nodes[%d].%s: must be an integer in "
				       "[%d, %d]%s", i, key, a->min, a->max,
				       a->max == 1 ? " or a boolean" : "");
		*(int *)((char *)d + a->off) = (int)x;
	}
	if (!d->op)
		return sl_fail(err, SL_EINVAL, "model.nodes[%d].op: missing (the op it runs: "
			       "dense, conv2d, ...)", i);
	return 0;
}

int
graph_json_parse(json_t *v, char *buf, size_t cap, char *err)
{
	const char *key;
	json_t *x;
	json_object_foreach(v, key, x)
		if (strcmp(key, "nodes")) {
			char note[SL_ERR_LEN];
			suggest near;
			suggest_start(&near, key);
			suggest_offer(&near, "nodes");
			return sl_fail(err, SL_EINVAL, "model.%s: unknown field%s", key,
				       suggest_note(note, sizeof(note), "expected nodes", NULL,
						    near.best));
		}
	json_t *nodes = json_object_get(v, "nodes");
	if (!json_is_array(nodes) || !json_array_size(nodes))
		return sl_fail(err, SL_EINVAL, "model.nodes: expected a non-empty array of nodes "
			       "(or give the model by name: \"lenet5\", \"mlp:...\")");
	if (json_array_size(nodes) > MODEL_MAX_NODES)
		return sl_fail(err, SL_EINVAL, "model.nodes: at most %d nodes", MODEL_MAX_NODES);
	snprintf(buf, cap, "%s", GRAPH_PREFIX);
	size_t i;
	json_array_foreach(nodes, i, x) {
		node_desc d;
		int rc = node_from_json(x, (int)i, &d, err);
		if (rc < 0)
			return rc;
		/* an op name with spec syntax in it cannot pass for another */
		if (strpbrk(d.op, "();,=+") || !*d.op)
			return sl_fail(err, SL_EINVAL, "model.nodes[%zu].op: unknown \"%s\"", i, d.op);
		if (graph_spec_append(buf, cap, &d) < 0)
			return sl_fail(err, SL_EINVAL, "model: the graph is too long (%zu bytes "
				       "at most as a spec)", cap - 1);
	}
	/* the ops, their inputs and their order, with the same messages */
	node_desc all[MODEL_MAX_NODES];
	int n;
	return graph_spec_parse(buf, all, MODEL_MAX_NODES, &n, err);
}

json_t *
graph_json(const char *spec)
{
	node_desc d[MODEL_MAX_NODES];
	int n;
	char err[SL_ERR_LEN];
	if (!graph_spec_is(spec) || graph_spec_parse(spec, d, MODEL_MAX_NODES, &n, err) < 0)
		return NULL;
	json_t *nodes = json_array();
	for (int i = 0; i < n; i++) {
		json_t *o = json_pack("{s:s}", "op", d[i].op);
		if (d[i].n_in) {
			json_t *in = json_array();
			for (int k = 0; k < d[i].n_in; k++)
				json_array_append_new(in, json_integer(d[i].inputs[k]));
			json_object_set_new(o, "inputs", in);
		}
		for (const graph_attr *a = graph_attrs; a->key; a++) {
			if (a->is_float) {
				/* the shortest decimal of the float: 0.01, not 0.0099999998 */
				float f = graph_attr_float(a, &d[i]);
				char num[32];
				if (f != 0 && f != (float)a->fdef)
					json_object_set_new(o, a->key, json_real(strtod(
						graph_float_str(f, num, sizeof(num)), NULL)));
				continue;
			}
			int v = *(const int *)((const char *)&d[i] + a->off);
			if (v && v != a->def)
				json_object_set_new(o, a->key, a->max == 1 ? json_true() : json_integer(v));
		}
		json_array_append_new(nodes, o);
	}
	return json_pack("{s:o}", "nodes", nodes);
}

/* a conv stem, one residual block of two convs, global average pooling and
 * the dense head: 10 classes, any image (fashion-mnist, cifar10,
 * synthetic) */
#define GRAPH_EXAMPLE GRAPH_PREFIX "conv2d(in=-1,units=16,k=3,pad=1,relu=1);" \
	"conv2d(units=16,k=3,pad=1,relu=1);conv2d(units=16,k=3,pad=1);add(in=2+0);" \
	"relu();avgpool();dense(units=10)"

static json_t *
builtins_schema(void)
{
	json_t *a = json_array();
	for (const model_builtin *b = model_builtins; b->spec; b++) {
		json_t *o = json_pack("{s:s,s:s}", "spec", b->spec, "doc", b->doc);
		if (b->arg)
			json_object_set_new(o, "arg", json_pack("{s:s,s:s,s:i,s:i,s:i,s:i}", "key",
								b->arg, "type", "integer", "min", b->min,
								"max", b->max, "step", b->step,
								"default", b->min));
		json_array_append_new(a, o);
	}
	return a;
}

/* an attribute as a schema field: a boolean (0 or 1), an integer in
 * [min, max], its default when one lies in the range (units, k: none), or
 * a number in (min, max] with its default */
static json_t *
attr_schema(const graph_attr *a)
{
	if (a->is_float)
		return json_pack("{s:s,s:s,s:f,s:b,s:f,s:f,s:s}", "key", a->key, "type", "number",
				 "min", a->fmin, "min_open", 1, "max", a->fmax, "default", a->fdef,
				 "doc", a->doc);
	if (a->max == 1)
		return json_pack("{s:s,s:s,s:b,s:s}", "key", a->key, "type", "boolean",
				 "default", a->def != 0, "doc", a->doc);
	json_t *o = json_pack("{s:s,s:s,s:i,s:i}", "key", a->key, "type", "integer",
			      "min", a->min, "max", a->max);
	if (a->def >= a->min)
		json_object_set_new(o, "default", json_integer(a->def));
	json_object_set_new(o, "doc", json_string(a->doc));
	return o;
}

static json_t *
graph_schema(void)
{
	json_t *ops = json_array(), *attrs = json_array();
	for (int i = 0; op_table[i]; i++)
		json_array_append_new(ops, json_pack("{s:s,s:i}", "op", op_table[i]->name,
						     "inputs", op_table[i]->n_in));
	for (const graph_attr *a = graph_attrs; a->key; a++)
		json_array_append_new(attrs, attr_schema(a));
	return json_pack("{s:s,s:o,s:o,s:o}", "doc",
			 "{\"nodes\": [...]}: nodes in topological order, each an op with its "
			 "inputs (earlier nodes' indices, -1 the model's input; absent: the node "
			 "before) and attributes; the last node gives the classes",
			 "ops", ops, "attrs", attrs, "example", graph_json(GRAPH_EXAMPLE));
}

void
graph_json_schema(json_t *o)
{
	json_object_set_new(o, "specs", builtins_schema());
	json_object_set_new(o, "graph", graph_schema());
}
