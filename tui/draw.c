/* draw.c - the TUI's screen: header, staleness histograms, sparklines,
 * worker table, events, status line; the help screen and the rule form
 * over it. Every row and column is computed from LINES and COLS on each
 * draw, so a resize is one more draw. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include <curses.h>

#include "app.h"

enum { C_BAR = 1, C_WIN, C_ERR, C_MARK, C_TITLE, C_OK };

static const wchar_t blocks[] = L" \u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588";
static const char ascii_blocks[] = " .:-=+*%#";

void
draw_init(app *a)
{
	/* raw: Ctrl-C is a key (q's), not a signal; SIGINT or SIGTERM from
	 * kill meet curses' own handler, which restores the terminal */
	raw();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	timeout(50);
	set_escdelay(25);
	curs_set(0);
	if (a->color && has_colors()) {
		start_color();
		use_default_colors();
		init_pair(C_BAR, COLOR_GREEN, -1);
		init_pair(C_WIN, COLOR_CYAN, -1);
		init_pair(C_ERR, COLOR_RED, -1);
		init_pair(C_MARK, COLOR_YELLOW, -1);
		init_pair(C_TITLE, COLOR_BLUE, -1);
		init_pair(C_OK, COLOR_GREEN, -1);
	} else
		a->color = 0;
	if (a->mouse) {
		mouseinterval(0);
		mousemask(BUTTON1_CLICKED | BUTTON1_PRESSED, NULL);
	}
}

static attr_t
col(app *a, int pair)
{
	return a->color ? COLOR_PAIR(pair) : A_NORMAL;
}

/* text at (y, x), clipped to the screen's width */
static int
put(int y, int x, attr_t at, const char *s)
{
	if (y < 0 || y >= LINES || x >= COLS)
		return x;
	int n = (int)strlen(s);
	if (n > COLS - x)
		n = COLS - x;
	attron(at);
	mvaddnstr(y, x, s, n);
	attroff(at);
	return x + n;
}

static int
putf(int y, int x, attr_t at, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int
putf(int y, int x, attr_t at, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return put(y, x, at, buf);
}

/* a block of level 0..8 (eighths of a cell), or its ASCII stand-in */
static void
block(app *a, int y, int x, int level, attr_t at)
{
	if (y < 0 || y >= LINES || x < 0 || x >= COLS)
		return;
	attron(at);
	if (a->ascii)
		mvaddch(y, x, (chtype)ascii_blocks[level]);
	else
		mvaddnwstr(y, x, &blocks[level], 1);
	attroff(at);
}

static void
rule_line(app *a, int y, int x, int w)
{
	for (int i = 0; i < w && x + i < COLS; i++) {
		if (a->ascii)
			mvaddch(y, x + i, '-');
		else
			mvaddnwstr(y, x + i, L"\u2500", 1);
	}
}

static double
num(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *
str(json_t *o, const char *k, const char *dflt)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : dflt;
}

/* ---- header ------------------------------------------------------------------ */

static void
draw_header(app *a)
{
	json_t *s = a->m.snap, *cfg = json_object_get(s, "config");
	attron(A_REVERSE);
	mvhline(0, 0, ' ', COLS);
	attroff(A_REVERSE);
	int x = put(0, 0, A_REVERSE | A_BOLD, " stalelab ");
	/* the lr the next update runs at (under an lr_schedule), and the
	 * optimiser when it is not plain sgd */
	const char *opt = str(cfg, "optimizer", "sgd");
	if (s && json_object_get(s, "run"))
		x = putf(0, x, A_REVERSE, " run %lld  %s  rule %s%s%s  lr %g  workers %d",
			 (long long)json_integer_value(json_object_get(s, "run")),
			 strcmp(str(s, "state", "?"), "waiting") ? str(s, "state", "?")
								   : "waiting for workers",
			 str(s, "rule", "?"), strcmp(opt, "sgd") ? " " : "",
			 strcmp(opt, "sgd") ? opt : "",
			 json_object_get(s, "lr_now") ? num(s, "lr_now") : num(cfg, "lr"),
			 app_nworkers(a));
	else if (s)
		x = putf(0, x, A_REVERSE, " %s: no run", str(s, "state", "idle"));
	/* on the right: the model and the URL where they fit; the
	 * disconnection always */
	char right[200];
	if (!a->connected)
		snprintf(right, sizeof(right), "disconnected, retrying %s ", a->url);
	else
		snprintf(right, sizeof(right), "%s  %s ", str(cfg, "model", ""), a->url);
	if (a->connected && x + 1 + (int)strlen(right) > COLS)
		snprintf(right, sizeof(right), "%s ", a->url);
	int rx = COLS - (int)strlen(right);
	if (!a->connected && rx < 0)
		rx = 0;
	if (rx >= x + 2 || !a->connected)
		put(0, rx, A_REVERSE | (a->connected ? 0 : A_BOLD | col(a, C_ERR)), right);
	if (!s)
		return;
	/* the facts, most wanted first, as many as fit whole */
	char item[8][64];
	int k = 0;
	double acc = num(s, "test_acc"), best = num(s, "best_acc"), loss = num(s, "train_loss");
	if (!(best > 0)) /* no evaluation yet: nothing measured */
		acc = best = NAN;
	snprintf(item[k++], 64, " v %.0f", num(s, "version"));
	snprintf(item[k++], 64, "  epoch %.2f", num(s, "epoch"));
	/* a language model: the next-token accuracy, called that, and the
	 * held-out perplexity */
	int lm = json_is_true(json_object_get(s, "language_model"));
	if (isfinite(acc) && lm)
		snprintf(item[k++], 64, "  next-token acc %.4f  ppl %.2f", acc, num(s, "test_ppl"));
	else if (isfinite(acc))
		snprintf(item[k++], 64, "  acc %.4f", acc);
	if (isfinite(loss))
		snprintf(item[k++], 64, "  loss %.4f", loss);
	if (isfinite(num(s, "staleness_mean")))
		snprintf(item[k++], 64, "  staleness %.2f", num(s, "staleness_mean"));
	/* now (the rate window), the run's average beside it */
	if (isfinite(num(s, "samples_per_s")) && isfinite(num(s, "samples_per_s_avg")))
		snprintf(item[k++], 64, "  %.0f samples/s (avg %.0f)", num(s, "samples_per_s"),
			 num(s, "samples_per_s_avg"));
	else if (isfinite(num(s, "samples_per_s")))
		snprintf(item[k++], 64, "  %.0f samples/s", num(s, "samples_per_s"));
	if (isfinite(best))
		snprintf(item[k++], 64, "  best %.4f", best);
	snprintf(item[k++], 64, "  %s %s", str(s, "clock", ""), str(s, "device", ""));
	x = 0;
	for (int i = 0; i < k && x + (int)strlen(item[i]) <= COLS; i++)
		x = put(1, x, i == 2 ? A_BOLD : A_NORMAL, item[i]);
}

/* ---- histograms ------------------------------------------------------------------ */

/* the buckets worth showing: up to the last non-empty one of the
 * cumulative histogram, at least 16 */
static int
hist_span(json_t *st)
{
	json_t *h = json_object_get(json_object_get(st, "overall"), "hist");
	int n = (int)json_array_size(h), last = 0;
	for (int i = 0; i < n; i++)
		if (json_number_value(json_array_get(h, i)) > 0)
			last = i;
	n = last + 1 < 16 ? 16 : last + 1;
	int all = (int)json_array_size(h);
	return n > all ? all : n;
}

static void
draw_hist(app *a, int y, int x, int w, int rows, json_t *h, int span, const char *title, int pair,
	  const char *unit)
{
	double counts[128];
	int eighths[128], per;
	json_t *hist = json_object_get(h, "hist");
	int n = span < 128 ? span : 128;
	for (int i = 0; i < n; i++)
		counts[i] = json_number_value(json_array_get(hist, i));
	/* the title, then each figure that fits whole */
	char fig[4][32];
	snprintf(fig[0], sizeof(fig[0]), " mean %.2f", num(h, "mean"));
	snprintf(fig[1], sizeof(fig[1]), " p99 %.0f", num(h, "p99"));
	snprintf(fig[2], sizeof(fig[2]), " max %.0f", num(h, "max"));
	snprintf(fig[3], sizeof(fig[3]), " n %.0f", num(h, "count"));
	int tx = put(y, x, A_BOLD | col(a, C_TITLE), title);
	for (int i = 0; i < 4 && json_is_object(h); i++)
		if (tx + (int)strlen(fig[i]) <= x + w)
			tx = put(y, tx, col(a, C_TITLE), fig[i]);
	int total = (int)json_array_size(hist);
	if (!total) {
		put(y + 1, x, A_DIM, "(no updates yet)");
		return;
	}
	/* more buckets than columns: the last bar holds the rest (the head
	 * of the distribution keeps one bar per value) */
	int folded = n > w && w >= 2;
	if (folded) {
		for (int i = w; i < n; i++)
			counts[w - 1] += counts[i];
		n = w;
	}
	/* bw cells a bucket where there is room (a gap after each from 3) */
	int bw = n > 0 && w / n > 1 ? (w / n > 3 ? 3 : w / n) : 1, fill = bw > 2 ? bw - 1 : bw;
	int cols = tui_bars(counts, n, w / bw, rows, eighths, &per);
	for (int c = 0; c < cols; c++)
		for (int r = 0; r < rows; r++) {
			int e = eighths[c] - r * 8; /* r counts from the bottom */
			for (int f = 0; f < fill && e > 0; f++)
				block(a, y + rows - r, x + c * bw + f, e > 8 ? 8 : e, col(a, pair));
		}
	cols *= bw;
	/* the axis: 0 under the first bar, the last bucket under the last,
	 * with a + when that bar holds the rest (folded, or the daemon's
	 * overflow bucket) */
	char last[16];
	int lastb = cols / bw * per - 1;
	if (lastb >= total - 1)
		snprintf(last, sizeof(last), "%d+", total - 1);
	else
		snprintf(last, sizeof(last), folded ? "%d+" : "%d", lastb);
	put(y + rows + 1, x, A_DIM, "0");
	int ux = x + 2; /* then what the staleness counts, where it fits */
	if (per > 1)
		ux = putf(y + rows + 1, x + 2, A_DIM, "(%d a column)", per) + 1;
	int lx = x + cols - (int)strlen(last);
	if (*unit && ux + (int)strlen(unit) < lx - 1)
		put(y + rows + 1, ux, A_DIM, unit);
	if (lx > x + 1)
		put(y + rows + 1, lx, A_DIM, last);
}

/* ---- sparklines ------------------------------------------------------------------- */

static void
draw_spark(app *a, int y, const char *label, const double *v, int first, int n, double now_val)
{
	int w = COLS - 16;
	put(y, 0, A_BOLD, label);
	double lo = INFINITY, hi = -INFINITY;
	for (int i = first; i < n; i++)
		if (isfinite(v[i])) {
			lo = fmin(lo, v[i]);
			hi = fmax(hi, v[i]);
		}
	for (int i = first; i < n && i - first < w; i++)
		if (isfinite(v[i]))
			block(a, y, 6 + i - first, tui_spark_level(v[i], lo, hi), col(a, C_BAR));
	if (isfinite(now_val))
		putf(y, COLS - 9, A_NORMAL, "%.4f", now_val);
}

/* the change markers under the sparklines: at the first evaluation at or
 * after the change's version */
static void
draw_marks(app *a, int y, int first, int n)
{
	int w = COLS - 16;
	put(y, 0, A_DIM, "chg");
	for (int k = 0; k < a->m.nmarks; k++) {
		int i = first;
		while (i < n && a->m.sv[i] < a->m.marks[k])
			i++;
		if (i == first && (first == 0 ? 0 : a->m.sv[first - 1] >= a->m.marks[k]))
			continue; /* before what is shown */
		if (i - first < w) {
			attron(col(a, C_MARK) | A_BOLD);
			if (a->ascii)
				mvaddch(y, 6 + i - first, '^');
			else
				mvaddnwstr(y, 6 + i - first, L"\u25b2", 1);
			attroff(col(a, C_MARK) | A_BOLD);
		}
	}
}

/* ---- the worker table -------------------------------------------------------------- */

static void
draw_table(app *a, int y, int rows)
{
	attron(A_BOLD | A_UNDERLINE);
	mvhline(y, 0, ' ', COLS);
	put(y, 0, A_BOLD | A_UNDERLINE,
	    "  id state    delay                where   spb   H      iters   stale  samples/s   mem");
	attroff(A_BOLD | A_UNDERLINE);
	int n = app_nworkers(a);
	if (a->sel < a->top)
		a->top = a->sel;
	if (a->sel >= a->top + rows)
		a->top = a->sel - rows + 1;
	if (a->top > n - rows)
		a->top = n - rows > 0 ? n - rows : 0;
	a->table_y = y + 1;
	a->table_rows = rows;
	for (int r = 0; r < rows && a->top + r < n; r++) {
		int i = a->top + r;
		json_t *w = app_worker(a, i), *d = json_object_get(w, "delay");
		char delay[64];
		tui_delay_text(d, 0, delay, sizeof(delay));
		char line[256], rtt[24] = "", mem[16], h[16] = "-";
		tui_bytes_text(num(w, "mem_bytes"), mem, sizeof(mem));
		if (json_is_integer(json_object_get(w, "h"))) /* a rule with local phases */
			snprintf(h, sizeof(h), "%lld", (long long)json_integer_value(json_object_get(w, "h")));
		int remote = json_is_true(json_object_get(w, "remote")); /* stalelab worker */
		if (remote && num(w, "rtt_ms") > 0) /* its link's round trip */
			snprintf(rtt, sizeof(rtt), " %.2f ms", num(w, "rtt_ms"));
		snprintf(line, sizeof(line), "%c%3lld %-8.8s %-20.20s %-7.7s %3lld %3.3s %10.0f %7.2f %10.0f %5s%s%.40s%s",
			 i == a->sel ? '>' : ' ', (long long)json_integer_value(json_object_get(w, "id")),
			 str(w, "state", "?"), delay, str(d, "where", "worker"),
			 (long long)json_integer_value(json_object_get(w, "spb_depth")), h,
			 num(w, "iterations"), num(w, "staleness_mean"), num(w, "samples_per_s"), mem,
			 remote ? "  @" : "", remote ? str(w, "host", "?") : "", rtt);
		attr_t at = i == a->sel ? A_REVERSE : A_NORMAL;
		if (i == a->sel) {
			attron(at);
			mvhline(y + 1 + r, 0, ' ', COLS);
			attroff(at);
		}
		put(y + 1 + r, 0, at, line);
	}
}

/* ---- events and the status line ------------------------------------------------------ */

static void
draw_log(app *a, int y, int rows)
{
	attron(A_DIM);
	rule_line(a, y, 0, COLS);
	attroff(A_DIM);
	put(y, 2, A_BOLD, " events ");
	for (int r = 0; r < rows - 1; r++) {
		const char *l = tui_model_log_line(&a->m, rows - 2 - r);
		if (l)
			putf(y + 1 + r, 0, A_NORMAL, " %s", l);
	}
}

static void
draw_status(app *a)
{
	int y = LINES - 1;
	move(y, 0);
	clrtoeol();
	if (a->mode == MODE_PROMPT) {
		int x = put(y, 0, A_BOLD, a->prompt);
		x = put(y, x, A_NORMAL, a->pbuf);
		put(y, x, A_REVERSE, " ");
		put(y, x + 2, A_DIM, "(Enter sets, Esc cancels)");
		return;
	}
	int x = 0;
	double age = app_now() - a->status_at;
	if (!a->connected && (!a->status[0] || a->status_at < a->lost_at))
		x = put(y, 0, A_BOLD | col(a, C_ERR), "disconnected, retrying") + 2;
	else if (a->status[0] && (a->status_err ? age < 30 : age < 8)) {
		attr_t at = a->status_err ? A_BOLD | col(a, C_ERR) : col(a, C_OK);
		int len = (int)strlen(a->status);
		if (len > COLS && LINES > 2 && COLS > 0) {
			/* too long for one line: the line above too, so the daemon's
			 * words are read whole on 80 columns */
			move(y - 1, 0);
			clrtoeol();
			put(y - 1, 0, at, a->status);
			put(y, 0, at, a->status + COLS);
			return;
		}
		x = put(y, 0, at, a->status) + 2;
	}
	if (a->inflight && x < COLS)
		x = put(y, x, A_DIM, "(waiting) ");
	/* the hints: as many as fit, the table's last ones (help, quit)
	 * first, drawn in the table's order */
	int fit[32], room = COLS - x, nk = app_nkeys < 32 ? app_nkeys : 32;
	for (int i = nk - 1; i >= 0; i--) {
		const char *h = app_keys[i].hint;
		fit[i] = h && room >= (int)strlen(h) + 1;
		if (fit[i])
			room -= (int)strlen(h) + 1;
	}
	for (int i = 0; i < nk; i++)
		if (fit[i])
			x = put(y, x, A_DIM, app_keys[i].hint) + 1;
}

/* ---- overlays --------------------------------------------------------------------------- */

/* a cleared box with a frame: w columns, h rows at (y, x) */
static void
box_at(app *a, int y, int x, int h, int w)
{
	static const wchar_t *frame[] = {L"\u250c", L"\u2510", L"\u2514", L"\u2518", L"\u2500", L"\u2502"};
	static const char ascii_frame[] = "++++-|";
	for (int r = 0; r < h; r++)
		for (int c = 0; c < w; c++) {
			int top = r == 0, bot = r == h - 1, lft = c == 0, rgt = c == w - 1;
			int k = top && lft ? 0 : top && rgt ? 1 : bot && lft ? 2 : bot && rgt ? 3
				: top || bot ? 4 : lft || rgt ? 5 : -1;
			if (k < 0)
				mvaddch(y + r, x + c, ' ');
			else if (a->ascii)
				mvaddch(y + r, x + c, (chtype)ascii_frame[k]);
			else
				mvaddnwstr(y + r, x + c, frame[k], 1);
		}
}

static void
draw_help(app *a)
{
	int w = COLS < 74 ? COLS : 74, h = app_nkeys + 4;
	if (h > LINES)
		h = LINES;
	int y = (LINES - h) / 2, x = (COLS - w) / 2;
	box_at(a, y, x, h, w);
	put(y, x + 2, A_BOLD, " keys (q quits, any other key closes) ");
	for (int i = 0; i < app_nkeys && 1 + i < h - 2; i++) {
		putf(y + 1 + i, x + 2, A_BOLD, "%-8s", app_keys[i].names);
		char line[160];
		snprintf(line, sizeof(line), "%.*s", w - 13 > 0 ? w - 13 : 0, app_keys[i].help);
		put(y + 1 + i, x + 11, A_NORMAL, line);
	}
	if (h >= app_nkeys + 4)
		put(y + h - 2, x + 2, A_DIM, "A click on a worker row selects it.");
}

static void
draw_form(app *a)
{
	app_form *f = &a->form;
	int w = COLS < 74 ? COLS : 74, h = f->n ? f->n + 4 : 3;
	if (h > LINES)
		h = LINES;
	int y = (LINES - h) / 2, x = (COLS - w) / 2;
	box_at(a, y, x, h, w);
	putf(y, x + 2, A_BOLD, " rule %s: parameters ", f->rule);
	if (!f->n)
		putf(y + 1, x + 2, A_NORMAL, "%s reads no parameters (Enter or Esc closes)", f->rule);
	for (int i = 0; i < f->n && 1 + i < h - 2; i++) {
		json_t *p = json_array_get(f->params, i);
		attr_t at = i == f->sel ? A_REVERSE : A_NORMAL;
		putf(y + 1 + i, x + 2, A_BOLD, "%-9.9s", str(p, "key", "?"));
		putf(y + 1 + i, x + 12, at, "%-14.14s", f->val[i]);
		char doc[160];
		snprintf(doc, sizeof(doc), "%s", str(p, "doc", ""));
		if (w - 29 > 0 && (int)strlen(doc) > w - 29)
			doc[w - 29] = 0;
		put(y + 1 + i, x + 27, A_DIM, doc);
	}
	if (f->n && h >= f->n + 4)
		put(y + h - 2, x + 2, A_DIM, "Up/Down move, type to edit, Enter applies, Esc cancels");
}

/* ---- layout -------------------------------------------------------------------------- */

/* rows for each part, most needed first, from the lines there are */
typedef struct layout {
	int hist, spark, marks, table, log;
} layout;

static layout
plan(int lines, int nw)
{
	layout l = {0, 0, 0, 0, 0};
	int left = lines - 3; /* header (2) and status */
	int want = nw < 1 ? 1 : nw;
#define TAKE(field, n) do { if (left >= (n)) { l.field += (n); left -= (n); } } while (0)
	TAKE(table, 1 + (want < 3 ? want : 3));   /* header and three rows */
	TAKE(hist, 4);                            /* title, 2 bar rows, axis */
	TAKE(spark, 2);
	TAKE(log, 3);                             /* rule and two lines */
	if (l.spark)
		TAKE(marks, 1);
	while (left > 0 && l.table && l.table < 1 + want) {
		l.table++;
		left--;
	}
	while (left > 0 && l.hist && l.hist < 8) {
		l.hist++;
		left--;
	}
	while (left > 0 && l.log && l.log < 12) {
		l.log++;
		left--;
	}
	while (left > 0 && l.table) {
		l.table++;
		left--;
	}
#undef TAKE
	return l;
}

void
draw_all(app *a)
{
	erase();
	draw_header(a);
	json_t *s = a->m.snap, *st = json_object_get(s, "staleness");
	layout l = plan(LINES, app_nworkers(a));
	int y = 2;
	if (!json_object_get(s, "run")) {
		/* nothing to draw but the wait and the events */
		put(3, 2, A_BOLD, s ? "The daemon has no run: start one (POST /api/v1/run)."
				    : "Waiting for the daemon's first snapshot.");
		l.hist = l.spark = l.marks = 0;
		l.table = 1;
		y = 5;
	}
	if (l.hist) {
		int span = hist_span(st), rows = l.hist - 2;
		/* "versions", "local steps", "outer versions" (async-diloco) */
		const char *unit = str(s, "staleness_unit", "");
		if (COLS >= 60) {
			int w = (COLS - 3) / 2;
			draw_hist(a, y, 1, w, rows, json_object_get(st, "window"), span, "last 5 s:", C_WIN,
				  unit);
			draw_hist(a, y, w + 3, COLS - w - 4, rows, json_object_get(st, "overall"), span,
				  "cumulative:", C_BAR, unit);
		} else
			draw_hist(a, y, 1, COLS - 2, rows, json_object_get(st, "window"), span, "last 5 s:",
				  C_WIN, unit);
		y += l.hist;
	}
	int n = a->m.ns, w = COLS - 16 > 1 ? COLS - 16 : 1, first = n > w ? n - w : 0;
	if (l.spark) {
		draw_spark(a, y, json_is_true(json_object_get(s, "language_model")) ? "ntok" : "acc",
			   a->m.sacc, first, n, num(s, "test_acc"));
		draw_spark(a, y + 1, "loss", a->m.sloss, first, n, num(s, "train_loss"));
		y += l.spark;
	}
	if (l.marks) {
		draw_marks(a, y, first, n);
		y += l.marks;
	}
	if (l.table) {
		draw_table(a, y, l.table - 1);
		y += l.table;
	}
	if (l.log)
		draw_log(a, y, l.log);
	draw_status(a);
	if (a->mode == MODE_HELP)
		draw_help(a);
	else if (a->mode == MODE_FORM)
		draw_form(a);
	refresh();
}
