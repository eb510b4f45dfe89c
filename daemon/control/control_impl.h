/* control_impl.h - what the files of the daemon's control share (never
 * included outside them; the API is control.h):
 *
 *   control.c         the route table and dispatch (ctl_handle), the index
 *                     (GET /), the GET views, PATCH and PUT changes, the
 *                     token check
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
 * A route is one row of control.c's table (ctl_route, below): the method,
 * the path's pattern, its handler, what it needs, its line in the index;
 * the handlers live in the file of their concern.
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

/* ---- the routes (control.c) ---------------------------------------------- */

typedef struct ctl_route ctl_route;

/* What a handler is given: the request, with its path's parameters taken
 * out by its row's pattern. */
typedef struct ctl_args {
	const ctl_route *route; /* the row answering */
	const char *method;  /* as sent ("HEAD" reaches a GET row's handler) */
	const char *query;   /* "since=5&series=1" (NULL or "" for none) */
	int id;              /* {id}: 0..999999; -1 where the pattern has none */
	char name[256];      /* {name} (any other word): one segment as sent,
			      * maybe empty, cut at 255 bytes: the handler
			      * checks it */
	const char *rest;    /* {word*}: the rest of the path, slashes and all
			      * ("" where the pattern has none) */
	json_t *body;        /* a change's body, a JSON object (NULL: a GET) */
	run_snapshot *snap;  /* an RT_RUN GET: the current run's (c->mu held) */
} ctl_args;

typedef void ctl_handler(ctl *c, const ctl_args *a, ctl_reply *o);

enum {
	/* needs a run: 409 no_run without one. A GET is called with c->mu
	 * held and a->snap set; a change checks its body first (a 400 comes
	 * before the 409), then takes the run itself (ctl_lock_run) */
	RT_RUN = 1 << 0,
	/* a GET of the daemon's own state (earlier runs): c->mu held */
	RT_LOCK = 1 << 1,
	/* a change whose fields are all optional: no body reads as {} */
	RT_EMPTY = 1 << 2,
	/* not an endpoint: what the rows above leave of a subtree (a {word*}
	 * pattern), answered with that subtree's 404; no line in the index,
	 * no heading in docs/api.md */
	RT_MISS = 1 << 3,
};

/* One route: one row of the table, in the index's order.
 *
 * A pattern is literal text with parameters in braces: {id} a segment
 * holding an integer below 1000000, {name} (any other word) one segment,
 * {word*} the rest of the path (last). The first row whose pattern fits a
 * path decides it; the rows of that pattern give the Allow header (a GET
 * row allows HEAD too) and the row of the request's method answers (none:
 * 405). GET / lists the rows; tests/test_control.c checks the list, the
 * 405s and docs/api.md's "## METHOD /path" headings against the table. */
struct ctl_route {
	const char *method;  /* "GET", "POST", "PUT" or "PATCH" */
	const char *path;    /* "/api/v1/workers/{id}" */
	int flags;           /* RT_* */
	ctl_handler *fn;
	const char *doc;     /* its line in the index (NULL: RT_MISS) */
};

/* the route table (*n: its rows) */
const ctl_route *ctl_routes(size_t *n);

/* a pattern as the index and docs/api.md show it: {file*} as {file} */
void ctl_route_shown(const char *pattern, char *out, size_t cap);

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
	const char *paths;     /* its endpoints below, as a 404 names them */
	/* one entry of the listing: name, what it holds */
	json_t *(*entry)(const char *name, const char *path);
	/* GET {endpoint}/{name} */
	void (*get_one)(ctl *c, const char *name, ctl_reply *o);
} ctl_shelf;

/* the root holds the marker: it is the one thing on the shelf */
int ctl_shelf_is_one(const ctl_shelf *s);
/* the path of the thing called name, or -1 (not on the shelf) */
int ctl_shelf_path(const ctl_shelf *s, const char *name, char *path, size_t cap);
/* [entry(name, path), ...] in name order; NULL: root unreadable (errno) */
json_t *ctl_shelf_list(const ctl_shelf *s);
/* The three that answer first answer 404 none_code, naming serve's
 * --flag, when the shelf has no root. */
/* ctl_shelf_path, answering 404 (miss_code, naming the listing) when the
 * name is not on the shelf */
int ctl_shelf_find(const ctl_shelf *s, const char *name, char *path, size_t cap, ctl_reply *o);
/* a path below the shelf's endpoint that names nothing: 404 not_found
 * naming its paths */
void ctl_shelf_miss(const ctl_shelf *s, ctl_reply *o);
/* the shelf's rows but its files': GET {endpoint} and {endpoint}/ (the
 * listing, {"dir": root, list_key: ctl_shelf_list}, or a 500 naming
 * --flag and why), {endpoint}/{name} (get_one), the RT_MISS row (miss) */
void ctl_shelf_get(const ctl_shelf *s, ctl *c, const ctl_args *a, ctl_reply *o);

/* ---- finished sweeps and simulations (control_sweeps.c, _clusters.c) ------- */

/* GET /api/v1/sweeps, /api/v1/sweeps/{name} and the paths below that
 * name nothing (RT_MISS): ctl_shelf_get; /api/v1/sweeps/{name}/figures/
 * {file*} */
void ctl_sweeps_get(ctl *c, const ctl_args *a, ctl_reply *o);
void ctl_sweeps_figure(ctl *c, const ctl_args *a, ctl_reply *o);
/* the same for /api/v1/clusters, and .../{name}/files/{file*} */
void ctl_clusters_get(ctl *c, const ctl_args *a, ctl_reply *o);
void ctl_clusters_file(ctl *c, const ctl_args *a, ctl_reply *o);

/* ---- what a run reports (control_notify.c) -------------------------------- */

/* a line on the terminal (c->term), "stalelab serve: " first */
void ctl_say(ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* log and publish a record of the current run */
void ctl_record(ctl *c, const char *name, json_t *rec);

/* the run's callbacks (ud: the ctl) */
void ctl_on_eval(void *ud, const run_eval *e);
void ctl_on_change(void *ud, double t, uint64_t v, const run_cmd *cmd);
void ctl_on_diverged(void *ud, const run_divergence *d);
void ctl_on_split(void *ud, double t, uint64_t v, const run_split *sp);
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

/* POST /api/v1/run, /api/v1/run/recover and /api/v1/checkpoint (a->body:
 * the request's JSON object; c->mu not held) */
void ctl_post_run(ctl *c, const ctl_args *a, ctl_reply *o);
void ctl_post_recover(ctl *c, const ctl_args *a, ctl_reply *o);
void ctl_post_checkpoint(ctl *c, const ctl_args *a, ctl_reply *o);

#endif
