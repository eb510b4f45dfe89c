/* model_impl.h - what model.c, model_spec.c and model_data.c share and no
 * one else uses: a spec expanded into node descriptions, and the gpt
 * spec's dimensions. */
#ifndef SL_MODEL_IMPL_H
#define SL_MODEL_IMPL_H

#include "model.h"

/* gpt:L<layers>-H<heads>-E<width>-T<context> */
typedef struct gpt_dims {
	int l, h, e, t;
} gpt_dims;

/* "gpt:L4-H4-E128-T64" into g: the four fields in that order, each a
 * letter and a positive integer in range, E a multiple of H; 0 or a
 * negative SL_E* code with err set. */
int model_parse_gpt(const char *spec, gpt_dims *g, char *err);

/* Expand a spec (a builtin or a graph spec) into node descriptions
 * d[0..*n), relus fused, and set input->cb (whether the input is maps);
 * in_dim and classes are the data set's. 0 or a negative SL_E* code with
 * err set. */
int model_spec_nodes(const char *spec, int in_dim, int classes, node_desc *d, int *n,
		     shape *input, char *err);

#endif
