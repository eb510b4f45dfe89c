/* cmd_run_impl.h - what the parts of `stalelab run` share: cmd_run.c (the
 * run from its options to its summary), run_opts.c (options, --help,
 * --config, --replay), run_resume.c (--resume, --checkpoint-*) and
 * run_progress.c (the callbacks' log records, the progress on stderr).
 * A sweep's cells (sweep_cell.c) log through the same callbacks; no other
 * file includes it. */
#ifndef SL_CMD_RUN_IMPL_H
#define SL_CMD_RUN_IMPL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "run.h"
#include "runlog.h"

/* ---- run_opts.c ---------------------------------------------------------- */

/* The options that are not fields of the run object. */
typedef struct runcli_opts {
	const char *log_path;    /* --log (NULL: not given) */
	const char *log_format;  /* --log-format: jsonl (default) or csv */
	const char *replay_path; /* --replay */
	const char *resume_path; /* --resume, as given (a checkpoint or a directory) */
	const char *ckpt_dir;    /* --checkpoint-dir */
	int quiet, want_run, have_config, ckpt_keep;
	uint64_t ckpt_every;
} runcli_opts;

#define RUNCLI_GO (-1) /* runcli_parse: no exit yet, go on */

/* The first pass over argv: --help, usage errors, the --config files in
 * order and --replay into cfg (*conf keeps the last file's object, for its
 * schedule), the other options into o. RUNCLI_GO, or the exit code (0
 * after --help, 2 bad usage; the message printed, *conf released). */
int runcli_parse(int argc, char **argv, runcli_opts *o, run_config *cfg,
		 json_t **conf, char *err);

/* The second pass: every flag in order, as one-field run objects into
 * cfg, and --log, --log-format, --quiet into o. 0, or -SL_EINVAL with err
 * naming the flag. */
int runcli_apply(int argc, char **argv, runcli_opts *o, run_config *cfg, char *err);

/* Whether cfg has a stop (epochs, steps, seconds or target accuracy). */
int runcli_has_stop(const run_config *cfg);

/* "stalelab run: MSG" (msg, else err) on stderr; returns 2. */
int runcli_usage_error(const char *msg, char *err);

/* cmd_run.c: FNV-1a (64 bits) of the server's weights as 16 hex digits
 * (the end record's "weights"); 0, or -1 out of memory */
int runcli_weights_hash(run *r, char *out, size_t cap);

/* ---- run_resume.c -------------------------------------------------------- */

/* A resumed run: the checkpoint and the changes the flags make to it. */
typedef struct runcli_resume {
	const char *path;  /* the checkpoint read: --resume's, or its directory's newest */
	char newest[4200];
	uint8_t *buf;      /* its bytes, for run_open (NULL: a new run) */
	size_t len;
	run_config ck;     /* its run object */
	uint64_t start_v;  /* its version */
	run_cmd cmd;       /* the flags' changes, applied at start_v ... */
	int n_cmd;         /* ... when 1 */
} runcli_resume;

/* Read the checkpoint (or a directory's newest) at arg into rs, its run
 * object into cfg without its stop (the stop is the command line's).
 * 0, or -1 with the message printed (exit 2). */
int runcli_resume_read(const char *arg, runcli_resume *rs, run_config *cfg, char *err);

/* After the flags: cfg (what they made) becomes the checkpoint's run
 * object with the flags' threads and stop (else its own), the other
 * differences a change in rs->cmd. 0, or -SL_EINVAL with err naming the
 * flag (a fixed field changed, no stop anywhere). */
int runcli_resume_merge(runcli_resume *rs, run_config *cfg, char *err);

/* --checkpoint-dir: made if missing, holding nothing past start_v (a new
 * run: nothing at all); what a kill left pruned to keep. 0 or -SL_EINVAL. */
int runcli_check_ckpt_dir(const char *dir, uint64_t start_v, int resumed, int keep,
			  char *err);

/* ---- run_progress.c ------------------------------------------------------ */

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
void runcli_on_eval(void *ud, const run_eval *e);
void runcli_on_change(void *ud, double t, uint64_t v, const run_cmd *cmd);
void runcli_on_diverged(void *ud, const run_divergence *d);
void runcli_on_progress(void *ud, const run_eval *e);
/* run_resume.c: --checkpoint-every's into --checkpoint-dir, the API's to
 * their path */
void runcli_on_checkpoint(void *ud, const run_cmd *cmd, const uint8_t *buf, size_t len);

/* Where the log goes: given, else stdout (NULL), except when stdout is the
 * terminal the bar is drawn on: then a new file named into buf. */
const char *runcli_pick_log(const char *given, int bar, const char *format, char *buf,
			    size_t cap);

#endif
