/* tui.c - `stalelab tui`: options, the loop, the keys and the commands
 * (docs/tui.md). The screen is draw.c's, the data view.c's, the network
 * busc.c's. */
#include "tui.h"

#include <errno.h>
#include <getopt.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curses.h>

#include "app.h"

#define DEFAULT_URL "tcp://127.0.0.1:8471"
#define PEND_S 2.0 /* how long a delay sent counts over the snapshots' */

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

static void
say(app *a, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void
say(app *a, int err, const char *fmt, ...)
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
static void
request(app *a, int kind, const char *what, const char *method, const char *path, json_t *body)
{
	if (kind != REQ_CMD)
		for (int i = 0; i < a->nq; i++)
			if (a->q[i].kind == kind) {
				json_decref(body);
				return;
			}
	if (a->nq == APP_QUEUE) {
		say(a, 1, "%s: too many commands waiting for the daemon", what);
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
		say(a, 1, "%s: out of memory", what);
		return;
	}
	a->nq++;
	if (kind == REQ_CMD)
		say(a, 0, "%s: sent", what);
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
			say(a, 1, "%s refused: %s%s", r->what, status != 401 ? ""
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
	} else {
		json_t *path = json_object_get(body, "path");
		json_t *applied = json_object_get(body, "applied");
		if (json_is_string(path))
			say(a, 0, "%s: written to %s", r->what, json_string_value(path));
		else if (json_is_false(applied))
			say(a, 0, "%s: accepted, not yet applied", r->what);
		else
			say(a, 0, "%s: done", r->what);
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
			say(a, 1, "%s: no answer from the daemon in %.0f s", a->q[0].what, APP_REPLY_S);
		busc_cancel(a->bus);
		pop(a);
	}
	if (!a->inflight && a->nq) {
		if (busc_send(a->bus, a->q[0].text) < 0) {
			if (a->q[0].kind == REQ_CMD)
				say(a, 1, "%s: could not be sent", a->q[0].what);
			pop(a);
			return;
		}
		a->inflight = 1;
		a->sent_at = app_now();
	}
}

/* fetch what snapshots do not carry: the schema, the series so far */
static void
resync(app *a)
{
	request(a, REQ_SCHEMA, "schema", "GET", "/api/v1/schema", NULL);
	if (a->m.run >= 0)
		request(a, REQ_SERIES, "series", "GET", "/api/v1/metrics", NULL);
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
			resync(a);
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

/* ---- commands ----------------------------------------------------------------- */

static int
sel_id(app *a)
{
	json_t *w = app_worker(a, a->sel);
	if (!w) {
		say(a, 1, "no worker selected");
		return -1;
	}
	return (int)json_integer_value(json_object_get(w, "id"));
}

static void
patch_worker(app *a, int id, json_t *delay)
{
	char path[64], what[96], d[64];
	tui_delay_text(delay, 1, d, sizeof(d));
	snprintf(path, sizeof(path), "/api/v1/workers/%d", id);
	snprintf(what, sizeof(what), "w%d delay %s", id, d);
	json_decref(a->pend_delay);
	a->pend_delay = json_deep_copy(delay);
	a->pend_id = id;
	a->pend_at = app_now();
	request(a, REQ_CMD, what, "PATCH", path, json_pack("{s:o}", "delay", delay));
}

static void
delay_step(app *a, int dir)
{
	int id = sel_id(a);
	if (id < 0)
		return;
	json_t *d = json_object_get(app_worker(a, a->sel), "delay");
	if (a->pend_delay && a->pend_id == id && app_now() - a->pend_at < PEND_S)
		d = a->pend_delay;
	const char *dist = json_string_value(json_object_get(d, "dist"));
	if (dist && !strcmp(dist, "version")) {
		long long s = json_integer_value(json_object_get(d, "s")) + dir;
		patch_worker(a, id, json_pack("{s:s, s:I}", "dist", "version", "s", s < 0 ? 0 : s));
		return;
	}
	double ms = json_number_value(json_object_get(d, "mean_ms"));
	if (!dist || !strcmp(dist, "none")) {
		if (dir < 0) {
			say(a, 1, "w%d has no delay to lower", id);
			return;
		}
		patch_worker(a, id, json_pack("{s:s, s:f}", "dist", "const", "mean_ms", tui_delay_step(0, 1)));
		return;
	}
	patch_worker(a, id, json_pack("{s:s, s:f}", "dist", dist, "mean_ms", tui_delay_step(ms, dir)));
}

static void act_up(app *a) { if (a->sel > 0) a->sel--; }
static void act_down(app *a) { if (a->sel + 1 < app_nworkers(a)) a->sel++; }
static void act_plus(app *a) { delay_step(a, 1); }
static void act_minus(app *a) { delay_step(a, -1); }

/* a whole string as a number; 0 or -1 */
static int
parse_num(const char *s, double *out)
{
	char *end;
	errno = 0;
	*out = strtod(s, &end);
	return *s && !*end && !errno && isfinite(*out) ? 0 : -1;
}

static void
prompt(app *a, const char *title, void (*done)(app *a, const char *text))
{
	snprintf(a->prompt, sizeof(a->prompt), "%s", title);
	a->pbuf[0] = 0;
	a->plen = 0;
	a->pdone = done;
	a->mode = MODE_PROMPT;
}

static void
delay_typed(app *a, const char *text)
{
	double ms;
	if (parse_num(text, &ms) < 0) {
		say(a, 1, "delay: not a number: '%s'", text);
		return;
	}
	json_t *w = NULL;
	for (int i = 0; i < app_nworkers(a); i++)
		if (json_integer_value(json_object_get(app_worker(a, i), "id")) == a->pworker)
			w = app_worker(a, i);
	const char *dist = json_string_value(json_object_get(json_object_get(w, "delay"), "dist"));
	if (!dist || !strcmp(dist, "none") || !strcmp(dist, "version"))
		dist = "const";
	patch_worker(a, a->pworker, json_pack("{s:s, s:f}", "dist", dist, "mean_ms", ms));
}

static void
act_delay(app *a)
{
	int id = sel_id(a);
	if (id < 0)
		return;
	char title[64];
	snprintf(title, sizeof(title), "w%d mean delay (ms): ", id);
	a->pworker = id;
	prompt(a, title, delay_typed);
}

static void
set_count(app *a, int n)
{
	char what[64];
	if (!a->m.snap) {
		say(a, 1, "no run to change");
		return;
	}
	snprintf(what, sizeof(what), "workers %d", n);
	request(a, REQ_CMD, what, "PUT", "/api/v1/workers", json_pack("{s:i}", "count", n));
}

static void act_add(app *a) { set_count(a, app_nworkers(a) + 1); }
static void act_remove(app *a) { set_count(a, app_nworkers(a) - 1); }

/* a rule's name in the schema ("" when it has none) */
static const char *
rule_name(json_t *r)
{
	const char *s = json_string_value(json_object_get(r, "name"));
	return s ? s : "";
}

static const char *
cur_rule(app *a)
{
	const char *r = json_string_value(json_object_get(a->m.snap, "rule"));
	return r ? r : "";
}

static void
act_rule(app *a)
{
	json_t *rules = json_object_get(a->schema, "rules");
	size_t n = json_array_size(rules);
	if (!n) {
		say(a, 1, "rule: the schema has not come yet");
		resync(a);
		return;
	}
	/* after a refused rule, go on from it rather than stick on it */
	const char *from = cur_rule(a);
	if (!strcmp(from, a->rule_tried_from) && a->rule_tried[0])
		from = a->rule_tried;
	size_t i = 0;
	for (; i < n; i++)
		if (!strcmp(rule_name(json_array_get(rules, i)), from))
			break;
	const char *next = rule_name(json_array_get(rules, (i + 1) % n));
	snprintf(a->rule_tried, sizeof(a->rule_tried), "%s", next);
	snprintf(a->rule_tried_from, sizeof(a->rule_tried_from), "%s", cur_rule(a));
	char what[64];
	snprintf(what, sizeof(what), "rule %s", next);
	request(a, REQ_CMD, what, "PATCH", "/api/v1/run", json_pack("{s:s}", "rule", next));
}

/* the schema's entry of rule */
static json_t *
schema_rule(app *a, const char *rule)
{
	json_t *r;
	size_t i;
	json_array_foreach(json_object_get(a->schema, "rules"), i, r)
		if (!strcmp(rule_name(r), rule))
			return r;
	return NULL;
}

static void
act_form(app *a)
{
	json_t *r = schema_rule(a, cur_rule(a));
	if (!r) {
		say(a, 1, "rule parameters: the schema has not come yet");
		resync(a);
		return;
	}
	app_form *f = &a->form;
	memset(f, 0, sizeof(*f));
	snprintf(f->rule, sizeof(f->rule), "%s", cur_rule(a));
	/* a copy: the schema may be fetched again while the form is open */
	f->params = json_deep_copy(json_object_get(r, "params"));
	f->n = (int)json_array_size(f->params);
	if (f->n > APP_FORM_MAX)
		f->n = APP_FORM_MAX;
	json_t *cur = json_object_get(json_object_get(a->m.snap, "config"), "rule_params");
	for (int i = 0; i < f->n; i++) {
		json_t *p = json_array_get(f->params, i);
		json_t *v = json_object_get(cur, json_string_value(json_object_get(p, "key")));
		if (!v)
			v = json_object_get(p, "default");
		char *s = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
		if (json_is_string(v))
			snprintf(f->val[i], sizeof(f->val[i]), "%s", json_string_value(v));
		else if (json_is_real(v))
			snprintf(f->val[i], sizeof(f->val[i]), "%g", json_real_value(v));
		else
			snprintf(f->val[i], sizeof(f->val[i]), "%s", s ? s : "");
		free(s);
	}
	a->mode = MODE_FORM;
}

/* the form's values as rule_params; NULL (and a message naming the key)
 * when one does not read as its type */
static json_t *
form_params(app *a)
{
	app_form *f = &a->form;
	json_t *o = json_object();
	for (int i = 0; i < f->n; i++) {
		json_t *p = json_array_get(f->params, i);
		const char *key = json_string_value(json_object_get(p, "key"));
		const char *type = json_string_value(json_object_get(p, "type"));
		const char *s = f->val[i];
		if (!key)
			continue;
		if (!type)
			type = "string";
		double d;
		json_t *v = NULL;
		if (!strcmp(type, "boolean"))
			v = !strcmp(s, "true") ? json_true() : !strcmp(s, "false") ? json_false() : NULL;
		else if (!strcmp(type, "string"))
			v = json_string(s);
		else if (parse_num(s, &d) == 0)
			v = !strcmp(type, "integer") && d == floor(d) && fabs(d) < 9e15 ? json_integer((json_int_t)d)
			    : strcmp(type, "integer") ? json_real(d) : NULL;
		if (!v) {
			say(a, 1, "%s: expected %s %s, got '%s'", key,
			    !strcmp(type, "integer") ? "an" : "a", type, s);
			json_decref(o);
			return NULL;
		}
		json_object_set_new(o, key, v);
	}
	return o;
}

static void
lr_typed(app *a, const char *text)
{
	double lr;
	char what[64];
	if (parse_num(text, &lr) < 0) {
		say(a, 1, "lr: not a number: '%s'", text);
		return;
	}
	snprintf(what, sizeof(what), "lr %g", lr);
	request(a, REQ_CMD, what, "PATCH", "/api/v1/run", json_pack("{s:f}", "lr", lr));
}

static void act_lr(app *a) { prompt(a, "lr: ", lr_typed); }

static void
act_pause(app *a)
{
	const char *st = json_string_value(json_object_get(a->m.snap, "state"));
	int paused = st && !strcmp(st, "paused");
	request(a, REQ_CMD, paused ? "resume" : "pause", "PATCH", "/api/v1/run",
		json_pack("{s:b}", "paused", !paused));
}

static void
act_ckpt(app *a)
{
	request(a, REQ_CMD, "checkpoint", "POST", "/api/v1/checkpoint", json_object());
}

static void act_help(app *a) { a->mode = MODE_HELP; }
static void act_quit(app *a) { a->quit = 1; }
static void act_redraw(app *a) { (void)a; clearok(curscr, TRUE); }

const app_key app_keys[] = {
	{{KEY_UP, 'k'}, "Up k", NULL, "select the previous worker", act_up},
	{{KEY_DOWN, 'j'}, "Down j", NULL, "select the next worker (or click its row)", act_down},
	{{'+', '='}, "+ =", "+/-delay", "raise the selected worker's delay: 1, 2, 5, 10, 20 ... ms", act_plus},
	{{'-', '_'}, "- _", NULL, "lower the selected worker's delay, the same steps", act_minus},
	{{'d'}, "d", NULL, "type the selected worker's mean delay in ms", act_delay},
	{{'a'}, "a", "a/x workers", "add a worker", act_add},
	{{'x'}, "x", NULL, "remove the last worker", act_remove},
	{{'r'}, "r", "r rule", "switch to the next rule", act_rule},
	{{'R'}, "R", NULL, "the current rule's parameters (a form)", act_form},
	{{'l'}, "l", "l lr", "type the learning rate", act_lr},
	{{'p'}, "p", "p pause", "pause or resume the run", act_pause},
	{{'c'}, "c", "c ckpt", "write a checkpoint (the daemon's --checkpoint-dir)", act_ckpt},
	{{'?', KEY_F(1), 'h'}, "? F1 h", "? help", "this help", act_help},
	{{12}, "Ctrl-L", NULL, "redraw the screen", act_redraw},
	{{'q', KEY_F(10), 3}, "q F10 ^C", "q quit", "quit", act_quit},
};
const int app_nkeys = sizeof(app_keys) / sizeof(app_keys[0]);

/* ---- input ------------------------------------------------------------------------ */

static int
is_backspace(int ch)
{
	return ch == KEY_BACKSPACE || ch == 127 || ch == 8;
}

/* a line editor's key: 1 when it ended the line (Enter or Esc) */
static int
edit_key(char *buf, size_t cap, int ch)
{
	size_t n = strlen(buf);
	if (is_backspace(ch)) {
		if (n)
			buf[n - 1] = 0;
	} else if (ch >= 32 && ch < 127 && n + 1 < cap) {
		buf[n] = (char)ch;
		buf[n + 1] = 0;
	}
	return ch == '\n' || ch == '\r' || ch == KEY_ENTER || ch == 27;
}

static void
form_close(app *a)
{
	json_decref(a->form.params);
	a->form.params = NULL;
	a->form.n = 0;
	a->mode = MODE_NORMAL;
}

static void
form_key(app *a, int ch)
{
	app_form *f = &a->form;
	if (ch == 27) {
		form_close(a);
		return;
	}
	if (ch == KEY_UP || ch == KEY_BTAB) {
		f->sel = f->sel > 0 ? f->sel - 1 : 0;
		return;
	}
	if (ch == KEY_DOWN || ch == '\t') {
		if (f->sel + 1 < f->n)
			f->sel++;
		return;
	}
	if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
		json_t *rp = f->n ? form_params(a) : NULL;
		char what[64];
		snprintf(what, sizeof(what), "%s parameters", f->rule);
		form_close(a);
		if (rp)
			request(a, REQ_CMD, what, "PATCH", "/api/v1/run", json_pack("{s:o}", "rule_params", rp));
		return;
	}
	if (f->n)
		edit_key(f->val[f->sel], sizeof(f->val[f->sel]), ch);
}

static void
mouse_key(app *a)
{
	MEVENT ev;
	if (getmouse(&ev) != OK || !(ev.bstate & (BUTTON1_CLICKED | BUTTON1_PRESSED | BUTTON1_RELEASED)))
		return;
	int row = ev.y - a->table_y;
	if (row >= 0 && row < a->table_rows && a->top + row < app_nworkers(a))
		a->sel = a->top + row;
}

static void
key(app *a, int ch)
{
	if (ch == KEY_RESIZE)
		return;
	if (a->mode == MODE_HELP) {
		a->mode = MODE_NORMAL;
		if (ch != 'q' && ch != KEY_F(10))
			return;
	}
	if (a->mode == MODE_PROMPT) {
		if (edit_key(a->pbuf, sizeof(a->pbuf), ch)) {
			a->mode = MODE_NORMAL;
			if (ch != 27 && a->pbuf[0])
				a->pdone(a, a->pbuf);
		}
		return;
	}
	if (a->mode == MODE_FORM) {
		form_key(a, ch);
		return;
	}
	if (ch == KEY_MOUSE) {
		mouse_key(a);
		return;
	}
	for (int i = 0; i < app_nkeys; i++)
		for (int k = 0; k < 3 && app_keys[i].keys[k]; k++)
			if (app_keys[i].keys[k] == ch) {
				app_keys[i].act(a);
				return;
			}
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
			key(a, ch);
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
	const char *token_file = NULL;
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c': a.url = optarg; break;
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
	if (busc_sibling(a.url, sib, sizeof(sib), err, sizeof(err)) < 0) {
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
	a.bus = busc_open(a.url, err, sizeof(err));
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
