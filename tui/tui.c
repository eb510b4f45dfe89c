/* tui.c - `stalelab tui`: options, the loop, the requests to the daemon
 * and what the bus brings (docs/tui.md). The keys and the commands are
 * keys.c's, the screen draw.c's, the data view.c's, the network busc.c's. */
#include "tui.h"

#include <errno.h>
#include <getopt.h>
#include <langinfo.h>
#include <locale.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curses.h>

#include "app.h"

#define DEFAULT_URL "tcp://127.0.0.1:8471"

static const char usage[] =
	"Usage: stalelab tui [OPTIONS]\n"
	"\n"
	"The terminal front end: live staleness histograms, accuracy and loss,\n"
	"the worker table and the events of a running `stalelab serve`, with\n"
	"keys to change delays, workers, the rule and lr (press ? for them).\n"
	"It talks to the daemon's nanomsg bus only, on this host or another.\n"
	"\n"
	"Options:\n"
	"  --connect URL      the daemon's bus (PUB) URL; commands go to its\n"
	"                     sibling, port + 1 (default " DEFAULT_URL ")\n"
	"  --rep URL          commands go to URL instead (a daemon started with\n"
	"                     `serve --bus-rep URL`)\n"
	"  --token-file FILE  the daemon's token (first line of FILE); else the\n"
	"                     environment variable STALELAB_TOKEN\n"
	"  --no-color         no colours (so does a non-empty NO_COLOR)\n"
	"  --no-mouse         leave the mouse to the terminal\n"
	"  --ascii            ASCII only (the default when the locale is not UTF-8)\n"
	"  -h, --help         this text\n"
	"\n"
	"Exit status: 0 after q (or Ctrl-C), 1 no terminal (or SIGTERM: the\n"
	"terminal is restored), 2 bad usage.\n";

double
app_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int
app_nworkers(app *a)
{
	return (int)json_array_size(json_object_get(a->m.snap, "workers"));
}

json_t *
app_worker(app *a, int i)
{
	return json_array_get(json_object_get(a->m.snap, "workers"), i);
}

void
app_say(app *a, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(a->status, sizeof(a->status), fmt, ap);
	va_end(ap);
	a->status_err = err;
	a->status_at = app_now();
}

/* ---- requests -------------------------------------------------------------- */

/* queue METHOD PATH with body (stolen, may be NULL); one of a kind for the
 * fetches */
void
app_request(app *a, int kind, const char *what, const char *method, const char *path, json_t *body)
{
	if (kind != REQ_CMD)
		for (int i = 0; i < a->nq; i++)
			if (a->q[i].kind == kind) {
				json_decref(body);
				return;
			}
	if (a->nq == APP_QUEUE) {
		app_say(a, 1, "%s: too many commands waiting for the daemon", what);
		json_decref(body);
		return;
	}
	char id[48];
	snprintf(id, sizeof(id), "tui-%ld-%u", (long)getpid(), ++a->seq);
	json_t *o = json_pack("{s:s, s:s, s:s}", "id", id, "method", method, "path", path);
	if (body)
		json_object_set_new(o, "body", body);
	if (a->token[0])
		json_object_set_new(o, "token", json_string(a->token));
	app_req *r = &a->q[a->nq];
	r->kind = kind;
	snprintf(r->what, sizeof(r->what), "%s", what);
	r->text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!r->text) {
		app_say(a, 1, "%s: out of memory", what);
		return;
	}
	a->nq++;
	if (kind == REQ_CMD)
		app_say(a, 0, "%s: sent", what);
}

static void
pop(app *a)
{
	free(a->q[0].text);
	memmove(a->q, a->q + 1, (size_t)(a->nq - 1) * sizeof(app_req));
	a->nq--;
	a->inflight = 0;
}

/* the daemon's words for an error reply */
static void
error_text(json_t *reply, char *out, size_t cap)
{
	json_t *e = json_object_get(json_object_get(reply, "body"), "error");
	const char *msg = json_string_value(json_object_get(e, "message"));
	const char *text = json_string_value(json_object_get(reply, "text"));
	snprintf(out, cap, "%s", msg ? msg : text ? text : "(no message)");
}

static void
on_reply(app *a, app_req *r, json_t *reply)
{
	int status = (int)json_integer_value(json_object_get(reply, "status"));
	json_t *body = json_object_get(reply, "body");
	if (status < 200 || status > 299) {
		char msg[200];
		error_text(reply, msg, sizeof(msg));
		if (r->kind == REQ_CMD) {
			json_decref(a->pend_delay); /* + goes on from what the daemon has */
			a->pend_delay = NULL;
			/* the daemon's words; for a missing token, first where it goes */
			app_say(a, 1, "%s refused: %s%s", r->what, status != 401 ? ""
			    : a->token[0] ? "wrong token; " : "no token (--token-file or STALELAB_TOKEN); ", msg);
			tui_model_log(&a->m, "%s", a->status);
		}
		return;
	}
	if (r->kind == REQ_SCHEMA) {
		json_decref(a->schema);
		a->schema = json_incref(body);
		a->m.schema = a->schema;
	} else if (r->kind == REQ_SERIES) {
		json_t *e;
		size_t i;
		a->m.ns = 0;
		json_array_foreach(json_object_get(body, "series"), i, e)
			tui_model_eval(&a->m, e);
	} else if (r->kind == REQ_CHANGES) {
		if (json_integer_value(json_object_get(body, "run")) == a->m.run)
			tui_model_changes(&a->m, json_object_get(body, "changes"));
	} else {
		json_t *path = json_object_get(body, "path");
		json_t *applied = json_object_get(body, "applied");
		if (json_is_string(path))
			app_say(a, 0, "%s: written to %s", r->what, json_string_value(path));
		else if (json_is_false(applied))
			app_say(a, 0, "%s: accepted, not yet applied", r->what);
		else
			app_say(a, 0, "%s: done", r->what);
	}
}

/* the answer to the request in flight, its deadline, the next request */
static void
pump_requests(app *a)
{
	char *msg;
	if (a->inflight && busc_reply(a->bus, &msg)) {
		json_t *reply = json_loads(msg, 0, NULL);
		busc_free(msg);
		const char *id = json_string_value(json_object_get(reply, "id"));
		json_t *sent = json_loads(a->q[0].text, 0, NULL);
		const char *want = json_string_value(json_object_get(sent, "id"));
		if (json_is_object(reply) && (!id || !want || !strcmp(id, want))) {
			on_reply(a, &a->q[0], reply);
			pop(a);
		}
		json_decref(sent);
		json_decref(reply);
	}
	if (a->inflight && app_now() - a->sent_at > APP_REPLY_S) {
		if (a->q[0].kind == REQ_CMD)
			app_say(a, 1, "%s: no answer from the daemon in %.0f s", a->q[0].what, APP_REPLY_S);
		busc_cancel(a->bus);
		pop(a);
	}
	if (!a->inflight && a->nq) {
		if (busc_send(a->bus, a->q[0].text) < 0) {
			if (a->q[0].kind == REQ_CMD)
				app_say(a, 1, "%s: could not be sent", a->q[0].what);
			pop(a);
			return;
		}
		a->inflight = 1;
		a->sent_at = app_now();
	}
}

/* fetch what snapshots do not carry: the schema, the series so far */
void
app_resync(app *a)
{
	app_request(a, REQ_SCHEMA, "schema", "GET", "/api/v1/schema", NULL);
	if (a->m.run >= 0) {
		char path[64];
		app_request(a, REQ_SERIES, "series", "GET", "/api/v1/metrics", NULL);
		/* the changes made before this TUI connected (or while it was
		 * cut off) */
		snprintf(path, sizeof(path), "/api/v1/runs/%d/changes", a->m.run);
		app_request(a, REQ_CHANGES, "changes", "GET", path, NULL);
	}
}

static int
pump_bus(app *a)
{
	char *msg;
	int n = 0;
	while (n < 256 && busc_recv(a->bus, &msg)) {
		int r = tui_model_message(&a->m, msg);
		busc_free(msg);
		n++;
		if (r < 1)
			continue;
		if (r == 2 || !a->connected)
			app_resync(a);
		a->last_snap = app_now();
		a->connected = 1;
	}
	if (a->connected && app_now() - a->last_snap > APP_STALE_S) {
		a->connected = 0;
		a->lost_at = app_now();
		n++;
	}
	return n;
}

/* ---- the program --------------------------------------------------------------------- */

/* "stalelab tui: WHAT 'ARG'" and the --help hint; returns 2 */
static int
bad_usage(const char *what, const char *arg)
{
	char name[64];
	snprintf(name, sizeof(name), "%s", arg);
	if (name[0] == '-')
		name[strcspn(name, "=")] = 0;
	fprintf(stderr, "stalelab tui: %s '%s'\nTry 'stalelab tui --help'.\n", what, name);
	return 2;
}

static int
read_token(const char *path, char *out, size_t cap)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "stalelab tui: --token-file %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!fgets(out, (int)cap, f))
		out[0] = 0;
	fclose(f);
	out[strcspn(out, "\r\n")] = 0;
	if (!out[0]) {
		fprintf(stderr, "stalelab tui: --token-file %s: the first line is empty\n", path);
		return -1;
	}
	return 0;
}

static void
loop(app *a)
{
	double drawn = 0;
	int dirty = 1;
	while (!a->quit) {
		int ch = getch();
		if (ch != ERR) {
			keys_handle(a, ch);
			dirty = 1;
		}
		if (pump_bus(a))
			dirty = 1;
		int busy = a->inflight;
		pump_requests(a);
		if (busy != a->inflight || a->nq)
			dirty = 1;
		int n = app_nworkers(a);
		if (a->sel >= n)
			a->sel = n > 0 ? n - 1 : 0;
		double now = app_now();
		if (dirty || now - drawn > 0.5) {
			draw_all(a);
			drawn = now;
			dirty = 0;
		}
	}
}

int
cmd_tui(int argc, char **argv)
{
	static const struct option opts[] = {
		{"connect", required_argument, NULL, 'c'},
		{"rep", required_argument, NULL, 'r'},
		{"token-file", required_argument, NULL, 't'},
		{"no-color", no_argument, NULL, 'C'},
		{"no-mouse", no_argument, NULL, 'M'},
		{"ascii", no_argument, NULL, 'A'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	app a;
	memset(&a, 0, sizeof(a));
	a.url = DEFAULT_URL;
	a.color = a.mouse = 1;
	const char *token_file = NULL, *rep = NULL;
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c': a.url = optarg; break;
		case 'r': rep = optarg; break;
		case 't': token_file = optarg; break;
		case 'C': a.color = 0; break;
		case 'M': a.mouse = 0; break;
		case 'A': a.ascii = 1; break;
		case 'h': fputs(usage, stdout); return 0;
		case ':': return bad_usage("a value is needed after", argv[optind - 1]);
		default: {
			/* optopt is the short option, or a long one's value */
			const char *arg = argv[optind - 1];
			int is_long = arg[0] == '-' && arg[1] == '-';
			return bad_usage("unknown option", optopt && !is_long ? (char[]){'-', (char)optopt, 0} : arg);
		}
		}
	}
	if (optind < argc)
		return bad_usage("unexpected argument", argv[optind]);
	char err[256];
	char sib[512];
	if (busc_rep_url(a.url, rep, sib, sizeof(sib), err, sizeof(err)) < 0) {
		fprintf(stderr, "stalelab tui: %s\nTry 'stalelab tui --help'.\n", err);
		return 2;
	}
	if (token_file) {
		if (read_token(token_file, a.token, sizeof(a.token)) < 0)
			return 2;
	} else if (getenv("STALELAB_TOKEN"))
		snprintf(a.token, sizeof(a.token), "%s", getenv("STALELAB_TOKEN"));
	const char *nc = getenv("NO_COLOR");
	if (nc && *nc)
		a.color = 0;
	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		fprintf(stderr, "stalelab tui: needs a terminal (stdin and stdout)\n");
		return 1;
	}
	setlocale(LC_ALL, "");
	if (strcmp(nl_langinfo(CODESET), "UTF-8"))
		a.ascii = 1;
	a.bus = busc_open(a.url, rep, err, sizeof(err));
	if (!a.bus) {
		fprintf(stderr, "stalelab tui: %s\n", err);
		return 1;
	}
	SCREEN *scr = newterm(NULL, stdout, stdin);
	if (!scr) {
		fprintf(stderr, "stalelab tui: cannot use the terminal (TERM=%s)\n",
			getenv("TERM") ? getenv("TERM") : "");
		busc_close(a.bus);
		return 1;
	}
	tui_model_init(&a.m);
	tui_model_log(&a.m, "connecting to %s (commands to %s)", a.url, sib);
	draw_init(&a);
	loop(&a);
	endwin();
	delscreen(scr);
	for (int i = 0; i < a.nq; i++)
		free(a.q[i].text);
	busc_close(a.bus);
	tui_model_free(&a.m);
	json_decref(a.schema);
	json_decref(a.pend_delay);
	json_decref(a.form.params);
	return 0;
}
