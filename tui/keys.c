/* keys.c - the TUI's keys: the key table (keys and help) and the commands
 * they send, the prompt, the rule parameters' form, the mouse. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curses.h>

#include "app.h"

#define PEND_S 2.0 /* how long a delay sent counts over the snapshots' */

/* ---- commands ----------------------------------------------------------------- */

static int
sel_id(app *a)
{
	json_t *w = app_worker(a, a->sel);
	if (!w) {
		app_say(a, 1, "no worker selected");
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
	app_request(a, REQ_CMD, what, "PATCH", path, json_pack("{s:o}", "delay", delay));
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
			app_say(a, 1, "w%d has no delay to lower", id);
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
		app_say(a, 1, "delay: not a number: '%s'", text);
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
		app_say(a, 1, "no run to change");
		return;
	}
	snprintf(what, sizeof(what), "workers %d", n);
	app_request(a, REQ_CMD, what, "PUT", "/api/v1/workers", json_pack("{s:i}", "count", n));
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
		app_say(a, 1, "rule: the schema has not come yet");
		app_resync(a);
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
	app_request(a, REQ_CMD, what, "PATCH", "/api/v1/run", json_pack("{s:s}", "rule", next));
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
		app_say(a, 1, "rule parameters: the schema has not come yet");
		app_resync(a);
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
			app_say(a, 1, "%s: expected %s %s, got '%s'", key,
			    !strcmp(type, "integer") ? "an" : "a", type, s);
			json_decref(o);
			return NULL;
		}
		json_object_set_new(o, key, v);
	}
	return o;
}

static int
run_diverged(app *a)
{
	const char *st = json_string_value(json_object_get(a->m.snap, "state"));
	return st && !strcmp(st, "diverged");
}

static void
lr_typed(app *a, const char *text)
{
	double lr;
	char what[64];
	if (parse_num(text, &lr) < 0) {
		app_say(a, 1, "lr: not a number: '%s'", text);
		return;
	}
	/* a diverged run takes no change: it recovers with the new lr */
	if (run_diverged(a)) {
		snprintf(what, sizeof(what), "recover with lr %g", lr);
		app_request(a, REQ_CMD, what, "POST", "/api/v1/run/recover",
			    json_pack("{s:f}", "lr", lr));
		return;
	}
	snprintf(what, sizeof(what), "lr %g", lr);
	app_request(a, REQ_CMD, what, "PATCH", "/api/v1/run", json_pack("{s:f}", "lr", lr));
}

static void
act_lr(app *a)
{
	prompt(a, run_diverged(a) ? "diverged: recover from the last good checkpoint with lr: "
				  : "lr: ",
	       lr_typed);
}

static void
act_pause(app *a)
{
	const char *st = json_string_value(json_object_get(a->m.snap, "state"));
	int paused = st && !strcmp(st, "paused");
	app_request(a, REQ_CMD, paused ? "resume" : "pause", "PATCH", "/api/v1/run",
		json_pack("{s:b}", "paused", !paused));
}

static void
act_ckpt(app *a)
{
	app_request(a, REQ_CMD, "checkpoint", "POST", "/api/v1/checkpoint", json_object());
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
	{{'l'}, "l", "l lr", "type the learning rate (a diverged run: recover with it)", act_lr},
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
		if (f->n && !rp)
			return; /* a value not of its type: said, the form stays to fix it */
		char what[64];
		snprintf(what, sizeof(what), "%s parameters", f->rule);
		form_close(a);
		if (rp)
			app_request(a, REQ_CMD, what, "PATCH", "/api/v1/run", json_pack("{s:o}", "rule_params", rp));
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

void
keys_handle(app *a, int ch)
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
