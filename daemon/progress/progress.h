/* progress.h - a run in this process, logged and shown as it goes: the
 * run's callbacks write its records to the log (JSON Lines or CSV) and draw
 * the progress bar or lines on stderr; the end record waits for the
 * weights' fingerprint. `stalelab run` (daemon/run/) and a sweep's cells
 * (daemon/sweep/) run through it. */
#ifndef SL_PROGRESS_H
#define SL_PROGRESS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "run.h"
#include "runlog.h"

/* Progress and logging state shared with the training callbacks. */
typedef struct run_ctx {
	runlog log;
	int bar;          /* a progress bar on stderr (a terminal, not quiet) */
	int quiet;
	int virt;
	double stop_epochs, stop_seconds, stop_target;
	uint64_t stop_steps;
	double t0;        /* sl_now() at the start of training */
	double frac0;     /* progress at the start (a resumed run); -1: unset */
	int log_failed;
	const char *ckpt_dir; /* --checkpoint-dir */
	int ckpt_keep;
	json_t *end;      /* the end record, written once the weights are hashed */
} run_ctx;

/* The run's callbacks (ud: the run_ctx). The end record is held back in
 * ctx->end; a failed log write sets ctx->log_failed. */
void progress_on_eval(void *ud, const run_eval *e);
void progress_on_change(void *ud, double t, uint64_t v, const run_cmd *cmd);
void progress_on_diverged(void *ud, const run_divergence *d);
/* a data split made: its record in the log */
void progress_on_split(void *ud, double t, uint64_t v, const run_split *sp);
void progress_on_progress(void *ud, const run_eval *e);
/* Where the log goes: given, else stdout (NULL), except when stdout is the
 * terminal the bar is drawn on: then a new file named into buf. */
const char *progress_pick_log(const char *given, int bar, const char *format, char *buf,
			      size_t cap);

/* Whether cfg has a stop (epochs, steps, seconds or target accuracy). */
int progress_has_stop(const run_config *cfg);

/* FNV-1a (64 bits) of the server's weights as float32 bytes, as 16 hex
 * digits (the end record's "weights"); 0, or -1 out of memory */
int progress_weights_hash(run *r, char *out, size_t cap);

#endif
