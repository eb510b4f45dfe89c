/* graph_spec.h - a model given node by node ("model": {"nodes": [...]} in a
 * run object, docs/formats.md) as one spec string, so it travels like the
 * named models ("lenet5") through the run object, checkpoints, the log
 * and sweeps:
 *
 *   graph:OP(key=value,...);OP(...);...
 *
 * Each node is an op of the table (engine/nn/ops/table.c) with its
 * attributes; `in` names its inputs, node indices joined by '+' (-1: the
 * model's input; absent: the node before). An attribute left out is its
 * default (graph_attrs).
 * The daemon turns the JSON into this form and back (config_json.c); the
 * model is built from it by model_new. */
#ifndef SL_GRAPH_SPEC_H
#define SL_GRAPH_SPEC_H

#include <stddef.h>

#include "op.h"

#define GRAPH_PREFIX "graph:"

/* An attribute of a node: its key (in the spec and the JSON), where it
 * goes in node_desc (an int, or a float when is_float) and its range. */
typedef struct graph_attr {
	const char *key;
	size_t off;
	int min, max;    /* an int: [min, max] */
	int def;         /* when left out (and not written) */
	const char *doc;
	int is_float;    /* a float in (fmin, fmax]; node_desc holds 0 when it is
			  * left out or given as fdef, which the op reads as fdef */
	double fmin, fmax, fdef;
} graph_attr;

/* The attributes, NULL-key-terminated. */
extern const graph_attr graph_attrs[];

/* A float attribute's value v into d: 0, or -1 (d untouched) when v is
 * not in (a->fmin, a->fmax] or is no float above 0. The default, given,
 * is stored as 0, as when left out. */
int graph_attr_set_float(const graph_attr *a, node_desc *d, double v);
/* A float attribute's value in d (0: left out, the default). */
float graph_attr_float(const graph_attr *a, const node_desc *d);
/* The shortest decimal ("0.01") that graph_attr_set_float's reading of
 * its text (strtod, then float) gives back as f, in buf. */
const char *graph_float_str(float f, char *buf, size_t cap);

/* 1 when spec is a graph spec. */
int graph_spec_is(const char *spec);

/* Parse a graph spec into d[0..*n) (at most max nodes). The ops and their
 * inputs' order are checked here (a known op, its number of inputs, only
 * earlier nodes read: no cycle); shapes when the model is built. 0, or
 * -SL_EINVAL with err naming the node ("model.nodes[3].op: ..."). */
int graph_spec_parse(const char *spec, node_desc *d, int max, int *n, char *err);

/* What to print for a model spec: spec itself, or for a graph "a graph of
 * N nodes" (in buf). */
const char *graph_spec_label(const char *spec, char *buf, size_t cap);

/* Append node d to the spec in buf (cap bytes, NUL-terminated); 0, or
 * -SL_EINVAL when it does not fit. */
int graph_spec_append(char *buf, size_t cap, const node_desc *d);

#endif
