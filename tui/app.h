/* app.h - the TUI's state between its parts: tui.c (options, the loop,
 * the requests), keys.c (the keys and the commands) and draw.c (the
 * screen). */
#ifndef SL_TUI_APP_H
#define SL_TUI_APP_H

#include <jansson.h>

#include "busc.h"
#include "view.h"

#define APP_QUEUE 16
#define APP_FORM_MAX 16
#define APP_REPLY_S 3.0   /* a command without an answer after this: "no answer" */
#define APP_STALE_S 2.0   /* no snapshot for this long: "disconnected, retrying" */

enum { REQ_CMD, REQ_SCHEMA, REQ_SERIES, REQ_CHANGES };
enum { MODE_NORMAL, MODE_PROMPT, MODE_FORM, MODE_HELP };

typedef struct app_req {
	int kind;
	char what[96];   /* what the status line calls it: "w2 delay 20 ms" */
	char *text;      /* the request's JSON */
} app_req;

typedef struct app app;

typedef struct app_form {
	char rule[32];
	json_t *params;               /* the schema's params of rule (a copy) */
	int n, sel;
	char val[APP_FORM_MAX][48];
} app_form;

struct app {
	busc *bus;
	const char *url;
	char token[256];
	int color, mouse, ascii;
	tui_model m;
	json_t *schema;
	double last_snap;          /* when the last snapshot came (0: never) */
	int connected;
	double lost_at;            /* when the snapshots stopped */
	int sel, top;              /* the selected worker row, the first shown */
	char status[256];          /* the last command's outcome */
	int status_err;
	double status_at;
	app_req q[APP_QUEUE];      /* q[0] is in flight when inflight */
	int nq, inflight;
	double sent_at;
	unsigned seq;
	char rule_tried[32], rule_tried_from[32];
	/* the delay last sent for worker pend_id: + and - go on from it until
	 * snapshots show it (a second + before the next snapshot goes one
	 * step further, not the same step again) */
	int pend_id;
	json_t *pend_delay;
	double pend_at;
	int mode;
	char prompt[64], pbuf[64];
	int plen;
	void (*pdone)(app *a, const char *text);
	int pworker;
	app_form form;
	int quit;
	int table_y, table_rows;   /* where the worker rows are (the mouse) */
};

/* draw.c */
void draw_init(app *a);
void draw_all(app *a);

/* The key table (keys.c), which draw.c's help screen and key hints read. */
typedef struct app_key {
	int keys[3];
	const char *names;   /* as the help screen spells them */
	const char *hint;    /* the status line's short hint, or NULL */
	const char *help;
	void (*act)(app *a);
} app_key;

extern const app_key app_keys[];
extern const int app_nkeys;

/* keys.c: one key (or KEY_MOUSE) as the mode takes it */
void keys_handle(app *a, int ch);

/* tui.c */
double app_now(void);
/* The selected worker's row of the snapshot, or NULL. */
json_t *app_worker(app *a, int i);
int app_nworkers(app *a);
/* the status line's message (err: shown as an error) */
void app_say(app *a, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Queue METHOD PATH with body (stolen, may be NULL) for the daemon; kind
 * REQ_CMD is a command ("WHAT: sent", then its outcome), the others
 * fetches, one of a kind at a time. */
void app_request(app *a, int kind, const char *what, const char *method, const char *path,
		 json_t *body);
/* fetch what snapshots do not carry: the schema, the series so far */
void app_resync(app *a);

#endif
