/* graph_json.h - a model given node by node in a run object,
 * "model": {"nodes": [{"op": "conv2d", "inputs": [-1], "units": 16, "k": 3,
 * "pad": 1, "relu": true}, ...]} (docs/formats.md), to and from the graph
 * spec the engine builds it from (engine/nn/graph_spec.h). */
#ifndef SL_GRAPH_JSON_H
#define SL_GRAPH_JSON_H

#include <jansson.h>
#include <stddef.h>

/* The model object v as a graph spec in buf (cap bytes). 0, or -SL_EINVAL
 * with err naming the node and the field ("model.nodes[2].op: ..."). */
int graph_json_parse(json_t *v, char *buf, size_t cap, char *err);

/* The graph spec as the run object's model (a new reference), or NULL
 * when spec is not a graph. */
json_t *graph_json(const char *spec);

/* What GET /api/v1/schema adds to the run object's "model" field (o):
 * "specs", the named models (model.h's model_builtins), and "graph", the
 * form given node by node: its ops, their attributes and a small example
 * that trains on 10-class images. */
void graph_json_schema(json_t *o);

#endif
