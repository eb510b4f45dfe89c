/* config_json.h - the run object to and from JSON (jansson). Parsing is a
 * pure function: text in, run_config or an error naming the field out. */
#ifndef SL_CONFIG_JSON_H
#define SL_CONFIG_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "config.h"
#include "run.h"

/* Apply the JSON object in text[0..len) on top of *c (callers start from
 * config_defaults). Unknown fields, wrong types and out-of-range values are
 * errors naming the field ("stop.epochs: expected a number"); syntax errors
 * give line and column. *c is unchanged on error. */
int config_parse(const char *text, size_t len, run_config *c, char *err);

/* Same, from an already parsed object. */
int config_apply_json(json_t *obj, run_config *c, char *err);

/* GET /api/v1/schema: every field of the run object, of a worker and of
 * PATCH /api/v1/run's controls, and every rule with its parameters (new
 * reference). */
json_t *config_schema_json(void);

/* A delay object as JSON (new reference). */
json_t *config_delay_json(const delay_cfg *d);

/* The run object as JSON (new reference). */
json_t *config_to_json(const run_config *c);

/* A change ("set" object of a schedule entry, a PATCH body, a log record)
 * to a run_cmd for `worker` (-1: run-wide). Partial rule_params and delay
 * objects merge onto the values in cur. Unknown fields, wrong types and
 * ranges are errors naming the field, prefixed by path. */
int cmd_from_json(json_t *set, int worker, const run_config *cur,
		  const char *path, run_cmd *c, char *err);

/* {"event": "set", "worker": k?, "set": {...}, "origin": "..."} */
json_t *cmd_to_json(const run_cmd *c);

/* The run object's "schedule" array (NULL or absent: none) to entries
 * (malloc'd, caller frees); sorted by nothing: each entry fires when its
 * version or time is reached. */
int sched_from_json(json_t *arr, const run_config *cur, run_sched **out,
		    int *n, char *err);

#endif
