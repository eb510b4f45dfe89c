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
 *   control_files.c   files served read-only: names looked up among a
 *                     directory's entries, capped reads, CSV as JSON rows
 *   control_sweeps.c  GET /api/v1/sweeps...: finished sweeps on disk
 *   control_clusters.c GET /api/v1/clusters...: finished cluster simulations
 *
 * "c->mu held" means the caller holds the ctl's lock. */
#ifndef SL_CONTROL_IMPL_H
#define SL_CONTROL_IMPL_H

#include "control.h"

#define PAST_MAX 32 /* earlier runs kept (oldest dropped first) */
#define CHANGES_MAX 10000 /* a run's changes kept for late clients (the log has all) */

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

/* ---- files served read-only (control_files.c) ------------------------------ */

#define CTL_LIST_MAX 1000         /* entries listed from one directory */
#define CTL_FILE_MAX (64 << 20)   /* the largest file read */

/* a name we serve: [A-Za-z0-9._=-], 1..200, not starting with '.' */
int ctl_name_ok(const char *s);
/* dir/name is a regular file */
int ctl_has_file(const char *dir, const char *name);
/* the sorted names in dir that pass ctl_name_ok and keep (NULL: dir
 * unreadable, errno set) */
json_t *ctl_list_dir(const char *dir, int (*keep)(const char *dir, const char *name));
/* a whole file, NUL-terminated; NULL on error (errno) or over max */
char *ctl_slurp(const char *path, size_t max, size_t *len);
/* RFC 4180 text as an array of rows (arrays of strings), the header first */
json_t *ctl_csv_rows(const char *text);
/* {"columns": [...], "rows": [[...], ...]} of dir/name, or null */
json_t *ctl_csv_json(const char *dir, const char *name);

/* A shelf: a directory of finished things (each a directory holding the
 * marker file), or one of them (the root holds the marker: listed under
 * its base name, or fallback). */
typedef struct ctl_shelf {
	const char *root;      /* NULL: the daemon serves none */
	const char *marker;    /* "sweep.json" */
	const char *fallback;  /* the name of a root "/" */
	const char *what;      /* "sweeps", in messages */
	const char *flag;      /* "sweeps": serve's --flag */
	const char *how;       /* what DIR is, in messages */
	const char *none_code; /* the 404's code without root */
	const char *one;       /* "sweep": one thing, in messages */
	const char *miss_code; /* the 404's code for a name not on the shelf */
	const char *list_key;  /* the list's key in the listing: "sweeps" */
	const char *endpoint;  /* "/api/v1/sweeps" */
} ctl_shelf;

/* the root holds the marker: it is the one thing on the shelf */
int ctl_shelf_is_one(const ctl_shelf *s);
/* the path of the thing called name, or -1 (not on the shelf) */
int ctl_shelf_path(const ctl_shelf *s, const char *name, char *path, size_t cap);
/* the same, answering 404 (miss_code, naming the listing) when it is not */
int ctl_shelf_find(const ctl_shelf *s, const char *name, char *path, size_t cap, ctl_reply *o);
/* [entry(name, path), ...] in name order; NULL: root unreadable (errno) */
json_t *ctl_shelf_list(const ctl_shelf *s, json_t *(*entry)(const char *name, const char *path));
/* the listing, {"dir": root, list_key: ctl_shelf_list}, or a 500 naming
 * --flag and why */
void ctl_shelf_reply_list(const ctl_shelf *s, json_t *(*entry)(const char *name, const char *path),
			  ctl_reply *o);
/* a GET below a shelf's endpoint: OPTIONS, 405 and "none served" answered
 * (-1, o set); else 0 with name the first segment of rest ("" for the
 * list) and *sub what follows it ("/figures/x.svg", or NULL) */
int ctl_shelf_route(const ctl_shelf *s, const char *method, const char *rest, ctl_reply *o,
		    char *name, size_t cap, const char **sub);

/* ---- finished sweeps and simulations (control_sweeps.c, _clusters.c) ------- */

/* /api/v1/sweeps and below; rest is the path after "/api/v1/sweeps" */
void ctl_get_sweeps(ctl *c, const char *method, const char *rest, ctl_reply *o);
/* /api/v1/clusters and below; rest is the path after "/api/v1/clusters" */
void ctl_get_clusters(ctl *c, const char *method, const char *rest, ctl_reply *o);

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
/* a copy of the current run's changes (c->changes) */
json_t *ctl_changes_json(ctl *c);

/* POST /api/v1/run, /api/v1/run/recover and /api/v1/checkpoint (body: the
 * request's JSON object; c->mu not held) */
void ctl_post_run(ctl *c, json_t *body, ctl_reply *o);
void ctl_post_recover(ctl *c, json_t *body, ctl_reply *o);
void ctl_post_checkpoint(ctl *c, json_t *body, ctl_reply *o);

#endif
