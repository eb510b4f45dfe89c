/* control.h - the daemon's control with no transport in it: one function
 * from (method, path, query, body, authorized) to (status, JSON, extra
 * headers). HTTP (serve_http.c) and the nanomsg bus (bus.c) are thin
 * transports over it; they own sockets, streaming and the token check,
 * control owns the runs (start, stop, changes, checkpoints, earlier runs,
 * the demo) and every answer (control.c and control_*.c, which share
 * control_impl.h).
 *
 * One ctl is the state of one daemon; nothing here is global. */
#ifndef SL_CONTROL_H
#define SL_CONTROL_H

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>

#include "dataset.h"
#include "demo.h"
#include "events.h"
#include "run.h"
#include "runlog.h"

/* An answer. Exactly one of json and text is set, except for replies
 * without a body. */
typedef struct ctl_reply {
	int status;
	json_t *json;       /* application/json */
	char *text;         /* malloc'd text of content type `type` */
	const char *type;
	char allow[48];     /* the Allow header (405, and every GET) */
	char location[64];  /* the Location header (201) */
} ctl_reply;

void ctl_reply_free(ctl_reply *r);

typedef struct ctl_waiter ctl_waiter;

typedef struct ctl {
	pthread_mutex_t mu; /* the current run, its data and thread */
	run *r;
	dataset_pair *data; /* read-only while runs use it */
	char data_spec[256];
	uint64_t data_seed;
	int data_ctx; /* the model's context a text set was cut for (0: images) */
	pthread_t th;
	int th_live;
	int said_device_note; /* "device auto: ..." printed once */
	int run_id;
	double started;     /* sl_now() at ctl_init */
	int runs_started;
	/* logging */
	runlog log;
	int have_log;
	int log_failed; /* a write to the log failed (said once) */
	pthread_mutex_t log_mu;
	FILE *term;         /* the terminal lines (stderr; NULL: none) */
	int verbose;        /* one line per evaluation too */
	const char *ckpt_dir;
	const char *sweeps_dir; /* --sweeps: finished sweeps served read-only (NULL: none) */
	const char *clusters_dir; /* --clusters: finished cluster simulations, read-only */
	events ev;
	/* PATCH waits for its change to be applied, to answer with t and v */
	pthread_mutex_t wait_mu;
	pthread_cond_t wait_cv;
	ctl_waiter *waiters;
	int ended_run;      /* the id of the last run that ended (its final record) */
	/* the demo */
	demo demo;
	int demo_on;
	int demo_scene, demo_loop;
	pthread_t demo_th;
	int demo_live;
	json_t *past; /* earlier runs: summaries, series and changes */
	/* the current run's changes, as logged ({"t", "v", "set", ...}), for a
	 * page or a TUI that connects after them (changes_mu: the run's
	 * thread appends) */
	pthread_mutex_t changes_mu;
	json_t *changes;
	long changes_dropped; /* past CHANGES_MAX, not kept */
} ctl;

void ctl_init(ctl *c);
/* Stop the demo and the run, free everything (the log stays open: the
 * caller closes it). */
void ctl_free(ctl *c);

/* Start cfg (+ schedule, or a checkpoint) as the current run. The new run
 * is built first: if that fails (bad model, missing data) the current run
 * goes on untouched. err names a bad field. */
int ctl_start(ctl *c, const run_config *cfg, const run_sched *sched,
	      int n_sched, const uint8_t *ckpt, size_t ckpt_len, char *err);

/* Start the demo thread (c->demo parsed). */
int ctl_demo_start(ctl *c, char *err);

/* Handle one request. method: GET HEAD POST PUT PATCH ...; path without the
 * query; query: "since=5&series=1" (NULL or "" for none); body: the
 * request body (NULL when none). Fills *out (free with ctl_reply_free). */
void ctl_handle(ctl *c, const char *method, const char *path,
		const char *query, const char *body, size_t len,
		int authorized, ctl_reply *out);

/* May a caller that gave `given` (NULL: nothing) change things, when the
 * daemon's token is `token` (NULL: none)? Compares in constant time, for
 * every transport (HTTP's Bearer, the bus's "token"). */
int ctl_token_ok(const char *token, const char *given);

/* The bodies of the mutating calls, checked as pure functions (no run, no
 * lock, no I/O; tests/fuzz/api_fuzz.c drives them). PATCH /api/v1/run and
 * /api/v1/workers/{id} bodies are cmd_from_json's (config_json.h). */
#define CTL_PATH_MAX 4096

/* A request body as a JSON object (new reference), or NULL with err
 * ("body: line 1, column 3: ..." or "body: expected a JSON object"). */
json_t *ctl_body_parse(const char *body, size_t len, char *err);

/* PUT /api/v1/workers {"count": N}: the change {"workers": N} (new
 * reference; cmd_from_json checks N), or NULL with err. */
json_t *ctl_workers_body(json_t *body, char *err);

/* POST /api/v1/checkpoint {"path": name}?: *path is the name (inside body)
 * or NULL for the default file name; 0, or <0 with err. */
int ctl_checkpoint_body(json_t *body, const char **path, char *err);

/* POST /api/v1/run: {"resume": path} alone (*resume set, inside body), or
 * a run object (a log's first record too; body loses the log's keys) to
 * *cfg over the defaults and its schedule to *sched (malloc'd, caller
 * frees). 0, or <0 with err naming the field. */
int ctl_run_body(json_t *body, run_config *cfg, run_sched **sched,
		 int *n_sched, const char **resume, char *err);

/* The SSE / bus snapshot: status, staleness and run id (NULL: no run). */
json_t *ctl_snapshot(ctl *c);

/* Write a checkpoint of the current run to path; 0, or <0 with err. */
int ctl_checkpoint(ctl *c, const char *path, size_t *bytes, uint64_t *v,
		   char *err);

/* A few lines for the terminal at shutdown: the runs served, the current
 * run's version, epoch, accuracy and staleness. */
void ctl_summary(ctl *c, FILE *f);

#endif
