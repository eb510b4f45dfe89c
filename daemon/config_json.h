/* config_json.h - the run object to and from JSON (jansson). Parsing is a
 * pure function: text in, run_config or an error naming the field out. */
#ifndef SL_CONFIG_JSON_H
#define SL_CONFIG_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "config.h"

/* Apply the JSON object in text[0..len) on top of *c (callers start from
 * config_defaults). Unknown fields, wrong types and out-of-range values are
 * errors naming the field ("stop.epochs: expected a number"); syntax errors
 * give line and column. *c is unchanged on error. */
int config_parse(const char *text, size_t len, run_config *c, char *err);

/* Same, from an already parsed object. */
int config_apply_json(json_t *obj, run_config *c, char *err);

/* The run object as JSON (new reference). */
json_t *config_to_json(const run_config *c);

#endif
