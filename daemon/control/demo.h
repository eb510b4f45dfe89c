/* demo.h - `stalelab serve --demo`: an unattended demonstration for talks
 * and kiosks. A demo is a base run object and a list of scenes; each scene
 * applies its changes, announces a caption (an SSE "caption" event and a
 * log record the front ends show) and lasts some seconds; at the end the
 * demo starts over with a fresh run. */
#ifndef SL_DEMO_H
#define SL_DEMO_H

#include <jansson.h>

#include "config.h"

#define DEMO_MAX_SCENES 64

typedef struct demo_scene {
	double seconds;
	char caption[256];
	json_t *set;     /* run-wide changes (may be NULL) */
	json_t *workers; /* [{"id": k, "set": {...}}] (may be NULL) */
} demo_scene;

typedef struct demo {
	run_config base;
	int n;
	demo_scene scene[DEMO_MAX_SCENES];
} demo;

/* The built-in demo: no delay, one straggler, heavy-tailed delays, asgd vs
 * odsgd vs dcasgd, more workers. */
int demo_builtin(demo *d, char *err);

/* {"run": {run object}, "scenes": [{"seconds": 30, "caption": "...",
 * "set": {...}, "workers": [{"id": 3, "set": {...}}]}]}. Validated in
 * full (every change is parsed against the base run); err names the field. */
int demo_parse(json_t *j, demo *d, char *err);

void demo_free(demo *d);

#endif
