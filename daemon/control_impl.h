/* control_impl.h - what the files of the daemon's control share (never
 * included outside them; the API is control.h):
 *
 *   control.c         the routes and dispatch: ctl_handle, the route table,
 *                     the GET views, PATCH and PUT changes, the token check
 *   control_runs.c    runs and checkpoints: start, stop, recover; checkpoint
 *                     files confined to --checkpoint-dir; POST run, recover,
 *                     checkpoint
 *   control_notify.c  what a run reports: terminal lines, the log, the events
 *                     ring; a PATCH waiting for its change to be applied
 *   control_demo.c    the demo's thread: its run and captioned scenes
 *   control_body.c    the request bodies, as pure functions (the fuzz
 *                     harnesses' entry points)
 *   control_sweeps.c  GET /api/v1/sweeps...: finished sweeps on disk
 *
 * "c->mu held" means the caller holds the ctl's lock. */
#ifndef SL_CONTROL_IMPL_H
#define SL_CONTROL_IMPL_H

#include "control.h"

#define PAST_MAX 32 /* earlier runs kept (oldest dropped first) */

/* a PATCH (or a recover) waiting for its change to be applied */
struct ctl_waiter {
	char *key;      /* the change record (without t, v) as text */
	int done;
	int run;        /* the run it waits on */
	int watch_end;  /* give up when that run ends (its change never comes) */
	int ended;      /* it ended with the change not applied */
	double t;
	uint64_t v;
	ctl_waiter *next;
};

/* ---- replies (control.c) -------------------------------------------------- */

static inline void
reply_json(ctl_reply *o, int status, json_t *j)
{
	o->status = status;
	o->json = j;
}

static inline void
reply_error(ctl_reply *o, int status, const char *code, const char *msg)
{
	reply_json(o, status, json_pack("{s:{s:s,s:s}}", "error", "code", code,
					"message", msg));
}

/* /api/v1/status of the current run (c->mu held) */
json_t *ctl_status_json(ctl *c, const run_snapshot *snap);

/* take c->mu and the current run's snapshot; with no run, a 409 and the
 * lock released (NULL) */
run_snapshot *ctl_lock_run(ctl *c, ctl_reply *o);

/* ---- finished sweeps (control_sweeps.c) ------------------------------------ */

/* /api/v1/sweeps and below; rest is the path after "/api/v1/sweeps" */
void ctl_get_sweeps(ctl *c, const char *method, const char *rest, ctl_reply *o);
/* RFC 4180 text as an array of rows (arrays of strings), the header first */
json_t *ctl_csv_rows(const char *text);

/* ---- what a run reports (control_notify.c) -------------------------------- */

/* a line on the terminal (c->term), "stalelab serve: " first */
void ctl_say(ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* log and publish a record of the current run */
void ctl_record(ctl *c, const char *name, json_t *rec);

/* the run's callbacks (ud: the ctl) */
void ctl_on_eval(void *ud, const run_eval *e);
void ctl_on_change(void *ud, double t, uint64_t v, const run_cmd *cmd);
void ctl_on_diverged(void *ud, const run_divergence *d);
void ctl_on_remote(void *ud, double t, uint64_t v, int worker, const char *what,
		   const char *host);

/* wait for a change to be applied (ctl_on_change marks it done): register
 * before it is queued, then wait (when it was queued) and unregister.
 * watch_end: stop waiting (ended) when the current run ends first, as it
 * then never applies the change (not for a recover: its run is the next) */
void ctl_waiter_add(ctl *c, ctl_waiter *w, const run_cmd *cmd, int watch_end);
void ctl_waiter_wait(ctl *c, ctl_waiter *w, int queued);

/* ---- runs and checkpoints (control_runs.c) -------------------------------- */

/* where a file a request writes is (inside the checkpoint directory, links
 * followed; nothing there yet, or a checkpoint), or an error naming field */
int ctl_ckpt_target(const ctl *c, const char *field, const char *name, char *out,
		    size_t cap, char *err);

/* the current run's summary, with its evaluation series when series is
 * set (c->mu held) */
json_t *ctl_run_summary(ctl *c, int series);

/* POST /api/v1/run, /api/v1/run/recover and /api/v1/checkpoint (body: the
 * request's JSON object; c->mu not held) */
void ctl_post_run(ctl *c, json_t *body, ctl_reply *o);
void ctl_post_recover(ctl *c, json_t *body, ctl_reply *o);
void ctl_post_checkpoint(ctl *c, json_t *body, ctl_reply *o);

#endif
