/* progress.c - a run in this process as it goes (progress.h): the
 * callbacks' log records, the progress bar or lines on stderr, where the
 * log goes when stdout is the terminal, the weights' fingerprint. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "progress.h"
#include "api.h"
#include "sl.h"

static int
is_diverged(const run_eval *e)
{
	return e->final && e->stop_reason && !strcmp(e->stop_reason, "diverged");
}

/* a loss as text: NaN and infinity are the divergence they are, but a
 * training loss of NaN is a record with no step since the last (a
 * divergent step is never applied, so it is never averaged in) */
static const char *
fmt_loss(char *buf, size_t cap, double x, int train)
{
	if (isfinite(x))
		snprintf(buf, cap, "%.4f", x);
	else if (isnan(x) && train)
		snprintf(buf, cap, "-");
	else
		snprintf(buf, cap, "%s (diverged)", isnan(x) ? "nan" : "inf");
	return buf;
}

/* "m:ss" or "h:mm:ss" */
static void
fmt_clock(char *buf, size_t cap, double s)
{
	unsigned n = s > 0 && s < 360000 ? (unsigned)(s + 0.5) : 0;
	if (n >= 3600)
		snprintf(buf, cap, "%u:%02u:%02u", n / 3600, n / 60 % 60, n % 60);
	else
		snprintf(buf, cap, "%u:%02u", n / 60, n % 60);
}

/* The share of the stop reached (the first stop reached ends the run, so
 * the largest share), -1 when only target_acc (or nothing) is set; what
 * says how far, in the unit of that stop. */
static double
stop_frac(const run_ctx *c, const run_eval *e, char *what, size_t cap)
{
	double f = -1, g;
	snprintf(what, cap, "epoch %.2f  v %llu", e->epoch, (unsigned long long)e->v);
	if (c->stop_epochs > 0 && (g = e->epoch / c->stop_epochs) > f) {
		f = g;
		snprintf(what, cap, "epoch %.2f/%g", e->epoch, c->stop_epochs);
	}
	if (c->stop_steps && (g = (double)e->v / (double)c->stop_steps) > f) {
		f = g;
		snprintf(what, cap, "v %llu/%llu", (unsigned long long)e->v,
			 (unsigned long long)c->stop_steps);
	}
	/* the seconds stop counts run time on the virtual clock, training
	 * time (evaluation excluded) on the wall clock */
	double t = c->virt ? e->t : e->train_s;
	if (c->stop_seconds > 0 && (g = t / c->stop_seconds) > f) {
		f = g;
		snprintf(what, cap, "%.1f/%g %ss", t, c->stop_seconds, c->virt ? "virtual " : "");
	}
	return f > 1 ? 1 : f;
}

static int
term_cols(void)
{
	struct winsize ws;
	if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
		return ws.ws_col;
	return 80;
}

/* One line of progress, redrawn in place: how far, a bar that fills its
 * last cell when the stop is reached, the ETA, the latest loss, accuracy
 * and speed (each once there is a measurement). */
static void
draw_bar(run_ctx *c, const run_eval *e)
{
	char what[64], tail[160], loss[32], eta[48], clk[24];
	double f = stop_frac(c, e, what, sizeof(what));
	if (e->final && e->stop_reason && strcmp(e->stop_reason, "stopped") &&
	    !is_diverged(e))
		f = 1; /* the stop was reached (epochs compare to rounding) */
	double el = sl_now() - c->t0;
	eta[0] = 0;
	if (f >= 0) {
		if (c->frac0 < 0)
			c->frac0 = f;
		if (e->final) {
			fmt_clock(clk, sizeof(clk), el);
			snprintf(eta, sizeof(eta), "  in %s", clk);
		} else if (f - c->frac0 >= 0.01 && el > 0.1) {
			fmt_clock(clk, sizeof(clk), el * (1 - f) / (f - c->frac0));
			snprintf(eta, sizeof(eta), "  ETA %s", clk);
		} else {
			snprintf(eta, sizeof(eta), "  ETA -:--");
		}
	}
	int n = 0;
	tail[0] = 0;
	if (e->samples == 0) {
		n = snprintf(tail, sizeof(tail), "  starting");
	} else {
		n = snprintf(tail, sizeof(tail), "  loss %s",
			     fmt_loss(loss, sizeof(loss), e->train_loss, 1));
		if (e->lm && e->test_loss > 0 && n < (int)sizeof(tail))
			n += snprintf(tail + n, sizeof(tail) - (size_t)n, "  ppl %.4g  bpb %.3f",
				      api_ppl(e->test_loss), api_bpb(e->test_loss));
		else if (e->test_acc > 0 && n < (int)sizeof(tail))
			n += snprintf(tail + n, sizeof(tail) - (size_t)n, "  acc %.4f", e->test_acc);
		if (e->samples_per_s > 0 && n < (int)sizeof(tail))
			n += snprintf(tail + n, sizeof(tail) - (size_t)n, "  %.0f samples/s",
				      e->samples_per_s);
	}
	if (c->stop_target > 0 && n < (int)sizeof(tail))
		n += snprintf(tail + n, sizeof(tail) - (size_t)n, "  best %.4f/%g", e->best_acc,
			      c->stop_target);
	if (is_diverged(e) && n < (int)sizeof(tail))
		snprintf(tail + n, sizeof(tail) - (size_t)n, "  DIVERGED");
	char line[512], bar[64];
	bar[0] = 0;
	if (f >= 0) {
		/* the bar takes what the terminal has left, up to 30 cells */
		int rest = (int)strlen(what) + 8 + (int)strlen(eta) + (int)strlen(tail);
		int w = term_cols() - 1 - rest - 2;
		w = w > 30 ? 30 : w;
		if (w >= 5) {
			int fill = (int)(f * w + 1e-9);
			bar[0] = ' ';
			bar[1] = '[';
			for (int i = 0; i < w; i++)
				bar[2 + i] = i < fill ? '#' : '.';
			bar[2 + w] = ']';
			bar[3 + w] = 0;
		}
		snprintf(line, sizeof(line), "%s%s %3d%%%s%s", what, bar, (int)(f * 100 + 1e-9),
			 eta, tail);
	} else {
		snprintf(line, sizeof(line), "%s%s", what, tail);
	}
	int cols = term_cols();
	if ((int)strlen(line) > cols - 1)
		line[cols - 1] = 0;
	fprintf(stderr, "\r\033[K%s%s", line, e->final ? "\n" : "");
}

void
progress_on_eval(void *ud, const run_eval *e)
{
	run_ctx *c = ud;
	json_t *r = api_log_record(e);
	if (e->final) {
		/* held back: the weights' hash joins it after run_exec */
		json_decref(c->end);
		c->end = r;
	} else {
		if (runlog_write(&c->log, r) < 0)
			c->log_failed = 1;
		json_decref(r);
	}
	if (c->quiet)
		return;
	if (e->final) {
		if (c->bar)
			draw_bar(c, e);
		return;
	}
	char tl[32], vl[32], acc[96];
	/* a language model: the held-out loss per token as perplexity and
	 * bits per byte, and its accuracy called what it is */
	if (e->lm)
		snprintf(acc, sizeof(acc), "test_ppl %.4g  test_bpb %.4f  next_token_acc %.4f",
			 api_ppl(e->test_loss), api_bpb(e->test_loss), e->test_acc);
	else
		snprintf(acc, sizeof(acc), "test_acc %.4f", e->test_acc);
	fprintf(stderr,
		"%sepoch %.2f  v %llu  train_loss %s  test_loss %s  %s  "
		"staleness %.2f  %.0f samples/s\n",
		c->bar ? "\r\033[K" : "", e->epoch, (unsigned long long)e->v,
		fmt_loss(tl, sizeof(tl), e->train_loss, 1), fmt_loss(vl, sizeof(vl), e->test_loss, 0),
		acc, stale_mean(&e->stale), e->samples_per_s);
}

void
progress_on_change(void *ud, double t, uint64_t v, const run_cmd *cmd)
{
	run_ctx *c = ud;
	json_t *r = api_change_record(t, v, cmd);
	if (runlog_write(&c->log, r) < 0)
		c->log_failed = 1;
	json_decref(r);
}

void
progress_on_split(void *ud, double t, uint64_t v, const run_split *sp)
{
	run_ctx *c = ud;
	json_t *r = api_split_record(t, v, sp);
	if (runlog_write(&c->log, r) < 0)
		c->log_failed = 1;
	json_decref(r);
}

void
progress_on_diverged(void *ud, const run_divergence *d)
{
	run_ctx *c = ud;
	json_t *r = api_diverged_record(d);
	if (runlog_write(&c->log, r) < 0)
		c->log_failed = 1;
	json_decref(r);
	if (c->quiet)
		return;
	char loss[32];
	if (isfinite(d->loss))
		snprintf(loss, sizeof(loss), "%.4g", d->loss);
	else
		snprintf(loss, sizeof(loss), "%s", isnan(d->loss) ? "nan" : d->loss > 0 ? "inf" : "-inf");
	fprintf(stderr,
		"%sstalelab run: diverged at v %llu: worker %d's %s is not finite (batch loss "
		"%s, computed on v %llu); nothing of it was applied, stopping\n",
		c->bar ? "\r\033[K" : "", (unsigned long long)d->v, d->worker, d->what, loss,
		(unsigned long long)d->v_read);
}

void
progress_on_progress(void *ud, const run_eval *e)
{
	run_ctx *c = ud;
	if (c->bar)
		draw_bar(c, e);
}

/* Where the log goes: --log, else stdout, except when stdout is the
 * terminal the progress bar is drawn on; then a new file in the current
 * directory, never an existing one. */
const char *
progress_pick_log(const char *given, int bar, const char *format, char *buf, size_t cap)
{
	struct stat a, b;
	if (given || !bar || !isatty(1) || fstat(1, &a) < 0 || fstat(2, &b) < 0 ||
	    a.st_rdev != b.st_rdev)
		return given;
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	localtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	for (int i = 1; i < 100; i++) {
		if (i == 1)
			snprintf(buf, cap, "stalelab-run-%s.%s", stamp, format);
		else
			snprintf(buf, cap, "stalelab-run-%s-%d.%s", stamp, i, format);
		if (access(buf, F_OK) < 0)
			return buf;
	}
	return given;
}

int
progress_has_stop(const run_config *cfg)
{
	return cfg->stop_epochs > 0 || cfg->stop_steps || cfg->stop_seconds > 0 ||
	       cfg->stop_target_acc > 0;
}

/* FNV-1a (64 bits) of the server's weights as float32 bytes, as 16 hex
 * digits: the end record's "weights" */
int
progress_weights_hash(run *r, char *out, size_t cap)
{
	for (size_t max = (size_t)1 << 16; max <= (size_t)1 << 30; max *= 2) {
		float *w = malloc(sizeof(float) * max);
		if (!w)
			return -1;
		size_t n = run_weights(r, w, max);
		if (n) {
			uint64_t h = 0xcbf29ce484222325ULL;
			const unsigned char *p = (const unsigned char *)w;
			for (size_t i = 0; i < n * sizeof(float); i++)
				h = (h ^ p[i]) * 0x100000001b3ULL;
			free(w);
			snprintf(out, cap, "%016llx", (unsigned long long)h);
			return 0;
		}
		free(w);
	}
	return -1;
}
