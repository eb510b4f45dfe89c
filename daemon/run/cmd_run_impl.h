/* cmd_run_impl.h - what the parts of `stalelab run` share: cmd_run.c (the
 * run from its options to its summary), run_opts.c (options, --help,
 * --config, --replay) and run_resume.c (--resume, --checkpoint-*). Its log
 * records and progress are daemon/progress/'s, which sweep cells use too;
 * no file outside daemon/run/ includes it. */
#ifndef SL_CMD_RUN_IMPL_H
#define SL_CMD_RUN_IMPL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "run.h"
#include "progress.h"
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

/* "stalelab run: MSG" (msg, else err) on stderr; returns 2. */
int runcli_usage_error(const char *msg, char *err);

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

/* --checkpoint-every's into --checkpoint-dir, the API's to
 * their path */
void runcli_on_checkpoint(void *ud, const run_cmd *cmd, const uint8_t *buf, size_t len);

#endif
